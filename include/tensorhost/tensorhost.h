/*
 * libtensorhost: CP decomposition of sparse tensors from C (and, through
 * it, from Python), with the same backends, search rules and results as the
 * `tensorhost` program.
 *
 * A contract in the style of the plugin ABI (plugin.h): C11, fixed-width
 * types, opaque handles, no GLib or CUDA types.
 *
 * Errors
 *   Every function that can fail returns a tensorhost_status: TENSORHOST_OK
 *   (0) or a negative code, and takes `char *err`, a caller-owned buffer of
 *   at least TENSORHOST_ERROR_SIZE bytes (may be NULL when the message is not
 *   wanted). On failure it receives one NUL-terminated line naming what is
 *   at fault; on success it is left alone. A failed call changes nothing the
 *   caller holds: no handle is created, none is freed.
 *
 * Ownership
 *   Handles are created by a *_new/_read/_open/_cp_als/_cp_apr/_complete
 *   call and belong to the caller until passed to the matching
 *   *_free/_close, exactly once (NULL is accepted and ignored). Freeing a handle twice, or using it
 *   after, is undefined; debug builds (NDEBUG not defined) detect most such
 *   misuse and abort with a message. Pointers a function returns into a
 *   handle (names, arrays) stay valid until that handle is freed.
 *   Array arguments are borrowed for the duration of the call only.
 *
 * Threads
 *   The library keeps no hidden global state except the stop request of
 *   tensorhost_request_stop() and the log handler of
 *   tensorhost_set_log_handler() (both process-wide) and the plugins' own. Distinct
 *   handles may be used from distinct threads; one handle must not be used
 *   by two threads at once. A backend and everything run on it belong to
 *   one thread at a time, and so do all the backends of one plugin (the
 *   plugin ABI calls a plugin from one thread at a time): backends of
 *   distinct plugins may run side by side. tensorhost_request_stop() may be called from any
 *   thread and from a signal handler.
 *
 * Versioning
 *   TENSORHOST_API_VERSION_MAJOR/MINOR describe this header;
 *   tensorhost_api_version() the library at run time. A minor version only
 *   adds functions, enum values and fields at the end of structs (every
 *   struct the caller fills starts with struct_size, set by the
 *   *_INIT macros; the library reads only what struct_size covers, and
 *   treats fields beyond it as their defaults). The shared object's soname
 *   carries the major: libtensorhost.so.1.
 *
 * Changelog
 *   1.0  first version.
 *   1.1  the library's messages: tensorhost_set_log_handler (log lines to
 *        the caller instead of stderr); a run's warnings on its result:
 *        tensorhost_cpd_warning_count, tensorhost_cpd_warning,
 *        tensorhost_warning_name, TENSORHOST_WARN_*; TENSORHOST_LOG_*.
 *   1.2  Poisson CP (CP-APR, multiplicative updates): tensorhost_cp_apr
 *        with tensorhost_apr_params; a result's model and its Poisson
 *        facts: tensorhost_cpd_model, tensorhost_cpd_log_likelihood,
 *        tensorhost_cpd_kkt_violation, tensorhost_cpd_log_likelihoods,
 *        tensorhost_cpd_kkt_violations, tensorhost_cpd_inner_iterations;
 *        TENSORHOST_MODEL_*.
 *   1.3  nonnegative CP: tensorhost_cpd_params.constraints and
 *        .mode_constraints (TENSORHOST_CONSTRAINTS_*),
 *        tensorhost_cpd_constraints and tensorhost_cpd_mode_constraints.
 *   1.4  tensor completion: tensorhost_complete with
 *        tensorhost_complete_params; TENSORHOST_MODEL_COMPLETION; a
 *        completion result's facts: tensorhost_cpd_train_rmses,
 *        tensorhost_cpd_holdout_rmses, tensorhost_cpd_objectives and
 *        tensorhost_cpd_get_completion (tensorhost_completion_info);
 *        TENSORHOST_WARN_EMPTY_ROWS.
 *   1.5  regularised CP-ALS: tensorhost_cpd_params.l2, .l1 and .mode_l1
 *        (a ridge and an l1 per mode, the program's cpd.l2 and cpd.l1);
 *        tensorhost_cpd_objective, and tensorhost_cpd_objectives for a
 *        regularised result; update TENSORHOST_UPDATE_SWEEP with
 *        constraints is no longer refused by itself (a plugin of ABI 1.6
 *        sweeps with them).
 *   1.6  tensorhost_cpd_params.hals_passes and .hals_budget: each
 *        coordinate-descent mode's passes chosen by its cost (Gillis and
 *        Glineur's accelerated HALS); tensorhost_cpd_hals_passes.
 */
#ifndef TENSORHOST_TENSORHOST_H
#define TENSORHOST_TENSORHOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TENSORHOST_API_VERSION_MAJOR 1u
#define TENSORHOST_API_VERSION_MINOR 6u

#if defined(_WIN32)
#define TENSORHOST_API
#else
#define TENSORHOST_API __attribute__((visibility("default")))
#endif

/* Size of the `err` buffers. */
#define TENSORHOST_ERROR_SIZE 1024u

typedef enum tensorhost_status {
    TENSORHOST_OK = 0,
    TENSORHOST_ERR_INVALID_ARGUMENT = -1, /* a bad value, named in the message */
    TENSORHOST_ERR_IO = -2,               /* a file cannot be read (or the host cannot hold it,
                                             or its read was stopped) */
    TENSORHOST_ERR_FORMAT = -3,           /* a file's contents are not a tensor */
    TENSORHOST_ERR_PLUGIN = -4,           /* the backend cannot be found, loaded or created */
    TENSORHOST_ERR_NO_DEVICE = -5,        /* the backend found no usable device */
    TENSORHOST_ERR_BACKEND = -6,          /* a backend call failed (its message follows) */
    TENSORHOST_ERR_NUMERIC = -7,          /* the run produced NaN or Inf */
    TENSORHOST_ERR_MISUSE = -8,           /* a NULL or freed handle, a call out of order */
} tensorhost_status;

/* TENSORHOST_API_VERSION_MAJOR << 16 | MINOR of the library loaded. */
TENSORHOST_API uint32_t tensorhost_api_version(void);
/* The library's release, e.g. "0.1.0"; static storage. */
TENSORHOST_API const char *tensorhost_version_string(void);
/* "TENSORHOST_ERR_IO" etc.; static storage; "?" for an unknown code. */
TENSORHOST_API const char *tensorhost_status_name(int32_t status);

/* ---- Tensors ------------------------------------------------------------ */

typedef struct tensorhost_tensor tensorhost_tensor;

/* A tensor from caller-owned coordinate arrays: `nmodes` (2 to 64) modes of
 * lengths `dims`, `nnz` (>= 1) nonzeros, `indices` nnz x nmodes row-major
 * (nonzero k's coordinate in mode m at indices[k * nmodes + m]), 0-based and
 * below dims[m]; `values` finite. Duplicate coordinates are summed (as the
 * reader does). dims[m] and indices fit in 32 bits. The arrays are copied;
 * a tensor the host has not the memory for is refused before the copy
 * (TENSORHOST_ERR_INVALID_ARGUMENT, with the memory needed and free). */
TENSORHOST_API int32_t tensorhost_tensor_new(uint32_t nmodes, const uint64_t *dims, uint64_t nnz,
                                             const uint64_t *indices, const double *values,
                                             tensorhost_tensor **out, char *err);

/* A tensor from a file in any format the program reads (FROSTT .tns, gzip,
 * the sptensor text variant, tensorhost's binary .tnsb), dims taken from
 * the file. */
TENSORHOST_API int32_t tensorhost_tensor_read(const char *path, tensorhost_tensor **out,
                                              char *err);

TENSORHOST_API void tensorhost_tensor_free(tensorhost_tensor *tensor);

/* What a tensor is and what reading it saw. Caller-owned; set struct_size
 * (TENSORHOST_TENSOR_STATS_INIT) before the call. */
typedef struct tensorhost_tensor_stats {
    uint32_t struct_size;
    uint32_t nmodes;
    const uint64_t *dims;       /* [nmodes], valid while the tensor lives */
    uint64_t nnz;               /* after merging duplicates */
    uint64_t duplicates_merged;
    uint64_t explicit_zeros;    /* values written as zero */
    uint64_t underflowed_values;/* values too small for a double, read as zero */
    double norm;                /* Frobenius norm */
    double density;             /* nnz / prod(dims) */
} tensorhost_tensor_stats;
#define TENSORHOST_TENSOR_STATS_INIT {(uint32_t)sizeof(tensorhost_tensor_stats), 0, NULL, 0, 0, 0, 0, 0.0, 0.0}

TENSORHOST_API int32_t tensorhost_tensor_get_stats(const tensorhost_tensor *tensor,
                                                   tensorhost_tensor_stats *stats, char *err);

/* ---- Backends ----------------------------------------------------------- */

typedef struct tensorhost_backend tensorhost_backend;

/* One option for a backend, as the config's [backend.options] gives it. */
typedef struct tensorhost_option {
    const char *key;
    const char *value; /* as text: "4", "2.5", "true", "balanced" */
} tensorhost_option;

/* Opens a backend: "auto" (gpu-adaptive where a usable GPU exists, else
 * cpu-reference), a plugin name searched as the program searches (the
 * folders of `search_path`, ':'-separated, may be NULL; then
 * TENSORHOST_PLUGIN_PATH; then the installation's plugin folder), or a path
 * to a .so. `options` (may be NULL when n_options is 0) go to the plugin
 * that runs. TENSORHOST_ERR_NO_DEVICE when a named GPU backend finds no
 * device. */
TENSORHOST_API int32_t tensorhost_backend_open(const char *plugin, const char *search_path,
                                               const tensorhost_option *options,
                                               uint32_t n_options, tensorhost_backend **out,
                                               char *err);
TENSORHOST_API void tensorhost_backend_close(tensorhost_backend *backend);

/* The plugin's id ("cpu-reference"), its device ("NVIDIA H200 (device 0)",
 * "CPU (8 threads)"; "" until a tensor is loaded if the plugin says so only
 * then) and the .so's path; valid while the backend lives. */
TENSORHOST_API const char *tensorhost_backend_id(const tensorhost_backend *backend);
TENSORHOST_API const char *tensorhost_backend_device(tensorhost_backend *backend);
TENSORHOST_API const char *tensorhost_backend_path(const tensorhost_backend *backend);

/* Calls `each` once for every plugin on the search path (searched as
 * tensorhost_backend_open searches it; a name found in an earlier folder
 * hides later ones), on the calling thread, with its name (the file name
 * without ".so"), its path and why it cannot run here: NULL when it loads
 * and creates an instance with no options, else the loader's or the
 * plugin's message (a GPU plugin on a host without a usable GPU says so).
 * The strings are valid during the call. */
typedef void (*tensorhost_plugin_fn)(const char *name, const char *path, const char *problem,
                                     void *user_data);
TENSORHOST_API int32_t tensorhost_list_plugins(const char *search_path, tensorhost_plugin_fn each,
                                               void *user_data, char *err);

/* ---- CP-ALS ------------------------------------------------------------- */

typedef enum tensorhost_update {
    TENSORHOST_UPDATE_AUTO = 0, /* the best the backend has */
    TENSORHOST_UPDATE_SWEEP = 1,
    TENSORHOST_UPDATE_MODE = 2,
    TENSORHOST_UPDATE_HOST = 3,
} tensorhost_update;

/* Called after every iteration, on the calling thread; return 0 to go on,
 * anything else to stop (the run then ends as interrupted, with a valid
 * model; one that converged on that iteration says converged). */
typedef int32_t (*tensorhost_iteration_fn)(uint32_t iteration, double fit, double delta,
                                           double seconds, void *user_data);

/* Constraints on the factors of a least-squares run (1.3; cpd.constraints). */
typedef enum tensorhost_constraints {
    TENSORHOST_CONSTRAINTS_NONE = 0,
    /* Every factor nonnegative: each mode's update by hierarchical ALS, in
     * the backend when its plugin has als_update_nonneg (plugin ABI 1.5),
     * else on the host; inside the sweep for a plugin whose als_sweep takes
     * constraints (plugin ABI 1.6). SWEEP on an older plugin is refused
     * (TENSORHOST_ERR_INVALID_ARGUMENT naming it and its version); MODE
     * needs als_update_nonneg. (Before 1.5 the library refused SWEEP with
     * constraints on any plugin.) */
    TENSORHOST_CONSTRAINTS_NONNEG = 1,
} tensorhost_constraints;

/* The parameters of [cpd]. Caller-owned; start from TENSORHOST_CPD_PARAMS_INIT. */
typedef struct tensorhost_cpd_params {
    uint32_t struct_size;
    uint32_t rank;      /* 1 to 4096 (and the backend's maximum) */
    uint32_t max_iters; /* >= 1 */
    double tolerance;   /* >= 0: stop when |fit change| < tolerance (after iteration 2) */
    uint64_t seed;      /* initial factors, the same on every backend */
    int32_t update;     /* tensorhost_update */
    /* NULL, or [nmodes] arrays of dims[m] x rank (row-major): the initial
     * factors instead of the seed's. Borrowed for the call. */
    const double *const *initial_factors;
    tensorhost_iteration_fn on_iteration; /* may be NULL */
    void *user_data;
    int32_t constraints; /* (1.3) tensorhost_constraints, for every mode */
    /* (1.3) NULL, or [nmodes] tensorhost_constraints, one per mode, instead
     * of `constraints`. Borrowed for the call. */
    const int32_t *mode_constraints;
    /* (1.5) Regularised CP-ALS. Each mode n's update minimises
     *   1/2 ||X_(n) - A K^T||^2 + l2/2 ||A||_F^2 + l1_n sum |A(i,r)|
     * given the other factors as the iterations keep them (columns
     * normalised; the factor solved carries the weights, as SPLATT's
     * regularised ALS): A = M (V + l2 I)^-1 for a mode without constraint
     * and l1_n = 0, else by coordinate descent (hierarchical ALS, as
     * TensorLy's hals_nnls with sparsity_coefficient l1_n). l2 is
     * TensorLy's parafac l2_reg and SPLATT's reg; l1 TensorLy's
     * sparsity_coefficients. A regularised run fits the tensor's values as
     * they are (its terms are not scale-invariant): one whose largest
     * |value| lies outside [2^-64, 2^64] is refused
     * (TENSORHOST_ERR_INVALID_ARGUMENT), where an unregularised run scales
     * it internally. The fit stays the least-squares fit;
     * tensorhost_cpd_objective gives the regularised objective. */
    double l2;             /* (1.5) >= 0, finite: the ridge [0] */
    double l1;             /* (1.5) >= 0, finite: every mode's l1 weight [0] */
    /* (1.5) NULL, or [nmodes] l1 weights (each >= 0, finite), one per
     * mode, instead of `l1`. Borrowed for the call. */
    const double *mode_l1;
    /* (1.6) The coordinate-descent updates' hierarchical-ALS passes (the
     * program's cpd.hals_passes and cpd.hals_budget): mode n makes at most
     * min(hals_passes, floor(1 + hals_budget rho_n)) passes, rho_n - 1 its
     * cost of forming the update's MTTKRP and Hadamard product of Grams
     * over one pass's, as Gillis and Glineur's accelerated HALS (its alpha
     * 0.5); each stops early as TensorLy's hals_nnls. So a long mode with a
     * few nonzeros a row makes one pass, the others up to hals_passes
     * (TensorLy's fixed count 5 for every mode: a large budget, e.g. 1e9).
     * Read only where some mode is updated by coordinate descent. */
    uint32_t hals_passes; /* (1.6) >= 1 [5] */
    double hals_budget;   /* (1.6) >= 0, finite [0.5] */
} tensorhost_cpd_params;
#define TENSORHOST_CPD_PARAMS_INIT                                                            \
    {(uint32_t)sizeof(tensorhost_cpd_params), 16u, 50u, 1e-5, 42u, TENSORHOST_UPDATE_AUTO, NULL, \
     NULL, NULL, TENSORHOST_CONSTRAINTS_NONE, NULL, 0.0, 0.0, NULL, 5u, 0.5}

typedef struct tensorhost_cpd tensorhost_cpd;

/* Loads `tensor` into `backend` at params->rank (replacing any earlier
 * tensor) and runs CP-ALS. The result is a model in the published form of
 * the program's factor files: unit 2-norm factor columns, weights in lambda,
 * components by decreasing lambda, signs as Tensor Toolbox's fixsigns. A
 * stop (the callback, tensorhost_request_stop) is not an error: the result
 * says interrupted. The tensor is not changed. */
TENSORHOST_API int32_t tensorhost_cp_als(tensorhost_backend *backend,
                                         const tensorhost_tensor *tensor,
                                         const tensorhost_cpd_params *params,
                                         tensorhost_cpd **out, char *err);
TENSORHOST_API void tensorhost_cpd_free(tensorhost_cpd *result);

typedef enum tensorhost_cpd_status {
    /* |fit change| < tolerance (CP-APR: KKT violation < stoptol;
     * tensorhost_complete: its stopping rule) */
    TENSORHOST_CPD_CONVERGED = 0,
    TENSORHOST_CPD_MAX_ITERS = 1,   /* stopped at max_iters */
    TENSORHOST_CPD_INTERRUPTED = 2, /* stopped on request */
} tensorhost_cpd_status;

/* The result's parts; arrays valid while the result lives. */
TENSORHOST_API uint32_t tensorhost_cpd_nmodes(const tensorhost_cpd *result);
TENSORHOST_API uint32_t tensorhost_cpd_rank(const tensorhost_cpd *result);
TENSORHOST_API uint64_t tensorhost_cpd_dim(const tensorhost_cpd *result, uint32_t mode);
TENSORHOST_API int32_t tensorhost_cpd_status_of(const tensorhost_cpd *result);
/* [rank] weights; NULL when the run stopped before any update. */
TENSORHOST_API const double *tensorhost_cpd_weights(const tensorhost_cpd *result);
/* dims[mode] x rank, row-major; NULL as for the weights or a bad mode. */
TENSORHOST_API const double *tensorhost_cpd_factor(const tensorhost_cpd *result, uint32_t mode);
TENSORHOST_API double tensorhost_cpd_fit(const tensorhost_cpd *result);
/* Completed iterations, and the fit and seconds of each ([iterations]).
 * For a Poisson model (1.2) the "fit" of an iteration is its stopping
 * measure's value, the log-likelihood (tensorhost_cpd_log_likelihoods);
 * tensorhost_cpd_fit is the least-squares fit of the final model for
 * every model. */
TENSORHOST_API uint32_t tensorhost_cpd_iterations(const tensorhost_cpd *result);
TENSORHOST_API const double *tensorhost_cpd_fits(const tensorhost_cpd *result);
TENSORHOST_API const double *tensorhost_cpd_iteration_seconds(const tensorhost_cpd *result);

/* Where the time went, in seconds (negative: not measured). */
typedef struct tensorhost_cpd_timings {
    uint32_t struct_size;
    double total;         /* the whole call, load included */
    double load;          /* the backend's preprocessing (load_tensor) */
    double mttkrp;        /* host wall time of the MTTKRPs (negative on the sweep path) */
    double sweep;         /* als_sweep calls */
    double update;        /* factor updates outside als_sweep */
    double algebra;       /* host R x R work */
} tensorhost_cpd_timings;
#define TENSORHOST_CPD_TIMINGS_INIT {(uint32_t)sizeof(tensorhost_cpd_timings), 0, 0, 0, 0, 0, 0}

TENSORHOST_API int32_t tensorhost_cpd_get_timings(const tensorhost_cpd *result,
                                                  tensorhost_cpd_timings *timings, char *err);

/* ---- Warnings of a run (1.1) ------------------------------------------- */

/* What a run that succeeded may still have to say about its model. A later
 * minor may add codes: treat an unknown one as a warning of no known kind. */
typedef enum tensorhost_warning_code {
    /* The rank is above what the tensor can have: its nonzero count or, for
     * a mode, the product of the other modes' lengths. The extra components
     * are undetermined. */
    TENSORHOST_WARN_RANK_ABOVE_BOUND = 1,
    /* Normal-equation solves were rank deficient and used the
     * pseudo-inverse (the message says how many). tensorhost_complete
     * (1.4): row solves were singular (no ridge) and kept the row's
     * values. */
    TENSORHOST_WARN_RANK_DEFICIENT = 2,
    /* Stopped at max_iters with |fit change| still above a tolerance > 0
     * (a tolerance of 0 asks for exactly max_iters iterations: no warning;
     * an interrupted run gets none either). tensorhost_cp_apr (1.2): with
     * the KKT violation still at or above stoptol. tensorhost_complete
     * (1.4) with a holdout: with the held-out RMSE still improving by a
     * tolerance's share of its best or more. */
    TENSORHOST_WARN_NOT_CONVERGED = 3,
    /* The tensor's file held nonzero values too small for a double, which
     * were read as zero (tensorhost_tensor_stats.underflowed_values). */
    TENSORHOST_WARN_UNDERFLOWED_VALUES = 4,
    /* (1.2) tensorhost_cp_apr on a tensor with values that are not
     * integers: the Poisson model is one of counts; the fit runs all the
     * same. */
    TENSORHOST_WARN_NON_INTEGER_VALUES = 5,
    /* (1.4) tensorhost_complete with l2 > 0: rows of some mode that no
     * training entry reaches; the ridge makes their factor rows 0, so the
     * model predicts 0 wherever they are (the message names the first). */
    TENSORHOST_WARN_EMPTY_ROWS = 6,
} tensorhost_warning_code;

/* How many warnings the run has (0 for a NULL or freed result). Warnings
 * come with the result only: the library does not also log them. They are
 * in a fixed order: underflowed values, (CP-APR) non-integer values, rank
 * above the bound, (completion) empty rows, rank deficient, not
 * converged. */
TENSORHOST_API uint32_t tensorhost_cpd_warning_count(const tensorhost_cpd *result);
/* Warning `index` (0 to count - 1): its code (a tensorhost_warning_code)
 * into *code and its message, one line naming the parameter or file at
 * fault, into *message (valid while the result lives). Either out pointer
 * may be NULL. TENSORHOST_ERR_INVALID_ARGUMENT for an index past the
 * count. */
TENSORHOST_API int32_t tensorhost_cpd_warning(const tensorhost_cpd *result, uint32_t index,
                                              int32_t *code, const char **message, char *err);
/* "TENSORHOST_WARN_NOT_CONVERGED" etc.; static storage; "?" for an unknown
 * code. */
TENSORHOST_API const char *tensorhost_warning_name(int32_t code);

/* ---- Poisson CP: CP-APR (1.2) ------------------------------------------- */

/* The model a result is of (tensorhost_cpd_model). */
typedef enum tensorhost_model {
    TENSORHOST_MODEL_LEAST_SQUARES = 0, /* tensorhost_cp_als */
    TENSORHOST_MODEL_POISSON = 1,       /* tensorhost_cp_apr */
    TENSORHOST_MODEL_COMPLETION = 2,    /* (1.4) tensorhost_complete */
} tensorhost_model;

/* Called after every outer iteration of tensorhost_cp_apr, on the calling
 * thread, with the model's log-likelihood and its KKT violation (the
 * largest over the modes of their last inner iteration's); return 0 to go
 * on, anything else to stop (the run then ends as interrupted, with a
 * valid model). */
typedef int32_t (*tensorhost_apr_iteration_fn)(uint32_t iteration, double log_likelihood,
                                               double kkt_violation, double seconds,
                                               void *user_data);

/* The parameters of a CP-APR run, with the names and defaults of pyttb's
 * cp_apr (algorithm "mu") in brackets. Caller-owned; start from
 * TENSORHOST_APR_PARAMS_INIT. */
typedef struct tensorhost_apr_params {
    uint32_t struct_size;
    uint32_t rank;            /* 1 to 4096 (and the backend's maximum) */
    uint32_t max_iters;       /* >= 1: outer iterations [maxiters 1000] */
    double stoptol;           /* >= 0: stop when every mode's KKT violation is below it
                                 (0: never; every inner iteration runs) [stoptol 1e-4] */
    uint32_t max_inner_iters; /* >= 1: multiplicative updates per mode [maxinneriters 10] */
    double kappa;             /* >= 0: offset for inadmissible zeros [kappa 0.01] */
    double kappa_tolerance;   /* >= 0: what counts as zero there [kappatol 1e-10] */
    double epsilon;           /* > 0: floor of the model in divisions [epsDivZero 1e-10] */
    /* >= 0: a factor entry below kappa_tolerance is an inadmissible zero
     * where Phi exceeds this. 1 is Chi and Kolda's and Tensor Toolbox's
     * test (there the gradient 1 - Phi is negative); pyttb 1.8 tests
     * Phi > 0, which 0 reproduces [not a pyttb parameter; 1] */
    double phi_threshold;
    uint64_t seed;            /* initial factors, the same on every backend */
    /* NULL, or [nmodes] arrays of dims[m] x rank (row-major), every entry
     * finite and >= 0: the initial factors instead of the seed's. Borrowed
     * for the call. */
    const double *const *initial_factors;
    /* NULL (all ones), or [rank] weights finite and >= 0 of the initial
     * model (pyttb's init ktensor's weights); read only with
     * initial_factors. Borrowed for the call. */
    const double *initial_weights;
    tensorhost_apr_iteration_fn on_iteration; /* may be NULL */
    void *user_data;                          /* passed to on_iteration */
} tensorhost_apr_params;
#define TENSORHOST_APR_PARAMS_INIT                                                          \
    {(uint32_t)sizeof(tensorhost_apr_params), 16u, 1000u, 1e-4, 10u, 0.01, 1e-10, 1e-10, 1.0, \
     42u, NULL, NULL, NULL, NULL}

/* Loads `tensor` into `backend` at params->rank (replacing any earlier
 * tensor) and fits a Poisson CP model to it by CP-APR's multiplicative
 * updates (Chi and Kolda; pyttb's cp_apr, algorithm "mu"): the same
 * iterations, stopping rule (every mode's KKT violation below stoptol)
 * and final form as pyttb's: unit 1-norm factor columns, weights in
 * lambda, components by decreasing weight. The tensor's values must be
 * >= 0 (TENSORHOST_ERR_INVALID_ARGUMENT naming the first negative one,
 * before any work; they are never scaled, as the model is not
 * scale-invariant); values that are not integers are fitted all the same,
 * with a warning (TENSORHOST_WARN_NON_INTEGER_VALUES). The backend needs
 * the plugin ABI 1.4 functions (generalized_mttkrp, factor_update): one
 * without them is refused before any work (TENSORHOST_ERR_INVALID_ARGUMENT
 * naming the plugin and the functions). The result is a tensorhost_cpd as tensorhost_cp_als's:
 * its accessors give the model, tensorhost_cpd_fit the least-squares fit
 * of the final model, and the accessors below the Poisson facts. Status
 * CONVERGED means the KKT violation fell below stoptol. A stop (the
 * callback, tensorhost_request_stop) is not an error: the result says
 * interrupted. The tensor is not changed. */
TENSORHOST_API int32_t tensorhost_cp_apr(tensorhost_backend *backend,
                                         const tensorhost_tensor *tensor,
                                         const tensorhost_apr_params *params,
                                         tensorhost_cpd **out, char *err);

/* The model of a result (a tensorhost_model); TENSORHOST_ERR_MISUSE for a
 * NULL or freed one. */
TENSORHOST_API int32_t tensorhost_cpd_model(const tensorhost_cpd *result);
/* A Poisson result's final log-likelihood, sum over all entries of
 * x log(m) - m (the entries of the data x and the model m; pyttb's
 * tt_loglikelihood), and its KKT violation; NaN for another model's. */
TENSORHOST_API double tensorhost_cpd_log_likelihood(const tensorhost_cpd *result);
TENSORHOST_API double tensorhost_cpd_kkt_violation(const tensorhost_cpd *result);
/* Of each completed iteration ([tensorhost_cpd_iterations]) of a Poisson
 * result: the log-likelihood after it, its KKT violation and its inner
 * iterations (summed over the modes). NULL for another model's result
 * (and a NULL or freed one); valid while the result lives. */
TENSORHOST_API const double *tensorhost_cpd_log_likelihoods(const tensorhost_cpd *result);
TENSORHOST_API const double *tensorhost_cpd_kkt_violations(const tensorhost_cpd *result);
TENSORHOST_API const uint32_t *tensorhost_cpd_inner_iterations(const tensorhost_cpd *result);

/* (1.3) The constraints a result's factors were fitted under (a
 * tensorhost_constraints: NONNEG when some mode's factor was constrained;
 * NONE for a Poisson result, whose factors are nonnegative by
 * construction), and those of one mode's factor; TENSORHOST_ERR_MISUSE for
 * a NULL or freed result, TENSORHOST_ERR_INVALID_ARGUMENT for a mode past
 * the last. */
TENSORHOST_API int32_t tensorhost_cpd_constraints(const tensorhost_cpd *result);
TENSORHOST_API int32_t tensorhost_cpd_mode_constraints(const tensorhost_cpd *result,
                                                       uint32_t mode);

/* ---- Tensor completion (1.4) -------------------------------------------- */

/* Called after every iteration of tensorhost_complete, on the calling
 * thread, with the RMSE over the training entries, that over the held-out
 * ones (NaN without a holdout) and the objective (see tensorhost_complete);
 * return 0 to go on, anything else to stop (the run then ends as
 * interrupted, with a valid model). */
typedef int32_t (*tensorhost_complete_iteration_fn)(uint32_t iteration, double train_rmse,
                                                    double holdout_rmse, double objective,
                                                    double seconds, void *user_data);

/* The parameters of a completion run ([cpd] with tensor.missing =
 * "unlisted", tensor.holdout and cpd.l2 in the program's config), defaults
 * in brackets. Caller-owned; start from TENSORHOST_COMPLETE_PARAMS_INIT. */
typedef struct tensorhost_complete_params {
    uint32_t struct_size;
    uint32_t rank;      /* 1 to 4096 (and the backend's maximum) [16] */
    uint32_t max_iters; /* >= 1 [50] */
    double tolerance;   /* >= 0: the stopping rule's (tensorhost_complete) [1e-5] */
    double l2;          /* >= 0, finite: the ridge's weight in the objective [0] */
    double holdout;     /* in [0, 1): the fraction of the entries held out [0] */
    /* The initial factors and the holdout's draw, the same on every
     * backend [42]. */
    uint64_t seed;
    int32_t constraints; /* tensorhost_constraints, for every mode [NONE] */
    /* NULL, or [nmodes] tensorhost_constraints, one per mode, instead of
     * `constraints`. Borrowed for the call. */
    const int32_t *mode_constraints;
    /* NULL, or [nmodes] arrays of dims[m] x rank (row-major), finite, and
     * >= 0 in the nonnegative modes: the initial factors instead of the
     * seed's (their model has unit weights). Borrowed for the call. */
    const double *const *initial_factors;
    tensorhost_complete_iteration_fn on_iteration; /* may be NULL */
    void *user_data;                               /* passed to on_iteration */
} tensorhost_complete_params;
#define TENSORHOST_COMPLETE_PARAMS_INIT                                                      \
    {(uint32_t)sizeof(tensorhost_complete_params), 16u, 50u, 1e-5, 0.0, 0.0, 42u,             \
     TENSORHOST_CONSTRAINTS_NONE, NULL, NULL, NULL, NULL}

/* Loads the listed entries of `tensor` into `backend` at params->rank
 * (replacing any earlier tensor) and completes it: fits a CP model m to
 * the listed entries alone, the cells the tensor does not list being
 * unknown (not zero). A listed entry whose value is 0 is an observed 0.
 *
 * With `holdout` > 0 each listed entry is held out of training with that
 * probability, independently, drawn from the seed and the entry's place
 * in the tensor's coordinate order (the same split on every backend and
 * thread count). The model minimises
 *
 *   sum over the training entries of (x - m)^2 + l2 * sum_n ||A_n||_F^2
 *
 * with m(i) = sum_r prod_n A_n(i_n, r), by row-wise ALS: each iteration,
 * for every mode n in turn, every row of A_n becomes the minimiser given
 * the other factors, solved from that row's own entries in the backend
 * (a nonnegative mode's row by coordinate descent), so the objective never
 * rises. The stopping rule: CP-ALS's on the training fit
 * 1 - ||x - m|| / ||x|| over the training entries (|fit change| <
 * tolerance, from the second iteration); with a holdout also when the
 * held-out RMSE has not improved on the best so far by tolerance times
 * that best for 5 iterations in a row (a rise counts as no improvement;
 * the first iterations can rise before the factors settle). The
 * published model is then the one of the iteration with the lowest
 * held-out RMSE (early stopping), else the last.
 *
 * The tensor's values are taken as they are (never scaled: the ridge is
 * not scale-invariant): each must be 0 or of magnitude within [2^-64,
 * 2^64] (TENSORHOST_ERR_INVALID_ARGUMENT naming the first other one,
 * before any work). A row of some mode with no training entry has nothing
 * to fit: with l2 = 0 that is TENSORHOST_ERR_INVALID_ARGUMENT naming the
 * mode and row; with l2 > 0 the ridge makes it 0, with a warning
 * (TENSORHOST_WARN_EMPTY_ROWS). A row with fewer independent training
 * entries than the rank and l2 = 0 keeps its previous values
 * (TENSORHOST_WARN_RANK_DEFICIENT: set l2 > 0 or lower the rank). The
 * backend needs the plugin ABI 1.5 function row_least_squares (and 1.4's
 * generalized_mttkrp): one without it is refused before any work
 * (TENSORHOST_ERR_INVALID_ARGUMENT naming the plugin).
 *
 * The result is a tensorhost_cpd in tensorhost_cp_als's published form
 * (unit 2-norm columns, weights in lambda, sorted, fixsigns), of model
 * TENSORHOST_MODEL_COMPLETION: tensorhost_cpd_fit is the published model's
 * training fit and tensorhost_cpd_fits each iteration's; the accessors
 * below give the rest. Status CONVERGED means the stopping rule above
 * ended the run. A stop (the callback, tensorhost_request_stop) is not an
 * error: the result says interrupted, and its model is the published one
 * so far (with a holdout, the best held-out iteration's; a stop inside an
 * iteration without one: the state after the last completed row solve).
 * The tensor is not changed. */
TENSORHOST_API int32_t tensorhost_complete(tensorhost_backend *backend,
                                           const tensorhost_tensor *tensor,
                                           const tensorhost_complete_params *params,
                                           tensorhost_cpd **out, char *err);

/* Of each completed iteration ([tensorhost_cpd_iterations]) of a
 * completion result: the RMSE over the training entries, that over the
 * held-out ones (NaN without a holdout) and the objective (training
 * entries' sum of squared errors plus the ridge). NULL for another model's
 * result (and a NULL or freed one); valid while the result lives.
 * tensorhost_cpd_objectives (1.5) also gives a regularised CP-ALS
 * result's (l2 or l1 > 0): each iteration's objective (as
 * tensorhost_cpd_objective's, after that iteration) where every l1 is 0,
 * NaN where an l1 is not (its 1-norms are computed once, for the final
 * model); NULL for an unregularised one. */
TENSORHOST_API const double *tensorhost_cpd_train_rmses(const tensorhost_cpd *result);
TENSORHOST_API const double *tensorhost_cpd_holdout_rmses(const tensorhost_cpd *result);
TENSORHOST_API const double *tensorhost_cpd_objectives(const tensorhost_cpd *result);

/* (1.5) The objective the result's model minimises: for regularised CP-ALS
 * (tensorhost_cpd_params.l2 or an l1 > 0)
 *   1/2 ||X - M||^2 + l2/2 sum_n ||A_n||_F^2 + sum_n l1_n sum |A_n(i,r)|
 * of the final model with its factors as the iterations left them (columns
 * normalised, the last mode updated carrying the weights: the objective
 * that mode's update minimised); for a completion result, its published
 * model's (tensorhost_completion_info.objective). NaN for an unregularised
 * CP-ALS result, a Poisson result, and a NULL or freed one. */
TENSORHOST_API double tensorhost_cpd_objective(const tensorhost_cpd *result);

/* (1.6) The most hierarchical-ALS passes the update of `mode` made in each
 * iteration of a CP-ALS result (tensorhost_cpd_params.hals_passes and
 * .hals_budget chose them from the tensor's shape); 0 for a mode solved
 * exactly, for the other models' results, a bad mode, and a NULL or freed
 * result. */
TENSORHOST_API uint32_t tensorhost_cpd_hals_passes(const tensorhost_cpd *result, uint32_t mode);

/* What a completion run fitted and found. Caller-owned; set struct_size
 * (TENSORHOST_COMPLETION_INFO_INIT) before the call. */
typedef struct tensorhost_completion_info {
    uint32_t struct_size;
    uint64_t observed; /* the tensor's listed entries */
    uint64_t training; /* of those, fitted */
    uint64_t held_out; /* of those, held out (0 without a holdout) */
    double l2;
    double holdout;
    /* The iteration whose model was published (1-based; with a holdout the
     * one with the lowest held-out RMSE, else the last); 0 when a stop cut
     * the run inside an iteration and the model is the state it left. */
    uint32_t published_iteration;
    /* The published model's: the objective (NaN for a model a stop cut
     * inside an iteration), the RMSE over the training entries and that
     * over the held-out ones (NaN without a holdout). The ridge term is
     * that of the factors as fitted, before the published form moved their
     * scale into the weights (where the run has converged, a component's
     * fitted columns have equal norms: the term is then l2 * N * sum_r
     * lambda_r^(2/N) for N modes). */
    double objective;
    double train_rmse;
    double holdout_rmse;
    /* Row solves left unchanged by a singular system, summed over the
     * run, and the rows (of every mode) with no training entry. */
    uint64_t singular_row_solves;
    uint64_t empty_rows;
} tensorhost_completion_info;
#define TENSORHOST_COMPLETION_INFO_INIT                                                      \
    {(uint32_t)sizeof(tensorhost_completion_info), 0, 0, 0, 0.0, 0.0, 0, 0.0, 0.0, 0.0, 0, 0}

/* Fills `info` for a completion result: TENSORHOST_ERR_MISUSE for a NULL or
 * freed result, TENSORHOST_ERR_INVALID_ARGUMENT for another model's result
 * or an `info` that is NULL or shorter than the 1.4 struct. Writes the
 * fields `info`'s struct_size covers, never struct_size itself. */
TENSORHOST_API int32_t tensorhost_cpd_get_completion(const tensorhost_cpd *result,
                                                     tensorhost_completion_info *info,
                                                     char *err);

/* ---- Log lines (1.1) ---------------------------------------------------- */

/* The levels of the log lines (the plugin ABI's TH_LOG_* values). */
typedef enum tensorhost_log_level {
    TENSORHOST_LOG_ERROR = 0,
    TENSORHOST_LOG_WARNING = 1,
    TENSORHOST_LOG_INFO = 2,
    TENSORHOST_LOG_DEBUG = 3,
} tensorhost_log_level;

/* One log line: `level` a tensorhost_log_level (a later minor may add
 * levels above DEBUG, for more detail), `message` one line with control
 * characters escaped, without a trailing newline or a "tensorhost:"
 * prefix; a plugin's lines start with "[plugin] ". `message` is valid
 * during the call only. */
typedef void (*tensorhost_log_fn)(int32_t level, const char *message, void *user_data);

/* Sends the library's and the plugins' log lines (which backend "auto"
 * chose, a plugin's own warnings, debug detail of plugin loading) to `fn`
 * with `user_data`, at every level: `fn` does its own filtering. The
 * warnings of a run are not log lines (tensorhost_cpd_warning). With `fn`
 * NULL (the default) lines at WARNING and ERROR go to stderr as
 * "tensorhost: warning: ..." and the rest are dropped; for silence, pass a
 * function that does nothing.
 *
 * Process-wide: the last call wins. Any thread. `fn` is called on the
 * thread of the tensorhost_* call that logs (plugins log on the thread that
 * called into them), so when the library is used from several threads it
 * is called from each of them; calls never overlap (a lock is held while
 * `fn` runs). Once this function returns, the previous `fn` is not running
 * and is not called again, so its user_data may be freed. `fn` may call
 * tensorhost_set_log_handler and tensorhost_request_stop, no other
 * tensorhost_* function. */
TENSORHOST_API void tensorhost_set_log_handler(tensorhost_log_fn fn, void *user_data);

/* Asks the call in progress, if any, to stop: tensorhost_cp_als (and
 * tensorhost_cp_apr, tensorhost_complete) after its
 * current iteration (its result says interrupted), tensorhost_tensor_read
 * between chunks of the file (TENSORHOST_ERR_IO, "interrupted"). Each of
 * those calls starts afresh: a request made before it began, or after the
 * last one ended, is forgotten. The request is process-wide, so it reaches
 * every such call in progress. Async-signal-safe; any thread. */
TENSORHOST_API void tensorhost_request_stop(void);

#ifdef __cplusplus
}
#endif

#endif
