/* The generalized MTTKRP (ABI 1.4's generalized_mttkrp) and the elementwise
 * factor operations (factor_update) that CP-APR runs on, on one device.
 *
 * The generalized MTTKRP is the MTTKRP kernels' own body with another
 * per-nonzero value functor (mttkrp_impl.cuh, gen_value): the same partitions,
 * run merging and scheme 1 / scheme 2 flush. Its reduction comes back
 * through mapped host memory, written by the kernel's last block.
 *
 * The factor operations act on the true factor, the stored one times its
 * column scale (thg_context::col_scale: deferred normalisation, als.cu),
 * and Phi, the stored result times its result scale, absent rows zero
 * (row_present). Each writes the true factor back and sets the mode's
 * column scale to 1, so what they leave is in the range of the values
 * they computed. Every operation is one or two kernels and one stream
 * synchronisation; only the rank-length vector and scalars cross. The
 * accumulators are zero between calls: the kernel that consumes them
 * last re-zeroes them (its last block, as the ALS update does). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "thg_internal.cuh"

namespace {

constexpr uint32_t kOpThreads = 256;

/* The mapped outputs, in doubles: [reduced | violation | count | vector[R]]. */
constexpr size_t kOutReduced = 0, kOutViolation = 1, kOutCount = 2, kOutVector = 3;

/* The device block: [col_acc: R doubles | red_acc | changed | weights: R
 * floats | op_scale: R floats | red_count | max_bits | done]. */
size_t gen_block_bytes(uint32_t rank)
{
    return sizeof(double) * ((size_t)rank + 2) + sizeof(float) * 2 * (size_t)rank +
           sizeof(uint32_t) * 3;
}

/* A block's rows of one factor operation: thread t works on column
 * t % R of rows t / R, t / R + rows_per_pass, ... of the rows dealt to
 * its block (threads past rows_per_pass * R work on none). */
struct op_shape {
    uint32_t R, rows, rows_per_pass;
};

__device__ __forceinline__ bool op_thread(const op_shape &s, uint32_t &col, uint64_t &row0,
                                          uint64_t &step)
{
    const uint32_t t = threadIdx.x;
    col = t % s.R;
    row0 = (uint64_t)blockIdx.x * s.rows_per_pass + t / s.R;
    step = (uint64_t)gridDim.x * s.rows_per_pass;
    return t < s.rows_per_pass * s.R;
}

/* Phi(row, col) as the MTTKRP's true result: stored times its scale, zero
 * where the mode's row has no nonzero (never written). */
__device__ __forceinline__ float phi_at(const float *res, const float *rscale,
                                        const uint32_t *present, uint64_t row, uint32_t col,
                                        uint32_t R)
{
    if (present && !thg_row_present(present, row))
        return 0.0f;
    return res[row * R + col] * rscale[col];
}

/* Whether this block is the last of the grid to get here (every block's
 * earlier writes and atomics then visible to it); resets nothing. */
__device__ bool last_block(uint32_t *done)
{
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (last)
        __threadfence();
    return last;
}

/* F(:, c) *= scale[c]; block 0 then sets the column scale to 1 (nothing
 * in this kernel reads it). */
__global__ void apply_scale_kernel(float *F, const float *scale, float *col_scale, op_shape s)
{
    uint32_t c;
    uint64_t row0, step;
    if (op_thread(s, c, row0, step)) {
        const float k = scale[c];
        for (uint64_t i = row0; i < s.rows; i += step)
            F[i * s.R + c] *= k;
    }
    if (blockIdx.x == 0)
        for (uint32_t r = threadIdx.x; r < s.R; r += blockDim.x)
            col_scale[r] = 1.0f;
}

/* SCALE_COLUMNS: scale[c] (the host's vector) *= the column scale. */
__global__ void prepare_scale_kernel(float *scale, const float *col_scale, uint32_t R)
{
    for (uint32_t r = threadIdx.x; r < R; r += blockDim.x)
        scale[r] *= col_scale[r];
}

/* NORMALIZE_1, first pass: the true columns' 1-norms in double into
 * col_acc; the last block writes them to out (mapped) and the factors of
 * apply_scale_kernel (column scale / norm, or the column scale where the
 * norm is 0) to scale, and re-zeroes col_acc and done. */
__global__ void column_norms_kernel(const float *F, const float *col_scale, op_shape s,
                                    double *col_acc, uint32_t *done, float *scale, double *out)
{
    __shared__ double part[kOpThreads];
    uint32_t c;
    uint64_t row0, step;
    double sum = 0.0;
    if (op_thread(s, c, row0, step))
        for (uint64_t i = row0; i < s.rows; i += step)
            sum += fabs((double)F[i * s.R + c]);
    part[threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.x < s.R) {
        for (uint32_t k = 1; k < s.rows_per_pass; ++k)
            sum += part[threadIdx.x + k * s.R];
        atomicAdd(col_acc + threadIdx.x, sum);
    }
    if (!last_block(done))
        return;
    for (uint32_t r = threadIdx.x; r < s.R; r += blockDim.x) {
        volatile double *acc = col_acc;
        const double norm = acc[r] * fabs((double)col_scale[r]);
        out[r] = norm;
        scale[r] = norm > 0.0 ? (float)((double)col_scale[r] / norm) : col_scale[r];
        col_acc[r] = 0.0;
    }
    if (threadIdx.x == 0)
        *done = 0u;
}

__device__ __forceinline__ float block_max(float v)
{
    __shared__ float warp_max[kOpThreads / 32];
#pragma unroll
    for (uint32_t d = 16; d > 0; d /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, d));
    if (threadIdx.x % 32 == 0)
        warp_max[threadIdx.x / 32] = v;
    __syncthreads();
    float m = 0.0f;
    for (uint32_t w = 0; w < blockDim.x / 32; ++w)
        m = fmaxf(m, warp_max[w]);
    return m;
}

/* MULTIPLICATIVE_UPDATE, first pass: max |min(A, 1 - Phi)| into max_bits
 * (non-negative floats order as their bits); the last block writes it to
 * out[0] and re-zeroes done (max_bits stays for the second pass). */
__global__ void violation_kernel(const float *F, const float *col_scale, const float *res,
                                 const float *rscale, const uint32_t *present, op_shape s,
                                 uint32_t *max_bits, uint32_t *done, double *out)
{
    uint32_t c;
    uint64_t row0, step;
    float v = 0.0f;
    if (op_thread(s, c, row0, step)) {
        const float k = col_scale[c];
        for (uint64_t i = row0; i < s.rows; i += step) {
            const float a = F[i * s.R + c] * k;
            const float phi = phi_at(res, rscale, present, i, c, s.R);
            v = fmaxf(v, fabsf(fminf(a, 1.0f - phi)));
        }
    }
    v = block_max(v);
    if (threadIdx.x == 0)
        atomicMax(max_bits, __float_as_uint(v));
    if (!last_block(done))
        return;
    if (threadIdx.x == 0) {
        volatile uint32_t *bits = max_bits;
        out[0] = (double)__uint_as_float(*bits);
        *done = 0u;
    }
}

/* Its second pass: when the violation is at least the tolerance (the
 * host's own test on the same double), A <- A .* Phi, written as the true
 * values; the last block sets the column scale to 1 (when applied) and
 * re-zeroes max_bits and done. */
__global__ void multiplicative_kernel(float *F, float *col_scale, const float *res,
                                      const float *rscale, const uint32_t *present, op_shape s,
                                      uint32_t *max_bits, uint32_t *done, double tolerance)
{
    const bool apply = (double)__uint_as_float(*(volatile uint32_t *)max_bits) >= tolerance;
    uint32_t c;
    uint64_t row0, step;
    if (apply && op_thread(s, c, row0, step)) {
        const float k = col_scale[c];
        for (uint64_t i = row0; i < s.rows; i += step) {
            float *a = F + i * s.R + c;
            *a = *a * k * phi_at(res, rscale, present, i, c, s.R);
        }
    }
    if (!last_block(done))
        return;
    for (uint32_t r = threadIdx.x; apply && r < s.R; r += blockDim.x)
        col_scale[r] = 1.0f;
    if (threadIdx.x == 0) {
        *max_bits = 0u;
        *done = 0u;
    }
}

/* RAISE_INADMISSIBLE_ZEROS: where Phi > threshold and A < tolerance, A += offset;
 * the true values written back; the count added into `changed`, which the
 * last block writes to out[0] and re-zeroes, with the column scale set
 * to 1 and done re-zeroed. */
__global__ void raise_zeros_kernel(float *F, float *col_scale, const float *res,
                                   const float *rscale, const uint32_t *present, op_shape s,
                                   float threshold, double tolerance, float offset,
                                   unsigned long long *changed,
                                   uint32_t *done, double *out)
{
    __shared__ unsigned long long warp_count[kOpThreads / 32];
    uint32_t c;
    uint64_t row0, step;
    unsigned long long n = 0;
    if (op_thread(s, c, row0, step)) {
        const float k = col_scale[c];
        for (uint64_t i = row0; i < s.rows; i += step) {
            float *p = F + i * s.R + c;
            float a = *p * k;
            if (phi_at(res, rscale, present, i, c, s.R) > threshold && (double)a < tolerance) {
                a += offset;
                ++n;
            }
            *p = a;
        }
    }
#pragma unroll
    for (uint32_t d = 16; d > 0; d /= 2)
        n += __shfl_xor_sync(0xffffffffu, n, d);
    if (threadIdx.x % 32 == 0)
        warp_count[threadIdx.x / 32] = n;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long total = 0;
        for (uint32_t w = 0; w < blockDim.x / 32; ++w)
            total += warp_count[w];
        if (total)
            atomicAdd(changed, total);
    }
    if (!last_block(done))
        return;
    for (uint32_t r = threadIdx.x; r < s.R; r += blockDim.x)
        col_scale[r] = 1.0f;
    if (threadIdx.x == 0) {
        volatile unsigned long long *count = changed;
        out[0] = (double)*count;
        *changed = 0ull;
        *done = 0u;
    }
}

const char *op_name(int op)
{
    switch (op) {
    case THG_FACTOR_SCALE_COLUMNS:
        return "SCALE_COLUMNS";
    case THG_FACTOR_NORMALIZE_1:
        return "NORMALIZE_1";
    case THG_FACTOR_MULTIPLICATIVE_UPDATE:
        return "MULTIPLICATIVE_UPDATE";
    case THG_FACTOR_RAISE_INADMISSIBLE_ZEROS:
        return "RAISE_INADMISSIBLE_ZEROS";
    default:
        return "?";
    }
}

/* The mode copy a reduction alone runs over: a scheme-2 copy (equal
 * chunks) if there is one, else mode 0's. */
uint32_t reduction_copy(const thg_context *ctx)
{
    for (uint32_t m = 0; m < ctx->nmodes; ++m)
        if (ctx->copies[m].scheme == 2)
            return m;
    return 0;
}

} // namespace

uint64_t thg_gen_bytes(uint32_t rank) { return gen_block_bytes(rank); }

thg_status thg_gen_alloc(thg_context *ctx, char *err, size_t errlen)
{
    thg_gen_state &g = ctx->gen;
    const size_t R = ctx->rank;
    const size_t bytes = gen_block_bytes(ctx->rank);
    THG_CUDA(cudaMalloc(&g.dev_block, bytes));
    /* Zero once: each accumulator's last reader re-zeroes it. */
    THG_CUDA(cudaMemsetAsync(g.dev_block, 0, bytes, ctx->stream));
    char *p = (char *)g.dev_block;
    g.col_acc = (double *)p;
    g.red_acc = g.col_acc + R;
    g.changed = (unsigned long long *)(g.red_acc + 1);
    g.weights_dev = (float *)(g.changed + 1);
    g.op_scale = g.weights_dev + R;
    g.red_count = (uint32_t *)(g.op_scale + R);
    g.max_bits = g.red_count + 1;
    g.done = g.max_bits + 1;
    THG_CUDA(cudaHostAlloc(&g.stage_host, sizeof(float) * R, cudaHostAllocDefault));
    THG_CUDA(cudaHostAlloc(&g.out_host, sizeof(double) * (kOutVector + R), cudaHostAllocMapped));
    THG_CUDA(cudaHostGetDevicePointer(&g.out_dev, g.out_host, 0));
    return THG_OK;
}

void thg_gen_free(thg_context *ctx)
{
    thg_gen_state &g = ctx->gen;
    cudaFree(g.dev_block);
    cudaFreeHost(g.stage_host);
    cudaFreeHost(g.out_host);
    memset(&g, 0, sizeof(g));
}

/* `n` host doubles as floats into the device buffer `dst` through the
 * pinned staging (free: every call that stages waits before it returns). */
static thg_status stage_vector(thg_context *ctx, float *dst, const double *src, char *err,
                               size_t errlen)
{
    for (uint32_t r = 0; r < ctx->rank; ++r)
        ctx->gen.stage_host[r] = (float)src[r];
    THG_CUDA(cudaMemcpyAsync(dst, ctx->gen.stage_host, sizeof(float) * ctx->rank,
                             cudaMemcpyHostToDevice, ctx->stream));
    return THG_OK;
}

extern "C" thg_status thg_generalized_mttkrp(thg_context *ctx, uint32_t mode, int elementwise,
                                             int reduction, double epsilon,
                                             const double *weights, double *reduced, char *err,
                                             size_t errlen)
{
    if (reduced)
        *reduced = 0.0;
    if (ctx->nmodes == 0)
        return thg_fail(err, errlen, THG_ERR_STATE, "no tensor loaded");
    if (mode != THG_MODE_NONE) {
        const thg_status st = thg_check_mode(ctx, mode, err, errlen);
        if (st != THG_OK)
            return st;
    }
    if (reduction < THG_REDUCTION_NONE || reduction > THG_REDUCTION_INNER_PRODUCT)
        return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                        "reduction %d is unknown to this backend (it knows "
                        "0 NONE, 1 POISSON_LOG_LIKELIHOOD, 2 SQUARED_RESIDUAL, 3 "
                        "INNER_PRODUCT)",
                        reduction);
    if (mode != THG_MODE_NONE) {
        if (elementwise < THG_ELEMENTWISE_VALUE || elementwise > THG_ELEMENTWISE_RESIDUAL)
            return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                            "elementwise function %d is unknown to this "
                            "backend (it knows 0 VALUE, 1 POISSON_RATIO, 2 RESIDUAL)",
                            elementwise);
        if (elementwise == THG_ELEMENTWISE_POISSON_RATIO && !(epsilon > 0.0))
            return thg_fail(err, errlen, THG_ERR_INVALID,
                            "epsilon %g must be positive for "
                            "POISSON_RATIO (it divides by max(m, epsilon))",
                            epsilon);
    }
    if (mode == THG_MODE_NONE && reduction == THG_REDUCTION_NONE)
        return THG_OK; /* nothing to compute */
    /* g = x and no reduction: exactly the MTTKRP (weights unused). */
    if (elementwise == THG_ELEMENTWISE_VALUE && reduction == THG_REDUCTION_NONE)
        return thg_mttkrp(ctx, mode, err, errlen);
    THG_CUDA(cudaSetDevice(ctx->device));
    thg_gen_state &g = ctx->gen;
    if (weights) {
        const thg_status st = stage_vector(ctx, g.weights_dev, weights, err, errlen);
        if (st != THG_OK)
            return st;
    }
    thg_gen_params p;
    memset(&p, 0, sizeof(p));
    p.weights = weights ? g.weights_dev : nullptr;
    p.col_scale = ctx->col_scale;
    p.nmodes = ctx->nmodes;
    p.rank = ctx->rank;
    p.elementwise = mode == THG_MODE_NONE ? (int)THG_ELEMENTWISE_VALUE : elementwise;
    p.reduction = reduction;
    /* A floor below fp32's normal range would divide by a denormal or 0. */
    p.epsilon = epsilon >= (double)FLT_MIN ? (float)epsilon : FLT_MIN;
    p.red_acc = g.red_acc;
    p.red_count = g.red_count;
    p.red_out = g.out_dev + kOutReduced;
    thg_status st;
    if (mode == THG_MODE_NONE) {
        st = thg_launch_generalized(ctx, reduction_copy(ctx), p, 0, err, errlen);
        if (st != THG_OK)
            return st;
        THG_CUDA(cudaStreamSynchronize(ctx->stream));
    } else {
        thg_mode_copy &copy = ctx->copies[mode];
        /* As thg_enqueue_mttkrp: the events around the zeroing and kernel. */
        THG_CUDA(cudaEventRecord(copy.start, ctx->stream));
        st = thg_launch_generalized(ctx, mode, p, 1, err, errlen);
        if (st != THG_OK)
            return st;
        THG_CUDA(cudaEventRecord(copy.stop, ctx->stream));
        copy.has_result = 1;
        copy.timing_pending = 1;
        /* With nothing to return and nothing staged, the call returns with
         * the kernel queued: everything that reads the result (the factor
         * operations, get_result, the next MTTKRP) is queued behind it on
         * this stream, and the one wait of CP-APR's inner iteration is then
         * the update's. The time is read from the events when asked for
         * (thg_get_mode_stats); a fault surfaces in the next call that
         * waits. A staged weight vector must not be rewritten under its
         * pending copy, and a reduction is read here: those wait. */
        if (weights || reduction != THG_REDUCTION_NONE)
            THG_CUDA(cudaStreamSynchronize(ctx->stream));
    }
    if (reduced && reduction != THG_REDUCTION_NONE)
        *reduced = g.out_host[kOutReduced];
    return THG_OK;
}

extern "C" thg_status thg_factor_update(thg_context *ctx, uint32_t mode, int operation,
                                        double *vector, double threshold, double tolerance,
                                        double offset, double *violation, uint64_t *count,
                                        char *err, size_t errlen)
{
    if (violation)
        *violation = 0.0;
    if (count)
        *count = 0;
    if (ctx->nmodes == 0)
        return thg_fail(err, errlen, THG_ERR_STATE, "no tensor loaded");
    thg_status st = thg_check_mode(ctx, mode, err, errlen);
    if (st != THG_OK)
        return st;
    if (operation < THG_FACTOR_SCALE_COLUMNS || operation > THG_FACTOR_RAISE_INADMISSIBLE_ZEROS)
        return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                        "operation %d is unknown to this backend (it knows 1 "
                        "SCALE_COLUMNS, 2 NORMALIZE_1, 3 MULTIPLICATIVE_UPDATE, 4 "
                        "RAISE_INADMISSIBLE_ZEROS)",
                        operation);
    const bool reads_phi = operation == THG_FACTOR_MULTIPLICATIVE_UPDATE ||
                           operation == THG_FACTOR_RAISE_INADMISSIBLE_ZEROS;
    const thg_mode_copy &copy = ctx->copies[mode];
    if (reads_phi && !copy.has_result)
        return thg_fail(err, errlen, THG_ERR_STATE,
                        "%s on mode %u needs an MTTKRP result of that mode first",
                        op_name(operation), mode);
    const bool uses_vector = operation == THG_FACTOR_SCALE_COLUMNS ||
                             operation == THG_FACTOR_NORMALIZE_1;
    if (uses_vector && !vector)
        return thg_fail(err, errlen, THG_ERR_INVALID, "%s: vector is NULL",
                        op_name(operation));
    THG_CUDA(cudaSetDevice(ctx->device));
    thg_gen_state &g = ctx->gen;
    const uint32_t R = ctx->rank;
    float *F = ctx->factors[mode];
    float *cs = ctx->col_scale + (size_t)mode * R;
    const float *res = ctx->results[mode];
    const float *rs = ctx->result_scale + (size_t)mode * R;
    const uint32_t *present = copy.has_empty_rows ? copy.row_present : nullptr;
    const op_shape s = {R, ctx->dims[mode], kOpThreads / R};
    uint64_t want = (s.rows + s.rows_per_pass - 1) / s.rows_per_pass;
    const uint64_t cap = 4ull * (uint64_t)ctx->sm_count;
    const uint32_t blocks = (uint32_t)(want < cap ? (want > 0 ? want : 1) : cap);
    cudaStream_t stream = ctx->stream;
    switch (operation) {
    case THG_FACTOR_SCALE_COLUMNS:
        st = stage_vector(ctx, g.op_scale, vector, err, errlen);
        if (st != THG_OK)
            return st;
        prepare_scale_kernel<<<1, kOpThreads, 0, stream>>>(g.op_scale, cs, R);
        THG_LAUNCHED();
        apply_scale_kernel<<<blocks, kOpThreads, 0, stream>>>(F, g.op_scale, cs, s);
        THG_LAUNCHED();
        break;
    case THG_FACTOR_NORMALIZE_1:
        column_norms_kernel<<<blocks, kOpThreads, 0, stream>>>(
            F, cs, s, g.col_acc, g.done, g.op_scale, g.out_dev + kOutVector);
        THG_LAUNCHED();
        apply_scale_kernel<<<blocks, kOpThreads, 0, stream>>>(F, g.op_scale, cs, s);
        THG_LAUNCHED();
        break;
    case THG_FACTOR_MULTIPLICATIVE_UPDATE:
        violation_kernel<<<blocks, kOpThreads, 0, stream>>>(F, cs, res, rs, present, s,
                                                            g.max_bits, g.done,
                                                            g.out_dev + kOutViolation);
        THG_LAUNCHED();
        multiplicative_kernel<<<blocks, kOpThreads, 0, stream>>>(F, cs, res, rs, present, s,
                                                                 g.max_bits, g.done, tolerance);
        THG_LAUNCHED();
        break;
    default: /* THG_FACTOR_RAISE_INADMISSIBLE_ZEROS */
        raise_zeros_kernel<<<blocks, kOpThreads, 0, stream>>>(
            F, cs, res, rs, present, s, (float)threshold, tolerance, (float)offset, g.changed,
            g.done,
            g.out_dev + kOutCount);
        THG_LAUNCHED();
        break;
    }
    THG_CUDA(cudaStreamSynchronize(stream));
    switch (operation) {
    case THG_FACTOR_NORMALIZE_1:
        memcpy(vector, g.out_host + kOutVector, sizeof(double) * R);
        break;
    case THG_FACTOR_MULTIPLICATIVE_UPDATE: {
        const double v = g.out_host[kOutViolation];
        if (violation)
            *violation = v;
        if (count)
            *count = v >= tolerance ? 1u : 0u;
        break;
    }
    case THG_FACTOR_RAISE_INADMISSIBLE_ZEROS:
        if (count)
            *count = (uint64_t)g.out_host[kOutCount];
        break;
    default:
        break;
    }
    return THG_OK;
}
