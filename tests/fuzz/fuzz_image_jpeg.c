/*
 * Fuzz target for the image modality's JPEG path (preprocess/image.c,
 * image_decode.c): every input is one raw image element, run through a
 * fixed configuration (rgb, EXIF orientation on, draft decoding, bilinear
 * resize to 16x16, FP32 CHW, at most 2^20 pixels). Properties checked:
 *   - run() succeeds with a [3,16,16] FP32 tensor whose values lie in
 *     0..255 (resampling weights are non-negative and sum to 1), or fails
 *     with 400 or 413 and a message;
 *   - nothing is leaked or read out of bounds (the sanitizers).
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/json.h"
#include "preprocess/modality.h"

static const char config[] = "{\"formats\": [\"jpeg\"], \"max_pixels\": 1048576, \"draft\": true,"
                             " \"resize\": {\"width\": 16, \"height\": 16}}";

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_image_jpeg: %s\n", what);
        abort();
    }
}

static void *cfg_once(void)
{
    static void *cfg;
    if (!cfg) {
        struct arena a;
        struct json_value *v = NULL;
        struct error err;
        arena_init(&a, 4096, 1u << 20);
        check(json_parse(&a, config, sizeof config - 1, NULL, &v, NULL, NULL) == 0, "config");
        check(prep_image.parse(v, ".", &cfg, &err) == 0, "parse");
        arena_free(&a);
    }
    return cfg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct prep_mem mem;
    struct prep_timings tm = {0};
    struct tensor t;
    struct error err;
    error_clear(&err);
    prep_mem_init(&mem, 1u << 20);
    if (prep_image.run(cfg_once(), data, size, &mem, &t, &tm, &err) == 0) {
        check(t.dtype == DT_FP32 && t.ndim == 3 && t.shape[0] == 3 && t.shape[1] == 16 &&
                  t.shape[2] == 16 && t.nbytes == 3 * 16 * 16 * sizeof(float),
              "shape");
        const float *f = t.data;
        for (size_t i = 0; i < 3 * 16 * 16; i++)
            check(f[i] >= 0.0f && f[i] <= 255.001f, "value out of 0..255");
        check(tm.n == 3, "timings");
    } else {
        check((err.status == 400 || err.status == 413) && err.msg[0], "error status");
    }
    prep_mem_release(&mem);
    return 0;
}
