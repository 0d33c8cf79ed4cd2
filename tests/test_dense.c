/* The host's R x R algebra: Gram, Hadamard, (pseudo-)inverse (small and at
 * ranks where LAPACK's blocked code runs), products, normalisation. */
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <glib.h>

#include "cpd/dense.h"
#include <tensorhost/plugin.h>
#include "base/rng.h"
#include "hals_oracle.h"

static double max_abs_diff(const double *a, const double *b, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; ++i)
        worst = fmax(worst, fabs(a[i] - b[i]));
    return worst;
}

static void random_matrix(th_rng *rng, double *a, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        a[i] = th_rng_uniform(rng) - 0.5;
}

static void test_gram_matches_definition(void **state)
{
    (void)state;
    th_rng rng;
    th_rng_seed(&rng, 7);
    const uint64_t rows = 13;
    const uint32_t rank = 5;
    double a[13 * 5], gram[25];
    random_matrix(&rng, a, rows * rank);
    th_dense_gram(a, rows, rank, gram);
    for (uint32_t r = 0; r < rank; ++r)
        for (uint32_t s = 0; s < rank; ++s) {
            double expected = 0.0;
            for (uint64_t i = 0; i < rows; ++i)
                expected += a[i * rank + r] * a[i * rank + s];
            assert_true(fabs(gram[r * rank + s] - expected) < 1e-14);
        }
}

static void test_hadamard_skips_one_mode(void **state)
{
    (void)state;
    double g0[4] = {1, 2, 3, 4}, g1[4] = {5, 6, 7, 8}, g2[4] = {-1, 0.5, 2, 3};
    double *grams[3] = {g0, g1, g2};
    double out[4];
    th_dense_hadamard_except(grams, 3, 1, 2, out);
    const double expected[4] = {-1, 1, 6, 12};
    assert_true(max_abs_diff(out, expected, 4) == 0.0);
    th_dense_hadamard_except(grams, 3, UINT32_MAX, 2, out);
    const double all[4] = {-5, 6, 42, 96};
    assert_true(max_abs_diff(out, all, 4) == 0.0);
}

/* A well-conditioned SPD matrix: the Cholesky path, inverse to 1e-12. */
static void test_inverse_of_spd(void **state)
{
    (void)state;
    th_rng rng;
    th_rng_seed(&rng, 11);
    enum { R = 9 };
    double a[20 * R], v[R * R], inverse[R * R], product[R * R];
    random_matrix(&rng, a, 20 * R);
    th_dense_gram(a, 20, R, v);
    assert_int_equal(th_dense_spd_pinv(v, R, inverse), 0);
    th_dense_matmul(v, inverse, R, R, R, product);
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < R; ++j)
            assert_true(fabs(product[i * R + j] - (i == j ? 1.0 : 0.0)) < 1e-10);
}

/* Rank deficiency: a Gram of 3 independent columns duplicated to rank 6.
 * The fallback must give the Moore-Penrose pseudo-inverse: V V+ V = V and
 * V+ V V+ = V+, with V+ symmetric. */
static void test_pseudo_inverse_when_rank_deficient(void **state)
{
    (void)state;
    th_rng rng;
    th_rng_seed(&rng, 5);
    enum { R = 6, ROWS = 10 };
    double a[ROWS * R], v[R * R], pinv[R * R], t1[R * R], t2[R * R];
    for (int i = 0; i < ROWS; ++i)
        for (int k = 0; k < 3; ++k) {
            double x = th_rng_uniform(&rng) - 0.5;
            a[i * R + k] = x;
            a[i * R + k + 3] = 2.0 * x; /* collinear with column k */
        }
    th_dense_gram(a, ROWS, R, v);
    assert_int_equal(th_dense_spd_pinv(v, R, pinv), 1);
    th_dense_matmul(v, pinv, R, R, R, t1);
    th_dense_matmul(t1, v, R, R, R, t2);
    assert_true(max_abs_diff(t2, v, R * R) < 1e-10);
    th_dense_matmul(pinv, v, R, R, R, t1);
    th_dense_matmul(t1, pinv, R, R, R, t2);
    assert_true(max_abs_diff(t2, pinv, R * R) < 1e-8);
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < R; ++j)
            assert_true(fabs(pinv[i * R + j] - pinv[j * R + i]) < 1e-12);
}

/* A zero matrix has the zero matrix as pseudo-inverse, at any size. */
static void test_zero_matrix_has_zero_pseudo_inverse(void **state)
{
    (void)state;
    static const uint32_t ranks[] = {1, 3, 256};
    for (size_t c = 0; c < G_N_ELEMENTS(ranks); ++c) {
        const uint32_t r = ranks[c];
        g_autofree double *v = g_new0(double, (size_t)r * r);
        g_autofree double *pinv = g_new(double, (size_t)r * r);
        for (size_t i = 0; i < (size_t)r * r; ++i)
            pinv[i] = 1.0; /* must be overwritten */
        assert_int_equal(th_dense_spd_pinv(v, r, pinv), 1);
        for (size_t i = 0; i < (size_t)r * r; ++i)
            assert_true(pinv[i] == 0.0);
    }
}

/* Rank 1: a positive 1 x 1 matrix inverts by Cholesky; a 1 x 1 zero takes
 * the fallback. */
static void test_rank_one_scalar(void **state)
{
    (void)state;
    double v = 4.0, x = 0.0;
    assert_int_equal(th_dense_spd_pinv(&v, 1, &x), 0);
    assert_true(fabs(x - 0.25) < 1e-15);
    v = 0.0;
    x = 1.0;
    assert_int_equal(th_dense_spd_pinv(&v, 1, &x), 1);
    assert_true(x == 0.0);
}

/* A pivot that lost all significant digits (here 1e-20 against 1) counts
 * as a breakdown, although it is positive and Cholesky would go through:
 * the pseudo-inverse drops that direction instead of inverting noise. */
static void test_tiny_pivot_counts_as_breakdown(void **state)
{
    (void)state;
    enum { R = 5 };
    double v[R * R] = {0}, x[R * R];
    for (int i = 0; i < R; ++i)
        v[i * R + i] = i == R - 1 ? 1e-20 : 1.0;
    assert_int_equal(th_dense_spd_pinv(v, R, x), 1);
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < R; ++j)
            assert_true(fabs(x[i * R + j] - (i == j && i < R - 1 ? 1.0 : 0.0)) < 1e-15);
}

/* Outside the contract (V is not semi-definite), but the fallback inverts
 * eigenvalues of either sign, as a pseudo-inverse must: a non-singular
 * indefinite V gets its exact inverse. */
static void test_indefinite_matrix_gets_its_inverse(void **state)
{
    (void)state;
    const double v[4] = {2.0, 1.0, 1.0, -3.0};
    const double expected[4] = {3.0 / 7.0, 1.0 / 7.0, 1.0 / 7.0, -2.0 / 7.0};
    double x[4];
    assert_int_equal(th_dense_spd_pinv(v, 2, x), 1);
    assert_true(max_abs_diff(x, expected, 4) < 1e-14);
}

/* A rank-one R x R matrix u u^T has the pseudo-inverse u u^T / |u|^4. */
static void test_pseudo_inverse_of_rank_one_matrix(void **state)
{
    (void)state;
    enum { R = 200 };
    th_rng rng;
    th_rng_seed(&rng, 23);
    double u[R], uu = 0.0;
    for (int i = 0; i < R; ++i) {
        u[i] = th_rng_uniform(&rng) + 0.1;
        uu += u[i] * u[i];
    }
    g_autofree double *v = g_new(double, R * R);
    g_autofree double *pinv = g_new(double, R * R);
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < R; ++j)
            v[i * R + j] = u[i] * u[j];
    assert_int_equal(th_dense_spd_pinv(v, R, pinv), 1);
    double worst = 0.0, largest = 0.0;
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < R; ++j) {
            const double expected = u[i] * u[j] / (uu * uu);
            worst = fmax(worst, fabs(pinv[i * R + j] - expected));
            largest = fmax(largest, fabs(expected));
        }
    if (!(worst <= 1e-12 * largest))
        fail_msg("rank-one pseudo-inverse off by %g (entries up to %g)", worst, largest);
}

/* c = a b for n x n matrices, written out here so that the checks below do
 * not rest on the BLAS they check. */
static void naive_product(const double *a, const double *b, uint32_t n, double *c)
{
    for (uint32_t i = 0; i < n; ++i)
        for (uint32_t j = 0; j < n; ++j) {
            double acc = 0.0;
            for (uint32_t k = 0; k < n; ++k)
                acc += a[(size_t)i * n + k] * b[(size_t)k * n + j];
            c[(size_t)i * n + j] = acc;
        }
}

static double max_abs(const double *a, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; ++i)
        m = fmax(m, fabs(a[i]));
    return m;
}

/* max |a - a^T| for n x n a. */
static double asymmetry(const double *a, uint32_t n)
{
    double worst = 0.0;
    for (uint32_t i = 0; i < n; ++i)
        for (uint32_t j = 0; j < i; ++j)
            worst = fmax(worst, fabs(a[(size_t)i * n + j] - a[(size_t)j * n + i]));
    return worst;
}

/* The Hadamard product of the Grams of random factors with `rows_a` and
 * `rows_b` rows (entries uniform in [-0.5, 0.5)), as CP-ALS forms V; its
 * rank is at most min(rows_a * rows_b, rank). */
static void hadamard_of_random_grams(th_rng *rng, uint32_t rows_a, uint32_t rows_b,
                                     uint32_t rank, double *v)
{
    const size_t n2 = (size_t)rank * rank;
    g_autofree double *a = g_new(double, (size_t)MAX(rows_a, rows_b) * rank);
    g_autofree double *g0 = g_new(double, n2);
    g_autofree double *g1 = g_new(double, n2);
    random_matrix(rng, a, (size_t)rows_a * rank);
    th_dense_gram(a, rows_a, rank, g0);
    random_matrix(rng, a, (size_t)rows_b * rank);
    th_dense_gram(a, rows_b, rank, g1);
    double *grams[2] = {g0, g1};
    th_dense_hadamard_except(grams, 2, UINT32_MAX, rank, v);
}

/* A full-rank V at a rank where LAPACK's blocked code runs: the Cholesky
 * path, V V^-1 = I, exactly symmetric. */
static void test_cholesky_inverse_at_rank_256(void **state)
{
    (void)state;
    enum { R = 256 };
    th_rng rng;
    th_rng_seed(&rng, 31);
    g_autofree double *v = g_new(double, R * R);
    g_autofree double *inverse = g_new(double, R * R);
    g_autofree double *product = g_new(double, R * R);
    hadamard_of_random_grams(&rng, 2 * R, 3 * R, R, v);
    assert_int_equal(th_dense_spd_pinv(v, R, inverse), 0);
    assert_true(asymmetry(inverse, R) == 0.0);
    naive_product(v, inverse, R, product);
    double worst = 0.0;
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < R; ++j)
            worst = fmax(worst, fabs(product[i * R + j] - (i == j ? 1.0 : 0.0)));
    if (!(worst < 1e-12))
        fail_msg("rank %d: |V V^-1 - I| = %g", R, worst);
}

/* A rank-deficient V of size 240 and rank at most 4 * 30 = 120 (a rank
 * beyond what the factors support, as in CP-ALS): the fallback, checked by
 * the four Penrose conditions that define the pseudo-inverse X:
 * V X V = V, X V X = X, V X and X V symmetric. */
static void test_pseudo_inverse_penrose_at_rank_240(void **state)
{
    (void)state;
    enum { R = 240 };
    th_rng rng;
    th_rng_seed(&rng, 37);
    const size_t n2 = (size_t)R * R;
    g_autofree double *v = g_new(double, n2);
    g_autofree double *x = g_new(double, n2);
    g_autofree double *vx = g_new(double, n2);
    g_autofree double *xv = g_new(double, n2);
    g_autofree double *t = g_new(double, n2);
    hadamard_of_random_grams(&rng, 4, 30, R, v);
    assert_int_equal(th_dense_spd_pinv(v, R, x), 1);
    assert_true(asymmetry(x, R) == 0.0);
    naive_product(v, x, R, vx);
    naive_product(x, v, R, xv);
    /* V X is the orthogonal projector onto range(V): trace = rank = 120. */
    double trace = 0.0;
    for (int i = 0; i < R; ++i)
        trace += vx[i * R + i];
    if (!(fabs(trace - 120.0) < 1e-10))
        fail_msg("trace(V X) = %.12g, expected the rank 120", trace);
    naive_product(vx, v, R, t);
    double worst = 0.0;
    for (size_t i = 0; i < n2; ++i)
        worst = fmax(worst, fabs(t[i] - v[i]));
    if (!(worst <= 1e-12 * max_abs(v, n2)))
        fail_msg("|V X V - V| = %g, |V| = %g", worst, max_abs(v, n2));
    naive_product(xv, x, R, t);
    worst = 0.0;
    for (size_t i = 0; i < n2; ++i)
        worst = fmax(worst, fabs(t[i] - x[i]));
    if (!(worst <= 1e-11 * max_abs(x, n2)))
        fail_msg("|X V X - X| = %g, |X| = %g", worst, max_abs(x, n2));
    if (!(asymmetry(vx, R) < 1e-12 && asymmetry(xv, R) < 1e-12))
        fail_msg("V X or X V not symmetric: %g, %g", asymmetry(vx, R), asymmetry(xv, R));
}

/* NaN or Inf in V: no LAPACK call on it; the answer is all NaN. */
static void test_non_finite_matrix_gives_nan(void **state)
{
    (void)state;
    double v[4] = {1.0, 0.0, 0.0, NAN}, x[4] = {0};
    assert_int_equal(th_dense_spd_pinv(v, 2, x), 1);
    for (int i = 0; i < 4; ++i)
        assert_true(isnan(x[i]));
    v[3] = INFINITY;
    assert_int_equal(th_dense_spd_pinv(v, 2, x), 1);
    for (int i = 0; i < 4; ++i)
        assert_true(isnan(x[i]));
}

/* The BLAS paths at odd sizes (not multiples of any block size), against
 * the definitions: a tall Gram, exactly symmetric, and a non-square product;
 * an inner dimension of 0 gives zeros. */
static void test_gram_and_matmul_at_odd_sizes(void **state)
{
    (void)state;
    th_rng rng;
    th_rng_seed(&rng, 41);
    enum { ROWS = 1001, R = 67 };
    g_autofree double *a = g_new(double, ROWS * R);
    g_autofree double *gram = g_new(double, R * R);
    random_matrix(&rng, a, ROWS * R);
    th_dense_gram(a, ROWS, R, gram);
    assert_true(asymmetry(gram, R) == 0.0);
    for (int r = 0; r < R; ++r)
        for (int s = 0; s < R; ++s) {
            double expected = 0.0;
            for (int i = 0; i < ROWS; ++i)
                expected += a[i * R + r] * a[i * R + s];
            assert_true(fabs(gram[r * R + s] - expected) < 1e-11);
        }

    enum { M = 37, K = 19, N = 23 };
    double b[M * K], c[K * N], out[M * N];
    random_matrix(&rng, b, M * K);
    random_matrix(&rng, c, K * N);
    th_dense_matmul(b, c, M, K, N, out);
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            double expected = 0.0;
            for (int k = 0; k < K; ++k)
                expected += b[i * K + k] * c[k * N + j];
            assert_true(fabs(out[i * N + j] - expected) < 1e-13);
        }
    for (int i = 0; i < M * N; ++i)
        out[i] = 1.0;
    th_dense_matmul(b, c, M, 0, N, out);
    for (int i = 0; i < M * N; ++i)
        assert_true(out[i] == 0.0);
    /* No rows: an all-zero Gram. */
    for (int i = 0; i < R * R; ++i)
        gram[i] = 1.0;
    th_dense_gram(a, 0, R, gram);
    for (int i = 0; i < R * R; ++i)
        assert_true(gram[i] == 0.0);
}

static void test_normalize_two_norm_and_max_norm(void **state)
{
    (void)state;
    /* columns: (3,4) -> 5; (0,0) -> stays zero; (0.5,-0.25) */
    double a[6] = {3, 0, 0.5, 4, 0, -0.25};
    double lambda[3];
    th_dense_normalize_columns(a, 2, 3, 0, lambda);
    assert_true(fabs(lambda[0] - 5.0) < 1e-15 && lambda[1] == 0.0);
    assert_true(fabs(lambda[2] - sqrt(0.3125)) < 1e-15);
    assert_true(fabs(a[0] - 0.6) < 1e-15 && fabs(a[3] - 0.8) < 1e-15);
    assert_true(a[1] == 0.0 && a[4] == 0.0);

    double b[4] = {-6, 0.5, 2, 0.25};
    th_dense_normalize_columns(b, 2, 2, 1, lambda);
    /* max-norm is max(max |b|, 1): 6 for column 0, 1 for column 1 */
    assert_true(lambda[0] == 6.0 && lambda[1] == 1.0);
    assert_true(b[0] == -1.0 && b[1] == 0.5);
}

static void test_column_inner(void **state)
{
    (void)state;
    double m[4] = {1, 2, 3, 4}, a[4] = {5, 6, 7, 8}, inner[2];
    th_dense_column_inner(m, a, 2, 2, inner);
    assert_true(inner[0] == 26.0 && inner[1] == 44.0);
}

/* HALS converges to the nonnegative least-squares solution: run to
 * convergence, its result meets the KKT conditions of min_{a >= 0}
 * ||a v - m|| (gradient a v - m zero where a > 0, nonnegative where a = 0);
 * a few passes never increase the objective. */
static void test_hals_nonneg_meets_kkt(void **state)
{
    (void)state;
    th_rng rng;
    th_rng_seed(&rng, 77);
    const uint64_t rows = 40;
    const uint32_t rank = 6;
    double k[30 * 6], v[6 * 6], m[40 * 6], a[40 * 6], b[40 * 6], x[40 * 30];
    random_matrix(&rng, k, 30 * 6); /* K, entries of both signs */
    random_matrix(&rng, x, 40 * 30);
    th_dense_gram(k, 30, rank, v);
    th_dense_matmul(x, k, rows, 30, rank, m); /* m = X K */
    for (size_t n = 0; n < rows * rank; ++n)
        a[n] = b[n] = fabs(x[n]);
    /* objective 0.5 ||X - a K^T||^2 up to a constant: 0.5 tr(a v a^T) - tr(a^T m) */
    double previous = INFINITY;
    for (int pass = 0; pass < 5; ++pass) {
        (void)th_dense_hals_nonneg(m, v, rows, rank, 1, 0.0, b);
        double objective = 0.0;
        for (uint64_t i = 0; i < rows; ++i)
            for (uint32_t p = 0; p < rank; ++p) {
                double av = 0.0;
                for (uint32_t q = 0; q < rank; ++q)
                    av += b[i * rank + q] * v[q * rank + p];
                objective += 0.5 * b[i * rank + p] * av - b[i * rank + p] * m[i * rank + p];
            }
        assert_true(objective <= previous + 1e-9 * fabs(previous));
        previous = objective;
    }
    const uint32_t passes = th_dense_hals_nonneg(m, v, rows, rank, 5000, 1e-30, a);
    assert_true(passes > 1);
    for (uint64_t i = 0; i < rows; ++i)
        for (uint32_t p = 0; p < rank; ++p) {
            const double ai = a[i * rank + p];
            assert_true(ai >= 0.0);
            double gradient = -m[i * rank + p];
            for (uint32_t q = 0; q < rank; ++q)
                gradient += a[i * rank + q] * v[q * rank + p];
            if (ai > 0.0 && fabs(gradient) > 1e-8)
                fail_msg("row %llu column %u: a = %g > 0 with gradient %g",
                         (unsigned long long)i, p, ai, gradient);
            if (ai == 0.0 && gradient < -1e-8)
                fail_msg("row %llu column %u: a = 0 with gradient %g < 0",
                         (unsigned long long)i, p, gradient);
        }
}

/* Large enough to run on several threads: the same bits, and the same
 * number of passes, on one thread and on two. */
static void test_hals_nonneg_thread_count_does_not_matter(void **state)
{
    (void)state;
    th_rng rng;
    th_rng_seed(&rng, 78);
    const uint64_t rows = 3000;
    const uint32_t rank = 12;
    g_autofree double *k = g_new(double, 40 * rank);
    g_autofree double *v = g_new(double, rank * rank);
    g_autofree double *m = g_new(double, rows * rank);
    g_autofree double *one = g_new(double, rows * rank);
    g_autofree double *two = g_new(double, rows * rank);
    random_matrix(&rng, k, 40 * rank);
    random_matrix(&rng, m, rows * rank);
    th_dense_gram(k, 40, rank, v);
    for (size_t n = 0; n < rows * rank; ++n)
        one[n] = two[n] = fabs(m[n]);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const uint32_t passes_one = th_dense_hals_nonneg(m, v, rows, rank, 50, 1e-12, one);
    omp_set_num_threads(2);
    const uint32_t passes_two = th_dense_hals_nonneg(m, v, rows, rank, 50, 1e-12, two);
    omp_set_num_threads(threads);
    assert_int_equal(passes_one, passes_two);
    assert_memory_equal(one, two, rows * rank * sizeof(double));
}

/* ---- The regularised coordinate descent (th_dense_hals) ------------------
 * Its oracle: the exact minimiser of one row's problem
 *   f(a) = 1/2 a V a^T - m a^T + ridge/2 |a|^2 + l1 |a|_1   (a >= 0 under NONNEG)
 * found without coordinate descent, by trying every sign pattern: with the
 * set F of nonzero entries and their signs s fixed, f is a quadratic whose
 * stationary point solves (V + ridge I)_FF a_F = m_F - l1 s_F; the
 * minimiser is the pattern whose solution has the signs it assumed and the
 * lowest f (f strictly convex: V + ridge I positive definite). */

static double row_objective(const double *a, const double *v, const double *m, uint32_t rank,
                            double ridge, double l1)
{
    double f = 0.0;
    for (uint32_t p = 0; p < rank; ++p) {
        double av = 0.0;
        for (uint32_t q = 0; q < rank; ++q)
            av += a[q] * v[p * rank + q];
        f += 0.5 * a[p] * av - m[p] * a[p] + 0.5 * ridge * a[p] * a[p] + l1 * fabs(a[p]);
    }
    return f;
}

/* The exact minimiser of one row's problem (rank <= 6), by enumeration. */
static void exhaustive_row(const double *v, const double *m, uint32_t rank, double ridge,
                           double l1, gboolean nonneg, double *best)
{
    const uint32_t choices = nonneg ? 2 : 3; /* 0, +, (-) */
    uint32_t patterns = 1;
    for (uint32_t p = 0; p < rank; ++p)
        patterns *= choices;
    double best_f = INFINITY;
    for (uint32_t code = 0; code < patterns; ++code) {
        int sign[6];
        uint32_t free_index[6], n = 0, rest = code;
        for (uint32_t p = 0; p < rank; ++p) {
            const uint32_t c = rest % choices;
            rest /= choices;
            sign[p] = c == 0 ? 0 : c == 1 ? 1 : -1;
            if (sign[p])
                free_index[n++] = p;
        }
        double s[36], x[6], a[6] = {0};
        for (uint32_t i = 0; i < n; ++i) {
            for (uint32_t j = 0; j < n; ++j)
                s[i * n + j] = v[free_index[i] * rank + free_index[j]] + (i == j ? ridge : 0.0);
            x[i] = m[free_index[i]] - l1 * sign[free_index[i]];
        }
        if (n > 0 && !th_test_solve_small(s, x, n))
            continue;
        gboolean consistent = TRUE;
        for (uint32_t i = 0; i < n; ++i) {
            consistent = consistent && x[i] * sign[free_index[i]] > 0.0;
            a[free_index[i]] = x[i];
        }
        if (!consistent)
            continue;
        const double f = row_objective(a, v, m, rank, ridge, l1);
        if (f < best_f) {
            best_f = f;
            memcpy(best, a, sizeof(double) * rank);
        }
    }
}

/* Run to convergence, the coordinate descent reaches every row's exact
 * minimiser, for each constraint, with and without ridge and l1 (from
 * small to large enough to zero whole rows), on a V of full rank and on a
 * singular one (rank 3 with 2 columns of K: the ridge makes it definite). */
static void test_hals_reaches_the_exact_minimiser(void **state)
{
    (void)state;
    th_rng rng;
    th_rng_seed(&rng, 91);
    const uint64_t rows = 25;
    const uint32_t rank = 3;
    const double ridges[] = {0.0, 0.3, 2.0};
    const double l1s[] = {0.0, 0.05, 0.4, 5.0};
    for (int singular = 0; singular < 2; ++singular) {
        const uint32_t k_rows = singular ? 2 : 8;
        double k[8 * 3], v[9], m[25 * 3];
        random_matrix(&rng, k, (size_t)k_rows * rank);
        random_matrix(&rng, m, rows * rank);
        th_dense_gram(k, k_rows, rank, v);
        for (int constraint = TH_CONSTRAINT_NONE; constraint <= TH_CONSTRAINT_NONNEG;
             ++constraint)
            for (size_t ri = 0; ri < G_N_ELEMENTS(ridges); ++ri)
                for (size_t li = 0; li < G_N_ELEMENTS(l1s); ++li) {
                    const double ridge = ridges[ri], l1 = l1s[li];
                    if (singular && ridge == 0.0)
                        continue; /* no unique minimiser */
                    double a[25 * 3];
                    random_matrix(&rng, a, rows * rank);
                    (void)th_dense_hals(m, v, rows, rank, ridge, l1, constraint, 200000, 0.0,
                                        a);
                    for (uint64_t i = 0; i < rows; ++i) {
                        double want[3];
                        exhaustive_row(v, m + i * rank, rank, ridge, l1,
                                       constraint == TH_CONSTRAINT_NONNEG, want);
                        for (uint32_t p = 0; p < rank; ++p)
                            if (!(fabs(a[i * rank + p] - want[p]) <= 1e-9))
                                fail_msg("singular %d constraint %d ridge %g l1 %g row %llu "
                                         "column %u: %.17g, the minimiser %.17g",
                                         singular, constraint, ridge, l1,
                                         (unsigned long long)i, p, a[i * rank + p], want[p]);
                    }
                }
    }
}

/* Larger: the result meets the lasso's optimality conditions, with the
 * gradient g = a (V + ridge I) - m: g = -l1 sign(a) where a != 0 and
 * |g| <= l1 where a = 0 (unconstrained); g = -l1 where a > 0 and
 * g >= -l1 where a = 0 (nonnegative); each pass lowers the objective. */
static void test_hals_meets_the_lasso_conditions(void **state)
{
    (void)state;
    th_rng rng;
    th_rng_seed(&rng, 92);
    const uint64_t rows = 40;
    const uint32_t rank = 6;
    const double ridge = 0.25, l1 = 0.3;
    double k[30 * 6], v[6 * 6], m[40 * 6], x[40 * 30];
    random_matrix(&rng, k, 30 * 6);
    random_matrix(&rng, x, 40 * 30);
    th_dense_gram(k, 30, rank, v);
    th_dense_matmul(x, k, rows, 30, rank, m);
    for (int constraint = TH_CONSTRAINT_NONE; constraint <= TH_CONSTRAINT_NONNEG; ++constraint) {
        double a[40 * 6];
        random_matrix(&rng, a, rows * rank);
        double previous = INFINITY;
        for (int pass = 0; pass < 6; ++pass) {
            (void)th_dense_hals(m, v, rows, rank, ridge, l1, constraint, 1, 0.0, a);
            double f = 0.0;
            for (uint64_t i = 0; i < rows; ++i)
                f += row_objective(a + i * rank, v, m + i * rank, rank, ridge, l1);
            assert_true(f <= previous + 1e-12 * fabs(previous));
            previous = f;
        }
        (void)th_dense_hals(m, v, rows, rank, ridge, l1, constraint, 100000, 0.0, a);
        uint64_t zeros = 0;
        for (uint64_t i = 0; i < rows; ++i)
            for (uint32_t p = 0; p < rank; ++p) {
                const double ai = a[i * rank + p];
                double g = ridge * ai - m[i * rank + p];
                for (uint32_t q = 0; q < rank; ++q)
                    g += a[i * rank + q] * v[q * rank + p];
                if (constraint == TH_CONSTRAINT_NONNEG)
                    assert_true(ai >= 0.0);
                zeros += ai == 0.0;
                const gboolean ok = ai != 0.0 ? fabs(g + l1 * (ai > 0 ? 1.0 : -1.0)) < 1e-9
                                    : constraint == TH_CONSTRAINT_NONNEG ? g >= -l1 - 1e-9
                                                                         : fabs(g) <= l1 + 1e-9;
                if (!ok)
                    fail_msg("constraint %d row %llu column %u: a = %g, gradient %g", constraint,
                             (unsigned long long)i, p, ai, g);
            }
        assert_true(zeros > 0); /* the l1 term is active somewhere */
    }
}

/* Unconstrained with l1 = 0, the descent converges to the ridge's closed
 * form m (V + ridge I)^-1: the two update kinds of CP-ALS agree. */
static void test_hals_unconstrained_converges_to_the_ridge_solve(void **state)
{
    (void)state;
    th_rng rng;
    th_rng_seed(&rng, 93);
    const uint64_t rows = 20;
    const uint32_t rank = 5;
    const double ridge = 0.5;
    double k[12 * 5], v[25], shifted[25], w[25], m[20 * 5], a[20 * 5], closed[20 * 5];
    random_matrix(&rng, k, 12 * 5);
    random_matrix(&rng, m, rows * rank);
    random_matrix(&rng, a, rows * rank);
    th_dense_gram(k, 12, rank, v);
    memcpy(shifted, v, sizeof v);
    for (uint32_t p = 0; p < rank; ++p)
        shifted[p * rank + p] += ridge;
    assert_int_equal(th_dense_spd_pinv(shifted, rank, w), 0);
    th_dense_matmul(m, w, rows, rank, rank, closed);
    (void)th_dense_hals(m, v, rows, rank, ridge, 0.0, TH_CONSTRAINT_NONE, 100000, 0.0, a);
    assert_true(max_abs_diff(a, closed, rows * rank) < 1e-10);
}

/* With ridge 0, l1 0 and the constraint it is the nonnegative update of
 * plugin ABI 1.5 bit for bit; a column whose d = v(k,k) + ridge is 0 is
 * left as it is, and one with v(k,k) = 0 but a ridge is not. */
static void test_hals_special_cases(void **state)
{
    (void)state;
    th_rng rng;
    th_rng_seed(&rng, 94);
    const uint64_t rows = 10;
    const uint32_t rank = 3;
    double k[6 * 3], v[9], m[10 * 3], a[10 * 3], b[10 * 3];
    random_matrix(&rng, k, 6 * 3);
    random_matrix(&rng, m, rows * rank);
    random_matrix(&rng, a, rows * rank);
    th_dense_gram(k, 6, rank, v);
    memcpy(b, a, sizeof a);
    assert_int_equal(th_dense_hals(m, v, rows, rank, 0.0, 0.0, TH_CONSTRAINT_NONNEG, 3, 0.0, a),
                     th_dense_hals_nonneg(m, v, rows, rank, 3, 0.0, b));
    assert_memory_equal(a, b, sizeof a);
    /* Column 1 of K zero: v(1,1) = 0. */
    for (uint32_t r = 0; r < 6; ++r)
        k[r * rank + 1] = 0.0;
    th_dense_gram(k, 6, rank, v);
    random_matrix(&rng, a, rows * rank);
    memcpy(b, a, sizeof a);
    (void)th_dense_hals(m, v, rows, rank, 0.0, 0.1, TH_CONSTRAINT_NONE, 4, 0.0, a);
    for (uint64_t i = 0; i < rows; ++i)
        assert_true(a[i * rank + 1] == b[i * rank + 1]);
    (void)th_dense_hals(m, v, rows, rank, 2.0, 0.0, TH_CONSTRAINT_NONE, 4, 0.0, a);
    for (uint64_t i = 0; i < rows; ++i) /* d = 2: a(i,1) = m(i,1) / 2, v's column 1 zero */
        assert_true(fabs(a[i * rank + 1] - m[i * rank + 1] / 2.0) < 1e-15);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gram_matches_definition),
        cmocka_unit_test(test_hadamard_skips_one_mode),
        cmocka_unit_test(test_inverse_of_spd),
        cmocka_unit_test(test_pseudo_inverse_when_rank_deficient),
        cmocka_unit_test(test_zero_matrix_has_zero_pseudo_inverse),
        cmocka_unit_test(test_rank_one_scalar),
        cmocka_unit_test(test_tiny_pivot_counts_as_breakdown),
        cmocka_unit_test(test_indefinite_matrix_gets_its_inverse),
        cmocka_unit_test(test_pseudo_inverse_of_rank_one_matrix),
        cmocka_unit_test(test_cholesky_inverse_at_rank_256),
        cmocka_unit_test(test_pseudo_inverse_penrose_at_rank_240),
        cmocka_unit_test(test_non_finite_matrix_gives_nan),
        cmocka_unit_test(test_gram_and_matmul_at_odd_sizes),
        cmocka_unit_test(test_normalize_two_norm_and_max_norm),
        cmocka_unit_test(test_column_inner),
        cmocka_unit_test(test_hals_nonneg_meets_kkt),
        cmocka_unit_test(test_hals_nonneg_thread_count_does_not_matter),
        cmocka_unit_test(test_hals_reaches_the_exact_minimiser),
        cmocka_unit_test(test_hals_meets_the_lasso_conditions),
        cmocka_unit_test(test_hals_unconstrained_converges_to_the_ridge_solve),
        cmocka_unit_test(test_hals_special_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
