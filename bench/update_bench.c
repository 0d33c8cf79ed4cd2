/* One CP-ALS factor update of every mode, on the two paths of a run, in one
 * process and alternately so that a shared machine's load hits both alike:
 * the plugin's als_update (cpd.update = "mode") and the host's update
 * (cpd.update = "host": the MTTKRP result copied out, dgemm, normalisation,
 * dsyrk, inner products, the factor copied back; as als_step.c does it).
 * Per rank, prints the least over the rounds of each path's seconds for the
 * whole sweep of updates (one iteration's worth) and their ratio.
 *
 * Usage: update_bench PLUGIN TENSOR ROUNDS RANK...
 *        update_bench --completion PLUGIN TENSOR ROUNDS RANK...
 *   PLUGIN: a plugin name (cpu-reference) or a path to its .so.
 * The BLAS's and the plugin's threads follow OMP_NUM_THREADS.
 *
 * --completion: tensor completion's iteration against CP-ALS's on the same
 * loaded tensor and rank, alternately in one process (gpu_bench's
 * --completion for a CPU plugin, no GPU needed). Per round, each from the
 * same initial factors (init_factors, seed 42; untimed): one completion
 * iteration, row_least_squares of every mode in turn (ridge 1e-3, nonneg
 * 0), and one CP-ALS iteration on the path a run takes (als_sweep, else
 * mttkrp + the host's solve + als_update per mode; th_als_step, max-norm).
 * After one warm-up round, prints the least over the rounds of each mode's
 * row solve, of the completion iteration and of the CP-ALS iteration, their
 * ratio, and the completion iteration's training error (residual_squared
 * of the last mode: the same from every round, so that two builds can be
 * compared). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "plugin/backend.h"
#include "cpd/als_step.h"
#include "cpd/dense.h"
#include "base/rng.h"
#include "tensor/sptensor.h"
#include "tensor/tensor_reader.h"

static double seconds_since(gint64 start) { return (double)(g_get_monotonic_time() - start) / 1e6; }

/* The host's update of `mode` with `w`, as als_step.c's host_update. */
static gboolean host_update(th_backend *b, uint32_t mode, const double *w, double *m, double *a,
                            double *lambda, double *gram, double *inner, GError **error)
{
    const uint64_t rows = b->dims[mode];
    if (!th_backend_get_mttkrp_result(b, mode, m, error))
        return FALSE;
    th_dense_matmul(m, w, rows, b->rank, b->rank, a);
    th_dense_normalize_columns(a, rows, b->rank, 1, lambda);
    th_dense_gram(a, rows, b->rank, gram);
    th_dense_column_inner(m, a, rows, b->rank, inner);
    return th_backend_set_factor(b, mode, a, error);
}

/* Least seconds over `rounds` of one update of every mode, per path. */
static gboolean time_rank(th_backend *b, const th_sptensor *t, uint32_t rank, int rounds,
                          double best[2], GError **error)
{
    if (!th_backend_load_tensor(b, t, rank, error))
        return FALSE;
    const size_t n2 = (size_t)rank * rank;
    g_autofree double *grams = g_new(double, n2 * t->nmodes);
    g_autofree double **gram_of = g_new(double *, t->nmodes);
    for (uint32_t m = 0; m < t->nmodes; ++m)
        gram_of[m] = grams + m * n2;
    if (!th_backend_init_factors(b, 42, gram_of, error))
        return FALSE;
    th_index largest = 0;
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        largest = MAX(largest, t->dims[m]);
        if (!th_backend_mttkrp(b, m, error))
            return FALSE;
    }
    /* Any w will do for timing; small entries keep the factors finite. */
    g_autofree double *w = g_new(double, n2);
    th_rng rng;
    th_rng_seed(&rng, 7);
    for (size_t k = 0; k < n2; ++k)
        w[k] = th_rng_uniform(&rng) / rank;
    g_autofree double *m_rows = g_new(double, (size_t)largest * rank);
    g_autofree double *a_rows = g_new(double, (size_t)largest * rank);
    g_autofree double *lambda = g_new(double, rank);
    g_autofree double *inner = g_new(double, rank);
    g_autofree double *gram = g_new(double, n2);
    best[0] = best[1] = G_MAXDOUBLE;
    for (int round = 0; round < rounds; ++round) {
        for (int path = 0; path < 2; ++path) {
            const gint64 start = g_get_monotonic_time();
            for (uint32_t m = 0; m < t->nmodes; ++m) {
                const gboolean ok =
                    path == 0 ? th_backend_als_update(b, m, w, TH_NORM_MAX, lambda, gram, inner,
                                                      error)
                              : host_update(b, m, w, m_rows, a_rows, lambda, gram, inner, error);
                if (!ok)
                    return FALSE;
            }
            best[path] = MIN(best[path], seconds_since(start));
        }
    }
    return TRUE;
}

/* --completion at one rank: the least over `rounds` (after a warm-up) of
 * each mode's row solve (mode_best, [nmodes]), of the completion iteration
 * (best[0]) and of the CP-ALS iteration (best[1]); *training gets the
 * completion iteration's residual_squared. */
static gboolean time_completion(th_backend *b, const th_sptensor *t, uint32_t rank, int rounds,
                                double *mode_best, double best[2], double *training,
                                GError **error)
{
    if (!th_backend_load_tensor(b, t, rank, error))
        return FALSE;
    g_autoptr(th_als_state) als = th_als_state_new(
        b, th_backend_has_als_sweep(b) ? TH_UPDATE_SWEEP : TH_UPDATE_MODE);
    for (uint32_t m = 0; m < t->nmodes; ++m)
        mode_best[m] = G_MAXDOUBLE;
    best[0] = best[1] = G_MAXDOUBLE;
    for (int round = -1; round < rounds; ++round) {
        if (!th_als_state_init_factors(als, 42, error))
            return FALSE;
        double iteration = 0.0;
        for (uint32_t m = 0; m < t->nmodes; ++m) {
            th_row_least_squares_io io;
            const gint64 start = g_get_monotonic_time();
            if (!th_backend_row_least_squares(b, m, 1e-3, FALSE, 1, &io, error))
                return FALSE;
            const double seconds = seconds_since(start);
            iteration += seconds;
            *training = io.residual_squared;
            if (round >= 0)
                mode_best[m] = MIN(mode_best[m], seconds);
        }
        if (!th_als_state_init_factors(als, 42, error))
            return FALSE;
        const gint64 start = g_get_monotonic_time();
        if (!th_als_step(als, 2, TH_NORM_MAX, NULL, error))
            return FALSE;
        const double cp_als = seconds_since(start);
        if (round >= 0) {
            best[0] = MIN(best[0], iteration);
            best[1] = MIN(best[1], cp_als);
        }
    }
    return TRUE;
}

static int run_completion(int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(th_sptensor) t = th_tensor_read_file(argv[1], NULL, &error);
    g_autoptr(th_backend) b = t ? th_backend_open(argv[0], NULL, NULL, NULL, &error) : NULL;
    if (!b || !th_backend_has_row_least_squares(b)) {
        fprintf(stderr, "update_bench: %s\n",
                b ? "the plugin has no row_least_squares (ABI 1.5)" : error->message);
        return 1;
    }
    const int rounds = MAX(atoi(argv[2]), 1);
    printf("| rank | row solve per mode (s) | completion iteration (s) | CP-ALS iteration (s) | "
           "completion / CP-ALS | training error |\n|---:|---:|---:|---:|---:|---:|\n");
    g_autofree double *mode_best = g_new(double, t->nmodes);
    for (int k = 3; k < argc; ++k) {
        const uint32_t rank = (uint32_t)atoi(argv[k]);
        double best[2], training = 0.0;
        if (!time_completion(b, t, rank, rounds, mode_best, best, &training, &error)) {
            fprintf(stderr, "update_bench: rank %u: %s\n", rank, error->message);
            return 1;
        }
        printf("| %u | ", rank);
        for (uint32_t m = 0; m < t->nmodes; ++m)
            printf("%s%.4f", m ? " / " : "", mode_best[m]);
        printf(" | %.4f | %.4f | %.2f | %.17g |\n", best[0], best[1], best[0] / best[1],
               training);
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const gboolean completion = argc > 1 && strcmp(argv[1], "--completion") == 0;
    if (argc < (completion ? 6 : 5)) {
        fprintf(stderr, "usage: update_bench [--completion] PLUGIN TENSOR ROUNDS RANK...\n");
        return 2;
    }
    if (completion)
        return run_completion(argc - 2, argv + 2);
    g_autoptr(GError) error = NULL;
    g_autoptr(th_sptensor) t = th_tensor_read_file(argv[2], NULL, &error);
    g_autoptr(th_backend) b = t ? th_backend_open(argv[1], NULL, NULL, NULL, &error) : NULL;
    if (!b) {
        fprintf(stderr, "update_bench: %s\n", error->message);
        return 1;
    }
    const int rounds = atoi(argv[3]);
    printf("| rank | als_update (s) | host update (s) | als_update / host |\n|---:|---:|---:|---:|\n");
    for (int k = 4; k < argc; ++k) {
        const uint32_t rank = (uint32_t)atoi(argv[k]);
        double best[2];
        if (!time_rank(b, t, rank, MAX(rounds, 1), best, &error)) {
            fprintf(stderr, "update_bench: rank %u: %s\n", rank, error->message);
            return 1;
        }
        printf("| %u | %.4f | %.4f | %.2f |\n", rank, best[0], best[1], best[0] / best[1]);
        fflush(stdout);
    }
    return 0;
}
