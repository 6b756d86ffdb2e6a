#include "bench/gen_floor.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/onnxruntime.h"
#include "base/arena.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/file.h"
#include "base/json.h"
#include "base/mem.h"
#include "bench/bench_args.h"
#include "preprocess/tokenizer.h"

#define GENERATION_JSON_MAX (64 * 1024)
#define MAX_LAYERS 64
#define MAX_CONTEXT_LIMIT 65536
#define MAX_REPEAT 100000
#define MAX_BATCH 256
#define MAX_PROMPT_BYTES (1u << 20)
#define PATH_MAX_LEN 4096
#define DEFAULT_PROMPT "And God said"
#define PROG "inferd bench --generate-floor" /* how its messages start */

static const char floor_usage_text[] =
    "usage: inferd bench --generate-floor --model-dir DIR [options]\n"
    "\n"
    "The in-process generation floor: loads a generative model version directory\n"
    "(generation.json, its tokenizer, model.onnx) through the ONNX Runtime backend and\n"
    "runs the ideal single-stream loop: prefill the prompt, then greedy decode steps,\n"
    "each step's present.* outputs fed back as past_key_values.* where ONNX Runtime\n"
    "left them (no copy, no batching). Reports tokens/s, time to first token, time per\n"
    "output token and the generated text. One warm-up run, then --repeat measured runs.\n"
    "--batch B runs B copies of the prompt as one batch (every row the same tokens):\n"
    "the ideal batched loop, B tokens per step.\n"
    "\n"
    "  --model-dir DIR          the version directory, e.g. models/kjv/1 (required)\n"
    "  --prompt TEXT            the prompt (default \"" DEFAULT_PROMPT "\")\n"
    "  --max-tokens N           tokens to generate at most (default 128); fewer when the\n"
    "                           end-of-text token comes or the context is full\n"
    "  --repeat N               measured runs (default 5)\n"
    "  --batch B                rows decoded together (default 1)\n"
    "  --intra-op-threads N     ONNX Runtime intra-op threads (default 1, as inferd serve)\n"
    "  --inter-op-threads N     ONNX Runtime inter-op threads (default 1)\n"
    "  --json                   one JSON object instead of the text report\n"
    "  -h, --help               this text\n"
    "\n"
    "Exit status: 0 measured, 1 the model could not be loaded or run, 2 usage error.\n";

struct floor_options {
    const char *model_dir;
    const char *prompt;
    uint32_t max_tokens;
    uint32_t repeat;
    uint32_t batch;
    uint32_t intra_op_threads, inter_op_threads;
    bool json;
};

/* generation.json: the numbers the loop needs. */
struct gen_config {
    char tokenizer[256];
    uint32_t max_context, num_layers, num_heads, head_dim, vocab_size;
    int32_t eos;
    bool present_new; /* "present": "new": present.* holds only the new tokens */
};

struct floor_run {
    uint32_t tokens; /* of one row */
    uint64_t ttft_ns, total_ns;
};

/* The loaded model and the loop's buffers. */
struct floor {
    struct gen_config cfg;
    struct tokenizer *tok;
    void *inst;
    struct model_info info;
    bool loaded;
    uint32_t nin, nout;
    struct tensor *inputs; /* input_ids, position_ids, attention_mask, past k/v per layer */
    struct tensor *outputs;
    const char **output_names; /* logits, present k/v per layer */
    char *names;               /* the past/present names, one block */
    uint32_t batch;
    int64_t *positions; /* batch x max_context: this step's positions */
    int64_t *ones;      /* batch x max_context: the attention mask */
    int64_t *ids;       /* batch x max_context: prompt ids, then the tokens fed */
    int32_t *prompt;    /* max_context */
    int32_t *next;      /* batch: each row's next token */
    uint32_t nprompt;
    struct arena arena;
    /* present "new": the past, [batch, heads, cap, head_dim] per (layer,
     * kv), room grown in steps of KV_STEP tokens (as the server's engine
     * keeps its decode rows'), the new tokens written in after each step. */
    float *kv[2 * MAX_LAYERS];
    uint32_t cap;
    int64_t *mask; /* batch x (cap + tokens): the attention mask over the room */
};
#define KV_STEP 32

enum {
    OPT_MODEL_DIR = 256,
    OPT_PROMPT,
    OPT_MAX_TOKENS,
    OPT_REPEAT,
    OPT_BATCH,
    OPT_INTRA,
    OPT_INTER,
    OPT_JSON,
    OPT_FLOOR
};

static const struct option floor_options_table[] = {
    {"generate-floor", no_argument, NULL, OPT_FLOOR},
    {"model-dir", required_argument, NULL, OPT_MODEL_DIR},
    {"prompt", required_argument, NULL, OPT_PROMPT},
    {"max-tokens", required_argument, NULL, OPT_MAX_TOKENS},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"intra-op-threads", required_argument, NULL, OPT_INTRA},
    {"inter-op-threads", required_argument, NULL, OPT_INTER},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* One option of parse_floor_args() (bench_getopt()'s fn). */
static int floor_option(void *ctx, int c, const char *name, const char *arg)
{
    struct floor_options *o = ctx;
    int rc = 0;
    switch (c) {
    case OPT_FLOOR:
        break;
    case OPT_MODEL_DIR:
        o->model_dir = arg;
        break;
    case OPT_PROMPT:
        o->prompt = arg;
        if (strlen(arg) > MAX_PROMPT_BYTES)
            rc = bench_usage_error(PROG, "--prompt: at most %u bytes", MAX_PROMPT_BYTES);
        break;
    case OPT_MAX_TOKENS:
        rc = bench_parse_u32(PROG, name, arg, 1, MAX_CONTEXT_LIMIT, &o->max_tokens);
        break;
    case OPT_REPEAT:
        rc = bench_parse_u32(PROG, name, arg, 1, MAX_REPEAT, &o->repeat);
        break;
    case OPT_BATCH:
        rc = bench_parse_u32(PROG, name, arg, 1, MAX_BATCH, &o->batch);
        break;
    case OPT_INTRA:
        rc = bench_parse_u32(PROG, name, arg, 1, 1024, &o->intra_op_threads);
        break;
    case OPT_INTER:
        rc = bench_parse_u32(PROG, name, arg, 1, 1024, &o->inter_op_threads);
        break;
    case OPT_JSON:
        o->json = true;
        break;
    }
    return rc;
}

/* Returns 0, 2 (usage error, reported), or -1 for --help (printed). */
static int parse_floor_args(int argc, char **argv, struct floor_options *o)
{
    *o = (struct floor_options){.prompt = DEFAULT_PROMPT,
                                .max_tokens = 128,
                                .repeat = 5,
                                .batch = 1,
                                .intra_op_threads = 1,
                                .inter_op_threads = 1};
    int rc = bench_getopt(PROG, argc, argv, floor_options_table, floor_usage_text, floor_option, o);
    if (rc)
        return rc;
    if (!o->model_dir)
        return bench_usage_error(PROG, "--model-dir DIR is required");
    if (strlen(o->model_dir) > PATH_MAX_LEN - 64)
        return bench_usage_error(PROG, "--model-dir: path too long");
    return 0;
}

/* ---- loading ------------------------------------------------------------- */

static int config_u32(const struct json_value *doc, const char *key, uint32_t lo, uint32_t hi,
                      uint32_t *out, const char *path)
{
    int64_t v;
    if (json_num_i64(json_get(doc, key), &v) != 0 || v < lo || v > hi)
        return bench_fail(PROG, "%s: \"%s\" must be a whole number from %u to %u", path, key, lo,
                          hi);
    *out = (uint32_t)v;
    return 0;
}

static int load_config(const char *dir, struct gen_config *cfg, struct arena *arena)
{
    char path[PATH_MAX_LEN];
    snprintf(path, sizeof path, "%s/generation.json", dir);
    char *text;
    size_t len;
    int rc = file_read(path, GENERATION_JSON_MAX, &text, &len);
    if (rc == -EFBIG)
        return bench_fail(PROG, "%s: larger than %d bytes", path, GENERATION_JSON_MAX);
    if (rc == -ENOMEM)
        return bench_fail(PROG, "out of memory");
    if (rc)
        return bench_fail(PROG, "%s: %s", path, strerror(-rc));
    struct json_value *doc;
    const char *perr;
    size_t poff;
    if (json_parse(arena, text, len, NULL, &doc, &perr, &poff) != 0) {
        rc = bench_fail(PROG, "%s: not JSON: %s at byte %zu", path, perr, poff);
        goto out;
    }
    if (doc->type != JSON_OBJECT) {
        rc = bench_fail(PROG, "%s: not a JSON object", path);
        goto out;
    }
    const struct json_value *tok = json_get(doc, "tokenizer");
    if (!tok || tok->type != JSON_STRING || tok->len == 0 || tok->len >= sizeof cfg->tokenizer ||
        memchr(tok->u.str, '/', tok->len) || memchr(tok->u.str, '\0', tok->len)) {
        rc = bench_fail(PROG, "%s: \"tokenizer\" must name a file of the directory", path);
        goto out;
    }
    memcpy(cfg->tokenizer, tok->u.str, tok->len + 1);
    uint32_t eos;
    if ((rc = config_u32(doc, "max_context", 2, MAX_CONTEXT_LIMIT, &cfg->max_context, path)) ||
        (rc = config_u32(doc, "num_layers", 1, MAX_LAYERS, &cfg->num_layers, path)) ||
        (rc = config_u32(doc, "num_heads", 1, 1024, &cfg->num_heads, path)) ||
        (rc = config_u32(doc, "head_dim", 1, 4096, &cfg->head_dim, path)) ||
        (rc = config_u32(doc, "vocab_size", 2, TOKENIZER_MAX_VOCAB, &cfg->vocab_size, path)) ||
        (rc = config_u32(doc, "eos_token_id", 0, cfg->vocab_size - 1, &eos, path)))
        goto out;
    cfg->eos = (int32_t)eos;
    const struct json_value *present = json_get(doc, "present");
    if (present && (present->type != JSON_STRING ||
                    (strcmp(present->u.str, "all") != 0 && strcmp(present->u.str, "new") != 0))) {
        rc = bench_fail(PROG, "%s: \"present\" must be \"all\" or \"new\"", path);
        goto out;
    }
    cfg->present_new = present && strcmp(present->u.str, "new") == 0;
out:
    mem_free(text);
    return rc;
}

static bool has_io(const struct model_io *ios, uint32_t n, const char *name, enum dtype dt)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(ios[i].name, name) == 0)
            return ios[i].dtype == dt;
    return false;
}

/* Names the tensors and checks that the model has them. */
static int setup_io(struct floor *f, const char *model_path)
{
    const struct gen_config *cfg = &f->cfg;
    f->nin = 3 + 2 * cfg->num_layers;
    f->nout = 1 + 2 * cfg->num_layers;
    f->inputs = mem_calloc(f->nin, sizeof *f->inputs);
    f->outputs = mem_calloc(f->nout, sizeof *f->outputs);
    f->output_names = mem_calloc(f->nout, sizeof *f->output_names);
    f->names = mem_alloc((size_t)cfg->num_layers * 4 * 40);
    if (!f->inputs || !f->outputs || !f->output_names || !f->names)
        return bench_fail(PROG, "out of memory");
    f->inputs[0].name = "input_ids";
    f->inputs[1].name = "position_ids";
    f->inputs[2].name = "attention_mask";
    f->output_names[0] = "logits";
    char *p = f->names;
    for (uint32_t l = 0; l < cfg->num_layers; l++)
        for (uint32_t kv = 0; kv < 2; kv++) {
            const char *which = kv ? "value" : "key";
            f->inputs[3 + 2 * l + kv].name = p;
            p += sprintf(p, "past_key_values.%u.%s", l, which) + 1;
            f->output_names[1 + 2 * l + kv] = p;
            p += sprintf(p, "present.%u.%s", l, which) + 1;
        }
    for (uint32_t i = 0; i < f->nin; i++) {
        enum dtype dt = i < 3 ? DT_INT64 : DT_FP32;
        f->inputs[i].dtype = dt;
        if (!has_io(f->info.inputs, f->info.ninputs, f->inputs[i].name, dt))
            return bench_fail(PROG, "%s: no %s input '%s' (generation.json says %u layers)",
                              model_path, dtype_name(dt), f->inputs[i].name, cfg->num_layers);
    }
    if (f->info.ninputs != f->nin)
        return bench_fail(PROG, "%s: %u inputs, the generation interface has %u", model_path,
                          f->info.ninputs, f->nin);
    for (uint32_t i = 0; i < f->nout; i++)
        if (!has_io(f->info.outputs, f->info.noutputs, f->output_names[i], DT_FP32))
            return bench_fail(PROG, "%s: no FP32 output '%s'", model_path, f->output_names[i]);
    return 0;
}

static int floor_load(struct floor *f, const struct floor_options *o)
{
    arena_init(&f->arena, 16 * 1024, 64u << 20);
    int rc = load_config(o->model_dir, &f->cfg, &f->arena);
    if (rc)
        return rc;
    char path[PATH_MAX_LEN];
    struct error err = {0};
    snprintf(path, sizeof path, "%s/%s", o->model_dir, f->cfg.tokenizer);
    if (tokenizer_load(path, &f->tok, &err) != 0)
        return bench_fail(PROG, "%s: %s", path, err.msg);
    if (tokenizer_vocab_size(f->tok) != f->cfg.vocab_size)
        return bench_fail(PROG, "%s: vocab_size %u, generation.json says %u", path,
                          tokenizer_vocab_size(f->tok), f->cfg.vocab_size);
    snprintf(path, sizeof path, "%s/model.onnx", o->model_dir);
    struct backend_load_args args = {.path = path,
                                     .log_id = "floor",
                                     .intra_op_threads = (int)o->intra_op_threads,
                                     .inter_op_threads = (int)o->inter_op_threads};
    if (backend_onnxruntime.load(&args, &f->inst, &f->info, &err) != 0)
        return bench_fail(PROG, "%s", err.msg);
    f->loaded = true;
    if ((rc = setup_io(f, path)))
        return rc;
    uint32_t ctx = f->cfg.max_context;
    size_t cells = (size_t)o->batch * ctx;
    f->batch = o->batch;
    f->positions = mem_calloc(cells, sizeof *f->positions);
    f->ones = mem_calloc(cells, sizeof *f->ones);
    f->ids = mem_calloc(cells, sizeof *f->ids);
    f->prompt = mem_calloc(ctx, sizeof *f->prompt);
    f->next = mem_calloc(o->batch, sizeof *f->next);
    f->mask = mem_calloc(2 * cells, sizeof *f->mask);
    if (!f->positions || !f->ones || !f->ids || !f->prompt || !f->next || !f->mask)
        return bench_fail(PROG, "out of memory");
    for (size_t i = 0; i < cells; i++)
        f->ones[i] = 1;
    int64_t n = tokenizer_encode(f->tok, o->prompt, strlen(o->prompt), f->prompt, ctx);
    if (n < 0)
        return bench_fail(PROG, "out of memory");
    if (n == 0)
        return bench_fail(PROG, "the prompt encodes to no token");
    if (n >= ctx)
        return bench_fail(PROG, "the prompt is %lld tokens: no room left in a %u-token context",
                          (long long)n, ctx);
    f->nprompt = (uint32_t)n;
    return 0;
}

static void floor_free(struct floor *f)
{
    if (f->loaded)
        backend_onnxruntime.unload(f->inst);
    model_info_free(&f->info);
    tokenizer_free(f->tok);
    mem_free(f->inputs);
    mem_free(f->outputs);
    mem_free(f->output_names);
    mem_free(f->names);
    mem_free(f->positions);
    mem_free(f->ones);
    mem_free(f->ids);
    mem_free(f->prompt);
    mem_free(f->next);
    for (uint32_t l = 0; l < 2 * MAX_LAYERS; l++)
        mem_free(f->kv[l]);
    mem_free(f->mask);
    arena_free(&f->arena);
}

/* ---- the loop ------------------------------------------------------------ */

static void set_tensor(struct tensor *t, void *data, size_t elem, int64_t d0, int64_t d1)
{
    t->ndim = 2;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->data = data;
    t->nbytes = (size_t)(d0 * d1) * elem;
}

/* Argmax, the lowest id on ties. */
static int32_t greedy(const float *logits, uint32_t vocab)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < vocab; i++)
        if (logits[i] > logits[best])
            best = i;
    return (int32_t)best;
}

/* Each row's next token from the step's logits (f->outputs[0]). */
static int pick(struct floor *f, uint32_t n, void **state)
{
    const struct tensor *logits = &f->outputs[0];
    size_t row = (size_t)f->cfg.vocab_size;
    if (logits->ndim != 3 || logits->shape[0] != f->batch || logits->shape[1] != n ||
        (uint64_t)logits->shape[2] != row) {
        backend_onnxruntime.release(f->inst, *state);
        return bench_fail(PROG, "logits: unexpected shape");
    }
    for (uint32_t b = 0; b < f->batch; b++)
        f->next[b] = greedy((const float *)logits->data + ((size_t)b * n + n - 1) * row,
                            f->cfg.vocab_size);
    return 0;
}

/* present "new": room for `need` tokens of past, the past kept. */
static int kv_fit(struct floor *f, uint32_t need, uint32_t pos)
{
    const struct gen_config *cfg = &f->cfg;
    if (need <= f->cap)
        return 0;
    uint32_t cap = (need + KV_STEP - 1) / KV_STEP * KV_STEP;
    if (cap > cfg->max_context)
        cap = need > cfg->max_context ? need : cfg->max_context;
    size_t d = cfg->head_dim, rows = (size_t)f->batch * cfg->num_heads;
    for (uint32_t l = 0; l < 2 * cfg->num_layers; l++) {
        /* Each row's past, then zeros to the room's end (masked, but read
         * by the graph): nothing written twice, as the server's engine. */
        float *kv = mem_alloc(rows * cap * d * sizeof *kv);
        if (!kv)
            return bench_fail(PROG, "out of memory");
        for (size_t r = 0; r < rows; r++) {
            if (pos)
                memcpy(kv + r * cap * d, f->kv[l] + r * f->cap * d, pos * d * sizeof *kv);
            memset(kv + (r * cap + pos) * d, 0, (cap - pos) * d * sizeof *kv);
        }
        mem_free(f->kv[l]);
        f->kv[l] = kv;
    }
    f->cap = cap;
    return 0;
}

/* present "new": the n new tokens' keys and values (out[1..]) written into
 * f->kv at positions pos.. of each row. */
static int store_new(struct floor *f, const struct tensor *out, uint32_t n, uint32_t pos,
                     void **state)
{
    const struct gen_config *cfg = &f->cfg;
    size_t d = cfg->head_dim, heads = (size_t)f->batch * cfg->num_heads;
    for (uint32_t l = 0; l < 2 * cfg->num_layers; l++) {
        const struct tensor *p = &out[1 + l];
        if (p->ndim != 4 || p->shape[2] != n || p->nbytes != heads * n * d * sizeof(float)) {
            backend_onnxruntime.release(f->inst, *state);
            return bench_fail(PROG, "%s: unexpected shape", f->output_names[1 + l]);
        }
        for (size_t h = 0; h < heads; h++)
            memcpy(f->kv[l] + (h * f->cap + pos) * d, (const float *)p->data + h * n * d,
                   n * d * sizeof(float));
    }
    return 0;
}

/* One step over each row's ids f->ids[b * n .. (b + 1) * n) at positions
 * pos..pos+n-1, the past (pos entries) being the previous step's outputs
 * (none when pos is 0), or for present "new" f->kv's room (cap entries,
 * the first pos real). On success *state holds the new outputs and each
 * row's next token is in f->next. */
static int step(struct floor *f, uint32_t n, uint32_t pos, void **state)
{
    static float empty_past;
    const struct gen_config *cfg = &f->cfg;
    uint32_t rows = f->batch, past = pos;
    for (uint32_t b = 0; b < rows; b++)
        for (uint32_t i = 0; i < n; i++)
            f->positions[(size_t)b * n + i] = pos + i;
    set_tensor(&f->inputs[0], f->ids, sizeof(int64_t), rows, n);
    set_tensor(&f->inputs[1], f->positions, sizeof(int64_t), rows, n);
    if (cfg->present_new) {
        int rc = kv_fit(f, pos + n, pos);
        if (rc)
            return rc;
        past = f->cap;
        for (uint32_t b = 0; b < rows; b++)
            for (uint32_t k = 0; k < past + n; k++)
                f->mask[(size_t)b * (past + n) + k] = k < pos || k >= past;
        set_tensor(&f->inputs[2], f->mask, sizeof(int64_t), rows, past + n);
    } else {
        set_tensor(&f->inputs[2], f->ones, sizeof(int64_t), rows, pos + n);
    }
    for (uint32_t i = 3; i < f->nin; i++) {
        struct tensor *t = &f->inputs[i];
        t->ndim = 4;
        t->shape[0] = rows;
        t->shape[1] = cfg->num_heads;
        t->shape[2] = past;
        t->shape[3] = cfg->head_dim;
        if (cfg->present_new) {
            t->data = f->kv[i - 3];
            t->nbytes = (size_t)rows * cfg->num_heads * past * cfg->head_dim * sizeof(float);
        } else if (pos == 0) {
            t->data = &empty_past;
            t->nbytes = 0;
        } else {
            /* The previous step's present.* (output i - 2), where it is. */
            t->data = f->outputs[i - 2].data;
            t->nbytes = f->outputs[i - 2].nbytes;
        }
    }
    struct tensor out[1 + 2 * MAX_LAYERS];
    struct error err = {0};
    arena_reset(&f->arena);
    if (backend_onnxruntime.execute(f->inst, &f->arena, f->inputs, f->nin, f->output_names, f->nout,
                                    out, state, 0, &err) != 0)
        return bench_fail(PROG, "model execution: %s", err.msg);
    if (cfg->present_new) {
        int rc = store_new(f, out, n, pos, state);
        if (rc)
            return rc;
    }
    memcpy(f->outputs, out, f->nout * sizeof *out);
    return pick(f, n, state);
}

/* One generation; the text into *text when given. */
static int generate(struct floor *f, const struct floor_options *o, struct floor_run *run,
                    struct buf *text, const char **finish)
{
    uint64_t t0 = clock_now_ns();
    uint32_t ctx = f->cfg.max_context;
    int64_t n = tokenizer_encode(f->tok, o->prompt, strlen(o->prompt), f->prompt, ctx);
    if (n != f->nprompt)
        return bench_fail(PROG, "the prompt encodes differently between runs");
    for (uint32_t b = 0; b < f->batch; b++)
        for (uint32_t i = 0; i < f->nprompt; i++)
            f->ids[(size_t)b * f->nprompt + i] = f->prompt[i];
    void *state = NULL, *prev = NULL;
    f->cap = 0; /* present "new": a generation's room starts empty, as a new server row's */
    int rc = step(f, f->nprompt, 0, &state);
    if (rc)
        return rc;
    run->ttft_ns = clock_now_ns() - t0;
    run->tokens = 1;
    uint32_t pos = f->nprompt;
    *finish = "length";
    for (;;) {
        int32_t tok = f->next[0]; /* every row has the same tokens: row 0 decides */
        if (tok == f->cfg.eos) {
            *finish = "stop";
            break;
        }
        if (text) {
            size_t len;
            const char *bytes = tokenizer_token(f->tok, tok, &len);
            buf_append(text, bytes, len);
        }
        if (run->tokens == o->max_tokens || pos + 1 >= ctx)
            break;
        for (uint32_t b = 0; b < f->batch; b++)
            f->ids[b] = f->next[b];
        prev = state;
        rc = step(f, 1, pos, &state);
        backend_onnxruntime.release(f->inst, prev);
        if (rc)
            return rc;
        pos++;
        run->tokens++;
    }
    run->total_ns = clock_now_ns() - t0;
    backend_onnxruntime.release(f->inst, state);
    if (text && text->err)
        return bench_fail(PROG, "the generated text is over 16 MiB");
    return 0;
}

/* ---- report -------------------------------------------------------------- */

/* Tokens of every row per second. */
static double run_tokens_per_s(const struct floor_run *r, uint32_t batch)
{
    return r->total_ns ? (double)r->tokens * batch * 1e9 / (double)r->total_ns : 0.0;
}

static double run_tpot_us(const struct floor_run *r)
{
    return r->tokens > 1 ? (double)(r->total_ns - r->ttft_ns) / 1e3 / (r->tokens - 1) : 0.0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static double median(double *v, uint32_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct floor_summary {
    double tokens_per_s, tokens_per_s_best, ttft_us, tpot_us;
};

static int summarize(const struct floor_run *runs, uint32_t n, uint32_t batch,
                     struct floor_summary *s)
{
    double *v = mem_calloc(n, sizeof *v);
    if (!v)
        return bench_fail(PROG, "out of memory");
    s->tokens_per_s_best = 0;
    for (uint32_t i = 0; i < n; i++) {
        v[i] = run_tokens_per_s(&runs[i], batch);
        if (v[i] > s->tokens_per_s_best)
            s->tokens_per_s_best = v[i];
    }
    s->tokens_per_s = median(v, n);
    for (uint32_t i = 0; i < n; i++)
        v[i] = (double)runs[i].ttft_ns / 1e3;
    s->ttft_us = median(v, n);
    for (uint32_t i = 0; i < n; i++)
        v[i] = run_tpot_us(&runs[i]);
    s->tpot_us = median(v, n);
    mem_free(v);
    return 0;
}

static void fixed1(struct json_writer *w, double v)
{
    char s[64];
    int n = snprintf(s, sizeof s, "%.1f", v);
    json_w_raw(w, s, (size_t)n);
}

static void report_json(const struct floor_options *o, const struct floor *f,
                        const struct floor_run *runs, const struct floor_summary *s,
                        const struct buf *text, const char *finish)
{
    struct buf b;
    buf_init(&b, 16u << 20);
    struct json_writer w;
    json_w_init(&w, &b);
    json_w_obj_begin(&w);
    json_w_key(&w, "tokens_per_s");
    fixed1(&w, s->tokens_per_s);
    json_w_key(&w, "tokens_per_s_best");
    fixed1(&w, s->tokens_per_s_best);
    json_w_key(&w, "ttft_us");
    fixed1(&w, s->ttft_us);
    json_w_key(&w, "tpot_us");
    fixed1(&w, s->tpot_us);
    json_w_key(&w, "prompt_tokens");
    json_w_uint(&w, f->nprompt);
    json_w_key(&w, "completion_tokens");
    json_w_uint(&w, runs[0].tokens);
    json_w_key(&w, "finish_reason");
    json_w_cstr(&w, finish);
    json_w_key(&w, "text");
    json_w_str(&w, text->data ? text->data : "", text->len);
    json_w_key(&w, "runs");
    json_w_arr_begin(&w);
    for (uint32_t i = 0; i < o->repeat; i++) {
        json_w_obj_begin(&w);
        json_w_key(&w, "tokens");
        json_w_uint(&w, runs[i].tokens);
        json_w_key(&w, "tokens_per_s");
        fixed1(&w, run_tokens_per_s(&runs[i], o->batch));
        json_w_key(&w, "ttft_us");
        fixed1(&w, (double)runs[i].ttft_ns / 1e3);
        json_w_key(&w, "total_us");
        fixed1(&w, (double)runs[i].total_ns / 1e3);
        json_w_obj_end(&w);
    }
    json_w_arr_end(&w);
    json_w_key(&w, "config");
    json_w_obj_begin(&w);
    json_w_key(&w, "model_dir");
    json_w_cstr(&w, o->model_dir);
    json_w_key(&w, "prompt");
    json_w_cstr(&w, o->prompt);
    json_w_key(&w, "max_tokens");
    json_w_uint(&w, o->max_tokens);
    json_w_key(&w, "repeat");
    json_w_uint(&w, o->repeat);
    json_w_key(&w, "batch");
    json_w_uint(&w, o->batch);
    json_w_key(&w, "intra_op_threads");
    json_w_uint(&w, o->intra_op_threads);
    json_w_key(&w, "inter_op_threads");
    json_w_uint(&w, o->inter_op_threads);
    json_w_key(&w, "max_context");
    json_w_uint(&w, f->cfg.max_context);
    json_w_obj_end(&w);
    json_w_obj_end(&w);
    buf_putc(&b, '\n');
    if (!b.err)
        fwrite(b.data, 1, b.len, stdout);
    buf_free(&b);
}

static void report_text(const struct floor_options *o, const struct floor *f,
                        const struct floor_run *runs, const struct floor_summary *s,
                        const struct buf *text, const char *finish)
{
    printf("inferd bench --generate-floor: %s, prompt %u tokens, max_tokens %u, batch %u, %u "
           "run%s after 1 warm-up\n\n",
           o->model_dir, f->nprompt, o->max_tokens, o->batch, o->repeat, o->repeat == 1 ? "" : "s");
    printf("  tokens/s    %.1f (median), best %.1f\n", s->tokens_per_s, s->tokens_per_s_best);
    printf("  TTFT µs     %.1f (median)\n", s->ttft_us);
    printf("  TPOT µs     %.1f (median)\n", s->tpot_us);
    printf("  generated   %u tokens, finish %s\n", runs[0].tokens, finish);
    printf("  text        %.*s\n", (int)text->len, text->data ? text->data : "");
}

int gen_floor_main(int argc, char **argv)
{
    struct floor_options o;
    int rc = parse_floor_args(argc, argv, &o);
    if (rc == -1)
        return 0;
    if (rc)
        return rc;
    struct floor f = {0};
    struct floor_run *runs = NULL;
    struct buf text;
    buf_init(&text, 16u << 20);
    rc = floor_load(&f, &o);
    if (rc)
        goto out;
    runs = mem_calloc(o.repeat + 1, sizeof *runs);
    if (!runs) {
        rc = bench_fail(PROG, "out of memory");
        goto out;
    }
    const char *finish = "length";
    /* runs[o.repeat] is the warm-up, the one that keeps the text. */
    for (uint32_t i = 0; i <= o.repeat; i++) {
        uint32_t r = i == 0 ? o.repeat : i - 1;
        if ((rc = generate(&f, &o, &runs[r], i == 0 ? &text : NULL, &finish)))
            goto out;
        if (runs[r].tokens != runs[o.repeat].tokens) {
            rc = bench_fail(PROG, "greedy runs generated %u and %u tokens", runs[o.repeat].tokens,
                            runs[r].tokens);
            goto out;
        }
    }
    struct floor_summary s = {0};
    if ((rc = summarize(runs, o.repeat, o.batch, &s)))
        goto out;
    if (o.json)
        report_json(&o, &f, runs, &s, &text, finish);
    else
        report_text(&o, &f, runs, &s, &text, finish);
    fflush(stdout);
out:
    mem_free(runs);
    buf_free(&text);
    floor_free(&f);
    return rc;
}
