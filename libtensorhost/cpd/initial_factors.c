#include "cpd/initial_factors.h"

#include <tensorhost/plugin_sdk.h>

void th_initial_factor_fill(double *factor, uint64_t rows, uint32_t rank, uint64_t seed,
                            uint32_t mode)
{
    /* A static schedule of whole rows: each thread writes its own
     * contiguous stretch, and a row's key is taken once for its columns. A
     * small factor is not worth waking a team for. */
#pragma omp parallel for schedule(static) if (rows * rank >= 65536)
    for (int64_t i = 0; i < (int64_t)rows; ++i) {
        const uint64_t key = th_initial_factor_row_key(seed, mode, (uint64_t)i);
        double *row = factor + (uint64_t)i * rank;
        for (uint32_t r = 0; r < rank; ++r)
            row[r] = th_initial_factor_from_row_key(key, r);
    }
}
