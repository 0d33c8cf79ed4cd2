/* Regularised CP-ALS (cpd.l2, cpd.l1) and constrained CP-ALS on every update
 * path: the host's update against an independent oracle of the iteration,
 * the mode path against the host path, the sweep path (plugin ABI 1.6:
 * taken only from a plugin of that version; refused or broken down, the
 * host runs the modes), what l1 and l2 do to a model, and the objective.
 *
 * Plugins of two kinds stand for "built against an older header": the SDK's
 * fixture_frozen_v1_4 (a real 1.4 plugin with als_sweep), and a plugin of
 * this tree whose normalised entry copy is made to say minor 5, which is
 * what the host reads of a plugin built against the 1.5 header (the host's
 * choices depend on nothing else). The tests of a 1.6 plugin's own
 * regularised update (cpu-reference's als_update_nonneg, fixture_sweep's
 * als_sweep) first check that the plugin declares 1.6 and does not ignore
 * the fields. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <glib.h>

#include "cpd/als_step.h"
#include "cpd/cp_als.h"
#include "cpd/cpd_session.h"
#include "cpd/dense.h"
#include "plugin/backend.h"
#include "hals_oracle.h"
#include "test_support.h"

#define SWEEP_FIXTURE TH_FIXTURE_PLUGIN_DIR "/fixture_sweep.so"
#define FROZEN_V1_4 TH_ABI_PLUGIN_DIR "/fixture_frozen_v1_4.so"

/* `plugin` (a name or a path) with one option KEY=VALUE, or none. */
static th_backend *open_plugin(const char *plugin, const char *option)
{
    g_autoptr(GPtrArray) search = g_ptr_array_new();
    g_ptr_array_add(search, (gpointer)TH_PLUGIN_DIR);
    g_autoptr(GPtrArray) options = g_ptr_array_new();
    g_auto(GStrv) pair = option ? g_strsplit(option, "=", 2) : NULL;
    th_config_option o = {.key = pair ? pair[0] : NULL, .value = pair ? pair[1] : NULL};
    if (option)
        g_ptr_array_add(options, &o);
    g_autoptr(GError) error = NULL;
    th_backend *backend = th_backend_open(plugin, search, options, NULL, &error);
    if (!backend)
        fail_msg("cannot open %s: %s", plugin, error->message);
    return backend;
}

static th_cpd_result *run(th_backend *backend, const th_sptensor *t, const th_cpd_params *params)
{
    g_autoptr(GError) error = NULL;
    if (!th_backend_load_tensor(backend, t, params->rank, &error))
        fail_msg("load_tensor: %s", error->message);
    th_cpd_result *r = th_cp_als(backend, t, params, NULL, &error);
    if (!r)
        fail_msg("cp_als on %s: %s", th_backend_info(backend)->id, error->message);
    return r;
}

/* The regularisations the tests run: a ridge alone (the free modes' solve
 * with V + l2 I), every mode nonnegative with l1 and a ridge, and a mix (a
 * nonnegative mode, an unconstrained one with l1, a free one). */
typedef struct reg_case {
    const char *name;
    double l2;
    double l1[3];
    uint32_t l1_listed;
    uint64_t nonneg_modes;
} reg_case;

static const reg_case cases[] = {
    {"ridge", 0.7, {0.0}, 0, 0},
    {"nonneg + l1 + ridge", 0.2, {0.3}, 0, UINT64_MAX},
    {"mixed", 0.1, {0.0, 0.5, 0.0}, 3, 1u},
};

static th_cpd_params params_of(const reg_case *c, uint32_t rank, uint32_t iterations,
                               th_update_path update)
{
    th_cpd_params p = {.rank = rank, .max_iters = iterations, .tolerance = 0, .seed = 5,
                       .update = update, .l2 = c->l2, .l1_listed = c->l1_listed,
                       .nonneg_modes = c->nonneg_modes};
    memcpy(p.l1, c->l1, sizeof c->l1);
    return p;
}

static gboolean has_descent(const reg_case *c)
{
    th_cpd_params p = params_of(c, 2, 1, TH_UPDATE_AUTO);
    return th_cpd_descent_mask(&p, 3) != 0;
}

/* The same run within rounding: every iteration's fit to 1e-12, the
 * model's weights and factors to 1e-10 (relative), the objective to 1e-12
 * (relative). FALSE with *why when not. */
static gboolean same_run(const th_cpd_result *a, const th_cpd_result *b, char **why)
{
    if (a->iterations->len != b->iterations->len) {
        *why = g_strdup_printf("%u against %u iterations", a->iterations->len,
                               b->iterations->len);
        return FALSE;
    }
    for (guint i = 0; i < a->iterations->len; ++i) {
        const th_cpd_iteration *x = &g_array_index(a->iterations, th_cpd_iteration, i);
        const th_cpd_iteration *y = &g_array_index(b->iterations, th_cpd_iteration, i);
        if (!(fabs(x->fit - y->fit) < 1e-12)) {
            *why = g_strdup_printf("iteration %u: fit %.17g against %.17g", i + 1, x->fit,
                                   y->fit);
            return FALSE;
        }
    }
    const double lambda = th_test_relative_error(a->lambda, b->lambda, a->rank);
    if (!(lambda < 1e-10)) {
        *why = g_strdup_printf("lambda differs by %.3g", lambda);
        return FALSE;
    }
    for (uint32_t m = 0; m < a->nmodes; ++m) {
        const double e = th_test_relative_error(a->factors[m], b->factors[m],
                                                (uint64_t)a->dims[m] * a->rank);
        if (!(e < 1e-10)) {
            *why = g_strdup_printf("mode %u: factors differ by %.3g", m + 1, e);
            return FALSE;
        }
    }
    if (!(fabs(a->objective - b->objective) <= 1e-12 * fabs(b->objective)) &&
        !(isnan(a->objective) && isnan(b->objective))) {
        *why = g_strdup_printf("objective %.17g against %.17g", a->objective, b->objective);
        return FALSE;
    }
    return TRUE;
}

static void assert_same_run(const th_cpd_result *a, const th_cpd_result *b, const char *what)
{
    g_autofree char *why = NULL;
    if (!same_run(a, b, &why))
        fail_msg("%s: %s", what, why);
}

/* Pretends the plugin was built against ABI 1.`minor`: the host reads the
 * version from its normalised copy of the entry alone. */
static void pretend_minor(th_backend *backend, uint16_t minor)
{
    backend->plugin->entry.abi_version.minor = minor;
}

/* ---- (a) the host's update against an independent oracle ----------------
 * The oracle recomputes the iterations from their definition, with none of
 * the host's code: the MTTKRP over the dense tensor, the other modes' Grams
 * by their sums, the ridge's system by Gaussian elimination, the coordinate
 * descent as plugin.h words it (th_nonneg_update_io, step 2; both in
 * hals_oracle.h, shared with the other tests of the update), the column
 * norms of Tensor Toolbox's cp_als (2-norm in iteration 1, max-norm floored
 * at 1 after); then the model everywhere on the box and the objective by
 * its definition. */

typedef struct oracle {
    const th_sptensor *t;
    uint32_t rank;
    double *factors[3];
    double lambda[8];
} oracle;

static void oracle_mode(oracle *o, const th_cpd_params *p, uint32_t n, int max_norm,
                        const double *dense)
{
    const th_sptensor *t = o->t;
    const uint32_t R = o->rank;
    const th_index rows = t->dims[n];
    g_autofree double *m = g_new(double, (size_t)rows * R);
    th_test_dense_mttkrp(t, dense, o->factors, R, n, m);
    double v[64];
    for (uint32_t r = 0; r < R; ++r)
        for (uint32_t q = 0; q < R; ++q) {
            double product = 1.0;
            for (uint32_t k = 0; k < t->nmodes; ++k) {
                if (k == n)
                    continue;
                double sum = 0.0;
                for (th_index i = 0; i < t->dims[k]; ++i)
                    sum += o->factors[k][(size_t)i * R + r] * o->factors[k][(size_t)i * R + q];
                product *= sum;
            }
            v[r * R + q] = product;
        }
    const double l1 = th_cpd_l1(p, n);
    const gboolean nonneg = (p->nonneg_modes >> n) & 1u;
    double *a = o->factors[n];
    if (!nonneg && l1 == 0.0) {
        for (th_index i = 0; i < rows; ++i) {
            double s[64], b[8];
            for (uint32_t r = 0; r < R; ++r) {
                for (uint32_t q = 0; q < R; ++q)
                    s[r * R + q] = v[r * R + q] + (r == q ? p->l2 : 0.0);
                b[r] = m[(size_t)i * R + r];
            }
            assert_true(th_test_solve_small(s, b, R));
            memcpy(a + (size_t)i * R, b, sizeof(double) * R);
        }
    } else {
        for (th_index i = 0; i < rows; ++i)
            for (uint32_t r = 0; r < R; ++r)
                a[(size_t)i * R + r] *= o->lambda[r];
        (void)th_test_hals_columns(m, v, rows, R, p->l2, l1, nonneg, TH_HALS_SWEEPS,
                                   TH_HALS_TOLERANCE, a);
    }
    for (uint32_t r = 0; r < R; ++r) {
        double norm = 0.0;
        for (th_index i = 0; i < rows; ++i) {
            const double x = a[(size_t)i * R + r];
            norm = max_norm ? fmax(norm, fabs(x)) : norm + x * x;
        }
        norm = max_norm ? fmax(norm, 1.0) : sqrt(norm);
        o->lambda[r] = norm;
        for (th_index i = 0; i < rows && norm > 0.0; ++i)
            a[(size_t)i * R + r] /= norm;
    }
}

/* The model's value at cell k of the dense box (mode 0 slowest). */
static double model_at(const double *lambda, double *const *factors, const th_sptensor *t,
                       uint32_t rank, uint64_t cell)
{
    th_index index[3];
    for (uint32_t m = t->nmodes; m-- > 0;) {
        index[m] = (th_index)(cell % t->dims[m]);
        cell /= t->dims[m];
    }
    double sum = 0.0;
    for (uint32_t r = 0; r < rank; ++r) {
        double product = lambda[r];
        for (uint32_t m = 0; m < t->nmodes; ++m)
            product *= factors[m][(size_t)index[m] * rank + r];
        sum += product;
    }
    return sum;
}

static void test_host_update_matches_an_oracle(void **state)
{
    (void)state;
    const th_index dims[] = {4, 5, 6};
    g_autoptr(th_sptensor) t = th_test_planted_dense(dims, 3, 3, 31);
    for (uint64_t k = 0; k < t->nnz; k += 3)
        t->values[k] = -t->values[k];
    const uint64_t cells = th_test_dense_size(t, 1000);
    g_autofree double *dense = th_test_densify(t);
    g_autoptr(th_backend) backend = open_plugin("cpu-reference", NULL);
    const uint32_t rank = 3, iterations = 3;
    for (size_t c = 0; c < G_N_ELEMENTS(cases); ++c) {
        const th_cpd_params p = params_of(&cases[c], rank, iterations, TH_UPDATE_HOST);
        g_autoptr(th_cpd_result) r = run(backend, t, &p);
        assert_int_equal(r->update_path, TH_UPDATE_HOST);

        oracle o = {.t = t, .rank = rank};
        double **initial = th_cpd_initial_factors(t->dims, 3, rank, p.seed);
        for (uint32_t m = 0; m < 3; ++m)
            o.factors[m] = initial[m];
        for (uint32_t r_ = 0; r_ < rank; ++r_)
            o.lambda[r_] = 1.0;
        for (uint32_t it = 1; it <= iterations; ++it)
            for (uint32_t n = 0; n < 3; ++n)
                oracle_mode(&o, &p, n, it > 1, dense);

        /* The same model everywhere on the box (the result is in the
         * published form: sorted, signs fixed, so compare values). */
        double worst = 0.0, largest = 0.0, residual = 0.0;
        for (uint64_t k = 0; k < cells; ++k) {
            const double want = model_at(o.lambda, o.factors, t, rank, k);
            const double got = model_at(r->lambda, r->factors, t, rank, k);
            worst = fmax(worst, fabs(got - want));
            largest = fmax(largest, fabs(want));
            residual += (dense[k] - want) * (dense[k] - want);
        }
        if (!(worst <= 1e-10 * largest))
            fail_msg("%s: the model differs from the oracle's by %.3g (largest %.3g)",
                     cases[c].name, worst, largest);
        /* The objective: the last mode carries the weights. */
        double penalty = 0.0;
        for (uint32_t m = 0; m < 3; ++m)
            for (uint64_t i = 0; i < (uint64_t)t->dims[m] * rank; ++i) {
                const double a = o.factors[m][i] * (m == 2 ? o.lambda[i % rank] : 1.0);
                penalty += 0.5 * p.l2 * a * a + th_cpd_l1(&p, m) * fabs(a);
            }
        const double objective = 0.5 * residual + penalty;
        if (!(fabs(r->objective - objective) <= 1e-10 * objective))
            fail_msg("%s: objective %.17g, the oracle's %.17g", cases[c].name, r->objective,
                     objective);
        /* Each iteration's objective where every l1 is 0 (from the Grams),
         * the last one the final model's; NaN where an l1 needs the
         * factors. */
        const th_cpd_iteration *last =
            &g_array_index(r->iterations, th_cpd_iteration, iterations - 1);
        if (th_cpd_l1(&p, 0) != 0.0 || th_cpd_l1(&p, 1) != 0.0 || th_cpd_l1(&p, 2) != 0.0)
            assert_true(isnan(last->objective));
        else if (!(fabs(last->objective - objective) <= 1e-10 * objective))
            fail_msg("%s: the last iteration's objective %.17g, the oracle's %.17g",
                     cases[c].name, last->objective, objective);
        th_cpd_free_factors(initial, 3);
    }
}

/* ---- (b) the mode path -------------------------------------------------- */

/* Whether `backend` declares ABI 1.6 and still ignores als_update_nonneg's
 * 1.6 fields: asked for the unconstrained update (TH_CONSTRAINT_NONE) of a
 * mode whose least-squares solution has negative entries, it returns none. */
static gboolean nonneg_update_ignores_abi_1_6(th_backend *backend)
{
    if (!th_backend_takes_abi_1_6(backend) || !th_backend_has_als_update_nonneg(backend))
        return FALSE;
    g_autoptr(th_sptensor) t = th_test_mixed_signs();
    const uint32_t rank = 2;
    g_autoptr(GError) error = NULL;
    assert_true(th_backend_load_tensor(backend, t, rank, &error));
    double **factors = th_cpd_initial_factors(t->dims, 3, rank, 1);
    double grams[3][4], v[4], lambda[2], gram[4], inner[2];
    double *gram_of[3] = {grams[0], grams[1], grams[2]};
    for (uint32_t m = 0; m < 3; ++m) {
        assert_true(th_backend_set_factor(backend, m, factors[m], &error));
        th_dense_gram(factors[m], t->dims[m], rank, grams[m]);
    }
    assert_true(th_backend_mttkrp(backend, 0, &error));
    th_dense_hadamard_except(gram_of, 3, 0, rank, v);
    const th_descent_terms terms = {.constraint = TH_CONSTRAINT_NONE};
    const gboolean called = th_backend_als_update_descent(
        backend, 0, v, NULL, 50, 0.0, TH_NORM_2, &terms, lambda, gram, inner, NULL, &error);
    gboolean negative = FALSE;
    if (called) {
        g_autofree double *a = g_new(double, (size_t)t->dims[0] * rank);
        assert_true(th_backend_get_factor(backend, 0, a, &error));
        for (uint64_t i = 0; i < (uint64_t)t->dims[0] * rank; ++i)
            negative = negative || a[i] < 0.0;
    }
    /* The host's update of the same mode has them (else the probe tells
     * nothing). */
    g_autofree double *m = g_new(double, (size_t)t->dims[0] * rank);
    g_autofree double *host = g_memdup2(factors[0], sizeof(double) * t->dims[0] * rank);
    assert_true(th_backend_get_mttkrp_result(backend, 0, m, &error));
    (void)th_dense_hals(m, v, t->dims[0], rank, 0.0, 0.0, TH_CONSTRAINT_NONE, 50, 0.0, host);
    gboolean host_negative = FALSE;
    for (uint64_t i = 0; i < (uint64_t)t->dims[0] * rank; ++i)
        host_negative = host_negative || host[i] < 0.0;
    assert_true(host_negative);
    th_cpd_free_factors(factors, 3);
    return called && !negative;
}

/* On a plugin before ABI 1.6 (cpu-reference, whose entry is made to say
 * 1.5): "auto" is the mode path, the free modes update in the backend
 * (als_update with the ridge's inverse, which needs no new field), the
 * modes that need a ridge, an l1 or no constraint on the host; the run is
 * the host path's. */
static void test_mode_path_on_an_older_plugin_matches_the_host_path(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = th_test_mixed_signs();
    g_autoptr(th_backend) backend = open_plugin("cpu-reference", NULL);
    const uint16_t declared = (uint16_t)th_backend_abi_minor(backend);
    pretend_minor(backend, 5);
    for (size_t c = 0; c < G_N_ELEMENTS(cases); ++c) {
        const th_cpd_params host = params_of(&cases[c], 2, 20, TH_UPDATE_HOST);
        g_autoptr(th_cpd_result) on_host = run(backend, t, &host);
        const th_cpd_params automatic = params_of(&cases[c], 2, 20, TH_UPDATE_AUTO);
        g_autoptr(th_cpd_result) on_modes = run(backend, t, &automatic);
        assert_int_equal(on_modes->update_path, TH_UPDATE_MODE);
        assert_int_equal(on_modes->pinv_fallbacks + on_host->pinv_fallbacks, 0);
        assert_same_run(on_modes, on_host, cases[c].name);
        /* The 1.6 fields never reach a 1.5 plugin: the door refuses them. */
        if (has_descent(&cases[c])) {
            g_autoptr(GError) error = NULL;
            const th_descent_terms terms = {.ridge = 1.0, .constraint = TH_CONSTRAINT_NONNEG};
            double v[4] = {1, 0, 0, 1}, lambda[2], gram[4], inner[2];
            assert_false(th_backend_als_update_descent(backend, 0, v, NULL, 1, 0.0, TH_NORM_2,
                                                       &terms, lambda, gram, inner, NULL,
                                                       &error));
            assert_true(g_error_matches(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_UNSUPPORTED));
            assert_non_null(strstr(error->message, "needs plugin ABI 1.6; plugin "
                                                   "'cpu-reference' was built against ABI 1.5"));
        }
    }
    pretend_minor(backend, declared);
}

/* On a plugin of ABI 1.6, the descent modes update in its als_update_nonneg
 * with the 1.6 fields: the same run as the host path's. */
/* The plugin at `plugin` declares ABI 1.6 and honours the fields (`ignores`,
 * one of the probes above, says it does not): else the test fails here. */
static void require_abi_1_6(const char *plugin, gboolean (*ignores)(th_backend *),
                            const char *what)
{
    th_backend *probe = open_plugin(plugin, NULL);
    const gboolean takes = th_backend_takes_abi_1_6(probe);
    const gboolean ignored = takes && ignores(probe);
    const uint32_t minor = th_backend_abi_minor(probe);
    g_autofree char *id = g_strdup(th_backend_info(probe)->id);
    th_backend_close(probe);
    if (!takes)
        fail_msg("%s declares ABI 1.%u, not 1.6", id, minor);
    if (ignored)
        fail_msg("%s declares ABI 1.%u but its %s ignores the 1.6 fields", id, minor, what);
}

static void test_mode_path_on_a_1_6_plugin_matches_the_host_path(void **state)
{
    (void)state;
    require_abi_1_6("cpu-reference", nonneg_update_ignores_abi_1_6, "als_update_nonneg");
    g_autoptr(th_sptensor) t = th_test_mixed_signs();
    g_autoptr(th_backend) backend = open_plugin("cpu-reference", NULL);
    for (size_t c = 0; c < G_N_ELEMENTS(cases); ++c) {
        const th_cpd_params host = params_of(&cases[c], 2, 20, TH_UPDATE_HOST);
        g_autoptr(th_cpd_result) on_host = run(backend, t, &host);
        const th_cpd_params mode = params_of(&cases[c], 2, 20, TH_UPDATE_MODE);
        g_autoptr(th_cpd_result) on_modes = run(backend, t, &mode);
        assert_int_equal(on_modes->update_path, TH_UPDATE_MODE);
        assert_same_run(on_modes, on_host, cases[c].name);
    }
}

/* ---- (c) the sweep path ------------------------------------------------- */

/* A regularised run on a sweep plugin before ABI 1.6 does not take the
 * sweep: "auto" is the mode path with the ridge alone (als_update), the host
 * path with a descent mode (no als_update_nonneg), the same run as the host
 * path's either way; "sweep" is an error naming the plugin, its version and
 * 1.6; an unregularised run still sweeps. Checked on a real 1.4 plugin and
 * on this tree's fixture_sweep made to say 1.5. */
static void check_older_sweep_plugin(th_backend *backend, const char *id, const char *version)
{
    g_autoptr(th_sptensor) t = th_test_mixed_signs();
    for (size_t c = 0; c < G_N_ELEMENTS(cases); ++c) {
        const th_cpd_params automatic = params_of(&cases[c], 2, 12, TH_UPDATE_AUTO);
        g_autoptr(th_cpd_result) r = run(backend, t, &automatic);
        assert_int_equal(r->update_path,
                         has_descent(&cases[c]) ? TH_UPDATE_HOST : TH_UPDATE_MODE);
        assert_false(r->sweep_refused);
        const th_cpd_params host = params_of(&cases[c], 2, 12, TH_UPDATE_HOST);
        g_autoptr(th_cpd_result) on_host = run(backend, t, &host);
        assert_same_run(r, on_host, cases[c].name);

        const th_cpd_params swept = params_of(&cases[c], 2, 12, TH_UPDATE_SWEEP);
        g_autoptr(GError) error = NULL;
        assert_true(th_backend_load_tensor(backend, t, 2, &error));
        assert_null(th_cp_als(backend, t, &swept, NULL, &error));
        assert_true(g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_UPDATE_PATH));
        g_autofree char *expected = g_strdup_printf(
            "update path \"sweep\" (cpd.update) with constraints, l1 or l2 needs als_sweep of "
            "plugin ABI 1.6, which takes them; plugin '%s' was built against ABI %s, whose "
            "sweep would ignore them: use \"auto\" to take the best path the plugin has, "
            "\"mode\" or \"host\"",
            id, version);
        assert_string_equal(error->message, expected);
    }
    const th_cpd_params plain = {.rank = 2, .max_iters = 3, .seed = 5};
    g_autoptr(th_cpd_result) r = run(backend, t, &plain);
    assert_int_equal(r->update_path, TH_UPDATE_SWEEP);
    /* The door keeps the 1.6 fields from such a plugin whoever asks. */
    g_autoptr(GError) error = NULL;
    double g0[4], g1[4], g2[4], lambda[2], inner[2];
    double *grams[3] = {g0, g1, g2};
    uint32_t done = 7;
    const th_sweep_terms terms = {.ridge = 0.5, .hals_sweeps = 1};
    assert_false(th_backend_als_sweep_with(backend, TH_NORM_2, &terms, grams, lambda, inner,
                                           &done, &error));
    assert_true(g_error_matches(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_UNSUPPORTED));
    assert_int_equal(done, 0);
}

static void test_sweep_before_abi_1_6_is_not_taken(void **state)
{
    (void)state;
    g_autoptr(th_backend) frozen = open_plugin(FROZEN_V1_4, NULL);
    assert_true(th_backend_has_als_sweep(frozen));
    assert_int_equal(th_backend_abi_minor(frozen), 4);
    check_older_sweep_plugin(frozen, th_backend_info(frozen)->id, "1.4");
    g_autoptr(th_backend) sweep = open_plugin(SWEEP_FIXTURE, NULL);
    const uint16_t declared = (uint16_t)th_backend_abi_minor(sweep);
    pretend_minor(sweep, 5);
    check_older_sweep_plugin(sweep, "fixture_sweep", "1.5");
    pretend_minor(sweep, declared);
}

/* A stand-in for a 1.6 plugin's sweep around fixture_sweep (which does not
 * read the 1.6 fields in this tree). With any 1.6 term it refuses
 * (TH_ERR_UNSUPPORTED, as a plugin that cannot do a combination does),
 * breaks down at once (modes_done 0, as a Cholesky breakdown at mode 1
 * does), both before it changes anything, or honours them: each mode as
 * plugin.h's als_sweep() words the 1.6 update, from the fixture's own
 * functions and th_dense's algebra. Without terms it is fixture_sweep's. */
typedef enum { STAND_IN_REFUSES, STAND_IN_BREAKS_DOWN, STAND_IN_HONOURS } stand_in_kind;
static const th_plugin *fixture_plugin;
static stand_in_kind sweep_stand_in_kind;
static uint32_t sweep_stand_in_calls;

static th_status honour_terms(th_instance *instance, th_als_sweep_io *io, char *err)
{
    const th_plugin_entry *e = &fixture_plugin->entry;
    const uint32_t rank = 2, nmodes = io->nmodes;
    const th_index dims[] = {7, 8, 9}; /* th_test_mixed_signs()'s */
    double scale[2] = {1.0, 1.0}, v[4], w[4];
    if (io->scale)
        memcpy(scale, io->scale, sizeof scale);
    io->modes_done = 0;
    for (uint32_t n = 0; n < nmodes; ++n) {
        th_status status = e->mttkrp(instance, n, err);
        if (status != TH_OK)
            return status;
        th_dense_hadamard_except(io->grams, nmodes, n, rank, v);
        const int32_t constraint = io->constraints ? io->constraints[n] : TH_CONSTRAINT_NONE;
        const double l1 = io->l1 ? io->l1[n] : 0.0;
        th_als_output out = {.struct_size = (uint32_t)sizeof out, .lambda = io->lambda,
                             .gram = io->grams[n], .inner = io->inner};
        if (constraint == TH_CONSTRAINT_NONE && l1 == 0.0) {
            v[0] += io->ridge;
            v[3] += io->ridge;
            if (th_dense_spd_pinv(v, rank, w))
                return TH_OK; /* breakdown: the host finishes from mode n */
            status = e->als_update(instance, n, w, io->norm, &out, err);
        } else {
            g_autofree double *m = g_new(double, (size_t)dims[n] * rank);
            g_autofree double *a = g_new(double, (size_t)dims[n] * rank);
            status = e->get_mttkrp_result(instance, n, m, err);
            if (status == TH_OK)
                status = e->get_factor(instance, n, a, err);
            if (status != TH_OK)
                return status;
            for (uint64_t i = 0; i < (uint64_t)dims[n] * rank; ++i)
                a[i] *= scale[i % rank];
            (void)th_dense_hals(m, v, dims[n], rank, io->ridge, l1, constraint, io->hals_sweeps,
                                io->hals_tolerance, a);
            th_dense_normalize_columns(a, dims[n], rank, io->norm == TH_NORM_MAX, io->lambda);
            th_dense_gram(a, dims[n], rank, io->grams[n]);
            th_dense_column_inner(m, a, dims[n], rank, io->inner);
            status = e->set_factor(instance, n, a, err);
        }
        if (status != TH_OK)
            return status;
        memcpy(scale, io->lambda, sizeof scale); /* the next mode's scale */
        io->modes_done = n + 1;
    }
    return TH_OK;
}

static th_status sweep_stand_in(th_instance *instance, th_als_sweep_io *io, char *err)
{
    ++sweep_stand_in_calls;
    const gboolean terms = io->struct_size >= TH_ALS_SWEEP_IO_V1_6_SIZE &&
                           (io->ridge != 0.0 || io->constraints || io->l1);
    if (!terms)
        return fixture_plugin->entry.als_sweep(instance, io, err);
    switch (sweep_stand_in_kind) {
    case STAND_IN_REFUSES:
        g_snprintf(err, TH_ERROR_SIZE, "stand-in: als_sweep cannot take these terms here");
        return TH_ERR_UNSUPPORTED;
    case STAND_IN_BREAKS_DOWN:
        io->modes_done = 0;
        return TH_OK;
    case STAND_IN_HONOURS:
        break;
    }
    return honour_terms(instance, io, err);
}

static void check_stand_in(stand_in_kind kind)
{
    g_autoptr(th_sptensor) t = th_test_mixed_signs();
    g_autoptr(th_backend) backend = open_plugin(SWEEP_FIXTURE, NULL);
    g_autoptr(GError) error = NULL;
    for (size_t c = 0; c < G_N_ELEMENTS(cases); ++c) {
        const th_cpd_params host = params_of(&cases[c], 2, 10, TH_UPDATE_HOST);
        g_autoptr(th_cpd_result) on_host = run(backend, t, &host);

        assert_true(th_backend_load_tensor(backend, t, 2, &error));
        th_plugin stand_in = *backend->plugin;
        fixture_plugin = backend->plugin;
        stand_in.entry.als_sweep = sweep_stand_in;
        stand_in.entry.abi_version.minor = 6;
        th_backend view =
            th_backend_borrow(&stand_in, backend->instance, 3, 2, backend->dims);
        sweep_stand_in_kind = kind;
        sweep_stand_in_calls = 0;
        const gboolean refuses = kind == STAND_IN_REFUSES;
        const th_cpd_params automatic = params_of(&cases[c], 2, 10, TH_UPDATE_AUTO);
        g_autoptr(th_cpd_result) r = th_cp_als(&view, t, &automatic, NULL, &error);
        if (!r)
            fail_msg("%s: %s", cases[c].name, error->message);
        assert_int_equal(r->update_path, TH_UPDATE_SWEEP);
        /* Refused: asked once, then per mode; broken down: asked and
         * finished by the host each iteration; honoured: swept each
         * iteration. */
        assert_int_equal(r->sweep_refused, refuses);
        assert_int_equal(sweep_stand_in_calls, refuses ? 1 : 10);
        assert_int_equal(r->sweep_fallbacks, kind == STAND_IN_BREAKS_DOWN ? 10 : 0);
        assert_same_run(r, on_host, cases[c].name);
    }
}

static void test_sweep_refusing_the_terms_runs_per_mode(void **state)
{
    (void)state;
    check_stand_in(STAND_IN_REFUSES);
}

static void test_sweep_breaking_down_with_the_terms_is_finished_by_the_host(void **state)
{
    (void)state;
    check_stand_in(STAND_IN_BREAKS_DOWN);
}

/* The sweep's terms as the host hands them (constraints, l1 per mode, the
 * ridge, the model's weights as the first mode's scale, the passes),
 * honoured as plugin.h says: the same run as the host path's. */
static void test_sweep_honouring_the_terms_matches_the_host_path(void **state)
{
    (void)state;
    check_stand_in(STAND_IN_HONOURS);
}

/* Whether `backend` declares ABI 1.6 and its sweep ignores the 1.6 fields:
 * the same lambda with a ridge of 1e6 as without. */
static gboolean sweep_ignores_abi_1_6(th_backend *backend)
{
    if (!th_backend_takes_abi_1_6(backend))
        return FALSE;
    g_autoptr(th_sptensor) t = th_test_mixed_signs();
    const uint32_t rank = 2;
    double lambda[2][2], inner[2], grams[3][4];
    double *gram_of[3] = {grams[0], grams[1], grams[2]};
    double **factors = th_cpd_initial_factors(t->dims, 3, rank, 1);
    gboolean ok = TRUE;
    for (int ridge = 0; ridge < 2; ++ridge) {
        g_autoptr(GError) error = NULL;
        assert_true(th_backend_load_tensor(backend, t, rank, &error));
        for (uint32_t m = 0; m < 3; ++m) {
            assert_true(th_backend_set_factor(backend, m, factors[m], &error));
            th_dense_gram(factors[m], t->dims[m], rank, grams[m]);
        }
        const th_sweep_terms terms = {.ridge = ridge ? 1e6 : 0.0, .hals_sweeps = 1};
        uint32_t done = 0;
        ok = ok && th_backend_als_sweep_with(backend, TH_NORM_2, &terms, gram_of, lambda[ridge],
                                             inner, &done, &error);
    }
    th_cpd_free_factors(factors, 3);
    return ok && memcmp(lambda[0], lambda[1], sizeof lambda[0]) == 0;
}

/* On a sweep plugin of ABI 1.6 "auto" sweeps with the terms: the same run
 * as the host path's, also when its sweep breaks down (stop_at_mode) and
 * the host finishes the iteration. */
static void test_sweep_path_on_a_1_6_plugin_matches_the_host_path(void **state)
{
    (void)state;
    require_abi_1_6(SWEEP_FIXTURE, sweep_ignores_abi_1_6, "als_sweep");
    g_autoptr(th_sptensor) t = th_test_mixed_signs();
    for (int stop = 0; stop < 2; ++stop) {
        g_autoptr(th_backend) backend =
            open_plugin(SWEEP_FIXTURE, stop ? "stop_at_mode=1" : NULL);
        for (size_t c = 0; c < G_N_ELEMENTS(cases); ++c) {
            const th_cpd_params host = params_of(&cases[c], 2, 12, TH_UPDATE_HOST);
            g_autoptr(th_cpd_result) on_host = run(backend, t, &host);
            const th_cpd_params automatic = params_of(&cases[c], 2, 12, TH_UPDATE_AUTO);
            g_autoptr(th_cpd_result) swept = run(backend, t, &automatic);
            assert_int_equal(swept->update_path, TH_UPDATE_SWEEP);
            assert_false(swept->sweep_refused);
            if (stop)
                assert_int_equal(swept->sweep_fallbacks, 12);
            assert_same_run(swept, on_host, cases[c].name);
        }
    }
}

/* ---- (d) what the terms do to a model ------------------------------------ */

/* A nonnegative tensor planted from sparse factors (about half of every
 * factor's entries exactly 0) plus a little dense noise: with l1 the
 * nonnegative fit has more exact zeros than without, and a larger l1 more
 * still; with a growing ridge the model's weights shrink. */
static void test_l1_sparsifies_and_l2_shrinks(void **state)
{
    (void)state;
    const th_index dims[] = {12, 14, 16};
    const uint32_t rank = 3;
    GRand *rng = g_rand_new_with_seed(41);
    double *planted[3];
    for (uint32_t m = 0; m < 3; ++m) {
        planted[m] = g_new(double, (size_t)dims[m] * rank);
        for (uint64_t i = 0; i < (uint64_t)dims[m] * rank; ++i)
            planted[m][i] = g_rand_double(rng) < 0.5 ? 0.0 : 0.5 + g_rand_double(rng);
    }
    const uint64_t nnz = (uint64_t)dims[0] * dims[1] * dims[2];
    th_sptensor *t = th_sptensor_new(3, nnz);
    for (uint32_t m = 0; m < 3; ++m)
        t->dims[m] = dims[m];
    uint64_t k = 0;
    for (th_index i = 0; i < dims[0]; ++i)
        for (th_index j = 0; j < dims[1]; ++j)
            for (th_index l = 0; l < dims[2]; ++l, ++k) {
                double x = 0.01 * g_rand_double(rng);
                for (uint32_t r = 0; r < rank; ++r)
                    x += planted[0][i * rank + r] * planted[1][j * rank + r] *
                         planted[2][l * rank + r];
                t->indices[0][k] = i;
                t->indices[1][k] = j;
                t->indices[2][k] = l;
                t->values[k] = x;
            }
    g_autoptr(th_backend) backend = open_plugin("cpu-reference", NULL);
    const double l1s[] = {0.0, 0.5, 5.0};
    uint64_t zeros[3];
    for (size_t s = 0; s < G_N_ELEMENTS(l1s); ++s) {
        th_cpd_params p = {.rank = rank, .max_iters = 60, .tolerance = 0, .seed = 2,
                           .nonneg_modes = UINT64_MAX, .update = TH_UPDATE_HOST};
        p.l1[0] = l1s[s];
        g_autoptr(th_cpd_result) r = run(backend, t, &p);
        zeros[s] = 0;
        for (uint32_t m = 0; m < 3; ++m)
            for (uint64_t i = 0; i < (uint64_t)dims[m] * rank; ++i) {
                assert_true(r->factors[m][i] >= 0.0);
                zeros[s] += r->factors[m][i] == 0.0;
            }
        if (s == 1)
            assert_true(r->fit > 0.9); /* still a fit of the data */
    }
    if (!(zeros[1] > zeros[0] && zeros[2] > zeros[1]))
        fail_msg("exact zeros with l1 = 0, 0.5, 5: %llu, %llu, %llu",
                 (unsigned long long)zeros[0], (unsigned long long)zeros[1],
                 (unsigned long long)zeros[2]);
    const double l2s[] = {0.0, 10.0, 1000.0};
    double weight[3];
    for (size_t s = 0; s < G_N_ELEMENTS(l2s); ++s) {
        th_cpd_params p = {.rank = rank, .max_iters = 60, .tolerance = 0, .seed = 2,
                           .l2 = l2s[s]};
        g_autoptr(th_cpd_result) r = run(backend, t, &p);
        weight[s] = 0.0;
        for (uint32_t c = 0; c < rank; ++c)
            weight[s] += r->lambda[c];
        assert_true(s == 0 ? isnan(r->objective) : r->objective > 0.0);
    }
    if (!(weight[1] < weight[0] && weight[2] < weight[1]))
        fail_msg("sum of the weights with l2 = 0, 10, 1000: %g, %g, %g", weight[0], weight[1],
                 weight[2]);
    for (uint32_t m = 0; m < 3; ++m)
        g_free(planted[m]);
    th_sptensor_free(t);
    g_rand_free(rng);
}

/* ---- (e) each mode's passes by its cost ---------------------------------- */

/* th_hals_passes against the counts worked by hand from Gillis and
 * Glineur's rule (floor(1 + budget rho), rho = 1 + (nnz N R + the other
 * modes' dims R^2) / (dim (R^2 + R))): the Nell-1 shape at rank 32 gives
 * its 25.5M-row mode (5.6 nonzeros a row) one pass (rho 1.70) and the
 * others the cap (rho 14.7 and 20.4); at rank 8 the long mode two (rho
 * 3.05); the uber shape the cap everywhere. */
static void test_hals_passes_rule(void **state)
{
    (void)state;
    const th_index nell1[] = {2902330, 2143368, 25495389};
    uint32_t passes[4];
    th_hals_passes(nell1, 3, 143599552, 32, 5, 0.5, passes);
    assert_int_equal(passes[0], 5);
    assert_int_equal(passes[1], 5);
    assert_int_equal(passes[2], 1);
    th_hals_passes(nell1, 3, 143599552, 8, 5, 0.5, passes);
    assert_int_equal(passes[2], 2);
    /* mode 0 at rank 32: rho 14.7, floor(1 + 0.5 rho) = 8 under a cap of 10 */
    th_hals_passes(nell1, 3, 143599552, 32, 10, 0.5, passes);
    assert_int_equal(passes[0], 8);
    assert_int_equal(passes[2], 1);
    /* budget 0: one pass; a large budget: the cap (TensorLy's fixed count) */
    th_hals_passes(nell1, 3, 143599552, 32, 5, 0.0, passes);
    for (uint32_t m = 0; m < 3; ++m)
        assert_int_equal(passes[m], 1);
    th_hals_passes(nell1, 3, 143599552, 32, 5, 1e9, passes);
    for (uint32_t m = 0; m < 3; ++m)
        assert_int_equal(passes[m], 5);
    const th_index uber[] = {183, 24, 1140, 1717};
    th_hals_passes(uber, 4, 3309490, 32, 5, 0.5, passes);
    for (uint32_t m = 0; m < 4; ++m)
        assert_int_equal(passes[m], 5);
}

/* A 3-mode tensor whose last mode is long and sparse: 600 rows, about one
 * nonzero each, beside modes of 4 and 5 rows; at rank 4 its passes cost
 * more than forming its M and V (rho 1.65), so it makes one pass and the
 * short modes the cap of 5. */
static th_sptensor *long_sparse_mode(void)
{
    const uint32_t dims[] = {4, 5, 600};
    GRand *rng = g_rand_new_with_seed(77);
    th_sptensor *t = th_test_random_tensor(3, dims, 630, rng);
    g_rand_free(rng);
    for (uint64_t k = 0; k < t->nnz; ++k)
        t->values[k] = fabs(t->values[k]) + 0.1;
    return t;
}

static th_cpd_params budget_params(th_update_path update, double budget)
{
    return (th_cpd_params){.rank = 4, .max_iters = 8, .tolerance = 0, .seed = 3,
                           .update = update, .nonneg_modes = UINT64_MAX,
                           .hals_max_passes = 5, .hals_budget = budget};
}

/* The passes chosen per mode are the same on every path: the host's update,
 * cpu-reference's als_update_nonneg, a sweep of ABI 1.9 (hals_mode_sweeps),
 * and a sweep plugin of an older minor, whose sweep the host does not
 * call with different passes (it runs the modes itself, saying so). And
 * they matter: the run differs from one with 5 passes for every mode. */
static void test_passes_per_mode_on_every_path(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = long_sparse_mode();
    g_autoptr(th_backend) cpu = open_plugin("cpu-reference", NULL);
    const th_cpd_params host = budget_params(TH_UPDATE_HOST, 0.5);
    g_autoptr(th_cpd_result) on_host = run(cpu, t, &host);
    assert_int_equal(on_host->hals_passes[0], 5);
    assert_int_equal(on_host->hals_passes[1], 5);
    assert_int_equal(on_host->hals_passes[2], 1);
    assert_int_equal(on_host->hals_max_passes, 5);
    assert_true(on_host->hals_budget == 0.5);

    const th_cpd_params mode = budget_params(TH_UPDATE_MODE, 0.5);
    g_autoptr(th_cpd_result) per_mode = run(cpu, t, &mode);
    assert_same_run(per_mode, on_host, "cpu-reference's als_update_nonneg");

    g_autoptr(th_backend) sweeper = open_plugin(SWEEP_FIXTURE, NULL);
    assert_true(th_backend_abi_minor(sweeper) >= 9);
    const th_cpd_params automatic = budget_params(TH_UPDATE_AUTO, 0.5);
    g_autoptr(th_cpd_result) swept = run(sweeper, t, &automatic);
    assert_int_equal(swept->update_path, TH_UPDATE_SWEEP);
    assert_false(swept->sweep_refused);
    assert_same_run(swept, on_host, "a sweep of ABI 1.9");

    pretend_minor(sweeper, 8);
    g_autoptr(th_cpd_result) older = run(sweeper, t, &automatic);
    assert_int_equal(older->update_path, TH_UPDATE_SWEEP);
    assert_true(older->sweep_refused);
    assert_same_run(older, on_host, "a sweep of ABI 1.8, run per mode");

    const th_cpd_params fixed = budget_params(TH_UPDATE_HOST, 1e9);
    g_autoptr(th_cpd_result) five = run(cpu, t, &fixed);
    assert_int_equal(five->hals_passes[2], 5);
    g_autofree char *why = NULL;
    assert_false(same_run(five, on_host, &why));
}

/* ---- the plan's other rules ---------------------------------------------- */

static void test_plan_rules(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = th_test_mixed_signs();
    g_autoptr(th_backend) backend = open_plugin("cpu-reference", NULL);
    g_autoptr(GError) error = NULL;
    /* A per-mode l1 list checked against the order. */
    th_cpd_params p = {.rank = 2, .max_iters = 2, .seed = 1, .l1_listed = 4};
    assert_true(th_backend_load_tensor(backend, t, 2, &error));
    assert_null(th_cp_als(backend, t, &p, NULL, &error));
    assert_true(g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_L1));
    assert_string_equal(error->message,
                        "4 l1 weights given, one per mode, but the tensor has 3 modes");
    g_clear_error(&error);
    /* Weights finite and >= 0 whoever fills the parameters. */
    th_cpd_params negative = {.rank = 2, .max_iters = 2, .seed = 1, .l2 = -1.0};
    assert_false(th_cpd_plan(backend, &negative, NULL, &error));
    assert_string_equal(error->message, "l2 (cpd.l2) -1: expected a finite number >= 0");
    g_clear_error(&error);
    th_cpd_params not_finite = {.rank = 2, .max_iters = 2, .seed = 1, .l1_listed = 3};
    not_finite.l1[2] = NAN;
    assert_false(th_cpd_plan(backend, &not_finite, NULL, &error));
    assert_string_equal(error->message, "l1 (cpd.l1) nan: expected a finite number >= 0");
    g_clear_error(&error);
    th_cpd_params budget = {.rank = 2, .max_iters = 2, .seed = 1, .hals_max_passes = 5,
                            .hals_budget = -0.5};
    assert_false(th_cpd_plan(backend, &budget, NULL, &error));
    assert_string_equal(error->message,
                        "hals_budget (cpd.hals_budget) -0.5: expected a finite number >= 0");
    g_clear_error(&error);
    /* No l1 or l2 for the Poisson model; no l1 for completion. */
    th_cpd_params poisson = {.model = TH_MODEL_POISSON, .rank = 2, .max_iters = 2, .l2 = 0.1};
    assert_false(th_cpd_plan(backend, &poisson, NULL, &error));
    assert_true(g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_MODEL));
    g_clear_error(&error);
    th_cpd_params completion = {.model = TH_MODEL_COMPLETION, .rank = 2, .max_iters = 2};
    completion.l1[0] = 0.1;
    assert_false(th_cpd_plan(backend, &completion, NULL, &error));
    assert_non_null(strstr(error->message, "has no l1 term"));
    g_clear_error(&error);
    /* The values fitted as read: a tensor beyond [2^-64, 2^64] is refused
     * before the run (CP-ALS would scale it, which the l1 and l2 terms do
     * not survive), where an unregularised run scales it. */
    g_autoptr(th_sptensor) large = th_test_mixed_signs();
    for (uint64_t k = 0; k < large->nnz; ++k)
        large->values[k] *= 0x1p70;
    const th_cpd_warning_terms terms = {.tensor = "large.tns", .rank = "rank",
                                        .max_iters = "max_iters", .tolerance = "tolerance"};
    th_cpd_params ridge = {.rank = 2, .max_iters = 2, .seed = 1, .l2 = 0.1};
    g_autoptr(th_cpd_session) session = th_cpd_session_new(backend, &ridge, NULL, &terms, &error);
    assert_non_null(session);
    gboolean scaled = TRUE;
    assert_false(th_cpd_session_prepare(session, large, &scaled, &error));
    assert_false(scaled);
    assert_true(g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT));
    assert_non_null(strstr(error->message, "outside [2^-64, 2^64]: regularised CP-ALS (cpd.l1, "
                                           "cpd.l2) fits the values as read"));
    g_clear_error(&error);
    th_cpd_params unregularised = {.rank = 2, .max_iters = 2, .seed = 1};
    g_autoptr(th_cpd_session) plain_session =
        th_cpd_session_new(backend, &unregularised, NULL, &terms, &error);
    assert_true(th_cpd_session_prepare(plain_session, large, &scaled, &error));
    assert_true(scaled);
    /* th_cp_als itself refuses a scaled tensor for a regularised run. */
    assert_true(th_backend_load_tensor(backend, large, 2, &error));
    assert_null(th_cp_als(backend, large, &ridge, NULL, &error));
    assert_true(g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT));
    g_clear_error(&error);

    /* An unregularised run is unchanged: no objective. */
    th_cpd_params plain = {.rank = 2, .max_iters = 2, .seed = 1};
    g_autoptr(th_cpd_result) r = run(backend, t, &plain);
    assert_true(isnan(r->objective));
    assert_true(isnan(g_array_index(r->iterations, th_cpd_iteration, 0).objective));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_update_matches_an_oracle),
        cmocka_unit_test(test_mode_path_on_an_older_plugin_matches_the_host_path),
        cmocka_unit_test(test_mode_path_on_a_1_6_plugin_matches_the_host_path),
        cmocka_unit_test(test_sweep_before_abi_1_6_is_not_taken),
        cmocka_unit_test(test_sweep_refusing_the_terms_runs_per_mode),
        cmocka_unit_test(test_sweep_breaking_down_with_the_terms_is_finished_by_the_host),
        cmocka_unit_test(test_sweep_honouring_the_terms_matches_the_host_path),
        cmocka_unit_test(test_sweep_path_on_a_1_6_plugin_matches_the_host_path),
        cmocka_unit_test(test_l1_sparsifies_and_l2_shrinks),
        cmocka_unit_test(test_hals_passes_rule),
        cmocka_unit_test(test_passes_per_mode_on_every_path),
        cmocka_unit_test(test_plan_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
