/* The counter-based initial factors (plugin.h, "Initial factors"): the
 * generator's known answers, its range, rank prefixes, the host's draw on
 * any number of threads, cpu-reference's own draw (ABI 1.3 init_factors)
 * against the host's for several seeds and shapes, and a CP-ALS run
 * through init_factors against one from the same factors given
 * explicitly. */
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <glib.h>
#include <tensorhost/plugin_sdk.h>

#include "plugin/backend.h"
#include "cpd/cp_als.h"
#include "cpd/dense.h"
#include "cpd/initial_factors.h"
#include "base/log.h"
#include "test_support.h"

/* Known answers of F_mode(row, column) for a seed, from an independent
 * implementation of the formula plugin.h documents:
 *   mix(z)   = z ^= z >> 30; z *= 0xbf58476d1ce4e5b9; z ^= z >> 27;
 *              z *= 0x94d049bb133111eb; z ^ (z >> 31)   (mod 2^64)
 *   G        = 0x9e3779b97f4a7c15
 *   mode_key = mix(seed ^ mix(mode + G))
 *   row_key  = mix(mode_key ^ mix(row + 2G))
 *   value    = (mix(row_key + (column + 1) G) >> 11) * 2^-53
 * written as hexadecimal floats, so the comparison is exact. */
static const struct {
    uint64_t seed;
    uint32_t mode;
    uint64_t row;
    uint32_t column;
    double value;
} known_answers[] = {
    {0, 0, 0, 0, 0x1.4a8c98fedd7ccp-2},
    {0, 0, 0, 1, 0x1.d274f34a43398p-4},
    {0, 1, 0, 0, 0x1.0b7a9e4e5d2acp-2},
    {0, 0, 1, 0, 0x1.83c462e70c568p-1},
    {42, 2, 7, 3, 0x1.c65c8885065f4p-2},
    {UINT64_MAX, 3, 25500000, 31, 0x1.0dbc2cc69fcf6p-1},
    {UINT64_C(0x8000000000000000), 0, UINT32_MAX, 4095, 0x1.d09f9d361cc71p-1},
    {12345, 7, 123456789, 15, 0x1.c0da441f6e578p-4},
};

static void test_generator_known_answers(void **state)
{
    (void)state;
    for (size_t i = 0; i < G_N_ELEMENTS(known_answers); ++i) {
        const double got = th_initial_factor_value(known_answers[i].seed, known_answers[i].mode,
                                                   known_answers[i].row, known_answers[i].column);
        if (memcmp(&got, &known_answers[i].value, sizeof got) != 0)
            fail_msg("answer %zu: %a, expected %a", i, got, known_answers[i].value);
        /* The per-row parts compose to the same value. */
        const uint64_t key = th_initial_factor_row_key(known_answers[i].seed,
                                                       known_answers[i].mode, known_answers[i].row);
        assert_true(th_initial_factor_from_row_key(key, known_answers[i].column) == got);
    }
}

/* Every value in [0, 1), spread over it: the mean of many is about 1/2 and
 * both ends are reached closely. */
static void test_values_lie_in_the_unit_interval(void **state)
{
    (void)state;
    const uint64_t seeds[] = {0, 1, UINT64_MAX};
    for (size_t s = 0; s < G_N_ELEMENTS(seeds); ++s) {
        double sum = 0.0, low = 1.0, high = 0.0;
        const uint32_t rows = 20000, rank = 16;
        for (uint32_t i = 0; i < rows; ++i)
            for (uint32_t r = 0; r < rank; ++r) {
                const double v = th_initial_factor_value(seeds[s], i % 3, i, r);
                if (!(v >= 0.0 && v < 1.0))
                    fail_msg("seed %" G_GUINT64_FORMAT " row %u column %u: %a", seeds[s], i, r, v);
                sum += v;
                low = fmin(low, v);
                high = fmax(high, v);
            }
        const double mean = sum / ((double)rows * rank);
        assert_true(fabs(mean - 0.5) < 0.005);
        assert_true(low < 1e-4 && high > 1.0 - 1e-4);
    }
}

/* Keyed by column: a rank-16 start is the first 16 columns of the rank-32
 * start of the same seed. */
static void test_smaller_rank_is_a_prefix(void **state)
{
    (void)state;
    const th_index dims[] = {13, 1, 7};
    double **narrow = th_cpd_initial_factors(dims, 3, 16, 99);
    double **wide = th_cpd_initial_factors(dims, 3, 32, 99);
    for (uint32_t m = 0; m < 3; ++m)
        for (uint32_t i = 0; i < dims[m]; ++i)
            assert_memory_equal(narrow[m] + (size_t)i * 16, wide[m] + (size_t)i * 32,
                                16 * sizeof(double));
    th_cpd_free_factors(narrow, 3);
    th_cpd_free_factors(wide, 3);
}

static void test_seed_determines_the_factors(void **state)
{
    (void)state;
    const th_index dims[] = {3, 4};
    double **a = th_cpd_initial_factors(dims, 2, 2, 42);
    double **b = th_cpd_initial_factors(dims, 2, 2, 42);
    double **c = th_cpd_initial_factors(dims, 2, 2, 43);
    assert_memory_equal(a[1], b[1], sizeof(double) * 8);
    assert_memory_not_equal(a[1], c[1], sizeof(double) * 8);
    for (int k = 0; k < 8; ++k)
        assert_true(a[1][k] >= 0.0 && a[1][k] < 1.0);
    /* Modes draw apart from each other, even in their first row. */
    assert_memory_not_equal(a[0], a[1], sizeof(double) * 2);
    th_cpd_free_factors(a, 2);
    th_cpd_free_factors(b, 2);
    th_cpd_free_factors(c, 2);
}

/* The host's draw on 1 and on 2 OpenMP threads: the same bits, and those
 * of th_initial_factor_value one by one. Large enough to run in parallel. */
static void test_host_draw_ignores_the_thread_count(void **state)
{
    (void)state;
    const uint64_t rows = 100003;
    const uint32_t rank = 8, mode = 2;
    const uint64_t seed = UINT64_C(0xfeedface);
    const int saved = omp_get_max_threads();
    g_autofree double *one = g_new(double, rows * rank);
    g_autofree double *two = g_new(double, rows * rank);
    omp_set_num_threads(1);
    th_initial_factor_fill(one, rows, rank, seed, mode);
    omp_set_num_threads(2);
    th_initial_factor_fill(two, rows, rank, seed, mode);
    omp_set_num_threads(saved);
    assert_memory_equal(one, two, sizeof(double) * rows * rank);
    for (uint64_t i = 0; i < rows; i += 997)
        for (uint32_t r = 0; r < rank; ++r)
            assert_true(one[i * rank + r] == th_initial_factor_value(seed, mode, i, r));
}

static th_backend *open_plugin(const char *path)
{
    g_autoptr(GError) error = NULL;
    th_backend *backend = th_backend_open(path, NULL, NULL, NULL, &error);
    if (!backend)
        fail_msg("cannot open %s: %s", path, error->message);
    return backend;
}

#define CPU_REFERENCE TH_PLUGIN_DIR "/cpu-reference.so"

/* cpu-reference's init_factors leaves exactly the factors the host draws,
 * and their Grams, for 2-, 3- and 4-mode tensors (one with a mode of
 * length 1) and seeds from 0 to UINT64_MAX. */
static void test_host_and_backend_draw_identical_factors(void **state)
{
    (void)state;
    const th_index dims2[] = {11, 6}, dims3[] = {9, 1, 5}, dims4[] = {4, 3, 6, 2};
    const struct {
        const th_index *dims;
        uint32_t nmodes, rank;
    } shapes[] = {{dims2, 2, 3}, {dims3, 3, 16}, {dims4, 4, 5}};
    const uint64_t seeds[] = {0, 1, 42, UINT64_C(0x8000000000000000), UINT64_MAX};
    g_autoptr(th_backend) backend = open_plugin(CPU_REFERENCE);
    assert_true(th_backend_has_init_factors(backend));
    for (size_t s = 0; s < G_N_ELEMENTS(shapes); ++s) {
        const uint32_t n = shapes[s].nmodes, rank = shapes[s].rank;
        g_autoptr(th_sptensor) t = th_test_planted_dense(shapes[s].dims, n, 2, 7 + s);
        g_autoptr(GError) error = NULL;
        if (!th_backend_load_tensor(backend, t, rank, &error))
            fail_msg("load_tensor: %s", error->message);
        double *grams[4];
        for (uint32_t m = 0; m < n; ++m)
            grams[m] = g_new(double, (size_t)rank * rank);
        size_t largest = 0;
        for (uint32_t m = 0; m < n; ++m)
            largest = MAX(largest, (size_t)t->dims[m] * rank);
        g_autofree double *held = g_new(double, largest);
        g_autofree double *gram = g_new(double, (size_t)rank * rank);
        for (size_t k = 0; k < G_N_ELEMENTS(seeds); ++k) {
            if (!th_backend_init_factors(backend, seeds[k], grams, &error))
                fail_msg("init_factors: %s", error->message);
            double **drawn = th_cpd_initial_factors(t->dims, n, rank, seeds[k]);
            for (uint32_t m = 0; m < n; ++m) {
                const size_t count = (size_t)t->dims[m] * rank;
                assert_true(th_backend_get_factor(backend, m, held, &error));
                if (memcmp(held, drawn[m], count * sizeof(double)) != 0)
                    fail_msg("shape %zu seed %" G_GUINT64_FORMAT " mode %u: the backend's "
                             "factor differs from the host's draw", s, seeds[k], m);
                th_dense_gram(drawn[m], t->dims[m], rank, gram);
                assert_true(th_test_relative_error(grams[m], gram, (uint64_t)rank * rank) <
                            1e-14);
            }
            th_cpd_free_factors(drawn, n);
        }
        for (uint32_t m = 0; m < n; ++m)
            g_free(grams[m]);
    }
}

static th_cpd_result *run(th_backend *backend, const th_sptensor *t, const th_cpd_params *params)
{
    g_autoptr(GError) error = NULL;
    if (!th_backend_load_tensor(backend, t, params->rank, &error))
        fail_msg("load_tensor: %s", error->message);
    th_cpd_result *r = th_cp_als(backend, t, params, NULL, &error);
    if (!r)
        fail_msg("cp_als: %s", error->message);
    return r;
}

static void assert_same_fits(const th_cpd_result *a, const th_cpd_result *b, double tolerance)
{
    assert_int_equal(a->iterations->len, b->iterations->len);
    for (guint i = 0; i < a->iterations->len; ++i) {
        const double fa = g_array_index(a->iterations, th_cpd_iteration, i).fit;
        const double fb = g_array_index(b->iterations, th_cpd_iteration, i).fit;
        if (!(fabs(fa - fb) < tolerance))
            fail_msg("iteration %u: fit %.17g vs %.17g", i + 1, fa, fb);
    }
}

/* A run whose backend draws its own factors (cpu-reference, init_factors)
 * computes what a run given th_cpd_initial_factors' draw explicitly does,
 * and what a backend without init_factors computes from the host's draw. */
static void test_run_through_init_factors_matches_explicit_factors(void **state)
{
    (void)state;
    const th_index dims[] = {6, 7, 8};
    g_autoptr(th_sptensor) t = th_test_planted_dense(dims, 3, 2, 9);
    for (uint64_t k = 0; k < t->nnz; k += 3)
        t->values[k] *= 1.5; /* so the fit does not reach 1 at once */
    g_autoptr(th_backend) reference = open_plugin(CPU_REFERENCE);
    th_cpd_params params = {.rank = 3, .max_iters = 12, .tolerance = 0, .seed = 2024};
    g_autoptr(th_cpd_result) drawn_by_backend = run(reference, t, &params);
    assert_int_equal(drawn_by_backend->initial_factors, TH_INIT_BACKEND);

    double **initial = th_cpd_initial_factors(t->dims, 3, params.rank, params.seed);
    params.initial_factors = (const double *const *)initial;
    g_autoptr(th_cpd_result) given = run(reference, t, &params);
    th_cpd_free_factors(initial, 3);
    assert_int_equal(given->initial_factors, TH_INIT_GIVEN);
    /* Only the first Grams' summation order differs. */
    assert_same_fits(drawn_by_backend, given, 1e-12);
    assert_true(fabs(drawn_by_backend->fit - given->fit) < 1e-12);

    params.initial_factors = NULL;
    g_autoptr(th_backend) good = open_plugin(TH_FIXTURE_PLUGIN_DIR "/fixture_good.so");
    assert_false(th_backend_has_init_factors(good));
    g_autoptr(th_cpd_result) drawn_by_host = run(good, t, &params);
    assert_int_equal(drawn_by_host->initial_factors, TH_INIT_HOST);
    assert_same_fits(drawn_by_backend, drawn_by_host, 1e-10);
    assert_string_equal(th_init_source_name(TH_INIT_BACKEND), "backend");
    assert_string_equal(th_init_source_name(TH_INIT_HOST), "host");
    assert_string_equal(th_init_source_name(TH_INIT_GIVEN), "given");
}

/* The backend refuses what the contract says it must. */
static void test_init_factors_refuses_bad_calls(void **state)
{
    (void)state;
    g_autoptr(th_backend) backend = open_plugin(CPU_REFERENCE);
    double gram[4] = {0}, *grams[3] = {gram, gram, gram};
    char err[TH_ERROR_SIZE] = "";
    th_init_factors_io io = {.struct_size = sizeof io, .nmodes = 3, .seed = 1, .grams = grams};
    assert_int_equal(th_call_init_factors(backend->plugin, backend->instance, &io, err),
                     TH_ERR_BAD_STATE);
    const th_index dims[] = {2, 3, 2};
    g_autoptr(th_sptensor) t = th_test_planted_dense(dims, 3, 1, 1);
    g_autoptr(GError) error = NULL;
    assert_true(th_backend_load_tensor(backend, t, 2, &error));
    io.struct_size = (uint32_t)TH_INIT_FACTORS_IO_V1_3_SIZE - 1;
    assert_int_equal(th_call_init_factors(backend->plugin, backend->instance, &io, err),
                     TH_ERR_INVALID_ARGUMENT);
    io.struct_size = sizeof io;
    io.nmodes = 2;
    assert_int_equal(th_call_init_factors(backend->plugin, backend->instance, &io, err),
                     TH_ERR_INVALID_ARGUMENT);
    io.nmodes = 3;
    assert_int_equal(th_call_init_factors(backend->plugin, backend->instance, &io, err), TH_OK);
    /* A backend without it: the wrapper says so. */
    g_autoptr(th_backend) good = open_plugin(TH_FIXTURE_PLUGIN_DIR "/fixture_good.so");
    assert_true(th_backend_load_tensor(good, t, 2, &error));
    assert_false(th_backend_init_factors(good, 1, grams, &error));
    assert_true(g_error_matches(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_UNSUPPORTED));
}

int main(void)
{
    th_log_set_level(TH_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generator_known_answers),
        cmocka_unit_test(test_values_lie_in_the_unit_interval),
        cmocka_unit_test(test_smaller_rank_is_a_prefix),
        cmocka_unit_test(test_seed_determines_the_factors),
        cmocka_unit_test(test_host_draw_ignores_the_thread_count),
        cmocka_unit_test(test_host_and_backend_draw_identical_factors),
        cmocka_unit_test(test_run_through_init_factors_matches_explicit_factors),
        cmocka_unit_test(test_init_factors_refuses_bad_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
