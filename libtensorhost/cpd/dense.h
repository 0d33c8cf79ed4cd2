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

/* Nonnegative least squares for the rows of `a` (rows x rank): a >= 0
 * minimising ||a v - m||, the normal equations of min ||X_(n) - a K^T||
 * with v = K^T K (rank x rank, the Hadamard product of the other modes'
 * Grams) and m = X_(n) K (the MTTKRP), by hierarchical ALS (Cichocki and
 * Phan; Gillis and Glineur): column by column, a(:,k) = max(0, a(:,k) +
 * (m(:,k) - a v(:,k)) / v(k,k)), the exact minimiser for that column with
 * the others fixed, each column using the ones updated before it. Starts
 * from `a` as given and makes up to `sweeps` passes over the columns,
 * stopping after a pass whose squared change is below `tolerance` times the
 * first pass's (TensorLy's hals_nnls: 5 passes, 1e-8 in its
 * non_negative_parafac_hals). A column with v(k,k) = 0 (all other modes'
 * column k zero) is left as it is. Returns the passes made. */
uint32_t th_dense_hals_nonneg(const double *m, const double *v, uint64_t rows, uint32_t rank,
                              uint32_t sweeps, double tolerance, double *a);

/* inner[r] = sum_i m(i,r) a(i,r). */
void th_dense_column_inner(const double *m, const double *a, uint64_t rows, uint32_t rank,
                           double *inner);

#endif
