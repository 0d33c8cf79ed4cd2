/* What the summary and report.json say of a run's tensor: its sizes,
 * counts and norm. Computed from the tensor in memory (th_tensor_facts_of)
 * or, where each process holds a share, by the processes together
 * (th_dist_tensor_facts, dist_tensor.h). */
#ifndef TH_TENSOR_FACTS_H
#define TH_TENSOR_FACTS_H

#include "tensor/sptensor.h"

typedef struct th_tensor_facts {
    uint32_t nmodes;
    th_index dims[TH_MAX_MODES];
    uint64_t nnz;
    double norm; /* ||X||_F in the file's units */
    uint64_t duplicates_merged, explicit_zeros, underflowed_values;
    uint64_t empty_slices[TH_MAX_MODES];
    const char *label; /* the tensor's (borrowed), NULL for none */
} th_tensor_facts;

/* The facts of `t` (its label borrowed: `facts` lives no longer than it). */
void th_tensor_facts_of(const th_sptensor *t, th_tensor_facts *facts);

/* nnz over the product of the dims. */
double th_tensor_facts_density(const th_tensor_facts *facts);

#endif
