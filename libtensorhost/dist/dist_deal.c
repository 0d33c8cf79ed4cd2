#include "dist/dist_deal.h"

#include <omp.h>
#include <string.h>

/* A nonzero on the wire: its indices, then its value's bytes. */
static size_t record_bytes(uint32_t nmodes)
{
    return sizeof(th_index) * nmodes + sizeof(double);
}

/* Work split over OpenMP's threads from this many nonzeros on. */
#define PARALLEL_FROM 65536u

/* Nonzero i of `share` as a record at `at`. */
static void pack(const th_sptensor *share, uint64_t i, char *at)
{
    for (uint32_t m = 0; m < share->nmodes; ++m)
        memcpy(at + sizeof(th_index) * m, &share->indices[m][i], sizeof(th_index));
    memcpy(at + sizeof(th_index) * share->nmodes, &share->values[i], sizeof(double));
}

/* The nonzeros of `share` sent to the processes `to` names (send_bytes[p]
 * of records to p; `to` is freed here once they are packed, before the
 * exchange's buffers), and those received, as a new tensor of share's
 * dims: NULL where the exchange failed. Packed in the share's order within
 * each destination's block, by every thread at once: thread t's nonzeros
 * (a contiguous range) after the lower threads' in each block. */
static th_sptensor *exchange_nonzeros(th_dist *dist, const th_sptensor *share, uint32_t *to,
                                      const uint64_t *send_bytes, GError **error)
{
    const uint32_t P = th_dist_size(dist);
    const size_t record = record_bytes(share->nmodes);
    g_autofree char *packed = th_alloc_large(MAX(share->nnz, 1), record);
    const int threads = share->nnz >= PARALLEL_FROM ? omp_get_max_threads() : 1;
    /* next[t * P + p]: where thread t's next record for process p goes. */
    g_autofree uint64_t *next = g_new0(uint64_t, (size_t)threads * P);
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), n = omp_get_num_threads();
        const uint64_t begin = share->nnz * (uint64_t)t / (uint64_t)n;
        const uint64_t end = share->nnz * (uint64_t)(t + 1) / (uint64_t)n;
        uint64_t *mine = next + (size_t)t * P;
        for (uint64_t i = begin; i < end; ++i)
            mine[to[i]] += record;
#pragma omp barrier
#pragma omp single
        {
            uint64_t at = 0;
            for (uint32_t p = 0; p < P; ++p)
                for (int k = 0; k < n; ++k) {
                    const uint64_t bytes = next[(size_t)k * P + p];
                    next[(size_t)k * P + p] = at;
                    at += bytes;
                }
        }
        for (uint64_t i = begin; i < end; ++i) {
            pack(share, i, packed + mine[to[i]]);
            mine[to[i]] += record;
        }
    }
    g_free(to);
    g_autofree uint64_t *recv_bytes = g_new0(uint64_t, P);
    void *received = NULL;
    const gboolean sent =
        th_dist_exchange(dist, packed, send_bytes, (uint32_t)record, &received, recv_bytes, error);
    g_clear_pointer(&packed, g_free);
    if (!sent)
        return NULL;
    uint64_t bytes = 0;
    for (uint32_t p = 0; p < P; ++p)
        bytes += recv_bytes[p];
    const uint64_t n = bytes / record;
    th_sptensor *t = th_sptensor_new(share->nmodes, n);
    memcpy(t->dims, share->dims, sizeof(th_index) * share->nmodes);
    t->value_scale = share->value_scale;
    const char *in = received;
#pragma omp parallel for schedule(static) if (n >= PARALLEL_FROM)
    for (uint64_t i = 0; i < n; ++i) {
        const char *at = in + i * record;
        for (uint32_t m = 0; m < share->nmodes; ++m)
            memcpy(&t->indices[m][i], at + sizeof(th_index) * m, sizeof(th_index));
        memcpy(&t->values[i], at + sizeof(th_index) * share->nmodes, sizeof(double));
    }
    g_free(received);
    return t;
}

/* Each nonzero's process: a row's nonzeros of this share fill the
 * positions [first, first + count) of the mode's order, its own order
 * within (the file's), so a row that no share boundary crosses sends
 * them all to one process, found once a row and looked up by every thread;
 * only the rows split between processes (fewer than P) take a walk in the
 * share's order. send_bytes[p] (zeroed) gets the bytes for p. */
static void destinations(const th_sptensor *share, uint32_t mode, const uint64_t *offsets,
                         const uint64_t *before, const uint64_t *counts, const thp_share *shares,
                         uint32_t P, uint32_t *to, uint64_t *send_bytes)
{
    const uint64_t rows = share->dims[mode];
    const th_index *index = share->indices[mode];
    /* The row's one process, or P where this share's part of it is split. */
    g_autofree uint32_t *row_to = g_new(uint32_t, MAX(rows, 1));
#pragma omp parallel for schedule(static) if (rows >= PARALLEL_FROM)
    for (uint64_t r = 0; r < rows; ++r) {
        const uint64_t first = offsets[r] + before[r];
        const uint32_t p = counts[r] ? thp_share_holding(shares, P, first) : 0;
        row_to[r] = counts[r] && thp_share_holding(shares, P, first + counts[r] - 1) != p ? P : p;
    }
#pragma omp parallel for schedule(static) if (share->nnz >= PARALLEL_FROM)
    for (uint64_t i = 0; i < share->nnz; ++i)
        to[i] = row_to[index[i]];
    const size_t record = record_bytes(share->nmodes);
    /* The split rows: each straddles one of the P - 1 boundaries between
     * the shares, so there are fewer than P of them. */
    g_autofree uint64_t *split = g_new(uint64_t, P);
    uint32_t nsplit = 0;
    for (uint64_t r = 0; r < rows; ++r) {
        if (row_to[r] < P) {
            send_bytes[row_to[r]] += counts[r] * record;
        } else {
            g_assert(nsplit < P); /* one a boundary at most */
            split[nsplit++] = r;
        }
    }
    if (nsplit == 0)
        return;
    /* Their nonzeros, walked in order (those whose `to` is still P): the
     * k-th of a row here goes to position first + k. */
    g_autofree uint64_t *next = g_new(uint64_t, nsplit);
    for (uint32_t k = 0; k < nsplit; ++k)
        next[k] = offsets[split[k]] + before[split[k]];
    for (uint64_t i = 0; i < share->nnz; ++i) {
        if (to[i] != P)
            continue;
        uint32_t k = 0;
        while (split[k] != index[i])
            ++k;
        to[i] = thp_share_holding(shares, P, next[k]++);
        send_bytes[to[i]] += record;
    }
}

th_sptensor *th_dist_deal_mode(th_dist *dist, const th_sptensor *share, uint32_t mode,
                               th_dist_dealt *dealt, GError **error)
{
    g_return_val_if_fail(mode < share->nmodes, NULL);
    memset(dealt, 0, sizeof *dealt);
    const uint32_t P = th_dist_size(dist), me = th_dist_rank(dist);
    const uint64_t rows = share->dims[mode];
    const th_index *index = share->indices[mode];
    /* The rows' counts over every process, and where this process's
     * nonzeros of each row begin among the row's (the lower ranks'
     * first). */
    g_autofree uint64_t *offsets = g_new0(uint64_t, rows + 1);
    g_autofree uint64_t *before = g_new0(uint64_t, rows);
    for (uint64_t i = 0; i < share->nnz; ++i)
        ++before[index[i]];
    g_autofree uint64_t *counts = g_memdup2(before, rows * sizeof *before); /* this share's */
    memcpy(offsets + 1, before, rows * sizeof *offsets);
    if (!th_dist_sum_u64(dist, offsets + 1, rows, error) ||
        !th_dist_exscan_sum_u64(dist, before, rows, error))
        return NULL;
    for (uint64_t r = 0; r < rows; ++r)
        offsets[r + 1] += offsets[r];
    g_autofree thp_share *shares = g_new(thp_share, P);
    if (thp_plan_shares(offsets, rows, P, shares) != 0) {
        g_set_error(error, TH_DIST_ERROR, TH_DIST_ERROR_MPI,
                    "the rows of mode %u counted over %u processes do not add up", mode + 1, P);
        return NULL;
    }
    dealt->share = shares[me];
    dealt->owned = thp_owned_rows_of(shares, P, me, rows);
    dealt->nnz_total = offsets[rows];
    /* Each nonzero's destination, from its position in the mode's order:
     * its row's start, the lower ranks' nonzeros of the row, and this
     * process's before it. */
    g_autofree uint32_t *to = g_new(uint32_t, MAX(share->nnz, 1));
    g_autofree uint64_t *send_bytes = g_new0(uint64_t, P);
    const size_t record = record_bytes(share->nmodes);
    destinations(share, mode, offsets, before, counts, shares, P, to, send_bytes);
    g_clear_pointer(&before, g_free);
    g_clear_pointer(&counts, g_free);
    /* Where no nonzero moves (mode 1, the file's sort order, whose shares
     * are the plan's), the share itself. */
    uint64_t moving = share->nnz * record - send_bytes[me];
    if (!th_dist_max_u64(dist, &moving, 1, error))
        return NULL;
    th_sptensor *t = moving == 0 ? th_sptensor_copy(share)
                                 : exchange_nonzeros(dist, share, g_steal_pointer(&to), send_bytes, error);
    if (t == NULL)
        return NULL;
    GError *local = NULL;
    if (t->nnz != dealt->share.nnz_end - dealt->share.nnz_begin)
        g_set_error(&local, TH_DIST_ERROR, TH_DIST_ERROR_MPI,
                    "mode %u: process %u was dealt %" G_GUINT64_FORMAT
                    " nonzeros where its share holds %" G_GUINT64_FORMAT,
                    mode + 1, me, t->nnz, dealt->share.nnz_end - dealt->share.nnz_begin);
    if (!th_dist_agree(dist, &local)) {
        g_propagate_error(error, local);
        th_sptensor_free(t);
        return NULL;
    }
    return t;
}
