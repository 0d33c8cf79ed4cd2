/* The run configuration. The TOML document comes from toml_shim as a plain
 * tree; --set overrides are grafted into that tree, so they pass through the
 * same validation as the file. A table-driven schema names every key, its
 * type, default, range and field in th_config; one walker checks the tree
 * against it. The [compare] section's tables and rules are in
 * config_compare.c; what both files share, in config_internal.h. */
#include "config/config_internal.h"

#include "base/message_text.h"
#include "config/toml_shim.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>


/* ---- The schema ------------------------------------------------------- */

#define TH_FIELD(member) TH_FIELD_OF(th_config, member)

static const char *const tensor_missing_choices[] = {"zero", "unlisted", NULL};

static const th_key_schema tensor_keys[] = {
    {.name = "path", .type = TH_KEY_PATH, TH_FIELD(tensor_path), .required = TRUE,
     .optional_in_compare = TRUE, .doc = "the sparse tensor (.tns, .tns.gz or sptensor text)"},
    {.name = "missing", .type = TH_KEY_STRING, TH_FIELD(missing), .default_string = "zero",
     .choices = tensor_missing_choices,
     .doc = "the entries the file does not list: zeros, or unknown (\"unlisted\": tensor "
            "completion fits the listed entries only)"},
    {.name = "holdout", .type = TH_KEY_NUMBER, TH_FIELD(holdout), .min_number = 0.0,
     .default_number = 0.0,
     .doc = "completion: the fraction of the listed entries kept out of training (below 1), "
            "whose RMSE each iteration reports and the stopping rule watches"},
};

/* th_update_path_name()'s texts, in cp_als.h's order. */
static const char *const cpd_update_choices[] = {"auto", "sweep", "mode", "host", NULL};

static const char *const cpd_constraints_choices[] = {"none", "nonneg", NULL};

/* th_cpd_model_name()'s texts, in cp_als.h's order. */
static const char *const cpd_model_choices[] = {"least-squares", "poisson", NULL};

static const th_key_schema cpd_keys[] = {
    {.name = "rank", .type = TH_KEY_INTEGER, TH_FIELD(rank), .min = 1, .max = 4096,
     .default_integer = 16, .doc = "number of rank-one components"},
    {.name = "max_iters", .type = TH_KEY_INTEGER, TH_FIELD(max_iters), .min = 1,
     .max = UINT32_MAX, .default_integer = 50, .doc = "upper bound on ALS iterations"},
    {.name = "tolerance", .type = TH_KEY_NUMBER, TH_FIELD(tolerance), .min_number = 0.0,
     .default_number = 1e-5, .doc = "stop when |fit change| < tolerance"},
    {.name = "seed", .type = TH_KEY_INTEGER, TH_FIELD(seed), .min = 0, .max = INT64_MAX,
     .default_integer = 42, .doc = "seed of the initial factors"},
    {.name = "update", .type = TH_KEY_STRING, TH_FIELD(update), .default_string = "auto",
     .choices = cpd_update_choices,
     .doc = "where factors are updated: the best the backend has, one als_sweep per "
            "iteration, als_update per mode, or on the host"},
    {.name = "model", .type = TH_KEY_STRING, TH_FIELD(model), .default_string = "least-squares",
     .choices = cpd_model_choices,
     .doc = "the model fitted: CP-ALS (least squares) or CP-APR (Poisson, for counts)"},
    {.name = "constraints", .type = TH_KEY_CHOICES, TH_FIELD(constraints),
     .default_string = "none", .choices = cpd_constraints_choices,
     .doc = "least squares: \"nonneg\" keeps the factors nonnegative (hierarchical ALS "
            "updates, in the backend when it can, else on the host); an array gives one "
            "value per mode"},
    {.name = "l2", .type = TH_KEY_NUMBER, TH_FIELD(l2), .min_number = 0.0,
     .default_number = 0.0,
     .doc = "least squares: ridge weight of the factors' squared norms (CP-ALS's update, "
            "completion's objective)"},
    {.name = "l1", .type = TH_KEY_NUMBERS, TH_FIELD(l1), .min_number = 0.0,
     .default_number = 0.0,
     .doc = "CP-ALS: l1 (sparsity) weight of the factors' absolute values in each mode's "
            "update; an array gives one value per mode"},
    {.name = "hals_passes", .type = TH_KEY_INTEGER, TH_FIELD(hals_passes), .min = 1,
     .max = UINT32_MAX, .default_integer = 5,
     .doc = "CP-ALS with constraints \"nonneg\" or l1: at most this many hierarchical-ALS "
            "passes per mode update (TensorLy's 5)"},
    {.name = "hals_budget", .type = TH_KEY_NUMBER, TH_FIELD(hals_budget), .min_number = 0.0,
     .default_number = 0.5,
     .doc = "CP-ALS with constraints \"nonneg\" or l1: a mode makes floor(1 + hals_budget "
            "rho) passes, rho its cost of forming M and V over a pass's plus 1 (Gillis and "
            "Glineur's alpha)"},
    {.name = "max_inner_iters", .type = TH_KEY_INTEGER, TH_FIELD(max_inner_iters), .min = 1,
     .max = UINT32_MAX, .default_integer = 10,
     .doc = "poisson: multiplicative updates per mode and outer iteration"},
    {.name = "kappa", .type = TH_KEY_NUMBER, TH_FIELD(kappa), .min_number = 0.0,
     .default_number = 0.01, .doc = "poisson: offset added to inadmissible zeros"},
    {.name = "kappa_tolerance", .type = TH_KEY_NUMBER, TH_FIELD(kappa_tolerance),
     .min_number = 0.0, .default_number = 1e-10,
     .doc = "poisson: factor entries below it count as zeros"},
    {.name = "epsilon", .type = TH_KEY_NUMBER, TH_FIELD(epsilon), .min_number = 0.0,
     .default_number = 1e-10, .doc = "poisson: floor of the model in divisions (> 0)"},
    {.name = "phi_threshold", .type = TH_KEY_NUMBER, TH_FIELD(phi_threshold), .min_number = 0.0,
     .default_number = 1.0,
     .doc = "poisson: a zero is inadmissible where Phi exceeds it (1 as Tensor Toolbox, 0 as pyttb)"},
};

static const th_key_schema backend_keys[] = {
    {.name = "plugin", .type = TH_KEY_PLUGIN, TH_FIELD(plugin), .default_string = "auto",
     .doc = "a plugin name, \"auto\", or a path to a .so"},
    {.name = "search_path", .type = TH_KEY_PATH_LIST, TH_FIELD(search_path),
     .doc = "folders searched for plugins before the others"},
    {.name = "options", .type = TH_KEY_OPTIONS, TH_FIELD(plugin_options),
     .per_plugin_tables = TRUE,
     .doc = "key/value pairs handed to the plugin; [backend.options.NAME] tables for one "
            "plugin alone"},
};

static const char *const output_format_choices[] = {"text", "npy", "both", NULL};

static const th_key_schema output_keys[] = {
    {.name = "dir", .type = TH_KEY_PATH, TH_FIELD(output_dir), .default_string = "tensorhost-out",
     .doc = "where factors, lambda and report.json go"},
    {.name = "write_factors", .type = TH_KEY_BOOLEAN, TH_FIELD(write_factors),
     .default_boolean = TRUE, .doc = "write the factor matrices and lambda"},
    {.name = "format", .type = TH_KEY_STRING, TH_FIELD(output_format), .default_string = "text",
     .choices = output_format_choices,
     .doc = "the factor files: SPLATT's text (.mat), numpy's .npy, or both"},
};

static const th_table_schema tensor_schema = TH_TABLE("tensor", tensor_keys);
static const th_table_schema cpd_schema = TH_TABLE("cpd", cpd_keys);
static const th_table_schema backend_schema = TH_TABLE("backend", backend_keys);
static const th_table_schema output_schema = TH_TABLE("output", output_keys);

static const th_key_schema root_keys[] = {
    {.name = "tensor", .type = TH_KEY_SECTION, .section = &tensor_schema},
    {.name = "cpd", .type = TH_KEY_SECTION, .section = &cpd_schema},
    {.name = "backend", .type = TH_KEY_SECTION, .section = &backend_schema},
    {.name = "output", .type = TH_KEY_SECTION, .section = &output_schema},
    {.name = "compare", .type = TH_KEY_OBJECT, TH_FIELD(compare),
     .section = &th_config_compare_schema, .object = &th_config_compare_type},
};
static const th_table_schema root_schema = TH_TABLE("", root_keys);

static const th_key_schema *schema_find(const th_table_schema *schema, const char *name)
{
    for (size_t i = 0; i < schema->n_keys; i++) {
        if (strcmp(schema->keys[i].name, name) == 0)
            return &schema->keys[i];
    }
    return NULL;
}

static const void *const_field_at(const void *target, const th_key_schema *key)
{
    return (const char *)target + key->offset;
}

/* ---- Rendering values as text ----------------------------------------- */

/* The shortest text that reads back as the same double, in the C locale
 * whatever the user's locale is: plugins parse it with strtod. */
static char *format_double(double value)
{
    char buffer[G_ASCII_DTOSTR_BUF_SIZE];
    for (int precision = 15; precision < 17; precision++) {
        char format[8];
        g_snprintf(format, sizeof format, "%%.%dg", precision);
        g_ascii_formatd(buffer, sizeof buffer, format, value);
        if (g_ascii_strtod(buffer, NULL) == value)
            return g_strdup(buffer);
    }
    return g_strdup(g_ascii_formatd(buffer, sizeof buffer, "%.17g", value));
}

/* A user string quoted for a message: escaped, and cut when long. */
char *th_config_quote_for_message(const char *text)
{
    enum { MAX_SHOWN = 60 };
    size_t length = strlen(text);
    gboolean cut = length > MAX_SHOWN;
    if (cut) {
        length = MAX_SHOWN;
        while (length > 0 && ((unsigned char)text[length] & 0xC0) == 0x80)
            length--; /* do not split a UTF-8 sequence */
    }
    g_autofree char *head = g_strndup(text, length);
    g_autofree char *escaped = th_escape_for_message(head);
    return g_strdup_printf("\"%s%s\"", escaped, cut ? "..." : "");
}

/* "the string \"abc\"", "the integer 5", "a table": what a message says was found. */
static char *describe_found(const th_toml_node *node)
{
    switch (node->kind) {
    case TH_TOML_STRING: {
        if (has_nul(node))
            return g_strdup("a string containing a NUL character");
        g_autofree char *quoted = th_config_quote_for_message(node->string_value);
        return g_strdup_printf("the string %s", quoted);
    }
    case TH_TOML_INTEGER:
        return g_strdup_printf("the integer %" PRId64, node->integer_value);
    case TH_TOML_FLOAT: {
        g_autofree char *text = format_double(node->float_value);
        return g_strdup_printf("the float %s", text);
    }
    case TH_TOML_BOOLEAN:
        return g_strdup_printf("the boolean %s", node->boolean_value ? "true" : "false");
    case TH_TOML_ARRAY:
        return g_strdup("an array");
    case TH_TOML_TABLE:
        return g_strdup("a table");
    case TH_TOML_UNSUPPORTED:
        break;
    }
    return g_strdup_printf("the %s %s", node->type_name, node->string_value);
}

/* ---- Errors -------------------------------------------------------------- */

static char *override_location(const char *argument)
{
    g_autofree char *escaped = th_escape_for_message(argument);
    return g_strdup_printf("--set %s", escaped);
}

/* "FILE:LINE:COLUMN", "FILE" when the position is unknown, or "--set ARG"
 * for nodes grafted from the command line. */
char *th_config_location(const load_context *ctx, const th_toml_node *node, gboolean at_key)
{
    if (node && node->origin)
        return override_location(node->origin);
    uint32_t line = node ? (at_key ? node->key_line : node->line) : 0;
    uint32_t column = node ? (at_key ? node->key_column : node->column) : 0;
    if (node && line == 0) { /* e.g. a table that a header created implicitly */
        line = at_key ? node->line : node->key_line;
        column = at_key ? node->column : node->key_column;
    }
    if (line == 0)
        return g_strdup(ctx->source_name);
    return g_strdup_printf("%s:%" PRIu32 ":%" PRIu32, ctx->source_name, line, column);
}

void th_config_value_error(const load_context *ctx, GError **error, th_config_error code,
                           const th_toml_node *node, const char *key, const char *expected)
{
    g_autofree char *where = th_config_location(ctx, node, FALSE);
    g_autofree char *found = describe_found(node);
    g_set_error(error, TH_CONFIG_ERROR, code, "%s: key '%s': expected %s, found %s", where, key,
                expected, found);
}

/* The schema key with the same leaf name anywhere (for `rank = 3` written
 * at the top level, say), as a dotted name, or NULL. */
static char *find_leaf_elsewhere(const th_table_schema *schema, const char *leaf)
{
    for (size_t i = 0; i < schema->n_keys; i++) {
        const th_key_schema *key = &schema->keys[i];
        if (key->section) {
            char *found = find_leaf_elsewhere(key->section, leaf);
            if (found)
                return found;
        } else if (strcmp(key->name, leaf) == 0) {
            return dotted_name(schema->name, key->name);
        }
    }
    return NULL;
}

/* The valid key nearest to `leaf` in `schema` as a dotted name, or NULL when
 * none is near enough to be a likely typo. */
static char *suggest_key(const th_table_schema *schema, const char *leaf)
{
    g_autofree const char **names = g_new0(const char *, schema->n_keys + 1);
    for (size_t i = 0; i < schema->n_keys; i++)
        names[i] = schema->keys[i].name;
    const char *nearest = th_nearest_name(leaf, names, schema->n_keys);
    if (nearest)
        return dotted_name(schema->name, nearest);
    return find_leaf_elsewhere(&root_schema, leaf);
}

static char *list_valid_keys(const th_table_schema *schema)
{
    GString *list = g_string_new(NULL);
    for (size_t i = 0; i < schema->n_keys; i++)
        g_string_append_printf(list, "%s%s", i ? ", " : "", schema->keys[i].name);
    return g_string_free(list, FALSE);
}

/* `is_section`: the unknown name is a table, so it reads as a section.
 * `prefix` is the table's dotted name as the user sees it (with an index in
 * an array of tables: "compare.backend[1]"). */
static void unknown_key_error(GError **error, const char *where, const th_table_schema *schema,
                              const char *prefix, const char *leaf, gboolean is_section)
{
    g_autofree char *escaped_leaf = th_escape_for_message(leaf);
    g_autofree char *full = dotted_name(prefix, escaped_leaf);
    g_autofree char *suggestion = suggest_key(schema, leaf);
    g_autofree char *hint = NULL;
    if (suggestion) {
        hint = g_strdup_printf("did you mean '%s'?", suggestion);
    } else {
        g_autofree char *valid = list_valid_keys(schema);
        const char *open = schema->is_array ? "[[" : "[", *close = schema->is_array ? "]]" : "]";
        hint = *schema->name
                   ? g_strdup_printf("valid keys of %s%s%s: %s", open, schema->name, close, valid)
                   : g_strdup_printf("valid sections: %s", valid);
    }
    g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_UNKNOWN_KEY, "%s: unknown %s '%s' (%s)",
                where, is_section ? "section" : "key", full, hint);
}

/* ---- Assigning values ---------------------------------------------------- */

/* Relative paths from the file are relative to the file's folder; those from
 * --set, to the current folder, as a shell user expects. Absolute paths are
 * kept as written; relative ones are joined and normalised lexically. */
static char *resolve_path(const load_context *ctx, const th_toml_node *node, const char *path)
{
    if (g_path_is_absolute(path))
        return g_strdup(path);
    const char *base = node && node->origin ? ctx->current_dir : ctx->config_dir;
    return g_canonicalize_filename(path, base);
}

static gboolean is_nonempty_string(const th_toml_node *node)
{
    return node->kind == TH_TOML_STRING && node->string_length > 0 && !has_nul(node);
}

/* "one of \"mttkrp\", \"cpd\"" */
static char *describe_choices(const char *const *choices)
{
    GString *text = g_string_new("one of ");
    for (size_t i = 0; choices[i]; i++)
        g_string_append_printf(text, "%s\"%s\"", i ? ", " : "", choices[i]);
    return g_string_free(text, FALSE);
}

static gboolean is_choice(const char *const *choices, const char *value)
{
    for (size_t i = 0; choices[i]; i++) {
        if (strcmp(choices[i], value) == 0)
            return TRUE;
    }
    return FALSE;
}

static gboolean assign_string(const load_context *ctx, const th_toml_node *node,
                              const th_key_schema *key, const char *name, void *config,
                              GError **error)
{
    if (key->choices && (!is_nonempty_string(node) || !is_choice(key->choices, node->string_value))) {
        g_autofree char *expected = describe_choices(key->choices);
        th_config_value_error(
            ctx, error, node->kind == TH_TOML_STRING ? TH_CONFIG_ERROR_RANGE : TH_CONFIG_ERROR_TYPE,
            node, name, expected);
        return FALSE;
    }
    if (!is_nonempty_string(node)) {
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_TYPE, node, name, "a non-empty string");
        return FALSE;
    }
    char **field = field_at(config, key);
    g_free(*field);
    gboolean resolve = key->type == TH_KEY_PATH
                       || (key->type == TH_KEY_PLUGIN && is_plugin_path(node->string_value));
    *field = resolve ? resolve_path(ctx, node, node->string_value) : g_strdup(node->string_value);
    return TRUE;
}

/* One of the key's choices, or a non-empty array of them. */
static gboolean assign_choices(const load_context *ctx, const th_toml_node *node,
                               const th_key_schema *key, const char *name, void *config,
                               GError **error)
{
    g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func(g_free);
    const gboolean listed = node->kind == TH_TOML_ARRAY;
    if (listed && node->n_children == 0) {
        g_autofree char *choices = describe_choices(key->choices);
        g_autofree char *expected =
            g_strdup_printf("%s, or a non-empty array of them (one per mode)", choices);
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_RANGE, node, name, expected);
        return FALSE;
    }
    const size_t n = listed ? node->n_children : 1;
    for (size_t i = 0; i < n; i++) {
        const th_toml_node *element = listed ? node->children[i] : node;
        if (!is_nonempty_string(element) || !is_choice(key->choices, element->string_value)) {
            g_autofree char *choices = describe_choices(key->choices);
            g_autofree char *element_name =
                listed ? g_strdup_printf("%s[%zu]", name, i) : g_strdup(name);
            g_autofree char *expected =
                listed ? g_strdup(choices) : g_strdup_printf("%s, or an array of them", choices);
            th_config_value_error(ctx, error,
                                  element->kind == TH_TOML_STRING ? TH_CONFIG_ERROR_RANGE
                                                                  : TH_CONFIG_ERROR_TYPE,
                                  element, element_name, expected);
            return FALSE;
        }
        g_ptr_array_add(items, g_strdup(element->string_value));
    }
    th_config_choices *field = field_at(config, key);
    g_clear_pointer(&field->items, g_ptr_array_unref);
    field->items = g_steal_pointer(&items);
    field->listed = listed;
    return TRUE;
}

/* A number as assign_number takes it, or FALSE with the error. */
static gboolean number_of(const load_context *ctx, const th_toml_node *node, double min_number,
                          const char *name, const char *expected, double *value, GError **error)
{
    if (node->kind == TH_TOML_FLOAT) {
        *value = node->float_value;
    } else if (node->kind == TH_TOML_INTEGER) {
        *value = (double)node->integer_value;
    } else {
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_TYPE, node, name, expected);
        return FALSE;
    }
    if (!isfinite(*value) || *value < min_number) {
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_RANGE, node, name, expected);
        return FALSE;
    }
    return TRUE;
}

/* A number, or a non-empty array of them (one per mode). */
static gboolean assign_numbers(const load_context *ctx, const th_toml_node *node,
                               const th_key_schema *key, const char *name, void *config,
                               GError **error)
{
    g_autofree char *bound = format_double(key->min_number);
    g_autofree char *one = g_strdup_printf("a finite number >= %s", bound);
    g_autofree char *expected =
        g_strdup_printf("%s, or a non-empty array of them (one per mode)", one);
    const gboolean listed = node->kind == TH_TOML_ARRAY;
    if (listed && node->n_children == 0) {
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_RANGE, node, name, expected);
        return FALSE;
    }
    g_autoptr(GArray) values = g_array_new(FALSE, FALSE, sizeof(double));
    const size_t n = listed ? node->n_children : 1;
    for (size_t i = 0; i < n; i++) {
        const th_toml_node *element = listed ? node->children[i] : node;
        g_autofree char *element_name =
            listed ? g_strdup_printf("%s[%zu]", name, i) : g_strdup(name);
        double value;
        if (!number_of(ctx, element, key->min_number, element_name, listed ? one : expected,
                       &value, error))
            return FALSE;
        g_array_append_val(values, value);
    }
    th_config_numbers *field = field_at(config, key);
    g_clear_pointer(&field->values, g_array_unref);
    field->values = g_steal_pointer(&values);
    field->listed = listed;
    return TRUE;
}

static gboolean assign_path_list(const load_context *ctx, const th_toml_node *node,
                                 const th_key_schema *key, const char *name, void *config,
                                 GError **error)
{
    if (node->kind != TH_TOML_ARRAY) {
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_TYPE, node, name, "an array of strings");
        return FALSE;
    }
    g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func(g_free);
    for (size_t i = 0; i < node->n_children; i++) {
        const th_toml_node *element = node->children[i];
        if (!is_nonempty_string(element)) {
            g_autofree char *element_name = g_strdup_printf("%s[%zu]", name, i);
            th_config_value_error(ctx, error, TH_CONFIG_ERROR_TYPE, element, element_name,
                                  "a non-empty string");
            return FALSE;
        }
        g_ptr_array_add(paths, resolve_path(ctx, element, element->string_value));
    }
    GPtrArray **field = field_at(config, key);
    g_clear_pointer(field, g_ptr_array_unref);
    *field = g_steal_pointer(&paths);
    return TRUE;
}

static char *describe_integer_range(const th_key_schema *key)
{
    if (key->max == INT64_MAX)
        return g_strdup_printf("an integer >= %" PRId64, key->min);
    return g_strdup_printf("an integer from %" PRId64 " to %" PRId64, key->min, key->max);
}

static gboolean assign_integer(const load_context *ctx, const th_toml_node *node,
                               const th_key_schema *key, const char *name, void *config,
                               GError **error)
{
    g_autofree char *expected = describe_integer_range(key);
    if (node->kind != TH_TOML_INTEGER) {
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_TYPE, node, name, expected);
        return FALSE;
    }
    if (node->integer_value < key->min || node->integer_value > key->max) {
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_RANGE, node, name, expected);
        return FALSE;
    }
    /* The range check above keeps the value within the field's type. */
    if (key->size == sizeof(uint32_t))
        *(uint32_t *)field_at(config, key) = (uint32_t)node->integer_value;
    else
        *(uint64_t *)field_at(config, key) = (uint64_t)node->integer_value;
    return TRUE;
}

static gboolean assign_number(const load_context *ctx, const th_toml_node *node,
                              const th_key_schema *key, const char *name, void *config,
                              GError **error)
{
    g_autofree char *bound = format_double(key->min_number);
    g_autofree char *expected = g_strdup_printf("a finite number >= %s", bound);
    double value;
    if (node->kind == TH_TOML_FLOAT) {
        value = node->float_value;
    } else if (node->kind == TH_TOML_INTEGER) {
        value = (double)node->integer_value;
    } else {
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_TYPE, node, name, expected);
        return FALSE;
    }
    if (!isfinite(value) || value < key->min_number) {
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_RANGE, node, name, expected);
        return FALSE;
    }
    *(double *)field_at(config, key) = value;
    return TRUE;
}

static gboolean assign_boolean(const load_context *ctx, const th_toml_node *node,
                               const th_key_schema *key, const char *name, void *config,
                               GError **error)
{
    if (node->kind != TH_TOML_BOOLEAN) {
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_TYPE, node, name,
                              "a boolean (true or false)");
        return FALSE;
    }
    *(gboolean *)field_at(config, key) = node->boolean_value ? TRUE : FALSE;
    return TRUE;
}

void th_config_option_free(gpointer data)
{
    th_config_option *option = data;
    g_free(option->key);
    g_free(option->value);
    g_free(option);
}

/* An option's value as the text the plugin receives. */
char *th_config_render_option_value(const th_toml_node *node)
{
    switch (node->kind) {
    case TH_TOML_STRING:
        return g_strdup(node->string_value);
    case TH_TOML_INTEGER:
        return g_strdup_printf("%" PRId64, node->integer_value);
    case TH_TOML_FLOAT:
        return format_double(node->float_value);
    case TH_TOML_BOOLEAN:
        return g_strdup(node->boolean_value ? "true" : "false");
    default:
        return NULL;
    }
}

th_config_value_kind th_config_option_value_kind(const th_toml_node *node)
{
    switch (node->kind) {
    case TH_TOML_INTEGER:
        return TH_CONFIG_VALUE_INTEGER;
    case TH_TOML_FLOAT:
        return TH_CONFIG_VALUE_NUMBER;
    case TH_TOML_BOOLEAN:
        return TH_CONFIG_VALUE_BOOLEAN;
    default:
        return TH_CONFIG_VALUE_STRING;
    }
}

static void plugin_options_free(gpointer data)
{
    th_config_plugin_options *table = data;
    g_free(table->plugin);
    g_clear_pointer(&table->options, g_ptr_array_unref);
    g_free(table->where);
    g_free(table);
}

/* A table is where its header is; a value, where its key is. */
static void record_where(const load_context *ctx, const char *name, const th_toml_node *node)
{
    g_hash_table_replace(ctx->where, g_strdup(name),
                         th_config_location(ctx, node, node->kind != TH_TOML_TABLE));
}

/* The scalars of an options table, rendered as text, into `options`. */
static gboolean read_option_entries(const load_context *ctx, const th_toml_node *const *entries,
                                    size_t n_entries, const char *name, GPtrArray *options,
                                    GError **error)
{
    for (size_t i = 0; i < n_entries; i++) {
        const th_toml_node *entry = entries[i];
        g_autofree char *escaped = th_escape_for_message(entry->key);
        g_autofree char *entry_name = dotted_name(name, escaped);
        char *value = th_config_render_option_value(entry);
        if (!value || (entry->kind == TH_TOML_STRING && has_nul(entry))) {
            g_free(value);
            th_config_value_error(ctx, error, TH_CONFIG_ERROR_TYPE, entry, entry_name,
                                  "a string, integer, float or boolean");
            return FALSE;
        }
        th_config_option *option = g_new0(th_config_option, 1);
        option->key = g_strdup(entry->key);
        option->value = value;
        option->kind = th_config_option_value_kind(entry);
        g_ptr_array_add(options, option);
        record_where(ctx, entry_name, entry);
    }
    return TRUE;
}

/* A plugin id as [backend.options.NAME] may name it: what a plugin file
 * NAME.so could be called, never a path. */
static gboolean is_plugin_name(const char *name)
{
    if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return FALSE;
    for (const char *p = name; *p; ++p)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return FALSE;
    return TRUE;
}

static gboolean read_plugin_table(const load_context *ctx, const th_toml_node *node,
                                  const char *name, th_config *config, GError **error)
{
    g_autofree char *escaped = th_escape_for_message(node->key);
    g_autofree char *table_name = dotted_name(name, escaped);
    if (!is_plugin_name(node->key)) {
        g_autofree char *where = th_config_location(ctx, node, FALSE);
        g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_TYPE,
                    "%s: [%s]: expected a plugin name (such as \"cpu-reference\") after "
                    "'%s.'",
                    where, table_name, name);
        return FALSE;
    }
    th_config_plugin_options *table = g_new0(th_config_plugin_options, 1);
    table->plugin = g_strdup(node->key);
    table->options = g_ptr_array_new_with_free_func(th_config_option_free);
    table->where = th_config_location(ctx, node, FALSE);
    g_ptr_array_add(config->plugin_option_tables, table);
    for (size_t i = 0; i < node->n_children; i++) {
        if (node->children[i]->kind == TH_TOML_TABLE) {
            g_autofree char *where = th_config_location(ctx, node->children[i], FALSE);
            g_autofree char *child = th_escape_for_message(node->children[i]->key);
            g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_TYPE,
                        "%s: [%s.%s]: options of one plugin are plain keys; tables do not "
                        "nest further",
                        where, table_name, child);
            return FALSE;
        }
    }
    return read_option_entries(ctx, (const th_toml_node *const *)node->children,
                               node->n_children, table_name, table->options, error);
}

static gboolean assign_options(const load_context *ctx, const th_toml_node *node,
                               const th_key_schema *key, const char *name, void *config,
                               GError **error)
{
    if (node->kind != TH_TOML_TABLE) {
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_TYPE, node, name, "a table");
        return FALSE;
    }
    GPtrArray *options = *(GPtrArray **)field_at(config, key);
    g_ptr_array_set_size(options, 0);
    g_autofree const th_toml_node **scalars = g_new0(const th_toml_node *, node->n_children + 1);
    size_t n_scalars = 0;
    for (size_t i = 0; i < node->n_children; i++) {
        const th_toml_node *entry = node->children[i];
        if (entry->kind == TH_TOML_TABLE && key->per_plugin_tables) {
            if (!read_plugin_table(ctx, entry, name, config, error))
                return FALSE;
        } else {
            scalars[n_scalars++] = entry;
        }
    }
    return read_option_entries(ctx, scalars, n_scalars, name, options, error);
}

static gboolean walk_table(const load_context *ctx, const th_toml_node *table,
                           const th_table_schema *schema, const char *prefix, void *target,
                           GError **error);
static void apply_defaults(const load_context *ctx, const th_table_schema *schema, void *target);

/* A table whose fields live in a struct of their own, allocated (with its
 * defaults) the first time the table shows up. */
static gboolean assign_object(const load_context *ctx, const th_toml_node *node,
                              const th_key_schema *key, const char *name, void *target,
                              GError **error)
{
    if (node->kind != TH_TOML_TABLE) {
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_TYPE, node, name, "a table");
        return FALSE;
    }
    void **field = field_at(target, key);
    if (!*field) {
        *field = g_malloc0(key->object->size);
        apply_defaults(ctx, key->section, *field);
    }
    return walk_table(ctx, node, key->section, name, *field, error);
}

/* Every key of an element that the element's schema requires is there. */
static gboolean check_element_required(const load_context *ctx, const th_toml_node *node,
                                       const th_table_schema *schema, const char *name,
                                       void *element, GError **error)
{
    for (size_t i = 0; i < schema->n_keys; i++) {
        const th_key_schema *key = &schema->keys[i];
        if (key->required && *(char **)field_at(element, key) == NULL) {
            g_autofree char *where = th_config_location(ctx, node, FALSE);
            g_autofree char *full = dotted_name(name, key->name);
            g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_MISSING,
                        "%s: missing required key '%s'", where, full);
            return FALSE;
        }
    }
    return TRUE;
}

static void *read_element(const load_context *ctx, const th_toml_node *node,
                          const th_key_schema *key, const char *name, GError **error)
{
    if (node->kind != TH_TOML_TABLE) {
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_TYPE, node, name, "a table");
        return NULL;
    }
    const th_object_type *type = key->object;
    void *element = g_malloc0(type->size);
    apply_defaults(ctx, key->section, element);
    if (type->where_offset != SIZE_MAX)
        *(char **)((char *)element + type->where_offset) = th_config_location(ctx, node, FALSE);
    gboolean ok = walk_table(ctx, node, key->section, name, element, error)
                  && check_element_required(ctx, node, key->section, name, element, error)
                  && (!type->finish || type->finish(ctx, node, element, name, error));
    if (!ok) {
        type->free(element);
        return NULL;
    }
    return element;
}

/* [[name]] tables, or an array of inline tables: one struct each. */
static gboolean assign_table_array(const load_context *ctx, const th_toml_node *node,
                                   const th_key_schema *key, const char *name, void *target,
                                   GError **error)
{
    if (node->kind != TH_TOML_ARRAY) {
        g_autofree char *expected = g_strdup_printf("an array of tables ([[%s]])", name);
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_TYPE, node, name, expected);
        return FALSE;
    }
    GPtrArray *elements = *(GPtrArray **)field_at(target, key);
    g_ptr_array_set_size(elements, 0);
    for (size_t i = 0; i < node->n_children; i++) {
        g_autofree char *element_name = g_strdup_printf("%s[%zu]", name, i);
        void *element = read_element(ctx, node->children[i], key, element_name, error);
        if (!element)
            return FALSE;
        g_ptr_array_add(elements, element);
    }
    return TRUE;
}

static gboolean assign(const load_context *ctx, const th_toml_node *node, const th_key_schema *key,
                       const char *name, void *config, GError **error)
{
    record_where(ctx, name, node);
    switch (key->type) {
    case TH_KEY_STRING:
    case TH_KEY_PATH:
    case TH_KEY_PLUGIN:
        return assign_string(ctx, node, key, name, config, error);
    case TH_KEY_PATH_LIST:
        return assign_path_list(ctx, node, key, name, config, error);
    case TH_KEY_CHOICES:
        return assign_choices(ctx, node, key, name, config, error);
    case TH_KEY_NUMBERS:
        return assign_numbers(ctx, node, key, name, config, error);
    case TH_KEY_INTEGER:
        return assign_integer(ctx, node, key, name, config, error);
    case TH_KEY_NUMBER:
        return assign_number(ctx, node, key, name, config, error);
    case TH_KEY_BOOLEAN:
        return assign_boolean(ctx, node, key, name, config, error);
    case TH_KEY_OPTIONS:
        return assign_options(ctx, node, key, name, config, error);
    case TH_KEY_SECTION:
        if (node->kind != TH_TOML_TABLE) {
            th_config_value_error(ctx, error, TH_CONFIG_ERROR_TYPE, node, name, "a table");
            return FALSE;
        }
        return walk_table(ctx, node, key->section, name, config, error);
    case TH_KEY_OBJECT:
        return assign_object(ctx, node, key, name, config, error);
    case TH_KEY_TABLE_ARRAY:
        return assign_table_array(ctx, node, key, name, config, error);
    case TH_KEY_SWEEP:
        return th_config_assign_sweep(ctx, node, key, name, config, error);
    }
    g_assert_not_reached();
}

/* `prefix` is the table's dotted name for messages ("" for the root). */
static gboolean walk_table(const load_context *ctx, const th_toml_node *table,
                           const th_table_schema *schema, const char *prefix, void *config,
                           GError **error)
{
    for (size_t i = 0; i < table->n_children; i++) {
        const th_toml_node *child = table->children[i];
        const th_key_schema *key = schema_find(schema, child->key);
        if (!key) {
            g_autofree char *where = th_config_location(ctx, child, TRUE);
            unknown_key_error(error, where, schema, prefix, child->key,
                              child->kind == TH_TOML_TABLE);
            return FALSE;
        }
        g_autofree char *name = dotted_name(prefix, key->name);
        if (!assign(ctx, child, key, name, config, error))
            return FALSE;
    }
    return TRUE;
}

/* ---- Defaults and required keys ---------------------------------------- */

static void apply_defaults(const load_context *ctx, const th_table_schema *schema, void *config)
{
    for (size_t i = 0; i < schema->n_keys; i++) {
        const th_key_schema *key = &schema->keys[i];
        void *field = field_at(config, key);
        switch (key->type) {
        case TH_KEY_STRING:
        case TH_KEY_PLUGIN:
            *(char **)field = g_strdup(key->default_string);
            break;
        case TH_KEY_PATH:
            *(char **)field = key->default_string
                                  ? resolve_path(ctx, NULL, key->default_string)
                                  : NULL;
            break;
        case TH_KEY_PATH_LIST:
            *(GPtrArray **)field = g_ptr_array_new_with_free_func(g_free);
            break;
        case TH_KEY_CHOICES: {
            th_config_choices *choices = field;
            choices->items = g_ptr_array_new_with_free_func(g_free);
            g_ptr_array_add(choices->items, g_strdup(key->default_string));
            choices->listed = FALSE;
            break;
        }
        case TH_KEY_NUMBERS: {
            th_config_numbers *numbers = field;
            numbers->values = g_array_new(FALSE, FALSE, sizeof(double));
            g_array_append_val(numbers->values, key->default_number);
            numbers->listed = FALSE;
            break;
        }
        case TH_KEY_OPTIONS:
            *(GPtrArray **)field = g_ptr_array_new_with_free_func(th_config_option_free);
            break;
        case TH_KEY_INTEGER:
            if (key->size == sizeof(uint32_t))
                *(uint32_t *)field = (uint32_t)key->default_integer;
            else
                *(uint64_t *)field = (uint64_t)key->default_integer;
            break;
        case TH_KEY_NUMBER:
            *(double *)field = key->default_number;
            break;
        case TH_KEY_BOOLEAN:
            *(gboolean *)field = key->default_boolean;
            break;
        case TH_KEY_SECTION:
            apply_defaults(ctx, key->section, config);
            break;
        case TH_KEY_OBJECT:
            *(void **)field = NULL; /* allocated when its table appears */
            break;
        case TH_KEY_TABLE_ARRAY:
            *(GPtrArray **)field = g_ptr_array_new_with_free_func(key->object->free);
            break;
        case TH_KEY_SWEEP:
            *(GPtrArray **)field = g_ptr_array_new_with_free_func(th_config_sweep_free);
            break;
        }
    }
}

static gboolean check_required(const load_context *ctx, const th_table_schema *schema,
                               th_config *config, GError **error)
{
    for (size_t i = 0; i < schema->n_keys; i++) {
        const th_key_schema *key = &schema->keys[i];
        if (key->type == TH_KEY_SECTION) {
            if (!check_required(ctx, key->section, config, error))
                return FALSE;
        } else if (key->type == TH_KEY_OBJECT || key->type == TH_KEY_TABLE_ARRAY) {
            continue; /* checked as their tables are read */
        } else if (key->optional_in_compare && config->compare) {
            continue; /* th_config_finish_compare() checks it */
        } else if (key->required && *(char **)field_at(config, key) == NULL) {
            /* Only string keys are required so far; others have defaults. */
            g_autofree char *name = dotted_name(schema->name, key->name);
            g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_MISSING,
                        "%s: missing required key '%s'", ctx->source_name, name);
            return FALSE;
        }
    }
    return TRUE;
}

/* ---- --set overrides ----------------------------------------------------- */

static void override_syntax_error(GError **error, const char *argument)
{
    g_autofree char *where = override_location(argument);
    g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_OVERRIDE, "%s: expected KEY=VALUE", where);
}

/* Checks a dotted key against the schema before anything is grafted, so an
 * unknown key is reported with a suggestion and never lands in the tree.
 * `*found` is the key's schema entry, or NULL for a backend option name. */
static gboolean lookup_override_key(const char *argument, char **components,
                                    const th_key_schema **found, GError **error)
{
    const th_table_schema *schema = &root_schema;
    g_autofree char *where = override_location(argument);
    *found = NULL;
    for (size_t i = 0; components[i]; i++) {
        gboolean last = components[i + 1] == NULL;
        const th_key_schema *key = schema_find(schema, components[i]);
        if (!key) {
            unknown_key_error(error, where, schema, schema->name, components[i], !last);
            return FALSE;
        }
        g_autofree char *name = dotted_name(schema->name, key->name);
        gboolean is_table = key->type == TH_KEY_SECTION || key->type == TH_KEY_OBJECT;
        if (last && (is_table || key->type == TH_KEY_OPTIONS)) {
            g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_OVERRIDE,
                        "%s: '%s' is a section; set one of its keys, such as '%s.%s'", where,
                        name, name, is_table ? key->section->keys[0].name : "NAME");
            return FALSE;
        }
        if (key->type == TH_KEY_TABLE_ARRAY) {
            /* Which element would a dotted key mean? The file says it better. */
            g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_OVERRIDE,
                        "%s: '%s' is an array of tables ([[%s]]); --set cannot change it, "
                        "edit the file",
                        where, name, name);
            return FALSE;
        }
        if (key->type == TH_KEY_OPTIONS) {
            if (components[i + 2] == NULL)
                return TRUE; /* backend.options.KEY: any name */
            if (key->per_plugin_tables && components[i + 3] == NULL)
                return TRUE; /* backend.options.PLUGIN.KEY */
            g_autofree char *joined = g_strjoinv(".", components);
            g_autofree char *full = th_escape_for_message(joined);
            if (key->per_plugin_tables)
                g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_UNKNOWN_KEY,
                            "%s: unknown key '%s' (options are '%s.KEY' or '%s.PLUGIN.KEY')",
                            where, full, name, name);
            else
                g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_UNKNOWN_KEY,
                            "%s: unknown key '%s' (options have plain names, such as '%s.%s')",
                            where, full, name, components[i + 1]);
            return FALSE;
        }
        if (!is_table) {
            if (last) {
                *found = key;
                return TRUE;
            }
            g_autofree char *joined = g_strjoinv(".", components);
            g_autofree char *full = th_escape_for_message(joined);
            g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_UNKNOWN_KEY,
                        "%s: unknown key '%s' ('%s' is not a section)", where, full, name);
            return FALSE;
        }
        schema = key->section;
    }
    g_assert_not_reached();
}

/* The override's value as a node. String keys take the text as written
 * unless it is a quoted TOML string, so `tensor.path=2024.tns` is a path and
 * not a type error; a path list takes a single path as a list of one. */
static th_toml_node *parse_override_value(const char *text, const th_key_schema *key)
{
    th_toml_node *value = th_toml_parse_value(text, NULL);
    if (!key)
        return value;
    gboolean wants_string = key->type == TH_KEY_STRING || key->type == TH_KEY_PATH
                            || key->type == TH_KEY_PLUGIN || key->type == TH_KEY_PATH_LIST
                            || key->type == TH_KEY_CHOICES;
    gboolean is_list = (key->type == TH_KEY_PATH_LIST || key->type == TH_KEY_CHOICES)
                       && value->kind == TH_TOML_ARRAY;
    if (wants_string && value->kind != TH_TOML_STRING && !is_list) {
        th_toml_node_free(value);
        value = th_toml_string_new(text);
    }
    if (key->type == TH_KEY_PATH_LIST && value->kind == TH_TOML_STRING) {
        th_toml_node *list = th_toml_array_new();
        th_toml_array_append(list, value);
        value = list;
    }
    return value;
}

/* Puts the override's value into the document tree at its dotted key,
 * creating tables on the way. Where the file has a non-table in the way
 * (`backend = 5`), nothing is grafted: validating the file reports it. */
static void graft_override(th_toml_node *root, char **components, th_toml_node *value,
                           const char *argument)
{
    th_toml_node *table = root;
    size_t i = 0;
    for (; components[i + 1]; i++) {
        th_toml_node *next = th_toml_table_find(table, components[i]);
        if (!next) {
            next = th_toml_table_new(components[i]);
            th_toml_node_set_origin(next, argument); /* messages about it name the --set */
            th_toml_table_put(table, next);
        } else if (next->kind != TH_TOML_TABLE) {
            th_toml_node_free(value);
            return;
        }
        table = next;
    }
    th_toml_node_set_key(value, components[i]);
    th_toml_table_put(table, value);
}

static gboolean is_valid_key_component(const char *component)
{
    g_autofree char *stripped = g_strstrip(g_strdup(component));
    return *stripped && strcmp(stripped, component) == 0;
}

/* The dotted key of a KEY=VALUE argument, split; FALSE with
 * TH_CONFIG_ERROR_OVERRIDE when the argument is not of that form. */
static gboolean split_override(const char *argument, char ***components, GError **error)
{
    const char *equals = strchr(argument, '=');
    g_autofree char *key_text =
        equals ? g_strstrip(g_strndup(argument, (size_t)(equals - argument))) : NULL;
    if (!key_text || !*key_text) {
        override_syntax_error(error, argument);
        return FALSE;
    }
    g_auto(GStrv) parts = g_strsplit(key_text, ".", -1);
    for (size_t i = 0; parts[i]; i++) {
        if (!is_valid_key_component(parts[i])) {
            override_syntax_error(error, argument);
            return FALSE;
        }
    }
    *components = g_steal_pointer(&parts);
    return TRUE;
}

static gboolean apply_override(th_toml_node *root, const char *argument, GError **error)
{
    g_auto(GStrv) components = NULL;
    if (!split_override(argument, &components, error))
        return FALSE;
    const char *equals = strchr(argument, '=');
    const th_key_schema *key;
    if (!lookup_override_key(argument, components, &key, error))
        return FALSE;
    th_toml_node *value = parse_override_value(equals + 1, key);
    th_toml_node_set_origin(value, argument);
    graft_override(root, components, value, argument);
    return TRUE;
}

/* ---- Loading ------------------------------------------------------------- */

/* The keys only CP-APR reads. */
static const char *const poisson_keys[] = {"cpd.max_inner_iters", "cpd.kappa",
                                           "cpd.kappa_tolerance", "cpd.epsilon",
                                           "cpd.phi_threshold"};

/* Whether a backend option's value names more than one GPU: "all", or a
 * list of ordinals ("0,1"). */
static gboolean several_devices(const char *value)
{
    return strchr(value, ',') != NULL || g_ascii_strncasecmp(value, "all", 3) == 0;
}

static gboolean refuse_devices(const load_context *ctx, const char *key, const char *value,
                               const char *model, GError **error)
{
    const char *where = g_hash_table_lookup(ctx->where, key);
    g_autofree char *quoted = th_config_quote_for_message(value);
    g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_CONFLICT,
                "%s: %s = %s: multi-GPU %s is not implemented yet; name one device (device = N)",
                where ? where : ctx->source_name, key, quoted, model);
    return FALSE;
}

/* A model whose multi-GPU run is not implemented: any backend option that
 * names several devices is refused, before a tensor is read. */
static gboolean refuse_several_devices(const load_context *ctx, const th_config *config,
                                       const char *model, GError **error)
{
    for (guint i = 0; config->plugin_options && i < config->plugin_options->len; ++i) {
        const th_config_option *option = g_ptr_array_index(config->plugin_options, i);
        if (strcmp(option->key, "devices") == 0 && several_devices(option->value))
            return refuse_devices(ctx, "backend.options.devices", option->value, model, error);
    }
    for (guint t = 0; config->plugin_option_tables && t < config->plugin_option_tables->len;
         ++t) {
        const th_config_plugin_options *table = g_ptr_array_index(config->plugin_option_tables, t);
        for (guint i = 0; table->options && i < table->options->len; ++i) {
            const th_config_option *option = g_ptr_array_index(table->options, i);
            if (strcmp(option->key, "devices") != 0 || !several_devices(option->value))
                continue;
            g_autofree char *key = g_strdup_printf("backend.options.%s.devices", table->plugin);
            return refuse_devices(ctx, key, option->value, model, error);
        }
    }
    return TRUE;
}

/* FALSE with a TH_CONFIG_ERROR_CONFLICT whose message starts where `key`
 * was set (the source's name when it was not set). */
static gboolean conflict_at(const load_context *ctx, const char *key, GError **error,
                            const char *format, ...) G_GNUC_PRINTF(4, 5);
static gboolean conflict_at(const load_context *ctx, const char *key, GError **error,
                            const char *format, ...)
{
    const char *where = g_hash_table_lookup(ctx->where, key);
    va_list args;
    va_start(args, format);
    g_autofree char *message = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_CONFLICT, "%s: %s",
                where ? where : ctx->source_name, message);
    return FALSE;
}

/* Whether cpd.constraints makes any mode "nonneg". */
static gboolean any_nonneg(const th_config *config)
{
    for (guint m = 0; m < config->constraints.items->len; ++m)
        if (g_strcmp0(g_ptr_array_index(config->constraints.items, m), "nonneg") == 0)
            return TRUE;
    return FALSE;
}

/* cpd.constraints "nonneg" (for any mode) with a key that contradicts it.
 * (cpd.update = "sweep" with constraints depends on the plugin: a sweep of
 * plugin ABI 1.6 takes them; the plan says so for an older one.) */
static gboolean finish_constraints(const load_context *ctx, const th_config *config,
                                   GError **error)
{
    if (!any_nonneg(config))
        return TRUE;
    if (g_strcmp0(config->model, "poisson") == 0)
        return conflict_at(ctx, "cpd.constraints", error,
                           "cpd.constraints = \"nonneg\" is for the least-squares model; the "
                           "Poisson model (cpd.model = \"poisson\") has nonnegative factors by "
                           "construction: leave cpd.constraints out");
    return TRUE;
}

/* The keys only the least-squares model reads (CP-ALS's regularisation,
 * completion's ridge, the coordinate-descent passes), each with what it
 * is to that model. */
static const struct {
    const char *key, *what;
} least_squares_keys[] = {
    {"cpd.l2", "a weight of its regularised updates"},
    {"cpd.l1", "a weight of its regularised updates"},
    {"cpd.hals_passes", "how many hierarchical-ALS passes its coordinate-descent updates make"},
    {"cpd.hals_budget", "how its coordinate-descent updates choose their passes"},
};

/* The keys of CP-ALS's coordinate-descent (hierarchical ALS) updates. */
static const char *const hals_keys[] = {"cpd.hals_passes", "cpd.hals_budget"};

/* The hierarchical-ALS keys where no update makes passes: completion
 * (whose rows solve exactly, or by a fixed count of passes where
 * nonnegative), or CP-ALS with no mode constrained "nonneg" and every l1
 * 0. (Poisson refuses them with the other least-squares keys.) */
static gboolean finish_hals(const load_context *ctx, const th_config *config, GError **error)
{
    const char *key = NULL;
    for (size_t i = 0; !key && i < G_N_ELEMENTS(hals_keys); ++i)
        if (g_hash_table_contains(ctx->where, hals_keys[i]))
            key = hals_keys[i];
    if (!key || g_strcmp0(config->model, "poisson") == 0)
        return TRUE;
    if (g_strcmp0(config->missing, "unlisted") == 0)
        return conflict_at(ctx, key, error,
                           "%s: tensor completion (tensor.missing = \"unlisted\") solves each "
                           "factor row by row-wise ALS, not by hierarchical-ALS passes over a "
                           "mode; leave it out",
                           key);
    gboolean descent = any_nonneg(config);
    for (guint m = 0; config->l1.values && m < config->l1.values->len; ++m)
        descent = descent || g_array_index(config->l1.values, double, m) > 0.0;
    if (descent)
        return TRUE;
    return conflict_at(ctx, key, error,
                       "%s: only a mode updated by coordinate descent (cpd.constraints = "
                       "\"nonneg\", or cpd.l1 > 0) makes hierarchical-ALS passes, and this run "
                       "has none; set one of those, or leave %s out",
                       key, key);
}

/* The rules of cpd.model that span keys: Poisson's own defaults of
 * tolerance and max_iters (pyttb's cp_apr), its keys with another model,
 * the least-squares keys with Poisson, an update path with Poisson,
 * several GPUs with Poisson. */
static gboolean finish_model(const load_context *ctx, th_config *config, GError **error)
{
    const gboolean poisson = g_strcmp0(config->model, "poisson") == 0;
    for (size_t i = 0; poisson && i < G_N_ELEMENTS(least_squares_keys); ++i) {
        const char *where = g_hash_table_lookup(ctx->where, least_squares_keys[i].key);
        if (!where)
            continue;
        g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_CONFLICT,
                    "%s: %s is a parameter of the least-squares model (cpd.model = "
                    "\"least-squares\": %s); the model is \"poisson\"",
                    where, least_squares_keys[i].key, least_squares_keys[i].what);
        return FALSE;
    }
    if (!poisson) {
        for (size_t i = 0; i < G_N_ELEMENTS(poisson_keys); ++i) {
            const char *where = g_hash_table_lookup(ctx->where, poisson_keys[i]);
            if (!where)
                continue;
            g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_CONFLICT,
                        "%s: %s is a parameter of the Poisson model (cpd.model = \"poisson\"); "
                        "the model is \"%s\"",
                        where, poisson_keys[i], config->model);
            return FALSE;
        }
        return TRUE;
    }
    if (!g_hash_table_contains(ctx->where, "cpd.tolerance"))
        config->tolerance = 1e-4;
    if (!g_hash_table_contains(ctx->where, "cpd.max_iters"))
        config->max_iters = 1000;
    if (g_strcmp0(config->update, "auto") != 0)
        return conflict_at(ctx, "cpd.update", error,
                           "cpd.update = \"%s\": the update paths are the least-squares "
                           "model's; with cpd.model = \"poisson\" the updates always run in "
                           "the backend: leave cpd.update out or set it to \"auto\"",
                           config->update);
    if (!(config->epsilon > 0.0)) {
        const char *where = g_hash_table_lookup(ctx->where, "cpd.epsilon");
        g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_RANGE,
                    "%s: cpd.epsilon: expected a number > 0 (the floor of the model in "
                    "divisions), found %g",
                    where ? where : ctx->source_name, config->epsilon);
        return FALSE;
    }
    return refuse_several_devices(ctx, config, "CP-APR (cpd.model = \"poisson\")", error);
}

/* The keys only completion reads. */
static const char *const completion_keys[] = {"tensor.holdout"};

/* The rules of tensor.missing = "unlisted" (completion) that span keys:
 * its keys without it, the least-squares model only, no update path, no
 * l1, one GPU, a holdout below 1. */
static gboolean finish_missing(const load_context *ctx, const th_config *config, GError **error)
{
    const gboolean unlisted = g_strcmp0(config->missing, "unlisted") == 0;
    if (!unlisted) {
        for (size_t i = 0; i < G_N_ELEMENTS(completion_keys); ++i) {
            const char *where = g_hash_table_lookup(ctx->where, completion_keys[i]);
            if (!where)
                continue;
            g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_CONFLICT,
                        "%s: %s is a parameter of tensor completion (tensor.missing = "
                        "\"unlisted\"); the entries the file does not list are read as zeros "
                        "here (tensor.missing = \"%s\")",
                        where, completion_keys[i], config->missing);
            return FALSE;
        }
        return TRUE;
    }
    if (g_strcmp0(config->model, "poisson") == 0)
        return conflict_at(ctx, "tensor.missing", error,
                           "tensor.missing = \"unlisted\" (completion) fits the least-squares "
                           "model; the Poisson model (cpd.model = \"poisson\") with unknown "
                           "entries is not implemented");
    if (g_strcmp0(config->update, "auto") != 0)
        return conflict_at(ctx, "cpd.update", error,
                           "cpd.update = \"%s\": the update paths are CP-ALS's; completion "
                           "(tensor.missing = \"unlisted\") solves each factor row in the "
                           "backend: leave cpd.update out or set it to \"auto\"",
                           config->update);
    if (g_hash_table_contains(ctx->where, "cpd.l1"))
        return conflict_at(ctx, "cpd.l1", error,
                           "cpd.l1: tensor completion (tensor.missing = \"unlisted\") solves "
                           "each factor row exactly by row-wise ALS, which has no l1 term; leave "
                           "cpd.l1 out (cpd.l2 is its ridge)");
    if (!(config->holdout < 1.0)) {
        const char *where = g_hash_table_lookup(ctx->where, "tensor.holdout");
        g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_RANGE,
                    "%s: tensor.holdout: expected a fraction at least 0 and below 1 (the share "
                    "of the listed entries kept out of training; some must remain to train "
                    "on), found %g",
                    where ? where : ctx->source_name, config->holdout);
        return FALSE;
    }
    return refuse_several_devices(ctx, config, "completion (tensor.missing = \"unlisted\")",
                                  error);
}

static void context_clear(load_context *ctx)
{
    g_free(ctx->config_dir);
    g_free(ctx->current_dir);
    g_hash_table_unref(ctx->where);
}

static th_config *load_tree(const load_context *ctx, th_toml_node *root,
                            const char *const *overrides, GError **error)
{
    for (size_t i = 0; overrides && overrides[i]; i++) {
        if (!apply_override(root, overrides[i], error))
            return NULL;
    }
    g_autoptr(th_config) config = g_new0(th_config, 1);
    config->source_path = g_strdup(ctx->source_name);
    config->plugin_option_tables = g_ptr_array_new_with_free_func(plugin_options_free);
    config->where = g_hash_table_ref(ctx->where);
    apply_defaults(ctx, &root_schema, config);
    if (!walk_table(ctx, root, &root_schema, "", config, error))
        return NULL;
    if (!check_required(ctx, &root_schema, config, error))
        return NULL;
    if (!finish_model(ctx, config, error) || !finish_constraints(ctx, config, error) ||
        !finish_missing(ctx, config, error) || !finish_hals(ctx, config, error))
        return NULL;
    if (!th_config_finish_compare(ctx, root, config, error))
        return NULL;
    return g_steal_pointer(&config);
}

th_config *th_config_load_from_string(const char *name, const char *text, gssize length,
                                      const char *const *overrides, GError **error)
{
    g_return_val_if_fail(name != NULL && text != NULL, NULL);
    size_t size = length < 0 ? strlen(text) : (size_t)length;
    load_context ctx = {.source_name = name,
                        .current_dir = g_get_current_dir(),
                        .where = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)};
    g_autofree char *dir = g_path_get_dirname(name);
    ctx.config_dir = g_canonicalize_filename(dir, ctx.current_dir);

    th_toml_error parse_error = {0};
    th_toml_node *root = th_toml_parse(text, size, &parse_error);
    th_config *config = NULL;
    if (!root) {
        g_autofree char *where =
            parse_error.line ? g_strdup_printf("%s:%" PRIu32 ":%" PRIu32, name, parse_error.line,
                                               parse_error.column)
                             : g_strdup(name);
        g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_SYNTAX, "%s: TOML syntax error: %s",
                    where, parse_error.message);
        th_toml_error_clear(&parse_error);
    } else {
        config = load_tree(&ctx, root, overrides, error);
        th_toml_node_free(root);
    }
    context_clear(&ctx);
    return config;
}

/* The largest config file read. A config is a few KB of text; a path to
 * something else (/dev/zero, a huge log, a tensor) must fail at once instead
 * of growing memory until the process is killed. */
#define CONFIG_MAX_BYTES ((size_t)16 << 20)

/* Where in `text` the byte at `at` lies, 1-based, for a message. */
static void line_and_column(const char *text, const char *at, size_t *line, size_t *column)
{
    const char *line_start = text;
    *line = 1;
    for (const char *p = text; p < at; ++p) {
        if (*p == '\n') {
            ++*line;
            line_start = p + 1;
        }
    }
    *column = (size_t)(at - line_start) + 1u;
}

/* Reads the whole file, at most CONFIG_MAX_BYTES of text without a NUL
 * byte, with the errno text on failure (GLib's own message would repeat the
 * file name in its own wording). */
static char *read_file(const char *path, size_t *length, GError **error)
{
    FILE *file = fopen(path, "rb");
    if (!file) {
        int saved = errno;
        g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_IO, "%s: cannot read: %s", path,
                    g_strerror(saved));
        return NULL;
    }
    g_autoptr(GString) text = g_string_new(NULL);
    char chunk[65536];
    size_t got;
    gboolean too_large = FALSE;
    const char *nul = NULL;
    while (!too_large && !nul && (got = fread(chunk, 1, sizeof chunk, file)) > 0) {
        too_large = got > CONFIG_MAX_BYTES - text->len;
        if (!too_large) {
            g_string_append_len(text, chunk, (gssize)got);
            nul = memchr(text->str + text->len - got, '\0', got);
        }
    }
    int failed = !too_large && !nul && ferror(file);
    int saved = errno;
    fclose(file);
    if (failed) {
        g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_IO, "%s: cannot read: %s", path,
                    g_strerror(saved));
        return NULL;
    }
    if (too_large) {
        g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_IO,
                    "%s: larger than %zu bytes (16 MiB), the most a config file may take "
                    "(is this the config file?)",
                    path, CONFIG_MAX_BYTES);
        return NULL;
    }
    if (nul) {
        size_t line = 0, column = 0;
        line_and_column(text->str, nul, &line, &column);
        g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_SYNTAX,
                    "%s:%zu:%zu: a NUL byte: a config file is TOML text (is this a binary "
                    "file?)",
                    path, line, column);
        return NULL;
    }
    *length = text->len;
    return g_string_free(g_steal_pointer(&text), FALSE);
}

th_config *th_config_load(const char *path, const char *const *overrides, GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    /* A malformed command line is reported as such before any file is read. */
    for (size_t i = 0; overrides && overrides[i]; i++) {
        g_auto(GStrv) components = NULL;
        if (!split_override(overrides[i], &components, error))
            return NULL;
    }
    size_t length = 0;
    g_autofree char *text = read_file(path, &length, error);
    if (!text)
        return NULL;
    return th_config_load_from_string(path, text, (gssize)length, overrides, error);
}

void th_config_free(th_config *config)
{
    if (!config)
        return;
    g_free(config->source_path);
    g_free(config->tensor_path);
    g_free(config->missing);
    g_free(config->update);
    g_free(config->model);
    g_clear_pointer(&config->constraints.items, g_ptr_array_unref);
    g_clear_pointer(&config->l1.values, g_array_unref);
    g_free(config->plugin);
    g_clear_pointer(&config->search_path, g_ptr_array_unref);
    g_clear_pointer(&config->plugin_options, g_ptr_array_unref);
    g_clear_pointer(&config->plugin_option_tables, g_ptr_array_unref);
    g_free(config->output_dir);
    g_free(config->output_format);
    th_config_compare_free(config->compare);
    g_clear_pointer(&config->where, g_hash_table_unref);
    g_free(config);
}

const char *th_config_where(const th_config *config, const char *key)
{
    const char *where = config->where ? g_hash_table_lookup(config->where, key) : NULL;
    return where ? where : config->source_path;
}

/* ---- Listing ------------------------------------------------------------- */

typedef void (*foreach_fn)(const char *key, const th_config_value *value, void *user_data);

static char *render_string_list(const GPtrArray *paths)
{
    GString *text = g_string_new("[");
    for (guint i = 0; paths && i < paths->len; i++) {
        g_autofree char *escaped = th_escape_for_message(g_ptr_array_index(paths, i));
        g_string_append_printf(text, "%s\"%s\"", i ? ", " : "", escaped);
    }
    g_string_append_c(text, ']');
    return g_string_free(text, FALSE);
}

/* An option's text back in the type it was written with (the text is what
 * th_config_render_option_value made of it, so it parses). */
static void call_with_option(foreach_fn fn, const char *name, const char *text,
                             th_config_value_kind kind, void *user_data)
{
    th_config_value value = {.kind = kind, .text = text};
    if (kind == TH_CONFIG_VALUE_INTEGER)
        value.integer = g_ascii_strtoll(text, NULL, 10);
    else if (kind == TH_CONFIG_VALUE_NUMBER)
        value.number = g_ascii_strtod(text, NULL);
    else if (kind == TH_CONFIG_VALUE_BOOLEAN)
        value.boolean = strcmp(text, "true") == 0;
    fn(name, &value, user_data);
}

static void foreach_sweep(const th_config_sweep *sweep, const char *name, foreach_fn fn,
                          void *user_data)
{
    for (guint i = 0; i < sweep->values->len; i++) {
        g_autofree char *element = g_strdup_printf("%s[%u]", name, i);
        call_with_option(fn, element, g_ptr_array_index(sweep->values, i),
                         g_array_index(sweep->kinds, th_config_value_kind, i), user_data);
    }
}

/* Each option of `options` (may be NULL) as PREFIX.KEY. */
static void foreach_option(const GPtrArray *options, const char *prefix, foreach_fn fn,
                           void *user_data)
{
    for (guint j = 0; options && j < options->len; j++) {
        const th_config_option *option = g_ptr_array_index(options, j);
        g_autofree char *option_name = dotted_name(prefix, option->key);
        call_with_option(fn, option_name, option->value, option->kind, user_data);
    }
}

/* `target` is th_config or an object's struct; `prefix` its dotted name. */
static void foreach_in_table(const void *target, const th_table_schema *schema,
                             const char *prefix, foreach_fn fn, void *user_data)
{
    for (size_t i = 0; i < schema->n_keys; i++) {
        const th_key_schema *key = &schema->keys[i];
        const void *field = const_field_at(target, key);
        g_autofree char *name = dotted_name(prefix, key->name);
        g_autofree char *text = NULL;
        th_config_value value = {.kind = TH_CONFIG_VALUE_STRING};
        switch (key->type) {
        case TH_KEY_STRING:
        case TH_KEY_PATH:
        case TH_KEY_PLUGIN: {
            const char *string = *(char *const *)field;
            if (!string)
                continue; /* an optional key left unset */
            text = g_strdup(string);
            break;
        }
        case TH_KEY_PATH_LIST:
            value.kind = TH_CONFIG_VALUE_STRING_LIST;
            value.items = *(GPtrArray *const *)field;
            text = render_string_list(value.items);
            break;
        case TH_KEY_CHOICES: {
            const th_config_choices *choices = field;
            if (choices->listed) {
                value.kind = TH_CONFIG_VALUE_STRING_LIST;
                value.items = choices->items;
                text = render_string_list(value.items);
            } else {
                text = g_strdup(g_ptr_array_index(choices->items, 0));
            }
            break;
        }
        case TH_KEY_NUMBERS: {
            const th_config_numbers *numbers = field;
            if (numbers->listed) {
                value.kind = TH_CONFIG_VALUE_NUMBER_LIST;
                value.numbers = numbers->values;
                GString *list = g_string_new("[");
                for (guint j = 0; j < numbers->values->len; j++) {
                    g_autofree char *number =
                        format_double(g_array_index(numbers->values, double, j));
                    g_string_append_printf(list, "%s%s", j ? ", " : "", number);
                }
                g_string_append_c(list, ']');
                text = g_string_free(list, FALSE);
            } else {
                value.kind = TH_CONFIG_VALUE_NUMBER;
                value.number = g_array_index(numbers->values, double, 0);
                text = format_double(value.number);
            }
            break;
        }
        case TH_KEY_INTEGER:
            value.kind = TH_CONFIG_VALUE_INTEGER;
            /* uint64 keys are bounded by INT64_MAX (cpd.seed, nnz) when loaded. */
            value.integer = key->size == sizeof(uint32_t) ? (int64_t) * (const uint32_t *)field
                                                          : (int64_t) * (const uint64_t *)field;
            text = g_strdup_printf("%" PRId64, value.integer);
            break;
        case TH_KEY_NUMBER:
            value.kind = TH_CONFIG_VALUE_NUMBER;
            value.number = *(const double *)field;
            text = format_double(value.number);
            break;
        case TH_KEY_BOOLEAN:
            value.kind = TH_CONFIG_VALUE_BOOLEAN;
            value.boolean = *(const gboolean *)field;
            text = g_strdup(value.boolean ? "true" : "false");
            break;
        case TH_KEY_OPTIONS: {
            foreach_option(*(GPtrArray *const *)field, name, fn, user_data);
            /* Then the [KEY.NAME] tables, as KEY.NAME.OPTION (only the
             * top-level [backend.options] has them: `target` is the config). */
            const GPtrArray *tables =
                key->per_plugin_tables ? ((const th_config *)target)->plugin_option_tables : NULL;
            for (guint t = 0; tables && t < tables->len; t++) {
                const th_config_plugin_options *table = g_ptr_array_index(tables, t);
                g_autofree char *table_name = dotted_name(name, table->plugin);
                foreach_option(table->options, table_name, fn, user_data);
            }
            continue;
        }
        case TH_KEY_SWEEP: { /* empty once expanded into backends */
            const GPtrArray *sweeps = *(GPtrArray *const *)field;
            for (guint j = 0; sweeps && j < sweeps->len; j++) {
                const th_config_sweep *sweep = g_ptr_array_index(sweeps, j);
                g_autofree char *sweep_name = dotted_name(name, sweep->key);
                foreach_sweep(sweep, sweep_name, fn, user_data);
            }
            continue;
        }
        case TH_KEY_SECTION:
            foreach_in_table(target, key->section, name, fn, user_data);
            continue;
        case TH_KEY_OBJECT: {
            const void *object = *(void *const *)field;
            if (object)
                foreach_in_table(object, key->section, name, fn, user_data);
            continue;
        }
        case TH_KEY_TABLE_ARRAY: {
            const GPtrArray *elements = *(GPtrArray *const *)field;
            for (guint j = 0; elements && j < elements->len; j++) {
                g_autofree char *element_name = g_strdup_printf("%s[%u]", name, j);
                foreach_in_table(g_ptr_array_index(elements, j), key->section, element_name, fn,
                                 user_data);
            }
            continue;
        }
        }
        value.text = text;
        fn(name, &value, user_data);
    }
}

void th_config_foreach(const th_config *config,
                       void (*fn)(const char *key, const th_config_value *value, void *user_data),
                       void *user_data)
{
    g_return_if_fail(config != NULL && fn != NULL);
    foreach_in_table(config, &root_schema, "", fn, user_data);
}
