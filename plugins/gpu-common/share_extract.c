#include "share_extract.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* A share's rows grouped into blocks of consecutive rows, for the
 * two-stage extraction below. The rows are looked up by granule, 2^shift
 * consecutive rows, so that the map from a row to its block stays small
 * enough for a processor's own cache however many rows the share has; a
 * split row (the share's first or last, shared with a neighbour) is a block
 * of its own and found by comparison. */
typedef struct share_blocks {
    uint32_t count;
    uint64_t *first_row;     /* [count + 1]: block b holds rows [first_row[b], first_row[b + 1]) */
    uint16_t *granule_block; /* [granules]: the block of each granule */
    uint32_t shift;
    uint64_t grid_begin;              /* the first granule's first row */
    uint64_t split_first, split_last; /* the split rows; NO_ROW when not split */
    uint64_t block_nnz;               /* the most nonzeros of a block of several granules */
    uint64_t most_rows;               /* the most rows of any block */
} share_blocks;

#define NO_ROW UINT64_MAX /* no such row */

static inline uint64_t block_of_row(const share_blocks *b, uint64_t row)
{
    if (row == b->split_first)
        return 0;
    if (row == b->split_last)
        return b->count - 1u;
    return b->granule_block[(row - b->grid_begin) >> b->shift];
}

/* For each of the nonzeros [begin, end) whose row (idx) is in [first_row,
 * row_end): counts[r - first_row] += 1, or counts[block of r] with
 * `blocks`; returns how many were. */
static uint64_t count_rows_in(const uint32_t *idx, uint64_t begin, uint64_t end,
                              uint64_t first_row, uint64_t row_end, const share_blocks *blocks,
                              uint64_t *counts)
{
    const uint64_t rows = row_end - first_row;
    uint64_t counted = 0;
    for (uint64_t i = begin; i < end; ++i) {
        const uint64_t r = idx[i] - first_row; /* wraps past `rows` below first_row */
        if (r < rows) {
            ++counts[blocks ? block_of_row(blocks, idx[i]) : r];
            ++counted;
        }
    }
    return counted;
}

int thp_count_rows(const thp_coo_view *t, uint32_t mode, uint64_t *row_offsets)
{
    if (t == NULL || row_offsets == NULL || mode >= t->nmodes)
        return -1;
    const uint64_t rows = t->dims[mode];
    memset(row_offsets, 0, sizeof *row_offsets * (rows + 1u));
    /* An index outside the mode is not counted. */
    if (count_rows_in(t->indices[mode], 0, t->nnz, 0, rows, NULL, row_offsets + 1) != t->nnz)
        return -1;
    for (uint64_t r = 0; r < rows; ++r)
        row_offsets[r + 1u] += row_offsets[r];
    return 0;
}

/* Whether thp_extract_share's arguments fit together. */
static int share_args_ok(const thp_coo_view *t, uint32_t mode, const uint64_t *row_offsets,
                         const thp_share *share, uint32_t *const *out_indices,
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
 * its place: the next position of row r in the mode's stable order is
 * cursor[r - share->row_begin], advanced as the row is met; with `blocks`,
 * cursor[block of r], the next position of r's block (its nonzeros in the
 * tensor's order: stage 1 below). */
static void place_nonzeros(const thp_coo_view *t, uint32_t mode, const thp_share *share,
                           const share_blocks *blocks, uint64_t *cursor, uint64_t begin,
                           uint64_t end, uint32_t *const *out_indices, double *out_values)
{
    const uint64_t first_row = share->row_begin, rows = share->row_end - share->row_begin;
    const uint32_t nmodes = t->nmodes; /* a local: the stores below may alias t's fields */
    const uint32_t *idx = t->indices[mode];
    for (uint64_t i = begin; i < end; ++i) {
        const uint64_t r = idx[i] - first_row; /* wraps past `rows` below first_row */
        if (r >= rows)
            continue;
        const uint64_t position = cursor[blocks ? block_of_row(blocks, idx[i]) : r]++;
        if (position < share->nnz_begin || position >= share->nnz_end)
            continue; /* a split row's nonzero that the neighbour takes */
        const uint64_t k = position - share->nnz_begin;
        for (uint32_t m = 0; m < nmodes; ++m)
            out_indices[m][k] = t->indices[m][i];
        out_values[k] = t->values[i];
    }
}

int thp_extract_share(const thp_coo_view *t, uint32_t mode, const uint64_t *row_offsets,
                      const thp_share *share, uint32_t *const *out_indices,
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
    place_nonzeros(t, mode, share, NULL, cursor, 0, t->nnz, out_indices, out_values);
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
    const thp_coo_view *tensor;
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
                    const thp_coo_view *tensor, const void *jobs, uint32_t threads)
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
    const thp_coo_view *t = q->tensor;
    uint32_t mode = 0;
    while (job >= c->first_job[mode + 1])
        ++mode;
    const uint32_t chunk = job - c->first_job[mode];
    const uint64_t rows = t->dims[mode];
    const uint64_t begin = t->nnz * chunk / c->chunks[mode];
    const uint64_t end = t->nnz * (chunk + 1u) / c->chunks[mode];
    uint64_t *counts = c->counts[mode] + (size_t)chunk * rows;
    /* An index outside the mode is not counted. */
    return count_rows_in(t->indices[mode], begin, end, 0, rows, NULL, counts) == end - begin
               ? 0
               : -1;
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

int thp_count_rows_all(const thp_coo_view *t, uint64_t *const *row_offsets, uint32_t threads)
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

/* One share's extraction on several threads, in two stages, so that no
 * stage writes to more places at once than a processor's caches hold (one
 * pass with a cursor a row scatters its writes over every row of the
 * share: millions, on the large modes).
 *
 * The share's rows are grouped into blocks of consecutive rows, about
 * BLOCK_TARGET of them, balanced by nonzeros (share_blocks above). Stage 1
 * writes each nonzero to its block's part of the output, which the row
 * offsets give: the tensor cut into chunks, one a thread, each chunk
 * counting its nonzeros per block and then writing them after the earlier
 * chunks', so a block's part holds its nonzeros in the tensor's order.
 * Stage 2 puts each block of several rows in row order, a counting sort
 * through a buffer, which keeps the tensor's order within a row: the
 * mode's stable row order, as the one pass gives it. */

/* Blocks a share's rows are grouped into, about; the least of the most
 * rows one block takes; the most granules. */
#define BLOCK_TARGET 4096u
#define BLOCK_MIN_ROWS 4096u
#define MAX_GRANULES ((uint64_t)1 << 18)

static void free_blocks(share_blocks *b)
{
    free(b->first_row);
    free(b->granule_block);
}

/* Walks the granules of rows [grid_begin, grid_end) into blocks: a block
 * closes before a granule that would take it past block_nnz nonzeros or
 * `block_granules` granules, and a granule of more than block_nnz nonzeros
 * (a hot row's) is a block of its own. Writes first_row (from index
 * `first`) and granule_block when they are not NULL; returns the blocks. */
static uint64_t walk_granules(const uint64_t *row_offsets, const share_blocks *b,
                              uint64_t grid_end, uint64_t block_granules, uint64_t first,
                              uint64_t *first_row, uint16_t *granule_block)
{
    const uint64_t granules =
        (grid_end - b->grid_begin + ((uint64_t)1 << b->shift) - 1u) >> b->shift;
#define GRANULE_ROW(g)                                                                         \
    ((g) << b->shift < grid_end - b->grid_begin ? b->grid_begin + ((g) << b->shift) : grid_end)
    uint64_t count = first, open = 0; /* the open block's first granule */
    for (uint64_t g = 0; g < granules; ++g) {
        const uint64_t nnz = row_offsets[GRANULE_ROW(g + 1u)] - row_offsets[GRANULE_ROW(g)];
        const int alone = nnz > b->block_nnz;
        if (g > open && (alone || g - open >= block_granules ||
                         row_offsets[GRANULE_ROW(g + 1u)] - row_offsets[GRANULE_ROW(open)] >
                             b->block_nnz)) {
            if (first_row)
                first_row[count] = GRANULE_ROW(open);
            ++count;
            open = g;
        }
        if (granule_block)
            granule_block[g] = (uint16_t)count;
        if (alone) {
            if (first_row)
                first_row[count] = GRANULE_ROW(g);
            ++count;
            open = g + 1u;
        }
    }
    if (open < granules) {
        if (first_row)
            first_row[count] = GRANULE_ROW(open);
        ++count;
    }
#undef GRANULE_ROW
    return count;
}

/* The share's blocks; -1 when memory is short or there are more blocks
 * than granule_block's type numbers. */
static int make_blocks(const uint64_t *row_offsets, const thp_share *share, share_blocks *b)
{
    memset(b, 0, sizeof *b);
    b->split_first = share->splits_first_row ? share->row_begin : NO_ROW;
    b->split_last = share->splits_last_row ? share->row_end - 1u : NO_ROW;
    /* The first split row's block, the granules', the last split row's
     * (none of its own when the share is one row split on both sides). */
    const uint64_t first = b->split_first != NO_ROW;
    const uint64_t last = b->split_last != NO_ROW && b->split_last != b->split_first;
    b->grid_begin = share->row_begin + first;
    const uint64_t grid_end = share->row_end - last;
    const uint64_t grid_rows = grid_end - b->grid_begin;
    while ((grid_rows >> b->shift) >= MAX_GRANULES)
        ++b->shift;
    b->block_nnz = (share->nnz_end - share->nnz_begin) / BLOCK_TARGET + 1u;
    const uint64_t block_rows =
        grid_rows / BLOCK_TARGET > BLOCK_MIN_ROWS ? grid_rows / BLOCK_TARGET : BLOCK_MIN_ROWS;
    const uint64_t block_granules =
        block_rows >> b->shift > 0 ? block_rows >> b->shift : 1u;
    const uint64_t count =
        walk_granules(row_offsets, b, grid_end, block_granules, first, NULL, NULL) + last;
    if (count > (uint64_t)UINT16_MAX + 1u)
        return -1;
    const uint64_t granules = (grid_rows + ((uint64_t)1 << b->shift) - 1u) >> b->shift;
    b->first_row = malloc(sizeof *b->first_row * (count + 1u));
    b->granule_block = malloc(sizeof *b->granule_block * (granules > 0 ? granules : 1u));
    if (b->first_row == NULL || b->granule_block == NULL)
        return -1;
    b->count = (uint32_t)count;
    if (first)
        b->first_row[0] = b->split_first;
    walk_granules(row_offsets, b, grid_end, block_granules, first, b->first_row,
                  b->granule_block);
    if (last)
        b->first_row[count - 1u] = b->split_last;
    b->first_row[count] = share->row_end;
    for (uint32_t k = 0; k < b->count; ++k) {
        const uint64_t rows = b->first_row[k + 1u] - b->first_row[k];
        b->most_rows = rows > b->most_rows ? rows : b->most_rows;
    }
    return 0;
}

typedef struct blocked_share {
    uint32_t mode;
    const uint64_t *row_offsets;
    const thp_share *share;
    uint32_t *const *out_indices;
    double *out_values;
    share_blocks blocks;
    uint32_t chunks;
    uint64_t *cursor; /* [chunks][blocks.count]: counts, then positions */
    int placing;      /* 0: count the blocks' nonzeros; 1: place them */
    /* Stage 2: the next block to sort, and a buffer per worker of
     * blocks.most_rows cursors and blocks.block_nnz nonzeros. */
    atomic_uint *next_block;
    void **buffers; /* [chunks] */
} blocked_share;

static int stage1_job(const job_queue *q, uint32_t chunk)
{
    const blocked_share *c = q->jobs;
    const thp_coo_view *t = q->tensor;
    const uint64_t begin = t->nnz * chunk / c->chunks;
    const uint64_t end = t->nnz * (chunk + 1u) / c->chunks;
    uint64_t *cursor = c->cursor + (size_t)chunk * c->blocks.count;
    if (c->placing)
        place_nonzeros(t, c->mode, c->share, &c->blocks, cursor, begin, end, c->out_indices,
                       c->out_values);
    else
        count_rows_in(t->indices[c->mode], begin, end, c->share->row_begin,
                      c->share->row_end, &c->blocks, cursor);
    return 0;
}

/* Block k's part of the output into row order; 0, or -1 when a buffer it
 * needs cannot be had. A part already in row order (a mode the tensor is
 * sorted by) is left. The part's nonzeros but those of one row, `kept`,
 * go through a buffer, and kept's stay in the part: moved to its front in
 * order, then to the row's place at once. kept is the block's largest row
 * when the block holds more than the buffer (a granule with a hot row),
 * none otherwise, so the buffer never needs a hot row's size. */
static int sort_block(const blocked_share *c, uint32_t nmodes, uint32_t k, void *buffer)
{
    const uint64_t row_begin = c->blocks.first_row[k], row_end = c->blocks.first_row[k + 1u];
    const uint64_t *offsets = c->row_offsets;
    const uint64_t first = offsets[row_begin] - c->share->nnz_begin;
    const uint64_t n = offsets[row_end] - offsets[row_begin];
    uint32_t *const *out = c->out_indices;
    const uint32_t *rows = out[c->mode] + first;
    uint64_t i = 1;
    while (i < n && rows[i - 1u] <= rows[i])
        ++i;
    if (i >= n)
        return 0;
    uint64_t kept = NO_ROW, kept_n = 0;
    if (n > c->blocks.block_nnz)
        for (uint64_t r = row_begin; r < row_end; ++r)
            if (offsets[r + 1u] - offsets[r] > kept_n) {
                kept = r;
                kept_n = offsets[r + 1u] - offsets[r];
            }
    const uint64_t moved = n - kept_n;
    /* The buffer: most_rows cursors, then block_nnz nonzeros (values, then
     * each mode's indices), or those in memory of their own past that. */
    uint64_t *cursor = buffer;
    void *own = NULL;
    if (moved > c->blocks.block_nnz &&
        (own = malloc(moved * (sizeof(double) + sizeof(uint32_t) * nmodes))) == NULL)
        return -1;
    double *values = own ? own : (double *)(cursor + c->blocks.most_rows);
    uint32_t *indices = (uint32_t *)(values + moved);
    for (uint64_t r = row_begin; r < row_end; ++r)
        cursor[r - row_begin] = offsets[r] - offsets[row_begin] + first;
    /* The kept row's nonzeros to the part's front, the others out. */
    uint64_t front = first, out_n = 0;
    for (uint64_t j = first; j < first + n; ++j) {
        if (out[c->mode][j] == kept) {
            for (uint32_t m = 0; m < nmodes; ++m)
                out[m][front] = out[m][j];
            c->out_values[front++] = c->out_values[j];
            continue;
        }
        for (uint32_t m = 0; m < nmodes; ++m)
            indices[(size_t)m * moved + out_n] = out[m][j];
        values[out_n++] = c->out_values[j];
    }
    if (kept_n > 0) {
        const uint64_t to = cursor[kept - row_begin];
        for (uint32_t m = 0; m < nmodes; ++m)
            memmove(out[m] + to, out[m] + first, sizeof(uint32_t) * kept_n);
        memmove(c->out_values + to, c->out_values + first, sizeof(double) * kept_n);
    }
    const uint32_t *row_of = indices + (size_t)c->mode * moved;
    for (uint64_t j = 0; j < moved; ++j) {
        const uint64_t to = cursor[row_of[j] - row_begin]++;
        for (uint32_t m = 0; m < nmodes; ++m)
            out[m][to] = indices[(size_t)m * moved + j];
        c->out_values[to] = values[j];
    }
    free(own);
    return 0;
}

static int stage2_job(const job_queue *q, uint32_t worker)
{
    const blocked_share *c = q->jobs;
    int status = 0;
    for (uint32_t k = atomic_fetch_add(c->next_block, 1u); k < c->blocks.count;
         k = atomic_fetch_add(c->next_block, 1u))
        if (c->blocks.first_row[k + 1u] - c->blocks.first_row[k] > 1u &&
            sort_block(c, q->tensor->nmodes, k, c->buffers[worker]) != 0)
            status = -1;
    return status;
}

static void free_blocked(blocked_share *c)
{
    free_blocks(&c->blocks);
    free(c->cursor);
    for (uint32_t w = 0; c->buffers && w < c->chunks; ++w)
        free(c->buffers[w]);
    free(c->buffers);
}

/* Allocates what the stages need; -1 when memory is short. */
static int alloc_blocked(blocked_share *c, uint32_t nmodes, uint32_t threads, uint64_t nnz)
{
    if (make_blocks(c->row_offsets, c->share, &c->blocks) != 0)
        return -1;
    c->chunks = (uint32_t)chunks_for(threads, c->blocks.count, nnz);
    c->cursor = calloc((size_t)c->chunks * c->blocks.count, sizeof *c->cursor);
    c->buffers = calloc(c->chunks, sizeof *c->buffers);
    if (c->cursor == NULL || c->buffers == NULL)
        return -1;
    const size_t bytes = c->blocks.most_rows * sizeof(uint64_t) +
                         c->blocks.block_nnz * (sizeof(double) + sizeof(uint32_t) * nmodes);
    for (uint32_t w = 0; w < c->chunks; ++w)
        if ((c->buffers[w] = malloc(bytes)) == NULL)
            return -1;
    return 0;
}

/* thp_extract_share on up to `threads` threads, in the two stages above;
 * -1 also when memory for them is short (a few cursors a block, a buffer
 * of a block's nonzeros a thread). */
static int extract_share_threaded(const thp_coo_view *t, uint32_t mode,
                                  const uint64_t *row_offsets, const thp_share *share,
                                  uint32_t *const *out_indices, double *out_values,
                                  uint32_t threads)
{
    if (!share_args_ok(t, mode, row_offsets, share, out_indices, out_values))
        return -1;
    if (share->nnz_begin == share->nnz_end)
        return 0;
    atomic_uint next_block;
    atomic_init(&next_block, 0u);
    blocked_share c = {.mode = mode,
                       .row_offsets = row_offsets,
                       .share = share,
                       .out_indices = out_indices,
                       .out_values = out_values,
                       .next_block = &next_block};
    int status = alloc_blocked(&c, t->nmodes, threads, t->nnz);
    if (status == 0) {
        run_jobs(c.chunks, stage1_job, t, &c, c.chunks);
        for (uint32_t k = 0; k < c.blocks.count; ++k) {
            uint64_t position = row_offsets[c.blocks.first_row[k]];
            for (uint32_t chunk = 0; chunk < c.chunks; ++chunk) {
                uint64_t *at = &c.cursor[(size_t)chunk * c.blocks.count + k];
                const uint64_t count = *at;
                *at = position;
                position += count;
            }
        }
        c.placing = 1;
        run_jobs(c.chunks, stage1_job, t, &c, c.chunks);
        status = run_jobs(c.chunks, stage2_job, t, &c, c.chunks);
    }
    free_blocked(&c);
    return status;
}

typedef struct extract_jobs {
    const thp_share_job *jobs;
    uint32_t threads_each; /* threads a job's pass is cut over */
} extract_jobs;

static int extract_job(const job_queue *q, uint32_t job)
{
    const extract_jobs *e = q->jobs;
    const thp_share_job *j = e->jobs + job;
    return extract_share_threaded(q->tensor, j->mode, j->row_offsets, j->share, j->out_indices,
                                  j->out_values, e->threads_each);
}

int thp_extract_shares(const thp_coo_view *t, const thp_share_job *jobs, uint32_t njobs,
                       uint32_t threads)
{
    if (t == NULL || (jobs == NULL && njobs > 0))
        return -1;
    /* Threads beyond one a job cut each job's pass: every job at once, each
     * over threads / njobs of them. */
    const extract_jobs e = {jobs, njobs > 0 && threads > njobs ? threads / njobs : 1u};
    return run_jobs(njobs, extract_job, t, &e, threads);
}
