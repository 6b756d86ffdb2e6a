/*
 * arena: request-scoped bump allocator. Everything a request decodes (JSON
 * tree, tensor headers, converted tensor data) comes from its arena and is
 * released in one step by arena_reset() or arena_free().
 *
 * Allocations are 16-byte aligned. The arena has a ceiling on the total bytes
 * it hands out (`max`); beyond it, and on allocation failure, arena_alloc()
 * returns NULL. Not thread-safe: an arena belongs to one request at a time.
 */
#ifndef INFERD_BASE_ARENA_H
#define INFERD_BASE_ARENA_H

#include <stddef.h>

struct arena_chunk;

struct arena {
    struct arena_chunk *head; /* newest chunk first */
    size_t chunk_size;        /* default size of a new chunk */
    size_t used;              /* bytes handed out since the last reset */
    size_t max;               /* ceiling on `used` */
};

void arena_init(struct arena *a, size_t chunk_size, size_t max);
void *arena_alloc(struct arena *a, size_t n);
void *arena_calloc(struct arena *a, size_t count, size_t size);
char *arena_strndup(struct arena *a, const char *s, size_t n);
/* A point in an arena's life to go back to (arena_rewind). */
struct arena_mark {
    struct arena_chunk *head, *next; /* the newest chunk then, and the one after it */
    size_t off, used;
};
struct arena_mark arena_mark(const struct arena *a);
/* Takes back everything allocated since mark m (which must be the latest
 * mark still in use, and taken after the last reset): frees the chunks
 * made since, and the bytes handed out since count again toward `max`. */
void arena_rewind(struct arena *a, const struct arena_mark *m);
/* Frees every chunk but the first (kept for the next request). */
void arena_reset(struct arena *a);
void arena_free(struct arena *a);

#endif
