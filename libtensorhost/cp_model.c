#include "cp_model.h"

#include <glib.h>
#include <math.h>
#include <string.h>

/* CP-ALS leaves every factor column with entries of magnitude at most 1
 * (each is divided by its 2-norm or by a max-norm of at least 1), so the
 * plain sum of squares cannot overflow. */
static void column_norms(const double *a, uint64_t rows, uint32_t rank, double *norms)
{
    memset(norms, 0, sizeof(double) * rank);
    for (uint64_t i = 0; i < rows; ++i) {
        const double *row = a + i * rank;
        for (uint32_t r = 0; r < rank; ++r)
            norms[r] += row[r] * row[r];
    }
    for (uint32_t r = 0; r < rank; ++r)
        norms[r] = sqrt(norms[r]);
}

/* a(:, r) *= scale[r] for every column. */
static void scale_columns(double *a, uint64_t rows, uint32_t rank, const double *scale)
{
    for (uint64_t i = 0; i < rows; ++i) {
        double *row = a + i * rank;
        for (uint32_t r = 0; r < rank; ++r)
            row[r] *= scale[r];
    }
}

void th_cp_model_normalize(double *lambda, double *const *factors, const th_index *dims,
                           uint32_t nmodes, uint32_t rank)
{
    g_autofree double *norms = g_new(double, rank);
    g_autofree double *scale = g_new(double, rank);
    for (uint32_t m = 0; m < nmodes; ++m) {
        column_norms(factors[m], dims[m], rank, norms);
        for (uint32_t r = 0; r < rank; ++r) {
            scale[r] = norms[r] > 0.0 ? 1.0 / norms[r] : 1.0;
            lambda[r] *= norms[r];
        }
        if (m == 0)
            for (uint32_t r = 0; r < rank; ++r)
                if (lambda[r] < 0.0) {
                    lambda[r] = -lambda[r];
                    scale[r] = -scale[r];
                }
        scale_columns(factors[m], dims[m], rank, scale);
    }
}

void th_cp_model_fix_signs(double *const *factors, const th_index *dims, uint32_t nmodes,
                           uint32_t rank)
{
    /* negative[r * nmodes + m]: column r of mode m has its largest entry < 0;
     * then, the columns to flip. */
    g_autofree gboolean *negative = g_new0(gboolean, (size_t)rank * nmodes);
    g_autofree double *largest = g_new(double, rank);
    g_autofree double *at_largest = g_new(double, rank);
    for (uint32_t m = 0; m < nmodes; ++m) {
        for (uint32_t r = 0; r < rank; ++r)
            largest[r] = at_largest[r] = 0.0;
        for (uint64_t i = 0; i < dims[m]; ++i) {
            const double *row = factors[m] + i * rank;
            for (uint32_t r = 0; r < rank; ++r)
                if (fabs(row[r]) > largest[r]) {
                    largest[r] = fabs(row[r]);
                    at_largest[r] = row[r];
                }
        }
        for (uint32_t r = 0; r < rank; ++r)
            negative[(size_t)r * nmodes + m] = at_largest[r] < 0.0;
    }
    /* With an odd count the last negative mode keeps its sign. */
    for (uint32_t r = 0; r < rank; ++r) {
        gboolean *neg = negative + (size_t)r * nmodes;
        uint32_t count = 0, last = 0;
        for (uint32_t m = 0; m < nmodes; ++m)
            if (neg[m]) {
                ++count;
                last = m;
            }
        if (count % 2 == 1)
            neg[last] = FALSE;
    }
    g_autofree double *scale = g_new(double, rank);
    for (uint32_t m = 0; m < nmodes; ++m) {
        gboolean any = FALSE;
        for (uint32_t r = 0; r < rank; ++r) {
            const gboolean flip = negative[(size_t)r * nmodes + m];
            scale[r] = flip ? -1.0 : 1.0;
            any = any || flip;
        }
        if (any)
            scale_columns(factors[m], dims[m], rank, scale);
    }
}

typedef struct component_order {
    const double *lambda;
} component_order;

static gint by_decreasing_lambda(gconstpointer a, gconstpointer b, gpointer user_data)
{
    const double *lambda = ((const component_order *)user_data)->lambda;
    const double x = lambda[*(const uint32_t *)a], y = lambda[*(const uint32_t *)b];
    return (x < y) - (x > y);
}

void th_cp_model_sort(double *lambda, double *const *factors, const th_index *dims,
                      uint32_t nmodes, uint32_t rank)
{
    g_autofree uint32_t *order = g_new(uint32_t, rank);
    for (uint32_t k = 0; k < rank; ++k)
        order[k] = k;
    component_order context = {lambda};
    /* A stable sort: equal weights keep their order. */
    g_qsort_with_data(order, (gint)rank, sizeof(uint32_t), by_decreasing_lambda, &context);
    g_autofree double *row = g_new(double, rank);
    for (uint32_t k = 0; k < rank; ++k)
        row[k] = lambda[order[k]];
    memcpy(lambda, row, sizeof(double) * rank);
    for (uint32_t m = 0; m < nmodes; ++m)
        for (uint64_t i = 0; i < dims[m]; ++i) {
            double *a = factors[m] + i * rank;
            for (uint32_t k = 0; k < rank; ++k)
                row[k] = a[order[k]];
            memcpy(a, row, sizeof(double) * rank);
        }
}

void th_cp_model_arrange(double *lambda, double *const *factors, const th_index *dims,
                         uint32_t nmodes, uint32_t rank)
{
    th_cp_model_normalize(lambda, factors, dims, nmodes, rank);
    th_cp_model_fix_signs(factors, dims, nmodes, rank);
    th_cp_model_sort(lambda, factors, dims, nmodes, rank);
}
