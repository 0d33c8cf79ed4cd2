/* tensorhost-check-plugin: the conformance checker for MTTKRP backend
 * plugins. See check_plugin.h and docs/plugin-guide.md. */
#include "check_plugin.h"
#include "base/log.h"

#include <stdlib.h>

/* Sanitizer builds keep their own crash reports, which say more. */
#if defined(__SANITIZE_ADDRESS__)
#define TH_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TH_SANITIZED 1
#endif
#endif

int main(int argc, char **argv)
{
    g_autofree char *reference = NULL;
    gint64 seed = 1;
    gboolean quick = FALSE, verbose = FALSE;
    GOptionEntry entries[] = {
        {"reference", 'r', 0, G_OPTION_ARG_STRING, &reference,
         "Plugin to compare against: a name on the plugin search path or a path "
         "(default cpu-reference)", "NAME|PATH"},
        {"seed", 's', 0, G_OPTION_ARG_INT64, &seed,
         "Seed of the generated tensors and factors (default 1)", "N"},
        {"quick", 'q', 0, G_OPTION_ARG_NONE, &quick,
         "Fewer orders and ranks (3, 4 and the largest; ranks 1 and 16)", NULL},
        {"verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose, "Show the plugins' debug messages",
         NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) context = g_option_context_new("PLUGIN.so");
    g_option_context_set_summary(
        context,
        "Checks that a tensorhost backend plugin conforms to the plugin ABI: its entry and\n"
        "info, MTTKRP on generated tensors of 3 to 8 modes against cpu-reference, its\n"
        "als_update, als_sweep and init_factors if present, its error paths and repeated\n"
        "create/destroy, load_tensor and load/unload. One line per check: PASS, FAIL or\n"
        "SKIP.");
    g_option_context_set_description(
        context, "Exit status: 0 all checks passed (some may be skipped), 1 a check failed,\n"
                 "2 a command-line error, 77 the plugin reported no usable device (its\n"
                 "device checks were skipped).");
    g_option_context_add_main_entries(context, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(context, &argc, &argv, &error)) {
        g_printerr("tensorhost-check-plugin: %s\n", error->message);
        return 2;
    }
    if (argc != 2) {
        g_printerr("tensorhost-check-plugin: expected one plugin path, got %d "
                   "(see --help)\n", argc - 1);
        return 2;
    }
    if (seed < 0) {
        g_printerr("tensorhost-check-plugin: --seed %" G_GINT64_FORMAT
                   ": expected a non-negative integer\n", seed);
        return 2;
    }
    th_log_set_level(verbose ? TH_LOG_DEBUG : TH_LOG_WARNING);
#ifndef TH_SANITIZED
    th_check_install_crash_report();
#endif
    th_check_options options = {
        .plugin = argv[1],
        .reference = reference,
        .seed = (uint64_t)seed,
        .quick = quick,
        .out = stdout,
    };
    return th_check_plugin(&options, NULL);
}
