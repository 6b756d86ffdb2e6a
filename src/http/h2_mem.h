/*
 * h2_mem: the allocator an HTTP/2 session gives nghttp2 (nghttp2_mem).
 *
 * nghttp2 allocates and frees the same few small objects for every stream
 * (the stream, its outbound frame items, header blocks). Freed blocks of up
 * to H2_MEM_CACHE_MAX_BYTES are kept in power-of-two size classes and
 * handed out again, so a busy connection stops allocating once warm. At
 * most as many blocks per class as fit in 64 KiB are kept (at least 16):
 * a session holds at most 512 KiB, what its busiest moment needed anyway.
 * Larger blocks go straight to mem_alloc()/mem_free().
 *
 * Threads: one h2_mem per session, used only on the session's loop thread
 * (nghttp2 calls the functions there); nothing locks.
 *
 * Lifetime: h2_mem_init() before the nghttp2 session is made with
 * h2_mem_nghttp2(); h2_mem_release() after nghttp2_session_del() (it frees
 * the cached blocks; blocks still handed out are nghttp2's to free first).
 */
#ifndef INFERD_HTTP_H2_MEM_H
#define INFERD_HTTP_H2_MEM_H

#include <nghttp2/nghttp2.h>
#include <stdint.h>

#define H2_MEM_MIN_SHIFT 5 /* the smallest class: 32 bytes */
#define H2_MEM_CLASSES 8   /* 32 .. 4096 bytes */
#define H2_MEM_CACHE_MAX_BYTES ((size_t)1 << (H2_MEM_MIN_SHIFT + H2_MEM_CLASSES - 1))

struct h2_mem_block;

struct h2_mem {
    nghttp2_mem ng;                                  /* what nghttp2 is given */
    struct h2_mem_block *free[H2_MEM_CLASSES];       /* freed blocks, per class */
    uint32_t nfree[H2_MEM_CLASSES];
};

/* Makes m empty and points m->ng's functions at it. */
void h2_mem_init(struct h2_mem *m);

/* Frees every cached block; m is empty (and usable) again. */
void h2_mem_release(struct h2_mem *m);

#endif
