/* The nonzeros of one mode dealt to the processes of a distributed run by
 * the plan the devices of one process use (common/device_shares.h): in the
 * mode's row-sorted order, process p takes the nonzeros [begin(p),
 * begin(p + 1)), nnz / P each (the first nnz mod P one more), so a hot
 * row straddling a boundary is split between processes, and each owns the
 * output rows from its share's first row to the next one's. The order
 * within a row is the file's: a row's nonzeros on lower ranks' shares come
 * first.
 *
 * The rows are counted across the processes (each counts its share's; an
 * all-reduce, and an exclusive prefix sum over the ranks for where each
 * process's nonzeros of a row fall), then every nonzero goes to the
 * process whose share holds its position: one all-to-all of nnz / P
 * records of 4N + 8 bytes (none for mode 1, the file's order, whose
 * shares are the plan's: each process keeps a copy of its own). A deal
 * holds the share, the records sent and received and the dealt tensor:
 * four times a share's bytes at most. */
#ifndef TH_DIST_DEAL_H
#define TH_DIST_DEAL_H

#include <glib.h>

#include "device_shares.h"
#include "dist/dist.h"
#include "tensor/sptensor.h"

/* What this process was dealt of one mode. */
typedef struct th_dist_dealt {
    thp_share share;      /* its nonzeros' range in the mode's order, and their rows */
    thp_owned_rows owned; /* the output rows it owns (device_shares.h) */
    uint64_t nnz_total;   /* the tensor's nonzeros, over every process */
} th_dist_dealt;

/* Called by every process with its share of the tensor (every share with
 * the same nmodes and dims): the nonzeros this process is dealt of `mode`,
 * a new tensor of the share's dims, in the file's order (rank by rank, each
 * share's order within), and *dealt. With `dist` NULL: a copy of `share`,
 * the whole of it. NULL where a collective failed (TH_DIST_ERROR_MPI), or
 * on every process when one was dealt other than its planned count
 * (th_dist_agree). */
th_sptensor *th_dist_deal_mode(th_dist *dist, const th_sptensor *share, uint32_t mode,
                               th_dist_dealt *dealt, GError **error);

#endif
