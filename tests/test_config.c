/* The config loader: defaults, every error path with its exact message
 * (file:line:column, key, expected, found), path resolution, backend options
 * and --set overrides. Configs are written to a fresh temp folder. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_support.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "cpd/cp_als.h"

static char *temp_dir;

static int make_temp_dir(void **state)
{
    (void)state;
    GError *error = NULL;
    temp_dir = g_dir_make_tmp("test_config-XXXXXX", &error);
    assert_non_null(temp_dir);
    return 0;
}

static int remove_temp_dir(void **state)
{
    (void)state;
    th_test_remove_tree(temp_dir);
    g_free(temp_dir);
    return 0;
}

/* Writes `text` to `relative` under the temp folder; returns the full path. */
static char *write_config_at(const char *relative, const char *text)
{
    char *path = g_build_filename(temp_dir, relative, NULL);
    g_autofree char *dir = g_path_get_dirname(path);
    assert_int_equal(g_mkdir_with_parents(dir, 0700), 0);
    assert_true(g_file_set_contents(path, text, -1, NULL));
    return path;
}

static char *write_config(const char *text)
{
    return write_config_at("config.toml", text);
}

static th_config *load_ok(const char *text, const char *const *overrides)
{
    g_autofree char *path = write_config(text);
    GError *error = NULL;
    th_config *config = th_config_load(path, overrides, &error);
    if (!config)
        fail_msg("unexpected error: %s", error->message);
    return config;
}

/* Loads a config that must fail with `code`; returns the message with the
 * config's path replaced by "FILE", so the expected texts stay readable. */
static char *load_error(const char *text, const char *const *overrides, th_config_error code)
{
    g_autofree char *path = write_config(text);
    GError *error = NULL;
    th_config *config = th_config_load(path, overrides, &error);
    assert_null(config);
    assert_non_null(error);
    assert_true(error->domain == TH_CONFIG_ERROR);
    if (error->code != (int)code)
        fail_msg("error code %d, expected %d: %s", error->code, code, error->message);
    char *message;
    if (g_str_has_prefix(error->message, path))
        message = g_strconcat("FILE", error->message + strlen(path), NULL);
    else
        message = g_strdup(error->message);
    g_error_free(error);
    return message;
}

#define ASSERT_LOAD_ERROR(text, overrides, code, expected)                                     \
    do {                                                                                       \
        g_autofree char *message_ = load_error((text), (overrides), (code));                  \
        assert_string_equal(message_, (expected));                                            \
    } while (0)

static const char *option_value(const th_config *config, const char *key)
{
    return th_test_option_value(config->plugin_options, key);
}

static char *in_temp(const char *relative)
{
    return g_build_filename(temp_dir, relative, NULL);
}

/* ---- Defaults and the listing ------------------------------------------ */

static void collect(const char *key, const th_config_value *value, void *user_data)
{
    g_string_append_printf(user_data, "%s=%s\n", key, value->text);
}

static void test_defaults(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load_ok("[tensor]\npath = \"t.tns\"\n", NULL);
    g_autofree char *tensor = in_temp("t.tns");
    g_autofree char *output = in_temp("tensorhost-out");
    assert_string_equal(config->tensor_path, tensor);
    assert_int_equal(config->rank, 16);
    assert_int_equal(config->max_iters, 50);
    assert_true(config->tolerance == 1e-5);
    assert_int_equal(config->seed, 42);
    assert_string_equal(config->update, "auto");
    assert_string_equal(config->plugin, "auto");
    assert_int_equal(config->search_path->len, 0);
    assert_int_equal(config->plugin_options->len, 0);
    assert_string_equal(config->output_dir, output);
    assert_true(config->write_factors);
    g_autofree char *source = in_temp("config.toml");
    assert_string_equal(config->source_path, source);
}

static void test_foreach_lists_every_key_in_schema_order(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load_ok("[output]\nwrite_factors = false\n"
                                          "[backend.options]\nthreads = 4\nmode = \"fast\"\n"
                                          "[backend.options.gpu-adaptive]\nrule = \"balanced\"\n"
                                          "kappa = 264\n"
                                          "[backend]\nsearch_path = [\"/p\"]\n"
                                          "[tensor]\npath = \"/t.tns\"\n",
                                          NULL);
    g_autoptr(GString) listing = g_string_new(NULL);
    th_config_foreach(config, collect, listing);
    g_autofree char *expected = g_strdup_printf("tensor.path=/t.tns\n"
                                                "tensor.missing=zero\n"
                                                "tensor.holdout=0\n"
                                                "cpd.rank=16\n"
                                                "cpd.max_iters=50\n"
                                                "cpd.tolerance=1e-05\n"
                                                "cpd.seed=42\n"
                                                "cpd.update=auto\n"
                                                "cpd.model=least-squares\n"
                                                "cpd.constraints=none\n"
                                                "cpd.l2=0\n"
                                                "cpd.l1=0\n"
                                                "cpd.hals_passes=5\n"
                                                "cpd.hals_budget=0.5\n"
                                                "cpd.max_inner_iters=10\n"
                                                "cpd.kappa=0.01\n"
                                                "cpd.kappa_tolerance=1e-10\n"
                                                "cpd.epsilon=1e-10\n"
                                                "cpd.phi_threshold=1\n"
                                                "backend.plugin=auto\n"
                                                "backend.search_path=[\"/p\"]\n"
                                                "backend.options.threads=4\n"
                                                "backend.options.mode=fast\n"
                                                "backend.options.gpu-adaptive.rule=balanced\n"
                                                "backend.options.gpu-adaptive.kappa=264\n"
                                                "output.dir=%s/tensorhost-out\n"
                                                "output.write_factors=false\n"
                                                "output.format=text\n",
                                                temp_dir);
    assert_string_equal(listing->str, expected);
}

/* Each value with its type and typed member, as "key=TYPE:value". */
static void collect_typed(const char *key, const th_config_value *value, void *user_data)
{
    GString *out = user_data;
    switch (value->kind) {
    case TH_CONFIG_VALUE_INTEGER:
        g_string_append_printf(out, "%s=int:%" G_GINT64_FORMAT "\n", key, value->integer);
        break;
    case TH_CONFIG_VALUE_NUMBER:
        g_string_append_printf(out, "%s=number:%g\n", key, value->number);
        break;
    case TH_CONFIG_VALUE_BOOLEAN:
        g_string_append_printf(out, "%s=bool:%d\n", key, value->boolean);
        break;
    case TH_CONFIG_VALUE_STRING_LIST:
        g_string_append_printf(out, "%s=list:%u\n", key, value->items->len);
        break;
    case TH_CONFIG_VALUE_NUMBER_LIST:
        g_string_append_printf(out, "%s=numbers:%u\n", key, value->numbers->len);
        break;
    case TH_CONFIG_VALUE_STRING:
        g_string_append_printf(out, "%s=string:%s\n", key, value->text);
        break;
    }
}

/* Reports keep TOML's types: options too, as they were written. */
static void test_foreach_keeps_toml_types(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load_ok("[tensor]\npath = \"/t.tns\"\n"
                                          "[cpd]\nseed = 9223372036854775807\ntolerance = 0.5\n"
                                          "[backend]\nsearch_path = [\"/p\", \"/q\"]\n"
                                          "[backend.options]\nthreads = 4\nscale = 2.5\n"
                                          "pinned = true\nmode = \"7\"\n"
                                          "[output]\ndir = \"/o\"\n",
                                          NULL);
    g_autoptr(GString) listing = g_string_new(NULL);
    th_config_foreach(config, collect_typed, listing);
    assert_string_equal(listing->str, "tensor.path=string:/t.tns\n"
                                      "tensor.missing=string:zero\n"
                                      "tensor.holdout=number:0\n"
                                      "cpd.rank=int:16\n"
                                      "cpd.max_iters=int:50\n"
                                      "cpd.tolerance=number:0.5\n"
                                      "cpd.seed=int:9223372036854775807\n"
                                      "cpd.update=string:auto\n"
                                      "cpd.model=string:least-squares\n"
                                      "cpd.constraints=string:none\n"
                                      "cpd.l2=number:0\n"
                                      "cpd.l1=number:0\n"
                                      "cpd.hals_passes=int:5\n"
                                      "cpd.hals_budget=number:0.5\n"
                                      "cpd.max_inner_iters=int:10\n"
                                      "cpd.kappa=number:0.01\n"
                                      "cpd.kappa_tolerance=number:1e-10\n"
                                      "cpd.epsilon=number:1e-10\n"
                                      "cpd.phi_threshold=number:1\n"
                                      "backend.plugin=string:auto\n"
                                      "backend.search_path=list:2\n"
                                      "backend.options.threads=int:4\n"
                                      "backend.options.scale=number:2.5\n"
                                      "backend.options.pinned=bool:1\n"
                                      "backend.options.mode=string:7\n"
                                      "output.dir=string:/o\n"
                                      "output.write_factors=bool:1\n"
                                      "output.format=string:text\n");
}

static void test_all_keys_set(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load_ok("[tensor]\npath = \"/data/t.tns\"\n"
                                          "[cpd]\nrank = 4096\nmax_iters = 4294967295\n"
                                          "tolerance = 0\nseed = 9223372036854775807\n"
                                          "[backend]\nplugin = \"cpu-reference\"\n"
                                          "[output]\ndir = \"/out\"\nwrite_factors = false\n",
                                          NULL);
    assert_int_equal(config->rank, 4096);
    assert_int_equal(config->max_iters, UINT32_MAX);
    assert_true(config->tolerance == 0.0);
    assert_true(config->seed == (uint64_t)INT64_MAX);
    assert_string_equal(config->plugin, "cpu-reference");
    assert_string_equal(config->output_dir, "/out");
    assert_false(config->write_factors);
}

/* cpd.update: the four update paths of cp_als.h, from the file or --set,
 * and one error listing them for anything else. */
static void test_cpd_update(void **state)
{
    (void)state;
    const char *const paths[] = {"auto", "sweep", "mode", "host"};
    for (size_t i = 0; i < G_N_ELEMENTS(paths); i++) {
        g_autofree char *text = g_strdup_printf("tensor.path = \"t\"\n[cpd]\nupdate = \"%s\"\n",
                                                paths[i]);
        g_autoptr(th_config) config = load_ok(text, NULL);
        assert_string_equal(config->update, paths[i]);
    }
    const char *overrides[] = {"cpd.update=host", NULL};
    g_autoptr(th_config) config =
        load_ok("tensor.path = \"t\"\n[cpd]\nupdate = \"sweep\"\n", overrides);
    assert_string_equal(config->update, "host");

    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nupdate = \"gpu\"\n", NULL,
                      TH_CONFIG_ERROR_RANGE,
                      "FILE:3:10: key 'cpd.update': expected one of \"auto\", \"sweep\", "
                      "\"mode\", \"host\", found the string \"gpu\"");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nupdate = true\n", NULL,
                      TH_CONFIG_ERROR_TYPE,
                      "FILE:3:10: key 'cpd.update': expected one of \"auto\", \"sweep\", "
                      "\"mode\", \"host\", found the boolean true");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n", ((const char *[]){"cpd.update=Sweep", NULL}),
                      TH_CONFIG_ERROR_RANGE,
                      "--set cpd.update=Sweep: key 'cpd.update': expected one of \"auto\", "
                      "\"sweep\", \"mode\", \"host\", found the string \"Sweep\"");
}

static void test_cpd_constraints(void **state)
{
    (void)state;
    g_autoptr(th_config) plain = load_ok("tensor.path = \"t\"\n", NULL);
    assert_false(plain->constraints.listed);
    assert_int_equal(plain->constraints.items->len, 1);
    assert_string_equal(g_ptr_array_index(plain->constraints.items, 0), "none");
    assert_int_equal(th_cpd_params_from_config(plain, 2).nonneg_modes, 0);
    g_autoptr(th_config) nonneg =
        load_ok("tensor.path = \"t\"\n[cpd]\nconstraints = \"nonneg\"\nupdate = \"host\"\n", NULL);
    const th_cpd_params all = th_cpd_params_from_config(nonneg, 2);
    assert_true(all.nonneg_modes == UINT64_MAX);
    assert_int_equal(all.constraints_listed, 0);
    assert_int_equal(th_cpd_nonneg_mask(&all, 3), 7);
    /* The per-mode path takes constraints (als_update_nonneg, checked
     * against the plugin when the run is planned). */
    g_autoptr(th_config) in_backend = load_ok(
        "tensor.path = \"t\"\n[cpd]\nconstraints = \"nonneg\"\nupdate = \"mode\"\n", NULL);
    assert_int_equal(th_cpd_params_from_config(in_backend, 2).update, TH_UPDATE_MODE);
    /* One per mode, in a file or through --set. */
    g_autoptr(th_config) per_mode = load_ok(
        "tensor.path = \"t\"\n[cpd]\nconstraints = [\"nonneg\", \"none\", \"nonneg\"]\n", NULL);
    assert_true(per_mode->constraints.listed);
    const th_cpd_params listed = th_cpd_params_from_config(per_mode, 2);
    assert_int_equal(listed.nonneg_modes, 5);
    assert_int_equal(listed.constraints_listed, 3);
    assert_int_equal(th_cpd_nonneg_mask(&listed, 3), 5);
    g_autoptr(GError) order_error = NULL;
    assert_true(th_cpd_check_constraints_order(&listed, 3, &order_error));
    assert_false(th_cpd_check_constraints_order(&listed, 4, &order_error));
    assert_string_equal(order_error->message,
                        "3 constraints given, one per mode, but the tensor has 4 modes");
    const char *set[] = {"cpd.constraints=[\"none\", \"nonneg\"]", NULL};
    g_autoptr(th_config) overridden = load_ok("tensor.path = \"t\"\n", set);
    const th_cpd_params from_set = th_cpd_params_from_config(overridden, 2);
    assert_int_equal(th_cpd_nonneg_mask(&from_set, 2), 2);
    const char *set_one[] = {"cpd.constraints=nonneg", NULL};
    g_autoptr(th_config) overridden_one = load_ok("tensor.path = \"t\"\n", set_one);
    assert_false(overridden_one->constraints.listed);
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nconstraints = [\"nonneg\", \"positive\"]\n", NULL,
                      TH_CONFIG_ERROR_RANGE,
                      "FILE:3:26: key 'cpd.constraints[1]': expected one of \"none\", "
                      "\"nonneg\", found the string \"positive\"");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nconstraints = []\n", NULL,
                      TH_CONFIG_ERROR_RANGE,
                      "FILE:3:15: key 'cpd.constraints': expected one of \"none\", \"nonneg\", "
                      "or a non-empty array of them (one per mode), found an array");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nconstraints = 3\n", NULL,
                      TH_CONFIG_ERROR_TYPE,
                      "FILE:3:15: key 'cpd.constraints': expected one of \"none\", \"nonneg\", "
                      "or an array of them, found the integer 3");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nconstraints = \"positive\"\n", NULL,
                      TH_CONFIG_ERROR_RANGE,
                      "FILE:3:15: key 'cpd.constraints': expected one of \"none\", \"nonneg\", "
                      "or an array of them, found the string \"positive\"");
    /* The sweep takes constraints from plugin ABI 1.6 on: the plan, which
     * knows the plugin, decides. */
    g_autoptr(th_config) swept = load_ok(
        "tensor.path = \"t\"\n[cpd]\nconstraints = \"nonneg\"\nupdate = \"sweep\"\n", NULL);
    assert_int_equal(th_cpd_params_from_config(swept, 2).update, TH_UPDATE_SWEEP);
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nmodel = \"poisson\"\nconstraints = \"nonneg\"\n",
                      NULL, TH_CONFIG_ERROR_CONFLICT,
                      "FILE:4:1: cpd.constraints = \"nonneg\" is for the least-squares model; the "
                      "Poisson model (cpd.model = \"poisson\") has nonnegative factors by "
                      "construction: leave cpd.constraints out");
}

/* cpd.hals_passes and cpd.hals_budget: the coordinate-descent modes'
 * passes, into the run's parameters (defaults 5 and 0.5), and refused
 * where no update makes passes: with the Poisson model, with completion,
 * and with no mode nonnegative and every l1 0. */
static void test_cpd_hals_keys(void **state)
{
    (void)state;
    g_autoptr(th_config) plain = load_ok("tensor.path = \"t\"\n", NULL);
    const th_cpd_params defaults = th_cpd_params_from_config(plain, 2);
    assert_int_equal(defaults.hals_max_passes, 5);
    assert_true(defaults.hals_budget == 0.5);
    g_autoptr(th_config) set = load_ok("tensor.path = \"t\"\n[cpd]\nconstraints = \"nonneg\"\n"
                                       "hals_passes = 20\nhals_budget = 2\n",
                                       NULL);
    const th_cpd_params p = th_cpd_params_from_config(set, 2);
    assert_int_equal(p.hals_max_passes, 20);
    assert_true(p.hals_budget == 2.0);
    const char *by_l1[] = {"cpd.l1=[0, 0.1, 0]", "cpd.hals_budget=0", NULL};
    g_autoptr(th_config) sparse = load_ok("tensor.path = \"t\"\n", by_l1);
    assert_true(sparse->hals_budget == 0.0);

    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nconstraints = \"nonneg\"\nhals_passes = 0\n",
                      NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:4:15: key 'cpd.hals_passes': expected an integer from 1 to "
                      "4294967295, found the integer 0");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nconstraints = \"nonneg\"\n"
                      "hals_budget = -1.0\n",
                      NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:4:15: key 'cpd.hals_budget': expected a finite number >= 0, found "
                      "the float -1");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nhals_passes = 3\n", NULL,
                      TH_CONFIG_ERROR_CONFLICT,
                      "FILE:3:1: cpd.hals_passes: only a mode updated by coordinate descent "
                      "(cpd.constraints = \"nonneg\", or cpd.l1 > 0) makes hierarchical-ALS "
                      "passes, and this run has none; set one of those, or leave "
                      "cpd.hals_passes out");
    ASSERT_LOAD_ERROR("[tensor]\npath = \"t\"\nmissing = \"unlisted\"\n[cpd]\n"
                      "constraints = \"nonneg\"\nhals_budget = 1\n",
                      NULL, TH_CONFIG_ERROR_CONFLICT,
                      "FILE:6:1: cpd.hals_budget: tensor completion (tensor.missing = "
                      "\"unlisted\") solves each factor row by row-wise ALS, not by "
                      "hierarchical-ALS passes over a mode; leave it out");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nmodel = \"poisson\"\nhals_passes = 2\n",
                      NULL, TH_CONFIG_ERROR_CONFLICT,
                      "FILE:4:1: cpd.hals_passes is a parameter of the least-squares model "
                      "(cpd.model = \"least-squares\": how many hierarchical-ALS passes its "
                      "coordinate-descent updates make); the model is \"poisson\"");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nmodel = \"poisson\"\nhals_budget = 1\n",
                      NULL, TH_CONFIG_ERROR_CONFLICT,
                      "FILE:4:1: cpd.hals_budget is a parameter of the least-squares model "
                      "(cpd.model = \"least-squares\": how its coordinate-descent updates "
                      "choose their passes); the model is \"poisson\"");
}

/* cpd.l2 and cpd.l1, CP-ALS's regularisation: a number (l1: or one per
 * mode), finite and >= 0, from the file or --set; l2 is also completion's
 * ridge; the Poisson model takes neither, completion no l1; a per-mode
 * list's length is checked against the tensor's order when the run is
 * planned (th_cpd_check_constraints_order, naming both counts). */
static void test_cpd_l1_and_l2(void **state)
{
    (void)state;
    g_autoptr(th_config) one = load_ok("tensor.path = \"t\"\n[cpd]\nl2 = 1e-3\nl1 = 0.5\n", NULL);
    assert_false(one->l1.listed);
    const th_cpd_params p = th_cpd_params_from_config(one, 2);
    assert_int_equal(p.model, TH_MODEL_LEAST_SQUARES);
    assert_true(p.l2 == 1e-3 && p.l1_listed == 0);
    assert_true(th_cpd_l1(&p, 0) == 0.5 && th_cpd_l1(&p, 5) == 0.5);
    assert_true(th_cpd_regularised(&p, 3));
    assert_int_equal(th_cpd_descent_mask(&p, 3), 7);
    g_autoptr(th_config) listed =
        load_ok("tensor.path = \"t\"\n[cpd]\nl1 = [0, 2, 0.25]\nconstraints = [\"nonneg\", "
                "\"none\", \"none\"]\n",
                NULL);
    assert_true(listed->l1.listed);
    const th_cpd_params q = th_cpd_params_from_config(listed, 2);
    assert_int_equal(q.l1_listed, 3);
    assert_true(th_cpd_l1(&q, 0) == 0.0 && th_cpd_l1(&q, 1) == 2.0 && th_cpd_l1(&q, 2) == 0.25);
    assert_int_equal(th_cpd_descent_mask(&q, 3), 7); /* mode 1 nonneg, 2 and 3 by l1 */
    g_autoptr(GError) order_error = NULL;
    assert_true(th_cpd_check_constraints_order(&q, 3, &order_error));
    g_autoptr(th_config) listed_two =
        load_ok("tensor.path = \"t\"\n[cpd]\nl1 = [0.1, 0.2]\n", NULL);
    const th_cpd_params two = th_cpd_params_from_config(listed_two, 2);
    assert_false(th_cpd_check_constraints_order(&two, 3, &order_error));
    assert_true(g_error_matches(order_error, TH_CPD_ERROR, TH_CPD_ERROR_L1));
    assert_string_equal(order_error->message,
                        "2 l1 weights given, one per mode, but the tensor has 3 modes");
    /* Unregularised by default: l2 = l1 = 0. */
    g_autoptr(th_config) plain = load_ok("tensor.path = \"t\"\n", NULL);
    const th_cpd_params none = th_cpd_params_from_config(plain, 2);
    assert_false(th_cpd_regularised(&none, 3));
    assert_int_equal(th_cpd_descent_mask(&none, 3), 0);
    /* --set, a number or an array. */
    const char *set[] = {"cpd.l1=[1, 0.5]", "cpd.l2=2", NULL};
    g_autoptr(th_config) overridden = load_ok("tensor.path = \"t\"\n", set);
    assert_true(overridden->l1.listed && overridden->l1.values->len == 2);
    assert_true(overridden->l2 == 2.0);
    const char *set_one[] = {"cpd.l1=1e-2", NULL};
    g_autoptr(th_config) overridden_one = load_ok("tensor.path = \"t\"\n", set_one);
    assert_false(overridden_one->l1.listed);
    assert_true(g_array_index(overridden_one->l1.values, double, 0) == 1e-2);
    /* The report's listing keeps a list a list. */
    g_autoptr(GString) typed = g_string_new(NULL);
    th_config_foreach(listed, collect_typed, typed);
    assert_non_null(strstr(typed->str, "cpd.l1=numbers:3\n"));

    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nl1 = -0.5\n", NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:3:6: key 'cpd.l1': expected a finite number >= 0, or a non-empty "
                      "array of them (one per mode), found the float -0.5");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nl1 = nan\n", NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:3:6: key 'cpd.l1': expected a finite number >= 0, or a non-empty "
                      "array of them (one per mode), found the float nan");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nl1 = [0.1, inf]\n", NULL,
                      TH_CONFIG_ERROR_RANGE,
                      "FILE:3:12: key 'cpd.l1[1]': expected a finite number >= 0, found the "
                      "float inf");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nl1 = [0.1, \"a\"]\n", NULL,
                      TH_CONFIG_ERROR_TYPE,
                      "FILE:3:12: key 'cpd.l1[1]': expected a finite number >= 0, found the "
                      "string \"a\"");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nl1 = []\n", NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:3:6: key 'cpd.l1': expected a finite number >= 0, or a non-empty "
                      "array of them (one per mode), found an array");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nl1 = \"0.1\"\n", NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:3:6: key 'cpd.l1': expected a finite number >= 0, or a non-empty "
                      "array of them (one per mode), found the string \"0.1\"");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nl2 = -1\n", NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:3:6: key 'cpd.l2': expected a finite number >= 0, found the "
                      "integer -1");
    const char *bad_set[] = {"cpd.l1=-1", NULL};
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n", bad_set, TH_CONFIG_ERROR_RANGE,
                      "--set cpd.l1=-1: key 'cpd.l1': expected a finite number >= 0, or a "
                      "non-empty array of them (one per mode), found the integer -1");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nmodel = \"poisson\"\nl1 = 0.1\n", NULL,
                      TH_CONFIG_ERROR_CONFLICT,
                      "FILE:4:1: cpd.l1 is a parameter of the least-squares model (cpd.model = "
                      "\"least-squares\": a weight of its regularised updates); the model is "
                      "\"poisson\"");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nmodel = \"poisson\"\nl2 = 0.1\n", NULL,
                      TH_CONFIG_ERROR_CONFLICT,
                      "FILE:4:1: cpd.l2 is a parameter of the least-squares model (cpd.model = "
                      "\"least-squares\": a weight of its regularised updates); the model is "
                      "\"poisson\"");
    ASSERT_LOAD_ERROR("[tensor]\npath = \"t\"\nmissing = \"unlisted\"\n[cpd]\nl1 = 0.1\n", NULL,
                      TH_CONFIG_ERROR_CONFLICT,
                      "FILE:5:1: cpd.l1: tensor completion (tensor.missing = \"unlisted\") "
                      "solves each factor row exactly by row-wise ALS, which has no l1 term; "
                      "leave cpd.l1 out (cpd.l2 is its ridge)");
}

static void test_tolerance_accepts_an_integer(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load_ok("tensor.path = \"t\"\ncpd.tolerance = 1\n", NULL);
    assert_true(config->tolerance == 1.0);
}

/* ---- Type errors ----------------------------------------------------------- */

static void test_type_errors(void **state)
{
    (void)state;
    ASSERT_LOAD_ERROR("[tensor]\npath = 5\n", NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:2:8: key 'tensor.path': expected a non-empty string, "
                      "found the integer 5");
    ASSERT_LOAD_ERROR("[tensor]\npath = \"t\"\n\n[cpd]\nrank = \"abc\"\n", NULL,
                      TH_CONFIG_ERROR_TYPE,
                      "FILE:5:8: key 'cpd.rank': expected an integer from 1 to 4096, "
                      "found the string \"abc\"");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nmax_iters = 2.5\n", NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:3:13: key 'cpd.max_iters': expected an integer from 1 to "
                      "4294967295, found the float 2.5");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\ntolerance = \"small\"\n", NULL,
                      TH_CONFIG_ERROR_TYPE,
                      "FILE:3:13: key 'cpd.tolerance': expected a finite number >= 0, "
                      "found the string \"small\"");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nseed = true\n", NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:3:8: key 'cpd.seed': expected an integer >= 0, "
                      "found the boolean true");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nseed = 1979-05-27T07:32:00Z\n", NULL,
                      TH_CONFIG_ERROR_TYPE,
                      "FILE:3:8: key 'cpd.seed': expected an integer >= 0, "
                      "found the date-time 1979-05-27T07:32:00Z");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[backend]\nplugin = 3\n", NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:3:10: key 'backend.plugin': expected a non-empty string, "
                      "found the integer 3");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[backend]\nsearch_path = \"/p\"\n", NULL,
                      TH_CONFIG_ERROR_TYPE,
                      "FILE:3:15: key 'backend.search_path': expected an array of strings, "
                      "found the string \"/p\"");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[backend]\nsearch_path = [\"a\", 7]\n", NULL,
                      TH_CONFIG_ERROR_TYPE,
                      "FILE:3:21: key 'backend.search_path[1]': expected a non-empty string, "
                      "found the integer 7");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[backend]\noptions = 1\n", NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:3:11: key 'backend.options': expected a table, found the integer 1");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[output]\ndir = [\"a\"]\n", NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:3:7: key 'output.dir': expected a non-empty string, found an array");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[output]\nwrite_factors = \"yes\"\n", NULL,
                      TH_CONFIG_ERROR_TYPE,
                      "FILE:3:17: key 'output.write_factors': expected a boolean (true or "
                      "false), found the string \"yes\"");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\ncpd = 5\n", NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:2:7: key 'cpd': expected a table, found the integer 5");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[[output]]\ndir = \"o\"\n", NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:2:1: key 'output': expected a table, found an array");
}

static void test_string_errors(void **state)
{
    (void)state;
    ASSERT_LOAD_ERROR("[tensor]\npath = \"\"\n", NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:2:8: key 'tensor.path': expected a non-empty string, "
                      "found the string \"\"");
    ASSERT_LOAD_ERROR("[tensor]\npath = \"a\\u0000b\"\n", NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:2:8: key 'tensor.path': expected a non-empty string, "
                      "found a string containing a NUL character");
    /* Long strings are cut and control characters escaped in messages. */
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\ncpd.rank = "
                      "\"0123456789012345678901234567890123456789012345678901234567890123\\n\"\n",
                      NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:2:12: key 'cpd.rank': expected an integer from 1 to 4096, found the "
                      "string \"012345678901234567890123456789012345678901234567890123456789...\"");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\ncpd.rank = \"a\\tb\"\n", NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:2:12: key 'cpd.rank': expected an integer from 1 to 4096, found the "
                      "string \"a\\tb\"");
}

/* ---- Range errors ---------------------------------------------------------- */

static void test_range_errors(void **state)
{
    (void)state;
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\ncpd.rank = 0\n", NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:2:12: key 'cpd.rank': expected an integer from 1 to 4096, "
                      "found the integer 0");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\ncpd.rank = 4097\n", NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:2:12: key 'cpd.rank': expected an integer from 1 to 4096, "
                      "found the integer 4097");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\ncpd.max_iters = 0\n", NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:2:17: key 'cpd.max_iters': expected an integer from 1 to "
                      "4294967295, found the integer 0");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\ncpd.max_iters = 4294967296\n", NULL,
                      TH_CONFIG_ERROR_RANGE,
                      "FILE:2:17: key 'cpd.max_iters': expected an integer from 1 to "
                      "4294967295, found the integer 4294967296");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\ncpd.tolerance = -1e-3\n", NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:2:17: key 'cpd.tolerance': expected a finite number >= 0, "
                      "found the float -0.001");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\ncpd.tolerance = -2\n", NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:2:17: key 'cpd.tolerance': expected a finite number >= 0, "
                      "found the integer -2");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\ncpd.tolerance = nan\n", NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:2:17: key 'cpd.tolerance': expected a finite number >= 0, "
                      "found the float nan");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\ncpd.tolerance = inf\n", NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:2:17: key 'cpd.tolerance': expected a finite number >= 0, "
                      "found the float inf");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\ncpd.seed = -1\n", NULL, TH_CONFIG_ERROR_RANGE,
                      "FILE:2:12: key 'cpd.seed': expected an integer >= 0, "
                      "found the integer -1");
}

/* ---- Unknown keys and sections -------------------------------------------- */

static void test_unknown_key_suggests_nearest(void **state)
{
    (void)state;
    ASSERT_LOAD_ERROR("[tensor]\npath = \"t\"\n[cpd]\nrank = 3\n  rnak = 4\n", NULL,
                      TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "FILE:5:3: unknown key 'cpd.rnak' (did you mean 'cpd.rank'?)");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nmax_iter = 4\n", NULL,
                      TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "FILE:3:1: unknown key 'cpd.max_iter' (did you mean 'cpd.max_iters'?)");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[output]\nwrite_factor = true\n", NULL,
                      TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "FILE:3:1: unknown key 'output.write_factor' "
                      "(did you mean 'output.write_factors'?)");
}

static void test_unknown_key_in_wrong_section_suggests_its_home(void **state)
{
    (void)state;
    ASSERT_LOAD_ERROR("[tensor]\npath = \"t\"\nrank = 3\n", NULL, TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "FILE:3:1: unknown key 'tensor.rank' (did you mean 'cpd.rank'?)");
    ASSERT_LOAD_ERROR("seed = 3\n", NULL, TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "FILE:1:1: unknown key 'seed' (did you mean 'cpd.seed'?)");
}

static void test_unknown_key_without_suggestion_lists_valid_keys(void **state)
{
    (void)state;
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[cpd]\nxyzzy = 1\n", NULL, TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "FILE:3:1: unknown key 'cpd.xyzzy' "
                      "(valid keys of [cpd]: rank, max_iters, tolerance, seed, update, model, constraints, "
                      "l2, l1, hals_passes, hals_budget, max_inner_iters, kappa, kappa_tolerance, epsilon, phi_threshold)");
}

static void test_unknown_section(void **state)
{
    (void)state;
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n\n[cdp]\nrank = 5\n", NULL, TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "FILE:3:2: unknown section 'cdp' (did you mean 'cpd'?)");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[frobnicate]\nx = 1\n", NULL,
                      TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "FILE:2:2: unknown section 'frobnicate' "
                      "(valid sections: tensor, cpd, backend, output, compare)");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[backend.option]\nx = 1\n", NULL,
                      TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "FILE:2:10: unknown section 'backend.option' "
                      "(did you mean 'backend.options'?)");
}

/* ---- Missing, syntax, I/O ---------------------------------------------- */

static void test_missing_tensor_path(void **state)
{
    (void)state;
    ASSERT_LOAD_ERROR("[cpd]\nrank = 3\n", NULL, TH_CONFIG_ERROR_MISSING,
                      "FILE: missing required key 'tensor.path'");
    ASSERT_LOAD_ERROR("", NULL, TH_CONFIG_ERROR_MISSING,
                      "FILE: missing required key 'tensor.path'");
}

static void test_syntax_errors(void **state)
{
    (void)state;
    ASSERT_LOAD_ERROR("[tensor]\npath = \"t\"\n[cpd]\nrank = 1x\n", NULL, TH_CONFIG_ERROR_SYNTAX,
                      "FILE:4:9: TOML syntax error: Error while parsing decimal integer: "
                      "expected digit, saw 'x'");
    ASSERT_LOAD_ERROR("[tensor]\npath = \"t\n", NULL, TH_CONFIG_ERROR_SYNTAX,
                      "FILE:2:10: TOML syntax error: Error while parsing string: "
                      "unescaped control characters other than TAB (U+0009) are explicitly "
                      "prohibited");
    ASSERT_LOAD_ERROR("[tensor]\npath = \"t\"\n[tensor]\n", NULL, TH_CONFIG_ERROR_SYNTAX,
                      "FILE:3:1: TOML syntax error: Error while parsing table header: "
                      "cannot redefine existing table 'tensor'");
    /* An integer that does not fit 64 bits is toml++'s to report. */
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\ncpd.seed = 99999999999999999999\n", NULL,
                      TH_CONFIG_ERROR_SYNTAX,
                      "FILE:2:32: TOML syntax error: Error while parsing decimal integer: "
                      "'99999999999999999999' is not representable in 64 bits");
}

static void test_file_not_found(void **state)
{
    (void)state;
    g_autofree char *path = in_temp("no-such.toml");
    GError *error = NULL;
    assert_null(th_config_load(path, NULL, &error));
    assert_int_equal(error->code, TH_CONFIG_ERROR_IO);
    g_autofree char *expected = g_strdup_printf("%s: cannot read: No such file or directory", path);
    assert_string_equal(error->message, expected);
    g_clear_error(&error);

    assert_null(th_config_load(temp_dir, NULL, &error));
    assert_int_equal(error->code, TH_CONFIG_ERROR_IO);
    g_autofree char *expected_dir = g_strdup_printf("%s: cannot read: Is a directory", temp_dir);
    assert_string_equal(error->message, expected_dir);
    g_clear_error(&error);
}

/* A path to something that is not a config file fails at once, naming the
 * file (and the line and column of a NUL byte), instead of reading on. */
static void test_file_not_text_or_too_large(void **state)
{
    (void)state;
    GError *error = NULL;
    g_autofree char *path = in_temp("nul.toml");
    static const char with_nul[] = "tensor.path = \"t\"\n# a\0b\n";
    assert_true(g_file_set_contents(path, with_nul, sizeof with_nul - 1, NULL));
    assert_null(th_config_load(path, NULL, &error));
    assert_int_equal(error->code, TH_CONFIG_ERROR_SYNTAX);
    g_autofree char *expected_nul = g_strdup_printf(
        "%s:2:4: a NUL byte: a config file is TOML text (is this a binary file?)", path);
    assert_string_equal(error->message, expected_nul);
    g_clear_error(&error);

    /* 16 MiB of comments is still read; one byte more is not. */
    const size_t limit = (size_t)16 << 20;
    char *big = g_malloc(limit + 1);
    memset(big, '#', limit + 1);
    big[0] = '\n';
    g_autofree char *big_path = in_temp("big.toml");
    assert_true(g_file_set_contents(big_path, big, (gssize)limit, NULL));
    assert_null(th_config_load(big_path, NULL, &error));
    assert_int_equal(error->code, TH_CONFIG_ERROR_MISSING); /* read and parsed */
    g_clear_error(&error);
    assert_true(g_file_set_contents(big_path, big, (gssize)limit + 1, NULL));
    g_free(big);
    assert_null(th_config_load(big_path, NULL, &error));
    assert_int_equal(error->code, TH_CONFIG_ERROR_IO);
    g_autofree char *expected_big = g_strdup_printf(
        "%s: larger than 16777216 bytes (16 MiB), the most a config file may take (is this "
        "the config file?)",
        big_path);
    assert_string_equal(error->message, expected_big);
    g_clear_error(&error);

    /* An endless stream: the first NUL ends the read. */
    if (g_file_test("/dev/zero", G_FILE_TEST_EXISTS)) {
        assert_null(th_config_load("/dev/zero", NULL, &error));
        assert_string_equal(error->message, "/dev/zero:1:1: a NUL byte: a config file is TOML "
                                            "text (is this a binary file?)");
        g_clear_error(&error);
    }
}

/* ---- Paths ----------------------------------------------------------------- */

static void test_relative_paths_resolve_against_config_dir(void **state)
{
    (void)state;
    g_autofree char *path = write_config_at("configs/run.toml",
                                            "[tensor]\npath = \"../data/t.tns.gz\"\n"
                                            "[backend]\nplugin = \"../plugins/mine.so\"\n"
                                            "search_path = [\"p1\", \"/abs/p2\", \"./a/../p3\"]\n"
                                            "[output]\ndir = \"../out/x\"\n");
    GError *error = NULL;
    g_autoptr(th_config) config = th_config_load(path, NULL, &error);
    assert_non_null(config);
    g_autofree char *tensor = in_temp("data/t.tns.gz");
    g_autofree char *plugin = in_temp("plugins/mine.so");
    g_autofree char *p1 = in_temp("configs/p1");
    g_autofree char *p3 = in_temp("configs/p3");
    g_autofree char *output = in_temp("out/x");
    assert_string_equal(config->tensor_path, tensor);
    assert_string_equal(config->plugin, plugin);
    assert_int_equal(config->search_path->len, 3);
    assert_string_equal(g_ptr_array_index(config->search_path, 0), p1);
    assert_string_equal(g_ptr_array_index(config->search_path, 1), "/abs/p2");
    assert_string_equal(g_ptr_array_index(config->search_path, 2), p3);
    assert_string_equal(config->output_dir, output);
}

static void test_relative_config_path_resolves_from_current_dir(void **state)
{
    (void)state;
    g_free(write_config_at("configs/rel.toml", "tensor.path = \"../t.tns\"\n"));
    g_autofree char *saved_dir = g_get_current_dir();
    assert_int_equal(chdir(temp_dir), 0);
    GError *error = NULL;
    th_config *config = th_config_load("configs/rel.toml", NULL, &error);
    assert_int_equal(chdir(saved_dir), 0);
    assert_non_null(config);
    g_autofree char *tensor = in_temp("t.tns");
    assert_string_equal(config->tensor_path, tensor);
    assert_string_equal(config->source_path, "configs/rel.toml");
    th_config_free(config);
}

static void test_absolute_paths_are_kept(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load_ok("tensor.path = \"/data/../data/t.tns\"\n"
                                          "backend.plugin = \"/opt/p/x.so\"\n"
                                          "output.dir = \"/tmp/out\"\n",
                                          NULL);
    assert_string_equal(config->tensor_path, "/data/../data/t.tns");
    assert_string_equal(config->plugin, "/opt/p/x.so");
    assert_string_equal(config->output_dir, "/tmp/out");
}

static void test_plugin_names_are_not_paths(void **state)
{
    (void)state;
    g_autoptr(th_config) named = load_ok("tensor.path = \"t\"\nbackend.plugin = \"cpu-reference\"\n",
                                         NULL);
    assert_string_equal(named->plugin, "cpu-reference");
    g_autoptr(th_config) so = load_ok("tensor.path = \"t\"\nbackend.plugin = \"mine.so\"\n", NULL);
    g_autofree char *resolved = in_temp("mine.so");
    assert_string_equal(so->plugin, resolved);
}

/* ---- Backend options ------------------------------------------------------- */

static void test_backend_options_rendering(void **state)
{
    (void)state;
    g_autoptr(th_config) config = load_ok("tensor.path = \"t\"\n"
                                          "[backend.options]\n"
                                          "threads = 2\n"
                                          "negative = -17\n"
                                          "ratio = 0.1\n"
                                          "huge = 1e300\n"
                                          "third = 0.3333333333333333\n"
                                          "whole = 2.0\n"
                                          "on = true\n"
                                          "off = false\n"
                                          "name = \"fast path\"\n"
                                          "empty = \"\"\n",
                                          NULL);
    assert_int_equal(config->plugin_options->len, 10);
    const th_config_option *first = g_ptr_array_index(config->plugin_options, 0);
    const th_config_option *last = g_ptr_array_index(config->plugin_options, 9);
    assert_string_equal(first->key, "threads"); /* file order, not sorted */
    assert_string_equal(last->key, "empty");
    assert_string_equal(option_value(config, "threads"), "2");
    assert_string_equal(option_value(config, "negative"), "-17");
    assert_string_equal(option_value(config, "ratio"), "0.1");
    assert_string_equal(option_value(config, "huge"), "1e+300");
    assert_string_equal(option_value(config, "third"), "0.3333333333333333");
    assert_string_equal(option_value(config, "whole"), "2");
    assert_string_equal(option_value(config, "on"), "true");
    assert_string_equal(option_value(config, "off"), "false");
    assert_string_equal(option_value(config, "name"), "fast path");
    assert_string_equal(option_value(config, "empty"), "");
}

static void test_backend_options_reject_arrays_and_tables(void **state)
{
    (void)state;
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[backend.options]\nthreads = 2\ndevices = [0, 1]\n",
                      NULL, TH_CONFIG_ERROR_TYPE,
                      "FILE:4:11: key 'backend.options.devices': expected a string, integer, "
                      "float or boolean, found an array");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[backend.options.gpu.x]\nid = 0\n", NULL,
                      TH_CONFIG_ERROR_TYPE,
                      "FILE:2:1: [backend.options.gpu.x]: options of one plugin are plain keys; "
                      "tables do not nest further");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[backend.options.gpu]\nlist = [1]\n", NULL,
                      TH_CONFIG_ERROR_TYPE,
                      "FILE:3:8: key 'backend.options.gpu.list': expected a string, integer, "
                      "float or boolean, found an array");
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[backend.options]\nwhen = 2024-01-02\n", NULL,
                      TH_CONFIG_ERROR_TYPE,
                      "FILE:3:8: key 'backend.options.when': expected a string, integer, "
                      "float or boolean, found the date 2024-01-02");
}

/* [backend.options.NAME] tables: options for one plugin alone, merged over
 * the common ones for that plugin only; --set reaches them too. */
static void test_backend_options_per_plugin(void **state)
{
    (void)state;
    const char *overrides[] = {"backend.options.cpu-reference.threads=3",
                               "backend.options.gpu-adaptive.kappa=64", NULL};
    g_autoptr(th_config) config = load_ok("tensor.path = \"t\"\n"
                                          "[backend.options]\n"
                                          "verbose = true\n"
                                          "threads = 1\n"
                                          "[backend.options.cpu-reference]\n"
                                          "threads = 2\n",
                                          overrides);
    assert_int_equal(config->plugin_options->len, 2);
    assert_int_equal(config->plugin_option_tables->len, 2);
    const th_config_plugin_options *cpu = g_ptr_array_index(config->plugin_option_tables, 0);
    assert_string_equal(cpu->plugin, "cpu-reference");
    assert_true(g_str_has_suffix(cpu->where, ":5:1"));

    g_autoptr(GPtrArray) for_cpu = th_config_options_for_plugin(
        config->plugin_options, config->plugin_option_tables, "cpu-reference");
    assert_int_equal(for_cpu->len, 2);
    const th_config_option *first = g_ptr_array_index(for_cpu, 0);
    const th_config_option *second = g_ptr_array_index(for_cpu, 1);
    assert_string_equal(first->key, "verbose");
    assert_string_equal(second->key, "threads");
    assert_string_equal(second->value, "3"); /* the table's, then --set's, not the common 1 */

    g_autoptr(GPtrArray) for_gpu = th_config_options_for_plugin(
        config->plugin_options, config->plugin_option_tables, "gpu-adaptive");
    assert_int_equal(for_gpu->len, 3);
    assert_string_equal(((th_config_option *)g_ptr_array_index(for_gpu, 1))->value, "1");
    assert_string_equal(((th_config_option *)g_ptr_array_index(for_gpu, 2))->key, "kappa");

    g_autoptr(GPtrArray) for_other = th_config_options_for_plugin(
        config->plugin_options, config->plugin_option_tables, "my-plugin");
    assert_int_equal(for_other->len, 2);
    g_autoptr(GPtrArray) none = th_config_options_for_plugin(NULL, NULL, "x");
    assert_int_equal(none->len, 0);

    ASSERT_LOAD_ERROR("tensor.path = \"t\"\n[backend.options.\"a/b\"]\nx = 1\n", NULL,
                      TH_CONFIG_ERROR_TYPE,
                      "FILE:2:1: [backend.options.a/b]: expected a plugin name (such as "
                      "\"cpu-reference\") after 'backend.options.'");
}

/* Every key set by the file or by --set remembers where, for messages about
 * its value that come long after loading (a tensor that cannot be read). */
static void test_where_keys_were_set(void **state)
{
    (void)state;
    const char *overrides[] = {"cpd.rank=8", NULL};
    g_autoptr(th_config) config = load_ok("# comment\n"
                                          "[tensor]\n"
                                          "path = \"t.tns\"\n"
                                          "[backend.options]\n"
                                          "  threads = 2\n",
                                          overrides);
    assert_true(g_str_has_suffix(th_config_where(config, "tensor.path"), "config.toml:3:1"));
    assert_true(g_str_has_suffix(th_config_where(config, "backend.options.threads"),
                                 "config.toml:5:3"));
    assert_string_equal(th_config_where(config, "cpd.rank"), "--set cpd.rank=8");
    /* A default names the file that left it out. */
    assert_string_equal(th_config_where(config, "output.dir"), config->source_path);
}

/* ---- --set overrides ------------------------------------------------------- */

static void test_set_overrides_values(void **state)
{
    (void)state;
    const char *overrides[] = {"cpd.rank=32",
                               "cpd.tolerance=1e-3",
                               "cpd.max_iters = 7",
                               "backend.plugin=cpu-reference",
                               "output.write_factors=false",
                               "backend.options.threads=8",
                               "backend.options.new=\"quoted value\"",
                               "backend.options.bare=word",
                               NULL};
    g_autoptr(th_config) config = load_ok("tensor.path = \"t\"\n[cpd]\nrank = 3\n"
                                          "[backend.options]\nthreads = 2\nkeep = 1\n",
                                          overrides);
    assert_int_equal(config->rank, 32);
    assert_true(config->tolerance == 1e-3);
    assert_int_equal(config->max_iters, 7);
    assert_string_equal(config->plugin, "cpu-reference");
    assert_false(config->write_factors);
    /* A replaced option keeps its place; new ones come after the file's. */
    assert_int_equal(config->plugin_options->len, 4);
    const char *order[] = {"threads", "keep", "new", "bare"};
    for (guint i = 0; i < 4; i++) {
        const th_config_option *option = g_ptr_array_index(config->plugin_options, i);
        assert_string_equal(option->key, order[i]);
    }
    assert_string_equal(option_value(config, "threads"), "8");
    assert_string_equal(option_value(config, "keep"), "1");
    assert_string_equal(option_value(config, "new"), "quoted value");
    assert_string_equal(option_value(config, "bare"), "word");
}

static void test_set_later_override_wins(void **state)
{
    (void)state;
    const char *overrides[] = {"cpd.rank=5", "cpd.rank=6", NULL};
    g_autoptr(th_config) config = load_ok("tensor.path = \"t\"\n", overrides);
    assert_int_equal(config->rank, 6);
}

static void test_set_supplies_missing_required_key(void **state)
{
    (void)state;
    const char *overrides[] = {"tensor.path=/data/t.tns", NULL};
    g_autoptr(th_config) config = load_ok("", overrides);
    assert_string_equal(config->tensor_path, "/data/t.tns");
}

static void test_set_paths_resolve_against_current_dir(void **state)
{
    (void)state;
    const char *overrides[] = {"tensor.path=data/2024.tns", "output.dir=out",
                               "backend.search_path=plugins", NULL};
    g_autoptr(th_config) config = load_ok("tensor.path = \"t\"\n", overrides);
    g_autofree char *cwd = g_get_current_dir();
    g_autofree char *tensor = g_build_filename(cwd, "data/2024.tns", NULL);
    g_autofree char *output = g_build_filename(cwd, "out", NULL);
    g_autofree char *plugins = g_build_filename(cwd, "plugins", NULL);
    assert_string_equal(config->tensor_path, tensor);
    assert_string_equal(config->output_dir, output);
    assert_int_equal(config->search_path->len, 1);
    assert_string_equal(g_ptr_array_index(config->search_path, 0), plugins);
}

static void test_set_string_key_takes_text_as_written(void **state)
{
    (void)state;
    /* 2024 and true would be TOML values; for a string key they are text. */
    const char *overrides[] = {"tensor.path=/2024", "backend.plugin=true", NULL};
    g_autoptr(th_config) config = load_ok("tensor.path = \"t\"\n", overrides);
    assert_string_equal(config->tensor_path, "/2024");
    assert_string_equal(config->plugin, "true");
}

static void test_set_value_errors(void **state)
{
    (void)state;
    const char *text = "tensor.path = \"t\"\n";
    ASSERT_LOAD_ERROR(text, ((const char *[]){"cpd.rank=abc", NULL}), TH_CONFIG_ERROR_TYPE,
                      "--set cpd.rank=abc: key 'cpd.rank': expected an integer from 1 to 4096, "
                      "found the string \"abc\"");
    ASSERT_LOAD_ERROR(text, ((const char *[]){"cpd.rank=5000", NULL}), TH_CONFIG_ERROR_RANGE,
                      "--set cpd.rank=5000: key 'cpd.rank': expected an integer from 1 to 4096, "
                      "found the integer 5000");
    ASSERT_LOAD_ERROR(text, ((const char *[]){"output.write_factors=no", NULL}),
                      TH_CONFIG_ERROR_TYPE,
                      "--set output.write_factors=no: key 'output.write_factors': expected a "
                      "boolean (true or false), found the string \"no\"");
    /* The value cannot smuggle in a second key; messages stay on one line. */
    ASSERT_LOAD_ERROR(text, ((const char *[]){"cpd.rank=1\ncpd.seed = 3", NULL}),
                      TH_CONFIG_ERROR_TYPE,
                      "--set cpd.rank=1\\ncpd.seed = 3: key 'cpd.rank': expected an integer from "
                      "1 to 4096, found the string \"1\\ncpd.seed = 3\"");
    ASSERT_LOAD_ERROR(text, ((const char *[]){"backend.options.list=[1, 2]", NULL}),
                      TH_CONFIG_ERROR_TYPE,
                      "--set backend.options.list=[1, 2]: key 'backend.options.list': expected "
                      "a string, integer, float or boolean, found an array");
}

static void test_set_unknown_keys(void **state)
{
    (void)state;
    const char *text = "tensor.path = \"t\"\n";
    ASSERT_LOAD_ERROR(text, ((const char *[]){"cpd.rnak=3", NULL}), TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "--set cpd.rnak=3: unknown key 'cpd.rnak' (did you mean 'cpd.rank'?)");
    ASSERT_LOAD_ERROR(text, ((const char *[]){"cdp.rank=3", NULL}), TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "--set cdp.rank=3: unknown section 'cdp' (did you mean 'cpd'?)");
    ASSERT_LOAD_ERROR(text, ((const char *[]){"rank=3", NULL}), TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "--set rank=3: unknown key 'rank' (did you mean 'cpd.rank'?)");
    ASSERT_LOAD_ERROR(text, ((const char *[]){"cpd.rank.x=3", NULL}), TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "--set cpd.rank.x=3: unknown key 'cpd.rank.x' ('cpd.rank' is not a "
                      "section)");
    ASSERT_LOAD_ERROR(text, ((const char *[]){"backend.options.a.b.c=1", NULL}),
                      TH_CONFIG_ERROR_UNKNOWN_KEY,
                      "--set backend.options.a.b.c=1: unknown key 'backend.options.a.b.c' "
                      "(options are 'backend.options.KEY' or 'backend.options.PLUGIN.KEY')");
    ASSERT_LOAD_ERROR(text, ((const char *[]){"cpd=3", NULL}), TH_CONFIG_ERROR_OVERRIDE,
                      "--set cpd=3: 'cpd' is a section; set one of its keys, such as "
                      "'cpd.rank'");
}

static void test_set_malformed(void **state)
{
    (void)state;
    const char *text = "tensor.path = \"t\"\n";
    ASSERT_LOAD_ERROR(text, ((const char *[]){"foo", NULL}), TH_CONFIG_ERROR_OVERRIDE,
                      "--set foo: expected KEY=VALUE");
    ASSERT_LOAD_ERROR(text, ((const char *[]){"=5", NULL}), TH_CONFIG_ERROR_OVERRIDE,
                      "--set =5: expected KEY=VALUE");
    ASSERT_LOAD_ERROR(text, ((const char *[]){"cpd..rank=5", NULL}), TH_CONFIG_ERROR_OVERRIDE,
                      "--set cpd..rank=5: expected KEY=VALUE");
    ASSERT_LOAD_ERROR(text, ((const char *[]){"cpd. rank=5", NULL}), TH_CONFIG_ERROR_OVERRIDE,
                      "--set cpd. rank=5: expected KEY=VALUE");
}

static void test_set_does_not_hide_file_errors(void **state)
{
    (void)state;
    /* An override does not hide a broken file: `backend = 5` is still reported. */
    ASSERT_LOAD_ERROR("tensor.path = \"t\"\nbackend = 5\n",
                      ((const char *[]){"backend.plugin=x", NULL}), TH_CONFIG_ERROR_TYPE,
                      "FILE:2:11: key 'backend': expected a table, found the integer 5");
    /* But it does replace a bad value of the key it sets. */
    const char *overrides[] = {"cpd.rank=8", NULL};
    g_autoptr(th_config) config = load_ok("tensor.path = \"t\"\ncpd.rank = \"x\"\n", overrides);
    assert_int_equal(config->rank, 8);
}

/* ---- Loading from memory --------------------------------------------------- */

static void test_load_from_string(void **state)
{
    (void)state;
    GError *error = NULL;
    g_autoptr(th_config) config = th_config_load_from_string(
        "/etc/th/run.toml", "tensor.path = \"t.tns\"\ncpd.rank = 3\n", -1, NULL, &error);
    assert_non_null(config);
    assert_string_equal(config->tensor_path, "/etc/th/t.tns");
    assert_int_equal(config->rank, 3);

    /* With an explicit length the text may hold a NUL, which TOML forbids. */
    static const char with_nul[] = "tensor.path = \"t\"\n\0x = 1\n";
    assert_null(th_config_load_from_string("mem.toml", with_nul, sizeof with_nul - 1, NULL,
                                           &error));
    assert_int_equal(error->code, TH_CONFIG_ERROR_SYNTAX);
    assert_true(g_str_has_prefix(error->message, "mem.toml:2:1: TOML syntax error: "));
    g_clear_error(&error);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_foreach_lists_every_key_in_schema_order),
        cmocka_unit_test(test_foreach_keeps_toml_types),
        cmocka_unit_test(test_all_keys_set),
        cmocka_unit_test(test_tolerance_accepts_an_integer),
        cmocka_unit_test(test_cpd_update),
        cmocka_unit_test(test_cpd_constraints),
        cmocka_unit_test(test_cpd_l1_and_l2),
        cmocka_unit_test(test_cpd_hals_keys),
        cmocka_unit_test(test_type_errors),
        cmocka_unit_test(test_string_errors),
        cmocka_unit_test(test_range_errors),
        cmocka_unit_test(test_unknown_key_suggests_nearest),
        cmocka_unit_test(test_unknown_key_in_wrong_section_suggests_its_home),
        cmocka_unit_test(test_unknown_key_without_suggestion_lists_valid_keys),
        cmocka_unit_test(test_unknown_section),
        cmocka_unit_test(test_missing_tensor_path),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_file_not_found),
        cmocka_unit_test(test_file_not_text_or_too_large),
        cmocka_unit_test(test_relative_paths_resolve_against_config_dir),
        cmocka_unit_test(test_relative_config_path_resolves_from_current_dir),
        cmocka_unit_test(test_absolute_paths_are_kept),
        cmocka_unit_test(test_plugin_names_are_not_paths),
        cmocka_unit_test(test_backend_options_rendering),
        cmocka_unit_test(test_backend_options_reject_arrays_and_tables),
        cmocka_unit_test(test_backend_options_per_plugin),
        cmocka_unit_test(test_where_keys_were_set),
        cmocka_unit_test(test_set_overrides_values),
        cmocka_unit_test(test_set_later_override_wins),
        cmocka_unit_test(test_set_supplies_missing_required_key),
        cmocka_unit_test(test_set_paths_resolve_against_current_dir),
        cmocka_unit_test(test_set_string_key_takes_text_as_written),
        cmocka_unit_test(test_set_value_errors),
        cmocka_unit_test(test_set_unknown_keys),
        cmocka_unit_test(test_set_malformed),
        cmocka_unit_test(test_set_does_not_hide_file_errors),
        cmocka_unit_test(test_load_from_string),
    };
    return cmocka_run_group_tests(tests, make_temp_dir, remove_temp_dir);
}
