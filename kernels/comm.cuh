/* Collectives among the ranks of a run over several devices, written per
 * communicator rank (plugins/README.md, "Several GPUs"); kernels/group.cu
 * is their user.
 *
 * A communicator has G ranks, rank r on devices[r]. Each collective is one
 * group: thg_comm_begin, then every rank's part (one process driving all G
 * devices calls the part of every rank; a process of a communicator
 * across processes, its own rank's part only), then thg_comm_end, which enqueues the collective
 * on every rank's stream: it is complete for a rank once that stream
 * reaches it.
 *
 * How the ranks exchange data depends on their devices:
 *   - one rank: nothing to exchange;
 *   - G ranks on one device ("virtual shards", devices = "0,0,0,0"): device
 *     copies and a summing kernel, since NCCL refuses two ranks on one GPU
 *     (the distribution is tested this way before several GPUs are lent);
 *   - G distinct devices: NCCL, loaded with dlopen at run time
 *     (TH_NCCL_LIBRARY; else the copy bundled with the install, of the
 *     build's headers' version; else the host's "libnccl.so.2"), so that the plugins build
 *     and run where it is absent and only a multi-device request needs it;
 *     all-gathers among registered buffers take the direct exchange (its
 *     device API, a kernel of ours) where it can, point-to-point sends and
 *     receives otherwise (thg_comm_register).
 * Several ranks on some of several devices (devices = "0,0,1,1") are
 * refused.
 *
 * A communicator across processes (thg_comm_create_across) is NCCL's,
 * each process driving its one rank.
 *
 * Not thread-safe: one thread drives a communicator. */
#ifndef THG_COMM_CUH
#define THG_COMM_CUH

#include "thg_internal.cuh"

enum thg_comm_kind {
    THG_COMM_SINGLE,       /* one rank */
    THG_COMM_DEVICE_COPIES, /* every rank on the same device */
    THG_COMM_NCCL,         /* every rank on a device of its own */
};

struct thg_comm;

/* G ranks (1 to THG_MAX_COMM_RANKS) on devices[0..G). force_nccl: NCCL even
 * for one rank (tests of the library's binding on one GPU). Errors:
 * THG_ERR_INVALID for a bad list, THG_ERR_UNSUPPORTED for mixed devices or
 * a missing NCCL (the message names the library and dlopen's reason),
 * THG_ERR_DEVICE for a CUDA or NCCL failure. */
thg_status thg_comm_create(const int *devices, uint32_t G, int force_nccl, thg_comm **out,
                           char *err, size_t errlen);
/* A communicator across processes: G ranks (2 to THG_MAX_COMM_RANKS), a
 * process each, of which this process drives `rank` alone, on `device`,
 * over `nccl_comm` (an ncclComm_t of G ranks, this process's rank `rank`:
 * borrowed, the caller's to destroy after this communicator). Collective:
 * every process makes its own at once. A rank's part is given only by
 * its process; the buffers, registrations and groups are as above, each
 * process giving its rank's. */
thg_status thg_comm_create_across(int device, uint32_t rank, uint32_t G, void *nccl_comm,
                                  thg_comm **out, char *err, size_t errlen);
/* Accepts NULL. */
void thg_comm_destroy(thg_comm *comm);
thg_comm_kind thg_comm_get_kind(const thg_comm *comm);
/* "one rank", "4 ranks on device 0 (device copies)", "NCCL 2.28.3, 4
 * devices, direct exchange (device API)". */
const char *thg_comm_describe(const thg_comm *comm);

/* The most ranks a communicator takes. */
#define THG_MAX_COMM_RANKS 64u

thg_status thg_comm_begin(thg_comm *comm, char *err, size_t errlen);
/* Rank `rank`'s part of an all-gather of variable-sized blocks, in place:
 * rank q holds bytes [offsets[q], offsets[q + 1]) of `buf` (a device
 * buffer of offsets[G] bytes on its device, rounded up to a multiple of
 * 16: NCCL's point-to-point kernels read whole words past an unaligned
 * end) and, after the group, every rank holds every block. offsets (G + 1
 * entries, non-decreasing, the same on every rank) must live until
 * thg_comm_end. */
thg_status thg_comm_all_gatherv(thg_comm *comm, uint32_t rank, void *buf,
                                const uint64_t *offsets, cudaStream_t stream, char *err,
                                size_t errlen);
/* The same for several all-gathers in one group (one NCCL launch where
 * there would be one each): gathers[k] names the k-th buffer and its
 * offsets; every rank gives the same count, in the same order. */
#define THG_MAX_COMM_GATHERS 4u
struct thg_gather {
    void *buf;
    const uint64_t *offsets;
};
/* What the direct exchange (thg_comm_is_direct) takes of a rank's part;
 * the other paths ignore it. */
struct thg_gather_rank_options {
    /* Since any rank last read what the all-gathers overwrite in another
     * rank's buffers, every rank has completed a collective of this
     * communicator (all ranks give the same): the stores start without
     * the entry barrier. */
    int peers_done_reading;
    /* nullptr, or two unsigned long long on the rank's device, zeroed
     * before: the collective's span on the GPU's global timer (ns), kept
     * by atomicMax as [~start, end], so that several collectives widen
     * one span. */
    unsigned long long *span;
};
/* options: nullptr for none. */
thg_status thg_comm_all_gatherv_many(thg_comm *comm, uint32_t rank, const thg_gather *gathers,
                                     uint32_t n, const thg_gather_rank_options *options,
                                     cudaStream_t stream, char *err, size_t errlen);
/* Rank `rank`'s part of an in-place sum of `count` doubles over the ranks. */
thg_status thg_comm_all_reduce_sum(thg_comm *comm, uint32_t rank, double *buf, size_t count,
                                   cudaStream_t stream, char *err, size_t errlen);
/* Ends the group: the collective is enqueued on every rank's stream. Every
 * rank's part must have been given, all of one collective. */
thg_status thg_comm_end(thg_comm *comm, char *err, size_t errlen);

/* Buffers that the collectives move in bulk (the factors, the exchange
 * blocks). Between NCCL's devices they come from NCCL's allocator
 * (ncclMemAlloc: memory its peers can map); otherwise plain device memory.
 * thg_comm_alloc makes rank's device current; thg_comm_free accepts NULL;
 * a registered buffer is deregistered before it is freed. */
thg_status thg_comm_alloc(thg_comm *comm, uint32_t rank, size_t bytes, void **ptr, char *err,
                          size_t errlen);
void thg_comm_free(thg_comm *comm, uint32_t rank, void *ptr);

/* Registering a buffer of thg_comm_alloc with the communicator, so that
 * all-gathers in it move without NCCL's staging. Collective, as a group:
 * thg_comm_begin, every rank's buffer (the same size on every rank, the
 * ranks' groups in the same order), thg_comm_end, which registers them and
 * sets each *handle (it must live until then; NULL where nothing was
 * registered). What registering gives depends on the communicator
 * (thg_comm_describe says which):
 *   - the direct exchange: NCCL's device API, when the library found at
 *     run time is the version whose headers the build used, and every rank
 *     reaches every other by loads and stores (NVLink): the buffers become
 *     symmetric windows (ncclCommWindowRegister), and an all-gather whose
 *     buffers are all windows is one kernel a rank that stores its block
 *     into every other rank's window and meets them at a barrier
 *     (ncclLsaBarrierSession), with no NCCL launch;
 *   - otherwise, local registration (ncclCommRegister): NCCL's
 *     point-to-point transfers read and write the buffers directly (the
 *     collective of enron's 244K-row factor between two H200s: 86 -> 70
 *     us, BENCHMARKS.md "Several GPUs");
 *   - for the other kinds, nothing.
 * TH_NCCL_DIRECT=0 turns the direct exchange off (A/B comparisons). */
thg_status thg_comm_register(thg_comm *comm, uint32_t rank, void *ptr, size_t bytes,
                             void **handle, char *err, size_t errlen);
/* The same, collective, as a group: every rank's handle of one
 * registration (NULL accepted: nothing to do for that rank). */
thg_status thg_comm_deregister(thg_comm *comm, uint32_t rank, void *handle, char *err,
                               size_t errlen);
/* Whether all-gathers among registered buffers take the direct exchange. */
int thg_comm_is_direct(const thg_comm *comm);

/* The NCCL library to dlopen, and in *origin how it was chosen: the
 * TH_NCCL_LIBRARY variable when set; else the copy installed beside this
 * library (<libdir>/tensorhost/nccl/libnccl.so.2, the version of the
 * build's headers, kernels/CMakeLists.txt), so that the direct exchange runs
 * whatever NCCL the host has; else the host's libnccl.so.2. For every user
 * of NCCL here (this file's communicators and processes.cu's). */
void thg_nccl_to_load(char *path, size_t pathlen, const char **origin);

/* A function NCCL must have: its name and where its address goes. */
struct thg_nccl_symbol {
    const char *name;
    void **slot;
};
/* NCCL opened with dlopen (thg_nccl_to_load's choice, *origin saying how)
 * into *lib, each of the `count` functions of `wanted` resolved, and its
 * version code in *version, checked against the build's major version.
 * A failure's message begins with `user` ("2 devices need", ...) and ends
 * with `hint`; *lib is then left for the caller to dlclose (NULL when the
 * library did not open). */
thg_status thg_nccl_open(const char *user, const char *hint, const thg_nccl_symbol *wanted,
                         size_t count, void **lib, int *version, const char **origin, char *err,
                         size_t errlen);

#endif
