/* The values a CP model [[lambda; A_1, ..., A_N]] gives to chosen entries:
 * what a completed tensor is asked for (the entries its data did not
 * list), and how a model is checked against entries held out of its fit. */
#ifndef TH_CP_PREDICT_H
#define TH_CP_PREDICT_H

#include <stdint.h>

#include "tensor/sptensor.h"

/* out[k] = sum_r lambda[r] * prod_m factors[m][indices[m][k] * rank + r]
 * for k < count. factors[m] is dims[m] x rank, row-major; indices are laid
 * out as a th_sptensor's (indices[m]: mode m's 0-based coordinate of every
 * entry), each below its factor's row count, which is not checked here: the
 * caller knows the dims (a read bounded by them, tensor_read_types.h). Parallel over
 * the entries with OpenMP; each entry's products and sum are taken in one
 * fixed order (modes, then components, in increasing order) by one
 * thread, so the result does not depend on the thread count. */
void th_cp_predict(const double *lambda, const double *const *factors, uint32_t nmodes,
                   uint32_t rank, th_index *const *indices, uint64_t count, double *out);

#endif
