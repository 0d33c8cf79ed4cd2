/* cpu-reference's multiplicative_updates (multiplicative_updates.h).
 *
 * The host's loop forms every nonzero's products of the other factors at
 * every inner iteration, though only the mode's own factor changes between
 * them. Here each row runs its iterations on its own: its products formed
 * once and kept (a few MiB a thread, so they stay in cache), each
 * iteration then one pass over them, eight nonzeros at a time. The
 * loop's stopping test is over every row at once, so the rows run ahead
 * speculatively, a block of iterations at a time, keeping each iteration's
 * Phi; the block is then cut back to the first iteration the test stops
 * at, and each row rebuilt from the block's start and the kept Phis by the
 * same multiplications. */
#include "multiplicative_updates.h"

#include "generalized.h"

#include <tensorhost/plugin_sdk.h>

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* The history's default bound: one block holds all 10 inner iterations of
 * pyttb's default for a mode of up to 370k rows at rank 16; longer modes
 * take more blocks. */
#define CPU_REF_MU_HISTORY_BYTES ((size_t)512 << 20)
/* A thread's cache of one row's products (8k nonzeros at rank 64, 32k at
 * rank 16): rows with more nonzeros form them at every iteration. Read
 * back from L2 or L3, they cost less than forming them again. */
#define CPU_REF_MU_PRODUCTS_BYTES ((size_t)4 << 20)
/* Rows are dealt to threads in runs of about this many nonzeros. */
#define CPU_REF_MU_RUN_NNZ 4096u
/* Runs per batch: the host is asked whether to stop between batches. */
#define CPU_REF_MU_BATCH_RUNS 256u

/* A byte count from the environment variable `name`, else `fallback`. */
static size_t bytes_from_env(const char *name, size_t fallback)
{
    const char *text = getenv(name);
    if (text != NULL && text[0] != '\0') {
        char *end = NULL;
        const unsigned long long bytes = strtoull(text, &end, 10);
        if (end != text && *end == '\0')
            return (size_t)bytes;
    }
    return fallback;
}

/* The first row of each run of rows holding about CPU_REF_MU_RUN_NNZ
 * nonzeros (an empty row joins the run it lies in); runs[count] = rows.
 * runs has rows + 1 entries. */
static uint32_t cut_runs(const mode_layout *l, uint32_t rows, uint32_t *runs)
{
    uint32_t count = 0;
    uint32_t row = 0;
    while (row < rows) {
        runs[count++] = row;
        const uint64_t goal = l->row_start[row] + CPU_REF_MU_RUN_NNZ;
        do
            row++;
        while (row < rows && l->row_start[row + 1] <= goal);
    }
    runs[count] = rows;
    return count;
}

/* Everything a block's rows share. */
typedef struct mu_block {
    const mu_problem *p;
    double epsilon;
    uint32_t iterations;     /* of this block */
    size_t slice;            /* rows * rank */
    double *history;         /* [iterations][rows][rank]: each iteration's Phi */
    double *scratch;         /* [threads][3 rank] */
    double *maxima;          /* [threads][iterations]: each thread's violations */
} mu_block;

/* Row `row`'s iterations of the block on thread t: Phi into the history,
 * the violation into the thread's maxima, and the update applied ahead of
 * the test (rebuilt if the block is cut back). */
static void run_row(const mu_block *b, int t, uint32_t row)
{
    const mu_problem *p = b->p;
    const mode_layout *l = p->layout;
    const uint32_t rank = p->rank;
    const uint64_t begin = l->row_start[row], end = l->row_start[row + 1];
    double *a = p->factor + (size_t)row * rank;
    double *products = p->products + (size_t)t * p->product_doubles;
    double *scratch = b->scratch + (size_t)t * 3 * rank;
    double *maxima = b->maxima + (size_t)t * b->iterations;
    /* Whether a row is cached depends on the row alone (not on the block or
     * the call's iterations), so that neither changes a bit of the result. */
    const bool cached = mu_cache_doubles(end - begin, rank) <= p->product_doubles;
    /* A cached row's products are formed by the first iteration of each
     * block (the cache holds one row) and every Phi of the call is taken
     * from them. */
    for (uint32_t i = 0; i < b->iterations; i++) {
        double *phi = b->history + i * b->slice + (size_t)row * rank;
        const mu_products use = !cached ? MU_PRODUCTS_NONE
                                : i == 0 ? MU_PRODUCTS_FILL
                                         : MU_PRODUCTS_USE;
        multiplicative_row_phi(l, p->other_factors, p->width, rank, begin, end, a, b->epsilon,
                               products, use, p->wide, scratch, phi);
        /* factor_update's TH_FACTOR_MULTIPLICATIVE_UPDATE, on one row. */
        double violation = maxima[i];
        for (uint32_t r = 0; r < rank; r++) {
            const double v = fabs(fmin(a[r], 1.0 - phi[r]));
            violation = v > violation ? v : violation;
        }
        maxima[i] = violation;
        for (uint32_t r = 0; r < rank; r++)
            a[r] *= phi[r];
    }
}

/* Rows of the block after the test stopped at iteration `stop`: the factor
 * after `stop` updates from the block's start, the result that
 * iteration's Phi. */
static void cut_back(const mu_block *b, const double *start, uint32_t stop)
{
    const mu_problem *p = b->p;
    const int64_t cells = (int64_t)b->slice;
#pragma omp parallel num_threads(p->threads)
    {
        const uint32_t saved = cpu_ref_subnormals_off();
#pragma omp for schedule(static)
        for (int64_t k = 0; k < cells; k++) {
            double a = start[k];
            for (uint32_t i = 0; i < stop; i++)
                a *= b->history[i * b->slice + (size_t)k];
            p->factor[k] = a;
            p->result[k] = b->history[stop * b->slice + (size_t)k];
        }
        cpu_ref_subnormals_restore(saved);
    }
}

size_t cpu_ref_mu_product_doubles(void)
{
    return bytes_from_env(CPU_REF_MU_PRODUCTS_ENV, CPU_REF_MU_PRODUCTS_BYTES) / sizeof(double);
}

th_status cpu_ref_multiplicative_updates(const mu_problem *p, th_multiplicative_updates_io *io,
                                         char *err)
{
    const size_t slice = (size_t)p->rows * p->rank;
    const size_t slice_bytes = slice * sizeof(double);
    /* A block of n iterations keeps n Phis and the factor at its start. */
    const size_t fit = bytes_from_env(CPU_REF_MU_HISTORY_ENV, CPU_REF_MU_HISTORY_BYTES) /
                       (slice_bytes > 0 ? slice_bytes : 1);
    uint32_t block = fit > 1 ? (uint32_t)(fit - 1 < io->max_iterations ? fit - 1
                                                                         : io->max_iterations)
                             : 1u;
    const int threads = p->threads;
    double *start = malloc(slice_bytes > 0 ? slice_bytes : 1);
    double *history = malloc(block * slice_bytes + 1);
    double *scratch = malloc((size_t)threads * 3 * p->rank * sizeof(double));
    double *maxima = malloc((size_t)threads * block * sizeof(double));
    uint32_t *runs = malloc(((size_t)p->rows + 1) * sizeof *runs);
    th_status status = TH_OK;
    if (!start || !history || !scratch || !maxima || !runs) {
        status = th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY,
                                "multiplicative_updates(mode %u): no memory for the history of "
                                "%u iterations of %zu bytes each",
                                io->mode, block, slice_bytes);
        goto done;
    }
    const uint32_t run_count = cut_runs(p->layout, p->rows, runs);
    mu_block b = {.p = p,
                  .epsilon = io->epsilon,
                  .slice = slice,
                  .history = history,
                  .scratch = scratch,
                  .maxima = maxima};
    uint32_t iterations = 0, updates = 0;
    double violation = 0.0;
    while (iterations < io->max_iterations) {
        b.iterations = io->max_iterations - iterations < block ? io->max_iterations - iterations
                                                               : block;
        memcpy(start, p->factor, slice_bytes);
        for (size_t k = 0; k < (size_t)threads * b.iterations; k++)
            maxima[k] = 0.0;
        for (uint32_t batch = 0; batch < run_count; batch += CPU_REF_MU_BATCH_RUNS) {
            if ((batch > 0 || iterations > 0) && th_plugin_stop_requested(p->host)) {
                memcpy(p->factor, start, slice_bytes);
                status = th_plugin_fail(err, TH_ERR_CANCELLED,
                                        "multiplicative_updates(mode %u) given up after %u "
                                        "updates: stop requested",
                                        io->mode, updates);
                goto done;
            }
            const int64_t last = batch + CPU_REF_MU_BATCH_RUNS < run_count
                                     ? (int64_t)batch + CPU_REF_MU_BATCH_RUNS
                                     : (int64_t)run_count;
#pragma omp parallel num_threads(threads)
            {
                const int t = omp_get_thread_num();
                const uint32_t saved = cpu_ref_subnormals_off();
#pragma omp for schedule(dynamic, 1)
                for (int64_t run = batch; run < last; run++)
                    for (uint32_t row = runs[run]; row < runs[run + 1]; row++)
                        run_row(&b, t, row);
                cpu_ref_subnormals_restore(saved);
            }
        }
        /* The loop's test, iteration by iteration over every row. */
        uint32_t stop = b.iterations;
        for (uint32_t i = 0; i < b.iterations && stop == b.iterations; i++) {
            double worst = 0.0;
            for (int t = 0; t < threads; t++) {
                const double v = maxima[(size_t)t * b.iterations + i];
                worst = v > worst ? v : worst;
            }
            violation = worst;
            if (worst < io->tolerance)
                stop = i;
        }
        if (stop < b.iterations) {
            cut_back(&b, start, stop);
            iterations += stop + 1;
            updates += stop;
            break;
        }
        iterations += b.iterations;
        updates += b.iterations;
        if (iterations == io->max_iterations)
            memcpy(p->result, history + (size_t)(b.iterations - 1) * slice, slice_bytes);
    }
    io->iterations = iterations;
    io->updates = updates;
    io->violation = violation;
done:
    free(start);
    free(history);
    free(scratch);
    free(maxima);
    free(runs);
    return status;
}
