/*
 * hash: the non-cryptographic hashes the server uses for buckets,
 * stickiness and quick checks (never for anything an attacker may choose
 * to collide with at a cost to others: API keys are checked with SHA-256).
 *
 *   hash_fnv1a(h, p, n)  FNV-1a 64 over n bytes, continuing from h (start
 *                        with HASH_FNV_OFFSET, or a seeded variant of it)
 *   hash_fmix64(k)       MurmurHash3's 64-bit finalizer: spreads every bit
 *                        of k over the result (for buckets taken modulo n)
 */
#ifndef INFERD_BASE_HASH_H
#define INFERD_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_FNV_OFFSET 0xcbf29ce484222325ull
#define HASH_FNV_PRIME 0x100000001b3ull

static inline uint64_t hash_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * HASH_FNV_PRIME;
    return h;
}

static inline uint64_t hash_fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

#endif
