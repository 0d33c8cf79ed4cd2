/* Factor matrices as text, in SPLATT's layout (mat_write): every value as
 * printf's "%+0.8e" followed by one space, and '\n' after each row. The
 * bytes are exactly those fprintf writes in the C locale (NaN and infinity
 * included: "+nan", "-inf"), formatted by {fmt} instead, several times
 * faster and free of stdio's locking and locale lookups. {fmt} is compiled
 * in header-only, so the library carries no runtime dependency on it. */
#ifndef TH_NUMBER_FORMAT_H
#define TH_NUMBER_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The longest text of one value with its separator: "-1.23456789e-308 ".
 * Values with a two-digit exponent (1e-99 to 1e99 in magnitude) take one
 * byte less. */
#define TH_FORMAT_VALUE_MAX 17u

/* Bytes that rows x cols values formatted by th_format_matrix_rows can
 * take at most; SIZE_MAX when that does not fit a size_t. */
size_t th_format_rows_bound(uint64_t rows, uint32_t cols);

/* Formats rows [first_row, first_row + rows) of the row-major matrix `data`
 * (cols values a row) into `buf`, without a terminating NUL. Returns the
 * bytes written, or 0 (writing nothing) when `cap` is below
 * th_format_rows_bound(rows, cols). Safe to call from several threads. */
size_t th_format_matrix_rows(char *buf, size_t cap, const double *data, uint64_t first_row,
                             uint64_t rows, uint32_t cols);

#ifdef __cplusplus
}
#endif

#endif
