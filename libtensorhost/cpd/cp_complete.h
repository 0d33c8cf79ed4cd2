/* Tensor completion: the least-squares CP model fitted to the listed
 * entries only, the others unknown (tensor.missing = "unlisted"), by
 * row-wise ALS, driven through a backend's row_least_squares (ABI 1.5):
 *
 *   minimise  sum over training entries of (x - m)^2 + l2 sum_n ||A_n||_F^2
 *   with m = sum_r prod_n A_n(i_n, r) (weights folded into the factors);
 *   each iteration, for every mode n in turn, every row of A_n is the
 *   minimiser given the other factors (its own R x R system from its own
 *   entries, solved in the backend; nonnegative modes by coordinate
 *   descent), so the objective never rises;
 *   then the training error (one generalized_mttkrp reduction, TH_MODE_NONE,
 *   TH_REDUCTION_SQUARED_RESIDUAL) and, with a holdout, the held-out error
 *   from the factors fetched to the host.
 *
 * The stopping rule: CP-ALS's on the training fit 1 - ||x - m|| / ||x||
 * over the training entries (|change| < tolerance, from the second
 * iteration); with a holdout also when the held-out RMSE has not improved
 * on the best so far by the tolerance (relative) for
 * TH_COMPLETION_PATIENCE iterations in a row, and the published model is
 * the one at the best held-out RMSE (early stopping). The model is
 * published as CP-ALS's (cp_model.h). */
#ifndef TH_CP_COMPLETE_H
#define TH_CP_COMPLETE_H

#include <glib.h>
#include <stdint.h>

#include "cpd/cp_als.h"
#include "plugin/backend.h"
#include "tensor/sptensor.h"

/* Runs completion on a backend whose training entries `train` are loaded
 * at params->rank (params->model TH_MODEL_COMPLETION), on the plan
 * th_cpd_plan made (made here when there is none for `params`).
 * `held_out` (may be NULL or empty) are the entries kept out of training;
 * `empty_rows` is train's count of rows without an entry over every mode
 * (th_completion_check_rows's, which the caller has run), which the result
 * reports.
 * Iteration records: fit = the training fit, delta its change, and the
 * completion fields; the result's fit is the published model's training
 * fit. A stop request or a callback's FALSE ends the run after the
 * iteration (inside it, when the backend gives a call up as cancelled: the
 * model is then the state after the last completed row solve). */
th_cpd_result *th_cp_complete(th_backend *backend, const th_sptensor *train,
                              const th_sptensor *held_out, uint64_t empty_rows,
                              const th_cpd_params *params, const th_cpd_callbacks *callbacks,
                              GError **error);

#endif
