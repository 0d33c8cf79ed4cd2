/* Reading sparse tensors from text: FROSTT .tns (1-based), .tns.gz, and the
 * Tensor Toolbox / pyttb / GenTen "sptensor" variant (header, 0-based). The
 * entry points also take the binary format (tensor_binary.h), which they
 * recognize by its magic bytes and hand to its reader. */
#ifndef TH_TENSOR_READER_H
#define TH_TENSOR_READER_H

#include <glib.h>
#include <stdio.h>
#include "tensor/sptensor.h"
#include "tensor/tensor_read_types.h" /* th_tensor_read_options, TH_TENSOR_READER_ERROR */

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

/* Reads `path` (a plain file is memory-mapped and parsed by several threads;
 * gzip and pipes are streamed); format from content (a first line "sptensor" selects the
 * 0-based header variant) and compression from the gzip magic bytes. A
 * leading UTF-8 byte-order mark is skipped. The tensorhost header
 * (tns_header.h) gives the dims and the label when the file has it. Returns a tensor whose duplicates
 * are merged, or NULL with `error` set; messages start with "PATH:LINE: ", or
 * with "PATH: " for what concerns the whole file: a file that shrank while it
 * was mapped (TH_TENSOR_READER_ERROR_IO), and a read stopped because
 * th_cancel_requested() turned true (TH_TENSOR_READER_ERROR_CANCELLED, checked
 * before reading, every few MB of each thread, and before sorting). With
 * options->require_nonnegative, the first value below zero in file order is
 * an error on its line (th_tensor_read_options); whatever the thread count,
 * the error reported is the one on the earliest line. */
th_sptensor *th_tensor_read_file(const char *path, const th_tensor_read_options *options,
                                 GError **error);

/* Same, from memory; `name` stands for the path in messages. The _full
 * variant takes options (its progress total is `length`, or 0 for gzip). */
th_sptensor *th_tensor_read_buffer(const char *name, const char *data, size_t length,
                                   GError **error);
th_sptensor *th_tensor_read_buffer_full(const char *name, const char *data, size_t length,
                                        const th_tensor_read_options *options, GError **error);

/* For tests and benchmarks: parse plain files and buffers with exactly
 * `threads` threads (at most TH_TENSOR_READER_MAX_THREADS), however small the
 * input; 0 restores the default. Process-wide; set it while no read runs.
 * The result never depends on the thread count. */
void th_tensor_reader_set_threads(uint32_t threads);

#endif
