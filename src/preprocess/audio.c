/*
 * audio.c: the "audio" modality (modality.h): a WAV file in, a fixed
 * number of mono samples at a fixed rate out, as the waveform or as its
 * log mel spectrogram (docs/preprocessing.md, "Audio").
 *
 * A run decodes the WAV (wav.h) to mono floats, resamples it with
 * libsamplerate's src_simple() when its rate differs (a converter of its
 * own per call: thread-safe), pads it with zeros at the end or trims it to
 * "samples", and computes the features (logmel.h) when configured. Only
 * the input that can reach the kept samples is decoded: the first
 * "samples" frames, or when resampling that many at the file's rate plus
 * RESAMPLE_MARGIN zero crossings of the sinc filter (libsamplerate's
 * longest filter, sinc_best, spans 143 on each side), so a long file costs
 * no more than a short one.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include <samplerate.h>

#include "base/clock.h"
#include "base/mem.h"
#include "base/status.h"
#include "preprocess/logmel.h"
#include "preprocess/modality.h"
#include "preprocess/wav.h"

#define RESAMPLE_MARGIN 160 /* zero crossings, at the lower of the two rates */
#define MAX_BYTES_LIMIT (1u << 30)
#define MAX_SECONDS_LIMIT 3600.0
#define MIN_RATE 8000
#define MAX_RATE 192000
#define MAX_SAMPLES (1u << 24)
#define MAX_FEATURES (1u << 24) /* n_mels * frames */

struct audio_cfg {
    uint64_t max_bytes;
    double max_seconds;
    uint32_t sample_rate, samples;
    int converter; /* SRC_SINC_MEDIUM_QUALITY, ... */
    bool features, frames_major;
    struct logmel lm;
};

/* ---- parse ----------------------------------------------------------- */

static int check_keys(const struct json_value *obj, const char *path, const char *const *keys,
                      struct error *err)
{
    if (!obj || obj->type != JSON_OBJECT)
        return error_set(err, 400, "%s must be an object", path);
    for (uint32_t i = 0; i < obj->len; i++) {
        const char *k = obj->u.members[i].key;
        bool known = false;
        for (const char *const *p = keys; *p && !known; p++)
            known = strcmp(*p, k) == 0;
        if (!known)
            return error_set(err, 400, "%s has an unknown key '%s'", path, k);
    }
    return 0;
}

/* An integer member from lo to hi, or def when absent. */
static int get_uint(const struct json_value *obj, const char *key, const char *path, uint64_t lo,
                    uint64_t hi, uint64_t def, uint64_t *out, struct error *err)
{
    const struct json_value *v = json_get(obj, key);
    *out = def;
    if (!v)
        return 0;
    if (json_num_u64(v, out) || *out < lo || *out > hi)
        return error_set(err, 400, "%s.%s must be an integer from %llu to %llu", path, key,
                         (unsigned long long)lo, (unsigned long long)hi);
    return 0;
}

/* A finite number in [lo, hi] (above lo when lo_open), or def when absent. */
static int get_num(const struct json_value *obj, const char *key, const char *path, double lo,
                   bool lo_open, double hi, double def, double *out, struct error *err)
{
    const struct json_value *v = json_get(obj, key);
    *out = def;
    if (!v)
        return 0;
    if (json_num_f64(v, out) || !isfinite(*out) || *out < lo || (lo_open && *out == lo) ||
        *out > hi)
        return error_set(err, 400, "%s.%s must be a number %s %g and at most %g", path, key,
                         lo_open ? "above" : "from", lo, hi);
    return 0;
}

/* One of names[] (the index into *out), or def when absent. */
static int get_choice(const struct json_value *obj, const char *key, const char *path,
                      const char *const *names, const char *list, int def, int *out,
                      struct error *err)
{
    const struct json_value *v = json_get(obj, key);
    *out = def;
    if (!v)
        return 0;
    if (v->type == JSON_STRING)
        for (int i = 0; names[i]; i++)
            if (strcmp(names[i], v->u.str) == 0) {
                *out = i;
                return 0;
            }
    return error_set(err, 400, "%s.%s must be one of %s", path, key, list);
}

static int parse_features(const struct json_value *f, struct audio_cfg *c, struct logmel_params *p,
                          struct error *err)
{
    static const char *const keys[] = {"type",   "n_fft", "win_length", "hop_length", "window",
                                       "n_mels", "fmin",  "fmax",       "log_floor",  NULL};
    static const char *const types[] = {"log_mel", NULL};
    static const char *const windows[] = {"hann", NULL};
    const char *path = "audio.features";
    int choice;
    uint64_t n_fft, win, hop, n_mels;
    double nyquist = c->sample_rate / 2.0;
    if (check_keys(f, path, keys, err) ||
        get_choice(f, "type", path, types, "\"log_mel\"", 0, &choice, err) ||
        get_choice(f, "window", path, windows, "\"hann\"", 0, &choice, err) ||
        get_uint(f, "n_fft", path, 16, 8192, 512, &n_fft, err) ||
        get_uint(f, "win_length", path, 1, n_fft, n_fft < 400 ? n_fft : 400, &win, err) ||
        get_uint(f, "hop_length", path, 1, MAX_SAMPLES, 160, &hop, err) ||
        get_uint(f, "n_mels", path, 1, 256, 40, &n_mels, err) ||
        get_num(f, "fmax", path, 0.0, true, nyquist, nyquist, &p->fmax, err) ||
        get_num(f, "fmin", path, 0.0, false, p->fmax, 0.0, &p->fmin, err) ||
        get_num(f, "log_floor", path, 0.0, true, 1.0, 1e-10, &p->log_floor, err))
        return ST_ERROR;
    if (p->fmin >= p->fmax)
        return error_set(err, 400, "audio.features.fmin (%g) must be below fmax (%g)", p->fmin,
                         p->fmax);
    if (c->samples < win)
        return error_set(err, 400,
                         "audio.samples (%u) must be at least audio.features.win_length (%llu)",
                         c->samples, (unsigned long long)win);
    uint64_t frames = 1 + (c->samples - win) / hop;
    if (frames * n_mels > MAX_FEATURES)
        return error_set(err, 400,
                         "audio.features would yield %llu values (n_mels * frames), over %u",
                         (unsigned long long)(frames * n_mels), MAX_FEATURES);
    p->sample_rate = c->sample_rate;
    p->samples = c->samples;
    p->n_fft = (uint32_t)n_fft;
    p->win_length = (uint32_t)win;
    p->hop_length = (uint32_t)hop;
    p->n_mels = (uint32_t)n_mels;
    return 0;
}

static int audio_parse(const struct json_value *obj, const char *model_dir, void **cfg,
                       struct error *err)
{
    (void)model_dir;
    static const char *const keys[] = {"max_bytes", "max_seconds", "sample_rate", "resampler",
                                       "samples",   "features",    "layout",      NULL};
    static const char *const resamplers[] = {"sinc_best", "sinc_medium", "sinc_fastest", "linear",
                                             NULL};
    static const int converters[] = {SRC_SINC_BEST_QUALITY, SRC_SINC_MEDIUM_QUALITY,
                                     SRC_SINC_FASTEST, SRC_LINEAR};
    static const char *const layouts[] = {"mels_frames", "frames_mels", NULL};
    struct audio_cfg c = {0};
    uint64_t rate, samples;
    int resampler, layout;
    if (check_keys(obj, "audio", keys, err) ||
        get_uint(obj, "max_bytes", "audio", 1, MAX_BYTES_LIMIT, 16777216, &c.max_bytes, err) ||
        get_num(obj, "max_seconds", "audio", 0.0, true, MAX_SECONDS_LIMIT, 30.0, &c.max_seconds,
                err) ||
        get_uint(obj, "sample_rate", "audio", MIN_RATE, MAX_RATE, 16000, &rate, err) ||
        get_choice(obj, "resampler", "audio", resamplers,
                   "\"sinc_best\", \"sinc_medium\", \"sinc_fastest\", \"linear\"", 1, &resampler,
                   err) ||
        get_choice(obj, "layout", "audio", layouts, "\"mels_frames\", \"frames_mels\"", 0, &layout,
                   err))
        return ST_ERROR;
    if (!json_get(obj, "samples"))
        return error_set(err, 400, "audio.samples is required");
    if (get_uint(obj, "samples", "audio", 1, MAX_SAMPLES, 0, &samples, err))
        return ST_ERROR;
    c.sample_rate = (uint32_t)rate;
    c.samples = (uint32_t)samples;
    c.converter = converters[resampler];
    c.frames_major = layout == 1;
    const struct json_value *f = json_get(obj, "features");
    if (!f && json_get(obj, "layout"))
        return error_set(err, 400, "audio.layout applies to audio.features only");
    struct logmel_params p = {0};
    if (f && parse_features(f, &c, &p, err))
        return ST_ERROR;
    struct audio_cfg *out = mem_alloc(sizeof *out);
    if (!out)
        return error_set(err, 500, "out of memory");
    *out = c;
    if (f) {
        if (logmel_init(&out->lm, &p)) {
            mem_free(out);
            return error_set(err, 500, "out of memory");
        }
        out->features = true;
    }
    *cfg = out;
    return 0;
}

static void audio_free(void *cfg)
{
    struct audio_cfg *c = cfg;
    if (!c)
        return;
    if (c->features)
        logmel_free(&c->lm);
    mem_free(c);
}

static uint32_t audio_outputs(const void *cfg, struct prep_output *out)
{
    const struct audio_cfg *c = cfg;
    out[0] = (struct prep_output){.name = NULL, .dtype = DT_FP32};
    if (!c->features) {
        out[0].ndim = 1;
        out[0].dims[0] = c->samples;
    } else {
        out[0].ndim = 2;
        out[0].dims[c->frames_major ? 1 : 0] = c->lm.p.n_mels;
        out[0].dims[c->frames_major ? 0 : 1] = c->lm.frames;
    }
    return 1;
}

/* ---- run --------------------------------------------------------------- */

/* The input frames that can reach the first c->samples output samples. */
static uint64_t frames_needed(const struct audio_cfg *c, const struct wav_info *w)
{
    uint64_t n = c->samples;
    if (w->sample_rate != c->sample_rate) {
        double ratio = (double)c->sample_rate / w->sample_rate;
        n = (uint64_t)ceil(c->samples / ratio + RESAMPLE_MARGIN / fmin(ratio, 1.0));
    }
    return n < w->frames ? n : w->frames;
}

/* Fills wave[0..c->samples) from mono[0..n) at w's rate. */
static int resample(const struct audio_cfg *c, const struct wav_info *w, const float *mono,
                    uint64_t n, float *wave, struct error *err)
{
    uint64_t got = 0;
    if (w->sample_rate == c->sample_rate) {
        got = n;
        memcpy(wave, mono, n * sizeof *wave);
    } else if (n > 0) {
        SRC_DATA d = {
            .data_in = mono,
            .data_out = wave,
            .input_frames = (long)n,
            .output_frames = (long)c->samples,
            .src_ratio = (double)c->sample_rate / w->sample_rate,
        };
        int rc = src_simple(&d, c->converter, 1);
        if (rc)
            return error_set(err, 500, "resampling failed: %s", src_strerror(rc));
        got = (uint64_t)d.output_frames_gen;
    }
    for (uint64_t i = got; i < c->samples; i++)
        wave[i] = 0.0f;
    return 0;
}

static int audio_run(const void *cfg, const uint8_t *data, size_t len, struct prep_mem *mem,
                     struct tensor *out, struct prep_timings *tm, struct error *err)
{
    const struct audio_cfg *c = cfg;
    if (len > c->max_bytes)
        return error_set(err, 413, "WAV of %zu bytes is over audio.max_bytes (%llu)", len,
                         (unsigned long long)c->max_bytes);
    uint64_t t0 = clock_now_ns();
    struct wav_info w;
    if (wav_parse(data, len, c->max_seconds, &w, err))
        return ST_ERROR;
    struct prep_output shape;
    audio_outputs(c, &shape);
    size_t out_count = (size_t)shape.dims[0] * (shape.ndim == 2 ? (size_t)shape.dims[1] : 1);
    float *result = prep_mem_alloc(mem, out_count * sizeof(float));
    uint64_t n = frames_needed(c, &w);
    float *mono = mem_alloc((n ? n : 1) * sizeof *mono);
    float *wave = c->features ? mem_alloc(c->samples * sizeof *wave) : result;
    int rc = ST_ERROR;
    if (!result || !mono || !wave) {
        error_set(err, 500, "out of memory for audio preprocessing");
        goto out_free;
    }
    if (wav_decode_mono(&w, n, mono, err))
        goto out_free;
    uint64_t t1 = clock_now_ns();
    prep_timing_add(tm, "decode", t1 - t0);
    if (resample(c, &w, mono, n, wave, err))
        goto out_free;
    uint64_t t2 = clock_now_ns();
    if (w.sample_rate != c->sample_rate)
        prep_timing_add(tm, "resample", t2 - t1);
    if (c->features) {
        if (logmel_run(&c->lm, wave, c->frames_major, result)) {
            error_set(err, 500, "out of memory for audio features");
            goto out_free;
        }
        prep_timing_add(tm, "features", clock_now_ns() - t2);
    }
    prep_tensor_set(&out[0], &shape, result, out_count * sizeof(float));
    rc = 0;
out_free:
    mem_free(mono);
    if (wave != result)
        mem_free(wave);
    return rc;
}

static const char *const audio_content_types[] = {"audio/wav", "audio/x-wav", "audio/wave",
                                                  "audio/vnd.wave", NULL};

const struct prep_modality prep_audio = {
    .key = "audio",
    .content_types = audio_content_types,
    .parse = audio_parse,
    .free = audio_free,
    .outputs = audio_outputs,
    .run = audio_run,
};
