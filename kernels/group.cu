/* A run over several devices (th_gpu.h, thg_group): G communicator ranks,
 * each a thg_context holding its share of every mode's copy, and the
 * collectives of comm.cuh between them.
 *
 * Per mode n, every rank:
 *   1. computes the MTTKRP of its share (rows [row_begin, row_end) of its
 *      share, the first and last partial when split with a neighbour);
 *   2. puts its split rows' partial sums in its block of the exchange
 *      buffer (one block per rank); an all-gather gives every rank every
 *      block, and each rank adds the other ranks' partials of the split
 *      rows it owns (in rank order: the same sum on any run);
 *   3. updates the rows it owns (A = M W over them), leaving its sums of
 *      the Gram, the inner products and the column maxima in its block of
 *      the exchange buffer; an all-gather of those sums and of the factor
 *      rows (each rank's owned rows) makes the factor whole again on every
 *      rank; every rank adds the sums in rank order and finishes the
 *      update: the same bits on every rank, so their column scales and
 *      solves agree.
 * Inside the sweep, steps 2 and 3 share one collective: the partial
 * update leaves out the split rows, whose partials travel with the sums
 * and the factor rows. The finish is then two kernels (als.cu): the fold,
 * on the rank's stream, computes those few rows (at most G - 1) from
 * their summed MTTKRP rows, lambda and the column scale (normalising the
 * factor in the rare case that asks for it): all that the next MTTKRP
 * reads; the Gram and the inner products follow on the side stream,
 * beside the next mode's MTTKRP, ahead of the next solve, which needs
 * them (the single-device sweep overlaps only the solve):
 *
 *   stream: mttkrp(n) --join-- update(n) collective(n) fold(n) --fork-- mttkrp(n+1) --join-- ...
 *   side:   finish(n-1) solve(n) ---/                         finish(n) solve(n+1) ---/
 *
 * A captured sweep ends with the next sweep's first MTTKRP run ahead
 * (thg_group::ahead), beside the last finish and the results copy; the
 * next sweep, if no factor changed, starts at the update:
 *
 *   stream: ... fold(N-1) mttkrp(0 of the next sweep, into ahead) --join--|
 *   side:       finish(N-1) results copy, results_ready ------------/
 *
 * One collective a mode: on small payloads each costs its latency, the
 * iteration's largest overhead over the MTTKRPs; between NCCL's devices the
 * factors and the exchange buffers are registered with the communicator
 * (thg_group_set_layout), so that it can be the direct exchange of
 * comm.cuh (on four H200s, 7-11 us a mode on the small factors, without
 * the entry barrier inside the sweep, against 20-35 for NCCL's
 * point-to-point sends). With the direct exchange, each rank's whole
 * sweep is captured once as a CUDA graph of its own (the ranks meet only
 * inside the exchange's kernels) and replayed: one launch a rank.
 * The code is written per rank (its kernels, then its part of each
 * collective), over the ranks this process drives, [first, last): every
 * rank, or, in a group across processes (thg_group_create_across), its
 * own alone, the other ranks being other processes' running the same
 * steps. One thread drives the group's local ranks. The sweep (its steps, its
 * graphs' capture and launch, the run-ahead) is group_sweep.cu's; what
 * the two files share, group_internal.cuh's. */
#include <string.h>

#include <new>

#include "group_internal.cuh"

namespace {

static_assert(THG_MAX_GROUP_RANKS == THG_MAX_COMM_RANKS, "one rank limit");
constexpr uint32_t kNoRow = THG_NO_ROW;
constexpr uint32_t kBoundaryThreads = 128;

/* The split rows' partials of a rank whose update does not copy them. */
__global__ void pack_boundary_kernel(const float *result, uint32_t R, uint32_t first,
                                     uint32_t last, float *slot)
{
    const uint32_t rows[2] = {first, last};
    thg_copy_split_rows(result, R, rows, slot, threadIdx.x, blockDim.x);
}

/* The other ranks' partial sums of the split rows this rank owns
 * (fold.partial_rows, fold.partials), added in rank order. */
__global__ void add_boundary_kernel(float *result, uint32_t R, thg_als_fold fold, uint32_t self,
                                    uint64_t own_begin, uint64_t own_end)
{
    for (uint32_t c = threadIdx.x; c < R; c += blockDim.x)
        for (uint32_t k = 0; k < fold.npartials; ++k) {
            const uint32_t row = fold.partial_rows[k];
            if (k / 2u == self || row == kNoRow || row < own_begin || row >= own_end)
                continue;
            result[(size_t)row * R + c] += thg_fold_partial(fold, k, R)[c];
        }
}


/* Rank q's handle of one registration, for each q, deregistered
 * together (collective) and cleared. */
void deregister_all(thg_group *g, void *(&handles)[THG_MAX_COMM_RANKS])
{
    bool any = false;
    for (uint32_t q = g->first; q < g->last; ++q)
        any = any || handles[q];
    if (!any)
        return;
    char ignored[160];
    thg_status st = thg_comm_begin(g->comm, ignored, sizeof ignored);
    for (uint32_t q = g->first; q < g->last && st == THG_OK; ++q)
        st = thg_comm_deregister(g->comm, q, handles[q], ignored, sizeof ignored);
    thg_comm_end(g->comm, ignored, sizeof ignored);
    for (void *&h : handles)
        h = nullptr;
}

/* Every rank's buffer of one kind (`bufs`, `bytes` each) registered
 * together (collective) into handles[q]. */
thg_status register_all(thg_group *g, void *const *bufs, size_t bytes,
                        void *(&handles)[THG_MAX_COMM_RANKS], char *err, size_t errlen)
{
    thg_status st = thg_comm_begin(g->comm, err, errlen);
    for (uint32_t q = g->first; q < g->last && st == THG_OK; ++q)
        st = thg_comm_register(g->comm, q, bufs[q], bytes, &handles[q], err, errlen);
    if (st != THG_OK) {
        char ignored[64];
        thg_comm_end(g->comm, ignored, sizeof ignored); /* close the group */
        return st;
    }
    return thg_comm_end(g->comm, err, errlen);
}

} // namespace

/* The sweep's graphs, which name the layout's buffers. */
void destroy_sweep_graphs(thg_group *g)
{
    for (auto &per_start : g->sweep_graphs)
        for (auto &per_norm : per_start)
            for (uint32_t q = g->first; q < g->last; ++q)
                if (per_norm[q]) {
                    cudaSetDevice(g->devices[q]);
                    cudaGraphExecDestroy(per_norm[q]);
                    per_norm[q] = nullptr;
                }
}

namespace {

/* Rows of mode 0's result that rank q holds, at least one (an allocation's). */
size_t ahead_rows(const thg_context *ctx)
{
    const size_t held = ctx->result_end[0] - ctx->result_begin[0];
    return held > 0 ? held : 1;
}

/* Bytes of the run-ahead's buffer before its stamps, and in all. */
size_t ahead_stamps_offset(const thg_context *ctx)
{
    return (sizeof(float) * (ahead_rows(ctx) + 1u) * ctx->rank + 7u) / 8u * 8u;
}
size_t ahead_bytes(const thg_context *ctx)
{
    return ahead_stamps_offset(ctx) + 2u * sizeof(unsigned long long);
}

} // namespace

unsigned long long *ahead_stamps(const thg_group *g, uint32_t q)
{
    return (unsigned long long *)((char *)g->ahead[q] + ahead_stamps_offset(g->ranks[q]));
}

/* Where rank q's run-ahead MTTKRP writes. */
thg_result_target ahead_target(const thg_group *g, uint32_t q)
{
    const thg_context *ctx = g->ranks[q];
    float *block = g->ahead[q];
    return {block - ctx->result_begin[0] * ctx->rank, block, block + ahead_rows(ctx) * ctx->rank};
}

/* The run-ahead MTTKRP no longer matches the next sweep's (a factor or
 * the layout changes): the next sweep computes its own. */
void drop_run_ahead(thg_group *g) { g->ahead_valid = false; }

namespace {

/* Deregisters the factors and the exchange buffers (before any rank frees
 * them), frees the exchange buffers and drops the sweep's graphs; first
 * waits for whatever the ranks still run (a run-ahead MTTKRP). */
void free_layout(thg_group *g)
{
    drop_run_ahead(g);
    for (uint32_t q = g->first; q < g->last; ++q)
        if (g->ranks[q] && cudaSetDevice(g->devices[q]) == cudaSuccess)
            cudaStreamSynchronize(g->ranks[q]->stream);
    destroy_sweep_graphs(g);
    for (uint32_t q = g->first; q < g->last; ++q)
        if (g->ahead[q]) {
            cudaSetDevice(g->devices[q]);
            cudaFree(g->ahead[q]);
            g->ahead[q] = nullptr;
        }
    for (auto &mode_handles : g->factor_handles)
        deregister_all(g, mode_handles);
    deregister_all(g, g->exchange_handles);
    for (uint32_t q = g->first; q < g->last; ++q) {
        thg_comm_free(g->comm, q, g->exchange[q]);
        g->exchange[q] = nullptr;
    }
    g->nmodes = 0;
    g->rank = 0;
}

thg_status alloc_factor(void *user, size_t bytes, void **ptr, char *err, size_t errlen)
{
    const thg_group::rank_of *r = (const thg_group::rank_of *)user;
    return thg_comm_alloc(r->comm, r->rank, bytes, ptr, err, errlen);
}

void free_factor(void *user, void *ptr)
{
    const thg_group::rank_of *r = (const thg_group::rank_of *)user;
    thg_comm_free(r->comm, r->rank, ptr);
}

/* Which half of the exchange buffer a mode's collectives use. */
uint32_t half_of(uint32_t mode) { return mode & 1u; }

/* Rank `holder`'s copy of the mode's half of the exchange buffer: G blocks. */
char *blocks_of(const thg_group *g, uint32_t holder, uint32_t mode)
{
    return g->exchange[holder] + g->block_offsets[half_of(mode)][0];
}

/* In rank `holder`'s copy of the mode's half, rank q's block. */
char *block_of(const thg_group *g, uint32_t holder, uint32_t q, uint32_t mode)
{
    return blocks_of(g, holder, mode) + q * g->block_bytes;
}

/* In rank `holder`'s copy of the mode's half, rank q's split-row partials
 * (2 x R floats). */
float *boundary_of(const thg_group *g, uint32_t holder, uint32_t q, uint32_t mode)
{
    return (float *)(block_of(g, holder, q, mode) + thg_als_acc_bytes(g->rank));
}

/* Rank q's scratch block of the fold (thg_fold_scratch_bytes), after the
 * halves of its exchange buffer. */
void *scratch_of(thg_group *g, uint32_t q) { return g->exchange[q] + g->scratch_offset; }

/* The mode's fold with rank `holder`'s copy of every rank's partials. */
thg_als_fold fold_on(thg_group *g, uint32_t mode, uint32_t holder)
{
    thg_als_fold fold = g->modes[mode].fold;
    fold.partials = boundary_of(g, holder, 0, mode);
    fold.partial_stride = (uint32_t)(g->block_bytes / sizeof(float));
    return fold;
}

} // namespace

/* A step that starts the mode (its MTTKRP, per mode or in the sweep):
 * its collectives' time replaces the last step's. */
void begin_mode_timing(thg_group *g, uint32_t mode)
{
    for (bool &timed : g->comm_timed[mode])
        timed = false;
    g->modes[mode].comm_seconds = 0.0;
}

/* Whether the mode's collective in the sweep stamps itself: the direct
 * exchange does, into the sweep's stamps (thg_sweep_comm_span), which the
 * sweep's results copy brings back with the MTTKRPs'. */
bool sweep_stamps_comm(const thg_group *g) { return thg_comm_is_direct(g->comm) != 0; }

/* Why the layout's sweep cannot run as one CUDA graph a rank (the note),
 * or nullptr when it can: where every collective in it is the direct
 * exchange (a kernel of ours on each rank, which a rank's graph holds like
 * any other; NCCL advises against capturing its own collectives over
 * several GPUs driven by one thread), so that every buffer it moves must
 * be registered. The graph replaces some 60 host calls a rank and their
 * launch gaps (kernels/DESIGN.md). */
const char *why_no_sweep_graphs(const thg_group *g)
{
    if (!lead(g)->use_graphs)
        return "off (TH_GPU_NO_GRAPHS)";
    if (!thg_comm_is_direct(g->comm))
        return "off (no direct exchange)";
    for (uint32_t q = g->first; q < g->last; ++q) {
        bool registered = g->exchange_handles[q] != nullptr;
        for (uint32_t m = 0; m < g->nmodes; ++m)
            registered = registered && g->factor_handles[m][q] != nullptr;
        if (!registered)
            return "off (a buffer not registered)";
    }
    return nullptr;
}

namespace {

/* The event before (edge 0) or after (edge 1) a collective, on every rank's
 * stream. */
thg_status record_comm_events(thg_group *g, uint32_t mode, collective which, int edge,
                              char *err, size_t errlen)
{
    for (uint32_t q = g->first; q < g->last; ++q) {
        THG_CUDA(cudaSetDevice(g->devices[q]));
        THG_CUDA(cudaEventRecord(g->comm_events[q][mode][which][edge], g->ranks[q]->stream));
    }
    return THG_OK;
}

/* In-place all-gathers in one group: for each k < n, the `offsets[k]`
 * blocks of every rank's bufs[k][q]. In the sweep, through the direct
 * exchange: timed by its own stamps, and without the entry barrier, since
 * what mode n's collective overwrites on another rank (its factor n
 * outside its own rows, the other ranks' blocks in the mode's half of the
 * exchange buffer) has no reader left there. Those readers are the
 * MTTKRPs of the other modes and the fold and finish of mode n - 2 (the
 * same half): for n > 0 each precedes that rank's arrival at mode n - 1's
 * collective, which this rank has passed; for n = 0 they precede the
 * previous call's return (a graphed sweep returns once every rank's
 * results_ready is reached, after its folds and finishes; what may still
 * run then, the MTTKRP of mode 0 run ahead, reads neither factor 0 nor the
 * exchange buffer; every other call returns with the ranks' streams
 * idle). Otherwise timed by events around it on every rank. */
thg_status gather_many(thg_group *g, uint32_t mode, collective which, uint32_t n,
                       void *const *const *bufs, const uint64_t *const *offsets, bool in_sweep,
                       char *err, size_t errlen)
{
    const bool stamped = in_sweep && sweep_stamps_comm(g);
    if (!stamped) {
        const thg_status recorded = record_comm_events(g, mode, which, 0, err, errlen);
        if (recorded != THG_OK)
            return recorded;
    }
    thg_status st = thg_comm_begin(g->comm, err, errlen);
    for (uint32_t q = g->first; q < g->last && st == THG_OK; ++q) {
        thg_gather parts[THG_MAX_COMM_GATHERS];
        for (uint32_t k = 0; k < n; ++k)
            parts[k] = {bufs[k][q], offsets[k]};
        thg_gather_rank_options options = {};
        if (stamped) {
            options.peers_done_reading = 1;
            options.span = thg_sweep_comm_span(g->ranks[q], mode);
        }
        st = thg_comm_all_gatherv_many(g->comm, q, parts, n, &options, g->ranks[q]->stream, err,
                                       errlen);
    }
    if (st != THG_OK) {
        char ignored[64];
        thg_comm_end(g->comm, ignored, sizeof ignored); /* close the group */
        return st;
    }
    st = thg_comm_end(g->comm, err, errlen);
    if (st != THG_OK || stamped)
        return st;
    st = record_comm_events(g, mode, which, 1, err, errlen);
    if (st == THG_OK)
        g->comm_timed[mode][which] = true;
    return st;
}

thg_status gather(thg_group *g, uint32_t mode, collective which, void *const *bufs,
                  const uint64_t *offsets, char *err, size_t errlen)
{
    return gather_many(g, mode, which, 1, &bufs, &offsets, false, err, errlen);
}

/* After the streams synchronised: the time the mode's events hold and no
 * one has read, the slowest rank's sum, added to comm_seconds. */
thg_status read_comm_events(thg_group *g, uint32_t mode, char *err, size_t errlen)
{
    bool any = false;
    for (bool timed : g->comm_timed[mode])
        any = any || timed;
    if (!any)
        return THG_OK;
    double slowest = 0.0;
    for (uint32_t q = g->first; q < g->last; ++q) {
        THG_CUDA(cudaSetDevice(g->devices[q]));
        double sum = 0.0;
        for (uint32_t c = 0; c < kCollectives; ++c) {
            if (!g->comm_timed[mode][c])
                continue;
            float ms = 0.0f;
            THG_CUDA(cudaEventElapsedTime(&ms, g->comm_events[q][mode][c][0],
                                          g->comm_events[q][mode][c][1]));
            sum += ms * 1e-3;
        }
        slowest = sum > slowest ? sum : slowest;
    }
    g->modes[mode].comm_seconds += slowest;
    for (bool &timed : g->comm_timed[mode])
        timed = false;
    return THG_OK;
}

} // namespace

/* Every rank's streams: the side stream too, which a sweep that failed
 * while enqueueing may have left working. */
thg_status sync_all(thg_group *g, char *err, size_t errlen)
{
    for (uint32_t q = g->first; q < g->last; ++q) {
        THG_CUDA(cudaSetDevice(g->devices[q]));
        THG_CUDA(cudaStreamSynchronize(g->ranks[q]->stream));
        THG_CUDA(cudaStreamSynchronize(g->ranks[q]->side_stream));
    }
    return THG_OK;
}

namespace {

thg_status check_loaded(const thg_group *g, uint32_t mode, char *err, size_t errlen)
{
    if (g->nmodes == 0)
        return thg_fail(err, errlen, THG_ERR_STATE, "no tensor loaded");
    return thg_check_mode(lead(g), mode, err, errlen);
}

/* Rank q's split rows' partials into its block of the exchange buffer. */
thg_status pack_split_rows(thg_group *g, uint32_t mode, uint32_t q, char *err, size_t errlen)
{
    const uint32_t *rows = g->modes[mode].fold.partial_rows;
    thg_context *ctx = g->ranks[q];
    pack_boundary_kernel<<<1, kBoundaryThreads, 0, ctx->stream>>>(
        ctx->results[mode], g->rank, rows[2 * q], rows[2 * q + 1], boundary_of(g, q, q, mode));
    THG_LAUNCHED();
    return THG_OK;
}

/* Step 1's end and step 2: every rank's MTTKRP is enqueued; its split
 * rows' partials are exchanged and added where they are owned. */
thg_status combine_split_rows(thg_group *g, uint32_t mode, char *err, size_t errlen)
{
    const uint32_t R = g->rank;
    const thg_group::mode_layout &l = g->modes[mode];
    for (uint32_t q = g->first; q < g->last; ++q) {
        THG_CUDA(cudaSetDevice(g->devices[q]));
        const thg_status st = pack_split_rows(g, mode, q, err, errlen);
        if (st != THG_OK)
            return st;
    }
    thg_status st = gather(g, mode, kBoundary, (void *const *)g->exchange,
                           g->block_offsets[half_of(mode)], err, errlen);
    if (st != THG_OK)
        return st;
    for (uint32_t q = g->first; q < g->last; ++q) {
        thg_context *ctx = g->ranks[q];
        THG_CUDA(cudaSetDevice(ctx->device));
        add_boundary_kernel<<<1, kBoundaryThreads, 0, ctx->stream>>>(
            ctx->results[mode], R, fold_on(g, mode, q), q, l.own[q], l.own[q + 1]);
        THG_LAUNCHED();
    }
    g->modes[mode].results_partial = false;
    return THG_OK;
}

/* The sweep's failure flag (its kernels return at once when it is set);
 * the per-mode update has none. */
const uint32_t *failed_flag(const thg_context *ctx, bool in_sweep)
{
    return in_sweep ? ctx->sweep.flags.failed : nullptr;
}

/* Step 3's first half on rank q (its device current), W already there:
 * the rank updates the rows it owns, leaving its sums in its block of the
 * exchange buffer. In the sweep (`in_sweep`: its failure flag) the split
 * rows are left to the fold, and their partials travel in the collective
 * that follows (step 2 folded in): the update's first block copies them,
 * or, for a rank with no rows to update, a kernel of their own; otherwise
 * the results' split rows are whole already (combine_split_rows). */
thg_status rank_update(thg_group *g, uint32_t q, uint32_t mode, bool in_sweep, char *err,
                       size_t errlen)
{
    const thg_group::mode_layout &l = g->modes[mode];
    thg_context *ctx = g->ranks[q];
    thg_als_part part;
    part.row_begin = in_sweep ? l.update_begin[q] : l.own[q];
    part.rows = (uint32_t)(l.own[q + 1] - part.row_begin);
    thg_als_acc_view(block_of(g, q, q, mode), g->rank, &part.acc);
    part.pack_slot = nullptr;
    part.pack_rows[0] = part.pack_rows[1] = kNoRow;
    if (in_sweep && part.rows > 0) {
        part.pack_slot = boundary_of(g, q, q, mode);
        part.pack_rows[0] = l.fold.partial_rows[2 * q];
        part.pack_rows[1] = l.fold.partial_rows[2 * q + 1];
    } else if (in_sweep) {
        const thg_status st = pack_split_rows(g, mode, q, err, errlen);
        if (st != THG_OK)
            return st;
    }
    return thg_launch_als(ctx, mode, nullptr, failed_flag(ctx, in_sweep), nullptr, nullptr,
                          &part, err, errlen);
}

} // namespace

/* Step 3's first half on every rank, then the one collective. */
thg_status update_and_gather(thg_group *g, uint32_t mode, bool in_sweep, char *err,
                             size_t errlen)
{
    for (uint32_t q = g->first; q < g->last; ++q) {
        THG_CUDA(cudaSetDevice(g->devices[q]));
        const thg_status st = rank_update(g, q, mode, in_sweep, err, errlen);
        if (st != THG_OK)
            return st;
    }
    void *factors[THG_MAX_COMM_RANKS];
    for (uint32_t q = g->first; q < g->last; ++q)
        factors[q] = g->ranks[q]->factors[mode];
    void *const *bufs[2] = {(void *const *)g->exchange, factors};
    const uint64_t *offsets[2] = {g->block_offsets[half_of(mode)],
                                  g->modes[mode].factor_offsets};
    return gather_many(g, mode, kParts, 2, bufs, offsets, in_sweep, err, errlen);
}

/* Step 3's second half on rank q's stream (its device current): the split
 * rows (in the sweep), lambda, the column scale and any normalisation: all
 * that the next MTTKRP reads of this factor. */
thg_status rank_fold(thg_group *g, uint32_t q, uint32_t mode, bool in_sweep, char *err,
                     size_t errlen)
{
    thg_context *ctx = g->ranks[q];
    const thg_als_fold fold = fold_on(g, mode, q);
    return thg_launch_als_fold(ctx, mode, blocks_of(g, q, mode), g->block_bytes, g->G,
                               in_sweep ? &fold : nullptr, scratch_of(g, q),
                               failed_flag(ctx, in_sweep), err, errlen);
}

namespace {

thg_status fold_rows(thg_group *g, uint32_t mode, bool in_sweep, char *err, size_t errlen)
{
    for (uint32_t q = g->first; q < g->last; ++q) {
        THG_CUDA(cudaSetDevice(g->devices[q]));
        const thg_status st = rank_fold(g, q, mode, in_sweep, err, errlen);
        if (st != THG_OK)
            return st;
    }
    return THG_OK;
}

} // namespace

/* Rank q's last step of mode `mode`'s update, after its fold on `stream`:
 * the normalised Gram and inner into `out` (the context's mapped slot when
 * nullptr), and in the sweep the Gram kept for the next solve. */
thg_status finish_rank(thg_group *g, uint32_t mode, uint32_t q, double *out, bool in_sweep,
                       cudaStream_t stream, char *err, size_t errlen)
{
    thg_context *ctx = g->ranks[q];
    return thg_launch_als_group_finish(
        ctx, mode, blocks_of(g, q, mode), g->block_bytes, g->G, q,
        in_sweep ? g->modes[mode].fold.nrows : 0u, scratch_of(g, q),
        out ? out : ctx->als_out_dev, failed_flag(ctx, in_sweep),
        in_sweep ? ctx->sweep.grams_dev + (size_t)mode * g->rank * g->rank : nullptr, stream,
        err, errlen);
}

namespace {

/* The local ranks' events: around each collective, the results' readiness,
 * and the sweep's span on the first local rank. */
thg_status create_events(thg_group *g, char *err, size_t errlen)
{
    for (uint32_t q = g->first; q < g->last; ++q) {
        THG_CUDA(cudaSetDevice(g->devices[q]));
        for (uint32_t m = 0; m < THG_MAX_MODES; ++m)
            for (uint32_t c = 0; c < kCollectives; ++c)
                for (uint32_t e = 0; e < 2; ++e)
                    THG_CUDA(cudaEventCreate(&g->comm_events[q][m][c][e]));
        THG_CUDA(cudaEventCreate(&g->results_ready[q])); /* timed: the sweep's end */
    }
    THG_CUDA(cudaSetDevice(g->devices[g->first]));
    THG_CUDA(cudaEventCreate(&g->sweep_start));
    THG_CUDA(cudaEventCreate(&g->sweep_stop));
    return THG_OK;
}

/* Both creates' last step: the group handed out, described by its
 * communicator, or destroyed with whatever of it exists. */
thg_status finish_create(thg_group *g, thg_status st, thg_group **out)
{
    if (st != THG_OK) {
        thg_group_destroy(g);
        return st;
    }
    snprintf(g->description, sizeof g->description, "%s", thg_comm_describe(g->comm));
    *out = g;
    return THG_OK;
}

} // namespace

extern "C" thg_status thg_group_create(const thg_config *config, const int *devices, uint32_t G,
                                       thg_group **out, char *err, size_t errlen)
{
    *out = nullptr;
    if (devices == nullptr || G < 2 || G > THG_MAX_COMM_RANKS)
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "a group takes 2 to %u ranks (%u given)", THG_MAX_COMM_RANKS, G);
    thg_group *g = new (std::nothrow) thg_group;
    if (!g)
        return thg_fail(err, errlen, THG_ERR_OUT_OF_MEMORY, "out of host memory");
    g->G = G;
    g->last = G;
    memcpy(g->devices, devices, sizeof(int) * G);
    thg_status st = THG_OK;
    for (uint32_t q = 0; q < G && st == THG_OK; ++q)
        st = thg_probe_device(devices[q], err, errlen);
    if (st == THG_OK)
        st = thg_comm_create(devices, G, 0, &g->comm, err, errlen);
    for (uint32_t q = 0; q < G && st == THG_OK; ++q) {
        thg_config c = *config;
        c.device = devices[q];
        st = thg_create(&c, &g->ranks[q], err, errlen);
        if (st == THG_OK) {
            g->allocators[q] = {g->comm, q};
            g->ranks[q]->factor_allocator = {alloc_factor, free_factor, &g->allocators[q]};
        }
    }
    if (st == THG_OK)
        st = create_events(g, err, errlen);
    return finish_create(g, st, out);
}

extern "C" thg_status thg_group_create_across(thg_context *ctx, thg_processes *processes,
                                              thg_group **out, char *err, size_t errlen)
{
    *out = nullptr;
    const uint32_t G = thg_processes_count(processes), rank = thg_processes_rank(processes);
    if (G < 2 || G > THG_MAX_COMM_RANKS)
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "a group across processes takes 2 to %u of them (%u joined)",
                        THG_MAX_COMM_RANKS, G);
    if (ctx->nmodes != 0 || ctx->processes != nullptr)
        return thg_fail(err, errlen, THG_ERR_STATE,
                        "a context joins a group across processes with no tensor loaded and "
                        "no sums over the processes attached");
    if (thg_processes_device(processes) != ctx->device)
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "the processes' communicator is on device %d, the context on %d",
                        thg_processes_device(processes), ctx->device);
    thg_group *g = new (std::nothrow) thg_group;
    if (!g)
        return thg_fail(err, errlen, THG_ERR_OUT_OF_MEMORY, "out of host memory");
    g->G = G;
    g->first = rank;
    g->last = rank + 1;
    g->owns_ranks = false;
    g->devices[rank] = ctx->device;
    thg_status st = thg_comm_create_across(ctx->device, rank, G,
                                           thg_processes_nccl_comm(processes), &g->comm, err,
                                           errlen);
    if (st == THG_OK) {
        g->ranks[rank] = ctx;
        g->allocators[rank] = {g->comm, rank};
        ctx->factor_allocator = {alloc_factor, free_factor, &g->allocators[rank]};
        st = create_events(g, err, errlen);
    }
    return finish_create(g, st, out);
}

extern "C" void thg_group_destroy(thg_group *g)
{
    if (!g)
        return;
    free_layout(g);
    for (uint32_t q = g->first; q < g->last; ++q) {
        if (cudaSetDevice(g->devices[q]) != cudaSuccess)
            continue;
        for (uint32_t m = 0; m < THG_MAX_MODES; ++m)
            for (uint32_t c = 0; c < kCollectives; ++c)
                for (uint32_t e = 0; e < 2; ++e)
                    if (g->comm_events[q][m][c][e])
                        cudaEventDestroy(g->comm_events[q][m][c][e]);
        if (g->results_ready[q])
            cudaEventDestroy(g->results_ready[q]);
    }
    if (cudaSetDevice(g->devices[g->first]) == cudaSuccess) {
        if (g->sweep_start)
            cudaEventDestroy(g->sweep_start);
        if (g->sweep_stop)
            cudaEventDestroy(g->sweep_stop);
    }
    for (uint32_t q = g->first; q < g->last; ++q) {
        thg_context *ctx = g->ranks[q];
        if (g->owns_ranks) {
            thg_destroy(ctx);
        } else if (ctx) {
            /* The adopted context leaves without its tensor, whose factors
             * came from this group's communicator. */
            thg_unload(ctx);
            ctx->factor_allocator = thg_device_allocator;
        }
    }
    thg_comm_destroy(g->comm);
    delete g;
}

extern "C" void thg_group_unload(thg_group *g)
{
    if (g)
        free_layout(g);
}

extern "C" uint32_t thg_group_size(const thg_group *g) { return g->G; }

extern "C" uint32_t thg_group_local_ranks(const thg_group *g, uint32_t *first)
{
    *first = g->first;
    return g->last - g->first;
}

extern "C" thg_context *thg_group_rank(thg_group *g, uint32_t rank)
{
    return rank < g->G ? g->ranks[rank] : nullptr;
}

extern "C" const char *thg_group_describe(const thg_group *g) { return g->description; }

extern "C" const char *thg_group_graphs(const thg_group *g) { return g->graphs_note; }

extern "C" thg_status thg_group_set_layout(thg_group *g, const thg_group_mode *modes,
                                           char *err, size_t errlen)
{
    free_layout(g);
    const thg_context *first = lead(g);
    const uint32_t N = first->nmodes, R = first->rank;
    if (N == 0)
        return thg_fail(err, errlen, THG_ERR_STATE, "no tensor loaded on rank %u", g->first);
    for (uint32_t q = g->first + 1; q < g->last; ++q) {
        const thg_context *c = g->ranks[q];
        if (c->nmodes != N || c->rank != R || memcmp(c->dims, first->dims, sizeof c->dims) != 0)
            return thg_fail(err, errlen, THG_ERR_STATE,
                            "rank %u holds another tensor shape or rank than rank 0", q);
    }
    for (uint32_t m = 0; m < N; ++m) {
        thg_group::mode_layout &l = g->modes[m];
        memset(&l, 0, sizeof l);
        for (uint32_t q = 0; q <= g->G; ++q) {
            l.own[q] = modes[m].own[q];
            if (l.own[q] > first->dims[m] || (q > 0 && l.own[q] < l.own[q - 1]) ||
                (q == 0 && l.own[0] != 0) || (q == g->G && l.own[q] != first->dims[m]))
                return thg_fail(err, errlen, THG_ERR_INVALID,
                                "mode %u: owned rows are not consecutive ranges of its %u rows",
                                m, first->dims[m]);
            l.factor_offsets[q] = l.own[q] * R * sizeof(float);
        }
        l.fold.npartials = 2 * g->G;
        for (uint32_t q = 0; q < g->G; ++q) {
            const thg_context *c = g->ranks[q]; /* nullptr: another process's rank */
            /* A rank owns a split row only as its first: the earlier ranks'
             * shares end in it. */
            const uint32_t first = modes[m].split_rows[2 * q];
            const bool owns_split = first != kNoRow && first == l.own[q] && l.own[q] < l.own[q + 1];
            l.update_begin[q] = l.own[q] + (owns_split ? 1u : 0u);
            if (owns_split)
                l.fold.rows[l.fold.nrows++] = first;
            if (c && l.own[q] < l.own[q + 1] &&
                (l.own[q] < c->result_begin[m] || l.own[q + 1] > c->result_end[m]))
                return thg_fail(err, errlen, THG_ERR_INVALID,
                                "mode %u: rank %u owns rows its result does not hold", m, q);
            for (uint32_t b = 0; b < 2; ++b) {
                const uint32_t row = modes[m].split_rows[2 * q + b];
                if (c && row != kNoRow && (row < c->result_begin[m] || row >= c->result_end[m]))
                    return thg_fail(err, errlen, THG_ERR_INVALID,
                                    "mode %u: rank %u's split row %u is outside its result", m,
                                    q, row);
                l.fold.partial_rows[2 * q + b] = row;
            }
        }
    }
    g->block_bytes = (thg_als_acc_bytes(R) + 2u * R * sizeof(float) + 15u) / 16u * 16u;
    for (uint32_t h = 0; h < 2; ++h)
        for (uint32_t q = 0; q <= g->G; ++q)
            g->block_offsets[h][q] = (uint64_t)(h * g->G + q) * g->block_bytes;
    g->scratch_offset = g->block_offsets[1][g->G];
    const size_t exchange_bytes = g->scratch_offset + thg_fold_scratch_bytes(R);
    thg_status st = THG_OK;
    for (uint32_t q = g->first; q < g->last && st == THG_OK; ++q) {
        st = thg_comm_alloc(g->comm, q, exchange_bytes, (void **)&g->exchange[q], err, errlen);
        /* The finishing kernel re-zeroes a rank's sums after reading them. */
        if (st == THG_OK && cudaMemset(g->exchange[q], 0, exchange_bytes) != cudaSuccess)
            st = thg_fail(err, errlen, THG_ERR_DEVICE, "cannot zero rank %u's exchange buffer",
                          q);
    }
    /* Every rank's buffers of a kind together (registration is collective,
     * and NCCL takes a transfer's buffers registered on every rank or on
     * none): a failure leaves no layout, free_layout undoing the rest. */
    if (st == THG_OK)
        st = register_all(g, (void *const *)g->exchange, exchange_bytes, g->exchange_handles,
                          err, errlen);
    for (uint32_t m = 0; m < N && st == THG_OK; ++m) {
        void *factors[THG_MAX_COMM_RANKS];
        for (uint32_t q = g->first; q < g->last; ++q)
            factors[q] = g->ranks[q]->factors[m];
        st = register_all(g, factors, sizeof(float) * first->dims[m] * R, g->factor_handles[m],
                          err, errlen);
    }
    for (uint32_t q = g->first; q < g->last && st == THG_OK; ++q) {
        cudaError_t e = cudaSetDevice(g->devices[q]);
        if (e == cudaSuccess)
            e = cudaMalloc(&g->ahead[q], ahead_bytes(g->ranks[q]));
        if (e != cudaSuccess)
            st = thg_cuda_fail(err, errlen, e, "cudaMalloc (the run-ahead result)", __FILE__,
                               __LINE__);
    }
    if (st != THG_OK) {
        free_layout(g);
        return st;
    }
    g->nmodes = N;
    g->rank = R;
    g->last_sweep_seconds = -1.0;
    if (!g->graphs_failed) { /* a failed capture's note stays */
        const char *why = why_no_sweep_graphs(g);
        snprintf(g->graphs_note, sizeof g->graphs_note, "%s", why ? why : "on");
    }
    return THG_OK;
}

extern "C" thg_status thg_group_set_factor(thg_group *g, uint32_t mode, const double *data,
                                           char *err, size_t errlen)
{
    thg_status st = check_loaded(g, mode, err, errlen);
    if (st == THG_OK)
        drop_run_ahead(g);
    for (uint32_t q = g->first; q < g->last && st == THG_OK; ++q)
        st = thg_set_factor(g->ranks[q], mode, data, err, errlen);
    return st;
}

extern "C" thg_status thg_group_get_factor(thg_group *g, uint32_t mode, double *data, char *err,
                                           size_t errlen)
{
    const thg_status st = check_loaded(g, mode, err, errlen);
    if (st != THG_OK)
        return st;
    return thg_get_factor(lead(g), mode, data, err, errlen); /* every rank holds it whole */
}

extern "C" thg_status thg_group_init_factors(thg_group *g, uint64_t seed, double *const *grams,
                                             char *err, size_t errlen)
{
    if (g->nmodes == 0)
        return thg_fail(err, errlen, THG_ERR_STATE, "no tensor loaded");
    drop_run_ahead(g);
    /* The same counter-based values on every rank: no exchange. The first
     * local rank's Grams last, so they are the ones returned (all are
     * equal). */
    for (uint32_t q = g->last; q-- > g->first;) {
        const thg_status st = thg_init_factors(g->ranks[q], seed, grams, err, errlen);
        if (st != THG_OK)
            return st;
    }
    return THG_OK;
}

extern "C" thg_status thg_group_mttkrp(thg_group *g, uint32_t mode, char *err, size_t errlen)
{
    thg_status st = check_loaded(g, mode, err, errlen);
    if (st == THG_OK)
        begin_mode_timing(g, mode);
    for (uint32_t q = g->first; q < g->last && st == THG_OK; ++q) {
        thg_context *ctx = g->ranks[q];
        const cudaError_t e = cudaSetDevice(ctx->device);
        if (e != cudaSuccess)
            return thg_cuda_fail(err, errlen, e, "cudaSetDevice", __FILE__, __LINE__);
        st = thg_enqueue_mttkrp(ctx, mode, cudaEventRecordDefault, err, errlen);
    }
    if (st == THG_OK)
        st = combine_split_rows(g, mode, err, errlen);
    const thg_status synced = sync_all(g, err, errlen);
    if (st != THG_OK)
        return st;
    if (synced != THG_OK)
        return synced;
    double slowest = 0.0;
    for (uint32_t q = g->first; q < g->last; ++q) {
        thg_mode_copy &copy = g->ranks[q]->copies[mode];
        THG_CUDA(cudaSetDevice(g->devices[q]));
        float ms = 0.0f;
        THG_CUDA(cudaEventElapsedTime(&ms, copy.start, copy.stop));
        copy.last_seconds = ms * 1e-3;
        copy.timing_pending = 0;
        copy.has_result = 1;
        slowest = copy.last_seconds > slowest ? copy.last_seconds : slowest;
    }
    g->modes[mode].mttkrp_seconds = slowest;
    return THG_OK;
}

extern "C" thg_status thg_group_get_result(thg_group *g, uint32_t mode, double *data, char *err,
                                           size_t errlen)
{
    thg_status st = check_loaded(g, mode, err, errlen);
    if (st != THG_OK)
        return st;
    if (!lead(g)->copies[mode].has_result)
        return thg_fail(err, errlen, THG_ERR_STATE, "no MTTKRP result for mode %u yet", mode);
    if (g->modes[mode].results_partial) {
        st = combine_split_rows(g, mode, err, errlen);
        const thg_status synced = sync_all(g, err, errlen);
        if (st != THG_OK || synced != THG_OK)
            return st != THG_OK ? st : synced;
    }
    const uint32_t R = g->rank;
    const thg_group::mode_layout &l = g->modes[mode];
    /* Each rank's owned rows, which hold the whole sums. */
    for (uint32_t q = g->first; q < g->last && st == THG_OK; ++q) {
        thg_context *ctx = g->ranks[q];
        const uint64_t begin = l.own[q], rows = l.own[q + 1] - l.own[q];
        if (rows == 0)
            continue;
        THG_CUDA(cudaSetDevice(ctx->device));
        const thg_mode_copy &copy = ctx->copies[mode];
        st = thg_download_matrix(ctx, data + begin * R, ctx->results[mode] + begin * R, rows,
                                 ctx->result_scale + (size_t)mode * R,
                                 copy.has_empty_rows ? copy.row_present : nullptr, begin, err,
                                 errlen);
    }
    return st;
}

extern "C" thg_status thg_group_als_update(thg_group *g, uint32_t mode, const double *w,
                                           int use_max_norm, double *lambda, double *gram,
                                           double *inner, char *err, size_t errlen)
{
    thg_status st = check_loaded(g, mode, err, errlen);
    if (st == THG_OK)
        drop_run_ahead(g);
    for (uint32_t q = g->first; q < g->last && st == THG_OK; ++q)
        st = thg_als_stage(g->ranks[q], mode, w, use_max_norm, err, errlen);
    if (st != THG_OK)
        return st;
    if (g->modes[mode].results_partial) {
        st = combine_split_rows(g, mode, err, errlen);
        if (st != THG_OK)
            return st;
    }
    for (uint32_t q = g->first; q < g->last; ++q) {
        thg_context *ctx = g->ranks[q];
        THG_CUDA(cudaSetDevice(ctx->device));
        THG_CUDA(cudaMemcpyAsync(ctx->als_w, ctx->als_w_host, thg_als_w_bytes(ctx->rank),
                                 cudaMemcpyHostToDevice, ctx->stream));
    }
    st = update_and_gather(g, mode, false, err, errlen);
    if (st == THG_OK)
        st = fold_rows(g, mode, false, err, errlen);
    for (uint32_t q = g->first; q < g->last && st == THG_OK; ++q) {
        THG_CUDA(cudaSetDevice(g->devices[q]));
        st = finish_rank(g, mode, q, nullptr, false, g->ranks[q]->stream, err, errlen);
    }
    /* Also on failure, so no staging buffer is rewritten under a pending copy. */
    const thg_status synced = sync_all(g, err, errlen);
    if (st != THG_OK)
        return st;
    if (synced != THG_OK)
        return synced;
    thg_als_read_out(lead(g), lambda, gram, inner);
    return THG_OK;
}
extern "C" thg_status thg_group_get_mode_stats(thg_group *g, uint32_t mode,
                                               thg_group_mode_stats *stats, char *err,
                                               size_t errlen)
{
    thg_status st = check_loaded(g, mode, err, errlen);
    if (st == THG_OK)
        st = read_comm_events(g, mode, err, errlen);
    if (st != THG_OK)
        return st;
    memset(stats, 0, sizeof *stats);
    for (uint32_t q = 0; q < g->G; ++q) {
        stats->scheme[q] = -1;
        stats->rank_mttkrp_seconds[q] = -1.0;
    }
    for (uint32_t q = g->first; q < g->last; ++q) {
        thg_mode_stats s;
        st = thg_get_mode_stats(g->ranks[q], mode, &s, err, errlen);
        if (st != THG_OK)
            return st;
        stats->scheme[q] = s.scheme;
        stats->rank_mttkrp_seconds[q] = s.last_mttkrp_seconds;
        if (q == g->first)
            stats->rank0 = s;
    }
    const bool ran = lead(g)->copies[mode].has_result;
    stats->last_mttkrp_seconds = ran ? g->modes[mode].mttkrp_seconds : -1.0;
    stats->last_comm_seconds = ran ? g->modes[mode].comm_seconds : -1.0;
    return THG_OK;
}

extern "C" double thg_group_last_sweep_seconds(const thg_group *g)
{
    return g->last_sweep_seconds;
}
