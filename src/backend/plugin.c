#include "backend/plugin.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <inferd/backend.h>

#include "backend/onnxruntime.h"
#include "base/mem.h"
#include "base/status.h"

/* The public types are the internal ones, so tensors cross the boundary
 * without a copy. */
_Static_assert(sizeof(enum inferd_dtype) == sizeof(enum dtype), "dtype size");
_Static_assert(INFERD_DTYPE_INVALID == (int)DT_INVALID && INFERD_DTYPE_BOOL == (int)DT_BOOL &&
                   INFERD_DTYPE_UINT8 == (int)DT_UINT8 && INFERD_DTYPE_UINT16 == (int)DT_UINT16 &&
                   INFERD_DTYPE_UINT32 == (int)DT_UINT32 &&
                   INFERD_DTYPE_UINT64 == (int)DT_UINT64 && INFERD_DTYPE_INT8 == (int)DT_INT8 &&
                   INFERD_DTYPE_INT16 == (int)DT_INT16 && INFERD_DTYPE_INT32 == (int)DT_INT32 &&
                   INFERD_DTYPE_INT64 == (int)DT_INT64 && INFERD_DTYPE_FP16 == (int)DT_FP16 &&
                   INFERD_DTYPE_FP32 == (int)DT_FP32 && INFERD_DTYPE_FP64 == (int)DT_FP64 &&
                   INFERD_DTYPE_BYTES == (int)DT_BYTES && INFERD_DTYPE_BF16 == (int)DT_BF16 &&
                   INFERD_DTYPE_BF16 + 1 == (int)DT_COUNT,
               "enum inferd_dtype and enum dtype have the same values");
_Static_assert(INFERD_MAX_DIMS == TENSOR_MAX_DIMS, "max dims");
_Static_assert(sizeof(struct inferd_tensor) == sizeof(struct tensor) &&
                   offsetof(struct inferd_tensor, name) == offsetof(struct tensor, name) &&
                   offsetof(struct inferd_tensor, dtype) == offsetof(struct tensor, dtype) &&
                   offsetof(struct inferd_tensor, ndim) == offsetof(struct tensor, ndim) &&
                   offsetof(struct inferd_tensor, shape) == offsetof(struct tensor, shape) &&
                   offsetof(struct inferd_tensor, data) == offsetof(struct tensor, data) &&
                   offsetof(struct inferd_tensor, nbytes) == offsetof(struct tensor, nbytes),
               "struct inferd_tensor has the layout of struct tensor");
_Static_assert(sizeof(struct inferd_bytes) == sizeof(struct tensor_bytes) &&
                   offsetof(struct inferd_bytes, ptr) == offsetof(struct tensor_bytes, ptr) &&
                   offsetof(struct inferd_bytes, len) == offsetof(struct tensor_bytes, len),
               "struct inferd_bytes has the layout of struct tensor_bytes");

#define LIB_PREFIX "libinferd_"
#define LIB_SUFFIX ".so"
/* Longest tensor name accepted from a plugin's model info. */
#define PLUGIN_IO_NAME_MAX 4096

/* One loaded library. Written once under plugins_lock before its ops are
 * handed out, read-only afterwards. */
struct plugin {
    char path[PATH_MAX]; /* canonical */
    char name[PLUGIN_NAME_MAX + 1];
    void *handle;
    const struct inferd_backend_api *api;
    struct backend_ops ops;
};

/* One backend instance: the plugin's own and what the adapter checks
 * outputs against. */
struct plugin_instance {
    const struct plugin *plugin;
    void *inner;
    struct model_info info;
};

static struct plugin plugins[PLUGIN_MAX_LIBRARIES];
static uint32_t nplugins;
static pthread_mutex_t plugins_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- the adapter ---------------------------------------------------------- */

/* A plugin's error as ours: 400 stays, every other status is a 500. */
static int plugin_error(const struct plugin *p, const char *prefix, struct inferd_error *perr,
                        struct error *err)
{
    int status = perr->status == 400 ? 400 : 500;
    perr->msg[sizeof perr->msg - 1] = '\0';
    if (!perr->msg[0])
        return error_set(err, status, "backend '%s' failed without a message", p->name);
    if (prefix)
        return error_set(err, status, "%s%s", prefix, perr->msg);
    return error_set(err, status, "%s", perr->msg);
}

static bool dtype_valid(enum inferd_dtype t)
{
    return t > INFERD_DTYPE_INVALID && t <= INFERD_DTYPE_BF16;
}

static int copy_ios(const struct plugin *p, const char *what, const struct inferd_model_io *src,
                    uint32_t n, struct model_io **out, struct error *err)
{
    *out = NULL;
    if (n == 0)
        return 0;
    if (!src)
        return error_set(err, 500, "backend '%s' described %u %ss but gave no array", p->name, n,
                         what);
    struct model_io *ios = mem_calloc(n, sizeof *ios);
    if (!ios)
        return error_set(err, 500, "out of memory");
    *out = ios; /* model_info_free() frees the names set so far */
    for (uint32_t i = 0; i < n; i++) {
        const struct inferd_model_io *s = &src[i];
        if (!s->name || !s->name[0] || strnlen(s->name, PLUGIN_IO_NAME_MAX) == PLUGIN_IO_NAME_MAX)
            return error_set(err, 500, "backend '%s' described %s %u without a valid name",
                             p->name, what, i);
        if (!dtype_valid(s->dtype) || s->ndim > INFERD_MAX_DIMS)
            return error_set(err, 500, "backend '%s' described %s '%s' with data type %d and %u dims",
                             p->name, what, s->name, (int)s->dtype, s->ndim);
        ios[i].name = mem_strdup(s->name);
        if (!ios[i].name)
            return error_set(err, 500, "out of memory");
        ios[i].dtype = (enum dtype)s->dtype;
        ios[i].ndim = s->ndim;
        memcpy(ios[i].dims, s->dims, s->ndim * sizeof s->dims[0]);
    }
    return 0;
}

static int copy_info(const struct plugin *p, const struct inferd_model_info *src,
                     struct model_info *dst, struct error *err)
{
    memset(dst, 0, sizeof *dst);
    dst->ninputs = src->ninputs;
    int rc = copy_ios(p, "input", src->inputs, src->ninputs, &dst->inputs, err);
    if (rc == 0) {
        dst->noutputs = src->noutputs;
        rc = copy_ios(p, "output", src->outputs, src->noutputs, &dst->outputs, err);
    }
    if (rc)
        model_info_free(dst);
    return rc;
}

/* The directory part of path into out (no trailing slash); false if none
 * or too long. */
static bool dir_of(const char *path, char *out, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path || (size_t)(slash - path) >= size)
        return false;
    memcpy(out, path, (size_t)(slash - path));
    out[slash - path] = '\0';
    return true;
}

/* The config's tensor as the model sees it: with max_batch_size > 0 a
 * leading -1 batch dim. */
static int io_to_public(const struct backend_config *cfg, const struct backend_tensor_decl *io,
                        const char *what, struct inferd_model_io *out, struct error *err)
{
    const int64_t *dims = io->dims;
    uint32_t ndim = io->ndim;
    uint32_t off = cfg->max_batch_size > 0 ? 1 : 0;
    if (ndim + off > INFERD_MAX_DIMS)
        return error_set(err, 400, "%s '%s': more than %d dims with the batch dimension", what,
                         io->name, INFERD_MAX_DIMS);
    out->name = io->name;
    out->dtype = (enum inferd_dtype)io->dtype;
    out->ndim = ndim + off;
    if (off)
        out->dims[0] = -1;
    memcpy(out->dims + off, dims, ndim * sizeof *dims);
    return 0;
}

static int adapter_load(struct plugin *p, const struct backend_load_args *a, void **instance,
                        struct model_info *info, struct error *err)
{
    char version_dir[PATH_MAX], model_dir[PATH_MAX];
    const struct backend_config *c = a->config;
    struct inferd_model_io *ios = NULL;
    struct inferd_parameter *params = NULL;
    struct plugin_instance *pi = NULL;
    int rc = ST_ERROR;

    *instance = NULL;
    memset(info, 0, sizeof *info);
    if (!c)
        return error_set(err, 400, "backend '%s': the model needs a config.pbtxt", p->name);
    if (!dir_of(a->path, version_dir, sizeof version_dir) ||
        !dir_of(version_dir, model_dir, sizeof model_dir))
        return error_set(err, 400, "backend '%s': no model directory in '%s'", p->name, a->path);

    ios = mem_calloc((size_t)c->ninputs + c->noutputs, sizeof *ios);
    params = mem_calloc(c->nparameters ? c->nparameters : 1, sizeof *params);
    pi = mem_calloc(1, sizeof *pi);
    if (!ios || !params || !pi) {
        error_set(err, 500, "out of memory");
        goto out_free_args;
    }
    for (uint32_t i = 0; i < c->ninputs; i++)
        if (io_to_public(c, &c->inputs[i], "input", &ios[i], err))
            goto out_free_args;
    for (uint32_t i = 0; i < c->noutputs; i++)
        if (io_to_public(c, &c->outputs[i], "output", &ios[c->ninputs + i], err))
            goto out_free_args;
    for (uint32_t i = 0; i < c->nparameters; i++) {
        params[i].key = c->parameters[i].key;
        params[i].value = c->parameters[i].value;
    }
    const char *version = strrchr(version_dir, '/') + 1;
    struct inferd_backend_load_args pargs = {
        .model_name = strrchr(model_dir, '/') ? strrchr(model_dir, '/') + 1 : model_dir,
        .model_dir = model_dir,
        .version_dir = version_dir,
        .version = strtoll(version, NULL, 10),
        .max_batch_size = c->max_batch_size,
        .ninputs = c->ninputs,
        .noutputs = c->noutputs,
        .inputs = ios,
        .outputs = ios + c->ninputs,
        .nparameters = c->nparameters,
        .parameters = params,
        .intra_op_threads = a->intra_op_threads > 0 ? a->intra_op_threads : 1,
        .inter_op_threads = a->inter_op_threads,
    };
    struct inferd_model_info pinfo = {0};
    struct inferd_error plugin_err = {0};
    char prefix[PLUGIN_NAME_MAX + 16];
    if (p->api->load(&pargs, &pi->inner, &pinfo, &plugin_err) != 0) {
        snprintf(prefix, sizeof prefix, "backend '%s': ", p->name);
        plugin_error(p, prefix, &plugin_err, err);
        goto out_free_args;
    }
    if (copy_info(p, &pinfo, &pi->info, err) || copy_info(p, &pinfo, info, err)) {
        p->api->unload(pi->inner);
        goto out_free_args;
    }
    pi->plugin = p;
    *instance = pi;
    pi = NULL;
    rc = 0;
out_free_args:
    if (pi)
        model_info_free(&pi->info);
    mem_free(pi);
    mem_free(params);
    mem_free(ios);
    return rc;
}

/* One load function per cache slot: the internal load() has no argument
 * that could say which library it is for. */
#define PLUGIN_SLOTS(X)                                                                         \
    X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)     \
    X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30) \
    X(31)
#define PLUGIN_LOAD_FN(i)                                                                      \
    static int plugin_load_##i(const struct backend_load_args *a, void **instance,            \
                               struct model_info *info, struct error *err)                    \
    {                                                                                          \
        return adapter_load(&plugins[i], a, instance, info, err);                              \
    }
PLUGIN_SLOTS(PLUGIN_LOAD_FN)
#define PLUGIN_LOAD_REF(i) plugin_load_##i,
static int (*const slot_load[])(const struct backend_load_args *, void **, struct model_info *,
                                struct error *) = {PLUGIN_SLOTS(PLUGIN_LOAD_REF)};
_Static_assert(sizeof slot_load / sizeof slot_load[0] == PLUGIN_MAX_LIBRARIES,
               "one load function per cache slot");

static const struct model_io *declared_output(const struct plugin_instance *pi, const char *name)
{
    for (uint32_t i = 0; i < pi->info.noutputs; i++)
        if (strcmp(pi->info.outputs[i].name, name) == 0)
            return &pi->info.outputs[i];
    return NULL;
}

/* NULL when t is a well-formed output of the model, else what is wrong. */
static const char *output_problem(const struct plugin_instance *pi, const struct tensor *t,
                                  char *buf, size_t size)
{
    const struct model_io *decl = declared_output(pi, t->name);
    if (!decl)
        return "not a model output";
    if (t->dtype != decl->dtype) {
        snprintf(buf, size, "data type %s, the model declares %s", dtype_name(t->dtype),
                 dtype_name(decl->dtype));
        return buf;
    }
    if (t->ndim != decl->ndim) {
        snprintf(buf, size, "%u dims, the model declares %u", t->ndim, decl->ndim);
        return buf;
    }
    for (uint32_t d = 0; d < t->ndim; d++)
        if (t->shape[d] < 0 || (decl->dims[d] >= 0 && t->shape[d] != decl->dims[d]))
            return "a shape that does not fit the declared dims";
    size_t esize = t->dtype == DT_BYTES ? sizeof(struct tensor_bytes) : dtype_size(t->dtype);
    int64_t count = tensor_count(t, (int64_t)(SIZE_MAX / 2 / esize));
    if (count < 0)
        return "too many elements";
    if (t->dtype != DT_BYTES) {
        if (t->nbytes != (size_t)count * esize)
            return "nbytes that do not match its shape";
        return t->nbytes && !t->data ? "no data" : NULL;
    }
    if (count && !t->data)
        return "no data";
    const struct tensor_bytes *el = t->data;
    size_t sum = 0;
    for (int64_t i = 0; i < count; i++) {
        if (el[i].len && !el[i].ptr)
            return "a BYTES element without data";
        sum += el[i].len;
    }
    return sum == t->nbytes ? NULL : "nbytes that are not the sum of its element lengths";
}

static int adapter_execute(void *instance, struct arena *arena, const struct tensor *inputs,
                           uint32_t nin, const char *const *output_names, uint32_t nout,
                           struct tensor *out, void **state, uint32_t flags,
                           struct error *err)
{
    (void)arena; /* plugins own their output memory */
    struct plugin_instance *pi = instance;
    const struct plugin *p = pi->plugin;
    struct inferd_error perr = {0};
    char buf[128];

    *state = NULL;
    memset(out, 0, nout * sizeof *out);
    int rc;
    if (p->api->abi_version >= 3 && p->api->execute_flags)
        rc = p->api->execute_flags(pi->inner, (const struct inferd_tensor *)inputs, nin,
                                   output_names, nout, (struct inferd_tensor *)out, state,
                                   flags & BACKEND_EXEC_SHADOW ? INFERD_EXECUTE_SHADOW : 0,
                                   &perr);
    else
        rc = p->api->execute(pi->inner, (const struct inferd_tensor *)inputs, nin, output_names,
                             nout, (struct inferd_tensor *)out, state, &perr);
    if (rc != 0) {
        *state = NULL;
        return plugin_error(p, NULL, &perr, err);
    }
    for (uint32_t i = 0; i < nout; i++) {
        out[i].name = output_names[i];
        const char *problem = output_problem(pi, &out[i], buf, sizeof buf);
        if (problem) {
            if (*state)
                p->api->release(pi->inner, *state);
            *state = NULL;
            return error_set(err, 500, "backend '%s' returned output '%s' with %s", p->name,
                             output_names[i], problem);
        }
    }
    return 0;
}

/* Outputs a decoupled request may ask for (a response is checked on the
 * stack). */
#define STREAM_MAX_OUTPUTS 64

/* A decoupled plugin's sink: checks each response, hands it on. */
struct stream_sink {
    struct plugin_instance *pi;
    const char *const *output_names;
    uint32_t nout;
    bool (*send)(void *ctx, const struct tensor *outputs, uint32_t nout, bool final);
    void *ctx;
    bool stopped;
    struct error bad; /* a malformed response (500) */
};

static int sink_send(void *ctx, const struct inferd_tensor *outputs, uint32_t nout,
                     uint32_t flags)
{
    struct stream_sink *k = ctx;
    char buf[128];
    if (k->stopped)
        return INFERD_SEND_STOP;
    if (nout != k->nout) {
        error_set(&k->bad, 500, "backend '%s' sent a response with %u outputs, %u were asked for",
                  k->pi->plugin->name, nout, k->nout);
        k->stopped = true;
        return INFERD_SEND_STOP;
    }
    struct tensor out[STREAM_MAX_OUTPUTS];
    uint32_t n = nout < STREAM_MAX_OUTPUTS ? nout : STREAM_MAX_OUTPUTS;
    memcpy(out, outputs, n * sizeof *out);
    for (uint32_t i = 0; i < n; i++) {
        out[i].name = k->output_names[i];
        const char *problem = output_problem(k->pi, &out[i], buf, sizeof buf);
        if (problem) {
            error_set(&k->bad, 500, "backend '%s' sent output '%s' with %s", k->pi->plugin->name,
                      out[i].name, problem);
            k->stopped = true;
            return INFERD_SEND_STOP;
        }
    }
    if (!k->send(k->ctx, out, n, (flags & INFERD_RESPONSE_FINAL) != 0))
        k->stopped = true;
    return k->stopped ? INFERD_SEND_STOP : INFERD_SEND_OK;
}

static int adapter_execute_stream(void *instance, const struct tensor *inputs, uint32_t nin,
                                  const char *const *output_names, uint32_t nout,
                                  bool (*send)(void *ctx, const struct tensor *outputs,
                                               uint32_t nout, bool final),
                                  void *ctx, struct error *err)
{
    struct plugin_instance *pi = instance;
    const struct plugin *p = pi->plugin;
    if (nout > STREAM_MAX_OUTPUTS)
        return error_set(err, 400, "backend '%s': at most %d outputs per decoupled request",
                         p->name, STREAM_MAX_OUTPUTS);
    struct stream_sink k = {.pi = pi, .output_names = output_names, .nout = nout, .send = send,
                            .ctx = ctx};
    struct inferd_response_sink sink = {.ctx = &k, .send = sink_send};
    struct inferd_error perr = {0};
    int rc = p->api->execute_decoupled(pi->inner, (const struct inferd_tensor *)inputs, nin,
                                       output_names, nout, &sink, &perr);
    if (k.bad.status) {
        *err = k.bad;
        return ST_ERROR;
    }
    return rc != 0 ? plugin_error(p, NULL, &perr, err) : 0;
}

static void adapter_release(void *instance, void *state)
{
    struct plugin_instance *pi = instance;
    pi->plugin->api->release(pi->inner, state);
}

static void adapter_unload(void *instance)
{
    struct plugin_instance *pi = instance;
    if (!pi)
        return;
    pi->plugin->api->unload(pi->inner);
    model_info_free(&pi->info);
    mem_free(pi);
}

/* ---- finding and opening libraries ----------------------------------------- */

static bool name_valid(const char *name)
{
    size_t n = strnlen(name, PLUGIN_NAME_MAX + 1);
    if (n == 0 || n > PLUGIN_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* <dir>/libinferd_<name>.so into out if that is a regular file. */
static bool find_in(const char *dir, const char *name, char *out, size_t size)
{
    struct stat st;
    if (!dir || !dir[0])
        return false;
    int n = snprintf(out, size, "%s/" LIB_PREFIX "%s" LIB_SUFFIX, dir, name);
    return n > 0 && (size_t)n < size && stat(out, &st) == 0 && S_ISREG(st.st_mode);
}

/* Checks the table a library's init returned; NULL if usable. */
static const char *api_problem(const struct inferd_backend_api *api, char *buf, size_t size)
{
    if (api->abi_version < INFERD_BACKEND_ABI_MIN_VERSION ||
        api->abi_version > INFERD_BACKEND_ABI_VERSION) {
        snprintf(buf, size,
                 "it implements backend ABI version %" PRIu32 ", inferd takes %u to %u",
                 api->abi_version, INFERD_BACKEND_ABI_MIN_VERSION, INFERD_BACKEND_ABI_VERSION);
        return buf;
    }
    if (!api->load)
        return "its inferd_backend_api has no load function";
    if (!api->execute)
        return "its inferd_backend_api has no execute function";
    if (!api->release)
        return "its inferd_backend_api has no release function";
    if (!api->unload)
        return "its inferd_backend_api has no unload function";
    return NULL;
}

/* Opens and checks the library at `path` into slot p. Caller holds the lock. */
static int open_library(struct plugin *p, const char *name, const char *path, struct error *err)
{
    char buf[96];
    dlerror();
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        return error_set(err, 400, "backend '%s': cannot load %s: %s", name, path,
                         why ? why : "unknown error");
    }
    dlerror();
    void *sym = dlsym(handle, "inferd_backend_init");
    if (!sym) {
        const char *why = dlerror();
        error_set(err, 400, "backend '%s': %s does not export inferd_backend_init: %s", name, path,
                  why ? why : "the symbol is NULL");
        goto out_close;
    }
    inferd_backend_init_fn init;
    /* POSIX: a dlsym() result converts to a function pointer. */
    memcpy(&init, &sym, sizeof init);
    const struct inferd_backend_api *api = init(INFERD_BACKEND_ABI_VERSION);
    if (!api) {
        error_set(err, 400, "backend '%s': %s cannot serve backend ABI version %u", name, path,
                  INFERD_BACKEND_ABI_VERSION);
        goto out_close;
    }
    const char *problem = api_problem(api, buf, sizeof buf);
    if (problem) {
        error_set(err, 400, "backend '%s': %s: %s", name, path, problem);
        goto out_close;
    }
    snprintf(p->path, sizeof p->path, "%s", path);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->handle = handle;
    p->api = api;
    return 0;
out_close:
    dlclose(handle);
    return ST_ERROR;
}

int plugin_backend_resolve(const char *backend_name, const char *version_dir,
                           const char *model_dir, const char *search_dir,
                           const struct backend_ops **ops, struct error *err)
{
    char found[PATH_MAX], canon[PATH_MAX];
    int rc = 0;

    *ops = NULL;
    if (!backend_name || !backend_name[0] || strcmp(backend_name, "onnxruntime") == 0) {
        *ops = &backend_onnxruntime;
        return 0;
    }
    if (!name_valid(backend_name))
        return error_set(err, 400,
                         "backend: '%.*s' is not a backend name (1 to %d letters, digits, '_' "
                         "or '-')",
                         PLUGIN_NAME_MAX, backend_name, PLUGIN_NAME_MAX);
    /* The version directory first: a new plugin build shipped in a new
     * version directory replaces the old one through the reload path. */
    if (!find_in(version_dir, backend_name, found, sizeof found) &&
        !find_in(model_dir, backend_name, found, sizeof found) &&
        !find_in(search_dir, backend_name, found, sizeof found)) {
        if (search_dir && search_dir[0])
            return error_set(err, 400,
                             "backend '%s': no " LIB_PREFIX "%s" LIB_SUFFIX " in %s or %s",
                             backend_name, backend_name, model_dir ? model_dir : "",
                             search_dir);
        return error_set(err, 400,
                         "backend '%s': no " LIB_PREFIX "%s" LIB_SUFFIX
                         " in %s (and no backend directory)",
                         backend_name, backend_name, model_dir ? model_dir : "");
    }
    if (!realpath(found, canon))
        return error_set(err, 400, "backend '%s': %s: %s", backend_name, found, strerror(errno));

    pthread_mutex_lock(&plugins_lock);
    for (uint32_t i = 0; i < nplugins; i++) {
        if (strcmp(plugins[i].path, canon) == 0) {
            *ops = &plugins[i].ops;
            goto out_unlock;
        }
    }
    if (nplugins == PLUGIN_MAX_LIBRARIES) {
        rc = error_set(err, 500, "backend '%s': %s: already %d backend libraries loaded",
                       backend_name, canon, PLUGIN_MAX_LIBRARIES);
        goto out_unlock;
    }
    struct plugin *p = &plugins[nplugins];
    rc = open_library(p, backend_name, canon, err);
    if (rc)
        goto out_unlock;
    p->ops = (struct backend_ops){
        .abi_version = BACKEND_ABI_VERSION,
        .name = p->name,
        .load = slot_load[nplugins],
        .execute = adapter_execute,
        .release = adapter_release,
        .unload = adapter_unload,
        /* A version 1 table ends before execute_decoupled. */
        .execute_stream = p->api->abi_version >= 2 && p->api->execute_decoupled
                              ? adapter_execute_stream
                              : NULL,
    };
    nplugins++;
    *ops = &p->ops;
out_unlock:
    pthread_mutex_unlock(&plugins_lock);
    return rc;
}
