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

/* Writes into the existing folder `dir` (see th_make_output_dir) mode1.mat ... modeN.mat and
 * lambda.mat (one value per line). */
gboolean th_write_cpd_factors(const char *dir, const th_cpd_result *result, GError **error);

#endif
