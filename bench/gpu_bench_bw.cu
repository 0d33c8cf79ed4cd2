/* The ceilings gpu_bench divides by, measured on the device in the same
 * run: HBM bandwidth (a large device-to-device copy, bytes read + written),
 * L2 bandwidth (a kernel re-reading a buffer that fits in L2), the rates at
 * which the SMs gather factor rows from L1, L2 and HBM, the bus's
 * pinned bandwidth each way, and the host's copy from pageable into pinned
 * memory on the threads the GPU plugins use: data in pageable memory reaches
 * the bus no faster than the slower of the last two (bench/end-to-end.sh). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace {

int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Each thread sums float4s of the buffer, `passes` times over; the sum is
 * written only when impossible, so the loads cannot be dropped. */
__global__ void l2_read_kernel(const float4 *buf, size_t n, int passes, float *sink)
{
    float acc = 0.0f;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (int p = 0; p < passes; ++p)
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
            const float4 v = __ldcg(buf + i); /* bypass L1: this measures L2 */
            acc += v.x + v.y + v.z + v.w;
        }
    if (acc == -1.0f)
        *sink = acc;
}

/* Factor rows gathered at pseudo-random positions of a table (in L1 where
 * it has at most 64 KiB), the MTTKRP kernel's shape (kernels/mttkrp_impl.cuh): groups of
 * G lanes, each lane J float4s of the row (J = 0: as many as the row has,
 * counted at run time), four rows in flight a group, one block of 1,024
 * threads an SM. The rows' positions come from a generator in registers
 * (no index loads); the sum is written only when impossible. */
template <int G, int J>
__global__ void __launch_bounds__(1024) row_gather_kernel(const float4 *table, uint32_t rows_mask,
                                                         uint32_t cols4, int iters, float *sink)
{
    const uint32_t lane = threadIdx.x % G;
    uint32_t s = (blockIdx.x * blockDim.x + threadIdx.x) / G * 2654435761u + 12345u;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    auto add = [&acc](const float4 v) {
        acc.x += v.x;
        acc.y += v.y;
        acc.z += v.z;
        acc.w += v.w;
    };
    /* Unrolled, a row is G J float4s long (the launch's choice). */
    const size_t stride = J > 0 ? (size_t)G * J : cols4;
    for (int it = 0; it < iters; ++it) {
        const float4 *row[4];
#pragma unroll
        for (int b = 0; b < 4; ++b) {
            s = s * 1664525u + 1013904223u;
            row[b] = table + (size_t)((s >> 8) & rows_mask) * stride;
        }
        if constexpr (J > 0) {
            float4 v[4][J];
#pragma unroll
            for (int b = 0; b < 4; ++b)
#pragma unroll
                for (int j = 0; j < J; ++j)
                    v[b][j] = __ldg(row[b] + lane + j * G);
#pragma unroll
            for (int b = 0; b < 4; ++b)
#pragma unroll
                for (int j = 0; j < J; ++j)
                    add(v[b][j]);
        } else {
            for (uint32_t c = lane; c < cols4; c += G) {
                float4 v[4];
#pragma unroll
                for (int b = 0; b < 4; ++b)
                    v[b] = __ldg(row[b] + c);
#pragma unroll
                for (int b = 0; b < 4; ++b)
                    add(v[b]);
            }
        }
    }
    if (acc.x + acc.y + acc.z + acc.w == -1.0f)
        *sink = acc.x;
}

/* Median of `reps` event-timed runs of `what` (ms). */
template <typename F> float median_ms(int reps, F what)
{
    cudaEvent_t s, e;
    cudaEventCreate(&s);
    cudaEventCreate(&e);
    float t[32];
    what(); /* warm-up */
    for (int i = 0; i < reps; ++i) {
        cudaEventRecord(s, 0);
        what();
        cudaEventRecord(e, 0);
        cudaEventSynchronize(e);
        cudaEventElapsedTime(&t[i], s, e);
    }
    cudaEventDestroy(s);
    cudaEventDestroy(e);
    qsort(t, (size_t)reps, sizeof(float), cmp_float);
    return t[reps / 2];
}

/* The host threads the GPU plugins copy with (kernels/transfer.cu). */
unsigned host_threads()
{
    return std::max(1u, std::min(std::thread::hardware_concurrency(), 16u));
}

/* Thread w's share [*begin, *end) of n items split over `threads`. */
void share_of(size_t n, unsigned threads, unsigned w, size_t *begin, size_t *end)
{
    const size_t per = (n + threads - 1) / threads;
    *begin = std::min(n, (size_t)w * per);
    *end = std::min(n, *begin + per);
}

/* Median of 5 runs of body(w) for w in [0, threads), a thread each
 * (seconds); prepare() runs before each, untimed. */
template <typename P, typename F> double median_seconds_on_threads(unsigned threads, P prepare,
                                                                   F body)
{
    double seconds[5];
    for (double &t : seconds) {
        prepare();
        const auto start = std::chrono::steady_clock::now();
        std::vector<std::thread> pool;
        for (unsigned w = 0; w < threads; ++w)
            pool.emplace_back(body, w);
        for (std::thread &th : pool)
            th.join();
        t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    std::sort(seconds, seconds + 5);
    return seconds[2];
}

} // namespace

/* Bytes read + written per second by cudaMemcpy device to device (1 GiB). */
extern "C" double gpu_bench_hbm_bandwidth(void)
{
    const size_t bytes = (size_t)1 << 30;
    void *a = nullptr, *b = nullptr;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) {
        cudaFree(a);
        return 0.0;
    }
    cudaMemset(a, 1, bytes);
    const float ms = median_ms(9, [&] { cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0); });
    cudaFree(a);
    cudaFree(b);
    return cudaGetLastError() == cudaSuccess ? 2.0 * bytes / (ms * 1e-3) : 0.0;
}

/* Bytes read per second from L2: a buffer of a third of the L2 read 20
 * times by 4 blocks of 512 threads per SM. */
extern "C" double gpu_bench_l2_bandwidth(void)
{
    int dev = 0, l2 = 0, sms = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    const size_t bytes = (size_t)l2 / 3 / 4096 * 4096;
    const int passes = 20;
    float4 *buf = nullptr;
    float *sink = nullptr;
    if (bytes == 0 || cudaMalloc(&buf, bytes) != cudaSuccess ||
        cudaMalloc(&sink, sizeof(float)) != cudaSuccess) {
        cudaFree(buf);
        return 0.0;
    }
    cudaMemset(buf, 0, bytes);
    const size_t n = bytes / sizeof(float4);
    const float ms = median_ms(9, [&] { l2_read_kernel<<<sms * 4, 512>>>(buf, n, passes, sink); });
    cudaFree(buf);
    cudaFree(sink);
    return cudaGetLastError() == cudaSuccess ? (double)bytes * passes / (ms * 1e-3) : 0.0;
}

/* Rows of `rank` floats (ceil(rank / 4) float4s) a second that the SMs
 * gather from a table of at most `table_bytes` (row_gather_kernel). */
static double row_gather_rate(uint32_t rank, size_t table_bytes)
{
    int dev = 0, sms = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    const uint32_t cols4 = rank < 4 ? 1u : (rank + 3) / 4;
    uint32_t rows = 1;
    while ((size_t)rows * 2 * cols4 * sizeof(float4) <= table_bytes && rows < (1u << 24))
        rows *= 2;
    const int iters = 4096;
    float4 *table = nullptr;
    float *sink = nullptr;
    const size_t bytes = (size_t)rows * cols4 * sizeof(float4);
    if (cudaMalloc(&table, bytes) != cudaSuccess ||
        cudaMalloc(&sink, sizeof(float)) != cudaSuccess) {
        cudaFree(table);
        return 0.0;
    }
    cudaMemset(table, 0, bytes);
    /* Rows of 1, 2, 4 or 8 float4s: a lane each; multiples of 8 up to 32:
     * 8 lanes of up to 4 (the MTTKRP kernel's shapes, unrolled); others:
     * 8 lanes counting the row's float4s. */
    uint32_t group = cols4 >= 8 ? 8 : cols4 >= 4 ? 4 : cols4 >= 2 ? 2 : 1;
    const uint32_t per_lane = cols4 % group == 0 && cols4 / group <= 4 ? cols4 / group : 0;
    if (per_lane == 0)
        group = 8;
    auto launch = [&] {
        const dim3 grid(sms), block(1024);
        const uint32_t mask = rows - 1;
        switch (group * 8 + per_lane) {
        case 1 * 8 + 1: row_gather_kernel<1, 1><<<grid, block>>>(table, mask, cols4, iters, sink); break;
        case 2 * 8 + 1: row_gather_kernel<2, 1><<<grid, block>>>(table, mask, cols4, iters, sink); break;
        case 4 * 8 + 1: row_gather_kernel<4, 1><<<grid, block>>>(table, mask, cols4, iters, sink); break;
        case 8 * 8 + 1: row_gather_kernel<8, 1><<<grid, block>>>(table, mask, cols4, iters, sink); break;
        case 8 * 8 + 2: row_gather_kernel<8, 2><<<grid, block>>>(table, mask, cols4, iters, sink); break;
        case 8 * 8 + 3: row_gather_kernel<8, 3><<<grid, block>>>(table, mask, cols4, iters, sink); break;
        case 8 * 8 + 4: row_gather_kernel<8, 4><<<grid, block>>>(table, mask, cols4, iters, sink); break;
        default: row_gather_kernel<8, 0><<<grid, block>>>(table, mask, cols4, iters, sink); break;
        }
    };
    const float ms = median_ms(9, launch);
    cudaFree(table);
    cudaFree(sink);
    const double gathered = (double)sms * (1024 / group) * iters * 4;
    return cudaGetLastError() == cudaSuccess ? gathered / (ms * 1e-3) : 0.0;
}

/* Rows of `rank` floats a second that the SMs gather from L1 (a 64 KiB
 * table): an L1 wavefront serves at most one 128-byte line, and an SM's L1
 * about one wavefront a clock, so no kernel that gathers a nonzero's
 * factor rows one by one gathers them faster. */
extern "C" double gpu_bench_l1_gather_rate(uint32_t rank)
{
    return row_gather_rate(rank, (size_t)64 << 10);
}

/* The same from a table of a quarter of the L2 (every row an L1 miss and
 * an L2 hit), or of four times the L2 (most rows from HBM). */
extern "C" double gpu_bench_table_gather_rate(uint32_t rank, double l2_multiple)
{
    int dev = 0, l2 = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
    return l2 > 0 ? row_gather_rate(rank, (size_t)(l2 * l2_multiple)) : 0.0;
}

/* Bytes per second of a 256 MiB copy between pinned host memory and the
 * device, to the device (to_device != 0) or back. */
extern "C" double gpu_bench_pcie_bandwidth(int to_device)
{
    const size_t bytes = (size_t)256 << 20;
    void *host = nullptr, *dev = nullptr;
    if (cudaMallocHost(&host, bytes) != cudaSuccess || cudaMalloc(&dev, bytes) != cudaSuccess) {
        cudaFreeHost(host);
        return 0.0;
    }
    memset(host, 1, bytes);
    const float ms = median_ms(5, [&] {
        if (to_device)
            cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, 0);
        else
            cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, 0);
    });
    cudaFreeHost(host);
    cudaFree(dev);
    return cudaGetLastError() == cudaSuccess ? bytes / (ms * 1e-3) : 0.0;
}

/* Bytes per second of copying 1 GiB of pageable memory (touched before)
 * into a 64 MB pinned buffer, each piece split over up to 16 host threads
 * as kernels/transfer.cu splits its chunks; median of 5. */
extern "C" double gpu_bench_host_staging_bandwidth(void)
{
    const size_t total = (size_t)1 << 30, chunk = (size_t)64 << 20;
    char *pageable = (char *)malloc(total);
    void *pinned = nullptr;
    if (pageable == nullptr || cudaMallocHost(&pinned, chunk) != cudaSuccess) {
        free(pageable);
        return 0.0;
    }
    memset(pageable, 1, total);
    const unsigned threads = host_threads();
    const double seconds = median_seconds_on_threads(threads, [] {}, [=](unsigned w) {
        size_t begin, end;
        share_of(chunk, threads, w, &begin, &end);
        for (size_t off = 0; off < total; off += chunk)
            memcpy((char *)pinned + begin, pageable + off + begin, end - begin);
    });
    cudaFreeHost(pinned);
    free(pageable);
    return total / seconds;
}

/* Bytes per second of one pass over 2 GiB of pageable memory (touched
 * before) on up to 16 host threads, each over a contiguous share: reading
 * it (summing doubles) or, with `in_place`, scaling it in place (read and
 * written back). What the host's arrangement of a model (libtensorhost/
 * cp_model.c: one read pass and one in-place pass over every factor) is
 * bounded by; median of 5. */
extern "C" double gpu_bench_host_pass_bandwidth(int in_place)
{
    const size_t n = ((size_t)2 << 30) / sizeof(double);
    double *data = (double *)malloc(n * sizeof(double));
    if (data == nullptr)
        return 0.0;
    for (size_t i = 0; i < n; ++i)
        data[i] = 1.0;
    const unsigned threads = host_threads();
    std::vector<double> sums(threads);
    const double seconds = median_seconds_on_threads(threads, [] {}, [=, &sums](unsigned w) {
        size_t begin, end;
        share_of(n, threads, w, &begin, &end);
        double acc[8] = {}; /* independent sums: not one chain of adds */
        if (in_place)
            for (size_t i = begin; i < end; ++i)
                data[i] *= 1.0000001;
        else
            for (size_t i = begin; i + 8 <= end; i += 8)
                for (int k = 0; k < 8; ++k)
                    acc[k] += data[i + k];
        sums[w] = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
    });
    volatile double keep = sums[0]; /* the reads are not dead code */
    (void)keep;
    free(data);
    return n * sizeof(double) / seconds;
}

/* Bytes per second of writing 2 GiB of fresh memory (allocated anew each
 * time, huge pages advised, as th_alloc_large does) on up to 16 host
 * threads: the kernel faults in and zeroes every page on the way. What a
 * copy into freshly allocated host memory (the factors copied back from a
 * backend) is bounded by; median of 5. */
extern "C" double gpu_bench_host_fresh_bandwidth(void)
{
    const size_t bytes = (size_t)2 << 30;
    const unsigned threads = host_threads();
    void *p = nullptr;
    bool allocated = true;
    const double seconds = median_seconds_on_threads(
        threads,
        [&] {
            free(p);
            p = nullptr;
            allocated = allocated && posix_memalign(&p, (size_t)2 << 20, bytes) == 0;
            if (allocated)
                (void)madvise(p, bytes, MADV_HUGEPAGE);
        },
        [&](unsigned w) {
            size_t begin, end;
            share_of(bytes, threads, w, &begin, &end);
            if (allocated)
                memset((char *)p + begin, 1, end - begin);
        });
    free(p);
    return allocated ? bytes / seconds : 0.0;
}
