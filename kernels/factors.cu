/* The factor matrices' contents: copies to and from the host, and the
 * counter-based initial factors drawn on the device.
 *
 * The host's factors are fp64 and the device's fp32. Converting on the host
 * took one core a second per ~200M values (a 25.5M x 32 factor: seconds
 * each way, plus a host buffer of its size), so the conversion runs on the
 * device: fp64 chunks cross the bus into a device staging buffer and a
 * kernel converts them in place of the factor (and back for get). The
 * staging buffer is allocated with the factors, within the memory plan. */
#include <string.h>

#include "thg_internal.cuh"

namespace {

/* 8M doubles (64 MB): large enough that each copy runs at the bus's speed,
 * small beside any factor that needs chunking. */
constexpr size_t kTransferChunk = (size_t)8 << 20;
constexpr uint32_t kConvertThreads = 256;

__global__ void to_float_kernel(float *dst, const double *src, size_t n)
{
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x)
        dst[k] = __double2float_rn(src[k]);
}

__global__ void to_double_kernel(double *dst, const float *src, size_t n)
{
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x)
        dst[k] = (double)src[k];
}

unsigned convert_blocks(const thg_context *ctx, size_t n)
{
    const size_t needed = (n + kConvertThreads - 1) / kConvertThreads;
    const size_t cap = (size_t)ctx->sm_count * 8;
    return (unsigned)(needed < cap ? needed : cap);
}

} // namespace

size_t thg_transfer_elems(uint32_t nmodes, const uint32_t *dims, uint32_t rank)
{
    size_t largest = 1;
    for (uint32_t m = 0; m < nmodes; ++m)
        largest = (size_t)dims[m] * rank > largest ? (size_t)dims[m] * rank : largest;
    return largest < kTransferChunk ? largest : kTransferChunk;
}

extern "C" thg_status thg_set_factor(thg_context *ctx, uint32_t mode, const double *data,
                                     char *err, size_t errlen)
{
    thg_status st = thg_check_mode(ctx, mode, err, errlen);
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaSetDevice(ctx->device));
    const size_t n = (size_t)ctx->dims[mode] * ctx->rank;
    for (size_t done = 0; done < n; done += ctx->transfer_elems) {
        const size_t count = n - done < ctx->transfer_elems ? n - done : ctx->transfer_elems;
        /* Stream order: this copy waits for the previous chunk's kernel. */
        THG_CUDA(cudaMemcpyAsync(ctx->transfer_dev, data + done, sizeof(double) * count,
                                 cudaMemcpyHostToDevice, ctx->stream));
        to_float_kernel<<<convert_blocks(ctx, count), kConvertThreads, 0, ctx->stream>>>(
            ctx->factors[mode] + done, ctx->transfer_dev, count);
        THG_LAUNCHED();
    }
    THG_CUDA(cudaStreamSynchronize(ctx->stream));
    return THG_OK;
}

thg_status thg_download_matrix(thg_context *ctx, double *dst, const float *src, size_t n,
                               char *err, size_t errlen)
{
    for (size_t done = 0; done < n; done += ctx->transfer_elems) {
        const size_t count = n - done < ctx->transfer_elems ? n - done : ctx->transfer_elems;
        to_double_kernel<<<convert_blocks(ctx, count), kConvertThreads, 0, ctx->stream>>>(
            ctx->transfer_dev, src + done, count);
        THG_LAUNCHED();
        THG_CUDA(cudaMemcpyAsync(dst + done, ctx->transfer_dev, sizeof(double) * count,
                                 cudaMemcpyDeviceToHost, ctx->stream));
    }
    THG_CUDA(cudaStreamSynchronize(ctx->stream));
    return THG_OK;
}

extern "C" thg_status thg_get_factor(thg_context *ctx, uint32_t mode, double *data, char *err,
                                     size_t errlen)
{
    thg_status st = thg_check_mode(ctx, mode, err, errlen);
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaSetDevice(ctx->device));
    return thg_download_matrix(ctx, data, ctx->factors[mode], (size_t)ctx->dims[mode] * ctx->rank,
                               err, errlen);
}

extern "C" thg_status thg_init_factors(thg_context *ctx, uint64_t seed, double *const *grams,
                                       char *err, size_t errlen)
{
    if (ctx->nmodes == 0)
        return thg_fail(err, errlen, THG_ERR_STATE, "no tensor loaded");
    THG_CUDA(cudaSetDevice(ctx->device));
    const size_t RR = (size_t)ctx->rank * ctx->rank;
    /* The update's Gram accumulator is zero between updates (its last
     * block re-zeroes it) and serves here, re-zeroed after each mode. */
    double *gram_dev = ctx->als_acc.gram;
    for (uint32_t m = 0; m < ctx->nmodes; ++m) {
        thg_status st = thg_launch_init_factor(ctx, m, seed, gram_dev, err, errlen);
        if (st != THG_OK)
            return st;
        THG_CUDA(cudaMemcpyAsync(grams[m], gram_dev, sizeof(double) * RR,
                                 cudaMemcpyDeviceToHost, ctx->stream));
        THG_CUDA(cudaMemsetAsync(gram_dev, 0, sizeof(double) * RR, ctx->stream));
    }
    THG_CUDA(cudaStreamSynchronize(ctx->stream));
    for (uint32_t m = 0; m < ctx->nmodes; ++m)
        thg_gram_mirror(grams[m], ctx->rank);
    return THG_OK;
}
