/* libFuzzer target for the tensor reader: any bytes must end in a tensor
 * that satisfies the reader's guarantees or in one error with a message;
 * never a crash, a leak, or an allocation sized by what a header claims.
 * Each input is read twice, in one chunk and split among a few threads:
 * both must give the same tensor, or the same error. A bit of the input
 * (fuzz_read_options) has both reads require values >= 0; it is then read
 * a third time without, and the two ways must agree
 * (fuzz_check_nonnegative). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_checks.h"
#include "tensor/tensor_reader.h"
#include "tensor/tns_header.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_tensor(const th_sptensor *t)
{
    if (t->nmodes < 2 || t->nmodes > TH_MAX_MODES || t->nnz == 0)
        abort();
    if (t->nnz + t->duplicates_merged != t->lines_read)
        abort();
    if (t->explicit_zeros + t->underflowed_values > t->lines_read)
        abort();
    /* A label fits a binary file's note and is UTF-8 (tns_header.h). */
    if (t->label != NULL &&
        (strlen(t->label) > TH_TNS_MAX_LABEL_BYTES || !g_utf8_validate(t->label, -1, NULL)))
        abort();
    fuzz_check_sorted_in_range(t);
}

static void check_error(const GError *error)
{
    if (error == NULL || error->domain != TH_TENSOR_READER_ERROR || error->message == NULL ||
        error->message[0] == '\0')
        abort();
}

/* The same tensor, and the same account of the lines read. */
static void check_same(const th_sptensor *a, const th_sptensor *b)
{
    fuzz_check_same_arrays(a, b);
    if (a->lines_read != b->lines_read || a->duplicates_merged != b->duplicates_merged ||
        a->explicit_zeros != b->explicit_zeros || a->underflowed_values != b->underflowed_values ||
        g_strcmp0(a->label, b->label) != 0)
        abort();
}

static th_sptensor *read_with_threads(uint32_t threads, const uint8_t *data, size_t size,
                                      const th_tensor_read_options *options, GError **error)
{
    th_tensor_reader_set_threads(threads);
    th_sptensor *t =
        th_tensor_read_buffer_full("fuzz.tns", (const char *)data, size, options, error);
    th_tensor_reader_set_threads(0);
    return t;
}

/* With the option: against a read without it. */
static void check_against_plain(const uint8_t *data, size_t size, const th_sptensor *t,
                                const GError *error)
{
    GError *plain_error = NULL;
    th_sptensor *plain = read_with_threads(1, data, size, NULL, &plain_error);
    fuzz_check_nonnegative(t, error, plain);
    if (t != NULL)
        check_same(t, plain);
    th_sptensor_free(plain);
    g_clear_error(&plain_error);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const th_tensor_read_options *options = fuzz_read_options(data, size);
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
        return 0;
    }
    if (error != NULL || split == NULL || split_error != NULL)
        abort();
    check_tensor(t);
    check_same(t, split);
    th_sptensor_free(t);
    th_sptensor_free(split);
    return 0;
}
