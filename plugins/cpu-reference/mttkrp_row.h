/* cpu-reference's plain MTTKRP of one row in vectors (3- and 4-mode
 * tensors at ranks 8, 16 and 32): the bits of cpu_reference.c's loop. */
#ifndef CPU_REFERENCE_MTTKRP_ROW_H
#define CPU_REFERENCE_MTTKRP_ROW_H

#include "cpu_reference_internal.h"

/* out[0..R) = sum over nonzeros [begin, end) of ((x a) b) c, a, b (and
 * c) the other factors' rows, in nonzero order from zero: exactly what the
 * scalar loop computes, with the row's sum in registers instead of memory.
 * Returns false, writing nothing, for a shape it has no copy for (width
 * other than 2 or 3, or a rank other than 8, 16 or 32). `wide`: the
 * AVX-512 copy (cpu_ref_use_wide). */
bool mttkrp_row_vector(const mode_layout *l, const double *const *other_factors, uint32_t width,
                       uint32_t rank, uint64_t begin, uint64_t end, bool wide,
                       double *restrict out);

#endif
