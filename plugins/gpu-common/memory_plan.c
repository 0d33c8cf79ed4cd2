#include "memory_plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "host_memory.h"

/* *sum += a * b; 0 when that leaves 64 bits. */
static int add_product(uint64_t *sum, uint64_t a, uint64_t b)
{
    uint64_t product;
    return !__builtin_mul_overflow(a, b, &product) && !__builtin_add_overflow(*sum, product, sum);
}

static int valid_model(const thp_memory_model *m)
{
    if (m == NULL || m->nmodes < 1 || m->rank < 1 || m->kappa < 1 || m->dims == NULL ||
        m->row_offsets == NULL)
        return 0;
    for (uint32_t k = 0; k < m->nmodes; ++k)
        if (m->dims[k] < 1 || m->row_offsets[k] == NULL ||
            m->row_offsets[k][m->dims[k]] != m->row_offsets[0][m->dims[0]])
            return 0;
    return 1;
}

/* Every mode's shares on `devices` devices: shares[k * devices + d].
 * NULL when the offsets are not prefix sums. */
static thp_share *plan_all_shares(const thp_memory_model *m, uint32_t devices)
{
    thp_share *shares = malloc(sizeof *shares * m->nmodes * devices);
    if (shares == NULL)
        return NULL;
    for (uint32_t k = 0; k < m->nmodes; ++k)
        if (thp_plan_shares(m->row_offsets[k], m->dims[k], devices, shares + (size_t)k * devices) != 0) {
            free(shares);
            return NULL;
        }
    return shares;
}

static int rank_memory(const thp_memory_model *m, uint32_t devices, uint32_t d,
                       const thp_share *shares, thp_rank_memory *out)
{
    thp_rank_memory r = {0};
    const uint64_t bytes_per_nonzero = 4u * ((uint64_t)m->nmodes + 1u);
    uint64_t largest_share = 0, longest_mode = 0;
    int ok = 1;
    for (uint32_t k = 0; k < m->nmodes && ok; ++k) {
        const thp_share *mode_shares = shares + (size_t)k * devices;
        const thp_share *s = &mode_shares[d];
        const uint64_t rows = m->dims[k];
        const uint64_t share = s->nnz_end - s->nnz_begin;
        largest_share = share > largest_share ? share : largest_share;
        longest_mode = rows > longest_mode ? rows : longest_mode;
        ok = add_product(&r.copies, share, bytes_per_nonzero) &&
             add_product(&r.copies, (uint64_t)m->kappa + 1u, 4u) &&
             add_product(&r.copies, (rows + 31u) / 32u, 4u) &&
             add_product(&r.factors, rows, 4u * (uint64_t)m->rank);
        /* The rows its MTTKRP writes: those it owns, and its share's last
         * row when that is split with the next rank. */
        const thp_owned_rows owned = thp_owned_rows_of(mode_shares, devices, d, rows);
        ok = ok && add_product(&r.results, owned.window_end - owned.begin,
                               4u * (uint64_t)m->rank);
        /* At least one row, the scale, and the span's two stamps with
         * their alignment (kernels/group.cu, ahead_bytes). */
        if (k == 0 && devices > 1)
            ok = ok &&
                 add_product(&r.run_ahead,
                             (owned.window_end > owned.begin ? owned.window_end - owned.begin
                                                             : 1u) + 1u,
                             4u * (uint64_t)m->rank) &&
                 !__builtin_add_overflow(r.run_ahead, THP_RUN_AHEAD_STAMP_BYTES, &r.run_ahead);
    }
    r.fixed = m->fixed_bytes;
    ok = ok && add_product(&r.build, largest_share, m->build_bytes_per_nonzero) &&
         add_product(&r.build, longest_mode, m->build_bytes_per_row);
    r.resident = r.copies;
    ok = ok && !__builtin_add_overflow(r.resident, r.factors, &r.resident) &&
         !__builtin_add_overflow(r.resident, r.results, &r.resident) &&
         !__builtin_add_overflow(r.resident, r.run_ahead, &r.resident) &&
         !__builtin_add_overflow(r.resident, r.fixed, &r.resident) &&
         !__builtin_add_overflow(r.resident, r.build, &r.peak);
    if (!ok)
        return -1;
    *out = r;
    return 0;
}

int thp_plan_rank_memory(const thp_memory_model *m, uint32_t devices, uint32_t d,
                         thp_rank_memory *out)
{
    if (!valid_model(m) || devices < 1 || devices > THP_MAX_DEVICES || d >= devices ||
        out == NULL)
        return -1;
    thp_share *shares = plan_all_shares(m, devices);
    if (shares == NULL)
        return -1;
    const int status = rank_memory(m, devices, d, shares, out);
    free(shares);
    return status;
}

int thp_plan_largest_rank(const thp_memory_model *m, uint32_t devices,
                          thp_rank_memory *largest)
{
    if (!valid_model(m) || devices < 1 || devices > THP_MAX_DEVICES || largest == NULL)
        return -1;
    thp_share *shares = plan_all_shares(m, devices);
    if (shares == NULL)
        return -1;
    int status = 0;
    for (uint32_t d = 0; d < devices && status == 0; ++d) {
        thp_rank_memory r;
        status = rank_memory(m, devices, d, shares, &r);
        if (status == 0 && (d == 0 || r.peak > largest->peak))
            *largest = r;
    }
    free(shares);
    return status;
}

uint32_t thp_plan_devices_needed(const thp_memory_model *m, uint64_t free_bytes,
                                 uint32_t max_devices)
{
    thp_rank_memory largest;
    return thp_plan_devices_for(m, free_bytes, UINT64_MAX, max_devices, &largest);
}

uint32_t thp_plan_devices_for(const thp_memory_model *m, uint64_t free_bytes,
                              uint64_t max_share_nnz, uint32_t max_devices,
                              thp_rank_memory *largest)
{
    if (!valid_model(m) || max_share_nnz < 1 || largest == NULL)
        return 0;
    if (max_devices > THP_MAX_DEVICES)
        max_devices = THP_MAX_DEVICES;
    const uint64_t nnz = m->row_offsets[0][m->dims[0]];
    /* Shares differ by at most one nonzero (device_shares.h). */
    const uint64_t first = (nnz + max_share_nnz - 1u) / max_share_nnz;
    for (uint64_t devices = first < 1u ? 1u : first; devices <= max_devices; ++devices) {
        if (thp_plan_largest_rank(m, (uint32_t)devices, largest) != 0)
            return 0;
        if (largest->peak <= free_bytes)
            return (uint32_t)devices;
    }
    return 0;
}

uint32_t thp_plan_advice(const thp_memory_model *m, uint64_t free_bytes, uint64_t max_share_nnz,
                         uint32_t max_devices, char *advice, size_t size)
{
    thp_rank_memory largest;
    const uint32_t needed = thp_plan_devices_for(m, free_bytes, max_share_nnz, max_devices,
                                                 &largest);
    if (needed > 0)
        snprintf(advice, size,
                 "its nonzeros shared out over %u such devices would fit (%.2f GiB on the "
                 "fullest)",
                 needed, largest.peak / 1073741824.0);
    else
        snprintf(advice, size, "no sharing of its nonzeros over up to %u such devices fits",
                 max_devices > THP_MAX_DEVICES ? THP_MAX_DEVICES : max_devices);
    return needed;
}

int thp_plan_host_refusal(uint64_t need, uint64_t available, const char *source,
                          uint32_t devices, char *message, size_t size)
{
    if (need <= available)
        return 0;
    char advice[128] = "", need_text[32], free_text[32], each_text[32];
    /* The buffers are 1/G of every mode: over G' devices, need * G / G'. */
    uint64_t scaled;
    if (available > 0 && devices > 0 && !__builtin_mul_overflow(need, devices, &scaled)) {
        const uint64_t wanted = scaled / available + (scaled % available != 0);
        if (wanted <= THP_MAX_DEVICES)
            snprintf(advice, sizeof advice, " (over %" PRIu64 " devices: %s)", wanted,
                     th_size_text(scaled / wanted, each_text, sizeof each_text));
    }
    snprintf(message, size,
             "the host cannot hold the shares while they are handed over: the largest rank's "
             "share of every mode needs %s of host memory besides the tensor, and %s is free "
             "(%s); sharing the tensor over more devices lowers the need in proportion%s, as "
             "does freeing host memory",
             th_size_text(need, need_text, sizeof need_text),
             th_size_text(available, free_text, sizeof free_text),
             source ? source : "the host's estimate", advice);
    return -1;
}
