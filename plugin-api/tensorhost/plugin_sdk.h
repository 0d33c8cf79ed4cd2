/* tensorhost plugin SDK helpers: the few things every backend writes the
 * same way, so that it writes them once. Header-only (static inline): a
 * plugin that includes it exports nothing more than tensorhost_plugin_entry,
 * and a plugin need not use it at all. Part of the SDK, installed beside
 * plugin.h; not part of the ABI (nothing here crosses the plugin boundary),
 * except that the initial-factor generator below is the one implementation
 * of the formula plugin.h defines ("Initial factors"), used by the host too.
 * Compiles as C11, C++ and CUDA (nvcc: the generator is also device code).
 *
 * Thread rules: every function here is reentrant; th_plugin_log calls the
 * host's log() and so follows its rule (only from the thread that called
 * into the plugin, plugin.h). */
#ifndef TENSORHOST_PLUGIN_SDK_H
#define TENSORHOST_PLUGIN_SDK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "plugin.h"

/* Marks the generator below as callable from CUDA kernels too. */
#if defined(__CUDACC__)
#define TH_SDK_HOST_DEVICE __host__ __device__
#else
#define TH_SDK_HOST_DEVICE
#endif

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

/* Whether the host asks a long call to stop (host_services.is_cancelled):
 * FALSE when `host` is NULL or its struct has no is_cancelled(). A call
 * that stops returns TH_ERR_CANCELLED. */
static inline bool th_plugin_stop_requested(const th_host_services *host)
{
    return host != NULL && host->is_cancelled != NULL &&
           host->struct_size >= offsetof(th_host_services, is_cancelled) +
                                    sizeof host->is_cancelled &&
           host->is_cancelled(host->host_data) != 0;
}

/* ---- Initial factors (ABI 1.3) ---------------------------------------------
 * F_mode(row, column) of plugin.h's "Initial factors", bit for bit: a pure
 * function of its arguments, so any thread or device may compute any value
 * in any order. Bulk code takes the row key once per row and then one mix
 * per value:
 *   const uint64_t key = th_initial_factor_row_key(seed, mode, i);
 *   for (uint32_t r = 0; r < rank; r++)
 *       a[i * rank + r] = th_initial_factor_from_row_key(key, r);
 * The column is the key's counter (not row * rank + column), so a factor
 * of rank R is the first R columns of any larger rank's with the same seed. */

/* SplitMix64's finaliser: a bijection of 64-bit words that mixes every
 * input bit into every output bit. */
TH_SDK_HOST_DEVICE static inline uint64_t th_initial_factor_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* SplitMix64's increment, the golden ratio in 64 bits. */
#define TH_INITIAL_FACTOR_GAMMA UINT64_C(0x9e3779b97f4a7c15)

/* The state of row `row` of mode `mode`: mix(mode_key ^ mix(row + 2G)) with
 * mode_key = mix(seed ^ mix(mode + G)). Four mixes, two of them the same
 * for every row of a mode. */
TH_SDK_HOST_DEVICE static inline uint64_t th_initial_factor_row_key(uint64_t seed, uint32_t mode,
                                                                    uint64_t row)
{
    const uint64_t mode_index = th_initial_factor_mix((uint64_t)mode + TH_INITIAL_FACTOR_GAMMA);
    const uint64_t mode_key = th_initial_factor_mix(seed ^ mode_index);
    const uint64_t row_index = th_initial_factor_mix(row + 2u * TH_INITIAL_FACTOR_GAMMA);
    return th_initial_factor_mix(mode_key ^ row_index);
}

/* Column `column` of the row whose key is `row_key`: the top 53 bits of
 * mix(row_key + (column + 1) G), SplitMix64's output column+1, scaled
 * exactly to a double in [0, 1). One mix. */
TH_SDK_HOST_DEVICE static inline double th_initial_factor_from_row_key(uint64_t row_key,
                                                                       uint32_t column)
{
    const uint64_t bits =
        th_initial_factor_mix(row_key + ((uint64_t)column + 1u) * TH_INITIAL_FACTOR_GAMMA);
    return (double)(bits >> 11) * (1.0 / 9007199254740992.0); /* 2^-53 */
}

/* F_mode(row, column) for `seed`: a uniform double in [0, 1). */
TH_SDK_HOST_DEVICE static inline double th_initial_factor_value(uint64_t seed, uint32_t mode,
                                                                uint64_t row, uint32_t column)
{
    return th_initial_factor_from_row_key(th_initial_factor_row_key(seed, mode, row), column);
}

#endif
