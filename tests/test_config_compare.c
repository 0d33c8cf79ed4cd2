/* The [compare] part of the config: defaults, arrays of tables, sweeps,
 * synthetic tensors, the keys a comparison refuses, --set, the listing and
 * every error with its exact message. Configs are loaded from strings named
 * "DIR/compare.toml" under a fresh temp folder. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "config/config.h"
#include "test_support.h"

static char *temp_dir;
static char *config_name;

static int setup(void **state)
{
    (void)state;
    temp_dir = g_dir_make_tmp("test_config_compare-XXXXXX", NULL);
    assert_non_null(temp_dir);
    config_name = g_build_filename(temp_dir, "compare.toml", NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    g_rmdir(temp_dir);
    g_free(temp_dir);
    g_free(config_name);
    return 0;
}

static th_config *load_ok(const char *text, const char *const *overrides)
{
    GError *error = NULL;
    th_config *config = th_config_load_from_string(config_name, text, -1, overrides, &error);
    if (!config)
        fail_msg("unexpected error: %s", error->message);
    return config;
}

/* The error of a config that must fail with `code`, "FILE" for its name. */
static char *load_error(const char *text, const char *const *overrides, th_config_error code)
{
    GError *error = NULL;
    th_config *config = th_config_load_from_string(config_name, text, -1, overrides, &error);
    assert_null(config);
    assert_non_null(error);
    assert_true(error->domain == TH_CONFIG_ERROR);
    if (error->code != (int)code)
        fail_msg("error code %d, expected %d: %s", error->code, code, error->message);
    g_autofree char *escaped = g_regex_escape_string(config_name, -1);
    g_autoptr(GRegex) regex = g_regex_new(escaped, 0, 0, NULL);
    char *message = g_regex_replace_literal(regex, error->message, -1, 0, "FILE", 0, NULL);
    g_error_free(error);
    return message;
}

#define ASSERT_LOAD_ERROR(text, overrides, code, expected)                                     \
    do {                                                                                       \
        g_autofree char *message_ = load_error((text), (overrides), (code));                  \
        assert_string_equal(message_, (expected));                                            \
    } while (0)

static const th_compare_backend_config *backend_at(const th_config *config, guint i)
{
    assert_true(i < config->compare->backends->len);
    return g_ptr_array_index(config->compare->backends, i);
}

static const th_compare_tensor_config *tensor_at(const th_config *config, guint i)
{
    assert_true(i < config->compare->tensors->len);
    return g_ptr_array_index(config->compare->tensors, i);
}

static const char *option_of(const th_compare_backend_config *backend, const char *key)
{
    return th_test_option_value(backend->options, key);
}

static char *in_temp(const char *relative)
{
    return g_build_filename(temp_dir, relative, NULL);
}

/* ---- Presence and defaults ---------------------------------------------- */

static void test_no_compare_section_means_single_run(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load_ok("[tensor]\npath = \"t.tns\"\n", NULL);
    assert_null(config->compare);
}

static void test_defaults(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load_ok("[tensor]\npath = \"t.tns\"\n[cpd]\nrank = 7\n"
                                          "[output]\ndir = \"out\"\n"
                                          "[[compare.backend]]\nplugin = \"cpu-reference\"\n",
                                          NULL);
    const th_compare_config *compare = config->compare;
    assert_non_null(compare);
    assert_string_equal(compare->job, "mttkrp");
    assert_string_equal(compare->baseline, "cpu-reference");
    assert_int_equal(compare->repeats, 10);
    assert_int_equal(compare->warmup, 2);
    assert_true(compare->tolerance == 1e-4);
    assert_int_equal(compare->rank, 7); /* cpd.rank */
    assert_string_equal(compare->timer, "host");
    assert_true(compare->charts);
    g_autofree char *out = in_temp("out");
    assert_string_equal(compare->output_dir, out); /* output.dir */
    /* tensor.path stands in for [[compare.tensor]]. */
    assert_int_equal(compare->tensors->len, 1);
    g_autofree char *path = in_temp("t.tns");
    assert_string_equal(tensor_at(config, 0)->path, path);
    assert_string_equal(tensor_at(config, 0)->label, "t");
    assert_null(tensor_at(config, 0)->synthetic);
    assert_int_equal(compare->backends->len, 1);
    assert_string_equal(backend_at(config, 0)->label, "cpu-reference");
    assert_int_equal(backend_at(config, 0)->options->len, 0);
}

static void test_all_keys_set(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load_ok(
        "[compare]\njob = \"cpd\"\nbaseline = \"two\"\nrepeats = 3\nwarmup = 0\n"
        "tolerance = 0\nrank = 5\ntimer = \"backend\"\n"
        "[[compare.tensor]]\nlabel = \"Uber\"\npath = \"../data/u.tns.gz\"\n"
        "[[compare.tensor]]\nsynthetic = \"nell-2\"\nnnz = 1000\nseed = 9\n"
        "[[compare.tensor]]\nsynthetic = \"enron\"\nlabel = \"synthetic enron\"\n"
        "[[compare.backend]]\nlabel = \"one\"\nplugin = \"cpu-reference\"\n"
        "options = { threads = 1 }\n"
        "[[compare.backend]]\nlabel = \"two\"\nplugin = \"./my.so\"\n"
        "[compare.output]\ndir = \"cmp\"\ncharts = false\n",
        NULL);
    const th_compare_config *compare = config->compare;
    assert_string_equal(compare->job, "cpd");
    assert_string_equal(compare->baseline, "two");
    assert_int_equal(compare->repeats, 3);
    assert_int_equal(compare->warmup, 0);
    assert_true(compare->tolerance == 0.0);
    assert_int_equal(compare->rank, 5);
    assert_string_equal(compare->timer, "backend");
    assert_false(compare->charts);
    g_autofree char *dir = in_temp("cmp");
    assert_string_equal(compare->output_dir, dir);
    assert_int_equal(compare->tensors->len, 3);
    g_autofree char *data = g_canonicalize_filename("../data/u.tns.gz", temp_dir);
    assert_string_equal(tensor_at(config, 0)->path, data);
    assert_string_equal(tensor_at(config, 0)->label, "Uber");
    assert_string_equal(tensor_at(config, 1)->synthetic, "nell-2");
    assert_null(tensor_at(config, 1)->path);
    assert_int_equal(tensor_at(config, 1)->nnz, 1000);
    assert_int_equal(tensor_at(config, 1)->seed, 9);
    /* Synthetic tensors are labelled so, unless the label says it already. */
    assert_string_equal(tensor_at(config, 1)->label, "nell-2 (synthetic)");
    assert_string_equal(tensor_at(config, 2)->label, "synthetic enron");
    assert_int_equal(tensor_at(config, 2)->nnz, 0);
    assert_int_equal(tensor_at(config, 2)->seed, 1);
    assert_string_equal(option_of(backend_at(config, 0), "threads"), "1");
    g_autofree char *plugin = in_temp("my.so");
    assert_string_equal(backend_at(config, 1)->plugin, plugin);
}

static void test_label_defaults_from_plugin_path(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load_ok("[tensor]\npath = \"t.tns.gz\"\n"
                                          "[[compare.backend]]\nplugin = \"lib/fast.so\"\n",
                                          NULL);
    assert_string_equal(backend_at(config, 0)->label, "fast");
    assert_string_equal(tensor_at(config, 0)->label, "t");
}

/* ---- Sweeps ---------------------------------------------------------------- */

static void test_sweep_expands_to_one_backend_per_combination(void **state)
{
    (void)state;
    g_autoptr(th_config) config =
        load_ok("[tensor]\npath = \"t.tns\"\n[compare]\nbaseline = \"s[kappa=66,P=8]\"\n"
                "[[compare.backend]]\nlabel = \"base\"\nplugin = \"gpu-scheme1\"\n"
                "[[compare.backend]]\nlabel = \"s\"\nplugin = \"gpu-adaptive\"\n"
                "options = { device = 0 }\n"
                "sweep = { kappa = [33, 66, 132], P = [8, 16] }\n",
                NULL);
    static const char *const labels[] = {
        "base",           "s[kappa=33,P=8]",  "s[kappa=33,P=16]", "s[kappa=66,P=8]",
        "s[kappa=66,P=16]", "s[kappa=132,P=8]", "s[kappa=132,P=16]",
    };
    static const char *const kappa[] = {NULL, "33", "33", "66", "66", "132", "132"};
    static const char *const partitions[] = {NULL, "8", "16", "8", "16", "8", "16"};
    assert_int_equal(config->compare->backends->len, G_N_ELEMENTS(labels));
    for (guint i = 0; i < G_N_ELEMENTS(labels); i++) {
        const th_compare_backend_config *backend = backend_at(config, i);
        assert_string_equal(backend->label, labels[i]);
        assert_int_equal(backend->sweep->len, 0);
        if (i == 0) {
            assert_int_equal(backend->options->len, 0);
            continue;
        }
        assert_string_equal(backend->plugin, "gpu-adaptive");
        /* The plain options first, then the swept values in sweep order. */
        assert_int_equal(backend->options->len, 3);
        const th_config_option *first = g_ptr_array_index(backend->options, 0);
        assert_string_equal(first->key, "device");
        assert_string_equal(option_of(backend, "kappa"), kappa[i]);
        assert_string_equal(option_of(backend, "P"), partitions[i]);
    }
    assert_string_equal(config->compare->baseline, "s[kappa=66,P=8]");
}

static void test_sweep_values_render_like_options(void **state)
{
    (void)state;
    g_autoptr(th_config) config =
        load_ok("[tensor]\npath = \"t.tns\"\n[[compare.backend]]\nlabel = \"x\"\n"
                "plugin = \"p\"\nsweep = { mode = [\"fast\", true, 0.5] }\n",
                NULL);
    assert_int_equal(config->compare->backends->len, 3);
    assert_string_equal(backend_at(config, 0)->label, "x[mode=fast]");
    assert_string_equal(backend_at(config, 1)->label, "x[mode=true]");
    assert_string_equal(backend_at(config, 2)->label, "x[mode=0.5]");
}

static void test_sweep_too_large(void **state)
{
    (void)state;
    GString *values = g_string_new(NULL);
    for (int i = 0; i < 40; i++)
        g_string_append_printf(values, "%s%d", i ? ", " : "", i);
    g_autofree char *text = g_strdup_printf("[tensor]\npath = \"t\"\n[[compare.backend]]\n"
                                            "plugin = \"p\"\nsweep = { a = [%s], b = [%s] }\n",
                                            values->str, values->str);
    g_string_free(values, TRUE);
    ASSERT_LOAD_ERROR(text, NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:3:1: the sweeps of [[compare.backend]] make more than 1024 backends");
}

/* ---- Errors ------------------------------------------------------------------ */

#define HEAD "[tensor]\npath = \"t.tns\"\n"

static void test_value_errors(void **state)
{
    (void)state;
    ASSERT_LOAD_ERROR(HEAD "[compare]\njob = \"foo\"\n", NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:4:7: key 'compare.job': expected one of \"mttkrp\", \"cpd\", "
                      "found the string \"foo\"");
    ASSERT_LOAD_ERROR(HEAD "[compare]\ntimer = 1\n", NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:4:9: key 'compare.timer': expected one of \"host\", \"backend\", "
                      "found the integer 1");
    ASSERT_LOAD_ERROR(HEAD "[compare]\nrepeats = 0\n", NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:4:11: key 'compare.repeats': expected an integer from 1 to 1000000, "
                      "found the integer 0");
    ASSERT_LOAD_ERROR(HEAD "[compare]\ntolerance = -1e-3\n", NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:4:13: key 'compare.tolerance': expected a finite number >= 0, found "
                      "the float -0.001");
    ASSERT_LOAD_ERROR(HEAD "[compare.output]\ncharts = \"yes\"\n", NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:4:10: key 'compare.output.charts': expected a boolean (true or false), "
                      "found the string \"yes\"");
}

static void test_baseline_must_name_a_backend(void **state)
{
    (void)state;
    ASSERT_LOAD_ERROR(HEAD "[compare]\nbaseline = \"x\"\n[[compare.backend]]\nplugin = \"a\"\n"
                           "[[compare.backend]]\nplugin = \"b\"\n",
                      NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:4:12: key 'compare.baseline': expected the label of a "
                      "[[compare.backend]] (a, b), found the string \"x\"");
}

static void test_backend_table_errors(void **state)
{
    (void)state;
    ASSERT_LOAD_ERROR(HEAD "[compare]\nrepeats = 3\n", NULL, TH_CONFIG_ERROR_MISSING,
                      "FILE:3:2: [compare] needs at least one [[compare.backend]] table");
    ASSERT_LOAD_ERROR(HEAD "[[compare.backend]]\nlabel = \"a\"\n", NULL, TH_CONFIG_ERROR_MISSING,
                      "FILE:3:1: missing required key 'compare.backend[0].plugin'");
    ASSERT_LOAD_ERROR(HEAD "[[compare.backend]]\nplugin = \"a\"\n[[compare.backend]]\nplugn = 1\n",
                      NULL, TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "FILE:6:1: unknown key 'compare.backend[1].plugn' "
                      "(did you mean 'compare.backend.plugin'?)");
    ASSERT_LOAD_ERROR(HEAD "[[compare.backend]]\nplugin = \"a\"\nxyzzy = 1\n", NULL,
                      TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "FILE:5:1: unknown key 'compare.backend[0].xyzzy' "
                      "(valid keys of [[compare.backend]]: label, plugin, options, sweep)");
    ASSERT_LOAD_ERROR(HEAD "[compare.backend]\nplugin = \"a\"\n", NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:3:1: key 'compare.backend': expected an array of tables "
                      "([[compare.backend]]), found a table");
    ASSERT_LOAD_ERROR(HEAD "[compare]\nbackend = [5]\n", NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:4:12: key 'compare.backend[0]': expected a table, found the integer 5");
    ASSERT_LOAD_ERROR(HEAD "[[compare.backend]]\nplugin = \"a\"\n[[compare.backend]]\n"
                           "plugin = \"a\"\n",
                      NULL, TH_CONFIG_ERROR_CONFLICT,
                      "FILE:5:1: the backend label \"a\" is already used at FILE:3:1; give each "
                      "one its own 'label'");
    ASSERT_LOAD_ERROR(HEAD "[[compare.backend]]\nplugin = \"a\"\noptions = { threads = [1] }\n",
                      NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:5:23: key 'compare.backend[0].options.threads': expected a string, "
                      "integer, float or boolean, found an array");
}

static void test_sweep_errors(void **state)
{
    (void)state;
    ASSERT_LOAD_ERROR(HEAD "[[compare.backend]]\nplugin = \"a\"\noptions = { kappa = 1 }\n"
                           "sweep = { kappa = [1, 2] }\n",
                      NULL, TH_CONFIG_ERROR_CONFLICT,
                      "FILE:6:11: key 'compare.backend[0].sweep.kappa': 'kappa' is also in "
                      "compare.backend[0].options; give it in one place");
    ASSERT_LOAD_ERROR(HEAD "[[compare.backend]]\nplugin = \"a\"\nsweep = { kappa = [] }\n", NULL,
                      TH_CONFIG_ERROR_TYPE,
                      "FILE:5:19: key 'compare.backend[0].sweep.kappa': expected a non-empty "
                      "array of strings, integers, floats or booleans, found an array");
    ASSERT_LOAD_ERROR(HEAD "[[compare.backend]]\nplugin = \"a\"\nsweep = { kappa = 3 }\n", NULL,
                      TH_CONFIG_ERROR_TYPE,
                      "FILE:5:19: key 'compare.backend[0].sweep.kappa': expected a non-empty "
                      "array of strings, integers, floats or booleans, found the integer 3");
    ASSERT_LOAD_ERROR(HEAD "[[compare.backend]]\nplugin = \"a\"\nsweep = { kappa = [1, [2]] }\n",
                      NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:5:23: key 'compare.backend[0].sweep.kappa[1]': expected a string, "
                      "integer, float or boolean, found an array");
    ASSERT_LOAD_ERROR(HEAD "[[compare.backend]]\nplugin = \"a\"\nsweep = [1]\n", NULL,
                      TH_CONFIG_ERROR_TYPE,
                      "FILE:5:9: key 'compare.backend[0].sweep': expected a table of arrays, such "
                      "as { kappa = [33, 66] }, found an array");
}

static void test_tensor_table_errors(void **state)
{
    (void)state;
    static const char backend[] = "[[compare.backend]]\nplugin = \"a\"\n";
    g_autofree char *both = g_strconcat("[[compare.tensor]]\npath = \"a.tns\"\nsynthetic = \"uber\"\n",
                                        backend, NULL);
    ASSERT_LOAD_ERROR(both, NULL, TH_CONFIG_ERROR_CONFLICT,
                      "FILE:1:1: compare.tensor[0]: give either 'path' (a tensor file) or "
                      "'synthetic' (a preset name), not both");
    g_autofree char *neither = g_strconcat("[[compare.tensor]]\nlabel = \"x\"\n", backend, NULL);
    ASSERT_LOAD_ERROR(neither, NULL, TH_CONFIG_ERROR_MISSING,
                      "FILE:1:1: compare.tensor[0]: give either 'path' (a tensor file) or "
                      "'synthetic' (a preset name), found neither");
    g_autofree char *preset = g_strconcat("[[compare.tensor]]\nsynthetic = \"ubr\"\n", backend, NULL);
    ASSERT_LOAD_ERROR(preset, NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:2:13: key 'compare.tensor[0].synthetic': expected a synthetic preset "
                      "(uber, chicago, nips, vast, enron, nell-2, nell-1, patents, reddit), found the string \"ubr\"");
    g_autofree char *file_nnz = g_strconcat("[[compare.tensor]]\npath = \"a.tns\"\nnnz = 5\n",
                                            backend, NULL);
    ASSERT_LOAD_ERROR(file_nnz, NULL, TH_CONFIG_ERROR_CONFLICT,
                      "FILE:3:1: key 'compare.tensor[0].nnz': only a synthetic tensor takes it, "
                      "not a file");
    g_autofree char *too_many = g_strconcat(
        "[[compare.tensor]]\nsynthetic = \"uber\"\nnnz = 9000000000000\n", backend, NULL);
    ASSERT_LOAD_ERROR(too_many, NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:3:7: key 'compare.tensor[0].nnz': expected an integer from 1 to "
                      "8596812960 (the cells of uber), found the integer 9000000000000");
    g_autofree char *twice = g_strconcat("[[compare.tensor]]\nsynthetic = \"uber\"\n"
                                         "[[compare.tensor]]\nsynthetic = \"uber\"\n",
                                         backend, NULL);
    ASSERT_LOAD_ERROR(twice, NULL, TH_CONFIG_ERROR_CONFLICT,
                      "FILE:3:1: the tensor label \"uber (synthetic)\" is already used at "
                      "FILE:1:1; give each one its own 'label'");
}

static void test_single_run_keys_refused(void **state)
{
    (void)state;
    static const char backend[] = "[[compare.backend]]\nplugin = \"a\"\n";
    g_autofree char *no_tensor = g_strconcat(backend, NULL);
    ASSERT_LOAD_ERROR(no_tensor, NULL, TH_CONFIG_ERROR_MISSING,
                      "FILE: missing required key 'tensor.path' (or [[compare.tensor]] tables)");
    g_autofree char *both = g_strconcat("[tensor]\npath = \"a.tns\"\n[[compare.tensor]]\n"
                                        "synthetic = \"uber\"\n",
                                        backend, NULL);
    ASSERT_LOAD_ERROR(both, NULL, TH_CONFIG_ERROR_CONFLICT,
                      "FILE:2:1: key 'tensor.path': a comparison with [[compare.tensor]] tables "
                      "takes its tensors from them; remove one or the other");
    g_autofree char *plugin = g_strconcat(HEAD "[backend]\nplugin = \"x\"\n", backend, NULL);
    ASSERT_LOAD_ERROR(plugin, NULL, TH_CONFIG_ERROR_CONFLICT,
                      "FILE:4:1: key 'backend.plugin': a comparison takes its plugins from "
                      "[[compare.backend]]");
    g_autofree char *options = g_strconcat(HEAD "[backend.options]\nthreads = 2\n", backend, NULL);
    ASSERT_LOAD_ERROR(options, NULL, TH_CONFIG_ERROR_CONFLICT,
                      "FILE:3:10: key 'backend.options': each [[compare.backend]] has its own "
                      "options");
    g_autofree char *factors = g_strconcat(HEAD "[output]\nwrite_factors = false\n", backend, NULL);
    ASSERT_LOAD_ERROR(factors, NULL, TH_CONFIG_ERROR_CONFLICT,
                      "FILE:4:1: key 'output.write_factors': a comparison writes no factors");
    /* backend.search_path still applies: it is where the plugins are found. */
    g_autofree char *search = g_strconcat(HEAD "[backend]\nsearch_path = [\"p\"]\n", backend, NULL);
    g_autoptr(th_config) config = load_ok(search, NULL);
    assert_int_equal(config->search_path->len, 1);
}

/* A comparison of CP-APR: cpd.model and its keys are the run's, with
 * Poisson's defaults; the comparison's own keys are unchanged. */
static void test_poisson_comparison(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load_ok("[tensor]\npath = \"t.tns\"\n[cpd]\nrank = 5\n"
                                          "model = \"poisson\"\nkappa = 0.5\n"
                                          "[compare]\njob = \"cpd\"\n"
                                          "[[compare.backend]]\nplugin = \"cpu-reference\"\n",
                                          NULL);
    assert_string_equal(config->model, "poisson");
    assert_int_equal(config->max_iters, 1000);
    assert_true(config->tolerance == 1e-4);
    assert_int_equal(config->max_inner_iters, 10);
    assert_true(config->kappa == 0.5);
    assert_string_equal(config->compare->job, "cpd");
    assert_int_equal(config->compare->rank, 5);
    assert_true(config->compare->tolerance == 1e-4);
}

/* ---- --set and the listing -------------------------------------------------- */

static void test_set_overrides(void **state)
{
    (void)state;
    static const char text[] = HEAD "[[compare.backend]]\nplugin = \"a\"\n";
    const char *const overrides[] = {"compare.repeats=3", "compare.job=cpd",
                                     "compare.output.dir=rel", NULL};
    g_autoptr(th_config) config = load_ok(text, overrides);
    assert_int_equal(config->compare->repeats, 3);
    assert_string_equal(config->compare->job, "cpd");
    g_autofree char *cwd = g_get_current_dir();
    g_autofree char *rel = g_build_filename(cwd, "rel", NULL);
    assert_string_equal(config->compare->output_dir, rel);

    const char *const element[] = {"compare.backend.label=x", NULL};
    ASSERT_LOAD_ERROR(text, element, TH_CONFIG_ERROR_OVERRIDE,
                      "--set compare.backend.label=x: 'compare.backend' is an array of tables "
                      "([[compare.backend]]); --set cannot change it, edit the file");
    const char *const section[] = {"compare=1", NULL};
    ASSERT_LOAD_ERROR(text, section, TH_CONFIG_ERROR_OVERRIDE,
                      "--set compare=1: 'compare' is a section; set one of its keys, such as "
                      "'compare.job'");
    const char *const typo[] = {"compare.repat=3", NULL};
    ASSERT_LOAD_ERROR(text, typo, TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "--set compare.repat=3: unknown key 'compare.repat' "
                      "(did you mean 'compare.repeats'?)");
    /* A --set into [compare] of a single-run config makes it a comparison,
     * which then needs its backends; the message names the --set that made
     * the section. */
    const char *const create[] = {"compare.repeats=3", NULL};
    ASSERT_LOAD_ERROR(HEAD, create, TH_CONFIG_ERROR_MISSING,
                      "--set compare.repeats=3: [compare] needs at least one "
                      "[[compare.backend]] table");
}

static void collect(const char *key, const th_config_value *value, void *user_data)
{
    g_string_append_printf(user_data, "%s=%s\n", key, value->text);
}

static void test_foreach_lists_compare_keys(void **state)
{
    (void)state;
    g_autoptr(th_config) config =
        load_ok("[output]\ndir = \"/o\"\n"
                "[[compare.tensor]]\nsynthetic = \"uber\"\nnnz = 10\n"
                "[[compare.backend]]\nlabel = \"k\"\nplugin = \"p\"\n"
                "options = { a = 1 }\nsweep = { b = [2, 3] }\n",
                NULL);
    g_autoptr(GString) listing = g_string_new(NULL);
    th_config_foreach(config, collect, listing);
    const char *compare = strstr(listing->str, "compare.");
    assert_non_null(compare);
    assert_string_equal(compare, "compare.job=mttkrp\n"
                                 "compare.baseline=k[b=2]\n"
                                 "compare.repeats=10\n"
                                 "compare.warmup=2\n"
                                 "compare.tolerance=0.0001\n"
                                 "compare.rank=16\n"
                                 "compare.timer=host\n"
                                 "compare.tensor[0].label=uber (synthetic)\n"
                                 "compare.tensor[0].synthetic=uber\n"
                                 "compare.tensor[0].nnz=10\n"
                                 "compare.tensor[0].seed=1\n"
                                 "compare.backend[0].label=k[b=2]\n"
                                 "compare.backend[0].plugin=p\n"
                                 "compare.backend[0].options.a=1\n"
                                 "compare.backend[0].options.b=2\n"
                                 "compare.backend[1].label=k[b=3]\n"
                                 "compare.backend[1].plugin=p\n"
                                 "compare.backend[1].options.a=1\n"
                                 "compare.backend[1].options.b=3\n"
                                 "compare.output.dir=/o\n"
                                 "compare.output.charts=true\n");
    /* tensor.path is unset (the tensors are in [[compare.tensor]]): not listed. */
    assert_null(strstr(listing->str, "tensor.path"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_compare_section_means_single_run),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_all_keys_set),
        cmocka_unit_test(test_label_defaults_from_plugin_path),
        cmocka_unit_test(test_sweep_expands_to_one_backend_per_combination),
        cmocka_unit_test(test_sweep_values_render_like_options),
        cmocka_unit_test(test_sweep_too_large),
        cmocka_unit_test(test_value_errors),
        cmocka_unit_test(test_baseline_must_name_a_backend),
        cmocka_unit_test(test_backend_table_errors),
        cmocka_unit_test(test_sweep_errors),
        cmocka_unit_test(test_tensor_table_errors),
        cmocka_unit_test(test_single_run_keys_refused),
        cmocka_unit_test(test_poisson_comparison),
        cmocka_unit_test(test_set_overrides),
        cmocka_unit_test(test_foreach_lists_compare_keys),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
