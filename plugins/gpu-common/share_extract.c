#include "share_extract.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* counts[r - first_row] += 1 for each of the nonzeros [begin, end) whose
 * row (idx) is in [first_row, row_end); returns how many were. */
static uint64_t count_rows_in(const uint32_t *idx, uint64_t begin, uint64_t end,
                              uint64_t first_row, uint64_t row_end, uint64_t *counts)
{
    uint64_t counted = 0;
    for (uint64_t i = begin; i < end; ++i)
        if (idx[i] >= first_row && idx[i] < row_end) {
            ++counts[idx[i] - first_row];
            ++counted;
        }
    return counted;
}

int thg_count_rows(const thg_coo_view *t, uint32_t mode, uint64_t *row_offsets)
{
    if (t == NULL || row_offsets == NULL || mode >= t->nmodes)
        return -1;
    const uint64_t rows = t->dims[mode];
    memset(row_offsets, 0, sizeof *row_offsets * (rows + 1u));
    /* An index outside the mode is not counted. */
    if (count_rows_in(t->indices[mode], 0, t->nnz, 0, rows, row_offsets + 1) != t->nnz)
        return -1;
    for (uint64_t r = 0; r < rows; ++r)
        row_offsets[r + 1u] += row_offsets[r];
    return 0;
}

/* Whether thg_extract_share's arguments fit together. */
static int share_args_ok(const thg_coo_view *t, uint32_t mode, const uint64_t *row_offsets,
                         const thg_share *share, uint32_t *const *out_indices,
                         const double *out_values)
{
    if (t == NULL || row_offsets == NULL || share == NULL || out_indices == NULL ||
        out_values == NULL || mode >= t->nmodes || share->nnz_begin > share->nnz_end ||
        share->row_begin > share->row_end || share->row_end > t->dims[mode] ||
        share->nnz_end > row_offsets[t->dims[mode]] || row_offsets[t->dims[mode]] != t->nnz)
        return 0;
    for (uint32_t m = 0; m < t->nmodes; ++m)
        if (out_indices[m] == NULL)
            return 0;
    return 1;
}

/* The nonzeros [begin, end) of the tensor that fall in `share`, each to
 * its place: cursor[r - share->row_begin] is the next position of row r in
 * the mode's stable order, advanced as the row is met. */
static void place_nonzeros(const thg_coo_view *t, uint32_t mode, const thg_share *share,
                           uint64_t *cursor, uint64_t begin, uint64_t end,
                           uint32_t *const *out_indices, double *out_values)
{
    const uint64_t first_row = share->row_begin;
    const uint32_t *idx = t->indices[mode];
    for (uint64_t i = begin; i < end; ++i) {
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
}

int thg_extract_share(const thg_coo_view *t, uint32_t mode, const uint64_t *row_offsets,
                      const thg_share *share, uint32_t *const *out_indices,
                      double *out_values)
{
    if (!share_args_ok(t, mode, row_offsets, share, out_indices, out_values))
        return -1;
    if (share->nnz_begin == share->nnz_end)
        return 0;
    /* Only the rows the share touches: a cursor per row, each at the row's
     * first position in the stable order. */
    const uint64_t rows = share->row_end - share->row_begin;
    uint64_t *cursor = malloc(sizeof *cursor * rows);
    if (cursor == NULL)
        return -1;
    memcpy(cursor, row_offsets + share->row_begin, sizeof *cursor * rows);
    place_nonzeros(t, mode, share, cursor, 0, t->nnz, out_indices, out_values);
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

/* run(queue, job) for every job < n; 0, or -1 when any returned nonzero.
 * This thread works too: every job runs even if no thread starts. */
static int run_jobs(uint32_t n, int (*run)(const job_queue *, uint32_t),
                    const thg_coo_view *tensor, const void *jobs, uint32_t threads)
{
    enum { kMaxThreads = 64 };
    job_queue q = {.n = n, .run = run, .tensor = tensor, .jobs = jobs};
    atomic_init(&q.next, 0u);
    atomic_init(&q.failed, 0);
    pthread_t ids[kMaxThreads];
    uint32_t started = 0;
    const uint32_t wanted = threads < n ? threads : n;
    while (started + 1 < wanted && started < kMaxThreads &&
           pthread_create(&ids[started], NULL, work, &q) == 0)
        ++started;
    work(&q);
    for (uint32_t i = 0; i < started; ++i)
        pthread_join(ids[i], NULL);
    return atomic_load(&q.failed) ? -1 : 0;
}

/* A pass cut into chunks of the nonzeros takes at most MAX_CHUNKS, and
 * their counters (8 bytes a row and chunk) stay under CHUNK_CURSOR_BYTES:
 * a pass over millions of rows takes fewer chunks. */
#define MAX_CHUNKS 64u
#define CHUNK_CURSOR_BYTES ((uint64_t)512 << 20)

/* Chunks for a pass of `threads` threads counting into `rows` rows (at
 * least 1, at most one a nonzero). */
static uint64_t chunks_for(uint32_t threads, uint64_t rows, uint64_t nnz)
{
    uint64_t chunks = threads > MAX_CHUNKS ? MAX_CHUNKS : threads;
    if (rows > 0 && chunks * rows * sizeof(uint64_t) > CHUNK_CURSOR_BYTES)
        chunks = CHUNK_CURSOR_BYTES / (rows * sizeof(uint64_t));
    if (chunks > nnz)
        chunks = nnz;
    return chunks < 1 ? 1 : chunks;
}

/* Every mode's row counts with each mode's pass cut into chunks: chunk k
 * of mode m counts into counts[m][k], then a job a mode adds the chunks'
 * counts (exact integers, so in any order) into the prefix sums. */
typedef struct row_counts {
    uint64_t *const *row_offsets;
    uint32_t *chunks; /* [nmodes] */
    /* [nmodes + 1]: mode m's chunks are jobs [first_job[m], first_job[m + 1]). */
    uint32_t *first_job;
    uint64_t **counts; /* [nmodes][chunks[m]][dims[m]] */
} row_counts;

static int count_chunk_job(const job_queue *q, uint32_t job)
{
    const row_counts *c = q->jobs;
    const thg_coo_view *t = q->tensor;
    uint32_t mode = 0;
    while (job >= c->first_job[mode + 1])
        ++mode;
    const uint32_t chunk = job - c->first_job[mode];
    const uint64_t rows = t->dims[mode];
    const uint64_t begin = t->nnz * chunk / c->chunks[mode];
    const uint64_t end = t->nnz * (chunk + 1u) / c->chunks[mode];
    uint64_t *counts = c->counts[mode] + (size_t)chunk * rows;
    /* An index outside the mode is not counted. */
    return count_rows_in(t->indices[mode], begin, end, 0, rows, counts) == end - begin ? 0 : -1;
}

static int sum_counts_job(const job_queue *q, uint32_t mode)
{
    const row_counts *c = q->jobs;
    const uint64_t rows = q->tensor->dims[mode];
    uint64_t *offsets = c->row_offsets[mode];
    offsets[0] = 0;
    for (uint64_t r = 0; r < rows; ++r) {
        uint64_t n = 0;
        for (uint32_t k = 0; k < c->chunks[mode]; ++k)
            n += c->counts[mode][(size_t)k * rows + r];
        offsets[r + 1u] = offsets[r] + n;
    }
    return 0;
}

int thg_count_rows_all(const thg_coo_view *t, uint64_t *const *row_offsets, uint32_t threads)
{
    if (t == NULL || row_offsets == NULL)
        return -1;
    const uint32_t N = t->nmodes;
    row_counts c = {.row_offsets = row_offsets,
                    .chunks = calloc(N, sizeof *c.chunks),
                    .first_job = calloc(N + 1u, sizeof *c.first_job),
                    .counts = calloc(N, sizeof *c.counts)};
    int status = c.chunks && c.first_job && c.counts ? 0 : -1;
    /* A pass a mode while the threads are no more than the modes. */
    const uint32_t threads_each = threads > N ? threads / N : 1u;
    for (uint32_t m = 0; m < N && status == 0; ++m) {
        c.chunks[m] = (uint32_t)chunks_for(threads_each, t->dims[m], t->nnz);
        c.first_job[m + 1] = c.first_job[m] + c.chunks[m];
        c.counts[m] = calloc((size_t)c.chunks[m] * t->dims[m], sizeof(uint64_t));
        if (c.counts[m] == NULL)
            status = -1;
    }
    if (status == 0)
        status = run_jobs(c.first_job[N], count_chunk_job, t, &c, threads);
    if (status == 0)
        status = run_jobs(N, sum_counts_job, t, &c, threads);
    for (uint32_t m = 0; c.counts && m < N; ++m)
        free(c.counts[m]);
    free(c.counts);
    free(c.first_job);
    free(c.chunks);
    return status;
}

/* One share's pass cut into chunks of the nonzeros, one a thread, in two
 * rounds: each chunk counts its nonzeros per row of the share; the counts
 * become each chunk's first position in every row (chunks in order, so the
 * order stays the stable one); each chunk writes its nonzeros there. */

typedef struct chunked_share {
    uint32_t mode;
    const thg_share *share;
    uint32_t *const *out_indices;
    double *out_values;
    uint32_t chunks;
    uint64_t rows;    /* the share's rows */
    uint64_t *cursor; /* [chunks][rows]: counts, then positions */
    int placing;      /* 0: count the rows' nonzeros; 1: place them */
} chunked_share;

static int chunk_job(const job_queue *q, uint32_t chunk)
{
    const chunked_share *c = q->jobs;
    const thg_coo_view *t = q->tensor;
    const uint64_t begin = t->nnz * chunk / c->chunks;
    const uint64_t end = t->nnz * (chunk + 1u) / c->chunks;
    uint64_t *cursor = c->cursor + (size_t)chunk * c->rows;
    if (c->placing) {
        place_nonzeros(t, c->mode, c->share, cursor, begin, end, c->out_indices, c->out_values);
        return 0;
    }
    count_rows_in(t->indices[c->mode], begin, end, c->share->row_begin, c->share->row_end,
                  cursor);
    return 0;
}

/* thg_extract_share on up to `threads` threads. */
static int extract_share_threaded(const thg_coo_view *t, uint32_t mode,
                                  const uint64_t *row_offsets, const thg_share *share,
                                  uint32_t *const *out_indices, double *out_values,
                                  uint32_t threads)
{
    if (!share_args_ok(t, mode, row_offsets, share, out_indices, out_values))
        return -1;
    const uint64_t rows = share->row_end - share->row_begin;
    const uint64_t chunks = chunks_for(threads, rows, t->nnz);
    /* One pass where one chunk is all (and for an empty share). */
    if (chunks <= 1 || share->nnz_begin == share->nnz_end)
        return thg_extract_share(t, mode, row_offsets, share, out_indices, out_values);
    chunked_share c = {.mode = mode,
                       .share = share,
                       .out_indices = out_indices,
                       .out_values = out_values,
                       .chunks = (uint32_t)chunks,
                       .rows = rows,
                       .cursor = calloc(chunks * rows, sizeof(uint64_t))};
    if (c.cursor == NULL)
        return thg_extract_share(t, mode, row_offsets, share, out_indices, out_values);
    run_jobs(c.chunks, chunk_job, t, &c, c.chunks);
    for (uint64_t r = 0; r < rows; ++r) {
        uint64_t position = row_offsets[share->row_begin + r];
        for (uint64_t k = 0; k < chunks; ++k) {
            const uint64_t count = c.cursor[k * rows + r];
            c.cursor[k * rows + r] = position;
            position += count;
        }
    }
    c.placing = 1;
    run_jobs(c.chunks, chunk_job, t, &c, c.chunks);
    free(c.cursor);
    return 0;
}

typedef struct extract_jobs {
    const thg_share_job *jobs;
    uint32_t threads_each; /* threads a job's pass is cut over */
} extract_jobs;

static int extract_job(const job_queue *q, uint32_t job)
{
    const extract_jobs *e = q->jobs;
    const thg_share_job *j = e->jobs + job;
    return extract_share_threaded(q->tensor, j->mode, j->row_offsets, j->share, j->out_indices,
                                  j->out_values, e->threads_each);
}

int thg_extract_shares(const thg_coo_view *t, const thg_share_job *jobs, uint32_t njobs,
                       uint32_t threads)
{
    if (t == NULL || (jobs == NULL && njobs > 0))
        return -1;
    /* Threads beyond one a job cut each job's pass: every job at once, each
     * over threads / njobs of them. */
    const extract_jobs e = {jobs, njobs > 0 && threads > njobs ? threads / njobs : 1u};
    return run_jobs(njobs, extract_job, t, &e, threads);
}
