#include "base/rng.h"

void th_rng_seed(th_rng *rng, uint64_t seed)
{
    uint64_t state = seed;
    for (int i = 0; i < 4; ++i)
        rng->s[i] = th_splitmix64(&state);
}

th_rng th_rng_stream(uint64_t seed, uint64_t tag, uint64_t a, uint64_t b)
{
    uint64_t state = seed;
    state = th_splitmix64(&state) ^ tag;
    state = th_splitmix64(&state) ^ a;
    state = th_splitmix64(&state) ^ b;
    th_rng rng;
    for (int i = 0; i < 4; ++i)
        rng.s[i] = th_splitmix64(&state);
    return rng;
}
