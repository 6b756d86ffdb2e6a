/*
 * logmel.c: log mel spectrogram (logmel.h).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <fftw3.h>

#include "base/mem.h"
#include "preprocess/logmel.h"

#define ALIGN 64 /* FFTW wants a run's arrays aligned as the plan's were */

/* n_fft floats and bins complex values, ALIGN-aligned, in one block. */
struct fft_buf {
    void *block;
    float *in;
    fftwf_complex *out;
};

static int fft_buf_alloc(struct fft_buf *b, uint32_t n_fft, uint32_t bins)
{
    size_t in_bytes = ((size_t)n_fft * sizeof(float) + ALIGN - 1) / ALIGN * ALIGN;
    b->block = mem_alloc(in_bytes + (size_t)bins * sizeof(fftwf_complex) + ALIGN);
    if (!b->block)
        return -ENOMEM;
    uintptr_t base = ((uintptr_t)b->block + ALIGN - 1) / ALIGN * ALIGN;
    b->in = (float *)base;
    b->out = (fftwf_complex *)(base + in_bytes);
    return 0;
}

static double hz_to_mel(double f)
{
    return 2595.0 * log10(1.0 + f / 700.0);
}

static double mel_to_hz(double m)
{
    return 700.0 * (pow(10.0, m / 2595.0) - 1.0);
}

/* Filter j (1..n_mels) between f[j-1], f[j], f[j+1], over bins. */
static int build_filters(struct logmel *lm)
{
    const struct logmel_params *p = &lm->p;
    double *f = mem_alloc((p->n_mels + 2) * sizeof *f);
    lm->weights = mem_calloc((size_t)p->n_mels * lm->bins, sizeof *lm->weights);
    lm->filters = mem_calloc(p->n_mels, sizeof *lm->filters);
    if (!f || !lm->weights || !lm->filters) {
        mem_free(f);
        return -ENOMEM;
    }
    double m0 = hz_to_mel(p->fmin), m1 = hz_to_mel(p->fmax);
    for (uint32_t i = 0; i < p->n_mels + 2; i++)
        f[i] = mel_to_hz(m0 + (m1 - m0) * i / (p->n_mels + 1));
    float *w = lm->weights;
    for (uint32_t j = 1; j <= p->n_mels; j++) {
        struct logmel_filter *flt = &lm->filters[j - 1];
        flt->w = w;
        flt->first = lm->bins;
        for (uint32_t k = 0; k < lm->bins; k++) {
            double fk = (double)k * p->sample_rate / p->n_fft;
            double up = (fk - f[j - 1]) / (f[j] - f[j - 1]);
            double down = (f[j + 1] - fk) / (f[j + 1] - f[j]);
            double v = fmax(0.0, fmin(up, down));
            if (v <= 0.0)
                continue;
            /* A triangle's support is one interval of bins. */
            if (flt->first == lm->bins)
                flt->first = k;
            w[flt->count++] = (float)v;
        }
        if (flt->first == lm->bins)
            flt->first = 0;
        w += flt->count;
    }
    mem_free(f);
    return 0;
}

int logmel_init(struct logmel *lm, const struct logmel_params *p)
{
    memset(lm, 0, sizeof *lm);
    lm->p = *p;
    lm->frames = 1 + (p->samples - p->win_length) / p->hop_length;
    lm->bins = p->n_fft / 2 + 1;
    lm->window = mem_calloc(p->n_fft, sizeof *lm->window);
    if (!lm->window || build_filters(lm))
        goto out_free;
    for (uint32_t n = 0; n < p->win_length; n++)
        lm->window[n] = (float)(0.5 - 0.5 * cos(2.0 * M_PI * n / p->win_length));
    struct fft_buf b;
    if (fft_buf_alloc(&b, p->n_fft, lm->bins))
        goto out_free;
    lm->plan = fftwf_plan_dft_r2c_1d((int)p->n_fft, b.in, b.out, FFTW_ESTIMATE);
    mem_free(b.block);
    if (!lm->plan)
        goto out_free;
    return 0;
out_free:
    logmel_free(lm);
    return -ENOMEM;
}

void logmel_free(struct logmel *lm)
{
    if (lm->plan)
        fftwf_destroy_plan(lm->plan);
    mem_free(lm->window);
    mem_free(lm->weights);
    mem_free(lm->filters);
    memset(lm, 0, sizeof *lm);
}

int logmel_run(const struct logmel *lm, const float *x, bool frames_major, float *out)
{
    const struct logmel_params *p = &lm->p;
    struct fft_buf b;
    if (fft_buf_alloc(&b, p->n_fft, lm->bins))
        return -ENOMEM;
    float *power = mem_alloc(lm->bins * sizeof *power);
    if (!power) {
        mem_free(b.block);
        return -ENOMEM;
    }
    for (uint32_t t = 0; t < lm->frames; t++) {
        const float *frame = x + (size_t)t * p->hop_length;
        for (uint32_t n = 0; n < p->win_length; n++)
            b.in[n] = frame[n] * lm->window[n];
        for (uint32_t n = p->win_length; n < p->n_fft; n++)
            b.in[n] = 0.0f;
        fftwf_execute_dft_r2c(lm->plan, b.in, b.out);
        for (uint32_t k = 0; k < lm->bins; k++)
            power[k] = b.out[k][0] * b.out[k][0] + b.out[k][1] * b.out[k][1];
        for (uint32_t j = 0; j < p->n_mels; j++) {
            const struct logmel_filter *flt = &lm->filters[j];
            double sum = 0.0;
            for (uint32_t i = 0; i < flt->count; i++)
                sum += (double)flt->w[i] * power[flt->first + i];
            float v = (float)log(fmax(sum, p->log_floor));
            out[frames_major ? (size_t)t * p->n_mels + j : (size_t)j * lm->frames + t] = v;
        }
    }
    mem_free(power);
    mem_free(b.block);
    return 0;
}
