#include "base/arena.h"

#include <stdint.h>
#include <string.h>

#include "base/mem.h"

#define ARENA_ALIGN 16

struct arena_chunk {
    struct arena_chunk *next;
    size_t size; /* usable bytes in data[] */
    size_t off;  /* next free byte */
    _Alignas(ARENA_ALIGN) unsigned char data[];
};

void arena_init(struct arena *a, size_t chunk_size, size_t max)
{
    a->head = NULL;
    a->chunk_size = chunk_size;
    a->used = 0;
    a->max = max;
}

static struct arena_chunk *chunk_new(size_t size)
{
    struct arena_chunk *c = mem_alloc(sizeof *c + size);
    if (!c)
        return NULL;
    c->next = NULL;
    c->size = size;
    c->off = 0;
    return c;
}

void *arena_alloc(struct arena *a, size_t n)
{
    size_t rounded = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (rounded < n || rounded > a->max - a->used)
        return NULL;
    struct arena_chunk *c = a->head;
    if (!c || c->size - c->off < rounded) {
        size_t size = rounded > a->chunk_size ? rounded : a->chunk_size;
        struct arena_chunk *fresh = chunk_new(size);
        if (!fresh)
            return NULL;
        if (c && rounded > a->chunk_size) {
            /* A large block gets its own chunk behind the current one so the
             * current chunk's free space stays usable. */
            fresh->next = c->next;
            c->next = fresh;
        } else {
            fresh->next = c;
            a->head = fresh;
        }
        c = fresh;
    }
    void *p = c->data + c->off;
    c->off += rounded;
    a->used += rounded;
    return p;
}

void *arena_calloc(struct arena *a, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    void *p = arena_alloc(a, count * size);
    if (p)
        memset(p, 0, count * size);
    return p;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
    char *d = arena_alloc(a, n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

struct arena_mark arena_mark(const struct arena *a)
{
    struct arena_mark m = {.head = a->head, .used = a->used};
    if (a->head) {
        m.next = a->head->next;
        m.off = a->head->off;
    }
    return m;
}

/* Chunks made after a mark sit before its head (new heads) or between its
 * head and the chunk that followed it (large blocks go behind the head). */
void arena_rewind(struct arena *a, const struct arena_mark *m)
{
    struct arena_chunk *c = a->head;
    while (c != m->head) {
        struct arena_chunk *next = c->next;
        mem_free(c);
        c = next;
    }
    if (m->head) {
        c = m->head->next;
        while (c != m->next) {
            struct arena_chunk *next = c->next;
            mem_free(c);
            c = next;
        }
        m->head->next = m->next;
        m->head->off = m->off;
    }
    a->head = m->head;
    a->used = m->used;
}

void arena_reset(struct arena *a)
{
    struct arena_chunk *keep = NULL, *c = a->head;
    /* Keep the smallest standard-size chunk; free the rest. */
    while (c) {
        struct arena_chunk *next = c->next;
        if (!keep && c->size == a->chunk_size) {
            keep = c;
            keep->next = NULL;
            keep->off = 0;
        } else {
            mem_free(c);
        }
        c = next;
    }
    a->head = keep;
    a->used = 0;
}

void arena_free(struct arena *a)
{
    struct arena_chunk *c = a->head;
    while (c) {
        struct arena_chunk *next = c->next;
        mem_free(c);
        c = next;
    }
    a->head = NULL;
    a->used = 0;
}
