/* Row-wise least squares on one device (the plugin ABI's
 * row_least_squares, 1.5): the row-wise ALS of tensor completion. For each
 * row j of A = A_mode, over its nonzeros i (values x_i) with
 * h_i = prod_{k != mode} A_k(i_k, :),
 *   G_j = sum_i h_i h_i^T, b_j = sum_i x_i h_i   (accumulated in double)
 * and the row becomes the solution of (G_j + ridge I) a = b_j by an
 * LDL^T factorisation (the pivots are Cholesky's, so the breakdown test is
 * the ABI's), or `passes` sweeps of coordinate descent under a >= 0.
 *
 * The work. A mode's copy (build.cu) keeps each row's nonzeros contiguous:
 * scheme 2 sorts them by row, scheme 1 sorts by row and then, stably, by
 * partition, and a row belongs to one partition. So a row is one run of
 * its index, and the first call after a load turns every mode's runs into
 * a plan (`thg_rls_mode`): the rows sorted by nonzero count, longest first,
 * and the longest ones (over a quarter of the nonzeros per worker) cut
 * into chunks that shrink towards the end of the split rows (kMinChunk).
 * Then one call is:
 *   1. the main kernel: a dynamic queue of tasks, the chunks first, then
 *      the whole rows longest first (the shortest go several to a grab).
 *      Ranks up to 32: one warp per task, G_j's tiles in registers, added
 *      by fp64 tensor-core mma (four nonzeros a step: lane (q, c) holds
 *      nonzero q's h at columns c*T .. c*T+T-1, T = ceil(R/8), which with
 *      both fragments taken from the same registers makes 8 x 8 block
 *      (t1, t2) hold G(c*T + t1, c'*T + t2); on sm_90 two blocks (2I, J)
 *      and (2I + 1, J) a m16n8k4, which issues at the m8n8k4's rate with
 *      twice its products); then the warp writes G_j + ridge I and b_j
 *      to its shared memory, solves (an LDL^T in panels of 8 columns, the
 *      trailing blocks by fp64 mma) and writes the row. Larger
 *      ranks: one 512-thread block per task; each batch of 32 nonzeros'
 *      h goes to shared memory and the block's 16 warps share the 8 x 8 tiles
 *      of the upper triangle; warp 0 solves. A chunk adds its partial G
 *      and b into its row's slot (packed lower triangle, double atomics)
 *      instead of solving.
 *   2. the split rows' solve: one warp per slot.
 *   3. the empty rows: zero (ridge > 0) or as they were.
 *   4. the mode's column scale set to 1: the factor is written as its
 *      true values (those get_factor reads), as the factor operations do.
 * Then one copy of the counts, the norm and the residual, and one
 * synchronisation.
 *
 * The training error (residual_squared) comes with the solve: once a row
 * is written, its x^T x - 2 a^T b + a^T G a (a = the row as held, fp32; G
 * and b the true ones, without the ridge) is added to the call's sum.
 * Both paths keep G's tiles in registers through the solve (the block
 * path's warp 0 in shared memory while it solves) and weight them as they
 * lie: 2 in the tiles t1 < t2, which hold each off-diagonal pair once, 1 in
 * the diagonal tiles, which hold their pairs in both orders. x^T x: the
 * register path's lanes add their values' squares in the Gram loop's
 * batches (into shared memory: the loop has no register to spare), the
 * block path makes a strided pass first. A split row's x^T x goes into its
 * slot beside b, and its residual comes from the slot.
 *
 * h_i is the product of the other modes' fp32 entries in fp32, then in
 * double (within two fp32 roundings of the exact product at four modes,
 * the order of the fp32 row the solve writes); G_j and b_j are summed in
 * double, and the column
 * scales of the stored (unnormalised, als.cu) factors are applied to G_j
 * and b_j in double. */
#include <cub/device/device_radix_sort.cuh>

#include <float.h>
#include <math.h>
#include <string.h>

#include <vector>

#include <tensorhost/plugin.h>

#include "thg_internal.cuh"

namespace {

constexpr uint32_t kFull = 0xffffffffu;
constexpr uint32_t kNoSlot = 0xffffffffu;
/* The register path: ranks up to 8 x kRegisterTiles. */
constexpr uint32_t kRegisterTiles = 4;
constexpr uint32_t kWarpKernelWarps = 4;
constexpr uint32_t kWarpKernelThreads = 32 * kWarpKernelWarps;
/* The block path (larger ranks). */
constexpr uint32_t kBlockWarps = 16;
constexpr uint32_t kBlockThreads = 32 * kBlockWarps;
constexpr uint32_t kBatch = 32; /* nonzeros staged at a time; a multiple of 4 */
constexpr uint32_t kMaxTiles = (THG_MAX_RANK + 7) / 8;
constexpr uint32_t kMaxPairs = kMaxTiles * (kMaxTiles + 1) / 2;
constexpr uint32_t kPairsPerWarp = (kMaxPairs + kBlockWarps - 1) / kBlockWarps;
/* Splitting, guided: the rows longer than max(kMinChunk, nnz /
 * (kChunksPerWorker x workers)) are split, and in the queue's order a
 * chunk is at most max(kMinChunk, the nonzeros left from it on /
 * (kChunksPerWorker x workers)) long: the chunks shrink towards the end of
 * the split rows, so the last workers to finish wait for short tasks. */
constexpr uint32_t kMinChunk = 1024;
constexpr uint32_t kChunksPerWorker = 4;
/* A grab of the queue takes up to kMaxGrab whole rows when they have
 * fewer than kSmallRow nonzeros together (one atomic for several tiny rows). */
constexpr uint32_t kSmallRow = 32;
constexpr uint32_t kMaxGrab = 4;
constexpr uint32_t kUtilThreads = 256;

/* Blocks of the register path's kernel an SM must hold, which sets its
 * register budget (65536 / (128 x blocks)): at R = 32 the tiles, h and the
 * gathers take ~120 registers, more for the run-time count of modes (NO =
 * 0); each value here is the largest without spills (ptxas of CUDA 13.0). */
__host__ __device__ constexpr int warp_min_blocks(int T, int NO)
{
    return T >= 4 ? (NO == 0 ? 3 : 4) : T == 3 ? (NO == 0 ? 4 : 5) : T == 2 ? 7 : 8;
}

size_t round_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

/* Row stride of the register path's matrix in shared memory at T = ceil(R
 * / 8) (its solve's panel count): odd, so that a column read by 32 lanes
 * falls in distinct banks, and a constant of the kernels (templated on T),
 * so that every address in the solve is a lane's base plus an immediate. */
__host__ __device__ constexpr uint32_t panel_ld(uint32_t T) { return 8 * T + 1; }

/* Entry (i, j), j <= i, of a packed lower triangle (row-major). */
__host__ __device__ inline uint32_t lower_index(uint32_t i, uint32_t j)
{
    return i * (i + 1) / 2 + j;
}

/* Where entry (i, j) (j <= i) of the lower triangle lives. */
struct full_layout {
    uint32_t ld;
    __device__ uint32_t operator()(uint32_t i, uint32_t j) const { return i * ld + j; }
};
struct packed_layout {
    __device__ uint32_t operator()(uint32_t i, uint32_t j) const { return lower_index(i, j); }
};

/* What every kernel of a call reads: passed by value (constant bank). */
struct rls_args {
    /* The other modes, in mode order: the copy's index arrays, their
     * stored factors and column scales. */
    const uint32_t *idx[THG_MAX_MODES - 1];
    const float *fac[THG_MAX_MODES - 1];
    const float *scale[THG_MAX_MODES - 1];
    uint32_t nother;
    const float *vals; /* the copy's values */
    float *F;          /* the mode's stored factor, rewritten as true values */
    const float *self_scale; /* the mode's column scale (set to 1 after) */
    uint32_t R;
    double ridge;
    int nonneg;
    uint32_t passes;
    const thg_rls_row *rows;
    const thg_rls_chunk *chunks;
    uint32_t nsplit, nchunks;
    uint32_t ntasks; /* nchunks + the whole rows */
    double *split;   /* nsplit slots */
    uint32_t slot_stride;
    thg_rls_counters *ctr;
};

/* c += a b, one m8n8k4 fp64 product: a is A(lane / 4, lane % 4), b is
 * B(lane % 4, lane / 4), c is C(lane / 4, 2 (lane % 4) + {0, 1}) (PTX ISA,
 * "Matrix Fragments for mma.m8n8k4" with .f64). */
__device__ __forceinline__ void dmma(double (&c)[2], double a, double b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
        : "+d"(c[0]), "+d"(c[1])
        : "d"(a), "d"(b));
#else
    /* The same product from shuffles, for devices without fp64 mma. */
    const uint32_t lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (uint32_t k = 0; k < 4; ++k) {
        const double av = __shfl_sync(kFull, a, g * 4 + k);
        const double b0 = __shfl_sync(kFull, b, (2 * t) * 4 + k);
        const double b1 = __shfl_sync(kFull, b, (2 * t + 1) * 4 + k);
        c[0] = fma(av, b0, c[0]);
        c[1] = fma(av, b1, c[1]);
    }
#endif
}

/* c += A b with A's two 8-row halves a_lo, a_hi: the m8n8k4 products
 * (a_lo, b) into c[0..1] and (a_hi, b) into c[2..3], as one m16n8k4 where
 * the device has it (sm_90: A(lane / 4 + 8 h, lane % 4) is a_h, C's rows
 * lane / 4 and lane / 4 + 8 are c[0..1] and c[2..3]; PTX ISA, "Matrix
 * Fragments for mma.m16n8k4" with .f64). It issues at the rate of the
 * m8n8k4, so it makes twice the products in the same time (on an H200
 * 66 against 33 TFLOPS). Elsewhere two m8n8k4, or only the halves the
 * caller keeps (lo, hi: constants once the caller's loops unroll). */
__device__ __forceinline__ void dmma_wide(double (&c)[4], double a_lo, double a_hi, double b,
                                          bool lo, bool hi)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
        "{%0, %1, %2, %3};"
        : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
        : "d"(a_lo), "d"(a_hi), "d"(b));
#else
    double *half = c;
    if (lo)
        dmma(*reinterpret_cast<double(*)[2]>(half), a_lo, b);
    if (hi)
        dmma(*reinterpret_cast<double(*)[2]>(half + 2), a_hi, b);
#endif
}

/* The register path's G in 16 x 8 tiles (dmma_wide): tile (I, J), J >= 2I,
 * holds the 8 x 8 blocks (2I, J) (entries 0, 1) and (2I + 1, J) (entries
 * 2, 3), block (t1, t2) being G(c T + t1, c' T + t2), c, c' = 0..7. Its
 * tiles cover every block t1 <= t2 < T, in order of I, then J. */
__host__ __device__ constexpr int wide_tiles(int T) { return (T + 1) / 2 * (T - (T + 1) / 2 + 1); }
__host__ __device__ __forceinline__ constexpr int wide_tile(int T, int I, int J)
{
    return I * (T - I - 1) + J; /* (T) + (T - 2) + ... I terms, then J - 2I */
}
/* Block (t1, t2)'s entry e (0 or 1) of this lane, t1 <= t2. */
template <int N>
__device__ __forceinline__ double &gram_block(double (&acc)[N][4], int T, int t1, int t2, int e)
{
    return acc[wide_tile(T, t1 / 2, t2)][2 * (t1 % 2) + e];
}

__device__ __forceinline__ double warp_sum(double v)
{
#pragma unroll
    for (uint32_t d = 16; d > 0; d /= 2)
        v += __shfl_xor_sync(kFull, v, d);
    return v;
}

__device__ __forceinline__ double warp_max(double v)
{
#pragma unroll
    for (uint32_t d = 16; d > 0; d /= 2)
        v = fmax(v, __shfl_xor_sync(kFull, v, d));
    return v;
}

/* v[u] for a run-time u < N, without indexing registers at run time. */
template <int N>
__device__ __forceinline__ double pick(const double (&v)[N], uint32_t u)
{
    double r = v[0];
#pragma unroll
    for (int k = 1; k < N; ++k)
        if (u == (uint32_t)k)
            r = v[k];
    return r;
}

template <int N>
__device__ __forceinline__ void put(double (&v)[N], uint32_t u, double x)
{
#pragma unroll
    for (int k = 0; k < N; ++k)
        if (u == (uint32_t)k)
            v[k] = x;
}

/* cs[r] = prod over the other modes of their column scale (the true h_i is
 * the stored one times cs), self[r] = the mode's own. */
__device__ void load_scales(const rls_args &a, double *cs, float *self, uint32_t tid,
                            uint32_t nthreads)
{
    for (uint32_t r = tid; r < a.R; r += nthreads) {
        double c = 1.0;
        for (uint32_t o = 0; o < a.nother; ++o)
            c *= (double)a.scale[o][r];
        cs[r] = c;
        self[r] = a.self_scale[r];
    }
}

/* The row as it is (stored times the column scale: what get_factor reads),
 * a lane's entries i = lane + 32 u. */
template <int RPL>
__device__ void load_row(const rls_args &a, uint32_t row, const float *self, uint32_t lane,
                         double (&x)[RPL])
{
#pragma unroll
    for (int u = 0; u < RPL; ++u) {
        const uint32_t i = lane + 32u * u;
        x[u] = i < a.R ? (double)(a.F[(size_t)row * a.R + i] * self[i]) : 0.0;
    }
}

template <int RPL>
__device__ void store_row(const rls_args &a, uint32_t row, uint32_t lane, const double (&x)[RPL],
                          double &norm)
{
#pragma unroll
    for (int u = 0; u < RPL; ++u) {
        const uint32_t i = lane + 32u * u;
        if (i < a.R) {
            const float v = (float)x[u];
            a.F[(size_t)row * a.R + i] = v;
            norm += (double)v * (double)v;
        }
    }
}

/* 1 / d for a pivot d > 0: the hardware's approximation (from d's upper
 * word) and two Newton steps, each of which doubles its correct bits
 * (within an ulp or two of the quotient), in place of the IEEE division's
 * longer sequence and range checks on each factorisation step's chain;
 * outside [2^-1000, 2^1000], which a pivot of sane entries never is, the
 * division. Warp-uniform when d is. */
__device__ __forceinline__ double pivot_reciprocal(double d)
{
    if (!(d >= 0x1p-1000 && d <= 0x1p+1000))
        return 1.0 / d;
    double r;
    asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(r) : "d"(d));
    double e = fma(-d, r, 1.0);
    r = fma(r, e, r);
    e = fma(-d, r, 1.0);
    return fma(r, e, r);
}

/* Shared scratch of the blocked LDL^T: two publication buffers of 33
 * doubles (a column and the forward solve's entry), used by alternate
 * steps so that one __syncwarp a step keeps every read before the next
 * write to its buffer. */
constexpr uint32_t kPublish = 33;
constexpr uint32_t kScratch = 2 * kPublish;

/* solve_system's LDL^T and forward solve for R <= 8 T <= 32, a row a lane
 * (lane i: row i), in block columns of 8 (panels), right-looking:
 *   - a panel's 8 steps on its columns only, lane i's entries V(i, O ..
 *     O + 7) in registers: step K publishes its column c(., K) (read as
 *     broadcasts) and y_K, each lane i > K forms its multiplier
 *     f = c(i, K) / d_K, updates its later panel entries and its y
 *     (y_i -= f y_K: L y = b in the same pass), and writes c(i, K) to V;
 *   - then the trailing blocks below and right of the panel, V(r, s) -=
 *     sum over the panel's K of c(r, K) f(s, K), by fp64 mma (8 x 8 blocks,
 *     four columns of the panel a product), f(s, K) = c(s, K) / d_K:
 *     20 mma at R = 32, where updating each lane's row entry by entry took
 *     a broadcast load and an fma an entry. On success V's strict lower triangle holds c(i, k) (i > k; its
 * diagonal and upper triangle are left alone), y the lane's y_i and
 * inv_d its 1 / d_i (both 0 for lanes >= R). False on a breakdown (every
 * lane). */
template <int T>
__device__ bool factor_blocked(double *V, uint32_t R, uint32_t lane, double threshold,
                               double *scratch, double &y, double &inv_d)
{
    static_assert(T >= 1 && T <= 4, "a row a lane");
    constexpr uint32_t ld = panel_ld(T);
    const bool mine = lane < R;
    inv_d = 0.0;
#pragma unroll
    for (int p = 0; p < T; ++p) {
        const uint32_t O = 8u * p;
        if (O >= R) /* warp-uniform (the split rows' kernel runs T = 4 at any R) */
            break;
        double c[8];
#pragma unroll
        for (int j = 0; j < 8; ++j)
            c[j] = mine && O + j <= lane ? V[lane * ld + O + j] : 0.0;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const uint32_t K = O + k;
            if (K < R) { /* warp-uniform */
                double *pub = scratch + (k % 2) * kPublish;
                pub[lane] = c[k];
                if (lane == K)
                    pub[32] = y;
                __syncwarp();
                const double d = pub[K];
                if (!(d > threshold)) /* warp-uniform */
                    return false;
                const double inv = pivot_reciprocal(d);
                const double f = c[k] * inv;
                if (lane > K) {
                    y = fma(-f, pub[32], y);
                    if (mine)
                        V[lane * ld + K] = c[k];
                }
                if (lane == K)
                    inv_d = inv;
                /* Lanes at or above K update entries they never publish
                 * or store: no test a step. */
#pragma unroll
                for (int j = k + 1; j < 8; ++j)
                    c[j] = fma(-f, pub[O + j], c[j]);
            }
        }
        if (p + 1 < T && O + 8 < R) { /* warp-uniform */
            __syncwarp(); /* the panel's c(i, K) are in V */
            const uint32_t g = lane / 4, t = lane % 4;
            /* 1 / d_K of this lane's columns K = O + t and O + 4 + t of the
             * panel (0 past R, where the lanes' inv_d are 0). */
            const double iv[2] = {__shfl_sync(kFull, inv_d, O + t),
                                  __shfl_sync(kFull, inv_d, O + 4 + t)};
#pragma unroll
            for (int J = p + 1; J < T; ++J) {
#pragma unroll
                for (int I = J; I < T; ++I) {
                    if (8u * J < R && 8u * I < R) { /* warp-uniform */
                        const uint32_t r = 8u * I + g, s = 8u * J + 2u * t;
                        /* C(g, 2t + e) = V(r, s + e); in the diagonal
                         * block the entries above it are not the
                         * matrix's (loaded, never stored). */
                        double acc[2] = {r < R && s < R ? V[r * ld + s] : 0.0,
                                         r < R && s + 1 < R ? V[r * ld + s + 1] : 0.0};
                        const uint32_t n = 8u * J + g;
#pragma unroll
                        for (int kk = 0; kk < 2; ++kk) {
                            const uint32_t K = O + 4u * kk + t;
                            /* A(g, t) = -c(r, K), B(t, g) = f(n, K). */
                            const double av = r < R ? -V[r * ld + K] : 0.0;
                            const double bv = n < R ? V[n * ld + K] * iv[kk] : 0.0;
                            dmma(acc, av, bv);
                        }
#pragma unroll
                        for (int e = 0; e < 2; ++e)
                            if (r < R && s + e < R && (I > J || r >= s + e))
                                V[r * ld + s + e] = acc[e];
                    }
                }
            }
        }
        __syncwarp(); /* the next panel reads what this one wrote */
    }
    return true;
}

/* One warp solves a row's system: V (shared memory, its lower triangle as
 * `lay` places it: G_j + ridge I) and bs (shared, b_j). x holds the row as
 * it was (lane's entries i = lane + 32 u) and gets the new row; false when
 * the factorisation breaks down (x untouched). V is overwritten when
 * nonneg is 0. Every lane returns the same. N > 0 (R <= N <= 32, a
 * multiple of 8, RPL 1, the full layout of stride panel_ld(N / 8)): the
 * blocked factorisation in
 * registers (factor_blocked, `scratch` its kScratch doubles of shared
 * memory), then L^T a = D^-1 y; 0: on V in shared memory. */
template <int RPL, class L, int N = 0>
__device__ bool solve_system(double *V, const L lay, const double *bs, uint32_t R, int nonneg,
                             uint32_t passes, uint32_t lane, double (&x)[RPL],
                             double *scratch = nullptr)
{
    double b[RPL];
#pragma unroll
    for (int u = 0; u < RPL; ++u) {
        const uint32_t i = lane + 32u * u;
        b[u] = i < R ? bs[i] : 0.0;
    }
    if (nonneg) {
        /* Coordinate descent from the row as it was, r = 0 .. R-1 in order
         * (the ABI's formula); every lane reduces the same sum. */
        for (uint32_t p = 0; p < passes; ++p)
            for (uint32_t r = 0; r < R; ++r) {
                double part = 0.0;
#pragma unroll
                for (int u = 0; u < RPL; ++u) {
                    const uint32_t c = lane + 32u * u;
                    if (c < R)
                        part += (c <= r ? V[lay(r, c)] : V[lay(c, r)]) * x[u];
                }
                const double s = warp_sum(part);
                if (lane == r % 32) {
                    const uint32_t u = r / 32;
                    const double d = V[lay(r, r)];
                    const double xr = pick(x, u);
                    put(x, u, d != 0.0 ? fmax(0.0, xr + (pick(b, u) - s) / d) : 0.0);
                }
            }
        return true;
    }
    /* LDL^T, right-looking on the lower triangle, lane i updating its rows:
     * step k leaves column k as it was (c(i, k)), its pivot d_k = V(k, k)
     * the square of Cholesky's L(k, k), so the test is the ABI's. */
    double largest = 0.0;
#pragma unroll
    for (int u = 0; u < RPL; ++u) {
        const uint32_t i = lane + 32u * u;
        if (i < R)
            largest = fmax(largest, fabs(V[lay(i, i)]));
    }
    largest = warp_max(largest);
    const double threshold = largest * R * DBL_EPSILON * TH_SOLVE_BREAKDOWN_FACTOR;
    if constexpr (N > 0) {
        static_assert(RPL == 1 && N % 8 == 0, "a row a lane, in panels of 8");
        double y = b[0], inv_d;
        constexpr uint32_t ld = panel_ld(N / 8); /* the caller's lay.ld */
        if (!factor_blocked<N / 8>(V, R, lane, threshold, scratch, y, inv_d))
            return false;
        /* a_i = y_i / d_i - sum_{k > i} f(k, i) a_k, f(k, i) = c(k, i) / d_i:
         * the loads and products off the chain of broadcasts. */
        double z = y * inv_d;
#pragma unroll
        for (int k = N - 1; k > 0; --k) {
            if ((uint32_t)k < R) { /* warp-uniform */
                const double ak = __shfl_sync(kFull, z, k);
                if (lane < (uint32_t)k)
                    z = fma(-V[k * ld + lane] * inv_d, ak, z);
            }
        }
        x[0] = z;
        return true;
    } else {
        for (uint32_t k = 0; k < R; ++k) {
            const double d = V[lay(k, k)];
            if (!(d > threshold))
                return false;
            const double inv = 1.0 / d;
#pragma unroll
            for (int u = 0; u < RPL; ++u) {
                const uint32_t i = lane + 32u * u;
                if (i > k && i < R) {
                    const double f = V[lay(i, k)] * inv;
                    /* Four entries at a time, their loads before their stores:
                     * one at a time, each load waited for the previous store
                     * (the compiler cannot tell they do not alias), a chain of
                     * shared-memory latencies that made the factorisation a
                     * third of a short row's time. The same operations. */
                    uint32_t j = k + 1;
                    for (; j + 3 <= i; j += 4) {
                        const double c0 = V[lay(j, k)], c1 = V[lay(j + 1, k)];
                        const double c2 = V[lay(j + 2, k)], c3 = V[lay(j + 3, k)];
                        const double v0 = V[lay(i, j)], v1 = V[lay(i, j + 1)];
                        const double v2 = V[lay(i, j + 2)], v3 = V[lay(i, j + 3)];
                        V[lay(i, j)] = v0 - f * c0;
                        V[lay(i, j + 1)] = v1 - f * c1;
                        V[lay(i, j + 2)] = v2 - f * c2;
                        V[lay(i, j + 3)] = v3 - f * c3;
                    }
                    for (; j <= i; ++j)
                        V[lay(i, j)] -= f * V[lay(j, k)];
                }
            }
            __syncwarp();
        }
        /* L y = b with L(i, k) = c(i, k) / d_k; then z = y / d; L^T a = z.
         * The pivots' reciprocals first, every lane its own at once: a
         * division at each step of the forward loop, on its chain, made the
         * loop the slowest part of a short row's solve. */
        double inv_d[RPL];
#pragma unroll
        for (int u = 0; u < RPL; ++u) {
            const uint32_t i = lane + 32u * u;
            inv_d[u] = i < R ? 1.0 / V[lay(i, i)] : 0.0;
        }
        for (uint32_t k = 0; k < R; ++k) {
            const double g =
                __shfl_sync(kFull, pick(b, k / 32) * pick(inv_d, k / 32), k % 32);
#pragma unroll
            for (int u = 0; u < RPL; ++u) {
                const uint32_t i = lane + 32u * u;
                if (i > k && i < R)
                    b[u] -= V[lay(i, k)] * g;
            }
        }
#pragma unroll
        for (int u = 0; u < RPL; ++u)
            b[u] *= inv_d[u];
        for (uint32_t k = R; k-- > 0;) {
            const double ak = __shfl_sync(kFull, pick(b, k / 32), k % 32);
#pragma unroll
            for (int u = 0; u < RPL; ++u) {
                const uint32_t i = lane + 32u * u;
                if (i < k)
                    b[u] -= V[lay(k, i)] * inv_d[u] * ak;
            }
        }
#pragma unroll
        for (int u = 0; u < RPL; ++u)
            x[u] = b[u];
        return true;
    }
}

/* Task t of the queue: a chunk (t < nchunks) or a whole row. */
__device__ __forceinline__ void task_of(const rls_args &a, uint32_t t, uint32_t &row,
                                        uint32_t &begin, uint32_t &count, uint32_t &slot)
{
    if (t < a.nchunks) {
        const thg_rls_chunk c = a.chunks[t];
        row = c.row;
        begin = c.begin;
        count = c.count;
        slot = c.slot;
    } else {
        const thg_rls_row r = a.rows[a.nsplit + (t - a.nchunks)];
        row = r.row;
        begin = r.begin;
        count = r.count;
        slot = kNoSlot;
    }
}

/* How many tasks one grab takes: several whole rows when the row at the
 * queue's head (the longest left: the rows come longest first) is tiny. */
__device__ uint32_t grab_size(const rls_args &a)
{
    const unsigned long long head = *(volatile const unsigned long long *)&a.ctr->queue;
    if (head < a.nchunks || head >= a.ntasks)
        return 1;
    const uint32_t count = a.rows[a.nsplit + ((uint32_t)head - a.nchunks)].count;
    if (count >= kSmallRow)
        return 1;
    const uint32_t k = kSmallRow / (count > 0 ? count : 1u);
    return k < kMaxGrab ? k : kMaxGrab;
}

/* T floats of a factor row for lane column group c8: columns c8*T + t. */
template <int T>
__device__ __forceinline__ void load_cols(const float *row, uint32_t c8, uint32_t R, bool exact,
                                          float (&v)[T])
{
    const uint32_t c0 = c8 * T;
    if (exact) {
        /* R == 8T: whole vectors, aligned (rows of R floats, c0 a multiple of T). */
        if constexpr (T == 4) {
            const float4 f = __ldg((const float4 *)(row + c0));
            v[0] = f.x;
            v[1] = f.y;
            v[2] = f.z;
            v[3] = f.w;
        } else if constexpr (T == 2) {
            const float2 f = __ldg((const float2 *)(row + c0));
            v[0] = f.x;
            v[1] = f.y;
        } else {
#pragma unroll
            for (int t = 0; t < T; ++t)
                v[t] = __ldg(row + c0 + t);
        }
    } else {
#pragma unroll
        for (int t = 0; t < T; ++t)
            v[t] = c0 + t < R ? __ldg(row + c0 + t) : 0.0f;
    }
}

/* Lane l's share of batch `batch` of a row's nonzeros [begin, begin +
 * count): nonzero batch + l's indices of the other modes (the first only,
 * for a run-time count of modes) and its value (0 past the row's end,
 * where the indices repeat the row's first nonzero's of the batch). */
template <int NO>
__device__ __forceinline__ void batch_indices(const rls_args &a, uint32_t begin, uint32_t count,
                                              uint32_t batch, uint32_t lane,
                                              uint32_t (&ix)[NO > 0 ? NO : 1], float &xl)
{
    const uint32_t n = count - batch < 32u ? count - batch : 32u;
    const uint32_t kl = begin + batch + (lane < n ? lane : 0u);
    ix[0] = __ldg(a.idx[0] + kl);
#pragma unroll
    for (int o = 1; o < (NO > 0 ? NO : 1); ++o)
        ix[o] = __ldg(a.idx[o] + kl);
    xl = lane < n ? __ldg(a.vals + kl) : 0.0f;
}

/* The register path's sums over nonzeros [begin, begin + count) of one
 * row: acc the 16 x 8 tiles of G (wide_tile; block (t1, t2) by
 * gram_block), bacc[t] lane (q, c8)'s part of b(c8*T + t), and *xx += this
 * lane's part of x^T x (the values it loads for the batches' shuffles).
 * NO: the other modes' count, 0 for a run-time count. */
template <int T, int NO>
__device__ __forceinline__ void accumulate(const rls_args &a, uint32_t begin, uint32_t count,
                                           uint32_t q, uint32_t c8, bool exact,
                                           double (&acc)[wide_tiles(T)][4], double (&bacc)[T],
                                           volatile double *xx)
{
#pragma unroll
    for (int p = 0; p < wide_tiles(T); ++p)
        acc[p][0] = acc[p][1] = acc[p][2] = acc[p][3] = 0.0;
#pragma unroll
    for (int t = 0; t < T; ++t)
        bacc[t] = 0.0;
    const uint32_t R = a.R;
    const uint32_t nother = NO > 0 ? (uint32_t)NO : a.nother;
    const uint32_t lane = c8 * 4u + q;
    /* The nonzeros in batches of 32: lane l loads nonzero l's indices and
     * value in one coalesced load a mode, and each step of four nonzeros
     * takes them by shuffle, so a step's gathers wait for no index load
     * of their own (the load chain was index, then row, per step). At
     * rank 32 (T = 4: four blocks an SM) the next batch's are loaded while
     * this one's steps run; the smaller ranks' kernels (more blocks an SM,
     * fewer registers a thread) would spill for them. */
    constexpr bool ahead = T == 4;
    uint32_t ix_next[NO > 0 ? NO : 1];
    float xl_next = 0.0f;
    if (ahead)
        batch_indices<NO>(a, begin, count, 0, lane, ix_next, xl_next);
    for (uint32_t batch = 0; batch < count; batch += 32) {
        const uint32_t n = count - batch < 32u ? count - batch : 32u; /* warp-uniform */
        uint32_t ix[NO > 0 ? NO : 1];
        float xl;
        if (ahead) {
#pragma unroll
            for (int o = 0; o < (NO > 0 ? NO : 1); ++o)
                ix[o] = ix_next[o];
            xl = xl_next;
            if (batch + 32 < count) /* warp-uniform */
                batch_indices<NO>(a, begin, count, batch + 32, lane, ix_next, xl_next);
        } else {
            batch_indices<NO>(a, begin, count, batch, lane, ix, xl);
        }
        *xx = fma((double)xl, (double)xl, *xx); /* xl is 0 past the row's end */
#pragma unroll(NO > 0 ? 4 : 2)
        for (uint32_t s = 0; s < n; s += 4) {
            /* Lanes past the row's end take a valid nonzero's indices and
             * add zeros: no branch around the mma. */
            const uint32_t src = s + q; /* < 32: s <= 28 */
            const bool valid = src < n;
            /* h: the product of the other modes' fp32 entries in fp32,
             * then in double for the sums. One conversion an entry instead
             * of one a mode (they issue at a quarter of the fp32 rate),
             * and h's relative error stays within two fp32 roundings: the
             * order of the fp32 row the solve writes, which the row's
             * backward error already carries. */
            float hf[T];
            {
                const uint32_t i0 = __shfl_sync(kFull, ix[0], src);
                load_cols<T>(a.fac[0] + (size_t)i0 * R, c8, R, exact, hf);
            }
            if (NO > 0) {
#pragma unroll
                for (int o = 1; o < (NO > 0 ? NO : 1); ++o) {
                    float v[T];
                    const uint32_t io = __shfl_sync(kFull, ix[o], src);
                    load_cols<T>(a.fac[o] + (size_t)io * R, c8, R, exact, v);
#pragma unroll
                    for (int t = 0; t < T; ++t)
                        hf[t] *= v[t];
                }
            } else {
                /* A run-time count of modes: the other modes' indices
                 * loaded per step (no register array of run-time length). */
                const uint32_t k = begin + batch + (valid ? src : 0u);
                for (uint32_t o = 1; o < nother; ++o) {
                    float v[T];
                    load_cols<T>(a.fac[o] + (size_t)__ldg(a.idx[o] + k) * R, c8, R, exact, v);
#pragma unroll
                    for (int t = 0; t < T; ++t)
                        hf[t] *= v[t];
                }
            }
            const double x = (double)__shfl_sync(kFull, xl, src);
            double h[T];
#pragma unroll
            for (int t = 0; t < T; ++t) {
                h[t] = (double)(valid ? hf[t] : 0.0f);
                bacc[t] = fma(x, h[t], bacc[t]);
            }
            /* Tile (I, J): A's halves are blocks 2I and 2I + 1 (zero past
             * T), B block J; the half 2I + 1 > J is a block below the
             * diagonal, made and never read. */
#pragma unroll
            for (int I = 0; 2 * I < T; ++I)
#pragma unroll
                for (int J = 2 * I; J < T; ++J)
                    dmma_wide(acc[wide_tile(T, I, J)], h[2 * I], 2 * I + 1 < T ? h[2 * I + 1] : 0.0,
                              h[J], true, 2 * I + 1 < T && 2 * I + 1 <= J);
        }
    }
    /* b(c8*T + t) in every lane of column group c8. */
#pragma unroll
    for (int t = 0; t < T; ++t) {
        bacc[t] += __shfl_xor_sync(kFull, bacc[t], 1);
        bacc[t] += __shfl_xor_sync(kFull, bacc[t], 2);
    }
}

/* v, opaque to the compiler: what is computed from it stays where it is
 * written rather than being hoisted out of the task loop, where it would
 * hold registers through the Gram loop. */
__device__ __forceinline__ uint32_t opaque(uint32_t v)
{
    asm volatile("" : "+r"(v));
    return v;
}

/* This thread's part of x^T x over nonzeros [begin, begin + count), for
 * the block path: a strided, coalesced pass over the values before its
 * batches (which read them again, from cache). */
__device__ __forceinline__ double values_squared(const rls_args &a, uint32_t begin,
                                                 uint32_t count, uint32_t tid, uint32_t nthreads)
{
    double xx = 0.0;
    for (uint32_t k = tid; k < count; k += nthreads) {
        const double x = (double)__ldg(a.vals + begin + k);
        xx = fma(x, x, xx);
    }
    return xx;
}

/* Per warp of the register path: V (R x panel_ld(T)), b (R), the row
 * (R) and the factorisation's scratch (kScratch; the lanes' x^T x during
 * the Gram loop), in doubles. */
__host__ __device__ inline uint32_t warp_stride(uint32_t R)
{
    return R * panel_ld((R + 7) / 8) + 2 * R + kScratch;
}

/* The register path's kernel: one warp per task (ranks up to 32). Shared
 * memory: [cs: R doubles | self: R floats in R doubles | per warp: V (R x
 * panel_ld(T): the lower triangle G_j + ridge I for the solve), b (R), the
 * row as held times the scales (R, for the residual) and the solve's
 * scratch (kScratch)]. */
template <int T, int NO>
__global__ void __launch_bounds__(kWarpKernelThreads, warp_min_blocks(T, NO))
    rls_warp_kernel(const rls_args a)
{
    extern __shared__ double smem[];
    const uint32_t R = a.R;
    constexpr uint32_t ld = panel_ld(T);
    double *s_cs = smem;
    float *s_self = (float *)(smem + R);
    const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    double *V = smem + 2 * (size_t)R + (size_t)warp * warp_stride(R);
    double *bs = V + (size_t)R * ld;
    double *scratch = bs + 2 * R;
    /* Each warp's sums (norm, residual) and singular count: in shared
     * memory, as the Gram loop has no register to spare for them. */
    __shared__ double s_norm[kWarpKernelWarps], s_resid[kWarpKernelWarps];
    __shared__ unsigned long long s_singular[kWarpKernelWarps];
    if (lane == 0) {
        s_norm[warp] = s_resid[warp] = 0.0;
        s_singular[warp] = 0;
    }
    load_scales(a, s_cs, s_self, threadIdx.x, blockDim.x);
    __syncthreads();
    const uint32_t q = lane % 4, c8 = lane / 4;
    const bool exact = R == 8u * T;
    double acc[wide_tiles(T)][4], bacc[T];
    uint32_t t = 0, tend = 0;
    for (;;) {
        if (t == tend) {
            unsigned long long start = 0;
            uint32_t take = 1;
            if (lane == 0) {
                take = grab_size(a);
                start = atomicAdd(&a.ctr->queue, (unsigned long long)take);
            }
            start = __shfl_sync(kFull, start, 0);
            take = __shfl_sync(kFull, take, 0);
            if (start >= a.ntasks)
                break;
            t = (uint32_t)start;
            tend = start + take < a.ntasks ? (uint32_t)(start + take) : a.ntasks;
        }
        uint32_t row, begin, count, slot;
        task_of(a, t, row, begin, count, slot);
        ++t;
        /* x^T x in the Gram loop, each lane's part in its scratch slot
         * (no register to spare there), then into the split row's slot or
         * the warp's residual sum. */
        __syncwarp(); /* the previous row's solve is done with the scratch */
        scratch[lane] = 0.0;
        accumulate<T, NO>(a, begin, count, q, c8, exact, acc, bacc, scratch + lane);
        {
            const double xx = warp_sum(scratch[lane]);
            if (lane == 0) {
                if (slot != kNoSlot)
                    atomicAdd(a.split + (size_t)slot * a.slot_stride + R * (R + 1) / 2 + R, xx);
                else
                    s_resid[warp] += xx;
            }
        }
        /* Tile (t1, t2)'s entry e of this lane is G(r, s), r = c8*T + t1,
         * s = (2q + e)*T + t2. Each unordered pair {r, s} appears once in
         * the tiles t1 < t2 and in both orders in the tiles t1 == t2, where
         * only r >= s is taken: every lower entry exactly once. */
        if (slot != kNoSlot) {
            double *dst = a.split + (size_t)slot * a.slot_stride;
#pragma unroll
            for (int t2 = 0; t2 < T; ++t2)
#pragma unroll
                for (int t1 = 0; t1 <= t2; ++t1)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const uint32_t r = c8 * T + t1, s = (2 * q + e) * T + t2;
                        if (r < R && s < R && (t1 != t2 || r >= s))
                            atomicAdd(dst + (r >= s ? lower_index(r, s) : lower_index(s, r)),
                                      gram_block(acc, T, t1, t2, e));
                    }
            if (q == 0)
#pragma unroll
                for (int tt = 0; tt < T; ++tt) {
                    const uint32_t r = c8 * T + tt;
                    if (r < R)
                        atomicAdd(dst + R * (R + 1) / 2 + r, bacc[tt]);
                }
            continue;
        }
        __syncwarp(); /* the previous row's solve is done with V */
        {
            /* G(r, s) times the column scales, into the lower triangle: for
             * this lane's entries e the side is the same in every tile
             * (r = c8 T + t1 against s = (2q + e) T + t2 with t1 <= t2 < T:
             * r > s exactly when c8 > 2q + e, or in a diagonal tile also
             * r == s), so each store has a constant offset from one of two
             * bases; the scales are loaded once. */
            double csr[T], css[2][T];
#pragma unroll
            for (int t = 0; t < T; ++t) {
                csr[t] = c8 * T + t < R ? s_cs[c8 * T + t] : 0.0;
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    css[e][t] = (2 * q + e) * T + t < R ? s_cs[(2 * q + e) * T + t] : 0.0;
            }
            double *const at_rs = V + c8 * T * ld + 2 * q * T; /* (r, s) */
            double *const at_sr = V + 2 * q * T * ld + c8 * T; /* (s, r) */
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const bool below = c8 > 2 * q + e, diagonal = c8 == 2 * q + e;
                const double ridge = diagonal ? a.ridge : 0.0;
#pragma unroll
                for (int t2 = 0; t2 < T; ++t2)
#pragma unroll
                    for (int t1 = 0; t1 <= t2; ++t1) {
                        /* Past R the scales are 0: zeros, stored where V
                         * has room (rows < R) or not at all. */
                        const double v = gram_block(acc, T, t1, t2, e) * csr[t1] * css[e][t2];
                        const uint32_t r = c8 * T + t1, s = (2 * q + e) * T + t2;
                        if (below || (t1 == t2 && diagonal)) {
                            if (r < R)
                                at_rs[t1 * ld + e * T + t2] = t1 == t2 ? v + ridge : v;
                        } else if (t1 != t2 && s < R) {
                            at_sr[(e * T + t2) * ld + t1] = v;
                        }
                    }
            }
        }
        if (q == 0)
#pragma unroll
            for (int tt = 0; tt < T; ++tt) {
                const uint32_t r = c8 * T + tt;
                if (r < R)
                    bs[r] = bacc[tt] * s_cs[r];
            }
        __syncwarp();
        /* The row as it was: where coordinate descent starts, and what
         * stays where the factorisation breaks down (loaded after it then,
         * so that it holds no register through the factorisation). */
        double x[1] = {0.0};
        if (a.nonneg)
            load_row<1>(a, row, s_self, lane, x);
        /* Fewer nonzeros than R at ridge 0: G is exactly singular, and
         * rounding must not decide (plugin.h). Warp-uniform. */
        const bool short_row = a.ridge == 0.0 && !a.nonneg && count < R;
        const bool singular =
            short_row || !solve_system<1, full_layout, 8 * T>(V, full_layout{ld}, bs, R, a.nonneg,
                                                              a.passes, lane, x, scratch);
        if (singular)
            load_row<1>(a, row, s_self, lane, x);
        double norm = 0.0;
        store_row<1>(a, row, lane, x, norm);
        norm = warp_sum(norm);
        /* The row's x^T x - 2 a^T b + a^T G a (a as held; b from bs, read
         * by the solve only), a^T G a from the tiles, still in registers
         * (unscaled: against u = a times the column scales), weighted as
         * they lie: 2 in the tiles t1 < t2, which hold each off-diagonal
         * pair once, 1 in the diagonal tiles, which hold their pairs in
         * both orders. */
        {
            const uint32_t i = opaque(lane);
            double *u = bs + R;
            const double ai = i < R ? (double)(float)x[0] : 0.0;
            if (i < R)
                u[i] = ai * s_cs[i];
            __syncwarp();
            double part = i < R ? -2.0 * ai * bs[i] : 0.0;
            const uint32_t ci = opaque(c8), qi = opaque(q);
            double ur[T], us[2][T];
#pragma unroll
            for (int t = 0; t < T; ++t) {
                ur[t] = ci * T + t < R ? u[ci * T + t] : 0.0;
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    us[e][t] = (2 * qi + e) * T + t < R ? u[(2 * qi + e) * T + t] : 0.0;
            }
#pragma unroll
            for (int t2 = 0; t2 < T; ++t2)
#pragma unroll
                for (int t1 = 0; t1 <= t2; ++t1)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        part = fma((t1 < t2 ? 2.0 : 1.0) * ur[t1] * us[e][t2],
                                   gram_block(acc, T, t1, t2, e), part);
            const double rs = warp_sum(part);
            if (lane == 0) {
                s_resid[warp] += rs;
                s_norm[warp] += norm;
                s_singular[warp] += singular ? 1u : 0u;
            }
        }
    }
    if (lane == 0) {
        if (s_norm[warp] != 0.0)
            atomicAdd(&a.ctr->norm, s_norm[warp]);
        if (s_resid[warp] != 0.0)
            atomicAdd(&a.ctr->residual, s_resid[warp]);
        if (s_singular[warp])
            atomicAdd(&a.ctr->singular, s_singular[warp]);
    }
}

/* Where warp 0 keeps its tiles in H during its solve: after the row's u
 * (at most THG_MAX_RANK doubles); 2 x kPairsPerWarp x 32 doubles, within H
 * (kBatch x block_ldh(R) >= 32 x 44 doubles for ranks above 32). */
constexpr uint32_t kStashOffset = THG_MAX_RANK;
static_assert(kStashOffset + 2 * kPairsPerWarp * 32 <= kBatch * (8 * 5 + 4),
              "warp 0's stash fits in H at the smallest rank of the block path");

/* The block path's shared memory in doubles: [cs | self | x: kBatch | H:
 * kBatch x (Rpad + 4) | V: packed lower | b: R | the warps' residual sums: 16]. H's stride is 4 mod 8
 * doubles, so the fragment loads (4 rows x 8 columns) are conflict-free. */
__host__ __device__ inline uint32_t block_ldh(uint32_t R) { return 8u * ((R + 7) / 8) + 4u; }

size_t block_smem_bytes(uint32_t R)
{
    return sizeof(double) * (2 * (size_t)R + kBatch + (size_t)kBatch * block_ldh(R) +
                             lower_index(R, 0) + R + kBlockWarps);
}

/* The block path's kernel: one 512-thread block per task (ranks 33 to
 * 128). Warp w adds the tiles p = w, w + 16, ... of the upper triangle
 * (p = t2 (t2 + 1) / 2 + t1), fragments from the staged H; warp 0 solves. */
__global__ void __launch_bounds__(kBlockThreads, 1) rls_block_kernel(const rls_args a)
{
    extern __shared__ double smem[];
    __shared__ uint32_t s_task;
    const uint32_t R = a.R, T = (R + 7) / 8, Rpad = 8 * T, ldh = block_ldh(R);
    const uint32_t P = T * (T + 1) / 2, RR2 = lower_index(R, 0);
    double *s_cs = smem;
    float *s_self = (float *)(smem + R);
    double *sX = smem + 2 * (size_t)R;
    double *sH = sX + kBatch;
    double *V = sH + (size_t)kBatch * ldh;
    double *bs = V + RR2;
    double *s_resid = bs + R; /* each warp's residual sum (a register it cannot spare) */
    const uint32_t tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    if (lane == 0)
        s_resid[warp] = 0.0;
    const uint32_t q = lane % 4, c8 = lane / 4;
    /* This warp's tiles: t1 | t2 << 8. */
    uint32_t pairs[kPairsPerWarp];
#pragma unroll
    for (uint32_t kk = 0; kk < kPairsPerWarp; ++kk) {
        const uint32_t p = warp + kBlockWarps * kk;
        uint32_t t2 = 0;
        while ((t2 + 1) * (t2 + 2) / 2 <= p)
            ++t2;
        pairs[kk] = p < P ? (p - t2 * (t2 + 1) / 2) | (t2 << 8) : 0u;
    }
    const uint32_t my_pairs = warp < P ? (P - warp + kBlockWarps - 1) / kBlockWarps : 0u;
    load_scales(a, s_cs, s_self, tid, blockDim.x);
    double acc[kPairsPerWarp][2];
    double norm = 0.0;
    unsigned long long singular = 0;
    for (;;) {
        __syncthreads(); /* also: the previous task's solve and residual are done */
        if (tid == 0) {
            const unsigned long long t = atomicAdd(&a.ctr->queue, 1ull);
            s_task = t < a.ntasks ? (uint32_t)t : a.ntasks;
        }
        __syncthreads();
        const uint32_t t = s_task;
        if (t >= a.ntasks)
            break;
        uint32_t row, begin, count, slot;
        task_of(a, t, row, begin, count, slot);
        /* x^T x first, into the slot or the warps' residual sums. */
        {
            const double xx = warp_sum(values_squared(a, begin, count, tid, blockDim.x));
            if (lane == 0 && xx != 0.0) {
                if (slot != kNoSlot)
                    atomicAdd(a.split + (size_t)slot * a.slot_stride + RR2 + R, xx);
                else
                    s_resid[warp] += xx;
            }
        }
#pragma unroll
        for (uint32_t kk = 0; kk < kPairsPerWarp; ++kk)
            acc[kk][0] = acc[kk][1] = 0.0;
        double bpart = 0.0;
        for (uint32_t base = 0; base < count; base += kBatch) {
            const uint32_t nb = count - base < kBatch ? count - base : kBatch;
            /* H(j, c) = h of nonzero base + j at column c (zero past the
             * batch or the rank). */
            for (uint32_t e = tid; e < kBatch * Rpad; e += blockDim.x) {
                const uint32_t j = e / Rpad, c = e - j * Rpad;
                double p = 0.0;
                if (j < nb && c < R) {
                    const uint32_t k = begin + base + j;
                    float pf = a.fac[0][(size_t)a.idx[0][k] * R + c];
                    for (uint32_t o = 1; o < a.nother; ++o)
                        pf *= a.fac[o][(size_t)a.idx[o][k] * R + c];
                    p = (double)pf; /* as the register path's h */
                }
                sH[(size_t)j * ldh + c] = p;
            }
            for (uint32_t j = tid; j < kBatch; j += blockDim.x)
                sX[j] = j < nb ? (double)a.vals[begin + base + j] : 0.0;
            __syncthreads();
            if (tid < R)
                for (uint32_t j = 0; j < nb; ++j)
                    bpart = fma(sX[j], sH[(size_t)j * ldh + tid], bpart);
            /* Four nonzeros a step; this warp's tiles kk < my_pairs. */
            const uint32_t steps = (nb + 3) / 4;
            for (uint32_t s = 0; s < steps; ++s) {
                const double *hs = sH + (size_t)(4 * s + q) * ldh + c8;
#pragma unroll
                for (uint32_t kk = 0; kk < kPairsPerWarp; ++kk)
                    if (kk < my_pairs) /* uniform in the warp */
                        dmma(acc[kk], hs[8 * (pairs[kk] & 0xffu)], hs[8 * (pairs[kk] >> 8)]);
            }
            __syncthreads(); /* H is read; the next batch may overwrite it */
        }
        /* Tile (t1, t2)'s entry e of this lane is G(8 t1 + c8, 8 t2 + 2q + e):
         * the tiles t1 < t2 hold upper entries, the diagonal tiles both. */
        if (slot != kNoSlot) {
            double *dst = a.split + (size_t)slot * a.slot_stride;
#pragma unroll
            for (uint32_t kk = 0; kk < kPairsPerWarp; ++kk) {
                if (kk >= my_pairs)
                    continue;
                const uint32_t t1 = pairs[kk] & 0xffu, t2 = pairs[kk] >> 8;
#pragma unroll
                for (uint32_t e = 0; e < 2; ++e) {
                    const uint32_t r = 8 * t1 + c8, s = 8 * t2 + 2 * q + e;
                    if (r < R && s < R && (t1 != t2 || r >= s))
                        atomicAdd(dst + (r >= s ? lower_index(r, s) : lower_index(s, r)),
                                  acc[kk][e]);
                }
            }
            if (tid < R)
                atomicAdd(dst + RR2 + tid, bpart);
            continue;
        }
#pragma unroll
        for (uint32_t kk = 0; kk < kPairsPerWarp; ++kk) {
            if (kk >= my_pairs)
                continue;
            const uint32_t t1 = pairs[kk] & 0xffu, t2 = pairs[kk] >> 8;
#pragma unroll
            for (uint32_t e = 0; e < 2; ++e) {
                const uint32_t r = 8 * t1 + c8, s = 8 * t2 + 2 * q + e;
                if (r < R && s < R && (t1 != t2 || r >= s)) {
                    double v = acc[kk][e] * s_cs[r] * s_cs[s];
                    if (r == s)
                        v += a.ridge;
                    V[r >= s ? lower_index(r, s) : lower_index(s, r)] = v;
                }
            }
        }
        if (tid < R)
            bs[tid] = bpart * s_cs[tid];
        __syncthreads();
        if (warp == 0) {
            /* Warp 0's tiles wait out its solve in sH (free since the last
             * batch; after the row's u), not in registers. */
            double *stash = sH + kStashOffset + opaque(lane);
#pragma unroll
            for (uint32_t kk = 0; kk < kPairsPerWarp; ++kk) {
                stash[32 * (2 * kk)] = acc[kk][0];
                stash[32 * (2 * kk + 1)] = acc[kk][1];
            }
            double x[4];
            load_row<4>(a, row, s_self, lane, x);
            const bool short_row = a.ridge == 0.0 && !a.nonneg && count < R; /* as above */
            if (short_row ||
                !solve_system<4>(V, packed_layout{}, bs, R, a.nonneg, a.passes, lane, x))
                ++singular;
            store_row<4>(a, row, lane, x, norm);
            /* u (the row as held, times the column scales) into sH, free
             * since the last batch. */
            const uint32_t ln = opaque(lane);
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const uint32_t i = ln + 32u * u;
                if (i < R)
                    sH[i] = (double)(float)x[u] * s_cs[i];
            }
#pragma unroll
            for (uint32_t kk = 0; kk < kPairsPerWarp; ++kk) {
                acc[kk][0] = stash[32 * (2 * kk)];
                acc[kk][1] = stash[32 * (2 * kk + 1)];
            }
        }
        __syncthreads();
        /* The row's residual beside its x^T x: -2 u^T b (the threads
         * tid < R) and u^T G u from every warp's tiles (weight 2 off the
         * diagonal tiles, which hold upper entries only; 1 in the diagonal
         * tiles, which hold both orders of their pairs). */
        const uint32_t ti = opaque(tid), ci = opaque(c8), qi = opaque(q);
        double part = ti < R ? -2.0 * sH[ti] * bpart : 0.0;
#pragma unroll
        for (uint32_t kk = 0; kk < kPairsPerWarp; ++kk) {
            if (kk >= my_pairs)
                continue;
            const uint32_t pk = opaque(pairs[kk]);
            const uint32_t t1 = pk & 0xffu, t2 = pk >> 8;
            const uint32_t r = 8 * t1 + ci;
#pragma unroll
            for (uint32_t e = 0; e < 2; ++e) {
                const uint32_t s = 8 * t2 + 2 * qi + e;
                if (r < R && s < R)
                    part = fma((t1 < t2 ? 2.0 : 1.0) * sH[r] * sH[s], acc[kk][e], part);
            }
        }
        part = warp_sum(part);
        if (lane == 0)
            s_resid[warp] += part;
    }
    if (lane == 0 && s_resid[warp] != 0.0)
        atomicAdd(&a.ctr->residual, s_resid[warp]);
    if (warp == 0) {
        norm = warp_sum(norm);
        if (lane == 0) {
            if (norm != 0.0)
                atomicAdd(&a.ctr->norm, norm);
            if (singular)
                atomicAdd(&a.ctr->singular, singular);
        }
    }
}

/* The split rows, one warp (block) per slot: the slot's G (packed lower)
 * and b, scaled, with the ridge, into `lay`'s layout, then solved.
 * Shared memory: [cs | self | b | V], and for R <= 32 [column (32) | the
 * slot (G, b, x^T x)]: copied there by coalesced loads first, since the
 * loops below read it entry by entry in an order the warp cannot
 * coalesce, each read waiting on L2. */
template <int RPL, class L>
__global__ void __launch_bounds__(32) rls_split_kernel(const rls_args a, const L lay)
{
    extern __shared__ double smem[];
    const uint32_t R = a.R, RR2 = lower_index(R, 0), lane = threadIdx.x;
    double *s_cs = smem;
    float *s_self = (float *)(smem + R);
    double *bs = smem + 2 * (size_t)R;
    double *V = bs + R;
    const uint32_t slot = blockIdx.x;
    const uint32_t row = a.rows[slot].row;
    load_scales(a, s_cs, s_self, lane, 32);
    __syncwarp();
    const double *src = a.split + (size_t)slot * a.slot_stride;
    if constexpr (RPL == 1) {
        double *staged = V + (size_t)R * panel_ld(4) + kScratch;
        for (uint32_t e = lane; e < RR2 + R + 1; e += 32)
            staged[e] = src[e];
        src = staged;
        __syncwarp();
    }
    for (uint32_t i = 0; i < R; ++i)
        for (uint32_t j = lane; j <= i; j += 32) {
            double v = src[lower_index(i, j)] * s_cs[i] * s_cs[j];
            if (i == j)
                v += a.ridge;
            V[lay(i, j)] = v;
        }
    for (uint32_t i = lane; i < R; i += 32)
        bs[i] = src[RR2 + i] * s_cs[i];
    __syncwarp();
    double x[RPL];
    load_row<RPL>(a, row, s_self, lane, x);
    /* R <= 32 (a row a lane): the blocked factorisation in registers, its
     * scratch after V (full layout: R x panel_ld(4)). */
    const bool solved =
        solve_system<RPL, L, RPL == 1 ? 32 : 0>(V, lay, bs, R, a.nonneg, a.passes, lane, x,
                                                V + (size_t)R * panel_ld(4));
    double norm = 0.0;
    store_row<RPL>(a, row, lane, x, norm);
    /* The row's residual from the slot (G and b without the scales or
     * the ridge, x^T x): u = the row as held times the scales, into bs
     * (read by the solve). */
    __syncwarp();
#pragma unroll
    for (int u = 0; u < RPL; ++u) {
        const uint32_t i = lane + 32u * u;
        if (i < R)
            bs[i] = (double)(float)x[u] * s_cs[i];
    }
    __syncwarp();
    double part = lane == 0 ? src[RR2 + R] : 0.0;
    for (uint32_t i = 0; i < R; ++i) {
        const double ui = bs[i];
        for (uint32_t j = lane; j <= i; j += 32)
            part = fma((j < i ? 2.0 : 1.0) * ui * bs[j], src[lower_index(i, j)], part);
    }
    for (uint32_t i = lane; i < R; i += 32)
        part = fma(-2.0 * bs[i], src[RR2 + i], part);
    norm = warp_sum(norm);
    const double resid = warp_sum(part);
    if (lane == 0) {
        if (norm != 0.0)
            atomicAdd(&a.ctr->norm, norm);
        if (resid != 0.0)
            atomicAdd(&a.ctr->residual, resid);
        if (!solved)
            atomicAdd(&a.ctr->singular, 1ull);
    }
}

/* The empty rows (plan positions first .. first + n - 1): zero, or as they
 * were (stored times the column scale), and their squares. */
__global__ void __launch_bounds__(kUtilThreads)
    rls_empty_kernel(const rls_args a, uint32_t first, uint32_t n, int zero)
{
    __shared__ double s_part[kUtilThreads / 32];
    const uint32_t R = a.R;
    double norm = 0.0;
    const size_t total = (size_t)n * R;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (size_t)gridDim.x * blockDim.x) {
        const uint32_t row = a.rows[first + e / R].row, c = (uint32_t)(e % R);
        float *p = a.F + (size_t)row * R + c;
        const float v = zero ? 0.0f : *p * a.self_scale[c];
        *p = v;
        norm += (double)v * (double)v;
    }
    norm = warp_sum(norm);
    if (threadIdx.x % 32 == 0)
        s_part[threadIdx.x / 32] = norm;
    __syncthreads();
    if (threadIdx.x == 0) {
        double sum = 0.0;
        for (uint32_t w = 0; w < blockDim.x / 32; ++w)
            sum += s_part[w];
        if (sum != 0.0)
            atomicAdd(&a.ctr->norm, sum);
    }
}

/* ---- The plan (once per load) ---- */

/* Each row's run in the copy: rbeg[row] its first position, rend[row] one
 * past its last (both zero before, so an empty row stays 0, 0). */
__global__ void rls_runs_kernel(const uint32_t *rows_of, uint32_t nnz, uint32_t *rbeg,
                                uint32_t *rend)
{
    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < nnz;
         k += gridDim.x * blockDim.x) {
        const uint32_t row = rows_of[k];
        if (k == 0 || rows_of[k - 1] != row)
            rbeg[row] = k;
        if (k == nnz - 1 || rows_of[k + 1] != row)
            rend[row] = k + 1;
    }
}

/* counts (rend, in place) -= rbeg; ids = the row numbers. */
__global__ void rls_counts_kernel(uint32_t *counts, const uint32_t *rbeg, uint32_t *ids,
                                  uint32_t dim)
{
    for (uint32_t r = blockIdx.x * blockDim.x + threadIdx.x; r < dim;
         r += gridDim.x * blockDim.x) {
        counts[r] -= rbeg[r];
        ids[r] = r;
    }
}

/* The plan's rows from the counts sorted descending; words[0] = the rows
 * with a nonzero, words[1] = the rows longer than split_above (zero
 * before): those cut_chunks may split. */
__global__ void rls_rows_kernel(const uint32_t *counts, const uint32_t *ids, const uint32_t *rbeg,
                                uint32_t dim, uint32_t split_above, thg_rls_row *rows,
                                uint32_t *words)
{
    for (uint32_t t = blockIdx.x * blockDim.x + threadIdx.x; t < dim;
         t += gridDim.x * blockDim.x) {
        const uint32_t count = counts[t], row = ids[t];
        rows[t] = thg_rls_row{row, rbeg[row], count};
        const uint32_t next = t + 1 < dim ? counts[t + 1] : 0u;
        if (count > 0 && next == 0)
            words[0] = t + 1;
        if (count > split_above && next <= split_above)
            words[1] = t + 1;
    }
}

uint32_t bits_for(uint32_t max_value)
{
    uint32_t bits = 1;
    while (bits < 32 && (max_value >> bits) != 0)
        ++bits;
    return bits;
}

unsigned grid_for(uint64_t n)
{
    const uint64_t blocks = (n + kUtilThreads - 1) / kUtilThreads;
    return (unsigned)(blocks < 65535 * 16 ? (blocks == 0 ? 1 : blocks) : 65535 * 16);
}

/* The accumulate-and-solve kernel of a rank and count of other modes. */
struct main_kernel {
    const void *fn;
    uint32_t threads;
    size_t smem;
    uint32_t workers_per_block; /* tasks a block works on at once */
};

template <int T>
const void *warp_kernel_for(uint32_t nother)
{
    switch (nother) {
    case 1:
        return (const void *)rls_warp_kernel<T, 1>;
    case 2:
        return (const void *)rls_warp_kernel<T, 2>;
    case 3:
        return (const void *)rls_warp_kernel<T, 3>;
    default:
        return (const void *)rls_warp_kernel<T, 0>;
    }
}

main_kernel main_kernel_for(uint32_t R, uint32_t nother)
{
    const uint32_t T = (R + 7) / 8;
    if (T > kRegisterTiles)
        return {(const void *)rls_block_kernel, kBlockThreads, block_smem_bytes(R), 1};
    const void *fn = T == 1   ? warp_kernel_for<1>(nother)
                     : T == 2 ? warp_kernel_for<2>(nother)
                     : T == 3 ? warp_kernel_for<3>(nother)
                              : warp_kernel_for<4>(nother);
    const size_t smem = sizeof(double) * (2 * (size_t)R + kWarpKernelWarps * (size_t)warp_stride(R));
    return {fn, kWarpKernelThreads, smem, kWarpKernelWarps};
}

/* The split rows' kernel of a rank (one warp per block). */
struct split_kernel {
    const void *fn;
    size_t smem;
    bool packed;
};

split_kernel split_kernel_for(uint32_t R)
{
    if ((R + 7) / 8 <= kRegisterTiles)
        return {(const void *)rls_split_kernel<1, full_layout>,
                sizeof(double) *
                    (3 * (size_t)R + (size_t)R * panel_ld(4) + kScratch + lower_index(R, 0) + R +
                     1),
                false};
    return {(const void *)rls_split_kernel<4, packed_layout>,
            sizeof(double) * (3 * (size_t)R + lower_index(R, 0)), true};
}

thg_status set_smem(const void *fn, size_t bytes, char *err, size_t errlen)
{
    THG_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    return THG_OK;
}

/* Blocks of the main kernel resident on the device at once. */
thg_status resident_blocks(const thg_context *ctx, const main_kernel &k, uint32_t *out, char *err,
                           size_t errlen)
{
    int per_sm = 0;
    THG_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k.fn, (int)k.threads,
                                                           k.smem));
    if (per_sm < 1)
        return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                        "row_least_squares: rank %u does not fit on %s (%zu bytes of shared "
                        "memory a block)",
                        ctx->rank, ctx->device_name, k.smem);
    *out = (uint32_t)per_sm * (uint32_t)ctx->sm_count;
    return THG_OK;
}

thg_status check_free(thg_context *ctx, uint64_t needed, const char *what, char *err,
                      size_t errlen)
{
    uint64_t free_bytes = 0;
    const thg_status st = thg_free_device_bytes(ctx, &free_bytes, err, errlen);
    if (st != THG_OK)
        return st;
    if (needed > free_bytes)
        return thg_fail(err, errlen, THG_ERR_OUT_OF_MEMORY,
                        "row_least_squares: its %s needs %llu bytes on %s, %llu bytes available",
                        what, (unsigned long long)needed, ctx->device_name,
                        (unsigned long long)free_bytes);
    return THG_OK;
}

/* Temporary buffers of the plan's build, for the longest mode. */
struct plan_temp {
    void *block = nullptr;
    uint32_t *rbeg = nullptr, *keys[2] = {}, *ids[2] = {}, *words = nullptr;
    void *cub = nullptr;
    size_t cub_bytes = 0;
};

size_t cub_sort_bytes(uint32_t max_dim)
{
    size_t bytes = 0;
    cub::DoubleBuffer<uint32_t> k(nullptr, nullptr), v(nullptr, nullptr);
    cub::DeviceRadixSort::SortPairsDescending(nullptr, bytes, k, v, (int)max_dim, 0, 32);
    return bytes + 256;
}

/* Every mode's rows (sorted by count) and its counts of nonempty rows and
 * of rows longer than split_above, into s.modes; rows_block holds the
 * rows. */
thg_status build_rows(thg_context *ctx, uint32_t split_above, plan_temp &tmp, char *err,
                      size_t errlen)
{
    thg_rls_state &s = ctx->rls;
    cudaStream_t st = ctx->stream;
    const uint32_t nm = ctx->nmodes;
    char *p = (char *)s.rows_block;
    THG_CUDA(cudaMemsetAsync(tmp.words, 0, sizeof(uint32_t) * 2 * nm, st));
    for (uint32_t m = 0; m < nm; ++m) {
        const thg_mode_copy &copy = ctx->copies[m];
        const uint32_t dim = ctx->dims[m];
        s.modes[m].rows = (thg_rls_row *)p;
        p += round_up(sizeof(thg_rls_row) * (size_t)dim);
        THG_CUDA(cudaMemsetAsync(tmp.rbeg, 0, sizeof(uint32_t) * dim, st));
        THG_CUDA(cudaMemsetAsync(tmp.keys[0], 0, sizeof(uint32_t) * dim, st));
        rls_runs_kernel<<<grid_for(copy.nnz), kUtilThreads, 0, st>>>(copy.idx[m], copy.nnz,
                                                                     tmp.rbeg, tmp.keys[0]);
        THG_LAUNCHED();
        rls_counts_kernel<<<grid_for(dim), kUtilThreads, 0, st>>>(tmp.keys[0], tmp.rbeg,
                                                                  tmp.ids[0], dim);
        THG_LAUNCHED();
        cub::DoubleBuffer<uint32_t> keys(tmp.keys[0], tmp.keys[1]);
        cub::DoubleBuffer<uint32_t> ids(tmp.ids[0], tmp.ids[1]);
        size_t bytes = tmp.cub_bytes;
        THG_CUDA(cub::DeviceRadixSort::SortPairsDescending(tmp.cub, bytes, keys, ids, (int)dim,
                                                           0, (int)bits_for(copy.nnz), st));
        rls_rows_kernel<<<grid_for(dim), kUtilThreads, 0, st>>>(
            keys.Current(), ids.Current(), tmp.rbeg, dim, split_above, s.modes[m].rows,
            tmp.words + 2 * m);
        THG_LAUNCHED();
    }
    uint32_t words[2 * THG_MAX_MODES];
    THG_CUDA(cudaMemcpyAsync(words, tmp.words, sizeof(uint32_t) * 2 * nm, cudaMemcpyDeviceToHost,
                             st));
    THG_CUDA(cudaStreamSynchronize(st));
    for (uint32_t m = 0; m < nm; ++m) {
        s.modes[m].nonempty = words[2 * m];
        s.modes[m].nsplit = words[2 * m + 1]; /* cut_chunks's candidates */
    }
    return THG_OK;
}

/* The guided cut of one mode (see kMinChunk) into `chunks`: of `rows`
 * (its longest, in the queue's order, each longer than the shortest
 * chunk), those longer than the first chunk are split, each piece as long
 * as allowed where it stands (`nnz` the mode's nonzeros, `share` the
 * divisor of what is left); a fixed length instead where `fixed` is
 * nonzero (a test's). Returns how many rows were split: the rest are
 * solved whole. (Splitting every row longer than the piece allowed where
 * it stands made more slots, whose solves cost more than the shorter tail
 * saved where the rows are a few chunks long.) */
uint32_t cut_chunks(const std::vector<thg_rls_row> &rows, uint64_t nnz, uint64_t share,
                    uint32_t fixed, std::vector<thg_rls_chunk> &chunks)
{
    uint64_t left = nnz;
    const auto longest = [&]() -> uint64_t {
        if (fixed)
            return fixed;
        const uint64_t guided = (left + share - 1) / share;
        return guided > kMinChunk ? guided : kMinChunk;
    };
    const uint64_t first = longest();
    uint32_t nsplit = 0;
    for (; nsplit < rows.size() && rows[nsplit].count > first; ++nsplit) {
        const thg_rls_row &r = rows[nsplit];
        for (uint32_t off = 0; off < r.count;) {
            const uint64_t most = longest();
            const uint32_t len = r.count - off < most ? r.count - off : (uint32_t)most;
            chunks.push_back(thg_rls_chunk{r.row, r.begin + off, len, nsplit});
            off += len;
            left -= len;
        }
    }
    return nsplit;
}

/* The plans of every mode and the workspace, on the first call after a
 * load; every allocation checked against free memory first. */
thg_status prepare(thg_context *ctx, char *err, size_t errlen)
{
    thg_rls_state &s = ctx->rls;
    if (s.ready)
        return THG_OK;
    thg_rls_free(ctx); /* what a failed first attempt left */
    const uint32_t R = ctx->rank, nm = ctx->nmodes;
    const main_kernel mk = main_kernel_for(R, nm - 1);
    const split_kernel sk = split_kernel_for(R);
    thg_status st = set_smem(mk.fn, mk.smem, err, errlen);
    if (st == THG_OK)
        st = set_smem(sk.fn, sk.smem, err, errlen);
    uint32_t blocks = 0;
    if (st == THG_OK)
        st = resident_blocks(ctx, mk, &blocks, err, errlen);
    if (st != THG_OK)
        return st;
    s.main_blocks = blocks;
    const uint64_t workers = (uint64_t)blocks * mk.workers_per_block;
    uint32_t max_dim = 1;
    size_t rows_bytes = 0;
    for (uint32_t m = 0; m < nm; ++m) {
        max_dim = ctx->dims[m] > max_dim ? ctx->dims[m] : max_dim;
        rows_bytes += round_up(sizeof(thg_rls_row) * (size_t)ctx->dims[m]);
    }
    plan_temp tmp;
    tmp.cub_bytes = round_up(cub_sort_bytes(max_dim));
    const size_t dim_bytes = round_up(sizeof(uint32_t) * (size_t)max_dim);
    const size_t temp_bytes = 5 * dim_bytes + round_up(sizeof(uint32_t) * 2 * nm) + tmp.cub_bytes;
    st = check_free(ctx, rows_bytes + temp_bytes, "plan of each mode's rows", err, errlen);
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaMalloc(&s.rows_block, rows_bytes));
    s.bytes = rows_bytes;
    ctx->workspace_bytes += rows_bytes;
    THG_CUDA(cudaMalloc(&tmp.block, temp_bytes));
    char *p = (char *)tmp.block;
    tmp.rbeg = (uint32_t *)p;
    tmp.keys[0] = (uint32_t *)(p + dim_bytes);
    tmp.keys[1] = (uint32_t *)(p + 2 * dim_bytes);
    tmp.ids[0] = (uint32_t *)(p + 3 * dim_bytes);
    tmp.ids[1] = (uint32_t *)(p + 4 * dim_bytes);
    tmp.words = (uint32_t *)(p + 5 * dim_bytes);
    tmp.cub = p + 5 * dim_bytes + round_up(sizeof(uint32_t) * 2 * nm);
    /* The rows that may be split: longer than the shortest chunk. */
    const uint32_t split_above = ctx->rls_chunk_override ? ctx->rls_chunk_override : kMinChunk;
    st = build_rows(ctx, split_above, tmp, err, errlen);
    cudaStreamSynchronize(ctx->stream); /* the temporaries are free to go */
    const cudaError_t freed = cudaFree(tmp.block);
    if (st != THG_OK)
        return st;
    THG_CUDA(freed);

    /* The split rows' chunks, cut on the host from the (few) rows longer
     * than the shortest chunk. */
    std::vector<thg_rls_chunk> chunks;
    uint32_t first_chunk[THG_MAX_MODES];
    uint32_t max_split = 0;
    for (uint32_t m = 0; m < nm; ++m) {
        thg_rls_mode &pm = s.modes[m];
        first_chunk[m] = (uint32_t)chunks.size();
        const uint32_t candidates = pm.nsplit;
        pm.nsplit = 0;
        if (candidates == 0)
            continue;
        std::vector<thg_rls_row> split(candidates);
        THG_CUDA(cudaMemcpyAsync(split.data(), pm.rows, sizeof(thg_rls_row) * candidates,
                                 cudaMemcpyDeviceToHost, ctx->stream));
        THG_CUDA(cudaStreamSynchronize(ctx->stream));
        pm.nsplit = cut_chunks(split, ctx->copies[m].nnz, kChunksPerWorker * workers,
                               ctx->rls_chunk_override, chunks);
        pm.nchunks = (uint32_t)chunks.size() - first_chunk[m];
        max_split = pm.nsplit > max_split ? pm.nsplit : max_split;
    }
    s.slot_stride = (lower_index(R, 0) + R + 2u) & ~1u; /* G, b, x^T x; even */
    const size_t chunk_bytes = round_up(sizeof(thg_rls_chunk) * chunks.size());
    const size_t split_bytes = round_up(sizeof(double) * (size_t)max_split * s.slot_stride);
    const size_t work_bytes = chunk_bytes + split_bytes + round_up(sizeof(thg_rls_counters));
    st = check_free(ctx, work_bytes, "chunks and split-row accumulators", err, errlen);
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaMalloc(&s.work_block, work_bytes));
    s.bytes += work_bytes;
    ctx->workspace_bytes += work_bytes;
    p = (char *)s.work_block;
    thg_rls_chunk *chunks_dev = (thg_rls_chunk *)p;
    s.split = (double *)(p + chunk_bytes);
    s.counters = (thg_rls_counters *)(p + chunk_bytes + split_bytes);
    for (uint32_t m = 0; m < nm; ++m)
        s.modes[m].chunks = chunks_dev + first_chunk[m];
    if (!chunks.empty()) {
        /* Pageable source: the stream waits for the copy before `chunks` goes. */
        THG_CUDA(cudaMemcpyAsync(chunks_dev, chunks.data(), sizeof(thg_rls_chunk) * chunks.size(),
                                 cudaMemcpyHostToDevice, ctx->stream));
        THG_CUDA(cudaStreamSynchronize(ctx->stream));
    }
    THG_CUDA(cudaHostAlloc(&s.out_host, sizeof(thg_rls_counters), cudaHostAllocDefault));
    s.ready = 1;
    return THG_OK;
}

} // namespace

void thg_rls_free(thg_context *ctx)
{
    thg_rls_state &s = ctx->rls;
    cudaFree(s.rows_block);
    cudaFree(s.work_block);
    cudaFreeHost(s.out_host);
    ctx->workspace_bytes = ctx->workspace_bytes > s.bytes ? ctx->workspace_bytes - s.bytes : 0;
    memset(&s, 0, sizeof(s));
}

extern "C" thg_status thg_row_least_squares(thg_context *ctx, uint32_t mode, double ridge,
                                            int nonneg, uint32_t passes,
                                            uint64_t *singular_rows, uint64_t *empty_rows,
                                            double *factor_norm_squared,
                                            double *residual_squared, char *err, size_t errlen)
{
    if (singular_rows)
        *singular_rows = 0;
    if (empty_rows)
        *empty_rows = 0;
    if (factor_norm_squared)
        *factor_norm_squared = 0.0;
    if (residual_squared)
        *residual_squared = 0.0;
    thg_status st = thg_check_mode(ctx, mode, err, errlen);
    if (st != THG_OK)
        return st;
    if (!(ridge >= 0.0) || !isfinite(ridge))
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "ridge %g must be finite and at least 0", ridge);
    if (nonneg != 0 && nonneg != 1)
        return thg_fail(err, errlen, THG_ERR_INVALID, "nonneg %d must be 0 or 1", nonneg);
    if (nonneg && passes == 0)
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "passes 0 with nonneg 1: at least one sweep of coordinate descent");
    if (ctx->factor_allocator.alloc != thg_device_allocator.alloc)
        return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                        "row least squares on a rank of a multi-device group is not "
                        "implemented (a rank holds a share of each mode's nonzeros)");
    THG_CUDA(cudaSetDevice(ctx->device));
    st = prepare(ctx, err, errlen);
    if (st != THG_OK)
        return st;
    const thg_rls_state &s = ctx->rls;
    const thg_rls_mode &pm = s.modes[mode];
    const thg_mode_copy &copy = ctx->copies[mode];
    const uint32_t R = ctx->rank, dim = ctx->dims[mode];
    rls_args a;
    memset(&a, 0, sizeof(a));
    for (uint32_t m = 0; m < ctx->nmodes; ++m) {
        if (m == mode)
            continue;
        a.idx[a.nother] = copy.idx[m];
        a.fac[a.nother] = ctx->factors[m];
        a.scale[a.nother] = ctx->col_scale + (size_t)m * R;
        ++a.nother;
    }
    a.vals = copy.vals;
    a.F = ctx->factors[mode];
    a.self_scale = ctx->col_scale + (size_t)mode * R;
    a.R = R;
    a.ridge = ridge;
    a.nonneg = nonneg;
    a.passes = passes;
    a.rows = pm.rows;
    a.chunks = pm.chunks;
    a.nsplit = pm.nsplit;
    a.nchunks = pm.nchunks;
    a.ntasks = pm.nchunks + (pm.nonempty - pm.nsplit);
    a.split = s.split;
    a.slot_stride = s.slot_stride;
    a.ctr = s.counters;
    cudaStream_t stream = ctx->stream;
    THG_CUDA(cudaMemsetAsync(s.counters, 0, sizeof(thg_rls_counters), stream));
    if (pm.nsplit)
        THG_CUDA(cudaMemsetAsync(s.split, 0, sizeof(double) * pm.nsplit * s.slot_stride, stream));
    void *params[] = {&a};
    if (a.ntasks > 0) {
        const main_kernel mk = main_kernel_for(R, a.nother);
        const uint32_t blocks = s.main_blocks;
        const uint64_t wanted = ((uint64_t)a.ntasks + mk.workers_per_block - 1) /
                                mk.workers_per_block;
        const uint32_t grid = wanted < blocks ? (uint32_t)wanted : blocks;
        THG_CUDA(cudaLaunchKernel(mk.fn, dim3(grid), dim3(mk.threads), params, mk.smem, stream));
    }
    if (pm.nsplit > 0) {
        const split_kernel sk = split_kernel_for(R);
        void *split_params[] = {&a, nullptr};
        full_layout full{panel_ld(4)};
        packed_layout packed{};
        split_params[1] = sk.packed ? (void *)&packed : (void *)&full;
        THG_CUDA(cudaLaunchKernel(sk.fn, dim3(pm.nsplit), dim3(32), split_params, sk.smem,
                                  stream));
    }
    if (pm.nonempty < dim) {
        const uint32_t first = pm.nonempty, n = dim - pm.nonempty;
        rls_empty_kernel<<<grid_for((uint64_t)n * R), kUtilThreads, 0, stream>>>(
            a, first, n, ridge > 0.0 ? 1 : 0);
        THG_LAUNCHED();
    }
    /* The factor is held as its true values now (the kernels above read the
     * old scale first: the stream orders them). */
    st = thg_fill_floats(ctx, ctx->col_scale + (size_t)mode * R, R, 1.0f, err, errlen);
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaMemcpyAsync(s.out_host, s.counters, sizeof(thg_rls_counters),
                             cudaMemcpyDeviceToHost, stream));
    THG_CUDA(cudaStreamSynchronize(stream));
    if (singular_rows)
        *singular_rows = s.out_host->singular;
    if (empty_rows)
        *empty_rows = dim - pm.nonempty;
    if (factor_norm_squared)
        *factor_norm_squared = s.out_host->norm;
    if (residual_squared)
        *residual_squared = s.out_host->residual;
    return THG_OK;
}
