/* The [compare] section of the run configuration: its schema (the fields
 * live in config.h's th_compare_* structs), the sweeps of [[compare.backend]]
 * and their expansion into one backend per combination, and the rules that
 * span tables. config.c walks the document with these tables and calls
 * th_config_finish_compare() once the whole document is read. */
#include "config/config_internal.h"

#include "base/message_text.h"
#include "tensor/synth.h"

#include <inttypes.h>
#include <stdint.h>

/* At most this many backends after sweeps are expanded: a typo such as a
 * sweep over 10 keys must not turn into a day of runs. */
#define TH_COMPARE_MAX_BACKENDS 1024u

/* ---- The schema ------------------------------------------------------- */

static const char *const compare_job_choices[] = {"mttkrp", "cpd", NULL};
static const char *const compare_timer_choices[] = {"host", "backend", NULL};

#define TH_TENSOR_FIELD(member) TH_FIELD_OF(th_compare_tensor_config, member)
static const th_key_schema compare_tensor_keys[] = {
    {.name = "label", .type = TH_KEY_STRING, TH_TENSOR_FIELD(label),
     .doc = "the tensor's name in tables and charts"},
    {.name = "path", .type = TH_KEY_PATH, TH_TENSOR_FIELD(path), .doc = "a tensor file"},
    {.name = "synthetic", .type = TH_KEY_STRING, TH_TENSOR_FIELD(synthetic),
     .doc = "a FROSTT preset of tensorhost-synth, instead of a file"},
    {.name = "nnz", .type = TH_KEY_INTEGER, TH_TENSOR_FIELD(nnz), .min = 1, .max = INT64_MAX,
     .doc = "synthetic: nonzeros (default the preset's)"},
    {.name = "seed", .type = TH_KEY_INTEGER, TH_TENSOR_FIELD(seed), .min = 0, .max = INT64_MAX,
     .default_integer = 1, .doc = "synthetic: the generator's seed"},
};

#define TH_BACKEND_FIELD(member) TH_FIELD_OF(th_compare_backend_config, member)
static const th_key_schema compare_backend_keys[] = {
    {.name = "label", .type = TH_KEY_STRING, TH_BACKEND_FIELD(label),
     .doc = "the backend's name in tables and charts"},
    {.name = "plugin", .type = TH_KEY_PLUGIN, TH_BACKEND_FIELD(plugin), .required = TRUE,
     .doc = "a plugin name, \"auto\", or a path to a .so"},
    {.name = "options", .type = TH_KEY_OPTIONS, TH_BACKEND_FIELD(options),
     .doc = "key/value pairs handed to the plugin"},
    {.name = "sweep", .type = TH_KEY_SWEEP, TH_BACKEND_FIELD(sweep),
     .doc = "options given as lists: one backend per combination"},
};

#define TH_COMPARE_FIELD(member) TH_FIELD_OF(th_compare_config, member)
static const th_key_schema compare_output_keys[] = {
    {.name = "dir", .type = TH_KEY_PATH, TH_COMPARE_FIELD(output_dir),
     .doc = "where the table, CSV, JSON and charts go (default output.dir)"},
    {.name = "charts", .type = TH_KEY_BOOLEAN, TH_COMPARE_FIELD(charts), .default_boolean = TRUE,
     .doc = "draw the PNG and SVG charts"},
};

static void compare_tensor_free(gpointer data);
static void compare_backend_free(gpointer data);
static gboolean finish_compare_tensor(const load_context *ctx, const th_toml_node *node,
                                      void *object, const char *name, GError **error);
static gboolean finish_compare_backend(const load_context *ctx, const th_toml_node *node,
                                       void *object, const char *name, GError **error);

static const th_object_type compare_tensor_type = {
    sizeof(th_compare_tensor_config), compare_tensor_free,
    offsetof(th_compare_tensor_config, where), finish_compare_tensor};
static const th_object_type compare_backend_type = {
    sizeof(th_compare_backend_config), compare_backend_free,
    offsetof(th_compare_backend_config, where), finish_compare_backend};
const th_object_type th_config_compare_type = {sizeof(th_compare_config),
                                              th_config_compare_free, SIZE_MAX, NULL};

static const th_table_schema compare_tensor_schema =
    TH_ARRAY_TABLE("compare.tensor", compare_tensor_keys);
static const th_table_schema compare_backend_schema =
    TH_ARRAY_TABLE("compare.backend", compare_backend_keys);
static const th_table_schema compare_output_schema =
    TH_TABLE("compare.output", compare_output_keys);

static const th_key_schema compare_keys[] = {
    {.name = "job", .type = TH_KEY_STRING, TH_COMPARE_FIELD(job), .default_string = "mttkrp",
     .choices = compare_job_choices, .doc = "what is timed: one MTTKRP per mode, or CP-ALS"},
    {.name = "baseline", .type = TH_KEY_STRING, TH_COMPARE_FIELD(baseline),
     .doc = "the label of the backend the others are checked and measured against"},
    {.name = "repeats", .type = TH_KEY_INTEGER, TH_COMPARE_FIELD(repeats), .min = 1,
     .max = 1000000, .default_integer = 10, .doc = "timed runs"},
    {.name = "warmup", .type = TH_KEY_INTEGER, TH_COMPARE_FIELD(warmup), .min = 0,
     .max = 1000000, .default_integer = 2, .doc = "untimed runs before the timed ones"},
    {.name = "tolerance", .type = TH_KEY_NUMBER, TH_COMPARE_FIELD(tolerance),
     .min_number = 0.0, .default_number = 1e-4,
     .doc = "allowed relative error vs the baseline (mttkrp) or fit difference (cpd)"},
    {.name = "rank", .type = TH_KEY_INTEGER, TH_COMPARE_FIELD(rank), .min = 1, .max = 4096,
     .doc = "rank of the factors (default cpd.rank)"},
    {.name = "timer", .type = TH_KEY_STRING, TH_COMPARE_FIELD(timer), .default_string = "host",
     .choices = compare_timer_choices,
     .doc = "the time speedups and charts use: host wall time or the backend's own"},
    {.name = "tensor", .type = TH_KEY_TABLE_ARRAY, TH_COMPARE_FIELD(tensors),
     .section = &compare_tensor_schema, .object = &compare_tensor_type,
     .doc = "the tensors (default tensor.path)"},
    {.name = "backend", .type = TH_KEY_TABLE_ARRAY, TH_COMPARE_FIELD(backends),
     .section = &compare_backend_schema, .object = &compare_backend_type,
     .doc = "the backends compared"},
    {.name = "output", .type = TH_KEY_SECTION, .section = &compare_output_schema},
};

const th_table_schema th_config_compare_schema = TH_TABLE("compare", compare_keys);

/* ---- Freeing ------------------------------------------------------------ */

static void compare_tensor_free(gpointer data)
{
    th_compare_tensor_config *tensor = data;
    g_free(tensor->label);
    g_free(tensor->path);
    g_free(tensor->synthetic);
    g_free(tensor->where);
    g_free(tensor);
}

static void compare_backend_free(gpointer data)
{
    th_compare_backend_config *backend = data;
    g_free(backend->label);
    g_free(backend->plugin);
    g_clear_pointer(&backend->options, g_ptr_array_unref);
    g_clear_pointer(&backend->sweep, g_ptr_array_unref);
    g_free(backend->where);
    g_free(backend);
}

void th_config_compare_free(gpointer data)
{
    th_compare_config *compare = data;
    if (!compare)
        return;
    g_free(compare->job);
    g_free(compare->baseline);
    g_free(compare->timer);
    g_clear_pointer(&compare->tensors, g_ptr_array_unref);
    g_clear_pointer(&compare->backends, g_ptr_array_unref);
    g_free(compare->output_dir);
    g_free(compare);
}

void th_config_sweep_free(gpointer data)
{
    th_config_sweep *sweep = data;
    g_free(sweep->key);
    g_clear_pointer(&sweep->values, g_ptr_array_unref);
    g_clear_pointer(&sweep->kinds, g_array_unref);
    g_free(sweep);
}

/* ---- Sweeps ------------------------------------------------------------- */

/* One sweep entry: a non-empty array of scalars, each rendered as an
 * option value would be. */
static th_config_sweep *read_sweep_entry(const load_context *ctx, const th_toml_node *entry,
                                         const char *name, GError **error)
{
    g_autofree char *escaped = th_escape_for_message(entry->key);
    g_autofree char *entry_name = dotted_name(name, escaped);
    static const char expected[] =
        "a non-empty array of strings, integers, floats or booleans";
    if (entry->kind != TH_TOML_ARRAY || entry->n_children == 0) {
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_TYPE, entry, entry_name, expected);
        return NULL;
    }
    g_autoptr(GPtrArray) values = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GArray) kinds = g_array_new(FALSE, FALSE, sizeof(th_config_value_kind));
    for (size_t i = 0; i < entry->n_children; i++) {
        const th_toml_node *element = entry->children[i];
        char *value = th_config_render_option_value(element);
        if (!value || (element->kind == TH_TOML_STRING && has_nul(element))) {
            g_free(value);
            g_autofree char *element_name = g_strdup_printf("%s[%zu]", entry_name, i);
            th_config_value_error(ctx, error, TH_CONFIG_ERROR_TYPE, element, element_name,
                                  "a string, integer, float or boolean");
            return NULL;
        }
        g_ptr_array_add(values, value);
        const th_config_value_kind kind = th_config_option_value_kind(element);
        g_array_append_val(kinds, kind);
    }
    th_config_sweep *sweep = g_new0(th_config_sweep, 1);
    sweep->key = g_strdup(entry->key);
    sweep->values = g_steal_pointer(&values);
    sweep->kinds = g_steal_pointer(&kinds);
    return sweep;
}

gboolean th_config_assign_sweep(const load_context *ctx, const th_toml_node *node,
                                const th_key_schema *key, const char *name, void *target,
                                GError **error)
{
    if (node->kind != TH_TOML_TABLE) {
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_TYPE, node, name,
                              "a table of arrays, such as { kappa = [33, 66] }");
        return FALSE;
    }
    GPtrArray *sweeps = *(GPtrArray **)field_at(target, key);
    g_ptr_array_set_size(sweeps, 0);
    for (size_t i = 0; i < node->n_children; i++) {
        th_config_sweep *sweep = read_sweep_entry(ctx, node->children[i], name, error);
        if (!sweep)
            return FALSE;
        g_ptr_array_add(sweeps, sweep);
    }
    return TRUE;
}

/* ---- One [[compare.tensor]] or [[compare.backend]] ------------------------ */

/* The node at a dotted path of the document, or NULL. */
static const th_toml_node *find_node(const th_toml_node *root, const char *dotted)
{
    g_auto(GStrv) components = g_strsplit(dotted, ".", -1);
    const th_toml_node *node = root;
    for (size_t i = 0; node && components[i]; i++)
        node = node->kind == TH_TOML_TABLE ? th_toml_table_find(node, components[i]) : NULL;
    return node;
}

static void conflict_error(const load_context *ctx, GError **error, const th_toml_node *node,
                           const char *key, const char *why)
{
    g_autofree char *where = th_config_location(ctx, node, TRUE);
    g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_CONFLICT, "%s: key '%s': %s", where, key,
                why);
}

/* "uber-2014-sample" for ".../uber-2014-sample.tns.gz". */
static char *label_from_path(const char *path)
{
    static const char *const suffixes[] = {".gz", ".tns", ".txt", ".sptensor"};
    char *label = g_path_get_basename(path);
    for (size_t i = 0; i < G_N_ELEMENTS(suffixes); i++) {
        size_t length = strlen(label), suffix = strlen(suffixes[i]);
        if (length > suffix && g_str_has_suffix(label, suffixes[i]))
            label[length - suffix] = '\0';
    }
    return label;
}

static char *preset_names(void)
{
    GString *names = g_string_new(NULL);
    for (size_t i = 0; i < th_synth_preset_count; i++)
        g_string_append_printf(names, "%s%s", i ? ", " : "", th_synth_presets[i].name);
    return g_string_free(names, FALSE);
}

/* prod(dims), saturating at INT64_MAX. */
static uint64_t preset_cells(const th_synth_preset *preset)
{
    uint64_t cells = 1;
    for (uint32_t m = 0; m < preset->nmodes; m++) {
        if (cells > (uint64_t)INT64_MAX / preset->dims[m])
            return (uint64_t)INT64_MAX;
        cells *= preset->dims[m];
    }
    return cells;
}

static gboolean finish_synthetic_tensor(const load_context *ctx, const th_toml_node *node,
                                        th_compare_tensor_config *tensor, const char *name,
                                        GError **error)
{
    const th_synth_preset *preset = th_synth_find_preset(tensor->synthetic);
    if (!preset) {
        g_autofree char *names = preset_names();
        g_autofree char *expected = g_strdup_printf("a synthetic preset (%s)", names);
        g_autofree char *key = dotted_name(name, "synthetic");
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_RANGE,
                              th_toml_table_find(node, "synthetic"), key, expected);
        return FALSE;
    }
    uint64_t cells = preset_cells(preset);
    if (tensor->nnz > cells) {
        g_autofree char *expected =
            g_strdup_printf("an integer from 1 to %" PRIu64 " (the cells of %s)", cells,
                            preset->name);
        g_autofree char *key = dotted_name(name, "nnz");
        th_config_value_error(ctx, error, TH_CONFIG_ERROR_RANGE,
                              th_toml_table_find(node, "nnz"), key, expected);
        return FALSE;
    }
    if (!tensor->label)
        tensor->label = g_strdup(preset->name);
    /* Synthetic data must never pass for real data in a table or a chart. */
    if (!strstr(tensor->label, "synthetic")) {
        char *labelled = g_strconcat(tensor->label, " (synthetic)", NULL);
        g_free(tensor->label);
        tensor->label = labelled;
    }
    return TRUE;
}

static gboolean finish_compare_tensor(const load_context *ctx, const th_toml_node *node,
                                      void *object, const char *name, GError **error)
{
    th_compare_tensor_config *tensor = object;
    if ((tensor->path != NULL) == (tensor->synthetic != NULL)) {
        g_autofree char *where = th_config_location(ctx, node, FALSE);
        g_set_error(error, TH_CONFIG_ERROR,
                    tensor->path ? TH_CONFIG_ERROR_CONFLICT : TH_CONFIG_ERROR_MISSING,
                    "%s: %s: give either 'path' (a tensor file) or 'synthetic' (a preset "
                    "name), %s",
                    where, name, tensor->path ? "not both" : "found neither");
        return FALSE;
    }
    if (tensor->synthetic)
        return finish_synthetic_tensor(ctx, node, tensor, name, error);
    static const char *const synthetic_only[] = {"nnz", "seed"};
    for (size_t i = 0; i < G_N_ELEMENTS(synthetic_only); i++) {
        const th_toml_node *key_node = th_toml_table_find(node, synthetic_only[i]);
        if (key_node) {
            g_autofree char *key = dotted_name(name, synthetic_only[i]);
            conflict_error(ctx, error, key_node, key,
                           "only a synthetic tensor takes it, not a file");
            return FALSE;
        }
    }
    if (!tensor->label)
        tensor->label = label_from_path(tensor->path);
    return TRUE;
}

static gboolean finish_compare_backend(const load_context *ctx, const th_toml_node *node,
                                       void *object, const char *name, GError **error)
{
    th_compare_backend_config *backend = object;
    for (guint i = 0; i < backend->sweep->len; i++) {
        const th_config_sweep *sweep = g_ptr_array_index(backend->sweep, i);
        for (guint j = 0; j < backend->options->len; j++) {
            const th_config_option *option = g_ptr_array_index(backend->options, j);
            if (strcmp(option->key, sweep->key) != 0)
                continue;
            const th_toml_node *sweep_node = find_node(node, "sweep");
            g_autofree char *sweep_name = dotted_name(name, "sweep");
            g_autofree char *escaped = th_escape_for_message(sweep->key);
            g_autofree char *key = dotted_name(sweep_name, escaped);
            g_autofree char *why = g_strdup_printf("'%s' is also in %s.options; give it in one "
                                                   "place",
                                                   escaped, name);
            conflict_error(ctx, error, th_toml_table_find(sweep_node, sweep->key), key, why);
            return FALSE;
        }
    }
    if (!backend->label) {
        if (is_plugin_path(backend->plugin)) {
            backend->label = g_path_get_basename(backend->plugin);
            if (g_str_has_suffix(backend->label, ".so") && strlen(backend->label) > 3)
                backend->label[strlen(backend->label) - 3] = '\0';
        } else {
            backend->label = g_strdup(backend->plugin);
        }
    }
    return TRUE;
}

/* ---- Expanding sweeps ---------------------------------------------------- */

static th_config_option *option_new(const char *key, const char *value,
                                     th_config_value_kind kind)
{
    th_config_option *option = g_new0(th_config_option, 1);
    option->key = g_strdup(key);
    option->value = g_strdup(value);
    option->kind = kind;
    return option;
}

/* One backend of a sweep: `base` with the values chosen by `choice`. */
static th_compare_backend_config *sweep_instance(const th_compare_backend_config *base,
                                                 const size_t *choice)
{
    th_compare_backend_config *backend = g_new0(th_compare_backend_config, 1);
    backend->plugin = g_strdup(base->plugin);
    backend->where = g_strdup(base->where);
    backend->sweep = g_ptr_array_new_with_free_func(th_config_sweep_free);
    backend->options = g_ptr_array_new_with_free_func(th_config_option_free);
    for (guint i = 0; i < base->options->len; i++) {
        const th_config_option *option = g_ptr_array_index(base->options, i);
        g_ptr_array_add(backend->options, option_new(option->key, option->value, option->kind));
    }
    GString *label = g_string_new(base->label);
    for (guint i = 0; i < base->sweep->len; i++) {
        const th_config_sweep *sweep = g_ptr_array_index(base->sweep, i);
        const char *value = g_ptr_array_index(sweep->values, choice[i]);
        g_ptr_array_add(backend->options,
                        option_new(sweep->key, value,
                                   g_array_index(sweep->kinds, th_config_value_kind, choice[i])));
        g_string_append_printf(label, "%c%s=%s", i ? ',' : '[', sweep->key, value);
    }
    if (base->sweep->len > 0)
        g_string_append_c(label, ']');
    backend->label = g_string_free(label, FALSE);
    return backend;
}

/* Appends one backend per combination of `base`'s sweep values (the first
 * key varying slowest), or `base` itself without a sweep. */
static gboolean expand_sweep(const th_compare_backend_config *base, GPtrArray *out,
                             GError **error)
{
    uint64_t combinations = 1;
    for (guint i = 0; i < base->sweep->len; i++) {
        const th_config_sweep *sweep = g_ptr_array_index(base->sweep, i);
        combinations *= sweep->values->len;
        if (combinations + out->len > TH_COMPARE_MAX_BACKENDS) {
            g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_RANGE,
                        "%s: the sweeps of [[compare.backend]] make more than %u backends",
                        base->where, TH_COMPARE_MAX_BACKENDS);
            return FALSE;
        }
    }
    if (out->len + 1 > TH_COMPARE_MAX_BACKENDS) {
        g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_RANGE,
                    "%s: more than %u [[compare.backend]] tables", base->where,
                    TH_COMPARE_MAX_BACKENDS);
        return FALSE;
    }
    g_autofree size_t *choice = g_new0(size_t, base->sweep->len + 1);
    for (uint64_t n = 0; n < combinations; n++) {
        g_ptr_array_add(out, sweep_instance(base, choice));
        for (guint i = base->sweep->len; i-- > 0;) { /* odometer: last key fastest */
            const th_config_sweep *sweep = g_ptr_array_index(base->sweep, i);
            if (++choice[i] < sweep->values->len)
                break;
            choice[i] = 0;
        }
    }
    return TRUE;
}

static gboolean expand_sweeps(th_compare_config *compare, GError **error)
{
    GPtrArray *expanded = g_ptr_array_new_with_free_func(compare_backend_free);
    for (guint i = 0; i < compare->backends->len; i++) {
        if (!expand_sweep(g_ptr_array_index(compare->backends, i), expanded, error)) {
            g_ptr_array_unref(expanded);
            return FALSE;
        }
    }
    g_ptr_array_unref(compare->backends);
    compare->backends = expanded;
    return TRUE;
}

/* ---- Rules across tables ------------------------------------------------- */

/* Labels name rows, columns and chart bars: two alike would be ambiguous. */
static gboolean check_unique_labels(GPtrArray *elements, size_t label_offset,
                                    size_t where_offset, const char *what, GError **error)
{
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    for (guint i = 0; i < elements->len; i++) {
        const char *element = g_ptr_array_index(elements, i);
        const char *label = *(char *const *)(element + label_offset);
        const char *where = *(char *const *)(element + where_offset);
        const char *first = g_hash_table_lookup(seen, label);
        if (first) {
            g_autofree char *quoted = th_config_quote_for_message(label);
            g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_CONFLICT,
                        "%s: the %s label %s is already used at %s; give each one its own "
                        "'label'",
                        where, what, quoted, first);
            return FALSE;
        }
        g_hash_table_insert(seen, g_strdup(label), g_strdup(where));
    }
    return TRUE;
}

static gboolean resolve_baseline(const load_context *ctx, const th_toml_node *root,
                                 th_compare_config *compare, GError **error)
{
    const th_compare_backend_config *first = g_ptr_array_index(compare->backends, 0);
    if (!compare->baseline) {
        compare->baseline = g_strdup(first->label);
        return TRUE;
    }
    GString *labels = g_string_new(NULL);
    for (guint i = 0; i < compare->backends->len; i++) {
        const th_compare_backend_config *backend = g_ptr_array_index(compare->backends, i);
        if (strcmp(backend->label, compare->baseline) == 0) {
            g_string_free(labels, TRUE);
            return TRUE;
        }
        if (i < 8)
            g_string_append_printf(labels, "%s%s", i ? ", " : "", backend->label);
        else if (i == 8)
            g_string_append(labels, ", ...");
    }
    g_autofree char *listed = g_string_free(labels, FALSE);
    g_autofree char *expected =
        g_strdup_printf("the label of a [[compare.backend]] (%s)", listed);
    th_config_value_error(ctx, error, TH_CONFIG_ERROR_RANGE, find_node(root, "compare.baseline"),
                          "compare.baseline", expected);
    return FALSE;
}

/* Keys of a single run that a comparison has no use for: refusing them
 * beats silently ignoring what the user wrote. */
static gboolean check_unused_in_compare(const load_context *ctx, const th_toml_node *root,
                                        GError **error)
{
    static const struct {
        const char *key, *why;
    } unused[] = {
        {"backend.plugin", "a comparison takes its plugins from [[compare.backend]]"},
        {"backend.options", "each [[compare.backend]] has its own options"},
        {"output.write_factors", "a comparison writes no factors"},
        {"output.format", "a comparison writes no factors"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(unused); i++) {
        const th_toml_node *node = find_node(root, unused[i].key);
        if (node) {
            conflict_error(ctx, error, node, unused[i].key, unused[i].why);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean finish_compare_tensors(const load_context *ctx, const th_toml_node *root,
                                       th_config *config, GError **error)
{
    th_compare_config *compare = config->compare;
    const th_toml_node *path_node = find_node(root, "tensor.path");
    if (compare->tensors->len > 0 && config->tensor_path) {
        conflict_error(ctx, error, path_node, "tensor.path",
                       "a comparison with [[compare.tensor]] tables takes its tensors from "
                       "them; remove one or the other");
        return FALSE;
    }
    if (compare->tensors->len == 0) {
        if (!config->tensor_path) {
            g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_MISSING,
                        "%s: missing required key 'tensor.path' (or [[compare.tensor]] tables)",
                        ctx->source_name);
            return FALSE;
        }
        th_compare_tensor_config *tensor = g_new0(th_compare_tensor_config, 1);
        tensor->path = g_strdup(config->tensor_path);
        tensor->label = label_from_path(tensor->path);
        tensor->seed = 1;
        tensor->where = th_config_location(ctx, path_node, FALSE);
        g_ptr_array_add(compare->tensors, tensor);
    }
    return check_unique_labels(compare->tensors, offsetof(th_compare_tensor_config, label),
                               offsetof(th_compare_tensor_config, where), "tensor", error);
}

/* The rules of [compare] that span tables: run once the whole document is
 * read, since [compare] may come before the [tensor] or [cpd] it relies on. */
gboolean th_config_finish_compare(const load_context *ctx, const th_toml_node *root,
                                  th_config *config, GError **error)
{
    th_compare_config *compare = config->compare;
    if (!compare)
        return TRUE;
    if (!check_unused_in_compare(ctx, root, error)
        || !finish_compare_tensors(ctx, root, config, error))
        return FALSE;
    if (compare->backends->len == 0) {
        g_autofree char *where = th_config_location(ctx, find_node(root, "compare"), TRUE);
        g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_MISSING,
                    "%s: [compare] needs at least one [[compare.backend]] table", where);
        return FALSE;
    }
    if (!expand_sweeps(compare, error)
        || !check_unique_labels(compare->backends, offsetof(th_compare_backend_config, label),
                                offsetof(th_compare_backend_config, where), "backend", error)
        || !resolve_baseline(ctx, root, compare, error))
        return FALSE;
    if (compare->rank == 0)
        compare->rank = config->rank;
    if (!compare->output_dir)
        compare->output_dir = g_strdup(config->output_dir);
    return TRUE;
}
