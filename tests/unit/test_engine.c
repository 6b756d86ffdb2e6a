/*
 * The generation engine's admission and ending rules, deterministically:
 * a fake backend (a graph of the right shape whose logits are all zero, so
 * greedy decoding emits token 0) runs one step per permit the test grants,
 * so the test decides what is running, waiting or done. Covered: the KV
 * budget (a request that never fits is 400; one that does not fit now
 * waits; a full cache preempts the youngest sequence, which completes
 * later with every token sent once, or ends "cancelled" when its deadline
 * passes while it waits again), a deadline that passes while waiting (503,
 * Retry-After 1), a
 * full waiting line (503 at submit), a cancel while waiting (499), a
 * cancel while running (finish_reason "cancelled"), one response per
 * token when streaming, the reservation given back at the end; the usage
 * counts on the request (what a response says; 0 and 0 for a request
 * that never ran) and the estimate's numbers and refusals (submit's).
 * The real model runs in tests/integration/test_generate_engine.py.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/mem.h"
#include "gen/engine.h"
#include "gen/kvcache.h"
#include "model/model.h"

/* ---- the fake graph: 1 layer, 1 head, head_dim 2, the kjv tokenizer --------------------- */

#define VOCAB 512
#define BLOCK_BYTES (1 * 2 * 1 * GEN_KV_BLOCK_TOKENS * 2 * sizeof(float))

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int permits; /* backend runs allowed; -1 = any */
static int runs;
static int64_t tokens_run; /* input_ids elements of every run */
static _Atomic bool fail_runs; /* every run fails */

static void grant(int n)
{
    pthread_mutex_lock(&gate_mu);
    permits = n < 0 ? -1 : permits + n;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

static int waiting_runs; /* runs blocked for a permit */

/* Runs waiting for a permit now. */
static int runs_waiting(void)
{
    pthread_mutex_lock(&gate_mu);
    int n = waiting_runs;
    pthread_mutex_unlock(&gate_mu);
    return n;
}

/* Waits until the engine has used every permit (it is blocked in a run). */
static void wait_used(void)
{
    pthread_mutex_lock(&gate_mu);
    while (permits > 0)
        pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
}

static int fake_execute(void *instance, struct arena *arena, const struct tensor *in, uint32_t nin,
                        const char *const *names, uint32_t nout, struct tensor *out, void **state,
                        uint32_t flags, struct error *err)
{
    (void)instance, (void)arena, (void)flags;
    pthread_mutex_lock(&gate_mu);
    waiting_runs++;
    while (permits == 0)
        pthread_cond_wait(&gate_cv, &gate_mu);
    waiting_runs--;
    if (permits > 0)
        permits--;
    runs++;
    tokens_run += in[0].shape[0] * in[0].shape[1];
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
    if (atomic_load(&fail_runs))
        return error_set(err, 500, "the fake run failed");
    int64_t n = in[0].shape[0], t = in[0].shape[1], past = 0;
    for (uint32_t i = 0; i < nin; i++)
        if (strncmp(in[i].name, "past_", 5) == 0)
            past = in[i].shape[2];
    void **mem = calloc(nout, sizeof *mem);
    for (uint32_t i = 0; i < nout; i++) {
        bool logits = strcmp(names[i], "logits") == 0;
        out[i] = (struct tensor){.name = names[i], .dtype = DT_FP32, .ndim = logits ? 3 : 4};
        if (logits) {
            out[i].shape[0] = n, out[i].shape[1] = t, out[i].shape[2] = VOCAB;
        } else {
            out[i].shape[0] = n, out[i].shape[1] = 1, out[i].shape[2] = past + t;
            out[i].shape[3] = 2;
        }
        out[i].nbytes = (size_t)tensor_count(&out[i], INT64_MAX) * sizeof(float);
        out[i].data = mem[i] = calloc(1, out[i].nbytes);
    }
    *state = mem;
    (void)nout;
    return 0;
}

static void fake_release(void *instance, void *state)
{
    (void)instance;
    void **mem = state;
    for (int i = 0; i < 3; i++)
        free(mem[i]);
    free(mem);
}

static const struct backend_ops fake_backend = {
    .abi_version = BACKEND_ABI_VERSION,
    .name = "fake",
    .execute = fake_execute,
    .release = fake_release,
};

static struct model_io graph_io(const char *name, enum dtype dt, uint32_t ndim, int64_t d1,
                                int64_t d3)
{
    struct model_io io = {.name = mem_strdup(name), .dtype = dt, .ndim = ndim};
    for (uint32_t d = 0; d < ndim; d++)
        io.dims[d] = -1;
    if (ndim == 4)
        io.dims[1] = d1, io.dims[3] = d3;
    if (ndim == 3)
        io.dims[2] = d3;
    return io;
}

static char dir[64];

static struct model *fake_model(uint32_t max_waiting)
{
    snprintf(dir, sizeof dir, "/tmp/inferd_engine_XXXXXX");
    assert_non_null(mkdtemp(dir));
    char path[256], cmd[600];
    snprintf(path, sizeof path, "%s/generation.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"tokenizer\": \"tokenizer.json\", \"max_context\": 256, \"eos_token_id\": 511,"
               " \"num_layers\": 1, \"num_heads\": 1, \"head_dim\": 2, \"vocab_size\": 512}");
    fclose(f);
    snprintf(cmd, sizeof cmd, "cp %s/models/kjv/1/tokenizer.json %s/", getenv("INFERD_SOURCE_DIR"),
             dir);
    assert_int_equal(system(cmd), 0);

    struct model *m = mem_calloc(1, sizeof *m);
    m->name = mem_strdup("fake");
    snprintf(m->version_str, sizeof m->version_str, "1");
    m->backend = &fake_backend;
    m->instances = mem_calloc(1, sizeof *m->instances);
    m->ninstances = 1;
    m->sched_cfg.max_queue_size = max_waiting;
    model_config_init(&m->config);
    m->info.ninputs = 5;
    m->info.inputs = mem_calloc(5, sizeof *m->info.inputs);
    m->info.inputs[0] = graph_io("input_ids", DT_INT64, 2, 0, 0);
    m->info.inputs[1] = graph_io("position_ids", DT_INT64, 2, 0, 0);
    m->info.inputs[2] = graph_io("attention_mask", DT_INT64, 2, 0, 0);
    m->info.inputs[3] = graph_io("past_key_values.0.key", DT_FP32, 4, 1, 2);
    m->info.inputs[4] = graph_io("past_key_values.0.value", DT_FP32, 4, 1, 2);
    m->info.noutputs = 3;
    m->info.outputs = mem_calloc(3, sizeof *m->info.outputs);
    m->info.outputs[0] = graph_io("logits", DT_FP32, 3, 0, VOCAB);
    m->info.outputs[1] = graph_io("present.0.key", DT_FP32, 4, 1, 2);
    m->info.outputs[2] = graph_io("present.0.value", DT_FP32, 4, 1, 2);
    return m;
}

static void fake_model_free(struct model *m)
{
    m->engine_ops->stop(m->engine);
    model_info_free(&m->info);
    model_config_free(&m->config);
    mem_free(m->instances);
    mem_free(m->name);
    mem_free(m);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- requests ------------------------------------------------------------------------ */

struct call {
    struct infer_request req;
    struct tensor inputs[3];
    struct tensor_bytes prompt;
    int32_t max_tokens;
    float temperature;
    const char *names[4];
    int responses, done;
    int32_t num_input_tokens; /* the last response's */
    char last_finish[16];
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static bool on_response(struct infer_request *req, const struct tensor *outputs, uint32_t n,
                        bool final)
{
    struct call *c = (struct call *)req;
    pthread_mutex_lock(&c->mu);
    c->responses++;
    const struct tensor_bytes *fin = outputs[1].data;
    snprintf(c->last_finish, sizeof c->last_finish, "%.*s", (int)fin->len, fin->ptr);
    c->num_input_tokens = *(const int32_t *)outputs[2].data;
    assert_int_equal(req->usage_prompt_tokens, (uint32_t)c->num_input_tokens);
    assert_int_equal(req->usage_completion_tokens, (uint32_t) * (const int32_t *)outputs[3].data);
    (void)n, (void) final;
    pthread_mutex_unlock(&c->mu);
    return true;
}

static void on_complete(struct infer_request *req)
{
    struct call *c = (struct call *)req;
    pthread_mutex_lock(&c->mu);
    c->done = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void call_init(struct call *c, const struct model *m, int32_t max_tokens,
                      uint64_t timeout_us)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->prompt = (struct tensor_bytes){"In the beginning", 16}; /* 8 tokens */
    c->max_tokens = max_tokens;
    c->inputs[0] = (struct tensor){.name = "text_input",
                                   .dtype = DT_BYTES,
                                   .ndim = 1,
                                   .shape = {1},
                                   .data = &c->prompt,
                                   .nbytes = 16};
    c->inputs[1] = (struct tensor){.name = "max_tokens",
                                   .dtype = DT_INT32,
                                   .ndim = 1,
                                   .shape = {1},
                                   .data = &c->max_tokens,
                                   .nbytes = 4};
    for (int i = 0; i < 4; i++)
        c->names[i] = m->info.outputs[i].name;
    c->temperature = 0; /* greedy: token 0 of the all-zero logits, never the end of text */
    c->inputs[2] = (struct tensor){.name = "temperature",
                                   .dtype = DT_FP32,
                                   .ndim = 1,
                                   .shape = {1},
                                   .data = &c->temperature,
                                   .nbytes = 4};
    c->req.inputs = c->inputs;
    c->req.ninputs = 3;
    c->req.output_names = c->names;
    c->req.noutputs = 4;
    c->req.many_responses = true;
    c->req.timeout_us = timeout_us;
    c->req.on_response = on_response;
    c->req.complete = on_complete;
}

static void call_wait(struct call *c)
{
    pthread_mutex_lock(&c->mu);
    while (!c->done)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

/* The prefix cache is off but where a test says otherwise: with it, a
 * finished sequence's blocks stay reserved (idle, in the table). */
static void setup_engine_full(struct model **out, uint32_t blocks, uint32_t max_waiting,
                              uint32_t max_running, bool prefix_cache)
{
    struct gen_settings s = {.kv_cache_bytes = blocks * BLOCK_BYTES,
                             .max_running = max_running,
                             .prefill_chunk = 64,
                             .no_prefix_cache = !prefix_cache};
    gen_configure(&s);
    grant(-1); /* the warm-up runs freely */
    struct model *m = fake_model(max_waiting);
    struct error err;
    assert_int_equal(gen_engine_attach(m, dir, &err), 0);
    assert_non_null(m->engine);
    pthread_mutex_lock(&gate_mu);
    permits = 0;
    pthread_mutex_unlock(&gate_mu);
    *out = m;
}

static void setup_engine_running(struct model **out, uint32_t blocks, uint32_t max_waiting,
                                 uint32_t max_running)
{
    setup_engine_full(out, blocks, max_waiting, max_running, false);
}

static void setup_engine(struct model **out, uint32_t blocks, uint32_t max_waiting)
{
    setup_engine_running(out, blocks, max_waiting, 8);
}

/* A counter of the engines' metrics (gen_write_metrics), summed over its series. */
static uint64_t gen_metric(const char *name)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    gen_write_metrics(&b);
    uint64_t total = 0;
    size_t len = strlen(name);
    const char *p = b.data, *end = b.data + b.len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (n > len && strncmp(p, name, len) == 0 && (p[len] == '{' || p[len] == ' ')) {
            char line[512];
            snprintf(line, sizeof line, "%.*s", (int)n, p);
            total += strtoull(strrchr(line, ' ') + 1, NULL, 10);
        }
        p += n + 1;
    }
    buf_free(&b);
    return total;
}

/* ---- the tests ------------------------------------------------------------------------- */

static void test_streams_one_response_per_token(void **state)
{
    (void)state;
    struct model *m;
    setup_engine(&m, 16, 8);
    struct call a;
    call_init(&a, m, 5, 0);
    struct error err;
    assert_int_equal(m->engine_ops->submit(m->engine, &a.req, &err), 0);
    grant(-1);
    call_wait(&a);
    assert_int_equal(a.req.rc, 0);
    assert_int_equal(a.responses, 5);
    assert_string_equal(a.last_finish, "length");
    assert_int_equal(a.req.usage_prompt_tokens, 8);
    assert_int_equal(a.req.usage_completion_tokens, 5);
    assert_int_equal(gen_kv_reserved(), 0);
    fake_model_free(m);
}

static void test_budget_waiting_and_refusals(void **state)
{
    (void)state;
    struct model *m;
    /* 8 blocks = 128 tokens; 8 prompt + 100 new = 7 blocks. Line: 1; one
     * sequence runs at a time. */
    setup_engine_running(&m, 8, 1, 1);
    struct error err;
    struct call never, a, b, c;
    call_init(&never, m, 150, 0);
    assert_int_equal(m->engine_ops->submit(m->engine, &never.req, &err), -1);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.msg, "--kv-cache-bytes"));

    call_init(&a, m, 100, 0);
    assert_int_equal(m->engine_ops->submit(m->engine, &a.req, &err), 0);
    grant(1);
    wait_used(); /* a is admitted (its prompt's block reserved) and in its prefill */
    assert_int_equal(gen_kv_reserved(), 1 * BLOCK_BYTES);

    call_init(&b, m, 100, 20000); /* waits; its deadline passes at the next step */
    assert_int_equal(m->engine_ops->submit(m->engine, &b.req, &err), 0);
    call_init(&c, m, 100, 0);
    assert_int_equal(m->engine_ops->submit(m->engine, &c.req, &err), -1);
    assert_int_equal(err.status, 503); /* the line (1) is full */
    assert_int_equal(err.retry_after_s, 1);
    usleep(50000);
    grant(1);
    call_wait(&b);
    assert_int_equal(b.req.rc, -1);
    assert_int_equal(b.req.err.status, 503);
    assert_int_equal(b.req.err.retry_after_s, 1);
    assert_int_equal(b.responses, 0);
    assert_int_equal(b.req.usage_prompt_tokens, 0); /* never ran: used nothing */
    assert_int_equal(b.req.usage_completion_tokens, 0);

    /* Cancelled while waiting: 499, never run. */
    call_init(&c, m, 100, 0);
    assert_int_equal(m->engine_ops->submit(m->engine, &c.req, &err), 0);
    atomic_store(&c.req.cancelled, true);
    grant(1);
    call_wait(&c);
    assert_int_equal(c.req.err.status, 499);
    assert_int_equal(c.req.usage_prompt_tokens + c.req.usage_completion_tokens, 0);

    /* Cancelled while running: the final response says so; room is back. */
    atomic_store(&a.req.cancelled, true);
    grant(-1);
    call_wait(&a);
    assert_int_equal(a.req.rc, 0);
    assert_string_equal(a.last_finish, "cancelled");
    assert_true(a.responses < 100);
    assert_int_equal(a.req.usage_prompt_tokens, 8);
    assert_int_equal(a.req.usage_completion_tokens, (uint32_t)a.responses - 1);
    assert_int_equal(gen_kv_reserved(), 0);
    fake_model_free(m);
}

static void test_a_waiting_request_runs_when_room_is_freed(void **state)
{
    (void)state;
    struct model *m;
    setup_engine_running(&m, 8, 4, 1);
    struct error err;
    struct call a, b;
    call_init(&a, m, 100, 0);
    call_init(&b, m, 100, 0);
    assert_int_equal(m->engine_ops->submit(m->engine, &a.req, &err), 0);
    assert_int_equal(m->engine_ops->submit(m->engine, &b.req, &err), 0);
    grant(3);
    wait_used();
    assert_int_equal(b.responses, 0); /* b waits while a runs */
    grant(-1);
    call_wait(&a);
    call_wait(&b);
    assert_int_equal(a.responses, 100);
    assert_int_equal(b.responses, 100);
    assert_string_equal(b.last_finish, "length");
    assert_int_equal(gen_kv_reserved(), 0);
    fake_model_free(m);
}

/* An engine of 8 blocks and two calls of 100 tokens submitted (b with
 * b_timeout_us); returns the preemptions counted before. */
static uint64_t start_two(struct model **m, struct call *a, struct call *b, uint64_t b_timeout_us)
{
    setup_engine(m, 8, 4);
    uint64_t before = gen_metric("inferd_gen_preemptions_total");
    struct error err;
    call_init(a, *m, 100, 0);
    call_init(b, *m, 100, b_timeout_us);
    assert_int_equal((*m)->engine_ops->submit((*m)->engine, &a->req, &err), 0);
    assert_int_equal((*m)->engine_ops->submit((*m)->engine, &b->req, &err), 0);
    return before;
}

/* 8 blocks and two sequences of 7 blocks each: both are admitted (each
 * with its prompt's block), and when they outgrow the cache the younger
 * is preempted, then recomputed once the elder is done. Every token is
 * sent once, and the cache is all given back. */
static void test_a_full_cache_preempts_the_youngest(void **state)
{
    (void)state;
    struct model *m;
    struct call a, b;
    uint64_t before = start_two(&m, &a, &b, 0);
    grant(-1);
    call_wait(&a);
    call_wait(&b);
    assert_true(gen_metric("inferd_gen_preemptions_total") > before);
    for (struct call *c = &a; c; c = c == &a ? &b : NULL) {
        assert_int_equal(c->req.rc, 0);
        assert_int_equal(c->responses, 100);
        assert_string_equal(c->last_finish, "length");
        assert_int_equal(c->req.usage_prompt_tokens, 8);
        assert_int_equal(c->req.usage_completion_tokens, 100);
    }
    assert_int_equal(gen_kv_reserved(), 0);
    fake_model_free(m);
}

/* A preempted sequence whose deadline passes while it waits to be
 * admitted again ends as a running one would: its final response says
 * "cancelled" after the tokens it had sent. */
static void test_a_preempted_sequence_past_its_deadline_ends_cancelled(void **state)
{
    (void)state;
    struct model *m;
    struct call a, b;
    uint64_t before = start_two(&m, &a, &b, 300000); /* b: 300 ms */
    while (gen_metric("inferd_gen_preemptions_total") == before) {
        grant(1);
        wait_used();
    }
    usleep(400000); /* b waits in the line past its deadline */
    grant(-1);
    call_wait(&a);
    call_wait(&b);
    assert_int_equal(a.responses, 100);
    assert_int_equal(b.req.rc, 0);
    assert_string_equal(b.last_finish, "cancelled");
    assert_true(b.responses > 1 && b.responses < 100);
    assert_int_equal(b.req.usage_completion_tokens, (uint32_t)b.responses - 1);
    assert_int_equal(gen_kv_reserved(), 0);
    fake_model_free(m);
}

/* Two prompts that arrive while the engine runs are prefilled together:
 * one backend run gives both their first token. (c holds the engine in
 * its own prefill while a and b arrive.) */
static void test_new_prompts_are_prefilled_together(void **state)
{
    (void)state;
    struct model *m;
    setup_engine(&m, 64, 8);
    uint64_t before = gen_metric("inferd_gen_prefill_runs_total");
    struct error err;
    struct call a, b, c;
    call_init(&c, m, 1, 0);
    call_init(&a, m, 3, 0);
    call_init(&b, m, 3, 0);
    b.prompt = (struct tensor_bytes){"In the beginning God", 20}; /* a longer prompt */
    assert_int_equal(m->engine_ops->submit(m->engine, &c.req, &err), 0);
    while (runs_waiting() == 0)
        usleep(1000); /* the engine is in c's prefill */
    assert_int_equal(m->engine_ops->submit(m->engine, &a.req, &err), 0);
    assert_int_equal(m->engine_ops->submit(m->engine, &b.req, &err), 0);
    grant(-1);
    call_wait(&c);
    call_wait(&a);
    call_wait(&b);
    assert_int_equal(a.responses, 3);
    assert_int_equal(b.responses, 3);
    assert_int_equal(gen_metric("inferd_gen_prefill_runs_total") - before, 2); /* c, then a and b */
    fake_model_free(m);
}

/* With the prefix cache, a second prompt that begins like the first (40
 * tokens, two whole blocks) attaches those blocks: its prefill runs only
 * its last 8 tokens; both answer the same; the counters say so. */
static void test_a_shared_prefix_is_not_computed_again(void **state)
{
    (void)state;
    struct model *m;
    setup_engine_full(&m, 64, 8, 8, true);
    uint64_t queried = gen_metric("inferd_gen_prefix_cache_queried_tokens_total");
    uint64_t hits = gen_metric("inferd_gen_prefix_cache_hit_tokens_total");
    static char prompt[81];
    for (int i = 0; i < 80; i += 2)
        prompt[i] = ' ', prompt[i + 1] = 'a'; /* " a" is one token: 40 tokens */
    struct call a, b;
    int64_t used[2];
    struct call *calls[2] = {&a, &b};
    for (int k = 0; k < 2; k++) {
        struct error err;
        call_init(calls[k], m, 5, 0);
        calls[k]->prompt = (struct tensor_bytes){prompt, 80};
        int64_t before = tokens_run;
        assert_int_equal(m->engine_ops->submit(m->engine, &calls[k]->req, &err), 0);
        grant(-1);
        call_wait(calls[k]);
        used[k] = tokens_run - before;
        assert_int_equal(calls[k]->responses, 5);
        assert_string_equal(calls[k]->last_finish, "length");
        assert_int_equal(calls[k]->req.usage_prompt_tokens, 40);
    }
    assert_int_equal(used[0], 40 + 4); /* the prompt, then 4 decode steps */
    assert_int_equal(used[1], 8 + 4);  /* 32 tokens found in the table */
    assert_int_equal(gen_metric("inferd_gen_prefix_cache_queried_tokens_total") - queried, 80);
    assert_int_equal(gen_metric("inferd_gen_prefix_cache_hit_tokens_total") - hits, 32);
    fake_model_free(m);
    assert_int_equal(gen_kv_reserved(), 0); /* the table's bytes went back with the engine */
}

/* A run that fails in a request's prefill: no response was sent, yet
 * complete() sees what it used (its prompt, nothing generated). */
static void test_failed_before_any_response_has_its_usage(void **state)
{
    (void)state;
    struct model *m;
    setup_engine(&m, 16, 8);
    struct call a;
    call_init(&a, m, 5, 0);
    struct error err;
    fail_runs = true;
    assert_int_equal(m->engine_ops->submit(m->engine, &a.req, &err), 0);
    grant(-1);
    call_wait(&a);
    fail_runs = false;
    assert_int_equal(a.req.rc, -1);
    assert_int_equal(a.responses, 0);
    assert_int_equal(a.req.usage_prompt_tokens, 8);
    assert_int_equal(a.req.usage_completion_tokens, 0);
    fake_model_free(m);
}

/* estimate: the numbers the engine then reports, and submit's refusals. */
static void test_estimate_matches_the_engine(void **state)
{
    (void)state;
    struct model *m;
    setup_engine(&m, 32, 8);
    assert_non_null(m->engine_ops->estimate);
    struct error err;
    uint32_t p = 0, c = 0;
    struct call a;
    call_init(&a, m, 5, 0);
    assert_int_equal(m->engine_ops->estimate(m->engine, &a.req, &p, &c, &err), 0);
    assert_int_equal(c, 5);
    assert_int_equal(m->engine_ops->submit(m->engine, &a.req, &err), 0);
    grant(-1);
    call_wait(&a);
    assert_int_equal(a.num_input_tokens, (int32_t)p);
    assert_int_equal(a.req.usage_prompt_tokens, p);

    /* No max_tokens: the rest of the context. */
    call_init(&a, m, 5, 0);
    a.req.ninputs = 1;
    assert_int_equal(m->engine_ops->estimate(m->engine, &a.req, &p, &c, &err), 0);
    assert_int_equal(p, 8);
    assert_int_equal(c, 256 - 8);

    /* Each refusal: estimate's error is submit's, word for word. */
    static char long_prompt[2048];
    memset(long_prompt, 'a', sizeof long_prompt - 1);
    for (size_t i = 0; i + 1 < sizeof long_prompt; i += 2)
        long_prompt[i] = ' '; /* " a" repeated: one token each, 1023 > 255 */
    struct {
        int32_t max_tokens;
        const char *prompt;
        int ninputs;
        const char *says;
    } cases[] = {
        {5, "", 3, "the prompt is empty"},
        {5, long_prompt, 3, "room for at most 255 prompt tokens"},
        {0, "In the beginning", 3, "max_tokens must be at least 1, got 0"},
        {249, "In the beginning", 3, "max_tokens 249 do not fit (at most 248)"},
        {5, "In the beginning", 0, "needs the input 'text_input'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct error e1, e2;
        call_init(&a, m, cases[i].max_tokens, 0);
        a.prompt = (struct tensor_bytes){cases[i].prompt, (uint32_t)strlen(cases[i].prompt)};
        if (cases[i].ninputs == 0)
            a.inputs[0].name = "prompt";
        assert_int_equal(m->engine_ops->estimate(m->engine, &a.req, &p, &c, &e1), -1);
        assert_int_equal(m->engine_ops->submit(m->engine, &a.req, &e2), -1);
        assert_int_equal(e1.status, 400);
        assert_int_equal(e2.status, 400);
        assert_string_equal(e1.msg, e2.msg);
        if (!strstr(e1.msg, cases[i].says))
            fail_msg("case %zu: '%s' does not say '%s'", i, e1.msg, cases[i].says);
    }
    /* A wrongly typed max_tokens too. */
    call_init(&a, m, 5, 0);
    a.inputs[1].dtype = DT_FP32;
    assert_int_equal(m->engine_ops->estimate(m->engine, &a.req, &p, &c, &err), -1);
    assert_non_null(strstr(err.msg, "input 'max_tokens' must be INT32"));
    fake_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_streams_one_response_per_token),
        cmocka_unit_test(test_budget_waiting_and_refusals),
        cmocka_unit_test(test_a_waiting_request_runs_when_room_is_freed),
        cmocka_unit_test(test_a_full_cache_preempts_the_youngest),
        cmocka_unit_test(test_a_preempted_sequence_past_its_deadline_ends_cancelled),
        cmocka_unit_test(test_a_shared_prefix_is_not_computed_again),
        cmocka_unit_test(test_new_prompts_are_prefilled_together),
        cmocka_unit_test(test_failed_before_any_response_has_its_usage),
        cmocka_unit_test(test_estimate_matches_the_engine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
