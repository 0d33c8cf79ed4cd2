/* cpu-reference: the correctness oracle for every other backend, and the
 * fallback without a GPU.
 *
 * Layout: for every mode a CSR-like copy of the tensor, nonzeros grouped by
 * that mode's index (a stable counting sort, O(nnz) per mode), each carrying
 * its value and the indices of the other modes side by side. MTTKRP cuts each
 * layout into chunks of a fixed number of nonzeros (not of rows: one row of a
 * skewed short mode can hold a tenth of the tensor) and runs the chunks in
 * parallel. Rows inside a chunk are written by that chunk alone; the two rows
 * at a chunk's ends may continue in its neighbours, so they go to per-chunk
 * slots that are merged afterwards in chunk order. No atomics, and since the
 * chunk boundaries do not depend on the thread count, neither does the result,
 * to the last bit. All arithmetic is in double.
 *
 * The factor update (als_update) and the Grams are dense algebra: BLAS
 * (dgemm, dsyrk), the OpenBLAS the host links too.
 *
 * The generalized MTTKRP (ABI 1.4) walks the same layouts and chunks: per
 * nonzero one row product p of the other factors, the model value
 * m = sum_r w_r A_mode(row, r) p_r from it, then g(x, m) p into the row and
 * h(x, m) into the chunk's own sum; the chunk sums are added in chunk order,
 * so the reduction too is the same whatever the thread count.
 *
 * row_least_squares (ABI 1.5) walks one layout by rows: each row's R x R
 * normal equations built from its nonzeros and solved (Cholesky, or
 * coordinate descent under a >= 0) by one thread, rows handed out
 * dynamically; each row's arithmetic is the same on any thread, and the
 * factor's norm is summed in fixed blocks, so it too is the same whatever
 * the thread count.
 *
 * als_update_nonneg (ABI 1.5) is als_update with hierarchical ALS in place
 * of the dgemm: the passes run on the factor's copy in als_update's
 * workspace, rows in fixed blocks on the threads, the blocks' squared
 * changes added in block order (the early stop is the same whatever the
 * thread count), then als_update's own normalisation. From ABI 1.6 its
 * io's ridge, l1 and unbounded enter each coordinate's step (a 1.5 io
 * means ridge 0, l1 0, TH_CONSTRAINT_NONNEG: the 1.5 update, bit for bit).
 *
 * Self-contained by design: libc, libm, OpenMP and CBLAS only (no GLib), so
 * that a third party can read it as an example of the ABI. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "cpu_reference_internal.h"
#include "generalized.h"
#include "multiplicative_updates.h"
#include "mttkrp_row.h"

#include <tensorhost/plugin_sdk.h>

#include <cblas.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CPU_REF_ID "cpu-reference"
#define CPU_REF_MAX_RANK 4096u
#define CPU_REF_CACHE_LINE 64u
/* Largest `threads` option. libgomp starts a team by putting per-thread start
 * data on the calling thread's stack (about 70000 threads overflow an 8 MiB
 * stack: SIGSEGV) and then creating every worker with a stack of its own
 * (ulimit -s, 8 MiB by default), which already fails at 50000 under the
 * common pid limit of 32768 (libgomp then exits the process). Neither
 * failure can be reported through the ABI. 1024 is above the hardware
 * threads of the largest two-socket servers (768), so no useful setting is
 * refused, and far below the counts where the runtime breaks. */
#define CPU_REF_MAX_THREADS 1024
/* The update runs in blocks of rows (dgemm, then the column sums and the
 * dsyrk of that block) and asks the host between blocks whether to stop.
 * A block holds about this many bytes of the new factor, and at least
 * CPU_REF_UPDATE_MIN_ROWS rows: every block repacks the R x R operand and
 * rewrites the R x R Gram, a cost a few hundred rows make small (8% at
 * rank 4096). At rank 4096 such a block is about 13 GFLOP, half a second
 * on two cores: the stop's latency there. */
#define CPU_REF_UPDATE_BLOCK_BYTES ((size_t)8 << 20)
#define CPU_REF_UPDATE_MIN_ROWS 256
/* An update of fewer multiply-adds than this (rows x rank x rank; about a
 * millisecond on one core) runs on one thread, BLAS included: it makes four
 * parallel regions a block, and waking a team for each costs more than the
 * work (tens of microseconds each; milliseconds on a machine whose cores
 * are busy with other work, where rank 16 on 11541-row modes took 10x the
 * host's update). */
#define CPU_REF_UPDATE_SERIAL_WORK ((int64_t)1 << 24)
/* Rows of a block of als_update_nonneg's HALS passes: the unit handed to a
 * thread and of the pass's change sums, fixed so that the sums, and so the
 * early stop, are the same whatever the thread count (the host's
 * th_dense_hals_nonneg uses the same 64). */
#define CPU_REF_HALS_BLOCK_ROWS 64

struct th_instance {
    const th_host_services *host;
    int threads;

    bool loaded;
    uint32_t nmodes;
    uint32_t rank;
    uint32_t *dims;         /* [nmodes] */
    mode_layout *layouts;   /* [nmodes] */
    double **factors;       /* [nmodes] of dims[m] x rank */
    double **results;       /* [nmodes] of dims[m] x rank: latest MTTKRP */
    bool *result_ready;     /* [nmodes] */
    double *last_seconds;   /* [nmodes]; negative before the first MTTKRP */
    double *scratch;        /* [threads * 2 * scratch_stride]: per-thread rank-length rows */
    double *boundary;       /* [2 * largest chunk count * rank]: chunk end-row slots */
    double *chunk_sums;     /* [chunk count]: generalized_mttkrp's per-chunk sums of h */
    /* als_update's workspace, allocated at its first call (a run on the
     * host's update path never needs it) and kept: freeing it would hand the
     * pages back and fault them in again at every update. */
    double *update_rows;    /* [largest dim * rank]: the new factor before it is committed */
    double *update_gram;    /* [rank * rank]: Gram of update_rows */
    double *update_sums;    /* [2 * scratch_stride]: per column, norm and inner-product sums */
    double *update_changes; /* [largest dim / CPU_REF_HALS_BLOCK_ROWS]: als_update_nonneg's */
    /* multiplicative_updates' per-thread caches of a row's products, kept
     * from its first call: a fresh threads x 4 MiB each call would be
     * faulted in again every time. */
    double *mu_products;
    size_t mu_product_doubles; /* a thread's */
    size_t scratch_stride;  /* rank rounded up to whole cache lines: no false sharing */
    uint64_t tensor_bytes;
    uint64_t factor_bytes;
    uint64_t workspace_bytes;
};

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

bool cpu_ref_use_wide(void)
{
#if CPU_REF_WIDE
    const char *off = getenv(CPU_REF_NO_AVX512_ENV);
    if (off != NULL && off[0] != '\0')
        return false;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}


static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Doubles per thread in the scratch array: whole cache lines, so that two
 * threads never write to the same line. */
static size_t scratch_stride(uint32_t rank)
{
    size_t per_line = CPU_REF_CACHE_LINE / sizeof(double);
    return ((size_t)rank + per_line - 1) / per_line * per_line;
}

/* a * b, or false when it does not fit in 64 bits. */
static bool mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a)
        return false;
    *out = a * b;
    return true;
}

static bool add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b > UINT64_MAX - a)
        return false;
    *out = a + b;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Info and options                                                          */
/* ------------------------------------------------------------------------ */

static const th_plugin_info cpu_reference_info = {
    .struct_size = (uint32_t)sizeof(th_plugin_info),
    .flags = TH_CAP_ALS_UPDATE,
    .id = CPU_REF_ID,
    .name = "CPU reference (OpenMP, CSR per mode)",
    .version = "1.0.0",
    .description = "Multi-threaded CPU MTTKRP in double precision over one row-sorted copy "
                   "of the tensor per mode; the correctness oracle for other backends.",
    .max_modes = CPU_REF_MAX_MODES,
    .max_rank = CPU_REF_MAX_RANK,
    .value_type = TH_VALUE_F64,
    .reserved0 = 0,
};

static const th_plugin_info *cpu_reference_get_info(void)
{
    return &cpu_reference_info;
}

/* Decimal digits only: "+2", " 2" and "2.0" are not what a config that says
 * threads = 2 renders, so refusing them catches mistakes instead of guessing. */
static bool parse_positive_int(const char *text, int *out)
{
    if (text == NULL || text[0] == '\0')
        return false;
    for (const char *p = text; *p != '\0'; p++)
        if (*p < '0' || *p > '9')
            return false;
    errno = 0;
    long value = strtol(text, NULL, 10);
    if (errno != 0 || value < 1 || value > INT_MAX)
        return false;
    *out = (int)value;
    return true;
}

static th_status parse_options(const th_option *options, uint32_t n_options, int *threads,
                               char *err)
{
    if (n_options > 0 && options == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "%u options given but the array is NULL",
                    n_options);
    bool threads_seen = false;
    for (uint32_t i = 0; i < n_options; i++) {
        const char *key = options[i].key;
        const char *value = options[i].value;
        if (key == NULL || value == NULL)
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "option %u has a NULL %s", i,
                        key == NULL ? "key" : "value");
        if (strcmp(key, "threads") != 0)
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                        "unknown option '%s' (" CPU_REF_ID " accepts: threads)", key);
        if (threads_seen)
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "option 'threads' given twice");
        threads_seen = true;
        if (!parse_positive_int(value, threads))
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                        "option 'threads': expected a positive integer, found '%s'", value);
        if (*threads > CPU_REF_MAX_THREADS)
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                        "option 'threads': %d is out of range: expected an integer from 1 to %d",
                        *threads, CPU_REF_MAX_THREADS);
    }
    return TH_OK;
}

/* OpenMP's default team size, which OMP_NUM_THREADS can set to anything:
 * capped like the option, with a warning rather than an error because the
 * user did not ask this plugin for it. */
static int default_threads(const th_host_services *host)
{
    int threads = omp_get_max_threads();
    if (threads <= CPU_REF_MAX_THREADS)
        return threads;
    th_plugin_log(host, TH_LOG_WARNING,
             CPU_REF_ID ": OpenMP's default of %d threads (OMP_NUM_THREADS?) is above %d; "
             "using %d (set the option 'threads' to choose)",
             threads, CPU_REF_MAX_THREADS, CPU_REF_MAX_THREADS);
    return CPU_REF_MAX_THREADS;
}

/* ------------------------------------------------------------------------ */
/* Instance lifecycle                                                        */
/* ------------------------------------------------------------------------ */

static void release_tensor(th_instance *inst)
{
    for (uint32_t m = 0; inst->layouts != NULL && m < inst->nmodes; m++) {
        free(inst->layouts[m].row_start);
        free(inst->layouts[m].values);
        free(inst->layouts[m].others);
        free(inst->layouts[m].chunk_row);
    }
    for (uint32_t m = 0; inst->factors != NULL && m < inst->nmodes; m++)
        free(inst->factors[m]);
    for (uint32_t m = 0; inst->results != NULL && m < inst->nmodes; m++)
        free(inst->results[m]);
    free(inst->layouts);
    free(inst->factors);
    free(inst->results);
    free(inst->result_ready);
    free(inst->last_seconds);
    free(inst->dims);
    free(inst->scratch);
    free(inst->boundary);
    free(inst->chunk_sums);
    free(inst->update_rows);
    free(inst->update_gram);
    free(inst->update_sums);
    free(inst->update_changes);
    free(inst->mu_products);
    const th_host_services *host = inst->host;
    int threads = inst->threads;
    memset(inst, 0, sizeof *inst);
    inst->host = host;
    inst->threads = threads;
}

static th_status cpu_reference_create(const th_option *options, uint32_t n_options,
                                      const th_host_services *host, th_instance **out,
                                      char *err)
{
    if (out == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "create: the output pointer is NULL");
    int threads = 0;
    th_status status = parse_options(options, n_options, &threads, err);
    if (status != TH_OK)
        return status;
    if (threads == 0)
        threads = default_threads(host);
    th_instance *inst = calloc(1, sizeof *inst);
    if (inst == NULL)
        return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY, "out of memory allocating the instance");
    inst->host = host;
    inst->threads = threads;
    *out = inst;
    th_plugin_log(host, TH_LOG_DEBUG, CPU_REF_ID ": instance with %d threads", threads);
    return TH_OK;
}

static void cpu_reference_destroy(th_instance *inst)
{
    if (inst == NULL)
        return;
    release_tensor(inst);
    free(inst);
}

/* ------------------------------------------------------------------------ */
/* load_tensor                                                               */
/* ------------------------------------------------------------------------ */

/* The nonzeros mode `mode` is built from: the host's mode_nonzeros[mode]
 * (ABI 1.10, a run of several processes), else the tensor's. */
static const th_coo_tensor *mode_source(const th_coo_tensor *t, uint32_t mode)
{
    return TH_HAS_FIELD(t->struct_size, th_coo_tensor, mode_nonzeros) && t->mode_nonzeros
               ? t->mode_nonzeros[mode]
               : t;
}

static bool has_mode_sources(const th_coo_tensor *t)
{
    return mode_source(t, 0) != t;
}

static th_status validate_shape(const th_coo_tensor *t, uint32_t rank, char *err)
{
    if (t == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "load_tensor: the tensor is NULL");
    /* Every field read here is of 1.0; a longer struct, from a newer host,
     * is fine (plugin.h, "Growth"). */
    if (t->struct_size < TH_COO_TENSOR_V1_0_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                    "load_tensor: tensor struct is %u bytes, shorter than the %zu of ABI 1.0",
                    t->struct_size, (size_t)TH_COO_TENSOR_V1_0_SIZE);
    if (t->nmodes < 2)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                    "load_tensor: the tensor has %u mode%s; at least 2 are needed", t->nmodes,
                    t->nmodes == 1 ? "" : "s");
    if (t->nmodes > CPU_REF_MAX_MODES)
        return th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                    "load_tensor: the tensor has %u modes; " CPU_REF_ID " supports at most %u",
                    t->nmodes, CPU_REF_MAX_MODES);
    if (rank < 1)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "load_tensor: rank 0; the rank must be >= 1");
    if (rank > CPU_REF_MAX_RANK)
        return th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                    "load_tensor: rank %u is above the maximum rank %u of " CPU_REF_ID, rank,
                    CPU_REF_MAX_RANK);
    if (t->nnz < 1)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "load_tensor: the tensor has no nonzeros");
    if (t->dims == NULL || t->indices == NULL || t->values == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "load_tensor: the tensor's %s array is NULL",
                    t->dims == NULL ? "dims" : (t->indices == NULL ? "indices" : "values"));
    for (uint32_t m = 0; m < t->nmodes; m++) {
        if (t->dims[m] == 0)
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                        "load_tensor: mode %u has dimension 0; every dimension must be >= 1", m);
        if (t->indices[m] == NULL)
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                        "load_tensor: the index array of mode %u is NULL", m);
    }
    return TH_OK;
}

/* Reports the first nonzero (lowest k, then lowest mode) whose index is out
 * of range or whose value is not finite. Scans mode by mode for cache
 * locality, stopping each scan at the best position found so far. */
static th_status validate_entries_of(const th_coo_tensor *t, char *err)
{
    uint64_t first_bad = t->nnz;
    uint32_t bad_mode = 0;
    for (uint32_t m = 0; m < t->nmodes; m++) {
        const uint32_t *idx = t->indices[m];
        for (uint64_t k = 0; k < first_bad; k++)
            if (idx[k] >= t->dims[m]) {
                first_bad = k;
                bad_mode = m;
                break;
            }
    }
    for (uint64_t k = 0; k < first_bad; k++)
        if (!isfinite(t->values[k]))
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                        "load_tensor: nonzero %llu has a non-finite value %g",
                        (unsigned long long)k, t->values[k]);
    if (first_bad < t->nnz)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                    "load_tensor: nonzero %llu has mode-%u index %u, out of range for "
                    "dimension %u",
                    (unsigned long long)first_bad, bad_mode, t->indices[bad_mode][first_bad],
                    t->dims[bad_mode]);
    return TH_OK;
}

/* Each mode's own nonzeros where the host gives them (the same order and
 * dims as the tensor's, any count, a mode's empty where this process owns
 * none of its rows), else the tensor's; the index and value checks on each. */
static th_status validate_entries(const th_coo_tensor *t, char *err)
{
    if (!has_mode_sources(t))
        return validate_entries_of(t, err);
    for (uint32_t m = 0; m < t->nmodes; m++) {
        const th_coo_tensor *s = t->mode_nonzeros[m];
        if (s == NULL)
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                  "load_tensor: mode_nonzeros[%u] is NULL", m);
        if (s->nmodes != t->nmodes)
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                  "load_tensor: mode_nonzeros[%u] has %u modes, the tensor %u",
                                  m, s->nmodes, t->nmodes);
        for (uint32_t d = 0; d < t->nmodes; d++)
            if (s->dims == NULL || s->dims[d] != t->dims[d])
                return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                      "load_tensor: mode_nonzeros[%u]'s dimension %u is not the "
                                      "tensor's %u",
                                      m, d, t->dims[d]);
        if (s->nnz > 0 && (s->indices == NULL || s->values == NULL))
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                  "load_tensor: mode_nonzeros[%u]'s %s array is NULL", m,
                                  s->indices == NULL ? "indices" : "values");
        for (uint32_t d = 0; s->nnz > 0 && d < t->nmodes; d++)
            if (s->indices[d] == NULL)
                return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                      "load_tensor: mode_nonzeros[%u]'s index array of mode %u "
                                      "is NULL",
                                      m, d);
        char inner[TH_ERROR_SIZE] = "";
        if (validate_entries_of(s, inner) != TH_OK)
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "%s (of mode_nonzeros[%u])",
                                  inner, m);
    }
    return TH_OK;
}

/* Byte counts of everything load_tensor allocates, checked for overflow
 * before any allocation so a huge tensor fails with sizes, not a crash. */
typedef struct load_sizes {
    uint64_t tensor_bytes;
    uint64_t factor_bytes;
    uint64_t workspace_bytes;
} load_sizes;

static th_status compute_sizes(const th_coo_tensor *t, uint32_t rank, int threads,
                               load_sizes *sizes, char *err)
{
    uint64_t per_nonzero = sizeof(double) + (uint64_t)(t->nmodes - 1) * sizeof(uint32_t);
    uint64_t tensor = 0, factors = 0, workspace = 0, layout = 0, rows = 0, matrix = 0;
    uint64_t most_nnz = 0;
    uint32_t largest = 0;
    bool ok = true;
    for (uint32_t m = 0; ok && m < t->nmodes; m++) {
        const uint64_t nnz = mode_source(t, m)->nnz;
        most_nnz = nnz > most_nnz ? nnz : most_nnz;
        ok = mul_u64(nnz, per_nonzero, &layout) && add_u64(tensor, layout, &tensor) &&
             mul_u64((uint64_t)t->dims[m] + 1, sizeof(uint64_t), &rows) &&
             add_u64(tensor, rows, &tensor) &&
             mul_u64((uint64_t)t->dims[m] * rank, 2 * sizeof(double), &matrix) &&
             add_u64(factors, matrix, &factors);
        largest = t->dims[m] > largest ? t->dims[m] : largest;
    }
    uint64_t chunks = (most_nnz + CPU_REF_CHUNK_NNZ - 1) / CPU_REF_CHUNK_NNZ, slots = 0;
    /* als_update's workspace is counted although it is allocated on first use. */
    uint64_t update = 0;
    ok = ok && mul_u64((uint64_t)threads * 2 * scratch_stride(rank), sizeof(double), &workspace) &&
         mul_u64(chunks * 2 * sizeof(double), rank, &slots) && add_u64(workspace, slots, &workspace) &&
         add_u64(workspace, chunks * sizeof(double), &workspace) &&
         mul_u64((uint64_t)largest + rank, (uint64_t)rank * sizeof(double), &update) &&
         add_u64(workspace, update, &workspace) &&
         add_u64(workspace, 2 * scratch_stride(rank) * sizeof(double), &workspace);
    uint64_t total = 0;
    ok = ok && add_u64(tensor, factors, &total) && add_u64(total, workspace, &total);
    if (!ok || total > (uint64_t)SIZE_MAX)
        return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY,
                    "load_tensor: %llu nonzeros in %u modes at rank %u need more memory than "
                    "this machine can address",
                    (unsigned long long)t->nnz, t->nmodes, rank);
    sizes->tensor_bytes = tensor;
    sizes->factor_bytes = factors;
    sizes->workspace_bytes = workspace;
    return TH_OK;
}

/* Stable counting sort of the nonzeros by their `mode` index. */
static void build_layout(const th_coo_tensor *t, uint32_t mode, mode_layout *layout)
{
    uint32_t dim = t->dims[mode];
    uint32_t width = t->nmodes - 1;
    const uint32_t *rows = t->indices[mode];
    uint64_t *start = layout->row_start;

    memset(start, 0, ((size_t)dim + 1) * sizeof *start);
    layout->nnz = t->nnz;
    for (uint64_t k = 0; k < t->nnz; k++)
        start[rows[k] + 1]++;
    for (uint32_t i = 0; i < dim; i++)
        start[i + 1] += start[i];

    /* start[i] doubles as row i's write cursor; afterwards start[i] has moved
     * to where row i+1 begins, so shifting by one slot restores it. */
    for (uint64_t k = 0; k < t->nnz; k++) {
        uint64_t pos = start[rows[k]]++;
        layout->values[pos] = t->values[k];
        uint32_t *dst = layout->others + pos * width;
        for (uint32_t m = 0, j = 0; m < t->nmodes; m++)
            if (m != mode)
                dst[j++] = t->indices[m][k];
    }
    memmove(start + 1, start, (size_t)dim * sizeof *start);
    start[0] = 0;

    /* Row of each chunk's first nonzero, walking rows and chunks together. */
    uint32_t row = 0;
    for (uint64_t c = 0; t->nnz > 0 && c <= layout->chunks; c++) {
        uint64_t k = c < layout->chunks ? c * CPU_REF_CHUNK_NNZ : t->nnz - 1;
        while (start[row + 1] <= k)
            row++;
        layout->chunk_row[c] = row;
    }
    if (t->nnz == 0)
        layout->chunk_row[0] = 0;
}

static th_status allocate_tensor(th_instance *inst, const th_coo_tensor *t, uint32_t rank,
                                 char *err)
{
    uint32_t n = t->nmodes;
    inst->nmodes = n;
    inst->rank = rank;
    inst->dims = malloc(n * sizeof *inst->dims);
    inst->layouts = calloc(n, sizeof *inst->layouts);
    inst->factors = calloc(n, sizeof *inst->factors);
    inst->results = calloc(n, sizeof *inst->results);
    inst->result_ready = calloc(n, sizeof *inst->result_ready);
    inst->last_seconds = malloc(n * sizeof *inst->last_seconds);
    inst->scratch_stride = scratch_stride(rank);
    inst->scratch = aligned_alloc(CPU_REF_CACHE_LINE, (size_t)inst->threads * 2 *
                                                          inst->scratch_stride *
                                                          sizeof *inst->scratch);
    size_t chunks = 1; /* the most of any mode, and room for one */
    for (uint32_t m = 0; m < n; m++) {
        const size_t c = ((size_t)mode_source(t, m)->nnz + CPU_REF_CHUNK_NNZ - 1) / CPU_REF_CHUNK_NNZ;
        chunks = c > chunks ? c : chunks;
    }
    inst->boundary = malloc(chunks * 2 * (size_t)rank * sizeof *inst->boundary);
    inst->chunk_sums = malloc(chunks * sizeof *inst->chunk_sums);
    if (!inst->dims || !inst->layouts || !inst->factors || !inst->results ||
        !inst->result_ready || !inst->last_seconds || !inst->scratch || !inst->boundary ||
        !inst->chunk_sums)
        return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY, "load_tensor: out of memory for bookkeeping");
    memcpy(inst->dims, t->dims, n * sizeof *inst->dims);

    size_t width = n - 1;
    for (uint32_t m = 0; m < n; m++) {
        mode_layout *l = &inst->layouts[m];
        const uint64_t nnz = mode_source(t, m)->nnz;
        size_t cells = (size_t)t->dims[m] * rank;
        l->row_start = malloc(((size_t)t->dims[m] + 1) * sizeof *l->row_start);
        /* One element at least: an empty mode's arrays are not NULL. */
        l->values = malloc(((size_t)nnz + 1) * sizeof *l->values);
        l->others = malloc(((size_t)nnz * width + 1) * sizeof *l->others);
        l->chunks = (nnz + CPU_REF_CHUNK_NNZ - 1) / CPU_REF_CHUNK_NNZ;
        l->chunk_row = malloc(((size_t)l->chunks + 1) * sizeof *l->chunk_row);
        /* Zeroed: factors are "unspecified until set_factor", but reading
         * them must not be reading uninitialised memory. */
        inst->factors[m] = calloc(cells, sizeof(double));
        inst->results[m] = calloc(cells, sizeof(double));
        inst->last_seconds[m] = -1.0;
        if (!l->row_start || !l->values || !l->others || !l->chunk_row || !inst->factors[m] ||
            !inst->results[m])
            return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY,
                        "load_tensor: out of memory for mode %u (dimension %u, %llu nonzeros, "
                        "rank %u)",
                        m, t->dims[m], (unsigned long long)nnz, rank);
    }
    return TH_OK;
}

static th_status cpu_reference_load_tensor(th_instance *inst, const th_coo_tensor *t,
                                           uint32_t rank, char *err)
{
    if (inst == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "load_tensor: the instance is NULL");
    load_sizes sizes = {0, 0, 0};
    th_status status = validate_shape(t, rank, err);
    if (status == TH_OK)
        status = validate_entries(t, err);
    if (status == TH_OK)
        status = compute_sizes(t, rank, inst->threads, &sizes, err);
    if (status != TH_OK)
        return status;

    double start = now_seconds();
    release_tensor(inst);
    status = allocate_tensor(inst, t, rank, err);
    if (status != TH_OK) {
        release_tensor(inst);
        return status;
    }
    /* Modes are independent: sort them concurrently when there are threads
     * to spare (each sort is serial and O(nnz)). */
    int sort_threads = inst->threads < (int)t->nmodes ? inst->threads : (int)t->nmodes;
#pragma omp parallel for schedule(dynamic, 1) num_threads(sort_threads)
    for (int m = 0; m < (int)t->nmodes; m++)
        build_layout(mode_source(t, (uint32_t)m), (uint32_t)m, &inst->layouts[m]);

    inst->tensor_bytes = sizes.tensor_bytes;
    inst->factor_bytes = sizes.factor_bytes;
    inst->workspace_bytes = sizes.workspace_bytes;
    inst->loaded = true;
    th_plugin_log(inst->host, TH_LOG_DEBUG,
             CPU_REF_ID ": %u row-sorted layouts of %llu nonzeros built in %.3f s "
             "(%.1f MiB)",
             t->nmodes, (unsigned long long)t->nnz, now_seconds() - start,
             (double)sizes.tensor_bytes / (1024.0 * 1024.0));
    return TH_OK;
}

/* ------------------------------------------------------------------------ */
/* Factors and MTTKRP                                                        */
/* ------------------------------------------------------------------------ */

static th_status check_mode(const th_instance *inst, const char *function, uint32_t mode,
                            char *err)
{
    if (inst == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "%s: the instance is NULL", function);
    if (!inst->loaded)
        return th_plugin_fail(err, TH_ERR_BAD_STATE, "%s: no tensor loaded (call load_tensor first)",
                    function);
    if (mode >= inst->nmodes)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                    "%s: mode %u is out of range; the tensor has %u modes (0..%u)", function,
                    mode, inst->nmodes, inst->nmodes - 1);
    return TH_OK;
}

static size_t matrix_bytes(const th_instance *inst, uint32_t mode)
{
    return (size_t)inst->dims[mode] * inst->rank * sizeof(double);
}

static th_status cpu_reference_set_factor(th_instance *inst, uint32_t mode,
                                          const double *data, char *err)
{
    th_status status = check_mode(inst, "set_factor", mode, err);
    if (status != TH_OK)
        return status;
    if (data == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "set_factor: mode %u: data is NULL", mode);
    memcpy(inst->factors[mode], data, matrix_bytes(inst, mode));
    return TH_OK;
}

static th_status cpu_reference_get_factor(th_instance *inst, uint32_t mode, double *data,
                                          char *err)
{
    th_status status = check_mode(inst, "get_factor", mode, err);
    if (status != TH_OK)
        return status;
    if (data == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "get_factor: mode %u: data is NULL", mode);
    memcpy(data, inst->factors[mode], matrix_bytes(inst, mode));
    return TH_OK;
}

/* The factors of every mode but `mode`, in mode order (the order of a
 * layout's other indices), into out[0 .. nmodes - 1). Returns how many. */
static uint32_t other_factors_of(const th_instance *inst, uint32_t mode, const double **out)
{
    uint32_t width = 0;
    for (uint32_t m = 0; m < inst->nmodes; m++)
        if (m != mode)
            out[width++] = inst->factors[m];
    return width;
}

/* 3- and 4-mode tensors, the common orders: one fused loop per nonzero
 * instead of a round trip through the scratch row. The products are formed
 * in the same order as in the general loop, so the results are identical. */
static void mttkrp_row_fused(const mode_layout *l, const double *const *other_factors,
                             uint32_t width, uint32_t rank, uint64_t begin, uint64_t end,
                             double *restrict out)
{
    for (uint64_t k = begin; k < end; k++) {
        const uint32_t *idx = l->others + k * width;
        const double value = l->values[k];
        const double *restrict a = other_factors[0] + (size_t)idx[0] * rank;
        const double *restrict b = other_factors[1] + (size_t)idx[1] * rank;
        if (width == 2) {
            for (uint32_t r = 0; r < rank; r++)
                out[r] += value * a[r] * b[r];
        } else {
            const double *restrict c = other_factors[2] + (size_t)idx[2] * rank;
            for (uint32_t r = 0; r < rank; r++)
                out[r] += value * a[r] * b[r] * c[r];
        }
    }
}

/* out[0..R) = sum over the row's nonzeros of value * (Hadamard product of the
 * other factors' rows). `term` is scratch of R doubles; `other_factors` lists
 * the factors of the other modes in the order of the layout's indices. The
 * restrict qualifiers let the R-loops vectorise without alias checks. */
static void mttkrp_row(const mode_layout *l, const double *const *other_factors,
                       uint32_t width, uint32_t rank, uint64_t begin, uint64_t end, bool wide,
                       double *restrict term, double *restrict out)
{
    if (mttkrp_row_vector(l, other_factors, width, rank, begin, end, wide, out))
        return;
    for (uint32_t r = 0; r < rank; r++)
        out[r] = 0.0;
    if (width == 2 || width == 3) {
        mttkrp_row_fused(l, other_factors, width, rank, begin, end, out);
        return;
    }
    for (uint64_t k = begin; k < end; k++) {
        const uint32_t *idx = l->others + k * width;
        const double value = l->values[k];
        const double *restrict first = other_factors[0] + (size_t)idx[0] * rank;
        for (uint32_t r = 0; r < rank; r++)
            term[r] = value * first[r];
        for (uint32_t j = 1; j < width; j++) {
            const double *restrict row = other_factors[j] + (size_t)idx[j] * rank;
            for (uint32_t r = 0; r < rank; r++)
                term[r] *= row[r];
        }
        for (uint32_t r = 0; r < rank; r++)
            out[r] += term[r];
    }
}

/* One chunk [begin, end) of a layout: rows strictly inside it are complete
 * and written to `result`; its first row goes to slots[0] and its last row,
 * when different, to slots[rank], for merge_boundaries to place. */
static void mttkrp_chunk(const mode_layout *l, const double *const *other_factors,
                         uint32_t width, uint32_t rank, uint64_t chunk, uint64_t nnz, bool wide,
                         double *restrict term, double *restrict slots, double *result)
{
    const chunk_span c = cpu_ref_chunk_span(l, chunk, nnz);
    mttkrp_row(l, other_factors, width, rank, c.begin, c.first_end, wide, term, slots);
    for (uint32_t row = c.first + 1; row < c.last; row++)
        mttkrp_row(l, other_factors, width, rank, l->row_start[row], l->row_start[row + 1], wide,
                   term, result + (size_t)row * rank);
    if (c.last > c.first)
        mttkrp_row(l, other_factors, width, rank, l->row_start[c.last], c.end, wide, term,
                   slots + rank);
}

/* Places the chunks' end rows, in chunk order (hence deterministic), and
 * zeroes the empty rows that lie between chunks, which no chunk visits. */
static void merge_boundaries(const mode_layout *l, uint32_t dim, uint32_t rank, uint64_t nnz,
                             const double *slots, double *result)
{
    int64_t written = -1; /* highest row placed so far */
    for (uint64_t c = 0; c < l->chunks; c++) {
        const uint64_t end = (c + 1) * CPU_REF_CHUNK_NNZ < nnz ? (c + 1) * CPU_REF_CHUNK_NNZ : nnz;
        const uint32_t first = l->chunk_row[c];
        uint32_t last = c + 1 < l->chunks ? l->chunk_row[c + 1] : l->chunk_row[l->chunks];
        while (l->row_start[last] >= end)
            last--;
        const double *head = slots + c * 2 * (size_t)rank;
        double *out = result + (size_t)first * rank;
        if ((int64_t)first == written) {
            for (uint32_t r = 0; r < rank; r++)
                out[r] += head[r];
        } else {
            memset(result + (size_t)(written + 1) * rank, 0,
                   (size_t)((int64_t)first - written - 1) * rank * sizeof *result);
            memcpy(out, head, rank * sizeof *out);
        }
        if (last > first)
            memcpy(result + (size_t)last * rank, head + rank, rank * sizeof *result);
        written = last;
    }
    memset(result + (size_t)(written + 1) * rank, 0,
           (size_t)((int64_t)dim - written - 1) * rank * sizeof *result);
}

static th_status cpu_reference_mttkrp(th_instance *inst, uint32_t mode, char *err)
{
    th_status status = check_mode(inst, "mttkrp", mode, err);
    if (status != TH_OK)
        return status;
    double start = now_seconds();
    const mode_layout *l = &inst->layouts[mode];
    double *result = inst->results[mode];
    uint32_t rank = inst->rank;

    const double *other_factors[CPU_REF_MAX_MODES];
    const uint32_t width = other_factors_of(inst, mode, other_factors);

    const int64_t chunks = (int64_t)l->chunks;
    const bool wide = cpu_ref_use_wide();
#pragma omp parallel num_threads(inst->threads)
    {
        double *term = inst->scratch + (size_t)omp_get_thread_num() * 2 * inst->scratch_stride;
#pragma omp for schedule(dynamic, 1)
        for (int64_t c = 0; c < chunks; c++)
            mttkrp_chunk(l, other_factors, width, rank, (uint64_t)c, l->nnz, wide, term,
                         inst->boundary + (size_t)c * 2 * rank, result);
    }
    merge_boundaries(l, inst->dims[mode], rank, l->nnz, inst->boundary, result);
    inst->result_ready[mode] = true;
    inst->last_seconds[mode] = now_seconds() - start;
    return TH_OK;
}

static th_status cpu_reference_get_mttkrp_result(th_instance *inst, uint32_t mode,
                                                 double *data, char *err)
{
    th_status status = check_mode(inst, "get_mttkrp_result", mode, err);
    if (status != TH_OK)
        return status;
    if (data == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "get_mttkrp_result: mode %u: data is NULL",
                    mode);
    if (!inst->result_ready[mode])
        return th_plugin_fail(err, TH_ERR_BAD_STATE,
                    "get_mttkrp_result: mode %u has no result yet (call mttkrp first)", mode);
    memcpy(data, inst->results[mode], matrix_bytes(inst, mode));
    return TH_OK;
}

/* ------------------------------------------------------------------------ */
/* als_update                                                                */
/* ------------------------------------------------------------------------ */

/* The arguments als_update and als_update_nonneg share, named after
 * `function` in the messages: mode, the R x R operand (`operand`, named
 * `operand_name`), norm and out. */
static th_status check_update_arguments(const th_instance *inst, const char *function,
                                        uint32_t mode, const double *operand,
                                        const char *operand_name, int32_t norm,
                                        const th_als_output *out, char *err)
{
    th_status status = check_mode(inst, function, mode, err);
    if (status != TH_OK)
        return status;
    if (operand == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "%s: mode %u: %s is NULL", function,
                              mode, operand_name);
    if (norm != TH_NORM_2 && norm != TH_NORM_MAX)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                    "%s: norm %d is neither TH_NORM_2 (%d) nor TH_NORM_MAX (%d)", function,
                    (int)norm, TH_NORM_2, TH_NORM_MAX);
    if (out == NULL || out->struct_size < TH_ALS_OUTPUT_V1_0_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                    "%s: the output struct is %s", function,
                    out == NULL ? "NULL" : "shorter than the th_als_output of ABI 1.0");
    if (out->lambda == NULL || out->gram == NULL || out->inner == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "%s: output array '%s' is NULL",
                    function,
                    out->lambda == NULL ? "lambda" : (out->gram == NULL ? "gram" : "inner"));
    return TH_OK;
}

static th_status check_result_ready(const th_instance *inst, const char *function,
                                    uint32_t mode, char *err)
{
    if (!inst->result_ready[mode])
        return th_plugin_fail(err, TH_ERR_BAD_STATE,
                    "%s: mode %u has no MTTKRP result yet (call mttkrp first)", function, mode);
    return TH_OK;
}

static th_status check_als_arguments(const th_instance *inst, uint32_t mode, const double *w,
                                     int32_t norm, const th_als_output *out, char *err)
{
    th_status status = check_update_arguments(inst, "als_update", mode, w, "w", norm, out, err);
    return status != TH_OK ? status : check_result_ready(inst, "als_update", mode, err);
}

/* Rows per update block: CPU_REF_UPDATE_BLOCK_BYTES of the new factor, at
 * least CPU_REF_UPDATE_MIN_ROWS. */
static int64_t update_block_rows(int64_t rank)
{
    const int64_t rows = (int64_t)(CPU_REF_UPDATE_BLOCK_BYTES / ((size_t)rank * sizeof(double)));
    return rows > CPU_REF_UPDATE_MIN_ROWS ? rows : CPU_REF_UPDATE_MIN_ROWS;
}

/* OpenBLAS's OpenMP build (what scripts/install-deps.sh installs) runs each
 * call on the calling thread's OpenMP default number of threads, one thread
 * inside a parallel region. The plugin's BLAS calls therefore stay outside
 * its parallel regions and set that default to the `threads` option for
 * their span; OpenBLAS's pthreads build keeps a pool of its own and ignores
 * it. Returns the default to restore with blas_threads_end(). */
static int blas_threads_begin(int threads)
{
    const int previous = omp_get_max_threads();
    omp_set_num_threads(threads);
    return previous;
}

static void blas_threads_end(int previous)
{
    omp_set_num_threads(previous);
}

/* Threads for the update of a mode of `rows` rows (CPU_REF_UPDATE_SERIAL_WORK). */
static int update_threads(const th_instance *inst, int64_t rows)
{
    return rows * inst->rank * inst->rank < CPU_REF_UPDATE_SERIAL_WORK ? 1 : inst->threads;
}

/* Mirrors the upper triangle of the row-major n x n `a` into its lower one. */
static void mirror_upper(double *a, int64_t n)
{
    for (int64_t r = 1; r < n; r++)
        for (int64_t s = 0; s < r; s++)
            a[r * n + s] = a[s * n + r];
}

/* The upper triangle of gram = A^T A (beta 0) or gram + A^T A (beta 1) for a
 * row-major rows x rank A: dsyrk of A transposed, as the host's Gram. */
static void add_gram_upper(const double *a, int64_t rows, int64_t rank, double beta, double *gram)
{
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)rank, (int)rows, 1.0, a, (int)rank,
                beta, gram, (int)rank);
}

/* gram = A^T A of a row-major rows x rank A, in blocks of rows that BLAS's
 * int dimensions hold. */
static void gram_of_rows(const double *a, int64_t rows, int64_t rank, double *gram)
{
    for (int64_t first = 0; first < rows; first += INT_MAX) {
        const int64_t block = rows - first < INT_MAX ? rows - first : INT_MAX;
        add_gram_upper(a + first * rank, block, rank, first == 0 ? 0.0 : 1.0, gram);
    }
    mirror_upper(gram, rank);
}

/* The columns [*first, *last) that thread `t` of `n` owns in the column
 * sums: whole cache lines, so that no two threads write to one line. */
static void column_share(int64_t rank, int t, int n, int64_t *first, int64_t *last)
{
    const int64_t per_line = (int64_t)(CPU_REF_CACHE_LINE / sizeof(double));
    const int64_t lines = (rank + per_line - 1) / per_line;
    const int64_t end = lines * (t + 1) / n * per_line;
    *first = lines * t / n * per_line;
    *last = end < rank ? end : rank;
}

/* Adds one block's rows to the per-column sums: the squares (TH_NORM_2) or
 * the largest magnitude (TH_NORM_MAX) of the new rows `a`, and their
 * products with the MTTKRP rows `m`. Each thread owns whole columns and
 * walks the rows in order, so every sum is taken in row order whatever the
 * thread count. A NaN never wins the maximum, as with fmax. */
static void add_column_sums(const double *restrict a, const double *restrict m, int64_t rows,
                            int64_t rank, int32_t norm, int threads, double *restrict size,
                            double *restrict inner)
{
#pragma omp parallel num_threads(threads)
    {
        int64_t first = 0, last = 0;
        column_share(rank, omp_get_thread_num(), omp_get_num_threads(), &first, &last);
        for (int64_t i = 0; i < rows; i++) {
            const double *restrict a_row = a + i * rank;
            const double *restrict m_row = m + i * rank;
            if (norm == TH_NORM_2) {
                for (int64_t r = first; r < last; r++) {
                    size[r] += a_row[r] * a_row[r];
                    inner[r] += m_row[r] * a_row[r];
                }
            } else {
                for (int64_t r = first; r < last; r++) {
                    const double magnitude = fabs(a_row[r]);
                    size[r] = magnitude > size[r] ? magnitude : size[r];
                    inner[r] += m_row[r] * a_row[r];
                }
            }
        }
    }
}

/* The workspace of als_update and als_update_nonneg (see th_instance), at
 * the first call of either. */
static th_status ensure_update_workspace(th_instance *inst, char *err)
{
    if (inst->update_rows != NULL)
        return TH_OK;
    uint32_t largest = 0;
    for (uint32_t m = 0; m < inst->nmodes; m++)
        largest = inst->dims[m] > largest ? inst->dims[m] : largest;
    const size_t rank = inst->rank;
    double *rows = malloc((size_t)largest * rank * sizeof *rows);
    double *gram = malloc(rank * rank * sizeof *gram);
    double *sums = aligned_alloc(CPU_REF_CACHE_LINE, 2 * inst->scratch_stride * sizeof *sums);
    const size_t blocks = ((size_t)largest + CPU_REF_HALS_BLOCK_ROWS - 1) / CPU_REF_HALS_BLOCK_ROWS;
    double *changes = malloc((blocks > 0 ? blocks : 1) * sizeof *changes);
    if (rows == NULL || gram == NULL || sums == NULL || changes == NULL) {
        free(rows);
        free(gram);
        free(sums);
        free(changes);
        return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY,
                              "als_update: out of memory for its %u x %zu work matrix", largest,
                              rank);
    }
    inst->update_rows = rows;
    inst->update_gram = gram;
    inst->update_sums = sums;
    inst->update_changes = changes;
    return TH_OK;
}

/* What the normalisation needs of rows [first, first + rows) of the new
 * factor in the workspace: their column sums, and their Gram added to the
 * blocks' before (dsyrk; the caller starts at first = 0 and keeps BLAS
 * outside any parallel region, see blas_threads_begin). */
static void summarize_block(th_instance *inst, const double *m_rows, int64_t first,
                            int64_t rows, int32_t norm, int threads)
{
    const int64_t rank = inst->rank;
    const double *a = inst->update_rows + first * rank;
    add_column_sums(a, m_rows + first * rank, rows, rank, norm, threads, inst->update_sums,
                    inst->update_sums + inst->scratch_stride);
    add_gram_upper(a, rows, rank, first == 0 ? 0.0 : 1.0, inst->update_gram);
}

/* Rows [first, first + rows) of the update: A = M w (one dgemm), then their
 * column sums, and their Gram added to the block's before (dsyrk), all into
 * the workspace. BLAS runs outside any parallel region (see
 * blas_threads_begin). */
static void update_block(th_instance *inst, const double *m_rows, const double *w,
                         int64_t first, int64_t rows, int32_t norm, int threads)
{
    const int64_t rank = inst->rank;
    const double *m = m_rows + first * rank;
    double *a = inst->update_rows + first * rank;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)rank, (int)rank, 1.0,
                m, (int)rank, w, (int)rank, 0.0, a, (int)rank);
    summarize_block(inst, m_rows, first, rows, norm, threads);
}

/* Tensor Toolbox's choice of lambda: the 2-norm, or max(max_i |a_ir|, 1)
 * so that columns are only ever shrunk; a zero 2-norm stays 0 and nothing
 * is divided by it. Then what the workspace holds of the unnormalised A,
 * divided by lambda: the factor A / lambda, its Gram G_rs / (lambda_r
 * lambda_s) and inner_r / lambda_r, into the instance and `out`. */
static void commit_update(th_instance *inst, uint32_t mode, int32_t norm, int threads,
                          th_als_output *out)
{
    const int64_t rows = inst->dims[mode], rank = inst->rank;
    double *divisor = inst->update_sums; /* the norm sums, replaced */
    const double *inner = inst->update_sums + inst->scratch_stride;
    for (int64_t r = 0; r < rank; r++) {
        const double lambda = norm == TH_NORM_2 ? sqrt(divisor[r]) : fmax(divisor[r], 1.0);
        divisor[r] = lambda != 0.0 ? lambda : 1.0;
        out->lambda[r] = lambda;
        out->inner[r] = inner[r] / divisor[r];
    }
    const double *gram = inst->update_gram;
    for (int64_t r = 0; r < rank; r++)
        for (int64_t s = r; s < rank; s++)
            out->gram[r * rank + s] = gram[r * rank + s] / divisor[r] / divisor[s];
    mirror_upper(out->gram, rank);
    const double *a = inst->update_rows;
    double *factor = inst->factors[mode];
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < rows; i++)
        for (int64_t r = 0; r < rank; r++)
            factor[i * rank + r] = a[i * rank + r] / divisor[r];
}

/* The new factor is built in the workspace in blocks of rows, asking the
 * host between blocks whether to stop, and replaces the factor only once
 * complete: a stopped update (TH_ERR_CANCELLED) leaves the factor and
 * `out` as they were, so the model of the modes updated before stays
 * whole. */
static th_status cpu_reference_als_update(th_instance *inst, uint32_t mode, const double *w,
                                          int32_t norm, th_als_output *out, char *err)
{
    th_status status = check_als_arguments(inst, mode, w, norm, out, err);
    if (status == TH_OK)
        status = ensure_update_workspace(inst, err);
    if (status != TH_OK)
        return status;
    const int64_t rows = inst->dims[mode];
    const int64_t block = update_block_rows(inst->rank);
    memset(inst->update_sums, 0, 2 * inst->scratch_stride * sizeof *inst->update_sums);
    const int threads = update_threads(inst, rows);
    const int previous_threads = blas_threads_begin(threads);
    for (int64_t first = 0; first < rows; first += block) {
        if (first > 0 && th_plugin_stop_requested(inst->host)) {
            blas_threads_end(previous_threads);
            return th_plugin_fail(err, TH_ERR_CANCELLED,
                                  "als_update(mode %u) given up after %lld of %lld rows: stop "
                                  "requested (the factor is unchanged)",
                                  mode, (long long)first, (long long)rows);
        }
        update_block(inst, inst->results[mode], w, first,
                     rows - first < block ? rows - first : block, norm, threads);
    }
    blas_threads_end(previous_threads);
    commit_update(inst, mode, norm, threads, out);
    return TH_OK;
}

/* ------------------------------------------------------------------------ */
/* als_update_nonneg (ABI 1.5)                                               */
/* ------------------------------------------------------------------------ */

/* The terms of each coordinate's step beyond V and M (plugin.h,
 * th_nonneg_update_io, ABI 1.6): d = V(r,r) + ridge, l1 shrinks the
 * numerator, and nonneg clamps it at 0 (TH_CONSTRAINT_NONNEG) or not
 * (TH_CONSTRAINT_NONE). */
typedef struct hals_terms {
    double ridge, l1;
    bool nonneg;
} hals_terms;

/* The 1.6 fields of `io` into *terms, each read only when io->struct_size
 * holds it (else its default: ridge 0, l1 0, the bound), and
 * checked. */
static th_status nonneg_terms(const th_nonneg_update_io *io, hals_terms *terms, char *err)
{
    static const char function[] = "als_update_nonneg";
    const uint32_t size = io->struct_size;
    const double ridge = TH_HAS_FIELD(size, th_nonneg_update_io, ridge) ? io->ridge : 0.0;
    const double l1 = TH_HAS_FIELD(size, th_nonneg_update_io, l1) ? io->l1 : 0.0;
    const uint32_t unbounded =
        TH_HAS_FIELD(size, th_nonneg_update_io, unbounded) ? io->unbounded : 0u;
    if (!isfinite(ridge) || ridge < 0.0)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "%s: io.ridge %g must be finite and >= 0", function, ridge);
    if (!isfinite(l1) || l1 < 0.0)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "%s: io.l1 %g must be finite and >= 0", function, l1);
    if (unbounded > 1u)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "%s: io.unbounded %u must be 0 or 1", function, unbounded);
    *terms = (hals_terms){.ridge = ridge, .l1 = l1, .nonneg = unbounded == 0u};
    return TH_OK;
}

static th_status check_nonneg_arguments(const th_instance *inst, const th_nonneg_update_io *io,
                                        const th_als_output *out, hals_terms *terms, char *err)
{
    static const char function[] = "als_update_nonneg";
    if (inst == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "%s: the instance is NULL", function);
    if (!inst->loaded)
        return th_plugin_fail(err, TH_ERR_BAD_STATE,
                              "%s: no tensor loaded (call load_tensor first)", function);
    /* The fields of 1.5 are needed; those of 1.6 are read where the struct
     * holds them (nonneg_terms), and a longer struct, from a newer host, is
     * fine (plugin.h, "Growth"). */
    if (io == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "%s: io is NULL", function);
    if (io->struct_size < TH_NONNEG_UPDATE_IO_V1_5_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "%s: io.struct_size %u is shorter than the %zu bytes of "
                              "th_nonneg_update_io in ABI 1.5",
                              function, io->struct_size, (size_t)TH_NONNEG_UPDATE_IO_V1_5_SIZE);
    th_status status =
        check_update_arguments(inst, function, io->mode, io->v, "v", io->norm, out, err);
    if (status != TH_OK)
        return status;
    if (io->sweeps == 0)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "%s: io.sweeps is 0; at least one pass is needed", function);
    if (!isfinite(io->tolerance) || io->tolerance < 0.0)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "%s: io.tolerance %g must be finite and >= 0", function,
                              io->tolerance);
    status = nonneg_terms(io, terms, err);
    if (status != TH_OK)
        return status;
    return check_result_ready(inst, function, io->mode, err);
}

/* The update's starting point in the workspace: the factor with column r
 * times scale[r] (NULL: the factor as it is). */
static void scaled_factor(th_instance *inst, uint32_t mode, const double *scale, int threads)
{
    const int64_t rows = inst->dims[mode], rank = inst->rank;
    const double *a = inst->factors[mode];
    double *out = inst->update_rows;
    if (scale == NULL) {
        memcpy(out, a, (size_t)rows * (size_t)rank * sizeof *out);
        return;
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < rows; i++)
        for (int64_t r = 0; r < rank; r++)
            out[i * rank + r] = a[i * rank + r] * scale[r];
}

/* One row's part of a HALS pass (plugin.h's step 2), in the order of the
 * host's th_dense_hals_nonneg, so that both compute the same bits (with
 * ridge 0, l1 0 and the bound, max(0, n) / d is max(0, n / d) exactly);
 * returns the row's squared change. */
static double hals_row(double *restrict row, const double *restrict m_row,
                       const double *restrict v, int64_t rank, const hals_terms *terms)
{
    double change = 0.0;
    for (int64_t k = 0; k < rank; k++) {
        const double *v_col = v + k * rank; /* symmetric: row k */
        const double vkk = v_col[k];
        const double d = vkk + terms->ridge;
        if (d == 0.0)
            continue;
        double product = 0.0; /* (A V)(i, k), the columns before k already new */
        for (int64_t q = 0; q < rank; q++)
            product += row[q] * v_col[q];
        const double n = m_row[k] - product + vkk * row[k];
        double next;
        if (terms->nonneg) {
            next = fmax(0.0, n - terms->l1) / d;
        } else { /* sign(n) max(0, |n| - l1) / d; 0, never -0, where it shrinks away */
            const double shrunk = fabs(n) - terms->l1;
            next = shrunk > 0.0 ? copysign(shrunk, n) / d : 0.0;
        }
        change += (next - row[k]) * (next - row[k]);
        row[k] = next;
    }
    return change;
}

/* One HALS pass over the workspace's rows, blocks of CPU_REF_HALS_BLOCK_ROWS
 * on the team; the pass's squared change, each block's summed in row order
 * and the blocks' in block order (the same on any thread count). */
static double hals_pass(th_instance *inst, const double *m, const double *v, int64_t rows,
                        const hals_terms *terms, int threads)
{
    const int64_t rank = inst->rank;
    const int64_t blocks = (rows + CPU_REF_HALS_BLOCK_ROWS - 1) / CPU_REF_HALS_BLOCK_ROWS;
    double *a = inst->update_rows, *block_change = inst->update_changes;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t b = 0; b < blocks; b++) {
        const int64_t end = (b + 1) * CPU_REF_HALS_BLOCK_ROWS < rows
                                ? (b + 1) * CPU_REF_HALS_BLOCK_ROWS
                                : rows;
        double change = 0.0;
        for (int64_t i = b * CPU_REF_HALS_BLOCK_ROWS; i < end; i++)
            change += hals_row(a + i * rank, m + i * rank, v, rank, terms);
        block_change[b] = change;
    }
    double change = 0.0;
    for (int64_t b = 0; b < blocks; b++)
        change += block_change[b];
    return change;
}

/* Up to io->sweeps passes, stopping after the one whose change is at most
 * io->tolerance times the first's; the host is asked between passes
 * whether to stop (TH_ERR_CANCELLED: the factor is untouched, the passes
 * ran in the workspace). */
static th_status hals_passes(th_instance *inst, th_nonneg_update_io *io,
                             const hals_terms *terms, int threads, uint32_t *passes, char *err)
{
    const int64_t rows = inst->dims[io->mode];
    double first_change = 0.0;
    for (uint32_t pass = 0; pass < io->sweeps; pass++) {
        if (pass > 0 && th_plugin_stop_requested(inst->host))
            return th_plugin_fail(err, TH_ERR_CANCELLED,
                                  "als_update_nonneg(mode %u) given up after %u of at most %u "
                                  "passes: stop requested (the factor is unchanged)",
                                  io->mode, pass, io->sweeps);
        const double change =
            hals_pass(inst, inst->results[io->mode], io->v, rows, terms, threads);
        if (pass == 0)
            first_change = change;
        *passes = pass + 1;
        if (change <= io->tolerance * first_change)
            break;
    }
    return TH_OK;
}

/* als_update's step under A >= 0 (or, from 1.6, with ridge, l1 or no
 * bound): the scaled factor and the HALS passes in the workspace, then the
 * same column sums, Gram and commit as als_update's, so that the
 * normalisation and `out` are its own. */
static th_status cpu_reference_als_update_nonneg(th_instance *inst, th_nonneg_update_io *io,
                                                 th_als_output *out, char *err)
{
    hals_terms terms;
    th_status status = check_nonneg_arguments(inst, io, out, &terms, err);
    if (status == TH_OK)
        status = ensure_update_workspace(inst, err);
    if (status != TH_OK)
        return status;
    const uint32_t mode = io->mode;
    const int64_t rows = inst->dims[mode];
    const int threads = update_threads(inst, rows);
    uint32_t passes = 0;
    scaled_factor(inst, mode, io->scale, threads);
    status = hals_passes(inst, io, &terms, threads, &passes, err);
    if (status != TH_OK)
        return status;
    memset(inst->update_sums, 0, 2 * inst->scratch_stride * sizeof *inst->update_sums);
    const int64_t block = update_block_rows(inst->rank);
    const int previous_threads = blas_threads_begin(threads);
    for (int64_t first = 0; first < rows; first += block) {
        const int64_t count = rows - first < block ? rows - first : block;
        summarize_block(inst, inst->results[mode], first, count, io->norm, threads);
    }
    blas_threads_end(previous_threads);
    commit_update(inst, mode, io->norm, threads, out);
    io->passes = passes;
    return TH_OK;
}

/* ------------------------------------------------------------------------ */
/* init_factors (ABI 1.3)                                                    */
/* ------------------------------------------------------------------------ */

static th_status check_init_arguments(const th_instance *inst, const th_init_factors_io *io,
                                      char *err)
{
    if (inst == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "init_factors: the instance is NULL");
    if (!inst->loaded)
        return th_plugin_fail(err, TH_ERR_BAD_STATE,
                              "init_factors: no tensor loaded (call load_tensor first)");
    /* Every field read here is of 1.3; a longer struct, from a newer host,
     * is fine (plugin.h, "Growth"). */
    if (io == NULL || io->struct_size < TH_INIT_FACTORS_IO_V1_3_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "init_factors: th_init_factors_io is %s",
                              io == NULL ? "NULL" : "shorter than the one of ABI 1.3");
    if (io->nmodes != inst->nmodes)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "init_factors: io.nmodes is %u but the loaded tensor has %u modes",
                              io->nmodes, inst->nmodes);
    if (io->grams == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "init_factors: grams is NULL");
    for (uint32_t m = 0; m < inst->nmodes; m++)
        if (io->grams[m] == NULL)
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                  "init_factors: the Gram of mode %u is NULL", m);
    return TH_OK;
}

/* The seed's factors from the SDK's generator, the host's own: the values
 * set_factor would have received, bit for bit, and their Grams by the
 * host's own dsyrk call. */
static th_status cpu_reference_init_factors(th_instance *inst, th_init_factors_io *io,
                                            char *err)
{
    th_status status = check_init_arguments(inst, io, err);
    if (status != TH_OK)
        return status;
    const int64_t rank = inst->rank;
    const uint64_t seed = io->seed;
    const int previous_threads = blas_threads_begin(inst->threads);
    for (uint32_t mode = 0; mode < inst->nmodes; mode++) {
        const int64_t rows = inst->dims[mode];
        double *a_rows = inst->factors[mode];
#pragma omp parallel for schedule(static) num_threads(inst->threads)
        for (int64_t i = 0; i < rows; i++) {
            const uint64_t key = th_initial_factor_row_key(seed, mode, (uint64_t)i);
            for (int64_t r = 0; r < rank; r++)
                a_rows[i * rank + r] = th_initial_factor_from_row_key(key, (uint32_t)r);
        }
        gram_of_rows(a_rows, rows, rank, io->grams[mode]);
    }
    blas_threads_end(previous_threads);
    return TH_OK;
}

/* ------------------------------------------------------------------------ */
/* generalized_mttkrp and factor_update (ABI 1.4)                            */
/* ------------------------------------------------------------------------ */

/* Chunks per block of generalized_mttkrp: the host is asked whether to stop
 * between blocks (about a million nonzeros each). Chunks, hence results,
 * do not depend on it. */
#define CPU_REF_GENERALIZED_BLOCK_CHUNKS 256u
/* An elementwise factor operation on fewer entries than this runs on one
 * thread (waking a team costs more). */
#define CPU_REF_ELEMENTWISE_SERIAL_CELLS ((int64_t)1 << 16)

/* A generalized pass over mode `mode`'s layout: its result (unless
 * op->elementwise < 0) and the sum of h, summed per chunk and then over the
 * chunks in order, so it is the same whatever the thread count. Asks the
 * host between blocks of chunks whether to stop. */
static th_status generalized_pass(th_instance *inst, uint32_t mode, generalized_op *op,
                                  double *reduced, char *err)
{
    const mode_layout *l = &inst->layouts[mode];
    const uint32_t rank = inst->rank;
    const double *other_factors[CPU_REF_MAX_MODES];
    const uint32_t width = other_factors_of(inst, mode, other_factors);
    op->target = inst->factors[mode];
    op->wide = cpu_ref_use_wide();
    double *result = op->elementwise >= 0 ? inst->results[mode] : NULL;
    double *sums = inst->chunk_sums;
    const uint64_t chunks = l->chunks;
    const bool poisson = op->elementwise == TH_ELEMENTWISE_POISSON_RATIO ||
                         op->reduction == TH_REDUCTION_POISSON_LOG_LIKELIHOOD;
    for (uint64_t block = 0; block < chunks; block += CPU_REF_GENERALIZED_BLOCK_CHUNKS) {
        if (block > 0 && th_plugin_stop_requested(inst->host)) {
            if (result != NULL)
                inst->result_ready[mode] = false; /* partly overwritten */
            return th_plugin_fail(err, TH_ERR_CANCELLED,
                                  "generalized_mttkrp(mode %u) given up after %llu of %llu "
                                  "nonzeros: stop requested",
                                  mode, (unsigned long long)(block * CPU_REF_CHUNK_NNZ),
                                  (unsigned long long)l->nnz);
        }
        const int64_t stop = (int64_t)(block + CPU_REF_GENERALIZED_BLOCK_CHUNKS < chunks
                                           ? block + CPU_REF_GENERALIZED_BLOCK_CHUNKS
                                           : chunks);
#pragma omp parallel num_threads(inst->threads)
        {
            double *scratch =
                inst->scratch + (size_t)omp_get_thread_num() * 2 * inst->scratch_stride;
            const uint32_t saved = poisson ? cpu_ref_subnormals_off() : 0;
#pragma omp for schedule(dynamic, 1)
            for (int64_t c = (int64_t)block; c < stop; c++)
                generalized_chunk(l, other_factors, width, rank, (uint64_t)c, l->nnz, op,
                                  scratch, inst->boundary + (size_t)c * 2 * rank, result,
                                  &sums[c]);
            if (poisson)
                cpu_ref_subnormals_restore(saved);
        }
    }
    if (result != NULL)
        merge_boundaries(l, inst->dims[mode], rank, l->nnz, inst->boundary, result);
    double total = 0.0;
    for (uint64_t c = 0; c < chunks; c++)
        total += sums[c];
    *reduced = op->reduction == TH_REDUCTION_NONE ? 0.0 : total;
    return TH_OK;
}

static bool known_elementwise(int32_t elementwise)
{
    return elementwise == TH_ELEMENTWISE_VALUE || elementwise == TH_ELEMENTWISE_POISSON_RATIO ||
           elementwise == TH_ELEMENTWISE_RESIDUAL;
}

static bool known_reduction(int32_t reduction)
{
    return reduction == TH_REDUCTION_NONE || reduction == TH_REDUCTION_POISSON_LOG_LIKELIHOOD ||
           reduction == TH_REDUCTION_SQUARED_RESIDUAL || reduction == TH_REDUCTION_INNER_PRODUCT;
}

static th_status check_generalized_arguments(const th_instance *inst,
                                             const th_generalized_mttkrp_io *io, char *err)
{
    if (inst == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "generalized_mttkrp: the instance is NULL");
    if (!inst->loaded)
        return th_plugin_fail(err, TH_ERR_BAD_STATE,
                              "generalized_mttkrp: no tensor loaded (call load_tensor first)");
    /* Every field read here is of 1.4; a longer struct, from a newer host,
     * is fine (plugin.h, "Growth"). */
    if (io == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "generalized_mttkrp: io is NULL");
    if (io->struct_size < TH_GENERALIZED_MTTKRP_IO_V1_4_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "generalized_mttkrp: io.struct_size %u is shorter than the %zu "
                              "bytes of th_generalized_mttkrp_io in ABI 1.4",
                              io->struct_size, (size_t)TH_GENERALIZED_MTTKRP_IO_V1_4_SIZE);
    const bool has_mode = io->mode != TH_MODE_NONE;
    if (has_mode && io->mode >= inst->nmodes)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "generalized_mttkrp: io.mode %u is out of range; the tensor has %u "
                              "modes (0..%u), or TH_MODE_NONE",
                              io->mode, inst->nmodes, inst->nmodes - 1);
    if (has_mode && !known_elementwise(io->elementwise))
        return th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                              "generalized_mttkrp: io.elementwise %d is not a TH_ELEMENTWISE_* "
                              "function " CPU_REF_ID " knows",
                              (int)io->elementwise);
    if (!known_reduction(io->reduction))
        return th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                              "generalized_mttkrp: io.reduction %d is not a TH_REDUCTION_* "
                              CPU_REF_ID " knows",
                              (int)io->reduction);
    if (has_mode && io->elementwise == TH_ELEMENTWISE_POISSON_RATIO && !(io->epsilon > 0.0))
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "generalized_mttkrp: io.epsilon %g must be > 0 for "
                              "TH_ELEMENTWISE_POISSON_RATIO (it floors the divisor)",
                              io->epsilon);
    return TH_OK;
}

/* TH_ELEMENTWISE_VALUE is mttkrp() itself, bit for bit; the reduction, if
 * any, is a pass of its own. Otherwise one pass gives both. */
static th_status cpu_reference_generalized_mttkrp(th_instance *inst,
                                                  th_generalized_mttkrp_io *io, char *err)
{
    th_status status = check_generalized_arguments(inst, io, err);
    if (status != TH_OK)
        return status;
    const double start = now_seconds();
    const bool has_mode = io->mode != TH_MODE_NONE;
    generalized_op op = {.elementwise = -1, .reduction = io->reduction,
                         .epsilon = io->epsilon, .weights = io->weights, .target = NULL};
    double reduced = 0.0;
    if (has_mode && io->elementwise == TH_ELEMENTWISE_VALUE) {
        status = cpu_reference_mttkrp(inst, io->mode, err);
        if (status == TH_OK && io->reduction != TH_REDUCTION_NONE)
            status = generalized_pass(inst, io->mode, &op, &reduced, err);
    } else if (has_mode) {
        op.elementwise = io->elementwise;
        status = generalized_pass(inst, io->mode, &op, &reduced, err);
        if (status == TH_OK)
            inst->result_ready[io->mode] = true;
    } else if (io->reduction != TH_REDUCTION_NONE) {
        status = generalized_pass(inst, 0, &op, &reduced, err);
    }
    if (status != TH_OK)
        return status;
    if (has_mode)
        inst->last_seconds[io->mode] = now_seconds() - start;
    io->reduced = reduced;
    return TH_OK;
}

static th_status check_factor_arguments(const th_instance *inst, const th_factor_update_io *io,
                                        char *err)
{
    if (inst == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "factor_update: the instance is NULL");
    if (!inst->loaded)
        return th_plugin_fail(err, TH_ERR_BAD_STATE,
                              "factor_update: no tensor loaded (call load_tensor first)");
    if (io == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "factor_update: io is NULL");
    if (io->struct_size < TH_FACTOR_UPDATE_IO_V1_4_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "factor_update: io.struct_size %u is shorter than the %zu bytes of "
                              "th_factor_update_io in ABI 1.4",
                              io->struct_size, (size_t)TH_FACTOR_UPDATE_IO_V1_4_SIZE);
    if (io->mode >= inst->nmodes)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "factor_update: io.mode %u is out of range; the tensor has %u modes "
                              "(0..%u)",
                              io->mode, inst->nmodes, inst->nmodes - 1);
    switch (io->operation) {
    case TH_FACTOR_SCALE_COLUMNS:
    case TH_FACTOR_NORMALIZE_1:
        if (io->vector == NULL)
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                  "factor_update: io.vector is NULL; TH_FACTOR_%s needs [rank]",
                                  io->operation == TH_FACTOR_SCALE_COLUMNS ? "SCALE_COLUMNS"
                                                                          : "NORMALIZE_1");
        return TH_OK;
    case TH_FACTOR_MULTIPLICATIVE_UPDATE:
    case TH_FACTOR_RAISE_INADMISSIBLE_ZEROS: {
        const char *name = io->operation == TH_FACTOR_MULTIPLICATIVE_UPDATE
                               ? "MULTIPLICATIVE_UPDATE"
                               : "RAISE_INADMISSIBLE_ZEROS";
        if (isnan(io->tolerance))
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                  "factor_update: io.tolerance is NaN (TH_FACTOR_%s)", name);
        if (io->operation == TH_FACTOR_RAISE_INADMISSIBLE_ZEROS && !isfinite(io->offset))
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                  "factor_update: io.offset %g is not finite (TH_FACTOR_%s)",
                                  io->offset, name);
        if (io->operation == TH_FACTOR_RAISE_INADMISSIBLE_ZEROS && isnan(io->threshold))
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                  "factor_update: io.threshold is NaN (TH_FACTOR_%s)", name);
        if (!inst->result_ready[io->mode])
            return th_plugin_fail(err, TH_ERR_BAD_STATE,
                                  "factor_update: TH_FACTOR_%s reads Phi, but mode %u has no "
                                  "MTTKRP result yet (call generalized_mttkrp first)",
                                  name, io->mode);
        return TH_OK;
    }
    default:
        return th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                              "factor_update: io.operation %d is not a TH_FACTOR_* operation "
                              CPU_REF_ID " knows",
                              (int)io->operation);
    }
}

/* Elementwise passes over the factor, each thread on a static share of the
 * rows; the one sum (NORMALIZE_1's column sums) is taken per column in row
 * order whatever the thread count (column_share), the maximum and the count
 * are exact in any order. They are cheap (I x R), so the host is not asked
 * to stop inside one: it never sees a factor half updated. */
static th_status cpu_reference_factor_update(th_instance *inst, th_factor_update_io *io,
                                             char *err)
{
    th_status status = check_factor_arguments(inst, io, err);
    if (status != TH_OK)
        return status;
    const uint32_t mode = io->mode;
    const int64_t rows = inst->dims[mode], rank = inst->rank;
    const int64_t cells = rows * rank;
    const int threads = cells < CPU_REF_ELEMENTWISE_SERIAL_CELLS ? 1 : inst->threads;
    double *restrict a = inst->factors[mode];
    const double *restrict phi = inst->results[mode];
    double *restrict vector = io->vector;
    switch (io->operation) {
    case TH_FACTOR_SCALE_COLUMNS:
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t r = 0; r < rank; r++)
                a[i * rank + r] *= vector[r];
        break;
    case TH_FACTOR_NORMALIZE_1:
        for (int64_t r = 0; r < rank; r++)
            vector[r] = 0.0;
#pragma omp parallel num_threads(threads)
        {
            int64_t first = 0, last = 0;
            column_share(rank, omp_get_thread_num(), omp_get_num_threads(), &first, &last);
            for (int64_t i = 0; i < rows; i++)
                for (int64_t r = first; r < last; r++)
                    vector[r] += fabs(a[i * rank + r]);
        }
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t r = 0; r < rank; r++)
                if (vector[r] > 0.0)
                    a[i * rank + r] /= vector[r];
        break;
    case TH_FACTOR_MULTIPLICATIVE_UPDATE: {
        double violation = 0.0;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(max : violation)
        for (int64_t k = 0; k < cells; k++) {
            const double v = fabs(fmin(a[k], 1.0 - phi[k]));
            violation = v > violation ? v : violation;
        }
        io->violation = violation;
        io->count = 0;
        if (violation >= io->tolerance) {
#pragma omp parallel num_threads(threads)
            {
                const uint32_t saved = cpu_ref_subnormals_off();
#pragma omp for schedule(static)
                for (int64_t k = 0; k < cells; k++)
                    a[k] *= phi[k];
                cpu_ref_subnormals_restore(saved);
            }
            io->count = 1;
        }
        break;
    }
    default: { /* TH_FACTOR_RAISE_INADMISSIBLE_ZEROS */
        uint64_t changed = 0;
        const double tolerance = io->tolerance, offset = io->offset, threshold = io->threshold;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(+ : changed)
        for (int64_t k = 0; k < cells; k++)
            if (phi[k] > threshold && a[k] < tolerance) {
                a[k] += offset;
                changed++;
            }
        io->count = changed;
        break;
    }
    }
    return TH_OK;
}

/* ------------------------------------------------------------------------ */
/* multiplicative_updates (ABI 1.7)                                          */
/* ------------------------------------------------------------------------ */

static th_status check_multiplicative_arguments(const th_instance *inst,
                                                const th_multiplicative_updates_io *io, char *err)
{
    if (inst == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "multiplicative_updates: the instance is NULL");
    if (!inst->loaded)
        return th_plugin_fail(err, TH_ERR_BAD_STATE,
                              "multiplicative_updates: no tensor loaded (call load_tensor first)");
    if (io == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "multiplicative_updates: io is NULL");
    if (io->struct_size < TH_MULTIPLICATIVE_UPDATES_IO_V1_7_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "multiplicative_updates: io.struct_size %u is shorter than the %zu "
                              "bytes of th_multiplicative_updates_io in ABI 1.7",
                              io->struct_size, (size_t)TH_MULTIPLICATIVE_UPDATES_IO_V1_7_SIZE);
    if (io->mode >= inst->nmodes)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "multiplicative_updates: io.mode %u is out of range; the tensor "
                              "has %u modes (0..%u)",
                              io->mode, inst->nmodes, inst->nmodes - 1);
    if (io->elementwise != TH_ELEMENTWISE_POISSON_RATIO)
        return th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                              "multiplicative_updates: io.elementwise %d is not "
                              "TH_ELEMENTWISE_POISSON_RATIO, the one " CPU_REF_ID " runs",
                              (int)io->elementwise);
    if (io->max_iterations == 0)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "multiplicative_updates: io.max_iterations is 0 (at least 1)");
    if (!(io->epsilon > 0.0))
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "multiplicative_updates: io.epsilon %g must be > 0 (it floors "
                              "the divisor)",
                              io->epsilon);
    if (isnan(io->tolerance))
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "multiplicative_updates: io.tolerance is NaN");
    return TH_OK;
}

/* The host's loop itself (plugin.h), for a mode with a row of more than
 * 1/CPU_REF_MU_HOT_ROW_SHARE of its nonzeros: row by row, that row would
 * keep one thread busy while the others wait (the loop shares every row
 * out by nonzeros). The rule does not depend on the thread count, and
 * neither path's result does. */
#define CPU_REF_MU_HOT_ROW_SHARE 8u
static th_status multiplicative_loop(th_instance *inst, th_multiplicative_updates_io *io,
                                     char *err)
{
    uint32_t iterations = 0, updates = 0;
    double violation = 0.0;
    for (uint32_t i = 0; i < io->max_iterations; i++) {
        th_generalized_mttkrp_io phi = {.struct_size = (uint32_t)sizeof phi,
                                        .mode = io->mode,
                                        .elementwise = io->elementwise,
                                        .reduction = TH_REDUCTION_NONE,
                                        .epsilon = io->epsilon};
        th_status status = cpu_reference_generalized_mttkrp(inst, &phi, err);
        if (status != TH_OK)
            return status;
        th_factor_update_io update = {.struct_size = (uint32_t)sizeof update,
                                      .mode = io->mode,
                                      .operation = TH_FACTOR_MULTIPLICATIVE_UPDATE,
                                      .tolerance = io->tolerance};
        status = cpu_reference_factor_update(inst, &update, err);
        if (status != TH_OK)
            return status; /* the out-fields unwritten, as plugin.h says */
        iterations = i + 1;
        updates += (uint32_t)update.count;
        violation = update.violation;
        if (update.count == 0)
            break;
    }
    io->iterations = iterations;
    io->updates = updates;
    io->violation = violation;
    return TH_OK;
}

static th_status cpu_reference_multiplicative_updates(th_instance *inst,
                                                      th_multiplicative_updates_io *io, char *err)
{
    th_status status = check_multiplicative_arguments(inst, io, err);
    if (status != TH_OK)
        return status;
    const double start = now_seconds();
    const uint32_t mode = io->mode;
    const mode_layout *l = &inst->layouts[mode];
    uint64_t busiest = 0;
    for (uint32_t row = 0; row < inst->dims[mode]; row++) {
        const uint64_t n = l->row_start[row + 1] - l->row_start[row];
        busiest = n > busiest ? n : busiest;
    }
    if (busiest > l->nnz / CPU_REF_MU_HOT_ROW_SHARE) {
        status = multiplicative_loop(inst, io, err);
        if (status != TH_OK)
            return status;
    } else {
        const double *other_factors[CPU_REF_MAX_MODES];
        const uint32_t width = other_factors_of(inst, mode, other_factors);
        const size_t product_doubles = cpu_ref_mu_product_doubles();
        if (inst->mu_products == NULL || inst->mu_product_doubles != product_doubles) {
            free(inst->mu_products);
            inst->workspace_bytes -=
                (uint64_t)inst->threads * inst->mu_product_doubles * sizeof(double);
            inst->mu_product_doubles = 0;
            /* On cache lines: each block of the cache is whole lines, so no
             * vector load of it straddles two. */
            const size_t cache_bytes = (size_t)inst->threads * product_doubles * sizeof(double);
            inst->mu_products = aligned_alloc(64, (cache_bytes / 64 + 1) * 64);
            if (inst->mu_products == NULL)
                return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY,
                                      "multiplicative_updates: no memory for %d caches of %zu "
                                      "bytes",
                                      inst->threads, product_doubles * sizeof(double));
            inst->mu_product_doubles = product_doubles;
            inst->workspace_bytes += (uint64_t)inst->threads * product_doubles * sizeof(double);
        }
        const mu_problem problem = {.layout = l,
                                    .products = inst->mu_products,
                                    .product_doubles = product_doubles,
                                    .other_factors = other_factors,
                                    .width = width,
                                    .rank = inst->rank,
                                    .rows = inst->dims[mode],
                                    .factor = inst->factors[mode],
                                    .result = inst->results[mode],
                                    .threads = inst->threads,
                                    .wide = cpu_ref_use_wide(),
                                    .host = inst->host};
        inst->result_ready[mode] = false; /* until the call completes */
        status = cpu_ref_multiplicative_updates(&problem, io, err);
        if (status != TH_OK)
            return status;
        inst->result_ready[mode] = true;
    }
    inst->last_seconds[mode] = now_seconds() - start;
    return TH_OK;
}

/* ------------------------------------------------------------------------ */
/* row_least_squares (ABI 1.5)                                               */
/* ------------------------------------------------------------------------ */

/* Each row's normal equations are built a panel of nonzeros at a time: the
 * row products h_i of up to `panel_rows` of the row's nonzeros gathered into
 * a small contiguous matrix (rows of ld doubles, ld the rank rounded up to
 * 8, zero past the rank), b summed as they are gathered, then the panel's
 * rank-p update of G in register tiles (panel_update), which stream the
 * panel from L1 and touch G once a panel, where a nonzero at a time G would
 * go through memory at every nonzero. V = G + ridge I is factorised in
 * place by a Cholesky that is right-looking in blocks of 8 rows, each
 * block's update of the trailing rows in the same tiles; G is kept beside
 * it for the row's residual. The solve runs in vectors of four (solve_row,
 * its AVX2 clone and its baseline), or of eight on CPUs with AVX-512
 * (solve_row_wide). Every entry of G and b is a plain sum over the row's
 * nonzeros in their order, and every entry of the factor gets its updates
 * in the order of the unblocked form, whatever the panel size, the tile or
 * the vector width, and ISO C contracts no FMA: so a row's result depends
 * on nothing but its own data, not on the thread that solves it, the
 * thread count or which copy runs. (dsyrk of the panel from the BLAS lost
 * to the tiles up to rank 64 even with OpenBLAS's AVX-512 kernels, and at
 * every rank with the SSE3 ones that OpenBLAS 0.3.21 picks on CPUs newer
 * than it: a triangle of R x R is too small an update for its packing to
 * pay. FMA in the tiles took another 25% off at rank 32, at the price of
 * results that differ between CPUs with and without it.)
 *
 * Rows are solved in blocks of at least this much work (a row's estimate
 * is (its nonzeros + R + passes) R^2 multiply-adds: its normal equations,
 * then the Cholesky solve or the coordinate descent's passes), a twentieth
 * to a fifth of a second on one core (ranks 64 to 8), and of at least
 * CPU_REF_RLS_BLOCK_ROWS_PER_THREAD rows per thread of the team, so that
 * dynamic scheduling has rows to balance; the host is asked between blocks
 * whether to stop. Blocks only decide where a stop can happen: no row's
 * arithmetic depends on them. */
#define CPU_REF_RLS_BLOCK_WORK 1e9
#define CPU_REF_RLS_BLOCK_ROWS_PER_THREAD 16
/* A block's rows are cut into runs of consecutive rows of about equal work,
 * this many per thread (a row of a tenth of the block's nonzeros is a run of
 * its own), handed out dynamically, the runs of most work first, so that no
 * thread is left with a long row at the end. */
#define CPU_REF_RLS_RUNS_PER_THREAD 16
/* The per-thread workspaces (G and V, ld x ld each, and the panel) of all
 * threads together stay under this: at large ranks the team is cut to fit
 * (rank 4096: 256 MiB a thread, so 4 threads), which changes the time, not
 * the result. */
#define CPU_REF_RLS_WORKSPACE_BYTES ((size_t)1 << 30)
/* A panel holds this many bytes of row products (it stays in L1 while the
 * tiles sweep it), and at least CPU_REF_RLS_PANEL_MIN_ROWS of them: 256
 * rows at rank 8, 64 at rank 32, 16 from rank 128. */
#define CPU_REF_RLS_PANEL_BYTES ((size_t)16 << 10)
#define CPU_REF_RLS_PANEL_MIN_ROWS 16u
/* factor_norm_squared and residual_squared are summed in blocks of this
 * many rows, each in row order, the blocks' sums then in block order: the
 * same bits whatever the thread count. */
#define CPU_REF_NORM_BLOCK_ROWS 1024

/* The row solve's helpers are inlined into solve_row_body, so that each
 * copy of it (solve_row's clones, solve_row_wide) compiles them for its
 * CPU. */
#if CPU_REF_HAVE_V4
#define CPU_REF_RLS_INLINE inline CPU_REF_ALWAYS_INLINE
#else
#define CPU_REF_RLS_INLINE inline
#endif
/* What every row's solve reads: the mode's layout, the other factors in the
 * layout's order, and the io's parameters. */
typedef struct rls_task {
    const mode_layout *layout;
    const double *other_factors[CPU_REF_MAX_MODES];
    uint32_t width; /* nmodes - 1 */
    uint32_t rank;
    uint32_t ld;         /* rank rounded up to 8: the row stride of G, V and the panel */
    uint32_t panel_rows; /* nonzeros per panel (CPU_REF_RLS_PANEL_BYTES) */
    bool wide;           /* rows by solve_row_wide (AVX-512) */
    double ridge;
    bool nonneg;
    uint32_t passes;
    double *factor; /* A_mode, rows replaced in place */
} rls_task;

/* One thread's workspace, each array on cache lines of its own, zeroed at
 * the start of the call, so that every entry of the ld x ld arrays is
 * defined (the tiles and the Cholesky's whole vectors read some that no
 * row writes). */
typedef struct rls_workspace {
    double *g;     /* [ld * ld]: G, summed in its upper triangle */
    double *v;     /* [ld * ld]: V = G + ridge I, factorised in place */
    double *panel; /* [panel_rows * ld]: row products, zero past the rank */
    double *b;     /* [ld] */
    double *x;     /* [ld]: b, taken off by the forward substitution */
    double *w;     /* [ld]: the solution, then the residual's partial sums */
} rls_workspace;

/* Consecutive rows [first, end) of a block, solved by one thread. */
typedef struct rls_run {
    uint32_t first, end;
    double work;
} rls_run;

typedef enum { RLS_SOLVED, RLS_SINGULAR, RLS_EMPTY } rls_outcome;

static th_status check_rls_arguments(const th_instance *inst, const th_row_least_squares_io *io,
                                     char *err)
{
    if (inst == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "row_least_squares: the instance is NULL");
    if (!inst->loaded)
        return th_plugin_fail(err, TH_ERR_BAD_STATE,
                              "row_least_squares: no tensor loaded (call load_tensor first)");
    /* Every field read or written here is of 1.5; a longer struct, from a
     * newer host, is fine (plugin.h, "Growth"). */
    if (io == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "row_least_squares: io is NULL");
    if (io->struct_size < TH_ROW_LEAST_SQUARES_IO_V1_5_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "row_least_squares: io.struct_size %u is shorter than the %zu "
                              "bytes of th_row_least_squares_io in ABI 1.5",
                              io->struct_size, (size_t)TH_ROW_LEAST_SQUARES_IO_V1_5_SIZE);
    if (io->mode >= inst->nmodes)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "row_least_squares: io.mode %u is out of range; the tensor has %u "
                              "modes (0..%u)",
                              io->mode, inst->nmodes, inst->nmodes - 1);
    if (!isfinite(io->ridge) || io->ridge < 0.0)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "row_least_squares: io.ridge %g must be finite and >= 0",
                              io->ridge);
    if (io->nonneg > 1)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "row_least_squares: io.nonneg %u must be 0 or 1", io->nonneg);
    if (io->nonneg == 1 && io->passes == 0)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "row_least_squares: io.passes is 0 with io.nonneg 1; at least one "
                              "pass of coordinate descent is needed");
    return TH_OK;
}

/* `count` doubles rounded up to whole cache lines. */
static size_t rls_lines(size_t count)
{
    const size_t per_line = CPU_REF_CACHE_LINE / sizeof(double);
    return (count + per_line - 1) / per_line * per_line;
}

/* Nonzeros per panel at row stride ld (CPU_REF_RLS_PANEL_BYTES). */
static uint32_t rls_panel_rows(uint32_t ld)
{
    const size_t rows = CPU_REF_RLS_PANEL_BYTES / ((size_t)ld * sizeof(double));
    return rows > CPU_REF_RLS_PANEL_MIN_ROWS ? (uint32_t)rows : CPU_REF_RLS_PANEL_MIN_ROWS;
}

/* Doubles of one thread's workspace (rls_workspace). */
static size_t rls_workspace_doubles(const rls_task *task)
{
    const size_t ld = task->ld;
    return 2 * rls_lines(ld * ld) + rls_lines((size_t)task->panel_rows * ld) + 3 * rls_lines(ld);
}

/* Thread `t`'s workspace in `base` (rls_workspace_doubles each), zeroed. */
static rls_workspace rls_workspace_at(const rls_task *task, double *base, int t)
{
    const size_t ld = task->ld, doubles = rls_workspace_doubles(task);
    double *at = base + (size_t)t * doubles;
    memset(at, 0, doubles * sizeof *at);
    rls_workspace ws;
    ws.g = at;
    ws.v = ws.g + rls_lines(ld * ld);
    ws.panel = ws.v + rls_lines(ld * ld);
    ws.b = ws.panel + rls_lines((size_t)task->panel_rows * ld);
    ws.x = ws.b + rls_lines(ld);
    ws.w = ws.x + rls_lines(ld);
    return ws;
}

/* h = Hadamard product of the other factors' rows of nonzero k, multiplied
 * in the layout's mode order, and b += x h (each b_r a sum in nonzero
 * order). */
static CPU_REF_RLS_INLINE void gather_row_product(const rls_task *task, uint64_t k,
                                                  double *restrict h, double *restrict b)
{
    const uint32_t rank = task->rank, width = task->width;
    const uint32_t *idx = task->layout->others + k * width;
    const double x = task->layout->values[k];
    const double *restrict first = task->other_factors[0] + (size_t)idx[0] * rank;
    if (width == 1) {
        for (uint32_t r = 0; r < rank; r++) {
            h[r] = first[r];
            b[r] += x * first[r];
        }
        return;
    }
    const double *restrict second = task->other_factors[1] + (size_t)idx[1] * rank;
    if (width == 2) {
        for (uint32_t r = 0; r < rank; r++) {
            const double hr = first[r] * second[r];
            h[r] = hr;
            b[r] += x * hr;
        }
        return;
    }
    const double *restrict third = task->other_factors[2] + (size_t)idx[2] * rank;
    if (width == 3) {
        for (uint32_t r = 0; r < rank; r++) {
            const double hr = first[r] * second[r] * third[r];
            h[r] = hr;
            b[r] += x * hr;
        }
        return;
    }
    for (uint32_t r = 0; r < rank; r++)
        h[r] = first[r] * second[r] * third[r];
    for (uint32_t j = 3; j < width; j++) {
        const double *restrict next = task->other_factors[j] + (size_t)idx[j] * rank;
        for (uint32_t r = 0; r < rank; r++)
            h[r] *= next[r];
    }
    for (uint32_t r = 0; r < rank; r++)
        b[r] += x * h[r];
}

#if CPU_REF_HAVE_V4
/* Rows r0 .. r0+3 and columns s0 .. s0+7 of g (row stride ld) += (or -=,
 * `subtract`) the sum over the p rows u of `panel` (row stride ld) of
 * u_r u_s, from zero when `fresh`, each entry's terms in the panel's row
 * order: eight vector accumulators held in registers over the panel. G's
 * update by a panel of row products, and the Cholesky's by a block of
 * rows of U. */
static CPU_REF_RLS_INLINE void tile4(const double *restrict panel, uint32_t p, uint32_t ld,
                                     uint32_t r0, uint32_t s0, bool fresh, const bool subtract,
                                     double *restrict g)
{
    cpu_ref_v4d acc[4][2];
    CPU_REF_UNROLL_V4
    for (uint32_t i = 0; i < 4; i++)
        CPU_REF_UNROLL_V4
        for (uint32_t v = 0; v < 2; v++) {
            if (fresh)
                acc[i][v] = (cpu_ref_v4d){0.0, 0.0, 0.0, 0.0};
            else
                cpu_ref_load4(&acc[i][v], g + (size_t)(r0 + i) * ld + s0 + 4 * v);
        }
    for (uint32_t k = 0; k < p; k++) {
        const double *restrict u = panel + (size_t)k * ld;
        cpu_ref_v4d columns[2];
        cpu_ref_load4(&columns[0], u + s0);
        cpu_ref_load4(&columns[1], u + s0 + 4);
        CPU_REF_UNROLL_V4
        for (uint32_t i = 0; i < 4; i++) {
            const double ur = u[r0 + i];
            const cpu_ref_v4d row = {ur, ur, ur, ur};
            if (subtract) {
                acc[i][0] -= row * columns[0];
                acc[i][1] -= row * columns[1];
            } else {
                acc[i][0] += row * columns[0];
                acc[i][1] += row * columns[1];
            }
        }
    }
    CPU_REF_UNROLL_V4
    for (uint32_t i = 0; i < 4; i++)
        CPU_REF_UNROLL_V4
        for (uint32_t v = 0; v < 2; v++)
            memcpy(g + (size_t)(r0 + i) * ld + s0 + 4 * v, &acc[i][v], sizeof acc[i][v]);
}

/* tile4 for rows r0 .. r0+7, a vector of eight per row: eight accumulators
 * again, each twice as wide (registers of AVX-512 in solve_row_wide). */
static CPU_REF_RLS_INLINE void tile8(const double *restrict panel, uint32_t p, uint32_t ld,
                                     uint32_t r0, uint32_t s0, bool fresh, const bool subtract,
                                     double *restrict g)
{
    cpu_ref_v8d acc[8];
    CPU_REF_UNROLL_V4
    for (uint32_t i = 0; i < 8; i++) {
        if (fresh)
            acc[i] = (cpu_ref_v8d){0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
        else
            memcpy(&acc[i], g + (size_t)(r0 + i) * ld + s0, sizeof acc[i]);
    }
    for (uint32_t k = 0; k < p; k++) {
        const double *restrict u = panel + (size_t)k * ld;
        cpu_ref_v8d columns;
        memcpy(&columns, u + s0, sizeof columns);
        CPU_REF_UNROLL_V4
        for (uint32_t i = 0; i < 8; i++) {
            const double ur = u[r0 + i];
            const cpu_ref_v8d row = {ur, ur, ur, ur, ur, ur, ur, ur};
            if (subtract)
                acc[i] -= row * columns;
            else
                acc[i] += row * columns;
        }
    }
    CPU_REF_UNROLL_V4
    for (uint32_t i = 0; i < 8; i++)
        memcpy(g + (size_t)(r0 + i) * ld + s0, &acc[i], sizeof acc[i]);
}
#endif

/* The rows r0 >= first of g (row stride ld, a multiple of 8), columns from
 * the 8 x 8 block holding the diagonal to ld, +=, or -= when `subtract`,
 * the sum over the panel's p rows u of u_r u_s, from zero when `fresh`:
 * the upper triangle and, in the blocks on the diagonal, a few entries
 * below it (and past the rank, which the panels hold zero), which nothing
 * reads. In tiles of 4 x 8 entries in vectors of four, or 8 x 8 in vectors
 * of eight when `wide`; every entry's terms in the panel's row order,
 * whatever the tile, so both compute the same bits. */
static CPU_REF_RLS_INLINE void panel_update(const double *restrict panel, uint32_t p,
                                            uint32_t ld, uint32_t first, bool fresh,
                                            const bool subtract, const bool wide,
                                            double *restrict g)
{
#if CPU_REF_HAVE_V4
    if (wide) {
        for (uint32_t r0 = first; r0 < ld; r0 += 8)
            for (uint32_t s0 = r0; s0 < ld; s0 += 8)
                tile8(panel, p, ld, r0, s0, fresh, subtract, g);
        return;
    }
    for (uint32_t r0 = first; r0 < ld; r0 += 4)
        for (uint32_t s0 = r0 / 8 * 8; s0 < ld; s0 += 8)
            tile4(panel, p, ld, r0, s0, fresh, subtract, g);
#else
    (void)wide;
    for (uint32_t r = first; r < ld; r++)
        for (uint32_t s = r / 8 * 8; s < ld; s++) {
            double sum = fresh ? 0.0 : g[(size_t)r * ld + s];
            for (uint32_t k = 0; k < p; k++) {
                const double term = panel[(size_t)k * ld + r] * panel[(size_t)k * ld + s];
                sum = subtract ? sum - term : sum + term;
            }
            g[(size_t)r * ld + s] = sum;
        }
#endif
}

/* w[0, n) -= c u[0, n) (c = 0 with `scale`: u *= inverse instead), n a
 * multiple of 8, in vectors of eight when `wide`, else of four. */
static CPU_REF_RLS_INLINE void row_op(const double *restrict u, double *restrict w, uint32_t n,
                                      double c, const bool wide)
{
#if CPU_REF_HAVE_V4
    if (wide) {
        const cpu_ref_v8d factor = {c, c, c, c, c, c, c, c};
        for (uint32_t j = 0; j < n; j += 8) {
            cpu_ref_v8d x, y;
            memcpy(&x, u + j, sizeof x);
            memcpy(&y, w + j, sizeof y);
            y -= factor * x;
            memcpy(w + j, &y, sizeof y);
        }
        return;
    }
    const cpu_ref_v4d factor = {c, c, c, c};
    for (uint32_t j = 0; j < n; j += 4) {
        cpu_ref_v4d x, y;
        cpu_ref_load4(&x, u + j);
        cpu_ref_load4(&y, w + j);
        y -= factor * x;
        memcpy(w + j, &y, sizeof y);
    }
#else
    (void)wide;
    for (uint32_t j = 0; j < n; j++)
        w[j] -= c * u[j];
#endif
}

/* u[0, n) *= c, n a multiple of 8, in vectors of eight when `wide`, else
 * of four. */
static CPU_REF_RLS_INLINE void row_scale(double *restrict u, uint32_t n, double c,
                                         const bool wide)
{
#if CPU_REF_HAVE_V4
    if (wide) {
        const cpu_ref_v8d scale = {c, c, c, c, c, c, c, c};
        for (uint32_t j = 0; j < n; j += 8) {
            cpu_ref_v8d x;
            memcpy(&x, u + j, sizeof x);
            x *= scale;
            memcpy(u + j, &x, sizeof x);
        }
        return;
    }
    const cpu_ref_v4d scale = {c, c, c, c};
    for (uint32_t j = 0; j < n; j += 4) {
        cpu_ref_v4d x;
        cpu_ref_load4(&x, u + j);
        x *= scale;
        memcpy(u + j, &x, sizeof x);
    }
#else
    (void)wide;
    for (uint32_t j = 0; j < n; j++)
        u[j] *= c;
#endif
}


/* The row's sum of squared residuals from its own system: x^T x - 2 a^T b
 * + a^T G a, G's upper triangle read from g (row stride ld); `w` is
 * scratch of R doubles. */
static CPU_REF_RLS_INLINE double row_residual(const double *restrict g, uint32_t ld,
                                              const double *restrict b, double xx,
                                              const double *restrict a, uint32_t rank,
                                              double *restrict w)
{
    /* w_s = sum_{r < s} a_r G(r,s), by rows of the upper triangle. */
    for (uint32_t s = 0; s < rank; s++)
        w[s] = 0.0;
    for (uint32_t r = 0; r + 1 < rank; r++) {
        const double ar = a[r];
        const double *restrict g_row = g + (size_t)r * ld;
        for (uint32_t s = r + 1; s < rank; s++)
            w[s] += ar * g_row[s];
    }
    double ab = 0.0, aga = 0.0;
    for (uint32_t r = 0; r < rank; r++) {
        aga += a[r] * (g[(size_t)r * ld + r] * a[r] + 2.0 * w[r]);
        ab += a[r] * b[r];
    }
    return xx - 2.0 * ab + aga;
}

/* V = U^T U, U upper triangular, in place in the upper triangle of the
 * n x n `v` (row stride ld, a multiple of 8; every entry of the ld x ld
 * array defined), with plugin.h's breakdown test: a pivot not above
 * max_i v(i,i) * n * DBL_EPSILON * TH_SOLVE_BREAKDOWN_FACTOR (NaN
 * included) is a breakdown, and false is returned. Right-looking in blocks
 * of 8 rows: each row of the block scaled by 1 / u_kk (as LAPACK's dpotf2
 * scales) and taken off the block's later rows, then the block's update of
 * the trailing rows in tiles (panel_update). Each entry of U gets its
 * updates in the order of k, as in the unblocked and the left-looking
 * forms. The rows run over whole vectors from the block holding the
 * diagonal to ld, so entries below the diagonal and past n change too;
 * nothing reads them. */
static CPU_REF_RLS_INLINE bool cholesky_upper(double *restrict v, uint32_t n, uint32_t ld,
                                              const bool wide)
{
    double largest = 0.0;
    for (uint32_t i = 0; i < n; i++)
        largest = v[(size_t)i * ld + i] > largest ? v[(size_t)i * ld + i] : largest;
    const double threshold = largest * n * DBL_EPSILON * TH_SOLVE_BREAKDOWN_FACTOR;
    for (uint32_t block = 0; block < n; block += 8) {
        const uint32_t end = block + 8 < n ? block + 8 : n;
        for (uint32_t k = block; k < end; k++) {
            double *restrict row_k = v + (size_t)k * ld;
            const double pivot = row_k[k];
            if (!(pivot > threshold))
                return false;
            const double diagonal = sqrt(pivot);
            row_scale(row_k + block, ld - block, 1.0 / diagonal, wide);
            row_k[k] = diagonal;
            for (uint32_t i = k + 1; i < end; i++)
                row_op(row_k + block, v + (size_t)i * ld + block, ld - block, row_k[i], wide);
        }
        if (end < n)
            panel_update(v + (size_t)block * ld, end - block, ld, end, false, true, wide, v);
    }
    return true;
}

/* y = (U^T U)^-1 x, U the upper triangle of the n x n `u` (row stride ld,
 * a multiple of 8). Forward, U^T z = x: z_k = x_k / u_kk, then z_k times
 * row k of U off x, over whole vectors from the block holding k (x's
 * entries up to k, spent, take what they take); back, U y = z, by the
 * columns of U. x is ld long. */
static CPU_REF_RLS_INLINE void cholesky_solve_upper(const double *restrict u, uint32_t n,
                                                    uint32_t ld, double *restrict x,
                                                    double *restrict y, const bool wide)
{
    for (uint32_t k = 0; k < n; k++) {
        const double *restrict row_k = u + (size_t)k * ld;
        y[k] = x[k] / row_k[k];
        row_op(row_k + k / 8 * 8, x + k / 8 * 8, ld - k / 8 * 8, y[k], wide);
    }
    for (uint32_t k = n; k-- > 0;) {
        const double yk = y[k] / u[(size_t)k * ld + k];
        y[k] = yk;
        for (uint32_t i = 0; i < k; i++)
            y[i] -= u[(size_t)i * ld + k] * yk;
    }
}

/* `passes` sweeps of coordinate descent on min a^T V a / 2 - b^T a, a >= 0,
 * V = G + ridge I (all of it, row stride ld), from `a` as it is, r = 0 ..
 * R-1 in order, as plugin.h states it: d = V(r,r), a_r <- max(0, a_r +
 * (b_r - (V a)_r) / d), and a_r <- 0 where d = 0. */
static CPU_REF_RLS_INLINE void nonneg_coordinate_descent(const double *restrict v,
                                                         const double *restrict b, uint32_t rank,
                                                         uint32_t ld, uint32_t passes,
                                                         double *restrict a)
{
    for (uint32_t pass = 0; pass < passes; pass++)
        for (uint32_t r = 0; r < rank; r++) {
            const double *restrict v_row = v + (size_t)r * ld;
            const double d = v_row[r];
            if (d == 0.0) {
                a[r] = 0.0;
                continue;
            }
            const double next = a[r] + (b[r] - cpu_ref_dot4(v_row, a, rank)) / d;
            a[r] = next > 0.0 ? next : 0.0;
        }
}

/* Row `row` of the factor replaced by its solution (th_row_least_squares_io),
 * and *residual its sum of squared residuals after (0 for an empty row);
 * `wide`: G and the Cholesky in vectors of eight (solve_row_wide). */
static CPU_REF_RLS_INLINE rls_outcome solve_row_body(const rls_task *task, uint32_t row,
                                                     const rls_workspace *ws, double *residual,
                                                     const bool wide)
{
    const uint32_t rank = task->rank, ld = task->ld, panel_rows = task->panel_rows;
    const uint64_t begin = task->layout->row_start[row], end = task->layout->row_start[row + 1];
    double *restrict a = task->factor + (size_t)row * rank;
    *residual = 0.0;
    if (begin == end) {
        if (task->ridge > 0.0)
            memset(a, 0, rank * sizeof *a); /* ridge * ||a||^2 alone: its minimiser */
        return RLS_EMPTY;
    }
    double *restrict g = ws->g, *restrict v = ws->v, *restrict panel = ws->panel;
    double *restrict b = ws->b, *restrict x = ws->x;
    const double *restrict values = task->layout->values;
    memset(b, 0, rank * sizeof *b);
    double xx = 0.0;
    for (uint64_t first = begin; first < end; first += panel_rows) {
        const uint32_t p = end - first < panel_rows ? (uint32_t)(end - first) : panel_rows;
        for (uint32_t k = 0; k < p; k++) {
            xx += values[first + k] * values[first + k];
            gather_row_product(task, first + k, panel + (size_t)k * ld, b);
        }
        panel_update(panel, p, ld, 0, first == begin, false, wide, g);
    }
    rls_outcome outcome = RLS_SOLVED;
    if (task->nonneg) {
        for (uint32_t r = 0; r < rank; r++) {
            for (uint32_t s = r; s < rank; s++)
                v[(size_t)r * ld + s] = v[(size_t)s * ld + r] = g[(size_t)r * ld + s];
            v[(size_t)r * ld + r] += task->ridge;
        }
        nonneg_coordinate_descent(v, b, rank, ld, task->passes, a);
    } else if (task->ridge == 0.0 && end - begin < rank) {
        /* G is exactly singular; rounding must not decide (plugin.h). */
        outcome = RLS_SINGULAR;
    } else {
        for (uint32_t r = 0; r < ld; r++) {
            const size_t from = (size_t)r * ld + r / 8 * 8;
            memcpy(v + from, g + from, (ld - r / 8 * 8) * sizeof *v);
        }
        for (uint32_t r = 0; r < rank; r++)
            v[(size_t)r * ld + r] += task->ridge;
        if (!cholesky_upper(v, rank, ld, wide)) {
            outcome = RLS_SINGULAR; /* the row is left as it was */
        } else {
            memcpy(x, b, ld * sizeof *x);
            cholesky_solve_upper(v, rank, ld, x, ws->w, wide);
            memcpy(a, ws->w, rank * sizeof *a);
        }
    }
    *residual = row_residual(g, ld, b, xx, a, rank, ws->w);
    return outcome;
}

CPU_REF_VECTOR_CLONES
static rls_outcome solve_row(const rls_task *task, uint32_t row, const rls_workspace *ws,
                             double *residual)
{
    return solve_row_body(task, row, ws, residual, false);
}

#if CPU_REF_WIDE
/* solve_row for CPUs with AVX-512 (rls_task.wide). */
__attribute__((target("arch=x86-64-v4"))) static rls_outcome
solve_row_wide(const rls_task *task, uint32_t row, const rls_workspace *ws, double *residual)
{
    return solve_row_body(task, row, ws, residual, true);
}
#endif

/* A row's work estimate in multiply-adds (CPU_REF_RLS_BLOCK_WORK). */
static double rls_row_work(const rls_task *task, uint32_t row)
{
    const uint64_t *start = task->layout->row_start;
    const double solve = (double)task->rank + (task->nonneg ? (double)task->passes : 0.0);
    return ((double)(start[row + 1] - start[row]) + solve) * task->rank * task->rank;
}

/* The end of the block of rows that starts at `first` (at least one row;
 * CPU_REF_RLS_BLOCK_WORK), and its work estimate in *work. */
static uint32_t rls_block_end(const rls_task *task, uint32_t first, uint32_t dim, int team,
                              double *work)
{
    const uint64_t least_end =
        (uint64_t)first + (uint64_t)team * CPU_REF_RLS_BLOCK_ROWS_PER_THREAD;
    double sum = 0.0;
    uint32_t row = first;
    while (row < dim && (sum < CPU_REF_RLS_BLOCK_WORK || row < least_end)) {
        sum += rls_row_work(task, row);
        row++;
    }
    *work = sum;
    return row;
}

/* Most work first; ties (and so the whole order) by first row. */
static int compare_runs(const void *left, const void *right)
{
    const rls_run *a = left, *b = right;
    if (a->work != b->work)
        return a->work > b->work ? -1 : 1;
    return a->first < b->first ? -1 : (a->first > b->first ? 1 : 0);
}

/* Rows [first, end) (work estimate `work`) cut into at most `capacity`
 * runs of about work / (threads * CPU_REF_RLS_RUNS_PER_THREAD) each, into
 * `runs`, most work first; returns how many. */
static uint32_t rls_cut_runs(const rls_task *task, uint32_t first, uint32_t end, double work,
                             int threads, rls_run *runs, uint32_t capacity)
{
    const double share = work / ((double)threads * CPU_REF_RLS_RUNS_PER_THREAD);
    uint32_t count = 0;
    rls_run run = {.first = first, .end = first, .work = 0.0};
    for (uint32_t row = first; row < end; row++) {
        run.work += rls_row_work(task, row);
        run.end = row + 1;
        if ((run.work >= share && count + 1 < capacity) || run.end == end) {
            runs[count++] = run;
            run = (rls_run){.first = run.end, .end = run.end, .work = 0.0};
        }
    }
    qsort(runs, count, sizeof *runs, compare_runs);
    return count;
}

/* Rows [first, end) (work estimate `work`) on `threads` threads, thread t
 * with workspace ws[t], in runs (rls_cut_runs; `runs` has room for
 * `capacity`) handed out dynamically. The outcomes are counted into
 * *singular and *empty (sums of integers: exact in any order); each row's
 * residual goes to residuals[row] (summed later in a fixed order). Which
 * thread solves a row changes nothing of its arithmetic. */
static void solve_rows(const rls_task *task, uint32_t first, uint32_t end, double work,
                       int threads, const rls_workspace *ws, rls_run *runs, uint32_t capacity,
                       double *residuals, uint64_t *singular, uint64_t *empty)
{
    uint64_t singular_here = 0, empty_here = 0;
#if CPU_REF_WIDE
    rls_outcome (*const solve)(const rls_task *, uint32_t, const rls_workspace *, double *) =
        task->wide ? solve_row_wide : solve_row;
#else
    rls_outcome (*const solve)(const rls_task *, uint32_t, const rls_workspace *, double *) =
        solve_row;
#endif
    if (threads == 1) {
        for (uint32_t row = first; row < end; row++) {
            const rls_outcome outcome = solve(task, row, &ws[0], residuals + row);
            singular_here += outcome == RLS_SINGULAR;
            empty_here += outcome == RLS_EMPTY;
        }
    } else {
        const int64_t count = rls_cut_runs(task, first, end, work, threads, runs, capacity);
#pragma omp parallel num_threads(threads) reduction(+ : singular_here, empty_here)
        {
            const rls_workspace *own = &ws[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
            for (int64_t k = 0; k < count; k++)
                for (uint32_t row = runs[k].first; row < runs[k].end; row++) {
                    const rls_outcome outcome = solve(task, row, own, residuals + row);
                    singular_here += outcome == RLS_SINGULAR;
                    empty_here += outcome == RLS_EMPTY;
                }
        }
    }
    *singular += singular_here;
    *empty += empty_here;
}

/* The sum of the squares of a rows x rank matrix (CPU_REF_NORM_BLOCK_ROWS):
 * `partials` has a slot per block. */
static double sum_of_squares(const double *a, int64_t rows, int64_t rank, int threads,
                             double *partials)
{
    const int64_t blocks = (rows + CPU_REF_NORM_BLOCK_ROWS - 1) / CPU_REF_NORM_BLOCK_ROWS;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t block = 0; block < blocks; block++) {
        const int64_t first = block * CPU_REF_NORM_BLOCK_ROWS;
        const int64_t end = first + CPU_REF_NORM_BLOCK_ROWS < rows ? first + CPU_REF_NORM_BLOCK_ROWS
                                                                   : rows;
        double sum = 0.0;
        for (int64_t k = first * rank; k < end * rank; k++)
            sum += a[k] * a[k];
        partials[block] = sum;
    }
    double total = 0.0;
    for (int64_t block = 0; block < blocks; block++)
        total += partials[block];
    return total;
}

/* The sum of values[0, n) in blocks of CPU_REF_NORM_BLOCK_ROWS, as
 * sum_of_squares sums its rows: the same bits whatever the thread count. */
static double blocked_sum(const double *values, int64_t n, int threads, double *partials)
{
    const int64_t blocks = (n + CPU_REF_NORM_BLOCK_ROWS - 1) / CPU_REF_NORM_BLOCK_ROWS;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t block = 0; block < blocks; block++) {
        const int64_t first = block * CPU_REF_NORM_BLOCK_ROWS;
        const int64_t end = first + CPU_REF_NORM_BLOCK_ROWS < n ? first + CPU_REF_NORM_BLOCK_ROWS
                                                                : n;
        double sum = 0.0;
        for (int64_t k = first; k < end; k++)
            sum += values[k];
        partials[block] = sum;
    }
    double total = 0.0;
    for (int64_t block = 0; block < blocks; block++)
        total += partials[block];
    return total;
}

/* Threads for row_least_squares: the option, cut so that their workspaces
 * of `doubles` each fit CPU_REF_RLS_WORKSPACE_BYTES. */
static int rls_team_size(const th_instance *inst, size_t doubles)
{
    const size_t fit = CPU_REF_RLS_WORKSPACE_BYTES / (doubles * sizeof(double));
    return fit < 1 ? 1 : (fit < (size_t)inst->threads ? (int)fit : inst->threads);
}

/* Rows in blocks (rls_block_end), each block's rows in parallel, the host
 * asked between blocks whether to stop; then factor_norm_squared and
 * residual_squared (the rows' residuals, kept per row, summed in row
 * blocks). A stop leaves the rows of the blocks done solved and the others
 * as they were: each row's problem is its own, so no row is half updated.
 * The workspaces, the runs and the per-row residuals live for the call. */
static th_status cpu_reference_row_least_squares(th_instance *inst, th_row_least_squares_io *io,
                                                 char *err)
{
    th_status status = check_rls_arguments(inst, io, err);
    if (status != TH_OK)
        return status;
    const uint32_t mode = io->mode, rank = inst->rank, dim = inst->dims[mode];
    const uint32_t ld = (rank + 7) / 8 * 8;
    rls_task task = {.layout = &inst->layouts[mode], .width = inst->nmodes - 1, .rank = rank,
                     .ld = ld, .panel_rows = rls_panel_rows(ld), .wide = cpu_ref_use_wide(),
                     .ridge = io->ridge, .nonneg = io->nonneg == 1, .passes = io->passes,
                     .factor = inst->factors[mode]};
    other_factors_of(inst, mode, task.other_factors);
    const size_t doubles = rls_workspace_doubles(&task);
    const int team = rls_team_size(inst, doubles);
    const uint32_t capacity = (uint32_t)team * CPU_REF_RLS_RUNS_PER_THREAD + 2;
    const size_t norm_blocks =
        ((size_t)dim + CPU_REF_NORM_BLOCK_ROWS - 1) / CPU_REF_NORM_BLOCK_ROWS;
    double *workspace =
        aligned_alloc(CPU_REF_CACHE_LINE, (size_t)team * doubles * sizeof *workspace);
    rls_workspace *ws = malloc((size_t)team * sizeof *ws);
    rls_run *runs = malloc(capacity * sizeof *runs);
    double *partials = malloc(norm_blocks * sizeof *partials);
    double *residuals = malloc(((size_t)dim + 1) * sizeof *residuals);
    if (workspace == NULL || ws == NULL || runs == NULL || partials == NULL ||
        residuals == NULL) {
        free(workspace);
        free(ws);
        free(runs);
        free(partials);
        free(residuals);
        return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY,
                              "row_least_squares: out of memory for %d workspaces of rank %u",
                              team, rank);
    }
    for (int t = 0; t < team; t++)
        ws[t] = rls_workspace_at(&task, workspace, t);
    uint64_t singular = 0, empty = 0;
    for (uint32_t first = 0; first < dim;) {
        if (first > 0 && th_plugin_stop_requested(inst->host)) {
            free(workspace);
            free(ws);
            free(runs);
            free(partials);
            free(residuals);
            return th_plugin_fail(err, TH_ERR_CANCELLED,
                                  "row_least_squares(mode %u) given up after %u of %u rows: "
                                  "stop requested (those rows are solved, the others as they "
                                  "were)",
                                  mode, first, dim);
        }
        double work = 0.0;
        const uint32_t end = rls_block_end(&task, first, dim, team, &work);
        const int threads = work < (double)CPU_REF_UPDATE_SERIAL_WORK ? 1 : team;
        solve_rows(&task, first, end, work, threads, ws, runs, capacity, residuals, &singular,
                   &empty);
        first = end;
    }
    const int64_t cells = (int64_t)dim * rank;
    io->singular_rows = singular;
    io->empty_rows = empty;
    io->factor_norm_squared =
        sum_of_squares(task.factor, dim, rank,
                       cells < CPU_REF_ELEMENTWISE_SERIAL_CELLS ? 1 : inst->threads, partials);
    io->residual_squared =
        blocked_sum(residuals, dim, dim < CPU_REF_ELEMENTWISE_SERIAL_CELLS ? 1 : inst->threads,
                    partials);
    free(workspace);
    free(ws);
    free(runs);
    free(partials);
    free(residuals);
    return TH_OK;
}

/* ------------------------------------------------------------------------ */
/* Runtime and mode info                                                     */
/* ------------------------------------------------------------------------ */

static th_status cpu_reference_get_runtime_info(th_instance *inst, th_runtime_info *info,
                                                char *err)
{
    if (inst == NULL || info == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "get_runtime_info: %s is NULL",
                    inst == NULL ? "the instance" : "info");
    th_runtime_info full;
    memset(&full, 0, sizeof full);
    snprintf(full.device, sizeof full.device, "CPU (%d thread%s)", inst->threads,
             inst->threads == 1 ? "" : "s");
    full.tensor_bytes = inst->tensor_bytes;
    full.factor_bytes = inst->factor_bytes;
    full.workspace_bytes = inst->workspace_bytes;
    snprintf(full.details, sizeof full.details, "threads=%d layout=csr-per-mode chunk=%u", inst->threads, CPU_REF_CHUNK_NNZ);
    full.last_sweep_seconds = -1.0; /* no als_sweep: the host runs each mode */
    full.mode_nonzeros = 1;
    th_plugin_copy_out(info, &full, sizeof full);
    return TH_OK;
}

static th_status cpu_reference_get_mode_info(th_instance *inst, uint32_t mode,
                                             th_mode_info *info, char *err)
{
    th_status status = check_mode(inst, "get_mode_info", mode, err);
    if (status != TH_OK)
        return status;
    if (info == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "get_mode_info: info is NULL");
    th_mode_info full;
    memset(&full, 0, sizeof full);
    full.partitions = (uint32_t)inst->layouts[mode].chunks;
    snprintf(full.scheme, sizeof full.scheme, "nnz-chunked");
    full.last_mttkrp_seconds = inst->last_seconds[mode];
    th_plugin_copy_out(info, &full, sizeof full);
    return TH_OK;
}

/* ------------------------------------------------------------------------ */
/* The entry                                                                 */
/* ------------------------------------------------------------------------ */

/* No init/deinit: the plugin keeps no process-wide state. */
TH_PLUGIN_EXPORT const th_plugin_entry tensorhost_plugin_entry = {
    TH_PLUGIN_ENTRY_HEADER,
    .init = NULL,
    .deinit = NULL,
    .get_info = cpu_reference_get_info,
    .create = cpu_reference_create,
    .destroy = cpu_reference_destroy,
    .load_tensor = cpu_reference_load_tensor,
    .set_factor = cpu_reference_set_factor,
    .get_factor = cpu_reference_get_factor,
    .mttkrp = cpu_reference_mttkrp,
    .get_mttkrp_result = cpu_reference_get_mttkrp_result,
    .als_update = cpu_reference_als_update,
    .get_runtime_info = cpu_reference_get_runtime_info,
    .get_mode_info = cpu_reference_get_mode_info,
    .init_factors = cpu_reference_init_factors,
    .generalized_mttkrp = cpu_reference_generalized_mttkrp,
    .factor_update = cpu_reference_factor_update,
    .row_least_squares = cpu_reference_row_least_squares,
    .als_update_nonneg = cpu_reference_als_update_nonneg,
    .multiplicative_updates = cpu_reference_multiplicative_updates,
};
