/* The GPU plugins' generalized MTTKRP and factor operations (ABI 1.4)
 * against a double-precision host oracle, through the plugin ABI.
 *
 * Every elementwise function and reduction, with and without weights, on
 * gpu-scheme1, gpu-scheme2 and gpu-adaptive, at rank 16 (the vector
 * kernel) and 7 (the generic kernel), plus 32 and 64 outside the quick
 * subset; TH_MODE_NONE leaving every result as it was; VALUE without a
 * reduction equal to mttkrp() up to the order of its sums; each factor
 * operation, after an als_update so that the factor is held with a column
 * scale other than 1; each error the header asks for.
 *
 * Needs a CUDA device: without one it exits 77 (skipped).
 * TH_GPU_TEST_QUICK=1 runs a small subset (compute-sanitizer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "gpu_test_support.h"
#include "test_support.h"

/* fp32 values and factors against a double oracle. */
#define TOLERANCE 2e-4

static const th_gpu_test_case cases[] = {
    {"3 modes, uniform, I=2 and I<kappa", 3, {1000, 40, 2}, 5003, {0, 0, 0}},
    {"4 modes, skewed, I=1", 4, {1, 300, 7000, 13}, 20011, {0, 1.2, 1.5, 0.8}},
    {"empty slices, heavy skew", 3, {5000, 500, 64}, 301, {2.0, 0, 1.5}},
    {"5 modes, skewed", 5, {17, 5000, 3, 260, 90}, 9973, {1.0, 1.5, 0, 1.1, 0.5}},
};

static const char *const elementwise_names[] = {"VALUE", "POISSON_RATIO", "RESIDUAL"};
static const char *const reduction_names[] = {"NONE", "POISSON_LOG_LIKELIHOOD",
                                              "SQUARED_RESIDUAL", "INNER_PRODUCT"};

/* Positive factors, so the Poisson model is positive (its ratio and log). */
static double **positive_factors(const th_sptensor *t, uint32_t rank, GRand *rng)
{
    double **f = g_new0(double *, t->nmodes);
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        f[m] = g_new(double, (size_t)t->dims[m] * rank);
        for (size_t k = 0; k < (size_t)t->dims[m] * rank; ++k)
            f[m][k] = g_rand_double_range(rng, 0.05, 1.0);
    }
    return f;
}

static double oracle_g(int e, double x, double m, double eps)
{
    switch (e) {
    case TH_ELEMENTWISE_POISSON_RATIO:
        return x / (m > eps ? m : eps);
    case TH_ELEMENTWISE_RESIDUAL:
        return m - x;
    default:
        return x;
    }
}

static double oracle_h(int r, double x, double m)
{
    switch (r) {
    case TH_REDUCTION_POISSON_LOG_LIKELIHOOD:
        return x == 0.0 ? 0.0 : x * (m > 0.0 ? log(m) : -INFINITY);
    case TH_REDUCTION_SQUARED_RESIDUAL:
        return (m - x) * (m - x);
    case TH_REDUCTION_INNER_PRODUCT:
        return x * m;
    default:
        return 0.0;
    }
}

/* G (mode != TH_MODE_NONE, else NULL) and the reduction, in double, from
 * the factors as the backend holds them (fp32). *scale: sum of |h|, the
 * yardstick of the reduction's error. */
static double oracle(const th_sptensor *t, uint32_t rank, double *const *factors,
                     uint32_t mode, int e, int r, double eps, const double *w, double *G,
                     double *scale)
{
    if (G)
        memset(G, 0, sizeof(double) * t->dims[mode] * rank);
    double red = 0.0, abs_sum = 0.0;
    double *prod = g_new(double, rank);
    for (uint64_t i = 0; i < t->nnz; ++i) {
        const double x = (double)(float)t->values[i];
        double m = 0.0;
        for (uint32_t c = 0; c < rank; ++c) {
            double p = 1.0;
            for (uint32_t k = 0; k < t->nmodes; ++k)
                if (k != mode)
                    p *= (double)(float)factors[k][(size_t)t->indices[k][i] * rank + c];
            prod[c] = p;
            const uint32_t own = mode == TH_MODE_NONE ? 0 : mode;
            /* TH_MODE_NONE: the product above skipped no mode; */
            const double a = mode == TH_MODE_NONE
                                 ? 1.0
                                 : (double)(float)factors[own][(size_t)t->indices[own][i] * rank + c];
            m += (w ? (double)(float)w[c] : 1.0) * a * p;
        }
        const double h = oracle_h(r, x, m);
        red += h;
        abs_sum += fabs(h);
        if (G) {
            const double g = oracle_g(e, x, m, eps);
            double *row = G + (size_t)t->indices[mode][i] * rank;
            for (uint32_t c = 0; c < rank; ++c)
                row[c] += g * prod[c];
        }
    }
    g_free(prod);
    *scale = abs_sum;
    return red;
}

static th_status call_gen(const th_plugin *pl, th_instance *inst, uint32_t mode, int e, int r,
                          double eps, const double *w, double *reduced, char *err)
{
    th_generalized_mttkrp_io io = {.struct_size = sizeof io, .mode = mode, .elementwise = e,
                                   .reduction = r, .epsilon = eps, .weights = w,
                                   .reduced = -12345.0};
    const th_status st = pl->entry.generalized_mttkrp(inst, &io, err);
    *reduced = io.reduced;
    return st;
}

static void check_reduced(double got, double want, double scale, const char *what)
{
    if (!(fabs(got - want) <= TOLERANCE * (scale > 1.0 ? scale : 1.0)))
        fail_msg("%s: reduced %.12g, expected %.12g (scale %.3g)", what, got, want, scale);
}

static void test_generalized_matches_oracle(void **state)
{
    const th_gpu_test_plugins *p = *state;
    GRand *rng = g_rand_new_with_seed(1404);
    const uint32_t ranks[] = {16, 7, 32, 64};
    unsigned checked = 0;
    for (size_t ci = 0; ci < G_N_ELEMENTS(cases); ++ci) {
        if (th_gpu_test_quick() && ci != 0 && ci != 2)
            continue;
        g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[ci], 40 + ci);
        for (size_t ri = 0; ri < G_N_ELEMENTS(ranks); ++ri) {
            const uint32_t rank = ranks[ri];
            if (th_gpu_test_quick() && rank > 16)
                continue;
            double **factors = positive_factors(t, rank, rng);
            g_autofree double *w = g_new(double, rank);
            for (uint32_t c = 0; c < rank; ++c)
                w[c] = g_rand_double_range(rng, 0.5, 2.0);
            for (uint32_t g = 0; g < TH_GPU_TEST_N_PLUGINS; ++g) {
                const th_plugin *pl = p->gpu[g];
                th_instance *inst = th_test_create_instance(pl, NULL);
                th_test_load_and_set(pl, inst, t, rank, factors);
                for (uint32_t mode = 0; mode < t->nmodes; ++mode) {
                    const size_t n = (size_t)t->dims[mode] * rank;
                    g_autofree double *want = g_new(double, n);
                    g_autofree double *got = g_new(double, n);
                    for (int e = 0; e < 3; ++e)
                        for (int r = 0; r < 4; ++r)
                            for (int wi = 0; wi < 2; ++wi) {
                                const double *wv = wi ? w : NULL;
                                const double eps = 1e-10;
                                char err[TH_ERROR_SIZE] = "";
                                double reduced = 0.0, scale = 0.0;
                                th_test_assert_ok(
                                    call_gen(pl, inst, mode, e, r, eps, wv, &reduced, err), err);
                                if (r == TH_REDUCTION_NONE && !wv) {
                                    /* Returned queued: its time is read when asked for. */
                                    th_mode_info mi = {.struct_size = sizeof mi,
                                                       .last_mttkrp_seconds = -1.0};
                                    th_test_assert_ok(
                                        pl->entry.get_mode_info(inst, mode, &mi, err), err);
                                    assert_true(mi.last_mttkrp_seconds > 0.0);
                                }
                                for (size_t k = 0; k < n; ++k)
                                    got[k] = NAN;
                                th_test_assert_ok(
                                    pl->entry.get_mttkrp_result(inst, mode, got, err), err);
                                const double red = oracle(t, rank, factors, mode, e, r, eps, wv,
                                                          want, &scale);
                                g_autofree char *what = g_strdup_printf(
                                    "%s (%s), rank %u, mode %u, %s, %s, %s weights",
                                    cases[ci].name, pl->info->id, rank, mode,
                                    elementwise_names[e], reduction_names[r],
                                    wi ? "with" : "no");
                                const double rel = th_test_relative_error(got, want, n);
                                if (!(rel < TOLERANCE))
                                    fail_msg("%s: relative error %.3g", what, rel);
                                if (r == TH_REDUCTION_NONE)
                                    assert_true(reduced == 0.0);
                                else
                                    check_reduced(reduced, red, scale, what);
                                ++checked;
                            }
                    th_mode_info mi = {.struct_size = sizeof mi, .last_mttkrp_seconds = -1.0};
                    char err[TH_ERROR_SIZE] = "";
                    th_test_assert_ok(pl->entry.get_mode_info(inst, mode, &mi, err), err);
                    assert_true(mi.last_mttkrp_seconds > 0.0);
                }
                pl->entry.destroy(inst);
            }
            th_test_free_factors(factors, t->nmodes);
        }
    }
    printf("checked %u generalized MTTKRPs against the oracle\n", checked);
    g_rand_free(rng);
}

/* VALUE without a reduction is mttkrp() itself, weights or not. */
static void assert_rel(const double *got, const double *want, size_t n, const char *what);

static void test_value_equals_mttkrp(void **state)
{
    const th_gpu_test_plugins *p = *state;
    GRand *rng = g_rand_new_with_seed(77);
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[1], 3);
    const uint32_t ranks[] = {16, 7};
    for (size_t ri = 0; ri < G_N_ELEMENTS(ranks); ++ri) {
        const uint32_t rank = ranks[ri];
        double **factors = th_test_random_factors(t, rank, rng);
        g_autofree double *w = g_new(double, rank);
        for (uint32_t c = 0; c < rank; ++c)
            w[c] = 3.0;
        for (uint32_t g = 0; g < TH_GPU_TEST_N_PLUGINS; ++g) {
            const th_plugin *pl = p->gpu[g];
            th_instance *inst = th_test_create_instance(pl, NULL);
            th_test_load_and_set(pl, inst, t, rank, factors);
            for (uint32_t mode = 0; mode < t->nmodes; ++mode) {
                const size_t n = (size_t)t->dims[mode] * rank;
                g_autofree double *plain = g_new(double, n);
                g_autofree double *gen = g_new(double, n);
                th_gpu_test_run_mode(pl, inst, t, rank, mode, plain);
                for (int wi = 0; wi < 2; ++wi) {
                    char err[TH_ERROR_SIZE] = "";
                    double reduced = 1.0;
                    th_test_assert_ok(call_gen(pl, inst, mode, TH_ELEMENTWISE_VALUE,
                                               TH_REDUCTION_NONE, 0.0, wi ? w : NULL, &reduced,
                                               err),
                                      err);
                    assert_true(reduced == 0.0);
                    th_test_assert_ok(pl->entry.get_mttkrp_result(inst, mode, gen, err), err);
                    /* Equal up to the order of scheme 2's atomics, which
                     * differs from one launch to the next, and at rank 7
                     * of two kernels' sums (mttkrp() runs the vector
                     * kernel of floats, VALUE the generic kernel). */
                    assert_rel(gen, plain, n, "VALUE against mttkrp()");
                }
            }
            pl->entry.destroy(inst);
        }
        th_test_free_factors(factors, t->nmodes);
    }
    g_rand_free(rng);
}

/* TH_MODE_NONE: the reduction alone; every mode's result stays as it was. */
static void test_mode_none_reduction_only(void **state)
{
    const th_gpu_test_plugins *p = *state;
    GRand *rng = g_rand_new_with_seed(99);
    const uint32_t ranks[] = {16, 7};
    for (size_t ci = 0; ci < 2; ++ci) {
        g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[ci], 60 + ci);
        for (size_t ri = 0; ri < G_N_ELEMENTS(ranks); ++ri) {
            const uint32_t rank = ranks[ri];
            double **factors = positive_factors(t, rank, rng);
            g_autofree double *w = g_new(double, rank);
            for (uint32_t c = 0; c < rank; ++c)
                w[c] = g_rand_double_range(rng, 0.5, 2.0);
            for (uint32_t g = 0; g < TH_GPU_TEST_N_PLUGINS; ++g) {
                const th_plugin *pl = p->gpu[g];
                th_instance *inst = th_test_create_instance(pl, NULL);
                th_test_load_and_set(pl, inst, t, rank, factors);
                double *before[8];
                char err[TH_ERROR_SIZE] = "";
                for (uint32_t m = 0; m < t->nmodes; ++m) {
                    before[m] = g_new(double, (size_t)t->dims[m] * rank);
                    th_gpu_test_run_mode(pl, inst, t, rank, m, before[m]);
                }
                for (int r = 0; r < 4; ++r)
                    for (int wi = 0; wi < 2; ++wi) {
                        double reduced = 0.0, scale = 0.0;
                        /* elementwise is unused for TH_MODE_NONE: any value. */
                        th_test_assert_ok(call_gen(pl, inst, TH_MODE_NONE, 99, r, 0.0,
                                                   wi ? w : NULL, &reduced, err),
                                          err);
                        const double want = oracle(t, rank, factors, TH_MODE_NONE, 0, r, 0.0,
                                                   wi ? w : NULL, NULL, &scale);
                        g_autofree char *what = g_strdup_printf(
                            "TH_MODE_NONE %s (%s, rank %u, %s weights)", reduction_names[r],
                            pl->info->id, rank, wi ? "with" : "no");
                        check_reduced(reduced, want, scale, what);
                    }
                for (uint32_t m = 0; m < t->nmodes; ++m) {
                    const size_t n = (size_t)t->dims[m] * rank;
                    g_autofree double *after = g_new(double, n);
                    th_test_assert_ok(pl->entry.get_mttkrp_result(inst, m, after, err), err);
                    if (memcmp(after, before[m], sizeof(double) * n) != 0)
                        fail_msg("%s: TH_MODE_NONE changed mode %u's result", pl->info->id, m);
                    g_free(before[m]);
                }
                pl->entry.destroy(inst);
            }
            th_test_free_factors(factors, t->nmodes);
        }
    }
    g_rand_free(rng);
}

/* RAISE_INADMISSIBLE_ZEROS's Phi threshold in these tests: neither the
 * host's 1 nor pyttb's 0, so that the backend must read it. */
#define RAISE_THRESHOLD 0.9

static th_status call_update(const th_plugin *pl, th_instance *inst, uint32_t mode, int op,
                             double *vector, double tol, double offset, double *violation,
                             uint64_t *count, char *err)
{
    th_factor_update_io io = {.struct_size = sizeof io, .mode = mode, .operation = op,
                              .vector = vector, .tolerance = tol, .offset = offset,
                              .threshold = RAISE_THRESHOLD};
    const th_status st = pl->entry.factor_update(inst, &io, err);
    *violation = io.violation;
    *count = io.count;
    return st;
}

static void assert_rel(const double *got, const double *want, size_t n, const char *what)
{
    const double e = th_test_relative_error(got, want, n);
    if (!(e < TOLERANCE))
        fail_msg("%s: relative error %.3g", what, e);
}

/* Each operation on the factor as get_factor shows it, after an
 * als_update left it with a column scale other than 1, and Phi as
 * get_mttkrp_result shows it. */
static void test_factor_operations(void **state)
{
    const th_gpu_test_plugins *p = *state;
    GRand *rng = g_rand_new_with_seed(5);
    const uint32_t ranks[] = {16, 7};
    /* case 2 has empty slices: Phi's absent rows are zeros. */
    const size_t fcases[] = {0, 2};
    for (size_t fi = 0; fi < G_N_ELEMENTS(fcases); ++fi) {
        g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[fcases[fi]], 80 + fi);
        for (size_t ri = 0; ri < G_N_ELEMENTS(ranks); ++ri) {
            const uint32_t R = ranks[ri];
            double **factors = positive_factors(t, R, rng);
            for (uint32_t g = 0; g < TH_GPU_TEST_N_PLUGINS; ++g) {
                const th_plugin *pl = p->gpu[g];
                th_instance *inst = th_test_create_instance(pl, NULL);
                th_test_load_and_set(pl, inst, t, R, factors);
                char err[TH_ERROR_SIZE] = "";
                const uint32_t mode = 0;
                const size_t I = t->dims[mode], n = I * R;
                /* A column scale other than 1: an ALS update with the max norm. */
                g_autofree double *w = g_new0(double, (size_t)R * R);
                for (uint32_t c = 0; c < R; ++c)
                    w[(size_t)c * R + c] = 40.0 + c;
                double lambda[64], gram[64 * 64], inner[64];
                th_als_output out = {.struct_size = sizeof out, .lambda = lambda,
                                     .gram = gram, .inner = inner};
                th_test_assert_ok(pl->entry.mttkrp(inst, mode, err), err);
                th_test_assert_ok(pl->entry.als_update(inst, mode, w, TH_NORM_MAX, &out, err),
                                  err);
                g_autofree double *A = g_new(double, n);
                g_autofree double *want = g_new(double, n);
                g_autofree double *got = g_new(double, n);
                g_autofree double *phi = g_new(double, n);
                double vec[64], vwant[64], violation = 0.0;
                uint64_t count = 0;
                g_autofree char *what = g_strdup_printf("%s, rank %u, %s", pl->info->id, R,
                                                        cases[fcases[fi]].name);

                /* SCALE_COLUMNS */
                th_test_assert_ok(pl->entry.get_factor(inst, mode, A, err), err);
                for (uint32_t c = 0; c < R; ++c)
                    vec[c] = 0.5 + c;
                th_test_assert_ok(call_update(pl, inst, mode, TH_FACTOR_SCALE_COLUMNS, vec, 0,
                                              0, &violation, &count, err),
                                  err);
                for (size_t k = 0; k < n; ++k)
                    want[k] = A[k] * vec[k % R];
                th_test_assert_ok(pl->entry.get_factor(inst, mode, got, err), err);
                assert_rel(got, want, n, "SCALE_COLUMNS");

                /* NORMALIZE_1 (one column zeroed first: it stays zero). */
                vec[0] = 0.0;
                th_test_assert_ok(call_update(pl, inst, mode, TH_FACTOR_SCALE_COLUMNS, vec, 0,
                                              0, &violation, &count, err),
                                  err);
                th_test_assert_ok(pl->entry.get_factor(inst, mode, A, err), err);
                th_test_assert_ok(call_update(pl, inst, mode, TH_FACTOR_NORMALIZE_1, vec, 0, 0,
                                              &violation, &count, err),
                                  err);
                for (uint32_t c = 0; c < R; ++c) {
                    vwant[c] = 0.0;
                    for (size_t i = 0; i < I; ++i)
                        vwant[c] += fabs(A[i * R + c]);
                }
                assert_true(vec[0] == 0.0);
                assert_rel(vec, vwant, R, "NORMALIZE_1 norms");
                for (size_t k = 0; k < n; ++k)
                    want[k] = vwant[k % R] > 0 ? A[k] / vwant[k % R] : A[k];
                th_test_assert_ok(pl->entry.get_factor(inst, mode, got, err), err);
                assert_rel(got, want, n, "NORMALIZE_1 factor");

                /* MULTIPLICATIVE_UPDATE on the Poisson ratio, both outcomes. */
                double reduced = 0.0;
                th_test_assert_ok(call_gen(pl, inst, mode, TH_ELEMENTWISE_POISSON_RATIO,
                                           TH_REDUCTION_NONE, 1e-10, NULL, &reduced, err),
                                  err);
                th_test_assert_ok(pl->entry.get_mttkrp_result(inst, mode, phi, err), err);
                th_test_assert_ok(pl->entry.get_factor(inst, mode, A, err), err);
                double vmax = 0.0;
                for (size_t k = 0; k < n; ++k) {
                    const double v = fabs(fmin(A[k], 1.0 - phi[k]));
                    vmax = v > vmax ? v : vmax;
                }
                th_test_assert_ok(call_update(pl, inst, mode, TH_FACTOR_MULTIPLICATIVE_UPDATE,
                                              NULL, vmax * 2.0, 0, &violation, &count, err),
                                  err);
                if (!(fabs(violation - vmax) <= TOLERANCE * vmax))
                    fail_msg("%s: violation %.9g, expected %.9g", what, violation, vmax);
                assert_int_equal(count, 0);
                th_test_assert_ok(pl->entry.get_factor(inst, mode, got, err), err);
                assert_rel(got, A, n, "MULTIPLICATIVE_UPDATE above tolerance (unchanged)");
                th_test_assert_ok(call_update(pl, inst, mode, TH_FACTOR_MULTIPLICATIVE_UPDATE,
                                              NULL, vmax * 0.5, 0, &violation, &count, err),
                                  err);
                assert_int_equal(count, 1);
                for (size_t k = 0; k < n; ++k)
                    want[k] = A[k] * phi[k];
                th_test_assert_ok(pl->entry.get_factor(inst, mode, got, err), err);
                assert_rel(got, want, n, "MULTIPLICATIVE_UPDATE");

                /* RAISE_INADMISSIBLE_ZEROS: zero some entries first. */
                for (uint32_t c = 0; c < R; ++c)
                    vec[c] = c % 3 == 0 ? 0.0 : 1.0;
                th_test_assert_ok(call_update(pl, inst, mode, TH_FACTOR_SCALE_COLUMNS, vec, 0,
                                              0, &violation, &count, err),
                                  err);
                th_test_assert_ok(pl->entry.get_factor(inst, mode, A, err), err);
                const double tol = 1e-4, offset = 0.125;
                uint64_t want_count = 0, ambiguous = 0;
                for (size_t k = 0; k < n; ++k) {
                    want[k] = A[k];
                    if (fabs(phi[k] - RAISE_THRESHOLD) < 1e-4 || fabs(A[k] - tol) < 1e-8)
                        ++ambiguous;
                    if (phi[k] > RAISE_THRESHOLD && A[k] < tol) {
                        want[k] += offset;
                        ++want_count;
                    }
                }
                th_test_assert_ok(call_update(pl, inst, mode,
                                              TH_FACTOR_RAISE_INADMISSIBLE_ZEROS, NULL, tol,
                                              offset, &violation, &count, err),
                                  err);
                if (count + ambiguous < want_count || count > want_count + ambiguous)
                    fail_msg("%s: RAISE_INADMISSIBLE_ZEROS changed %llu entries, expected "
                             "%llu (%llu ambiguous)",
                             what, (unsigned long long)count, (unsigned long long)want_count,
                             (unsigned long long)ambiguous);
                th_test_assert_ok(pl->entry.get_factor(inst, mode, got, err), err);
                if (ambiguous == 0)
                    assert_rel(got, want, n, "RAISE_INADMISSIBLE_ZEROS");
                printf("%s: RAISE_INADMISSIBLE_ZEROS changed %llu of %zu entries\n", what,
                       (unsigned long long)count, n);
                pl->entry.destroy(inst);
            }
            th_test_free_factors(factors, t->nmodes);
        }
    }
    g_rand_free(rng);
}

static void expect(th_status got, th_status want, const char *err, const char *needle,
                   const char *what)
{
    if (got != want || (needle && strstr(err, needle) == NULL))
        fail_msg("%s gave %s \"%s\", expected %s%s%s", what, th_status_name(got), err,
                 th_status_name(want), needle ? " naming " : "", needle ? needle : "");
}

static void test_generalized_errors(void **state)
{
    const th_gpu_test_plugins *p = *state;
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[0], 5);
    th_coo_tensor view;
    th_test_coo_view(t, &view);
    double vec[8] = {1, 1, 1, 1, 1, 1, 1, 1}, violation = 0.0, reduced = 0.0;
    uint64_t count = 0;
    for (uint32_t g = 0; g < TH_GPU_TEST_N_PLUGINS; ++g) {
        const th_plugin *pl = p->gpu[g];
        assert_non_null(pl->entry.generalized_mttkrp);
        assert_non_null(pl->entry.factor_update);
        th_instance *inst = th_test_create_instance(pl, NULL);
        char err[TH_ERROR_SIZE] = "";
        expect(call_gen(pl, inst, 0, 1, 1, 1e-10, NULL, &reduced, err), TH_ERR_BAD_STATE, err,
               "no tensor", "generalized_mttkrp before load");
        expect(call_gen(pl, inst, TH_MODE_NONE, 0, 1, 0, NULL, &reduced, err),
               TH_ERR_BAD_STATE, err, "no tensor", "generalized_mttkrp TH_MODE_NONE before load");
        expect(call_update(pl, inst, 0, TH_FACTOR_NORMALIZE_1, vec, 0, 0, &violation, &count,
                           err),
               TH_ERR_BAD_STATE, err, "no tensor", "factor_update before load");
        th_test_assert_ok(pl->entry.load_tensor(inst, &view, 8, err), err);
        /* A short io. */
        th_generalized_mttkrp_io gio = {.struct_size = TH_GENERALIZED_MTTKRP_IO_V1_4_SIZE - 1};
        expect(pl->entry.generalized_mttkrp(inst, &gio, err), TH_ERR_INVALID_ARGUMENT, err,
               "shorter than", "generalized_mttkrp short io");
        th_factor_update_io fio = {.struct_size = TH_FACTOR_UPDATE_IO_V1_4_SIZE - 1};
        expect(pl->entry.factor_update(inst, &fio, err), TH_ERR_INVALID_ARGUMENT, err,
               "shorter than", "factor_update short io");
        expect(pl->entry.generalized_mttkrp(inst, NULL, err), TH_ERR_INVALID_ARGUMENT, err,
               "NULL", "generalized_mttkrp NULL io");
        /* Modes, functions, reductions, operations. */
        expect(call_gen(pl, inst, 3, 1, 0, 1e-10, NULL, &reduced, err),
               TH_ERR_INVALID_ARGUMENT, err, "mode 3", "generalized_mttkrp mode 3");
        expect(call_gen(pl, inst, 0, 7, 0, 1e-10, NULL, &reduced, err), TH_ERR_UNSUPPORTED,
               err, "elementwise function 7", "generalized_mttkrp elementwise 7");
        expect(call_gen(pl, inst, 0, 1, 9, 1e-10, NULL, &reduced, err), TH_ERR_UNSUPPORTED,
               err, "reduction 9", "generalized_mttkrp reduction 9");
        expect(call_gen(pl, inst, TH_MODE_NONE, 0, 9, 0, NULL, &reduced, err),
               TH_ERR_UNSUPPORTED, err, "reduction 9", "TH_MODE_NONE reduction 9");
        expect(call_gen(pl, inst, 0, TH_ELEMENTWISE_POISSON_RATIO, 0, 0.0, NULL, &reduced, err),
               TH_ERR_INVALID_ARGUMENT, err, "epsilon", "POISSON_RATIO epsilon 0");
        expect(call_gen(pl, inst, 0, TH_ELEMENTWISE_POISSON_RATIO, 0, -1.0, NULL, &reduced,
                        err),
               TH_ERR_INVALID_ARGUMENT, err, "epsilon", "POISSON_RATIO epsilon -1");
        /* RESIDUAL does not divide: epsilon 0 is fine. */
        th_test_assert_ok(call_gen(pl, inst, 1, TH_ELEMENTWISE_RESIDUAL, 0, 0.0, NULL, &reduced,
                                   err),
                          err);
        /* TH_MODE_NONE without a reduction: nothing, reduced 0. */
        reduced = 5.0;
        th_test_assert_ok(call_gen(pl, inst, TH_MODE_NONE, 0, 0, 0.0, NULL, &reduced, err), err);
        assert_true(reduced == 0.0);
        expect(call_update(pl, inst, 3, TH_FACTOR_NORMALIZE_1, vec, 0, 0, &violation, &count,
                           err),
               TH_ERR_INVALID_ARGUMENT, err, "mode 3", "factor_update mode 3");
        expect(call_update(pl, inst, 0, 0, vec, 0, 0, &violation, &count, err),
               TH_ERR_UNSUPPORTED, err, "operation 0", "factor_update operation 0");
        expect(call_update(pl, inst, 0, 9, vec, 0, 0, &violation, &count, err),
               TH_ERR_UNSUPPORTED, err, "operation 9", "factor_update operation 9");
        expect(call_update(pl, inst, 0, TH_FACTOR_SCALE_COLUMNS, NULL, 0, 0, &violation, &count,
                           err),
               TH_ERR_INVALID_ARGUMENT, err, "vector", "SCALE_COLUMNS NULL vector");
        /* Phi before a result of that mode (mode 1 has one above; mode 0 not). */
        expect(call_update(pl, inst, 0, TH_FACTOR_MULTIPLICATIVE_UPDATE, NULL, 0, 0, &violation,
                           &count, err),
               TH_ERR_BAD_STATE, err, "MTTKRP result", "MULTIPLICATIVE_UPDATE before a result");
        expect(call_update(pl, inst, 2, TH_FACTOR_RAISE_INADMISSIBLE_ZEROS, NULL, 0, 0,
                           &violation, &count, err),
               TH_ERR_BAD_STATE, err, "MTTKRP result", "RAISE_INADMISSIBLE_ZEROS before a result");
        th_test_assert_ok(call_update(pl, inst, 1, TH_FACTOR_MULTIPLICATIVE_UPDATE, NULL, 1e300,
                                      0, &violation, &count, err),
                          err);
        pl->entry.destroy(inst);

        /* Several ranks (virtual, on device 0): not implemented. */
        inst = th_test_create_instance(pl, "devices", "0,0", NULL);
        th_test_assert_ok(pl->entry.load_tensor(inst, &view, 8, err), err);
        expect(call_gen(pl, inst, 0, 1, 0, 1e-10, NULL, &reduced, err), TH_ERR_UNSUPPORTED, err,
               "multi-GPU generalized MTTKRP is not implemented", "generalized_mttkrp on 2 ranks");
        expect(call_update(pl, inst, 0, TH_FACTOR_NORMALIZE_1, vec, 0, 0, &violation, &count,
                           err),
               TH_ERR_UNSUPPORTED, err, "multi-GPU generalized MTTKRP is not implemented",
               "factor_update on 2 ranks");
        pl->entry.destroy(inst);
    }
}

int main(void)
{
    if (!th_gpu_test_have_device())
        return 77;
    th_gpu_test_apply_filter();
    /* Result rows the MTTKRP never writes start as NaN (see test_gpu_plugins). */
    g_setenv("TH_GPU_POISON_RESULTS", "1", TRUE);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generalized_errors),
        cmocka_unit_test(test_value_equals_mttkrp),
        cmocka_unit_test(test_mode_none_reduction_only),
        cmocka_unit_test(test_factor_operations),
        cmocka_unit_test(test_generalized_matches_oracle),
    };
    return cmocka_run_group_tests(tests, th_gpu_test_setup_plugins, th_gpu_test_teardown_plugins);
}
