#include "cpd/cp_als.h"

#include <math.h>
#include <string.h>

#include "base/cancel.h"
#include "cpd/cp_model.h"
#include "cpd/initial_factors.h"
#include "base/log.h"

G_DEFINE_QUARK(th-cpd-error-quark, th_cpd_error)

static double seconds_since(gint64 start) { return (double)(g_get_monotonic_time() - start) / 1e6; }

static const char *const update_path_names[] = {
    [TH_UPDATE_AUTO] = "auto",
    [TH_UPDATE_SWEEP] = "sweep",
    [TH_UPDATE_MODE] = "mode",
    [TH_UPDATE_HOST] = "host",
};

static const char *const init_source_names[] = {
    [TH_INIT_HOST] = "host",
    [TH_INIT_BACKEND] = "backend",
    [TH_INIT_GIVEN] = "given",
};

static const char *const model_names[] = {
    [TH_MODEL_LEAST_SQUARES] = "least-squares",
    [TH_MODEL_POISSON] = "poisson",
    [TH_MODEL_COMPLETION] = "completion",
};

const char *th_cpd_model_name(th_cpd_model model)
{
    return (size_t)model < G_N_ELEMENTS(model_names) ? model_names[model] : "?";
}

gboolean th_cpd_model_from_name(const char *name, th_cpd_model *model)
{
    for (size_t i = 0; name && i < G_N_ELEMENTS(model_names); ++i) {
        if (strcmp(name, model_names[i]) == 0) {
            *model = (th_cpd_model)i;
            return TRUE;
        }
    }
    return FALSE;
}

th_apr_params th_apr_params_default(void)
{
    return (th_apr_params){
        .max_inner_iters = TH_APR_DEFAULT_MAX_INNER_ITERS,
        .kappa = TH_APR_DEFAULT_KAPPA,
        .kappa_tolerance = TH_APR_DEFAULT_KAPPA_TOLERANCE,
        .epsilon = TH_APR_DEFAULT_EPSILON,
        .phi_threshold = TH_APR_DEFAULT_PHI_THRESHOLD,
    };
}

const char *th_init_source_name(th_init_source source)
{
    return (size_t)source < G_N_ELEMENTS(init_source_names) ? init_source_names[source] : "?";
}

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

static gboolean resolve_update_path(const th_backend *backend, th_update_path requested,
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

gboolean th_cpd_converged(uint32_t iteration, double delta, double tolerance)
{
    /* Iteration 1's change is from the fit of no model. A fit that drops by
     * the tolerance or more is moving, not converged. */
    return iteration > 1 && fabs(delta) < tolerance;
}

const char *th_cpd_constraints_name(gboolean nonneg)
{
    return nonneg ? "nonneg" : "none";
}

uint64_t th_cpd_every_mode(uint32_t nmodes)
{
    return nmodes >= 64 ? UINT64_MAX : (UINT64_C(1) << nmodes) - 1;
}

uint64_t th_cpd_nonneg_mask(const th_cpd_params *params, uint32_t nmodes)
{
    return params->nonneg_modes & th_cpd_every_mode(nmodes);
}

double th_cpd_l1(const th_cpd_params *params, uint32_t mode)
{
    return params->l1_listed ? (mode < params->l1_listed && mode < TH_MAX_MODES
                                    ? params->l1[mode]
                                    : 0.0)
                             : params->l1[0];
}

gboolean th_cpd_regularised(const th_cpd_params *params, uint32_t nmodes)
{
    gboolean regularised = params->l2 != 0.0;
    for (uint32_t m = 0; m < nmodes; ++m)
        regularised = regularised || th_cpd_l1(params, m) != 0.0;
    return regularised;
}

uint64_t th_cpd_descent_mask(const th_cpd_params *params, uint32_t nmodes)
{
    uint64_t mask = th_cpd_nonneg_mask(params, nmodes);
    for (uint32_t m = 0; m < nmodes && m < 64; ++m)
        if (th_cpd_l1(params, m) != 0.0)
            mask |= UINT64_C(1) << m;
    return mask;
}

gboolean th_cpd_check_constraints_order(const th_cpd_params *params, uint32_t nmodes,
                                        GError **error)
{
    if (params->constraints_listed != 0 && params->constraints_listed != nmodes) {
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_CONSTRAINTS,
                    "%u constraints given, one per mode, but the tensor has %u modes",
                    params->constraints_listed, nmodes);
        return FALSE;
    }
    if (params->l1_listed != 0 && params->l1_listed != nmodes) {
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_L1,
                    "%u l1 weights given, one per mode, but the tensor has %u modes",
                    params->l1_listed, nmodes);
        return FALSE;
    }
    return TRUE;
}

th_cpd_params th_cpd_params_from_config(const th_config *config, uint32_t rank)
{
    th_cpd_params params = {
        .rank = rank,
        .max_iters = config->max_iters,
        .tolerance = config->tolerance,
        .seed = config->seed,
        .update = TH_UPDATE_AUTO,
        .apr = {
            .max_inner_iters = config->max_inner_iters,
            .kappa = config->kappa,
            .kappa_tolerance = config->kappa_tolerance,
            .epsilon = config->epsilon,
            .phi_threshold = config->phi_threshold,
        },
        .hals_max_passes = config->hals_passes,
        .hals_budget = config->hals_budget,
        .completion = {
            .l2 = config->l2,
            .holdout = config->holdout,
            .passes = TH_COMPLETION_DEFAULT_PASSES,
        },
    };
    (void)th_update_path_from_name(config->update, &params.update);
    (void)th_cpd_model_from_name(config->model, &params.model);
    if (params.model == TH_MODEL_LEAST_SQUARES && g_strcmp0(config->missing, "unlisted") == 0)
        params.model = TH_MODEL_COMPLETION;
    const th_config_choices *constraints = &config->constraints;
    params.constraints_listed = constraints->listed ? constraints->items->len : 0;
    for (guint m = 0; m < constraints->items->len; ++m) {
        if (g_strcmp0(g_ptr_array_index(constraints->items, m), th_cpd_constraints_name(TRUE)))
            continue;
        if (!constraints->listed)
            params.nonneg_modes = UINT64_MAX;
        else if (m < 64)
            params.nonneg_modes |= UINT64_C(1) << m;
    }
    /* CP-ALS's regularisation (completion keeps its own ridge above; the
     * loader refuses cpd.l1 with completion and both with Poisson). */
    if (params.model == TH_MODEL_LEAST_SQUARES) {
        params.l2 = config->l2;
        const th_config_numbers *l1 = &config->l1;
        /* A list longer than any order is refused by the order check. */
        params.l1_listed = l1->listed ? l1->values->len : 0;
        for (guint m = 0; m < l1->values->len && m < TH_MAX_MODES; ++m)
            params.l1[m] = g_array_index(l1->values, double, m);
    }
    return params;
}

gboolean th_cpd_check_regularised_values(const th_cpd_params *params,
                                         const th_sptensor *tensor, GError **error)
{
    if (params->model != TH_MODEL_LEAST_SQUARES ||
        !th_cpd_regularised(params, tensor->nmodes) ||
        (tensor->value_scale == 1.0 && th_sptensor_in_safe_range(tensor)))
        return TRUE;
    g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT,
                "the largest |value| is %g (in the file's units), outside [2^-64, 2^64]: "
                "regularised CP-ALS (cpd.l1, cpd.l2) fits the values as read, as its l1 and "
                "l2 terms are not scale-invariant, and does not scale them into that range "
                "as CP-ALS otherwise does; rescale the data, and the weights with it",
                th_sptensor_max_abs(tensor) / tensor->value_scale);
    return FALSE;
}

gboolean th_cpd_check_norm(double norm_squared, uint64_t nnz, GError **error)
{
    if (norm_squared > 0.0)
        return TRUE;
    g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_ZERO_TENSOR,
                "every value of the tensor is zero (%" G_GUINT64_FORMAT " stored entries, norm "
                "0): a tensor with norm 0 has no CP decomposition",
                nnz);
    return FALSE;
}

gboolean th_cpd_check_tensor(const th_sptensor *tensor, GError **error)
{
    return th_cpd_check_norm(th_sptensor_norm_squared(tensor), tensor->nnz, error);
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

static gboolean check_rank(const th_backend *backend, uint32_t rank, const char *where,
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

/* A model other than least squares runs on the 1.4 functions (completion
 * on 1.5's row_least_squares too), with its updates in the backend: there
 * is no path to choose. */
static gboolean check_model(const th_backend *backend, const th_cpd_params *params,
                            GError **error)
{
    if (params->model == TH_MODEL_LEAST_SQUARES)
        return TRUE;
    if (params->model != TH_MODEL_POISSON && params->model != TH_MODEL_COMPLETION) {
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_MODEL, "unknown model %d",
                    (int)params->model);
        return FALSE;
    }
    if (params->model == TH_MODEL_COMPLETION && !th_backend_has_row_least_squares(backend)) {
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_MODEL,
                    "tensor completion needs row_least_squares (plugin ABI 1.5) and "
                    "generalized_mttkrp (1.4), which plugin '%s' does not implement",
                    th_backend_info(backend)->id);
        return FALSE;
    }
    if (params->model == TH_MODEL_POISSON && !th_backend_has_generalized_mttkrp(backend)) {
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_MODEL,
                    "model \"%s\" (cpd.model) needs generalized_mttkrp and factor_update "
                    "(plugin ABI 1.4), which plugin '%s' does not implement",
                    th_cpd_model_name(params->model), th_backend_info(backend)->id);
        return FALSE;
    }
    if (params->update != TH_UPDATE_AUTO) {
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_UPDATE_PATH,
                    "update path \"%s\" (cpd.update) is for CP-ALS; model \"%s\" always "
                    "updates in the backend: use \"auto\"",
                    th_update_path_name(params->update), th_cpd_model_name(params->model));
        return FALSE;
    }
    return TRUE;
}

/* The weights of CP-ALS's regularisation: finite and >= 0 (the loader
 * and the API check them; this guards every other caller). */
static gboolean check_weight(const char *name, double value, GError **error)
{
    if (isfinite(value) && value >= 0.0)
        return TRUE;
    g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT,
                "%s %g: expected a finite number >= 0", name, value);
    return FALSE;
}

/* Constraints and regularisation against the model: CP-ALS takes both
 * (its nonnegative and sparse modes update by coordinate descent, per mode
 * in the backend or on the host, or inside a sweep of ABI 1.6);
 * completion's row solves take the constraint and their own ridge
 * (completion.l2) but no l1; the Poisson model neither. */
static gboolean check_constraints(const th_cpd_params *params, GError **error)
{
    if (params->model == TH_MODEL_POISSON && params->nonneg_modes) {
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_MODEL,
                    "constraints \"nonneg\" (cpd.constraints) are for the least-squares model; "
                    "model \"%s\" has nonnegative factors by construction",
                    th_cpd_model_name(params->model));
        return FALSE;
    }
    const gboolean regularised = th_cpd_regularised(params, TH_MAX_MODES);
    if (params->model != TH_MODEL_LEAST_SQUARES && regularised) {
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_MODEL,
                    "l1 and l2 (cpd.l1, cpd.l2) regularise CP-ALS, the least-squares model "
                    "with every entry listed; model \"%s\"%s",
                    th_cpd_model_name(params->model),
                    params->model == TH_MODEL_COMPLETION
                        ? " (row-wise ALS) has no l1 term and takes its ridge as completion.l2"
                        : " has neither");
        return FALSE;
    }
    if (!check_weight("l2 (cpd.l2)", params->l2, error))
        return FALSE;
    const uint32_t listed = params->l1_listed ? MIN(params->l1_listed, TH_MAX_MODES) : 1;
    for (uint32_t m = 0; m < listed; ++m)
        if (!check_weight("l1 (cpd.l1)", params->l1[m], error))
            return FALSE;
    return params->hals_max_passes == 0 ||
           check_weight("hals_budget (cpd.hals_budget)", params->hals_budget, error);
}

/* "plugin 'ID' was built against ABI 1.N" for the messages below. */
static char *built_against(const th_backend *backend)
{
    return g_strdup_printf("plugin '%s' was built against ABI %u.%u",
                           th_backend_info(backend)->id, TH_ABI_VERSION_MAJOR,
                           th_backend_abi_minor(backend));
}

/* The path of a run with constraints or regularisation. The sweep takes
 * them from plugin ABI 1.6 on (als_sweep's in-fields), so "auto" prefers
 * it there as for any run; then per mode in the backend: the free modes
 * without l1 by als_update with the ridge's inverse (any plugin), the
 * coordinate-descent modes by als_update_nonneg (a plugin before 1.6 runs
 * only 1.5's nonnegative update there; the host updates the modes that
 * need more, mode by mode, with the same result); else on the host.
 * "sweep" on a plugin before 1.6, and "mode" on a backend without the
 * functions the modes need, are errors naming the plugin. */
static gboolean resolve_regularised_path(const th_backend *backend,
                                         const th_cpd_params *params, uint32_t nmodes,
                                         th_update_path *resolved, GError **error)
{
    const th_update_path requested = params->update;
    const gboolean descent = th_cpd_descent_mask(params, nmodes) != 0;
    const gboolean update = th_backend_has_als_update(backend);
    const gboolean per_mode =
        update && (!descent || th_backend_has_als_update_nonneg(backend));
    const gboolean sweep = th_backend_has_als_sweep(backend);
    if (requested == TH_UPDATE_AUTO) {
        *resolved = sweep && th_backend_takes_abi_1_6(backend) ? TH_UPDATE_SWEEP
                    : per_mode                                 ? TH_UPDATE_MODE
                                                               : TH_UPDATE_HOST;
        return TRUE;
    }
    *resolved = requested;
    if (requested == TH_UPDATE_SWEEP) {
        if (!require_capability(backend, requested, sweep, "als_sweep",
                                "TH_CAP_ALS_SWEEP, plugin ABI 1.1", error))
            return FALSE;
        if (th_backend_takes_abi_1_6(backend))
            return TRUE;
        g_autofree char *built = built_against(backend);
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_UPDATE_PATH,
                    "update path \"sweep\" (cpd.update) with constraints, l1 or l2 needs "
                    "als_sweep of plugin ABI 1.6, which takes them; %s, whose sweep would "
                    "ignore them: use \"auto\" to take the best path the plugin has, \"mode\" "
                    "or \"host\"",
                    built);
        return FALSE;
    }
    if (requested != TH_UPDATE_MODE || per_mode)
        return TRUE;
    if (!descent)
        return require_capability(backend, requested, update, "als_update",
                                  "TH_CAP_ALS_UPDATE", error);
    g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_UPDATE_PATH,
                "update path \"mode\" (cpd.update) with constraints \"nonneg\" or l1 needs "
                "als_update_nonneg (plugin ABI 1.5) and als_update (capability "
                "TH_CAP_ALS_UPDATE), which plugin '%s' does not both implement; use \"auto\" "
                "to take the best path the plugin has",
                th_backend_info(backend)->id);
    return FALSE;
}

/* The update path of a least-squares run. */
static gboolean resolve_least_squares_path(const th_backend *backend,
                                           const th_cpd_params *params,
                                           th_update_path *resolved, GError **error)
{
    /* The tensor's order is not known yet: a mask over every mode a list
     * may name. */
    if (params->nonneg_modes || th_cpd_regularised(params, TH_MAX_MODES))
        return resolve_regularised_path(backend, params, TH_MAX_MODES, resolved, error);
    return resolve_update_path(backend, params->update, resolved, error);
}

/* A run of several processes (params->dist): least squares, where each
 * process's partial MTTKRP is summed over the processes before the update:
 * by a backend that sums them itself (backend_sums) on any update path,
 * else on the host path. */
static gboolean resolve_distributed_path(const th_backend *backend, const th_cpd_params *params,
                                         gboolean backend_sums, th_update_path *resolved,
                                         GError **error)
{
    const uint32_t processes = th_dist_size(params->dist);
    if (params->model != TH_MODEL_LEAST_SQUARES) {
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_MODEL,
                    "model \"%s\" runs in one process; a run of %u processes fits least "
                    "squares (CP-ALS, with or without constraints and regularisation)",
                    th_cpd_model_name(params->model), processes);
        return FALSE;
    }
    if (backend_sums)
        return resolve_least_squares_path(backend, params, resolved, error);
    if (params->update != TH_UPDATE_AUTO && params->update != TH_UPDATE_HOST) {
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_UPDATE_PATH,
                    "update path \"%s\" (cpd.update) keeps the MTTKRP in the backend, but a "
                    "run of %u processes on %s sums each one's partial MTTKRP on the host: use "
                    "\"auto\" or \"host\"",
                    th_update_path_name(params->update), processes,
                    th_backend_info(backend)->id);
        return FALSE;
    }
    *resolved = TH_UPDATE_HOST;
    return TRUE;
}

gboolean th_cpd_plan(th_backend *backend, const th_cpd_params *params, const char *where,
                     GError **error)
{
    th_update_path path = TH_UPDATE_MODE;
    const gboolean backend_sums = params->dist != NULL && th_backend_sums_processes(backend);
    if ((params->dist != NULL &&
         !resolve_distributed_path(backend, params, backend_sums, &path, error)) ||
        !check_model(backend, params, error) || !check_constraints(params, error) ||
        !check_rank(backend, params->rank, where, error) ||
        (params->model == TH_MODEL_LEAST_SQUARES && params->dist == NULL &&
         !resolve_least_squares_path(backend, params, &path, error)))
        return FALSE;
    backend->planned_model = (int32_t)params->model;
    backend->planned_nonneg_modes = params->nonneg_modes;
    backend->planned_descent_modes = th_cpd_descent_mask(params, TH_MAX_MODES);
    backend->planned_regularised = th_cpd_regularised(params, TH_MAX_MODES);
    backend->planned = TRUE;
    backend->planned_rank = params->rank;
    backend->requested_update = params->update;
    backend->update_path = path;
    backend->planned_process_sums = backend_sums;
    return TRUE;
}

double **th_cpd_initial_factors(const th_index *dims, uint32_t nmodes, uint32_t rank,
                                uint64_t seed)
{
    double **factors = g_new0(double *, nmodes);
    for (uint32_t m = 0; m < nmodes; ++m) {
        factors[m] = g_new(double, (size_t)dims[m] * rank);
        th_initial_factor_fill(factors[m], dims[m], rank, seed, m);
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

gboolean th_cpd_is_cancellation(const GError *error)
{
    return g_error_matches(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_CANCELLED);
}

void th_cpd_announce_phase(const th_cpd_callbacks *callbacks, const char *what)
{
    if (callbacks && callbacks->phase)
        callbacks->phase(what, callbacks->user_data);
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

/* `n` doubles whose pages are already mapped, touched on all cores: a
 * backend's copy into fresh memory otherwise takes every page fault, and
 * zeroes every page, on the one thread that copies (a 25.5M x 32 factor
 * is 6.5 GB). */
static double *new_prefaulted(size_t n)
{
    double *a = th_alloc_large(n, sizeof(double));
    const size_t per_page = 4096 / sizeof(double);
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < n; k += per_page)
        a[k] = 0.0;
    return a;
}

/* The result factors, allocated and pre-faulted on a thread of their own
 * while the backend iterates: for Nell-1's 7.8 GB of factors that work
 * otherwise sat between the last iteration and the copy back. */
typedef struct result_memory {
    GThread *thread;
    uint32_t nmodes;
    size_t sizes[TH_MAX_MODES];
    double *factors[TH_MAX_MODES]; /* taken by collect_factors, else freed */
} result_memory;

static gpointer fault_in_results(gpointer data)
{
    result_memory *m = data;
    for (uint32_t k = 0; k < m->nmodes; ++k)
        m->factors[k] = new_prefaulted(m->sizes[k]);
    return NULL;
}

static void result_memory_start(result_memory *m, const th_index *dims, uint32_t nmodes,
                                uint32_t rank)
{
    m->nmodes = nmodes;
    for (uint32_t k = 0; k < nmodes; ++k)
        m->sizes[k] = (size_t)dims[k] * rank;
    m->thread = g_thread_new("th-result-memory", fault_in_results, m);
}

static void result_memory_join(result_memory *m)
{
    if (m->thread)
        g_thread_join(m->thread);
    m->thread = NULL;
}

static void result_memory_clear(result_memory *m)
{
    result_memory_join(m);
    for (uint32_t k = 0; k < m->nmodes; ++k)
        g_free(m->factors[k]);
}

/* Whether the state's updates are regularised (a ridge or an l1). */
static gboolean state_regularised(const th_als_state *s)
{
    gboolean regularised = s->l2 != 0.0;
    for (uint32_t m = 0; m < s->nmodes; ++m)
        regularised = regularised || s->l1[m] != 0.0;
    return regularised;
}

/* The regularised objective of the final model, from the factors just
 * fetched (their columns' 1-norms, which the l1 term needs). A regularised
 * run's tensor is never scaled (th_cpd_check_regularised_values), so its
 * value_scale is 1; the division keeps the file's units regardless. */
static void final_objective(th_als_state *s, const th_sptensor *tensor, th_cpd_result *r)
{
    g_autofree double *sums = g_new0(double, (size_t)s->nmodes * s->rank);
    g_autofree double **rows = g_new(double *, s->nmodes);
    for (uint32_t m = 0; m < s->nmodes; ++m) {
        rows[m] = sums + (size_t)m * s->rank;
        const double *a = r->factors[m];
        for (uint64_t i = 0; s->l1[m] != 0.0 && i < r->dims[m]; ++i)
            for (uint32_t k = 0; k < s->rank; ++k)
                rows[m][k] += fabs(a[i * s->rank + k]);
    }
    const double scale = tensor->value_scale;
    r->objective = th_als_state_objective(s, th_sptensor_norm_squared(tensor), rows) /
                   (scale * scale);
}

/* The model the state describes, in the published form (cp_model.h). */
static gboolean collect_factors(th_als_state *s, const th_sptensor *tensor, th_cpd_result *r,
                                result_memory *memory, const th_cpd_callbacks *callbacks,
                                GError **error)
{
    th_cpd_announce_phase(callbacks, "copying the factors from the backend");
    const gint64 fetch_start = g_get_monotonic_time();
    result_memory_join(memory); /* what it has not finished counts here */
    r->result_memory_seconds = seconds_since(fetch_start);
    r->lambda = g_memdup2(s->lambda, sizeof(double) * s->rank);
    /* The backend decomposed the tensor times value_scale. */
    for (uint32_t k = 0; k < s->rank; ++k)
        r->lambda[k] /= tensor->value_scale;
    r->factors = g_new0(double *, s->nmodes);
    for (uint32_t m = 0; m < s->nmodes; ++m) {
        r->factors[m] = g_steal_pointer(&memory->factors[m]);
        if (!th_backend_get_factor(s->backend, m, r->factors[m], error))
            return FALSE;
    }
    r->fetch_seconds = seconds_since(fetch_start);
    if (state_regularised(s))
        final_objective(s, tensor, r); /* of the factors as the iterations left them */
    th_cpd_announce_phase(callbacks, "arranging the model (norms, signs, order)");
    const gint64 arrange_start = g_get_monotonic_time();
    th_cp_model_arrange(r->lambda, r->factors, r->dims, r->nmodes, r->rank);
    r->arrange_seconds = seconds_since(arrange_start);
    return TRUE;
}

/* Each mode's hierarchical-ALS passes (th_hals_passes) for the whole
 * tensor: its nonzeros summed over a run's processes, so that every
 * process makes the same passes. */
static gboolean plan_hals_passes(const th_cpd_params *params, const th_sptensor *tensor,
                                 uint32_t *passes, GError **error)
{
    for (uint32_t m = 0; m < tensor->nmodes; ++m)
        passes[m] = TH_HALS_SWEEPS;
    if (params->hals_max_passes == 0 || th_cpd_descent_mask(params, tensor->nmodes) == 0)
        return TRUE;
    uint64_t nnz = tensor->nnz;
    if (!th_dist_sum_u64(params->dist, &nnz, 1, error))
        return FALSE;
    th_hals_passes(tensor->dims, tensor->nmodes, nnz, params->rank, params->hals_max_passes,
                   params->hals_budget, passes);
    return TRUE;
}

/* The state at the initial factors: those given, else the seed's, drawn
 * by the backend itself when it can (no factor crosses to it), else drawn
 * here and uploaded. *source says which. */
static th_als_state *start_run(th_backend *backend, th_update_path path,
                               const th_cpd_params *params, const uint32_t *hals_passes,
                               th_init_source *source, GError **error)
{
    g_autoptr(th_als_state) s = th_als_state_new(backend, path);
    s->dist = params->dist;
    s->backend_sums = params->dist != NULL && backend->planned_process_sums;
    g_return_val_if_fail(params->dist == NULL || s->backend_sums || path == TH_UPDATE_HOST,
                         NULL);
    /* A regularised run's tensor is never scaled
     * (th_cpd_check_regularised_values), so the weights are the file's. */
    double l1[TH_MAX_MODES];
    for (uint32_t m = 0; m < s->nmodes; ++m)
        l1[m] = th_cpd_l1(params, m);
    const th_als_terms terms = {
        .nonneg_modes = th_cpd_nonneg_mask(params, s->nmodes),
        .l2 = params->l2,
        .l1 = l1,
        .hals_passes = hals_passes,
    };
    th_als_state_regularise(s, &terms);
    gboolean ok;
    if (params->initial_factors) {
        *source = TH_INIT_GIVEN;
        ok = th_als_state_set_factors(s, (double *const *)(uintptr_t)params->initial_factors,
                                      error);
    } else if (th_backend_has_init_factors(backend)) {
        *source = TH_INIT_BACKEND;
        ok = th_als_state_init_factors(s, params->seed, error);
    } else {
        *source = TH_INIT_HOST;
        double **initial =
            th_cpd_initial_factors(backend->dims, s->nmodes, s->rank, params->seed);
        ok = th_als_state_set_factors(s, initial, error);
        th_cpd_free_factors(initial, s->nmodes);
    }
    /* The first solves read these Grams: rank 0's on every process, as
     * each update's after (als_step.c, share_update). */
    for (uint32_t m = 0; ok && s->backend_sums && m < s->nmodes; ++m)
        ok = th_dist_broadcast(s->dist, s->grams[m], sizeof(double) * s->rank * s->rank, error);
    return ok ? g_steal_pointer(&s) : NULL;
}

/* The state's counters and times, into the result. */
static void record_state(const th_als_state *s, th_cpd_result *r)
{
    memcpy(r->mttkrp_seconds, s->timings.mttkrp_seconds, sizeof(double) * s->nmodes);
    memcpy(r->mttkrp_device_seconds, s->timings.mttkrp_device_seconds,
           sizeof(double) * s->nmodes);
    r->sweep_seconds = s->timings.sweep_seconds;
    r->update_seconds = s->timings.update_seconds;
    r->algebra_seconds += s->timings.algebra_seconds;
    r->pinv_fallbacks = s->pinv_fallbacks;
    r->sweep_fallbacks = s->sweep_fallbacks;
    r->sweep_refused = s->sweep_refused;
}

/* Whether the run goes on after an iteration: `here` on one process; with
 * several, only when every one goes on (a stop asked of any, by a signal
 * or a callback, stops them all after the same iteration). FALSE with *ok
 * FALSE and `error` set when the processes cannot agree. */
static gboolean go_on_together(th_dist *dist, gboolean here, gboolean *ok, GError **error)
{
    double stop = here ? 0.0 : 1.0;
    *ok = th_dist_max(dist, &stop, 1, error);
    return *ok && stop == 0.0;
}

th_cpd_result *th_cp_als(th_backend *backend, const th_sptensor *tensor,
                         const th_cpd_params *params, const th_cpd_callbacks *callbacks,
                         GError **error)
{
    g_return_val_if_fail(backend->nmodes == tensor->nmodes && backend->rank == params->rank, NULL);
    const gint64 run_start = g_get_monotonic_time();
    const uint32_t nmodes = tensor->nmodes;
    g_return_val_if_fail(params->model == TH_MODEL_LEAST_SQUARES, NULL);
    const gboolean planned = backend->planned && backend->planned_rank == params->rank &&
                             backend->requested_update == params->update &&
                             backend->planned_model == (int32_t)params->model &&
                             backend->planned_nonneg_modes == params->nonneg_modes &&
                             backend->planned_descent_modes ==
                                 th_cpd_descent_mask(params, TH_MAX_MODES) &&
                             backend->planned_regularised ==
                                 th_cpd_regularised(params, TH_MAX_MODES);
    if (!th_cpd_check_constraints_order(params, nmodes, error) ||
        !th_cpd_check_regularised_values(params, tensor, error))
        return NULL;
    if (!planned && !th_cpd_plan(backend, params, NULL, error))
        return NULL;
    const th_update_path path = backend->update_path;

    th_cpd_result *r = g_new0(th_cpd_result, 1);
    r->nmodes = nmodes;
    r->rank = params->rank;
    r->dims = g_memdup2(tensor->dims, sizeof(th_index) * nmodes);
    r->iterations = g_array_new(FALSE, FALSE, sizeof(th_cpd_iteration));
    r->mttkrp_seconds = g_new0(double, nmodes);
    r->mttkrp_device_seconds = g_new0(double, nmodes);
    r->update_path = path;
    r->nonneg_modes = th_cpd_nonneg_mask(params, nmodes);
    r->descent_modes = th_cpd_descent_mask(params, nmodes);
    r->model = TH_MODEL_LEAST_SQUARES;
    r->log_likelihood = NAN;
    r->kkt_violation = NAN;
    r->l2 = params->l2;
    for (uint32_t m = 0; m < nmodes; ++m)
        r->l1[m] = th_cpd_l1(params, m);
    r->objective = NAN;
    const gboolean regularised = th_cpd_regularised(params, nmodes);
    /* Each iteration's objective where it is cheap: every l1 0 (the
     * Grams give the squared norms). */
    gboolean any_l1 = FALSE;
    for (uint32_t m = 0; m < nmodes; ++m)
        any_l1 = any_l1 || th_cpd_l1(params, m) != 0.0;
    const gboolean objective_each_iteration = regularised && !any_l1;
    const double objective_scale = 1.0 / (tensor->value_scale * tensor->value_scale);

    const th_als_step_callbacks step_callbacks = {
        .mode = callbacks ? callbacks->mode : NULL,
        .user_data = callbacks ? callbacks->user_data : NULL,
    };
    double norm_x_squared = th_sptensor_norm_squared(tensor);
    if (!th_dist_sum(params->dist, &norm_x_squared, 1, error)) { /* the whole tensor's */
        th_cpd_result_free(r);
        return NULL;
    }
    th_cpd_announce_phase(callbacks, params->initial_factors ? "setting the initial factors"
                                                      : "drawing the initial factors");
    uint32_t hals_passes[TH_MAX_MODES];
    if (!plan_hals_passes(params, tensor, hals_passes, error)) {
        th_cpd_result_free(r);
        return NULL;
    }
    r->hals_max_passes = params->hals_max_passes ? params->hals_max_passes : TH_HALS_SWEEPS;
    r->hals_budget = params->hals_max_passes ? params->hals_budget : INFINITY;
    for (uint32_t m = 0; m < nmodes; ++m)
        r->hals_passes[m] = m < 64 && (r->descent_modes >> m & 1u) ? hals_passes[m] : 0u;
    const gint64 init_start = g_get_monotonic_time();
    g_autoptr(th_als_state) s =
        start_run(backend, path, params, hals_passes, &r->initial_factors, error);
    r->init_seconds = seconds_since(init_start);
    gboolean ok = s != NULL;
    result_memory memory = {0};
    if (ok)
        result_memory_start(&memory, tensor->dims, nmodes, params->rank);
    double previous_fit = 0.0;
    for (uint32_t it = 1; ok && it <= params->max_iters; ++it) {
        const gint64 start = g_get_monotonic_time();
        const int32_t norm = it == 1 ? TH_NORM_2 : TH_NORM_MAX;
        g_autoptr(GError) iteration_error = NULL;
        if (!th_als_step(s, it, norm, &step_callbacks, &iteration_error)) {
            if (!th_cpd_is_cancellation(iteration_error)) {
                g_propagate_error(error, g_steal_pointer(&iteration_error));
                ok = FALSE;
                break;
            }
            /* Cut inside a long iteration: keep the ALS state after the last
             * mode that was updated, a valid model with a computable fit. */
            th_log(TH_LOG_DEBUG, "iteration %u stopped after %u of %u modes: %s", it,
                   s->modes_updated, nmodes, iteration_error->message);
            r->interrupted = TRUE;
            r->partial_modes = s->modes_updated;
            r->fit = s->any_update ? th_als_state_fit(s, norm_x_squared) : NAN;
            break;
        }
        const gint64 fit_start = g_get_monotonic_time();
        const double fit = th_als_state_fit(s, norm_x_squared);
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
            .log_likelihood = NAN,
            .kkt_violation = NAN,
            .objective = objective_each_iteration
                             ? th_als_state_objective(s, norm_x_squared, NULL) * objective_scale
                             : NAN,
            .train_rmse = NAN,
            .holdout_rmse = NAN,
        };
        g_array_append_val(r->iterations, record);
        r->fit = fit;
        const gboolean go_on = !(callbacks && callbacks->iteration) ||
                               callbacks->iteration(&record, callbacks->user_data);
        if (th_cpd_converged(it, record.delta, params->tolerance)) {
            r->converged = TRUE;
            break;
        }
        previous_fit = fit;
        if (!go_on_together(params->dist, go_on && !th_cancel_requested(), &ok, error)) {
            r->interrupted = ok;
            break;
        }
    }
    if (s)
        record_state(s, r);
    if (ok && s->any_update)
        ok = collect_factors(s, tensor, r, &memory, callbacks, error);
    result_memory_clear(&memory);
    r->total_seconds = seconds_since(run_start);
    if (!ok) {
        th_cpd_result_free(r);
        return NULL;
    }
    return r;
}
