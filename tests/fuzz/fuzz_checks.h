/* What every tensor reader promises of the tensor it returns, checked the
 * same way by each reader's fuzz target: every index inside its mode, the
 * nonzeros sorted with no coordinate twice. Aborts otherwise. */
#ifndef TH_FUZZ_CHECKS_H
#define TH_FUZZ_CHECKS_H

#include <stdint.h>
#include <stdlib.h>

#include "sptensor.h"

static inline void fuzz_check_sorted_in_range(const th_sptensor *t)
{
    for (uint64_t i = 0; i < t->nnz; ++i) {
        int order = i == 0 ? -1 : 0; /* sorted, and no coordinate twice */
        for (uint32_t m = 0; m < t->nmodes; ++m) {
            if (t->dims[m] == 0 || t->indices[m][i] >= t->dims[m])
                abort();
            if (order == 0 && t->indices[m][i - 1] != t->indices[m][i])
                order = t->indices[m][i - 1] < t->indices[m][i] ? -1 : 1;
        }
        if (order >= 0)
            abort();
    }
}

#endif
