/* The MTTKRP kernels and their launches (what they do: mttkrp.cu), as
 * templates that mttkrp.cu dispatches to and the translation units of
 * THG_VEC_ALL and THG_GENERIC (below) instantiate, one group of ranks
 * each. Each group's kernels so form a CUDA module of their own, which a
 * run loads on its first MTTKRP: all of them in one module took the
 * driver 151-200 ms to load (an 87.5 MB cubin; kernels/DESIGN.md, "One
 * CUDA module a group of ranks"). */
#pragma once

#include <string.h>

#include <atomic>

#include "thg_internal.cuh"

namespace thg_mttkrp_kernels {

constexpr uint32_t kNoRow = 0xffffffffu;
constexpr int kBatch = 4;
/* Scheme 2's results up to this size are zeroed whole before the MTTKRP. */
constexpr size_t kMemsetResultBytes = (size_t)4 << 20;

__device__ __forceinline__ void add_to(float &a, const float b) { a += b; }
__device__ __forceinline__ void add_to(float2 &a, const float2 b)
{
    a.x += b.x;
    a.y += b.y;
}
__device__ __forceinline__ void add_to(float4 &a, const float4 b)
{
    a.x += b.x;
    a.y += b.y;
    a.z += b.z;
    a.w += b.w;
}

__device__ __forceinline__ void atomic_add_to(float *dst, const float v) { atomicAdd(dst, v); }
__device__ __forceinline__ void atomic_add_to(float2 *dst, const float2 v)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd(dst, v); /* one vector reduction on Hopper */
#else
    atomicAdd(&dst->x, v.x);
    atomicAdd(&dst->y, v.y);
#endif
}
__device__ __forceinline__ void atomic_add_to(float4 *dst, const float4 v)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd(dst, v); /* one vector reduction on Hopper */
#else
    atomicAdd(&dst->x, v.x);
    atomicAdd(&dst->y, v.y);
    atomicAdd(&dst->z, v.z);
    atomicAdd(&dst->w, v.w);
#endif
}

__device__ __forceinline__ float shfl_up(float v, uint32_t d)
{
    return __shfl_up_sync(0xffffffffu, v, d);
}
__device__ __forceinline__ float2 shfl_up(float2 v, uint32_t d)
{
    return make_float2(__shfl_up_sync(0xffffffffu, v.x, d), __shfl_up_sync(0xffffffffu, v.y, d));
}
__device__ __forceinline__ float4 shfl_up(float4 v, uint32_t d)
{
    return make_float4(__shfl_up_sync(0xffffffffu, v.x, d), __shfl_up_sync(0xffffffffu, v.y, d),
                       __shfl_up_sync(0xffffffffu, v.z, d), __shfl_up_sync(0xffffffffu, v.w, d));
}

/* Scheme 1's last step: the groups' boundary partials summed and each row
 * written once. Slots are in nonzero order, so the non-empty slots of one
 * row are adjacent and rows increase along them.
 *
 * One warp per column; each lane reduces a contiguous range of slots
 * sequentially (rows that start and end inside the range are written
 * there), then a segmented inclusive scan over the lanes' last rows
 * (combine(a, b) = b's row, b + a if the rows are equal: associative since
 * rows only increase) joins rows that span lanes. The merge is on every
 * block's critical path: one thread per column walking all 2 x groups
 * slots is 256 dependent shared-memory steps at R = 32 (~5 us, the whole
 * gap between scheme 1 and scheme 2 on tensors of a few hundred nonzeros
 * per partition), and one thread per slot leaves the chain as long
 * (kernels/DESIGN.md). Needs blockDim.x a multiple of 32. */
template <typename T>
__device__ void merge_boundary_partials(const T *spart, const uint32_t *srow, uint32_t nslots,
                                        uint32_t cols, T *out, bool shared_ends,
                                        uint32_t first_row, uint32_t last_row)
{
    /* A merged row's value: stored, or added when another block may also
     * hold part of it (scheme 2's chunk ends). */
    auto emit = [&](uint32_t row, uint32_t c, const T v) {
        T *dst = out + (size_t)row * cols + c;
        if (shared_ends && (row == first_row || row == last_row))
            atomic_add_to(dst, v);
        else
            *dst = v;
    };
    const uint32_t lane = threadIdx.x % 32;
    const uint32_t warp = threadIdx.x / 32;
    const uint32_t nwarps = blockDim.x / 32;
    const uint32_t per_lane = (nslots + 31) / 32;
    const uint32_t s_begin = lane * per_lane < nslots ? lane * per_lane : nslots;
    const uint32_t s_end = s_begin + per_lane < nslots ? s_begin + per_lane : nslots;
    for (uint32_t c = warp; c < cols; c += nwarps) {
        /* This lane's first row (head) and last row (tail); rows strictly
         * between them are complete here. */
        uint32_t head_row = kNoRow, tail_row = kNoRow;
        T head_sum = T(), tail_sum = T();
        bool several = false;
        for (uint32_t s = s_begin; s < s_end; ++s) {
            const uint32_t r = srow[s];
            if (r == kNoRow)
                continue;
            const T v = spart[(size_t)s * cols + c];
            if (tail_row == kNoRow) {
                head_row = tail_row = r;
                tail_sum = v;
            } else if (r == tail_row) {
                add_to(tail_sum, v);
            } else {
                if (several)
                    emit(tail_row, c, tail_sum);
                else
                    head_sum = tail_sum; /* the head row ends inside this lane */
                several = true;
                tail_row = r;
                tail_sum = v;
            }
        }
        /* Inclusive segmented scan of the tails over the lanes. */
        uint32_t scan_row = tail_row;
        T scan_sum = tail_sum;
#pragma unroll
        for (uint32_t d = 1; d < 32; d *= 2) {
            const uint32_t up_row = __shfl_up_sync(0xffffffffu, scan_row, d);
            const T up_sum = shfl_up(scan_sum, d);
            if (lane >= d && up_row != kNoRow) {
                if (scan_row == kNoRow) {
                    scan_row = up_row;
                    scan_sum = up_sum;
                } else if (up_row == scan_row) {
                    add_to(scan_sum, up_sum);
                }
            }
        }
        /* What the lanes before this one carry into its head row. */
        uint32_t prev_row = __shfl_up_sync(0xffffffffu, scan_row, 1);
        const T prev_sum = shfl_up(scan_sum, 1);
        if (lane == 0)
            prev_row = kNoRow;
        /* The next non-empty lane's head row: a suffix minimum (rows
         * increase, empty lanes hold kNoRow). */
        uint32_t next = head_row;
#pragma unroll
        for (uint32_t d = 1; d < 32; d *= 2) {
            const uint32_t down = __shfl_down_sync(0xffffffffu, next, d);
            if (lane + d < 32 && down < next)
                next = down;
        }
        uint32_t next_head = __shfl_down_sync(0xffffffffu, next, 1);
        if (lane == 31)
            next_head = kNoRow;
        if (tail_row == kNoRow)
            continue;
        if (several) {
            if (prev_row == head_row)
                add_to(head_sum, prev_sum);
            emit(head_row, c, head_sum);
        }
        /* The tail row is complete unless the next lane continues it. */
        if (next_head != tail_row)
            emit(tail_row, c, scan_sum);
    }
}

/* ---- Per-nonzero value functors.
 *
 * Both kernels below run one body (mttkrp_body): a group forms each
 * nonzero's product over the input modes' factor rows, starting from
 * Fn::init(x), then (generalized MTTKRP only) the model value m of the
 * nonzero and g(x, m), which scales the product, and h(x, m), which a
 * reduction adds up; the products then go through the run merging and
 * the scheme's flush. plain_value is the MTTKRP: init(x) = x and nothing
 * else, so its instantiations are the plain kernels' code. */
struct plain_value {
    static constexpr bool kModel = false; /* m is formed (weights, reduction) */
    static constexpr bool kWrite = true;  /* the mode's result is written */
    __device__ __forceinline__ float init(float x) const { return x; }
};

/* The generalized MTTKRP (thg_generalized_mttkrp): the product starts
 * from 1 and is scaled by g(x, m) once m is known. WRITE = false: the
 * reduction alone (THG_MODE_NONE), no result. */
template <bool WRITE>
struct gen_value {
    static constexpr bool kModel = true;
    static constexpr bool kWrite = WRITE;
    thg_gen_params p;
    __device__ __forceinline__ float init(float) const { return 1.0f; }
    __device__ __forceinline__ float scale(float x, float m) const
    {
        if (p.elementwise == THG_ELEMENTWISE_POISSON_RATIO)
            return __fdividef(x, fmaxf(m, p.epsilon)); /* epsilon >= FLT_MIN */
        return p.elementwise == THG_ELEMENTWISE_RESIDUAL ? m - x : x;
    }
    __device__ __forceinline__ bool reduces() const { return p.reduction != THG_REDUCTION_NONE; }
    __device__ __forceinline__ double reduce(float x, float m) const
    {
        switch (p.reduction) {
        case THG_REDUCTION_POISSON_LOG_LIKELIHOOD:
            /* x log(m), 0 where x == 0, -inf where x > 0 and m <= 0. */
            return x == 0.0f ? 0.0 : (double)x * (m > 0.0f ? (double)logf(m) : -INFINITY);
        case THG_REDUCTION_SQUARED_RESIDUAL: {
            const double d = (double)m - (double)x;
            return d * d;
        }
        case THG_REDUCTION_INNER_PRODUCT:
            return (double)x * (double)m;
        default:
            return 0.0;
        }
    }
    __device__ __forceinline__ const thg_gen_params *params() const { return &p; }
};

__device__ __forceinline__ void scale_by(float &a, float s) { a *= s; }
__device__ __forceinline__ void scale_by(float4 &a, float s)
{
    a.x *= s;
    a.y *= s;
    a.z *= s;
    a.w *= s;
}
/* sum over the elements of w .* f .* p */
__device__ __forceinline__ float dot(float a, float p) { return a * p; }
__device__ __forceinline__ float dot(float4 a, float4 p)
{
    return a.x * p.x + a.y * p.y + a.z * p.z + a.w * p.w;
}
__device__ __forceinline__ float times(float w, float f) { return w * f; }
__device__ __forceinline__ float4 times(float4 w, float4 f)
{
    return make_float4(w.x * f.x, w.y * f.y, w.z * f.z, w.w * f.w);
}

/* The model's weight of column r, with the factors' column scales folded
 * in: the stored factors are the true ones divided by col_scale
 * (thg_context), so m = sum_r (w_r prod_k col_scale_k[r]) prod_k F_k(i_k, r)
 * over the stored F_k. */
__device__ __forceinline__ float model_weight(const thg_gen_params &p, uint32_t r)
{
    float w = p.weights ? p.weights[r] : 1.0f;
    for (uint32_t m = 0; m < p.nmodes; ++m)
        w *= p.col_scale[(size_t)m * p.rank + r];
    return w;
}
__device__ __forceinline__ void load_model_weight(const thg_gen_params &p, uint32_t col, float &w)
{
    w = model_weight(p, col);
}
__device__ __forceinline__ void load_model_weight(const thg_gen_params &p, uint32_t col,
                                                  float4 &w)
{
    w = make_float4(model_weight(p, 4 * col), model_weight(p, 4 * col + 1),
                    model_weight(p, 4 * col + 2), model_weight(p, 4 * col + 3));
}

/* A block's reduction partials added into p.red_acc, one double atomic a
 * block; the last block to finish writes the sum to p.red_out (mapped host
 * memory) and re-zeroes the accumulator and its counter for the next call.
 * Every thread of the block calls it; blockDim.x is a multiple of 32. */
static __device__ void finish_reduction(double v, const thg_gen_params &p)
{
    __shared__ double warp_sums[32];
#pragma unroll
    for (uint32_t d = 16; d > 0; d /= 2)
        v += __shfl_down_sync(0xffffffffu, v, d);
    const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0)
        warp_sums[warp] = v;
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    double s = 0.0;
    for (uint32_t w = 0; w < blockDim.x / 32; ++w)
        s += warp_sums[w];
    atomicAdd(p.red_acc, s);
    __threadfence();
    if (atomicAdd(p.red_count, 1u) != gridDim.x - 1)
        return;
    __threadfence();
    *p.red_out = atomicAdd(p.red_acc, 0.0); /* every block's sum is in */
    *p.red_acc = 0.0;
    *p.red_count = 0u;
}

/* The body both kernels share. Src is the kernel's way of forming its
 * nonzeros' products (scalar_source, vec_source): Src::T the element of a
 * lane's columns (float or float4), src.for_each_batch(fn, visit) hands
 * visit B nonzeros at a time (rows, x(b) giving the values, products), in
 * the stretch's order, rows kNoRow past its end; x is a Src::Values. `out` is the result (cols elements a
 * row), smem the block's boundary partials. */
template <int RL, int RPT, bool OWNED, class Fn, class Src>
__device__ __forceinline__ void mttkrp_body(const Src &src, const Fn &fn,
                                            typename Src::T *out, typename Src::T *smem,
                                            unsigned long long *stamp)
{
    using T = typename Src::T;
    constexpr int B = Src::B;
    const uint32_t C = src.cols;
    const uint32_t lane = threadIdx.x % RL;
    const uint32_t group = threadIdx.x / RL;
    const uint32_t ngroups = blockDim.x / RL;
    const uint32_t pbegin = src.offsets[blockIdx.x];
    const uint32_t len = src.offsets[blockIdx.x + 1] - pbegin;

    T *spart = smem;                                           /* [2 * ngroups][C] */
    uint32_t *srow = (uint32_t *)(smem + 2 * (size_t)ngroups * C); /* [2 * ngroups] */
    if (Fn::kWrite && lane == 0) {
        srow[2 * group] = kNoRow;
        srow[2 * group + 1] = kNoRow;
    }
    /* Scheme 2: the chunk's end rows, which other blocks may share; kept in
     * shared memory so that no register stays live across the main loop. */
    __shared__ uint32_t block_ends[2];
    if (Fn::kWrite && !OWNED && threadIdx.x == 0) {
        block_ends[0] = len > 0 ? src.out_index(pbegin) : kNoRow;
        block_ends[1] = len > 0 ? src.out_index(pbegin + len - 1) : kNoRow;
    }
    thg_stamp_start(stamp);
    /* Lane 0's writes of srow happen before its own later writes; other
     * lanes read srow only after the barrier below. */

    T acc[RPT];
#pragma unroll
    for (int j = 0; j < RPT; ++j)
        acc[j] = T();
    uint32_t cur = kNoRow;
    bool first_run = true;
    /* Generalized MTTKRP: the model's weights of this lane's columns, and
     * this thread's part of the reduction. */
    T w[RPT];
    /* w .* A_mode(wa_row, :), this lane's columns: the nonzeros of a run
     * share their output row, so it is gathered once a run, not once a
     * nonzero (the one row the plain MTTKRP does not read). */
    /* (At four columns a lane, the widest rows, the cache would not fit in
     * the registers: those gather the row at each nonzero.) */
    constexpr bool kRowCache = RPT < 4;
    T wa[RPT];
    uint32_t wa_row = kNoRow;
    double red = 0.0;
    if constexpr (Fn::kModel) {
#pragma unroll
        for (int j = 0; j < RPT; ++j) {
            w[j] = T();
            if (src.col_ok(j))
                load_model_weight(*fn.params(), src.col(j), w[j]);
        }
    }

    /* slot 0: first run of the stretch, 1: last run, -1: an interior run. */
    auto flush = [&](uint32_t out_row, int slot) {
#pragma unroll
        for (int j = 0; j < RPT; ++j) {
            if (!src.col_ok(j))
                continue;
            const uint32_t c = src.col(j);
            if (slot < 0)
                out[(size_t)out_row * C + c] = acc[j];
            else
                spart[(2 * group + slot) * C + c] = acc[j];
        }
        if (slot >= 0 && lane == 0)
            srow[2 * group + slot] = out_row;
    };

    src.for_each_batch(fn, [&](const uint32_t(&row)[B], const typename Src::Values &x,
                               T(&prod)[B][RPT]) {
        if constexpr (Fn::kModel) {
            /* m = sum over the columns of w .* A_mode(row, :) .* prod:
             * this lane's columns, then the group's lanes. */
#pragma unroll
            for (int b = 0; b < B; ++b) {
                const uint32_t orow = row[b] == kNoRow ? 0u : row[b]; /* row 0 exists */
                float part = 0.0f;
                if constexpr (kRowCache) {
                    if (orow != wa_row) {
                        wa_row = orow;
#pragma unroll
                        for (int j = 0; j < RPT; ++j)
                            wa[j] = src.col_ok(j) ? times(w[j], src.out_factor(orow, j)) : T();
                    }
#pragma unroll
                    for (int j = 0; j < RPT; ++j)
                        if (src.col_ok(j))
                            part += dot(wa[j], prod[b][j]);
                } else {
#pragma unroll
                    for (int j = 0; j < RPT; ++j)
                        if (src.col_ok(j))
                            part += dot(times(w[j], src.out_factor(orow, j)), prod[b][j]);
                }
                const float m = src.group_sum(part);
                const float xb = x(b);
                const float g = fn.scale(xb, m);
#pragma unroll
                for (int j = 0; j < RPT; ++j)
                    scale_by(prod[b][j], g);
                if (fn.reduces() && lane == 0 && row[b] != kNoRow)
                    red += fn.reduce(xb, m);
            }
        }
        if constexpr (Fn::kWrite) {
#pragma unroll
            for (int b = 0; b < B; ++b) {
                if (row[b] == kNoRow) { /* past the end of the stretch */
                    if (Src::kBreakAtEnd)
                        break;
                    continue;
                }
                if (row[b] != cur) {
                    if (cur != kNoRow) {
                        flush(cur, first_run ? 0 : -1);
                        first_run = false;
                    }
                    cur = row[b];
#pragma unroll
                    for (int j = 0; j < RPT; ++j)
                        acc[j] = T();
                }
#pragma unroll
                for (int j = 0; j < RPT; ++j)
                    add_to(acc[j], prod[b][j]);
            }
        }
    });

    if constexpr (Fn::kWrite) {
        if (cur != kNoRow)
            flush(cur, first_run ? 0 : 1);
        __syncthreads();
        merge_boundary_partials(spart, srow, 2 * ngroups, C, out, !OWNED,
                                OWNED ? kNoRow : block_ends[0], OWNED ? kNoRow : block_ends[1]);
        thg_record_result_scale(src.col_scale, src.result_scale, src.nmodes, src.out_mode,
                                src.rank);
    }
    if constexpr (Fn::kModel) {
        if (fn.reduces()) /* uniform */
            finish_reduction(red, *fn.params());
    }
    thg_stamp_end(stamp);
}

/* A group's stretch of its block's partition: the partition's nonzeros
 * dealt evenly over the block's groups of RL lanes. */
struct group_stretch {
    uint32_t begin, end;
    uint32_t len, ngroups; /* the partition's length and the block's groups */
};

template <int RL>
__device__ __forceinline__ group_stretch stretch_of_group(const uint32_t *offsets)
{
    group_stretch g;
    const uint32_t group = threadIdx.x / RL;
    g.ngroups = blockDim.x / RL;
    const uint32_t pbegin = offsets[blockIdx.x];
    g.len = offsets[blockIdx.x + 1] - pbegin;
    g.begin = pbegin + (uint32_t)((uint64_t)g.len * group / g.ngroups);
    g.end = pbegin + (uint32_t)((uint64_t)g.len * (group + 1) / g.ngroups);
    return g;
}

/* ---- The generic kernel (any rank): each group takes kBatch nonzeros at
 * a time, every lane loading their indices and values itself. */
template <int RL, int RPT, bool MODEL>
struct scalar_source {
    using T = float;
    /* The generalized MTTKRP keeps the values and the model's weights
     * beside the batch: narrow rows two nonzeros at a time (4 spilled;
     * ptxas is no kinder to wider rows with 2). */
    static constexpr int B = MODEL && RPT == 1 ? 2 : kBatch;
    static constexpr bool kBreakAtEnd = true;
    struct Values {
        float v[B];
        __device__ __forceinline__ float operator()(int b) const { return v[b]; }
    };
    const thg_mttkrp_args &a;
    const uint32_t *offsets;
    const uint32_t *out_idx;
    const float *out_fac;
    const float *col_scale;
    float *result_scale;
    uint32_t cols, rank, nmodes, out_mode;
    uint32_t lane, gbegin, gend;
    uint32_t mask; /* the group's lanes: groups of one warp may leave the loop apart */

    __device__ __forceinline__ explicit scalar_source(const thg_mttkrp_args &args) : a(args)
    {
        offsets = a.offsets;
        out_idx = a.idx[a.out_mode];
        out_fac = a.factor[a.out_mode];
        col_scale = a.col_scale;
        result_scale = a.result_scale;
        cols = rank = a.rank;
        nmodes = a.nmodes;
        out_mode = a.out_mode;
        lane = threadIdx.x % RL;
        const group_stretch g = stretch_of_group<RL>(a.offsets);
        gbegin = g.begin;
        gend = g.end;
        mask = RL == 32 ? 0xffffffffu : ((1u << RL) - 1u) << (threadIdx.x % 32 / RL * RL);
    }
    __device__ __forceinline__ uint32_t out_index(uint32_t k) const { return out_idx[k]; }
    __device__ __forceinline__ uint32_t col(int j) const { return lane + j * RL; }
    __device__ __forceinline__ bool col_ok(int j) const { return lane + j * RL < rank; }
    __device__ __forceinline__ float out_factor(uint32_t row, int j) const
    {
        return out_fac[(size_t)row * rank + lane + j * RL];
    }
    __device__ __forceinline__ float group_sum(float v) const
    {
#pragma unroll
        for (int d = RL / 2; d > 0; d /= 2)
            v += __shfl_xor_sync(mask, v, d);
        return v;
    }

    /* B nonzeros at a time: their index, value and factor-row loads are
     * independent, so they are in flight together; the run logic then
     * consumes them in order. */
    template <class Fn, class Visit>
    __device__ __forceinline__ void for_each_batch(const Fn &fn, Visit &&visit) const
    {
        const uint32_t R = rank;
        for (uint32_t k0 = gbegin; k0 < gend; k0 += B) {
            uint32_t krow[B];
            Values x;
            float prod[B][RPT];
#pragma unroll
            for (int b = 0; b < B; ++b) {
                const bool valid = k0 + b < gend;
                krow[b] = valid ? out_idx[k0 + b] : kNoRow;
                x.v[b] = valid ? a.vals[k0 + b] : 0.0f;
                const float v = fn.init(x.v[b]);
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
                uint32_t fi[B];
#pragma unroll
                for (int b = 0; b < B; ++b)
                    fi[b] = k0 + b < gend ? a.idx[m][k0 + b] : 0u; /* row 0 exists: harmless */
#pragma unroll
                for (int b = 0; b < B; ++b) {
                    const float *f = a.factor[m] + (size_t)fi[b] * R;
#pragma unroll
                    for (int j = 0; j < RPT; ++j) {
                        const uint32_t r = lane + j * RL;
                        if (r < R)
                            prod[b][j] *= f[r];
                    }
                }
            }
            visit(krow, x, prod);
        }
    }
};

template <int RL, int RPT, bool OWNED, class Fn>
__global__ void __launch_bounds__(1024) mttkrp_kernel(const thg_mttkrp_args a, const Fn fn)
{
    extern __shared__ float smem[];
    const scalar_source<RL, RPT, Fn::kModel> src(a);
    mttkrp_body<RL, RPT, OWNED>(src, fn, a.out, smem, a.stamp);
}

/* ---- The vector kernel: the plain MTTKRP at every rank but odd ones over
 * 64, and the generalized one at multiples of 4 (the common case).
 *
 * MTTKRP here is bound by instruction issue, not memory (ncu on the
 * generic kernel above: SM ~60%, L2 5%, DRAM 3%), and the generic kernel
 * spends ~67 issue slots per nonzero (one warp per nonzero at R = 32:
 * broadcast loads of every index, 64-bit address arithmetic per mode,
 * run-time mode checks). Here a group of RL lanes (8 at R = 32) owns a
 * nonzero and each lane handles RPT float4 columns, so one warp
 * instruction serves 32/RL nonzeros; a group loads the metadata of RL
 * consecutive nonzeros coalesced (one lane each) and hands it round with
 * __shfl_sync; the input modes come pre-compacted (no out_mode test) and,
 * for 3 to 5 modes, as a compile-time count.
 *
 * A lane's columns are elements of type T: float4 where the rank is a
 * multiple of 4, float2 where it is even, float where it is odd (up to 64),
 * so that every row starts at an element boundary (rows are `rank` floats
 * apart).
 * The narrower elements take more load instructions a row, but keep the
 * coalesced metadata and a warp instruction serving 32/RL nonzeros: one
 * H200, all-mode, against the generic kernel they replace for the plain
 * MTTKRP: kernels/DESIGN.md, "Ranks that are not multiples of 4". */
template <class T>
struct vec_args {
    const uint32_t *in_idx[THG_MAX_MODES - 1];
    const T *in_factor[THG_MAX_MODES - 1];
    const uint32_t *out_idx;
    const T *out_factor; /* the output mode's factor (generalized MTTKRP's model) */
    const float *vals;
    const uint32_t *offsets;
    T *out;
    uint32_t nin;  /* input modes: nmodes - 1 */
    uint32_t cols; /* elements of T a row: rank / kWidth<T> */
    unsigned long long *stamp; /* as thg_mttkrp_args::stamp */
    const float *col_scale;    /* as thg_mttkrp_args */
    float *result_scale;
    uint32_t out_mode;
};

/* Floats in one element of a lane's columns. */
template <class T>
constexpr int kWidth = (int)(sizeof(T) / sizeof(float));

__device__ __forceinline__ void mul_by(float &a, const float b) { a *= b; }
__device__ __forceinline__ void mul_by(float2 &a, const float2 b)
{
    a.x *= b.x;
    a.y *= b.y;
}
__device__ __forceinline__ void mul_by(float4 &a, const float4 b)
{
    a.x *= b.x;
    a.y *= b.y;
    a.z *= b.z;
    a.w *= b.w;
}

template <class T>
__device__ __forceinline__ T splat(float v);
template <>
__device__ __forceinline__ float splat<float>(float v)
{
    return v;
}
template <>
__device__ __forceinline__ float2 splat<float2>(float v)
{
    return make_float2(v, v);
}
template <>
__device__ __forceinline__ float4 splat<float4>(float v)
{
    return make_float4(v, v, v, v);
}

/* A lane's RPT elements of W floats in float4 registers' worth (what the
 * register budget below is counted in). */
constexpr int vec_rpt4(int rpt, int width) { return (rpt * width + 3) / 4; }

/* Threads per block the vector kernel may use: wide rows keep more
 * registers per thread, so they get half a block's threads. */
constexpr uint32_t vec_max_threads(int rpt4) { return rpt4 == 1 ? 1024u : 512u; }

/* Nonzeros whose gathers a group issues together: 4 for narrow rows and
 * few modes, fewer where registers run out (ptxas -v: no spills). The
 * generalized MTTKRP keeps the model's weights beside them. */
__host__ __device__ constexpr int vec_batch(int rl, int rpt, int nin, bool model, bool exact)
{
    /* Exact rows: the batch's gathers are all in flight at once, holding
     * their registers together: 2 at R = 32 with three modes. */
    if (exact && rl == 8 && rpt == 1 && nin == 2 && !model)
        return 2;
    /* Both schemes stage boundary partials in shared memory, which costs a
     * few registers in the loop: 4-mode tensors at R = 32 take 2 (4 spilled). */
    return model && rpt > 1              ? 1
           : model && rl >= 8 && nin > 2 ? 1
           : model && rl >= 8            ? 2
           : rpt == 1                    ? (nin == 2 ? (rl < 4 ? rl : 4) : 2)
           : (rpt == 2 && (nin == 2 || nin == 3)) ? 2
                                                  : 1;
}

/* The stretch's indices and values, each read once: loaded past L1
 * (no_allocate), so that they do not evict the factor rows the gathers
 * reuse there (where: launch_vec_l1). */
__device__ __forceinline__ uint32_t stream_load(const uint32_t *p)
{
    uint32_t v;
    asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ float stream_load(const float *p)
{
    float v;
    asm("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

/* The stretch's indices and values: past L1 or through it, as the launch
 * chose (launch_vec_l1). */
template <bool PAST_L1, class P>
__device__ __forceinline__ P meta_load(const P *p)
{
    if constexpr (PAST_L1)
        return stream_load(p);
    else
        return __ldg(p);
}

template <class E, int RL, int RPT, int NIN, bool MODEL, bool EXACT, bool PAST_L1>
struct vec_source {
    using T = E;
    /* (Counted in elements: a narrower element's loads each hold an
     * address, so its rows in flight take as many registers.) */
    static constexpr int B = vec_batch(RL, RPT, NIN, MODEL, EXACT);
    static constexpr int NMAX = NIN > 0 ? NIN : (int)THG_MAX_MODES - 1;
    static constexpr bool kBreakAtEnd = false;
    /* Input modes whose last gathered row a group keeps (for_each_batch):
     * the first two, in the plain MTTKRP at R = 16 to 128 (EXACT). The
     * copies keep each output row's nonzeros in the order of the other
     * modes, so consecutive nonzeros often share the first input modes'
     * rows. Measured (kernels/DESIGN.md): all-mode 1.04-1.23x faster at
     * R = 16 and 32, 1.05-1.20x at 64 to 128; keeping every input mode's
     * row no faster, the first mode's alone slower (nell-2 +20%), and with
     * a column test around each gather (R = 16 and 64 before they went
     * EXACT) slower. */
    static constexpr int kReuse = MODEL || !EXACT ? 0 : (NMAX < 2 ? NMAX : 2);
    /* Nonzero b's value, shuffled from the lane that loaded it (again
     * where the model needs it: fewer registers live across the gathers).
     * The whole warp calls it. */
    struct Values {
        float my_val;
        int j0;
        __device__ __forceinline__ float operator()(int b) const
        {
            return __shfl_sync(0xffffffffu, my_val, j0 + b, RL);
        }
    };
    const vec_args<E> &a;
    const uint32_t *offsets;
    const float *col_scale;
    float *result_scale;
    uint32_t cols, rank, nmodes, out_mode;
    uint32_t lane, gbegin, gend, nchunks;
    int nin;

    __device__ __forceinline__ explicit vec_source(const vec_args<E> &args) : a(args)
    {
        offsets = a.offsets;
        col_scale = a.col_scale;
        result_scale = a.result_scale;
        cols = a.cols;
        rank = (uint32_t)kWidth<E> * a.cols;
        nmodes = a.nin + 1u;
        out_mode = a.out_mode;
        lane = threadIdx.x % RL;
        const group_stretch g = stretch_of_group<RL>(a.offsets);
        gbegin = g.begin;
        gend = g.end;
        /* Every group runs the same number of chunks (the longest stretch's),
         * so the whole warp takes part in every shuffle. */
        nchunks = ((g.len + g.ngroups - 1) / g.ngroups + RL - 1) / RL;
        nin = NIN > 0 ? NIN : (int)a.nin;
    }
    __device__ __forceinline__ uint32_t out_index(uint32_t k) const { return meta_load<PAST_L1>(a.out_idx + k); }
    __device__ __forceinline__ uint32_t col(int t) const { return lane + t * RL; }
    __device__ __forceinline__ bool col_ok(int t) const { return EXACT || lane + t * RL < cols; }
    __device__ __forceinline__ E out_factor(uint32_t row, int t) const
    {
        return __ldg(a.out_factor + (size_t)row * cols + lane + t * RL);
    }
    __device__ __forceinline__ float group_sum(float v) const
    {
#pragma unroll
        for (int d = RL / 2; d > 0; d /= 2)
            v += __shfl_xor_sync(0xffffffffu, v, d);
        return v;
    }

    template <class Fn, class Visit>
    __device__ __forceinline__ void for_each_batch(const Fn &fn, Visit &&visit) const
    {
        const uint32_t C = EXACT ? (uint32_t)(RL * RPT) : cols;
        /* The last row gathered from each of the first kReuse input modes:
         * a nonzero with the same index as the group's previous one uses it
         * again instead of gathering it. Its lanes' load is predicated off,
         * so the warp's load asks L1 for fewer lines (ncu, a mode of nell-2:
         * 1.54 -> 1.31 ms, L1 70% -> 64% busy, its hit rate 55% -> 34%: the
         * repeats were the hits it no longer serves). The row is selected
         * after the load, not as its destination, so that no load waits for
         * the one before it. */
        static_assert(kReuse == 0 || EXACT, "a kept row is the lane's RPT elements");
        uint32_t last_i[kReuse > 0 ? kReuse : 1];
        E last_v[kReuse > 0 ? kReuse : 1][RPT];
#pragma unroll
        for (int q = 0; q < kReuse; ++q)
            last_i[q] = kNoRow;
        for (uint32_t chunk = 0; chunk < nchunks; ++chunk) {
            const uint32_t k = gbegin + chunk * RL + lane;
            const bool valid = k < gend;
            const uint32_t my_row = valid ? meta_load<PAST_L1>(a.out_idx + k) : kNoRow;
            const float my_val = valid ? meta_load<PAST_L1>(a.vals + k) : 0.0f;
            uint32_t my_idx[NMAX];
#pragma unroll
            for (int q = 0; q < NMAX; ++q)
                my_idx[q] = (q < nin && valid) ? meta_load<PAST_L1>(a.in_idx[q] + k) : 0u;

#pragma unroll
            for (int j0 = 0; j0 < RL; j0 += B) {
                uint32_t row[B];
                E prod[B][RPT];
                const Values x{my_val, j0};
#pragma unroll
                for (int b = 0; b < B; ++b) {
                    row[b] = __shfl_sync(0xffffffffu, my_row, j0 + b, RL);
                    const float v = fn.init(x(b));
#pragma unroll
                    for (int t = 0; t < RPT; ++t)
                        prod[b][t] = splat<E>(v);
                }
#pragma unroll
                for (int q = 0; q < NMAX; ++q) {
                    if (q >= nin)
                        break;
#pragma unroll
                    for (int b = 0; b < B; ++b) {
                        /* Past the stretch's end the index is 0: row 0 exists. */
                        const uint32_t i = __shfl_sync(0xffffffffu, my_idx[q], j0 + b, RL);
                        const E *f = a.in_factor[q] + (size_t)i * C;
                        if (q < kReuse) {
                            /* EXACT: every lane's columns are the row's. */
                            const bool fresh = i != last_i[q];
#pragma unroll
                            for (int t = 0; t < RPT; ++t) {
                                E v;
                                if (fresh)
                                    v = __ldg(f + lane + t * RL);
                                v = fresh ? v : last_v[q][t];
                                last_v[q][t] = v;
                                mul_by(prod[b][t], v);
                            }
                            last_i[q] = i;
                            continue;
                        }
#pragma unroll
                        for (int t = 0; t < RPT; ++t) {
                            const uint32_t c = lane + t * RL;
                            if (EXACT || c < C)
                                mul_by(prod[b][t], __ldg(f + c));
                        }
                    }
                }
                visit(row, x, prod);
            }
        }
    }
};

template <class E, int RL, int RPT, int NIN, bool OWNED, bool EXACT, bool PAST_L1, class Fn>
__global__ void __launch_bounds__(vec_max_threads(vec_rpt4(RPT, kWidth<E>)), 1)
    mttkrp_vec_kernel(const vec_args<E> a, const Fn fn)
{
    extern __shared__ float4 smem4[];
    const vec_source<E, RL, RPT, NIN, Fn::kModel, EXACT, PAST_L1> src(a);
    mttkrp_body<RL, RPT, OWNED>(src, fn, a.out, reinterpret_cast<E *>(smem4), a.stamp);
}

/* Lanes per group, elements per lane and floats per element for a rank. */
struct vec_config {
    int lanes, rpt, width;
};

/* The element: the widest whose size divides the rank's row. Multiples of
 * 4 keep the lanes chosen for them (kernels/DESIGN.md); the narrower
 * elements take 8 lanes (4 for the narrowest rows) and as many elements a
 * lane as cover the row, in powers of two up to 8 (16 on 8 lanes spilled
 * 12-60 bytes with three and four input modes). */
inline vec_config vec_config_for(uint32_t rank)
{
    const int width = rank % 4 == 0 ? 4 : rank % 2 == 0 ? 2 : 1;
    const uint32_t cols = rank / (uint32_t)width;
    if (width == 4) {
        /* R = 8 on 4 lanes, two of them idle: 2 lanes took 1.5-1.8x as
         * long as 4 (kernels/DESIGN.md). */
        if (cols <= 1)
            return {2, 1, 4};
        if (cols <= 4)
            return {4, 1, 4};
        if (cols <= 8)
            return {8, 1, 4};
        if (cols <= 16)
            return {8, 2, 4};
        if (cols <= 24)
            return {8, 3, 4};
        return {8, 4, 4};
    }
    if (cols <= 4)
        return {4, 1, width};
    int rpt = 1;
    while (8u * (uint32_t)rpt < cols)
        rpt *= 2;
    return {8, rpt, width};
}

/* The vector kernel serves the plain MTTKRP at every rank but odd ones over
 * 64, and the generalized MTTKRP at multiples of 4 (its model row and
 * weights have float4 forms only); the rest run the generic kernel. Odd
 * ranks over 64 on 16 lanes of 8 floats took 1.17-1.24x as long as the
 * generic kernel's 32 lanes (R = 99, kernels/DESIGN.md). */
inline bool use_vec_kernel(uint32_t rank, bool model)
{
    if (rank % 4 == 0)
        return true;
    return !model && (rank % 2 == 0 || rank <= 64);
}

/* Generic kernel: lanes per group for a rank (the RL template value). */
inline uint32_t generic_lanes(uint32_t rank) { return rank <= 8 ? 8u : rank <= 16 ? 16u : 32u; }

/* Shared memory of a block (either scheme): two boundary partials of
 * `rank` floats and two row ids per group. */
inline size_t block_smem_bytes(uint32_t groups, uint32_t rank)
{
    return sizeof(float) * 2 * (size_t)groups * rank + sizeof(uint32_t) * 2 * (size_t)groups;
}

constexpr size_t kSmemLimit = 48 * 1024; /* no opt-in needed below this */

/* Scheme 1 (owned) or 2; a kernel that writes no result (the reduction
 * alone) has no scheme and one instantiation. */
template <int RL, int RPT, class Fn>
cudaError_t launch(bool owned, uint32_t blocks, uint32_t P, cudaStream_t stream,
                   const thg_mttkrp_args &a, const Fn &fn)
{
    const uint32_t threads = RL * P;
    const size_t smem = Fn::kWrite ? block_smem_bytes(P, a.rank) : 0;
    if constexpr (Fn::kWrite) {
        if (owned) {
            mttkrp_kernel<RL, RPT, true><<<blocks, threads, smem, stream>>>(a, fn);
            return cudaGetLastError();
        }
    }
    mttkrp_kernel<RL, RPT, false><<<blocks, threads, smem, stream>>>(a, fn);
    return cudaGetLastError();
}

/* How a vector kernel is launched (launch_vec_any). */
struct vec_launch {
    bool owned; /* scheme 1 */
    uint32_t blocks, groups;
    cudaStream_t stream;
    uint32_t rank;
    bool factors_fit_l2; /* launch_vec_l1 */
    int device;
    /* Shared memory that keeps one block an SM, 0 where not wanted (more
     * partitions than SMs) or not possible (one_block_smem). */
    uint32_t one_block_smem_bytes;
};

/* One kernel's choice of shared memory (one_block_smem), for the last
 * device, block size and size asked: bits 0-16 the size asked, 17-27 the
 * threads, 28-35 the device, 36-53 the size to launch with, 63 set once
 * filled. One word, so that instances on several host threads read it
 * whole. */
struct smem_memo {
    std::atomic<uint64_t> word{0};
};

/* The dynamic shared memory to launch `kernel` with: *smem, or
 * L.one_block_smem_bytes where two of its blocks would fit an SM. The
 * grid is one block a partition, kappa of them, at most the SM count, and
 * the sweep runs each mode's solve on a side stream beside its MTTKRP
 * (sweep.cu). Where two blocks fit an SM, the MTTKRP took 1.3-1.8x as long
 * inside the sweep as alone, as if two partitions had shared an SM while
 * the solve held another: one H200, R = 48, nell-2's MTTKRPs 11.27 ms
 * inside against 8.76 alone, vast's 10.40 against 7.61. With the solve
 * before the MTTKRP on one stream, or with this, they take their time
 * alone: 8.76 and 7.61 ms (kernels/DESIGN.md, "One block an SM"). Over
 * half an SM's shared memory keeps one block an SM; the solve still fits
 * beside it up to R = 64 (above, its registers do not, and it delays one
 * partition by its length). A kernel of one block an SM anyway keeps its
 * size: the larger shared memory takes room from L1 (vast at R = 80: 11.02
 * against 10.25 ms alone). */
inline cudaError_t one_block_smem(smem_memo &memo, const vec_launch &L, const void *kernel,
                           uint32_t threads, size_t *smem)
{
    const uint64_t key =
        (uint64_t)*smem | (uint64_t)threads << 17 | (uint64_t)(L.device & 0xff) << 28;
    const uint64_t seen = memo.word.load(std::memory_order_relaxed);
    if ((seen >> 63) != 0 && (seen & ((1ull << 36) - 1)) == key) {
        *smem = (size_t)((seen >> 36) & ((1ull << 18) - 1));
        return cudaSuccess;
    }
    int per_sm = 0;
    cudaError_t e =
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, (int)threads, *smem);
    size_t use = *smem;
    const size_t half = L.one_block_smem_bytes;
    if (e == cudaSuccess && per_sm >= 2 && half > use) {
        e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)half);
        if (e == cudaSuccess)
            e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, (int)threads, half);
        if (e == cudaSuccess && per_sm == 1)
            use = half;
    }
    if (e != cudaSuccess)
        return e;
    memo.word.store(1ull << 63 | (uint64_t)use << 36 | key, std::memory_order_relaxed);
    *smem = use;
    return cudaSuccess;
}

template <class E, int RL, int RPT, int NIN, bool OWNED, bool EXACT, bool PAST_L1, class Fn>
cudaError_t launch_vec_kernel(const vec_launch &L, const vec_args<E> &a, const Fn &fn)
{
    const uint32_t threads = RL * L.groups;
    size_t smem = Fn::kWrite ? block_smem_bytes(L.groups, L.rank) : 0;
    auto *kernel = mttkrp_vec_kernel<E, RL, RPT, NIN, OWNED, EXACT, PAST_L1, Fn>;
    if constexpr (Fn::kWrite && !Fn::kModel) {
        static smem_memo memo;
        if (L.one_block_smem_bytes != 0) {
            const cudaError_t e = one_block_smem(memo, L, (const void *)kernel, threads, &smem);
            if (e != cudaSuccess)
                return e;
        }
    }
    kernel<<<L.blocks, threads, smem, L.stream>>>(a, fn);
    return cudaGetLastError();
}

template <class E, int RL, int RPT, int NIN, bool EXACT, bool PAST_L1, class Fn>
cudaError_t launch_vec_scheme(const vec_launch &L, const vec_args<E> &a, const Fn &fn)
{
    if constexpr (Fn::kWrite) {
        if (L.owned)
            return launch_vec_kernel<E, RL, RPT, NIN, true, EXACT, PAST_L1>(L, a, fn);
    }
    return launch_vec_kernel<E, RL, RPT, NIN, false, EXACT, PAST_L1>(L, a, fn);
}

/* Where the indices and values are loaded (meta_load). A group's chunk of
 * RL nonzeros reads RL x 4 bytes of each array: whole 32-byte sectors from
 * RL = 8 on, which go past L1 so as not to evict the rows the gathers
 * reuse there. Narrower chunks read a sector in parts, which L1 must keep
 * between them: through L1 (past it, the rank-16 all-mode MTTKRP took
 * 1.3-1.5x as long on the enron and vast shapes). The plain MTTKRP's
 * 8-lane kernels go past L1 only where the input factors fit in L2
 * together: where they do not, the gathers miss L2 anyway and the indices'
 * L1 lines are worth keeping (one H200, the Nell-1 shape's all-mode MTTKRP
 * took 1.09x as long past L1 at R = 32 and 1.05x at R = 64); the same
 * choice made inside the kernel cost the shapes that fit 1.6-2.6%
 * (kernels/DESIGN.md). Made here, each kernel is the code measured for its
 * case. */
template <class E, int RL, int RPT, int NIN, bool EXACT, class Fn>
cudaError_t launch_vec_l1(const vec_launch &L, const vec_args<E> &a, const Fn &fn)
{
    if constexpr (RL < 8)
        return launch_vec_scheme<E, RL, RPT, NIN, EXACT, false>(L, a, fn);
    else if constexpr (Fn::kModel)
        return launch_vec_scheme<E, RL, RPT, NIN, EXACT, true>(L, a, fn);
    else if (L.factors_fit_l2)
        return launch_vec_scheme<E, RL, RPT, NIN, EXACT, true>(L, a, fn);
    else
        return launch_vec_scheme<E, RL, RPT, NIN, EXACT, false>(L, a, fn);
}

/* EXACT: the plain MTTKRP at R = 16, 32, 64, 96 and 128, where the
 * group's 4 or 8 lanes cover the row's float4 columns exactly (one to four
 * a lane): no column test around the gathers (each would sit in its own
 * branch, keeping a batch's loads from all being in flight before their
 * uses), the row stride a constant, and the repeated rows reused
 * (vec_source::kReuse). At R = 16 the test's removal alone measured
 * slower, with the reuse faster (kernels/DESIGN.md); the other ranks keep
 * the test. */
template <class E, int RL, int RPT, int NIN, class Fn>
cudaError_t launch_vec_nin(const vec_launch &L, const vec_args<E> &a, const Fn &fn)
{
    /* (The narrower elements serve ranks that are not multiples of 4:
     * never a whole number of elements a lane.) */
    if constexpr (kWidth<E> == 4 && !Fn::kModel && (RL == 8 || (RL == 4 && RPT == 1))) {
        if (a.cols == (uint32_t)(RL * RPT))
            return launch_vec_l1<E, RL, RPT, NIN, true>(L, a, fn);
    }
    return launch_vec_l1<E, RL, RPT, NIN, false>(L, a, fn);
}

template <class E, int RL, int RPT, class Fn>
cudaError_t launch_vec(const vec_launch &L, const vec_args<E> &a, const Fn &fn)
{
    switch (a.nin) {
    case 2:
        return launch_vec_nin<E, RL, RPT, 2>(L, a, fn);
    case 3:
        return launch_vec_nin<E, RL, RPT, 3>(L, a, fn);
    case 4:
        return launch_vec_nin<E, RL, RPT, 4>(L, a, fn);
    default:
        return launch_vec_nin<E, RL, RPT, 0>(L, a, fn);
    }
}

/* The vector kernel's configurations, each instantiated in the translation
 * unit named (mttkrp.cu declares them, launch_vec_config picks one): the
 * element, lanes a group and elements a lane (vec_config_for), for the
 * plain MTTKRP and, on float4 rows, the generalized one. */
#define THG_VEC_INSTANCE(KW, E, RL, RPT, FN)                                                 \
    KW template cudaError_t launch_vec<E, RL, RPT, FN>(const vec_launch &, const vec_args<E> &, \
                                                        const FN &);
#define THG_VEC_FLOAT4(KW, RL, RPT)                                                           \
    THG_VEC_INSTANCE(KW, float4, RL, RPT, plain_value)                                         \
    THG_VEC_INSTANCE(KW, float4, RL, RPT, gen_value<true>)                                     \
    THG_VEC_INSTANCE(KW, float4, RL, RPT, gen_value<false>)
/* R <= 16 (mttkrp_vec_r16.cu) */
#define THG_VEC_R16(KW) THG_VEC_FLOAT4(KW, 2, 1) THG_VEC_FLOAT4(KW, 4, 1)
/* R = 20-32, 36-64, 68-96, 100-128 (mttkrp_vec_r32.cu ... r128.cu) */
#define THG_VEC_R32(KW) THG_VEC_FLOAT4(KW, 8, 1)
#define THG_VEC_R64(KW) THG_VEC_FLOAT4(KW, 8, 2)
#define THG_VEC_R96(KW) THG_VEC_FLOAT4(KW, 8, 3)
#define THG_VEC_R128(KW) THG_VEC_FLOAT4(KW, 8, 4)
/* Even and odd ranks that are not multiples of 4 (mttkrp_vec_even.cu,
 * mttkrp_vec_odd.cu): the plain MTTKRP alone. */
#define THG_VEC_NARROW(KW, E)                                                                 \
    THG_VEC_INSTANCE(KW, E, 4, 1, plain_value)                                                 \
    THG_VEC_INSTANCE(KW, E, 8, 1, plain_value)                                                 \
    THG_VEC_INSTANCE(KW, E, 8, 2, plain_value)                                                 \
    THG_VEC_INSTANCE(KW, E, 8, 4, plain_value)                                                 \
    THG_VEC_INSTANCE(KW, E, 8, 8, plain_value)
#define THG_VEC_EVEN(KW) THG_VEC_NARROW(KW, float2)
#define THG_VEC_ODD(KW) THG_VEC_NARROW(KW, float)
/* The generic kernel (odd ranks over 64, the generalized MTTKRP at ranks
 * that are not multiples of 4; mttkrp_generic.cu): its lanes and rows a
 * lane, for each of the three values. */
#define THG_GENERIC_INSTANCE(KW, RL, RPT, FN)                                                 \
    KW template cudaError_t launch<RL, RPT, FN>(bool, uint32_t, uint32_t, cudaStream_t,        \
                                                 const thg_mttkrp_args &, const FN &);
#define THG_GENERIC_SHAPE(KW, RL, RPT)                                                        \
    THG_GENERIC_INSTANCE(KW, RL, RPT, plain_value)                                             \
    THG_GENERIC_INSTANCE(KW, RL, RPT, gen_value<true>)                                         \
    THG_GENERIC_INSTANCE(KW, RL, RPT, gen_value<false>)
#define THG_GENERIC(KW)                                                                       \
    THG_GENERIC_SHAPE(KW, 8, 1) THG_GENERIC_SHAPE(KW, 16, 1) THG_GENERIC_SHAPE(KW, 32, 1)     \
    THG_GENERIC_SHAPE(KW, 32, 2) THG_GENERIC_SHAPE(KW, 32, 4)
#define THG_VEC_ALL(KW)                                                                       \
    THG_VEC_R16(KW) THG_VEC_R32(KW) THG_VEC_R64(KW) THG_VEC_R96(KW) THG_VEC_R128(KW)           \
    THG_VEC_EVEN(KW) THG_VEC_ODD(KW)

} // namespace thg_mttkrp_kernels
