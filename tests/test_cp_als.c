/* CP-ALS through the cpu-reference backend: planted low-rank recovery, the
 * fit formula against an explicit residual, the two update paths,
 * cancellation, and the amino-acid data the field uses as its rank-3 test.
 * The seed's initial factors have their own tests (test_initial_factors.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <glib.h>

#include "plugin/backend.h"
#include "config/config.h"
#include "cpd/cp_als.h"
#include "base/cancel.h"
#include "base/log.h"
#include "base/rng.h"
#include "cpd/cp_model.h"
#include "tensor/tensor_reader.h"
#include "test_support.h"

static th_backend *open_cpu_reference(void)
{
    g_autoptr(GPtrArray) search = g_ptr_array_new();
    g_ptr_array_add(search, (gpointer)TH_PLUGIN_DIR);
    g_autoptr(GError) error = NULL;
    th_backend *backend = th_backend_open("cpu-reference", search, NULL, NULL, &error);
    if (!backend)
        fail_msg("cannot open cpu-reference: %s", error->message);
    return backend;
}

/* 1 - ||X - M|| / ||X|| by forming the model at every coordinate of the
 * dense box (the tensor is dense, so every coordinate is stored). */
static double explicit_fit(const th_sptensor *t, const th_cpd_result *r)
{
    double residual = 0.0, norm = 0.0;
    for (uint64_t k = 0; k < t->nnz; ++k) {
        double model = 0.0;
        for (uint32_t c = 0; c < r->rank; ++c) {
            double product = r->lambda[c];
            for (uint32_t m = 0; m < t->nmodes; ++m)
                product *= r->factors[m][(size_t)t->indices[m][k] * r->rank + c];
            model += product;
        }
        residual += (t->values[k] - model) * (t->values[k] - model);
        norm += t->values[k] * t->values[k];
    }
    return 1.0 - sqrt(residual) / sqrt(norm);
}

static th_cpd_result *run(th_backend *backend, const th_sptensor *t, th_cpd_params *params,
                          const th_cpd_callbacks *callbacks)
{
    g_autoptr(GError) error = NULL;
    if (!th_backend_load_tensor(backend, t, params->rank, &error))
        fail_msg("load_tensor: %s", error->message);
    th_cpd_result *r = th_cp_als(backend, t, params, callbacks, &error);
    if (!r)
        fail_msg("cp_als: %s", error->message);
    return r;
}

static void test_planted_low_rank_is_recovered(void **state)
{
    (void)state;
    const th_index dims3[] = {9, 10, 11};
    const th_index dims4[] = {5, 6, 4, 7};
    struct { const th_index *dims; uint32_t nmodes, rank; } cases[] = {
        {dims3, 3, 3}, {dims4, 4, 2}, {dims4, 4, 4}};
    g_autoptr(th_backend) backend = open_cpu_reference();
    for (size_t c = 0; c < G_N_ELEMENTS(cases); ++c) {
        g_autoptr(th_sptensor) t = th_test_planted_dense(cases[c].dims, cases[c].nmodes, cases[c].rank, 100 + c);
        th_cpd_params params = {.rank = cases[c].rank, .max_iters = 1000, .tolerance = 1e-12, .seed = 3};
        g_autoptr(th_cpd_result) r = run(backend, t, &params, NULL);
        if (!(r->fit > 0.99))
            fail_msg("case %zu: fit %.6f after %u iterations", c, r->fit, r->iterations->len);
        /* The fit computed without forming the model equals the explicit one. */
        assert_true(fabs(explicit_fit(t, r) - r->fit) < 1e-8);
        /* lambda is sorted in decreasing order and factor columns are unit
         * in max-norm or less after the first iteration. */
        for (uint32_t k = 1; k < r->rank; ++k)
            assert_true(r->lambda[k - 1] >= r->lambda[k]);
    }
}

/* Backends without als_update get their update on the host; both paths must
 * compute the same iterations. */
static void test_host_and_backend_update_agree(void **state)
{
    (void)state;
    const th_index dims[] = {6, 7, 8};
    g_autoptr(th_sptensor) t = th_test_planted_dense(dims, 3, 2, 9);
    /* Perturb so the fit does not reach 1 at once. */
    for (uint64_t k = 0; k < t->nnz; k += 3)
        t->values[k] *= 1.5;
    g_autoptr(th_backend) backend = open_cpu_reference();
    assert_true(th_backend_has_als_update(backend));
    th_cpd_params params = {.rank = 3, .max_iters = 15, .tolerance = 0, .seed = 4};
    g_autoptr(th_cpd_result) device_path = run(backend, t, &params, NULL);
    params.update = TH_UPDATE_HOST;
    g_autoptr(th_cpd_result) host_path = run(backend, t, &params, NULL);
    /* Auto on cpu-reference (als_update, no als_sweep) is the per-mode path. */
    assert_int_equal(device_path->update_path, TH_UPDATE_MODE);
    assert_int_equal(host_path->update_path, TH_UPDATE_HOST);
    assert_true(th_cpd_backend_updated(device_path) && !th_cpd_backend_updated(host_path));
    assert_int_equal(device_path->iterations->len, 15);
    assert_int_equal(host_path->iterations->len, 15);
    for (guint i = 0; i < 15; ++i) {
        double a = g_array_index(device_path->iterations, th_cpd_iteration, i).fit;
        double b = g_array_index(host_path->iterations, th_cpd_iteration, i).fit;
        assert_true(fabs(a - b) < 1e-10);
    }
}

/* ---- ABI 1.1: the sweep path ---------------------------------------------- */

#define SWEEP_FIXTURE TH_FIXTURE_PLUGIN_DIR "/fixture_sweep.so"

/* fixture_sweep (double on the host), stopping every sweep before
 * `stop_at_mode` unless that is NULL. */
static th_backend *open_plugin(const char *path, const char *stop_at_mode)
{
    g_autoptr(GPtrArray) options = g_ptr_array_new();
    g_autofree char *key = g_strdup("stop_at_mode");
    g_autofree char *value = g_strdup(stop_at_mode);
    th_config_option option = {.key = key, .value = value};
    if (stop_at_mode)
        g_ptr_array_add(options, &option);
    g_autoptr(GError) error = NULL;
    th_backend *backend = th_backend_open(path, NULL, options, NULL, &error);
    if (!backend)
        fail_msg("cannot open %s: %s", path, error->message);
    return backend;
}

/* A planted tensor perturbed so the fit does not reach 1 at once. */
static th_sptensor *perturbed_planted(void)
{
    const th_index dims[] = {6, 7, 8};
    th_sptensor *t = th_test_planted_dense(dims, 3, 2, 9);
    for (uint64_t k = 0; k < t->nnz; k += 3)
        t->values[k] *= 1.5;
    return t;
}

#define SAME_RUN_ITERATIONS 15

/* fixture_sweep's count of als_update calls (its runtime details). */
static uint64_t fixture_update_calls(th_backend *backend)
{
    th_runtime_info info;
    g_autoptr(GError) error = NULL;
    if (!th_backend_runtime_info(backend, &info, &error))
        fail_msg("get_runtime_info: %s", error->message);
    const char *at = strstr(info.details, "als_update_calls=");
    if (!at)
        fail_msg("no als_update_calls in \"%s\"", info.details);
    return g_ascii_strtoull(at + strlen("als_update_calls="), NULL, 10);
}

/* Same fits every iteration (1e-10), same lambda and factors. */
static void assert_same_run(const th_cpd_result *a, const th_cpd_result *b)
{
    assert_int_equal(a->iterations->len, SAME_RUN_ITERATIONS);
    assert_int_equal(b->iterations->len, SAME_RUN_ITERATIONS);
    for (guint i = 0; i < SAME_RUN_ITERATIONS; ++i) {
        double fa = g_array_index(a->iterations, th_cpd_iteration, i).fit;
        double fb = g_array_index(b->iterations, th_cpd_iteration, i).fit;
        if (!(fabs(fa - fb) < 1e-10))
            fail_msg("iteration %u: fit %.17g vs %.17g", i + 1, fa, fb);
    }
    assert_true(th_test_relative_error(a->lambda, b->lambda, a->rank) < 1e-9);
    for (uint32_t m = 0; m < a->nmodes; ++m) {
        double error = th_test_relative_error(a->factors[m], b->factors[m],
                                              (uint64_t)a->dims[m] * a->rank);
        if (!(error < 1e-9))
            fail_msg("mode %u: factors differ by %.3g", m + 1, error);
    }
}

static void assert_sweep_timings(const th_cpd_result *r)
{
    assert_true(r->sweep_seconds > 0.0);
    for (uint32_t m = 0; m < r->nmodes; ++m) {
        /* Inside als_sweep: the host cannot time one mode's MTTKRP. */
        assert_true(r->mttkrp_seconds[m] == TH_CPD_NOT_MEASURED);
        /* The fixture has no timer of its own (no get_mode_info). */
        assert_true(r->mttkrp_device_seconds[m] < 0.0);
    }
}

static void test_sweep_mode_and_host_paths_agree(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = perturbed_planted();
    g_autoptr(th_backend) backend = open_plugin(SWEEP_FIXTURE, NULL);
    assert_true(th_backend_has_als_sweep(backend) && th_backend_has_als_update(backend));
    th_cpd_params params = {.rank = 3, .max_iters = SAME_RUN_ITERATIONS, .tolerance = 0,
                            .seed = 4};
    g_autoptr(th_cpd_result) sweep = run(backend, t, &params, NULL);
    params.update = TH_UPDATE_MODE;
    g_autoptr(th_cpd_result) mode = run(backend, t, &params, NULL);
    params.update = TH_UPDATE_HOST;
    g_autoptr(th_cpd_result) host = run(backend, t, &params, NULL);

    /* Zero-initialised params mean auto, and auto takes the sweep. */
    assert_int_equal(sweep->update_path, TH_UPDATE_SWEEP);
    assert_int_equal(mode->update_path, TH_UPDATE_MODE);
    assert_int_equal(host->update_path, TH_UPDATE_HOST);
    assert_true(th_cpd_backend_updated(sweep) && th_cpd_backend_updated(mode) &&
                !th_cpd_backend_updated(host));
    assert_int_equal(sweep->sweep_fallbacks, 0);
    assert_int_equal(sweep->pinv_fallbacks, 0);
    assert_sweep_timings(sweep);
    assert_true(mode->sweep_seconds == 0.0 && host->sweep_seconds == 0.0);
    for (uint32_t m = 0; m < 3; ++m)
        assert_true(mode->mttkrp_seconds[m] >= 0.0 && host->mttkrp_seconds[m] >= 0.0);
    assert_same_run(sweep, mode);
    assert_same_run(sweep, host);

    /* And the cpu-reference's own per-mode path computes the same. */
    g_autoptr(th_backend) reference = open_cpu_reference();
    params.update = TH_UPDATE_AUTO;
    g_autoptr(th_cpd_result) oracle = run(reference, t, &params, NULL);
    assert_int_equal(oracle->update_path, TH_UPDATE_MODE);
    assert_same_run(sweep, oracle);
}

/* A sweep that stops at mode k (as at a Cholesky breakdown there) leaves
 * the rest of the iteration to the host: same numbers, one fallback per
 * iteration. */
static void test_sweep_stopping_early_is_finished_by_the_host(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = perturbed_planted();
    th_cpd_params params = {.rank = 3, .max_iters = SAME_RUN_ITERATIONS, .tolerance = 0,
                            .seed = 4, .update = TH_UPDATE_SWEEP};
    g_autoptr(th_backend) full_backend = open_plugin(SWEEP_FIXTURE, NULL);
    g_autoptr(th_cpd_result) full = run(full_backend, t, &params, NULL);
    assert_int_equal(full->sweep_fallbacks, 0);
    assert_true(full->update_seconds == 0.0); /* no als_update call at all */
    assert_int_equal(fixture_update_calls(full_backend), 0);

    const char *const stops[] = {"0", "1", "2"};
    for (size_t i = 0; i < G_N_ELEMENTS(stops); ++i) {
        g_autoptr(th_backend) backend = open_plugin(SWEEP_FIXTURE, stops[i]);
        g_autoptr(th_cpd_result) r = run(backend, t, &params, NULL);
        assert_int_equal(r->update_path, TH_UPDATE_SWEEP);
        if (r->sweep_fallbacks != SAME_RUN_ITERATIONS)
            fail_msg("stop_at_mode %s: %u fallbacks, expected one per iteration", stops[i],
                     r->sweep_fallbacks);
        assert_int_equal(r->pinv_fallbacks, 0); /* the host's Cholesky did not break down */
        /* The host's als_update calls: the modes from the stop on, every
         * iteration (a count: their time may round to 0 us). */
        const uint64_t stop = g_ascii_strtoull(stops[i], NULL, 10);
        assert_int_equal(fixture_update_calls(backend),
                         (uint64_t)SAME_RUN_ITERATIONS * (t->nmodes - stop));
        assert_sweep_timings(r);
        assert_same_run(full, r);
    }
    /* A stop beyond the last mode never happens: a full sweep. */
    g_autoptr(th_backend) backend = open_plugin(SWEEP_FIXTURE, "3");
    g_autoptr(th_cpd_result) r = run(backend, t, &params, NULL);
    assert_int_equal(r->sweep_fallbacks, 0);
}

static void expect_update_path_error(th_backend *backend, th_update_path update,
                                     const char *expected)
{
    const th_index dims[] = {4, 5, 6};
    g_autoptr(th_sptensor) t = th_test_planted_dense(dims, 3, 2, 1);
    g_autoptr(GError) error = NULL;
    if (!th_backend_load_tensor(backend, t, 2, &error))
        fail_msg("load_tensor: %s", error->message);
    th_cpd_params params = {.rank = 2, .max_iters = 3, .tolerance = 0, .seed = 1,
                            .update = update};
    g_autoptr(th_cpd_result) r = th_cp_als(backend, t, &params, NULL, &error);
    assert_null(r);
    assert_true(g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_UPDATE_PATH));
    assert_string_equal(error->message, expected);
}

static void test_asking_for_a_missing_path_is_an_error(void **state)
{
    (void)state;
    g_autoptr(th_backend) reference = open_cpu_reference();
    expect_update_path_error(reference, TH_UPDATE_SWEEP,
                             "update path \"sweep\" (cpd.update) needs als_sweep (capability "
                             "TH_CAP_ALS_SWEEP, plugin ABI 1.1), which plugin 'cpu-reference' "
                             "does not implement; use \"auto\" to take the best path the plugin "
                             "has");
    g_autoptr(th_backend) good = open_plugin(TH_FIXTURE_PLUGIN_DIR "/fixture_good.so", NULL);
    expect_update_path_error(good, TH_UPDATE_MODE,
                             "update path \"mode\" (cpd.update) needs als_update (capability "
                             "TH_CAP_ALS_UPDATE), which plugin 'fixture_good' does not implement; "
                             "use \"auto\" to take the best path the plugin has");
    /* The plan keeps the resolved path and the rank in the backend. */
    const th_cpd_params automatic = {.rank = 2, .update = TH_UPDATE_AUTO};
    assert_true(th_cpd_plan(good, &automatic, NULL, NULL));
    assert_true(good->planned);
    assert_int_equal(good->planned_rank, 2);
    assert_int_equal(good->update_path, TH_UPDATE_HOST);
    g_autoptr(GError) error = NULL;
    const th_cpd_params too_big = {.rank = 100000};
    assert_false(th_cpd_plan(good, &too_big, "run.toml:3:8", &error));
    assert_non_null(strstr(error->message, "run.toml:3:8: cpd.rank: 100000 is above the largest "
                                           "rank plugin 'fixture_good' supports"));
}

/* A plugin whose entry is ABI 1.0-sized has no als_sweep for the host, even
 * though its object holds one (that aborts): auto takes als_update. */
static void test_v1_0_entry_runs_the_mode_path(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = perturbed_planted();
    g_autoptr(th_backend) backend =
        open_plugin(TH_FIXTURE_PLUGIN_DIR "/fixture_sweep_v1_0_size.so", NULL);
    assert_false(th_backend_has_als_sweep(backend));
    th_cpd_params params = {.rank = 3, .max_iters = SAME_RUN_ITERATIONS, .tolerance = 0,
                            .seed = 4};
    g_autoptr(th_cpd_result) r = run(backend, t, &params, NULL);
    assert_int_equal(r->update_path, TH_UPDATE_MODE);
}

static void test_update_path_names(void **state)
{
    (void)state;
    const char *const names[] = {"auto", "sweep", "mode", "host"};
    for (int i = 0; i < 4; ++i) {
        th_update_path path = TH_UPDATE_HOST;
        assert_true(th_update_path_from_name(names[i], &path));
        assert_int_equal(path, (th_update_path)i);
        assert_string_equal(th_update_path_name(path), names[i]);
    }
    th_update_path path = TH_UPDATE_SWEEP;
    assert_false(th_update_path_from_name("Sweep", &path));
    assert_false(th_update_path_from_name(NULL, &path));
    assert_int_equal(path, TH_UPDATE_SWEEP);
}

static gboolean request_cancel_at_iteration_two(const th_cpd_iteration *it, void *user_data)
{
    (void)user_data;
    if (it->iteration == 2)
        th_cancel_request();
    return TRUE;
}

static gboolean stop_at_iteration_three(const th_cpd_iteration *it, void *user_data)
{
    ++*(unsigned *)user_data;
    return it->iteration < 3;
}

/* A callback that returns FALSE stops the run as an interruption. */
static void test_callback_stops_the_run(void **state)
{
    (void)state;
    const th_index dims[] = {6, 7, 8};
    g_autoptr(th_sptensor) t = th_test_planted_dense(dims, 3, 3, 1);
    g_autoptr(th_backend) backend = open_cpu_reference();
    th_cpd_params params = {.rank = 3, .max_iters = 100, .tolerance = 0, .seed = 4};
    unsigned calls = 0;
    th_cpd_callbacks callbacks = {.iteration = stop_at_iteration_three, .user_data = &calls};
    g_autoptr(th_cpd_result) r = run(backend, t, &params, &callbacks);
    assert_true(r->interrupted);
    assert_int_equal(r->partial_modes, 0);
    assert_int_equal(r->iterations->len, 3);
    assert_int_equal(calls, 3);
    assert_non_null(r->factors);
}

/* The model a run leaves after a stop inside an iteration: `fit` must be
 * the fit of exactly the factors and lambda it returns. */
static void assert_fit_matches_model(const th_sptensor *t, const th_cpd_result *r)
{
    const double recomputed = explicit_fit(t, r);
    if (fabs(recomputed - r->fit) > 1e-9)
        fail_msg("reported fit %.12f, fit of the returned model %.12f", r->fit, recomputed);
}

/* A backend that gives an MTTKRP up (TH_ERR_CANCELLED, as one does a stop
 * request into a long iteration) ends the run at once, not with an error:
 * the model is the ALS state after the last mode that was updated, and its
 * fit is the reported one. On the sweep path the sweep says how far it got. */
static void test_cancelled_call_ends_the_run_mid_iteration(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = perturbed_planted();
    const struct {
        const char *cancel_after; /* MTTKRPs before the first given up */
        th_update_path path;
        uint32_t iterations, partial_modes;
    } cases[] = {
        {"4", TH_UPDATE_MODE, 1, 1},  /* iteration 2 after mode 1 of 3 */
        {"5", TH_UPDATE_HOST, 1, 2},  /* iteration 2 after mode 2 */
        {"7", TH_UPDATE_SWEEP, 2, 1}, /* inside the third sweep, after its mode 1 */
        {"3", TH_UPDATE_SWEEP, 1, 0}, /* at the start of the second sweep */
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); ++i) {
        g_autoptr(GPtrArray) options = g_ptr_array_new();
        g_autofree char *key = g_strdup("cancel_after_mttkrps");
        g_autofree char *value = g_strdup(cases[i].cancel_after);
        th_config_option option = {.key = key, .value = value};
        g_ptr_array_add(options, &option);
        g_autoptr(GError) error = NULL;
        g_autoptr(th_backend) backend = th_backend_open(SWEEP_FIXTURE, NULL, options, NULL, &error);
        if (!backend)
            fail_msg("%s", error->message);
        th_cpd_params params = {
            .rank = 3, .max_iters = 10, .tolerance = 0, .seed = 5, .update = cases[i].path};
        g_autoptr(th_cpd_result) r = run(backend, t, &params, NULL);
        assert_true(r->interrupted);
        assert_false(r->converged);
        assert_int_equal(r->iterations->len, cases[i].iterations);
        assert_int_equal(r->partial_modes, cases[i].partial_modes);
        assert_non_null(r->factors);
        assert_fit_matches_model(t, r);
    }

    /* Given up before any mode was updated: no model at all. */
    g_autoptr(GPtrArray) options = g_ptr_array_new();
    g_autofree char *key = g_strdup("cancel_after_mttkrps");
    g_autofree char *value = g_strdup("0");
    th_config_option option = {.key = key, .value = value};
    g_ptr_array_add(options, &option);
    g_autoptr(GError) error = NULL;
    g_autoptr(th_backend) backend = th_backend_open(SWEEP_FIXTURE, NULL, options, NULL, &error);
    assert_non_null(backend);
    th_cpd_params params = {.rank = 3, .max_iters = 10, .tolerance = 0, .seed = 5};
    g_autoptr(th_cpd_result) r = run(backend, t, &params, NULL);
    assert_true(r->interrupted);
    assert_int_equal(r->iterations->len, 0);
    assert_null(r->factors);
    assert_null(r->lambda);
    assert_true(isnan(r->fit));
}

/* Asks for a stop before mode 2 of iteration 2 and waits out the grace
 * period inside that mode, as a long mode would take it. */
static void stop_inside_iteration_two(uint32_t iteration, uint32_t mode, uint32_t nmodes,
                                      void *user_data)
{
    (void)nmodes;
    (void)user_data;
    if (iteration == 2 && mode == 1) {
        th_cancel_request();
        g_usleep((gulong)(TH_CANCEL_GRACE_SECONDS * 1.2 * G_USEC_PER_SEC));
    }
}

/* A stop older than the grace period cuts an iteration between two modes
 * (the host checks, whatever the backend does): the run ends at once with
 * the modes updated so far, a valid model whose fit is the reported one. */
static void test_stop_cuts_a_long_iteration_between_modes(void **state)
{
    (void)state;
    const th_index dims[] = {6, 7, 8};
    g_autoptr(th_sptensor) t = th_test_planted_dense(dims, 3, 3, 1);
    g_autoptr(th_backend) backend = open_cpu_reference();
    th_cpd_params params = {.rank = 3, .max_iters = 100, .tolerance = 0, .seed = 4,
                            .update = TH_UPDATE_HOST};
    th_cancel_reset();
    th_cpd_callbacks callbacks = {.mode = stop_inside_iteration_two};
    g_autoptr(th_cpd_result) r = run(backend, t, &params, &callbacks);
    th_cancel_reset();
    assert_true(r->interrupted);
    assert_int_equal(r->iterations->len, 1);
    assert_int_equal(r->partial_modes, 2);
    assert_non_null(r->factors);
    assert_fit_matches_model(t, r);
}

/* Ctrl-C ends the run after the current iteration, with factors. */
static void test_cancellation_stops_after_the_current_iteration(void **state)
{
    (void)state;
    const th_index dims[] = {6, 7, 8};
    g_autoptr(th_sptensor) t = th_test_planted_dense(dims, 3, 3, 1);
    g_autoptr(th_backend) backend = open_cpu_reference();
    th_cpd_params params = {.rank = 3, .max_iters = 100, .tolerance = 0, .seed = 4};
    th_cancel_reset();
    th_cpd_callbacks callbacks = {.iteration = request_cancel_at_iteration_two};
    g_autoptr(th_cpd_result) r = run(backend, t, &params, &callbacks);
    th_cancel_reset();
    assert_true(r->interrupted);
    assert_false(r->converged);
    assert_int_equal(r->iterations->len, 2);
    assert_non_null(r->factors[2]);
}

/* Bro's amino-acid fluorescence data: three fluorophores, the field's
 * classic rank-3 CP test. Tensor Toolbox's cp_als documentation reaches a
 * fit of about 0.97 on its 5 x 51 x 201 copy; this copy (GenTen's) is
 * 5 x 201 x 61. We measure 0.974951 with seed 42 after 110 iterations
 * (recorded in README). */
/* Tensor Toolbox's rule: |fit change| < tolerance from iteration 2 on. A
 * fit that drops by more than the tolerance is not converged, however
 * negative the change; the first iteration never converges; a tolerance
 * of 0 never stops. */
static void test_stopping_rule(void **state)
{
    (void)state;
    assert_true(th_cpd_converged(2, 5e-6, 1e-5));
    assert_true(th_cpd_converged(2, -5e-6, 1e-5));
    assert_true(th_cpd_converged(7, 0.0, 1e-5));
    assert_false(th_cpd_converged(2, -1e-3, 1e-5));
    assert_false(th_cpd_converged(2, -1e-5, 1e-5));
    assert_false(th_cpd_converged(2, 1e-5, 1e-5));
    assert_false(th_cpd_converged(2, 2e-5, 1e-5));
    assert_false(th_cpd_converged(1, 0.0, 1e-5));
    assert_false(th_cpd_converged(1, -1e-9, 1e-5));
    assert_false(th_cpd_converged(50, 0.0, 0.0));
    assert_false(th_cpd_converged(50, -0.0, 0.0));
}

static void test_aminoacid_rank_three_fit(void **state)
{
    (void)state;
    g_autoptr(GError) error = NULL;
    g_autoptr(th_sptensor) t =
        th_tensor_read_file(TH_TEST_DATA_DIR "/aminoacid.sptensor.txt", NULL, &error);
    if (!t)
        fail_msg("%s", error->message);
    g_autoptr(th_backend) backend = open_cpu_reference();
    th_cpd_params params = {.rank = 3, .max_iters = 500, .tolerance = 1e-9, .seed = 42};
    g_autoptr(th_cpd_result) r = run(backend, t, &params, NULL);
    print_message("aminoacid rank 3: fit %.6f after %u iterations\n", r->fit, r->iterations->len);
    assert_true(r->converged);
    assert_true(r->fit > 0.97);
}

/* cpd.constraints = "nonneg": every published factor entry is >= 0, the
 * fit never drops (each HALS column update is an exact minimiser), it runs
 * on the mode path (cpu-reference has als_update_nonneg), and a planted
 * nonnegative tensor is fitted. On a tensor
 * with values of both signs the unconstrained factors have negative
 * entries where the constrained ones do not. */
static void test_nonneg_factors(void **state)
{
    (void)state;
    const th_index dims[] = {7, 8, 9};
    g_autoptr(th_backend) backend = open_cpu_reference();
    g_autoptr(th_sptensor) planted = th_test_planted_dense(dims, 3, 3, 21);
    th_cpd_params params = {.rank = 3, .max_iters = 300, .tolerance = 1e-12, .seed = 5,
                            .nonneg_modes = UINT64_MAX};
    g_autoptr(th_cpd_result) r = run(backend, planted, &params, NULL);
    assert_int_equal(r->nonneg_modes, 7);
    assert_int_equal(r->update_path, TH_UPDATE_MODE);
    if (!(r->fit > 0.99))
        fail_msg("planted nonnegative rank 3: fit %.6f after %u iterations", r->fit,
                 r->iterations->len);
    assert_true(fabs(explicit_fit(planted, r) - r->fit) < 1e-8);
    for (guint i = 1; i < r->iterations->len; ++i) {
        const double before = g_array_index(r->iterations, th_cpd_iteration, i - 1).fit;
        const double after = g_array_index(r->iterations, th_cpd_iteration, i).fit;
        if (after < before - 1e-12)
            fail_msg("fit dropped from %.15f to %.15f at iteration %u", before, after, i + 1);
    }
    for (uint32_t m = 0; m < 3; ++m)
        for (uint64_t k = 0; k < (uint64_t)dims[m] * 3; ++k)
            assert_true(r->factors[m][k] >= 0.0);

    g_autoptr(th_sptensor) mixed = th_test_planted_dense(dims, 3, 2, 22);
    for (uint64_t k = 0; k < mixed->nnz; ++k)
        mixed->values[k] = (k % 3 == 0 ? -1.0 : 1.0) * mixed->values[k];
    th_cpd_params free_params = {.rank = 3, .max_iters = 40, .tolerance = 0, .seed = 6};
    g_autoptr(th_cpd_result) unconstrained = run(backend, mixed, &free_params, NULL);
    free_params.nonneg_modes = UINT64_MAX;
    g_autoptr(th_cpd_result) constrained = run(backend, mixed, &free_params, NULL);
    gboolean negative = FALSE;
    for (uint32_t m = 0; m < 3; ++m)
        for (uint64_t k = 0; k < (uint64_t)dims[m] * 3; ++k) {
            negative = negative || unconstrained->factors[m][k] < 0.0;
            assert_true(constrained->factors[m][k] >= 0.0);
        }
    assert_true(negative);
    assert_true(constrained->fit <= unconstrained->fit + 1e-9);
}

/* A planted nonnegative model whose factors are parts (about a third of
 * their entries zero), observed densely with 1% noise: the nonnegative
 * run recovers it (factor match score, Tensor Toolbox's score with the
 * lambda penalty, at least 0.95). */
static void test_nonneg_recovers_planted_parts(void **state)
{
    (void)state;
    const th_index dims[] = {14, 12, 10};
    const uint32_t rank = 3;
    th_rng rng;
    th_rng_seed(&rng, 2027);
    double *truth[3];
    double ones[3] = {1.0, 1.0, 1.0};
    for (uint32_t m = 0; m < 3; ++m) {
        truth[m] = g_new(double, (size_t)dims[m] * rank);
        for (uint64_t k = 0; k < (uint64_t)dims[m] * rank; ++k) {
            const double u = th_rng_uniform(&rng);
            truth[m][k] = u < 0.33 ? 0.0 : u;
        }
    }
    g_autoptr(th_sptensor) t = th_sptensor_new(3, (uint64_t)dims[0] * dims[1] * dims[2]);
    for (uint32_t m = 0; m < 3; ++m)
        t->dims[m] = dims[m];
    uint64_t k = 0;
    for (th_index i = 0; i < dims[0]; ++i)
        for (th_index j = 0; j < dims[1]; ++j)
            for (th_index l = 0; l < dims[2]; ++l, ++k) {
                double value = 0.0;
                for (uint32_t r = 0; r < rank; ++r)
                    value += truth[0][i * rank + r] * truth[1][j * rank + r] *
                             truth[2][l * rank + r];
                t->indices[0][k] = i;
                t->indices[1][k] = j;
                t->indices[2][k] = l;
                t->values[k] = value * (1.0 + 0.01 * (th_rng_uniform(&rng) - 0.5));
            }
    g_autoptr(th_backend) backend = open_cpu_reference();
    th_cpd_params params = {.rank = rank, .max_iters = 500, .tolerance = 1e-10, .seed = 8,
                            .nonneg_modes = UINT64_MAX};
    g_autoptr(th_cpd_result) r = run(backend, t, &params, NULL);
    const double score = th_cp_model_score(r->lambda, (const double *const *)r->factors, ones,
                                           (const double *const *)truth, dims, 3, rank);
    print_message("planted parts: %u iterations, fit %.6f, FMS %.4f\n", r->iterations->len,
                  r->fit, score);
    assert_true(score >= 0.95);
    for (uint32_t m = 0; m < 3; ++m)
        g_free(truth[m]);
}

/* Constraints per mode: only the listed modes' factors are kept
 * nonnegative (on a tensor of both signs the others are not), and a list
 * whose length is not the tensor's order is refused before the run. */
static void test_nonneg_per_mode(void **state)
{
    (void)state;
    const th_index dims[] = {7, 8, 9};
    g_autoptr(th_sptensor) mixed = th_test_planted_dense(dims, 3, 2, 22);
    for (uint64_t k = 0; k < mixed->nnz; ++k)
        mixed->values[k] = (k % 3 == 0 ? -1.0 : 1.0) * mixed->values[k];
    g_autoptr(th_backend) backend = open_cpu_reference();
    th_cpd_params params = {.rank = 3, .max_iters = 40, .tolerance = 0, .seed = 6,
                            .nonneg_modes = 5u, .constraints_listed = 3};
    g_autoptr(th_cpd_result) r = run(backend, mixed, &params, NULL);
    assert_int_equal(r->nonneg_modes, 5u);
    gboolean negative_in_free_mode = FALSE;
    for (uint32_t m = 0; m < 3; ++m)
        for (uint64_t k = 0; k < (uint64_t)dims[m] * 3; ++k) {
            if (m == 1)
                negative_in_free_mode = negative_in_free_mode || r->factors[m][k] < 0.0;
            else
                assert_true(r->factors[m][k] >= 0.0);
        }
    assert_true(negative_in_free_mode);
    params.constraints_listed = 4;
    g_autoptr(GError) error = NULL;
    assert_null(th_cp_als(backend, mixed, &params, NULL, &error));
    assert_true(g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_CONSTRAINTS));
    assert_string_equal(error->message,
                        "4 constraints given, one per mode, but the tensor has 3 modes");
}

/* The same run within rounding: fits every iteration to 1e-12, lambda and
 * factors to 1e-10. */
static void assert_same_nonneg_run(const th_cpd_result *a, const th_cpd_result *b)
{
    assert_int_equal(a->iterations->len, b->iterations->len);
    for (guint i = 0; i < a->iterations->len; ++i) {
        const double fa = g_array_index(a->iterations, th_cpd_iteration, i).fit;
        const double fb = g_array_index(b->iterations, th_cpd_iteration, i).fit;
        if (!(fabs(fa - fb) < 1e-12))
            fail_msg("iteration %u: fit %.17g vs %.17g ", i + 1, fa, fb);
    }
    assert_true(th_test_relative_error(a->lambda, b->lambda, a->rank) < 1e-10);
    for (uint32_t m = 0; m < a->nmodes; ++m) {
        const double error = th_test_relative_error(a->factors[m], b->factors[m],
                                                    (uint64_t)a->dims[m] * a->rank);
        if (!(error < 1e-10))
            fail_msg("mode %u: factors differ by %.3g", m + 1, error);
    }
}

/* The nonnegative update in the backend (cpu-reference's
 * als_update_nonneg, which "auto" takes) and on the host are one
 * algorithm: the same run from the same seed, every mode constrained or
 * some, the constrained factors >= 0. */
static void test_nonneg_mode_and_host_paths_agree(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = th_test_mixed_signs();
    g_autoptr(th_backend) backend = open_cpu_reference();
    assert_true(th_backend_has_als_update_nonneg(backend));
    const uint64_t masks[] = {UINT64_MAX, 5u, 1u};
    for (size_t i = 0; i < G_N_ELEMENTS(masks); ++i) {
        th_cpd_params params = {.rank = 2, .max_iters = 25, .tolerance = 0, .seed = 6,
                                .nonneg_modes = masks[i]};
        g_autoptr(th_cpd_result) automatic = run(backend, t, &params, NULL);
        params.update = TH_UPDATE_MODE;
        g_autoptr(th_cpd_result) mode = run(backend, t, &params, NULL);
        params.update = TH_UPDATE_HOST;
        g_autoptr(th_cpd_result) host = run(backend, t, &params, NULL);
        assert_int_equal(automatic->update_path, TH_UPDATE_MODE);
        assert_int_equal(mode->update_path, TH_UPDATE_MODE);
        assert_int_equal(host->update_path, TH_UPDATE_HOST);
        assert_true(th_cpd_backend_updated(automatic) && !th_cpd_backend_updated(host));
        assert_int_equal(automatic->iterations->len, 25);
        /* Well posed (no pseudo-inverse, which would magnify rounding). */
        assert_int_equal(automatic->pinv_fallbacks + host->pinv_fallbacks, 0);
        assert_same_nonneg_run(automatic, host);
        assert_same_nonneg_run(automatic, mode);
        for (uint32_t m = 0; m < 3; ++m)
            for (uint64_t k = 0; (automatic->nonneg_modes >> m & 1u) &&
                                 k < (uint64_t)automatic->dims[m] * 2;
                 ++k)
                assert_true(automatic->factors[m][k] >= 0.0);
    }
}

static void expect_nonneg_path_error(th_backend *backend, th_update_path update,
                                     const char *expected)
{
    g_autoptr(th_sptensor) t = th_test_mixed_signs();
    g_autoptr(GError) error = NULL;
    assert_true(th_backend_load_tensor(backend, t, 2, &error));
    th_cpd_params params = {.rank = 2, .max_iters = 5, .seed = 1, .nonneg_modes = UINT64_MAX,
                            .update = update};
    assert_null(th_cp_als(backend, t, &params, NULL, &error));
    assert_true(g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_UPDATE_PATH));
    assert_string_equal(error->message, expected);
}

/* The nonnegative update runs per mode, or inside a sweep of plugin ABI
 * 1.6 (test_cp_als_regularised.c): "sweep" on a backend without als_sweep
 * is the usual error, "mode" on one without als_update_nonneg too, and
 * "auto" there is the host path unless the plugin's sweep takes the
 * constraints. */
static void test_nonneg_path_errors(void **state)
{
    (void)state;
    g_autoptr(th_backend) reference = open_cpu_reference();
    expect_nonneg_path_error(reference, TH_UPDATE_SWEEP,
                             "update path \"sweep\" (cpd.update) needs als_sweep (capability "
                             "TH_CAP_ALS_SWEEP, plugin ABI 1.1), which plugin 'cpu-reference' "
                             "does not implement; use \"auto\" to take the best path the "
                             "plugin has");
    g_autoptr(th_backend) sweep = open_plugin(SWEEP_FIXTURE, NULL);
    assert_false(th_backend_has_als_update_nonneg(sweep));
    expect_nonneg_path_error(sweep, TH_UPDATE_MODE,
                             "update path \"mode\" (cpd.update) with constraints \"nonneg\" or "
                             "l1 needs als_update_nonneg (plugin ABI 1.5) and als_update "
                             "(capability TH_CAP_ALS_UPDATE), which plugin 'fixture_sweep' does "
                             "not both implement; use \"auto\" to take the best path the plugin "
                             "has");
    g_autoptr(th_sptensor) t = th_test_mixed_signs();
    th_cpd_params params = {.rank = 2, .max_iters = 5, .seed = 1, .nonneg_modes = UINT64_MAX};
    /* What the plugin declares decides "auto" (a plugin built against
     * 1.5 here, whatever this tree's fixture says). */
    sweep->plugin->entry.abi_version.minor = 5;
    g_autoptr(th_cpd_result) r = run(sweep, t, &params, NULL);
    assert_int_equal(r->update_path, TH_UPDATE_HOST);
}

/* A backend that has als_update_nonneg but refuses it where it runs (as a
 * GPU group of several devices does): the host's update takes over, and the
 * run is the host path's. */
static void test_nonneg_refused_in_the_backend_falls_back_to_the_host(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = th_test_mixed_signs();
    g_autoptr(th_backend) refusing =
        open_plugin(TH_FIXTURE_PLUGIN_DIR "/fixture_sweep_nonneg_refused.so", NULL);
    assert_true(th_backend_has_als_update_nonneg(refusing));
    /* The mode path: its sweep would take the constraints from ABI 1.6 on. */
    th_cpd_params params = {.rank = 2, .max_iters = 10, .tolerance = 0, .seed = 3,
                            .nonneg_modes = UINT64_MAX, .update = TH_UPDATE_MODE};
    g_autoptr(th_cpd_result) fallen = run(refusing, t, &params, NULL);
    assert_int_equal(fallen->iterations->len, 10);
    g_autoptr(th_backend) sweep = open_plugin(SWEEP_FIXTURE, NULL);
    params.update = TH_UPDATE_HOST;
    g_autoptr(th_cpd_result) host = run(sweep, t, &params, NULL);
    assert_same_nonneg_run(fallen, host);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planted_low_rank_is_recovered),
        cmocka_unit_test(test_host_and_backend_update_agree),
        cmocka_unit_test(test_sweep_mode_and_host_paths_agree),
        cmocka_unit_test(test_sweep_stopping_early_is_finished_by_the_host),
        cmocka_unit_test(test_asking_for_a_missing_path_is_an_error),
        cmocka_unit_test(test_v1_0_entry_runs_the_mode_path),
        cmocka_unit_test(test_update_path_names),
        cmocka_unit_test(test_cancellation_stops_after_the_current_iteration),
        cmocka_unit_test(test_stop_cuts_a_long_iteration_between_modes),
        cmocka_unit_test(test_callback_stops_the_run),
        cmocka_unit_test(test_cancelled_call_ends_the_run_mid_iteration),
        cmocka_unit_test(test_stopping_rule),
        cmocka_unit_test(test_aminoacid_rank_three_fit),
        cmocka_unit_test(test_nonneg_factors),
        cmocka_unit_test(test_nonneg_mode_and_host_paths_agree),
        cmocka_unit_test(test_nonneg_refused_in_the_backend_falls_back_to_the_host),
        cmocka_unit_test(test_nonneg_path_errors),
        cmocka_unit_test(test_nonneg_per_mode),
        cmocka_unit_test(test_nonneg_recovers_planted_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
