/*
 * image_decode.c: JPEG and PNG in memory to 8-bit pixels, with the header
 * checked before decoding (image_decode.h).
 *
 * Both libraries report errors through a callback that must not return;
 * each decoder keeps what it allocated in its context struct (not in
 * locals, which longjmp may leave stale) and releases it at one exit.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

#include "base/mem.h"
#include "base/status.h"
#include "preprocess/image_decode.h"

static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

enum image_format image_sniff(const uint8_t *data, size_t len)
{
    if (len >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF)
        return IMAGE_JPEG;
    if (len >= sizeof png_sig && memcmp(data, png_sig, sizeof png_sig) == 0)
        return IMAGE_PNG;
    return IMAGE_NONE;
}

static int check_pixels(uint32_t w, uint32_t h, const struct image_decode_opts *opts,
                        const char *what, struct error *err)
{
    if (w == 0 || h == 0)
        return error_set(err, 400, "invalid %s: empty image", what);
    if ((uint64_t)w * h > opts->max_pixels)
        return error_set(err, 413, "%s of %ux%u pixels is over the limit of %llu pixels", what, w,
                         h, (unsigned long long)opts->max_pixels);
    return 0;
}

/* ---- EXIF -------------------------------------------------------------- */

static uint32_t rd16(const uint8_t *p, bool le)
{
    return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 : (uint32_t)p[0] << 8 | p[1];
}

static uint32_t rd32(const uint8_t *p, bool le)
{
    return le ? rd16(p, le) | rd16(p + 2, le) << 16 : rd16(p, le) << 16 | rd16(p + 2, le);
}

int image_exif_orientation(const uint8_t *t, size_t len)
{
    bool le;
    if (len < 8)
        return 1;
    if (t[0] == 'I' && t[1] == 'I')
        le = true;
    else if (t[0] == 'M' && t[1] == 'M')
        le = false;
    else
        return 1;
    if (rd16(t + 2, le) != 42)
        return 1;
    uint32_t ifd = rd32(t + 4, le);
    if (ifd < 8 || ifd > len - 2)
        return 1;
    size_t n = rd16(t + ifd, le);
    size_t room = (len - ifd - 2) / 12;
    if (n > room)
        n = room;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *e = t + ifd + 2 + 12 * i;
        if (rd16(e, le) != 0x0112)
            continue;
        if (rd16(e + 2, le) != 3 || rd32(e + 4, le) < 1) /* SHORT, count >= 1 */
            return 1;
        uint32_t v = rd16(e + 8, le);
        return v >= 1 && v <= 8 ? (int)v : 1;
    }
    return 1;
}

/* Transposes img as exif_transpose does for orientation o (2..8). */
static int orient(struct image_pixels *img, int o)
{
    uint32_t w = img->w, h = img->h, ch = img->channels;
    bool swap = o >= 5;
    uint32_t ow = swap ? h : w, oh = swap ? w : h;
    uint8_t *dst = mem_alloc((size_t)w * h * ch);
    if (!dst)
        return -ENOMEM;
    for (uint32_t y = 0; y < oh; y++) {
        for (uint32_t x = 0; x < ow; x++) {
            uint32_t sx, sy;
            switch (o) {
            case 2:
                sx = w - 1 - x, sy = y;
                break;
            case 3:
                sx = w - 1 - x, sy = h - 1 - y;
                break;
            case 4:
                sx = x, sy = h - 1 - y;
                break;
            case 5:
                sx = y, sy = x;
                break;
            case 6:
                sx = y, sy = h - 1 - x;
                break;
            case 7:
                sx = w - 1 - y, sy = h - 1 - x;
                break;
            default:
                sx = w - 1 - y, sy = x;
                break; /* 8 */
            }
            memcpy(dst + ((size_t)y * ow + x) * ch, img->px + ((size_t)sy * w + sx) * ch, ch);
        }
    }
    mem_free(img->px);
    img->px = dst;
    img->w = ow;
    img->h = oh;
    return 0;
}

/* ---- JPEG -------------------------------------------------------------- */

struct jpeg_ctx {
    struct jpeg_error_mgr pub; /* first: libjpeg's err pointer is ours */
    struct jpeg_source_mgr src;
    struct jpeg_progress_mgr progress;
    jmp_buf jb;
    int status;      /* of the error that jumped */
    int orientation; /* 1..8 */
    char msg[JMSG_LENGTH_MAX + 16];
    uint8_t *px; /* the pixels being decoded */
};

static void jpeg_on_error(j_common_ptr c)
{
    struct jpeg_ctx *x = (struct jpeg_ctx *)c->err;
    if (c->err->msg_code == JERR_INPUT_EOF) {
        x->status = 400;
        snprintf(x->msg, sizeof x->msg, "truncated JPEG");
    } else {
        char m[JMSG_LENGTH_MAX];
        c->err->format_message(c, m);
        x->status = c->err->msg_code == JERR_OUT_OF_MEMORY ? 500 : 400;
        snprintf(x->msg, sizeof x->msg, "invalid JPEG: %s", m);
    }
    longjmp(x->jb, 1);
}

static void jpeg_on_message(j_common_ptr c, int level)
{
    (void)c; /* warnings and traces: never printed */
    (void)level;
}

static void jpeg_on_progress(j_common_ptr c)
{
    j_decompress_ptr d = (j_decompress_ptr)c;
    struct jpeg_ctx *x = (struct jpeg_ctx *)c->err;
    if (d->input_scan_number > IMAGE_MAX_SCANS) {
        x->status = 400;
        snprintf(x->msg, sizeof x->msg, "invalid JPEG: more than %d scans", IMAGE_MAX_SCANS);
        longjmp(x->jb, 1);
    }
}

static void src_init(j_decompress_ptr d)
{
    (void)d;
}

static boolean src_fill(j_decompress_ptr d)
{
    ERREXIT(d, JERR_INPUT_EOF); /* all data was given at once: more is truncation */
    return FALSE;
}

static void src_skip(j_decompress_ptr d, long n)
{
    if (n <= 0)
        return;
    if ((size_t)n > d->src->bytes_in_buffer)
        ERREXIT(d, JERR_INPUT_EOF);
    d->src->next_input_byte += n;
    d->src->bytes_in_buffer -= (size_t)n;
}

static void src_term(j_decompress_ptr d)
{
    (void)d;
}

/* The first APP1 "Exif" segment's orientation. */
static int jpeg_orientation(j_decompress_ptr d)
{
    for (jpeg_saved_marker_ptr m = d->marker_list; m; m = m->next) {
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 &&
            memcmp(m->data, "Exif\0\0", 6) == 0)
            return image_exif_orientation(m->data + 6, m->data_length - 6);
    }
    return 1;
}

/* libjpeg's scale denominator for the draft target (see the header). */
static unsigned draft_scale(uint32_t w, uint32_t h, int o, const struct image_decode_opts *opts)
{
    uint32_t tw = opts->draft_w, th = opts->draft_h;
    bool swap = o >= 5;
    if (opts->draft_shorter)
        image_fit_shorter(swap ? h : w, swap ? w : h, opts->draft_shorter, &tw, &th);
    if (tw == 0 || th == 0)
        return 1;
    if (swap) {
        uint32_t t = tw;
        tw = th;
        th = t;
    }
    uint32_t s = w / tw < h / th ? w / tw : h / th;
    return s >= 8 ? 8 : s >= 4 ? 4 : s >= 2 ? 2 : 1;
}

static int decode_jpeg(const uint8_t *data, size_t len, const struct image_decode_opts *opts,
                       struct image_pixels *out, struct error *err)
{
    struct jpeg_decompress_struct d;
    struct jpeg_ctx x;

    memset(&d, 0, sizeof d);
    memset(&x, 0, sizeof x);
    x.orientation = 1;
    d.err = jpeg_std_error(&x.pub);
    x.pub.error_exit = jpeg_on_error;
    x.pub.emit_message = jpeg_on_message;
    if (setjmp(x.jb)) {
        jpeg_destroy_decompress(&d);
        mem_free(x.px);
        return error_set(err, x.status, "%s", x.msg);
    }
    jpeg_create_decompress(&d);
    x.src.init_source = src_init;
    x.src.fill_input_buffer = src_fill;
    x.src.skip_input_data = src_skip;
    x.src.resync_to_restart = jpeg_resync_to_restart;
    x.src.term_source = src_term;
    x.src.next_input_byte = data;
    x.src.bytes_in_buffer = len;
    d.src = &x.src;
    x.progress.progress_monitor = jpeg_on_progress;
    d.progress = &x.progress;
    if (opts->exif)
        jpeg_save_markers(&d, JPEG_APP0 + 1, 0xFFFF);
    jpeg_read_header(&d, TRUE);
    if (check_pixels(d.image_width, d.image_height, opts, "JPEG", err) != 0)
        goto out_destroy;
    switch (d.jpeg_color_space) {
    case JCS_GRAYSCALE:
        d.out_color_space = JCS_GRAYSCALE;
        break;
    case JCS_CMYK:
    case JCS_YCCK:
        error_set(err, 400, "CMYK JPEG images are not supported");
        goto out_destroy;
    default:
        d.out_color_space = JCS_RGB;
        break;
    }
    if (opts->exif)
        x.orientation = jpeg_orientation(&d);
    if (opts->draft_w || opts->draft_shorter) {
        d.scale_num = 1;
        d.scale_denom = draft_scale(d.image_width, d.image_height, x.orientation, opts);
    }
    jpeg_start_decompress(&d);
    uint32_t w = d.output_width, h = d.output_height, ch = (uint32_t)d.output_components;
    x.px = mem_alloc((size_t)w * h * ch);
    if (!x.px) {
        error_set(err, 500, "out of memory decoding a JPEG of %ux%u", w, h);
        goto out_destroy;
    }
    while (d.output_scanline < h) {
        JSAMPROW row = x.px + (size_t)d.output_scanline * w * ch;
        jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_destroy_decompress(&d);
    out->px = x.px;
    out->w = w;
    out->h = h;
    out->channels = ch;
    if (x.orientation != 1 && orient(out, x.orientation) != 0) {
        image_pixels_free(out);
        return error_set(err, 500, "out of memory rotating a JPEG of %ux%u", w, h);
    }
    return 0;
out_destroy:
    jpeg_destroy_decompress(&d);
    mem_free(x.px);
    return ST_ERROR;
}

/* ---- PNG --------------------------------------------------------------- */

struct png_ctx {
    const uint8_t *data;
    size_t len, off;
    char msg[ERROR_MSG_MAX];
    uint8_t *px;
    png_bytep *rows;
    int rc; /* 0 once the pixels are out */
};

static void png_on_error(png_structp p, png_const_charp m)
{
    struct png_ctx *x = png_get_error_ptr(p);
    snprintf(x->msg, sizeof x->msg, "%s", m);
    png_longjmp(p, 1);
}

static void png_on_warning(png_structp p, png_const_charp m)
{
    (void)p; /* never printed */
    (void)m;
}

static void png_on_read(png_structp p, png_bytep out, size_t n)
{
    struct png_ctx *x = png_get_io_ptr(p);
    if (n > x->len - x->off)
        png_error(p, "truncated PNG");
    memcpy(out, x->data + x->off, n);
    x->off += n;
}

static int decode_png(const uint8_t *data, size_t len, const struct image_decode_opts *opts,
                      struct image_pixels *out, struct error *err)
{
    struct png_ctx x = {.data = data, .len = len, .rc = ST_ERROR};
    png_structp p;
    png_infop info = NULL;

    p = png_create_read_struct(PNG_LIBPNG_VER_STRING, &x, png_on_error, png_on_warning);
    if (!p)
        return error_set(err, 500, "out of memory reading a PNG");
    info = png_create_info_struct(p);
    if (!info) {
        error_set(err, 500, "out of memory reading a PNG");
        goto out_destroy;
    }
    if (setjmp(png_jmpbuf(p))) {
        if (strncmp(x.msg, "truncated", 9) == 0)
            error_set(err, 400, "%s", x.msg);
        else
            error_set(err, 400, "invalid PNG: %s", x.msg);
        mem_free(x.px);
        x.px = NULL;
        goto out_destroy;
    }
    png_set_read_fn(p, &x, png_on_read);
    png_set_chunk_malloc_max(p, 8u << 20);
    png_read_info(p, info);
    uint32_t w = png_get_image_width(p, info), h = png_get_image_height(p, info);
    if (check_pixels(w, h, opts, "PNG", err) != 0)
        goto out_destroy;
    int type = png_get_color_type(p, info), depth = png_get_bit_depth(p, info);
    if (type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(p);
    if ((type & PNG_COLOR_MASK_COLOR) == 0 && depth < 8)
        png_set_expand_gray_1_2_4_to_8(p);
    if (depth == 16)
        png_set_strip_16(p);
    png_set_strip_alpha(p);
    png_set_interlace_handling(p);
    png_read_update_info(p, info);
    uint32_t ch = png_get_channels(p, info);
    if ((ch != 1 && ch != 3) || png_get_rowbytes(p, info) != (size_t)w * ch) {
        error_set(err, 400, "invalid PNG: unsupported pixel layout");
        goto out_destroy;
    }
    x.px = mem_alloc((size_t)w * h * ch);
    x.rows = mem_calloc(h, sizeof *x.rows);
    if (!x.px || !x.rows) {
        error_set(err, 500, "out of memory decoding a PNG of %ux%u", w, h);
        mem_free(x.px);
        x.px = NULL;
        goto out_destroy;
    }
    for (uint32_t y = 0; y < h; y++)
        x.rows[y] = x.px + (size_t)y * w * ch;
    png_read_image(p, x.rows);
    out->px = x.px;
    out->w = w;
    out->h = h;
    out->channels = ch;
    x.px = NULL;
    x.rc = 0;
out_destroy:
    mem_free(x.rows);
    png_destroy_read_struct(&p, info ? &info : NULL, NULL);
    return x.rc;
}

int image_decode(const uint8_t *data, size_t len, const struct image_decode_opts *opts,
                 struct image_pixels *out, struct error *err)
{
    memset(out, 0, sizeof *out);
    enum image_format f = image_sniff(data, len);
    if (f == IMAGE_NONE)
        return error_set(err, 400, "not a PNG or JPEG image");
    if (!(opts->formats & f))
        return error_set(err, 400, "%s images are not accepted", f == IMAGE_JPEG ? "JPEG" : "PNG");
    return f == IMAGE_JPEG ? decode_jpeg(data, len, opts, out, err)
                           : decode_png(data, len, opts, out, err);
}
