/* The plugin conformance checker behind `tensorhost-check-plugin`.
 *
 * Loads a plugin the way the host does (th_plugin_load), validates its entry
 * and info, runs MTTKRP (and als_update when present) on generated tensors of
 * 3 to 8 modes, several ranks and skews, every mode, against the cpu-reference
 * plugin, and drives its error paths and its create/destroy, load_tensor and
 * load/unload cycles. Each check prints one line to `out`:
 *   PASS name [(detail)]
 *   FAIL name: why
 *   SKIP name: why
 * and a final "N passed, N failed, N skipped" line. */
#ifndef TH_CHECK_PLUGIN_H
#define TH_CHECK_PLUGIN_H

#include <glib.h>
#include <stdint.h>
#include <stdio.h>

/* Exit status when the plugin's create() reported TH_ERR_NO_DEVICE: every
 * device check was skipped (ctest's usual SKIP_RETURN_CODE). */
#define TH_CHECK_EXIT_NO_DEVICE 77

typedef struct th_check_options {
    const char *plugin;    /* path of the plugin under test (a name is looked up like the host does) */
    const char *reference; /* NULL: "cpu-reference" on th_plugin_search_path(NULL); or a name or path */
    uint64_t seed;         /* tensors and factors are generated from it */
    gboolean quick;        /* fewer orders, ranks and repetitions */
    FILE *out;             /* where the check lines go (NULL: stdout) */
} th_check_options;

typedef struct th_check_counts {
    unsigned passed;
    unsigned failed;
    unsigned skipped;
    gboolean no_device; /* create() said TH_ERR_NO_DEVICE */
} th_check_counts;

/* Runs every check. Returns the exit status: 0 when nothing failed, 1 when a
 * check failed, TH_CHECK_EXIT_NO_DEVICE when nothing failed but the device
 * checks were skipped for want of a device. `counts` may be NULL. */
int th_check_plugin(const th_check_options *options, th_check_counts *counts);

/* Makes a crash inside the plugin (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT)
 * print "FAIL <check in progress>: crashed (signal N)" on `out`'s descriptor
 * and exit 1, instead of dying silently. For the command-line tool; not for
 * sanitizer builds, whose own reports are more useful. */
void th_check_install_crash_report(void);

#endif
