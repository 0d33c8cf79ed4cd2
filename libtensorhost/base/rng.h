/* The project's one random generator: xoshiro256** seeded by splitmix64, so
 * the same seed gives the same numbers on every machine and backend,
 * whatever the C library. Inline, because the synthetic tensor generator
 * draws hundreds of millions of numbers. */
#ifndef TH_RNG_H
#define TH_RNG_H

#include <stdint.h>

typedef struct th_rng {
    uint64_t s[4];
} th_rng;

static inline uint64_t th_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t th_rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t th_rng_next(th_rng *rng)
{
    uint64_t *s = rng->s;
    const uint64_t result = th_rng_rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = th_rng_rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1), 53 random bits. */
static inline double th_rng_uniform(th_rng *rng)
{
    return (double)(th_rng_next(rng) >> 11) * 0x1.0p-53;
}

void th_rng_seed(th_rng *rng, uint64_t seed);

/* An independent stream for (seed, tag, a, b): lets parallel workers draw
 * reproducibly whatever the thread count. */
th_rng th_rng_stream(uint64_t seed, uint64_t tag, uint64_t a, uint64_t b);

#endif
