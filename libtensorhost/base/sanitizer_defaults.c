/* Sanitizer defaults for programs that load plugins: plugin_loader.c calls
 * th_sanitizer_defaults_link(), so every such program links this file. In a
 * build without AddressSanitizer it holds nothing but that empty function. */
#include "base/sanitizer_defaults.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TH_ASAN_BUILD 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TH_ASAN_BUILD 1
#endif

void th_sanitizer_defaults_link(void)
{
}

#if defined(TH_ASAN_BUILD)
/* LeakSanitizer (clang 14) misreads glibc >= 2.32's dynamic TLS and crashes
 * at exit ("Tracer caught signal 11") once a dlopen()ed OpenMP runtime has
 * started threads (google/sanitizers#1322, #1342); not tracking dynamic TLS
 * avoids that, at the price of reporting the OpenMP runtime's per-thread
 * blocks, which only its dynamic TLS points to: suppressed by library name.
 * An ASAN_OPTIONS / LSAN_OPTIONS in the environment still takes precedence. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "intercept_tls_get_addr=0";
}

/* An MPI library (a distributed run's shim, dist.h) keeps its buffers
 * and its runtime's until the process ends, by design: suppressed by
 * library name too. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libomp.so\nleak:libgomp.so\nleak:libmpi.so\nleak:libopen-pal.so\n"
           "leak:libopen-rte.so\nleak:libpmix.so\nleak:libmpich.so\nleak:libhwloc.so\n"
           "leak:libucs.so\nleak:libucp.so\nleak:libevent\n";
}
#endif
