/*
 * attach.c: makes a model version generative (engine.h): generation.json,
 * the check of the graph's KV-cache interface, the warm-up, the text
 * interface clients see, and the engine's start and stop.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/file.h"
#include "base/json.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/path.h"
#include "base/status.h"
#include "gen/engine.h"
#include "gen/engine_int.h"

#define GENERATION_FILE "generation.json"
#define GENERATION_FILE_MAX (64u << 10)

static struct gen_settings settings = {
    .kv_cache_bytes = GEN_DEFAULT_KV_CACHE_BYTES,
    .max_running = GEN_DEFAULT_MAX_RUNNING,
    .prefill_chunk = GEN_DEFAULT_PREFILL_CHUNK,
};

void gen_configure(const struct gen_settings *s)
{
    settings = *s;
    gen_kv_budget_set(s->kv_cache_bytes);
}

/* ---- generation.json ------------------------------------------------------------------ */

struct gen_file {
    char tokenizer[256];
    struct gen_shape shape;
};

static int field_u32(const struct json_value *root, const char *key, uint32_t min, uint32_t max,
                     uint32_t *out, struct error *err)
{
    const struct json_value *v = json_get(root, key);
    int64_t x;
    if (!v || json_num_i64(v, &x) != 0 || x < min || x > max)
        return error_set(err, 400, "%s: '%s' must be an integer from %u to %u", GENERATION_FILE,
                         key, min, max);
    *out = (uint32_t)x;
    return 0;
}

static int parse_generation(const char *text, size_t len, struct gen_file *g, struct error *err)
{
    static const char *const keys[] = {"tokenizer", "max_context", "eos_token_id", "num_layers",
                                       "num_heads", "head_dim",    "vocab_size",   "present"};
    struct arena a;
    arena_init(&a, 4096, 1u << 20);
    struct json_value *root;
    const char *msg;
    size_t off;
    int rc = ST_ERROR;
    if (json_parse(&a, text, len, NULL, &root, &msg, &off) != 0) {
        error_set(err, 400, "%s: %s at byte %zu", GENERATION_FILE, msg, off);
        goto out;
    }
    if (root->type != JSON_OBJECT) {
        error_set(err, 400, "%s: expected an object", GENERATION_FILE);
        goto out;
    }
    for (uint32_t i = 0; i < root->len; i++) {
        size_t k = 0;
        while (k < sizeof keys / sizeof keys[0] && strcmp(keys[k], root->u.members[i].key) != 0)
            k++;
        if (k == sizeof keys / sizeof keys[0]) {
            error_set(err, 400, "%s: unknown key '%s'", GENERATION_FILE, root->u.members[i].key);
            goto out;
        }
    }
    const struct json_value *tok = json_get(root, "tokenizer");
    if (!tok || tok->type != JSON_STRING || tok->len == 0 || tok->len >= sizeof g->tokenizer ||
        strchr(tok->u.str, '/') || tok->u.str[0] == '.' || strlen(tok->u.str) != tok->len) {
        error_set(err, 400, "%s: 'tokenizer' must name a file of the version directory",
                  GENERATION_FILE);
        goto out;
    }
    memcpy(g->tokenizer, tok->u.str, tok->len + 1);
    struct gen_shape *s = &g->shape;
    if (field_u32(root, "max_context", 2, 1u << 20, &s->max_context, err) ||
        field_u32(root, "vocab_size", 2, 1u << 20, &s->vocab, err) ||
        field_u32(root, "eos_token_id", 0, s->vocab - 1, &s->eos, err) ||
        field_u32(root, "num_layers", 1, GEN_MAX_LAYERS, &s->kv.layers, err) ||
        field_u32(root, "num_heads", 1, 1024, &s->kv.heads, err) ||
        field_u32(root, "head_dim", 1, 4096, &s->kv.head_dim, err))
        goto out;
    const struct json_value *present = json_get(root, "present");
    if (present && (present->type != JSON_STRING ||
                    (strcmp(present->u.str, "all") != 0 && strcmp(present->u.str, "new") != 0))) {
        error_set(err, 400,
                  "%s: 'present' must be \"all\" (present.* is the past and the new tokens) or "
                  "\"new\" (present.* holds only the new tokens)",
                  GENERATION_FILE);
        goto out;
    }
    s->present_new = present && strcmp(present->u.str, "new") == 0;
    rc = 0;
out:
    arena_free(&a);
    return rc;
}

/* ---- the graph ------------------------------------------------------------------------------- */

static const struct model_io *find_io(const struct model_io *ios, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(ios[i].name, name) == 0)
            return &ios[i];
    return NULL;
}

/* io exists with dtype and rank, and each fixed dim of want (>= 0) matches. */
static int check_io(const struct model_io *ios, uint32_t n, const char *name, enum dtype dtype,
                    uint32_t rank, const int64_t *want, struct error *err)
{
    const struct model_io *io = find_io(ios, n, name);
    if (!io)
        return error_set(err, 400, "generative model: the graph has no '%s'", name);
    if (io->dtype != dtype || io->ndim != rank)
        return error_set(err, 400, "generative model: '%s' must be %s of rank %u", name,
                         dtype_name(dtype), rank);
    for (uint32_t d = 0; d < rank; d++)
        if (want[d] >= 0 && io->dims[d] >= 0 && io->dims[d] != want[d])
            return error_set(err, 400,
                             "generative model: dimension %u of '%s' is %lld, generation.json "
                             "says %lld",
                             d, name, (long long)io->dims[d], (long long)want[d]);
    return 0;
}

static char *name_of(const char *fmt, uint32_t layer, const char *kind)
{
    char buf[96];
    snprintf(buf, sizeof buf, fmt, layer, kind);
    return mem_strdup(buf);
}

static int check_graph(struct gen_engine *e, const struct model_info *info, struct error *err)
{
    const struct gen_shape *s = &e->shape;
    uint32_t layers = s->kv.layers;
    if (info->ninputs != 3 + 2 * layers || info->noutputs != 1 + 2 * layers)
        return error_set(err, 400,
                         "generative model: the graph must have %u inputs and %u outputs "
                         "(num_layers %u), it has %u and %u",
                         3 + 2 * layers, 1 + 2 * layers, layers, info->ninputs, info->noutputs);
    const int64_t any2[2] = {-1, -1};
    const int64_t logits[3] = {-1, -1, s->vocab};
    const int64_t kv[4] = {-1, s->kv.heads, -1, s->kv.head_dim};
    if (check_io(info->inputs, info->ninputs, "input_ids", DT_INT64, 2, any2, err) ||
        check_io(info->inputs, info->ninputs, "position_ids", DT_INT64, 2, any2, err) ||
        check_io(info->inputs, info->ninputs, "attention_mask", DT_INT64, 2, any2, err) ||
        check_io(info->outputs, info->noutputs, "logits", DT_FP32, 3, logits, err))
        return ST_ERROR;
    e->past_names = mem_calloc(2 * layers, sizeof *e->past_names);
    e->present_names = mem_calloc(2 * layers, sizeof *e->present_names);
    e->run_outputs = mem_calloc(1 + 2 * layers, sizeof *e->run_outputs);
    if (!e->past_names || !e->present_names || !e->run_outputs)
        return error_set(err, 500, "out of memory");
    e->run_outputs[0] = "logits";
    for (uint32_t l = 0; l < 2 * layers; l++) {
        const char *kind = l % 2 ? "value" : "key";
        e->past_names[l] = name_of("past_key_values.%u.%s", l / 2, kind);
        e->present_names[l] = name_of("present.%u.%s", l / 2, kind);
        if (!e->past_names[l] || !e->present_names[l])
            return error_set(err, 500, "out of memory");
        e->run_outputs[1 + l] = e->present_names[l];
        if (check_io(info->inputs, info->ninputs, e->past_names[l], DT_FP32, 4, kv, err) ||
            check_io(info->outputs, info->noutputs, e->present_names[l], DT_FP32, 4, kv, err))
            return ST_ERROR;
    }
    return 0;
}

/* Runs the graph the ways the engine will (a prefill of two prompt
 * lengths, then a decode step of both, kept as decode steps are) and checks the logits are
 * finite: the first requests do not pay for the lazy initialisation, and a
 * graph that does not follow the interface fails the load. */
static int warm_up(struct gen_engine *e, struct error *err)
{
    int32_t ta[3] = {0, 1, 2}, tb[2] = {3, 4};
    struct gen_seq a = {.tokens = ta, .ntokens = 3, .nprompt = 2, .id = 1};
    struct gen_seq b = {.tokens = tb, .ntokens = 2, .nprompt = 1, .id = 2};
    struct gen_seq *rows[2] = {&a, &b};
    const float *logits;
    void *state;
    int rc = 0;
    for (uint32_t i = 0; i < 3 && !rc; i++) {
        uint32_t n = i < 2 ? 1 : 2, t = i == 0 ? 2 : 1;
        struct gen_seq **r = i == 1 ? &rows[1] : rows;
        rc = gen_run(e, r, n, t, NULL, i == 2, &logits, &state, err);
        if (rc)
            break;
        for (size_t k = 0; k < (size_t)n * t * e->shape.vocab; k++)
            if (!isfinite(logits[k])) {
                rc = error_set(err, 400, "generative model: the warm-up gave non-finite logits");
                break;
            }
        gen_run_release(e, state);
    }
    gen_prev_drop(e);
    gen_kv_seq_release(&e->pool, &a.kv);
    gen_kv_seq_release(&e->pool, &b.kv);
    if (rc && err->status == 0)
        err->status = 400;
    return rc;
}

/* ---- the text interface ------------------------------------------------------------------ */

struct iface_io {
    const char *name;
    enum dtype dtype;
    int64_t dim;
    bool optional;
};

static const struct iface_io iface_inputs[] = {
    {"text_input", DT_BYTES, 1, false}, {"max_tokens", DT_INT32, 1, true},
    {"temperature", DT_FP32, 1, true},  {"top_k", DT_INT32, 1, true},
    {"top_p", DT_FP32, 1, true},        {"random_seed", DT_UINT64, 1, true},
    {"stop_words", DT_BYTES, -1, true}, {"stream", DT_BOOL, 1, true},
};
static const struct iface_io iface_outputs[GEN_NOUTPUTS] = {
    {"text_output", DT_BYTES, 1, false},
    {"finish_reason", DT_BYTES, 1, false},
    {"num_input_tokens", DT_INT32, 1, false},
    {"num_output_tokens", DT_INT32, 1, false},
};
#define NINPUTS (sizeof iface_inputs / sizeof iface_inputs[0])

static int info_ios(struct model_io **out, const struct iface_io *src, uint32_t n)
{
    struct model_io *ios = mem_calloc(n, sizeof *ios);
    if (!ios)
        return ST_ERROR;
    *out = ios;
    for (uint32_t i = 0; i < n; i++) {
        ios[i] = (struct model_io){.dtype = src[i].dtype, .ndim = 1, .dims = {src[i].dim}};
        ios[i].name = mem_strdup(src[i].name);
        if (!ios[i].name)
            return ST_ERROR;
    }
    return 0;
}

static struct model_config_io *config_ios(struct arena *a, const struct iface_io *src, uint32_t n)
{
    struct model_config_io *ios = arena_calloc(a, n, sizeof *ios);
    for (uint32_t i = 0; ios && i < n; i++) {
        ios[i] = (struct model_config_io){.dtype = src[i].dtype,
                                          .ndim = 1,
                                          .dims = {src[i].dim},
                                          .has_dims = true,
                                          .optional = src[i].optional,
                                          .label_filename = ""};
        ios[i].name = arena_strndup(a, src[i].name, strlen(src[i].name));
        if (!ios[i].name)
            return NULL;
    }
    return ios;
}

/* m's inputs and outputs become the text interface (metadata, config,
 * decoders); the graph's stay the engine's business. */
static int use_text_interface(struct model *m, struct error *err)
{
    struct model_info info = {.ninputs = NINPUTS, .noutputs = GEN_NOUTPUTS};
    struct arena *a = &m->config._arena;
    struct model_config_io *cin = config_ios(a, iface_inputs, NINPUTS);
    struct model_config_io *cout = config_ios(a, iface_outputs, GEN_NOUTPUTS);
    if (info_ios(&info.inputs, iface_inputs, NINPUTS) ||
        info_ios(&info.outputs, iface_outputs, GEN_NOUTPUTS) || !cin || !cout) {
        model_info_free(&info);
        return error_set(err, 500, "out of memory");
    }
    model_info_free(&m->info);
    m->info = info;
    m->config.inputs = cin;
    m->config.ninputs = NINPUTS;
    m->config.outputs = cout;
    m->config.noutputs = GEN_NOUTPUTS;
    m->config.max_batch_size = 0;
    m->config.dynamic_batching.enabled = false;
    m->config.decoupled = true;
    m->batched = false;
    return 0;
}

/* ---- the engine's life ------------------------------------------------------------------- */

static void engine_free(struct gen_engine *e)
{
    if (!e)
        return;
    for (uint32_t l = 0; e->past_names && l < 2 * e->shape.kv.layers; l++)
        mem_free(e->past_names[l]);
    for (uint32_t l = 0; e->present_names && l < 2 * e->shape.kv.layers; l++)
        mem_free(e->present_names[l]);
    mem_free(e->past_names);
    mem_free(e->present_names);
    mem_free(e->run_outputs);
    mem_free(e->running);
    gen_prev_drop(e);
    mem_free(e->prev.ids);
    mem_free(e->prev.present);
    mem_free(e->masks[0]);
    mem_free(e->masks[1]);
    mem_free(e->ints);
    mem_free(e->past);
    mem_free(e->logits);
    buf_free(&e->text);
    arena_free(&e->arena);
    sample_scratch_free(&e->scratch);
    gen_kv_pool_free(&e->pool);
    tokenizer_free(e->tok);
    mem_free(e->name);
    mem_free(e);
}

static void engine_stop(void *engine)
{
    struct gen_engine *e = engine;
    gen_obs_unregister(e);
    gen_engine_stop(e);
    engine_free(e);
}

static const struct model_engine_ops engine_ops = {
    .submit = gen_engine_submit,
    .stop = engine_stop,
    .estimate = gen_seq_estimate,
};

/* Reads generation.json; 1 when the version has none (not generative). */
static int read_generation(const char *version_dir, struct gen_file *g, struct error *err)
{
    char path[4096];
    if (!path_fmt(path, sizeof path, "%s/%s", version_dir, GENERATION_FILE))
        return error_set(err, 400, "%s: path too long", GENERATION_FILE);
    char *text;
    size_t len;
    int rc = file_read(path, GENERATION_FILE_MAX, &text, &len);
    if (rc == -ENOENT)
        return 1;
    if (rc)
        return error_set(err, 400, "%s: %s", path,
                         rc == -EFBIG ? "larger than 64 KiB" : strerror(-rc));
    rc = parse_generation(text, len, g, err);
    mem_free(text);
    return rc;
}

static int engine_new(struct model *m, const char *version_dir, const struct gen_file *g,
                      struct gen_engine **out, struct error *err)
{
    struct gen_engine *e = mem_calloc(1, sizeof *e);
    if (!e)
        return error_set(err, 500, "out of memory");
    *out = e;
    e->name = mem_strdup(m->name);
    snprintf(e->version, sizeof e->version, "%s", m->version_str);
    e->backend = m->backend;
    e->instance = m->instances[0];
    e->shape = g->shape;
    e->max_running = settings.max_running;
    e->prefill_chunk = settings.prefill_chunk;
    e->max_waiting = m->sched_cfg.max_queue_size ? m->sched_cfg.max_queue_size : 1024;
    e->running = mem_calloc(e->max_running, sizeof *e->running);
    arena_init(&e->arena, 4096, 1u << 20);
    buf_init(&e->text, 1u << 20);
    gen_kv_pool_init(&e->pool, &e->shape.kv, !settings.no_prefix_cache);
    if (!e->name || !e->running || sample_scratch_init(&e->scratch, e->shape.vocab) != 0)
        return error_set(err, 500, "out of memory");
    char path[4096];
    if (!path_fmt(path, sizeof path, "%s/%s", version_dir, g->tokenizer))
        return error_set(err, 400, "tokenizer path too long");
    if (tokenizer_load(path, &e->tok, err) != 0)
        return ST_ERROR;
    if (tokenizer_vocab_size(e->tok) != e->shape.vocab ||
        tokenizer_eos(e->tok) != (int32_t)e->shape.eos)
        return error_set(err, 400, "%s: vocab_size %u and eos_token_id %u, but %s has %u and %d",
                         GENERATION_FILE, e->shape.vocab, e->shape.eos, g->tokenizer,
                         tokenizer_vocab_size(e->tok), tokenizer_eos(e->tok));
    if (check_graph(e, &m->info, err) != 0 || warm_up(e, err) != 0)
        return ST_ERROR;
    return 0;
}

int gen_engine_attach(struct model *m, const char *version_dir, struct error *err)
{
    struct gen_file g;
    int rc = read_generation(version_dir, &g, err);
    if (rc == 1)
        return 0;
    if (rc)
        return ST_ERROR;
    struct gen_engine *e = NULL;
    uint64_t t0 = clock_now_ns();
    if (engine_new(m, version_dir, &g, &e, err) != 0 || use_text_interface(m, err) != 0) {
        engine_free(e);
        return ST_ERROR;
    }
    m->warmup_us = (clock_now_ns() - t0) / 1000u;
    e->outputs = m->info.outputs;
    rc = gen_engine_start(e);
    if (rc) {
        engine_free(e);
        return error_set(err, 500, "cannot start the generation thread: %s", strerror(-rc));
    }
    gen_obs_register(e);
    m->engine_ops = &engine_ops;
    m->engine = e;
    log_info("model %s version %s: generative (context %u tokens, %u layers), served by its "
             "engine",
             m->name, m->version_str, e->shape.max_context, e->shape.kv.layers);
    return 0;
}
