/* The nonnegative CP update on the device (the ABI's als_update_nonneg,
 * 1.5, and the coordinate-descent modes of als_sweep, 1.6): hierarchical
 * ALS of A >= 0 against A V = M, then als_update's epilogue
 * (kernels/DESIGN.md, "The nonnegative update").
 *
 * With M the mode's MTTKRP result, A its factor and V the R x R Hadamard
 * of the other Grams, a pass updates every row on its own, columns
 * r = 0 .. R-1 in order, where V(r,r) + ridge != 0:
 *   A(i,r) <- max(0, (M(i,r) - sum_q A(i,q) V(q,r) + V(r,r) A(i,r)) / (V(r,r) + ridge))
 * (l1 subtracted before the clamp; without the bound, soft-thresholded)
 * and the passes stop after the one whose summed squared change is at most
 * tolerance times the first's. Only that sum couples the rows, so the
 * passes run in chunks of up to kFuse, each chunk two kernels:
 *   - speculate_kernel<RP, kStaged>: a thread per row reads its row of A
 *     and makes every pass of the chunk on it in registers, adding each
 *     pass's change to that pass's sum; the row is read and written once
 *     a chunk, not once a pass (on a long mode the passes were bound by
 *     those reads and writes, on a short one by a kernel and a reduction
 *     a pass). Staged (RP <= 32, whole-quad rows): a block's 128 rows of
 *     A and M come into shared memory as tiles by coalesced asynchronous
 *     copies, each thread's row is read from there and written back, and
 *     the tile leaves in coalesced stores; otherwise each thread reads
 *     and writes its row in global memory (grid-stride), where a warp's
 *     access touches 32 lines and kept L1 busy on tall modes. The last
 *     block to finish (a counter) adds the blocks' sums in block order
 *     (the sums depend on the grid only, fixed per shape and device) and
 *     applies the stopping test pass by pass: the passes kept are those up
 *     to the first that meets it.
 *   - redo_kernel<RP>: where the chunk kept fewer passes than it made, the
 *     rows again from where the chunk started, with the kept passes only.
 *     With `saved` (the scratch nonneg_saved, allocated where it fits) the
 *     speculative kernel stores each row's start there and its result in
 *     A, and the redo runs only on an early stop; without it the
 *     speculative kernel writes nothing and the redo always makes the kept
 *     passes (the arithmetic twice, the memory traffic still less than a
 *     kernel a pass). An update of one pass needs neither: its first pass
 *     always stands, so that chunk stores its rows directly (a long mode
 *     with a few nonzeros a row makes one, als_step.h's th_hals_passes).
 *   A chunk after the stop returns at once, so the host launches the
 *   chunks without waiting; the update on its own reads the stop flag
 *   back between chunks (one synchronisation), the sweep's graph holds
 *   them all.
 *   An update of one pass on the staged path also adds the epilogue's
 *   inner products and maxima from its tiles of M and A (inner_in_pass), so
 *   that the tensor-core epilogue reads A alone: on the Nell-1 shape's
 *   25.5M-row mode that is 3.3 GB less read a sweep.
 * The row is fp32 as stored, held in double up to RP = 32 (RP the rank
 * padded to 8, 16, 32, 64 or 128; every loop unrolled up to 64, at 128
 * the row in local memory); V in shared memory in fp64, each dot product
 * in fp64 (four accumulators), each new entry rounded to fp32 as it is
 * kept and its change (the kept value's) added in fp64.
 *   - the first pass reads the factor as stored (unnormalised, with its
 *     column scale, als.cu) times `scale`, and M times its result scale;
 *     every chunk writes the factor's true values (column scale 1).
 *   - then thg_launch_als_epilogue (als.cu): the update kernel's Gram,
 *     inner-product and norm sums over the factor as computed (on tall
 *     factors at ranks 16, 32 and 64 the tensor-core update's kernel in its
 *     epilogue form, als_tensor_core.cu), its finish (lambda, the
 *     normalised Gram and inner, the column scale) and its scale kernel:
 *     the same code as thg_als_update's, not a copy.
 * One synchronisation at the end; V and scale go up in one copy, and
 * [lambda | gram | inner] (mapped) and the pass count come back. */
#include <math.h>
#include <string.h>

#include <type_traits>

#include <cuda_pipeline.h>

#include "thg_internal.cuh"

namespace {

/* Passes one chunk makes at most (one speculative kernel); the update on
 * its own reads the stop flag back between chunks. */
constexpr uint32_t kFuse = 8;

/* The passes' control block on the device (and its pinned mirror). */
struct nonneg_ctrl {
    double first;       /* the first pass's change */
    double last;        /* the latest pass's change */
    uint32_t count;     /* blocks of the running speculative kernel finished */
    uint32_t stop;      /* a pass met the test: later chunks return at once */
    uint32_t passes;    /* passes kept */
    int32_t norm;       /* the norm flag, staged for ctx->als_w (host block only) */
    uint32_t redo;      /* passes the redo kernel makes (0: none) ... */
    uint32_t redo_from; /* ... for the chunk starting at this pass */
};

/* One block of device memory (and the same layout in pinned host memory,
 * the staging): ctrl | V [R*R] doubles | scale [R] doubles | the per-block
 * change sums [kFuse][nparts] doubles (device only; not copied). */
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
    l.total = l.partials + sizeof(double) * kFuse * nparts;
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
    float *saved;                 /* nullable: the rows a chunk started from (same layout as A) */
    const float *col_scale;       /* [R] the factor's stored column scale (pass 0) */
    double *V;                    /* [R*R]; inside a sweep pass 0 writes it */
    const double *scale;          /* [R] */
    nonneg_ctrl *ctrl;
    double *partials;             /* [kFuse][gridDim.x] */
    uint32_t I, R;
    int vector_rows;              /* R % 4 == 0 and M, A, saved 16-byte aligned: float4 rows */
    int staged;                   /* vector rows at RP <= 32: tiles through shared memory */
    double tolerance;
    double ridge, l1;             /* ABI 1.6: 0 and 0 for the plain update */
    int nonneg;                   /* clamp at 0 (TH_CONSTRAINT_NONNEG) or not */
    /* Inside a sweep: an earlier mode's solve broke down (return at once),
     * and where pass 0 leaves the norm flag the epilogue reads; nullptr
     * for the update on its own (the host staged the flag). */
    const uint32_t *failed;
    int *norm_flag;
    int norm_value;
    /* A pass that stands on the staged path adds the epilogue's inner
     * products and maxima (the update's accumulators) from its tiles of M
     * and A, so that the epilogue reads A alone (its inner_made); nullptr
     * where the epilogue makes them. */
    double *inner_acc;
    uint32_t *max_acc;
};

/* Threads per block of both kernels, and the blocks an SM must hold (the
 * registers a thread may take: at RP = 32 the speculative kernel would
 * take 168 and hold three blocks an SM, too few warps to hide the
 * dependent fp64 steps). */
__host__ __device__ constexpr uint32_t pass_threads(uint32_t RP) { return RP <= 64u ? 128u : 256u; }
__host__ __device__ constexpr uint32_t pass_min_blocks(uint32_t RP)
{
    return RP <= 32u ? 4u : 0u; /* 0: the compiler's choice (128 registers at 64, 48-62 at 128) */
}

/* Dynamic shared memory of both kernels: V [RP*RP], then diag, inv,
 * m_scale and the pass's scale [RP] each, then [warps] for the reduction,
 * [kFuse][threads] for the passes' change sums and [kFuse] for their
 * totals, all doubles. */
__host__ __device__ constexpr size_t pass_smem_bytes(uint32_t RP)
{
    return sizeof(double) *
           ((size_t)RP * RP + 4u * RP + pass_threads(RP) / 32u + kFuse * pass_threads(RP) + kFuse);
}

/* The staged path's tiles (speculate_kernel at RP <= 32 with vector
 * rows): a block's rows of A and of M, one a thread, at a row stride of
 * RP + 4 floats (a quarter-warp's 16-byte loads of 8 rows then fall in 32
 * different banks), after the doubles of pass_smem_bytes rounded to 16
 * bytes. */
__host__ __device__ constexpr uint32_t tile_stride(uint32_t RP) { return RP + 4u; }
__host__ __device__ constexpr size_t tiles_offset(uint32_t RP)
{
    return (pass_smem_bytes(RP) + 15u) & ~(size_t)15u;
}
__host__ __device__ constexpr size_t speculate_smem_bytes(uint32_t RP)
{
    return RP <= 32u ? tiles_offset(RP) + sizeof(float) * 2u * pass_threads(RP) * tile_stride(RP)
                     : pass_smem_bytes(RP);
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

/* The kernels' shared memory, laid out by pass_smem_bytes. */
struct pass_shared {
    double *v;    /* [RP*RP], zero outside R x R */
    double *diag; /* [RP] V(r,r) */
    double *inv;  /* [RP] 1 / (V(r,r) + ridge), 0 where that is 0 */
    double *ms;   /* [RP] M's column scale */
    double *as;   /* [RP] A's on reading: the first pass its column scale * scale */
    double *red;  /* [warps] */
    double *acc;  /* [kFuse][threads] the passes' change sums, per thread */
    double *tot;  /* [kFuse] the passes' totals (the last block) */
};

template <uint32_t RP> __device__ pass_shared carve_shared(double *sh)
{
    constexpr uint32_t warps = pass_threads(RP) / 32u;
    pass_shared s;
    s.v = sh;
    s.diag = s.v + (size_t)RP * RP;
    s.inv = s.diag + RP;
    s.ms = s.inv + RP;
    s.as = s.ms + RP;
    s.red = s.as + RP;
    s.acc = s.red + warps;
    s.tot = s.acc + kFuse * pass_threads(RP);
    return s;
}

/* V, its diagonal and divisors, M's and A's scales into shared memory.
 * Each thread's entries of V are loaded at once (the loop's count is a
 * constant, so it unrolls and the loads overlap; one at a time, they cost
 * a few microseconds a kernel on short modes). Inside a sweep the first
 * pass builds V from the Grams and block 0 leaves it in the workspace for
 * the later kernels. Ends with a barrier. */
template <uint32_t RP>
__device__ void stage_shared(const pass_args &a, const pass_shared &s, bool first_pass,
                             bool from_grams)
{
    const uint32_t R = a.R, tid = threadIdx.x;
    const size_t RR = (size_t)R * R;
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
                v = __ldcg(a.V + e); /* written by an earlier kernel of the stream */
            }
        }
        if (t < RP * RP)
            s.v[t] = v;
    }
    __syncthreads();
    for (uint32_t t = tid; t < RP; t += blockDim.x) {
        const double vrr = s.v[(size_t)t * RP + t];
        s.diag[t] = vrr;
        /* The divisor d = V(r,r) + ridge; a column with d = 0 stays (inv 0
         * marks it). */
        const double d = t < R ? vrr + a.ridge : 0.0;
        s.inv[t] = d != 0.0 ? 1.0 / d : 0.0;
        s.ms[t] = t < R ? (double)a.m_scale[t] : 0.0;
        s.as[t] = t < R ? (first_pass ? (double)a.col_scale[t] * a.scale[t] : 1.0) : 0.0;
    }
    __syncthreads();
}

/* The row's values are fp32 (stored so after every update), held in
 * double up to RP = 32: each dot product's FMAs then take them as they
 * are, where a float row paid a conversion per FMA (on the quarter-rate
 * conversion pipe: about 4x the FMAs' time at R = 32). At 64 and 128 the
 * doubles would not fit in registers. */
template <uint32_t RP> using row_of = typename std::conditional<(RP <= 32u), double, float>::type;

/* Row i of the factor as it is into `saved` (where a chunk started). */
__device__ __forceinline__ void copy_row(const pass_args &a, uint64_t i)
{
    const float *src = a.A + i * a.R;
    float *dst = a.saved + i * a.R;
    if (a.vector_rows)
        for (uint32_t q = 0; q < a.R; q += 4u)
            *reinterpret_cast<float4 *>(dst + q) = *reinterpret_cast<const float4 *>(src + q);
    else
        for (uint32_t q = 0; q < a.R; ++q)
            dst[q] = src[q];
}

/* A row of whole quads between `row` and memory (global, or a staged
 * tile): in (zero past R) and out (the first R values as floats). */
template <uint32_t RP>
__device__ __forceinline__ void quads_in(row_of<RP> (&row)[RP], const float *src, uint32_t R)
{
#pragma unroll(RP <= 64u ? RP / 4u : 1u)
    for (uint32_t q = 0; q < RP; q += 4u) {
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (q < R)
            v = *reinterpret_cast<const float4 *>(src + q);
        row[q] = v.x;
        row[q + 1] = v.y;
        row[q + 2] = v.z;
        row[q + 3] = v.w;
    }
}

template <uint32_t RP>
__device__ __forceinline__ void quads_out(const row_of<RP> (&row)[RP], float *dst, uint32_t R)
{
#pragma unroll(RP <= 64u ? RP / 4u : 1u)
    for (uint32_t q = 0; q < RP; q += 4u)
        if (q < R)
            *reinterpret_cast<float4 *>(dst + q) =
                make_float4((float)row[q], (float)row[q + 1], (float)row[q + 2], (float)row[q + 3]);
}

/* Row i of `from` into `row` (zero past R), scaled by `as` on the first
 * pass. */
template <uint32_t RP>
__device__ __forceinline__ void load_row(row_of<RP> (&row)[RP], const pass_args &a,
                                         const float *from, uint64_t i, const double *as,
                                         bool first_pass)
{
    const uint32_t R = a.R;
    const float *src = from + i * R;
    if (a.vector_rows) {
        quads_in<RP>(row, src, R);
    } else {
#pragma unroll(RP <= 64u ? RP : 1u)
        for (uint32_t q = 0; q < RP; ++q)
            row[q] = q < R ? src[q] : 0.0f;
    }
    if (first_pass)
#pragma unroll(RP <= 64u ? RP : 1u)
        for (uint32_t q = 0; q < RP; ++q)
            row[q] = __double2float_rn((double)row[q] * as[q]);
}

template <uint32_t RP>
__device__ __forceinline__ void store_row(const row_of<RP> (&row)[RP], const pass_args &a,
                                          uint64_t i)
{
    const uint32_t R = a.R;
    float *dst = a.A + i * R;
    if (a.vector_rows) {
        quads_out<RP>(row, dst, R);
    } else {
#pragma unroll(RP <= 64u ? RP : 1u)
        for (uint32_t q = 0; q < RP; ++q)
            if (q < R)
                dst[q] = (float)row[q];
    }
}

/* One pass over row i (columns in order); returns the summed squared
 * change of its kept (fp32) values. kStaged: M's row is m_tile_row, in
 * shared memory (absent rows zero there). */
template <uint32_t RP, bool kStaged = false>
__device__ __forceinline__ double pass_row(row_of<RP> (&row)[RP], const pass_args &a,
                                           const pass_shared &s, uint64_t i,
                                           const float *m_tile_row = nullptr)
{
    const uint32_t R = a.R;
    const float *m_row = kStaged ? m_tile_row : a.M + i * R;
    const bool present = kStaged || !a.row_present || thg_row_present(a.row_present, i);
    double change = 0.0;
    float4 m4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    /* No break or continue: either keeps the row out of registers. */
#pragma unroll(RP <= 64u ? RP : 1u)
    for (uint32_t r = 0; r < RP; ++r) {
        if (r < R) { /* uniform */
            /* M(i, r): a quad at a time on whole-quad rows (L1 holds the
             * row between a chunk's passes). */
            float m;
            if (kStaged || a.vector_rows) {
                if (r % 4u == 0)
                    m4 = kStaged  ? *reinterpret_cast<const float4 *>(m_row + r)
                         : present ? __ldg(reinterpret_cast<const float4 *>(m_row + r))
                                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                const uint32_t j = r % 4u;
                m = j == 0 ? m4.x : j == 1 ? m4.y : j == 2 ? m4.z : m4.w;
            } else {
                m = present ? __ldg(m_row + r) : 0.0f;
            }
            const double vrr = s.diag[r];
            if (s.inv[r] != 0.0) { /* uniform; otherwise the column stays */
                /* V symmetric: its row r is column r. */
                const double *v_row = s.v + (size_t)r * RP;
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
                const double n = (double)m * s.ms[r] - product + vrr * old;
                /* Clamped at 0, or soft-thresholded by l1 (both sides). */
                const double mag = fmax(0.0, (a.nonneg ? n : fabs(n)) - a.l1);
                const double shrunk = !a.nonneg && n < 0.0 ? -mag : mag;
                const double next = shrunk * s.inv[r];
                const float stored = __double2float_rn(next);
                const double d = (double)stored - old;
                change = fma(d, d, change);
                row[r] = stored;
            }
        }
    }
    return change;
}

/* The staged path's copies between global memory and a tile (row stride
 * TS floats), whole quads (vector rows), every thread of the block. Into
 * the tile asynchronously (the caller commits and waits), M's absent rows
 * as zeros without being read; out of it plainly. */
__device__ __forceinline__ void tile_in(const float *src, uint64_t base, uint32_t rows,
                                        uint32_t R, uint32_t TS, const uint32_t *row_present,
                                        float *tile)
{
    thg_rows_to_shared_async<4>(src, base, rows, R, tile, TS, row_present, 0, threadIdx.x,
                                blockDim.x);
}

__device__ __forceinline__ void tile_out(const float *tile, uint64_t base, uint32_t rows,
                                         uint32_t R, uint32_t TS, float *dst)
{
    const uint32_t quads = R / 4u;
    float *to = dst + base * R;
    for (uint32_t t = threadIdx.x; t < rows * quads; t += blockDim.x)
        *reinterpret_cast<float4 *>(to + (size_t)t * 4u) =
            *reinterpret_cast<const float4 *>(tile + (t / quads) * TS + (t % quads) * 4u);
}

/* Passes first .. first + count - 1 (a chunk), speculatively: every pass
 * made on every row and its change summed; the last block decides which
 * passes stand (the stopping test) and how many the redo must make. */
template <uint32_t RP, bool kStaged>
__global__ void __launch_bounds__(pass_threads(RP), pass_min_blocks(RP))
    speculate_kernel(pass_args a, uint32_t first, uint32_t count)
{
    extern __shared__ double sh[];
    /* An earlier chunk met the test, or an earlier mode's solve broke
     * down: nothing more (uniform, before any barrier). */
    if (first > 0 && *(volatile const uint32_t *)&a.ctrl->stop)
        return;
    if (a.failed && *a.failed)
        return;
    constexpr uint32_t threads = pass_threads(RP);
    const pass_shared s = carve_shared<RP>(sh);
    const uint32_t tid = threadIdx.x;
    for (uint32_t c = 0; c < kFuse; ++c)
        s.acc[c * threads + tid] = 0.0;
    stage_shared<RP>(a, s, first == 0, a.grams && first == 0);

    /* Each thread adds a pass's change to its own slot of that pass (in
     * shared memory: registers are the row's). The same work in two loop
     * shapes: ptxas keeps the row in registers without spilling at RP <= 32
     * with the first and at 64 with the second. */
    /* The update's first pass always stands (the test compares later
     * passes with it): a chunk of that pass alone stores its rows and needs
     * neither the saved rows nor the redo. */
    const bool stands = first == 0 && count == 1;
    const bool save = a.saved && !stands, store = a.saved || stands;
    /* inner_acc: thread (col, phase) adds column col of the rows phase,
     * phase + phases, ... of every tile; the block's sums in the change
     * sums' unused slots (one pass: only slot 0 is a pass's), zeroed above. */
    const bool inner_here = kStaged && a.inner_acc && stands;
    const uint32_t col = tid % a.R, phase = tid / a.R, phases = threads / a.R;
    double my_inner = 0.0;
    float my_max = 0.0f;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    if constexpr (kStaged) {
        /* A block's rows of A and M come in as tiles (coalesced), a
         * thread works on its row there, and the tile goes out: a row
         * a thread read and wrote in global memory is 32 lines a warp's
         * access, which bound the pass on tall modes (L1 busy). */
        constexpr uint32_t TS = tile_stride(RP);
        float *tile_a = reinterpret_cast<float *>(reinterpret_cast<char *>(sh) +
                                                  tiles_offset(RP));
        float *tile_m = tile_a + threads * TS;
        const uint64_t ntiles = ((uint64_t)a.I + threads - 1u) / threads;
        for (uint64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
            const uint64_t base = tile * threads;
            const uint32_t rows = (uint32_t)(a.I - base < threads ? a.I - base : threads);
            tile_in(a.A, base, rows, a.R, TS, nullptr, tile_a);
            tile_in(a.M, base, rows, a.R, TS, a.row_present, tile_m);
            __pipeline_commit();
            __pipeline_wait_prior(0);
            __syncthreads();
            if (save) {
                tile_out(tile_a, base, rows, a.R, TS, a.saved);
                __syncthreads(); /* read by all before a thread rewrites its row */
            }
            if (tid < rows) {
                row_of<RP> row[RP];
                quads_in<RP>(row, tile_a + tid * TS, a.R);
                if (first == 0)
#pragma unroll
                    for (uint32_t q = 0; q < RP; ++q)
                        row[q] = __double2float_rn((double)row[q] * s.as[q]);
#pragma unroll 1
                for (uint32_t c = 0; c < count; ++c)
                    s.acc[c * threads + tid] +=
                        pass_row<RP, true>(row, a, s, base + tid, tile_m + tid * TS);
                if (store)
                    quads_out<RP>(row, tile_a + tid * TS, a.R);
            }
            __syncthreads();
            if (store)
                tile_out(tile_a, base, rows, a.R, TS, a.A);
            if (inner_here) {
                float tile_inner = 0.0f; /* fp32 within a tile, double across */
                for (uint32_t r = phase; phase < phases && r < rows; r += phases) {
                    const float av = tile_a[r * TS + col];
                    tile_inner = fmaf(tile_m[r * TS + col], av, tile_inner);
                    my_max = fmaxf(my_max, fabsf(av));
                }
                my_inner += (double)tile_inner;
            }
            __syncthreads(); /* the next tile's copies overwrite both */
        }
        if (inner_here) {
            double *s_inner = s.acc + threads;                            /* [R] */
            uint32_t *s_max = reinterpret_cast<uint32_t *>(s_inner + RP); /* [R] */
            if (phase < phases) {
                atomicAdd(&s_inner[col], my_inner);
                atomicMax(&s_max[col], __float_as_uint(my_max)); /* >= 0: bits order */
            }
            __syncthreads();
            for (uint32_t t = tid; t < a.R; t += blockDim.x) {
                atomicAdd(&a.inner_acc[t], s_inner[t]);
                atomicMax(&a.max_acc[t], s_max[t]);
            }
        }
    } else if constexpr (RP <= 32u) {
        for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + tid; i < a.I; i += stride) {
            row_of<RP> row[RP];
            if (save)
                copy_row(a, i);
            load_row<RP>(row, a, a.A, i, s.as, first == 0);
#pragma unroll 1
            for (uint32_t c = 0; c < count; ++c)
                s.acc[c * threads + tid] += pass_row<RP>(row, a, s, i);
            if (store)
                store_row<RP>(row, a, i);
        }
    } else {
        for (uint64_t base = (uint64_t)blockIdx.x * blockDim.x; base < a.I; base += stride) {
            const uint64_t i = base + tid;
            const bool valid = i < a.I;
            row_of<RP> row[RP];
            if (valid) {
                if (save)
                    copy_row(a, i);
                load_row<RP>(row, a, a.A, i, s.as, first == 0);
            }
            for (uint32_t c = 0; c < count; ++c)
                s.acc[c * threads + tid] += valid ? pass_row<RP>(row, a, s, i) : 0.0;
            if (valid && store)
                store_row<RP>(row, a, i);
        }
    }

    if (first == 0 && a.norm_flag && blockIdx.x == 0 && tid == 0)
        *a.norm_flag = a.norm_value; /* read by the epilogue's finish, after every pass */

    /* Each pass's change: this block's sums (warp order), then the last
     * block's totals (block order). */
    __shared__ bool s_last;
    for (uint32_t c = 0; c < count; ++c) {
        const double mine = block_sum(s.acc[c * threads + tid], s.red);
        if (tid == 0)
            a.partials[(size_t)c * gridDim.x + blockIdx.x] = mine;
    }
    if (tid == 0) {
        __threadfence();
        s_last = atomicAdd(&a.ctrl->count, 1u) == gridDim.x - 1u;
    }
    __syncthreads();
    if (!s_last)
        return;
    __threadfence();
    for (uint32_t c = 0; c < count; ++c) {
        double part = 0.0;
        for (uint32_t b = tid; b < gridDim.x; b += blockDim.x)
            part += __ldcg(&a.partials[(size_t)c * gridDim.x + b]);
        const double total = block_sum(part, s.red);
        if (tid == 0)
            s.tot[c] = total;
    }
    if (tid == 0) {
        nonneg_ctrl *ctrl = a.ctrl;
        double first_change = first == 0 ? 0.0 : __ldcg(&ctrl->first);
        uint32_t kept = count;
        for (uint32_t c = 0; c < count; ++c) {
            const double total = s.tot[c];
            if (first + c == 0)
                first_change = total;
            ctrl->last = total;
            ctrl->passes = first + c + 1u;
            if (total <= a.tolerance * first_change) {
                ctrl->stop = 1u;
                kept = c + 1u;
                break;
            }
        }
        ctrl->first = first_change;
        /* With the rows stored, A holds every pass of the chunk: redo only
         * when fewer stand (never for a first pass alone). Without, A is as
         * the chunk found it. */
        ctrl->redo = store ? (kept < count ? kept : 0u) : kept;
        ctrl->redo_from = first;
        ctrl->count = 0u;
    }
}

/* The kept passes of the chunk starting at `first`, from the rows it
 * started from (saved, or A as the speculative kernel left it), into A;
 * returns at once when the speculative kernel kept them all in A. */
template <uint32_t RP>
__global__ void __launch_bounds__(pass_threads(RP), pass_min_blocks(RP)) redo_kernel(pass_args a, uint32_t first)
{
    extern __shared__ double sh[];
    const volatile nonneg_ctrl *ctrl = a.ctrl;
    /* Uniform, before any barrier; redo_from tells this chunk's decision
     * from an earlier one's (a chunk after the stop decides nothing). */
    const uint32_t kept = ctrl->redo_from == first ? ctrl->redo : 0u;
    if (kept == 0)
        return;
    if (a.failed && *a.failed)
        return;
    const pass_shared s = carve_shared<RP>(sh);
    stage_shared<RP>(a, s, first == 0, false);
    const float *from = a.saved ? a.saved : a.A;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.I; i += stride) {
        row_of<RP> row[RP];
        load_row<RP>(row, a, from, i, s.as, first == 0);
#pragma unroll 1
        for (uint32_t c = 0; c < kept; ++c)
            (void)pass_row<RP>(row, a, s, i);
        store_row<RP>(row, a, i);
    }
}

/* The kernel for a rank: the rank padded to 8, 16, 32, 64 or 128. */
uint32_t padded_for(uint32_t R)
{
    return R <= 8u ? 8u : R <= 16u ? 16u : R <= 32u ? 32u : R <= 64u ? 64u : 128u;
}

/* The kernels of a chunk for a padded rank: the speculative kernel, its
 * staged form (RP <= 32; nullptr above) and the redo. */
struct chunk_kernels {
    void (*speculate)(pass_args, uint32_t, uint32_t);
    void (*speculate_staged)(pass_args, uint32_t, uint32_t);
    void (*redo)(pass_args, uint32_t);
};

template <uint32_t RP> chunk_kernels kernels_of()
{
    if constexpr (RP <= 32u)
        return {speculate_kernel<RP, false>, speculate_kernel<RP, true>, redo_kernel<RP>};
    else
        return {speculate_kernel<RP, false>, nullptr, redo_kernel<RP>};
}

chunk_kernels kernels_for(uint32_t RP)
{
    switch (RP) {
    case 8:
        return kernels_of<8>();
    case 16:
        return kernels_of<16>();
    case 32:
        return kernels_of<32>();
    case 64:
        return kernels_of<64>();
    default:
        return kernels_of<128>();
    }
}

/* The largest mode's rows times the rank, in floats: the saved rows. */
uint64_t saved_bytes(const thg_context *ctx)
{
    uint64_t rows = 0;
    for (uint32_t m = 0; m < ctx->nmodes; ++m)
        rows = ctx->dims[m] > rows ? ctx->dims[m] : rows;
    return sizeof(float) * rows * ctx->rank;
}

/* The first call after a load: the kernels' shared memory and grid for
 * the loaded rank, and the workspace (device block, pinned staging, and
 * the saved rows where they fit). */
thg_status prepare(thg_context *ctx, char *err, size_t errlen)
{
    if (ctx->nonneg_dev)
        return THG_OK;
    const uint32_t R = ctx->rank, RP = padded_for(R);
    const chunk_kernels k = kernels_for(RP);
    const size_t smem = pass_smem_bytes(RP), staged_smem = speculate_smem_bytes(RP);
    THG_CUDA(cudaFuncSetAttribute((const void *)k.speculate,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    THG_CUDA(cudaFuncSetAttribute((const void *)k.redo, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem));
    int per_sm = 0, redo_per_sm = 0, staged_per_sm = 1;
    THG_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void *)k.speculate,
                                                           (int)pass_threads(RP), smem));
    THG_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&redo_per_sm, (const void *)k.redo,
                                                           (int)pass_threads(RP), smem));
    if (k.speculate_staged) {
        THG_CUDA(cudaFuncSetAttribute((const void *)k.speculate_staged,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)staged_smem));
        THG_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &staged_per_sm, (const void *)k.speculate_staged, (int)pass_threads(RP),
            staged_smem));
    }
    if (per_sm < 1 || redo_per_sm < 1 || staged_per_sm < 1)
        return thg_fail(err, errlen, THG_ERR_DEVICE,
                        "als_update_nonneg: no block of the rank-%u pass kernels fits on an SM "
                        "(%zu bytes of shared memory)",
                        R, k.speculate_staged ? staged_smem : smem);
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
    /* The saved rows are a speed-up, not a need: taken only while at least
     * as much memory stays free after them, and a failed allocation just
     * leaves them out. */
    const uint64_t saved = saved_bytes(ctx);
    void *saved_dev = nullptr;
    if (!ctx->nonneg_no_saved && l.total + 2u * saved <= free_bytes &&
        cudaMalloc(&saved_dev, saved) != cudaSuccess) {
        (void)cudaGetLastError(); /* the failed allocation is not an error here */
        saved_dev = nullptr;
    }
    ctx->nonneg_dev = dev;
    ctx->nonneg_host = host;
    ctx->nonneg_saved = (float *)saved_dev;
    ctx->nonneg_partials = nparts;
    ctx->nonneg_bytes = l.total + (saved_dev ? saved : 0u);
    ctx->workspace_bytes += ctx->nonneg_bytes;
    return THG_OK;
}

/* One chunk: passes first .. first + count - 1, speculated, then redone
 * where fewer stand (both kernels always launched: a graph holds them). */
thg_status launch_chunk(thg_context *ctx, const pass_args &a, uint32_t first, uint32_t count,
                        char *err, size_t errlen)
{
    const uint32_t RP = padded_for(ctx->rank), threads = pass_threads(RP);
    const uint64_t needed = ((uint64_t)a.I + threads - 1) / threads;
    const uint32_t blocks =
        (uint32_t)(needed < ctx->nonneg_partials ? needed : ctx->nonneg_partials);
    const chunk_kernels k = kernels_for(RP);
    const size_t smem = pass_smem_bytes(RP);
    if (a.staged)
        k.speculate_staged<<<blocks, threads, speculate_smem_bytes(RP), ctx->stream>>>(a, first,
                                                                                      count);
    else
        k.speculate<<<blocks, threads, smem, ctx->stream>>>(a, first, count);
    THG_LAUNCHED();
    k.redo<<<blocks, threads, smem, ctx->stream>>>(a, first);
    THG_LAUNCHED();
    return THG_OK;
}

/* Every chunk of `sweeps` passes; the update on its own (`look`) reads the
 * stop flag back between chunks and launches no more after it. */
thg_status launch_passes(thg_context *ctx, const pass_args &a, uint32_t sweeps, bool look,
                         char *err, size_t errlen)
{
    nonneg_ctrl *ctrl_dev = (nonneg_ctrl *)ctx->nonneg_dev;
    nonneg_ctrl *ctrl_host = (nonneg_ctrl *)ctx->nonneg_host;
    for (uint32_t first = 0; first < sweeps; first += kFuse) {
        const uint32_t count = sweeps - first < kFuse ? sweeps - first : kFuse;
        const thg_status st = launch_chunk(ctx, a, first, count, err, errlen);
        if (st != THG_OK)
            return st;
        if (look && first + count < sweeps) {
            THG_CUDA(cudaMemcpyAsync(&ctrl_host->stop, &ctrl_dev->stop, sizeof(uint32_t),
                                     cudaMemcpyDeviceToHost, ctx->stream));
            THG_CUDA(cudaStreamSynchronize(ctx->stream));
            if (ctrl_host->stop)
                break;
        }
    }
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
    a.saved = ctx->nonneg_saved;
    a.col_scale = ctx->col_scale + (size_t)mode * R;
    a.V = (double *)(dev + l.v);
    a.scale = (const double *)(dev + l.scale);
    a.ctrl = (nonneg_ctrl *)dev;
    a.partials = (double *)(dev + l.partials);
    a.I = ctx->dims[mode];
    a.R = R;
    a.vector_rows = R % 4u == 0 && ((uintptr_t)a.M % 16u) == 0 && ((uintptr_t)a.A % 16u) == 0 &&
                    ((uintptr_t)a.saved % 16u) == 0;
    a.staged = a.vector_rows && padded_for(R) <= 32u;
    a.tolerance = tolerance;
    a.ridge = ridge;
    a.l1 = l1;
    a.nonneg = nonneg;
    return a;
}

/* Whether the passes add the epilogue's inner products and maxima (a
 * single pass on the staged path, where the epilogue then reads A alone:
 * its tensor-core form); sets a's accumulators if so. */
bool inner_in_pass(const thg_context *ctx, uint32_t mode, uint32_t sweeps, pass_args &a)
{
    const bool here = a.staged && sweeps == 1u && thg_als_tc_chosen(ctx, ctx->dims[mode]);
    a.inner_acc = here ? ctx->als_acc.inner : nullptr;
    a.max_acc = here ? ctx->als_acc.maxbits : nullptr;
    return here;
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
    pass_args a = args_for(ctx, mode, tolerance, ridge, l1, nonneg);
    const bool inner_made = inner_in_pass(ctx, mode, sweeps, a);
    thg_status st = launch_passes(ctx, a, sweeps, true, err, errlen);
    if (st != THG_OK)
        return st;
    st = thg_launch_als_epilogue(ctx, mode, ctx->als_out_dev, nullptr, nullptr, nullptr,
                                 inner_made, err, errlen);
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
    const bool inner_made = inner_in_pass(ctx, mode, m.sweeps, a);
    /* Every chunk is launched (a graph holds a fixed sequence); those after
     * the stop return at once. */
    const thg_status st = launch_passes(ctx, a, m.sweeps, false, err, errlen);
    if (st != THG_OK)
        return st;
    return thg_launch_als_epilogue(ctx, mode, out, ctx->sweep.flags.failed, gram_store,
                                   after_stats, inner_made, err, errlen);
}

void thg_nonneg_free(thg_context *ctx)
{
    ctx->workspace_bytes =
        ctx->workspace_bytes > ctx->nonneg_bytes ? ctx->workspace_bytes - ctx->nonneg_bytes : 0;
    cudaFree(ctx->nonneg_dev);
    cudaFree(ctx->nonneg_saved);
    cudaFreeHost(ctx->nonneg_host);
    ctx->nonneg_dev = nullptr;
    ctx->nonneg_saved = nullptr;
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
    /* The only synchronisation (but between chunks of kFuse passes); also on
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
