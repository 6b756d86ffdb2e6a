/*
 * sample: choosing the next token from a row of logits (greedy, temperature,
 * top-k, top-p) with a seeded generator, so that a seed reproduces a
 * generation exactly.
 *
 * The generator is xoshiro256** (Blackman and Vigna); gen_rng_seed fills
 * its four words with successive outputs of splitmix64 started at the seed;
 * gen_rng_uniform is (next() >> 11) * 2^-53.
 *
 * sample_token, exactly (a reimplementation following these steps draws
 * the same tokens):
 *   1. Greedy when !(temperature > 0) (so also NaN) or top_k == 1: the id of
 *      the highest logit, the lowest id on ties, NaN logits never chosen
 *      (all NaN: id 0). No draw from the generator.
 *   2. Candidates: the top_k highest logits (ties: lower id first) when
 *      1 < top_k < vocab, else every id (top_k <= 0 is off).
 *   3. One u = gen_rng_uniform() (every non-greedy call draws exactly one).
 *   4. Weights w = (float)exp(((double)logit - max) / temperature), max the
 *      highest candidate logit; a NaN logit weighs 0. This is the softmax of
 *      logits / temperature without its normalisation. Sums below are
 *      doubles. When the weights, added in increasing id order, sum to 0 or
 *      to a non-finite value (logits of +-inf), the result is the greedy
 *      choice among the candidates.
 *   5. top_p < 1: candidates in decreasing weight (ties: lower id first);
 *      the smallest prefix whose weight sum (added in that order) reaches
 *      top_p times the total is kept (at least one token, so top_p <= 0
 *      keeps one). top_p >= 1 or NaN keeps all.
 *   6. target = u * (sum of the kept weights, added in increasing id order);
 *      walking the kept ids in increasing order and adding their weights,
 *      the first id whose running sum exceeds target is the token (should
 *      rounding leave none, the last kept id of non-zero weight).
 * Costs: O(V) for the default top_k 0 / top_p 1, O(V log k) to select and order
 * the top k, and O(V + m log V) for a top_p prefix of m tokens.
 *
 * Threads: a gen_rng and a sample_scratch belong to one sequence or thread
 * at a time; sample_token keeps no other state.
 */
#ifndef INFERD_GEN_SAMPLE_H
#define INFERD_GEN_SAMPLE_H

#include <stdint.h>

struct gen_rng {
    uint64_t s[4];
}; /* xoshiro256**, seeded through splitmix64 */
void gen_rng_seed(struct gen_rng *r, uint64_t seed);
double gen_rng_uniform(struct gen_rng *r); /* [0, 1), 53 bits */

struct sample_params {
    float temperature;
    int32_t top_k;
    float top_p;
};

/* scratch: room for `vocab` entries, reused between calls (one per sequence or per thread). */
struct sample_scratch {
    float *probs;
    int32_t *ids;
    uint32_t cap;
};
int sample_scratch_init(struct sample_scratch *s, uint32_t vocab); /* 0 or -ENOMEM */
void sample_scratch_free(struct sample_scratch *s);                /* zeroes s; twice is fine */

/* temperature <= 0 (or top_k == 1): greedy, argmax, lowest id on ties, no rng draw. Otherwise:
 * logits / T, keep the top_k highest (top_k 0 = all), softmax, keep the smallest set of
 * highest-probability tokens whose mass reaches top_p (ties by lower id first), renormalise, draw
 * one with one gen_rng_uniform(). vocab >= 1 and <= s->cap (the header comment gives the exact
 * steps). */
int32_t sample_token(const float *logits, uint32_t vocab, const struct sample_params *p,
                     struct gen_rng *rng, struct sample_scratch *s);

#endif
