/* One CP-ALS iteration on a backend, as Tensor Toolbox's cp_als does it:
 * for each mode, the MTTKRP, the Hadamard product of the other modes'
 * Grams, its (pseudo-)inverse and the factor update, on whichever path the
 * backend offers (one als_sweep, als_update per mode, or the host's update).
 * The one implementation of the iteration: tensorhost's runs (cp_als.c),
 * the plugin checker and the benchmark all step through it. */
#ifndef TH_ALS_STEP_H
#define TH_ALS_STEP_H

#include <glib.h>

#include "dist/dist.h"
#include "plugin/backend.h"

/* A time the host could not measure (see th_als_timings). */
#define TH_CPD_NOT_MEASURED (-1.0)

/* Seconds, summed over the steps taken. On the sweep path the MTTKRPs run
 * inside als_sweep, so the host cannot time them one by one:
 * mttkrp_seconds[m] is then TH_CPD_NOT_MEASURED for every mode and their
 * wall time is in sweep_seconds; the backend's own per-mode times are still
 * collected (get_mode_info after each sweep). */
typedef struct th_als_timings {
    double *mttkrp_seconds;        /* [nmodes] host wall time; < 0: not measured */
    double *mttkrp_device_seconds; /* [nmodes] backend-reported; < 0 if not reported */
    /* Sweep path: the als_sweep calls, plus the mttkrp() calls of the modes
     * the host finished after a sweep stopped early; 0 on the other paths. */
    double sweep_seconds;
    double update_seconds;  /* factor updates incl. transfers outside als_sweep */
    double algebra_seconds; /* host R x R work */
} th_als_timings;

/* The R x R side of CP-ALS between iterations; the tall data (factors,
 * MTTKRP results) stays in the backend. Members are read by the caller;
 * only the th_als_* functions change them. */
typedef struct th_als_state {
    th_backend *backend; /* borrowed; its tensor loaded */
    uint32_t nmodes, rank;
    th_update_path path; /* SWEEP, MODE or HOST, never AUTO */
    double **grams;      /* [nmodes] rank x rank: Grams of the backend's current factors */
    double *lambda;      /* [rank], of the last mode updated */
    double *inner;       /* [rank], <M, A> of the last mode updated */
    uint32_t modes_updated; /* by the latest step (fewer than nmodes after a failure) */
    gboolean any_update;    /* lambda and inner hold some mode's update */
    uint32_t pinv_fallbacks;  /* host solves that needed the pseudo-inverse */
    /* Steps whose als_sweep stopped early (a Cholesky breakdown) and that
     * the host finished per mode; always 0 off the sweep path. */
    uint32_t sweep_fallbacks;
    /* The modes whose update is nonnegative (bit m: mode m;
     * th_als_state_constrain_nonneg, th_als_state_regularise). */
    uint64_t nonneg_modes;
    /* The regularisation (th_als_state_regularise): the ridge of every
     * mode and each mode's l1 weight ([nmodes], zeros by default). */
    double l2;
    double *l1;
    /* The modes updated by coordinate descent (bit m: mode m; those
     * nonnegative or with l1 > 0): hierarchical ALS of th_dense_hals's
     * rule from the current model's factor, with hals_sweeps passes at
     * most, on the host on the host path, by the backend's
     * als_update_nonneg on the mode path (and on the sweep path, inside
     * als_sweep of ABI 1.6 or for the modes the host finishes). The other
     * modes solve with V + l2 I. */
    uint64_t descent_modes;
    /* [nmodes] the passes of each descent mode's update (th_als_terms). */
    uint32_t *hals_passes;
    /* The backend refused als_update_nonneg where it runs (TH_ERR_
     * UNSUPPORTED): the host updates the descent modes from then on. */
    gboolean nonneg_on_host;
    /* The sweep path: als_sweep refused the regularised iteration (TH_ERR_
     * UNSUPPORTED): every later iteration runs per mode, as the mode path. */
    gboolean sweep_refused;
    /* The mode whose factor carries the weights `lambda` (the last one
     * updated); UINT32_MAX before any update (lambda ones). */
    uint32_t weighted_mode;
    th_als_timings timings;
    /* scratch */
    double *hadamard, *w, *host_mttkrp, *host_factor;
    double *scale; /* [rank]: the weights als_update_nonneg scales by */
    int32_t *constraints; /* [nmodes] TH_CONSTRAINT_* of each mode, for als_sweep */
    gboolean older_plugin_logged; /* the host's descent for an older plugin, said once */
    /* NULL, or the processes of a distributed run (th_cpd_params.dist): a
     * stop is decided between iterations, by every process together; each
     * mode's MTTKRP is this process's partial one, summed over the
     * processes on the host before the update, unless backend_sums (the
     * backend sums them itself: th_backend_sums_processes). Borrowed. */
    th_dist *dist;
    gboolean backend_sums;
} th_als_state;

/* What a caller hears of a step; every member may be NULL. */
typedef struct th_als_step_callbacks {
    /* Before each mode's update (on the sweep path: once per step, with
     * mode 0), for progress displays of long iterations. */
    void (*mode)(uint32_t iteration, uint32_t mode, uint32_t nmodes, void *user_data);
    void *user_data;
} th_als_step_callbacks;

/* A state for `backend` (tensor loaded, rank = backend->rank) on the
 * resolved `path` (not AUTO). Grams are zero until set with
 * th_als_state_set_factors or th_als_state_init_factors, or written by the
 * caller. */
th_als_state *th_als_state_new(th_backend *backend, th_update_path path);
void th_als_state_free(th_als_state *state);

/* Makes the later updates of the modes in `modes` (bit m: mode m)
 * nonnegative: such a mode's factor solves its nonnegative least-squares
 * problem by hierarchical ALS (th_dense_hals_nonneg: up to TH_HALS_SWEEPS
 * passes, TensorLy's stopping rule) from the current model's factor,
 * instead of the unconstrained solve: on the host (host path) or in the
 * backend (mode path: als_update_nonneg, plugin ABI 1.5, which the caller
 * has checked the backend has). */
#define TH_HALS_SWEEPS 5u
#define TH_HALS_TOLERANCE 1e-8
void th_als_state_constrain_nonneg(th_als_state *state, uint64_t modes);

/* Gillis and Glineur's share of an update's passes (accelerated HALS,
 * Neural Computation 24(4), 2012: their alpha, which they find works well
 * at 0.5): th_hals_passes' default. */
#define TH_HALS_BUDGET 0.5

/* Each mode's hierarchical-ALS passes for a tensor of `nmodes` modes of
 * `dims`, `nnz` nonzeros (the whole tensor's), at `rank`, as Gillis and
 * Glineur's accelerated HALS chooses them: a pass over mode n's factor
 * costs about dims[n] (R^2 + R) multiply-adds, forming what the passes
 * solve from (the MTTKRP, nnz N R, and the other modes' Grams,
 * sum_{m != n} dims[m] R^2) rho_n - 1 passes' worth; the mode makes
 * floor(1 + budget rho_n) passes, at least 1 and at most `max_passes`
 * (TensorLy's fixed count, 5, is a budget large enough never to bind). So
 * a mode whose passes cost about what forming M does (a long mode with a
 * few nonzeros a row) makes one, where further passes would cost more
 * than they gain; the stopping test (TH_HALS_TOLERANCE) still ends any
 * mode's passes early. Every backend and path makes the same passes. */
void th_hals_passes(const th_index *dims, uint32_t nmodes, uint64_t nnz, uint32_t rank,
                    uint32_t max_passes, double budget, uint32_t *passes);

/* What regularises and constrains CP-ALS's updates (cp_als.h's
 * th_cpd_params): the nonnegative modes (bit m: mode m), the ridge,
 * each mode's l1 weight ([nmodes]; NULL: none) and each mode's
 * hierarchical-ALS passes ([nmodes], th_hals_passes; NULL: TH_HALS_SWEEPS
 * every mode). */
typedef struct th_als_terms {
    uint64_t nonneg_modes;
    double l2;
    const double *l1;
    const uint32_t *hals_passes;
} th_als_terms;

/* Makes the later updates of mode n minimise 1/2 ||X_(n) - A K^T||^2 +
 * l2/2 ||A||^2 + l1_n sum |A|, under A >= 0 for a nonnegative mode: A =
 * M (V + l2 I)^-1 (its pseudo-inverse on a breakdown) for a free mode with
 * l1_n = 0, else coordinate descent (th_als_state_constrain_nonneg's
 * update, with the ridge and l1). On the mode path the descent runs in
 * the backend's als_update_nonneg, given a ridge, an l1 or no constraint
 * only when the plugin is of ABI 1.6 or later (else the host updates that
 * mode, saying so once); on the sweep path the terms go to als_sweep
 * (which the caller has checked takes them: ABI 1.6). */
void th_als_state_regularise(th_als_state *state, const th_als_terms *terms);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(th_als_state, th_als_state_free)

/* Hands `factors` ([nmodes] of dims[m] x rank) to the backend and keeps
 * their Grams. */
gboolean th_als_state_set_factors(th_als_state *state, double *const *factors, GError **error);

/* Has the backend draw the seed's initial factors itself (init_factors,
 * ABI 1.3; th_backend_has_init_factors) and keeps the Grams it returns:
 * the state th_als_state_set_factors would leave with
 * th_cpd_initial_factors(seed), without a factor crossing to the backend. */
gboolean th_als_state_init_factors(th_als_state *state, uint64_t seed, GError **error);

/* One iteration with column norm `norm` (TH_NORM_2 or TH_NORM_MAX; cp_als
 * takes the 2-norm in its first iteration). `iteration` is only passed on
 * to the callbacks and messages. On failure state->modes_updated says how
 * far it got (the modes before it hold a valid model). */
gboolean th_als_step(th_als_state *state, uint32_t iteration, int32_t norm,
                     const th_als_step_callbacks *callbacks, GError **error);

/* fit = 1 - ||X - M|| / ||X|| of the model the state describes, without
 * forming M: ||M||^2 from lambda and the Grams, <X, M> from the last
 * mode's inner products. */
double th_als_state_fit(th_als_state *state, double norm_x_squared);

/* The regularised objective of the model the state describes,
 *   1/2 ||X - M||^2 + l2/2 sum_n ||A_n||_F^2 + sum_n l1_n sum |A_n(i,r)|
 * with the factors as the backend holds them except the weighted mode's,
 * times lambda (the objective that mode's update minimised): the squared
 * norms from the Grams; the 1-norms from `column_abs_sums` ([nmodes] arrays
 * of [rank]: sum_i |A_n(i,r)| of the factors as held), which may be NULL
 * when every l1 is 0 (else the result is NaN). */
double th_als_state_objective(th_als_state *state, double norm_x_squared,
                              double *const *column_abs_sums);

#endif
