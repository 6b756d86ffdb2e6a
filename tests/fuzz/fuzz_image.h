/*
 * fuzz_image.h: the body shared by the image modality's fuzz targets
 * (fuzz_image_png.c, fuzz_image_jpeg.c), which differ only in their
 * configuration. fuzz_image_run() runs one raw image element through
 * prep_image with that configuration (parsed once per target; it must
 * resize to 16x16 rgb FP32 CHW) and checks:
 *   - run() succeeds with a [3,16,16] FP32 tensor whose values lie in
 *     0..255 (the resampling weights are non-negative and sum to 1) and
 *     three timed steps, or fails with 400 or 413 and a message;
 *   - nothing is leaked or read out of bounds (the sanitizers).
 * A violated property aborts with "<target>: <what>" on stderr, which
 * libFuzzer and the replay driver report. Included by one .c per target.
 */
#ifndef INFERD_TESTS_FUZZ_IMAGE_H
#define INFERD_TESTS_FUZZ_IMAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/json.h"
#include "preprocess/modality.h"

static void fuzz_image_check(const char *target, bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "%s: %s\n", target, what);
        abort();
    }
}

/* The parsed configuration, from config on the first call. */
static void *fuzz_image_cfg(const char *target, const char *config, size_t config_len)
{
    static void *cfg;
    if (!cfg) {
        struct arena a;
        struct json_value *v = NULL;
        struct error err;
        arena_init(&a, 4096, 1u << 20);
        fuzz_image_check(target, json_parse(&a, config, config_len, NULL, &v, NULL, NULL) == 0,
                         "config");
        fuzz_image_check(target, prep_image.parse(v, ".", &cfg, &err) == 0, "parse");
        arena_free(&a);
    }
    return cfg;
}

static int fuzz_image_run(const char *target, const char *config, size_t config_len,
                          const uint8_t *data, size_t size)
{
    struct prep_mem mem;
    struct prep_timings tm = {0};
    struct tensor t;
    struct error err;
    error_clear(&err);
    prep_mem_init(&mem, 1u << 20);
    void *cfg = fuzz_image_cfg(target, config, config_len);
    if (prep_image.run(cfg, data, size, &mem, &t, &tm, &err) == 0) {
        fuzz_image_check(target,
                         t.dtype == DT_FP32 && t.ndim == 3 && t.shape[0] == 3 && t.shape[1] == 16 &&
                             t.shape[2] == 16 && t.nbytes == 3 * 16 * 16 * sizeof(float),
                         "shape");
        const float *f = t.data;
        for (size_t i = 0; i < 3 * 16 * 16; i++)
            fuzz_image_check(target, f[i] >= 0.0f && f[i] <= 255.001f, "value out of 0..255");
        fuzz_image_check(target, tm.n == 3, "timings");
    } else {
        fuzz_image_check(target, (err.status == 400 || err.status == 413) && err.msg[0],
                         "error status");
    }
    prep_mem_release(&mem);
    return 0;
}

#endif
