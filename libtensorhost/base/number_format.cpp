// {fmt} behind number_format.h's C interface. The format is compiled
// (FMT_COMPILE), so no format string is parsed per value; {fmt} rounds
// correctly as glibc's printf does, and writes the sign, the two- or
// three-digit exponent and "nan"/"inf" the way printf does, so the bytes
// match. Nothing here lets an exception escape into C.
#include "base/number_format.h"

#include <cstdlib>

#include <fmt/compile.h>
#include <fmt/format.h>

size_t th_format_rows_bound(uint64_t rows, uint32_t cols)
{
    const uint64_t row_bytes = (uint64_t)cols * TH_FORMAT_VALUE_MAX + 1u; // + '\n'
    if (rows != 0 && row_bytes > SIZE_MAX / rows)
        return SIZE_MAX;
    return (size_t)(rows * row_bytes);
}

size_t th_format_matrix_rows(char *buf, size_t cap, const double *data, uint64_t first_row,
                             uint64_t rows, uint32_t cols)
{
    const size_t bound = th_format_rows_bound(rows, cols);
    if (bound == SIZE_MAX || cap < bound)
        return 0;
    char *out = buf;
    try {
        const double *value = data + first_row * cols;
        for (uint64_t i = 0; i < rows; ++i) {
            for (uint32_t j = 0; j < cols; ++j) {
                out = fmt::format_to(out, FMT_COMPILE("{:+.8e}"), *value++);
                *out++ = ' ';
            }
            *out++ = '\n';
        }
    } catch (...) {
        // Only a failed allocation inside {fmt} (its big-number fallback) can
        // throw: GLib's policy for running out of memory is to end the program.
        std::abort();
    }
    return (size_t)(out - buf);
}
