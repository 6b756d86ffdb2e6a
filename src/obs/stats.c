#include "obs/stats.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/mem.h"
#include "base/status.h"
#include "model/lookup.h"
#include "model/repository.h"

const struct metrics_hist_spec stats_duration_buckets = {
    .nbounds = 17,
    .bounds = {100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 25000000,
               50000000, 100000000, 250000000, 500000000, 1000000000, 2500000000,
               5000000000, 10000000000, 30000000000},
    .divisor = 1e9,
};

const struct metrics_hist_spec stats_batch_buckets = {
    .nbounds = 12,
    .bounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096},
    .divisor = 1,
};

const char *stats_fail_reason_name(enum stats_fail_reason r)
{
    static const char *const names[STATS_FAIL_REASONS] = {"REJECTED", "CANCELED", "BACKEND",
                                                          "OTHER"};
    return (unsigned)r < STATS_FAIL_REASONS ? names[r] : "OTHER";
}

const char *stats_queue_refusal_name(enum stats_queue_refusal r)
{
    static const char *const names[STATS_QUEUE_REFUSALS] = {"full", "deadline", "budget"};
    return (unsigned)r < STATS_QUEUE_REFUSALS ? names[r] : "full";
}

/* Counters indexed by a small number (a batch size, a response index), in
 * entries of `width` words. A slot's array is replaced by a larger one when
 * a larger index appears; the old one stays in the chain (a writer may
 * still be adding to it) and readers sum the whole chain, so no value is
 * copied and none is lost. */
struct index_array {
    uint32_t cap; /* entries */
    struct index_array *older;
    _Atomic uint64_t w[];
};

/* The words of one batch size's executions. */
enum { BATCH_COUNT, BATCH_INPUT_NS, BATCH_INFER_NS, BATCH_OUTPUT_NS, BATCH_WIDTH };

/* The words of one response index: a (count, ns) pair per statistic, in
 * the order of struct stats_response (compute_infer ... cancel). */
enum { RESP_PAIRS = 6, RESP_WIDTH = 2 * RESP_PAIRS };

/* One recording thread's numbers for one model version. The pads keep its
 * cache lines apart from neighbouring allocations (malloc does not align
 * to a line, so _Alignas would promise more than the allocator gives). */
struct stats_slot {
    char lead_pad_[METRICS_CACHE_LINE];
    _Atomic uint64_t success_count, success_ns;
    _Atomic uint64_t queue_ns, input_ns, infer_ns, output_ns;
    _Atomic uint64_t inference_count, execution_count, last_inference_ms;
    _Atomic uint64_t inline_executions, input_elements, padding_elements;
    _Atomic uint64_t routed[ROUTE_KINDS];
    _Atomic uint64_t queue_refusals[STATS_QUEUE_REFUSALS];
    _Atomic uint64_t fail_count[STATS_FAIL_REASONS], fail_ns[STATS_FAIL_REASONS];
    struct metrics_hist request_hist, queue_hist, compute_hist, batch_hist;
    _Atomic(struct index_array *) batches;   /* entry i: batch size i + 1 */
    _Atomic(struct index_array *) responses; /* entry i: response index i */
    char tail_pad_[METRICS_CACHE_LINE];
};

struct stats_model {
    char *name;
    char version[24];
    int64_t version_num;
    struct stats_model *next; /* the table, in creation order */
    uint32_t refs;            /* schedulers of this version running */
    uint64_t retired_seq;     /* when refs last fell to 0 (0: never) */
    _Atomic(struct stats_slot *) slots[METRICS_NSHARDS];
};

/* The table: every stats_model alive. The mutex covers the list, refs and
 * retirement; the slots are recorded into without it. */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stats_model *table_head;
static uint64_t retire_clock;

static struct stats_model *table_find(const char *name, int64_t version)
{
    for (struct stats_model *s = table_head; s; s = s->next)
        if (s->version_num == version && strcmp(s->name, name) == 0)
            return s;
    return NULL;
}

struct stats_model *stats_model_get(const char *name, int64_t version)
{
    pthread_mutex_lock(&table_lock);
    struct stats_model *s = table_find(name, version);
    if (s)
        goto out;
    s = mem_calloc(1, sizeof *s);
    if (!s)
        goto out;
    s->name = mem_strdup(name);
    if (!s->name) {
        mem_free(s);
        s = NULL;
        goto out;
    }
    s->version_num = version;
    snprintf(s->version, sizeof s->version, "%" PRId64, version);
    struct stats_model **tail = &table_head;
    while (*tail)
        tail = &(*tail)->next;
    *tail = s;
out:
    if (s)
        s->refs++;
    pthread_mutex_unlock(&table_lock);
    return s;
}

struct stats_model *stats_model_find(const char *name, int64_t version)
{
    pthread_mutex_lock(&table_lock);
    struct stats_model *s = table_find(name, version);
    pthread_mutex_unlock(&table_lock);
    return s;
}

static void index_array_free(struct index_array *a)
{
    while (a) {
        struct index_array *older = a->older;
        mem_free(a);
        a = older;
    }
}

static void model_stats_free(struct stats_model *s)
{
    for (int i = 0; i < METRICS_NSHARDS; i++) {
        struct stats_slot *slot = atomic_load_explicit(&s->slots[i], memory_order_relaxed);
        if (!slot)
            continue;
        index_array_free(atomic_load_explicit(&slot->batches, memory_order_relaxed));
        index_array_free(atomic_load_explicit(&slot->responses, memory_order_relaxed));
        mem_free(slot);
    }
    mem_free(s->name);
    mem_free(s);
}

_Static_assert(STATS_RETIRED_PER_MODEL >= 1, "stats_model_put relies on keeping one");

/* Frees the retired versions of `name` beyond the newest
 * STATS_RETIRED_PER_MODEL (at least 1). Table lock held. */
static void prune_retired(const char *name)
{
    for (;;) {
        uint32_t retired = 0;
        struct stats_model **oldest = NULL;
        for (struct stats_model **p = &table_head; *p; p = &(*p)->next) {
            if ((*p)->refs || strcmp((*p)->name, name) != 0)
                continue;
            retired++;
            if (!oldest || (*p)->retired_seq < (*oldest)->retired_seq)
                oldest = p;
        }
        if (retired <= STATS_RETIRED_PER_MODEL)
            return;
        struct stats_model *gone = *oldest;
        *oldest = gone->next;
        model_stats_free(gone);
    }
}

void stats_model_put(struct stats_model *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&table_lock);
    if (--s->refs == 0) {
        /* s is now the newest retired version of its model, so pruning
         * (which keeps at least one) never frees it. */
        s->retired_seq = ++retire_clock;
        prune_retired(s->name);
    }
    pthread_mutex_unlock(&table_lock);
}

void stats_foreach(void (*fn)(const struct stats_model *s, void *arg), void *arg)
{
    pthread_mutex_lock(&table_lock);
    for (struct stats_model *s = table_head; s; s = s->next)
        fn(s, arg);
    pthread_mutex_unlock(&table_lock);
}

/* ---- recording ---------------------------------------------------------- */

/* The calling thread's slot of s, allocated on its first use. */
static struct stats_slot *slot_get(struct stats_model *s, int *shard)
{
    *shard = metrics_shard_index();
    struct stats_slot *slot = atomic_load_explicit(&s->slots[*shard], memory_order_acquire);
    if (slot)
        return slot;
    slot = mem_calloc(1, sizeof *slot);
    if (!slot)
        return NULL;
    struct stats_slot *expected = NULL;
    /* Only the shared shard has several writers that may race here. */
    if (!atomic_compare_exchange_strong_explicit(&s->slots[*shard], &expected, slot,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        mem_free(slot);
        slot = expected;
    }
    return slot;
}

/* The `width` words of entry `index` (< limit) in the array at *head,
 * growing it when needed; NULL when index is out of range or out of memory. */
static _Atomic uint64_t *index_entry_get(_Atomic(struct index_array *) *head, uint32_t index,
                                         uint32_t limit, uint32_t width)
{
    if (index >= limit)
        return NULL;
    struct index_array *a = atomic_load_explicit(head, memory_order_acquire);
    if (a && index < a->cap)
        return &a->w[(size_t)index * width];
    uint32_t cap = 8;
    while (cap <= index)
        cap *= 2;
    struct index_array *bigger =
        mem_calloc(1, sizeof *bigger + (size_t)cap * width * sizeof bigger->w[0]);
    if (!bigger)
        return NULL;
    bigger->cap = cap;
    for (;;) {
        bigger->older = a;
        if (atomic_compare_exchange_strong_explicit(head, &a, bigger, memory_order_acq_rel,
                                                    memory_order_acquire))
            return &bigger->w[(size_t)index * width];
        /* Another thread of the shared shard grew it first (a is now its
         * array): use that one if it is big enough, else chain ours on it. */
        if (a->cap > index) {
            mem_free(bigger);
            return &a->w[(size_t)index * width];
        }
    }
}

void stats_record_execution(struct stats_model *s, const struct stats_execution *ex,
                            uint64_t input_ns, uint64_t infer_ns, uint64_t output_ns)
{
    int shard;
    struct stats_slot *slot = s ? slot_get(s, &shard) : NULL;
    if (!slot)
        return;
    uint32_t batch_size = ex->batch_size;
    metrics_add(&slot->execution_count, 1, shard);
    if (ex->inline_run)
        metrics_add(&slot->inline_executions, 1, shard);
    metrics_add(&slot->input_elements, ex->elements > 0 ? (uint64_t)ex->elements : 0, shard);
    metrics_add(&slot->padding_elements, ex->padding > 0 ? (uint64_t)ex->padding : 0, shard);
    metrics_hist_observe(&slot->batch_hist, &stats_batch_buckets, batch_size, shard);
    if (batch_size == 0)
        return;
    _Atomic uint64_t *e =
        index_entry_get(&slot->batches, batch_size - 1, STATS_MAX_BATCH_SIZE, BATCH_WIDTH);
    if (!e)
        return;
    metrics_add(&e[BATCH_COUNT], 1, shard);
    metrics_add(&e[BATCH_INPUT_NS], input_ns, shard);
    metrics_add(&e[BATCH_INFER_NS], infer_ns, shard);
    metrics_add(&e[BATCH_OUTPUT_NS], output_ns, shard);
}

void stats_record_route(struct stats_model *s, enum route_kind route)
{
    int shard;
    struct stats_slot *slot = s ? slot_get(s, &shard) : NULL;
    if (slot && (unsigned)route < ROUTE_KINDS)
        metrics_add(&slot->routed[route], 1, shard);
}

void stats_record_queue_refusal(struct stats_model *s, enum stats_queue_refusal why)
{
    int shard;
    struct stats_slot *slot = s ? slot_get(s, &shard) : NULL;
    if (slot && (unsigned)why < STATS_QUEUE_REFUSALS)
        metrics_add(&slot->queue_refusals[why], 1, shard);
}

void stats_record_response(struct stats_model *s, uint32_t index,
                           enum stats_response_outcome outcome, uint64_t infer_ns,
                           uint64_t output_ns)
{
    int shard;
    struct stats_slot *slot = s ? slot_get(s, &shard) : NULL;
    _Atomic uint64_t *e =
        slot ? index_entry_get(&slot->responses, index, STATS_MAX_RESPONSES, RESP_WIDTH) : NULL;
    if (!e)
        return;
    /* Pairs: 0 compute_infer, 1 compute_output, 2 success, 3 fail,
     * 4 empty_response, 5 cancel (Triton's semantics, see stats.h). */
    uint32_t pair;
    uint64_t ns;
    switch (outcome) {
    case STATS_RESPONSE_SUCCESS:
    case STATS_RESPONSE_FAIL:
        metrics_add(&e[0], 1, shard);
        metrics_add(&e[1], infer_ns, shard);
        metrics_add(&e[2], 1, shard);
        metrics_add(&e[3], output_ns, shard);
        pair = outcome == STATS_RESPONSE_SUCCESS ? 2 : 3;
        ns = infer_ns + output_ns;
        break;
    case STATS_RESPONSE_EMPTY:
        metrics_add(&e[0], 1, shard);
        metrics_add(&e[1], infer_ns, shard);
        pair = 4;
        ns = infer_ns;
        break;
    default:
        pair = 5;
        ns = infer_ns;
        break;
    }
    metrics_add(&e[2 * pair], 1, shard);
    metrics_add(&e[2 * pair + 1], ns, shard);
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t span(uint64_t from, uint64_t to)
{
    return from && to > from ? to - from : 0;
}

static void record_failure(struct stats_model *s, enum stats_fail_reason reason,
                           uint64_t duration_ns)
{
    int shard;
    struct stats_slot *slot = s ? slot_get(s, &shard) : NULL;
    if (!slot)
        return;
    metrics_add(&slot->fail_count[reason], 1, shard);
    metrics_add(&slot->fail_ns[reason], duration_ns, shard);
    metrics_hist_observe(&slot->request_hist, &stats_duration_buckets, duration_ns, shard);
    atomic_store_explicit(&slot->last_inference_ms, wall_ms(), memory_order_relaxed);
}

void stats_record_completion(struct stats_model *s, const struct infer_request *req,
                             bool canceled, uint64_t received_ns, uint64_t now_ns)
{
    uint64_t duration = span(received_ns, now_ns);
    if (canceled || (req->rc != 0 && req->err.status == 499))
        return record_failure(s, STATS_FAIL_CANCELED, duration);
    if (req->rc != 0) {
        enum stats_fail_reason reason = STATS_FAIL_OTHER;
        if (req->exec_start_ns)
            reason = STATS_FAIL_BACKEND;
        else if (req->err.status == 504)
            reason = STATS_FAIL_REJECTED;
        return record_failure(s, reason, duration);
    }
    int shard;
    struct stats_slot *slot = s ? slot_get(s, &shard) : NULL;
    if (!slot)
        return;
    uint64_t queue = span(req->enqueue_ns, req->exec_start_ns);
    metrics_add(&slot->success_count, 1, shard);
    metrics_add(&slot->success_ns, duration, shard);
    metrics_add(&slot->queue_ns, queue, shard);
    metrics_add(&slot->input_ns, span(req->exec_start_ns, req->infer_start_ns), shard);
    metrics_add(&slot->infer_ns, span(req->infer_start_ns, req->infer_end_ns), shard);
    metrics_add(&slot->output_ns, span(req->infer_end_ns, req->exec_end_ns), shard);
    metrics_add(&slot->inference_count, req->batch > 0 ? (uint64_t)req->batch : 0, shard);
    metrics_hist_observe(&slot->request_hist, &stats_duration_buckets, duration, shard);
    metrics_hist_observe(&slot->queue_hist, &stats_duration_buckets, queue, shard);
    metrics_hist_observe(&slot->compute_hist, &stats_duration_buckets,
                         span(req->exec_start_ns, req->exec_end_ns), shard);
    atomic_store_explicit(&slot->last_inference_ms, wall_ms(), memory_order_relaxed);
}

void stats_record_refused(struct stats_model *s, int status, uint64_t received_ns,
                          uint64_t now_ns)
{
    enum stats_fail_reason reason =
        status == 429 || status == 503 ? STATS_FAIL_REJECTED : STATS_FAIL_OTHER;
    record_failure(s, reason, span(received_ns, now_ns));
}

/* ---- reading ------------------------------------------------------------ */

static void add_duration(struct stats_duration *d, uint64_t count, uint64_t ns)
{
    d->count += count;
    d->ns += ns;
}

/* The per-index array at `offset` of shard i's slot, or NULL. */
static const struct index_array *shard_array(const struct stats_model *s, int i, size_t offset)
{
    const struct stats_slot *slot = atomic_load_explicit(&s->slots[i], memory_order_acquire);
    return slot ? atomic_load_explicit(
                      (_Atomic(struct index_array *) *)((const char *)slot + offset),
                      memory_order_acquire)
                : NULL;
}

/* Sums the index arrays at `offset` in every slot of s (every chain) into
 * one array of entries of `width` words: returns the number of entries
 * (the largest capacity) with *out allocated (free with mem_free), or 0
 * with *out NULL when there is nothing; *out is NULL with a non-zero
 * return when out of memory. */
static uint32_t sum_indexed(const struct stats_model *s, size_t offset, uint32_t width,
                            uint64_t **out)
{
    *out = NULL;
    uint32_t cap = 0;
    for (int i = 0; i < METRICS_NSHARDS; i++) {
        const struct index_array *a = shard_array(s, i, offset);
        if (a && a->cap > cap)
            cap = a->cap;
    }
    if (!cap || !(*out = mem_calloc((size_t)cap * width, sizeof **out)))
        return cap;
    for (int i = 0; i < METRICS_NSHARDS; i++) {
        const struct index_array *a = shard_array(s, i, offset);
        for (; a; a = a->older)
            for (size_t k = 0; k < (size_t)a->cap * width; k++)
                (*out)[k] += metrics_load(&a->w[k]);
    }
    return cap;
}

int stats_version_read(const struct stats_model *s, struct stats_version *out)
{
    memset(out, 0, sizeof *out);
    out->name = mem_strdup(s->name);
    if (!out->name)
        return -ENOMEM;
    snprintf(out->version, sizeof out->version, "%s", s->version);
    for (int i = 0; i < METRICS_NSHARDS; i++) {
        const struct stats_slot *slot = atomic_load_explicit(&s->slots[i], memory_order_acquire);
        if (!slot)
            continue;
        uint64_t n = metrics_load(&slot->success_count);
        add_duration(&out->success, n, metrics_load(&slot->success_ns));
        add_duration(&out->queue, n, metrics_load(&slot->queue_ns));
        add_duration(&out->compute_input, n, metrics_load(&slot->input_ns));
        add_duration(&out->compute_infer, n, metrics_load(&slot->infer_ns));
        add_duration(&out->compute_output, n, metrics_load(&slot->output_ns));
        for (int r = 0; r < STATS_FAIL_REASONS; r++) {
            uint64_t fc = metrics_load(&slot->fail_count[r]), fns = metrics_load(&slot->fail_ns[r]);
            add_duration(&out->fail_by_reason[r], fc, fns);
            add_duration(&out->fail, fc, fns);
        }
        out->inference_count += metrics_load(&slot->inference_count);
        out->execution_count += metrics_load(&slot->execution_count);
        out->inline_executions += metrics_load(&slot->inline_executions);
        out->input_elements += metrics_load(&slot->input_elements);
        out->padding_elements += metrics_load(&slot->padding_elements);
        for (int k = 0; k < ROUTE_KINDS; k++)
            out->routed[k] += metrics_load(&slot->routed[k]);
        for (int k = 0; k < STATS_QUEUE_REFUSALS; k++)
            out->queue_refusals[k] += metrics_load(&slot->queue_refusals[k]);
        uint64_t last = metrics_load(&slot->last_inference_ms);
        if (last > out->last_inference_ms)
            out->last_inference_ms = last;
        metrics_hist_accumulate(&out->request_hist, &slot->request_hist);
        metrics_hist_accumulate(&out->queue_hist, &slot->queue_hist);
        metrics_hist_accumulate(&out->compute_hist, &slot->compute_hist);
        metrics_hist_accumulate(&out->batch_hist, &slot->batch_hist);
    }
    uint64_t *batch_words, *resp_words;
    uint32_t nbatch =
        sum_indexed(s, offsetof(struct stats_slot, batches), BATCH_WIDTH, &batch_words);
    uint32_t nresp =
        sum_indexed(s, offsetof(struct stats_slot, responses), RESP_WIDTH, &resp_words);
    if ((nbatch && !batch_words) || (nresp && !resp_words))
        goto out_of_memory;
    /* Keep the batch sizes that ran and the response indexes that counted. */
    if (nbatch && !(out->batches = mem_calloc(nbatch, sizeof *out->batches)))
        goto out_of_memory;
    for (uint32_t k = 0; k < nbatch; k++) {
        const uint64_t *e = &batch_words[(size_t)k * BATCH_WIDTH];
        uint64_t n = e[BATCH_COUNT];
        if (!n)
            continue;
        struct stats_batch *b = &out->batches[out->nbatches++];
        b->batch_size = k + 1;
        add_duration(&b->compute_input, n, e[BATCH_INPUT_NS]);
        add_duration(&b->compute_infer, n, e[BATCH_INFER_NS]);
        add_duration(&b->compute_output, n, e[BATCH_OUTPUT_NS]);
    }
    if (nresp && !(out->responses = mem_calloc(nresp, sizeof *out->responses)))
        goto out_of_memory;
    for (uint32_t k = 0; k < nresp; k++) {
        const uint64_t *e = &resp_words[(size_t)k * RESP_WIDTH];
        bool any = false;
        for (uint32_t p = 0; p < RESP_PAIRS; p++)
            any |= e[2 * p] != 0;
        if (!any)
            continue;
        struct stats_response *r = &out->responses[out->nresponses++];
        struct stats_duration *pairs[RESP_PAIRS] = {&r->compute_infer,  &r->compute_output,
                                                    &r->success,        &r->fail,
                                                    &r->empty_response, &r->cancel};
        r->index = k;
        for (uint32_t p = 0; p < RESP_PAIRS; p++)
            add_duration(pairs[p], e[2 * p], e[2 * p + 1]);
    }
    mem_free(batch_words);
    mem_free(resp_words);
    return 0;
out_of_memory:
    mem_free(batch_words);
    mem_free(resp_words);
    stats_version_free(out);
    memset(out, 0, sizeof *out);
    return -ENOMEM;
}

void stats_version_free(struct stats_version *v)
{
    mem_free(v->name);
    v->name = NULL;
    mem_free(v->batches);
    v->batches = NULL;
    v->nbatches = 0;
    mem_free(v->responses);
    v->responses = NULL;
    v->nresponses = 0;
}

void stats_report_free(struct stats_report *r)
{
    for (uint32_t i = 0; i < r->count; i++)
        stats_version_free(&r->versions[i]);
    mem_free(r->versions);
    r->versions = NULL;
    r->count = 0;
}

/* Appends the statistics of every loaded version of e. */
static int report_entry(const struct model_entry *e, const char *version,
                        struct stats_report *out, struct error *err)
{
    for (uint32_t i = 0; i < e->nversions; i++) {
        const struct model *m = e->versions[i];
        if (version && strcmp(m->version_str, version) != 0)
            continue;
        struct stats_model *s = stats_model_find(m->name, m->version);
        if (!s || stats_version_read(s, &out->versions[out->count]) != 0)
            return error_set(err, 503, "out of memory reading statistics");
        out->versions[out->count].memory_bytes = m->memory_bytes;
        out->count++;
    }
    return 0;
}

int stats_report_build(struct repository *repo, const char *model, size_t model_len,
                       const char *version, struct stats_report *out, struct error *err)
{
    out->versions = NULL;
    out->count = 0;
    int rc = ST_ERROR;
    struct model_snapshot *snap = repository_acquire(repo);
    const struct model_entry *one = NULL;
    uint32_t capacity = 0;
    if (model) {
        if (!model_lookup(snap, model, model_len, version, &one, err))
            goto out;
        capacity = one->nversions;
    } else {
        for (uint32_t i = 0; i < snap->count; i++)
            capacity += snap->entries[i].nversions;
    }
    if (capacity) {
        out->versions = mem_calloc(capacity, sizeof *out->versions);
        if (!out->versions) {
            error_set(err, 503, "out of memory reading statistics");
            goto out;
        }
    }
    if (one) {
        if (report_entry(one, version, out, err) != 0)
            goto out;
    } else {
        for (uint32_t i = 0; i < snap->count; i++)
            if (report_entry(&snap->entries[i], NULL, out, err) != 0)
                goto out;
    }
    rc = 0;
out:
    repository_release(repo, snap);
    if (rc)
        stats_report_free(out);
    return rc;
}
