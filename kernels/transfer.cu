/* Copies between the host's memory and the device at the bus's pinned
 * speed.
 *
 * A copy from pageable memory runs at ~14 GB/s on a bus that carries ~55
 * (the driver stages it through its own pinned buffer on one thread), and
 * page-locking the caller's range instead (cudaHostRegister) costs more
 * than the copy: for 6.5 GB, 0.17 s to register and 0.12 s to unregister
 * around a 0.12 s copy (NVIDIA H200 host, kernels/DESIGN.md). So large
 * copies go through two pinned chunks of ours, the device side of one
 * chunk overlapping the host side of the other, and the host side (a
 * memcpy between the caller's memory and the pinned chunk) split over
 * host threads: one thread's memcpy moves ~8 GB/s.
 *
 * The pinned chunks are allocated on the first large copy and kept with
 * the loaded tensor (thg_free_tensor releases them). */
#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string.h>
#include <thread>
#include <vector>

#include "thg_internal.cuh"

namespace {

/* Copies from this size up take the pinned chunks. */
constexpr size_t kRingBytes = (size_t)32 << 20;
/* Host threads splitting each chunk's memcpy: ~2 GB/s of the bus each. */
constexpr unsigned kMaxHostThreads = 16;

thg_status ring_alloc(thg_context *ctx, char *err, size_t errlen)
{
    if (ctx->ring_pinned[0])
        return THG_OK;
    for (int b = 0; b < 2; ++b) {
        THG_CUDA(cudaHostAlloc(&ctx->ring_pinned[b], thg_ring_chunk_bytes, cudaHostAllocDefault));
        THG_CUDA(cudaEventCreateWithFlags(&ctx->ring_events[b], cudaEventDisableTiming));
    }
    return THG_OK;
}

/* A large copy's chunk count, and the pinned chunks (on first use). */
thg_status ring_begin(thg_context *ctx, size_t total, size_t chunk, size_t *nchunks, char *err,
                      size_t errlen)
{
    *nchunks = (total + chunk - 1) / chunk;
    return ring_alloc(ctx, err, errlen);
}

unsigned host_threads()
{
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1u : std::min(n, kMaxHostThreads);
}

/* Which chunks the host threads may take and which they finished. */
struct ring_state {
    std::mutex mu;
    std::condition_variable cv;
    size_t ready = 0;       /* chunks [0, ready) may be worked on */
    size_t finished = 0;    /* chunks [0, finished) are done by every thread */
    unsigned count[2] = {}; /* threads done with the current chunk of each buffer */
};

/* Thread `w` of `threads`: its slice of each chunk once the chunk is
 * ready, `copy(j, offset in chunk, length)`. */
void host_worker(ring_state &rs, unsigned w, unsigned threads, size_t nchunks, size_t total,
                 size_t chunk, const std::function<void(size_t, size_t, size_t)> &copy)
{
    for (size_t j = 0; j < nchunks; ++j) {
        {
            std::unique_lock<std::mutex> lock(rs.mu);
            rs.cv.wait(lock, [&] { return rs.ready > j; });
        }
        const size_t bytes = std::min(chunk, total - j * chunk);
        const size_t per = (bytes + threads - 1) / threads;
        const size_t begin = std::min(bytes, (size_t)w * per);
        const size_t end = std::min(bytes, begin + per);
        if (end > begin)
            copy(j, begin, end - begin);
        std::lock_guard<std::mutex> lock(rs.mu);
        if (++rs.count[j % 2] == threads) {
            rs.count[j % 2] = 0;
            rs.finished = j + 1;
            rs.cv.notify_all();
        }
    }
}

void wait_finished(ring_state &rs, size_t chunks)
{
    std::unique_lock<std::mutex> lock(rs.mu);
    rs.cv.wait(lock, [&] { return rs.finished >= chunks; });
}

void make_ready(ring_state &rs, size_t chunks)
{
    std::lock_guard<std::mutex> lock(rs.mu);
    rs.ready = chunks;
    rs.cv.notify_all();
}

/* Runs the host threads of one copy; `drive` is the main thread's part
 * and must make every chunk ready (or stop with an error, making all
 * ready so the threads finish). */
thg_status run_ring(size_t total, size_t chunk,
                    const std::function<void(size_t, size_t, size_t)> &copy,
                    const std::function<thg_status(ring_state &)> &drive)
{
    const size_t nchunks = (total + chunk - 1) / chunk;
    const unsigned threads = host_threads();
    ring_state rs;
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (unsigned w = 0; w < threads; ++w)
        pool.emplace_back(host_worker, std::ref(rs), w, threads, nchunks, total, chunk,
                          std::cref(copy));
    const thg_status st = drive(rs);
    make_ready(rs, nchunks); /* after a failure: let the threads run out */
    for (std::thread &t : pool)
        t.join();
    return st;
}

} // namespace

void thg_ring_free(thg_context *ctx)
{
    for (int b = 0; b < 2; ++b) {
        if (ctx->ring_pinned[b])
            cudaFreeHost(ctx->ring_pinned[b]);
        if (ctx->ring_events[b])
            cudaEventDestroy(ctx->ring_events[b]);
        ctx->ring_pinned[b] = nullptr;
        ctx->ring_events[b] = nullptr;
    }
}

thg_status thg_ring_download(thg_context *ctx, void *dst, size_t total, size_t chunk,
                             const thg_ring_stage_fn &stage, char *err, size_t errlen)
{
    chunk = std::min(chunk, thg_ring_chunk_bytes);
    if (total < kRingBytes) { /* one pageable copy per chunk the stage produces */
        for (size_t off = 0; off < total; off += chunk) {
            const size_t bytes = std::min(chunk, total - off);
            const void *src = nullptr;
            const thg_status st = stage(off, bytes, &src, err, errlen);
            if (st != THG_OK)
                return st;
            THG_CUDA(cudaMemcpyAsync((char *)dst + off, src, bytes, cudaMemcpyDeviceToHost,
                                     ctx->stream));
        }
        THG_CUDA(cudaStreamSynchronize(ctx->stream));
        return THG_OK;
    }
    size_t nchunks = 0;
    thg_status st = ring_begin(ctx, total, chunk, &nchunks, err, errlen);
    if (st != THG_OK)
        return st;
    auto copy = [ctx, dst, chunk](size_t j, size_t begin, size_t len) {
        memcpy((char *)dst + j * chunk + begin,
               (const char *)ctx->ring_pinned[j % 2] + begin, len);
    };
    /* Chunk j + 1 crosses the bus while the threads copy chunk j out; only
     * this thread waits on the device (16 threads polling one event made
     * every runtime call slower). */
    auto enqueue = [&](size_t j) -> thg_status {
        const size_t off = j * chunk;
        const size_t bytes = std::min(chunk, total - off);
        const void *src = nullptr;
        const thg_status s = stage(off, bytes, &src, err, errlen);
        if (s != THG_OK)
            return s;
        THG_CUDA(cudaMemcpyAsync(ctx->ring_pinned[j % 2], src, bytes, cudaMemcpyDeviceToHost,
                                 ctx->stream));
        THG_CUDA(cudaEventRecord(ctx->ring_events[j % 2], ctx->stream));
        return THG_OK;
    };
    auto drive = [&](ring_state &rs) -> thg_status {
        thg_status s = enqueue(0);
        for (size_t j = 0; j < nchunks && s == THG_OK; ++j) {
            if (j + 1 < nchunks) {
                if (j >= 1)
                    wait_finished(rs, j); /* the threads emptied chunk j - 1's buffer */
                s = enqueue(j + 1);
                if (s != THG_OK)
                    break;
            }
            THG_CUDA(cudaEventSynchronize(ctx->ring_events[j % 2]));
            make_ready(rs, j + 1);
        }
        if (s == THG_OK)
            wait_finished(rs, nchunks);
        return s;
    };
    st = run_ring(total, chunk, copy, drive);
    const cudaError_t e = cudaStreamSynchronize(ctx->stream); /* also after a failure */
    if (st != THG_OK)
        return st;
    THG_CUDA(e);
    return THG_OK;
}

thg_status thg_ring_upload(thg_context *ctx, const void *src, size_t total, size_t chunk,
                           const thg_ring_place_fn &place, char *err, size_t errlen)
{
    chunk = std::min(chunk, thg_ring_chunk_bytes);
    if (total < kRingBytes) {
        for (size_t off = 0; off < total; off += chunk) {
            const size_t bytes = std::min(chunk, total - off);
            const thg_status st =
                place(off, bytes, (const char *)src + off, cudaMemcpyHostToDevice, err, errlen);
            if (st != THG_OK)
                return st;
        }
        THG_CUDA(cudaStreamSynchronize(ctx->stream));
        return THG_OK;
    }
    size_t nchunks = 0;
    thg_status st = ring_begin(ctx, total, chunk, &nchunks, err, errlen);
    if (st != THG_OK)
        return st;
    auto copy = [ctx, src, chunk](size_t j, size_t begin, size_t len) {
        memcpy((char *)ctx->ring_pinned[j % 2] + begin, (const char *)src + j * chunk + begin,
               len);
    };
    auto drive = [&](ring_state &rs) -> thg_status {
        for (size_t j = 0; j < nchunks; ++j) {
            if (j >= 2) /* the bus has read this buffer's previous chunk */
                THG_CUDA(cudaEventSynchronize(ctx->ring_events[j % 2]));
            make_ready(rs, j + 1);
            wait_finished(rs, j + 1);
            const size_t off = j * chunk;
            const size_t bytes = std::min(chunk, total - off);
            const thg_status s = place(off, bytes, ctx->ring_pinned[j % 2],
                                       cudaMemcpyHostToDevice, err, errlen);
            if (s != THG_OK)
                return s;
            THG_CUDA(cudaEventRecord(ctx->ring_events[j % 2], ctx->stream));
        }
        return THG_OK;
    };
    st = run_ring(total, chunk, copy, drive);
    const cudaError_t e = cudaStreamSynchronize(ctx->stream);
    if (st != THG_OK)
        return st;
    THG_CUDA(e);
    return THG_OK;
}
