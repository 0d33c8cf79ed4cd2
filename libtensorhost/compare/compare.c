/* The comparison runner; see compare.h for what it promises. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "compare/compare.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "cpd/cp_als.h"
#include "cpd/cp_apr.h"
#include "cpd/cpd_session.h"
#include "base/cancel.h"
#include "base/log.h"
#include "base/message_text.h"
#include "tensor/synth.h"
#include "tensor/tensor_reader.h"

G_DEFINE_QUARK(th-compare-error-quark, th_compare_error)

/* Nanosecond clock: a small tensor's MTTKRP takes tens of microseconds,
 * below what g_get_monotonic_time() resolves well. */
static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const th_compare_stat unmeasured = {-1.0, -1.0, -1.0};

static char *render_options(const GPtrArray *options)
{
    GString *text = g_string_new(NULL);
    for (guint i = 0; options && i < options->len; i++) {
        const th_config_option *option = g_ptr_array_index(options, i);
        g_string_append_printf(text, "%s%s=%s", i ? " " : "", option->key, option->value);
    }
    return g_string_free(text, FALSE);
}

static th_compare_run *run_new(const th_compare_backend_config *config, gboolean is_baseline,
                               uint32_t nmodes)
{
    th_compare_run *run = g_new0(th_compare_run, 1);
    run->label = g_strdup(config->label);
    run->plugin = g_strdup(config->plugin);
    run->plugin_id = g_strdup("");
    run->options = render_options(config->options);
    run->is_baseline = is_baseline;
    run->nmodes = nmodes;
    run->total_host = run->total_backend = unmeasured;
    run->seconds_per_iteration = unmeasured;
    run->speedup = run->speedup_host = run->speedup_backend = NAN;
    run->max_error = NAN;
    run->fit = run->fit_difference = NAN;
    run->log_likelihood = run->log_likelihood_difference = run->kkt_violation = NAN;
    run->train_rmse = run->holdout_rmse = NAN;
    return run;
}

static void run_set_status(th_compare_run *run, th_compare_status status, const char *reason)
{
    run->status = status;
    g_free(run->reason);
    run->reason = g_strdup(reason);
}

static void run_alloc_modes(th_compare_run *run)
{
    run->modes = g_new0(th_compare_mode, run->nmodes);
    for (uint32_t m = 0; m < run->nmodes; m++) {
        run->modes[m].host = run->modes[m].backend = unmeasured;
        run->modes[m].error = NAN;
        run->modes[m].speedup = run->modes[m].speedup_host = run->modes[m].speedup_backend = NAN;
    }
}

/* ---- Tensors -------------------------------------------------------------- */

/* `regularised`: the parameters of a regularised CP-ALS job, whose
 * tensors are fitted as read; NULL otherwise. */
static th_sptensor *read_input(const th_compare_tensor_config *input, th_cpd_model model,
                               const th_cpd_params *regularised, th_compare_tensor *out,
                               GError **error)
{
    double start = now_seconds();
    th_sptensor *tensor = NULL;
    if (input->synthetic) {
        const th_synth_preset *preset = th_synth_find_preset(input->synthetic);
        if (!preset) { /* the config checked it; a preset renamed since is still an error */
            g_set_error(error, TH_COMPARE_ERROR, TH_COMPARE_ERROR_BASELINE,
                        "%s: no synthetic preset named '%s'", input->where, input->synthetic);
            return NULL;
        }
        th_synth_params params;
        th_synth_params_from_preset(&params, preset, input->seed);
        if (input->nnz > 0)
            params.nnz = input->nnz;
        th_log(TH_LOG_INFO, "Tensor  %s: generating %" G_GUINT64_FORMAT " %s", input->label,
               params.nnz, th_plural(params.nnz, "nonzero", "nonzeros"));
        tensor = th_synth_generate(&params, error);
        out->source = th_synth_describe(&params);
        out->synthetic = TRUE;
    } else {
        th_log(TH_LOG_INFO, "Tensor  %s: reading %s", input->label, input->path);
        th_tensor_read_options read_options = {0}; /* Poisson: a negative value's line */
        th_cp_apr_read_options(model, &read_options);
        tensor = th_tensor_read_file(input->path, &read_options, error);
        out->source = g_strdup(input->path);
    }
    out->read_seconds = now_seconds() - start;
    /* The session's tensor step, once for every backend: extreme values
     * scaled (least squares; regularised: refused, as the values are
     * fitted as read), values checked >= 0 (Poisson), a norm-0 tensor
     * refused before any backend works on it. */
    if (tensor) {
        const gboolean prepared =
            regularised ? th_cpd_check_tensor(tensor, error) &&
                              th_cpd_check_regularised_values(regularised, tensor, error)
                        : th_cpd_prepare_tensor_for(tensor, model, NULL, error);
        if (!prepared) {
            g_prefix_error(error, "%s: %s: ", input->where, input->label);
            th_sptensor_free(g_steal_pointer(&tensor));
        }
    }
    if (tensor) {
        out->nmodes = tensor->nmodes;
        out->nnz = tensor->nnz;
        out->dims = g_memdup2(tensor->dims, sizeof(th_index) * tensor->nmodes);
    }
    return tensor;
}

/* ---- One backend ------------------------------------------------------- */

/* Where opening a backend stopped, to tell "cannot run here" from a defect. */
typedef enum { STAGE_OPEN, STAGE_LOAD, STAGE_SET } open_stage;

/* A comparison's backend says nothing of the tensor's warnings: the words
 * are its keys'. */
static const th_cpd_warning_terms compare_terms = {
    .tensor = "the tensor", .rank = "rank", .max_iters = "cpd.max_iters",
    .tolerance = "cpd.tolerance"};

/* Opens the backend and runs the session's steps up to the load (the
 * tensor is prepared: read_input scaled and checked it), then sets the
 * initial factors. The session (in *session) borrows the backend. */
static th_backend *open_backend(const th_compare_backend_config *config, GPtrArray *search_path,
                                const th_sptensor *tensor, const th_cpd_params *params,
                                double *const *factors, th_cpd_session **session,
                                open_stage *stage, GError **error)
{
    *stage = STAGE_OPEN;
    g_autoptr(th_backend) backend =
        th_backend_open(config->plugin, search_path, config->options, NULL, error);
    if (!backend)
        return NULL;
    *stage = STAGE_LOAD;
    g_autoptr(th_cpd_session) planned =
        th_cpd_session_new(backend, params, NULL, &compare_terms, error);
    if (!planned || !th_cpd_session_prepare_copy(planned, tensor, error) ||
        !th_cpd_session_load(planned, error))
        return NULL;
    *stage = STAGE_SET;
    for (uint32_t m = 0; m < tensor->nmodes; m++) {
        if (!th_backend_set_factor(backend, m, factors[m], error))
            return NULL;
    }
    *session = g_steal_pointer(&planned);
    return g_steal_pointer(&backend);
}

th_backend *th_compare_open_backend(const th_compare_backend_config *backend,
                                    GPtrArray *search_path, const th_sptensor *tensor,
                                    uint32_t rank, double *const *factors, GError **error)
{
    open_stage stage;
    const th_cpd_params params = {.rank = rank};
    g_autoptr(th_cpd_session) session = NULL;
    return open_backend(backend, search_path, tensor, &params, factors, &session, &stage, error);
}

static gboolean error_has_status(const GError *error, th_status status)
{
    return g_error_matches(error, TH_PLUGIN_STATUS_ERROR, status);
}

/* A backend that is not installed, finds no device, or cannot hold this
 * tensor is not wrong, just not runnable here. */
static gboolean cannot_run_here(const GError *error, open_stage stage)
{
    if (stage == STAGE_OPEN)
        return g_error_matches(error, TH_PLUGIN_ERROR, TH_PLUGIN_ERROR_NOT_FOUND)
               || error_has_status(error, TH_ERR_NO_DEVICE);
    if (stage == STAGE_LOAD)
        return error_has_status(error, TH_ERR_UNSUPPORTED)
               || error_has_status(error, TH_ERR_OUT_OF_MEMORY)
               || g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_RANK)
               /* a plugin without the functions the model needs (ABI 1.4) */
               || g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_MODEL);
    return FALSE;
}

static guint64 mode_size(const th_sptensor *tensor, uint32_t rank, uint32_t mode)
{
    return (guint64)tensor->dims[mode] * rank;
}

/* What the comparison runs on: one tensor, its initial factors, the
 * baseline's results of every mode once the baseline has run. */
typedef struct tensor_session {
    const th_config *config;
    const th_compare_config *compare;
    th_compare_result *result;
    const th_sptensor *tensor;
    const char *label;
    uint32_t rank;
    double **factors;    /* initial, from cpd.seed */
    double **reference;  /* the baseline's MTTKRP per mode; NULL until it ran */
    double baseline_fit; /* cpd */
    double baseline_log_likelihood; /* cpd, Poisson */
    /* [backend]: why it could not even be opened on an earlier tensor (not
     * installed, no device); it is not tried again. */
    GPtrArray *open_skips;
} tensor_session;

static void add_failure(tensor_session *s, th_compare_run *run, th_compare_status status,
                        const char *message)
{
    char *line = g_strdup_printf("backend '%s' on tensor '%s': %s", run->label, s->label, message);
    g_ptr_array_add(s->result->failures, line); /* reported with the table and the exit */
    run_set_status(run, status, message);
}

/* The backend must hold exactly the factors it was given: the comparison
 * rests on every backend starting from the same ones. */
static gboolean check_factors(tensor_session *s, th_backend *backend, th_compare_run *run,
                              GError **error)
{
    for (uint32_t m = 0; m < s->tensor->nmodes; m++) {
        guint64 n = mode_size(s->tensor, s->rank, m);
        g_autofree double *held = g_new(double, n);
        if (!th_backend_get_factor(backend, m, held, error))
            return FALSE;
        double difference = th_compare_relative_error(held, s->factors[m], n);
        if (!(difference <= s->compare->tolerance)) {
            g_autofree char *message =
                g_strdup_printf("mode %u: the factor read back after set_factor differs from "
                                "the one set by relative error %.3g > tolerance %g",
                                m + 1, difference, s->compare->tolerance);
            add_failure(s, run, TH_COMPARE_MISMATCH, message);
            return TRUE;
        }
    }
    return TRUE;
}

/* One MTTKRP per mode, compared with the baseline's (or, for the baseline,
 * kept as the reference). Every mode is checked, so the table shows each
 * mode's error; the first mode beyond the tolerance is the failure. */
static gboolean verify(tensor_session *s, th_backend *backend, th_compare_run *run,
                       GError **error)
{
    const uint32_t nmodes = s->tensor->nmodes;
    gboolean keep = run->is_baseline;
    if (keep)
        s->reference = g_new0(double *, nmodes);
    g_autofree char *first_failure = NULL;
    run->max_error = 0.0;
    for (uint32_t m = 0; m < nmodes; m++) {
        guint64 n = mode_size(s->tensor, s->rank, m);
        double *out = g_new(double, n);
        if (!th_backend_mttkrp(backend, m, error)
            || !th_backend_get_mttkrp_result(backend, m, out, error)) {
            g_free(out);
            return FALSE;
        }
        if (keep) {
            s->reference[m] = out;
            run->modes[m].error = 0.0;
            continue;
        }
        double e = th_compare_relative_error(out, s->reference[m], n);
        g_free(out);
        run->modes[m].error = e;
        run->max_error = isnan(e) || isnan(run->max_error) ? NAN : MAX(run->max_error, e);
        if (!(e <= s->compare->tolerance) && !first_failure)
            first_failure = g_strdup_printf(
                "mode %u: relative Frobenius error %.3g vs baseline '%s' exceeds tolerance %g",
                m + 1, e, s->compare->baseline, s->compare->tolerance);
    }
    if (first_failure)
        add_failure(s, run, TH_COMPARE_MISMATCH, first_failure);
    return TRUE;
}

/* The backend's own account after its runs: schemes, device, memory. */
/* Samples of one timed quantity per mode and for the sum over modes. */
typedef struct samples {
    uint32_t nmodes, count, capacity;
    double *host;     /* [nmodes][capacity] */
    double *backend;  /* same; < 0 where the backend does not time */
    double *total_host, *total_backend, *per_iteration;
} samples;

static void samples_init(samples *x, uint32_t nmodes, uint32_t capacity)
{
    x->nmodes = nmodes;
    x->count = 0;
    x->capacity = capacity;
    x->host = g_new(double, (gsize)nmodes * capacity);
    x->backend = g_new(double, (gsize)nmodes * capacity);
    x->total_host = g_new(double, capacity);
    x->total_backend = g_new(double, capacity);
    x->per_iteration = g_new(double, capacity);
}

static void samples_clear(samples *x)
{
    g_free(x->host);
    g_free(x->backend);
    g_free(x->total_host);
    g_free(x->total_backend);
    g_free(x->per_iteration);
}

/* Sum of the modes' times, or -1 when one of them was not measured: a
 * partial sum would look like a faster backend. */
static double add_measured(double total, double value)
{
    return total < 0.0 || value < 0.0 ? -1.0 : total + value;
}

/* Records one run of every mode: host[m], backend[m] (< 0: not timed; the
 * host's time is missing for a cpd run whose MTTKRPs ran inside als_sweep). */
static void samples_add(samples *x, const double *host, const double *backend,
                        double per_iteration)
{
    uint32_t k = x->count++;
    double total_host = 0.0, total_backend = 0.0;
    for (uint32_t m = 0; m < x->nmodes; m++) {
        x->host[(gsize)m * x->capacity + k] = host[m];
        x->backend[(gsize)m * x->capacity + k] = backend[m];
        total_host = add_measured(total_host, host[m]);
        total_backend = add_measured(total_backend, backend[m]);
    }
    x->total_host[k] = total_host;
    x->total_backend[k] = total_backend;
    x->per_iteration[k] = per_iteration;
}

/* A time counts only when it was measured on every run (the backend's own
 * timer may be missing; so may the host's, on the sweep path of cpd). */
static th_compare_stat measured_stat(double *values, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        if (values[k] < 0.0)
            return unmeasured;
    }
    return th_compare_stat_of(values, n);
}

static void samples_summarise(samples *x, th_compare_run *run, gboolean per_iteration)
{
    for (uint32_t m = 0; m < x->nmodes; m++) {
        run->modes[m].host = measured_stat(x->host + (gsize)m * x->capacity, x->count);
        run->modes[m].backend = measured_stat(x->backend + (gsize)m * x->capacity, x->count);
    }
    run->total_host = measured_stat(x->total_host, x->count);
    run->total_backend = measured_stat(x->total_backend, x->count);
    if (per_iteration)
        run->seconds_per_iteration = th_compare_stat_of(x->per_iteration, x->count);
}

static gboolean interrupted(tensor_session *s, th_compare_run *run)
{
    if (!th_cancel_requested())
        return FALSE;
    s->result->interrupted = TRUE;
    run_set_status(run, TH_COMPARE_SKIPPED, "interrupted (Ctrl-C)");
    return TRUE;
}

/* What one pass measures: per mode the host's time and the backend's own
 * (< 0: not reported), and the seconds per iteration (< 0: none). `*done`
 * ends the passes early without an error (a CP-ALS run stopped on
 * request). */
typedef struct pass_times {
    double *host, *own;
    double per_iteration;
    gboolean done;
} pass_times;

typedef gboolean (*measure_pass)(tensor_session *s, void *subject, th_compare_run *run,
                                 pass_times *times, GError **error);

/* The comparison's one timing loop: `warmup` passes, then `repeats` timed
 * ones, summarised into the run (medians, min, max); a stop request ends it
 * between passes. */
static gboolean time_passes(tensor_session *s, th_compare_run *run, measure_pass measure,
                            void *subject, gboolean per_iteration, GError **error)
{
    const uint32_t nmodes = s->tensor->nmodes;
    const uint32_t warmup = s->compare->warmup, repeats = s->compare->repeats;
    samples x;
    samples_init(&x, nmodes, repeats);
    g_autofree double *host = g_new(double, nmodes);
    g_autofree double *own = g_new(double, nmodes);
    gboolean ok = TRUE;
    for (uint32_t pass = 0; ok && pass < warmup + repeats; pass++) {
        if (interrupted(s, run))
            break;
        pass_times times = {.host = host, .own = own, .per_iteration = -1.0};
        ok = measure(s, subject, run, &times, error);
        if (!ok || times.done)
            break;
        if (pass >= warmup)
            samples_add(&x, host, own, times.per_iteration);
    }
    if (ok && run->status == TH_COMPARE_OK)
        samples_summarise(&x, run, per_iteration);
    samples_clear(&x);
    return ok;
}

/* job = "mttkrp": a pass is one MTTKRP of every mode. */
static gboolean measure_mttkrps(tensor_session *s, void *subject, th_compare_run *run,
                                pass_times *times, GError **error)
{
    (void)run;
    th_backend *backend = subject;
    for (uint32_t m = 0; m < s->tensor->nmodes; m++) {
        double start = now_seconds();
        if (!th_backend_mttkrp(backend, m, error))
            return FALSE;
        times->host[m] = now_seconds() - start;
        th_mode_info info;
        g_autoptr(GError) ignored = NULL;
        times->own[m] = th_backend_mode_info(backend, m, &info, &ignored)
                            ? info.last_mttkrp_seconds
                            : -1.0;
    }
    return TRUE;
}

double th_compare_iteration_seconds(const th_cpd_result *cpd)
{
    const guint n = cpd->iterations->len;
    if (n == 0)
        return cpd->total_seconds;
    g_autofree double *seconds = g_new(double, n);
    for (guint k = 0; k < n; ++k)
        seconds[k] = g_array_index(cpd->iterations, th_cpd_iteration, k).seconds;
    return th_compare_stat_of(seconds, n).median;
}

/* job = "cpd": a pass is a whole CPD run of cpd.model: CP-ALS (each starts
 * from the same factors, made from cpd.seed by th_cp_als, updated as
 * cpd.update says) or CP-APR (the same seed's factors, lambda ones: the
 * same initial model on every backend; its MTTKRPs are the generalized
 * ones); the final fit, and for Poisson the log-likelihood, KKT violation
 * and inner iterations, are kept;
 * MTTKRP times are means per iteration, the seconds per iteration each
 * run's median iteration (th_compare_iteration_seconds). A backend that
 * runs whole iterations through als_sweep has no host time per MTTKRP: its
 * host times stay "not measured" (and so does its host-timed speedup); its
 * own timer's per-mode times and the seconds per iteration still compare. */
static gboolean measure_cpd(tensor_session *s, void *subject, th_compare_run *run,
                            pass_times *times, GError **error)
{
    th_cpd_session *session = subject;
    g_autoptr(th_cpd_result) cpd = th_cpd_session_run(session, NULL, error);
    if (!cpd)
        return FALSE;
    if (cpd->interrupted) {
        (void)interrupted(s, run);
        times->done = TRUE;
        return TRUE;
    }
    const double iterations = MAX(1.0, (double)cpd->iterations->len);
    for (uint32_t m = 0; m < s->tensor->nmodes; m++) {
        times->host[m] =
            cpd->mttkrp_seconds[m] < 0.0 ? -1.0 : cpd->mttkrp_seconds[m] / iterations;
        times->own[m] = cpd->mttkrp_device_seconds[m] < 0.0
                            ? -1.0
                            : cpd->mttkrp_device_seconds[m] / iterations;
    }
    times->per_iteration = th_compare_iteration_seconds(cpd);
    run->fit = cpd->fit;
    run->iterations = cpd->iterations->len;
    if (cpd->model == TH_MODEL_COMPLETION) {
        run->train_rmse = cpd->completion.train_rmse;
        run->holdout_rmse = cpd->completion.holdout_rmse;
    }
    if (cpd->model == TH_MODEL_POISSON) {
        run->log_likelihood = cpd->log_likelihood;
        run->kkt_violation = cpd->kkt_violation;
        run->inner_iterations = 0;
        for (guint k = 0; k < cpd->iterations->len; ++k)
            run->inner_iterations +=
                g_array_index(cpd->iterations, th_cpd_iteration, k).inner_iterations;
    }
    return TRUE;
}

/* The CPD runs timed, and the final model against the baseline's: its fit
 * (least squares) or its log-likelihood, relative to the baseline's
 * (Poisson: the model's objective, whose size is the data's). */
static gboolean time_cpd(tensor_session *s, th_cpd_session *session, th_compare_run *run,
                         GError **error)
{
    if (!time_passes(s, run, measure_cpd, session, TRUE, error))
        return FALSE;
    if (run->status != TH_COMPARE_OK)
        return TRUE;
    const gboolean poisson = s->result->model == TH_MODEL_POISSON;
    if (run->is_baseline) {
        s->baseline_fit = run->fit;
        s->baseline_log_likelihood = run->log_likelihood;
        run->fit_difference = 0.0;
        run->log_likelihood_difference = poisson ? 0.0 : NAN;
        return TRUE;
    }
    run->fit_difference = run->fit - s->baseline_fit;
    if (poisson) {
        run->log_likelihood_difference = (run->log_likelihood - s->baseline_log_likelihood) /
                                         fabs(s->baseline_log_likelihood);
        if (!(fabs(run->log_likelihood_difference) <= s->compare->tolerance)) {
            g_autofree char *message = g_strdup_printf(
                "final log-likelihood %.12g differs from baseline '%s' (%.12g) by %.3g "
                "relative, beyond tolerance %g",
                run->log_likelihood, s->compare->baseline, s->baseline_log_likelihood,
                fabs(run->log_likelihood_difference), s->compare->tolerance);
            add_failure(s, run, TH_COMPARE_MISMATCH, message);
        }
        return TRUE;
    }
    if (!(fabs(run->fit_difference) <= s->compare->tolerance)) {
        g_autofree char *message = g_strdup_printf(
            "final fit %.9f differs from baseline '%s' (%.9f) by %.3g, beyond tolerance %g",
            run->fit, s->compare->baseline, s->baseline_fit, fabs(run->fit_difference),
            s->compare->tolerance);
        add_failure(s, run, TH_COMPARE_MISMATCH, message);
    }
    return TRUE;
}

/* Open, load, set, check, verify, time, close: one backend on one tensor.
 * FALSE (with error) only for a baseline that cannot run; everything else
 * lands in the run's status. */
static gboolean run_backend(tensor_session *s, GPtrArray *runs, guint index, GError **error)
{
    th_compare_run *run = g_ptr_array_index(runs, index);
    const th_compare_backend_config *config = g_ptr_array_index(s->compare->backends, index);
    if (s->result->interrupted) {
        run_set_status(run, TH_COMPARE_SKIPPED, "interrupted (Ctrl-C) before it ran");
        return TRUE;
    }
    const char *known_skip = g_ptr_array_index(s->open_skips, index);
    if (known_skip) {
        run_set_status(run, TH_COMPARE_SKIPPED, known_skip);
        return TRUE;
    }
    th_log(TH_LOG_INFO, "Backend %s (%s)%s", run->label, config->plugin,
           run->is_baseline ? ", the baseline" : "");
    g_autoptr(GError) local = NULL;
    open_stage stage;
    const th_cpd_params params = th_cpd_params_from_config(s->config, s->rank);
    g_autoptr(th_backend) backend = NULL;
    g_autoptr(th_cpd_session) session = NULL; /* borrows the backend: freed first */
    backend = open_backend(config, s->config->search_path, s->tensor, &params, s->factors,
                           &session, &stage, &local);
    if (backend) {
        g_free(run->plugin_id);
        run->plugin_id = g_strdup(th_backend_info(backend)->id);
        run_alloc_modes(run);
        gboolean is_cpd = strcmp(s->compare->job, "cpd") == 0;
        if (check_factors(s, backend, run, &local) && run->status == TH_COMPARE_OK
            && verify(s, backend, run, &local) && run->status == TH_COMPARE_OK)
            (void)(is_cpd ? time_cpd(s, session, run, &local)
                          : time_passes(s, run, measure_mttkrps, backend, FALSE, &local));
        th_backend_facts_free(run->facts);
        run->facts = th_backend_facts_take(backend);
    }
    /* A call given up on a stop request (a plugin polling is_cancelled) is
     * the stop, not the backend's failure. */
    if (local && g_error_matches(local, TH_PLUGIN_STATUS_ERROR, TH_ERR_CANCELLED)) {
        s->result->interrupted = TRUE;
        run_set_status(run, TH_COMPARE_SKIPPED, "interrupted (Ctrl-C)");
        return TRUE;
    }
    if (run->is_baseline && (local || run->status != TH_COMPARE_OK) && !s->result->interrupted) {
        g_set_error(error, TH_COMPARE_ERROR, TH_COMPARE_ERROR_BASELINE,
                    "the baseline '%s' cannot run on tensor '%s': %s", run->label, s->label,
                    local ? local->message : run->reason);
        return FALSE;
    }
    if (local) {
        if (!backend && cannot_run_here(local, stage)) {
            run_set_status(run, TH_COMPARE_SKIPPED, local->message);
            th_log(TH_LOG_WARNING, "backend '%s' skipped: %s", run->label, local->message);
            if (stage == STAGE_OPEN)
                g_ptr_array_index(s->open_skips, index) = g_strdup(local->message);
        } else {
            add_failure(s, run, TH_COMPARE_FAILED, local->message);
        }
    }
    return TRUE;
}

static double ratio(double baseline, double value)
{
    return baseline > 0.0 && value > 0.0 ? baseline / value : NAN;
}

static void compute_speedups(th_compare_tensor *tensor, const th_compare_run *baseline,
                             gboolean by_backend)
{
    for (guint i = 0; i < tensor->runs->len; i++) {
        th_compare_run *run = g_ptr_array_index(tensor->runs, i);
        if (run->status != TH_COMPARE_OK || baseline->status != TH_COMPARE_OK)
            continue;
        run->speedup_host = ratio(baseline->total_host.median, run->total_host.median);
        run->speedup_backend = ratio(baseline->total_backend.median, run->total_backend.median);
        run->speedup = by_backend ? run->speedup_backend : run->speedup_host;
        for (uint32_t m = 0; m < run->nmodes; m++) {
            th_compare_mode *mode = &run->modes[m];
            const th_compare_mode *base = &baseline->modes[m];
            mode->speedup_host = ratio(base->host.median, mode->host.median);
            mode->speedup_backend = ratio(base->backend.median, mode->backend.median);
            mode->speedup = by_backend ? mode->speedup_backend : mode->speedup_host;
        }
    }
}

/* One run a backend in the tensor's runs, in config order, the baseline's
 * marked; returns the baseline's index. */
static guint add_runs(th_compare_tensor *tensor, const th_compare_config *compare,
                      uint32_t nmodes)
{
    guint baseline_index = 0;
    for (guint i = 0; i < compare->backends->len; i++) {
        const th_compare_backend_config *backend = g_ptr_array_index(compare->backends, i);
        if (strcmp(backend->label, compare->baseline) == 0)
            baseline_index = i;
        g_ptr_array_add(tensor->runs, run_new(backend, FALSE, nmodes));
    }
    th_compare_run *baseline = g_ptr_array_index(tensor->runs, baseline_index);
    baseline->is_baseline = TRUE;
    return baseline_index;
}

/* Runs every backend on one tensor, the baseline first (its results are
 * the reference), the rest in config order; runs are stored in config order. */
static gboolean run_tensor(th_compare_result *result, const th_config *config,
                           const th_compare_tensor_config *input, GPtrArray *open_skips,
                           GError **error)
{
    const th_compare_config *compare = config->compare;
    const th_cpd_params regularised = th_cpd_params_from_config(config, compare->rank);
    th_compare_tensor *tensor = g_new0(th_compare_tensor, 1);
    tensor->label = g_strdup(input->label);
    tensor->runs = g_ptr_array_new_with_free_func(th_compare_run_free);
    g_ptr_array_add(result->tensors, tensor);
    /* Once stopped (Ctrl-C, SIGTERM), no further tensor is read or
     * generated, and one stopped while it was read is not an error: their
     * runs are skipped, the tensors measured before keep their results. */
    const gboolean stopped = result->interrupted || th_cancel_requested();
    g_autoptr(GError) read_error = NULL;
    g_autoptr(th_sptensor) data =
        stopped ? NULL
                : read_input(input, result->model, result->regularised ? &regularised : NULL,
                             tensor, &read_error);
    if (!data) {
        if (!stopped && !g_error_matches(read_error, TH_TENSOR_READER_ERROR,
                                         TH_TENSOR_READER_ERROR_CANCELLED)) {
            g_propagate_error(error, g_steal_pointer(&read_error));
            return FALSE;
        }
        result->interrupted = TRUE;
        if (!tensor->source)
            tensor->source = g_strdup(input->synthetic ? input->synthetic : input->path);
        add_runs(tensor, compare, 0);
        for (guint i = 0; i < tensor->runs->len; i++)
            run_set_status(g_ptr_array_index(tensor->runs, i), TH_COMPARE_SKIPPED,
                           "interrupted (Ctrl-C) before it ran");
        return TRUE;
    }

    tensor_session s = {
        .config = config,
        .compare = compare,
        .result = result,
        .tensor = data,
        .label = tensor->label,
        .rank = compare->rank,
        .factors = th_cpd_initial_factors(data->dims, data->nmodes, compare->rank, config->seed),
        .open_skips = open_skips,
    };
    const guint baseline_index = add_runs(tensor, compare, data->nmodes);
    th_compare_run *baseline = g_ptr_array_index(tensor->runs, baseline_index);
    gboolean ok = run_backend(&s, tensor->runs, baseline_index, error);
    for (guint i = 0; ok && i < compare->backends->len; i++) {
        if (i != baseline_index)
            ok = run_backend(&s, tensor->runs, i, error);
    }
    if (ok)
        compute_speedups(tensor, baseline, strcmp(compare->timer, "backend") == 0);
    th_cpd_free_factors(s.factors, data->nmodes);
    if (s.reference)
        th_cpd_free_factors(s.reference, data->nmodes);
    return ok;
}

static void compute_geomeans(th_compare_result *result, const th_compare_config *compare)
{
    const guint n_tensors = result->tensors->len;
    g_autofree double *chosen = g_new(double, n_tensors);
    g_autofree double *host = g_new(double, n_tensors);
    g_autofree double *own = g_new(double, n_tensors);
    for (guint b = 0; b < compare->backends->len; b++) {
        th_compare_geomean *geomean = g_new0(th_compare_geomean, 1);
        const th_compare_backend_config *backend = g_ptr_array_index(compare->backends, b);
        geomean->label = g_strdup(backend->label);
        for (guint t = 0; t < n_tensors; t++) {
            const th_compare_tensor *tensor = g_ptr_array_index(result->tensors, t);
            const th_compare_run *run = g_ptr_array_index(tensor->runs, b);
            chosen[t] = run->speedup;
            host[t] = run->speedup_host;
            own[t] = run->speedup_backend;
            if (isfinite(run->speedup) && run->speedup > 0.0)
                geomean->tensors++;
        }
        geomean->speedup = th_compare_geometric_mean(chosen, n_tensors);
        geomean->speedup_host = th_compare_geometric_mean(host, n_tensors);
        geomean->speedup_backend = th_compare_geometric_mean(own, n_tensors);
        g_ptr_array_add(result->geomeans, geomean);
    }
}

static char *distinct_devices(const th_compare_result *result)
{
    g_autoptr(GPtrArray) seen = g_ptr_array_new_with_free_func(g_free);
    for (guint t = 0; t < result->tensors->len; t++) {
        const th_compare_tensor *tensor = g_ptr_array_index(result->tensors, t);
        for (guint i = 0; i < tensor->runs->len; i++) {
            const th_compare_run *run = g_ptr_array_index(tensor->runs, i);
            const char *device = th_compare_run_device(run);
            if (run->status != TH_COMPARE_OK || !*device)
                continue;
            gboolean known = FALSE;
            for (guint k = 0; k < seen->len && !known; k++)
                known = strcmp(g_ptr_array_index(seen, k), device) == 0;
            if (!known)
                g_ptr_array_add(seen, g_strdup(device));
        }
    }
    GString *text = g_string_new(NULL);
    for (guint k = 0; k < seen->len; k++)
        g_string_append_printf(text, "%s%s", k ? "; " : "", (const char *)g_ptr_array_index(seen, k));
    return g_string_free(text, FALSE);
}

/* Opens every backend once, before any tensor is read, so that a plugin
 * that refuses its options (or cannot be loaded) stops the comparison before
 * anything is measured, as a single run does, instead of failing after the
 * backends before it have run. A backend that cannot run here (not
 * installed, no device) is recorded in `open_skips` and skipped later,
 * unless it is the baseline: that is an error here. */
static gboolean check_backends(const th_config *config, GPtrArray *open_skips, GError **error)
{
    const th_compare_config *compare = config->compare;
    for (guint i = 0; i < compare->backends->len; i++) {
        const th_compare_backend_config *backend = g_ptr_array_index(compare->backends, i);
        g_autoptr(GError) local = NULL;
        g_autoptr(th_backend) opened =
            th_backend_open(backend->plugin, config->search_path, backend->options, NULL, &local);
        if (opened)
            continue;
        if (!cannot_run_here(local, STAGE_OPEN)) {
            g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                       "%s%scompare.backend '%s': ",
                                       backend->where ? backend->where : "",
                                       backend->where ? ": " : "", backend->label);
            return FALSE;
        }
        /* Every speedup is against the baseline: without it there is
         * nothing to compare, so say so before any tensor is read. */
        if (strcmp(backend->label, compare->baseline) == 0) {
            g_set_error(error, TH_COMPARE_ERROR, TH_COMPARE_ERROR_BASELINE,
                        "%s%sthe baseline '%s' cannot run here: %s; nothing was read or measured "
                        "(compare.baseline names another backend)",
                        backend->where ? backend->where : "", backend->where ? ": " : "",
                        backend->label, local->message);
            return FALSE;
        }
        th_log(TH_LOG_WARNING, "backend '%s' skipped: %s", backend->label, local->message);
        g_ptr_array_index(open_skips, i) = g_strdup(local->message);
    }
    return TRUE;
}

/* Every tensor file can be opened, before anything is measured: a typo in
 * the last one's path stops the comparison here, not after the others. */
static gboolean check_tensor_files(const th_compare_config *compare, GError **error)
{
    for (guint t = 0; t < compare->tensors->len; t++) {
        const th_compare_tensor_config *input = g_ptr_array_index(compare->tensors, t);
        if (!input->path)
            continue;
        const int fd = g_open(input->path, O_RDONLY, 0);
        if (fd < 0) {
            const int saved = errno;
            g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                        "%s: tensor '%s': %s: cannot open: %s", input->where, input->label,
                        input->path, g_strerror(saved));
            return FALSE;
        }
        close(fd);
    }
    return TRUE;
}

th_compare_result *th_compare_run_all(const th_config *config, GError **error)
{
    g_return_val_if_fail(config != NULL && config->compare != NULL, NULL);
    const th_compare_config *compare = config->compare;
    g_autoptr(th_compare_result) result = g_new0(th_compare_result, 1);
    result->config = config;
    result->job = g_strdup(compare->job);
    result->baseline = g_strdup(compare->baseline);
    result->timer = g_strdup(compare->timer);
    result->rank = compare->rank;
    result->repeats = compare->repeats;
    result->warmup = compare->warmup;
    result->tolerance = compare->tolerance;
    result->seed = config->seed;
    result->model = strcmp(compare->job, "cpd") == 0
                        ? th_cpd_params_from_config(config, compare->rank).model
                        : TH_MODEL_LEAST_SQUARES;
    const th_cpd_params cpd_params = th_cpd_params_from_config(config, compare->rank);
    result->nonneg_modes = strcmp(compare->job, "cpd") == 0 ? cpd_params.nonneg_modes : 0;
    result->constraint_modes = cpd_params.constraints_listed ? cpd_params.constraints_listed : 1;
    if (strcmp(compare->job, "cpd") == 0 && cpd_params.model == TH_MODEL_LEAST_SQUARES) {
        result->l2 = cpd_params.l2;
        result->l1_modes = cpd_params.l1_listed ? MIN(cpd_params.l1_listed, TH_MAX_MODES) : 1;
        memcpy(result->l1, cpd_params.l1, sizeof result->l1);
        result->regularised = th_cpd_regularised(&cpd_params, TH_MAX_MODES);
        result->descent = th_cpd_descent_mask(&cpd_params, TH_MAX_MODES) != 0;
        result->hals_max_passes = cpd_params.hals_max_passes;
        result->hals_budget = cpd_params.hals_budget;
    }
    g_autoptr(GDateTime) now = g_date_time_new_now_local();
    result->date = g_date_time_format_iso8601(now);
    result->tensors = g_ptr_array_new_with_free_func(th_compare_tensor_free);
    result->geomeans = g_ptr_array_new_with_free_func(th_compare_geomean_free);
    result->failures = g_ptr_array_new_with_free_func(g_free);

    th_log(TH_LOG_INFO, "Compare %u backend(s) on %u tensor(s): job %s%s%s, rank %u, baseline "
                        "'%s', %u warm-up + %u timed runs, tolerance %g",
           compare->backends->len, compare->tensors->len, compare->job,
           result->model != TH_MODEL_LEAST_SQUARES ? ", model " : "",
           result->model != TH_MODEL_LEAST_SQUARES ? th_cpd_model_name(result->model) : "",
           compare->rank, compare->baseline, compare->warmup, compare->repeats,
           compare->tolerance);
    g_autoptr(GPtrArray) open_skips = g_ptr_array_new_full(compare->backends->len, g_free);
    g_ptr_array_set_size(open_skips, (gint)compare->backends->len);
    if (!check_backends(config, open_skips, error) || !check_tensor_files(compare, error))
        return NULL;
    for (guint t = 0; t < compare->tensors->len; t++) {
        if (!run_tensor(result, config, g_ptr_array_index(compare->tensors, t), open_skips,
                        error))
            return NULL;
    }
    compute_geomeans(result, compare);
    result->devices = distinct_devices(result);
    return g_steal_pointer(&result);
}
