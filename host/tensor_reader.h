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
} th_tensor_reader_error;

typedef struct th_tensor_read_options {
    /* Called from time to time with bytes consumed so far and the total
     * (0 when unknown, e.g. for gzip). NULL for none. */
    void (*progress)(uint64_t done, uint64_t total, void *user_data);
    void *user_data;
} th_tensor_read_options;

/* Reads `path` (a plain file is memory-mapped and parsed by several threads;
 * gzip and pipes are streamed); format from content (a first line "sptensor" selects the
 * 0-based header variant) and compression from the gzip magic bytes. Returns
 * a tensor whose duplicates are merged, or NULL with `error` set; messages
 * start with "PATH:LINE: ". */
th_sptensor *th_tensor_read_file(const char *path, const th_tensor_read_options *options,
                                 GError **error);

/* Same, from memory; `name` stands for the path in messages. */
th_sptensor *th_tensor_read_buffer(const char *name, const char *data, size_t length,
                                   GError **error);

/* Writes FROSTT .tns (1-based), atomically (PATH.tmp-XXXXXX in the same
 * directory, fsync, rename); gzip-compressed when PATH ends in ".gz". Values
 * are written so that reading them back gives the same doubles. For
 * generators and tests. */
gboolean th_tensor_write_tns(const th_sptensor *t, const char *path, GError **error);

/* Same, with `comment` (may be NULL; may hold several lines) written first as
 * "# " comment lines. */
gboolean th_tensor_write_tns_full(const th_sptensor *t, const char *path, const char *comment,
                                  GError **error);

#endif
