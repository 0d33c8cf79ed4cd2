/* libFuzzer target for the binary tensor reader: any bytes must end in a
 * tensor that satisfies the reader's guarantees or in one error with a
 * message; never a crash, a leak, or an allocation sized by what a header
 * claims beyond what the input holds. Each input is read as it is, and
 * again with its checksums recomputed (th_tensor_binary_reseal), since
 * otherwise nearly every mutation stops at a checksum and the checks
 * behind them (sizes, indices, values, order) would go unexplored. Every
 * read is done with one thread and with several: same tensor, or same
 * error. A tensor read is written back and must read as itself. A bit of
 * the input (fuzz_read_options) has the reads require values >= 0; the
 * input is then read once more without, and the two ways must agree
 * (fuzz_check_nonnegative). Each read is also done in shares, as the
 * processes of a run read a file (th_tensor_binary_read_share_buffer,
 * every share of 1 to 4 of them): the shares must agree with the whole
 * read (check_shares). */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_checks.h"
#include "tensor/tensor_binary.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_tensor(const th_sptensor *t)
{
    if (t->nmodes < 2 || t->nmodes > TH_MAX_MODES || t->nnz == 0)
        abort();
    if (t->nnz + t->duplicates_merged != t->lines_read || t->explicit_zeros > t->lines_read ||
        t->underflowed_values != 0)
        abort();
    fuzz_check_sorted_in_range(t);
}

static void check_error(const GError *error)
{
    if (error == NULL || error->domain != TH_TENSOR_READER_ERROR || error->message == NULL ||
        strncmp(error->message, "fuzz.tnsb: ", 11) != 0 || error->message[11] == '\0')
        abort();
}

static th_sptensor *read_with_threads(uint32_t threads, const uint8_t *data, size_t size,
                                      const th_tensor_read_options *options, GError **error)
{
    th_tensor_binary_set_threads(threads);
    th_sptensor *t = th_tensor_binary_read_buffer_full("fuzz.tnsb", data, size, options, error);
    th_tensor_binary_set_threads(0);
    return t;
}

/* A tensor read is written again, and reads as itself (now sorted). */
static void check_round_trip(const th_sptensor *t)
{
    char *bytes = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&bytes, &length);
    if (out == NULL)
        abort();
    GError *error = NULL;
    if (!th_tensor_binary_write_stream(out, "fuzz.tnsb", t, "round trip", &error))
        abort();
    if (fclose(out) != 0)
        abort();
    th_sptensor *back = th_tensor_binary_read_buffer("fuzz.tnsb", bytes, length, &error);
    free(bytes);
    if (back == NULL || back->duplicates_merged != 0)
        abort();
    fuzz_check_same_arrays(t, back);
    th_sptensor_free(back);
}

/* With the option: against a read without it. */
static void check_against_plain(const uint8_t *data, size_t size, const th_sptensor *t,
                                const GError *error)
{
    GError *plain_error = NULL;
    th_sptensor *plain = read_with_threads(1, data, size, NULL, &plain_error);
    fuzz_check_nonnegative(t, error, plain);
    if (t != NULL)
        fuzz_check_same_arrays(t, plain);
    th_sptensor_free(plain);
    g_clear_error(&plain_error);
}

#define MOST_PARTS 4u

static gboolean same_error(const GError *a, const GError *b)
{
    return a != NULL && b != NULL && a->code == b->code && strcmp(a->message, b->message) == 0;
}

/* A nonzero the read refuses: its share's alone (a whole read names the
 * same nonzero, by its number in the file). */
static gboolean is_content_error(const GError *e)
{
    return e->code == TH_TENSOR_READER_ERROR_INDEX_RANGE ||
           e->code == TH_TENSOR_READER_ERROR_VALUE;
}

/* Errors one share can give and another not: its content, or its order
 * (which a whole read does not refuse, it sorts). */
static gboolean is_share_error(const GError *e)
{
    return is_content_error(e) || (e->code == TH_TENSOR_READER_ERROR_CHECKSUM &&
                                   strstr(e->message, " not in order ") != NULL);
}

/* A file a whole read takes but shares do not: version 1, or not flagged
 * sorted. */
static gboolean is_refused_for_shares(const GError *e)
{
    return e->code == TH_TENSOR_READER_ERROR_UNSUPPORTED && strstr(e->message, " shares") != NULL;
}

/* Every share's hashes as the processes join them; each block from exactly
 * one share. */
static uint64_t *join_block_sums(const th_tensor_share *share, uint32_t parts)
{
    const uint64_t blocks = share[0].file_blocks;
    uint64_t *sums = malloc((share[0].nsections * blocks + 1u) * sizeof *sums);
    uint8_t *from = calloc(blocks + 1u, 1);
    if (sums == NULL || from == NULL)
        abort();
    for (uint32_t p = 0; p < parts; ++p) {
        const th_tensor_share *sh = &share[p];
        if (sh->nsections != share[0].nsections || sh->file_blocks != blocks ||
            sh->first_block > blocks || sh->nblocks > blocks - sh->first_block)
            abort();
        for (uint64_t k = 0; k < sh->nblocks; ++k)
            ++from[sh->first_block + k];
        for (uint32_t s = 0; s < sh->nsections; ++s)
            memcpy(sums + s * blocks + sh->first_block, sh->block_sums + s * sh->nblocks,
                   sh->nblocks * sizeof *sums);
    }
    for (uint64_t k = 0; k < blocks; ++k)
        if (from[k] != 1)
            abort();
    free(from);
    return sums;
}

/* Shares that all read: one after the other, the file's nonzeros; their
 * joined hashes pass exactly when the whole read's checksums do, and
 * then the shares are the whole read's tensor. */
static void check_read_shares(th_sptensor *const *t, const th_tensor_share *share,
                              uint32_t parts, const th_sptensor *whole,
                              const GError *whole_error)
{
    uint64_t next = 0, zeros = 0;
    for (uint32_t p = 0; p < parts; ++p) {
        if (share[p].first != next || share[p].nnz_total != share[0].nnz_total ||
            t[p]->nnz != share[p].count || t[p]->lines_read != share[p].count ||
            t[p]->duplicates_merged != 0 || t[p]->nmodes + 1u != share[p].nsections ||
            memcmp(t[p]->dims, t[0]->dims, t[0]->nmodes * sizeof *t[0]->dims) != 0)
            abort();
        if (t[p]->nnz > 0)
            fuzz_check_sorted_in_range(t[p]);
        next += share[p].count;
        zeros += t[p]->explicit_zeros;
    }
    if (next != share[0].nnz_total)
        abort();
    uint64_t *sums = join_block_sums(share, parts);
    GError *error = NULL;
    const gboolean checked =
        th_tensor_binary_check_block_sums("fuzz.tnsb", &share[0], sums, &error);
    free(sums);
    if (!checked) {
        check_error(error);
        if (error->code != TH_TENSOR_READER_ERROR_CHECKSUM || whole != NULL ||
            !same_error(error, whole_error))
            abort();
        g_error_free(error);
        return;
    }
    if (error != NULL || whole == NULL || whole->nnz != next || whole->lines_read != next ||
        whole->explicit_zeros != zeros || whole->nmodes != t[0]->nmodes ||
        memcmp(whole->dims, t[0]->dims, whole->nmodes * sizeof *whole->dims) != 0)
        abort();
    for (uint32_t p = 0; p < parts; ++p) {
        if (t[p]->nnz == 0)
            continue;
        const uint64_t at = share[p].first;
        if (memcmp(whole->values + at, t[p]->values, t[p]->nnz * sizeof(double)) != 0)
            abort();
        for (uint32_t m = 0; m < whole->nmodes; ++m)
            if (memcmp(whole->indices[m] + at, t[p]->indices[m],
                       t[p]->nnz * sizeof(th_index)) != 0)
                abort();
    }
}

/* Every share of 1 to 4 against the whole read of the same input with the
 * same options (`whole`, or `whole_error`). */
static void check_shares(const uint8_t *data, size_t size, const th_tensor_read_options *options,
                         const th_sptensor *whole, const GError *whole_error)
{
    /* From the last byte (the last value's sign and exponent): the first
     * is the magic's in every file that reads. */
    const uint32_t parts = 1u + (size > 0 ? data[size - 1] % MOST_PARTS : 0u);
    th_sptensor *t[MOST_PARTS] = {0};
    th_tensor_share share[MOST_PARTS];
    GError *error[MOST_PARTS] = {0};
    const GError *common = NULL;  /* an error of the file, not of one share */
    const GError *content = NULL; /* the first share's content error */
    uint32_t failed = 0;
    gboolean out_of_order = FALSE;
    th_tensor_binary_set_threads(1u + (uint32_t)(size % 3u));
    for (uint32_t p = 0; p < parts; ++p) {
        t[p] = th_tensor_binary_read_share_buffer("fuzz.tnsb", data, size, p, parts, options,
                                                  &share[p], &error[p]);
        if (t[p] != NULL) {
            if (error[p] != NULL || share[p].block_sums == NULL)
                abort();
            continue;
        }
        check_error(error[p]);
        if (share[p].block_sums != NULL)
            abort();
        ++failed;
        if (common == NULL && !is_share_error(error[p]))
            common = error[p];
        if (content == NULL && is_content_error(error[p]))
            content = error[p];
        out_of_order = out_of_order || (is_share_error(error[p]) && !is_content_error(error[p]));
    }
    th_tensor_binary_set_threads(0);
    /* An error of the file is every share's, and, unless only shares
     * refuse the file, the whole read's. */
    if (common != NULL) {
        for (uint32_t p = 0; p < parts; ++p)
            if (!same_error(error[p], common))
                abort();
        if (!is_refused_for_shares(common) && !same_error(whole_error, common))
            abort();
    }
    /* A nonzero refused by a share is refused by the whole read, which
     * names the same one unless a checksum explains it first. */
    if (content != NULL &&
        (whole != NULL || (whole_error->code != TH_TENSOR_READER_ERROR_CHECKSUM &&
                           !same_error(whole_error, content))))
        abort();
    /* And a nonzero the whole read refuses, a share refuses, unless the
     * whole read refused a sum of repeated coordinates (the file out of
     * order) or the file is refused for shares. */
    if (whole_error != NULL && is_content_error(whole_error) && content == NULL &&
        !out_of_order && (common == NULL || !is_refused_for_shares(common)))
        abort();
    /* What the whole read takes, each share takes, unless it is refused
     * for shares or out of order (sorted by the whole read). */
    if (whole != NULL && (content != NULL || (common != NULL && !is_refused_for_shares(common))))
        abort();
    if (failed == 0)
        check_read_shares(t, share, parts, whole, whole_error);
    for (uint32_t p = 0; p < parts; ++p) {
        th_sptensor_free(t[p]);
        th_tensor_share_clear(&share[p]);
        if (error[p] != NULL)
            g_error_free(error[p]);
    }
}

static void read_and_check(const uint8_t *data, size_t size,
                           const th_tensor_read_options *options)
{
    GError *error = NULL;
    th_sptensor *t = read_with_threads(1, data, size, options, &error);
    GError *split_error = NULL;
    th_sptensor *split =
        read_with_threads(2u + (uint32_t)(size % 3u), data, size, options, &split_error);
    if (options != NULL)
        check_against_plain(data, size, t, error);
    check_shares(data, size, options, t, error);
    if (t == NULL) {
        check_error(error);
        check_error(split_error);
        if (split != NULL || strcmp(error->message, split_error->message) != 0 ||
            error->code != split_error->code)
            abort();
        g_error_free(error);
        g_error_free(split_error);
        return;
    }
    if (error != NULL || split == NULL || split_error != NULL)
        abort();
    check_tensor(t);
    fuzz_check_same_arrays(t, split);
    if (t->lines_read != split->lines_read || t->duplicates_merged != split->duplicates_merged ||
        t->explicit_zeros != split->explicit_zeros)
        abort();
    check_round_trip(t);
    th_sptensor_free(t);
    th_sptensor_free(split);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* From the input as it is: a reseal changes only checksums. */
    const th_tensor_read_options *options = fuzz_read_options(data, size);
    read_and_check(data, size, options);
    uint8_t *resealed = malloc(size > 0 ? size : 1u);
    if (resealed == NULL)
        abort();
    if (size > 0)
        memcpy(resealed, data, size);
    if (th_tensor_binary_reseal(resealed, size))
        read_and_check(resealed, size, options);
    free(resealed);
    return 0;
}
