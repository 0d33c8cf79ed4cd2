/* A/B comparison of backends ([compare] in the config): every backend runs
 * on the same tensors with the same initial factors, one after another in
 * this process (each closed before the next opens, so one backend's memory
 * never limits the next). Each backend's MTTKRP of every mode is first
 * checked against the baseline's; only then is it timed: warm-up runs, then
 * `repeats` timed runs, median with min and max, by the host's wall clock
 * around each call and by the backend's own timer (device events on a GPU).
 *
 * Every backend is opened once before any tensor is read: a plugin that
 * refuses its options or cannot be loaded is an error before anything is
 * measured. A backend whose plugin is not installed or finds no device
 * (TH_ERR_NO_DEVICE), or that cannot hold a tensor (TH_ERR_UNSUPPORTED,
 * TH_ERR_OUT_OF_MEMORY from load_tensor), is skipped with the reason; the
 * baseline cannot be skipped (that is an error). A backend that disagrees
 * with the baseline beyond the tolerance, or whose call fails otherwise, is
 * a failed comparison: it is not timed, the others still run, the outputs
 * are written with status "failed", and the run ends in an error naming the
 * backend, tensor, mode and error. */
#ifndef TH_COMPARE_H
#define TH_COMPARE_H

#include <glib.h>

#include "plugin/backend.h"
#include "compare/compare_result.h"
#include "config/config.h"
#include "cpd/cp_als.h"
#include "tensor/sptensor.h"

#define TH_COMPARE_ERROR (th_compare_error_quark())
GQuark th_compare_error_quark(void);

typedef enum {
    TH_COMPARE_ERROR_BASELINE, /* the baseline cannot run: nothing to compare against */
    TH_COMPARE_ERROR_FAILED,   /* a backend disagreed with the baseline or failed */
} th_compare_error;

/* Runs the comparison `config->compare` describes. Returns NULL only when
 * there is nothing to report: a backend's plugin refuses its options or
 * cannot be loaded, or a tensor file cannot be opened (both checked first,
 * before any tensor is read; the plugin's error prefixed with the
 * backend's table and label), a tensor cannot be read, or the baseline
 * cannot run. Mismatches and failed backends are recorded in the result
 * (failures, per-run status), not returned as errors. Once stopped
 * (Ctrl-C, SIGTERM: result->interrupted), the runs not done, and every
 * run of the tensors not yet read, are skipped; what was measured stays. */
th_compare_result *th_compare_run_all(const th_config *config, GError **error);

/* Opens the backend, loads `tensor` at `rank` and sets `factors` (one per
 * mode, dims[m] x rank), as the comparison does for every backend. */
th_backend *th_compare_open_backend(const th_compare_backend_config *backend,
                                    GPtrArray *search_path, const th_sptensor *tensor,
                                    uint32_t rank, double *const *factors, GError **error);

/* A CP-ALS run's seconds per iteration: the median of its iterations' wall
 * times (each iteration's MTTKRPs, updates and fit), so that neither what
 * a run does once (the tensor's norm, the initial factors, collecting and
 * arranging the final ones) nor a first iteration's one-off costs stand
 * in it; total_seconds when no iteration completed. */
double th_compare_iteration_seconds(const th_cpd_result *cpd);

#endif
