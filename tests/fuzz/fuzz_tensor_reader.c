/* libFuzzer target for the tensor reader: any bytes must end in a tensor
 * that satisfies the reader's guarantees or in one error with a message;
 * never a crash, a leak, or an allocation sized by what a header claims. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "tensor_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_tensor(const th_sptensor *t)
{
    if (t->nmodes < 2 || t->nmodes > TH_MAX_MODES || t->nnz == 0)
        abort();
    if (t->nnz + t->duplicates_merged != t->lines_read)
        abort();
    for (uint64_t i = 0; i < t->nnz; ++i) {
        int order = i == 0 ? -1 : 0; /* sorted, and no coordinate twice */
        for (uint32_t m = 0; m < t->nmodes; ++m) {
            if (t->indices[m][i] >= t->dims[m])
                abort();
            if (order == 0 && t->indices[m][i - 1] != t->indices[m][i])
                order = t->indices[m][i - 1] < t->indices[m][i] ? -1 : 1;
        }
        if (order >= 0)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    GError *error = NULL;
    th_sptensor *t = th_tensor_read_buffer("fuzz.tns", (const char *)data, size, &error);
    if (t == NULL) {
        if (error == NULL || error->domain != TH_TENSOR_READER_ERROR ||
            error->message == NULL || error->message[0] == '\0')
            abort();
        g_error_free(error);
        return 0;
    }
    if (error != NULL)
        abort();
    check_tensor(t);
    th_sptensor_free(t);
    return 0;
}
