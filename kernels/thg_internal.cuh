/* Shared by the .cu files of th_kernels: the context and error plumbing. */
#ifndef THG_INTERNAL_CUH
#define THG_INTERNAL_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "th_gpu.h"

/* One mode-specific copy of the tensor: every mode's indices and the values,
 * reordered for this mode's output (see build.cu), plus the kappa+1
 * partition offsets into the nonzeros. */
struct thg_mode_copy {
    uint32_t nnz;                 /* the nonzeros this copy holds (a share's, on a rank) */
    uint32_t *idx[THG_MAX_MODES]; /* [nmodes] arrays of [nnz] */
    float *vals;                  /* [nnz] */
    uint32_t *offsets;            /* [kappa + 1] */
    int scheme;                   /* 1 or 2 */
    char reason[96];              /* why that scheme (thg_mode_stats.reason) */
    int has_empty_rows;           /* some output row has no nonzero */
    /* Bit r of word r / 32: output row r has a nonzero. The MTTKRP writes
     * only those rows; readers of the result (the update, the copy to the
     * host) take the others as zero, so no pass zeroes the result first. */
    uint32_t *row_present;
    int has_result;               /* mttkrp ran since the last load */
    /* The latest mttkrp()'s events, read into last_seconds when
     * timing_pending (mttkrp() waits for its stop event). */
    cudaEvent_t start, stop;
    int timing_pending;
    /* The mode's fixed sequences as CUDA graphs, captured on first use and
     * valid until the next load (they hold the buffers' addresses). */
    cudaGraphExec_t mttkrp_graph;
    cudaGraphExec_t als_graph;
    /* The latest MTTKRP's time: its events' after mttkrp(), its kernel's
     * span (global timer) after a sweep. */
    double last_seconds;
};

/* ALS accumulators on the device (see als.cu): the last block of
 * gemm_gram_kernel reads and re-zeroes them, so no memset precedes each
 * update. */
struct thg_als_acc {
    double *gram;      /* [R*R] unnormalised A^T A */
    double *inner;     /* [R] unnormalised sum_i M(i,r) A(i,r) */
    uint32_t *maxbits; /* [R] max |A(:,r)| as float bits */
    float *scale;      /* [R] 1 / lambda (1 for a zero column), for the scale kernel */
    uint32_t *rescale; /* the scale kernel runs (1) or returns at once (0) */
    uint32_t *done;    /* blocks finished */
};

/* Where the sweep's kernels learn that a solve broke down (sweep.cu). */
struct thg_sweep_flags {
    uint32_t *failed;      /* device word: a solve broke down; later kernels return */
    uint32_t *host_status; /* mapped host word: the broken mode + 1, 0 if none */
};

/* State of the whole-iteration sweep (sweep.cu), allocated per load. */
struct thg_sweep_state {
    void *dev_block;      /* one allocation, laid out in sweep.cu */
    double *grams_dev;    /* [nmodes][R*R] every mode's Gram, kept by the updates */
    double *grams_mirror; /* pinned: what grams_dev holds; also the upload staging */
    int mirror_valid;     /* grams_dev == grams_mirror */
    double *out_host;     /* pinned: per mode [lambda | gram | inner], the stamps, the status word */
    double *out_dev;      /* device: the same slots and stamps, copied to out_host at the end */
    /* [nmodes][2] per mode's MTTKRP inside the sweep, then [nmodes][2] per
     * mode's collective in a group's sweep: max of ~start and of the end
     * of its blocks (%globaltimer, ns), zeroed at the sweep's start
     * or, by the multi-device sweep, after the copy that brings them back
     * (stamps_zeroed: so that nothing but the first MTTKRP's launch stands
     * between a rank's sweep start and it). */
    unsigned long long *stamps_dev;
    int stamps_zeroed;
    const unsigned long long *stamps_host;
    uint32_t *status_host; /* mapped, see thg_sweep_flags */
    thg_sweep_flags flags;
    cudaGraphExec_t graph[2]; /* per norm (0: 2-norm, 1: max-norm), captured on first use */
    /* The regularised or constrained sweep (ABI 1.6): its settings as the
     * enqueue reads them, and its graphs, captured with those settings
     * (dropped when they change). */
    struct {
        uint32_t coordinate[THG_MAX_MODES]; /* 0: the solve; 1: passes, clamped; 2: passes */
        double l1[THG_MAX_MODES];
        uint32_t sweeps[THG_MAX_MODES]; /* each coordinate-descent mode's passes */
        double ridge, tolerance;
        int valid;
    } reg;
    cudaGraphExec_t reg_graph[2];
    /* Around each sweep: its device time, for thg_info. */
    cudaEvent_t start, stop;
    double last_seconds;
};

/* What a generalized MTTKRP kernel needs beyond thg_mttkrp_args
 * (mttkrp_impl.cuh's gen_value; generalized.cu fills it). */
struct thg_gen_params {
    const float *weights;   /* [rank] on the device, or nullptr: all ones */
    const float *col_scale; /* thg_context::col_scale (every mode's) */
    uint32_t nmodes, rank;
    int elementwise;        /* thg_elementwise */
    int reduction;          /* thg_reduction */
    float epsilon;          /* POISSON_RATIO's floor, at least FLT_MIN */
    /* The reduction: blocks add into red_acc (zero before; the last block
     * re-zeroes it and red_count) and the last writes the sum to red_out. */
    double *red_acc;
    uint32_t *red_count;
    double *red_out;
};

/* The generalized MTTKRP's and the factor operations' buffers
 * (generalized.cu), allocated with the factors at load. */
struct thg_gen_state {
    void *dev_block;    /* device: weights, accumulators, counters (zero between calls) */
    float *weights_dev; /* [rank] */
    double *red_acc;    /* the generalized MTTKRP's sum */
    uint32_t *red_count;
    double *col_acc;    /* [rank] NORMALIZE_1's column sums */
    uint32_t *max_bits; /* MULTIPLICATIVE_UPDATE's violation, as float bits */
    unsigned long long *changed; /* RAISE_INADMISSIBLE_ZEROS's count */
    uint32_t *done;     /* blocks finished (factor operations) */
    float *op_scale;    /* [rank] the factor operation's column factors */
    /* Pinned host memory: the weights' and the vector's staging, and the
     * mapped outputs [reduced | violation | count | vector[rank]]. */
    float *stage_host;  /* [rank] */
    double *out_host;   /* mapped */
    double *out_dev;    /* its device address */
};

/* Row-wise least squares (row_solve.cu, the ABI's row_least_squares):
 * one mode's rows in the order the solve takes them, longest first. */
struct thg_rls_row {
    uint32_t row;   /* the factor row */
    uint32_t begin; /* its first nonzero in the mode's copy (rows are contiguous there) */
    uint32_t count; /* its nonzeros; 0 for an empty row */
};
/* A piece of a row too long for one worker (a split row): `count`
 * nonzeros from `begin`, added into split slot `slot`. */
struct thg_rls_chunk {
    uint32_t row, begin, count, slot;
};
/* What the kernels of one call count, zeroed before each call. */
struct thg_rls_counters {
    unsigned long long singular; /* rows whose solve broke down */
    double norm;                 /* sum of squares of the updated factor */
    unsigned long long queue;    /* the next task of the dynamic queue */
    double residual;             /* sum over the rows of x^T x - 2 a^T b + a^T G a */
};
/* One mode's plan, built from its copy on the first call after a load:
 * rows[0, nsplit) are split into chunks (shorter towards the queue's
 * end), rows[nsplit, nonempty) are solved whole, rows[nonempty, dims) are
 * empty. */
struct thg_rls_mode {
    uint32_t nonempty, nsplit, nchunks;
    thg_rls_row *rows;     /* [dims] (device) */
    thg_rls_chunk *chunks; /* [nchunks] (device) */
};
/* The row solve's workspace, allocated on its first call and kept until
 * the tensor goes (thg_free_tensor): every mode's plan, the split rows'
 * accumulators and the counters. */
struct thg_rls_state {
    int ready;
    void *rows_block; /* every mode's rows */
    void *work_block; /* every mode's chunks, the split slots, the counters */
    thg_rls_counters *counters;
    double *split;        /* [max nsplit][slot_stride]: packed lower G, then b, then x^T x */
    uint32_t slot_stride; /* doubles */
    uint32_t main_blocks; /* resident blocks of the main kernel (its grid) */
    thg_rls_counters *out_host; /* pinned: the counters copied back */
    uint64_t bytes;             /* device bytes of both blocks (in workspace_bytes) */
    thg_rls_mode modes[THG_MAX_MODES];
};

/* transfer.cu: copies of this many bytes and more go through pinned memory;
 * the host threads that do a copy's host side; each thread's two pinned
 * pieces. */
constexpr size_t thg_pinned_copy_min_bytes = (size_t)32 << 20;
constexpr unsigned thg_transfer_threads = 16;
constexpr size_t thg_transfer_piece_bytes = (size_t)4 << 20;

/* Where a context's factors come from: cudaMalloc (thg_device_allocator,
 * the default), or for a rank of a group the collective layer's buffers,
 * which its transfers between devices read and write in place (comm.cuh,
 * thg_comm_alloc). Called with the context's device current. */
struct thg_factor_allocator {
    thg_status (*alloc)(void *user, size_t bytes, void **ptr, char *err, size_t errlen);
    void (*free)(void *user, void *ptr);
    void *user;
};
extern const thg_factor_allocator thg_device_allocator;

struct thg_context {
    int device;
    char device_name[128];
    int sm_count;
    /* The device's L2 in bytes: the plain MTTKRP loads its indices past L1
     * where the input factors fit in it (mttkrp_impl.cuh, launch_vec_l1).
     * TH_GPU_TEST_L2_BYTES=N replaces it (tests of both kernels). */
    uint64_t l2_bytes;
    /* Dynamic shared memory of a block over half an SM's (so that no SM
     * holds two), within what a block may opt into; 0 where there is none
     * (mttkrp_impl.cuh, one_block_smem). */
    uint32_t one_block_smem_bytes;
    uint32_t kappa;
    uint32_t P;
    thg_policy policy;
    thg_rule rule;
    cudaStream_t stream;
    /* The sweep runs each mode's solve here, beside the MTTKRP; the two
     * events fork it from and join it to `stream`. */
    cudaStream_t side_stream;
    cudaEvent_t fork_event, join_event;
    /* 0 with TH_GPU_NO_GRAPHS=1 in the environment, or after a capture
     * failed (graph_note says why): plain stream launches then. */
    int use_graphs;
    char graph_note[TH_GPU_NOTE_SIZE];
    /* TH_GPU_POISON_RESULTS=1: every result buffer starts as NaN (tests). */
    int poison_results;
    /* TH_GPU_TEST_FREE_BYTES=N: the device's free memory counts as at most
     * N bytes (tests of the memory checks); 0: unset. */
    uint64_t free_bytes_cap;
    /* Non-null: every MTTKRP into the context's own results is summed over
     * a run's processes (th_gpu.h, thg_attach_processes). */
    thg_processes *processes;

    /* The loaded problem; nmodes == 0 before load. */
    uint32_t nmodes;
    uint32_t nnz; /* the largest copy's nonzeros: it sizes the build's staging */
    uint32_t rank;
    uint32_t dims[THG_MAX_MODES];
    thg_mode_copy copies[THG_MAX_MODES];
    float *factors[THG_MAX_MODES]; /* dims[m] x rank, row-major */
    thg_factor_allocator factor_allocator; /* set by a group before any load */
    /* dims[m] x rank, row-major, of which rows [result_begin[m],
     * result_end[m]) are held (thg_mode_input): results[m] points at row 0,
     * result_blocks[m] at the allocation, which starts at result_begin[m]. */
    float *results[THG_MAX_MODES];
    float *result_blocks[THG_MAX_MODES];
    uint64_t result_begin[THG_MAX_MODES], result_end[THG_MAX_MODES];
    /* Factors are stored unnormalised (als.cu): the normalised factor m is
     * factors[m] with column r times col_scale[m * rank + r], and the
     * MTTKRP of the normalised factors is results[m] with column r times
     * result_scale[m * rank + r] (the product of the other modes'
     * col_scale when that MTTKRP ran). Both [nmodes][rank], one block. */
    float *col_scale;
    float *result_scale;

    /* ALS workspace: W (rank x rank floats, then the norm as an int) on the
     * device and its pinned host staging; the accumulators; [lambda | gram | inner] written by
     * the device straight into mapped pinned host memory. One stream
     * synchronisation per update. */
    float *als_w;
    float *als_w_host;
    void *als_acc_block;
    thg_als_acc als_acc;
    double *als_out_host;
    double *als_out_dev; /* the device's address of als_out_host */
    thg_sweep_state sweep;
    thg_gen_state gen;
    /* Blocks of the update kernel resident on the device at once (its
     * occupancy times the SMs), set by thg_als_prepare. */
    uint32_t als_resident_blocks;
    /* The same for the tensor-core update of tall factors and for its
     * epilogue form (0: not for this rank). */
    uint32_t als_tc_resident_blocks;
    uint32_t als_tc_stats_blocks;
    /* Device staging of factor copies (factors.cu): transfer_elems doubles. */
    double *transfer_dev;
    size_t transfer_elems;
    /* Pinned host memory of large copies (transfer.cu), allocated on first
     * use: two pieces per transfer thread, with a stream per thread and an
     * event per piece. */
    void *pinned;
    cudaStream_t transfer_streams[thg_transfer_threads];
    cudaEvent_t transfer_events[2 * thg_transfer_threads];
    /* One allocation holding every mode's copy and offsets. */
    void *copy_block;
    /* row_least_squares' workspace (row_solve.cu), from its first call. */
    thg_rls_state rls;
    /* als_update_nonneg's workspace (nonneg.cu), from its first call:
     * device V, scale and the passes' control block; pinned staging. */
    void *nonneg_dev;
    void *nonneg_host;
    uint32_t nonneg_partials; /* blocks of the passes' grid (each kernel's change sums) */
    uint64_t nonneg_bytes;    /* device bytes of nonneg_dev and nonneg_saved (in workspace_bytes) */
    /* The rows a chunk of passes started from ([largest mode's rows * rank]
     * floats), where it fits (nonneg.cu); nullptr: the chunk is computed
     * twice instead. */
    float *nonneg_saved;
    /* TH_GPU_TEST_NONNEG_NO_SAVED=1: never allocate nonneg_saved (tests of
     * the path without it). */
    int nonneg_no_saved;
    /* TH_GPU_TEST_RLS_CHUNK=N: row_least_squares splits every row of more
     * than N nonzeros into chunks of N (tests of the split rows); 0: unset. */
    uint32_t rls_chunk_override;

    uint64_t tensor_bytes;
    uint64_t factor_bytes;
    uint64_t workspace_bytes;
    double build_seconds;
    double upload_seconds;
};

/* Writes "CUDA error at FILE:LINE in CALL: reason" and maps the error. */
thg_status thg_cuda_fail(char *err, size_t errlen, cudaError_t e, const char *call,
                         const char *file, int line);
thg_status thg_fail(char *err, size_t errlen, thg_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Every CUDA call goes through this; a failure returns from the caller. */
#define THG_CUDA(call)                                                              \
    do {                                                                            \
        cudaError_t thg_e_ = (call);                                                \
        if (thg_e_ != cudaSuccess)                                                  \
            return thg_cuda_fail(err, errlen, thg_e_, #call, __FILE__, __LINE__);   \
    } while (0)

/* After every kernel launch: launch-configuration errors show up here. */
#define THG_LAUNCHED() THG_CUDA(cudaGetLastError())

/* Kernel argument block for one MTTKRP: passed by value, so the per-mode
 * pointers live in the constant bank, no device array to keep in sync. */
struct thg_mttkrp_args {
    const uint32_t *idx[THG_MAX_MODES];
    const float *factor[THG_MAX_MODES];
    const float *vals;
    const uint32_t *offsets;
    float *out;
    uint32_t nmodes;
    uint32_t out_mode;
    uint32_t rank;
    unsigned long long *stamp; /* nullptr, or the kernel's span (thg_sweep_state::stamps_dev) */
    /* thg_context::col_scale (every mode) and result_scale (this mode's
     * row), which block 0 fills with the product of the other modes'. */
    const float *col_scale;
    float *result_scale;
};

/* Block 0 of an MTTKRP of `out_mode`: result_scale[r] = the product of
 * col_scale[m * rank + r] over the other modes m. */
__device__ __forceinline__ void thg_record_result_scale(const float *col_scale,
                                                        float *result_scale, uint32_t nmodes,
                                                        uint32_t out_mode, uint32_t rank)
{
    if (blockIdx.x != 0)
        return;
    for (uint32_t r = threadIdx.x; r < rank; r += blockDim.x) {
        float c = 1.0f;
        for (uint32_t m = 0; m < nmodes; ++m)
            if (m != out_mode)
                c *= col_scale[(size_t)m * rank + r];
        result_scale[r] = c;
    }
}

/* A rank's split rows' partials for the collective that sends them:
 * slot[0..R) <- result row rows[0], slot[R..2R) <- row rows[1] (zeros for
 * THG_NO_ROW), by threads `thread` of `threads`. */
__device__ __forceinline__ void thg_copy_split_rows(const float *result, uint32_t R,
                                                    const uint32_t rows[2], float *slot,
                                                    uint32_t thread, uint32_t threads)
{
    for (uint32_t t = thread; t < 2u * R; t += threads) {
        const uint32_t row = rows[t / R];
        slot[t] = row != THG_NO_ROW ? result[(size_t)row * R + t % R] : 0.0f;
    }
}

/* Bytes of a row_present bitmap of `dim` rows. */
inline size_t thg_row_present_bytes(uint32_t dim)
{
    return sizeof(uint32_t) * (((size_t)dim + 31u) / 32u);
}

/* Whether output row `row` has a nonzero (thg_mode_copy::row_present). */
__host__ __device__ inline bool thg_row_present(const uint32_t *row_present, uint64_t row)
{
    return (row_present[row >> 5] >> (row & 31u)) & 1u;
}

/* Starts the asynchronous copy of rows [first, first + rows) of `src`
 * (R floats a row) into shared memory at `dst`, `stride` floats a row, by
 * the block's `threads` threads (this one `thread`), kWidth floats a copy:
 * 4 (16 bytes past L1; R a multiple of 4, rows 16-byte aligned) or 1. The
 * caller commits the batch and waits. Rows absent from row_present (bit
 * row_base + row; nullptr: none absent) arrive as zeros without being
 * read: a copy of source size 0. A thread reads the bits of its next
 * kAhead copies before it starts them, so that no copy waits on a load
 * behind the one before (each copy's asm clobbers memory), and no branch
 * picks between the two kinds. */
template <uint32_t kWidth, uint32_t kAhead = 4>
__device__ __forceinline__ void thg_rows_to_shared_async(const float *src, uint64_t first,
                                                         uint32_t rows, uint32_t R, float *dst,
                                                         uint32_t stride,
                                                         const uint32_t *row_present,
                                                         uint64_t row_base, uint32_t thread,
                                                         uint32_t threads)
{
    static_assert(kWidth == 4u || kWidth == 1u, "copies of 16 or 4 bytes");
    constexpr uint32_t kBytes = 4u * kWidth;
    const uint32_t per_row = R / kWidth, n = rows * per_row;
    const float *from = src + first * R;
    for (uint32_t t0 = thread; t0 < n; t0 += kAhead * threads) {
        uint32_t bytes[kAhead];
#pragma unroll
        for (uint32_t i = 0; i < kAhead; ++i) {
            const uint32_t t = t0 + i * threads;
            bytes[i] = t < n && (!row_present ||
                                 thg_row_present(row_present, row_base + first + t / per_row))
                           ? kBytes
                           : 0u;
        }
#pragma unroll
        for (uint32_t i = 0; i < kAhead; ++i) {
            const uint32_t t = t0 + i * threads;
            if (t >= n)
                break;
            const uint32_t to = (uint32_t)__cvta_generic_to_shared(
                dst + (t / per_row) * stride + (t % per_row) * kWidth);
            if constexpr (kWidth == 4u)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                             :
                             : "r"(to), "l"(from + (size_t)t * 4u), "r"(bytes[i])
                             : "memory");
            else
                asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;"
                             :
                             : "r"(to), "l"(from + t), "r"(bytes[i])
                             : "memory");
        }
    }
}

/* The GPU's nanosecond clock, comparable across SMs. */
__device__ __forceinline__ unsigned long long thg_globaltimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* A kernel's span (the sweep's MTTKRPs, a group sweep's collectives), two
 * fire-and-forget atomics a block: stamp[0] = max(~start) (= ~ the first
 * block's start, so that zero is the initial value of both words),
 * stamp[1] = max(end). nullptr: not stamped. */
__device__ __forceinline__ void thg_stamp_start(unsigned long long *stamp)
{
    if (stamp && threadIdx.x == 0)
        atomicMax(stamp, ~thg_globaltimer());
}

__device__ __forceinline__ void thg_stamp_end(unsigned long long *stamp)
{
    if (!stamp) /* uniform */
        return;
    __syncthreads();
    if (threadIdx.x == 0)
        atomicMax(stamp + 1, thg_globaltimer());
}

/* context.cu: free memory on the context's device, within the test cap
 * (TH_GPU_TEST_FREE_BYTES). */
thg_status thg_free_device_bytes(thg_context *ctx, uint64_t *out, char *err, size_t errlen);
/* context.cu: a tensor is loaded and `mode` is one of its modes. */
thg_status thg_check_mode(const thg_context *ctx, uint32_t mode, char *err, size_t errlen);
/* thg_als_update's first steps (a multi-device update takes them on every
 * rank): the mode has an MTTKRP result, and W (rounded to fp32) with the
 * norm after it is in the pinned staging als_w_host. */
thg_status thg_als_stage(thg_context *ctx, uint32_t mode, const double *w, int use_max_norm,
                         char *err, size_t errlen);
/* Its last: [lambda | gram | inner] from the mapped output, after the
 * stream synchronised. */
void thg_als_read_out(const thg_context *ctx, double *lambda, double *gram, double *inner);
/* factors.cu: doubles of the staging buffer for factor copies. */
size_t thg_transfer_elems(uint32_t nmodes, const uint32_t *dims, uint32_t rank);
/* A rows x rank fp32 matrix on the device into fp64 `dst` on the host:
 * column r times col_scale[r] (nullable: 1), and rows absent from
 * row_present (nullable: all present) as zeros. The rows may be a slice
 * [row_base, row_base + rows) of a larger matrix (src and dst pointing at
 * its first row): row_present indexes the whole matrix. Small matrices convert on
 * the device through the staging buffer, large ones on the host threads
 * of thg_pinned_download. */
thg_status thg_download_matrix(thg_context *ctx, double *dst, const float *src, uint64_t rows,
                               const float *col_scale, const uint32_t *row_present,
                               uint64_t row_base, char *err, size_t errlen);
/* n fp64 host values into fp32 `dst` on the device; returns once `src`
 * may change. Small copies convert on the device through the staging
 * buffer, large ones on the host threads of thg_pinned_upload. */
thg_status thg_upload_as_float(thg_context *ctx, float *dst, const double *src, size_t n,
                               char *err, size_t errlen);
/* `bytes` host bytes into device memory, synchronous (through
 * thg_pinned_upload when large). */
thg_status thg_copy_to_device(thg_context *ctx, void *dst, const void *src, size_t bytes,
                              char *err, size_t errlen);
/* How an upload's elements change on the way to the device. */
enum thg_upload_kind {
    THG_UPLOAD_BYTES,           /* n bytes, as they are */
    THG_UPLOAD_DOUBLE_TO_FLOAT, /* n fp64 values into n fp32, rounded to nearest */
};
/* One array of an upload: n elements of host `src` into device `dst`. */
struct thg_upload_array {
    void *dst;
    const void *src;
    size_t n;
    thg_upload_kind kind;
};
/* The arrays into the device through the pinned memory, each host thread
 * taking a share of every array on its own stream; synchronous
 * (ctx->stream's earlier work is finished first). For copies of
 * thg_pinned_copy_min_bytes and more. */
thg_status thg_pinned_upload(thg_context *ctx, const thg_upload_array *arrays, size_t narrays,
                             char *err, size_t errlen);
/* thg_download_matrix's large case, its arguments the same (R: the rank):
 * each host thread takes a share of the rows, fp32 across the bus into its
 * pinned pieces on its own stream, converted and scaled while it unpacks
 * them; synchronous (after ctx->stream's earlier work). */
thg_status thg_pinned_download(thg_context *ctx, double *dst, const float *src, uint64_t rows,
                               uint32_t R, const float *col_scale, const uint32_t *row_present,
                               uint64_t row_base, char *err, size_t errlen);
/* Releases the pinned memory, streams and events (with the tensor). */
void thg_transfer_free(thg_context *ctx);
/* dst[0..n) <- value on ctx->stream (a column scale back to ones: the
 * factor as stored is normalised). */
thg_status thg_fill_floats(thg_context *ctx, float *dst, size_t n, float value, char *err,
                           size_t errlen);
/* mttkrp.cu */
/* `stamp` (nullable): the kernel records its span there, for the sweep,
 * whose event records would cost more than the MTTKRP of a small mode.
 * `zero_result`: the rows that scheme 2 adds to are zeroed first, on
 * ctx->stream; otherwise the caller has done so (thg_zero_mttkrp_result)
 * since the result was last read. */
thg_status thg_launch_mttkrp(const thg_context *ctx, uint32_t mode, unsigned long long *stamp,
                             int zero_result, char *err, size_t errlen);
/* processes.cu: `count` floats of `buf` summed in place over the
 * processes, on `stream`. */
thg_status thg_processes_sum(const thg_processes *processes, float *buf, size_t count,
                             cudaStream_t stream, char *err, size_t errlen);
/* `bytes` of `buf` from rank 0 into every process's, on `stream`. */
thg_status thg_processes_share(const thg_processes *processes, void *buf, size_t bytes,
                               cudaStream_t stream, char *err, size_t errlen);
/* processes.cu: the joined communicator (an ncclComm_t, borrowed while
 * the processes live), this process's rank, the processes' count and the
 * device, for a group across the processes (thg_group_create_across). */
void *thg_processes_nccl_comm(const thg_processes *processes);
uint32_t thg_processes_rank(const thg_processes *processes);
uint32_t thg_processes_count(const thg_processes *processes);
int thg_processes_device(const thg_processes *processes);
/* Where an MTTKRP of a mode writes: its result (indexed by row, `block`
 * at the first row held) and the R column factors of its result scale.
 * thg_result_of: the context's own, which mttkrp() and the updates read. */
struct thg_result_target {
    float *rows, *block, *scale;
};
thg_result_target thg_result_of(const thg_context *ctx, uint32_t mode);
/* thg_launch_mttkrp into `to`, a buffer shaped as the mode's result. */
thg_status thg_launch_mttkrp_into(const thg_context *ctx, uint32_t mode,
                                  const thg_result_target &to, unsigned long long *stamp,
                                  int zero_result, char *err, size_t errlen);
/* What a scheme-2 MTTKRP of `mode` adds to, zeroed on `stream` (nothing
 * for scheme 1, which writes every row it touches). */
thg_status thg_zero_mttkrp_result(const thg_context *ctx, uint32_t mode, cudaStream_t stream,
                                  char *err, size_t errlen);
thg_status thg_zero_mttkrp_result_of(const thg_context *ctx, uint32_t mode,
                                     const thg_result_target &to, cudaStream_t stream, char *err,
                                     size_t errlen);
/* The generalized MTTKRP of `mode` on ctx->stream (mttkrp.cu), into the
 * mode's own result (scheme 2's rows zeroed first), or with write_result 0
 * the reduction alone, over mode's copy (nothing written but the sum). */
thg_status thg_launch_generalized(const thg_context *ctx, uint32_t mode,
                                  const thg_gen_params &params, int write_result, char *err,
                                  size_t errlen);
/* generalized.cu: the buffers of thg_gen_state, at load; freed with the tensor. */
uint64_t thg_gen_bytes(uint32_t rank);
thg_status thg_gen_alloc(thg_context *ctx, char *err, size_t errlen);
void thg_gen_free(thg_context *ctx);
/* als.cu */
size_t thg_als_acc_bytes(uint32_t rank);
void thg_als_acc_view(void *block, uint32_t rank, thg_als_acc *acc);
/* Once per load: kernel attributes for the loaded rank. */
thg_status thg_als_prepare(thg_context *ctx, char *err, size_t errlen);
/* Bytes of W plus the norm flag, as uploaded. */
size_t thg_als_w_bytes(uint32_t rank);
/* A rank's part of a multi-device update: the rows it owns, and where its
 * blocks add their sums (zero before; nothing is finished). */
struct thg_als_part {
    uint64_t row_begin; /* rows [row_begin, row_begin + rows) of the mode */
    uint32_t rows;
    thg_als_acc acc;
    /* Nullable (rows > 0 only): the update's first block also copies the
     * result's rows pack_rows[0] and [1] (THG_NO_ROW: zeros) to pack_slot
     * ([2 x R] floats), the split rows' partials a collective sends on. */
    float *pack_slot;
    uint32_t pack_rows[2];
};
/* Kernel 1 and 2 of the update; W and the norm must be on the device.
 * `out` receives [lambda | gram | inner] (device address, mapped host
 * memory in practice). The sweep also passes `failed` (return at once when
 * set), `gram_store` (the normalised Gram, kept on the device) and
 * `after_gemm` (recorded between the kernels: the next solve needs only the
 * Gram); the per-mode update passes nullptr for all three. */
thg_status thg_launch_als(thg_context *ctx, uint32_t mode, double *out, const uint32_t *failed,
                          double *gram_store, cudaEvent_t after_gemm, const thg_als_part *part,
                          char *err, size_t errlen);
/* The update's epilogue over the factor as it is (the nonnegative update,
 * nonneg.cu, computes A itself): from the mode's factor as stored,
 * unnormalised, and its MTTKRP result, exactly what thg_launch_als does
 * after its product: lambda (the norm flag read from ctx->als_w after its
 * rank * rank floats, as there), the normalised Gram and inner into `out`
 * ([lambda | gram | inner]: the mapped ctx->als_out_dev, or a sweep's
 * slot), the column scale, and the scale kernel; on ctx->stream. The
 * sweep passes `failed`, `gram_store` and `after_stats` as to
 * thg_launch_als (nullptr otherwise). `inner_made`: the kernel that
 * computed A already added the inner products and maxima into
 * ctx->als_acc, so the epilogue reads A alone; only where
 * thg_als_tc_chosen(ctx, the mode's rows). */
thg_status thg_launch_als_epilogue(thg_context *ctx, uint32_t mode, double *out,
                                   const uint32_t *failed, double *gram_store,
                                   cudaEvent_t after_stats, bool inner_made, char *err,
                                   size_t errlen);
/* als_tensor_core.cu: whether the update of I rows (a mode, or a rank's
 * part) takes the tensor cores. */
bool thg_als_tc_chosen(const thg_context *ctx, uint32_t I);
/* nonneg.cu, for the sweep (sweep.cu): one coordinate-descent mode. */
struct thg_nonneg_sweep_mode {
    uint32_t sweeps;
    double tolerance, ridge, l1;
    int nonneg, use_max_norm;
};
/* The workspace (before a capture: it allocates on the first call). */
thg_status thg_nonneg_prepare(thg_context *ctx, char *err, size_t errlen);
/* The sweep's first scale (the host's lambda; NULL: ones) into the
 * workspace on ctx->stream, from pinned staging that stays as it is until
 * the stream synchronises; and where it lies on the device. */
thg_status thg_nonneg_stage_scale(thg_context *ctx, const double *scale, char *err,
                                  size_t errlen);
const double *thg_nonneg_sweep_scale(const thg_context *ctx);
/* On ctx->stream, no host synchronisation (capturable): mode's passes
 * from V = the Hadamard of ctx->sweep.grams_dev but mode's and `scale`
 * (device, [rank]), then the epilogue into `out` and `gram_store`,
 * `after_stats` recorded after the Gram; everything returns at once when
 * the sweep's failure flag is set. */
thg_status thg_nonneg_enqueue_sweep_mode(thg_context *ctx, uint32_t mode, const double *scale,
                                         const thg_nonneg_sweep_mode &m, double *out,
                                         double *gram_store, cudaEvent_t after_stats, char *err,
                                         size_t errlen);
/* Rows that the ranks' partial updates left out, because their MTTKRP
 * row is split over several ranks' shares: row rows[j]'s MTTKRP is the sum
 * of the partial rows partials[k] (R floats each) with partial_rows[k] ==
 * rows[j], added in k's order. */
#define THG_MAX_FOLD_ROWS 64u
struct thg_als_fold {
    uint32_t nrows;
    uint32_t rows[THG_MAX_FOLD_ROWS];
    uint32_t npartials;
    uint32_t partial_rows[2 * THG_MAX_FOLD_ROWS];
    const float *partials; /* partial k at partials + (k / 2) * partial_stride + (k % 2) * R */
    uint32_t partial_stride;
};
/* The R floats of partial k. */
__host__ __device__ inline const float *thg_fold_partial(const thg_als_fold &fold, uint32_t k,
                                                         uint32_t R)
{
    return fold.partials + (size_t)(k / 2u) * fold.partial_stride + (k % 2u) * R;
}
/* The end of a multi-device update, after every rank's partial update
 * (part != nullptr above) and the collective that gathers their sums
 * (`parts`: G blocks of thg_als_acc_bytes, rank q's at parts + q *
 * part_stride, on this device), in two kernels on every rank alike.
 * First, on ctx->stream: the rows `fold` (nullable: none) names, each
 * computed from its summed MTTKRP row; lambda and the column scale; the
 * factor normalised when a lambda is far from 1: what the next MTTKRP
 * reads. It leaves lambda and the folded rows in `scratch`
 * (thg_fold_scratch_bytes, on this device) for the second, on `stream`:
 * the normalised Gram and inner into `out` ([lambda | gram | inner]) and
 * gram_store (nullable), and this rank's (`self`) block of sums zeroed
 * for its next update. Nothing between them may change the parts, the
 * scratch or the mode's result_scale; `folded_rows` is the first's
 * fold->nrows. */
size_t thg_fold_scratch_bytes(uint32_t rank);
thg_status thg_launch_als_fold(thg_context *ctx, uint32_t mode, void *parts, size_t part_stride,
                               uint32_t G, const thg_als_fold *fold, void *scratch,
                               const uint32_t *failed, char *err, size_t errlen);
thg_status thg_launch_als_group_finish(thg_context *ctx, uint32_t mode, void *parts,
                                       size_t part_stride, uint32_t G, uint32_t self,
                                       uint32_t folded_rows, void *scratch, double *out,
                                       const uint32_t *failed, double *gram_store,
                                       cudaStream_t stream, char *err, size_t errlen);
/* The update and initial-factor kernels accumulate the upper micro-tiles of
 * a Gram only (4 x 4 blocks of entries with the row's block <= the column's);
 * this fills the rest of a host copy from them. */
void thg_gram_mirror(double *gram, uint32_t rank);
/* Factor `mode` <- the counter-based initial values of `seed`
 * (th_initial_factor_value, plugin_sdk.h), rounded to fp32, and their Gram
 * added to `gram` (device, R x R doubles, zero before); on ctx->stream. */
thg_status thg_launch_init_factor(thg_context *ctx, uint32_t mode, uint64_t seed, double *gram,
                                  char *err, size_t errlen);
/* nonneg.cu: its workspace, with the tensor (thg_free_tensor). */
void thg_nonneg_free(thg_context *ctx);
/* row_solve.cu: its workspace, with the tensor (thg_free_tensor). */
void thg_rls_free(thg_context *ctx);
/* solve.cu */
thg_status thg_solve_prepare(uint32_t rank, char *err, size_t errlen);
/* For the sweep: W = (V + ridge I)^-1 and the norm flag into ctx->als_w,
 * V the Hadamard of every Gram but mode's, or the breakdown flags when a
 * pivot falls below the host's threshold (for V + ridge I); on `stream`. */
thg_status thg_launch_solve(const thg_context *ctx, uint32_t mode, int use_max_norm,
                            double ridge, cudaStream_t stream, char *err, size_t errlen);
/* sweep.cu */
uint64_t thg_sweep_bytes(uint32_t nmodes, uint32_t rank);
thg_status thg_sweep_alloc(thg_context *ctx, char *err, size_t errlen);
void thg_sweep_free(thg_context *ctx);
/* The pieces of a sweep, for the multi-device sweep (group_sweep.cu), which
 * interleaves the ranks' kernels with collectives: whether the device
 * holds the host's Grams already; the host's Grams onto the device on
 * `stream`; the MTTKRP stamps
 * zeroed on ctx->stream (unless the last sweep's end did: stamps_zeroed);
 * the failure flag zeroed on `stream`; mode's [lambda | gram | inner] slot
 * on the device; every slot and stamp copied to the host (with `rezero`,
 * the stamps zeroed after the copy, for the next sweep); and, after the
 * stream synchronised, the MTTKRP spans, Grams, lambda, inner and the
 * modes done read as thg_als_sweep returns them (grams NULL: the spans
 * alone, for a rank whose results another rank's give; its Gram mirror is
 * then no longer consulted, and invalid). */
int thg_sweep_grams_current(const thg_context *ctx, const double *const *grams);
thg_status thg_sweep_copy_grams(thg_context *ctx, const double *const *grams,
                                cudaStream_t stream, char *err, size_t errlen);
thg_status thg_sweep_zero_stamps(thg_context *ctx, char *err, size_t errlen);
thg_status thg_sweep_zero_flag(thg_context *ctx, cudaStream_t stream, char *err, size_t errlen);
double *thg_sweep_out_slot(thg_context *ctx, uint32_t mode);
/* A group's sweep: the span of mode's collective on this rank (two stamps
 * on the device, zeroed with the MTTKRPs'), and after thg_sweep_collect
 * its length in seconds (0 when nothing stamped it). */
unsigned long long *thg_sweep_comm_span(thg_context *ctx, uint32_t mode);
double thg_sweep_comm_seconds(const thg_context *ctx, uint32_t mode);
/* The slots and stamps copied to the host on `stream` (then, with
 * `rezero`, the stamps zeroed for the next sweep). */
thg_status thg_sweep_enqueue_results(thg_context *ctx, int rezero, cudaStream_t stream,
                                     char *err, size_t errlen);
/* The stamps of mode `mode`'s MTTKRP (two words, as thg_stamp_start/end). */
unsigned long long *thg_sweep_mttkrp_span(thg_context *ctx, uint32_t mode);
void thg_sweep_collect(thg_context *ctx, double *const *grams, double *lambda, double *inner,
                       uint32_t *modes_done);
/* context.cu: a fixed sequence of stream work, run as one CUDA graph
 * (captured on first use into *exec) or as plain launches when graphs are
 * off. `arg` is the sequence's own parameter (a mode, or the norm). */
typedef thg_status (*thg_enqueue_fn)(thg_context *ctx, uint32_t arg, unsigned record_flags,
                                     char *err, size_t errlen);
thg_status thg_run_sequence(thg_context *ctx, uint32_t arg, thg_enqueue_fn fn,
                            cudaGraphExec_t *exec, char *err, size_t errlen);
/* The MTTKRP of one mode with its timing events. */
thg_status thg_enqueue_mttkrp(thg_context *ctx, uint32_t mode, unsigned record_flags, char *err,
                              size_t errlen);
/* build.cu */
/* Copy d from inputs[d]; consecutive modes with the same input share one
 * upload. Sets build_seconds and upload_seconds. */
thg_status thg_build_copies(thg_context *ctx, const thg_mode_input *inputs, char *err,
                            size_t errlen);
uint64_t thg_build_workspace_bytes(const thg_context *ctx, uint32_t max_dim);
/* The same for nnz nonzeros (at most THG_MAX_NNZ) of an nmodes-mode tensor. */
uint64_t thg_build_bytes(uint32_t nmodes, uint64_t nnz, uint32_t max_dim, uint32_t kappa);
/* Once per context: makes the runtime load the build's kernels now. */
thg_status thg_build_warmup(thg_context *ctx, char *err, size_t errlen);
void thg_free_tensor(thg_context *ctx);

/* The plain MTTKRP's launch shape at one rank: lanes per nonzero group and
 * groups per block (the effective P, capped and rounded to whole warps).
 * The generalized MTTKRP at ranks that are not multiples of 4 runs another
 * kernel, of its own shape (mttkrp.cu). */
struct thg_shape {
    uint32_t lanes;
    uint32_t groups;
};
thg_shape thg_launch_shape(uint32_t rank, uint32_t P);

#endif
