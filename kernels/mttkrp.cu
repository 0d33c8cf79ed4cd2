/* The MTTKRP kernels: one thread block per partition, P groups of RL rank
 * lanes; each group walks a contiguous stretch of the partition's nonzeros
 * (output-index order), so consecutive nonzeros of one output row merge in
 * registers and each run is written once.
 *
 * A run strictly inside a group's stretch is a whole output row (rows are
 * contiguous in the copy), so it is stored directly. The first and last run
 * of a stretch may continue in a neighbouring stretch:
 *   - scheme 1 (OWNED): the block owns all of that row, so the boundary
 *     partials go to shared memory and one pass merges equal rows and writes
 *     each row once; no global atomics;
 *   - scheme 2: a boundary row may also be touched by another block, so the
 *     partial is added with one global atomic per rank lane.
 */
#include <string.h>

#include "thg_internal.cuh"

namespace {

constexpr uint32_t kNoRow = 0xffffffffu;
constexpr int kBatch = 4;

template <int RL, int RPT, bool OWNED>
__global__ void __launch_bounds__(1024) mttkrp_kernel(const thg_mttkrp_args a)
{
    extern __shared__ float smem[];
    const uint32_t R = a.rank;
    const uint32_t lane = threadIdx.x % RL;
    const uint32_t group = threadIdx.x / RL;
    const uint32_t ngroups = blockDim.x / RL;
    const uint32_t pbegin = a.offsets[blockIdx.x];
    const uint32_t len = a.offsets[blockIdx.x + 1] - pbegin;
    const uint32_t gbegin = pbegin + (uint32_t)((uint64_t)len * group / ngroups);
    const uint32_t gend = pbegin + (uint32_t)((uint64_t)len * (group + 1) / ngroups);
    const uint32_t *out_idx = a.idx[a.out_mode];

    float *spart = smem;                                        /* [2 * ngroups][R] */
    uint32_t *srow = (uint32_t *)(smem + 2 * (size_t)ngroups * R); /* [2 * ngroups] */
    if (OWNED && lane == 0) {
        srow[2 * group] = kNoRow;
        srow[2 * group + 1] = kNoRow;
    }
    /* Lane 0's writes of srow happen before its own later writes; other
     * lanes read srow only after the barrier below. */

    float acc[RPT];
#pragma unroll
    for (int j = 0; j < RPT; ++j)
        acc[j] = 0.0f;
    uint32_t row = kNoRow;
    bool first_run = true;

    /* slot 0: first run of the stretch, 1: last run, -1: an interior run. */
    auto flush = [&](uint32_t out_row, int slot) {
#pragma unroll
        for (int j = 0; j < RPT; ++j) {
            const uint32_t r = lane + j * RL;
            if (r >= R)
                continue;
            if (slot < 0)
                a.out[(size_t)out_row * R + r] = acc[j];
            else if (OWNED)
                spart[(2 * group + slot) * R + r] = acc[j];
            else
                atomicAdd(&a.out[(size_t)out_row * R + r], acc[j]);
        }
        if (OWNED && slot >= 0 && lane == 0)
            srow[2 * group + slot] = out_row;
    };

    /* kBatch nonzeros at a time: their index, value and factor-row loads
     * are independent, so they are in flight together; the run logic then
     * consumes them in order. */
    for (uint32_t k0 = gbegin; k0 < gend; k0 += kBatch) {
        uint32_t krow[kBatch];
        float prod[kBatch][RPT];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const bool valid = k0 + b < gend;
            krow[b] = valid ? out_idx[k0 + b] : kNoRow;
            const float v = valid ? a.vals[k0 + b] : 0.0f;
#pragma unroll
            for (int j = 0; j < RPT; ++j)
                prod[b][j] = v;
        }
        /* Unrolled so the argument block is indexed by constants only. */
#pragma unroll
        for (uint32_t m = 0; m < THG_MAX_MODES; ++m) {
            if (m >= a.nmodes)
                break;
            if (m == a.out_mode)
                continue;
            uint32_t fi[kBatch];
#pragma unroll
            for (int b = 0; b < kBatch; ++b)
                fi[b] = k0 + b < gend ? a.idx[m][k0 + b] : 0u; /* row 0 exists: harmless */
#pragma unroll
            for (int b = 0; b < kBatch; ++b) {
                const float *f = a.factor[m] + (size_t)fi[b] * R;
#pragma unroll
                for (int j = 0; j < RPT; ++j) {
                    const uint32_t r = lane + j * RL;
                    if (r < R)
                        prod[b][j] *= f[r];
                }
            }
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            if (krow[b] == kNoRow)
                break; /* past the end of the stretch */
            if (krow[b] != row) {
                if (row != kNoRow) {
                    flush(row, first_run ? 0 : -1);
                    first_run = false;
                }
                row = krow[b];
#pragma unroll
                for (int j = 0; j < RPT; ++j)
                    acc[j] = 0.0f;
            }
#pragma unroll
            for (int j = 0; j < RPT; ++j)
                acc[j] += prod[b][j];
        }
    }
    if (row != kNoRow)
        flush(row, first_run ? 0 : 1);

    if (!OWNED)
        return;
    __syncthreads();
    /* Slots are in nonzero order, so the pieces of one row are adjacent. */
    for (uint32_t r = threadIdx.x; r < R; r += blockDim.x) {
        uint32_t cur = kNoRow;
        float sum = 0.0f;
        for (uint32_t s = 0; s < 2 * ngroups; ++s) {
            const uint32_t s_row = srow[s];
            if (s_row == kNoRow)
                continue;
            if (s_row != cur) {
                if (cur != kNoRow)
                    a.out[(size_t)cur * R + r] = sum;
                cur = s_row;
                sum = 0.0f;
            }
            sum += spart[s * R + r];
        }
        if (cur != kNoRow)
            a.out[(size_t)cur * R + r] = sum;
    }
}

template <int RL, int RPT>
cudaError_t launch(bool owned, uint32_t blocks, uint32_t P, cudaStream_t stream,
                   const thg_mttkrp_args &a)
{
    const uint32_t threads = RL * P;
    if (owned) {
        const size_t smem = sizeof(float) * 2 * P * a.rank + sizeof(uint32_t) * 2 * P;
        mttkrp_kernel<RL, RPT, true><<<blocks, threads, smem, stream>>>(a);
    } else {
        mttkrp_kernel<RL, RPT, false><<<blocks, threads, 0, stream>>>(a);
    }
    return cudaGetLastError();
}

} // namespace

thg_status thg_launch_mttkrp(const thg_context *ctx, uint32_t mode, char *err, size_t errlen)
{
    const thg_mode_copy &copy = ctx->copies[mode];
    thg_mttkrp_args a;
    memset(&a, 0, sizeof(a));
    for (uint32_t m = 0; m < ctx->nmodes; ++m) {
        a.idx[m] = copy.idx[m];
        a.factor[m] = ctx->factors[m];
    }
    a.vals = copy.vals;
    a.offsets = copy.offsets;
    a.out = ctx->results[mode];
    a.nmodes = ctx->nmodes;
    a.out_mode = mode;
    a.rank = ctx->rank;

    const bool owned = copy.scheme == 1;
    if (copy.has_empty_rows)
        THG_CUDA(cudaMemsetAsync(a.out, 0, sizeof(float) * ctx->dims[mode] * ctx->rank,
                                 ctx->stream));
    const uint32_t R = ctx->rank;
    cudaError_t e;
    if (R <= 8)
        e = launch<8, 1>(owned, ctx->kappa, ctx->P, ctx->stream, a);
    else if (R <= 16)
        e = launch<16, 1>(owned, ctx->kappa, ctx->P, ctx->stream, a);
    else if (R <= 32)
        e = launch<32, 1>(owned, ctx->kappa, ctx->P, ctx->stream, a);
    else if (R <= 64)
        e = launch<32, 2>(owned, ctx->kappa, ctx->P, ctx->stream, a);
    else
        e = launch<32, 4>(owned, ctx->kappa, ctx->P, ctx->stream, a);
    THG_CUDA(e);
    return THG_OK;
}
