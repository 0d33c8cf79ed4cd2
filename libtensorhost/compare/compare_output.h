/* What a comparison leaves behind: the terminal table (also table.txt), the
 * same numbers as CSV (results.csv: one row per tensor, backend and mode,
 * plus an "all" row; geomean.csv: one row per backend) and JSON
 * (results.json), and the charts (charts.h). Every file is written
 * atomically. */
#ifndef TH_COMPARE_OUTPUT_H
#define TH_COMPARE_OUTPUT_H

#include <glib.h>
#include <json-glib/json-glib.h>

#include "compare/compare_result.h"

/* The table printed after a comparison: per tensor, one line per backend
 * (schemes, MTTKRP time per mode and for all modes, speedup, preprocessing,
 * memory, and for cpd the fit and seconds per iteration), then the failures
 * and, over several tensors, the geometric-mean speedups. A time that was
 * not measured is "-" in the table, an empty cell in the CSV and null in
 * the JSON: a backend's own timer it does not have, or, in a cpd job, the
 * host's per-MTTKRP times of a backend that runs whole iterations through
 * als_sweep (then the host's "all modes" total and speedup are missing too;
 * compare those by timer = "backend" or by s/iter). */
char *th_compare_format_table(const th_compare_result *result);

/* The CSV texts (RFC 4180: comma-separated, quoted where needed, CRLF-free
 * "\n" line ends, a header row first). */
char *th_compare_format_csv(const th_compare_result *result);
char *th_compare_format_geomean_csv(const th_compare_result *result);

/* The JSON document of results.json. */
JsonNode *th_compare_json(const th_compare_result *result);

/* The names of the files a comparison writes into its folder, as a
 * regular expression (output_set.h), and the one that indexes them. */
#define TH_COMPARE_OUTPUT_NAMES                                                               \
    "^(table\\.txt|results\\.csv|geomean\\.csv|results\\.json|"                             \
    "(time-total|time-per-mode|memory)\\.(png|svg))$"
#define TH_COMPARE_INDEX_NAME "results.json"

/* Creates `dir` and writes table.txt, results.csv, geomean.csv,
 * results.json and (unless compare.output.charts is false) the charts, as
 * one set (output_set.h): the previous comparison's files there make way.
 * `removed` (may be NULL) receives the names of the previous files this
 * comparison did not write (its charts, when this one draws none). */
gboolean th_compare_write_outputs(const th_compare_result *result, const char *dir,
                                  GPtrArray **removed, GError **error);

/* "12.3 ms", "850 µs", "1.20 s" (three digits); "-" when negative (not measured). */
char *th_compare_format_seconds(double seconds);
/* "12.5 MiB", "1.25 GiB", "512 B". */
char *th_compare_format_bytes(uint64_t bytes);

#endif
