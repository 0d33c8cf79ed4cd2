/* What every tensor reader shares: the options of a read and the error
 * domain of a tensor file that cannot be read (or written). The text reader
 * (tensor_reader.h) and the binary one (tensor_binary.h) both use them, and
 * th_tensor_read_file picks between the two by content; keeping these here
 * lets the binary reader sit below the text reader without an include
 * cycle. */
#ifndef TH_TENSOR_READ_TYPES_H
#define TH_TENSOR_READ_TYPES_H

#include <glib.h>
#include <stdint.h>

#include "tensor/sptensor.h"

#define TH_TENSOR_READER_ERROR (th_tensor_reader_error_quark())
GQuark th_tensor_reader_error_quark(void);

typedef enum {
    TH_TENSOR_READER_ERROR_IO,          /* cannot open/read/decompress */
    TH_TENSOR_READER_ERROR_EMPTY,       /* no nonzero in the file */
    TH_TENSOR_READER_ERROR_COLUMNS,     /* wrong number of fields on a line */
    TH_TENSOR_READER_ERROR_NUMBER,      /* a field is not a number of the expected kind */
    TH_TENSOR_READER_ERROR_INDEX_RANGE, /* 0 in a 1-based file, > 2^32-1, or beyond header dims */
    TH_TENSOR_READER_ERROR_VALUE,       /* NaN or Inf; a negative value where the read
                                           requires values >= 0 (require_nonnegative) */
    TH_TENSOR_READER_ERROR_HEADER,      /* malformed sptensor, tensorhost or binary header */
    TH_TENSOR_READER_ERROR_ORDER,       /* fewer than 2 or more than TH_MAX_MODES modes */
    TH_TENSOR_READER_ERROR_NOT_TEXT,    /* a NUL byte, a carriage return inside a line, or a
                                           line longer than TH_TENSOR_MAX_LINE_BYTES */
    TH_TENSOR_READER_ERROR_CANCELLED,   /* th_cancel_requested() turned true (Ctrl-C) */
    /* The binary format (tensor_binary.h): */
    TH_TENSOR_READER_ERROR_NOT_BINARY,  /* no THTENSOR magic: not a binary tensor */
    TH_TENSOR_READER_ERROR_UNSUPPORTED, /* another major version (binary format or tensorhost
                                           header), index width or value type */
    TH_TENSOR_READER_ERROR_TRUNCATED,   /* not the size its header gives (cut, or extra bytes) */
    TH_TENSOR_READER_ERROR_CHECKSUM,    /* a section's checksum does not match: corrupt */
    TH_TENSOR_READER_ERROR_MEMORY,      /* the host has not the memory for the arrays */
} th_tensor_reader_error;

typedef struct th_tensor_read_options {
    /* Called from time to time with bytes consumed so far and the total
     * (0 when unknown, e.g. for gzip). NULL for none. */
    void (*progress)(uint64_t done, uint64_t total, void *user_data);
    void *user_data;
    /* A value below zero is an error (TH_TENSOR_READER_ERROR_VALUE) at the
     * first one in file order, before the tensor is assembled: a text file's
     * names its line, "PATH:LINE: column C: value '-3' is negative: REASON",
     * a binary file's its nonzero, "PATH: nonzero K of N at (I, J, K)
     * (1-based): value -3 is negative: REASON". -0.0 (written "-0",
     * or a negative literal that underflows) is not negative. For a model
     * that needs counts (CP-APR): its check of the merged tensor
     * (th_cp_apr_check_tensor) could only name the merged entry. */
    gboolean require_nonnegative;
    /* Why, for the message (e.g. "the Poisson model needs counts >= 0");
     * NULL: "values must be >= 0". */
    const char *nonnegative_reason;
    /* Dims the coordinates must lie within besides the file's own, each at
     * least 1: a model's, whose values at them are asked for (NULL: none). Only a file
     * of `bound_nmodes` modes is held to them; one of another order reads
     * as if none were given, and its caller, who knows what the order
     * should be, says so. An index beyond them is an error
     * (TH_TENSOR_READER_ERROR_INDEX_RANGE) at the first one in file order,
     * as one beyond the file's own dims is: a text file's names its line,
     * "PATH:LINE: column C: index I is out of range: BOUND_OWNER has mode C
     * size D (indices 1 to D)", a binary file's its nonzero. A check of
     * every line as it is parsed: after the read, the line is gone. */
    const th_index *bound_dims;
    uint32_t bound_nmodes;
    /* Whose dims they are, for the message, e.g. "the model in DIR"; NULL:
     * "the given bound". */
    const char *bound_owner;
} th_tensor_read_options;

/* Whether a read's bound_dims apply to a file of `nmodes` modes (options
 * may be NULL). */
gboolean th_tensor_read_bounded(const th_tensor_read_options *options, uint32_t nmodes);

/* The read's bound_owner, or its default. */
const char *th_tensor_read_bound_owner(const th_tensor_read_options *options);

/* The reason text of a read's require_nonnegative (options may be NULL):
 * NULL when the option is off. */
const char *th_tensor_read_nonnegative_reason(const th_tensor_read_options *options);

/* th_sptensor_sort_and_merge for a reader: a sum of duplicates beyond the
 * range of a double is TH_TENSOR_READER_ERROR_VALUE, "NAME: ..." naming
 * the coordinates (1-based, as in .tns files). */
gboolean th_tensor_read_merge(th_sptensor *t, const char *name, GError **error);

#endif
