#include "log.h"

#include "cancel.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int32_t log_level = TH_LOG_INFO;

static const char *const level_names[] = {"error", "warning", "info", "debug"};

void th_log_set_level(int32_t level) { log_level = level; }
int32_t th_log_get_level(void) { return log_level; }

static void log_line(int32_t level, const char *prefix, const char *text)
{
    if (level > log_level)
        return;
    /* Info goes to stdout with the run's output; problems and debug detail go
     * to stderr so they survive redirecting the report lines. */
    FILE *stream = level == TH_LOG_INFO ? stdout : stderr;
    if (level == TH_LOG_INFO)
        fprintf(stream, "%s%s\n", prefix, text);
    else
        fprintf(stream, "tensorhost: %s: %s%s\n",
                level_names[level < 0 ? 0 : (level > 3 ? 3 : level)], prefix, text);
    fflush(stream);
}

void th_log(int32_t level, const char *format, ...)
{
    if (level > log_level)
        return;
    char buffer[2048];
    va_list args;
    va_start(args, format);
    vsnprintf(buffer, sizeof buffer, format, args);
    va_end(args);
    log_line(level, "", buffer);
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

th_host_services th_host_services_make(void)
{
    th_host_services services = {
        .struct_size = (uint32_t)sizeof(th_host_services),
        .host_data = NULL,
        .log = services_log,
        .is_cancelled = services_is_cancelled,
    };
    return services;
}
