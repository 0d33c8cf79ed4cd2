/* A run as `tensorhost --config FILE` does it: load the config, check
 * everything a config can get wrong before the tensor is read, then one
 * CP-ALS (the console report, factor files and report.json) or, with a
 * [compare] section, a comparison; errors and stops end in the exit status
 * batch schedulers expect. The program (programs/tensorhost.c) only parses
 * its command line around this. */
#include "run.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <gio/gio.h> /* G_IO_ERROR_CANCELLED: an aborted write */
#include <glib/gstdio.h>

#include "base/atomic_file.h"
#include "plugin/backend.h"
#include "base/cancel.h"
#include "compare/compare.h"
#include "compare_command.h"
#include "config/config.h"
#include "console_report.h"
#include "cpd/cp_als.h"
#include "cpd/cp_apr.h"
#include "cpd/cpd_session.h"
#include "output/factor_io.h"
#include "base/log.h"
#include "base/message_text.h"
#include "base/output_set.h"
#include "plugin/plugin_loader.h"
#include "base/progress.h"
#include "output/report.h"
#include "tensor/tensor_reader.h"
#include "dist/dist.h"
#include "dist/dist_tensor.h"

enum { EXIT_USAGE = 2 };

/* Prints the one error of a failed run, on one line whatever it quotes,
 * and gives its exit status: 2 for a malformed command line (--set), 1 for
 * any other error. */
int th_run_fail(GError *error)
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

/* The factor files and report.json, swapped in as one set (output_set.h):
 * the folder then holds this run's outputs alone. */
static gboolean write_outputs(const th_config *config, th_run_summary *summary, GError **error)
{
    if (!th_make_output_dir(config->output_dir, error))
        return FALSE;
    g_autoptr(th_output_set) set =
        th_output_set_new(config->output_dir, TH_RUN_OUTPUT_NAMES, TH_RUN_REPORT_NAME);
    const unsigned formats = th_factor_format_from_name(config->output_format);
    if (config->write_factors && summary->result->factors) {
        th_progress_show(TRUE, "writing the factors to %s...", config->output_dir);
        const gint64 start = g_get_monotonic_time();
        const gboolean written = th_stage_cpd_factors(set, summary->result, formats, error);
        th_progress_clear();
        if (!written)
            return FALSE;
        summary->write_seconds = (double)(g_get_monotonic_time() - start) / 1e6;
        summary->factors_written = TRUE;
    }
    if (!th_report_stage(set, summary, error))
        return FALSE;
    /* The last moment a second stop can abort: the swap is not cut. */
    if (th_cancel_abort_requested()) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_CANCELLED, "%s: writing aborted",
                    config->output_dir);
        return FALSE;
    }
    g_autoptr(GPtrArray) removed = NULL;
    if (!th_output_set_install(set, &removed, error))
        return FALSE;
    th_log(TH_LOG_INFO, "Output  %s (%s%sreport.json)", config->output_dir,
           summary->factors_written && (formats & TH_FACTORS_TEXT) ? "mode*.mat, lambda.mat, " : "",
           summary->factors_written && (formats & TH_FACTORS_NPY) ? "mode*.npy, lambda.npy, " : "");
    th_output_set_log_removed(removed);
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

/* A bad output folder must not cost a whole decomposition or comparison:
 * `dir` (the config's `key`) exists and takes new files, or can be
 * created. Nothing is created here, so a run that fails later leaves no
 * empty folder behind. */
static gboolean check_output_dir(const th_config *config, const char *dir, const char *key,
                                 GError **error)
{
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
        const int failed = th_atomic_file_probe_folder(dir);
        if (!failed)
            return TRUE;
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(failed),
                    "cannot write into %s: %s", dir, g_strerror(failed));
    }
    blame_key(error, config, key);
    return FALSE;
}

static th_backend *open_backend(const th_config *config, GError **error)
{
    /* A model beyond CP-ALS needs the 1.4 functions (completion 1.5's too):
     * "auto" skips a plugin without them. */
    const gboolean poisson = g_strcmp0(config->model, "poisson") == 0;
    const gboolean completion = g_strcmp0(config->missing, "unlisted") == 0;
    th_backend *backend = th_backend_open_for(
        config->plugin, config->search_path, config->plugin_options,
        config->plugin_option_tables,
        poisson      ? TH_BACKEND_NEEDS_GENERALIZED
        : completion ? TH_BACKEND_NEEDS_ROW_LEAST_SQUARES
                     : TH_BACKEND_NEEDS_NOTHING,
        poisson ? "cpd.model = \"poisson\"" : "tensor.missing = \"unlisted\"", error);
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

/* How the program's warnings name things: the config's keys. */
static th_cpd_warning_terms warning_terms(const th_config *config, const char *rank_key)
{
    return (th_cpd_warning_terms){
        .tensor = config->tensor_path,
        .rank = rank_key,
        .max_iters = "cpd.max_iters",
        .tolerance = "cpd.tolerance",
    };
}

/* The run's plan: the rank and update path, checked against the plugin
 * before any work. */
static th_cpd_session *plan_run(const th_config *config, th_backend *backend, th_dist *dist,
                                GError **error)
{
    th_cpd_params params = th_cpd_params_from_config(config, config->rank);
    params.dist = dist;
    const char *where = th_config_where(config, "cpd.rank");
    g_autofree char *rank_key = g_strdup_printf("%s: cpd.rank", where);
    const th_cpd_warning_terms terms = warning_terms(config, rank_key);
    th_cpd_session *session = th_cpd_session_new(backend, &params, where, &terms, error);
    if (!session && g_error_matches(*error, TH_CPD_ERROR, TH_CPD_ERROR_UPDATE_PATH))
        blame_key(error, config, "cpd.update");
    else if (!session && g_error_matches(*error, TH_CPD_ERROR, TH_CPD_ERROR_MODEL))
        blame_key(error, config,
                  params.model == TH_MODEL_COMPLETION ? "tensor.missing" : "cpd.model");
    return session;
}

/* The tensor, read for a run of `model` (a Poisson run's reader refuses a
 * negative value on its line): the whole file, or in a distributed run
 * this process's share of it (dist_tensor.h; every process together). */
static th_sptensor *read_tensor(const th_config *config, th_cpd_model model, th_dist *dist,
                                th_dist_share_info *share, double *seconds, GError **error)
{
    const gint64 start = g_get_monotonic_time();
    th_tensor_read_options read_options = {0};
    th_cp_apr_read_options(model, &read_options);
    if (th_progress_enabled())
        read_options.progress = th_console_read_progress;
    th_cancel_set_activity("now: the read is abandoned and nothing is written");
    th_sptensor *tensor =
        th_dist_read_tensor(dist, config->tensor_path, &read_options, share, error);
    th_progress_clear();
    *seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    if (!tensor && (g_error_matches(*error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO) ||
                    g_error_matches(*error, TH_TENSOR_READER_ERROR,
                                    TH_TENSOR_READER_ERROR_NOT_BINARY)))
        blame_key(error, config, "tensor.path");
    return tensor;
}

/* What CP-ALS needs of the tensor, said before any long work (the
 * session's prepare): values scaled when their squares would overflow or
 * underflow, a norm above 0, and the warnings known now (values read as
 * zero, a rank the data cannot support). */
static gboolean prepare_tensor(const th_config *config, th_cpd_session *session,
                               th_sptensor *tensor, GError **error)
{
    const double largest = th_sptensor_max_abs(tensor);
    gboolean scaled = FALSE;
    if (!th_cpd_session_prepare(session, tensor, &scaled, error)) {
        if (g_error_matches(*error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT))
            g_prefix_error(error, "%s: ", config->tensor_path);
        else if (g_error_matches(*error, TH_CPD_ERROR, TH_CPD_ERROR_CONSTRAINTS))
            blame_key(error, config, "cpd.constraints");
        else if (g_error_matches(*error, TH_CPD_ERROR, TH_CPD_ERROR_L1))
            blame_key(error, config, "cpd.l1");
        return FALSE;
    }
    if (scaled)
        th_log(TH_LOG_INFO,
               "  values scaled by 2^%d for the computation (largest |value| %.3g); lambda "
               "is reported in the file's units",
               (int)round(log2(tensor->value_scale)), largest);
    th_cpd_log_warnings(th_cpd_session_warnings(session), 0);
    return TRUE;
}

static gboolean load_into_backend(th_cpd_session *session, th_backend *backend, GError **error)
{
    th_cancel_set_activity("after the backend has built its layouts");
    th_progress_show(TRUE, "building %s's layouts of the tensor...", th_backend_info(backend)->id);
    const gboolean ok = th_cpd_session_load(session, error);
    th_progress_clear();
    return ok;
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


/* How the constrained (and sparse) modes are updated, with where CP-ALS's
 * HALS runs: the planned `path` (the mode path: the backend's
 * als_update_nonneg, which a plugin before ABI 1.6 runs only without a
 * ridge or l1; the sweep path: inside als_sweep). */
static const char *constraints_method(const th_cpd_params *params, const th_backend *backend,
                                      th_update_path path)
{
    if (params->model == TH_MODEL_COMPLETION)
        return "(coordinate descent per row)";
    if (path == TH_UPDATE_SWEEP)
        return "(hierarchical ALS inside the sweep)";
    if (path != TH_UPDATE_MODE)
        return "(hierarchical ALS on the host)";
    if (th_cpd_regularised(params, backend->nmodes) && !th_backend_takes_abi_1_6(backend))
        return "(hierarchical ALS on the host: the plugin's als_update_nonneg predates the "
               "ridge and l1 of ABI 1.6)";
    return "(hierarchical ALS in the backend)";
}

/* ", l2 L, l1 L" of a regularised least-squares run, or "". */
static char *regularisation_summary(const th_cpd_params *params, uint32_t nmodes)
{
    if (params->model != TH_MODEL_LEAST_SQUARES || !th_cpd_regularised(params, nmodes))
        return g_strdup("");
    GString *text = g_string_new(NULL);
    g_string_append_printf(text, ", l2 %g, l1 ", params->l2);
    if (!params->l1_listed) {
        g_string_append_printf(text, "%g", th_cpd_l1(params, 0));
        return g_string_free(text, FALSE);
    }
    for (uint32_t m = 0; m < nmodes; ++m)
        g_string_append_printf(text, "%s%g", m ? "/" : "", th_cpd_l1(params, m));
    g_string_append(text, " per mode");
    return g_string_free(text, FALSE);
}

/* ", factors nonnegative (...)" for the run's header line, or "". */
static char *constraints_summary(const th_cpd_params *params, const th_backend *backend,
                                 th_update_path path)
{
    const uint32_t nmodes = backend->nmodes;
    const uint64_t modes = th_cpd_nonneg_mask(params, nmodes);
    const char *how = constraints_method(params, backend, path);
    if (modes == 0)
        return g_strdup("");
    if (modes == th_cpd_every_mode(nmodes))
        return g_strdup_printf(", factors nonnegative %s", how);
    GString *text = g_string_new(", nonnegative factors of mode");
    const char *separator = modes & (modes - 1) ? "s " : " ";
    for (uint32_t m = 0; m < nmodes; ++m)
        if (modes >> m & 1u) {
            g_string_append_printf(text, "%s%u", separator, m + 1);
            separator = ", ";
        }
    g_string_append_printf(text, " %s", how);
    return g_string_free(text, FALSE);
}

/* A second stop while the outputs are written aborts them before any is
 * swapped in: the folder keeps the previous run's outputs whole. */
static int report_write_abort(GError *error)
{
    g_autofree char *message = th_escape_control(error->message);
    fprintf(stderr, "tensorhost: aborted while writing the outputs (%s); the output folder "
                    "keeps the previous run's outputs, unchanged\n",
            message);
    g_error_free(error);
    return th_cancel_exit_status();
}

/* The exit of a run that failed before its iterations, once the
 * processes agreed on it (th_dist_agree): the process whose error it is
 * prints it; another ends quietly, with the same status. */
static int fail_agreed(GError *error)
{
    if (g_error_matches(error, TH_DIST_ERROR, TH_DIST_ERROR_ELSEWHERE)) {
        g_error_free(error);
        return 1;
    }
    return th_run_fail(error);
}

/* A failure one process of several meets alone while the others wait in
 * a collective: it says which process, and ends the job (dist.h). */
static G_NORETURN void abort_processes(th_dist *dist, GError *error)
{
    g_autofree char *message = th_escape_control(error->message);
    fprintf(stderr, "tensorhost: error: rank %u of %u processes: %s; every process stops, "
                    "nothing is written\n",
            th_dist_rank(dist), th_dist_size(dist), message);
    g_error_free(error);
    th_dist_abort(dist, 1);
}

/* What report.json's "processes" lists of this process. */
static th_process_record process_record(th_dist *dist, const th_sptensor *share,
                                        const th_dist_share_info *info, double read_seconds,
                                        const th_backend_facts *facts,
                                        const th_cpd_result *result)
{
    th_process_record record = {
        .rank = th_dist_rank(dist),
        .first_nonzero = info->first,
        .nnz = share->nnz,
        .read_seconds = read_seconds,
        .preprocess_seconds = facts->load_seconds,
        .cpd_seconds = result->total_seconds,
    };
    g_strlcpy(record.host, th_dist_host(dist), sizeof record.host);
    g_strlcpy(record.gpus, th_dist_gpus(dist), sizeof record.gpus);
    for (uint32_t m = 0; m < result->nmodes; ++m)
        record.mttkrp_seconds += MAX(result->mttkrp_seconds[m], 0.0);
    const th_dist_traffic traffic = th_dist_traffic_so_far(dist);
    record.collective_seconds = traffic.seconds;
    record.collective_calls = traffic.calls;
    record.collective_bytes = traffic.bytes;
    return record;
}

/* The run of a loaded config, by one process or by each of several
 * (`dist`: mpirun, dist.h): every failure before the iterations is agreed
 * at the next of three points (the plan, the read, the load), so that it
 * is printed once and every process ends. */
/* How a distributed run's MTTKRPs were made whole (report.json's
 * processes.exchange). */
static const char *exchange_of(const th_backend *backend)
{
    if (backend->owned_rows)
        return backend->planned_process_sums ? "backend_owned_rows" : "owned_rows";
    return backend->planned_process_sums ? "backend_sums" : "host_sums";
}

static int run_config(const th_config *config, th_dist *dist, gint64 start)
{
    GError *error = NULL;
    const gboolean root = th_dist_rank(dist) == 0;
    th_cancel_install_handlers();
    if (config->compare) { /* [compare]: an A/B comparison instead of one CP-ALS */
        if (!check_output_dir(config, config->compare->output_dir, "compare.output.dir", &error))
            return th_run_fail(error);
        gboolean interrupted = FALSE;
        if (!th_compare_execute(config, &interrupted, &error)) {
            if (g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_CANCELLED))
                return report_read_interruption(error);
            return th_run_fail(error);
        }
        return interrupted ? th_cancel_exit_status() : 0;
    }

    /* Everything a config can get wrong is found before the tensor is read;
     * rank 0 alone writes, so it alone checks the output folder. */
    th_cancel_set_activity("now: nothing is written");
    g_autoptr(th_backend) backend = NULL;
    g_autoptr(th_cpd_session) session = NULL;
    if ((!root || check_output_dir(config, config->output_dir, "output.dir", &error)) &&
        (backend = open_backend(config, &error)) != NULL)
        session = plan_run(config, backend, dist, &error);
    if (!th_dist_agree(dist, &error))
        return fail_agreed(error);
    const th_cpd_params params = *th_cpd_session_params(session);

    double read_seconds = 0.0;
    th_dist_share_info share = {0};
    g_autoptr(th_sptensor) tensor =
        read_tensor(config, params.model, dist, &share, &read_seconds, &error);
    if (!tensor) {
        if (g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_CANCELLED))
            return report_read_interruption(error);
        return fail_agreed(error);
    }
    th_tensor_facts whole;
    if (!th_dist_tensor_facts(dist, tensor, &whole, &error))
        abort_processes(dist, error);
    th_console_tensor_summary(&whole, config->tensor_path, read_seconds);
    if (dist) {
        g_autofree char *threads =
            th_dist_threads(dist)
                ? g_strdup_printf(", %u OpenMP %s each (their share of the host's cores; "
                                  "OMP_NUM_THREADS sets it)",
                                  th_dist_threads(dist),
                                  th_plural(th_dist_threads(dist), "thread", "threads"))
                                  : g_strdup("");
        g_autofree char *gpus =
            th_dist_gpus(dist)[0] ? g_strdup_printf(", GPUs %s (CUDA_VISIBLE_DEVICES: its share "
                                                    "of the host's)",
                                                    th_dist_gpus(dist))
                                  : g_strdup("");
        th_log(TH_LOG_INFO, "  %u processes (%s), each reading its share%s; rank 0: %" G_GUINT64_FORMAT
                            " nonzeros%s",
               th_dist_size(dist), th_dist_library(dist), threads, tensor->nnz, gpus);
    }
    if (prepare_tensor(config, session, tensor, &error))
        (void)load_into_backend(session, backend, &error);
    if (!th_dist_agree(dist, &error))
        return fail_agreed(error);
    {
        g_autoptr(th_backend_facts) loaded = th_backend_facts_take(backend);
        th_console_backend_summary(loaded);
    }

    g_autofree char *constraints_text =
        constraints_summary(&params, backend, backend->update_path);
    g_autofree char *regularisation_text = regularisation_summary(&params, backend->nmodes);
    if (params.model == TH_MODEL_POISSON)
        th_log(TH_LOG_INFO,
               "CP-APR  model poisson (multiplicative updates), rank %u, max %u outer %s, "
               "%u inner per mode, KKT tolerance %g, kappa %g, kappa_tolerance %g, epsilon %g, "
               "seed %" G_GUINT64_FORMAT,
               params.rank, params.max_iters,
               th_plural(params.max_iters, "iteration", "iterations"),
               params.apr.max_inner_iters, params.tolerance, params.apr.kappa,
               params.apr.kappa_tolerance, params.apr.epsilon, params.seed);
    else if (params.model == TH_MODEL_COMPLETION)
        th_console_completion_plan(&params, th_cpd_session_tensor(session),
                                   th_cpd_session_held_out(session), constraints_text);
    else
        th_log(TH_LOG_INFO,
               "CP-ALS  rank %u, max %u %s, tolerance %g, seed %" G_GUINT64_FORMAT
               ", update %s%s%s%s",
               params.rank, params.max_iters,
               th_plural(params.max_iters, "iteration", "iterations"), params.tolerance,
               params.seed, th_update_path_name(backend->update_path),
               params.update == TH_UPDATE_AUTO ? " (auto)" : "", regularisation_text,
               constraints_text);
    th_cancel_set_activity("after this iteration");
    /* Under mpirun at most 20 iteration lines a second (console_report.h). */
    th_console_iteration_display display = {.min_line_gap = dist ? 50000 : 0};
    const th_cpd_callbacks callbacks = {
        .iteration = th_console_iteration,
        .mode = th_console_iteration_progress,
        .phase = th_console_phase,
        .user_data = &display};
    const guint tensor_warnings = th_cpd_session_warnings(session)->len;
    g_autoptr(th_cpd_result) result = th_cpd_session_run(session, &callbacks, &error);
    th_progress_clear();
    if (!result) {
        /* A fit that is not finite comes out of the same bits on every
         * process; any other failure is this process's alone. */
        if (dist && !g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_NOT_FINITE))
            abort_processes(dist, error);
        (void)th_dist_agree(dist, &error);
        return fail_agreed(error);
    }

    /* From here on the outputs read these facts, not the live plugin. */
    g_autoptr(th_backend_facts) facts = th_backend_facts_take(backend);
    g_autofree th_process_record *records = NULL;
    th_run_processes processes = {0};
    if (dist) {
        const th_process_record record =
            process_record(dist, tensor, &share, read_seconds, facts, result);
        records = root ? g_new0(th_process_record, th_dist_size(dist)) : NULL;
        if (!th_dist_gather(dist, &record, sizeof record, records, &error))
            abort_processes(dist, error);
        if (!root) /* rank 0 writes the outputs */
            return result->interrupted && th_cancel_requested() ? th_cancel_exit_status() : 0;
        processes = (th_run_processes){.count = th_dist_size(dist),
                                       .mpi_library = th_dist_library(dist),
                                       .exchange = exchange_of(backend),
                                       .records = records};
    }
    th_run_summary summary = {
        .config = config,
        .tensor = &whole,
        .read_seconds = read_seconds,
        .backend = facts,
        .result = result,
        .processes = dist ? &processes : NULL,
    };
    summary.total_seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    th_console_run_summary(facts, result, read_seconds, summary.total_seconds);
    th_cpd_log_warnings(th_cpd_session_warnings(session), tensor_warnings); /* what the run found */
    th_cancel_set_activity("after the outputs are written");
    th_cancel_defer_abort(TRUE);
    const gboolean written = write_outputs(config, &summary, &error);
    th_cancel_defer_abort(FALSE);
    if (!written) {
        if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
            return report_write_abort(error);
        return th_run_fail(error);
    }
    if (result->interrupted)
        return report_interruption(result);
    if (th_cancel_requested()) {
        /* The stop came once the run had ended: nothing was cut, but the
         * caller (a shell loop, a scheduler) still learns of the stop. */
        th_log(TH_LOG_WARNING,
               "the stop came after the last iteration: the run is complete (status %s) and "
               "so are its outputs",
               th_run_status(result));
        return th_cancel_exit_status();
    }
    return 0;
}

int th_run_file(const char *config_path, const char *const *overrides)
{
    const gint64 start = g_get_monotonic_time();
    GError *error = NULL;
    /* Launched by mpirun, mpiexec or srun as several processes: MPI first,
     * so that every later failure is agreed and said once. */
    th_dist *dist = th_dist_start(&error);
    if (g_error_matches(error, TH_DIST_ERROR, TH_DIST_ERROR_LAUNCH) &&
        th_dist_announced_rank() > 0) { /* every process fails alike: said once */
        g_error_free(error);
        return 1;
    }
    if (error)
        return th_run_fail(error);
    if (th_dist_rank(dist) > 0) { /* one console: rank 0's */
        th_log_set_level(TH_LOG_ERROR);
        th_cancel_set_quiet(TRUE);
    }
    if (dist) /* mpirun stops reading the console once it forwards a stop */
        th_log_hold_console_on_stop(1);
    g_autoptr(th_config) config = th_config_load(config_path, overrides, &error);
    if (config && dist && config->compare)
        g_set_error(&error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_CONFLICT,
                    "%s: [compare] runs its backends one after another in one process; run it "
                    "without mpirun, mpiexec or srun",
                    config_path);
    int status;
    if (!th_dist_agree(dist, &error)) /* the same config everywhere: rank 0 says what is wrong */
        status = fail_agreed(error);
    else
        status = run_config(config, dist, start);
    th_dist_finish(dist);
    return status;
}
