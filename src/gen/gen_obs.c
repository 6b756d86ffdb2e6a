/*
 * gen_obs.c: the generative engines' metrics (docs/metrics.md,
 * docs/generative.md maps them to vLLM's names).
 */
#include <pthread.h>
#include <stddef.h>

#include "gen/engine.h"
#include "gen/engine_int.h"

const struct metrics_hist_spec gen_latency_spec = {
    .nbounds = 14,
    .bounds = {1000000u, 2500000u, 5000000u, 10000000u, 20000000u, 40000000u, 60000000u, 80000000u,
               100000000u, 250000000u, 500000000u, 1000000000u, 2500000000u, 10000000000u},
    .divisor = 1e9,
};

const struct metrics_hist_spec gen_batch_spec = {
    .nbounds = 9,
    .bounds = {1, 2, 4, 8, 16, 24, 32, 48, 64},
    .divisor = 1,
};

static pthread_mutex_t engines_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gen_engine *engines;

void gen_obs_register(struct gen_engine *e)
{
    pthread_mutex_lock(&engines_mu);
    e->next = engines;
    engines = e;
    pthread_mutex_unlock(&engines_mu);
}

void gen_obs_unregister(struct gen_engine *e)
{
    pthread_mutex_lock(&engines_mu);
    struct gen_engine **p = &engines;
    while (*p && *p != e)
        p = &(*p)->next;
    if (*p)
        *p = e->next;
    pthread_mutex_unlock(&engines_mu);
}

typedef uint64_t (*read_fn)(const struct gen_engine *e);

static uint64_t prompt_tokens(const struct gen_engine *e)
{
    return metrics_load(&e->stats.prompt_tokens);
}
static uint64_t generation_tokens(const struct gen_engine *e)
{
    return metrics_load(&e->stats.generation_tokens);
}
static uint64_t running(const struct gen_engine *e)
{
    return atomic_load_explicit(&e->stats.running, memory_order_relaxed);
}
static uint64_t waiting(const struct gen_engine *e)
{
    return atomic_load_explicit(&e->stats.waiting, memory_order_relaxed);
}
static uint64_t refused(const struct gen_engine *e)
{
    return metrics_load(&e->stats.refused_waiting);
}
static uint64_t steps(const struct gen_engine *e)
{
    return metrics_load(&e->stats.steps);
}
static uint64_t prefill_runs(const struct gen_engine *e)
{
    return metrics_load(&e->stats.prefill_runs);
}
static uint64_t preemptions(const struct gen_engine *e)
{
    return metrics_load(&e->stats.preemptions);
}
static uint64_t prefix_queried(const struct gen_engine *e)
{
    return metrics_load(&e->pool.queried_tokens);
}
static uint64_t prefix_hits(const struct gen_engine *e)
{
    return metrics_load(&e->pool.hit_tokens);
}
static uint64_t prefix_blocks(const struct gen_engine *e)
{
    return atomic_load_explicit(&e->pool.ncached, memory_order_relaxed);
}

static uint64_t kvbuf_bytes(const struct gen_engine *e)
{
    return atomic_load_explicit(&e->stats.kvbuf_bytes, memory_order_relaxed);
}

static const struct {
    const char *name, *type, *help;
    read_fn read;
} scalars[] = {
    {"inferd_gen_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
     prompt_tokens},
    {"inferd_gen_generation_tokens_total", "counter", "Tokens generated (an end of text included).",
     generation_tokens},
    {"inferd_gen_sequences_running", "gauge", "Sequences in the running set.", running},
    {"inferd_gen_sequences_waiting", "gauge",
     "Sequences waiting for room in the KV cache or the running set.", waiting},
    {"inferd_gen_requests_refused_total", "counter",
     "Requests answered 503: the waiting line was full or their deadline passed while waiting.",
     refused},
    {"inferd_gen_decode_steps_total", "counter", "Batched decode steps run.", steps},
    {"inferd_gen_prefill_runs_total", "counter",
     "Backend runs of prompt chunks (the chunks of several new prompts batched in one).",
     prefill_runs},
    {"inferd_gen_preemptions_total", "counter",
     "Running sequences sent back to the waiting line for lack of KV cache (recomputed when "
     "admitted again).",
     preemptions},
    {"inferd_gen_prefix_cache_queried_tokens_total", "counter",
     "Tokens looked up in the prefix cache when sequences were admitted.", prefix_queried},
    {"inferd_gen_prefix_cache_hit_tokens_total", "counter",
     "Of those, tokens whose KV cache blocks were found there (not computed again).",
     prefix_hits},
    {"inferd_gen_prefix_cache_blocks", "gauge",
     "KV cache blocks in the prefix cache (held by sequences or idle).", prefix_blocks},
    {"inferd_gen_decode_buffer_bytes", "gauge",
     "Working memory holding the decode rows' keys and values where the graph reads them "
     "(generation.json \"present\": \"new\"), outside --kv-cache-bytes; freed when idle.",
     kvbuf_bytes},
};

static const struct {
    const char *name, *help;
    size_t offset;
    const struct metrics_hist_spec *spec;
} hists[] = {
    {"inferd_gen_time_to_first_token_seconds", "From submit to the first generated token.",
     offsetof(struct gen_stats, ttft), &gen_latency_spec},
    {"inferd_gen_time_per_output_token_seconds", "Between consecutive tokens of a sequence.",
     offsetof(struct gen_stats, tpot), &gen_latency_spec},
    {"inferd_gen_decode_batch_size", "Sequences carried by each decode step.",
     offsetof(struct gen_stats, batch), &gen_batch_spec},
};

void gen_write_metrics(struct buf *out)
{
    pthread_mutex_lock(&engines_mu);
    if (!engines) {
        pthread_mutex_unlock(&engines_mu);
        return;
    }
    for (size_t k = 0; k < sizeof scalars / sizeof scalars[0]; k++) {
        metrics_write_header(out, scalars[k].name, scalars[k].type, scalars[k].help);
        for (const struct gen_engine *e = engines; e; e = e->next) {
            const char *labels[] = {"model", e->name, "version", e->version};
            metrics_write_u64(out, scalars[k].name, labels, 2, scalars[k].read(e));
        }
    }
    metrics_write_header(out, "inferd_gen_requests_finished_total", "counter",
                         "Sequences finished, by finish reason.");
    for (const struct gen_engine *e = engines; e; e = e->next)
        for (int f = 0; f < GEN_FINISH_N; f++) {
            const char *labels[] = {"model",    e->name,  "version",
                                    e->version, "reason", gen_finish_name(f)};
            metrics_write_u64(out, "inferd_gen_requests_finished_total", labels, 3,
                              metrics_load(&e->stats.finished[f]));
        }
    for (size_t k = 0; k < sizeof hists / sizeof hists[0]; k++) {
        metrics_write_header(out, hists[k].name, "histogram", hists[k].help);
        for (const struct gen_engine *e = engines; e; e = e->next) {
            const char *labels[] = {"model", e->name, "version", e->version};
            struct metrics_hist_snapshot snap = {0};
            metrics_hist_accumulate(
                &snap, (const struct metrics_hist *)((const char *)&e->stats + hists[k].offset));
            metrics_write_hist(out, hists[k].name, labels, 2, hists[k].spec, &snap);
        }
    }
    pthread_mutex_unlock(&engines_mu);
    uint64_t budget = gen_kv_budget(), reserved = gen_kv_reserved(), idle = gen_kv_idle();
    uint64_t used = reserved > idle ? reserved - idle : 0;
    metrics_write_header(out, "inferd_gen_kv_cache_budget_bytes", "gauge",
                         "The KV cache budget of every generative model (--kv-cache-bytes).");
    metrics_write_u64(out, "inferd_gen_kv_cache_budget_bytes", NULL, 0, budget);
    metrics_write_header(out, "inferd_gen_kv_cache_usage_ratio", "gauge",
                         "Reserved KV cache bytes over the budget (idle prefix-cache blocks, "
                         "evicted when room is needed, not counted).");
    metrics_write_f64(out, "inferd_gen_kv_cache_usage_ratio", NULL, 0,
                      budget ? (double)used / (double)budget : 0.0);
}
