/* The on-device CP-ALS factor update: A <- M W, column norms, normalisation,
 * lambda, Gram A^T A and inner[r] = sum_i M(i,r) A(i,r), in two kernels.
 *
 * On the small shapes an update costs its latency, not its arithmetic, and
 * that latency is longer than the mode's whole MTTKRP; every host round
 * trip, pageable copy and extra launch adds to it (with a W upload from
 * pageable memory and its own synchronisation, a memset, three kernels and
 * a pageable download, an update measured ~55 us; kernels/DESIGN.md). So
 * W comes from pinned staging, there is one stream synchronisation, and:
 *   1. gemm_gram_kernel: each block takes tiles of rows, computes the
 *      unnormalised rows Ahat = M W (written to the factor and to shared
 *      memory) and accumulates Ahat^T Ahat, sum_i M(i,r) Ahat(i,r) and
 *      max |Ahat(:,r)| in registers; one set of double atomics per block.
 *      The last block to finish (a counter) turns them into lambda, the
 *      Gram and inner of the normalised A, using
 *        A = Ahat D^-1 -> A^T A = D^-1 (Ahat^T Ahat) D^-1, inner = inner_hat / d
 *      (the column sums of squares are the Gram's diagonal), writes
 *      [lambda | gram | inner] straight into mapped pinned host memory and
 *      re-zeroes the accumulators for the next update;
 *   2. scale_kernel: A(:,r) *= 1/lambda_r.
 * The whole-iteration sweep (sweep.cu) runs the same two kernels with
 * their results in device memory, the normalised Gram also kept for the
 * next mode's solve (solve.cu), and an early return once a solve of the
 * sweep broke down.
 * Own kernels rather than cuBLAS: R <= 128 keeps W in shared memory, and a
 * static cuBLAS would add ~100 MB to every plugin. Gram entries accumulate
 * in fp32 over one tile of rows, then in double. */
#include <string.h>

#include "thg_internal.cuh"

namespace {

constexpr uint32_t kThreads = 512;
constexpr uint32_t kTileRows = 32;
constexpr uint32_t kScaleThreads = 256;

/* Dynamic shared memory of gemm_gram_kernel: s_inner [R] doubles, W [R*R],
 * the tile of A [kTileRows*R], the tile of M [kTileRows*R], s_max [R]. */
size_t gemm_smem_bytes(uint32_t R)
{
    return sizeof(double) * R + sizeof(float) * ((size_t)R * R + 2u * kTileRows * R) +
           sizeof(uint32_t) * R;
}

/* Gram entries per thread at most: 8 stay in registers at 512 threads
 * (ptxas spilled 16 and 32); larger ranks (R > 64) split the entries over
 * blockIdx.y. */
constexpr int kMaxEntries = 8;

/* EPT Gram entries per thread: entries e = y * EPT * kThreads + tid + j * kThreads.
 * Blocks with y > 0 recompute their tiles of A for the Gram only. */
template <int EPT>
__global__ void __launch_bounds__(kThreads)
    gemm_gram_kernel(const float *M, const float *W, float *A, uint32_t I, uint32_t R,
                     thg_als_acc acc, double *out, int out_mapped, const uint32_t *failed,
                     double *gram_store)
{
    extern __shared__ double sh[];
    /* The sweep's solve for this mode broke down: leave the factor and the
     * accumulators as they are (uniform, before any barrier). */
    if (failed && *failed)
        return;
    double *s_inner = sh;                                  /* [R] */
    float *s_w = (float *)(sh + R);                        /* [R*R] */
    float *s_a = s_w + (size_t)R * R;                      /* [kTileRows*R] */
    float *s_m = s_a + (size_t)kTileRows * R;              /* [kTileRows*R] */
    uint32_t *s_max = (uint32_t *)(s_m + (size_t)kTileRows * R); /* [R] */
    __shared__ bool s_last;

    const uint32_t tid = threadIdx.x;
    for (uint32_t t = tid; t < R * R; t += blockDim.x)
        s_w[t] = W[t];
    for (uint32_t t = tid; t < R; t += blockDim.x) {
        s_inner[t] = 0.0;
        s_max[t] = 0u;
    }
    __syncthreads();

    /* GEMM threads (sub, r): column r of tile rows sub, sub + rows_per_pass... */
    const uint32_t per_pass_raw = blockDim.x / R;
    const uint32_t rows_per_pass = per_pass_raw < kTileRows ? per_pass_raw : kTileRows;
    const uint32_t r = tid % R;
    const uint32_t sub = tid / R;
    const bool gemm_thread = sub < rows_per_pass;
    const bool primary = blockIdx.y == 0; /* writes A and the column stats */
    const uint32_t e0 = blockIdx.y * (uint32_t)EPT * kThreads;
    double my_inner = 0.0;
    float my_max = 0.0f;
    double g[EPT];
#pragma unroll
    for (int j = 0; j < EPT; ++j)
        g[j] = 0.0;

    const uint32_t ntiles = (I + kTileRows - 1) / kTileRows;
    for (uint32_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const uint64_t base = (uint64_t)tile * kTileRows;
        const uint32_t rows = (uint32_t)(I - base < kTileRows ? I - base : kTileRows);
        /* The tile of M in one coalesced pass: read row by row from global
         * memory, each row's R dependent loads cost an L2 latency apiece
         * (~5 us of a small mode's update on an H200). */
        for (uint32_t t = tid; t < rows * R; t += blockDim.x)
            s_m[t] = M[base * R + t];
        __syncthreads();
        if (gemm_thread) {
            for (uint32_t lr = sub; lr < rows; lr += rows_per_pass) {
                const float *m_row = s_m + lr * R;
                float a = 0.0f;
                for (uint32_t k = 0; k < R; ++k)
                    a += m_row[k] * s_w[k * R + r];
                s_a[lr * R + r] = a;
                if (primary) {
                    A[(base + lr) * R + r] = a;
                    my_inner += (double)m_row[r] * a;
                    my_max = fmaxf(my_max, fabsf(a));
                }
            }
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < EPT; ++j) {
            const uint32_t e = e0 + tid + (uint32_t)j * kThreads;
            if (e < R * R) {
                const uint32_t r1 = e / R, r2 = e % R;
                float p = 0.0f;
                for (uint32_t lr = 0; lr < rows; ++lr)
                    p += s_a[lr * R + r1] * s_a[lr * R + r2];
                g[j] += p;
            }
        }
        __syncthreads(); /* the next tile overwrites s_a */
    }

    if (gemm_thread) {
        atomicAdd(&s_inner[r], my_inner);
        atomicMax(&s_max[r], __float_as_uint(my_max)); /* non-negative: bits order as values */
    }
    __syncthreads();
    for (uint32_t t = tid; primary && t < R; t += blockDim.x) {
        atomicAdd(&acc.inner[t], s_inner[t]);
        atomicMax(&acc.maxbits[t], s_max[t]);
    }
#pragma unroll
    for (int j = 0; j < EPT; ++j) {
        const uint32_t e = e0 + tid + (uint32_t)j * kThreads;
        if (e < R * R)
            atomicAdd(&acc.gram[e], g[j]);
    }

    /* The last block to arrive finishes the reduction (threadFenceReduction). */
    __threadfence();
    __syncthreads();
    if (tid == 0)
        s_last = atomicAdd(acc.done, 1u) == gridDim.x * gridDim.y - 1;
    __syncthreads();
    if (!s_last)
        return;
    __threadfence();

    double *lambda = out, *gram = out + R, *inner = out + R + (size_t)R * R;
    double *s_div = s_inner; /* every block's use of s_inner ended above */
    /* The norm travels with W (after its R*R floats), so a captured graph
     * of the update serves both norms. */
    const int use_max_norm = *(const int *)(W + (size_t)R * R);
    for (uint32_t t = tid; t < R; t += blockDim.x) {
        const double sumsq = __ldcg(&acc.gram[(size_t)t * R + t]);
        const double maxabs = (double)__uint_as_float(__ldcg(&acc.maxbits[t]));
        const double lam = use_max_norm ? fmax(maxabs, 1.0) : sqrt(sumsq);
        /* As the host's th_dense_normalize_columns: a zero column stays. */
        s_div[t] = lam > 0.0 ? lam : 1.0;
        lambda[t] = lam;
        acc.scale[t] = lam > 0.0 ? (float)(1.0 / lam) : 1.0f;
    }
    __syncthreads();
    for (uint32_t e = tid; e < R * R; e += blockDim.x) {
        const double g_norm = __ldcg(&acc.gram[e]) / (s_div[e / R] * s_div[e % R]);
        gram[e] = g_norm;
        if (gram_store)
            gram_store[e] = g_norm;
        acc.gram[e] = 0.0;
    }
    for (uint32_t t = tid; t < R; t += blockDim.x) {
        inner[t] = __ldcg(&acc.inner[t]) / s_div[t];
        acc.inner[t] = 0.0;
        acc.maxbits[t] = 0u;
    }
    if (tid == 0)
        *acc.done = 0u;
    if (out_mapped)
        __threadfence_system(); /* the host reads `out` after the stream synchronises */
}

__global__ void scale_kernel(float *A, uint64_t n, uint32_t R, const float *scale,
                             const uint32_t *failed)
{
    if (failed && *failed)
        return;
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (uint64_t)gridDim.x * blockDim.x)
        A[e] *= scale[e % R];
}

/* Gram entries per thread, rounded up to an instantiated count. */
int entries_per_thread(uint32_t R)
{
    const uint32_t need = (R * R + kThreads - 1) / kThreads;
    int ept = 1;
    while ((uint32_t)ept < need && ept < kMaxEntries)
        ept *= 2;
    return ept;
}

/* Blocks along y that share out the Gram entries. */
uint32_t entry_splits(uint32_t R)
{
    const uint32_t per_block = (uint32_t)entries_per_thread(R) * kThreads;
    return (R * R + per_block - 1) / per_block;
}

typedef void (*gemm_kernel_fn)(const float *, const float *, float *, uint32_t, uint32_t,
                               thg_als_acc, double *, int, const uint32_t *, double *);

gemm_kernel_fn gemm_kernel_for(uint32_t R)
{
    switch (entries_per_thread(R)) {
    case 1:
        return gemm_gram_kernel<1>;
    case 2:
        return gemm_gram_kernel<2>;
    case 4:
        return gemm_gram_kernel<4>;
    default:
        return gemm_gram_kernel<kMaxEntries>;
    }
}

} // namespace

size_t thg_als_w_bytes(uint32_t rank)
{
    return sizeof(float) * (size_t)rank * rank + sizeof(int);
}

size_t thg_als_acc_bytes(uint32_t rank)
{
    const size_t R = rank;
    return sizeof(double) * (R * R + R) + sizeof(uint32_t) * R + sizeof(float) * R +
           sizeof(uint32_t);
}

void thg_als_acc_view(void *block, uint32_t rank, thg_als_acc *acc)
{
    const size_t R = rank;
    acc->gram = (double *)block;
    acc->inner = acc->gram + R * R;
    acc->maxbits = (uint32_t *)(acc->inner + R);
    acc->scale = (float *)(acc->maxbits + R);
    acc->done = (uint32_t *)(acc->scale + R);
}

thg_status thg_als_prepare(const thg_context *ctx, char *err, size_t errlen)
{
    THG_CUDA(cudaFuncSetAttribute(gemm_kernel_for(ctx->rank),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)gemm_smem_bytes(ctx->rank)));
    return thg_solve_prepare(ctx->rank, err, errlen);
}

thg_status thg_launch_als(thg_context *ctx, uint32_t mode, double *out, const uint32_t *failed,
                          double *gram_store, cudaEvent_t after_gemm, char *err,
                          size_t errlen)
{
    const uint32_t R = ctx->rank;
    const uint32_t I = ctx->dims[mode];
    cudaStream_t st = ctx->stream;
    const uint32_t ntiles = (I + kTileRows - 1) / kTileRows;
    const uint32_t cap = 2u * (uint32_t)ctx->sm_count;
    const uint32_t blocks = ntiles < cap ? ntiles : cap;
    gemm_kernel_for(R)<<<dim3(blocks, entry_splits(R)), kThreads, gemm_smem_bytes(R), st>>>(
        ctx->results[mode], ctx->als_w, ctx->factors[mode], I, R, ctx->als_acc, out,
        out == ctx->als_out_dev, failed, gram_store);
    THG_LAUNCHED();
    if (after_gemm)
        THG_CUDA(cudaEventRecord(after_gemm, st));
    const uint64_t n = (uint64_t)I * R;
    const uint64_t needed = (n + kScaleThreads - 1) / kScaleThreads;
    const uint64_t scale_cap = (uint64_t)ctx->sm_count * 8;
    scale_kernel<<<(unsigned)(needed < scale_cap ? needed : scale_cap), kScaleThreads, 0, st>>>(
        ctx->factors[mode], n, R, ctx->als_acc.scale, failed);
    THG_LAUNCHED();
    return THG_OK;
}
