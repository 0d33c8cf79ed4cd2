/* The MTTKRP kernels: one thread block per partition, P groups of RL rank
 * lanes; each group walks a contiguous stretch of the partition's nonzeros
 * (output-index order), so consecutive nonzeros of one output row merge in
 * registers and each run is written once.
 *
 * A run strictly inside a group's stretch is a whole output row (rows are
 * contiguous in the copy), so it is stored directly. The first and last run
 * of a stretch may continue in a neighbouring stretch:
 * so the boundary partials go to shared memory and one pass per block merges
 * equal rows:
 *   - scheme 1 (OWNED): the block owns all of each of its rows, so every
 *     merged row is written once; no global atomics;
 *   - scheme 2: a block's chunk is a contiguous stretch of the sorted
 *     nonzeros, so only its first and last rows can continue in another
 *     block; those two are added with global atomics, the rows between are
 *     stored. Merging first keeps the atomics per row to about one per
 *     block: a mode of one row gets kappa of them, not kappa x groups
 *     (whose arbitrary order made the fp32 sum drift past 1e-5).
 */
#include <string.h>

#include "mttkrp_impl.cuh"

using namespace thg_mttkrp_kernels;

namespace thg_mttkrp_kernels {
/* Compiled in mttkrp_vec_*.cu, one module a group of ranks, and in
 * mttkrp_generic.cu. */
THG_VEC_ALL(extern)
THG_GENERIC(extern)
} // namespace thg_mttkrp_kernels

namespace {

/* The configurations vec_config_for gives elements of E: float4 rows take
 * up to 4 a lane (3 at R = 68-96), the narrower 1, 2, 4 or 8. */
template <class E, class Fn>
cudaError_t launch_vec_config(const vec_launch &L, const vec_args<E> &a, const vec_config vc,
                              const Fn &fn)
{
    static_assert(kWidth<E> == 4 || !Fn::kModel, "the model's rows are float4 (use_vec_kernel)");
    if constexpr (kWidth<E> == 4) {
        if (vc.lanes == 2)
            return launch_vec<E, 2, 1>(L, a, fn);
    }
    if (vc.lanes == 4)
        return launch_vec<E, 4, 1>(L, a, fn);
    if (vc.rpt == 1)
        return launch_vec<E, 8, 1>(L, a, fn);
    if (vc.rpt == 2)
        return launch_vec<E, 8, 2>(L, a, fn);
    if constexpr (kWidth<E> == 4)
        return vc.rpt == 3 ? launch_vec<E, 8, 3>(L, a, fn) : launch_vec<E, 8, 4>(L, a, fn);
    else
        return vc.rpt == 4 ? launch_vec<E, 8, 4>(L, a, fn) : launch_vec<E, 8, 8>(L, a, fn);
}

template <class E, class Fn>
cudaError_t launch_vec_any(const thg_context *ctx, uint32_t mode, const thg_result_target &to,
                           bool owned, uint32_t groups, unsigned long long *stamp,
                           const vec_config vc, const Fn &fn)
{
    const thg_mode_copy &copy = ctx->copies[mode];
    vec_args<E> a;
    memset(&a, 0, sizeof(a));
    uint32_t q = 0;
    uint64_t factor_bytes = 0;
    for (uint32_t m = 0; m < ctx->nmodes; ++m) {
        if (m == mode)
            continue;
        a.in_idx[q] = copy.idx[m];
        a.in_factor[q] = (const E *)ctx->factors[m];
        factor_bytes += sizeof(float) * (uint64_t)ctx->dims[m] * ctx->rank;
        ++q;
    }
    a.nin = q;
    a.out_idx = copy.idx[mode];
    a.out_factor = (const E *)ctx->factors[mode];
    a.vals = copy.vals;
    a.offsets = copy.offsets;
    a.out = (E *)to.rows;
    a.cols = ctx->rank / (uint32_t)kWidth<E>;
    a.stamp = stamp;
    a.col_scale = ctx->col_scale;
    a.result_scale = to.scale;
    a.out_mode = mode;
    vec_launch L;
    L.owned = owned;
    L.blocks = ctx->kappa;
    L.groups = groups;
    L.stream = ctx->stream;
    L.rank = ctx->rank;
    L.factors_fit_l2 = factor_bytes <= ctx->l2_bytes;
    L.device = ctx->device;
    L.one_block_smem_bytes =
        ctx->kappa <= (uint32_t)ctx->sm_count ? ctx->one_block_smem_bytes : 0u;
    return launch_vec_config(L, a, vc, fn);
}

/* The plain (model = false) or generalized MTTKRP's lanes and groups a
 * block for a rank. */
thg_shape launch_shape(uint32_t rank, uint32_t P, bool model)
{
    uint32_t lanes, max_threads;
    if (use_vec_kernel(rank, model)) {
        const vec_config vc = vec_config_for(rank);
        lanes = (uint32_t)vc.lanes;
        max_threads = vec_max_threads(vec_rpt4(vc.rpt, vc.width));
    } else {
        lanes = generic_lanes(rank);
        max_threads = 1024;
    }
    /* Whole warps: every lane of a warp takes part in the shuffles. */
    const uint32_t per_warp = 32 / lanes;
    uint32_t max_groups = max_threads / lanes;
    while (max_groups > per_warp && block_smem_bytes(max_groups, rank) > kSmemLimit)
        max_groups -= per_warp;
    uint32_t groups = P == 0 ? max_groups : P;
    groups = (groups + per_warp - 1) / per_warp * per_warp;
    if (groups > max_groups)
        groups = max_groups;
    return {lanes, groups};
}

/* Every MTTKRP kernel of one mode: the plain one (plain_value) and the
 * generalized ones (gen_value) take the same partitions, lanes and scheme. */
template <class Fn>
cudaError_t launch_any(const thg_context *ctx, uint32_t mode, const thg_result_target &to,
                       unsigned long long *stamp, const Fn &fn)
{
    const thg_mode_copy &copy = ctx->copies[mode];
    const bool owned = copy.scheme == 1;
    const uint32_t R = ctx->rank;
    const uint32_t groups = launch_shape(R, ctx->P, Fn::kModel).groups;
    if (use_vec_kernel(R, Fn::kModel)) {
        const vec_config vc = vec_config_for(R);
        if (vc.width == 4)
            return launch_vec_any<float4>(ctx, mode, to, owned, groups, stamp, vc, fn);
        /* (The generalized MTTKRP's rows are float4 only: use_vec_kernel.) */
        if constexpr (!Fn::kModel) {
            if (vc.width == 2)
                return launch_vec_any<float2>(ctx, mode, to, owned, groups, stamp, vc, fn);
            return launch_vec_any<float>(ctx, mode, to, owned, groups, stamp, vc, fn);
        }
    }

    thg_mttkrp_args a;
    memset(&a, 0, sizeof(a));
    for (uint32_t m = 0; m < ctx->nmodes; ++m) {
        a.idx[m] = copy.idx[m];
        a.factor[m] = ctx->factors[m];
    }
    a.vals = copy.vals;
    a.offsets = copy.offsets;
    a.out = to.rows;
    a.nmodes = ctx->nmodes;
    a.out_mode = mode;
    a.rank = R;
    a.stamp = stamp;
    a.col_scale = ctx->col_scale;
    a.result_scale = to.scale;
    const uint32_t kappa = ctx->kappa;
    cudaStream_t st = ctx->stream;
    if (R <= 8)
        return launch<8, 1>(owned, kappa, groups, st, a, fn);
    if (R <= 16)
        return launch<16, 1>(owned, kappa, groups, st, a, fn);
    if (R <= 32)
        return launch<32, 1>(owned, kappa, groups, st, a, fn);
    if (R <= 64)
        return launch<32, 2>(owned, kappa, groups, st, a, fn);
    return launch<32, 4>(owned, kappa, groups, st, a, fn);
}

/* Scheme 2: the first and last output row of every chunk <- 0 (what its
 * atomics add to). */
__global__ void zero_chunk_ends_kernel(const uint32_t *out_idx, const uint32_t *offsets,
                                       uint32_t kappa, uint32_t rank, float *out)
{
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= 2u * kappa * rank)
        return;
    const uint32_t chunk = t / (2u * rank), end = (t / rank) % 2u, r = t % rank;
    const uint32_t begin = offsets[chunk], stop = offsets[chunk + 1];
    if (begin == stop)
        return;
    const uint32_t row = out_idx[end == 0 ? begin : stop - 1];
    out[(size_t)row * rank + r] = 0.0f;
}

} // namespace

thg_shape thg_launch_shape(uint32_t rank, uint32_t P) { return launch_shape(rank, P, false); }

thg_result_target thg_result_of(const thg_context *ctx, uint32_t mode)
{
    return {ctx->results[mode], ctx->result_blocks[mode],
            ctx->result_scale + (size_t)mode * ctx->rank};
}

thg_status thg_zero_mttkrp_result(const thg_context *ctx, uint32_t mode, cudaStream_t stream,
                                  char *err, size_t errlen)
{
    return thg_zero_mttkrp_result_of(ctx, mode, thg_result_of(ctx, mode), stream, err, errlen);
}

thg_status thg_zero_mttkrp_result_of(const thg_context *ctx, uint32_t mode,
                                     const thg_result_target &to, cudaStream_t stream, char *err,
                                     size_t errlen)
{
    const thg_mode_copy &copy = ctx->copies[mode];
    const bool owned = copy.scheme == 1;
    const uint32_t R = ctx->rank;
    /* Only rows with nonzeros are written (readers take the others as
     * zero: row_present); scheme 2 adds its chunks' end rows with atomics,
     * so those start from zero: zeroed alone on large results (a memset of
     * Nell-1's 3.3 GB mode cost ~0.8 ms), all of it on small ones (a memset
     * node is a microsecond cheaper than a kernel's, which small tensors'
     * MTTKRPs of 10-20 us notice). A rank of a multi-device run holds only
     * the rows its share touches. */
    const size_t held_rows = ctx->result_end[mode] - ctx->result_begin[mode];
    const size_t out_bytes = sizeof(float) * held_rows * R;
    if (held_rows == 0) {
        /* A rank whose share has no row of this mode: nothing to zero (and
         * a captured graph takes no memset of zero bytes). */
    } else if (!owned && out_bytes <= kMemsetResultBytes) {
        THG_CUDA(cudaMemsetAsync(to.block, 0, out_bytes, stream));
    } else if (!owned) {
        const uint32_t items = 2u * ctx->kappa * R;
        zero_chunk_ends_kernel<<<(items + 255u) / 256u, 256u, 0, stream>>>(
            copy.idx[mode], copy.offsets, ctx->kappa, R, to.rows);
        THG_LAUNCHED();
    }
    return THG_OK;
}

thg_status thg_launch_mttkrp(const thg_context *ctx, uint32_t mode, unsigned long long *stamp,
                             int zero_result, char *err, size_t errlen)
{
    const thg_result_target to = thg_result_of(ctx, mode);
    if (ctx->processes == nullptr)
        return thg_launch_mttkrp_into(ctx, mode, to, stamp, zero_result, err, errlen);
    /* A run of several processes: the share's rows are not the tensor's,
     * so every row starts from zero (none is read as absent) before the
     * sum over the processes. */
    const size_t values = (size_t)ctx->dims[mode] * ctx->rank;
    THG_CUDA(cudaMemsetAsync(to.block, 0, sizeof(float) * values, ctx->stream));
    const thg_status st = thg_launch_mttkrp_into(ctx, mode, to, stamp, 0, err, errlen);
    return st != THG_OK ? st
                        : thg_processes_sum(ctx->processes, to.block, values, ctx->stream, err,
                                            errlen);
}

thg_status thg_launch_mttkrp_into(const thg_context *ctx, uint32_t mode,
                                  const thg_result_target &to, unsigned long long *stamp,
                                  int zero_result, char *err, size_t errlen)
{
    if (zero_result) {
        const thg_status st = thg_zero_mttkrp_result_of(ctx, mode, to, ctx->stream, err, errlen);
        if (st != THG_OK)
            return st;
    }
    THG_CUDA(launch_any(ctx, mode, to, stamp, plain_value()));
    return THG_OK;
}

thg_status thg_launch_generalized(const thg_context *ctx, uint32_t mode,
                                  const thg_gen_params &params, int write_result, char *err,
                                  size_t errlen)
{
    const thg_result_target to = thg_result_of(ctx, mode);
    if (write_result) {
        const thg_status st = thg_zero_mttkrp_result_of(ctx, mode, to, ctx->stream, err, errlen);
        if (st != THG_OK)
            return st;
        THG_CUDA(launch_any(ctx, mode, to, nullptr, gen_value<true>{params}));
    } else {
        THG_CUDA(launch_any(ctx, mode, to, nullptr, gen_value<false>{params}));
    }
    return THG_OK;
}
