/* The entries a tensor-completion run learns from and is judged on: the
 * listed entries are the observed ones, split (seeded) into training and
 * held-out entries; the checks that the training entries determine every
 * factor row; and the error of a model at a set of entries. */
#ifndef TH_COMPLETION_DATA_H
#define TH_COMPLETION_DATA_H

#include <glib.h>
#include <stdint.h>

#include "tensor/sptensor.h"

/* Values completion can fit as read: finite, and within [2^-64, 2^64] in
 * magnitude (the least-squares models' safe range; completion does not
 * rescale, since its ridge term is not scale-invariant). FALSE with
 * TH_CPD_ERROR_INPUT naming the first bad entry otherwise, or
 * TH_CPD_ERROR_ZERO_TENSOR when the tensor lists no entry or only zeros
 * (the best model is then 0, and the training fit 0 / 0). */
gboolean th_completion_check_values(const th_sptensor *tensor, GError **error);

/* Whether listed entry k is held out: each with probability `holdout`,
 * independently, from (seed, k) alone, so the split is the same on every
 * machine and thread count (the count is holdout * nnz within its binomial
 * spread). */
gboolean th_completion_is_held_out(uint64_t seed, uint64_t k, double holdout);

/* The listed entries of `tensor` split into *train and *held_out (dims
 * and label as the tensor's, and what loading saw; *held_out has nnz 0
 * when holdout is 0). FALSE with TH_CPD_ERROR_INPUT when no entry would
 * remain to train on, TH_CPD_ERROR_ZERO_TENSOR when every one that remains
 * is 0. */
gboolean th_completion_split(const th_sptensor *tensor, double holdout, uint64_t seed,
                             th_sptensor **train, th_sptensor **held_out, GError **error);

/* Rows of some mode with no training entry: their factor row has nothing
 * to fit. With l2 = 0 it is undetermined: FALSE with TH_CPD_ERROR_INPUT
 * naming the mode, the first such row (1-based) and the count. With l2 > 0
 * the ridge makes it 0; TRUE, and *empty_rows (may be NULL) gets their
 * count over every mode and *description (may be NULL; g_free) a phrase
 * naming the first ("3 rows of mode 2 (the first: row 17)"), NULL when
 * there is none. */
gboolean th_completion_check_rows(const th_sptensor *train, double l2, uint64_t *empty_rows,
                                  char **description, GError **error);

/* The sum over `entries` of (x - m)^2, with m the model
 * sum_r prod_n factors[n](i_n, r) (unit weights), on all cores with the
 * same result whatever the thread count. */
double th_completion_squared_error(const th_sptensor *entries, double *const *factors,
                                   uint32_t rank);

#endif
