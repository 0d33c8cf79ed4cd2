/* A whole CP-ALS iteration on the device (the ABI's als_sweep): every
 * mode's MTTKRP, R x R solve and factor update as one CUDA graph, one
 * launch and one synchronisation per iteration.
 *
 * Why (kernels/DESIGN.md): the per-mode path costs two host round
 * trips per mode, because the host builds each W from the Grams the
 * previous update returned. Here the Grams stay on the device (grams_dev,
 * refreshed by each update's last block) and the solve runs on a side
 * stream beside the mode's MTTKRP:
 *
 *   stream:  [zero] --fork-- mttkrp(0) --join-- gemm(0) --fork-- scale(0) mttkrp(1) ... copy
 *   side:           solve(0) -------/                   solve(1) ----------...
 *
 * solve(n) needs only the Grams, so it overlaps the MTTKRP of mode n; the
 * update of mode n waits for both. The MTTKRP keeps to one block an SM
 * (mttkrp_impl.cuh, one_block_smem), so that no two of its partitions share an
 * SM while the solve holds one.
 *
 * The MTTKRPs inside have no event records around them (two graph nodes
 * each: ~5 us a mode on an H200, more than the MTTKRP of a small mode,
 * kernels/DESIGN.md): the kernels stamp their own span with the GPU's
 * global timer, and get_mode_info() reports that.
 *
 * A solve that breaks down (Cholesky pivot below the host's threshold)
 * sets a device flag that turns every later solve, update and scale of
 * the sweep into an early return, and writes the mode into mapped host
 * memory: the host finishes that iteration with its pseudo-inverse. The
 * MTTKRPs after it still run (their results are
 * recomputed by the host's per-mode path); a breakdown is rare and that
 * waste does not matter.
 *
 * The regularised and constrained sweep (ABI 1.6) is the same graph with
 * two changes: every solve is of V + ridge I, and a mode updated by
 * coordinate descent (nonnegative, or with an l1 weight) has no solve:
 * after its MTTKRP come the nonnegative update's passes (nonneg.cu), V
 * built from grams_dev inside them, then the update's epilogue into the
 * mode's slot and grams_dev, all on the stream. A graph holds a fixed
 * sequence, so every pass is launched; those after the stopping test
 * return at once. Its graphs are captured per
 * setting and dropped when the settings change. */
#include <string.h>

#include <tensorhost/plugin.h>

#include "thg_internal.cuh"

namespace {

size_t slot_doubles(uint32_t R) { return (size_t)R * R + 2u * R; }

/* The device block: grams [nmodes][R*R] doubles | slots [nmodes][slot] doubles |
 * stamps [nmodes][2] u64 (the MTTKRPs') then [nmodes][2] u64 (the
 * collectives' of a group's sweep, thg_sweep_comm_span) | failed u32. The
 * slots and stamps travel to the host in one copy; the stamps and the
 * failed word are zeroed by one memset. */
struct sweep_layout {
    size_t grams, slots, stamps, failed, total;
};

sweep_layout layout_for(uint32_t nmodes, uint32_t R)
{
    sweep_layout l;
    l.grams = 0;
    l.slots = l.grams + sizeof(double) * nmodes * (size_t)R * R;
    l.stamps = l.slots + sizeof(double) * nmodes * slot_doubles(R);
    l.failed = l.stamps + sizeof(unsigned long long) * 4u * nmodes;
    l.total = l.failed + 8;
    return l;
}

/* What one copy brings back: the slots and the stamps. */
size_t results_bytes(uint32_t nmodes, uint32_t R)
{
    const sweep_layout l = layout_for(nmodes, R);
    return l.failed - l.slots;
}

/* In a run of several processes (thg_attach_processes): the mode's Gram and
 * slot (lambda, Gram, inner) as rank 0 computed them, on every process,
 * before the next mode's solve reads them (fork_event again after). The
 * update's sums are atomics, so each process's last bits differ; with the
 * same Grams every process makes the same solves, breaks down at the same
 * mode or none, and returns the same fit, so that no process's decisions
 * (and the collectives that follow them) part from another's. */
static thg_status share_mode(thg_context *ctx, uint32_t mode, char *err, size_t errlen)
{
    if (ctx->processes == nullptr)
        return THG_OK;
    thg_sweep_state &sw = ctx->sweep;
    const size_t RR = (size_t)ctx->rank * ctx->rank;
    thg_status st = thg_processes_share(ctx->processes, sw.grams_dev + mode * RR,
                                        sizeof(double) * RR, ctx->stream, err, errlen);
    if (st == THG_OK)
        st = thg_processes_share(ctx->processes, sw.out_dev + mode * slot_doubles(ctx->rank),
                                 sizeof(double) * slot_doubles(ctx->rank), ctx->stream, err,
                                 errlen);
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaEventRecord(ctx->fork_event, ctx->stream));
    return THG_OK;
}

/* arg: bit 0 the max-norm, bit 1 the regularised sweep (sw.reg). */
thg_status enqueue_sweep(thg_context *ctx, uint32_t arg, unsigned record_flags, char *err,
                         size_t errlen)
{
    (void)record_flags; /* no event records inside: the kernels stamp themselves */
    const uint32_t use_max_norm = arg & 1u;
    const bool regularised = (arg & 2u) != 0;
    thg_sweep_state &sw = ctx->sweep;
    const uint32_t R = ctx->rank;
    const size_t RR = (size_t)R * R;
    /* The stamps and the failure flag in one memset; the first solve forks
     * after it. */
    const sweep_layout l = layout_for(ctx->nmodes, R);
    sw.stamps_zeroed = 0;
    THG_CUDA(cudaMemsetAsync(sw.stamps_dev, 0, l.total - l.stamps, ctx->stream));
    THG_CUDA(cudaEventRecord(ctx->fork_event, ctx->stream));
    thg_status st = THG_OK;
    for (uint32_t mode = 0; mode < ctx->nmodes; ++mode) {
        const uint32_t coordinate = regularised ? sw.reg.coordinate[mode] : 0u;
        if (coordinate) {
            /* Coordinate descent: no solve; the passes start from the
             * factor times the weights of the mode updated before it (its
             * slot's lambda; the host's for the first mode). */
            st = thg_launch_mttkrp(ctx, mode, sw.stamps_dev + 2u * mode, 1, err, errlen);
            if (st != THG_OK)
                return st;
            thg_nonneg_sweep_mode m;
            m.sweeps = sw.reg.sweeps[mode];
            m.tolerance = sw.reg.tolerance;
            m.ridge = sw.reg.ridge;
            m.l1 = sw.reg.l1[mode];
            m.nonneg = coordinate == 1u;
            m.use_max_norm = (int)use_max_norm;
            const double *scale =
                mode == 0 ? thg_nonneg_sweep_scale(ctx) : thg_sweep_out_slot(ctx, mode - 1u);
            st = thg_nonneg_enqueue_sweep_mode(ctx, mode, scale, m,
                                               sw.out_dev + mode * slot_doubles(R),
                                               sw.grams_dev + mode * RR, ctx->fork_event, err,
                                               errlen);
            if (st != THG_OK)
                return st;
            st = share_mode(ctx, mode, err, errlen);
            if (st != THG_OK)
                return st;
            continue;
        }
        /* fork_event was last recorded after the previous mode's Gram. */
        THG_CUDA(cudaStreamWaitEvent(ctx->side_stream, ctx->fork_event, 0));
        st = thg_launch_solve(ctx, mode, (int)use_max_norm, regularised ? sw.reg.ridge : 0.0,
                              ctx->side_stream, err, errlen);
        if (st != THG_OK)
            return st;
        THG_CUDA(cudaEventRecord(ctx->join_event, ctx->side_stream));
        st = thg_launch_mttkrp(ctx, mode, sw.stamps_dev + 2u * mode, 1, err, errlen);
        if (st != THG_OK)
            return st;
        THG_CUDA(cudaStreamWaitEvent(ctx->stream, ctx->join_event, 0));
        st = thg_launch_als(ctx, mode, sw.out_dev + mode * slot_doubles(R), sw.flags.failed,
                            sw.grams_dev + mode * RR, ctx->fork_event, nullptr, err, errlen);
        if (st == THG_OK)
            st = share_mode(ctx, mode, err, errlen);
        if (st != THG_OK)
            return st;
    }
    return thg_sweep_enqueue_results(ctx, 0, ctx->stream, err, errlen);
}

/* The MTTKRPs' stamps zeroed on `stream`. */
thg_status enqueue_stamps_zero(thg_context *ctx, cudaStream_t stream, char *err, size_t errlen)
{
    const sweep_layout l = layout_for(ctx->nmodes, ctx->rank);
    THG_CUDA(cudaMemsetAsync(ctx->sweep.stamps_dev, 0, l.failed - l.stamps, stream));
    return THG_OK;
}

} // namespace

thg_status thg_sweep_zero_stamps(thg_context *ctx, char *err, size_t errlen)
{
    if (!ctx->sweep.stamps_zeroed) {
        const thg_status st = enqueue_stamps_zero(ctx, ctx->stream, err, errlen);
        if (st != THG_OK)
            return st;
    }
    ctx->sweep.stamps_zeroed = 0;
    return THG_OK;
}

thg_status thg_sweep_zero_flag(thg_context *ctx, cudaStream_t stream, char *err, size_t errlen)
{
    const sweep_layout l = layout_for(ctx->nmodes, ctx->rank);
    THG_CUDA(cudaMemsetAsync(ctx->sweep.flags.failed, 0, l.total - l.failed, stream));
    return THG_OK;
}

thg_status thg_sweep_enqueue_results(thg_context *ctx, int rezero, cudaStream_t stream,
                                     char *err, size_t errlen)
{
    /* Every mode's results in one copy: the updates write device memory,
     * not mapped host memory (no PCIe writes and system fence per mode). */
    THG_CUDA(cudaMemcpyAsync(ctx->sweep.out_host, ctx->sweep.out_dev,
                             results_bytes(ctx->nmodes, ctx->rank), cudaMemcpyDeviceToHost,
                             stream));
    if (rezero) {
        const thg_status st = enqueue_stamps_zero(ctx, stream, err, errlen);
        if (st != THG_OK)
            return st;
        ctx->sweep.stamps_zeroed = 1;
    }
    return THG_OK;
}

/* A span's seconds (thg_stamp_start/end), 0 when nothing stamped it. */
static double span_seconds(const unsigned long long *span)
{
    const unsigned long long first = ~span[0], last = span[1];
    return last >= first ? (double)(last - first) * 1e-9 : 0.0;
}

unsigned long long *thg_sweep_mttkrp_span(thg_context *ctx, uint32_t mode)
{
    return ctx->sweep.stamps_dev + 2u * mode;
}

unsigned long long *thg_sweep_comm_span(thg_context *ctx, uint32_t mode)
{
    return ctx->sweep.stamps_dev + 2u * (ctx->nmodes + mode);
}

double thg_sweep_comm_seconds(const thg_context *ctx, uint32_t mode)
{
    return span_seconds(ctx->sweep.stamps_host + 2u * (ctx->nmodes + mode));
}

double *thg_sweep_out_slot(thg_context *ctx, uint32_t mode)
{
    return ctx->sweep.out_dev + mode * slot_doubles(ctx->rank);
}

int thg_sweep_grams_current(const thg_context *ctx, const double *const *grams)
{
    const thg_sweep_state &sw = ctx->sweep;
    const size_t RR = (size_t)ctx->rank * ctx->rank;
    int same = sw.mirror_valid;
    for (uint32_t m = 0; same && m < ctx->nmodes; ++m)
        same = memcmp(sw.grams_mirror + m * RR, grams[m], sizeof(double) * RR) == 0;
    return same;
}

thg_status thg_sweep_copy_grams(thg_context *ctx, const double *const *grams,
                                cudaStream_t stream, char *err, size_t errlen)
{
    thg_sweep_state &sw = ctx->sweep;
    const size_t RR = (size_t)ctx->rank * ctx->rank;
    for (uint32_t m = 0; m < ctx->nmodes; ++m)
        memcpy(sw.grams_mirror + m * RR, grams[m], sizeof(double) * RR);
    /* The mirror stays unchanged until the sweep's synchronisation, so the
     * asynchronous copy reads stable memory. */
    THG_CUDA(cudaMemcpyAsync(sw.grams_dev, sw.grams_mirror, sizeof(double) * ctx->nmodes * RR,
                             cudaMemcpyHostToDevice, stream));
    sw.mirror_valid = 1;
    return THG_OK;
}

/* The host's Grams onto the device, unless it holds them already. */
static thg_status sync_grams(thg_context *ctx, const double *const *grams, cudaStream_t stream,
                             char *err, size_t errlen)
{
    if (thg_sweep_grams_current(ctx, grams))
        return THG_OK;
    return thg_sweep_copy_grams(ctx, grams, stream, err, errlen);
}

uint64_t thg_sweep_bytes(uint32_t nmodes, uint32_t rank) { return layout_for(nmodes, rank).total; }

thg_status thg_sweep_alloc(thg_context *ctx, char *err, size_t errlen)
{
    thg_sweep_state &sw = ctx->sweep;
    const uint32_t R = ctx->rank;
    const size_t RR = (size_t)R * R;
    const sweep_layout l = layout_for(ctx->nmodes, R);
    THG_CUDA(cudaMalloc(&sw.dev_block, l.total));
    char *base = (char *)sw.dev_block;
    sw.grams_dev = (double *)(base + l.grams);
    sw.out_dev = (double *)(base + l.slots);
    sw.stamps_dev = (unsigned long long *)(base + l.stamps);
    sw.flags.failed = (uint32_t *)(base + l.failed);
    THG_CUDA(cudaMemsetAsync(sw.flags.failed, 0, sizeof(uint32_t), ctx->stream));
    THG_CUDA(cudaEventCreate(&sw.start));
    THG_CUDA(cudaEventCreate(&sw.stop));
    THG_CUDA(cudaHostAlloc(&sw.grams_mirror, sizeof(double) * ctx->nmodes * RR,
                           cudaHostAllocDefault));
    sw.mirror_valid = 0;
    sw.stamps_zeroed = 0;
    /* Pinned and mapped: the slots and stamps arrive by one copy at the end
     * of the sweep; the status word after them is written by a solve that
     * breaks down, straight from the device. */
    const size_t results = results_bytes(ctx->nmodes, R);
    THG_CUDA(cudaHostAlloc(&sw.out_host, results + sizeof(uint64_t), cudaHostAllocMapped));
    sw.stamps_host = (const unsigned long long *)((char *)sw.out_host + (l.stamps - l.slots));
    sw.status_host = (uint32_t *)((char *)sw.out_host + results);
    *sw.status_host = 0u;
    THG_CUDA(cudaHostGetDevicePointer(&sw.flags.host_status, sw.status_host, 0));
    return THG_OK;
}

void thg_sweep_free(thg_context *ctx)
{
    thg_sweep_state &sw = ctx->sweep;
    for (cudaGraphExec_t &g : sw.graph)
        if (g)
            cudaGraphExecDestroy(g);
    for (cudaGraphExec_t &g : sw.reg_graph)
        if (g)
            cudaGraphExecDestroy(g);
    if (sw.start)
        cudaEventDestroy(sw.start);
    if (sw.stop)
        cudaEventDestroy(sw.stop);
    cudaFree(sw.dev_block);
    cudaFreeHost(sw.grams_mirror);
    cudaFreeHost(sw.out_host);
    memset(&sw, 0, sizeof(sw));
}

extern "C" uint32_t thg_sweep_reg_coordinate(const thg_sweep_reg *reg, uint32_t mode)
{
    if (!reg)
        return 0u;
    if (reg->constraints && reg->constraints[mode] == TH_CONSTRAINT_NONNEG)
        return 1u;
    return reg->l1 && reg->l1[mode] != 0.0 ? 2u : 0u;
}

extern "C" int thg_sweep_reg_active(const thg_sweep_reg *reg, uint32_t nmodes)
{
    if (!reg)
        return 0;
    int active = reg->ridge != 0.0;
    for (uint32_t m = 0; m < nmodes; ++m)
        active |= thg_sweep_reg_coordinate(reg, m) != 0u;
    return active;
}

/* sw.reg from `reg`; the captured graphs dropped when it changed. */
static void set_reg(thg_context *ctx, const thg_sweep_reg *reg)
{
    thg_sweep_state &sw = ctx->sweep;
    bool same = sw.reg.valid && sw.reg.ridge == reg->ridge &&
                sw.reg.tolerance == reg->hals_tolerance;
    for (uint32_t m = 0; m < ctx->nmodes; ++m) {
        const double l1 = reg->l1 ? reg->l1[m] : 0.0;
        const uint32_t coordinate = thg_sweep_reg_coordinate(reg, m);
        const uint32_t sweeps = reg->hals_mode_sweeps ? reg->hals_mode_sweeps[m] : reg->hals_sweeps;
        same = same && sw.reg.coordinate[m] == coordinate && sw.reg.l1[m] == l1 &&
               sw.reg.sweeps[m] == sweeps;
        sw.reg.coordinate[m] = coordinate;
        sw.reg.l1[m] = l1;
        sw.reg.sweeps[m] = sweeps;
    }
    sw.reg.ridge = reg->ridge;
    sw.reg.tolerance = reg->hals_tolerance;
    sw.reg.valid = 1;
    if (!same)
        for (cudaGraphExec_t &g : sw.reg_graph)
            if (g) {
                cudaGraphExecDestroy(g);
                g = nullptr;
            }
}

extern "C" thg_status thg_als_sweep(thg_context *ctx, double *const *grams, int use_max_norm,
                                    const thg_sweep_reg *reg, double *lambda, double *inner,
                                    uint32_t *modes_done, char *err, size_t errlen)
{
    *modes_done = 0;
    if (ctx->nmodes == 0)
        return thg_fail(err, errlen, THG_ERR_STATE, "no tensor loaded");
    THG_CUDA(cudaSetDevice(ctx->device));
    thg_sweep_state &sw = ctx->sweep;
    const int norm = use_max_norm ? 1 : 0;
    const bool regularised = thg_sweep_reg_active(reg, ctx->nmodes) != 0;
    if (regularised) {
        /* The passes' workspace before any capture (it allocates once). */
        const thg_status prep = thg_nonneg_prepare(ctx, err, errlen);
        if (prep != THG_OK)
            return prep;
        set_reg(ctx, reg);
    }

    thg_status st = sync_grams(ctx, grams, ctx->stream, err, errlen);
    if (st == THG_OK && regularised)
        st = thg_nonneg_stage_scale(ctx, reg->scale, err, errlen);
    /* The device has not started: a plain store is seen by the launch. */
    if (st == THG_OK)
        *(volatile uint32_t *)sw.status_host = 0u;
    /* The events sit outside the graph: the device time of all of it,
     * the results' copy included. */
    cudaError_t e = cudaSuccess;
    if (st == THG_OK && (e = cudaEventRecord(sw.start, ctx->stream)) != cudaSuccess)
        st = thg_cuda_fail(err, errlen, e, "cudaEventRecord(start)", __FILE__, __LINE__);
    if (st == THG_OK)
        st = regularised ? thg_run_sequence(ctx, (uint32_t)norm | 2u, enqueue_sweep,
                                            &sw.reg_graph[norm], err, errlen)
                         : thg_run_sequence(ctx, (uint32_t)norm, enqueue_sweep, &sw.graph[norm],
                                            err, errlen);
    if (st == THG_OK && (e = cudaEventRecord(sw.stop, ctx->stream)) != cudaSuccess)
        st = thg_cuda_fail(err, errlen, e, "cudaEventRecord(stop)", __FILE__, __LINE__);
    /* Also after a failure: the mirror must not change under a pending copy. */
    e = cudaStreamSynchronize(ctx->stream);
    if (st != THG_OK) {
        sw.mirror_valid = 0;
        return st;
    }
    if (e != cudaSuccess) {
        sw.mirror_valid = 0;
        THG_CUDA(e);
    }
    float sweep_ms = 0.0f;
    THG_CUDA(cudaEventElapsedTime(&sweep_ms, sw.start, sw.stop));
    sw.last_seconds = sweep_ms * 1e-3;
    thg_sweep_collect(ctx, grams, lambda, inner, modes_done);
    return THG_OK;
}

void thg_sweep_collect(thg_context *ctx, double *const *grams, double *lambda, double *inner,
                       uint32_t *modes_done)
{
    thg_sweep_state &sw = ctx->sweep;
    const uint32_t R = ctx->rank;
    const size_t RR = (size_t)R * R;
    for (uint32_t m = 0; m < ctx->nmodes; ++m) {
        thg_mode_copy &copy = ctx->copies[m];
        copy.has_result = 1;
        copy.timing_pending = 0; /* the events hold an earlier mttkrp() */
        copy.last_seconds = span_seconds(sw.stamps_host + 2u * m);
    }

    if (!grams) {
        sw.mirror_valid = 0;
        return;
    }
    const uint32_t status = *(volatile uint32_t *)sw.status_host;
    const uint32_t done = status == 0 ? ctx->nmodes : status - 1u;
    for (uint32_t m = 0; m < done; ++m) {
        const double *slot = sw.out_host + m * slot_doubles(R);
        memcpy(grams[m], slot + R, sizeof(double) * RR);
        /* grams_dev[m] holds the same doubles (the update's last block wrote both). */
        memcpy(sw.grams_mirror + m * RR, slot + R, sizeof(double) * RR);
    }
    if (done > 0) {
        const double *last = sw.out_host + (done - 1) * slot_doubles(R);
        memcpy(lambda, last, sizeof(double) * R);
        memcpy(inner, last + R + RR, sizeof(double) * R);
    }
    *modes_done = done;
}
