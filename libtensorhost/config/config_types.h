/* What a run file says, in the forms the layers above the TOML loader
 * read: the config's error domain, and a plugin's options (the scalars of
 * [backend.options] and the [backend.options.NAME] tables) with the merge
 * that gives a plugin its own. Nothing here reads TOML, so the public
 * library, which takes options as text, links no TOML parser. */
#ifndef TH_CONFIG_TYPES_H
#define TH_CONFIG_TYPES_H

#include <glib.h>

#define TH_CONFIG_ERROR (th_config_error_quark())
GQuark th_config_error_quark(void);

typedef enum {
    TH_CONFIG_ERROR_IO,          /* cannot read the file */
    TH_CONFIG_ERROR_SYNTAX,      /* not valid TOML */
    TH_CONFIG_ERROR_UNKNOWN_KEY, /* key not in the schema (message suggests the nearest) */
    TH_CONFIG_ERROR_TYPE,        /* value of the wrong TOML type */
    TH_CONFIG_ERROR_RANGE,       /* value out of its allowed range */
    TH_CONFIG_ERROR_MISSING,     /* required key absent */
    TH_CONFIG_ERROR_OVERRIDE,    /* malformed --set argument */
    TH_CONFIG_ERROR_CONFLICT,    /* keys that cannot go together (e.g. in a comparison) */
} th_config_error;

/* What a config value is, for reports that keep TOML's types. */
typedef enum th_config_value_kind {
    TH_CONFIG_VALUE_STRING, /* strings, paths, plugin names */
    TH_CONFIG_VALUE_INTEGER,
    TH_CONFIG_VALUE_NUMBER,
    TH_CONFIG_VALUE_BOOLEAN,
    TH_CONFIG_VALUE_STRING_LIST, /* backend.search_path, a sweep's values */
    TH_CONFIG_VALUE_NUMBER_LIST, /* cpd.l1 given per mode */
} th_config_value_kind;

/* One [backend.options] entry, its value rendered as text for the plugin
 * ABI. */
typedef struct th_config_option {
    char *key;
    char *value;               /* as text: what the plugin receives */
    th_config_value_kind kind; /* the TOML type it was written with */
} th_config_option;

/* One [backend.options.NAME] table: options for the plugin whose id is NAME
 * alone, so one run file can carry options for each backend that "auto"
 * may pick. */
typedef struct th_config_plugin_options {
    char *plugin;       /* NAME */
    GPtrArray *options; /* th_config_option*, file order */
    char *where;        /* "FILE:LINE:COLUMN" of the table, for messages */
} th_config_plugin_options;

/* The options a plugin with id `plugin_id` gets: `common` (the scalars of
 * [backend.options]; may be NULL) then the entries of the table in `tables`
 * (th_config_plugin_options*; may be NULL) named `plugin_id`, whose keys
 * replace common ones of the same name. Borrowed th_config_option pointers;
 * free the array only. */
GPtrArray *th_config_options_for_plugin(GPtrArray *common, GPtrArray *tables,
                                        const char *plugin_id);

#endif
