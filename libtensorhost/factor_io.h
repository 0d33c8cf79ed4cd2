/* Factor and lambda files in SPLATT's text layout: one row per line, values
 * as "%+0.8e " (SPLATT's mat_write), written atomically. */
#ifndef TH_FACTOR_IO_H
#define TH_FACTOR_IO_H

#include <glib.h>
#include <stdint.h>
#include "cp_als.h"

gboolean th_write_matrix(const char *path, const double *data, uint64_t rows, uint32_t cols,
                         GError **error);

/* Reads a file th_write_matrix wrote (any whitespace layout with a fixed
 * column count). Returns rows x cols values. */
double *th_read_matrix(const char *path, uint64_t *rows, uint32_t *cols, GError **error);

/* Which files th_write_cpd_factors writes. */
typedef enum th_factor_format {
    TH_FACTORS_TEXT = 1 << 0, /* modeN.mat, lambda.mat */
    TH_FACTORS_NPY = 1 << 1,  /* modeN.npy (dims[N] x rank), lambda.npy (rank,) */
} th_factor_format;

/* "text", "npy" or "both" (output.format) as th_factor_format flags; NULL
 * is "text" (the default); 0 for any other text. */
unsigned th_factor_format_from_name(const char *name);

/* Writes into the existing folder `dir` (see th_make_output_dir) the factor
 * matrices and lambda in the formats `formats` (th_factor_format flags). */
gboolean th_write_cpd_factors(const char *dir, const th_cpd_result *result, unsigned formats,
                              GError **error);

#endif
