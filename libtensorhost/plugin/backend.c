#include "plugin/backend.h"

#include <string.h>

#include "config/config_types.h"
#include "base/log.h"
#include "base/message_text.h"
#include "dist/dist_services.h"

/* ---- The door -------------------------------------------------------------
 * The only code that calls a plugin's instance functions. The loader copies
 * the entry into a full-size struct, so an optional function absent from an
 * older plugin reads as NULL here. */

static th_status unsupported(const char *function, char *err)
{
    g_snprintf(err, TH_ERROR_SIZE, "the plugin does not implement %s", function);
    return TH_ERR_UNSUPPORTED;
}

th_status th_call_create(const th_plugin *plugin, const th_option *options, uint32_t n_options,
                         th_instance **out, char *err)
{
    return plugin->entry.create(options, n_options, &plugin->services, out, err);
}

void th_call_destroy(const th_plugin *plugin, th_instance *instance)
{
    plugin->entry.destroy(instance);
}

th_status th_call_load_tensor(const th_plugin *plugin, th_instance *instance,
                              const th_coo_tensor *tensor, uint32_t rank, char *err)
{
    return plugin->entry.load_tensor(instance, tensor, rank, err);
}

th_status th_call_set_factor(const th_plugin *plugin, th_instance *instance, uint32_t mode,
                             const double *data, char *err)
{
    return plugin->entry.set_factor(instance, mode, data, err);
}

th_status th_call_get_factor(const th_plugin *plugin, th_instance *instance, uint32_t mode,
                             double *data, char *err)
{
    return plugin->entry.get_factor(instance, mode, data, err);
}

th_status th_call_mttkrp(const th_plugin *plugin, th_instance *instance, uint32_t mode, char *err)
{
    return plugin->entry.mttkrp(instance, mode, err);
}

th_status th_call_get_mttkrp_result(const th_plugin *plugin, th_instance *instance,
                                    uint32_t mode, double *data, char *err)
{
    return plugin->entry.get_mttkrp_result(instance, mode, data, err);
}

th_status th_call_als_update(const th_plugin *plugin, th_instance *instance, uint32_t mode,
                             const double *w, int32_t norm, th_als_output *out, char *err)
{
    if (!plugin->entry.als_update)
        return unsupported("als_update", err);
    return plugin->entry.als_update(instance, mode, w, norm, out, err);
}

th_status th_call_get_runtime_info(const th_plugin *plugin, th_instance *instance,
                                   th_runtime_info *info, char *err)
{
    if (!plugin->entry.get_runtime_info)
        return unsupported("get_runtime_info", err);
    return plugin->entry.get_runtime_info(instance, info, err);
}

th_status th_call_get_mode_info(const th_plugin *plugin, th_instance *instance, uint32_t mode,
                                th_mode_info *info, char *err)
{
    if (!plugin->entry.get_mode_info)
        return unsupported("get_mode_info", err);
    return plugin->entry.get_mode_info(instance, mode, info, err);
}

th_status th_call_als_sweep(const th_plugin *plugin, th_instance *instance,
                            th_als_sweep_io *io, char *err)
{
    if (!plugin->entry.als_sweep)
        return unsupported("als_sweep (optional, ABI 1.1)", err);
    return plugin->entry.als_sweep(instance, io, err);
}

th_status th_call_init_factors(const th_plugin *plugin, th_instance *instance,
                               th_init_factors_io *io, char *err)
{
    if (!plugin->entry.init_factors)
        return unsupported("init_factors (optional, ABI 1.3)", err);
    return plugin->entry.init_factors(instance, io, err);
}

th_status th_call_generalized_mttkrp(const th_plugin *plugin, th_instance *instance,
                                     th_generalized_mttkrp_io *io, char *err)
{
    if (!plugin->entry.generalized_mttkrp)
        return unsupported("generalized_mttkrp (optional, ABI 1.4)", err);
    return plugin->entry.generalized_mttkrp(instance, io, err);
}

th_status th_call_factor_update(const th_plugin *plugin, th_instance *instance,
                                th_factor_update_io *io, char *err)
{
    if (!plugin->entry.factor_update)
        return unsupported("factor_update (optional, ABI 1.4)", err);
    return plugin->entry.factor_update(instance, io, err);
}

th_status th_call_als_update_nonneg(const th_plugin *plugin, th_instance *instance,
                                    th_nonneg_update_io *io, th_als_output *out, char *err)
{
    if (!plugin->entry.als_update_nonneg)
        return unsupported("als_update_nonneg (optional, ABI 1.5)", err);
    return plugin->entry.als_update_nonneg(instance, io, out, err);
}

th_status th_call_row_least_squares(const th_plugin *plugin, th_instance *instance,
                                    th_row_least_squares_io *io, char *err)
{
    if (!plugin->entry.row_least_squares)
        return unsupported("row_least_squares (optional, ABI 1.5)", err);
    return plugin->entry.row_least_squares(instance, io, err);
}

th_status th_call_multiplicative_updates(const th_plugin *plugin, th_instance *instance,
                                         th_multiplicative_updates_io *io, char *err)
{
    if (!plugin->entry.multiplicative_updates)
        return unsupported("multiplicative_updates (optional, ABI 1.7)", err);
    return plugin->entry.multiplicative_updates(instance, io, err);
}

gboolean th_instance_runtime_info(const th_plugin *plugin, th_instance *instance,
                                  th_runtime_info *info, GError **error)
{
    th_runtime_info_init(info);
    if (plugin->entry.get_runtime_info == NULL)
        return TRUE;
    char err[TH_ERROR_SIZE] = "";
    th_status status = th_call_get_runtime_info(plugin, instance, info, err);
    info->struct_size = (uint32_t)sizeof *info;
    /* The strings come from the plugin: never trust their terminators. */
    info->device[sizeof info->device - 1] = '\0';
    info->details[sizeof info->details - 1] = '\0';
    if (status != TH_OK) {
        th_plugin_set_call_error(error, plugin, "get_runtime_info", status, err);
        return FALSE;
    }
    return TRUE;
}

gboolean th_instance_mode_info(const th_plugin *plugin, th_instance *instance, uint32_t mode,
                               th_mode_info *info, GError **error)
{
    th_mode_info_init(info);
    if (plugin->entry.get_mode_info == NULL)
        return TRUE;
    char err[TH_ERROR_SIZE] = "";
    th_status status = th_call_get_mode_info(plugin, instance, mode, info, err);
    info->struct_size = (uint32_t)sizeof *info;
    info->scheme[sizeof info->scheme - 1] = '\0';
    if (status != TH_OK) {
        g_autofree char *what = g_strdup_printf("get_mode_info(mode %u)", mode);
        th_plugin_set_call_error(error, plugin, what, status, err);
        return FALSE;
    }
    return TRUE;
}

gboolean th_instance_als_sweep(const th_plugin *plugin, th_instance *instance,
                               th_als_sweep_io *io, GError **error)
{
    if (plugin->entry.als_sweep == NULL) {
        g_set_error(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_UNSUPPORTED,
                    "%s: als_sweep: the plugin does not implement als_sweep (optional, "
                    "ABI 1.1)",
                    plugin->info ? plugin->info->id : plugin->path);
        return FALSE;
    }
    char err[TH_ERROR_SIZE] = "";
    th_status status = th_call_als_sweep(plugin, instance, io, err);
    if (status != TH_OK) {
        th_plugin_set_call_error(error, plugin, "als_sweep", status, err);
        return FALSE;
    }
    return TRUE;
}

/* ---- Backends --------------------------------------------------------------- */

static gboolean check_call(th_backend *backend, th_status status, const char *what,
                           const char *message, GError **error)
{
    if (status == TH_OK)
        return TRUE;
    th_plugin_set_call_error(error, backend->plugin, what, status, message);
    return FALSE;
}

/* Creates an instance of the loaded plugin with the options meant for it:
 * `common`, then its own table's. */
static th_backend *create_instance(th_plugin *loaded, GPtrArray *common, GPtrArray *tables,
                                   th_status *create_status, GError **error)
{
    g_autoptr(GPtrArray) options = th_config_options_for_plugin(common, tables, loaded->info->id);
    g_autofree th_option *abi_options = g_new0(th_option, options->len + 1);
    for (guint i = 0; i < options->len; ++i) {
        const th_config_option *option = g_ptr_array_index(options, i);
        abi_options[i].key = option->key;
        abi_options[i].value = option->value;
    }
    char message[TH_ERROR_SIZE] = "";
    th_instance *instance = NULL;
    th_status status = th_call_create(loaded, abi_options, options->len, &instance, message);
    if (create_status)
        *create_status = status;
    if (status != TH_OK || !instance) {
        if (status == TH_OK)
            g_strlcpy(message, "create() returned no instance", sizeof message);
        th_plugin_set_call_error(error, loaded, "cannot create an instance",
                                 status == TH_OK ? TH_ERR_INTERNAL : status, message);
        return NULL;
    }
    th_backend *backend = g_new0(th_backend, 1);
    backend->plugin = loaded;
    backend->instance = instance;
    return backend;
}

static th_backend *open_one(const char *plugin, GPtrArray *search_path, GPtrArray *common,
                            GPtrArray *tables, th_status *create_status, GError **error)
{
    g_autoptr(GPtrArray) path = th_plugin_search_path(search_path);
    g_autofree char *resolved = th_plugin_resolve(plugin, path, error);
    if (!resolved)
        return NULL;
    th_host_services services = th_host_services_make();
    th_dist_host_services(&services);
    th_plugin *loaded = th_plugin_load(resolved, &services, error);
    if (!loaded)
        return NULL;
    th_backend *backend = create_instance(loaded, common, tables, create_status, error);
    if (!backend)
        th_plugin_unload(loaded);
    return backend;
}

/* Every [backend.options.NAME] table must name the plugin that runs, one
 * that is installed or one of the project's own: a table for the other
 * backend of "auto" is fine, a misspelt one is an error rather than options
 * silently never used. */
static gboolean check_option_tables(GPtrArray *tables, GPtrArray *search_path,
                                    const char *running_id, GError **error)
{
    if (!tables || tables->len == 0)
        return TRUE;
    g_autoptr(GPtrArray) path = th_plugin_search_path(search_path);
    g_autoptr(GPtrArray) installed = th_plugin_installed_names(path);
    /* The project's own plugins count as known where they are not built (no
     * CUDA), so one run file serves hosts with and without a GPU. */
    static const char *const first_party[] = {"cpu-reference", "gpu-adaptive", "gpu-scheme1",
                                              "gpu-scheme2"};
    for (size_t i = 0; i < G_N_ELEMENTS(first_party); ++i)
        g_ptr_array_add(installed, g_strdup(first_party[i]));
    for (guint i = 0; i < tables->len; ++i) {
        const th_config_plugin_options *table = g_ptr_array_index(tables, i);
        if (strcmp(table->plugin, running_id) == 0)
            continue;
        gboolean known = FALSE;
        for (guint j = 0; j < installed->len && !known; ++j)
            known = strcmp(g_ptr_array_index(installed, j), table->plugin) == 0;
        if (known)
            continue;
        const char *nearest =
            th_nearest_name(table->plugin, (const char *const *)installed->pdata, installed->len);
        g_autofree char *hint =
            nearest ? g_strdup_printf(" (did you mean '%s'?)", nearest) : g_strdup("");
        g_autofree char *name = th_escape_for_message(table->plugin);
        g_set_error(error, TH_CONFIG_ERROR, TH_CONFIG_ERROR_UNKNOWN_KEY,
                    "%s: [backend.options.%s]: no plugin '%s' is installed, so these options "
                    "would never be used%s",
                    table->where, name, name, hint);
        return FALSE;
    }
    return TRUE;
}

/* "auto": the GPU backend when it is installed and finds a device, else the
 * CPU reference. The GPU plugins look for a device before they read their
 * options, so a host without one falls back whatever the options say. */
static th_backend *open_auto(GPtrArray *search_path, GPtrArray *common, GPtrArray *tables,
                             unsigned needs, const char *who, GError **error)
{
    g_autoptr(GError) gpu_error = NULL;
    th_status status = TH_OK;
    th_backend *backend =
        open_one("gpu-adaptive", search_path, common, tables, &status, &gpu_error);
    const char *lacks = NULL;
    if (backend && (needs & TH_BACKEND_NEEDS_GENERALIZED) &&
        !th_backend_has_generalized_mttkrp(backend))
        lacks = "generalized_mttkrp and factor_update (plugin ABI 1.4)";
    else if (backend && (needs & TH_BACKEND_NEEDS_ROW_LEAST_SQUARES) &&
             !th_backend_has_row_least_squares(backend))
        lacks = "row_least_squares (plugin ABI 1.5) or generalized_mttkrp (1.4)";
    if (lacks) {
        th_log(TH_LOG_INFO, "backend auto: gpu-adaptive lacks %s, which %s needs; using "
                            "cpu-reference",
               lacks, who ? who : "this run");
        th_backend_close(backend);
        return open_one("cpu-reference", search_path, common, tables, NULL, error);
    }
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
    return open_one("cpu-reference", search_path, common, tables, NULL, error);
}

th_backend *th_backend_open_for(const char *plugin, GPtrArray *search_path, GPtrArray *options,
                                GPtrArray *option_tables, unsigned needs, const char *who,
                                GError **error)
{
    th_backend *backend =
        g_strcmp0(plugin, "auto") == 0
            ? open_auto(search_path, options, option_tables, needs, who, error)
            : open_one(plugin, search_path, options, option_tables, NULL, error);
    if (backend &&
        !check_option_tables(option_tables, search_path, backend->plugin->info->id, error)) {
        th_backend_close(backend);
        return NULL;
    }
    return backend;
}

th_backend *th_backend_open(const char *plugin, GPtrArray *search_path, GPtrArray *options,
                            GPtrArray *option_tables, GError **error)
{
    return th_backend_open_for(plugin, search_path, options, option_tables,
                               TH_BACKEND_NEEDS_NOTHING, NULL, error);
}

th_backend th_backend_borrow(th_plugin *plugin, th_instance *instance, uint32_t nmodes,
                             uint32_t rank, const th_index *dims)
{
    return (th_backend){
        .plugin = plugin,
        .instance = instance,
        .nmodes = nmodes,
        .rank = rank,
        .dims = (th_index *)(uintptr_t)dims, /* read only: a borrowed view is never closed */
    };
}

static void free_owned(th_backend *backend);

void th_backend_close(th_backend *backend)
{
    if (!backend)
        return;
    if (backend->instance)
        th_call_destroy(backend->plugin, backend->instance);
    th_plugin_unload(backend->plugin);
    free_owned(backend);
    g_free(backend->dims);
    g_free(backend);
}

const th_plugin_info *th_backend_info(const th_backend *backend) { return backend->plugin->info; }

static th_coo_tensor coo_view(const th_sptensor *tensor)
{
    return (th_coo_tensor){
        .struct_size = (uint32_t)sizeof(th_coo_tensor),
        .nmodes = tensor->nmodes,
        .nnz = tensor->nnz,
        .dims = tensor->dims,
        .indices = (const uint32_t *const *)tensor->indices,
        .values = tensor->values,
        .norm_squared = th_sptensor_norm_squared(tensor),
    };
}

static void free_owned(th_backend *backend)
{
    g_clear_pointer(&backend->owned_rows, g_free);
    backend->owned_processes = 0;
}

static gboolean load_view(th_backend *backend, const th_sptensor *tensor,
                          const th_coo_tensor *view, uint32_t rank, GError **error)
{
    char message[TH_ERROR_SIZE] = "";
    gint64 start = g_get_monotonic_time();
    free_owned(backend);
    th_status status = th_call_load_tensor(backend->plugin, backend->instance, view, rank, message);
    backend->load_seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    if (!check_call(backend, status, "cannot load the tensor", message, error))
        return FALSE;
    backend->nmodes = tensor->nmodes;
    backend->rank = rank;
    g_free(backend->dims);
    backend->dims = g_memdup2(tensor->dims, sizeof(th_index) * tensor->nmodes);
    return TRUE;
}

gboolean th_backend_load_tensor(th_backend *backend, const th_sptensor *tensor, uint32_t rank,
                                GError **error)
{
    const th_coo_tensor view = coo_view(tensor);
    return load_view(backend, tensor, &view, rank, error);
}

gboolean th_backend_takes_mode_nonzeros(th_backend *backend)
{
    th_runtime_info info;
    g_autoptr(GError) error = NULL;
    return th_backend_abi_minor(backend) >= 10 &&
           th_backend_runtime_info(backend, &info, &error) && info.mode_nonzeros != 0;
}

gboolean th_backend_load_mode_tensors(th_backend *backend, th_sptensor *const *mode_tensors,
                                      uint32_t rank, uint32_t processes, uint64_t *owned_rows,
                                      GError **error)
{
    const uint32_t n = mode_tensors[0]->nmodes;
    th_coo_tensor views[TH_MAX_MODES] = {0};
    const th_coo_tensor *per_mode[TH_MAX_MODES];
    for (uint32_t m = 0; m < n; ++m) {
        views[m] = coo_view(mode_tensors[m]);
        per_mode[m] = &views[m];
    }
    th_coo_tensor view = views[0];
    view.mode_nonzeros = per_mode;
    if (!load_view(backend, mode_tensors[0], &view, rank, error)) {
        g_free(owned_rows);
        return FALSE;
    }
    backend->owned_processes = processes;
    backend->owned_rows = owned_rows;
    return TRUE;
}

gboolean th_backend_set_factor(th_backend *backend, uint32_t mode, const double *data,
                               GError **error)
{
    char message[TH_ERROR_SIZE] = "";
    th_status status = th_call_set_factor(backend->plugin, backend->instance, mode, data, message);
    return check_call(backend, status, "set_factor failed", message, error);
}

gboolean th_backend_get_factor(th_backend *backend, uint32_t mode, double *data, GError **error)
{
    char message[TH_ERROR_SIZE] = "";
    th_status status = th_call_get_factor(backend->plugin, backend->instance, mode, data, message);
    return check_call(backend, status, "get_factor failed", message, error);
}

gboolean th_backend_mttkrp(th_backend *backend, uint32_t mode, GError **error)
{
    char message[TH_ERROR_SIZE] = "";
    th_status status = th_call_mttkrp(backend->plugin, backend->instance, mode, message);
    return check_call(backend, status, "mttkrp failed", message, error);
}

gboolean th_backend_get_mttkrp_result(th_backend *backend, uint32_t mode, double *data,
                                      GError **error)
{
    char message[TH_ERROR_SIZE] = "";
    th_status status =
        th_call_get_mttkrp_result(backend->plugin, backend->instance, mode, data, message);
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
    th_status status =
        th_call_als_update(backend->plugin, backend->instance, mode, w, norm, &out, message);
    return check_call(backend, status, "als_update failed", message, error);
}

gboolean th_backend_has_als_sweep(const th_backend *backend)
{
    return backend->plugin->entry.als_sweep != NULL;
}

uint32_t th_backend_abi_minor(const th_backend *backend)
{
    return backend->plugin->entry.abi_version.minor;
}

gboolean th_backend_takes_abi_1_6(const th_backend *backend)
{
    return th_backend_abi_minor(backend) >= 6;
}

/* The refusal of in-fields of ABI 1.`minor` for a plugin built before
 * them: it would read its own, shorter struct and ignore them. */
static gboolean refuse_for_older_abi(const th_backend *backend, const char *function,
                                     const char *fields, uint32_t minor, GError **error)
{
    const th_plugin_info *info = th_backend_info(backend);
    g_set_error(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_UNSUPPORTED,
                "%s: %s with %s needs plugin ABI 1.%u; plugin '%s' was built against ABI "
                "%u.%u, whose %s ignores them",
                info->id, function, fields, minor, info->id,
                (unsigned)backend->plugin->entry.abi_version.major,
                (unsigned)backend->plugin->entry.abi_version.minor, function);
    return FALSE;
}

gboolean th_sweep_terms_active(const th_sweep_terms *terms, uint32_t nmodes)
{
    if (!terms)
        return FALSE;
    gboolean active = terms->ridge != 0.0;
    for (uint32_t m = 0; m < nmodes; ++m) {
        active = active || (terms->constraints && terms->constraints[m] != TH_CONSTRAINT_NONE);
        active = active || (terms->l1 && terms->l1[m] != 0.0);
    }
    return active;
}

gboolean th_backend_als_sweep(th_backend *backend, int32_t norm, double *const *grams,
                              double *lambda, double *inner, uint32_t *modes_done,
                              GError **error)
{
    return th_backend_als_sweep_with(backend, norm, NULL, grams, lambda, inner, modes_done,
                                     error);
}

gboolean th_backend_als_sweep_with(th_backend *backend, int32_t norm,
                                   const th_sweep_terms *terms, double *const *grams,
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
        /* The 1.6 fields' defaults: the plain sweep. */
        .hals_sweeps = 1,
    };
    if (th_sweep_terms_active(terms, backend->nmodes)) {
        *modes_done = 0;
        if (!th_backend_takes_abi_1_6(backend))
            return refuse_for_older_abi(backend, "als_sweep", "constraints, l1 or a ridge", 6u,
                                        error);
        if (terms->hals_mode_sweeps) {
            if (th_backend_abi_minor(backend) < 9)
                return refuse_for_older_abi(backend, "als_sweep",
                                            "a different number of passes for some modes", 9u,
                                            error);
            io.hals_mode_sweeps = terms->hals_mode_sweeps;
        }
        io.constraints = terms->constraints;
        io.l1 = terms->l1;
        io.ridge = terms->ridge;
        io.scale = terms->scale;
        io.hals_sweeps = terms->hals_sweeps;
        io.hals_tolerance = terms->hals_tolerance;
    }
    char message[TH_ERROR_SIZE] = "";
    const th_status status = th_call_als_sweep(backend->plugin, backend->instance, &io, message);
    if (!check_call(backend, status, "als_sweep", message, error)) {
        /* A cancelled sweep says which modes it finished; any other failure
         * leaves nothing the caller may rely on. */
        const gboolean cancelled =
            error && g_error_matches(*error, TH_PLUGIN_STATUS_ERROR, TH_ERR_CANCELLED);
        *modes_done = cancelled && io.modes_done <= backend->nmodes ? io.modes_done : 0;
        return FALSE;
    }
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

gboolean th_backend_has_init_factors(const th_backend *backend)
{
    return backend->plugin->entry.init_factors != NULL;
}

gboolean th_backend_init_factors(th_backend *backend, uint64_t seed, double *const *grams,
                                 GError **error)
{
    th_init_factors_io io = {
        .struct_size = (uint32_t)sizeof(th_init_factors_io),
        .nmodes = backend->nmodes,
        .seed = seed,
        .grams = grams,
    };
    char message[TH_ERROR_SIZE] = "";
    const th_status status =
        th_call_init_factors(backend->plugin, backend->instance, &io, message);
    return check_call(backend, status, "init_factors failed", message, error);
}

gboolean th_backend_has_generalized_mttkrp(const th_backend *backend)
{
    return backend->plugin->entry.generalized_mttkrp != NULL &&
           backend->plugin->entry.factor_update != NULL;
}

gboolean th_backend_generalized_mttkrp(th_backend *backend, uint32_t mode, int32_t elementwise,
                                       int32_t reduction, double epsilon,
                                       const double *weights, double *reduced, GError **error)
{
    th_generalized_mttkrp_io io = {
        .struct_size = (uint32_t)sizeof(th_generalized_mttkrp_io),
        .mode = mode,
        .elementwise = elementwise,
        .reduction = reduction,
        .epsilon = epsilon,
        .weights = weights,
        .reduced = 0.0,
    };
    char message[TH_ERROR_SIZE] = "";
    const th_status status =
        th_call_generalized_mttkrp(backend->plugin, backend->instance, &io, message);
    if (!check_call(backend, status, "generalized_mttkrp failed", message, error))
        return FALSE;
    if (reduced)
        *reduced = io.reduced;
    return TRUE;
}

gboolean th_backend_factor_update(th_backend *backend, uint32_t mode, int32_t operation,
                                  double *vector, double threshold, double tolerance,
                                  double offset, double *violation, uint64_t *count, GError **error)
{
    th_factor_update_io io = {
        .struct_size = (uint32_t)sizeof(th_factor_update_io),
        .mode = mode,
        .operation = operation,
        .vector = vector,
        .tolerance = tolerance,
        .offset = offset,
        .threshold = threshold,
    };
    char message[TH_ERROR_SIZE] = "";
    const th_status status =
        th_call_factor_update(backend->plugin, backend->instance, &io, message);
    if (!check_call(backend, status, "factor_update failed", message, error))
        return FALSE;
    if (violation)
        *violation = io.violation;
    if (count)
        *count = io.count;
    return TRUE;
}

gboolean th_backend_has_als_update_nonneg(const th_backend *backend)
{
    return backend->plugin->entry.als_update_nonneg != NULL;
}

gboolean th_descent_terms_active(const th_descent_terms *terms)
{
    return terms && (terms->ridge != 0.0 || terms->l1 != 0.0 ||
                     terms->constraint != TH_CONSTRAINT_NONNEG);
}

gboolean th_backend_als_update_nonneg(th_backend *backend, uint32_t mode, const double *v,
                                      const double *scale, uint32_t sweeps, double tolerance,
                                      int32_t norm, double *lambda, double *gram, double *inner,
                                      uint32_t *passes, GError **error)
{
    return th_backend_als_update_descent(backend, mode, v, scale, sweeps, tolerance, norm, NULL,
                                         lambda, gram, inner, passes, error);
}

gboolean th_backend_als_update_descent(th_backend *backend, uint32_t mode, const double *v,
                                       const double *scale, uint32_t sweeps, double tolerance,
                                       int32_t norm, const th_descent_terms *terms,
                                       double *lambda, double *gram, double *inner,
                                       uint32_t *passes, GError **error)
{
    th_nonneg_update_io io = {
        .struct_size = (uint32_t)sizeof(th_nonneg_update_io),
        .mode = mode,
        .v = v,
        .scale = scale,
        .tolerance = tolerance,
        .sweeps = sweeps,
        .norm = norm, /* the 1.6 fields zero: 1.5's update */
    };
    if (th_descent_terms_active(terms)) {
        if (!th_backend_takes_abi_1_6(backend))
            return refuse_for_older_abi(backend, "als_update_nonneg",
                                        "a ridge, l1 or no constraint", 6u, error);
        io.ridge = terms->ridge;
        io.l1 = terms->l1;
        io.unbounded = terms->constraint == TH_CONSTRAINT_NONE ? 1u : 0u;
    }
    th_als_output out = {
        .struct_size = (uint32_t)sizeof(th_als_output),
        .lambda = lambda,
        .gram = gram,
        .inner = inner,
    };
    char message[TH_ERROR_SIZE] = "";
    const th_status status =
        th_call_als_update_nonneg(backend->plugin, backend->instance, &io, &out, message);
    if (!check_call(backend, status, "als_update_nonneg failed", message, error))
        return FALSE;
    if (passes)
        *passes = io.passes;
    return TRUE;
}

gboolean th_backend_has_row_least_squares(const th_backend *backend)
{
    return backend->plugin->entry.row_least_squares != NULL &&
           backend->plugin->entry.generalized_mttkrp != NULL;
}

gboolean th_backend_row_least_squares(th_backend *backend, uint32_t mode, double ridge,
                                      gboolean nonneg, uint32_t passes,
                                      th_row_least_squares_io *out, GError **error)
{
    th_row_least_squares_io io = {
        .struct_size = (uint32_t)sizeof(th_row_least_squares_io),
        .mode = mode,
        .ridge = ridge,
        .nonneg = nonneg ? 1u : 0u,
        .passes = passes,
    };
    char message[TH_ERROR_SIZE] = "";
    const th_status status =
        th_call_row_least_squares(backend->plugin, backend->instance, &io, message);
    if (!check_call(backend, status, "row_least_squares failed", message, error))
        return FALSE;
    if (out)
        *out = io;
    return TRUE;
}

gboolean th_backend_has_multiplicative_updates(const th_backend *backend)
{
    return backend->plugin->entry.multiplicative_updates != NULL;
}

gboolean th_backend_multiplicative_updates(th_backend *backend, uint32_t mode, double epsilon,
                                           double tolerance, uint32_t max_iterations,
                                           th_multiplicative_updates_io *out, GError **error)
{
    th_multiplicative_updates_io io = {
        .struct_size = (uint32_t)sizeof(th_multiplicative_updates_io),
        .mode = mode,
        .elementwise = TH_ELEMENTWISE_POISSON_RATIO,
        .max_iterations = max_iterations,
        .epsilon = epsilon,
        .tolerance = tolerance,
    };
    char message[TH_ERROR_SIZE] = "";
    const th_status status =
        th_call_multiplicative_updates(backend->plugin, backend->instance, &io, message);
    if (!check_call(backend, status, "multiplicative_updates failed", message, error))
        return FALSE;
    *out = io;
    return TRUE;
}

th_backend_facts *th_backend_facts_take(th_backend *backend)
{
    const th_plugin_info *info = th_backend_info(backend);
    th_backend_facts *f = g_new0(th_backend_facts, 1);
    f->id = g_strdup(info->id);
    f->name = g_strdup(info->name);
    f->version = g_strdup(info->version);
    f->path = g_strdup(backend->plugin->path);
    f->abi = g_strdup_printf("%u.%u", backend->plugin->entry.abi_version.major,
                            backend->plugin->entry.abi_version.minor);
    f->f32 = info->value_type == TH_VALUE_F32;
    f->has_als_update = th_backend_has_als_update(backend);
    f->has_als_sweep = th_backend_has_als_sweep(backend);
    f->has_init_factors = th_backend_has_init_factors(backend);
    f->has_generalized_mttkrp = th_backend_has_generalized_mttkrp(backend);
    f->has_row_least_squares = th_backend_has_row_least_squares(backend);
    f->has_als_update_nonneg = th_backend_has_als_update_nonneg(backend);
    th_runtime_info runtime;
    g_autoptr(GError) error = NULL;
    if (!th_backend_runtime_info(backend, &runtime, &error)) {
        th_log(TH_LOG_DEBUG, "%s", error->message);
        memset(&runtime, 0, sizeof runtime);
    }
    f->device = g_strdup(runtime.device);
    f->details = g_strdup(runtime.details);
    f->tensor_bytes = runtime.tensor_bytes;
    f->factor_bytes = runtime.factor_bytes;
    f->workspace_bytes = runtime.workspace_bytes;
    f->load_seconds = backend->load_seconds;
    f->nmodes = backend->nmodes;
    f->modes = g_new0(th_backend_mode_facts, backend->nmodes);
    for (uint32_t m = 0; m < backend->nmodes; ++m) {
        th_mode_info mode;
        g_autoptr(GError) mode_error = NULL;
        f->modes[m].reported = th_backend_mode_info(backend, m, &mode, &mode_error);
        if (mode_error)
            th_log(TH_LOG_DEBUG, "%s", mode_error->message);
        f->modes[m].scheme = g_strdup(mode_error ? "" : mode.scheme);
        f->modes[m].partitions = mode_error ? 0 : mode.partitions;
    }
    return f;
}

void th_backend_facts_free(th_backend_facts *f)
{
    if (!f)
        return;
    g_free(f->id);
    g_free(f->name);
    g_free(f->version);
    g_free(f->path);
    g_free(f->abi);
    g_free(f->device);
    g_free(f->details);
    for (uint32_t m = 0; f->modes && m < f->nmodes; ++m)
        g_free(f->modes[m].scheme);
    g_free(f->modes);
    g_free(f);
}

gboolean th_backend_runtime_info(th_backend *backend, th_runtime_info *info, GError **error)
{
    return th_instance_runtime_info(backend->plugin, backend->instance, info, error);
}

gboolean th_backend_sums_processes(th_backend *backend)
{
    th_runtime_info info;
    g_autoptr(GError) error = NULL;
    return th_backend_abi_minor(backend) >= 8 &&
           th_backend_runtime_info(backend, &info, &error) && info.process_sums != 0;
}

gboolean th_backend_mode_info(th_backend *backend, uint32_t mode, th_mode_info *info,
                              GError **error)
{
    return th_instance_mode_info(backend->plugin, backend->instance, mode, info, error);
}
