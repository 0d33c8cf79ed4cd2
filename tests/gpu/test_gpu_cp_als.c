/* CP-ALS through each GPU plugin (libtensorhost/cpd/cp_als.h over libtensorhost/plugin/backend.h, the
 * same code path as `tensorhost`) against cpu-reference, same seed, same
 * number of iterations: the final fits agree within 1e-4 (plus the
 * reported fit's own fp32 error near a perfect fit, reported_fit_margin)
 * on a planted exactly-low-rank tensor and on the real tensors (data/ and
 * ../shared/data/real/kg). fp32 factors and MTTKRP on the GPU, double on
 * the CPU: the tolerance is what that difference leaves after 25 sweeps.
 * Every run's factor files are in the published form (unit 2-norm columns,
 * sorted lambda) and give back the reported fit.
 * Each GPU plugin runs twice: with its als_sweep (a whole iteration on the
 * device, the default) and with the per-mode path (host solve,
 * als_update), so both device paths meet the same bar.
 *
 * Needs a CUDA device: without one it prints "SKIPPED: ..." and exits 77
 * (ctest: skipped). The shared data folder is TH_SHARED_DATA_DIR (the
 * environment variable wins over the compile definition, so a copy carried
 * to a GPU host can be named); when it is missing those cases are reported
 * as skipped by cmocka, visibly, with the path. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include <glib.h>

#include "plugin/backend.h"
#include "cpd/cp_als.h"
#include "cpd/cp_apr.h"
#include "output/factor_io.h"
#include "gpu_test_support.h"
#include "base/log.h"
#include "base/rng.h"
#include "tensor/tensor_reader.h"
#include "test_support.h"

#define FIT_TOLERANCE 1e-4
#define FILE_FIT_TOLERANCE 1e-5
#define ITERATIONS 25u

static const char *const plugin_ids[] = {"cpu-reference", "gpu-adaptive", "gpu-scheme1",
                                         "gpu-scheme2"};
#define N_PLUGINS (sizeof(plugin_ids) / sizeof(plugin_ids[0]))

static th_backend *open_backend(const char *id)
{
    g_autoptr(GPtrArray) search = g_ptr_array_new();
    g_ptr_array_add(search, (gpointer)TH_PLUGIN_DIR);
    g_autoptr(GError) error = NULL;
    th_backend *backend = th_backend_open(id, search, NULL, NULL, &error);
    if (!backend)
        fail_msg("cannot open %s: %s", id, error->message);
    return backend;
}

/* The factor files of the run are in the published form, and the fit
 * recomputed from them in double is the fit the run reported (computed from
 * the backend's fp32 terms). The reported fit takes ||X - M|| from
 * ||X||^2 + ||M||^2 - 2 <X, M>, whose inner product comes from an fp32
 * MTTKRP (summed in no fixed order where partitions meet by atomics) and
 * so carries a relative error of a few eps32 (~6e-8) of ||X||^2, while the
 * result is (1 - fit)^2 ||X||^2: near a perfect fit the cancellation
 * magnifies that error by about 1 / (1 - fit). On the planted tensor (fit
 * 0.9968) the reported fit's distance from the files' was 1.3e-5 rms and
 * 4.4e-5 at most over 68 runs (1.4e-7 / (1 - fit)); the tolerance is
 * FILE_FIT_TOLERANCE plus 3e-7 / (1 - fit), some seven times the rms. */
static double reported_fit_margin(double fit) { return 3e-7 / fmax(1.0 - fit, 1e-7); }

static void assert_written_model_matches(const char *id, const th_sptensor *t,
                                         const th_cpd_result *r)
{
    g_autofree char *dir = g_dir_make_tmp("th-gpu-cp-als-XXXXXX", NULL);
    assert_non_null(dir);
    g_autoptr(GError) error = NULL;
    if (!th_write_cpd_factors(dir, r, TH_FACTORS_TEXT, &error))
        fail_msg("%s: %s", id, error->message);
    th_test_assert_published_form(dir, t, r->rank);
    const double fit = th_test_fit_from_files(t, dir, r->rank);
    th_test_remove_tree(dir);
    const double tolerance = FILE_FIT_TOLERANCE + reported_fit_margin(fit);
    if (!(fabs(fit - r->fit) < tolerance))
        fail_msg("%s: fit from the written files %.8f, reported %.8f", id, fit, r->fit);
}

static double run_fit(const char *id, const th_sptensor *t, uint32_t rank,
                      th_update_path path)
{
    g_autoptr(th_backend) backend = open_backend(id);
    g_autoptr(GError) error = NULL;
    if (!th_backend_load_tensor(backend, t, rank, &error))
        fail_msg("%s: load_tensor: %s", id, error->message);
    /* tolerance 0: every backend runs exactly ITERATIONS sweeps. */
    th_cpd_params params = {
        .rank = rank, .max_iters = ITERATIONS, .tolerance = 0, .seed = 42, .update = path};
    g_autoptr(th_cpd_result) r = th_cp_als(backend, t, &params, NULL, &error);
    if (!r)
        fail_msg("%s: cp_als: %s", id, error->message);
    assert_int_equal(r->iterations->len, ITERATIONS);
    if (path != TH_UPDATE_AUTO && r->update_path != path)
        fail_msg("%s: asked for the %s path, ran %s", id, th_update_path_name(path),
                 th_update_path_name(r->update_path));
    if (g_strcmp0(id, "cpu-reference") != 0 && !th_cpd_backend_updated(r))
        fail_msg("%s: the factor update did not run on the device", id);
    assert_written_model_matches(id, t, r);
    return r->fit;
}

/* The GPU plugins' fits against cpu-reference's on one tensor. */
static void compare_fits(const char *what, const th_sptensor *t, uint32_t rank)
{
    static const th_update_path gpu_paths[] = {TH_UPDATE_SWEEP, TH_UPDATE_MODE};
    const double reference = run_fit(plugin_ids[0], t, rank, TH_UPDATE_AUTO);
    print_message("%s (rank %u, %u iterations): fit cpu-reference %.8f", what, rank,
                  ITERATIONS, reference);
    for (size_t p = 1; p < N_PLUGINS; ++p)
        for (size_t k = 0; k < G_N_ELEMENTS(gpu_paths); ++k) {
            const double fit = run_fit(plugin_ids[p], t, rank, gpu_paths[k]);
            print_message(", %s/%s %+.2e", plugin_ids[p], th_update_path_name(gpu_paths[k]),
                          fit - reference);
            /* The reported fit's own error beside the models' difference. */
            const double tolerance = FIT_TOLERANCE + reported_fit_margin(reference);
            if (!(fabs(fit - reference) < tolerance))
                fail_msg("%s: %s (%s path) fit %.8f, cpu-reference %.8f: differ by more "
                         "than %g",
                         what, plugin_ids[p], th_update_path_name(gpu_paths[k]), fit,
                         reference, tolerance);
        }
    print_message("\n");
}

/* CP-APR (Poisson) through `id` from the seed's start, max_iters outer
 * iterations (tolerance 0: every inner iteration runs): its final
 * log-likelihood. */
static double run_poisson(const char *id, const th_sptensor *t, uint32_t rank, uint32_t iters)
{
    g_autoptr(th_backend) backend = open_backend(id);
    g_autoptr(GError) error = NULL;
    if (!th_backend_load_tensor(backend, t, rank, &error))
        fail_msg("%s: load_tensor: %s", id, error->message);
    th_cpd_params params = {.model = TH_MODEL_POISSON, .apr = th_apr_params_default(),
                            .rank = rank, .max_iters = iters, .tolerance = 0, .seed = 42};
    g_autoptr(th_cpd_result) r = th_cp_apr(backend, t, &params, NULL, &error);
    if (!r)
        fail_msg("%s: cp_apr: %s", id, error->message);
    assert_int_equal(r->iterations->len, iters);
    assert_true(isfinite(r->log_likelihood));
    return r->log_likelihood;
}

/* The GPU plugins' Poisson log-likelihoods against cpu-reference's: the
 * same algorithm from the same start, in fp32 against double. */
static void compare_poisson(const char *what, const th_sptensor *t, uint32_t rank)
{
    const uint32_t iters = 5;
    const double reference = run_poisson(plugin_ids[0], t, rank, iters);
    print_message("%s (Poisson, rank %u, %u outer iterations): log-likelihood cpu-reference "
                  "%.10g", what, rank, iters, reference);
    for (size_t p = 1; p < N_PLUGINS; ++p) {
        const double ll = run_poisson(plugin_ids[p], t, rank, iters);
        const double relative = fabs(ll - reference) / fabs(reference);
        print_message(", %s %.2e", plugin_ids[p], relative);
        if (!(relative < 1e-4))
            fail_msg("%s: %s log-likelihood %.10g, cpu-reference %.10g (relative %.2e)", what,
                     plugin_ids[p], ll, reference, relative);
    }
    print_message("\n");
}

static th_sptensor *read_tensor(const char *path)
{
    g_autoptr(GError) error = NULL;
    th_sptensor *t = th_tensor_read_file(path, NULL, &error);
    if (!t)
        fail_msg("%s", error->message);
    return t;
}

static void test_planted_low_rank(void **state)
{
    (void)state;
    /* A mode of 3 (< kappa, scheme 2) and modes >= 132 would need a bigger
     * box; 200 gives gpu-adaptive a long mode too. */
    const th_index dims[] = {200, 15, 12, 3};
    g_autoptr(th_sptensor) t = th_test_planted_dense(dims, 4, 4, 11);
    compare_fits("planted rank-4 200x15x12x3", t, 4);
}

static void test_uber_sample(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = read_tensor(TH_TEST_DATA_DIR "/uber-2014-sample.tns.gz");
    compare_fits("uber-2014-sample", t, 8);
}

/* Rank 3 (not a multiple of 4) runs the generic kernel. */
static void test_poisson_uber_sample(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = read_tensor(TH_TEST_DATA_DIR "/uber-2014-sample.tns.gz");
    compare_poisson("uber-2014-sample", t, 8); /* the vector kernel */
    compare_poisson("uber-2014-sample", t, 3); /* the generic kernel */
}

static void test_aminoacid(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = read_tensor(TH_TEST_DATA_DIR "/aminoacid.sptensor.txt");
    compare_fits("aminoacid", t, 3);
}

static const char *shared_data_dir(void)
{
    const char *env = getenv("TH_SHARED_DATA_DIR");
    return env && *env ? env : TH_SHARED_DATA_DIR;
}

static void run_shared(const char *name)
{
    g_autofree char *path = g_build_filename(shared_data_dir(), "kg", name, NULL);
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        print_message("SKIPPED %s: %s does not exist (set TH_SHARED_DATA_DIR to the folder "
                      "holding kg/)\n",
                      name, path);
        skip();
    }
    g_autoptr(th_sptensor) t = read_tensor(path);
    compare_fits(name, t, 4);
}

static void test_kg_jf17k_3(void **state)
{
    (void)state;
    run_shared("KG_JF17K_3.tns");
}

static void test_kg_jf17k_4(void **state)
{
    (void)state;
    run_shared("KG_JF17K_4.tns");
}

static void test_kg_wikipeople_3(void **state)
{
    (void)state;
    run_shared("KG_WikiPeople_3.tns");
}

static void test_kg_wikipeople_4(void **state)
{
    (void)state;
    run_shared("KG_WikiPeople_4.tns");
}

/* Nonnegative CP (the backend's HALS update, als_update_nonneg, over its
 * MTTKRPs: the mode path, asked for, as "auto" takes a sweep of plugin ABI
 * 1.6 for a constrained run) through each GPU plugin against cpu-reference
 * from the seed's start: the same fit to the fp32 margin and every factor
 * entry >= 0. */
static double run_nonneg(const char *id, const th_sptensor *t, uint32_t rank)
{
    g_autoptr(th_backend) backend = open_backend(id);
    g_autoptr(GError) error = NULL;
    if (!th_backend_load_tensor(backend, t, rank, &error))
        fail_msg("%s: load_tensor: %s", id, error->message);
    th_cpd_params params = {.rank = rank, .max_iters = ITERATIONS, .tolerance = 0, .seed = 42,
                            .nonneg_modes = UINT64_MAX, .update = TH_UPDATE_MODE};
    g_autoptr(th_cpd_result) r = th_cp_als(backend, t, &params, NULL, &error);
    if (!r)
        fail_msg("%s: cp_als (nonneg): %s", id, error->message);
    assert_int_equal(r->iterations->len, ITERATIONS);
    assert_int_equal(r->update_path, TH_UPDATE_MODE);
    for (uint32_t m = 0; m < t->nmodes; ++m)
        for (uint64_t k = 0; k < (uint64_t)t->dims[m] * rank; ++k)
            if (!(r->factors[m][k] >= 0.0))
                fail_msg("%s: factor %u entry %llu is %g", id, m, (unsigned long long)k,
                         r->factors[m][k]);
    assert_written_model_matches(id, t, r);
    return r->fit;
}

static void test_nonneg_aminoacid(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = read_tensor(TH_TEST_DATA_DIR "/aminoacid.sptensor.txt");
    const double reference = run_nonneg(plugin_ids[0], t, 3);
    print_message("aminoacid (nonneg, rank 3, %u iterations): fit cpu-reference %.8f",
                  ITERATIONS, reference);
    for (size_t p = 1; p < N_PLUGINS; ++p) {
        const double fit = run_nonneg(plugin_ids[p], t, 3);
        print_message(", %s %+.2e", plugin_ids[p], fit - reference);
        const double tolerance = FIT_TOLERANCE + reported_fit_margin(reference);
        if (!(fabs(fit - reference) < tolerance))
            fail_msg("%s nonneg fit %.8f, cpu-reference %.8f: differ by more than %g",
                     plugin_ids[p], fit, reference, tolerance);
    }
    print_message("\n");
}

int main(void)
{
    if (!th_gpu_test_have_device())
        return 77;
    th_gpu_test_apply_filter();
    /* Result rows the MTTKRP never writes start as NaN: any reader that
     * takes them for anything but zero fails a comparison. */
    g_setenv("TH_GPU_POISON_RESULTS", "1", TRUE);
    th_log_set_level(TH_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planted_low_rank), cmocka_unit_test(test_uber_sample),
        cmocka_unit_test(test_aminoacid),        cmocka_unit_test(test_kg_jf17k_3),
        cmocka_unit_test(test_kg_jf17k_4),       cmocka_unit_test(test_kg_wikipeople_3),
        cmocka_unit_test(test_kg_wikipeople_4),  cmocka_unit_test(test_poisson_uber_sample),
        cmocka_unit_test(test_nonneg_aminoacid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
