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

/*
 * The passes run vertical first, on float copies of the source rows the
 * window reads, so that the pass over the most values (every source
 * column the window's taps reach, times the taps of each output row) is a
 * contiguous multiply-add run four lanes at a time; the horizontal pass
 * then reads one output row's worth. Both passes are linear, so the order
 * changes only float rounding (about 1e-4 on the 0..255 scale): the
 * weights are Pillow's, normalised in double, applied in float.
 */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef uint16_t v8u16 __attribute__((vector_size(16)));
typedef uint8_t v16u8 __attribute__((vector_size(16)));

static v4f load4(const float *p)
{
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void store4(float *p, v4f v)
{
    memcpy(p, &v, sizeof v);
}

/* n bytes to floats, 16 at a time: each byte interleaved with zeros to
 * 16 bits, then to 32 (the unpack instructions), then converted. */
static void widen(const uint8_t *src, size_t n, float *dst)
{
    const v16u8 z8 = {0};
    const v8u16 z16 = {0};
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        v16u8 b;
        memcpy(&b, src + j, sizeof b);
        v8u16 lo = (v8u16)__builtin_shufflevector(b, z8, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5,
                                                  21, 6, 22, 7, 23);
        v8u16 hi = (v8u16)__builtin_shufflevector(b, z8, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28,
                                                  13, 29, 14, 30, 15, 31);
        v8u16 lo_lo = __builtin_shufflevector(lo, z16, 0, 8, 1, 9, 2, 10, 3, 11);
        v8u16 lo_hi = __builtin_shufflevector(lo, z16, 4, 12, 5, 13, 6, 14, 7, 15);
        v8u16 hi_lo = __builtin_shufflevector(hi, z16, 0, 8, 1, 9, 2, 10, 3, 11);
        v8u16 hi_hi = __builtin_shufflevector(hi, z16, 4, 12, 5, 13, 6, 14, 7, 15);
        store4(dst + j, __builtin_convertvector((v4i)lo_lo, v4f));
        store4(dst + j + 4, __builtin_convertvector((v4i)lo_hi, v4f));
        store4(dst + j + 8, __builtin_convertvector((v4i)hi_lo, v4f));
        store4(dst + j + 12, __builtin_convertvector((v4i)hi_hi, v4f));
    }
    for (; j < n; j++)
        dst[j] = (float)src[j];
}

/* out[j] = sum over the n taps of k[i] * rows[i][j], for j < len. */
static void vertical(const float *const *rows, const float *k, uint32_t n, size_t len, float *out)
{
    size_t j = 0;
    for (; j + 16 <= len; j += 16) {
        v4f a = {0}, b = {0}, c = {0}, d = {0};
        for (uint32_t i = 0; i < n; i++) {
            const float *r = rows[i] + j;
            v4f w = {k[i], k[i], k[i], k[i]};
            a += load4(r) * w;
            b += load4(r + 4) * w;
            c += load4(r + 8) * w;
            d += load4(r + 12) * w;
        }
        store4(out + j, a);
        store4(out + j + 4, b);
        store4(out + j + 8, c);
        store4(out + j + 12, d);
    }
    for (; j < len; j++) {
        float s = 0.0f;
        for (uint32_t i = 0; i < n; i++)
            s += rows[i][j] * k[i];
        out[j] = s;
    }
}

/* The window's row yy from the vertically resampled row `row` (its first
 * pixel is source column sx0): each output pixel sums its taps. Three
 * channels are summed as one vector of four lanes (the fourth reads the
 * next pixel, or the row's slack, and is dropped), with each weight
 * already in all four lanes (kv: the window's weights, also read from lane
 * 0 by the other channel counts) and two taps at a time. */
static void horizontal(const float *row, uint32_t sx0, uint32_t ch, const struct coeffs *cx,
                       const v4f *kv, const struct image_window *win, size_t plane, float *dst)
{
    for (uint32_t xx = 0; xx < win->w; xx++) {
        uint32_t x = win->x0 + xx, n = cx->n[x];
        const float *p = row + (size_t)(cx->lo[x] - sx0) * ch;
        const v4f *k = kv + (size_t)xx * cx->ksize;
        if (ch == 3) {
            v4f s = {0}, t = {0};
            uint32_t i = 0;
            for (; i + 2 <= n; i += 2) {
                s += load4(p + (size_t)i * 3) * k[i];
                t += load4(p + (size_t)i * 3 + 3) * k[i + 1];
            }
            if (i < n)
                s += load4(p + (size_t)i * 3) * k[i];
            s += t;
            dst[xx] = s[0];
            dst[plane + xx] = s[1];
            dst[2 * plane + xx] = s[2];
            continue;
        }
        for (uint32_t c = 0; c < ch; c++) {
            float s = 0.0f;
            for (uint32_t i = 0; i < n; i++)
                s += p[(size_t)i * ch + c] * k[i][0];
            dst[c * plane + xx] = s;
        }
    }
}

int image_resample(const struct image_pixels *img, enum image_filter filter, uint32_t ow,
                   uint32_t oh, const struct image_window *win, float *dst)
{
    uint32_t ch = img->channels;
    struct coeffs cx = {0}, cy = {0};
    float *ring = NULL, *row = NULL, *ky = NULL;
    v4f *kv = NULL;
    const float **rows = NULL;
    int rc = -ENOMEM;

    if (coeffs_make(&cx, filter, img->w, ow) != 0 || coeffs_make(&cy, filter, img->h, oh) != 0)
        goto out_free;
    /* The source columns the window's taps reach: [sx0, sx1). */
    uint32_t sx0 = UINT32_MAX, sx1 = 0;
    for (uint32_t x = win->x0; x < win->x0 + win->w; x++) {
        sx0 = cx.lo[x] < sx0 ? cx.lo[x] : sx0;
        sx1 = cx.lo[x] + cx.n[x] > sx1 ? cx.lo[x] + cx.n[x] : sx1;
    }
    size_t span = (size_t)(sx1 - sx0) * ch, stride = span + 4; /* + the fourth lane's slack */
    /* Float copies of the last nring source rows (an output row reads at
     * most that many, and its first one never goes back), row y at
     * ring + (y % nring) * stride. */
    uint32_t nring = cy.ksize < img->h ? cy.ksize : img->h;
    ring = mem_alloc(stride * nring * sizeof *ring);
    row = mem_calloc(stride, sizeof *row);
    rows = mem_alloc(nring * sizeof *rows);
    kv = mem_alloc((size_t)win->w * cx.ksize * sizeof *kv);
    ky = mem_alloc((size_t)cy.ksize * sizeof *ky);
    if (!ring || !row || !rows || !kv || !ky)
        goto out_free;
    for (size_t i = 0; i < (size_t)win->w * cx.ksize; i++) {
        float w = (float)cx.k[(size_t)win->x0 * cx.ksize + i];
        kv[i] = (v4f){w, w, w, w};
    }
    size_t plane = (size_t)win->w * win->h;
    uint32_t next = 0; /* the first source row not in the ring */
    for (uint32_t yy = 0; yy < win->h; yy++) {
        uint32_t oy = win->y0 + yy, lo = cy.lo[oy], n = cy.n[oy];
        if (next < lo)
            next = lo;
        for (; next < lo + n; next++)
            widen(img->px + ((size_t)next * img->w + sx0) * ch, span,
                  ring + (next % nring) * stride);
        for (uint32_t i = 0; i < n; i++) {
            rows[i] = ring + ((lo + i) % nring) * stride;
            ky[i] = (float)cy.k[(size_t)oy * cy.ksize + i];
        }
        vertical(rows, ky, n, span, row);
        horizontal(row, sx0, ch, &cx, kv, win, plane, dst + (size_t)yy * win->w);
    }
    rc = 0;
out_free:
    mem_free(ky);
    mem_free(kv);
    mem_free(rows);
    mem_free(row);
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

/* FP32 out[i * step] = (invert ? 255 - src[i] : src[i]) * scale + offset,
 * four at a time when the channel's elements are contiguous (CHW). */
static void emit_fp32(const float *src, size_t n, bool invert, float scale, float offset,
                      float *out, size_t step)
{
    size_t i = 0;
    if (step == 1) {
        v4f s = {scale, scale, scale, scale}, o = {offset, offset, offset, offset};
        v4f full = {255.0f, 255.0f, 255.0f, 255.0f};
        for (; i + 4 <= n; i += 4) {
            v4f v = load4(src + i);
            store4(out + i, (invert ? full - v : v) * s + o);
        }
    }
    for (; i < n; i++)
        out[i * step] = (invert ? 255.0f - src[i] : src[i]) * scale + offset;
}

void image_emit(const struct image_emit *e, const float *planes, void *out)
{
    size_t plane = (size_t)e->w * e->h;
    for (uint32_t c = 0; c < e->channels; c++) {
        uint32_t p = e->replicate ? 0 : (e->bgr ? 2 - c : c);
        const float *src = planes + p * plane;
        /* This channel's element i goes to first + i * step. */
        size_t first = e->hwc ? c : (size_t)c * plane, step = e->hwc ? e->channels : 1;
        if (e->dtype == DT_UINT8) {
            uint8_t *ou = (uint8_t *)out + first;
            for (size_t i = 0; i < plane; i++)
                ou[i * step] = to_u8(e->invert ? 255.0f - src[i] : src[i]);
        } else {
            emit_fp32(src, plane, e->invert, e->scale[c], e->offset[c], (float *)out + first,
                      step);
        }
    }
}
