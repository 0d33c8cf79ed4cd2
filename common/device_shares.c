#include "device_shares.h"

#include <string.h>

/* The row holding nonzero `position` (< row_offsets[rows]): the last r with
 * row_offsets[r] <= position, skipping empty rows. */
static uint64_t row_of(const uint64_t *row_offsets, uint64_t rows, uint64_t position)
{
    uint64_t low = 0, high = rows; /* row_offsets[low] <= position < row_offsets[high] */
    while (high - low > 1) {
        const uint64_t middle = low + (high - low) / 2;
        if (row_offsets[middle] <= position)
            low = middle;
        else
            high = middle;
    }
    return low;
}

static uint64_t share_begin(uint64_t nnz, uint32_t devices, uint32_t d)
{
    const uint64_t quota = nnz / devices, rest = nnz % devices;
    return (uint64_t)d * quota + (d < rest ? d : rest);
}

uint32_t thp_share_holding(const thp_share *shares, uint32_t devices, uint64_t position)
{
    /* The last d with nnz_begin <= position, back past any empty share
     * that starts there too. */
    uint32_t low = 0, high = devices;
    while (high - low > 1) {
        const uint32_t middle = low + (high - low) / 2;
        if (shares[middle].nnz_begin <= position)
            low = middle;
        else
            high = middle;
    }
    while (low > 0 && shares[low].nnz_begin == shares[low].nnz_end)
        --low;
    return low;
}

static uint64_t first_owned_row(const thp_share *mode_shares, uint32_t d, uint64_t rows)
{
    if (d == 0)
        return 0;
    const thp_share *s = &mode_shares[d];
    return s->nnz_begin == s->nnz_end ? rows : s->row_begin;
}

thp_owned_rows thp_owned_rows_of(const thp_share *mode_shares, uint32_t devices, uint32_t d,
                                 uint64_t rows)
{
    thp_owned_rows o;
    const thp_share *s = &mode_shares[d];
    o.begin = first_owned_row(mode_shares, d, rows);
    o.end = d + 1u < devices ? first_owned_row(mode_shares, d + 1u, rows) : rows;
    o.window_end = o.end;
    if (s->nnz_end > s->nnz_begin && s->row_end > o.window_end)
        o.window_end = s->row_end;
    return o;
}

int thp_plan_shares(const uint64_t *row_offsets, uint64_t rows, uint32_t devices,
                    thp_share *shares)
{
    if (devices < 1 || devices > THP_MAX_DEVICES || row_offsets[0] != 0)
        return -1;
    for (uint64_t r = 0; r < rows; ++r)
        if (row_offsets[r + 1] < row_offsets[r])
            return -1;
    const uint64_t nnz = row_offsets[rows];
    for (uint32_t d = 0; d < devices; ++d) {
        thp_share *s = &shares[d];
        s->nnz_begin = share_begin(nnz, devices, d);
        s->nnz_end = share_begin(nnz, devices, d + 1);
        s->splits_first_row = s->splits_last_row = 0;
        if (s->nnz_begin == s->nnz_end) {
            s->row_begin = s->row_end = 0;
            continue;
        }
        s->row_begin = row_of(row_offsets, rows, s->nnz_begin);
        s->row_end = row_of(row_offsets, rows, s->nnz_end - 1) + 1;
        /* A boundary inside a row (not at its start) splits that row. */
        s->splits_first_row = row_offsets[s->row_begin] < s->nnz_begin;
        s->splits_last_row = row_offsets[s->row_end] > s->nnz_end;
    }
    return 0;
}

int thp_shares_from_extents(const thp_share_extent *extents, uint32_t devices,
                            thp_share *shares, uint32_t *bad_device)
{
    uint64_t position = 0;
    thp_share *before = NULL; /* the latest share with nonzeros */
    for (uint32_t d = 0; d < devices; ++d) {
        const thp_share_extent *e = &extents[d];
        thp_share *s = &shares[d];
        memset(s, 0, sizeof *s);
        s->nnz_begin = position;
        s->nnz_end = position += e->nnz;
        if (e->nnz == 0)
            continue;
        s->row_begin = e->row_begin;
        s->row_end = e->row_end;
        if (e->row_end <= e->row_begin ||
            (before != NULL && before->row_end > s->row_begin + 1u)) {
            *bad_device = d;
            return -1;
        }
        if (before != NULL && before->row_end == s->row_begin + 1u) {
            before->splits_last_row = 1;
            s->splits_first_row = 1;
        }
        before = s;
    }
    return 0;
}
