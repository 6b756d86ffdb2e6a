/*
 * engine.c: the engine thread (engine.h): admission under the KV budget,
 * chunked prefill, batched decode steps, retiring sequences.
 */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"
#include "base/thread.h"
#include "gen/engine_int.h"

/* ---- ending a sequence ------------------------------------------------------------ */

/* Frees s's cache blocks and budget reservation (idempotent). */
static void release_cache(struct gen_engine *e, struct gen_seq *s)
{
    gen_kv_seq_release(&e->pool, &s->kv);
    gen_kv_unreserve(s->reserved);
    s->reserved = 0;
}

/* Frees s's cache and reservation and completes its request, with what
 * it used when it ran (s->id: it entered the running set; a sequence that
 * only waited used nothing). */
static void retire(struct gen_engine *e, struct gen_seq *s, const struct error *err)
{
    struct infer_request *req = s->req;
    if (s->id)
        gen_seq_count(s);
    req->rc = err ? ST_ERROR : ST_OK;
    if (err)
        req->err = *err;
    req->exec_end_ns = req->infer_end_ns = clock_now_ns();
    if (!req->infer_start_ns)
        req->infer_start_ns = req->exec_end_ns;
    release_cache(e, s);
    gen_seq_free(e, s);
    req->complete(req);
}

/* The cache is given back and the end counted before the final response
 * goes out, so a client that reads the metrics after its answer sees
 * them settled. */
static void finish(struct gen_engine *e, struct gen_seq *s, enum gen_finish why)
{
    release_cache(e, s);
    atomic_fetch_add_explicit(&e->stats.finished[why], 1, memory_order_relaxed);
    gen_seq_respond(e, s, true, why);
    retire(e, s, NULL);
}

/* Samples s's next token from its logits row and hands out what it
 * makes. Returns true when s ended (and is freed). */
static bool advance(struct gen_engine *e, struct gen_seq *s, const float *logits)
{
    int32_t tok = sample_token(logits, e->shape.vocab, &s->sp, &s->rng, &e->scratch);
    uint64_t now = clock_now_ns();
    struct gen_stats *st = &e->stats;
    atomic_fetch_add_explicit(&st->generation_tokens, 1, memory_order_relaxed);
    if (!s->first_ns) {
        s->first_ns = now;
        metrics_hist_observe(&st->ttft, &gen_latency_spec, now - s->submit_ns,
                             METRICS_SHARED_SHARD);
    } else {
        metrics_hist_observe(&st->tpot, &gen_latency_spec, now - s->last_ns, METRICS_SHARED_SHARD);
    }
    s->last_ns = now;
    s->generated++;
    if (tok == (int32_t)e->shape.eos) {
        finish(e, s, GEN_FINISH_STOP);
        return true;
    }
    s->tokens[s->ntokens++] = tok;
    size_t len = 0;
    const char *bytes = tokenizer_token(e->tok, tok, &len);
    int r = gen_text_append(&s->text, bytes, len);
    if (r < 0) {
        struct error err;
        error_set(&err, 500, "out of memory for the generated text");
        retire(e, s, &err);
        return true;
    }
    if (r == 1) {
        finish(e, s, GEN_FINISH_STOP);
        return true;
    }
    if (s->generated == s->max_new) {
        finish(e, s, GEN_FINISH_LENGTH);
        return true;
    }
    if (s->stream && !gen_seq_respond(e, s, false, GEN_FINISH_STOP)) {
        atomic_fetch_add_explicit(&st->finished[GEN_FINISH_CANCELLED], 1, memory_order_relaxed);
        retire(e, s, NULL);
        return true;
    }
    return false;
}

/* Every sequence of a failed run ends with its error. */
static void fail_all(struct gen_engine *e, struct gen_seq **seqs, uint32_t n,
                     const struct error *err)
{
    log_error("model %s version %s: generation step failed: %s", e->name, e->version, err->msg);
    gen_prev_drop(e);
    for (uint32_t i = 0; i < n; i++) {
        retire(e, seqs[i], err);
        seqs[i] = NULL;
    }
}

/* ---- one step of the running set ---------------------------------------------------- */

/* Tokens slot i's next prefill chunk feeds. */
static uint32_t chunk_of(const struct gen_engine *e, uint32_t i)
{
    const struct gen_seq *s = e->running[i];
    uint32_t t = s->prefill_to - s->kv.len;
    return t < e->prefill_chunk ? t : e->prefill_chunk;
}

/* One backend run of a prefill chunk of each of slots[0, n), padded to the
 * longest (ts: their chunks). */
static void prefill_rows(struct gen_engine *e, const uint32_t *slots, const uint32_t *ts,
                         uint32_t n)
{
    struct gen_seq *rows[n];
    uint32_t t = 0;
    for (uint32_t b = 0; b < n; b++) {
        rows[b] = e->running[slots[b]];
        t = ts[b] > t ? ts[b] : t;
        if (!rows[b]->req->infer_start_ns)
            rows[b]->req->infer_start_ns = clock_now_ns();
    }
    const float *logits;
    void *state;
    struct error err;
    atomic_fetch_add_explicit(&e->stats.prefill_runs, 1, memory_order_relaxed);
    if (gen_run(e, rows, n, t, ts, false, &logits, &state, &err) != 0) {
        fail_all(e, rows, n, &err);
        for (uint32_t b = 0; b < n; b++)
            e->running[slots[b]] = NULL;
        return;
    }
    /* The prompt's last logits give the first token; a preempted
     * sequence's recomputed cache ends before its last token, which the
     * next decode step feeds. */
    for (uint32_t b = 0; b < n; b++) {
        struct gen_seq *s = rows[b];
        if (s->kv.len == s->prefill_to && s->generated == 0 &&
            advance(e, s, logits + ((size_t)b * t + ts[b] - 1) * e->shape.vocab))
            e->running[slots[b]] = NULL;
    }
    gen_run_release(e, state);
}

/* One prefill chunk of every sequence still reading its prompt, batched:
 * new prompts are read together, each run padded to its longest chunk;
 * a chunk less than half the longest waits for a run of its own size, so
 * that padding never doubles a run's work. */
static void prefill(struct gen_engine *e)
{
    if (e->nrunning == 0)
        return;
    uint32_t slots[e->nrunning], ts[e->nrunning], n = 0;
    for (uint32_t i = 0; i < e->nrunning; i++)
        if (e->running[i] && e->running[i]->kv.len < e->running[i]->prefill_to) {
            /* Insertion by chunk size, longest first. */
            uint32_t t = chunk_of(e, i), k = n++;
            while (k > 0 && ts[k - 1] < t) {
                slots[k] = slots[k - 1], ts[k] = ts[k - 1];
                k--;
            }
            slots[k] = i, ts[k] = t;
        }
    for (uint32_t from = 0; from < n;) {
        uint32_t to = from + 1;
        while (to < n && ts[to] * 2 >= ts[from])
            to++;
        prefill_rows(e, slots + from, ts + from, to - from);
        from = to;
    }
}

/* One decode step of every sequence past its prompt. */
static void decode(struct gen_engine *e)
{
    if (e->nrunning == 0)
        return;
    struct gen_seq *rows[e->nrunning];
    uint32_t slot[e->nrunning], n = 0;
    for (uint32_t i = 0; i < e->nrunning; i++) {
        struct gen_seq *s = e->running[i];
        if (s && s->kv.len >= s->prefill_to) {
            slot[n] = i;
            rows[n++] = s;
        }
    }
    if (n == 0)
        return;
    const float *logits;
    void *state;
    struct error err;
    atomic_fetch_add_explicit(&e->stats.steps, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&e->stats.step_rows, n, memory_order_relaxed);
    metrics_hist_observe(&e->stats.batch, &gen_batch_spec, n, METRICS_SHARED_SHARD);
    if (gen_run(e, rows, n, 1, NULL, true, &logits, &state, &err) != 0) {
        fail_all(e, rows, n, &err);
        for (uint32_t b = 0; b < n; b++)
            e->running[slot[b]] = NULL;
        return;
    }
    for (uint32_t b = 0; b < n; b++)
        if (advance(e, rows[b], logits + (size_t)b * e->shape.vocab))
            e->running[slot[b]] = NULL;
    gen_run_release(e, state);
}

/* Cancelled or past their deadline: they end now, with what they have. */
static void cut_short(struct gen_engine *e, uint64_t now)
{
    for (uint32_t i = 0; i < e->nrunning; i++) {
        struct gen_seq *s = e->running[i];
        if (!s)
            continue;
        bool gone = atomic_load_explicit(&s->req->cancelled, memory_order_relaxed);
        if (gone || (s->deadline_ns && now >= s->deadline_ns)) {
            finish(e, s, GEN_FINISH_CANCELLED);
            e->running[i] = NULL;
        }
    }
}

static void compact(struct gen_engine *e)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < e->nrunning; i++)
        if (e->running[i])
            e->running[n++] = e->running[i];
    e->nrunning = n;
    atomic_store_explicit(&e->stats.running, n, memory_order_relaxed);
}

/* ---- room in the cache ---------------------------------------------------------------- */

/* Makes s's reservation cover its own blocks of `tokens` cached tokens
 * (whole blocks; the prefix table's are the cache's), the block it writes
 * next made its own first (copy on write). `leave`: bytes the budget must
 * still have free afterwards. When the budget is short, idle blocks of the
 * prefix table are evicted first. */
static bool reserve_for(struct gen_engine *e, struct gen_seq *s, uint32_t tokens, uint64_t leave)
{
    if (gen_kv_seq_own_tail(&e->pool, &s->kv) != 0)
        return false;
    uint64_t bb = gen_kv_block_bytes(&e->shape.kv);
    uint64_t all = gen_kv_bytes_for(&e->shape.kv, tokens), shared = (uint64_t)s->kv.nshared * bb;
    uint64_t need = all > shared ? all - shared : 0;
    if (need <= s->reserved)
        return true;
    if (!gen_kv_reserve_leaving(need - s->reserved, leave)) {
        uint64_t short_by = need - s->reserved + leave;
        if (!gen_kv_evict_idle(&e->pool, (uint32_t)((short_by + bb - 1) / bb)) ||
            !gen_kv_reserve_leaving(need - s->reserved, leave))
            return false;
    }
    s->reserved = need;
    return true;
}

/* Tokens s has cached after the coming step: a prefill chunk, or one. */
static uint32_t after_step(const struct gen_engine *e, const struct gen_seq *s)
{
    if (s->kv.len >= s->prefill_to)
        return s->kv.len + 1;
    uint32_t t = s->prefill_to - s->kv.len;
    return s->kv.len + (t < e->prefill_chunk ? t : e->prefill_chunk);
}

/* Sends running slot i back to the head of the waiting line (vLLM's
 * preemption by recomputation): its cache and reservation go back; when
 * admitted again it computes the cache of everything it has read and
 * written but the last token sampled, then goes on from there. Nothing
 * is sent twice: its text, sampler and counts are kept. */
static void preempt(struct gen_engine *e, uint32_t i)
{
    struct gen_seq *s = e->running[i];
    e->running[i] = NULL;
    release_cache(e, s);
    s->prefill_to = s->generated ? s->ntokens - 1 : s->nprompt;
    atomic_fetch_add_explicit(&e->stats.preemptions, 1, memory_order_relaxed);
    pthread_mutex_lock(&e->mu);
    s->next = e->wait_head;
    e->wait_head = s;
    if (!e->wait_tail)
        e->wait_tail = s;
    e->nwaiting++;
    atomic_store_explicit(&e->stats.waiting, e->nwaiting, memory_order_relaxed);
    pthread_mutex_unlock(&e->mu);
}

/* The running slot of the youngest sequence (the last admitted). */
static uint32_t youngest(const struct gen_engine *e)
{
    uint32_t y = UINT32_MAX;
    for (uint32_t i = 0; i < e->nrunning; i++)
        if (e->running[i] && (y == UINT32_MAX || e->running[i]->id > e->running[y]->id))
            y = i;
    return y;
}

/* Gives every running sequence, oldest first, the blocks its part of the
 * coming step needs, preempting the youngest while the budget is short
 * (possibly the sequence itself: it then waits for room). */
static void make_room(struct gen_engine *e)
{
    for (;;) {
        uint32_t oldest = UINT32_MAX;
        for (uint32_t i = 0; i < e->nrunning; i++) {
            struct gen_seq *s = e->running[i];
            if (s && !reserve_for(e, s, after_step(e, s), 0) &&
                (oldest == UINT32_MAX || s->id < e->running[oldest]->id))
                oldest = i;
        }
        if (oldest == UINT32_MAX)
            return;
        preempt(e, youngest(e));
    }
}

static void admit_locked(struct gen_engine *e, uint64_t now);

static void step(struct gen_engine *e)
{
    cut_short(e, clock_now_ns());
    make_room(e);
    compact(e);
    /* Decode first: the sequences already streaming keep their pace while
     * newcomers read their prompts a chunk per step. */
    decode(e);
    /* Requests that arrived during the decode run are admitted now (with
     * their prompts' blocks), so their prefill joins this step's instead
     * of waiting for another decode run: a decode run less to their first
     * token. */
    pthread_mutex_lock(&e->mu);
    admit_locked(e, clock_now_ns());
    pthread_mutex_unlock(&e->mu);
    prefill(e);
    compact(e);
}

/* ---- the waiting line ------------------------------------------------------------------- */

/* Under mu: moves what fits from the head of the line into the running
 * set (arrival order: a sequence that does not fit blocks those behind
 * it, so a large one is never starved by small ones). */
static void admit_locked(struct gen_engine *e, uint64_t now)
{
    /* Room left for the running sequences to grow into, so that a newcomer
     * is not preempted as soon as it is in: a block per running sequence. */
    uint64_t headroom = (uint64_t)e->nrunning * gen_kv_block_bytes(&e->shape.kv);
    while (e->wait_head && e->nrunning < e->max_running) {
        struct gen_seq *s = e->wait_head;
        /* What the prefix table has of its tokens is not computed again; a
         * new sequence still runs its last prompt token (for its logits). */
        uint32_t hit = gen_kv_seq_attach(&e->pool, &s->kv, s->tokens, s->prefill_to);
        uint32_t limit = s->generated ? s->prefill_to : s->prefill_to - 1;
        s->kv.len = hit < limit ? hit : limit;
        /* Its prefill's blocks and the first token's. */
        if (!reserve_for(e, s, s->prefill_to + 1, headroom)) {
            release_cache(e, s);
            break;
        }
        headroom += gen_kv_block_bytes(&e->shape.kv);
        e->wait_head = s->next;
        if (!e->wait_head)
            e->wait_tail = NULL;
        e->nwaiting--;
        s->next = NULL;
        if (!s->id)
            s->req->exec_start_ns = now;
        s->id = ++e->next_id;
        e->running[e->nrunning++] = s;
    }
    atomic_store_explicit(&e->stats.waiting, e->nwaiting, memory_order_relaxed);
    atomic_store_explicit(&e->stats.running, e->nrunning, memory_order_relaxed);
}

/* Under mu: takes the waiting sequences that were cancelled or whose
 * deadline passed out of the line, into *out. */
static void expire_locked(struct gen_engine *e, uint64_t now, struct gen_seq **out)
{
    struct gen_seq **p = &e->wait_head, *prev = NULL;
    while (*p) {
        struct gen_seq *s = *p;
        bool gone = atomic_load_explicit(&s->req->cancelled, memory_order_relaxed);
        if (gone || (s->deadline_ns && now >= s->deadline_ns)) {
            *p = s->next;
            e->nwaiting--;
            s->next = *out;
            *out = s;
            continue;
        }
        prev = s;
        p = &s->next;
    }
    e->wait_tail = prev;
}

static void refuse_expired(struct gen_engine *e, struct gen_seq *list)
{
    while (list) {
        struct gen_seq *s = list;
        list = s->next;
        struct error err;
        if (s->id) {
            /* Preempted: it has run, its answer ends as a running one's would. */
            finish(e, s, GEN_FINISH_CANCELLED);
            continue;
        }
        if (atomic_load_explicit(&s->req->cancelled, memory_order_relaxed)) {
            error_set(&err, 499, "request cancelled by the client");
        } else {
            error_set(&err, 503,
                      "model '%s': no room in the KV cache (--kv-cache-bytes) or the running "
                      "set before the request's deadline",
                      e->name);
            err.retry_after_s = 1;
            atomic_fetch_add_explicit(&e->stats.refused_waiting, 1, memory_order_relaxed);
        }
        retire(e, s, &err);
    }
}

/* The time to wake up at when nothing runs: the earliest deadline of the
 * line, and every 20 ms while something waits for room that another
 * engine may free. */
static void wait_locked(struct gen_engine *e, uint64_t now)
{
    if (!e->wait_head) {
        pthread_cond_wait(&e->cv, &e->mu);
        return;
    }
    uint64_t until = now + 20000000u;
    for (const struct gen_seq *s = e->wait_head; s; s = s->next)
        if (s->deadline_ns && s->deadline_ns < until)
            until = s->deadline_ns;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t abs = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + (until - now);
    ts.tv_sec = (time_t)(abs / 1000000000u);
    ts.tv_nsec = (long)(abs % 1000000000u);
    pthread_cond_timedwait(&e->cv, &e->mu, &ts);
}

static void *engine_main(void *arg)
{
    struct gen_engine *e = arg;
    for (;;) {
        struct gen_seq *expired = NULL;
        pthread_mutex_lock(&e->mu);
        for (;;) {
            uint64_t now = clock_now_ns();
            admit_locked(e, now); /* room first: a deadline only refuses a wait */
            expire_locked(e, now, &expired);
            if (e->nrunning > 0 || expired)
                break;
            if (e->stopping && !e->wait_head) {
                pthread_mutex_unlock(&e->mu);
                return NULL;
            }
            if (!e->wait_head) {
                /* idle: the pooled blocks and the last run's outputs go back */
                gen_kv_pool_trim(&e->pool, 0);
                gen_prev_drop(e);
            }
            wait_locked(e, now);
        }
        pthread_mutex_unlock(&e->mu);
        refuse_expired(e, expired);
        if (e->nrunning > 0)
            step(e);
    }
}

int gen_engine_start(struct gen_engine *e)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&e->mu, NULL);
    int rc = thread_start(&e->thread, "generate", engine_main, e);
    if (rc) {
        pthread_cond_destroy(&e->cv);
        pthread_mutex_destroy(&e->mu);
        return -rc;
    }
    e->thread_started = true;
    return 0;
}

void gen_engine_stop(struct gen_engine *e)
{
    if (!e->thread_started)
        return;
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    e->thread_started = false;
}

int gen_engine_submit(void *engine, struct infer_request *req, struct error *err)
{
    struct gen_engine *e = engine;
    if (req->background)
        return error_set(err, 400, "model '%s' is generative: it takes no shadow copies", e->name);
    struct gen_seq *s;
    if (gen_seq_new(e, req, &s, err) != 0)
        return ST_ERROR;
    uint64_t need = gen_kv_bytes_for(&e->shape.kv, s->nprompt + s->max_new);
    if (need > gen_kv_budget()) {
        error_set(err, 400,
                  "the request needs %llu bytes of KV cache (%u prompt and %u new tokens), more "
                  "than the server's whole budget (--kv-cache-bytes %llu)",
                  (unsigned long long)need, s->nprompt, s->max_new,
                  (unsigned long long)gen_kv_budget());
        gen_seq_free(e, s);
        return ST_ERROR;
    }
    uint64_t now = clock_now_ns();
    req->enqueue_ns = s->submit_ns = now;
    s->deadline_ns = req->timeout_us ? now + req->timeout_us * 1000u : 0;
    pthread_mutex_lock(&e->mu);
    if (e->stopping || e->nwaiting >= e->max_waiting) {
        bool stopping = e->stopping;
        pthread_mutex_unlock(&e->mu);
        gen_seq_free(e, s);
        atomic_fetch_add_explicit(&e->stats.refused_waiting, 1, memory_order_relaxed);
        error_set(err, 503,
                  stopping ? "model '%s' is stopping"
                           : "model '%s': too many requests waiting for room to generate",
                  e->name);
        err->retry_after_s = 1;
        return ST_ERROR;
    }
    if (e->wait_tail)
        e->wait_tail->next = s;
    else
        e->wait_head = s;
    e->wait_tail = s;
    e->nwaiting++;
    atomic_fetch_add_explicit(&e->stats.prompt_tokens, s->nprompt, memory_order_relaxed);
    atomic_store_explicit(&e->stats.waiting, e->nwaiting, memory_order_relaxed);
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return 0;
}
