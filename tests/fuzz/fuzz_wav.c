/*
 * Fuzz target for the audio modality (preprocess/audio.c, wav.c,
 * logmel.c): every input is a WAV file run through three configurations
 * (the waveform at the file's rate or resampled to 8 kHz, and log mel
 * features after resampling). Properties checked:
 *   - run() succeeds, or fails with 400 or 413 and a message (never 500:
 *     the output memory limit is far above what these configurations need);
 *   - a success has the shape outputs() declares, nbytes to match, and no
 *     feature below ln(log_floor);
 *   - a second run over the same bytes gives the same bytes (no read of
 *     uninitialised memory or state kept between runs).
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/json.h"
#include "preprocess/modality.h"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_wav: %s\n", what);
        abort();
    }
}

static const char *const configs[] = {
    "{\"max_seconds\": 0.5, \"sample_rate\": 16000, \"samples\": 400}",
    "{\"max_seconds\": 0.5, \"sample_rate\": 8000, \"resampler\": \"linear\", \"samples\": 300}",
    "{\"max_seconds\": 0.5, \"sample_rate\": 8000, \"resampler\": \"sinc_fastest\", "
    "\"samples\": 800, \"features\": {\"n_fft\": 64, \"win_length\": 48, \"hop_length\": 32, "
    "\"n_mels\": 8, \"fmin\": 100, \"fmax\": 3500, \"log_floor\": 1e-6}, "
    "\"layout\": \"frames_mels\"}",
};
#define NCFG (sizeof configs / sizeof configs[0])
#define LOG_FLOOR_2 1e-6 /* configs[2]'s */

static void *cfgs[NCFG];

static void load_configs(void)
{
    for (size_t i = 0; i < NCFG; i++) {
        struct arena a;
        arena_init(&a, 4096, 1 << 20);
        struct json_value *root;
        const char *msg;
        size_t off;
        check(json_parse(&a, configs[i], strlen(configs[i]), NULL, &root, &msg, &off) == ST_OK,
              "config JSON");
        struct error err;
        check(prep_audio.parse(root, ".", &cfgs[i], &err) == 0, "config rejected");
        arena_free(&a);
    }
}

static int run_once(size_t i, const uint8_t *data, size_t size, struct prep_mem *mem,
                    struct tensor *out)
{
    struct prep_timings tm = {0};
    struct error err;
    error_clear(&err);
    if (prep_audio.run(cfgs[i], data, size, mem, out, &tm, &err) == 0)
        return 0;
    check(err.status == 400 || err.status == 413, "status other than 400 or 413");
    check(err.msg[0] != '\0', "error without a message");
    return err.status;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!cfgs[0])
        load_configs();
    for (size_t i = 0; i < NCFG; i++) {
        struct prep_mem mem;
        prep_mem_init(&mem, 1 << 24);
        struct tensor a[PREP_MAX_OUTPUTS], b[PREP_MAX_OUTPUTS];
        int st = run_once(i, data, size, &mem, a);
        check(run_once(i, data, size, &mem, b) == st, "second run differs in status");
        if (st == 0) {
            struct prep_output shape[PREP_MAX_OUTPUTS];
            check(prep_audio.outputs(cfgs[i], shape) == 1, "outputs() count");
            check(a[0].dtype == DT_FP32 && a[0].ndim == shape[0].ndim, "dtype or rank");
            size_t count = 1;
            for (uint32_t d = 0; d < a[0].ndim; d++) {
                check(a[0].shape[d] == shape[0].dims[d], "shape differs from outputs()");
                count *= (size_t)a[0].shape[d];
            }
            check(a[0].nbytes == count * sizeof(float), "nbytes");
            check(memcmp(a[0].data, b[0].data, a[0].nbytes) == 0, "second run differs");
            if (i == 2) {
                const float *v = a[0].data;
                for (size_t k = 0; k < count; k++)
                    check(!(v[k] < (float)log(LOG_FLOOR_2) - 1e-3f), "feature below the floor");
            }
        }
        prep_mem_release(&mem);
    }
    return 0;
}
