/* What the GPUs of one host reach when each stores a block into every
 * other at once, as the direct exchange of kernels/comm.cu does for a
 * factor's rows: G devices with peer access, each holding a buffer of G
 * blocks, each pushing its own block to the same place in every other
 * device's buffer. Ways of dealing the work, each at several grid shapes
 * (the direct exchange takes the second, BENCHMARKS.md "Several GPUs",
 * "What the scaling rests on"):
 *   peer-major   every thread block stores to one peer, then the next;
 *   dealt        thread blocks dealt to the peers in turn (block b to peer
 *                1 + b mod (G - 1));
 *   every-peer   each thread loads a unit once and stores it to every peer;
 *   copy-engine  one cudaMemcpyAsync a peer, each on a stream of its own;
 *   dealt-x4     dealt, four units in flight a thread (loads, then stores);
 *   pull, pull-x4, pull-x8
 *                the same exchange the other way: each device's blocks,
 *                dealt to the peers in turn, load the peer's own block
 *                and store it locally (one, four or eight units in flight).
 * The time of a run is the slowest device's (CUDA events around its work);
 * printed: the median over 12 runs after 3 warm-ups, and each device's
 * outgoing rate at that time.
 *
 *   nvlink_push_bench [DEVICES [BYTES]]   (default: every device; 7816576
 *                                          bytes, a quarter of enron's
 *                                          244K x 32 factor) */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

namespace {

#define CHECK(call)                                                                          \
    do {                                                                                     \
        const cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "nvlink_push_bench: %s: %s (%s:%d)\n", #call,                    \
                    cudaGetErrorString(e_), __FILE__, __LINE__);                             \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

constexpr int kMaxDevices = 8;
constexpr int kWarmups = 3, kRuns = 12;

struct peers {
    uint4 *dst[kMaxDevices]; /* device d's copy of this device's block */
    const uint4 *peer_src[kMaxDevices]; /* device d's own block, on device d */
    uint4 *local_dst[kMaxDevices];      /* this device's copy of device d's block */
    int G, self;
};

__global__ void push_peer_major(const uint4 *src, size_t units, peers p)
{
    for (int s = 1; s < p.G; ++s) {
        uint4 *d = p.dst[(p.self + s) % p.G];
        for (size_t u = blockIdx.x * (size_t)blockDim.x + threadIdx.x; u < units;
             u += (size_t)gridDim.x * blockDim.x)
            d[u] = src[u];
    }
}

__global__ void push_dealt(const uint4 *src, size_t units, peers p)
{
    const unsigned lanes = (unsigned)p.G - 1u, lane = blockIdx.x % lanes;
    const unsigned mine = blockIdx.x / lanes, per_lane = gridDim.x / lanes;
    uint4 *d = p.dst[(p.self + 1 + (int)lane) % p.G];
    for (size_t u = mine * (size_t)blockDim.x + threadIdx.x; u < units;
         u += (size_t)per_lane * blockDim.x)
        d[u] = src[u];
}

__global__ void push_every_peer(const uint4 *src, size_t units, peers p)
{
    for (size_t u = blockIdx.x * (size_t)blockDim.x + threadIdx.x; u < units;
         u += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = src[u];
        for (int s = 1; s < p.G; ++s)
            p.dst[(p.self + s) % p.G][u] = v;
    }
}

/* dealt, with U units a thread in flight (their loads before their
 * stores); PULL: each device loads its peers' blocks and stores them
 * locally instead of storing its own into theirs. */
template <int U, bool PULL>
__global__ void move_dealt(const uint4 *src, size_t units, peers p)
{
    const unsigned lanes = (unsigned)p.G - 1u, lane = blockIdx.x % lanes;
    const unsigned mine = blockIdx.x / lanes, per_lane = gridDim.x / lanes;
    const int peer = (p.self + 1 + (int)lane) % p.G;
    const uint4 *from = PULL ? p.peer_src[peer] : src;
    uint4 *to = PULL ? p.local_dst[peer] : p.dst[peer];
    const size_t stride = (size_t)per_lane * blockDim.x;
    for (size_t u = mine * (size_t)blockDim.x + threadIdx.x; u < units; u += U * stride) {
        uint4 v[U];
#pragma unroll
        for (int i = 0; i < U; ++i)
            if (u + i * stride < units)
                v[i] = from[u + i * stride];
#pragma unroll
        for (int i = 0; i < U; ++i)
            if (u + i * stride < units)
                to[u + i * stride] = v[i];
    }
}

enum method { kPeerMajor, kDealt, kEveryPeer, kCopyEngine, kDealt4, kPull, kPull4, kPull8 };
const char *const kNames[] = {"peer-major", "dealt",  "every-peer", "copy-engine",
                              "dealt-x4",   "pull",   "pull-x4",    "pull-x8"};

struct device_state {
    uint4 *buf = nullptr;
    cudaStream_t streams[kMaxDevices] = {}; /* [0] the main one, [s] the copy to peer s */
    cudaEvent_t start = nullptr, stop = nullptr, fork = nullptr;
    cudaEvent_t joins[kMaxDevices] = {};
};

/* One run of `how` on every device at once; the slowest device's ms. */
float run_once(std::vector<device_state> &ds, method how, size_t bytes, unsigned blocks,
               unsigned threads)
{
    const int G = (int)ds.size();
    const size_t units = bytes / sizeof(uint4);
    for (int g = 0; g < G; ++g) {
        CHECK(cudaSetDevice(g));
        CHECK(cudaDeviceSynchronize());
    }
    for (int g = 0; g < G; ++g) {
        CHECK(cudaSetDevice(g));
        device_state &d = ds[g];
        peers p = {};
        p.G = G;
        p.self = g;
        for (int h = 0; h < G; ++h) {
            p.dst[h] = ds[h].buf + (size_t)g * units;
            p.peer_src[h] = ds[h].buf + (size_t)h * units;
            p.local_dst[h] = d.buf + (size_t)h * units;
        }
        const uint4 *src = d.buf + (size_t)g * units;
        CHECK(cudaEventRecord(d.start, d.streams[0]));
        switch (how) {
        case kPeerMajor:
            push_peer_major<<<blocks, threads, 0, d.streams[0]>>>(src, units, p);
            break;
        case kDealt:
            push_dealt<<<blocks, threads, 0, d.streams[0]>>>(src, units, p);
            break;
        case kEveryPeer:
            push_every_peer<<<blocks, threads, 0, d.streams[0]>>>(src, units, p);
            break;
        case kDealt4:
            move_dealt<4, false><<<blocks, threads, 0, d.streams[0]>>>(src, units, p);
            break;
        case kPull:
            move_dealt<1, true><<<blocks, threads, 0, d.streams[0]>>>(src, units, p);
            break;
        case kPull4:
            move_dealt<4, true><<<blocks, threads, 0, d.streams[0]>>>(src, units, p);
            break;
        case kPull8:
            move_dealt<8, true><<<blocks, threads, 0, d.streams[0]>>>(src, units, p);
            break;
        case kCopyEngine:
            CHECK(cudaEventRecord(d.fork, d.streams[0]));
            for (int s = 1; s < G; ++s) {
                CHECK(cudaStreamWaitEvent(d.streams[s], d.fork, 0));
                CHECK(cudaMemcpyAsync(p.dst[(g + s) % G], src, bytes, cudaMemcpyDeviceToDevice,
                                      d.streams[s]));
                CHECK(cudaEventRecord(d.joins[s], d.streams[s]));
                CHECK(cudaStreamWaitEvent(d.streams[0], d.joins[s], 0));
            }
            break;
        }
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(d.stop, d.streams[0]));
    }
    float slowest = 0.0f;
    for (int g = 0; g < G; ++g) {
        CHECK(cudaSetDevice(g));
        CHECK(cudaEventSynchronize(ds[g].stop));
        float ms = 0.0f;
        CHECK(cudaEventElapsedTime(&ms, ds[g].start, ds[g].stop));
        slowest = std::max(slowest, ms);
    }
    return slowest;
}

} // namespace

int main(int argc, char **argv)
{
    int available = 0;
    CHECK(cudaGetDeviceCount(&available));
    const int G = argc > 1 ? atoi(argv[1]) : std::min(available, kMaxDevices);
    const size_t bytes = (argc > 2 ? strtoull(argv[2], nullptr, 10) : 7816576ull) / 16 * 16;
    if (G < 2 || G > available || G > kMaxDevices || bytes == 0) {
        fprintf(stderr, "usage: nvlink_push_bench [DEVICES [BYTES]]: 2 to %d devices (this host "
                        "has %d), BYTES > 0\n",
                kMaxDevices, available);
        return 2;
    }
    std::vector<device_state> ds(G);
    for (int g = 0; g < G; ++g) {
        CHECK(cudaSetDevice(g));
        for (int h = 0; h < G; ++h) {
            int can = 0;
            CHECK(cudaDeviceCanAccessPeer(&can, g, h));
            if (h != g && !can) {
                fprintf(stderr, "nvlink_push_bench: device %d cannot reach device %d\n", g, h);
                return 1;
            }
            if (h != g)
                CHECK(cudaDeviceEnablePeerAccess(h, 0));
        }
        device_state &d = ds[g];
        CHECK(cudaMalloc(&d.buf, bytes * G));
        CHECK(cudaMemset(d.buf, 1, bytes * G));
        for (int s = 0; s < G; ++s) {
            CHECK(cudaStreamCreateWithFlags(&d.streams[s], cudaStreamNonBlocking));
            CHECK(cudaEventCreateWithFlags(&d.joins[s], cudaEventDisableTiming));
        }
        CHECK(cudaEventCreate(&d.start));
        CHECK(cudaEventCreate(&d.stop));
        CHECK(cudaEventCreateWithFlags(&d.fork, cudaEventDisableTiming));
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("%d x %s, %zu bytes from each device to each of the other %d\n", G, prop.name, bytes,
           G - 1);
    const unsigned sms = (unsigned)prop.multiProcessorCount;
    const unsigned grids[] = {sms / 4, sms / 2, sms, 2 * sms};
    const unsigned shapes[] = {256, 512, 1024};
    for (int how = kPeerMajor; how <= kPull8; ++how)
        for (unsigned blocks : grids)
            for (unsigned threads : shapes) {
                if (how == kCopyEngine && (blocks != sms || threads != 512))
                    continue; /* no grid of ours */
                /* dealt: a multiple of the peers, as the direct exchange launches */
                const bool dealt = how == kDealt || how >= kDealt4;
                const unsigned grid = dealt ? std::max(1u, blocks / (G - 1)) * (G - 1) : blocks;
                std::vector<float> ms;
                for (int r = 0; r < kWarmups + kRuns; ++r) {
                    const float t = run_once(ds, (method)how, bytes, grid, threads);
                    if (r >= kWarmups)
                        ms.push_back(t);
                }
                std::sort(ms.begin(), ms.end());
                const double us = ms[ms.size() / 2] * 1e3;
                if (how == kCopyEngine)
                    printf("%-12s                        %8.1f us  %6.1f GB/s out of each\n",
                           kNames[how], us, (double)bytes * (G - 1) / us * 1e-3);
                else
                    printf("%-12s %4u blocks x %4u threads %8.1f us  %6.1f GB/s %s each\n",
                           kNames[how], grid, threads, us, (double)bytes * (G - 1) / us * 1e-3,
                           how >= kPull ? "into" : "out of");
            }
    for (int g = 0; g < G; ++g) {
        CHECK(cudaSetDevice(g));
        device_state &d = ds[g];
        for (int s = 0; s < G; ++s) {
            CHECK(cudaStreamDestroy(d.streams[s]));
            CHECK(cudaEventDestroy(d.joins[s]));
        }
        CHECK(cudaEventDestroy(d.start));
        CHECK(cudaEventDestroy(d.stop));
        CHECK(cudaEventDestroy(d.fork));
        CHECK(cudaFree(d.buf));
    }
    return 0;
}
