/*
 * rand: small, fast, reproducible pseudo-random generators (not for
 * secrets). Header-only: they run per sampled token and per trace id.
 *
 * rand_splitmix64() adds the golden-ratio increment to *x and returns the
 * SplitMix64 mix of the new value (Steele, Lea & Flood): the way to spread
 * one seed word over a larger state.
 * rand_xoshiro256ss() returns the next output of the xoshiro256** state s
 * (Blackman & Vigna) and advances it; s must not be all zero (seeding it
 * with four rand_splitmix64() outputs ensures that in practice).
 * rand_unit() maps 64 random bits to a double in [0, 1): the top 53 bits,
 * so every value is a multiple of 2^-53 and 1 is never reached.
 *
 * Thread: the caller owns the state.
 */
#ifndef INFERD_BASE_RAND_H
#define INFERD_BASE_RAND_H

#include <stdint.h>

static inline uint64_t rand_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static inline uint64_t rand_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t rand_xoshiro256ss(uint64_t s[4])
{
    uint64_t result = rand_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rand_rotl(s[3], 45);
    return result;
}

static inline double rand_unit(uint64_t bits)
{
    return (double)(bits >> 11) * 0x1.0p-53;
}

#endif
