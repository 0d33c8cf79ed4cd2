/* The warnings of a CP-ALS run, made in one place for the program (which
 * logs them) and the library (which hands them to its caller with the
 * result, tensorhost_cpd_warning): values the read turned to zero, a rank
 * above what the tensor can have, rank-deficient solves, and a run that
 * ran out of iterations before it converged. Each is a code and a line. */
#ifndef TH_CPD_WARNINGS_H
#define TH_CPD_WARNINGS_H

#include <glib.h>
#include <stdint.h>

#include "cpd/cp_als.h"
#include "tensor/sptensor.h"

/* The values of tensorhost.h's TENSORHOST_WARN_* (api.c asserts it). */
typedef enum th_cpd_warning_code {
    TH_CPD_WARN_RANK_ABOVE_BOUND = 1,   /* rank > th_cpd_rank_bound() */
    TH_CPD_WARN_RANK_DEFICIENT = 2,     /* solves that needed the pseudo-inverse */
    TH_CPD_WARN_NOT_CONVERGED = 3,      /* stopped at max_iters, tolerance > 0 */
    TH_CPD_WARN_UNDERFLOWED_VALUES = 4, /* the read turned values below a double's range to 0 */
    TH_CPD_WARN_NOT_COUNTS = 5,         /* Poisson model: values that are not whole numbers */
    /* Completion: factor rows with no training entry (l2 > 0 makes them 0) */
    TH_CPD_WARN_EMPTY_ROWS = 6,
} th_cpd_warning_code;

typedef struct th_cpd_warning {
    th_cpd_warning_code code;
    char *message; /* one sentence, no newline; control characters as given */
} th_cpd_warning;

/* How the messages name things: the program says "FILE:LINE: cpd.rank" and
 * "cpd.max_iters" (the config's keys), the library "rank" and "max_iters"
 * (its parameters). Borrowed for the call. */
typedef struct th_cpd_warning_terms {
    const char *tensor;    /* the file read, or a phrase ("the tensor") */
    const char *rank;
    const char *max_iters;
    const char *tolerance;
} th_cpd_warning_terms;

/* An empty list of th_cpd_warning that frees its elements. */
GPtrArray *th_cpd_warnings_new(void);

/* Appends what is known before the run, in this order: underflowed values
 * of the read, a `rank` above th_cpd_rank_bound(tensor). */
void th_cpd_tensor_warnings(GPtrArray *warnings, const th_sptensor *tensor, uint32_t rank,
                            const th_cpd_warning_terms *terms);

/* Appends, for the Poisson model, that `non_integer` of the tensor's `nnz`
 * values are not whole numbers (nothing when none is): the model expects
 * counts. */
void th_cpd_count_warnings(GPtrArray *warnings, uint64_t non_integer, uint64_t nnz,
                           const th_cpd_warning_terms *terms);

/* Appends, for completion, that `empty_rows` factor rows (`description`
 * names the first, completion_data.h) have no training entry and are
 * made 0 by the ridge (nothing when there is none). */
void th_cpd_empty_row_warnings(GPtrArray *warnings, uint64_t empty_rows, const char *description,
                               double l2);

/* Appends what the run found, in this order: rank-deficient solves
 * (result->pinv_fallbacks; completion: its singular row solves), and not
 * converged: stopped by max_iters, not
 * by the tolerance or a stop request, with a tolerance above 0 (0 asks for
 * exactly max_iters iterations, so it says nothing); for the Poisson model
 * the measure is the KKT violation. */
void th_cpd_result_warnings(GPtrArray *warnings, const th_cpd_params *params,
                            const th_cpd_result *result, const th_cpd_warning_terms *terms);

/* Each warning from index `from` on through th_log at TH_LOG_WARNING. */
void th_cpd_log_warnings(const GPtrArray *warnings, guint from);

#endif
