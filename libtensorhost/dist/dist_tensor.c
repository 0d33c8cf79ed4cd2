#include "dist/dist_tensor.h"

#include <math.h>
#include <string.h>

#include "tensor/tensor_binary.h"
#include "tensor/tensor_reader.h"

/* What each process sends rank 0 of its share's hashes: its first block,
 * how many, then [nsections][most] hashes (most: the largest share's). */
static uint64_t most_blocks(const th_tensor_share *share, uint32_t size)
{
    return share->file_blocks / size + 2u;
}

/* Rank 0 joins the hashes and checks them; every process learns the
 * outcome. */
static gboolean check_checksums(th_dist *dist, const char *path, const th_tensor_share *share,
                                GError **error)
{
    const uint32_t size = th_dist_size(dist);
    const uint64_t most = most_blocks(share, size);
    const uint64_t words = 2u + share->nsections * most;
    g_autofree uint64_t *sent = g_new0(uint64_t, words);
    sent[0] = share->first_block;
    sent[1] = share->nblocks;
    for (uint32_t s = 0; s < share->nsections; ++s)
        memcpy(sent + 2u + s * most, share->block_sums + (uint64_t)s * share->nblocks,
               share->nblocks * sizeof *sent);
    const gboolean root = th_dist_rank(dist) == 0;
    g_autofree uint64_t *received = root ? g_new(uint64_t, words * size) : NULL;
    if (!th_dist_gather(dist, sent, words * sizeof *sent, received, error))
        return FALSE;
    GError *local = NULL;
    if (root) {
        g_autofree uint64_t *sums = g_new(uint64_t, share->nsections * share->file_blocks);
        for (uint32_t p = 0; p < size; ++p) {
            const uint64_t *from = received + p * words;
            for (uint32_t s = 0; s < share->nsections; ++s)
                memcpy(sums + s * share->file_blocks + from[0], from + 2u + s * most,
                       from[1] * sizeof *sums);
        }
        (void)th_tensor_binary_check_block_sums(path, share, sums, &local);
    }
    if (!th_dist_agree(dist, &local)) {
        g_propagate_error(error, local);
        return FALSE;
    }
    return TRUE;
}

th_sptensor *th_dist_read_tensor(th_dist *dist, const char *path,
                                 const th_tensor_read_options *options,
                                 th_dist_share_info *info, GError **error)
{
    memset(info, 0, sizeof *info);
    if (dist == NULL) {
        th_sptensor *t = th_tensor_read_file(path, options, error);
        if (t != NULL)
            info->nnz_total = t->nnz;
        return t;
    }
    th_tensor_share share;
    GError *local = NULL;
    g_autoptr(th_sptensor) t = th_tensor_binary_read_share(
        path, th_dist_rank(dist), th_dist_size(dist), options, &share, &local);
    if (t == NULL && g_error_matches(local, TH_TENSOR_READER_ERROR,
                                     TH_TENSOR_READER_ERROR_NOT_BINARY)) {
        g_clear_error(&local);
        g_set_error(&local, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_NOT_BINARY,
                    "%s: a run of %u processes reads each one's share of a binary tensor by "
                    "offset, and this is not one; convert it first: tensorhost convert %s "
                    "OUT.tnsb",
                    path, th_dist_size(dist), path);
    }
    if (t != NULL && share.nnz_total < th_dist_size(dist))
        g_set_error(&local, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_EMPTY,
                    "%s: %" G_GUINT64_FORMAT " nonzeros for %u processes: each process "
                    "needs a share of one at least; run at most %" G_GUINT64_FORMAT,
                    path, share.nnz_total, th_dist_size(dist), share.nnz_total);
    if (!th_dist_agree(dist, &local)) {
        th_tensor_share_clear(&share);
        g_propagate_error(error, local);
        return NULL;
    }
    const gboolean checked = check_checksums(dist, path, &share, error);
    th_tensor_share_clear(&share);
    if (!checked)
        return NULL;
    info->nnz_total = share.nnz_total;
    info->first = share.first;
    return g_steal_pointer(&t);
}

gboolean th_dist_tensor_facts(th_dist *dist, const th_sptensor *share, th_tensor_facts *facts,
                              GError **error)
{
    if (dist == NULL) {
        th_tensor_facts_of(share, facts);
        return TRUE;
    }
    memset(facts, 0, sizeof *facts);
    facts->nmodes = share->nmodes;
    memcpy(facts->dims, share->dims, sizeof(th_index) * share->nmodes);
    facts->label = share->label;
    /* The norm as th_sptensor_norm takes it: over the largest value first. */
    double largest = th_sptensor_max_abs(share);
    if (!th_dist_max(dist, &largest, 1, error))
        return FALSE;
    double sum = largest > 0.0 ? th_sptensor_scaled_norm_squared(share, largest) : 0.0;
    uint64_t counts[4] = {share->nnz, share->duplicates_merged, share->explicit_zeros,
                          share->underflowed_values};
    if (!th_dist_sum(dist, &sum, 1, error) || !th_dist_sum_u64(dist, counts, 4, error))
        return FALSE;
    facts->norm = largest > 0.0 ? sqrt(sum) * largest / share->value_scale : 0.0;
    facts->nnz = counts[0];
    facts->duplicates_merged = counts[1];
    facts->explicit_zeros = counts[2];
    facts->underflowed_values = counts[3];
    for (uint32_t m = 0; m < share->nmodes; ++m) {
        g_autofree uint64_t *seen = th_sptensor_slice_bitmap(share, m);
        if (!th_dist_or_u64(dist, seen, th_sptensor_bitmap_words(share->dims[m]), error))
            return FALSE;
        facts->empty_slices[m] = th_sptensor_bitmap_unset(seen, share->dims[m]);
    }
    return TRUE;
}
