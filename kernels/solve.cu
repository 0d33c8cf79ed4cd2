/* The R x R solve of one CP-ALS step on the device, for the sweep
 * (sweep.cu): W = (V + ridge I)^-1 with V the Hadamard product of every
 * other mode's Gram, in double, so an iteration needs no host round trip per mode.
 *
 * One block inverts V in place in shared memory by Gauss-Jordan
 * elimination without pivoting, which is stable for a symmetric positive
 * definite V: its pivots are exactly the Cholesky pivots (the squares of
 * L's diagonal), so the breakdown test is the host's (libtensorhost/cpd/dense.c,
 * the ABI's als_sweep): pivot <= max diag(V) * R * DBL_EPSILON *
 * TH_SOLVE_BREAKDOWN_FACTOR (plugin.h). Each of
 * the R steps is one parallel rank-one update of all R x R entries, so the
 * latency is R short steps, not the O(R^2)-long dependent chains of a
 * triangular solve (a one-thread-per-row Cholesky and triangular inverse
 * measured ~100 us per mode at R = 32 on an H200 and, not fitting beside
 * the MTTKRP's full-SM blocks, ran after it: kernels/DESIGN.md).
 *
 * Ranks up to 128 keep V in registers instead (register_solve): ~11 us
 * at R = 32 on an H200, against ~22-25 us for the shared-memory kernel at
 * 256 or 1024 threads (kernels/DESIGN.md). The shared-memory kernel
 * serves the larger ranks. */
#include <float.h>

#include <tensorhost/plugin.h>

#include "thg_internal.cuh"

namespace {

constexpr uint32_t kBlockThreads = 1024;

/* Entry (i, k) of V + ridge I, V the Hadamard of every Gram but mode's. */
__device__ double system_entry(const double *grams, uint32_t nmodes, uint32_t mode, uint32_t R,
                               uint32_t i, uint32_t k, double ridge)
{
    const uint32_t RR = R * R, e = i * R + k;
    double x = 1.0;
#pragma unroll 4
    for (uint32_t m = 0; m < nmodes; ++m)
        if (m != mode)
            x *= grams[(size_t)m * RR + e];
    return i == k ? x + ridge : x;
}

/* The host's breakdown threshold from the largest diagonal entry. */
__device__ double breakdown_threshold(double largest, uint32_t R)
{
    return largest * R * DBL_EPSILON * TH_SOLVE_BREAKDOWN_FACTOR;
}

__device__ void report_breakdown(thg_sweep_flags flags, uint32_t mode)
{
    *flags.failed = 1u;
    /* mode + 1: zero means "no breakdown" to the host. */
    *flags.host_status = mode + 1u;
    __threadfence_system();
}

/* One block, thread (k, y) owns column k of rows y, y + ny, ..., V in
 * shared memory; a step is one parallel rank-one update between two
 * barriers. */
__global__ void __launch_bounds__(kBlockThreads)
    solve_block_kernel(const double *grams, uint32_t nmodes, uint32_t mode, uint32_t R,
                       double ridge, int use_max_norm, thg_sweep_flags flags, float *W)
{
    extern __shared__ double sh[];
    double *a = sh;                        /* [R*R], V, becoming V^-1 */
    double *pivot_row = a + (size_t)R * R; /* [R] row j before step j */
    double *pivot_col = pivot_row + R;     /* [R] column j before step j */
    __shared__ double s_threshold;
    if (*flags.failed) /* uniform */
        return;
    const uint32_t k = threadIdx.x, y0 = threadIdx.y, ny = blockDim.y;
    const uint32_t tid = y0 * blockDim.x + k;
    const uint32_t RR = R * R;
    for (uint32_t i = y0; i < R; i += ny)
        a[i * R + k] = system_entry(grams, nmodes, mode, R, i, k, ridge);
    __syncthreads();
    if (tid < 32) {
        double largest = 0.0;
        for (uint32_t i = tid; i < R; i += 32)
            largest = fmax(largest, fabs(a[i * R + i]));
        for (int offset = 16; offset > 0; offset /= 2)
            largest = fmax(largest, __shfl_xor_sync(0xffffffffu, largest, offset));
        if (tid == 0)
            s_threshold = breakdown_threshold(largest, R);
    }
    __syncthreads();
    for (uint32_t j = 0; j < R; ++j) {
        const double p = a[j * R + j]; /* every thread reads the same: uniform */
        if (!(p > s_threshold)) {
            if (tid == 0)
                report_breakdown(flags, mode);
            return;
        }
        if (y0 == 0) {
            pivot_row[k] = a[j * R + k];
            pivot_col[k] = a[k * R + j];
        }
        __syncthreads();
        const double inv = 1.0 / p;
        const double row_j = pivot_row[k];
        for (uint32_t i = y0; i < R; i += ny) {
            double &x = a[i * R + k];
            if (i == j)
                x = k == j ? inv : row_j * inv;
            else if (k == j)
                x = -pivot_col[i] * inv;
            else
                x -= pivot_col[i] * row_j * inv;
        }
        __syncthreads();
    }
    for (uint32_t i = y0; i < R; i += ny)
        W[i * R + k] = (float)a[i * R + k];
    if (tid == 0)
        *(int *)(W + RR) = use_max_norm;
}

/* The register layout: WARPS warps, warp w holding rows RPW w ..
 * RPW w + RPW - 1 of V in registers and lane k columns k, k + 32, ...
 * (CPL of them), so a step is one barrier, one shared-memory pivot row and
 * one shuffle per row for the pivot column. The shared-memory kernel
 * above spends its time issuing its threads' bookkeeping and a barrier
 * pair a step, not in the arithmetic: at R = 64, 96 and 128 it took 70,
 * 179 and 365 us, these layouts 42, 105 and 210 (one H200; beside a small
 * tensor's MTTKRP of 0.15-0.3 ms, kernels/DESIGN.md). */
template <int WARPS, int RPW, int CPL>
struct register_layout {
    static constexpr int kWarps = WARPS, kRowsPerWarp = RPW, kColsPerLane = CPL;
    static constexpr uint32_t kMaxRank = (uint32_t)(WARPS * RPW) < 32u * CPL
                                             ? (uint32_t)(WARPS * RPW)
                                             : 32u * CPL;
    /* register_solve's shared doubles: the warps' maxima, two pivot rows
     * of kMaxRank + 1 (the row and the breakdown flag). */
    static constexpr uint32_t kSharedDoubles = WARPS + 2u * (kMaxRank + 1u);
};
using layout32 = register_layout<8, 4, 1>;
using layout64 = register_layout<16, 4, 2>;
using layout96 = register_layout<16, 6, 3>;
using layout128 = register_layout<16, 8, 4>;
constexpr uint32_t kRegisterSolveMaxRank = layout128::kMaxRank;

/* Called by every thread of a block of L::kWarps warps. v_of(i, k) gives
 * V(i, k) for i, k < R <= L::kMaxRank. W (row-major R x R) is written on
 * success. `s` holds L::kSharedDoubles. Returns false on a breakdown, in
 * every thread alike (W is then not written). */
template <class L, typename VOf>
__device__ bool register_solve(uint32_t R, VOf v_of, double *s, float *W)
{
    constexpr int WARPS = L::kWarps, RPW = L::kRowsPerWarp, CPL = L::kColsPerLane;
    double *s_wmax = s;           /* [WARPS] */
    double *s_prow = s + WARPS;   /* two buffers of [R] pivot row, [R] breakdown */
    const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    double v[RPW][CPL];
    double largest = 0.0;
#pragma unroll
    for (int t = 0; t < RPW; ++t) {
        const uint32_t i = warp * RPW + (uint32_t)t;
#pragma unroll
        for (int c = 0; c < CPL; ++c) {
            const uint32_t k = lane + 32u * (uint32_t)c;
            double x = 0.0;
            if (i < R && k < R) {
                x = v_of(i, k);
                if (k == i)
                    largest = fmax(largest, fabs(x));
            }
            v[t][c] = x;
        }
    }
    for (int offset = 16; offset > 0; offset /= 2)
        largest = fmax(largest, __shfl_xor_sync(0xffffffffu, largest, offset));
    if (lane == 0)
        s_wmax[warp] = largest;
    __syncthreads();
    largest = 0.0;
#pragma unroll
    for (uint32_t w = 0; w < (uint32_t)WARPS; ++w)
        largest = fmax(largest, s_wmax[w]);
    const double threshold = largest * R * DBL_EPSILON * TH_SOLVE_BREAKDOWN_FACTOR;

    for (uint32_t j = 0; j < R; ++j) {
        double *buf = s_prow + (j & 1u) * (R + 1);
        /* Column j is lane jl's slot jc (uniform). */
        const uint32_t jl = j % 32u, jc = j / 32u;
        if (warp == j / RPW) {
            const uint32_t tj = j % RPW;
            double row[CPL];
#pragma unroll
            for (int c = 0; c < CPL; ++c) {
                row[c] = v[0][c];
#pragma unroll
                for (int t = 1; t < RPW; ++t)
                    row[c] = (uint32_t)t == tj ? v[t][c] : row[c];
            }
            double mine = row[0];
#pragma unroll
            for (int c = 1; c < CPL; ++c)
                mine = (uint32_t)c == jc ? row[c] : mine;
            const double p = __shfl_sync(0xffffffffu, mine, jl);
            const double inv = 1.0 / p;
#pragma unroll
            for (int c = 0; c < CPL; ++c) {
                const uint32_t k = lane + 32u * (uint32_t)c;
                if (k < R)
                    buf[k] = k == j ? inv : row[c] * inv;
            }
            if (lane == 0)
                buf[R] = p > threshold ? 0.0 : 1.0; /* also a NaN pivot breaks down */
        }
        /* One barrier a step: the buffers alternate, and a buffer's readers
         * of two steps back have all passed the previous barrier. */
        __syncthreads();
        if (buf[R] != 0.0)
            return false; /* the same in every thread */
        double prow[CPL], keep[CPL];
#pragma unroll
        for (int c = 0; c < CPL; ++c) {
            const uint32_t k = lane + 32u * (uint32_t)c;
            prow[c] = k < R ? buf[k] : 0.0;
            keep[c] = k == j ? 0.0 : 1.0;
        }
#pragma unroll
        for (int t = 0; t < RPW; ++t) {
            double mine = v[t][0];
#pragma unroll
            for (int c = 1; c < CPL; ++c)
                mine = (uint32_t)c == jc ? v[t][c] : mine;
            const double ci = __shfl_sync(0xffffffffu, mine, jl); /* V(i, j) */
            const bool pivot = warp * RPW + (uint32_t)t == j;
#pragma unroll
            for (int c = 0; c < CPL; ++c) {
                const double updated = fma(-ci, prow[c], v[t][c] * keep[c]);
                v[t][c] = pivot ? prow[c] : updated;
            }
        }
    }
#pragma unroll
    for (int t = 0; t < RPW; ++t) {
        const uint32_t i = warp * RPW + (uint32_t)t;
#pragma unroll
        for (int c = 0; c < CPL; ++c) {
            const uint32_t k = lane + 32u * (uint32_t)c;
            if (i < R && k < R)
                W[i * R + k] = (float)v[t][c];
        }
    }
    return true;
}

/* Ranks up to 128: V in registers (register_solve), the layout chosen by
 * the rank (launch_register_solve). */
template <class L>
__global__ void __launch_bounds__(L::kWarps * 32)
    solve_regs_kernel(const double *grams, uint32_t nmodes, uint32_t mode, uint32_t R,
                      double ridge, int use_max_norm, thg_sweep_flags flags, float *W)
{
    __shared__ double s[L::kSharedDoubles];
    if (*flags.failed) /* uniform */
        return;
    const uint32_t RR = R * R;
    auto v_of = [&](uint32_t i, uint32_t k) {
        return system_entry(grams, nmodes, mode, R, i, k, ridge);
    };
    if (!register_solve<L>(R, v_of, s, W)) {
        if (threadIdx.x == 0)
            report_breakdown(flags, mode);
        return;
    }
    if (threadIdx.x == 0)
        *(int *)(W + RR) = use_max_norm;
}

template <class L>
void launch_register_solve(const thg_context *ctx, uint32_t mode, int use_max_norm, double ridge,
                           cudaStream_t stream)
{
    solve_regs_kernel<L><<<1, L::kWarps * 32, 0, stream>>>(
        ctx->sweep.grams_dev, ctx->nmodes, mode, ctx->rank, ridge, use_max_norm,
        ctx->sweep.flags, ctx->als_w);
}

size_t block_smem_bytes(uint32_t R) { return sizeof(double) * ((size_t)R * R + 2u * R); }

} // namespace

thg_status thg_solve_prepare(uint32_t rank, char *err, size_t errlen)
{
    THG_CUDA(cudaFuncSetAttribute(solve_block_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)block_smem_bytes(rank)));
    return THG_OK;
}

thg_status thg_launch_solve(const thg_context *ctx, uint32_t mode, int use_max_norm,
                            double ridge, cudaStream_t stream, char *err, size_t errlen)
{
    const uint32_t R = ctx->rank;
    if (R <= kRegisterSolveMaxRank) {
        if (R <= layout32::kMaxRank)
            launch_register_solve<layout32>(ctx, mode, use_max_norm, ridge, stream);
        else if (R <= layout64::kMaxRank)
            launch_register_solve<layout64>(ctx, mode, use_max_norm, ridge, stream);
        else if (R <= layout96::kMaxRank)
            launch_register_solve<layout96>(ctx, mode, use_max_norm, ridge, stream);
        else
            launch_register_solve<layout128>(ctx, mode, use_max_norm, ridge, stream);
        THG_LAUNCHED();
        return THG_OK;
    }
    const uint32_t rows = kBlockThreads / R < R ? kBlockThreads / R : R;
    solve_block_kernel<<<1, dim3(R, rows), block_smem_bytes(R), stream>>>(
        ctx->sweep.grams_dev, ctx->nmodes, mode, R, ridge, use_max_norm, ctx->sweep.flags,
        ctx->als_w);
    THG_LAUNCHED();
    return THG_OK;
}
