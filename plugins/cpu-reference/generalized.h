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

/* What multiplicative_row_phi does with its cache of the row's products
 * of the other factors. */
typedef enum mu_products {
    MU_PRODUCTS_NONE, /* form them for this Phi, keep nothing (no cache) */
    MU_PRODUCTS_FILL, /* form them, keep them, and Phi from them as USE takes it */
    MU_PRODUCTS_USE   /* Phi from them as kept */
} mu_products;

/* The doubles a cache of n nonzeros' products takes at `rank`: blocks of
 * eight nonzeros, each its products (one vector of eight per r) and its
 * values. */
static inline uint64_t mu_cache_doubles(uint64_t n, uint32_t rank)
{
    return (n + 7) / 8 * 8 * ((uint64_t)rank + 1);
}

/* One row of CP-APR's Phi (TH_ELEMENTWISE_POISSON_RATIO, no weights) over
 * the row's nonzeros [begin, end), for the target row `a` (R doubles),
 * into `phi` (R doubles), whichever copy (`wide`: AVX-512). Forming the
 * products (NONE), bit for bit the row generalized_mttkrp's pass gives.
 * From the cache (FILL, or USE after a FILL for the same factors): the
 * same bits for the ranks and orders without a vector copy; for those with
 * one (3- and 4-mode tensors at ranks 8, 16 and 32), within rounding, and
 * the same bits whatever the copy or thread count, FILL's Phi as USE's.
 * `products` holds mu_cache_doubles(end - begin, R) where use is not
 * NONE; `scratch` 3 R doubles. */
void multiplicative_row_phi(const mode_layout *l, const double *const *other_factors,
                            uint32_t width, uint32_t rank, uint64_t begin, uint64_t end,
                            const double *a, double epsilon, double *restrict products,
                            mu_products use, bool wide, double *restrict scratch,
                            double *restrict phi);

#endif
