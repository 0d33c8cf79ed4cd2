#include "output/report.h"

#include <math.h>
#include <string.h>

#include <gio/gio.h> /* G_IO_ERROR_CANCELLED */

#include "base/atomic_file.h"
#include "base/cancel.h"
#include "output/factor_io.h"
#include "base/json_text.h"

const char *th_run_status(const th_cpd_result *result)
{
    if (result->interrupted)
        return "interrupted";
    return result->converged ? "converged" : "max_iters";
}

static void add_uint_array(JsonBuilder *b, const char *name, const th_index *v, uint32_t n)
{
    json_builder_set_member_name(b, name);
    json_builder_begin_array(b);
    for (uint32_t i = 0; i < n; ++i)
        json_builder_add_int_value(b, v[i]);
    json_builder_end_array(b);
}

/* Negative entries (not measured or not reported) become null. */
static void add_double_array(JsonBuilder *b, const char *name, const double *v, uint32_t n)
{
    json_builder_set_member_name(b, name);
    json_builder_begin_array(b);
    for (uint32_t i = 0; i < n; ++i)
        th_json_add_measured(b, v[i]);
    json_builder_end_array(b);
}

JsonNode *th_report_tensor_node(const th_tensor_facts *tensor, const char *path)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    th_json_member_string(b, "path", path);
    /* What the file says the tensor is (a synthetic tensor's parameters). */
    json_builder_set_member_name(b, "label");
    if (tensor->label != NULL)
        json_builder_add_string_value(b, tensor->label);
    else
        json_builder_add_null_value(b);
    th_json_member_int(b, "order", tensor->nmodes);
    add_uint_array(b, "dims", tensor->dims, tensor->nmodes);
    th_json_member_int(b, "nnz", (gint64)tensor->nnz);
    th_json_member_number(b, "density", th_tensor_facts_density(tensor));
    th_json_member_number(b, "norm", tensor->norm); /* the file's units */
    th_json_member_int(b, "duplicates_merged", (gint64)tensor->duplicates_merged);
    th_json_member_int(b, "explicit_zeros", (gint64)tensor->explicit_zeros);
    th_json_member_int(b, "underflowed_values", (gint64)tensor->underflowed_values);
    json_builder_set_member_name(b, "empty_slices");
    json_builder_begin_array(b);
    for (uint32_t m = 0; m < tensor->nmodes; ++m)
        json_builder_add_int_value(b, (gint64)tensor->empty_slices[m]);
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

void th_report_add_backend_facts(JsonBuilder *b, const th_backend_facts *f)
{
    th_json_member_string(b, "device", f && f->device ? f->device : "");
    th_json_member_string(b, "details", f && f->details ? f->details : "");
    th_json_member_measured(b, "preprocess_seconds", f ? f->load_seconds : -1.0);
    json_builder_set_member_name(b, "memory_bytes");
    json_builder_begin_object(b);
    th_json_member_int(b, "tensor", f ? (gint64)f->tensor_bytes : 0);
    th_json_member_int(b, "factors", f ? (gint64)f->factor_bytes : 0);
    th_json_member_int(b, "workspace", f ? (gint64)f->workspace_bytes : 0);
    json_builder_end_object(b);
}

JsonNode *th_report_backend_node(const th_backend_facts *f)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    th_json_member_string(b, "id", f->id);
    th_json_member_string(b, "name", f->name);
    th_json_member_string(b, "version", f->version);
    th_json_member_string(b, "path", f->path);
    th_json_member_string(b, "abi", f->abi);
    th_json_member_string(b, "value_type", f->f32 ? "f32" : "f64");
    th_json_member_bool(b, "als_update", f->has_als_update);
    th_json_member_bool(b, "als_sweep", f->has_als_sweep);
    th_json_member_bool(b, "init_factors", f->has_init_factors);
    th_json_member_bool(b, "generalized_mttkrp", f->has_generalized_mttkrp);
    th_json_member_bool(b, "row_least_squares", f->has_row_least_squares);
    th_json_member_bool(b, "als_update_nonneg", f->has_als_update_nonneg);
    th_report_add_backend_facts(b, f);
    json_builder_set_member_name(b, "modes");
    json_builder_begin_array(b);
    for (uint32_t m = 0; m < f->nmodes; ++m) {
        if (!f->modes[m].reported)
            continue;
        json_builder_begin_object(b);
        th_json_member_int(b, "mode", m + 1);
        th_json_member_string(b, "scheme", f->modes[m].scheme);
        th_json_member_int(b, "partitions", f->modes[m].partitions);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static void add_config_member(const char *key, const th_config_value *value, void *user_data)
{
    JsonBuilder *b = user_data;
    json_builder_set_member_name(b, key);
    switch (value->kind) {
    case TH_CONFIG_VALUE_INTEGER:
        json_builder_add_int_value(b, value->integer);
        break;
    case TH_CONFIG_VALUE_NUMBER:
        th_json_add_number(b, value->number);
        break;
    case TH_CONFIG_VALUE_BOOLEAN:
        json_builder_add_boolean_value(b, value->boolean);
        break;
    case TH_CONFIG_VALUE_STRING_LIST:
        json_builder_begin_array(b);
        for (guint i = 0; value->items && i < value->items->len; ++i)
            json_builder_add_string_value(b, g_ptr_array_index(value->items, i));
        json_builder_end_array(b);
        break;
    case TH_CONFIG_VALUE_NUMBER_LIST:
        json_builder_begin_array(b);
        for (guint i = 0; value->numbers && i < value->numbers->len; ++i)
            th_json_add_number(b, g_array_index(value->numbers, double, i));
        json_builder_end_array(b);
        break;
    case TH_CONFIG_VALUE_STRING:
        json_builder_add_string_value(b, value->text);
        break;
    }
}

JsonNode *th_report_config_node(const th_config *config)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    /* Absolute, as every path the config resolves is. */
    g_autofree char *file = g_canonicalize_filename(config->source_path, NULL);
    th_json_member_string(b, "file", file);
    th_config_foreach(config, add_config_member, b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* The factor files of one format: "lambda": "lambda.EXT", "factors": [...]. */
static void add_factor_files(JsonBuilder *b, const char *member, const th_cpd_result *r,
                             const char *extension)
{
    json_builder_set_member_name(b, member);
    json_builder_begin_object(b);
    g_autofree char *lambda = g_strconcat("lambda", extension, NULL);
    th_json_member_string(b, "lambda", lambda);
    json_builder_set_member_name(b, "factors");
    json_builder_begin_array(b);
    for (uint32_t m = 0; m < r->nmodes; ++m) {
        g_autofree char *name = g_strdup_printf("mode%u%s", m + 1, extension);
        json_builder_add_string_value(b, name);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
}

/* CP-APR's parameters as the run used them (the config's, Poisson's
 * defaults applied). */
static void add_apr_params(JsonBuilder *b, const th_config *config)
{
    json_builder_set_member_name(b, "apr");
    json_builder_begin_object(b);
    th_json_member_string(b, "algorithm", "mu");
    th_json_member_int(b, "max_iters", config->max_iters);
    th_json_member_number(b, "tolerance", config->tolerance);
    th_json_member_int(b, "max_inner_iters", config->max_inner_iters);
    th_json_member_number(b, "kappa", config->kappa);
    th_json_member_number(b, "kappa_tolerance", config->kappa_tolerance);
    th_json_member_number(b, "phi_threshold", config->phi_threshold);
    th_json_member_number(b, "epsilon", config->epsilon);
    json_builder_end_object(b);
}

void th_report_add_constraints(JsonBuilder *b, uint64_t nonneg_modes, uint32_t nmodes)
{
    nonneg_modes &= th_cpd_every_mode(nmodes);
    if (nonneg_modes == 0 || nonneg_modes == th_cpd_every_mode(nmodes)) {
        th_json_member_string(b, "constraints", th_cpd_constraints_name(nonneg_modes != 0));
        return;
    }
    json_builder_set_member_name(b, "constraints");
    json_builder_begin_array(b);
    for (uint32_t m = 0; m < nmodes; ++m)
        json_builder_add_string_value(b, th_cpd_constraints_name(nonneg_modes >> m & 1u));
    json_builder_end_array(b);
}

void th_report_add_regularisation(JsonBuilder *b, double l2, const double *l1, uint32_t nmodes)
{
    th_json_member_number(b, "l2", l2);
    gboolean same = TRUE;
    for (uint32_t m = 1; m < nmodes; ++m)
        same = same && l1[m] == l1[0];
    if (same) {
        th_json_member_number(b, "l1", nmodes ? l1[0] : 0.0);
        return;
    }
    json_builder_set_member_name(b, "l1");
    json_builder_begin_array(b);
    for (uint32_t m = 0; m < nmodes; ++m)
        th_json_add_number(b, l1[m]);
    json_builder_end_array(b);
}

void th_report_add_hals(JsonBuilder *b, uint32_t max_passes, double budget,
                        const uint32_t *passes, uint32_t nmodes)
{
    json_builder_set_member_name(b, "hals");
    json_builder_begin_object(b);
    th_json_member_int(b, "max_passes", max_passes);
    th_json_member_number(b, "budget", budget);
    if (passes) {
        json_builder_set_member_name(b, "passes");
        json_builder_begin_array(b);
        for (uint32_t m = 0; m < nmodes; ++m)
            json_builder_add_int_value(b, passes[m]);
        json_builder_end_array(b);
    }
    json_builder_end_object(b);
}

void th_report_add_completion(JsonBuilder *b, const th_cpd_result *r)
{
    const th_completion_summary *c = &r->completion;
    json_builder_set_member_name(b, "completion");
    json_builder_begin_object(b);
    th_json_member_string(b, "missing", "unlisted");
    th_json_member_string(b, "algorithm", "row-wise als");
    th_json_member_number(b, "l2", c->l2);
    th_json_member_number(b, "holdout", c->holdout);
    th_json_member_int(b, "observed_entries", (int64_t)c->observed);
    th_json_member_int(b, "training_entries", (int64_t)(c->observed - c->held_out));
    th_json_member_int(b, "held_out_entries", (int64_t)c->held_out);
    /* The iteration whose model was published (0: a run cut inside one). */
    th_json_member_int(b, "published_iteration", c->best_iteration);
    th_json_member_number(b, "objective", c->objective);
    th_json_member_number(b, "train_rmse", c->train_rmse);
    th_json_member_number(b, "holdout_rmse", c->holdout_rmse);
    th_json_member_int(b, "singular_row_solves", (int64_t)c->singular_rows);
    th_json_member_int(b, "empty_rows", (int64_t)c->empty_rows);
    json_builder_end_object(b);
}

static void add_cpd(JsonBuilder *b, const th_config *config, const th_cpd_result *r,
                    unsigned formats)
{
    const gboolean completion = r->model == TH_MODEL_COMPLETION;
    const gboolean poisson = r->model == TH_MODEL_POISSON;
    json_builder_set_member_name(b, "cpd");
    json_builder_begin_object(b);
    th_json_member_string(b, "model", th_cpd_model_name(r->model));
    const gboolean least_squares = r->model == TH_MODEL_LEAST_SQUARES;
    if (!poisson)
        th_report_add_constraints(b, r->nonneg_modes, r->nmodes);
    if (least_squares)
        th_report_add_regularisation(b, r->l2, r->l1, r->nmodes);
    if (least_squares && r->descent_modes)
        th_report_add_hals(b, r->hals_max_passes, r->hals_budget, r->hals_passes, r->nmodes);
    if (poisson && config)
        add_apr_params(b, config);
    if (completion)
        th_report_add_completion(b, r);
    th_json_member_int(b, "rank", r->rank);
    th_json_member_string(b, "status", th_run_status(r));
    th_json_member_number(b, "final_fit", r->fit); /* least squares, for every model */
    /* Regularised CP-ALS: the final model's objective; null unregularised. */
    if (least_squares)
        th_json_member_number(b, "objective", r->objective);
    if (poisson) {
        th_json_member_number(b, "final_log_likelihood", r->log_likelihood);
        th_json_member_number(b, "final_kkt_violation", r->kkt_violation);
        th_json_member_number(b, "final_least_squares_fit", r->fit);
    }
    th_json_member_bool(b, "converged", r->converged);
    th_json_member_bool(b, "interrupted", r->interrupted);
    th_json_member_string(b, "update_path", th_update_path_name(r->update_path));
    th_json_member_string(b, "initial_factors", th_init_source_name(r->initial_factors));
    th_json_member_bool(b, "backend_update", th_cpd_backend_updated(r));
    th_json_member_int(b, "pinv_fallbacks", r->pinv_fallbacks);
    th_json_member_int(b, "sweep_fallbacks", r->sweep_fallbacks);
    if (least_squares)
        th_json_member_bool(b, "sweep_refused", r->sweep_refused);
    json_builder_set_member_name(b, "iterations");
    json_builder_begin_array(b);
    for (guint i = 0; i < r->iterations->len; ++i) {
        const th_cpd_iteration *it = &g_array_index(r->iterations, th_cpd_iteration, i);
        json_builder_begin_object(b);
        th_json_member_int(b, "iteration", it->iteration);
        th_json_member_number(b, "fit", it->fit);
        th_json_member_number(b, "delta", it->delta);
        th_json_member_number(b, "seconds", it->seconds);
        if (poisson) {
            th_json_member_number(b, "log_likelihood", it->log_likelihood);
            th_json_member_number(b, "kkt_violation", it->kkt_violation);
            th_json_member_int(b, "inner_iterations", it->inner_iterations);
            th_json_member_int(b, "inadmissible_zero_modes", it->inadmissible_zero_modes);
        }
        if (least_squares && isfinite(r->objective))
            th_json_member_number(b, "objective", it->objective); /* null: not computed */
        if (completion) {
            th_json_member_number(b, "objective", it->objective);
            th_json_member_number(b, "train_rmse", it->train_rmse);
            th_json_member_number(b, "holdout_rmse", it->holdout_rmse);
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    add_double_array(b, "lambda", r->lambda, r->rank);
    /* "files": the text files (SPLATT's layout); "npy_files": numpy's. */
    if (formats & TH_FACTORS_TEXT)
        add_factor_files(b, "files", r, ".mat");
    if (formats & TH_FACTORS_NPY)
        add_factor_files(b, "npy_files", r, ".npy");
    json_builder_end_object(b);
}

static void add_timings(JsonBuilder *b, const th_run_summary *s)
{
    const th_cpd_result *r = s->result;
    json_builder_set_member_name(b, "timings");
    json_builder_begin_object(b);
    th_json_member_number(b, "read_seconds", s->read_seconds);
    th_json_member_number(b, "preprocess_seconds", s->backend->load_seconds);
    if (r) {
        /* null per mode where the host could not time it (inside als_sweep). */
        add_double_array(b, "mttkrp_seconds", r->mttkrp_seconds, r->nmodes);
        add_double_array(b, "mttkrp_backend_seconds", r->mttkrp_device_seconds, r->nmodes);
        th_json_member_number(b, "sweep_seconds", r->sweep_seconds);
        th_json_member_number(b, "update_seconds", r->update_seconds);
        th_json_member_number(b, "algebra_seconds", r->algebra_seconds);
        th_json_member_number(b, "init_seconds", r->init_seconds);
        th_json_member_number(b, "fetch_seconds", r->fetch_seconds);
        th_json_member_number(b, "result_memory_seconds", r->result_memory_seconds);
        th_json_member_number(b, "arrange_seconds", r->arrange_seconds);
        th_json_member_number(b, "cpd_seconds", r->total_seconds);
    }
    th_json_member_number(b, "write_seconds", s->write_seconds);
    th_json_member_number(b, "total_seconds", s->total_seconds);
    json_builder_end_object(b);
}

/* A distributed run's processes: each one's share, phases and
 * collectives (the communication a run of several processes adds). */
static void add_processes(JsonBuilder *b, const th_run_processes *p)
{
    json_builder_set_member_name(b, "processes");
    json_builder_begin_object(b);
    th_json_member_int(b, "count", p->count);
    th_json_member_string(b, "mpi", p->mpi_library);
    th_json_member_string(b, "exchange", p->exchange);
    json_builder_set_member_name(b, "ranks");
    json_builder_begin_array(b);
    for (uint32_t k = 0; k < p->count; ++k) {
        const th_process_record *r = &p->records[k];
        json_builder_begin_object(b);
        th_json_member_int(b, "rank", r->rank);
        th_json_member_string(b, "host", r->host);
        th_json_member_string(b, "gpus", r->gpus);
        th_json_member_int(b, "first_nonzero", (gint64)r->first_nonzero);
        th_json_member_int(b, "nnz", (gint64)r->nnz);
        th_json_member_number(b, "read_seconds", r->read_seconds);
        th_json_member_number(b, "preprocess_seconds", r->preprocess_seconds);
        th_json_member_number(b, "mttkrp_seconds", r->mttkrp_seconds);
        th_json_member_number(b, "cpd_seconds", r->cpd_seconds);
        th_json_member_number(b, "collective_seconds", r->collective_seconds);
        th_json_member_int(b, "collective_calls", (gint64)r->collective_calls);
        th_json_member_int(b, "collective_bytes", (gint64)r->collective_bytes);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
}

gboolean th_report_stage(th_output_set *set, const th_run_summary *s, GError **error)
{
    /* A second stop while outputs are written (cancel.h), as th_write_matrix. */
    if (th_cancel_abort_requested()) {
        g_autofree char *path = th_output_set_path(set, TH_RUN_REPORT_NAME);
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_CANCELLED,
                    "%s: writing aborted; the file was not replaced", path);
        return FALSE;
    }
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    th_json_member_string(b, "tensorhost_version", TH_VERSION);
    g_autofree char *abi = g_strdup_printf("%u.%u", TH_ABI_VERSION_MAJOR, TH_ABI_VERSION_MINOR);
    th_json_member_string(b, "host_abi", abi);
    g_autoptr(GDateTime) now = g_date_time_new_now_local();
    g_autofree char *date = g_date_time_format_iso8601(now);
    th_json_member_string(b, "date", date);
    th_json_member_string(b, "status", s->result ? th_run_status(s->result) : "failed");

    json_builder_set_member_name(b, "config");
    json_builder_add_value(b, th_report_config_node(s->config));

    json_builder_set_member_name(b, "tensor");
    json_builder_add_value(b, th_report_tensor_node(s->tensor, s->config->tensor_path));
    json_builder_set_member_name(b, "backend");
    json_builder_add_value(b, th_report_backend_node(s->backend));
    if (s->result)
        add_cpd(b, s->config, s->result,
                s->factors_written ? th_factor_format_from_name(s->config->output_format) : 0);
    add_timings(b, s);
    if (s->processes)
        add_processes(b, s->processes);
    json_builder_end_object(b);

    g_autoptr(JsonNode) root = json_builder_get_root(b);
    gsize length = 0;
    g_autofree char *text = th_json_to_text(root, TRUE, &length);
    return th_output_set_add_text(set, TH_RUN_REPORT_NAME, text, length, error);
}
