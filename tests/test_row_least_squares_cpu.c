/* cpu-reference's row_least_squares (ABI 1.5) against a naive oracle
 * written here from plugin.h's words (each row's normal equations from the
 * COO nonzeros, its own Cholesky with the breakdown test, the coordinate
 * descent as stated), on 2-, 3- and 4-mode tensors, ridge 0 and > 0,
 * nonneg 0 and 1, and row by row to 1e-12 on rows of nonzeros around the
 * plugin's panel of row products (one less, exactly, one more than one,
 * two and three panels); then what must hold whatever the algorithm: no
 * row's objective increases, the result is the same bits on 1, 2 and 4
 * threads and with G from vectors of eight (AVX-512) or of four, a
 * nonnegative solution after many passes meets the KKT conditions,
 * singular and empty rows are left (or zeroed) and counted, nothing but
 * mode's factor changes, a stop leaves whole rows; and every argument
 * error. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plugin/backend.h"
#include "base/log.h"
#include "test_support.h"

#define TOLERANCE 1e-9

typedef th_test_cpu_fixture fixture;

static int setup(void **state) { return th_test_cpu_fixture_setup(state, 20261129u); }

/* ------------------------------------------------------------------------ */
/* The oracle                                                                */
/* ------------------------------------------------------------------------ */

/* h = prod_{m != mode} A_m(i_m, :) of nonzero k. */
static void row_product(const th_sptensor *t, double *const *factors, uint32_t rank,
                        uint32_t mode, uint64_t k, double *h)
{
    for (uint32_t r = 0; r < rank; r++) {
        h[r] = 1.0;
        for (uint32_t m = 0; m < t->nmodes; m++)
            if (m != mode)
                h[r] *= factors[m][(size_t)t->indices[m][k] * rank + r];
    }
}

/* V = sum h h^T + ridge I and b = sum x h over the nonzeros of `row`, the
 * whole matrix summed (no triangle); returns how many nonzeros. */
static uint64_t normal_equations(const th_sptensor *t, double *const *factors, uint32_t rank,
                                 uint32_t mode, uint32_t row, double ridge, double *v, double *b)
{
    g_autofree double *h = g_new(double, rank);
    memset(v, 0, (size_t)rank * rank * sizeof *v);
    memset(b, 0, rank * sizeof *b);
    uint64_t count = 0;
    for (uint64_t k = 0; k < t->nnz; k++) {
        if (t->indices[mode][k] != row)
            continue;
        count++;
        row_product(t, factors, rank, mode, k, h);
        for (uint32_t r = 0; r < rank; r++) {
            b[r] += t->values[k] * h[r];
            for (uint32_t s = 0; s < rank; s++)
                v[r * rank + s] += h[r] * h[s];
        }
    }
    for (uint32_t r = 0; r < rank; r++)
        v[r * rank + r] += ridge;
    return count;
}

/* x = V^-1 b by Cholesky, V = L L^T; FALSE at plugin.h's breakdown (a pivot
 * not above max_i V(i,i) * R * DBL_EPSILON * TH_SOLVE_BREAKDOWN_FACTOR). */
static gboolean cholesky_solve(const double *v, const double *b, uint32_t n, double *x)
{
    g_autofree double *l = g_new0(double, (size_t)n * n);
    double largest = 0.0;
    for (uint32_t i = 0; i < n; i++)
        largest = fmax(largest, v[i * n + i]);
    for (uint32_t j = 0; j < n; j++) {
        for (uint32_t i = j; i < n; i++) {
            double sum = v[i * n + j];
            for (uint32_t k = 0; k < j; k++)
                sum -= l[i * n + k] * l[j * n + k];
            if (i == j) {
                if (!(sum > largest * n * DBL_EPSILON * TH_SOLVE_BREAKDOWN_FACTOR))
                    return FALSE;
                l[j * n + j] = sqrt(sum);
            } else {
                l[i * n + j] = sum / l[j * n + j];
            }
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        x[i] = b[i];
        for (uint32_t k = 0; k < i; k++)
            x[i] -= l[i * n + k] * x[k];
        x[i] /= l[i * n + i];
    }
    for (uint32_t i = n; i-- > 0;) {
        for (uint32_t k = i + 1; k < n; k++)
            x[i] -= l[k * n + i] * x[k];
        x[i] /= l[i * n + i];
    }
    return TRUE;
}

/* plugin.h's coordinate descent, word for word. */
static void coordinate_descent(const double *v, const double *b, uint32_t n, uint32_t passes,
                               double *a)
{
    for (uint32_t pass = 0; pass < passes; pass++)
        for (uint32_t r = 0; r < n; r++) {
            const double d = v[r * n + r];
            if (d == 0.0) {
                a[r] = 0.0;
                continue;
            }
            double va = 0.0;
            for (uint32_t s = 0; s < n; s++)
                va += v[r * n + s] * a[s];
            a[r] = fmax(0.0, a[r] + (b[r] - va) / d);
        }
}

typedef struct rls_params {
    double ridge;
    uint32_t nonneg, passes;
} rls_params;

typedef struct rls_counts {
    uint64_t singular, empty;
} rls_counts;

/* Mode's factor after row_least_squares, from `factors` (mode's factor is
 * the starting point), into `out`. */
static rls_counts oracle(const th_sptensor *t, double *const *factors, uint32_t rank,
                         uint32_t mode, const rls_params *p, double *out)
{
    rls_counts counts = {0, 0};
    g_autofree double *v = g_new(double, (size_t)rank * rank);
    g_autofree double *b = g_new(double, rank);
    g_autofree double *x = g_new(double, rank);
    memcpy(out, factors[mode], (size_t)t->dims[mode] * rank * sizeof *out);
    for (uint32_t row = 0; row < t->dims[mode]; row++) {
        double *a = out + (size_t)row * rank;
        const uint64_t entries = normal_equations(t, factors, rank, mode, row, p->ridge, v, b);
        if (entries == 0) {
            counts.empty++;
            if (p->ridge > 0.0)
                memset(a, 0, rank * sizeof *a);
        } else if (p->nonneg) {
            coordinate_descent(v, b, rank, p->passes, a);
        } else if ((p->ridge > 0.0 || entries >= rank) && cholesky_solve(v, b, rank, x)) {
            memcpy(a, x, rank * sizeof *a);
        } else {
            counts.singular++;
        }
    }
    return counts;
}

/* sum_i (x_i - <a, h_i>)^2 + ridge ||a||^2 of `row` of mode, `a` its row. */
static double row_objective(const th_sptensor *t, double *const *factors, uint32_t rank,
                            uint32_t mode, uint32_t row, double ridge, const double *a)
{
    g_autofree double *h = g_new(double, rank);
    double sum = 0.0;
    for (uint64_t k = 0; k < t->nnz; k++) {
        if (t->indices[mode][k] != row)
            continue;
        row_product(t, factors, rank, mode, k, h);
        double model = 0.0;
        for (uint32_t r = 0; r < rank; r++)
            model += a[r] * h[r];
        sum += (t->values[k] - model) * (t->values[k] - model);
    }
    for (uint32_t r = 0; r < rank; r++)
        sum += ridge * a[r] * a[r];
    return sum;
}

/* sum over every nonzero of (x_i - <a_{i_mode}, h_i>)^2, mode's rows from
 * `own`, the other factors from `factors`. */
static double direct_residual_squared(const th_sptensor *t, double *const *factors,
                                      uint32_t rank, uint32_t mode, const double *own)
{
    g_autofree double *h = g_new(double, rank);
    double sum = 0.0;
    for (uint64_t k = 0; k < t->nnz; k++) {
        row_product(t, factors, rank, mode, k, h);
        const double *a = own + (size_t)t->indices[mode][k] * rank;
        double model = 0.0;
        for (uint32_t r = 0; r < rank; r++)
            model += a[r] * h[r];
        sum += (t->values[k] - model) * (t->values[k] - model);
    }
    return sum;
}

/* ------------------------------------------------------------------------ */
/* Calling the plugin                                                        */
/* ------------------------------------------------------------------------ */

static th_status call_rls(const th_plugin *plugin, th_instance *inst, uint32_t mode,
                          const rls_params *p, th_row_least_squares_io *out, char *err)
{
    th_row_least_squares_io io = {.struct_size = sizeof io, .mode = mode, .ridge = p->ridge,
                                  .nonneg = p->nonneg, .passes = p->passes};
    th_status status = plugin->entry.row_least_squares(inst, &io, err);
    if (out)
        *out = io;
    return status;
}

static double sum_of_squares(const double *a, size_t count)
{
    double sum = 0.0;
    for (size_t k = 0; k < count; k++)
        sum += a[k] * a[k];
    return sum;
}

static void assert_close(double got, double want, double scale, const char *what)
{
    if (got != want && !(fabs(got - want) <= TOLERANCE * fmax(1.0, scale)))
        fail_msg("%s: %.17g, expected %.17g", what, got, want);
}

/* Nonnegative factors, for the constrained cases (coordinate descent from a
 * feasible row never increases the objective). */
static double **nonnegative_factors(const th_sptensor *t, uint32_t rank, GRand *rng)
{
    double **factors = th_test_random_factors(t, rank, rng);
    for (uint32_t m = 0; m < t->nmodes; m++)
        for (size_t k = 0; k < (size_t)t->dims[m] * rank; k++)
            factors[m][k] = fabs(factors[m][k]);
    return factors;
}

/* Every mode of `t` from the same factors, each against the oracle: the
 * factor, both counts, factor_norm_squared (of the factor returned) and
 * residual_squared (the squared residuals with the factor returned). */
static void check_against_oracle(const fixture *f, const th_sptensor *t, uint32_t rank,
                                 const rls_params *p, const char *label)
{
    const th_plugin *plugin = f->plugin;
    double **factors = p->nonneg ? nonnegative_factors(t, rank, f->rng)
                                 : th_test_random_factors(t, rank, f->rng);
    char err[TH_ERROR_SIZE] = "";
    for (uint32_t mode = 0; mode < t->nmodes; mode++) {
        const size_t cells = (size_t)t->dims[mode] * rank;
        g_autofree double *want = g_new(double, cells);
        g_autofree double *got = g_new(double, cells);
        const rls_counts counts = oracle(t, factors, rank, mode, p, want);
        th_instance *inst = th_test_create_instance(plugin, "threads", "3", NULL);
        th_test_load_and_set(plugin, inst, t, rank, factors);
        th_row_least_squares_io io;
        th_test_assert_ok(call_rls(plugin, inst, mode, p, &io, err), err);
        th_test_assert_ok(plugin->entry.get_factor(inst, mode, got, err), err);
        const double e = th_test_relative_error(got, want, cells);
        if (!(e <= TOLERANCE))
            fail_msg("%s, mode %u: relative error %.3g", label, mode, e);
        assert_int_equal(io.singular_rows, counts.singular);
        assert_int_equal(io.empty_rows, counts.empty);
        const double norm = sum_of_squares(got, cells);
        assert_close(io.factor_norm_squared, norm, norm, "factor_norm_squared");
        /* The training error with the factor returned (singular rows as
         * they were, empty rows adding nothing). */
        const double residual = direct_residual_squared(t, factors, rank, mode, got);
        assert_close(io.residual_squared, residual, residual, "residual_squared");
        plugin->entry.destroy(inst);
    }
    th_test_free_factors(factors, t->nmodes);
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

static const rls_params every_kind[] = {
    {.ridge = 0.0, .nonneg = 0, .passes = 0},  {.ridge = 0.05, .nonneg = 0, .passes = 0},
    {.ridge = 0.0, .nonneg = 1, .passes = 1},  {.ridge = 0.3, .nonneg = 1, .passes = 4},
};

/* 2, 3 and 4 modes at ranks 1 to 9 (the longer modes have empty rows and
 * rows with fewer nonzeros than the rank: singular at ridge 0). */
static void test_matches_the_oracle(void **state)
{
    fixture *f = *state;
    const uint32_t dims2[2] = {30, 25}, dims3[3] = {12, 40, 9}, dims4[4] = {8, 7, 30, 6};
    g_autoptr(th_sptensor) t2 = th_test_random_tensor(2, dims2, 300, f->rng);
    g_autoptr(th_sptensor) t3 = th_test_random_tensor(3, dims3, 500, f->rng);
    g_autoptr(th_sptensor) t4 = th_test_random_tensor(4, dims4, 700, f->rng);
    const th_sptensor *tensors[] = {t2, t3, t4};
    const uint32_t ranks[] = {1, 4, 9};
    for (size_t ti = 0; ti < G_N_ELEMENTS(tensors); ti++)
        for (size_t ri = 0; ri < G_N_ELEMENTS(ranks); ri++)
            for (size_t pi = 0; pi < G_N_ELEMENTS(every_kind); pi++) {
                g_autofree char *label = g_strdup_printf(
                    "%u modes rank %u ridge %g nonneg %u", tensors[ti]->nmodes, ranks[ri],
                    every_kind[pi].ridge, every_kind[pi].nonneg);
                check_against_oracle(f, tensors[ti], ranks[ri], &every_kind[pi], label);
            }
}

/* Each row's objective is at most what it was: the unconstrained solve is
 * its minimiser (or the row is left), and coordinate descent from a
 * nonnegative row minimises one coordinate at a time. */
static void test_no_row_objective_increases(void **state)
{
    fixture *f = *state;
    const th_plugin *plugin = f->plugin;
    const uint32_t dims[3] = {20, 15, 10}, rank = 5;
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 600, f->rng);
    char err[TH_ERROR_SIZE] = "";
    for (size_t pi = 0; pi < G_N_ELEMENTS(every_kind); pi++) {
        const rls_params *p = &every_kind[pi];
        double **factors = nonnegative_factors(t, rank, f->rng);
        th_instance *inst = th_test_create_instance(plugin, "threads", "2", NULL);
        th_test_load_and_set(plugin, inst, t, rank, factors);
        for (uint32_t mode = 0; mode < 3; mode++) {
            g_autofree double *after = g_new(double, (size_t)dims[mode] * rank);
            th_test_assert_ok(call_rls(plugin, inst, mode, p, NULL, err), err);
            th_test_assert_ok(plugin->entry.get_factor(inst, mode, after, err), err);
            for (uint32_t row = 0; row < dims[mode]; row++) {
                const double before = row_objective(t, factors, rank, mode, row, p->ridge,
                                                    factors[mode] + (size_t)row * rank);
                const double now = row_objective(t, factors, rank, mode, row, p->ridge,
                                                 after + (size_t)row * rank);
                if (!(now <= before * (1.0 + 1e-12) + 1e-15))
                    fail_msg("ridge %g nonneg %u mode %u row %u: objective %.17g, was %.17g",
                             p->ridge, p->nonneg, mode, row, now, before);
            }
            /* The next mode's products see this mode as the plugin left it. */
            memcpy(factors[mode], after, (size_t)dims[mode] * rank * sizeof *after);
        }
        plugin->entry.destroy(inst);
        th_test_free_factors(factors, 3);
    }
}

/* The same bits (factors, counts, factor_norm_squared, residual_squared) on 1, 2 and 4
 * threads, on a tensor large enough that the plugin runs its rows and its
 * norm on the team (and with empty and singular rows), at rank 16 and at
 * rank 37 (rows of several panels, a rank not a multiple of the vectors). */
static void test_thread_count_does_not_change_results(void **state)
{
    fixture *f = *state;
    const th_plugin *plugin = f->plugin;
    const uint32_t dims[3] = {20000, 400, 300}, ranks[] = {16, 37};
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 80000, f->rng);
    const char *threads[] = {"1", "2", "4"};
    char err[TH_ERROR_SIZE] = "";
    for (size_t ri = 0; ri < G_N_ELEMENTS(ranks); ri++) {
        const uint32_t rank = ranks[ri];
        double **factors = nonnegative_factors(t, rank, f->rng);
        for (size_t pi = 0; pi < G_N_ELEMENTS(every_kind); pi++) {
            double *results[3][3];
            th_row_least_squares_io io[3][3];
            for (int k = 0; k < 3; k++) {
                th_instance *inst = th_test_create_instance(plugin, "threads", threads[k], NULL);
                th_test_load_and_set(plugin, inst, t, rank, factors);
                for (uint32_t mode = 0; mode < 3; mode++) {
                    results[k][mode] = g_new(double, (size_t)dims[mode] * rank);
                    th_test_assert_ok(call_rls(plugin, inst, mode, &every_kind[pi],
                                               &io[k][mode], err),
                                      err);
                    th_test_assert_ok(
                        plugin->entry.get_factor(inst, mode, results[k][mode], err), err);
                }
                plugin->entry.destroy(inst);
            }
            for (uint32_t mode = 0; mode < 3; mode++) {
                for (int k = 1; k < 3; k++) {
                    assert_memory_equal(results[0][mode], results[k][mode],
                                        (size_t)dims[mode] * rank * sizeof(double));
                    assert_memory_equal(&io[0][mode], &io[k][mode], sizeof io[0][mode]);
                }
                for (int k = 0; k < 3; k++)
                    g_free(results[k][mode]);
            }
            if (every_kind[pi].ridge == 0.0 && !every_kind[pi].nonneg)
                assert_true(io[0][0].singular_rows > 0 && io[0][0].empty_rows > 0);
        }
        th_test_free_factors(factors, 3);
    }
}

/* After many passes the nonnegative row meets the KKT conditions of
 * min a^T V a / 2 - b^T a, a >= 0: a >= 0, the gradient g = V a - b is
 * >= 0 where a_r = 0 and 0 where a_r > 0 (within the row's scale). The
 * data have both signs, so some constraints are active. */
static void test_nonnegative_solution_meets_kkt(void **state)
{
    fixture *f = *state;
    const th_plugin *plugin = f->plugin;
    const uint32_t dims[3] = {15, 12, 10}, rank = 4;
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 900, f->rng);
    double **factors = nonnegative_factors(t, rank, f->rng);
    const rls_params p = {.ridge = 0.01, .nonneg = 1, .passes = 500};
    th_instance *inst = th_test_create_instance(plugin, NULL);
    th_test_load_and_set(plugin, inst, t, rank, factors);
    char err[TH_ERROR_SIZE] = "";
    const uint32_t mode = 1;
    double a[12 * 4], v[4 * 4], b[4];
    th_test_assert_ok(call_rls(plugin, inst, mode, &p, NULL, err), err);
    th_test_assert_ok(plugin->entry.get_factor(inst, mode, a, err), err);
    unsigned active = 0;
    for (uint32_t row = 0; row < dims[mode]; row++) {
        normal_equations(t, factors, rank, mode, row, p.ridge, v, b);
        const double *x = a + row * rank;
        double scale = 0.0;
        for (uint32_t r = 0; r < rank; r++)
            scale = fmax(scale, fabs(b[r]));
        for (uint32_t r = 0; r < rank; r++) {
            double gradient = -b[r];
            for (uint32_t s = 0; s < rank; s++)
                gradient += v[r * rank + s] * x[s];
            assert_true(x[r] >= 0.0);
            if (x[r] == 0.0) {
                active++;
                if (!(gradient >= -1e-8 * scale))
                    fail_msg("row %u column %u: a_r = 0 with gradient %g", row, r, gradient);
            } else if (!(fabs(gradient) <= 1e-8 * scale)) {
                fail_msg("row %u column %u: a_r = %g with gradient %g", row, r, x[r], gradient);
            }
        }
    }
    assert_true(active > 0);
    plugin->entry.destroy(inst);
    th_test_free_factors(factors, 3);
}

/* A 4 x 3 x 3 tensor at rank 3 whose mode 0 has row 1 with one nonzero
 * (singular at ridge 0: left as it was, counted) and row 2 with none (left
 * at ridge 0, zero at ridge > 0, counted either way), for both nonneg
 * values; rows 0 and 3 have every cell. */
static void test_singular_and_empty_rows(void **state)
{
    fixture *f = *state;
    const th_plugin *plugin = f->plugin;
    const uint32_t rank = 3;
    g_autoptr(th_sptensor) t = th_sptensor_new(3, 19);
    const uint32_t dims[3] = {4, 3, 3};
    memcpy(t->dims, dims, sizeof dims);
    uint64_t k = 0;
    for (uint32_t row = 0; row < 4; row += 3)
        for (uint32_t j = 0; j < 3; j++)
            for (uint32_t l = 0; l < 3; l++, k++) {
                t->indices[0][k] = row;
                t->indices[1][k] = j;
                t->indices[2][k] = l;
                t->values[k] = 1.0 + 0.25 * (double)((row + 2 * j + 3 * l) % 5);
            }
    t->indices[0][k] = 1;
    t->indices[1][k] = 2;
    t->indices[2][k] = 0;
    t->values[k] = 2.0;
    double **factors = nonnegative_factors(t, rank, f->rng);
    char err[TH_ERROR_SIZE] = "";
    for (size_t pi = 0; pi < G_N_ELEMENTS(every_kind); pi++) {
        const rls_params *p = &every_kind[pi];
        th_instance *inst = th_test_create_instance(plugin, NULL);
        th_test_load_and_set(plugin, inst, t, rank, factors);
        th_row_least_squares_io io;
        double a[4 * 3], want[4 * 3];
        th_test_assert_ok(call_rls(plugin, inst, 0, p, &io, err), err);
        th_test_assert_ok(plugin->entry.get_factor(inst, 0, a, err), err);
        oracle(t, factors, rank, 0, p, want);
        assert_true(th_test_relative_error(a, want, 12) <= TOLERANCE);
        assert_int_equal(io.empty_rows, 1);
        assert_int_equal(io.singular_rows, p->ridge == 0.0 && !p->nonneg ? 1 : 0);
        if (p->ridge == 0.0 && !p->nonneg)
            assert_memory_equal(a + 3, factors[0] + 3, 3 * sizeof(double));
        if (p->ridge == 0.0)
            assert_memory_equal(a + 6, factors[0] + 6, 3 * sizeof(double));
        else
            assert_true(a[6] == 0.0 && a[7] == 0.0 && a[8] == 0.0);
        plugin->entry.destroy(inst);
    }
    th_test_free_factors(factors, 3);
}

/* Only mode's factor changes: every other factor and every MTTKRP result
 * stay as they were, bit for bit; a newer host's longer io has its tail
 * left alone and struct_size unwritten. */
static void test_nothing_else_changes(void **state)
{
    fixture *f = *state;
    const th_plugin *plugin = f->plugin;
    const uint32_t dims[3] = {9, 8, 7}, rank = 3;
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 200, f->rng);
    double **factors = th_test_random_factors(t, rank, f->rng);
    th_instance *inst = th_test_create_instance(plugin, NULL);
    th_test_load_and_set(plugin, inst, t, rank, factors);
    char err[TH_ERROR_SIZE] = "";
    double **results = th_test_mttkrp_every_mode(plugin, inst, t, rank);
    struct {
        th_row_least_squares_io io;
        double tail[2];
    } longer = {.io = {.struct_size = sizeof longer, .mode = 1, .ridge = 0.1},
                .tail = {-1.0, -1.0}};
    th_test_assert_ok(plugin->entry.row_least_squares(inst, &longer.io, err), err);
    assert_int_equal(longer.io.struct_size, sizeof longer);
    assert_true(longer.tail[0] == -1.0 && longer.tail[1] == -1.0);
    th_test_assert_only_factor_changed(plugin, inst, t, rank, results, factors, 1);
    plugin->entry.destroy(inst);
    th_test_free_factors(results, 3);
    th_test_free_factors(factors, 3);
}

/* A stop requested before the call: the plugin solves its first block of
 * rows (about half a second of one core's work: 20000 passes of coordinate
 * descent a row here), then gives up with TH_ERR_CANCELLED naming how many
 * rows it solved; those rows are solved, every later one is as it was. */
static void test_stop_between_blocks(void **state)
{
    fixture *f = *state;
    const th_plugin *plugin = f->plugin;
    const uint32_t dims[3] = {1600, 30, 20}, rank = 8;
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 6000, f->rng);
    double **factors = nonnegative_factors(t, rank, f->rng);
    th_instance *inst = th_test_create_cancelled_instance(plugin, "threads", "4", NULL);
    char err[TH_ERROR_SIZE] = "";
    th_test_load_and_set(plugin, inst, t, rank, factors);
    const rls_params p = {.ridge = 0.1, .nonneg = 1, .passes = 20000};
    th_row_least_squares_io io;
    assert_int_equal(call_rls(plugin, inst, 0, &p, &io, err), TH_ERR_CANCELLED);
    unsigned solved = 0, rows = 0;
    assert_int_equal(sscanf(err, "row_least_squares(mode 0) given up after %u of %u rows", &solved,
                            &rows),
                     2);
    assert_int_equal(rows, dims[0]);
    assert_true(solved > 0 && solved < rows);
    g_autofree double *a = g_new(double, (size_t)dims[0] * rank);
    th_test_assert_ok(plugin->entry.get_factor(inst, 0, a, err), err);
    const size_t done = (size_t)solved * rank;
    assert_memory_not_equal(a, factors[0], done * sizeof *a);
    assert_memory_equal(a + done, factors[0] + done, ((size_t)rows * rank - done) * sizeof *a);
    plugin->entry.destroy(inst);
    th_test_free_factors(factors, 3);
}

/* The panel the plugin gathers a row's products into holds 16 KiB of them
 * (cpu_reference.c, CPU_REF_RLS_PANEL_BYTES; the rank rounded up to 8 a
 * row), at least 16: the row counts of test_panel_boundaries sit around it. */
static uint32_t panel_rows(uint32_t rank)
{
    const uint32_t ld = (rank + 7) / 8 * 8, rows = 16384 / (ld * 8);
    return rows > 16 ? rows : 16;
}

/* A tensor whose mode-0 row j has counts[j] nonzeros (and a last row none)
 * at distinct random coordinates of the other modes, values uniform in
 * +-[0.1, 1). */
static th_sptensor *tensor_with_row_counts(uint32_t nmodes, uint32_t other_dim,
                                           const uint32_t *counts, uint32_t rows, GRand *rng)
{
    uint64_t nnz = 0;
    for (uint32_t j = 0; j < rows; j++)
        nnz += counts[j];
    th_sptensor *t = th_sptensor_new(nmodes, nnz);
    t->dims[0] = rows + 1;
    for (uint32_t m = 1; m < nmodes; m++)
        t->dims[m] = other_dim;
    uint64_t k = 0;
    for (uint32_t j = 0; j < rows; j++) {
        g_autoptr(GHashTable) seen = g_hash_table_new(g_int64_hash, g_int64_equal);
        g_autofree gint64 *keys = g_new(gint64, counts[j]);
        for (uint32_t c = 0; c < counts[j]; k++, c++) {
            gint64 key;
            do {
                key = 0;
                for (uint32_t m = 1; m < nmodes; m++) {
                    t->indices[m][k] = (uint32_t)g_rand_int_range(rng, 0, (gint32)other_dim);
                    key = key * other_dim + t->indices[m][k];
                }
            } while (g_hash_table_contains(seen, &key));
            keys[c] = key;
            g_hash_table_add(seen, &keys[c]);
            t->indices[0][k] = j;
            const double magnitude = g_rand_double_range(rng, 0.1, 1.0);
            t->values[k] = g_rand_boolean(rng) ? magnitude : -magnitude;
        }
    }
    return t;
}

/* Sets or clears TH_CPU_REFERENCE_NO_AVX512, which keeps cpu-reference's row
 * solve to its vectors of four on a CPU with AVX-512 (read at each call). */
static void allow_avx512(gboolean allow)
{
    if (allow)
        g_unsetenv("TH_CPU_REFERENCE_NO_AVX512");
    else
        g_setenv("TH_CPU_REFERENCE_NO_AVX512", "1", TRUE);
}

/* Mode 0 of `t` against the oracle, row by row to `tolerance` relative,
 * with the counts, the norm and the residual, on 2 threads, with the
 * AVX-512 kernel of G allowed or not. */
static void check_rows_against_oracle(const fixture *f, const th_sptensor *t, uint32_t rank,
                                      const rls_params *p, gboolean avx512, double tolerance,
                                      const char *label)
{
    const th_plugin *plugin = f->plugin;
    double **factors = p->nonneg ? nonnegative_factors(t, rank, f->rng)
                                 : th_test_random_factors(t, rank, f->rng);
    const uint32_t rows = t->dims[0];
    g_autofree double *want = g_new(double, (size_t)rows * rank);
    g_autofree double *got = g_new(double, (size_t)rows * rank);
    const rls_counts counts = oracle(t, factors, rank, 0, p, want);
    th_instance *inst = th_test_create_instance(plugin, "threads", "2", NULL);
    th_test_load_and_set(plugin, inst, t, rank, factors);
    char err[TH_ERROR_SIZE] = "";
    th_row_least_squares_io io;
    allow_avx512(avx512);
    th_test_assert_ok(call_rls(plugin, inst, 0, p, &io, err), err);
    allow_avx512(TRUE);
    th_test_assert_ok(plugin->entry.get_factor(inst, 0, got, err), err);
    for (uint32_t row = 0; row < rows; row++) {
        const double e = th_test_relative_error(got + (size_t)row * rank,
                                                want + (size_t)row * rank, rank);
        if (!(e <= tolerance))
            fail_msg("%s, row %u: relative error %.3g", label, row, e);
    }
    assert_int_equal(io.singular_rows, counts.singular);
    assert_int_equal(io.empty_rows, counts.empty);
    const double norm = sum_of_squares(got, (size_t)rows * rank);
    assert_close(io.factor_norm_squared, norm, norm, "factor_norm_squared");
    const double residual = direct_residual_squared(t, factors, rank, 0, got);
    assert_close(io.residual_squared, residual, residual, "residual_squared");
    plugin->entry.destroy(inst);
    th_test_free_factors(factors, t->nmodes);
}

/* Rows of 1, R-1, R, R+1 nonzeros and of one less, exactly and one more
 * than one, two and three panels (and a row of none), at ranks whose
 * rows fill 5/8, 3/4, all and 5/8 of a vector of eight, on 2-, 3- and
 * 5-mode tensors (every gather: one other factor, two, and the general
 * loop): each row within 1e-12 of the oracle's own solve, by Cholesky and
 * by coordinate descent, with G by either kernel (ridge 0.05 keeps every
 * row's system well conditioned, so that the bound measures the arithmetic:
 * the largest difference seen is 1.6e-14). */
static void test_panel_boundaries(void **state)
{
    fixture *f = *state;
    const uint32_t ranks[] = {5, 12, 32, 40};
    const uint32_t nmodes[] = {2, 3, 5}, other_dims[] = {2000, 45, 7};
    const rls_params kinds[] = {{.ridge = 0.05, .nonneg = 0, .passes = 0},
                                {.ridge = 0.1, .nonneg = 1, .passes = 3}};
    for (size_t ri = 0; ri < G_N_ELEMENTS(ranks); ri++) {
        const uint32_t rank = ranks[ri], panel = panel_rows(rank);
        const uint32_t counts[] = {1,         2,         rank - 1,      rank,
                                   rank + 1,  panel - 1, panel,         panel + 1,
                                   2 * panel, 2 * panel + 1, 3 * panel - 1};
        for (size_t mi = 0; mi < G_N_ELEMENTS(nmodes); mi++) {
            g_autoptr(th_sptensor) t = tensor_with_row_counts(
                nmodes[mi], other_dims[mi], counts, G_N_ELEMENTS(counts), f->rng);
            for (size_t ki = 0; ki < G_N_ELEMENTS(kinds); ki++)
                for (int avx512 = 0; avx512 < 2; avx512++) {
                    g_autofree char *label = g_strdup_printf(
                        "%u modes rank %u (panel %u) nonneg %u avx512 %d", nmodes[mi], rank,
                        panel, kinds[ki].nonneg, avx512);
                    check_rows_against_oracle(f, t, rank, &kinds[ki], avx512, 1e-12, label);
                }
        }
    }
}

/* Mode `mode`'s factor and io after row_least_squares from `factors`, on
 * `threads` threads, with the AVX-512 kernel of G allowed or not. */
static void run_rls(const th_plugin *plugin, const th_sptensor *t, double *const *factors,
                    uint32_t rank, uint32_t mode, const rls_params *p, const char *threads,
                    gboolean avx512, double *out, th_row_least_squares_io *io)
{
    allow_avx512(avx512);
    th_instance *inst = th_test_create_instance(plugin, "threads", threads, NULL);
    th_test_load_and_set(plugin, inst, t, rank, factors);
    char err[TH_ERROR_SIZE] = "";
    th_test_assert_ok(call_rls(plugin, inst, mode, p, io, err), err);
    th_test_assert_ok(plugin->entry.get_factor(inst, mode, out, err), err);
    plugin->entry.destroy(inst);
    allow_avx512(TRUE);
}

/* G by vectors of eight (AVX-512) and by vectors of four: the same sums in
 * the same order, so the same bits, factor and io, at ranks around the
 * vector widths, for every kind of solve. (On a CPU without AVX-512 both
 * runs take the vectors of four.) */
static void test_avx512_kernel_same_bits(void **state)
{
    fixture *f = *state;
    const uint32_t dims[3] = {40, 30, 3000}, ranks[] = {1, 7, 8, 9, 16, 20, 33};
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 9000, f->rng);
    for (size_t ri = 0; ri < G_N_ELEMENTS(ranks); ri++) {
        const uint32_t rank = ranks[ri];
        double **factors = nonnegative_factors(t, rank, f->rng);
        for (size_t pi = 0; pi < G_N_ELEMENTS(every_kind); pi++)
            for (uint32_t mode = 0; mode < 3; mode++) {
                const size_t cells = (size_t)dims[mode] * rank;
                g_autofree double *wide = g_new(double, cells);
                g_autofree double *narrow = g_new(double, cells);
                th_row_least_squares_io io_wide, io_narrow;
                run_rls(f->plugin, t, factors, rank, mode, &every_kind[pi], "2", TRUE, wide,
                        &io_wide);
                run_rls(f->plugin, t, factors, rank, mode, &every_kind[pi], "2", FALSE, narrow,
                        &io_narrow);
                assert_memory_equal(wide, narrow, cells * sizeof *wide);
                assert_memory_equal(&io_wide, &io_narrow, sizeof io_wide);
            }
        th_test_free_factors(factors, 3);
    }
}

static void expect_error(const th_plugin *plugin, th_instance *inst,
                         const th_row_least_squares_io *in, th_status status, const char *message)
{
    th_row_least_squares_io io = *in;
    char err[TH_ERROR_SIZE] = "";
    assert_int_equal(plugin->entry.row_least_squares(inst, &io, err), status);
    assert_string_equal(err, message);
}

static void test_errors(void **state)
{
    fixture *f = *state;
    const th_plugin *plugin = f->plugin;
    const th_row_least_squares_io ok = {.struct_size = sizeof ok, .mode = 0, .ridge = 0.1,
                                        .nonneg = 1, .passes = 2};
    th_instance *inst = th_test_create_instance(plugin, NULL);
    expect_error(plugin, inst, &ok, TH_ERR_BAD_STATE,
                 "row_least_squares: no tensor loaded (call load_tensor first)");

    const uint32_t dims[3] = {3, 2, 4};
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 5, f->rng);
    double **factors = th_test_random_factors(t, 2, f->rng);
    th_test_load_and_set(plugin, inst, t, 2, factors);
    char err[TH_ERROR_SIZE] = "";
    assert_int_equal(plugin->entry.row_least_squares(inst, NULL, err), TH_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "row_least_squares: io is NULL");

    th_row_least_squares_io io = ok;
    io.struct_size = TH_ROW_LEAST_SQUARES_IO_V1_5_SIZE - 1;
    expect_error(plugin, inst, &io, TH_ERR_INVALID_ARGUMENT,
                 "row_least_squares: io.struct_size 55 is shorter than the 56 bytes of "
                 "th_row_least_squares_io in ABI 1.5");
    io = ok;
    io.mode = 3;
    expect_error(plugin, inst, &io, TH_ERR_INVALID_ARGUMENT,
                 "row_least_squares: io.mode 3 is out of range; the tensor has 3 modes (0..2)");
    io = ok;
    io.ridge = -1e-3;
    expect_error(plugin, inst, &io, TH_ERR_INVALID_ARGUMENT,
                 "row_least_squares: io.ridge -0.001 must be finite and >= 0");
    io.ridge = NAN;
    expect_error(plugin, inst, &io, TH_ERR_INVALID_ARGUMENT,
                 "row_least_squares: io.ridge nan must be finite and >= 0");
    io.ridge = INFINITY;
    expect_error(plugin, inst, &io, TH_ERR_INVALID_ARGUMENT,
                 "row_least_squares: io.ridge inf must be finite and >= 0");
    io = ok;
    io.nonneg = 2;
    expect_error(plugin, inst, &io, TH_ERR_INVALID_ARGUMENT,
                 "row_least_squares: io.nonneg 2 must be 0 or 1");
    io = ok;
    io.passes = 0;
    expect_error(plugin, inst, &io, TH_ERR_INVALID_ARGUMENT,
                 "row_least_squares: io.passes is 0 with io.nonneg 1; at least one pass of "
                 "coordinate descent is needed");
    /* passes is unused without nonneg; -0.0 is a ridge of zero. */
    io.nonneg = 0;
    io.ridge = -0.0;
    expect_error(plugin, inst, &io, TH_OK, "");

    plugin->entry.destroy(inst);
    th_test_free_factors(factors, 3);
}

int main(void)
{
    th_log_set_level(TH_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_the_oracle),
        cmocka_unit_test(test_no_row_objective_increases),
        cmocka_unit_test(test_thread_count_does_not_change_results),
        cmocka_unit_test(test_panel_boundaries),
        cmocka_unit_test(test_avx512_kernel_same_bits),
        cmocka_unit_test(test_nonnegative_solution_meets_kkt),
        cmocka_unit_test(test_singular_and_empty_rows),
        cmocka_unit_test(test_nothing_else_changes),
        cmocka_unit_test(test_stop_between_blocks),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, th_test_cpu_fixture_teardown);
}
