/* Finding, loading, validating and unloading MTTKRP backend plugins. */
#ifndef TH_PLUGIN_LOADER_H
#define TH_PLUGIN_LOADER_H

#include <glib.h>
#include <tensorhost/plugin.h>

#define TH_PLUGIN_ERROR (th_plugin_error_quark())
GQuark th_plugin_error_quark(void);

typedef enum {
    TH_PLUGIN_ERROR_NOT_FOUND,     /* no such file / name not on the search path */
    TH_PLUGIN_ERROR_DLOPEN,        /* dlopen() failed (message has dlerror()) */
    TH_PLUGIN_ERROR_NO_ENTRY,      /* entry symbol missing */
    TH_PLUGIN_ERROR_ABI_MAJOR,     /* major version differs (message names both) */
    TH_PLUGIN_ERROR_STRUCT_SIZE,   /* entry struct shorter than v1.0 */
    TH_PLUGIN_ERROR_NULL_FUNCTION, /* a required function pointer is NULL */
    TH_PLUGIN_ERROR_BAD_INFO,      /* get_info() returned NULL or an invalid description */
    TH_PLUGIN_ERROR_INIT,          /* init() failed (message has the plugin's text) */
} th_plugin_error;

/* Errors of instance calls: the GError code is the th_status the plugin
 * returned (TH_ERR_NO_DEVICE, ...), so callers can tell "cannot run here"
 * from "wrong" without reading the message. */
#define TH_PLUGIN_STATUS_ERROR (th_plugin_status_error_quark())
GQuark th_plugin_status_error_quark(void);

/* A loaded plugin. The entry is copied into a full-size struct whose fields
 * beyond the plugin's struct_size are NULL, so callers can test optional
 * functions for NULL without looking at sizes again. */
typedef struct th_plugin {
    char *path;          /* absolute path of the .so */
    void *handle;        /* dlopen handle */
    th_plugin_entry entry; /* normalised copy (see above) */
    uint32_t plugin_entry_size; /* struct_size the plugin declared */
    const th_plugin_info *info;
    th_host_services services; /* handed to init() and create(); lives here */
    uint32_t users;            /* th_plugin_load calls not yet unloaded (the loader's) */
} th_plugin;

/* The directories searched for a plugin given by name, in order: `extra`
 * (from the config, may be NULL), then each entry of TENSORHOST_PLUGIN_PATH
 * (colon-separated), then the installation's plugin folder: relative to
 * libtensorhost when this code runs in it (<libdir>/tensorhost/plugins),
 * else to the running executable (<exe dir>/../lib/tensorhost/plugins). */
GPtrArray *th_plugin_search_path(GPtrArray *extra);

/* Resolves `name_or_path`: containing a '/' or ending in ".so", a path;
 * otherwise NAME.so looked up along `search_path`. Returns a newly allocated
 * absolute path, or NULL with an error listing the directories searched. */
char *th_plugin_resolve(const char *name_or_path, GPtrArray *search_path, GError **error);

/* The names (file names without ".so") of the plugin files in the
 * directories of `search_path`, sorted, each once. Whether they load is not
 * checked. */
GPtrArray *th_plugin_installed_names(GPtrArray *search_path);

/* dlopen(RTLD_NOW|RTLD_LOCAL), validate the entry (see plugin.h, steps 1-6),
 * call init(). `services` is copied. Every failure is one GError naming the
 * path and what was wrong. A plugin already loaded (the same absolute path,
 * not yet unloaded by every caller that loaded it) is shared: the same
 * th_plugin, init() not called again, its first loader's services kept, as
 * plugin.h has init() once after loading and deinit() once after every
 * instance is destroyed. Thread-safe. */
th_plugin *th_plugin_load(const char *path, const th_host_services *services, GError **error);

/* One th_plugin_load undone: the last calls deinit() (if any), then
 * dlclose(). Every instance the caller made must be destroyed before.
 * Accepts NULL. Thread-safe. */
void th_plugin_unload(th_plugin *plugin);

/* Turns a failed status and the plugin's message into a GError in
 * TH_PLUGIN_STATUS_ERROR with code `status`:
 * "PLUGIN-ID: WHAT: MESSAGE (STATUS-NAME)". */
void th_plugin_set_call_error(GError **error, const th_plugin *plugin, const char *what,
                              th_status status, const char *message);

/* "TH_ERR_INVALID_ARGUMENT" etc., from plugin.h's TH_STATUS_LIST;
 * "unknown status" for a code the list lacks. */
const char *th_status_name(th_status status);

/* Sets up an out-struct as its owner must before a plugin fills it
 * (plugin.h, "Growth"): struct_size this host's, strings empty, byte counts
 * 0, times negative. A field the plugin's header lacks then reads as absent,
 * e.g. last_sweep_seconds < 0 from a plugin built against ABI 1.0 or 1.1. */
void th_runtime_info_init(th_runtime_info *info);
void th_mode_info_init(th_mode_info *info);

#endif
