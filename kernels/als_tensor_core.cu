/* The CP-ALS factor update on the tensor cores: ranks 16 and 32 on tall
 * factors, TF32 mma.sync with the 3xTF32 split. Owns the mma helpers, the
 * kernel (update_tc_kernel) in its two forms (the update, A = M W and its
 * sums; the epilogue, the same sums over an A computed elsewhere), their
 * attributes and occupancy (at load), the choice of them over the SIMT
 * kernels and their launches; the rest of the update (the SIMT kernels,
 * the scale, fold and finish kernels) is als.cu's, and what both files'
 * kernels share is als_internal.cuh's. */
#include <cuda_pipeline.h>

#include "als_internal.cuh"

namespace {

/* ---- Tall factors on the tensor cores (ranks 16 and 32).
 * At the two blocks per SM its 117 registers allow, the SIMT update (als.cu) is
 * latency-bound on a 25.5M-row factor: 2.6x its memory time (ncu: issue
 * slots 64% busy, DRAM 26%). Here both products run as TF32 mma.sync with
 * the 3xTF32 split (x = hi + lo, hi holding TF32's bits of x;
 * x y ~ lo hi + hi lo + hi hi, an error of ~2^-21 per product, fp32's
 * order), on tiles of 128 rows and 8 warps: warp w computes rows
 * 16w..16w+15 of A = M (D W) (m16n8k8 over the rank); then each warp adds
 * one upper 16 x 16 block of the Gram over a share of the tile's rows
 * (m16n8k8 over rows, tc_role), while every thread adds up one column's
 * inner product and maximum. Fragment layouts: PTX ISA, "Matrix Fragments
 * for mma.m16n8k8" (.tf32); the strides below make every fragment load
 * conflict-free. Larger ranks keep the SIMT kernel: their Gram
 * accumulators would not fit in registers beside the rest. */
constexpr uint32_t kTcRows = 128;

__host__ __device__ inline bool tc_rank(uint32_t R) { return R == 16u || R == 32u; }

/* Row stride of W and of the tile of A: = 8 (mod 16), so the 4 k-rows x 8
 * columns of a B fragment fall in 32 different banks. (M's stride RS =
 * R + 4 = 4 (mod 8) does the same for A fragments.) */
__host__ __device__ constexpr uint32_t tc_w_stride(uint32_t R)
{
    return R + (24u - R % 16u) % 16u;
}

/* The update: s_wh, s_wl [R x RW] | M's tiles [2][kTcRows x RS] | s_a
 * [kTcRows x RW] | s_inner [R] doubles | s_max [R]. The epilogue (kStats)
 * has no W and reads A's tiles too: M's tiles [2][kTcRows x RS] | A's
 * tiles [2][kTcRows x RW] | s_inner | s_max. */
size_t tc_smem_bytes(uint32_t R, bool stats)
{
    const size_t RW = tc_w_stride(R), RS = R + 4u;
    const size_t w = stats ? 0u : 2 * R * RW, a_tiles = stats ? 2u : 1u;
    return sizeof(float) * (w + 2 * kTcRows * RS + a_tiles * kTcRows * RW) +
           sizeof(double) * R + sizeof(uint32_t) * R;
}

/* x = hi + lo exactly, hi with TF32's 10 mantissa bits (truncated: two
 * bit operations where a cvt.rna pair cost the Gram its speed). The tensor
 * cores read lo's top 10 mantissa bits, so lo's own error is within 2^-21
 * of x. */
__device__ __forceinline__ void split_tf32(float x, uint32_t &hi, uint32_t &lo)
{
    hi = __float_as_uint(x) & 0xffffe000u;
    lo = __float_as_uint(x - __uint_as_float(hi));
}

/* Starts the copy of tile `tile` of a tall factor's M (or A) into `dst`, at
 * a row stride of RSD floats; the caller commits the batch. With the rank
 * known, a thread's copies are known ahead: it reads their row_present
 * words first (rows absent from it arrive as zeros without being read),
 * then starts every copy, the zero fill given by its source size, with no
 * branch between the two kinds. */
template <uint32_t R, uint32_t RSD>
__device__ __forceinline__ void tc_load_tile(const float *src, const uint32_t *row_present,
                                             uint64_t row_base, uint32_t tile, uint32_t I,
                                             float *dst, uint32_t tid)
{
    constexpr uint32_t quads = R / 4u, step = kThreads / quads;
    constexpr uint32_t per_thread = kTcRows / step;
    const uint64_t base = (uint64_t)tile * kTcRows;
    const uint32_t rows = (uint32_t)(I - base < kTcRows ? I - base : kTcRows);
    const uint32_t row0 = tid / quads, quad = tid % quads;
    uint32_t bytes[per_thread];
#pragma unroll
    for (uint32_t i = 0; i < per_thread; ++i) {
        const uint32_t row = row0 + i * step;
        bytes[i] = row < rows && (!row_present ||
                                  thg_row_present(row_present, row_base + base + row))
                       ? 16u
                       : 0u;
    }
    const float *from = src + (base + row0) * R + 4u * quad;
    float *to = dst + row0 * RSD + 4u * quad;
#pragma unroll
    for (uint32_t i = 0; i < per_thread; ++i)
        if (row0 + i * step < rows)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                         :
                         : "r"((uint32_t)__cvta_generic_to_shared(to + i * step * RSD)),
                           "l"(from + (size_t)i * step * R), "r"(bytes[i])
                         : "memory");
}

/* c += a b, one m16n8k8 TF32 product with fp32 accumulation. */
__device__ __forceinline__ void mma_tf32(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* c += a b in 3xTF32 (small terms first). */
__device__ __forceinline__ void mma_3xtf32(float c[4], const uint32_t ah[4], const uint32_t al[4],
                                           uint32_t bh0, uint32_t bh1, uint32_t bl0,
                                           uint32_t bl1)
{
    mma_tf32(c, al, bh0, bh1);
    mma_tf32(c, ah, bl0, bl1);
    mma_tf32(c, ah, bh0, bh1);
}

/* A warp's share of the Gram: the 16 x 16 block at (m0, n0) (two m16n8
 * tiles), over the tile's rows [k_begin, k_begin + k_len). At R = 32 the
 * three upper blocks get 2, 4 and 2 warps: the off-diagonal block loads
 * twice the fragments (a diagonal block's B fragments are its A's). */
struct tc_gram_role {
    uint32_t m0, n0, k_begin, k_len;
};

__device__ inline tc_gram_role tc_role(int NT, uint32_t warp)
{
    if (NT == 2)
        return {0u, 0u, warp * 16u, 16u};
    if (warp < 2u)
        return {0u, 0u, warp * 64u, 64u};
    if (warp < 6u)
        return {0u, 16u, (warp - 2u) * 32u, 32u};
    return {16u, 16u, (warp - 6u) * 64u, 64u};
}

/* kStats = false: the update, A = M (D W) written to the factor, and its
 * sums. kStats = true: the epilogue of an update computed elsewhere (the
 * nonnegative passes, nonneg.cu): the same sums over A's tiles as stored,
 * read beside M's (als.cu's stats_kernel on the tensor cores). */
template <int NT, bool kStats>
__global__ void __launch_bounds__(kThreads, kStats ? 2 : 3)
    update_tc_kernel(const float *M, const float *W, float *A, uint32_t I, update_io io,
                     thg_als_acc acc, double *out, int out_mapped, const uint32_t *failed,
                     double *gram_store)
{
    extern __shared__ double sh[];
    if (failed && *failed)
        return;
    constexpr uint32_t R = 8u * NT;
    if (!kStats)
        pack_split_rows(io, M - io.row_base * R, R);
    constexpr uint32_t RS = R + 4u;
    constexpr uint32_t RW = tc_w_stride(R);
    float *s_wh = reinterpret_cast<float *>(sh);
    float *s_wl = s_wh + R * RW;
    float *s_m = kStats ? s_wh : s_wl + R * RW;
    float *s_a = s_m + 2u * kTcRows * RS;
    double *s_inner = reinterpret_cast<double *>(s_a + (kStats ? 2u : 1u) * kTcRows * RW);
    uint32_t *s_max = reinterpret_cast<uint32_t *>(s_inner + R);
    const uint32_t tid = threadIdx.x, warp = tid / 32u, lane = tid % 32u;
    const uint32_t g = lane / 4u, t = lane % 4u;

    /* W with M's column scale folded into its rows, (M D) W = M (D W),
     * split once per block. */
    for (uint32_t e = tid; !kStats && e < R * R; e += blockDim.x) {
        const uint32_t k = e / R, c = e % R;
        uint32_t hi, lo;
        split_tf32(W[e] * io.m_scale[k], hi, lo);
        s_wh[k * RW + c] = __uint_as_float(hi);
        s_wl[k * RW + c] = __uint_as_float(lo);
    }
    for (uint32_t c = tid; c < R; c += blockDim.x) {
        s_inner[c] = 0.0;
        s_max[c] = 0u;
    }
    /* Inner products and maxima: thread = (column, phase of the rows). */
    const uint32_t col = tid % R, phase = tid / R;
    constexpr uint32_t phases = kThreads / R;
    double my_inner = 0.0;
    float my_max = 0.0f;
    /* This warp's Gram block, in double across tiles. */
    const tc_gram_role role = tc_role(NT, warp);
    const uint32_t m0 = role.m0, n0 = role.n0;
    double gacc[2][4];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 4; ++e)
            gacc[h][e] = 0.0;

    const uint32_t ntiles = (I + kTcRows - 1u) / kTcRows;
    uint32_t tile = blockIdx.x;
    /* The epilogue form reads M for the inner products unless they are made. */
    const bool read_m = !kStats || !io.inner_made;
    if (tile < ntiles) {
        if (read_m)
            tc_load_tile<R, RS>(M, io.row_present, io.row_base, tile, I, s_m, tid);
        if (kStats)
            tc_load_tile<R, RW>(A, nullptr, 0, tile, I, s_a, tid);
    }
    __pipeline_commit();
    for (uint32_t buf = 0; tile < ntiles; tile += gridDim.x, buf ^= 1u) {
        const uint64_t base = (uint64_t)tile * kTcRows;
        const uint32_t rows = (uint32_t)(I - base < kTcRows ? I - base : kTcRows);
        const float *m = s_m + buf * kTcRows * RS;
        float *a_tile = kStats ? s_a + buf * kTcRows * RW : s_a;
        if (tile + gridDim.x < ntiles) {
            if (read_m)
                tc_load_tile<R, RS>(M, io.row_present, io.row_base, tile + gridDim.x, I,
                                    s_m + (buf ^ 1u) * kTcRows * RS, tid);
            if (kStats)
                tc_load_tile<R, RW>(A, nullptr, 0, tile + gridDim.x, I,
                                    s_a + (buf ^ 1u) * kTcRows * RW, tid);
        }
        __pipeline_commit();
        __pipeline_wait_prior(1); /* this tile's copy, not the next one's */
        __syncthreads();

        if (kStats && rows < kTcRows) {
            /* The Gram reads whole groups of 8 rows: those past the end
             * hold an earlier tile's rows. Zeroed (the last tile only). */
            const uint32_t krows = (rows + 7u) & ~7u;
            for (uint32_t e = tid; e < (krows - rows) * R; e += blockDim.x)
                a_tile[(rows + e / R) * RW + e % R] = 0.0f;
            __syncthreads();
        }

        /* A = M (D W) for this warp's 16 rows. Rows past the tile's end
         * hold stale data: computed, but neither stored nor in the Gram. */
        if (!kStats) {
            const uint32_t r0 = warp * 16u;
            float c[NT][4];
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    c[j][e] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < NT; ++ks) {
                const uint32_t k0 = 8u * ks;
                uint32_t ah[4], al[4];
                split_tf32(m[(r0 + g) * RS + k0 + t], ah[0], al[0]);
                split_tf32(m[(r0 + g + 8u) * RS + k0 + t], ah[1], al[1]);
                split_tf32(m[(r0 + g) * RS + k0 + t + 4u], ah[2], al[2]);
                split_tf32(m[(r0 + g + 8u) * RS + k0 + t + 4u], ah[3], al[3]);
#pragma unroll
                for (int j = 0; j < NT; ++j) {
                    const uint32_t b = (k0 + t) * RW + 8u * j + g, b4 = b + 4u * RW;
                    mma_3xtf32(c[j], ah, al, __float_as_uint(s_wh[b]), __float_as_uint(s_wh[b4]),
                               __float_as_uint(s_wl[b]), __float_as_uint(s_wl[b4]));
                }
            }
            const uint32_t ra = r0 + g, rb = ra + 8u;
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const uint32_t c0 = 8u * j + 2u * t;
                const float2 va = ra < rows ? make_float2(c[j][0], c[j][1]) : make_float2(0.f, 0.f);
                const float2 vb = rb < rows ? make_float2(c[j][2], c[j][3]) : make_float2(0.f, 0.f);
                *reinterpret_cast<float2 *>(a_tile + ra * RW + c0) = va;
                *reinterpret_cast<float2 *>(a_tile + rb * RW + c0) = vb;
                if (ra < rows)
                    *reinterpret_cast<float2 *>(A + (base + ra) * R + c0) = va;
                if (rb < rows)
                    *reinterpret_cast<float2 *>(A + (base + rb) * R + c0) = vb;
            }
        }
        __syncthreads();

        if (read_m) {
            float tile_inner = 0.0f; /* fp32 within a tile, double across */
            if (rows == kTcRows) { /* every tile but the last: constant offsets */
#pragma unroll
                for (uint32_t r = phase; r < phase + kTcRows; r += phases) {
                    const float av = a_tile[r * RW + col];
                    tile_inner = fmaf(m[r * RS + col], av, tile_inner);
                    my_max = fmaxf(my_max, fabsf(av));
                }
            } else {
                for (uint32_t r = phase; r < rows; r += phases) {
                    const float av = a_tile[r * RW + col];
                    tile_inner = fmaf(m[r * RS + col], av, tile_inner);
                    my_max = fmaxf(my_max, fabsf(av));
                }
            }
            my_inner += (double)tile_inner;
        }
        /* The Gram: rows of the tile past `rows` are zero in s_a. */
        {
            float gc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
            const uint32_t krows = (rows + 7u) & ~7u;
            const uint32_t kend =
                role.k_begin + role.k_len < krows ? role.k_begin + role.k_len : krows;
            for (uint32_t k = role.k_begin; k < kend; k += 8u) {
                const float *row_t = a_tile + (k + t) * RW, *row_t4 = row_t + 4u * RW;
                uint32_t ah[4], al[4];
                split_tf32(row_t[m0 + g], ah[0], al[0]);
                split_tf32(row_t[m0 + g + 8u], ah[1], al[1]);
                split_tf32(row_t4[m0 + g], ah[2], al[2]);
                split_tf32(row_t4[m0 + g + 8u], ah[3], al[3]);
                if (n0 == m0) { /* a diagonal block: B's fragments are A's */
                    mma_3xtf32(gc[0], ah, al, ah[0], ah[2], al[0], al[2]);
                    mma_3xtf32(gc[1], ah, al, ah[1], ah[3], al[1], al[3]);
                } else {
                    uint32_t bh[4], bl[4];
                    split_tf32(row_t[n0 + g], bh[0], bl[0]);
                    split_tf32(row_t4[n0 + g], bh[1], bl[1]);
                    split_tf32(row_t[n0 + g + 8u], bh[2], bl[2]);
                    split_tf32(row_t4[n0 + g + 8u], bh[3], bl[3]);
                    mma_3xtf32(gc[0], ah, al, bh[0], bh[1], bl[0], bl[1]);
                    mma_3xtf32(gc[1], ah, al, bh[2], bh[3], bl[2], bl[3]);
                }
            }
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    gacc[h][e] += (double)gc[h][e];
        }
        __syncthreads(); /* the next tile overwrites s_a and this buffer of M */
    }
    __pipeline_wait_prior(0);

    /* The block's sums: inner and max through shared memory, the Gram's
     * warps of one row block added in the (now free) tile region, then one
     * global atomic per entry. */
    /* [R x GS]: a row stride of R + 1 doubles spreads a warp's 8 rows g
     * over the banks (R = 8 NT doubles put all of them in one). */
    constexpr uint32_t GS = R + 1u;
    double *s_gram = reinterpret_cast<double *>(s_m);
    for (uint32_t e = tid; e < R * GS; e += blockDim.x)
        s_gram[e] = 0.0;
    __syncthreads();
    atomicAdd(&s_inner[col], my_inner);
    atomicMax(&s_max[col], __float_as_uint(my_max)); /* non-negative: bits order as values */
#pragma unroll
    for (uint32_t h = 0; h < 2u; ++h) {
        const uint32_t r1 = m0 + g, r2 = n0 + 8u * h + 2u * t;
        atomicAdd(&s_gram[r1 * GS + r2], gacc[h][0]);
        atomicAdd(&s_gram[r1 * GS + r2 + 1u], gacc[h][1]);
        atomicAdd(&s_gram[(r1 + 8u) * GS + r2], gacc[h][2]);
        atomicAdd(&s_gram[(r1 + 8u) * GS + r2 + 1u], gacc[h][3]);
    }
    __syncthreads();
    for (uint32_t c = tid; c < R; c += blockDim.x) {
        atomicAdd(&acc.inner[c], s_inner[c]);
        atomicMax(&acc.maxbits[c], s_max[c]);
    }
    /* The tiles cover every entry gram_entry() reads; the others are zero. */
    for (uint32_t e = tid; e < R * R; e += blockDim.x) {
        const uint32_t r1 = e / R, r2 = e % R;
        if (r2 >= 16u * (r1 / 16u))
            atomicAdd(&acc.gram[e], s_gram[r1 * GS + r2]);
    }
    finish_update(W, R, io, acc, out, out_mapped, gram_store, s_inner);
}

/* The tensor-core update (or epilogue) of rank 8 NT, as a kernel pointer
 * (attributes, occupancy) and launched. */
template <int NT, bool kStats>
void *tc_kernel_ptr()
{
    return reinterpret_cast<void *>(update_tc_kernel<NT, kStats>);
}

void *tc_kernel_for(uint32_t R, bool stats)
{
    if (stats)
        return R == 16u ? tc_kernel_ptr<2, true>() : tc_kernel_ptr<4, true>();
    return R == 16u ? tc_kernel_ptr<2, false>() : tc_kernel_ptr<4, false>();
}

/* Blocks of a kernel resident at once on the device (at least one an SM). */
thg_status tc_resident(const thg_context *ctx, bool stats, uint32_t *blocks, char *err,
                       size_t errlen)
{
    const void *k = tc_kernel_for(ctx->rank, stats);
    const size_t smem = tc_smem_bytes(ctx->rank, stats);
    THG_CUDA(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int per_sm = 0;
    THG_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, kThreads, smem));
    *blocks = (uint32_t)(per_sm > 0 ? per_sm : 1) * (uint32_t)ctx->sm_count;
    return THG_OK;
}

} // namespace
thg_status thg_als_tc_prepare(thg_context *ctx, char *err, size_t errlen)
{
    ctx->als_tc_resident_blocks = 0;
    ctx->als_tc_stats_blocks = 0;
    if (!tc_rank(ctx->rank))
        return THG_OK;
    const thg_status st = tc_resident(ctx, false, &ctx->als_tc_resident_blocks, err, errlen);
    if (st != THG_OK)
        return st;
    return tc_resident(ctx, true, &ctx->als_tc_stats_blocks, err, errlen);
}

bool thg_als_tc_chosen(const thg_context *ctx, uint32_t I)
{
    const uint64_t tc_tiles = ((uint64_t)I + kTcRows - 1u) / kTcRows;
    /* The tensor cores for tall factors only (a tile for every resident
     * block at least); a shorter mode's update is latency, not arithmetic. */
    return ctx->als_tc_resident_blocks > 0 && tc_tiles >= ctx->als_tc_resident_blocks;
}

thg_status thg_launch_als_tc(thg_context *ctx, const float *M, const float *W, float *A,
                             uint32_t I, const update_io &io, const thg_als_acc &acc,
                             double *out, int out_mapped, const uint32_t *failed,
                             double *gram_store, char *err, size_t errlen)
{
    const uint32_t R = ctx->rank;
    void *args[] = {(void *)&M,   (void *)&W,          (void *)&A,
                    (void *)&I,   (void *)&io,
                    (void *)&acc, (void *)&out,        (void *)&out_mapped,
                    (void *)&failed, (void *)&gram_store};
    THG_CUDA(cudaLaunchKernel(tc_kernel_for(R, false), dim3(ctx->als_tc_resident_blocks),
                              dim3(kThreads), args, tc_smem_bytes(R, false), ctx->stream));
    return THG_OK;
}

thg_status thg_launch_als_tc_stats(thg_context *ctx, const float *M, const float *A, uint32_t I,
                                   const update_io &io, const thg_als_acc &acc, const float *W,
                                   double *out, int out_mapped, const uint32_t *failed,
                                   double *gram_store, char *err, size_t errlen)
{
    const uint32_t R = ctx->rank;
    float *A_read = const_cast<float *>(A); /* read only: the kernel's kStats form */
    void *args[] = {(void *)&M,   (void *)&W,          (void *)&A_read,
                    (void *)&I,   (void *)&io,
                    (void *)&acc, (void *)&out,        (void *)&out_mapped,
                    (void *)&failed, (void *)&gram_store};
    const uint64_t tiles = ((uint64_t)I + kTcRows - 1u) / kTcRows;
    const uint32_t blocks =
        (uint32_t)(tiles < ctx->als_tc_stats_blocks ? tiles : ctx->als_tc_stats_blocks);
    THG_CUDA(cudaLaunchKernel(tc_kernel_for(R, true), dim3(blocks), dim3(kThreads), args,
                              tc_smem_bytes(R, true), ctx->stream));
    return THG_OK;
}
