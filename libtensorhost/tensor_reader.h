/* Reading sparse tensors from text: FROSTT .tns (1-based), .tns.gz, and the
 * Tensor Toolbox / pyttb / GenTen "sptensor" variant (header, 0-based). */
#ifndef TH_TENSOR_READER_H
#define TH_TENSOR_READER_H

#include <glib.h>
#include <stdio.h>
#include "sptensor.h"

#define TH_TENSOR_READER_ERROR (th_tensor_reader_error_quark())
GQuark th_tensor_reader_error_quark(void);

typedef enum {
    TH_TENSOR_READER_ERROR_IO,          /* cannot open/read/decompress */
    TH_TENSOR_READER_ERROR_EMPTY,       /* no nonzero in the file */
    TH_TENSOR_READER_ERROR_COLUMNS,     /* wrong number of fields on a line */
    TH_TENSOR_READER_ERROR_NUMBER,      /* a field is not a number of the expected kind */
    TH_TENSOR_READER_ERROR_INDEX_RANGE, /* 0 in a 1-based file, > 2^32-1, or beyond header dims */
    TH_TENSOR_READER_ERROR_VALUE,       /* NaN or Inf */
    TH_TENSOR_READER_ERROR_HEADER,      /* malformed sptensor header */
    TH_TENSOR_READER_ERROR_ORDER,       /* fewer than 2 or more than TH_MAX_MODES modes */
    TH_TENSOR_READER_ERROR_NOT_TEXT,    /* a NUL byte, a carriage return inside a line, or a
                                           line longer than TH_TENSOR_MAX_LINE_BYTES */
    TH_TENSOR_READER_ERROR_CANCELLED,   /* th_cancel_requested() turned true (Ctrl-C) */
} th_tensor_reader_error;

/* The longest line accepted, in bytes, without its line ending. The longest
 * meaningful line (64 indices of 10 digits, a 17-digit value, blanks) takes
 * under 1 KB; a longer one means the input is not a tensor (a binary file,
 * /dev/zero, a decompression bomb), and reading it as one line would cost
 * memory and time without bound. The limit applies to every input: mapped
 * files, streams (gzip, pipes) and buffers. */
#define TH_TENSOR_MAX_LINE_BYTES ((size_t)1 << 20)

/* Plain files and buffers are parsed by one thread per online processor,
 * each given at least this many bytes, and at most this many threads. */
#define TH_TENSOR_READER_MIN_BYTES_PER_THREAD ((size_t)4 << 20)
#define TH_TENSOR_READER_MAX_THREADS 256u

typedef struct th_tensor_read_options {
    /* Called from time to time with bytes consumed so far and the total
     * (0 when unknown, e.g. for gzip). NULL for none. */
    void (*progress)(uint64_t done, uint64_t total, void *user_data);
    void *user_data;
} th_tensor_read_options;

/* Reads `path` (a plain file is memory-mapped and parsed by several threads;
 * gzip and pipes are streamed); format from content (a first line "sptensor" selects the
 * 0-based header variant) and compression from the gzip magic bytes. A
 * leading UTF-8 byte-order mark is skipped. Returns a tensor whose duplicates
 * are merged, or NULL with `error` set; messages start with "PATH:LINE: ", or
 * with "PATH: " for what concerns the whole file: a file that shrank while it
 * was mapped (TH_TENSOR_READER_ERROR_IO), and a read stopped because
 * th_cancel_requested() turned true (TH_TENSOR_READER_ERROR_CANCELLED, checked
 * before reading, every few MB of each thread, and before sorting). */
th_sptensor *th_tensor_read_file(const char *path, const th_tensor_read_options *options,
                                 GError **error);

/* Same, from memory; `name` stands for the path in messages. */
th_sptensor *th_tensor_read_buffer(const char *name, const char *data, size_t length,
                                   GError **error);

/* For tests and benchmarks: parse plain files and buffers with exactly
 * `threads` threads (at most TH_TENSOR_READER_MAX_THREADS), however small the
 * input; 0 restores the default. Process-wide; set it while no read runs.
 * The result never depends on the thread count. */
void th_tensor_reader_set_threads(uint32_t threads);

#endif
