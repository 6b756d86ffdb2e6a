/*
 * kvcache: the key/value cache of a generative model's sequences.
 *
 * Budget. One process-wide byte budget (--kv-cache-bytes) covers every
 * generative model. A sequence reserves blocks as it needs them: its
 * prompt's when it is admitted, then one more each time it grows into a
 * new block. When the budget cannot give a running sequence its next
 * block, the engine preempts its youngest sequence (engine.h): what that
 * one held goes back, and it computes its cache again when it is admitted
 * again.
 *
 * Blocks. A sequence's cache is a list of blocks of GEN_KV_BLOCK_TOKENS
 * tokens, taken on demand as it grows (within its reservation) from its
 * engine's pool and given back when it ends; the pool keeps freed blocks
 * for reuse (and frees them when the engine goes idle). A
 * block holds, for every layer, the keys then the values, head by head:
 *     [layer][k = 0, v = 1][head][token][head_dim]   (FP32)
 * so a head's tokens of one block are contiguous and a gather is one copy
 * per (layer, k/v, head, block).
 *
 * Threads: the budget functions are atomic (any thread); a pool and its
 * sequences belong to one engine thread.
 */
#ifndef INFERD_GEN_KVCACHE_H
#define INFERD_GEN_KVCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GEN_KV_BLOCK_TOKENS 16u

/* ---- the budget ---------------------------------------------------------------- */

/* Sets the budget (startup, before any engine). */
void gen_kv_budget_set(uint64_t bytes);
uint64_t gen_kv_budget(void);
/* Bytes reserved now (all engines). */
uint64_t gen_kv_reserved(void);
/* Reserves bytes when they fit in what is left; false otherwise. */
bool gen_kv_reserve(uint64_t bytes);
/* The same, when `leave` bytes are still free afterwards. */
bool gen_kv_reserve_leaving(uint64_t bytes, uint64_t leave);
void gen_kv_unreserve(uint64_t bytes);

/* ---- blocks ------------------------------------------------------------------------ */

struct gen_kv_shape {
    uint32_t layers, heads, head_dim;
};

struct gen_kv_pool {
    struct gen_kv_shape shape;
    size_t block_floats;
    float **free; /* blocks kept for reuse */
    uint32_t nfree, cap;
    uint32_t in_use; /* blocks held by sequences */
};

/* One sequence's cache: tokens [0, len) are stored. */
struct gen_kv_seq {
    float **blocks;
    uint32_t nblocks, cap;
    uint32_t len;
};

void gen_kv_pool_init(struct gen_kv_pool *p, const struct gen_kv_shape *shape);
/* Frees the kept blocks (every sequence released first). */
void gen_kv_pool_free(struct gen_kv_pool *p);
/* Keeps at most `keep` free blocks. */
void gen_kv_pool_trim(struct gen_kv_pool *p, uint32_t keep);
size_t gen_kv_block_bytes(const struct gen_kv_shape *s);
/* Bytes of the blocks that `tokens` tokens take. */
uint64_t gen_kv_bytes_for(const struct gen_kv_shape *s, uint32_t tokens);

/* Makes room for `tokens` tokens in seq. 0 or -ENOMEM. */
int gen_kv_seq_reserve(struct gen_kv_pool *p, struct gen_kv_seq *seq, uint32_t tokens);
/* Gives seq's blocks back to the pool; seq is empty afterwards. */
void gen_kv_seq_release(struct gen_kv_pool *p, struct gen_kv_seq *seq);

/* Copies tokens [0, seq->len) of (layer, kv) into dst laid out as
 * [heads][stride][head_dim] (stride >= seq->len); the tokens
 * [seq->len, stride) of each head are zeroed. */
void gen_kv_gather(const struct gen_kv_pool *p, const struct gen_kv_seq *seq, uint32_t layer,
                   uint32_t kv, float *dst, uint32_t stride);
/* Stores n tokens of (layer, kv) from src laid out as [heads][stride][head_dim],
 * tokens [from, from + n), at positions [pos, pos + n) of seq (room
 * reserved). seq->len is not changed (the caller sets it once every layer
 * is stored). */
void gen_kv_scatter(const struct gen_kv_pool *p, struct gen_kv_seq *seq, uint32_t layer,
                    uint32_t kv, const float *src, uint32_t stride, uint32_t from, uint32_t n,
                    uint32_t pos);

#endif
