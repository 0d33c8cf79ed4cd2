/* `tensorhost --config` with a [compare] section: the comparison run
 * (compare/compare.h), its table printed, its outputs written. */
#ifndef TH_COMPARE_COMMAND_H
#define TH_COMPARE_COMMAND_H

#include <glib.h>

#include "config/config.h"

/* Runs the comparison, prints the table, writes the outputs into
 * compare.output.dir (compare_command.c: the runner itself writes nothing). FALSE with `error` when the comparison failed (after
 * writing what it has, marked failed) or could not run. `*interrupted` is
 * set when Ctrl-C or SIGTERM stopped it (outputs written, no error; a
 * failure before the stop is logged as a warning). */
gboolean th_compare_execute(const th_config *config, gboolean *interrupted, GError **error);

#endif
