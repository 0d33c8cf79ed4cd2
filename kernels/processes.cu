/* The devices' exchange across a run's processes: see th_gpu.h
 * ("A run of several processes"). One NCCL communicator of one rank a
 * process, made from rank 0's unique id, and the in-place sum of a
 * context's MTTKRP results over it (thg_processes_sum). */
#include "thg_internal.cuh"

#include "comm.cuh"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <new>

#ifdef THG_HAVE_NCCL
#include <nccl.h>
static_assert(sizeof(ncclUniqueId) == THG_PROCESSES_ID_BYTES, "NCCL's unique id");
#endif

struct thg_processes {
    int device = 0;
    uint32_t rank = 0, count = 0;
    char description[160] = {};
#ifdef THG_HAVE_NCCL
    void *lib = nullptr;
    int version = 0;
    const char *origin = "";
    ncclComm_t comm = nullptr;
    ncclResult_t (*GetUniqueId)(ncclUniqueId *) = nullptr;
    ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int) = nullptr;
    ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
    ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                              ncclComm_t, cudaStream_t) = nullptr;
    ncclResult_t (*Broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                              cudaStream_t) = nullptr;
    const char *(*GetErrorString)(ncclResult_t) = nullptr;
#endif
};

#ifdef THG_HAVE_NCCL
#define THG_PROCESSES_NCCL(p, call)                                                        \
    do {                                                                                   \
        const ncclResult_t thg_r_ = (p)->call;                                             \
        if (thg_r_ != ncclSuccess)                                                         \
            return thg_fail(err, errlen, THG_ERR_DEVICE, "NCCL error in %s: %s", #call,     \
                            (p)->GetErrorString(thg_r_));                                  \
    } while (0)

static thg_status load(thg_processes *p, char *err, size_t errlen)
{
    const thg_nccl_symbol wanted[] = {
        {"ncclGetUniqueId", (void **)&p->GetUniqueId},
        {"ncclCommInitRank", (void **)&p->CommInitRank},
        {"ncclCommDestroy", (void **)&p->CommDestroy},
        {"ncclAllReduce", (void **)&p->AllReduce},
        {"ncclBroadcast", (void **)&p->Broadcast},
        {"ncclGetErrorString", (void **)&p->GetErrorString},
    };
    return thg_nccl_open("the GPUs' exchange across processes needs", "", wanted,
                         sizeof wanted / sizeof wanted[0], &p->lib, &p->version, &p->origin, err,
                         errlen);
}
#endif

extern "C" thg_status thg_processes_open(int device, thg_processes **out, char *err,
                                         size_t errlen)
{
    *out = nullptr;
#ifndef THG_HAVE_NCCL
    (void)device;
    return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                    "the GPUs' exchange across processes needs NCCL, and this build has no "
                    "NCCL support (nccl.h was not found when it was built)");
#else
    thg_processes *p = new (std::nothrow) thg_processes;
    if (p == nullptr)
        return thg_fail(err, errlen, THG_ERR_OUT_OF_MEMORY, "out of host memory");
    p->device = device;
    const thg_status st = load(p, err, errlen);
    if (st != THG_OK) {
        thg_processes_destroy(p);
        return st;
    }
    *out = p;
    return THG_OK;
#endif
}

extern "C" thg_status thg_processes_unique_id(thg_processes *p, void *id, char *err,
                                              size_t errlen)
{
#ifdef THG_HAVE_NCCL
    ncclUniqueId unique;
    THG_PROCESSES_NCCL(p, GetUniqueId(&unique));
    memcpy(id, &unique, sizeof unique);
    return THG_OK;
#else
    (void)p, (void)id;
    return thg_fail(err, errlen, THG_ERR_UNSUPPORTED, "no NCCL in this build");
#endif
}

extern "C" thg_status thg_processes_join(thg_processes *p, uint32_t rank, uint32_t count,
                                         const void *id, char *err, size_t errlen)
{
#ifdef THG_HAVE_NCCL
    if (rank >= count)
        return thg_fail(err, errlen, THG_ERR_INVALID, "rank %u of %u processes", rank, count);
    ncclUniqueId unique;
    memcpy(&unique, id, sizeof unique);
    THG_CUDA(cudaSetDevice(p->device));
    /* Connections made at the join, not lazily at the first sum: that one
     * may run inside a CUDA graph's capture (the sweep's), where NCCL's
     * proxy setting them up cannot. The user's choice stands. */
    setenv("NCCL_RUNTIME_CONNECT", "0", 0);
    /* The threads NCCL starts here (its proxy's, its bootstrap's) inherit
     * this mask: a stop's SIGINT or SIGTERM then reaches the caller's
     * thread, whose handler asks for the stop, and never interrupts one of
     * NCCL's calls in its threads, which the run's next sum would wait on
     * forever. */
    sigset_t stops, before;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stops, &before);
    const ncclResult_t made = p->CommInitRank(&p->comm, (int)count, unique, (int)rank);
    /* One sum outside any capture, so that the first inside finds every
     * resource made. */
    float *probe = nullptr;
    ncclResult_t summed = ncclSuccess;
    cudaError_t synced = cudaSuccess;
    if (made == ncclSuccess) {
        synced = cudaMalloc(&probe, sizeof(float));
        if (synced == cudaSuccess)
            synced = cudaMemset(probe, 0, sizeof(float));
        if (synced == cudaSuccess)
            summed = p->AllReduce(probe, probe, 1, ncclFloat32, ncclSum, p->comm, nullptr);
        if (synced == cudaSuccess && summed == ncclSuccess)
            synced = cudaDeviceSynchronize();
        cudaFree(probe);
    }
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    if (made != ncclSuccess || summed != ncclSuccess)
        return thg_fail(err, errlen, THG_ERR_DEVICE, "NCCL error in %s: %s",
                        made != ncclSuccess ? "ncclCommInitRank" : "the first sum",
                        p->GetErrorString(made != ncclSuccess ? made : summed));
    THG_CUDA(synced);
    p->rank = rank;
    p->count = count;
    snprintf(p->description, sizeof p->description,
             "NCCL %d.%d.%d (%s) across %u processes, one GPU each", p->version / 10000,
             p->version / 100 % 100, p->version % 100, p->origin, count);
    return THG_OK;
#else
    (void)p, (void)rank, (void)count, (void)id;
    return thg_fail(err, errlen, THG_ERR_UNSUPPORTED, "no NCCL in this build");
#endif
}

extern "C" void thg_processes_destroy(thg_processes *p)
{
    if (!p)
        return;
#ifdef THG_HAVE_NCCL
    if (p->comm) {
        cudaSetDevice(p->device);
        p->CommDestroy(p->comm);
    }
    if (p->lib)
        dlclose(p->lib);
#endif
    delete p;
}

extern "C" const char *thg_processes_describe(const thg_processes *p)
{
    return p ? p->description : "";
}

extern "C" thg_status thg_attach_processes(thg_context *ctx, thg_processes *p, char *err,
                                           size_t errlen)
{
    if (ctx->nmodes != 0)
        return thg_fail(err, errlen, THG_ERR_STATE,
                        "the processes' exchange is attached before a tensor is loaded");
    if (p != nullptr && p->count == 0)
        return thg_fail(err, errlen, THG_ERR_STATE, "the processes have not joined");
    if (p != nullptr && p->device != ctx->device)
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "the processes' communicator is on device %d, the context on %d",
                        p->device, ctx->device);
    ctx->processes = p;
    return THG_OK;
}

thg_status thg_processes_sum(const thg_processes *p, float *buf, size_t count,
                             cudaStream_t stream, char *err, size_t errlen)
{
#ifdef THG_HAVE_NCCL
    THG_PROCESSES_NCCL(p, AllReduce(buf, buf, count, ncclFloat32, ncclSum, p->comm, stream));
    return THG_OK;
#else
    (void)p, (void)buf, (void)count, (void)stream;
    return thg_fail(err, errlen, THG_ERR_UNSUPPORTED, "no NCCL in this build");
#endif
}

thg_status thg_processes_share(const thg_processes *p, void *buf, size_t bytes,
                               cudaStream_t stream, char *err, size_t errlen)
{
#ifdef THG_HAVE_NCCL
    THG_PROCESSES_NCCL(p, Broadcast(buf, buf, bytes, ncclUint8, 0, p->comm, stream));
    return THG_OK;
#else
    (void)p, (void)buf, (void)bytes, (void)stream;
    return thg_fail(err, errlen, THG_ERR_UNSUPPORTED, "no NCCL in this build");
#endif
}

void *thg_processes_nccl_comm(const thg_processes *p)
{
#ifdef THG_HAVE_NCCL
    return (void *)p->comm;
#else
    (void)p;
    return nullptr;
#endif
}

uint32_t thg_processes_rank(const thg_processes *p) { return p->rank; }
uint32_t thg_processes_count(const thg_processes *p) { return p->count; }
int thg_processes_device(const thg_processes *p) { return p->device; }
