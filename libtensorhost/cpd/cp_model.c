#include "cpd/cp_model.h"

#include <glib.h>
#include <math.h>
#include <string.h>

/* Rows per chunk of the parallel passes. Fixed, so every sum is taken in
 * the same order (and every result is the same) whatever the thread count. */
#define CHUNK_ROWS 16384u

/* What one read of a factor tells about its columns. */
typedef struct column_stats {
    double *sumsq;      /* [rank] sum of squares */
    double *at_largest; /* [rank] the first entry of largest magnitude (0 if none) */
} column_stats;

static column_stats column_stats_new(uint32_t rank)
{
    return (column_stats){g_new0(double, rank), g_new0(double, rank)};
}

static void column_stats_clear(column_stats *stats)
{
    g_free(stats->sumsq);
    g_free(stats->at_largest);
}

/* One parallel read of `a` (rows x rank). CP-ALS leaves every factor column
 * with entries of magnitude at most 1 (each is divided by its 2-norm or by a
 * max-norm of at least 1), so the plain sum of squares cannot overflow.
 * Chunks are combined in row order, so the first largest entry wins ties,
 * as in a sequential scan. */
static void read_column_stats(const double *a, uint64_t rows, uint32_t rank, column_stats *stats)
{
    const uint64_t nchunks = (rows + CHUNK_ROWS - 1) / CHUNK_ROWS;
    g_autofree double *part = g_new0(double, (size_t)nchunks * rank * 3);
#pragma omp parallel for schedule(static)
    for (uint64_t c = 0; c < nchunks; ++c) {
        double *sumsq = part + (size_t)c * rank * 3, *largest = sumsq + rank,
               *at_largest = largest + rank;
        const uint64_t end = MIN(rows, (c + 1) * CHUNK_ROWS);
        for (uint64_t i = c * CHUNK_ROWS; i < end; ++i) {
            const double *row = a + i * rank;
            for (uint32_t r = 0; r < rank; ++r) {
                sumsq[r] += row[r] * row[r];
                if (fabs(row[r]) > largest[r]) {
                    largest[r] = fabs(row[r]);
                    at_largest[r] = row[r];
                }
            }
        }
    }
    g_autofree double *largest = g_new0(double, rank);
    memset(stats->sumsq, 0, sizeof(double) * rank);
    memset(stats->at_largest, 0, sizeof(double) * rank);
    for (uint64_t c = 0; c < nchunks; ++c) {
        const double *sumsq = part + (size_t)c * rank * 3, *chunk_largest = sumsq + rank,
                     *at_largest = chunk_largest + rank;
        for (uint32_t r = 0; r < rank; ++r) {
            stats->sumsq[r] += sumsq[r];
            if (chunk_largest[r] > largest[r]) {
                largest[r] = chunk_largest[r];
                stats->at_largest[r] = at_largest[r];
            }
        }
    }
}

/* One parallel rewrite of `a`: new column k = old column order[k] times
 * scale[order[k]] (order NULL: the identity). */
static void permute_scale_columns(double *a, uint64_t rows, uint32_t rank,
                                  const uint32_t *order, const double *scale)
{
    const uint64_t nchunks = (rows + CHUNK_ROWS - 1) / CHUNK_ROWS;
#pragma omp parallel
    {
        double *tmp = g_new(double, rank);
#pragma omp for schedule(static)
        for (uint64_t c = 0; c < nchunks; ++c) {
            const uint64_t end = MIN(rows, (c + 1) * CHUNK_ROWS);
            for (uint64_t i = c * CHUNK_ROWS; i < end; ++i) {
                double *row = a + i * rank;
                if (!order) {
                    for (uint32_t r = 0; r < rank; ++r)
                        row[r] *= scale[r];
                    continue;
                }
                for (uint32_t k = 0; k < rank; ++k)
                    tmp[k] = row[order[k]] * scale[order[k]];
                memcpy(row, tmp, sizeof(double) * rank);
            }
        }
        g_free(tmp);
    }
}

/* The normalisation of one mode from its stats: scale[r] = 1 / norm (1 for
 * a zero column) and lambda[r] *= norm; in mode 0 a negative lambda is made
 * positive by a negative scale. */
static void normalizing_scale(const column_stats *stats, uint32_t mode, uint32_t rank,
                              double *lambda, double *scale)
{
    for (uint32_t r = 0; r < rank; ++r) {
        const double norm = sqrt(stats->sumsq[r]);
        scale[r] = norm > 0.0 ? 1.0 / norm : 1.0;
        lambda[r] *= norm;
        if (mode == 0 && lambda[r] < 0.0) {
            lambda[r] = -lambda[r];
            scale[r] = -scale[r];
        }
    }
}

void th_cp_model_normalize(double *lambda, double *const *factors, const th_index *dims,
                           uint32_t nmodes, uint32_t rank)
{
    column_stats stats = column_stats_new(rank);
    g_autofree double *scale = g_new(double, rank);
    for (uint32_t m = 0; m < nmodes; ++m) {
        read_column_stats(factors[m], dims[m], rank, &stats);
        normalizing_scale(&stats, m, rank, lambda, scale);
        permute_scale_columns(factors[m], dims[m], rank, NULL, scale);
    }
    column_stats_clear(&stats);
}

/* fixsigns' decision: negative[r * nmodes + m] says column r of mode m is
 * flipped, given whether its largest entry is negative. With an odd count
 * the last negative mode keeps its sign. */
static void choose_flips(gboolean *negative, uint32_t nmodes, uint32_t rank)
{
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
}

void th_cp_model_fix_signs(double *const *factors, const th_index *dims, uint32_t nmodes,
                           uint32_t rank)
{
    g_autofree gboolean *negative = g_new0(gboolean, (size_t)rank * nmodes);
    column_stats stats = column_stats_new(rank);
    for (uint32_t m = 0; m < nmodes; ++m) {
        read_column_stats(factors[m], dims[m], rank, &stats);
        for (uint32_t r = 0; r < rank; ++r)
            negative[(size_t)r * nmodes + m] = stats.at_largest[r] < 0.0;
    }
    column_stats_clear(&stats);
    choose_flips(negative, nmodes, rank);
    g_autofree double *scale = g_new(double, rank);
    for (uint32_t m = 0; m < nmodes; ++m) {
        gboolean any = FALSE;
        for (uint32_t r = 0; r < rank; ++r) {
            const gboolean flip = negative[(size_t)r * nmodes + m];
            scale[r] = flip ? -1.0 : 1.0;
            any = any || flip;
        }
        if (any)
            permute_scale_columns(factors[m], dims[m], rank, NULL, scale);
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

/* The order of components by decreasing lambda (stable). */
static uint32_t *decreasing_lambda_order(const double *lambda, uint32_t rank)
{
    uint32_t *order = g_new(uint32_t, rank);
    for (uint32_t k = 0; k < rank; ++k)
        order[k] = k;
    component_order context = {lambda};
    /* A stable sort: equal weights keep their order. */
    g_qsort_with_data(order, (gint)rank, sizeof(uint32_t), by_decreasing_lambda, &context);
    return order;
}

static void permute_lambda(double *lambda, const uint32_t *order, uint32_t rank)
{
    g_autofree double *sorted = g_new(double, rank);
    for (uint32_t k = 0; k < rank; ++k)
        sorted[k] = lambda[order[k]];
    memcpy(lambda, sorted, sizeof(double) * rank);
}

void th_cp_model_sort(double *lambda, double *const *factors, const th_index *dims,
                      uint32_t nmodes, uint32_t rank)
{
    g_autofree uint32_t *order = decreasing_lambda_order(lambda, rank);
    permute_lambda(lambda, order, rank);
    g_autofree double *ones = g_new(double, rank);
    for (uint32_t r = 0; r < rank; ++r)
        ones[r] = 1.0;
    for (uint32_t m = 0; m < nmodes; ++m)
        permute_scale_columns(factors[m], dims[m], rank, order, ones);
}

/* normalize, fix_signs and sort decided from one read of each factor and
 * applied in one rewrite of it: on tall factors (tens of millions of rows)
 * each pass over the factors costs seconds. Normalising scales a column by
 * a positive number (or, in mode 0, a negative one, whose sign the largest
 * entry's sign follows), so the largest entries, and fixsigns' choice, can
 * be read before it. */
void th_cp_model_arrange(double *lambda, double *const *factors, const th_index *dims,
                         uint32_t nmodes, uint32_t rank)
{
    g_autofree double *scales = g_new(double, (size_t)nmodes * rank);
    g_autofree gboolean *negative = g_new0(gboolean, (size_t)rank * nmodes);
    column_stats stats = column_stats_new(rank);
    for (uint32_t m = 0; m < nmodes; ++m) {
        double *scale = scales + (size_t)m * rank;
        read_column_stats(factors[m], dims[m], rank, &stats);
        normalizing_scale(&stats, m, rank, lambda, scale);
        for (uint32_t r = 0; r < rank; ++r)
            negative[(size_t)r * nmodes + m] = stats.at_largest[r] * scale[r] < 0.0;
    }
    column_stats_clear(&stats);
    choose_flips(negative, nmodes, rank);
    for (uint32_t m = 0; m < nmodes; ++m)
        for (uint32_t r = 0; r < rank; ++r)
            if (negative[(size_t)r * nmodes + m])
                scales[(size_t)m * rank + r] = -scales[(size_t)m * rank + r];
    g_autofree uint32_t *order = decreasing_lambda_order(lambda, rank);
    permute_lambda(lambda, order, rank);
    for (uint32_t m = 0; m < nmodes; ++m)
        permute_scale_columns(factors[m], dims[m], rank, order, scales + (size_t)m * rank);
}

void th_cp_model_arrange_1norm(double *lambda, double *const *factors, const th_index *dims,
                               uint32_t nmodes, uint32_t rank)
{
    g_autofree double *scale = g_new(double, rank);
    g_autofree double *norm = g_new(double, rank);
    for (uint32_t m = 0; m < nmodes; ++m) {
        /* Nonnegative factors of magnitude at most 1 (CP-APR leaves unit
         * 1-norm columns): a plain sequential sum is exact enough and
         * independent of the thread count. */
        memset(norm, 0, sizeof(double) * rank);
        for (uint64_t i = 0; i < dims[m]; ++i) {
            const double *row = factors[m] + i * rank;
            for (uint32_t r = 0; r < rank; ++r)
                norm[r] += fabs(row[r]);
        }
        for (uint32_t r = 0; r < rank; ++r) {
            scale[r] = norm[r] > 0.0 ? 1.0 / norm[r] : 1.0;
            lambda[r] *= norm[r];
        }
        permute_scale_columns(factors[m], dims[m], rank, NULL, scale);
    }
    g_autofree uint32_t *order = decreasing_lambda_order(lambda, rank);
    permute_lambda(lambda, order, rank);
    for (uint32_t r = 0; r < rank; ++r)
        scale[r] = 1.0;
    for (uint32_t m = 0; m < nmodes; ++m)
        permute_scale_columns(factors[m], dims[m], rank, order, scale);
}

/* Column 2-norms of a (rows x rank). */
static void column_norms(const double *a, uint64_t rows, uint32_t rank, double *norm)
{
    memset(norm, 0, sizeof(double) * rank);
    for (uint64_t i = 0; i < rows; ++i)
        for (uint32_t r = 0; r < rank; ++r)
            norm[r] += a[i * rank + r] * a[i * rank + r];
    for (uint32_t r = 0; r < rank; ++r)
        norm[r] = sqrt(norm[r]);
}

/* The best sum of congruence[r * rank + perm[r]] over permutations, by
 * recursion over the components of A still to match. */
static double best_matching(const double *congruence, uint32_t rank, uint32_t r, gboolean *used)
{
    if (r == rank)
        return 0.0;
    double best = -1.0;
    for (uint32_t s = 0; s < rank; ++s) {
        if (used[s])
            continue;
        used[s] = TRUE;
        const double total = congruence[(size_t)r * rank + s] +
                             best_matching(congruence, rank, r + 1, used);
        used[s] = FALSE;
        best = MAX(best, total);
    }
    return best;
}

static double greedy_matching(const double *congruence, uint32_t rank)
{
    g_autofree gboolean *used_a = g_new0(gboolean, rank);
    g_autofree gboolean *used_b = g_new0(gboolean, rank);
    double total = 0.0;
    for (uint32_t k = 0; k < rank; ++k) {
        double best = -1.0;
        uint32_t best_r = 0, best_s = 0;
        for (uint32_t r = 0; r < rank; ++r)
            for (uint32_t s = 0; s < rank; ++s)
                if (!used_a[r] && !used_b[s] && congruence[(size_t)r * rank + s] > best) {
                    best = congruence[(size_t)r * rank + s];
                    best_r = r;
                    best_s = s;
                }
        used_a[best_r] = used_b[best_s] = TRUE;
        total += best;
    }
    return total;
}

double th_cp_model_score(const double *lambda_a, const double *const *factors_a,
                         const double *lambda_b, const double *const *factors_b,
                         const th_index *dims, uint32_t nmodes, uint32_t rank)
{
    if (rank == 0)
        return 1.0;
    g_autofree double *la = g_memdup2(lambda_a, sizeof(double) * rank);
    g_autofree double *lb = g_memdup2(lambda_b, sizeof(double) * rank);
    g_autofree double *congruence = g_new(double, (size_t)rank * rank);
    for (size_t k = 0; k < (size_t)rank * rank; ++k)
        congruence[k] = 1.0;
    g_autofree double *na = g_new(double, rank);
    g_autofree double *nb = g_new(double, rank);
    for (uint32_t m = 0; m < nmodes; ++m) {
        column_norms(factors_a[m], dims[m], rank, na);
        column_norms(factors_b[m], dims[m], rank, nb);
        for (uint32_t r = 0; r < rank; ++r) {
            la[r] *= na[r];
            lb[r] *= nb[r];
        }
        for (uint32_t r = 0; r < rank; ++r)
            for (uint32_t s = 0; s < rank; ++s) {
                double dot = 0.0;
                for (uint64_t i = 0; i < dims[m]; ++i)
                    dot += factors_a[m][i * rank + r] * factors_b[m][i * rank + s];
                const double denominator = na[r] * nb[s];
                congruence[(size_t)r * rank + s] *=
                    denominator > 0.0 ? fabs(dot) / denominator : 0.0;
            }
    }
    for (uint32_t r = 0; r < rank; ++r)
        for (uint32_t s = 0; s < rank; ++s) {
            const double a = fabs(la[r]), b = fabs(lb[s]), top = MAX(a, b);
            congruence[(size_t)r * rank + s] *= top > 0.0 ? 1.0 - fabs(a - b) / top : 1.0;
        }
    double total;
    if (rank <= 8) {
        g_autofree gboolean *used = g_new0(gboolean, rank);
        total = best_matching(congruence, rank, 0, used);
    } else {
        total = greedy_matching(congruence, rank);
    }
    return total / rank;
}
