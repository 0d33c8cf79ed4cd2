#include "cp_als.h"

#include <math.h>
#include <string.h>

#include "cancel.h"
#include "cp_model.h"
#include "dense.h"
#include "log.h"
#include "rng.h"

G_DEFINE_QUARK(th-cpd-error-quark, th_cpd_error)

static double seconds_since(gint64 start) { return (double)(g_get_monotonic_time() - start) / 1e6; }

static const char *const update_path_names[] = {
    [TH_UPDATE_AUTO] = "auto",
    [TH_UPDATE_SWEEP] = "sweep",
    [TH_UPDATE_MODE] = "mode",
    [TH_UPDATE_HOST] = "host",
};

const char *th_update_path_name(th_update_path path)
{
    return (size_t)path < G_N_ELEMENTS(update_path_names) ? update_path_names[path] : "?";
}

gboolean th_update_path_from_name(const char *name, th_update_path *path)
{
    for (size_t i = 0; name && i < G_N_ELEMENTS(update_path_names); ++i) {
        if (strcmp(name, update_path_names[i]) == 0) {
            *path = (th_update_path)i;
            return TRUE;
        }
    }
    return FALSE;
}

/* An explicit request for a backend-side path must not silently become a
 * slower one: the user asked for it to measure or test exactly that path. */
static gboolean require_capability(const th_backend *backend, th_update_path requested,
                                   gboolean present, const char *function, const char *flag,
                                   GError **error)
{
    if (present)
        return TRUE;
    g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_UPDATE_PATH,
                "update path \"%s\" (cpd.update) needs %s (capability %s), which plugin "
                "'%s' does not implement; use \"auto\" to take the best path the plugin has",
                th_update_path_name(requested), function, flag, th_backend_info(backend)->id);
    return FALSE;
}

gboolean th_cpd_resolve_update_path(const th_backend *backend, th_update_path requested,
                                    th_update_path *resolved, GError **error)
{
    const gboolean sweep = th_backend_has_als_sweep(backend);
    const gboolean update = th_backend_has_als_update(backend);
    switch (requested) {
    case TH_UPDATE_AUTO:
        *resolved = sweep ? TH_UPDATE_SWEEP : update ? TH_UPDATE_MODE : TH_UPDATE_HOST;
        return TRUE;
    case TH_UPDATE_SWEEP:
        *resolved = requested;
        return require_capability(backend, requested, sweep, "als_sweep",
                                  "TH_CAP_ALS_SWEEP, plugin ABI 1.1", error);
    case TH_UPDATE_MODE:
        *resolved = requested;
        return require_capability(backend, requested, update, "als_update", "TH_CAP_ALS_UPDATE",
                                  error);
    case TH_UPDATE_HOST:
        *resolved = requested;
        return TRUE;
    }
    g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_UPDATE_PATH, "unknown update path %d",
                (int)requested);
    return FALSE;
}

th_cpd_params th_cpd_params_from_config(const th_config *config, uint32_t rank)
{
    th_cpd_params params = {
        .rank = rank,
        .max_iters = config->max_iters,
        .tolerance = config->tolerance,
        .seed = config->seed,
        .update = TH_UPDATE_AUTO,
    };
    (void)th_update_path_from_name(config->update, &params.update);
    return params;
}

gboolean th_cpd_check_tensor(const th_sptensor *tensor, GError **error)
{
    if (th_sptensor_norm_squared(tensor) > 0.0)
        return TRUE;
    g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_ZERO_TENSOR,
                "every value of the tensor is zero (%" G_GUINT64_FORMAT " stored entries, norm "
                "0): a tensor with norm 0 has no CP decomposition",
                tensor->nnz);
    return FALSE;
}

/* a * b, or UINT64_MAX when that overflows. */
static uint64_t saturating_product(uint64_t a, uint64_t b)
{
    return (b != 0 && a > UINT64_MAX / b) ? UINT64_MAX : a * b;
}

uint64_t th_cpd_rank_bound(const th_sptensor *tensor)
{
    uint64_t bound = tensor->nnz;
    for (uint32_t n = 0; n < tensor->nmodes; ++n) {
        uint64_t others = 1;
        for (uint32_t m = 0; m < tensor->nmodes; ++m)
            if (m != n)
                others = saturating_product(others, tensor->dims[m]);
        bound = MIN(bound, others);
    }
    return bound;
}

gboolean th_cpd_check_rank(const th_backend *backend, uint32_t rank, const char *where,
                           GError **error)
{
    const th_plugin_info *info = th_backend_info(backend);
    if (rank <= info->max_rank)
        return TRUE;
    g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_RANK,
                "%s%scpd.rank: %u is above the largest rank plugin '%s' supports (%u)",
                where ? where : "", where ? ": " : "", rank, info->id, info->max_rank);
    return FALSE;
}

double **th_cpd_initial_factors(const th_index *dims, uint32_t nmodes, uint32_t rank,
                                uint64_t seed)
{
    th_rng rng;
    th_rng_seed(&rng, seed);
    double **factors = g_new0(double *, nmodes);
    for (uint32_t m = 0; m < nmodes; ++m) {
        const uint64_t n = (uint64_t)dims[m] * rank;
        factors[m] = g_new(double, n);
        for (uint64_t k = 0; k < n; ++k)
            factors[m][k] = th_rng_uniform(&rng);
    }
    return factors;
}

void th_cpd_free_factors(double **factors, uint32_t nmodes)
{
    if (!factors)
        return;
    for (uint32_t m = 0; m < nmodes; ++m)
        g_free(factors[m]);
    g_free(factors);
}

void th_cpd_result_free(th_cpd_result *result)
{
    if (!result)
        return;
    th_cpd_free_factors(result->factors, result->nmodes);
    g_free(result->dims);
    g_free(result->lambda);
    g_free(result->mttkrp_seconds);
    g_free(result->mttkrp_device_seconds);
    if (result->iterations)
        g_array_unref(result->iterations);
    g_free(result);
}

/* State of one run; everything R x R lives here, tall data in the backend
 * (or, on the host-update path, in `host_factor`/`host_mttkrp` scratch). */
typedef struct cpd_state {
    const th_cpd_callbacks *callbacks;
    th_backend *backend;
    const th_sptensor *tensor;
    uint32_t nmodes, rank;
    th_update_path path;
    double **grams;  /* [nmodes] rank x rank */
    double *hadamard; /* rank x rank scratch */
    double *w;        /* rank x rank pseudo-inverse */
    double *lambda;
    double *inner;
    double *host_mttkrp; /* largest dims[m] x rank, host-update path only */
    double *host_factor;
    uint32_t modes_updated; /* in the current iteration */
    gboolean any_update;    /* lambda and inner hold a mode's update */
    th_cpd_result *result;
} cpd_state;

static void state_clear(cpd_state *s)
{
    if (s->grams)
        for (uint32_t m = 0; m < s->nmodes; ++m)
            g_free(s->grams[m]);
    g_free(s->grams);
    g_free(s->hadamard);
    g_free(s->w);
    g_free(s->lambda);
    g_free(s->inner);
    g_free(s->host_mttkrp);
    g_free(s->host_factor);
}

/* Host-side twin of the ABI's als_update, for backends without it. */
static gboolean host_update(cpd_state *s, uint32_t mode, int32_t norm, GError **error)
{
    const uint64_t rows = s->tensor->dims[mode];
    if (!th_backend_get_mttkrp_result(s->backend, mode, s->host_mttkrp, error))
        return FALSE;
    th_dense_matmul(s->host_mttkrp, s->w, rows, s->rank, s->rank, s->host_factor);
    th_dense_normalize_columns(s->host_factor, rows, s->rank, norm == TH_NORM_MAX, s->lambda);
    th_dense_gram(s->host_factor, rows, s->rank, s->grams[mode]);
    th_dense_column_inner(s->host_mttkrp, s->host_factor, rows, s->rank, s->inner);
    return th_backend_set_factor(s->backend, mode, s->host_factor, error);
}

static double fit_from_terms(const cpd_state *s, double norm_x_squared)
{
    /* ||M||^2 = lambda^T (hadamard of all grams) lambda and
     * <X, M> = sum_r lambda_r inner_r from the last mode's MTTKRP. */
    th_dense_hadamard_except(s->grams, s->nmodes, UINT32_MAX, s->rank, s->hadamard);
    double norm_model_squared = 0.0, inner_product = 0.0;
    for (uint32_t r = 0; r < s->rank; ++r) {
        inner_product += s->lambda[r] * s->inner[r];
        for (uint32_t q = 0; q < s->rank; ++q)
            norm_model_squared += s->lambda[r] * s->lambda[q] * s->hadamard[(size_t)r * s->rank + q];
    }
    double residual_squared = norm_x_squared + norm_model_squared - 2.0 * inner_product;
    /* Rounding can push a near-perfect fit slightly negative. */
    if (residual_squared < 0.0)
        residual_squared = 0.0;
    return 1.0 - sqrt(residual_squared) / sqrt(norm_x_squared);
}

/* Adds the backend's own time of the latest MTTKRP of `mode`; one mode
 * without it makes the whole sum "not reported". */
static gboolean add_device_time(cpd_state *s, uint32_t mode, GError **error)
{
    th_cpd_result *r = s->result;
    th_mode_info info;
    if (!th_backend_mode_info(s->backend, mode, &info, error))
        return FALSE;
    if (info.last_mttkrp_seconds >= 0.0 && r->mttkrp_device_seconds[mode] >= 0.0)
        r->mttkrp_device_seconds[mode] += info.last_mttkrp_seconds;
    else
        r->mttkrp_device_seconds[mode] = -1.0;
    return TRUE;
}

/* One mode the classic way: mttkrp(), the host's solve, then als_update()
 * or the host's update. On the sweep path this finishes an iteration whose
 * sweep stopped early; its MTTKRP time then belongs to sweep_seconds, as the
 * other iterations' MTTKRPs of that mode are inside als_sweep. */
static gboolean update_one_mode(cpd_state *s, uint32_t iteration, uint32_t mode, int32_t norm,
                                GError **error)
{
    th_cpd_result *r = s->result;
    if (s->callbacks && s->callbacks->mode)
        s->callbacks->mode(iteration, mode, s->nmodes, s->callbacks->user_data);
    gint64 start = g_get_monotonic_time();
    if (!th_backend_mttkrp(s->backend, mode, error))
        return FALSE;
    if (s->path == TH_UPDATE_SWEEP)
        r->sweep_seconds += seconds_since(start);
    else
        r->mttkrp_seconds[mode] += seconds_since(start);
    if (!add_device_time(s, mode, error))
        return FALSE;

    start = g_get_monotonic_time();
    th_dense_hadamard_except(s->grams, s->nmodes, mode, s->rank, s->hadamard);
    r->pinv_fallbacks += (uint32_t)th_dense_spd_pinv(s->hadamard, s->rank, s->w);
    r->algebra_seconds += seconds_since(start);

    start = g_get_monotonic_time();
    gboolean ok = s->path == TH_UPDATE_HOST
                      ? host_update(s, mode, norm, error)
                      : th_backend_als_update(s->backend, mode, s->w, norm, s->lambda,
                                              s->grams[mode], s->inner, error);
    r->update_seconds += seconds_since(start);
    if (ok) {
        s->modes_updated = mode + 1;
        s->any_update = TRUE;
    }
    return ok;
}

/* One als_sweep(); *modes_done says where the host must take over. The
 * host's Gram array is the sweep's in/out format as it is. */
static gboolean run_sweep(cpd_state *s, uint32_t iteration, int32_t norm, uint32_t *modes_done,
                          GError **error)
{
    th_cpd_result *r = s->result;
    if (s->callbacks && s->callbacks->mode)
        s->callbacks->mode(iteration, 0, s->nmodes, s->callbacks->user_data);
    const gint64 start = g_get_monotonic_time();
    gboolean ok = th_backend_als_sweep(s->backend, norm, s->grams, s->lambda, s->inner,
                                       modes_done, error);
    r->sweep_seconds += seconds_since(start);
    /* A cancelled sweep still says which modes it finished. */
    s->modes_updated = MIN(*modes_done, s->nmodes);
    s->any_update = s->any_update || s->modes_updated > 0;
    if (!ok)
        return FALSE;
    for (uint32_t mode = 0; mode < *modes_done; ++mode)
        if (!add_device_time(s, mode, error))
            return FALSE;
    if (*modes_done < s->nmodes) {
        r->sweep_fallbacks++;
        th_log(TH_LOG_DEBUG,
               "iteration %u: als_sweep stopped at mode %u of %u (Cholesky breakdown); the "
               "host finishes the iteration",
               iteration, *modes_done + 1, s->nmodes);
    }
    return TRUE;
}

static gboolean run_iteration(cpd_state *s, uint32_t iteration, GError **error)
{
    const int32_t norm = iteration == 1 ? TH_NORM_2 : TH_NORM_MAX;
    uint32_t first_mode = 0;
    s->modes_updated = 0;
    if (s->path == TH_UPDATE_SWEEP && !run_sweep(s, iteration, norm, &first_mode, error))
        return FALSE;
    /* lambda and inner end up those of the last mode, whoever updated it. */
    for (uint32_t mode = first_mode; mode < s->nmodes; ++mode)
        if (!update_one_mode(s, iteration, mode, norm, error))
            return FALSE;
    return TRUE;
}

/* The backend gave a call up because a stop was requested. */
static gboolean is_cancellation(const GError *error)
{
    return g_error_matches(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_CANCELLED);
}

static gboolean start_run(cpd_state *s, const th_cpd_params *params, GError **error)
{
    const uint32_t nmodes = s->nmodes, rank = s->rank;
    th_index largest = 0;
    for (uint32_t m = 0; m < nmodes; ++m)
        largest = MAX(largest, s->tensor->dims[m]);
    s->grams = g_new0(double *, nmodes);
    s->hadamard = g_new(double, (size_t)rank * rank);
    s->w = g_new(double, (size_t)rank * rank);
    s->lambda = g_new0(double, rank);
    s->inner = g_new0(double, rank);
    if (s->path == TH_UPDATE_HOST) {
        s->host_mttkrp = g_new(double, (size_t)largest * rank);
        s->host_factor = g_new(double, (size_t)largest * rank);
    }
    double **initial = th_cpd_initial_factors(s->tensor->dims, nmodes, rank, params->seed);
    gboolean ok = TRUE;
    for (uint32_t m = 0; m < nmodes && ok; ++m) {
        s->grams[m] = g_new(double, (size_t)rank * rank);
        th_dense_gram(initial[m], s->tensor->dims[m], rank, s->grams[m]);
        ok = th_backend_set_factor(s->backend, m, initial[m], error);
    }
    th_cpd_free_factors(initial, nmodes);
    return ok;
}

static gboolean collect_factors(cpd_state *s, GError **error)
{
    th_cpd_result *r = s->result;
    r->lambda = g_memdup2(s->lambda, sizeof(double) * s->rank);
    /* The backend decomposed the tensor times value_scale. */
    for (uint32_t k = 0; k < s->rank; ++k)
        r->lambda[k] /= s->tensor->value_scale;
    r->factors = g_new0(double *, s->nmodes);
    for (uint32_t m = 0; m < s->nmodes; ++m) {
        r->factors[m] = g_new(double, (size_t)r->dims[m] * s->rank);
        if (!th_backend_get_factor(s->backend, m, r->factors[m], error))
            return FALSE;
    }
    th_cp_model_arrange(r->lambda, r->factors, r->dims, r->nmodes, r->rank);
    return TRUE;
}

th_cpd_result *th_cp_als(th_backend *backend, const th_sptensor *tensor,
                         const th_cpd_params *params, const th_cpd_callbacks *callbacks,
                         GError **error)
{
    g_return_val_if_fail(backend->nmodes == tensor->nmodes && backend->rank == params->rank, NULL);
    const gint64 run_start = g_get_monotonic_time();
    const uint32_t nmodes = tensor->nmodes;
    th_update_path path;
    if (!th_cpd_resolve_update_path(backend, params->update, &path, error))
        return NULL;

    th_cpd_result *r = g_new0(th_cpd_result, 1);
    r->nmodes = nmodes;
    r->rank = params->rank;
    r->dims = g_memdup2(tensor->dims, sizeof(th_index) * nmodes);
    r->iterations = g_array_new(FALSE, FALSE, sizeof(th_cpd_iteration));
    r->mttkrp_seconds = g_new0(double, nmodes);
    r->mttkrp_device_seconds = g_new0(double, nmodes);
    if (path == TH_UPDATE_SWEEP)
        for (uint32_t m = 0; m < nmodes; ++m)
            r->mttkrp_seconds[m] = TH_CPD_NOT_MEASURED;
    r->update_path = path;

    cpd_state s = {
        .callbacks = callbacks,
        .backend = backend,
        .tensor = tensor,
        .nmodes = nmodes,
        .rank = params->rank,
        .path = path,
        .result = r,
    };
    const double norm_x_squared = th_sptensor_norm_squared(tensor);
    gboolean ok = start_run(&s, params, error);
    double previous_fit = 0.0;
    for (uint32_t it = 1; ok && it <= params->max_iters; ++it) {
        const gint64 start = g_get_monotonic_time();
        g_autoptr(GError) iteration_error = NULL;
        if (!run_iteration(&s, it, &iteration_error)) {
            if (!is_cancellation(iteration_error)) {
                g_propagate_error(error, g_steal_pointer(&iteration_error));
                ok = FALSE;
                break;
            }
            /* Cut inside a long iteration: keep the ALS state after the last
             * mode that was updated, a valid model with a computable fit. */
            th_log(TH_LOG_DEBUG, "iteration %u stopped after %u of %u modes: %s", it,
                   s.modes_updated, nmodes, iteration_error->message);
            r->interrupted = TRUE;
            r->partial_modes = s.modes_updated;
            r->fit = s.any_update ? fit_from_terms(&s, norm_x_squared) : NAN;
            break;
        }
        const gint64 fit_start = g_get_monotonic_time();
        const double fit = fit_from_terms(&s, norm_x_squared);
        r->algebra_seconds += seconds_since(fit_start);
        if (!isfinite(fit)) {
            /* Going on would only carry NaN into every later factor. */
            g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_NOT_FINITE,
                        "iteration %u: the fit is not finite (%g): the backend's results or "
                        "the normal equations overflowed or produced NaN (plugin '%s')",
                        it, fit, th_backend_info(backend)->id);
            ok = FALSE;
            break;
        }
        th_cpd_iteration record = {
            .iteration = it,
            .fit = fit,
            .delta = fit - previous_fit,
            .seconds = seconds_since(start),
        };
        g_array_append_val(r->iterations, record);
        r->fit = fit;
        const gboolean go_on = !(callbacks && callbacks->iteration) ||
                               callbacks->iteration(&record, callbacks->user_data);
        if (it > 1 && fabs(record.delta) < params->tolerance) {
            r->converged = TRUE;
            break;
        }
        previous_fit = fit;
        if (!go_on || th_cancel_requested()) {
            r->interrupted = TRUE;
            break;
        }
    }
    if (ok && s.any_update)
        ok = collect_factors(&s, error);
    state_clear(&s);
    r->total_seconds = seconds_since(run_start);
    if (!ok) {
        th_cpd_result_free(r);
        return NULL;
    }
    return r;
}
