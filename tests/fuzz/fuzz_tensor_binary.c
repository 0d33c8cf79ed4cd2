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
 * (fuzz_check_nonnegative). */
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
