/* tensorhost plugin SDK helpers: the few things every backend writes the
 * same way, so that it writes them once. Header-only (static inline): a
 * plugin that includes it exports nothing more than tensorhost_plugin_entry,
 * and a plugin need not use it at all. Part of the SDK, installed beside
 * plugin.h; not part of the ABI (nothing here crosses the plugin boundary).
 *
 * Thread rules: every function here is reentrant; th_plugin_log calls the
 * host's log() and so follows its rule (any thread). */
#ifndef TENSORHOST_PLUGIN_SDK_H
#define TENSORHOST_PLUGIN_SDK_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "plugin.h"

#if defined(__GNUC__) || defined(__clang__)
#define TH_PLUGIN_PRINTF(format_index, first_arg) \
    __attribute__((format(printf, format_index, first_arg)))
#else
#define TH_PLUGIN_PRINTF(format_index, first_arg)
#endif

/* The ABI's error convention in one call: formats the message into the
 * host's `err` buffer (TH_ERROR_SIZE bytes, cut to fit, always terminated)
 * and returns `status`, so a failure reads
 *   return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "mode %u: ...", mode); */
static inline th_status th_plugin_fail(char *err, th_status status, const char *format, ...)
    TH_PLUGIN_PRINTF(3, 4);
static inline th_status th_plugin_fail(char *err, th_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(err, TH_ERROR_SIZE, format, args);
    va_end(args);
    return status;
}

/* The out-struct rule (see plugin.h): writes the plugin's `full` struct of
 * `full_size` bytes into the host's `dst`, but only the bytes both sides
 * know: the host's struct_size (dst's first uint32_t) may come from an older
 * or a newer header. dst's struct_size is left as the host set it. */
static inline void th_plugin_copy_out(void *dst, const void *full, size_t full_size)
{
    uint32_t host_size;
    memcpy(&host_size, dst, sizeof host_size);
    const size_t n = host_size < full_size ? host_size : full_size;
    if (n > sizeof host_size)
        memcpy((char *)dst + sizeof host_size, (const char *)full + sizeof host_size,
               n - sizeof host_size);
}

/* One log line through the host's services (printf-style, cut at 511
 * bytes). Does nothing when `host` is NULL or its struct, from an older
 * host, has no log(). */
static inline void th_plugin_log(const th_host_services *host, int32_t level,
                                 const char *format, ...) TH_PLUGIN_PRINTF(3, 4);
static inline void th_plugin_log(const th_host_services *host, int32_t level,
                                 const char *format, ...)
{
    if (host == NULL || host->log == NULL ||
        host->struct_size < offsetof(th_host_services, log) + sizeof host->log)
        return;
    char line[512];
    va_list args;
    va_start(args, format);
    vsnprintf(line, sizeof line, format, args);
    va_end(args);
    host->log(host->host_data, level, line);
}

#endif
