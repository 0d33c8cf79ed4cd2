#include "share_extract.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

int thg_count_rows(const thg_coo_view *t, uint32_t mode, uint64_t *row_offsets)
{
    if (t == NULL || row_offsets == NULL || mode >= t->nmodes)
        return -1;
    const uint64_t rows = t->dims[mode];
    const uint32_t *idx = t->indices[mode];
    memset(row_offsets, 0, sizeof *row_offsets * (rows + 1u));
    for (uint64_t i = 0; i < t->nnz; ++i) {
        if (idx[i] >= rows)
            return -1;
        ++row_offsets[idx[i] + 1u];
    }
    for (uint64_t r = 0; r < rows; ++r)
        row_offsets[r + 1u] += row_offsets[r];
    return 0;
}

int thg_extract_share(const thg_coo_view *t, uint32_t mode, const uint64_t *row_offsets,
                      const thg_share *share, uint32_t *const *out_indices,
                      double *out_values)
{
    if (t == NULL || row_offsets == NULL || share == NULL || out_values == NULL ||
        mode >= t->nmodes || share->nnz_begin > share->nnz_end ||
        share->nnz_end > row_offsets[t->dims[mode]] || row_offsets[t->dims[mode]] != t->nnz)
        return -1;
    for (uint32_t m = 0; m < t->nmodes; ++m)
        if (out_indices[m] == NULL)
            return -1;
    if (share->nnz_begin == share->nnz_end)
        return 0;
    /* Only the rows the share touches: a cursor per row, each at the row's
     * first position in the stable order. */
    const uint64_t first_row = share->row_begin, rows = share->row_end - share->row_begin;
    uint64_t *cursor = malloc(sizeof *cursor * rows);
    if (cursor == NULL)
        return -1;
    memcpy(cursor, row_offsets + first_row, sizeof *cursor * rows);
    const uint32_t *idx = t->indices[mode];
    for (uint64_t i = 0; i < t->nnz; ++i) {
        const uint64_t row = idx[i];
        if (row < first_row || row >= share->row_end)
            continue;
        const uint64_t position = cursor[row - first_row]++;
        if (position < share->nnz_begin || position >= share->nnz_end)
            continue; /* a split row's nonzero that the neighbour takes */
        const uint64_t k = position - share->nnz_begin;
        for (uint32_t m = 0; m < t->nmodes; ++m)
            out_indices[m][k] = t->indices[m][i];
        out_values[k] = t->values[i];
    }
    free(cursor);
    return 0;
}

/* Jobs 0..n-1 taken in turn by up to `threads` threads; `failed` set when
 * any returns nonzero. */
typedef struct job_queue {
    uint32_t n;
    atomic_uint next;
    atomic_int failed;
    int (*run)(const struct job_queue *queue, uint32_t job);
    const thg_coo_view *tensor;
    const void *jobs;
} job_queue;

static void *work(void *arg)
{
    job_queue *q = arg;
    for (uint32_t job = atomic_fetch_add(&q->next, 1u); job < q->n;
         job = atomic_fetch_add(&q->next, 1u))
        if (q->run(q, job) != 0)
            atomic_store(&q->failed, 1);
    return NULL;
}

static int run_jobs(job_queue *q, uint32_t threads)
{
    enum { kMaxThreads = 64 };
    pthread_t ids[kMaxThreads];
    uint32_t started = 0;
    const uint32_t wanted = threads < q->n ? threads : q->n;
    while (started + 1 < wanted && started < kMaxThreads &&
           pthread_create(&ids[started], NULL, work, q) == 0)
        ++started;
    work(q); /* this thread too: every job runs even if no thread started */
    for (uint32_t i = 0; i < started; ++i)
        pthread_join(ids[i], NULL);
    return atomic_load(&q->failed) ? -1 : 0;
}

static int count_job(const job_queue *q, uint32_t mode)
{
    uint64_t *const *row_offsets = q->jobs;
    return thg_count_rows(q->tensor, mode, row_offsets[mode]);
}

int thg_count_rows_all(const thg_coo_view *t, uint64_t *const *row_offsets, uint32_t threads)
{
    if (t == NULL || row_offsets == NULL)
        return -1;
    job_queue q = {.n = t->nmodes, .run = count_job, .tensor = t, .jobs = row_offsets};
    atomic_init(&q.next, 0u);
    atomic_init(&q.failed, 0);
    return run_jobs(&q, threads);
}

static int extract_job(const job_queue *q, uint32_t job)
{
    const thg_share_job *j = (const thg_share_job *)q->jobs + job;
    return thg_extract_share(q->tensor, j->mode, j->row_offsets, j->share, j->out_indices,
                             j->out_values);
}

int thg_extract_shares(const thg_coo_view *t, const thg_share_job *jobs, uint32_t njobs,
                       uint32_t threads)
{
    if (t == NULL || (jobs == NULL && njobs > 0))
        return -1;
    job_queue q = {.n = njobs, .run = extract_job, .tensor = t, .jobs = jobs};
    atomic_init(&q.next, 0u);
    atomic_init(&q.failed, 0);
    return run_jobs(&q, threads);
}
