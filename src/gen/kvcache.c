#include "gen/kvcache.h"

#include <errno.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <string.h>

#include "base/mem.h"

static _Atomic uint64_t budget_bytes;
static _Atomic uint64_t reserved_bytes;
static _Atomic uint64_t idle_bytes; /* of the prefix tables' idle blocks (all engines) */

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

uint64_t gen_kv_idle(void)
{
    return atomic_load(&idle_bytes);
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

void gen_kv_pool_init(struct gen_kv_pool *p, const struct gen_kv_shape *shape, bool prefix_cache)
{
    memset(p, 0, sizeof *p);
    p->shape = *shape;
    p->block_floats = gen_kv_block_bytes(shape) / sizeof(float);
    p->prefix_cache = prefix_cache;
}

void gen_kv_pool_trim(struct gen_kv_pool *p, uint32_t keep)
{
    while (p->nfree > keep)
        mem_free(p->free[--p->nfree]);
}

void gen_kv_pool_free(struct gen_kv_pool *p)
{
    gen_kv_evict_idle(p, UINT32_MAX);
    gen_kv_pool_trim(p, 0);
    mem_free(p->free);
    mem_free(p->table);
    p->free = NULL;
    p->table = NULL;
    p->cap = p->table_size = 0;
}

static struct gen_kv_block *block_get(struct gen_kv_pool *p)
{
    struct gen_kv_block *b =
        p->nfree ? p->free[--p->nfree]
                 : mem_alloc(sizeof(struct gen_kv_block) + p->block_floats * sizeof(float));
    if (!b)
        return NULL;
    b->refs = 1;
    b->cached = false;
    b->hnext = b->idle_prev = b->idle_next = NULL;
    p->in_use++;
    return b;
}

static void block_put(struct gen_kv_pool *p, struct gen_kv_block *b)
{
    p->in_use--;
    if (p->nfree == p->cap) {
        uint32_t cap = p->cap ? p->cap * 2 : 64;
        struct gen_kv_block **n = mem_realloc(p->free, cap * sizeof *n);
        if (!n) {
            mem_free(b);
            return;
        }
        p->free = n;
        p->cap = cap;
    }
    p->free[p->nfree++] = b;
}

/* ---- the prefix table -------------------------------------------------------------- */

/* The hash of a prefix whose blocks before this one hash to `prev`. */
static uint64_t hash_block(uint64_t prev, const int32_t *tokens)
{
    uint64_t h = prev ^ 0x9e3779b97f4a7c15ull;
    for (uint32_t i = 0; i < GEN_KV_BLOCK_TOKENS; i++) {
        h ^= (uint32_t)tokens[i];
        h *= 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    return h ? h : 1;
}

static struct gen_kv_block **bucket(const struct gen_kv_pool *p, uint64_t h)
{
    return &p->table[h & (p->table_size - 1)];
}

static struct gen_kv_block *table_find(const struct gen_kv_pool *p, uint64_t h)
{
    if (!p->table_size)
        return NULL;
    for (struct gen_kv_block *b = *bucket(p, h); b; b = b->hnext)
        if (b->hash == h)
            return b;
    return NULL;
}

static bool table_insert(struct gen_kv_pool *p, struct gen_kv_block *b, uint64_t h)
{
    if (p->ncached >= p->table_size) {
        uint32_t size = p->table_size ? p->table_size * 2 : 256;
        struct gen_kv_block **t = mem_calloc(size, sizeof *t);
        if (!t)
            return false;
        for (uint32_t i = 0; i < p->table_size; i++)
            for (struct gen_kv_block *x = p->table[i], *next; x; x = next) {
                next = x->hnext;
                x->hnext = t[x->hash & (size - 1)];
                t[x->hash & (size - 1)] = x;
            }
        mem_free(p->table);
        p->table = t;
        p->table_size = size;
    }
    b->hash = h;
    b->cached = true;
    b->hnext = *bucket(p, h);
    *bucket(p, h) = b;
    p->ncached++;
    return true;
}

static void table_remove(struct gen_kv_pool *p, struct gen_kv_block *b)
{
    struct gen_kv_block **at = bucket(p, b->hash);
    while (*at != b)
        at = &(*at)->hnext;
    *at = b->hnext;
    b->cached = false;
    p->ncached--;
}

static void idle_unlink(struct gen_kv_pool *p, struct gen_kv_block *b)
{
    if (b->idle_prev)
        b->idle_prev->idle_next = b->idle_next;
    else
        p->idle_head = b->idle_next;
    if (b->idle_next)
        b->idle_next->idle_prev = b->idle_prev;
    else
        p->idle_tail = b->idle_prev;
    b->idle_prev = b->idle_next = NULL;
    p->nidle--;
    atomic_fetch_sub(&idle_bytes, gen_kv_block_bytes(&p->shape));
}

/* At most a quarter of the budget stays idle in the table. */
static void idle_append(struct gen_kv_pool *p, struct gen_kv_block *b)
{
    b->idle_prev = p->idle_tail;
    b->idle_next = NULL;
    if (p->idle_tail)
        p->idle_tail->idle_next = b;
    else
        p->idle_head = b;
    p->idle_tail = b;
    p->nidle++;
    atomic_fetch_add(&idle_bytes, gen_kv_block_bytes(&p->shape));
    uint64_t max = gen_kv_budget() / 4 / gen_kv_block_bytes(&p->shape);
    if (p->nidle > max)
        gen_kv_evict_idle(p, p->nidle - (uint32_t)max);
}

/* One reference on b dropped: a block of nobody goes idle (table) or back
 * to the memory pool. */
static void block_unref(struct gen_kv_pool *p, struct gen_kv_block *b)
{
    if (--b->refs)
        return;
    if (b->cached)
        idle_append(p, b);
    else
        block_put(p, b);
}

static void block_ref(struct gen_kv_pool *p, struct gen_kv_block *b)
{
    if (b->refs++ == 0)
        idle_unlink(p, b);
}

uint32_t gen_kv_evict_idle(struct gen_kv_pool *p, uint32_t n)
{
    uint32_t done = 0;
    while (done < n && p->idle_head) {
        struct gen_kv_block *b = p->idle_head;
        idle_unlink(p, b);
        table_remove(p, b);
        block_put(p, b);
        gen_kv_unreserve(gen_kv_block_bytes(&p->shape));
        done++;
    }
    return done;
}

/* ---- a sequence's blocks ------------------------------------------------------------- */

static int seq_room(struct gen_kv_seq *seq, uint32_t nblocks)
{
    if (nblocks <= seq->cap)
        return 0;
    struct gen_kv_block **n = mem_realloc(seq->blocks, nblocks * sizeof *n);
    if (!n)
        return -ENOMEM;
    seq->blocks = n;
    seq->cap = nblocks;
    return 0;
}

int gen_kv_seq_reserve(struct gen_kv_pool *p, struct gen_kv_seq *seq, uint32_t tokens)
{
    uint32_t need = (tokens + GEN_KV_BLOCK_TOKENS - 1) / GEN_KV_BLOCK_TOKENS;
    if (seq_room(seq, need) != 0)
        return -ENOMEM;
    while (seq->nblocks < need) {
        struct gen_kv_block *b = block_get(p);
        if (!b)
            return -ENOMEM;
        seq->blocks[seq->nblocks++] = b;
    }
    return 0;
}

void gen_kv_seq_release(struct gen_kv_pool *p, struct gen_kv_seq *seq)
{
    for (uint32_t i = 0; i < seq->nblocks; i++)
        block_unref(p, seq->blocks[i]);
    mem_free(seq->blocks);
    memset(seq, 0, sizeof *seq);
}

uint32_t gen_kv_seq_attach(struct gen_kv_pool *p, struct gen_kv_seq *seq, const int32_t *tokens,
                           uint32_t n)
{
    if (!p->prefix_cache)
        return 0;
    atomic_fetch_add_explicit(&p->queried_tokens, n, memory_order_relaxed);
    uint32_t full = n / GEN_KV_BLOCK_TOKENS;
    uint64_t h = 0;
    for (uint32_t i = 0; i < full; i++) {
        uint64_t next = hash_block(h, tokens + (size_t)i * GEN_KV_BLOCK_TOKENS);
        struct gen_kv_block *b = table_find(p, next);
        if (!b || seq_room(seq, i + 1) != 0)
            break;
        block_ref(p, b);
        seq->blocks[seq->nblocks++] = b;
        seq->prev_hash = h;
        h = next;
    }
    seq->nshared = seq->nhashed = seq->nblocks;
    seq->hash = h;
    uint32_t hit = seq->nshared * GEN_KV_BLOCK_TOKENS;
    atomic_fetch_add_explicit(&p->hit_tokens, hit, memory_order_relaxed);
    return hit;
}

void gen_kv_seq_publish(struct gen_kv_pool *p, struct gen_kv_seq *seq, const int32_t *tokens,
                        uint32_t *moved, uint32_t *dropped)
{
    *moved = *dropped = 0;
    if (!p->prefix_cache)
        return;
    while ((seq->nhashed + 1) * GEN_KV_BLOCK_TOKENS <= seq->len) {
        uint32_t i = seq->nhashed;
        uint64_t h = hash_block(seq->hash, tokens + (size_t)i * GEN_KV_BLOCK_TOKENS);
        if (i != seq->nshared)
            break; /* a block that could not be published: the rest stay its own */
        struct gen_kv_block *own = seq->blocks[i], *b = table_find(p, h);
        if (b) {
            block_ref(p, b); /* the same prefix is there: share it */
            seq->blocks[i] = b;
            block_unref(p, own);
            ++*dropped;
        } else if (table_insert(p, own, h)) {
            ++*moved;
        } else {
            break;
        }
        seq->prev_hash = seq->hash;
        seq->hash = h;
        seq->nhashed++;
        seq->nshared++;
    }
}

int gen_kv_seq_own_tail(struct gen_kv_pool *p, struct gen_kv_seq *seq)
{
    uint32_t i = seq->len / GEN_KV_BLOCK_TOKENS;
    if (i >= seq->nshared)
        return 0;
    if (i + 1 != seq->nshared)
        return -EINVAL; /* only the last table block is ever written into */
    struct gen_kv_block *shared = seq->blocks[i], *own = block_get(p);
    if (!own)
        return -ENOMEM;
    memcpy(own->data, shared->data, p->block_floats * sizeof(float));
    seq->blocks[i] = own;
    block_unref(p, shared);
    seq->nshared = seq->nhashed = i;
    seq->hash = seq->prev_hash;
    return 0;
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
            memcpy(out + (size_t)done * d, seq->blocks[b]->data + off, (size_t)n * d * sizeof(float));
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
            memcpy(seq->blocks[b]->data + off + (size_t)t * d, in + (size_t)i * d,
                   (size_t)run * d * sizeof(float));
            i += run;
        }
    }
}
