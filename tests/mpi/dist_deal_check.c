/* The nonzeros of every mode dealt to the processes of a run
 * (libtensorhost/dist/dist_deal.h), checked under mpirun by
 * tests/mpi/test_mpi.py on each of its tensors:
 *   - each process gets exactly its planned share's count, and every
 *     nonzero it gets lies in its share's rows;
 *   - a row strictly inside the share comes whole (the row's count over
 *     every process), and the share's first and last rows (split with the
 *     neighbours) come with the counts the plan's positions give;
 *   - together the processes hold the tensor: an order-free hash of every
 *     nonzero (indices and value bits), summed over the processes, equals
 *     that of the file's shares;
 *   - with one process (no mpirun) the deal is the whole tensor.
 * Prints "dealt N modes of M nonzeros over P processes" on rank 0, then
 * each mode's deal time (the slowest process's, seconds); exit status 1
 * with a message on the process that found a difference.
 * Usage: dist_deal_check TENSOR.tnsb */
#include <glib.h>
#include <stdio.h>
#include <string.h>

#include "dist/dist.h"
#include "dist/dist_deal.h"
#include "dist/dist_tensor.h"

#define TH_MAX_DEAL_MODES 64

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

/* The sum of every nonzero's hash: the same for any order. */
static uint64_t hash_of(const th_sptensor *t)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < t->nnz; ++i) {
        uint64_t h = 0x9e3779b97f4a7c15ull;
        for (uint32_t m = 0; m < t->nmodes; ++m)
            h = mix(h ^ t->indices[m][i]);
        uint64_t bits;
        memcpy(&bits, &t->values[i], sizeof bits);
        sum += mix(h ^ bits);
    }
    return sum;
}

static int fail(const char *what, uint32_t rank, uint32_t mode)
{
    fprintf(stderr, "dist_deal_check: rank %u, mode %u: %s\n", rank, mode + 1, what);
    return 1;
}

/* The checks of one mode on this process; 0 when it passes. */
static int check_mode(th_dist *dist, const th_sptensor *share, uint32_t mode, double *seconds,
                      GError **error)
{
    const uint32_t me = th_dist_rank(dist);
    th_dist_dealt d;
    const gint64 start = g_get_monotonic_time();
    g_autoptr(th_sptensor) got = th_dist_deal_mode(dist, share, mode, &d, error);
    *seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    if (got == NULL)
        return 1;
    const uint64_t rows = share->dims[mode];
    /* Every row's count over the processes, and the counts dealt here. */
    g_autofree uint64_t *total = g_new0(uint64_t, rows + 1);
    g_autofree uint64_t *mine = g_new0(uint64_t, rows);
    for (uint64_t i = 0; i < share->nnz; ++i)
        ++total[share->indices[mode][i] + 1];
    if (!th_dist_sum_u64(dist, total + 1, rows, error))
        return 1;
    for (uint64_t r = 0; r < rows; ++r)
        total[r + 1] += total[r];
    int bad = 0;
    if (got->nnz != d.share.nnz_end - d.share.nnz_begin)
        bad |= fail("dealt count differs from the share's", me, mode);
    for (uint64_t i = 0; i < got->nnz; ++i) {
        const uint64_t r = got->indices[mode][i];
        if (r < d.share.row_begin || r >= d.share.row_end) {
            bad |= fail("a nonzero outside the share's rows", me, mode);
            break;
        }
        ++mine[r];
    }
    for (uint64_t r = d.share.row_begin; r < d.share.row_end && !bad; ++r) {
        /* The share's part of row r: its positions within [begin, end). */
        const uint64_t lo = MAX(total[r], d.share.nnz_begin);
        const uint64_t hi = MIN(total[r + 1], d.share.nnz_end);
        if (mine[r] != (hi > lo ? hi - lo : 0))
            bad |= fail("a row's dealt count is not the plan's", me, mode);
    }
    if (d.owned.begin > d.owned.end || d.owned.end > rows)
        bad |= fail("owned rows out of range", me, mode);
    uint64_t hashes[2] = {hash_of(share), hash_of(got)};
    if (!th_dist_sum_u64(dist, hashes, 2, error))
        return 1;
    if (hashes[0] != hashes[1])
        bad |= fail("the processes' nonzeros together are not the tensor's", me, mode);
    if (dist == NULL && (got->nnz != share->nnz || d.nnz_total != share->nnz))
        bad |= fail("one process was not dealt the whole tensor", me, mode);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: dist_deal_check TENSOR.tnsb\n");
        return 2;
    }
    GError *error = NULL;
    th_dist *dist = th_dist_start(&error);
    if (error) {
        fprintf(stderr, "dist_deal_check: %s\n", error->message);
        return 1;
    }
    th_tensor_read_options options = {0};
    th_dist_share_info info;
    g_autoptr(th_sptensor) share = th_dist_read_tensor(dist, argv[1], &options, &info, &error);
    int bad = share == NULL;
    double seconds[TH_MAX_DEAL_MODES] = {0};
    if (share && share->nmodes > TH_MAX_DEAL_MODES) {
        fprintf(stderr, "dist_deal_check: more than %d modes\n", TH_MAX_DEAL_MODES);
        bad = 1;
    }
    for (uint32_t m = 0; !bad && m < share->nmodes && !error; ++m)
        bad |= check_mode(dist, share, m, &seconds[m], &error);
    if (error)
        fprintf(stderr, "dist_deal_check: rank %u: %s\n", th_dist_rank(dist), error->message);
    uint64_t failed = bad ? 1u : 0u;
    if (!error && !th_dist_max_u64(dist, &failed, 1, &error))
        failed = 1;
    if (!failed && !th_dist_max(dist, seconds, TH_MAX_DEAL_MODES, &error))
        failed = 1;
    if (!failed && th_dist_rank(dist) == 0) {
        printf("dealt %u modes of %" G_GUINT64_FORMAT " nonzeros over %u processes\n",
               share->nmodes, info.nnz_total, th_dist_size(dist));
        for (uint32_t m = 0; m < share->nmodes; ++m)
            printf("  mode %u: %.3f s\n", m + 1, seconds[m]);
    }
    g_clear_error(&error);
    th_dist_finish(dist);
    return failed ? 1 : 0;
}
