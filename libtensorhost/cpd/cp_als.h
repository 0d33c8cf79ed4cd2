/* CP-ALS driven through a backend: the backend does MTTKRP (and, when it
 * offers als_update, the factor update on its own memory; when it offers
 * als_sweep, a whole iteration with the R x R solves in one call); the host
 * does the R x R algebra otherwise, the fit and the stopping rule, as Tensor
 * Toolbox's cp_als:
 * columns normalised by 2-norm in the first iteration and max-norm after
 * (the inner loop's rule; the result is then put in the published form of
 * cp_model.h: unit 2-norm columns, weights in lambda, sorted),
 * fit = 1 - ||X - M|| / ||X|| computed without forming M, stop when
 * |fit change| < tolerance (never before the second iteration) or at
 * max_iters. */
#ifndef TH_CP_ALS_H
#define TH_CP_ALS_H

#include <glib.h>
#include "cpd/als_step.h"
#include "plugin/backend.h"
#include "config/config.h"
#include "dist/dist.h"
#include "tensor/sptensor.h"

#define TH_CPD_ERROR (th_cpd_error_quark())
GQuark th_cpd_error_quark(void);

typedef enum {
    TH_CPD_ERROR_UPDATE_PATH, /* the update path asked for needs a function the plugin lacks */
    TH_CPD_ERROR_ZERO_TENSOR, /* every value is zero: no decomposition exists */
    TH_CPD_ERROR_RANK,        /* a rank the backend cannot take */
    TH_CPD_ERROR_NOT_FINITE,  /* an iteration's fit came out NaN or infinite */
    /* The model asked for needs functions the plugin lacks (the Poisson
     * model: generalized_mttkrp and factor_update, ABI 1.4). */
    TH_CPD_ERROR_MODEL,
    /* Input the model cannot take: a negative or non-finite tensor value
     * or initial factor entry for the Poisson model. */
    TH_CPD_ERROR_INPUT,
    /* Constraints listed per mode for a tensor of another order. */
    TH_CPD_ERROR_CONSTRAINTS,
    /* l1 weights listed per mode for a tensor of another order. */
    TH_CPD_ERROR_L1,
} th_cpd_error;

/* Where a run's initial factors came from. */
typedef enum th_init_source {
    TH_INIT_HOST = 0, /* drawn by the host from the seed, uploaded with set_factor */
    TH_INIT_BACKEND,  /* drawn by the backend from the seed (init_factors, ABI 1.3) */
    TH_INIT_GIVEN,    /* th_cpd_params.initial_factors, uploaded with set_factor */
} th_init_source;

/* "host", "backend", "given" (report.json's cpd.initial_factors). */
const char *th_init_source_name(th_init_source source);

/* "auto", "sweep", "mode", "host" (the config's cpd.update values). */
const char *th_update_path_name(th_update_path path);
/* The inverse; FALSE for any other text. */
gboolean th_update_path_from_name(const char *name, th_update_path *path);

/* The model a run fits. */
typedef enum th_cpd_model {
    TH_MODEL_LEAST_SQUARES = 0, /* CP-ALS (th_cp_als) */
    TH_MODEL_POISSON = 1,       /* CP-APR, multiplicative updates (th_cp_apr) */
    /* Least squares over the listed entries only, the others unknown
     * (tensor.missing = "unlisted"): tensor completion by row-wise ALS
     * (th_cp_complete, cp_complete.h). */
    TH_MODEL_COMPLETION = 2,
} th_cpd_model;

/* "least-squares", "poisson" (the config's cpd.model values), "completion"
 * (the config's least-squares model with tensor.missing = "unlisted"). */
const char *th_cpd_model_name(th_cpd_model model);
/* The inverse; FALSE for any other text. */
gboolean th_cpd_model_from_name(const char *name, th_cpd_model *model);

/* cpd.constraints' text for one mode: "nonneg" or "none". */
const char *th_cpd_constraints_name(gboolean nonneg);

/* CP-APR's parameters besides max_iters and tolerance (its stoptol, the
 * KKT tolerance), with pyttb's cp_apr names and defaults in brackets. */
typedef struct th_apr_params {
    uint32_t max_inner_iters; /* inner MU iterations per mode [maxinneriters 10] */
    double kappa;             /* offset for inadmissible zeros [kappa 0.01] */
    double kappa_tolerance;   /* what counts as zero there [kappatol 1e-10] */
    double epsilon;           /* floor of the model in divisions [epsDivZero 1e-10] */
    /* An entry below kappa_tolerance is an inadmissible zero where Phi
     * exceeds this: 1, as Chi and Kolda and Tensor Toolbox (where the
     * gradient 1 - Phi is negative); pyttb 1.8 tests Phi > 0 [no name]. */
    double phi_threshold;
} th_apr_params;

/* Tensor completion's parameters (TH_MODEL_COMPLETION). */
typedef struct th_completion_params {
    double l2;        /* ridge: + l2 * sum_n ||A_n||_F^2 in the objective (cpd.l2), >= 0 */
    /* The fraction of the listed entries held out of training (seeded by
     * the run's seed), whose RMSE each iteration reports and the stopping
     * rule watches (tensor.holdout), in [0, 1). */
    double holdout;
    uint32_t passes;  /* coordinate-descent passes per row of a nonnegative mode */
} th_completion_params;

#define TH_COMPLETION_DEFAULT_PASSES 5u
/* Iterations in a row without a held-out improvement that stop a run. */
#define TH_COMPLETION_PATIENCE 5u

typedef struct th_cpd_params {
    th_cpd_model model;
    th_apr_params apr; /* read for TH_MODEL_POISSON only */
    th_completion_params completion; /* read for TH_MODEL_COMPLETION only */
    uint32_t rank;
    uint32_t max_iters;
    double tolerance;
    uint64_t seed;
    /* Zero (TH_UPDATE_AUTO) picks the best path the backend offers; SWEEP or
     * MODE on a backend without als_sweep / als_update is an error
     * (TH_CPD_ERROR_UPDATE_PATH) naming the plugin and the capability. */
    th_update_path update;
    /* Least squares with nonnegative factors (cpd.constraints): each
     * constrained mode's update by hierarchical ALS (th_dense_hals), inside
     * the sweep (als_sweep of plugin ABI 1.6), in the backend on the mode
     * path (als_update_nonneg, plugin ABI 1.5) or on the host. With
     * constraints or regularisation (l2, l1 below), AUTO resolves to SWEEP
     * when the plugin has als_sweep and is of ABI 1.6, else to MODE when it
     * has als_update (and als_update_nonneg where a mode needs coordinate
     * descent), else to HOST; SWEEP on an older plugin and MODE without
     * those functions are errors (TH_CPD_ERROR_UPDATE_PATH) naming the
     * plugin. On the mode path a plugin before 1.6 runs only 1.5's
     * nonnegative update; the host updates the modes that need more.
     * `nonneg_modes`: the modes constrained (bit m: mode m; UINT64_MAX:
     * every mode; 0: none);
     * `constraints_listed` is how many modes a per-mode list named (0: one
     * value for every mode), checked against the tensor's order
     * (th_cpd_check_constraints_order). */
    uint64_t nonneg_modes;
    uint32_t constraints_listed;
    /* Regularised CP-ALS (cpd.l2, cpd.l1; least squares only, read for
     * TH_MODEL_LEAST_SQUARES): each mode n's update minimises
     *   1/2 ||X_(n) - A K^T||^2 + l2/2 ||A||_F^2 + l1_n sum |A(i,r)|
     * given the other factors as the iteration keeps them (columns
     * normalised; the factor solved carries the weights, as SPLATT's
     * regularised ALS): A = M (V + l2 I)^-1 for a mode without constraint
     * and l1_n = 0, else by coordinate descent (th_dense_hals's rule, the
     * backend's als_update_nonneg or als_sweep of plugin ABI 1.6, or the
     * host's). `l1` holds l1_n per mode when `l1_listed` (how many modes a
     * per-mode list named, checked against the tensor's order as
     * constraints_listed is), else l1[0] is every mode's. All >= 0 and
     * finite. */
    double l2;
    double l1[TH_MAX_MODES];
    uint32_t l1_listed;
    /* The coordinate-descent updates' hierarchical-ALS passes per mode
     * (cpd.hals_passes, cpd.hals_budget): at most hals_max_passes, as the
     * mode's cost allows with hals_budget (als_step.h's th_hals_passes).
     * hals_max_passes 0: TH_HALS_SWEEPS passes for every mode, the budget
     * unread. */
    uint32_t hals_max_passes;
    double hals_budget;
    /* NULL, or [nmodes] arrays of dims[m] x rank: the initial factors
     * instead of the seed's (borrowed for the call). NULL: the seed's
     * counter-based factors (th_cpd_initial_factors), drawn by the backend
     * when it has init_factors (ABI 1.3), else by the host and uploaded. */
    const double *const *initial_factors;
    /* NULL, or [rank] initial weights (lambda) to go with initial_factors;
     * NULL: all ones. Read by the Poisson model and completion (which
     * folds them into the first factor); CP-ALS's first normalisation
     * would take them out again. Borrowed for the call. */
    const double *initial_weights;
    /* NULL: one process. Else one of a run's several processes (dist.h),
     * each with its own share of the tensor's nonzeros and the same
     * parameters: least squares, each mode's partial MTTKRP summed over
     * the processes before the update, which every process then makes on
     * the same bits; the tensor's norm and scale are the whole tensor's.
     * The sum is the host's (th_dist_sum, on the host path) unless the
     * backend makes it itself (th_backend_sums_processes: NCCL between
     * GPUs), when any update path runs. Borrowed. */
    th_dist *dist;
} th_cpd_params;

/* CP-APR's defaults (pyttb's cp_apr): th_apr_params and, when the config
 * leaves them out, the tolerance (stoptol) and max_iters (maxiters) of a
 * Poisson run. */
#define TH_APR_DEFAULT_MAX_INNER_ITERS 10u
#define TH_APR_DEFAULT_KAPPA 0.01
#define TH_APR_DEFAULT_KAPPA_TOLERANCE 1e-10
#define TH_APR_DEFAULT_EPSILON 1e-10
#define TH_APR_DEFAULT_PHI_THRESHOLD 1.0
#define TH_APR_DEFAULT_TOLERANCE 1e-4
#define TH_APR_DEFAULT_MAX_ITERS 1000u

/* th_apr_params with pyttb's defaults. */
th_apr_params th_apr_params_default(void);

/* The [cpd] keys of `config` as parameters, at `rank` (a comparison may run
 * several). cpd.update's text (the loader accepts only th_update_path_name()'s)
 * becomes its path; any other text, from a config not made by the loader,
 * is AUTO. */
th_cpd_params th_cpd_params_from_config(const th_config *config, uint32_t rank);

/* Every mode of an order-`nmodes` tensor, as a mask (bit m: mode m). */
uint64_t th_cpd_every_mode(uint32_t nmodes);

/* The modes params constrains, as a mask over `nmodes` modes (bit m: mode
 * m nonnegative). */
uint64_t th_cpd_nonneg_mask(const th_cpd_params *params, uint32_t nmodes);

/* Mode `mode`'s l1 weight (th_cpd_params.l1: listed per mode, or one for
 * every mode). */
double th_cpd_l1(const th_cpd_params *params, uint32_t mode);

/* Whether a least-squares run of params over `nmodes` modes is regularised:
 * l2 > 0 or some mode's l1 > 0. */
gboolean th_cpd_regularised(const th_cpd_params *params, uint32_t nmodes);

/* The modes whose CP-ALS update is coordinate descent (bit m: mode m):
 * those constrained nonnegative and those with l1 > 0. */
uint64_t th_cpd_descent_mask(const th_cpd_params *params, uint32_t nmodes);

/* A per-mode constraints list as long as the tensor's order: FALSE with
 * TH_CPD_ERROR_CONSTRAINTS naming both counts otherwise; the same for a
 * per-mode l1 list (TH_CPD_ERROR_L1). */
gboolean th_cpd_check_constraints_order(const th_cpd_params *params, uint32_t nmodes,
                                        GError **error);

/* Regularised CP-ALS fits the values as read: its terms are not
 * scale-invariant (the l1 term scales with the values, not with their
 * squares, and the max-norm's floor at 1 sits at one scale), so the host
 * never scales its tensor into the safe range (sptensor.h), as completion
 * does not. FALSE with TH_CPD_ERROR_INPUT when params is regularised and
 * `tensor` was scaled (value_scale != 1) or its largest |value| lies outside
 * [2^-64, 2^64]; TRUE otherwise. */
gboolean th_cpd_check_regularised_values(const th_cpd_params *params,
                                         const th_sptensor *tensor, GError **error);

/* The stopping rule (Tensor Toolbox's cp_als): after iteration `iteration`
 * (1-based), whose fit changed by `delta`, the run has converged when
 * |delta| < tolerance, from iteration 2 on. A tolerance of 0 never stops. */
gboolean th_cpd_converged(uint32_t iteration, double delta, double tolerance);

typedef struct th_cpd_iteration {
    uint32_t iteration; /* 1-based */
    /* Least squares: the fit and its change, the stopping rule's measure.
     * Poisson: the log-likelihood and its change (the fit of a Poisson
     * model is computed once, for the final model: th_cpd_result.fit). */
    double fit;
    double delta;   /* fit - previous fit (the first: fit itself) */
    double seconds; /* wall time of this iteration */
    /* Poisson only (NaN / 0 for least squares): */
    double log_likelihood;     /* after this outer iteration */
    double kkt_violation;      /* max over modes of the last inner iteration's */
    uint32_t inner_iterations; /* summed over the modes */
    uint32_t inadmissible_zero_modes; /* modes whose inadmissible zeros were raised */
    /* Completion only (NaN for the other models; holdout_rmse NaN without
     * a holdout): the objective sum over the training entries of (x - m)^2
     * + l2 sum_n ||A_n||_F^2, and the root mean squared errors.
     * objective is also regularised CP-ALS's (th_cpd_result.objective)
     * after the iteration, where every l1 is 0 (from the Grams; the 1-norms
     * an l1 term needs are known only once the factors are fetched, at the
     * end); NaN otherwise. */
    double objective;
    double train_rmse;
    double holdout_rmse;
} th_cpd_iteration;

/* What a completion run fitted and found (th_cpd_result.completion). */
typedef struct th_completion_summary {
    uint64_t observed; /* the listed entries */
    uint64_t held_out; /* of those, kept out of training */
    double l2;
    double holdout;
    /* The published model's (with a holdout: the iteration with the lowest
     * held-out RMSE, `best_iteration`; else the last). */
    uint32_t best_iteration;
    double objective;
    double train_rmse;
    double holdout_rmse; /* NaN without a holdout */
    /* Summed over the run's row solves: rows left unchanged by a singular
     * system, and rows with no training entry. */
    uint64_t singular_rows;
    uint64_t empty_rows;
} th_completion_summary;

typedef struct th_cpd_result {
    uint32_t nmodes;
    uint32_t rank;
    th_index *dims;
    /* The model in cp_model.h's form: lambda >= 0 decreasing, columns of unit
     * 2-norm, signs fixed as Tensor Toolbox's fixsigns. */
    double *lambda;   /* [rank] */
    double **factors; /* [nmodes] arrays of dims[m] x rank, row-major */
    GArray *iterations; /* th_cpd_iteration */
    double fit; /* least-squares fit 1 - ||X - M|| / ||X||, for every model */
    th_cpd_model model;
    /* Poisson: the final model's log-likelihood and KKT violation (NaN for
     * least squares). */
    double log_likelihood;
    double kkt_violation;
    th_completion_summary completion; /* TH_MODEL_COMPLETION only */
    gboolean converged;   /* stopped by the tolerance */
    gboolean interrupted; /* stopped on request: a signal, or a callback said stop */
    /* Set with `interrupted` when the stop came inside an iteration (a long
     * one, cut after TH_CANCEL_GRACE_SECONDS): the model is the ALS state
     * after that iteration's first partial_modes mode updates, a valid CP
     * model whose fit is `fit`; `iterations` holds the completed ones. 0
     * otherwise. With 0 modes updated at all there is no model: factors and
     * lambda are NULL and fit is NaN. */
    uint32_t partial_modes;
    th_update_path update_path; /* the path that ran: SWEEP, MODE or HOST, never AUTO */
    uint64_t nonneg_modes;      /* the factors constrained nonnegative (bit m: mode m) */
    /* The modes updated by coordinate descent (nonnegative or l1 > 0). */
    uint64_t descent_modes;
    /* Regularised CP-ALS (least squares): the weights it ran with (l1 per
     * mode, [nmodes] used; th_cpd_params'), and the objective
     *   1/2 ||X - M||^2 + l2/2 sum_n ||A_n||_F^2 + sum_n l1_n sum |A_n|
     * of the final model as the iterations hold it (every factor's columns
     * normalised but the last mode updated's, which carries the weights:
     * the objective its update minimised), in the file's units; NaN for an
     * unregularised run and the other models. */
    double l2;
    double l1[TH_MAX_MODES];
    double objective;
    /* The passes each mode's coordinate-descent update made at most
     * (th_hals_passes), and what chose them; 0 for a mode solved exactly
     * and for the other models. */
    uint32_t hals_passes[TH_MAX_MODES];
    uint32_t hals_max_passes;
    double hals_budget;
    /* The sweep path's als_sweep refused the regularised or constrained
     * iteration (TH_ERR_UNSUPPORTED): from that iteration on each mode was
     * updated on its own, as on the mode path. */
    gboolean sweep_refused;
    th_init_source initial_factors; /* who drew the factors the run started from */
    uint32_t pinv_fallbacks; /* host solves that needed the pseudo-inverse */
    /* Iterations whose als_sweep stopped early (a Cholesky breakdown) and
     * that the host finished per mode; always 0 off the sweep path. */
    uint32_t sweep_fallbacks;
    /* Timings in seconds. On the sweep path the MTTKRPs run inside
     * als_sweep, so the host cannot time them one by one: mttkrp_seconds[m]
     * is then TH_CPD_NOT_MEASURED (negative) for every mode, and their wall
     * time is in sweep_seconds. The backend's own per-mode times are still
     * collected (get_mode_info after each sweep). */
    double *mttkrp_seconds;        /* [nmodes] host wall time, summed; < 0: not measured */
    double *mttkrp_device_seconds; /* [nmodes] backend-reported, summed; < 0 if not reported */
    /* Sweep path: the als_sweep calls, plus the mttkrp() calls of the modes
     * the host finished after a sweep stopped early; 0 on the other paths. */
    double sweep_seconds;
    double update_seconds;  /* factor updates incl. transfers outside als_sweep */
    double algebra_seconds; /* host R x R work and fit */
    /* Outside the iterations: drawing (or setting) the initial factors and
     * their Grams; copying the factors back from the backend; bringing
     * them into the published form (cp_model.h). */
    double init_seconds;
    double fetch_seconds;
    /* Of fetch_seconds: waiting for the fresh memory of the result factors,
     * allocated and faulted in beside the iterations, to be ready. */
    double result_memory_seconds;
    double arrange_seconds;
    double total_seconds;
} th_cpd_result;

/* The factors were updated in the backend: update_path is SWEEP or MODE. */
static inline gboolean th_cpd_backend_updated(const th_cpd_result *r)
{
    return r->update_path != TH_UPDATE_HOST;
}

/* What a caller hears of a run; every member may be NULL. */
typedef struct th_cpd_callbacks {
    /* After each iteration. Returning FALSE stops the run there, as an
     * interruption (result->interrupted). */
    gboolean (*iteration)(const th_cpd_iteration *iteration, void *user_data);
    /* Before each mode's update (on the sweep path: once per iteration, with
     * mode 0), for progress displays of long iterations. */
    void (*mode)(uint32_t iteration, uint32_t mode, uint32_t nmodes, void *user_data);
    /* When a phase outside the iterations starts ("drawing the initial
     * factors", ...), which on tall factors takes seconds; for progress. */
    void (*phase)(const char *what, void *user_data);
    void *user_data;
} th_cpd_callbacks;

/* The seed's initial factors: factor m holds F_m(i, r) =
 * th_initial_factor_value(seed, m, i, r), uniform in [0, 1) (plugin.h,
 * "Initial factors"), drawn on all cores with the same result whatever the
 * thread count. Every backend starts from these, whether it draws them
 * itself (init_factors) or the host uploads them. Free with
 * th_cpd_free_factors. */
double **th_cpd_initial_factors(const th_index *dims, uint32_t nmodes, uint32_t rank,
                                uint64_t seed);
void th_cpd_free_factors(double **factors, uint32_t nmodes);

/* A tensor CP-ALS can decompose: FALSE with TH_CPD_ERROR_ZERO_TENSOR when
 * its norm is 0 (the fit, 1 - ||X - M|| / ||X||, would be 0 / 0). Call it
 * after th_sptensor_scale_to_safe_range, whose scaling keeps tiny values
 * from squaring to 0. */
gboolean th_cpd_check_tensor(const th_sptensor *tensor, GError **error);
/* The same from a squared norm and a count of stored entries (a tensor
 * whose shares several processes hold). */
gboolean th_cpd_check_norm(double norm_squared, uint64_t nnz, GError **error);

/* The largest rank this tensor can have: min(nnz, min over modes n of the
 * product of the other modes' lengths), saturating at UINT64_MAX. A CP rank
 * above it only adds components the data cannot determine: the normal
 * equations turn rank deficient and the fit stops improving. */
uint64_t th_cpd_rank_bound(const th_sptensor *tensor);

/* Plans a run of `params` on `backend` before any work: for a model other
 * than least squares, the functions it needs (FALSE with
 * TH_CPD_ERROR_MODEL naming the plugin and the functions; an update path
 * other than AUTO is TH_CPD_ERROR_UPDATE_PATH, since such a model's
 * updates always run in the backend, planned as TH_UPDATE_MODE); its rank
 * against the plugin's maximum (FALSE with TH_CPD_ERROR_RANK naming both) and
 * params->update resolved to the path the backend has (never AUTO; FALSE
 * with TH_CPD_ERROR_UPDATE_PATH naming the plugin and the capability), both
 * kept in the backend (planned_rank, update_path) for th_cp_als. `where`
 * (the location of cpd.rank in a config, or NULL) prefixes a rank error. */
gboolean th_cpd_plan(th_backend *backend, const th_cpd_params *params, const char *where,
                     GError **error);

/* Runs CP-ALS on a backend whose tensor is already loaded with params->rank,
 * on the plan th_cpd_plan made (made here when there is none for `params`).
 * A stop request (cancel.h) ends the run after the current iteration, or
 * inside it once the backend gives up a call as cancelled (a long
 * iteration, TH_CANCEL_GRACE_SECONDS after the request), with
 * result->interrupted set; that is not an error. `callbacks` may be NULL. */
th_cpd_result *th_cp_als(th_backend *backend, const th_sptensor *tensor,
                         const th_cpd_params *params, const th_cpd_callbacks *callbacks,
                         GError **error);
void th_cpd_result_free(th_cpd_result *result);

/* For the models' runs: whether a backend call gave up because a stop was
 * requested (TH_ERR_CANCELLED), and the phase callback when there is one. */
gboolean th_cpd_is_cancellation(const GError *error);
void th_cpd_announce_phase(const th_cpd_callbacks *callbacks, const char *what);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(th_cpd_result, th_cpd_result_free)

#endif
