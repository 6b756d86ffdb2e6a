/*
 * sequence.c: a request of the text interface (engine.h) → a sequence,
 * on the submitting thread, or only its estimate (prompt tokens and the
 * most it may generate, for token budgets); and the responses a sequence
 * sends, with the tokens it used.
 */
#include <math.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/mem.h"
#include "base/status.h"
#include "gen/engine_int.h"

static const char *const finish_names[GEN_FINISH_N] = {"stop", "length", "cancelled"};

const char *gen_finish_name(enum gen_finish f)
{
    return finish_names[f];
}

/* The request's input `name`, checked to hold `count` elements of dtype
 * (count 0: any number); NULL when absent. */
static const struct tensor *input(const struct infer_request *req, const char *name,
                                  enum dtype dtype, int64_t count, struct error *err, int *bad)
{
    for (uint32_t i = 0; i < req->ninputs; i++) {
        const struct tensor *t = &req->inputs[i];
        if (strcmp(t->name, name) != 0)
            continue;
        int64_t n = tensor_count(t, INT64_MAX);
        if (t->dtype != dtype || (count && n != count)) {
            *bad = error_set(err, 400, "input '%s' must be %s with %s element%s", name,
                             dtype_name(dtype), count ? "one" : "any number of", count ? "" : "s");
            return NULL;
        }
        return t;
    }
    return NULL;
}

/* Reads the sampling inputs into s. 0 or ST_ERROR with err. */
static int read_options(struct gen_engine *e, const struct infer_request *req, struct gen_seq *s,
                        struct error *err)
{
    int bad = 0;
    const struct tensor *t;
    s->sp = (struct sample_params){.temperature = 1.0f, .top_k = 0, .top_p = 1.0f};
    if ((t = input(req, "temperature", DT_FP32, 1, err, &bad))) {
        float v = *(const float *)t->data;
        if (!isfinite(v) || v < 0 || v > 100)
            return error_set(err, 400, "temperature must be between 0 and 100");
        s->sp.temperature = v;
    }
    if (!bad && (t = input(req, "top_k", DT_INT32, 1, err, &bad))) {
        int32_t v = *(const int32_t *)t->data;
        if (v < 0)
            return error_set(err, 400, "top_k must be 0 (off) or more, got %d", v);
        s->sp.top_k = v;
    }
    if (!bad && (t = input(req, "top_p", DT_FP32, 1, err, &bad))) {
        float v = *(const float *)t->data;
        if (!(v > 0 && v <= 1))
            return error_set(err, 400, "top_p must be in (0, 1]");
        s->sp.top_p = v;
    }
    uint64_t seed = 0;
    if (!bad && (t = input(req, "random_seed", DT_UINT64, 1, err, &bad)))
        seed = *(const uint64_t *)t->data;
    else if (!bad)
        seed = clock_now_ns() ^ (atomic_fetch_add(&e->seed_counter, 1) * 0x9e3779b97f4a7c15ull);
    gen_rng_seed(&s->rng, seed);
    s->stream = req->many_responses;
    if (!bad && (t = input(req, "stream", DT_BOOL, 1, err, &bad)))
        s->stream = *(const uint8_t *)t->data != 0;
    return bad;
}

/* stop_words → the sequence's text (empty strings are skipped). */
static int read_stops(const struct infer_request *req, struct gen_seq *s, struct error *err)
{
    int bad = 0;
    const char *stops[GEN_MAX_STOPS];
    size_t lens[GEN_MAX_STOPS];
    uint32_t n = 0;
    const struct tensor *t = input(req, "stop_words", DT_BYTES, 0, err, &bad);
    if (bad)
        return ST_ERROR;
    int64_t count = t ? tensor_count(t, INT64_MAX) : 0;
    const struct tensor_bytes *b = t ? t->data : NULL;
    for (int64_t i = 0; i < count; i++) {
        if (b[i].len == 0)
            continue;
        if (n == GEN_MAX_STOPS)
            return error_set(err, 400, "at most %d stop sequences", GEN_MAX_STOPS);
        if (b[i].len > GEN_MAX_STOP_LEN)
            return error_set(err, 400, "a stop sequence has at most %d bytes, got %u",
                             GEN_MAX_STOP_LEN, b[i].len);
        stops[n] = b[i].ptr;
        lens[n++] = b[i].len;
    }
    if (gen_text_init(&s->text, stops, lens, n) != 0)
        return error_set(err, 500, "out of memory");
    return 0;
}

/* Where each output goes in the request's response order. */
static int map_outputs(struct gen_engine *e, const struct infer_request *req, struct gen_seq *s,
                       struct error *err)
{
    for (uint32_t k = 0; k < GEN_NOUTPUTS; k++)
        s->out_index[k] = UINT32_MAX;
    for (uint32_t i = 0; i < req->noutputs; i++) {
        uint32_t k = 0;
        while (k < GEN_NOUTPUTS && strcmp(req->output_names[i], e->outputs[k].name) != 0)
            k++;
        if (k == GEN_NOUTPUTS)
            return error_set(err, 400, "model '%s' has no output '%s'", e->name,
                             req->output_names[i]);
        s->out_index[k] = i;
    }
    return 0;
}

/* What submit and estimate both check (the same refusals, the same
 * messages): text_input tokenized into tokens (room for max_context) and
 * its count *nprompt; *max_new, max_tokens or the rest of the context.
 * 0, or ST_ERROR with err (400; 500 when out of memory). */
static int read_prompt(struct gen_engine *e, const struct infer_request *req, int32_t *tokens,
                       uint32_t *nprompt, uint32_t *max_new, struct error *err)
{
    int bad = 0;
    const struct tensor *text = input(req, "text_input", DT_BYTES, 1, err, &bad);
    if (bad)
        return ST_ERROR;
    if (!text)
        return error_set(err, 400, "model '%s' needs the input 'text_input'", e->name);
    const struct tensor_bytes *prompt = text->data;
    if (prompt->len == 0)
        return error_set(err, 400, "the prompt is empty: give at least one character");
    int64_t n = tokenizer_encode(e->tok, prompt->ptr, prompt->len, tokens, e->shape.max_context);
    if (n < 0)
        return error_set(err, 500, "out of memory");
    if ((uint64_t)n >= e->shape.max_context)
        return error_set(err, 400,
                         "the prompt has %lld tokens; model '%s' has a context of %u tokens, "
                         "room for at most %u prompt tokens",
                         (long long)n, e->name, e->shape.max_context, e->shape.max_context - 1);
    *nprompt = (uint32_t)n;
    *max_new = e->shape.max_context - *nprompt;
    const struct tensor *t = input(req, "max_tokens", DT_INT32, 1, err, &bad);
    if (bad)
        return ST_ERROR;
    if (t) {
        int32_t v = *(const int32_t *)t->data;
        if (v < 1)
            return error_set(err, 400, "max_tokens must be at least 1, got %d", v);
        if ((uint32_t)v > *max_new)
            return error_set(err, 400,
                             "model '%s' has a context of %u tokens: the prompt's %u tokens "
                             "and max_tokens %d do not fit (at most %u)",
                             e->name, e->shape.max_context, *nprompt, v, *max_new);
        *max_new = (uint32_t)v;
    }
    return 0;
}

int gen_seq_new(struct gen_engine *e, struct infer_request *req, struct gen_seq **out,
                struct error *err)
{
    struct gen_seq *s = mem_calloc(1, sizeof *s);
    int32_t *tokens = mem_alloc(e->shape.max_context * sizeof *tokens);
    if (!s || !tokens) {
        mem_free(s);
        mem_free(tokens);
        return error_set(err, 500, "out of memory");
    }
    s->req = req;
    s->tokens = tokens;
    int rc = read_prompt(e, req, tokens, &s->nprompt, &s->max_new, err);
    if (!rc) {
        s->ntokens = s->prefill_to = s->nprompt;
        rc = read_options(e, req, s, err);
    }
    if (!rc)
        rc = map_outputs(e, req, s, err);
    if (!rc)
        rc = read_stops(req, s, err);
    if (rc) {
        mem_free(tokens);
        mem_free(s);
        return ST_ERROR;
    }
    *out = s;
    return 0;
}

int gen_seq_estimate(void *engine, const struct infer_request *req, uint32_t *prompt_tokens,
                     uint32_t *max_completion, struct error *err)
{
    struct gen_engine *e = engine;
    int32_t *tokens = mem_alloc(e->shape.max_context * sizeof *tokens);
    if (!tokens)
        return error_set(err, 500, "out of memory");
    int rc = read_prompt(e, req, tokens, prompt_tokens, max_completion, err);
    mem_free(tokens);
    return rc;
}

void gen_seq_free(struct gen_engine *e, struct gen_seq *s)
{
    (void)e;
    gen_text_free(&s->text);
    mem_free(s->tokens);
    mem_free(s);
}

void gen_seq_count(struct gen_seq *s)
{
    s->req->usage_prompt_tokens = s->nprompt;
    s->req->usage_completion_tokens = s->generated;
}

bool gen_seq_respond(struct gen_engine *e, struct gen_seq *s, bool final, enum gen_finish why)
{
    gen_seq_count(s);
    buf_reset(&e->text);
    gen_text_take(&s->text, final, &e->text);
    const char *reason = final ? gen_finish_name(why) : "";
    struct tensor_bytes text = {e->text.data ? e->text.data : "", (uint32_t)e->text.len};
    struct tensor_bytes fin = {reason, (uint32_t)strlen(reason)};
    int32_t nin = (int32_t)s->nprompt, nout = (int32_t)s->generated;
    struct tensor all[GEN_NOUTPUTS] = {
        {.dtype = DT_BYTES, .ndim = 1, .shape = {1}, .data = &text, .nbytes = text.len},
        {.dtype = DT_BYTES, .ndim = 1, .shape = {1}, .data = &fin, .nbytes = fin.len},
        {.dtype = DT_INT32, .ndim = 1, .shape = {1}, .data = &nin, .nbytes = sizeof nin},
        {.dtype = DT_INT32, .ndim = 1, .shape = {1}, .data = &nout, .nbytes = sizeof nout},
    };
    struct tensor outs[GEN_NOUTPUTS];
    uint32_t n = 0;
    for (uint32_t k = 0; k < GEN_NOUTPUTS; k++) {
        all[k].name = e->outputs[k].name;
        if (s->out_index[k] != UINT32_MAX) {
            outs[s->out_index[k]] = all[k];
            n++;
        }
    }
    if (e->text.err)
        return false;
    return s->req->on_response(s->req, outs, n, final);
}
