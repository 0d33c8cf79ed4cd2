/* cpu-reference's ABI 1.4 functions against a naive oracle written here:
 * generalized_mttkrp (every elementwise function and reduction, weights
 * NULL and given, TH_MODE_NONE, VALUE against mttkrp(), the same bits on
 * any thread count) and factor_update (each operation), and every error;
 * and its multiplicative_updates (ABI 1.7) against the loop of those two
 * that it stands for, bit for bit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <string.h>

#include "plugin/backend.h"
#include "base/log.h"
#include "test_support.h"

#define TOLERANCE 1e-12
#define EPSILON 1e-10

typedef th_test_cpu_fixture fixture;

static int setup(void **state) { return th_test_cpu_fixture_setup(state, 20261128u); }

/* Positive factors (a Poisson model's). */
static double **positive_factors(const th_sptensor *t, uint32_t rank, GRand *rng)
{
    double **factors = th_test_random_factors(t, rank, rng);
    for (uint32_t m = 0; m < t->nmodes; m++)
        for (size_t k = 0; k < (size_t)t->dims[m] * rank; k++)
            factors[m][k] = 0.05 + fabs(factors[m][k]);
    return factors;
}

/* Nonnegative counts, with some explicit zeros. */
static void make_counts(th_sptensor *t)
{
    for (uint64_t k = 0; k < t->nnz; k++)
        t->values[k] = k % 5 == 2 ? 0.0 : floor(fabs(t->values[k]) * 6.0) + 1.0;
}

/* The oracle: for each nonzero, m_i = sum_r w_r prod_k A_k(i_k, r) over all
 * modes; G(j, :) += g(x, m) prod_{k != mode} A_k(i_k, :); sum of h. */
static double oracle(const th_sptensor *t, double *const *factors, uint32_t rank, uint32_t mode,
                     int32_t elementwise, int32_t reduction, double epsilon,
                     const double *weights, double *out)
{
    if (mode != TH_MODE_NONE)
        memset(out, 0, (size_t)t->dims[mode] * rank * sizeof *out);
    double reduced = 0.0;
    for (uint64_t k = 0; k < t->nnz; k++) {
        const double x = t->values[k];
        double m = 0.0;
        for (uint32_t r = 0; r < rank; r++) {
            double term = weights ? weights[r] : 1.0;
            for (uint32_t n = 0; n < t->nmodes; n++)
                term *= factors[n][(size_t)t->indices[n][k] * rank + r];
            m += term;
        }
        if (mode != TH_MODE_NONE) {
            double g = x;
            if (elementwise == TH_ELEMENTWISE_POISSON_RATIO)
                g = x / fmax(m, epsilon);
            else if (elementwise == TH_ELEMENTWISE_RESIDUAL)
                g = m - x;
            for (uint32_t r = 0; r < rank; r++) {
                double term = g;
                for (uint32_t n = 0; n < t->nmodes; n++)
                    if (n != mode)
                        term *= factors[n][(size_t)t->indices[n][k] * rank + r];
                out[(size_t)t->indices[mode][k] * rank + r] += term;
            }
        }
        if (reduction == TH_REDUCTION_POISSON_LOG_LIKELIHOOD)
            reduced += x != 0.0 ? x * log(m) : 0.0;
        else if (reduction == TH_REDUCTION_SQUARED_RESIDUAL)
            reduced += (m - x) * (m - x);
        else if (reduction == TH_REDUCTION_INNER_PRODUCT)
            reduced += x * m;
    }
    return reduced;
}

static th_status call_generalized(const th_plugin *p, th_instance *inst, uint32_t mode,
                                  int32_t elementwise, int32_t reduction, double epsilon,
                                  const double *weights, double *reduced, char *err)
{
    th_generalized_mttkrp_io io = {.struct_size = sizeof io, .mode = mode,
                                   .elementwise = elementwise, .reduction = reduction,
                                   .epsilon = epsilon, .weights = weights, .reduced = -99.0};
    th_status status = p->entry.generalized_mttkrp(inst, &io, err);
    *reduced = io.reduced;
    return status;
}

static void assert_close(double got, double want, const char *what)
{
    if (got != want && !(fabs(got - want) <= TOLERANCE * fmax(1.0, fabs(want))))
        fail_msg("%s: %.17g, expected %.17g", what, got, want);
}

/* Every mode, function and reduction of one tensor, weights NULL and given. */
static void check_against_oracle(const fixture *f, const th_sptensor *t, uint32_t rank,
                                 const char *threads, const char *label)
{
    const th_plugin *p = f->plugin;
    double **factors = positive_factors(t, rank, f->rng);
    th_instance *inst = th_test_create_instance(p, "threads", threads, NULL);
    th_test_load_and_set(p, inst, t, rank, factors);
    g_autofree double *weights = g_new(double, rank);
    for (uint32_t r = 0; r < rank; r++)
        weights[r] = 0.5 + r;
    const int32_t functions[] = {TH_ELEMENTWISE_VALUE, TH_ELEMENTWISE_POISSON_RATIO,
                                 TH_ELEMENTWISE_RESIDUAL};
    const int32_t reductions[] = {TH_REDUCTION_NONE, TH_REDUCTION_POISSON_LOG_LIKELIHOOD,
                                  TH_REDUCTION_SQUARED_RESIDUAL, TH_REDUCTION_INNER_PRODUCT};
    char err[TH_ERROR_SIZE] = "";
    for (uint32_t mode = 0; mode < t->nmodes; mode++) {
        const size_t cells = (size_t)t->dims[mode] * rank;
        g_autofree double *expected = g_new(double, cells);
        g_autofree double *actual = g_new(double, cells);
        for (size_t fi = 0; fi < G_N_ELEMENTS(functions); fi++)
            for (size_t ri = 0; ri < G_N_ELEMENTS(reductions); ri++)
                for (int weighted = 0; weighted < 2; weighted++) {
                    const double *w = weighted ? weights : NULL;
                    double reduced = 0.0;
                    th_test_assert_ok(call_generalized(p, inst, mode, functions[fi],
                                                       reductions[ri], EPSILON, w, &reduced,
                                                       err),
                                      err);
                    const double want = oracle(t, factors, rank, mode, functions[fi],
                                               reductions[ri], EPSILON, w, expected);
                    th_test_assert_ok(p->entry.get_mttkrp_result(inst, mode, actual, err), err);
                    const double error = th_test_relative_error(actual, expected, cells);
                    if (!(error < TOLERANCE))
                        fail_msg("%s: mode %u g %d h %d weights %d: relative error %.3g", label,
                                 mode, functions[fi], reductions[ri], weighted, error);
                    g_autofree char *what = g_strdup_printf(
                        "%s: mode %u g %d h %d weights %d: reduced", label, mode, functions[fi],
                        reductions[ri], weighted);
                    assert_close(reduced, want, what);
                }
    }
    p->entry.destroy(inst);
    th_test_free_factors(factors, t->nmodes);
}

static void test_matches_the_oracle(void **state)
{
    fixture *f = *state;
    for (uint32_t nmodes = 2; nmodes <= 5; nmodes++) {
        uint32_t dims[5] = {0};
        uint64_t cells = 1;
        for (uint32_t m = 0; m < nmodes; m++) {
            dims[m] = 3 + 2 * m;
            cells *= dims[m];
        }
        /* Sparse enough for empty slices. */
        g_autoptr(th_sptensor) t = th_test_random_tensor(nmodes, dims, MIN(cells / 4, 60), f->rng);
        make_counts(t);
        /* 8, 16 and 32 on 3 and 4 modes are cpu-reference's specialised
         * loops; the others its general one. */
        const uint32_t ranks[] = {1, 5, 8, 9, 16, 32};
        for (size_t i = 0; i < G_N_ELEMENTS(ranks); i++) {
            const uint32_t rank = ranks[i];
            g_autofree char *label = g_strdup_printf("%u modes rank %u", nmodes, rank);
            check_against_oracle(f, t, rank, rank == 5 ? "3" : "1", label);
        }
    }
}

/* Past one chunk (4096 nonzeros): rows continue across chunk ends. */
static void test_many_chunks(void **state)
{
    fixture *f = *state;
    const uint32_t dims[4] = {7, 300, 40, 30};
    g_autoptr(th_sptensor) t = th_test_random_tensor(4, dims, 20000, f->rng);
    make_counts(t);
    check_against_oracle(f, t, 4, "2", "20000 nonzeros");
    check_against_oracle(f, t, 16, "2", "20000 nonzeros, rank 16");
}

/* TH_MODE_NONE computes the reduction only: every result stays as it was,
 * bit for bit, and elementwise and epsilon are not looked at. */
static void test_mode_none_leaves_results(void **state)
{
    fixture *f = *state;
    const th_plugin *p = f->plugin;
    const uint32_t dims[3] = {5, 6, 7}, rank = 3;
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 60, f->rng);
    make_counts(t);
    double **factors = positive_factors(t, rank, f->rng);
    th_instance *inst = th_test_create_instance(p, NULL);
    th_test_load_and_set(p, inst, t, rank, factors);
    char err[TH_ERROR_SIZE] = "";
    double before[3][7 * 3], after[7 * 3], reduced = 0.0;
    for (uint32_t m = 0; m < 3; m++) {
        th_test_assert_ok(call_generalized(p, inst, m, TH_ELEMENTWISE_POISSON_RATIO,
                                           TH_REDUCTION_NONE, EPSILON, NULL, &reduced, err),
                          err);
        assert_true(reduced == 0.0);
        th_test_assert_ok(p->entry.get_mttkrp_result(inst, m, before[m], err), err);
    }
    const double w[3] = {2.0, 0.5, 1.5};
    th_test_assert_ok(call_generalized(p, inst, TH_MODE_NONE, 77, TH_REDUCTION_POISSON_LOG_LIKELIHOOD,
                                       0.0, w, &reduced, err),
                      err);
    assert_close(reduced,
                 oracle(t, factors, rank, TH_MODE_NONE, 0, TH_REDUCTION_POISSON_LOG_LIKELIHOOD,
                        0.0, w, NULL),
                 "log-likelihood");
    th_test_assert_ok(call_generalized(p, inst, TH_MODE_NONE, 0, TH_REDUCTION_NONE, 0.0, NULL,
                                       &reduced, err),
                      err);
    assert_true(reduced == 0.0);
    for (uint32_t m = 0; m < 3; m++) {
        th_test_assert_ok(p->entry.get_mttkrp_result(inst, m, after, err), err);
        assert_memory_equal(before[m], after, (size_t)dims[m] * rank * sizeof(double));
    }
    p->entry.destroy(inst);
    th_test_free_factors(factors, 3);
}

/* TH_ELEMENTWISE_VALUE is mttkrp(), bit for bit, weights or not. */
static void test_value_is_mttkrp(void **state)
{
    fixture *f = *state;
    const th_plugin *p = f->plugin;
    const uint32_t dims[4] = {12, 10, 9, 8}, rank = 5;
    g_autoptr(th_sptensor) t = th_test_random_tensor(4, dims, 5000, f->rng);
    double **factors = th_test_random_factors(t, rank, f->rng);
    th_instance *inst = th_test_create_instance(p, "threads", "2", NULL);
    th_test_load_and_set(p, inst, t, rank, factors);
    char err[TH_ERROR_SIZE] = "";
    const double w[5] = {1, 2, 3, 4, 5};
    double plain[12 * 5], general[12 * 5], reduced = 0.0;
    for (uint32_t m = 0; m < 4; m++)
        for (int weighted = 0; weighted < 2; weighted++) {
            th_test_assert_ok(p->entry.mttkrp(inst, m, err), err);
            th_test_assert_ok(p->entry.get_mttkrp_result(inst, m, plain, err), err);
            memset(general, 0, sizeof general);
            th_test_assert_ok(call_generalized(p, inst, m, TH_ELEMENTWISE_VALUE,
                                               weighted ? TH_REDUCTION_INNER_PRODUCT
                                                        : TH_REDUCTION_NONE,
                                               0.0, weighted ? w : NULL, &reduced, err),
                              err);
            th_test_assert_ok(p->entry.get_mttkrp_result(inst, m, general, err), err);
            assert_memory_equal(plain, general, (size_t)dims[m] * rank * sizeof(double));
        }
    p->entry.destroy(inst);
    th_test_free_factors(factors, 4);
}

/* Results and reductions are the same bits on 1, 2 and 7 threads. */
static void test_thread_count_does_not_change_results(void **state)
{
    fixture *f = *state;
    const th_plugin *p = f->plugin;
    const uint32_t dims[4] = {40, 30, 20, 10}, rank = 8;
    g_autoptr(th_sptensor) t = th_test_random_tensor(4, dims, 40000, f->rng);
    make_counts(t);
    double **factors = positive_factors(t, rank, f->rng);
    const char *threads[] = {"1", "2", "7"};
    double *results[3][4], reduced[3][4];
    char err[TH_ERROR_SIZE] = "";
    for (int k = 0; k < 3; k++) {
        th_instance *inst = th_test_create_instance(p, "threads", threads[k], NULL);
        th_test_load_and_set(p, inst, t, rank, factors);
        for (uint32_t m = 0; m < 4; m++) {
            results[k][m] = g_new(double, (size_t)dims[m] * rank);
            th_test_assert_ok(call_generalized(p, inst, m, TH_ELEMENTWISE_POISSON_RATIO,
                                               TH_REDUCTION_POISSON_LOG_LIKELIHOOD, EPSILON,
                                               NULL, &reduced[k][m], err),
                              err);
            th_test_assert_ok(p->entry.get_mttkrp_result(inst, m, results[k][m], err), err);
        }
        p->entry.destroy(inst);
    }
    for (uint32_t m = 0; m < 4; m++) {
        for (int k = 1; k < 3; k++) {
            assert_memory_equal(results[0][m], results[k][m],
                                (size_t)dims[m] * rank * sizeof(double));
            assert_memory_equal(&reduced[0][m], &reduced[k][m], sizeof(double));
        }
        for (int k = 0; k < 3; k++)
            g_free(results[k][m]);
    }
    th_test_free_factors(factors, 4);
}

/* Every mode's result and reduction of a 3- or 4-mode tensor at `rank`, with
 * cpu-reference's AVX-512 copy allowed or not (TH_CPU_REFERENCE_NO_AVX512,
 * read at each call), into results[mode] and reduced[mode]. */
static void generalized_all_modes(const fixture *f, const th_sptensor *t, uint32_t rank,
                                  double *const *factors, const double *weights,
                                  gboolean avx512, double **results, double *reduced)
{
    const th_plugin *p = f->plugin;
    th_instance *inst = th_test_create_instance(p, "threads", "2", NULL);
    th_test_load_and_set(p, inst, t, rank, factors);
    char err[TH_ERROR_SIZE] = "";
    if (avx512)
        g_unsetenv("TH_CPU_REFERENCE_NO_AVX512");
    else
        g_setenv("TH_CPU_REFERENCE_NO_AVX512", "1", TRUE);
    for (uint32_t m = 0; m < t->nmodes; m++) {
        th_test_assert_ok(call_generalized(p, inst, m, TH_ELEMENTWISE_POISSON_RATIO,
                                           TH_REDUCTION_POISSON_LOG_LIKELIHOOD, EPSILON, weights,
                                           &reduced[m], err),
                          err);
        th_test_assert_ok(p->entry.get_mttkrp_result(inst, m, results[m], err), err);
    }
    g_unsetenv("TH_CPU_REFERENCE_NO_AVX512");
    p->entry.destroy(inst);
}

/* The vectors of eight (AVX-512, where the CPU has it) and of four compute
 * the same bits, at every rank and width they are written for, weights or
 * not. (On a CPU without AVX-512 both runs take the vectors of four.) */
static void test_avx512_copy_changes_no_bit(void **state)
{
    fixture *f = *state;
    const uint32_t ranks[] = {8, 16, 32};
    for (uint32_t nmodes = 3; nmodes <= 4; nmodes++) {
        const uint32_t dims[4] = {30, 20, 25, 9};
        g_autoptr(th_sptensor) t = th_test_random_tensor(nmodes, dims, 6000, f->rng);
        make_counts(t);
        for (size_t i = 0; i < G_N_ELEMENTS(ranks); i++) {
            const uint32_t rank = ranks[i];
            double **factors = positive_factors(t, rank, f->rng);
            g_autofree double *weights = g_new(double, rank);
            for (uint32_t r = 0; r < rank; r++)
                weights[r] = 0.25 + r;
            for (int weighted = 0; weighted < 2; weighted++) {
                double *wide[4], *narrow[4], wide_sum[4], narrow_sum[4];
                for (uint32_t m = 0; m < nmodes; m++) {
                    wide[m] = g_new(double, (size_t)dims[m] * rank);
                    narrow[m] = g_new(double, (size_t)dims[m] * rank);
                }
                const double *w = weighted ? weights : NULL;
                generalized_all_modes(f, t, rank, factors, w, TRUE, wide, wide_sum);
                generalized_all_modes(f, t, rank, factors, w, FALSE, narrow, narrow_sum);
                for (uint32_t m = 0; m < nmodes; m++) {
                    assert_memory_equal(wide[m], narrow[m],
                                        (size_t)dims[m] * rank * sizeof(double));
                    assert_memory_equal(&wide_sum[m], &narrow_sum[m], sizeof(double));
                    g_free(wide[m]);
                    g_free(narrow[m]);
                }
            }
            th_test_free_factors(factors, nmodes);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* factor_update                                                             */
/* ------------------------------------------------------------------------ */

typedef struct factor_case {
    th_instance *inst;
    double **factors;
    double phi[6 * 4];
    double a[6 * 4];
} factor_case;

/* A 6 x 5 x 4 tensor at rank 4; mode 0's Phi from generalized_mttkrp. */
static void factor_case_init(const fixture *f, factor_case *c, th_sptensor **t_out,
                             const char *threads)
{
    const uint32_t dims[3] = {6, 5, 4};
    th_sptensor *t = th_test_random_tensor(3, dims, 40, f->rng);
    make_counts(t);
    c->factors = positive_factors(t, 4, f->rng);
    c->inst = th_test_create_instance(f->plugin, "threads", threads, NULL);
    th_test_load_and_set(f->plugin, c->inst, t, 4, c->factors);
    char err[TH_ERROR_SIZE] = "";
    double reduced = 0.0;
    th_test_assert_ok(call_generalized(f->plugin, c->inst, 0, TH_ELEMENTWISE_POISSON_RATIO,
                                       TH_REDUCTION_NONE, EPSILON, NULL, &reduced, err),
                      err);
    th_test_assert_ok(f->plugin->entry.get_mttkrp_result(c->inst, 0, c->phi, err),
                      err);
    memcpy(c->a, c->factors[0], sizeof c->a);
    *t_out = t;
}

static void factor_case_clear(const fixture *f, factor_case *c)
{
    f->plugin->entry.destroy(c->inst);
    th_test_free_factors(c->factors, 3);
}

static th_status call_factor_update(const th_plugin *p, th_instance *inst, th_factor_update_io *io,
                                    double *a, char *err)
{
    th_status status = p->entry.factor_update(inst, io, err);
    if (status == TH_OK)
        th_test_assert_ok(p->entry.get_factor(inst, io->mode, a, err), err);
    return status;
}

static void test_factor_operations(void **state)
{
    fixture *f = *state;
    const th_plugin *p = f->plugin;
    char err[TH_ERROR_SIZE] = "";
    for (int threads = 1; threads <= 2; threads++) {
        factor_case c;
        g_autoptr(th_sptensor) t = NULL;
        factor_case_init(f, &c, &t, threads == 1 ? "1" : "2");
        double got[24], want[24], vector[4] = {2.0, 0.0, -1.0, 0.5};

        /* SCALE_COLUMNS: A(:, r) *= vector[r]. */
        th_factor_update_io io = {.struct_size = sizeof io, .mode = 0,
                                  .operation = TH_FACTOR_SCALE_COLUMNS, .vector = vector};
        th_test_assert_ok(call_factor_update(p, c.inst, &io, got, err), err);
        for (int k = 0; k < 24; k++)
            want[k] = c.a[k] * vector[k % 4];
        assert_memory_equal(got, want, sizeof got);
        assert_true(io.violation == 0.0 && io.count == 0);

        /* NORMALIZE_1: column 1-norms out, a zero column stays zero. */
        io.operation = TH_FACTOR_NORMALIZE_1;
        memcpy(c.a, got, sizeof got);
        th_test_assert_ok(call_factor_update(p, c.inst, &io, got, err), err);
        for (int r = 0; r < 4; r++) {
            double norm = 0.0;
            for (int i = 0; i < 6; i++)
                norm += fabs(c.a[i * 4 + r]);
            assert_close(vector[r], norm, "column 1-norm");
            for (int i = 0; i < 6; i++)
                assert_close(got[i * 4 + r], norm > 0 ? c.a[i * 4 + r] / norm : 0.0,
                             "normalised entry");
        }
        assert_true(vector[1] == 0.0);

        /* MULTIPLICATIVE_UPDATE: the violation of the factor before; A .*=
         * Phi only when it reaches the tolerance. */
        th_test_assert_ok(p->entry.set_factor(c.inst, 0, c.factors[0], err), err);
        double violation = 0.0;
        for (int k = 0; k < 24; k++)
            violation = fmax(violation, fabs(fmin(c.factors[0][k], 1.0 - c.phi[k])));
        io = (th_factor_update_io){.struct_size = sizeof io, .mode = 0,
                                   .operation = TH_FACTOR_MULTIPLICATIVE_UPDATE,
                                   .tolerance = violation * 2.0};
        th_test_assert_ok(call_factor_update(p, c.inst, &io, got, err), err);
        assert_true(io.violation == violation);
        assert_int_equal(io.count, 0);
        assert_memory_equal(got, c.factors[0], sizeof got);
        io.tolerance = violation;
        io.violation = 0.0;
        th_test_assert_ok(call_factor_update(p, c.inst, &io, got, err), err);
        assert_true(io.violation == violation);
        assert_int_equal(io.count, 1);
        for (int k = 0; k < 24; k++)
            assert_true(got[k] == c.factors[0][k] * c.phi[k]);

        /* Subnormal entries are zeros on x86-64: the Poisson kernels take
         * them so (an operation on one would otherwise cost a microcode
         * assist in every later iteration). */
        double tiny[24];
        for (int k = 0; k < 24; k++)
            tiny[k] = DBL_MIN / 4.0;
        th_test_assert_ok(p->entry.set_factor(c.inst, 0, tiny, err), err);
        io.tolerance = 0.0;
        th_test_assert_ok(call_factor_update(p, c.inst, &io, got, err), err);
        int nonzero_products = 0;
        for (int k = 0; k < 24; k++) {
            const double product = tiny[k] * c.phi[k];
            nonzero_products += product != 0.0;
#if defined(__x86_64__)
            assert_true(got[k] == 0.0);
#else
            assert_true(got[k] == product);
#endif
        }
        assert_true(nonzero_products > 0);

        /* RAISE_INADMISSIBLE_ZEROS: where Phi > threshold and A < tolerance. */
        th_test_assert_ok(p->entry.set_factor(c.inst, 0, c.factors[0], err), err);
        io = (th_factor_update_io){.struct_size = sizeof io, .mode = 0,
                                   .operation = TH_FACTOR_RAISE_INADMISSIBLE_ZEROS,
                                   .tolerance = 0.3, .offset = 0.01, .threshold = 1.0};
        uint64_t changed = 0;
        for (int k = 0; k < 24; k++) {
            want[k] = c.factors[0][k];
            if (c.phi[k] > 1.0 && want[k] < 0.3) {
                want[k] += 0.01;
                changed++;
            }
        }
        assert_true(changed > 0);
        th_test_assert_ok(call_factor_update(p, c.inst, &io, got, err), err);
        assert_int_equal(io.count, changed);
        assert_memory_equal(got, want, sizeof got);
        factor_case_clear(f, &c);
    }
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

static void expect_generalized(const th_plugin *p, th_instance *inst,
                               const th_generalized_mttkrp_io *in, th_status status,
                               const char *message)
{
    th_generalized_mttkrp_io io = *in;
    char err[TH_ERROR_SIZE] = "";
    assert_int_equal(p->entry.generalized_mttkrp(inst, &io, err), status);
    assert_string_equal(err, message);
}

static void expect_factor(const th_plugin *p, th_instance *inst, const th_factor_update_io *in,
                          th_status status, const char *message)
{
    th_factor_update_io io = *in;
    char err[TH_ERROR_SIZE] = "";
    assert_int_equal(p->entry.factor_update(inst, &io, err), status);
    assert_string_equal(err, message);
}

static void test_errors(void **state)
{
    fixture *f = *state;
    const th_plugin *p = f->plugin;
    const th_generalized_mttkrp_io ok = {.struct_size = sizeof ok, .mode = 0,
                                         .elementwise = TH_ELEMENTWISE_POISSON_RATIO,
                                         .reduction = TH_REDUCTION_NONE, .epsilon = EPSILON};
    double vector[2];
    const th_factor_update_io fok = {.struct_size = sizeof fok, .mode = 1,
                                     .operation = TH_FACTOR_MULTIPLICATIVE_UPDATE,
                                     .vector = vector, .tolerance = 1e-4, .offset = 0.1};

    th_instance *inst = th_test_create_instance(p, NULL);
    expect_generalized(p, inst, &ok, TH_ERR_BAD_STATE,
                       "generalized_mttkrp: no tensor loaded (call load_tensor first)");
    expect_factor(p, inst, &fok, TH_ERR_BAD_STATE,
                  "factor_update: no tensor loaded (call load_tensor first)");

    const uint32_t dims[3] = {3, 2, 4};
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 5, f->rng);
    double **factors = positive_factors(t, 2, f->rng);
    th_test_load_and_set(p, inst, t, 2, factors);

    th_generalized_mttkrp_io io = ok;
    io.struct_size = TH_GENERALIZED_MTTKRP_IO_V1_4_SIZE - 1;
    expect_generalized(p, inst, &io, TH_ERR_INVALID_ARGUMENT,
                       "generalized_mttkrp: io.struct_size 39 is shorter than the 40 bytes of "
                       "th_generalized_mttkrp_io in ABI 1.4");
    io = ok;
    io.mode = 3;
    expect_generalized(p, inst, &io, TH_ERR_INVALID_ARGUMENT,
                       "generalized_mttkrp: io.mode 3 is out of range; the tensor has 3 modes "
                       "(0..2), or TH_MODE_NONE");
    io = ok;
    io.elementwise = 9;
    expect_generalized(p, inst, &io, TH_ERR_UNSUPPORTED,
                       "generalized_mttkrp: io.elementwise 9 is not a TH_ELEMENTWISE_* function "
                       "cpu-reference knows");
    io = ok;
    io.reduction = -1;
    expect_generalized(p, inst, &io, TH_ERR_UNSUPPORTED,
                       "generalized_mttkrp: io.reduction -1 is not a TH_REDUCTION_* cpu-reference "
                       "knows");
    io.mode = TH_MODE_NONE; /* the reduction is read for TH_MODE_NONE too */
    expect_generalized(p, inst, &io, TH_ERR_UNSUPPORTED,
                       "generalized_mttkrp: io.reduction -1 is not a TH_REDUCTION_* cpu-reference "
                       "knows");
    io = ok;
    io.epsilon = 0.0;
    expect_generalized(p, inst, &io, TH_ERR_INVALID_ARGUMENT,
                       "generalized_mttkrp: io.epsilon 0 must be > 0 for "
                       "TH_ELEMENTWISE_POISSON_RATIO (it floors the divisor)");
    io.epsilon = NAN;
    expect_generalized(p, inst, &io, TH_ERR_INVALID_ARGUMENT,
                       "generalized_mttkrp: io.epsilon nan must be > 0 for "
                       "TH_ELEMENTWISE_POISSON_RATIO (it floors the divisor)");
    /* No division, no epsilon needed. */
    char err[TH_ERROR_SIZE] = "";
    io.elementwise = TH_ELEMENTWISE_RESIDUAL;
    th_test_assert_ok(p->entry.generalized_mttkrp(inst, &io, err), err);
    expect_generalized(p, inst, &io, TH_OK, ""); /* err untouched on success */

    th_factor_update_io fio = fok;
    /* Phi of mode 1 does not exist yet (mode 0's does). */
    expect_factor(p, inst, &fio, TH_ERR_BAD_STATE,
                  "factor_update: TH_FACTOR_MULTIPLICATIVE_UPDATE reads Phi, but mode 1 has no "
                  "MTTKRP result yet (call generalized_mttkrp first)");
    fio.operation = TH_FACTOR_RAISE_INADMISSIBLE_ZEROS;
    expect_factor(p, inst, &fio, TH_ERR_BAD_STATE,
                  "factor_update: TH_FACTOR_RAISE_INADMISSIBLE_ZEROS reads Phi, but mode 1 has "
                  "no MTTKRP result yet (call generalized_mttkrp first)");
    fio.operation = TH_FACTOR_SCALE_COLUMNS; /* reads no Phi */
    expect_factor(p, inst, &fio, TH_OK, "");
    fio = fok;
    fio.struct_size = 8;
    expect_factor(p, inst, &fio, TH_ERR_INVALID_ARGUMENT,
                  "factor_update: io.struct_size 8 is shorter than the 64 bytes of "
                  "th_factor_update_io in ABI 1.4");
    fio = fok;
    fio.mode = TH_MODE_NONE;
    expect_factor(p, inst, &fio, TH_ERR_INVALID_ARGUMENT,
                  "factor_update: io.mode 4294967295 is out of range; the tensor has 3 modes "
                  "(0..2)");
    fio = fok;
    fio.operation = 0;
    expect_factor(p, inst, &fio, TH_ERR_UNSUPPORTED,
                  "factor_update: io.operation 0 is not a TH_FACTOR_* operation cpu-reference "
                  "knows");
    fio = fok;
    fio.operation = TH_FACTOR_NORMALIZE_1;
    fio.vector = NULL;
    expect_factor(p, inst, &fio, TH_ERR_INVALID_ARGUMENT,
                  "factor_update: io.vector is NULL; TH_FACTOR_NORMALIZE_1 needs [rank]");
    fio.operation = TH_FACTOR_SCALE_COLUMNS;
    expect_factor(p, inst, &fio, TH_ERR_INVALID_ARGUMENT,
                  "factor_update: io.vector is NULL; TH_FACTOR_SCALE_COLUMNS needs [rank]");
    fio = fok;
    fio.mode = 0;
    fio.tolerance = NAN;
    expect_factor(p, inst, &fio, TH_ERR_INVALID_ARGUMENT,
                  "factor_update: io.tolerance is NaN (TH_FACTOR_MULTIPLICATIVE_UPDATE)");
    fio = fok;
    fio.mode = 0;
    fio.operation = TH_FACTOR_RAISE_INADMISSIBLE_ZEROS;
    fio.offset = INFINITY;
    expect_factor(p, inst, &fio, TH_ERR_INVALID_ARGUMENT,
                  "factor_update: io.offset inf is not finite "
                  "(TH_FACTOR_RAISE_INADMISSIBLE_ZEROS)");

    p->entry.destroy(inst);
    th_test_free_factors(factors, 3);
}

/* ------------------------------------------------------------------------ */
/* multiplicative_updates (ABI 1.7)                                          */
/* ------------------------------------------------------------------------ */

#define MU_ITERATIONS 6u

/* What the inner iterations of one mode leave. */
typedef struct mu_outcome {
    double *factor, *result; /* dims[mode] x rank */
    uint32_t iterations, updates;
    double violation;
    double violations[MU_ITERATIONS]; /* the loop's, per iteration */
} mu_outcome;

static void mu_outcome_init(mu_outcome *o, size_t count)
{
    memset(o, 0, sizeof *o);
    o->factor = g_new(double, count);
    o->result = g_new(double, count);
}

static void mu_outcome_clear(mu_outcome *o)
{
    g_free(o->factor);
    g_free(o->result);
}

/* plugin.h's loop of generalized_mttkrp and factor_update, from `factors`. */
static void mu_by_loop(const th_plugin *p, th_instance *inst, const th_sptensor *t,
                       double *const *factors, uint32_t mode, double tolerance, mu_outcome *o)
{
    char err[TH_ERROR_SIZE] = "";
    for (uint32_t m = 0; m < t->nmodes; m++)
        th_test_assert_ok(p->entry.set_factor(inst, m, factors[m], err), err);
    o->iterations = o->updates = 0;
    for (uint32_t i = 0; i < MU_ITERATIONS; i++) {
        double reduced = 0.0;
        th_test_assert_ok(call_generalized(p, inst, mode, TH_ELEMENTWISE_POISSON_RATIO,
                                           TH_REDUCTION_NONE, EPSILON, NULL, &reduced, err),
                          err);
        th_factor_update_io io = {.struct_size = (uint32_t)sizeof io, .mode = mode,
                                  .operation = TH_FACTOR_MULTIPLICATIVE_UPDATE,
                                  .tolerance = tolerance};
        th_test_assert_ok(p->entry.factor_update(inst, &io, err), err);
        o->iterations = i + 1;
        o->updates += (uint32_t)io.count;
        o->violation = o->violations[i] = io.violation;
        if (io.count == 0)
            break;
    }
    th_test_assert_ok(p->entry.get_factor(inst, mode, o->factor, err), err);
    th_test_assert_ok(p->entry.get_mttkrp_result(inst, mode, o->result, err), err);
}

/* The same in one multiplicative_updates call; its status. */
static th_status mu_by_call(const th_plugin *p, th_instance *inst, const th_sptensor *t,
                            double *const *factors, uint32_t mode, uint32_t max_iterations,
                            double tolerance, mu_outcome *o, char *err)
{
    for (uint32_t m = 0; m < t->nmodes; m++)
        th_test_assert_ok(p->entry.set_factor(inst, m, factors[m], err), err);
    th_multiplicative_updates_io io = {.struct_size = (uint32_t)sizeof io,
                                       .mode = mode,
                                       .elementwise = TH_ELEMENTWISE_POISSON_RATIO,
                                       .max_iterations = max_iterations,
                                       .epsilon = EPSILON,
                                       .tolerance = tolerance};
    const th_status status = p->entry.multiplicative_updates(inst, &io, err);
    o->iterations = io.iterations;
    o->updates = io.updates;
    o->violation = io.violation;
    th_test_assert_ok(p->entry.get_factor(inst, mode, o->factor, err), err);
    if (status == TH_OK)
        th_test_assert_ok(p->entry.get_mttkrp_result(inst, mode, o->result, err), err);
    return status;
}

static void assert_same_outcome(const mu_outcome *got, const mu_outcome *want, size_t count,
                                const char *what)
{
    if (got->iterations != want->iterations || got->updates != want->updates ||
        memcmp(&got->violation, &want->violation, sizeof(double)) != 0)
        fail_msg("%s: %u iterations, %u updates, violation %.17g; expected %u, %u, %.17g", what,
                 got->iterations, got->updates, got->violation, want->iterations, want->updates,
                 want->violation);
    if (memcmp(got->factor, want->factor, count * sizeof(double)) != 0)
        fail_msg("%s: the factor differs", what);
    if (memcmp(got->result, want->result, count * sizeof(double)) != 0)
        fail_msg("%s: the result differs", what);
}

static double max_relative_error(const double *got, const double *want, size_t count)
{
    double worst = 0.0, scale = 0.0;
    for (size_t k = 0; k < count; k++)
        scale = fmax(scale, fabs(want[k]));
    for (size_t k = 0; k < count; k++)
        worst = fmax(worst, fabs(got[k] - want[k]) / fmax(scale, DBL_MIN));
    return worst;
}

/* Within rounding of the loop: the same counts, the violation, factor and
 * result to `tolerance` relative (to the largest entry). */
static void assert_close_outcome(const mu_outcome *got, const mu_outcome *want, size_t count,
                                 double tolerance, const char *what)
{
    if (got->iterations != want->iterations || got->updates != want->updates ||
        !(fabs(got->violation - want->violation) <= tolerance * fabs(want->violation)))
        fail_msg("%s: %u iterations, %u updates, violation %.17g; the loop: %u, %u, %.17g", what,
                 got->iterations, got->updates, got->violation, want->iterations, want->updates,
                 want->violation);
    const double factor_error = max_relative_error(got->factor, want->factor, count);
    const double result_error = max_relative_error(got->result, want->result, count);
    if (!(factor_error <= tolerance) || !(result_error <= tolerance))
        fail_msg("%s: factor %.3g, result %.3g from the loop's (relative)", what, factor_error,
                 result_error);
}

/* A tolerance the loop stops at part way (iteration >= 1 with a margin),
 * or 0 when its violations never fall below all before. */
static double stopping_tolerance(const double *violations, uint32_t n)
{
    double smallest = violations[0];
    for (uint32_t s = 1; s < n; s++) {
        if (violations[s] < smallest * (1.0 - 1e-3))
            return 0.5 * (violations[s] + smallest);
        smallest = fmin(smallest, violations[s]);
    }
    return 0.0;
}

/* multiplicative_updates leaves what the loop of generalized_mttkrp and
 * factor_update leaves: bit for bit where no vector copy runs (rank 5) or
 * no row is cached (TH_CPU_REFERENCE_MU_PRODUCTS_BYTES 0: every row forms
 * its products at every iteration), within rounding where the cache's
 * blocks run (rank 16); and
 * the same bits on 1, 2 and 3 threads, in vectors of eight or of four
 * (TH_CPU_REFERENCE_NO_AVX512), with every iteration in one block or in
 * blocks of one and two (a small history, TH_CPU_REFERENCE_MU_HISTORY_BYTES),
 * run to the end or stopped part way by the tolerance, on rows that span
 * chunks and with a row of most of a mode's nonzeros (a mode the plugin
 * runs as the loop itself). */
static void test_multiplicative_updates_are_the_loop(void **state)
{
    fixture *f = *state;
    const th_plugin *p = f->plugin;
    const uint32_t spread_dims[3] = {7, 60, 80}, heavy_dims[3] = {2, 300, 300};
    g_autoptr(th_sptensor) spread = th_test_random_tensor(3, spread_dims, 20000, f->rng);
    g_autoptr(th_sptensor) heavy = th_test_random_tensor(3, heavy_dims, 40000, f->rng);
    for (uint64_t k = 0; k < 36000; k++)
        heavy->indices[0][k] = 0; /* one row of 36k nonzeros: more than the cache holds */
    th_sptensor *tensors[2] = {spread, heavy};
    const uint32_t ranks[2] = {16, 5};
    const char *threads[3] = {"1", "2", "3"};
    unsigned stopped = 0;
    for (int ti = 0; ti < 2; ti++) {
        th_sptensor *t = tensors[ti];
        make_counts(t);
        for (int ri = 0; ri < 2; ri++) {
            const uint32_t rank = ranks[ri];
            double **factors = positive_factors(t, rank, f->rng);
            th_instance *inst[3];
            for (int k = 0; k < 3; k++) {
                inst[k] = th_test_create_instance(p, "threads", threads[k], NULL);
                th_test_load_and_set(p, inst[k], t, rank, factors);
            }
            for (uint32_t mode = 0; mode < 3; mode++) {
                const size_t count = (size_t)t->dims[mode] * rank;
                /* Bit for bit where no vector copy (and so no cache's block) runs. */
                const gboolean exact = rank % 4 != 0;
                mu_outcome loop, first, got;
                mu_outcome_init(&loop, count);
                mu_outcome_init(&first, count);
                mu_outcome_init(&got, count);
                double tolerance = 0.0;
                for (int round = 0; round < 2; round++) {
                    if (round == 1 && tolerance == 0.0)
                        break;
                    mu_by_loop(p, inst[0], t, factors, mode, tolerance, &loop);
                    stopped += loop.iterations < MU_ITERATIONS;
                    const char *budgets[3] = {NULL, "1", NULL};
                    g_autofree char *two = g_strdup_printf("%zu", 3 * count * sizeof(double));
                    budgets[2] = two;
                    gboolean have_first = FALSE;
                    for (int k = 0; k < 3; k++)
                        for (int b = 0; b < 3; b++)
                            for (int wide = 1; wide >= (k == 0 ? 0 : 1); wide--) {
                                if (budgets[b])
                                    g_setenv("TH_CPU_REFERENCE_MU_HISTORY_BYTES", budgets[b],
                                             TRUE);
                                if (!wide)
                                    g_setenv("TH_CPU_REFERENCE_NO_AVX512", "1", TRUE);
                                char err[TH_ERROR_SIZE] = "";
                                th_test_assert_ok(mu_by_call(p, inst[k], t, factors, mode,
                                                             MU_ITERATIONS, tolerance, &got,
                                                             err),
                                                  err);
                                g_unsetenv("TH_CPU_REFERENCE_MU_HISTORY_BYTES");
                                g_unsetenv("TH_CPU_REFERENCE_NO_AVX512");
                                g_autofree char *what = g_strdup_printf(
                                    "tensor %d rank %u mode %u tolerance %g, %s threads, "
                                    "history %s%s",
                                    ti, rank, mode, tolerance, threads[k],
                                    budgets[b] ? budgets[b] : "default",
                                    wide ? "" : ", vectors of four");
                                if (exact)
                                    assert_same_outcome(&got, &loop, count, what);
                                else
                                    assert_close_outcome(&got, &loop, count, 1e-12, what);
                                if (!have_first) {
                                    first.iterations = got.iterations;
                                    first.updates = got.updates;
                                    first.violation = got.violation;
                                    memcpy(first.factor, got.factor, count * sizeof(double));
                                    memcpy(first.result, got.result, count * sizeof(double));
                                    have_first = TRUE;
                                }
                                assert_same_outcome(&got, &first, count, what);
                            }
                    /* With no row cached, every row forms its products at every
                     * iteration: the loop's bits. */
                    g_setenv("TH_CPU_REFERENCE_MU_PRODUCTS_BYTES", "0", TRUE);
                    char err[TH_ERROR_SIZE] = "";
                    th_test_assert_ok(mu_by_call(p, inst[1], t, factors, mode, MU_ITERATIONS,
                                                 tolerance, &got, err),
                                      err);
                    g_unsetenv("TH_CPU_REFERENCE_MU_PRODUCTS_BYTES");
                    assert_same_outcome(&got, &loop, count, "no row cached");
                    tolerance = stopping_tolerance(loop.violations, loop.iterations);
                }
                mu_outcome_clear(&loop);
                mu_outcome_clear(&first);
                mu_outcome_clear(&got);
            }
            for (int k = 0; k < 3; k++)
                p->entry.destroy(inst[k]);
            th_test_free_factors(factors, 3);
        }
    }
    /* The stopping rule was exercised, not only the full runs. */
    assert_true(stopped >= 6);
}

/* A stop requested between blocks gives up with TH_ERR_CANCELLED and the
 * factor after the whole blocks before it: here one update. */
static void test_multiplicative_updates_stop_between_blocks(void **state)
{
    fixture *f = *state;
    const th_plugin *p = f->plugin;
    const uint32_t dims[3] = {12, 16, 20}, rank = 8;
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 3000, f->rng);
    make_counts(t);
    double **factors = positive_factors(t, rank, f->rng);
    const size_t count = (size_t)dims[1] * rank;
    th_instance *plain = th_test_create_instance(p, "threads", "2", NULL);
    th_test_load_and_set(p, plain, t, rank, factors);
    mu_outcome once, got;
    mu_outcome_init(&once, count);
    mu_outcome_init(&got, count);
    char err[TH_ERROR_SIZE] = "";
    th_test_assert_ok(mu_by_call(p, plain, t, factors, 1, 1, 0.0, &once, err), err);
    th_instance *stopped = th_test_create_cancelled_instance(p, "threads", "2", NULL);
    th_test_load_and_set(p, stopped, t, rank, factors);
    g_setenv("TH_CPU_REFERENCE_MU_HISTORY_BYTES", "1", TRUE); /* blocks of one */
    const th_status status = mu_by_call(p, stopped, t, factors, 1, 4, 0.0, &got, err);
    g_unsetenv("TH_CPU_REFERENCE_MU_HISTORY_BYTES");
    assert_int_equal(status, TH_ERR_CANCELLED);
    assert_non_null(strstr(err, "stop requested"));
    assert_memory_equal(got.factor, once.factor, count * sizeof(double));
    /* The mode's result is not ready: the factor operations that read it refuse. */
    th_factor_update_io io = {.struct_size = (uint32_t)sizeof io, .mode = 1,
                              .operation = TH_FACTOR_MULTIPLICATIVE_UPDATE};
    assert_int_equal(p->entry.factor_update(stopped, &io, err), TH_ERR_BAD_STATE);
    mu_outcome_clear(&once);
    mu_outcome_clear(&got);
    p->entry.destroy(plain);
    p->entry.destroy(stopped);
    th_test_free_factors(factors, 3);
}

int main(void)
{
    th_log_set_level(TH_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_the_oracle),
        cmocka_unit_test(test_many_chunks),
        cmocka_unit_test(test_mode_none_leaves_results),
        cmocka_unit_test(test_value_is_mttkrp),
        cmocka_unit_test(test_thread_count_does_not_change_results),
        cmocka_unit_test(test_avx512_copy_changes_no_bit),
        cmocka_unit_test(test_factor_operations),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_multiplicative_updates_are_the_loop),
        cmocka_unit_test(test_multiplicative_updates_stop_between_blocks),
    };
    return cmocka_run_group_tests(tests, setup, th_test_cpu_fixture_teardown);
}
