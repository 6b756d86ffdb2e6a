/*
 * logmel: log mel spectrogram of a fixed-length waveform (audio.c's
 * "features"), as docs/preprocessing.md states it:
 *
 *   frames      no centering: frame t is samples [t*hop, t*hop + win),
 *               T = 1 + (samples - win) / hop
 *   window      periodic Hann of win samples, w[n] = 0.5 - 0.5 cos(2 pi n / win),
 *               zero-padded at the end to n_fft
 *   spectrum    |X[k]|^2, k = 0..n_fft/2 (FFTW3 single precision, r2c)
 *   mel         HTK mel(f) = 2595 log10(1 + f/700); n_mels + 2 points evenly
 *               spaced in mel from mel(fmin) to mel(fmax) give f_0..f_{n_mels+1};
 *               bin k is at k * rate / n_fft; filter j weighs it
 *               max(0, min((f - f_{j-1}) / (f_j - f_{j-1}), (f_{j+1} - f) / (f_{j+1} - f_j)))
 *               (no area normalisation)
 *   log         y = ln(max(mel, log_floor))
 *
 * Lifecycle: logmel_init() builds the window, the filter bank and the FFTW
 * plan (FFTW_ESTIMATE) once; logmel_free() destroys them. Both call FFTW's
 * planner, which is not thread-safe: one thread (the repository manager)
 * does all inits and frees. logmel_run() only reads the struct and
 * executes the plan on buffers of its own, so many threads may run it at
 * once.
 */
#ifndef INFERD_PREPROCESS_LOGMEL_H
#define INFERD_PREPROCESS_LOGMEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct logmel_params {
    uint32_t sample_rate, samples;          /* of the waveform; samples >= win_length */
    uint32_t n_fft, win_length, hop_length; /* win_length <= n_fft */
    uint32_t n_mels;
    double fmin, fmax; /* 0 <= fmin < fmax <= sample_rate / 2 */
    double log_floor;  /* > 0 */
};

struct logmel_filter {
    uint32_t first, count; /* the bins it weighs: [first, first + count) */
    float *w;              /* count weights, into logmel.weights */
};

struct logmel {
    struct logmel_params p;
    uint32_t frames, bins;         /* T, n_fft / 2 + 1 */
    float *window;                 /* n_fft, zero after win_length */
    float *weights;                /* every filter's weights, end to end */
    struct logmel_filter *filters; /* n_mels */
    void *plan;                    /* fftwf_plan */
};

/* Builds lm for p (already range-checked by the caller). 0, or -ENOMEM. */
int logmel_init(struct logmel *lm, const struct logmel_params *p);
void logmel_free(struct logmel *lm);

/* Features of x[0..p.samples) into out: n_mels * frames floats, mel-major
 * ([n_mels, T]) or, with frames_major, [T, n_mels]. 0, or -ENOMEM (its
 * scratch buffers are malloc'd per call). */
int logmel_run(const struct logmel *lm, const float *x, bool frames_major, float *out);

#endif
