#include "config/config_types.h"

#include <string.h>

G_DEFINE_QUARK(th-config-error-quark, th_config_error)

GPtrArray *th_config_options_for_plugin(GPtrArray *common, GPtrArray *tables,
                                        const char *plugin_id)
{
    GPtrArray *merged = g_ptr_array_new();
    const th_config_plugin_options *own = NULL;
    for (guint i = 0; tables && plugin_id && i < tables->len; i++) {
        const th_config_plugin_options *table = g_ptr_array_index(tables, i);
        if (strcmp(table->plugin, plugin_id) == 0)
            own = table;
    }
    for (guint i = 0; common && i < common->len; i++) {
        th_config_option *option = g_ptr_array_index(common, i);
        gboolean replaced = FALSE;
        for (guint j = 0; own && j < own->options->len && !replaced; j++)
            replaced = strcmp(((th_config_option *)g_ptr_array_index(own->options, j))->key,
                              option->key) == 0;
        if (!replaced)
            g_ptr_array_add(merged, option);
    }
    for (guint j = 0; own && j < own->options->len; j++)
        g_ptr_array_add(merged, g_ptr_array_index(own->options, j));
    return merged;
}
