/* numpy's .npy format for factor matrices and weights: version 1.0 (the
 * magic "\x93NUMPY", a Python-literal header padded to 64 bytes, then the
 * raw values), little-endian doubles ('<f8'), C order. numpy.load reads it,
 * and so do pyttb, TensorLy and the MATLAB and Julia readers; it is written
 * and read at the speed of the disk, where the text layout formats and
 * parses every number. */
#ifndef TH_NPY_IO_H
#define TH_NPY_IO_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

#include "base/atomic_file.h"

/* Writes `rows` x `cols` doubles (row-major) as a 2-D array, or, with
 * cols == 0, `rows` doubles as a 1-D array, atomically (atomic_file.h). A
 * th_cancel_abort_requested() (a second Ctrl-C while outputs are written)
 * stops it between blocks of 64 MB, or before the file replaces `path`,
 * with a G_IO_ERROR_CANCELLED error naming the file, which is left as it
 * was. */
gboolean th_write_npy(const char *path, const double *data, uint64_t rows, uint32_t cols,
                      GError **error);
/* The same, left finished beside `path` (th_atomic_file_finish), for a set
 * of files installed together (output_set.h); NULL on failure. */
th_atomic_file *th_write_npy_staged(const char *path, const double *data, uint64_t rows,
                                    uint32_t cols, GError **error);

/* Parses a .npy image of `length` bytes holding '<f8' values in C order, 1-D
 * (then *cols = 0) or 2-D, with at least one value; `name` stands for the
 * file in messages. Anything else (an empty array, another dtype, Fortran order, more dimensions, a malformed or
 * truncated header or body) is an error naming the file and what was
 * expected. Returns the values (g_free them). */
double *th_parse_npy(const char *name, const uint8_t *data, size_t length, uint64_t *rows,
                     uint32_t *cols, GError **error);

/* th_parse_npy of the file at `path`. */
double *th_read_npy(const char *path, uint64_t *rows, uint32_t *cols, GError **error);

#endif
