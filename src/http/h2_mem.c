#include "http/h2_mem.h"

#include <string.h>

#include "base/mem.h"
#include "base/status.h"

/* Blocks kept per class: as many as fit in this many bytes, at least
 * H2_MEM_MIN_PER_CLASS. */
#define H2_MEM_CLASS_BYTES (64 * 1024)
#define H2_MEM_MIN_PER_CLASS 16

/* Every block carries a 16-byte header (keeps malloc's alignment) with
 * its class, or its size when it is too large to cache. A cached block's
 * payload holds the next free block of its class. */
struct h2_mem_block {
    union {
        struct {
            int cls;     /* size class, or -1: not cached */
            size_t size; /* usable bytes after the header */
        } h;
        _Alignas(16) char pad_[16];
    } u;
};

static int size_class(size_t size)
{
    for (int c = 0; c < H2_MEM_CLASSES; c++)
        if (size <= (size_t)1 << (H2_MEM_MIN_SHIFT + c))
            return c;
    return ST_ERROR;
}

static struct h2_mem_block *next_free(const struct h2_mem_block *b)
{
    struct h2_mem_block *next;
    memcpy(&next, (const void *)(b + 1), sizeof next);
    return next;
}

static uint32_t class_limit(int c)
{
    uint32_t n = (uint32_t)(H2_MEM_CLASS_BYTES >> (H2_MEM_MIN_SHIFT + c));
    return n > H2_MEM_MIN_PER_CLASS ? n : H2_MEM_MIN_PER_CLASS;
}

static void *cache_alloc(struct h2_mem *m, size_t size)
{
    int c = size_class(size);
    struct h2_mem_block *b;
    if (c >= 0 && m->free[c]) {
        b = m->free[c];
        m->free[c] = next_free(b);
        m->nfree[c]--;
        return b + 1;
    }
    size_t usable = c >= 0 ? (size_t)1 << (H2_MEM_MIN_SHIFT + c) : size;
    if (usable > SIZE_MAX - sizeof *b)
        return NULL;
    b = mem_alloc(sizeof *b + usable);
    if (!b)
        return NULL;
    b->u.h.cls = c;
    b->u.h.size = usable;
    return b + 1;
}

static void cache_free(struct h2_mem *m, void *ptr)
{
    if (!ptr)
        return;
    struct h2_mem_block *b = (struct h2_mem_block *)ptr - 1;
    int c = b->u.h.cls;
    if (c < 0 || m->nfree[c] >= class_limit(c)) {
        mem_free(b);
        return;
    }
    memcpy(ptr, &m->free[c], sizeof m->free[c]);
    m->free[c] = b;
    m->nfree[c]++;
}

static void *ng_malloc(size_t size, void *ud)
{
    return cache_alloc(ud, size);
}

static void ng_free(void *ptr, void *ud)
{
    cache_free(ud, ptr);
}

static void *ng_calloc(size_t n, size_t size, void *ud)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = cache_alloc(ud, n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

static void *ng_realloc(void *ptr, size_t size, void *ud)
{
    if (!ptr)
        return cache_alloc(ud, size);
    struct h2_mem_block *b = (struct h2_mem_block *)ptr - 1;
    if (size <= b->u.h.size)
        return ptr;
    void *p = cache_alloc(ud, size);
    if (!p)
        return NULL;
    memcpy(p, ptr, b->u.h.size);
    cache_free(ud, ptr);
    return p;
}

void h2_mem_init(struct h2_mem *m)
{
    memset(m, 0, sizeof *m);
    m->ng = (nghttp2_mem){m, ng_malloc, ng_free, ng_calloc, ng_realloc};
}

void h2_mem_release(struct h2_mem *m)
{
    for (int c = 0; c < H2_MEM_CLASSES; c++) {
        while (m->free[c]) {
            struct h2_mem_block *b = m->free[c];
            m->free[c] = next_free(b);
            mem_free(b);
        }
        m->nfree[c] = 0;
    }
}
