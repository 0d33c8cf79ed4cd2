/* tensorhost: CP decomposition of sparse tensors through MTTKRP plugins.
 * The command line around the library's run (programs/cmds/run.c). */
#include <locale.h>
#include <stdio.h>
#include <string.h>

#include <glib.h>
#include <tensorhost/plugin.h>

#include "config/config.h"
#include "convert_command.h"
#include "base/log.h"
#include "plugin_list.h"
#include "predict_command.h"
#include "run.h"

enum { EXIT_USAGE = 2 };

typedef struct cli_options {
    char *config_path;
    char **overrides;
    gboolean list_plugins;
    gboolean version;
    gboolean verbose;
    gboolean quiet;
} cli_options;

static void cli_options_clear(cli_options *o)
{
    g_free(o->config_path);
    g_strfreev(o->overrides);
}

static int parse_command_line(int *argc, char ***argv, cli_options *o)
{
    GOptionEntry entries[] = {
        {"config", 'c', 0, G_OPTION_ARG_FILENAME, &o->config_path,
         "Run the job described by FILE (TOML)", "FILE"},
        {"set", 's', 0, G_OPTION_ARG_STRING_ARRAY, &o->overrides,
         "Override a config key, e.g. --set cpd.rank=32 (repeatable)", "KEY=VALUE"},
        {"list-plugins", 0, 0, G_OPTION_ARG_NONE, &o->list_plugins,
         "List the plugins found on the search path and exit", NULL},
        {"version", 'V', 0, G_OPTION_ARG_NONE, &o->version, "Print the version and exit", NULL},
        {"verbose", 'v', 0, G_OPTION_ARG_NONE, &o->verbose, "Print debug detail", NULL},
        {"quiet", 'q', 0, G_OPTION_ARG_NONE, &o->quiet, "Print errors and warnings only", NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) context = g_option_context_new("- sparse CP decomposition");
    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(
        context, "Example: tensorhost --config configs/quickstart.toml --set cpd.rank=8\n"
                 "The config reference is configs/README.md.\n"
                 "Subcommands: tensorhost convert IN OUT converts a tensor between text and\n"
                 "binary (see tensorhost convert --help); tensorhost predict --model DIR\n"
                 "--indices FILE gives the values a run's CP model predicts at FILE's\n"
                 "entries (see tensorhost predict --help).\n");
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(context, argc, argv, &error)) {
        fprintf(stderr, "tensorhost: %s (see --help)\n", error->message);
        return EXIT_USAGE;
    }
    if (*argc > 1) {
        fprintf(stderr, "tensorhost: unexpected argument '%s' (see --help)\n", (*argv)[1]);
        return EXIT_USAGE;
    }
    if (o->quiet && o->verbose) {
        fprintf(stderr, "tensorhost: -q/--quiet and -v/--verbose contradict each other; give "
                        "one (see --help)\n");
        return EXIT_USAGE;
    }
    if (!o->config_path && !o->list_plugins && !o->version) {
        fprintf(stderr, "tensorhost: nothing to do: give --config FILE (see --help)\n");
        return EXIT_USAGE;
    }
    return 0;
}

int main(int argc, char **argv)
{
    setlocale(LC_ALL, "");
    /* Numbers in files and reports must not follow the user's locale. */
    setlocale(LC_NUMERIC, "C");
    /* Subcommands own the rest of the command line. */
    if (argc > 1 && strcmp(argv[1], "convert") == 0)
        return th_convert_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "predict") == 0)
        return th_predict_main(argc - 1, argv + 1);
    cli_options cli = {0};
    int status = parse_command_line(&argc, &argv, &cli);
    if (status != 0) {
        cli_options_clear(&cli);
        return status;
    }
    if (cli.quiet)
        th_log_set_level(TH_LOG_WARNING);
    if (cli.verbose)
        th_log_set_level(TH_LOG_DEBUG);

    if (cli.version) {
        printf("tensorhost %s (plugin ABI %u.%u)\n", TH_VERSION, TH_ABI_VERSION_MAJOR,
               TH_ABI_VERSION_MINOR);
    } else if (cli.list_plugins) {
        g_autoptr(th_config) config = NULL;
        if (cli.config_path) {
            GError *error = NULL;
            config = th_config_load(cli.config_path, (const char *const *)cli.overrides, &error);
            if (!config) {
                cli_options_clear(&cli);
                return th_run_fail(error);
            }
        }
        status = th_print_plugin_list(config ? config->search_path : NULL);
    } else {
        status = th_run_file(cli.config_path, (const char *const *)cli.overrides);
    }
    cli_options_clear(&cli);
    return status;
}
