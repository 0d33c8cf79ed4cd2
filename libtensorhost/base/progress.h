/* Progress of long phases on a terminal (reading a tensor, building the
 * backend's layouts, a long iteration), as one line on stderr that each
 * update overwrites and th_progress_clear() removes. Silent unless both
 * stdout and stderr are terminals and the log level is INFO or more (so
 * -q, a redirected run and a batch job's log stay clean). */
#ifndef TH_PROGRESS_H
#define TH_PROGRESS_H

#include <glib.h>

/* Decides once (at the first call) whether progress is shown. */
gboolean th_progress_enabled(void);

/* Replaces the progress line with the formatted text (no newline). At most
 * one update per 100 ms reaches the terminal, unless `force`. */
void th_progress_show(gboolean force, const char *format, ...) G_GNUC_PRINTF(2, 3);

/* Erases the progress line, if one is shown. */
void th_progress_clear(void);

#endif
