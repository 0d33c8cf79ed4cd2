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

#endif
