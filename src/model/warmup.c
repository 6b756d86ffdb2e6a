#include "model/warmup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/path.h"
#include "base/status.h"
#include "core/fp16.h"

#define WARMUP_ARENA_CHUNK (64 * 1024)
/* The backend's BYTES outputs of one execution (the same ceiling as a
 * scheduler batch). */
#define WARMUP_OUTPUT_MAX ((size_t)1 << 30)
#define WARMUP_DIR "warmup"
#define WARMUP_PATH_MAX 4096
#define WARMUP_NAME_MAX 64
/* Fixed seed of the random_data generator (any non-zero value). */
#define RANDOM_SEED 0x9e3779b97f4a7c15ull
#define RANDOM_INT_RANGE 128
#define RANDOM_BYTES_MAX_LEN 8

/* One warm-up sample: the inputs of one execution and how often it runs. */
struct sample {
    const char *name;
    uint32_t count; /* executions per instance, >= 1 */
    bool batched;
    uint32_t batch_size; /* with batched */
    struct arena data;   /* everything below */
    struct tensor *inputs;
    uint32_t ninputs;
    const char **output_names;
    struct tensor *outputs;
    uint32_t noutputs;
};

/* What to put into one input. */
struct input_spec {
    const char *name;
    enum dtype dtype;
    uint32_t ndim; /* without the batch dim */
    const int64_t *dims;
    enum model_warmup_source source;
    const char *file; /* FILE */
    uint64_t seed;    /* RANDOM */
};

/* The random_data seed of the model's k-th input: fixed, but different per
 * input so that two inputs of a sample do not hold the same values. */
static uint64_t input_seed(uint32_t k)
{
    return RANDOM_SEED + (uint64_t)k * 0xbf58476d1ce4e5b9ull;
}

static int fail(struct error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct error *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(e, 500, fmt, ap);
    va_end(ap);
    return ST_ERROR;
}

/* dirname(dirname(model_path)): <repo>/<model>/<version>/model.onnx gives
 * <repo>/<model>. */
static bool model_dir(const char *model_path, char *out, size_t size)
{
    if (!path_fmt(out, size, "%s", model_path))
        return false;
    for (int i = 0; i < 2; i++) {
        char *slash = strrchr(out, '/');
        if (!slash)
            return path_fmt(out, size, ".");
        if (slash == out)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
    return true;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Fills n fixed-size elements of type dt with the documented random_data
 * values. The float values are multiples of 2^-11 (FP16) or 2^-8 (BF16) so
 * that they convert exactly and never round up to 1. */
static void fill_random(void *data, enum dtype dt, int64_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rng_next(&s);
        uint64_t small = (r >> 32) % RANDOM_INT_RANGE;
        switch (dt) {
        case DT_BOOL:
            ((uint8_t *)data)[i] = (uint8_t)(r >> 63);
            break;
        case DT_UINT8:
            ((uint8_t *)data)[i] = (uint8_t)small;
            break;
        case DT_INT8:
            ((int8_t *)data)[i] = (int8_t)small;
            break;
        case DT_UINT16:
            ((uint16_t *)data)[i] = (uint16_t)small;
            break;
        case DT_INT16:
            ((int16_t *)data)[i] = (int16_t)small;
            break;
        case DT_UINT32:
            ((uint32_t *)data)[i] = (uint32_t)small;
            break;
        case DT_INT32:
            ((int32_t *)data)[i] = (int32_t)small;
            break;
        case DT_UINT64:
            ((uint64_t *)data)[i] = small;
            break;
        case DT_INT64:
            ((int64_t *)data)[i] = (int64_t)small;
            break;
        case DT_FP16:
            ((uint16_t *)data)[i] = fp16_from_float((float)(r >> 53) * 0x1p-11f);
            break;
        case DT_BF16: {
            float f = (float)(r >> 56) * 0x1p-8f;
            uint32_t bits;
            memcpy(&bits, &f, sizeof bits);
            ((uint16_t *)data)[i] = (uint16_t)(bits >> 16);
            break;
        }
        case DT_FP32:
            ((float *)data)[i] = (float)(r >> 40) * 0x1p-24f;
            break;
        case DT_FP64:
            ((double *)data)[i] = (double)(r >> 11) * 0x1p-53;
            break;
        case DT_BYTES:
        case DT_INVALID:
        case DT_COUNT:
            break;
        }
    }
}

/* Opens a warm-up data file and tells its size; -1 with e naming it. */
static int open_data_file(const struct input_spec *in, const char *path, int *fd_out, off_t *size,
                          struct error *e)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(e, "input '%s': cannot open '%s': %s", in->name, path, strerror(errno));
    if (fstat(fd, &st) != 0) {
        int saved = errno;
        close(fd);
        return fail(e, "input '%s': cannot read '%s': %s", in->name, path, strerror(saved));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail(e, "input '%s': cannot read '%s': not a regular file", in->name, path);
    }
    *fd_out = fd;
    *size = st.st_size;
    return 0;
}

/* Reads exactly n bytes; -1 with e on a read error or an early end (the
 * file changed after fstat). */
static int read_exact(const struct input_spec *in, int fd, const char *path, void *buf, size_t n,
                      struct error *e)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return fail(e, "input '%s': cannot read '%s': %s", in->name, path, strerror(errno));
        if (r == 0)
            return fail(e, "input '%s': '%s' ended after %zu of %zu bytes", in->name, path, got, n);
        got += (size_t)r;
    }
    return 0;
}

/* The data of a fixed-size input: sample row 0 is filled, then copied into
 * the other rows of the batch. */
static int fill_fixed(struct sample *s, const struct input_spec *in, const char *path,
                      int64_t per_row, int64_t rows, struct tensor *t, struct error *e)
{
    size_t esize = dtype_size(in->dtype);
    size_t row_bytes = (size_t)per_row * esize, total = row_bytes * (size_t)rows;
    char *data = in->source == MODEL_WARMUP_ZERO ? arena_calloc(&s->data, 1, total)
                                                 : arena_alloc(&s->data, total);
    if (!data)
        return fail(e, "input '%s': cannot allocate %zu bytes (limit %zu)", in->name, total,
                    (size_t)WARMUP_MAX_BYTES);
    t->data = data;
    t->nbytes = total;
    if (in->source == MODEL_WARMUP_ZERO)
        return 0;
    if (in->source == MODEL_WARMUP_RANDOM) {
        /* The whole batch: rows differ, like real traffic. */
        fill_random(data, in->dtype, per_row * rows, in->seed);
        return 0;
    }
    int fd;
    off_t size;
    if (open_data_file(in, path, &fd, &size, e))
        return ST_ERROR;
    int rc = 0;
    if ((uint64_t)size != row_bytes) {
        char shape[128];
        shape_format(in->dims, in->ndim, shape, sizeof shape);
        rc = fail(e, "input '%s': '%s' holds %lld bytes, expected %zu (%s %s)", in->name, path,
                  (long long)size, row_bytes, dtype_name(in->dtype), shape);
    } else {
        rc = read_exact(in, fd, path, data, row_bytes, e);
    }
    close(fd);
    for (int64_t r = 1; !rc && r < rows; r++)
        memcpy(data + (size_t)r * row_bytes, data, row_bytes);
    return rc;
}

static uint32_t load_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Splits a BYTES data file (4-byte little-endian length + bytes per
 * element) into exactly n elements. */
static int parse_bytes_file(const struct input_spec *in, const char *path, const unsigned char *buf,
                            size_t size, int64_t n, struct tensor_bytes *el, struct error *e)
{
    size_t off = 0;
    for (int64_t i = 0; i < n; i++) {
        if (size - off < 4)
            return fail(e,
                        "input '%s': '%s' holds %zu bytes, too few for %lld BYTES elements "
                        "(element %lld has no 4-byte length)",
                        in->name, path, size, (long long)n, (long long)i);
        uint32_t len = load_le32(buf + off);
        off += 4;
        if (size - off < len)
            return fail(e, "input '%s': '%s' holds %zu bytes, element %lld of %lld needs %zu",
                        in->name, path, size, (long long)i, (long long)n, off + (size_t)len);
        el[i].ptr = (const char *)buf + off;
        el[i].len = len;
        off += len;
    }
    if (off != size)
        return fail(e, "input '%s': '%s' holds %zu bytes, expected %zu (%lld BYTES elements)",
                    in->name, path, size, off, (long long)n);
    return 0;
}

static int fill_bytes(struct sample *s, const struct input_spec *in, const char *path,
                      int64_t per_row, int64_t rows, struct tensor *t, struct error *e)
{
    int64_t n = per_row * rows;
    struct tensor_bytes *el = arena_calloc(&s->data, (size_t)n, sizeof *el);
    if (!el)
        return fail(e, "input '%s': cannot allocate %lld BYTES elements", in->name, (long long)n);
    t->data = el;
    t->nbytes = 0;
    if (in->source == MODEL_WARMUP_ZERO) {
        for (int64_t i = 0; i < n; i++)
            el[i].ptr = ""; /* empty, but a valid pointer */
        return 0;
    }
    if (in->source == MODEL_WARMUP_RANDOM) {
        char *text = arena_alloc(&s->data, (size_t)n * RANDOM_BYTES_MAX_LEN);
        if (!text)
            return fail(e, "input '%s': cannot allocate %lld BYTES elements", in->name,
                        (long long)n);
        uint64_t st = in->seed;
        for (int64_t i = 0; i < n; i++) {
            char *p = text + (size_t)i * RANDOM_BYTES_MAX_LEN;
            uint32_t len = 1 + (uint32_t)(rng_next(&st) >> 61); /* 1..8 */
            for (uint32_t k = 0; k < len; k++)
                p[k] = (char)('!' + (rng_next(&st) >> 32) % ('~' - '!' + 1));
            el[i].ptr = p;
            el[i].len = len;
            t->nbytes += len;
        }
        return 0;
    }
    int fd;
    off_t size;
    if (open_data_file(in, path, &fd, &size, e))
        return ST_ERROR;
    int rc = 0;
    unsigned char *buf = NULL;
    if ((uint64_t)size > WARMUP_MAX_BYTES) {
        rc = fail(e, "input '%s': '%s' holds %lld bytes, more than the limit of %zu", in->name,
                  path, (long long)size, (size_t)WARMUP_MAX_BYTES);
    } else if (!(buf = arena_alloc(&s->data, (size_t)size))) {
        rc = fail(e, "input '%s': cannot allocate %lld bytes for '%s'", in->name, (long long)size,
                  path);
    } else {
        rc = read_exact(in, fd, path, buf, (size_t)size, e) ||
             parse_bytes_file(in, path, buf, (size_t)size, per_row, el, e);
    }
    close(fd);
    if (rc)
        return ST_ERROR;
    for (int64_t i = 0; i < per_row; i++)
        t->nbytes += el[i].len;
    t->nbytes *= (size_t)rows;
    for (int64_t r = 1; r < rows; r++)
        memcpy(el + r * per_row, el, (size_t)per_row * sizeof *el);
    return 0;
}

/* Makes s->inputs[k] from its spec. */
static int build_input(const struct model *m, struct sample *s, uint32_t k,
                       const struct input_spec *in, struct error *e)
{
    struct tensor *t = &s->inputs[k];
    uint32_t off = s->batched ? 1 : 0;
    char path[WARMUP_PATH_MAX], dir[WARMUP_PATH_MAX];

    path[0] = '\0'; /* only FILE reads it */
    if (in->ndim + off > TENSOR_MAX_DIMS)
        return fail(e, "input '%s': more than %d dims", in->name, TENSOR_MAX_DIMS);
    t->name = in->name;
    t->dtype = in->dtype;
    t->ndim = in->ndim + off;
    if (s->batched)
        t->shape[0] = s->batch_size;
    memcpy(t->shape + off, in->dims, in->ndim * sizeof *in->dims);

    size_t esize = dtype_size(in->dtype);
    if (in->dtype != DT_BYTES && esize == 0)
        return fail(e, "input '%s': unsupported data_type", in->name);
    /* BYTES: an element costs at least its struct tensor_bytes. */
    size_t unit = in->dtype == DT_BYTES ? sizeof(struct tensor_bytes) : esize;
    int64_t limit = (int64_t)(WARMUP_MAX_BYTES / unit);
    int64_t rows = s->batched ? (int64_t)s->batch_size : 1;
    int64_t per_row = shape_count(in->dims, in->ndim, limit);
    if (per_row < 0 || (per_row && rows > limit / per_row)) {
        char shape[128];
        shape_format(t->shape, t->ndim, shape, sizeof shape);
        return fail(e, "input '%s': %s %s is larger than the warm-up limit of %zu bytes", in->name,
                    dtype_name(in->dtype), shape, (size_t)WARMUP_MAX_BYTES);
    }
    if (in->source == MODEL_WARMUP_FILE &&
        (!model_dir(m->path, dir, sizeof dir) ||
         !path_fmt(path, sizeof path, "%s/%s/%s", dir, WARMUP_DIR, in->file)))
        return fail(e, "input '%s': the path of '%s' is too long", in->name, in->file);
    if (in->dtype == DT_BYTES)
        return fill_bytes(s, in, path, per_row, rows, t, e);
    return fill_fixed(s, in, path, per_row, rows, t, e);
}

/* Allocates the input and output arrays of s; every model output is
 * requested. */
static int sample_begin(const struct model *m, struct sample *s, struct error *e)
{
    arena_init(&s->data, WARMUP_ARENA_CHUNK, WARMUP_MAX_BYTES);
    s->ninputs = m->run_info.ninputs;
    s->noutputs = m->run_info.noutputs;
    if (s->noutputs == 0)
        return fail(e, "the model has no outputs");
    s->inputs = arena_calloc(&s->data, s->ninputs ? s->ninputs : 1, sizeof *s->inputs);
    s->outputs = arena_calloc(&s->data, s->noutputs, sizeof *s->outputs);
    s->output_names = arena_calloc(&s->data, s->noutputs, sizeof *s->output_names);
    if (!s->inputs || !s->outputs || !s->output_names)
        return fail(e, "out of memory");
    for (uint32_t i = 0; i < s->noutputs; i++)
        s->output_names[i] = m->run_info.outputs[i].name;
    return 0;
}

/* A decoupled model's warm-up responses are dropped as they come. */
static bool discard_response(void *ctx, const struct tensor *outputs, uint32_t n, bool final)
{
    (void)ctx, (void)outputs, (void)n, (void)final;
    return true;
}

/* One warm-up execution on instance i. */
static int sample_execute(const struct model *m, uint32_t i, struct sample *s, struct arena *out,
                          struct error *be)
{
    if (m->sched_cfg.decoupled)
        return m->backend->execute_stream(m->instances[i], s->inputs, s->ninputs,
                                          s->output_names, s->noutputs, discard_response, NULL,
                                          be);
    void *state = NULL;
    if (m->backend->execute(m->instances[i], out, s->inputs, s->ninputs, s->output_names,
                            s->noutputs, s->outputs, &state, 0, be))
        return ST_ERROR;
    m->backend->release(m->instances[i], state);
    return 0;
}

/* Runs s count times on every instance. Each execution's output memory is
 * released (and its arena reset) before the next one. */
static int sample_run(const struct model *m, struct sample *s, struct error *e)
{
    struct arena out;
    int rc = 0;
    arena_init(&out, WARMUP_ARENA_CHUNK, WARMUP_OUTPUT_MAX);
    for (uint32_t i = 0; i < m->ninstances && !rc; i++) {
        for (uint32_t c = 0; c < s->count && !rc; c++) {
            struct error be;
            error_clear(&be);
            if (sample_execute(m, i, s, &out, &be) != 0)
                rc = fail(e, "instance %u: %s", i, be.msg);
            arena_reset(&out);
        }
    }
    arena_free(&out);
    return rc;
}

static const struct model_warmup_input *find_warmup_input(const struct model_warmup *w,
                                                          const char *name)
{
    for (uint32_t i = 0; i < w->ninputs; i++)
        if (!strcmp(w->inputs[i].name, name))
            return &w->inputs[i];
    return NULL;
}

static bool is_model_input(const struct model *m, const char *name)
{
    for (uint32_t k = 0; k < m->run_info.ninputs; k++)
        if (!strcmp(m->run_info.inputs[k].name, name))
            return true;
    return false;
}

/* One model_warmup entry of the config. */
static int warmup_entry(const struct model *m, const struct model_warmup *w, struct error *e)
{
    struct sample s = {
        .name = w->name,
        .count = w->count ? w->count : 1,
        .batched = m->config.max_batch_size > 0,
        .batch_size = w->batch_size ? w->batch_size : 1,
    };
    int rc = sample_begin(m, &s, e);
    for (uint32_t i = 0; !rc && i < w->ninputs; i++)
        if (!is_model_input(m, w->inputs[i].name))
            rc = fail(e, "the model has no input '%s'", w->inputs[i].name);
    for (uint32_t k = 0; !rc && k < m->run_info.ninputs; k++) {
        const struct model_io *io = &m->run_info.inputs[k];
        const struct model_warmup_input *wi = find_warmup_input(w, io->name);
        if (!wi) {
            rc = fail(e, "input '%s' is missing (a sample must give every model input)", io->name);
            break;
        }
        if (wi->dtype != io->dtype) {
            rc = fail(e, "input '%s' has data_type %s, the model %s", io->name,
                      dtype_config_name(wi->dtype), dtype_config_name(io->dtype));
            break;
        }
        struct input_spec in = {
            .name = io->name,
            .dtype = wi->dtype,
            .ndim = wi->ndim,
            .dims = wi->dims,
            .source = wi->source,
            .file = wi->input_data_file,
            .seed = input_seed(k),
        };
        rc = build_input(m, &s, k, &in, e);
    }
    if (!rc)
        rc = sample_run(m, &s, e);
    arena_free(&s.data);
    return rc;
}

/* The default sample of one batch size (ignored without a batch dim):
 * zeros, variable non-batch dims as 1. Dims come from the config (which
 * may fix what the ONNX file leaves variable), else from the model. */
static int warmup_default(const struct model *m, uint32_t batch_size, struct error *e)
{
    struct sample s = {
        .count = 1,
        .batched = m->config.max_batch_size > 0,
        .batch_size = batch_size,
    };
    int rc = sample_begin(m, &s, e);
    uint32_t off = s.batched ? 1 : 0;
    for (uint32_t k = 0; !rc && k < m->run_info.ninputs; k++) {
        const struct model_io *io = &m->run_info.inputs[k];
        int64_t dims[TENSOR_MAX_DIMS];
        uint32_t ndim;
        int c = model_config_input_index(&m->config, io->name);
        if (c >= 0) {
            ndim = m->config.inputs[c].ndim;
            memcpy(dims, m->config.inputs[c].dims, ndim * sizeof *dims);
        } else {
            ndim = io->ndim > off ? io->ndim - off : 0;
            memcpy(dims, io->dims + (io->ndim - ndim), ndim * sizeof *dims);
        }
        for (uint32_t d = 0; d < ndim; d++)
            if (dims[d] < 0)
                dims[d] = 1;
        struct input_spec in = {
            .name = io->name,
            .dtype = io->dtype,
            .ndim = ndim,
            .dims = dims,
            .source = MODEL_WARMUP_ZERO,
        };
        rc = build_input(m, &s, k, &in, e);
    }
    if (!rc)
        rc = sample_run(m, &s, e);
    arena_free(&s.data);
    return rc;
}

static void default_name(const struct model *m, uint32_t batch_size, char *out, size_t size)
{
    if (m->config.max_batch_size > 0)
        snprintf(out, size, "default_batch_%u", batch_size);
    else
        snprintf(out, size, "default");
}

/* The default warm-up: one execution per distinct preferred batch size,
 * else one of batch 1 (see warmup.h). */
static int warmup_defaults(const struct model *m, struct error *err)
{
    const struct model_dynamic_batching *db = &m->config.dynamic_batching;
    char name[WARMUP_NAME_MAX];
    struct error e;
    uint32_t sizes = 0;

    error_clear(&e);
    if (m->config.max_batch_size > 0 && db->enabled) {
        for (uint32_t i = 0; i < db->npreferred; i++) {
            uint32_t bs = (uint32_t)db->preferred_batch_size[i];
            bool seen = false;
            for (uint32_t j = 0; j < i && !seen; j++)
                seen = db->preferred_batch_size[j] == db->preferred_batch_size[i];
            if (seen || bs < 1)
                continue;
            sizes++;
            if (warmup_default(m, bs, &e)) {
                default_name(m, bs, name, sizeof name);
                return error_set(err, 500, "warm-up '%s' failed: %s", name, e.msg);
            }
        }
    }
    if (sizes == 0 && warmup_default(m, 1, &e)) {
        default_name(m, 1, name, sizeof name);
        return error_set(err, 500, "warm-up '%s' failed: %s", name, e.msg);
    }
    return 0;
}

int model_warmup(const struct model *m, uint64_t *elapsed_us, struct error *err)
{
    uint64_t t0 = clock_now_ns();
    int rc = 0;

    if (m->config.nwarmups == 0) {
        rc = warmup_defaults(m, err);
    } else {
        for (uint32_t i = 0; !rc && i < m->config.nwarmups; i++) {
            const struct model_warmup *w = &m->config.warmups[i];
            struct error e;
            error_clear(&e);
            if (warmup_entry(m, w, &e))
                rc = error_set(err, 500, "warm-up '%s' failed: %s", w->name, e.msg);
        }
    }
    uint64_t us = (clock_now_ns() - t0) / 1000u;
    if (elapsed_us)
        *elapsed_us = us;
    if (!rc)
        log_debug("model %s version %s: warm-up done on %u instances in %llu us", m->name,
                  m->version_str, m->ninstances, (unsigned long long)us);
    return rc;
}
