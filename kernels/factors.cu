/* The factor matrices' contents: copies to and from the host, and the
 * counter-based initial factors drawn on the device.
 *
 * The host's factors are fp64 and the device's fp32. Converting on the host
 * took one core a second per ~200M values (a 25.5M x 32 factor: seconds
 * each way, plus a host buffer of its size), so the conversion runs on the
 * device: fp64 chunks cross the bus into a device staging buffer and a
 * kernel converts them in place of the factor (and back for get, applying
 * the factor's column scale, als.cu). The staging buffer is allocated with
 * the factors, within the memory plan; the host side of large copies goes
 * through transfer.cu's pinned chunks. */
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

/* n values of a rows x R matrix, from element e0 = row0 * R + c0 on: the
 * column scale applied, rows absent from row_present zero (their stored
 * values were never written). */
__global__ void to_double_kernel(double *dst, const float *src, size_t n, uint64_t row0,
                                 uint32_t c0, uint32_t R, const float *col_scale,
                                 const uint32_t *row_present)
{
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x) {
        const size_t within = c0 + k; /* < 2^32 R: n is one staging chunk */
        const uint64_t row = row0 + within / R;
        const uint32_t c = (uint32_t)(within % R);
        float v = src[k];
        if (row_present && !thg_row_present(row_present, row))
            v = 0.0f;
        else if (col_scale)
            v *= col_scale[c];
        dst[k] = (double)v;
    }
}

__global__ void fill_kernel(float *dst, size_t n, float value)
{
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x)
        dst[k] = value;
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

thg_status thg_copy_to_device(thg_context *ctx, void *dst, const void *src, size_t bytes,
                              char *err, size_t errlen)
{
    auto place = [ctx, dst](size_t off, size_t n, const void *host, cudaMemcpyKind kind,
                            char *err, size_t errlen) -> thg_status {
        THG_CUDA(cudaMemcpyAsync((char *)dst + off, host, n, kind, ctx->stream));
        return THG_OK;
    };
    return thg_ring_upload(ctx, src, bytes, thg_ring_chunk_bytes, place, err, errlen);
}

thg_status thg_upload_as_float(thg_context *ctx, float *dst, const double *src, size_t n,
                               char *err, size_t errlen)
{
    /* Each chunk crosses into the device staging, then a kernel converts
     * it; the stream orders the next chunk's copy after that kernel. */
    auto place = [ctx, dst](size_t off, size_t bytes, const void *host, cudaMemcpyKind kind,
                            char *err, size_t errlen) -> thg_status {
        const size_t first = off / sizeof(double), count = bytes / sizeof(double);
        THG_CUDA(cudaMemcpyAsync(ctx->transfer_dev, host, bytes, kind, ctx->stream));
        to_float_kernel<<<convert_blocks(ctx, count), kConvertThreads, 0, ctx->stream>>>(
            dst + first, ctx->transfer_dev, count);
        THG_LAUNCHED();
        return THG_OK;
    };
    return thg_ring_upload(ctx, src, sizeof(double) * n, sizeof(double) * ctx->transfer_elems,
                           place, err, errlen);
}

thg_status thg_download_matrix(thg_context *ctx, double *dst, const float *src, uint64_t rows,
                               const float *col_scale, const uint32_t *row_present, char *err,
                               size_t errlen)
{
    const uint32_t R = ctx->rank;
    auto stage = [ctx, src, R, col_scale, row_present](size_t off, size_t bytes,
                                                         const void **out, char *err,
                                                         size_t errlen) -> thg_status {
        const uint64_t first = off / sizeof(double);
        const size_t count = bytes / sizeof(double);
        to_double_kernel<<<convert_blocks(ctx, count), kConvertThreads, 0, ctx->stream>>>(
            ctx->transfer_dev, src + first, count, first / R, (uint32_t)(first % R), R,
            col_scale, row_present);
        THG_LAUNCHED();
        *out = ctx->transfer_dev;
        return THG_OK;
    };
    return thg_ring_download(ctx, dst, sizeof(double) * rows * R,
                             sizeof(double) * ctx->transfer_elems, stage, err, errlen);
}

thg_status thg_fill_floats(thg_context *ctx, float *dst, size_t n, float value, char *err,
                           size_t errlen)
{
    fill_kernel<<<convert_blocks(ctx, n), kConvertThreads, 0, ctx->stream>>>(dst, n, value);
    THG_LAUNCHED();
    return THG_OK;
}

extern "C" thg_status thg_set_factor(thg_context *ctx, uint32_t mode, const double *data,
                                     char *err, size_t errlen)
{
    thg_status st = thg_check_mode(ctx, mode, err, errlen);
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaSetDevice(ctx->device));
    st = thg_fill_floats(ctx, ctx->col_scale + (size_t)mode * ctx->rank, ctx->rank, 1.0f, err,
                         errlen);
    if (st != THG_OK)
        return st;
    return thg_upload_as_float(ctx, ctx->factors[mode], data,
                               (size_t)ctx->dims[mode] * ctx->rank, err, errlen);
}

extern "C" thg_status thg_get_factor(thg_context *ctx, uint32_t mode, double *data, char *err,
                                     size_t errlen)
{
    thg_status st = thg_check_mode(ctx, mode, err, errlen);
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaSetDevice(ctx->device));
    return thg_download_matrix(ctx, data, ctx->factors[mode], ctx->dims[mode],
                               ctx->col_scale + (size_t)mode * ctx->rank, nullptr, err, errlen);
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
        thg_status st = thg_fill_floats(ctx, ctx->col_scale + (size_t)m * ctx->rank, ctx->rank,
                                        1.0f, err, errlen);
        if (st == THG_OK)
            st = thg_launch_init_factor(ctx, m, seed, gram_dev, err, errlen);
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
