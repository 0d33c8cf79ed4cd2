#include "cpd/completion_data.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "base/rng.h"
#include "cpd/cp_als.h"

/* Entries per block of the squared error: the blocks' sums are added in
 * block order, so the total does not depend on the thread count. */
#define COMPLETION_BLOCK_ENTRIES 65536u

/* Separates the holdout's stream from every other use of the run's seed. */
#define COMPLETION_HOLDOUT_TAG UINT64_C(0x686f6c646f7574) /* "holdout" */

gboolean th_completion_check_values(const th_sptensor *tensor, GError **error)
{
    if (tensor->nnz == 0) {
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_ZERO_TENSOR,
                    "the tensor lists no entry: completion needs observed entries to fit");
        return FALSE;
    }
    gboolean nonzero = FALSE;
    for (uint64_t k = 0; k < tensor->nnz; ++k) {
        const double v = tensor->values[k];
        const double magnitude = fabs(v);
        nonzero = nonzero || magnitude > 0.0;
        if (isfinite(v) && (magnitude == 0.0 || (magnitude >= 0x1p-64 && magnitude <= 0x1p64)))
            continue;
        g_autofree char *at = th_sptensor_entry_text(tensor, k);
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT,
                    "entry %" PRIu64 " %s of the tensor has the value %g: completion needs "
                    "finite values of magnitude within [2^-64, 2^64] (its ridge term is not "
                    "scale-invariant, so it does not rescale them): rescale the data",
                    k + 1, at, v);
        return FALSE;
    }
    if (!nonzero) {
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_ZERO_TENSOR,
                    "every listed value is zero (%" PRIu64 " entries): the best model is 0, "
                    "with nothing to complete",
                    tensor->nnz);
        return FALSE;
    }
    return TRUE;
}

gboolean th_completion_is_held_out(uint64_t seed, uint64_t k, double holdout)
{
    if (!(holdout > 0.0))
        return FALSE;
    uint64_t state = seed ^ COMPLETION_HOLDOUT_TAG;
    state = th_splitmix64(&state) ^ k;
    const double u = (double)(th_splitmix64(&state) >> 11) * 0x1.0p-53;
    return u < holdout;
}

static th_sptensor *empty_like(const th_sptensor *t, uint64_t nnz)
{
    th_sptensor *s = th_sptensor_new(t->nmodes, nnz);
    memcpy(s->dims, t->dims, sizeof(th_index) * t->nmodes);
    s->value_scale = t->value_scale;
    s->label = g_strdup(t->label);
    s->duplicates_merged = t->duplicates_merged;
    s->lines_read = t->lines_read;
    s->explicit_zeros = t->explicit_zeros;
    s->underflowed_values = t->underflowed_values;
    return s;
}

static void copy_entry(th_sptensor *to, uint64_t at, const th_sptensor *from, uint64_t k)
{
    for (uint32_t m = 0; m < from->nmodes; ++m)
        to->indices[m][at] = from->indices[m][k];
    to->values[at] = from->values[k];
}

gboolean th_completion_split(const th_sptensor *tensor, double holdout, uint64_t seed,
                             th_sptensor **train, th_sptensor **held_out, GError **error)
{
    g_autofree guint8 *out = g_new(guint8, tensor->nnz ? tensor->nnz : 1);
    uint64_t held = 0;
#pragma omp parallel for schedule(static) reduction(+ : held) if (tensor->nnz >= 65536)
    for (uint64_t k = 0; k < tensor->nnz; ++k) {
        out[k] = (guint8)th_completion_is_held_out(seed, k, holdout);
        held += out[k];
    }
    if (held == tensor->nnz) {
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT,
                    "a holdout of %g held out all %" PRIu64 " listed entries: none remains to "
                    "train on",
                    holdout, tensor->nnz);
        return FALSE;
    }
    th_sptensor *t = empty_like(tensor, tensor->nnz - held);
    th_sptensor *h = empty_like(tensor, held);
    uint64_t nt = 0, nh = 0;
    for (uint64_t k = 0; k < tensor->nnz; ++k) {
        if (out[k])
            copy_entry(h, nh++, tensor, k);
        else
            copy_entry(t, nt++, tensor, k);
    }
    if (th_sptensor_norm_squared(t) == 0.0) {
        g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_ZERO_TENSOR,
                    "every training value is zero (%" PRIu64 " entries after a holdout of %g): "
                    "the best model is 0, with nothing to complete",
                    t->nnz, holdout);
        th_sptensor_free(t);
        th_sptensor_free(h);
        return FALSE;
    }
    *train = t;
    *held_out = h;
    return TRUE;
}

/* Mode m's rows with no training entry; *first_row gets the first of them
 * (0-based; untouched when there is none). */
static uint64_t mode_empty_rows(const th_sptensor *train, uint32_t m, uint64_t *first_row)
{
    g_autofree uint8_t *seen = g_new0(uint8_t, train->dims[m] ? train->dims[m] : 1);
    for (uint64_t k = 0; k < train->nnz; ++k)
        seen[train->indices[m][k]] = 1;
    uint64_t empty = 0;
    for (uint64_t i = train->dims[m]; i-- > 0;) {
        if (!seen[i]) {
            ++empty;
            *first_row = i;
        }
    }
    return empty;
}

gboolean th_completion_check_rows(const th_sptensor *train, double l2, uint64_t *empty_rows,
                                  char **description, GError **error)
{
    uint64_t total = 0;
    g_autofree char *first = NULL;
    for (uint32_t m = 0; m < train->nmodes; ++m) {
        uint64_t first_row = 0;
        const uint64_t empty = mode_empty_rows(train, m, &first_row);
        if (empty == 0)
            continue;
        if (!(l2 > 0.0)) {
            g_set_error(error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT,
                        "%" PRIu64 " %s of mode %u (the first: row %" PRIu64 ") %s no training "
                        "entry: with l2 = 0 %s factor %s undetermined; set a ridge (l2 > 0, "
                        "which makes such rows 0) or leave the rows out of the tensor's "
                        "dimensions",
                        empty, empty == 1 ? "row" : "rows", m + 1, first_row + 1,
                        empty == 1 ? "has" : "have", empty == 1 ? "its" : "their",
                        empty == 1 ? "row is" : "rows are");
            return FALSE;
        }
        if (!first)
            first = g_strdup_printf("%" PRIu64 " %s of mode %u (the first: row %" PRIu64 ")",
                                    empty, empty == 1 ? "row" : "rows", m + 1, first_row + 1);
        total += empty;
    }
    if (empty_rows)
        *empty_rows = total;
    if (description)
        *description = g_steal_pointer(&first);
    return TRUE;
}

static double block_squared_error(const th_sptensor *e, double *const *factors, uint32_t rank,
                                  uint64_t begin, uint64_t end)
{
    double sum = 0.0;
    for (uint64_t k = begin; k < end; ++k) {
        double m = 0.0;
        for (uint32_t r = 0; r < rank; ++r) {
            double product = 1.0;
            for (uint32_t n = 0; n < e->nmodes; ++n)
                product *= factors[n][(size_t)e->indices[n][k] * rank + r];
            m += product;
        }
        const double residual = e->values[k] - m;
        sum += residual * residual;
    }
    return sum;
}

double th_completion_squared_error(const th_sptensor *entries, double *const *factors,
                                   uint32_t rank)
{
    const uint64_t blocks =
        (entries->nnz + COMPLETION_BLOCK_ENTRIES - 1) / COMPLETION_BLOCK_ENTRIES;
    g_autofree double *sums = g_new0(double, blocks ? blocks : 1);
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1)
    for (uint64_t b = 0; b < blocks; ++b) {
        const uint64_t begin = b * COMPLETION_BLOCK_ENTRIES;
        const uint64_t end = MIN(entries->nnz, begin + COMPLETION_BLOCK_ENTRIES);
        sums[b] = block_squared_error(entries, factors, rank, begin, end);
    }
    double total = 0.0;
    for (uint64_t b = 0; b < blocks; ++b)
        total += sums[b];
    return total;
}
