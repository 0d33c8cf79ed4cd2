/* Private to the config module: what config.c (the schema walker, --set,
 * the listing) and config_compare.c (the [compare] section) both need. The
 * schema types, the load context and the helpers for messages and option
 * values; nothing else of the module includes it. */
#ifndef TH_CONFIG_INTERNAL_H
#define TH_CONFIG_INTERNAL_H

#include "config/config.h"
#include "config/toml_shim.h"

#include <stddef.h>
#include <string.h>

/* ---- The schema ------------------------------------------------------- */

typedef enum {
    TH_KEY_STRING,    /* non-empty string */
    TH_KEY_PATH,      /* non-empty string naming a file or folder: resolved */
    TH_KEY_PLUGIN,    /* a plugin name, or a path (has '/' or ends in .so): resolved */
    TH_KEY_PATH_LIST, /* array of non-empty strings, each resolved: GPtrArray of char* */
    TH_KEY_INTEGER,   /* stored as uint32_t or uint64_t, by the field's size */
    TH_KEY_NUMBER,    /* float or integer, stored as double */
    TH_KEY_BOOLEAN,   /* stored as gboolean */
    TH_KEY_OPTIONS,   /* table of scalars rendered as text: GPtrArray of th_config_option* */
    TH_KEY_SECTION,   /* a table with its own schema, whose fields are in the same struct */
    TH_KEY_OBJECT,    /* a table whose fields live in a struct of its own (`object`),
                         allocated when the table appears: the field is its pointer */
    TH_KEY_TABLE_ARRAY, /* an array of tables ([[compare.backend]]): GPtrArray of `object`
                           structs, each walked with the element schema in `section` */
    TH_KEY_SWEEP,     /* table of non-empty arrays of scalars: GPtrArray of th_config_sweep* */
    TH_KEY_CHOICES,   /* one of `choices`, or a non-empty array of them: th_config_choices */
    TH_KEY_NUMBERS,   /* a number as TH_KEY_NUMBER's, or a non-empty array of them:
                         th_config_numbers */
} th_key_type;

typedef struct th_table_schema th_table_schema;
typedef struct load_context load_context;

/* The struct behind a TH_KEY_OBJECT or TH_KEY_TABLE_ARRAY element. */
typedef struct {
    size_t size;
    GDestroyNotify free;
    size_t where_offset; /* of a char* "FILE:LINE:COLUMN" field, or SIZE_MAX */
    /* Checks one element once its keys are assigned (cross-key rules,
     * defaults that depend on other keys); may be NULL. `name` is its dotted
     * name, e.g. "compare.backend[1]". */
    gboolean (*finish)(const load_context *ctx, const th_toml_node *node, void *object,
                       const char *name, GError **error);
} th_object_type;

typedef struct {
    const char *name;
    th_key_type type;
    size_t offset; /* of the field in th_config */
    size_t size;   /* of the field, for integers */
    gboolean required;
    gboolean optional_in_compare; /* required unless the config has [compare] */
    int64_t min, max;  /* TH_KEY_INTEGER */
    double min_number; /* TH_KEY_NUMBER, TH_KEY_NUMBERS */
    const char *default_string;
    int64_t default_integer;
    double default_number;
    gboolean default_boolean;
    const char *const *choices;     /* TH_KEY_STRING: the accepted values, NULL-terminated */
    /* TH_KEY_OPTIONS: sub-tables [KEY.NAME] hold options for plugin NAME
     * alone (th_config.plugin_option_tables). */
    gboolean per_plugin_tables;
    const th_table_schema *section; /* TH_KEY_SECTION, TH_KEY_OBJECT, TH_KEY_TABLE_ARRAY */
    const th_object_type *object;   /* TH_KEY_OBJECT, TH_KEY_TABLE_ARRAY */
    const char *doc;
} th_key_schema;

struct th_table_schema {
    const char *name; /* dotted, "" for the document root */
    const th_key_schema *keys;
    size_t n_keys;
    gboolean is_array; /* the elements of an array of tables: [[name]] in messages */
};

#define TH_FIELD_OF(type, member)                                                              \
    .offset = offsetof(type, member), .size = sizeof(((type *)NULL)->member)
#define TH_TABLE(table_name, keys) {table_name, keys, G_N_ELEMENTS(keys), FALSE}
#define TH_ARRAY_TABLE(table_name, keys) {table_name, keys, G_N_ELEMENTS(keys), TRUE}

/* `target` is th_config, or the struct of a TH_KEY_OBJECT / array element. */
static inline void *field_at(void *target, const th_key_schema *key)
{
    return (char *)target + key->offset;
}

static inline char *dotted_name(const char *prefix, const char *name)
{
    return prefix && *prefix ? g_strconcat(prefix, ".", name, NULL) : g_strdup(name);
}

static inline gboolean has_nul(const th_toml_node *node)
{
    return strlen(node->string_value) != node->string_length;
}

static inline gboolean is_plugin_path(const char *plugin)
{
    return strchr(plugin, '/') != NULL || g_str_has_suffix(plugin, ".so");
}

/* ---- Loading, messages and option values (config.c) ---------------------- */

struct load_context {
    const char *source_name; /* the config file as given, for messages */
    char *config_dir;        /* absolute: the base of relative paths in the file */
    char *current_dir;       /* the base of relative paths in --set overrides */
    GHashTable *where;       /* dotted key -> location, handed to th_config */
};

/* "FILE:LINE:COLUMN", "FILE" when the position is unknown, or "--set ARG"
 * for nodes grafted from the command line. */
char *th_config_location(const load_context *ctx, const th_toml_node *node, gboolean at_key);
/* "WHERE: key 'KEY': expected EXPECTED, found WHAT NODE IS". */
void th_config_value_error(const load_context *ctx, GError **error, th_config_error code,
                           const th_toml_node *node, const char *key, const char *expected);
/* A user string quoted for a message: escaped, and cut when long. */
char *th_config_quote_for_message(const char *text);
/* A scalar's value as the text a plugin receives; NULL for a non-scalar. */
char *th_config_render_option_value(const th_toml_node *node);
th_config_value_kind th_config_option_value_kind(const th_toml_node *node);
void th_config_option_free(gpointer data); /* a th_config_option */

/* ---- [compare] (config_compare.c) ------------------------------------- */

extern const th_table_schema th_config_compare_schema;
extern const th_object_type th_config_compare_type; /* th_compare_config */
void th_config_compare_free(gpointer data);         /* a th_compare_config, or NULL */

/* TH_KEY_SWEEP values, which only [[compare.backend]] has. */
void th_config_sweep_free(gpointer data); /* a th_config_sweep */
gboolean th_config_assign_sweep(const load_context *ctx, const th_toml_node *node,
                                const th_key_schema *key, const char *name, void *target,
                                GError **error);

/* The rules of [compare] that span tables: run once the whole document is
 * read, since [compare] may come before the [tensor] or [cpd] it relies on.
 * TRUE at once without a [compare] section. */
gboolean th_config_finish_compare(const load_context *ctx, const th_toml_node *root,
                                  th_config *config, GError **error);

#endif
