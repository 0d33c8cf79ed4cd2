/* Device memory per communicator rank of a run on G devices, computed
 * before anything is allocated: plain C, free of CUDA and of "one
 * process", like device_shares.h, whose shares it is built on.
 *
 * Rank d of G holds, for each of the N modes, its share of the mode's copy
 * (the share's nonzeros: N indices and a value each, 4 bytes apiece; the
 * kappa + 1 partition offsets; the mode's row bitmap), every factor whole
 * (its MTTKRP gathers rows of any), the MTTKRP results of the rows it owns
 * (and, for G > 1, mode 0's once more: the sweep's first MTTKRP run ahead),
 * and the kernels' fixed workspace; while the copies are built, also the
 * build's staging for its largest share. For G = 1 these are the terms the
 * single-GPU load checks against free memory (kernels/context.cu), so a
 * plan is comparable with what one device holds today.
 *
 * Rows are owned in order: rank d owns from its share's first row up to
 * the next rank's first row (the last rank up to the mode's end, rank 0
 * from row 0), so rows without nonzeros have an owner too; a row split
 * between two ranks (device_shares.h) counts for both. */
#ifndef TH_MEMORY_PLAN_H
#define TH_MEMORY_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "device_shares.h"

typedef struct thp_memory_model {
    uint32_t nmodes; /* N >= 1 */
    uint32_t rank;   /* R >= 1 */
    uint32_t kappa;  /* partitions of each mode's copy, >= 1 */
    const uint32_t *dims; /* [N] rows of each mode, >= 1 */
    /* [N] arrays of dims[m] + 1 prefix sums: row r of mode m holds
     * row_offsets[m][r + 1] - row_offsets[m][r] nonzeros; every
     * row_offsets[m][dims[m]] is the tensor's nnz. */
    const uint64_t *const *row_offsets;
    uint64_t fixed_bytes; /* per device whatever its shares: ALS and sweep workspace, staging */
    uint64_t build_bytes_per_nonzero; /* the build's staging, per nonzero of a share */
    uint64_t build_bytes_per_row;     /* and per row of the longest mode */
} thp_memory_model;

/* The run-ahead's stamps beside its rows: two 8-byte words, aligned to 8. */
#define THP_RUN_AHEAD_STAMP_BYTES 24u

typedef struct thp_rank_memory {
    uint64_t copies;   /* its share of every mode's copy */
    uint64_t factors;  /* every factor, whole */
    uint64_t results;  /* the MTTKRP rows it owns, every mode */
    uint64_t run_ahead; /* on several devices, mode 0's rows and scale again and
                           two stamps: the sweep's MTTKRP run ahead (kernels/group.cu;
                           planned whether or not the sweep runs as graphs) */
    uint64_t fixed;    /* the model's fixed_bytes */
    uint64_t build;    /* transient, while the copies are built */
    uint64_t resident; /* copies + factors + results + run_ahead + fixed: held while
                          iterating */
    uint64_t peak;     /* resident + build: the load's high-water mark */
} thp_rank_memory;

/* Rank d's memory on `devices` devices (1 to THP_MAX_DEVICES, d < devices)
 * into *out. Returns 0, or -1 for arguments out of range, row offsets that
 * are not prefix sums or disagree on nnz, or a size past 2^64 bytes. */
int thp_plan_rank_memory(const thp_memory_model *m, uint32_t devices, uint32_t d,
                         thp_rank_memory *out);

/* The rank with the highest peak on `devices` devices into *largest;
 * 0 or -1 as thp_plan_rank_memory. */
int thp_plan_largest_rank(const thp_memory_model *m, uint32_t devices,
                          thp_rank_memory *largest);

/* The fewest devices, 1 to max_devices (at most THP_MAX_DEVICES), on which
 * every rank's peak fits in free_bytes; 0 when no such count does (or the
 * model is invalid). */
uint32_t thp_plan_devices_needed(const thp_memory_model *m, uint64_t free_bytes,
                                 uint32_t max_devices);

/* The same with each device's share of the nonzeros at most max_share_nnz
 * (the kernels' limit), the largest rank of the count found into *largest;
 * 0 when no count up to max_devices does. */
uint32_t thp_plan_devices_for(const thp_memory_model *m, uint64_t free_bytes,
                              uint64_t max_share_nnz, uint32_t max_devices,
                              thp_rank_memory *largest);

/* thp_plan_devices_for in words, for a refusal: "its nonzeros shared out
 * over N such devices would fit (X.XX GiB on the fullest)", or "no sharing
 * of its nonzeros over up to M such devices fits", into `advice` (`size`
 * bytes, NUL-terminated). Returns N, 0 for none. */
uint32_t thp_plan_advice(const thp_memory_model *m, uint64_t free_bytes, uint64_t max_share_nnz,
                         uint32_t max_devices, char *advice, size_t size);

/* Whether a multi-device load's share buffers, `need` bytes of host
 * memory (the largest rank's share of every mode), fit in the `available`
 * bytes the host has (common/host_memory.h, from `source`): 0 when they
 * do, or -1 with the refusal in words into `message` (`size` bytes): the
 * need, what is free and where that comes from, and what lowers it (the
 * buffers are 1/G of every mode of `devices`, so more devices lower them
 * in proportion: the count that would do). Sizes in GiB, or MiB below
 * one. */
int thp_plan_host_refusal(uint64_t need, uint64_t available, const char *source,
                          uint32_t devices, char *message, size_t size);

#endif
