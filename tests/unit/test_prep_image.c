/*
 * Unit tests for the image modality (preprocess/image.c, image_decode.c,
 * image_ops.c): the configuration's checks, resampling against values
 * computed by hand from Pillow's formulas, colors, layouts, EXIF
 * orientation, and hostile files. Images are made here with libpng and
 * libjpeg.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jpeglib.h>
#include <png.h>

#include "base/arena.h"
#include "base/json.h"
#include "base/mem.h"
#include "preprocess/image_decode.h"
#include "preprocess/image_ops.h"
#include "preprocess/modality.h"

static struct arena arena;
static struct prep_mem pmem;

static int setup(void **state)
{
    (void)state;
    arena_init(&arena, 4096, 16u << 20);
    prep_mem_init(&pmem, 64u << 20);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    prep_mem_release(&pmem);
    arena_free(&arena);
    mem_fail_reset();
    return 0;
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

/* ---- helpers ------------------------------------------------------------ */

static const struct json_value *js(const char *text)
{
    struct json_value *v = NULL;
    assert_int_equal(json_parse(&arena, text, strlen(text), NULL, &v, NULL, NULL), 0);
    return v;
}

static void *cfg_of(const char *text)
{
    void *cfg = NULL;
    struct error err;
    error_clear(&err);
    int rc = prep_image.parse(js(text), ".", &cfg, &err);
    if (rc != 0)
        print_error("parse of %s failed: %s\n", text, err.msg);
    assert_int_equal(rc, 0);
    return cfg;
}

static void parse_fails(const char *text, const char *needle)
{
    void *cfg = NULL;
    struct error err;
    error_clear(&err);
    assert_int_equal(prep_image.parse(js(text), ".", &cfg, &err), -1);
    assert_int_equal(err.status, 400);
    if (!strstr(err.msg, needle))
        print_error("message \"%s\" lacks \"%s\"\n", err.msg, needle);
    assert_non_null(strstr(err.msg, needle));
}

struct membuf {
    uint8_t *p;
    size_t len, cap;
};

static void png_write_cb(png_structp p, png_bytep data, size_t n)
{
    struct membuf *m = png_get_io_ptr(p);
    if (m->len + n > m->cap) {
        m->cap = (m->len + n) * 2;
        m->p = realloc(m->p, m->cap);
        assert_non_null(m->p);
    }
    memcpy(m->p + m->len, data, n);
    m->len += n;
}

static void png_flush_cb(png_structp p)
{
    (void)p;
}

/* A PNG of w x h; px holds rows of w * channels samples of depth bits
 * (16-bit samples big-endian, as PNG stores them). */
static struct membuf make_png(uint32_t w, uint32_t h, int type, int depth, const uint8_t *px,
                              const png_color *palette, int npal)
{
    struct membuf m = {0};
    png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(p);
    assert_non_null(info);
    png_set_write_fn(p, &m, png_write_cb, png_flush_cb);
    png_set_IHDR(p, info, w, h, depth, type, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (palette)
        png_set_PLTE(p, info, palette, npal);
    png_write_info(p, info);
    size_t rowbytes = png_get_rowbytes(p, info);
    for (uint32_t y = 0; y < h; y++)
        png_write_row(p, px + y * rowbytes);
    png_write_end(p, info);
    png_destroy_write_struct(&p, &info);
    return m;
}

/* A baseline JPEG (quality 95), optionally with an APP1 EXIF orientation. */
static struct membuf make_jpeg(uint32_t w, uint32_t h, int channels, const uint8_t *px,
                               int orientation)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr jerr;
    unsigned char *out = NULL;
    unsigned long outlen = 0;
    c.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &out, &outlen);
    c.image_width = w;
    c.image_height = h;
    c.input_components = channels;
    c.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 95, TRUE);
    jpeg_start_compress(&c, TRUE);
    if (orientation) {
        /* "Exif\0\0", little-endian TIFF, IFD0 at 8 with one SHORT entry 0x0112 */
        uint8_t app1[] = {'E', 'x',  'i',  'f', 0,
                          0,   'I',  'I',  42,  0,
                          8,   0,    0,    0,   1,
                          0,   0x12, 0x01, 3,   0,
                          1,   0,    0,    0,   (uint8_t)orientation,
                          0,   0,    0,    0,   0,
                          0,   0};
        jpeg_write_marker(&c, JPEG_APP0 + 1, app1, sizeof app1);
    }
    while (c.next_scanline < h) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)c.next_scanline * w * channels);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    struct membuf m = {.p = out, .len = outlen, .cap = outlen};
    return m;
}

static int run(void *cfg, const struct membuf *m, struct tensor *t, struct error *err)
{
    struct prep_timings tm = {0};
    error_clear(err);
    return prep_image.run(cfg, m->p, m->len, &pmem, t, &tm, err);
}

static void run_ok(void *cfg, const struct membuf *m, struct tensor *t)
{
    struct error err;
    int rc = run(cfg, m, t, &err);
    if (rc != 0)
        print_error("run failed: %d %s\n", err.status, err.msg);
    assert_int_equal(rc, 0);
}

static void run_fails(void *cfg, const struct membuf *m, int status, const char *needle)
{
    struct tensor t;
    struct error err;
    assert_int_equal(run(cfg, m, &t, &err), -1);
    if (err.status != status || !strstr(err.msg, needle))
        print_error("got %d \"%s\", expected %d \"%s\"\n", err.status, err.msg, status, needle);
    assert_int_equal(err.status, status);
    assert_non_null(strstr(err.msg, needle));
}

static void assert_floats(const float *got, const double *want, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++) {
        if (fabs(got[i] - want[i]) > tol)
            print_error("element %zu: got %.6f, want %.6f\n", i, got[i], want[i]);
        assert_true(fabs(got[i] - want[i]) <= tol);
    }
}

static const uint8_t row4[4] = {0, 100, 200, 255};

/* ---- configuration ------------------------------------------------------ */

static void test_parse_outputs(void **state)
{
    (void)state;
    void *cfg = cfg_of("{\"resize\": {\"width\": 224, \"height\": 112}}");
    struct prep_output o;
    assert_int_equal(prep_image.outputs(cfg, &o), 1);
    assert_null(o.name);
    assert_int_equal(o.dtype, DT_FP32);
    assert_int_equal(o.ndim, 3);
    assert_int_equal(o.dims[0], 3);
    assert_int_equal(o.dims[1], 112);
    assert_int_equal(o.dims[2], 224);
    prep_image.free(cfg);

    cfg = cfg_of("{\"color\": \"gray\", \"layout\": \"HWC\", \"datatype\": \"UINT8\","
                 " \"resize\": {\"shorter_side\": 256, \"method\": \"area\"},"
                 " \"center_crop\": {\"width\": 200, \"height\": 100}}");
    assert_int_equal(prep_image.outputs(cfg, &o), 1);
    assert_int_equal(o.dtype, DT_UINT8);
    assert_int_equal(o.dims[0], 100);
    assert_int_equal(o.dims[1], 200);
    assert_int_equal(o.dims[2], 1);
    prep_image.free(cfg);
}

static void test_parse_errors(void **state)
{
    (void)state;
    parse_fails("{\"resize\": {\"width\": 8, \"height\": 8}, \"colour\": \"rgb\"}", "image.colour");
    parse_fails("{\"resize\": {\"width\": 0, \"height\": 8}}", "image.resize.width");
    parse_fails("{\"resize\": {\"width\": 8, \"height\": 16385}}", "image.resize.height");
    parse_fails("{\"resize\": {\"width\": 8, \"height\": 8, \"size\": 3}}", "image.resize.size");
    parse_fails("{\"resize\": {\"width\": 8}}", "width and height go together");
    parse_fails("{\"resize\": {\"shorter_side\": 8}}", "image.center_crop: required");
    parse_fails("{\"resize\": {\"shorter_side\": 8}, \"center_crop\": {\"width\": 9, "
                "\"height\": 8}}",
                "does not fit");
    parse_fails("{\"resize\": {\"width\": 8, \"height\": 8, \"method\": \"nearest\"}}",
                "image.resize.method");
    parse_fails("{}", "image.resize: required");
    parse_fails("{\"resize\": {\"width\": 8, \"height\": 8}, \"datatype\": \"UINT8\", "
                "\"normalize\": {\"scale\": 2}}",
                "UINT8");
    parse_fails("{\"resize\": {\"width\": 8, \"height\": 8}, \"normalize\": {\"mean\": [0.5], "
                "\"std\": [0.2]}}",
                "image.normalize.mean");
    parse_fails("{\"resize\": {\"width\": 8, \"height\": 8}, \"normalize\": {\"mean\": [0, 0, "
                "0], \"std\": [1, 0, 1]}}",
                "image.normalize.std[1]");
    parse_fails("{\"resize\": {\"width\": 8, \"height\": 8}, \"normalize\": {\"scale\": 1, "
                "\"std\": [1, 1, 1]}}",
                "scale and offset, or mean and std");
    parse_fails("{\"resize\": {\"width\": 8, \"height\": 8}, \"formats\": [\"gif\"]}",
                "image.formats[0]");
    parse_fails("{\"resize\": {\"width\": 8, \"height\": 8}, \"max_pixels\": 0}",
                "image.max_pixels");
    parse_fails("{\"resize\": {\"width\": 8, \"height\": 8}, \"draft\": 1}", "image.draft");
    parse_fails("{\"resize\": {\"width\": 16384, \"height\": 16384}}", "elements");
}

/* ---- resampling: values from Pillow's formulas, by hand ----------------- */

static void test_resize_bilinear_down(void **state)
{
    (void)state;
    /* 4 -> 2: scale 2, support 2; weights (.75 .75 .25)/1.75 and (.25 .75 .75)/1.75 */
    void *cfg = cfg_of("{\"color\": \"gray\", \"resize\": {\"width\": 2, \"height\": 1}}");
    struct membuf m = make_png(4, 1, PNG_COLOR_TYPE_GRAY, 8, row4, NULL, 0);
    struct tensor t;
    run_ok(cfg, &m, &t);
    double want[2] = {(100 * 0.75 + 200 * 0.25) / 1.75,
                      (100 * 0.25 + 200 * 0.75 + 255 * 0.75) / 1.75};
    assert_int_equal(t.nbytes, 2 * sizeof(float));
    assert_floats(t.data, want, 2, 1e-4);
    free(m.p);
    prep_image.free(cfg);
}

static void test_resize_area_down(void **state)
{
    (void)state;
    void *cfg = cfg_of("{\"color\": \"gray\", \"resize\": {\"width\": 2, \"height\": 1, "
                       "\"method\": \"area\"}}");
    struct membuf m = make_png(4, 1, PNG_COLOR_TYPE_GRAY, 8, row4, NULL, 0);
    struct tensor t;
    run_ok(cfg, &m, &t);
    double want[2] = {50.0, 227.5};
    assert_floats(t.data, want, 2, 1e-4);
    free(m.p);
    prep_image.free(cfg);
}

static void test_resize_bilinear_up(void **state)
{
    (void)state;
    /* 2 -> 4 (and 1 -> 2 rows): the triangle of support 1, clamped at the edges */
    static const uint8_t px[2] = {0, 100};
    void *cfg = cfg_of("{\"color\": \"gray\", \"resize\": {\"width\": 4, \"height\": 2}}");
    struct membuf m = make_png(2, 1, PNG_COLOR_TYPE_GRAY, 8, px, NULL, 0);
    struct tensor t;
    run_ok(cfg, &m, &t);
    double want[8] = {0, 25, 75, 100, 0, 25, 75, 100};
    assert_floats(t.data, want, 8, 1e-4);
    free(m.p);
    prep_image.free(cfg);
}

/* ---- colors, layouts, normalize ----------------------------------------- */

/* 2x1 RGB: red, then (10, 20, 30). */
static const uint8_t rgb2[6] = {255, 0, 0, 10, 20, 30};

/* Pillow's resampling in double, horizontal then vertical over the whole
 * image (Resample.c's precompute_coeffs; filters as image_ops.c), as the
 * reference for image_resample's window. */
static double ref_filter(enum image_filter f, double x)
{
    if (f == IMAGE_BOX)
        return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0;
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* out[o * in] = the weights of output o over the input (zero elsewhere). */
static double *ref_weights(enum image_filter f, uint32_t in, uint32_t out)
{
    double scale = (double)in / out, fs = scale < 1.0 ? 1.0 : scale;
    double support = (f == IMAGE_BOX ? 0.5 : 1.0) * fs;
    uint32_t ksize = (uint32_t)ceil(support) * 2 + 1;
    double *w = calloc((size_t)out * in, sizeof *w);
    assert_non_null(w);
    for (uint32_t o = 0; o < out; o++) {
        double center = (o + 0.5) * scale, total = 0.0;
        int64_t lo = (int64_t)(center - support + 0.5), hi = (int64_t)(center + support + 0.5);
        lo = lo < 0 ? 0 : lo;
        hi = hi > (int64_t)in ? (int64_t)in : hi;
        if (hi - lo > (int64_t)ksize)
            hi = lo + ksize;
        for (int64_t x = lo; x < hi; x++)
            total += ref_filter(f, (x - center + 0.5) / fs);
        for (int64_t x = lo; x < hi; x++)
            w[(size_t)o * in + (size_t)x] =
                total != 0.0 ? ref_filter(f, (x - center + 0.5) / fs) / total : 0.0;
    }
    return w;
}

/* image_resample against the reference, on random images of sizes that
 * leave every vector loop a tail (widths 1 to 61, heights 1 to 40),
 * down- and upscaled by both filters, 1 and 3 channels, with windows at
 * the corners and in the middle: within 2e-3 on the 0..255 scale (the
 * integration test's tolerance against Pillow). */
static void test_resample_matches_reference(void **state)
{
    (void)state;
    uint64_t seed = 7;
    for (int round = 0; round < 300; round++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        uint32_t w = 1 + (uint32_t)(seed >> 33) % 61, h = 1 + (uint32_t)(seed >> 45) % 40;
        uint32_t ch = round % 2 ? 3 : 1;
        enum image_filter f = round % 4 < 2 ? IMAGE_BILINEAR : IMAGE_BOX;
        uint32_t ow = 1 + (uint32_t)(seed >> 20) % (2 * w), oh = 1 + (uint32_t)(seed >> 8) % (2 * h);
        struct image_pixels img = {.w = w, .h = h, .channels = ch};
        img.px = malloc((size_t)w * h * ch);
        assert_non_null(img.px);
        for (size_t i = 0; i < (size_t)w * h * ch; i++) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            img.px[i] = (uint8_t)(seed >> 56);
        }
        uint32_t corner = (uint32_t)round % 3; /* 0: top left, 1: middle, 2: bottom right */
        struct image_window win = {.w = 1 + ow / 2, .h = 1 + oh / 2};
        if (win.w > ow)
            win.w = ow;
        if (win.h > oh)
            win.h = oh;
        win.x0 = corner == 0 ? 0 : corner == 1 ? (ow - win.w) / 2 : ow - win.w;
        win.y0 = corner == 0 ? 0 : corner == 1 ? (oh - win.h) / 2 : oh - win.h;
        float *got = malloc((size_t)win.w * win.h * ch * sizeof *got);
        assert_non_null(got);
        assert_int_equal(image_resample(&img, f, ow, oh, &win, got), 0);

        double *wx = ref_weights(f, w, ow), *wy = ref_weights(f, h, oh);
        double *mid = calloc((size_t)ow * h * ch, sizeof *mid); /* horizontal pass */
        assert_non_null(mid);
        for (uint32_t y = 0; y < h; y++)
            for (uint32_t x = 0; x < ow; x++)
                for (uint32_t c = 0; c < ch; c++) {
                    double sum = 0.0;
                    for (uint32_t i = 0; i < w; i++)
                        sum += wx[(size_t)x * w + i] * img.px[((size_t)y * w + i) * ch + c];
                    mid[((size_t)y * ow + x) * ch + c] = (float)sum;
                }
        size_t plane = (size_t)win.w * win.h;
        for (uint32_t yy = 0; yy < win.h; yy++)
            for (uint32_t xx = 0; xx < win.w; xx++)
                for (uint32_t c = 0; c < ch; c++) {
                    double want = 0.0;
                    for (uint32_t i = 0; i < h; i++)
                        want += wy[(size_t)(win.y0 + yy) * h + i] *
                                mid[((size_t)i * ow + win.x0 + xx) * ch + c];
                    double d = fabs(got[c * plane + (size_t)yy * win.w + xx] - want);
                    if (d > 2e-3)
                        print_error("%ux%ux%u -> %ux%u, window %u,%u %ux%u, filter %d: pixel "
                                    "%u,%u channel %u is %.6f, want %.6f\n",
                                    w, h, ch, ow, oh, win.x0, win.y0, win.w, win.h, (int)f, xx,
                                    yy, c, got[c * plane + (size_t)yy * win.w + xx], want);
                    assert_true(d <= 2e-3);
                }
        free(mid);
        free(wx);
        free(wy);
        free(got);
        free(img.px);
    }
}

static void test_chw_hwc_bgr(void **state)
{
    (void)state;
    struct membuf m = make_png(2, 1, PNG_COLOR_TYPE_RGB, 8, rgb2, NULL, 0);
    struct tensor t;
    void *cfg = cfg_of("{\"resize\": {\"width\": 2, \"height\": 1}}");
    run_ok(cfg, &m, &t);
    double chw[6] = {255, 10, 0, 20, 0, 30};
    assert_floats(t.data, chw, 6, 1e-5);
    assert_int_equal(t.shape[0], 3);
    prep_image.free(cfg);

    cfg = cfg_of("{\"color\": \"bgr\", \"layout\": \"HWC\", \"resize\": {\"width\": 2, "
                 "\"height\": 1}}");
    run_ok(cfg, &m, &t);
    double hwc[6] = {0, 0, 255, 30, 20, 10};
    assert_floats(t.data, hwc, 6, 1e-5);
    assert_int_equal(t.shape[2], 3);
    prep_image.free(cfg);

    /* gray: Pillow's convert("L") in integers */
    cfg = cfg_of("{\"color\": \"gray\", \"resize\": {\"width\": 2, \"height\": 1}}");
    run_ok(cfg, &m, &t);
    double gray[2] = {(255 * 19595 + 0x8000) >> 16,
                      (10 * 19595 + 20 * 38470 + 30 * 7471 + 0x8000) >> 16};
    assert_floats(t.data, gray, 2, 0);
    prep_image.free(cfg);
    free(m.p);
}

static void test_normalize_invert_uint8(void **state)
{
    (void)state;
    struct membuf m = make_png(2, 1, PNG_COLOR_TYPE_RGB, 8, rgb2, NULL, 0);
    struct tensor t;
    void *cfg = cfg_of("{\"resize\": {\"width\": 2, \"height\": 1}, \"normalize\": {\"mean\": "
                       "[0.5, 0.25, 0], \"std\": [0.5, 0.25, 2]}}");
    run_ok(cfg, &m, &t);
    double want[6] = {(1.0 - 0.5) / 0.5,
                      (10 / 255.0 - 0.5) / 0.5,
                      (0 - 0.25) / 0.25,
                      (20 / 255.0 - 0.25) / 0.25,
                      0,
                      30 / 255.0 / 2};
    assert_floats(t.data, want, 6, 1e-5);
    prep_image.free(cfg);

    cfg = cfg_of("{\"invert\": true, \"color\": \"gray\", \"resize\": {\"width\": 2, "
                 "\"height\": 1}, \"normalize\": {\"scale\": 0.0627450980392, \"offset\": 1}}");
    run_ok(cfg, &m, &t);
    double inv[2] = {(255 - 76) * 0.0627450980392 + 1, (255 - 18) * 0.0627450980392 + 1};
    assert_floats(t.data, inv, 2, 1e-4);
    prep_image.free(cfg);

    cfg = cfg_of("{\"datatype\": \"UINT8\", \"layout\": \"HWC\", \"resize\": {\"width\": 1, "
                 "\"height\": 1, \"method\": \"area\"}}");
    run_ok(cfg, &m, &t);
    assert_int_equal(t.dtype, DT_UINT8);
    assert_int_equal(t.nbytes, 3);
    const uint8_t *u = t.data;
    assert_int_equal(u[0], 133); /* 132.5 rounds up */
    assert_int_equal(u[1], 10);
    assert_int_equal(u[2], 15);
    prep_image.free(cfg);
    free(m.p);
}

static void test_center_crop(void **state)
{
    (void)state;
    /* 5x1 gray 0..4 (x 10), no resize, crop 2: left = floor((5 - 2) / 2) = 1 */
    static const uint8_t px[5] = {0, 10, 20, 30, 40};
    struct membuf m = make_png(5, 1, PNG_COLOR_TYPE_GRAY, 8, px, NULL, 0);
    void *cfg = cfg_of("{\"color\": \"gray\", \"resize\": {\"width\": 5, \"height\": 1}, "
                       "\"center_crop\": {\"width\": 2, \"height\": 1}}");
    struct tensor t;
    run_ok(cfg, &m, &t);
    double want[2] = {10, 20};
    assert_floats(t.data, want, 2, 0);
    prep_image.free(cfg);

    /* shorter_side: 5x1 -> shorter 2 gives 10x2; crop 2x2 at x = 4 */
    cfg = cfg_of("{\"color\": \"gray\", \"resize\": {\"shorter_side\": 2, \"method\": "
                 "\"area\"}, \"center_crop\": {\"width\": 2, \"height\": 2}}");
    run_ok(cfg, &m, &t);
    double want2[4] = {20, 20, 20, 20};
    assert_floats(t.data, want2, 4, 1e-4);
    prep_image.free(cfg);
    free(m.p);
}

/* ---- PNG flavours --------------------------------------------------------- */

static void test_png_16bit_palette_gray(void **state)
{
    (void)state;
    struct tensor t;
    void *cfg = cfg_of("{\"layout\": \"HWC\", \"resize\": {\"width\": 1, \"height\": 1}}");

    static const uint8_t px16[6] = {0x12, 0xFF, 0xAB, 0x01, 0x00, 0x80}; /* RGB 16-bit */
    struct membuf m = make_png(1, 1, PNG_COLOR_TYPE_RGB, 16, px16, NULL, 0);
    run_ok(cfg, &m, &t);
    double hi[3] = {0x12, 0xAB, 0x00}; /* the high bytes */
    assert_floats(t.data, hi, 3, 0);
    free(m.p);

    static const png_color pal[2] = {{1, 2, 3}, {200, 150, 100}};
    static const uint8_t idx[1] = {0x40}; /* 2-bit index 1 */
    m = make_png(1, 1, PNG_COLOR_TYPE_PALETTE, 2, idx, pal, 2);
    run_ok(cfg, &m, &t);
    double p[3] = {200, 150, 100};
    assert_floats(t.data, p, 3, 0);
    free(m.p);

    static const uint8_t ga[2] = {77, 9}; /* gray + alpha: alpha dropped, gray replicated */
    m = make_png(1, 1, PNG_COLOR_TYPE_GRAY_ALPHA, 8, ga, NULL, 0);
    run_ok(cfg, &m, &t);
    double g[3] = {77, 77, 77};
    assert_floats(t.data, g, 3, 0);
    free(m.p);
    prep_image.free(cfg);
}

/* ---- JPEG, EXIF, draft ------------------------------------------------------ */

/* 16x8: the left half black, the right half white. */
static uint8_t *halves(int channels)
{
    uint8_t *px = malloc(16 * 8 * channels);
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 16; x++)
            memset(px + (y * 16 + x) * channels, x < 8 ? 0 : 255, channels);
    return px;
}

static void test_jpeg_exif(void **state)
{
    (void)state;
    uint8_t *px = halves(3);
    struct tensor t;
    /* orientation 6 (rotate 90 clockwise): 8 wide, 16 high, the left half on top */
    void *cfg = cfg_of("{\"color\": \"gray\", \"resize\": {\"width\": 8, \"height\": 16}}");
    struct membuf m = make_jpeg(16, 8, 3, px, 6);
    run_ok(cfg, &m, &t);
    const float *f = t.data;
    assert_true(f[0] < 30 && f[8 * 16 - 1] > 225);
    /* orientation 8 (rotate 90 counter-clockwise): the left half at the bottom */
    free(m.p);
    m = make_jpeg(16, 8, 3, px, 8);
    run_ok(cfg, &m, &t);
    f = t.data;
    assert_true(f[0] > 225 && f[8 * 16 - 1] < 30);
    prep_image.free(cfg);
    /* exif_orientation false: the stored 16x8 squeezed, left half still left */
    cfg = cfg_of("{\"exif_orientation\": false, \"color\": \"gray\", \"resize\": {\"width\": 8, "
                 "\"height\": 16}}");
    run_ok(cfg, &m, &t);
    f = t.data;
    assert_true(f[0] < 30 && f[7] > 225);
    prep_image.free(cfg);
    free(m.p);

    /* gray JPEG with color rgb: replicated */
    uint8_t *g = halves(1);
    m = make_jpeg(16, 8, 1, g, 0);
    cfg = cfg_of("{\"resize\": {\"width\": 16, \"height\": 8}}");
    run_ok(cfg, &m, &t);
    f = t.data;
    assert_int_equal(t.shape[0], 3);
    assert_true(f[15] > 225 && f[128 + 15] == f[15] && f[256 + 15] == f[15]);
    prep_image.free(cfg);
    free(m.p);
    free(g);
    free(px);
}

static void test_exif_reader(void **state)
{
    (void)state;
    static const uint8_t be[] = {'M', 'M', 0, 42, 0, 0,   0,   8,   0, 2,    0x01, 0x0F, 0,
                                 2,   0,   0, 0,  4, 'a', 'b', 'c', 0, 0x01, 0x12, 0,    3,
                                 0,   0,   0, 1,  0, 3,   0,   0,   0, 0,    0,    0};
    assert_int_equal(image_exif_orientation(be, sizeof be), 3);
    /* the entry cut off: ignored */
    assert_int_equal(image_exif_orientation(be, 30), 1);
    /* IFD offset past the end, bad magic, value out of range */
    uint8_t bad[sizeof be];
    memcpy(bad, be, sizeof be);
    bad[7] = 200;
    assert_int_equal(image_exif_orientation(bad, sizeof bad), 1);
    memcpy(bad, be, sizeof be);
    bad[3] = 43;
    assert_int_equal(image_exif_orientation(bad, sizeof bad), 1);
    memcpy(bad, be, sizeof be);
    bad[31] = 9;
    assert_int_equal(image_exif_orientation(bad, sizeof bad), 1);
    assert_int_equal(image_exif_orientation(be, 4), 1);
}

static void test_jpeg_draft(void **state)
{
    (void)state;
    /* a flat 64x64 image: decoded at 1/8 or in full, the 8x8 result is the same */
    uint8_t *px = malloc(64 * 64 * 3);
    for (int i = 0; i < 64 * 64; i++) {
        px[i * 3] = 200;
        px[i * 3 + 1] = 100;
        px[i * 3 + 2] = 50;
    }
    struct membuf m = make_jpeg(64, 64, 3, px, 0);
    struct tensor a, b;
    void *full = cfg_of("{\"resize\": {\"width\": 8, \"height\": 8}}");
    void *draft = cfg_of("{\"draft\": true, \"resize\": {\"width\": 8, \"height\": 8}}");
    run_ok(full, &m, &a);
    run_ok(draft, &m, &b);
    const float *fa = a.data, *fb = b.data;
    for (int i = 0; i < 3 * 64; i++)
        assert_true(fabsf(fa[i] - fb[i]) < 2.0f);
    assert_true(fabsf(fa[0] - 200) < 3.0f);
    prep_image.free(full);
    prep_image.free(draft);
    free(m.p);
    free(px);
}

/* ---- hostile files --------------------------------------------------------- */

static uint32_t crc32_of(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
    }
    return c ^ 0xFFFFFFFFu;
}

static void put32be(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void test_errors(void **state)
{
    (void)state;
    void *cfg = cfg_of("{\"max_pixels\": 1000000, \"max_bytes\": 4096, \"resize\": {\"width\": "
                       "4, \"height\": 4}}");
    uint8_t *px = halves(3);

    /* a PNG header claiming 100000 x 100000, CRC fixed: 413 before decoding */
    struct membuf m = make_png(16, 8, PNG_COLOR_TYPE_RGB, 8, px, NULL, 0);
    put32be(m.p + 16, 100000);
    put32be(m.p + 20, 100000);
    put32be(m.p + 29, crc32_of(m.p + 12, 17));
    run_fails(cfg, &m, 413, "100000x100000");

    /* truncated PNG */
    free(m.p);
    m = make_png(16, 8, PNG_COLOR_TYPE_RGB, 8, px, NULL, 0);
    struct membuf cut = {.p = m.p, .len = m.len - 20};
    run_fails(cfg, &cut, 400, "truncated PNG");
    cut.len = 30;
    run_fails(cfg, &cut, 400, "truncated PNG");
    /* corrupt IDAT (CRC mismatch of a critical chunk) */
    m.p[45] ^= 0x55;
    run_fails(cfg, &m, 400, "invalid PNG");
    free(m.p);

    /* a JPEG's SOF claiming 60000 x 60000: 413 */
    m = make_jpeg(16, 8, 3, px, 0);
    for (size_t i = 2; i + 9 < m.len; i++) {
        if (m.p[i] == 0xFF && m.p[i + 1] == 0xC0) {
            m.p[i + 5] = 0xEA, m.p[i + 6] = 0x60; /* height */
            m.p[i + 7] = 0xEA, m.p[i + 8] = 0x60; /* width */
            break;
        }
    }
    run_fails(cfg, &m, 413, "60000x60000");
    free(m.p);

    /* truncated JPEG: in the header, and in the entropy-coded data */
    m = make_jpeg(16, 8, 3, px, 0);
    cut.p = m.p;
    cut.len = 100;
    run_fails(cfg, &cut, 400, "truncated JPEG");
    cut.len = m.len - 30;
    run_fails(cfg, &cut, 400, "truncated JPEG");

    /* formats: JPEG refused by a PNG-only model */
    void *png_only = cfg_of("{\"formats\": [\"png\"], \"resize\": {\"width\": 4, \"height\": 4}}");
    run_fails(png_only, &m, 400, "JPEG images are not accepted");
    prep_image.free(png_only);
    free(m.p);

    /* text, empty, over max_bytes */
    struct membuf txt = {.p = (uint8_t *)"hello, this is not an image", .len = 27};
    run_fails(cfg, &txt, 400, "not a PNG or JPEG image");
    txt.len = 0;
    run_fails(cfg, &txt, 400, "not a PNG or JPEG image");
    /* shorter_side blowing a 1x300 sliver up to 16384 x 4915200: refused */
    static uint8_t sliver[300];
    m = make_png(1, 300, PNG_COLOR_TYPE_GRAY, 8, sliver, NULL, 0);
    void *huge = cfg_of("{\"resize\": {\"shorter_side\": 16384}, \"center_crop\": {\"width\": "
                        "8, \"height\": 8}}");
    run_fails(huge, &m, 400, "would be resized to 16384x4915200");
    prep_image.free(huge);
    free(m.p);

    uint8_t *big = calloc(1, 5000);
    struct membuf b = {.p = big, .len = 5000};
    run_fails(cfg, &b, 413, "over the limit of 4096 bytes");
    free(big);
    free(px);
    prep_image.free(cfg);
}

/* Every allocation of a run failing in turn: 500, nothing leaked (ASan). */
static void test_out_of_memory(void **state)
{
    (void)state;
    uint8_t *px = halves(3);
    struct membuf jpg = make_jpeg(16, 8, 3, px, 6);
    struct membuf png = make_png(16, 8, PNG_COLOR_TYPE_RGB, 8, px, NULL, 0);
    void *cfg = cfg_of("{\"resize\": {\"width\": 4, \"height\": 4}}");
    const struct membuf *files[2] = {&jpg, &png};
    for (int f = 0; f < 2; f++) {
        for (long n = 0;; n++) {
            struct tensor t;
            struct error err;
            mem_fail_after(n);
            int rc = run(cfg, files[f], &t, &err);
            mem_fail_reset();
            if (rc == 0)
                break;
            assert_int_equal(err.status, 500);
            assert_true(n < 50);
        }
    }
    prep_image.free(cfg);
    free(jpg.p);
    free(png.p);
    free(px);
}

static void test_timings(void **state)
{
    (void)state;
    struct membuf m = make_png(4, 1, PNG_COLOR_TYPE_GRAY, 8, row4, NULL, 0);
    void *cfg = cfg_of("{\"resize\": {\"width\": 2, \"height\": 2}}");
    struct prep_timings tm = {0};
    struct tensor t;
    struct error err;
    assert_int_equal(prep_image.run(cfg, m.p, m.len, &pmem, &t, &tm, &err), 0);
    assert_int_equal(tm.n, 3);
    assert_string_equal(tm.t[0].stage, "decode");
    assert_string_equal(tm.t[1].stage, "resize");
    assert_string_equal(tm.t[2].stage, "normalize");
    prep_image.free(cfg);
    free(m.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(test_parse_outputs),
        TEST(test_parse_errors),
        TEST(test_resize_bilinear_down),
        TEST(test_resize_area_down),
        TEST(test_resize_bilinear_up),
        TEST(test_resample_matches_reference),
        TEST(test_chw_hwc_bgr),
        TEST(test_normalize_invert_uint8),
        TEST(test_center_crop),
        TEST(test_png_16bit_palette_gray),
        TEST(test_jpeg_exif),
        TEST(test_exif_reader),
        TEST(test_jpeg_draft),
        TEST(test_errors),
        TEST(test_out_of_memory),
        TEST(test_timings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
