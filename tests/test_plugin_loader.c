/* The plugin loader against real .so fixtures, good and deliberately broken:
 * for each, the exact error code and message the host gives (plugin.h,
 * steps 1-6), plus name resolution along the search path. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <setjmp.h>
#include <sys/wait.h>
#include <cmocka.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "plugin/backend.h"
#include "config/config.h"
#include "base/log.h"
#include "plugin/plugin_loader.h"

#define FIXTURE(name) TH_FIXTURE_PLUGIN_DIR "/fixture_" name ".so"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

/* Host services that record every log line, to see init()/deinit() run. */
typedef struct log_capture {
    GPtrArray *lines;
} log_capture;

static void capture_log(void *host_data, int32_t level, const char *message)
{
    (void)level;
    log_capture *capture = host_data;
    g_ptr_array_add(capture->lines, g_strdup(message));
}

static int32_t never_cancelled(void *host_data)
{
    (void)host_data;
    return 0;
}

static th_host_services capture_services(log_capture *capture)
{
    capture->lines = g_ptr_array_new_with_free_func(g_free);
    th_host_services services = {
        .struct_size = (uint32_t)sizeof(th_host_services),
        .host_data = capture,
        .log = capture_log,
        .is_cancelled = never_cancelled,
    };
    return services;
}

static guint times_captured(const log_capture *capture, const char *line)
{
    guint times = 0;
    for (guint i = 0; i < capture->lines->len; i++)
        times += strcmp(g_ptr_array_index(capture->lines, i), line) == 0;
    return times;
}

static gboolean captured(const log_capture *capture, const char *line)
{
    return times_captured(capture, line) > 0;
}

static char *canonical(const char *path)
{
    return g_canonicalize_filename(path, NULL);
}

/* Loads `path`, expecting failure with `code`; returns the message. */
static char *expect_load_error(const char *path, th_plugin_error code)
{
    th_host_services services = th_host_services_make();
    GError *error = NULL;
    th_plugin *plugin = th_plugin_load(path, &services, &error);
    if (plugin != NULL) {
        th_plugin_unload(plugin);
        fail_msg("%s loaded, but an error was expected", path);
    }
    assert_non_null(error);
    if (!g_error_matches(error, TH_PLUGIN_ERROR, (gint)code))
        fail_msg("%s: expected error code %d, got %d: %s", path, code, error->code,
                 error->message);
    char *message = g_strdup(error->message);
    g_error_free(error);
    return message;
}

static th_plugin *load_ok(const char *path)
{
    th_host_services services = th_host_services_make();
    g_autoptr(GError) error = NULL;
    th_plugin *plugin = th_plugin_load(path, &services, &error);
    if (plugin == NULL)
        fail_msg("%s: %s", path, error->message);
    return plugin;
}

/* load_ok() with the process's stderr, where the host logs its warnings,
 * caught in *printed. */
static th_plugin *load_ok_catching_stderr(const char *path, char **printed)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *name = NULL;
    int fd = g_file_open_tmp("th-loader-stderr-XXXXXX", &name, &error);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0 && dup2(fd, STDERR_FILENO) >= 0);
    th_plugin *plugin = load_ok(path);
    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    close(fd);
    assert_true(g_file_get_contents(name, printed, NULL, &error));
    assert_int_equal(g_remove(name), 0);
    return plugin;
}

/* A 3 x 2 x 2 tensor with three nonzeros and rank-2 factors whose MTTKRP is
 * easy to check by hand. */
static const uint32_t tiny_dims[3] = {3, 2, 2};
static const uint32_t tiny_i0[3] = {0, 2, 2};
static const uint32_t tiny_i1[3] = {1, 0, 1};
static const uint32_t tiny_i2[3] = {0, 1, 1};
static const double tiny_values[3] = {2.0, -1.0, 0.5};
static const double tiny_a1[4] = {1, 2, 3, 4};  /* 2 x 2 */
static const double tiny_a2[4] = {5, 6, 7, 8};  /* 2 x 2 */
static const double tiny_a0[6] = {0, 0, 0, 0, 0, 0};

/* M0(i, r) = sum over nonzeros with i0 = i of v * A1(i1, r) * A2(i2, r):
 *   row 0: 2.0 * A1(1,:) * A2(0,:) = 2 * (3,4) * (5,6) = (30, 48)
 *   row 1: none                                          = (0, 0)
 *   row 2: -1 * (1,2) * (7,8) + 0.5 * (3,4) * (7,8)      = (3.5, 0) */
static const double tiny_m0[6] = {30, 48, 0, 0, 3.5, 0};

static void run_tiny_mttkrp(const th_plugin *plugin)
{
    const uint32_t *indices[3] = {tiny_i0, tiny_i1, tiny_i2};
    th_coo_tensor t = {
        .struct_size = (uint32_t)sizeof t,
        .nmodes = 3,
        .nnz = 3,
        .dims = tiny_dims,
        .indices = indices,
        .values = tiny_values,
        .norm_squared = 4.0 + 1.0 + 0.25,
    };
    char err[TH_ERROR_SIZE] = "";
    th_instance *inst = NULL;
    assert_int_equal(plugin->entry.create(NULL, 0, &plugin->services, &inst, err), TH_OK);
    assert_int_equal(plugin->entry.load_tensor(inst, &t, 2, err), TH_OK);
    assert_int_equal(plugin->entry.set_factor(inst, 0, tiny_a0, err), TH_OK);
    assert_int_equal(plugin->entry.set_factor(inst, 1, tiny_a1, err), TH_OK);
    assert_int_equal(plugin->entry.set_factor(inst, 2, tiny_a2, err), TH_OK);
    assert_int_equal(plugin->entry.mttkrp(inst, 0, err), TH_OK);
    double m0[6];
    assert_int_equal(plugin->entry.get_mttkrp_result(inst, 0, m0, err), TH_OK);
    for (int i = 0; i < 6; i++)
        assert_true(m0[i] == tiny_m0[i]);
    plugin->entry.destroy(inst);
}

/* ------------------------------------------------------------------------ */
/* Fixtures, one by one                                                      */
/* ------------------------------------------------------------------------ */

static void test_good_loads_and_runs(void **state)
{
    (void)state;
    th_plugin *plugin = load_ok(FIXTURE("good"));
    g_autofree char *expected_path = canonical(FIXTURE("good"));
    assert_string_equal(plugin->path, expected_path);
    assert_string_equal(plugin->info->id, "fixture_good");
    assert_int_equal(plugin->plugin_entry_size, sizeof(th_plugin_entry));
    assert_null(plugin->entry.als_update);
    run_tiny_mttkrp(plugin);

    /* Optional queries the plugin lacks fall back to empty values. */
    g_autoptr(GError) error = NULL;
    th_runtime_info info;
    memset(&info, 0x55, sizeof info);
    assert_true(th_instance_runtime_info(plugin, NULL, &info, &error));
    assert_string_equal(info.device, "");
    assert_int_equal(info.tensor_bytes, 0);
    th_mode_info mode;
    memset(&mode, 0x55, sizeof mode);
    assert_true(th_instance_mode_info(plugin, NULL, 0, &mode, &error));
    assert_string_equal(mode.scheme, "");
    assert_int_equal(mode.partitions, 0);
    assert_true(mode.last_mttkrp_seconds < 0);
    th_plugin_unload(plugin);
}

static void test_wrong_major_names_both_versions(void **state)
{
    (void)state;
    g_autofree char *message = expect_load_error(FIXTURE("wrong_major"), TH_PLUGIN_ERROR_ABI_MAJOR);
    g_autofree char *path = canonical(FIXTURE("wrong_major"));
    g_autofree char *expected = g_strdup_printf(
        "%s: plugin ABI major version 2.0 is not supported by this host (ABI %u.%u)", path,
        TH_ABI_VERSION_MAJOR, TH_ABI_VERSION_MINOR);
    assert_string_equal(message, expected);
}

static void test_newer_minor_is_accepted_and_tail_ignored(void **state)
{
    (void)state;
    th_plugin *plugin = load_ok(FIXTURE("newer_minor"));
    assert_string_equal(plugin->info->id, "fixture_newer_minor");
    /* The plugin's struct is two function pointers longer than the host's. */
    assert_int_equal(plugin->plugin_entry_size, sizeof(th_plugin_entry) + 2 * sizeof(void *));
    assert_int_equal(plugin->entry.struct_size, plugin->plugin_entry_size);
    assert_int_equal(plugin->entry.abi_version.minor, 99);
    run_tiny_mttkrp(plugin);
    th_plugin_unload(plugin);
}

static void test_short_struct_names_sizes(void **state)
{
    (void)state;
    g_autofree char *message =
        expect_load_error(FIXTURE("short_struct"), TH_PLUGIN_ERROR_STRUCT_SIZE);
    g_autofree char *path = canonical(FIXTURE("short_struct"));
    g_autofree char *expected = g_strdup_printf(
        "%s: entry struct is 24 bytes, shorter than the %zu bytes of ABI 1.0 (plugin says "
        "ABI %u.%u)", /* the fixture declares the header's own version */
        path, (size_t)TH_PLUGIN_ENTRY_V1_0_SIZE, TH_ABI_VERSION_MAJOR, TH_ABI_VERSION_MINOR);
    assert_string_equal(message, expected);
    assert_int_equal(TH_PLUGIN_ENTRY_V1_0_SIZE, 112);
}

static void test_no_symbol_keeps_dlerror(void **state)
{
    (void)state;
    g_autofree char *message = expect_load_error(FIXTURE("no_symbol"), TH_PLUGIN_ERROR_NO_ENTRY);
    g_autofree char *path = canonical(FIXTURE("no_symbol"));
    g_autofree char *prefix = g_strdup_printf("%s: no symbol 'tensorhost_plugin_entry': ", path);
    assert_true(g_str_has_prefix(message, prefix));
    /* glibc's dlerror() text, kept verbatim after the prefix. */
    assert_non_null(strstr(message + strlen(prefix), "undefined symbol: tensorhost_plugin_entry"));
}

static void test_null_function_is_named(void **state)
{
    (void)state;
    g_autofree char *message =
        expect_load_error(FIXTURE("null_function"), TH_PLUGIN_ERROR_NULL_FUNCTION);
    g_autofree char *path = canonical(FIXTURE("null_function"));
    g_autofree char *expected = g_strdup_printf("%s: required function 'mttkrp' is NULL", path);
    assert_string_equal(message, expected);
}

static void expect_call_error(const th_plugin *plugin, const char *function, th_status status,
                              const char *err)
{
    assert_int_equal(status, TH_ERR_DEVICE);
    g_autofree char *plugin_text =
        g_strdup_printf("fixture_failing: simulated device failure in %s", function);
    assert_string_equal(err, plugin_text);
    g_autoptr(GError) error = NULL;
    th_plugin_set_call_error(&error, plugin, function, status, err);
    g_autofree char *expected =
        g_strdup_printf("fixture_failing: %s: %s (TH_ERR_DEVICE)", function, plugin_text);
    assert_true(g_error_matches(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_DEVICE));
    assert_string_equal(error->message, expected);
}

static void test_failing_calls_report_plugin_text(void **state)
{
    (void)state;
    log_capture capture;
    th_host_services services = capture_services(&capture);
    g_autoptr(GError) error = NULL;
    th_plugin *plugin = th_plugin_load(FIXTURE("failing"), &services, &error);
    assert_non_null(plugin);
    assert_true(captured(&capture, "fixture_failing: init"));
    assert_non_null(plugin->entry.als_update);

    const th_plugin_entry *e = &plugin->entry;
    th_instance *inst = NULL;
    char err[TH_ERROR_SIZE] = "";
    assert_int_equal(e->create(NULL, 0, &plugin->services, &inst, err), TH_OK);

    const uint32_t dims[2] = {1, 1}, index[1] = {0};
    const uint32_t *indices[2] = {index, index};
    const double value = 1.0;
    th_coo_tensor t = {.struct_size = sizeof t, .nmodes = 2, .nnz = 1, .dims = dims,
                       .indices = indices, .values = &value, .norm_squared = 1.0};
    double data[1] = {0}, lambda[1], gram[1], inner[1];
    th_als_output out = {.struct_size = sizeof out, .lambda = lambda, .gram = gram,
                         .inner = inner};
    expect_call_error(plugin, "load_tensor", e->load_tensor(inst, &t, 1, err), err);
    expect_call_error(plugin, "set_factor", e->set_factor(inst, 0, data, err), err);
    expect_call_error(plugin, "get_factor", e->get_factor(inst, 0, data, err), err);
    expect_call_error(plugin, "mttkrp", e->mttkrp(inst, 0, err), err);
    expect_call_error(plugin, "get_mttkrp_result", e->get_mttkrp_result(inst, 0, data, err), err);
    expect_call_error(plugin, "als_update", e->als_update(inst, 0, data, TH_NORM_2, &out, err),
                      err);

    /* The host's wrappers of the optional queries turn failures into GErrors. */
    th_runtime_info info;
    assert_false(th_instance_runtime_info(plugin, inst, &info, &error));
    assert_string_equal(error->message,
                        "fixture_failing: get_runtime_info: fixture_failing: simulated device "
                        "failure in get_runtime_info (TH_ERR_DEVICE)");
    g_clear_error(&error);
    th_mode_info mode;
    assert_false(th_instance_mode_info(plugin, inst, 1, &mode, &error));
    assert_string_equal(error->message,
                        "fixture_failing: get_mode_info(mode 1): fixture_failing: simulated "
                        "device failure in get_mode_info (TH_ERR_DEVICE)");

    e->destroy(inst);
    th_plugin_unload(plugin);
    assert_true(captured(&capture, "fixture_failing: deinit"));
    g_ptr_array_unref(capture.lines);
}

/* A plugin loaded twice is one: init() once, the same th_plugin, and
 * deinit() only when the last loader unloads it (plugin.h: init once after
 * loading, deinit once after every instance is destroyed). */
static void test_loading_twice_shares_the_plugin(void **state)
{
    (void)state;
    log_capture capture;
    th_host_services services = capture_services(&capture);
    g_autoptr(GError) error = NULL;
    th_plugin *first = th_plugin_load(FIXTURE("failing"), &services, &error);
    th_plugin *second = th_plugin_load(FIXTURE("failing"), &services, &error);
    assert_non_null(first);
    assert_ptr_equal(first, second);
    assert_int_equal(times_captured(&capture, "fixture_failing: init"), 1);
    th_plugin_unload(first);
    assert_false(captured(&capture, "fixture_failing: deinit"));
    th_plugin_unload(second);
    assert_true(captured(&capture, "fixture_failing: deinit"));
    /* Loaded again after: a new init(). */
    th_plugin *again = th_plugin_load(FIXTURE("failing"), &services, &error);
    assert_non_null(again);
    assert_int_equal(times_captured(&capture, "fixture_failing: init"), 2);
    th_plugin_unload(again);
    g_ptr_array_unref(capture.lines);
}

static void test_init_failure(void **state)
{
    (void)state;
    g_setenv("TH_FIXTURE_FAIL_INIT", "1", TRUE);
    g_autofree char *message = expect_load_error(FIXTURE("failing"), TH_PLUGIN_ERROR_INIT);
    g_unsetenv("TH_FIXTURE_FAIL_INIT");
    g_autofree char *path = canonical(FIXTURE("failing"));
    g_autofree char *expected = g_strdup_printf(
        "%s: init failed: fixture_failing: init failed because TH_FIXTURE_FAIL_INIT is set "
        "(TH_ERR_NO_DEVICE)",
        path);
    assert_string_equal(message, expected);
}

/* get_info() runs after init(), so a bad description must still be followed
 * by deinit() before the object is closed. */
static void expect_bad_info(const char *variant, const char *what)
{
    g_setenv("TH_FIXTURE_FAILING_INFO", variant, TRUE);
    log_capture capture;
    th_host_services services = capture_services(&capture);
    GError *error = NULL;
    th_plugin *plugin = th_plugin_load(FIXTURE("failing"), &services, &error);
    g_unsetenv("TH_FIXTURE_FAILING_INFO");
    assert_null(plugin);
    assert_true(g_error_matches(error, TH_PLUGIN_ERROR, TH_PLUGIN_ERROR_BAD_INFO));
    g_autofree char *path = canonical(FIXTURE("failing"));
    g_autofree char *expected = g_strdup_printf("%s: %s", path, what);
    assert_string_equal(error->message, expected);
    assert_true(captured(&capture, "fixture_failing: init"));
    assert_true(captured(&capture, "fixture_failing: deinit"));
    g_error_free(error);
    g_ptr_array_unref(capture.lines);
}

static void test_bad_info(void **state)
{
    (void)state;
    expect_bad_info("null", "get_info() returned NULL");
    expect_bad_info("empty-id", "get_info() returned an empty id");
    expect_bad_info("max-modes", "plugin 'fixture_failing' declares max_modes 2 and max_rank "
                                 "256; expected max_modes >= 3 and max_rank >= 1");
}

/* ------------------------------------------------------------------------ */
/* Capabilities: the function pointer decides (ABI 1.2)                     */
/* ------------------------------------------------------------------------ */

/* The warning a flag that disagrees with its function gets: the plugin
 * loads, and hosts before 1.2 (which refuse it) are named. */
static void expect_flag_warning(const char *printed, const char *path, const char *id,
                                const char *flag_and_function, const char *action)
{
    g_autofree char *expected = g_strdup_printf(
        "tensorhost: warning: %s: plugin '%s' (ABI %u.%u) %s; this host (ABI %u.%u) goes by "
        "the function and %s it, and hosts before ABI 1.2 refuse the plugin\n",
        path, id, TH_ABI_VERSION_MAJOR, TH_ABI_VERSION_MINOR, flag_and_function,
        TH_ABI_VERSION_MAJOR, TH_ABI_VERSION_MINOR, action);
    assert_string_equal(printed, expected);
}

static void test_capability_comes_from_the_function(void **state)
{
    (void)state;
    g_autofree char *printed = NULL;

    /* Flag without function: no sweep, whatever the flag says. */
    th_plugin *plugin = load_ok_catching_stderr(FIXTURE("sweep_flag_only"), &printed);
    g_autofree char *flag_only = canonical(FIXTURE("sweep_flag_only"));
    expect_flag_warning(printed, flag_only, "fixture_sweep_flag_only",
                        "sets the TH_CAP_ALS_SWEEP flag but its als_sweep function is NULL",
                        "never calls");
    assert_true(plugin->info->flags & TH_CAP_ALS_SWEEP);
    assert_null(plugin->entry.als_sweep);
    g_autoptr(GError) error = NULL;
    th_als_sweep_io io = {.struct_size = sizeof io};
    assert_false(th_instance_als_sweep(plugin, NULL, &io, &error));
    assert_true(g_error_matches(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_UNSUPPORTED));
    th_plugin_unload(plugin);
    g_clear_pointer(&printed, g_free);
    g_clear_error(&error);

    /* Function without flag: the sweep is there and runs. */
    plugin = load_ok_catching_stderr(FIXTURE("sweep_no_flag"), &printed);
    g_autofree char *no_flag = canonical(FIXTURE("sweep_no_flag"));
    expect_flag_warning(printed, no_flag, "fixture_sweep_no_flag",
                        "clears the TH_CAP_ALS_SWEEP flag but its als_sweep function is present",
                        "calls");
    assert_false(plugin->info->flags & TH_CAP_ALS_SWEEP);
    assert_non_null(plugin->entry.als_sweep);
    th_instance *inst = NULL;
    char err[TH_ERROR_SIZE] = "";
    assert_int_equal(plugin->entry.create(NULL, 0, &plugin->services, &inst, err), TH_OK);
    assert_false(th_instance_als_sweep(plugin, inst, &io, &error));
    assert_true(g_error_matches(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_BAD_STATE));
    plugin->entry.destroy(inst);
    th_plugin_unload(plugin);
    g_clear_pointer(&printed, g_free);

    /* The same for als_update, on a plugin whose init() also ran. */
    g_setenv("TH_FIXTURE_FAILING_INFO", "als-flag", TRUE);
    plugin = load_ok_catching_stderr(FIXTURE("failing"), &printed);
    g_unsetenv("TH_FIXTURE_FAILING_INFO");
    g_autofree char *failing = canonical(FIXTURE("failing"));
    expect_flag_warning(printed, failing, "fixture_failing",
                        "clears the TH_CAP_ALS_UPDATE flag but its als_update function is "
                        "present",
                        "calls");
    assert_non_null(plugin->entry.als_update);
    th_plugin_unload(plugin);
    g_clear_pointer(&printed, g_free);

    /* Flags that agree with the functions: not a word. */
    plugin = load_ok_catching_stderr(FIXTURE("sweep"), &printed);
    assert_string_equal(printed, "");
    th_plugin_unload(plugin);
}

/* ------------------------------------------------------------------------ */
/* ABI 1.1: als_sweep                                                        */
/* ------------------------------------------------------------------------ */

/* The tiny tensor loaded and every factor set, on a new instance. */
static th_instance *tiny_instance(const th_plugin *plugin)
{
    const uint32_t *tiny_indices[3] = {tiny_i0, tiny_i1, tiny_i2};
    th_coo_tensor t = {.struct_size = (uint32_t)sizeof t, .nmodes = 3, .nnz = 3,
                       .dims = tiny_dims, .indices = tiny_indices, .values = tiny_values,
                       .norm_squared = 5.25};
    const double a0[6] = {1, 0, 0, 1, 1, 1};
    char err[TH_ERROR_SIZE] = "";
    th_instance *inst = NULL;
    assert_int_equal(plugin->entry.create(NULL, 0, &plugin->services, &inst, err), TH_OK);
    assert_int_equal(plugin->entry.load_tensor(inst, &t, 2, err), TH_OK);
    assert_int_equal(plugin->entry.set_factor(inst, 0, a0, err), TH_OK);
    assert_int_equal(plugin->entry.set_factor(inst, 1, tiny_a1, err), TH_OK);
    assert_int_equal(plugin->entry.set_factor(inst, 2, tiny_a2, err), TH_OK);
    return inst;
}

/* ABI 1.2's typed sweep time: absent (negative) before a sweep, the
 * plugin's measurement after one. */
static void test_sweep_time_is_a_typed_field(void **state)
{
    (void)state;
    th_plugin *plugin = load_ok(FIXTURE("sweep"));
    th_instance *inst = tiny_instance(plugin);
    g_autoptr(GError) error = NULL;
    th_runtime_info info;
    assert_true(th_instance_runtime_info(plugin, inst, &info, &error));
    assert_true(info.last_sweep_seconds < 0);

    double g[3][4] = {{2, 1, 1, 2}, {10, 14, 14, 20}, {74, 86, 86, 100}}; /* A_m^T A_m */
    double *grams[3] = {g[0], g[1], g[2]};
    double lambda[2], inner[2];
    th_als_sweep_io io = {.struct_size = sizeof io, .norm = TH_NORM_2, .nmodes = 3,
                          .grams = grams, .lambda = lambda, .inner = inner};
    assert_true(th_instance_als_sweep(plugin, inst, &io, &error));
    assert_true(th_instance_runtime_info(plugin, inst, &info, &error));
    assert_true(info.last_sweep_seconds >= 0 && info.last_sweep_seconds < 60);
    assert_string_equal(info.details, "als_update_calls=0");

    /* Asked by a host whose struct ends before the field (ABI 1.0/1.1), the
     * plugin writes nothing past that host's struct_size. */
    th_runtime_info older;
    memset(&older, 0x5a, sizeof older);
    older.struct_size = (uint32_t)TH_RUNTIME_INFO_V1_0_SIZE;
    char err[TH_ERROR_SIZE] = "";
    assert_int_equal(plugin->entry.get_runtime_info(inst, &older, err), TH_OK);
    assert_int_equal(older.struct_size, TH_RUNTIME_INFO_V1_0_SIZE);
    assert_string_equal(older.device, "host (test fixture)");
    const unsigned char *tail = (const unsigned char *)&older + TH_RUNTIME_INFO_V1_0_SIZE;
    for (size_t i = 0; i < sizeof older - TH_RUNTIME_INFO_V1_0_SIZE; i++)
        assert_int_equal(tail[i], 0x5a);

    plugin->entry.destroy(inst);
    th_plugin_unload(plugin);
}

static void test_sweep_plugin_loads(void **state)
{
    (void)state;
    th_plugin *plugin = load_ok(FIXTURE("sweep"));
    /* Built against the current header: its entry is the current size. */
    assert_int_equal(plugin->plugin_entry_size, sizeof(th_plugin_entry));
    assert_int_equal(plugin->entry.abi_version.minor, TH_ABI_VERSION_MINOR);
    assert_true(plugin->info->flags & TH_CAP_ALS_SWEEP);
    assert_non_null(plugin->entry.als_sweep);
    assert_non_null(plugin->entry.als_update);
    run_tiny_mttkrp(plugin);

    /* The wrapper turns the plugin's status into the GError code. */
    th_instance *inst = NULL;
    char err[TH_ERROR_SIZE] = "";
    assert_int_equal(plugin->entry.create(NULL, 0, &plugin->services, &inst, err), TH_OK);
    th_als_sweep_io io = {.struct_size = sizeof io, .nmodes = 3};
    g_autoptr(GError) error = NULL;
    assert_false(th_instance_als_sweep(plugin, inst, &io, &error));
    assert_true(g_error_matches(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_BAD_STATE));
    assert_string_equal(error->message, "fixture_sweep: als_sweep: als_sweep: no tensor loaded "
                                        "(TH_ERR_BAD_STATE)");
    plugin->entry.destroy(inst);
    th_plugin_unload(plugin);
}

/* The one rule about functions, not flags, that stays a load error. */
static void test_sweep_without_update_is_refused(void **state)
{
    (void)state;
    g_autofree char *message =
        expect_load_error(FIXTURE("sweep_no_update"), TH_PLUGIN_ERROR_BAD_INFO);
    g_autofree char *path = canonical(FIXTURE("sweep_no_update"));
    g_autofree char *expected = g_strdup_printf(
        "%s: plugin 'fixture_sweep_no_update' implements als_sweep but not als_update; a plugin "
        "with als_sweep must also implement als_update",
        path);
    assert_string_equal(message, expected);
}

/* The object holds an als_sweep that aborts, beyond the 1.0 struct_size it
 * declares: the loader must not copy it, so nothing can call it. */
static void test_v1_0_sized_entry_never_has_als_sweep(void **state)
{
    (void)state;
    th_plugin *plugin = load_ok(FIXTURE("sweep_v1_0_size"));
    assert_int_equal(plugin->plugin_entry_size, TH_PLUGIN_ENTRY_V1_0_SIZE);
    assert_int_equal(plugin->entry.abi_version.minor, 0);
    assert_null(plugin->entry.als_sweep);
    assert_non_null(plugin->entry.als_update);
    g_autoptr(GError) error = NULL;
    th_als_sweep_io io = {.struct_size = sizeof io};
    assert_false(th_instance_als_sweep(plugin, NULL, &io, &error));
    assert_true(g_error_matches(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_UNSUPPORTED));
    assert_string_equal(error->message,
                        "fixture_sweep_v1_0_size: als_sweep: the plugin does not implement "
                        "als_sweep (optional, ABI 1.1)");
    run_tiny_mttkrp(plugin);
    th_plugin_unload(plugin);
}

/* The same for ABI 1.4: a 1.3 entry whose object holds a generalized_mttkrp
 * and a factor_update (both abort) loads without them; the host reports
 * them unsupported and sees no backend for models beyond least squares. */
static void test_v1_3_sized_entry_lacks_the_1_4_functions(void **state)
{
    (void)state;
    th_plugin *plugin = load_ok(FIXTURE("sweep_v1_3_size"));
    assert_int_equal(plugin->plugin_entry_size, TH_PLUGIN_ENTRY_V1_3_SIZE);
    assert_int_equal(plugin->entry.abi_version.minor, 3);
    assert_non_null(plugin->entry.als_sweep);
    assert_null(plugin->entry.generalized_mttkrp);
    assert_null(plugin->entry.factor_update);
    char err[TH_ERROR_SIZE] = "";
    th_generalized_mttkrp_io gio = {.struct_size = sizeof gio};
    assert_int_equal(th_call_generalized_mttkrp(plugin, NULL, &gio, err), TH_ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "generalized_mttkrp (optional, ABI 1.4)"));
    th_factor_update_io fio = {.struct_size = sizeof fio};
    assert_int_equal(th_call_factor_update(plugin, NULL, &fio, err), TH_ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "factor_update (optional, ABI 1.4)"));
    run_tiny_mttkrp(plugin);
    th_plugin_unload(plugin);
}

/* The same for ABI 1.5: a 1.4 entry whose object holds a row_least_squares
 * (it aborts) loads without it; the host reports it unsupported and sees
 * no backend for tensor completion. */
static void test_v1_4_sized_entry_lacks_row_least_squares(void **state)
{
    (void)state;
    th_plugin *plugin = load_ok(FIXTURE("sweep_v1_4_size"));
    assert_int_equal(plugin->plugin_entry_size, TH_PLUGIN_ENTRY_V1_4_SIZE);
    assert_int_equal(plugin->entry.abi_version.minor, 4);
    assert_non_null(plugin->entry.als_sweep);
    assert_null(plugin->entry.row_least_squares);
    char err[TH_ERROR_SIZE] = "";
    th_row_least_squares_io io = {.struct_size = sizeof io};
    assert_int_equal(th_call_row_least_squares(plugin, NULL, &io, err), TH_ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "row_least_squares (optional, ABI 1.5)"));
    run_tiny_mttkrp(plugin);
    th_plugin_unload(plugin);
}

static void test_missing_file(void **state)
{
    (void)state;
    g_autofree char *message =
        expect_load_error("/nonexistent/dir/backend.so", TH_PLUGIN_ERROR_NOT_FOUND);
    assert_string_equal(message, "/nonexistent/dir/backend.so: plugin file not found");
}

static void test_not_a_shared_object(void **state)
{
    (void)state;
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("th-loader-XXXXXX", &error);
    assert_non_null(dir);
    g_autofree char *path = g_build_filename(dir, "text.so", NULL);
    assert_true(g_file_set_contents(path, "not an ELF file\n", -1, &error));
    g_autofree char *message = expect_load_error(path, TH_PLUGIN_ERROR_DLOPEN);
    g_autofree char *prefix = g_strdup_printf("%s: dlopen failed: ", path);
    assert_true(g_str_has_prefix(message, prefix));
    /* dlerror()'s own words follow ("invalid ELF header" or "file too short"). */
    assert_true(strlen(message) > strlen(prefix) + 5);
    assert_int_equal(g_remove(path), 0);
    assert_int_equal(g_rmdir(dir), 0);
}

/* ------------------------------------------------------------------------ */
/* Search path and resolution                                                */
/* ------------------------------------------------------------------------ */

static void test_search_path_order(void **state)
{
    (void)state;
    g_setenv("TENSORHOST_PLUGIN_PATH", "/env/a::/env/b:", TRUE);
    g_autoptr(GPtrArray) extra = g_ptr_array_new();
    g_ptr_array_add(extra, (gpointer) "/config/dir");
    g_autoptr(GPtrArray) dirs = th_plugin_search_path(extra);
    g_unsetenv("TENSORHOST_PLUGIN_PATH");

    assert_int_equal(dirs->len, 4);
    assert_string_equal(g_ptr_array_index(dirs, 0), "/config/dir");
    assert_string_equal(g_ptr_array_index(dirs, 1), "/env/a");
    assert_string_equal(g_ptr_array_index(dirs, 2), "/env/b");
    /* The test runs from <build>/bin, the build tree mirrors the install tree,
     * so the executable-relative folder is where cpu-reference.so is built. */
    g_autofree char *exe_relative = canonical(TH_PLUGIN_DIR);
    assert_string_equal(g_ptr_array_index(dirs, 3), exe_relative);

    g_autoptr(GPtrArray) plain = th_plugin_search_path(NULL);
    assert_int_equal(plain->len, 1);
    assert_string_equal(g_ptr_array_index(plain, 0), exe_relative);
}

static void test_resolve_by_name(void **state)
{
    (void)state;
    g_autoptr(GError) error = NULL;

    /* Found next to the executable, with no configuration at all. */
    g_autoptr(GPtrArray) plain = th_plugin_search_path(NULL);
    g_autofree char *cpu = th_plugin_resolve("cpu-reference", plain, &error);
    g_assert_no_error(error);
    g_autofree char *cpu_expected = canonical(TH_PLUGIN_DIR "/cpu-reference.so");
    assert_string_equal(cpu, cpu_expected);

    /* Found through TENSORHOST_PLUGIN_PATH. */
    g_setenv("TENSORHOST_PLUGIN_PATH", "/nonexistent:" TH_FIXTURE_PLUGIN_DIR, TRUE);
    g_autoptr(GPtrArray) with_env = th_plugin_search_path(NULL);
    g_unsetenv("TENSORHOST_PLUGIN_PATH");
    g_autofree char *good = th_plugin_resolve("fixture_good", with_env, &error);
    g_assert_no_error(error);
    g_autofree char *good_expected = canonical(FIXTURE("good"));
    assert_string_equal(good, good_expected);

    /* An earlier folder wins: a config folder holding its own cpu-reference.so
     * (here a copy of fixture_good) shadows the installed one. */
    g_autofree char *dir = g_dir_make_tmp("th-resolve-XXXXXX", &error);
    g_assert_no_error(error);
    g_autofree char *shadow = g_build_filename(dir, "cpu-reference.so", NULL);
    g_autofree char *bytes = NULL;
    gsize length = 0;
    assert_true(g_file_get_contents(FIXTURE("good"), &bytes, &length, &error));
    assert_true(g_file_set_contents(shadow, bytes, (gssize)length, &error));
    g_autoptr(GPtrArray) extra = g_ptr_array_new();
    g_ptr_array_add(extra, dir);
    g_autoptr(GPtrArray) with_extra = th_plugin_search_path(extra);
    g_autofree char *shadowed = th_plugin_resolve("cpu-reference", with_extra, &error);
    g_assert_no_error(error);
    g_autofree char *shadow_canonical = canonical(shadow);
    assert_string_equal(shadowed, shadow_canonical);
    th_plugin *plugin = load_ok(shadowed);
    assert_string_equal(plugin->info->id, "fixture_good");
    th_plugin_unload(plugin);
    assert_int_equal(g_remove(shadow), 0);
    assert_int_equal(g_rmdir(dir), 0);
}

static void test_resolve_paths_and_failures(void **state)
{
    (void)state;
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) dirs = g_ptr_array_new();
    g_ptr_array_add(dirs, (gpointer) "/nonexistent/one");
    g_ptr_array_add(dirs, (gpointer) "/nonexistent/two");

    char *missing = th_plugin_resolve("nope", dirs, &error);
    assert_null(missing);
    assert_true(g_error_matches(error, TH_PLUGIN_ERROR, TH_PLUGIN_ERROR_NOT_FOUND));
    assert_string_equal(error->message,
                        "plugin 'nope' not found: no nope.so in /nonexistent/one, "
                        "/nonexistent/two (add a folder with TENSORHOST_PLUGIN_PATH, or give "
                        "the path of the .so)");
    g_clear_error(&error);

    assert_null(th_plugin_resolve("", dirs, &error));
    assert_true(g_error_matches(error, TH_PLUGIN_ERROR, TH_PLUGIN_ERROR_NOT_FOUND));
    g_clear_error(&error);

    /* A near miss of an installed plugin gets a suggestion; a name with a
     * newline stays on one line. */
    g_autoptr(GPtrArray) fixture_dirs = g_ptr_array_new();
    g_ptr_array_add(fixture_dirs, (gpointer)TH_FIXTURE_PLUGIN_DIR);
    assert_null(th_plugin_resolve("fixture_god", fixture_dirs, &error));
    assert_string_equal(error->message,
                        "plugin 'fixture_god' not found: no fixture_god.so in "
                        TH_FIXTURE_PLUGIN_DIR " (did you mean 'fixture_good'? Or add a folder "
                        "with TENSORHOST_PLUGIN_PATH, or give the path of the .so)");
    g_clear_error(&error);
    assert_null(th_plugin_resolve("cpu\nref", dirs, &error));
    assert_null(strchr(error->message, '\n'));
    assert_non_null(strstr(error->message, "'cpu\\nref'"));
    g_clear_error(&error);
    g_autoptr(GPtrArray) names = th_plugin_installed_names(fixture_dirs);
    assert_true(names->len >= 3);
    for (guint i = 1; i < names->len; i++)
        assert_true(g_strcmp0(g_ptr_array_index(names, i - 1), g_ptr_array_index(names, i)) < 0);

    /* A name with a '/' or ending in .so is a path, never searched for. */
    assert_null(th_plugin_resolve("fixture_good.so", dirs, &error));
    assert_string_equal(error->message, "fixture_good.so: plugin file not found");
    g_clear_error(&error);

    g_autofree char *absolute = th_plugin_resolve(FIXTURE("good"), dirs, &error);
    g_assert_no_error(error);
    g_autofree char *expected = canonical(FIXTURE("good"));
    assert_string_equal(absolute, expected);

    /* Relative paths become absolute (relative to the working directory). */
    g_autofree char *cwd = g_get_current_dir();
    assert_int_equal(g_chdir(TH_FIXTURE_PLUGIN_DIR), 0);
    g_autofree char *relative = th_plugin_resolve("./fixture_good.so", dirs, &error);
    assert_int_equal(g_chdir(cwd), 0);
    g_assert_no_error(error);
    assert_string_equal(relative, expected);
}

/* ------------------------------------------------------------------------ */
/* Misc                                                                      */
/* ------------------------------------------------------------------------ */

static void test_status_names_and_call_error(void **state)
{
    (void)state;
    assert_string_equal(th_status_name(TH_OK), "TH_OK");
    assert_string_equal(th_status_name(TH_ERR_OUT_OF_MEMORY), "TH_ERR_OUT_OF_MEMORY");
    assert_string_equal(th_status_name(TH_ERR_INTERNAL), "TH_ERR_INTERNAL");
    assert_string_equal(th_status_name(-99), "unknown status");
    /* Every code of the header's one list has its own name. */
#define CHECK_NAME(name, value) assert_string_equal(th_status_name(value), #name);
    TH_STATUS_LIST(CHECK_NAME)
#undef CHECK_NAME

    th_plugin *plugin = load_ok(FIXTURE("good"));
    g_autoptr(GError) error = NULL;
    th_plugin_set_call_error(&error, plugin, "mttkrp(mode 2)", -99, "");
    assert_string_equal(error->message,
                        "fixture_good: mttkrp(mode 2): (the plugin gave no message) (status -99)");
    g_clear_error(&error);
    /* A message without a terminator is cut at the buffer size. */
    char unterminated[TH_ERROR_SIZE + 8];
    memset(unterminated, 'x', sizeof unterminated - 1);
    unterminated[sizeof unterminated - 1] = '\0';
    th_plugin_set_call_error(&error, plugin, "create", TH_ERR_INVALID_ARGUMENT, unterminated);
    assert_int_equal(strlen(error->message),
                     strlen("fixture_good: create: ") + TH_ERROR_SIZE - 1 +
                         strlen(" (TH_ERR_INVALID_ARGUMENT)"));
    th_plugin_unload(plugin);
}

static void test_load_unload_loop(void **state)
{
    (void)state;
    for (int i = 0; i < 100; i++) {
        th_plugin *plugin = load_ok(FIXTURE("good"));
        run_tiny_mttkrp(plugin);
        th_plugin_unload(plugin);
    }
    /* The OpenMP runtime the cpu-reference links must survive being loaded
     * and unloaded with its worker threads started each time. */
    for (int i = 0; i < 100; i++) {
        th_plugin *plugin = load_ok(TH_PLUGIN_DIR "/cpu-reference.so");
        run_tiny_mttkrp(plugin);
        th_plugin_unload(plugin);
    }
}

/* ------------------------------------------------------------------------ */
/* Bounded options of cpu-reference                                          */
/* ------------------------------------------------------------------------ */

#define CPU_REFERENCE TH_PLUGIN_DIR "/cpu-reference.so"

/* create() with threads = `value`; returns the status, the instance's
 * device text (when created) or the error in `text`. Creating starts no
 * thread, so even the largest accepted count is cheap here. */
static th_status create_with_threads(th_plugin *plugin, const char *value, char *text,
                                     size_t size)
{
    th_option option = {.key = "threads", .value = value};
    th_instance *inst = NULL;
    char err[TH_ERROR_SIZE] = "";
    th_status status = plugin->entry.create(&option, 1, &plugin->services, &inst, err);
    if (status != TH_OK) {
        assert_null(inst);
        g_strlcpy(text, err, size);
        return status;
    }
    g_autoptr(GError) error = NULL;
    th_runtime_info info = {.struct_size = (uint32_t)sizeof info};
    assert_true(th_instance_runtime_info(plugin, inst, &info, &error));
    g_strlcpy(text, info.device, size);
    plugin->entry.destroy(inst);
    return status;
}

/* Thread counts that end the process inside the OpenMP runtime (a libgomp
 * abort at 50000, SIGSEGV from about 70000) are refused by create(), with
 * the option, the value and the range; 1 and 1024 are accepted. */
static void test_cpu_reference_threads_are_bounded(void **state)
{
    (void)state;
    th_plugin *plugin = load_ok(CPU_REFERENCE);
    char text[TH_ERROR_SIZE];
    static const char *const too_many[] = {"1025", "50000", "70000", "100000", "1000000"};
    for (size_t i = 0; i < G_N_ELEMENTS(too_many); i++) {
        assert_int_equal(create_with_threads(plugin, too_many[i], text, sizeof text),
                         TH_ERR_INVALID_ARGUMENT);
        g_autofree char *expected = g_strdup_printf(
            "option 'threads': %s is out of range: expected an integer from 1 to 1024",
            too_many[i]);
        assert_string_equal(text, expected);
    }
    assert_int_equal(create_with_threads(plugin, "1", text, sizeof text), TH_OK);
    assert_string_equal(text, "CPU (1 thread)");
    assert_int_equal(create_with_threads(plugin, "1024", text, sizeof text), TH_OK);
    assert_string_equal(text, "CPU (1024 threads)");
    th_plugin_unload(plugin);
}

/* The host's error, as a run reports it: the plugin, the call, the
 * plugin's message and the status. */
static void test_cpu_reference_threads_error_through_the_host(void **state)
{
    (void)state;
    th_config_option option = {.key = "threads", .value = "100000"};
    g_autoptr(GPtrArray) options = g_ptr_array_new();
    g_ptr_array_add(options, &option);
    g_autoptr(GError) error = NULL;
    th_backend *backend = th_backend_open(CPU_REFERENCE, NULL, options, NULL, &error);
    assert_null(backend);
    assert_true(g_error_matches(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_INVALID_ARGUMENT));
    assert_string_equal(error->message,
                        "cpu-reference: cannot create an instance: option 'threads': 100000 is "
                        "out of range: expected an integer from 1 to 1024 "
                        "(TH_ERR_INVALID_ARGUMENT)");
}

#define DEFAULT_THREADS_CHILD "--default-threads-child"

/* Run in a child process started with OMP_NUM_THREADS=5000 (the OpenMP
 * runtime reads it once, when it starts): prints the device text of an
 * instance created without options and the plugin's log lines. */
static int default_threads_child(void)
{
    log_capture capture;
    th_host_services services = capture_services(&capture);
    GError *error = NULL;
    th_plugin *plugin = th_plugin_load(CPU_REFERENCE, &services, &error);
    if (!plugin) {
        printf("load: %s\n", error->message);
        return 1;
    }
    th_instance *inst = NULL;
    char err[TH_ERROR_SIZE] = "";
    if (plugin->entry.create(NULL, 0, &plugin->services, &inst, err) != TH_OK) {
        printf("create: %s\n", err);
        return 1;
    }
    th_runtime_info info = {.struct_size = (uint32_t)sizeof info};
    if (!th_instance_runtime_info(plugin, inst, &info, &error)) {
        printf("runtime info: %s\n", error->message);
        return 1;
    }
    printf("device: %s\n", info.device);
    for (guint i = 0; i < capture.lines->len; i++)
        printf("log: %s\n", (const char *)g_ptr_array_index(capture.lines, i));
    plugin->entry.destroy(inst);
    th_plugin_unload(plugin);
    g_ptr_array_unref(capture.lines);
    return 0;
}

/* OMP_NUM_THREADS is not an option, so a huge value is lowered to the bound
 * with a warning instead of refused. */
static void test_cpu_reference_default_threads_are_capped(void **state)
{
    (void)state;
    g_autofree char *self = g_file_read_link("/proc/self/exe", NULL);
    assert_non_null(self);
    char *argv[] = {self, DEFAULT_THREADS_CHILD, NULL};
    g_auto(GStrv) env = g_environ_setenv(g_get_environ(), "OMP_NUM_THREADS", "5000", TRUE);
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    int wait_status = 0;
    g_autoptr(GError) error = NULL;
    assert_true(g_spawn_sync(NULL, argv, env, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                             &wait_status, &error));
    if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0)
        fail_msg("child failed (wait status %d): %s%s", wait_status, out, err);
    assert_non_null(strstr(out, "device: CPU (1024 threads)\n"));
    assert_non_null(strstr(out, "log: cpu-reference: OpenMP's default of 5000 threads "
                                "(OMP_NUM_THREADS?) is above 1024; using 1024"));
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], DEFAULT_THREADS_CHILD) == 0)
        return default_threads_child();
    th_log_set_level(TH_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_loads_and_runs),
        cmocka_unit_test(test_wrong_major_names_both_versions),
        cmocka_unit_test(test_newer_minor_is_accepted_and_tail_ignored),
        cmocka_unit_test(test_short_struct_names_sizes),
        cmocka_unit_test(test_no_symbol_keeps_dlerror),
        cmocka_unit_test(test_null_function_is_named),
        cmocka_unit_test(test_failing_calls_report_plugin_text),
        cmocka_unit_test(test_init_failure),
        cmocka_unit_test(test_loading_twice_shares_the_plugin),
        cmocka_unit_test(test_bad_info),
        cmocka_unit_test(test_capability_comes_from_the_function),
        cmocka_unit_test(test_sweep_plugin_loads),
        cmocka_unit_test(test_sweep_time_is_a_typed_field),
        cmocka_unit_test(test_sweep_without_update_is_refused),
        cmocka_unit_test(test_v1_0_sized_entry_never_has_als_sweep),
        cmocka_unit_test(test_v1_3_sized_entry_lacks_the_1_4_functions),
        cmocka_unit_test(test_v1_4_sized_entry_lacks_row_least_squares),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_not_a_shared_object),
        cmocka_unit_test(test_search_path_order),
        cmocka_unit_test(test_resolve_by_name),
        cmocka_unit_test(test_resolve_paths_and_failures),
        cmocka_unit_test(test_status_names_and_call_error),
        cmocka_unit_test(test_cpu_reference_threads_are_bounded),
        cmocka_unit_test(test_cpu_reference_threads_error_through_the_host),
        cmocka_unit_test(test_cpu_reference_default_threads_are_capped),
        cmocka_unit_test(test_load_unload_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
