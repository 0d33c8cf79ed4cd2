/* `tensorhost --list-plugins`: every plugin file on the search path, loaded
 * and described, broken ones with why. */
#include "plugin_list.h"

#include <stdio.h>

#include "plugin/backend.h"
#include "base/log.h"
#include "base/message_text.h"
#include "plugin/plugin_loader.h"

static gint compare_names(gconstpointer a, gconstpointer b)
{
    return g_strcmp0(*(char *const *)a, *(char *const *)b);
}

/* What a plugin can do: its optional functions (ABI 1.2: the functions
 * decide, not the flags), and the GPU flag, which only describes. */
static void describe_capabilities(const th_plugin *plugin, GString *out)
{
    const th_plugin_info *info = plugin->info;
    g_string_append_printf(out, "max modes %u, max rank %u, %s", info->max_modes, info->max_rank,
                           info->value_type == TH_VALUE_F32 ? "f32" : "f64");
    if (plugin->entry.als_update)
        g_string_append(out, ", als-update");
    if (plugin->entry.als_sweep)
        g_string_append(out, ", als-sweep");
    if (plugin->entry.init_factors)
        g_string_append(out, ", init-factors");
    /* ABI 1.4: models beyond least squares need both functions. */
    if (plugin->entry.generalized_mttkrp && plugin->entry.factor_update)
        g_string_append(out, ", generalized-mttkrp");
    /* ABI 1.5: tensor completion's row solves. */
    if (plugin->entry.row_least_squares)
        g_string_append(out, ", row-least-squares");
    /* ABI 1.5: nonnegative CP's update in the backend. */
    if (plugin->entry.als_update_nonneg)
        g_string_append(out, ", als-update-nonneg");
    /* ABI 1.7: CP-APR's inner iterations of a mode in one call. */
    if (plugin->entry.multiplicative_updates)
        g_string_append(out, ", multiplicative-updates");
    if (info->flags & TH_CAP_GPU)
        g_string_append(out, ", gpu");
}

/* Whether the plugin runs here, as `auto` and a run would find out: an
 * instance with no options (a GPU plugin on a host without a usable device
 * refuses it). Said only when it does not. */
static void print_usability(const char *file)
{
    g_autoptr(GError) error = NULL;
    th_backend *backend = th_backend_open(file, NULL, NULL, NULL, &error);
    if (backend) {
        th_backend_close(backend);
        return;
    }
    g_autofree char *why = th_escape_control(error->message);
    printf("    NOT USABLE HERE: %s\n", why);
}

int th_print_plugin_list(GPtrArray *config_search_path)
{
    g_autoptr(GPtrArray) path = th_plugin_search_path(config_search_path);
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    unsigned found = 0;
    for (guint d = 0; d < path->len; ++d) {
        const char *dir_path = g_ptr_array_index(path, d);
        g_autoptr(GDir) dir = g_dir_open(dir_path, 0, NULL);
        if (!dir)
            continue;
        g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
        for (const char *name; (name = g_dir_read_name(dir));)
            if (g_str_has_suffix(name, ".so"))
                g_ptr_array_add(names, g_strdup(name));
        g_ptr_array_sort(names, compare_names);
        for (guint i = 0; i < names->len; ++i) {
            const char *name = g_ptr_array_index(names, i);
            g_autofree char *file = g_build_filename(dir_path, name, NULL);
            /* A name found earlier on the path shadows later ones. */
            if (g_hash_table_contains(seen, name)) {
                printf("%-16s (shadowed by an earlier directory) %s\n", name, file);
                continue;
            }
            g_hash_table_add(seen, g_strdup(name));
            th_host_services services = th_host_services_make();
            g_autoptr(GError) error = NULL;
            th_plugin *plugin = th_plugin_load(file, &services, &error);
            if (!plugin) {
                g_autofree char *why = th_escape_control(error->message);
                printf("%-16s BROKEN: %s\n", name, why);
                continue;
            }
            g_autoptr(GString) caps = g_string_new(NULL);
            describe_capabilities(plugin, caps);
            /* A plugin's strings are its own: one line each, whatever they hold. */
            g_autofree char *id = th_escape_control(plugin->info->id);
            g_autofree char *version = th_escape_control(plugin->info->version);
            g_autofree char *title = th_escape_control(plugin->info->name);
            g_autofree char *description = th_escape_control(plugin->info->description);
            printf("%-16s %-8s ABI %u.%u  %s\n    %s\n    %s\n    %s\n", id, version,
                   plugin->entry.abi_version.major, plugin->entry.abi_version.minor, title,
                   description, caps->str, plugin->path);
            th_plugin_unload(plugin);
            print_usability(file);
            ++found;
        }
    }
    if (found == 0) {
        fprintf(stderr, "tensorhost: no plugins found; searched:\n");
        for (guint d = 0; d < path->len; ++d)
            fprintf(stderr, "  %s\n", (const char *)g_ptr_array_index(path, d));
        return 1;
    }
    return 0;
}
