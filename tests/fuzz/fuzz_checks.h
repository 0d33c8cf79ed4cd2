/* What every tensor reader promises of the tensor it returns, checked the
 * same way by each reader's fuzz target: every index inside its mode, the
 * nonzeros sorted with no coordinate twice; and two reads of one input
 * giving the same tensor. Each aborts otherwise. */
#ifndef TH_FUZZ_CHECKS_H
#define TH_FUZZ_CHECKS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/sptensor.h"

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

/* The same order, dims, nonzeros and values. */
static inline void fuzz_check_same_arrays(const th_sptensor *a, const th_sptensor *b)
{
    if (a->nmodes != b->nmodes || a->nnz != b->nnz ||
        memcmp(a->dims, b->dims, a->nmodes * sizeof *a->dims) != 0 ||
        memcmp(a->values, b->values, a->nnz * sizeof *a->values) != 0)
        abort();
    for (uint32_t m = 0; m < a->nmodes; ++m)
        if (memcmp(a->indices[m], b->indices[m], a->nnz * sizeof(th_index)) != 0)
            abort();
}

#endif
