#include "sched/sched_int.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/probe.h"
#include "base/status.h"
#include "sched/pool.h"

/* Batch objects per instance made at start (the pool rarely grows after). */
#define BATCHES_PER_INSTANCE 4
/* How far into the queue the batcher looks for compatible requests. */
#define SCAN_LIMIT 4096

void sched_ref(struct sched *s)
{
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

static void sched_free(struct sched *s)
{
    /* The model may be gone (a pool's timer can hold the last reference):
     * nothing here reads s->model. */
    for (uint32_t i = 0; s->slots && i < s->nslots; i++)
        slot_free(&s->slots[i], s->ninputs);
    mem_free(s->slots);
    batch_pool_free(s);
    pthread_cond_destroy(&s->drained);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->batches_lock);
    mem_free(s);
}

void sched_unref(struct sched *s)
{
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        sched_free(s);
}

/* ---- the queue ------------------------------------------------------------ */

/* The level background requests queue at, after every priority level. */
#define BACKGROUND_LEVEL SCHED_MAX_LEVELS
/* Background batches gather this long before a worker is woken for them:
 * one wake-up per period, not one per request (their latency does not
 * matter; the waker's does). */
#define BACKGROUND_GATHER_NS 2000000u

static const struct sched_queue_policy *policy_of(const struct sched *s, uint32_t level)
{
    static const struct sched_queue_policy background = {0};
    return level == BACKGROUND_LEVEL ? &background : &s->cfg.levels[level];
}

/* Whether a goes before b: level, then not delayed, then the earlier
 * deadline (none = last); equal keys keep arrival order. */
static bool goes_before(const struct infer_request *a, const struct infer_request *b)
{
    if (a->_level != b->_level)
        return a->_level < b->_level;
    if (a->_delayed != b->_delayed)
        return !a->_delayed;
    if (a->_deadline_ns == b->_deadline_ns || !a->_deadline_ns)
        return false;
    return !b->_deadline_ns || a->_deadline_ns < b->_deadline_ns;
}

/* The queue's length changed (lock held): sched_queue_full's answer. The
 * queue is in level order, so its tail is of its lowest level: a request
 * of the highest level (0) could shed it unless it is of level 0 too. */
static void note_full(struct sched *s)
{
    bool full = s->queued >= s->cfg.max_queue_size && (!s->tail || s->tail->_level == 0);
    atomic_store_explicit(&s->full, full, memory_order_relaxed);
}

/* Where a request was queued: what goes before it. */
struct place {
    uint32_t requests;
    int64_t samples;
};

/* Inserts r at its place (lock held), searching from the tail: in the
 * common case (one level, one timeout or none) that is the tail. Returns
 * what queued requests go before it. */
static struct place insert(struct sched *s, struct infer_request *r)
{
    struct infer_request *prev = NULL;
    uint32_t behind = 0;
    int64_t behind_samples = 0;
    if (s->tail && goes_before(r, s->tail)) {
        /* A singly linked list: walk from the head to the last request
         * that stays before r. */
        for (struct infer_request *q = s->head; q && !goes_before(r, q); q = q->next)
            prev = q;
        for (struct infer_request *q = prev ? prev->next : s->head; q; q = q->next) {
            behind++;
            behind_samples += q->batch;
        }
    } else {
        prev = s->tail;
    }
    r->next = prev ? prev->next : s->head;
    if (prev)
        prev->next = r;
    else
        s->head = r;
    if (!r->next)
        s->tail = r;
    s->queued++;
    s->queued_samples += r->batch;
    s->level_queued[r->_level]++;
    if (r->_level == BACKGROUND_LEVEL)
        atomic_store_explicit(&s->background_waiting, s->level_queued[BACKGROUND_LEVEL],
                              memory_order_relaxed);
    note_full(s);
    return (struct place){.requests = s->queued - 1 - behind,
                          .samples = s->queued_samples - r->batch - behind_samples};
}

static void unlink_req(struct sched *s, struct infer_request *prev, struct infer_request *r)
{
    if (prev)
        prev->next = r->next;
    else
        s->head = r->next;
    if (s->tail == r)
        s->tail = prev;
    r->next = NULL;
    s->queued--;
    s->queued_samples -= r->batch;
    s->level_queued[r->_level]--;
    if (r->_level == BACKGROUND_LEVEL)
        atomic_store_explicit(&s->background_waiting, s->level_queued[BACKGROUND_LEVEL],
                              memory_order_relaxed);
    note_full(s);
}

/* The last queued request when its level is lower than `level` (a
 * larger number; background is the lowest), taken out of the queue; NULL
 * otherwise (lock held). The queue is in level order, so the tail is of
 * its lowest level. */
static struct infer_request *take_lower_tail(struct sched *s, uint32_t level)
{
    struct infer_request *tail = s->tail;
    if (!tail || tail->_level <= level)
        return NULL;
    struct infer_request *prev = NULL;
    for (struct infer_request *q = s->head; q != tail; q = q->next)
        prev = q;
    unlink_req(s, prev, tail);
    return tail;
}

static void fail_request(struct infer_request *r, int status, const char *msg)
{
    r->rc = error_set(&r->err, status, "%s", msg);
    r->outputs = NULL;
    r->batch_ref = NULL;
    r->complete(r);
}

/* Takes out of the queue the requests whose timeout passed (REJECT) and
 * those their client cancelled, into *late, to be answered outside the
 * lock; requests whose timeout passed under DELAY move behind their level
 * (lock held). */
static void collect_expired(struct sched *s, uint64_t now, struct infer_request **late)
{
    struct infer_request *prev = NULL, *r = s->head, *delayed = NULL;
    uint32_t scanned = 0;
    while (r && scanned++ < SCAN_LIMIT) {
        struct infer_request *next = r->next;
        bool cancelled = atomic_load_explicit(&r->cancelled, memory_order_relaxed);
        bool expired = r->_deadline_ns && now >= r->_deadline_ns;
        if (cancelled || expired) {
            unlink_req(s, prev, r);
            if (!cancelled && policy_of(s, r->_level)->delay) {
                r->_delayed = true;
                r->_deadline_ns = 0;
                r->next = delayed;
                delayed = r;
            } else {
                r->next = *late;
                *late = r;
            }
        } else {
            prev = r;
        }
        r = next;
    }
    while (delayed) {
        struct infer_request *next = delayed->next;
        insert(s, delayed);
        delayed = next;
    }
}

static void answer_late(struct infer_request *late, uint64_t now)
{
    while (late) {
        struct infer_request *next = late->next;
        late->next = NULL;
        if (atomic_load_explicit(&late->cancelled, memory_order_relaxed)) {
            fail_request(late, 499, "request cancelled by the client");
        } else {
            char msg[96];
            snprintf(msg, sizeof msg, "request timed out after waiting %llu us in the queue",
                     (unsigned long long)((now - late->enqueue_ns) / 1000u));
            fail_request(late, 504, msg);
        }
        late = next;
    }
}

/* ---- forming batches -------------------------------------------------------- */

static bool is_preferred(const struct sched_config *c, uint64_t samples)
{
    for (uint32_t i = 0; i < c->npreferred; i++)
        if (samples == c->preferred_batch_sizes[i])
            return true;
    return false;
}

/* Requests a batch may hold: max_batch_size (each request has >= 1 sample,
 * or 0 samples: bound those by the same number), 1 without batching. */
static uint32_t batch_capacity(const struct sched_config *c)
{
    return c->max_batch_size > 1 && c->dynamic_batching ? c->max_batch_size : 1;
}

/* Elements of r's inputs. */
static int64_t real_elements(const struct infer_request *r)
{
    int64_t n = 0;
    for (uint32_t i = 0; i < r->ninputs; i++)
        n += tensor_count(&r->inputs[i], INT64_MAX);
    return n;
}

/* The padding state of a batch being formed on a slot. */
struct padstate {
    int64_t samples, real; /* members' samples and input elements */
};

/* Elements of the batch's inputs once padded to dims (per input, dims
 * from 1), for `samples` samples. */
static int64_t padded_elements(const struct infer_request *first, int64_t (*dims)[TENSOR_MAX_DIMS],
                               int64_t samples)
{
    int64_t n = 0;
    for (uint32_t i = 0; i < first->ninputs; i++) {
        int64_t row = 1;
        for (uint32_t d = 1; d < first->inputs[i].ndim; d++)
            row *= dims[i][d];
        n += row * samples;
    }
    return n;
}

/* Whether r joins the padded batch on sl within the budget; if so, grows
 * the batch's padded dims and state. */
static bool pad_joins(const struct sched *s, struct slot *sl, const struct infer_request *first,
                      const struct infer_request *r, struct padstate *ps)
{
    int64_t (*dims)[TENSOR_MAX_DIMS] = sl->trial;
    for (uint32_t i = 0; i < first->ninputs; i++)
        for (uint32_t d = 1; d < first->inputs[i].ndim; d++)
            dims[i][d] = r->inputs[i].shape[d] > sl->padded[i][d] ? r->inputs[i].shape[d]
                                                                    : sl->padded[i][d];
    int64_t samples = ps->samples + r->batch, real = ps->real + real_elements(r);
    int64_t padded = padded_elements(first, dims, samples);
    if ((double)(padded - real) > s->cfg.padding_budget * (double)padded)
        return false;
    for (uint32_t i = 0; i < first->ninputs; i++)
        for (uint32_t d = 1; d < first->inputs[i].ndim; d++)
            sl->padded[i][d] = dims[i][d];
    ps->samples = samples;
    ps->real = real;
    return true;
}

/* Decides the next batch (lock held; the slot is leased). Returns the
 * number of requests placed in sl->members, still queued (take_batch
 * takes them), and their samples in *samples; 0 = nothing to run: the
 * batch waits until *wait_until_ns, or for a new request if that is 0.
 *
 * The candidates are the head of the queue and, in queue order, every
 * later request compatible with it that still fits within max_batch_size
 * (a request is never split; one that does not fit is passed over, and
 * the batch then counts as full) and within the padding budget. Among the
 * prefixes of that sequence the batch is the longest whose samples are a
 * preferred size, dispatched at once. Without one, all the candidates go
 * when the batch is full or the head has waited max_queue_delay. */
static uint32_t plan_batch(struct sched *s, struct slot *sl, uint64_t now, uint64_t *wait_until_ns,
                           int64_t *samples_out, bool background)
{
    *wait_until_ns = 0;
    struct infer_request *first = s->head;
    const struct sched_config *c = &s->cfg;
    sl->n = 0;
    sl->exploring = false;
    /* Background requests queue last: a background head means nothing
     * else waits. Each kind of worker starts only its own kind of batch. */
    if (!first || first->background != background)
        return 0;
    for (uint32_t i = 0; i < first->ninputs; i++)
        memcpy(sl->padded[i], first->inputs[i].shape, sizeof sl->padded[i]);
    *samples_out = first->batch;
    sl->members[0] = first;
    if (!c->dynamic_batching || c->max_batch_size == 0 || (uint64_t)first->batch >= c->max_batch_size)
        return sl->n = 1;
    bool pad = c->padding_budget > 0;
    struct padstate ps = {.samples = first->batch, .real = pad ? real_elements(first) : 0};
    uint64_t samples = (uint64_t)first->batch;
    uint32_t n = 1, scanned = 0;
    uint32_t preferred_n = is_preferred(c, samples) ? 1 : 0;
    bool full = false;
    for (struct infer_request *r = first->next;
         r && scanned < SCAN_LIMIT && samples < c->max_batch_size && n < sl->capacity;
         r = r->next, scanned++) {
        if (!batch_compatible(s, first, r))
            continue;
        if (samples + (uint64_t)r->batch > c->max_batch_size) {
            full = true;
            continue;
        }
        if (pad && !pad_joins(s, sl, first, r, &ps))
            continue;
        samples += (uint64_t)r->batch;
        sl->members[n++] = r;
        if (is_preferred(c, samples))
            preferred_n = n;
    }
    full = full || samples == c->max_batch_size || n == sl->capacity;
    /* Without configured preferred sizes, the learned one (or a size class
     * being explored) caps the batch; a batch that reaches it goes at once,
     * with the longest run of candidates within it. */
    uint32_t capped = 0;
    if (s->prefer_learned) {
        uint32_t cap = learn_cap(&s->learn, first->batch, full, &sl->exploring);
        if (cap && samples >= cap) {
            uint64_t within = 0;
            while (capped < n && within + (uint64_t)sl->members[capped]->batch <= cap)
                within += (uint64_t)sl->members[capped++]->batch;
            if (!capped) /* the first request alone is larger */
                capped = 1;
        }
    }
    uint64_t deadline = first->enqueue_ns + c->max_queue_delay_us * 1000u;
    if (!preferred_n && !capped && !full && now < deadline && !s->stopping) {
        *wait_until_ns = deadline;
        return 0;
    }
    uint32_t take = capped ? capped : preferred_n ? preferred_n : n;
    if (pad && take < n) {
        /* The padded dims were grown by members left out: recompute. */
        for (uint32_t i = 0; i < first->ninputs; i++)
            memcpy(sl->padded[i], first->inputs[i].shape, sizeof sl->padded[i]);
        for (uint32_t j = 1; j < take; j++)
            for (uint32_t i = 0; i < first->ninputs; i++)
                for (uint32_t d = 1; d < first->inputs[i].ndim; d++)
                    if (sl->members[j]->inputs[i].shape[d] > sl->padded[i][d])
                        sl->padded[i][d] = sl->members[j]->inputs[i].shape[d];
    }
    *samples_out = 0;
    for (uint32_t j = 0; j < take; j++)
        *samples_out += sl->members[j]->batch;
    return sl->n = take;
}

/* Takes the planned batch's members out of the queue (lock held). */
static void take_batch(struct sched *s, struct slot *sl)
{
    if (sl->exploring) /* planned by another thread too, perhaps: counted once it runs */
        learn_explored(&s->learn);
    for (uint32_t j = 0; j < sl->n; j++)
        sl->members[j]->_picked = true;
    uint32_t left = sl->n;
    struct infer_request *prev = NULL, *r = s->head;
    while (r && left) {
        struct infer_request *next = r->next;
        if (r->_picked) {
            r->_picked = false;
            unlink_req(s, prev, r);
            left--;
        } else {
            prev = r;
        }
        r = next;
    }
}

/* ---- running -------------------------------------------------------------- */

/* The estimated run time of a batch of `samples`: its size class's
 * typical time per sample once learned, else the moving estimate, scaled
 * up for a batch larger than the recent ones. */
static uint64_t predict_ns(const struct sched *s, int64_t samples)
{
    if (!s->est_ns)
        return UINT64_MAX;
    uint64_t learned = s->learning ? learn_predict_ns(&s->learn, samples) : 0;
    if (learned)
        return learned;
    double typical = (double)s->est_samples_x256 / 256.0;
    if (typical <= 0 || (double)samples <= typical)
        return s->est_ns;
    return (uint64_t)((double)s->est_ns * (double)samples / typical);
}

/* Leases a free slot (lock held; there is one). */
static struct slot *slot_lease(struct sched *s)
{
    struct slot *sl = s->free_slots;
    s->free_slots = sl->next_free;
    s->nfree--;
    sl->leased = true;
    return sl;
}

static void slot_return(struct sched *s, struct slot *sl)
{
    sl->leased = false;
    sl->next_free = s->free_slots;
    s->free_slots = sl;
    s->nfree++;
}

/* After a run (already in the estimate: sched_note_run): the slot back. */
static void give_back(struct sched *s, struct slot *sl)
{
    slot_return(s, sl);
    if (s->stopping)
        pthread_cond_broadcast(&s->drained);
}

static void post_background(struct sched *s)
{
    pool_wake_at(s->bg_pool, &s->bg_job, clock_now_ns() + BACKGROUND_GATHER_NS);
}

/* Puts the queue's head before the workers of its kind (lock held). */
static void post_head(struct sched *s)
{
    if (!s->head)
        return;
    if (s->head->background)
        post_background(s);
    else
        pool_post(s->pool, &s->job);
}

/* sched_work, for client requests (background false: an I/O thread, or a
 * worker of the pool) or for background requests (a worker of bg_pool). */
static void work(struct sched *s, struct sched_local *here, bool background)
{
    pthread_mutex_lock(&s->lock);
    for (;;) {
        uint64_t now = clock_now_ns();
        struct infer_request *late = NULL;
        collect_expired(s, now, &late);
        struct slot *sl = s->head && s->free_slots ? slot_lease(s) : NULL;
        uint64_t until = 0;
        uint32_t n = 0;
        int64_t samples = 0;
        if (sl) {
            n = plan_batch(s, sl, now, &until, &samples, background);
            /* An I/O thread runs only what fits its budget. */
            bool handoff = n && here &&
                           (s->cfg.decoupled || predict_ns(s, samples) > local_budget_ns(here));
            if (!n || handoff)
                slot_return(s, sl);
            if (handoff) {
                pthread_mutex_unlock(&s->lock);
                answer_late(late, now);
                pool_post(s->pool, &s->job);
                return;
            }
            if (n)
                take_batch(s, sl);
        }
        if (!n) {
            /* The head is the other kind's: its workers take it on. */
            if (sl && !until)
                post_head(s);
            if (s->stopping)
                pthread_cond_broadcast(&s->drained);
            pthread_mutex_unlock(&s->lock);
            answer_late(late, now);
            if (until && here)
                local_add(here, s->pool, &s->job, until);
            else if (until)
                pool_wake_at(background ? s->bg_pool : s->pool, background ? &s->bg_job : &s->job,
                             until);
            return;
        }
        /* More to run than this thread takes now: another thread may run
         * it on another instance meanwhile. */
        bool more = s->head && s->free_slots;
        if (more && !here)
            post_head(s);
        sl->started_ns = now;
        sl->samples = samples;
        pthread_mutex_unlock(&s->lock);
        answer_late(late, now);
        if (s->cfg.decoupled)
            run_decoupled(s, sl);
        else
            run_batch(s, sl, here != NULL);
        pthread_mutex_lock(&s->lock);
        give_back(s, sl);
        if (here) {
            /* One batch per model per loop pass: the rest at the end of
             * the next pass (the connections get their turn first). */
            bool again = s->head && !s->head->background;
            if (s->head && !again)
                post_background(s);
            pthread_mutex_unlock(&s->lock);
            if (again)
                local_add(here, s->pool, &s->job, 0);
            return;
        }
    }
}

/* Runs what s has ready on the calling thread: `here` is its I/O-thread
 * context (at most one batch, and only if the model may run inline), or
 * NULL on a pool worker (batches until none is ready). Sets timers for a
 * batch that waits to fill. */
static void sched_work(struct sched *s, struct sched_local *here)
{
    work(s, here, false);
}

static void job_run(struct pool_job *j)
{
    sched_work((struct sched *)((char *)j - offsetof(struct sched, job)), NULL);
}

static void job_run_local(struct pool_job *j, struct sched_local *here)
{
    sched_work((struct sched *)((char *)j - offsetof(struct sched, job)), here);
}

static void job_hold(struct pool_job *j)
{
    sched_ref((struct sched *)((char *)j - offsetof(struct sched, job)));
}

static void job_drop(struct pool_job *j)
{
    sched_unref((struct sched *)((char *)j - offsetof(struct sched, job)));
}

static void bg_job_run(struct pool_job *j)
{
    work((struct sched *)((char *)j - offsetof(struct sched, bg_job)), NULL, true);
}

static void bg_job_hold(struct pool_job *j)
{
    sched_ref((struct sched *)((char *)j - offsetof(struct sched, bg_job)));
}

static void bg_job_drop(struct pool_job *j)
{
    sched_unref((struct sched *)((char *)j - offsetof(struct sched, bg_job)));
}

/* ---- the public interface ------------------------------------------------- */

/* The queue timeout of r at its level (see sched.h), in microseconds. */
static uint64_t queue_timeout_us(const struct sched_queue_policy *p, uint64_t requested_us)
{
    if (!p->default_timeout_us)
        return requested_us;
    if (p->allow_timeout_override && requested_us && requested_us < p->default_timeout_us)
        return requested_us;
    return p->default_timeout_us;
}

/* Samples of the batches the batcher forms from a deep queue: the largest
 * preferred size (config.pbtxt's, else the learned one), else
 * max_batch_size. */
static int64_t deep_batch_samples(const struct sched *s)
{
    const struct sched_config *c = &s->cfg;
    uint32_t best = 0;
    for (uint32_t i = 0; i < c->npreferred; i++)
        if (c->preferred_batch_sizes[i] > best)
            best = c->preferred_batch_sizes[i];
    if (!best && s->prefer_learned)
        best = s->learn.preferred;
    return best ? best : c->max_batch_size;
}

/* The estimated run of one batch of a deep queue (lock held; s->est_ns
 * known): one round of the queue on an instance. */
static uint64_t round_ns(const struct sched *s)
{
    return batch_capacity(&s->cfg) > 1 ? predict_ns(s, deep_batch_samples(s)) : s->est_ns;
}

/* The estimated time until a request queued behind `ahead` starts (lock
 * held; s->est_ns known): the batches running now finish (each after its
 * own estimated run), then the batches formed from the requests ahead of
 * it take the instances round by round; it rides in the batch after them.
 * With batching those are full batches (`ahead` is deep enough to fill
 * them: the newcomer is behind), without it one per request. */
static uint64_t estimated_wait_ns(const struct sched *s, struct place ahead, uint64_t now)
{
    uint64_t batches = batch_capacity(&s->cfg) > 1
                           ? (uint64_t)(ahead.samples / deep_batch_samples(s))
                           : ahead.requests;
    if (batches < s->nfree)
        return 0;
    uint64_t round = round_ns(s), first_free = round;
    for (uint32_t i = 0; i < s->nslots; i++) {
        const struct slot *sl = &s->slots[i];
        if (!sl->leased)
            continue;
        uint64_t elapsed = now - sl->started_ns, run = predict_ns(s, sl->samples);
        uint64_t left = elapsed < run ? run - elapsed : 0;
        if (left < first_free)
            first_free = left;
    }
    return first_free + (batches - s->nfree) / s->nslots * round;
}

/* The queue budget in force (lock held): the configured one, or the
 * automatic one from the estimated run time of the batches a deep queue
 * forms; 0 = none (yet). */
static uint64_t queue_budget_ns(const struct sched *s)
{
    uint64_t b = s->cfg.queue_budget_us;
    if (b != SCHED_QUEUE_BUDGET_AUTO)
        return b * 1000u;
    if (!s->est_ns)
        return 0;
    uint64_t round = round_ns(s), floor = (uint64_t)SCHED_QUEUE_BUDGET_FLOOR_US * 1000u;
    return round > floor / SCHED_QUEUE_BUDGET_BATCHES ? round * SCHED_QUEUE_BUDGET_BATCHES : floor;
}

/* A refusal of sched_submit (err set, lock released): told to the
 * observer. */
static int refused(struct sched *s, enum sched_refusal why)
{
    if (s->cfg.observer.on_refuse)
        s->cfg.observer.on_refuse(s->cfg.observer.ctx, &s->model, why);
    return ST_ERROR;
}

int sched_submit(struct sched *s, struct infer_request *req, struct sched_local *here,
                 struct error *err)
{
    const struct sched_config *c = &s->cfg;
    if (c->max_batch_size && (uint64_t)req->batch > c->max_batch_size && !c->allow_oversize)
        return error_set(err, 400, "batch of %lld exceeds model '%s' max_batch_size %u",
                         (long long)req->batch, s->model.name, c->max_batch_size);
    uint32_t nlevels = c->nlevels ? c->nlevels : 1;
    req->_level = req->background                              ? BACKGROUND_LEVEL
                  : req->priority && req->priority <= nlevels ? (uint32_t)req->priority - 1
                                                              : c->default_level;
    const struct sched_queue_policy *p = policy_of(s, req->_level);
    bool background = req->background; /* req is not ours once queued */
    if (background)
        here = NULL; /* never inline: an I/O thread's time is for primaries */
    else
        req->timeout_us = queue_timeout_us(p, req->timeout_us);
    req->next = NULL;
    req->batch_ref = NULL;
    req->_delayed = req->_picked = false;
    req->enqueue_ns = clock_now_ns();
    req->_deadline_ns = req->timeout_us ? req->enqueue_ns + req->timeout_us * 1000u : 0;
    pthread_mutex_lock(&s->lock);
    if (s->stopping) {
        pthread_mutex_unlock(&s->lock);
        return error_set(err, 503, "model '%s' is shutting down", s->model.name);
    }
    if (req->background && s->level_queued[BACKGROUND_LEVEL] >= SCHED_BACKGROUND_MAX) {
        pthread_mutex_unlock(&s->lock);
        return error_set(err, 429, "model '%s': %u background requests are waiting",
                         s->model.name, SCHED_BACKGROUND_MAX);
    }
    if (p->max_queue_size && s->level_queued[req->_level] >= p->max_queue_size) {
        pthread_mutex_unlock(&s->lock);
        error_set(err, 429, "model '%s' queue is full (%u requests waiting)", s->model.name,
                  p->max_queue_size);
        return refused(s, SCHED_REFUSED_FULL);
    }
    /* A full queue sheds its last request when that one is of a lower
     * level (background included) than the newcomer. */
    struct infer_request *shed = NULL;
    if (s->queued >= c->max_queue_size && !(shed = take_lower_tail(s, req->_level))) {
        pthread_mutex_unlock(&s->lock);
        error_set(err, 429, "model '%s' queue is full (%u requests waiting)", s->model.name,
                  c->max_queue_size);
        return refused(s, SCHED_REFUSED_FULL);
    }
    struct place ahead = insert(s, req);
    /* Admission: the request's own deadline (REJECT), or the queue budget
     * of a request without one; DELAY requests, background requests and
     * the budget's exempt wait whatever it takes. */
    uint64_t limit_ns = 0;
    enum sched_refusal why = SCHED_REFUSED_DEADLINE;
    if (req->_deadline_ns && !p->delay) {
        limit_ns = req->timeout_us * 1000u;
    } else if (!req->_deadline_ns && !background && !req->budget_exempt) {
        limit_ns = queue_budget_ns(s);
        why = SCHED_REFUSED_BUDGET;
    }
    uint64_t wait = limit_ns && s->est_ns ? estimated_wait_ns(s, ahead, req->enqueue_ns) : 0;
    if (wait > limit_ns) {
        /* Take it out again: it was the last change to the queue. */
        struct infer_request *prev = NULL;
        for (struct infer_request *q = s->head; q != req; q = q->next)
            prev = q;
        unlink_req(s, prev, req);
        if (shed)
            insert(s, shed); /* shed for nothing: it keeps its place */
        pthread_mutex_unlock(&s->lock);
        if (why == SCHED_REFUSED_BUDGET)
            error_set(err, 503,
                      "model '%s' is overloaded: about %llu us of work is queued ahead of this "
                      "request, more than its queue budget of %llu us (a request's own timeout "
                      "replaces the budget)",
                      s->model.name, (unsigned long long)(wait / 1000u),
                      (unsigned long long)(limit_ns / 1000u));
        else
            error_set(err, 503,
                      "model '%s': the request's deadline of %llu us cannot be met (about %llu "
                      "us of work is queued ahead of it)",
                      s->model.name, (unsigned long long)req->timeout_us,
                      (unsigned long long)(wait / 1000u));
        err->retry_after_s = (unsigned)((wait + 999999999u) / 1000000000u);
        return refused(s, why);
    }
    bool slot_free = s->free_slots != NULL;
    INFERD_PROBE_4(queued, s->model.name, s->model.version, ahead.requests, req->_level);
    pthread_mutex_unlock(&s->lock);
    if (shed)
        fail_request(shed, 429, "the queue is full and a request of a higher priority level "
                                "took this one's place");
    /* With every instance leased, the thread that gives one back looks at
     * the queue again. */
    if (slot_free) {
        if (here)
            local_add(here, s->pool, &s->job, 0);
        else if (background)
            post_background(s);
        else
            pool_post(s->pool, &s->job);
    }
    return 0;
}

const struct sched_observer *sched_get_observer(const struct sched *s)
{
    return &s->cfg.observer;
}

bool sched_background_full(const struct sched *s)
{
    return atomic_load_explicit(&s->background_waiting, memory_order_relaxed) >=
           SCHED_BACKGROUND_MAX;
}

bool sched_queue_full(const struct sched *s)
{
    return atomic_load_explicit(&s->full, memory_order_relaxed);
}

uint32_t sched_queue_depth(struct sched *s)
{
    pthread_mutex_lock(&s->lock);
    uint32_t n = s->queued;
    pthread_mutex_unlock(&s->lock);
    return n;
}

bool sched_preferred_batch_size(struct sched *s, uint32_t *size)
{
    if (!s->prefer_learned)
        return false;
    pthread_mutex_lock(&s->lock);
    *size = s->learn.preferred;
    pthread_mutex_unlock(&s->lock);
    return true;
}

uint64_t sched_queue_budget_ns(struct sched *s)
{
    pthread_mutex_lock(&s->lock);
    uint64_t b = queue_budget_ns(s);
    pthread_mutex_unlock(&s->lock);
    return b;
}

int sched_start(const struct sched_model *m, const struct sched_config *cfg, struct sched **out)
{
    struct sched *s = mem_calloc(1, sizeof *s);
    if (!s) {
        if (cfg->observer.on_stop)
            cfg->observer.on_stop(cfg->observer.ctx);
        return -ENOMEM;
    }
    s->model = *m;
    s->ninputs = m->info->ninputs;
    s->cfg = *cfg;
    if (s->cfg.nlevels == 0)
        s->cfg.nlevels = 1;
    if (s->cfg.nlevels > SCHED_MAX_LEVELS)
        s->cfg.nlevels = SCHED_MAX_LEVELS;
    if (s->cfg.default_level >= s->cfg.nlevels)
        s->cfg.default_level = 0;
    s->learning = cfg->max_batch_size > 1 && cfg->dynamic_batching && !cfg->decoupled;
    s->prefer_learned = s->learning && cfg->learn_batch_sizes && !cfg->npreferred;
    if (s->learning)
        learn_init(&s->learn, cfg->max_batch_size);
    atomic_init(&s->refs, 1);
    s->job = (struct pool_job){
        .run = job_run, .run_local = job_run_local, .hold = job_hold, .drop = job_drop};
    s->bg_job = (struct pool_job){.run = bg_job_run, .hold = bg_job_hold, .drop = bg_job_drop};
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->batches_lock, NULL);
    pthread_cond_init(&s->drained, NULL);
    s->slots = mem_calloc(m->ninstances, sizeof *s->slots);
    int rc = s->slots ? 0 : -ENOMEM;
    for (uint32_t i = 0; rc == 0 && i < m->ninstances; i++) {
        rc = slot_init(&s->slots[i], s, m->instances[i]);
        s->nslots = i + 1;
        s->slots[i].next_free = s->free_slots;
        s->free_slots = &s->slots[i];
        s->nfree++;
    }
    if (rc == 0)
        rc = batch_pool_fill(s, m->ninstances * BATCHES_PER_INSTANCE);
    s->pool = m->pool;
    if (rc == 0 && (!s->pool || cfg->decoupled)) {
        rc = sched_pool_start(m->ninstances, cfg->decoupled ? "stream" : "worker", &s->own_pool);
        s->pool = s->own_pool;
    }
    s->bg_pool = m->background_pool ? m->background_pool : s->pool;
    if (rc) {
        if (s->cfg.observer.on_stop)
            s->cfg.observer.on_stop(s->cfg.observer.ctx);
        sched_unref(s);
        return rc;
    }
    *out = s;
    return 0;
}

void sched_stop(struct sched *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    bool queued = s->head != NULL;
    pthread_mutex_unlock(&s->lock);
    if (queued) { /* batches no longer wait to fill */
        pool_post(s->pool, &s->job);
        pool_post(s->bg_pool, &s->bg_job);
    }
    pthread_mutex_lock(&s->lock);
    while (s->head || s->nfree < s->nslots)
        pthread_cond_wait(&s->drained, &s->lock);
    pthread_mutex_unlock(&s->lock);
    sched_pool_stop(s->own_pool);
    s->own_pool = NULL;
    if (s->cfg.observer.on_stop) /* every instance is back: nothing reports any more */
        s->cfg.observer.on_stop(s->cfg.observer.ctx);
    sched_unref(s);
}
