/* The GPU plugins' regularised and constrained als_sweep (ABI 1.6: the
 * io's constraints, l1, ridge, scale and hals_* fields) against the same
 * plugin's per-mode path, which test_gpu_nonneg_update and test_gpu_sweep
 * check against double-precision oracles: per mode, mttkrp(); then for a
 * mode updated by coordinate descent (nonnegative, or l1 > 0)
 * als_update_nonneg() with v = the Hadamard of the other modes' Grams, the
 * same ridge, l1, constraint, passes and tolerance, and scale = the lambda
 * of the mode updated before it (the sweep's scale for the first); for
 * any other mode als_update() with w = (V + ridge I)^-1 from the host's
 * solve. Both start from the same factors, Grams and weights; after each
 * of two iterations (2-norm, then the max-norm) the factors must agree to
 * 1e-4 (relative, Frobenius: fp32 factors, and W rounded to fp32 on both
 * paths), the weights and Grams likewise. Every setting runs on one pair
 * of instances in turn, so the sweep's captured graphs are dropped and
 * captured again as its settings change. Then the 1.6 fields' errors, and
 * a 1.1-sized io whose 1.6 fields hold garbage: the plain sweep.
 *
 * Needs a CUDA device: without one it prints "SKIPPED: ..." and exits 77.
 * TH_GPU_TEST_QUICK=1 runs a small subset (for compute-sanitizer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "cpd/dense.h"
#include "gpu_test_support.h"
#include "test_support.h"

#define TOLERANCE 1e-4
#define MAX_RANK 64u
#define MAX_MODES 4u
#define ITERATIONS 2u

static const th_gpu_test_case cases[] = {
    {"3 modes, skewed", 3, {2000, 1500, 900}, 30011, {1.0, 0, 0.5}},
    {"4 modes, empty rows", 4, {600, 300, 5000, 700}, 20011, {0, 2.0, 1.2, 0.8}},
};

typedef struct setting {
    const char *name;
    int32_t constraints[MAX_MODES];
    double l1_fraction[MAX_MODES]; /* of the mode's mean |M| at the start */
    double ridge_fraction;         /* of the smallest mean diagonal of a V at the start */
    uint32_t sweeps;
    double tolerance;
} setting;

static const setting settings[] = {
    {"ridge, every mode unconstrained", {0, 0, 0, 0}, {0, 0, 0, 0}, 0.5, 1, 0.0},
    {"every mode nonnegative", {1, 1, 1, 1}, {0, 0, 0, 0}, 0.0, 5, 1e-8},
    {"mixed, l1 on an unconstrained mode, ridge", {1, 0, 1, 0}, {0.0, 0.05, 0.02, 0.0}, 0.1, 5,
     1e-8},
    {"nonnegative, l1, 20 passes at 1e-3", {1, 1, 1, 1}, {0.01, 0.01, 0.01, 0.01}, 0.0, 20, 1e-3},
};

/* Uniform in [0, 1): nonnegative, so the nonnegative modes start feasible. */
static double **start_factors(const th_sptensor *t, uint32_t rank, GRand *rng)
{
    double **f = g_new0(double *, t->nmodes);
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        const size_t n = (size_t)t->dims[m] * rank;
        f[m] = g_new(double, n);
        for (size_t k = 0; k < n; ++k)
            f[m][k] = (double)(float)g_rand_double_range(rng, 0.0, 1.0);
    }
    return f;
}

/* One path's state: the Grams and weights it carries between calls. */
typedef struct path {
    double *grams[MAX_MODES];
    double lambda[MAX_RANK], inner[MAX_RANK];
} path;

static void path_start(path *p, double *const *f0, const th_sptensor *t, uint32_t R,
                       const double *scale0)
{
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        if (!p->grams[m])
            p->grams[m] = g_new(double, (size_t)R * R);
        th_dense_gram(f0[m], t->dims[m], R, p->grams[m]);
    }
    memcpy(p->lambda, scale0, sizeof(double) * R);
}

static void path_clear(path *p)
{
    for (uint32_t m = 0; m < MAX_MODES; ++m)
        g_free(p->grams[m]);
}

/* The regularisation of a setting in absolute terms, from the start. */
typedef struct weights {
    double l1[MAX_MODES];
    double ridge;
} weights;

static weights weights_for(const th_plugin *pl, th_instance *inst, const th_sptensor *t,
                           uint32_t R, const path *start, const setting *s)
{
    weights w;
    g_autofree double *v = g_new(double, (size_t)R * R);
    double smallest = INFINITY;
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        th_dense_hadamard_except((double *const *)start->grams, t->nmodes, m, R, v);
        double diag = 0.0;
        for (uint32_t r = 0; r < R; ++r)
            diag += v[(size_t)r * R + r] / R;
        smallest = fmin(smallest, diag);
        g_autofree double *M = g_new(double, (size_t)t->dims[m] * R);
        th_gpu_test_run_mode(pl, inst, t, R, m, M);
        double mean = 0.0;
        for (size_t k = 0; k < (size_t)t->dims[m] * R; ++k)
            mean += isnan(M[k]) ? 0.0 : fabs(M[k]);
        mean /= (double)t->dims[m] * R;
        w.l1[m] = s->l1_fraction[m] * mean;
    }
    w.ridge = s->ridge_fraction * smallest;
    return w;
}

static int coordinate_mode(const setting *s, const weights *w, uint32_t m)
{
    return s->constraints[m] == TH_CONSTRAINT_NONNEG || w->l1[m] > 0.0;
}

/* The per-mode path of one iteration. */
static void per_mode_iteration(const th_plugin *pl, th_instance *inst, const th_sptensor *t,
                               uint32_t R, const setting *s, const weights *w, int32_t norm,
                               path *p)
{
    char err[TH_ERROR_SIZE] = "";
    const size_t rr = (size_t)R * R;
    g_autofree double *v = g_new(double, rr);
    g_autofree double *winv = g_new(double, rr);
    double scale[MAX_RANK];
    for (uint32_t mode = 0; mode < t->nmodes; ++mode) {
        th_test_assert_ok(pl->entry.mttkrp(inst, mode, err), err);
        th_dense_hadamard_except(p->grams, t->nmodes, mode, R, v);
        memcpy(scale, p->lambda, sizeof(double) * R);
        th_als_output out = {.struct_size = sizeof out, .lambda = p->lambda,
                             .gram = p->grams[mode], .inner = p->inner};
        if (coordinate_mode(s, w, mode)) {
            th_nonneg_update_io io = {.struct_size = sizeof io,
                                      .mode = mode,
                                      .v = v,
                                      .scale = scale,
                                      .tolerance = s->tolerance,
                                      .sweeps = s->sweeps,
                                      .norm = norm,
                                      .ridge = w->ridge,
                                      .l1 = w->l1[mode],
                                      .unbounded = s->constraints[mode] == TH_CONSTRAINT_NONE};
            th_test_assert_ok(pl->entry.als_update_nonneg(inst, &io, &out, err), err);
        } else {
            for (uint32_t r = 0; r < R; ++r)
                v[(size_t)r * R + r] += w->ridge;
            assert_int_equal(th_dense_spd_pinv(v, R, winv), 0);
            th_test_assert_ok(pl->entry.als_update(inst, mode, winv, norm, &out, err), err);
        }
    }
}

static void sweep_iteration(const th_plugin *pl, th_instance *inst, const th_sptensor *t,
                            uint32_t R, const setting *s, const weights *w, int32_t norm,
                            path *p)
{
    char err[TH_ERROR_SIZE] = "";
    double scale[MAX_RANK];
    memcpy(scale, p->lambda, sizeof(double) * R);
    th_als_sweep_io io = {.struct_size = sizeof io,
                          .norm = norm,
                          .nmodes = t->nmodes,
                          .grams = p->grams,
                          .lambda = p->lambda,
                          .inner = p->inner,
                          .constraints = s->constraints,
                          .l1 = w->l1,
                          .ridge = w->ridge,
                          .scale = scale,
                          .hals_tolerance = s->tolerance,
                          .hals_sweeps = s->sweeps};
    th_test_assert_ok(pl->entry.als_sweep(inst, &io, err), err);
    assert_int_equal(io.modes_done, t->nmodes);
}

static void expect_close(const double *got, const double *want, size_t n, const char *what)
{
    const double rel = th_test_relative_error(got, want, n);
    if (!(rel <= TOLERANCE))
        fail_msg("%s: relative error %.3g", what, rel);
}

static void compare(const th_plugin *pl, th_instance *a, th_instance *b, const th_sptensor *t,
                    uint32_t R, const path *pa, const path *pb, const setting *s,
                    const char *context)
{
    char err[TH_ERROR_SIZE] = "";
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        const size_t n = (size_t)t->dims[m] * R;
        g_autofree double *fa = g_new(double, n);
        g_autofree double *fb = g_new(double, n);
        th_test_assert_ok(pl->entry.get_factor(a, m, fa, err), err);
        th_test_assert_ok(pl->entry.get_factor(b, m, fb, err), err);
        g_autofree char *what = g_strdup_printf("%s: mode %u's factor", context, m);
        expect_close(fb, fa, n, what);
        if (s->constraints[m] == TH_CONSTRAINT_NONNEG)
            for (size_t k = 0; k < n; ++k)
                if (!(fb[k] >= 0.0))
                    fail_msg("%s: mode %u entry %zu is %g", context, m, k, fb[k]);
        g_autofree char *gwhat = g_strdup_printf("%s: mode %u's Gram", context, m);
        expect_close(pb->grams[m], pa->grams[m], (size_t)R * R, gwhat);
    }
    g_autofree char *lwhat = g_strdup_printf("%s: lambda", context);
    expect_close(pb->lambda, pa->lambda, R, lwhat);
}

static void check_plugin(const th_plugin *pl, const th_sptensor *t, const char *name,
                         uint32_t R, GRand *rng, unsigned *checked)
{
    double **f0 = start_factors(t, R, rng);
    double scale0[MAX_RANK];
    for (uint32_t r = 0; r < R; ++r)
        scale0[r] = 0.5 + 0.125 * (r % 7);
    th_instance *a = th_test_create_instance(pl, NULL);
    th_instance *b = th_test_create_instance(pl, NULL);
    th_test_load_and_set(pl, a, t, R, f0);
    th_test_load_and_set(pl, b, t, R, f0);
    path pa = {0}, pb = {0};
    char err[TH_ERROR_SIZE] = "";
    for (size_t si = 0; si < G_N_ELEMENTS(settings); ++si) {
        const setting *s = &settings[si];
        path_start(&pa, f0, t, R, scale0);
        path_start(&pb, f0, t, R, scale0);
        for (uint32_t m = 0; m < t->nmodes; ++m) {
            th_test_assert_ok(pl->entry.set_factor(a, m, f0[m], err), err);
            th_test_assert_ok(pl->entry.set_factor(b, m, f0[m], err), err);
        }
        const weights w = weights_for(pl, a, t, R, &pa, s);
        for (uint32_t it = 0; it < ITERATIONS; ++it) {
            const int32_t norm = it == 0 ? TH_NORM_2 : TH_NORM_MAX;
            per_mode_iteration(pl, a, t, R, s, &w, norm, &pa);
            sweep_iteration(pl, b, t, R, s, &w, norm, &pb);
            g_autofree char *context = g_strdup_printf(
                "%s: %s, rank %u, %s, iteration %u", pl->info->id, name, R, s->name, it + 1);
            compare(pl, a, b, t, R, &pa, &pb, s, context);
            ++*checked;
        }
    }
    path_clear(&pa);
    path_clear(&pb);
    pl->entry.destroy(a);
    pl->entry.destroy(b);
    th_test_free_factors(f0, t->nmodes);
}

static void test_regularised_sweep_matches_per_mode(void **state)
{
    const th_gpu_test_plugins *p = *state;
    const int quick = th_gpu_test_quick();
    const uint32_t all_ranks[] = {7, 16, 32, 64};
    const uint32_t quick_ranks[] = {7, 32};
    const uint32_t *ranks = quick ? quick_ranks : all_ranks;
    const size_t nranks = quick ? G_N_ELEMENTS(quick_ranks) : G_N_ELEMENTS(all_ranks);
    const size_t ncases = quick ? 1 : G_N_ELEMENTS(cases);
    const uint32_t nplugins = quick ? 1 : TH_GPU_TEST_N_PLUGINS;
    GRand *rng = g_rand_new_with_seed(1616);
    unsigned checked = 0;
    for (size_t ci = 0; ci < ncases; ++ci) {
        g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[ci], 60 + ci);
        for (size_t ri = 0; ri < nranks; ++ri)
            for (uint32_t g = 0; g < nplugins; ++g)
                check_plugin(p->gpu[g], t, cases[ci].name, ranks[ri], rng, &checked);
    }
    g_rand_free(rng);
    print_message("regularised sweep: %u iterations checked against the per-mode path\n",
                  checked);
}

static void expect_sweep_error(const th_plugin *pl, th_instance *inst, th_als_sweep_io *io,
                               const char *needle)
{
    char err[TH_ERROR_SIZE] = "";
    assert_int_equal(pl->entry.als_sweep(inst, io, err), TH_ERR_INVALID_ARGUMENT);
    if (!strstr(err, needle))
        fail_msg("als_sweep's message '%s' lacks '%s'", err, needle);
}

static void test_regularised_sweep_errors(void **state)
{
    const th_gpu_test_plugins *p = *state;
    const th_plugin *pl = p->gpu[0];
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[0], 70);
    const uint32_t R = 8;
    GRand *rng = g_rand_new_with_seed(7);
    double **f0 = start_factors(t, R, rng);
    th_instance *inst = th_test_create_instance(pl, NULL);
    th_test_load_and_set(pl, inst, t, R, f0);
    double scale0[MAX_RANK];
    for (uint32_t r = 0; r < R; ++r)
        scale0[r] = 1.0;
    path ps = {0};
    path_start(&ps, f0, t, R, scale0);
    int32_t constraints[MAX_MODES] = {1, 0, 5};
    double l1[MAX_MODES] = {0.0, 0.0, 0.0};
    th_als_sweep_io io = {.struct_size = sizeof io,
                          .norm = TH_NORM_2,
                          .nmodes = t->nmodes,
                          .grams = ps.grams,
                          .lambda = ps.lambda,
                          .inner = ps.inner,
                          .constraints = constraints,
                          .l1 = l1,
                          .hals_sweeps = 5};
    expect_sweep_error(pl, inst, &io, "constraints[2]");
    constraints[2] = TH_CONSTRAINT_NONE;
    l1[1] = NAN;
    expect_sweep_error(pl, inst, &io, "l1[1]");
    l1[1] = 0.0;
    io.ridge = -1.0;
    expect_sweep_error(pl, inst, &io, "ridge");
    io.ridge = 0.0;
    io.hals_sweeps = 0;
    expect_sweep_error(pl, inst, &io, "hals_sweeps");
    io.hals_sweeps = 5;
    io.hals_tolerance = INFINITY;
    expect_sweep_error(pl, inst, &io, "hals_tolerance");
    io.hals_tolerance = 0.0;
    io.scale = ps.lambda;
    expect_sweep_error(pl, inst, &io, "scale");

    /* A 1.1-sized io: its tail is not read, whatever it holds; the plain
     * sweep runs (the constrained one would clamp mode 0 at 0, and the
     * garbage hals_sweeps 0 would be an error). */
    char err[TH_ERROR_SIZE] = "";
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        double *negated = g_memdup2(f0[m], sizeof(double) * t->dims[m] * R);
        for (size_t k = 0; k < (size_t)t->dims[m] * R; ++k)
            negated[k] -= 0.5;
        th_test_assert_ok(pl->entry.set_factor(inst, m, negated, err), err);
        th_dense_gram(negated, t->dims[m], R, ps.grams[m]);
        g_free(negated);
    }
    io.struct_size = (uint32_t)TH_ALS_SWEEP_IO_V1_1_SIZE;
    io.hals_sweeps = 0;
    io.ridge = -1.0;
    io.scale = NULL;
    th_test_assert_ok(pl->entry.als_sweep(inst, &io, err), err);
    assert_int_equal(io.modes_done, t->nmodes);
    g_autofree double *a0 = g_new(double, (size_t)t->dims[0] * R);
    th_test_assert_ok(pl->entry.get_factor(inst, 0, a0, err), err);
    size_t negative = 0;
    for (size_t k = 0; k < (size_t)t->dims[0] * R; ++k)
        negative += a0[k] < 0.0;
    assert_true(negative > 0);

    path_clear(&ps);
    pl->entry.destroy(inst);
    th_test_free_factors(f0, t->nmodes);
    g_rand_free(rng);
}

int main(void)
{
    if (!th_gpu_test_have_device())
        return 77;
    th_gpu_test_apply_filter();
    /* Result rows the MTTKRP never writes start as NaN: the passes must
     * read them as zero. */
    g_setenv("TH_GPU_POISON_RESULTS", "1", TRUE);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regularised_sweep_matches_per_mode),
        cmocka_unit_test(test_regularised_sweep_errors),
    };
    return cmocka_run_group_tests(tests, th_gpu_test_setup_plugins,
                                  th_gpu_test_teardown_plugins);
}
