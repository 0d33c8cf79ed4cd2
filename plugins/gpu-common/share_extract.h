/* What the host hands each communicator rank of a multi-device run: the
 * nonzeros of its share of one mode (device_shares.h), as their own COO
 * arrays in the mode's row order. Plain C with 64-bit counts, free of CUDA
 * and of "one process" (a process per GPU gets its shares from the host's
 * deal instead, libtensorhost/dist/dist_deal.h, on the same plan).
 *
 * The mode's row order is the stable one: by row, and within a row in the
 * tensor's own order, so the shares of one mode are the consecutive pieces
 * of one ordering and a split row's nonzeros go to the two ranks in that
 * order. A share of one mode is read from the tensor on its own (one pass,
 * or two on threads), so a rank's copy of a mode exists on the host only
 * while it is handed over. */
#ifndef TH_SHARE_EXTRACT_H
#define TH_SHARE_EXTRACT_H

#include <stdint.h>

#include "device_shares.h"

/* A COO tensor as the host holds it (the plugin ABI's th_coo_tensor). */
typedef struct thp_coo_view {
    uint32_t nmodes;
    uint64_t nnz;
    const uint32_t *dims;              /* [nmodes] */
    const uint32_t *const *indices;    /* [nmodes] arrays of [nnz] */
    const double *values;              /* [nnz] */
} thp_coo_view;

/* Row r of `mode` holds row_offsets[r + 1] - row_offsets[r] nonzeros: the
 * dims[mode] + 1 prefix sums, computed into `row_offsets`. Returns 0, or
 * -1 for a mode out of range or an index not below its mode's size. */
int thp_count_rows(const thp_coo_view *t, uint32_t mode, uint64_t *row_offsets);

/* The nonzeros of `share` (a share of `mode` planned from these row
 * offsets) in the mode's stable row order: out_indices[m][k] and
 * out_values[k] for k < share->nnz_end - share->nnz_begin, each array
 * that long. Returns 0, or -1 for arguments that do not fit together. */
int thp_extract_share(const thp_coo_view *t, uint32_t mode, const uint64_t *row_offsets,
                      const thp_share *share, uint32_t *const *out_indices,
                      double *out_values);

/* Each reads the whole tensor, so a rank's shares of N modes, or every
 * mode's row counts, take N passes at least: these run them on up to
 * `threads` host threads at once (fewer threads when one cannot be
 * started). */

/* thp_count_rows of every mode m into row_offsets[m]; 0, or -1 when any
 * mode's is. With more threads than modes, each mode's pass is cut into
 * chunks of the nonzeros, threads / nmodes of them (at most 64, fewer
 * where 8 bytes a row and chunk would pass 512 MiB), each counting into
 * counters of its own that are added up after. */
int thp_count_rows_all(const thp_coo_view *t, uint64_t *const *row_offsets, uint32_t threads);

/* One thp_extract_share call's arguments. */
typedef struct thp_share_job {
    uint32_t mode;
    const uint64_t *row_offsets;
    const thp_share *share;
    uint32_t *const *out_indices;
    double *out_values;
} thp_share_job;

/* Every job's thp_extract_share, the same arrays; 0, or -1 when any job's
 * is or host memory is short. Every job at once, each over threads / njobs
 * threads (at least one), in two stages rather than one pass: the share's
 * rows grouped into blocks of consecutive rows, about 4096 of them
 * balanced by nonzeros, each chunk of the tensor's nonzeros (a chunk a
 * thread) counts its nonzeros per block and then writes them to their
 * block's part of the arrays; then each block is put in row order on its
 * own. A pass writing straight to each row's place scatters its writes over
 * every row of the share (millions, on the large modes); these write to a
 * few thousand places at a time, and the second stage within one block.
 * Besides the arrays it needs a few cursors a block and chunk and, a
 * thread, a buffer of one block's nonzeros. */
int thp_extract_shares(const thp_coo_view *t, const thp_share_job *jobs, uint32_t njobs,
                       uint32_t threads);

#endif
