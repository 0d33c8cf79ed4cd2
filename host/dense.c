#include "dense.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

void th_dense_gram(const double *a, uint64_t rows, uint32_t rank, double *gram)
{
    memset(gram, 0, sizeof(double) * rank * rank);
    for (uint64_t i = 0; i < rows; ++i) {
        const double *row = a + i * rank;
        for (uint32_t r = 0; r < rank; ++r) {
            const double ar = row[r];
            double *out = gram + (size_t)r * rank;
            for (uint32_t s = r; s < rank; ++s)
                out[s] += ar * row[s];
        }
    }
    for (uint32_t r = 0; r < rank; ++r)
        for (uint32_t s = 0; s < r; ++s)
            gram[(size_t)r * rank + s] = gram[(size_t)s * rank + r];
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

/* In-place lower Cholesky factor; returns 0 if `a` is not numerically
 * positive definite. The relative threshold treats a pivot that lost all
 * significant digits as a breakdown rather than trusting a noisy inverse. */
static int cholesky(double *a, uint32_t n)
{
    double largest = 0.0;
    for (uint32_t i = 0; i < n; ++i)
        largest = fmax(largest, fabs(a[(size_t)i * n + i]));
    const double threshold = largest * n * DBL_EPSILON * 16.0;
    for (uint32_t j = 0; j < n; ++j) {
        double diag = a[(size_t)j * n + j];
        for (uint32_t k = 0; k < j; ++k)
            diag -= a[(size_t)j * n + k] * a[(size_t)j * n + k];
        if (!(diag > threshold))
            return 0;
        const double ljj = sqrt(diag);
        a[(size_t)j * n + j] = ljj;
        for (uint32_t i = j + 1; i < n; ++i) {
            double sum = a[(size_t)i * n + j];
            for (uint32_t k = 0; k < j; ++k)
                sum -= a[(size_t)i * n + k] * a[(size_t)j * n + k];
            a[(size_t)i * n + j] = sum / ljj;
        }
    }
    return 1;
}

/* inverse = (L L^T)^-1 from the lower factor in `l`. */
static void cholesky_inverse(const double *l, uint32_t n, double *inverse)
{
    /* Invert L (lower triangular) column by column, then form L^-T L^-1. */
    double *linv = g_new0(double, (size_t)n * n);
    for (uint32_t j = 0; j < n; ++j) {
        linv[(size_t)j * n + j] = 1.0 / l[(size_t)j * n + j];
        for (uint32_t i = j + 1; i < n; ++i) {
            double sum = 0.0;
            for (uint32_t k = j; k < i; ++k)
                sum -= l[(size_t)i * n + k] * linv[(size_t)k * n + j];
            linv[(size_t)i * n + j] = sum / l[(size_t)i * n + i];
        }
    }
    for (uint32_t i = 0; i < n; ++i)
        for (uint32_t j = 0; j <= i; ++j) {
            double sum = 0.0;
            for (uint32_t k = i; k < n; ++k)
                sum += linv[(size_t)k * n + i] * linv[(size_t)k * n + j];
            inverse[(size_t)i * n + j] = sum;
            inverse[(size_t)j * n + i] = sum;
        }
    g_free(linv);
}

/* Cyclic Jacobi eigen-decomposition of symmetric `a` (destroyed): eigenvalues
 * into `values`, eigenvectors as columns of `vectors`. Accurate to machine
 * precision for the small matrices CP-ALS produces. */
static void jacobi_eigen(double *a, uint32_t n, double *values, double *vectors)
{
    for (uint32_t i = 0; i < n; ++i)
        for (uint32_t j = 0; j < n; ++j)
            vectors[(size_t)i * n + j] = i == j ? 1.0 : 0.0;
    for (int sweep = 0; sweep < 100; ++sweep) {
        double off = 0.0, total = 0.0;
        for (uint32_t i = 0; i < n; ++i)
            for (uint32_t j = 0; j < n; ++j) {
                const double x = a[(size_t)i * n + j] * a[(size_t)i * n + j];
                total += x;
                if (i != j)
                    off += x;
            }
        if (off <= total * DBL_EPSILON * DBL_EPSILON || off == 0.0)
            break;
        for (uint32_t p = 0; p + 1 < n; ++p)
            for (uint32_t q = p + 1; q < n; ++q) {
                const double apq = a[(size_t)p * n + q];
                if (apq == 0.0)
                    continue;
                const double app = a[(size_t)p * n + p], aqq = a[(size_t)q * n + q];
                const double theta = (aqq - app) / (2.0 * apq);
                const double t = (theta >= 0 ? 1.0 : -1.0) /
                                 (fabs(theta) + sqrt(theta * theta + 1.0));
                const double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
                for (uint32_t k = 0; k < n; ++k) {
                    const double akp = a[(size_t)k * n + p], akq = a[(size_t)k * n + q];
                    a[(size_t)k * n + p] = c * akp - s * akq;
                    a[(size_t)k * n + q] = s * akp + c * akq;
                }
                for (uint32_t k = 0; k < n; ++k) {
                    const double apk = a[(size_t)p * n + k], aqk = a[(size_t)q * n + k];
                    a[(size_t)p * n + k] = c * apk - s * aqk;
                    a[(size_t)q * n + k] = s * apk + c * aqk;
                }
                for (uint32_t k = 0; k < n; ++k) {
                    const double vkp = vectors[(size_t)k * n + p], vkq = vectors[(size_t)k * n + q];
                    vectors[(size_t)k * n + p] = c * vkp - s * vkq;
                    vectors[(size_t)k * n + q] = s * vkp + c * vkq;
                }
            }
    }
    for (uint32_t i = 0; i < n; ++i)
        values[i] = a[(size_t)i * n + i];
}

int th_dense_spd_pinv(const double *v, uint32_t rank, double *inverse)
{
    const size_t n2 = (size_t)rank * rank;
    double *work = g_new(double, n2);
    memcpy(work, v, sizeof(double) * n2);
    if (cholesky(work, rank)) {
        cholesky_inverse(work, rank, inverse);
        g_free(work);
        return 0;
    }
    memcpy(work, v, sizeof(double) * n2);
    double *values = g_new(double, rank);
    double *vectors = g_new(double, n2);
    jacobi_eigen(work, rank, values, vectors);
    double largest = 0.0;
    for (uint32_t i = 0; i < rank; ++i)
        largest = fmax(largest, fabs(values[i]));
    const double cutoff = largest * rank * DBL_EPSILON;
    memset(inverse, 0, sizeof(double) * n2);
    for (uint32_t k = 0; k < rank; ++k) {
        if (!(fabs(values[k]) > cutoff))
            continue;
        const double scale = 1.0 / values[k];
        for (uint32_t i = 0; i < rank; ++i) {
            const double vik = vectors[(size_t)i * rank + k] * scale;
            for (uint32_t j = 0; j < rank; ++j)
                inverse[(size_t)i * rank + j] += vik * vectors[(size_t)j * rank + k];
        }
    }
    g_free(values);
    g_free(vectors);
    g_free(work);
    return 1;
}

void th_dense_matmul(const double *a, const double *b, uint64_t rows, uint32_t k,
                     uint32_t cols, double *c)
{
    for (uint64_t i = 0; i < rows; ++i) {
        double *out = c + i * cols;
        memset(out, 0, sizeof(double) * cols);
        const double *arow = a + i * k;
        for (uint32_t p = 0; p < k; ++p) {
            const double aip = arow[p];
            const double *brow = b + (size_t)p * cols;
            for (uint32_t j = 0; j < cols; ++j)
                out[j] += aip * brow[j];
        }
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

void th_dense_column_inner(const double *m, const double *a, uint64_t rows, uint32_t rank,
                           double *inner)
{
    for (uint32_t r = 0; r < rank; ++r)
        inner[r] = 0.0;
    for (uint64_t i = 0; i < rows; ++i)
        for (uint32_t r = 0; r < rank; ++r)
            inner[r] += m[i * rank + r] * a[i * rank + r];
}
