#include "cpd/cp_predict.h"

#include <glib.h>
#include <string.h>

/* Below this many multiplications a team of threads costs more than it
 * saves. */
#define PARALLEL_WORK 65536u

/* One entry's value: the component products built up mode by mode in
 * `products` (rank doubles of scratch), then summed in component order. */
static double predict_entry(const double *lambda, const double *const *factors,
                            uint32_t nmodes, uint32_t rank, th_index *const *indices,
                            uint64_t k, double *products)
{
    memcpy(products, lambda, sizeof(double) * rank);
    for (uint32_t m = 0; m < nmodes; ++m) {
        const double *row = factors[m] + (uint64_t)indices[m][k] * rank;
        for (uint32_t r = 0; r < rank; ++r)
            products[r] *= row[r];
    }
    double sum = 0.0;
    for (uint32_t r = 0; r < rank; ++r)
        sum += products[r];
    return sum;
}

void th_cp_predict(const double *lambda, const double *const *factors, uint32_t nmodes,
                   uint32_t rank, th_index *const *indices, uint64_t count, double *out)
{
    const gboolean parallel = count * ((uint64_t)nmodes + 1u) * rank >= PARALLEL_WORK;
#pragma omp parallel if (parallel)
    {
        double *products = g_new(double, MAX(rank, 1u));
#pragma omp for schedule(static)
        for (int64_t k = 0; k < (int64_t)count; ++k)
            out[k] = predict_entry(lambda, factors, nmodes, rank, indices, (uint64_t)k,
                                   products);
        g_free(products);
    }
}
