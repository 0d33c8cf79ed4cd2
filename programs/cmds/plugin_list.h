/* Listing the installed plugins for `tensorhost --list-plugins`. */
#ifndef TH_PLUGIN_LIST_H
#define TH_PLUGIN_LIST_H

#include <glib.h>

/* Prints, for every plugin file on the search path (`config_search_path`
 * first, may be NULL; see th_plugin_search_path), its id, version, ABI,
 * name, description, capabilities and path, or BROKEN with the loader's
 * reason; a name shadowed by an earlier folder is marked so. Returns the
 * exit status: 0, or 1 when no plugin was found (the folders searched go to
 * stderr). */
int th_print_plugin_list(GPtrArray *config_search_path);

#endif
