/*
 * json_decode: what decoding one KServe v2 JSON infer request costs, and
 * what printing its floats back costs.
 *
 * The request is the one a Triton client sends for a 1x784 FP32 input
 * (MNIST-sized): 784 random floats in [0,1) printed with %.9g. It is
 * decoded N times by
 *   cjson      cJSON_Parse, walk to inputs[0].data, (float)valuedouble per
 *              element (what a typical cJSON-based server does), cJSON_Delete
 *   tree       inferd's JSON reader building the whole tree, then
 *              json_num_f32 per element (the old path of api/rest/infer_json.c)
 *   inferd     inferd's JSON reader with raw_array_key = "data" (the array
 *              is skipped as one raw span), then tensor_json_parse straight
 *              into a float buffer
 *   strtof     a bare strtof loop over the data text (no JSON at all), as a
 *              floor for a library-based number conversion
 * and reports microseconds per request: the best of several rounds of
 * the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so that a busy machine
 * preempting the benchmark does not inflate the figures. It then formats the 784 floats with
 * numfmt_f32 and with snprintf("%.9g") and reports nanoseconds per float.
 * Every path's floats are checked against strtof's before timing.
 *
 * Build and run (from the repo root; needs libcjson-dev):
 *   gcc -std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -Isrc \
 *       bench/json_decode.c src/api/tensor_json.c src/base/json.c \
 *       src/base/numparse.c src/base/numfmt.c src/base/mem.c src/base/arena.c \
 *       src/base/buf.c src/base/error.c src/core/fp16.c src/core/dtype.c \
 *       src/core/tensor.c -lcjson -lm -o /tmp/json_decode
 *   /tmp/json_decode [N]
 *
 * Exit status: 0 measured, 1 a path decoded wrong values.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/tensor_json.h"
#include "base/buf.h"
#include "base/json.h"
#include "base/numfmt.h"

#define ELEMENTS 784
#define ROUNDS 7

static char body[64 * 1024];
static size_t body_len;
static float want[ELEMENTS], got[ELEMENTS];

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void make_request(void)
{
    uint64_t x = 88172645463325252u;
    size_t n = (size_t)snprintf(body, sizeof body,
                                "{\"id\":\"42\",\"inputs\":[{\"name\":\"input\",\"shape\":[1,%d],"
                                "\"datatype\":\"FP32\",\"data\":[",
                                ELEMENTS);
    for (int i = 0; i < ELEMENTS; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        float f = (float)(x >> 40) / (float)(1u << 24); /* [0,1) */
        n += (size_t)snprintf(body + n, sizeof body - n, "%s%.9g", i ? "," : "", (double)f);
        want[i] = f;
    }
    n += (size_t)snprintf(body + n, sizeof body - n, "]}],\"outputs\":[{\"name\":\"output\"}]}");
    body_len = n;
}

static int decode_cjson(void)
{
    cJSON *root = cJSON_Parse(body);
    if (!root)
        return -1;
    cJSON *inputs = cJSON_GetObjectItemCaseSensitive(root, "inputs");
    cJSON *in0 = cJSON_GetArrayItem(inputs, 0);
    cJSON *data = cJSON_GetObjectItemCaseSensitive(in0, "data");
    int i = 0, rc = 0;
    cJSON *item;
    cJSON_ArrayForEach(item, data)
    {
        if (!cJSON_IsNumber(item) || i == ELEMENTS) {
            rc = -1;
            break;
        }
        got[i++] = (float)item->valuedouble;
    }
    cJSON_Delete(root);
    return rc == 0 && i == ELEMENTS ? 0 : -1;
}

static struct arena arena;

static const struct json_value *find_data(const struct json_value *root)
{
    const struct json_value *inputs = json_get(root, "inputs");
    if (!inputs || inputs->type != JSON_ARRAY || inputs->len < 1)
        return NULL;
    return json_get(&inputs->u.items[0], "data");
}

static int decode_tree(void)
{
    struct json_limits lim = {.max_depth = 24, .allow_nonfinite = true};
    struct json_value *root;
    const char *msg;
    size_t off;
    arena_reset(&arena);
    if (json_parse(&arena, body, body_len, &lim, &root, &msg, &off) != 0)
        return -1;
    const struct json_value *data = find_data(root);
    if (!data || data->type != JSON_ARRAY || data->len != ELEMENTS)
        return -1;
    for (uint32_t i = 0; i < data->len; i++)
        if (json_num_f32(&data->u.items[i], &got[i]) != 0)
            return -1;
    return 0;
}

static int decode_inferd(void)
{
    struct json_limits lim = {.max_depth = 24, .allow_nonfinite = true, .raw_array_key = "data"};
    struct json_value *root;
    const char *msg;
    size_t off;
    struct error err;
    static const int64_t shape[2] = {1, ELEMENTS};
    arena_reset(&arena);
    if (json_parse(&arena, body, body_len, &lim, &root, &msg, &off) != 0)
        return -1;
    const struct json_value *data = find_data(root);
    if (!data || data->type != JSON_RAW)
        return -1;
    return tensor_json_parse(data->u.raw, data->len, DT_FP32, shape, 2, ELEMENTS, got, &arena,
                             "input", &err);
}

static int decode_strtof(void)
{
    const char *p = strstr(body, "\"data\":[") + 8;
    for (int i = 0; i < ELEMENTS; i++) {
        char *end;
        got[i] = strtof(p, &end);
        p = end + 1;
    }
    return 0;
}

/* Best-of-ROUNDS microseconds per call of fn, n calls per round. */
static double time_us(int (*fn)(void), int n)
{
    double best = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_us();
        for (int i = 0; i < n; i++)
            fn();
        double t = (now_us() - t0) / n;
        if (t < best)
            best = t;
    }
    return best;
}

static int check(const char *name, int (*fn)(void))
{
    memset(got, 0, sizeof got);
    if (fn() != 0 || memcmp(got, want, sizeof want) != 0) {
        fprintf(stderr, "json_decode: %s decoded wrong values\n", name);
        return -1;
    }
    return 0;
}

static volatile size_t sink;

static double format_numfmt_ns(int n)
{
    char out[NUMFMT_MAX];
    double best = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_us();
        for (int k = 0; k < n; k++)
            for (int i = 0; i < ELEMENTS; i++)
                sink += numfmt_f32(out, want[i]);
        double t = (now_us() - t0) * 1e3 / ((double)n * ELEMENTS);
        if (t < best)
            best = t;
    }
    return best;
}

static double format_snprintf_ns(int n)
{
    char out[32];
    double best = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_us();
        for (int k = 0; k < n; k++)
            for (int i = 0; i < ELEMENTS; i++)
                sink += (size_t)snprintf(out, sizeof out, "%.9g", (double)want[i]);
        double t = (now_us() - t0) * 1e3 / ((double)n * ELEMENTS);
        if (t < best)
            best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    if (n <= 0)
        n = 2000;
    make_request();
    arena_init(&arena, 256 * 1024, 64u << 20);
    if (check("cjson", decode_cjson) || check("tree", decode_tree) ||
        check("inferd", decode_inferd) || check("strtof", decode_strtof))
        return 1;
    /* (float)valuedouble rounds twice; %.9g text of a float is never a
     * double-rounding case, so cJSON's values match here too. */

    double cj = time_us(decode_cjson, n);
    double tree = time_us(decode_tree, n);
    double inf = time_us(decode_inferd, n);
    double st = time_us(decode_strtof, n);
    printf("request: %zu bytes, %d FP32 elements (%%.9g), best of %d rounds x %d\n", body_len,
           ELEMENTS, ROUNDS, n);
    printf("  cjson   %8.2f us/request\n", cj);
    printf("  tree    %8.2f us/request\n", tree);
    printf("  inferd  %8.2f us/request  (%.1fx faster than cJSON, %.1fx than the tree)\n", inf,
           cj / inf, tree / inf);
    printf("  strtof  %8.2f us/request  (bare strtof loop, no JSON)\n", st);

    double nf = format_numfmt_ns(n / 4 + 1);
    double sn = format_snprintf_ns(n / 4 + 1);
    printf("format: numfmt_f32 %.1f ns/float, snprintf(\"%%.9g\") %.1f ns/float (%.1fx)\n", nf,
           sn, sn / nf);
    arena_free(&arena);
    return 0;
}
