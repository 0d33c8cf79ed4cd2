/* The on-device CP-ALS factor update: A <- M W, column norms, normalisation,
 * lambda, Gram A^T A and inner[r] = sum_i M(i,r) A(i,r). Three kernels and
 * one download of [lambda | gram | inner] in double; the tall matrices never
 * leave the device. Own kernels rather than cuBLAS: R <= 128 keeps W in
 * shared memory, and a static cuBLAS would add ~100 MB to every plugin.
 * Reductions accumulate per thread in double and meet in double atomics. */
#include <string.h>

#include "thg_internal.cuh"

namespace {

constexpr uint32_t kThreads = 256;

/* Accumulator layout in ctx->als_acc (doubles), then R uint32 max bits. */
struct acc_view {
    double *lambda, *gram, *inner, *sumsq;
    uint32_t *maxbits;
};

acc_view view_of(double *base, uint32_t R)
{
    acc_view v;
    v.lambda = base;
    v.gram = base + R;
    v.inner = v.gram + (size_t)R * R;
    v.sumsq = v.inner + R;
    v.maxbits = (uint32_t *)(v.sumsq + R);
    return v;
}

/* Threads t = sub * R + r: column r of rows sub, sub + rows_per_pass, ... */
__global__ void gemm_stats_kernel(const float *M, const float *W, float *A, uint32_t I,
                                  uint32_t R, double *sumsq, uint32_t *maxbits)
{
    extern __shared__ double sh[];
    double *s_sumsq = sh;                       /* [R] */
    uint32_t *s_max = (uint32_t *)(sh + R);     /* [R] */
    float *s_w = (float *)(s_max + R + (R & 1)); /* [R*R], 8-byte aligned start */
    for (uint32_t t = threadIdx.x; t < R * R; t += blockDim.x)
        s_w[t] = W[t];
    for (uint32_t t = threadIdx.x; t < R; t += blockDim.x) {
        s_sumsq[t] = 0.0;
        s_max[t] = 0u;
    }
    __syncthreads();

    const uint32_t rows_per_pass = blockDim.x / R;
    const uint32_t r = threadIdx.x % R;
    const uint32_t sub = threadIdx.x / R;
    double my_sumsq = 0.0;
    float my_max = 0.0f;
    if (sub < rows_per_pass) {
        for (uint64_t i = (uint64_t)blockIdx.x * rows_per_pass + sub; i < I;
             i += (uint64_t)gridDim.x * rows_per_pass) {
            const float *m_row = M + i * R;
            float acc = 0.0f;
            for (uint32_t k = 0; k < R; ++k)
                acc += m_row[k] * s_w[k * R + r];
            A[i * R + r] = acc;
            my_sumsq += (double)acc * acc;
            my_max = fmaxf(my_max, fabsf(acc));
        }
        atomicAdd(&s_sumsq[r], my_sumsq);
        atomicMax(&s_max[r], __float_as_uint(my_max)); /* non-negative: bits order as values */
    }
    __syncthreads();
    for (uint32_t t = threadIdx.x; t < R; t += blockDim.x) {
        atomicAdd(&sumsq[t], s_sumsq[t]);
        atomicMax(&maxbits[t], s_max[t]);
    }
}

__device__ double column_lambda(uint32_t r, int use_max_norm, const double *sumsq,
                                const uint32_t *maxbits)
{
    return use_max_norm ? fmax((double)__uint_as_float(maxbits[r]), 1.0) : sqrt(sumsq[r]);
}

__global__ void normalize_inner_kernel(const float *M, float *A, uint32_t I, uint32_t R,
                                       int use_max_norm, const double *sumsq,
                                       const uint32_t *maxbits, double *lambda, double *inner)
{
    extern __shared__ double s_inner[]; /* [R] */
    for (uint32_t t = threadIdx.x; t < R; t += blockDim.x) {
        s_inner[t] = 0.0;
        if (blockIdx.x == 0)
            lambda[t] = column_lambda(t, use_max_norm, sumsq, maxbits);
    }
    __syncthreads();
    const uint32_t rows_per_pass = blockDim.x / R;
    const uint32_t r = threadIdx.x % R;
    const uint32_t sub = threadIdx.x / R;
    if (sub < rows_per_pass) {
        const double lam = column_lambda(r, use_max_norm, sumsq, maxbits);
        /* As the host's th_dense_normalize_columns: a zero column stays. */
        const float scale = lam > 0.0 ? (float)(1.0 / lam) : 1.0f;
        double my_inner = 0.0;
        for (uint64_t i = (uint64_t)blockIdx.x * rows_per_pass + sub; i < I;
             i += (uint64_t)gridDim.x * rows_per_pass) {
            const float a = A[i * R + r] * scale;
            A[i * R + r] = a;
            my_inner += (double)M[i * R + r] * a;
        }
        atomicAdd(&s_inner[r], my_inner);
    }
    __syncthreads();
    for (uint32_t t = threadIdx.x; t < R; t += blockDim.x)
        atomicAdd(&inner[t], s_inner[t]);
}

constexpr uint32_t kTile = 16;
constexpr uint32_t kRowsPerStep = 32;

/* gram[r1][r2] += sum over this block's rows of A(i,r1) A(i,r2); blockIdx.z
 * splits the rows so enough blocks run for small R. */
__global__ void gram_kernel(const float *A, uint32_t I, uint32_t R, uint32_t rows_per_split,
                            double *gram)
{
    __shared__ float s1[kRowsPerStep][kTile + 1];
    __shared__ float s2[kRowsPerStep][kTile + 1];
    const uint32_t r1 = blockIdx.y * kTile + threadIdx.y;
    const uint32_t r2 = blockIdx.x * kTile + threadIdx.x;
    const uint64_t row_begin = (uint64_t)blockIdx.z * rows_per_split;
    const uint64_t row_end_raw = row_begin + rows_per_split;
    const uint64_t row_end = row_end_raw < I ? row_end_raw : I;
    const uint32_t tid = threadIdx.y * kTile + threadIdx.x;
    float acc = 0.0f;
    for (uint64_t base = row_begin; base < row_end; base += kRowsPerStep) {
        for (uint32_t t = tid; t < kRowsPerStep * kTile; t += kTile * kTile) {
            const uint32_t rr = t / kTile, c = t % kTile;
            const uint64_t i = base + rr;
            const uint32_t c1 = blockIdx.y * kTile + c, c2 = blockIdx.x * kTile + c;
            s1[rr][c] = (i < row_end && c1 < R) ? A[i * R + c1] : 0.0f;
            s2[rr][c] = (i < row_end && c2 < R) ? A[i * R + c2] : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (uint32_t rr = 0; rr < kRowsPerStep; ++rr)
            acc += s1[rr][threadIdx.y] * s2[rr][threadIdx.x];
        __syncthreads();
    }
    if (r1 < R && r2 < R)
        atomicAdd(&gram[(size_t)r1 * R + r2], (double)acc);
}

uint32_t row_blocks(uint64_t I, uint32_t R, int sm_count)
{
    const uint32_t rows_per_pass = kThreads / R;
    const uint64_t needed = (I + rows_per_pass - 1) / rows_per_pass;
    const uint64_t cap = (uint64_t)sm_count * 4;
    return (uint32_t)(needed < cap ? needed : cap);
}

} // namespace

thg_status thg_launch_als(thg_context *ctx, uint32_t mode, int use_max_norm, char *err,
                          size_t errlen)
{
    const uint32_t R = ctx->rank;
    const uint32_t I = ctx->dims[mode];
    const acc_view acc = view_of(ctx->als_acc, R);
    cudaStream_t st = ctx->stream;
    const size_t acc_bytes = sizeof(double) * ((size_t)R * R + 4 * R) + sizeof(uint32_t) * R;
    THG_CUDA(cudaMemsetAsync(ctx->als_acc, 0, acc_bytes, st));

    const size_t gemm_smem = sizeof(double) * R + sizeof(uint32_t) * (R + (R & 1)) +
                             sizeof(float) * R * R;
    THG_CUDA(cudaFuncSetAttribute(gemm_stats_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)gemm_smem));
    const uint32_t blocks = row_blocks(I, R, ctx->sm_count);
    gemm_stats_kernel<<<blocks, kThreads, gemm_smem, st>>>(
        ctx->results[mode], ctx->als_w, ctx->factors[mode], I, R, acc.sumsq, acc.maxbits);
    THG_LAUNCHED();
    normalize_inner_kernel<<<blocks, kThreads, sizeof(double) * R, st>>>(
        ctx->results[mode], ctx->factors[mode], I, R, use_max_norm, acc.sumsq, acc.maxbits,
        acc.lambda, acc.inner);
    THG_LAUNCHED();

    const uint32_t tiles = (R + kTile - 1) / kTile;
    const uint64_t steps = (I + kRowsPerStep - 1) / kRowsPerStep;
    uint64_t splits = ((uint64_t)ctx->sm_count * 4 + tiles * tiles - 1) / (tiles * tiles);
    splits = splits < steps ? splits : steps;
    splits = splits < 65535 ? splits : 65535;
    const uint64_t steps_per_split = (steps + splits - 1) / splits;
    const uint32_t rows_per_split = (uint32_t)(steps_per_split * kRowsPerStep);
    const uint32_t nsplits = (uint32_t)((I + rows_per_split - 1) / rows_per_split);
    gram_kernel<<<dim3(tiles, tiles, nsplits), dim3(kTile, kTile), 0, st>>>(
        ctx->factors[mode], I, R, rows_per_split, acc.gram);
    THG_LAUNCHED();
    return THG_OK;
}
