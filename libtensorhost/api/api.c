/* libtensorhost's public API (include/tensorhost/tensorhost.h) over the
 * host's modules: the same reader, backend search, CP-ALS and published
 * form as the program. GErrors become a status and one line in `err`. */
#include <tensorhost/tensorhost.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <gio/gio.h>
#include <glib.h>

#include "plugin/backend.h"
#include "base/cancel.h"
#include "config/config_types.h"
#include "cpd/cp_als.h"
#include "cpd/cpd_session.h"
#include "cpd/cpd_warnings.h"
#include "base/log.h"
#include "base/message_text.h"
#include "plugin/plugin_loader.h"
#include "tensor/tensor_reader.h"

struct tensorhost_tensor {
    th_sptensor *tensor;
    uint64_t *dims; /* [nmodes], 64-bit for the API */
    char *path;     /* the file read, for the warnings; NULL from arrays */
};

struct tensorhost_backend {
    th_backend *backend;
    /* Every device string handed out (the last one last): each stays valid
     * until the backend is closed, as the header promises. */
    GPtrArray *devices;
};

struct tensorhost_cpd {
    th_cpd_result *result;
    uint64_t *dims;
    double *fits, *seconds; /* [iterations] */
    /* [iterations], Poisson results only (NULL otherwise). */
    double *log_likelihoods, *kkt_violations;
    uint32_t *inner_iterations;
    /* [iterations], completion results only (NULL otherwise). */
    double *train_rmses, *holdout_rmses, *objectives;
    double load_seconds;
    GPtrArray *warnings; /* th_cpd_warning, messages one line each */
};

/* The public warning codes are cpd_warnings.h's. */
G_STATIC_ASSERT((int)TENSORHOST_WARN_RANK_ABOVE_BOUND == (int)TH_CPD_WARN_RANK_ABOVE_BOUND);
G_STATIC_ASSERT((int)TENSORHOST_WARN_RANK_DEFICIENT == (int)TH_CPD_WARN_RANK_DEFICIENT);
G_STATIC_ASSERT((int)TENSORHOST_WARN_NOT_CONVERGED == (int)TH_CPD_WARN_NOT_CONVERGED);
G_STATIC_ASSERT((int)TENSORHOST_WARN_UNDERFLOWED_VALUES == (int)TH_CPD_WARN_UNDERFLOWED_VALUES);
G_STATIC_ASSERT((int)TENSORHOST_WARN_NON_INTEGER_VALUES == (int)TH_CPD_WARN_NOT_COUNTS);
G_STATIC_ASSERT((int)TENSORHOST_WARN_EMPTY_ROWS == (int)TH_CPD_WARN_EMPTY_ROWS);
/* The public models are cp_als.h's. */
G_STATIC_ASSERT((int)TENSORHOST_MODEL_LEAST_SQUARES == (int)TH_MODEL_LEAST_SQUARES &&
                (int)TENSORHOST_MODEL_POISSON == (int)TH_MODEL_POISSON &&
                (int)TENSORHOST_MODEL_COMPLETION == (int)TH_MODEL_COMPLETION);
/* And the log levels the plugin ABI's. */
G_STATIC_ASSERT((int)TENSORHOST_LOG_ERROR == (int)TH_LOG_ERROR &&
                (int)TENSORHOST_LOG_WARNING == (int)TH_LOG_WARNING &&
                (int)TENSORHOST_LOG_INFO == (int)TH_LOG_INFO &&
                (int)TENSORHOST_LOG_DEBUG == (int)TH_LOG_DEBUG);

static int32_t set_error(char *err, int32_t status, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static int32_t set_error(char *err, int32_t status, const char *format, ...)
{
    if (err) {
        va_list args;
        va_start(args, format);
        g_autofree char *text = g_strdup_vprintf(format, args);
        va_end(args);
        g_autofree char *line = th_escape_control(text);
        g_strlcpy(err, line, TENSORHOST_ERROR_SIZE);
    }
    return status;
}

/* Every live handle is registered with its kind, so a NULL, freed or
 * foreign pointer is recognised without reading through it (and a checker
 * such as ASan sees no use after free). A kind is never 0. */
enum handle_kind { TENSOR_HANDLE = 1, BACKEND_HANDLE, CPD_HANDLE };

static GMutex registry_lock;
static GHashTable *registry; /* handle -> kind */

static void register_handle(const void *handle, enum handle_kind kind)
{
    g_mutex_lock(&registry_lock);
    if (!registry)
        registry = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_hash_table_insert(registry, (gpointer)(uintptr_t)handle, GUINT_TO_POINTER(kind));
    g_mutex_unlock(&registry_lock);
}

static const char *const kind_names[] = {"?", "tensor", "backend", "result"};

/* TRUE when `handle` is a live handle of `kind`. A wrong one is the caller's
 * bug: debug builds (NDEBUG not defined) abort with a message so it is found
 * where it happens; release builds report it (TENSORHOST_ERR_MISUSE, or
 * nothing for the free functions). `unregister` removes a live handle. */
static gboolean handle_ok(const void *handle, enum handle_kind kind, gboolean unregister)
{
    if (handle == NULL)
        return FALSE;
    g_mutex_lock(&registry_lock);
    const guint found =
        registry ? GPOINTER_TO_UINT(g_hash_table_lookup(registry, handle)) : 0;
    if (found == kind && unregister)
        g_hash_table_remove(registry, handle);
    g_mutex_unlock(&registry_lock);
    if (found == kind)
        return TRUE;
#ifndef NDEBUG
    fprintf(stderr, "libtensorhost: %p is not a live %s handle (%s)\n", handle,
            kind_names[kind], found ? "it is another kind" : "freed already, or never one");
    abort();
#else
    (void)kind_names;
    return FALSE;
#endif
}

#define CHECK_HANDLE(h, KIND, what)                                                        \
    do {                                                                                   \
        if (!handle_ok((h), (KIND), FALSE))                                                \
            return set_error(err, TENSORHOST_ERR_MISUSE, "%s is NULL or not a live handle", \
                             what);                                                        \
    } while (0)

uint32_t tensorhost_api_version(void)
{
    return TENSORHOST_API_VERSION_MAJOR << 16 | TENSORHOST_API_VERSION_MINOR;
}

const char *tensorhost_version_string(void) { return TH_VERSION; }

const char *tensorhost_status_name(int32_t status)
{
    switch (status) {
    case TENSORHOST_OK:
        return "TENSORHOST_OK";
    case TENSORHOST_ERR_INVALID_ARGUMENT:
        return "TENSORHOST_ERR_INVALID_ARGUMENT";
    case TENSORHOST_ERR_IO:
        return "TENSORHOST_ERR_IO";
    case TENSORHOST_ERR_FORMAT:
        return "TENSORHOST_ERR_FORMAT";
    case TENSORHOST_ERR_PLUGIN:
        return "TENSORHOST_ERR_PLUGIN";
    case TENSORHOST_ERR_NO_DEVICE:
        return "TENSORHOST_ERR_NO_DEVICE";
    case TENSORHOST_ERR_BACKEND:
        return "TENSORHOST_ERR_BACKEND";
    case TENSORHOST_ERR_NUMERIC:
        return "TENSORHOST_ERR_NUMERIC";
    case TENSORHOST_ERR_MISUSE:
        return "TENSORHOST_ERR_MISUSE";
    }
    return "?";
}

/* A library speaks only when something goes wrong: the program's
 * informational lines (which backend "auto" chose, and why) stay quiet. */
static void quiet_logging(void)
{
    static gsize done = 0;
    if (g_once_init_enter(&done)) {
        th_log_set_level(TH_LOG_WARNING);
        g_once_init_leave(&done, 1);
    }
}

/* ---- Tensors ---------------------------------------------------------------- */

static tensorhost_tensor *wrap_tensor(th_sptensor *t)
{
    tensorhost_tensor *h = g_new0(tensorhost_tensor, 1);
    register_handle(h, TENSOR_HANDLE);
    h->tensor = t;
    h->dims = g_new(uint64_t, t->nmodes);
    for (uint32_t m = 0; m < t->nmodes; ++m)
        h->dims[m] = t->dims[m];
    return h;
}

int32_t tensorhost_tensor_new(uint32_t nmodes, const uint64_t *dims, uint64_t nnz,
                              const uint64_t *indices, const double *values,
                              tensorhost_tensor **out, char *err)
{
    if (!out || !dims || !indices || !values)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "tensorhost_tensor_new: %s is NULL",
                         !out ? "out" : !dims ? "dims" : !indices ? "indices" : "values");
    if (nmodes < 2 || nmodes > TH_MAX_MODES)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "the tensor has %u %s; expected 2 to %u", nmodes,
                         th_plural(nmodes, "mode", "modes"), TH_MAX_MODES);
    if (nnz == 0)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "the tensor has no nonzeros; expected at least one");
    for (uint32_t m = 0; m < nmodes; ++m)
        if (dims[m] == 0 || dims[m] > UINT32_MAX)
            return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                             "dims[%u] = %" G_GUINT64_FORMAT "; expected 1 to %u (32-bit "
                             "indices)",
                             m, dims[m], UINT32_MAX);
    for (uint64_t k = 0; k < nnz; ++k) {
        for (uint32_t m = 0; m < nmodes; ++m)
            if (indices[k * nmodes + m] >= dims[m])
                return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                                 "nonzero %" G_GUINT64_FORMAT ": index %" G_GUINT64_FORMAT
                                 " in mode %u is out of range [0, %" G_GUINT64_FORMAT ")",
                                 k, indices[k * nmodes + m], m, dims[m]);
        if (!isfinite(values[k]))
            return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                             "nonzero %" G_GUINT64_FORMAT ": value %g is not finite", k,
                             values[k]);
    }
    /* Asked before the copy, as a file's read asks: past what the host has,
     * the copy would be killed midway. */
    g_autofree char *short_of = NULL;
    if (!th_sptensor_host_has_room(nnz, nmodes, &short_of))
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "a tensor of %" G_GUINT64_FORMAT " %s and %u modes: %s", nnz,
                         th_plural(nnz, "nonzero", "nonzeros"), nmodes, short_of);
    th_sptensor *t = th_sptensor_new(nmodes, nnz);
    for (uint32_t m = 0; m < nmodes; ++m) {
        t->dims[m] = (th_index)dims[m];
        for (uint64_t k = 0; k < nnz; ++k)
            t->indices[m][k] = (th_index)indices[k * nmodes + m];
    }
    memcpy(t->values, values, sizeof(double) * nnz);
    t->lines_read = nnz;
    for (uint64_t k = 0; k < nnz; ++k)
        t->explicit_zeros += values[k] == 0.0;
    if (!th_sptensor_sort_and_merge(t)) {
        th_sptensor_free(t);
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "repeated coordinates have values whose sum is beyond the range of a "
                         "double (repeated entries are added together)");
    }
    *out = wrap_tensor(t);
    return TENSORHOST_OK;
}

int32_t tensorhost_tensor_read(const char *path, tensorhost_tensor **out, char *err)
{
    if (!path || !out)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "tensorhost_tensor_read: %s is NULL", !path ? "path" : "out");
    g_autoptr(GError) error = NULL;
    th_cancel_reset(); /* a stop asked before this call is not for it */
    quiet_logging();
    th_sptensor *t = th_tensor_read_file(path, NULL, &error);
    th_cancel_reset();
    /* Not a tensor: the file's contents; the rest is reading it at all. */
    const gboolean io = error && (error->domain == G_FILE_ERROR || error->domain == G_IO_ERROR ||
                                  g_error_matches(error, TH_TENSOR_READER_ERROR,
                                                  TH_TENSOR_READER_ERROR_IO) ||
                                  g_error_matches(error, TH_TENSOR_READER_ERROR,
                                                  TH_TENSOR_READER_ERROR_MEMORY) ||
                                  g_error_matches(error, TH_TENSOR_READER_ERROR,
                                                  TH_TENSOR_READER_ERROR_CANCELLED));
    if (!t)
        return set_error(err, io ? TENSORHOST_ERR_IO : TENSORHOST_ERR_FORMAT, "%s",
                         error->message);
    *out = wrap_tensor(t);
    (*out)->path = g_strdup(path);
    return TENSORHOST_OK;
}

void tensorhost_tensor_free(tensorhost_tensor *tensor)
{
    if (!tensor || !handle_ok(tensor, TENSOR_HANDLE, TRUE))
        return;
    th_sptensor_free(tensor->tensor);
    g_free(tensor->dims);
    g_free(tensor->path);
    g_free(tensor);
}

int32_t tensorhost_tensor_get_stats(const tensorhost_tensor *tensor,
                                    tensorhost_tensor_stats *stats, char *err)
{
    CHECK_HANDLE(tensor, TENSOR_HANDLE, "the tensor");
    if (!stats || stats->struct_size < offsetof(tensorhost_tensor_stats, density) + sizeof(double))
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "tensorhost_tensor_get_stats: stats is NULL or its struct_size is "
                         "below the 1.0 size");
    const th_sptensor *t = tensor->tensor;
    stats->nmodes = t->nmodes;
    stats->dims = tensor->dims;
    stats->nnz = t->nnz;
    stats->duplicates_merged = t->duplicates_merged;
    stats->explicit_zeros = t->explicit_zeros;
    stats->underflowed_values = t->underflowed_values;
    stats->norm = th_sptensor_norm(t);
    stats->density = th_sptensor_density(t);
    return TENSORHOST_OK;
}

/* ---- Backends --------------------------------------------------------------- */

static int32_t status_of_backend_error(const GError *error)
{
    if (g_error_matches(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_NO_DEVICE))
        return TENSORHOST_ERR_NO_DEVICE;
    if (g_error_matches(error, TH_PLUGIN_STATUS_ERROR, TH_ERR_INVALID_ARGUMENT))
        return TENSORHOST_ERR_INVALID_ARGUMENT;
    if (error->domain == TH_PLUGIN_STATUS_ERROR)
        return TENSORHOST_ERR_BACKEND;
    return TENSORHOST_ERR_PLUGIN;
}

static void option_free(gpointer data)
{
    th_config_option *option = data;
    g_free(option->key);
    g_free(option->value);
    g_free(option);
}

/* "a:b:c" as folders, empty parts left out; NULL gives none. */
static GPtrArray *split_search_path(const char *search_path)
{
    GPtrArray *folders = g_ptr_array_new_with_free_func(g_free);
    if (search_path && *search_path) {
        g_auto(GStrv) parts = g_strsplit(search_path, ":", -1);
        for (char **p = parts; *p; ++p)
            if (**p)
                g_ptr_array_add(folders, g_strdup(*p));
    }
    return folders;
}

int32_t tensorhost_backend_open(const char *plugin, const char *search_path,
                                const tensorhost_option *options, uint32_t n_options,
                                tensorhost_backend **out, char *err)
{
    if (!plugin || !out || (n_options > 0 && !options))
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "tensorhost_backend_open: %s is NULL",
                         !plugin ? "plugin" : !out ? "out" : "options");
    quiet_logging();
    g_autoptr(GPtrArray) folders = split_search_path(search_path);
    g_autoptr(GPtrArray) list = g_ptr_array_new_with_free_func(option_free);
    for (uint32_t i = 0; i < n_options; ++i) {
        if (!options[i].key || !options[i].value)
            return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                             "option %u: its %s is NULL", i, !options[i].key ? "key" : "value");
        th_config_option *option = g_new0(th_config_option, 1);
        option->key = g_strdup(options[i].key);
        option->value = g_strdup(options[i].value);
        g_ptr_array_add(list, option);
    }
    g_autoptr(GError) error = NULL;
    th_backend *backend = th_backend_open(plugin, folders, list, NULL, &error);
    if (!backend)
        return set_error(err, status_of_backend_error(error), "%s", error->message);
    tensorhost_backend *h = g_new0(tensorhost_backend, 1);
    register_handle(h, BACKEND_HANDLE);
    h->backend = backend;
    *out = h;
    return TENSORHOST_OK;
}

void tensorhost_backend_close(tensorhost_backend *backend)
{
    if (!backend || !handle_ok(backend, BACKEND_HANDLE, TRUE))
        return;
    th_backend_close(backend->backend);
    if (backend->devices)
        g_ptr_array_unref(backend->devices);
    g_free(backend);
}

const char *tensorhost_backend_id(const tensorhost_backend *backend)
{
    if (!backend || !handle_ok(backend, BACKEND_HANDLE, FALSE))
        return "";
    return th_backend_info(backend->backend)->id;
}

const char *tensorhost_backend_path(const tensorhost_backend *backend)
{
    if (!backend || !handle_ok(backend, BACKEND_HANDLE, FALSE))
        return "";
    return backend->backend->plugin->path;
}

const char *tensorhost_backend_device(tensorhost_backend *backend)
{
    if (!backend || !handle_ok(backend, BACKEND_HANDLE, FALSE))
        return "";
    g_autoptr(th_backend_facts) facts = th_backend_facts_take(backend->backend);
    if (!backend->devices)
        backend->devices = g_ptr_array_new_with_free_func(g_free);
    GPtrArray *given = backend->devices;
    if (given->len == 0 || strcmp(g_ptr_array_index(given, given->len - 1), facts->device) != 0)
        g_ptr_array_add(given, g_strdup(facts->device));
    return g_ptr_array_index(given, given->len - 1);
}

int32_t tensorhost_list_plugins(const char *search_path, tensorhost_plugin_fn each,
                                void *user_data, char *err)
{
    if (!each)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "tensorhost_list_plugins: each is NULL");
    quiet_logging();
    g_autoptr(GPtrArray) folders = split_search_path(search_path);
    g_autoptr(GPtrArray) path = th_plugin_search_path(folders);
    g_autoptr(GPtrArray) names = th_plugin_installed_names(path);
    for (guint i = 0; i < names->len; ++i) {
        const char *name = g_ptr_array_index(names, i);
        g_autoptr(GError) error = NULL;
        g_autofree char *file = th_plugin_resolve(name, path, &error);
        if (!file)
            continue; /* gone since the listing */
        th_backend *backend = th_backend_open(file, NULL, NULL, NULL, &error);
        g_autofree char *problem = backend ? NULL : th_escape_control(error->message);
        th_backend_close(backend);
        each(name, file, problem, user_data);
    }
    return TENSORHOST_OK;
}

/* ---- CP-ALS ----------------------------------------------------------------- */

typedef struct iteration_forward {
    tensorhost_iteration_fn fn;
    void *user_data;
} iteration_forward;

static gboolean forward_iteration(const th_cpd_iteration *it, void *user_data)
{
    const iteration_forward *f = user_data;
    return f->fn(it->iteration, it->fit, it->delta, it->seconds, f->user_data) == 0;
}

/* Reads a caller's sized struct `given` (NULL, or struct_size first) into
 * `out`, which holds the defaults: FALSE with a message naming `version`
 * and `init` when it is NULL or shorter than its first field list entry
 * (the minimum); else the fields its struct_size covers whole (`field_ends`:
 * where each field ends, in order; a size that ends inside a field, a
 * pointer cut in half, leaves that field at its default), and out's
 * struct_size set to `out_size`. */
static gboolean read_sized(void *out, size_t out_size, const void *given,
                           const size_t *field_ends, size_t n, const char *version,
                           const char *init, char *err)
{
    uint32_t given_size = 0;
    if (given)
        memcpy(&given_size, given, sizeof given_size);
    if (!given || given_size < field_ends[0]) {
        set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                  "params is NULL or its struct_size (%u) is below the %s minimum; start "
                  "from %s",
                  given_size, version, init);
        return FALSE;
    }
    size_t covered = 0;
    for (size_t i = 0; i < n; ++i)
        if (field_ends[i] <= given_size)
            covered = field_ends[i];
    memcpy(out, given, covered);
    const uint32_t size = (uint32_t)out_size;
    memcpy(out, &size, sizeof size);
    return TRUE;
}

/* The parameters as the library reads them: the caller's struct as far as
 * its struct_size goes, defaults for the rest. */
static gboolean read_params(const tensorhost_cpd_params *given, tensorhost_cpd_params *params,
                            char *err)
{
    static const tensorhost_cpd_params defaults = TENSORHOST_CPD_PARAMS_INIT;
    static const size_t field_ends[] = {
        offsetof(tensorhost_cpd_params, update) + sizeof(int32_t),
        offsetof(tensorhost_cpd_params, initial_factors) + sizeof(void *),
        offsetof(tensorhost_cpd_params, on_iteration) + sizeof(tensorhost_iteration_fn),
        offsetof(tensorhost_cpd_params, user_data) + sizeof(void *),
        offsetof(tensorhost_cpd_params, constraints) + sizeof(int32_t), /* 1.3 */
        offsetof(tensorhost_cpd_params, mode_constraints) + sizeof(void *),
        offsetof(tensorhost_cpd_params, l2) + sizeof(double), /* 1.5 */
        offsetof(tensorhost_cpd_params, l1) + sizeof(double),
        offsetof(tensorhost_cpd_params, mode_l1) + sizeof(void *),
        offsetof(tensorhost_cpd_params, hals_passes) + sizeof(uint32_t), /* 1.6 */
        offsetof(tensorhost_cpd_params, hals_budget) + sizeof(double),
    };
    *params = defaults;
    return read_sized(params, sizeof *params, given, field_ends, G_N_ELEMENTS(field_ends), "1.0",
                      "TENSORHOST_CPD_PARAMS_INIT", err);
}

/* The constrained modes as cp_als.h's mask (bit m: mode m; UINT64_MAX:
 * every mode): `mode_constraints` when given, else `constraints` (checked
 * already) for every mode. FALSE, with a message naming the entry, for an
 * unknown value in the list. */
static gboolean nonneg_modes_of(int32_t constraints, const int32_t *mode_constraints,
                                uint32_t nmodes, uint64_t *mask, char *err)
{
    *mask = constraints == TENSORHOST_CONSTRAINTS_NONNEG ? UINT64_MAX : 0;
    if (!mode_constraints)
        return TRUE;
    *mask = 0;
    for (uint32_t m = 0; m < nmodes; ++m) {
        if (mode_constraints[m] == TENSORHOST_CONSTRAINTS_NONE)
            continue;
        if (mode_constraints[m] != TENSORHOST_CONSTRAINTS_NONNEG) {
            set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                      "mode_constraints[%u] = %d: expected TENSORHOST_CONSTRAINTS_NONE or "
                      "_NONNEG",
                      m, mode_constraints[m]);
            return FALSE;
        }
        *mask |= UINT64_C(1) << m;
    }
    return TRUE;
}

static int32_t check_params(const tensorhost_cpd_params *p, char *err)
{
    if (p->rank < 1 || p->rank > 4096)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "rank %u: expected 1 to 4096", p->rank);
    if (p->max_iters < 1)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "max_iters 0: expected at least 1");
    if (!(p->tolerance >= 0.0) || !isfinite(p->tolerance))
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "tolerance %g: expected a finite number >= 0", p->tolerance);
    if (p->update < TENSORHOST_UPDATE_AUTO || p->update > TENSORHOST_UPDATE_HOST)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "update %d: expected TENSORHOST_UPDATE_AUTO, _SWEEP, _MODE or _HOST",
                         p->update);
    if (p->constraints != TENSORHOST_CONSTRAINTS_NONE &&
        p->constraints != TENSORHOST_CONSTRAINTS_NONNEG)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "constraints %d: expected TENSORHOST_CONSTRAINTS_NONE or _NONNEG",
                         p->constraints);
    /* A sweep with constraints or l1/l2 is the plan's to judge: a plugin of
     * ABI 1.6 takes them (the run refuses an older one by name). */
    if (!(p->l2 >= 0.0) || !isfinite(p->l2))
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "l2 %g: expected a finite number >= 0 (the ridge's weight)", p->l2);
    if (!(p->l1 >= 0.0) || !isfinite(p->l1))
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "l1 %g: expected a finite number >= 0 (every mode's l1 weight)", p->l1);
    if (p->hals_passes < 1)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "hals_passes 0: expected at least 1 (passes per mode update)");
    if (!(p->hals_budget >= 0.0) || !isfinite(p->hals_budget))
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "hals_budget %g: expected a finite number >= 0", p->hals_budget);
    return TENSORHOST_OK;
}

/* The l1 weights into cp_als.h's parameters: `mode_l1` when given
 * ([nmodes], each checked), else `l1` for every mode. */
static gboolean l1_weights_of(double l1, const double *mode_l1, uint32_t nmodes,
                              th_cpd_params *params, char *err)
{
    params->l1[0] = l1;
    params->l1_listed = 0;
    if (!mode_l1)
        return TRUE;
    for (uint32_t m = 0; m < nmodes; ++m) {
        if (!(mode_l1[m] >= 0.0) || !isfinite(mode_l1[m])) {
            set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                      "mode_l1[%u] = %g: expected a finite number >= 0", m, mode_l1[m]);
            return FALSE;
        }
        params->l1[m] = mode_l1[m];
    }
    params->l1_listed = nmodes;
    return TRUE;
}

/* The caller's initial factors: every one there and finite (a NULL entry
 * would be dereferenced, a NaN would surface an iteration later as the
 * backend's numeric failure), and >= 0 in the modes of `nonneg_modes` (bit
 * m: mode m), where `why` says why. */
static int32_t check_initial_factors(const double *const *factors, const th_sptensor *t,
                                     uint32_t rank, uint64_t nonneg_modes, const char *why,
                                     char *err)
{
    for (uint32_t m = 0; factors && m < t->nmodes; ++m) {
        if (!factors[m])
            return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                             "initial_factors[%u] is NULL: give all %u factors, or none", m,
                             t->nmodes);
        const uint64_t n = (uint64_t)t->dims[m] * rank;
        for (uint64_t i = 0; i < n; ++i)
            if (!isfinite(factors[m][i]))
                return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                                 "initial_factors[%u] row %" G_GUINT64_FORMAT
                                 ", column %" G_GUINT64_FORMAT " is %g: expected a finite "
                                 "number",
                                 m, i / rank, i % rank, factors[m][i]);
        const gboolean nonnegative = (nonneg_modes >> m) & 1u;
        for (uint64_t i = 0; nonnegative && i < n; ++i)
            if (factors[m][i] < 0.0)
                return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                                 "initial_factors[%u] row %" G_GUINT64_FORMAT
                                 ", column %" G_GUINT64_FORMAT " is %g: %s",
                                 m, i / rank, i % rank, factors[m][i], why);
    }
    return TENSORHOST_OK;
}

static int32_t status_of_run_error(const GError *error)
{
    if (g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_NOT_FINITE))
        return TENSORHOST_ERR_NUMERIC;
    if (error->domain == TH_CPD_ERROR)
        return TENSORHOST_ERR_INVALID_ARGUMENT;
    return status_of_backend_error(error);
}

/* How the library's warnings name things: its parameters. */
static th_cpd_warning_terms warning_terms(const tensorhost_tensor *tensor,
                                          const char *tolerance)
{
    return (th_cpd_warning_terms){
        .tensor = tensor->path ? tensor->path : "the tensor",
        .rank = "rank",
        .max_iters = "max_iters",
        .tolerance = tolerance,
    };
}

/* The session's warnings as the result keeps them: each one line. */
static GPtrArray *one_line_warnings(const GPtrArray *warnings)
{
    GPtrArray *lines = th_cpd_warnings_new();
    for (guint i = 0; i < warnings->len; ++i) {
        const th_cpd_warning *warning = g_ptr_array_index(warnings, i);
        th_cpd_warning *line = g_new0(th_cpd_warning, 1);
        line->code = warning->code;
        line->message = th_escape_control(warning->message);
        g_ptr_array_add(lines, line);
    }
    return lines;
}

static tensorhost_cpd *wrap_result(th_cpd_result *r, double load_seconds, GPtrArray *warnings)
{
    tensorhost_cpd *h = g_new0(tensorhost_cpd, 1);
    register_handle(h, CPD_HANDLE);
    h->result = r;
    h->load_seconds = load_seconds;
    h->warnings = warnings;
    h->dims = g_new(uint64_t, r->nmodes);
    for (uint32_t m = 0; m < r->nmodes; ++m)
        h->dims[m] = r->dims[m];
    const guint n = r->iterations->len;
    h->fits = g_new(double, n + 1);
    h->seconds = g_new(double, n + 1);
    const gboolean poisson = r->model == TH_MODEL_POISSON;
    if (poisson) {
        h->log_likelihoods = g_new(double, n + 1);
        h->kkt_violations = g_new(double, n + 1);
        h->inner_iterations = g_new(uint32_t, n + 1);
    }
    const gboolean completion = r->model == TH_MODEL_COMPLETION;
    if (completion) {
        h->train_rmses = g_new(double, n + 1);
        h->holdout_rmses = g_new(double, n + 1);
    }
    /* Regularised CP-ALS has an objective too (tensorhost_cpd_objective). */
    const gboolean objectives = completion || !isnan(r->objective);
    if (objectives)
        h->objectives = g_new(double, n + 1);
    for (guint i = 0; i < n; ++i) {
        const th_cpd_iteration *it = &g_array_index(r->iterations, th_cpd_iteration, i);
        h->fits[i] = it->fit;
        h->seconds[i] = it->seconds;
        if (poisson) {
            h->log_likelihoods[i] = it->log_likelihood;
            h->kkt_violations[i] = it->kkt_violation;
            h->inner_iterations[i] = it->inner_iterations;
        }
        if (completion) {
            h->train_rmses[i] = it->train_rmse;
            h->holdout_rmses[i] = it->holdout_rmse;
        }
        if (objectives)
            h->objectives[i] = it->objective;
    }
    return h;
}

/* Loads the tensor and runs `params` through the one session of every run
 * (cpd_session.h): the checks of the tensor, the warnings, the result. */
static int32_t run_session(tensorhost_backend *backend, const tensorhost_tensor *tensor,
                           const th_cpd_params *params, const th_cpd_warning_terms *terms,
                           const th_cpd_callbacks *callbacks, tensorhost_cpd **out, char *err)
{
    /* A stop asked before this call is not for it; one asked from here on
     * (the checks below scan every nonzero) is. */
    th_cancel_reset();
    const uint32_t nmodes = tensor->tensor->nmodes;
    const gboolean poisson = params->model == TH_MODEL_POISSON;
    /* CP-ALS's nonnegative update restores feasibility from any start;
     * completion's coordinate descent keeps it and does not restore it. */
    const uint64_t nonneg = poisson ? th_cpd_every_mode(nmodes)
                            : params->model == TH_MODEL_COMPLETION
                                ? th_cpd_nonneg_mask(params, nmodes)
                                : 0;
    const int32_t status = check_initial_factors(
        params->initial_factors, tensor->tensor, params->rank, nonneg,
        poisson ? "a Poisson model starts from factors >= 0"
                : "a nonnegative mode (TENSORHOST_CONSTRAINTS_NONNEG) starts from factors >= 0",
        err);
    if (status != TENSORHOST_OK)
        return status;
    th_backend *b = backend->backend;
    g_autoptr(GError) error = NULL;
    /* The caller's tensor is never changed: a copy is scaled when its values
     * need it (least squares only). */
    g_autoptr(th_cpd_session) session = th_cpd_session_new(b, params, NULL, terms, &error);
    if (!session || !th_cpd_session_prepare_copy(session, tensor->tensor, &error))
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT, "%s", error->message);
    const gint64 start = g_get_monotonic_time();
    if (!th_cpd_session_load(session, &error))
        return set_error(err, status_of_backend_error(error), "%s", error->message);
    th_cpd_result *r = th_cpd_session_run(session, callbacks, &error);
    th_cancel_reset();
    if (!r)
        return set_error(err, status_of_run_error(error), "%s", error->message);
    r->total_seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    *out = wrap_result(r, b->load_seconds, one_line_warnings(th_cpd_session_warnings(session)));
    return TENSORHOST_OK;
}

int32_t tensorhost_cp_als(tensorhost_backend *backend, const tensorhost_tensor *tensor,
                          const tensorhost_cpd_params *given, tensorhost_cpd **out, char *err)
{
    CHECK_HANDLE(backend, BACKEND_HANDLE, "the backend");
    CHECK_HANDLE(tensor, TENSOR_HANDLE, "the tensor");
    if (!out)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT, "tensorhost_cp_als: out is NULL");
    tensorhost_cpd_params p;
    if (!read_params(given, &p, err))
        return TENSORHOST_ERR_INVALID_ARGUMENT;
    quiet_logging();
    const int32_t status = check_params(&p, err);
    if (status != TENSORHOST_OK)
        return status;
    th_cpd_params params = {
        .model = TH_MODEL_LEAST_SQUARES,
        .rank = p.rank,
        .max_iters = p.max_iters,
        .tolerance = p.tolerance,
        .seed = p.seed,
        .update = (th_update_path)p.update,
        .initial_factors = p.initial_factors,
        .l2 = p.l2,
        .hals_max_passes = p.hals_passes,
        .hals_budget = p.hals_budget,
    };
    if (!nonneg_modes_of(p.constraints, p.mode_constraints, tensor->tensor->nmodes,
                         &params.nonneg_modes, err) ||
        !l1_weights_of(p.l1, p.mode_l1, tensor->tensor->nmodes, &params, err))
        return TENSORHOST_ERR_INVALID_ARGUMENT;
    const th_cpd_warning_terms terms = warning_terms(tensor, "tolerance");
    iteration_forward forward = {p.on_iteration, p.user_data};
    const th_cpd_callbacks callbacks = {
        .iteration = p.on_iteration ? forward_iteration : NULL,
        .user_data = &forward,
    };
    return run_session(backend, tensor, &params, &terms, &callbacks, out, err);
}

/* ---- CP-APR ----------------------------------------------------------------- */

typedef struct apr_forward {
    tensorhost_apr_iteration_fn fn;
    void *user_data;
} apr_forward;

static gboolean forward_apr_iteration(const th_cpd_iteration *it, void *user_data)
{
    const apr_forward *f = user_data;
    return f->fn(it->iteration, it->log_likelihood, it->kkt_violation, it->seconds,
                 f->user_data) == 0;
}

/* As read_params, for CP-APR's: the 1.2 minimum is the fields through seed. */
static gboolean read_apr_params(const tensorhost_apr_params *given, tensorhost_apr_params *params,
                                char *err)
{
    static const tensorhost_apr_params defaults = TENSORHOST_APR_PARAMS_INIT;
    static const size_t field_ends[] = {
        offsetof(tensorhost_apr_params, seed) + sizeof(uint64_t),
        offsetof(tensorhost_apr_params, initial_factors) + sizeof(void *),
        offsetof(tensorhost_apr_params, initial_weights) + sizeof(void *),
        offsetof(tensorhost_apr_params, on_iteration) + sizeof(tensorhost_apr_iteration_fn),
        offsetof(tensorhost_apr_params, user_data) + sizeof(void *),
    };
    *params = defaults;
    return read_sized(params, sizeof *params, given, field_ends, G_N_ELEMENTS(field_ends), "1.2",
                      "TENSORHOST_APR_PARAMS_INIT", err);
}

static int32_t check_apr_params(const tensorhost_apr_params *p, char *err)
{
    if (p->rank < 1 || p->rank > 4096)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "rank %u: expected 1 to 4096", p->rank);
    if (p->max_iters < 1)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "max_iters 0: expected at least 1");
    if (p->max_inner_iters < 1)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "max_inner_iters 0: expected at least 1");
    const struct {
        const char *name;
        double value;
        gboolean zero_ok;
    } numbers[] = {
        {"stoptol", p->stoptol, TRUE},
        {"kappa", p->kappa, TRUE},
        {"kappa_tolerance", p->kappa_tolerance, TRUE},
        {"epsilon", p->epsilon, FALSE},
        {"phi_threshold", p->phi_threshold, TRUE},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(numbers); ++i) {
        const double v = numbers[i].value;
        if (!isfinite(v) || v < 0.0 || (v == 0.0 && !numbers[i].zero_ok))
            return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                             "%s %g: expected a finite number %s 0", numbers[i].name, v,
                             numbers[i].zero_ok ? ">=" : ">");
    }
    return TENSORHOST_OK;
}

int32_t tensorhost_cp_apr(tensorhost_backend *backend, const tensorhost_tensor *tensor,
                          const tensorhost_apr_params *given, tensorhost_cpd **out, char *err)
{
    CHECK_HANDLE(backend, BACKEND_HANDLE, "the backend");
    CHECK_HANDLE(tensor, TENSOR_HANDLE, "the tensor");
    if (!out)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT, "tensorhost_cp_apr: out is NULL");
    tensorhost_apr_params p;
    if (!read_apr_params(given, &p, err))
        return TENSORHOST_ERR_INVALID_ARGUMENT;
    quiet_logging();
    const int32_t status = check_apr_params(&p, err);
    if (status != TENSORHOST_OK)
        return status;
    /* The tensor's values (finite, >= 0) are the session's to check
     * (th_cp_apr_check_tensor), before any work. */
    for (uint32_t r = 0; p.initial_factors && p.initial_weights && r < p.rank; ++r)
        if (!isfinite(p.initial_weights[r]) || p.initial_weights[r] < 0.0)
            return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                             "initial_weights[%u] is %g: expected a finite number >= 0", r,
                             p.initial_weights[r]);
    const th_cpd_params params = {
        .model = TH_MODEL_POISSON,
        .apr =
            {
                .max_inner_iters = p.max_inner_iters,
                .kappa = p.kappa,
                .kappa_tolerance = p.kappa_tolerance,
                .epsilon = p.epsilon,
                .phi_threshold = p.phi_threshold,
            },
        .rank = p.rank,
        .max_iters = p.max_iters,
        .tolerance = p.stoptol,
        .seed = p.seed,
        .update = TH_UPDATE_AUTO,
        .initial_factors = p.initial_factors,
        .initial_weights = p.initial_factors ? p.initial_weights : NULL,
    };
    const th_cpd_warning_terms terms = warning_terms(tensor, "stoptol");
    apr_forward forward = {p.on_iteration, p.user_data};
    const th_cpd_callbacks callbacks = {
        .iteration = p.on_iteration ? forward_apr_iteration : NULL,
        .user_data = &forward,
    };
    return run_session(backend, tensor, &params, &terms, &callbacks, out, err);
}

/* ---- Tensor completion ------------------------------------------------------ */

typedef struct complete_forward {
    tensorhost_complete_iteration_fn fn;
    void *user_data;
} complete_forward;

static gboolean forward_complete_iteration(const th_cpd_iteration *it, void *user_data)
{
    const complete_forward *f = user_data;
    return f->fn(it->iteration, it->train_rmse, it->holdout_rmse, it->objective, it->seconds,
                 f->user_data) == 0;
}

/* As read_params, for completion's: the 1.4 minimum is the fields through
 * seed. */
static gboolean read_complete_params(const tensorhost_complete_params *given,
                                     tensorhost_complete_params *params, char *err)
{
    static const tensorhost_complete_params defaults = TENSORHOST_COMPLETE_PARAMS_INIT;
    static const size_t field_ends[] = {
        offsetof(tensorhost_complete_params, seed) + sizeof(uint64_t),
        offsetof(tensorhost_complete_params, constraints) + sizeof(int32_t),
        offsetof(tensorhost_complete_params, mode_constraints) + sizeof(void *),
        offsetof(tensorhost_complete_params, initial_factors) + sizeof(void *),
        offsetof(tensorhost_complete_params, on_iteration) +
            sizeof(tensorhost_complete_iteration_fn),
        offsetof(tensorhost_complete_params, user_data) + sizeof(void *),
    };
    *params = defaults;
    return read_sized(params, sizeof *params, given, field_ends, G_N_ELEMENTS(field_ends), "1.4",
                      "TENSORHOST_COMPLETE_PARAMS_INIT", err);
}

static int32_t check_complete_params(const tensorhost_complete_params *p, char *err)
{
    if (p->rank < 1 || p->rank > 4096)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "rank %u: expected 1 to 4096", p->rank);
    if (p->max_iters < 1)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "max_iters 0: expected at least 1");
    if (!(p->tolerance >= 0.0) || !isfinite(p->tolerance))
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "tolerance %g: expected a finite number >= 0", p->tolerance);
    if (!(p->l2 >= 0.0) || !isfinite(p->l2))
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "l2 %g: expected a finite number >= 0 (the ridge's weight)", p->l2);
    /* Holding every entry out would leave nothing to train on. */
    if (!(p->holdout >= 0.0 && p->holdout < 1.0))
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "holdout %g: expected a fraction in [0, 1) (of the listed entries, "
                         "held out of training)",
                         p->holdout);
    if (p->constraints != TENSORHOST_CONSTRAINTS_NONE &&
        p->constraints != TENSORHOST_CONSTRAINTS_NONNEG)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "constraints %d: expected TENSORHOST_CONSTRAINTS_NONE or _NONNEG",
                         p->constraints);
    return TENSORHOST_OK;
}

int32_t tensorhost_complete(tensorhost_backend *backend, const tensorhost_tensor *tensor,
                            const tensorhost_complete_params *given, tensorhost_cpd **out,
                            char *err)
{
    CHECK_HANDLE(backend, BACKEND_HANDLE, "the backend");
    CHECK_HANDLE(tensor, TENSOR_HANDLE, "the tensor");
    if (!out)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "tensorhost_complete: out is NULL");
    tensorhost_complete_params p;
    if (!read_complete_params(given, &p, err))
        return TENSORHOST_ERR_INVALID_ARGUMENT;
    quiet_logging();
    const int32_t status = check_complete_params(&p, err);
    if (status != TENSORHOST_OK)
        return status;
    /* The tensor's values, its split and its rows are the session's to
     * check (completion_data.h), before any work; the backend's
     * row_least_squares its plan's. */
    th_cpd_params params = {
        .model = TH_MODEL_COMPLETION,
        .completion =
            {
                .l2 = p.l2,
                .holdout = p.holdout,
                .passes = TH_COMPLETION_DEFAULT_PASSES,
            },
        .rank = p.rank,
        .max_iters = p.max_iters,
        .tolerance = p.tolerance,
        .seed = p.seed,
        .update = TH_UPDATE_AUTO,
        .initial_factors = p.initial_factors,
    };
    if (!nonneg_modes_of(p.constraints, p.mode_constraints, tensor->tensor->nmodes,
                         &params.nonneg_modes, err))
        return TENSORHOST_ERR_INVALID_ARGUMENT;
    const th_cpd_warning_terms terms = warning_terms(tensor, "tolerance");
    complete_forward forward = {p.on_iteration, p.user_data};
    const th_cpd_callbacks callbacks = {
        .iteration = p.on_iteration ? forward_complete_iteration : NULL,
        .user_data = &forward,
    };
    return run_session(backend, tensor, &params, &terms, &callbacks, out, err);
}

void tensorhost_cpd_free(tensorhost_cpd *result)
{
    if (!result || !handle_ok(result, CPD_HANDLE, TRUE))
        return;
    th_cpd_result_free(result->result);
    g_free(result->dims);
    g_free(result->fits);
    g_free(result->seconds);
    g_free(result->log_likelihoods);
    g_free(result->kkt_violations);
    g_free(result->inner_iterations);
    g_free(result->train_rmses);
    g_free(result->holdout_rmses);
    g_free(result->objectives);
    g_ptr_array_unref(result->warnings);
    g_free(result);
}

static const th_cpd_result *result_of(const tensorhost_cpd *h)
{
    return h && handle_ok(h, CPD_HANDLE, FALSE) ? h->result : NULL;
}

uint32_t tensorhost_cpd_nmodes(const tensorhost_cpd *h)
{
    const th_cpd_result *r = result_of(h);
    return r ? r->nmodes : 0;
}

uint32_t tensorhost_cpd_rank(const tensorhost_cpd *h)
{
    const th_cpd_result *r = result_of(h);
    return r ? r->rank : 0;
}

uint64_t tensorhost_cpd_dim(const tensorhost_cpd *h, uint32_t mode)
{
    const th_cpd_result *r = result_of(h);
    return r && mode < r->nmodes ? h->dims[mode] : 0;
}

int32_t tensorhost_cpd_status_of(const tensorhost_cpd *h)
{
    const th_cpd_result *r = result_of(h);
    if (!r)
        return TENSORHOST_ERR_MISUSE;
    return r->interrupted ? TENSORHOST_CPD_INTERRUPTED
           : r->converged ? TENSORHOST_CPD_CONVERGED
                          : TENSORHOST_CPD_MAX_ITERS;
}

const double *tensorhost_cpd_weights(const tensorhost_cpd *h)
{
    const th_cpd_result *r = result_of(h);
    return r ? r->lambda : NULL;
}

const double *tensorhost_cpd_factor(const tensorhost_cpd *h, uint32_t mode)
{
    const th_cpd_result *r = result_of(h);
    return r && r->factors && mode < r->nmodes ? r->factors[mode] : NULL;
}

double tensorhost_cpd_fit(const tensorhost_cpd *h)
{
    const th_cpd_result *r = result_of(h);
    return r ? r->fit : NAN;
}

uint32_t tensorhost_cpd_iterations(const tensorhost_cpd *h)
{
    const th_cpd_result *r = result_of(h);
    return r ? r->iterations->len : 0;
}

const double *tensorhost_cpd_fits(const tensorhost_cpd *h)
{
    return result_of(h) ? h->fits : NULL;
}

const double *tensorhost_cpd_iteration_seconds(const tensorhost_cpd *h)
{
    return result_of(h) ? h->seconds : NULL;
}

int32_t tensorhost_cpd_model(const tensorhost_cpd *h)
{
    const th_cpd_result *r = result_of(h);
    return r ? (int32_t)r->model : TENSORHOST_ERR_MISUSE;
}

int32_t tensorhost_cpd_constraints(const tensorhost_cpd *h)
{
    const th_cpd_result *r = result_of(h);
    if (!r)
        return TENSORHOST_ERR_MISUSE;
    return r->nonneg_modes ? TENSORHOST_CONSTRAINTS_NONNEG : TENSORHOST_CONSTRAINTS_NONE;
}

int32_t tensorhost_cpd_mode_constraints(const tensorhost_cpd *h, uint32_t mode)
{
    const th_cpd_result *r = result_of(h);
    if (!r)
        return TENSORHOST_ERR_MISUSE;
    if (mode >= r->nmodes)
        return TENSORHOST_ERR_INVALID_ARGUMENT;
    return r->nonneg_modes >> mode & 1u ? TENSORHOST_CONSTRAINTS_NONNEG
                                        : TENSORHOST_CONSTRAINTS_NONE;
}

double tensorhost_cpd_log_likelihood(const tensorhost_cpd *h)
{
    const th_cpd_result *r = result_of(h);
    return r && r->model == TH_MODEL_POISSON ? r->log_likelihood : NAN;
}

double tensorhost_cpd_kkt_violation(const tensorhost_cpd *h)
{
    const th_cpd_result *r = result_of(h);
    return r && r->model == TH_MODEL_POISSON ? r->kkt_violation : NAN;
}

const double *tensorhost_cpd_log_likelihoods(const tensorhost_cpd *h)
{
    return result_of(h) ? h->log_likelihoods : NULL;
}

const double *tensorhost_cpd_kkt_violations(const tensorhost_cpd *h)
{
    return result_of(h) ? h->kkt_violations : NULL;
}

const uint32_t *tensorhost_cpd_inner_iterations(const tensorhost_cpd *h)
{
    return result_of(h) ? h->inner_iterations : NULL;
}

const double *tensorhost_cpd_train_rmses(const tensorhost_cpd *h)
{
    return result_of(h) ? h->train_rmses : NULL;
}

const double *tensorhost_cpd_holdout_rmses(const tensorhost_cpd *h)
{
    return result_of(h) ? h->holdout_rmses : NULL;
}

const double *tensorhost_cpd_objectives(const tensorhost_cpd *h)
{
    return result_of(h) ? h->objectives : NULL;
}

double tensorhost_cpd_objective(const tensorhost_cpd *h)
{
    const th_cpd_result *r = result_of(h);
    if (!r)
        return NAN;
    return r->model == TH_MODEL_COMPLETION ? r->completion.objective : r->objective;
}

uint32_t tensorhost_cpd_hals_passes(const tensorhost_cpd *h, uint32_t mode)
{
    const th_cpd_result *r = result_of(h);
    if (!r || r->model != TH_MODEL_LEAST_SQUARES || mode >= r->nmodes || mode >= TH_MAX_MODES)
        return 0;
    return r->hals_passes[mode];
}

int32_t tensorhost_cpd_get_completion(const tensorhost_cpd *h, tensorhost_completion_info *info,
                                      char *err)
{
    CHECK_HANDLE(h, CPD_HANDLE, "the result");
    if (!info || info->struct_size < offsetof(tensorhost_completion_info, empty_rows) +
                                         sizeof(uint64_t))
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "info is NULL or its struct_size is below the 1.4 size; start from "
                         "TENSORHOST_COMPLETION_INFO_INIT");
    const th_cpd_result *r = h->result;
    if (r->model != TH_MODEL_COMPLETION)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "the result is of the %s model, not of tensor completion "
                         "(tensorhost_complete)",
                         th_cpd_model_name(r->model));
    const th_completion_summary *c = &r->completion;
    tensorhost_completion_info filled = {
        .struct_size = info->struct_size,
        .observed = c->observed,
        .training = c->observed - c->held_out,
        .held_out = c->held_out,
        .l2 = c->l2,
        .holdout = c->holdout,
        .published_iteration = c->best_iteration,
        .objective = c->objective,
        .train_rmse = c->train_rmse,
        .holdout_rmse = c->holdout_rmse,
        .singular_row_solves = c->singular_rows,
        .empty_rows = c->empty_rows,
    };
    /* A caller built against a later minor has a longer struct: its tail,
     * unknown here, keeps the caller's values. */
    const size_t size = MIN((size_t)info->struct_size, sizeof filled);
    memcpy((char *)info + sizeof info->struct_size, (const char *)&filled + sizeof info->struct_size,
           size - sizeof info->struct_size);
    return TENSORHOST_OK;
}

int32_t tensorhost_cpd_get_timings(const tensorhost_cpd *h, tensorhost_cpd_timings *timings,
                                   char *err)
{
    CHECK_HANDLE(h, CPD_HANDLE, "the result");
    if (!timings ||
        timings->struct_size < offsetof(tensorhost_cpd_timings, algebra) + sizeof(double))
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "timings is NULL or its struct_size is below the 1.0 size");
    const th_cpd_result *r = h->result;
    double mttkrp = 0.0;
    for (uint32_t m = 0; m < r->nmodes; ++m)
        mttkrp = r->mttkrp_seconds[m] < 0.0 || mttkrp < 0.0 ? -1.0 : mttkrp + r->mttkrp_seconds[m];
    timings->total = r->total_seconds;
    timings->load = h->load_seconds;
    timings->mttkrp = mttkrp;
    timings->sweep = r->sweep_seconds;
    timings->update = r->update_seconds;
    timings->algebra = r->algebra_seconds;
    return TENSORHOST_OK;
}

uint32_t tensorhost_cpd_warning_count(const tensorhost_cpd *h)
{
    return result_of(h) ? h->warnings->len : 0;
}

int32_t tensorhost_cpd_warning(const tensorhost_cpd *h, uint32_t index, int32_t *code,
                               const char **message, char *err)
{
    CHECK_HANDLE(h, CPD_HANDLE, "the result");
    if (index >= h->warnings->len)
        return set_error(err, TENSORHOST_ERR_INVALID_ARGUMENT,
                         "warning %u: the result has %u warnings", index, h->warnings->len);
    const th_cpd_warning *warning = g_ptr_array_index(h->warnings, index);
    if (code)
        *code = (int32_t)warning->code;
    if (message)
        *message = warning->message;
    return TENSORHOST_OK;
}

const char *tensorhost_warning_name(int32_t code)
{
    switch (code) {
    case TENSORHOST_WARN_RANK_ABOVE_BOUND:
        return "TENSORHOST_WARN_RANK_ABOVE_BOUND";
    case TENSORHOST_WARN_RANK_DEFICIENT:
        return "TENSORHOST_WARN_RANK_DEFICIENT";
    case TENSORHOST_WARN_NOT_CONVERGED:
        return "TENSORHOST_WARN_NOT_CONVERGED";
    case TENSORHOST_WARN_UNDERFLOWED_VALUES:
        return "TENSORHOST_WARN_UNDERFLOWED_VALUES";
    case TENSORHOST_WARN_NON_INTEGER_VALUES:
        return "TENSORHOST_WARN_NON_INTEGER_VALUES";
    case TENSORHOST_WARN_EMPTY_ROWS:
        return "TENSORHOST_WARN_EMPTY_ROWS";
    }
    return "?";
}

/* ---- Log lines -------------------------------------------------------------- */

/* log.h's sink has the handler's signature: the handler is the sink. */
void tensorhost_set_log_handler(tensorhost_log_fn fn, void *user_data)
{
    quiet_logging();
    const th_log_sink_fn sink = fn;
    th_log_set_sink(sink, user_data);
}

void tensorhost_request_stop(void) { th_cancel_request(); }
