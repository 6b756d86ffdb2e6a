/*
 * prep_stage.c: the preprocessing stage (prep.h): which inputs a request
 * carries, the job on the preprocessing pool that runs its raw elements
 * through their modalities, and the stacking of the rows into the graph's
 * inputs.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/mem.h"
#include "base/status.h"
#include "model/model.h"
#include "obs/otlp.h"
#include "obs/trace.h"
#include "preprocess/prep_int.h"

/* One request's preprocessing: queued on the pool, then the owner of the
 * tensors it produced until the call ends. */
struct prep_call {
    struct prep_job job; /* first: the pool hands it back */
    struct infer_call *call;
    struct model_prep *mp;
    struct prep_mem mem;
    uint64_t queued_ns;
    /* Which input of the request is which: the tensor given for each raw
     * input and for each graph input (NULL: fed by a raw input). */
    const struct tensor *raw[PREP_MAX_INPUTS];
    const struct tensor *graph[];
};

static const char *missing_hint(const struct model_prep *mp, uint32_t g)
{
    for (uint32_t i = 0; i < mp->nraw; i++)
        for (uint32_t k = 0; k < mp->raw[i].nout; k++)
            if (mp->raw[i].feed[k] == g)
                return mp->raw[i].name;
    return NULL;
}

/* Sorts the request's inputs into pc->graph and pc->raw; 0, or a 400
 * answer (STAGE_DONE) when an input is both given and fed, or neither. */
static int sort_inputs(struct infer_call *call, const struct model_prep *mp, struct prep_call *pc,
                       bool *any_raw)
{
    const struct model *m = mp->model;
    *any_raw = false;
    for (uint32_t i = 0; i < call->req.ninputs; i++) {
        const struct tensor *t = &call->req.inputs[i];
        int idx = model_input_index(m, t->name);
        if (idx < 0)
            continue; /* decoders only pass the model's inputs */
        if ((uint32_t)idx < mp->graph_ninputs) {
            pc->graph[idx] = t;
            continue;
        }
        for (uint32_t r = 0; r < mp->nraw; r++)
            if (mp->raw[r].raw_index == (uint32_t)idx) {
                pc->raw[r] = t;
                *any_raw = true;
            }
    }
    for (uint32_t r = 0; r < mp->nraw; r++)
        for (uint32_t k = 0; pc->raw[r] && k < mp->raw[r].nout; k++)
            if (pc->graph[mp->raw[r].feed[k]]) {
                serve_call_error(call, 400,
                                 "inputs '%s' and '%s' of model '%s' were both given: "
                                 "'%s' is made from '%s', send one of them",
                                 mp->raw[r].name, m->run_info.inputs[mp->raw[r].feed[k]].name,
                                 m->name, m->run_info.inputs[mp->raw[r].feed[k]].name,
                                 mp->raw[r].name);
                return ST_ERROR;
            }
    for (uint32_t g = 0; g < mp->graph_ninputs; g++) {
        if (pc->graph[g])
            continue;
        bool fed = false;
        for (uint32_t r = 0; r < mp->nraw && !fed; r++)
            for (uint32_t k = 0; pc->raw[r] && k < mp->raw[r].nout; k++)
                fed = fed || mp->raw[r].feed[k] == g;
        if (fed)
            continue;
        const char *hint = missing_hint(mp, g);
        serve_call_error(call, 400, "expected input '%s'%s%s%s for model '%s'",
                         m->run_info.inputs[g].name, hint ? " (or '" : "", hint ? hint : "",
                         hint ? "', from which the server makes it)" : "", m->name);
        return ST_ERROR;
    }
    return 0;
}

/* The shape of one row of output k of r fitted to its fed input (see
 * modality.h), from the row's own shape. */
static void fit_row(const struct model_prep *mp, const struct prep_raw *r, uint32_t k,
                    const struct tensor *row, int64_t *shape, uint32_t *ndim)
{
    const struct model_io *io = &mp->model->run_info.inputs[r->feed[k]];
    uint32_t skip = mp->batched ? 1 : 0;
    const int64_t *dims = io->dims + skip;
    uint32_t n = io->ndim - skip;
    int64_t count = tensor_count(row, INT64_MAX), fixed = 1;
    bool same = row->ndim == n;
    for (uint32_t d = 0; same && d < n; d++)
        same = dims[d] == -1 || dims[d] == row->shape[d];
    if (same) {
        memcpy(shape, row->shape, row->ndim * sizeof *shape);
        *ndim = row->ndim;
        return;
    }
    for (uint32_t d = 0; d < n; d++)
        if (dims[d] >= 0)
            fixed *= dims[d];
    for (uint32_t d = 0; d < n; d++)
        shape[d] = dims[d] >= 0 ? dims[d] : (fixed ? count / fixed : 0);
    *ndim = n;
}

/* Stacks the rows of output k (rows[0..nrows)) into dst: [nrows, ...]
 * for a batched model, the row itself otherwise; rows of a rank-1
 * variable length (texts) are padded with zeros to the longest. */
static int stack_rows(struct prep_call *pc, const struct prep_raw *r, uint32_t k,
                      const struct tensor *rows, uint32_t nrows, struct tensor *dst,
                      struct error *err)
{
    const struct model_prep *mp = pc->mp;
    int64_t longest = 0;
    bool ragged = false;
    for (uint32_t b = 0; b < nrows; b++) {
        if (rows[b].ndim != rows[0].ndim)
            return error_set(err, 500, "preprocessing produced rows of different ranks");
        for (uint32_t d = 0; d < rows[b].ndim; d++)
            if (rows[b].shape[d] != rows[0].shape[d])
                ragged = true;
        if (rows[b].ndim == 1 && rows[b].shape[0] > longest)
            longest = rows[b].shape[0];
    }
    if (ragged && rows[0].ndim != 1)
        return error_set(err, 500, "preprocessing produced rows of different shapes");
    struct tensor first = rows[0];
    if (ragged)
        first.shape[0] = longest;
    int64_t shape[TENSOR_MAX_DIMS];
    uint32_t ndim;
    fit_row(mp, r, k, &first, shape, &ndim);
    size_t esize = dtype_size(first.dtype);
    size_t row_elems = (size_t)shape_count(shape, ndim, INT64_MAX);
    size_t bytes = row_elems * esize * nrows;
    char *data = prep_mem_alloc(&pc->mem, bytes ? bytes : 1);
    if (!data)
        return error_set(err, 413, "preprocessed tensors over %u MiB",
                         PREP_MAX_REQUEST_BYTES >> 20);
    memset(data, 0, bytes);
    for (uint32_t b = 0; b < nrows; b++)
        memcpy(data + b * row_elems * esize, rows[b].data, rows[b].nbytes);
    memset(dst, 0, sizeof *dst);
    dst->name = mp->model->run_info.inputs[r->feed[k]].name;
    dst->dtype = first.dtype;
    if (mp->batched)
        dst->shape[dst->ndim++] = nrows;
    memcpy(dst->shape + dst->ndim, shape, ndim * sizeof *shape);
    dst->ndim += ndim;
    dst->data = data;
    dst->nbytes = bytes;
    return 0;
}

/* Runs every element of raw input r; fills out[feed] for its outputs. */
static int run_raw(struct prep_call *pc, uint32_t ri, struct tensor *out, struct prep_timings *sum,
                   struct error *err)
{
    const struct prep_raw *r = &pc->mp->raw[ri];
    const struct tensor *in = pc->raw[ri];
    int64_t n = tensor_count(in, INT64_MAX);
    if (n < 1)
        return error_set(err, 400, "input '%s' has no elements", r->name);
    const struct tensor_bytes *el = in->data;
    struct tensor *rows = mem_calloc((size_t)n * r->nout, sizeof *rows);
    if (!rows)
        return error_set(err, 500, "out of memory");
    int rc = 0;
    for (int64_t b = 0; rc == 0 && b < n; b++) {
        struct prep_timings tm = {0};
        struct tensor row[PREP_MAX_OUTPUTS];
        memset(row, 0, sizeof row);
        rc = r->mod->run(r->cfg, (const uint8_t *)el[b].ptr, el[b].len, &pc->mem, row, &tm, err);
        if (rc == 0) {
            for (uint32_t k = 0; k < r->nout; k++)
                rows[k * n + b] = row[k];
        } else if (n > 1) {
            char msg[ERROR_MSG_MAX];
            snprintf(msg, sizeof msg, "%s", err->msg);
            error_set(err, err->status, "element %lld: %s", (long long)b, msg);
        }
        for (uint32_t s = 0; s < tm.n; s++) {
            uint32_t j = 0;
            while (j < sum->n && strcmp(sum->t[j].stage, tm.t[s].stage) != 0)
                j++;
            if (j == sum->n)
                prep_timing_add(sum, tm.t[s].stage, 0);
            if (j < sum->n)
                sum->t[j].ns += tm.t[s].ns;
        }
    }
    for (uint32_t k = 0; rc == 0 && k < r->nout; k++)
        rc = stack_rows(pc, r, k, rows + k * n, (uint32_t)n, &out[r->feed[k]], err);
    mem_free(rows);
    if (rc) {
        char msg[ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err->msg);
        error_set(err, err->status ? err->status : 500, "input '%s': %s", r->name, msg);
    }
    return rc;
}

static void record_span(const struct infer_request *req, const struct prep_timings *sum,
                        uint64_t queued_ns, uint64_t start_ns, uint64_t end_ns,
                        const struct error *err)
{
    if (!req->trace.sampled)
        return;
    struct span_record rec;
    uint8_t id[SPAN_ID_BYTES];
    trace_new_span_id(id);
    span_init(&rec, req->trace.trace_id, id, req->trace.span_id, SPAN_KIND_INTERNAL, "preprocess",
              strlen("preprocess"), start_ns, end_ns);
    span_attr_int(&rec, "inferd.preprocess.queue_us", (int64_t)((start_ns - queued_ns) / 1000));
    if (err)
        span_set_error(&rec, err->msg);
    otlp_submit(&rec);
    /* One child per step, laid end to end (a step's time is summed over
     * the request's elements). */
    uint64_t t = start_ns;
    for (uint32_t s = 0; s < sum->n; s++) {
        struct span_record step;
        uint8_t sid[SPAN_ID_BYTES];
        trace_new_span_id(sid);
        span_init(&step, req->trace.trace_id, sid, id, SPAN_KIND_INTERNAL, sum->t[s].stage,
                  strlen(sum->t[s].stage), t, t + sum->t[s].ns);
        otlp_submit(&step);
        t += sum->t[s].ns;
    }
}

static void job_run(struct prep_job *job)
{
    struct prep_call *pc = (struct prep_call *)job;
    struct infer_call *call = pc->call;
    struct model_prep *mp = pc->mp;
    uint64_t start = clock_now_ns();
    prep_obs_step(mp, "queue", start - pc->queued_ns);
    if (atomic_load_explicit(&call->req.cancelled, memory_order_relaxed)) {
        prep_obs_error(mp, 499);
        serve_call_error(call, 499, "the client went away before its request was preprocessed");
        serve_call_resume(call);
        return;
    }
    struct error err;
    error_clear(&err);
    struct prep_timings sum = {0};
    struct tensor *in = prep_mem_alloc(&pc->mem, mp->graph_ninputs * sizeof *in);
    int rc = in ? 0 : error_set(&err, 500, "out of memory");
    for (uint32_t g = 0; rc == 0 && g < mp->graph_ninputs; g++)
        if (pc->graph[g])
            in[g] = *pc->graph[g];
    for (uint32_t r = 0; rc == 0 && r < mp->nraw; r++)
        if (pc->raw[r])
            rc = run_raw(pc, r, in, &sum, &err);
    uint64_t end = clock_now_ns();
    for (uint32_t s = 0; s < sum.n; s++)
        prep_obs_step(mp, sum.t[s].stage, sum.t[s].ns);
    record_span(&call->req, &sum, pc->queued_ns, start, end, rc ? &err : NULL);
    if (rc) {
        prep_obs_error(mp, err.status);
        serve_call_error(call, err.status, "%s", err.msg);
    } else {
        call->req.inputs = in;
        call->req.ninputs = mp->graph_ninputs;
    }
    serve_call_resume(call);
}

/* The common case, checked without allocating: no raw input, and every
 * graph input given (decoders keep the model's order and drop duplicates,
 * so the inputs are then exactly the graph's, in its order). */
static bool tensors_only(const struct infer_call *call, const struct model_prep *mp)
{
    if (call->req.ninputs != mp->graph_ninputs)
        return false;
    for (uint32_t i = 0; i < call->req.ninputs; i++) {
        int idx = model_input_index(mp->model, call->req.inputs[i].name);
        if (idx < 0 || (uint32_t)idx >= mp->graph_ninputs)
            return false;
    }
    return true;
}

enum stage_result prep_stage(struct infer_call *call, const void *cfg)
{
    const struct prep_stage_cfg *c = cfg;
    struct model_prep *mp = call->req.model->prep;
    if (!mp || tensors_only(call, mp))
        return STAGE_CONTINUE;
    struct prep_call *pc = mem_calloc(1, sizeof *pc + mp->graph_ninputs * sizeof pc->graph[0]);
    if (!pc)
        return serve_call_error(call, 500, "out of memory");
    call->prep_ctx = pc;
    pc->call = call;
    pc->mp = mp;
    prep_mem_init(&pc->mem, PREP_MAX_REQUEST_BYTES);
    bool any_raw;
    if (sort_inputs(call, mp, pc, &any_raw) != 0) {
        prep_obs_error(mp, 400);
        return STAGE_DONE;
    }
    if (!any_raw)
        return STAGE_CONTINUE; /* every graph input given (tensors_only() sees most such) */
    pc->job.run = job_run;
    pc->queued_ns = clock_now_ns();
    if (prep_pool_submit(c->pool, &pc->job) != 0) {
        prep_obs_error(mp, 503);
        serve_call_error(call, 503, "the preprocessing queue is full (--preprocess-queue)");
        call->req.err.retry_after_s = 1;
        return STAGE_DONE;
    }
    return STAGE_DEFER;
}

void prep_stage_done(struct infer_call *call, const void *cfg)
{
    (void)cfg;
    struct prep_call *pc = call->prep_ctx;
    if (!pc)
        return;
    call->prep_ctx = NULL;
    prep_mem_release(&pc->mem);
    mem_free(pc);
}
