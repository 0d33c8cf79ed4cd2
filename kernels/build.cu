/* Building the mode-specific copies on the device.
 *
 * The COO tensor is uploaded once into a staging area; for each mode d the
 * nonzeros are sorted by their mode-d index with CUB's radix sort (stable),
 * which is already the scheme-2 order. For scheme 1, run-length encoding of
 * the sorted indices gives each output row's nonzero count; the rows are
 * sorted by count (descending) and dealt cyclically to the kappa partitions,
 * and a second stable radix sort by partition groups the nonzeros by
 * partition while keeping the output-index order inside each. A gather then
 * writes the copy. Nothing is sorted on the host.
 */
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>

#include <chrono>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "thg_internal.cuh"

namespace {

constexpr uint32_t kThreads = 256;
/* gpu-adaptive keeps scheme 1 while max partition load <= factor * mean + slack. */
constexpr double kBalanceFactor = 1.25;
constexpr double kBalanceSlack = 256.0;

/* Staging buffers that live only while the copies are built. */
struct staging {
    uint32_t *idx = nullptr;  /* [nmodes][nnz], upload order */
    float *vals = nullptr;    /* [nnz] */
    uint32_t *keys[2] = {};   /* [nnz] each: sort keys, double-buffered */
    uint32_t *perm[2] = {};   /* [nnz] each: nonzero ids, double-buffered */
    uint32_t *rows[2] = {};   /* [max_dim] each: distinct output rows */
    uint32_t *counts[2] = {}; /* [max_dim] each: nonzeros per row */
    uint32_t *part_of_row = nullptr; /* [max_dim] */
    uint32_t *loads = nullptr;       /* [kappa]: nonzeros per partition */
    int *num_runs = nullptr;
    uint32_t *bad_index = nullptr;
    void *temp = nullptr;
    size_t temp_bytes = 0;
};

uint32_t bits_for(uint32_t max_value)
{
    uint32_t bits = 1;
    while (bits < 32 && (max_value >> bits) != 0)
        ++bits;
    return bits;
}

unsigned grid_for(uint64_t n)
{
    const uint64_t blocks = (n + kThreads - 1) / kThreads;
    return (unsigned)(blocks < 65535 * 16 ? (blocks == 0 ? 1 : blocks) : 65535 * 16);
}

size_t cub_temp_bytes(uint32_t nnz, uint32_t max_dim)
{
    size_t sort_bytes = 0, desc_bytes = 0, rle_bytes = 0;
    cub::DoubleBuffer<uint32_t> k(nullptr, nullptr), v(nullptr, nullptr);
    cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, k, v, (int)nnz, 0, 32);
    cub::DeviceRadixSort::SortPairsDescending(nullptr, desc_bytes, k, v, (int)max_dim, 0, 32);
    cub::DeviceRunLengthEncode::Encode(nullptr, rle_bytes, (const uint32_t *)nullptr,
                                       (uint32_t *)nullptr, (uint32_t *)nullptr,
                                       (int *)nullptr, (int)nnz);
    size_t bytes = sort_bytes > desc_bytes ? sort_bytes : desc_bytes;
    return (bytes > rle_bytes ? bytes : rle_bytes) + 256;
}

__global__ void iota_kernel(uint32_t *out, uint32_t n)
{
    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
        out[k] = k;
}

/* Flags any index outside its mode: the ABI promises none, but a bad one
 * would turn into an out-of-bounds gather later. */
__global__ void check_indices_kernel(const uint32_t *idx, uint32_t nnz, uint32_t dim,
                                     uint32_t *bad)
{
    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < nnz; k += gridDim.x * blockDim.x)
        if (idx[k] >= dim)
            atomicOr(bad, 1u);
}

/* Row j in count-descending order goes to partition j mod kappa. */
__global__ void deal_rows_kernel(const uint32_t *rows_by_count, const int *num_runs,
                                 uint32_t kappa, uint32_t *part_of_row)
{
    const uint32_t n = (uint32_t)*num_runs;
    for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x)
        part_of_row[rows_by_count[j]] = j % kappa;
}

__global__ void partition_loads_kernel(const uint32_t *counts_by_rank, const int *num_runs,
                                       uint32_t kappa, uint32_t *loads)
{
    const uint32_t n = (uint32_t)*num_runs;
    for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x)
        atomicAdd(&loads[j % kappa], counts_by_rank[j]);
}

__global__ void partition_keys_kernel(const uint32_t *sorted_rows, const uint32_t *part_of_row,
                                      uint32_t *keys, uint32_t n)
{
    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
        keys[k] = part_of_row[sorted_rows[k]];
}

/* offsets[p] = first position whose partition key is >= p (p = 0..kappa). */
__global__ void partition_offsets_kernel(const uint32_t *sorted_keys, uint32_t n, uint32_t kappa,
                                         uint32_t *offsets)
{
    const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p > kappa)
        return;
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        const uint32_t mid = lo + (hi - lo) / 2;
        if (sorted_keys[mid] < p)
            lo = mid + 1;
        else
            hi = mid;
    }
    offsets[p] = lo;
}

__global__ void chunk_offsets_kernel(uint32_t nnz, uint32_t kappa, uint32_t *offsets)
{
    const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p <= kappa)
        offsets[p] = (uint32_t)((uint64_t)nnz * p / kappa);
}

__global__ void gather_kernel(const uint32_t *src_idx, const float *src_vals,
                              const uint32_t *perm, uint32_t nnz, uint32_t nmodes,
                              uint32_t *dst_idx, float *dst_vals)
{
    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < nnz;
         k += gridDim.x * blockDim.x) {
        const uint32_t src = perm[k];
        for (uint32_t m = 0; m < nmodes; ++m)
            dst_idx[(size_t)m * nnz + k] = src_idx[(size_t)m * nnz + src];
        dst_vals[k] = src_vals[src];
    }
}

void free_staging(staging &s)
{
    cudaFree(s.idx);
    cudaFree(s.vals);
    for (int b = 0; b < 2; ++b) {
        cudaFree(s.keys[b]);
        cudaFree(s.perm[b]);
        cudaFree(s.rows[b]);
        cudaFree(s.counts[b]);
    }
    cudaFree(s.part_of_row);
    cudaFree(s.loads);
    cudaFree(s.num_runs);
    cudaFree(s.bad_index);
    cudaFree(s.temp);
    s = staging();
}

thg_status alloc_staging(const thg_context *ctx, uint32_t max_dim, staging &s, char *err,
                         size_t errlen)
{
    const size_t nnz = ctx->nnz;
    THG_CUDA(cudaMalloc(&s.idx, sizeof(uint32_t) * nnz * ctx->nmodes));
    THG_CUDA(cudaMalloc(&s.vals, sizeof(float) * nnz));
    for (int b = 0; b < 2; ++b) {
        THG_CUDA(cudaMalloc(&s.keys[b], sizeof(uint32_t) * nnz));
        THG_CUDA(cudaMalloc(&s.perm[b], sizeof(uint32_t) * nnz));
        THG_CUDA(cudaMalloc(&s.rows[b], sizeof(uint32_t) * max_dim));
        THG_CUDA(cudaMalloc(&s.counts[b], sizeof(uint32_t) * max_dim));
    }
    THG_CUDA(cudaMalloc(&s.part_of_row, sizeof(uint32_t) * max_dim));
    THG_CUDA(cudaMalloc(&s.loads, sizeof(uint32_t) * ctx->kappa));
    THG_CUDA(cudaMalloc(&s.num_runs, sizeof(int)));
    THG_CUDA(cudaMalloc(&s.bad_index, sizeof(uint32_t)));
    s.temp_bytes = cub_temp_bytes(ctx->nnz, max_dim);
    THG_CUDA(cudaMalloc(&s.temp, s.temp_bytes));
    return THG_OK;
}

thg_status upload(const thg_context *ctx, const uint32_t *const *indices, const double *values,
                  staging &s, char *err, size_t errlen)
{
    const size_t nnz = ctx->nnz;
    for (uint32_t m = 0; m < ctx->nmodes; ++m)
        THG_CUDA(cudaMemcpyAsync(s.idx + (size_t)m * nnz, indices[m], sizeof(uint32_t) * nnz,
                                 cudaMemcpyHostToDevice, ctx->stream));
    float *host_vals = (float *)malloc(sizeof(float) * nnz);
    if (!host_vals)
        return thg_fail(err, errlen, THG_ERR_OUT_OF_MEMORY,
                        "out of host memory converting %zu values to fp32", nnz);
    for (size_t k = 0; k < nnz; ++k)
        host_vals[k] = (float)values[k];
    const cudaError_t e = cudaMemcpyAsync(s.vals, host_vals, sizeof(float) * nnz,
                                          cudaMemcpyHostToDevice, ctx->stream);
    /* Pageable source: the copy is staged before cudaMemcpyAsync returns,
     * but synchronise anyway so freeing the buffer is plainly safe. */
    const cudaError_t e2 = e == cudaSuccess ? cudaStreamSynchronize(ctx->stream) : e;
    free(host_vals);
    THG_CUDA(e2);

    THG_CUDA(cudaMemsetAsync(s.bad_index, 0, sizeof(uint32_t), ctx->stream));
    for (uint32_t m = 0; m < ctx->nmodes; ++m) {
        check_indices_kernel<<<grid_for(nnz), kThreads, 0, ctx->stream>>>(
            s.idx + (size_t)m * nnz, ctx->nnz, ctx->dims[m], s.bad_index);
        THG_LAUNCHED();
    }
    uint32_t bad = 0;
    THG_CUDA(cudaMemcpyAsync(&bad, s.bad_index, sizeof(bad), cudaMemcpyDeviceToHost,
                             ctx->stream));
    THG_CUDA(cudaStreamSynchronize(ctx->stream));
    if (bad)
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "tensor has an index outside its mode's dimension");
    return THG_OK;
}

/* The scheme before the balance check; the reason is kept for reports. */
int choose_scheme(thg_context *ctx, uint32_t mode)
{
    thg_mode_copy &copy = ctx->copies[mode];
    const uint32_t dim = ctx->dims[mode];
    switch (ctx->policy) {
    case THG_POLICY_SCHEME1:
        snprintf(copy.reason, sizeof(copy.reason), "forced (gpu-scheme1)");
        return 1;
    case THG_POLICY_SCHEME2:
        snprintf(copy.reason, sizeof(copy.reason), "forced (gpu-scheme2)");
        return 2;
    case THG_POLICY_ADAPTIVE:
    default:
        break;
    }
    const bool long_mode = dim >= ctx->kappa;
    snprintf(copy.reason, sizeof(copy.reason), "rule=%s: I_d=%u %s kappa=%u",
             ctx->rule == THG_RULE_PAPER ? "paper" : "balanced", dim, long_mode ? ">=" : "<",
             ctx->kappa);
    return long_mode ? 1 : 2;
}

thg_status chunk_offsets(thg_context *ctx, thg_mode_copy &copy, char *err, size_t errlen)
{
    chunk_offsets_kernel<<<(ctx->kappa + kThreads) / kThreads, kThreads, 0, ctx->stream>>>(
        ctx->nnz, ctx->kappa, copy.offsets);
    THG_LAUNCHED();
    copy.has_empty_rows = 1; /* scheme 2 always zeroes before its atomics */
    return THG_OK;
}

/* Scheme 1 pays off only if dealing the rows leaves the partitions about
 * equally loaded: a skewed mode (one row with a large share of the
 * nonzeros) serialises on the partition that owns the hot row, and scheme 2
 * is faster whatever I_d is. The slack keeps tiny tensors, where imbalance
 * costs nothing, on scheme 1. */
thg_status deal_is_balanced(thg_context *ctx, staging &s, const uint32_t *counts_by_rank,
                            uint32_t dim, bool *balanced, double *max_over_mean, char *err,
                            size_t errlen)
{
    THG_CUDA(cudaMemsetAsync(s.loads, 0, sizeof(uint32_t) * ctx->kappa, ctx->stream));
    partition_loads_kernel<<<grid_for(dim), kThreads, 0,
                             ctx->stream>>>(counts_by_rank, s.num_runs, ctx->kappa, s.loads);
    THG_LAUNCHED();
    uint32_t *host = (uint32_t *)malloc(sizeof(uint32_t) * ctx->kappa);
    if (!host)
        return thg_fail(err, errlen, THG_ERR_OUT_OF_MEMORY, "out of host memory");
    cudaError_t e = cudaMemcpyAsync(host, s.loads, sizeof(uint32_t) * ctx->kappa,
                                    cudaMemcpyDeviceToHost, ctx->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(ctx->stream);
    uint32_t max_load = 0;
    for (uint32_t p = 0; e == cudaSuccess && p < ctx->kappa; ++p)
        max_load = host[p] > max_load ? host[p] : max_load;
    free(host);
    THG_CUDA(e);
    const double mean = (double)ctx->nnz / ctx->kappa;
    *balanced = max_load <= kBalanceFactor * mean + kBalanceSlack;
    *max_over_mean = max_load / mean;
    return THG_OK;
}

/* Leaves the nonzero order of `mode` in perm (a DoubleBuffer's current). */
thg_status order_mode(thg_context *ctx, uint32_t mode, staging &s,
                      cub::DoubleBuffer<uint32_t> &perm, char *err, size_t errlen)
{
    const uint32_t nnz = ctx->nnz;
    const uint32_t dim = ctx->dims[mode];
    thg_mode_copy &copy = ctx->copies[mode];
    cudaStream_t st = ctx->stream;

    THG_CUDA(cudaMemcpyAsync(s.keys[0], s.idx + (size_t)mode * nnz, sizeof(uint32_t) * nnz,
                             cudaMemcpyDeviceToDevice, st));
    iota_kernel<<<grid_for(nnz), kThreads, 0, st>>>(s.perm[0], nnz);
    THG_LAUNCHED();
    cub::DoubleBuffer<uint32_t> keys(s.keys[0], s.keys[1]);
    perm = cub::DoubleBuffer<uint32_t>(s.perm[0], s.perm[1]);
    size_t temp_bytes = s.temp_bytes;
    THG_CUDA(cub::DeviceRadixSort::SortPairs(s.temp, temp_bytes, keys, perm, (int)nnz, 0,
                                             (int)bits_for(dim - 1), st));

    if (copy.scheme == 2)
        return chunk_offsets(ctx, copy, err, errlen);

    temp_bytes = s.temp_bytes;
    const uint32_t *sorted_rows = keys.Current();
    THG_CUDA(cub::DeviceRunLengthEncode::Encode(s.temp, temp_bytes, sorted_rows, s.rows[0],
                                                s.counts[0], s.num_runs, (int)nnz, st));
    int num_runs = 0;
    THG_CUDA(cudaMemcpyAsync(&num_runs, s.num_runs, sizeof(int), cudaMemcpyDeviceToHost, st));
    THG_CUDA(cudaStreamSynchronize(st));
    copy.has_empty_rows = (uint32_t)num_runs < dim;

    cub::DoubleBuffer<uint32_t> counts(s.counts[0], s.counts[1]);
    cub::DoubleBuffer<uint32_t> rows(s.rows[0], s.rows[1]);
    temp_bytes = s.temp_bytes;
    THG_CUDA(cub::DeviceRadixSort::SortPairsDescending(s.temp, temp_bytes, counts, rows,
                                                       num_runs, 0, 32, st));
    deal_rows_kernel<<<grid_for((uint64_t)num_runs), kThreads, 0, st>>>(
        rows.Current(), s.num_runs, ctx->kappa, s.part_of_row);
    THG_LAUNCHED();

    if (ctx->policy == THG_POLICY_ADAPTIVE && ctx->rule == THG_RULE_BALANCED) {
        bool balanced = true;
        double ratio = 0.0;
        const thg_status bst = deal_is_balanced(ctx, s, counts.Current(), dim, &balanced,
                                                 &ratio, err, errlen);
        if (bst != THG_OK)
            return bst;
        const size_t used = strlen(copy.reason);
        snprintf(copy.reason + used, sizeof(copy.reason) - used,
                 ", max partition %.2fx mean (%s)", ratio, balanced ? "balanced" : "hot rows");
        if (!balanced) {
            copy.scheme = 2;
            return chunk_offsets(ctx, copy, err, errlen);
        }
    }

    /* The sorted output indices are dead once turned into partition keys,
     * so their buffer becomes the second sort's alternate. */
    partition_keys_kernel<<<grid_for(nnz), kThreads, 0, st>>>(
        keys.Current(), s.part_of_row, keys.Alternate(), nnz);
    THG_LAUNCHED();
    cub::DoubleBuffer<uint32_t> part_keys(keys.Alternate(), keys.Current());
    temp_bytes = s.temp_bytes;
    THG_CUDA(cub::DeviceRadixSort::SortPairs(s.temp, temp_bytes, part_keys, perm, (int)nnz, 0,
                                             (int)bits_for(ctx->kappa - 1), st));
    partition_offsets_kernel<<<(ctx->kappa + kThreads) / kThreads, kThreads, 0, st>>>(
        part_keys.Current(), nnz, ctx->kappa, copy.offsets);
    THG_LAUNCHED();
    return THG_OK;
}

thg_status build_all(thg_context *ctx, const uint32_t *const *indices, const double *values,
                     staging &s, char *err, size_t errlen)
{
    uint32_t max_dim = 1;
    for (uint32_t m = 0; m < ctx->nmodes; ++m)
        max_dim = ctx->dims[m] > max_dim ? ctx->dims[m] : max_dim;
    thg_status st = alloc_staging(ctx, max_dim, s, err, errlen);
    if (st != THG_OK)
        return st;
    const auto up0 = std::chrono::steady_clock::now();
    st = upload(ctx, indices, values, s, err, errlen);
    if (st != THG_OK)
        return st;
    ctx->upload_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - up0).count();
    /* The build proper is timed from here: the upload is PCIe, not layout. */
    THG_CUDA(cudaEventRecord(ctx->start, ctx->stream));

    const size_t nnz = ctx->nnz;
    for (uint32_t d = 0; d < ctx->nmodes; ++d) {
        thg_mode_copy &copy = ctx->copies[d];
        copy.scheme = choose_scheme(ctx, d);
        uint32_t *block = nullptr;
        THG_CUDA(cudaMalloc(&block, sizeof(uint32_t) * nnz * (ctx->nmodes + 1)));
        for (uint32_t m = 0; m < ctx->nmodes; ++m)
            copy.idx[m] = block + (size_t)m * nnz;
        copy.vals = (float *)(block + (size_t)ctx->nmodes * nnz);
        THG_CUDA(cudaMalloc(&copy.offsets, sizeof(uint32_t) * (ctx->kappa + 1)));

        cub::DoubleBuffer<uint32_t> perm;
        st = order_mode(ctx, d, s, perm, err, errlen);
        if (st != THG_OK)
            return st;
        gather_kernel<<<grid_for(nnz), kThreads, 0, ctx->stream>>>(
            s.idx, s.vals, perm.Current(), ctx->nnz, ctx->nmodes, block, copy.vals);
        THG_LAUNCHED();
    }
    THG_CUDA(cudaStreamSynchronize(ctx->stream));
    return THG_OK;
}

} // namespace

uint64_t thg_build_workspace_bytes(const thg_context *ctx, uint32_t max_dim)
{
    const uint64_t nnz = ctx->nnz;
    return sizeof(uint32_t) * nnz * ctx->nmodes /* staged indices */
           + sizeof(float) * nnz                 /* staged values */
           + 4 * sizeof(uint32_t) * nnz          /* keys and perm, double-buffered */
           + 5 * sizeof(uint32_t) * (uint64_t)max_dim + 64
           + sizeof(uint32_t) * (uint64_t)ctx->kappa /* partition loads */
           + cub_temp_bytes(ctx->nnz, max_dim);
}

thg_status thg_build_copies(thg_context *ctx, const uint32_t *const *indices,
                            const double *values, char *err, size_t errlen)
{
    staging s;
    float ms = 0.0f;
    cudaError_t e = cudaSuccess;
    thg_status st = build_all(ctx, indices, values, s, err, errlen);
    if (st == THG_OK) {
        e = cudaEventRecord(ctx->stop, ctx->stream);
        if (e == cudaSuccess)
            e = cudaEventSynchronize(ctx->stop);
        if (e == cudaSuccess)
            e = cudaEventElapsedTime(&ms, ctx->start, ctx->stop);
        if (e != cudaSuccess)
            st = thg_cuda_fail(err, errlen, e, "timing the build", __FILE__, __LINE__);
    }
    ctx->build_seconds = ms * 1e-3;
    free_staging(s);
    return st;
}

void thg_free_tensor(thg_context *ctx)
{
    for (uint32_t m = 0; m < THG_MAX_MODES; ++m) {
        thg_mode_copy &copy = ctx->copies[m];
        cudaFree(copy.idx[0]); /* the block holding every index array and the values */
        cudaFree(copy.offsets);
        memset(&copy, 0, sizeof(copy));
        cudaFree(ctx->factors[m]);
        cudaFree(ctx->results[m]);
        ctx->factors[m] = nullptr;
        ctx->results[m] = nullptr;
    }
    cudaFree(ctx->als_w);
    cudaFree(ctx->als_acc);
    ctx->als_w = nullptr;
    ctx->als_acc = nullptr;
    ctx->nmodes = 0;
    ctx->nnz = 0;
    ctx->rank = 0;
    ctx->tensor_bytes = ctx->factor_bytes = ctx->workspace_bytes = 0;
}
