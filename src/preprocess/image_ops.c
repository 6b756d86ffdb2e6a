/*
 * image_ops.c: Pillow-compatible resampling and the output pass of the
 * image modality (image_ops.h).
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "base/mem.h"
#include "preprocess/image_ops.h"

void image_pixels_free(struct image_pixels *img)
{
    mem_free(img->px);
    img->px = NULL;
    img->w = img->h = img->channels = 0;
}

void image_fit_shorter(uint32_t w, uint32_t h, uint32_t s, uint32_t *ow, uint32_t *oh)
{
    uint64_t shorter = w < h ? w : h;
    uint64_t lw = ((uint64_t)w * s * 2 + shorter) / (2 * shorter);
    uint64_t lh = ((uint64_t)h * s * 2 + shorter) / (2 * shorter);
    *ow = lw ? (uint32_t)lw : 1;
    *oh = lh ? (uint32_t)lh : 1;
}

void image_to_gray(struct image_pixels *img)
{
    if (img->channels != 3)
        return;
    size_t n = (size_t)img->w * img->h;
    const uint8_t *in = img->px;
    for (size_t i = 0; i < n; i++, in += 3)
        img->px[i] = (uint8_t)((in[0] * 19595u + in[1] * 38470u + in[2] * 7471u + 0x8000u) >> 16);
    img->channels = 1;
}

/* ---- resampling (Pillow's Resample.c, precompute_coeffs) --------------- */

static double filter_eval(enum image_filter f, double x)
{
    if (f == IMAGE_BOX)
        return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0;
    if (x < 0.0)
        x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Per output pixel: the first input pixel and ksize weights (zero past
 * the used ones). */
struct coeffs {
    uint32_t ksize;
    uint32_t *lo, *n;
    double *k; /* out * ksize */
};

static int coeffs_make(struct coeffs *c, enum image_filter f, uint32_t in, uint32_t out)
{
    double scale = (double)in / out;
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = (f == IMAGE_BOX ? 0.5 : 1.0) * filterscale;
    c->ksize = (uint32_t)ceil(support) * 2 + 1;
    c->lo = mem_calloc(out, sizeof *c->lo);
    c->n = mem_calloc(out, sizeof *c->n);
    c->k = mem_calloc((size_t)out * c->ksize, sizeof *c->k);
    if (!c->lo || !c->n || !c->k)
        return -ENOMEM;
    double ss = 1.0 / filterscale;
    for (uint32_t xx = 0; xx < out; xx++) {
        double center = (xx + 0.5) * scale;
        double ww = 0.0;
        int64_t xmin = (int64_t)(center - support + 0.5);
        int64_t xmax = (int64_t)(center + support + 0.5);
        if (xmin < 0)
            xmin = 0;
        if (xmax > (int64_t)in)
            xmax = in;
        xmax -= xmin;
        if (xmax > (int64_t)c->ksize)
            xmax = c->ksize;
        double *k = c->k + (size_t)xx * c->ksize;
        for (int64_t x = 0; x < xmax; x++) {
            double w = filter_eval(f, (x + xmin - center + 0.5) * ss);
            k[x] = w;
            ww += w;
        }
        if (ww != 0.0)
            for (int64_t x = 0; x < xmax; x++)
                k[x] /= ww;
        c->lo[xx] = (uint32_t)xmin;
        c->n[xx] = (uint32_t)(xmax > 0 ? xmax : 0);
    }
    return 0;
}

static void coeffs_free(struct coeffs *c)
{
    mem_free(c->lo);
    mem_free(c->n);
    mem_free(c->k);
}

/* byte_value[v] == v: a load instead of a conversion of each byte to double. */
#define D4(i) i, i + 1, i + 2, i + 3
#define D16(i) D4(i), D4(i + 4), D4(i + 8), D4(i + 12)
#define D64(i) D16(i), D16(i + 16), D16(i + 32), D16(i + 48)
static const double byte_value[256] = {D64(0), D64(64), D64(128), D64(192)};
#undef D64
#undef D16
#undef D4

/* The sums of one window per channel, in the order Pillow adds them
 * (tap 0 first, from 0.0): hsum along an interleaved row of bytes, vsum
 * down interleaved float rows (one pointer per tap, at the pixel). */
static void hsum(const uint8_t *p, const double *k, uint32_t n, uint32_t ch, double *ss)
{
    if (ch == 3) {
        double s0 = 0.0, s1 = 0.0, s2 = 0.0;
        for (uint32_t i = 0; i < n; i++, p += 3) {
            s0 += byte_value[p[0]] * k[i];
            s1 += byte_value[p[1]] * k[i];
            s2 += byte_value[p[2]] * k[i];
        }
        ss[0] = s0;
        ss[1] = s1;
        ss[2] = s2;
        return;
    }
    for (uint32_t c = 0; c < ch; c++) {
        double s = 0.0;
        for (uint32_t i = 0; i < n; i++)
            s += byte_value[p[(size_t)i * ch + c]] * k[i];
        ss[c] = s;
    }
}

static void vsum(const float *const *rows, size_t at, const double *k, uint32_t n, uint32_t ch,
                 double *ss)
{
    if (ch == 3) {
        double s0 = 0.0, s1 = 0.0, s2 = 0.0;
        for (uint32_t i = 0; i < n; i++) {
            const float *p = rows[i] + at;
            s0 += p[0] * k[i];
            s1 += p[1] * k[i];
            s2 += p[2] * k[i];
        }
        ss[0] = s0;
        ss[1] = s1;
        ss[2] = s2;
        return;
    }
    for (uint32_t c = 0; c < ch; c++) {
        double s = 0.0;
        for (uint32_t i = 0; i < n; i++)
            s += rows[i][at + c] * k[i];
        ss[c] = s;
    }
}

/* The horizontal pass of input row y over the window's columns into out
 * (channels interleaved). */
static void hpass(const struct image_pixels *img, const struct coeffs *cx,
                  const struct image_window *win, uint32_t y, float *out)
{
    uint32_t ch = img->channels;
    const uint8_t *row = img->px + (size_t)y * img->w * ch;
    for (uint32_t x = win->x0; x < win->x0 + win->w; x++, out += ch) {
        double ss[3];
        hsum(row + (size_t)cx->lo[x] * ch, cx->k + (size_t)x * cx->ksize, cx->n[x], ch, ss);
        for (uint32_t c = 0; c < ch; c++)
            out[c] = (float)ss[c];
    }
}

int image_resample(const struct image_pixels *img, enum image_filter filter, uint32_t ow,
                   uint32_t oh, const struct image_window *win, float *dst)
{
    uint32_t ch = img->channels;
    struct coeffs cx = {0}, cy = {0};
    float *ring = NULL;
    const float **rows = NULL;
    int rc = -ENOMEM;

    if (coeffs_make(&cx, filter, img->w, ow) != 0 || coeffs_make(&cy, filter, img->h, oh) != 0)
        goto out_free;
    /* The horizontal pass of the last nring input rows (an output row
     * reads at most that many, and its first one never goes back), row y
     * at ring + (y % nring) * stride. */
    uint32_t nring = cy.ksize < img->h ? cy.ksize : img->h;
    size_t stride = (size_t)win->w * ch, plane = (size_t)win->w * win->h;
    ring = mem_alloc(stride * nring * sizeof *ring);
    rows = mem_alloc(nring * sizeof *rows);
    if (!ring || !rows)
        goto out_free;
    uint32_t next = 0; /* the first input row not in the ring */
    for (uint32_t yy = 0; yy < win->h; yy++) {
        uint32_t oy = win->y0 + yy, lo = cy.lo[oy], n = cy.n[oy];
        if (next < lo)
            next = lo;
        for (; next < lo + n; next++)
            hpass(img, &cx, win, next, ring + (next % nring) * stride);
        for (uint32_t i = 0; i < n; i++)
            rows[i] = ring + ((lo + i) % nring) * stride;
        float *o = dst + (size_t)yy * win->w;
        for (uint32_t xx = 0; xx < win->w; xx++) {
            double ss[3];
            vsum(rows, (size_t)xx * ch, cy.k + (size_t)oy * cy.ksize, n, ch, ss);
            for (uint32_t c = 0; c < ch; c++)
                o[c * plane + xx] = (float)ss[c];
        }
    }
    rc = 0;
out_free:
    mem_free(rows);
    mem_free(ring);
    coeffs_free(&cx);
    coeffs_free(&cy);
    return rc;
}

/* ---- output ------------------------------------------------------------ */

static uint8_t to_u8(float v)
{
    if (!(v > 0.0f))
        return 0;
    if (v >= 255.0f)
        return 255;
    return (uint8_t)(v + 0.5f);
}

void image_emit(const struct image_emit *e, const float *planes, void *out)
{
    size_t plane = (size_t)e->w * e->h;
    float *of = out;
    uint8_t *ou = out;
    for (uint32_t c = 0; c < e->channels; c++) {
        uint32_t p = e->replicate ? 0 : (e->bgr ? 2 - c : c);
        const float *src = planes + p * plane;
        for (uint32_t y = 0; y < e->h; y++) {
            const float *row = src + (size_t)y * e->w;
            for (uint32_t x = 0; x < e->w; x++) {
                float v = row[x];
                if (e->invert)
                    v = 255.0f - v;
                size_t i = e->hwc ? ((size_t)y * e->w + x) * e->channels + c
                                  : ((size_t)c * e->h + y) * e->w + x;
                if (e->dtype == DT_UINT8)
                    ou[i] = to_u8(v);
                else
                    of[i] = v * e->scale[c] + e->offset[c];
            }
        }
    }
}
