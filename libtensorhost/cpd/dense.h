/* The host's R x R algebra for CP-ALS, in double precision. Matrices are
 * row-major. The O(R^3) and O(rows R^2) work (the (pseudo-)inverse, Grams,
 * products) runs on LAPACK (through LAPACKE) and CBLAS, multi-threaded by the
 * BLAS, so that every accepted rank (up to 4096) stays fast; the O(R^2) and
 * O(rows R) helpers are plain loops. */
#ifndef TH_DENSE_H
#define TH_DENSE_H

#include <stddef.h>
#include <stdint.h>

/* gram = A^T A for A with `rows` x `rank` (both triangles written, exactly
 * symmetric). */
void th_dense_gram(const double *a, uint64_t rows, uint32_t rank, double *gram);

/* out = elementwise product of grams[m] for every m != skip (skip = UINT32_MAX
 * to include all). All rank x rank. */
void th_dense_hadamard_except(double *const *grams, uint32_t nmodes, uint32_t skip,
                              uint32_t rank, double *out);

/* Writes the (pseudo-)inverse of the symmetric positive semi-definite `v`
 * (rank x rank) into `inverse` (exactly symmetric). Tries a Cholesky
 * factorisation first (LAPACK dpotrf + dpotri); it counts as broken down
 * when a pivot is at most 16 * rank * eps * the largest diagonal entry.
 * Then (rank deficiency: e.g. a rank larger than the tensor supports, or
 * collinear columns) it falls back to the Moore-Penrose pseudo-inverse
 * through a symmetric eigen-decomposition (LAPACK dsyevd), dropping
 * eigenvalues whose magnitude is at most rank * eps * the largest; a zero
 * `v` gives a zero inverse. A `v` with a NaN or infinite entry gives an
 * all-NaN inverse. Returns 1 when the fallback was used (or `v` was not
 * finite), 0 for the Cholesky inverse. The fallback needs about three
 * rank x rank matrices of temporary memory and gives an all-NaN inverse
 * when it cannot have them. */
int th_dense_spd_pinv(const double *v, uint32_t rank, double *inverse);

/* c = a (rows x k) * b (k x cols); c must not overlap a or b. */
void th_dense_matmul(const double *a, const double *b, uint64_t rows, uint32_t k,
                     uint32_t cols, double *c);

/* Normalises the columns of `a` (rows x rank) in place: lambda_r is the
 * 2-norm (use_max_norm = 0) or max(max_i |a_ir|, 1) (use_max_norm = 1, as
 * Tensor Toolbox after the first iteration). A zero column keeps lambda 0
 * and is left as it is. */
void th_dense_normalize_columns(double *a, uint64_t rows, uint32_t rank, int use_max_norm,
                                double *lambda);

/* The coordinate-descent update of CP-ALS's constrained and sparse modes,
 * exactly the rule of plugin.h's th_nonneg_update_io (step 2): for the rows
 * of `a` (rows x rank), the a minimising, row by row,
 *   1/2 ||X_(n) - a K^T||^2 + ridge/2 ||a||^2 + l1 sum |a(i,r)|
 * given v = K^T K (rank x rank, the Hadamard product of the other modes'
 * Grams, symmetric) and m = X_(n) K (the MTTKRP), under a >= 0 when
 * `constraint` is TH_CONSTRAINT_NONNEG, by hierarchical ALS (Cichocki and
 * Phan; Gillis and Glineur): column by column, each row's columns in order
 * with the ones before already updated in this pass,
 *   d = v(k,k) + ridge,  n = m(i,k) - sum_q a(i,q) v(q,k) + v(k,k) a(i,k),
 *   TH_CONSTRAINT_NONNEG: a(i,k) <- max(0, n - l1) / d
 *   TH_CONSTRAINT_NONE:   a(i,k) <- sign(n) max(0, |n| - l1) / d
 * the exact minimiser for that entry with the others fixed (a soft
 * threshold, clipped at 0 under the constraint); a column with d = 0 is
 * left as it is. Starts from `a` as given and makes up to `sweeps` passes,
 * stopping after a pass whose squared change (summed over every entry) is
 * at most `tolerance` times the first pass's (TensorLy's hals_nnls, whose
 * sparsity_coefficient is l1 and ridge_coefficient ridge / 2: 5 passes,
 * 1e-8 in its non_negative_parafac_hals). Rows run in parallel blocks
 * whose changes are added in block order: the same bits and passes on any
 * thread count. ridge and l1 must be >= 0. Returns the passes made. */
uint32_t th_dense_hals(const double *m, const double *v, uint64_t rows, uint32_t rank,
                       double ridge, double l1, int32_t constraint, uint32_t sweeps,
                       double tolerance, double *a);

/* th_dense_hals with ridge 0, l1 0 and TH_CONSTRAINT_NONNEG: nonnegative
 * least squares, a >= 0 minimising ||a v - m|| row by row (the normal
 * equations of min ||X_(n) - a K^T||). */
uint32_t th_dense_hals_nonneg(const double *m, const double *v, uint64_t rows, uint32_t rank,
                              uint32_t sweeps, double tolerance, double *a);

/* inner[r] = sum_i m(i,r) a(i,r). */
void th_dense_column_inner(const double *m, const double *a, uint64_t rows, uint32_t rank,
                           double *inner);

#endif
