#include "cpd/cpd_warnings.h"

#include <math.h>
#include <stdarg.h>

#include "base/log.h"
#include "base/message_text.h"

static void warning_free(gpointer data)
{
    th_cpd_warning *warning = data;
    g_free(warning->message);
    g_free(warning);
}

GPtrArray *th_cpd_warnings_new(void) { return g_ptr_array_new_with_free_func(warning_free); }

static void add(GPtrArray *warnings, th_cpd_warning_code code, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static void add(GPtrArray *warnings, th_cpd_warning_code code, const char *format, ...)
{
    th_cpd_warning *warning = g_new0(th_cpd_warning, 1);
    warning->code = code;
    va_list args;
    va_start(args, format);
    warning->message = g_strdup_vprintf(format, args);
    va_end(args);
    g_ptr_array_add(warnings, warning);
}

void th_cpd_tensor_warnings(GPtrArray *warnings, const th_sptensor *tensor, uint32_t rank,
                            const th_cpd_warning_terms *terms)
{
    /* A user who wrote 1e-400 should learn it became 0. */
    if (tensor->underflowed_values > 0)
        add(warnings, TH_CPD_WARN_UNDERFLOWED_VALUES,
            "%s: %" G_GUINT64_FORMAT " %s too small for a double (below about "
            "4.9e-324) and %s read as zero; they are kept as stored entries",
            terms->tensor, tensor->underflowed_values,
            th_plural(tensor->underflowed_values, "value is", "values are"),
            th_plural(tensor->underflowed_values, "was", "were"));
    const uint64_t bound = th_cpd_rank_bound(tensor);
    if (rank > bound)
        add(warnings, TH_CPD_WARN_RANK_ABOVE_BOUND,
            "%s %u is above the largest rank this tensor can have (%" G_GUINT64_FORMAT
            ": at most its nonzero count and, for each mode, the product of the other "
            "modes' lengths); the extra components are undetermined, the solves will be "
            "rank deficient and the fit will stop improving",
            terms->rank, rank, bound);
}

void th_cpd_count_warnings(GPtrArray *warnings, uint64_t non_integer, uint64_t nnz,
                           const th_cpd_warning_terms *terms)
{
    if (non_integer == 0)
        return;
    add(warnings, TH_CPD_WARN_NOT_COUNTS,
        "%s: values are not counts (integers): %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
        " %s not whole numbers, and the Poisson model expects counts",
        terms->tensor, non_integer, nnz, th_plural(non_integer, "value is", "values are"));
}

void th_cpd_empty_row_warnings(GPtrArray *warnings, uint64_t empty_rows, const char *description,
                               double l2)
{
    if (empty_rows == 0)
        return;
    add(warnings, TH_CPD_WARN_EMPTY_ROWS,
        "%s %s no training entry: the ridge (l2 = %g) makes %s factor %s 0, and the "
        "model predicts 0 for every entry in %s",
        description ? description : "some rows", empty_rows == 1 ? "has" : "have", l2,
        empty_rows == 1 ? "its" : "their", empty_rows == 1 ? "row" : "rows",
        empty_rows == 1 ? "it" : "them");
}

void th_cpd_result_warnings(GPtrArray *warnings, const th_cpd_params *params,
                            const th_cpd_result *result, const th_cpd_warning_terms *terms)
{
    if (result->model == TH_MODEL_COMPLETION && result->completion.singular_rows > 0)
        add(warnings, TH_CPD_WARN_RANK_DEFICIENT,
            "%" G_GUINT64_FORMAT " row %s singular (rows with fewer independent training "
            "entries than the rank, and no ridge) and kept their previous values; set a "
            "ridge (l2 > 0) or lower the rank",
            result->completion.singular_rows,
            th_plural(result->completion.singular_rows, "solve was", "solves were"));
    if (result->pinv_fallbacks > 0)
        add(warnings, TH_CPD_WARN_RANK_DEFICIENT,
            "%u normal-equation %s rank deficient and used the pseudo-inverse; "
            "the rank may exceed what the tensor supports",
            result->pinv_fallbacks,
            th_plural(result->pinv_fallbacks, "solve was", "solves were"));
    /* A run that ran out of iterations says so: its fit may still be rising. */
    if (!result->converged && !result->interrupted && params->tolerance > 0.0 &&
        result->iterations->len > 0) {
        const th_cpd_iteration *last =
            &g_array_index(result->iterations, th_cpd_iteration, result->iterations->len - 1);
        if (result->model == TH_MODEL_COMPLETION && result->completion.held_out > 0) {
            add(warnings, TH_CPD_WARN_NOT_CONVERGED,
                "not converged: stopped at %s = %u with the held-out RMSE still improving by "
                "%s %g or more; raise max_iters or loosen the tolerance",
                terms->max_iters, params->max_iters, terms->tolerance, params->tolerance);
            return;
        }
        if (result->model == TH_MODEL_POISSON) {
            add(warnings, TH_CPD_WARN_NOT_CONVERGED,
                "not converged: stopped at %s = %u with KKT violation %.3e, above %s %g; "
                "raise max_iters or loosen the tolerance",
                terms->max_iters, params->max_iters, last->kkt_violation, terms->tolerance,
                params->tolerance);
            return;
        }
        add(warnings, TH_CPD_WARN_NOT_CONVERGED,
            "not converged: stopped at %s = %u with |fit change| %.3e, above %s %g; raise "
            "max_iters or loosen the tolerance",
            terms->max_iters, params->max_iters, fabs(last->delta), terms->tolerance,
            params->tolerance);
    }
}

void th_cpd_log_warnings(const GPtrArray *warnings, guint from)
{
    for (guint i = from; i < warnings->len; ++i) {
        const th_cpd_warning *warning = g_ptr_array_index(warnings, i);
        th_log(TH_LOG_WARNING, "%s", warning->message);
    }
}
