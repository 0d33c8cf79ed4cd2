/* CP-APR (Poisson CP by alternating Poisson regression) with multiplicative
 * updates, driven through a backend's ABI 1.4 functions: exactly pyttb's
 * cp_apr(..., algorithm="mu") (tt_cp_apr_mu), with every tall array in the
 * backend; only rank-length vectors and scalars cross:
 *
 *   initial factors (given ones must be >= 0), lambda ones (or given)
 *   every mode: NORMALIZE_1 -> s, lambda *= s            (M.normalize(normtype=1))
 *   outer iterations 1..max_iters, each over the modes n:
 *     from the second on: RAISE_INADMISSIBLE_ZEROS(n, phi_threshold,
 *       kappa_tolerance, kappa)
 *     SCALE_COLUMNS(n, lambda), lambda = ones            (M.redistribute(n))
 *     up to max_inner_iters times: Phi = generalized_mttkrp(n, POISSON_RATIO,
 *       epsilon); MULTIPLICATIVE_UPDATE(n, tolerance) -> KKT violation;
 *       stop the inner loop once it is below the tolerance (the mode counts
 *       as not converged otherwise); where the backend has
 *       multiplicative_updates (ABI 1.7), that loop is its one call
 *     NORMALIZE_1(n) -> lambda                            (M.normalize(normtype=1, mode=n))
 *   log-likelihood = sum x log(m) (a TH_MODE_NONE reduction weighted by
 *   lambda) - sum(lambda) (the columns have unit 1-norm);
 *   stop when every mode's first inner iteration met the tolerance.
 *
 * Inadmissible zeros are the entries with Phi > phi_threshold (and A <
 * kappa_tolerance). The default threshold 1 is Tensor Toolbox's MATLAB
 * cp_apr's and the KKT conditions' (A = 0 is optimal only where Phi <= 1);
 * pyttb 1.8 tests Phi > 0, which its own TODO marks as a departure, and
 * phi_threshold = 0 reproduces it exactly. The published model has unit 1-norm columns and lambda
 * sorted decreasing (pyttb's final M.normalize(sort=True, normtype=1)). */
#ifndef TH_CP_APR_H
#define TH_CP_APR_H

#include <glib.h>

#include "cpd/cp_als.h"
#include "plugin/backend.h"
#include "tensor/sptensor.h"
#include "tensor/tensor_read_types.h"

/* Why the reader refuses a negative value in a Poisson run (the end of its
 * message: "PATH:LINE: column 4: value '-3' is negative: ..."). */
#define TH_CP_APR_NONNEGATIVE_REASON \
    "the Poisson model (cpd.model = \"poisson\") needs counts >= 0"

/* Sets in *options what a run of `model` needs of its tensor's read (the
 * other fields kept): for TH_MODEL_POISSON, require_nonnegative, so that a
 * negative value is an error naming its file and line (a binary file's: its
 * nonzero) before any long work; nothing for another model. */
void th_cp_apr_read_options(th_cpd_model model, th_tensor_read_options *options);

/* A tensor the Poisson model can take: every value finite and >= 0 (FALSE
 * with TH_CPD_ERROR_INPUT naming the first bad entry, 0-based, and its
 * coordinates, 1-based as in .tns files), and not all zero
 * (TH_CPD_ERROR_ZERO_TENSOR). *non_integer (may be NULL) gets how many
 * values are not whole numbers. Never scaled: the model is not
 * scale-invariant. */
gboolean th_cp_apr_check_tensor(const th_sptensor *tensor, uint64_t *non_integer,
                                GError **error);

/* Runs CP-APR on a backend whose tensor is already loaded at params->rank
 * (params->model TH_MODEL_POISSON), on the plan th_cpd_plan made (made
 * here when there is none for `params`). Iteration records: fit = the
 * log-likelihood, delta its change, and the Poisson fields; the result's
 * fit is the final model's least-squares fit 1 - ||X - M|| / ||X||, its
 * log_likelihood and kkt_violation the final model's. A stop request or a
 * callback's FALSE ends the run after the iteration (inside it, when the
 * backend gives a call up as cancelled: the model is then the state after
 * the last completed call, a valid nonnegative model). */
th_cpd_result *th_cp_apr(th_backend *backend, const th_sptensor *tensor,
                         const th_cpd_params *params, const th_cpd_callbacks *callbacks,
                         GError **error);

#endif
