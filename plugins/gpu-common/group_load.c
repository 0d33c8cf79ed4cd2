#include "group_load.h"

#include "kernel_bridge.h"
#include "host_memory.h"
#include "memory_plan.h"
#include "share_extract.h"

#include <tensorhost/plugin_sdk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Host threads for the passes over the tensor (one pass each). */
static uint32_t host_threads(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1u : n > 64 ? 64u : (uint32_t)n;
}

/* Every mode's row counts and shares over the G ranks. */
typedef struct share_plan {
    uint32_t nmodes, G;
    uint64_t *row_offsets[THG_MAX_MODES]; /* [dims[m] + 1] each */
    thp_share *shares;                    /* [nmodes][G] */
} share_plan;

static void free_plan(share_plan *p)
{
    for (uint32_t m = 0; m < p->nmodes; ++m)
        free(p->row_offsets[m]);
    free(p->shares);
}

static th_status make_plan(const th_coo_tensor *t, uint32_t G, share_plan *p, char *err)
{
    memset(p, 0, sizeof *p);
    p->nmodes = t->nmodes;
    p->G = G;
    const thp_coo_view view = {t->nmodes, t->nnz, t->dims, t->indices, t->values};
    p->shares = malloc(sizeof *p->shares * t->nmodes * G);
    if (p->shares == NULL)
        return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY, "out of host memory");
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        p->row_offsets[m] = malloc(sizeof(uint64_t) * ((size_t)t->dims[m] + 1u));
        if (p->row_offsets[m] == NULL)
            return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    if (thp_count_rows_all(&view, p->row_offsets, host_threads()) != 0)
        for (uint32_t m = 0; m < t->nmodes; ++m) /* which mode: the error path only */
            if (thp_count_rows(&view, m, p->row_offsets[m]) != 0)
                return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                      "tensor has an index outside mode %u's %u rows", m,
                                      t->dims[m]);
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        if (thp_plan_shares(p->row_offsets[m], t->dims[m], G, p->shares + (size_t)m * G) != 0)
            return th_plugin_fail(err, TH_ERR_INTERNAL, "mode %u: shares could not be planned",
                                  m);
    }
    return TH_OK;
}

static double gib(uint64_t bytes) { return bytes / 1073741824.0; }

/* Each device holds its ranks' resident memory and, while one of them
 * builds (the ranks load one after another), that rank's build staging:
 * checked for every device before any rank allocates. */
static th_status check_memory(thg_group *group, const int *devices, const th_coo_tensor *t,
                              uint32_t rank, const share_plan *p, char *err)
{
    const uint32_t G = p->G;
    thg_memory_terms terms[THG_MAX_GROUP_RANKS];
    char msg[TH_ERROR_SIZE];
    for (uint32_t q = 0; q < G; ++q) {
        const thg_status st = thg_get_memory_terms(thg_group_rank(group, q), t->nmodes, t->dims,
                                                   rank, &terms[q], msg, sizeof msg);
        if (st != THG_OK)
            return th_plugin_fail(err, gpu_plugin_status(st), "%s", msg);
    }
    const thp_memory_model model =
        gpu_memory_model(t, rank, &terms[0], (const uint64_t *const *)p->row_offsets);
    uint64_t least_free = UINT64_MAX;
    for (uint32_t q = 0; q < G; ++q)
        least_free = terms[q].free_bytes < least_free ? terms[q].free_bytes : least_free;
    char advice[160];
    for (uint32_t m = 0; m < t->nmodes; ++m)
        for (uint32_t q = 0; q < G; ++q) {
            const thp_share *s = &p->shares[(size_t)m * G + q];
            if (s->nnz_end - s->nnz_begin > THG_MAX_NNZ) {
                thp_plan_advice(&model, least_free, THG_MAX_NNZ, THP_MAX_DEVICES, advice,
                                sizeof advice);
                return th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                                      "tensor has %llu nonzeros: a share of mode %u over %u "
                                      "devices has %llu, more than the %u one device takes; %s",
                                      (unsigned long long)t->nnz, m, G,
                                      (unsigned long long)(s->nnz_end - s->nnz_begin),
                                      THG_MAX_NNZ, advice);
            }
        }
    for (uint32_t q = 0; q < G; ++q) {
        int first_on_device = 1;
        for (uint32_t o = 0; o < q; ++o)
            first_on_device = first_on_device && devices[o] != devices[q];
        if (!first_on_device)
            continue;
        uint64_t resident = 0, build = 0;
        thp_rank_memory fullest = {0};
        for (uint32_t o = q; o < G; ++o) {
            if (devices[o] != devices[q])
                continue;
            thp_rank_memory r;
            if (thp_plan_rank_memory(&model, G, o, &r) != 0)
                return th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                                      "the memory plan of rank %u cannot be made (a size past "
                                      "2^64 bytes)",
                                      o);
            resident += r.resident;
            build = r.build > build ? r.build : build;
            if (r.peak > fullest.peak)
                fullest = r;
        }
        if (resident + build <= terms[q].free_bytes)
            continue;
        thp_plan_advice(&model, least_free, THG_MAX_NNZ, THP_MAX_DEVICES, advice,
                        sizeof advice);
        return th_plugin_fail(
            err, TH_ERR_OUT_OF_MEMORY,
            "tensor does not fit on %u ranks: device %d would hold %.2f GiB (its fullest rank: "
            "copies %.2f, factors %.2f, results %.2f, workspace %.2f, build %.2f GiB) with "
            "%.2f GiB free; %s",
            G, devices[q], gib(resident + build), gib(fullest.copies), gib(fullest.factors),
            gib(fullest.results + fullest.run_ahead), gib(fullest.fixed), gib(fullest.build),
            gib(terms[q].free_bytes), advice);
    }
    return TH_OK;
}

/* Host buffers for one rank's share of every mode, sized for the largest
 * rank's and reused by each rank in turn: a fresh allocation per rank
 * would page-fault its way through the same bytes again. */
typedef struct share_buffers {
    uint32_t nmodes;
    void *blocks[THG_MAX_MODES];
} share_buffers;

static size_t share_bytes(uint64_t nnz, uint32_t nmodes)
{
    return (size_t)nnz * (sizeof(double) + sizeof(uint32_t) * nmodes);
}

static void free_share_buffers(share_buffers *b)
{
    for (uint32_t m = 0; m < b->nmodes; ++m)
        free(b->blocks[m]);
}

/* The most nonzeros any rank's share of mode m has. */
static uint64_t largest_share(const share_plan *p, uint32_t m)
{
    uint64_t largest = 0;
    for (uint32_t q = 0; q < p->G; ++q) {
        const thp_share *s = &p->shares[(size_t)m * p->G + q];
        largest = s->nnz_end - s->nnz_begin > largest ? s->nnz_end - s->nnz_begin : largest;
    }
    return largest;
}

/* The buffers need the host's memory while the ranks load: asked first,
 * so that an overcommitted host refuses here instead of killing the
 * process when the buffers are filled (common/host_memory.h). A host that
 * does not say is not asked. */
static th_status check_host_memory(const share_plan *p, char *err)
{
    uint64_t need = 0, available;
    for (uint32_t m = 0; m < p->nmodes; ++m)
        need += share_bytes(largest_share(p, m), p->nmodes);
    char source[256];
    if (th_host_available(&available, source, sizeof source) != 0)
        return TH_OK;
    char message[TH_ERROR_SIZE];
    if (thp_plan_host_refusal(need, available, source, p->G, message, sizeof message) != 0)
        return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY, "%s", message);
    return TH_OK;
}

static th_status alloc_share_buffers(const share_plan *p, share_buffers *b, char *err)
{
    memset(b, 0, sizeof *b);
    b->nmodes = p->nmodes;
    for (uint32_t m = 0; m < p->nmodes; ++m) {
        const uint64_t largest = largest_share(p, m);
        b->blocks[m] = malloc(share_bytes(largest > 0 ? largest : 1, p->nmodes));
        if (b->blocks[m] == NULL)
            return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY,
                                  "out of host memory for the shares of mode %u (%llu nonzeros "
                                  "on the largest rank)",
                                  m, (unsigned long long)largest);
    }
    return TH_OK;
}

/* Rank q's shares of every mode, extracted into `buffers` and loaded into
 * its context. */
static th_status load_rank(thg_group *group, const int *devices, const th_coo_tensor *t,
                           uint32_t rank, const share_plan *p, const share_buffers *buffers,
                           uint32_t q, char *err)
{
    const uint32_t N = t->nmodes, G = p->G;
    const thp_coo_view view = {t->nmodes, t->nnz, t->dims, t->indices, t->values};
    uint32_t *indices[THG_MAX_MODES][THG_MAX_MODES];
    thg_mode_input inputs[THG_MAX_MODES];
    thp_share_job jobs[THG_MAX_MODES];
    for (uint32_t m = 0; m < N; ++m) {
        const thp_share *mode_shares = p->shares + (size_t)m * G;
        const thp_share *s = &mode_shares[q];
        const uint64_t n = s->nnz_end - s->nnz_begin;
        double *values = buffers->blocks[m];
        for (uint32_t k = 0; k < N; ++k)
            indices[m][k] = (uint32_t *)(values + n) + (size_t)k * n;
        jobs[m] = (thp_share_job){m, p->row_offsets[m], s, indices[m], values};
        const thp_owned_rows owned = thp_owned_rows_of(mode_shares, G, q, t->dims[m]);
        inputs[m] = (thg_mode_input){n, (const uint32_t *const *)indices[m], values,
                                     owned.begin, owned.window_end};
    }
    /* The rank's N shares, side by side on the host's threads. */
    if (thp_extract_shares(&view, jobs, N, host_threads()) != 0)
        return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY,
                              "out of host memory while extracting rank %u's shares", q);
    /* thg_load_shares has read the buffers when it returns (its upload
     * waits for its transfer streams), so the next rank may refill them. */
    char msg[TH_ERROR_SIZE - 64];
    const thg_status st = thg_load_shares(thg_group_rank(group, q), N, t->dims, inputs, rank,
                                          msg, sizeof msg);
    if (st != THG_OK)
        return th_plugin_fail(err, gpu_plugin_status(st), "rank %u (device %d): %s", q,
                              devices[q], msg);
    return TH_OK;
}

/* The rows each rank owns and the split rows, from every mode's shares
 * (shares[nmodes][G]), handed to the group. */
static th_status set_layout(thg_group *group, uint32_t nmodes, const uint32_t *dims,
                            const thp_share *shares, char *err)
{
    const uint32_t G = thg_group_size(group);
    thg_group_mode *modes = calloc(nmodes, sizeof *modes);
    if (modes == NULL)
        return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY, "out of host memory");
    for (uint32_t m = 0; m < nmodes; ++m) {
        const thp_share *mode_shares = shares + (size_t)m * G;
        for (uint32_t q = 0; q < G; ++q) {
            const thp_share *s = &mode_shares[q];
            const thp_owned_rows owned = thp_owned_rows_of(mode_shares, G, q, dims[m]);
            modes[m].own[q] = owned.begin;
            const uint32_t first = s->splits_first_row ? (uint32_t)s->row_begin : THG_NO_ROW;
            uint32_t last = s->splits_last_row ? (uint32_t)(s->row_end - 1u) : THG_NO_ROW;
            if (last == first)
                last = THG_NO_ROW;
            modes[m].split_rows[2 * q] = first;
            modes[m].split_rows[2 * q + 1] = last;
        }
        modes[m].own[G] = dims[m];
    }
    char msg[TH_ERROR_SIZE];
    const thg_status st = thg_group_set_layout(group, modes, msg, sizeof msg);
    free(modes);
    if (st != THG_OK)
        return th_plugin_fail(err, gpu_plugin_status(st), "%s", msg);
    return TH_OK;
}

th_status thg_group_load_tensor(thg_group *group, const th_coo_tensor *t, uint32_t rank,
                                char *err)
{
    const uint32_t G = thg_group_size(group);
    int devices[THG_MAX_GROUP_RANKS];
    for (uint32_t q = 0; q < G; ++q) {
        thg_info info;
        thg_get_info(thg_group_rank(group, q), &info);
        devices[q] = info.device;
    }
    if (t->nnz < G)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "tensor has %llu nonzeros, fewer than the %u devices it would "
                              "be shared out over",
                              (unsigned long long)t->nnz, G);
    if (t->nmodes < 2 || t->nmodes > THG_MAX_MODES)
        return th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                              "tensor has %u modes; the GPU kernels support 2 to %u",
                              t->nmodes, THG_MAX_MODES);
    if (rank < 1 || rank > THG_MAX_RANK)
        return th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                              "rank %u is not supported: the GPU kernels support ranks 1 to %u",
                              rank, THG_MAX_RANK);
    share_plan plan;
    share_buffers buffers = {0};
    thg_group_unload(group); /* before any rank frees its factors */
    th_status status = make_plan(t, G, &plan, err);
    if (status == TH_OK)
        status = check_memory(group, devices, t, rank, &plan, err);
    if (status == TH_OK)
        status = check_host_memory(&plan, err);
    if (status == TH_OK)
        status = alloc_share_buffers(&plan, &buffers, err);
    for (uint32_t q = 0; q < G && status == TH_OK; ++q)
        status = load_rank(group, devices, t, rank, &plan, &buffers, q, err);
    free_share_buffers(&buffers);
    if (status == TH_OK)
        status = set_layout(group, t->nmodes, t->dims, plan.shares, err);
    free_plan(&plan);
    return status;
}

/* This process's share of `mode`: its nonzeros and rows. */
static thp_share_extent share_extent(const th_coo_tensor *share, uint32_t mode)
{
    uint32_t lo = UINT32_MAX, hi = 0;
    const uint32_t *rows = share->indices[mode];
    for (uint64_t k = 0; k < share->nnz; ++k) {
        lo = rows[k] < lo ? rows[k] : lo;
        hi = rows[k] > hi ? rows[k] : hi;
    }
    if (share->nnz == 0)
        return (thp_share_extent){0, 0, 0};
    return (thp_share_extent){share->nnz, lo, (uint64_t)hi + 1u};
}

/* Every rank's shares of every mode (shares[nmodes][G]), rebuilt as the
 * plan made them from every process's extents, gathered through the
 * host's reduce_max (each process's own slots set, the rest zero; its
 * first row stored + 1, so that a zero is "nothing"). */
static th_status gather_shares(const th_coo_tensor *t, const th_host_services *host,
                               uint32_t me, uint32_t G, thp_share *shares, char *err)
{
    const uint32_t N = t->nmodes;
    const size_t count = (size_t)G * N * 3u;
    uint64_t *facts = calloc(count, sizeof *facts);
    thp_share_extent *extents = malloc(sizeof *extents * G);
    if (facts == NULL || extents == NULL) {
        free(facts);
        free(extents);
        return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    for (uint32_t m = 0; m < N; ++m) {
        const thp_share_extent e = share_extent(t->mode_nonzeros[m], m);
        uint64_t *mine = facts + ((size_t)me * N + m) * 3u;
        mine[0] = e.nnz;
        mine[1] = e.row_begin + 1u;
        mine[2] = e.row_end;
    }
    char msg[TH_ERROR_SIZE];
    th_status status = TH_OK;
    if (host->reduce_max(host->host_data, facts, count, msg) != TH_OK)
        status = th_plugin_fail(err, TH_ERR_INTERNAL, "the processes' shares: %s", msg);
    for (uint32_t m = 0; m < N && status == TH_OK; ++m) {
        for (uint32_t q = 0; q < G; ++q) {
            const uint64_t *f = facts + ((size_t)q * N + m) * 3u;
            extents[q] = (thp_share_extent){f[0], f[0] ? f[1] - 1u : 0, f[2]};
        }
        uint32_t bad = 0;
        if (thp_shares_from_extents(extents, G, shares + (size_t)m * G, &bad) != 0)
            status = th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                    "mode %u: process %u's nonzeros start in a row before an "
                                    "earlier process's last: the shares are not dealt by rows",
                                    m, bad);
    }
    free(facts);
    free(extents);
    return status;
}

th_status thg_group_load_across(thg_group *group, const th_coo_tensor *t, uint32_t rank,
                                const th_host_services *host, char *err)
{
    uint32_t me = 0;
    thg_group_local_ranks(group, &me);
    const uint32_t G = thg_group_size(group), N = t->nmodes;
    thg_group_unload(group); /* before the rank frees its factors */
    thp_share *shares = calloc((size_t)G * (N > 0 ? N : 1), sizeof *shares);
    th_status status = shares ? TH_OK
                              : th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY, "out of host memory");
    if (status == TH_OK && (N < 2 || N > THG_MAX_MODES))
        status = th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                                "tensor has %u modes; the GPU kernels support 2 to %u", N,
                                THG_MAX_MODES);
    /* Every process gathers, whatever it found: a collective each. */
    if (status == TH_OK)
        status = gather_shares(t, host, me, G, shares, err);
    for (uint32_t m = 0; m < N && status == TH_OK; ++m)
        for (uint32_t q = 0; q < G && status == TH_OK; ++q)
            if (shares[(size_t)m * G + q].nnz_end == shares[(size_t)m * G + q].nnz_begin)
                status = th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                                        "mode %u: process %u holds none of its nonzeros (the "
                                        "tensor has fewer than the %u processes)",
                                        m, q, G);
    if (status == TH_OK) {
        thg_mode_input inputs[THG_MAX_MODES];
        for (uint32_t m = 0; m < N; ++m) {
            const th_coo_tensor *share = t->mode_nonzeros[m];
            const thp_owned_rows owned =
                thp_owned_rows_of(shares + (size_t)m * G, G, me, t->dims[m]);
            inputs[m] = (thg_mode_input){share->nnz, share->indices, share->values,
                                         owned.begin, owned.window_end};
        }
        char msg[TH_ERROR_SIZE - 64];
        const thg_status st =
            thg_load_shares(thg_group_rank(group, me), N, t->dims, inputs, rank, msg, sizeof msg);
        if (st != THG_OK)
            status = th_plugin_fail(err, gpu_plugin_status(st), "process %u: %s", me, msg);
    }
    /* The layout is collective (its buffers' registration): every process
     * learns whether every other loaded its share first. */
    uint64_t failed = status != TH_OK;
    char msg[TH_ERROR_SIZE];
    if (host->reduce_max(host->host_data, &failed, 1, msg) != TH_OK && status == TH_OK)
        status = th_plugin_fail(err, TH_ERR_INTERNAL, "the processes' loads: %s", msg);
    if (status == TH_OK && failed)
        status = th_plugin_fail(err, TH_ERR_INTERNAL,
                                "another process could not load its share of the tensor");
    if (status == TH_OK)
        status = set_layout(group, N, t->dims, shares, err);
    free(shares);
    return status;
}
