/* tensorhost: CP decomposition of sparse tensors through MTTKRP plugins. */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "atomic_file.h"
#include "backend.h"
#include "compare.h"
#include "config.h"
#include "cp_als.h"
#include "factor_io.h"
#include "cancel.h"
#include "log.h"
#include "message_text.h"
#include "plugin_loader.h"
#include "progress.h"
#include "report.h"
#include "tensor_reader.h"

enum { EXIT_USAGE = 2 };

typedef struct cli_options {
    char *config_path;
    char **overrides;
    gboolean list_plugins;
    gboolean version;
    gboolean verbose;
    gboolean quiet;
} cli_options;

static void cli_options_clear(cli_options *o)
{
    g_free(o->config_path);
    g_strfreev(o->overrides);
}

static int parse_command_line(int *argc, char ***argv, cli_options *o)
{
    GOptionEntry entries[] = {
        {"config", 'c', 0, G_OPTION_ARG_FILENAME, &o->config_path,
         "Run the job described by FILE (TOML)", "FILE"},
        {"set", 's', 0, G_OPTION_ARG_STRING_ARRAY, &o->overrides,
         "Override a config key, e.g. --set cpd.rank=32 (repeatable)", "KEY=VALUE"},
        {"list-plugins", 0, 0, G_OPTION_ARG_NONE, &o->list_plugins,
         "List the plugins found on the search path and exit", NULL},
        {"version", 'V', 0, G_OPTION_ARG_NONE, &o->version, "Print the version and exit", NULL},
        {"verbose", 'v', 0, G_OPTION_ARG_NONE, &o->verbose, "Print debug detail", NULL},
        {"quiet", 'q', 0, G_OPTION_ARG_NONE, &o->quiet, "Print errors and warnings only", NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) context = g_option_context_new("- sparse CP decomposition");
    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(
        context, "Example: tensorhost --config configs/quickstart.toml --set cpd.rank=8\n"
                 "The config reference is configs/README.md.\n");
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(context, argc, argv, &error)) {
        fprintf(stderr, "tensorhost: %s (see --help)\n", error->message);
        return EXIT_USAGE;
    }
    if (*argc > 1) {
        fprintf(stderr, "tensorhost: unexpected argument '%s' (see --help)\n", (*argv)[1]);
        return EXIT_USAGE;
    }
    if (!o->config_path && !o->list_plugins && !o->version) {
        fprintf(stderr, "tensorhost: nothing to do: give --config FILE (see --help)\n");
        return EXIT_USAGE;
    }
    return 0;
}

/* Prints the one error of a failed run, on one line whatever it quotes,
 * and gives its exit status: 2 for a malformed command line (--set), 1 for
 * any other error. */
static int fail(GError *error)
{
    g_autofree char *message = th_escape_control(error->message);
    fprintf(stderr, "tensorhost: error: %s\n", message);
    const int status = g_error_matches(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_OVERRIDE)
                           ? EXIT_USAGE
                           : 1;
    g_error_free(error);
    return status;
}

/* Prefixes `*error` with "WHERE: KEY: ", naming the config value it is about. */
static void blame_key(GError **error, const th_config *config, const char *key)
{
    g_prefix_error(error, "%s: %s: ", th_config_where(config, key), key);
}

static gint compare_names(gconstpointer a, gconstpointer b)
{
    return g_strcmp0(*(char *const *)a, *(char *const *)b);
}

static void describe_capabilities(const th_plugin_info *info, GString *out)
{
    g_string_append_printf(out, "max modes %u, max rank %u, %s", info->max_modes, info->max_rank,
                           info->value_type == TH_VALUE_F32 ? "f32" : "f64");
    if (info->flags & TH_CAP_ALS_UPDATE)
        g_string_append(out, ", als-update");
    if (info->flags & TH_CAP_ALS_SWEEP)
        g_string_append(out, ", als-sweep");
    if (info->flags & TH_CAP_GPU)
        g_string_append(out, ", gpu");
}

static int list_plugins(GPtrArray *config_search_path)
{
    g_autoptr(GPtrArray) path = th_plugin_search_path(config_search_path);
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    unsigned found = 0;
    for (guint d = 0; d < path->len; ++d) {
        const char *dir_path = g_ptr_array_index(path, d);
        g_autoptr(GDir) dir = g_dir_open(dir_path, 0, NULL);
        if (!dir)
            continue;
        g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
        for (const char *name; (name = g_dir_read_name(dir));)
            if (g_str_has_suffix(name, ".so"))
                g_ptr_array_add(names, g_strdup(name));
        g_ptr_array_sort(names, compare_names);
        for (guint i = 0; i < names->len; ++i) {
            const char *name = g_ptr_array_index(names, i);
            g_autofree char *file = g_build_filename(dir_path, name, NULL);
            /* A name found earlier on the path shadows later ones. */
            if (g_hash_table_contains(seen, name)) {
                printf("%-16s (shadowed by an earlier directory) %s\n", name, file);
                continue;
            }
            g_hash_table_add(seen, g_strdup(name));
            th_host_services services = th_host_services_make();
            g_autoptr(GError) error = NULL;
            th_plugin *plugin = th_plugin_load(file, &services, &error);
            if (!plugin) {
                g_autofree char *why = th_escape_control(error->message);
                printf("%-16s BROKEN: %s\n", name, why);
                continue;
            }
            g_autoptr(GString) caps = g_string_new(NULL);
            describe_capabilities(plugin->info, caps);
            /* A plugin's strings are its own: one line each, whatever they hold. */
            g_autofree char *id = th_escape_control(plugin->info->id);
            g_autofree char *version = th_escape_control(plugin->info->version);
            g_autofree char *title = th_escape_control(plugin->info->name);
            g_autofree char *description = th_escape_control(plugin->info->description);
            printf("%-16s %-8s ABI %u.%u  %s\n    %s\n    %s\n    %s\n", id, version,
                   plugin->entry.abi_version.major, plugin->entry.abi_version.minor, title,
                   description, caps->str, plugin->path);
            th_plugin_unload(plugin);
            ++found;
        }
    }
    if (found == 0) {
        fprintf(stderr, "tensorhost: no plugins found; searched:\n");
        for (guint d = 0; d < path->len; ++d)
            fprintf(stderr, "  %s\n", (const char *)g_ptr_array_index(path, d));
        return 1;
    }
    return 0;
}

static void show_read_progress(uint64_t done, uint64_t total, void *user_data)
{
    (void)user_data;
    if (total > 0)
        th_progress_show(FALSE, "reading: %.0f / %.0f MB (%.0f%%)", done / 1e6, total / 1e6,
                         100.0 * (double)done / (double)total);
    else
        th_progress_show(FALSE, "reading: %.0f MB", done / 1e6);
}

static void print_tensor_summary(const th_sptensor *t, const char *path, double seconds)
{
    g_autoptr(GString) dims = g_string_new(NULL);
    g_autoptr(GString) empty = g_string_new(NULL);
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        g_string_append_printf(dims, "%s%u", m ? " x " : "", t->dims[m]);
        g_string_append_printf(empty, "%s%" G_GUINT64_FORMAT, m ? " " : "",
                               th_sptensor_empty_slices(t, m));
    }
    th_log(TH_LOG_INFO, "Tensor  %s", path);
    th_log(TH_LOG_INFO, "  order %u, dims %s, nnz %" G_GUINT64_FORMAT ", density %.3e", t->nmodes,
           dims->str, t->nnz, th_sptensor_density(t));
    th_log(TH_LOG_INFO, "  duplicates merged %" G_GUINT64_FORMAT ", empty slices per mode [%s], "
                        "read in %.3fs",
           t->duplicates_merged, empty->str, seconds);
    /* Zeros the file stores are kept (they are entries of the file), but a
     * user who wrote 1e-400 should learn it became 0. */
    if (t->explicit_zeros > 0 || t->underflowed_values > 0)
        th_log(TH_LOG_WARNING,
               "%s: %" G_GUINT64_FORMAT " values are written as zero and %" G_GUINT64_FORMAT
               " are too small for a double (below about 4.9e-324) and read as zero; they are "
               "kept as stored entries (report.json: tensor.explicit_zeros, "
               "tensor.underflowed_values)",
               path, t->explicit_zeros, t->underflowed_values);
}

static void print_backend_summary(th_backend *backend)
{
    const th_plugin_info *info = th_backend_info(backend);
    th_runtime_info runtime;
    g_autoptr(GError) error = NULL;
    if (!th_backend_runtime_info(backend, &runtime, &error))
        memset(&runtime, 0, sizeof runtime);
    th_log(TH_LOG_INFO, "Backend %s %s (%s)", info->id, info->version, backend->plugin->path);
    th_log(TH_LOG_INFO, "  device %s; memory: tensor %.1f MB, factors %.1f MB; %s",
           runtime.device[0] ? runtime.device : "(not reported)", runtime.tensor_bytes / 1e6,
           runtime.factor_bytes / 1e6, runtime.details);
    th_log(TH_LOG_INFO, "  preprocessing %.3fs", backend->load_seconds);
}

/* Per-iteration lines, and a progress line inside iterations that take
 * longer than a second. */
typedef struct iteration_display {
    uint32_t iteration;
    gint64 started;
} iteration_display;

static gboolean print_iteration(const th_cpd_iteration *it, void *user_data)
{
    (void)user_data;
    th_progress_clear();
    th_log(TH_LOG_INFO, "  its = %3u (%.3fs)  fit = %.6f  delta = %+.4e", it->iteration,
           it->seconds, it->fit, it->delta);
    return TRUE;
}

static void show_iteration_progress(uint32_t iteration, uint32_t mode, uint32_t nmodes,
                                    void *user_data)
{
    iteration_display *d = user_data;
    const gint64 now = g_get_monotonic_time();
    if (iteration != d->iteration) {
        d->iteration = iteration;
        d->started = now;
    }
    const double elapsed = (double)(now - d->started) / 1e6;
    if (elapsed >= 1.0)
        th_progress_show(FALSE, "  iteration %u: mode %u of %u (%.0fs)", iteration, mode + 1,
                         nmodes, elapsed);
}

/* "  1.2345" or, for a time the host could not take, a "-" in its place. */
static char *format_time_column(double seconds)
{
    return seconds >= 0.0 ? g_strdup_printf("%10.4f", seconds) : g_strdup_printf("%10s", "-");
}

/* "  (backend 0.0123, scheme1)": what else is known about one mode's MTTKRP. */
static char *describe_mode_timing(th_backend *backend, const th_cpd_result *r, uint32_t mode)
{
    g_autoptr(GPtrArray) parts = g_ptr_array_new_with_free_func(g_free);
    if (r->mttkrp_seconds[mode] < 0.0)
        g_ptr_array_add(parts, g_strdup("inside als_sweep"));
    if (r->mttkrp_device_seconds[mode] >= 0.0)
        g_ptr_array_add(parts, g_strdup_printf("backend %.4f", r->mttkrp_device_seconds[mode]));
    th_mode_info info;
    g_autoptr(GError) error = NULL;
    if (!th_backend_mode_info(backend, mode, &info, &error))
        g_ptr_array_add(parts, g_strdup("?"));
    else if (info.scheme[0] != '\0')
        g_ptr_array_add(parts, g_strdup(info.scheme));
    if (parts->len == 0)
        return g_strdup("");
    g_ptr_array_add(parts, NULL);
    g_autofree char *joined = g_strjoinv(", ", (char **)parts->pdata);
    return g_strdup_printf("  (%s)", joined);
}

static void print_mttkrp_timings(th_backend *backend, const th_cpd_result *r)
{
    double host_total = 0.0, device_total = 0.0;
    gboolean host_measured = TRUE, device_measured = TRUE;
    for (uint32_t m = 0; m < r->nmodes; ++m) {
        host_measured = host_measured && r->mttkrp_seconds[m] >= 0.0;
        device_measured = device_measured && r->mttkrp_device_seconds[m] >= 0.0;
        host_total += r->mttkrp_seconds[m];
        device_total += r->mttkrp_device_seconds[m];
        g_autofree char *host = format_time_column(r->mttkrp_seconds[m]);
        g_autofree char *detail = describe_mode_timing(backend, r, m);
        th_log(TH_LOG_INFO, "  mttkrp mode %-3u %s%s", m + 1, host, detail);
    }
    g_autofree char *total = format_time_column(host_measured ? host_total : -1.0);
    if (device_measured)
        th_log(TH_LOG_INFO, "  mttkrp total    %s  (backend %.4f)", total, device_total);
    else
        th_log(TH_LOG_INFO, "  mttkrp total    %s", total);
}

static void print_update_timings(const th_cpd_result *r)
{
    switch (r->update_path) {
    case TH_UPDATE_SWEEP:
        th_log(TH_LOG_INFO, "  als sweep       %10.4f  (in the backend: one als_sweep per "
                            "iteration: MTTKRPs, solves, updates)",
               r->sweep_seconds);
        th_log(TH_LOG_INFO, "  factor update   %10.4f  (als_update of modes the host finished)",
               r->update_seconds);
        break;
    case TH_UPDATE_MODE:
        th_log(TH_LOG_INFO, "  factor update   %10.4f  (in the backend: als_update per mode)",
               r->update_seconds);
        break;
    default:
        th_log(TH_LOG_INFO, "  factor update   %10.4f  (on the host)", r->update_seconds);
        break;
    }
}

static void print_run_summary(th_backend *backend, const th_cpd_result *r, double read_seconds,
                              double total_seconds)
{
    th_log(TH_LOG_INFO, "Result  %s after %u iterations: final fit %.6f",
           th_run_status(r), r->iterations->len, r->fit);
    th_log(TH_LOG_INFO, "Timing (seconds)");
    th_log(TH_LOG_INFO, "  read            %10.4f", read_seconds);
    th_log(TH_LOG_INFO, "  preprocessing   %10.4f", backend->load_seconds);
    print_mttkrp_timings(backend, r);
    print_update_timings(r);
    th_log(TH_LOG_INFO, "  als algebra     %10.4f", r->algebra_seconds);
    th_log(TH_LOG_INFO, "  total           %10.4f", total_seconds);
    if (r->sweep_fallbacks)
        th_log(TH_LOG_INFO,
               "als_sweep stopped early (a Cholesky breakdown) in %u of %u iterations; the host "
               "finished those per mode",
               r->sweep_fallbacks, r->iterations->len);
    if (r->pinv_fallbacks)
        th_log(TH_LOG_WARNING,
               "%u normal-equation solves were rank deficient and used the pseudo-inverse; "
               "the rank may exceed what the tensor supports",
               r->pinv_fallbacks);
}

static gboolean write_outputs(const th_config *config, th_run_summary *summary, GError **error)
{
    if (!th_make_output_dir(config->output_dir, error))
        return FALSE;
    if (config->write_factors && summary->result->factors) {
        if (!th_write_cpd_factors(config->output_dir, summary->result, error))
            return FALSE;
        summary->factors_written = TRUE;
    }
    g_autofree char *report = g_build_filename(config->output_dir, "report.json", NULL);
    if (!th_report_write(report, summary, error))
        return FALSE;
    th_log(TH_LOG_INFO, "Output  %s%s", config->output_dir,
           summary->factors_written ? " (mode*.mat, lambda.mat, report.json)" : " (report.json)");
    return TRUE;
}

/* The nearest existing folder on the way up from `path` (itself if it
 * exists), or NULL when a file stands in the way (returned in *blocker). */
static char *nearest_existing(const char *path, char **blocker)
{
    g_autofree char *current = g_strdup(path);
    while (!g_file_test(current, G_FILE_TEST_EXISTS)) {
        char *parent = g_path_get_dirname(current);
        g_free(current);
        current = parent;
    }
    if (g_file_test(current, G_FILE_TEST_IS_DIR))
        return g_steal_pointer(&current);
    *blocker = g_steal_pointer(&current);
    return NULL;
}

/* A bad output.dir must not cost a whole decomposition: the folder exists
 * and takes new files, or can be created. Nothing is created here, so a run
 * that fails later leaves no empty folder behind. */
static gboolean check_output_dir(const th_config *config, GError **error)
{
    const char *dir = config->output_dir;
    g_autofree char *blocker = NULL;
    g_autofree char *existing = nearest_existing(dir, &blocker);
    if (!existing) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOTDIR,
                    "%s is a file, not a folder; name a folder (created if missing)", blocker);
    } else if (strcmp(existing, dir) != 0) {
        if (access(existing, W_OK | X_OK) == 0)
            return TRUE;
        const int saved = errno;
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(saved),
                    "cannot create %s: %s: %s", dir, existing, g_strerror(saved));
    } else {
        g_autofree char *probe = g_build_filename(dir, ".tensorhost-write-test-XXXXXX", NULL);
        const int fd = g_mkstemp(probe);
        if (fd >= 0) {
            close(fd);
            g_unlink(probe);
            return TRUE;
        }
        const int saved = errno;
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(saved),
                    "cannot write into %s: %s", dir, g_strerror(saved));
    }
    blame_key(error, config, "output.dir");
    return FALSE;
}

static th_backend *open_backend(const th_config *config, GError **error)
{
    th_backend *backend = th_backend_open(config->plugin, config->search_path,
                                          config->plugin_options, config->plugin_option_tables,
                                          error);
    if (!backend) {
        /* A plugin that refuses its options points at them, anything else
         * at the plugin named. */
        if (g_error_matches(*error, TH_PLUGIN_STATUS_ERROR, TH_ERR_INVALID_ARGUMENT))
            blame_key(error, config, "backend.options");
        else if ((*error)->domain != TH_CONFIG_ERROR) /* those name their table already */
            blame_key(error, config, "backend.plugin");
    }
    return backend;
}

static gboolean choose_update_path(const th_config *config, th_backend *backend,
                                   th_cpd_params *params, th_update_path *path, GError **error)
{
    *params = th_cpd_params_from_config(config, config->rank);
    if (th_cpd_resolve_update_path(backend, params->update, path, error))
        return TRUE;
    blame_key(error, config, "cpd.update");
    return FALSE;
}

static th_sptensor *read_tensor(const th_config *config, double *seconds, GError **error)
{
    const gint64 start = g_get_monotonic_time();
    th_tensor_read_options read_options = {0};
    if (th_progress_enabled())
        read_options.progress = show_read_progress;
    th_cancel_set_activity("now: the read is abandoned and nothing is written");
    th_sptensor *tensor = th_tensor_read_file(config->tensor_path, &read_options, error);
    th_progress_clear();
    *seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    if (!tensor && g_error_matches(*error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO))
        blame_key(error, config, "tensor.path");
    return tensor;
}

/* What CP-ALS needs of the tensor, said before any long work: a norm above
 * 0 (values scaled first when their squares would overflow or underflow),
 * and a rank the data can support (a warning). */
static gboolean prepare_tensor(const th_config *config, th_sptensor *tensor, GError **error)
{
    const double largest = th_sptensor_max_abs(tensor);
    if (th_sptensor_scale_to_safe_range(tensor))
        th_log(TH_LOG_INFO,
               "  values scaled by 2^%d for the computation (largest |value| %.3g); lambda "
               "is reported in the file's units",
               (int)round(log2(tensor->value_scale)), largest);
    if (!th_cpd_check_tensor(tensor, error))
        return FALSE;
    const uint64_t bound = th_cpd_rank_bound(tensor);
    if (config->rank > bound)
        th_log(TH_LOG_WARNING,
               "%s: cpd.rank %u is above the largest rank this tensor can have (%" G_GUINT64_FORMAT
               ": at most its nonzero count and, for each mode, the product of the other "
               "modes' lengths); the extra components are undetermined, the solves will be "
               "rank deficient and the fit will stop improving",
               th_config_where(config, "cpd.rank"), config->rank, bound);
    return TRUE;
}

static gboolean load_into_backend(th_backend *backend, const th_sptensor *tensor, uint32_t rank,
                                  GError **error)
{
    th_cancel_set_activity("after the backend has built its layouts");
    th_progress_show(TRUE, "building %s's layouts of the tensor...", th_backend_info(backend)->id);
    const gboolean ok = th_backend_load_tensor(backend, tensor, rank, error);
    th_progress_clear();
    return ok;
}

/* A run that ran out of iterations says so: its fit may still be rising. A
 * tolerance of 0 asks for exactly max_iters iterations, so it says nothing. */
static void warn_if_not_converged(const th_config *config, const th_cpd_result *result)
{
    if (result->converged || result->interrupted || config->tolerance == 0.0 ||
        result->iterations->len == 0)
        return;
    const th_cpd_iteration *last =
        &g_array_index(result->iterations, th_cpd_iteration, result->iterations->len - 1);
    th_log(TH_LOG_WARNING,
           "not converged: stopped at cpd.max_iters = %u with |fit change| %.3e, above "
           "cpd.tolerance %g; raise max_iters or loosen the tolerance",
           config->max_iters, fabs(last->delta), config->tolerance);
}

static int report_interruption(const th_cpd_result *result)
{
    if (result->partial_modes > 0)
        th_log(TH_LOG_WARNING,
               "interrupted inside iteration %u, after %u of %u modes: the outputs hold that "
               "state of the model (fit %.6f)",
               result->iterations->len + 1, result->partial_modes, result->nmodes, result->fit);
    else if (!result->factors)
        th_log(TH_LOG_WARNING,
               "interrupted before the first factor update: report.json only, no factors");
    else
        th_log(TH_LOG_WARNING, "interrupted: the outputs hold the factors after iteration %u",
               result->iterations->len);
    return th_cancel_exit_status();
}

/* A stop during a read ends the run there: nothing is written. */
static int report_read_interruption(GError *error)
{
    g_autofree char *message = th_escape_control(error->message);
    fprintf(stderr, "tensorhost: interrupted while reading the tensor (%s); nothing was "
                    "written\n",
            message);
    g_error_free(error);
    return th_cancel_exit_status();
}

static int run_job(const cli_options *cli)
{
    const gint64 start = g_get_monotonic_time();
    GError *error = NULL;
    g_autoptr(th_config) config =
        th_config_load(cli->config_path, (const char *const *)cli->overrides, &error);
    if (!config)
        return fail(error);
    th_cancel_install_handlers();
    if (config->compare) { /* [compare]: an A/B comparison instead of one CP-ALS */
        gboolean interrupted = FALSE;
        if (!th_compare_execute(config, &interrupted, &error)) {
            if (g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_CANCELLED))
                return report_read_interruption(error);
            return fail(error);
        }
        return interrupted ? th_cancel_exit_status() : 0;
    }

    /* Everything a config can get wrong is found before the tensor is read. */
    th_cancel_set_activity("now: nothing is written");
    if (!check_output_dir(config, &error))
        return fail(error);
    g_autoptr(th_backend) backend = open_backend(config, &error);
    if (!backend)
        return fail(error);
    th_cpd_params params;
    th_update_path path;
    if (!th_cpd_check_rank(backend, config->rank, th_config_where(config, "cpd.rank"), &error) ||
        !choose_update_path(config, backend, &params, &path, &error))
        return fail(error);

    double read_seconds = 0.0;
    g_autoptr(th_sptensor) tensor = read_tensor(config, &read_seconds, &error);
    if (!tensor) {
        if (g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_CANCELLED))
            return report_read_interruption(error);
        return fail(error);
    }
    print_tensor_summary(tensor, config->tensor_path, read_seconds);
    if (!prepare_tensor(config, tensor, &error))
        return fail(error);
    if (!load_into_backend(backend, tensor, config->rank, &error))
        return fail(error);
    print_backend_summary(backend);

    th_log(TH_LOG_INFO, "CP-ALS  rank %u, max %u iterations, tolerance %g, seed %" G_GUINT64_FORMAT
                        ", update %s%s",
           params.rank, params.max_iters, params.tolerance, params.seed, th_update_path_name(path),
           params.update == TH_UPDATE_AUTO ? " (auto)" : "");
    th_cancel_set_activity("after this iteration");
    iteration_display display = {0};
    const th_cpd_callbacks callbacks = {
        .iteration = print_iteration, .mode = show_iteration_progress, .user_data = &display};
    g_autoptr(th_cpd_result) result = th_cp_als(backend, tensor, &params, &callbacks, &error);
    th_progress_clear();
    if (!result)
        return fail(error);

    th_run_summary summary = {
        .config = config,
        .tensor = tensor,
        .read_seconds = read_seconds,
        .backend = backend,
        .result = result,
    };
    summary.total_seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    print_run_summary(backend, result, read_seconds, summary.total_seconds);
    warn_if_not_converged(config, result);
    th_cancel_set_activity("after the outputs are written");
    if (!write_outputs(config, &summary, &error))
        return fail(error);
    if (result->interrupted)
        return report_interruption(result);
    return th_cancel_requested() ? th_cancel_exit_status() : 0;
}

int main(int argc, char **argv)
{
    setlocale(LC_ALL, "");
    /* Numbers in files and reports must not follow the user's locale. */
    setlocale(LC_NUMERIC, "C");
    cli_options cli = {0};
    int status = parse_command_line(&argc, &argv, &cli);
    if (status != 0) {
        cli_options_clear(&cli);
        return status;
    }
    if (cli.quiet)
        th_log_set_level(TH_LOG_WARNING);
    if (cli.verbose)
        th_log_set_level(TH_LOG_DEBUG);

    if (cli.version) {
        printf("tensorhost %s (plugin ABI %u.%u)\n", TH_VERSION, TH_ABI_VERSION_MAJOR,
               TH_ABI_VERSION_MINOR);
    } else if (cli.list_plugins) {
        g_autoptr(th_config) config = NULL;
        if (cli.config_path) {
            GError *error = NULL;
            config = th_config_load(cli.config_path, (const char *const *)cli.overrides, &error);
            if (!config) {
                cli_options_clear(&cli);
                return fail(error);
            }
        }
        status = list_plugins(config ? config->search_path : NULL);
    } else {
        status = run_job(&cli);
    }
    cli_options_clear(&cli);
    return status;
}
