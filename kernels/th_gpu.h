/*
 * th_kernels: sparse MTTKRP on one CUDA GPU with mode-specific tensor copies
 * (Wijeratne, Kannan, Prasanna, "Accelerating Sparse MTTKRP for Small Tensor
 * Decomposition on GPU"). A small C API of its own, deliberately free of the
 * plugin ABI's types, so the kernels can be tested and benchmarked without a
 * plugin and the plugins stay thin glue (plugins/gpu-common).
 *
 * Every function that can fail writes one NUL-terminated message into
 * `err` (at least `errlen` bytes) and returns a negative thg_status.
 * All calls on one context must come from one thread at a time.
 */
#ifndef TH_GPU_H
#define TH_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define THG_MAX_MODES 16u
#define THG_MAX_RANK 128u
/* Largest P: P groups of rank lanes (2 to 32 lanes each) make one thread
 * block of at most 1024 threads; larger requests are capped per launch. */
#define THG_MAX_P 512u
/* CUB's device-wide algorithms take int item counts. */
#define THG_MAX_NNZ 2147483647u
#define TH_GPU_NOTE_SIZE 96

typedef enum thg_status {
    THG_OK = 0,
    THG_ERR_INVALID = -1,
    THG_ERR_UNSUPPORTED = -2,
    THG_ERR_OUT_OF_MEMORY = -3,
    THG_ERR_NO_DEVICE = -4,
    THG_ERR_DEVICE = -5,
    THG_ERR_STATE = -6
} thg_status;

/* How each mode's copy is laid out and computed. */
typedef enum thg_policy {
    THG_POLICY_ADAPTIVE = 0, /* scheme 1 when I_d >= kappa, else scheme 2 */
    THG_POLICY_SCHEME1 = 1,  /* output rows dealt to partitions, no atomics */
    THG_POLICY_SCHEME2 = 2   /* equal nonzero chunks, global atomics */
} thg_policy;

/* How THG_POLICY_ADAPTIVE picks a mode's scheme. */
typedef enum thg_rule {
    /* Scheme 1 iff I_d >= kappa AND dealing the rows leaves every partition
     * within 1.25 x mean + 256 nonzeros (skewed modes go to scheme 2). */
    THG_RULE_BALANCED = 0,
    /* The paper's literal rule: scheme 1 iff I_d >= kappa. */
    THG_RULE_PAPER = 1
} thg_rule;

typedef struct thg_config {
    int device;        /* CUDA ordinal */
    uint32_t kappa;    /* partitions = thread blocks per MTTKRP; 0: the SM count */
    /* Nonzeros in flight per block (groups of rank lanes); 0: as many as a
     * 1024-thread block holds (32 for 32 lanes, 128 for 8). */
    uint32_t P;
    thg_policy policy;
    thg_rule rule;     /* THG_POLICY_ADAPTIVE only */
} thg_config;

typedef struct thg_context thg_context;

/* Succeeds when `device` names a usable CUDA device; THG_ERR_NO_DEVICE with
 * the runtime's reason otherwise (no device, no or too old a driver). */
thg_status thg_probe_device(int device, char *err, size_t errlen);
/* The number of CUDA devices visible (THG_ERR_NO_DEVICE as thg_probe_device). */
thg_status thg_device_count(int *count, char *err, size_t errlen);

thg_status thg_create(const thg_config *config, thg_context **out, char *err, size_t errlen);

/* Frees every device allocation of the context. Accepts NULL. */
void thg_destroy(thg_context *ctx);
/* The CUDA ordinal the context runs on. */
int thg_get_device(const thg_context *ctx);

/* The loaded tensor, its factors and results freed (once the context's
 * streams are idle); the context stays, as created. */
void thg_unload(thg_context *ctx);

/* Uploads the COO tensor once and builds one copy per mode on the device;
 * allocates factors and results. Replaces a tensor loaded before. Before
 * allocating, checks that the copies, factors, results and the build
 * workspace fit in free device memory. */
thg_status thg_load(thg_context *ctx, uint32_t nmodes, uint64_t nnz, const uint32_t *dims,
                    const uint32_t *const *indices, const double *values, uint32_t rank,
                    char *err, size_t errlen);

/* The terms of a load's device memory that do not depend on how its
 * nonzeros are shared out over devices (plugins/gpu-common/memory_plan.h):
 * the fixed workspace of one device, and the build's staging per nonzero
 * of a device's share and per row of the longest mode (rounded up, so a
 * plan for one device asks at least what thg_load checks). */
typedef struct thg_memory_terms {
    uint64_t fixed_bytes;
    uint64_t build_bytes_per_nonzero;
    uint64_t build_bytes_per_row;
    uint64_t free_bytes; /* free on the context's device now */
    uint32_t kappa;      /* partitions of each mode's copy */
} thg_memory_terms;
thg_status thg_get_memory_terms(thg_context *ctx, uint32_t nmodes, const uint32_t *dims,
                                uint32_t rank, thg_memory_terms *out, char *err,
                                size_t errlen);

/* One mode's input to thg_load_shares: the nonzeros that mode's copy is
 * built from (a communicator rank's share of that mode, in any order),
 * as COO arrays. */
typedef struct thg_mode_input {
    uint64_t nnz;                   /* 1 to THG_MAX_NNZ */
    const uint32_t *const *indices; /* [nmodes] arrays of [nnz] */
    const double *values;           /* [nnz] */
    /* The rows [result_begin, result_end) of the mode's MTTKRP result held
     * on the device: every row these nonzeros touch (0 and dims[mode]: the
     * whole result). */
    uint64_t result_begin, result_end;
} thg_mode_input;

/* thg_load with each mode's copy built from its own nonzeros: inputs[d]
 * for mode d (a rank of a multi-device run holds only its share of each
 * copy). Consecutive modes given the same arrays share one upload, so
 * thg_load is this with every input the whole tensor. The memory check
 * counts each copy at its own size. */
thg_status thg_load_shares(thg_context *ctx, uint32_t nmodes, const uint32_t *dims,
                           const thg_mode_input *inputs, uint32_t rank, char *err,
                           size_t errlen);

/* Row-major dims[mode] x rank doubles, converted to/from fp32 on the way. */
thg_status thg_set_factor(thg_context *ctx, uint32_t mode, const double *data, char *err,
                          size_t errlen);
thg_status thg_get_factor(thg_context *ctx, uint32_t mode, double *data, char *err,
                          size_t errlen);
/* Every factor <- the counter-based initial values of `seed`
 * (th_initial_factor_value in <tensorhost/plugin_sdk.h>) rounded to fp32,
 * exactly what thg_set_factor of the host-drawn fp64 values leaves; and
 * grams[m] (rank x rank doubles each) <- the Gram of factor m as held. */
thg_status thg_init_factors(thg_context *ctx, uint64_t seed, double *const *grams, char *err,
                            size_t errlen);
/* Returns when the MTTKRP's result is complete (it waits for the kernel's
 * stop event), so a fault of the kernel itself surfaces here. */
thg_status thg_mttkrp(thg_context *ctx, uint32_t mode, char *err, size_t errlen);
thg_status thg_get_result(thg_context *ctx, uint32_t mode, double *data, char *err,
                          size_t errlen);

/* A_mode <- M_mode W; lambda = column norms (max-norm floored at 1 when
 * use_max_norm), A_mode /= lambda; gram = A^T A; inner[r] = sum_i M(i,r) A(i,r).
 * Only W, lambda, gram and inner cross the bus. */
thg_status thg_als_update(thg_context *ctx, uint32_t mode, const double *w, int use_max_norm,
                          double *lambda, double *gram, double *inner, char *err,
                          size_t errlen);

/* thg_als_update's step for a factor constrained nonnegative (the plugin
 * ABI's als_update_nonneg, 1.5; its spec is plugin.h's): with M the mode's
 * latest MTTKRP result, A its factor and V = v (rank x rank, row-major,
 * symmetric): A(:,r) *= scale[r] (NULL: ones); then up to `sweeps` passes
 * of hierarchical ALS, every row's columns r = 0 .. rank-1 in order where
 * V(r,r) > 0: A(i,r) <- max(0, (M(i,r) - sum_q A(i,q) V(q,r) + V(r,r)
 * A(i,r)) / V(r,r)), stopping after the pass whose summed squared change
 * is at most tolerance times the first pass's (*passes: the passes made);
 * then exactly thg_als_update's normalisation, lambda, gram and inner.
 * Dot products and change sums in double, A stored in fp32 after each
 * entry's update. The stopping test runs on the device: one
 * synchronisation (one more per 8 passes beyond the first 8); only V,
 * scale, lambda, gram, inner and the count cross the bus. The first call
 * after a load allocates a small workspace (kept until the tensor goes).
 * Errors: THG_ERR_STATE before a load or before an MTTKRP of the mode;
 * THG_ERR_INVALID for a mode out of range, NULL v or outputs, sweeps 0, a
 * negative or non-finite tolerance; THG_ERR_UNSUPPORTED on a rank of a
 * group. passes may be NULL. kernels/DESIGN.md, "The nonnegative update". */
thg_status thg_als_update_nonneg(thg_context *ctx, uint32_t mode, const double *v,
                                 const double *scale, uint32_t sweeps, double tolerance,
                                 double ridge, double l1, int nonneg, int use_max_norm,
                                 double *lambda, double *gram, double *inner, uint32_t *passes,
                                 char *err, size_t errlen);

/* One CP-ALS iteration over every mode on the device (the ABI's
 * als_sweep): per mode the MTTKRP, W = (Hadamard of the other Grams)^-1 by
 * Gauss-Jordan in double (its pivots are the Cholesky pivots), and the
 * update of thg_als_update. `grams` holds nmodes pointers to rank x rank
 * doubles: in, the current factors' Grams; out, the updated modes' Grams.
 * *modes_done < nmodes when the solve of that mode broke down (pivot <=
 * max diagonal * rank * DBL_EPSILON * TH_SOLVE_BREAKDOWN_FACTOR); that mode and the later ones
 * are left unchanged. lambda and inner are
 * those of mode *modes_done - 1. One synchronisation. */
/* The regularised and constrained sweep (the ABI's th_als_sweep_io 1.6
 * fields; plugin.h's als_sweep() says how each mode is updated with
 * them). Values checked by the caller. */
typedef struct thg_sweep_reg {
    const int32_t *constraints; /* [nmodes] TH_CONSTRAINT_*, or NULL: none */
    const double *l1;           /* [nmodes], or NULL: 0 */
    double ridge;
    const double *scale;        /* [rank] the weights at the start, or NULL: ones */
    double hals_tolerance;
    uint32_t hals_sweeps;
    /* [nmodes] each mode's passes instead of hals_sweeps (ABI 1.9), or
     * NULL. */
    const uint32_t *hals_mode_sweeps;
} thg_sweep_reg;

/* How `reg` (nullable) updates `mode`: 0 the solve (of V + ridge I),
 * 1 coordinate descent with A >= 0 (TH_CONSTRAINT_NONNEG), 2 coordinate
 * descent without the bound (l1 > 0 on an unconstrained mode). */
uint32_t thg_sweep_reg_coordinate(const thg_sweep_reg *reg, uint32_t mode);

/* Whether `reg` (nullable) changes anything: some mode updated by
 * coordinate descent, or a ridge. */
int thg_sweep_reg_active(const thg_sweep_reg *reg, uint32_t nmodes);

/* `reg` nullable: the plain sweep. With it, a mode constrained or with
 * l1 > 0 is updated by the nonnegative update's passes inside the sweep,
 * the others solve against V + ridge I; still one synchronisation. */
thg_status thg_als_sweep(thg_context *ctx, double *const *grams, int use_max_norm,
                         const thg_sweep_reg *reg, double *lambda, double *inner,
                         uint32_t *modes_done, char *err, size_t errlen);

/* The generalized MTTKRP (the plugin ABI's generalized_mttkrp, 1.4; the
 * values are the ABI's). For each nonzero x_i at (i_0 .. i_{N-1}) the model
 * value m_i = sum_r w_r prod_k A_k(i_k, r) over every mode (the target's
 * too), w the weights (all ones when NULL); then
 *   G(j, r) = sum over nonzeros with i_mode = j of g(x_i, m_i) prod_{k != mode} A_k(i_k, r)
 * replaces mode's MTTKRP result (as thg_mttkrp; thg_get_result and
 * thg_factor_update read it), and *reduced = sum over every nonzero of
 * h(x_i, m_i), summed in double. mode THG_MODE_NONE: the reduction alone,
 * no result changed (elementwise unused). THG_ELEMENTWISE_VALUE with
 * THG_REDUCTION_NONE is thg_mttkrp itself, bit for bit (weights unused). */
#define THG_MODE_NONE 0xffffffffu
typedef enum thg_elementwise {
    THG_ELEMENTWISE_VALUE = 0,         /* g = x */
    THG_ELEMENTWISE_POISSON_RATIO = 1, /* g = x / max(m, epsilon) */
    THG_ELEMENTWISE_RESIDUAL = 2       /* g = m - x */
} thg_elementwise;
typedef enum thg_reduction {
    THG_REDUCTION_NONE = 0,
    THG_REDUCTION_POISSON_LOG_LIKELIHOOD = 1, /* x log(m); 0 where x == 0 */
    THG_REDUCTION_SQUARED_RESIDUAL = 2,       /* (m - x)^2 */
    THG_REDUCTION_INNER_PRODUCT = 3           /* x m */
} thg_reduction;
/* Returns when the result and the reduction are complete (one
 * synchronisation); only the weights (rank values) go up and one scalar
 * comes back. thg_get_mode_stats reports its time as thg_mttkrp's.
 * Unknown elementwise or reduction: THG_ERR_UNSUPPORTED; POISSON_RATIO
 * with epsilon <= 0: THG_ERR_INVALID. */
thg_status thg_generalized_mttkrp(thg_context *ctx, uint32_t mode, int elementwise,
                                  int reduction, double epsilon, const double *weights,
                                  double *reduced, char *err, size_t errlen);

/* Elementwise operations on factor A = A_mode (the ABI's factor_update,
 * 1.4; the values are the ABI's), Phi the mode's latest (generalized)
 * MTTKRP result on the device. After any of them the factor is held
 * normalised by nothing (its column scale is 1). */
typedef enum thg_factor_op {
    THG_FACTOR_SCALE_COLUMNS = 1,          /* A(:, r) *= vector[r] */
    THG_FACTOR_NORMALIZE_1 = 2,            /* vector[r] <- sum_i |A(i, r)|; A(:, r) /= it where > 0 */
    THG_FACTOR_MULTIPLICATIVE_UPDATE = 3,  /* violation <- max |min(A, 1 - Phi)|; if >= tolerance,
                                              A .*= Phi and count <- 1, else count <- 0 */
    THG_FACTOR_RAISE_INADMISSIBLE_ZEROS = 4 /* where Phi > threshold and A < tolerance: A += offset;
                                               count <- entries changed */
} thg_factor_op;
/* One synchronisation; `vector` (rank doubles) read or written per
 * operation. Operations that read Phi need an MTTKRP result of the mode
 * (THG_ERR_STATE before); an unknown operation: THG_ERR_UNSUPPORTED. */
thg_status thg_factor_update(thg_context *ctx, uint32_t mode, int operation, double *vector,
                             double threshold, double tolerance, double offset, double *violation,
                             uint64_t *count, char *err, size_t errlen);

/* Row-wise least squares (the plugin ABI's row_least_squares, 1.5; the
 * row-wise ALS of tensor completion). For each row j of A = A_mode, over
 * the nonzeros i with i_mode = j (values x_i), h_i = the elementwise
 * product of the other factors' rows A_k(i_k, :):
 *   G_j = sum h_i h_i^T, b_j = sum x_i h_i   (h_i the product of the fp32
 *   entries in double; G_j and b_j summed in double)
 * nonneg 0: the row <- the solution of (G_j + ridge I) a = b_j; a row whose
 * factorisation breaks down (pivot <= max diagonal * rank * DBL_EPSILON *
 * TH_SOLVE_BREAKDOWN_FACTOR) is left as it was and counted in
 * *singular_rows. nonneg 1: `passes` sweeps of coordinate descent from the
 * row as it was, r = 0 .. rank-1 in order: d = G_j(r,r) + ridge,
 * a_r <- max(0, a_r + (b_j(r) - ((G_j + ridge I) a)(r)) / d), or 0 where
 * d = 0. A row without nonzeros becomes zero when ridge > 0 and is left as
 * it was when ridge == 0; *empty_rows counts them. *factor_norm_squared =
 * the sum of squares of the updated factor (as held, fp32);
 * *residual_squared = the sum over the mode's nonzeros of (x_i - <a, h_i>)^2
 * with the factors as held after the call, each row's from its own system
 * as x^T x - 2 a^T b + a^T G a (G without the ridge; a as held, fp32),
 * empty rows adding 0. The other
 * factors and every MTTKRP result stay as they were; the factor is held as
 * its true values afterwards (column scale 1). The first call after a load
 * builds every mode's plan (its rows by length, the longest split into
 * chunks) and allocates the workspace, checked against free device memory
 * first (THG_ERR_OUT_OF_MEMORY); both stay until the tensor goes. One
 * synchronisation; only the counts and the norm cross the bus.
 * Errors: THG_ERR_STATE before a load; THG_ERR_INVALID for a mode out of
 * range, a negative or non-finite ridge, nonneg other than 0 or 1, passes
 * 0 with nonneg 1; THG_ERR_UNSUPPORTED on a rank of a group. Null outputs
 * are allowed. kernels/DESIGN.md, "The row solve". */
thg_status thg_row_least_squares(thg_context *ctx, uint32_t mode, double ridge, int nonneg,
                                 uint32_t passes, uint64_t *singular_rows, uint64_t *empty_rows,
                                 double *factor_norm_squared, double *residual_squared, char *err,
                                 size_t errlen);

typedef struct thg_info {
    char device_name[128]; /* "NVIDIA H100 80GB HBM3 (device 0)" */
    int device;            /* its CUDA ordinal */
    uint32_t kappa;
    uint32_t P;
    uint32_t nmodes; /* 0 before a tensor is loaded */
    uint64_t tensor_bytes;
    uint64_t factor_bytes;
    uint64_t workspace_bytes;
    double build_seconds;  /* device time to build every copy (CUDA events), upload excluded */
    double upload_seconds; /* host fp32 conversion + upload + index check (wall) */
    uint32_t lanes;        /* rank lanes per nonzero group of the loaded rank */
    uint32_t groups;       /* effective P (groups per block) of the loaded rank */
    thg_rule rule;
    char graphs[TH_GPU_NOTE_SIZE]; /* "on", or "off (why)": CUDA graphs per mode */
    /* Device time of the latest thg_als_sweep (CUDA events around its
     * graph and the results' copy); < 0 before the first. */
    double last_sweep_seconds;
} thg_info;

void thg_get_info(const thg_context *ctx, thg_info *info);

typedef struct thg_mode_stats {
    int scheme;          /* 1 or 2 */
    char reason[96];     /* why this scheme, e.g. "I_d=24 < kappa=132" */
    uint32_t partitions; /* kappa */
    /* CUDA events around thg_mttkrp; after a sweep, the kernel's span on
     * the GPU's global timer (first block's start to last block's end: no
     * event records inside the sweep's graph, kernels/sweep.cu).
     * Negative before the first MTTKRP. */
    double last_mttkrp_seconds;
} thg_mode_stats;

/* The mode's scheme, why, and its latest MTTKRP time (thg_mttkrp has
 * already waited for that MTTKRP's end). */
thg_status thg_get_mode_stats(thg_context *ctx, uint32_t mode, thg_mode_stats *stats,
                              char *err, size_t errlen);

/* A run of several processes (mpirun, srun), one GPU each, every process
 * holding a share of the tensor's nonzeros and the whole factors (where
 * the host dealt each mode's nonzeros instead, the processes' GPUs form a
 * group across them: thg_group_create_across, below): each
 * MTTKRP of a context attached to the processes' communicator is its
 * share's, summed over the processes on the GPUs (NCCL's all-reduce, in
 * place, on the context's stream; inside the sweep's graph too), so that
 * every process then makes the same update from the whole tensor's
 * result. Every result row is then read as it is (no row counts as
 * absent: a row empty in this share may not be in another's), so each
 * result is zeroed before its MTTKRP. Setting up is collective: every
 * process opens its own (NCCL loaded as for several devices, comm.cuh),
 * rank 0 makes the unique id, which the caller hands to every process,
 * and every process joins with it. */
typedef struct thg_processes thg_processes;
#define THG_PROCESSES_ID_BYTES 128u /* NCCL's unique id */

/* NCCL loaded for `device`; THG_ERR_UNSUPPORTED (saying why) without it. */
thg_status thg_processes_open(int device, thg_processes **out, char *err, size_t errlen);
/* Rank 0's: the id every process joins with. */
thg_status thg_processes_unique_id(thg_processes *processes, void *id, char *err,
                                   size_t errlen);
/* ncclCommInitRank: every process at once, with rank 0's id. */
thg_status thg_processes_join(thg_processes *processes, uint32_t rank, uint32_t count,
                              const void *id, char *err, size_t errlen);
/* After every context attached to it is destroyed. Accepts NULL. */
void thg_processes_destroy(thg_processes *processes);
/* "NCCL 2.28.9 (bundled) across 2 processes, one GPU each"; "" before
 * the join. */
const char *thg_processes_describe(const thg_processes *processes);
/* Before the context's first load: its MTTKRPs are summed over the
 * processes from then on (NULL: its own again). Borrowed until the
 * context is destroyed. */
thg_status thg_attach_processes(thg_context *ctx, thg_processes *processes, char *err,
                                size_t errlen);

/* A run over several devices: G communicator ranks (2 to 64), rank q a
 * context on devices[q] holding its share of every mode's copy, and the
 * collectives between them (kernels/comm.cuh: NCCL between distinct
 * devices, device copies between "virtual" ranks on one device). Each rank
 * is loaded with thg_load_shares (its shares, the result rows they touch),
 * then thg_group_set_layout says which output rows each rank owns; the
 * calls below then act on the whole tensor, as the single-context calls
 * of the same names do (kernels/group.cu says how). One thread at a time. */
typedef struct thg_group thg_group;
#define THG_MAX_GROUP_RANKS 64u

thg_status thg_group_create(const thg_config *config, const int *devices, uint32_t G,
                            thg_group **out, char *err, size_t errlen);
/* A group across a run's processes, one rank a process: this process's
 * rank (thg_processes' own) is `ctx`, adopted with no tensor loaded and
 * no sums attached (thg_attach_processes), on the communicator the
 * processes joined; the other ranks are the other processes'. Collective:
 * every process makes its own at once, and then makes every call below
 * as the others do (each drives its rank's part of every step; the
 * layout, the same on every process, names every rank's rows). The
 * processes outlive the group; the context, too, without its tensor. */
thg_status thg_group_create_across(thg_context *ctx, thg_processes *processes,
                                   thg_group **out, char *err, size_t errlen);
/* Frees every rank's context (a group across processes: the adopted
 * context's tensor alone) and the collectives. Accepts NULL. */
void thg_group_destroy(thg_group *group);
/* Every rank, this process's or not. */
uint32_t thg_group_size(const thg_group *group);
/* The ranks this process drives: [*first, *first + return). */
uint32_t thg_group_local_ranks(const thg_group *group, uint32_t *first);
/* Rank q's context, for thg_load_shares and thg_get_info; NULL for
 * another process's rank. */
thg_context *thg_group_rank(thg_group *group, uint32_t rank);
/* The collectives' transport: "NCCL 2.28.3, 2 devices, direct exchange
 * (device API)", "4 ranks on device 0 (device copies)". */
const char *thg_group_describe(const thg_group *group);
/* "on": thg_group_als_sweep runs as one CUDA graph a rank, captured on
 * first use; or "off (why)": as stream launches. */
const char *thg_group_graphs(const thg_group *group);

/* One mode's ownership over the ranks. */
#define THG_NO_ROW 0xffffffffu
typedef struct thg_group_mode {
    /* Rank q owns output rows [own[q], own[q + 1]); own[0] = 0,
     * own[G] = dims[mode], non-decreasing (G + 1 entries used). */
    uint64_t own[THG_MAX_GROUP_RANKS + 1];
    /* Rank q's share's first and last row when split with another rank's
     * share (its MTTKRP gives a partial sum of it), else THG_NO_ROW; a share
     * within one row names it once. */
    uint32_t split_rows[2 * THG_MAX_GROUP_RANKS];
} thg_group_mode;

/* Before the ranks load another tensor: what thg_group_set_layout made
 * goes, the factors' registration with the collectives first (their
 * memory is freed by the load). Accepts NULL. */
void thg_group_unload(thg_group *group);

/* After every rank's thg_load_shares: modes[nmodes] of the loaded tensor. */
thg_status thg_group_set_layout(thg_group *group, const thg_group_mode *modes, char *err,
                                size_t errlen);
thg_status thg_group_set_factor(thg_group *group, uint32_t mode, const double *data, char *err,
                                size_t errlen);
thg_status thg_group_get_factor(thg_group *group, uint32_t mode, double *data, char *err,
                                size_t errlen);
thg_status thg_group_init_factors(thg_group *group, uint64_t seed, double *const *grams,
                                  char *err, size_t errlen);
thg_status thg_group_mttkrp(thg_group *group, uint32_t mode, char *err, size_t errlen);
/* Each local rank's owned rows of the whole result into data's rows (in a
 * group across processes, the other processes' rows are left as they
 * are: theirs to give). */
thg_status thg_group_get_result(thg_group *group, uint32_t mode, double *data, char *err,
                                size_t errlen);
thg_status thg_group_als_update(thg_group *group, uint32_t mode, const double *w,
                                int use_max_norm, double *lambda, double *gram, double *inner,
                                char *err, size_t errlen);
thg_status thg_group_als_sweep(thg_group *group, double *const *grams, int use_max_norm,
                               double *lambda, double *inner, uint32_t *modes_done, char *err,
                               size_t errlen);

/* In a group across processes, the local rank's alone (the others' entries
 * -1 and negative times). */
typedef struct thg_group_mode_stats {
    thg_mode_stats rank0;        /* the first local rank's scheme and why */
    int scheme[THG_MAX_GROUP_RANKS]; /* each rank's scheme for its share */
    /* The latest MTTKRP of the mode, the slowest rank's (negative before
     * the first), and the time its collectives took on the slowest rank
     * (the split rows' exchange; with the update, the sums' and the factor
     * rows' gathers too). */
    double last_mttkrp_seconds;
    double last_comm_seconds;
    /* Each rank's latest MTTKRP of the mode (negative before the first):
     * their spread is the load imbalance the collective waits out. */
    double rank_mttkrp_seconds[THG_MAX_GROUP_RANKS];
} thg_group_mode_stats;
thg_status thg_group_get_mode_stats(thg_group *group, uint32_t mode,
                                    thg_group_mode_stats *stats, char *err, size_t errlen);
/* Device time of the latest thg_group_als_sweep on the first local rank
 * (< 0 before). */
double thg_group_last_sweep_seconds(const thg_group *group);

#ifdef __cplusplus
}
#endif

#endif
