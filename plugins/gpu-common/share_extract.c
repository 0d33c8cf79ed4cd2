#include "share_extract.h"

#include <stdlib.h>
#include <string.h>

int thg_count_rows(const thg_coo_view *t, uint32_t mode, uint64_t *row_offsets)
{
    if (t == NULL || row_offsets == NULL || mode >= t->nmodes)
        return -1;
    const uint64_t rows = t->dims[mode];
    const uint32_t *idx = t->indices[mode];
    memset(row_offsets, 0, sizeof *row_offsets * (rows + 1u));
    for (uint64_t i = 0; i < t->nnz; ++i) {
        if (idx[i] >= rows)
            return -1;
        ++row_offsets[idx[i] + 1u];
    }
    for (uint64_t r = 0; r < rows; ++r)
        row_offsets[r + 1u] += row_offsets[r];
    return 0;
}

int thg_extract_share(const thg_coo_view *t, uint32_t mode, const uint64_t *row_offsets,
                      const thg_share *share, uint32_t *const *out_indices,
                      double *out_values)
{
    if (t == NULL || row_offsets == NULL || share == NULL || out_values == NULL ||
        mode >= t->nmodes || share->nnz_begin > share->nnz_end ||
        share->nnz_end > row_offsets[t->dims[mode]] || row_offsets[t->dims[mode]] != t->nnz)
        return -1;
    for (uint32_t m = 0; m < t->nmodes; ++m)
        if (out_indices[m] == NULL)
            return -1;
    if (share->nnz_begin == share->nnz_end)
        return 0;
    /* Only the rows the share touches: a cursor per row, each at the row's
     * first position in the stable order. */
    const uint64_t first_row = share->row_begin, rows = share->row_end - share->row_begin;
    uint64_t *cursor = malloc(sizeof *cursor * rows);
    if (cursor == NULL)
        return -1;
    memcpy(cursor, row_offsets + first_row, sizeof *cursor * rows);
    const uint32_t *idx = t->indices[mode];
    for (uint64_t i = 0; i < t->nnz; ++i) {
        const uint64_t row = idx[i];
        if (row < first_row || row >= share->row_end)
            continue;
        const uint64_t position = cursor[row - first_row]++;
        if (position < share->nnz_begin || position >= share->nnz_end)
            continue; /* a split row's nonzero that the neighbour takes */
        const uint64_t k = position - share->nnz_begin;
        for (uint32_t m = 0; m < t->nmodes; ++m)
            out_indices[m][k] = t->indices[m][i];
        out_values[k] = t->values[i];
    }
    free(cursor);
    return 0;
}
