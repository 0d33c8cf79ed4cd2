/* libFuzzer target for the binary tensor reader: any bytes must end in a
 * tensor that satisfies the reader's guarantees or in one error with a
 * message; never a crash, a leak, or an allocation sized by what a header
 * claims beyond what the input holds. Each input is read as it is, and
 * again with its checksums recomputed (th_tensor_binary_reseal), since
 * otherwise nearly every mutation stops at a checksum and the checks
 * behind them (sizes, indices, values, order) would go unexplored. Every
 * read is done with one thread and with several: same tensor, or same
 * error. A tensor read is written back and must read as itself. */
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
                                      GError **error)
{
    th_tensor_binary_set_threads(threads);
    th_sptensor *t = th_tensor_binary_read_buffer("fuzz.tnsb", data, size, error);
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

static void read_and_check(const uint8_t *data, size_t size)
{
    GError *error = NULL;
    th_sptensor *t = read_with_threads(1, data, size, &error);
    GError *split_error = NULL;
    th_sptensor *split = read_with_threads(2u + (uint32_t)(size % 3u), data, size, &split_error);
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
    read_and_check(data, size);
    uint8_t *resealed = malloc(size > 0 ? size : 1u);
    if (resealed == NULL)
        abort();
    if (size > 0)
        memcpy(resealed, data, size);
    if (th_tensor_binary_reseal(resealed, size))
        read_and_check(resealed, size);
    free(resealed);
    return 0;
}
