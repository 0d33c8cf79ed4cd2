/* libFuzzer target for the .npy reader (npy_io.h): every input is either
 * parsed into exactly rows x max(cols, 1) values or refused with a message
 * naming the file; nothing crashes, leaks or reads past the input. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "output/npy_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly `size` bytes, so ASan sees any read beyond it. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    uint64_t rows = 0;
    uint32_t cols = 0;
    GError *error = NULL;
    double *values = th_parse_npy("fuzz.npy", copy, size, &rows, &cols, &error);
    if (values) {
        if (error)
            abort();
        const uint64_t count = rows * (cols ? cols : 1);
        volatile double sum = 0.0; /* touch every value the parser claims */
        for (uint64_t i = 0; i < count; ++i)
            sum += values[i];
        (void)sum;
        g_free(values);
    } else {
        if (!error || !error->message || strncmp(error->message, "fuzz.npy: ", 10) != 0)
            abort();
        g_error_free(error);
    }
    free(copy);
    return 0;
}
