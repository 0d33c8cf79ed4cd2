#include "base/progress.h"

#include <stdio.h>
#include <unistd.h>

#include "base/log.h"

static int enabled = -1; /* -1: not decided yet */
static gboolean line_shown = FALSE;
static gint64 last_update = 0;

gboolean th_progress_enabled(void)
{
    if (enabled < 0)
        enabled = isatty(STDOUT_FILENO) && isatty(STDERR_FILENO) &&
                  th_log_get_level() >= TH_LOG_INFO;
    return enabled != 0;
}

void th_progress_show(gboolean force, const char *format, ...)
{
    if (!th_progress_enabled())
        return;
    const gint64 now = g_get_monotonic_time();
    if (!force && line_shown && now - last_update < 100000)
        return;
    last_update = now;
    va_list args;
    va_start(args, format);
    g_autofree char *text = g_strdup_vprintf(format, args);
    va_end(args);
    fprintf(stderr, "\r\033[K%s", text);
    fflush(stderr);
    line_shown = TRUE;
}

void th_progress_clear(void)
{
    if (!line_shown)
        return;
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
    line_shown = FALSE;
}
