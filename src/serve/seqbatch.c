#include "serve/seqbatch.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/mem.h"
#include "model/version.h"

#define BUCKETS 1024
/* Idle sequences are looked for at most this often (on arrivals and ends). */
#define SWEEP_EVERY_NS 100000000ull

/* One state of a sequence: the last value of its output. */
struct state_buf {
    void *data;
    size_t nbytes, cap;
    uint32_t ndim;
    int64_t shape[TENSOR_MAX_DIMS];
};

struct seq {
    struct seq *next; /* hash chain */
    uint64_t id;      /* numeric id, or 0 with id_str */
    char *id_str;     /* owned */
    uint32_t id_str_len;
    bool linked;      /* in the table: not ended yet */
    bool busy;        /* one of its requests is past the stage and not ended */
    bool have_state;  /* states[] hold a request's outputs (else the initial state) */
    struct infer_call *head, *tail; /* its requests waiting behind the busy one */
    uint64_t idle_since_ns;         /* when its last request ended (not busy) */
    struct state_buf states[];      /* sequence_batching.nstates */
};

struct seqbatch {
    pthread_mutex_t lock;
    struct model *m; /* its version: each linked sequence holds a reference */
    const struct model_sequence_batching *sb; /* the version's configuration */
    /* The state outputs' names as the scheduler knows them: the version's
     * own strings (run_info), which it compares by address. */
    const char **state_outputs;
    uint32_t count;                           /* sequences linked */
    uint64_t last_sweep_ns;
    atomic_uint_fast64_t started, ended, idle_ended, active;
    struct seqbatch *dir_next; /* the directory of live tables */
    struct seq *buckets[BUCKETS];
};

/* Every live table, for the sequences a reload leaves on older versions
 * and for the sweeps of the I/O threads' ticks. Lock order: dir_lock, then
 * a table's lock. */
static pthread_mutex_t dir_lock = PTHREAD_MUTEX_INITIALIZER;
static struct seqbatch *dir;
static atomic_uint_fast64_t last_tick_ns;

/* ---- the table ------------------------------------------------------------ */

static uint32_t bucket_of(uint64_t id, const char *s, uint32_t n)
{
    uint64_t h = id * UINT64_C(0x9E3779B97F4A7C15);
    if (s) {
        h = hash_fnv1a(HASH_FNV_OFFSET, s, n);
    }
    return (uint32_t)(h >> 32) % BUCKETS;
}

static struct seq *find(struct seqbatch *t, const struct infer_sequence *k)
{
    for (struct seq *s = t->buckets[bucket_of(k->id, k->id_str, k->id_str_len)]; s; s = s->next)
        if (k->id_str ? s->id_str && s->id_str_len == k->id_str_len &&
                            memcmp(s->id_str, k->id_str, k->id_str_len) == 0
                      : !s->id_str && s->id == k->id)
            return s;
    return NULL;
}

/* Takes seq out of the table (lock held). Its version reference goes when
 * the sequence object does (seq_free). */
static void unlink_seq(struct seqbatch *t, struct seq *seq)
{
    struct seq **p = &t->buckets[bucket_of(seq->id, seq->id_str, seq->id_str_len)];
    while (*p != seq)
        p = &(*p)->next;
    *p = seq->next;
    seq->next = NULL;
    seq->linked = false;
    t->count--;
    atomic_store_explicit(&t->active, t->count, memory_order_relaxed);
}

/* Frees sequences chained by `next` and drops their references on m, with
 * no lock held: the last reference of an old version unloads it (and frees
 * the table, from the repository manager's thread). */
static void seqs_free(struct model *m, uint32_t nstates, struct seq *list)
{
    while (list) {
        struct seq *seq = list;
        list = seq->next;
        for (uint32_t i = 0; i < nstates; i++)
            mem_free(seq->states[i].data);
        mem_free(seq->id_str);
        mem_free(seq);
        model_unref(m);
    }
}

static struct seq *seq_new(struct seqbatch *t, const struct infer_sequence *k)
{
    struct seq *seq = mem_calloc(1, sizeof *seq + t->sb->nstates * sizeof seq->states[0]);
    if (!seq)
        return NULL;
    seq->id = k->id;
    if (k->id_str) {
        seq->id_str = mem_alloc(k->id_str_len ? k->id_str_len : 1);
        if (!seq->id_str) {
            mem_free(seq);
            return NULL;
        }
        memcpy(seq->id_str, k->id_str, k->id_str_len);
        seq->id_str_len = k->id_str_len;
    }
    model_ref(t->m); /* a reload drains the sequence on this version */
    uint32_t b = bucket_of(seq->id, seq->id_str, seq->id_str_len);
    seq->next = t->buckets[b];
    t->buckets[b] = seq;
    seq->linked = true;
    t->count++;
    atomic_store_explicit(&t->active, t->count, memory_order_relaxed);
    return seq;
}

/* Unlinks the sequences idle for longer than the model allows (lock held)
 * and returns them chained, for seqs_free once the lock is released. */
static struct seq *sweep(struct seqbatch *t, uint64_t now)
{
    struct seq *gone = NULL;
    if (now - t->last_sweep_ns < SWEEP_EVERY_NS)
        return NULL;
    t->last_sweep_ns = now;
    uint64_t idle_ns = t->sb->max_sequence_idle_us * 1000u;
    for (uint32_t b = 0; b < BUCKETS && t->count; b++) {
        for (struct seq **p = &t->buckets[b]; *p;) {
            struct seq *s = *p;
            if (s->busy || s->head || now - s->idle_since_ns <= idle_ns) {
                p = &s->next;
                continue;
            }
            unlink_seq(t, s); /* *p is the next one now */
            atomic_fetch_add_explicit(&t->idle_ended, 1, memory_order_relaxed);
            s->next = gone;
            gone = s;
        }
    }
    return gone;
}

static void table_free(void *p)
{
    struct seqbatch *t = p;
    pthread_mutex_lock(&dir_lock);
    for (struct seqbatch **d = &dir; *d; d = &(*d)->dir_next)
        if (*d == t) {
            *d = t->dir_next;
            break;
        }
    pthread_mutex_unlock(&dir_lock);
    /* The version's last reference is gone: every sequence, which held one,
     * is gone too. */
    pthread_mutex_destroy(&t->lock);
    mem_free(t->state_outputs);
    mem_free(t);
}

/* The version's table, made by the first sequence request. */
static struct seqbatch *table_of(struct model *m)
{
    struct seqbatch *t = atomic_load_explicit(&m->seqbatch, memory_order_acquire);
    if (t)
        return t;
    t = mem_calloc(1, sizeof *t);
    if (!t)
        return NULL;
    pthread_mutex_init(&t->lock, NULL);
    t->m = m;
    t->sb = &m->config.sequence_batching;
    t->state_outputs = mem_calloc(t->sb->nstates ? t->sb->nstates : 1, sizeof *t->state_outputs);
    if (!t->state_outputs) {
        pthread_mutex_destroy(&t->lock);
        mem_free(t);
        return NULL;
    }
    for (uint32_t i = 0; i < t->sb->nstates; i++)
        for (uint32_t k = 0; k < m->run_info.noutputs; k++)
            if (!strcmp(m->run_info.outputs[k].name, t->sb->states[i].output_name))
                t->state_outputs[i] = m->run_info.outputs[k].name; /* config_check: it is there */
    pthread_mutex_lock(&dir_lock); /* in the directory before anyone can find it */
    void *none = NULL;
    if (!atomic_compare_exchange_strong_explicit(&m->seqbatch, &none, t, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        pthread_mutex_unlock(&dir_lock);
        pthread_mutex_destroy(&t->lock);
        mem_free(t->state_outputs);
        mem_free(t);
        return none;
    }
    t->dir_next = dir;
    dir = t;
    pthread_mutex_unlock(&dir_lock);
    m->seqbatch_free = table_free; /* read by model_free, after the last reference */
    return t;
}

/* The sequence k of a version of model `name` other than `self` (older
 * versions that a reload left serving their sequences), with that table
 * locked; NULL if none has it. */
static struct seq *find_elsewhere(const struct seqbatch *self, const char *name,
                                  const struct infer_sequence *k, struct seqbatch **where)
{
    pthread_mutex_lock(&dir_lock);
    for (struct seqbatch *d = dir; d; d = d->dir_next) {
        if (d == self || strcmp(d->m->name, name))
            continue;
        pthread_mutex_lock(&d->lock);
        struct seq *seq = find(d, k);
        if (seq) {
            /* Linked, it holds a reference: d outlives the directory lock. */
            pthread_mutex_unlock(&dir_lock);
            *where = d;
            return seq;
        }
        pthread_mutex_unlock(&d->lock);
    }
    pthread_mutex_unlock(&dir_lock);
    return NULL;
}

/* Ends sequences of every table, one table at a time (freeing a sequence
 * may unload an old version, whose table then leaves the directory): the
 * idle ones, or (all) every one. */
static void end_everywhere(uint64_t now_ns, bool all)
{
    for (;;) {
        struct seq *gone = NULL;
        struct model *m = NULL;
        uint32_t nstates = 0;
        pthread_mutex_lock(&dir_lock);
        for (struct seqbatch *d = dir; d && !gone; d = d->dir_next) {
            pthread_mutex_lock(&d->lock);
            if (!all)
                gone = sweep(d, now_ns);
            for (uint32_t b = 0; all && b < BUCKETS; b++)
                while (d->buckets[b]) {
                    struct seq *s = d->buckets[b];
                    unlink_seq(d, s);
                    s->next = gone;
                    gone = s;
                }
            m = d->m;
            nstates = d->sb->nstates;
            pthread_mutex_unlock(&d->lock);
        }
        pthread_mutex_unlock(&dir_lock);
        if (!gone)
            return;
        seqs_free(m, nstates, gone);
    }
}

void seqbatch_tick(uint64_t now_ns)
{
    uint64_t last = atomic_load_explicit(&last_tick_ns, memory_order_relaxed);
    if (now_ns - last >= SWEEP_EVERY_NS &&
        atomic_compare_exchange_strong_explicit(&last_tick_ns, &last, now_ns,
                                                memory_order_relaxed, memory_order_relaxed))
        end_everywhere(now_ns, false); /* one I/O thread sweeps at a time */
}

void seqbatch_shutdown(void)
{
    end_everywhere(0, true);
}

/* ---- a request's tensors ------------------------------------------------------ */

/* The id as a message shows it. */
static void id_text(const struct infer_sequence *k, char *out, size_t cap)
{
    if (k->id_str)
        snprintf(out, cap, "%.*s", (int)(k->id_str_len > 64 ? 64 : k->id_str_len), k->id_str);
    else
        snprintf(out, cap, "%" PRIu64, k->id);
}

static void set_shape(struct tensor *t, bool batched, const int64_t *dims, uint32_t ndim)
{
    t->ndim = 0;
    if (batched)
        t->shape[t->ndim++] = 1;
    for (uint32_t d = 0; d < ndim; d++)
        t->shape[t->ndim++] = dims[d];
}

static int control_tensor(struct infer_request *req, const struct model_seq_control *ctl,
                          bool batched, struct tensor *t)
{
    static const int64_t one[] = {1};
    bool on = ctl->kind == MODEL_SEQ_START   ? req->sequence.start
              : ctl->kind == MODEL_SEQ_END   ? req->sequence.end
                                             : true; /* READY: every request is one */
    t->name = ctl->input;
    t->dtype = ctl->dtype;
    set_shape(t, batched, one, 1);
    size_t size = ctl->dtype == DT_BYTES ? sizeof(struct tensor_bytes) : dtype_size(ctl->dtype);
    t->data = arena_alloc(&req->arena, size);
    if (!t->data)
        return ST_ERROR;
    t->nbytes = size;
    if (ctl->kind == MODEL_SEQ_CORRID) {
        uint64_t id = req->sequence.id;
        switch (ctl->dtype) {
        case DT_BYTES: {
            struct tensor_bytes *b = t->data;
            b->ptr = req->sequence.id_str;
            b->len = req->sequence.id_str_len;
            t->nbytes = b->len;
            break;
        }
        case DT_UINT64:
        case DT_INT64:
            memcpy(t->data, &id, 8);
            break;
        default: { /* UINT32, INT32: the low 32 bits, as Triton */
            uint32_t low = (uint32_t)id;
            memcpy(t->data, &low, 4);
            break;
        }
        }
        return 0;
    }
    if (ctl->dtype == DT_INT32)
        memcpy(t->data, &ctl->int32_false_true[on], 4);
    else if (ctl->dtype == DT_FP32)
        memcpy(t->data, &ctl->fp32_false_true[on], 4);
    else
        *(uint8_t *)t->data = ctl->bool_false_true[on];
    return 0;
}

static int state_tensor(struct infer_request *req, const struct seq *seq, uint32_t i,
                        const struct model_seq_state *st, bool batched, struct tensor *t)
{
    t->name = st->input_name;
    t->dtype = st->dtype;
    const struct state_buf *b = &seq->states[i];
    bool initial = req->sequence.start || !seq->have_state;
    if (initial)
        set_shape(t, batched, st->dims, st->ndim);
    else {
        t->ndim = b->ndim;
        memcpy(t->shape, b->shape, b->ndim * sizeof b->shape[0]);
    }
    size_t bytes = initial ? (size_t)shape_count(t->shape, t->ndim, INT32_MAX) * dtype_size(st->dtype)
                           : b->nbytes;
    t->data = arena_calloc(&req->arena, 1, bytes ? bytes : 1);
    if (!t->data)
        return ST_ERROR;
    if (!initial && bytes)
        memcpy(t->data, b->data, bytes);
    t->nbytes = bytes;
    return 0;
}

/* Adds the control and state inputs and the state outputs to the request
 * of seq's next turn (its call is ours: running the stage, or parked). */
static int prepare(struct infer_request *req, const struct seqbatch *t, const struct seq *seq)
{
    const struct model *m = req->model;
    const struct model_sequence_batching *sb = &m->config.sequence_batching;
    uint32_t nin = req->ninputs + sb->ncontrols + sb->nstates;
    struct tensor *in = arena_alloc(&req->arena, nin * sizeof *in);
    const char **out = arena_alloc(&req->arena, (req->noutputs + sb->nstates) * sizeof *out);
    if (!in || !out)
        return ST_ERROR;
    memcpy(in, req->inputs, req->ninputs * sizeof *in);
    memcpy(out, req->output_names, req->noutputs * sizeof *out);
    uint32_t k = req->ninputs;
    for (uint32_t i = 0; i < sb->ncontrols; i++)
        if (control_tensor(req, &sb->controls[i], m->batched, &in[k++]) != 0)
            return ST_ERROR;
    for (uint32_t i = 0; i < sb->nstates; i++) {
        if (state_tensor(req, seq, i, &sb->states[i], m->batched, &in[k++]) != 0)
            return ST_ERROR;
        out[req->noutputs + i] = t->state_outputs[i];
    }
    req->inputs = in;
    req->ninputs = nin;
    req->output_names = out;
    req->noutputs += sb->nstates;
    req->hidden_outputs = sb->nstates;
    return 0;
}

/* Keeps the state outputs of seq's request that ended well (done). */
static void capture(struct seq *seq, const struct model_sequence_batching *sb,
                    const struct infer_request *req)
{
    for (uint32_t i = 0; i < sb->nstates; i++) {
        const struct tensor *o = &req->outputs[req->noutputs + i]; /* after the client's */
        struct state_buf *b = &seq->states[i];
        if (o->dtype != sb->states[i].dtype || o->ndim > TENSOR_MAX_DIMS)
            return;
        if (o->nbytes > b->cap) {
            void *grown = mem_realloc(b->data, o->nbytes);
            if (!grown) {
                log_warn("sequence state '%s' not kept: out of memory", sb->states[i].output_name);
                return;
            }
            b->data = grown;
            b->cap = o->nbytes;
        }
        if (o->nbytes)
            memcpy(b->data, o->data, o->nbytes);
        b->nbytes = o->nbytes;
        b->ndim = o->ndim;
        memcpy(b->shape, o->shape, o->ndim * sizeof o->shape[0]);
    }
    seq->have_state = true;
}

/* ---- the stage ------------------------------------------------------------------ */

/* Triton's checks of a request to a sequence model, in its words. */
static enum stage_result refuse(struct infer_call *call, const struct model *m)
{
    const struct infer_sequence *k = &call->req.sequence;
    if (!k->id_str_len && !k->id)
        return serve_call_error(call, 400,
                                "inference request to model '%s' must specify a non-zero or "
                                "non-empty correlation ID",
                                m->name);
    if (call->req.batch > 1)
        return serve_call_error(call, 400,
                                "inference request to model '%s' must specify batch-size 1 due "
                                "to requirements of sequence batcher",
                                m->name);
    const struct model_sequence_batching *sb = &m->config.sequence_batching;
    for (uint32_t i = 0; i < sb->ncontrols; i++) {
        const struct model_seq_control *ctl = &sb->controls[i];
        if (ctl->kind != MODEL_SEQ_CORRID || (k->id_str != NULL) == (ctl->dtype == DT_BYTES))
            continue;
        return serve_call_error(call, 400,
                                "sequence batching control '%s' data-type is '%s', but model "
                                "'%s' expects '%s'",
                                ctl->input, k->id_str ? "BYTES" : "UINT64", m->name,
                                dtype_name(ctl->dtype));
    }
    return STAGE_CONTINUE;
}

/* The call now runs on version `to`, which holds its sequence (a reload
 * replaced the version the call resolved): the call's reference moves
 * there, and its outputs are named by to's own strings (the scheduler
 * compares names by address). The request was decoded against the newer
 * version's inputs; a reload that changed them fails it at the model, with
 * the model's words. Returns 0, or ST_ERROR when `to` lacks an output the
 * request asks for. */
static int move_call(struct infer_call *call, struct model *to)
{
    struct infer_request *req = &call->req;
    const char **names = arena_alloc(&req->arena, (req->noutputs + 1) * sizeof *names);
    if (!names)
        return ST_ERROR;
    for (uint32_t q = 0; q < req->noutputs; q++) {
        names[q] = NULL;
        for (uint32_t k = 0; k < to->info.noutputs && !names[q]; k++)
            if (!strcmp(to->info.outputs[k].name, req->output_names[q]))
                names[q] = to->info.outputs[k].name;
        if (!names[q])
            return ST_ERROR;
    }
    req->output_names = names;
    struct model *from = req->model;
    req->model = model_ref(to);
    model_unref(from); /* not the last: the snapshot still holds the newer one */
    return 0;
}

enum stage_result seqbatch_stage(struct infer_call *call, const void *cfg)
{
    (void)cfg;
    struct infer_request *req = &call->req;
    struct model *m = req->model;
    if (!m->config.sequence_batching.enabled)
        return STAGE_CONTINUE;
    if (refuse(call, m) != STAGE_CONTINUE)
        return STAGE_DONE;
    struct seqbatch *t = table_of(m);
    if (!t)
        return serve_call_error(call, 503, "out of memory");
    const struct infer_sequence *k = &req->sequence;
    char id[80];
    pthread_mutex_lock(&t->lock);
    struct seq *gone = sweep(t, clock_now_ns());
    struct seq *seq = find(t, k);
    if (!seq && !k->start) {
        /* Perhaps a sequence an older version still serves (a reload). */
        pthread_mutex_unlock(&t->lock);
        struct seqbatch *older;
        seq = find_elsewhere(t, m->name, k, &older);
        if (seq && move_call(call, older->m) != 0) {
            pthread_mutex_unlock(&older->lock);
            seqs_free(t->m, t->sb->nstates, gone);
            id_text(k, id, sizeof id);
            return serve_call_error(call, 400,
                                    "sequence %s of model '%s' runs on the version loaded before "
                                    "the last reload, which lacks an output the request asks for",
                                    id, m->name);
        }
        if (seq) {
            seqs_free(t->m, t->sb->nstates, gone);
            gone = NULL;
            t = older; /* locked by find_elsewhere */
        } else {
            seqs_free(t->m, t->sb->nstates, gone);
            id_text(k, id, sizeof id);
            return serve_call_error(call, 400,
                                    "inference request for sequence %s to model '%s' must "
                                    "specify the START flag on the first request of the sequence",
                                    id, m->name);
        }
    }
    enum stage_result result = STAGE_CONTINUE;
    if (!seq && t->count >= SEQBATCH_MAX) {
        result = serve_call_error(call, 503,
                                  "model '%s' keeps %u sequences, the most it can: end sequences "
                                  "(sequence_end) or retry later",
                                  m->name, t->count);
    } else if (!seq && !(seq = seq_new(t, k))) {
        result = serve_call_error(call, 503, "out of memory");
    } else {
        if (k->start)
            atomic_fetch_add_explicit(&t->started, 1, memory_order_relaxed);
        if (k->end) { /* the id is free for a new sequence; this one's requests still run */
            unlink_seq(t, seq);
            atomic_fetch_add_explicit(&t->ended, 1, memory_order_relaxed);
        }
        call->seq_ctx = seq;
        /* Only a START is held to the queue budget: once started, a
         * sequence has one request in the model at a time, so the
         * sequences bound the queue its requests make. */
        req->budget_exempt = !k->start;
        if (seq->busy) {
            if (seq->tail)
                seq->tail->seq_next = call;
            else
                seq->head = call;
            seq->tail = call;
            result = STAGE_DEFER;
        }
        seq->busy = true;
    }
    pthread_mutex_unlock(&t->lock);
    seqs_free(t->m, t->sb->nstates, gone);
    if (result == STAGE_CONTINUE && prepare(req, t, seq) != 0)
        return serve_call_error(call, 413, "request too large to add the sequence's tensors");
    return result;
}

/* Takes the first call waiting behind seq's turn (lock held). */
static struct infer_call *pop_waiting(struct seq *seq)
{
    struct infer_call *c = seq->head;
    if (c) {
        seq->head = c->seq_next;
        if (!seq->head)
            seq->tail = NULL;
        c->seq_next = NULL;
    }
    return c;
}

void seqbatch_done(struct infer_call *call, const void *cfg)
{
    (void)cfg;
    struct seq *seq = call->seq_ctx;
    if (!seq)
        return;
    struct infer_request *req = &call->req;
    /* The call's version holds the sequence (and the call a reference on
     * it until after this). */
    struct seqbatch *t = atomic_load_explicit(&req->model->seqbatch, memory_order_acquire);
    /* This call was the sequence's turn: nobody else touches seq's states. */
    if (req->rc == 0 && req->outputs && req->hidden_outputs)
        capture(seq, t->sb, req);
    /* A START that never ran (the scheduler refused it, or it expired or
     * was cancelled in the queue) started nothing, as in Triton, where such
     * a request never reaches the model: its sequence is dropped, and the
     * requests waiting behind it without a START of their own fail as a
     * sequence that was not started does. A waiting START takes the turn. */
    bool unstarted = req->sequence.start && !req->exec_start_ns && !seq->have_state;
    struct infer_call *refused = NULL, **refused_end = &refused;
    pthread_mutex_lock(&t->lock);
    struct infer_call *next = pop_waiting(seq);
    while (unstarted && next && !next->req.sequence.start) {
        next->seq_ctx = NULL; /* not the sequence's turn: its done hook leaves seq alone */
        *refused_end = next;
        refused_end = &next->seq_next;
        next = pop_waiting(seq);
    }
    if (!next) {
        seq->busy = false;
        seq->idle_since_ns = clock_now_ns();
        if (unstarted && seq->linked)
            unlink_seq(t, seq);
    }
    struct seq *gone = sweep(t, clock_now_ns());
    if (!next && !seq->linked) { /* ended: its last request is done */
        seq->next = gone;
        gone = seq;
    }
    pthread_mutex_unlock(&t->lock);
    seqs_free(t->m, t->sb->nstates, gone);
    while (refused) {
        struct infer_call *c = refused;
        refused = c->seq_next;
        c->seq_next = NULL;
        char id[80];
        id_text(&c->req.sequence, id, sizeof id);
        serve_call_error(c, 400,
                         "inference request for sequence %s to model '%s' must specify the START "
                         "flag on the first request of the sequence (its START did not run)",
                         id, c->req.model->name);
        serve_call_resume(c);
    }
    if (!next)
        return;
    if (prepare(&next->req, t, seq) != 0)
        serve_call_error(next, 413, "request too large to add the sequence's tensors");
    serve_call_resume(next);
}

void seqbatch_stats(const struct model *m, struct seqbatch_stats *out)
{
    memset(out, 0, sizeof *out);
    struct seqbatch *t = atomic_load_explicit(&m->seqbatch, memory_order_acquire);
    if (!t)
        return;
    out->active = atomic_load_explicit(&t->active, memory_order_relaxed);
    out->started = atomic_load_explicit(&t->started, memory_order_relaxed);
    out->ended = atomic_load_explicit(&t->ended, memory_order_relaxed);
    out->idle_ended = atomic_load_explicit(&t->idle_ended, memory_order_relaxed);
}
