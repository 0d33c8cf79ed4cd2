/* Factor and lambda files in SPLATT's text layout: one row per line, values
 * as "%+0.8e " (SPLATT's mat_write), written atomically; or as numpy .npy
 * files (npy_io.h). */
#ifndef TH_FACTOR_IO_H
#define TH_FACTOR_IO_H

#include <glib.h>
#include <stdint.h>
#include "base/atomic_file.h"
#include "cpd/cp_als.h"
#include "base/output_set.h"

/* Writes rows x cols values (row-major) as text (number_format.h), byte for
 * byte what fprintf(out, "%+0.8e ", v) per value and '\n' per row would
 * write, formatted on one thread per online processor, atomically
 * (atomic_file.h). A long write shows its progress (progress.h). A
 * th_cancel_abort_requested() (a second Ctrl-C while outputs are written)
 * stops it between blocks with a G_IO_ERROR_CANCELLED error naming the file,
 * which is left as it was; a first stop request does not, since it asks to
 * stop after the outputs are written. */
gboolean th_write_matrix(const char *path, const double *data, uint64_t rows, uint32_t cols,
                         GError **error);
/* The same, left finished beside `path` (th_atomic_file_finish), for a set
 * of files installed together (output_set.h); NULL on failure. */
th_atomic_file *th_write_matrix_staged(const char *path, const double *data, uint64_t rows,
                                       uint32_t cols, GError **error);

/* Past this many formatting threads the disk is the limit. */
#define TH_WRITE_MATRIX_MAX_THREADS 16u

/* Tests and benchmarks: th_write_matrix formats with `threads` threads (at
 * most TH_WRITE_MATRIX_MAX_THREADS; 1: the calling thread alone) in blocks
 * of `block_rows` rows; 0 for either restores its default (one thread per
 * online processor, up to that maximum; about 4 MB of text a block).
 * Process-wide; set it while no write runs. The bytes written never depend
 * on either. */
void th_write_matrix_set_parallelism(uint32_t threads, uint64_t block_rows);

/* Reads a file th_write_matrix wrote (any whitespace layout with a fixed
 * column count; blank lines are skipped), in one pass. Returns rows x cols
 * values; an error names file:line and what was expected. */
double *th_read_matrix(const char *path, uint64_t *rows, uint32_t *cols, GError **error);

/* Which files th_write_cpd_factors writes. */
typedef enum th_factor_format {
    TH_FACTORS_TEXT = 1 << 0, /* modeN.mat, lambda.mat */
    TH_FACTORS_NPY = 1 << 1,  /* modeN.npy (dims[N] x rank), lambda.npy (rank,) */
} th_factor_format;

/* "text", "npy" or "both" (output.format) as th_factor_format flags; NULL
 * is "text" (the default); 0 for any other text. */
unsigned th_factor_format_from_name(const char *name);

/* The names of the files a run writes into its output folder, as a
 * regular expression (output_set.h), and the one that indexes them. */
#define TH_RUN_OUTPUT_NAMES "^((mode[1-9][0-9]*|lambda)\\.(mat|npy)|report\\.json)$"
#define TH_RUN_REPORT_NAME "report.json"

/* Writes the factor matrices and lambda in the formats `formats`
 * (th_factor_format flags) into `set`'s folder (an existing one: see
 * th_make_output_dir) as finished files of the set, to be installed with
 * the rest of the run's outputs. */
gboolean th_stage_cpd_factors(th_output_set *set, const th_cpd_result *result, unsigned formats,
                              GError **error);

/* th_stage_cpd_factors and the install, for a folder of factors alone: the
 * previous run's files there, its report.json too, make way. */
gboolean th_write_cpd_factors(const char *dir, const th_cpd_result *result, unsigned formats,
                              GError **error);

#endif
