/* Times the host's R x R algebra (libtensorhost/cpd/dense.c) on this CPU and prints a
 * markdown table: per rank, one Cholesky inverse of an SPD matrix, one
 * pseudo-inverse of a rank-deficient one (both Hadamard products of Grams
 * of random factors, as CP-ALS forms them) and the Gram of a 10000 x R
 * factor. Each time is the median of up to 3 runs (fewer once a rank's runs
 * of one operation pass 2 s). A residual column checks each result on a
 * random vector, so a fast wrong answer shows.
 *
 * Usage: dense_bench [RANK...]   (default: 64 128 256 512 1024 2048 4096)
 * The BLAS's thread count follows OMP_NUM_THREADS / OPENBLAS_NUM_THREADS. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "cpd/dense.h"
#include "base/rng.h"

enum { GRAM_ROWS = 10000, MAX_RUNS = 3 };
static const double RUN_BUDGET_SECONDS = 2.0;

static void random_factor(th_rng *rng, double *a, uint64_t rows, uint32_t rank)
{
    for (uint64_t k = 0; k < rows * rank; ++k)
        a[k] = th_rng_uniform(rng);
}

/* out = Gram(a_rows x R) o Gram(b_rows x R), from fresh random factors. */
static void hadamard_of_grams(th_rng *rng, uint64_t a_rows, uint64_t b_rows, uint32_t rank,
                              double *out)
{
    const size_t n2 = (size_t)rank * rank;
    double *a = g_new(double, MAX(a_rows, b_rows) * rank);
    double *grams[2] = {g_new(double, n2), g_new(double, n2)};
    random_factor(rng, a, a_rows, rank);
    th_dense_gram(a, a_rows, rank, grams[0]);
    random_factor(rng, a, b_rows, rank);
    th_dense_gram(a, b_rows, rank, grams[1]);
    th_dense_hadamard_except(grams, 2, UINT32_MAX, rank, out);
    g_free(grams[0]);
    g_free(grams[1]);
    g_free(a);
}

static void symv(const double *v, uint32_t n, const double *x, double *y)
{
    for (uint32_t i = 0; i < n; ++i) {
        double acc = 0.0;
        for (uint32_t j = 0; j < n; ++j)
            acc += v[(size_t)i * n + j] * x[j];
        y[i] = acc;
    }
}

static double relative_distance(const double *a, const double *b, uint32_t n)
{
    double diff = 0.0, norm = 0.0;
    for (uint32_t i = 0; i < n; ++i) {
        diff += (a[i] - b[i]) * (a[i] - b[i]);
        norm += b[i] * b[i];
    }
    return sqrt(diff) / sqrt(norm);
}

/* The residual of the (pseudo-)inverse x of v on a random y: for a
 * pseudo-inverse, |v x (v y) - v y| / |v y| (Penrose's v x v = v); for an
 * inverse, the same with v y standing for any vector. */
static double penrose_residual(const double *v, const double *x, uint32_t n, th_rng *rng)
{
    double *y = g_new(double, n), *vy = g_new(double, n), *t = g_new(double, n),
           *u = g_new(double, n);
    for (uint32_t i = 0; i < n; ++i)
        y[i] = th_rng_uniform(rng) - 0.5;
    symv(v, n, y, vy);
    symv(x, n, vy, t);
    symv(v, n, t, u);
    const double residual = relative_distance(u, vy, n);
    g_free(y);
    g_free(vy);
    g_free(t);
    g_free(u);
    return residual;
}

typedef struct timing {
    double runs[MAX_RUNS];
    int count;
} timing;

static void timing_add(timing *t, gint64 start)
{
    t->runs[t->count++] = (double)(g_get_monotonic_time() - start) / 1e6;
}

static gboolean timing_more(const timing *t)
{
    double total = 0.0;
    for (int i = 0; i < t->count; ++i)
        total += t->runs[i];
    return t->count < MAX_RUNS && total < RUN_BUDGET_SECONDS;
}

static int compare_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double timing_median(timing *t)
{
    qsort(t->runs, (size_t)t->count, sizeof(double), compare_double);
    return t->runs[(t->count - 1) / 2];
}

static void format_seconds(double s, char *out, size_t size)
{
    if (s < 1.0)
        snprintf(out, size, "%.2f ms", s * 1e3);
    else
        snprintf(out, size, "%.2f s", s);
}

static int bench_rank(uint32_t rank)
{
    th_rng rng;
    th_rng_seed(&rng, 1000 + rank);
    const size_t n2 = (size_t)rank * rank;
    double *v = g_new(double, n2), *x = g_new(double, n2);

    /* SPD: Gram(full-rank 10000 x R) o Gram(64 x R) is positive definite
     * (Schur: positive definite o positive semi-definite with a positive
     * diagonal). */
    hadamard_of_grams(&rng, GRAM_ROWS, 64, rank, v);
    timing chol = {0};
    int fallback = 0;
    do {
        const gint64 start = g_get_monotonic_time();
        fallback |= th_dense_spd_pinv(v, rank, x);
        timing_add(&chol, start);
    } while (timing_more(&chol));
    const double chol_residual = penrose_residual(v, x, rank, &rng);
    if (fallback) {
        fprintf(stderr, "dense_bench: rank %u: the SPD matrix fell back to the pseudo-inverse\n",
                rank);
        return 1;
    }

    /* Rank-deficient: Gram(2 x R) o Gram(R/4 x R) has rank at most R/2, as
     * a rank beyond what a small tensor supports gives. */
    hadamard_of_grams(&rng, 2, MAX(rank / 4, 1), rank, v);
    timing pinv = {0};
    int fallbacks = 0;
    do {
        const gint64 start = g_get_monotonic_time();
        fallbacks += th_dense_spd_pinv(v, rank, x);
        timing_add(&pinv, start);
    } while (timing_more(&pinv));
    const double pinv_residual = penrose_residual(v, x, rank, &rng);
    if (rank > 2 && fallbacks != pinv.count) {
        fprintf(stderr, "dense_bench: rank %u: the rank-deficient matrix did not fall back\n",
                rank);
        return 1;
    }
    g_free(x);
    g_free(v);

    double *a = g_new(double, (size_t)GRAM_ROWS * rank), *gram = g_new(double, n2);
    random_factor(&rng, a, GRAM_ROWS, rank);
    timing gram_time = {0};
    do {
        const gint64 start = g_get_monotonic_time();
        th_dense_gram(a, GRAM_ROWS, rank, gram);
        timing_add(&gram_time, start);
    } while (timing_more(&gram_time));
    g_free(gram);
    g_free(a);

    char c[32], p[32], g[32];
    format_seconds(timing_median(&chol), c, sizeof c);
    format_seconds(timing_median(&pinv), p, sizeof p);
    format_seconds(timing_median(&gram_time), g, sizeof g);
    printf("| %u | %s | %.1e | %s | %.1e | %s |\n", rank, c, chol_residual, p, pinv_residual, g);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    static const uint32_t default_ranks[] = {64, 128, 256, 512, 1024, 2048, 4096};
    uint32_t ranks[64];
    size_t nranks = 0;
    for (int i = 1; i < argc && nranks < G_N_ELEMENTS(ranks); ++i) {
        char *end = NULL;
        const unsigned long r = strtoul(argv[i], &end, 10);
        if (end == argv[i] || *end != '\0' || r < 1 || r > 4096) {
            fprintf(stderr, "usage: dense_bench [RANK...]   (ranks 1 to 4096)\n");
            return 2;
        }
        ranks[nranks++] = (uint32_t)r;
    }
    if (nranks == 0) {
        memcpy(ranks, default_ranks, sizeof default_ranks);
        nranks = G_N_ELEMENTS(default_ranks);
    }
    printf("| rank R | Cholesky inverse (SPD) | residual | pseudo-inverse (rank <= R/2) | "
           "residual | Gram of %d x R |\n",
           GRAM_ROWS);
    printf("|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < nranks; ++i)
        if (bench_rank(ranks[i]) != 0)
            return 1;
    return 0;
}
