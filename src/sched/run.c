/*
 * run: one formed batch on a leased instance — gather (and pad) the
 * members' inputs, execute, give each member its outputs (cut back to its
 * own lengths after padding), report the run and complete the members.
 * Runs on whichever thread leased the instance (sched.h).
 */
#include <errno.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/probe.h"
#include "base/status.h"
#include "sched/sched_int.h"

#define BATCH_ARENA_CHUNK (16 * 1024)
#define BATCH_ARENA_MAX ((size_t)1 << 30)

/* ---- batch objects ------------------------------------------------------- */

static struct sched_batch *batch_new(struct sched *s)
{
    struct sched_batch *b = mem_calloc(1, sizeof *b);
    if (!b)
        return NULL;
    arena_init(&b->arena, BATCH_ARENA_CHUNK, BATCH_ARENA_MAX);
    b->sched = s;
    return b;
}

int batch_pool_fill(struct sched *s, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        struct sched_batch *b = batch_new(s);
        if (!b)
            return -ENOMEM;
        b->next_free = s->free_batches;
        s->free_batches = b;
    }
    return 0;
}

void batch_pool_free(struct sched *s)
{
    while (s->free_batches) {
        struct sched_batch *b = s->free_batches;
        s->free_batches = b->next_free;
        arena_free(&b->arena);
        mem_free(b);
    }
}

static struct sched_batch *batch_get(struct sched *s, void *instance)
{
    pthread_mutex_lock(&s->batches_lock);
    struct sched_batch *b = s->free_batches;
    if (b)
        s->free_batches = b->next_free;
    pthread_mutex_unlock(&s->batches_lock);
    if (!b)
        b = batch_new(s);
    if (!b)
        return NULL;
    b->instance = instance;
    b->backend_state = NULL;
    atomic_store(&b->refs, 0);
    return b;
}

static void batch_put(struct sched_batch *b)
{
    struct sched *s = b->sched;
    if (b->backend_state)
        s->model.backend->release(b->instance, b->backend_state);
    b->backend_state = NULL;
    arena_reset(&b->arena);
    pthread_mutex_lock(&s->batches_lock);
    b->next_free = s->free_batches;
    s->free_batches = b;
    pthread_mutex_unlock(&s->batches_lock);
}

void sched_release(struct infer_request *req)
{
    struct sched_batch *b = req->batch_ref;
    req->batch_ref = NULL;
    if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        batch_put(b);
}

/* ---- slots ------------------------------------------------------------------ */

int slot_init(struct slot *sl, const struct sched *s, void *instance)
{
    const struct model_info *info = s->model.info;
    const struct sched_config *c = &s->cfg;
    sl->instance = instance;
    sl->capacity = c->max_batch_size > 1 && c->dynamic_batching ? c->max_batch_size : 1;
    uint32_t nin = info->ninputs ? info->ninputs : 1, nout = info->noutputs ? info->noutputs : 1;
    sl->gather = mem_calloc(nin, sizeof *sl->gather);
    sl->inputs = mem_calloc(nin, sizeof *sl->inputs);
    sl->names = mem_calloc(nout, sizeof *sl->names);
    sl->outs = mem_calloc(nout, sizeof *sl->outs);
    sl->padded = mem_calloc(nin, sizeof *sl->padded);
    sl->trial = mem_calloc(nin, sizeof *sl->trial);
    sl->members = mem_calloc(sl->capacity, sizeof *sl->members);
    if (!sl->gather || !sl->inputs || !sl->names || !sl->outs || !sl->padded || !sl->trial ||
        !sl->members)
        return -ENOMEM;
    for (uint32_t i = 0; i < info->ninputs; i++)
        buf_init(&sl->gather[i], SIZE_MAX);
    return 0;
}

void slot_free(struct slot *sl, uint32_t ninputs)
{
    if (sl->gather)
        for (uint32_t i = 0; i < ninputs; i++)
            buf_free(&sl->gather[i]);
    mem_free(sl->gather);
    mem_free(sl->inputs);
    mem_free(sl->names);
    mem_free(sl->outs);
    mem_free(sl->padded);
    mem_free(sl->trial);
    mem_free(sl->members);
}

/* ---- compatibility and padding -------------------------------------------- */

bool batch_compatible(const struct sched *s, const struct infer_request *a,
                      const struct infer_request *b)
{
    if (a->background != b->background)
        return false;
    const struct model_info *info = s->model.info;
    bool pad = s->cfg.padding_budget > 0;
    for (uint32_t i = 0; i < a->ninputs; i++) {
        const struct tensor *x = &a->inputs[i], *y = &b->inputs[i];
        if (x->ndim != y->ndim)
            return false;
        for (uint32_t d = 1; d < x->ndim; d++) {
            if (x->shape[d] == y->shape[d])
                continue;
            if (!pad || x->dtype == DT_BYTES || i >= info->ninputs ||
                d >= info->inputs[i].ndim || info->inputs[i].dims[d] != -1)
                return false;
        }
    }
    return true;
}

/* Copies the box [0, box) of the ndim-dimensional array src (shape
 * sshape) into the array dst (shape dshape); elements of `size` bytes. */
static void copy_box(char *dst, const int64_t *dshape, const char *src, const int64_t *sshape,
                     const int64_t *box, uint32_t ndim, size_t size)
{
    if (ndim == 0) {
        memcpy(dst, src, size);
        return;
    }
    size_t dstride[TENSOR_MAX_DIMS], sstride[TENSOR_MAX_DIMS];
    dstride[ndim - 1] = sstride[ndim - 1] = size;
    for (uint32_t d = ndim - 1; d > 0; d--) {
        dstride[d - 1] = dstride[d] * (size_t)dshape[d];
        sstride[d - 1] = sstride[d] * (size_t)sshape[d];
    }
    for (uint32_t d = 0; d < ndim; d++)
        if (box[d] == 0)
            return;
    size_t run = (size_t)box[ndim - 1] * size;
    int64_t idx[TENSOR_MAX_DIMS] = {0};
    for (;;) {
        size_t doff = 0, soff = 0;
        for (uint32_t d = 0; d + 1 < ndim; d++) {
            doff += (size_t)idx[d] * dstride[d];
            soff += (size_t)idx[d] * sstride[d];
        }
        memcpy(dst + doff, src + soff, run);
        uint32_t d = ndim - 1;
        while (d > 0) {
            if (++idx[d - 1] < box[d - 1])
                break;
            idx[d - 1] = 0;
            d--;
        }
        if (d == 0)
            return;
    }
}

/* What a batch looks like once gathered. */
struct gathered {
    int64_t total;    /* samples */
    int64_t elements; /* input elements, padding included */
    int64_t padding;  /* zeros added */
    bool padded;      /* some input was padded */
};

static bool member_is_padded(const struct slot *sl, const struct tensor *t, uint32_t i)
{
    for (uint32_t d = 1; d < t->ndim; d++)
        if (t->shape[d] != sl->padded[i][d])
            return true;
    return false;
}

/* Concatenates the members' inputs along dim 0 into the slot's buffers,
 * padding each to the batch's padded dims (sl->padded) with zeros. */
static int gather_inputs(struct slot *sl, uint32_t n, struct gathered *g, struct error *err)
{
    struct infer_request *const *members = sl->members;
    const struct infer_request *first = members[0];
    for (uint32_t i = 0; i < first->ninputs; i++) {
        struct tensor *t = &sl->inputs[i];
        *t = first->inputs[i];
        t->shape[0] = g->total;
        bool pad = false;
        for (uint32_t j = 0; j < n && !pad; j++)
            pad = member_is_padded(sl, &members[j]->inputs[i], i);
        struct buf *gb = &sl->gather[i];
        buf_reset(gb);
        if (!pad) {
            size_t bytes = 0;
            for (uint32_t j = 0; j < n; j++) {
                const struct tensor *src = &members[j]->inputs[i];
                size_t len = t->dtype == DT_BYTES
                                 ? (size_t)tensor_count(src, INT64_MAX) *
                                       sizeof(struct tensor_bytes)
                                 : src->nbytes;
                if (buf_append(gb, src->data, len) != 0)
                    return error_set(err, 500, "out of memory gathering a batch");
                bytes += src->nbytes;
            }
            t->data = gb->data;
            t->nbytes = bytes;
            int64_t count = tensor_count(t, INT64_MAX);
            g->elements += count;
            continue;
        }
        g->padded = true;
        for (uint32_t d = 1; d < t->ndim; d++)
            t->shape[d] = sl->padded[i][d];
        size_t esize = dtype_size(t->dtype);
        int64_t count = tensor_count(t, INT64_MAX);
        size_t bytes = (size_t)count * esize;
        if (buf_reserve(gb, bytes) != 0)
            return error_set(err, 500, "out of memory gathering a batch");
        memset(gb->data, 0, bytes);
        gb->len = bytes;
        size_t row_bytes = count ? bytes / (size_t)g->total : 0;
        int64_t offset = 0, real = 0;
        for (uint32_t j = 0; j < n; j++) {
            const struct tensor *src = &members[j]->inputs[i];
            int64_t dshape[TENSOR_MAX_DIMS];
            memcpy(dshape, t->shape, sizeof dshape);
            dshape[0] = src->shape[0];
            copy_box(gb->data + (size_t)offset * row_bytes, dshape, src->data, src->shape,
                     src->shape, t->ndim, esize);
            offset += src->shape[0];
            real += tensor_count(src, INT64_MAX);
        }
        t->data = gb->data;
        t->nbytes = bytes;
        g->elements += count;
        g->padding += count - real;
    }
    return 0;
}

/* The union of the members' requested outputs, in model order. */
static uint32_t union_outputs(const struct sched *s, struct slot *sl, uint32_t n)
{
    const struct model_info *info = s->model.info;
    uint32_t count = 0;
    for (uint32_t o = 0; o < info->noutputs; o++) {
        const char *name = info->outputs[o].name;
        bool wanted = false;
        for (uint32_t j = 0; j < n && !wanted; j++)
            for (uint32_t k = 0; k < sl->members[j]->noutputs && !wanted; k++)
                wanted = sl->members[j]->output_names[k] == name;
        if (wanted)
            sl->names[count++] = name;
    }
    return count;
}

/* After padding: r's own length of dimension d of output t (declared
 * `io`), or t's own when it is not cut back. */
static int64_t own_length(const struct slot *sl, const struct infer_request *r,
                          const struct model_io *io, const struct tensor *t, uint32_t d)
{
    if (!io || d >= io->ndim || io->dims[d] != -1)
        return t->shape[d];
    for (uint32_t i = 0; i < r->ninputs; i++)
        for (uint32_t e = 1; e < r->inputs[i].ndim; e++)
            if (sl->padded[i][e] == t->shape[d] && r->inputs[i].shape[e] != t->shape[d])
                return r->inputs[i].shape[e];
    return t->shape[d];
}

static const struct model_io *output_io(const struct sched *s, const char *name)
{
    const struct model_info *info = s->model.info;
    for (uint32_t o = 0; o < info->noutputs; o++)
        if (info->outputs[o].name == name)
            return &info->outputs[o];
    return NULL;
}

/* Gives each request its outputs, in the order it asked for them. With a
 * batch dimension, a request's outputs point at its rows of the batch
 * outputs (after padding, copies cut back to its lengths); otherwise (one
 * request) they are the outputs themselves. */
static int assign_outputs(const struct sched *s, struct slot *sl, uint32_t nout,
                          struct sched_batch *b, const struct gathered *g, bool batched,
                          struct error *err)
{
    int64_t total = g->total;
    for (uint32_t k = 0; batched && k < nout; k++) {
        const struct tensor *t = &sl->outs[k];
        if (t->ndim == 0 || t->shape[0] != total)
            return error_set(err, 500, "output '%s' has %lld rows for a batch of %lld",
                             t->name, t->ndim ? (long long)t->shape[0] : 0LL, (long long)total);
    }
    int64_t offset = 0;
    for (uint32_t j = 0; j < sl->n; j++) {
        struct infer_request *r = sl->members[j];
        for (uint32_t q = 0; q < r->noutputs; q++) {
            const struct tensor *t = NULL;
            for (uint32_t k = 0; k < nout && !t; k++)
                if (sl->names[k] == r->output_names[q])
                    t = &sl->outs[k];
            struct tensor *o = &r->outputs[q];
            *o = *t;
            if (!batched)
                continue;
            int64_t row = total ? tensor_count(t, INT64_MAX) / total : 0;
            o->shape[0] = r->batch;
            if (t->dtype == DT_BYTES) {
                const struct tensor_bytes *rows = (const struct tensor_bytes *)t->data + offset * row;
                o->data = (void *)rows;
                o->nbytes = 0;
                for (int64_t e = 0; e < r->batch * row; e++)
                    o->nbytes += rows[e].len;
                continue;
            }
            size_t esize = dtype_size(t->dtype);
            size_t row_bytes = (size_t)row * esize;
            const char *rows = (const char *)t->data + (size_t)offset * row_bytes;
            o->data = (void *)rows;
            o->nbytes = (size_t)r->batch * row_bytes;
            if (!g->padded)
                continue;
            const struct model_io *io = output_io(s, r->output_names[q]);
            bool cut = false;
            for (uint32_t d = 1; d < t->ndim; d++) {
                o->shape[d] = own_length(sl, r, io, t, d);
                cut = cut || o->shape[d] != t->shape[d];
            }
            if (!cut)
                continue;
            int64_t sshape[TENSOR_MAX_DIMS];
            memcpy(sshape, t->shape, sizeof sshape);
            sshape[0] = r->batch;
            size_t bytes = (size_t)tensor_count(o, INT64_MAX) * esize;
            char *copy = arena_alloc(&b->arena, bytes ? bytes : 1);
            if (!copy)
                return error_set(err, 500, "out of memory cutting output '%s' back", t->name);
            copy_box(copy, o->shape, rows, sshape, o->shape, t->ndim, esize);
            o->data = copy;
            o->nbytes = bytes;
        }
        offset += r->batch;
    }
    return 0;
}

void sched_note_run(struct sched *s, uint64_t ran_ns, int64_t samples, bool ok)
{
    if (!ran_ns || s->cfg.decoupled)
        return;
    pthread_mutex_lock(&s->lock);
    learn_ewma(&s->est_ns, ran_ns, SCHED_EST_SHIFT);
    learn_ewma(&s->est_samples_x256, (uint64_t)(samples > 0 ? samples : 1) * 256u,
               SCHED_EST_SHIFT);
    bool changed = ok && s->learning && learn_note(&s->learn, samples, ran_ns);
    const struct learn *l = &s->learn;
    uint32_t preferred = l->preferred, max = l->max_batch, above = 0;
    uint64_t at = 0, at_above = 0;
    if (changed && preferred) {
        /* The evidence: the next larger size class measured. */
        uint32_t i = learn_bucket_of(preferred);
        at = l->b[i].low_x64;
        while (++i < l->nbuckets && l->b[i].runs < LEARN_MIN_RUNS)
            ;
        above = i < l->nbuckets ? learn_bound(l, i) : 0;
        at_above = i < l->nbuckets ? l->b[i].low_x64 : 0;
    }
    pthread_mutex_unlock(&s->lock);
    if (!changed || !s->prefer_learned) /* a configured preferred size is what counts */
        return;
    if (preferred)
        log_info("model %s version %s: batches of up to %u samples run fastest per sample "
                 "(%.1f us, %.1f us in batches of up to %u): preferring them",
                 s->model.name, s->model.version, preferred, (double)at / 64e3,
                 (double)at_above / 64e3, above);
    else
        log_info("model %s version %s: no batch size below %u runs faster per sample: batches "
                 "as large as the queue allows",
                 s->model.name, s->model.version, max);
}

static void report(struct sched *s, struct slot *sl, const struct gathered *g, uint64_t start,
                   uint64_t infer_start, uint64_t infer_end, uint64_t end, bool inline_run,
                   const struct error *err)
{
    if (!s->cfg.observer.on_batch)
        return;
    struct sched_batch_report rep = {
        .members = sl->members, .n = sl->n, .samples = g->total, .elements = g->elements,
        .padding = g->padding, .inline_run = inline_run, .start_ns = start,
        .infer_start_ns = infer_start, .infer_end_ns = infer_end, .end_ns = end, .err = err};
    s->cfg.observer.on_batch(s->cfg.observer.ctx, &s->model, &rep);
}

void run_batch(struct sched *s, struct slot *sl, bool inline_run)
{
    const struct sched_model *m = &s->model;
    uint32_t n = sl->n;
    struct infer_request **members = sl->members;
    struct error err;
    error_clear(&err);
    uint64_t start = clock_now_ns();
    struct gathered g = {0};
    for (uint32_t j = 0; j < n; j++) {
        g.total += members[j]->batch;
        members[j]->exec_start_ns = start;
        members[j]->outputs = arena_calloc(&members[j]->arena, members[j]->noutputs,
                                           sizeof(struct tensor));
        if (!members[j]->outputs)
            error_set(&err, 500, "out of memory for outputs");
    }
    struct sched_batch *b = err.status ? NULL : batch_get(s, sl->instance);
    if (!b && !err.status)
        error_set(&err, 500, "out of memory for a batch");

    const struct tensor *inputs = members[0]->inputs;
    if (!err.status && n > 1 && gather_inputs(sl, n, &g, &err) == 0)
        inputs = sl->inputs;
    else if (!err.status && n == 1)
        for (uint32_t i = 0; i < members[0]->ninputs; i++)
            g.elements += tensor_count(&members[0]->inputs[i], INT64_MAX);
    uint64_t infer_start = 0, infer_end = 0;
    INFERD_PROBE_5(batch_formed, m->name, m->version, n, g.total, g.padding);
    if (!err.status) {
        uint32_t nout = union_outputs(s, sl, n);
        infer_start = clock_now_ns();
        INFERD_PROBE_3(exec_start, m->name, m->version, g.total);
        int rc = m->backend->execute(sl->instance, &b->arena, inputs, members[0]->ninputs,
                                     sl->names, nout, sl->outs, &b->backend_state,
                                     members[0]->background ? BACKEND_EXEC_SHADOW : 0, &err);
        infer_end = clock_now_ns();
        INFERD_PROBE_5(exec_end, m->name, m->version, g.total, infer_end - infer_start, rc);
        if (rc != 0)
            b->backend_state = NULL;
        else
            assign_outputs(s, sl, nout, b, &g, s->cfg.max_batch_size > 0, &err);
    }
    uint64_t end = clock_now_ns();
    report(s, sl, &g, start, infer_start, infer_end, end, inline_run, &err);
    log_debug("model %s: ran %u requests, %lld samples in %llu us%s%s%s", m->name, n,
              (long long)g.total, (unsigned long long)((end - start) / 1000u),
              inline_run ? " inline" : "", err.status ? ": " : "", err.status ? err.msg : "");
    if (err.status && b) {
        batch_put(b);
        b = NULL;
    }
    if (b)
        atomic_store(&b->refs, n);
    sched_note_run(s, end - start, g.total, !err.status);
    for (uint32_t j = 0; j < n; j++) {
        struct infer_request *r = members[j];
        r->exec_end_ns = end;
        r->infer_start_ns = infer_start;
        r->infer_end_ns = infer_end;
        r->batch_size = (uint32_t)g.total;
        r->batch_ref = b;
        if (err.status) {
            r->rc = ST_ERROR;
            r->err = err;
        } else {
            r->rc = 0;
        }
        r->complete(r);
    }
}

/* ---- decoupled models ----------------------------------------------------- */

/* The backend's send(): one response of a decoupled request. */
static bool stream_send(void *ctx, const struct tensor *outputs, uint32_t n, bool final)
{
    struct infer_request *r = ctx;
    if (atomic_load_explicit(&r->cancelled, memory_order_relaxed))
        return false;
    return r->on_response(r, outputs, n, final) &&
           !atomic_load_explicit(&r->cancelled, memory_order_relaxed);
}

/* Runs the one request of a decoupled model: its responses go out through
 * req->on_response as the model sends them; complete() ends it. */
void run_decoupled(struct sched *s, struct slot *sl)
{
    const struct sched_model *m = &s->model;
    struct infer_request *r = sl->members[0];
    struct error err;
    error_clear(&err);
    uint64_t start = clock_now_ns();
    r->exec_start_ns = r->infer_start_ns = start;
    int rc = m->backend->execute_stream(sl->instance, r->inputs, r->ninputs, r->output_names,
                                        r->noutputs, stream_send, r, &err);
    uint64_t end = clock_now_ns();
    r->exec_end_ns = r->infer_end_ns = end;
    r->batch_size = (uint32_t)r->batch;
    r->batch_ref = NULL;
    r->outputs = NULL;
    if (rc != 0) {
        r->rc = ST_ERROR;
        r->err = err;
    } else if (atomic_load_explicit(&r->cancelled, memory_order_relaxed)) {
        r->rc = error_set(&r->err, 499, "request cancelled by the client");
    } else {
        r->rc = 0;
    }
    struct gathered g = {.total = r->batch};
    report(s, sl, &g, start, start, end, end, false, &err);
    r->complete(r);
}
