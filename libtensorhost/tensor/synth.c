/* Synthetic sparse tensors; see synth.h for the model.
 *
 * Sampling uses Walker/Vose alias tables (one random draw and one table entry
 * per index, O(1) whatever the mode length) with the mode's permutation folded
 * into the table, so a draw touches one 12-byte entry. */
#include "tensor/synth.h"

#include "base/message_text.h"
#include "base/rng.h"

#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <string.h>

G_DEFINE_QUARK(th-synth-error-quark, th_synth_error)

#define BLOCK_NNZ ((uint64_t)1 << 16)
#define MAX_THREADS 64u
#define VALUE_STEPS 1000000u

/* Stream tags: every RNG stream is derived from (seed, tag, a, b). */
enum { TAG_PERMUTATION = 1, TAG_DRAWS = 2, TAG_VALUES = 3 };

const th_synth_preset th_synth_presets[] = {
    {"uber", 4, {183, 24, 1140, 1717}, 3309490, {0.3, 0.5, 1.0, 1.0}},
    {"chicago", 4, {6186, 24, 77, 32}, 5330673, {1.0, 0.5, 0.7, 0.7}},
    {"nips", 4, {2482, 2862, 14036, 17}, 3101609, {0.8, 0.8, 1.0, 0.5}},
    {"vast", 5, {165427, 11374, 2, 100, 89}, 26021945, {1.0, 1.0, 0.2, 0.5, 0.5}},
    {"enron", 4, {6066, 5699, 244268, 1176}, 54202099, {1.0, 1.0, 1.0, 0.5}},
    {"nell-2", 3, {12092, 9184, 28818}, 76879419, {1.0, 1.0, 1.0}},
    /* The paper's largest: tall factors (25.5M rows), for end-to-end runs. */
    {"nell-1", 3, {2902330, 2143368, 25495389}, 143599552, {1.0, 1.0, 1.0}},
    /* Past 2^32 nonzeros, more than one GPU holds (the multi-device runs).
     * At full size a tensor takes 20 bytes a nonzero on the host (94 GB for
     * reddit), about twice that while generating (the sorted unions); `nnz`
     * scales them down to what a host holds. */
    {"patents", 3, {46, 239172, 239172}, 3596640708ull, {0.5, 1.0, 1.0}},
    {"reddit", 3, {8211298, 176962, 8116559}, 4687474081ull, {1.0, 1.0, 1.0}},
};
const size_t th_synth_preset_count = G_N_ELEMENTS(th_synth_presets);

const th_synth_preset *th_synth_find_preset(const char *name)
{
    for (size_t i = 0; i < th_synth_preset_count; ++i) {
        if (g_strcmp0(th_synth_presets[i].name, name) == 0)
            return &th_synth_presets[i];
    }
    return NULL;
}

void th_synth_params_from_preset(th_synth_params *params, const th_synth_preset *preset,
                                 uint64_t seed)
{
    memset(params, 0, sizeof *params);
    params->nmodes = preset->nmodes;
    params->nnz = preset->nnz;
    params->seed = seed;
    for (uint32_t m = 0; m < preset->nmodes; ++m) {
        params->dims[m] = preset->dims[m];
        params->skew[m] = preset->skew[m];
    }
}

char *th_synth_describe(const th_synth_params *params)
{
    GString *s = g_string_new("tensorhost-synth dims=");
    for (uint32_t m = 0; m < params->nmodes; ++m)
        g_string_append_printf(s, "%s%u", m ? "x" : "", params->dims[m]);
    g_string_append_printf(s, " nnz=%" G_GUINT64_FORMAT " skew=", params->nnz);
    for (uint32_t m = 0; m < params->nmodes; ++m) {
        char number[G_ASCII_DTOSTR_BUF_SIZE];
        g_ascii_formatd(number, sizeof number, "%g", params->skew[m]);
        g_string_append_printf(s, "%s%s", m ? "," : "", number);
    }
    g_string_append_printf(s, " seed=%" G_GUINT64_FORMAT, params->seed);
    return g_string_free(s, FALSE);
}

/* Uniform in [0, n) from the high 32 bits (Lemire's multiply-shift; the bias
 * is below n / 2^32, irrelevant here). */
static inline uint32_t scale32(uint64_t r, uint64_t n) { return (uint32_t)(((r >> 32) * n) >> 32); }

/* ---- per-mode samplers ---------------------------------------------------- */

typedef struct {
    uint32_t threshold; /* take `primary` if the low 32 random bits are below */
    th_index primary;
    th_index secondary;
} alias_entry;

typedef struct {
    uint64_t dim;
    alias_entry *table; /* NULL: uniform */
} mode_sampler;

static th_index *random_permutation(uint64_t dim, th_rng *rng)
{
    th_index *perm = g_new(th_index, dim);
    for (uint64_t i = 0; i < dim; ++i)
        perm[i] = (th_index)i;
    for (uint64_t i = dim - 1; i > 0; --i) {
        uint64_t j = (uint64_t)scale32(th_rng_next(rng), i + 1);
        th_index tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    return perm;
}

/* Vose's alias method over Zipf weights 1/r^a, rank r mapped to perm[r-1]. */
static alias_entry *zipf_alias_table(uint64_t dim, double a, const th_index *perm)
{
    double *prob = g_new(double, dim);
    double total = 0.0;
    for (uint64_t r = 0; r < dim; ++r) {
        prob[r] = pow((double)(r + 1), -a);
        total += prob[r];
    }
    th_index *small = g_new(th_index, dim);
    th_index *large = g_new(th_index, dim);
    uint64_t nsmall = 0, nlarge = 0;
    for (uint64_t r = 0; r < dim; ++r) {
        prob[r] *= (double)dim / total;
        if (prob[r] < 1.0)
            small[nsmall++] = (th_index)r;
        else
            large[nlarge++] = (th_index)r;
    }
    alias_entry *table = g_new(alias_entry, dim);
    while (nsmall > 0 && nlarge > 0) {
        th_index s = small[--nsmall];
        th_index l = large[nlarge - 1];
        /* Rounding can push a leftover probability a hair below 0. */
        table[s].threshold = prob[s] > 0.0 ? (uint32_t)(prob[s] * 4294967296.0) : 0u;
        table[s].primary = perm[s];
        table[s].secondary = perm[l];
        prob[l] -= 1.0 - prob[s];
        if (prob[l] < 1.0) {
            --nlarge;
            small[nsmall++] = l;
        }
    }
    /* What is left has probability 1 up to rounding: always itself. */
    while (nlarge > 0) {
        th_index l = large[--nlarge];
        table[l] = (alias_entry){UINT32_MAX, perm[l], perm[l]};
    }
    while (nsmall > 0) {
        th_index s = small[--nsmall];
        table[s] = (alias_entry){UINT32_MAX, perm[s], perm[s]};
    }
    g_free(prob);
    g_free(small);
    g_free(large);
    return table;
}

static inline th_index sample_mode(const mode_sampler *ms, th_rng *rng)
{
    uint64_t r = th_rng_next(rng);
    uint32_t j = scale32(r, ms->dim);
    if (ms->table == NULL)
        return (th_index)j;
    const alias_entry *e = &ms->table[j];
    return (uint32_t)r < e->threshold ? e->primary : e->secondary;
}

/* ---- drawing batches ----------------------------------------------------- */

typedef struct {
    const th_synth_params *params;
    const mode_sampler *samplers;
    th_sptensor *out;
    uint64_t round;
    atomic_uint_fast64_t next_block;
} draw_job;

static gpointer draw_blocks(gpointer data)
{
    draw_job *job = data;
    th_sptensor *t = job->out;
    uint64_t nblocks = (t->nnz + BLOCK_NNZ - 1) / BLOCK_NNZ;
    for (;;) {
        uint64_t b = atomic_fetch_add(&job->next_block, 1);
        if (b >= nblocks)
            break;
        th_rng rng = th_rng_stream(job->params->seed, TAG_DRAWS, job->round, b);
        uint64_t end = MIN(t->nnz, (b + 1) * BLOCK_NNZ);
        for (uint64_t i = b * BLOCK_NNZ; i < end; ++i) {
            for (uint32_t m = 0; m < t->nmodes; ++m)
                t->indices[m][i] = sample_mode(&job->samplers[m], &rng);
            t->values[i] = 0.0;
        }
    }
    return NULL;
}

static uint32_t worker_count(uint64_t nnz)
{
    uint64_t n = MIN((uint64_t)g_get_num_processors(), (uint64_t)MAX_THREADS);
    n = MIN(n, (nnz + BLOCK_NNZ - 1) / BLOCK_NNZ);
    return (uint32_t)MAX(n, 1u);
}

/* `count` fresh draws, sorted, duplicates merged. */
static th_sptensor *draw_batch(const th_synth_params *params, const mode_sampler *samplers,
                               uint64_t count, uint64_t round)
{
    th_sptensor *t = th_sptensor_new(params->nmodes, count);
    draw_job job = {.params = params, .samplers = samplers, .out = t, .round = round};
    atomic_init(&job.next_block, 0);
    uint32_t nthreads = worker_count(count);
    GThread *threads[MAX_THREADS] = {NULL};
    for (uint32_t k = 1; k < nthreads; ++k)
        threads[k] = g_thread_new("th-synth", draw_blocks, &job);
    draw_blocks(&job);
    for (uint32_t k = 1; k < nthreads; ++k)
        g_thread_join(threads[k]);
    th_sptensor_sort_and_merge(t);
    return t;
}

/* ---- set operations on sorted tensors ------------------------------------ */

static int compare_entries(const th_sptensor *a, uint64_t i, const th_sptensor *b, uint64_t j)
{
    for (uint32_t m = 0; m < a->nmodes; ++m) {
        th_index x = a->indices[m][i], y = b->indices[m][j];
        if (x != y)
            return x < y ? -1 : 1;
    }
    return 0;
}

/* The first entry of sorted `b` not below entry i of `a`. */
static uint64_t lower_bound(const th_sptensor *b, const th_sptensor *a, uint64_t i)
{
    uint64_t lo = 0, hi = b->nnz;
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (compare_entries(b, mid, a, i) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Whether sorted `t` holds entry j of `b`. */
static gboolean sorted_contains(const th_sptensor *t, const th_sptensor *b, uint64_t j)
{
    const uint64_t k = lower_bound(t, b, j);
    return k < t->nnz && compare_entries(t, k, b, j) == 0;
}

static void copy_entry(th_sptensor *dst, uint64_t i, const th_sptensor *src, uint64_t j)
{
    for (uint32_t m = 0; m < dst->nmodes; ++m)
        dst->indices[m][i] = src->indices[m][j];
    dst->values[i] = src->values[j];
}

/* The set operations below split their work into segments, spread over
 * OpenMP's threads; the result is the same for any number of segments. */
#define MAX_SEGMENTS 64u

static atomic_uint segments_setting = 0u; /* 0: OpenMP's thread count */

void th_synth_set_merge_segments(uint32_t segments)
{
    atomic_store(&segments_setting, segments);
}

static uint32_t merge_segments(void)
{
    uint32_t n = atomic_load(&segments_setting);
    if (n == 0)
        n = (uint32_t)omp_get_max_threads();
    return MAX(1u, MIN(n, MAX_SEGMENTS));
}

/* Drops, in place, the entries of sorted `b` that sorted `a` holds: the
 * look-ups (a binary search each) side by side, then one compacting pass. */
static void remove_present(th_sptensor *b, const th_sptensor *a)
{
    guint8 *keep = g_new(guint8, MAX(b->nnz, 1));
#pragma omp parallel for schedule(static)
    for (uint64_t j = 0; j < b->nnz; ++j)
        keep[j] = !sorted_contains(a, b, j);
    uint64_t kept = 0;
    for (uint64_t j = 0; j < b->nnz; ++j) {
        if (!keep[j])
            continue;
        if (kept != j)
            copy_entry(b, kept, b, j);
        ++kept;
    }
    g_free(keep);
    th_sptensor_truncate(b, kept);
}

/* Merges a[i, i_end) and b[j, j_end) (an entry in both taken once, from a)
 * into u from entry k on, or only counts when u is NULL; returns the count. */
static uint64_t merge_segment(const th_sptensor *a, uint64_t i, uint64_t i_end,
                              const th_sptensor *b, uint64_t j, uint64_t j_end, th_sptensor *u,
                              uint64_t k)
{
    const uint64_t first = k;
    while (i < i_end || j < j_end) {
        const int c = i == i_end ? 1 : j == j_end ? -1 : compare_entries(a, i, b, j);
        if (u != NULL)
            copy_entry(u, k, c <= 0 ? a : b, c <= 0 ? i : j);
        ++k;
        if (c <= 0)
            ++i;
        if (c >= 0)
            ++j;
    }
    return k - first;
}

/* The sorted union of two sorted, duplicate-free tensors; frees both. The
 * segments cut `a` evenly and `b` where a's cut entries would go, so each
 * merges on its own: a counting round gives each its place in the result,
 * a second writes it there. */
static th_sptensor *sorted_union(th_sptensor *a, th_sptensor *b)
{
    if (b == NULL || b->nnz == 0) {
        th_sptensor_free(b);
        return a;
    }
    if (a->nnz == 0) {
        th_sptensor_free(a);
        return b;
    }
    const uint32_t n = merge_segments();
    uint64_t a_at[MAX_SEGMENTS + 1], b_at[MAX_SEGMENTS + 1], out_at[MAX_SEGMENTS + 1];
    for (uint32_t s = 0; s <= n; ++s)
        a_at[s] = a->nnz * s / n;
    b_at[0] = 0;
    b_at[n] = b->nnz;
    for (uint32_t s = 1; s < n; ++s)
        b_at[s] = lower_bound(b, a, a_at[s]);
#pragma omp parallel for schedule(static)
    for (uint32_t s = 0; s < n; ++s)
        out_at[s + 1] = merge_segment(a, a_at[s], a_at[s + 1], b, b_at[s], b_at[s + 1], NULL, 0);
    out_at[0] = 0;
    for (uint32_t s = 0; s < n; ++s)
        out_at[s + 1] += out_at[s];
    th_sptensor *u = th_sptensor_new(a->nmodes, out_at[n]);
#pragma omp parallel for schedule(static)
    for (uint32_t s = 0; s < n; ++s)
        merge_segment(a, a_at[s], a_at[s + 1], b, b_at[s], b_at[s + 1], u, out_at[s]);
    th_sptensor_free(a);
    th_sptensor_free(b);
    return u;
}

/* ---- the generator ------------------------------------------------------- */

static gboolean validate(const th_synth_params *p, GError **error)
{
    if (p->nmodes < 2 || p->nmodes > TH_MAX_MODES) {
        g_set_error(error, TH_SYNTH_ERROR, TH_SYNTH_ERROR_INVALID,
                    "synthetic tensor: %u %s; expected 2 to %u", p->nmodes,
                    th_plural(p->nmodes, "mode", "modes"), TH_MAX_MODES);
        return FALSE;
    }
    double cells = 1.0;
    for (uint32_t m = 0; m < p->nmodes; ++m) {
        if (p->dims[m] == 0) {
            g_set_error(error, TH_SYNTH_ERROR, TH_SYNTH_ERROR_INVALID,
                        "synthetic tensor: mode %u has size 0; sizes start at 1", m + 1);
            return FALSE;
        }
        if (!(p->skew[m] >= 0.0 && p->skew[m] <= 100.0)) {
            g_set_error(error, TH_SYNTH_ERROR, TH_SYNTH_ERROR_INVALID,
                        "synthetic tensor: mode %u has skew %g; expected an exponent from 0 "
                        "to 100",
                        m + 1, p->skew[m]);
            return FALSE;
        }
        cells *= (double)p->dims[m];
    }
    if (p->nnz == 0 || (double)p->nnz > cells || p->nnz > UINT32_MAX * (uint64_t)16) {
        g_set_error(error, TH_SYNTH_ERROR, TH_SYNTH_ERROR_INVALID,
                    "synthetic tensor: %" G_GUINT64_FORMAT
                    " %s requested; expected 1 to the number of cells (%.0f)",
                    p->nnz, th_plural(p->nnz, "nonzero", "nonzeros"), cells);
        return FALSE;
    }
    return TRUE;
}

static mode_sampler *make_samplers(const th_synth_params *p)
{
    mode_sampler *samplers = g_new0(mode_sampler, p->nmodes);
    for (uint32_t m = 0; m < p->nmodes; ++m) {
        samplers[m].dim = p->dims[m];
        if (p->skew[m] == 0.0)
            continue; /* uniform needs no table and no permutation */
        th_rng rng = th_rng_stream(p->seed, TAG_PERMUTATION, m, 0);
        th_index *perm = random_permutation(p->dims[m], &rng);
        samplers[m].table = zipf_alias_table(p->dims[m], p->skew[m], perm);
        g_free(perm);
    }
    return samplers;
}

/* Each block of values draws from its own stream, so the blocks go on
 * OpenMP's threads and the values do not depend on their number. */
static void assign_values(th_sptensor *t, uint64_t seed)
{
    uint64_t nblocks = (t->nnz + BLOCK_NNZ - 1) / BLOCK_NNZ;
#pragma omp parallel for schedule(static)
    for (uint64_t b = 0; b < nblocks; ++b) {
        th_rng rng = th_rng_stream(seed, TAG_VALUES, b, 0);
        uint64_t end = MIN(t->nnz, (b + 1) * BLOCK_NNZ);
        for (uint64_t i = b * BLOCK_NNZ; i < end; ++i)
            t->values[i] = (double)(scale32(th_rng_next(&rng), VALUE_STEPS) + 1u) / (double)VALUE_STEPS;
    }
}

th_sptensor *th_synth_generate(const th_synth_params *params, GError **error)
{
    g_return_val_if_fail(params != NULL, NULL);
    if (!validate(params, error))
        return NULL;
    g_autofree char *short_of = NULL;
    if (!th_sptensor_host_has_room(params->nnz, params->nmodes, &short_of)) {
        g_set_error(error, TH_SYNTH_ERROR, TH_SYNTH_ERROR_MEMORY,
                    "generating %" G_GUINT64_FORMAT " %s: their arrays %s", params->nnz,
                    th_plural(params->nnz, "nonzero", "nonzeros"), short_of);
        return NULL;
    }
    mode_sampler *samplers = make_samplers(params);
    uint32_t max_rounds = params->max_rounds ? params->max_rounds : TH_SYNTH_DEFAULT_ROUNDS;

    th_sptensor *base = draw_batch(params, samplers, params->nnz, 0);
    uint64_t drawn = params->nnz;
    /* Top-up draws are kept apart from the (large) base and checked against it
     * by binary search, so a round costs O(shortfall log nnz), not O(nnz). */
    th_sptensor *extras = NULL;
    for (uint32_t round = 1; round <= max_rounds; ++round) {
        uint64_t have = base->nnz + (extras ? extras->nnz : 0);
        if (have >= params->nnz)
            break;
        uint64_t shortfall = params->nnz - have;
        th_sptensor *batch = draw_batch(params, samplers, shortfall, round);
        drawn += shortfall;
        remove_present(batch, base);
        extras = extras ? sorted_union(extras, batch) : batch;
    }
    th_sptensor *t = sorted_union(base, extras);
    for (uint32_t m = 0; m < params->nmodes; ++m) {
        g_free(samplers[m].table);
        t->dims[m] = params->dims[m];
    }
    g_free(samplers);
    assign_values(t, params->seed);
    t->lines_read = drawn;
    t->duplicates_merged = drawn - t->nnz;
    g_autofree char *description = th_synth_describe(params);
    t->label = g_strconcat(TH_SYNTH_LABEL_PREFIX, description, NULL);
    return t;
}
