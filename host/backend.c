#include "backend.h"

#include <string.h>

#include "config.h"
#include "log.h"

/* The entry's fields are copied into a full-size struct by the loader, so an
 * optional function absent from an older plugin reads as NULL here. */
#define ENTRY(b) (&(b)->plugin->entry)

static gboolean check_call(th_backend *backend, th_status status, const char *what,
                           const char *message, GError **error)
{
    if (status == TH_OK)
        return TRUE;
    th_plugin_set_call_error(error, backend->plugin, what, status, message);
    return FALSE;
}

static th_backend *open_one(const char *plugin, GPtrArray *search_path, GPtrArray *options,
                            th_status *create_status, GError **error)
{
    g_autoptr(GPtrArray) path = th_plugin_search_path(search_path);
    g_autofree char *resolved = th_plugin_resolve(plugin, path, error);
    if (!resolved)
        return NULL;
    th_host_services services = th_host_services_make();
    th_plugin *loaded = th_plugin_load(resolved, &services, error);
    if (!loaded)
        return NULL;

    guint n_options = options ? options->len : 0;
    g_autofree th_option *abi_options = g_new0(th_option, n_options + 1);
    for (guint i = 0; i < n_options; ++i) {
        const th_config_option *option = g_ptr_array_index(options, i);
        abi_options[i].key = option->key;
        abi_options[i].value = option->value;
    }
    char message[TH_ERROR_SIZE] = "";
    th_instance *instance = NULL;
    th_status status =
        loaded->entry.create(abi_options, n_options, &loaded->services, &instance, message);
    if (create_status)
        *create_status = status;
    if (status != TH_OK || !instance) {
        if (status == TH_OK)
            g_strlcpy(message, "create() returned no instance", sizeof message);
        th_plugin_set_call_error(error, loaded, "cannot create an instance",
                                 status == TH_OK ? TH_ERR_INTERNAL : status, message);
        th_plugin_unload(loaded);
        return NULL;
    }
    th_backend *backend = g_new0(th_backend, 1);
    backend->plugin = loaded;
    backend->instance = instance;
    return backend;
}

th_backend *th_backend_open(const char *plugin, GPtrArray *search_path, GPtrArray *options,
                            GError **error)
{
    if (g_strcmp0(plugin, "auto") != 0)
        return open_one(plugin, search_path, options, NULL, error);

    /* "auto": the GPU backend when it is installed and finds a device, else
     * the CPU reference. Options go to whichever is chosen; a GPU-only option
     * then fails loudly on the CPU backend rather than being dropped. */
    g_autoptr(GError) gpu_error = NULL;
    th_status status = TH_OK;
    th_backend *backend = open_one("gpu-adaptive", search_path, options, &status, &gpu_error);
    if (backend)
        return backend;
    gboolean unavailable = g_error_matches(gpu_error, TH_PLUGIN_ERROR, TH_PLUGIN_ERROR_NOT_FOUND) ||
                           status == TH_ERR_NO_DEVICE;
    if (!unavailable) {
        g_propagate_error(error, g_steal_pointer(&gpu_error));
        return NULL;
    }
    th_log(TH_LOG_INFO, "backend auto: gpu-adaptive unavailable (%s); using cpu-reference",
           gpu_error->message);
    return open_one("cpu-reference", search_path, options, NULL, error);
}

void th_backend_close(th_backend *backend)
{
    if (!backend)
        return;
    if (backend->instance)
        backend->plugin->entry.destroy(backend->instance);
    th_plugin_unload(backend->plugin);
    g_free(backend->dims);
    g_free(backend);
}

const th_plugin_info *th_backend_info(const th_backend *backend) { return backend->plugin->info; }

gboolean th_backend_load_tensor(th_backend *backend, const th_sptensor *tensor, uint32_t rank,
                                GError **error)
{
    th_coo_tensor view = {
        .struct_size = (uint32_t)sizeof(th_coo_tensor),
        .nmodes = tensor->nmodes,
        .nnz = tensor->nnz,
        .dims = tensor->dims,
        .indices = (const uint32_t *const *)tensor->indices,
        .values = tensor->values,
        .norm_squared = th_sptensor_norm_squared(tensor),
    };
    char message[TH_ERROR_SIZE] = "";
    gint64 start = g_get_monotonic_time();
    th_status status = ENTRY(backend)->load_tensor(backend->instance, &view, rank, message);
    backend->load_seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    if (!check_call(backend, status, "cannot load the tensor", message, error))
        return FALSE;
    backend->nmodes = tensor->nmodes;
    backend->rank = rank;
    g_free(backend->dims);
    backend->dims = g_memdup2(tensor->dims, sizeof(th_index) * tensor->nmodes);
    return TRUE;
}

gboolean th_backend_set_factor(th_backend *backend, uint32_t mode, const double *data,
                               GError **error)
{
    char message[TH_ERROR_SIZE] = "";
    th_status status = ENTRY(backend)->set_factor(backend->instance, mode, data, message);
    return check_call(backend, status, "set_factor failed", message, error);
}

gboolean th_backend_get_factor(th_backend *backend, uint32_t mode, double *data, GError **error)
{
    char message[TH_ERROR_SIZE] = "";
    th_status status = ENTRY(backend)->get_factor(backend->instance, mode, data, message);
    return check_call(backend, status, "get_factor failed", message, error);
}

gboolean th_backend_mttkrp(th_backend *backend, uint32_t mode, GError **error)
{
    char message[TH_ERROR_SIZE] = "";
    th_status status = ENTRY(backend)->mttkrp(backend->instance, mode, message);
    return check_call(backend, status, "mttkrp failed", message, error);
}

gboolean th_backend_get_mttkrp_result(th_backend *backend, uint32_t mode, double *data,
                                      GError **error)
{
    char message[TH_ERROR_SIZE] = "";
    th_status status = ENTRY(backend)->get_mttkrp_result(backend->instance, mode, data, message);
    return check_call(backend, status, "get_mttkrp_result failed", message, error);
}

gboolean th_backend_has_als_update(const th_backend *backend)
{
    return backend->plugin->entry.als_update != NULL;
}

gboolean th_backend_als_update(th_backend *backend, uint32_t mode, const double *w, int32_t norm,
                               double *lambda, double *gram, double *inner, GError **error)
{
    th_als_output out = {
        .struct_size = (uint32_t)sizeof(th_als_output),
        .lambda = lambda,
        .gram = gram,
        .inner = inner,
    };
    char message[TH_ERROR_SIZE] = "";
    th_status status = ENTRY(backend)->als_update(backend->instance, mode, w, norm, &out, message);
    return check_call(backend, status, "als_update failed", message, error);
}

gboolean th_backend_has_als_sweep(const th_backend *backend)
{
    return backend->plugin->entry.als_sweep != NULL;
}

gboolean th_backend_als_sweep(th_backend *backend, int32_t norm, double *const *grams,
                              double *lambda, double *inner, uint32_t *modes_done,
                              GError **error)
{
    th_als_sweep_io io = {
        .struct_size = (uint32_t)sizeof(th_als_sweep_io),
        .norm = norm,
        .nmodes = backend->nmodes,
        /* Out of range on purpose: a plugin that forgets to set it fails the
         * check below instead of passing for a full or empty sweep. */
        .modes_done = UINT32_MAX,
        .grams = grams,
        .lambda = lambda,
        .inner = inner,
    };
    if (!th_plugin_als_sweep(backend->plugin, backend->instance, &io, error))
        return FALSE;
    if (io.modes_done > backend->nmodes) {
        g_set_error(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_INTERNAL,
                    "%s: als_sweep returned TH_OK with modes_done %u%s for a %u-mode tensor; "
                    "expected 0 to %u (a bug in the plugin)",
                    th_backend_info(backend)->id, io.modes_done,
                    io.modes_done == UINT32_MAX ? " (never set)" : "", backend->nmodes,
                    backend->nmodes);
        return FALSE;
    }
    *modes_done = io.modes_done;
    return TRUE;
}

gboolean th_backend_runtime_info(th_backend *backend, th_runtime_info *info, GError **error)
{
    return th_plugin_runtime_info(backend->plugin, backend->instance, info, error);
}

gboolean th_backend_mode_info(th_backend *backend, uint32_t mode, th_mode_info *info,
                              GError **error)
{
    return th_plugin_mode_info(backend->plugin, backend->instance, mode, info, error);
}
