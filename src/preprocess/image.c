/*
 * image.c: the image modality (modality.h, docs/preprocessing.md): its
 * configuration under "image" in preprocess.json, and the pipeline of one
 * run: decode (image_decode.h: limits, EXIF orientation, draft), gray
 * conversion, resize in float (image_ops.h), center crop, invert,
 * normalize, layout and element type.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/mem.h"
#include "base/status.h"
#include "policy/fields.h"
#include "preprocess/image_decode.h"
#include "preprocess/image_ops.h"
#include "preprocess/modality.h"

#define IMAGE_MAX_SIDE 16384               /* resize and crop sides */
#define IMAGE_MAX_BYTES_LIMIT (1u << 30)   /* the largest max_bytes */
#define IMAGE_MAX_PIXELS_LIMIT 400000000u  /* the largest max_pixels */
#define IMAGE_MAX_OUT_ELEMENTS (64u << 20) /* of one output row */

enum image_color { COLOR_RGB, COLOR_BGR, COLOR_GRAY };

struct image_cfg {
    unsigned formats; /* IMAGE_JPEG | IMAGE_PNG */
    uint32_t max_bytes, max_pixels;
    enum image_color color;
    bool exif, draft, invert, hwc;
    uint32_t resize_w, resize_h, shorter; /* resize_w/h, or shorter */
    enum image_filter filter;
    uint32_t crop_w, crop_h; /* 0: no crop */
    float scale[3], offset[3];
    enum dtype dtype;
    uint32_t channels, out_w, out_h; /* the output row */
};

static const char *const image_types[] = {"image/jpeg", "image/png", NULL};

/* ---- parse ------------------------------------------------------------- */

static int get_choice(const struct json_value *obj, const char *path, const char *key,
                      const char *const *names, int *out, struct error *err)
{
    const struct json_value *v = json_get(obj, key);
    if (!v || v->type == JSON_NULL)
        return 0;
    if (v->type == JSON_STRING)
        for (int i = 0; names[i]; i++)
            if (strcmp(v->u.str, names[i]) == 0 && strlen(names[i]) == v->len) {
                *out = i;
                return 0;
            }
    char got[48];
    fields_describe(v, got, sizeof got);
    char list[96] = "";
    for (int i = 0; names[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", i ? ", " : "",
                 names[i]);
    return error_set(err, 400, "%s.%s: expected one of %s, got %s", path, key, list, got);
}

static int parse_formats(const struct json_value *obj, struct image_cfg *c, struct error *err)
{
    const struct json_value *v = json_get(obj, "formats");
    if (!v || v->type == JSON_NULL)
        return 0;
    if (fields_check_list(v, "image.formats", 2, err) != 0)
        return ST_ERROR;
    if (v->len == 0)
        return error_set(err, 400, "image.formats: expected at least one of \"jpeg\", \"png\"");
    c->formats = 0;
    for (uint32_t i = 0; i < v->len; i++) {
        const struct json_value *f = &v->u.items[i];
        if (f->type == JSON_STRING && f->len == 4 && strcmp(f->u.str, "jpeg") == 0)
            c->formats |= IMAGE_JPEG;
        else if (f->type == JSON_STRING && f->len == 3 && strcmp(f->u.str, "png") == 0)
            c->formats |= IMAGE_PNG;
        else
            return error_set(err, 400, "image.formats[%u]: expected \"jpeg\" or \"png\"", i);
    }
    return 0;
}

static int parse_resize(const struct json_value *obj, struct image_cfg *c, struct error *err)
{
    static const char *const keys[] = {"width", "height", "shorter_side", "method", NULL};
    static const char *const methods[] = {"bilinear", "area", NULL};
    const struct json_value *v = json_get(obj, "resize");
    if (!v || v->type == JSON_NULL)
        return error_set(err, 400,
                         "image.resize: required ({\"width\", \"height\"} or "
                         "{\"shorter_side\"} with center_crop)");
    if (fields_check_object(v, "image.resize", keys, err) != 0)
        return ST_ERROR;
    int m = 0;
    if (fields_u32(v, "image.resize", "width", 1, IMAGE_MAX_SIDE, &c->resize_w, err) != 0 ||
        fields_u32(v, "image.resize", "height", 1, IMAGE_MAX_SIDE, &c->resize_h, err) != 0 ||
        fields_u32(v, "image.resize", "shorter_side", 1, IMAGE_MAX_SIDE, &c->shorter, err) != 0 ||
        get_choice(v, "image.resize", "method", methods, &m, err) != 0)
        return ST_ERROR;
    c->filter = m == 0 ? IMAGE_BILINEAR : IMAGE_BOX;
    bool exact = c->resize_w || c->resize_h;
    if (exact && c->shorter)
        return error_set(err, 400,
                         "image.resize: give width and height, or shorter_side, "
                         "not both");
    if (exact && (!c->resize_w || !c->resize_h))
        return error_set(err, 400, "image.resize: width and height go together");
    if (!exact && !c->shorter)
        return error_set(err, 400, "image.resize: expected width and height, or shorter_side");
    return 0;
}

static int parse_crop(const struct json_value *obj, struct image_cfg *c, struct error *err)
{
    static const char *const keys[] = {"width", "height", NULL};
    const struct json_value *v = json_get(obj, "center_crop");
    if (!v || v->type == JSON_NULL) {
        if (c->shorter)
            return error_set(err, 400,
                             "image.center_crop: required with resize.shorter_side "
                             "(the output size must be fixed)");
        return 0;
    }
    if (fields_check_object(v, "image.center_crop", keys, err) != 0 ||
        fields_u32(v, "image.center_crop", "width", 1, IMAGE_MAX_SIDE, &c->crop_w, err) != 0 ||
        fields_u32(v, "image.center_crop", "height", 1, IMAGE_MAX_SIDE, &c->crop_h, err) != 0)
        return ST_ERROR;
    if (!c->crop_w || !c->crop_h)
        return error_set(err, 400, "image.center_crop: expected width and height");
    uint32_t mw = c->shorter ? c->shorter : c->resize_w;
    uint32_t mh = c->shorter ? c->shorter : c->resize_h;
    if (c->crop_w > mw || c->crop_h > mh)
        return error_set(err, 400,
                         "image.center_crop: %ux%u does not fit in the resized image "
                         "(at most %ux%u)",
                         c->crop_w, c->crop_h, mw, mh);
    return 0;
}

/* n numbers of an array member, each within lo..hi. */
static int get_floats(const struct json_value *obj, const char *key, uint32_t n, double lo,
                      double hi, double *out, struct error *err)
{
    const struct json_value *v = json_get(obj, key);
    if (!v || v->type != JSON_ARRAY || v->len != n)
        return error_set(err, 400,
                         "image.normalize.%s: expected a list of %u numbers (one per "
                         "channel)",
                         key, n);
    for (uint32_t i = 0; i < n; i++)
        if (json_num_f64(&v->u.items[i], &out[i]) != 0 || !(out[i] >= lo && out[i] <= hi))
            return error_set(err, 400, "image.normalize.%s[%u]: expected a number from %g to %g",
                             key, i, lo, hi);
    return 0;
}

static int parse_normalize(const struct json_value *obj, struct image_cfg *c, struct error *err)
{
    static const char *const keys[] = {"scale", "offset", "mean", "std", NULL};
    const struct json_value *v = json_get(obj, "normalize");
    for (int i = 0; i < 3; i++) {
        c->scale[i] = 1.0f;
        c->offset[i] = 0.0f;
    }
    if (!v || v->type == JSON_NULL)
        return 0;
    if (c->dtype == DT_UINT8)
        return error_set(err, 400, "image.normalize: not allowed with datatype UINT8");
    if (fields_check_object(v, "image.normalize", keys, err) != 0)
        return ST_ERROR;
    bool affine = json_get(v, "scale") || json_get(v, "offset");
    bool stats = json_get(v, "mean") || json_get(v, "std");
    if (affine == stats)
        return error_set(err, 400, "image.normalize: expected scale and offset, or mean and std");
    if (affine) {
        double s = 1.0, o = 0.0;
        if (fields_double(v, "image.normalize", "scale", -1e6, 1e6, &s, err) != 0 ||
            fields_double(v, "image.normalize", "offset", -1e6, 1e6, &o, err) != 0)
            return ST_ERROR;
        for (int i = 0; i < 3; i++) {
            c->scale[i] = (float)s;
            c->offset[i] = (float)o;
        }
        return 0;
    }
    double mean[3], sd[3];
    if (get_floats(v, "mean", c->channels, -1e6, 1e6, mean, err) != 0 ||
        get_floats(v, "std", c->channels, 1e-6, 1e6, sd, err) != 0)
        return ST_ERROR;
    for (uint32_t i = 0; i < c->channels; i++) { /* (x / 255 - mean) / std */
        c->scale[i] = (float)(1.0 / (255.0 * sd[i]));
        c->offset[i] = (float)(-mean[i] / sd[i]);
    }
    return 0;
}

static int image_parse(const struct json_value *obj, const char *model_dir, void **out,
                       struct error *err)
{
    static const char *const keys[] = {
        "formats",     "max_bytes", "max_pixels", "color",  "exif_orientation", "draft", "resize",
        "center_crop", "invert",    "normalize",  "layout", "datatype",         NULL};
    static const char *const colors[] = {"rgb", "bgr", "gray", NULL};
    static const char *const layouts[] = {"CHW", "HWC", NULL};
    static const char *const dtypes[] = {"FP32", "UINT8", NULL};
    (void)model_dir;

    if (fields_check_object(obj, "image", keys, err) != 0)
        return ST_ERROR;
    struct image_cfg *c = mem_calloc(1, sizeof *c);
    if (!c)
        return error_set(err, 500, "out of memory");
    c->formats = IMAGE_JPEG | IMAGE_PNG;
    c->max_bytes = 32u << 20;
    c->max_pixels = 40000000u;
    c->exif = true;
    int color = COLOR_RGB, layout = 0, dt = 0;
    if (parse_formats(obj, c, err) != 0 ||
        fields_u32(obj, "image", "max_bytes", 1, IMAGE_MAX_BYTES_LIMIT, &c->max_bytes, err) != 0 ||
        fields_u32(obj, "image", "max_pixels", 1, IMAGE_MAX_PIXELS_LIMIT, &c->max_pixels, err) !=
            0 ||
        get_choice(obj, "image", "color", colors, &color, err) != 0 ||
        fields_bool(obj, "image", "exif_orientation", &c->exif, err) != 0 ||
        fields_bool(obj, "image", "draft", &c->draft, err) != 0 ||
        fields_bool(obj, "image", "invert", &c->invert, err) != 0 ||
        get_choice(obj, "image", "layout", layouts, &layout, err) != 0 ||
        get_choice(obj, "image", "datatype", dtypes, &dt, err) != 0)
        goto out_free;
    c->color = (enum image_color)color;
    c->channels = c->color == COLOR_GRAY ? 1 : 3;
    c->hwc = layout == 1;
    c->dtype = dt == 0 ? DT_FP32 : DT_UINT8;
    if (parse_resize(obj, c, err) != 0 || parse_crop(obj, c, err) != 0 ||
        parse_normalize(obj, c, err) != 0)
        goto out_free;
    c->out_w = c->crop_w ? c->crop_w : c->resize_w;
    c->out_h = c->crop_h ? c->crop_h : c->resize_h;
    if ((uint64_t)c->out_w * c->out_h * c->channels > IMAGE_MAX_OUT_ELEMENTS) {
        error_set(err, 400, "image: an output of %ux%ux%u is over %u elements", c->out_w, c->out_h,
                  c->channels, IMAGE_MAX_OUT_ELEMENTS);
        goto out_free;
    }
    *out = c;
    return 0;
out_free:
    mem_free(c);
    return ST_ERROR;
}

static void image_free(void *cfg)
{
    mem_free(cfg);
}

static uint32_t image_outputs(const void *cfg, struct prep_output *out)
{
    const struct image_cfg *c = cfg;
    memset(out, 0, sizeof *out);
    out->dtype = c->dtype;
    out->ndim = 3;
    if (c->hwc) {
        out->dims[0] = c->out_h;
        out->dims[1] = c->out_w;
        out->dims[2] = c->channels;
    } else {
        out->dims[0] = c->channels;
        out->dims[1] = c->out_h;
        out->dims[2] = c->out_w;
    }
    return 1;
}

/* ---- run --------------------------------------------------------------- */

static int image_run(const void *cfg, const uint8_t *data, size_t len, struct prep_mem *mem,
                     struct tensor *out, struct prep_timings *tm, struct error *err)
{
    const struct image_cfg *c = cfg;
    struct image_pixels img;
    float *planes = NULL;
    int rc = ST_ERROR;

    if (len > c->max_bytes)
        return error_set(err, 413, "image of %zu bytes is over the limit of %u bytes", len,
                         c->max_bytes);
    struct image_decode_opts o = {
        .formats = c->formats,
        .max_pixels = c->max_pixels,
        .exif = c->exif,
        .draft_w = c->draft ? c->resize_w : 0,
        .draft_h = c->draft ? c->resize_h : 0,
        .draft_shorter = c->draft ? c->shorter : 0,
    };
    uint64_t t0 = clock_now_ns();
    if (image_decode(data, len, &o, &img, err) != 0)
        return ST_ERROR;
    if (c->color == COLOR_GRAY)
        image_to_gray(&img);
    uint64_t t1 = clock_now_ns();
    prep_timing_add(tm, "decode", t1 - t0);

    uint32_t rw = c->resize_w, rh = c->resize_h;
    if (c->shorter)
        image_fit_shorter(img.w, img.h, c->shorter, &rw, &rh);
    if ((uint64_t)rw * rh > IMAGE_MAX_OUT_ELEMENTS) { /* shorter_side of a sliver */
        error_set(err, 400, "an image of %ux%u would be resized to %ux%u, over %u pixels", img.w,
                  img.h, rw, rh, IMAGE_MAX_OUT_ELEMENTS);
        goto out_free;
    }
    /* Only the crop is resampled. */
    struct image_window win = {(rw - c->out_w) / 2, (rh - c->out_h) / 2, c->out_w, c->out_h};
    planes = mem_alloc((size_t)win.w * win.h * img.channels * sizeof *planes);
    if (!planes || image_resample(&img, c->filter, rw, rh, &win, planes) != 0) {
        error_set(err, 500, "out of memory resizing an image of %ux%u", img.w, img.h);
        goto out_free;
    }
    uint64_t t2 = clock_now_ns();
    prep_timing_add(tm, "resize", t2 - t1);

    struct image_emit e = {
        .src_channels = img.channels,
        .w = c->out_w,
        .h = c->out_h,
        .channels = c->channels,
        .bgr = c->color == COLOR_BGR && img.channels == 3,
        .replicate = img.channels == 1 && c->channels == 3,
        .invert = c->invert,
        .hwc = c->hwc,
        .dtype = c->dtype,
    };
    memcpy(e.scale, c->scale, sizeof e.scale);
    memcpy(e.offset, c->offset, sizeof e.offset);
    size_t n = (size_t)c->out_w * c->out_h * c->channels * dtype_size(c->dtype);
    void *buf = prep_mem_alloc(mem, n);
    if (!buf) {
        error_set(err, 500, "out of memory for an image tensor of %zu bytes", n);
        goto out_free;
    }
    image_emit(&e, planes, buf);
    struct prep_output po;
    image_outputs(c, &po);
    prep_tensor_set(out, &po, buf, n);
    prep_timing_add(tm, "normalize", clock_now_ns() - t2);
    rc = 0;
out_free:
    mem_free(planes);
    image_pixels_free(&img);
    return rc;
}

const struct prep_modality prep_image = {
    .key = "image",
    .content_types = image_types,
    .parse = image_parse,
    .free = image_free,
    .outputs = image_outputs,
    .run = image_run,
};
