/* How one mode's nonzeros are dealt to the ranks of a run over several
 * devices or processes: plain C, free of CUDA and of "one process", so the
 * same plan serves one process driving G GPUs (gpu-common) and G processes
 * (the library's dist/dist_deal.h), compiled into both.
 *
 * Shares are balanced by nonzeros, not by rows: in the mode's row-sorted
 * order, device d takes the nonzeros [begin(d), begin(d+1)) with
 * begin(d) = d * floor(nnz / G) + min(d, nnz mod G), so any two shares
 * differ by at most one nonzero whatever the skew. A row whose nonzeros
 * straddle a boundary (a hot row holding 5-15% of a skewed mode) is split:
 * each device computes a partial sum of that output row, and the partials
 * are combined afterwards (a reduce of the few split rows), in the spirit
 * of scheme 2's merged runs.
 *
 * The planning code (this, and gpu-common's memory_plan.h and
 * share_extract.h) is plain C named thp_ ("plan"); thg_ names the kernel
 * library's. */
#ifndef TH_DEVICE_SHARES_H
#define TH_DEVICE_SHARES_H

#include <stdint.h>

/* The most devices a plan deals to. */
#define THP_MAX_DEVICES 1024u

typedef struct thp_share {
    uint64_t nnz_begin, nnz_end; /* [begin, end) in the mode's row-sorted order */
    uint64_t row_begin, row_end; /* rows holding those nonzeros: [begin, end); empty when
                                    the share is */
    /* The share's first row is also the previous device's last (a split
     * row); likewise its last row and the next device. */
    uint8_t splits_first_row, splits_last_row;
} thp_share;

/* Deals the nonzeros of a mode with `rows` rows, row r holding
 * row_offsets[r + 1] - row_offsets[r] of them (row_offsets: the rows + 1
 * prefix sums, row_offsets[0] = 0, non-decreasing), to `devices` devices
 * (1 to THP_MAX_DEVICES) into shares[devices]. Returns 0, or -1 for a
 * device count out of range or offsets that are not prefix sums. */
int thp_plan_shares(const uint64_t *row_offsets, uint64_t rows, uint32_t devices,
                    thp_share *shares);

/* The rank whose share, of shares[devices] as thp_plan_shares planned
 * them, holds nonzero `position` (below the mode's nonzeros) of the
 * mode's order. */
uint32_t thp_share_holding(const thp_share *shares, uint32_t devices, uint64_t position);

/* What a rank holding only its own share knows of it: its nonzeros and
 * its rows [row_begin, row_end) (both 0 for no nonzeros). */
typedef struct thp_share_extent {
    uint64_t nnz, row_begin, row_end;
} thp_share_extent;

/* shares[devices] as thp_plan_shares planned them, rebuilt from every
 * rank's extent (extents[devices]; a run of several processes, where each
 * holds its own share as the host dealt it): the shares follow one
 * another in row order, so a share's first row is split when the share
 * before it ends in that row, and its last when the share after it starts
 * there. Returns 0, or -1 when the extents are not such a deal (a share
 * reaching past the next one's first row, rows out of order), with
 * *bad_device the rank whose share does. */
int thp_shares_from_extents(const thp_share_extent *extents, uint32_t devices,
                            thp_share *shares, uint32_t *bad_device);

/* The output rows of a mode that rank d owns, and the rows its MTTKRP
 * writes. Rank d owns [begin, end): from its share's first row (row 0 for
 * rank 0) up to the next rank's first row (the mode's end for the last
 * rank); an empty share (fewer nonzeros than devices: the last shares)
 * owns nothing, at the mode's end. A split row belongs to the later rank,
 * whose share starts in it; the earlier ranks' partial sums of it go there.
 * The MTTKRP of the share writes rows in [begin, window_end): past `end`
 * by one row when the share's last row is split with the next rank. */
typedef struct thp_owned_rows {
    uint64_t begin, end, window_end;
} thp_owned_rows;

/* For mode_shares[devices] of a mode with `rows` rows, as planned by
 * thp_plan_shares. */
thp_owned_rows thp_owned_rows_of(const thp_share *mode_shares, uint32_t devices, uint32_t d,
                                 uint64_t rows);

#endif
