/* CP-APR (the Poisson model, multiplicative updates) through cpu-reference:
 * the iterations of an independent naive implementation of pyttb's
 * tt_cp_apr_mu (with Tensor Toolbox's Phi > 1 test of inadmissible zeros),
 * a log-likelihood that never decreases, a planted Poisson tensor
 * recovered (factor match score), the published 1-norm form, the tensor
 * checks and the not-counts warning, and the plan's refusal of a plugin
 * without the 1.4 functions. Also the model's config keys and rules.
 *
 * The runs need cpu-reference's generalized_mttkrp and factor_update (ABI
 * 1.4); a build whose cpu-reference lacks them skips those tests. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <glib.h>

#include "base/rng.h"
#include "config/config.h"
#include "plugin/backend.h"
#include "cpd/cp_als.h"
#include "cpd/cp_apr.h"
#include "cpd/cp_model.h"
#include "cpd/cpd_session.h"
#include "cpd/cpd_warnings.h"
#include "test_support.h"

static th_backend *open_backend(const char *name)
{
    g_autoptr(GPtrArray) search = g_ptr_array_new();
    g_ptr_array_add(search, (gpointer)TH_PLUGIN_DIR);
    g_autoptr(GError) error = NULL;
    th_backend *backend = th_backend_open(name, search, NULL, NULL, &error);
    if (!backend)
        fail_msg("cannot open %s: %s", name, error->message);
    return backend;
}

/* cpu-reference, or a skip when it has no 1.4 functions yet. */
#define OPEN_CPU_REFERENCE_OR_SKIP(backend)                                                    \
    g_autoptr(th_backend) backend = open_backend("cpu-reference");                            \
    if (!th_backend_has_generalized_mttkrp(backend)) {                                        \
        print_message("cpu-reference lacks generalized_mttkrp/factor_update: skipped\n");     \
        skip();                                                                                \
    }

static th_cpd_params poisson_params(uint32_t rank, uint32_t max_iters)
{
    return (th_cpd_params){
        .model = TH_MODEL_POISSON,
        .apr = th_apr_params_default(),
        .rank = rank,
        .max_iters = max_iters,
        .tolerance = TH_APR_DEFAULT_TOLERANCE,
        .seed = 7,
    };
}

static th_cpd_result *run_apr(th_backend *backend, const th_sptensor *t, const th_cpd_params *p)
{
    g_autoptr(GError) error = NULL;
    if (!th_cpd_plan(backend, p, NULL, &error))
        fail_msg("plan: %s", error->message);
    if (!th_backend_load_tensor(backend, t, p->rank, &error))
        fail_msg("load_tensor: %s", error->message);
    th_cpd_result *r = th_cp_apr(backend, t, p, NULL, &error);
    if (!r)
        fail_msg("cp_apr: %s", error->message);
    return r;
}

/* A sparse tensor of Poisson counts: every cell of the box drawn from
 * Poisson(mean(cell)) (Knuth's method; the means here are small), the
 * nonzero ones kept. */
static uint64_t poisson_draw(th_rng *rng, double mean)
{
    const double limit = exp(-mean);
    double product = th_rng_uniform(rng);
    uint64_t k = 0;
    while (product > limit) {
        ++k;
        product *= th_rng_uniform(rng);
    }
    return k;
}

typedef struct planted {
    double lambda[8];
    double *factors[3];
} planted;

static double model_value(const planted *p, uint32_t rank, const th_index *idx)
{
    double v = 0.0;
    for (uint32_t r = 0; r < rank; ++r)
        v += p->lambda[r] * p->factors[0][idx[0] * rank + r] * p->factors[1][idx[1] * rank + r] *
             p->factors[2][idx[2] * rank + r];
    return v;
}

/* Columns of unit 1-norm, each concentrated on a random part of its mode
 * (entries uniform^4), so the components are well separated. */
static planted planted_model(const th_index *dims, uint32_t rank, const double *lambda,
                             th_rng *rng)
{
    planted p;
    memset(&p, 0, sizeof p);
    memcpy(p.lambda, lambda, sizeof(double) * rank);
    for (uint32_t m = 0; m < 3; ++m) {
        p.factors[m] = g_new(double, (size_t)dims[m] * rank);
        for (uint32_t r = 0; r < rank; ++r) {
            double sum = 0.0;
            for (th_index i = 0; i < dims[m]; ++i) {
                const double u = th_rng_uniform(rng);
                p.factors[m][i * rank + r] = u * u * u * u;
                sum += u * u * u * u;
            }
            for (th_index i = 0; i < dims[m]; ++i)
                p.factors[m][i * rank + r] /= sum;
        }
    }
    return p;
}

static void planted_clear(planted *p)
{
    for (uint32_t m = 0; m < 3; ++m)
        g_free(p->factors[m]);
}

static th_sptensor *draw_counts(const planted *p, const th_index *dims, uint32_t rank,
                                th_rng *rng)
{
    const uint64_t cells = (uint64_t)dims[0] * dims[1] * dims[2];
    g_autofree double *counts = g_new0(double, cells);
    uint64_t nnz = 0;
    for (uint64_t c = 0; c < cells; ++c) {
        const th_index idx[3] = {(th_index)(c / ((uint64_t)dims[1] * dims[2])),
                                 (th_index)(c / dims[2] % dims[1]), (th_index)(c % dims[2])};
        counts[c] = (double)poisson_draw(rng, model_value(p, rank, idx));
        nnz += counts[c] > 0.0;
    }
    th_sptensor *t = th_sptensor_new(3, nnz);
    memcpy(t->dims, dims, sizeof(th_index) * 3);
    uint64_t k = 0;
    for (uint64_t c = 0; c < cells; ++c) {
        if (counts[c] == 0.0)
            continue;
        t->indices[0][k] = (th_index)(c / ((uint64_t)dims[1] * dims[2]));
        t->indices[1][k] = (th_index)(c / dims[2] % dims[1]);
        t->indices[2][k] = (th_index)(c % dims[2]);
        t->values[k++] = counts[c];
    }
    return t;
}

/* ---- The naive reference: pyttb's tt_cp_apr_mu, line by line --------------- */

typedef struct naive {
    uint32_t nmodes, rank;
    const th_index *dims;
    double *a[TH_MAX_MODES];   /* dims[m] x rank */
    double *phi[TH_MAX_MODES]; /* the latest Phi of each mode */
    double lambda[16];
} naive;

static void naive_normalize(naive *s, uint32_t n, double *norms)
{
    for (uint32_t r = 0; r < s->rank; ++r) {
        double sum = 0.0;
        for (th_index i = 0; i < s->dims[n]; ++i)
            sum += fabs(s->a[n][i * s->rank + r]);
        if (sum > 0.0)
            for (th_index i = 0; i < s->dims[n]; ++i)
                s->a[n][i * s->rank + r] /= sum;
        norms[r] = sum;
    }
}

static double naive_model(const naive *s, const th_sptensor *t, uint64_t k, const double *w,
                          int32_t skip, uint32_t r_only)
{
    double total = 0.0;
    for (uint32_t r = 0; r < s->rank; ++r) {
        if (r_only != UINT32_MAX && r != r_only)
            continue;
        double product = w ? w[r] : 1.0;
        for (uint32_t m = 0; m < s->nmodes; ++m)
            if ((int32_t)m != skip)
                product *= s->a[m][t->indices[m][k] * s->rank + r];
        total += product;
    }
    return total;
}

static void naive_phi(naive *s, const th_sptensor *t, uint32_t n, double eps)
{
    const uint32_t R = s->rank;
    memset(s->phi[n], 0, sizeof(double) * s->dims[n] * R);
    for (uint64_t k = 0; k < t->nnz; ++k) {
        const double m = naive_model(s, t, k, NULL, -1, UINT32_MAX);
        const double ratio = t->values[k] / MAX(m, eps);
        for (uint32_t r = 0; r < R; ++r)
            s->phi[n][t->indices[n][k] * R + r] += ratio * naive_model(s, t, k, NULL, (int32_t)n, r);
    }
}

static double naive_log_likelihood(const naive *s, const th_sptensor *t)
{
    double ll = 0.0;
    for (uint64_t k = 0; k < t->nnz; ++k)
        ll += t->values[k] * log(naive_model(s, t, k, s->lambda, -1, UINT32_MAX));
    for (uint32_t r = 0; r < s->rank; ++r)
        ll -= s->lambda[r];
    return ll;
}

/* The log-likelihood after each outer iteration into ll[]; returns how
 * many iterations ran. */
static uint32_t naive_cp_apr(const th_sptensor *t, double *const *initial,
                             const th_cpd_params *p, double *ll, double *kkt_out)
{
    naive s = {.nmodes = t->nmodes, .rank = p->rank, .dims = t->dims};
    const uint32_t R = p->rank;
    double norms[16];
    for (uint32_t r = 0; r < R; ++r)
        s.lambda[r] = 1.0;
    for (uint32_t m = 0; m < s.nmodes; ++m) {
        s.a[m] = g_memdup2(initial[m], sizeof(double) * t->dims[m] * R);
        s.phi[m] = g_new0(double, (size_t)t->dims[m] * R);
        naive_normalize(&s, m, norms);
        for (uint32_t r = 0; r < R; ++r)
            s.lambda[r] *= norms[r];
    }
    double kkt[TH_MAX_MODES] = {0};
    uint32_t done = 0;
    for (uint32_t outer = 0; outer < p->max_iters; ++outer) {
        gboolean converged = TRUE;
        for (uint32_t n = 0; n < s.nmodes; ++n) {
            const size_t size = (size_t)t->dims[n] * R;
            if (outer > 0)
                for (size_t e = 0; e < size; ++e)
                    if (s.phi[n][e] > p->apr.phi_threshold && s.a[n][e] < p->apr.kappa_tolerance)
                        s.a[n][e] += p->apr.kappa;
            for (size_t e = 0; e < size; ++e)
                s.a[n][e] *= s.lambda[e % R];
            for (uint32_t r = 0; r < R; ++r)
                s.lambda[r] = 1.0;
            for (uint32_t i = 0; i < p->apr.max_inner_iters; ++i) {
                naive_phi(&s, t, n, p->apr.epsilon);
                double v = 0.0;
                for (size_t e = 0; e < size; ++e)
                    v = MAX(v, fabs(MIN(s.a[n][e], 1.0 - s.phi[n][e])));
                kkt[n] = v;
                if (v < p->tolerance)
                    break;
                converged = FALSE;
                for (size_t e = 0; e < size; ++e)
                    s.a[n][e] *= s.phi[n][e];
            }
            naive_normalize(&s, n, s.lambda);
        }
        ll[outer] = naive_log_likelihood(&s, t);
        kkt_out[outer] = 0.0;
        for (uint32_t n = 0; n < s.nmodes; ++n)
            kkt_out[outer] = MAX(kkt_out[outer], kkt[n]);
        done = outer + 1;
        if (converged)
            break;
    }
    for (uint32_t m = 0; m < s.nmodes; ++m) {
        g_free(s.a[m]);
        g_free(s.phi[m]);
    }
    return done;
}

/* A small count tensor with zero rows in places (so inadmissible zeros and
 * zero columns can arise). */
static th_sptensor *small_counts(uint64_t seed)
{
    const th_index dims[3] = {5, 4, 6};
    th_rng rng;
    th_rng_seed(&rng, seed);
    const double lambda[3] = {30.0, 20.0, 10.0};
    planted p = planted_model(dims, 3, lambda, &rng);
    th_sptensor *t = draw_counts(&p, dims, 3, &rng);
    planted_clear(&p);
    return t;
}

static void test_matches_naive_mu(void **state)
{
    (void)state;
    OPEN_CPU_REFERENCE_OR_SKIP(backend);
    for (uint64_t seed = 1; seed <= 3; ++seed) {
        g_autoptr(th_sptensor) t = small_counts(seed);
        th_cpd_params p = poisson_params(2 + (uint32_t)(seed % 2), 40);
        p.apr.max_inner_iters = 5;
        double **initial = th_cpd_initial_factors(t->dims, t->nmodes, p.rank, 11 + seed);
        p.initial_factors = (const double *const *)initial;
        g_autoptr(th_cpd_result) r = run_apr(backend, t, &p);
        double ll[64], kkt[64];
        const uint32_t n = naive_cp_apr(t, initial, &p, ll, kkt);
        th_cpd_free_factors(initial, t->nmodes);
        assert_int_equal(r->model, TH_MODEL_POISSON);
        assert_int_equal(r->iterations->len, n);
        for (uint32_t i = 0; i < n; ++i) {
            const th_cpd_iteration *it = &g_array_index(r->iterations, th_cpd_iteration, i);
            if (fabs(it->log_likelihood - ll[i]) > 1e-10 * fabs(ll[i]))
                fail_msg("seed %" G_GUINT64_FORMAT " iteration %u: log-likelihood %.17g, naive "
                         "%.17g",
                         seed, i + 1, it->log_likelihood, ll[i]);
            assert_true(fabs(it->kkt_violation - kkt[i]) <= 1e-8 * MAX(1.0, kkt[i]));
            assert_true(it->fit == it->log_likelihood);
        }
        assert_true(fabs(r->log_likelihood - ll[n - 1]) <= 1e-10 * fabs(ll[n - 1]));
    }
}

static void test_log_likelihood_never_decreases(void **state)
{
    (void)state;
    OPEN_CPU_REFERENCE_OR_SKIP(backend);
    g_autoptr(th_sptensor) t = small_counts(42);
    th_cpd_params p = poisson_params(4, 200);
    g_autoptr(th_cpd_result) r = run_apr(backend, t, &p);
    assert_true(r->iterations->len >= 2);
    for (guint i = 1; i < r->iterations->len; ++i) {
        const th_cpd_iteration *a = &g_array_index(r->iterations, th_cpd_iteration, i - 1);
        const th_cpd_iteration *b = &g_array_index(r->iterations, th_cpd_iteration, i);
        if (b->log_likelihood < a->log_likelihood - 1e-9 * fabs(a->log_likelihood))
            fail_msg("iteration %u: log-likelihood fell from %.17g to %.17g", b->iteration,
                     a->log_likelihood, b->log_likelihood);
        assert_true(b->inner_iterations >= t->nmodes);
        assert_true(b->inner_iterations <= t->nmodes * p.apr.max_inner_iters);
    }
}

/* The published form: unit 1-norm columns, lambda decreasing, nonnegative;
 * the least-squares fit as an explicit residual over the stored entries
 * plus the model's mass elsewhere. */
static void assert_published_1norm(const th_cpd_result *r)
{
    for (uint32_t k = 1; k < r->rank; ++k)
        assert_true(r->lambda[k - 1] >= r->lambda[k]);
    for (uint32_t m = 0; m < r->nmodes; ++m)
        for (uint32_t c = 0; c < r->rank; ++c) {
            double sum = 0.0;
            for (th_index i = 0; i < r->dims[m]; ++i) {
                assert_true(r->factors[m][i * r->rank + c] >= 0.0);
                sum += r->factors[m][i * r->rank + c];
            }
            assert_true(r->lambda[c] == 0.0 || fabs(sum - 1.0) < 1e-12);
        }
}

static void test_planted_poisson_is_recovered(void **state)
{
    (void)state;
    OPEN_CPU_REFERENCE_OR_SKIP(backend);
    const th_index dims[3] = {30, 25, 20};
    const double lambda[3] = {20000.0, 15000.0, 10000.0};
    th_rng rng;
    th_rng_seed(&rng, 2024);
    planted truth = planted_model(dims, 3, lambda, &rng);
    g_autoptr(th_sptensor) t = draw_counts(&truth, dims, 3, &rng);
    th_cpd_params p = poisson_params(3, 1000);
    g_autoptr(th_cpd_result) r = run_apr(backend, t, &p);
    assert_published_1norm(r);
    const double score = th_cp_model_score(r->lambda, (const double *const *)r->factors,
                                           truth.lambda, (const double *const *)truth.factors,
                                           dims, 3, 3);
    print_message("planted: %u iterations, log-likelihood %.6e, KKT %.3e, fit %.4f, FMS %.4f\n",
                  r->iterations->len, r->log_likelihood, r->kkt_violation, r->fit, score);
    assert_true(score >= 0.95);
    assert_true(r->fit > 0.0 && r->fit < 1.0);
    /* The least-squares fit against a dense evaluation. */
    g_autofree double *dense = th_test_densify(t);
    double residual = 0.0, norm = 0.0;
    for (th_index i = 0; i < dims[0]; ++i)
        for (th_index j = 0; j < dims[1]; ++j)
            for (th_index k = 0; k < dims[2]; ++k) {
                double model = 0.0;
                for (uint32_t c = 0; c < 3; ++c)
                    model += r->lambda[c] * r->factors[0][i * 3 + c] * r->factors[1][j * 3 + c] *
                             r->factors[2][k * 3 + c];
                const double x = dense[((size_t)i * dims[1] + j) * dims[2] + k];
                residual += (x - model) * (x - model);
                norm += x * x;
            }
    assert_true(fabs(1.0 - sqrt(residual) / sqrt(norm) - r->fit) < 1e-9);
    planted_clear(&truth);
}

/* ---- Without a backend -------------------------------------------------- */

static void test_score_and_1norm_form(void **state)
{
    (void)state;
    const th_index dims[3] = {6, 5, 4};
    th_rng rng;
    th_rng_seed(&rng, 5);
    const double lambda[3] = {3.0, 9.0, 1.0};
    planted a = planted_model(dims, 3, lambda, &rng);
    /* The same model, columns scaled and permuted, weights compensating. */
    planted b;
    memset(&b, 0, sizeof b);
    const uint32_t perm[3] = {2, 0, 1};
    for (uint32_t m = 0; m < 3; ++m) {
        b.factors[m] = g_new(double, dims[m] * 3);
        for (th_index i = 0; i < dims[m]; ++i)
            for (uint32_t c = 0; c < 3; ++c)
                b.factors[m][i * 3 + c] = a.factors[m][i * 3 + perm[c]] * (m + 2.0);
    }
    for (uint32_t c = 0; c < 3; ++c)
        b.lambda[c] = a.lambda[perm[c]] / (2.0 * 3.0 * 4.0);
    assert_true(fabs(th_cp_model_score(a.lambda, (const double *const *)a.factors, b.lambda,
                                       (const double *const *)b.factors, dims, 3, 3) -
                     1.0) < 1e-12);
    /* Another weight lowers the score by the lambda penalty. */
    b.lambda[1] *= 0.5;
    const double lower = th_cp_model_score(a.lambda, (const double *const *)a.factors, b.lambda,
                                           (const double *const *)b.factors, dims, 3, 3);
    assert_true(fabs(lower - (2.0 + 0.5) / 3.0) < 1e-12);
    /* arrange_1norm: unit 1-norm columns, lambda decreasing. */
    th_cp_model_arrange_1norm(b.lambda, b.factors, dims, 3, 3);
    assert_true(b.lambda[0] >= b.lambda[1] && b.lambda[1] >= b.lambda[2]);
    assert_true(fabs(b.lambda[0] - 9.0) < 1e-12);
    for (uint32_t c = 0; c < 3; ++c) {
        double sum = 0.0;
        for (th_index i = 0; i < dims[0]; ++i)
            sum += b.factors[0][i * 3 + c];
        assert_true(fabs(sum - 1.0) < 1e-12);
    }
    planted_clear(&a);
    planted_clear(&b);
}

static void test_tensor_checks(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = small_counts(3);
    uint64_t non_integer = 99;
    g_autoptr(GError) error = NULL;
    assert_true(th_cp_apr_check_tensor(t, &non_integer, &error));
    assert_int_equal(non_integer, 0);
    t->values[1] = 2.5;
    assert_true(th_cp_apr_check_tensor(t, &non_integer, &error));
    assert_int_equal(non_integer, 1);
    g_autoptr(GPtrArray) warnings = th_cpd_warnings_new();
    const th_cpd_warning_terms terms = {.tensor = "x.tns", .rank = "rank",
                                        .max_iters = "max_iters", .tolerance = "tolerance"};
    th_cpd_count_warnings(warnings, non_integer, t->nnz, &terms);
    assert_int_equal(warnings->len, 1);
    const th_cpd_warning *w = g_ptr_array_index(warnings, 0);
    assert_int_equal(w->code, TH_CPD_WARN_NOT_COUNTS);
    assert_non_null(strstr(w->message, "values are not counts (integers)"));
    t->values[2] = -1.0;
    assert_false(th_cp_apr_check_tensor(t, NULL, &error));
    assert_true(g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT));
    assert_non_null(strstr(error->message, "entry 3 ("));
    assert_non_null(strstr(error->message, "-1"));
    /* The session prepares a Poisson tensor without scaling it. */
    g_clear_error(&error);
    t->values[2] = 1e300;
    assert_true(th_cpd_prepare_tensor_for(t, TH_MODEL_POISSON, NULL, &error));
    assert_true(t->value_scale == 1.0 && t->values[2] == 1e300);
}

/* A plugin without the 1.4 functions: the plan names it and them. */
static void test_plan_refuses_plugin_without_functions(void **state)
{
    (void)state;
    g_autoptr(GError) error = NULL;
    g_autoptr(th_backend) backend =
        th_backend_open(TH_FIXTURE_PLUGIN_DIR "/fixture_sweep.so", NULL, NULL, NULL, &error);
    if (!backend)
        fail_msg("fixture_sweep: %s", error->message);
    if (th_backend_has_generalized_mttkrp(backend))
        skip();
    th_cpd_params p = poisson_params(2, 10);
    assert_false(th_cpd_plan(backend, &p, NULL, &error));
    assert_true(g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_MODEL));
    assert_non_null(strstr(error->message, "generalized_mttkrp"));
    assert_non_null(strstr(error->message, "factor_update"));
    assert_non_null(strstr(error->message, th_backend_info(backend)->id));
    g_autoptr(th_cpd_session) session =
        th_cpd_session_new(backend, &p, NULL,
                           &(th_cpd_warning_terms){"t", "rank", "max_iters", "tolerance"},
                           NULL);
    assert_null(session);
}

/* The session runs the model and warns of non-counts. */
static void test_session_runs_poisson(void **state)
{
    (void)state;
    OPEN_CPU_REFERENCE_OR_SKIP(backend);
    g_autoptr(th_sptensor) t = small_counts(8);
    t->values[0] += 0.5;
    th_cpd_params p = poisson_params(2, 30);
    g_autoptr(GError) error = NULL;
    const th_cpd_warning_terms terms = {"x.tns", "rank", "max_iters", "tolerance"};
    g_autoptr(th_cpd_session) s = th_cpd_session_new(backend, &p, NULL, &terms, &error);
    assert_non_null(s);
    assert_true(th_cpd_session_prepare(s, t, NULL, &error));
    const GPtrArray *warnings = th_cpd_session_warnings(s);
    gboolean warned = FALSE;
    for (guint i = 0; i < warnings->len; ++i)
        warned |= ((const th_cpd_warning *)g_ptr_array_index(warnings, i))->code ==
                  TH_CPD_WARN_NOT_COUNTS;
    assert_true(warned);
    assert_true(th_cpd_session_load(s, &error));
    g_autoptr(th_cpd_result) r = th_cpd_session_run(s, NULL, &error);
    assert_non_null(r);
    assert_int_equal(r->model, TH_MODEL_POISSON);
    assert_true(isfinite(r->log_likelihood) && isfinite(r->kkt_violation));
    assert_published_1norm(r);
    /* Given initial factors must be nonnegative: the error names the mode. */
    g_autoptr(th_cpd_result) r2 = NULL;
    double **initial = th_cpd_initial_factors(t->dims, 3, 2, 1);
    initial[1][3] = -0.5;
    p.initial_factors = (const double *const *)initial;
    r2 = th_cp_apr(backend, t, &p, NULL, &error);
    th_cpd_free_factors(initial, 3);
    assert_null(r2);
    assert_true(g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT));
    assert_non_null(strstr(error->message, "mode 1"));
}

/* ---- Config ----------------------------------------------------------- */

static th_config *load(const char *text, GError **error)
{
    return th_config_load_from_string("/tmp/run.toml", text, -1, NULL, error);
}

static void assert_config_error(const char *text, const char *a, const char *b)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(th_config) c = load(text, &error);
    if (c)
        fail_msg("accepted: %s", text);
    if (!strstr(error->message, a) || (b && !strstr(error->message, b)))
        fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", error->message, a, b ? b : "");
}

static void test_config_model(void **state)
{
    (void)state;
    g_autoptr(GError) error = NULL;
    {
        g_autoptr(th_config) c = load("[tensor]\npath = \"x.tns\"\n", &error);
        assert_non_null(c);
        assert_string_equal(c->model, "least-squares");
        assert_int_equal(c->max_iters, 50);
        assert_true(c->tolerance == 1e-5);
        th_cpd_params p = th_cpd_params_from_config(c, 3);
        assert_int_equal(p.model, TH_MODEL_LEAST_SQUARES);
    }
    {
        g_autoptr(th_config) c =
            load("[tensor]\npath = \"x.tns\"\n[cpd]\nmodel = \"poisson\"\n", &error);
        assert_non_null(c);
        assert_int_equal(c->max_iters, 1000);
        assert_true(c->tolerance == 1e-4);
        th_cpd_params p = th_cpd_params_from_config(c, 3);
        assert_int_equal(p.model, TH_MODEL_POISSON);
        assert_int_equal(p.apr.max_inner_iters, 10);
        assert_true(p.apr.kappa == 0.01 && p.apr.kappa_tolerance == 1e-10 &&
                    p.apr.epsilon == 1e-10);
    }
    {
        g_autoptr(th_config) c = load("[tensor]\npath = \"x.tns\"\n[cpd]\nmodel = \"poisson\"\n"
                                      "max_iters = 7\ntolerance = 0.5\nmax_inner_iters = 3\n"
                                      "kappa = 0.5\nkappa_tolerance = 1e-6\nepsilon = 1e-8\n",
                                      &error);
        assert_non_null(c);
        th_cpd_params p = th_cpd_params_from_config(c, 3);
        assert_int_equal(p.max_iters, 7);
        assert_true(p.tolerance == 0.5);
        assert_int_equal(p.apr.max_inner_iters, 3);
        assert_true(p.apr.kappa == 0.5 && p.apr.kappa_tolerance == 1e-6 && p.apr.epsilon == 1e-8);
    }
    assert_config_error("[tensor]\npath = \"x.tns\"\n[cpd]\nkappa = 0.5\n",
                        "/tmp/run.toml:4:", "cpd.kappa");
    assert_config_error("[tensor]\npath = \"x.tns\"\n[cpd]\nrank = 2\nmax_inner_iters = 5\n",
                        "/tmp/run.toml:5:", "least-squares");
    assert_config_error("[tensor]\npath = \"x.tns\"\n[cpd]\nmodel = \"poisson\"\nupdate = \"host\"\n",
                        "/tmp/run.toml:5:", "cpd.update");
    assert_config_error("[tensor]\npath = \"x.tns\"\n[cpd]\nmodel = \"gamma\"\n",
                        "/tmp/run.toml:4:", "model");
    assert_config_error("[tensor]\npath = \"x.tns\"\n[cpd]\nmodel = \"poisson\"\nepsilon = 0\n",
                        "/tmp/run.toml:5:", "cpd.epsilon");
    assert_config_error("[tensor]\npath = \"x.tns\"\n[cpd]\nmodel = \"poisson\"\n"
                        "[backend.options]\ndevices = \"0,1\"\n",
                        "/tmp/run.toml:6:", "multi-GPU CP-APR");
    assert_config_error("[tensor]\npath = \"x.tns\"\n[cpd]\nmodel = \"poisson\"\n"
                        "[backend.options.gpu-adaptive]\ndevices = \"all\"\n",
                        "/tmp/run.toml:6:", "not implemented yet");
    /* One device is fine. */
    g_autoptr(th_config) one = load("[tensor]\npath = \"x.tns\"\n[cpd]\nmodel = \"poisson\"\n"
                                    "[backend.options]\ndevices = \"1\"\n",
                                    &error);
    assert_non_null(one);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_score_and_1norm_form),
        cmocka_unit_test(test_tensor_checks),
        cmocka_unit_test(test_config_model),
        cmocka_unit_test(test_plan_refuses_plugin_without_functions),
        cmocka_unit_test(test_matches_naive_mu),
        cmocka_unit_test(test_log_likelihood_never_decreases),
        cmocka_unit_test(test_planted_poisson_is_recovered),
        cmocka_unit_test(test_session_runs_poisson),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
