/* The published form of a CP model: unit 2-norm columns with the weights in
 * lambda, Tensor Toolbox's sign rule and decreasing lambda, each step
 * leaving the tensor the model represents unchanged. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <glib.h>
#include <omp.h>
#include <string.h>

#include "cpd/cp_model.h"

/* The dense tensor of the model, row-major with mode 0 slowest. */
static double *model_tensor(const double *lambda, double *const *factors, const th_index *dims,
                            uint32_t nmodes, uint32_t rank, uint64_t *cells)
{
    uint64_t n = 1;
    for (uint32_t m = 0; m < nmodes; ++m)
        n *= dims[m];
    double *x = g_new0(double, n);
    for (uint64_t cell = 0; cell < n; ++cell) {
        uint64_t rest = cell;
        th_index index[8];
        for (uint32_t m = nmodes; m-- > 0;) {
            index[m] = (th_index)(rest % dims[m]);
            rest /= dims[m];
        }
        for (uint32_t r = 0; r < rank; ++r) {
            double p = lambda[r];
            for (uint32_t m = 0; m < nmodes; ++m)
                p *= factors[m][(size_t)index[m] * rank + r];
            x[cell] += p;
        }
    }
    *cells = n;
    return x;
}

static void assert_same_tensor(const double *a, const double *b, uint64_t n)
{
    for (uint64_t i = 0; i < n; ++i)
        if (fabs(a[i] - b[i]) > 1e-12 * (1.0 + fabs(b[i])))
            fail_msg("cell %" G_GUINT64_FORMAT ": %.17g, expected %.17g", i, a[i], b[i]);
}

typedef struct model {
    uint32_t nmodes, rank;
    th_index dims[4];
    double lambda[6];
    double *factors[4];
} model;

/* Entries uniform in [-1, 1) from `seed`; lambda in [0.5, 2.5). */
static void model_random(model *k, uint32_t seed)
{
    *k = (model){.nmodes = 3, .rank = 5, .dims = {4, 3, 5}};
    g_autoptr(GRand) rng = g_rand_new_with_seed(seed);
    for (uint32_t r = 0; r < k->rank; ++r)
        k->lambda[r] = g_rand_double_range(rng, 0.5, 2.5);
    for (uint32_t m = 0; m < k->nmodes; ++m) {
        k->factors[m] = g_new(double, (size_t)k->dims[m] * k->rank);
        for (uint32_t i = 0; i < k->dims[m] * k->rank; ++i)
            k->factors[m][i] = g_rand_double_range(rng, -1.0, 1.0);
    }
}

static void model_clear(model *k)
{
    for (uint32_t m = 0; m < k->nmodes; ++m)
        g_free(k->factors[m]);
}

static double column_norm(const model *k, uint32_t m, uint32_t r)
{
    double s = 0.0;
    for (uint32_t i = 0; i < k->dims[m]; ++i)
        s += k->factors[m][i * k->rank + r] * k->factors[m][i * k->rank + r];
    return sqrt(s);
}

/* The entry of largest magnitude of column r of mode m (the first on ties). */
static double largest_entry(const model *k, uint32_t m, uint32_t r)
{
    double best = 0.0;
    for (uint32_t i = 0; i < k->dims[m]; ++i)
        if (fabs(k->factors[m][i * k->rank + r]) > fabs(best))
            best = k->factors[m][i * k->rank + r];
    return best;
}

static void test_normalize_moves_norms_into_lambda(void **state)
{
    (void)state;
    model k;
    model_random(&k, 1);
    k.lambda[2] = -1.5; /* a negative weight is made positive by a column's sign */
    uint64_t n = 0;
    g_autofree double *before = model_tensor(k.lambda, k.factors, k.dims, 3, k.rank, &n);
    th_cp_model_normalize(k.lambda, k.factors, k.dims, 3, k.rank);
    for (uint32_t r = 0; r < k.rank; ++r) {
        assert_true(k.lambda[r] > 0.0);
        for (uint32_t m = 0; m < 3; ++m)
            assert_true(fabs(column_norm(&k, m, r) - 1.0) < 1e-14);
    }
    g_autofree double *after = model_tensor(k.lambda, k.factors, k.dims, 3, k.rank, &n);
    assert_same_tensor(after, before, n);
    model_clear(&k);
}

static void test_normalize_keeps_a_zero_column(void **state)
{
    (void)state;
    model k;
    model_random(&k, 2);
    for (uint32_t i = 0; i < k.dims[1]; ++i)
        k.factors[1][i * k.rank + 3] = 0.0;
    th_cp_model_normalize(k.lambda, k.factors, k.dims, 3, k.rank);
    assert_true(k.lambda[3] == 0.0);
    assert_true(column_norm(&k, 1, 3) == 0.0);
    for (uint32_t i = 0; i < k.dims[0] * k.rank; ++i)
        assert_true(isfinite(k.factors[0][i]));
    model_clear(&k);
}

/* Column 0's largest entries: modes 0 and 1 negative (both flip); column 1:
 * all three negative (modes 0 and 1 flip, mode 2 stays); column 2: only
 * mode 2 negative (nothing can flip). */
static void test_fix_signs_flips_pairs_as_tensor_toolbox(void **state)
{
    (void)state;
    model k = {.nmodes = 3, .rank = 3, .dims = {2, 2, 2}};
    double a0[] = {-0.9, -0.8, 0.2, 0.1, -0.1, 0.3};
    double a1[] = {0.1, -0.7, 0.5, -0.8, 0.2, -0.4};
    double a2[] = {0.6, -0.9, -0.3, 0.5, -0.5, 0.2};
    k.factors[0] = g_memdup2(a0, sizeof a0);
    k.factors[1] = g_memdup2(a1, sizeof a1);
    k.factors[2] = g_memdup2(a2, sizeof a2);
    for (uint32_t r = 0; r < 3; ++r)
        k.lambda[r] = 1.0;
    uint64_t n = 0;
    g_autofree double *before = model_tensor(k.lambda, k.factors, k.dims, 3, 3, &n);
    th_cp_model_fix_signs(k.factors, k.dims, 3, 3);
    const double expected[3][3] = {{0.9, 0.8, 0.6}, {0.8, 0.7, -0.9}, {0.3, 0.5, -0.3}};
    for (uint32_t r = 0; r < 3; ++r)
        for (uint32_t m = 0; m < 3; ++m)
            if (fabs(largest_entry(&k, m, r) - expected[r][m]) > 1e-15)
                fail_msg("component %u mode %u: largest entry %g, expected %g", r, m,
                         largest_entry(&k, m, r), expected[r][m]);
    g_autofree double *after = model_tensor(k.lambda, k.factors, k.dims, 3, 3, &n);
    assert_same_tensor(after, before, n);
    model_clear(&k);
}

/* A negative weight's sign goes to mode 0's column, in normalize and in
 * arrange alike: with no other negative mode it stays there (fixsigns
 * cannot flip one mode alone), so the published model says which mode
 * carries it. */
static void test_negative_weight_sign_goes_to_mode_0(void **state)
{
    (void)state;
    for (int arrange = 0; arrange < 2; ++arrange) {
        model k = {.nmodes = 3, .rank = 1, .dims = {2, 2, 2}};
        const double a0[] = {0.6, 0.8}, a1[] = {0.8, 0.6}, a2[] = {0.6, 0.8};
        k.factors[0] = g_memdup2(a0, sizeof a0);
        k.factors[1] = g_memdup2(a1, sizeof a1);
        k.factors[2] = g_memdup2(a2, sizeof a2);
        k.lambda[0] = -2.0;
        if (arrange)
            th_cp_model_arrange(k.lambda, k.factors, k.dims, 3, 1);
        else
            th_cp_model_normalize(k.lambda, k.factors, k.dims, 3, 1);
        assert_true(k.lambda[0] == 2.0);
        const double *want[3] = {NULL, a1, a2};
        const double negated[2] = {-0.6, -0.8};
        want[0] = negated;
        for (uint32_t m = 0; m < 3; ++m)
            for (uint32_t i = 0; i < 2; ++i)
                if (fabs(k.factors[m][i] - want[m][i]) > 1e-15)
                    fail_msg("%s: mode %u row %u: %g, expected %g",
                             arrange ? "arrange" : "normalize", m, i, k.factors[m][i],
                             want[m][i]);
        model_clear(&k);
    }
}

/* fixsigns reads the sign of each column's first entry of largest
 * magnitude: on a tie in magnitude the earlier row decides, within one
 * chunk of the parallel read and across chunks (16384 rows each). */
static void test_first_largest_entry_decides_the_sign(void **state)
{
    (void)state;
    for (int arrange = 0; arrange < 2; ++arrange) {
        /* Within a chunk: mode 0's tie -0.6 / +0.6 reads negative, and with
         * mode 1 negative too both flip. */
        model k = {.nmodes = 2, .rank = 1, .dims = {3, 2}};
        const double a0[] = {-0.6, 0.6, sqrt(0.28)}, a1[] = {-0.8, 0.6};
        k.factors[0] = g_memdup2(a0, sizeof a0);
        k.factors[1] = g_memdup2(a1, sizeof a1);
        k.lambda[0] = 1.0;
        if (arrange)
            th_cp_model_arrange(k.lambda, k.factors, k.dims, 2, 1);
        else
            th_cp_model_fix_signs(k.factors, k.dims, 2, 1);
        assert_true(fabs(k.factors[0][0] - 0.6) < 1e-15);
        assert_true(fabs(k.factors[1][0] - 0.8) < 1e-15);
        model_clear(&k);

        /* Across chunks: +0.5 at row 100 comes before -0.5 at row 39000,
         * so mode 0 reads positive, mode 1 is the only negative mode, and
         * nothing flips. */
        model tall = {.nmodes = 2, .rank = 1, .dims = {40000, 2}};
        tall.factors[0] = g_new(double, 40000);
        for (uint32_t i = 0; i < 40000; ++i)
            tall.factors[0][i] = 1e-3;
        tall.factors[0][100] = 0.5;
        tall.factors[0][39000] = -0.5;
        tall.factors[1] = g_memdup2(a1, sizeof a1);
        tall.lambda[0] = 1.0;
        if (arrange)
            th_cp_model_arrange(tall.lambda, tall.factors, tall.dims, 2, 1);
        else
            th_cp_model_fix_signs(tall.factors, tall.dims, 2, 1);
        assert_true(tall.factors[0][100] > 0.0);
        assert_true(tall.factors[0][39000] < 0.0);
        assert_true(tall.factors[1][0] < 0.0);
        model_clear(&tall);
    }
}

static void test_sort_orders_by_decreasing_lambda_stably(void **state)
{
    (void)state;
    model k;
    model_random(&k, 3);
    const double lambda[] = {1.0, 3.0, 2.0, 3.0, 0.5};
    for (uint32_t r = 0; r < 5; ++r) {
        k.lambda[r] = lambda[r];
        k.factors[0][r] = (double)r; /* row 0 of mode 0 labels the components */
    }
    uint64_t n = 0;
    g_autofree double *before = model_tensor(k.lambda, k.factors, k.dims, 3, 5, &n);
    th_cp_model_sort(k.lambda, k.factors, k.dims, 3, 5);
    const double order[] = {1, 3, 2, 0, 4};
    for (uint32_t r = 0; r < 5; ++r) {
        assert_true(k.lambda[r] == lambda[(int)order[r]]);
        assert_true(k.factors[0][r] == order[r]);
    }
    g_autofree double *after = model_tensor(k.lambda, k.factors, k.dims, 3, 5, &n);
    assert_same_tensor(after, before, n);
    model_clear(&k);
}

static void test_arrange_gives_the_published_form(void **state)
{
    (void)state;
    for (uint32_t seed = 10; seed < 20; ++seed) {
        model k;
        model_random(&k, seed);
        uint64_t n = 0;
        g_autofree double *before = model_tensor(k.lambda, k.factors, k.dims, 3, k.rank, &n);
        th_cp_model_arrange(k.lambda, k.factors, k.dims, 3, k.rank);
        for (uint32_t r = 0; r < k.rank; ++r) {
            if (r > 0)
                assert_true(k.lambda[r] <= k.lambda[r - 1]);
            uint32_t negative = 0;
            for (uint32_t m = 0; m < 3; ++m) {
                assert_true(fabs(column_norm(&k, m, r) - 1.0) < 1e-14);
                negative += largest_entry(&k, m, r) < 0.0;
            }
            assert_true(negative <= 1);
        }
        g_autofree double *after = model_tensor(k.lambda, k.factors, k.dims, 3, k.rank, &n);
        assert_same_tensor(after, before, n);
        model_clear(&k);
    }
}

/* A tall model (several of the parallel passes' chunks per factor), with a
 * negative weight, a zero column and a column whose largest entries tie in
 * magnitude with opposite signs, in separate chunks. */
typedef struct tall_model {
    th_index dims[3];
    double lambda[6];
    double *factors[3];
} tall_model;

static void tall_model_init(tall_model *k)
{
    *k = (tall_model){.dims = {40000, 7, 70001}};
    g_autoptr(GRand) rng = g_rand_new_with_seed(77);
    for (uint32_t r = 0; r < 6; ++r)
        k->lambda[r] = g_rand_double_range(rng, 0.5, 2.5);
    k->lambda[1] = -0.75;
    for (uint32_t m = 0; m < 3; ++m) {
        k->factors[m] = g_new(double, (size_t)k->dims[m] * 6);
        for (uint64_t i = 0; i < (uint64_t)k->dims[m] * 6; ++i)
            k->factors[m][i] = g_rand_double_range(rng, -1.0, 1.0);
    }
    for (uint32_t i = 0; i < k->dims[2]; ++i)
        k->factors[2][(size_t)i * 6 + 4] = 0.0; /* a zero column */
    k->factors[0][(size_t)100 * 6 + 3] = 1.0; /* the first of a tie: it decides */
    k->factors[0][(size_t)39000 * 6 + 3] = -1.0;
}

static void tall_model_copy(tall_model *dst, const tall_model *src)
{
    *dst = *src;
    for (uint32_t m = 0; m < 3; ++m)
        dst->factors[m] = g_memdup2(src->factors[m], sizeof(double) * src->dims[m] * 6);
}

static void tall_model_clear(tall_model *k)
{
    for (uint32_t m = 0; m < 3; ++m)
        g_free(k->factors[m]);
}

static void assert_same_model(const tall_model *a, const tall_model *b, double tolerance)
{
    for (uint32_t r = 0; r < 6; ++r)
        assert_true(fabs(a->lambda[r] - b->lambda[r]) <= tolerance * fabs(b->lambda[r]));
    for (uint32_t m = 0; m < 3; ++m)
        for (uint64_t i = 0; i < (uint64_t)a->dims[m] * 6; ++i)
            if (fabs(a->factors[m][i] - b->factors[m][i]) > tolerance)
                fail_msg("mode %u entry %" G_GUINT64_FORMAT ": %.17g, expected %.17g", m, i,
                         a->factors[m][i], b->factors[m][i]);
}

/* arrange decides from one read of each factor what normalize, fix_signs
 * and sort decide one after the other. */
static void test_arrange_equals_the_three_steps(void **state)
{
    (void)state;
    tall_model fused, steps;
    tall_model_init(&fused);
    tall_model_copy(&steps, &fused);
    th_cp_model_arrange(fused.lambda, fused.factors, fused.dims, 3, 6);
    th_cp_model_normalize(steps.lambda, steps.factors, steps.dims, 3, 6);
    th_cp_model_fix_signs(steps.factors, steps.dims, 3, 6);
    th_cp_model_sort(steps.lambda, steps.factors, steps.dims, 3, 6);
    assert_same_model(&fused, &steps, 1e-15);
    uint32_t zero_component = 6;
    for (uint32_t r = 0; r < 6; ++r)
        if (fused.lambda[r] == 0.0)
            zero_component = r;
    assert_int_equal(zero_component, 5); /* sorted last */
    tall_model_clear(&fused);
    tall_model_clear(&steps);
}

/* The passes run on all cores in fixed chunks: the same bits from 1 thread
 * as from several. */
static void test_arrange_does_not_depend_on_the_thread_count(void **state)
{
    (void)state;
    tall_model one, many;
    tall_model_init(&one);
    tall_model_copy(&many, &one);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    th_cp_model_arrange(one.lambda, one.factors, one.dims, 3, 6);
    omp_set_num_threads(4);
    th_cp_model_arrange(many.lambda, many.factors, many.dims, 3, 6);
    omp_set_num_threads(threads);
    assert_memory_equal(one.lambda, many.lambda, sizeof one.lambda);
    for (uint32_t m = 0; m < 3; ++m)
        assert_memory_equal(one.factors[m], many.factors[m], sizeof(double) * one.dims[m] * 6);
    tall_model_clear(&one);
    tall_model_clear(&many);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalize_moves_norms_into_lambda),
        cmocka_unit_test(test_normalize_keeps_a_zero_column),
        cmocka_unit_test(test_fix_signs_flips_pairs_as_tensor_toolbox),
        cmocka_unit_test(test_negative_weight_sign_goes_to_mode_0),
        cmocka_unit_test(test_first_largest_entry_decides_the_sign),
        cmocka_unit_test(test_sort_orders_by_decreasing_lambda_stably),
        cmocka_unit_test(test_arrange_gives_the_published_form),
        cmocka_unit_test(test_arrange_equals_the_three_steps),
        cmocka_unit_test(test_arrange_does_not_depend_on_the_thread_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
