/* Copies between the host's memory and the device at the bus's pinned
 * speed.
 *
 * A copy from pageable memory runs at ~14 GB/s on a bus that carries ~55
 * (the driver stages it through its own pinned buffer on one thread), and
 * page-locking the caller's range instead (cudaHostRegister) costs more
 * than the copy: for 6.5 GB, 0.17 s to register and 0.12 s to unregister
 * around a 0.12 s copy (NVIDIA H200 host, kernels/DESIGN.md). So large
 * copies go through 128 MB of pinned memory of ours, and their host side
 * (~8 GB/s per thread) runs on up to 16 host threads.
 *
 * Each thread takes a contiguous share of the copy and pipelines it alone,
 * on its own stream, through two pinned pieces of its own: it fills one
 * while the bus reads the other (uploads), or unpacks one while the bus
 * fills the other (downloads). No thread waits for another: a hand-over of
 * shared chunks between the bus and the threads reached 19.7 GB/s of 55
 * (kernels/DESIGN.md). The host threads also convert: fp64 to fp32 while
 * packing an upload, fp32 to fp64 with the column scale while unpacking a
 * download, so only fp32 crosses the bus.
 *
 * The pinned memory is allocated on the first large copy and kept with the
 * loaded tensor (thg_free_tensor releases it). */
#include <algorithm>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <thread>
#include <vector>

#include "thg_internal.cuh"

namespace {

constexpr size_t kHugePage = (size_t)2 << 20;
constexpr unsigned kMaxHostThreads = thg_transfer_threads;
constexpr size_t kPinnedBytes = 2 * (size_t)thg_transfer_threads * thg_transfer_piece_bytes;

unsigned host_threads()
{
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1u : std::min(n, kMaxHostThreads);
}

/* Host threads for a copy of `bytes` (crossing the bus): each gets a
 * pipeline's worth at least. */
unsigned threads_for(uint64_t bytes)
{
    return (unsigned)std::max<uint64_t>(
        1, std::min<uint64_t>(host_threads(), bytes / (4 * thg_transfer_piece_bytes)));
}

/* Creates what is missing (a failure part-way leaves the rest to the next
 * call, or to thg_transfer_free). */
thg_status transfer_alloc(thg_context *ctx, char *err, size_t errlen)
{
    if (!ctx->pinned) {
        /* Ordinary (huge-page) memory, then page-locked: cudaHostAlloc took
         * 85 ms for these 128 MB, most of an upload of 2.9 GB (NVIDIA H200
         * host, kernels/DESIGN.md). */
        void *block = aligned_alloc(kHugePage, kPinnedBytes);
        if (block == nullptr)
            return thg_fail(err, errlen, THG_ERR_OUT_OF_MEMORY,
                            "cannot allocate %zu MB of host memory for copies",
                            kPinnedBytes >> 20);
        (void)madvise(block, kPinnedBytes, MADV_HUGEPAGE); /* advice: changes speed only */
        /* Faulted in (and zeroed by the kernel) on all threads, not page by
         * page inside cudaHostRegister on this one. */
        std::vector<std::thread> touch;
        const unsigned threads = host_threads();
        for (unsigned w = 0; w < threads; ++w)
            touch.emplace_back([=] {
                const size_t per = kPinnedBytes / threads;
                memset((char *)block + w * per, 0,
                       w + 1 == threads ? kPinnedBytes - w * per : per);
            });
        for (std::thread &t : touch)
            t.join();
        const cudaError_t e = cudaHostRegister(block, kPinnedBytes, cudaHostRegisterDefault);
        if (e != cudaSuccess) {
            free(block);
            return thg_cuda_fail(err, errlen, e, "cudaHostRegister", __FILE__, __LINE__);
        }
        ctx->pinned = block;
    }
    for (unsigned w = 0; w < kMaxHostThreads; ++w) {
        if (!ctx->transfer_streams[w])
            THG_CUDA(cudaStreamCreateWithFlags(&ctx->transfer_streams[w],
                                               cudaStreamNonBlocking));
        for (unsigned b = 0; b < 2; ++b)
            if (!ctx->transfer_events[2 * w + b])
                THG_CUDA(cudaEventCreateWithFlags(&ctx->transfer_events[2 * w + b],
                                                  cudaEventDisableTiming));
    }
    return THG_OK;
}

/* Thread `thread`'s pinned piece `which` (0 or 1). */
void *transfer_piece(thg_context *ctx, unsigned thread, unsigned which)
{
    return (char *)ctx->pinned + (2 * (size_t)thread + which) * thg_transfer_piece_bytes;
}

/* A transfer thread's outcome. */
struct thread_outcome {
    char err[512] = {};
    thg_status status = THG_OK;
};

/* Runs body(w, err, errlen) for w in [0, threads), on this thread and
 * threads - 1 others; the first failure's status and message. */
template <typename Body>
thg_status run_threads(unsigned threads, const Body &body, char *err, size_t errlen)
{
    std::vector<thread_outcome> outcomes(threads);
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (unsigned w = 1; w < threads; ++w)
        pool.emplace_back([w, &outcomes, &body] {
            thread_outcome &o = outcomes[w];
            o.status = body(w, o.err, sizeof o.err);
        });
    outcomes[0].status = body(0u, outcomes[0].err, sizeof outcomes[0].err);
    for (std::thread &t : pool)
        t.join();
    for (const thread_outcome &o : outcomes)
        if (o.status != THG_OK) {
            snprintf(err, errlen, "%s", o.err);
            return o.status;
        }
    return THG_OK;
}

} // namespace

void thg_transfer_free(thg_context *ctx)
{
    if (ctx->pinned) {
        cudaHostUnregister(ctx->pinned);
        free(ctx->pinned);
        ctx->pinned = nullptr;
    }
    for (unsigned w = 0; w < kMaxHostThreads; ++w) {
        if (ctx->transfer_streams[w])
            cudaStreamDestroy(ctx->transfer_streams[w]);
        ctx->transfer_streams[w] = nullptr;
        for (unsigned b = 0; b < 2; ++b) {
            if (ctx->transfer_events[2 * w + b])
                cudaEventDestroy(ctx->transfer_events[2 * w + b]);
            ctx->transfer_events[2 * w + b] = nullptr;
        }
    }
}

namespace {

size_t out_size(thg_upload_kind kind)
{
    return kind == THG_UPLOAD_BYTES ? 1 : sizeof(float);
}

/* Elements [first, first + n) of `src` into `piece`, as they cross. */
void pack(void *piece, const void *src, size_t first, size_t n, thg_upload_kind kind)
{
    if (kind == THG_UPLOAD_BYTES) {
        memcpy(piece, (const char *)src + first, n);
        return;
    }
    const double *from = (const double *)src + first;
    float *to = (float *)piece;
    for (size_t k = 0; k < n; ++k)
        to[k] = (float)from[k]; /* round to nearest, as __double2float_rn */
}

/* Upload thread w of `threads`: its share of every array in turn, one
 * pipeline through its two pinned pieces on its own stream. */
thg_status upload_thread(thg_context *ctx, unsigned w, unsigned threads,
                         const thg_upload_array *arrays, size_t narrays, char *err,
                         size_t errlen)
{
    cudaStream_t stream = ctx->transfer_streams[w];
    size_t piece = 0;
    for (size_t a = 0; a < narrays; ++a) {
        const thg_upload_array &x = arrays[a];
        const size_t size = out_size(x.kind);
        const size_t piece_elems = thg_transfer_piece_bytes / size;
        const size_t per = (x.n + threads - 1) / threads;
        const size_t begin = std::min(x.n, (size_t)w * per), end = std::min(x.n, begin + per);
        for (size_t first = begin; first < end; first += piece_elems, ++piece) {
            const unsigned b = (unsigned)(piece % 2);
            cudaEvent_t done = ctx->transfer_events[2 * w + b];
            if (piece >= 2) /* the bus has read this piece's previous contents */
                THG_CUDA(cudaEventSynchronize(done));
            void *pinned = transfer_piece(ctx, w, b);
            const size_t n = std::min(piece_elems, end - first);
            pack(pinned, x.src, first, n, x.kind);
            THG_CUDA(cudaMemcpyAsync((char *)x.dst + first * size, pinned, n * size,
                                     cudaMemcpyHostToDevice, stream));
            THG_CUDA(cudaEventRecord(done, stream));
        }
    }
    THG_CUDA(cudaStreamSynchronize(stream));
    return THG_OK;
}

} // namespace

thg_status thg_pinned_upload(thg_context *ctx, const thg_upload_array *arrays, size_t narrays,
                             char *err, size_t errlen)
{
    thg_status st = transfer_alloc(ctx, err, errlen);
    if (st != THG_OK)
        return st;
    /* The streams below do not follow ctx->stream: what it still does
     * with the destinations ends first. */
    THG_CUDA(cudaStreamSynchronize(ctx->stream));
    size_t bytes = 0;
    for (size_t a = 0; a < narrays; ++a)
        bytes += arrays[a].n * out_size(arrays[a].kind);
    const unsigned threads = threads_for(bytes);
    return run_threads(
        threads,
        [=](unsigned w, char *werr, size_t werrlen) {
            return upload_thread(ctx, w, threads, arrays, narrays, werr, werrlen);
        },
        err, errlen);
}

namespace {

/* Rows [first, first + n) of a download, fp32 in `piece`, into fp64 `dst`
 * as to_double_kernel (factors.cu) writes them: times the column scale
 * (fp32 products), absent rows zero (`present` indexes rows from row_base
 * on). */
void unpack(double *dst, const float *piece, uint64_t first, uint64_t n, uint32_t R,
            const float *scale, const uint32_t *present, uint64_t row_base)
{
    for (uint64_t i = 0; i < n; ++i) {
        const uint64_t row = first + i;
        double *out = dst + row * R;
        const float *in = piece + i * R;
        if (present && !thg_row_present(present, row_base + row)) {
            memset(out, 0, sizeof(double) * R);
            continue;
        }
        if (scale)
            for (uint32_t c = 0; c < R; ++c)
                out[c] = (double)(in[c] * scale[c]);
        else
            for (uint32_t c = 0; c < R; ++c)
                out[c] = (double)in[c];
    }
}

/* Download thread w of `threads`: its share of the rows, each piece
 * crossing the bus into one of its pinned pieces while it unpacks the
 * other. */
thg_status download_thread(thg_context *ctx, unsigned w, unsigned threads, double *dst,
                           const float *src, uint64_t rows, uint32_t R, const float *scale,
                           const uint32_t *present, uint64_t row_base, char *err, size_t errlen)
{
    cudaStream_t stream = ctx->transfer_streams[w];
    const uint64_t piece_rows = std::max<uint64_t>(1, thg_transfer_piece_bytes / (sizeof(float) * R));
    const uint64_t per = (rows + threads - 1) / threads;
    const uint64_t begin = std::min(rows, (uint64_t)w * per), end = std::min(rows, begin + per);
    const uint64_t pieces = (end - begin + piece_rows - 1) / piece_rows;
    auto fetch = [&](uint64_t i) -> thg_status {
        const uint64_t first = begin + i * piece_rows, n = std::min(piece_rows, end - first);
        THG_CUDA(cudaMemcpyAsync(transfer_piece(ctx, w, (unsigned)(i % 2)), src + first * R,
                                 sizeof(float) * n * R, cudaMemcpyDeviceToHost, stream));
        THG_CUDA(cudaEventRecord(ctx->transfer_events[2 * w + i % 2], stream));
        return THG_OK;
    };
    for (uint64_t i = 0; i < pieces; ++i) {
        thg_status st = i == 0 ? fetch(0) : THG_OK;
        if (st == THG_OK && i + 1 < pieces)
            st = fetch(i + 1); /* its piece was unpacked in the step before */
        if (st != THG_OK)
            return st;
        THG_CUDA(cudaEventSynchronize(ctx->transfer_events[2 * w + i % 2]));
        const uint64_t first = begin + i * piece_rows;
        unpack(dst, (const float *)transfer_piece(ctx, w, (unsigned)(i % 2)), first,
               std::min(piece_rows, end - first), R, scale, present, row_base);
    }
    THG_CUDA(cudaStreamSynchronize(stream));
    return THG_OK;
}

} // namespace

thg_status thg_pinned_download(thg_context *ctx, double *dst, const float *src, uint64_t rows,
                               uint32_t R, const float *col_scale, const uint32_t *row_present,
                               uint64_t row_base, char *err, size_t errlen)
{
    thg_status st = transfer_alloc(ctx, err, errlen);
    if (st != THG_OK)
        return st;
    /* What ctx->stream still computes into src, the scale or the bitmap
     * ends first; then the two small arrays come to the host. */
    THG_CUDA(cudaStreamSynchronize(ctx->stream));
    std::vector<float> scale(col_scale ? R : 0);
    std::vector<uint32_t> present(row_present ? (row_base + rows + 31) / 32 : 0);
    if (col_scale)
        THG_CUDA(cudaMemcpy(scale.data(), col_scale, sizeof(float) * R, cudaMemcpyDeviceToHost));
    if (row_present)
        THG_CUDA(cudaMemcpy(present.data(), row_present, sizeof(uint32_t) * present.size(),
                            cudaMemcpyDeviceToHost));
    const float *scale_host = col_scale ? scale.data() : nullptr;
    const uint32_t *present_host = row_present ? present.data() : nullptr;
    const unsigned threads = threads_for(sizeof(float) * rows * R);
    return run_threads(
        threads,
        [=](unsigned w, char *werr, size_t werrlen) {
            return download_thread(ctx, w, threads, dst, src, rows, R, scale_host, present_host,
                                   row_base, werr, werrlen);
        },
        err, errlen);
}
