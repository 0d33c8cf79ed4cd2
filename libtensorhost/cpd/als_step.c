#include "cpd/als_step.h"

#include <math.h>
#include <string.h>

#include "base/cancel.h"
#include "cpd/dense.h"
#include "base/log.h"

static double seconds_since(gint64 start) { return (double)(g_get_monotonic_time() - start) / 1e6; }

/* The host update's buffers: the largest mode's MTTKRP result and factor. */
static void allocate_host_update(th_als_state *s)
{
    if (s->host_mttkrp)
        return;
    th_index largest = 0;
    for (uint32_t m = 0; m < s->nmodes; ++m)
        largest = MAX(largest, s->backend->dims[m]);
    s->host_mttkrp = g_new(double, (size_t)largest * s->rank);
    s->host_factor = g_new(double, (size_t)largest * s->rank);
}

th_als_state *th_als_state_new(th_backend *backend, th_update_path path)
{
    g_return_val_if_fail(path != TH_UPDATE_AUTO && backend->nmodes > 0, NULL);
    const uint32_t nmodes = backend->nmodes, rank = backend->rank;
    th_als_state *s = g_new0(th_als_state, 1);
    s->backend = backend;
    s->nmodes = nmodes;
    s->rank = rank;
    s->path = path;
    s->grams = g_new0(double *, nmodes);
    for (uint32_t m = 0; m < nmodes; ++m)
        s->grams[m] = g_new0(double, (size_t)rank * rank);
    /* The model before the first update: the factors as set, unit weights
     * (the start of a nonnegative update). */
    s->lambda = g_new(double, rank);
    for (uint32_t r = 0; r < rank; ++r)
        s->lambda[r] = 1.0;
    s->inner = g_new0(double, rank);
    s->scale = g_new(double, rank);
    s->hadamard = g_new(double, (size_t)rank * rank);
    s->w = g_new(double, (size_t)rank * rank);
    s->l1 = g_new0(double, nmodes);
    s->constraints = g_new0(int32_t, nmodes); /* TH_CONSTRAINT_NONE */
    s->weighted_mode = UINT32_MAX;
    s->hals_passes = g_new(uint32_t, nmodes);
    for (uint32_t m = 0; m < nmodes; ++m)
        s->hals_passes[m] = TH_HALS_SWEEPS;
    s->timings.mttkrp_seconds = g_new0(double, nmodes);
    s->timings.mttkrp_device_seconds = g_new0(double, nmodes);
    if (path == TH_UPDATE_SWEEP)
        for (uint32_t m = 0; m < nmodes; ++m)
            s->timings.mttkrp_seconds[m] = TH_CPD_NOT_MEASURED;
    if (path == TH_UPDATE_HOST)
        allocate_host_update(s);
    return s;
}

void th_als_state_free(th_als_state *s)
{
    if (!s)
        return;
    for (uint32_t m = 0; m < s->nmodes; ++m)
        g_free(s->grams[m]);
    g_free(s->grams);
    g_free(s->lambda);
    g_free(s->inner);
    g_free(s->scale);
    g_free(s->l1);
    g_free(s->constraints);
    g_free(s->hals_passes);
    g_free(s->hadamard);
    g_free(s->w);
    g_free(s->host_mttkrp);
    g_free(s->host_factor);
    g_free(s->timings.mttkrp_seconds);
    g_free(s->timings.mttkrp_device_seconds);
    g_free(s);
}

gboolean th_als_state_set_factors(th_als_state *s, double *const *factors, GError **error)
{
    for (uint32_t m = 0; m < s->nmodes; ++m) {
        th_dense_gram(factors[m], s->backend->dims[m], s->rank, s->grams[m]);
        if (!th_backend_set_factor(s->backend, m, factors[m], error))
            return FALSE;
    }
    return TRUE;
}

gboolean th_als_state_init_factors(th_als_state *s, uint64_t seed, GError **error)
{
    return th_backend_init_factors(s->backend, seed, s->grams, error);
}

void th_als_state_regularise(th_als_state *s, const th_als_terms *terms)
{
    s->nonneg_modes = terms->nonneg_modes;
    s->l2 = terms->l2;
    s->descent_modes = terms->nonneg_modes;
    for (uint32_t m = 0; m < s->nmodes; ++m) {
        const gboolean nonneg = m < 64 && (terms->nonneg_modes >> m & 1u);
        s->l1[m] = terms->l1 ? terms->l1[m] : 0.0;
        s->constraints[m] = nonneg ? TH_CONSTRAINT_NONNEG : TH_CONSTRAINT_NONE;
        if (s->l1[m] > 0.0 && m < 64)
            s->descent_modes |= UINT64_C(1) << m;
        s->hals_passes[m] = terms->hals_passes ? terms->hals_passes[m] : TH_HALS_SWEEPS;
    }
}

void th_hals_passes(const th_index *dims, uint32_t nmodes, uint64_t nnz, uint32_t rank,
                    uint32_t max_passes, double budget, uint32_t *passes)
{
    const double R = rank;
    double grams = 0.0;
    for (uint32_t m = 0; m < nmodes; ++m)
        grams += (double)dims[m] * R * R;
    for (uint32_t n = 0; n < nmodes; ++n) {
        const double forming = (double)nnz * nmodes * R + (grams - (double)dims[n] * R * R);
        const double pass = (double)dims[n] * (R * R + R);
        const double rho = 1.0 + forming / pass;
        const double allowed = floor(1.0 + budget * rho);
        passes[n] = allowed >= (double)max_passes ? max_passes
                    : allowed < 1.0               ? 1u
                                                  : (uint32_t)allowed;
    }
}

void th_als_state_constrain_nonneg(th_als_state *s, uint64_t modes)
{
    const th_als_terms terms = {.nonneg_modes = modes};
    th_als_state_regularise(s, &terms);
}

static gboolean constrained(const th_als_state *s, uint32_t mode)
{
    return mode < 64 && (s->nonneg_modes >> mode & 1u);
}

static gboolean by_descent(const th_als_state *s, uint32_t mode)
{
    return mode < 64 && (s->descent_modes >> mode & 1u);
}

/* Whether the sweep needs the 1.6 fields: a ridge, an l1, a constraint. */
static gboolean sweep_terms_active(const th_als_state *s)
{
    return s->l2 != 0.0 || s->descent_modes != 0;
}

/* The descent update's 1.6 terms for `mode`. */
static th_descent_terms descent_terms(const th_als_state *s, uint32_t mode)
{
    return (th_descent_terms){
        .ridge = s->l2,
        .l1 = s->l1[mode],
        .constraint = constrained(s, mode) ? TH_CONSTRAINT_NONNEG : TH_CONSTRAINT_NONE,
    };
}

/* The coordinate-descent update's new factor: hierarchical ALS from the
 * current model's factor of `mode` (the backend's, times the weights, which
 * belong to the mode updated last: the same model with every other factor
 * as it is), with the mode's ridge, l1 and constraint. */
static gboolean hals_factor(th_als_state *s, uint32_t mode, uint64_t rows, GError **error)
{
    if (!th_backend_get_factor(s->backend, mode, s->host_factor, error))
        return FALSE;
    for (uint64_t i = 0; i < rows; ++i)
        for (uint32_t r = 0; r < s->rank; ++r)
            s->host_factor[i * s->rank + r] *= s->lambda[r];
    const th_descent_terms terms = descent_terms(s, mode);
    (void)th_dense_hals(s->host_mttkrp, s->hadamard, rows, s->rank, terms.ridge, terms.l1,
                        terms.constraint, s->hals_passes[mode], TH_HALS_TOLERANCE,
                        s->host_factor);
    return TRUE;
}

/* A run of several processes whose backend built each mode from the
 * nonzeros of the rows each process owns (th_backend_load_mode_tensors):
 * every process's owned rows of the mode's MTTKRP gathered into every
 * process's (in place: the processes' ranges are consecutive), then the
 * partial sums of the rows split between processes (each process's one
 * row past its own, where its share ends inside a later process's row)
 * added to them in rank order, so that every process holds the same bits.
 * Each process receives the mode's I_n x R doubles once, where the sum of
 * whole results moved about twice that. */
static gboolean gather_owned_rows(th_als_state *s, uint32_t mode, GError **error)
{
    const th_backend *b = s->backend;
    const uint32_t P = b->owned_processes, me = th_dist_rank(s->dist), R = s->rank;
    const uint64_t *begin = th_backend_owned_begin(b, mode);
    const uint64_t *window_end = th_backend_owned_window_end(b, mode);
    double *M = s->host_mttkrp;
    g_autofree double *tails = g_new0(double, (size_t)P * R);
    g_autofree uint64_t *counts = g_new(uint64_t, P);
    if (window_end[me] > begin[me + 1])
        memcpy(tails + (size_t)me * R, M + (size_t)begin[me + 1] * R, R * sizeof *M);
    for (uint32_t p = 0; p < P; ++p)
        counts[p] = R;
    if (!th_dist_allgather(s->dist, NULL, R, tails, counts, error))
        return FALSE;
    for (uint32_t p = 0; p < P; ++p)
        counts[p] = (begin[p + 1] - begin[p]) * R;
    if (!th_dist_allgather(s->dist, NULL, counts[me], M, counts, error))
        return FALSE;
    for (uint32_t p = 0; p < P; ++p)
        if (window_end[p] > begin[p + 1]) {
            double *row = M + (size_t)begin[p + 1] * R;
            for (uint32_t r = 0; r < R; ++r)
                row[r] += tails[(size_t)p * R + r];
        }
    return TRUE;
}

/* The processes' partial MTTKRPs of `mode` made whole on every process
 * (by the host: a backend that sums them itself needs nothing). */
static gboolean combine_processes(th_als_state *s, uint32_t mode, uint64_t rows, GError **error)
{
    if (s->backend_sums || s->dist == NULL)
        return TRUE;
    if (s->backend->owned_rows != NULL)
        return gather_owned_rows(s, mode, error);
    return th_dist_sum(s->dist, s->host_mttkrp, rows * s->rank, error);
}

/* Host-side twin of the ABI's als_update, for backends without it, and
 * the coordinate-descent update. */
static gboolean host_update(th_als_state *s, uint32_t mode, int32_t norm, GError **error)
{
    const uint64_t rows = s->backend->dims[mode];
    allocate_host_update(s);
    if (!th_backend_get_mttkrp_result(s->backend, mode, s->host_mttkrp, error) ||
        !combine_processes(s, mode, rows, error))
        return FALSE;
    if (by_descent(s, mode)) {
        if (!hals_factor(s, mode, rows, error))
            return FALSE;
    } else {
        th_dense_matmul(s->host_mttkrp, s->w, rows, s->rank, s->rank, s->host_factor);
    }
    th_dense_normalize_columns(s->host_factor, rows, s->rank, norm == TH_NORM_MAX, s->lambda);
    th_dense_gram(s->host_factor, rows, s->rank, s->grams[mode]);
    th_dense_column_inner(s->host_mttkrp, s->host_factor, rows, s->rank, s->inner);
    return th_backend_set_factor(s->backend, mode, s->host_factor, error);
}

/* ||X - M||^2 without forming M: ||M||^2 = lambda^T (hadamard of all
 * grams) lambda and <X, M> = sum_r lambda_r inner_r from the last mode's
 * MTTKRP. */
static double residual_squared(th_als_state *s, double norm_x_squared)
{
    th_dense_hadamard_except(s->grams, s->nmodes, UINT32_MAX, s->rank, s->hadamard);
    double norm_model_squared = 0.0, inner_product = 0.0;
    for (uint32_t r = 0; r < s->rank; ++r) {
        inner_product += s->lambda[r] * s->inner[r];
        for (uint32_t q = 0; q < s->rank; ++q)
            norm_model_squared += s->lambda[r] * s->lambda[q] * s->hadamard[(size_t)r * s->rank + q];
    }
    const double residual = norm_x_squared + norm_model_squared - 2.0 * inner_product;
    /* Rounding can push a near-perfect fit slightly negative. */
    return residual < 0.0 ? 0.0 : residual;
}

double th_als_state_fit(th_als_state *s, double norm_x_squared)
{
    return 1.0 - sqrt(residual_squared(s, norm_x_squared)) / sqrt(norm_x_squared);
}

double th_als_state_objective(th_als_state *s, double norm_x_squared,
                              double *const *column_abs_sums)
{
    double penalty = 0.0;
    for (uint32_t m = 0; m < s->nmodes; ++m) {
        const gboolean weighted = m == s->weighted_mode;
        double squares = 0.0, absolutes = 0.0;
        for (uint32_t r = 0; r < s->rank; ++r) {
            const double scale = weighted ? s->lambda[r] : 1.0;
            squares += scale * scale * s->grams[m][(size_t)r * s->rank + r];
            if (s->l1[m] != 0.0)
                absolutes += column_abs_sums ? scale * column_abs_sums[m][r] : NAN;
        }
        penalty += 0.5 * s->l2 * squares + s->l1[m] * absolutes;
    }
    return 0.5 * residual_squared(s, norm_x_squared) + penalty;
}

/* Adds the backend's own time of the latest MTTKRP of `mode`; one mode
 * without it makes the whole sum "not reported". */
static gboolean add_device_time(th_als_state *s, uint32_t mode, GError **error)
{
    th_mode_info info;
    if (!th_backend_mode_info(s->backend, mode, &info, error))
        return FALSE;
    double *sum = &s->timings.mttkrp_device_seconds[mode];
    if (info.last_mttkrp_seconds >= 0.0 && *sum >= 0.0)
        *sum += info.last_mttkrp_seconds;
    else
        *sum = -1.0;
    return TRUE;
}

static void announce_mode(const th_als_step_callbacks *callbacks, uint32_t iteration,
                          uint32_t mode, uint32_t nmodes)
{
    if (callbacks && callbacks->mode)
        callbacks->mode(iteration, mode, nmodes, callbacks->user_data);
}

/* The backend's coordinate-descent update of `mode` (als_update_nonneg):
 * the host's HALS from the same model (the factor times the weights of the
 * mode updated last), in the backend. The weights go in a copy, as the
 * call writes the new ones over s->lambda. The host updates the mode
 * instead, with the same result (within rounding), where the backend
 * cannot: a backend without the function (the sweep path's finishing
 * modes); a ridge, an l1 or an unconstrained mode for a plugin built
 * before ABI 1.6, which would ignore them unseen (plugin.h's growth
 * rules); and, for the rest of the run, a backend that has the function
 * and still does not take it where it runs (a GPU plugin's group of
 * several devices answers TH_ERR_UNSUPPORTED before it changes anything). */
static gboolean backend_descent_update(th_als_state *s, uint32_t mode, int32_t norm,
                                       GError **error)
{
    if (s->nonneg_on_host || !th_backend_has_als_update_nonneg(s->backend))
        return host_update(s, mode, norm, error);
    const th_descent_terms terms = descent_terms(s, mode);
    if (th_descent_terms_active(&terms) && !th_backend_takes_abi_1_6(s->backend)) {
        if (!s->older_plugin_logged)
            th_log(TH_LOG_INFO,
                   "plugin '%s' was built against ABI %u.%u: its als_update_nonneg has no "
                   "ridge, l1 or unconstrained update (ABI 1.6), so the host updates the modes "
                   "that need them",
                   th_backend_info(s->backend)->id, TH_ABI_VERSION_MAJOR,
                   th_backend_abi_minor(s->backend));
        s->older_plugin_logged = TRUE;
        return host_update(s, mode, norm, error);
    }
    memcpy(s->scale, s->lambda, sizeof(double) * s->rank);
    g_autoptr(GError) local = NULL;
    if (th_backend_als_update_descent(s->backend, mode, s->hadamard, s->scale,
                                      s->hals_passes[mode],
                                      TH_HALS_TOLERANCE, norm, &terms, s->lambda,
                                      s->grams[mode], s->inner, NULL, &local))
        return TRUE;
    if (!g_error_matches(local, TH_PLUGIN_STATUS_ERROR, TH_ERR_UNSUPPORTED)) {
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    th_log(TH_LOG_INFO, "%s; the coordinate-descent (hierarchical ALS) updates run on the host",
           local->message);
    s->nonneg_on_host = TRUE;
    return host_update(s, mode, norm, error);
}

/* A backend that sums the processes' MTTKRPs (backend_sums) updates the
 * factor on every process from the same result, but its update's sums
 * (atomics on a GPU) may differ in their last bits between processes:
 * rank 0's lambda, Gram and inner then stand for every process's, so that
 * every process solves and decides (convergence, breakdowns) alike. */
static gboolean share_update(th_als_state *s, uint32_t mode, GError **error)
{
    if (!s->backend_sums || s->path == TH_UPDATE_HOST)
        return TRUE;
    const size_t R = s->rank;
    g_autofree double *shared = g_new(double, R * R + 2u * R);
    memcpy(shared, s->lambda, sizeof(double) * R);
    memcpy(shared + R, s->inner, sizeof(double) * R);
    memcpy(shared + 2u * R, s->grams[mode], sizeof(double) * R * R);
    if (!th_dist_broadcast(s->dist, shared, sizeof(double) * (R * R + 2u * R), error))
        return FALSE;
    memcpy(s->lambda, shared, sizeof(double) * R);
    memcpy(s->inner, shared + R, sizeof(double) * R);
    memcpy(s->grams[mode], shared + 2u * R, sizeof(double) * R * R);
    return TRUE;
}

/* The factor update of `mode` on the state's path, once its MTTKRP and
 * the host's R x R algebra are done. */
static gboolean update_factor(th_als_state *s, uint32_t mode, int32_t norm, GError **error)
{
    if (s->path == TH_UPDATE_HOST)
        return host_update(s, mode, norm, error);
    if (by_descent(s, mode))
        return backend_descent_update(s, mode, norm, error);
    return th_backend_als_update(s->backend, mode, s->w, norm, s->lambda, s->grams[mode],
                                 s->inner, error);
}

/* One mode the classic way: mttkrp(), the host's solve, then als_update(),
 * als_update_nonneg() or the host's update. On the sweep path this
 * finishes an iteration whose sweep stopped early; its MTTKRP time then
 * belongs to sweep_seconds, as the other iterations' MTTKRPs of that mode
 * are inside als_sweep. */
static gboolean update_one_mode(th_als_state *s, uint32_t iteration, uint32_t mode,
                                int32_t norm, const th_als_step_callbacks *callbacks,
                                GError **error)
{
    th_als_timings *t = &s->timings;
    announce_mode(callbacks, iteration, mode, s->nmodes);
    gint64 start = g_get_monotonic_time();
    if (!th_backend_mttkrp(s->backend, mode, error))
        return FALSE;
    if (s->path == TH_UPDATE_SWEEP)
        t->sweep_seconds += seconds_since(start);
    else
        t->mttkrp_seconds[mode] += seconds_since(start);
    if (!add_device_time(s, mode, error))
        return FALSE;

    start = g_get_monotonic_time();
    th_dense_hadamard_except(s->grams, s->nmodes, mode, s->rank, s->hadamard);
    if (!by_descent(s, mode)) {
        /* The ridge: A = M (V + l2 I)^-1, the breakdown test on V + l2 I. */
        for (uint32_t r = 0; r < s->rank; ++r)
            s->hadamard[(size_t)r * s->rank + r] += s->l2;
        s->pinv_fallbacks += (uint32_t)th_dense_spd_pinv(s->hadamard, s->rank, s->w);
    }
    t->algebra_seconds += seconds_since(start);

    start = g_get_monotonic_time();
    const gboolean ok = update_factor(s, mode, norm, error) && share_update(s, mode, error);
    t->update_seconds += seconds_since(start);
    if (ok) {
        s->modes_updated = mode + 1;
        s->any_update = TRUE;
        s->weighted_mode = mode;
    }
    return ok;
}

/* The sweep's passes: the descent modes' count where they all make the
 * same (hals_sweeps alone, which any plugin of ABI 1.6 takes); else the
 * largest, with *differ set (hals_mode_sweeps then says each mode's, which
 * only a plugin of ABI 1.9 takes). */
static uint32_t sweep_passes(const th_als_state *s, gboolean *differ)
{
    uint32_t passes = 0;
    *differ = FALSE;
    for (uint32_t m = 0; m < s->nmodes; ++m) {
        if (!by_descent(s, m))
            continue;
        *differ = *differ || (passes && s->hals_passes[m] != passes);
        passes = MAX(passes, s->hals_passes[m]);
    }
    return MAX(passes, 1u);
}

/* One als_sweep(); *modes_done says where the host must take over. The
 * host's Gram array is the sweep's in/out format as it is. A regularised
 * or constrained run hands the sweep its terms (ABI 1.6, which the plan
 * has checked the plugin is of); when the plugin refuses them
 * (TH_ERR_UNSUPPORTED, before it changes anything), this iteration and
 * every later one run per mode, as on the mode path. */
static gboolean run_sweep(th_als_state *s, uint32_t iteration, int32_t norm,
                          const th_als_step_callbacks *callbacks, uint32_t *modes_done,
                          GError **error)
{
    announce_mode(callbacks, iteration, 0, s->nmodes);
    th_sweep_terms terms = {0};
    const gboolean regularised = sweep_terms_active(s);
    if (regularised) {
        memcpy(s->scale, s->lambda, sizeof(double) * s->rank); /* not lambda itself */
        gboolean differ;
        const uint32_t passes = sweep_passes(s, &differ);
        terms = (th_sweep_terms){
            .constraints = s->constraints,
            .l1 = s->l1,
            .ridge = s->l2,
            .scale = s->scale,
            .hals_sweeps = passes,
            .hals_tolerance = TH_HALS_TOLERANCE,
            .hals_mode_sweeps = differ ? s->hals_passes : NULL,
        };
    }
    const gint64 start = g_get_monotonic_time();
    g_autoptr(GError) local = NULL;
    gboolean ok = th_backend_als_sweep_with(s->backend, norm, regularised ? &terms : NULL,
                                            s->grams, s->lambda, s->inner, modes_done, &local);
    s->timings.sweep_seconds += seconds_since(start);
    if (!ok && regularised && g_error_matches(local, TH_PLUGIN_STATUS_ERROR, TH_ERR_UNSUPPORTED)) {
        th_log(TH_LOG_INFO,
               "%s; from iteration %u on, each mode is updated on its own (the mode path)",
               local->message, iteration);
        s->sweep_refused = TRUE;
        *modes_done = 0;
        return TRUE;
    }
    if (!ok)
        g_propagate_error(error, g_steal_pointer(&local));
    /* A cancelled sweep still says which modes it finished. */
    s->modes_updated = MIN(*modes_done, s->nmodes);
    s->any_update = s->any_update || s->modes_updated > 0;
    if (s->modes_updated > 0)
        s->weighted_mode = s->modes_updated - 1;
    if (!ok)
        return FALSE;
    for (uint32_t mode = 0; mode < *modes_done; ++mode)
        if (!add_device_time(s, mode, error))
            return FALSE;
    if (*modes_done < s->nmodes) {
        s->sweep_fallbacks++;
        th_log(TH_LOG_DEBUG,
               "iteration %u: als_sweep stopped at mode %u of %u (Cholesky breakdown); the "
               "host finishes the iteration",
               iteration, *modes_done + 1, s->nmodes);
    }
    return TRUE;
}

gboolean th_als_step(th_als_state *s, uint32_t iteration, int32_t norm,
                     const th_als_step_callbacks *callbacks, GError **error)
{
    uint32_t first_mode = 0;
    s->modes_updated = 0;
    if (s->path == TH_UPDATE_SWEEP && !s->sweep_refused &&
        !run_sweep(s, iteration, norm, callbacks, &first_mode, error))
        return FALSE;
    /* lambda and inner end up those of the last mode, whoever updated it. */
    for (uint32_t mode = first_mode; mode < s->nmodes; ++mode) {
        /* A stop asked a grace period ago (cancel.h) cuts a long iteration
         * between two modes, as a backend that gives a call up does: the
         * modes updated so far make a valid model. */
        if (s->dist == NULL && th_cancel_stop_now()) {
            g_set_error(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_CANCELLED,
                        "stopped on request before mode %u", mode + 1);
            return FALSE;
        }
        if (!update_one_mode(s, iteration, mode, norm, callbacks, error))
            return FALSE;
    }
    return TRUE;
}
