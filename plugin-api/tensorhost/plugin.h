/*
 * tensorhost plugin ABI, version 1.10
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
 *   4. reads the entry by the rule for structs passed in (below): a plugin
 *      built against an older minor simply lacks the newer, optional
 *      functions; one built against a newer minor has a longer struct whose
 *      tail is ignored;
 *   5. rejects it if a required function pointer is NULL;
 *   6. calls init() once (if present), then get_info().
 *
 * ---------------------------------------------------------------------------
 * Growth: one rule for every sized struct
 * ---------------------------------------------------------------------------
 * Every struct that may grow starts with uint32_t struct_size, and a minor
 * version grows a struct only by appending fields. For every version that
 * grew a struct, TH_<STRUCT>_V<major>_<minor>_SIZE is its size in that
 * version (TH_COO_TENSOR_V1_0_SIZE, TH_RUNTIME_INFO_V1_2_SIZE, ...); a struct
 * is "of version v" when its struct_size is at least v's size. Which side
 * fills a struct decides which of two rules applies:
 *
 * Structs passed in, filled by one side and read by the other: th_plugin_entry
 * and th_plugin_info (plugin -> host); th_host_services, th_coo_tensor,
 * th_als_output and the in-fields of th_als_sweep_io, th_init_factors_io,
 * th_generalized_mttkrp_io, th_factor_update_io, th_row_least_squares_io,
 * th_nonneg_update_io and th_multiplicative_updates_io (host -> plugin).
 *   - struct_size is the filler's sizeof(), from the header it was built with.
 *   - The reader reads a field only when the whole of it lies within
 *     struct_size (TH_HAS_FIELD).
 *   - The reader refuses a struct shorter than the size of the version that
 *     introduced the fields it cannot do without (TH_ERR_INVALID_ARGUMENT for
 *     a plugin, a load error for the host), never one shorter than its own
 *     sizeof(): that is what lets a newer reader accept an older filler.
 *   - A newer field the struct lacks takes its documented default; a longer
 *     struct's tail, from a newer header, is ignored.
 *   - So a plugin built against an older header ignores, unseen, an
 *     in-field its header lacks. A host therefore gives an in-field a value
 *     other than its default only when the plugin's entry says it was built
 *     against the version that added the field or a later one
 *     (entry->abi_version.minor); with an older plugin it takes its own path
 *     for that work instead. A plugin of that version or later either
 *     honours the field or refuses the call as its documentation says
 *     (never ignores it).
 *
 * Structs passed out, owned by the caller and filled by the callee:
 * th_runtime_info, th_mode_info and the out-fields of th_als_sweep_io
 * (modes_done), th_generalized_mttkrp_io (reduced), th_factor_update_io
 * (violation, count), th_row_least_squares_io (its counts and norm),
 * th_nonneg_update_io (passes) and th_multiplicative_updates_io
 * (iterations, updates, violation).
 *   - The caller sets struct_size to its own sizeof() and every other field to
 *     its documented "absent" value (empty string, 0, negative time) before
 *     the call.
 *   - The callee writes only the first min(its own sizeof(), the caller's
 *     struct_size) bytes, and never struct_size itself (th_plugin_copy_out in
 *     <tensorhost/plugin_sdk.h> does exactly this).
 *   - So a field the callee's header does not have keeps the caller's
 *     "absent" value, and the caller reads it as absent.
 *
 * The callee never refuses an out-struct for being short (writing less is
 * always safe), and no rule ever compares a struct_size with the reader's own
 * sizeof(): a host or plugin built against 1.(n+1) accepts every struct of
 * 1.0 .. 1.n.
 *
 * Why appending, not named extensions. The ABI grows by appending to
 * size-prefixed structs (as Win32's cbSize structs and Linux's extensible
 * syscalls, clone3() and openat2(), do), not by extensions looked up by name
 * (as CLAP's get_extension() and LV2's extension_data() do: a string or URI
 * per feature, answered with a struct of functions). That fits what grows
 * here: a handful of optional calls on one object (als_update, als_sweep,
 * init_factors, the runtime and mode queries, the generalized MTTKRP) and a
 * fact or two per version, all serving one feature: MTTKRP-based
 * decompositions of one tensor. With one entry table the host
 * learns everything in one dlsym(); checking a plugin is a few size
 * comparisons and NULL tests at load time; a call is one indirect call, never
 * a string lookup; and the layout tests pin every offset. Named extensions would pay
 * for independent evolution that nothing here needs. That changes when there
 * are many optional feature sets that grow independently or come from third
 * parties (say, streaming tensors, a distributed backend and a device-memory
 * sharing protocol, each with versions of its own): appending would then
 * serialise them into one version line and make every backend carry NULLs
 * for all of them, and one versioned struct per named feature, looked up once
 * at load time, becomes the better shape. Adding that later is itself an
 * append: one optional get_extension() at the end of the entry.
 *
 * Capabilities. What a plugin can do comes from its function pointers alone:
 * the host calls an optional function when it is non-NULL within the entry's
 * struct_size, and otherwise takes its own path. TH_CAP_ALS_UPDATE and
 * TH_CAP_ALS_SWEEP decide nothing in a host of 1.2 or later; they stay
 * defined because hosts 1.0 and 1.1 refuse a plugin whose flag and function
 * disagree, so a plugin that also wants to load there sets each exactly when
 * it has the function (a 1.2 host warns when they disagree; the conformance
 * checker fails the plugin). init_factors (1.3) has no flag: no host ever
 * needed one. TH_CAP_GPU only describes the backend (listings and reports
 * show it). TH_CAP_THREAD_SAFE_INSTANCES is ignored.
 *
 * Versioning policy
 *   - A minor version only appends fields to the end of a struct (the rules
 *     above), adds enum values or status codes, and adds a size macro for
 *     each struct it grows; every appended function pointer is optional.
 *   - Anything else (removing, reordering or retyping a field, changing a
 *     function's meaning or a field's default) bumps the major version, and
 *     the host refuses plugins of any other major.
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
 *   Cholesky factorisation breaks down. The initial factors, tall too, are a
 *   function of (seed, mode, row, column) that every side computes alike
 *   (below): with the optional init_factors() (1.3) the backend draws them in
 *   its own memory and returns their Grams, so a run starts without
 *   uploading a factor; without it the host draws the same values (on all
 *   its cores) and uploads them with set_factor().
 *   Models other than least squares (1.4) keep the same division: the
 *   backend evaluates the model at its nonzeros and accumulates an
 *   elementwise function of data and model into the MTTKRP result
 *   (generalized_mttkrp), and applies elementwise updates to a factor it
 *   holds (factor_update); only rank-length vectors and scalars cross.
 *   Tensor completion (1.5), where the listed entries are the observed ones,
 *   solves each factor row's own small least-squares problem from that
 *   row's nonzeros (row_least_squares): the R x R systems are as many as
 *   the rows, so the backend builds and solves them where the rows are.
 *
 * Initial factors
 *   A run given no initial factors starts from F_m(i, r), for mode m, row
 *   i < dims[m] and column r < rank, defined bit for bit so that the host and
 *   any backend compute the same doubles independently, in any order, on any
 *   number of threads. All arithmetic on uint64_t, modulo 2^64:
 *     mix(z)    = SplitMix64's finaliser:
 *                   z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
 *                   z = (z ^ (z >> 27)) * 0x94d049bb133111eb
 *                   return z ^ (z >> 31)
 *     G         = 0x9e3779b97f4a7c15 (2G = 0x3c6ef372fe94f82a modulo 2^64)
 *     mode_key  = mix(seed ^ mix(m + G))
 *     row_key   = mix(mode_key ^ mix(i + 2G))
 *     bits      = mix(row_key + (r + 1) * G)
 *     F_m(i, r) = (double)(bits >> 11) * 2^-53, exact: a double in [0, 1)
 *   bits is output r+1 of a SplitMix64 generator whose state is row_key, so
 *   a row key costs four mixes (two of them the same for a whole mode) and
 *   each value one more. Each level mixes its index before combining it, so
 *   no simple relation (seed + 1, mode + 1, row + 1, ...) makes two keys
 *   share values, and the value is keyed by the column, not by
 *   i * rank + r: the rank-16 start is the first 16 columns of the rank-32
 *   start of the same seed. <tensorhost/plugin_sdk.h>
 *   implements it once, for C, C++ and CUDA device code
 *   (th_initial_factor_value and its per-row parts); the host uses the same.
 *   Known answers: F_0(0, 0) = 0x1.4a8c98fedd7ccp-2 (0.3228019624287952) for
 *   seed 0, F_2(7, 3) = 0x1.c65c8885065f4p-2 (0.4437123614494276) for seed
 *   42.
 *
 * Threading
 *   The host calls into a plugin from one thread at a time: never two calls at
 *   once, whether for one instance or for distinct ones. init()/deinit() are
 *   called from the host's main thread with no instance alive. A plugin may use
 *   threads of its own inside a call, but must have joined or parked them
 *   before the call returns, and must call host services only from the thread
 *   that called it.
 *
 * Errors
 *   Functions return a th_status: TH_OK (0) on success, a negative code on
 *   failure (TH_STATUS_LIST below is the one list of codes and their names).
 *   Every function that can fail takes `char *err`, a caller-owned
 *   buffer of at least TH_ERROR_SIZE bytes (never NULL). On failure the plugin
 *   writes a NUL-terminated, human-readable message into it (naming the option,
 *   mode or size at fault); on success it leaves the buffer alone. On failure
 *   the instance stays valid and may still be destroyed.
 *
 * Changelog
 *   1.0  first version.
 *   1.1  optional als_sweep(): a whole CP-ALS iteration in one call, with the
 *        R x R solve on the backend (TH_CAP_ALS_SWEEP, th_als_sweep_io).
 *   1.2  th_runtime_info.last_sweep_seconds, the latest als_sweep's device
 *        time as a typed field; TH_<STRUCT>_V1_x_SIZE for every sized struct
 *        and the two growth rules above; capabilities from the function
 *        pointers alone (the flags are kept for older hosts);
 *        TH_STATUS_LIST, the one list of status codes. No layout of 1.1
 *        moves.
 *   1.3  optional init_factors(): the backend draws the initial factors
 *        itself from the counter-based formula above and returns their
 *        Grams (th_init_factors_io); the formula in <tensorhost/plugin_sdk.h>.
 *        No layout of 1.2 moves.
 *   1.4  models beyond least squares: optional generalized_mttkrp() (an
 *        elementwise function of each nonzero's data and model values,
 *        TH_ELEMENTWISE_*, and a sum over the nonzeros, TH_REDUCTION_*) and
 *        factor_update() (elementwise operations on one backend-held factor,
 *        TH_FACTOR_*), which CP-APR (Poisson CP) runs on; TH_MODE_NONE.
 *        No layout of 1.3 moves.
 *   1.5  tensor completion: optional row_least_squares() (each row of a
 *        factor solved from its own nonzeros with a ridge term, optionally
 *        nonnegative; th_row_least_squares_io); nonnegative CP: optional
 *        als_update_nonneg() (als_update's step by hierarchical ALS under
 *        A >= 0; th_nonneg_update_io). No layout of 1.4 moves.
 *   1.6  regularised and constrained CP-ALS: th_als_sweep_io grows the
 *        in-fields constraints, l1, ridge, scale, hals_sweeps and
 *        hals_tolerance, so a whole iteration of nonnegative, sparse (l1)
 *        or ridge (l2) CP-ALS runs in one als_sweep(); th_nonneg_update_io
 *        grows ridge, l1 and unbounded (its coordinate descent without
 *        the bound, for l1 on an unconstrained mode); TH_CONSTRAINT_*; the
 *        rule that a host sets a newer in-field only for a plugin of that
 *        version (above). No layout of 1.5 moves.
 *   1.7  optional multiplicative_updates(): CP-APR's inner iterations of
 *        one mode in one call (th_multiplicative_updates_io), so that a
 *        backend may run them row by row with each row's products formed
 *        once; the results are those of the loop of generalized_mttkrp()
 *        and factor_update() it replaces. No layout of 1.6 moves.
 *   1.8  a run of several processes (mpirun, srun): th_host_services grows
 *        processes(), broadcast() and reduce_max(), so that a backend whose
 *        devices talk across processes can set up their communicator, and
 *        th_runtime_info grows process_sums, by which it says that it sums
 *        its MTTKRPs over the processes itself. No layout of 1.7 moves.
 *   1.9  coordinate descent's passes per mode: th_als_sweep_io grows
 *        hals_mode_sweeps, so that a sweep's modes may make different
 *        numbers of passes (the host chooses them by each mode's cost, as
 *        Gillis and Glineur's accelerated HALS). No layout of 1.8 moves.
 *   1.10 each mode's own nonzeros in a run of several processes:
 *        th_coo_tensor grows mode_nonzeros (per mode, the nonzeros of the
 *        output rows this process owns in that mode), which a host gives
 *        only to an instance whose th_runtime_info.mode_nonzeros (the 1.8
 *        reserved1, 0 before) says it builds each mode from them. No layout
 *        of 1.9 moves.
 */
#ifndef TENSORHOST_PLUGIN_H
#define TENSORHOST_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TH_ABI_VERSION_MAJOR 1u
#define TH_ABI_VERSION_MINOR 10u

/* The name of the one symbol a plugin exports. */
#define TH_PLUGIN_ENTRY_SYMBOL "tensorhost_plugin_entry"

/* Minimum size of every `err` buffer passed to a plugin. */
#define TH_ERROR_SIZE 512u

/* The ALS solve's breakdown test, shared by the host and als_sweep: a
 * Cholesky pivot of the R x R matrix V that is not greater than
 * max_i V(i,i) * R * DBL_EPSILON * TH_SOLVE_BREAKDOWN_FACTOR counts as a
 * breakdown (V numerically rank deficient); the host then takes a
 * pseudo-inverse. A constant of the 1.x ABI (earlier headers state it in
 * words). */
#define TH_SOLVE_BREAKDOWN_FACTOR 16.0

/* Sizes of the fixed character arrays in the out-structs below. */
#define TH_NAME_SIZE 128u
#define TH_DETAILS_SIZE 512u

/* Where `field` of struct `type` ends: the struct_size a struct must have
 * to hold the whole field. */
#define TH_FIELD_END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* Whether a struct of `type` whose filler set struct_size to `size` holds
 * `field` (the rule for structs passed in). */
#define TH_HAS_FIELD(size, type, field) ((size_t)(size) >= TH_FIELD_END(type, field))

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

/* The one list of status codes: X(NAME, VALUE) per code. The enum below and
 * every name lookup (the host's th_status_name(), a plugin's own) expand it,
 * so a code added here has its name everywhere, e.g.
 *   #define NAME_CASE(name, value) case name: return #name;
 *   switch (status) { TH_STATUS_LIST(NAME_CASE) default: return "unknown"; }
 * A minor version may append codes; a value never changes meaning. */
#define TH_STATUS_LIST(X)                                                                      \
    X(TH_OK, 0)                     /* success */                                              \
    X(TH_ERR_INVALID_ARGUMENT, -1)  /* bad option, mode, rank, pointer or size */              \
    X(TH_ERR_UNSUPPORTED, -2)       /* valid request the backend cannot do (too many modes) */ \
    X(TH_ERR_OUT_OF_MEMORY, -3)     /* host or device memory exhausted, or would be */         \
    X(TH_ERR_NO_DEVICE, -4)         /* no usable device or driver */                           \
    X(TH_ERR_DEVICE, -5)            /* a device call failed at run time */                     \
    X(TH_ERR_BAD_STATE, -6)         /* call out of order (mttkrp before load_tensor) */        \
    X(TH_ERR_CANCELLED, -7)         /* host_services.is_cancelled() said stop */               \
    X(TH_ERR_INTERNAL, -8)          /* a bug in the plugin */

#define TH_STATUS_ENUMERATOR_(name, value) name = value,
enum { TH_STATUS_LIST(TH_STATUS_ENUMERATOR_) };
#undef TH_STATUS_ENUMERATOR_

/* ------------------------------------------------------------------------ */
/* Plain data the host gives the plugin                                      */
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

    /* --- ABI 1.8: the run's processes ---------------------------------- */

    /* A run of several processes (mpirun, srun) gives each process a share
     * of the tensor's nonzeros (consecutive ones of the file: load_tensor()
     * receives the share, with the whole tensor's dims) and, by default,
     * sums the processes' partial MTTKRP results on the host before each
     * update. A backend whose devices can sum them among themselves (NCCL
     * between GPUs) sets up that communication with these and says so in
     * th_runtime_info.process_sums. From a 1.8 host all three are set;
     * absent (an older host), the run is one process. */

    /* The number of processes in the run, and in *rank (never NULL) this
     * one's, from 0: 1 and 0 where the run is one process (every run of
     * the library's API, of Python and of [compare]). Same thread rule as
     * log. */
    uint32_t (*processes)(void *host_data, uint32_t *rank);
    /* Collectives: with several processes, every process calls the same
     * ones in the same order with the same sizes, and only inside create()
     * or load_tensor() (which every process of a run calls at the same
     * point). A backend that failed on this process still makes every
     * collective it would have made, passing the failure on (reduce_max
     * of a flag), and fails after them, so that no process waits on one
     * that has left; the others may go on, since the host agrees on
     * failures after each of those calls and ends the run with the failing
     * process's error. TH_OK, or TH_ERR_INTERNAL with the message in err
     * when the transport failed (the run then ends). With one process
     * they return TH_OK at once, `data` and `values` as they were. */
    /* The `bytes` at rank 0's `data` into every process's `data`. */
    th_status (*broadcast)(void *host_data, void *data, uint64_t bytes, char *err);
    /* values[k] (k < n) replaced by its maximum over the processes. */
    th_status (*reduce_max)(void *host_data, uint64_t *values, uint64_t n, char *err);
} th_host_services;

/* Passed in (host -> plugin). */
#define TH_HOST_SERVICES_V1_0_SIZE TH_FIELD_END(th_host_services, is_cancelled)
#define TH_HOST_SERVICES_V1_8_SIZE TH_FIELD_END(th_host_services, reduce_max)

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

    /* --- ABI 1.10 (an in-field; a host sets it only for an instance whose
     * th_runtime_info.mode_nonzeros is nonzero) --- */
    /* NULL (the default), or [nmodes] tensors, each with this one's nmodes
     * and dims and its own nnz (>= 0), indices and values (norm_squared
     * unused): in a run of several processes, mode_nonzeros[m] holds the
     * nonzeros of the mode-m output rows this process owns (dealt by the
     * plan of the run's documentation: every nonzero of the tensor is in
     * exactly one process's mode_nonzeros[m] for each m). The instance
     * computes every mode-m operation (mttkrp(), the generalized MTTKRP,
     * row_least_squares(), ...) from mode_nonzeros[m], whose rows are the
     * only ones it writes; nnz, indices and values above are then
     * mode_nonzeros[0]'s, for what runs over no particular mode. Borrowed
     * for the call, as the rest. */
    const struct th_coo_tensor *const *mode_nonzeros;
} th_coo_tensor;

/* Passed in (host -> plugin). */
#define TH_COO_TENSOR_V1_0_SIZE TH_FIELD_END(th_coo_tensor, norm_squared)
#define TH_COO_TENSOR_V1_10_SIZE TH_FIELD_END(th_coo_tensor, mode_nonzeros)

/* ------------------------------------------------------------------------ */
/* Plain data the plugin gives the host, and the ALS calls' structs          */
/* ------------------------------------------------------------------------ */

/* Value type the backend computes in. */
enum {
    TH_VALUE_F32 = 1,
    TH_VALUE_F64 = 2
};

/* Flags (th_plugin_info.flags). A host of 1.2 or later takes capabilities
 * from the function pointers alone (see "Capabilities" above). */
enum {
    /* Set exactly when als_update is non-NULL: hosts 1.0 and 1.1 refuse a
     * plugin where the two disagree; a 1.2 host only warns. */
    TH_CAP_ALS_UPDATE = 1u << 0,
    /* Describes the backend: runs on a GPU (shown in listings and reports). */
    TH_CAP_GPU = 1u << 1,
    /* Ignored: no host ever read it, and a host never runs two calls into a
     * plugin at once (see Threading). Defined so that plugins setting it
     * still compile; the bit stays reserved. */
    TH_CAP_THREAD_SAFE_INSTANCES = 1u << 2,
    /* Set exactly when als_sweep is present (ABI 1.1), as TH_CAP_ALS_UPDATE. */
    TH_CAP_ALS_SWEEP = 1u << 3
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

/* Passed in (plugin -> host, from get_info()). */
#define TH_PLUGIN_INFO_V1_0_SIZE TH_FIELD_END(th_plugin_info, reserved0)

/* What an instance runs on and what it holds. Passed out: the host owns it,
 * sets struct_size and the defaults, and the plugin fills what fits (see
 * "Growth" above). */
typedef struct th_runtime_info {
    uint32_t struct_size;
    uint32_t reserved0;
    char device[TH_NAME_SIZE]; /* e.g. "NVIDIA H100 80GB HBM3 (device 0)", "CPU, 8 threads" */
    uint64_t tensor_bytes;     /* memory held for the tensor layout(s) */
    uint64_t factor_bytes;     /* memory held for factors and MTTKRP results */
    uint64_t workspace_bytes;  /* anything else held between calls */
    /* Free-form "key=value key=value" facts for people reading reports, e.g.
     * "kappa=132 P=32". Programs read typed fields, never this text. */
    char details[TH_DETAILS_SIZE];

    /* --- ABI 1.2 ------------------------------------------------------- */

    /* Seconds the latest als_sweep() on this instance took in the backend's
     * own timing (device events on a GPU), the sweep's counterpart of
     * th_mode_info.last_mttkrp_seconds. Default (absent): negative, as
     * before the first sweep, for a backend that does not time its sweeps
     * and for one built against an older header. */
    double last_sweep_seconds;

    /* --- ABI 1.8 ------------------------------------------------------- */

    /* Nonzero: in a run of several processes (th_host_services.processes)
     * this instance sums its MTTKRPs over the processes itself, so that
     * what mttkrp(), get_mttkrp_result(), als_update() and als_sweep()
     * compute is the whole tensor's though each process loaded its share.
     * The host then neither sums them nor keeps the update on the host; it
     * gives every process rank 0's lambda, Gram and inner of each
     * als_update(), and als_sweep() must do the same between its modes (a
     * backend's sums may differ in their last bits between processes), so
     * that every process solves and decides alike. Known from create() on.
     * Always 0 in a run of one process. Default (absent): 0, the host sums
     * each process's partial results. */
    uint32_t process_sums;

    /* --- ABI 1.10 (0 in the 1.8 layout, where it was reserved) --- */

    /* Nonzero: load_tensor() builds each mode from th_coo_tensor's
     * mode_nonzeros[mode] when the host gives them, so that in a run of
     * several processes each mode's MTTKRP covers only the rows this
     * process owns, and those rows are gathered instead of whole results
     * summed: by the host, or by the instance itself where it says
     * process_sums too. Known from create() on. Default (absent): 0, every
     * mode built from the one tensor. */
    uint32_t mode_nonzeros;
} th_runtime_info;

/* Passed out (plugin -> host-owned struct). */
#define TH_RUNTIME_INFO_V1_0_SIZE TH_FIELD_END(th_runtime_info, details)
#define TH_RUNTIME_INFO_V1_2_SIZE TH_FIELD_END(th_runtime_info, last_sweep_seconds)
#define TH_RUNTIME_INFO_V1_8_SIZE TH_FIELD_END(th_runtime_info, mode_nonzeros)

/* Per-mode facts after load_tensor() and the latest mttkrp() on that mode.
 * Passed out, as th_runtime_info. */
typedef struct th_mode_info {
    uint32_t struct_size;
    uint32_t partitions;       /* work partitions for this mode (0 if not meaningful) */
    char scheme[TH_NAME_SIZE]; /* how this mode is computed, e.g. "scheme1", "row-parallel" */
    /* Seconds the latest mttkrp() on this mode spent in the backend's own
     * timing (device events on a GPU); negative if the backend does not time. */
    double last_mttkrp_seconds;
} th_mode_info;

/* Passed out (plugin -> host-owned struct). */
#define TH_MODE_INFO_V1_0_SIZE TH_FIELD_END(th_mode_info, last_mttkrp_seconds)

/* How als_update() normalises the columns of the new factor. */
enum {
    TH_NORM_2 = 0,  /* lambda_r = ||a_r||_2 (first CP-ALS iteration) */
    TH_NORM_MAX = 1 /* lambda_r = max(max_i |a_ir|, 1) (later iterations, as Tensor Toolbox) */
};

/* What bounds a factor's entries (ABI 1.6): th_als_sweep_io.constraints. */
enum {
    TH_CONSTRAINT_NONE = 0,  /* any real value */
    TH_CONSTRAINT_NONNEG = 1 /* >= 0 */
};

/* Where als_update() puts its results. The struct is passed in (the plugin
 * reads the host's pointers); the arrays behind them are the host's, and
 * the plugin fills them. */
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

/* Passed in (host -> plugin). */
#define TH_ALS_OUTPUT_V1_0_SIZE TH_FIELD_END(th_als_output, inner)

/* In and out of als_sweep() (ABI 1.1). Caller-owned, struct_size the host's
 * sizeof(). The in-fields are passed in: the plugin refuses a struct shorter
 * than TH_ALS_SWEEP_IO_V1_1_SIZE (TH_ERR_INVALID_ARGUMENT). modes_done is
 * passed out, within that size. */
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

    /* --- ABI 1.6: regularised and constrained sweeps (in-fields; see
     * als_sweep() for how each mode is updated with them). A host sets them
     * to anything but their defaults only for a plugin of 1.6 or later. --- */
    /* [nmodes] TH_CONSTRAINT_* per mode, borrowed for the call; NULL (the
     * default): every mode TH_CONSTRAINT_NONE. */
    const int32_t *constraints;
    /* [nmodes] the l1 (lasso) weight per mode, each >= 0 and finite,
     * borrowed for the call; NULL (the default): 0 for every mode. */
    const double *l1;
    /* The ridge (l2) weight, >= 0 and finite; default 0. */
    double ridge;
    /* [rank] the model's weights when the sweep starts (the lambda of the
     * mode updated last), borrowed for the call; read only by the first
     * mode's update, and only where coordinate descent updates that mode
     * (each later mode takes the lambda of the mode updated before it).
     * NULL (the default): ones. Must not be the same memory as lambda. */
    const double *scale;
    /* Coordinate descent's passes per mode (>= 1) and stopping tolerance
     * (>= 0, finite), as th_nonneg_update_io's sweeps and tolerance; read
     * only where some mode is updated by coordinate descent. Defaults 1
     * and 0. */
    double hals_tolerance;
    uint32_t hals_sweeps;
    uint32_t reserved0; /* 0 */

    /* --- ABI 1.9 (an in-field; a host sets it only for a plugin of 1.9 or
     * later) --- */
    /* [nmodes] coordinate descent's passes for each mode (each >= 1 where
     * the mode is updated by coordinate descent; the others' entries are
     * not read), borrowed for the call; they replace hals_sweeps. NULL (the
     * default): hals_sweeps for every mode. */
    const uint32_t *hals_mode_sweeps;
} th_als_sweep_io;

#define TH_ALS_SWEEP_IO_V1_1_SIZE TH_FIELD_END(th_als_sweep_io, inner)
#define TH_ALS_SWEEP_IO_V1_6_SIZE TH_FIELD_END(th_als_sweep_io, reserved0)
#define TH_ALS_SWEEP_IO_V1_9_SIZE TH_FIELD_END(th_als_sweep_io, hals_mode_sweeps)

/* --- ABI 1.3 --- */
/* In and out of init_factors(). Caller-owned, struct_size the host's sizeof(); the in-fields passed in (the plugin refuses a struct shorter than TH_INIT_FACTORS_IO_V1_3_SIZE with TH_ERR_INVALID_ARGUMENT), grams passed out. */
typedef struct th_init_factors_io {
    uint32_t struct_size;
    uint32_t nmodes;       /* in: the loaded tensor's order */
    uint64_t seed;         /* in */
    double *const *grams;  /* out: [nmodes] pointers to rank*rank row-major Grams A_m^T A_m of the factors drawn */
} th_init_factors_io;
#define TH_INIT_FACTORS_IO_V1_3_SIZE TH_FIELD_END(th_init_factors_io, grams)

/* --- ABI 1.4 --- */

/* "No mode": generalized_mttkrp() with this mode computes its reduction only
 * and leaves every mode's result as it was. */
#define TH_MODE_NONE UINT32_MAX

/* The elementwise function g(x, m) that generalized_mttkrp() accumulates,
 * with x a nonzero's value and m the model's value at the same index (see
 * th_generalized_mttkrp_io). A minor version may append functions (the
 * generalized CP losses of Hong, Kolda and Duersch are their derivatives
 * dF/dm); a backend answers a function it does not know with
 * TH_ERR_UNSUPPORTED and a message naming it. */
enum {
    /* g = x: the plain MTTKRP (m is not computed; weights, epsilon unused). */
    TH_ELEMENTWISE_VALUE = 0,
    /* g = x / max(m, epsilon): the Poisson model's ratio, CP-APR's Phi. */
    TH_ELEMENTWISE_POISSON_RATIO = 1,
    /* g = m - x: the least-squares residual on the listed entries, whose
     * MTTKRP is the gradient of 1/2 sum (m - x)^2 over them (completion). */
    TH_ELEMENTWISE_RESIDUAL = 2
};

/* The function h(x, m) whose sum over the nonzeros generalized_mttkrp()
 * returns in th_generalized_mttkrp_io.reduced. Appendable as above. */
enum {
    TH_REDUCTION_NONE = 0, /* reduced = 0, m need not be computed for it */
    /* h = x log(m) where x != 0, 0 where x == 0 (-inf where x > 0 and
     * m <= 0): the data term of the Poisson log-likelihood, which is
     * sum_i h(x_i, m_i) - sum of every model entry (Tensor Toolbox's
     * tt_loglikelihood; the host adds the second term). */
    TH_REDUCTION_POISSON_LOG_LIKELIHOOD = 1,
    TH_REDUCTION_SQUARED_RESIDUAL = 2, /* h = (m - x)^2 */
    TH_REDUCTION_INNER_PRODUCT = 3     /* h = x m: <X, model> */
};

/* In and out of generalized_mttkrp(). Caller-owned, struct_size the
 * host's sizeof(); the in-fields are passed in (the plugin refuses a struct
 * shorter than TH_GENERALIZED_MTTKRP_IO_V1_4_SIZE with
 * TH_ERR_INVALID_ARGUMENT), `reduced` is passed out.
 *
 * For each nonzero i with index (i_0 .. i_{N-1}) and value x_i, the model's
 * value is
 *   m_i = sum_r w_r prod_k A_k(i_k, r)
 * over every mode k (the target mode included), with A_k the factors the
 * backend holds and w the weights (all ones when NULL). Then
 *   G(j, r)  = sum over nonzeros with i_mode = j of
 *              g(x_i, m_i) * prod_{k != mode} A_k(i_k, r)
 *   reduced  = sum over all nonzeros of h(x_i, m_i)
 * G replaces mode's MTTKRP result, as mttkrp() does (get_mttkrp_result()
 * and factor_update() read it); with TH_ELEMENTWISE_VALUE and no weights it
 * is exactly mttkrp(mode)'s. */
typedef struct th_generalized_mttkrp_io {
    uint32_t struct_size;
    uint32_t mode;          /* in: target mode, or TH_MODE_NONE (reduction only) */
    int32_t elementwise;    /* in: TH_ELEMENTWISE_* (g); unused for TH_MODE_NONE */
    int32_t reduction;      /* in: TH_REDUCTION_* (h) */
    double epsilon;         /* in: the floor of m in g's divisions (> 0 where used) */
    const double *weights;  /* in: [rank] w, borrowed for the call; NULL: all ones */
    double reduced;         /* out: the sum of h; 0 for TH_REDUCTION_NONE */
} th_generalized_mttkrp_io;

#define TH_GENERALIZED_MTTKRP_IO_V1_4_SIZE TH_FIELD_END(th_generalized_mttkrp_io, reduced)

/* The elementwise operations of factor_update() on the factor A = A_mode the
 * backend holds (I = dims[mode] rows, R = rank columns), with Phi the latest
 * (generalized) MTTKRP result of that mode. Appendable as above. */
enum {
    /* A(:, r) *= vector[r]. In: vector. (Moving weights into a factor.) */
    TH_FACTOR_SCALE_COLUMNS = 1,
    /* vector[r] <- sum_i |A(i, r)|, then A(:, r) /= vector[r] where
     * vector[r] > 0 (a zero column stays zero). Out: vector. */
    TH_FACTOR_NORMALIZE_1 = 2,
    /* CP-APR's multiplicative update. violation <- max_ij |min(A(i,j),
     * 1 - Phi(i,j))| (the KKT violation of A before the update); then, only
     * if violation >= tolerance, A <- A .* Phi and count <- 1 (else 0).
     * In: tolerance. Out: violation, count. */
    TH_FACTOR_MULTIPLICATIVE_UPDATE = 3,
    /* CP-APR's fix of inadmissible zeros: where Phi(i,j) > threshold and
     * A(i,j) < tolerance, A(i,j) += offset; count <- how many entries
     * changed. In: threshold, tolerance, offset. Out: count. (Chi and
     * Kolda's test, and Tensor Toolbox's, is Phi > 1: there the gradient
     * 1 - Phi is negative and a zero cannot stay; pyttb's is Phi > 0.) */
    TH_FACTOR_RAISE_INADMISSIBLE_ZEROS = 4
};

/* In and out of factor_update(). Caller-owned, struct_size the host's
 * sizeof(); the in-fields are passed in (the plugin refuses a struct
 * shorter than TH_FACTOR_UPDATE_IO_V1_4_SIZE with TH_ERR_INVALID_ARGUMENT),
 * violation and count are passed out, and vector is read or written as the
 * operation says. The caller sets the out-fields to 0 first. */
typedef struct th_factor_update_io {
    uint32_t struct_size;
    uint32_t mode;      /* in */
    int32_t operation;  /* in: TH_FACTOR_* */
    uint32_t reserved0; /* 0 */
    double *vector;     /* in or out: [rank], caller-owned, per operation (else unused) */
    double tolerance;   /* in: per operation */
    double offset;      /* in: per operation */
    double violation;   /* out: per operation */
    uint64_t count;     /* out: per operation */
    double threshold;   /* in: per operation */
} th_factor_update_io;

#define TH_FACTOR_UPDATE_IO_V1_4_SIZE TH_FIELD_END(th_factor_update_io, threshold)

/* --- ABI 1.5 --- */

/* In and out of row_least_squares(). Caller-owned, struct_size the host's
 * sizeof(); the in-fields are passed in (the plugin refuses a struct
 * shorter than TH_ROW_LEAST_SQUARES_IO_V1_5_SIZE with
 * TH_ERR_INVALID_ARGUMENT), the out-fields are passed out (the caller sets
 * them to 0 first).
 *
 * For each row j of A = A_mode (I = dims[mode] rows, R = rank columns), over
 * the nonzeros i whose index has i_mode = j, with values x_i and
 *   h_i = prod_{k != mode} A_k(i_k, :)   (an R-row, elementwise product)
 * the row becomes the minimiser of
 *   sum_i (x_i - <a, h_i>)^2 + ridge * ||a||^2
 * that is, with G_j = sum_i h_i h_i^T and b_j = sum_i x_i h_i:
 *   - nonneg 0: the solution of (G_j + ridge I) a = b_j by Cholesky; a row
 *     with fewer nonzeros than R at ridge 0 (G_j exactly singular, which
 *     rounding could hide from the test) is singular without factorising,
 *     and so is a row whose matrix breaks down under the test of
 *     TH_SOLVE_BREAKDOWN_FACTOR: left as it was and counted in
 *     singular_rows;
 *   - nonneg 1: the same objective under a >= 0, by `passes` sweeps of
 *     coordinate descent from the row as it was, r = 0 .. R-1 in order:
 *       d = G_j(r,r) + ridge;
 *       a_r <- max(0, a_r + (b_j(r) - ((G_j + ridge I) a)(r)) / d), or 0
 *       where d = 0;
 *     (singular_rows counts nonneg 0's breakdowns only: it stays 0 here);
 *   - a row with no nonzero becomes zero when ridge > 0 (the minimiser) and
 *     is left as it was when ridge = 0, with nonneg 0 or 1 (this rule comes
 *     before the coordinate descent's); counted in empty_rows either way.
 * This is the row-wise ALS of tensor completion (SPLATT's): the nonzeros are
 * the observed entries, the other entries unknown. Rows are independent,
 * so a backend may solve them in any order and in parallel; the products
 * h_i are of the factors as they were before the call (mode's own factor
 * does not enter them). Every other factor and every MTTKRP result are left
 * as they were. Out: the counts above, factor_norm_squared, the sum of
 * the squares of A's entries after the update (mode's part of the ridge
 * term), and residual_squared, the training error of the model after the
 * call: sum over the mode's nonzeros of (x_i - <a_j, h_i>)^2 with every row
 * as it is after the call (a_j as held, h_i of the other factors), computed
 * per row from its own system as x^T x - 2 a_j^T b_j + a_j^T G_j a_j (G_j
 * without the ridge; x the row's values), summed over the rows: an empty
 * row adds 0, a singular row its unchanged a_j's. It may differ from a
 * direct sum of squared residuals by cancellation (relative to sum x_i^2)
 * and, for a backend holding fp32 factors, by their rounding (and that of
 * h_i, which such a backend may form in fp32); it may come out slightly
 * negative for a model that fits exactly. After the last mode's call of a
 * sweep it is the sweep's training error, with no pass over the nonzeros
 * of its own. The backend computes in double precision where it
 * accumulates G_j and b_j. */
typedef struct th_row_least_squares_io {
    uint32_t struct_size;
    uint32_t mode;              /* in */
    double ridge;               /* in: >= 0 and finite */
    uint32_t nonneg;            /* in: 0 or 1 */
    uint32_t passes;            /* in: >= 1 where nonneg is 1; unused otherwise */
    uint64_t singular_rows;     /* out */
    uint64_t empty_rows;        /* out */
    double factor_norm_squared; /* out */
    double residual_squared;    /* out: sum over the mode's nonzeros of (x_i - <a_j, h_i>)^2
                                   with every row as it is after the call */
} th_row_least_squares_io;

#define TH_ROW_LEAST_SQUARES_IO_V1_5_SIZE \
    TH_FIELD_END(th_row_least_squares_io, residual_squared)

/* In and out of als_update_nonneg(). Caller-owned, struct_size the host's
 * sizeof(); the in-fields are passed in (the plugin refuses a struct
 * shorter than TH_NONNEG_UPDATE_IO_V1_5_SIZE with TH_ERR_INVALID_ARGUMENT),
 * `passes` is passed out (the caller sets it to 0 first).
 *
 * als_update()'s step for a factor constrained nonnegative (or, from 1.6,
 * regularised by l1): with M the latest (generalized) MTTKRP result of
 * mode, A the factor the backend holds (I rows, R columns) and V = v (the
 * Hadamard product of the other modes' Grams, symmetric), the A minimising
 *   1/2 ||X_(mode) - A K^T||^2 + ridge/2 ||A||^2 + l1 sum |A(i,r)|
 * (K the Khatri-Rao product of the other factors; ridge and l1 0 before
 * 1.6), under A >= 0 unless `unbounded`, row by row, by hierarchical
 * ALS (Cichocki and Phan; TensorLy's hals_nnls, whose sparsity_coefficient
 * is l1 and whose ridge_coefficient is ridge / 2) from the current model:
 *   1. A(:, r) *= scale[r] (the weights of the mode updated last, which
 *      belong to the model as much as the factors do; NULL: ones);
 *   2. passes over the columns, each row's in order r = 0 .. R-1 with the
 *      columns before r already updated in this pass, with
 *        d = V(r,r) + ridge,
 *        n = M(i,r) - sum_q A(i,q) V(q,r) + V(r,r) A(i,r):
 *        where d != 0:
 *          unbounded 0: A(i,r) <- max(0, n - l1) / d
 *          unbounded 1: A(i,r) <- sign(n) max(0, |n| - l1) / d
 *        (a column with d = 0 is left as it is; V's diagonal is >= 0,
 *        as a Hadamard product of Grams has it, and a caller passing
 *        another gets whatever the formula gives); a pass's change is
 *      the sum over every entry of (new - old)^2; stop after the pass whose
 *      change is at most tolerance times the first pass's, or after
 *      `sweeps` passes; `passes` gets the count. Rows are independent, so
 *      they may run in any order and in parallel; only the change sums
 *      couple them;
 *   3. then exactly as als_update(): lambda <- the column norms (TH_NORM_*),
 *      A <- A / lambda, and `out` filled (the Gram of the normalised A, and
 *      inner[r] = sum_i M(i,r) A(i,r)).
 * With unbounded 0 the result is nonnegative whatever the factor
 * held before (step 2's max), provided the first pass reaches every column
 * with d > 0. A plugin of 1.6 or later that cannot do a combination of
 * ridge, l1 and unbounded it is given refuses the call with
 * TH_ERR_UNSUPPORTED before changing anything; the host then updates the
 * mode itself. */
typedef struct th_nonneg_update_io {
    uint32_t struct_size;
    uint32_t mode;        /* in */
    const double *v;      /* in: [rank*rank] row-major, borrowed for the call */
    /* in: [rank] or NULL, borrowed for the call; not the same memory as
     * out->lambda, which the call writes */
    const double *scale;
    double tolerance;     /* in: >= 0 and finite */
    uint32_t sweeps;      /* in: >= 1 */
    int32_t norm;         /* in: TH_NORM_2 or TH_NORM_MAX */
    uint32_t passes;      /* out */
    uint32_t reserved0;   /* 0 */

    /* --- ABI 1.6 (in-fields; a host sets them to anything but their
     * defaults only for a plugin of 1.6 or later) --- */
    /* The ridge (l2) weight, >= 0 and finite; default 0. */
    double ridge;
    /* The l1 (lasso) weight, >= 0 and finite; default 0. */
    double l1;
    /* 0 (the default): the bound A >= 0 (TH_CONSTRAINT_NONNEG); 1: no
     * bound (TH_CONSTRAINT_NONE), for l1 on an unconstrained mode. Zero
     * is the bound, so a caller that zeroes the struct keeps 1.5's
     * meaning. */
    uint32_t unbounded;
    uint32_t reserved1; /* 0 */
} th_nonneg_update_io;

#define TH_NONNEG_UPDATE_IO_V1_5_SIZE TH_FIELD_END(th_nonneg_update_io, reserved0)
#define TH_NONNEG_UPDATE_IO_V1_6_SIZE TH_FIELD_END(th_nonneg_update_io, reserved1)

/* --- ABI 1.7 --- */

/* In and out of multiplicative_updates(). Caller-owned, struct_size the
 * host's sizeof(); the in-fields are passed in (the plugin refuses a struct
 * shorter than TH_MULTIPLICATIVE_UPDATES_IO_V1_7_SIZE with
 * TH_ERR_INVALID_ARGUMENT), the out-fields are passed out (the caller sets
 * them to 0 first).
 *
 * The call leaves the backend exactly as this loop would, with g the
 * io's elementwise function:
 *   for i = 0 .. max_iterations - 1:
 *       generalized_mttkrp(mode, elementwise, TH_REDUCTION_NONE, epsilon,
 *                          weights NULL)                  -> Phi
 *       factor_update(mode, TH_FACTOR_MULTIPLICATIVE_UPDATE, tolerance)
 *                                                         -> violation, count
 *       if violation < tolerance: stop
 * that is, CP-APR's inner iterations of one mode (Chi and Kolda's
 * multiplicative updates; pyttb's cp_apr, algorithm "mu"): mode's factor
 * after the last update applied, mode's MTTKRP result the last Phi
 * computed. Out: iterations, the Phi computed (1 .. max_iterations);
 * updates, those applied (iterations - 1 when the loop stopped on the
 * tolerance, else iterations); violation, the last one. Every row's Phi
 * depends on that row's own factor row and on the other factors, which
 * the loop does not change, so a backend may run each row's iterations
 * on its own with the row's products of the other factors formed once
 * (kept in cache), as long as the loop's result and stopping rule are
 * kept: the stop is decided by the violation over every row at once.
 * Within the backend's precision, and bit for bit on a backend whose
 * loop sums each row's nonzeros in the same order. */
typedef struct th_multiplicative_updates_io {
    uint32_t struct_size;
    uint32_t mode;           /* in */
    int32_t elementwise;     /* in: TH_ELEMENTWISE_POISSON_RATIO (the only one so far) */
    uint32_t max_iterations; /* in: >= 1 */
    double epsilon;          /* in: > 0, as generalized_mttkrp()'s */
    double tolerance;        /* in: as TH_FACTOR_MULTIPLICATIVE_UPDATE's; not NaN */
    uint32_t iterations;     /* out */
    uint32_t updates;        /* out */
    double violation;        /* out */
} th_multiplicative_updates_io;

#define TH_MULTIPLICATIVE_UPDATES_IO_V1_7_SIZE \
    TH_FIELD_END(th_multiplicative_updates_io, violation)

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

    /* Optional (NULL if unsupported; set TH_CAP_ALS_UPDATE exactly when not).
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

    /* Optional (NULL if unsupported; set TH_CAP_ALS_SWEEP exactly when not).
     * One whole CP-ALS iteration on backend-held data, so a backend with
     * a long round trip (a GPU) needs one per iteration instead of two per
     * mode. For mode n = 0 .. nmodes-1 in order:
     *   M_n  <- mttkrp(n), as mttkrp() (its result replaces mode n's)
     *   V    <- Hadamard product of the Grams of every mode but n
     *   A_n  <- M_n V^-1, V^-1 from any elimination whose pivots are the
     *           Cholesky pivots of V (Cholesky, or Gauss-Jordan without pivoting)
     *   then as als_update(n, V^-1, io->norm): normalise, lambda, Gram, inner
     * The solve breaks down when a pivot is not greater than
     * max_i V(i,i) * rank * DBL_EPSILON * TH_SOLVE_BREAKDOWN_FACTOR (the
     * host's own test). Then the
     * backend stops: io->modes_done = n, modes n.. are left as they were,
     * and the host finishes the iteration itself from mode n (mttkrp(), its
     * pseudo-inverse, als_update()). io->modes_done = nmodes on a full sweep.
     * get_mode_info() afterwards reports each swept mode's MTTKRP time, and
     * get_runtime_info() the whole sweep's (last_sweep_seconds, ABI 1.2).
     * A backend that sets this must also implement als_update().
     * From 1.6 the io's constraints, l1, ridge, scale and hals_* fields
     * change each mode's update (with their defaults, nothing changes):
     *   - a mode with TH_CONSTRAINT_NONE and l1 0: A_n <- M_n (V + ridge I)^-1
     *     as above, the breakdown test applied to V + ridge I;
     *   - any other mode (TH_CONSTRAINT_NONNEG, or l1 > 0): exactly
     *     als_update_nonneg()'s step with v = V, the io's ridge, that mode's
     *     l1, unbounded = (its constraint is TH_CONSTRAINT_NONE),
     *     hals_sweeps (from 1.9, hals_mode_sweeps[n] where that is not
     *     NULL), hals_tolerance and io->norm, and
     *     scale = the lambda of the mode updated before it in this sweep
     *     (for the first mode, io->scale); no breakdown test.
     * A plugin of 1.6 or later that cannot do what the fields ask (a
     * combination, or any of them on some configuration, such as a group
     * of devices) returns TH_ERR_UNSUPPORTED before changing anything, and
     * the host runs the iteration per mode; a struct shorter than
     * TH_ALS_SWEEP_IO_V1_6_SIZE means the defaults. Bad values (a
     * constraint it does not know, a negative or non-finite weight,
     * hals_sweeps 0 where it is read, or from 1.9 an entry 0 of
     * hals_mode_sweeps where it is read) -> TH_ERR_INVALID_ARGUMENT. */
    th_status (*als_sweep)(th_instance *instance, th_als_sweep_io *io, char *err);

    /* --- ABI 1.3 ------------------------------------------------------- */

    /* Optional (NULL if unsupported; no capability flag). Draws the initial
     * factors in the backend instead of receiving them. After load_tensor(),
     * sets every mode's factor so that the backend's state is exactly what
     * set_factor(m, F_m) would leave, where F_m(i, r) =
     * th_initial_factor_value(io->seed, m, i, r) for i < dims[m], r < rank
     * (see "Initial factors" above; an fp32 backend so holds those values
     * rounded to float, as its set_factor would), and writes into
     * io->grams[m] the rank x rank row-major Gram A_m^T A_m of the factor it
     * now holds, for every mode m (within the backend's precision). MTTKRP
     * results are left as they were. The host calls it instead of drawing
     * the factors and calling set_factor() when a run has no explicit
     * initial factors. Errors: no tensor loaded -> TH_ERR_BAD_STATE;
     * io->struct_size below TH_INIT_FACTORS_IO_V1_3_SIZE, io->nmodes not the
     * loaded order, a NULL pointer -> TH_ERR_INVALID_ARGUMENT. */
    th_status (*init_factors)(th_instance *instance, th_init_factors_io *io, char *err);

    /* --- ABI 1.4 ------------------------------------------------------- */

    /* Optional (NULL if unsupported; no capability flag). The generalized
     * MTTKRP of th_generalized_mttkrp_io on backend-held data: mode's result
     * (unless io->mode is TH_MODE_NONE) and io->reduced. A backend with
     * several schemes applies them here as to mttkrp(), and reports the time
     * through get_mode_info() as for mttkrp(). Unlike mttkrp(), it may
     * return before its result is complete when it returns no reduction
     * (TH_REDUCTION_NONE): the backend's later calls see the complete
     * result, and a fault while computing it is reported by the next call
     * that waits for the device. Errors: no tensor loaded ->
     * TH_ERR_BAD_STATE; a short io, a mode out of range, an elementwise
     * function other than VALUE with a non-positive epsilon where it
     * divides -> TH_ERR_INVALID_ARGUMENT; a function or reduction the
     * backend does not know -> TH_ERR_UNSUPPORTED. The host runs a model
     * other than least squares only on a backend that has both this and
     * factor_update(). */
    th_status (*generalized_mttkrp)(th_instance *instance, th_generalized_mttkrp_io *io,
                                    char *err);

    /* Optional (NULL if unsupported; no capability flag). One elementwise
     * operation on mode's backend-held factor (TH_FACTOR_*; see
     * th_factor_update_io). Operations that read Phi need a result of that
     * mode: before the first (generalized) MTTKRP of the mode ->
     * TH_ERR_BAD_STATE. Errors otherwise as generalized_mttkrp(). */
    th_status (*factor_update)(th_instance *instance, th_factor_update_io *io, char *err);

    /* --- ABI 1.5 ------------------------------------------------------- */

    /* Optional (NULL if unsupported; no capability flag). Replaces each row
     * of mode's backend-held factor by the solution of its own regularised
     * least-squares problem over its nonzeros (th_row_least_squares_io), at
     * every rank the backend loads. The host runs tensor completion only on
     * a backend that has this and generalized_mttkrp(). Errors: no tensor
     * loaded -> TH_ERR_BAD_STATE; a short io, a mode out of range, a
     * negative or non-finite ridge, nonneg other than 0 or 1, passes 0 with
     * nonneg 1 -> TH_ERR_INVALID_ARGUMENT; out of memory for its workspace
     * -> TH_ERR_OUT_OF_MEMORY. A backend that polls is_cancelled() may end
     * the call early with TH_ERR_CANCELLED: each row then holds its
     * solution or its value from before the call (never a mix), and the
     * out-fields are not written. */
    th_status (*row_least_squares)(th_instance *instance, th_row_least_squares_io *io,
                                   char *err);

    /* Optional (NULL if unsupported; no capability flag). The nonnegative
     * twin of als_update() (th_nonneg_update_io): mode's factor updated by
     * hierarchical ALS under A >= 0 from the latest MTTKRP result, then
     * normalised with `out` filled as als_update() does. With it (and
     * als_update()) the host runs nonnegative CP with every update in the
     * backend. Errors: no tensor loaded, or no MTTKRP result of the mode
     * yet -> TH_ERR_BAD_STATE; a short io, a mode out of range, a NULL v or
     * out, sweeps 0, a negative or non-finite tolerance, ridge or l1, a
     * norm other than TH_NORM_2 or TH_NORM_MAX, unbounded other than 0 or
     * 1 -> TH_ERR_INVALID_ARGUMENT. From 1.6 it is also the l1-regularised
     * update of an unconstrained mode (unbounded 1), and takes a ridge
     * term. */
    th_status (*als_update_nonneg)(th_instance *instance, th_nonneg_update_io *io,
                                   th_als_output *out, char *err);

    /* --- ABI 1.7 ------------------------------------------------------- */

    /* Optional (NULL if unsupported; no capability flag). CP-APR's inner
     * iterations of one mode in one call (th_multiplicative_updates_io):
     * the results of the loop of generalized_mttkrp() and factor_update()
     * it stands for. A backend that has it must have those two. The host
     * calls it for each mode of a CP-APR outer iteration where the plugin
     * has it, and runs the loop itself where not. Errors: no tensor loaded
     * -> TH_ERR_BAD_STATE; a short io, a mode out of range, max_iterations
     * 0, epsilon not > 0, a NaN tolerance -> TH_ERR_INVALID_ARGUMENT; an
     * elementwise function other than TH_ELEMENTWISE_POISSON_RATIO, or
     * one the backend does not know -> TH_ERR_UNSUPPORTED; out of memory
     * for its workspace -> TH_ERR_OUT_OF_MEMORY. A backend that polls
     * is_cancelled() may end the call early with TH_ERR_CANCELLED: the
     * factor then holds its value after some whole number of the loop's
     * updates (never a mix of rows), mode's MTTKRP result is not ready,
     * and the out-fields are not written. */
    th_status (*multiplicative_updates)(th_instance *instance,
                                        th_multiplicative_updates_io *io, char *err);
} th_plugin_entry;

/* Passed in (plugin -> host). The 1.0 entry: the host refuses a shorter
 * struct. The 1.1 entry: als_sweep is present only in an entry this long.
 * 1.2 did not grow the entry. The 1.3 entry: init_factors is present only
 * in an entry this long. The 1.4 entry: generalized_mttkrp and
 * factor_update are present only in an entry this long. The 1.5 entry:
 * row_least_squares and als_update_nonneg are present only in an entry
 * this long. 1.6 did not grow the entry. The 1.7 entry:
 * multiplicative_updates is present only in an entry this long. */
#define TH_PLUGIN_ENTRY_V1_0_SIZE TH_FIELD_END(th_plugin_entry, get_mode_info)
#define TH_PLUGIN_ENTRY_V1_1_SIZE TH_FIELD_END(th_plugin_entry, als_sweep)
#define TH_PLUGIN_ENTRY_V1_3_SIZE TH_FIELD_END(th_plugin_entry, init_factors)
#define TH_PLUGIN_ENTRY_V1_4_SIZE TH_FIELD_END(th_plugin_entry, factor_update)
#define TH_PLUGIN_ENTRY_V1_5_SIZE TH_FIELD_END(th_plugin_entry, als_update_nonneg)
#define TH_PLUGIN_ENTRY_V1_7_SIZE TH_FIELD_END(th_plugin_entry, multiplicative_updates)

/* Convenience for plugins: fill struct_size and the ABI version. */
#define TH_PLUGIN_ENTRY_HEADER                           \
    .struct_size = (uint32_t)sizeof(th_plugin_entry),    \
    .abi_version = {TH_ABI_VERSION_MAJOR, TH_ABI_VERSION_MINOR}

#ifdef __cplusplus
}
#endif

#endif /* TENSORHOST_PLUGIN_H */
