#include "cpd/cp_apr.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "base/cancel.h"
#include "base/log.h"
#include "cpd/cp_model.h"
#include "cpd/dense.h"
#include "cpd/initial_factors.h"

static double seconds_since(gint64 start) { return (double)(g_get_monotonic_time() - start) / 1e6; }

void th_cp_apr_read_options(th_cpd_model model, th_tensor_read_options *options)
{
    if (model != TH_MODEL_POISSON)
        return;
    options->require_nonnegative = TRUE;
    options->nonnegative_reason = TH_CP_APR_NONNEGATIVE_REASON;
}

gboolean th_cp_apr_check_tensor(const th_sptensor *tensor, uint64_t *non_integer, GError **error)
{
    uint64_t fractional = 0;
    for (uint64_t k = 0; k < tensor->nnz; ++k) {
        const double v = tensor->values[k];
        if (!isfinite(v) || v < 0.0) {
            g_autofree char *at = th_sptensor_entry_text(tensor, k);
            g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT,
                        "entry %" PRIu64 " %s of the tensor has the value %g: the Poisson "
                        "model needs finite values >= 0 (counts)",
                        k + 1, at, v);
            return FALSE;
        }
        fractional += v != floor(v);
    }
    if (non_integer)
        *non_integer = fractional;
    return th_cpd_check_tensor(tensor, error);
}

/* One run's state: the backend holds the factors, the host lambda. */
typedef struct apr_run {
    th_backend *backend;
    const th_cpd_params *params;
    const th_cpd_callbacks *callbacks;
    th_cpd_result *r;
    uint32_t nmodes, rank;
    double *lambda;  /* [rank] */
    double *scratch; /* [rank] */
    double *ones;    /* [rank] */
} apr_run;

/* Phi of `mode` in the backend, timed as its MTTKRP. */
static gboolean compute_phi(apr_run *run, uint32_t mode, GError **error)
{
    const gint64 start = g_get_monotonic_time();
    if (!th_backend_generalized_mttkrp(run->backend, mode, TH_ELEMENTWISE_POISSON_RATIO,
                                       TH_REDUCTION_NONE, run->params->apr.epsilon, NULL, NULL,
                                       error))
        return FALSE;
    run->r->mttkrp_seconds[mode] += seconds_since(start);
    th_mode_info info;
    if (!th_backend_mode_info(run->backend, mode, &info, error))
        return FALSE;
    double *sum = &run->r->mttkrp_device_seconds[mode];
    if (info.last_mttkrp_seconds >= 0.0 && *sum >= 0.0)
        *sum += info.last_mttkrp_seconds;
    else
        *sum = -1.0;
    return TRUE;
}

static gboolean factor_update(apr_run *run, uint32_t mode, int32_t operation, double *vector,
                              double tolerance, double offset, double *violation,
                              uint64_t *count, GError **error)
{
    const gint64 start = g_get_monotonic_time();
    const gboolean ok =
        th_backend_factor_update(run->backend, mode, operation, vector,
                                 run->params->apr.phi_threshold, tolerance, offset, violation,
                                 count, error);
    run->r->update_seconds += seconds_since(start);
    return ok;
}

/* The sum over the nonzeros of `reduction` for the model [[lambda; A]]. */
static gboolean reduce(apr_run *run, int32_t reduction, double *reduced, GError **error)
{
    const gint64 start = g_get_monotonic_time();
    const gboolean ok =
        th_backend_generalized_mttkrp(run->backend, TH_MODE_NONE, TH_ELEMENTWISE_VALUE, reduction,
                                      run->params->apr.epsilon, run->lambda, reduced, error);
    run->r->algebra_seconds += seconds_since(start);
    return ok;
}

static double sum_of(const double *v, uint32_t n)
{
    double sum = 0.0;
    for (uint32_t k = 0; k < n; ++k)
        sum += v[k];
    return sum;
}

/* The first negative or non-finite entry of a [rows x rank] factor. */
static gboolean check_nonnegative(const double *a, uint64_t rows, uint32_t rank,
                                  const char *what, GError **error)
{
    for (uint64_t k = 0; k < rows * rank; ++k) {
        if (isfinite(a[k]) && a[k] >= 0.0)
            continue;
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT,
                    "%s: entry (%" PRIu64 ", %" PRIu64 ") is %g: the Poisson model needs "
                    "finite initial factors >= 0",
                    what, k / rank + 1, k % rank + 1, a[k]);
        return FALSE;
    }
    return TRUE;
}

/* The initial model in the backend and lambda, then every column of unit
 * 1-norm (pyttb: M.normalize(normtype=1)). */
static gboolean start_run(apr_run *run, GError **error)
{
    th_backend *b = run->backend;
    const th_cpd_params *p = run->params;
    if (p->initial_factors) {
        run->r->initial_factors = TH_INIT_GIVEN;
        for (uint32_t m = 0; m < run->nmodes; ++m) {
            g_autofree char *what = g_strdup_printf("initial factor of mode %u", m);
            if (!check_nonnegative(p->initial_factors[m], b->dims[m], run->rank, what, error) ||
                !th_backend_set_factor(b, m, p->initial_factors[m], error))
                return FALSE;
        }
    } else if (th_backend_has_init_factors(b)) {
        run->r->initial_factors = TH_INIT_BACKEND;
        g_autofree double *grams = g_new(double, (size_t)run->nmodes * run->rank * run->rank);
        g_autofree double **gram_of = g_new(double *, run->nmodes);
        for (uint32_t m = 0; m < run->nmodes; ++m)
            gram_of[m] = grams + (size_t)m * run->rank * run->rank;
        if (!th_backend_init_factors(b, p->seed, gram_of, error))
            return FALSE;
    } else {
        run->r->initial_factors = TH_INIT_HOST;
        double **initial = th_cpd_initial_factors(b->dims, run->nmodes, run->rank, p->seed);
        gboolean ok = TRUE;
        for (uint32_t m = 0; ok && m < run->nmodes; ++m)
            ok = th_backend_set_factor(b, m, initial[m], error);
        th_cpd_free_factors(initial, run->nmodes);
        if (!ok)
            return FALSE;
    }
    if (p->initial_weights) {
        if (!check_nonnegative(p->initial_weights, 1, run->rank, "initial weights", error))
            return FALSE;
        memcpy(run->lambda, p->initial_weights, sizeof(double) * run->rank);
    } else {
        memcpy(run->lambda, run->ones, sizeof(double) * run->rank);
    }
    for (uint32_t m = 0; m < run->nmodes; ++m) {
        if (!factor_update(run, m, TH_FACTOR_NORMALIZE_1, run->scratch, 0.0, 0.0, NULL, NULL,
                           error))
            return FALSE;
        for (uint32_t k = 0; k < run->rank; ++k)
            run->lambda[k] *= run->scratch[k];
    }
    return TRUE;
}

/* Mode n's inner iterations, one generalized MTTKRP and one update each:
 * pyttb's loop. */
static gboolean inner_iterations(apr_run *run, uint32_t n, th_cpd_iteration *record, double *kkt,
                                 gboolean *converged, GError **error)
{
    const th_apr_params *apr = &run->params->apr;
    for (uint32_t i = 0; i < apr->max_inner_iters; ++i) {
        ++record->inner_iterations;
        double violation = 0.0;
        if (!compute_phi(run, n, error) ||
            !factor_update(run, n, TH_FACTOR_MULTIPLICATIVE_UPDATE, NULL, run->params->tolerance,
                           0.0, &violation, NULL, error))
            return FALSE;
        kkt[n] = violation;
        if (violation < run->params->tolerance)
            break;
        *converged = FALSE;
    }
    return TRUE;
}

/* The same in one backend call (multiplicative_updates, ABI 1.7), timed as
 * the mode's MTTKRP: the backend may run each row's iterations with its
 * products formed once, which it could not across calls. */
static gboolean inner_iterations_in_backend(apr_run *run, uint32_t n, th_cpd_iteration *record,
                                            double *kkt, gboolean *converged, GError **error)
{
    const gint64 start = g_get_monotonic_time();
    th_multiplicative_updates_io io;
    if (!th_backend_multiplicative_updates(run->backend, n, run->params->apr.epsilon,
                                           run->params->tolerance,
                                           run->params->apr.max_inner_iters, &io, error))
        return FALSE;
    run->r->mttkrp_seconds[n] += seconds_since(start);
    run->r->mttkrp_device_seconds[n] = -1.0; /* no MTTKRP of its own to time */
    record->inner_iterations += io.iterations;
    kkt[n] = io.violation;
    if (io.updates > 0)
        *converged = FALSE;
    return TRUE;
}

/* One mode of an outer iteration (`outer` 0-based); *converged turns FALSE
 * when an inner iteration had to update. */
static gboolean update_mode(apr_run *run, uint32_t outer, uint32_t n, th_cpd_iteration *record,
                            double *kkt, gboolean *converged, GError **error)
{
    const th_apr_params *apr = &run->params->apr;
    if (outer > 0) {
        uint64_t raised = 0;
        if (!factor_update(run, n, TH_FACTOR_RAISE_INADMISSIBLE_ZEROS, NULL,
                           apr->kappa_tolerance, apr->kappa, NULL, &raised, error))
            return FALSE;
        if (raised > 0)
            ++record->inadmissible_zero_modes;
    }
    /* pyttb: M.redistribute(n). */
    if (!factor_update(run, n, TH_FACTOR_SCALE_COLUMNS, run->lambda, 0.0, 0.0, NULL, NULL, error))
        return FALSE;
    memcpy(run->lambda, run->ones, sizeof(double) * run->rank);
    const gboolean inner_done =
        th_backend_has_multiplicative_updates(run->backend)
            ? inner_iterations_in_backend(run, n, record, kkt, converged, error)
            : inner_iterations(run, n, record, kkt, converged, error);
    if (!inner_done)
        return FALSE;
    /* pyttb: M.normalize(normtype=1, mode=n), lambda having been ones. */
    if (!factor_update(run, n, TH_FACTOR_NORMALIZE_1, run->scratch, 0.0, 0.0, NULL, NULL, error))
        return FALSE;
    memcpy(run->lambda, run->scratch, sizeof(double) * run->rank);
    return TRUE;
}

/* sum_r lambda_r prod_n sum_i A_n(i, r): the sum of every model entry. */
static double model_sum(const double *lambda, double *const *factors, const th_index *dims,
                        uint32_t nmodes, uint32_t rank)
{
    double total = 0.0;
    for (uint32_t r = 0; r < rank; ++r) {
        double product = lambda[r];
        for (uint32_t m = 0; m < nmodes; ++m) {
            double column = 0.0;
            for (uint64_t i = 0; i < dims[m]; ++i)
                column += factors[m][i * rank + r];
            product *= column;
        }
        total += product;
    }
    return total;
}

/* ||M||^2 = lambda' (Hadamard product of the Grams) lambda. */
static double model_norm_squared(const double *lambda, double *const *factors,
                                 const th_index *dims, uint32_t nmodes, uint32_t rank)
{
    const size_t rr = (size_t)rank * rank;
    g_autofree double *grams = g_new(double, rr * nmodes);
    g_autofree double **gram_of = g_new(double *, nmodes);
    for (uint32_t m = 0; m < nmodes; ++m) {
        gram_of[m] = grams + rr * m;
        th_dense_gram(factors[m], dims[m], rank, gram_of[m]);
    }
    g_autofree double *h = g_new(double, rr);
    th_dense_hadamard_except(gram_of, nmodes, UINT32_MAX, rank, h);
    double total = 0.0;
    for (uint32_t r = 0; r < rank; ++r)
        for (uint32_t s = 0; s < rank; ++s)
            total += lambda[r] * h[(size_t)r * rank + s] * lambda[s];
    return total;
}

/* The final model from the backend: factors fetched, the final
 * log-likelihood (when the last record does not hold it) and the
 * least-squares fit, then the published form. */
static gboolean finish(apr_run *run, const th_sptensor *tensor, gboolean need_log_likelihood,
                       GError **error)
{
    th_cpd_result *r = run->r;
    th_cpd_announce_phase(run->callbacks, "copying the factors from the backend");
    const gint64 fetch_start = g_get_monotonic_time();
    r->factors = g_new0(double *, run->nmodes);
    for (uint32_t m = 0; m < run->nmodes; ++m) {
        r->factors[m] = th_alloc_large((size_t)r->dims[m] * run->rank, sizeof(double));
        if (!th_backend_get_factor(run->backend, m, r->factors[m], error))
            return FALSE;
    }
    r->fetch_seconds = seconds_since(fetch_start);

    /* A run cut inside an iteration may have its calls refused from now on:
     * its model is still written, with what could not be computed NaN. */
    g_autoptr(GError) local = NULL;
    double data_term = NAN, inner = NAN;
    if (need_log_likelihood) {
        if (reduce(run, TH_REDUCTION_POISSON_LOG_LIKELIHOOD, &data_term, &local))
            r->log_likelihood =
                data_term - model_sum(run->lambda, r->factors, r->dims, run->nmodes, run->rank);
        else if (!(r->interrupted && th_cpd_is_cancellation(local))) {
            g_propagate_error(error, g_steal_pointer(&local));
            return FALSE;
        }
        g_clear_error(&local);
    }
    const gint64 fit_start = g_get_monotonic_time();
    if (reduce(run, TH_REDUCTION_INNER_PRODUCT, &inner, &local)) {
        const double norm_x_squared = th_sptensor_norm_squared(tensor);
        const double norm_m_squared =
            model_norm_squared(run->lambda, r->factors, r->dims, run->nmodes, run->rank);
        double residual_squared = norm_x_squared + norm_m_squared - 2.0 * inner;
        if (residual_squared < 0.0)
            residual_squared = 0.0;
        r->fit = 1.0 - sqrt(residual_squared) / sqrt(norm_x_squared);
    } else if (!(r->interrupted && th_cpd_is_cancellation(local))) {
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    r->algebra_seconds += seconds_since(fit_start);

    th_cpd_announce_phase(run->callbacks, "arranging the model (norms, order)");
    const gint64 arrange_start = g_get_monotonic_time();
    r->lambda = g_memdup2(run->lambda, sizeof(double) * run->rank);
    th_cp_model_arrange_1norm(r->lambda, r->factors, r->dims, run->nmodes, run->rank);
    r->arrange_seconds = seconds_since(arrange_start);
    return TRUE;
}

th_cpd_result *th_cp_apr(th_backend *backend, const th_sptensor *tensor,
                         const th_cpd_params *params, const th_cpd_callbacks *callbacks,
                         GError **error)
{
    g_return_val_if_fail(params->model == TH_MODEL_POISSON, NULL);
    g_return_val_if_fail(backend->nmodes == tensor->nmodes && backend->rank == params->rank, NULL);
    const gint64 run_start = g_get_monotonic_time();
    const uint32_t nmodes = tensor->nmodes, rank = params->rank;
    const gboolean planned = backend->planned && backend->planned_rank == rank &&
                             backend->requested_update == params->update &&
                             backend->planned_model == (int32_t)params->model;
    if (!planned && !th_cpd_plan(backend, params, NULL, error))
        return NULL;
    if (tensor->value_scale != 1.0) {
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT,
                    "the tensor's values were scaled (by %g): the Poisson model is not "
                    "scale-invariant and needs them as read",
                    tensor->value_scale);
        return NULL;
    }

    th_cpd_result *r = g_new0(th_cpd_result, 1);
    r->nmodes = nmodes;
    r->rank = rank;
    r->dims = g_memdup2(tensor->dims, sizeof(th_index) * nmodes);
    r->iterations = g_array_new(FALSE, FALSE, sizeof(th_cpd_iteration));
    r->mttkrp_seconds = g_new0(double, nmodes);
    r->mttkrp_device_seconds = g_new0(double, nmodes);
    r->update_path = backend->update_path;
    r->model = TH_MODEL_POISSON;
    r->objective = NAN; /* regularised CP-ALS's */
    r->fit = NAN;
    r->log_likelihood = NAN;
    r->kkt_violation = NAN;

    g_autofree double *lambda = g_new(double, rank);
    g_autofree double *scratch = g_new0(double, rank);
    g_autofree double *ones = g_new(double, rank);
    for (uint32_t k = 0; k < rank; ++k)
        ones[k] = 1.0;
    apr_run run = {.backend = backend, .params = params, .callbacks = callbacks, .r = r,
                   .nmodes = nmodes, .rank = rank, .lambda = lambda, .scratch = scratch,
                   .ones = ones};

    th_cpd_announce_phase(callbacks, params->initial_factors ? "setting the initial factors"
                                                      : "drawing the initial factors");
    const gint64 init_start = g_get_monotonic_time();
    gboolean ok = start_run(&run, error);
    r->init_seconds = seconds_since(init_start);

    g_autofree double *kkt = g_new0(double, nmodes);
    double previous = 0.0;
    gboolean cut = FALSE;
    for (uint32_t outer = 0; ok && outer < params->max_iters; ++outer) {
        const gint64 start = g_get_monotonic_time();
        th_cpd_iteration record = {
            .iteration = outer + 1,
            .objective = NAN,
            .train_rmse = NAN,
            .holdout_rmse = NAN,
        };
        gboolean converged = TRUE;
        g_autoptr(GError) iteration_error = NULL;
        uint32_t n = 0;
        for (; n < nmodes; ++n) {
            if (callbacks && callbacks->mode)
                callbacks->mode(outer + 1, n, nmodes, callbacks->user_data);
            if (!update_mode(&run, outer, n, &record, kkt, &converged, &iteration_error))
                break;
        }
        if (n < nmodes) {
            if (!th_cpd_is_cancellation(iteration_error)) {
                g_propagate_error(error, g_steal_pointer(&iteration_error));
                ok = FALSE;
                break;
            }
            th_log(TH_LOG_DEBUG, "iteration %u stopped in mode %u of %u: %s", outer + 1, n,
                   nmodes, iteration_error->message);
            r->interrupted = TRUE;
            r->partial_modes = n;
            cut = TRUE;
            break;
        }
        record.kkt_violation = 0.0;
        for (uint32_t m = 0; m < nmodes; ++m)
            record.kkt_violation = MAX(record.kkt_violation, kkt[m]);
        double data_term = 0.0;
        g_autoptr(GError) reduce_error = NULL;
        if (!reduce(&run, TH_REDUCTION_POISSON_LOG_LIKELIHOOD, &data_term, &reduce_error)) {
            if (!th_cpd_is_cancellation(reduce_error)) {
                g_propagate_error(error, g_steal_pointer(&reduce_error));
                ok = FALSE;
                break;
            }
            r->interrupted = TRUE;
            r->partial_modes = nmodes;
            cut = TRUE;
            break;
        }
        /* Every column has unit 1-norm (a zero column has lambda 0): the
         * model's entries sum to sum(lambda). */
        const double log_likelihood = data_term - sum_of(lambda, rank);
        if (isnan(log_likelihood)) {
            g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_NOT_FINITE,
                        "iteration %u: the log-likelihood is NaN: the backend's results "
                        "overflowed or produced NaN (plugin '%s')",
                        outer + 1, th_backend_info(backend)->id);
            ok = FALSE;
            break;
        }
        record.log_likelihood = log_likelihood;
        record.fit = log_likelihood;
        record.delta = outer == 0 ? log_likelihood : log_likelihood - previous;
        record.seconds = seconds_since(start);
        g_array_append_val(r->iterations, record);
        r->log_likelihood = log_likelihood;
        r->kkt_violation = record.kkt_violation;
        const gboolean go_on = !(callbacks && callbacks->iteration) ||
                               callbacks->iteration(&record, callbacks->user_data);
        if (converged) {
            r->converged = TRUE;
            break;
        }
        previous = log_likelihood;
        if (!go_on || th_cancel_requested()) {
            r->interrupted = TRUE;
            break;
        }
    }
    if (ok)
        ok = finish(&run, tensor, cut || r->iterations->len == 0, error);
    r->total_seconds = seconds_since(run_start);
    if (!ok) {
        th_cpd_result_free(r);
        return NULL;
    }
    return r;
}
