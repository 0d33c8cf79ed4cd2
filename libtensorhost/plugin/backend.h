/* A backend in use: a loaded plugin plus one instance of it, with the ABI's
 * status codes turned into GErrors. This module is the one place the host
 * calls instance functions, so every call is checked the same way: the
 * program, the comparison, the checker and the benchmark all come through
 * here (the th_call_* door at the end serves the two that must see a
 * plugin's raw answers). */
#ifndef TH_BACKEND_H
#define TH_BACKEND_H

#include <glib.h>
#include "plugin/plugin_loader.h"
#include "tensor/sptensor.h"

/* Where an iteration's factor updates run. */
typedef enum th_update_path {
    TH_UPDATE_AUTO = 0, /* the best the backend has: SWEEP, else MODE, else HOST */
    TH_UPDATE_SWEEP,    /* one als_sweep() per iteration (ABI 1.1); the backend solves */
    TH_UPDATE_MODE,     /* per mode: mttkrp(), host solve, als_update() in the backend */
    TH_UPDATE_HOST,     /* per mode: mttkrp(), host solve, factor update on the host */
} th_update_path;

typedef struct th_backend {
    th_plugin *plugin;
    th_instance *instance;
    uint32_t nmodes; /* of the loaded tensor, 0 before */
    uint32_t rank;
    th_index *dims;  /* copy of the loaded tensor's dims */
    double load_seconds; /* wall time of load_tensor (preprocessing; with the deal of
                            each mode's nonzeros, th_cpd_session_load, where a run deals them) */
    /* Loaded with each mode's own nonzeros (th_backend_load_mode_tensors):
     * per mode, 2 owned_processes + 1 numbers (th_backend_owned_begin and
     * th_backend_owned_window_end read them); NULL otherwise. */
    uint32_t owned_processes;
    uint64_t *owned_rows;
    /* The run planned on this backend (th_cpd_plan): its rank, checked
     * against the plugin's maximum, and the update path asked for and the
     * one it resolved to; a run of the same plan checks nothing again. */
    gboolean planned;
    uint32_t planned_rank;
    th_update_path requested_update, update_path;
    /* In a run of several processes, whether the backend sums their
     * MTTKRPs itself (th_backend_sums_processes), which the path rests on. */
    gboolean planned_process_sums;
    int32_t planned_model; /* the th_cpd_model (cp_als.h) the plan was made for */
    uint64_t planned_nonneg_modes; /* the plan's th_cpd_params.nonneg_modes */
    /* The plan's coordinate-descent modes and whether it was regularised
     * (th_cpd_descent_mask, th_cpd_regularised over every mode). */
    uint64_t planned_descent_modes;
    gboolean planned_regularised;
} th_backend;

/* Resolves `plugin` ("auto", a name or a path) along `search_path` (may be
 * NULL), loads it and creates an instance. The plugin gets `options`
 * (th_config_option*, for whichever plugin runs; may be NULL), then the
 * entries of the table in `option_tables` (th_config_plugin_options*; may
 * be NULL) named after its id, which replace common keys of the same name.
 * "auto" tries "gpu-adaptive" first and falls back to "cpu-reference" when
 * that plugin is missing or reports no usable device, logging why. A table
 * naming neither the plugin that runs nor an installed one is an error. */
th_backend *th_backend_open(const char *plugin, GPtrArray *search_path, GPtrArray *options,
                            GPtrArray *option_tables, GError **error);
/* What a run needs of a backend beyond the 1.0 functions, for "auto". */
typedef enum th_backend_needs {
    TH_BACKEND_NEEDS_NOTHING = 0,
    /* generalized_mttkrp and factor_update (ABI 1.4): models other than
     * least squares. */
    TH_BACKEND_NEEDS_GENERALIZED = 1 << 0,
    /* row_least_squares (ABI 1.5) and generalized_mttkrp: completion. */
    TH_BACKEND_NEEDS_ROW_LEAST_SQUARES = 1 << 1,
} th_backend_needs;
/* th_backend_open for a run that needs `needs` (th_backend_needs flags):
 * "auto" skips gpu-adaptive when it lacks them, logging why (`who`, e.g.
 * "cpd.model = \"poisson\"", names what needs them), and falls back to
 * cpu-reference. A named plugin is opened as it is: the plan
 * (th_cpd_plan) refuses it with a message naming what it lacks. */
th_backend *th_backend_open_for(const char *plugin, GPtrArray *search_path, GPtrArray *options,
                                GPtrArray *option_tables, unsigned needs, const char *who,
                                GError **error);
/* A th_backend over a (plugin, instance) pair the caller owns, whose loaded
 * tensor has `nmodes` modes of lengths `dims` (borrowed) at `rank`: lets the
 * checker and the benchmark step their own instances through the same code
 * as a run (als_step.h). Never th_backend_close it. */
th_backend th_backend_borrow(th_plugin *plugin, th_instance *instance, uint32_t nmodes,
                             uint32_t rank, const th_index *dims);

/* Destroys the instance, then unloads the plugin. Accepts NULL. */
void th_backend_close(th_backend *backend);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(th_backend, th_backend_close)

const th_plugin_info *th_backend_info(const th_backend *backend);

/* load_tensor, timed into backend->load_seconds. */
gboolean th_backend_load_tensor(th_backend *backend, const th_sptensor *tensor, uint32_t rank,
                                GError **error);
/* Whether load_tensor builds each mode from th_coo_tensor.mode_nonzeros
 * (th_runtime_info.mode_nonzeros, ABI 1.10). */
gboolean th_backend_takes_mode_nonzeros(th_backend *backend);
/* load_tensor with mode_nonzeros: mode m built from mode_tensors[m] (this
 * process's nonzeros of the mode-m rows it owns; every one with the same
 * nmodes and dims), and every process's owned rows kept in the backend:
 * `owned_rows` (taken), per mode m at m * (2 processes + 1), the processes
 * + 1 boundaries of their owned rows (process p owns [b[p], b[p + 1]),
 * consecutive from 0 to the mode's dimension), then each one's end of the
 * rows its MTTKRP writes (th_dist_dealt's window_end). The backend must
 * take them (th_backend_takes_mode_nonzeros). */
gboolean th_backend_load_mode_tensors(th_backend *backend, th_sptensor *const *mode_tensors,
                                      uint32_t rank, uint32_t processes, uint64_t *owned_rows,
                                      GError **error);
/* Of a backend loaded by th_backend_load_mode_tensors: mode `mode`'s
 * owned-row boundaries [owned_processes + 1] and window ends
 * [owned_processes]. */
static inline const uint64_t *th_backend_owned_begin(const th_backend *backend, uint32_t mode)
{
    return backend->owned_rows + (size_t)mode * (2 * backend->owned_processes + 1);
}
static inline const uint64_t *th_backend_owned_window_end(const th_backend *backend,
                                                          uint32_t mode)
{
    return th_backend_owned_begin(backend, mode) + backend->owned_processes + 1;
}

gboolean th_backend_set_factor(th_backend *backend, uint32_t mode, const double *data,
                               GError **error);
gboolean th_backend_get_factor(th_backend *backend, uint32_t mode, double *data,
                               GError **error);
gboolean th_backend_mttkrp(th_backend *backend, uint32_t mode, GError **error);
gboolean th_backend_get_mttkrp_result(th_backend *backend, uint32_t mode, double *data,
                                      GError **error);
gboolean th_backend_has_als_update(const th_backend *backend);
gboolean th_backend_als_update(th_backend *backend, uint32_t mode, const double *w, int32_t norm,
                               double *lambda, double *gram, double *inner, GError **error);
gboolean th_backend_has_als_sweep(const th_backend *backend);
/* The minor version of the plugin ABI the plugin's entry says it was built
 * against (entry->abi_version.minor). */
uint32_t th_backend_abi_minor(const th_backend *backend);
/* Whether the plugin was built against ABI 1.6 or later, so that it honours
 * (or refuses) the 1.6 in-fields of als_sweep and als_update_nonneg: a host
 * gives those fields values other than their defaults only then (plugin.h's
 * growth rules). */
gboolean th_backend_takes_abi_1_6(const th_backend *backend);

/* What regularises or constrains a sweep's updates (the 1.6 in-fields of
 * th_als_sweep_io, as als_sweep() in plugin.h reads them): per mode its
 * TH_CONSTRAINT_* and l1 weight (NULL: none, 0), the ridge, the model's
 * weights when the sweep starts (NULL: ones; not the lambda the sweep
 * writes) and the coordinate-descent passes and tolerance. */
typedef struct th_sweep_terms {
    const int32_t *constraints; /* [nmodes] or NULL */
    const double *l1;           /* [nmodes] or NULL */
    double ridge;
    const double *scale;        /* [rank] or NULL */
    uint32_t hals_sweeps;       /* >= 1 */
    double hals_tolerance;
    /* [nmodes] each mode's passes instead of hals_sweeps, or NULL. Only a
     * plugin of ABI 1.9 takes them: an older one's sweep is refused
     * (TH_ERR_UNSUPPORTED) before it is called. */
    const uint32_t *hals_mode_sweeps;
} th_sweep_terms;

/* Whether `terms` (may be NULL) changes any update: a constraint other
 * than TH_CONSTRAINT_NONE, an l1 or a ridge other than 0 among `nmodes`
 * modes. Without, a sweep is the plain 1.1 one. */
gboolean th_sweep_terms_active(const th_sweep_terms *terms, uint32_t nmodes);

/* One whole CP-ALS iteration in the backend (ABI 1.1 als_sweep): `grams`
 * holds backend->nmodes rank x rank Grams of the current factors and gets
 * those of the updated modes back; `lambda` and `inner` ([rank]) are those
 * of the last updated mode. `*modes_done` says how many modes (0 ..) were
 * updated: fewer than nmodes when the backend's Cholesky broke down and the
 * caller must finish the iteration from that mode. On failure it is 0,
 * except after TH_ERR_CANCELLED, when it counts the modes the backend
 * finished before it stopped. A modes_done beyond
 * nmodes is an error (TH_ERR_INTERNAL), as is calling it on a backend
 * without als_sweep (TH_ERR_UNSUPPORTED). */
gboolean th_backend_als_sweep(th_backend *backend, int32_t norm, double *const *grams,
                              double *lambda, double *inner, uint32_t *modes_done,
                              GError **error);
/* The same with the 1.6 `terms` (may be NULL: the plain sweep). Active
 * terms go only to a plugin of ABI 1.6 or later; for an older one the call
 * is refused here, before the plugin sees it (TH_ERR_UNSUPPORTED naming
 * the plugin and its version), as an older plugin would ignore them
 * unseen. A plugin may refuse them itself with TH_ERR_UNSUPPORTED, before
 * it changes anything: then *modes_done is 0 and the caller runs the
 * iteration per mode. */
gboolean th_backend_als_sweep_with(th_backend *backend, int32_t norm,
                                   const th_sweep_terms *terms, double *const *grams,
                                   double *lambda, double *inner, uint32_t *modes_done,
                                   GError **error);
gboolean th_backend_has_init_factors(const th_backend *backend);
/* The backend draws its own initial factors (ABI 1.3 init_factors): every
 * mode's factor becomes F_m(i, r) = th_initial_factor_value(seed, m, i, r)
 * (<tensorhost/plugin_sdk.h>) as set_factor would hold it, and `grams`
 * (backend->nmodes rank x rank arrays) gets their Grams. Calling it on a
 * backend without init_factors is an error (TH_ERR_UNSUPPORTED). */
gboolean th_backend_init_factors(th_backend *backend, uint64_t seed, double *const *grams,
                                 GError **error);
/* Whether the backend has both functions of the 1.4 ABI that models other
 * than least squares run on (generalized_mttkrp and factor_update). */
gboolean th_backend_has_generalized_mttkrp(const th_backend *backend);
/* generalized_mttkrp (ABI 1.4): mode's result (mode TH_MODE_NONE: none)
 * from g = `elementwise` (TH_ELEMENTWISE_*) and, into *reduced (may be NULL),
 * the sum of h = `reduction` (TH_REDUCTION_*) over the nonzeros, with the
 * model weighted by `weights` ([rank], NULL for ones). Calling it on a
 * backend without the function is an error (TH_ERR_UNSUPPORTED). */
gboolean th_backend_generalized_mttkrp(th_backend *backend, uint32_t mode, int32_t elementwise,
                                       int32_t reduction, double epsilon,
                                       const double *weights, double *reduced, GError **error);
/* factor_update (ABI 1.4): one TH_FACTOR_* operation on mode's factor;
 * `vector` ([rank] or NULL), tolerance and offset as the operation reads
 * them (threshold: RAISE_INADMISSIBLE_ZEROS's); *violation and *count
 * (each may be NULL) get what it reports. */
gboolean th_backend_factor_update(th_backend *backend, uint32_t mode, int32_t operation,
                                  double *vector, double threshold, double tolerance,
                                  double offset, double *violation, uint64_t *count, GError **error);
/* Whether the backend has als_update_nonneg (ABI 1.5): nonnegative CP's
 * update in the backend. */
gboolean th_backend_has_als_update_nonneg(const th_backend *backend);
/* als_update_nonneg (ABI 1.5): mode's factor, times `scale` ([rank] or
 * NULL), updated by hierarchical ALS under A >= 0 from its latest MTTKRP
 * result and `v` (the Hadamard product of the other Grams), up to `sweeps`
 * passes with `tolerance`, then normalised (`norm`, TH_NORM_*) into lambda,
 * gram and inner as th_backend_als_update's; *passes (may be NULL) gets the
 * passes made. */
gboolean th_backend_als_update_nonneg(th_backend *backend, uint32_t mode, const double *v,
                                      const double *scale, uint32_t sweeps, double tolerance,
                                      int32_t norm, double *lambda, double *gram, double *inner,
                                      uint32_t *passes, GError **error);
/* The 1.6 in-fields of als_update_nonneg: the ridge, the mode's l1 weight
 * and its constraint (TH_CONSTRAINT_NONNEG by default: 1.5's update). */
typedef struct th_descent_terms {
    double ridge;
    double l1;
    int32_t constraint;
} th_descent_terms;
/* Whether `terms` differ from 1.5's update (ridge 0, l1 0, nonnegative). */
gboolean th_descent_terms_active(const th_descent_terms *terms);
/* th_backend_als_update_nonneg with the 1.6 `terms` (NULL: 1.5's update,
 * as th_backend_als_update_nonneg): the mode's factor by the coordinate
 * descent of plugin.h's th_nonneg_update_io (th_dense_hals's rule). Active
 * terms go only to a plugin of ABI 1.6 or later; for an older one the call
 * is refused here with TH_ERR_UNSUPPORTED naming the plugin and its
 * version, before anything changes, as a 1.6 plugin refuses a combination
 * it cannot do. */
gboolean th_backend_als_update_descent(th_backend *backend, uint32_t mode, const double *v,
                                       const double *scale, uint32_t sweeps, double tolerance,
                                       int32_t norm, const th_descent_terms *terms,
                                       double *lambda, double *gram, double *inner,
                                       uint32_t *passes, GError **error);
/* Whether the backend has what tensor completion runs on: row_least_squares
 * (ABI 1.5) and generalized_mttkrp (its training error). */
gboolean th_backend_has_row_least_squares(const th_backend *backend);
/* row_least_squares (ABI 1.5): every row of mode's factor solved from its own
 * nonzeros with `ridge` (th_row_least_squares_io); `passes` sweeps of
 * coordinate descent when `nonneg`. *out (may be NULL) gets the io as the
 * backend left it (its counts and factor_norm_squared). Calling it on a
 * backend without the function is an error (TH_ERR_UNSUPPORTED). */
gboolean th_backend_row_least_squares(th_backend *backend, uint32_t mode, double ridge,
                                      gboolean nonneg, uint32_t passes,
                                      th_row_least_squares_io *out, GError **error);
/* Whether the backend runs CP-APR's inner iterations of a mode in one call
 * (multiplicative_updates, ABI 1.7). */
gboolean th_backend_has_multiplicative_updates(const th_backend *backend);
/* multiplicative_updates (ABI 1.7): up to max_iterations of CP-APR's inner
 * iterations of `mode` (th_multiplicative_updates_io), with the Poisson
 * ratio floored at epsilon, stopping on `tolerance`. *out gets the io as
 * the backend left it (iterations, updates, violation). Calling it on a
 * backend without the function is an error (TH_ERR_UNSUPPORTED). */
gboolean th_backend_multiplicative_updates(th_backend *backend, uint32_t mode, double epsilon,
                                           double tolerance, uint32_t max_iterations,
                                           th_multiplicative_updates_io *out, GError **error);
gboolean th_backend_runtime_info(th_backend *backend, th_runtime_info *info, GError **error);
/* Whether the backend sums its MTTKRPs over a run's processes itself
 * (th_runtime_info.process_sums, ABI 1.8); FALSE where its runtime info
 * cannot be read. */
gboolean th_backend_sums_processes(th_backend *backend);
gboolean th_backend_mode_info(th_backend *backend, uint32_t mode, th_mode_info *info,
                              GError **error);

/* What a backend says of itself at one moment, taken in one go
 * (th_backend_facts_take) so that the console summary, report.json and a
 * comparison read the same plain facts instead of calling into the plugin
 * again each. Strings are owned copies, "" when not reported. */
typedef struct th_backend_mode_facts {
    char *scheme;        /* th_mode_info.scheme */
    uint32_t partitions;
    gboolean reported;   /* FALSE when get_mode_info failed (a plugin without it
                            reports an empty scheme and 0 partitions) */
} th_backend_mode_facts;

typedef struct th_backend_facts {
    char *id, *name, *version; /* th_plugin_info */
    char *path;                /* the .so */
    char *abi;                 /* the plugin's ABI, "1.1" */
    gboolean f32;              /* value_type is TH_VALUE_F32 */
    gboolean has_als_update, has_als_sweep;
    gboolean has_init_factors; /* ABI 1.3 */
    /* ABI 1.4: generalized_mttkrp and factor_update both (models other than
     * least squares run on it) */
    gboolean has_generalized_mttkrp;
    /* ABI 1.5: row_least_squares (tensor completion), als_update_nonneg
     * (nonnegative CP's update in the backend). */
    gboolean has_row_least_squares;
    gboolean has_als_update_nonneg;
    char *device, *details;    /* th_runtime_info */
    uint64_t tensor_bytes, factor_bytes, workspace_bytes;
    double load_seconds;       /* preprocessing: load_tensor's wall time */
    uint32_t nmodes;           /* of the loaded tensor; 0 before */
    th_backend_mode_facts *modes; /* [nmodes] */
} th_backend_facts;

/* The facts of `backend` now; a plugin whose info calls fail gives the
 * empty values above (the failure is logged at debug level). */
th_backend_facts *th_backend_facts_take(th_backend *backend);
void th_backend_facts_free(th_backend_facts *facts);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(th_backend_facts, th_backend_facts_free)

/* ---- The door: instance calls on a bare (plugin, instance) pair ----------
 * For the conformance checker and the benchmark, which drive instances of
 * their own (several per plugin, misused on purpose) and must see exactly
 * what a plugin answers. Each passes its arguments on as they are and
 * returns the plugin's status with its message in `err` (TH_ERROR_SIZE
 * bytes); an optional function the plugin lacks gives TH_ERR_UNSUPPORTED and
 * a message saying so. create() gets the plugin's own host services.
 * th_call_destroy accepts a NULL instance and passes it on (the ABI says a
 * plugin must accept it). */
th_status th_call_create(const th_plugin *plugin, const th_option *options, uint32_t n_options,
                         th_instance **out, char *err);
void th_call_destroy(const th_plugin *plugin, th_instance *instance);
th_status th_call_load_tensor(const th_plugin *plugin, th_instance *instance,
                              const th_coo_tensor *tensor, uint32_t rank, char *err);
th_status th_call_set_factor(const th_plugin *plugin, th_instance *instance, uint32_t mode,
                             const double *data, char *err);
th_status th_call_get_factor(const th_plugin *plugin, th_instance *instance, uint32_t mode,
                             double *data, char *err);
th_status th_call_mttkrp(const th_plugin *plugin, th_instance *instance, uint32_t mode,
                         char *err);
th_status th_call_get_mttkrp_result(const th_plugin *plugin, th_instance *instance,
                                    uint32_t mode, double *data, char *err);
th_status th_call_als_update(const th_plugin *plugin, th_instance *instance, uint32_t mode,
                             const double *w, int32_t norm, th_als_output *out, char *err);
th_status th_call_get_runtime_info(const th_plugin *plugin, th_instance *instance,
                                   th_runtime_info *info, char *err);
th_status th_call_get_mode_info(const th_plugin *plugin, th_instance *instance, uint32_t mode,
                                th_mode_info *info, char *err);
th_status th_call_als_sweep(const th_plugin *plugin, th_instance *instance,
                            th_als_sweep_io *io, char *err);
th_status th_call_init_factors(const th_plugin *plugin, th_instance *instance,
                               th_init_factors_io *io, char *err);
th_status th_call_generalized_mttkrp(const th_plugin *plugin, th_instance *instance,
                                     th_generalized_mttkrp_io *io, char *err);
th_status th_call_factor_update(const th_plugin *plugin, th_instance *instance,
                                th_factor_update_io *io, char *err);
th_status th_call_row_least_squares(const th_plugin *plugin, th_instance *instance,
                                    th_row_least_squares_io *io, char *err);
th_status th_call_als_update_nonneg(const th_plugin *plugin, th_instance *instance,
                                    th_nonneg_update_io *io, th_als_output *out, char *err);
th_status th_call_multiplicative_updates(const th_plugin *plugin, th_instance *instance,
                                         th_multiplicative_updates_io *io, char *err);

/* Runtime and mode info as GErrors: the structs are zeroed first (strings
 * empty, times negative) and stay so when the plugin lacks the function;
 * their strings are terminated whatever the plugin wrote. FALSE with the
 * error only when the call itself fails. */
gboolean th_instance_runtime_info(const th_plugin *plugin, th_instance *instance,
                                  th_runtime_info *info, GError **error);
gboolean th_instance_mode_info(const th_plugin *plugin, th_instance *instance, uint32_t mode,
                               th_mode_info *info, GError **error);
/* als_sweep as a GError (TH_PLUGIN_STATUS_ERROR, code = the status;
 * TH_ERR_UNSUPPORTED when the plugin has none). `io` is passed as it is:
 * the caller fills struct_size and the inputs and checks the outputs. */
gboolean th_instance_als_sweep(const th_plugin *plugin, th_instance *instance,
                               th_als_sweep_io *io, GError **error);

#endif
