/*
 * identity_stall: an example inferd backend plugin (include/inferd/backend.h)
 * that returns its one input as its one output, and fails or stalls on
 * request, for chaos and overload tests.
 *
 * The model is its config.pbtxt, plus an optional per-version file of
 * parameters (see below); the version directory holds nothing else it reads:
 *
 *   backend: "identity_stall"
 *   max_batch_size: 8
 *   input  [ { name: "IN"  data_type: TYPE_FP32 dims: [ -1 ] } ]
 *   output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
 *   parameters { key: "fail_every_n" value: { string_value: "3" } }
 *   parameters { key: "fail_skip" value: { string_value: "1" } }
 *   parameters { key: "delay_us" value: { string_value: "50000" } }
 *
 * Exactly one input and one output, of the same data_type and dims (any
 * type, BYTES included). Parameters, decimal integers, all optional:
 *   fail_every_n N  every Nth execute() of an instance (after the skipped
 *                 ones) fails with status 500 and "injected failure"
 *                 (0 = never, the default);
 *   fail_skip K   the first K execute() calls of each instance never fail
 *                 (default 0). inferd warms every instance up with at
 *                 least one execution before serving, and a failed
 *                 warm-up fails the model: K = the number of warm-up runs
 *                 spares them;
 *   delay_us U    every execute() first sleeps U microseconds (0 to
 *                 3600000000; default 0), warm-up runs included;
 *   sample_delay_us LIST  a cost per row that depends on the batch size,
 *                 for tests of the batcher's learned batch sizes: LIST is
 *                 up to 8 pairs `rows:us`, separated by commas, rows
 *                 ascending; an execute() whose input has n rows (its
 *                 first dimension) then sleeps n times the us of the first
 *                 pair with rows >= n (the last pair's beyond it). With
 *                 "4:1000,16:4000" batches of up to 4 rows cost 1 ms a row
 *                 and larger ones 4 ms a row;
 *   shadow_fail B 1: an execution flagged INFERD_EXECUTE_SHADOW (a batch of
 *                 shadow copies, ABI 3) fails with status 500 and "shadow
 *                 execution refused (shadow_fail)", before any delay or
 *                 injected failure and without counting as an execution;
 *                 0 (the default): shadow copies run like any request.
 * and two paths:
 *   started_log PATH  every execute() first appends one line to the file
 *                 PATH (created if missing), before its delay: a test waits
 *                 for a line instead of sleeping to know that a request has
 *                 reached the model and is running. At most 1023 bytes;
 *   fail_while_exists PATH  every execute() (after its delay) fails with
 *                 status 500 and "injected failure (PATH exists)" while
 *                 the file PATH exists, so that a test can make a version
 *                 fail and recover (create the file once the model is
 *                 loaded: a failed warm-up fails the load). At most 1023
 *                 bytes; checked with access(2) at each execution.
 * Any other parameter fails the load with 400, so that a misspelt one is
 * not silently ignored.
 *
 * Per-version parameters: if <version_dir>/parameters exists, each of its
 * non-empty lines `key value` (separated by blanks) overrides the
 * config.pbtxt parameter of that key for this version only, with the same
 * keys and validation; an unknown key, a bad value or a line without a
 * value fails the load with 400 naming the file. A test can so give
 * version 2 `fail_every_n 2` or `delay_us 20000` while version 1 stays
 * healthy.
 *
 * ABI 3: the table sets execute_flags (execute() is the same with flags 0).
 *
 * Build: cc -std=c11 -O2 -shared -fPIC -I<inferd>/include \
 *           -o libinferd_identity_stall.so identity_stall.c
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <inferd/backend.h>

#define DELAY_US_MAX 3600000000u
#define SAMPLE_DELAYS_MAX 8
#define PARAM_LINE_MAX 512
#define FAIL_PATH_MAX 1024

struct instance {
    struct inferd_model_io io[2]; /* input, output (the model info); names owned */
    uint64_t fail_every_n;
    uint64_t fail_skip;
    uint64_t delay_us;
    uint64_t shadow_fail; /* 0 or 1 */
    uint64_t sample_rows[SAMPLE_DELAYS_MAX], sample_us[SAMPLE_DELAYS_MAX]; /* sample_delay_us */
    uint32_t nsample_delays;
    char fail_path[FAIL_PATH_MAX]; /* fail_while_exists; "" = none */
    char started_path[FAIL_PATH_MAX]; /* started_log; "" = none */
    atomic_uint_fast64_t executions;
};

static int fail(struct inferd_error *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct inferd_error *err, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err->status = status;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* A decimal integer in [0, max]. */
static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max)
        return -1;
    *out = v;
    return 0;
}

static void instance_free(struct instance *in)
{
    if (!in)
        return;
    free((char *)in->io[0].name);
    free((char *)in->io[1].name);
    free(in);
}

/* sample_delay_us: `rows:us` pairs, rows ascending. */
static int parse_sample_delays(struct instance *self, const char *value)
{
    uint32_t n = 0;
    const char *p = value;
    while (*p) {
        char pair[64];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof pair || n == SAMPLE_DELAYS_MAX)
            return -1;
        memcpy(pair, p, len);
        pair[len] = '\0';
        char *colon = strchr(pair, ':');
        if (!colon)
            return -1;
        *colon = '\0';
        if (parse_u64(pair, UINT32_MAX, &self->sample_rows[n]) != 0 ||
            parse_u64(colon + 1, DELAY_US_MAX, &self->sample_us[n]) != 0 ||
            (n && self->sample_rows[n] <= self->sample_rows[n - 1]))
            return -1;
        n++;
        p += len;
        if (*p == ',' && *++p == '\0')
            return -1;
    }
    if (n == 0)
        return -1;
    self->nsample_delays = n;
    return 0;
}

/* Sets one parameter; file (NULL for config.pbtxt) names where it came
 * from in the message. */
static int set_parameter(struct instance *self, const char *key, const char *value,
                         const char *file, struct inferd_error *err)
{
    int rc;
    if (strcmp(key, "fail_every_n") == 0)
        rc = parse_u64(value, UINT64_MAX, &self->fail_every_n);
    else if (strcmp(key, "fail_skip") == 0)
        rc = parse_u64(value, UINT64_MAX, &self->fail_skip);
    else if (strcmp(key, "delay_us") == 0)
        rc = parse_u64(value, DELAY_US_MAX, &self->delay_us);
    else if (strcmp(key, "shadow_fail") == 0)
        rc = parse_u64(value, 1, &self->shadow_fail);
    else if (strcmp(key, "sample_delay_us") == 0) {
        if (parse_sample_delays(self, value) != 0)
            return fail(err, 400, "%s%sparameter sample_delay_us: expected up to %d rows:us pairs, "
                        "rows ascending, separated by commas, got '%s'", file ? file : "",
                        file ? ": " : "", SAMPLE_DELAYS_MAX, value);
        return 0;
    }
    else if (strcmp(key, "fail_while_exists") == 0 || strcmp(key, "started_log") == 0) {
        char *dst = strcmp(key, "started_log") == 0 ? self->started_path : self->fail_path;
        size_t len = strlen(value);
        if (len == 0 || len >= FAIL_PATH_MAX)
            return fail(err, 400, "%s%sparameter %s: a path of 1 to %d bytes",
                        file ? file : "", file ? ": " : "", key, FAIL_PATH_MAX - 1);
        memcpy(dst, value, len + 1);
        return 0;
    } else if (file)
        return fail(err, 400, "%s: unknown parameter '%s' (identity_stall takes fail_every_n, "
                    "fail_skip, delay_us, sample_delay_us, shadow_fail, fail_while_exists and "
                    "started_log)", file, key);
    else
        return fail(err, 400, "unknown parameter '%s' (identity_stall takes fail_every_n, "
                    "fail_skip, delay_us, sample_delay_us, shadow_fail, fail_while_exists and "
                    "started_log)", key);
    if (rc && file)
        return fail(err, 400, "%s: parameter %s: '%s' is not a number in range", file, key,
                    value);
    if (rc)
        return fail(err, 400, "parameter %s: '%s' is not a number in range", key, value);
    return 0;
}

/* Applies <version_dir>/parameters, if there is one (see the top). */
static int read_version_parameters(struct instance *self, const char *version_dir,
                                   struct inferd_error *err)
{
    if (!version_dir)
        return 0;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/parameters", version_dir) >= sizeof path)
        return fail(err, 400, "version directory path too long: %s", version_dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return 0;
        return fail(err, 500, "%s: %s", path, strerror(errno));
    }
    char line[PARAM_LINE_MAX];
    unsigned lineno = 0;
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n' && !feof(f)) {
            rc = fail(err, 400, "%s:%u: line too long", path, lineno);
            break;
        }
        char *save = NULL;
        char *key = strtok_r(line, " \t\r\n", &save);
        if (!key)
            continue; /* an empty line */
        char *value = strtok_r(NULL, " \t\r\n", &save);
        char *extra = value ? strtok_r(NULL, " \t\r\n", &save) : NULL;
        if (!value || extra)
            rc = fail(err, 400, "%s:%u: expected `key value`", path, lineno);
        else
            rc = set_parameter(self, key, value, path, err);
    }
    if (rc == 0 && ferror(f))
        rc = fail(err, 500, "%s: read error", path);
    fclose(f);
    return rc;
}

static int is_load(const struct inferd_backend_load_args *args, void **instance,
                   struct inferd_model_info *info, struct inferd_error *err)
{
    if (args->ninputs != 1 || args->noutputs != 1)
        return fail(err, 400, "identity_stall serves one input and one output");
    const struct inferd_model_io *in = &args->inputs[0], *out = &args->outputs[0];
    if (in->dtype != out->dtype || in->ndim != out->ndim ||
        memcmp(in->dims, out->dims, in->ndim * sizeof in->dims[0]) != 0)
        return fail(err, 400, "input '%s' and output '%s' must have the same data_type and dims",
                    in->name, out->name);

    struct instance *self = calloc(1, sizeof *self);
    if (!self)
        return fail(err, 500, "out of memory");
    for (uint32_t i = 0; i < args->nparameters; i++) {
        const struct inferd_parameter *p = &args->parameters[i];
        if (set_parameter(self, p->key, p->value, NULL, err) != 0) {
            instance_free(self);
            return -1;
        }
    }
    if (read_version_parameters(self, args->version_dir, err) != 0) {
        instance_free(self);
        return -1;
    }
    self->io[0] = *in;
    self->io[1] = *out;
    self->io[0].name = strdup(in->name);
    self->io[1].name = strdup(out->name);
    if (!self->io[0].name || !self->io[1].name) {
        instance_free(self);
        return fail(err, 500, "out of memory");
    }
    atomic_init(&self->executions, 0);
    *info = (struct inferd_model_info){
        .ninputs = 1, .noutputs = 1, .inputs = &self->io[0], .outputs = &self->io[1]};
    *instance = self;
    return 0;
}

static void stall(uint64_t us)
{
    struct timespec ts = {.tv_sec = (time_t)(us / 1000000u),
                          .tv_nsec = (long)(us % 1000000u) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* started_log: one line per execution, written with one append. */
static int note_start(const char *path, uint64_t n, struct inferd_error *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return fail(err, 500, "started_log %s: %s", path, strerror(errno));
    char line[32];
    int len = snprintf(line, sizeof line, "%llu\n", (unsigned long long)n);
    ssize_t w = write(fd, line, (size_t)len);
    int saved = errno;
    close(fd);
    if (w != len)
        return fail(err, 500, "started_log %s: %s", path, w < 0 ? strerror(saved) : "short write");
    return 0;
}

/* The output: a copy of the input (its data lives only during execute()).
 * One allocation holds everything and is the state release() frees. */
static int is_execute_flags(void *instance, const struct inferd_tensor *inputs, uint32_t nin,
                            const char *const *output_names, uint32_t nout,
                            struct inferd_tensor *outputs, void **state, uint32_t flags,
                            struct inferd_error *err)
{
    struct instance *self = instance;
    if (self->shadow_fail && (flags & INFERD_EXECUTE_SHADOW))
        return fail(err, 500, "shadow execution refused (shadow_fail)");
    uint64_t n = atomic_fetch_add(&self->executions, 1) + 1;
    if (self->started_path[0] && note_start(self->started_path, n, err) != 0)
        return -1;
    if (self->delay_us)
        stall(self->delay_us);
    if (self->nsample_delays && nin >= 1) {
        uint64_t rows = inputs[0].ndim ? (uint64_t)inputs[0].shape[0] : 1;
        uint32_t k = 0;
        while (k + 1 < self->nsample_delays && self->sample_rows[k] < rows)
            k++;
        stall(rows * self->sample_us[k]);
    }
    if (self->fail_every_n && n > self->fail_skip && (n - self->fail_skip) % self->fail_every_n == 0)
        return fail(err, 500, "injected failure");
    if (self->fail_path[0] && access(self->fail_path, F_OK) == 0)
        return fail(err, 500, "injected failure (%s exists)", self->fail_path);
    if (nin != 1 || strcmp(inputs[0].name, self->io[0].name) != 0)
        return fail(err, 400, "expected the one input '%s'", self->io[0].name);
    if (nout != 1 || strcmp(output_names[0], self->io[1].name) != 0)
        return fail(err, 400, "unknown output '%s' (the output is '%s')", output_names[0],
                    self->io[1].name);

    const struct inferd_tensor *in = &inputs[0];
    struct inferd_tensor *out = &outputs[0];
    *out = *in;
    if (in->dtype != INFERD_DTYPE_BYTES) {
        void *copy = malloc(in->nbytes ? in->nbytes : 1);
        if (!copy)
            return fail(err, 500, "out of memory");
        memcpy(copy, in->data, in->nbytes);
        out->data = copy;
        *state = copy;
        return 0;
    }
    /* BYTES: the element array, then the element bytes. */
    size_t count = 1;
    for (uint32_t d = 0; d < in->ndim; d++)
        count *= (size_t)in->shape[d];
    size_t head = count * sizeof(struct inferd_bytes);
    char *block = malloc(head + in->nbytes + 1);
    if (!block)
        return fail(err, 500, "out of memory");
    const struct inferd_bytes *src = in->data;
    struct inferd_bytes *dst = (struct inferd_bytes *)block;
    char *bytes = block + head;
    for (size_t i = 0; i < count; i++) {
        if (src[i].len)
            memcpy(bytes, src[i].ptr, src[i].len);
        dst[i].ptr = bytes;
        dst[i].len = src[i].len;
        bytes += src[i].len;
    }
    out->data = block;
    *state = block;
    return 0;
}

static int is_execute(void *instance, const struct inferd_tensor *inputs, uint32_t nin,
                      const char *const *output_names, uint32_t nout,
                      struct inferd_tensor *outputs, void **state, struct inferd_error *err)
{
    return is_execute_flags(instance, inputs, nin, output_names, nout, outputs, state, 0, err);
}

static void is_release(void *instance, void *state)
{
    (void)instance;
    free(state);
}

static void is_unload(void *instance)
{
    instance_free(instance);
}

static const struct inferd_backend_api identity_stall_api = {
    .abi_version = 3,
    .name = "identity_stall",
    .load = is_load,
    .execute = is_execute,
    .release = is_release,
    .unload = is_unload,
    .execute_flags = is_execute_flags,
};

const struct inferd_backend_api *inferd_backend_init(uint32_t host_abi_version)
{
    /* A newer inferd still takes this table (it reads abi_version first). */
    return host_abi_version >= 3 ? &identity_stall_api : NULL;
}
