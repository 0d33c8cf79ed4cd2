/* One CP decomposition as every caller runs it (the program, each backend
 * of a comparison, the library API): the steps in the one order the
 * contract allows, each a call, so that a caller does its own work between
 * them (the program reads the tensor only after the plan, and prints its
 * summaries) but cannot skip or reorder them:
 *
 *   th_cpd_session_new      the plan, before any tensor is read: the model's
 *                           functions, the rank against the plugin's
 *                           maximum, the update path against what it
 *                           implements (th_cpd_plan)
 *   th_cpd_session_prepare  the tensor: least squares: values scaled into
 *                           the safe range (sptensor.h); Poisson: values
 *                           as read, finite and >= 0 (th_cp_apr_check_tensor);
 *                           completion: values as read, finite and in the
 *                           safe range, split into training and held-out
 *                           entries, every factor row reached or a ridge
 *                           (completion_data.h); the backend loads the
 *                           training entries;
 *                           a norm above 0, and the warnings known before
 *                           the run (cpd_warnings.h); in a run of several
 *                           processes (th_cpd_params.dist) the tensor is
 *                           this process's share, scaled and checked by
 *                           the whole tensor's largest value and norm
 *   th_cpd_session_load     the backend builds its layouts, at the plan's
 *                           rank
 *   th_cpd_session_run      the model's run on params->model: CP-ALS
 *                           (th_cp_als), CP-APR (th_cp_apr, cp_apr.h) or
 *                           completion (th_cp_complete, cp_complete.h),
 *                           and the warnings of what it found; may be
 *                           called again on the same load
 *
 * The rank is given once, in the parameters of th_cpd_session_new. Each
 * model is a kind of run of this one sequence: it plugs in here (the
 * plan, prepare and run), not in the callers. A session belongs to one
 * thread. */
#ifndef TH_CPD_SESSION_H
#define TH_CPD_SESSION_H

#include <glib.h>

#include "plugin/backend.h"
#include "cpd/cp_als.h"
#include "cpd/cpd_warnings.h"
#include "tensor/sptensor.h"

typedef struct th_cpd_session th_cpd_session;

/* Plans `params` on `backend` (borrowed: it outlives the session). `where`
 * (the location of the rank in a config, or NULL) prefixes a rank error;
 * `terms` (copied) names things in the warnings. NULL with the plan's
 * error (TH_CPD_ERROR_RANK, TH_CPD_ERROR_UPDATE_PATH). */
th_cpd_session *th_cpd_session_new(th_backend *backend, const th_cpd_params *params,
                                   const char *where, const th_cpd_warning_terms *terms,
                                   GError **error);
void th_cpd_session_free(th_cpd_session *session);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(th_cpd_session, th_cpd_session_free)

/* The parameters the session runs with (its rank is the run's). */
const th_cpd_params *th_cpd_session_params(const th_cpd_session *session);

/* Takes `tensor` (borrowed: it outlives the session) for the run, its
 * values scaled in place when their squares would overflow or underflow
 * (th_sptensor_scale_to_safe_range; *scaled, when not NULL, says so), and
 * checks it: FALSE with TH_CPD_ERROR_ZERO_TENSOR when its norm is 0. */
gboolean th_cpd_session_prepare(th_cpd_session *session, th_sptensor *tensor, gboolean *scaled,
                                GError **error);
/* The tensor step alone, for a tensor prepared once for several sessions
 * (a comparison's backends): scaled in place into the safe range (*scaled,
 * when not NULL, says whether), then checked (TH_CPD_ERROR_ZERO_TENSOR). */
gboolean th_cpd_prepare_tensor(th_sptensor *tensor, gboolean *scaled, GError **error);
/* The same for the model that will run: least squares as above; Poisson
 * leaves the values as they are (*scaled FALSE) and checks they are finite
 * and >= 0 (TH_CPD_ERROR_INPUT) and not all zero. */
gboolean th_cpd_prepare_tensor_for(th_sptensor *tensor, th_cpd_model model, gboolean *scaled,
                                   GError **error);

/* The same for a tensor that must not change: a scaled copy, owned by the
 * session, when scaling is needed; `tensor` itself otherwise. */
gboolean th_cpd_session_prepare_copy(th_cpd_session *session, const th_sptensor *tensor,
                                     GError **error);

/* Loads the prepared tensor into the backend at the plan's rank
 * (th_backend_load_tensor). */
gboolean th_cpd_session_load(th_cpd_session *session, GError **error);

/* Runs CP-ALS on the loaded tensor (th_cp_als: `callbacks` may be NULL).
 * Each run replaces the warnings of the run before it. */
th_cpd_result *th_cpd_session_run(th_cpd_session *session, const th_cpd_callbacks *callbacks,
                                  GError **error);

/* The prepared tensor the backend loads (completion: the training
 * entries), and completion's held-out entries (NULL for another model);
 * owned by the session, NULL before prepare. */
const th_sptensor *th_cpd_session_tensor(const th_cpd_session *session);
const th_sptensor *th_cpd_session_held_out(const th_cpd_session *session);

/* The warnings so far (th_cpd_warning, the tensor's first, then the last
 * run's); owned by the session. */
const GPtrArray *th_cpd_session_warnings(const th_cpd_session *session);

#endif
