/* The GPU plugins' als_update_nonneg (ABI 1.5, nonnegative CP's update;
 * 1.6's ridge, l1 and unbounded) against a double-precision host oracle
 * written from plugin.h's words, through the plugin ABI.
 *
 * The oracle: M the mode's MTTKRP result and A the factor as the plugin
 * shows them (get_mttkrp_result, get_factor: the fp32 values it holds),
 * A(:,r) *= scale[r]; passes of hierarchical ALS in double, every row's
 * columns in order where V(r,r) != 0, each pass's squared change recorded,
 * stopping after the pass whose change is at most tolerance times the
 * first's; then lambda (2-norm, or max(max |a|, 1)), A / lambda, the Gram
 * and inner[r] = sum_i M(i,r) A(i,r). Each plugin's result must have
 *   - the oracle's pass count, or one that differs where rounding may
 *     decide it: the pass that ended one of them has a change within a
 *     factor 4 of tolerance times the first (the plugin adds the squared
 *     changes of fp32 values), or at most 1e-9 of the first (with
 *     tolerance 0: the fp32 factor has stopped moving where the double one
 *     still creeps);
 *   - every entry >= 0 (the factor, after the update);
 *   - the factor within 1e-4 of the oracle's (relative, Frobenius), lambda
 *     within 1e-4 of each column's, the Gram within 1e-4 of
 *     sqrt(G(r,r) G(q,q)), inner within 1e-4 of ||M(:,r)|| ||A(:,r)||:
 *     fp32 storage of A after every entry's update and of M, against
 *     double throughout;
 *   - the other modes' factors as they were.
 * The factors start with negative entries (the first pass's max) and are
 * held with column scales other than 1 (an als_update of every mode
 * first), so the MTTKRP result carries a result scale too; 1.6's ridge
 * and l1 (soft thresholds at 0 with the bound, on both sides without it)
 * in four settings of mode 0; V is the
 * Hadamard of the other modes' Grams as the plugin shows them, one case
 * with a column of V zeroed (V(r,r) = 0: the column only scaled).
 * Ranks 5, 16, 32, 64 and 128 (the kernel's register paths of 8, 16, 32
 * and 64 columns and its local-memory path; 5 not a multiple of 4: scalar
 * rows), norms 2 and max, scale NULL and given, 1 and 5 sweeps, tolerance
 * 0 and 1e-8, and 20 sweeps at tolerance 1e-3 (the stop test met early,
 * the later passes returning at once) and 20 at 0 (beyond the 8 passes
 * launched between reads of the stop flag); a mode with empty rows (the
 * MTTKRP leaves them unwritten: poisoned with NaN here); 3 and 4 modes;
 * a tall mode of 300007 rows at ranks 5, 16 and 32 (the update's sums on
 * the tensor cores at 16 and 32).
 * Then nonnegative CP-ALS, 12 iterations of mttkrp + als_update_nonneg per
 * mode on gpu-adaptive, against the same iterations on cpu-reference with
 * the host's update (its MTTKRP result and factor downloaded, the oracle,
 * set_factor): the fits within 1e-5 at every iteration. And the errors.
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
#include <float.h>
#include <math.h>

#include "gpu_test_support.h"
#include "test_support.h"

#define VALUE_TOLERANCE 1e-4
/* With l1 > 0: the shrink leaves many entries at or near 0, so the factor
 * is small against the terms of n = M - A V + V(r,r) A whose fp32
 * rounding it inherits (measured 1.75e-4 at l1 = 0.05 of mean |M|). */
#define L1_VALUE_TOLERANCE 1e-3
#define FIT_TOLERANCE 1e-5
#define MAX_RANK 128u
#define MAX_SWEEPS 20u

static const th_gpu_test_case cases[] = {
    {"3 modes, uniform", 3, {300, 200, 150}, 20000, {0, 0, 0}},
    {"3 modes, empty rows", 3, {2000, 300, 200}, 30000, {2.2, 0.3, 0}},
    {"4 modes, skewed", 4, {160, 400, 140, 150}, 15000, {1.0, 1.5, 0, 0.5}},
};

/* fp32 values uniform in [-0.25, 1): some entries negative. */
static double **start_factors(const th_sptensor *t, uint32_t rank, GRand *rng)
{
    double **f = g_new0(double *, t->nmodes);
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        const size_t n = (size_t)t->dims[m] * rank;
        f[m] = g_new(double, n);
        for (size_t k = 0; k < n; ++k)
            f[m][k] = (double)(float)g_rand_double_range(rng, -0.25, 1.0);
    }
    return f;
}

static void gram_of(const double *a, uint64_t rows, uint32_t R, double *g)
{
    memset(g, 0, sizeof(double) * R * R);
    for (uint64_t i = 0; i < rows; ++i)
        for (uint32_t p = 0; p < R; ++p)
            for (uint32_t q = 0; q < R; ++q)
                g[(size_t)p * R + q] += a[i * R + p] * a[i * R + q];
}

/* The oracle's result. */
typedef struct oracle {
    double *A; /* normalised */
    double lambda[MAX_RANK], gram[MAX_RANK * MAX_RANK], inner[MAX_RANK];
    double change[MAX_SWEEPS];
    uint32_t passes;
} oracle;

/* plugin.h's als_update_nonneg in double: `a` (rows x R, the factor
 * before) is overwritten with the normalised result. */
static void oracle_update(const double *m, const double *v, const double *scale, uint64_t rows,
                          uint32_t R, uint32_t sweeps, double tolerance, double ridge, double l1,
                          int unbounded, int max_norm, double *a, oracle *o)
{
    if (scale)
        for (uint64_t i = 0; i < rows; ++i)
            for (uint32_t r = 0; r < R; ++r)
                a[i * R + r] *= scale[r];
    double first = 0.0;
    o->passes = sweeps;
    for (uint32_t pass = 0; pass < sweeps; ++pass) {
        double change = 0.0;
        for (uint64_t i = 0; i < rows; ++i)
            for (uint32_t r = 0; r < R; ++r) {
                const double vrr = v[(size_t)r * R + r], d = vrr + ridge;
                if (d == 0.0)
                    continue;
                double product = 0.0;
                for (uint32_t q = 0; q < R; ++q)
                    product += a[i * R + q] * v[(size_t)q * R + r];
                const double n = m[i * R + r] - product + vrr * a[i * R + r];
                const double next = unbounded ? copysign(fmax(0.0, fabs(n) - l1), n) / d
                                              : fmax(0.0, n - l1) / d;
                change += (next - a[i * R + r]) * (next - a[i * R + r]);
                a[i * R + r] = next;
            }
        o->change[pass] = change;
        if (pass == 0)
            first = change;
        if (change <= tolerance * first) {
            o->passes = pass + 1;
            break;
        }
    }
    for (uint32_t r = 0; r < R; ++r) {
        double sumsq = 0.0, largest = 0.0;
        for (uint64_t i = 0; i < rows; ++i) {
            sumsq += a[i * R + r] * a[i * R + r];
            largest = fmax(largest, fabs(a[i * R + r]));
        }
        const double lam = max_norm ? fmax(largest, 1.0) : sqrt(sumsq);
        o->lambda[r] = lam;
        if (lam > 0.0)
            for (uint64_t i = 0; i < rows; ++i)
                a[i * R + r] /= lam;
    }
    gram_of(a, rows, R, o->gram);
    for (uint32_t r = 0; r < R; ++r) {
        o->inner[r] = 0.0;
        for (uint64_t i = 0; i < rows; ++i)
            o->inner[r] += m[i * R + r] * a[i * R + r];
    }
    o->A = a;
}

/* The ABI 1.6 fields of a call (zero: 1.5's update). */
typedef struct regularisation {
    double ridge, l1;
    uint32_t unbounded;
} regularisation;

static th_status call_nonneg_reg(const th_plugin *pl, th_instance *inst, uint32_t mode,
                                 const double *v, const double *scale, uint32_t sweeps,
                                 double tolerance, int32_t norm, const regularisation *reg,
                                 double *lambda, double *gram, double *inner, uint32_t *passes,
                                 char *err)
{
    th_nonneg_update_io io = {.struct_size = sizeof io, .mode = mode, .v = v, .scale = scale,
                              .tolerance = tolerance, .sweeps = sweeps, .norm = norm,
                              .ridge = reg->ridge, .l1 = reg->l1,
                              .unbounded = reg->unbounded};
    th_als_output out = {.struct_size = sizeof out, .lambda = lambda, .gram = gram,
                         .inner = inner};
    const th_status st = pl->entry.als_update_nonneg(inst, &io, &out, err);
    if (passes)
        *passes = io.passes;
    return st;
}

static th_status call_nonneg(const th_plugin *pl, th_instance *inst, uint32_t mode,
                             const double *v, const double *scale, uint32_t sweeps,
                             double tolerance, int32_t norm, double *lambda, double *gram,
                             double *inner, uint32_t *passes, char *err)
{
    th_nonneg_update_io io = {.struct_size = sizeof io, .mode = mode, .v = v, .scale = scale,
                              .tolerance = tolerance, .sweeps = sweeps, .norm = norm};
    th_als_output out = {.struct_size = sizeof out, .lambda = lambda, .gram = gram,
                         .inner = inner};
    const th_status st = pl->entry.als_update_nonneg(inst, &io, &out, err);
    if (passes)
        *passes = io.passes;
    return st;
}

/* Whether a pass count other than the oracle's is one rounding may give
 * (the header's rule). */
static gboolean passes_acceptable(const oracle *o, uint32_t got, double tolerance)
{
    if (got == o->passes)
        return TRUE;
    const uint32_t p = got < o->passes ? got : o->passes; /* the pass that ended one */
    if (p == 0)
        return FALSE;
    const double first = o->change[0], c = o->change[p - 1];
    if (c <= 1e-9 * first)
        return TRUE;
    return tolerance > 0.0 && c <= 4.0 * tolerance * first && c >= 0.25 * tolerance * first;
}

typedef struct setting {
    int32_t norm;
    int with_scale;
    uint32_t sweeps;
    double tolerance;
    int zero_column; /* V's row and column 1 zeroed */
    /* ABI 1.6: the ridge as a fraction of V's mean diagonal, l1 as one of
     * M's mean |entry|, and no bound. */
    double ridge_fraction, l1_fraction;
    uint32_t unbounded;
} setting;

/* The instance's state before each update: every factor f0 with its
 * column scale made other than 1 (mttkrp + als_update with the max norm
 * on every mode), then mode's MTTKRP. */
static void prepare_state(const th_plugin *pl, th_instance *inst, const th_sptensor *t,
                          double *const *f0, uint32_t R, uint32_t mode)
{
    char err[TH_ERROR_SIZE] = "";
    for (uint32_t m = 0; m < t->nmodes; ++m)
        th_test_assert_ok(pl->entry.set_factor(inst, m, f0[m], err), err);
    g_autofree double *w = g_new0(double, (size_t)R * R);
    for (uint32_t c = 0; c < R; ++c)
        w[(size_t)c * R + c] = 3.0 + 0.25 * c;
    double lambda[MAX_RANK], gram[MAX_RANK * MAX_RANK], inner[MAX_RANK];
    th_als_output out = {.struct_size = sizeof out, .lambda = lambda, .gram = gram,
                         .inner = inner};
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        th_test_assert_ok(pl->entry.mttkrp(inst, m, err), err);
        th_test_assert_ok(pl->entry.als_update(inst, m, w, TH_NORM_MAX, &out, err), err);
    }
    th_test_assert_ok(pl->entry.mttkrp(inst, mode, err), err);
}

static void check_setting(const th_plugin *pl, th_instance *inst, const th_sptensor *t,
                          double *const *f0, uint32_t R, uint32_t mode, const setting *s,
                          const char *name)
{
    char err[TH_ERROR_SIZE] = "";
    prepare_state(pl, inst, t, f0, R, mode);
    const uint64_t rows = t->dims[mode];
    const size_t n = (size_t)rows * R;
    /* What the plugin holds now: the factors, the result. */
    double **held = g_new0(double *, t->nmodes);
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        held[m] = g_new(double, (size_t)t->dims[m] * R);
        th_test_assert_ok(pl->entry.get_factor(inst, m, held[m], err), err);
    }
    g_autofree double *M = g_new(double, n);
    th_test_assert_ok(pl->entry.get_mttkrp_result(inst, mode, M, err), err);
    /* V: the Hadamard of the other Grams. */
    g_autofree double *V = g_new(double, (size_t)R * R);
    g_autofree double *G = g_new(double, (size_t)R * R);
    for (size_t k = 0; k < (size_t)R * R; ++k)
        V[k] = 1.0;
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        if (m == mode)
            continue;
        gram_of(held[m], t->dims[m], R, G);
        for (size_t k = 0; k < (size_t)R * R; ++k)
            V[k] *= G[k];
    }
    if (s->zero_column && R > 1)
        for (uint32_t q = 0; q < R; ++q)
            V[(size_t)q * R + 1] = V[(size_t)1 * R + q] = 0.0;
    double scale[MAX_RANK];
    for (uint32_t r = 0; r < R; ++r)
        scale[r] = 0.5 + 0.125 * (r % 7);

    regularisation reg = {0.0, 0.0, s->unbounded};
    for (uint32_t r = 0; r < R; ++r)
        reg.ridge += s->ridge_fraction * V[(size_t)r * R + r] / R;
    for (size_t k = 0; k < n; ++k)
        reg.l1 += isnan(M[k]) ? 0.0 : s->l1_fraction * fabs(M[k]) / (double)n;

    oracle *o = g_new0(oracle, 1);
    g_autofree double *a = g_memdup2(held[mode], sizeof(double) * n);
    oracle_update(M, V, s->with_scale ? scale : NULL, rows, R, s->sweeps, s->tolerance,
                  reg.ridge, reg.l1, (int)reg.unbounded, s->norm == TH_NORM_MAX, a, o);

    g_autofree double *lambda = g_new(double, R);
    g_autofree double *gram = g_new(double, (size_t)R * R);
    g_autofree double *inner = g_new(double, R);
    uint32_t passes = 0;
    th_test_assert_ok(call_nonneg_reg(pl, inst, mode, V, s->with_scale ? scale : NULL,
                                      s->sweeps, s->tolerance, s->norm, &reg, lambda, gram,
                                      inner, &passes, err),
                      err);
    g_autofree char *what = g_strdup_printf(
        "%s: %s, rank %u, mode %u, norm %s, scale %s, sweeps %u, tolerance %g%s, ridge %g, "
        "l1 %g%s",
        pl->info->id, name, R, mode, s->norm == TH_NORM_MAX ? "max" : "2",
        s->with_scale ? "given" : "NULL", s->sweeps, s->tolerance,
        s->zero_column ? ", V(1,1) = 0" : "", reg.ridge, reg.l1,
        s->unbounded ? ", unbounded" : "");
    if (!passes_acceptable(o, passes, s->tolerance))
        fail_msg("%s: %u passes, the oracle %u (its changes %.6g, %.6g, ... of first %.6g)", what,
                 passes, o->passes, o->change[0], o->passes > 1 ? o->change[1] : 0.0,
                 o->change[0]);
    g_autofree double *got = g_new(double, n);
    th_test_assert_ok(pl->entry.get_factor(inst, mode, got, err), err);
    /* A column with V(r,r) = 0 is left as it was (plugin.h), negative
     * entries and all; every other one is >= 0. */
    for (size_t k = 0; k < n && !s->unbounded; ++k)
        if (!(got[k] >= 0.0) && V[(k % R) * R + k % R] != 0.0)
            fail_msg("%s: entry (%zu, %zu) is %g, not >= 0", what, k / R, k % R, got[k]);
    const double tol = reg.l1 > 0.0 ? L1_VALUE_TOLERANCE : VALUE_TOLERANCE;
    const double rel = th_test_relative_error(got, o->A, n);
    if (!(rel <= tol))
        fail_msg("%s: factor relative error %.3g", what, rel);
    /* Normwise, on the unnormalised factor (lambda times the columns): a
     * column that HALS drives to about 0 has a lambda near fp32's noise,
     * and normalising it magnifies that noise into its Gram row. */
    double lmax = 0.0;
    for (uint32_t r = 0; r < R; ++r)
        lmax = fmax(lmax, o->lambda[r]);
    for (uint32_t r = 0; r < R; ++r) {
        if (!(fabs(lambda[r] - o->lambda[r]) <= tol * lmax))
            fail_msg("%s: lambda[%u] %.9g, the oracle's %.9g (largest %.9g)", what, r,
                     lambda[r], o->lambda[r], lmax);
        double mm = 0.0, aa = 0.0;
        for (uint64_t i = 0; i < rows; ++i) {
            mm += M[i * R + r] * M[i * R + r];
            aa += o->A[i * R + r] * o->A[i * R + r];
        }
        if (!(fabs(lambda[r] * inner[r] - o->lambda[r] * o->inner[r]) <=
              tol * lmax * sqrt(mm * fmax(aa, 1.0)) + 1e-12))
            fail_msg("%s: inner[%u] %.9g, the oracle's %.9g", what, r, inner[r], o->inner[r]);
        for (uint32_t q = 0; q < R; ++q) {
            const double want = o->lambda[r] * o->lambda[q] * o->gram[(size_t)r * R + q];
            const double got_rq = lambda[r] * lambda[q] * gram[(size_t)r * R + q];
            if (!(fabs(got_rq - want) <= tol * lmax * lmax + 1e-12))
                fail_msg("%s: gram(%u, %u) %.9g, the oracle's %.9g", what, r, q,
                         gram[(size_t)r * R + q], o->gram[(size_t)r * R + q]);
        }
    }
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        if (m == mode)
            continue;
        const size_t nm = (size_t)t->dims[m] * R;
        g_autofree double *other = g_new(double, nm);
        th_test_assert_ok(pl->entry.get_factor(inst, m, other, err), err);
        if (memcmp(other, held[m], sizeof(double) * nm) != 0)
            fail_msg("%s: mode %u's factor changed", what, m);
    }
    for (uint32_t m = 0; m < t->nmodes; ++m)
        g_free(held[m]);
    g_free(held);
    g_free(o);
}

static const setting full_settings[] = {
    {TH_NORM_2, 0, 1, 0.0, 0, 0.0, 0.0, 0},     {TH_NORM_2, 0, 5, 0.0, 0, 0.0, 0.0, 0},
    {TH_NORM_2, 0, 1, 1e-8, 0, 0.0, 0.0, 0},    {TH_NORM_2, 0, 5, 1e-8, 0, 0.0, 0.0, 0},
    {TH_NORM_2, 1, 1, 0.0, 0, 0.0, 0.0, 0},     {TH_NORM_2, 1, 5, 0.0, 0, 0.0, 0.0, 0},
    {TH_NORM_2, 1, 1, 1e-8, 0, 0.0, 0.0, 0},    {TH_NORM_2, 1, 5, 1e-8, 0, 0.0, 0.0, 0},
    {TH_NORM_MAX, 0, 1, 0.0, 0, 0.0, 0.0, 0},   {TH_NORM_MAX, 0, 5, 0.0, 0, 0.0, 0.0, 0},
    {TH_NORM_MAX, 0, 1, 1e-8, 0, 0.0, 0.0, 0},  {TH_NORM_MAX, 0, 5, 1e-8, 0, 0.0, 0.0, 0},
    {TH_NORM_MAX, 1, 1, 0.0, 0, 0.0, 0.0, 0},   {TH_NORM_MAX, 1, 5, 0.0, 0, 0.0, 0.0, 0},
    {TH_NORM_MAX, 1, 1, 1e-8, 0, 0.0, 0.0, 0},  {TH_NORM_MAX, 1, 5, 1e-8, 0, 0.0, 0.0, 0},
    {TH_NORM_2, 1, 5, 1e-8, 1, 0.0, 0.0, 0},    {TH_NORM_2, 1, 20, 1e-3, 0, 0.0, 0.0, 0},
    {TH_NORM_MAX, 0, 20, 0.0, 0, 0.0, 0.0, 0},
    /* ABI 1.6: ridge, l1, and both without the bound. */
    {TH_NORM_2, 1, 5, 1e-8, 0, 0.5, 0.0, 0},
    {TH_NORM_2, 1, 5, 1e-8, 0, 0.0, 0.05, 0},
    {TH_NORM_MAX, 1, 5, 1e-8, 0, 0.1, 0.02, 1},
    {TH_NORM_2, 0, 20, 0.0, 1, 0.0, 0.3, 1},
};
/* The other modes: the host's own setting. */
static const setting host_setting = {TH_NORM_2, 1, 5, 1e-8, 0, 0.0, 0.0, 0};

static void test_nonneg_matches_oracle(void **state)
{
    const th_gpu_test_plugins *p = *state;
    const int quick = th_gpu_test_quick();
    const uint32_t all_ranks[] = {5, 16, 32, 64, 128};
    const uint32_t quick_ranks[] = {5, 32};
    const uint32_t *ranks = quick ? quick_ranks : all_ranks;
    const size_t nranks = quick ? G_N_ELEMENTS(quick_ranks) : G_N_ELEMENTS(all_ranks);
    const size_t ncases = quick ? 2 : G_N_ELEMENTS(cases);
    GRand *rng = g_rand_new_with_seed(1515);
    unsigned checked = 0;
    for (size_t ci = 0; ci < ncases; ++ci) {
        g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[ci], 40 + ci);
        for (size_t ri = 0; ri < nranks; ++ri) {
            const uint32_t R = ranks[ri];
            double **f0 = start_factors(t, R, rng);
            for (uint32_t g = 0; g < TH_GPU_TEST_N_PLUGINS; ++g) {
                const th_plugin *pl = p->gpu[g];
                th_instance *inst = th_test_create_instance(pl, NULL);
                th_test_load_and_set(pl, inst, t, R, f0);
                for (uint32_t mode = 0; mode < t->nmodes; ++mode) {
                    if (mode == 0 && !quick) {
                        for (size_t si = 0; si < G_N_ELEMENTS(full_settings); ++si, ++checked)
                            check_setting(pl, inst, t, f0, R, mode, &full_settings[si],
                                          cases[ci].name);
                    } else {
                        check_setting(pl, inst, t, f0, R, mode, &host_setting, cases[ci].name);
                        ++checked;
                    }
                }
                pl->entry.destroy(inst);
            }
            th_test_free_factors(f0, t->nmodes);
        }
    }
    g_rand_free(rng);
    print_message("als_update_nonneg: %u updates checked against the oracle\n", checked);
}

/* The same settings without the rows a chunk of passes starts from kept
 * on the device (TH_GPU_TEST_NONNEG_NO_SAVED, as where they do not fit):
 * every chunk's passes made twice, the second time written. Mode 0 of the
 * first case, ranks 5 and 32 (a padded and a whole-quad row), one plugin. */
static void test_nonneg_without_saved_rows(void **state)
{
    const th_gpu_test_plugins *p = *state;
    const uint32_t ranks[] = {5, 32};
    g_setenv("TH_GPU_TEST_NONNEG_NO_SAVED", "1", TRUE);
    GRand *rng = g_rand_new_with_seed(1516);
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[0], 40);
    const th_plugin *pl = p->gpu[0];
    for (size_t ri = 0; ri < G_N_ELEMENTS(ranks); ++ri) {
        double **f0 = start_factors(t, ranks[ri], rng);
        th_instance *inst = th_test_create_instance(pl, NULL);
        th_test_load_and_set(pl, inst, t, ranks[ri], f0);
        for (size_t si = 0; si < G_N_ELEMENTS(full_settings); ++si)
            check_setting(pl, inst, t, f0, ranks[ri], 0, &full_settings[si],
                          "without saved rows");
        pl->entry.destroy(inst);
        th_test_free_factors(f0, t->nmodes);
    }
    g_rand_free(rng);
    g_unsetenv("TH_GPU_TEST_NONNEG_NO_SAVED");
}

/* A tall mode (many more tiles of rows than resident blocks, the last one
 * partial): at ranks 16, 32 and 64 its update's sums run on the tensor
 * cores (als_tensor_core.cu's epilogue form, tiles of 64 rows at 64), at 5
 * on the SIMT stats kernel.
 * One pass and five, both norms, every plugin. */
static void test_nonneg_tall_mode(void **state)
{
    const th_gpu_test_plugins *p = *state;
    const int quick = th_gpu_test_quick();
    static const th_gpu_test_case tall = {"tall mode", 3, {300007, 40, 25}, 120011, {0.5, 0, 0}};
    static const setting tall_settings[] = {
        {TH_NORM_2, 1, 1, 0.0, 0, 0.0, 0.0, 0},
        {TH_NORM_MAX, 0, 5, 1e-8, 0, 0.0, 0.0, 0},
    };
    const uint32_t all_ranks[] = {5, 16, 32, 64};
    const uint32_t quick_ranks[] = {32, 64};
    const uint32_t *ranks = quick ? quick_ranks : all_ranks;
    const size_t nranks = quick ? G_N_ELEMENTS(quick_ranks) : G_N_ELEMENTS(all_ranks);
    const uint32_t nplugins = quick ? 1u : TH_GPU_TEST_N_PLUGINS;
    GRand *rng = g_rand_new_with_seed(1517);
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&tall, 47);
    for (size_t ri = 0; ri < nranks; ++ri) {
        double **f0 = start_factors(t, ranks[ri], rng);
        for (uint32_t g = 0; g < nplugins; ++g) {
            const th_plugin *pl = p->gpu[g];
            th_instance *inst = th_test_create_instance(pl, NULL);
            th_test_load_and_set(pl, inst, t, ranks[ri], f0);
            for (size_t si = 0; si < G_N_ELEMENTS(tall_settings); ++si)
                check_setting(pl, inst, t, f0, ranks[ri], 0, &tall_settings[si], tall.name);
            pl->entry.destroy(inst);
        }
        th_test_free_factors(f0, t->nmodes);
    }
    g_rand_free(rng);
}

/* The fit of the model as the host computes it (als_step.c). */
static double model_fit(double *const *grams, uint32_t nmodes, uint32_t R, const double *lambda,
                        const double *inner, double norm_x_squared)
{
    double model = 0.0, cross = 0.0;
    for (uint32_t r = 0; r < R; ++r) {
        cross += lambda[r] * inner[r];
        for (uint32_t q = 0; q < R; ++q) {
            double h = 1.0;
            for (uint32_t m = 0; m < nmodes; ++m)
                h *= grams[m][(size_t)r * R + q];
            model += lambda[r] * lambda[q] * h;
        }
    }
    const double residual = fmax(norm_x_squared + model - 2.0 * cross, 0.0);
    return 1.0 - sqrt(residual) / sqrt(norm_x_squared);
}

static void hadamard_except(double *const *grams, uint32_t nmodes, uint32_t skip, uint32_t R,
                            double *v)
{
    for (size_t k = 0; k < (size_t)R * R; ++k)
        v[k] = 1.0;
    for (uint32_t m = 0; m < nmodes; ++m)
        if (m != skip)
            for (size_t k = 0; k < (size_t)R * R; ++k)
                v[k] *= grams[m][k];
}

/* Nonnegative CP-ALS, 12 iterations: gpu-adaptive with every update in
 * the plugin (mttkrp + als_update_nonneg), cpu-reference with the host's
 * (its result and factor downloaded, the oracle, set_factor), from the
 * same start; the fits agree to 1e-5 at every iteration. */
static void test_nonneg_cp_als_matches_host(void **state)
{
    const th_gpu_test_plugins *p = *state;
    const th_index dims[3] = {24, 20, 18};
    g_autoptr(th_sptensor) t = th_test_planted_dense(dims, 3, 4, 77);
    const uint32_t R = 6, N = t->nmodes;
    double norm_x_squared = 0.0;
    for (uint64_t i = 0; i < t->nnz; ++i)
        norm_x_squared += (double)(float)t->values[i] * (double)(float)t->values[i];
    GRand *rng = g_rand_new_with_seed(3);
    double **f0 = g_new0(double *, N);
    for (uint32_t m = 0; m < N; ++m) {
        f0[m] = g_new(double, (size_t)t->dims[m] * R);
        for (size_t k = 0; k < (size_t)t->dims[m] * R; ++k)
            f0[m][k] = (double)(float)g_rand_double(rng);
    }
    g_rand_free(rng);
    const th_plugin *gpu = p->gpu[0]; /* gpu-adaptive */
    const th_plugin *ref = p->ref;
    th_instance *gi = th_test_create_instance(gpu, NULL);
    th_instance *ri = th_test_create_instance(ref, NULL);
    th_test_load_and_set(gpu, gi, t, R, f0);
    th_test_load_and_set(ref, ri, t, R, f0);
    double *g_grams[3], *r_grams[3];
    for (uint32_t m = 0; m < N; ++m) {
        g_grams[m] = g_new(double, (size_t)R * R);
        r_grams[m] = g_new(double, (size_t)R * R);
        gram_of(f0[m], t->dims[m], R, g_grams[m]);
        gram_of(f0[m], t->dims[m], R, r_grams[m]);
    }
    double g_lambda[MAX_RANK], r_lambda[MAX_RANK], g_inner[MAX_RANK];
    for (uint32_t r = 0; r < R; ++r)
        g_lambda[r] = r_lambda[r] = 1.0;
    double V[MAX_RANK * MAX_RANK];
    char err[TH_ERROR_SIZE] = "";
    oracle *o = g_new0(oracle, 1);
    for (uint32_t it = 0; it < 12; ++it) {
        for (uint32_t mode = 0; mode < N; ++mode) {
            /* gpu-adaptive: everything in the plugin. */
            th_test_assert_ok(gpu->entry.mttkrp(gi, mode, err), err);
            hadamard_except(g_grams, N, mode, R, V);
            double scale[MAX_RANK];
            memcpy(scale, g_lambda, sizeof(double) * R);
            th_test_assert_ok(call_nonneg(gpu, gi, mode, V, scale, 5, 1e-8, TH_NORM_2, g_lambda,
                                          g_grams[mode], g_inner, NULL, err),
                              err);
            /* cpu-reference: the host's update. */
            const size_t n = (size_t)t->dims[mode] * R;
            g_autofree double *M = g_new(double, n);
            g_autofree double *A = g_new(double, n);
            th_test_assert_ok(ref->entry.mttkrp(ri, mode, err), err);
            th_test_assert_ok(ref->entry.get_mttkrp_result(ri, mode, M, err), err);
            th_test_assert_ok(ref->entry.get_factor(ri, mode, A, err), err);
            hadamard_except(r_grams, N, mode, R, V);
            oracle_update(M, V, r_lambda, t->dims[mode], R, 5, 1e-8, 0.0, 0.0, 0, 0, A, o);
            memcpy(r_lambda, o->lambda, sizeof(double) * R);
            memcpy(r_grams[mode], o->gram, sizeof(double) * R * R);
            th_test_assert_ok(ref->entry.set_factor(ri, mode, A, err), err);
        }
        const double gfit = model_fit(g_grams, N, R, g_lambda, g_inner, norm_x_squared);
        const double rfit = model_fit(r_grams, N, R, r_lambda, o->inner, norm_x_squared);
        if (!(fabs(gfit - rfit) <= FIT_TOLERANCE))
            fail_msg("nonnegative CP-ALS iteration %u: gpu-adaptive's fit %.9f, the host "
                     "update's %.9f",
                     it + 1, gfit, rfit);
        if (it == 11)
            print_message("nonnegative CP-ALS: fit %.9f on gpu-adaptive, %.9f with the host's "
                          "update after 12 iterations\n",
                          gfit, rfit);
    }
    g_free(o);
    for (uint32_t m = 0; m < N; ++m) {
        g_free(g_grams[m]);
        g_free(r_grams[m]);
    }
    gpu->entry.destroy(gi);
    ref->entry.destroy(ri);
    th_test_free_factors(f0, N);
}

static void expect(th_status got, th_status want, const char *err, const char *needle,
                   const char *what)
{
    if (got != want || (needle && strstr(err, needle) == NULL))
        fail_msg("%s gave %s \"%s\", expected %s%s%s", what, th_status_name(got), err,
                 th_status_name(want), needle ? " naming " : "", needle ? needle : "");
}

static void test_nonneg_errors(void **state)
{
    const th_gpu_test_plugins *p = *state;
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[0], 5);
    th_coo_tensor view;
    th_test_coo_view(t, &view);
    const uint32_t R = 8;
    double v[64], lambda[8], gram[64], inner[8];
    for (uint32_t k = 0; k < 64; ++k)
        v[k] = k % 9 == 0 ? 2.0 : 0.1;
    for (uint32_t g = 0; g < TH_GPU_TEST_N_PLUGINS; ++g) {
        const th_plugin *pl = p->gpu[g];
        assert_non_null(pl->entry.als_update_nonneg);
        assert_true(pl->plugin_entry_size >= TH_PLUGIN_ENTRY_V1_5_SIZE);
        th_instance *inst = th_test_create_instance(pl, NULL);
        char err[TH_ERROR_SIZE] = "";
        expect(call_nonneg(pl, inst, 0, v, NULL, 5, 1e-8, TH_NORM_2, lambda, gram, inner, NULL,
                           err),
               TH_ERR_BAD_STATE, err, "no tensor", "als_update_nonneg before load");
        GRand *rng = g_rand_new_with_seed(g);
        double **f = start_factors(t, R, rng);
        g_rand_free(rng);
        th_test_load_and_set(pl, inst, t, R, f);
        th_test_free_factors(f, t->nmodes);
        expect(call_nonneg(pl, inst, 0, v, NULL, 5, 1e-8, TH_NORM_2, lambda, gram, inner, NULL,
                           err),
               TH_ERR_BAD_STATE, err, "MTTKRP", "als_update_nonneg before an MTTKRP");
        th_test_assert_ok(pl->entry.mttkrp(inst, 0, err), err);
        th_als_output out = {.struct_size = sizeof out, .lambda = lambda, .gram = gram,
                             .inner = inner};
        expect(pl->entry.als_update_nonneg(inst, NULL, &out, err), TH_ERR_INVALID_ARGUMENT, err,
               "NULL", "als_update_nonneg NULL io");
        th_nonneg_update_io shortio = {.struct_size = TH_NONNEG_UPDATE_IO_V1_5_SIZE - 1,
                                       .v = v, .sweeps = 5, .norm = TH_NORM_2};
        expect(pl->entry.als_update_nonneg(inst, &shortio, &out, err), TH_ERR_INVALID_ARGUMENT,
               err, "shorter than", "als_update_nonneg short io");
        th_nonneg_update_io io = {.struct_size = sizeof io, .mode = 0, .v = v, .sweeps = 5,
                                  .tolerance = 1e-8, .norm = TH_NORM_2};
        expect(pl->entry.als_update_nonneg(inst, &io, NULL, err), TH_ERR_INVALID_ARGUMENT, err,
               "out", "als_update_nonneg NULL out");
        expect(call_nonneg(pl, inst, 3, v, NULL, 5, 1e-8, TH_NORM_2, lambda, gram, inner, NULL,
                           err),
               TH_ERR_INVALID_ARGUMENT, err, "mode 3", "als_update_nonneg mode 3");
        expect(call_nonneg(pl, inst, 0, NULL, NULL, 5, 1e-8, TH_NORM_2, lambda, gram, inner, NULL,
                           err),
               TH_ERR_INVALID_ARGUMENT, err, "v", "als_update_nonneg NULL v");
        expect(call_nonneg(pl, inst, 0, v, NULL, 0, 1e-8, TH_NORM_2, lambda, gram, inner, NULL,
                           err),
               TH_ERR_INVALID_ARGUMENT, err, "sweeps", "als_update_nonneg sweeps 0");
        const double bad_tolerances[] = {-1e-8, NAN, INFINITY};
        for (size_t k = 0; k < G_N_ELEMENTS(bad_tolerances); ++k)
            expect(call_nonneg(pl, inst, 0, v, NULL, 5, bad_tolerances[k], TH_NORM_2, lambda,
                               gram, inner, NULL, err),
                   TH_ERR_INVALID_ARGUMENT, err, "tolerance", "als_update_nonneg bad tolerance");
        expect(call_nonneg(pl, inst, 0, v, NULL, 5, 1e-8, 7, lambda, gram, inner, NULL, err),
               TH_ERR_INVALID_ARGUMENT, err, "norm", "als_update_nonneg norm 7");
        /* ABI 1.6's fields. */
        const regularisation bad_regs[] = {
            {-1.0, 0.0, 0}, {NAN, 0.0, 0}, {0.0, -0.5, 0}, {0.0, INFINITY, 0}, {0.0, 0.0, 2}};
        const char *const bad_words[] = {"ridge", "ridge", "l1", "l1", "unbounded"};
        for (size_t k = 0; k < G_N_ELEMENTS(bad_regs); ++k)
            expect(call_nonneg_reg(pl, inst, 0, v, NULL, 5, 1e-8, TH_NORM_2, &bad_regs[k],
                                   lambda, gram, inner, NULL, err),
                   TH_ERR_INVALID_ARGUMENT, err, bad_words[k], "als_update_nonneg 1.6 fields");
        /* And then it works, passes written. */
        uint32_t passes = 0;
        th_test_assert_ok(call_nonneg(pl, inst, 0, v, NULL, 3, 0.0, TH_NORM_2, lambda, gram,
                                      inner, &passes, err),
                          err);
        assert_true(passes >= 1 && passes <= 3);
        pl->entry.destroy(inst);

        /* Several ranks (virtual, on device 0): not implemented. */
        inst = th_test_create_instance(pl, "devices", "0,0", NULL);
        th_test_assert_ok(pl->entry.load_tensor(inst, &view, R, err), err);
        th_test_assert_ok(pl->entry.mttkrp(inst, 0, err), err);
        expect(call_nonneg(pl, inst, 0, v, NULL, 5, 1e-8, TH_NORM_2, lambda, gram, inner, NULL,
                           err),
               TH_ERR_UNSUPPORTED, err, "multi-GPU nonnegative update",
               "als_update_nonneg on 2 ranks");
        pl->entry.destroy(inst);
    }
}

int main(void)
{
    if (!th_gpu_test_have_device())
        return 77;
    th_gpu_test_apply_filter();
    g_setenv("TH_GPU_POISON_RESULTS", "1", TRUE);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nonneg_errors),
        cmocka_unit_test(test_nonneg_cp_als_matches_host),
        cmocka_unit_test(test_nonneg_matches_oracle),
        cmocka_unit_test(test_nonneg_without_saved_rows),
        cmocka_unit_test(test_nonneg_tall_mode),
    };
    return cmocka_run_group_tests(tests, th_gpu_test_setup_plugins, th_gpu_test_teardown_plugins);
}
