/* The CP-ALS factor update on the tensor cores: ranks 16, 32 and 64 on tall
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

/* ---- Tall factors on the tensor cores (ranks 16, 32 and 64).
 * At the two blocks per SM its 117 registers allow, the SIMT update (als.cu) is
 * latency-bound on a 25.5M-row factor: 2.6x its memory time (ncu: issue
 * slots 64% busy, DRAM 26%). Here both products run as TF32 mma.sync with
 * the 3xTF32 split (x = hi + lo, hi holding TF32's bits of x;
 * x y ~ lo hi + hi lo + hi hi, an error of ~2^-21 per product, fp32's
 * order), on tiles of 128 rows (64 at R = 64) and 8 warps: warp w
 * computes 16 rows of A = M (D W) (m16n8k8 over the rank; at R = 64 half
 * their columns); then each warp adds up to two upper 16 x 16 blocks of
 * the Gram over shares of the tile's rows (m16n8k8 over rows, tc_role),
 * while every thread adds up one column's inner product and maximum.
 * Fragment layouts: PTX ISA, "Matrix Fragments for mma.m16n8k8" (.tf32);
 * the strides below make every fragment load conflict-free. Larger ranks
 * keep the SIMT kernel: their Gram accumulators would not fit in
 * registers beside the rest. */
__host__ __device__ inline bool tc_rank(uint32_t R) { return R == 16u || R == 32u || R == 64u; }

/* Rows of a tile: 64 at R = 64, where two blocks an SM then fit in shared
 * memory (90 KB each; tiles of 128 rows would take 144 KB). */
__host__ __device__ constexpr uint32_t tc_tile_rows(uint32_t R) { return R > 32u ? 64u : 128u; }

/* Row stride of W and of the tile of A: = 8 (mod 16), so the 4 k-rows x 8
 * columns of a B fragment fall in 32 different banks. (M's stride RS =
 * R + 4 = 4 (mod 8) does the same for A fragments.) */
__host__ __device__ constexpr uint32_t tc_w_stride(uint32_t R)
{
    return R + (24u - R % 16u) % 16u;
}

/* The update: s_wh, s_wl [R x RW] | M's tiles [2][TR x RS] | s_a
 * [TR x RW] | s_inner [R] doubles | s_max [R], TR = tc_tile_rows(R). The
 * epilogue (kStats) has no W and reads A's tiles too: M's tiles
 * [2][TR x RS] | A's tiles [2][TR x RW] | s_inner | s_max. */
size_t tc_smem_bytes(uint32_t R, bool stats)
{
    const size_t RW = tc_w_stride(R), RS = R + 4u, TR = tc_tile_rows(R);
    const size_t w = stats ? 0u : 2 * R * RW, a_tiles = stats ? 2u : 1u;
    return sizeof(float) * (w + 2 * TR * RS + a_tiles * TR * RW) + sizeof(double) * R +
           sizeof(uint32_t) * R;
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
 * a row stride of RSD floats; the caller commits the batch. The shared
 * loader's method (thg_rows_to_shared_async: a thread's row_present words
 * read before its copies start, the zero fill as the copy's source size)
 * with the rank, the tile and the threads constants: a thread's copies at
 * constant offsets, no loop around them. Through the shared loader the
 * update took 2% longer. */
template <uint32_t R, uint32_t RSD, uint32_t TR = tc_tile_rows(R)>
__device__ __forceinline__ void tc_load_tile(const float *src, const uint32_t *row_present,
                                             uint64_t row_base, uint32_t tile, uint32_t I,
                                             float *dst, uint32_t tid)
{
    constexpr uint32_t quads = R / 4u, step = kThreads / quads;
    constexpr uint32_t per_thread = TR / step;
    const uint64_t base = (uint64_t)tile * TR;
    const uint32_t rows = (uint32_t)(I - base < TR ? I - base : TR);
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
 * twice the fragments (a diagonal block's B fragments are its A's). At
 * R = 64 the ten upper blocks' steps of 8 rows (80 a tile of 64 rows),
 * block after block, go 10 to a warp: two jobs a warp, the second in the
 * next block (10 w mod 8 is even, so 10 steps never reach a third). */
struct tc_gram_role {
    uint32_t m0, n0, k_begin, k_len;
};

template <int NT> __host__ __device__ constexpr int tc_jobs() { return NT == 8 ? 2 : 1; }

/* Upper 16 x 16 block b of the Gram at R = 64, row by row: (0,0) (0,16)
 * (0,32) (0,48) (16,16) (16,32) (16,48) (32,32) (32,48) (48,48). */
__device__ inline void tc_block64(uint32_t b, uint32_t &m0, uint32_t &n0)
{
    const uint32_t row = b < 4u ? 0u : b < 7u ? 1u : b < 9u ? 2u : 3u;
    const uint32_t first = row == 0u ? 0u : row == 1u ? 4u : row == 2u ? 7u : 9u;
    m0 = 16u * row;
    n0 = 16u * (row + b - first);
}

template <int NT>
__device__ inline tc_gram_role tc_role(uint32_t warp, int job)
{
    if (NT == 2)
        return {0u, 0u, warp * 16u, 16u};
    if (NT == 4) {
        if (warp < 2u)
            return {0u, 0u, warp * 64u, 64u};
        if (warp < 6u)
            return {0u, 16u, (warp - 2u) * 32u, 32u};
        return {16u, 16u, (warp - 6u) * 64u, 64u};
    }
    /* Warp w takes steps [10 w, 10 w + 10): job 0 from step 10 w to its
     * block's end (10 w mod 8 <= 6, so the block ends within the ten),
     * job 1 the rest, from the next block's start. */
    const uint32_t first = 10u * warp, block = first / 8u + (uint32_t)job, skip = first % 8u;
    const uint32_t k0 = job == 0 ? skip : 0u;
    const uint32_t k1 = job == 0 ? 8u : skip + 2u;
    tc_gram_role r;
    tc_block64(block, r.m0, r.n0);
    r.k_begin = 8u * k0;
    r.k_len = 8u * (k1 - k0);
    return r;
}

/* kStats = false: the update, A = M (D W) written to the factor, and its
 * sums. kStats = true: the epilogue of an update computed elsewhere (the
 * nonnegative passes, nonneg.cu): the same sums over A's tiles as stored,
 * read beside M's (als.cu's stats_kernel on the tensor cores). */
template <int NT, bool kStats>
__global__ void __launch_bounds__(kThreads, kStats || NT == 8 ? 2 : 3)
    update_tc_kernel(const float *M, const float *W, float *A, uint32_t I, update_io io,
                     thg_als_acc acc, double *out, int out_mapped, const uint32_t *failed,
                     double *gram_store)
{
    extern __shared__ double sh[];
    if (failed && *failed)
        return;
    constexpr uint32_t R = 8u * NT, TR = tc_tile_rows(R);
    if (!kStats)
        pack_split_rows(io, M - io.row_base * R, R);
    constexpr uint32_t RS = R + 4u;
    constexpr uint32_t RW = tc_w_stride(R);
    float *s_wh = reinterpret_cast<float *>(sh);
    float *s_wl = s_wh + R * RW;
    float *s_m = kStats ? s_wh : s_wl + R * RW;
    float *s_a = s_m + 2u * TR * RS;
    double *s_inner = reinterpret_cast<double *>(s_a + (kStats ? 2u : 1u) * TR * RW);
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
    /* This warp's Gram blocks, in double across tiles. */
    constexpr int kJobs = tc_jobs<NT>();
    tc_gram_role role[kJobs];
    double gacc[kJobs][2][4];
#pragma unroll
    for (int j = 0; j < kJobs; ++j) {
        role[j] = tc_role<NT>(warp, j);
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                gacc[j][h][e] = 0.0;
    }

    const uint32_t ntiles = (I + TR - 1u) / TR;
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
        const uint64_t base = (uint64_t)tile * TR;
        const uint32_t rows = (uint32_t)(I - base < TR ? I - base : TR);
        const float *m = s_m + buf * TR * RS;
        float *a_tile = kStats ? s_a + buf * TR * RW : s_a;
        if (tile + gridDim.x < ntiles) {
            if (read_m)
                tc_load_tile<R, RS>(M, io.row_present, io.row_base, tile + gridDim.x, I,
                                    s_m + (buf ^ 1u) * TR * RS, tid);
            if (kStats)
                tc_load_tile<R, RW>(A, nullptr, 0, tile + gridDim.x, I,
                                    s_a + (buf ^ 1u) * TR * RW, tid);
        }
        __pipeline_commit();
        __pipeline_wait_prior(1); /* this tile's copy, not the next one's */
        __syncthreads();

        if (kStats && rows < TR) {
            /* The Gram reads whole groups of 8 rows: those past the end
             * hold an earlier tile's rows. Zeroed (the last tile only). */
            const uint32_t krows = (rows + 7u) & ~7u;
            for (uint32_t e = tid; e < (krows - rows) * R; e += blockDim.x)
                a_tile[(rows + e / R) * RW + e % R] = 0.0f;
            __syncthreads();
        }

        /* A = M (D W) for this warp's 16 rows (and, at R = 64, half their
         * columns: kJ of the NT column tiles of 8 from j0). Rows past the
         * tile's end hold stale data: computed, but neither stored nor in
         * the Gram. */
        if (!kStats) {
            constexpr uint32_t kRowWarps = TR / 16u, kJ = NT * kRowWarps / 8u;
            const uint32_t r0 = 16u * (warp % kRowWarps), j0 = kJ * (warp / kRowWarps);
            float c[kJ][4];
#pragma unroll
            for (int j = 0; j < (int)kJ; ++j)
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
                for (int j = 0; j < (int)kJ; ++j) {
                    const uint32_t b = (k0 + t) * RW + 8u * (j0 + j) + g, b4 = b + 4u * RW;
                    mma_3xtf32(c[j], ah, al, __float_as_uint(s_wh[b]), __float_as_uint(s_wh[b4]),
                               __float_as_uint(s_wl[b]), __float_as_uint(s_wl[b4]));
                }
            }
            const uint32_t ra = r0 + g, rb = ra + 8u;
#pragma unroll
            for (int j = 0; j < (int)kJ; ++j) {
                const uint32_t c0 = 8u * (j0 + j) + 2u * t;
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
            const auto add_row = [&](uint32_t r) {
                const float av = a_tile[r * RW + col];
                tile_inner = fmaf(m[r * RS + col], av, tile_inner);
                my_max = fmaxf(my_max, fabsf(av));
            };
            if (rows == TR) { /* every tile but the last: constant offsets */
#pragma unroll
                for (uint32_t r = phase; r < phase + TR; r += phases)
                    add_row(r);
            } else {
                for (uint32_t r = phase; r < rows; r += phases)
                    add_row(r);
            }
            my_inner += (double)tile_inner;
        }
        /* The Gram: rows of the tile past `rows` are zero in s_a. */
#pragma unroll
        for (int job = 0; job < kJobs; ++job) {
            const uint32_t m0 = role[job].m0, n0 = role[job].n0;
            float gc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
            const uint32_t krows = (rows + 7u) & ~7u;
            const uint32_t kend = role[job].k_begin + role[job].k_len < krows
                                      ? role[job].k_begin + role[job].k_len
                                      : krows;
            for (uint32_t k = role[job].k_begin; k < kend; k += 8u) {
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
                    gacc[job][h][e] += (double)gc[h][e];
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
    for (int job = 0; job < kJobs; ++job)
#pragma unroll
        for (uint32_t h = 0; h < 2u; ++h) {
            const uint32_t r1 = role[job].m0 + g, r2 = role[job].n0 + 8u * h + 2u * t;
            atomicAdd(&s_gram[r1 * GS + r2], gacc[job][h][0]);
            atomicAdd(&s_gram[r1 * GS + r2 + 1u], gacc[job][h][1]);
            atomicAdd(&s_gram[(r1 + 8u) * GS + r2], gacc[job][h][2]);
            atomicAdd(&s_gram[(r1 + 8u) * GS + r2 + 1u], gacc[job][h][3]);
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
        return R == 16u   ? tc_kernel_ptr<2, true>()
               : R == 32u ? tc_kernel_ptr<4, true>()
                          : tc_kernel_ptr<8, true>();
    return R == 16u   ? tc_kernel_ptr<2, false>()
           : R == 32u ? tc_kernel_ptr<4, false>()
                      : tc_kernel_ptr<8, false>();
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
    const uint64_t TR = tc_tile_rows(ctx->rank), tc_tiles = ((uint64_t)I + TR - 1u) / TR;
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
    const uint64_t TR = tc_tile_rows(R), tiles = ((uint64_t)I + TR - 1u) / TR;
    const uint32_t blocks =
        (uint32_t)(tiles < ctx->als_tc_stats_blocks ? tiles : ctx->als_tc_stats_blocks);
    THG_CUDA(cudaLaunchKernel(tc_kernel_for(R, true), dim3(blocks), dim3(kThreads), args,
                              tc_smem_bytes(R, true), ctx->stream));
    return THG_OK;
}
