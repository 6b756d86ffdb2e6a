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
 * engine's pool and given back when it ends; the pool keeps freed memory
 * for reuse (and frees it when the engine goes idle). A
 * block holds, for every layer, the keys then the values, head by head:
 *     [layer][k = 0, v = 1][head][token][head_dim]   (FP32)
 * so a head's tokens of one block are contiguous and a gather is one copy
 * per (layer, k/v, head, block).
 *
 * Prefix cache. A full block is published in the pool's table under the
 * hash of every token from the sequence's start through the block's end
 * (gen_kv_seq_publish): a later sequence whose tokens begin the same way
 * attaches those blocks instead of computing them (gen_kv_seq_attach), as
 * vLLM's automatic prefix caching does. A sequence's leading `nshared`
 * blocks are the table's, reference-counted; the rest are its own. A
 * table block is never written: before a sequence writes into one (its
 * whole prompt was found, and its last prompt token must be run again for
 * its logits), it takes a copy of its own (gen_kv_seq_own_tail: copy on
 * write). The bytes of the table's blocks are the cache's, not any
 * sequence's: publishing moves a block's bytes from the sequence's
 * reservation to the cache, and the cache gives them back when it evicts
 * a block. A table block no sequence holds is idle, kept for the next
 * sequence that shares its prefix, and evicted oldest first when a
 * reservation needs room (gen_kv_evict_idle) or when more than a quarter of
 * the budget is idle.
 *
 * Threads: the budget functions are atomic (any thread); a pool and its
 * sequences belong to one engine thread (its counters are read by the
 * metrics too).
 */
#ifndef INFERD_GEN_KVCACHE_H
#define INFERD_GEN_KVCACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GEN_KV_BLOCK_TOKENS 16u

/* ---- the budget ---------------------------------------------------------------- */

/* Sets the budget (startup, before any engine). */
void gen_kv_budget_set(uint64_t bytes);
uint64_t gen_kv_budget(void);
/* Bytes reserved now (all engines), idle prefix-cache blocks included. */
uint64_t gen_kv_reserved(void);
/* Of those, the idle prefix-cache blocks' (evicted when room is needed). */
uint64_t gen_kv_idle(void);
/* Reserves bytes when they fit in what is left; false otherwise. */
bool gen_kv_reserve(uint64_t bytes);
/* The same, when `leave` bytes are still free afterwards. */
bool gen_kv_reserve_leaving(uint64_t bytes, uint64_t leave);
void gen_kv_unreserve(uint64_t bytes);

/* ---- blocks ------------------------------------------------------------------------ */

struct gen_kv_shape {
    uint32_t layers, heads, head_dim;
};

struct gen_kv_block {
    uint32_t refs;            /* sequences holding it */
    bool cached;              /* in the prefix table */
    uint64_t hash;            /* cached: its tokens' prefix */
    struct gen_kv_block *hnext;              /* table chain */
    struct gen_kv_block *idle_prev, *idle_next; /* cached and held by nobody */
    float data[];
};

struct gen_kv_pool {
    struct gen_kv_shape shape;
    size_t block_floats;
    struct gen_kv_block **free; /* memory kept for reuse */
    uint32_t nfree, cap;
    uint32_t in_use; /* blocks held by sequences or the table */
    /* The prefix table (off: nothing is published or attached). */
    bool prefix_cache;
    struct gen_kv_block **table;
    uint32_t table_size;
    _Atomic uint32_t ncached; /* table blocks (the metrics read it) */
    struct gen_kv_block *idle_head, *idle_tail; /* oldest first */
    uint32_t nidle;
    _Atomic uint64_t queried_tokens, hit_tokens; /* gen_kv_seq_attach's */
};

/* One sequence's cache: tokens [0, len) are stored; blocks [0, nshared)
 * are the table's. */
struct gen_kv_seq {
    struct gen_kv_block **blocks;
    uint32_t nblocks, cap;
    uint32_t len;
    uint32_t nshared;
    uint32_t nhashed;   /* leading full blocks whose hash is in `hash` */
    uint64_t hash;      /* of tokens [0, nhashed * GEN_KV_BLOCK_TOKENS) */
    uint64_t prev_hash; /* of the blocks before the last hashed one */
};

void gen_kv_pool_init(struct gen_kv_pool *p, const struct gen_kv_shape *shape, bool prefix_cache);
/* Frees the table's blocks (giving their bytes back to the budget) and the
 * kept memory (every sequence released first). */
void gen_kv_pool_free(struct gen_kv_pool *p);
/* Keeps at most `keep` free blocks' memory. */
void gen_kv_pool_trim(struct gen_kv_pool *p, uint32_t keep);
/* Evicts up to n idle table blocks, oldest first, giving their bytes back
 * to the budget; returns how many. */
uint32_t gen_kv_evict_idle(struct gen_kv_pool *p, uint32_t n);
size_t gen_kv_block_bytes(const struct gen_kv_shape *s);
/* Bytes of the blocks that `tokens` tokens take. */
uint64_t gen_kv_bytes_for(const struct gen_kv_shape *s, uint32_t tokens);

/* Makes room for `tokens` tokens in seq (blocks of its own). 0 or -ENOMEM. */
int gen_kv_seq_reserve(struct gen_kv_pool *p, struct gen_kv_seq *seq, uint32_t tokens);
/* Gives seq's blocks back: its own to the pool's memory, the table's to
 * the table (idle when nobody else holds them); seq is empty afterwards. */
void gen_kv_seq_release(struct gen_kv_pool *p, struct gen_kv_seq *seq);
/* An empty seq takes the table's blocks of its tokens' longest cached
 * prefix of whole blocks among tokens[0, n); returns the tokens they hold
 * (seq->len is left to the caller: at most that). */
uint32_t gen_kv_seq_attach(struct gen_kv_pool *p, struct gen_kv_seq *seq, const int32_t *tokens,
                           uint32_t n);
/* Publishes seq's full blocks [nhashed, len / GEN_KV_BLOCK_TOKENS), tokens
 * being its token ids: each becomes the table's (*moved counts them: their
 * bytes are now the cache's), or, when the table has that prefix already,
 * is replaced by the table's block (*dropped counts them: their bytes are
 * no longer needed). Nothing without the prefix cache. */
void gen_kv_seq_publish(struct gen_kv_pool *p, struct gen_kv_seq *seq, const int32_t *tokens,
                        uint32_t *moved, uint32_t *dropped);
/* Before seq writes at position seq->len: the table block there (only the
 * last of its table blocks can be: a prompt found whole, whose last token
 * runs again) is replaced by a copy of its own (copy on write; nshared
 * drops by one). 0, -ENOMEM, or -EINVAL for an earlier table block. */
int gen_kv_seq_own_tail(struct gen_kv_pool *p, struct gen_kv_seq *seq);

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
