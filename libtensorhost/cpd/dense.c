#include "cpd/dense.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include <cblas.h>
#include <lapacke.h>

#include <glib.h>
#include <tensorhost/plugin.h>

/* BLAS and LAPACK take 32-bit int dimensions (Debian's OpenBLAS is built
 * without 64-bit integers); a mode may be longer, so tall operands are fed
 * in row blocks of at most this many rows. */
#define TH_BLAS_MAX_ROWS ((uint64_t)INT_MAX)

/* Mirrors the upper triangle of the row-major n x n `a` into its lower one. */
static void mirror_upper(double *a, uint32_t n)
{
    for (uint32_t r = 1; r < n; ++r)
        for (uint32_t s = 0; s < r; ++s)
            a[(size_t)r * n + s] = a[(size_t)s * n + r];
}

void th_dense_gram(const double *a, uint64_t rows, uint32_t rank, double *gram)
{
    memset(gram, 0, sizeof(double) * rank * rank);
    if (rank == 0)
        return;
    /* Row-major A^T A is the upper triangle of dsyrk with A transposed. */
    for (uint64_t first = 0; first < rows; first += TH_BLAS_MAX_ROWS) {
        const uint64_t block = MIN(rows - first, TH_BLAS_MAX_ROWS);
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)rank, (int)block, 1.0,
                    a + first * rank, (int)rank, 1.0, gram, (int)rank);
    }
    mirror_upper(gram, rank);
}

void th_dense_hadamard_except(double *const *grams, uint32_t nmodes, uint32_t skip,
                              uint32_t rank, double *out)
{
    const size_t n = (size_t)rank * rank;
    for (size_t k = 0; k < n; ++k)
        out[k] = 1.0;
    for (uint32_t m = 0; m < nmodes; ++m) {
        if (m == skip)
            continue;
        for (size_t k = 0; k < n; ++k)
            out[k] *= grams[m][k];
    }
}

/* A symmetric matrix reads the same row- or column-major, so LAPACK is
 * called column-major (no transposed copies inside LAPACKE) on its lower
 * triangle, which is the row-major upper triangle that mirror_upper() copies
 * down. */

/* inverse = v^-1 through Cholesky, or FALSE when the factorisation breaks
 * down. The relative pivot threshold treats a pivot that lost all
 * significant digits as a breakdown rather than trusting a noisy inverse:
 * dpotrf itself only stops at a pivot <= 0, which rounding rarely gives
 * for a singular Gram. */
static gboolean cholesky_inverse(const double *v, uint32_t n, double *inverse)
{
    double largest = 0.0;
    for (uint32_t i = 0; i < n; ++i)
        largest = fmax(largest, fabs(v[(size_t)i * n + i]));
    const double threshold = largest * n * DBL_EPSILON * TH_SOLVE_BREAKDOWN_FACTOR;
    memcpy(inverse, v, sizeof(double) * n * n);
    if (LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', (lapack_int)n, inverse, (lapack_int)n) != 0)
        return FALSE;
    for (uint32_t j = 0; j < n; ++j) {
        const double ljj = inverse[(size_t)j * n + j];
        if (!(ljj * ljj > threshold))
            return FALSE;
    }
    if (LAPACKE_dpotri_work(LAPACK_COL_MAJOR, 'L', (lapack_int)n, inverse, (lapack_int)n) != 0)
        return FALSE;
    mirror_upper(inverse, n);
    return TRUE;
}

/* inverse = the Moore-Penrose pseudo-inverse of symmetric v, from its
 * eigen-decomposition v = Z diag(w) Z^T: sum over the kept eigenvalues of
 * z_k z_k^T / w_k. With y_k = z_k / sqrt|w_k| that is Y+ Y+^T - Y- Y-^T
 * (positive and negative eigenvalues), two dsyrk calls that give an exactly
 * symmetric result. dsyevd returns the eigenvalues in ascending order, so
 * the negative ones are the first columns of Z and the positive ones the
 * last. Divide and conquer (dsyevd) rather than MRRR (dsyevr): the matrices
 * that land here have a large cluster of zero eigenvalues, where dsyevr
 * was 9x slower at rank 4096 (59 s against 6.4 s for 2048 zero
 * eigenvalues) and dsyevd deflates the cluster. Returns FALSE when LAPACK
 * fails (out of memory for its workspace of 2 rank^2 doubles). */
static gboolean eigen_pinv(const double *v, uint32_t n, double *inverse)
{
    const size_t n2 = (size_t)n * n;
    double *z = g_try_new(double, n2);
    double *w = g_try_new(double, n);
    gboolean ok = z && w;
    if (ok) {
        memcpy(z, v, sizeof(double) * n2);
        ok = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'L', (lapack_int)n, z, (lapack_int)n, w) == 0;
    }
    if (ok) {
        double largest = 0.0;
        for (uint32_t k = 0; k < n; ++k)
            largest = fmax(largest, fabs(w[k]));
        const double cutoff = largest * n * DBL_EPSILON;
        /* Column k of Z (column-major) is z + k n. */
        uint32_t negative = 0, positive_from = n;
        for (uint32_t k = 0; k < n; ++k) {
            if (w[k] < -cutoff)
                negative = k + 1;
            else if (w[k] > cutoff && positive_from == n)
                positive_from = k;
        }
        for (uint32_t k = 0; k < n; ++k) {
            if (k >= negative && k < positive_from)
                continue;
            cblas_dscal((int)n, 1.0 / sqrt(fabs(w[k])), z + (size_t)k * n, 1);
        }
        memset(inverse, 0, sizeof(double) * n2);
        if (positive_from < n)
            cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (int)n, (int)(n - positive_from),
                        1.0, z + (size_t)positive_from * n, (int)n, 0.0, inverse, (int)n);
        if (negative > 0)
            cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (int)n, (int)negative, -1.0, z,
                        (int)n, 1.0, inverse, (int)n);
        mirror_upper(inverse, n);
    }
    g_free(z);
    g_free(w);
    return ok;
}

int th_dense_spd_pinv(const double *v, uint32_t rank, double *inverse)
{
    const size_t n2 = (size_t)rank * rank;
    if (rank == 0)
        return 0;
    /* LAPACK's behaviour on NaN or Inf is unspecified (it may fail or
     * return garbage); say so plainly instead. */
    for (size_t k = 0; k < n2; ++k)
        if (!isfinite(v[k])) {
            for (size_t j = 0; j < n2; ++j)
                inverse[j] = NAN;
            return 1;
        }
    if (cholesky_inverse(v, rank, inverse))
        return 0;
    if (!eigen_pinv(v, rank, inverse)) {
        /* Out of memory for the workspace, or dsyevd did not converge:
         * no inverse to give, so give nothing that looks like one. */
        for (size_t j = 0; j < n2; ++j)
            inverse[j] = NAN;
    }
    return 1;
}

void th_dense_matmul(const double *a, const double *b, uint64_t rows, uint32_t k,
                     uint32_t cols, double *c)
{
    if (cols == 0)
        return;
    if (k == 0) {
        memset(c, 0, sizeof(double) * rows * cols);
        return;
    }
    for (uint64_t first = 0; first < rows; first += TH_BLAS_MAX_ROWS) {
        const uint64_t block = MIN(rows - first, TH_BLAS_MAX_ROWS);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)block, (int)cols, (int)k, 1.0,
                    a + first * k, (int)k, b, (int)cols, 0.0, c + first * cols, (int)cols);
    }
}

void th_dense_normalize_columns(double *a, uint64_t rows, uint32_t rank, int use_max_norm,
                                double *lambda)
{
    for (uint32_t r = 0; r < rank; ++r)
        lambda[r] = 0.0;
    for (uint64_t i = 0; i < rows; ++i)
        for (uint32_t r = 0; r < rank; ++r) {
            const double x = a[i * rank + r];
            if (use_max_norm)
                lambda[r] = fmax(lambda[r], fabs(x));
            else
                lambda[r] += x * x;
        }
    for (uint32_t r = 0; r < rank; ++r)
        lambda[r] = use_max_norm ? fmax(lambda[r], 1.0) : sqrt(lambda[r]);
    for (uint64_t i = 0; i < rows; ++i)
        for (uint32_t r = 0; r < rank; ++r)
            if (lambda[r] > 0.0)
                a[i * rank + r] /= lambda[r];
}

/* Rows a block of the HALS update, and the rows x rank^2 work from which it
 * runs on several threads (below, waking a team costs more than it saves). */
#define HALS_BLOCK_ROWS 64u
#define HALS_PARALLEL_WORK 32768.0

uint32_t th_dense_hals(const double *m, const double *v, uint64_t rows, uint32_t rank,
                       double ridge, double l1, int32_t constraint, uint32_t sweeps,
                       double tolerance, double *a)
{
    /* A row's new entries depend on that row alone (and v, m): rows go in
     * the outer loop, each row's columns in order, which computes every
     * entry as the column-by-column sweep does and keeps the row in cache;
     * blocks of rows run in parallel, and their squared changes are added
     * in block order, so the stopping decision does not depend on the
     * thread count. */
    const gboolean nonneg = constraint == TH_CONSTRAINT_NONNEG;
    const uint64_t blocks = (rows + HALS_BLOCK_ROWS - 1) / HALS_BLOCK_ROWS;
    g_autofree double *block_change = g_new(double, blocks ? blocks : 1);
    const gboolean parallel = (double)rows * rank * rank >= HALS_PARALLEL_WORK;
    double first_change = 0.0;
    for (uint32_t pass = 0; pass < sweeps; ++pass) {
#pragma omp parallel for schedule(static) if (parallel)
        for (int64_t b = 0; b < (int64_t)blocks; ++b) {
            const uint64_t end = MIN(rows, ((uint64_t)b + 1) * HALS_BLOCK_ROWS);
            double change = 0.0;
            for (uint64_t i = (uint64_t)b * HALS_BLOCK_ROWS; i < end; ++i) {
                double *row = a + i * rank;
                const double *m_row = m + i * rank;
                for (uint32_t k = 0; k < rank; ++k) {
                    const double *v_col = v + (size_t)k * rank; /* symmetric: row k */
                    const double vkk = v_col[k];
                    const double d = vkk + ridge;
                    if (d == 0.0)
                        continue;
                    double product = 0.0; /* (a v)(i, k), the columns before k new */
                    for (uint32_t q = 0; q < rank; ++q)
                        product += row[q] * v_col[q];
                    const double n = m_row[k] - product + vkk * row[k];
                    /* With l1 = 0 and the constraint, max(0, n) / d is
                     * max(0, n / d): the 1.5 update's values exactly. */
                    const double next = nonneg ? fmax(0.0, n - l1) / d
                                               : copysign(fmax(0.0, fabs(n) - l1), n) / d;
                    change += (next - row[k]) * (next - row[k]);
                    row[k] = next;
                }
            }
            block_change[b] = change;
        }
        double change = 0.0;
        for (uint64_t b = 0; b < blocks; ++b)
            change += block_change[b];
        if (pass == 0)
            first_change = change;
        if (change <= tolerance * first_change)
            return pass + 1;
    }
    return sweeps;
}

uint32_t th_dense_hals_nonneg(const double *m, const double *v, uint64_t rows, uint32_t rank,
                              uint32_t sweeps, double tolerance, double *a)
{
    return th_dense_hals(m, v, rows, rank, 0.0, 0.0, TH_CONSTRAINT_NONNEG, sweeps, tolerance, a);
}

void th_dense_column_inner(const double *m, const double *a, uint64_t rows, uint32_t rank,
                           double *inner)
{
    for (uint32_t r = 0; r < rank; ++r)
        inner[r] = 0.0;
    for (uint64_t i = 0; i < rows; ++i)
        for (uint32_t r = 0; r < rank; ++r)
            inner[r] += m[i * rank + r] * a[i * rank + r];
}
