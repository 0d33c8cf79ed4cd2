/* The on-device CP-ALS factor update: A <- M W, column norms, lambda, Gram
 * A^T A and inner[r] = sum_i M(i,r) A(i,r), in one pass over M.
 *
 * On the small shapes an update costs its latency, not its arithmetic, and
 * that latency is longer than the mode's whole MTTKRP; every host round
 * trip, pageable copy and extra launch adds to it (kernels/DESIGN.md). So
 * W comes from pinned staging, there is one stream synchronisation, and:
 *   1. update_kernel: each block takes tiles of rows, computes the
 *      unnormalised rows Ahat = M W (written to the factor and to shared
 *      memory) and accumulates Ahat^T Ahat, sum_i M(i,r) Ahat(i,r) and
 *      max |Ahat(:,r)| in registers; one set of double atomics per block.
 *      The last block to finish (a counter) turns them into lambda, the
 *      Gram and inner of the normalised A, using
 *        A = Ahat D^-1 -> A^T A = D^-1 (Ahat^T Ahat) D^-1, inner = inner_hat / d
 *      (the column sums of squares are the Gram's diagonal), writes
 *      [lambda | gram | inner] and re-zeroes the accumulators;
 *   2. scale_kernel: A(:,r) *= 1/lambda_r, only when a lambda is far
 *      from 1 (rescale_bound); otherwise it returns at once.
 * Normalising is otherwise deferred: the factor stays Ahat and 1/lambda
 * becomes its column scale (thg_context::col_scale). An MTTKRP of
 * unnormalised factors is the normalised one divided, column by column, by
 * the product of the other modes' scales, which it records
 * (result_scale); the next update folds that into W's rows, (M D) W =
 * M (D W), and get_factor applies the column scale on its way out. On a
 * 25.5M-row factor the separate normalising pass read and wrote 6.5 GB per
 * update.
 * Rows of M that no nonzero touches are not written by the MTTKRP (no
 * zeroing pass either): their tile loads are zero-fills (row_present).
 * On tall factors (tens of millions of rows) the update is bound by the
 * shared-memory instructions of the two small products, not by memory: with
 * one scalar shared load per multiply-add, a 25.5M x 32 update took ~12 ms
 * where its 13 GB of traffic need ~3. So both products are register-tiled:
 * a thread computes 4 rows x 4 columns of A = M W, and 4 x 4 entries of the
 * (symmetric, upper half only) Gram, with 128-bit shared loads: 2 loads per
 * 16 multiply-adds instead of 32. At ranks 16, 32 and 64 a tall factor's
 * update runs on the tensor cores instead (als_tensor_core.cu); what the
 * two update kernels share is in als_internal.cuh.
 * The whole-iteration sweep (sweep.cu) runs the same two kernels with
 * their results in device memory, the normalised Gram also kept for the
 * next mode's solve (solve.cu), and an early return once a solve of the
 * sweep broke down.
 * Own kernels rather than cuBLAS: R <= 128 keeps W in shared memory, the
 * Gram, norms and inner products come from the same pass over M, and a
 * static cuBLAS would add ~100 MB to every plugin. Gram entries accumulate
 * in fp32 over one tile of rows, then in double. */
#include <string.h>

#include <cuda_pipeline.h>
#include <tensorhost/plugin_sdk.h>

#include "als_internal.cuh"

namespace {

constexpr uint32_t kScaleThreads = 256;

/* Gram micro-tiles one block owns: all of them, or kThreads per y-block. */
__host__ __device__ inline uint32_t block_gram_tiles(uint32_t NG)
{
    return NG < kThreads ? NG : kThreads;
}

/* The two buffers of M's tiles (the next tile is copied in while the
 * current one is computed on), whose space the block's Gram reduction
 * reuses at the end. */
__host__ __device__ size_t tile_region_bytes(const tile_shape &s)
{
    const size_t tiles = sizeof(float) * 2u * (size_t)s.T * s.RS;
    const size_t reduce = sizeof(double) * 16u * block_gram_tiles(s.NG);
    return tiles > reduce ? tiles : reduce;
}

/* Dynamic shared memory: W [RP*RP] and the tile of A [T*RS] (floats),
 * the region of M's tiles, s_inner [R] doubles, s_max [R]; every part
 * 16-byte aligned. */
size_t update_smem_bytes(const tile_shape &s)
{
    return sizeof(float) * ((size_t)s.RP * s.RP + (size_t)s.T * s.RS) +
           tile_region_bytes(s) + sizeof(double) * s.R + sizeof(uint32_t) * s.R;
}

/* Blocks along y, each owning up to kThreads of the Gram's micro-tiles
 * (only large ranks need more than one; blocks with y > 0 recompute the
 * tiles of A for their Gram entries only). */
uint32_t gram_splits(const tile_shape &s) { return (s.NG + kThreads - 1u) / kThreads; }

/* One thread's share of the Gram: micro-tile (c1, c2), c1 <= c2 column
 * quads, over the rows split, split + splits, ... of every tile. */
struct gram_lane {
    uint32_t c1, c2;  /* column quads, c1 <= c2 */
    uint32_t local;   /* the micro-tile's index within the block's share */
    uint32_t split, splits;
    bool active;
};

/* Micro-tile g of the upper half, in row-major order of (c1, c2). */
__device__ inline void gram_tile_quads(uint32_t g, uint32_t CQ, uint32_t *c1, uint32_t *c2)
{
    uint32_t q = 0;
    while (g >= CQ - q) {
        g -= CQ - q;
        ++q;
    }
    *c1 = q;
    *c2 = q + g;
}

__device__ gram_lane gram_lane_for(const tile_shape &s, uint32_t tid, uint32_t y)
{
    gram_lane lane = {0u, 0u, 0u, 0u, 1u, false};
    const uint32_t first = y * kThreads;
    if (first >= s.NG)
        return lane;
    const uint32_t here = s.NG - first < kThreads ? s.NG - first : kThreads;
    lane.splits = kThreads / here;
    lane.split = tid / here;
    lane.local = tid % here;
    lane.active = lane.split < lane.splits;
    gram_tile_quads(first + lane.local, s.CQ, &lane.c1, &lane.c2);
    return lane;
}

/* Adds the tile's rows [0, rows) of s_a (row stride RS) to the lane's
 * 4 x 4 Gram entries: fp32 within the tile, double across tiles. */
__device__ __forceinline__ void gram_accumulate(const float *s_a, const tile_shape &s,
                                                uint32_t rows, const gram_lane &lane,
                                                double gacc[16])
{
    if (!lane.active)
        return;
    float p[16];
#pragma unroll
    for (int e = 0; e < 16; ++e)
        p[e] = 0.0f;
    for (uint32_t row = lane.split; row < rows; row += lane.splits) {
        const float4 a = *reinterpret_cast<const float4 *>(s_a + row * s.RS + lane.c1 * 4u);
        const float4 b = *reinterpret_cast<const float4 *>(s_a + row * s.RS + lane.c2 * 4u);
        const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
                p[i * 4 + j] += av[i] * bv[j];
    }
#pragma unroll
    for (int e = 0; e < 16; ++e)
        gacc[e] += (double)p[e];
}

/* The block's Gram entries into the R x R `gram`, upper micro-tiles only
 * (quad(r1) <= quad(r2); gram_entry() reads either half): the lanes of one
 * micro-tile first add up in shared memory (`s_reduce`, 16 doubles per
 * micro-tile of the block's share, entry e of micro-tile l at
 * e * here + l: a warp's lanes, consecutive micro-tiles, touch consecutive
 * doubles, where a stride of 16 doubles put all of them in one bank), so
 * each entry costs one global atomic per block. Called by every thread
 * after the tile loop's last barrier. */
__device__ void gram_block_flush(const tile_shape &s, const gram_lane &lane,
                                 const double gacc[16], double *s_reduce, double *gram)
{
    const uint32_t first = blockIdx.y * kThreads;
    const uint32_t here = first < s.NG ? block_gram_tiles(s.NG - first) : 0u;
    for (uint32_t t = threadIdx.x; t < here * 16u; t += blockDim.x)
        s_reduce[t] = 0.0;
    __syncthreads();
    if (lane.active)
#pragma unroll
        for (int e = 0; e < 16; ++e)
            atomicAdd(&s_reduce[(uint32_t)e * here + lane.local], gacc[e]);
    __syncthreads();
    for (uint32_t t = threadIdx.x; t < here * 16u; t += blockDim.x) {
        const uint32_t e = t / here;
        uint32_t c1, c2;
        gram_tile_quads(first + t % here, s.CQ, &c1, &c2);
        const uint32_t r1 = c1 * 4u + e / 4u, r2 = c2 * 4u + e % 4u;
        if (r1 < s.R && r2 < s.R)
            atomicAdd(&gram[(size_t)r1 * s.R + r2], s_reduce[t]);
    }
}

/* Zeroes the padding columns [R, RP) of every row of a tile buffer: loads
 * never write them, and a product over the padded width must read zeros
 * there (uninitialised shared memory may hold NaN patterns). */
__device__ void zero_padding(float *tile, const tile_shape &s, uint32_t tid)
{
    const uint32_t pad = s.RP - s.R;
    if (pad == 0)
        return;
    for (uint32_t t = tid; t < s.T * pad; t += blockDim.x)
        tile[(t / pad) * s.RS + s.R + t % pad] = 0.0f;
}

/* Whether row is one of the fold's rows. */
__device__ __forceinline__ bool is_folded(const thg_als_fold &fold, uint64_t row)
{
    bool folded = false;
    for (uint32_t j = 0; j < fold.nrows; ++j)
        folded = folded || fold.rows[j] == row;
    return folded;
}

/* A(:, r) *= scale[r] (16-byte aligned) for A's I rows but the fold's
 * (`skip`, nullable), by the whole grid. Each thread keeps one column quad
 * (or column) for its grid-stride loop over rows: no per-element index
 * division. Needs blockDim.x >= R. */
__device__ void scale_rows(float *A, uint32_t I, uint32_t R, const float *scale,
                           const thg_als_fold *skip)
{
    const bool vector_rows = R % 4u == 0;
    const uint32_t lanes = vector_rows ? R / 4u : R;
    const uint32_t rows_per_block = blockDim.x / lanes;
    const uint32_t lane = threadIdx.x % lanes, sub = threadIdx.x / lanes;
    if (sub >= rows_per_block)
        return;
    const uint64_t stride = (uint64_t)gridDim.x * rows_per_block;
    const uint64_t first = (uint64_t)blockIdx.x * rows_per_block + sub;
    if (vector_rows) {
        const float4 f = *reinterpret_cast<const float4 *>(scale + lane * 4u);
        for (uint64_t row = first; row < I; row += stride) {
            if (skip && is_folded(*skip, row))
                continue;
            float4 *p = reinterpret_cast<float4 *>(A + row * R) + lane;
            float4 v = *p;
            v.x *= f.x;
            v.y *= f.y;
            v.z *= f.z;
            v.w *= f.w;
            *p = v;
        }
    } else {
        const float f = scale[lane];
        for (uint64_t row = first; row < I; row += stride)
            if (!skip || !is_folded(*skip, row))
                A[row * R + lane] *= f;
    }
}

/* The accumulators' layout in a block of thg_als_acc_bytes(R) bytes. */
__host__ __device__ inline thg_als_acc acc_at(void *block, uint32_t rank)
{
    const size_t R = rank;
    thg_als_acc acc;
    acc.gram = (double *)block;
    acc.inner = acc.gram + R * R;
    acc.maxbits = (uint32_t *)(acc.inner + R);
    acc.scale = (float *)(acc.maxbits + R);
    acc.rescale = (uint32_t *)(acc.scale + R);
    acc.done = acc.rescale + 1;
    return acc;
}

/* ---- The end of a multi-device update (kernels/group.cu), after the
 * collective that gathers every rank's sums (G blocks of
 * thg_als_acc_bytes, rank q's at parts + q * part_bytes) and the split
 * rows' partials. Two kernels, so that only the first stands between the
 * collective and the next mode's MTTKRP:
 *   fold_kernel: the factor rows the partial updates left out (the split
 *     rows, thg_als_fold), lambda and the column scale, and, when a lambda
 *     is far from 1, the factor normalised (what scale_kernel does on one
 *     device): all that the next MTTKRP reads;
 *   group_finish_kernel: the normalised Gram and inner products (the next
 *     solve's and the host's), which in a sweep run on the side stream
 *     beside the next MTTKRP.
 * The first hands the second lambda and the split rows through a scratch
 * block on the rank's device. Every rank does the same arithmetic in the
 * same order, so every rank finishes with the same bits. */

/* The scratch block: lambda [R] doubles, then the folded rows' MTTKRP
 * rows and factor rows (unnormalised), [THG_MAX_FOLD_ROWS][R] floats each. */
struct fold_scratch {
    double *lambda;
    float *m, *a;
};

__host__ __device__ inline fold_scratch scratch_at(void *block, uint32_t R)
{
    fold_scratch s;
    s.lambda = (double *)block;
    s.m = (float *)(s.lambda + R);
    s.a = s.m + (size_t)THG_MAX_FOLD_ROWS * R;
    return s;
}

/* Entry e of [gram | inner], summed over the ranks in rank order. */
__device__ __forceinline__ double summed_entry(char *parts, size_t part_bytes, uint32_t G,
                                               uint32_t R, size_t e)
{
    double sum = 0.0;
    for (uint32_t q = 0; q < G; ++q)
        sum += acc_at(parts + q * part_bytes, R).gram[e];
    return sum;
}

/* Folded rows computed per pass of fold_kernel (its shared memory). */
constexpr uint32_t kFoldPass = 8;

/* Every block computes the folded rows and lambda (a few microseconds, and
 * no grid-wide barrier); block 0 writes the rows, the column scale and the
 * scratch block; when a lambda is out of bounds (rescale_bound) every block
 * normalises its rows of A, the folded rows being block 0's. */
__global__ void __launch_bounds__(kThreads)
    fold_kernel(const float *W, uint32_t R, const float *m_scale, char *parts, size_t part_bytes,
                uint32_t G, thg_als_fold fold, float *A, uint32_t I, float *col_scale,
                float bound, void *scratch_block, const uint32_t *failed)
{
    __shared__ float s_m[kFoldPass * THG_MAX_RANK], s_a[kFoldPass * THG_MAX_RANK];
    __shared__ __align__(16) float s_scale[THG_MAX_RANK];
    __shared__ uint32_t s_rescale;
    if (failed && *failed)
        return;
    const uint32_t tid = threadIdx.x;
    const bool writer = blockIdx.x == 0;
    const fold_scratch sc = scratch_at(scratch_block, R);
    if (tid == 0)
        s_rescale = 0u;
    /* Thread c < R: column c's sum of squares and maximum. */
    double sumsq = 0.0;
    uint32_t maxbits = 0u;
    if (tid < R) {
        sumsq = summed_entry(parts, part_bytes, G, R, (size_t)tid * R + tid);
        for (uint32_t q = 0; q < G; ++q)
            maxbits = max(maxbits, acc_at(parts + q * part_bytes, R).maxbits[tid]);
    }
    for (uint32_t j0 = 0; j0 < fold.nrows; j0 += kFoldPass) {
        const uint32_t n = fold.nrows - j0 < kFoldPass ? fold.nrows - j0 : kFoldPass;
        for (uint32_t t = tid; t < n * R; t += blockDim.x) {
            const uint32_t row = fold.rows[j0 + t / R], c = t % R;
            float m = 0.0f;
            for (uint32_t k = 0; k < fold.npartials; ++k)
                if (fold.partial_rows[k] == row)
                    m += thg_fold_partial(fold, k, R)[c];
            s_m[t] = m;
        }
        __syncthreads();
        for (uint32_t t = tid; t < n * R; t += blockDim.x) {
            const uint32_t j = t / R, c = t % R;
            float a = 0.0f; /* as update_kernel: M (D W) in fp32 */
            for (uint32_t k = 0; k < R; ++k)
                a += s_m[j * R + k] * (W[(size_t)k * R + c] * m_scale[k]);
            s_a[t] = a;
            if (writer) {
                sc.m[(size_t)j0 * R + t] = s_m[t];
                sc.a[(size_t)j0 * R + t] = a;
            }
        }
        __syncthreads();
        if (tid < R)
            for (uint32_t j = 0; j < n; ++j) {
                const float a = s_a[j * R + tid];
                sumsq += (double)a * a;
                maxbits = max(maxbits, __float_as_uint(fabsf(a)));
            }
        __syncthreads(); /* the next pass overwrites s_m and s_a */
    }
    /* The norm travels with W, after its R*R floats. */
    const int use_max_norm = *(const int *)(W + (size_t)R * R);
    if (tid < R) {
        const column_norm c =
            norm_of_column(sumsq, (double)__uint_as_float(maxbits), use_max_norm, bound);
        s_scale[tid] = c.scale;
        if (c.out_of_bounds)
            atomicOr(&s_rescale, 1u);
        if (writer)
            sc.lambda[tid] = c.lambda;
    }
    __syncthreads();
    const bool rescale = s_rescale != 0u;
    if (writer) {
        /* As finish_totals: 1/lambda becomes the column scale, unless the
         * factor is normalised here. */
        for (uint32_t t = tid; t < R; t += blockDim.x)
            col_scale[t] = rescale ? 1.0f : s_scale[t];
        for (uint32_t t = tid; t < fold.nrows * R; t += blockDim.x) {
            const float a = sc.a[t]; /* this block's own write, before the barrier */
            A[(size_t)fold.rows[t / R] * R + t % R] = rescale ? a * s_scale[t % R] : a;
        }
    }
    if (rescale)
        scale_rows(A, I, R, s_scale, &fold);
}

/* One block: lambda and the folded rows from fold_kernel's scratch; the
 * ranks' Gram and inner sums added in rank order, the folded rows' terms
 * after them; [lambda | gram | inner] of the normalised factor written to
 * `out` (and the Gram to gram_store), and this rank's (`self`) block of
 * sums re-zeroed for its next update. */
__global__ void __launch_bounds__(kThreads)
    group_finish_kernel(uint32_t R, const float *m_scale, char *parts, size_t part_bytes,
                        uint32_t G, uint32_t self, uint32_t nrows, void *scratch_block,
                        double *out, int out_mapped, const uint32_t *failed, double *gram_store)
{
    __shared__ double s_div[THG_MAX_RANK];
    if (failed && *failed)
        return;
    const uint32_t tid = threadIdx.x;
    const fold_scratch sc = scratch_at(scratch_block, R);
    double *lambda = out, *gram = out + R, *inner = out + R + (size_t)R * R;
    for (uint32_t t = tid; t < R; t += blockDim.x) {
        const double lam = sc.lambda[t];
        s_div[t] = column_divisor(lam);
        lambda[t] = lam;
    }
    __syncthreads();
    for (uint32_t e = tid; e < R * R; e += blockDim.x) {
        const uint32_t r1 = e / R, r2 = e % R;
        double g = summed_entry(parts, part_bytes, G, R, gram_entry(r1, r2, R));
        for (uint32_t j = 0; j < nrows; ++j)
            g += (double)sc.a[(size_t)j * R + r1] * sc.a[(size_t)j * R + r2];
        const double g_norm = g / (s_div[r1] * s_div[r2]);
        gram[e] = g_norm;
        if (gram_store)
            gram_store[e] = g_norm;
    }
    for (uint32_t t = tid; t < R; t += blockDim.x) {
        double s = summed_entry(parts, part_bytes, G, R, (size_t)R * R + t);
        for (uint32_t j = 0; j < nrows; ++j)
            s += (double)sc.m[(size_t)j * R + t] * sc.a[(size_t)j * R + t];
        inner[t] = s * m_scale[t] / s_div[t];
    }
    __syncthreads(); /* every read of this rank's block is done */
    const thg_als_acc mine = acc_at(parts + self * part_bytes, R);
    for (uint32_t e = tid; e < R * R + R; e += blockDim.x)
        mine.gram[e] = 0.0; /* gram, then inner */
    for (uint32_t t = tid; t < R; t += blockDim.x)
        mine.maxbits[t] = 0u;
    if (out_mapped)
        __threadfence_system(); /* the host reads `out` after the stream synchronises */
}

__global__ void __launch_bounds__(kThreads, 2)
    update_kernel(const float *M, const float *W, float *A, uint32_t I, tile_shape s,
                  update_io io, thg_als_acc acc, double *out, int out_mapped,
                  const uint32_t *failed, double *gram_store)
{
    extern __shared__ double sh[];
    /* The sweep's solve for this mode broke down: leave the factor and the
     * accumulators as they are (uniform, before any barrier). */
    if (failed && *failed)
        return;
    pack_split_rows(io, M - io.row_base * s.R, s.R);
    const uint32_t R = s.R, RP = s.RP, RS = s.RS, T = s.T;
    float *s_w = reinterpret_cast<float *>(sh);                 /* [RP*RP] */
    float *s_a = s_w + (size_t)RP * RP;                          /* [T*RS] */
    float *region = s_a + (size_t)s.T * RS;                      /* tile_region_bytes */
    const size_t tile_floats = (size_t)s.T * RS;                 /* per buffer of M */
    double *s_inner = reinterpret_cast<double *>(
        reinterpret_cast<char *>(region) + tile_region_bytes(s)); /* [R] */
    uint32_t *s_max = reinterpret_cast<uint32_t *>(s_inner + R);  /* [R] */

    const uint32_t tid = threadIdx.x;
    /* M W with M's column scale folded into W's rows: (M D) W = M (D W). */
    for (uint32_t t = tid; t < RP * RP; t += blockDim.x) {
        const uint32_t k = t / RP, c = t % RP;
        s_w[t] = k < R && c < R ? W[k * R + c] * io.m_scale[k] : 0.0f;
    }
    for (uint32_t t = tid; t < R; t += blockDim.x) {
        s_inner[t] = 0.0;
        s_max[t] = 0u;
    }
    zero_padding(region, s, tid);
    zero_padding(region + tile_floats, s, tid);

    /* GEMM lanes: column quad cq of the row quads rg, rg + row_groups, ... */
    const uint32_t cq = tid % s.CQ, rg = tid / s.CQ, row_groups = kThreads / s.CQ;
    const uint32_t c0 = cq * 4u;
    const bool primary = blockIdx.y == 0; /* writes A and the column stats */
    const gram_lane lane = gram_lane_for(s, tid, blockIdx.y);
    const bool vector_rows = R % 4u == 0;
    double my_inner[4] = {0.0, 0.0, 0.0, 0.0};
    float my_max[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    double gacc[16];
#pragma unroll
    for (int e = 0; e < 16; ++e)
        gacc[e] = 0.0;

    /* The tiles of M stream in asynchronously (cp.async), one tile ahead
     * of the arithmetic: with loads and arithmetic in turn a block had one
     * tile in flight at a time, too few bytes to keep HBM busy. */
    const uint32_t ntiles = (I + T - 1) / T;
    uint32_t tile = blockIdx.x;
    if (tile < ntiles)
        load_tile_async(M, io.row_present, io.row_base, tile, I, R, T, RS, region, tid);
    __pipeline_commit();
    for (uint32_t buf = 0; tile < ntiles; tile += gridDim.x, buf ^= 1u) {
        const uint64_t base = (uint64_t)tile * T;
        const uint32_t rows = (uint32_t)(I - base < T ? I - base : T);
        const float *s_m = region + buf * tile_floats;
        if (tile + gridDim.x < ntiles)
            load_tile_async(M, io.row_present, io.row_base, tile + gridDim.x, I, R, T, RS,
                            region + (buf ^ 1u) * tile_floats, tid);
        __pipeline_commit();
        __pipeline_wait_prior(1); /* this tile's copy, not the next one's */
        __syncthreads();
        for (uint32_t r0 = rg * 4u; rg < row_groups && r0 < rows; r0 += row_groups * 4u) {
            float a[4][4];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    a[i][j] = 0.0f;
            for (uint32_t k = 0; k < RP; k += 4u) {
                float4 w[4], m[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    w[q] = *reinterpret_cast<const float4 *>(s_w + (k + q) * RP + c0);
                    m[q] = *reinterpret_cast<const float4 *>(s_m + (r0 + q) * RS + k);
                }
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const float mv[4] = {m[i].x, m[i].y, m[i].z, m[i].w};
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        a[i][0] += mv[q] * w[q].x;
                        a[i][1] += mv[q] * w[q].y;
                        a[i][2] += mv[q] * w[q].z;
                        a[i][3] += mv[q] * w[q].w;
                    }
                }
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const uint32_t row = r0 + (uint32_t)i;
                *reinterpret_cast<float4 *>(s_a + row * RS + c0) =
                    make_float4(a[i][0], a[i][1], a[i][2], a[i][3]);
                if (!primary || row >= rows)
                    continue;
                const float4 mrow = *reinterpret_cast<const float4 *>(s_m + row * RS + c0);
                const float mv[4] = {mrow.x, mrow.y, mrow.z, mrow.w};
                float *a_row = A + (base + row) * R;
                if (vector_rows)
                    *reinterpret_cast<float4 *>(a_row + c0) =
                        make_float4(a[i][0], a[i][1], a[i][2], a[i][3]);
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if (c0 + (uint32_t)j >= R)
                        continue;
                    if (!vector_rows)
                        a_row[c0 + j] = a[i][j];
                    my_inner[j] += (double)mv[j] * a[i][j];
                    my_max[j] = fmaxf(my_max[j], fabsf(a[i][j]));
                }
            }
        }
        __syncthreads();
        gram_accumulate(s_a, s, rows, lane, gacc);
        __syncthreads(); /* the next tile overwrites s_a and this s_m */
    }
    __pipeline_wait_prior(0);

    /* The lanes of one column quad add up by shuffles first when the
     * quads tile the warp (every thread a GEMM lane): one shared atomic per
     * column and warp, where 32 / CQ lanes of a warp contended for it. */
    const bool warp_quads = 32u % s.CQ == 0u;
    if (primary && warp_quads)
        for (uint32_t off = s.CQ; off < 32u; off <<= 1)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                my_inner[j] += __shfl_xor_sync(0xffffffffu, my_inner[j], off);
                my_max[j] = fmaxf(my_max[j], __shfl_xor_sync(0xffffffffu, my_max[j], off));
            }
    if (primary && (warp_quads ? tid % 32u < s.CQ : rg < row_groups)) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if (c0 + (uint32_t)j >= R)
                continue;
            atomicAdd(&s_inner[c0 + j], my_inner[j]);
            /* non-negative: bits order as values */
            atomicMax(&s_max[c0 + j], __float_as_uint(my_max[j]));
        }
    }
    __syncthreads();
    for (uint32_t t = tid; primary && t < R; t += blockDim.x) {
        atomicAdd(&acc.inner[t], s_inner[t]);
        atomicMax(&acc.maxbits[t], s_max[t]);
    }
    gram_block_flush(s, lane, gacc, reinterpret_cast<double *>(region), acc.gram);

    finish_update(W, R, io, acc, out, out_mapped, gram_store, s_inner);
}

/* The update's epilogue over a factor computed elsewhere (the nonnegative
 * update, nonneg.cu, leaves its unnormalised A in the factor; tall factors
 * at ranks 16, 32 and 64 take update_tc_kernel's epilogue form instead): the same
 * sums as update_kernel's (Ahat^T Ahat, sum_i M(i,r) Ahat(i,r),
 * max |Ahat(:,r)|) from tiles of A and M read as they are, and the same
 * finish (finish_update: lambda, the normalised Gram and inner, the column
 * scale, the accumulators re-zeroed). Shared memory: the tile of A
 * [T*RS] floats, the region (M's tile, later the Gram's reduction),
 * s_inner [R] doubles, s_max [R]. */
size_t stats_smem_bytes(const tile_shape &s)
{
    return sizeof(float) * (size_t)s.T * s.RS + tile_region_bytes(s) + sizeof(double) * s.R +
           sizeof(uint32_t) * s.R;
}

__global__ void __launch_bounds__(kThreads, 2)
    stats_kernel(const float *M, const float *A, uint32_t I, tile_shape s, update_io io,
                 thg_als_acc acc, const float *W, double *out, int out_mapped,
                 const uint32_t *failed, double *gram_store)
{
    extern __shared__ double sh[];
    /* As update_kernel: a sweep whose earlier solve broke down leaves the
     * factor and the accumulators (uniform, before any barrier). */
    if (failed && *failed)
        return;
    const uint32_t R = s.R, RS = s.RS, T = s.T;
    float *s_a = reinterpret_cast<float *>(sh);                  /* [T*RS] */
    float *region = s_a + (size_t)T * RS;                         /* M's tile, then the reduction */
    double *s_inner = reinterpret_cast<double *>(
        reinterpret_cast<char *>(region) + tile_region_bytes(s)); /* [R] */
    uint32_t *s_max = reinterpret_cast<uint32_t *>(s_inner + R);  /* [R] */
    const uint32_t tid = threadIdx.x;
    const bool primary = blockIdx.y == 0; /* the column stats; every block a share of the Gram */
    for (uint32_t t = tid; t < R; t += blockDim.x) {
        s_inner[t] = 0.0;
        s_max[t] = 0u;
    }
    zero_padding(s_a, s, tid); /* the Gram's products read the padded width */
    __syncthreads();
    const gram_lane lane = gram_lane_for(s, tid, blockIdx.y);
    double gacc[16];
#pragma unroll
    for (int e = 0; e < 16; ++e)
        gacc[e] = 0.0;
    /* Column stats: thread (c, sub) takes column c of rows sub, sub + subs, ... */
    const uint32_t subs = kThreads / R, c = tid % R, sub = tid / R;
    const bool stats_lane = primary && sub < subs;
    double my_inner = 0.0;
    float my_max = 0.0f;
    const uint32_t ntiles = (I + T - 1) / T;
    for (uint32_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const uint64_t base = (uint64_t)tile * T;
        const uint32_t rows = (uint32_t)(I - base < T ? I - base : T);
        load_tile_async(A, nullptr, 0, tile, I, R, T, RS, s_a, tid);
        if (primary)
            load_tile_async(M, io.row_present, io.row_base, tile, I, R, T, RS, region, tid);
        __pipeline_commit();
        __pipeline_wait_prior(0);
        __syncthreads();
        if (stats_lane)
            for (uint32_t row = sub; row < rows; row += subs) {
                const float a = s_a[row * RS + c];
                my_inner += (double)region[row * RS + c] * a;
                my_max = fmaxf(my_max, fabsf(a));
            }
        gram_accumulate(s_a, s, rows, lane, gacc);
        __syncthreads(); /* the next tile overwrites s_a and M's tile */
    }
    if (stats_lane) {
        atomicAdd(&s_inner[c], my_inner);
        atomicMax(&s_max[c], __float_as_uint(my_max)); /* non-negative: bits order as values */
    }
    __syncthreads();
    for (uint32_t t = tid; primary && t < R; t += blockDim.x) {
        atomicAdd(&acc.inner[t], s_inner[t]);
        atomicMax(&acc.maxbits[t], s_max[t]);
    }
    gram_block_flush(s, lane, gacc, reinterpret_cast<double *>(region), acc.gram);
    finish_update(W, R, io, acc, out, out_mapped, gram_store, s_inner);
}

/* A(:, r) *= scale[r] when the update asked for it (*rescale). */
__global__ void scale_kernel(float *A, uint32_t I, uint32_t R, const float *scale,
                             const uint32_t *rescale, const uint32_t *failed)
{
    if ((failed && *failed) || !*rescale)
        return;
    scale_rows(A, I, R, scale, nullptr);
}

/* Factor `mode` <- the counter-based initial values (plugin_sdk.h), and
 * their unnormalised Gram added to `gram` (R x R doubles, zero before). */
__global__ void __launch_bounds__(kThreads, 2)
    init_factor_kernel(float *A, uint32_t I, tile_shape s, uint64_t seed, uint32_t mode,
                       double *gram)
{
    extern __shared__ double sh[];
    const uint32_t R = s.R, RS = s.RS, T = s.T;
    float *s_a = reinterpret_cast<float *>(sh) + (size_t)s.RP * s.RP; /* as update_kernel's */
    double *s_reduce = reinterpret_cast<double *>(s_a + (size_t)s.T * RS);
    const uint32_t tid = threadIdx.x;
    zero_padding(s_a, s, tid);
    const gram_lane lane = gram_lane_for(s, tid, blockIdx.y);
    double gacc[16];
#pragma unroll
    for (int e = 0; e < 16; ++e)
        gacc[e] = 0.0;
    __syncthreads();
    const uint32_t ntiles = (I + T - 1) / T;
    for (uint32_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const uint64_t base = (uint64_t)tile * T;
        const uint32_t rows = (uint32_t)(I - base < T ? I - base : T);
        for (uint32_t t = tid; t < rows * R; t += blockDim.x) {
            const uint32_t row = t / R, c = t % R;
            const float v = __double2float_rn(th_initial_factor_value(seed, mode, base + row, c));
            s_a[row * RS + c] = v;
            if (blockIdx.y == 0)
                A[base * R + t] = v;
        }
        __syncthreads();
        gram_accumulate(s_a, s, rows, lane, gacc);
        __syncthreads();
    }
    gram_block_flush(s, lane, gacc, s_reduce, gram);
}

/* How far from 1 a lambda may be and stay unapplied. An MTTKRP multiplies
 * N - 1 unnormalised rows, so its sums are the normalised ones times up to
 * bound^(N-1) = 2^24: with values within 2^64 of 1
 * (th_sptensor_scale_to_safe_range) and up to 2^32 nonzeros in a row,
 * still inside fp32's normal range of 2^126. */
float rescale_bound(uint32_t nmodes)
{
    const uint32_t others = nmodes > 1 ? nmodes - 1u : 1u;
    return exp2f(24.0f / (float)others);
}

/* One block per tile of full height, up to the resident blocks. A small
 * mode's update is latency, whatever its rows: a block's fixed work (W into
 * shared memory, the Gram's flush, the global atomics) outweighs its tile,
 * and every block adds its R x R sums into the same doubles. Full tiles, so
 * fewer blocks, measured faster than shorter tiles over every resident
 * block (kernels/DESIGN.md). */
uint32_t grid_blocks(uint32_t I, const tile_shape &s, uint32_t resident_blocks)
{
    const uint32_t ntiles = (I + s.T - 1) / s.T;
    return ntiles < resident_blocks ? ntiles : resident_blocks;
}

} // namespace

void thg_gram_mirror(double *gram, uint32_t rank)
{
    for (uint32_t r1 = 0; r1 < rank; ++r1)
        for (uint32_t r2 = 0; r2 < rank; ++r2)
            gram[(size_t)r1 * rank + r2] = gram[gram_entry(r1, r2, rank)];
}

size_t thg_als_w_bytes(uint32_t rank)
{
    return sizeof(float) * (size_t)rank * rank + sizeof(int);
}

size_t thg_als_acc_bytes(uint32_t rank)
{
    const size_t R = rank;
    return sizeof(double) * (R * R + R) + sizeof(uint32_t) * R + sizeof(float) * R +
           2 * sizeof(uint32_t);
}

void thg_als_acc_view(void *block, uint32_t rank, thg_als_acc *acc)
{
    *acc = acc_at(block, rank);
}

thg_status thg_als_prepare(thg_context *ctx, char *err, size_t errlen)
{
    const int smem = (int)update_smem_bytes(shape_for(ctx->rank));
    THG_CUDA(cudaFuncSetAttribute(update_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  smem));
    THG_CUDA(cudaFuncSetAttribute(init_factor_kernel,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    THG_CUDA(cudaFuncSetAttribute(stats_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)stats_smem_bytes(shape_for(ctx->rank))));
    int per_sm = 0;
    THG_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, update_kernel, kThreads,
                                                           (size_t)smem));
    ctx->als_resident_blocks = (uint32_t)(per_sm > 0 ? per_sm : 1) * (uint32_t)ctx->sm_count;
    const thg_status tc = thg_als_tc_prepare(ctx, err, errlen);
    if (tc != THG_OK)
        return tc;
    return thg_solve_prepare(ctx->rank, err, errlen);
}

namespace {

update_io io_for(const thg_context *ctx, uint32_t mode, const thg_als_part *part)
{
    const uint32_t R = ctx->rank;
    update_io io;
    io.row_present = ctx->copies[mode].has_empty_rows ? ctx->copies[mode].row_present : nullptr;
    io.row_base = part ? part->row_begin : 0;
    io.partial = part != nullptr;
    io.pack_slot = part ? part->pack_slot : nullptr;
    io.pack_rows[0] = part ? part->pack_rows[0] : THG_NO_ROW;
    io.pack_rows[1] = part ? part->pack_rows[1] : THG_NO_ROW;
    io.m_scale = ctx->result_scale + (size_t)mode * R;
    io.col_scale = ctx->col_scale + (size_t)mode * R;
    io.rescale_bound = rescale_bound(ctx->nmodes);
    io.inner_made = 0;
    return io;
}

/* The update's second kernel: A(:, r) *= 1/lambda_r over the whole factor
 * when the finished update asked for it. */
thg_status launch_scale(thg_context *ctx, uint32_t mode, const uint32_t *failed, char *err,
                        size_t errlen)
{
    const uint32_t R = ctx->rank;
    const uint32_t I = ctx->dims[mode];
    const uint32_t lanes = R % 4u == 0 ? R / 4u : R;
    const uint64_t rows_per_block = kScaleThreads / lanes;
    const uint64_t needed = ((uint64_t)I + rows_per_block - 1) / rows_per_block;
    const uint64_t scale_cap = (uint64_t)ctx->sm_count * 8;
    scale_kernel<<<(unsigned)(needed < scale_cap ? needed : scale_cap), kScaleThreads, 0,
                   ctx->stream>>>(ctx->factors[mode], I, R, ctx->als_acc.scale,
                                  ctx->als_acc.rescale, failed);
    THG_LAUNCHED();
    return THG_OK;
}

} // namespace

thg_status thg_launch_als(thg_context *ctx, uint32_t mode, double *out, const uint32_t *failed,
                          double *gram_store, cudaEvent_t after_gemm, const thg_als_part *part,
                          char *err, size_t errlen)
{
    const uint32_t R = ctx->rank;
    const uint64_t row_begin = part ? part->row_begin : 0;
    const uint32_t I = part ? part->rows : ctx->dims[mode];
    cudaStream_t st = ctx->stream;
    const update_io io = io_for(ctx, mode, part);
    const thg_als_acc acc = part ? part->acc : ctx->als_acc;
    const int out_mapped = out == ctx->als_out_dev;
    const float *M = ctx->results[mode] + row_begin * R;
    const float *W = ctx->als_w;
    float *A = ctx->factors[mode] + row_begin * R;
    const tile_shape s = shape_for(R);
    if (I == 0) {
        /* A rank that owns no row of this mode adds nothing. */
    } else if (thg_als_tc_chosen(ctx, I)) {
        const thg_status tc = thg_launch_als_tc(ctx, M, W, A, I, io, acc, out, out_mapped, failed,
                                                gram_store, err, errlen);
        if (tc != THG_OK)
            return tc;
    } else {
        update_kernel<<<dim3(grid_blocks(I, s, ctx->als_resident_blocks), gram_splits(s)),
                        kThreads, update_smem_bytes(s), st>>>(M, W, A, I, s, io, acc, out,
                                                               out_mapped, failed, gram_store);
        THG_LAUNCHED();
    }
    if (after_gemm)
        THG_CUDA(cudaEventRecord(after_gemm, st));
    if (part)
        return THG_OK; /* finished and scaled once every rank's sums are in */
    return launch_scale(ctx, mode, failed, err, errlen);
}

thg_status thg_launch_als_epilogue(thg_context *ctx, uint32_t mode, double *out,
                                   const uint32_t *failed, double *gram_store,
                                   cudaEvent_t after_stats, bool inner_made, char *err,
                                   size_t errlen)
{
    const uint32_t I = ctx->dims[mode];
    const tile_shape s = shape_for(ctx->rank);
    update_io io = io_for(ctx, mode, nullptr);
    io.inner_made = inner_made;
    if (inner_made && !thg_als_tc_chosen(ctx, I))
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "the update's epilogue: inner products made elsewhere, but mode %u's "
                        "epilogue is not the tensor cores'",
                        mode);
    if (I > 0 && thg_als_tc_chosen(ctx, I)) {
        const thg_status tc = thg_launch_als_tc_stats(
            ctx, ctx->results[mode], ctx->factors[mode], I, io, ctx->als_acc, ctx->als_w, out,
            out == ctx->als_out_dev, failed, gram_store, err, errlen);
        if (tc != THG_OK)
            return tc;
    } else if (I > 0) {
        /* The grid of update_kernel's SIMT path (the same fixed work per block). */
        stats_kernel<<<dim3(grid_blocks(I, s, ctx->als_resident_blocks), gram_splits(s)),
                       kThreads, stats_smem_bytes(s), ctx->stream>>>(
            ctx->results[mode], ctx->factors[mode], I, s, io, ctx->als_acc, ctx->als_w, out,
            out == ctx->als_out_dev, failed, gram_store);
        THG_LAUNCHED();
    }
    if (after_stats)
        THG_CUDA(cudaEventRecord(after_stats, ctx->stream));
    return launch_scale(ctx, mode, failed, err, errlen);
}

size_t thg_fold_scratch_bytes(uint32_t rank)
{
    return sizeof(double) * rank + 2u * sizeof(float) * THG_MAX_FOLD_ROWS * rank;
}

thg_status thg_launch_als_fold(thg_context *ctx, uint32_t mode, void *parts, size_t part_stride,
                               uint32_t G, const thg_als_fold *fold, void *scratch,
                               const uint32_t *failed, char *err, size_t errlen)
{
    const uint32_t R = ctx->rank;
    thg_als_fold none;
    memset(&none, 0, sizeof none);
    /* Blocks enough to normalise a tall factor in the rare case that asks
     * for it; few enough that the usual case costs what one block does. */
    const uint32_t I = ctx->dims[mode];
    const uint64_t needed = ((uint64_t)I * R + kThreads - 1) / kThreads;
    const uint64_t cap = (uint64_t)ctx->sm_count;
    fold_kernel<<<(unsigned)(needed < cap ? needed : cap), kThreads, 0, ctx->stream>>>(
        ctx->als_w, R, ctx->result_scale + (size_t)mode * R, (char *)parts, part_stride, G,
        fold ? *fold : none, ctx->factors[mode], I, ctx->col_scale + (size_t)mode * R,
        rescale_bound(ctx->nmodes), scratch, failed);
    THG_LAUNCHED();
    return THG_OK;
}

thg_status thg_launch_als_group_finish(thg_context *ctx, uint32_t mode, void *parts,
                                       size_t part_stride, uint32_t G, uint32_t self,
                                       uint32_t folded_rows, void *scratch, double *out,
                                       const uint32_t *failed, double *gram_store,
                                       cudaStream_t stream, char *err, size_t errlen)
{
    const uint32_t R = ctx->rank;
    group_finish_kernel<<<1, kThreads, 0, stream>>>(
        R, ctx->result_scale + (size_t)mode * R, (char *)parts, part_stride, G, self,
        folded_rows, scratch, out, out == ctx->als_out_dev, failed, gram_store);
    THG_LAUNCHED();
    return THG_OK;
}

thg_status thg_launch_init_factor(thg_context *ctx, uint32_t mode, uint64_t seed, double *gram,
                                  char *err, size_t errlen)
{
    const uint32_t I = ctx->dims[mode];
    const tile_shape s = shape_for(ctx->rank);
    init_factor_kernel<<<dim3(grid_blocks(I, s, ctx->als_resident_blocks), gram_splits(s)),
                         kThreads, update_smem_bytes(s), ctx->stream>>>(
        ctx->factors[mode], I, s, seed, mode, gram);
    THG_LAUNCHED();
    return THG_OK;
}
