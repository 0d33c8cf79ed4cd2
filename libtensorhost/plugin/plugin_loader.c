/* Finding, loading, validating and unloading MTTKRP backend plugins.
 *
 * Every check of plugin.h's steps 1-6 turns into one GError that starts with
 * the plugin's path, so a user with several plugin folders sees at once which
 * file is at fault and why. */
#define _GNU_SOURCE /* dladdr1() and RTLD_DL_SYMENT: the size of the entry symbol */

#include "plugin/plugin_loader.h"

#include "base/install_dirs.h"
#include "base/log.h"
#include "base/message_text.h"
#include "base/sanitizer_defaults.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>

G_DEFINE_QUARK(th-plugin-error-quark, th_plugin_error)
G_DEFINE_QUARK(th-plugin-status-error-quark, th_plugin_status_error)

/* ------------------------------------------------------------------------ */
/* Status names and call errors                                              */
/* ------------------------------------------------------------------------ */

/* The name of a status the header lists, or NULL: the names come from
 * TH_STATUS_LIST, so a code added there is named here without an edit. */
static const char *listed_status_name(th_status status)
{
    switch (status) {
#define TH_STATUS_NAME_CASE(name, value) \
    case name:                          \
        return #name;
        TH_STATUS_LIST(TH_STATUS_NAME_CASE)
#undef TH_STATUS_NAME_CASE
    default:
        return NULL;
    }
}

const char *th_status_name(th_status status)
{
    const char *name = listed_status_name(status);
    return name != NULL ? name : "unknown status";
}

/* A plugin's message is untrusted: bound it by the buffer size in case it
 * forgot the terminator, and say so when it wrote nothing. */
static char *plugin_message(const char *message)
{
    if (message == NULL || message[0] == '\0')
        return g_strdup("(the plugin gave no message)");
    return g_strndup(message, TH_ERROR_SIZE - 1);
}

void th_plugin_set_call_error(GError **error, const th_plugin *plugin, const char *what,
                              th_status status, const char *message)
{
    g_autofree char *text = plugin_message(message);
    const char *id = plugin && plugin->info ? plugin->info->id : "plugin";
    const char *name = listed_status_name(status);
    if (name == NULL)
        g_set_error(error, TH_PLUGIN_STATUS_ERROR, status, "%s: %s: %s (status %d)",
                    id, what, text, (int)status);
    else
        g_set_error(error, TH_PLUGIN_STATUS_ERROR, status, "%s: %s: %s (%s)", id,
                    what, text, name);
}

/* ------------------------------------------------------------------------ */
/* Search path and name resolution                                           */
/* ------------------------------------------------------------------------ */

GPtrArray *th_plugin_search_path(GPtrArray *extra)
{
    GPtrArray *dirs = g_ptr_array_new_with_free_func(g_free);
    if (extra != NULL)
        for (guint i = 0; i < extra->len; i++)
            g_ptr_array_add(dirs, g_strdup(g_ptr_array_index(extra, i)));

    const char *env = g_getenv("TENSORHOST_PLUGIN_PATH");
    if (env != NULL) {
        g_auto(GStrv) parts = g_strsplit(env, G_SEARCHPATH_SEPARATOR_S, -1);
        for (char **p = parts; *p != NULL; p++)
            if (**p != '\0') /* "a::b" and a trailing ':' mean nothing here */
                g_ptr_array_add(dirs, g_strdup(*p));
    }

    char *installed = th_installed_dir("tensorhost/plugins", TH_PLUGIN_RELDIR);
    if (installed != NULL)
        g_ptr_array_add(dirs, installed);
    return dirs;
}

static gboolean names_a_path(const char *name_or_path)
{
    return strchr(name_or_path, '/') != NULL || g_str_has_suffix(name_or_path, ".so");
}

static char *resolve_path(const char *path, GError **error)
{
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_set_error(error, TH_PLUGIN_ERROR, TH_PLUGIN_ERROR_NOT_FOUND,
                    "%s: plugin file not found", path);
        return NULL;
    }
    if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, TH_PLUGIN_ERROR, TH_PLUGIN_ERROR_NOT_FOUND,
                    "%s: is a directory, not a plugin file", path);
        return NULL;
    }
    return g_canonicalize_filename(path, NULL);
}

char *th_plugin_resolve(const char *name_or_path, GPtrArray *search_path, GError **error)
{
    if (name_or_path == NULL || name_or_path[0] == '\0') {
        g_set_error(error, TH_PLUGIN_ERROR, TH_PLUGIN_ERROR_NOT_FOUND,
                    "empty plugin name: expected a plugin name such as 'cpu-reference' or "
                    "a path to a .so file");
        return NULL;
    }
    if (names_a_path(name_or_path))
        return resolve_path(name_or_path, error);

    g_autofree char *file_name = g_strconcat(name_or_path, ".so", NULL);
    guint ndirs = search_path != NULL ? search_path->len : 0;
    for (guint i = 0; i < ndirs; i++) {
        g_autofree char *candidate =
            g_build_filename(g_ptr_array_index(search_path, i), file_name, NULL);
        if (g_file_test(candidate, G_FILE_TEST_IS_REGULAR))
            return g_canonicalize_filename(candidate, NULL);
    }

    g_autoptr(GString) searched = g_string_new(NULL);
    for (guint i = 0; i < ndirs; i++)
        g_string_append_printf(searched, "%s%s", i ? ", " : "",
                               (const char *)g_ptr_array_index(search_path, i));
    g_autoptr(GPtrArray) installed = th_plugin_installed_names(search_path);
    const char *nearest =
        th_nearest_name(name_or_path, (const char *const *)installed->pdata, installed->len);
    g_autofree char *hint = nearest ? g_strdup_printf("did you mean '%s'? Or a", nearest)
                                    : g_strdup("a");
    g_autofree char *shown = th_escape_for_message(name_or_path);
    g_set_error(error, TH_PLUGIN_ERROR, TH_PLUGIN_ERROR_NOT_FOUND,
                "plugin '%s' not found: no %s.so in %s (%sdd a folder with "
                "TENSORHOST_PLUGIN_PATH, or give the path of the .so)",
                shown, shown, ndirs ? searched->str : "an empty search path", hint);
    return NULL;
}

static gint compare_strings(gconstpointer a, gconstpointer b)
{
    return g_strcmp0(*(char *const *)a, *(char *const *)b);
}

GPtrArray *th_plugin_installed_names(GPtrArray *search_path)
{
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint d = 0; search_path && d < search_path->len; d++) {
        g_autoptr(GDir) dir = g_dir_open(g_ptr_array_index(search_path, d), 0, NULL);
        for (const char *entry; dir && (entry = g_dir_read_name(dir));) {
            if (!g_str_has_suffix(entry, ".so") || strlen(entry) == 3)
                continue;
            char *name = g_strndup(entry, strlen(entry) - 3);
            if (g_hash_table_contains(seen, name)) {
                g_free(name);
                continue;
            }
            g_hash_table_add(seen, name);
            g_ptr_array_add(names, name);
        }
    }
    g_ptr_array_sort(names, compare_strings);
    return names;
}

/* ------------------------------------------------------------------------ */
/* Loading and validation                                                    */
/* ------------------------------------------------------------------------ */

/* Byte size of the dynamic symbol at `address`, or 0 when the object does not
 * say. Lets the loader refuse an entry whose declared struct_size overstates
 * the object that is really there, instead of reading past it. */
static size_t symbol_size(const void *address)
{
    Dl_info info;
    void *symbol = NULL; /* a const ElfW(Sym) *, handed back as void * */
    if (dladdr1(address, &info, &symbol, RTLD_DL_SYMENT) == 0 || symbol == NULL)
        return 0;
    return (size_t)((const ElfW(Sym) *)symbol)->st_size;
}

static void set_load_error(GError **error, th_plugin_error code, const char *path,
                           const char *format, ...) G_GNUC_PRINTF(4, 5);

static void set_load_error(GError **error, th_plugin_error code, const char *path,
                           const char *format, ...)
{
    va_list args;
    va_start(args, format);
    g_autofree char *what = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(error, TH_PLUGIN_ERROR, code, "%s: %s", path, what);
}

/* The entry's size in each version this host knows, oldest first. The
 * entry is read up to the largest of them within the plugin's struct_size,
 * so a field is present only when the whole of it is: a struct_size that
 * ends inside a pointer (no real header produces one) leaves none of it. A
 * version that grows the entry adds its size here. */
static const size_t entry_version_sizes[] = {TH_PLUGIN_ENTRY_V1_0_SIZE,
                                             TH_PLUGIN_ENTRY_V1_1_SIZE,
                                             TH_PLUGIN_ENTRY_V1_3_SIZE,
                                             TH_PLUGIN_ENTRY_V1_4_SIZE,
                                             TH_PLUGIN_ENTRY_V1_5_SIZE,
                                             TH_PLUGIN_ENTRY_V1_7_SIZE};
G_STATIC_ASSERT(TH_PLUGIN_ENTRY_V1_7_SIZE == sizeof(th_plugin_entry));

/* Steps 1-4: version and size, then the normalised copy. */
static gboolean read_entry(th_plugin *plugin, const th_plugin_entry *raw, GError **error)
{
    size_t available = symbol_size(raw);
    if (available != 0 && available < offsetof(th_plugin_entry, init)) {
        set_load_error(error, TH_PLUGIN_ERROR_STRUCT_SIZE, plugin->path,
                       "entry symbol '%s' is %zu bytes, too small to hold the struct size "
                       "and ABI version",
                       TH_PLUGIN_ENTRY_SYMBOL, available);
        return FALSE;
    }
    uint32_t size = raw->struct_size;
    th_abi_version version = raw->abi_version;

    if (version.major != TH_ABI_VERSION_MAJOR) {
        set_load_error(error, TH_PLUGIN_ERROR_ABI_MAJOR, plugin->path,
                       "plugin ABI major version %u.%u is not supported by this host "
                       "(ABI %u.%u)",
                       version.major, version.minor, TH_ABI_VERSION_MAJOR,
                       TH_ABI_VERSION_MINOR);
        return FALSE;
    }
    if (size < TH_PLUGIN_ENTRY_V1_0_SIZE) {
        set_load_error(error, TH_PLUGIN_ERROR_STRUCT_SIZE, plugin->path,
                       "entry struct is %u bytes, shorter than the %zu bytes of ABI %u.0 "
                       "(plugin says ABI %u.%u)",
                       size, (size_t)TH_PLUGIN_ENTRY_V1_0_SIZE, TH_ABI_VERSION_MAJOR,
                       version.major, version.minor);
        return FALSE;
    }
    if (available != 0 && available < size) {
        set_load_error(error, TH_PLUGIN_ERROR_STRUCT_SIZE, plugin->path,
                       "entry struct says it is %u bytes, but the symbol '%s' is only %zu "
                       "bytes",
                       size, TH_PLUGIN_ENTRY_SYMBOL, available);
        return FALSE;
    }

    size_t readable = 0;
    for (size_t i = 0; i < G_N_ELEMENTS(entry_version_sizes); i++)
        if (size >= entry_version_sizes[i])
            readable = entry_version_sizes[i];
    memset(&plugin->entry, 0, sizeof plugin->entry);
    memcpy(&plugin->entry, raw, readable);
    plugin->plugin_entry_size = size;

    if (version.minor > TH_ABI_VERSION_MINOR || size > sizeof plugin->entry)
        th_log(TH_LOG_DEBUG,
               "%s: plugin ABI %u.%u is newer than this host's %u.%u; ignoring the %zu "
               "bytes of entry fields this host does not know",
               plugin->path, version.major, version.minor, TH_ABI_VERSION_MAJOR,
               TH_ABI_VERSION_MINOR,
               size > sizeof plugin->entry ? (size_t)size - sizeof plugin->entry : (size_t)0);
    return TRUE;
}

/* Step 5. */
static gboolean check_required_functions(const th_plugin *plugin, GError **error)
{
    const th_plugin_entry *e = &plugin->entry;
    const struct {
        const char *name;
        gboolean present;
    } required[] = {
        {"get_info", e->get_info != NULL},
        {"create", e->create != NULL},
        {"destroy", e->destroy != NULL},
        {"load_tensor", e->load_tensor != NULL},
        {"set_factor", e->set_factor != NULL},
        {"get_factor", e->get_factor != NULL},
        {"mttkrp", e->mttkrp != NULL},
        {"get_mttkrp_result", e->get_mttkrp_result != NULL},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(required); i++) {
        if (!required[i].present) {
            set_load_error(error, TH_PLUGIN_ERROR_NULL_FUNCTION, plugin->path,
                           "required function '%s' is NULL", required[i].name);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean check_info_string(const th_plugin *plugin, const char *field,
                                  const char *value, gboolean may_be_empty, GError **error)
{
    if (value == NULL || (!may_be_empty && value[0] == '\0')) {
        set_load_error(error, TH_PLUGIN_ERROR_BAD_INFO, plugin->path,
                       "get_info() returned %s %s", value == NULL ? "a NULL" : "an empty",
                       field);
        return FALSE;
    }
    return TRUE;
}

/* Capability comes from the function pointer alone (plugin.h,
 * "Capabilities"): `present` is read from the normalised entry, so a
 * function beyond the plugin's struct_size counts as absent. The flag is
 * read only to warn, because hosts 1.0 and 1.1 refuse a plugin whose flag
 * and function disagree: such a plugin works here but not there.
 * `entry_size_needed` is the entry size that holds the function (the ABI
 * version that added it), to say why a flagged function is absent. */
static void warn_capability_flag(const th_plugin *plugin, const th_plugin_info *info,
                                 th_abi_version version, uint32_t flag_bit,
                                 const char *flag_name, const char *function_name,
                                 gboolean present, size_t entry_size_needed,
                                 const char *abi_version)
{
    gboolean flag = (info->flags & flag_bit) != 0;
    if (flag == present)
        return;
    g_autofree char *why =
        !present && plugin->plugin_entry_size < entry_size_needed
            ? g_strdup_printf("absent (its entry is too short to hold it: ABI %s)", abi_version)
            : g_strdup(present ? "present" : "NULL");
    th_log(TH_LOG_WARNING,
           "%s: plugin '%s' (ABI %u.%u) %s the %s flag but its %s function is %s; this host "
           "(ABI %u.%u) goes by the function and %s it, and hosts before ABI 1.2 refuse the "
           "plugin",
           plugin->path, info->id, version.major, version.minor, flag ? "sets" : "clears",
           flag_name, function_name, why, TH_ABI_VERSION_MAJOR, TH_ABI_VERSION_MINOR,
           present ? "calls" : "never calls");
}

/* Step 6, second half: the description the rest of the host relies on. */
static gboolean check_info(th_plugin *plugin, GError **error)
{
    const th_plugin_info *info = plugin->entry.get_info();
    if (info == NULL) {
        set_load_error(error, TH_PLUGIN_ERROR_BAD_INFO, plugin->path, "get_info() returned NULL");
        return FALSE;
    }
    /* Every field this host reads is of 1.0; a newer plugin's longer
     * struct is fine, and its tail is never read. */
    if (info->struct_size < TH_PLUGIN_INFO_V1_0_SIZE) {
        set_load_error(error, TH_PLUGIN_ERROR_BAD_INFO, plugin->path,
                       "plugin info struct is %u bytes, shorter than the %zu bytes of ABI 1.0 "
                       "(plugin says ABI %u.%u)",
                       info->struct_size, (size_t)TH_PLUGIN_INFO_V1_0_SIZE,
                       plugin->entry.abi_version.major, plugin->entry.abi_version.minor);
        return FALSE;
    }
    if (!check_info_string(plugin, "id", info->id, FALSE, error) ||
        !check_info_string(plugin, "name", info->name, FALSE, error) ||
        !check_info_string(plugin, "version", info->version, FALSE, error) ||
        !check_info_string(plugin, "description", info->description, TRUE, error))
        return FALSE;
    if (info->max_modes < 3 || info->max_rank < 1) {
        set_load_error(error, TH_PLUGIN_ERROR_BAD_INFO, plugin->path,
                       "plugin '%s' declares max_modes %u and max_rank %u; expected "
                       "max_modes >= 3 and max_rank >= 1",
                       info->id, info->max_modes, info->max_rank);
        return FALSE;
    }
    if (info->value_type != TH_VALUE_F32 && info->value_type != TH_VALUE_F64) {
        set_load_error(error, TH_PLUGIN_ERROR_BAD_INFO, plugin->path,
                       "plugin '%s' declares value type %u; expected %d (f32) or %d (f64)",
                       info->id, info->value_type, TH_VALUE_F32, TH_VALUE_F64);
        return FALSE;
    }
    /* A sweep that stops at a Cholesky breakdown leaves the rest of the
     * iteration to the host's per-mode path, which needs als_update. */
    if (plugin->entry.als_sweep != NULL && plugin->entry.als_update == NULL) {
        set_load_error(error, TH_PLUGIN_ERROR_BAD_INFO, plugin->path,
                       "plugin '%s' implements als_sweep but not als_update; a plugin with "
                       "als_sweep must also implement als_update",
                       info->id);
        return FALSE;
    }
    const th_abi_version version = plugin->entry.abi_version;
    warn_capability_flag(plugin, info, version, TH_CAP_ALS_UPDATE, "TH_CAP_ALS_UPDATE",
                         "als_update", plugin->entry.als_update != NULL,
                         TH_PLUGIN_ENTRY_V1_0_SIZE, "1.0");
    warn_capability_flag(plugin, info, version, TH_CAP_ALS_SWEEP, "TH_CAP_ALS_SWEEP",
                         "als_sweep", plugin->entry.als_sweep != NULL,
                         TH_PLUGIN_ENTRY_V1_1_SIZE, "1.1");
    plugin->info = info;
    return TRUE;
}

static gboolean call_init(th_plugin *plugin, GError **error)
{
    if (plugin->entry.init == NULL)
        return TRUE;
    char err[TH_ERROR_SIZE] = "";
    th_status status = plugin->entry.init(plugin->path, &plugin->services, err);
    if (status == TH_OK)
        return TRUE;
    g_autofree char *text = plugin_message(err);
    set_load_error(error, TH_PLUGIN_ERROR_INIT, plugin->path, "init failed: %s (%s)", text,
                   th_status_name(status));
    return FALSE;
}

static void plugin_free(th_plugin *plugin)
{
    if (plugin->handle != NULL)
        dlclose(plugin->handle);
    g_free(plugin->path);
    g_free(plugin);
}

/* The plugins loaded, by absolute path (th_plugin_load). */
static GMutex loaded_lock;
static GHashTable *loaded_plugins; /* char *path (the plugin's own) -> th_plugin * */

static th_plugin *load_new(char *absolute, const th_host_services *services, GError **error);

th_plugin *th_plugin_load(const char *path, const th_host_services *services, GError **error)
{
    g_return_val_if_fail(path != NULL && services != NULL, NULL);
    th_sanitizer_defaults_link();

    g_autofree char *absolute = resolve_path(path, error);
    if (absolute == NULL)
        return NULL;
    g_mutex_lock(&loaded_lock);
    th_plugin *plugin = loaded_plugins ? g_hash_table_lookup(loaded_plugins, absolute) : NULL;
    if (plugin) {
        plugin->users++;
    } else {
        plugin = load_new(g_steal_pointer(&absolute), services, error);
        if (plugin) {
            if (!loaded_plugins)
                loaded_plugins = g_hash_table_new(g_str_hash, g_str_equal);
            plugin->users = 1;
            g_hash_table_insert(loaded_plugins, plugin->path, plugin);
        }
    }
    g_mutex_unlock(&loaded_lock);
    return plugin;
}

/* dlopen, the entry's checks, init() and get_info()'s: a new th_plugin
 * owning `absolute`. */
static th_plugin *load_new(char *absolute, const th_host_services *services, GError **error)
{
    th_plugin *plugin = g_new0(th_plugin, 1);
    plugin->path = absolute;
    plugin->services = *services;

    plugin->handle = dlopen(plugin->path, RTLD_NOW | RTLD_LOCAL);
    if (plugin->handle == NULL) {
        /* dlerror() usually names the path already; keep its full text anyway,
         * it is what says which dependency or symbol is missing. */
        set_load_error(error, TH_PLUGIN_ERROR_DLOPEN, plugin->path, "dlopen failed: %s",
                       dlerror());
        plugin_free(plugin);
        return NULL;
    }

    dlerror(); /* a NULL symbol value is only an error if dlerror() says so */
    const th_plugin_entry *raw = dlsym(plugin->handle, TH_PLUGIN_ENTRY_SYMBOL);
    const char *dl_message = dlerror();
    if (raw == NULL) {
        set_load_error(error, TH_PLUGIN_ERROR_NO_ENTRY, plugin->path, "no symbol '%s': %s",
                       TH_PLUGIN_ENTRY_SYMBOL,
                       dl_message != NULL ? dl_message : "the symbol's address is NULL");
        plugin_free(plugin);
        return NULL;
    }

    if (!read_entry(plugin, raw, error) || !check_required_functions(plugin, error) ||
        !call_init(plugin, error)) {
        plugin_free(plugin);
        return NULL;
    }
    if (!check_info(plugin, error)) {
        if (plugin->entry.deinit != NULL)
            plugin->entry.deinit(); /* init() succeeded, so it gets its deinit() */
        plugin_free(plugin);
        return NULL;
    }
    th_log(TH_LOG_DEBUG, "%s: loaded plugin '%s' %s (ABI %u.%u)", plugin->path,
           plugin->info->id, plugin->info->version, raw->abi_version.major,
           raw->abi_version.minor);
    return plugin;
}

void th_plugin_unload(th_plugin *plugin)
{
    if (plugin == NULL)
        return;
    g_mutex_lock(&loaded_lock);
    const gboolean last = --plugin->users == 0;
    if (last) {
        g_hash_table_remove(loaded_plugins, plugin->path);
        if (plugin->entry.deinit != NULL)
            plugin->entry.deinit();
        plugin_free(plugin);
    }
    g_mutex_unlock(&loaded_lock);
}

/* ------------------------------------------------------------------------ */
/* Optional queries                                                          */
/* ------------------------------------------------------------------------ */

void th_runtime_info_init(th_runtime_info *info)
{
    memset(info, 0, sizeof *info);
    info->struct_size = (uint32_t)sizeof *info;
    info->last_sweep_seconds = -1.0;
}

void th_mode_info_init(th_mode_info *info)
{
    memset(info, 0, sizeof *info);
    info->struct_size = (uint32_t)sizeof *info;
    info->last_mttkrp_seconds = -1.0;
}
