#include "gen/kvcache.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "base/mem.h"

static _Atomic uint64_t budget_bytes;
static _Atomic uint64_t reserved_bytes;

void gen_kv_budget_set(uint64_t bytes)
{
    atomic_store(&budget_bytes, bytes);
}

uint64_t gen_kv_budget(void)
{
    return atomic_load(&budget_bytes);
}

uint64_t gen_kv_reserved(void)
{
    return atomic_load(&reserved_bytes);
}

bool gen_kv_reserve_leaving(uint64_t bytes, uint64_t leave)
{
    uint64_t budget = atomic_load(&budget_bytes);
    uint64_t cur = atomic_load(&reserved_bytes);
    do {
        if (bytes > budget || leave > budget - bytes || cur > budget - bytes - leave)
            return false;
    } while (!atomic_compare_exchange_weak(&reserved_bytes, &cur, cur + bytes));
    return true;
}

bool gen_kv_reserve(uint64_t bytes)
{
    return gen_kv_reserve_leaving(bytes, 0);
}

void gen_kv_unreserve(uint64_t bytes)
{
    atomic_fetch_sub(&reserved_bytes, bytes);
}

size_t gen_kv_block_bytes(const struct gen_kv_shape *s)
{
    return (size_t)s->layers * 2u * s->heads * GEN_KV_BLOCK_TOKENS * s->head_dim * sizeof(float);
}

uint64_t gen_kv_bytes_for(const struct gen_kv_shape *s, uint32_t tokens)
{
    uint64_t blocks = (tokens + GEN_KV_BLOCK_TOKENS - 1) / GEN_KV_BLOCK_TOKENS;
    return blocks * gen_kv_block_bytes(s);
}

void gen_kv_pool_init(struct gen_kv_pool *p, const struct gen_kv_shape *shape)
{
    memset(p, 0, sizeof *p);
    p->shape = *shape;
    p->block_floats = gen_kv_block_bytes(shape) / sizeof(float);
}

void gen_kv_pool_trim(struct gen_kv_pool *p, uint32_t keep)
{
    while (p->nfree > keep)
        mem_free(p->free[--p->nfree]);
}

void gen_kv_pool_free(struct gen_kv_pool *p)
{
    gen_kv_pool_trim(p, 0);
    mem_free(p->free);
    p->free = NULL;
    p->cap = 0;
}

static float *block_get(struct gen_kv_pool *p)
{
    float *b = p->nfree ? p->free[--p->nfree] : mem_alloc(p->block_floats * sizeof(float));
    if (b)
        p->in_use++;
    return b;
}

static void block_put(struct gen_kv_pool *p, float *b)
{
    p->in_use--;
    if (p->nfree == p->cap) {
        uint32_t cap = p->cap ? p->cap * 2 : 64;
        float **n = mem_realloc(p->free, cap * sizeof *n);
        if (!n) {
            mem_free(b);
            return;
        }
        p->free = n;
        p->cap = cap;
    }
    p->free[p->nfree++] = b;
}

int gen_kv_seq_reserve(struct gen_kv_pool *p, struct gen_kv_seq *seq, uint32_t tokens)
{
    uint32_t need = (tokens + GEN_KV_BLOCK_TOKENS - 1) / GEN_KV_BLOCK_TOKENS;
    if (need > seq->cap) {
        float **n = mem_realloc(seq->blocks, need * sizeof *n);
        if (!n)
            return -ENOMEM;
        seq->blocks = n;
        seq->cap = need;
    }
    while (seq->nblocks < need) {
        float *b = block_get(p);
        if (!b)
            return -ENOMEM;
        seq->blocks[seq->nblocks++] = b;
    }
    return 0;
}

void gen_kv_seq_release(struct gen_kv_pool *p, struct gen_kv_seq *seq)
{
    for (uint32_t i = 0; i < seq->nblocks; i++)
        block_put(p, seq->blocks[i]);
    mem_free(seq->blocks);
    memset(seq, 0, sizeof *seq);
}

/* Offset of (layer, kv, head, token 0) inside a block. */
static size_t block_offset(const struct gen_kv_shape *s, uint32_t layer, uint32_t kv, uint32_t head)
{
    return (((size_t)layer * 2u + kv) * s->heads + head) * GEN_KV_BLOCK_TOKENS * s->head_dim;
}

void gen_kv_gather(const struct gen_kv_pool *p, const struct gen_kv_seq *seq, uint32_t layer,
                   uint32_t kv, float *dst, uint32_t stride)
{
    const struct gen_kv_shape *s = &p->shape;
    size_t d = s->head_dim;
    for (uint32_t h = 0; h < s->heads; h++) {
        float *out = dst + (size_t)h * stride * d;
        size_t off = block_offset(s, layer, kv, h);
        uint32_t done = 0;
        for (uint32_t b = 0; done < seq->len; b++) {
            uint32_t n =
                seq->len - done < GEN_KV_BLOCK_TOKENS ? seq->len - done : GEN_KV_BLOCK_TOKENS;
            memcpy(out + (size_t)done * d, seq->blocks[b] + off, (size_t)n * d * sizeof(float));
            done += n;
        }
        if (stride > seq->len)
            memset(out + (size_t)seq->len * d, 0, (size_t)(stride - seq->len) * d * sizeof(float));
    }
}

void gen_kv_scatter(const struct gen_kv_pool *p, struct gen_kv_seq *seq, uint32_t layer,
                    uint32_t kv, const float *src, uint32_t stride, uint32_t from, uint32_t n,
                    uint32_t pos)
{
    const struct gen_kv_shape *s = &p->shape;
    size_t d = s->head_dim;
    for (uint32_t h = 0; h < s->heads; h++) {
        const float *in = src + ((size_t)h * stride + from) * d;
        size_t off = block_offset(s, layer, kv, h);
        for (uint32_t i = 0; i < n;) {
            uint32_t at = pos + i, b = at / GEN_KV_BLOCK_TOKENS, t = at % GEN_KV_BLOCK_TOKENS;
            uint32_t run = GEN_KV_BLOCK_TOKENS - t < n - i ? GEN_KV_BLOCK_TOKENS - t : n - i;
            memcpy(seq->blocks[b] + off + (size_t)t * d, in + (size_t)i * d,
                   (size_t)run * d * sizeof(float));
            i += run;
        }
    }
}
