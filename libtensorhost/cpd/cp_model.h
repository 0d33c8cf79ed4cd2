/* The published form of a CP model [[lambda; A_1, ..., A_N]], the
 * convention of Tensor Toolbox's normalize / fixsigns / arrange and of
 * SPLATT's output, so factor files from any backend or tool line up:
 *   - every factor column has unit 2-norm and lambda holds the component
 *     weights (the product of the norms taken out), all >= 0;
 *   - signs: in each component the entry of largest magnitude of each
 *     column is positive, in all modes but possibly the last mode whose
 *     column had it negative (flipping two columns' signs leaves the
 *     component unchanged, so only an even number of flips is possible);
 *   - components ordered by decreasing lambda (ties keep their order).
 * Each step leaves the model (the tensor it represents) unchanged up to
 * rounding. */
#ifndef TH_CP_MODEL_H
#define TH_CP_MODEL_H

#include <stdint.h>

#include "tensor/sptensor.h"

/* Moves every column's 2-norm into lambda: A_n(:, r) /= ||A_n(:, r)||_2 and
 * lambda[r] *= that norm, for every mode. A zero column stays zero (its
 * component's lambda becomes 0). A negative lambda[r] is made positive by
 * flipping the sign of mode 0's column r. factors[m] is dims[m] x rank,
 * row-major. */
void th_cp_model_normalize(double *lambda, double *const *factors, const th_index *dims,
                           uint32_t nmodes, uint32_t rank);

/* Tensor Toolbox's fixsigns: for each component, the modes whose column's
 * largest-magnitude entry (the first, on ties) is negative are flipped in
 * pairs, in mode order. */
void th_cp_model_fix_signs(double *const *factors, const th_index *dims, uint32_t nmodes,
                           uint32_t rank);

/* Orders components by decreasing lambda (stable), permuting every
 * factor's columns alike. */
void th_cp_model_sort(double *lambda, double *const *factors, const th_index *dims,
                      uint32_t nmodes, uint32_t rank);

/* normalize, fix_signs, then sort: the form tensorhost writes. */
void th_cp_model_arrange(double *lambda, double *const *factors, const th_index *dims,
                         uint32_t nmodes, uint32_t rank);

/* The published form of a nonnegative model (CP-APR's, as pyttb's
 * ktensor.normalize(sort=True, normtype=1)): every column's 1-norm moved
 * into lambda (a zero column stays zero, its lambda 0), then components
 * ordered by decreasing lambda. No sign fixing: a Poisson model is
 * nonnegative. */
void th_cp_model_arrange_1norm(double *lambda, double *const *factors, const th_index *dims,
                               uint32_t nmodes, uint32_t rank);

/* The factor match score of two models of the same shape and rank (Tensor
 * Toolbox's ktensor/score with the lambda penalty): with every column
 * brought to unit 2-norm (its norm moved into lambda), the congruence of
 * component r of A with component s of B is
 *   (1 - |la_r - lb_s| / max(la_r, lb_s)) * prod_n |A_n(:, r)' B_n(:, s)|
 * (the first factor 1 when both lambdas are 0), and the score is the mean
 * congruence of the best one-to-one matching of A's components to B's:
 * every permutation for rank <= 8, greedy (the largest remaining
 * congruence first) above. In [0, 1]; 1 for the same model up to the
 * order of components and signs. The inputs are not changed. */
double th_cp_model_score(const double *lambda_a, const double *const *factors_a,
                         const double *lambda_b, const double *const *factors_b,
                         const th_index *dims, uint32_t nmodes, uint32_t rank);

#endif
