/*
 * run.c: one backend run of the engine (engine_int.h's gen_run): the
 * rows' past into the graph's inputs, the new keys and values out of its
 * outputs into the KV blocks, for both present interfaces of
 * generation.json ("all": past ++ new, the usual export; "new": only the
 * new tokens, the past kept in e->kvbuf).
 */
#include <errno.h>
#include <string.h>

#include "base/mem.h"
#include "base/status.h"
#include "gen/engine_int.h"

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    void *n = mem_realloc(*p, need * elem);
    if (!n)
        return -ENOMEM;
    *p = n;
    *cap = need;
    return 0;
}

static void kvbuf_free(struct gen_engine *e)
{
    struct gen_kvbuf *kb = &e->kvbuf;
    if (kb->t)
        for (uint32_t l = 0; l < 2u * e->shape.kv.layers; l++)
            mem_free(kb->t[l]);
    mem_free(kb->t);
    mem_free(kb->ids);
    mem_free(kb->len);
    *kb = (struct gen_kvbuf){0};
    atomic_store_explicit(&e->stats.kvbuf_bytes, 0, memory_order_relaxed);
}

/* Releases e->prev's outputs (the usual graph's kept run). */
static void prev_release(struct gen_engine *e)
{
    if (e->prev.state)
        e->backend->release(e->instance, e->prev.state);
    e->prev.state = NULL;
    e->prev.n = 0;
}

void gen_prev_drop(struct gen_engine *e)
{
    prev_release(e);
    kvbuf_free(e);
}

/* Checks the run's present.* shapes: [n, heads, tokens, head_dim]. */
static int check_present(const struct gen_engine *e, const struct tensor *out, uint32_t n,
                         uint32_t tokens, struct error *err)
{
    const struct gen_kv_shape *ks = &e->shape.kv;
    for (uint32_t l = 0; l < 2u * ks->layers; l++) {
        const struct tensor *p = &out[1 + l];
        if (p->ndim != 4 || p->shape[0] != n || p->shape[1] != ks->heads ||
            p->shape[2] != tokens || p->shape[3] != ks->head_dim)
            return error_set(err, 500,
                             "generative model: %s has shape [%lld, %lld, %lld, %lld] where "
                             "[%u, %u, %u, %u] was expected (generation.json's \"present\": "
                             "\"%s\")",
                             e->present_names[l], (long long)p->shape[0],
                             (long long)(p->ndim > 1 ? p->shape[1] : 0),
                             (long long)(p->ndim > 2 ? p->shape[2] : 0),
                             (long long)(p->ndim > 3 ? p->shape[3] : 0), n, ks->heads, tokens,
                             ks->head_dim, e->shape.present_new ? "new" : "all");
    }
    return 0;
}

/* Whether rows are exactly e->prev's rows, in its order. */
static bool same_rows(const struct gen_engine *e, struct gen_seq *const *seqs, uint32_t n)
{
    if (!e->prev.state || e->prev.n != n)
        return false;
    for (uint32_t b = 0; b < n; b++)
        if (seqs[b]->id != e->prev.ids[b])
            return false;
    return true;
}

/* Makes this run (its outputs in state) e->prev. 0 or -ENOMEM (prev is
 * then dropped and the caller keeps the state). */
static int keep_run(struct gen_engine *e, struct gen_seq *const *seqs, uint32_t n, uint32_t past,
                    int64_t *mask, const struct tensor *out, void *state)
{
    prev_release(e);
    if (grow((void **)&e->prev.ids, &e->prev.ids_cap, n, sizeof(uint64_t)))
        return -ENOMEM;
    if (!e->prev.present) {
        e->prev.present = mem_calloc(2u * e->shape.kv.layers, sizeof *e->prev.present);
        if (!e->prev.present)
            return -ENOMEM;
    }
    for (uint32_t b = 0; b < n; b++)
        e->prev.ids[b] = seqs[b]->id;
    for (uint32_t l = 0; l < 2u * e->shape.kv.layers; l++)
        e->prev.present[l] = out[1 + l].data;
    e->prev.n = n;
    e->prev.past = past;
    e->prev.mask = mask;
    e->prev.state = state;
    e->mask_cur ^= 1; /* the next run writes the other mask */
    return 0;
}

/* s's blocks that just filled go to the prefix table (kvcache.h): their
 * bytes leave its reservation for the cache's, or go back to the budget
 * when the table had that prefix already. */
static void publish(struct gen_engine *e, struct gen_seq *s)
{
    uint32_t moved, dropped;
    gen_kv_seq_publish(&e->pool, &s->kv, s->tokens, &moved, &dropped);
    uint64_t bb = gen_kv_block_bytes(&e->shape.kv), bytes = (uint64_t)(moved + dropped) * bb;
    s->reserved = s->reserved > bytes ? s->reserved - bytes : 0;
    gen_kv_unreserve((uint64_t)dropped * bb);
}

/* Runs the graph over n rows of t tokens (ids, pos: [n, t]; mask: [n,
 * past + t]) with a past of `past` tokens per row (past_of[l]: [n, heads,
 * past, head_dim] of past_key_values l); out gets logits then present.*,
 * whose shapes are checked to hold `present` tokens per row. 0, or
 * ST_ERROR with err (*state then released). */
static int execute(struct gen_engine *e, uint32_t n, uint32_t t, uint32_t past,
                   const int64_t *ids, const int64_t *pos, const int64_t *mask,
                   const float *const *past_of, uint32_t present, struct tensor *out,
                   void **state, struct error *err)
{
    const struct gen_kv_shape *ks = &e->shape.kv;
    struct tensor in[3 + 2 * GEN_MAX_LAYERS];
    uint32_t nin = 0;
    in[nin++] = (struct tensor){.name = "input_ids",
                                .dtype = DT_INT64,
                                .ndim = 2,
                                .shape = {n, t},
                                .data = (void *)ids,
                                .nbytes = (size_t)n * t * sizeof(int64_t)};
    in[nin++] = (struct tensor){.name = "position_ids",
                                .dtype = DT_INT64,
                                .ndim = 2,
                                .shape = {n, t},
                                .data = (void *)pos,
                                .nbytes = (size_t)n * t * sizeof(int64_t)};
    in[nin++] = (struct tensor){.name = "attention_mask",
                                .dtype = DT_INT64,
                                .ndim = 2,
                                .shape = {n, past + t},
                                .data = (void *)mask,
                                .nbytes = (size_t)n * (past + t) * sizeof(int64_t)};
    size_t row = (size_t)ks->heads * past * ks->head_dim;
    for (uint32_t l = 0; l < 2u * ks->layers; l++)
        in[nin++] = (struct tensor){.name = e->past_names[l],
                                    .dtype = DT_FP32,
                                    .ndim = 4,
                                    .shape = {n, ks->heads, past, ks->head_dim},
                                    .data = (void *)past_of[l],
                                    .nbytes = (size_t)n * row * sizeof(float)};
    arena_reset(&e->arena);
    if (e->backend->execute(e->instance, &e->arena, in, nin, e->run_outputs,
                            1 + 2u * ks->layers, out, state, 0, err) != 0) {
        if (!err->status)
            err->status = 500;
        return ST_ERROR;
    }
    if (check_present(e, out, n, present, err) != 0) {
        e->backend->release(e->instance, *state);
        return ST_ERROR;
    }
    return 0;
}

/* ---- present "all": the past in, past ++ new out ---------------------------------- */

static int run_all(struct gen_engine *e, struct gen_seq *const *seqs, uint32_t n, uint32_t t,
                   const uint32_t *ts, bool keep, const float **logits, void **state,
                   struct error *err)
{
    const struct gen_kv_shape *ks = &e->shape.kv;
    uint32_t layers = ks->layers, past = 0;
    bool reuse = keep && t == 1 && same_rows(e, seqs, n); /* decode steps only */
    if (reuse)
        past = e->prev.past;
    else
        for (uint32_t b = 0; b < n; b++)
            if (seqs[b]->kv.len > past)
                past = seqs[b]->kv.len;
    size_t row = (size_t)ks->heads * past * ks->head_dim; /* one row of one past tensor */
    size_t ncache = reuse ? 1 : 2u * layers * n * row, nt = (size_t)n * t;
    uint32_t cur = e->mask_cur;
    if (grow((void **)&e->ints, &e->ints_cap, 2 * nt, sizeof(int64_t)) ||
        grow((void **)&e->masks[cur], &e->masks_cap[cur], (size_t)n * (past + t),
             sizeof(int64_t)) ||
        grow((void **)&e->past, &e->past_cap, ncache ? ncache : 1, sizeof(float)))
        return error_set(err, 500, "out of memory");
    int64_t *ids = e->ints, *pos = ids + nt, *mask = e->masks[cur];
    for (uint32_t b = 0; b < n; b++) {
        const struct gen_seq *s = seqs[b];
        uint32_t tb = ts ? ts[b] : t;
        for (uint32_t i = 0; i < t; i++) {
            /* Padding repeats the row's last token at its position. */
            uint32_t at = s->kv.len + (i < tb ? i : tb - 1);
            ids[b * t + i] = s->tokens[at];
            pos[b * t + i] = at;
        }
        int64_t *m = mask + (size_t)b * (past + t);
        if (reuse) {
            /* The previous run's mask of this row, then its new token. */
            memcpy(m, e->prev.mask + (size_t)b * past, past * sizeof *m);
            m[past] = 1;
            continue;
        }
        for (uint32_t k = 0; k < past + t; k++)
            m[k] = k < s->kv.len || (k >= past && k < past + tb);
        for (uint32_t l = 0; l < 2u * layers; l++)
            gen_kv_gather(&e->pool, &s->kv, l / 2, l % 2, e->past + ((size_t)l * n + b) * row,
                          past);
    }
    const float *past_of[2 * GEN_MAX_LAYERS];
    for (uint32_t l = 0; l < 2u * layers; l++)
        past_of[l] = reuse ? e->prev.present[l] : e->past + (size_t)l * n * row;
    struct tensor out[1 + 2 * GEN_MAX_LAYERS];
    if (execute(e, n, t, past, ids, pos, mask, past_of, past + t, out, state, err) != 0)
        return ST_ERROR;
    /* The new tokens' keys and values: positions [past, past + t) of each
     * present row, stored after the row's own cached tokens. */
    size_t prow = (size_t)ks->heads * (past + t) * ks->head_dim;
    for (uint32_t b = 0; b < n; b++) {
        struct gen_seq *s = seqs[b];
        uint32_t tb = ts ? ts[b] : t;
        if (gen_kv_seq_reserve(&e->pool, &s->kv, s->kv.len + tb) != 0) {
            e->backend->release(e->instance, *state);
            return error_set(err, 500, "out of memory for the KV cache");
        }
        for (uint32_t l = 0; l < 2u * layers; l++)
            gen_kv_scatter(&e->pool, &s->kv, l / 2, l % 2,
                           (const float *)out[1 + l].data + (size_t)b * prow, past + t, past, tb,
                           s->kv.len);
        s->kv.len += tb;
        publish(e, s);
    }
    *logits = out[0].data;
    if (keep && keep_run(e, seqs, n, past + t, mask, out, *state) == 0)
        *state = NULL;
    return 0;
}

/* ---- present "new": the past read where it lies, only new tokens out -------------- */

/* Tensor l's row of slot j. */
static float *kvbuf_row(const struct gen_engine *e, uint32_t l, uint32_t j)
{
    const struct gen_kv_shape *ks = &e->shape.kv;
    return e->kvbuf.t[l] + (size_t)j * ks->heads * e->kvbuf.cap * ks->head_dim;
}

/* Room for `rows` slots of `need` tokens each, the slots' tokens kept: a
 * relayout when the room must grow, or when it is a step or more larger
 * than needed (long rows left: the graph's attention spans the whole
 * room), rounded up to a step of GEN_KVBUF_STEP. 0 or -ENOMEM. */
static int kvbuf_fit(struct gen_engine *e, uint32_t rows, uint32_t need)
{
    struct gen_kvbuf *kb = &e->kvbuf;
    const struct gen_kv_shape *ks = &e->shape.kv;
    uint32_t ncap = (need + GEN_KVBUF_STEP - 1) / GEN_KVBUF_STEP * GEN_KVBUF_STEP;
    if (ncap > e->shape.max_context)
        ncap = need > e->shape.max_context ? need : e->shape.max_context;
    if (rows <= kb->rows_cap && need <= kb->cap && ncap + GEN_KVBUF_STEP > kb->cap)
        return 0;
    uint32_t nrows = kb->rows_cap;
    if (rows > nrows) {
        nrows = 2 * nrows < e->max_running ? 2 * nrows : e->max_running;
        if (rows > nrows)
            nrows = rows;
    }
    if (!kb->t && !(kb->t = mem_calloc(2u * ks->layers, sizeof *kb->t)))
        return -ENOMEM;
    uint64_t *ids = mem_realloc(kb->ids, nrows * sizeof *ids);
    if (ids)
        kb->ids = ids;
    uint32_t *len = ids ? mem_realloc(kb->len, nrows * sizeof *len) : NULL;
    if (!len)
        return -ENOMEM;
    kb->len = len;
    size_t d = ks->head_dim;
    for (uint32_t l = 0; l < 2u * ks->layers; l++) {
        /* Only the slots in use are written (a new one is gathered whole,
         * tail zeroed, when it is taken): each head's tokens, then zeros
         * to the room's end (masked, but read by the graph). */
        float *t = mem_alloc((size_t)nrows * ks->heads * ncap * d * sizeof *t);
        if (!t)
            return -ENOMEM;
        for (uint32_t j = 0; j < kb->n; j++)
            for (uint32_t h = 0; h < ks->heads; h++) {
                size_t at = (size_t)j * ks->heads + h;
                memcpy(t + at * ncap * d, kb->t[l] + at * kb->cap * d,
                       kb->len[j] * d * sizeof *t);
                memset(t + (at * ncap + kb->len[j]) * d, 0, (ncap - kb->len[j]) * d * sizeof *t);
            }
        mem_free(kb->t[l]);
        kb->t[l] = t;
    }
    kb->rows_cap = nrows;
    kb->cap = ncap;
    atomic_store_explicit(&e->stats.kvbuf_bytes,
                          2ull * ks->layers * nrows * ks->heads * ncap * d * sizeof(float),
                          memory_order_relaxed);
    return 0;
}

/* Makes the buffer's slots exactly the rows seqs[0, n), each with room
 * for its ts[b] new tokens; slot_of[b]: row b's slot. A leaving row's
 * slot takes the last slot's row; a new row (or one whose length the
 * buffer does not have) is gathered from its blocks. 0 or -ENOMEM. */
static int kvbuf_rows(struct gen_engine *e, struct gen_seq *const *seqs, uint32_t n, uint32_t t,
                      const uint32_t *ts, uint32_t *slot_of)
{
    struct gen_kvbuf *kb = &e->kvbuf;
    uint32_t layers2 = 2u * e->shape.kv.layers, need = 0;
    bool stays[kb->n + 1];
    memset(stays, 0, sizeof stays);
    for (uint32_t b = 0; b < n; b++) {
        const struct gen_seq *s = seqs[b];
        uint32_t end = s->kv.len + (ts ? ts[b] : t);
        need = end > need ? end : need;
        slot_of[b] = UINT32_MAX;
        for (uint32_t j = 0; j < kb->n; j++)
            if (kb->ids[j] == s->id && kb->len[j] == s->kv.len) {
                slot_of[b] = j;
                stays[j] = true;
                break;
            }
    }
    for (uint32_t j = kb->n; j-- > 0;) {
        if (stays[j])
            continue;
        /* Slots above j were settled already: the last one stays. */
        uint32_t last = --kb->n;
        if (j == last)
            continue;
        size_t row = (size_t)e->shape.kv.heads * kb->cap * e->shape.kv.head_dim;
        for (uint32_t l = 0; l < layers2; l++)
            memcpy(kvbuf_row(e, l, j), kvbuf_row(e, l, last), row * sizeof(float));
        kb->ids[j] = kb->ids[last];
        kb->len[j] = kb->len[last];
        for (uint32_t b = 0; b < n; b++)
            if (slot_of[b] == last)
                slot_of[b] = j;
    }
    if (kvbuf_fit(e, n, need) != 0)
        return -ENOMEM;
    for (uint32_t b = 0; b < n; b++) {
        if (slot_of[b] != UINT32_MAX)
            continue;
        const struct gen_seq *s = seqs[b];
        uint32_t j = kb->n++;
        for (uint32_t l = 0; l < layers2; l++)
            gen_kv_gather(&e->pool, &s->kv, l / 2, l % 2, kvbuf_row(e, l, j), kb->cap);
        kb->ids[j] = s->id;
        kb->len[j] = s->kv.len;
        slot_of[b] = j;
    }
    return 0;
}

static int run_new(struct gen_engine *e, struct gen_seq *const *seqs, uint32_t n, uint32_t t,
                   const uint32_t *ts, bool keep, const float **logits, void **state,
                   struct error *err)
{
    const struct gen_kv_shape *ks = &e->shape.kv;
    uint32_t layers2 = 2u * ks->layers, past = 0, slot_of[n], who[n];
    const float *past_of[2 * GEN_MAX_LAYERS];
    if (keep) {
        /* Decode rows: the past stays in e->kvbuf from run to run. */
        if (kvbuf_rows(e, seqs, n, t, ts, slot_of) != 0) {
            kvbuf_free(e);
            return error_set(err, 500, "out of memory for the decode rows' keys and values");
        }
        past = e->kvbuf.cap;
        for (uint32_t l = 0; l < layers2; l++)
            past_of[l] = e->kvbuf.t[l];
    } else {
        /* Prefill chunks: the rows' past gathered for this run. */
        for (uint32_t b = 0; b < n; b++) {
            slot_of[b] = b;
            past = seqs[b]->kv.len > past ? seqs[b]->kv.len : past;
        }
        size_t row = (size_t)ks->heads * past * ks->head_dim;
        if (grow((void **)&e->past, &e->past_cap, layers2 * n * row + 1, sizeof(float)))
            return error_set(err, 500, "out of memory");
        for (uint32_t l = 0; l < layers2; l++) {
            past_of[l] = e->past + (size_t)l * n * row;
            for (uint32_t b = 0; b < n; b++)
                gen_kv_gather(&e->pool, &seqs[b]->kv, l / 2, l % 2,
                              e->past + ((size_t)l * n + b) * row, past);
        }
    }
    for (uint32_t b = 0; b < n; b++)
        who[slot_of[b]] = b;
    size_t nt = (size_t)n * t;
    if (grow((void **)&e->ints, &e->ints_cap, 2 * nt, sizeof(int64_t)) ||
        grow((void **)&e->masks[0], &e->masks_cap[0], (size_t)n * (past + t), sizeof(int64_t)))
        return error_set(err, 500, "out of memory");
    int64_t *ids = e->ints, *pos = ids + nt, *mask = e->masks[0];
    for (uint32_t r = 0; r < n; r++) {
        const struct gen_seq *s = seqs[who[r]];
        uint32_t tb = ts ? ts[who[r]] : t;
        for (uint32_t i = 0; i < t; i++) {
            /* Padding repeats the row's last token at its position. */
            uint32_t at = s->kv.len + (i < tb ? i : tb - 1);
            ids[r * t + i] = s->tokens[at];
            pos[r * t + i] = at;
        }
        int64_t *m = mask + (size_t)r * (past + t);
        for (uint32_t k = 0; k < past + t; k++)
            m[k] = k < past ? k < s->kv.len : k - past < tb;
    }
    struct tensor out[1 + 2 * GEN_MAX_LAYERS];
    if (execute(e, n, t, past, ids, pos, mask, past_of, t, out, state, err) != 0)
        return ST_ERROR;
    /* The new tokens' keys and values ([n, heads, t, head_dim]) into the
     * rows' blocks, and for decode rows into their slots too. */
    size_t d = ks->head_dim, nrow = (size_t)ks->heads * t * d;
    for (uint32_t r = 0; r < n; r++) {
        struct gen_seq *s = seqs[who[r]];
        uint32_t tb = ts ? ts[who[r]] : t;
        if (gen_kv_seq_reserve(&e->pool, &s->kv, s->kv.len + tb) != 0) {
            e->backend->release(e->instance, *state);
            return error_set(err, 500, "out of memory for the KV cache");
        }
        for (uint32_t l = 0; l < layers2; l++) {
            const float *src = (const float *)out[1 + l].data + r * nrow;
            gen_kv_scatter(&e->pool, &s->kv, l / 2, l % 2, src, t, 0, tb, s->kv.len);
            if (keep)
                for (uint32_t h = 0; h < ks->heads; h++)
                    memcpy(kvbuf_row(e, l, r) + ((size_t)h * past + s->kv.len) * d,
                           src + (size_t)h * t * d, tb * d * sizeof(float));
        }
        s->kv.len += tb;
        if (keep)
            e->kvbuf.len[r] = s->kv.len;
        publish(e, s);
    }
    /* The logits in the caller's row order. */
    size_t lrow = (size_t)t * e->shape.vocab;
    const float *all = out[0].data;
    *logits = all;
    for (uint32_t r = 0; r < n; r++)
        if (who[r] != r) {
            if (grow((void **)&e->logits, &e->logits_cap, n * lrow, sizeof(float))) {
                e->backend->release(e->instance, *state);
                return error_set(err, 500, "out of memory");
            }
            for (uint32_t k = 0; k < n; k++)
                memcpy(e->logits + who[k] * lrow, all + k * lrow, lrow * sizeof(float));
            *logits = e->logits;
            break;
        }
    return 0;
}

int gen_run(struct gen_engine *e, struct gen_seq *const *seqs, uint32_t n, uint32_t t,
            const uint32_t *ts, bool keep, const float **logits, void **state, struct error *err)
{
    return e->shape.present_new ? run_new(e, seqs, n, t, ts, keep, logits, state, err)
                                : run_all(e, seqs, n, t, ts, keep, logits, state, err);
}

void gen_run_release(struct gen_engine *e, void *state)
{
    if (state)
        e->backend->release(e->instance, state);
}
