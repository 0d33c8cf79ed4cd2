/* The nonnegative CP update on the device (the ABI's als_update_nonneg,
 * 1.5): hierarchical ALS of A >= 0 against A V = M, then als_update's
 * epilogue (kernels/DESIGN.md, "The nonnegative update").
 *
 * With M the mode's MTTKRP result, A its factor and V the R x R Hadamard
 * of the other Grams, a pass updates every row on its own, columns
 * r = 0 .. R-1 in order, where V(r,r) != 0:
 *   A(i,r) <- max(0, (M(i,r) - sum_q A(i,q) V(q,r) + V(r,r) A(i,r)) / V(r,r))
 * and the passes stop after the one whose summed squared change is at most
 * tolerance times the first's. Rows are independent; only that sum couples
 * them, so a pass is one kernel over every row and the stopping test runs
 * on the device:
 *   - pass_kernel<RP>(p): a thread per row (grid-stride), the row in
 *     registers as fp32 (RP the rank padded to 8, 16, 32 or 64, every loop
 *     unrolled; 128: the same code, not unrolled, the row in local memory),
 *     V in shared memory in fp64, each dot product in fp64 (four
 *     accumulators), each new entry rounded to fp32 as it is stored and
 *     its change (the stored value's) added in fp64. A block writes its
 *     change sum to partials[block]; the last block to finish (a counter)
 *     adds them in block order (the sum depends on the grid only, which is
 *     fixed per shape and device), records the first pass's, and sets
 *     `stop` when the test is met. Pass p > 0 returns at once when `stop`
 *     is set, so the host launches the passes without waiting; only every
 *     kLaunchChunk passes does it read `stop` back (one synchronisation),
 *     so a large `sweeps` that stops early launches few idle kernels.
 *   - pass 0 reads the factor as stored (unnormalised, with its column
 *     scale, als.cu) times `scale`, and M times its result scale; every
 *     pass writes the factor's true values (column scale 1 in effect).
 *   - then thg_launch_als_epilogue (als.cu): the update kernel's Gram,
 *     inner-product and norm sums over the factor as computed, its finish
 *     (lambda, the normalised Gram and inner, the column scale) and its
 *     scale kernel: the same code as thg_als_update's, not a copy.
 * One synchronisation at the end; V and scale go up in one copy, and
 * [lambda | gram | inner] (mapped) and the pass count come back. */
#include <math.h>
#include <string.h>

#include <type_traits>

#include "thg_internal.cuh"

namespace {

/* Passes launched between two reads of the stop flag. */
constexpr uint32_t kLaunchChunk = 8;

/* The passes' control block on the device (and its pinned mirror). */
struct nonneg_ctrl {
    double first;    /* the first pass's change */
    double last;     /* the latest pass's change */
    uint32_t count;  /* blocks of the running pass finished */
    uint32_t stop;   /* a pass met the test: later passes return at once */
    uint32_t passes; /* passes made */
    int32_t norm;    /* the norm flag, staged for ctx->als_w (host block only) */
};

/* One block of device memory (and the same layout in pinned host memory,
 * the staging): ctrl | V [R*R] doubles | scale [R] doubles | the per-block
 * change sums [nparts] doubles (device only; not copied). */
struct nonneg_layout {
    size_t v, scale, partials, staged, total;
};

nonneg_layout layout_for(uint32_t R, uint32_t nparts)
{
    nonneg_layout l;
    l.v = 64; /* sizeof(nonneg_ctrl) rounded up */
    l.scale = l.v + sizeof(double) * (size_t)R * R;
    l.partials = l.scale + sizeof(double) * R;
    l.staged = l.partials; /* what the upload copies */
    l.total = l.partials + sizeof(double) * nparts;
    return l;
}
static_assert(sizeof(nonneg_ctrl) <= 64, "nonneg_ctrl");

struct pass_args {
    /* Where V comes from: V itself ([R*R]), or, inside a sweep, every
     * mode's Gram ([nmodes][R*R], V their Hadamard product but mode's). */
    const double *grams;
    uint32_t nmodes, mode;
    const float *M;               /* the mode's result, row 0 */
    const float *m_scale;         /* [R] M's column scale (result_scale) */
    const uint32_t *row_present;  /* nullable: M's rows with nonzeros */
    float *A;                     /* the factor */
    const float *col_scale;       /* [R] the factor's stored column scale (pass 0) */
    double *V;                    /* [R*R]; inside a sweep pass 0 writes it */
    const double *scale;          /* [R] */
    nonneg_ctrl *ctrl;
    double *partials;             /* [gridDim.x] */
    uint32_t I, R;
    int vector_rows;              /* R % 4 == 0 and M, A 16-byte aligned: float4 rows */
    double tolerance;
    double ridge, l1;             /* ABI 1.6: 0 and 0 for the plain update */
    int nonneg;                   /* clamp at 0 (TH_CONSTRAINT_NONNEG) or not */
    /* Inside a sweep: an earlier mode's solve broke down (return at once),
     * and where pass 0 leaves the norm flag the epilogue reads; nullptr
     * for the update on its own (the host staged the flag). */
    const uint32_t *failed;
    int *norm_flag;
    int norm_value;
};

/* Threads per block of pass_kernel<RP>. */
__host__ __device__ constexpr uint32_t pass_threads(uint32_t RP) { return RP <= 64u ? 128u : 256u; }

/* Dynamic shared memory of pass_kernel<RP>: V [RP*RP], then diag, inv,
 * m_scale and the pass's scale [RP] each, then [warps] for the reduction,
 * all doubles. */
__host__ __device__ constexpr size_t pass_smem_bytes(uint32_t RP)
{
    return sizeof(double) * ((size_t)RP * RP + 4u * RP + pass_threads(RP) / 32u);
}

/* The block's sum of `x` in a fixed order (warps by shuffles, then warp
 * sums in warp order by thread 0); valid in thread 0. Every thread calls. */
__device__ __forceinline__ double block_sum(double x, double *s_red)
{
    for (uint32_t off = 16; off > 0; off >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, off);
    const uint32_t warp = threadIdx.x / 32u, warps = blockDim.x / 32u;
    __syncthreads(); /* s_red free (an earlier use is done) */
    if (threadIdx.x % 32u == 0)
        s_red[warp] = x;
    __syncthreads();
    double total = 0.0;
    if (threadIdx.x == 0)
        for (uint32_t w = 0; w < warps; ++w)
            total += s_red[w];
    return total;
}

template <uint32_t RP>
__global__ void __launch_bounds__(pass_threads(RP)) pass_kernel(pass_args a, uint32_t pass)
{
    /* Every loop over the row's columns unrolls up to 64 (the row in
     * registers); at 128 none does (the row in local memory). */
    extern __shared__ double sh[];
    /* The previous pass met the test: nothing more (uniform, before any
     * barrier; written by an earlier kernel of the stream). */
    if (pass > 0 && *(volatile const uint32_t *)&a.ctrl->stop)
        return;
    if (a.failed && *a.failed) /* uniform: the sweep's host finishes from there */
        return;
    double *s_v = sh;                          /* [RP*RP], zero outside R x R */
    double *s_diag = s_v + (size_t)RP * RP;    /* [RP] V(r,r) */
    double *s_inv = s_diag + RP;               /* [RP] 1 / (V(r,r) + ridge), 0 where that is 0 */
    double *s_ms = s_inv + RP;                 /* [RP] M's column scale */
    double *s_as = s_ms + RP;                  /* [RP] A's on reading: pass 0 its column scale * scale */
    double *s_red = s_as + RP;                 /* [warps] */
    __shared__ bool s_last;
    const uint32_t R = a.R, tid = threadIdx.x;
    /* V into shared memory: each thread's entries loaded at once (the
     * loop's count is a constant, so it unrolls and the loads overlap;
     * one at a time, they cost a few microseconds a pass on small modes).
     * Inside a sweep, pass 0 builds V from the Grams and block 0 leaves it
     * in the workspace for the later passes. */
    const size_t RR = (size_t)R * R;
    const bool from_grams = a.grams && pass == 0;
    constexpr uint32_t kPer = (RP * RP + pass_threads(RP) - 1) / pass_threads(RP);
#pragma unroll
    for (uint32_t j = 0; j < kPer; ++j) {
        const uint32_t t = tid + j * pass_threads(RP);
        const uint32_t k = t / RP, c = t % RP;
        double v = 0.0;
        if (t < RP * RP && k < R && c < R) {
            const size_t e = (size_t)k * R + c;
            if (from_grams) {
                v = 1.0;
                for (uint32_t m = 0; m < a.nmodes; ++m)
                    if (m != a.mode)
                        v *= __ldg(a.grams + m * RR + e);
                if (blockIdx.x == 0)
                    a.V[e] = v;
            } else {
                v = __ldg(a.V + e);
            }
        }
        if (t < RP * RP)
            s_v[t] = v;
    }
    __syncthreads();
    for (uint32_t t = tid; t < RP; t += blockDim.x) {
        const double vrr = s_v[(size_t)t * RP + t];
        s_diag[t] = vrr;
        /* The divisor d = V(r,r) + ridge; a column with d = 0 stays (s_inv 0
         * marks it). */
        const double d = t < R ? vrr + a.ridge : 0.0;
        s_inv[t] = d != 0.0 ? 1.0 / d : 0.0;
        s_ms[t] = t < R ? (double)a.m_scale[t] : 0.0;
        s_as[t] = t < R ? (pass == 0 ? (double)a.col_scale[t] * a.scale[t] : 1.0) : 0.0;
    }
    __syncthreads();

    double change = 0.0;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + tid; i < a.I; i += stride) {
        float *a_row = a.A + i * R;
        const float *m_row = a.M + i * R;
        const bool present = !a.row_present || thg_row_present(a.row_present, i);
        /* The row's values are fp32 (stored so after every update), held
         * in double up to RP = 32: each dot product's FMAs then take them
         * as they are, where a float row paid a conversion per FMA (on the
         * quarter-rate conversion pipe: about 4x the FMAs' time at R = 32).
         * At 64 and 128 the doubles would not fit in registers. */
        using row_t = typename std::conditional<(RP <= 32u), double, float>::type;
        row_t row[RP];
        if (a.vector_rows) {
#pragma unroll(RP <= 64u ? RP / 4u : 1u)
            for (uint32_t q = 0; q < RP; q += 4u) {
                float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                if (q < R)
                    v = *reinterpret_cast<const float4 *>(a_row + q);
                row[q] = v.x;
                row[q + 1] = v.y;
                row[q + 2] = v.z;
                row[q + 3] = v.w;
            }
        } else {
#pragma unroll(RP <= 64u ? RP : 1u)
            for (uint32_t q = 0; q < RP; ++q)
                row[q] = q < R ? a_row[q] : 0.0f;
        }
        if (pass == 0)
#pragma unroll(RP <= 64u ? RP : 1u)
            for (uint32_t q = 0; q < RP; ++q)
                row[q] = __double2float_rn((double)row[q] * s_as[q]);
        float4 m4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        /* No break or continue: either keeps the row out of registers. */
#pragma unroll(RP <= 64u ? RP : 1u)
        for (uint32_t r = 0; r < RP; ++r) {
            if (r < R) { /* uniform */
                /* M(i, r): a quad at a time on whole-quad rows. */
                float m;
                if (a.vector_rows) {
                    if (r % 4u == 0)
                        m4 = present ? *reinterpret_cast<const float4 *>(m_row + r)
                                     : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                    const uint32_t j = r % 4u;
                    m = j == 0 ? m4.x : j == 1 ? m4.y : j == 2 ? m4.z : m4.w;
                } else {
                    m = present ? m_row[r] : 0.0f;
                }
                const double vrr = s_diag[r];
                if (s_inv[r] != 0.0) { /* uniform; otherwise the column stays */
                    /* V symmetric: its row r is column r. */
                    const double *v_row = s_v + (size_t)r * RP;
                    double p0 = 0.0, p1 = 0.0, p2 = 0.0, p3 = 0.0;
#pragma unroll(RP <= 64u ? RP / 4u : 1u)
                    for (uint32_t q = 0; q < RP; q += 4u) {
                        const double2 v01 = *reinterpret_cast<const double2 *>(v_row + q);
                        const double2 v23 = *reinterpret_cast<const double2 *>(v_row + q + 2);
                        p0 = fma((double)row[q], v01.x, p0);
                        p1 = fma((double)row[q + 1], v01.y, p1);
                        p2 = fma((double)row[q + 2], v23.x, p2);
                        p3 = fma((double)row[q + 3], v23.y, p3);
                    }
                    const double product = (p0 + p1) + (p2 + p3);
                    const double old = (double)row[r];
                    const double n = (double)m * s_ms[r] - product + vrr * old;
                    /* Clamped at 0, or soft-thresholded by l1 (both sides). */
                    const double mag = fmax(0.0, (a.nonneg ? n : fabs(n)) - a.l1);
                    const double shrunk = !a.nonneg && n < 0.0 ? -mag : mag;
                    const double next = shrunk * s_inv[r];
                    const float stored = __double2float_rn(next);
                    const double d = (double)stored - old;
                    change = fma(d, d, change);
                    row[r] = stored;
                }
            }
        }
        if (a.vector_rows) {
#pragma unroll(RP <= 64u ? RP / 4u : 1u)
            for (uint32_t q = 0; q < RP; q += 4u)
                if (q < R)
                    *reinterpret_cast<float4 *>(a_row + q) =
                        make_float4((float)row[q], (float)row[q + 1], (float)row[q + 2],
                                    (float)row[q + 3]);
        } else {
#pragma unroll(RP <= 64u ? RP : 1u)
            for (uint32_t q = 0; q < RP; ++q)
                if (q < R)
                    a_row[q] = (float)row[q];
        }
    }

    if (pass == 0 && a.norm_flag && blockIdx.x == 0 && tid == 0)
        *a.norm_flag = a.norm_value; /* read by the epilogue's finish, after every pass */

    /* The pass's change: this block's sum, then the last block's total. */
    const double mine = block_sum(change, s_red);
    if (tid == 0) {
        a.partials[blockIdx.x] = mine;
        __threadfence();
        s_last = atomicAdd(&a.ctrl->count, 1u) == gridDim.x - 1u;
    }
    __syncthreads();
    if (!s_last)
        return;
    __threadfence();
    double part = 0.0;
    for (uint32_t b = tid; b < gridDim.x; b += blockDim.x)
        part += __ldcg(&a.partials[b]);
    const double total = block_sum(part, s_red);
    if (tid == 0) {
        nonneg_ctrl *c = a.ctrl;
        if (pass == 0)
            c->first = total;
        const double first = pass == 0 ? total : __ldcg(&c->first);
        c->last = total;
        c->passes = pass + 1u;
        c->count = 0u;
        if (total <= a.tolerance * first)
            c->stop = 1u;
    }
}

/* The kernel for a rank: the rank padded to 8, 16, 32, 64 or 128. */
uint32_t padded_for(uint32_t R)
{
    return R <= 8u ? 8u : R <= 16u ? 16u : R <= 32u ? 32u : R <= 64u ? 64u : 128u;
}

typedef void (*pass_fn)(pass_args, uint32_t);

pass_fn kernel_for(uint32_t RP)
{
    switch (RP) {
    case 8:
        return pass_kernel<8>;
    case 16:
        return pass_kernel<16>;
    case 32:
        return pass_kernel<32>;
    case 64:
        return pass_kernel<64>;
    default:
        return pass_kernel<128>;
    }
}

/* The first call after a load: the kernel's shared memory and grid for
 * the loaded rank, and the workspace (device block and pinned staging). */
thg_status prepare(thg_context *ctx, char *err, size_t errlen)
{
    if (ctx->nonneg_dev)
        return THG_OK;
    const uint32_t R = ctx->rank, RP = padded_for(R);
    const pass_fn fn = kernel_for(RP);
    const size_t smem = pass_smem_bytes(RP);
    THG_CUDA(cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem));
    int per_sm = 0;
    THG_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void *)fn,
                                                           (int)pass_threads(RP), smem));
    if (per_sm < 1)
        return thg_fail(err, errlen, THG_ERR_DEVICE,
                        "als_update_nonneg: no block of the rank-%u pass kernel fits on an SM "
                        "(%zu bytes of shared memory)",
                        R, smem);
    const uint32_t nparts = (uint32_t)per_sm * (uint32_t)ctx->sm_count;
    const nonneg_layout l = layout_for(R, nparts);
    uint64_t free_bytes = 0;
    thg_status st = thg_free_device_bytes(ctx, &free_bytes, err, errlen);
    if (st != THG_OK)
        return st;
    if (l.total > free_bytes)
        return thg_fail(err, errlen, THG_ERR_OUT_OF_MEMORY,
                        "als_update_nonneg needs %zu bytes of device memory, %llu free",
                        l.total, (unsigned long long)free_bytes);
    void *dev = nullptr, *host = nullptr;
    cudaError_t e = cudaMalloc(&dev, l.total);
    if (e == cudaSuccess) {
        e = cudaHostAlloc(&host, l.staged, cudaHostAllocDefault);
        if (e != cudaSuccess) {
            cudaFree(dev);
            host = nullptr;
        }
    }
    THG_CUDA(e);
    ctx->nonneg_dev = dev;
    ctx->nonneg_host = host;
    ctx->nonneg_partials = nparts;
    ctx->nonneg_bytes = l.total;
    ctx->workspace_bytes += l.total;
    return THG_OK;
}

thg_status launch_pass(thg_context *ctx, uint32_t mode, const pass_args &a, uint32_t pass,
                       char *err, size_t errlen)
{
    const uint32_t RP = padded_for(ctx->rank), threads = pass_threads(RP);
    const uint64_t needed = ((uint64_t)a.I + threads - 1) / threads;
    const uint32_t blocks =
        (uint32_t)(needed < ctx->nonneg_partials ? needed : ctx->nonneg_partials);
    (void)mode;
    kernel_for(RP)<<<blocks, threads, pass_smem_bytes(RP), ctx->stream>>>(a, pass);
    THG_LAUNCHED();
    return THG_OK;
}

/* The pass arguments every update shares: mode's result, factor and
 * column scales, and the workspace's control block and partials. */
pass_args args_for(thg_context *ctx, uint32_t mode, double tolerance, double ridge, double l1,
                   int nonneg)
{
    const uint32_t R = ctx->rank;
    const nonneg_layout l = layout_for(R, ctx->nonneg_partials);
    char *dev = (char *)ctx->nonneg_dev;
    const thg_mode_copy &copy = ctx->copies[mode];
    pass_args a;
    memset(&a, 0, sizeof(a));
    a.M = ctx->results[mode];
    a.m_scale = ctx->result_scale + (size_t)mode * R;
    a.row_present = copy.has_empty_rows ? copy.row_present : nullptr;
    a.A = ctx->factors[mode];
    a.col_scale = ctx->col_scale + (size_t)mode * R;
    a.V = (double *)(dev + l.v);
    a.scale = (const double *)(dev + l.scale);
    a.ctrl = (nonneg_ctrl *)dev;
    a.partials = (double *)(dev + l.partials);
    a.I = ctx->dims[mode];
    a.R = R;
    a.vector_rows = R % 4u == 0 && ((uintptr_t)a.M % 16u) == 0 && ((uintptr_t)a.A % 16u) == 0;
    a.tolerance = tolerance;
    a.ridge = ridge;
    a.l1 = l1;
    a.nonneg = nonneg;
    return a;
}

/* Everything but the final synchronisation, on ctx->stream. */
thg_status enqueue_update(thg_context *ctx, uint32_t mode, uint32_t sweeps, double tolerance,
                          double ridge, double l1, int nonneg, char *err, size_t errlen)
{
    const uint32_t R = ctx->rank;
    const nonneg_layout l = layout_for(R, ctx->nonneg_partials);
    char *dev = (char *)ctx->nonneg_dev;
    char *host = (char *)ctx->nonneg_host;
    nonneg_ctrl *ctrl_dev = (nonneg_ctrl *)dev, *ctrl_host = (nonneg_ctrl *)host;
    /* ctrl (zeroed), V and scale in one copy; the norm flag where the
     * epilogue's finish reads it (after W's floats in ctx->als_w). */
    THG_CUDA(cudaMemcpyAsync(dev, host, l.staged, cudaMemcpyHostToDevice, ctx->stream));
    THG_CUDA(cudaMemcpyAsync(ctx->als_w + (size_t)R * R, &ctrl_host->norm, sizeof(int),
                             cudaMemcpyHostToDevice, ctx->stream));
    const pass_args a = args_for(ctx, mode, tolerance, ridge, l1, nonneg);
    for (uint32_t p = 0; p < sweeps; ++p) {
        const thg_status st = launch_pass(ctx, mode, a, p, err, errlen);
        if (st != THG_OK)
            return st;
        if ((p + 1u) % kLaunchChunk == 0 && p + 1u < sweeps) {
            /* Whether to launch more: one look at the stop flag. */
            THG_CUDA(cudaMemcpyAsync(&ctrl_host->stop, &ctrl_dev->stop, sizeof(uint32_t),
                                     cudaMemcpyDeviceToHost, ctx->stream));
            THG_CUDA(cudaStreamSynchronize(ctx->stream));
            if (ctrl_host->stop)
                break;
        }
    }
    const thg_status st =
        thg_launch_als_epilogue(ctx, mode, ctx->als_out_dev, nullptr, nullptr, nullptr, err,
                                errlen);
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaMemcpyAsync(ctrl_host, ctrl_dev, sizeof(nonneg_ctrl), cudaMemcpyDeviceToHost,
                             ctx->stream));
    return THG_OK;
}

} // namespace

thg_status thg_nonneg_prepare(thg_context *ctx, char *err, size_t errlen)
{
    return prepare(ctx, err, errlen);
}

const double *thg_nonneg_sweep_scale(const thg_context *ctx)
{
    return (const double *)((const char *)ctx->nonneg_dev +
                            layout_for(ctx->rank, ctx->nonneg_partials).scale);
}

thg_status thg_nonneg_stage_scale(thg_context *ctx, const double *scale, char *err,
                                  size_t errlen)
{
    const nonneg_layout l = layout_for(ctx->rank, ctx->nonneg_partials);
    double *staged = (double *)((char *)ctx->nonneg_host + l.scale);
    for (uint32_t r = 0; r < ctx->rank; ++r)
        staged[r] = scale ? scale[r] : 1.0;
    THG_CUDA(cudaMemcpyAsync((char *)ctx->nonneg_dev + l.scale, staged,
                             sizeof(double) * ctx->rank, cudaMemcpyHostToDevice, ctx->stream));
    return THG_OK;
}

thg_status thg_nonneg_enqueue_sweep_mode(thg_context *ctx, uint32_t mode, const double *scale,
                                         const thg_nonneg_sweep_mode &m, double *out,
                                         double *gram_store, cudaEvent_t after_stats, char *err,
                                         size_t errlen)
{
    /* The control block zeroed for this mode's passes (they run in stream
     * order after the previous mode's). */
    THG_CUDA(cudaMemsetAsync(ctx->nonneg_dev, 0, sizeof(nonneg_ctrl), ctx->stream));
    pass_args a = args_for(ctx, mode, m.tolerance, m.ridge, m.l1, m.nonneg);
    a.grams = ctx->sweep.grams_dev; /* pass 0 builds V into a.V from them */
    a.nmodes = ctx->nmodes;
    a.mode = mode;
    a.scale = scale;
    a.failed = ctx->sweep.flags.failed;
    a.norm_flag = (int *)(ctx->als_w + (size_t)ctx->rank * ctx->rank);
    a.norm_value = m.use_max_norm;
    /* Every pass is launched (a graph holds a fixed sequence); those after
     * the stop return at once. */
    for (uint32_t p = 0; p < m.sweeps; ++p) {
        const thg_status st = launch_pass(ctx, mode, a, p, err, errlen);
        if (st != THG_OK)
            return st;
    }
    return thg_launch_als_epilogue(ctx, mode, out, ctx->sweep.flags.failed, gram_store,
                                   after_stats, err, errlen);
}

void thg_nonneg_free(thg_context *ctx)
{
    ctx->workspace_bytes =
        ctx->workspace_bytes > ctx->nonneg_bytes ? ctx->workspace_bytes - ctx->nonneg_bytes : 0;
    cudaFree(ctx->nonneg_dev);
    cudaFreeHost(ctx->nonneg_host);
    ctx->nonneg_dev = nullptr;
    ctx->nonneg_host = nullptr;
    ctx->nonneg_partials = 0;
    ctx->nonneg_bytes = 0;
}

extern "C" thg_status thg_als_update_nonneg(thg_context *ctx, uint32_t mode, const double *v,
                                            const double *scale, uint32_t sweeps,
                                            double tolerance, double ridge, double l1,
                                            int nonneg, int use_max_norm, double *lambda,
                                            double *gram, double *inner, uint32_t *passes,
                                            char *err, size_t errlen)
{
    if (passes)
        *passes = 0;
    thg_status st = thg_check_mode(ctx, mode, err, errlen);
    if (st != THG_OK)
        return st;
    if (!v || !lambda || !gram || !inner)
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "als_update_nonneg: v, lambda, gram and inner must not be NULL");
    if (sweeps == 0)
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "als_update_nonneg: sweeps 0 (at least one pass)");
    if (!(tolerance >= 0.0) || !isfinite(tolerance))
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "als_update_nonneg: tolerance %g must be finite and at least 0",
                        tolerance);
    if (!(ridge >= 0.0) || !isfinite(ridge) || !(l1 >= 0.0) || !isfinite(l1))
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "als_update_nonneg: ridge %g and l1 %g must be finite and at least 0",
                        ridge, l1);
    if (ctx->factor_allocator.alloc != thg_device_allocator.alloc)
        return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                        "als_update_nonneg on a rank of a multi-device group is not "
                        "implemented (a rank holds a share of each mode's result)");
    if (!ctx->copies[mode].has_result)
        return thg_fail(err, errlen, THG_ERR_STATE,
                        "als_update_nonneg on mode %u needs an MTTKRP result of that mode "
                        "first",
                        mode);
    THG_CUDA(cudaSetDevice(ctx->device));
    st = prepare(ctx, err, errlen);
    if (st != THG_OK)
        return st;
    const uint32_t R = ctx->rank;
    const nonneg_layout l = layout_for(R, ctx->nonneg_partials);
    char *host = (char *)ctx->nonneg_host;
    /* The staging is free: the previous call synchronised. */
    nonneg_ctrl *ctrl_host = (nonneg_ctrl *)host;
    memset(ctrl_host, 0, sizeof(nonneg_ctrl));
    ctrl_host->norm = use_max_norm ? 1 : 0;
    memcpy(host + l.v, v, sizeof(double) * (size_t)R * R);
    double *scale_host = (double *)(host + l.scale);
    for (uint32_t r = 0; r < R; ++r)
        scale_host[r] = scale ? scale[r] : 1.0;
    st = enqueue_update(ctx, mode, sweeps, tolerance, ridge, l1, nonneg, err, errlen);
    /* The only synchronisation (but every kLaunchChunk passes); also on
     * failure, so the staging is not rewritten under a pending copy. */
    const cudaError_t e = cudaStreamSynchronize(ctx->stream);
    if (st != THG_OK)
        return st;
    THG_CUDA(e);
    thg_als_read_out(ctx, lambda, gram, inner);
    if (passes)
        *passes = ctrl_host->passes;
    return THG_OK;
}
