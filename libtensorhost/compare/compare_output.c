/* The comparison's table, CSV and JSON; see compare_output.h. */
#include "compare/compare_output.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "base/atomic_file.h"
#include "compare/charts.h"
#include "base/json_text.h"
#include "base/message_text.h"
#include "output/report.h"

/* ---- Numbers as text ------------------------------------------------------ */

/* The unit a time is shown in, and its factor. */
static const char *seconds_unit(double seconds, double *factor)
{
    if (seconds < 1e-3) {
        *factor = 1e6;
        return "µs";
    }
    if (seconds < 1.0) {
        *factor = 1e3;
        return "ms";
    }
    *factor = 1.0;
    return "s";
}

/* Three significant digits, without %g's exponents: 1.10, 12.3, 668. */
static char *three_digits(double value)
{
    if (value < 10.0)
        return g_strdup_printf("%.2f", value);
    return g_strdup_printf(value < 100.0 ? "%.1f" : "%.0f", value);
}

char *th_compare_format_seconds(double seconds)
{
    if (!(seconds >= 0.0))
        return g_strdup("-");
    double factor;
    const char *unit = seconds_unit(seconds, &factor);
    g_autofree char *number = three_digits(seconds * factor);
    return g_strdup_printf("%s %s", number, unit);
}

/* "8.42 ms (8.15-8.69)": min and max in the median's unit. */
static char *format_stat(const th_compare_stat *stat)
{
    if (!(stat->median >= 0.0))
        return g_strdup("-");
    double factor;
    const char *unit = seconds_unit(stat->median, &factor);
    g_autofree char *median = three_digits(stat->median * factor);
    g_autofree char *low = three_digits(stat->min * factor);
    g_autofree char *high = three_digits(stat->max * factor);
    return g_strdup_printf("%s %s (%s-%s)", median, unit, low, high);
}

char *th_compare_format_bytes(uint64_t bytes)
{
    if (bytes < 1024)
        return g_strdup_printf("%" PRIu64 " B", bytes);
    if (bytes < (uint64_t)1 << 30)
        return g_strdup_printf("%.1f MiB", (double)bytes / (1024.0 * 1024.0));
    return g_strdup_printf("%.2f GiB", (double)bytes / (1024.0 * 1024.0 * 1024.0));
}

static char *format_speedup(double speedup)
{
    return isfinite(speedup) ? g_strdup_printf("%.2fx", speedup) : g_strdup("-");
}

static char *format_error(double error)
{
    if (isnan(error))
        return g_strdup("-");
    return error == 0.0 ? g_strdup("0") : g_strdup_printf("%.1e", error);
}

static char *format_dims(const th_compare_tensor *tensor)
{
    GString *text = g_string_new(NULL);
    for (uint32_t m = 0; m < tensor->nmodes; m++)
        g_string_append_printf(text, "%s%u", m ? " x " : "", tensor->dims[m]);
    return g_string_free(text, FALSE);
}

/* The scheme's name without the explanation a plugin may append
 * ("scheme2 (rule=balanced: ...)" -> "scheme2"): the table has one narrow
 * column for it; CSV and JSON keep the whole text. */
static char *scheme_name(const char *scheme)
{
    if (!*scheme)
        return g_strdup("?");
    const char *cut = strstr(scheme, " (");
    return cut ? g_strndup(scheme, (gsize)(cut - scheme)) : g_strdup(scheme);
}

/* "nnz-chunked" when every mode agrees, else "scheme1,scheme2,...". */
static char *format_schemes(const th_compare_run *run)
{
    if (!run->modes)
        return g_strdup("-");
    GString *text = g_string_new(NULL);
    gboolean same = TRUE;
    g_autofree char *first = scheme_name(th_compare_run_scheme(run, 0));
    for (uint32_t m = 0; m < run->nmodes; m++) {
        g_autofree char *name = scheme_name(th_compare_run_scheme(run, m));
        same = same && strcmp(name, first) == 0;
        g_string_append_printf(text, "%s%s", m ? "," : "", name);
    }
    if (same)
        g_string_assign(text, first);
    return g_string_free(text, FALSE);
}

static const th_compare_stat *chosen_stat(const th_compare_result *result,
                                          const th_compare_stat *host,
                                          const th_compare_stat *backend)
{
    return strcmp(result->timer, "backend") == 0 ? backend : host;
}

/* ---- A text table with aligned columns ---------------------------------- */

typedef struct text_table {
    guint n_columns;
    GPtrArray *rows; /* GPtrArray of char* cells; a row of one cell spans the line */
    gboolean *right; /* [n_columns] right-aligned (numbers) */
} text_table;

static void text_table_init(text_table *t, guint n_columns)
{
    t->n_columns = n_columns;
    t->rows = g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
    t->right = g_new0(gboolean, n_columns);
}

static void text_table_clear(text_table *t)
{
    g_ptr_array_unref(t->rows);
    g_free(t->right);
}

static GPtrArray *text_table_row(text_table *t)
{
    GPtrArray *row = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(t->rows, row);
    return row;
}

/* Takes ownership of `cell`. */
static void cell(GPtrArray *row, char *text)
{
    g_ptr_array_add(row, text);
}

static void text_table_render(const text_table *t, GString *out)
{
    g_autofree glong *width = g_new0(glong, t->n_columns);
    for (guint r = 0; r < t->rows->len; r++) {
        const GPtrArray *row = g_ptr_array_index(t->rows, r);
        for (guint c = 0; c < row->len && c < t->n_columns; c++) {
            if (row->len == 2 && c == 1)
                continue; /* a spanning cell */
            width[c] = MAX(width[c], g_utf8_strlen(g_ptr_array_index(row, c), -1));
        }
    }
    for (guint r = 0; r < t->rows->len; r++) {
        const GPtrArray *row = g_ptr_array_index(t->rows, r);
        GString *line = g_string_new(NULL);
        for (guint c = 0; c < row->len && c < t->n_columns; c++) {
            const char *text = g_ptr_array_index(row, c);
            glong pad = width[c] - g_utf8_strlen(text, -1);
            gboolean spanning = row->len == 2 && c == 1;
            if (c > 0)
                g_string_append(line, "  ");
            if (t->right[c] && !spanning)
                for (glong i = 0; i < pad; i++)
                    g_string_append_c(line, ' ');
            g_string_append(line, text);
            if ((!t->right[c] || spanning) && c + 1 < row->len)
                for (glong i = 0; i < pad; i++)
                    g_string_append_c(line, ' ');
        }
        while (line->len > 0 && line->str[line->len - 1] == ' ')
            g_string_truncate(line, line->len - 1);
        g_string_append_printf(out, "%s\n", line->str);
        g_string_free(line, TRUE);
    }
}

/* ---- The terminal table --------------------------------------------------- */

static void describe_tensor(const th_compare_result *result, const th_compare_tensor *tensor,
                            GString *out)
{
    g_autofree char *dims = format_dims(tensor);
    g_string_append_printf(out, "Tensor %s: %s, %" G_GUINT64_FORMAT " %s%s\n  %s\n",
                           tensor->label, dims, tensor->nnz,
                           th_plural(tensor->nnz, "nonzero", "nonzeros"),
                           tensor->synthetic ? " (SYNTHETIC)" : "", tensor->source);
    gboolean cpd = strcmp(result->job, "cpd") == 0;
    g_string_append_printf(
        out,
        "  %s, rank %u; median of %u timed %s after %u warm-up%s; all modes: median (min-max);\n"
        "  speedup = baseline's time / backend's time over all modes, by %s\n\n",
        !cpd ? "MTTKRP"
        : result->model == TH_MODEL_POISSON
            ? "CP-APR, Poisson (generalized MTTKRP times are per outer iteration)"
        : result->model == TH_MODEL_COMPLETION
            ? "Completion, least squares over the listed entries (row-wise ALS in the "
              "backend: no MTTKRP to time)"
        : result->regularised
            ? "CP-ALS, regularised (l1, l2; MTTKRP times are per iteration)"
        : result->nonneg_modes
            ? "CP-ALS, nonnegative factors (HALS updates; MTTKRP times are per iteration)"
            : "CP-ALS (MTTKRP times are per iteration)",
        result->rank,
        result->repeats, th_plural(result->repeats, "run", "runs"), result->warmup,
        result->warmup == 1 ? "" : "s",
        strcmp(result->timer, "backend") == 0 ? "the backends' own timers" : "host wall time");
}

static void add_run_row(text_table *t, const th_compare_result *result,
                        const th_compare_tensor *tensor, const th_compare_run *run)
{
    GPtrArray *row = text_table_row(t);
    cell(row, g_strdup_printf("%s%s", run->label, run->is_baseline ? " *" : ""));
    if (run->status == TH_COMPARE_SKIPPED || (run->status != TH_COMPARE_OK && !run->modes)) {
        cell(row, g_strdup_printf("%s: %s", th_compare_status_name(run->status), run->reason));
        return;
    }
    cell(row, g_strdup(run->status == TH_COMPARE_OK ? "ok" : run->status == TH_COMPARE_MISMATCH
                                                                 ? "MISMATCH"
                                                                 : "FAILED"));
    cell(row, format_schemes(run));
    for (uint32_t m = 0; m < tensor->nmodes; m++) {
        const th_compare_mode *mode = &run->modes[m];
        cell(row, th_compare_format_seconds(chosen_stat(result, &mode->host, &mode->backend)->median));
    }
    const th_compare_stat *total = chosen_stat(result, &run->total_host, &run->total_backend);
    cell(row, format_stat(total));
    /* The other timer's all-mode median, so both are always in view. */
    const th_compare_stat *other = strcmp(result->timer, "backend") == 0 ? &run->total_host
                                                                         : &run->total_backend;
    cell(row, th_compare_format_seconds(other->median));
    cell(row, format_speedup(run->speedup));
    cell(row, th_compare_format_seconds(th_compare_run_preprocess_seconds(run)));
    const uint64_t bytes = th_compare_run_memory(run);
    cell(row, bytes ? th_compare_format_bytes(bytes) : g_strdup("-")); /* 0: not reported */
    cell(row, format_error(run->max_error));
    if (strcmp(result->job, "cpd") == 0) {
        if (result->model == TH_MODEL_POISSON) {
            cell(row, isnan(run->log_likelihood) ? g_strdup("-")
                                                 : g_strdup_printf("%.10g", run->log_likelihood));
            cell(row, isnan(run->kkt_violation) ? g_strdup("-")
                                                : g_strdup_printf("%.2e", run->kkt_violation));
        } else {
            cell(row, isnan(run->fit) ? g_strdup("-") : g_strdup_printf("%.6f", run->fit));
        }
        if (result->model == TH_MODEL_COMPLETION) {
            cell(row, isnan(run->train_rmse) ? g_strdup("-")
                                             : g_strdup_printf("%.6e", run->train_rmse));
            cell(row, isnan(run->holdout_rmse) ? g_strdup("-")
                                               : g_strdup_printf("%.6e", run->holdout_rmse));
        }
        cell(row, run->iterations ? g_strdup_printf("%u", run->iterations) : g_strdup("-"));
        if (result->model == TH_MODEL_POISSON)
            cell(row, run->iterations ? g_strdup_printf("%u", run->inner_iterations)
                                      : g_strdup("-"));
        cell(row, th_compare_format_seconds(run->seconds_per_iteration.median));
    }
}

static void format_tensor_table(const th_compare_result *result, const th_compare_tensor *tensor,
                                GString *out)
{
    describe_tensor(result, tensor, out);
    gboolean cpd = strcmp(result->job, "cpd") == 0;
    gboolean poisson = cpd && result->model == TH_MODEL_POISSON;
    gboolean completion = cpd && result->model == TH_MODEL_COMPLETION;
    gboolean by_backend = strcmp(result->timer, "backend") == 0;
    guint n_columns = 3 + tensor->nmodes + 6 + (poisson ? 5 : completion ? 5 : cpd ? 3 : 0);
    text_table t;
    text_table_init(&t, n_columns);
    GPtrArray *header = text_table_row(&t);
    cell(header, g_strdup("backend"));
    cell(header, g_strdup("status"));
    cell(header, g_strdup("schemes"));
    for (uint32_t m = 0; m < tensor->nmodes; m++)
        cell(header, g_strdup_printf("mode %u", m + 1));
    cell(header, g_strdup("all modes"));
    cell(header, g_strdup(by_backend ? "host time" : "own time"));
    cell(header, g_strdup("speedup"));
    cell(header, g_strdup("preproc"));
    cell(header, g_strdup("memory"));
    cell(header, g_strdup("max error"));
    if (poisson) { /* the model's objective where CP-ALS has its fit */
        cell(header, g_strdup("log-likelihood"));
        cell(header, g_strdup("KKT"));
        cell(header, g_strdup("iters"));
        cell(header, g_strdup("inner"));
        cell(header, g_strdup("s/iter"));
    } else if (cpd) {
        cell(header, g_strdup("fit"));
        if (completion) {
            cell(header, g_strdup("train RMSE"));
            cell(header, g_strdup("held-out RMSE"));
        }
        cell(header, g_strdup("iters"));
        cell(header, g_strdup("s/iter"));
    }
    for (guint c = 3; c < n_columns; c++)
        t.right[c] = TRUE;
    for (guint i = 0; i < tensor->runs->len; i++)
        add_run_row(&t, result, tensor, g_ptr_array_index(tensor->runs, i));
    text_table_render(&t, out);
    text_table_clear(&t);
    g_string_append_printf(out,
                           "  * baseline. own time: the backend's own timer (device events on a "
                           "GPU); memory: tensor copies + factors + workspace\n");
    if (cpd)
        g_string_append_printf(out, "  - : not measured (a backend without its own timer; host "
                                    "times of a backend whose MTTKRPs run inside als_sweep)\n");
    if (poisson)
        g_string_append_printf(out, "  Poisson model (CP-APR): log-likelihood of the final model, "
                                    "KKT: its violation, inner: inner iterations in all\n");
    if (completion)
        g_string_append_printf(out, "  Completion: fit and RMSEs of the published model (with a "
                                    "holdout, the iteration with the best held-out RMSE)\n");
    g_string_append_c(out, '\n');
}

static void format_geomeans(const th_compare_result *result, GString *out)
{
    g_string_append_printf(out, "Geometric-mean speedup over %u %s vs '%s' (%s):\n",
                           result->tensors->len,
                           th_plural(result->tensors->len, "tensor", "tensors"), result->baseline,
                           strcmp(result->timer, "backend") == 0 ? "the backends' own timers"
                                                                  : "host wall time");
    text_table t;
    text_table_init(&t, 3);
    t.right[1] = TRUE;
    for (guint i = 0; i < result->geomeans->len; i++) {
        const th_compare_geomean *geomean = g_ptr_array_index(result->geomeans, i);
        GPtrArray *row = text_table_row(&t);
        cell(row, g_strdup_printf("  %s", geomean->label));
        cell(row, format_speedup(geomean->speedup));
        cell(row, g_strdup_printf("(%u of %u tensors)", geomean->tensors, result->tensors->len));
    }
    text_table_render(&t, out);
    text_table_clear(&t);
    g_string_append_c(out, '\n');
}

char *th_compare_format_table(const th_compare_result *result)
{
    GString *out = g_string_new(NULL);
    g_autofree char *date = g_strndup(result->date, 19); /* to the second */
    g_strdelimit(date, "T", ' ');
    g_string_append_printf(out, "\nComparison of %s, %s%s%s\n\n", result->job, date,
                           *result->devices ? ", on " : "", result->devices);
    for (guint t = 0; t < result->tensors->len; t++)
        format_tensor_table(result, g_ptr_array_index(result->tensors, t), out);
    if (result->tensors->len > 1)
        format_geomeans(result, out);
    if (result->failures->len > 0) {
        g_string_append_printf(out, "FAILED: %u disagreement(s) or failed backend(s):\n",
                               result->failures->len);
        for (guint i = 0; i < result->failures->len; i++)
            g_string_append_printf(out, "  %s\n", (const char *)g_ptr_array_index(result->failures, i));
        g_string_append_c(out, '\n');
    }
    if (result->interrupted)
        g_string_append(out, "INTERRUPTED: the runs after Ctrl-C are marked skipped.\n\n");
    return g_string_free(out, FALSE);
}

/* ---- CSV ---------------------------------------------------------------- */

static void csv_text(GString *line, const char *text)
{
    if (line->len > 0 && line->str[line->len - 1] != '\n')
        g_string_append_c(line, ',');
    if (strpbrk(text, ",\"\n\r")) {
        g_string_append_c(line, '"');
        for (const char *p = text; *p; p++) {
            if (*p == '"')
                g_string_append_c(line, '"');
            g_string_append_c(line, *p);
        }
        g_string_append_c(line, '"');
    } else {
        g_string_append(line, text);
    }
}

/* Empty for "not measured" (negative or NaN): a spreadsheet reads it as blank. */
static void csv_number(GString *line, double value, gboolean negative_is_missing)
{
    char buffer[G_ASCII_DTOSTR_BUF_SIZE] = "";
    if (isfinite(value) && !(negative_is_missing && value < 0.0))
        g_ascii_formatd(buffer, sizeof buffer, "%.9g", value);
    csv_text(line, buffer);
}

static void csv_unsigned(GString *line, uint64_t value)
{
    g_autofree char *text = g_strdup_printf("%" PRIu64, value);
    csv_text(line, text);
}

static const char *const csv_columns[] = {
    "tensor", "kind", "nnz", "backend", "plugin", "options", "baseline", "status", "mode",
    "scheme", "partitions", "host_median_s", "host_min_s", "host_max_s", "backend_median_s",
    "backend_min_s", "backend_max_s", "speedup", "speedup_host", "speedup_backend",
    "rel_error", "preprocess_s", "tensor_bytes", "factor_bytes", "workspace_bytes", "fit",
    "fit_difference", "iterations", "s_per_iter_median", "device", "reason",
    /* Appended (Poisson model; empty otherwise), so columns read by
     * position keep their place. */
    "model", "log_likelihood", "log_likelihood_rel_difference", "kkt_violation",
    "inner_iterations",
    /* Appended (completion; empty otherwise). */
    "train_rmse", "holdout_rmse",
};

static void csv_stat(GString *line, const th_compare_stat *stat)
{
    csv_number(line, stat->median, TRUE);
    csv_number(line, stat->min, TRUE);
    csv_number(line, stat->max, TRUE);
}

/* One row: `mode` is 0-based, or -1 for the all-modes row. */
static void csv_row(GString *out, const th_compare_result *result,
                    const th_compare_tensor *tensor, const th_compare_run *run, int mode)
{
    GString *line = g_string_new(NULL);
    csv_text(line, tensor->label);
    csv_text(line, tensor->synthetic ? "synthetic" : "real");
    csv_unsigned(line, tensor->nnz);
    csv_text(line, run->label);
    csv_text(line, run->plugin);
    csv_text(line, run->options);
    csv_text(line, run->is_baseline ? "yes" : "no");
    csv_text(line, th_compare_status_name(run->status));
    const th_compare_mode *m = mode >= 0 && run->modes ? &run->modes[mode] : NULL;
    if (m) {
        g_autofree char *number = g_strdup_printf("%d", mode + 1);
        csv_text(line, number);
        csv_text(line, th_compare_run_scheme(run, (uint32_t)mode));
        csv_unsigned(line, th_compare_run_partitions(run, (uint32_t)mode));
        csv_stat(line, &m->host);
        csv_stat(line, &m->backend);
        csv_number(line, m->speedup, FALSE);
        csv_number(line, m->speedup_host, FALSE);
        csv_number(line, m->speedup_backend, FALSE);
        csv_number(line, m->error, FALSE);
    } else {
        csv_text(line, "all");
        g_autofree char *schemes = format_schemes(run);
        csv_text(line, run->modes ? schemes : "");
        csv_text(line, "");
        csv_stat(line, &run->total_host);
        csv_stat(line, &run->total_backend);
        csv_number(line, run->speedup, FALSE);
        csv_number(line, run->speedup_host, FALSE);
        csv_number(line, run->speedup_backend, FALSE);
        csv_number(line, run->max_error, FALSE);
    }
    const th_backend_facts *f = run->facts;
    csv_number(line, th_compare_run_preprocess_seconds(run), TRUE);
    csv_unsigned(line, f ? f->tensor_bytes : 0);
    csv_unsigned(line, f ? f->factor_bytes : 0);
    csv_unsigned(line, f ? f->workspace_bytes : 0);
    csv_number(line, run->fit, FALSE);
    csv_number(line, run->fit_difference, FALSE);
    if (run->iterations)
        csv_unsigned(line, run->iterations);
    else
        csv_text(line, "");
    csv_number(line, run->seconds_per_iteration.median, TRUE);
    csv_text(line, th_compare_run_device(run));
    csv_text(line, run->reason ? run->reason : "");
    const gboolean cpd = strcmp(result->job, "cpd") == 0;
    csv_text(line, cpd ? th_cpd_model_name(result->model) : "");
    csv_number(line, run->log_likelihood, FALSE);
    csv_number(line, run->log_likelihood_difference, FALSE);
    csv_number(line, run->kkt_violation, FALSE);
    if (cpd && result->model == TH_MODEL_POISSON && run->iterations)
        csv_unsigned(line, run->inner_iterations);
    else
        csv_text(line, "");
    csv_number(line, run->train_rmse, FALSE);
    csv_number(line, run->holdout_rmse, FALSE);
    g_string_append_printf(out, "%s\n", line->str);
    g_string_free(line, TRUE);
}

char *th_compare_format_csv(const th_compare_result *result)
{
    GString *out = g_string_new(NULL);
    for (size_t c = 0; c < G_N_ELEMENTS(csv_columns); c++)
        g_string_append_printf(out, "%s%s", c ? "," : "", csv_columns[c]);
    g_string_append_c(out, '\n');
    for (guint t = 0; t < result->tensors->len; t++) {
        const th_compare_tensor *tensor = g_ptr_array_index(result->tensors, t);
        for (guint i = 0; i < tensor->runs->len; i++) {
            const th_compare_run *run = g_ptr_array_index(tensor->runs, i);
            for (uint32_t m = 0; run->modes && m < run->nmodes; m++)
                csv_row(out, result, tensor, run, (int)m);
            csv_row(out, result, tensor, run, -1);
        }
    }
    return g_string_free(out, FALSE);
}

char *th_compare_format_geomean_csv(const th_compare_result *result)
{
    GString *out = g_string_new("backend,baseline,timer,speedup,speedup_host,speedup_backend,"
                                "tensors\n");
    for (guint i = 0; i < result->geomeans->len; i++) {
        const th_compare_geomean *geomean = g_ptr_array_index(result->geomeans, i);
        GString *line = g_string_new(NULL);
        csv_text(line, geomean->label);
        csv_text(line, result->baseline);
        csv_text(line, result->timer);
        csv_number(line, geomean->speedup, FALSE);
        csv_number(line, geomean->speedup_host, FALSE);
        csv_number(line, geomean->speedup_backend, FALSE);
        csv_unsigned(line, geomean->tensors);
        g_string_append_printf(out, "%s\n", line->str);
        g_string_free(line, TRUE);
    }
    return g_string_free(out, FALSE);
}

/* ---- JSON ---------------------------------------------------------------- */

static void json_stat(JsonBuilder *b, const char *name, const th_compare_stat *stat)
{
    json_builder_set_member_name(b, name);
    if (stat->median < 0.0) {
        json_builder_add_null_value(b);
        return;
    }
    json_builder_begin_object(b);
    th_json_member_measured(b, "median", stat->median);
    th_json_member_measured(b, "min", stat->min);
    th_json_member_measured(b, "max", stat->max);
    json_builder_end_object(b);
}

static void json_run(JsonBuilder *b, const th_compare_result *result, const th_compare_run *run)
{
    json_builder_begin_object(b);
    th_json_member_string(b, "label", run->label);
    th_json_member_string(b, "plugin", run->plugin);
    th_json_member_string(b, "plugin_id", run->plugin_id);
    th_json_member_string(b, "options", run->options);
    json_builder_set_member_name(b, "baseline");
    json_builder_add_boolean_value(b, run->is_baseline);
    th_json_member_string(b, "status", th_compare_status_name(run->status));
    th_json_member_string(b, "reason", run->reason);
    th_report_add_backend_facts(b, run->facts); /* as report.json gives them */
    json_builder_set_member_name(b, "modes");
    json_builder_begin_array(b);
    for (uint32_t m = 0; run->modes && m < run->nmodes; m++) {
        const th_compare_mode *mode = &run->modes[m];
        json_builder_begin_object(b);
        th_json_member_int(b, "mode", m + 1);
        th_json_member_string(b, "scheme", th_compare_run_scheme(run, m));
        th_json_member_int(b, "partitions", th_compare_run_partitions(run, m));
        json_stat(b, "host_seconds", &mode->host);
        json_stat(b, "backend_seconds", &mode->backend);
        th_json_member_number(b, "relative_error", mode->error);
        th_json_member_number(b, "speedup", mode->speedup);
        th_json_member_number(b, "speedup_host", mode->speedup_host);
        th_json_member_number(b, "speedup_backend", mode->speedup_backend);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "total");
    json_builder_begin_object(b);
    json_stat(b, "host_seconds", &run->total_host);
    json_stat(b, "backend_seconds", &run->total_backend);
    th_json_member_number(b, "speedup", run->speedup);
    th_json_member_number(b, "speedup_host", run->speedup_host);
    th_json_member_number(b, "speedup_backend", run->speedup_backend);
    th_json_member_number(b, "max_relative_error", run->max_error);
    json_builder_end_object(b);
    if (strcmp(result->job, "cpd") == 0) {
        json_builder_set_member_name(b, "cpd");
        json_builder_begin_object(b);
        th_json_member_number(b, "fit", run->fit);
        th_json_member_number(b, "fit_difference", run->fit_difference);
        th_json_member_int(b, "iterations", run->iterations);
        if (result->model == TH_MODEL_POISSON) {
            th_json_member_number(b, "log_likelihood", run->log_likelihood);
            th_json_member_number(b, "log_likelihood_relative_difference",
                                  run->log_likelihood_difference);
            th_json_member_number(b, "kkt_violation", run->kkt_violation);
            th_json_member_int(b, "inner_iterations", run->inner_iterations);
        }
        if (result->model == TH_MODEL_COMPLETION) {
            th_json_member_number(b, "train_rmse", run->train_rmse);
            th_json_member_number(b, "holdout_rmse", run->holdout_rmse);
        }
        json_stat(b, "seconds_per_iteration", &run->seconds_per_iteration);
        json_builder_end_object(b);
    }
    json_builder_end_object(b);
}

static void json_tensor(JsonBuilder *b, const th_compare_result *result,
                        const th_compare_tensor *tensor)
{
    json_builder_begin_object(b);
    th_json_member_string(b, "label", tensor->label);
    json_builder_set_member_name(b, "synthetic");
    json_builder_add_boolean_value(b, tensor->synthetic);
    th_json_member_string(b, "source", tensor->source);
    th_json_member_int(b, "order", tensor->nmodes);
    json_builder_set_member_name(b, "dims");
    json_builder_begin_array(b);
    for (uint32_t m = 0; m < tensor->nmodes; m++)
        json_builder_add_int_value(b, tensor->dims[m]);
    json_builder_end_array(b);
    th_json_member_int(b, "nnz", (gint64)tensor->nnz);
    th_json_member_measured(b, "read_seconds", tensor->read_seconds);
    json_builder_set_member_name(b, "backends");
    json_builder_begin_array(b);
    for (guint i = 0; i < tensor->runs->len; i++)
        json_run(b, result, g_ptr_array_index(tensor->runs, i));
    json_builder_end_array(b);
    json_builder_end_object(b);
}

JsonNode *th_compare_json(const th_compare_result *result)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    th_json_member_string(b, "tensorhost_version", TH_VERSION);
    th_json_member_string(b, "date", result->date);
    th_json_member_string(b, "devices", result->devices);
    const char *status = result->failures->len ? "failed"
                         : result->interrupted ? "interrupted"
                                               : "ok";
    th_json_member_string(b, "status", status);
    th_json_member_string(b, "job", result->job);
    if (strcmp(result->job, "cpd") == 0) {
        th_json_member_string(b, "model", th_cpd_model_name(result->model));
        if (result->model == TH_MODEL_LEAST_SQUARES || result->model == TH_MODEL_COMPLETION)
            th_report_add_constraints(b, result->nonneg_modes, result->constraint_modes);
        if (result->model == TH_MODEL_LEAST_SQUARES)
            th_report_add_regularisation(b, result->l2, result->l1, result->l1_modes);
        if (result->descent) /* each tensor's passes depend on its shape: not listed */
            th_report_add_hals(b, result->hals_max_passes, result->hals_budget, NULL, 0);
    }
    th_json_member_string(b, "baseline", result->baseline);
    th_json_member_string(b, "timer", result->timer);
    th_json_member_int(b, "rank", result->rank);
    th_json_member_int(b, "repeats", result->repeats);
    th_json_member_int(b, "warmup", result->warmup);
    th_json_member_number(b, "tolerance", result->tolerance);
    th_json_member_int(b, "seed", (gint64)result->seed);
    json_builder_set_member_name(b, "failures");
    json_builder_begin_array(b);
    for (guint i = 0; i < result->failures->len; i++)
        json_builder_add_string_value(b, g_ptr_array_index(result->failures, i));
    json_builder_end_array(b);
    json_builder_set_member_name(b, "tensors");
    json_builder_begin_array(b);
    for (guint t = 0; t < result->tensors->len; t++)
        json_tensor(b, result, g_ptr_array_index(result->tensors, t));
    json_builder_end_array(b);
    json_builder_set_member_name(b, "geometric_mean_speedups");
    json_builder_begin_array(b);
    for (guint i = 0; i < result->geomeans->len; i++) {
        const th_compare_geomean *geomean = g_ptr_array_index(result->geomeans, i);
        json_builder_begin_object(b);
        th_json_member_string(b, "backend", geomean->label);
        th_json_member_number(b, "speedup", geomean->speedup);
        th_json_member_number(b, "speedup_host", geomean->speedup_host);
        th_json_member_number(b, "speedup_backend", geomean->speedup_backend);
        th_json_member_int(b, "tensors", geomean->tensors);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    if (result->config) {
        json_builder_set_member_name(b, "config");
        json_builder_add_value(b, th_report_config_node(result->config));
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* ---- Files ---------------------------------------------------------------- */

static gboolean stage_text(th_output_set *set, const char *name, const char *text,
                           GError **error)
{
    return th_output_set_add_text(set, name, text, strlen(text), error);
}

gboolean th_compare_write_outputs(const th_compare_result *result, const char *dir,
                                  GPtrArray **removed, GError **error)
{
    if (!th_make_output_dir(dir, error))
        return FALSE;
    g_autofree char *table = th_compare_format_table(result);
    g_autofree char *csv = th_compare_format_csv(result);
    g_autofree char *geomean = th_compare_format_geomean_csv(result);
    g_autoptr(JsonNode) root = th_compare_json(result);
    g_autofree char *json = th_json_to_text(root, TRUE, NULL);
    g_autoptr(th_output_set) set =
        th_output_set_new(dir, TH_COMPARE_OUTPUT_NAMES, TH_COMPARE_INDEX_NAME);
    if (!stage_text(set, "table.txt", table, error) || !stage_text(set, "results.csv", csv, error)
        || !stage_text(set, "geomean.csv", geomean, error)
        || !stage_text(set, TH_COMPARE_INDEX_NAME, json, error))
        return FALSE;
    const gboolean charts = !result->config || result->config->compare->charts;
    if (charts && !th_charts_stage_comparison(result, set, error))
        return FALSE;
    return th_output_set_install(set, removed, error);
}
