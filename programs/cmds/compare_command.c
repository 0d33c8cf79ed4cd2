/* `tensorhost --config` with a [compare] section: run the comparison, print
 * its table and write its outputs. The runner (compare.c) measures; the
 * outputs (compare_output.c) only read what it measured. */
#include "compare/compare.h"
#include "compare_command.h"

#include <stdio.h>

#include "base/cancel.h"
#include "compare/compare_output.h"
#include "base/output_set.h"
#include "base/log.h"

gboolean th_compare_execute(const th_config *config, gboolean *was_interrupted, GError **error)
{
    *was_interrupted = FALSE;
    th_cancel_set_activity("after the current run; what was measured is written");
    g_autoptr(th_compare_result) result = th_compare_run_all(config, error);
    if (!result)
        return FALSE;
    if (th_log_get_level() >= TH_LOG_INFO) { /* -q: the table is in table.txt */
        g_autofree char *table = th_compare_format_table(result);
        fputs(table, stdout);
        fflush(stdout);
    }
    /* The outputs are small: a second signal while they are written lets
     * them finish (a third kills), so no temporary file is left. */
    th_cancel_set_activity("after the outputs are written");
    th_cancel_defer_abort(TRUE);
    g_autoptr(GPtrArray) removed = NULL;
    const gboolean written =
        th_compare_write_outputs(result, config->compare->output_dir, &removed, error);
    th_cancel_defer_abort(FALSE);
    if (!written)
        return FALSE;
    th_log(TH_LOG_INFO, "Output  %s (table.txt, results.csv, geomean.csv, results.json%s)",
           config->compare->output_dir, config->compare->charts ? ", charts" : "");
    th_output_set_log_removed(removed);
    *was_interrupted = result->interrupted;
    if (result->failures->len > 0) {
        const char *first = g_ptr_array_index(result->failures, 0);
        g_autofree char *more =
            result->failures->len == 1
                ? g_strdup("")
                : g_strdup_printf(" (and %u more; see %s/table.txt)",
                                  result->failures->len - 1, config->compare->output_dir);
        /* A stopped comparison exits as stopped (128 + the signal), as batch
         * schedulers expect; its failures are still said. */
        if (result->interrupted) {
            th_log(TH_LOG_WARNING, "comparison failed before it was stopped: %s%s", first, more);
            return TRUE;
        }
        g_set_error(error, TH_COMPARE_ERROR, TH_COMPARE_ERROR_FAILED, "comparison failed: %s%s",
                    first, more);
        return FALSE;
    }
    return TRUE;
}
