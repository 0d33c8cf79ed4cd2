/* The GPU plugins' row_least_squares (ABI 1.5, the row-wise ALS of tensor
 * completion) against a double-precision host oracle, through the plugin
 * ABI, and against cpu-reference's row_least_squares where it has one.
 *
 * The oracle, row by row of the solved mode: G_j and b_j over the row's
 * nonzeros in double (the factors and values as the backends hold them:
 * every factor is drawn as fp32 values, the tensor's values rounded to
 * fp32), V = G_j + ridge I; Cholesky with the ABI's breakdown test
 * (TH_SOLVE_BREAKDOWN_FACTOR) for nonneg 0, `passes` sweeps of coordinate
 * descent from the row as it was for nonneg 1; empty rows zero (ridge > 0)
 * or as they were. Each backend's result must have
 *   - the oracle's empty_rows, and its empty rows exactly as they should be
 *     (as they were, or zero); the rows the oracle's factorisation breaks
 *     down on left exactly as they were, and singular_rows their count
 *     (but see check_mode: rows of fewer nonzeros than R without a ridge
 *     may go either way);
 *   - every solved row (nonneg 0) with a normwise backward error
 *     ||V a - b|| / (||V||_F ||a|| + ||b||) below 1e-6: fp32's rounding of
 *     the row alone gives ~6e-8, and the measure does not grow with the
 *     row's condition (rows with about R nonzeros and no ridge are far
 *     from well conditioned, where a forward error would say nothing);
 *   - every coordinate-descent row (nonneg 1) within 1e-5 of the oracle's
 *     iterate, relative to the row's size;
 *   - factor_norm_squared the sum of squares of the factor it returns
 *     (1e-9), and the other modes' factors unchanged;
 *   - residual_squared the sum over the nonzeros of the squared residuals
 *     with the factor it returns (the others as set; values as it holds
 *     them), within 1e-9 relative plus 1e-10 of sum x^2 (the fused
 *     x^T x - 2 a^T b + a^T G a cancels in double against sum x^2), plus
 *     1e-6 sqrt(residual sum x^2) for a backend that holds fp32 values (the
 *     GPU plugins form h as a product in fp32: an fp32 rounding a further
 *     mode); with column scales other than 1 its h differs from the
 *     oracle's by an fp32 rounding a mode, so there within 1e-5 relative
 *     plus 1e-6 sqrt(residual sum x^2).
 * Where cpu-reference has row_least_squares it is checked the same way and
 * the GPU plugins' counts and norms are compared with its own.
 *
 * Cases: a uniform 3-mode tensor; one whose first mode has a hot row
 * (two thirds of the nonzeros, split over chunks) and mostly empty rows; 4
 * and 5 modes (the kernels' compile-time mode counts and the run-time
 * one); 2 modes. Ranks 5, 16, 32 and 64 (24, 40 and 128 outside the quick
 * subset): the register path (up to 32) and the block path above it,
 * multiples of 8 and not. nonneg 0 and 1, ridge 0 and 1e-3. Then every
 * row of more than 7 nonzeros split into chunks (TH_GPU_TEST_RLS_CHUNK=7,
 * the split rows' path); the factors held with column scales other than 1
 * (after als_update), and an MTTKRP that reads the solved factor; a second
 * tensor loaded into the same instance; each error the header asks for.
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

#define BACKWARD_TOLERANCE 1e-6
/* With column scales other than 1 the backend forms h from its stored
 * factors times their scales in double, the oracle from the fp32 true
 * values get_factor returns: h differs by up to one fp32 rounding a mode. */
#define SCALED_BACKWARD_TOLERANCE 4e-6
#define DESCENT_TOLERANCE 1e-5
#define NORM_TOLERANCE 1e-9
#define RESIDUAL_TOLERANCE 1e-9
/* Times sqrt(residual sum x^2), for h formed in fp32 (the residual's
 * change is 2 sum r_i <a, dh_i>, dh_i within two fp32 roundings of h_i). */
#define FP32_PRODUCT_RESIDUAL 1e-6
#define SCALED_RESIDUAL_TOLERANCE 1e-5
/* Two backends' norms: both in double from the same fp32 inputs. */
#define NORM_AGREEMENT 1e-4
/* An MTTKRP against the host's (fp32 kernels). */
#define MTTKRP_TOLERANCE 2e-4
#define PASSES 2u
#define MAX_CANDIDATES 4

static const th_gpu_test_case cases[] = {
    {"3 modes, uniform", 3, {300, 200, 150}, 20000, {0, 0, 0}},
    {"3 modes, a hot row and empty rows", 3, {2000, 300, 200}, 30000, {2.2, 0.3, 0}},
    {"4 modes, skewed", 4, {50, 400, 30, 20}, 15000, {1.0, 1.5, 0, 0.5}},
    {"5 modes", 5, {40, 30, 20, 10, 8}, 8000, {0.5, 0, 0, 0, 0}},
    {"2 modes", 2, {300, 400}, 20000, {0, 0.8}},
};

/* Factors of fp32 values uniform in [-1, 1): what a backend holds is what
 * the oracle reads. */
static double **fp32_factors(const th_sptensor *t, uint32_t rank, GRand *rng)
{
    double **f = g_new0(double *, t->nmodes);
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        const size_t n = (size_t)t->dims[m] * rank;
        f[m] = g_new(double, n);
        for (size_t k = 0; k < n; ++k)
            f[m][k] = (double)(float)g_rand_double_range(rng, -1.0, 1.0);
    }
    return f;
}

/* The nonzeros of each row of `mode`: perm[offsets[j] .. offsets[j + 1]). */
typedef struct rows_of_mode {
    uint64_t *offsets, *perm;
} rows_of_mode;

static rows_of_mode rows_of(const th_sptensor *t, uint32_t mode)
{
    const uint32_t I = t->dims[mode];
    rows_of_mode r = {g_new0(uint64_t, (size_t)I + 1), g_new(uint64_t, t->nnz)};
    for (uint64_t i = 0; i < t->nnz; ++i)
        ++r.offsets[t->indices[mode][i] + 1];
    for (uint32_t j = 0; j < I; ++j)
        r.offsets[j + 1] += r.offsets[j];
    uint64_t *next = g_memdup2(r.offsets, sizeof(uint64_t) * I);
    for (uint64_t i = 0; i < t->nnz; ++i)
        r.perm[next[t->indices[mode][i]]++] = i;
    g_free(next);
    return r;
}

static void rows_free(rows_of_mode *r)
{
    g_free(r->offsets);
    g_free(r->perm);
}

/* Cholesky of V (R x R, full) into L with the ABI's breakdown test, then
 * V a = b; FALSE when a pivot is not above the threshold. */
static gboolean cholesky_solve(const double *V, const double *b, uint32_t R, double *L, double *a)
{
    double largest = 0.0;
    for (uint32_t i = 0; i < R; ++i)
        largest = fmax(largest, fabs(V[(size_t)i * R + i]));
    const double threshold = largest * R * DBL_EPSILON * TH_SOLVE_BREAKDOWN_FACTOR;
    for (uint32_t j = 0; j < R; ++j) {
        double d = V[(size_t)j * R + j];
        for (uint32_t k = 0; k < j; ++k)
            d -= L[(size_t)j * R + k] * L[(size_t)j * R + k];
        if (!(d > threshold))
            return FALSE;
        const double ljj = sqrt(d);
        L[(size_t)j * R + j] = ljj;
        for (uint32_t i = j + 1; i < R; ++i) {
            double s = V[(size_t)i * R + j];
            for (uint32_t k = 0; k < j; ++k)
                s -= L[(size_t)i * R + k] * L[(size_t)j * R + k];
            L[(size_t)i * R + j] = s / ljj;
        }
    }
    for (uint32_t i = 0; i < R; ++i) {
        double s = b[i];
        for (uint32_t k = 0; k < i; ++k)
            s -= L[(size_t)i * R + k] * a[k];
        a[i] = s / L[(size_t)i * R + i];
    }
    for (uint32_t i = R; i-- > 0;) {
        double s = a[i];
        for (uint32_t k = i + 1; k < R; ++k)
            s -= L[(size_t)k * R + i] * a[k];
        a[i] = s / L[(size_t)i * R + i];
    }
    return TRUE;
}

/* The ABI's coordinate descent: `passes` sweeps from a, r = 0 .. R-1. */
static void descent(const double *V, const double *b, uint32_t R, uint32_t passes, double *a)
{
    for (uint32_t p = 0; p < passes; ++p)
        for (uint32_t r = 0; r < R; ++r) {
            double s = 0.0;
            for (uint32_t c = 0; c < R; ++c)
                s += V[(size_t)r * R + c] * a[c];
            const double d = V[(size_t)r * R + r];
            a[r] = d != 0.0 ? fmax(0.0, a[r] + (b[r] - s) / d) : 0.0;
        }
}

static double norm2(const double *v, uint32_t n)
{
    double s = 0.0;
    for (uint32_t i = 0; i < n; ++i)
        s += v[i] * v[i];
    return sqrt(s);
}

/* One backend's outcome of a call. */
typedef struct candidate {
    const char *name;
    double *A; /* the solved mode's factor after the call */
    uint64_t singular, empty;
    double norm;
    double residual; /* residual_squared */
    int f32;         /* holds the values in fp32 */
} candidate;

/* sum over the nonzeros of (x_i - <A(i_mode), h_i>)^2: A the candidate's
 * solved factor, h_i from f0, x_i as the candidate holds it; *xx gets
 * sum x_i^2. */
static double direct_residual(const th_sptensor *t, double *const *f0, uint32_t R,
                              uint32_t mode, const candidate *c, double *xx)
{
    double sum = 0.0, sx = 0.0;
    for (uint64_t i = 0; i < t->nnz; ++i) {
        const double x = c->f32 ? (double)(float)t->values[i] : t->values[i];
        const double *a = c->A + (size_t)t->indices[mode][i] * R;
        double model = 0.0;
        for (uint32_t r = 0; r < R; ++r) {
            double v = a[r];
            for (uint32_t m = 0; m < t->nmodes; ++m)
                if (m != mode)
                    v *= f0[m][(size_t)t->indices[m][i] * R + r];
            model += v;
        }
        sum += (x - model) * (x - model);
        sx += x * x;
    }
    *xx = sx;
    return sum;
}

/* Every candidate against the oracle on `mode`, from the factors f0. */
static void check_mode(const th_sptensor *t, double *const *f0, uint32_t R, uint32_t mode,
                       double ridge, int nonneg, const candidate *c, size_t nc,
                       double backward_tolerance, const char *what)
{
    const uint32_t I = t->dims[mode];
    rows_of_mode rows = rows_of(t, mode);
    double *V = g_new(double, (size_t)R * R), *L = g_new(double, (size_t)R * R);
    double *b = g_new(double, R), *a = g_new(double, R), *h = g_new(double, R);
    double *res = g_new(double, R);
    uint64_t singular = 0, empty = 0, unchanged[MAX_CANDIDATES] = {0};
    double worst[MAX_CANDIDATES] = {0};
    for (uint32_t j = 0; j < I; ++j) {
        const double *a0 = f0[mode] + (size_t)j * R;
        const uint64_t n = rows.offsets[j + 1] - rows.offsets[j];
        if (n == 0) {
            ++empty;
            for (size_t k = 0; k < nc; ++k)
                for (uint32_t r = 0; r < R; ++r) {
                    const double want = ridge > 0.0 ? 0.0 : a0[r];
                    if (c[k].A[(size_t)j * R + r] != want)
                        fail_msg("%s: %s: empty row %u entry %u is %.9g, expected %.9g", what,
                                 c[k].name, j, r, c[k].A[(size_t)j * R + r], want);
                }
            continue;
        }
        memset(V, 0, sizeof(double) * R * R);
        memset(b, 0, sizeof(double) * R);
        for (uint64_t p = rows.offsets[j]; p < rows.offsets[j + 1]; ++p) {
            const uint64_t i = rows.perm[p];
            const double x = (double)(float)t->values[i];
            for (uint32_t r = 0; r < R; ++r) {
                double v = 1.0;
                for (uint32_t m = 0; m < t->nmodes; ++m)
                    if (m != mode)
                        v *= f0[m][(size_t)t->indices[m][i] * R + r];
                h[r] = v;
            }
            for (uint32_t r = 0; r < R; ++r) {
                b[r] += x * h[r];
                for (uint32_t s = 0; s < R; ++s)
                    V[(size_t)r * R + s] += h[r] * h[s];
            }
        }
        for (uint32_t r = 0; r < R; ++r)
            V[(size_t)r * R + r] += ridge;
        if (nonneg) {
            memcpy(a, a0, sizeof(double) * R);
            descent(V, b, R, PASSES, a);
            const double scale = fmax(fmax(norm2(a, R), norm2(a0, R)), 1e-300);
            for (size_t k = 0; k < nc; ++k) {
                double d = 0.0;
                for (uint32_t r = 0; r < R; ++r) {
                    const double e = c[k].A[(size_t)j * R + r] - a[r];
                    d += e * e;
                }
                worst[k] = fmax(worst[k], sqrt(d) / scale);
            }
            continue;
        }
        /* A row with fewer nonzeros than R and no ridge has an exactly
         * singular G_j, and whether its factorisation breaks down depends
         * on rounding noise against the ABI's relative threshold (this
         * oracle solves such a row of 4 nonzeros at R = 5: a pivot of noise
         * 5.3x the threshold; another's noise reached 0.85x). There either
         * outcome passes: the row as it was (counted singular), or a
         * solution with a small backward error. Elsewhere the oracle's
         * outcome is the answer (its pivots clear the threshold 10^7-fold
         * on these tensors). */
        const int deficient = ridge == 0.0 && n < R;
        const int solved = cholesky_solve(V, b, R, L, a);
        if (!solved)
            ++singular;
        double vnorm = 0.0;
        for (size_t e = 0; e < (size_t)R * R; ++e)
            vnorm += V[e] * V[e];
        vnorm = sqrt(vnorm);
        for (size_t k = 0; k < nc; ++k) {
            const double *got = c[k].A + (size_t)j * R;
            if (memcmp(got, a0, sizeof(double) * R) == 0) {
                ++unchanged[k];
                if (solved && !deficient)
                    fail_msg("%s: %s: row %u (%llu nonzeros) left as it was; the oracle solves "
                             "it",
                             what, c[k].name, j, (unsigned long long)n);
                continue;
            }
            if (!solved && !deficient)
                fail_msg("%s: %s: row %u (%llu nonzeros) is singular in the oracle but changed",
                         what, c[k].name, j, (unsigned long long)n);
            for (uint32_t r = 0; r < R; ++r) {
                double sum = -b[r];
                for (uint32_t q = 0; q < R; ++q)
                    sum += V[(size_t)r * R + q] * got[q];
                res[r] = sum;
            }
            const double eta = norm2(res, R) / fmax(vnorm * norm2(got, R) + norm2(b, R), 1e-300);
            if (!(eta < backward_tolerance))
                fail_msg("%s: %s: row %u (%llu nonzeros): backward error %.3g (oracle's row "
                         "norm %.6g, got %.6g)",
                         what, c[k].name, j, (unsigned long long)n, eta,
                         solved ? norm2(a, R) : 0.0, norm2(got, R));
            worst[k] = fmax(worst[k], eta);
        }
    }
    for (size_t k = 0; k < nc; ++k) {
        const uint64_t want_singular = nonneg ? 0u : unchanged[k];
        if (c[k].singular != want_singular || c[k].empty != empty)
            fail_msg("%s: %s: singular_rows %llu, empty_rows %llu; expected %llu (rows it left "
                     "as they were; the oracle's breakdowns: %llu), %llu",
                     what, c[k].name, (unsigned long long)c[k].singular,
                     (unsigned long long)c[k].empty, (unsigned long long)want_singular,
                     (unsigned long long)singular, (unsigned long long)empty);
        if (nonneg && !(worst[k] < DESCENT_TOLERANCE))
            fail_msg("%s: %s: coordinate descent %.3g from the oracle's", what, c[k].name,
                     worst[k]);
        double sum = 0.0;
        for (size_t e = 0; e < (size_t)I * R; ++e)
            sum += c[k].A[e] * c[k].A[e];
        if (!(fabs(c[k].norm - sum) <= NORM_TOLERANCE * fmax(sum, 1e-300)))
            fail_msg("%s: %s: factor_norm_squared %.17g, its factor's %.17g", what, c[k].name,
                     c[k].norm, sum);
        double xx = 0.0;
        const double want = direct_residual(t, f0, R, mode, &c[k], &xx);
        const int scaled = backward_tolerance != BACKWARD_TOLERANCE;
        const double allowed =
            scaled ? SCALED_RESIDUAL_TOLERANCE * want + 1e-6 * sqrt(want * xx) + 1e-10 * xx
                   : RESIDUAL_TOLERANCE * want + 1e-10 * xx +
                         (c[k].f32 ? FP32_PRODUCT_RESIDUAL * sqrt(want * xx) : 0.0);
        if (!(fabs(c[k].residual - want) <= allowed))
            fail_msg("%s: %s: residual_squared %.17g, the squared residuals of its factor "
                     "%.17g (sum x^2 %.6g)",
                     what, c[k].name, c[k].residual, want, xx);
    }
    g_free(V);
    g_free(L);
    g_free(b);
    g_free(a);
    g_free(h);
    g_free(res);
    rows_free(&rows);
}

static th_status call_rls(const th_plugin *pl, th_instance *inst, uint32_t mode, double ridge,
                          uint32_t nonneg, uint32_t passes, th_row_least_squares_io *out,
                          char *err)
{
    th_row_least_squares_io io = {.struct_size = sizeof io, .mode = mode, .ridge = ridge,
                                  .nonneg = nonneg, .passes = passes};
    const th_status st = pl->entry.row_least_squares(inst, &io, err);
    if (out)
        *out = io;
    return st;
}

/* Sets f0 on every mode, runs row_least_squares on `mode` and fills the
 * candidate; fails unless the other modes are left as they were. */
static void run_candidate(const th_plugin *pl, th_instance *inst, const th_sptensor *t,
                          double *const *f0, uint32_t R, uint32_t mode, double ridge,
                          uint32_t nonneg, candidate *c)
{
    char err[TH_ERROR_SIZE] = "";
    for (uint32_t m = 0; m < t->nmodes; ++m)
        th_test_assert_ok(pl->entry.set_factor(inst, m, f0[m], err), err);
    th_row_least_squares_io io;
    th_test_assert_ok(call_rls(pl, inst, mode, ridge, nonneg, PASSES, &io, err), err);
    c->name = pl->info->id;
    c->singular = io.singular_rows;
    c->empty = io.empty_rows;
    c->norm = io.factor_norm_squared;
    c->residual = io.residual_squared;
    c->f32 = pl->info->value_type == TH_VALUE_F32;
    th_test_assert_ok(pl->entry.get_factor(inst, mode, c->A, err), err);
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        if (m == mode)
            continue;
        const size_t n = (size_t)t->dims[m] * R;
        g_autofree double *other = g_new(double, n);
        th_test_assert_ok(pl->entry.get_factor(inst, m, other, err), err);
        if (memcmp(other, f0[m], sizeof(double) * n) != 0)
            fail_msg("%s: row_least_squares on mode %u changed mode %u's factor", pl->info->id,
                     mode, m);
    }
}

/* Every mode and setting of one tensor at one rank: the three GPU plugins
 * (and cpu-reference when it has row_least_squares) against the oracle. */
static unsigned check_tensor(const th_gpu_test_plugins *p, const th_sptensor *t,
                             const char *name, uint32_t R, GRand *rng)
{
    double **f0 = fp32_factors(t, R, rng);
    const th_plugin *pls[MAX_CANDIDATES];
    th_instance *insts[MAX_CANDIDATES];
    size_t np = 0;
    for (uint32_t g = 0; g < TH_GPU_TEST_N_PLUGINS; ++g)
        pls[np++] = p->gpu[g];
    const int with_ref = p->ref->entry.row_least_squares != NULL;
    if (with_ref)
        pls[np++] = p->ref;
    for (size_t k = 0; k < np; ++k) {
        insts[k] = th_test_create_instance(pls[k], NULL);
        th_test_load_and_set(pls[k], insts[k], t, R, f0);
    }
    unsigned checked = 0;
    for (uint32_t mode = 0; mode < t->nmodes; ++mode) {
        const size_t n = (size_t)t->dims[mode] * R;
        candidate c[MAX_CANDIDATES];
        for (size_t k = 0; k < np; ++k)
            c[k].A = g_new(double, n);
        for (uint32_t nonneg = 0; nonneg < 2; ++nonneg)
            for (int ri = 0; ri < 2; ++ri) {
                const double ridge = ri ? 1e-3 : 0.0;
                for (size_t k = 0; k < np; ++k)
                    run_candidate(pls[k], insts[k], t, f0, R, mode, ridge, nonneg, &c[k]);
                g_autofree char *what =
                    g_strdup_printf("%s, rank %u, mode %u, nonneg %u, ridge %g", name, R, mode,
                                    nonneg, ridge);
                check_mode(t, f0, R, mode, ridge, (int)nonneg, c, np, BACKWARD_TOLERANCE, what);
                /* The GPU plugins against cpu-reference's own numbers, where
                 * no row is exactly singular (see check_mode: a noise
                 * pivot's solution dominates the norm). */
                if (with_ref && (ridge > 0.0 || nonneg))
                    for (size_t k = 0; k + 1 < np; ++k) {
                        const candidate *r = &c[np - 1];
                        if (c[k].singular != r->singular || c[k].empty != r->empty ||
                            !(fabs(c[k].norm - r->norm) <= NORM_AGREEMENT * fmax(r->norm, 1e-300)))
                            fail_msg("%s: %s: singular %llu, empty %llu, norm %.12g; "
                                     "cpu-reference %llu, %llu, %.12g",
                                     what, c[k].name, (unsigned long long)c[k].singular,
                                     (unsigned long long)c[k].empty, c[k].norm,
                                     (unsigned long long)r->singular,
                                     (unsigned long long)r->empty, r->norm);
                    }
                checked += (unsigned)np;
            }
        for (size_t k = 0; k < np; ++k)
            g_free(c[k].A);
    }
    for (size_t k = 0; k < np; ++k)
        pls[k]->entry.destroy(insts[k]);
    th_test_free_factors(f0, t->nmodes);
    return checked;
}

static void test_row_solve_matches_oracle(void **state)
{
    const th_gpu_test_plugins *p = *state;
    GRand *rng = g_rand_new_with_seed(1505);
    const uint32_t ranks[] = {5, 16, 32, 64, 24, 40, 128};
    unsigned checked = 0;
    for (size_t ci = 0; ci < G_N_ELEMENTS(cases); ++ci) {
        if (th_gpu_test_quick() && ci > 1)
            continue;
        g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[ci], 150 + ci);
        for (size_t ri = 0; ri < G_N_ELEMENTS(ranks); ++ri) {
            if (ri >= 4 && (th_gpu_test_quick() || ci > 1))
                continue;
            if (th_gpu_test_quick() && ri == 1)
                continue;
            checked += check_tensor(p, t, cases[ci].name, ranks[ri], rng);
        }
    }
    printf("checked %u row_least_squares calls against the oracle%s\n", checked,
           p->ref->entry.row_least_squares ? " (cpu-reference among them)"
                                           : " (cpu-reference has no row_least_squares yet)");
    g_rand_free(rng);
}

/* Every row of more than 7 nonzeros in chunks of 7: the split rows' path
 * (double atomics into a slot, then the slot's solve) for nearly every row. */
static void test_row_solve_split_rows(void **state)
{
    const th_gpu_test_plugins *p = *state;
    GRand *rng = g_rand_new_with_seed(77);
    g_setenv("TH_GPU_TEST_RLS_CHUNK", "7", TRUE);
    const uint32_t ranks[] = {5, 32, 40};
    unsigned checked = 0;
    for (size_t ci = 0; ci < 3; ++ci) {
        if (th_gpu_test_quick() && ci != 1)
            continue;
        g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[ci], 250 + ci);
        for (size_t ri = 0; ri < G_N_ELEMENTS(ranks); ++ri)
            checked += check_tensor(p, t, cases[ci].name, ranks[ri], rng);
    }
    g_unsetenv("TH_GPU_TEST_RLS_CHUNK");
    printf("checked %u row_least_squares calls with rows split in chunks of 7\n", checked);
    g_rand_free(rng);
}

/* out(i_mode, r) += x prod_{k != mode} A_k(i_k, r), in double. */
static void host_mttkrp(const th_sptensor *t, double *const *A, uint32_t R, uint32_t mode,
                        double *out)
{
    memset(out, 0, sizeof(double) * t->dims[mode] * R);
    for (uint64_t i = 0; i < t->nnz; ++i) {
        const double x = (double)(float)t->values[i];
        for (uint32_t r = 0; r < R; ++r) {
            double v = x;
            for (uint32_t m = 0; m < t->nmodes; ++m)
                if (m != mode)
                    v *= A[m][(size_t)t->indices[m][i] * R + r];
            out[(size_t)t->indices[mode][i] * R + r] += v;
        }
    }
}

/* The factors held with column scales other than 1 (an als_update with the
 * max norm on every mode): the solve reads the true factors, and leaves
 * its own as what get_factor shows, which the next MTTKRP reads. Then a
 * second tensor into the same instance (the plans are the tensor's). */
static void test_row_solve_column_scales(void **state)
{
    const th_gpu_test_plugins *p = *state;
    GRand *rng = g_rand_new_with_seed(9);
    const uint32_t ranks[] = {16, 40};
    for (size_t ri = 0; ri < G_N_ELEMENTS(ranks); ++ri) {
        const uint32_t R = ranks[ri];
        g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[2], 31);
        g_autoptr(th_sptensor) t2 = th_gpu_test_make_tensor(&cases[1], 32);
        for (uint32_t g = 0; g < TH_GPU_TEST_N_PLUGINS; ++g) {
            const th_plugin *pl = p->gpu[g];
            double **f0 = fp32_factors(t, R, rng);
            th_instance *inst = th_test_create_instance(pl, NULL);
            th_test_load_and_set(pl, inst, t, R, f0);
            char err[TH_ERROR_SIZE] = "";
            g_autofree double *w = g_new0(double, (size_t)R * R);
            for (uint32_t c = 0; c < R; ++c)
                w[(size_t)c * R + c] = 40.0 + c;
            double lambda[128], gram[128 * 128], inner[128];
            th_als_output out = {.struct_size = sizeof out, .lambda = lambda, .gram = gram,
                                 .inner = inner};
            for (uint32_t m = 0; m < t->nmodes; ++m) {
                th_test_assert_ok(pl->entry.mttkrp(inst, m, err), err);
                th_test_assert_ok(pl->entry.als_update(inst, m, w, TH_NORM_MAX, &out, err), err);
            }
            /* The factors as held now (true values, fp32). */
            for (uint32_t m = 0; m < t->nmodes; ++m)
                th_test_assert_ok(pl->entry.get_factor(inst, m, f0[m], err), err);
            for (uint32_t mode = 0; mode < t->nmodes; ++mode) {
                const size_t n = (size_t)t->dims[mode] * R;
                candidate c = {.A = g_new(double, n)};
                th_row_least_squares_io io;
                th_test_assert_ok(call_rls(pl, inst, mode, 1e-3, 0, 0, &io, err), err);
                c.name = pl->info->id;
                c.singular = io.singular_rows;
                c.empty = io.empty_rows;
                c.norm = io.factor_norm_squared;
                c.residual = io.residual_squared;
                c.f32 = pl->info->value_type == TH_VALUE_F32;
                th_test_assert_ok(pl->entry.get_factor(inst, mode, c.A, err), err);
                g_autofree char *what = g_strdup_printf(
                    "%s after als_update, rank %u, mode %u", cases[2].name, R, mode);
                check_mode(t, f0, R, mode, 1e-3, 0, &c, 1, SCALED_BACKWARD_TOLERANCE, what);
                memcpy(f0[mode], c.A, sizeof(double) * n);
                g_free(c.A);
                /* The next mode's MTTKRP reads the solved factor. */
                const uint32_t next = (mode + 1) % t->nmodes;
                const size_t nn = (size_t)t->dims[next] * R;
                g_autofree double *got = g_new(double, nn);
                g_autofree double *want = g_new(double, nn);
                th_gpu_test_run_mode(pl, inst, t, R, next, got);
                host_mttkrp(t, f0, R, next, want);
                const double rel = th_test_relative_error(got, want, nn);
                if (!(rel < MTTKRP_TOLERANCE))
                    fail_msg("%s: %s: MTTKRP of mode %u after the solve: relative error %.3g",
                             what, pl->info->id, next, rel);
            }
            th_test_free_factors(f0, t->nmodes);
            /* Another tensor into the same instance. */
            double **f2 = fp32_factors(t2, R, rng);
            th_test_load_and_set(pl, inst, t2, R, f2);
            for (uint32_t mode = 0; mode < t2->nmodes; ++mode) {
                candidate c = {.A = g_new(double, (size_t)t2->dims[mode] * R)};
                run_candidate(pl, inst, t2, f2, R, mode, 0.0, 0, &c);
                g_autofree char *what = g_strdup_printf("%s after another tensor, rank %u, mode %u",
                                                        cases[1].name, R, mode);
                check_mode(t2, f2, R, mode, 0.0, 0, &c, 1, BACKWARD_TOLERANCE, what);
                g_free(c.A);
            }
            th_test_free_factors(f2, t2->nmodes);
            pl->entry.destroy(inst);
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

static void test_row_solve_errors(void **state)
{
    const th_gpu_test_plugins *p = *state;
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[0], 5);
    th_coo_tensor view;
    th_test_coo_view(t, &view);
    for (uint32_t g = 0; g < TH_GPU_TEST_N_PLUGINS; ++g) {
        const th_plugin *pl = p->gpu[g];
        assert_non_null(pl->entry.row_least_squares);
        assert_true(pl->plugin_entry_size >= TH_PLUGIN_ENTRY_V1_5_SIZE);
        th_instance *inst = th_test_create_instance(pl, NULL);
        char err[TH_ERROR_SIZE] = "";
        expect(call_rls(pl, inst, 0, 0.0, 0, 0, NULL, err), TH_ERR_BAD_STATE, err, "no tensor",
               "row_least_squares before load");
        GRand *rng = g_rand_new_with_seed(g);
        double **f = fp32_factors(t, 8, rng);
        g_rand_free(rng);
        th_test_load_and_set(pl, inst, t, 8, f);
        th_test_free_factors(f, t->nmodes);
        expect(pl->entry.row_least_squares(inst, NULL, err), TH_ERR_INVALID_ARGUMENT, err, "NULL",
               "row_least_squares NULL io");
        th_row_least_squares_io shortio = {.struct_size = TH_ROW_LEAST_SQUARES_IO_V1_5_SIZE - 1};
        expect(pl->entry.row_least_squares(inst, &shortio, err), TH_ERR_INVALID_ARGUMENT, err,
               "shorter than", "row_least_squares short io");
        expect(call_rls(pl, inst, 3, 0.0, 0, 0, NULL, err), TH_ERR_INVALID_ARGUMENT, err,
               "mode 3", "row_least_squares mode 3");
        expect(call_rls(pl, inst, 0, -1.0, 0, 0, NULL, err), TH_ERR_INVALID_ARGUMENT, err,
               "ridge", "row_least_squares ridge -1");
        expect(call_rls(pl, inst, 0, NAN, 0, 0, NULL, err), TH_ERR_INVALID_ARGUMENT, err, "ridge",
               "row_least_squares ridge NaN");
        expect(call_rls(pl, inst, 0, INFINITY, 0, 0, NULL, err), TH_ERR_INVALID_ARGUMENT, err,
               "ridge", "row_least_squares ridge inf");
        expect(call_rls(pl, inst, 0, 0.0, 2, 1, NULL, err), TH_ERR_INVALID_ARGUMENT, err,
               "nonneg 2", "row_least_squares nonneg 2");
        expect(call_rls(pl, inst, 0, 0.0, 1, 0, NULL, err), TH_ERR_INVALID_ARGUMENT, err,
               "passes", "row_least_squares nonneg 1, passes 0");
        /* passes is unused without nonneg; the out-fields are written. */
        th_row_least_squares_io io;
        th_test_assert_ok(call_rls(pl, inst, 1, 1e-3, 0, 0, &io, err), err);
        assert_true(io.factor_norm_squared > 0.0);
        assert_true(io.empty_rows == 0); /* every row of the uniform case has nonzeros */
        pl->entry.destroy(inst);

        /* Several ranks (virtual, on device 0): not implemented. */
        inst = th_test_create_instance(pl, "devices", "0,0", NULL);
        th_test_assert_ok(pl->entry.load_tensor(inst, &view, 8, err), err);
        expect(call_rls(pl, inst, 0, 1e-3, 0, 0, NULL, err), TH_ERR_UNSUPPORTED, err,
               "multi-GPU row least squares", "row_least_squares on 2 ranks");
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
        cmocka_unit_test(test_row_solve_errors),
        cmocka_unit_test(test_row_solve_column_scales),
        cmocka_unit_test(test_row_solve_split_rows),
        cmocka_unit_test(test_row_solve_matches_oracle),
    };
    return cmocka_run_group_tests(tests, th_gpu_test_setup_plugins, th_gpu_test_teardown_plugins);
}
