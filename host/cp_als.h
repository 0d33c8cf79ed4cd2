/* CP-ALS driven through a backend: the backend does MTTKRP (and, when it
 * offers als_update, the factor update on its own memory); the host does the
 * R x R algebra, the fit and the stopping rule, as Tensor Toolbox's cp_als:
 * columns normalised by 2-norm in the first iteration and max-norm after,
 * fit = 1 - ||X - M|| / ||X|| computed without forming M, stop when
 * |fit change| < tolerance (never before the second iteration) or at
 * max_iters. */
#ifndef TH_CP_ALS_H
#define TH_CP_ALS_H

#include <glib.h>
#include "backend.h"
#include "sptensor.h"

typedef struct th_cpd_params {
    uint32_t rank;
    uint32_t max_iters;
    double tolerance;
    uint64_t seed;
    /* Update factors on the host even when the backend has als_update (for
     * testing the two paths against each other). */
    gboolean force_host_update;
} th_cpd_params;

typedef struct th_cpd_iteration {
    uint32_t iteration; /* 1-based */
    double fit;
    double delta;   /* fit - previous fit (the first: fit itself) */
    double seconds; /* wall time of this iteration */
} th_cpd_iteration;

typedef struct th_cpd_result {
    uint32_t nmodes;
    uint32_t rank;
    th_index *dims;
    double *lambda;   /* [rank], components ordered by decreasing lambda */
    double **factors; /* [nmodes] arrays of dims[m] x rank, row-major, unit columns */
    GArray *iterations; /* th_cpd_iteration */
    double fit;
    gboolean converged;   /* stopped by the tolerance */
    gboolean interrupted; /* stopped by Ctrl-C (cancellation) */
    gboolean backend_update; /* factor updates ran in the backend (als_update) */
    uint32_t pinv_fallbacks; /* solves that needed the pseudo-inverse */
    /* Timings in seconds. */
    double *mttkrp_seconds;        /* [nmodes] host wall time, summed over iterations */
    double *mttkrp_device_seconds; /* [nmodes] backend-reported, summed; < 0 if not reported */
    double update_seconds;  /* factor updates incl. transfers (backend or host) */
    double algebra_seconds; /* host R x R work and fit */
    double total_seconds;
} th_cpd_result;

typedef void (*th_cpd_iteration_fn)(const th_cpd_iteration *iteration, void *user_data);

/* Uniform [0,1) factors from `seed`, mode after mode: the same seed gives
 * the same initial factors on every backend. Free with th_cpd_free_factors. */
double **th_cpd_initial_factors(const th_index *dims, uint32_t nmodes, uint32_t rank,
                                uint64_t seed);
void th_cpd_free_factors(double **factors, uint32_t nmodes);

/* Runs CP-ALS on a backend whose tensor is already loaded with params->rank.
 * Cancellation (th_cancel_requested) ends the run after the current
 * iteration with result->interrupted set; that is not an error. */
th_cpd_result *th_cp_als(th_backend *backend, const th_sptensor *tensor,
                         const th_cpd_params *params, th_cpd_iteration_fn on_iteration,
                         void *user_data, GError **error);
void th_cpd_result_free(th_cpd_result *result);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(th_cpd_result, th_cpd_result_free)

#endif
