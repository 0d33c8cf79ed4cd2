#include "base/log.h"

#include "base/cancel.h"
#include "base/message_text.h"

#include <glib.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int32_t log_level = TH_LOG_INFO;
static gint hold_console_on_stop; /* th_log_hold_console_on_stop */

/* The library's caller's handler (tensorhost_set_log_handler), or NULL for
 * the console. The lock is held while the handler runs, so calls never
 * overlap and a handler replaced is no longer running once
 * th_log_set_sink() returns (its data may then be freed); recursive, so a
 * handler may replace itself. `sink_set` lets th_log skip the formatting of
 * lines below the console's level without the lock. */
static GRecMutex sink_lock;
static th_log_sink_fn sink;
static void *sink_data;
static gint sink_set;

static const char *const level_names[] = {"error", "warning", "info", "debug"};

void th_log_set_level(int32_t level) { log_level = level; }
int32_t th_log_get_level(void) { return log_level; }

void th_log_set_sink(th_log_sink_fn fn, void *user_data)
{
    g_rec_mutex_lock(&sink_lock);
    sink = fn;
    sink_data = user_data;
    g_atomic_int_set(&sink_set, fn != NULL);
    g_rec_mutex_unlock(&sink_lock);
}

/* TRUE when a line at `level` goes anywhere. */
static gboolean wanted(int32_t level)
{
    return level <= log_level || g_atomic_int_get(&sink_set);
}

/* Hands the line to the sink; FALSE when there is none. */
static gboolean to_sink(int32_t level, const char *prefix, const char *escaped)
{
    g_rec_mutex_lock(&sink_lock);
    const th_log_sink_fn fn = sink;
    if (fn) {
        g_autofree char *line = g_strconcat(prefix, escaped, NULL);
        fn(level, line, sink_data);
    }
    g_rec_mutex_unlock(&sink_lock);
    return fn != NULL;
}

/* Every line stays one line: control characters in a message (a plugin's,
 * a file name's) are escaped. */
static void log_line(int32_t level, const char *prefix, const char *text)
{
    if (!wanted(level))
        return;
    g_autofree char *escaped = th_escape_control(text);
    if (to_sink(level, prefix, escaped) || level > log_level)
        return;
    if (level == TH_LOG_INFO && g_atomic_int_get(&hold_console_on_stop) &&
        th_cancel_requested())
        return;
    /* Info goes to stdout with the run's output; problems and debug detail go
     * to stderr so they survive redirecting the report lines. */
    FILE *stream = level == TH_LOG_INFO ? stdout : stderr;
    if (level == TH_LOG_INFO)
        fprintf(stream, "%s%s\n", prefix, escaped);
    else
        fprintf(stream, "tensorhost: %s: %s%s\n",
                level_names[level < 0 ? 0 : (level > 3 ? 3 : level)], prefix, escaped);
    fflush(stream);
}

void th_log_hold_console_on_stop(int on) { g_atomic_int_set(&hold_console_on_stop, on != 0); }

void th_log(int32_t level, const char *format, ...)
{
    if (!wanted(level))
        return;
    va_list args;
    va_start(args, format);
    g_autofree char *text = g_strdup_vprintf(format, args);
    va_end(args);
    log_line(level, "", text);
}

static void services_log(void *host_data, int32_t level, const char *message)
{
    (void)host_data;
    log_line(level, "[plugin] ", message ? message : "(null)");
}

static int32_t services_is_cancelled(void *host_data)
{
    (void)host_data;
    return th_cancel_stop_now() ? 1 : 0;
}

/* A run of one process: dist/dist_services.c has a run of several's. */
static uint32_t services_one_process(void *host_data, uint32_t *rank)
{
    (void)host_data;
    *rank = 0;
    return 1;
}

static th_status services_broadcast_alone(void *host_data, void *data, uint64_t bytes,
                                          char *err)
{
    (void)host_data, (void)data, (void)bytes, (void)err;
    return TH_OK;
}

static th_status services_reduce_max_alone(void *host_data, uint64_t *values, uint64_t n,
                                           char *err)
{
    (void)host_data, (void)values, (void)n, (void)err;
    return TH_OK;
}

th_host_services th_host_services_make(void)
{
    th_host_services services = {
        .struct_size = (uint32_t)sizeof(th_host_services),
        .host_data = NULL,
        .log = services_log,
        .is_cancelled = services_is_cancelled,
        .processes = services_one_process,
        .broadcast = services_broadcast_alone,
        .reduce_max = services_reduce_max_alone,
    };
    return services;
}
