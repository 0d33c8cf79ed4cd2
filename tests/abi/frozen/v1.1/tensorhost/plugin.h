/*
 * tensorhost plugin ABI, version 1.1
 *
 * The one header a third-party MTTKRP backend needs. It is a binary contract:
 * C11, fixed-width types, no GLib or CUDA types, no inline code beyond macros.
 *
 * ---------------------------------------------------------------------------
 * How a plugin is found and trusted
 * ---------------------------------------------------------------------------
 * A plugin is a shared object that exports exactly one symbol,
 * TH_PLUGIN_ENTRY_SYMBOL ("tensorhost_plugin_entry"), a constant
 * th_plugin_entry. The host dlopen()s the object with RTLD_NOW|RTLD_LOCAL,
 * looks the symbol up with dlsym() and then:
 *   1. reads entry->struct_size and entry->abi_version first;
 *   2. rejects the plugin unless abi_version.major == TH_ABI_VERSION_MAJOR;
 *   3. rejects it if struct_size is smaller than TH_PLUGIN_ENTRY_V1_0_SIZE;
 *   4. reads only the fields that struct_size says are present (a plugin built
 *      against an older minor simply lacks the newer, optional fields; a plugin
 *      built against a newer minor has a longer struct whose tail is ignored);
 *   5. rejects it if a required function pointer is NULL;
 *   6. calls init() once (if present), then get_info().
 *
 * Versioning policy
 *   - A minor version only appends fields to the end of a struct (each struct
 *     carries struct_size for that reason) or adds enum values; every appended
 *     function pointer is optional, and the host checks both struct_size and
 *     NULL before calling it.
 *   - Anything else (removing, reordering or retyping a field, changing a
 *     function's meaning) bumps the major version, and the host refuses plugins
 *     of any other major.
 *
 * Division of work
 *   The backend owns everything whose size grows with the number of nonzeros or
 *   with the mode lengths: its copy (or copies) of the tensor, the I_n x R
 *   factor matrices and the MTTKRP results. The host owns the R x R algebra:
 *   Gram matrices, their Hadamard products and the pseudo-inverse. With the
 *   optional als_update() a GPU backend keeps all tall data resident and only
 *   R x R matrices and R-vectors cross the bus. With the optional als_sweep()
 *   (1.1) the backend also solves the R x R systems, one call per iteration;
 *   the host keeps the pseudo-inverse for the rare iteration where a
 *   Cholesky factorisation breaks down.
 *
 * Threading
 *   The host calls every function of one instance from one thread at a time
 *   (never concurrently for the same instance). Distinct instances may be used
 *   from distinct threads only if the plugin sets TH_CAP_THREAD_SAFE_INSTANCES;
 *   the tensorhost program itself never does. init()/deinit() are called from
 *   the host's main thread with no instance alive. A plugin may use threads of
 *   its own inside a call, but must have joined or parked them before the call
 *   returns, and must call host services only from the thread that called it.
 *
 * Errors
 *   Functions return a th_status: TH_OK (0) on success, a negative code on
 *   failure. Every function that can fail takes `char *err`, a caller-owned
 *   buffer of at least TH_ERROR_SIZE bytes (never NULL). On failure the plugin
 *   writes a NUL-terminated, human-readable message into it (naming the option,
 *   mode or size at fault); on success it leaves the buffer alone. On failure
 *   the instance stays valid and may still be destroyed.
 *
 * Changelog
 *   1.0  first version.
 *   1.1  optional als_sweep(): a whole CP-ALS iteration in one call, with the
 *        R x R solve on the backend (TH_CAP_ALS_SWEEP, th_als_sweep_io).
 */
#ifndef TENSORHOST_PLUGIN_H
#define TENSORHOST_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TH_ABI_VERSION_MAJOR 1u
#define TH_ABI_VERSION_MINOR 1u

/* The name of the one symbol a plugin exports. */
#define TH_PLUGIN_ENTRY_SYMBOL "tensorhost_plugin_entry"

/* Minimum size of every `err` buffer passed to a plugin. */
#define TH_ERROR_SIZE 512u

/* Sizes of the fixed character arrays in the out-structs below. */
#define TH_NAME_SIZE 128u
#define TH_DETAILS_SIZE 512u

/* Marks the exported entry with default visibility in a plugin built with
 * -fvisibility=hidden. Use it on the definition of the entry only. */
#if defined(_WIN32)
#define TH_PLUGIN_EXPORT __declspec(dllexport)
#else
#define TH_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* ------------------------------------------------------------------------ */
/* Status codes                                                              */
/* ------------------------------------------------------------------------ */

typedef int32_t th_status;

enum {
    TH_OK = 0,
    TH_ERR_INVALID_ARGUMENT = -1, /* bad option, mode, rank, pointer or size */
    TH_ERR_UNSUPPORTED = -2,      /* valid request the backend cannot do (e.g. too many modes) */
    TH_ERR_OUT_OF_MEMORY = -3,    /* host or device memory exhausted, or would be */
    TH_ERR_NO_DEVICE = -4,        /* no usable device or driver */
    TH_ERR_DEVICE = -5,           /* a device call failed at run time */
    TH_ERR_BAD_STATE = -6,        /* call out of order (e.g. mttkrp before load_tensor) */
    TH_ERR_CANCELLED = -7,        /* host_services.is_cancelled() said stop */
    TH_ERR_INTERNAL = -8          /* a bug in the plugin */
};

/* ------------------------------------------------------------------------ */
/* Plain data passed in                                                      */
/* ------------------------------------------------------------------------ */

typedef struct th_abi_version {
    uint16_t major;
    uint16_t minor;
} th_abi_version;

/* Log levels for th_host_services.log. */
enum {
    TH_LOG_ERROR = 0,
    TH_LOG_WARNING = 1,
    TH_LOG_INFO = 2,
    TH_LOG_DEBUG = 3
};

/* Services the host offers. Owned by the host; valid from create() until the
 * matching destroy() returns (and, for init(), until deinit() returns). */
typedef struct th_host_services {
    uint32_t struct_size; /* sizeof(th_host_services) of the host's header */
    uint32_t reserved0;
    void *host_data; /* opaque, passed back to every callback */
    /* Emit one line (no trailing newline needed). `message` is borrowed for the
     * duration of the call. Call only from the thread that called into the
     * plugin. May be NULL-checked but the tensorhost host always provides it. */
    void (*log)(void *host_data, int32_t level, const char *message);
    /* Returns non-zero once the user asked to stop (Ctrl-C). Long-running calls
     * may poll it and return TH_ERR_CANCELLED. Cheap; same thread rule as log. */
    int32_t (*is_cancelled)(void *host_data);
} th_host_services;

/* One backend option: the key/value pairs of the config's [backend.options]
 * table, values rendered as text (integers in decimal, floats as the
 * shortest text that reads back as the same double, at most 17 significant
 * digits in the C locale, booleans as "true"/"false", strings verbatim). Borrowed for the duration of
 * create(); copy what you keep. */
typedef struct th_option {
    const char *key;
    const char *value;
} th_option;

/* A sparse tensor in coordinate form, structure of arrays, 0-based indices.
 * Borrowed for the duration of load_tensor(); the backend copies what it needs.
 * Coordinates are unique (the host merges duplicates) and in no promised order.
 * A dimension may contain empty slices. */
typedef struct th_coo_tensor {
    uint32_t struct_size; /* sizeof(th_coo_tensor) of the host's header */
    uint32_t nmodes;      /* >= 2 */
    uint64_t nnz;         /* >= 1 */
    const uint32_t *dims; /* [nmodes]; every dims[m] >= 1 */
    /* indices[m][k] is the mode-m coordinate of nonzero k, < dims[m]. */
    const uint32_t *const *indices; /* [nmodes] pointers to [nnz] */
    const double *values;           /* [nnz], finite */
    double norm_squared;            /* sum of values^2, for convenience */
} th_coo_tensor;

/* ------------------------------------------------------------------------ */
/* Plain data returned                                                       */
/* ------------------------------------------------------------------------ */

/* Value type the backend computes in. */
enum {
    TH_VALUE_F32 = 1,
    TH_VALUE_F64 = 2
};

/* Capability flags (th_plugin_info.flags). */
enum {
    TH_CAP_ALS_UPDATE = 1u << 0,            /* implements als_update() */
    TH_CAP_GPU = 1u << 1,                   /* runs on a GPU */
    TH_CAP_THREAD_SAFE_INSTANCES = 1u << 2, /* distinct instances may run concurrently */
    TH_CAP_ALS_SWEEP = 1u << 3              /* implements als_sweep() (ABI 1.1) */
};

/* Static description of a plugin. Owned by the plugin, constant, valid from
 * init() until deinit() (in practice: while the object is loaded). */
typedef struct th_plugin_info {
    uint32_t struct_size;    /* sizeof(th_plugin_info) of the plugin's header */
    uint32_t flags;          /* TH_CAP_* */
    const char *id;          /* short name used in configs, e.g. "cpu-reference" */
    const char *name;        /* human-readable name */
    const char *version;     /* the plugin's own version, e.g. "1.2.0" */
    const char *description; /* one sentence */
    uint32_t max_modes;      /* largest order supported (>= 3) */
    uint32_t max_rank;       /* largest rank supported (>= 1) */
    uint32_t value_type;     /* TH_VALUE_* the backend computes in */
    uint32_t reserved0;
} th_plugin_info;

/* What an instance runs on and what it holds. Written by the plugin into a
 * caller-owned struct: the host sets struct_size to its own sizeof() and the
 * plugin writes only the fields that fit in both its and the host's size. */
typedef struct th_runtime_info {
    uint32_t struct_size;
    uint32_t reserved0;
    char device[TH_NAME_SIZE]; /* e.g. "NVIDIA H100 80GB HBM3 (device 0)", "CPU, 8 threads" */
    uint64_t tensor_bytes;     /* memory held for the tensor layout(s) */
    uint64_t factor_bytes;     /* memory held for factors and MTTKRP results */
    uint64_t workspace_bytes;  /* anything else held between calls */
    /* Free-form "key=value key=value" facts for reports, e.g. "kappa=132 P=32". */
    char details[TH_DETAILS_SIZE];
} th_runtime_info;

/* Per-mode facts after load_tensor() and the latest mttkrp() on that mode.
 * Same struct_size rule as th_runtime_info. */
typedef struct th_mode_info {
    uint32_t struct_size;
    uint32_t partitions;       /* work partitions for this mode (0 if not meaningful) */
    char scheme[TH_NAME_SIZE]; /* how this mode is computed, e.g. "scheme1", "row-parallel" */
    /* Seconds the latest mttkrp() on this mode spent in the backend's own
     * timing (device events on a GPU); negative if the backend does not time. */
    double last_mttkrp_seconds;
} th_mode_info;

/* How als_update() normalises the columns of the new factor. */
enum {
    TH_NORM_2 = 0,  /* lambda_r = ||a_r||_2 (first CP-ALS iteration) */
    TH_NORM_MAX = 1 /* lambda_r = max(max_i |a_ir|, 1) (later iterations, as Tensor Toolbox) */
};

/* Results of als_update(), caller-owned arrays the plugin fills. */
typedef struct th_als_output {
    uint32_t struct_size;
    uint32_t reserved0;
    double *lambda; /* [rank] column norms used to normalise */
    double *gram;   /* [rank*rank] row-major A_n^T A_n of the normalised factor */
    /* [rank] inner[r] = sum_i M_n(i,r) * A_n(i,r), with M_n the MTTKRP result
     * the update started from and A_n the normalised new factor. With lambda
     * this gives <X, model> = sum_r lambda_r inner[r] for the fit. */
    double *inner;
} th_als_output;

/* In and out of als_sweep() (ABI 1.1). Caller-owned; the host sets
 * struct_size to its own sizeof() and the plugin rejects a struct shorter
 * than the fields it reads (TH_ERR_INVALID_ARGUMENT). */
typedef struct th_als_sweep_io {
    uint32_t struct_size;
    int32_t norm;        /* in: TH_NORM_* for every mode of this iteration */
    uint32_t nmodes;     /* in: the loaded tensor's order */
    uint32_t modes_done; /* out: modes 0 .. modes_done-1 were updated */
    /* in/out: [nmodes] pointers to rank*rank row-major Gram matrices. In: the
     * Grams A_m^T A_m of the backend's current factors. Out: the Grams of the
     * updated modes (0 .. modes_done-1) are replaced; the others are left. */
    double *const *grams;
    double *lambda; /* out: [rank] as als_update(), for mode modes_done-1 */
    double *inner;  /* out: [rank] as als_update(), for mode modes_done-1 */
} th_als_sweep_io;

/* ------------------------------------------------------------------------ */
/* The entry                                                                 */
/* ------------------------------------------------------------------------ */

/* An instance of a backend. Opaque; created by create(), owned by the host
 * until it hands it back to destroy(). */
typedef struct th_instance th_instance;

typedef struct th_plugin_entry {
    uint32_t struct_size;       /* sizeof(th_plugin_entry) of the plugin's header */
    th_abi_version abi_version; /* {TH_ABI_VERSION_MAJOR, TH_ABI_VERSION_MINOR} */

    /* Optional (may be NULL). Called once after loading, before anything else.
     * `plugin_path` is the object's path (borrowed). `host` lives until
     * deinit() returns. A failure here unloads the plugin. */
    th_status (*init)(const char *plugin_path, const th_host_services *host, char *err);

    /* Optional. Called once before dlclose(), after every instance is
     * destroyed. Release process-wide state here (never in destructors or
     * atexit: a CUDA runtime may already be gone by then). */
    void (*deinit)(void);

    /* Required. Never NULL; the returned struct is plugin-owned and constant. */
    const th_plugin_info *(*get_info)(void);

    /* Required. Creates an instance from the backend options. Unknown keys and
     * bad values are errors that name the key. On success *out is set and is
     * owned by the host until destroy(). `host` lives until destroy() returns. */
    th_status (*create)(const th_option *options, uint32_t n_options,
                        const th_host_services *host, th_instance **out, char *err);

    /* Required. Releases everything the instance holds (device memory
     * included). Accepts NULL. */
    void (*destroy)(th_instance *instance);

    /* Required. Takes the tensor and the CP rank, builds the backend's own
     * layouts, allocates factors (contents unspecified until set_factor) and
     * results. Replaces any tensor loaded before. The host times this call as
     * preprocessing. Fails with TH_ERR_UNSUPPORTED or TH_ERR_OUT_OF_MEMORY, and
     * a message with the sizes, when the backend cannot hold the problem. */
    th_status (*load_tensor)(th_instance *instance, const th_coo_tensor *tensor,
                             uint32_t rank, char *err);

    /* Required. Copies a dims[mode] x rank row-major factor into the backend.
     * `data` is borrowed for the call. */
    th_status (*set_factor)(th_instance *instance, uint32_t mode, const double *data,
                            char *err);

    /* Required. Copies the backend's dims[mode] x rank factor out, row-major,
     * into caller-owned `data`. */
    th_status (*get_factor)(th_instance *instance, uint32_t mode, double *data, char *err);

    /* Required. Computes M = X_(mode) (Khatri-Rao of every other factor) into a
     * backend-held dims[mode] x rank result, replacing the previous result of
     * that mode. Returns when the result is complete. */
    th_status (*mttkrp)(th_instance *instance, uint32_t mode, char *err);

    /* Required. Copies the latest mttkrp() result of `mode` out, row-major,
     * into caller-owned `data` of dims[mode] x rank doubles. */
    th_status (*get_mttkrp_result)(th_instance *instance, uint32_t mode, double *data,
                                   char *err);

    /* Optional (NULL if unsupported; then TH_CAP_ALS_UPDATE must be clear).
     * One CP-ALS factor update on backend-held data:
     *   A_mode <- M_mode * w    (w: caller-owned rank x rank row-major, borrowed)
     *   lambda <- column norms of A_mode (TH_NORM_*), A_mode <- A_mode / lambda
     * and fills `out` (see th_als_output). M_mode is the latest mttkrp() result
     * of that mode. */
    th_status (*als_update)(th_instance *instance, uint32_t mode, const double *w,
                            int32_t norm, th_als_output *out, char *err);

    /* Optional. Fills caller-owned `info` (see th_runtime_info). */
    th_status (*get_runtime_info)(th_instance *instance, th_runtime_info *info, char *err);

    /* Optional. Fills caller-owned `info` for `mode` (see th_mode_info). */
    th_status (*get_mode_info)(th_instance *instance, uint32_t mode, th_mode_info *info,
                               char *err);

    /* --- ABI 1.1 ------------------------------------------------------- */

    /* Optional (NULL if unsupported; then TH_CAP_ALS_SWEEP must be clear).
     * One whole CP-ALS iteration on backend-held data, so a backend with
     * a long round trip (a GPU) needs one per iteration instead of two per
     * mode. For mode n = 0 .. nmodes-1 in order:
     *   M_n  <- mttkrp(n), as mttkrp() (its result replaces mode n's)
     *   V    <- Hadamard product of the Grams of every mode but n
     *   A_n  <- M_n V^-1, V^-1 from any elimination whose pivots are the
     *           Cholesky pivots of V (Cholesky, or Gauss-Jordan without pivoting)
     *   then as als_update(n, V^-1, io->norm): normalise, lambda, Gram, inner
     * The solve breaks down when a pivot is not greater than
     * max_i V(i,i) * rank * DBL_EPSILON * 16 (the host's own test). Then the
     * backend stops: io->modes_done = n, modes n.. are left as they were,
     * and the host finishes the iteration itself from mode n (mttkrp(), its
     * pseudo-inverse, als_update()). io->modes_done = nmodes on a full sweep.
     * get_mode_info() afterwards reports each swept mode's MTTKRP time.
     * A backend that sets this must also implement als_update(). */
    th_status (*als_sweep)(th_instance *instance, th_als_sweep_io *io, char *err);
} th_plugin_entry;

/* Size of the v1.0 entry: the host refuses a shorter struct. */
#define TH_PLUGIN_ENTRY_V1_0_SIZE \
    (offsetof(th_plugin_entry, get_mode_info) + sizeof(void (*)(void)))

/* Size of the v1.1 entry: als_sweep is present only in an entry this long. */
#define TH_PLUGIN_ENTRY_V1_1_SIZE \
    (offsetof(th_plugin_entry, als_sweep) + sizeof(void (*)(void)))

/* Convenience for plugins: fill struct_size and the ABI version. */
#define TH_PLUGIN_ENTRY_HEADER                           \
    .struct_size = (uint32_t)sizeof(th_plugin_entry),    \
    .abi_version = {TH_ABI_VERSION_MAJOR, TH_ABI_VERSION_MINOR}

#ifdef __cplusplus
}
#endif

#endif /* TENSORHOST_PLUGIN_H */
