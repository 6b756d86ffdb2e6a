/*
 * Unit tests for the audio modality (preprocess/audio.c, wav.c,
 * logmel.c), through prep_audio's parse/run as the stage calls them: WAV
 * files of every accepted encoding built here, sample by sample; padding,
 * trimming and resampling; a sine's log mel against a reference computed
 * here with a naive DFT in double precision; the errors of files and of
 * configurations; allocation failures.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/json.h"
#include "base/mem.h"
#include "preprocess/modality.h"

/* ---- helpers ---------------------------------------------------------- */

/* Parses cfg_json with prep_audio, its allocations failing after
 * fail_after of them (-1: none fail); returns the cfg or NULL with err. */
static void *parse_cfg_failing(const char *cfg_json, long fail_after, struct error *err)
{
    struct arena a;
    arena_init(&a, 4096, 1 << 20);
    struct json_value *root;
    const char *msg;
    size_t off;
    assert_int_equal(json_parse(&a, cfg_json, strlen(cfg_json), NULL, &root, &msg, &off), ST_OK);
    void *cfg = NULL;
    error_clear(err);
    mem_fail_after(fail_after);
    int rc = prep_audio.parse(root, ".", &cfg, err);
    mem_fail_reset();
    arena_free(&a);
    if (rc) {
        assert_int_equal(rc, -1);
        return NULL;
    }
    return cfg;
}

static void *parse_cfg(const char *cfg_json, struct error *err)
{
    return parse_cfg_failing(cfg_json, -1, err);
}

static void *must_parse(const char *cfg_json)
{
    struct error err;
    void *cfg = parse_cfg(cfg_json, &err);
    if (!cfg)
        fail_msg("parse failed: %s", err.msg);
    return cfg;
}

static void put16(struct buf *b, uint16_t v)
{
    uint8_t p[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    buf_append(b, p, 2);
}

static void put32(struct buf *b, uint32_t v)
{
    uint8_t p[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    buf_append(b, p, 4);
}

struct wav_spec {
    uint16_t tag; /* 1 PCM, 3 float, 6 A-law, 0xFFFE extensible */
    uint16_t sub; /* extensible: the subformat's tag */
    uint16_t channels, bits;
    uint32_t rate;
    bool odd_chunk; /* an odd-sized "LIST" chunk (with its pad byte) before fmt */
};

/* A WAV of s with data bytes data[0..n) (declared as declared bytes when
 * not 0). */
static void make_wav(struct buf *b, const struct wav_spec *s, const void *data, size_t n,
                     uint32_t declared)
{
    buf_init(b, 1u << 26);
    buf_puts(b, "RIFF");
    put32(b, 0); /* the RIFF size is not trusted: left wrong on purpose */
    buf_puts(b, "WAVE");
    if (s->odd_chunk) {
        buf_puts(b, "LIST");
        put32(b, 3);
        buf_append(b, "abc\0", 4);
    }
    bool ext = s->tag == 0xFFFE;
    buf_puts(b, "fmt ");
    put32(b, ext ? 40 : 16);
    put16(b, s->tag);
    put16(b, s->channels);
    put32(b, s->rate);
    put32(b, s->rate * s->channels * s->bits / 8);
    put16(b, (uint16_t)(s->channels * s->bits / 8));
    put16(b, s->bits);
    if (ext) {
        static const uint8_t tail[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                         0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};
        put16(b, 22);
        put16(b, s->bits);
        put32(b, 0);
        put16(b, s->sub);
        buf_append(b, tail, sizeof tail);
    }
    buf_puts(b, "data");
    put32(b, declared ? declared : (uint32_t)n);
    buf_append(b, data, n);
    assert_int_equal(b->err, 0);
}

/* Runs cfg over the file; returns the status (0 or the error's). */
static int run(void *cfg, const struct buf *file, struct prep_mem *mem, struct tensor *out,
               struct prep_timings *tm, struct error *err)
{
    memset(tm, 0, sizeof *tm);
    error_clear(err);
    if (prep_audio.run(cfg, (const uint8_t *)file->data, file->len, mem, out, tm, err) == 0)
        return 0;
    assert_true(err->status >= 400);
    assert_true(err->msg[0] != '\0');
    return err->status;
}

static bool has_timing(const struct prep_timings *tm, const char *stage)
{
    for (uint32_t i = 0; i < tm->n; i++)
        if (strcmp(tm->t[i].stage, stage) == 0)
            return true;
    return false;
}

/* One successful run and what the tests look at after it. */
struct wav_run {
    struct prep_mem mem; /* the outputs' */
    struct tensor out[PREP_MAX_OUTPUTS];
    struct prep_timings tm;
    struct error err;
};

/* Runs cfg over the WAV file make_wav() writes from s, data, n and
 * declared, which must succeed; r->out lives until wav_run_free(). */
static void run_wav(struct wav_run *r, void *cfg, const struct wav_spec *s, const void *data,
                    size_t n, uint32_t declared)
{
    struct buf file;
    make_wav(&file, s, data, n, declared);
    prep_mem_init(&r->mem, 1 << 20);
    if (run(cfg, &file, &r->mem, r->out, &r->tm, &r->err))
        fail_msg("run failed: %s", r->err.msg);
    buf_free(&file);
}

static void wav_run_free(struct wav_run *r)
{
    prep_mem_release(&r->mem);
}

/* ---- encodings ------------------------------------------------------------ */

/* The 4 samples -1, -0.5, 0, 0.5 (exactly representable in every encoding),
 * decoded and padded to 6 samples. */
static void check_encoding(const struct wav_spec *s, const void *data, size_t n)
{
    void *cfg = must_parse("{\"sample_rate\": 16000, \"samples\": 6}");
    struct wav_run r;
    run_wav(&r, cfg, s, data, n, 0);
    assert_int_equal(r.out[0].dtype, DT_FP32);
    assert_int_equal(r.out[0].ndim, 1);
    assert_int_equal(r.out[0].shape[0], 6);
    assert_int_equal(r.out[0].nbytes, 6 * sizeof(float));
    const float want[6] = {-1.0f, -0.5f, 0.0f, 0.5f, 0.0f, 0.0f};
    const float *got = r.out[0].data;
    for (int i = 0; i < 6; i++)
        assert_float_equal(got[i], want[i], 0.0);
    assert_true(has_timing(&r.tm, "decode"));
    assert_false(has_timing(&r.tm, "resample"));
    assert_false(has_timing(&r.tm, "features"));
    wav_run_free(&r);
    prep_audio.free(cfg);
}

static void test_encodings(void **state)
{
    (void)state;
    const uint8_t pcm8[] = {0, 64, 128, 192};
    check_encoding(&(struct wav_spec){1, 0, 1, 8, 16000, false}, pcm8, sizeof pcm8);
    const uint8_t pcm16[] = {0x00, 0x80, 0x00, 0xC0, 0x00, 0x00, 0x00, 0x40};
    check_encoding(&(struct wav_spec){1, 0, 1, 16, 16000, false}, pcm16, sizeof pcm16);
    const uint8_t pcm24[] = {0, 0, 0x80, 0, 0, 0xC0, 0, 0, 0, 0, 0, 0x40};
    check_encoding(&(struct wav_spec){1, 0, 1, 24, 16000, true}, pcm24, sizeof pcm24);
    const int32_t pcm32[] = {INT32_MIN, -(1 << 30), 0, 1 << 30};
    check_encoding(&(struct wav_spec){1, 0, 1, 32, 16000, false}, pcm32, sizeof pcm32);
    const float f32[] = {-1.0f, -0.5f, 0.0f, 0.5f};
    check_encoding(&(struct wav_spec){3, 0, 1, 32, 16000, false}, f32, sizeof f32);
    const double f64[] = {-1.0, -0.5, 0.0, 0.5};
    check_encoding(&(struct wav_spec){3, 0, 1, 64, 16000, true}, f64, sizeof f64);
    check_encoding(&(struct wav_spec){0xFFFE, 1, 1, 16, 16000, false}, pcm16, sizeof pcm16);
    check_encoding(&(struct wav_spec){0xFFFE, 3, 1, 32, 16000, false}, f32, sizeof f32);
    /* Stereo: the channels' mean. */
    const int16_t stereo[] = {-32768, -32768, -32768, 0, 16384, -16384, 16384, 16384};
    check_encoding(&(struct wav_spec){1, 0, 2, 16, 16000, false}, stereo, sizeof stereo);
}

static void test_trim(void **state)
{
    (void)state;
    void *cfg = must_parse("{\"samples\": 3}");
    float x[5] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
    struct wav_run r;
    run_wav(&r, cfg, &(struct wav_spec){3, 0, 1, 32, 16000, false}, x, sizeof x, 0);
    assert_int_equal(r.out[0].shape[0], 3);
    assert_memory_equal(r.out[0].data, x, 3 * sizeof(float));
    wav_run_free(&r);
    prep_audio.free(cfg);
}

/* A data size of 0xFFFFFFFF (a streaming writer's): the whole frames to the
 * end of the file, a trailing partial frame dropped. */
static void test_unknown_data_size(void **state)
{
    (void)state;
    void *cfg = must_parse("{\"samples\": 4}");
    const uint8_t pcm16[] = {0x00, 0x80, 0x00, 0xC0, 0x00, 0x00, 0x7F};
    struct wav_run r;
    run_wav(&r, cfg, &(struct wav_spec){1, 0, 1, 16, 16000, false}, pcm16, sizeof pcm16,
            0xFFFFFFFFu);
    const float want[4] = {-1.0f, -0.5f, 0.0f, 0.0f};
    assert_memory_equal(r.out[0].data, want, sizeof want);
    wav_run_free(&r);
    prep_audio.free(cfg);
}

/* ---- features ----------------------------------------------------------- */

#define SR 16000
#define NS 1600 /* 0.1 s */

static double mel(double f)
{
    return 2595.0 * log10(1.0 + f / 700.0);
}

/* The spec's log mel of frame t of x, n_fft 512, win 400, hop 160, 40 mels
 * from 0 to 8000 Hz, computed naively in double. */
static void ref_logmel(const float *x, uint32_t t, double *out)
{
    enum { N_FFT = 512, WIN = 400, HOP = 160, MELS = 40 };
    double power[N_FFT / 2 + 1];
    for (int k = 0; k <= N_FFT / 2; k++) {
        double re = 0, im = 0;
        for (int n = 0; n < WIN; n++) {
            double v = x[t * HOP + n] * (0.5 - 0.5 * cos(2 * M_PI * n / WIN));
            re += v * cos(2 * M_PI * k * n / N_FFT);
            im -= v * sin(2 * M_PI * k * n / N_FFT);
        }
        power[k] = re * re + im * im;
    }
    double f[MELS + 2];
    for (int i = 0; i < MELS + 2; i++)
        f[i] = 700.0 * (pow(10.0, mel(8000.0) * i / (MELS + 1) / 2595.0) - 1.0);
    for (int j = 1; j <= MELS; j++) {
        double sum = 0;
        for (int k = 0; k <= N_FFT / 2; k++) {
            double fk = (double)k * SR / N_FFT;
            double w = fmax(0.0, fmin((fk - f[j - 1]) / (f[j] - f[j - 1]),
                                      (f[j + 1] - fk) / (f[j + 1] - f[j])));
            sum += w * power[k];
        }
        out[j - 1] = log(fmax(sum, 1e-10));
    }
}

static const char *features_cfg(const char *layout)
{
    static char s[512];
    snprintf(s, sizeof s,
             "{\"sample_rate\": 16000, \"samples\": %d, \"features\": {\"type\": \"log_mel\", "
             "\"n_fft\": 512, \"win_length\": 400, \"hop_length\": 160, \"window\": \"hann\", "
             "\"n_mels\": 40, \"fmin\": 0, \"fmax\": 8000, \"log_floor\": 1e-10}, "
             "\"layout\": \"%s\"}",
             NS, layout);
    return s;
}

static void test_sine_logmel(void **state)
{
    (void)state;
    float x[NS];
    for (int i = 0; i < NS; i++)
        x[i] = (float)(0.5 * sin(2 * M_PI * 1000.0 * i / SR));
    struct buf file;
    make_wav(&file, &(struct wav_spec){3, 0, 1, 32, SR, false}, x, sizeof x, 0);
    void *cfg = must_parse(features_cfg("mels_frames"));
    void *cfg_t = must_parse(features_cfg("frames_mels"));
    struct prep_output shape[PREP_MAX_OUTPUTS];
    assert_int_equal(prep_audio.outputs(cfg, shape), 1);
    const int T = 1 + (NS - 400) / 160;
    assert_int_equal(shape[0].ndim, 2);
    assert_int_equal(shape[0].dims[0], 40);
    assert_int_equal(shape[0].dims[1], T);
    prep_audio.outputs(cfg_t, shape);
    assert_int_equal(shape[0].dims[0], T);
    assert_int_equal(shape[0].dims[1], 40);

    struct prep_mem mem;
    prep_mem_init(&mem, 1 << 20);
    struct tensor out[PREP_MAX_OUTPUTS], out_t[PREP_MAX_OUTPUTS];
    struct prep_timings tm;
    struct error err;
    assert_int_equal(run(cfg, &file, &mem, out, &tm, &err), 0);
    assert_true(has_timing(&tm, "features"));
    assert_int_equal(run(cfg_t, &file, &mem, out_t, &tm, &err), 0);
    assert_int_equal(out[0].shape[0], 40);
    assert_int_equal(out[0].shape[1], T);
    const float *y = out[0].data, *yt = out_t[0].data;

    /* The filter centred nearest 1 kHz holds the peak of every frame. */
    int want = 0;
    double best = INFINITY;
    for (int j = 1; j <= 40; j++) {
        double c = 700.0 * (pow(10.0, mel(8000.0) * j / 41 / 2595.0) - 1.0);
        if (fabs(c - 1000.0) < best) {
            best = fabs(c - 1000.0);
            want = j - 1;
        }
    }
    for (int t = 0; t < T; t++) {
        int arg = 0;
        for (int j = 1; j < 40; j++)
            if (y[j * T + t] > y[arg * T + t])
                arg = j;
        assert_int_equal(arg, want);
    }
    /* Against the naive reference, and the transposed layout. Within e^12
     * of the peak in log; below it, single precision's FFT noise (about
     * 1e-7 of the peak's amplitude) dominates: compared as powers. */
    for (int t = 0; t < T; t += T - 1) {
        double ref[40], peak = -INFINITY;
        ref_logmel(x, (uint32_t)t, ref);
        for (int j = 0; j < 40; j++)
            peak = fmax(peak, ref[j]);
        for (int j = 0; j < 40; j++) {
            double got = y[j * T + t];
            bool ok = ref[j] > peak - 12.0 ? fabs(got - ref[j]) < 1e-3
                                           : fabs(exp(got) - exp(ref[j])) < 1e-9 * exp(peak);
            if (!ok)
                fail_msg("frame %d mel %d: %f, reference %f", t, j, got, ref[j]);
        }
    }
    for (int t = 0; t < T; t++)
        for (int j = 0; j < 40; j++)
            assert_float_equal(yt[t * 40 + j], y[j * T + t], 0.0);
    prep_mem_release(&mem);
    buf_free(&file);
    prep_audio.free(cfg);
    prep_audio.free(cfg_t);
}

/* Silence: every value is ln(log_floor). */
static void test_silence_floor(void **state)
{
    (void)state;
    int16_t x[NS] = {0};
    void *cfg = must_parse(features_cfg("mels_frames"));
    struct wav_run r;
    run_wav(&r, cfg, &(struct wav_spec){1, 0, 1, 16, SR, false}, x, 400 * sizeof *x, 0);
    const float *y = r.out[0].data;
    for (int64_t i = 0; i < r.out[0].shape[0] * r.out[0].shape[1]; i++)
        assert_float_equal(y[i], (float)log(1e-10), 1e-5);
    wav_run_free(&r);
    prep_audio.free(cfg);
}

/* ---- resampling ------------------------------------------------------- */

/* A 440 Hz sine at rate, stereo PCM16 (the same in both channels), to 16 kHz. */
static void check_resampled_sine(uint32_t rate, const char *resampler)
{
    enum { OUT = 8000 };
    uint32_t n = rate; /* 1 s: longer than the 0.5 s kept */
    int16_t *x = malloc(2 * n * sizeof *x);
    assert_non_null(x);
    for (uint32_t i = 0; i < n; i++)
        x[2 * i] = x[2 * i + 1] = (int16_t)lrint(16000.0 * sin(2 * M_PI * 440.0 * i / rate));
    char cfg_json[128];
    snprintf(cfg_json, sizeof cfg_json, "{\"samples\": %d, \"resampler\": \"%s\"}", OUT, resampler);
    void *cfg = must_parse(cfg_json);
    struct wav_run r;
    run_wav(&r, cfg, &(struct wav_spec){1, 0, 2, 16, rate, false}, x, 2 * n * sizeof *x, 0);
    free(x);
    assert_true(has_timing(&r.tm, "resample"));
    assert_int_equal(r.out[0].shape[0], OUT);
    const float *y = r.out[0].data;
    /* Away from the start (the filter's edge), the sine at 16 kHz. */
    double worst = 0;
    for (int i = 200; i < OUT; i++)
        worst = fmax(worst, fabs(y[i] - 16000.0 / 32768 * sin(2 * M_PI * 440.0 * i / 16000)));
    /* "linear" interpolates without a filter: looser. */
    if (worst > (strcmp(resampler, "linear") ? 2e-3 : 5e-2))
        fail_msg("%u Hz with %s: off by %g", rate, resampler, worst);
    wav_run_free(&r);
    prep_audio.free(cfg);
}

static void test_resample(void **state)
{
    (void)state;
    check_resampled_sine(8000, "sinc_medium");
    check_resampled_sine(22050, "sinc_fastest");
    check_resampled_sine(44100, "sinc_best");
    check_resampled_sine(48000, "linear");
}

/* ---- errors ------------------------------------------------------------- */

static int run_bytes(void *cfg, const void *p, size_t n, struct error *err)
{
    struct buf b;
    buf_init(&b, 1u << 26);
    buf_append(&b, p, n);
    struct prep_mem mem;
    prep_mem_init(&mem, 1 << 20);
    struct tensor out[PREP_MAX_OUTPUTS];
    struct prep_timings tm;
    int st = run(cfg, &b, &mem, out, &tm, err);
    prep_mem_release(&mem);
    buf_free(&b);
    return st;
}

static void expect(void *cfg, const struct buf *file, int status, const char *fragment)
{
    struct error err;
    int st = run_bytes(cfg, file->data, file->len, &err);
    if (st != status || !strstr(err.msg, fragment))
        fail_msg("want %d '%s', got %d '%s'", status, fragment, st, err.msg);
}

/* expect() of the WAV file make_wav() writes from these arguments. */
static void expect_wav(void *cfg, const struct wav_spec *s, const void *data, size_t n,
                       uint32_t declared, int status, const char *fragment)
{
    struct buf f;
    make_wav(&f, s, data, n, declared);
    expect(cfg, &f, status, fragment);
    buf_free(&f);
}

static void test_file_errors(void **state)
{
    (void)state;
    void *cfg = must_parse("{\"samples\": 16000, \"max_seconds\": 2, \"max_bytes\": 100000}");
    const int16_t x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    struct wav_spec pcm16 = {1, 0, 1, 16, 16000, false};
    struct buf f;

    struct error err;
    assert_int_equal(run_bytes(cfg, "not a wav file at all", 21, &err), 400);
    assert_non_null(strstr(err.msg, "not a WAV file"));
    assert_int_equal(run_bytes(cfg, "", 0, &err), 400);

    make_wav(&f, &pcm16, x, sizeof x, 0);
    for (size_t n = 0; n < f.len; n++) /* every truncation */
        assert_int_equal(run_bytes(cfg, f.data, n, &err), 400);
    f.data[20] = 6; /* A-law */
    expect(cfg, &f, 400, "format tag 6");
    f.data[20] = 1;
    f.data[32] = 4; /* block align */
    expect(cfg, &f, 400, "block align");
    f.data[32] = 2;
    f.data[22] = 0; /* channels */
    expect(cfg, &f, 400, "0 channels");
    buf_free(&f);

    expect_wav(cfg, &(struct wav_spec){1, 0, 1, 12, 16000, false}, x, sizeof x, 0, 400, "12 bits");
    expect_wav(cfg, &(struct wav_spec){3, 0, 1, 16, 16000, false}, x, sizeof x, 0, 400,
               "format tag 3, 16 bits");
    expect_wav(cfg, &(struct wav_spec){0xFFFE, 7, 1, 16, 16000, false}, x, sizeof x, 0, 400,
               "format tag 7");
    expect_wav(cfg, &(struct wav_spec){1, 0, 1, 16, 500, false}, x, sizeof x, 0, 400,
               "sample rate 500");

    /* Hours declared, 16 bytes present: 413 before anything is decoded. */
    expect_wav(cfg, &pcm16, x, sizeof x, 16000u * 2 * 3600, 413, "over the limit of 2");
    /* A little over the limit, complete. */
    int16_t *big = calloc(16000 * 2 + 2, sizeof *big);
    expect_wav(cfg, &pcm16, big, (16000 * 2 + 2) * sizeof *big, 0, 413, "seconds");
    free(big);
    /* Declared more than present, under the limit. */
    expect_wav(cfg, &pcm16, x, sizeof x, 1000, 400, "truncated");
    /* Not whole frames. */
    expect_wav(cfg, &pcm16, x, 3, 0, 400, "whole frames");
    /* Over max_bytes. */
    uint8_t *huge = calloc(100001, 1);
    assert_int_equal(run_bytes(cfg, huge, 100001, &err), 413);
    assert_non_null(strstr(err.msg, "max_bytes"));
    free(huge);
    /* A non-finite float sample. */
    const float nan_x[2] = {0.0f, NAN};
    expect_wav(cfg, &(struct wav_spec){3, 0, 1, 32, 16000, false}, nan_x, sizeof nan_x, 0, 400,
               "finite");
    /* data before fmt. */
    static const char data_first[] = "RIFF\0\0\0\0WAVEdata\2\0\0\0\1\0";
    assert_int_equal(run_bytes(cfg, data_first, sizeof data_first - 1, &err), 400);
    assert_non_null(strstr(err.msg, "before the fmt chunk"));
    /* A chunk claiming more than the file. */
    static const char long_chunk[] = "RIFF\0\0\0\0WAVELIST\xff\xff\xff\xff";
    assert_int_equal(run_bytes(cfg, long_chunk, sizeof long_chunk - 1, &err), 400);
    assert_non_null(strstr(err.msg, "'LIST' is truncated"));
    prep_audio.free(cfg);
}

static void expect_parse(const char *cfg_json, const char *fragment)
{
    struct error err;
    void *cfg = parse_cfg(cfg_json, &err);
    if (cfg)
        fail_msg("accepted %s", cfg_json);
    assert_int_equal(err.status, 400);
    if (!strstr(err.msg, fragment))
        fail_msg("for %s want '%s', got '%s'", cfg_json, fragment, err.msg);
}

static void test_config_errors(void **state)
{
    (void)state;
    expect_parse("[]", "audio must be an object");
    expect_parse("{}", "audio.samples is required");
    expect_parse("{\"samples\": 100, \"color\": 1}", "audio has an unknown key 'color'");
    expect_parse("{\"samples\": 0}", "audio.samples must be an integer from 1 to");
    expect_parse("{\"samples\": 1.5}", "audio.samples must be an integer");
    expect_parse("{\"samples\": 100, \"sample_rate\": 100}", "audio.sample_rate must be");
    expect_parse("{\"samples\": 100, \"max_seconds\": 0}", "audio.max_seconds must be a number");
    expect_parse("{\"samples\": 100, \"max_bytes\": \"1\"}", "audio.max_bytes must be");
    expect_parse("{\"samples\": 100, \"resampler\": \"cubic\"}", "audio.resampler must be one of");
    expect_parse("{\"samples\": 100, \"layout\": \"frames_mels\"}", "audio.layout applies to");
    expect_parse("{\"samples\": 16000, \"features\": 1}", "audio.features must be an object");
    expect_parse("{\"samples\": 16000, \"features\": {\"type\": \"mfcc\"}}",
                 "audio.features.type must be one of \"log_mel\"");
    expect_parse("{\"samples\": 16000, \"features\": {\"window\": \"hamming\"}}",
                 "audio.features.window must be");
    expect_parse("{\"samples\": 16000, \"features\": {\"n_fft\": 8}}",
                 "audio.features.n_fft must be an integer from 16 to 8192");
    expect_parse("{\"samples\": 16000, \"features\": {\"win_length\": 513}}",
                 "audio.features.win_length must be an integer from 1 to 512");
    expect_parse("{\"samples\": 16000, \"features\": {\"fmax\": 8001}}",
                 "audio.features.fmax must be a number above 0 and at most 8000");
    expect_parse("{\"samples\": 16000, \"features\": {\"fmin\": 100, \"fmax\": 100}}",
                 "fmin (100) must be below fmax (100)");
    expect_parse("{\"samples\": 16000, \"features\": {\"log_floor\": 0}}",
                 "audio.features.log_floor must be");
    expect_parse("{\"samples\": 16000, \"features\": {\"n_mels\": 0}}",
                 "audio.features.n_mels must be");
    expect_parse("{\"samples\": 16000, \"features\": {\"hop\": 1}}",
                 "audio.features has an unknown key 'hop'");
    expect_parse("{\"samples\": 300, \"features\": {}}",
                 "audio.samples (300) must be at least audio.features.win_length (400)");
    expect_parse("{\"samples\": 16000000, \"features\": {\"hop_length\": 1, \"n_mels\": 256}}",
                 "would yield");
    /* The defaults suffice. */
    void *cfg = must_parse("{\"samples\": 16000, \"features\": {}}");
    struct prep_output shape[PREP_MAX_OUTPUTS];
    prep_audio.outputs(cfg, shape);
    assert_int_equal(shape[0].dims[0], 40);
    assert_int_equal(shape[0].dims[1], 98);
    prep_audio.free(cfg);
}

static void test_content_types(void **state)
{
    (void)state;
    assert_string_equal(prep_audio.key, "audio");
    const char *want[] = {"audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"};
    for (int i = 0; i < 4; i++)
        assert_string_equal(prep_audio.content_types[i], want[i]);
    assert_null(prep_audio.content_types[4]);
}

/* Every allocation of parse and run failing in turn: a clean error, no
 * leak (the ASan build checks the latter). */
static void test_alloc_failures(void **state)
{
    (void)state;
    float x[NS];
    for (int i = 0; i < NS; i++)
        x[i] = (float)sin(i * 0.1);
    struct buf file;
    make_wav(&file, &(struct wav_spec){3, 0, 1, 32, 22050, false}, x, sizeof x, 0);
    for (long k = 0;; k++) {
        struct error err;
        void *cfg = parse_cfg_failing(features_cfg("mels_frames"), k, &err);
        if (cfg) {
            prep_audio.free(cfg);
            break;
        }
        assert_int_equal(err.status, 500);
    }
    void *cfg = must_parse(features_cfg("mels_frames"));
    for (long k = 0;; k++) {
        struct error err;
        struct prep_mem mem;
        prep_mem_init(&mem, 1 << 20);
        struct tensor out[PREP_MAX_OUTPUTS];
        struct prep_timings tm;
        mem_fail_after(k);
        int st = run(cfg, &file, &mem, out, &tm, &err);
        mem_fail_reset();
        prep_mem_release(&mem);
        if (st == 0)
            break;
        assert_int_equal(st, 500);
    }
    prep_audio.free(cfg);
    /* The output over the prep_mem limit: 500 too. */
    cfg = must_parse(features_cfg("mels_frames"));
    struct prep_mem mem;
    prep_mem_init(&mem, 100);
    struct tensor out[PREP_MAX_OUTPUTS];
    struct prep_timings tm;
    struct error err;
    assert_int_equal(run(cfg, &file, &mem, out, &tm, &err), 500);
    prep_mem_release(&mem);
    prep_audio.free(cfg);
    buf_free(&file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encodings),         cmocka_unit_test(test_trim),
        cmocka_unit_test(test_unknown_data_size), cmocka_unit_test(test_sine_logmel),
        cmocka_unit_test(test_silence_floor),     cmocka_unit_test(test_resample),
        cmocka_unit_test(test_file_errors),       cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_content_types),     cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
