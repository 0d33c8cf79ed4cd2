#include "cpd/cp_complete.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "base/cancel.h"
#include "base/log.h"
#include "cpd/completion_data.h"
#include "cpd/cp_model.h"
#include "cpd/initial_factors.h"

static double seconds_since(gint64 start) { return (double)(g_get_monotonic_time() - start) / 1e6; }

/* One run's state: the backend holds the factors; the host, with a
 * holdout, a copy of the latest and of the best. */
typedef struct complete_run {
    th_backend *backend;
    const th_cpd_params *params;
    const th_cpd_callbacks *callbacks;
    th_cpd_result *r;
    uint32_t nmodes, rank;
    uint64_t nonneg; /* the constrained modes, bit m: mode m */
    const th_sptensor *held_out; /* NULL without a holdout */
    double *norms;   /* [nmodes]: ||A_n||_F^2 after mode n's latest update */
    /* The training error after the latest row solve (its residual_squared:
     * with every factor as the backend holds it now); valid when
     * residual_known. */
    double residual;
    gboolean residual_known;
    double **latest; /* [nmodes] host copies, with a holdout */
    double **best;   /* [nmodes] the best held-out iteration's factors */
    th_cpd_iteration best_record;
    uint32_t stalled; /* iterations since the held-out RMSE last improved enough */
} complete_run;

static double **new_factors(const th_index *dims, uint32_t nmodes, uint32_t rank)
{
    double **f = g_new0(double *, nmodes);
    for (uint32_t m = 0; m < nmodes; ++m)
        f[m] = th_alloc_large((size_t)dims[m] * rank, sizeof(double));
    return f;
}

/* A given nonnegative mode's initial factor must be feasible: the
 * coordinate descent keeps feasibility, it does not restore it. */
static gboolean check_nonnegative(const double *a, uint64_t rows, uint32_t rank, uint32_t mode,
                                  GError **error)
{
    for (uint64_t k = 0; k < rows * rank; ++k) {
        if (isfinite(a[k]) && a[k] >= 0.0)
            continue;
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT,
                    "initial factor of mode %u: entry (%" PRIu64 ", %" PRIu64 ") is %g: a "
                    "nonnegative mode (cpd.constraints) needs finite initial entries >= 0",
                    mode + 1, k / rank + 1, k % rank + 1, a[k]);
        return FALSE;
    }
    return TRUE;
}

/* The given factors, mode 0's columns times the given weights (completion
 * keeps the scale in the factors). */
static gboolean set_given_factors(complete_run *run, GError **error)
{
    const th_cpd_params *p = run->params;
    th_backend *b = run->backend;
    for (uint32_t m = 0; m < run->nmodes; ++m) {
        if (((run->nonneg >> m) & 1u) &&
            !check_nonnegative(p->initial_factors[m], b->dims[m], run->rank, m, error))
            return FALSE;
        const double *factor = p->initial_factors[m];
        g_autofree double *weighted = NULL;
        if (m == 0 && p->initial_weights) {
            const size_t n = (size_t)b->dims[0] * run->rank;
            weighted = th_alloc_large(n, sizeof(double));
            for (size_t k = 0; k < n; ++k)
                weighted[k] = factor[k] * p->initial_weights[k % run->rank];
            factor = weighted;
        }
        if (!th_backend_set_factor(b, m, factor, error))
            return FALSE;
    }
    return TRUE;
}

static gboolean start_run(complete_run *run, GError **error)
{
    th_backend *b = run->backend;
    if (run->params->initial_factors) {
        run->r->initial_factors = TH_INIT_GIVEN;
        return set_given_factors(run, error);
    }
    if (th_backend_has_init_factors(b)) {
        run->r->initial_factors = TH_INIT_BACKEND;
        const size_t rr = (size_t)run->rank * run->rank;
        g_autofree double *grams = g_new(double, (size_t)run->nmodes * rr);
        g_autofree double **gram_of = g_new(double *, run->nmodes);
        for (uint32_t m = 0; m < run->nmodes; ++m)
            gram_of[m] = grams + (size_t)m * rr;
        return th_backend_init_factors(b, run->params->seed, gram_of, error);
    }
    run->r->initial_factors = TH_INIT_HOST;
    double **initial = th_cpd_initial_factors(b->dims, run->nmodes, run->rank, run->params->seed);
    gboolean ok = TRUE;
    for (uint32_t m = 0; ok && m < run->nmodes; ++m)
        ok = th_backend_set_factor(b, m, initial[m], error);
    th_cpd_free_factors(initial, run->nmodes);
    return ok;
}

/* Every row of mode n solved from its own entries. */
static gboolean solve_rows(complete_run *run, uint32_t n, GError **error)
{
    const gint64 start = g_get_monotonic_time();
    th_row_least_squares_io io;
    const gboolean ok = th_backend_row_least_squares(
        run->backend, n, run->params->completion.l2, (run->nonneg >> n) & 1u,
        run->params->completion.passes, &io, error);
    run->r->update_seconds += seconds_since(start);
    if (!ok)
        return FALSE;
    run->norms[n] = io.factor_norm_squared;
    run->r->completion.singular_rows += io.singular_rows;
    run->residual = io.residual_squared;
    run->residual_known = TRUE;
    return TRUE;
}

/* Below this fraction of the training entries' sum of squares the row
 * solves' residual_squared is not taken: it is x^T x - 2 a^T b + a^T G a
 * per row, which cancels in double to an error of order 1e-16 (times a
 * modest factor) of sum x^2, so a model fitting to within 1e-6 of it (fit
 * above 0.999) is measured by the exact pass instead. */
#define TH_COMPLETION_FUSED_ERROR_FLOOR 1e-6

/* The training entries' sum of squared residuals: the latest row solve's
 * residual_squared (after a whole sweep, the last mode's: the model as it
 * stands, with no pass over the nonzeros of its own); the separate pass
 * (generalized_mttkrp's squared-residual reduction) only where no row solve
 * has completed or the fit is too close for the fused sum's accuracy
 * (TH_COMPLETION_FUSED_ERROR_FLOOR). */
static gboolean training_error(complete_run *run, double norm_squared, double *sse,
                               GError **error)
{
    if (run->residual_known && run->residual >= TH_COMPLETION_FUSED_ERROR_FLOOR * norm_squared) {
        *sse = run->residual;
        return TRUE;
    }
    const gint64 start = g_get_monotonic_time();
    const gboolean ok = th_backend_generalized_mttkrp(run->backend, TH_MODE_NONE,
                                                      TH_ELEMENTWISE_VALUE,
                                                      TH_REDUCTION_SQUARED_RESIDUAL, 1.0, NULL,
                                                      sse, error);
    run->r->algebra_seconds += seconds_since(start);
    return ok;
}

static gboolean fetch_factors(complete_run *run, double **into, GError **error)
{
    const gint64 start = g_get_monotonic_time();
    for (uint32_t m = 0; m < run->nmodes; ++m)
        if (!th_backend_get_factor(run->backend, m, into[m], error))
            return FALSE;
    run->r->fetch_seconds += seconds_since(start);
    return TRUE;
}

/* The held-out RMSE of the latest factors; keeps them when they are the
 * best so far. */
static gboolean judge_held_out(complete_run *run, th_cpd_iteration *record, GError **error)
{
    if (!fetch_factors(run, run->latest, error))
        return FALSE;
    const gint64 start = g_get_monotonic_time();
    const double sse = th_completion_squared_error(run->held_out, run->latest, run->rank);
    run->r->algebra_seconds += seconds_since(start);
    record->holdout_rmse = sqrt(sse / (double)run->held_out->nnz);
    if (run->best_record.iteration == 0 ||
        record->holdout_rmse < run->best_record.holdout_rmse) {
        double **swap = run->best;
        run->best = run->latest;
        run->latest = swap;
        run->best_record = *record;
    }
    return TRUE;
}

/* With a holdout: stop once the held-out RMSE has not improved on the best
 * by the tolerance (relative) for TH_COMPLETION_PATIENCE iterations in a
 * row: its first iterations can rise before the factors settle. */
static gboolean held_out_converged(complete_run *run, double best_before,
                                   const th_cpd_iteration *record)
{
    if (record->iteration < 2 || !(best_before > 0.0))
        return FALSE;
    const gboolean improved =
        (best_before - record->holdout_rmse) >= run->params->tolerance * best_before &&
        record->holdout_rmse < best_before;
    run->stalled = improved ? 0 : run->stalled + 1;
    return run->stalled >= TH_COMPLETION_PATIENCE;
}

static void fill_summary(complete_run *run, const th_sptensor *train,
                         const th_cpd_iteration *published)
{
    th_completion_summary *c = &run->r->completion;
    const uint64_t held = run->held_out ? run->held_out->nnz : 0;
    c->observed = train->nnz + held;
    c->held_out = held;
    c->l2 = run->params->completion.l2;
    c->holdout = run->params->completion.holdout;
    if (published) {
        c->best_iteration = published->iteration;
        c->objective = published->objective;
        c->train_rmse = published->train_rmse;
        c->holdout_rmse = published->holdout_rmse;
    }
}

/* The published model: the best held-out iteration's factors (kept on the
 * host), else the backend's latest; then cp_model.h's form. */
static gboolean finish(complete_run *run, const th_sptensor *train, GError **error)
{
    th_cpd_result *r = run->r;
    const th_cpd_iteration *last =
        r->iterations->len
            ? &g_array_index(r->iterations, th_cpd_iteration, r->iterations->len - 1)
            : NULL;
    const gboolean use_best = run->best_record.iteration > 0;
    th_cpd_announce_phase(run->callbacks, "copying the factors from the backend");
    if (use_best) {
        r->factors = run->best;
        run->best = NULL;
    } else {
        r->factors = new_factors(r->dims, run->nmodes, run->rank);
        if (!fetch_factors(run, r->factors, error))
            return FALSE;
    }
    const th_cpd_iteration *published = use_best ? &run->best_record : last;
    fill_summary(run, train, published);
    const double norm_train = sqrt(th_sptensor_norm_squared(train));
    if (!use_best && (r->partial_modes > 0 || !published)) {
        /* Cut inside an iteration: the state after the last row solve. */
        const double sse = th_completion_squared_error(train, r->factors, run->rank);
        r->fit = 1.0 - sqrt(sse) / norm_train;
        r->completion.train_rmse = sqrt(sse / (double)train->nnz);
        r->completion.objective = NAN;
        r->completion.holdout_rmse =
            run->held_out ? sqrt(th_completion_squared_error(run->held_out, r->factors,
                                                             run->rank) /
                                 (double)run->held_out->nnz)
                          : NAN;
        r->completion.best_iteration = 0;
    } else {
        r->fit = published->fit;
    }
    th_cpd_announce_phase(run->callbacks, "arranging the model (norms, signs, order)");
    const gint64 arrange_start = g_get_monotonic_time();
    r->lambda = g_new(double, run->rank);
    for (uint32_t k = 0; k < run->rank; ++k)
        r->lambda[k] = 1.0;
    th_cp_model_arrange(r->lambda, r->factors, r->dims, run->nmodes, run->rank);
    r->arrange_seconds = seconds_since(arrange_start);
    return TRUE;
}

static th_cpd_result *new_result(const th_backend *backend, const th_sptensor *train,
                                 const th_cpd_params *params)
{
    const uint32_t nmodes = train->nmodes;
    th_cpd_result *r = g_new0(th_cpd_result, 1);
    r->nmodes = nmodes;
    r->rank = params->rank;
    r->dims = g_memdup2(train->dims, sizeof(th_index) * nmodes);
    r->iterations = g_array_new(FALSE, FALSE, sizeof(th_cpd_iteration));
    r->mttkrp_seconds = g_new(double, nmodes);
    r->mttkrp_device_seconds = g_new(double, nmodes);
    /* The row solves gather their own products: no MTTKRP runs. */
    for (uint32_t m = 0; m < nmodes; ++m)
        r->mttkrp_seconds[m] = r->mttkrp_device_seconds[m] = TH_CPD_NOT_MEASURED;
    r->update_path = backend->update_path;
    r->nonneg_modes = th_cpd_nonneg_mask(params, nmodes);
    r->model = TH_MODEL_COMPLETION;
    r->fit = NAN;
    r->log_likelihood = NAN;
    r->kkt_violation = NAN;
    r->completion.objective = NAN;
    r->objective = NAN; /* regularised CP-ALS's; completion's is completion.objective */
    r->completion.train_rmse = NAN;
    r->completion.holdout_rmse = NAN;
    return r;
}

/* One iteration's row solves, every mode; FALSE with *cut set when a stop
 * request cut it (the modes done in r->partial_modes). */
static gboolean sweep(complete_run *run, uint32_t it, gboolean *cut, GError **error)
{
    for (uint32_t n = 0; n < run->nmodes; ++n) {
        if (run->callbacks && run->callbacks->mode)
            run->callbacks->mode(it, n, run->nmodes, run->callbacks->user_data);
        g_autoptr(GError) local = NULL;
        if (solve_rows(run, n, &local))
            continue;
        if (!th_cpd_is_cancellation(local)) {
            g_propagate_error(error, g_steal_pointer(&local));
            return FALSE;
        }
        th_log(TH_LOG_DEBUG, "iteration %u stopped after %u of %u modes: %s", it, n,
               run->nmodes, local->message);
        run->r->interrupted = TRUE;
        run->r->partial_modes = n;
        *cut = TRUE;
        return FALSE;
    }
    return TRUE;
}

/* The iteration's measures after its sweep; FALSE on an error or a
 * cancelled evaluation (*cut). */
static gboolean measure(complete_run *run, const th_sptensor *train, double norm_train,
                        th_cpd_iteration *record, gboolean *cut, GError **error)
{
    g_autoptr(GError) local = NULL;
    double sse = 0.0;
    if (!training_error(run, norm_train * norm_train, &sse, &local) ||
        (run->held_out && !judge_held_out(run, record, &local))) {
        if (!th_cpd_is_cancellation(local)) {
            g_propagate_error(error, g_steal_pointer(&local));
            return FALSE;
        }
        run->r->interrupted = TRUE;
        run->r->partial_modes = run->nmodes;
        *cut = TRUE;
        return FALSE;
    }
    double penalty = 0.0;
    for (uint32_t m = 0; m < run->nmodes; ++m)
        penalty += run->norms[m];
    record->objective = sse + run->params->completion.l2 * penalty;
    record->train_rmse = sqrt(sse / (double)train->nnz);
    record->fit = 1.0 - sqrt(sse) / norm_train;
    if (!isfinite(record->objective)) {
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_NOT_FINITE,
                    "iteration %u: the objective is not finite (%g): the row solves "
                    "overflowed or produced NaN (plugin '%s')",
                    record->iteration, record->objective, th_backend_info(run->backend)->id);
        return FALSE;
    }
    return TRUE;
}

static void run_clear(complete_run *run)
{
    th_cpd_free_factors(run->latest, run->nmodes);
    th_cpd_free_factors(run->best, run->nmodes);
    g_free(run->norms);
}

th_cpd_result *th_cp_complete(th_backend *backend, const th_sptensor *train,
                              const th_sptensor *held_out, uint64_t empty_rows,
                              const th_cpd_params *params, const th_cpd_callbacks *callbacks,
                              GError **error)
{
    g_return_val_if_fail(params->model == TH_MODEL_COMPLETION, NULL);
    g_return_val_if_fail(backend->nmodes == train->nmodes && backend->rank == params->rank, NULL);
    const gint64 run_start = g_get_monotonic_time();
    const gboolean planned = backend->planned && backend->planned_rank == params->rank &&
                             backend->requested_update == params->update &&
                             backend->planned_model == (int32_t)params->model;
    if (!th_cpd_check_constraints_order(params, train->nmodes, error))
        return NULL;
    if (!planned && !th_cpd_plan(backend, params, NULL, error))
        return NULL;

    th_cpd_result *r = new_result(backend, train, params);
    r->completion.empty_rows = empty_rows;
    complete_run run = {
        .backend = backend,
        .params = params,
        .callbacks = callbacks,
        .r = r,
        .nmodes = train->nmodes,
        .rank = params->rank,
        .nonneg = th_cpd_nonneg_mask(params, train->nmodes),
        .held_out = held_out && held_out->nnz ? held_out : NULL,
        .norms = g_new0(double, train->nmodes),
    };
    if (run.held_out) {
        run.latest = new_factors(train->dims, run.nmodes, run.rank);
        run.best = new_factors(train->dims, run.nmodes, run.rank);
    }

    th_cpd_announce_phase(callbacks, params->initial_factors ? "setting the initial factors"
                                                      : "drawing the initial factors");
    const gint64 init_start = g_get_monotonic_time();
    gboolean ok = start_run(&run, error);
    r->init_seconds = seconds_since(init_start);

    const double norm_train = sqrt(th_sptensor_norm_squared(train));
    double previous_fit = 0.0;
    gboolean cut = FALSE;
    for (uint32_t it = 1; ok && !cut && it <= params->max_iters; ++it) {
        const gint64 start = g_get_monotonic_time();
        th_cpd_iteration record = {
            .iteration = it,
            .log_likelihood = NAN,
            .kkt_violation = NAN,
            .objective = NAN,
            .train_rmse = NAN,
            .holdout_rmse = NAN,
        };
        const double best_before = run.best_record.holdout_rmse;
        if (!sweep(&run, it, &cut, error) ||
            !measure(&run, train, norm_train, &record, &cut, error)) {
            ok = cut;
            break;
        }
        record.delta = record.fit - previous_fit;
        record.seconds = seconds_since(start);
        if (run.best_record.iteration == it)
            run.best_record = record;
        g_array_append_val(r->iterations, record);
        r->fit = record.fit;
        previous_fit = record.fit;
        const gboolean go_on = !(callbacks && callbacks->iteration) ||
                               callbacks->iteration(&record, callbacks->user_data);
        const gboolean held_out_stalled =
            run.held_out && held_out_converged(&run, best_before, &record);
        const gboolean converged =
            held_out_stalled || th_cpd_converged(it, record.delta, params->tolerance);
        if (converged) {
            r->converged = TRUE;
            break;
        }
        if (!go_on || th_cancel_requested()) {
            r->interrupted = TRUE;
            break;
        }
    }
    if (ok)
        ok = finish(&run, train, error);
    r->total_seconds = seconds_since(run_start);
    run_clear(&run);
    if (!ok) {
        th_cpd_result_free(r);
        return NULL;
    }
    return r;
}
