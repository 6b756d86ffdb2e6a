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

int image_resample(const struct image_pixels *img, enum image_filter filter, uint32_t ow,
                   uint32_t oh, float *dst)
{
    uint32_t w = img->w, h = img->h, ch = img->channels;
    struct coeffs cx = {0}, cy = {0};
    float *tmp = NULL;
    int rc = -ENOMEM;

    if (coeffs_make(&cx, filter, w, ow) != 0 || coeffs_make(&cy, filter, h, oh) != 0)
        goto out_free;
    tmp = mem_alloc((size_t)ow * h * sizeof *tmp); /* one channel's horizontal pass */
    if (!tmp)
        goto out_free;
    for (uint32_t c = 0; c < ch; c++) {
        for (uint32_t y = 0; y < h; y++) {
            const uint8_t *row = img->px + (size_t)y * w * ch + c;
            float *t = tmp + (size_t)y * ow;
            for (uint32_t xx = 0; xx < ow; xx++) {
                const double *k = cx.k + (size_t)xx * cx.ksize;
                const uint8_t *p = row + (size_t)cx.lo[xx] * ch;
                double ss = 0.0;
                for (uint32_t i = 0; i < cx.n[xx]; i++)
                    ss += p[(size_t)i * ch] * k[i];
                t[xx] = (float)ss;
            }
        }
        float *plane = dst + (size_t)c * ow * oh;
        for (uint32_t yy = 0; yy < oh; yy++) {
            const double *k = cy.k + (size_t)yy * cy.ksize;
            const float *base = tmp + (size_t)cy.lo[yy] * ow;
            float *o = plane + (size_t)yy * ow;
            for (uint32_t xx = 0; xx < ow; xx++) {
                double ss = 0.0;
                for (uint32_t i = 0; i < cy.n[yy]; i++)
                    ss += base[(size_t)i * ow + xx] * k[i];
                o[xx] = (float)ss;
            }
        }
    }
    rc = 0;
out_free:
    mem_free(tmp);
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
    size_t plane = (size_t)e->src_w * e->src_h;
    float *of = out;
    uint8_t *ou = out;
    for (uint32_t c = 0; c < e->channels; c++) {
        uint32_t p = e->replicate ? 0 : (e->bgr ? 2 - c : c);
        const float *src = planes + p * plane;
        for (uint32_t y = 0; y < e->h; y++) {
            const float *row = src + (size_t)(e->y0 + y) * e->src_w + e->x0;
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
