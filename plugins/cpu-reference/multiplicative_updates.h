/* cpu-reference's multiplicative_updates (ABI 1.7): CP-APR's inner
 * iterations of one mode, row by row. cpu_reference.c checks the call and
 * chooses between this and its loop of generalized_mttkrp and
 * factor_update; both give the same bits. */
#ifndef CPU_REFERENCE_MULTIPLICATIVE_UPDATES_H
#define CPU_REFERENCE_MULTIPLICATIVE_UPDATES_H

#include "cpu_reference_internal.h"

/* Set to a byte count, the most the speculative iterations' history may
 * take (default CPU_REF_MU_HISTORY_BYTES): the tests make it small to run
 * the iterations in several blocks. */
#define CPU_REF_MU_HISTORY_ENV "TH_CPU_REFERENCE_MU_HISTORY_BYTES"
/* Set to a byte count, the size of a thread's cache of one row's products
 * (default CPU_REF_MU_PRODUCTS_BYTES): the tests make it small to run
 * every row without it. */
#define CPU_REF_MU_PRODUCTS_ENV "TH_CPU_REFERENCE_MU_PRODUCTS_BYTES"

/* One mode's problem, borrowed for the call. */
typedef struct mu_problem {
    const mode_layout *layout;
    const double *const *other_factors; /* the other modes' factors, in mode order */
    uint32_t width;                     /* how many: nmodes - 1 */
    uint32_t rank;
    uint32_t rows;   /* the mode's length */
    double *factor;  /* rows x rank, updated in place */
    double *result;  /* rows x rank: the last Phi on success */
    int threads;
    double *products;       /* [threads][product_doubles]: the rows' caches */
    size_t product_doubles; /* cpu_ref_mu_product_doubles() */
    bool wide; /* the AVX-512 copies (cpu_ref_use_wide) */
    const th_host_services *host;
} mu_problem;

/* The doubles of one thread's cache of a row's products:
 * CPU_REF_MU_PRODUCTS_ENV, else 4 MiB (30k nonzeros at rank 16). */
size_t cpu_ref_mu_product_doubles(void);

/* Up to io->max_iterations inner iterations of p's mode, each row's run
 * on one thread with its products of the other factors formed once: the
 * rows' iterations go ahead of the stopping test in blocks as long as
 * their history (each iteration's Phi) fits, then the block is cut back to
 * the first iteration whose violation over every row is below the
 * tolerance. Fills io's out-fields. Errors: TH_ERR_OUT_OF_MEMORY for the
 * workspace (nothing changed), TH_ERR_CANCELLED on the host's stop (the
 * factor as it was after the last whole block; result not valid). The
 * inputs are checked by the caller. */
th_status cpu_ref_multiplicative_updates(const mu_problem *p, th_multiplicative_updates_io *io,
                                         char *err);

#endif
