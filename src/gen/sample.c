#include "gen/sample.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/rand.h"

/* ---- the generator --------------------------------------------------------- */

void gen_rng_seed(struct gen_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = rand_splitmix64(&seed);
}

double gen_rng_uniform(struct gen_rng *r)
{
    return rand_unit(rand_xoshiro256ss(r->s));
}

/* ---- scratch ---------------------------------------------------------------- */

int sample_scratch_init(struct sample_scratch *s, uint32_t vocab)
{
    s->probs = mem_calloc(vocab ? vocab : 1, sizeof *s->probs);
    s->ids = mem_calloc(vocab ? vocab : 1, sizeof *s->ids);
    s->cap = vocab;
    if (!s->probs || !s->ids) {
        sample_scratch_free(s);
        return -ENOMEM;
    }
    return 0;
}

void sample_scratch_free(struct sample_scratch *s)
{
    mem_free(s->probs);
    mem_free(s->ids);
    memset(s, 0, sizeof *s);
}

/* ---- ordering --------------------------------------------------------------- */

/* Whether id a ranks before id b by value v[]: higher first, then lower id;
 * NaN after every number. */
static bool ranks_before(const float *v, int32_t a, int32_t b)
{
    float x = v[a], y = v[b];
    if (isnan(x) || isnan(y)) {
        if (!isnan(x))
            return true;
        if (!isnan(y))
            return false;
        return a < b;
    }
    return x > y || (x == y && a < b);
}

/* A binary heap of ids; best_first: the root ranks before all others, else
 * it ranks after all others. */
struct id_heap {
    int32_t *ids;
    size_t n;
    const float *v;
    bool best_first;
};

static bool heap_above(const struct id_heap *h, int32_t a, int32_t b)
{
    return h->best_first ? ranks_before(h->v, a, b) : ranks_before(h->v, b, a);
}

static void sift_down(struct id_heap *h, size_t i)
{
    int32_t x = h->ids[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && heap_above(h, h->ids[c + 1], h->ids[c]))
            c++;
        if (!heap_above(h, h->ids[c], x))
            break;
        h->ids[i] = h->ids[c];
        i = c;
    }
    h->ids[i] = x;
}

static void heapify(struct id_heap *h)
{
    for (size_t i = h->n / 2; i-- > 0;)
        sift_down(h, i);
}

static int cmp_id(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* ---- sampling --------------------------------------------------------------- */

/* The id that ranks before all others (ranks_before): the first number,
 * then each strictly greater one (a tie keeps the lower id; a NaN is
 * greater than nothing); id 0 when all are NaN. One compare per logit:
 * greedy decoding runs it for every token. */
static int32_t argmax(const float *logits, uint32_t vocab)
{
    uint32_t i = 0;
    while (i < vocab && isnan(logits[i]))
        i++;
    if (i == vocab)
        return 0;
    uint32_t best = i;
    float top = logits[i];
    for (i++; i < vocab; i++)
        if (logits[i] > top) {
            top = logits[i];
            best = i;
        }
    return (int32_t)best;
}

/* The k highest logits into ids[0..k), in increasing id order. */
static void select_top_k(const float *logits, uint32_t vocab, uint32_t k, int32_t *ids)
{
    struct id_heap h = {ids, 0, logits, false}; /* root: the worst kept */
    for (uint32_t i = 0; i < vocab; i++) {
        if (h.n < k) {
            ids[h.n++] = (int32_t)i;
            if (h.n == k)
                heapify(&h);
        } else if (ranks_before(logits, (int32_t)i, ids[0])) {
            ids[0] = (int32_t)i;
            sift_down(&h, 0);
        }
    }
    qsort(ids, k, sizeof *ids, cmp_id);
}

/* Keeps the smallest prefix of ids[0..n) by decreasing weight whose mass
 * reaches want; moves it to ids[0..m) in increasing id order; returns m. */
static uint32_t keep_top_p(const float *w, int32_t *ids, uint32_t n, double want)
{
    struct id_heap h = {ids, n, w, true};
    heapify(&h);
    double mass = 0;
    do {
        int32_t best = ids[0];
        ids[0] = ids[--h.n];
        ids[h.n] = best; /* the kept ones collect at the end, best last */
        sift_down(&h, 0);
        mass += w[best];
    } while (h.n > 0 && mass < want);
    uint32_t m = n - (uint32_t)h.n;
    memmove(ids, ids + h.n, m * sizeof *ids);
    qsort(ids, m, sizeof *ids, cmp_id);
    return m;
}

int32_t sample_token(const float *logits, uint32_t vocab, const struct sample_params *p,
                     struct gen_rng *rng, struct sample_scratch *s)
{
    if (!(p->temperature > 0) || p->top_k == 1)
        return argmax(logits, vocab);
    double u = gen_rng_uniform(rng);

    int32_t *ids = s->ids;
    float *w = s->probs; /* indexed by id */
    uint32_t n = vocab;
    if (p->top_k > 1 && (uint32_t)p->top_k < vocab) {
        n = (uint32_t)p->top_k;
        select_top_k(logits, vocab, n, ids);
    } else {
        for (uint32_t i = 0; i < vocab; i++)
            ids[i] = (int32_t)i;
    }

    int32_t best = ids[0];
    for (uint32_t j = 1; j < n; j++)
        if (ranks_before(logits, ids[j], best))
            best = ids[j];
    double max = logits[best], total = 0;
    for (uint32_t j = 0; j < n; j++) {
        float l = logits[ids[j]];
        w[ids[j]] = isnan(l) ? 0.0f : (float)exp(((double)l - max) / p->temperature);
        total += w[ids[j]];
    }
    if (!(total > 0) || !isfinite(total))
        return best;

    if (p->top_p < 1.0f) {
        n = keep_top_p(w, ids, n, (double)p->top_p * total);
        total = 0;
        for (uint32_t j = 0; j < n; j++)
            total += w[ids[j]];
    }

    double target = u * total, run = 0;
    int32_t last = ids[0];
    for (uint32_t j = 0; j < n; j++) {
        if (w[ids[j]] == 0.0f)
            continue;
        run += w[ids[j]];
        if (run > target)
            return ids[j];
        last = ids[j];
    }
    return last;
}
