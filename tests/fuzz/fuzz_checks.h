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
#include "tensor/tensor_read_types.h"

/* Whether an input's reads require values >= 0 (require_nonnegative): a
 * bit of its bytes, so that the corpus explores both ways. */
static inline const th_tensor_read_options *fuzz_read_options(const uint8_t *data, size_t size)
{
    static const th_tensor_read_options nonnegative = {
        .require_nonnegative = TRUE,
        .nonnegative_reason = "fuzz",
    };
    if (size == 0 || ((data[0] ^ data[size - 1] ^ (uint8_t)size) & 1u) == 0)
        return NULL;
    return &nonnegative;
}

/* What a read with require_nonnegative promises beside the read without
 * it: a tensor with no value below zero, the same as without the option
 * (`plain`); or, where the read without it gave a tensor, the error of a
 * negative value. */
static inline void fuzz_check_nonnegative(const th_sptensor *t, const GError *error,
                                          const th_sptensor *plain)
{
    if (t != NULL) {
        for (uint64_t i = 0; i < t->nnz; ++i)
            if (t->values[i] < 0.0)
                abort();
        if (plain == NULL)
            abort();
        return;
    }
    if (plain != NULL && (error->code != TH_TENSOR_READER_ERROR_VALUE ||
                          strstr(error->message, " is negative: fuzz") == NULL))
        abort();
}

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
