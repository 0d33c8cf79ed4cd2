/* What a single run prints on the console (through log.h, so -q silences
 * it): the tensor read, the backend, one line per iteration, a progress line
 * inside long phases on a terminal, and the timing summary. Reads the
 * result and the backend's facts (backend.h), never the live plugin. */
#ifndef TH_CONSOLE_REPORT_H
#define TH_CONSOLE_REPORT_H

#include <glib.h>
#include <stdint.h>

#include "plugin/backend.h"
#include "cpd/cp_als.h"
#include "tensor/sptensor.h"
#include "tensor/tensor_facts.h"

/* Progress of a long read (th_tensor_read_options.progress). */
void th_console_read_progress(uint64_t done, uint64_t total, void *user_data);

/* "Tensor PATH", order, dims, nnz, density, duplicates, empty slices, the
 * read time, and a warning about values written as zero (the warnings of
 * cpd_warnings.h are the caller's to log). */
void th_console_tensor_summary(const th_tensor_facts *tensor, const char *path, double seconds);

/* "Backend ID VERSION (PATH)", device, memory, details, preprocessing. */
void th_console_backend_summary(const th_backend_facts *facts);

/* The per-iteration line and the progress inside an iteration longer than
 * a second: th_cpd_callbacks.iteration and .mode, with a
 * th_console_iteration_display as user_data. */
typedef struct th_console_iteration_display {
    uint32_t iteration;
    gint64 started;
    /* > 0: iteration lines at least this many microseconds apart (the
     * first always shown), the others left to report.json: under mpirun,
     * which stops reading the console when it forwards a stop, a process
     * printing thousands of lines a second could fill the pipe in that
     * moment and never reach the stop. */
    gint64 min_line_gap;
    gint64 last_line;
} th_console_iteration_display;
gboolean th_console_iteration(const th_cpd_iteration *iteration, void *user_data);
void th_console_iteration_progress(uint32_t iteration, uint32_t mode, uint32_t nmodes,
                                   void *user_data);
/* th_cpd_callbacks.phase: the phase on the progress line. */
void th_console_phase(const char *what, void *user_data);

/* "Completion ...": what a completion run fits (its training entries, the
 * held-out ones, l2, the stopping rule; `constraints` as the run's
 * summary phrases them). */
void th_console_completion_plan(const th_cpd_params *params, const th_sptensor *train,
                                const th_sptensor *held_out, const char *constraints);

/* "Result ...", then the timing table (read, preprocessing, MTTKRP per mode
 * with the backend's time and scheme, the update path's times, algebra,
 * total) and how often als_sweep stopped early (rank-deficient solves are
 * cpd_warnings.h's). */
void th_console_run_summary(const th_backend_facts *facts, const th_cpd_result *result,
                            double read_seconds, double total_seconds);

#endif
