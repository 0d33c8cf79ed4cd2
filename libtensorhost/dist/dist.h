/* One run as several processes (mpirun, mpiexec, srun): MPI, loaded at run
 * time, for the few collectives a distributed run needs. The library links
 * no MPI: when the launcher's environment announces several processes,
 * th_dist_start loads the shim for the launching implementation
 * (mpi_shim.h) from <libdir>/tensorhost/mpi and starts MPI; otherwise the
 * run is one process and every function here takes NULL for it (a sum is
 * then the values themselves, the rank 0, the size 1).
 *
 * Every collective must be called by every process, in the same order; a
 * process that fails between two of them says so at the next agreement
 * (th_dist_agree) or ends the job (th_dist_abort). A th_dist belongs to the
 * thread that started it. */
#ifndef TH_DIST_H
#define TH_DIST_H

#include <glib.h>
#include <stdint.h>

#define TH_DIST_ERROR (th_dist_error_quark())
GQuark th_dist_error_quark(void);

typedef enum {
    /* Launched as several processes, and no shim could be loaded or its
     * MPI does not see the launch (another implementation's launcher). */
    TH_DIST_ERROR_LOAD,
    TH_DIST_ERROR_MPI, /* an MPI call failed: its message */
    /* The launcher gave the processes no means to start MPI (srun without
     * a process-management interface): every process fails alike. */
    TH_DIST_ERROR_LAUNCH,
    /* Another process failed; it reports why (th_dist_agree). */
    TH_DIST_ERROR_ELSEWHERE,
} th_dist_error;

typedef struct th_dist th_dist;

/* The number of processes the environment announces (Open MPI's
 * OMPI_COMM_WORLD_SIZE, MPICH's PMI_SIZE, Slurm's SLURM_STEP_NUM_TASKS),
 * and *launcher its name; 1 (and "none") when it announces none or
 * TENSORHOST_MPI is "off". */
uint32_t th_dist_announced_processes(const char **launcher);

/* This process's rank as the launcher's environment gives it (Open MPI's
 * OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, Slurm's SLURM_PROCID), before
 * or without MPI: 0 when it gives none. For saying once what stops every
 * process before MPI starts. */
uint32_t th_dist_announced_rank(void);

/* MPI started for a launch of several processes; NULL without an error for
 * one process. TENSORHOST_MPI picks the shim: "openmpi", "mpich" or a
 * shim's path; by default the launcher's implementation, then the other.
 * NULL with TH_DIST_ERROR_LOAD or _MPI when several processes were
 * announced and MPI cannot start; with TH_DIST_ERROR_LAUNCH, before any MPI
 * call, for srun's tasks given no process-management interface. Processes
 * that share a host share its cores (th_dist_threads) and its GPUs
 * (th_dist_gpus). */
th_dist *th_dist_start(GError **error);
/* MPI_Finalize, after every process's last collective; NULL is fine. */
void th_dist_finish(th_dist *dist);
/* The process's started th_dist (th_dist_start to th_dist_finish), for
 * what serves the run as a whole (the plugins' host services); NULL in a
 * run of one process. */
th_dist *th_dist_current(void);

uint32_t th_dist_rank(const th_dist *dist);
uint32_t th_dist_size(const th_dist *dist);
/* Whether every process runs on this process's host (MPI's shared-memory
 * split), as every process finds alike; TRUE for NULL. FALSE where MPI
 * could not say. */
gboolean th_dist_one_host(const th_dist *dist);
/* The OpenMP threads each process took as its share of its host's cores
 * (th_dist_start: the cores it may run on over the processes on its host,
 * unless OMP_NUM_THREADS is set); 0 when it left OpenMP's default. */
uint32_t th_dist_threads(const th_dist *dist);
/* The GPUs this process was given as its share of its host's
 * (CUDA_VISIBLE_DEVICES, set by th_dist_start unless it was set already,
 * on a host whose driver lists GPUs and runs several of the processes):
 * "" when it set none. */
const char *th_dist_gpus(const th_dist *dist);
/* The MPI library's version line and this process's host name; "" for NULL. */
const char *th_dist_library(const th_dist *dist);
const char *th_dist_host(const th_dist *dist);

/* In place over every process: the element-wise sum or maximum. */
gboolean th_dist_sum(th_dist *dist, double *values, uint64_t n, GError **error);
gboolean th_dist_max(th_dist *dist, double *values, uint64_t n, GError **error);
gboolean th_dist_sum_u64(th_dist *dist, uint64_t *values, uint64_t n, GError **error);
gboolean th_dist_max_u64(th_dist *dist, uint64_t *values, uint64_t n, GError **error);
gboolean th_dist_or_u64(th_dist *dist, uint64_t *values, uint64_t n, GError **error);
/* `bytes` from rank 0's `data` into every process's. */
gboolean th_dist_broadcast(th_dist *dist, void *data, uint64_t bytes, GError **error);
/* `bytes` from every process into rank 0's `received` (size x bytes, in
 * rank order; ignored elsewhere). */
gboolean th_dist_gather(th_dist *dist, const void *sent, uint64_t bytes, void *received,
                        GError **error);

/* In place: each process's values become the element-wise sums over the
 * processes of lower rank (zeros on rank 0, and with `dist` NULL). */
gboolean th_dist_exscan_sum_u64(th_dist *dist, uint64_t *values, uint64_t n, GError **error);
/* Every process sends send_bytes[p] bytes of `sent` (the blocks for p = 0,
 * 1, ... one after another) to process p, and gets what each sent it:
 * *received (g_malloc'd, the caller's; blocks in rank order, NULL when
 * empty) and recv_bytes[p] (caller's array of size entries), whatever
 * the sizes. The blocks are records of `unit` bytes (every size a
 * multiple of it, the same on every process): one MPI call of them while
 * a process's records fit MPI's int counts, else rounds of at most 1 GiB
 * a process through packed buffers (TH_DIST_TEST_EXCHANGE_PIECE=N forces
 * rounds of N bytes a pair, for tests). With `dist` NULL the one block is
 * copied. */
gboolean th_dist_exchange(th_dist *dist, const void *sent, const uint64_t *send_bytes,
                          uint32_t unit, void **received, uint64_t *recv_bytes, GError **error);

/* Every process's `count` doubles of `sent` into every process's
 * `received`, block p (counts[p] doubles, every process's count, known to
 * all) after blocks 0 .. p - 1; `sent` NULL: in place, each process's
 * block already where it goes in `received`. The counts' sum at most
 * INT_MAX (MPI's int counts; TH_DIST_ERROR_MPI past that). With `dist`
 * NULL the one block is copied. */
gboolean th_dist_allgather(th_dist *dist, const double *sent, uint64_t count, double *received,
                           const uint64_t *counts, GError **error);

/* Called by every process, with *error set where it failed: TRUE when none
 * failed; else FALSE everywhere, the lowest failing process keeping its
 * error and every other one's *error replaced by TH_DIST_ERROR_ELSEWHERE
 * (naming that process), so that the job reports one error, once. With
 * NULL: whether *error is unset. */
gboolean th_dist_agree(th_dist *dist, GError **error);

/* Ends every process of the job with `status` (MPI_Abort), for a failure
 * between two agreements; the caller has said why. */
G_NORETURN void th_dist_abort(th_dist *dist, int status);

/* The time this process spent in collectives, and how many it made and
 * the bytes they carried from it (the report's communication). */
typedef struct th_dist_traffic {
    double seconds;
    uint64_t calls;
    uint64_t bytes;
} th_dist_traffic;
th_dist_traffic th_dist_traffic_so_far(const th_dist *dist);

#endif
