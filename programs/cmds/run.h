/* The program's runs, as a library function: `tensorhost --config FILE`
 * is th_run_file(FILE, the --set overrides). */
#ifndef TH_RUN_H
#define TH_RUN_H

#include <glib.h>

/* Loads the config at `config_path` with `overrides` ("key=value", NULL-
 * terminated; may be NULL) and runs it: one CP-ALS with its outputs, or the
 * [compare] comparison. Installs the SIGINT/SIGTERM handlers (cancel.h).
 * Returns the process exit status: 0; 1 a run error (one "tensorhost:
 * error: ..." line on stderr); 2 a malformed --set; 130/143 stopped by
 * SIGINT/SIGTERM. */
int th_run_file(const char *config_path, const char *const *overrides);

/* Prints `error` as the run's one error line (control characters escaped),
 * frees it and returns its exit status (2 for a malformed --set, else 1). */
int th_run_fail(GError *error);

#endif
