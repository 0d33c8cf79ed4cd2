/* A small deterministic random generator (xoshiro256**, seeded by
 * splitmix64), so the same seed gives the same initial factors on every
 * machine and backend, whatever the C library. */
#ifndef TH_RNG_H
#define TH_RNG_H

#include <stdint.h>

typedef struct th_rng {
    uint64_t s[4];
} th_rng;

void th_rng_seed(th_rng *rng, uint64_t seed);
uint64_t th_rng_next(th_rng *rng);
/* Uniform in [0, 1), 53 random bits. */
double th_rng_uniform(th_rng *rng);

#endif
