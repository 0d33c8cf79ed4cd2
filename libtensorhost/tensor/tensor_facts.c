#include "tensor/tensor_facts.h"

#include <string.h>

void th_tensor_facts_of(const th_sptensor *t, th_tensor_facts *facts)
{
    memset(facts, 0, sizeof *facts);
    facts->nmodes = t->nmodes;
    memcpy(facts->dims, t->dims, sizeof(th_index) * t->nmodes);
    facts->nnz = t->nnz;
    facts->norm = th_sptensor_norm(t);
    facts->duplicates_merged = t->duplicates_merged;
    facts->explicit_zeros = t->explicit_zeros;
    facts->underflowed_values = t->underflowed_values;
    for (uint32_t m = 0; m < t->nmodes; ++m)
        facts->empty_slices[m] = th_sptensor_empty_slices(t, m);
    facts->label = t->label;
}

double th_tensor_facts_density(const th_tensor_facts *facts)
{
    double cells = 1.0;
    for (uint32_t m = 0; m < facts->nmodes; ++m)
        cells *= (double)facts->dims[m];
    return cells > 0.0 ? (double)facts->nnz / cells : 0.0;
}
