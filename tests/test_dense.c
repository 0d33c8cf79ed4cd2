/* The host's R x R algebra: Gram, Hadamard, (pseudo-)inverse, normalisation. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <glib.h>

#include "dense.h"
#include "rng.h"

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

static void test_zero_matrix_has_zero_pseudo_inverse(void **state)
{
    (void)state;
    double v[9] = {0}, pinv[9];
    assert_int_equal(th_dense_spd_pinv(v, 3, pinv), 1);
    for (int i = 0; i < 9; ++i)
        assert_true(pinv[i] == 0.0);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gram_matches_definition),
        cmocka_unit_test(test_hadamard_skips_one_mode),
        cmocka_unit_test(test_inverse_of_spd),
        cmocka_unit_test(test_pseudo_inverse_when_rank_deficient),
        cmocka_unit_test(test_zero_matrix_has_zero_pseudo_inverse),
        cmocka_unit_test(test_normalize_two_norm_and_max_norm),
        cmocka_unit_test(test_column_inner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
