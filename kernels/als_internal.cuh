/* Shared by the two files of the on-device CP-ALS factor update: als.cu
 * (the update, its SIMT kernel, the scale, fold and finish kernels, the
 * launches) and als_tensor_core.cu (the tensor-core update of ranks 16,
 * 32 and 64 on tall factors). th_kernels builds without relocatable device code,
 * so what both update kernels call on the device is defined here, in an
 * anonymous namespace: each file compiles its own copy. Between the files
 * only host functions cross (the end of this header). */
#ifndef THG_ALS_INTERNAL_CUH
#define THG_ALS_INTERNAL_CUH

#include <cuda_pipeline.h>

#include "thg_internal.cuh"

/* What the update of one mode reads and writes besides M, W and A. */
struct update_io {
    const uint32_t *row_present; /* M's rows with nonzeros (the others are zero) */
    uint64_t row_base;           /* M's and A's first row: row_present's index of row 0 */
    /* A rank's part of a multi-device update: the sums stay in acc for the
     * other ranks' (fold_kernel, group_finish_kernel); nothing is finished here. */
    int partial;
    /* The split rows' partials to copy by block 0 (thg_als_part): M's
     * rows pack_rows[0], [1] (THG_NO_ROW: zeros; indices from M's row 0)
     * to pack_slot, nullptr for none. */
    float *pack_slot;
    uint32_t pack_rows[2];
    const float *m_scale;        /* [R] M's true columns: M(:, r) * m_scale[r] */
    float *col_scale;            /* [R] out: the stored A's column scale */
    float rescale_bound;         /* lambdas within [1/bound, bound] stay unapplied */
    /* The epilogue form only: inner and max are in acc already (nonneg.cu's
     * one pass added them), so M is not read. */
    int inner_made;
};

namespace {

constexpr uint32_t kThreads = 256;
constexpr uint32_t kMaxTileRows = 128;

/* How a rank is laid out in shared memory and over the threads. Columns
 * are padded to RP (a multiple of 4) for 128-bit loads; a row of a tile
 * takes RS = RP + 4 floats, so the 4 rows of a micro-tile fall in different
 * banks. */
struct tile_shape {
    uint32_t R, RP, RS;
    uint32_t CQ;   /* column quads: RP / 4 */
    uint32_t NG;   /* Gram micro-tiles of the upper half: CQ (CQ + 1) / 2 */
    uint32_t T;    /* rows per tile (the shared memory's size), a multiple of 4 */
};

__host__ __device__ inline uint32_t padded_rank(uint32_t R) { return (R + 3u) & ~3u; }

tile_shape shape_for(uint32_t R)
{
    tile_shape s;
    s.R = R;
    s.RP = padded_rank(R);
    s.RS = s.RP + 4u;
    s.CQ = s.RP / 4u;
    s.NG = s.CQ * (s.CQ + 1u) / 2u;
    /* About 16 KB of M per tile: enough rows to amortise each tile's
     * barriers, little enough for two blocks per SM at R = 128. */
    uint32_t rows = 4096u / s.RP;
    rows = rows > kMaxTileRows ? kMaxTileRows : rows < 16u ? 16u : rows;
    s.T = rows & ~3u;
    return s;
}

/* Entry (r1, r2) of a Gram that gram_block_flush filled. */
__device__ __host__ inline size_t gram_entry(uint32_t r1, uint32_t r2, uint32_t R)
{
    return r1 / 4u <= r2 / 4u ? (size_t)r1 * R + r2 : (size_t)r2 * R + r1;
}

/* Starts the copy of tile `tile` (rows [tile T, tile T + T) of the I)
 * of M, or of A, into `dst` at a row stride of `stride` floats; the caller
 * commits the batch. 16-byte copies when rows are whole quads. Rows
 * absent from row_present (never written by the MTTKRP) arrive as zeros
 * without being read. (The tensor-core kernel's tiles have their own
 * loader with every count a constant, tc_load_tile.) */
__device__ __forceinline__ void load_tile_async(const float *src, const uint32_t *row_present,
                                                uint64_t row_base, uint32_t tile, uint32_t I,
                                                uint32_t R, uint32_t T, uint32_t stride,
                                                float *dst, uint32_t tid)
{
    const uint64_t base = (uint64_t)tile * T;
    const uint32_t rows = (uint32_t)(I - base < T ? I - base : T);
    if (R % 4u == 0)
        thg_rows_to_shared_async<4>(src, base, rows, R, dst, stride, row_present, row_base, tid,
                                    kThreads);
    else
        thg_rows_to_shared_async<1>(src, base, rows, R, dst, stride, row_present, row_base, tid,
                                    kThreads);
}

/* Block 0's copy of the split rows' partials (update_io::pack_slot), from
 * the MTTKRP result `results` (row 0 of the mode at results). */
__device__ __forceinline__ void pack_split_rows(const update_io &io, const float *results,
                                                uint32_t R)
{
    if (io.pack_slot && blockIdx.x == 0 && blockIdx.y == 0)
        thg_copy_split_rows(results, R, io.pack_rows, io.pack_slot, threadIdx.x, blockDim.x);
}

/* A column's lambda from its sum of squares and its largest magnitude
 * (the max-norm floored at 1), its column scale 1 / lambda, and whether
 * lambda is so far from 1 (outside [1/bound, bound]) that the factor must
 * be normalised now, lest the unnormalised factors' products leave fp32's
 * range. As the host's th_dense_normalize_columns, a zero column stays
 * (scale 1). The one rule of one device's update and several's fold. */
struct column_norm {
    double lambda;
    float scale;
    bool out_of_bounds;
};

/* What a column is divided by to normalise it: its lambda, or 1 for a zero
 * column, which stays as it is. */
__device__ __forceinline__ double column_divisor(double lambda)
{
    return lambda > 0.0 ? lambda : 1.0;
}

__device__ __forceinline__ column_norm norm_of_column(double sumsq, double maxabs,
                                                      int use_max_norm, float bound)
{
    column_norm c;
    c.lambda = use_max_norm ? fmax(maxabs, 1.0) : sqrt(sumsq);
    c.scale = (float)(1.0 / column_divisor(c.lambda));
    c.out_of_bounds = c.lambda > 0.0 && (c.lambda > bound || c.lambda * bound < 1.0);
    return c;
}

/* One block, with the update's totals in acc: lambda, the normalised
 * Gram and inner and the column scale, [lambda | gram | inner] written to
 * `out`, acc re-zeroed. s_div: R shared doubles the block no longer uses. */
__device__ void finish_totals(const float *W, uint32_t R, const update_io &io,
                              const thg_als_acc &acc, double *out, int out_mapped,
                              double *gram_store, double *s_div)
{
    const uint32_t tid = threadIdx.x;
    double *lambda = out, *gram = out + R, *inner = out + R + (size_t)R * R;
    /* The norm travels with W (after its R*R floats), so a captured graph
     * of the update serves both norms. */
    const int use_max_norm = *(const int *)(W + (size_t)R * R);
    __shared__ uint32_t s_rescale;
    if (tid == 0)
        s_rescale = 0u;
    __syncthreads();
    for (uint32_t t = tid; t < R; t += blockDim.x) {
        const double sumsq = __ldcg(&acc.gram[(size_t)t * R + t]);
        const double maxabs = (double)__uint_as_float(__ldcg(&acc.maxbits[t]));
        const column_norm c = norm_of_column(sumsq, maxabs, use_max_norm, io.rescale_bound);
        s_div[t] = column_divisor(c.lambda);
        lambda[t] = c.lambda;
        acc.scale[t] = c.scale;
        if (c.out_of_bounds)
            s_rescale = 1u;
    }
    __syncthreads();
    /* The factor stays unnormalised, its 1/lambda kept as its column scale
     * (read by the next MTTKRPs and by get_factor), unless a lambda is so
     * far from 1 that the unnormalised factors' products could leave
     * fp32's range: then the scale kernel normalises it. */
    for (uint32_t t = tid; t < R; t += blockDim.x)
        io.col_scale[t] = s_rescale ? 1.0f : acc.scale[t];
    if (tid == 0)
        *acc.rescale = s_rescale;
    for (uint32_t e = tid; e < R * R; e += blockDim.x) {
        const uint32_t r1 = e / R, r2 = e % R;
        const double g_norm = __ldcg(&acc.gram[gram_entry(r1, r2, R)]) / (s_div[r1] * s_div[r2]);
        gram[e] = g_norm;
        if (gram_store)
            gram_store[e] = g_norm;
    }
    __syncthreads(); /* every read of the accumulated Gram is done */
    for (uint32_t e = tid; e < R * R; e += blockDim.x)
        acc.gram[e] = 0.0;
    for (uint32_t t = tid; t < R; t += blockDim.x) {
        inner[t] = __ldcg(&acc.inner[t]) * io.m_scale[t] / s_div[t];
        acc.inner[t] = 0.0;
        acc.maxbits[t] = 0u;
    }
    if (tid == 0)
        *acc.done = 0u;
    if (out_mapped)
        __threadfence_system(); /* the host reads `out` after the stream synchronises */
}

/* Every block of an update, after adding its share into acc: the last
 * block to arrive (threadFenceReduction) finishes (finish_totals); a
 * rank's partial update leaves its sums in acc. */
__device__ void finish_update(const float *W, uint32_t R, const update_io &io,
                              const thg_als_acc &acc, double *out, int out_mapped,
                              double *gram_store, double *s_div)
{
    if (io.partial)
        return;
    __shared__ bool s_last;
    const uint32_t tid = threadIdx.x;
    /* The last block to arrive finishes the reduction (threadFenceReduction). */
    __threadfence();
    __syncthreads();
    if (tid == 0)
        s_last = atomicAdd(acc.done, 1u) == gridDim.x * gridDim.y - 1;
    __syncthreads();
    if (!s_last)
        return;
    __threadfence();
    finish_totals(W, R, io, acc, out, out_mapped, gram_store, s_div);
}

} // namespace

/* als_tensor_core.cu */
/* Once per load (thg_als_prepare): the tensor-core kernels' attributes,
 * ctx->als_tc_resident_blocks and ctx->als_tc_stats_blocks, 0 where the
 * rank has no tensor-core update. */
thg_status thg_als_tc_prepare(thg_context *ctx, char *err, size_t errlen);
/* The update's first kernel on the tensor cores, on ctx->stream (as
 * thg_launch_als launches the SIMT one). */
thg_status thg_launch_als_tc(thg_context *ctx, const float *M, const float *W, float *A,
                             uint32_t I, const update_io &io, const thg_als_acc &acc,
                             double *out, int out_mapped, const uint32_t *failed,
                             double *gram_store, char *err, size_t errlen);
/* The epilogue's sums over an A computed elsewhere (the nonnegative
 * passes), on the tensor cores, on ctx->stream, where
 * thg_als_tc_chosen(ctx, I): as thg_launch_als_epilogue launches als.cu's
 * stats_kernel for other factors. */
thg_status thg_launch_als_tc_stats(thg_context *ctx, const float *M, const float *A, uint32_t I,
                                   const update_io &io, const thg_als_acc &acc, const float *W,
                                   double *out, int out_mapped, const uint32_t *failed,
                                   double *gram_store, char *err, size_t errlen);

#endif
