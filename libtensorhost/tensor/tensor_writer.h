/* Writing sparse tensors as FROSTT .tns text, for generators
 * (tensorhost-synth) and tests; tensor_reader.h reads them back. */
#ifndef TH_TENSOR_WRITER_H
#define TH_TENSOR_WRITER_H

#include <glib.h>
#include "tensor/sptensor.h"

/* Writes FROSTT .tns (1-based), atomically (PATH.tmp-XXXXXX in the same
 * directory, fsync, rename); gzip-compressed when PATH ends in ".gz". The
 * lines start with the tensorhost header (tns_header.h: t's dims, and its
 * label when it has one), which FROSTT readers skip as comments and
 * tensor_reader.h honours. Values are written so that reading them back
 * gives the same doubles. A label longer than TH_TNS_MAX_LABEL_BYTES is an
 * error (TH_TENSOR_READER_ERROR_IO, nothing written). Errors are
 * TH_TENSOR_READER_ERROR_IO (tensor_reader.h: one domain for a tensor file's
 * I/O, read or written), with messages that start with "PATH: "; a stop
 * request (th_cancel_requested, polled between 1 MB blocks) abandons the
 * write with TH_TENSOR_READER_ERROR_CANCELLED, PATH as it was. */
gboolean th_tensor_write_tns(const th_sptensor *t, const char *path, GError **error);

/* Same, with `comment` (may be NULL; may hold several lines) written after
 * the header as "# " comment lines (none of which may read as a header line,
 * "tensorhost KEY: ..."). */
gboolean th_tensor_write_tns_full(const th_sptensor *t, const char *path, const char *comment,
                                  GError **error);

/* The same text (plain, never gzip) to the open descriptor `fd`, such as
 * standard output or a pipe, where no temporary file can stand in for the
 * destination: written as it is formatted, not atomically, and neither
 * synced nor closed. `name` stands for the destination in messages
 * ("NAME: cannot write: ..."). A stop request (th_cancel_requested) ends
 * the write with TH_TENSOR_READER_ERROR_CANCELLED, part of the text
 * written. */
gboolean th_tensor_write_tns_to_fd(const th_sptensor *t, int fd, const char *name,
                                   const char *comment, GError **error);

#endif
