/* A plain C view of a TOML document, parsed by toml++ (the only C++ in the
 * project). The tree keeps what the config loader needs for its messages:
 * every node's kind, key, value and source line/column, children in file
 * order. No toml++ or C++ types cross this header. */
#ifndef TH_TOML_SHIM_H
#define TH_TOML_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TH_TOML_TABLE,
    TH_TOML_ARRAY,
    TH_TOML_STRING,
    TH_TOML_INTEGER,
    TH_TOML_FLOAT,
    TH_TOML_BOOLEAN,
    /* Dates and times: parsed, but no config key accepts them. `type_name`
     * says which one ("date", "time", "date-time") and `string_value` holds
     * its TOML text. */
    TH_TOML_UNSUPPORTED,
} th_toml_kind;

typedef struct th_toml_node th_toml_node;
struct th_toml_node {
    th_toml_kind kind;
    char *key; /* NULL for the root and for array elements */

    char *string_value;   /* STRING (may hold NULs: see string_length), UNSUPPORTED */
    size_t string_length; /* bytes in string_value, not counting the final NUL */
    int64_t integer_value;
    double float_value;
    int boolean_value;
    const char *type_name; /* static: "table", "array", "string", ..., "date-time" */

    /* 1-based; 0 when unknown (nodes built by the caller). */
    uint32_t line, column;         /* where the value starts */
    uint32_t key_line, key_column; /* where its key starts */

    /* NULL for nodes of the parsed document. The caller labels nodes it
     * grafts in (e.g. a --set argument) so messages can name their origin. */
    char *origin;

    th_toml_node **children; /* TABLE: in file order; ARRAY: in array order */
    size_t n_children;
    size_t children_capacity;
};

/* A parse failure. `line`/`column` are 1-based, 0 when unknown. */
typedef struct th_toml_error {
    char *message; /* toml++'s description; free with th_toml_error_clear */
    uint32_t line;
    uint32_t column;
} th_toml_error;

/* Parses `length` bytes of `text` (need not be NUL-terminated). Returns the
 * root table, or NULL with `*error` filled (free it with th_toml_error_clear).
 * Never throws. */
th_toml_node *th_toml_parse(const char *text, size_t length, th_toml_error *error);

/* Parses the value of a KEY=VALUE override: `text` as a TOML value (by
 * parsing "v = <text>"), or, when that is not exactly one valid value, the
 * text itself as a string (so `plugin=cpu-reference` needs no quotes).
 * `*was_bare` (may be NULL) says which. The returned node has no key. */
th_toml_node *th_toml_parse_value(const char *text, int *was_bare);

void th_toml_error_clear(th_toml_error *error);
void th_toml_node_free(th_toml_node *node);

/* Tree editing, for grafting overrides into a parsed document. */
th_toml_node *th_toml_table_new(const char *key);
th_toml_node *th_toml_array_new(void);
th_toml_node *th_toml_string_new(const char *text);
/* Gives `element` to `array`, last. */
void th_toml_array_append(th_toml_node *array, th_toml_node *element);
/* The child of `table` with this key, or NULL. */
th_toml_node *th_toml_table_find(const th_toml_node *table, const char *key);
/* Gives `child` (whose key is set) to `table`: it replaces the child with the
 * same key in place, or goes last. */
void th_toml_table_put(th_toml_node *table, th_toml_node *child);
void th_toml_node_set_key(th_toml_node *node, const char *key);
/* Sets `origin` on `node` and all its descendants. */
void th_toml_node_set_origin(th_toml_node *node, const char *origin);

#ifdef __cplusplus
}
#endif

#endif
