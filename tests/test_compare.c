/* The comparison runner with real plugins (cpu-reference, the fixture
 * plugins, including the deliberately wrong fixture_wrong_mttkrp and
 * fixture_no_device): same initial factors everywhere, mismatch detection,
 * skipping, sweeps reaching the plugin, geometric means, the CSV and JSON
 * read back, valid PNG/SVG charts, and `tensorhost --config
 * configs/compare-cpu.toml` end to end. No timing is asserted: speed is
 * measured in benchmarks, never in tests. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "test_support.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "base/cancel.h"
#include "base/json_text.h"
#include "compare/compare.h"
#include "compare_command.h"
#include "compare/compare_output.h"
#include "cpd/cp_als.h"
#include "base/log.h"
#include "tensor/synth.h"
#include "tensor/tensor_reader.h"

#define CPU_REFERENCE TH_PLUGIN_DIR "/cpu-reference.so"
#define FIXTURE_GOOD TH_FIXTURE_PLUGIN_DIR "/fixture_good.so"
#define FIXTURE_SWEEP TH_FIXTURE_PLUGIN_DIR "/fixture_sweep.so"
#define FIXTURE_WRONG TH_ABI_PLUGIN_DIR "/fixture_wrong_mttkrp.so"
#define FIXTURE_NO_DEVICE TH_ABI_PLUGIN_DIR "/fixture_no_device.so"
#define AMINOACID TH_TEST_DATA_DIR "/aminoacid.sptensor.txt"

static char *temp_dir;

/* cmocka 1.1 has no floating-point assertion. */
#define assert_near(a, b, epsilon)                                                             \
    do {                                                                                       \
        double a_ = (a), b_ = (b);                                                             \
        if (!(fabs(a_ - b_) <= (epsilon)))                                                     \
            fail_msg("%s = %.17g, expected %.17g (within %g)", #a, a_, b_, (double)(epsilon)); \
    } while (0)

static int setup(void **state)
{
    (void)state;
    temp_dir = g_dir_make_tmp("test_compare-XXXXXX", NULL);
    assert_non_null(temp_dir);
    th_log_set_level(TH_LOG_WARNING); /* keep the progress lines out of the test log */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    th_test_remove_tree(temp_dir);
    g_free(temp_dir);
    return 0;
}

static th_config *load(const char *text)
{
    g_autofree char *name = g_build_filename(temp_dir, "compare.toml", NULL);
    GError *error = NULL;
    th_config *config = th_config_load_from_string(name, text, -1, NULL, &error);
    if (!config)
        fail_msg("config: %s", error->message);
    return config;
}

static const th_compare_tensor *tensor_at(const th_compare_result *result, guint i)
{
    assert_true(i < result->tensors->len);
    return g_ptr_array_index(result->tensors, i);
}

static const th_compare_run *run_at(const th_compare_result *result, guint tensor, guint backend)
{
    const th_compare_tensor *t = tensor_at(result, tensor);
    assert_true(backend < t->runs->len);
    return g_ptr_array_index(t->runs, backend);
}

/* ---- Numbers ---------------------------------------------------------------- */

static void test_geometric_mean(void **state)
{
    (void)state;
    const double two[] = {2.0, 8.0};
    assert_near(th_compare_geometric_mean(two, 2), 4.0, 1e-12);
    const double three[] = {1.0, 10.0, 100.0};
    assert_near(th_compare_geometric_mean(three, 3), 10.0, 1e-12);
    /* The paper's form: speedups of 2 and 2.42 average to 2.2 geometrically. */
    const double paper[] = {2.0, 2.42};
    assert_near(th_compare_geometric_mean(paper, 2), 2.2, 1e-12);
    /* Not-run tensors (NaN) and non-positive values are left out. */
    const double holes[] = {4.0, NAN, 0.0, -3.0, 9.0, INFINITY};
    assert_near(th_compare_geometric_mean(holes, 6), 6.0, 1e-12);
    const double none[] = {NAN, 0.0};
    assert_true(isnan(th_compare_geometric_mean(none, 2)));
    assert_true(isnan(th_compare_geometric_mean(NULL, 0)));
}

static void test_stat_of(void **state)
{
    (void)state;
    double odd[] = {3.0, 1.0, 2.0};
    th_compare_stat s = th_compare_stat_of(odd, 3);
    assert_true(s.median == 2.0 && s.min == 1.0 && s.max == 3.0);
    double even[] = {4.0, 1.0, 3.0, 2.0};
    s = th_compare_stat_of(even, 4);
    assert_true(s.median == 2.5 && s.min == 1.0 && s.max == 4.0);
    s = th_compare_stat_of(NULL, 0);
    assert_true(s.median < 0.0 && s.min < 0.0 && s.max < 0.0);
}

/* A run's time per iteration is its median iteration, whatever the run
 * did outside its iterations (total_seconds) or in a slow first one. */
static void test_iteration_time_is_the_median_iteration(void **state)
{
    (void)state;
    th_cpd_result r = {.total_seconds = 9.0};
    r.iterations = g_array_new(FALSE, FALSE, sizeof(th_cpd_iteration));
    assert_true(th_compare_iteration_seconds(&r) == 9.0); /* none completed */
    const double seconds[] = {0.5, 0.001, 0.003, 0.002};
    for (uint32_t k = 0; k < 3; ++k) {
        const th_cpd_iteration it = {.iteration = k + 1, .seconds = seconds[k]};
        g_array_append_val(r.iterations, it);
    }
    assert_true(th_compare_iteration_seconds(&r) == 0.003);
    const th_cpd_iteration fourth = {.iteration = 4, .seconds = seconds[3]};
    g_array_append_val(r.iterations, fourth);
    assert_true(fabs(th_compare_iteration_seconds(&r) - 0.0025) < 1e-15);
    g_array_free(r.iterations, TRUE);
}

static void test_relative_error(void **state)
{
    (void)state;
    const double b[] = {3.0, 4.0}; /* norm 5 */
    const double a[] = {3.0, 4.5};
    assert_near(th_compare_relative_error(a, b, 2), 0.1, 1e-15);
    assert_true(th_compare_relative_error(b, b, 2) == 0.0);
    const double zero[] = {0.0, 0.0};
    assert_near(th_compare_relative_error(b, zero, 2), 5.0, 1e-15);
    const double bad[] = {NAN, 1.0};
    assert_true(isnan(th_compare_relative_error(bad, b, 2)));
}

static void test_format(void **state)
{
    (void)state;
    static const struct {
        double seconds;
        const char *text;
    } cases[] = {{8.42e-3, "8.42 ms"}, {1.1e-3, "1.10 ms"}, {6.683e-4, "668 µs"},
                 {2.5e-5, "25.0 µs"}, {12.34, "12.3 s"},  {-1.0, "-"}};
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *text = th_compare_format_seconds(cases[i].seconds);
        assert_string_equal(text, cases[i].text);
    }
    g_autofree char *mib = th_compare_format_bytes(27u * 1024 * 1024 + 600 * 1024);
    assert_string_equal(mib, "27.6 MiB");
    g_autofree char *small = th_compare_format_bytes(512);
    assert_string_equal(small, "512 B");
}

/* ---- Same inputs ----------------------------------------------------------- */

static void test_same_initial_factors_reach_every_backend(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load("[tensor]\npath = \"" AMINOACID "\"\n[cpd]\nrank = 3\n"
                                       "[[compare.backend]]\nlabel = \"t1\"\n"
                                       "plugin = \"" CPU_REFERENCE "\"\noptions = { threads = 1 }\n"
                                       "[[compare.backend]]\nlabel = \"t2\"\n"
                                       "plugin = \"" CPU_REFERENCE "\"\noptions = { threads = 2 }\n"
                                       "[[compare.backend]]\nplugin = \"" FIXTURE_GOOD "\"\n");
    GError *error = NULL;
    g_autoptr(th_sptensor) tensor = th_tensor_read_file(AMINOACID, NULL, &error);
    assert_non_null(tensor);
    const uint32_t rank = config->compare->rank;
    double **initial = th_cpd_initial_factors(tensor->dims, tensor->nmodes, rank, config->seed);
    double **other = th_cpd_initial_factors(tensor->dims, tensor->nmodes, rank, config->seed + 1);
    for (guint b = 0; b < config->compare->backends->len; b++) {
        const th_compare_backend_config *backend_config =
            g_ptr_array_index(config->compare->backends, b);
        g_autoptr(th_backend) backend = th_compare_open_backend(
            backend_config, config->search_path, tensor, rank, initial, &error);
        if (!backend)
            fail_msg("%s: %s", backend_config->label, error->message);
        for (uint32_t m = 0; m < tensor->nmodes; m++) {
            gsize n = (gsize)tensor->dims[m] * rank;
            g_autofree double *held = g_new(double, n);
            assert_true(th_backend_get_factor(backend, m, held, &error));
            assert_memory_equal(held, initial[m], n * sizeof(double));
            /* Another seed gives other factors, so the equality means something. */
            assert_memory_not_equal(held, other[m], n * sizeof(double));
        }
    }
    th_cpd_free_factors(initial, tensor->nmodes);
    th_cpd_free_factors(other, tensor->nmodes);
}

/* ---- Verification ------------------------------------------------------------ */

static const char wrong_config[] =
    "[tensor]\npath = \"" AMINOACID "\"\n[cpd]\nrank = 4\n"
    "[compare]\nbaseline = \"cpu\"\nrepeats = 1\nwarmup = 0\n"
    "[[compare.backend]]\nlabel = \"good\"\nplugin = \"" FIXTURE_GOOD "\"\n"
    "[[compare.backend]]\nlabel = \"cpu\"\nplugin = \"" CPU_REFERENCE "\"\n"
    "[[compare.backend]]\nlabel = \"wrong\"\nplugin = \"" FIXTURE_WRONG "\"\n";

static void test_mismatch_is_caught_with_mode_and_error(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load(wrong_config);
    GError *error = NULL;
    g_autoptr(th_compare_result) result = th_compare_run_all(config, &error);
    assert_non_null(result);
    const th_compare_run *good = run_at(result, 0, 0);
    const th_compare_run *cpu = run_at(result, 0, 1);
    const th_compare_run *wrong = run_at(result, 0, 2);
    assert_true(cpu->is_baseline);
    assert_int_equal(good->status, TH_COMPARE_OK);
    assert_true(good->max_error <= 1e-12);
    assert_int_equal(wrong->status, TH_COMPARE_MISMATCH);
    /* Every mode was checked: the fixture scales all results by 1.01. */
    for (uint32_t m = 0; m < wrong->nmodes; m++)
        assert_near(wrong->modes[m].error, 0.01, 1e-9);
    /* A failing backend is not timed. */
    assert_true(wrong->total_host.median < 0.0);
    assert_int_equal(result->failures->len, 1);
    assert_string_equal(g_ptr_array_index(result->failures, 0),
                        "backend 'wrong' on tensor 'aminoacid': mode 1: relative Frobenius "
                        "error 0.01 vs baseline 'cpu' exceeds tolerance 0.0001");

    /* The whole command: outputs written, marked failed, and an error. */
    g_autofree char *dir = g_build_filename(temp_dir, "wrong-out", NULL);
    g_free(config->compare->output_dir);
    config->compare->output_dir = g_strdup(dir);
    gboolean interrupted = TRUE;
    assert_false(th_compare_execute(config, &interrupted, &error));
    assert_false(interrupted);
    assert_true(g_error_matches(error, TH_COMPARE_ERROR, TH_COMPARE_ERROR_FAILED));
    assert_string_equal(error->message,
                        "comparison failed: backend 'wrong' on tensor 'aminoacid': mode 1: "
                        "relative Frobenius error 0.01 vs baseline 'cpu' exceeds tolerance 0.0001");
    g_clear_error(&error);
    g_autofree char *json_path = g_build_filename(dir, "results.json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    assert_true(json_parser_load_from_file(parser, json_path, NULL));
    JsonObject *root = json_node_get_object(json_parser_get_root(parser));
    assert_string_equal(json_object_get_string_member(root, "status"), "failed");
}

static void test_tolerance_decides(void **state)
{
    (void)state;
    /* With a tolerance above the fixture's 1% error, it passes. */
    g_autofree char *lenient = g_strconcat(wrong_config, "", NULL);
    g_autoptr(th_config) config = load(lenient);
    config->compare->tolerance = 0.02;
    GError *error = NULL;
    g_autoptr(th_compare_result) result = th_compare_run_all(config, &error);
    assert_non_null(result);
    assert_int_equal(run_at(result, 0, 2)->status, TH_COMPARE_OK);
    assert_int_equal(result->failures->len, 0);
}

static void test_wrong_baseline_fails_every_other(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load(wrong_config);
    g_free(config->compare->baseline);
    config->compare->baseline = g_strdup("wrong");
    GError *error = NULL;
    g_autoptr(th_compare_result) result = th_compare_run_all(config, &error);
    assert_non_null(result);
    assert_int_equal(run_at(result, 0, 0)->status, TH_COMPARE_MISMATCH);
    assert_int_equal(run_at(result, 0, 1)->status, TH_COMPARE_MISMATCH);
    assert_int_equal(result->failures->len, 2);
}

static void test_cpd_job_compares_fits(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load("[tensor]\npath = \"" AMINOACID "\"\n"
                                       "[cpd]\nrank = 3\nmax_iters = 15\ntolerance = 0\n"
                                       "[compare]\njob = \"cpd\"\nrepeats = 1\nwarmup = 0\n"
                                       "tolerance = 1e-8\n"
                                       "[[compare.backend]]\nplugin = \"" CPU_REFERENCE "\"\n"
                                       "[[compare.backend]]\nplugin = \"" FIXTURE_GOOD "\"\n");
    GError *error = NULL;
    g_autoptr(th_compare_result) result = th_compare_run_all(config, &error);
    assert_non_null(result);
    assert_int_equal(result->failures->len, 0);
    const th_compare_run *cpu = run_at(result, 0, 0), *good = run_at(result, 0, 1);
    assert_int_equal(cpu->iterations, 15);
    assert_int_equal(good->iterations, 15);
    assert_true(cpu->fit > 0.5 && cpu->fit < 1.0);
    assert_true(fabs(good->fit_difference) <= 1e-8);
    assert_true(good->seconds_per_iteration.median > 0.0);

    /* The fixture that scales MTTKRP by 1.01 passes a 2% MTTKRP check, but
     * CP-ALS on it converges elsewhere: the fit check catches it. */
    g_autofree char *with_wrong = g_strdup_printf(
        "[tensor]\npath = \"" AMINOACID "\"\n[cpd]\nrank = 3\nmax_iters = 15\ntolerance = 0\n"
        "[compare]\njob = \"cpd\"\nrepeats = 1\nwarmup = 0\ntolerance = 0.02\n"
        "[[compare.backend]]\nplugin = \"" CPU_REFERENCE "\"\n"
        "[[compare.backend]]\nlabel = \"wrong\"\nplugin = \"" FIXTURE_WRONG "\"\n");
    g_autoptr(th_config) wrong_config_cpd = load(with_wrong);
    g_autoptr(th_compare_result) caught = th_compare_run_all(wrong_config_cpd, &error);
    assert_non_null(caught);
    const th_compare_run *wrong = run_at(caught, 0, 1);
    assert_int_equal(wrong->status, TH_COMPARE_MISMATCH);
    assert_true(wrong->max_error <= 0.02); /* its MTTKRP passed */
    assert_true(fabs(wrong->fit_difference) > 0.02);
    assert_int_equal(caught->failures->len, 1);
    const char *failure = g_ptr_array_index(caught->failures, 0);
    assert_true(g_str_has_prefix(failure, "backend 'wrong' on tensor 'aminoacid': final fit "));
    assert_true(g_str_has_suffix(failure, ", beyond tolerance 0.02"));
}

/* A backend that runs whole iterations through als_sweep has no host time
 * per MTTKRP: those are "not measured" everywhere (table "-", CSV empty,
 * JSON null), and so is its host-timed total and speedup; the fit and the
 * seconds per iteration still compare. cpd.update reaches every backend. */
static void test_cpd_job_with_a_sweep_backend(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load("[tensor]\npath = \"" AMINOACID "\"\n"
                                       "[cpd]\nrank = 3\nmax_iters = 10\ntolerance = 0\n"
                                       "[compare]\njob = \"cpd\"\nrepeats = 1\nwarmup = 0\n"
                                       "tolerance = 1e-8\n"
                                       "[[compare.backend]]\nlabel = \"cpu\"\nplugin = \""
                                       CPU_REFERENCE "\"\n"
                                       "[[compare.backend]]\nlabel = \"sweep\"\nplugin = \""
                                       FIXTURE_SWEEP "\"\n");
    GError *error = NULL;
    g_autoptr(th_compare_result) result = th_compare_run_all(config, &error);
    assert_non_null(result);
    assert_int_equal(result->failures->len, 0);
    const th_compare_run *cpu = run_at(result, 0, 0), *sweep = run_at(result, 0, 1);
    assert_int_equal(sweep->status, TH_COMPARE_OK);
    assert_true(fabs(sweep->fit_difference) <= 1e-8);
    assert_true(sweep->seconds_per_iteration.median > 0.0);
    for (uint32_t m = 0; m < sweep->nmodes; m++) {
        assert_true(sweep->modes[m].host.median < 0.0);
        assert_true(cpu->modes[m].host.median >= 0.0);
    }
    assert_true(sweep->total_host.median < 0.0);
    assert_true(isnan(sweep->speedup_host) && isnan(sweep->speedup));

    g_autofree char *table = th_compare_format_table(result);
    assert_non_null(strstr(table, "  - : not measured"));
    g_autofree char *csv = th_compare_format_csv(result);
    /* tensor,kind,nnz,backend,plugin,options,baseline,status,mode,scheme,partitions,
     * then host median/min/max: empty for the sweep backend. */
    g_autofree char *row = g_strdup_printf("aminoacid,real,%" G_GUINT64_FORMAT ",sweep,%s,,no,ok,1,,0,,,,",
                                           tensor_at(result, 0)->nnz, FIXTURE_SWEEP);
    if (!strstr(csv, row))
        fail_msg("no row starting %s in:\n%s", row, csv);
    g_autoptr(JsonNode) root = th_compare_json(result);
    JsonObject *tensor =
        json_array_get_object_element(json_object_get_array_member(json_node_get_object(root),
                                                                   "tensors"), 0);
    JsonObject *run = json_array_get_object_element(json_object_get_array_member(tensor,
                                                                                 "backends"), 1);
    JsonObject *mode = json_array_get_object_element(json_object_get_array_member(run, "modes"), 0);
    assert_true(json_object_get_null_member(mode, "host_seconds"));

    /* cpd.update = "sweep" applies to every backend: the baseline lacks it. */
    g_free(config->update);
    config->update = g_strdup("sweep");
    g_autoptr(th_compare_result) refused = th_compare_run_all(config, &error);
    assert_null(refused);
    assert_true(g_error_matches(error, TH_COMPARE_ERROR, TH_COMPARE_ERROR_BASELINE));
    assert_non_null(strstr(error->message, "needs als_sweep (capability TH_CAP_ALS_SWEEP, "
                                           "plugin ABI 1.1), which plugin 'cpu-reference' does "
                                           "not implement"));
    g_error_free(error);
}

/* ---- Skipping ------------------------------------------------------------------ */

static void test_unavailable_backend_is_skipped_unless_baseline(void **state)
{
    (void)state;
    g_autoptr(th_config) config =
        load("[tensor]\npath = \"" AMINOACID "\"\n[cpd]\nrank = 2\n"
             "[compare]\nrepeats = 1\nwarmup = 0\n"
             "[[compare.backend]]\nlabel = \"cpu\"\nplugin = \"" CPU_REFERENCE "\"\n"
             "[[compare.backend]]\nlabel = \"gpu\"\nplugin = \"" FIXTURE_NO_DEVICE "\"\n"
             "[[compare.backend]]\nlabel = \"absent\"\nplugin = \"no-such-plugin\"\n");
    GError *error = NULL;
    g_autoptr(th_compare_result) result = th_compare_run_all(config, &error);
    assert_non_null(result);
    assert_int_equal(result->failures->len, 0);
    const th_compare_run *gpu = run_at(result, 0, 1), *absent = run_at(result, 0, 2);
    assert_int_equal(gpu->status, TH_COMPARE_SKIPPED);
    assert_non_null(strstr(gpu->reason, "(TH_ERR_NO_DEVICE)"));
    assert_int_equal(absent->status, TH_COMPARE_SKIPPED);
    assert_non_null(strstr(absent->reason, "plugin 'no-such-plugin' not found"));
    assert_true(isnan(gpu->speedup));

    g_free(config->compare->baseline);
    config->compare->baseline = g_strdup("gpu");
    g_autoptr(th_compare_result) none = th_compare_run_all(config, &error);
    assert_null(none);
    assert_true(g_error_matches(error, TH_COMPARE_ERROR, TH_COMPARE_ERROR_BASELINE));
    if (!strstr(error->message, "the baseline 'gpu' cannot run here: ") ||
        !strstr(error->message, "nothing was read or measured"))
        fail_msg("%s", error->message);
    g_clear_error(&error);

    /* Found before any tensor is read: this one does not exist. */
    th_compare_tensor_config *input = g_ptr_array_index(config->compare->tensors, 0);
    g_free(input->path);
    input->path = g_strdup("/nonexistent/tensor.tns");
    g_autoptr(th_compare_result) still_none = th_compare_run_all(config, &error);
    assert_null(still_none);
    assert_true(g_error_matches(error, TH_COMPARE_ERROR, TH_COMPARE_ERROR_BASELINE));
    g_clear_error(&error);
}

/* ---- Options checked up front ------------------------------------------------ */

/* A backend that refuses its options stops the comparison before anything
 * is read or measured: the tensor here does not exist, so reaching it would
 * be a different error. */
static void test_bad_option_fails_before_any_tensor_is_read(void **state)
{
    (void)state;
    static const char *const configs[][2] = {
        {"[[compare.backend]]\nlabel = \"one\"\nplugin = \"" CPU_REFERENCE "\"\n"
         "options = { threads = 1 }\n"
         "[[compare.backend]]\nlabel = \"many\"\nplugin = \"" CPU_REFERENCE "\"\n"
         "options = { threads = 100000 }\n",
         "many"},
        {"[[compare.backend]]\nlabel = \"cpu\"\nplugin = \"" CPU_REFERENCE "\"\n"
         "sweep = { threads = [1, 2, 100000] }\n",
         "cpu[threads=100000]"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(configs); i++) {
        g_autofree char *text = g_strconcat("[tensor]\npath = \"/nonexistent/x.tns\"\n"
                                            "[compare]\nrepeats = 1\nwarmup = 0\n",
                                            configs[i][0], NULL);
        g_autoptr(th_config) config = load(text);
        g_autoptr(GError) error = NULL;
        g_autoptr(th_compare_result) result = th_compare_run_all(config, &error);
        assert_null(result);
        assert_true(g_error_matches(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_INVALID_ARGUMENT));
        g_autofree char *file = g_build_filename(temp_dir, "compare.toml", NULL);
        g_autofree char *prefix = g_strconcat(file, ":", NULL);
        g_autofree char *suffix = g_strdup_printf(
            ": compare.backend '%s': cpu-reference: cannot create an instance: option "
            "'threads': 100000 is out of range: expected an integer from 1 to 1024 "
            "(TH_ERR_INVALID_ARGUMENT)",
            configs[i][1]);
        if (!g_str_has_prefix(error->message, prefix) || !g_str_has_suffix(error->message, suffix))
            fail_msg("unexpected error: %s", error->message);
    }
}

/* ---- Sweeps reach the plugin ------------------------------------------------ */

/* A comparison of cpu-reference alone on aminoacid and a second tensor,
 * the keys of its [[compare.tensor]] table given. */
static th_config *load_two_tensors(const char *second)
{
    g_autofree char *text = g_strdup_printf(
        "[compare]\nrepeats = 1\nwarmup = 0\n"
        "[[compare.tensor]]\npath = \"" AMINOACID "\"\n"
        "[[compare.tensor]]\n%s\n"
        "[[compare.backend]]\nlabel = \"cpu\"\nplugin = \"" CPU_REFERENCE "\"\n",
        second);
    return load(text);
}

/* A tensor file that cannot be opened stops the comparison before any
 * tensor is read, whichever tensor it is, naming its table and label. */
static void test_missing_tensor_fails_before_any_is_read(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load_two_tensors("path = \"/nonexistent/late.tns\"");
    g_autoptr(GError) error = NULL;
    g_autoptr(th_compare_result) result = th_compare_run_all(config, &error);
    assert_null(result);
    assert_true(g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO));
    if (!strstr(error->message, ": tensor 'late': /nonexistent/late.tns: cannot open: "))
        fail_msg("message: %s", error->message);
}

/* Stopped (Ctrl-C, SIGTERM) before a tensor is read: no tensor is read or
 * generated, every run is skipped, and the result is still reported (the
 * tensors measured before a stop keep their results). */
static void test_stop_skips_the_tensors_not_read(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load_two_tensors("synthetic = \"nell-1\"\nnnz = 1000");
    th_cancel_reset();
    th_cancel_request();
    g_autoptr(GError) error = NULL;
    g_autoptr(th_compare_result) result = th_compare_run_all(config, &error);
    th_cancel_reset();
    g_assert_no_error(error);
    assert_non_null(result);
    assert_true(result->interrupted);
    assert_int_equal(result->tensors->len, 2);
    for (guint t = 0; t < 2; t++) {
        const th_compare_tensor *tensor = tensor_at(result, t);
        assert_int_equal(tensor->runs->len, 1);
        const th_compare_run *run = g_ptr_array_index(tensor->runs, 0);
        assert_int_equal(run->status, TH_COMPARE_SKIPPED);
        assert_true(run->is_baseline);
        assert_int_equal(tensor->nnz, 0); /* not read */
    }
}

/* A backend that gives a call up on a stop request (TH_ERR_CANCELLED) is
 * interrupted, not failed: the comparison says interrupted and records no
 * failure. */
static void test_cancelled_call_is_an_interruption(void **state)
{
    (void)state;
    g_autoptr(th_config) config =
        load("[tensor]\npath = \"" AMINOACID "\"\n[cpd]\nrank = 3\n"
             "[compare]\nbaseline = \"cpu\"\nrepeats = 2\nwarmup = 0\n"
             "[[compare.backend]]\nlabel = \"cpu\"\nplugin = \"" CPU_REFERENCE "\"\n"
             "[[compare.backend]]\nlabel = \"gives-up\"\nplugin = \"" FIXTURE_SWEEP "\"\n"
             "options = { cancel_after_mttkrps = 4 }\n");
    g_autoptr(GError) error = NULL;
    g_autoptr(th_compare_result) result = th_compare_run_all(config, &error);
    g_assert_no_error(error);
    assert_non_null(result);
    assert_true(result->interrupted);
    assert_int_equal(result->failures->len, 0);
    const th_compare_run *run = g_ptr_array_index(tensor_at(result, 0)->runs, 1);
    assert_int_equal(run->status, TH_COMPARE_SKIPPED);
    assert_string_equal(run->reason, "interrupted (Ctrl-C)");
}

static void test_sweep_options_reach_the_plugin(void **state)
{
    (void)state;
    g_autoptr(th_config) config =
        load("[tensor]\npath = \"" AMINOACID "\"\n[cpd]\nrank = 2\n"
             "[compare]\nrepeats = 1\nwarmup = 0\n"
             "[[compare.backend]]\nlabel = \"cpu\"\nplugin = \"" CPU_REFERENCE "\"\n"
             "sweep = { threads = [1, 2, 3] }\n");
    GError *error = NULL;
    g_autoptr(th_compare_result) result = th_compare_run_all(config, &error);
    assert_non_null(result);
    for (guint i = 0; i < 3; i++) {
        const th_compare_run *run = run_at(result, 0, i);
        g_autofree char *label = g_strdup_printf("cpu[threads=%u]", i + 1);
        g_autofree char *options = g_strdup_printf("threads=%u", i + 1);
        g_autofree char *details = g_strdup_printf("threads=%u ", i + 1);
        assert_string_equal(run->label, label);
        assert_string_equal(run->options, options);
        assert_int_equal(run->status, TH_COMPARE_OK);
        /* cpu-reference reports its thread count in its runtime details. */
        assert_true(g_str_has_prefix(run->facts->details, details));
    }
    assert_string_equal(result->baseline, "cpu[threads=1]");
}

/* ---- CSV, JSON, charts -------------------------------------------------------- */

/* Splits one CSV line (RFC 4180 quoting) into fields. */
static GPtrArray *csv_fields(const char *line)
{
    GPtrArray *fields = g_ptr_array_new_with_free_func(g_free);
    GString *field = g_string_new(NULL);
    gboolean quoted = FALSE;
    for (const char *p = line;; p++) {
        if (quoted) {
            if (*p == '"' && p[1] == '"') {
                g_string_append_c(field, '"');
                p++;
            } else if (*p == '"') {
                quoted = FALSE;
            } else {
                assert_true(*p != '\0');
                g_string_append_c(field, *p);
            }
        } else if (*p == '"') {
            quoted = TRUE;
        } else if (*p == ',' || *p == '\0') {
            g_ptr_array_add(fields, g_string_free(field, FALSE));
            if (*p == '\0')
                break;
            field = g_string_new(NULL);
        } else {
            g_string_append_c(field, *p);
        }
    }
    return fields;
}

static int column_of(GPtrArray *header, const char *name)
{
    for (guint i = 0; i < header->len; i++)
        if (strcmp(g_ptr_array_index(header, i), name) == 0)
            return (int)i;
    fail_msg("no column %s", name);
    return -1;
}

static char *read_text(const char *dir, const char *name)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        fail_msg("cannot read %s", path);
    return text;
}

static double csv_double(GPtrArray *row, int column)
{
    const char *text = g_ptr_array_index(row, column);
    if (!*text)
        return NAN;
    char *end = NULL;
    double value = g_ascii_strtod(text, &end);
    if (*end != '\0')
        fail_msg("not a number: '%s'", text);
    return value;
}

/* Every per-mode row of a backend that ran has both speedups, positive,
 * finite and equal (within the CSV's 9 digits) to the baseline's median
 * over this backend's, per mode and per timer. Returns the rows checked. */
static guint check_per_mode_speedups(const char *csv)
{
    g_auto(GStrv) lines = g_strsplit(csv, "\n", -1);
    g_autoptr(GPtrArray) header = csv_fields(lines[0]);
    int tensor = column_of(header, "tensor"), mode = column_of(header, "mode");
    int status = column_of(header, "status"), baseline = column_of(header, "baseline");
    int host = column_of(header, "host_median_s"), own = column_of(header, "backend_median_s");
    int speedup_host = column_of(header, "speedup_host");
    int speedup_backend = column_of(header, "speedup_backend");
    /* "tensor\nmode" -> the baseline's row */
    g_autoptr(GHashTable) base = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                                       (GDestroyNotify)g_ptr_array_unref);
    g_autoptr(GPtrArray) rows = g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
    for (guint r = 1; lines[r] && *lines[r]; r++) {
        GPtrArray *row = csv_fields(lines[r]);
        assert_int_equal(row->len, header->len);
        g_ptr_array_add(rows, row);
        if (strcmp(g_ptr_array_index(row, baseline), "yes") == 0)
            g_hash_table_insert(base,
                                g_strdup_printf("%s\n%s", (char *)g_ptr_array_index(row, tensor),
                                                (char *)g_ptr_array_index(row, mode)),
                                g_ptr_array_ref(row));
    }
    guint checked = 0;
    for (guint r = 0; r < rows->len; r++) {
        GPtrArray *row = g_ptr_array_index(rows, r);
        if (strcmp(g_ptr_array_index(row, mode), "all") == 0
            || strcmp(g_ptr_array_index(row, status), "ok") != 0)
            continue;
        g_autofree char *key = g_strdup_printf("%s\n%s", (char *)g_ptr_array_index(row, tensor),
                                               (char *)g_ptr_array_index(row, mode));
        GPtrArray *reference = g_hash_table_lookup(base, key);
        assert_non_null(reference);
        const int timers[2][2] = {{speedup_host, host}, {speedup_backend, own}};
        for (int t = 0; t < 2; t++) {
            double speedup = csv_double(row, timers[t][0]);
            if (!(isfinite(speedup) && speedup > 0.0))
                fail_msg("row %s: %s = '%s'", lines[r + 1],
                         (char *)g_ptr_array_index(header, timers[t][0]),
                         (char *)g_ptr_array_index(row, timers[t][0]));
            double expected = csv_double(reference, timers[t][1]) / csv_double(row, timers[t][1]);
            assert_near(speedup / expected, 1.0, 1e-7);
            if (reference == row)
                assert_string_equal(g_ptr_array_index(row, timers[t][0]), "1");
        }
        checked++;
    }
    return checked;
}

static const char outputs_config[] =
    "[cpd]\nrank = 3\n"
    "[compare]\nbaseline = \"one, \\\"quoted\\\"\"\nrepeats = 2\nwarmup = 1\n"
    "[[compare.tensor]]\npath = \"" AMINOACID "\"\n"
    "[[compare.tensor]]\nsynthetic = \"vast\"\nnnz = 3000\n"
    "[[compare.backend]]\nlabel = \"one, \\\"quoted\\\"\"\nplugin = \"" CPU_REFERENCE "\"\n"
    "options = { threads = 1 }\n"
    "[[compare.backend]]\nlabel = \"two\"\nplugin = \"" CPU_REFERENCE "\"\n"
    "options = { threads = 2 }\n"
    "[[compare.backend]]\nlabel = \"gpu\"\nplugin = \"" FIXTURE_NO_DEVICE "\"\n";

static th_compare_result *run_outputs_config(th_config **config_out, char **dir_out)
{
    th_config *config = load(outputs_config);
    GError *error = NULL;
    th_compare_result *result = th_compare_run_all(config, &error);
    if (!result)
        fail_msg("%s", error->message);
    char *dir = g_build_filename(temp_dir, "outputs", NULL);
    if (!th_compare_write_outputs(result, dir, NULL, &error))
        fail_msg("%s", error->message);
    *config_out = config;
    *dir_out = dir;
    return result;
}

static void test_csv_shape(void **state)
{
    (void)state;
    th_config *config;
    g_autofree char *dir = NULL;
    g_autoptr(th_compare_result) result = run_outputs_config(&config, &dir);
    assert_int_equal(result->tensors->len, 2);
    assert_int_equal(result->failures->len, 0);
    g_autofree char *csv = read_text(dir, "results.csv");
    g_auto(GStrv) lines = g_strsplit(csv, "\n", -1);
    g_autoptr(GPtrArray) header = csv_fields(lines[0]);
    static const char *const expected[] = {
        "tensor", "kind", "nnz", "backend", "plugin", "options", "baseline", "status", "mode",
        "scheme", "partitions", "host_median_s", "host_min_s", "host_max_s",
        "backend_median_s", "backend_min_s", "backend_max_s", "speedup", "speedup_host",
        "speedup_backend", "rel_error", "preprocess_s", "tensor_bytes", "factor_bytes",
        "workspace_bytes", "fit", "fit_difference", "iterations", "s_per_iter_median",
        "device", "reason", "model", "log_likelihood", "log_likelihood_rel_difference",
        "kkt_violation", "inner_iterations", "train_rmse", "holdout_rmse"};
    assert_int_equal(header->len, G_N_ELEMENTS(expected));
    for (guint i = 0; i < header->len; i++)
        assert_string_equal(g_ptr_array_index(header, i), expected[i]);
    /* aminoacid (3 modes) and vast (5 modes): per ran backend, one row per
     * mode plus "all"; the skipped one gets its "all" row only. */
    guint expected_rows = 2 * (3 + 1) + 1 + 2 * (5 + 1) + 1;
    guint rows = g_strv_length(lines) - 1; /* the text ends in "\n" */
    assert_string_equal(lines[rows], "");
    assert_int_equal(rows - 1, expected_rows);
    int tensor = column_of(header, "tensor"), kind = column_of(header, "kind");
    int backend = column_of(header, "backend"), status = column_of(header, "status");
    int mode = column_of(header, "mode"), speedup = column_of(header, "speedup");
    int host = column_of(header, "host_median_s"), reason = column_of(header, "reason");
    int baseline = column_of(header, "baseline"), options = column_of(header, "options");
    guint all_rows = 0;
    for (guint r = 1; r < rows; r++) {
        g_autoptr(GPtrArray) row = csv_fields(lines[r]);
        assert_int_equal(row->len, header->len);
        const char *label = g_ptr_array_index(row, backend);
        gboolean synthetic = strcmp(g_ptr_array_index(row, tensor), "vast (synthetic)") == 0;
        assert_string_equal(g_ptr_array_index(row, kind), synthetic ? "synthetic" : "real");
        if (strcmp(label, "gpu") == 0) {
            assert_string_equal(g_ptr_array_index(row, status), "skipped");
            assert_string_equal(g_ptr_array_index(row, mode), "all");
            assert_string_equal(g_ptr_array_index(row, host), "");
            assert_non_null(strstr(g_ptr_array_index(row, reason), "TH_ERR_NO_DEVICE"));
            continue;
        }
        assert_string_equal(g_ptr_array_index(row, status), "ok");
        assert_true(g_ascii_strtod(g_ptr_array_index(row, host), NULL) > 0.0);
        gboolean is_baseline = strcmp(label, "one, \"quoted\"") == 0;
        assert_true(is_baseline || strcmp(label, "two") == 0);
        assert_string_equal(g_ptr_array_index(row, baseline), is_baseline ? "yes" : "no");
        assert_string_equal(g_ptr_array_index(row, options),
                            is_baseline ? "threads=1" : "threads=2");
        if (strcmp(g_ptr_array_index(row, mode), "all") == 0) {
            all_rows++;
            if (is_baseline)
                assert_string_equal(g_ptr_array_index(row, speedup), "1");
            else
                assert_true(g_ascii_strtod(g_ptr_array_index(row, speedup), NULL) > 0.0);
        }
    }
    assert_int_equal(all_rows, 4);

    g_autofree char *geomean = read_text(dir, "geomean.csv");
    g_auto(GStrv) geo_lines = g_strsplit(geomean, "\n", -1);
    assert_string_equal(geo_lines[0],
                        "backend,baseline,timer,speedup,speedup_host,speedup_backend,tensors");
    assert_int_equal(g_strv_length(geo_lines), 1 + 3 + 1);
    g_autoptr(GPtrArray) first = csv_fields(geo_lines[1]);
    assert_string_equal(g_ptr_array_index(first, 0), "one, \"quoted\"");
    assert_string_equal(g_ptr_array_index(first, 3), "1");
    assert_string_equal(g_ptr_array_index(first, 6), "2");
    g_autoptr(GPtrArray) skipped = csv_fields(geo_lines[3]);
    assert_string_equal(g_ptr_array_index(skipped, 3), "");
    assert_string_equal(g_ptr_array_index(skipped, 6), "0");
    th_config_free(config);
}

/* Per-mode rows carry both speedups (host and backend timer), not only the
 * one of the comparison's timer; the JSON has the same numbers, or null. */
static void test_per_mode_speedups(void **state)
{
    (void)state;
    th_config *config;
    g_autofree char *dir = NULL;
    g_autoptr(th_compare_result) result = run_outputs_config(&config, &dir);
    assert_int_equal(result->failures->len, 0);
    g_autofree char *csv = read_text(dir, "results.csv");
    /* Two backends ran on aminoacid (3 modes) and vast (5 modes). */
    assert_int_equal(check_per_mode_speedups(csv), 2 * 3 + 2 * 5);

    g_autofree char *path = g_build_filename(dir, "results.json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    assert_true(json_parser_load_from_file(parser, path, NULL));
    JsonArray *tensors =
        json_object_get_array_member(json_node_get_object(json_parser_get_root(parser)),
                                     "tensors");
    for (guint t = 0; t < json_array_get_length(tensors); t++) {
        JsonArray *backends =
            json_object_get_array_member(json_array_get_object_element(tensors, t), "backends");
        for (guint b = 0; b < json_array_get_length(backends); b++) {
            const th_compare_run *run = run_at(result, t, b);
            JsonArray *modes =
                json_object_get_array_member(json_array_get_object_element(backends, b), "modes");
            assert_int_equal(json_array_get_length(modes), run->modes ? run->nmodes : 0);
            for (guint m = 0; m < json_array_get_length(modes); m++) {
                JsonObject *mode = json_array_get_object_element(modes, m);
                assert_true(json_object_get_double_member(mode, "speedup_host")
                            == run->modes[m].speedup_host);
                assert_true(json_object_get_double_member(mode, "speedup_backend")
                            == run->modes[m].speedup_backend);
                assert_true(run->modes[m].speedup == run->modes[m].speedup_host);
            }
        }
    }
    th_config_free(config);
}

/* A time that is genuinely missing leaves that speedup empty / null, never
 * NaN or Inf: here the baseline (fixture_good) has no timer of its own, so
 * only the host-timed speedups exist. */
static void test_per_mode_speedup_missing_time(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load("[tensor]\npath = \"" AMINOACID "\"\n[cpd]\nrank = 3\n"
                                       "[compare]\nrepeats = 2\nwarmup = 0\n"
                                       "[[compare.backend]]\nlabel = \"good\"\n"
                                       "plugin = \"" FIXTURE_GOOD "\"\n"
                                       "[[compare.backend]]\nlabel = \"cpu\"\n"
                                       "plugin = \"" CPU_REFERENCE "\"\n");
    GError *error = NULL;
    g_autoptr(th_compare_result) result = th_compare_run_all(config, &error);
    if (!result)
        fail_msg("%s", error->message);
    const th_compare_run *cpu = run_at(result, 0, 1);
    assert_int_equal(cpu->status, TH_COMPARE_OK);
    for (uint32_t m = 0; m < cpu->nmodes; m++) {
        assert_true(cpu->modes[m].backend.median > 0.0);
        assert_true(isnan(cpu->modes[m].speedup_backend));
        assert_true(isfinite(cpu->modes[m].speedup_host) && cpu->modes[m].speedup_host > 0.0);
    }
    g_autofree char *csv = th_compare_format_csv(result);
    g_auto(GStrv) lines = g_strsplit(csv, "\n", -1);
    g_autoptr(GPtrArray) header = csv_fields(lines[0]);
    int label = column_of(header, "backend"), mode = column_of(header, "mode");
    int speedup_host = column_of(header, "speedup_host");
    int speedup_backend = column_of(header, "speedup_backend");
    guint seen = 0;
    for (guint r = 1; lines[r] && *lines[r]; r++) {
        g_autoptr(GPtrArray) row = csv_fields(lines[r]);
        if (strcmp(g_ptr_array_index(row, label), "cpu") != 0
            || strcmp(g_ptr_array_index(row, mode), "all") == 0)
            continue;
        assert_string_equal(g_ptr_array_index(row, speedup_backend), "");
        assert_true(csv_double(row, speedup_host) > 0.0);
        seen++;
    }
    assert_int_equal(seen, cpu->nmodes);
    /* The JSON has null where the CSV is empty, and parses. */
    g_autoptr(JsonNode) root = th_compare_json(result);
    g_autofree char *json = th_json_to_text(root, FALSE, NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    assert_true(json_parser_load_from_data(parser, json, -1, NULL));
    JsonObject *tensor = json_array_get_object_element(
        json_object_get_array_member(json_node_get_object(json_parser_get_root(parser)),
                                     "tensors"),
        0);
    JsonObject *run =
        json_array_get_object_element(json_object_get_array_member(tensor, "backends"), 1);
    JsonArray *modes = json_object_get_array_member(run, "modes");
    for (guint m = 0; m < json_array_get_length(modes); m++) {
        JsonObject *entry = json_array_get_object_element(modes, m);
        assert_true(json_object_get_null_member(entry, "speedup_backend"));
        assert_true(json_object_get_double_member(entry, "speedup_host") > 0.0);
    }
}

static void test_json_shape(void **state)
{
    (void)state;
    th_config *config;
    g_autofree char *dir = NULL;
    g_autoptr(th_compare_result) result = run_outputs_config(&config, &dir);
    assert_int_equal(result->tensors->len, 2);
    assert_int_equal(result->failures->len, 0);
    g_autofree char *path = g_build_filename(dir, "results.json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    GError *error = NULL;
    if (!json_parser_load_from_file(parser, path, &error))
        fail_msg("%s", error->message);
    JsonObject *root = json_node_get_object(json_parser_get_root(parser));
    assert_string_equal(json_object_get_string_member(root, "status"), "ok");
    assert_string_equal(json_object_get_string_member(root, "job"), "mttkrp");
    assert_string_equal(json_object_get_string_member(root, "baseline"), "one, \"quoted\"");
    assert_int_equal(json_object_get_int_member(root, "rank"), 3);
    assert_int_equal(json_object_get_int_member(root, "repeats"), 2);
    assert_int_equal(json_array_get_length(json_object_get_array_member(root, "failures")), 0);
    JsonArray *tensors = json_object_get_array_member(root, "tensors");
    assert_int_equal(json_array_get_length(tensors), 2);
    static const guint modes[] = {3, 5};
    for (guint t = 0; t < 2; t++) {
        JsonObject *tensor = json_array_get_object_element(tensors, t);
        assert_int_equal(json_object_get_boolean_member(tensor, "synthetic"), t == 1);
        assert_int_equal(json_object_get_int_member(tensor, "order"), modes[t]);
        assert_int_equal(json_array_get_length(json_object_get_array_member(tensor, "dims")),
                         modes[t]);
        JsonArray *backends = json_object_get_array_member(tensor, "backends");
        assert_int_equal(json_array_get_length(backends), 3);
        for (guint b = 0; b < 3; b++) {
            JsonObject *run = json_array_get_object_element(backends, b);
            JsonArray *run_modes = json_object_get_array_member(run, "modes");
            JsonObject *total = json_object_get_object_member(run, "total");
            if (b == 2) {
                assert_string_equal(json_object_get_string_member(run, "status"), "skipped");
                assert_int_equal(json_array_get_length(run_modes), 0);
                assert_true(json_object_get_null_member(total, "host_seconds"));
                continue;
            }
            assert_string_equal(json_object_get_string_member(run, "status"), "ok");
            assert_int_equal(json_object_get_boolean_member(run, "baseline"), b == 0);
            assert_int_equal(json_array_get_length(run_modes), modes[t]);
            JsonObject *mode = json_array_get_object_element(run_modes, 0);
            assert_string_equal(json_object_get_string_member(mode, "scheme"), "nnz-chunked");
            JsonObject *host = json_object_get_object_member(mode, "host_seconds");
            assert_true(json_object_get_double_member(host, "min")
                        <= json_object_get_double_member(host, "median"));
            assert_true(json_object_get_double_member(host, "median")
                        <= json_object_get_double_member(host, "max"));
            assert_true(json_object_get_double_member(mode, "relative_error") <= 1e-12);
            JsonObject *memory = json_object_get_object_member(run, "memory_bytes");
            assert_true(json_object_get_int_member(memory, "tensor") > 0);
            assert_true(json_object_get_double_member(total, "speedup") > 0.0);
        }
    }
    JsonArray *geomeans = json_object_get_array_member(root, "geometric_mean_speedups");
    assert_int_equal(json_array_get_length(geomeans), 3);
    JsonObject *first = json_array_get_object_element(geomeans, 0);
    assert_near(json_object_get_double_member(first, "speedup"), 1.0, 1e-15);
    assert_int_equal(json_object_get_int_member(first, "tensors"), 2);
    /* The geometric mean in the file is that of the per-tensor speedups. */
    JsonObject *second = json_array_get_object_element(geomeans, 1);
    double speedups[2];
    for (guint t = 0; t < 2; t++)
        speedups[t] = run_at(result, t, 1)->speedup;
    assert_near(json_object_get_double_member(second, "speedup"),
                        th_compare_geometric_mean(speedups, 2), 1e-12);
    assert_true(json_object_get_null_member(json_array_get_object_element(geomeans, 2),
                                            "speedup"));
    JsonObject *echoed = json_object_get_object_member(root, "config");
    assert_string_equal(json_object_get_string_member(echoed, "compare.backend[1].label"), "two");
    th_config_free(config);
}

static void test_charts_are_valid_png_and_svg(void **state)
{
    (void)state;
    th_config *config;
    g_autofree char *dir = NULL;
    g_autoptr(th_compare_result) result = run_outputs_config(&config, &dir);
    assert_int_equal(result->tensors->len, 2);
    assert_int_equal(result->failures->len, 0);
    static const char *const charts[] = {"time-total", "time-per-mode", "memory"};
    static const unsigned char png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    for (size_t i = 0; i < G_N_ELEMENTS(charts); i++) {
        g_autofree char *png_name = g_strconcat(charts[i], ".png", NULL);
        g_autofree char *svg_name = g_strconcat(charts[i], ".svg", NULL);
        g_autofree char *png_path = g_build_filename(dir, png_name, NULL);
        gsize length = 0;
        g_autofree char *png = NULL;
        assert_true(g_file_get_contents(png_path, &png, &length, NULL));
        assert_true(length > 1000);
        assert_memory_equal(png, png_magic, sizeof png_magic);
        g_autofree char *svg = read_text(dir, svg_name);
        assert_true(g_str_has_prefix(svg, "<?xml") || g_str_has_prefix(svg, "<svg"));
        assert_non_null(strstr(svg, "</svg>"));
    }
    /* No temporary file is left behind. */
    g_autoptr(GDir) listing = g_dir_open(dir, 0, NULL);
    for (const char *name; (name = g_dir_read_name(listing));)
        assert_null(strstr(name, ".tmp-"));
    th_config_free(config);
}

static void test_table_lists_every_backend(void **state)
{
    (void)state;
    th_config *config;
    g_autofree char *dir = NULL;
    g_autoptr(th_compare_result) result = run_outputs_config(&config, &dir);
    assert_int_equal(result->tensors->len, 2);
    assert_int_equal(result->failures->len, 0);
    g_autofree char *table = read_text(dir, "table.txt");
    assert_non_null(strstr(table, "Tensor aminoacid: 5 x 201 x 61, 61305 nonzeros\n"));
    assert_non_null(strstr(table, "Tensor vast (synthetic): 165427 x 11374 x 2 x 100 x 89, "
                                  "3000 nonzeros (SYNTHETIC)\n"));
    assert_non_null(strstr(table, "one, \"quoted\" *  ok  "));
    assert_non_null(strstr(table, "gpu              skipped: fixture_no_device: cannot create"));
    assert_non_null(strstr(table, "Geometric-mean speedup over 2 tensors vs 'one, \"quoted\"'"));
    assert_non_null(strstr(table, "(0 of 2 tensors)"));
    th_config_free(config);
}

/* ---- The command ---------------------------------------------------------------- */

static th_test_run run_tensorhost(const char *const *args)
{
    return th_test_run_program(TH_TENSORHOST_EXE, args);
}

static void test_command_compare_cpu(void **state)
{
    (void)state;
    g_autofree char *dir = g_build_filename(temp_dir, "command", NULL);
    g_autofree char *set_dir = g_strconcat("compare.output.dir=", dir, NULL);
    const char *const args[] = {"--config", TH_SOURCE_DIR "/configs/compare-cpu.toml",
                                "--set", "compare.repeats=2", "--set", "compare.warmup=0",
                                "--set", set_dir, NULL};
    th_test_run r = run_tensorhost(args);
    if (r.status != 0)
        fail_msg("exit %d: %s", r.status, r.err);
    assert_non_null(strstr(r.out, "Tensor uber-2014-sample: 183 x 24 x 874 x 1247, 353486 "
                                  "nonzeros"));
    assert_non_null(strstr(r.out, "Tensor chicago (synthetic): "));
    assert_non_null(strstr(r.out, "Geometric-mean speedup over 2 tensors vs '1 thread'"));
    static const char *const files[] = {"table.txt",     "results.csv",       "geomean.csv",
                                        "results.json",  "time-total.png",    "time-total.svg",
                                        "time-per-mode.png", "time-per-mode.svg", "memory.png",
                                        "memory.svg"};
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
        g_autofree char *path = g_build_filename(dir, files[i], NULL);
        if (!g_file_test(path, G_FILE_TEST_IS_REGULAR))
            fail_msg("missing %s", path);
    }
    /* Both backends on both tensors (uber and chicago, 4 modes each): every
     * per-mode row has both speedups. */
    g_autofree char *csv = read_text(dir, "results.csv");
    assert_int_equal(check_per_mode_speedups(csv), 2 * 4 + 2 * 4);
    th_test_run_clear(&r);

    /* Again into the same folder, quietly and without charts: -q prints no
     * table (it is in table.txt), and the previous comparison's charts make
     * way, so that the folder holds this comparison's outputs alone. */
    const char *const quiet[] = {"-q", "--config", TH_SOURCE_DIR "/configs/compare-cpu.toml",
                                 "--set", "compare.repeats=1", "--set", "compare.warmup=0",
                                 "--set", "compare.output.charts=false", "--set", set_dir, NULL};
    r = run_tensorhost(quiet);
    if (r.status != 0)
        fail_msg("exit %d: %s", r.status, r.err);
    assert_string_equal(r.out, "");
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
        g_autofree char *path = g_build_filename(dir, files[i], NULL);
        const gboolean chart = g_str_has_suffix(files[i], ".png") ||
                               g_str_has_suffix(files[i], ".svg");
        if (g_file_test(path, G_FILE_TEST_EXISTS) == chart)
            fail_msg("%s %s", path, chart ? "is left from the previous comparison" : "is missing");
    }
    th_test_run_clear(&r);
}

/* The user's report: threads = 100000 in a comparison crashed inside the
 * OpenMP runtime after the backends before it had been measured. Now: exit
 * 1, one error line naming the backend, option, value and range, and
 * nothing read, measured or written. */
static void test_command_bad_option_exits_before_measuring(void **state)
{
    (void)state;
    g_autofree char *dir = g_build_filename(temp_dir, "command-bad-option", NULL);
    g_autofree char *text = g_strdup_printf(
        "[tensor]\npath = \"" AMINOACID "\"\n[cpd]\nrank = 3\n"
        "[compare]\nrepeats = 1\nwarmup = 0\n"
        "[[compare.backend]]\nlabel = \"1 thread\"\nplugin = \"cpu-reference\"\n"
        "options = { threads = 1 }\n"
        "[[compare.backend]]\nlabel = \"many\"\nplugin = \"cpu-reference\"\n"
        "options = { threads = 100000 }\n"
        "[compare.output]\ndir = \"%s\"\n",
        dir);
    g_autofree char *path = g_build_filename(temp_dir, "bad-option.toml", NULL);
    assert_true(g_file_set_contents(path, text, -1, NULL));
    const char *const args[] = {"--config", path, NULL};
    th_test_run r = run_tensorhost(args);
    if (r.status != 1)
        fail_msg("exit %d (expected 1): %s", r.status, r.err);
    /* One line, ending in a newline. */
    assert_non_null(strchr(r.err, '\n'));
    assert_string_equal(strchr(r.err, '\n'), "\n");
    g_autofree char *prefix = g_strconcat("tensorhost: error: ", path, ":", NULL);
    assert_true(g_str_has_prefix(r.err, prefix));
    assert_true(g_str_has_suffix(r.err, ": compare.backend 'many': cpu-reference: cannot "
                                         "create an instance: option 'threads': 100000 is out "
                                         "of range: expected an integer from 1 to 1024 "
                                         "(TH_ERR_INVALID_ARGUMENT)\n"));
    assert_null(strstr(r.out, "Tensor "));
    assert_null(strstr(r.out, "Backend "));
    assert_false(g_file_test(dir, G_FILE_TEST_EXISTS));
    th_test_run_clear(&r);
}

static void test_command_mismatch_exits_nonzero(void **state)
{
    (void)state;
    g_autofree char *dir = g_build_filename(temp_dir, "command-wrong", NULL);
    g_autofree char *text = g_strdup_printf("%s[compare.output]\ndir = \"%s\"\n", wrong_config, dir);
    g_autofree char *path = g_build_filename(temp_dir, "wrong.toml", NULL);
    assert_true(g_file_set_contents(path, text, -1, NULL));
    const char *const args[] = {"--config", path, NULL};
    th_test_run r = run_tensorhost(args);
    assert_int_equal(r.status, 1);
    assert_string_equal(r.err,
                        "tensorhost: error: comparison failed: backend 'wrong' on tensor "
                        "'aminoacid': mode 1: relative Frobenius error 0.01 vs baseline 'cpu' "
                        "exceeds tolerance 0.0001\n");
    assert_non_null(strstr(r.out, "wrong    MISMATCH"));
    g_autofree char *csv_path = g_build_filename(dir, "results.csv", NULL);
    assert_true(g_file_test(csv_path, G_FILE_TEST_IS_REGULAR));
    th_test_run_clear(&r);
}

#define UBER TH_TEST_DATA_DIR "/uber-2014-sample.tns.gz"

/* job = "cpd" with cpd.model = "poisson": every backend runs CP-APR from the
 * same initial model; the log-likelihood stands where CP-ALS has its fit
 * (checked against the baseline's, relative), with the KKT violation and
 * the inner iterations, in the table, CSV and JSON; a plugin without the
 * model's functions (ABI 1.4) cannot run it here: skipped. */
static void test_cpd_job_poisson(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load("[tensor]\npath = \"" UBER "\"\n"
                                       "[cpd]\nmodel = \"poisson\"\nrank = 3\nmax_iters = 3\n"
                                       "tolerance = 1e-12\n"
                                       "[compare]\njob = \"cpd\"\nrepeats = 1\nwarmup = 0\n"
                                       "tolerance = 1e-12\n"
                                       "[[compare.backend]]\nlabel = \"cpu\"\n"
                                       "plugin = \"" CPU_REFERENCE "\"\n"
                                       "[compare.backend.options]\nthreads = 2\n"
                                       "[[compare.backend]]\nlabel = \"one-thread\"\n"
                                       "plugin = \"" CPU_REFERENCE "\"\n"
                                       "[compare.backend.options]\nthreads = 1\n"
                                       "[[compare.backend]]\nlabel = \"good\"\n"
                                       "plugin = \"" FIXTURE_GOOD "\"\n");
    GError *error = NULL;
    g_autoptr(th_compare_result) result = th_compare_run_all(config, &error);
    if (!result)
        fail_msg("%s", error->message);
    assert_int_equal(result->model, TH_MODEL_POISSON);
    assert_int_equal(result->failures->len, 0);
    const th_compare_run *cpu = run_at(result, 0, 0), *one = run_at(result, 0, 1),
                         *good = run_at(result, 0, 2);
    assert_int_equal(cpu->status, TH_COMPARE_OK);
    assert_int_equal(one->status, TH_COMPARE_OK);
    assert_int_equal(cpu->iterations, 3);
    assert_true(isfinite(cpu->log_likelihood) && cpu->log_likelihood < 0.0); /* counts */
    assert_true(cpu->log_likelihood_difference == 0.0);
    assert_true(fabs(one->log_likelihood_difference) <= 1e-12);
    assert_true(isfinite(cpu->kkt_violation) && cpu->kkt_violation > 0.0);
    assert_true(cpu->inner_iterations >= 3 && cpu->inner_iterations <= 3 * 4 * 10);
    assert_true(cpu->fit > 0.0 && cpu->fit < 1.0);
    assert_int_equal(good->status, TH_COMPARE_SKIPPED);
    assert_non_null(strstr(good->reason, "generalized_mttkrp"));

    g_autofree char *table = th_compare_format_table(result);
    assert_non_null(strstr(table, "log-likelihood"));
    assert_non_null(strstr(table, "KKT"));
    assert_null(strstr(table, " fit "));
    g_autofree char *csv = th_compare_format_csv(result);
    g_auto(GStrv) lines = g_strsplit(csv, "\n", -1);
    g_autoptr(GPtrArray) header = csv_fields(lines[0]);
    const int model = column_of(header, "model"), ll = column_of(header, "log_likelihood");
    const int inner = column_of(header, "inner_iterations");
    g_autoptr(GPtrArray) first = csv_fields(lines[1]);
    assert_string_equal(g_ptr_array_index(first, model), "poisson");
    assert_true(fabs(csv_double(first, ll) - cpu->log_likelihood) <= 1e-8 * fabs(cpu->log_likelihood));
    assert_true(csv_double(first, inner) == cpu->inner_iterations);

    g_autoptr(JsonNode) root = th_compare_json(result);
    JsonObject *top = json_node_get_object(root);
    assert_string_equal(json_object_get_string_member(top, "model"), "poisson");
    JsonObject *run = json_array_get_object_element(
        json_object_get_array_member(
            json_array_get_object_element(json_object_get_array_member(top, "tensors"), 0),
            "backends"),
        0);
    JsonObject *cpd = json_object_get_object_member(run, "cpd");
    assert_true(json_object_get_double_member(cpd, "log_likelihood") == cpu->log_likelihood);
    assert_true(json_object_get_double_member(cpd, "kkt_violation") == cpu->kkt_violation);
    assert_int_equal(json_object_get_int_member(cpd, "inner_iterations"), cpu->inner_iterations);

    /* Values below 0 are no counts: refused before any backend runs. */
    g_autoptr(th_config) negative = load("[tensor]\npath = \"" AMINOACID "\"\n"
                                         "[cpd]\nmodel = \"poisson\"\nrank = 2\n"
                                         "[compare]\njob = \"cpd\"\nrepeats = 1\nwarmup = 0\n"
                                         "[[compare.backend]]\nplugin = \"" CPU_REFERENCE "\"\n");
    g_autoptr(th_compare_result) refused = th_compare_run_all(negative, &error);
    assert_null(refused);
    /* ... as the file is read, at the line of the first negative value. */
    if (!strstr(error->message, "aminoacid.sptensor.txt:") ||
        !strstr(error->message, "is negative: the Poisson model"))
        fail_msg("unexpected error: %s", error->message);
    g_clear_error(&error);
}

/* job = "cpd" with tensor.missing = "unlisted": every backend completes the
 * same training entries (the same seeded holdout) from the same initial
 * factors; the RMSEs join the fit in the table, CSV and JSON; a plugin
 * without row_least_squares (ABI 1.5) is skipped, saying so. */
static void test_cpd_job_completion(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load("[tensor]\npath = \"" UBER "\"\nmissing = \"unlisted\"\n"
                                       "holdout = 0.1\n"
                                       "[cpd]\nrank = 3\nmax_iters = 3\nl2 = 0.01\n"
                                       "tolerance = 0\n"
                                       "[compare]\njob = \"cpd\"\nrepeats = 1\nwarmup = 0\n"
                                       "tolerance = 1e-12\n"
                                       "[[compare.backend]]\nlabel = \"cpu\"\n"
                                       "plugin = \"" CPU_REFERENCE "\"\n"
                                       "[compare.backend.options]\nthreads = 2\n"
                                       "[[compare.backend]]\nlabel = \"one-thread\"\n"
                                       "plugin = \"" CPU_REFERENCE "\"\n"
                                       "[compare.backend.options]\nthreads = 1\n"
                                       "[[compare.backend]]\nlabel = \"good\"\n"
                                       "plugin = \"" FIXTURE_GOOD "\"\n");
    GError *error = NULL;
    g_autoptr(th_compare_result) result = th_compare_run_all(config, &error);
    if (!result)
        fail_msg("%s", error->message);
    assert_int_equal(result->model, TH_MODEL_COMPLETION);
    assert_int_equal(result->failures->len, 0);
    const th_compare_run *cpu = run_at(result, 0, 0), *one = run_at(result, 0, 1),
                         *good = run_at(result, 0, 2);
    assert_int_equal(cpu->status, TH_COMPARE_OK);
    assert_int_equal(one->status, TH_COMPARE_OK);
    assert_int_equal(cpu->iterations, 3);
    assert_true(cpu->train_rmse > 0.0 && isfinite(cpu->holdout_rmse));
    /* The row solves give the same bits on any thread count. */
    assert_true(one->train_rmse == cpu->train_rmse && one->holdout_rmse == cpu->holdout_rmse);
    assert_true(one->fit_difference == 0.0);
    assert_int_equal(good->status, TH_COMPARE_SKIPPED);
    assert_non_null(strstr(good->reason, "row_least_squares"));

    g_autofree char *table = th_compare_format_table(result);
    assert_non_null(strstr(table, "held-out RMSE"));
    assert_non_null(strstr(table, "Completion"));
    g_autofree char *csv = th_compare_format_csv(result);
    g_auto(GStrv) lines = g_strsplit(csv, "\n", -1);
    g_autoptr(GPtrArray) header = csv_fields(lines[0]);
    const int model = column_of(header, "model"), held = column_of(header, "holdout_rmse");
    g_autoptr(GPtrArray) first = csv_fields(lines[1]);
    assert_string_equal(g_ptr_array_index(first, model), "completion");
    assert_true(fabs(csv_double(first, held) - cpu->holdout_rmse) <= 1e-8 * cpu->holdout_rmse);

    g_autoptr(JsonNode) root = th_compare_json(result);
    JsonObject *top = json_node_get_object(root);
    assert_string_equal(json_object_get_string_member(top, "model"), "completion");
    JsonObject *run = json_array_get_object_element(
        json_object_get_array_member(
            json_array_get_object_element(json_object_get_array_member(top, "tensors"), 0),
            "backends"),
        0);
    JsonObject *cpd = json_object_get_object_member(run, "cpd");
    assert_true(json_object_get_double_member(cpd, "train_rmse") == cpu->train_rmse);
    assert_true(json_object_get_double_member(cpd, "holdout_rmse") == cpu->holdout_rmse);
}

/* cpd.l2 and cpd.l1 reach every backend of a CP-ALS comparison: the same
 * regularised run on each (the fits agree, and differ from the
 * unregularised run's), and results.json and the table say so. */
static void test_cpd_job_regularised(void **state)
{
    (void)state;
    static const char *const tail =
        "[compare]\njob = \"cpd\"\nrepeats = 1\nwarmup = 0\ntolerance = 1e-8\n"
        "[[compare.backend]]\nlabel = \"cpu\"\nplugin = \"" CPU_REFERENCE "\"\n"
        "[[compare.backend]]\nlabel = \"good\"\nplugin = \"" FIXTURE_GOOD "\"\n";
    g_autofree char *regularised_text = g_strconcat(
        "[tensor]\npath = \"" AMINOACID "\"\n[cpd]\nrank = 3\nmax_iters = 10\ntolerance = 0\n"
        "update = \"host\"\nl2 = 50.0\nl1 = [0.0, 100.0, 0.0]\nhals_budget = 2\n",
        tail, NULL);
    g_autofree char *plain_text = g_strconcat(
        "[tensor]\npath = \"" AMINOACID "\"\n[cpd]\nrank = 3\nmax_iters = 10\ntolerance = 0\n"
        "update = \"host\"\n",
        tail, NULL);
    g_autoptr(th_config) config = load(regularised_text);
    g_autoptr(th_config) plain_config = load(plain_text);
    GError *error = NULL;
    g_autoptr(th_compare_result) result = th_compare_run_all(config, &error);
    if (!result)
        fail_msg("%s", error->message);
    g_autoptr(th_compare_result) plain = th_compare_run_all(plain_config, &error);
    if (!plain)
        fail_msg("%s", error->message);
    assert_int_equal(result->failures->len, 0);
    assert_true(result->regularised && !plain->regularised);
    const th_compare_run *cpu = run_at(result, 0, 0), *good = run_at(result, 0, 1);
    assert_int_equal(cpu->status, TH_COMPARE_OK);
    assert_int_equal(good->status, TH_COMPARE_OK);
    assert_true(fabs(good->fit_difference) <= 1e-8);
    assert_true(fabs(cpu->fit - run_at(plain, 0, 0)->fit) > 1e-6);

    g_autofree char *table = th_compare_format_table(result);
    assert_non_null(strstr(table, "CP-ALS, regularised"));
    g_autoptr(JsonNode) root = th_compare_json(result);
    JsonObject *top = json_node_get_object(root);
    assert_true(json_object_get_double_member(top, "l2") == 50.0);
    JsonArray *l1 = json_object_get_array_member(top, "l1");
    assert_int_equal(json_array_get_length(l1), 3);
    assert_true(json_array_get_double_element(l1, 1) == 100.0);
    /* The l1 mode's passes: what chose them, as the run's report says. */
    JsonObject *hals = json_object_get_object_member(top, "hals");
    assert_int_equal(json_object_get_int_member(hals, "max_passes"), 5);
    assert_true(json_object_get_double_member(hals, "budget") == 2.0);
    g_autoptr(JsonNode) plain_root = th_compare_json(plain);
    JsonObject *plain_top = json_node_get_object(plain_root);
    assert_true(json_object_get_double_member(plain_top, "l1") == 0.0);
    assert_false(json_object_has_member(plain_top, "hals"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_geometric_mean),
        cmocka_unit_test(test_stat_of),
        cmocka_unit_test(test_iteration_time_is_the_median_iteration),
        cmocka_unit_test(test_relative_error),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_same_initial_factors_reach_every_backend),
        cmocka_unit_test(test_mismatch_is_caught_with_mode_and_error),
        cmocka_unit_test(test_tolerance_decides),
        cmocka_unit_test(test_wrong_baseline_fails_every_other),
        cmocka_unit_test(test_cpd_job_compares_fits),
        cmocka_unit_test(test_cpd_job_poisson),
        cmocka_unit_test(test_cpd_job_completion),
        cmocka_unit_test(test_cpd_job_regularised),
        cmocka_unit_test(test_cpd_job_with_a_sweep_backend),
        cmocka_unit_test(test_unavailable_backend_is_skipped_unless_baseline),
        cmocka_unit_test(test_bad_option_fails_before_any_tensor_is_read),
        cmocka_unit_test(test_missing_tensor_fails_before_any_is_read),
        cmocka_unit_test(test_stop_skips_the_tensors_not_read),
        cmocka_unit_test(test_cancelled_call_is_an_interruption),
        cmocka_unit_test(test_sweep_options_reach_the_plugin),
        cmocka_unit_test(test_csv_shape),
        cmocka_unit_test(test_per_mode_speedups),
        cmocka_unit_test(test_per_mode_speedup_missing_time),
        cmocka_unit_test(test_json_shape),
        cmocka_unit_test(test_charts_are_valid_png_and_svg),
        cmocka_unit_test(test_table_lists_every_backend),
        cmocka_unit_test(test_command_compare_cpu),
        cmocka_unit_test(test_command_mismatch_exits_nonzero),
        cmocka_unit_test(test_command_bad_option_exits_before_measuring),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
