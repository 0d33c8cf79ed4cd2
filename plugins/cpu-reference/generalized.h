/* cpu-reference's generalized MTTKRP (ABI 1.4), one chunk at a time: the
 * kernels behind generalized_mttkrp. The pass over the chunks (threads,
 * the host's stop, the boundary merge, the sum of the chunks' sums) is
 * cpu_reference.c's. */
#ifndef CPU_REFERENCE_GENERALIZED_H
#define CPU_REFERENCE_GENERALIZED_H

#include "cpu_reference_internal.h"

/* What one generalized pass computes: g (or none, for the reduction only)
 * and h, with the weights (NULL: ones) and epsilon. */
typedef struct generalized_op {
    int32_t elementwise; /* TH_ELEMENTWISE_*, or -1: no result, only h */
    int32_t reduction;   /* TH_REDUCTION_* */
    double epsilon;
    const double *weights;
    const double *target; /* the layout's own factor (A_mode) */
    bool wide;            /* the AVX-512 copy (cpu_ref_use_wide) */
} generalized_op;

/* Chunk `chunk` of layout l (CPU_REF_CHUNK_NNZ nonzeros, fewer at the
 * end), laid out as mttkrp_chunk: its inner rows to `result`, its two end
 * rows to `slots` (2 R doubles) for the boundary merge, and the chunk's
 * sum of h into *sum; result NULL: the sum only. other_factors are the
 * factors of the other modes in mode order (width of them); `scratch` is
 * 2 R doubles of the calling thread's. */
void generalized_chunk(const mode_layout *l, const double *const *other_factors, uint32_t width,
                       uint32_t rank, uint64_t chunk, uint64_t nnz, const generalized_op *op,
                       double *restrict scratch, double *restrict slots, double *result,
                       double *sum);

#endif
