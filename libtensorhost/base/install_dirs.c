#define _GNU_SOURCE /* dladdr */
#include "base/install_dirs.h"

#include <dlfcn.h>
#include <glib.h>
#include <stdint.h>
#include <string.h>

char *th_installed_dir(const char *below_libdir, const char *below_prefix)
{
    Dl_info where;
    if (dladdr((void *)(uintptr_t)th_installed_dir, &where) && where.dli_fname &&
        strstr(where.dli_fname, ".so")) {
        g_autofree char *module = g_canonicalize_filename(where.dli_fname, NULL);
        g_autofree char *libdir = g_path_get_dirname(module);
        return g_build_filename(libdir, below_libdir, NULL);
    }
    g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
    if (exe == NULL)
        return NULL;
    g_autofree char *bindir = g_path_get_dirname(exe);
    g_autofree char *joined = g_build_filename(bindir, "..", below_prefix, NULL);
    return g_canonicalize_filename(joined, NULL);
}
