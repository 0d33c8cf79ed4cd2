/* The host's side of the counter-based initial factors (plugin.h, "Initial
 * factors"): one factor filled on all cores. The values come from
 * <tensorhost/plugin_sdk.h>'s th_initial_factor_value, the one definition a
 * backend's init_factors uses too, so host and backend agree bit for bit. */
#ifndef TH_INITIAL_FACTORS_H
#define TH_INITIAL_FACTORS_H

#include <stdint.h>

/* factor[i * rank + r] = th_initial_factor_value(seed, mode, i, r) for
 * i < rows, r < rank (caller-owned, rows x rank, row-major). Parallel over
 * rows with OpenMP; every value is a pure function of its indices, so the
 * result does not depend on the thread count. */
void th_initial_factor_fill(double *factor, uint64_t rows, uint32_t rank, uint64_t seed,
                            uint32_t mode);

#endif
