/* What a run prints on the console: the tensor, the backend, one line per
 * iteration, progress inside long phases and the timing summary. */
#include "console_report.h"

#include <math.h>
#include <stdio.h>

#include "base/log.h"
#include "base/message_text.h"
#include "base/progress.h"
#include "output/report.h"

void th_console_read_progress(uint64_t done, uint64_t total, void *user_data)
{
    (void)user_data;
    if (total > 0)
        th_progress_show(FALSE, "reading: %.0f / %.0f MB (%.0f%%)", done / 1e6, total / 1e6,
                         100.0 * (double)done / (double)total);
    else
        th_progress_show(FALSE, "reading: %.0f MB", done / 1e6);
}

void th_console_tensor_summary(const th_tensor_facts *t, const char *path, double seconds)
{
    g_autoptr(GString) dims = g_string_new(NULL);
    g_autoptr(GString) empty = g_string_new(NULL);
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        g_string_append_printf(dims, "%s%u", m ? " x " : "", t->dims[m]);
        g_string_append_printf(empty, "%s%" G_GUINT64_FORMAT, m ? " " : "",
                               t->empty_slices[m]);
    }
    th_log(TH_LOG_INFO, "Tensor  %s", path);
    if (t->label != NULL) {
        g_autofree char *label = th_escape_control(t->label);
        th_log(TH_LOG_INFO, "  label: %s", label);
    }
    th_log(TH_LOG_INFO, "  order %u, dims %s, nnz %" G_GUINT64_FORMAT ", density %.3e", t->nmodes,
           dims->str, t->nnz, th_tensor_facts_density(t));
    th_log(TH_LOG_INFO, "  duplicates merged %" G_GUINT64_FORMAT ", empty slices per mode [%s], "
                        "read in %.3fs",
           t->duplicates_merged, empty->str, seconds);
    /* Zeros the file stores are kept (they are entries of the file), but
     * worth a word; values that underflowed to zero are cpd_warnings.h's. */
    if (t->explicit_zeros > 0)
        th_log(TH_LOG_WARNING,
               "%s: %" G_GUINT64_FORMAT " %s written as zero; %s (report.json: "
               "tensor.explicit_zeros)",
               path, t->explicit_zeros, th_plural(t->explicit_zeros, "value is", "values are"),
               th_plural(t->explicit_zeros, "it is kept as a stored entry",
                         "they are kept as stored entries"));
}

void th_console_backend_summary(const th_backend_facts *f)
{
    th_log(TH_LOG_INFO, "Backend %s %s (%s)", f->id, f->version, f->path);
    th_log(TH_LOG_INFO, "  device %s; memory: tensor %.1f MB, factors %.1f MB; %s",
           f->device[0] ? f->device : "(not reported)", f->tensor_bytes / 1e6,
           f->factor_bytes / 1e6, f->details);
    th_log(TH_LOG_INFO, "  preprocessing %.3fs", f->load_seconds);
}


gboolean th_console_iteration(const th_cpd_iteration *it, void *user_data)
{
    th_console_iteration_display *d = user_data;
    if (d != NULL && d->min_line_gap > 0) {
        const gint64 now = g_get_monotonic_time();
        if (d->last_line != 0 && now - d->last_line < d->min_line_gap)
            return TRUE;
        d->last_line = now;
    }
    th_progress_clear();
    /* Completion's records carry a training RMSE, the Poisson model's a
     * KKT violation (NaN otherwise). */
    if (!isnan(it->train_rmse))
        th_log(TH_LOG_INFO,
               "  its = %3u (%.3fs)  train RMSE = %.6e  held-out RMSE = %.6e  objective = "
               "%.6e  fit = %.6f",
               it->iteration, it->seconds, it->train_rmse, it->holdout_rmse, it->objective,
               it->fit);
    else if (!isnan(it->kkt_violation))
        th_log(TH_LOG_INFO,
               "  its = %3u (%.3fs)  log-likelihood = %.6e  delta = %+.4e  KKT = %.4e  "
               "inner = %u%s",
               it->iteration, it->seconds, it->log_likelihood, it->delta, it->kkt_violation,
               it->inner_iterations,
               it->inadmissible_zero_modes ? "  (inadmissible zeros raised)" : "");
    else if (!isnan(it->objective)) /* regularised CP-ALS without l1 */
        th_log(TH_LOG_INFO, "  its = %3u (%.3fs)  fit = %.6f  delta = %+.4e  objective = %.6e",
               it->iteration, it->seconds, it->fit, it->delta, it->objective);
    else
        th_log(TH_LOG_INFO, "  its = %3u (%.3fs)  fit = %.6f  delta = %+.4e", it->iteration,
               it->seconds, it->fit, it->delta);
    return TRUE;
}

void th_console_iteration_progress(uint32_t iteration, uint32_t mode, uint32_t nmodes,
                                    void *user_data)
{
    th_console_iteration_display *d = user_data;
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

void th_console_phase(const char *what, void *user_data)
{
    (void)user_data;
    th_progress_show(TRUE, "  %s...", what);
}

/* "  1.2345" or, for a time the host could not take, a "-" in its place. */
static char *format_time_column(double seconds)
{
    return seconds >= 0.0 ? g_strdup_printf("%10.4f", seconds) : g_strdup_printf("%10s", "-");
}

/* "  (backend 0.0123, scheme1)": what else is known about one mode's MTTKRP. */
static char *describe_mode_timing(const th_backend_facts *f, const th_cpd_result *r,
                                  uint32_t mode)
{
    g_autoptr(GPtrArray) parts = g_ptr_array_new_with_free_func(g_free);
    if (r->mttkrp_seconds[mode] < 0.0)
        g_ptr_array_add(parts, g_strdup("inside als_sweep"));
    if (r->mttkrp_device_seconds[mode] >= 0.0)
        g_ptr_array_add(parts, g_strdup_printf("backend %.4f", r->mttkrp_device_seconds[mode]));
    if (!f->modes[mode].reported)
        g_ptr_array_add(parts, g_strdup("?"));
    else if (f->modes[mode].scheme[0] != '\0')
        g_ptr_array_add(parts, g_strdup(f->modes[mode].scheme));
    if (parts->len == 0)
        return g_strdup("");
    g_ptr_array_add(parts, NULL);
    g_autofree char *joined = g_strjoinv(", ", (char **)parts->pdata);
    return g_strdup_printf("  (%s)", joined);
}

static void print_mttkrp_timings(const th_backend_facts *f, const th_cpd_result *r)
{
    double host_total = 0.0, device_total = 0.0;
    gboolean host_measured = TRUE, device_measured = TRUE;
    for (uint32_t m = 0; m < r->nmodes; ++m) {
        host_measured = host_measured && r->mttkrp_seconds[m] >= 0.0;
        device_measured = device_measured && r->mttkrp_device_seconds[m] >= 0.0;
        host_total += r->mttkrp_seconds[m];
        device_total += r->mttkrp_device_seconds[m];
        g_autofree char *host = format_time_column(r->mttkrp_seconds[m]);
        g_autofree char *detail = describe_mode_timing(f, r, m);
        th_log(TH_LOG_INFO, "  mttkrp mode %-3u %s%s", m + 1, host, detail);
    }
    g_autofree char *total = format_time_column(host_measured ? host_total : -1.0);
    if (device_measured)
        th_log(TH_LOG_INFO, "  mttkrp total    %s  (backend %.4f)", total, device_total);
    else
        th_log(TH_LOG_INFO, "  mttkrp total    %s", total);
}

/* The functions that updated a least-squares run's factors on the mode
 * path: als_update_nonneg for the constrained modes. */
static const char *backend_update_functions(const th_cpd_result *r)
{
    if (r->descent_modes == 0)
        return "als_update";
    return r->descent_modes == th_cpd_every_mode(r->nmodes) ? "als_update_nonneg"
                                                           : "als_update_nonneg or als_update";
}

/* The most hierarchical-ALS passes each mode's update made, and what
 * chose them ("-": a mode solved exactly). */
static void print_hals_passes(const th_cpd_result *r)
{
    g_autoptr(GString) passes = g_string_new(NULL);
    for (uint32_t m = 0; m < r->nmodes; ++m) {
        if (m)
            g_string_append(passes, " / ");
        if (r->hals_passes[m])
            g_string_append_printf(passes, "%u", r->hals_passes[m]);
        else
            g_string_append(passes, "-");
    }
    th_log(TH_LOG_INFO,
           "        hierarchical ALS passes per mode update at most %s (cpd.hals_passes %u, "
           "cpd.hals_budget %g)",
           passes->str, r->hals_max_passes, r->hals_budget);
}

static void print_update_timings(const th_cpd_result *r)
{
    switch (r->update_path) {
    case TH_UPDATE_SWEEP:
        th_log(TH_LOG_INFO, "  als sweep       %10.4f  (in the backend: one als_sweep per "
                            "iteration: MTTKRPs, solves, updates%s)",
               r->sweep_seconds,
               r->sweep_refused ? "; refused for the regularised iterations, which ran per "
                                  "mode"
                                : "");
        th_log(TH_LOG_INFO, "  factor update   %10.4f  (als_update of modes the host finished)",
               r->update_seconds);
        break;
    case TH_UPDATE_MODE:
        if (r->model == TH_MODEL_COMPLETION) {
            th_log(TH_LOG_INFO, "  row solves      %10.4f  (in the backend: row_least_squares "
                                "per mode)",
                   r->update_seconds);
            break;
        }
        if (r->model == TH_MODEL_POISSON) {
            th_log(TH_LOG_INFO, "  factor update   %10.4f  (in the backend: factor_update: "
                                "multiplicative updates, normalisations)",
                   r->update_seconds);
            break;
        }
        th_log(TH_LOG_INFO, "  factor update   %10.4f  (in the backend: %s per mode)",
               r->update_seconds, backend_update_functions(r));
        break;
    default:
        th_log(TH_LOG_INFO, "  factor update   %10.4f  (on the host)", r->update_seconds);
        break;
    }
}

void th_console_completion_plan(const th_cpd_params *p, const th_sptensor *train,
                                const th_sptensor *held_out, const char *constraints)
{
    const uint64_t held = held_out ? held_out->nnz : 0;
    g_autofree char *holdout =
        held ? g_strdup_printf("holdout %g (%" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
                               " listed entries; stops on the held-out RMSE)",
                               p->completion.holdout, held, held + train->nnz)
             : g_strdup("no holdout (stops on the training fit)");
    th_log(TH_LOG_INFO,
           "Completion  least squares over the %" G_GUINT64_FORMAT " training entries (the "
           "unlisted ones unknown), row-wise ALS, rank %u, max %u %s, tolerance %g, l2 %g, "
           "%s, seed %" G_GUINT64_FORMAT "%s",
           train->nnz, p->rank, p->max_iters, th_plural(p->max_iters, "iteration", "iterations"),
           p->tolerance, p->completion.l2, holdout, p->seed, constraints);
}

void th_console_run_summary(const th_backend_facts *f, const th_cpd_result *r,
                              double read_seconds, double total_seconds)
{
    if (r->model == TH_MODEL_POISSON) {
        uint64_t inner = 0;
        for (guint k = 0; k < r->iterations->len; ++k)
            inner += g_array_index(r->iterations, th_cpd_iteration, k).inner_iterations;
        th_log(TH_LOG_INFO,
               "Result  %s after %u outer %s (%" G_GUINT64_FORMAT " inner): final "
               "log-likelihood %.6e, KKT violation %.4e, least-squares fit %.6f",
               th_run_status(r), r->iterations->len,
               th_plural(r->iterations->len, "iteration", "iterations"), inner,
               r->log_likelihood, r->kkt_violation, r->fit);
    } else if (r->model == TH_MODEL_COMPLETION) {
        const th_completion_summary *c = &r->completion;
        g_autofree char *best =
            c->held_out && c->best_iteration
                ? g_strdup_printf(" (the model of iteration %u, the best held out)",
                                  c->best_iteration)
                : g_strdup("");
        th_log(TH_LOG_INFO,
               "Result  %s after %u %s%s: train RMSE %.6e, held-out RMSE %.6e, objective "
               "%.6e, training fit %.6f",
               th_run_status(r), r->iterations->len,
               th_plural(r->iterations->len, "iteration", "iterations"), best, c->train_rmse,
               c->holdout_rmse, c->objective, r->fit);
    } else {
        g_autofree char *objective =
            isfinite(r->objective)
                ? g_strdup_printf(", objective %.6e (least squares plus l2 and l1 terms)",
                                  r->objective)
                : g_strdup("");
        th_log(TH_LOG_INFO, "Result  %s after %u %s: final fit %.6f%s", th_run_status(r),
               r->iterations->len, th_plural(r->iterations->len, "iteration", "iterations"),
               r->fit, objective);
        if (r->descent_modes)
            print_hals_passes(r);
    }
    th_log(TH_LOG_INFO, "Timing (seconds)");
    th_log(TH_LOG_INFO, "  read            %10.4f", read_seconds);
    th_log(TH_LOG_INFO, "  preprocessing   %10.4f", f->load_seconds);
    if (r->model != TH_MODEL_COMPLETION) /* whose row solves gather their own products */
        print_mttkrp_timings(f, r);
    print_update_timings(r);
    if (r->model == TH_MODEL_POISSON) /* the log-likelihood's and the fit's reductions */
        th_log(TH_LOG_INFO, "  log-likelihood  %10.4f", r->algebra_seconds);
    else if (r->model == TH_MODEL_COMPLETION) /* the errors' reductions, the held-out error */
        th_log(TH_LOG_INFO, "  errors          %10.4f", r->algebra_seconds);
    else
        th_log(TH_LOG_INFO, "  als algebra     %10.4f", r->algebra_seconds);
    th_log(TH_LOG_INFO, "  initial factors %10.4f", r->init_seconds);
    th_log(TH_LOG_INFO,
           "  factors back    %10.4f  (of which waiting for their memory %.4f; arranged in "
           "%.4f)",
           r->fetch_seconds, r->result_memory_seconds, r->arrange_seconds);
    th_log(TH_LOG_INFO, "  total           %10.4f", total_seconds);
    if (r->sweep_fallbacks)
        th_log(TH_LOG_INFO,
               "als_sweep stopped early (a Cholesky breakdown) in %u of %u iterations; the host "
               "finished those per mode",
               r->sweep_fallbacks, r->iterations->len);
}
