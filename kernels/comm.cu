/* Collectives among the ranks of a multi-device run: see comm.cuh. */
#include "comm.cuh"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <new>

#ifdef THG_HAVE_NCCL
#include <nccl.h>
/* NCCL's device API (2.28 on): the direct exchange. Its structures are
 * compiled into the kernel below, so it runs only against the library
 * version whose headers the build used (setup_direct). */
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0) && __has_include(<nccl_device.h>)
#include <nccl_device.h>
#define THG_HAVE_NCCL_DEVICE 1
#endif
#endif

namespace {

enum op_kind { kNoOp, kGatherv, kReduceSum, kRegister, kDeregister };

struct rank_part {
    /* The reduce's buffer in bufs[0], or each all-gather's; the buffer to
     * register or the handle to deregister. */
    void *bufs[THG_MAX_COMM_GATHERS] = {};
    size_t bytes = 0;           /* the buffer to register's */
    void **handle = nullptr;    /* where its handle goes */
    thg_gather_rank_options options = {}; /* the all-gathers' */
    cudaStream_t stream = nullptr;
    bool given = false;
};

/* A registered buffer of a rank: its handle (an ncclWindow_t for the
 * direct exchange, else ncclCommRegister's). */
struct registration {
    void *ptr = nullptr;
    size_t bytes = 0;
    void *handle = nullptr;
};
/* Registrations a rank holds at once: a tensor's factors and the group's
 * exchange buffer, and as many again while a reload overlaps. */
constexpr uint32_t kMaxRegistrations = 2u * (THG_MAX_MODES + 1u);

#ifdef THG_HAVE_NCCL
/* The NCCL functions used, from the library dlopen found. */
struct nccl_api {
    void *lib = nullptr;
    int version = 0;
    ncclResult_t (*CommInitAll)(ncclComm_t *, int, const int *) = nullptr;
    ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
    ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                              ncclComm_t, cudaStream_t) = nullptr;
    ncclResult_t (*Send)(const void *, size_t, ncclDataType_t, int, ncclComm_t,
                         cudaStream_t) = nullptr;
    ncclResult_t (*Recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
    ncclResult_t (*GroupStart)(void) = nullptr;
    ncclResult_t (*GroupEnd)(void) = nullptr;
    const char *(*GetErrorString)(ncclResult_t) = nullptr;
    /* Zero-copy buffers (NCCL 2.19 and later; nullptr before). */
    ncclResult_t (*MemAlloc)(void **, size_t) = nullptr;
    ncclResult_t (*MemFree)(void *) = nullptr;
    ncclResult_t (*CommRegister)(ncclComm_t, void *, size_t, void **) = nullptr;
    ncclResult_t (*CommDeregister)(ncclComm_t, void *) = nullptr;
#ifdef THG_HAVE_NCCL_DEVICE
    /* The direct exchange's (NCCL 2.28 and later). */
    ncclResult_t (*CommWindowRegister)(ncclComm_t, void *, size_t, ncclWindow_t *, int) = nullptr;
    ncclResult_t (*CommWindowDeregister)(ncclComm_t, ncclWindow_t) = nullptr;
    ncclResult_t (*DevCommCreate)(ncclComm_t, const ncclDevCommRequirements *,
                                  ncclDevComm *) = nullptr;
    ncclResult_t (*DevCommDestroy)(ncclComm_t, const ncclDevComm *) = nullptr;
#endif
};
#endif

constexpr uint32_t kSumThreads = 256;

__global__ void add_kernel(double *dst, const double *src, size_t n)
{
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x)
        dst[k] += src[k];
}

} // namespace

struct thg_comm {
    thg_comm_kind kind = THG_COMM_SINGLE;
    uint32_t G = 0;
    /* The ranks this process drives: [local_begin, local_end), all G but
     * in a communicator across processes (one). Only theirs are known:
     * devices, comms, parts, registrations. */
    uint32_t local_begin = 0, local_end = 0;
    int devices[THG_MAX_COMM_RANKS] = {};
    char description[160] = {};
    /* The group being given. */
    bool in_group = false;
    op_kind op = kNoOp;
    const uint64_t *offsets[THG_MAX_COMM_GATHERS] = {}; /* each all-gather's blocks */
    uint32_t gathers = 0;                                /* all-gathers in the group */
    size_t count = 0;
    rank_part parts[THG_MAX_COMM_RANKS];
    /* Device copies: the ranks' streams meet on `leader`. */
    cudaStream_t leader = nullptr;
    cudaEvent_t ready[THG_MAX_COMM_RANKS] = {};
    cudaEvent_t done = nullptr;
    registration registered[THG_MAX_COMM_RANKS][kMaxRegistrations] = {};
#ifdef THG_HAVE_NCCL
    nccl_api nccl;
    const char *nccl_origin = ""; /* "bundled", "the host's" or "TH_NCCL_LIBRARY" */
    ncclComm_t comms[THG_MAX_COMM_RANKS] = {};
    bool borrowed = false; /* the comm is the caller's (across processes) */
#endif
    /* The direct exchange: every rank's device communicator, as NCCL made
     * it (for its destruction) and a copy on its device (for the kernel). */
    bool direct = false;
#ifdef THG_HAVE_NCCL_DEVICE
    ncclDevComm dev_comms[THG_MAX_COMM_RANKS] = {};
    ncclDevComm *dev_comms_on_device[THG_MAX_COMM_RANKS] = {};
#endif
};

namespace {

/* Whether buffers come from NCCL's allocator and are registered. */
bool zero_copy(const thg_comm *c)
{
#ifdef THG_HAVE_NCCL
    return c->kind == THG_COMM_NCCL && c->nccl.MemAlloc != nullptr;
#else
    (void)c;
    return false;
#endif
}

#ifdef THG_HAVE_NCCL
#define THG_NCCL(comm, call)                                                               \
    do {                                                                                   \
        const ncclResult_t thg_r_ = (comm)->nccl.call;                                     \
        if (thg_r_ != ncclSuccess)                                                         \
            return thg_fail(err, errlen, THG_ERR_DEVICE, "NCCL error in %s: %s", #call,     \
                            (comm)->nccl.GetErrorString(thg_r_));                          \
    } while (0)

} // namespace

/* comm.cuh */

void thg_nccl_to_load(char *path, size_t pathlen, const char **origin)
{
    const char *env = getenv("TH_NCCL_LIBRARY");
    if (env && *env) {
        snprintf(path, pathlen, "%s", env);
        *origin = "TH_NCCL_LIBRARY";
        return;
    }
    Dl_info where;
    if (dladdr((const void *)&thg_nccl_to_load, &where) && where.dli_fname) {
        const char *slash = strrchr(where.dli_fname, '/');
        const int dir = slash ? (int)(slash - where.dli_fname) : 1;
        snprintf(path, pathlen, "%.*s/tensorhost/nccl/libnccl.so.2", dir,
                 slash ? where.dli_fname : ".");
        if (access(path, F_OK) == 0) {
            *origin = "bundled";
            return;
        }
    }
    snprintf(path, pathlen, "libnccl.so.2");
    *origin = "the host's";
}

thg_status thg_nccl_open(const char *user, const char *hint, const thg_nccl_symbol *wanted,
                         size_t count, void **lib, int *version, const char **origin, char *err,
                         size_t errlen)
{
    char name[4096];
    thg_nccl_to_load(name, sizeof name, origin);
    *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!*lib)
        return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                        "%s NCCL, loaded at run time from %s, which did not load (%s)%s", user,
                        name, dlerror(), hint);
    for (size_t k = 0; k < count; k++) {
        *wanted[k].slot = dlsym(*lib, wanted[k].name);
        if (!*wanted[k].slot)
            return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                            "%s lacks %s: not the NCCL 2 library this build expects", name,
                            wanted[k].name);
    }
    ncclResult_t (*get_version)(int *) = (ncclResult_t(*)(int *))dlsym(*lib, "ncclGetVersion");
    if (!get_version || get_version(version) != ncclSuccess || *version / 10000 != NCCL_MAJOR)
        return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                        "%s is NCCL version code %d; this build expects NCCL %d.x", name,
                        get_version ? *version : 0, NCCL_MAJOR);
    return THG_OK;
}

namespace {

thg_status load_nccl(thg_comm *c, char *err, size_t errlen)
{
    nccl_api &n = c->nccl;
    const thg_nccl_symbol wanted[] = {
        {"ncclCommInitAll", (void **)&n.CommInitAll},
        {"ncclCommDestroy", (void **)&n.CommDestroy},
        {"ncclAllReduce", (void **)&n.AllReduce},
        {"ncclSend", (void **)&n.Send},
        {"ncclRecv", (void **)&n.Recv},
        {"ncclGroupStart", (void **)&n.GroupStart},
        {"ncclGroupEnd", (void **)&n.GroupEnd},
        {"ncclGetErrorString", (void **)&n.GetErrorString},
    };
    char user[64];
    snprintf(user, sizeof user, "%u devices need", c->G);
    const thg_status st =
        thg_nccl_open(user, ": install NCCL 2 or run on one device", wanted,
                      sizeof wanted / sizeof wanted[0], &n.lib, &n.version, &c->nccl_origin, err,
                      errlen);
    if (st != THG_OK)
        return st;
    /* Optional: without all four, buffers are plain device memory. */
    n.MemAlloc = (ncclResult_t(*)(void **, size_t))dlsym(n.lib, "ncclMemAlloc");
    n.MemFree = (ncclResult_t(*)(void *))dlsym(n.lib, "ncclMemFree");
    n.CommRegister =
        (ncclResult_t(*)(ncclComm_t, void *, size_t, void **))dlsym(n.lib, "ncclCommRegister");
    n.CommDeregister = (ncclResult_t(*)(ncclComm_t, void *))dlsym(n.lib, "ncclCommDeregister");
    if (!n.MemAlloc || !n.MemFree || !n.CommRegister || !n.CommDeregister)
        n.MemAlloc = nullptr;
#ifdef THG_HAVE_NCCL_DEVICE
    n.CommWindowRegister = (decltype(n.CommWindowRegister))dlsym(n.lib, "ncclCommWindowRegister");
    n.CommWindowDeregister =
        (decltype(n.CommWindowDeregister))dlsym(n.lib, "ncclCommWindowDeregister");
    n.DevCommCreate = (decltype(n.DevCommCreate))dlsym(n.lib, "ncclDevCommCreate");
    n.DevCommDestroy = (decltype(n.DevCommDestroy))dlsym(n.lib, "ncclDevCommDestroy");
#endif
    return THG_OK;
}
#endif

#ifdef THG_HAVE_NCCL_DEVICE
/* The direct exchange's kernel: the same number of blocks on every rank,
 * block b meeting block b of every other rank at barrier b. Few blocks
 * for small blocks of data, whose exchange is the barriers' latency; one
 * per SM for large ones (a factor's rows), bound by the links. (On four
 * H200s 8, 16 or 32 blocks and 132 or 264 changed nothing beyond the
 * runs' spread.) */
constexpr uint32_t kDirectBlocksSmall = 32;
constexpr uint32_t kDirectBlocksLarge = 132;
constexpr uint64_t kDirectLargeBytes = 1u << 20; /* a rank's block from here on */
constexpr uint32_t kDirectThreads = 512;

/* This rank's block of one all-gather: bytes [offset, offset + bytes) of
 * its window, to the same place in every other rank's. */
struct direct_block {
    ncclWindow_t window;
    const char *local;
    uint64_t offset, bytes;
};
struct direct_gather {
    direct_block blocks[THG_MAX_COMM_GATHERS];
    uint32_t n;
    /* Whether the ranks meet before the stores (thg_gather_rank_options). */
    uint32_t entry_barrier;
    unsigned long long *span; /* nullptr, or the span's two stamps */
};

/* This block's share of one block, in units of T (which divide its offset
 * and size), to its peer: the grid's blocks are dealt to the other ranks
 * in turn, an equal number each (the launch takes a multiple of G - 1),
 * so that every link carries a stream of its own from the start (on four
 * H200s, 7.8 MB to each of three peers: 76.5 us against 89.6 for every
 * block storing to one peer after another, bench/nvlink_push_bench.cu). */
template <typename T>
__device__ void push_units(const direct_block &b, const ncclDevComm &comm)
{
    const uint32_t lanes = (uint32_t)comm.lsaSize - 1u;
    const uint32_t lane = blockIdx.x % lanes, mine = blockIdx.x / lanes;
    const uint32_t blocks_per_lane = gridDim.x / lanes;
    const int peer = (comm.lsaRank + 1 + (int)lane) % comm.lsaSize;
    const uint64_t units = b.bytes / sizeof(T);
    const T *src = reinterpret_cast<const T *>(b.local + b.offset);
    T *dst = reinterpret_cast<T *>(ncclGetLsaPointer(b.window, b.offset, peer));
    for (uint64_t u = (uint64_t)mine * blockDim.x + threadIdx.x; u < units;
         u += (uint64_t)blocks_per_lane * blockDim.x)
        dst[u] = src[u];
}

/* The all-gather as stores: every rank at the entry barrier (each has
 * finished reading what the stores overwrite: its earlier kernels are
 * done; left out where the caller knows it), the stores into the other
 * ranks' windows over NVLink, then the exit barrier (each rank's stores
 * released, every other rank's acquired). Block b meets block b of every
 * rank; the next kernel on the stream runs after all of this rank's
 * blocks, so it sees every store. The span: thg_stamp_start/end, as the
 * MTTKRPs stamp theirs. */
__global__ void __launch_bounds__(kDirectThreads)
    direct_gather_kernel(const ncclDevComm *comm, direct_gather g)
{
    thg_stamp_start(g.span);
    ncclLsaBarrierSession<ncclCoopCta> barrier(ncclCoopCta(), *comm, ncclTeamTagLsa(),
                                               blockIdx.x);
    if (g.entry_barrier)
        barrier.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    for (uint32_t k = 0; k < g.n; ++k) {
        const direct_block &b = g.blocks[k];
        if ((b.offset | b.bytes) % sizeof(uint4) == 0)
            push_units<uint4>(b, *comm);
        else if ((b.offset | b.bytes) % sizeof(uint32_t) == 0)
            push_units<uint32_t>(b, *comm);
        else
            push_units<unsigned char>(b, *comm);
    }
    barrier.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    thg_stamp_end(g.span);
}
#endif

/* Which exchange the device list (1 to THG_MAX_COMM_RANKS devices) calls
 * for. */
thg_status choose_kind(const int *devices, uint32_t G, int force_nccl, thg_comm_kind *kind,
                       char *err, size_t errlen)
{
    uint32_t distinct = 0;
    for (uint32_t r = 0; r < G; ++r) {
        if (devices[r] < 0)
            return thg_fail(err, errlen, THG_ERR_INVALID, "device %d: devices count from 0",
                            devices[r]);
        bool seen = false;
        for (uint32_t q = 0; q < r && !seen; ++q)
            seen = devices[q] == devices[r];
        distinct += seen ? 0 : 1;
    }
    if (force_nccl || (G > 1 && distinct == G)) {
        if (distinct != G)
            return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                            "NCCL takes one rank per device; the list repeats a device");
        *kind = THG_COMM_NCCL;
        return THG_OK;
    }
    if (G == 1) {
        *kind = THG_COMM_SINGLE;
        return THG_OK;
    }
    if (distinct == 1) {
        *kind = THG_COMM_DEVICE_COPIES;
        return THG_OK;
    }
    return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                    "%u ranks on %u devices: give each rank a device of its own, or every "
                    "rank the same device (shards on one GPU, for testing); not a mix",
                    G, distinct);
}

thg_status setup_device_copies(thg_comm *c, char *err, size_t errlen)
{
    THG_CUDA(cudaSetDevice(c->devices[0]));
    THG_CUDA(cudaStreamCreateWithFlags(&c->leader, cudaStreamNonBlocking));
    THG_CUDA(cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
    for (uint32_t r = 0; r < c->G; ++r)
        THG_CUDA(cudaEventCreateWithFlags(&c->ready[r], cudaEventDisableTiming));
    return THG_OK;
}

thg_status check_devices(const thg_comm *c, char *err, size_t errlen)
{
    int count = 0;
    THG_CUDA(cudaGetDeviceCount(&count));
    for (uint32_t r = c->local_begin; r < c->local_end; ++r)
        if (c->devices[r] >= count)
            return thg_fail(err, errlen, THG_ERR_INVALID,
                            "device %d does not exist: this host has %d (0 to %d)",
                            c->devices[r], count, count - 1);
    return THG_OK;
}

#ifdef THG_HAVE_NCCL_DEVICE
void destroy_direct(thg_comm *c)
{
    if (!c->direct)
        return;
    c->nccl.GroupStart();
    for (uint32_t r = c->local_begin; r < c->local_end; ++r)
        c->nccl.DevCommDestroy(c->comms[r], &c->dev_comms[r]);
    c->nccl.GroupEnd();
    for (uint32_t r = c->local_begin; r < c->local_end; ++r)
        if (c->dev_comms_on_device[r] && cudaSetDevice(c->devices[r]) == cudaSuccess)
            cudaFree(c->dev_comms_on_device[r]);
    c->direct = false;
}

/* Every rank's device communicator, in one NCCL group; NCCL's failure is
 * the reason the direct exchange is off, not an error. */
bool create_dev_comms(thg_comm *c, char *why, size_t whylen)
{
    nccl_api &n = c->nccl;
    ncclDevCommRequirements reqs;
    memset(&reqs, 0, sizeof reqs);
    reqs.lsaBarrierCount = (int)kDirectBlocksLarge;
    ncclResult_t res = n.GroupStart();
    for (uint32_t r = c->local_begin; r < c->local_end && res == ncclSuccess; ++r)
        res = n.DevCommCreate(c->comms[r], &reqs, &c->dev_comms[r]);
    const ncclResult_t ended = n.GroupEnd(); /* closes the group whatever happened */
    if (res == ncclSuccess)
        res = ended;
    if (res != ncclSuccess) {
        snprintf(why, whylen, "direct exchange off: ncclDevCommCreate: %s",
                 n.GetErrorString(res));
        return false;
    }
    return true;
}

/* The direct exchange, where the library and the devices allow it; else
 * why not, in `why` (empty when it is on), and the point-to-point path. */
thg_status setup_direct(thg_comm *c, char *why, size_t whylen, char *err, size_t errlen)
{
    nccl_api &n = c->nccl;
    const char *env = getenv("TH_NCCL_DIRECT");
    if (env && strcmp(env, "0") == 0) {
        snprintf(why, whylen, "direct exchange off (TH_NCCL_DIRECT=0)");
        return THG_OK;
    }
    if (!n.MemAlloc || !n.CommWindowRegister || !n.CommWindowDeregister || !n.DevCommCreate ||
        !n.DevCommDestroy) {
        snprintf(why, whylen, "direct exchange off: no device API in the library");
        return THG_OK;
    }
    if (n.version != NCCL_VERSION_CODE) {
        snprintf(why, whylen, "direct exchange off: built against NCCL %d.%d.%d", NCCL_MAJOR,
                 NCCL_MINOR, NCCL_PATCH);
        return THG_OK;
    }
    if (!create_dev_comms(c, why, whylen))
        return THG_OK;
    c->direct = true; /* from here destroy_direct destroys the device communicators */
    /* Across processes every process asks alike (its peers' reach is
     * its own: one NVLink domain or not). */
    bool all_reach = true;
    for (uint32_t r = c->local_begin; r < c->local_end; ++r)
        all_reach = all_reach && c->dev_comms[r].lsaSize == (int)c->G;
    if (!all_reach) {
        destroy_direct(c);
        snprintf(why, whylen, "direct exchange off: not every device reaches every other");
        return THG_OK;
    }
    for (uint32_t r = c->local_begin; r < c->local_end; ++r) {
        THG_CUDA(cudaSetDevice(c->devices[r]));
        THG_CUDA(cudaMalloc(&c->dev_comms_on_device[r], sizeof(ncclDevComm)));
        THG_CUDA(cudaMemcpy(c->dev_comms_on_device[r], &c->dev_comms[r], sizeof(ncclDevComm),
                            cudaMemcpyHostToDevice));
    }
    why[0] = '\0';
    return THG_OK;
}
#endif

#ifdef THG_HAVE_NCCL
/* An NCCL communicator's last step, alike on one process and across
 * processes: the direct exchange where the device API allows it, and the
 * description that names the NCCL, the ranks (`who`) and the exchange. */
thg_status setup_exchange(thg_comm *c, const char *who, char *err, size_t errlen)
{
    char why[96] = "";
#ifdef THG_HAVE_NCCL_DEVICE
    const thg_status st = setup_direct(c, why, sizeof why, err, errlen);
    if (st != THG_OK)
        return st;
#else
    (void)err, (void)errlen;
#endif
    snprintf(c->description, sizeof c->description, "NCCL %d.%d.%d (%s), %s, %s%s%s",
             c->nccl.version / 10000, c->nccl.version / 100 % 100, c->nccl.version % 100,
             c->nccl_origin, who,
             c->direct          ? "direct exchange (device API)"
             : c->nccl.MemAlloc ? "buffers registered (zero-copy)"
                                : "staged transfers",
             why[0] ? "; " : "", why);
    return THG_OK;
}
#endif

thg_status create(thg_comm *c, int force_nccl, char *err, size_t errlen)
{
    thg_status st = choose_kind(c->devices, c->G, force_nccl, &c->kind, err, errlen);
    if (st != THG_OK)
        return st;
    if (c->kind == THG_COMM_NCCL) {
#ifdef THG_HAVE_NCCL
        st = load_nccl(c, err, errlen);
#else
        return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                        "%u devices need NCCL, and this build has no NCCL support (nccl.h was "
                        "not found when it was built)",
                        c->G);
#endif
    }
    if (st == THG_OK)
        st = check_devices(c, err, errlen);
    if (st != THG_OK)
        return st;
    switch (c->kind) {
    case THG_COMM_SINGLE:
        snprintf(c->description, sizeof c->description, "one rank");
        return THG_OK;
    case THG_COMM_DEVICE_COPIES:
        snprintf(c->description, sizeof c->description, "%u ranks on device %d (device copies)",
                 c->G, c->devices[0]);
        return setup_device_copies(c, err, errlen);
    case THG_COMM_NCCL:
#ifdef THG_HAVE_NCCL
    {
        THG_NCCL(c, CommInitAll(c->comms, (int)c->G, c->devices));
        char who[48];
        snprintf(who, sizeof who, "%u device%s", c->G, c->G == 1 ? "" : "s");
        return setup_exchange(c, who, err, errlen);
    }
#endif
        return THG_OK;
    }
    return THG_OK;
}

thg_status check_rank(const thg_comm *c, uint32_t rank, char *err, size_t errlen)
{
    if (rank >= c->G)
        return thg_fail(err, errlen, THG_ERR_INVALID, "rank %u of a communicator of %u", rank,
                        c->G);
    if (rank < c->local_begin || rank >= c->local_end)
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "rank %u is another process's (this one drives rank %u)", rank,
                        c->local_begin);
    return THG_OK;
}

/* The common checks of a rank's part; records it. */
thg_status give_part(thg_comm *c, uint32_t rank, op_kind op, void *buf, cudaStream_t stream,
                     char *err, size_t errlen)
{
    if (!c->in_group)
        return thg_fail(err, errlen, THG_ERR_STATE, "a collective's part outside a group");
    const thg_status st = check_rank(c, rank, err, errlen);
    if (st != THG_OK)
        return st;
    if (c->op != kNoOp && c->op != op)
        return thg_fail(err, errlen, THG_ERR_STATE, "two collectives in one group");
    if (c->parts[rank].given)
        return thg_fail(err, errlen, THG_ERR_STATE, "rank %u's part given twice", rank);
    c->op = op;
    c->parts[rank] = rank_part{};
    c->parts[rank].bufs[0] = buf;
    c->parts[rank].stream = stream;
    c->parts[rank].given = true;
    return THG_OK;
}

/* Device copies: every rank's stream reaches this point, then the leader
 * exchanges, then every rank's stream waits for it. */
thg_status end_device_copies(thg_comm *c, char *err, size_t errlen)
{
    THG_CUDA(cudaSetDevice(c->devices[0]));
    for (uint32_t r = 0; r < c->G; ++r) {
        THG_CUDA(cudaEventRecord(c->ready[r], c->parts[r].stream));
        THG_CUDA(cudaStreamWaitEvent(c->leader, c->ready[r], 0));
    }
    if (c->op == kGatherv) {
        for (uint32_t k = 0; k < c->gathers; ++k)
            for (uint32_t q = 0; q < c->G; ++q) {
                const uint64_t begin = c->offsets[k][q], bytes = c->offsets[k][q + 1] - begin;
                for (uint32_t r = 0; r < c->G && bytes > 0; ++r)
                    if (r != q)
                        THG_CUDA(cudaMemcpyAsync((char *)c->parts[r].bufs[k] + begin,
                                                 (const char *)c->parts[q].bufs[k] + begin,
                                                 bytes, cudaMemcpyDeviceToDevice, c->leader));
            }
    } else if (c->count > 0) {
        double *sum = (double *)c->parts[0].bufs[0];
        const size_t blocks = (c->count + kSumThreads - 1) / kSumThreads;
        for (uint32_t r = 1; r < c->G; ++r) { /* in rank order: the same sum every time */
            add_kernel<<<(unsigned)(blocks < 4096 ? blocks : 4096), kSumThreads, 0, c->leader>>>(
                sum, (const double *)c->parts[r].bufs[0], c->count);
            THG_LAUNCHED();
        }
        for (uint32_t r = 1; r < c->G; ++r)
            THG_CUDA(cudaMemcpyAsync(c->parts[r].bufs[0], sum, sizeof(double) * c->count,
                                     cudaMemcpyDeviceToDevice, c->leader));
    }
    THG_CUDA(cudaEventRecord(c->done, c->leader));
    for (uint32_t r = 0; r < c->G; ++r)
        THG_CUDA(cudaStreamWaitEvent(c->parts[r].stream, c->done, 0));
    return THG_OK;
}

#ifdef THG_HAVE_NCCL
/* Every rank's part, in one NCCL group (one thread drives every rank).
 * An all-gather of blocks is point-to-point: each rank sends its block to
 * every other rank and receives theirs, all in the group's one launch.
 * Within a node every pair of GPUs has a direct link (NVLink), so each
 * block crosses one link, where a ring all-gather or broadcast passes it
 * through G - 1 ranks one after another (BENCHMARKS.md, "What the scaling
 * rests on", has the measurement); and the blocks may differ in size (a
 * rank's owned rows), which ncclAllGather does not allow. */
thg_status issue_nccl(thg_comm *c, char *err, size_t errlen)
{
    for (uint32_t rank = c->local_begin; rank < c->local_end; ++rank) {
        const rank_part &p = c->parts[rank];
        if (c->op == kReduceSum) {
            THG_NCCL(c, AllReduce(p.bufs[0], p.bufs[0], c->count, ncclFloat64, ncclSum,
                                  c->comms[rank], p.stream));
            continue;
        }
        for (uint32_t k = 0; k < c->gathers; ++k) {
            const uint64_t *offsets = c->offsets[k];
            char *buf = (char *)p.bufs[k];
            const size_t mine = offsets[rank + 1] - offsets[rank];
            for (uint32_t q = 0; q < c->G; ++q) {
                if (q == rank)
                    continue;
                const size_t theirs = offsets[q + 1] - offsets[q];
                if (mine > 0)
                    THG_NCCL(c, Send(buf + offsets[rank], mine, ncclUint8, (int)q,
                                     c->comms[rank], p.stream));
                if (theirs > 0)
                    THG_NCCL(c, Recv(buf + offsets[q], theirs, ncclUint8, (int)q,
                                     c->comms[rank], p.stream));
            }
        }
    }
    return THG_OK;
}
#endif

thg_status end_nccl(thg_comm *c, char *err, size_t errlen)
{
#ifdef THG_HAVE_NCCL
    THG_NCCL(c, GroupStart());
    const thg_status st = issue_nccl(c, err, errlen);
    const ncclResult_t r = c->nccl.GroupEnd(); /* closes the group whatever happened */
    if (st != THG_OK)
        return st;
    if (r != ncclSuccess)
        return thg_fail(err, errlen, THG_ERR_DEVICE, "NCCL error in GroupEnd: %s",
                        c->nccl.GetErrorString(r));
    return THG_OK;
#else
    return thg_fail(err, errlen, THG_ERR_UNSUPPORTED, "built without NCCL");
#endif
}

#ifdef THG_HAVE_NCCL
/* Rank r's first unused registration slot, or nullptr. */
registration *free_registration_slot(thg_comm *c, uint32_t r)
{
    for (registration &reg : c->registered[r])
        if (!reg.handle)
            return &reg;
    return nullptr;
}

/* Rank r's part of the group's registration (`add`) or deregistration:
 * a window for the direct exchange, else a local registration. Returns
 * NCCL's result and the call's name; *handle, a registration's. */
ncclResult_t register_rank(thg_comm *c, uint32_t r, bool add, void **handle, const char **call)
{
    nccl_api &n = c->nccl;
    const rank_part &p = c->parts[r];
    *handle = nullptr;
#ifdef THG_HAVE_NCCL_DEVICE
    if (c->direct) {
        *call = add ? "ncclCommWindowRegister" : "ncclCommWindowDeregister";
        if (add)
            return n.CommWindowRegister(c->comms[r], p.bufs[0], p.bytes, (ncclWindow_t *)handle,
                                        NCCL_WIN_COLL_SYMMETRIC);
        return p.bufs[0] ? n.CommWindowDeregister(c->comms[r], (ncclWindow_t)p.bufs[0])
                         : ncclSuccess;
    }
#endif
    *call = add ? "ncclCommRegister" : "ncclCommDeregister";
    if (add)
        return n.CommRegister(c->comms[r], p.bufs[0], p.bytes, handle);
    return p.bufs[0] ? n.CommDeregister(c->comms[r], p.bufs[0]) : ncclSuccess;
}
#endif

/* The group's registrations (or deregistrations), one a rank: windows,
 * collectively in one NCCL group, for the direct exchange; local
 * registrations otherwise; nothing for the kinds without NCCL. */
thg_status end_registration(thg_comm *c, char *err, size_t errlen)
{
    const bool add = c->op == kRegister;
    if (!zero_copy(c))
        return THG_OK; /* the handles stay NULL */
#ifdef THG_HAVE_NCCL
    nccl_api &n = c->nccl;
    for (uint32_t r = c->local_begin; r < c->local_end && add; ++r)
        if (!free_registration_slot(c, r))
            return thg_fail(err, errlen, THG_ERR_STATE,
                            "rank %u holds %u registrations already", r, kMaxRegistrations);
    /* Windows are collective: every rank's in one group. */
    if (c->direct)
        THG_NCCL(c, GroupStart());
    void *handles[THG_MAX_COMM_RANKS] = {};
    thg_status st = THG_OK;
    for (uint32_t r = c->local_begin; r < c->local_end && st == THG_OK; ++r) {
        const char *call = "";
        const ncclResult_t res = register_rank(c, r, add, &handles[r], &call);
        if (res != ncclSuccess)
            st = thg_fail(err, errlen, THG_ERR_DEVICE, "NCCL error in %s: %s", call,
                          n.GetErrorString(res));
    }
    if (c->direct) {
        const ncclResult_t res = n.GroupEnd();
        if (st == THG_OK && res != ncclSuccess)
            st = thg_fail(err, errlen, THG_ERR_DEVICE, "NCCL error in GroupEnd (%s): %s",
                          add ? "window registration" : "window deregistration",
                          n.GetErrorString(res));
    }
    /* The book follows what NCCL did, also after a failure (the caller
     * deregisters what was registered). */
    for (uint32_t r = c->local_begin; r < c->local_end; ++r) {
        const rank_part &p = c->parts[r];
        if (add && handles[r]) {
            *free_registration_slot(c, r) = {p.bufs[0], p.bytes, handles[r]};
            *p.handle = handles[r];
        } else if (!add && p.bufs[0]) {
            for (registration &reg : c->registered[r])
                if (reg.handle == p.bufs[0])
                    reg = registration{};
        }
    }
    return st;
#else
    (void)add;
    (void)err;
    (void)errlen;
    return THG_OK;
#endif
}

#ifdef THG_HAVE_NCCL_DEVICE
/* Rank r's registration whose buffer is ptr, or nullptr. */
registration *find_registration(thg_comm *c, uint32_t r, const void *ptr)
{
    for (registration &reg : c->registered[r])
        if (reg.handle && reg.ptr == ptr)
            return &reg;
    return nullptr;
}

/* The all-gathers of the group as the direct exchange, when every rank's
 * every buffer is a window of that rank: one kernel a rank. *ran false:
 * not all are, nothing launched (the point-to-point path then). */
thg_status try_direct_gather(thg_comm *c, bool *ran, char *err, size_t errlen)
{
    *ran = false;
    if (!c->direct || c->op != kGatherv || c->G < 2)
        return THG_OK;
    direct_gather args[THG_MAX_COMM_RANKS] = {};
    for (uint32_t r = c->local_begin; r < c->local_end; ++r) {
        const rank_part &p = c->parts[r];
        direct_gather &g = args[r];
        g.n = c->gathers;
        g.entry_barrier = p.options.peers_done_reading ? 0u : 1u;
        g.span = p.options.span;
        for (uint32_t k = 0; k < c->gathers; ++k) {
            const registration *reg = find_registration(c, r, p.bufs[k]);
            if (!reg)
                return THG_OK;
            g.blocks[k].window = (ncclWindow_t)reg->handle;
            g.blocks[k].local = (const char *)p.bufs[k];
            g.blocks[k].offset = c->offsets[k][r];
            g.blocks[k].bytes = c->offsets[k][r + 1] - c->offsets[k][r];
        }
    }
    /* Every rank takes the same count: from the offsets, which every rank
     * shares; a multiple of the G - 1 peers (push_units). */
    uint64_t largest = 0;
    for (uint32_t q = 0; q < c->G; ++q) {
        uint64_t bytes = 0;
        for (uint32_t k = 0; k < c->gathers; ++k)
            bytes += c->offsets[k][q + 1] - c->offsets[k][q];
        largest = bytes > largest ? bytes : largest;
    }
    const uint32_t lanes = c->G - 1;
    const uint32_t wanted = largest >= kDirectLargeBytes ? kDirectBlocksLarge : kDirectBlocksSmall;
    const uint32_t blocks = wanted / lanes > 0 ? wanted / lanes * lanes : lanes;
    *ran = true;
    for (uint32_t r = c->local_begin; r < c->local_end; ++r) {
        THG_CUDA(cudaSetDevice(c->devices[r]));
        direct_gather_kernel<<<blocks, kDirectThreads, 0, c->parts[r].stream>>>(
            c->dev_comms_on_device[r], args[r]);
        THG_LAUNCHED();
    }
    return THG_OK;
}
#endif

void end_group(thg_comm *c)
{
    c->in_group = false;
    c->op = kNoOp;
    for (uint32_t k = 0; k < THG_MAX_COMM_GATHERS; ++k)
        c->offsets[k] = nullptr;
    c->gathers = 0;
    c->count = 0;
    for (uint32_t r = 0; r < c->G; ++r)
        c->parts[r] = rank_part{};
}

} // namespace

thg_status thg_comm_create(const int *devices, uint32_t G, int force_nccl, thg_comm **out,
                           char *err, size_t errlen)
{
    *out = nullptr;
    if (devices == nullptr || G == 0 || G > THG_MAX_COMM_RANKS)
        return thg_fail(err, errlen, THG_ERR_INVALID, "%u ranks: 1 to %u can share a run", G,
                        THG_MAX_COMM_RANKS);
    thg_comm *c = new (std::nothrow) thg_comm;
    if (c == nullptr)
        return thg_fail(err, errlen, THG_ERR_OUT_OF_MEMORY, "out of host memory");
    c->G = G;
    c->local_end = G;
    memcpy(c->devices, devices, sizeof(int) * G);
    const thg_status st = create(c, force_nccl, err, errlen);
    if (st != THG_OK) {
        thg_comm_destroy(c);
        return st;
    }
    *out = c;
    return THG_OK;
}

thg_status thg_comm_create_across(int device, uint32_t rank, uint32_t G, void *nccl_comm,
                                  thg_comm **out, char *err, size_t errlen)
{
    *out = nullptr;
#ifndef THG_HAVE_NCCL
    (void)device, (void)rank, (void)G, (void)nccl_comm;
    return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                    "processes' devices need NCCL, and this build has no NCCL support");
#else
    if (G < 2 || G > THG_MAX_COMM_RANKS || rank >= G || nccl_comm == nullptr)
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "rank %u of %u processes: 2 to %u processes can share a run", rank, G,
                        THG_MAX_COMM_RANKS);
    thg_comm *c = new (std::nothrow) thg_comm;
    if (c == nullptr)
        return thg_fail(err, errlen, THG_ERR_OUT_OF_MEMORY, "out of host memory");
    c->kind = THG_COMM_NCCL;
    c->G = G;
    c->local_begin = rank;
    c->local_end = rank + 1;
    for (uint32_t r = 0; r < G; ++r)
        c->devices[r] = -1; /* another process's */
    c->devices[rank] = device;
    c->comms[rank] = (ncclComm_t)nccl_comm;
    c->borrowed = true;
    thg_status st = load_nccl(c, err, errlen);
    if (st == THG_OK)
        st = check_devices(c, err, errlen);
    if (st == THG_OK) {
        char who[48];
        snprintf(who, sizeof who, "rank %u of %u processes", rank, G);
        st = setup_exchange(c, who, err, errlen);
    }
    if (st != THG_OK) {
        thg_comm_destroy(c);
        return st;
    }
    *out = c;
    return THG_OK;
#endif
}

void thg_comm_destroy(thg_comm *c)
{
    if (!c)
        return;
#ifdef THG_HAVE_NCCL
#ifdef THG_HAVE_NCCL_DEVICE
    destroy_direct(c);
#endif
    for (uint32_t r = c->local_begin; r < c->local_end && !c->borrowed; ++r)
        if (c->comms[r])
            c->nccl.CommDestroy(c->comms[r]);
    if (c->nccl.lib)
        dlclose(c->nccl.lib);
#endif
    if (c->leader) {
        cudaSetDevice(c->devices[0]);
        cudaStreamDestroy(c->leader);
    }
    if (c->done)
        cudaEventDestroy(c->done);
    for (uint32_t r = 0; r < c->G; ++r)
        if (c->ready[r])
            cudaEventDestroy(c->ready[r]);
    delete c;
}

thg_comm_kind thg_comm_get_kind(const thg_comm *c)
{
    return c->kind;
}

const char *thg_comm_describe(const thg_comm *c)
{
    return c->description;
}

thg_status thg_comm_alloc(thg_comm *c, uint32_t rank, size_t bytes, void **ptr, char *err,
                          size_t errlen)
{
    *ptr = nullptr;
    const thg_status st = check_rank(c, rank, err, errlen);
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaSetDevice(c->devices[rank]));
#ifdef THG_HAVE_NCCL
    if (zero_copy(c)) {
        THG_NCCL(c, MemAlloc(ptr, bytes));
        return THG_OK;
    }
#endif
    THG_CUDA(cudaMalloc(ptr, bytes));
    return THG_OK;
}

void thg_comm_free(thg_comm *c, uint32_t rank, void *ptr)
{
    if (!ptr || rank < c->local_begin || rank >= c->local_end || cudaSetDevice(c->devices[rank]) != cudaSuccess)
        return;
#ifdef THG_HAVE_NCCL
    if (zero_copy(c)) {
        c->nccl.MemFree(ptr);
        return;
    }
#endif
    cudaFree(ptr);
}

thg_status thg_comm_register(thg_comm *c, uint32_t rank, void *ptr, size_t bytes, void **handle,
                             char *err, size_t errlen)
{
    thg_status st = give_part(c, rank, kRegister, ptr, nullptr, err, errlen);
    if (st != THG_OK)
        return st;
    *handle = nullptr;
    c->parts[rank].bytes = bytes;
    c->parts[rank].handle = handle;
    return THG_OK;
}

thg_status thg_comm_deregister(thg_comm *c, uint32_t rank, void *handle, char *err,
                               size_t errlen)
{
    return give_part(c, rank, kDeregister, handle, nullptr, err, errlen);
}

int thg_comm_is_direct(const thg_comm *c) { return c->direct ? 1 : 0; }

thg_status thg_comm_begin(thg_comm *c, char *err, size_t errlen)
{
    if (c->in_group)
        return thg_fail(err, errlen, THG_ERR_STATE, "a group begun inside a group");
    c->in_group = true;
    return THG_OK;
}

thg_status thg_comm_all_gatherv(thg_comm *c, uint32_t rank, void *buf, const uint64_t *offsets,
                                cudaStream_t stream, char *err, size_t errlen)
{
    const thg_gather gather = {buf, offsets};
    return thg_comm_all_gatherv_many(c, rank, &gather, 1, nullptr, stream, err, errlen);
}

thg_status thg_comm_all_gatherv_many(thg_comm *c, uint32_t rank, const thg_gather *gathers,
                                     uint32_t n, const thg_gather_rank_options *options,
                                     cudaStream_t stream, char *err, size_t errlen)
{
    if (n < 1 || n > THG_MAX_COMM_GATHERS)
        return thg_fail(err, errlen, THG_ERR_INVALID, "%u all-gathers in one group: 1 to %u", n,
                        THG_MAX_COMM_GATHERS);
    if (c->gathers != 0 && c->gathers != n)
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "rank %u gives %u all-gathers, another rank %u", rank, n, c->gathers);
    for (uint32_t k = 0; k < n; ++k)
        for (uint32_t q = 0; q < c->G; ++q)
            if (gathers[k].offsets[q + 1] < gathers[k].offsets[q])
                return thg_fail(err, errlen, THG_ERR_INVALID,
                                "all-gather offsets decrease at rank %u", q);
    thg_status st = give_part(c, rank, kGatherv, gathers[0].buf, stream, err, errlen);
    if (st != THG_OK)
        return st;
    for (uint32_t k = 0; k < n; ++k) {
        c->parts[rank].bufs[k] = gathers[k].buf;
        c->offsets[k] = gathers[k].offsets; /* the same on every rank */
    }
    if (options)
        c->parts[rank].options = *options;
    c->gathers = n;
    return THG_OK;
}

thg_status thg_comm_all_reduce_sum(thg_comm *c, uint32_t rank, double *buf, size_t count,
                                   cudaStream_t stream, char *err, size_t errlen)
{
    thg_status st = give_part(c, rank, kReduceSum, buf, stream, err, errlen);
    if (st != THG_OK)
        return st;
    if (c->count != 0 && c->count != count)
        return thg_fail(err, errlen, THG_ERR_INVALID, "all-reduce of %zu doubles on rank %u, "
                        "%zu on another", count, rank, c->count);
    c->count = count;
    return THG_OK;
}

thg_status thg_comm_end(thg_comm *c, char *err, size_t errlen)
{
    if (!c->in_group)
        return thg_fail(err, errlen, THG_ERR_STATE, "a group ended that was not begun");
    uint32_t given = 0;
    for (uint32_t r = 0; r < c->G; ++r)
        given += c->parts[r].given ? 1 : 0;
    const uint32_t local = c->local_end - c->local_begin;
    thg_status st = THG_OK;
    if (c->op != kNoOp && given != local)
        st = thg_fail(err, errlen, THG_ERR_STATE, "a group ended with %u of %u ranks' parts",
                      given, local);
    else if (c->op == kRegister || c->op == kDeregister)
        st = end_registration(c, err, errlen);
    else if (c->op != kNoOp && c->kind == THG_COMM_DEVICE_COPIES)
        st = end_device_copies(c, err, errlen);
    else if (c->op != kNoOp && c->kind == THG_COMM_NCCL) {
        bool ran = false;
#ifdef THG_HAVE_NCCL_DEVICE
        st = try_direct_gather(c, &ran, err, errlen);
#endif
        if (st == THG_OK && !ran)
            st = end_nccl(c, err, errlen);
    }
    end_group(c);
    return st;
}
