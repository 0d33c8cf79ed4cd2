/* The factor matrices' contents: copies to and from the host, and the
 * counter-based initial factors drawn on the device.
 *
 * The host's factors are fp64 and the device's fp32; only fp32 crosses the
 * bus. Large copies convert on transfer.cu's host threads while they pack
 * or unpack the pinned pieces (no pass of its own: converting on one core
 * took a second per ~200M values, and a 25.5M x 32 factor has 816M).
 * Small ones convert on the device through a staging buffer of at most
 * 32 MB (4M doubles), allocated with the factors within the memory plan,
 * and cross the bus as fp64. */
#include <algorithm>
#include <string.h>

#include "thg_internal.cuh"

namespace {

/* The staging buffer's doubles: at most what a copy that does not take the
 * pinned memory moves (thg_pinned_copy_min_bytes). */
constexpr size_t kTransferChunk = thg_pinned_copy_min_bytes / sizeof(double);
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
    if (bytes >= thg_pinned_copy_min_bytes) {
        const thg_upload_array array = {dst, src, bytes, THG_UPLOAD_BYTES};
        return thg_pinned_upload(ctx, &array, 1, err, errlen);
    }
    THG_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx->stream));
    THG_CUDA(cudaStreamSynchronize(ctx->stream));
    return THG_OK;
}

thg_status thg_upload_as_float(thg_context *ctx, float *dst, const double *src, size_t n,
                               char *err, size_t errlen)
{
    if (sizeof(double) * n >= thg_pinned_copy_min_bytes) {
        const thg_upload_array array = {dst, src, n, THG_UPLOAD_DOUBLE_TO_FLOAT};
        return thg_pinned_upload(ctx, &array, 1, err, errlen);
    }
    /* Each chunk crosses into the device staging, then a kernel converts
     * it; the stream orders the next chunk's copy after that kernel. */
    for (size_t first = 0; first < n; first += ctx->transfer_elems) {
        const size_t count = std::min(ctx->transfer_elems, n - first);
        THG_CUDA(cudaMemcpyAsync(ctx->transfer_dev, src + first, sizeof(double) * count,
                                 cudaMemcpyHostToDevice, ctx->stream));
        to_float_kernel<<<convert_blocks(ctx, count), kConvertThreads, 0, ctx->stream>>>(
            dst + first, ctx->transfer_dev, count);
        THG_LAUNCHED();
    }
    THG_CUDA(cudaStreamSynchronize(ctx->stream));
    return THG_OK;
}

thg_status thg_download_matrix(thg_context *ctx, double *dst, const float *src, uint64_t rows,
                               const float *col_scale, const uint32_t *row_present,
                               uint64_t row_base, char *err, size_t errlen)
{
    const uint32_t R = ctx->rank;
    const size_t n = (size_t)rows * R;
    if (sizeof(double) * n >= thg_pinned_copy_min_bytes)
        return thg_pinned_download(ctx, dst, src, rows, R, col_scale, row_present, row_base, err,
                                   errlen);
    for (size_t first = 0; first < n; first += ctx->transfer_elems) {
        const size_t count = std::min(ctx->transfer_elems, n - first);
        to_double_kernel<<<convert_blocks(ctx, count), kConvertThreads, 0, ctx->stream>>>(
            ctx->transfer_dev, src + first, count, row_base + first / R, (uint32_t)(first % R), R,
            col_scale, row_present);
        THG_LAUNCHED();
        THG_CUDA(cudaMemcpyAsync(dst + first, ctx->transfer_dev, sizeof(double) * count,
                                 cudaMemcpyDeviceToHost, ctx->stream));
    }
    THG_CUDA(cudaStreamSynchronize(ctx->stream));
    return THG_OK;
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
                               ctx->col_scale + (size_t)mode * ctx->rank, nullptr, 0, err,
                               errlen);
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
