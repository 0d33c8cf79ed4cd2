/* A CP model's values at chosen entries (cp_predict.h): the definition
 * sum_r lambda_r prod_m A_m(i_m, r) at every cell of small models, exact
 * where the arithmetic is, and the same bits on any number of threads. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <glib.h>
#include <omp.h>
#include <string.h>

#include "cpd/cp_predict.h"

typedef struct model {
    uint32_t nmodes, rank;
    th_index *dims;
    double *lambda;
    double **factors;
} model;

/* Factor entries uniform in [-1, 1), lambda in [0.5, 2.5), from `seed`. */
static model model_random(uint32_t nmodes, const th_index *dims, uint32_t rank, guint32 seed)
{
    g_autoptr(GRand) rng = g_rand_new_with_seed(seed);
    model k = {.nmodes = nmodes, .rank = rank, .dims = g_memdup2(dims, sizeof(th_index) * nmodes),
               .lambda = g_new(double, rank), .factors = g_new(double *, nmodes)};
    for (uint32_t r = 0; r < rank; ++r)
        k.lambda[r] = g_rand_double_range(rng, 0.5, 2.5);
    for (uint32_t m = 0; m < nmodes; ++m) {
        k.factors[m] = g_new(double, (size_t)dims[m] * rank);
        for (size_t i = 0; i < (size_t)dims[m] * rank; ++i)
            k.factors[m][i] = g_rand_double_range(rng, -1.0, 1.0);
    }
    return k;
}

static void model_clear(model *k)
{
    for (uint32_t m = 0; m < k->nmodes; ++m)
        g_free(k->factors[m]);
    g_free(k->factors);
    g_free(k->lambda);
    g_free(k->dims);
}

/* Coordinates laid out as a th_sptensor's: indices[m][k]. */
typedef struct entries {
    uint32_t nmodes;
    uint64_t count;
    th_index **indices;
} entries;

static entries entries_new(uint32_t nmodes, uint64_t count)
{
    entries e = {.nmodes = nmodes, .count = count, .indices = g_new(th_index *, nmodes)};
    for (uint32_t m = 0; m < nmodes; ++m)
        e.indices[m] = g_new(th_index, MAX(count, 1u));
    return e;
}

static void entries_clear(entries *e)
{
    for (uint32_t m = 0; m < e->nmodes; ++m)
        g_free(e->indices[m]);
    g_free(e->indices);
}

/* Every cell of the model's box, mode 0 slowest. */
static entries every_cell(const model *k)
{
    uint64_t cells = 1;
    for (uint32_t m = 0; m < k->nmodes; ++m)
        cells *= k->dims[m];
    entries e = entries_new(k->nmodes, cells);
    for (uint64_t cell = 0; cell < cells; ++cell) {
        uint64_t rest = cell;
        for (uint32_t m = k->nmodes; m-- > 0;) {
            e.indices[m][cell] = (th_index)(rest % k->dims[m]);
            rest /= k->dims[m];
        }
    }
    return e;
}

static entries random_entries(const model *k, uint64_t count, guint32 seed)
{
    g_autoptr(GRand) rng = g_rand_new_with_seed(seed);
    entries e = entries_new(k->nmodes, count);
    for (uint64_t i = 0; i < count; ++i)
        for (uint32_t m = 0; m < k->nmodes; ++m)
            e.indices[m][i] = (th_index)g_rand_int_range(rng, 0, (gint32)k->dims[m]);
    return e;
}

static double *predict(const model *k, const entries *e)
{
    double *out = g_new(double, MAX(e->count, 1u));
    th_cp_predict(k->lambda, (const double *const *)k->factors, k->nmodes, k->rank, e->indices,
                  e->count, out);
    return out;
}

/* The definition, component by component (another order of the same
 * products than th_cp_predict's). */
static double model_value(const model *k, const entries *e, uint64_t i)
{
    double sum = 0.0;
    for (uint32_t r = 0; r < k->rank; ++r) {
        double p = k->lambda[r];
        for (uint32_t m = 0; m < k->nmodes; ++m)
            p *= k->factors[m][(size_t)e->indices[m][i] * k->rank + r];
        sum += p;
    }
    return sum;
}

static void test_every_cell_is_the_definition(void **state)
{
    (void)state;
    const th_index dims3[] = {4, 3, 5}, dims4[] = {2, 3, 2, 4};
    const struct {
        uint32_t nmodes;
        const th_index *dims;
        uint32_t rank;
    } cases[] = {{3, dims3, 1}, {3, dims3, 5}, {4, dims4, 3}, {2, dims3, 8}};
    for (size_t c = 0; c < G_N_ELEMENTS(cases); ++c) {
        model k = model_random(cases[c].nmodes, cases[c].dims, cases[c].rank, 11u + (guint32)c);
        entries e = every_cell(&k);
        g_autofree double *got = predict(&k, &e);
        for (uint64_t i = 0; i < e.count; ++i) {
            const double expected = model_value(&k, &e, i);
            if (fabs(got[i] - expected) > 1e-14 * (1.0 + fabs(expected)))
                fail_msg("case %zu, cell %" G_GUINT64_FORMAT ": %.17g, expected %.17g", c, i,
                         got[i], expected);
        }
        entries_clear(&e);
        model_clear(&k);
    }
}

/* Small integers multiply and add exactly: the values are known. */
static void test_exact_values(void **state)
{
    (void)state;
    th_index dims[] = {2, 3};
    double lambda[] = {2.0, 3.0};
    double a[] = {1, 2, /* row 0 */ 4, -1};
    double b[] = {1, 0, /* row 0 */ 5, 1, /* row 1 */ -2, 7};
    double *factors[] = {a, b};
    model k = {.nmodes = 2, .rank = 2, .dims = dims, .lambda = lambda,
               .factors = factors};
    th_index i0[] = {0, 1, 1, 0}, i1[] = {0, 1, 2, 2};
    th_index *indices[] = {i0, i1};
    const entries e = {.nmodes = 2, .count = 4, .indices = indices};
    g_autofree double *got = predict(&k, &e);
    /* m(i, j) = 2 a(i,0) b(j,0) + 3 a(i,1) b(j,1) */
    const double expected[] = {2.0 * 1 * 1 + 3.0 * 2 * 0, 2.0 * 4 * 5 + 3.0 * -1 * 1,
                               2.0 * 4 * -2 + 3.0 * -1 * 7, 2.0 * 1 * -2 + 3.0 * 2 * 7};
    for (size_t i = 0; i < G_N_ELEMENTS(expected); ++i)
        assert_true(got[i] == expected[i]);
}

/* No entries: nothing written, nothing read. */
static void test_no_entries(void **state)
{
    (void)state;
    const th_index dims[] = {3, 3};
    model k = model_random(2, dims, 2, 5);
    entries e = entries_new(2, 0);
    double out = 42.0;
    th_cp_predict(k.lambda, (const double *const *)k.factors, 2, 2, e.indices, 0, &out);
    assert_true(out == 42.0);
    entries_clear(&e);
    model_clear(&k);
}

/* Enough entries for a team of threads: the same bits on 1, 2, 3 and 4. */
static void test_thread_count_does_not_change_the_values(void **state)
{
    (void)state;
    const th_index dims[] = {300, 50, 1000, 7};
    model k = model_random(4, dims, 13, 99);
    entries e = random_entries(&k, 200003, 7);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    g_autofree double *one = predict(&k, &e);
    for (int t = 2; t <= 4; ++t) {
        omp_set_num_threads(t);
        g_autofree double *many = predict(&k, &e);
        assert_memory_equal(one, many, sizeof(double) * e.count);
    }
    omp_set_num_threads(threads);
    for (uint64_t i = 0; i < e.count; i += 9973) {
        const double expected = model_value(&k, &e, i);
        assert_true(fabs(one[i] - expected) <= 1e-13 * (1.0 + fabs(expected)));
    }
    entries_clear(&e);
    model_clear(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_cell_is_the_definition),
        cmocka_unit_test(test_exact_values),
        cmocka_unit_test(test_no_entries),
        cmocka_unit_test(test_thread_count_does_not_change_the_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
