/* The sweep of a run over several devices (thg_group_als_sweep): every
 * rank's steps mode by mode, captured once as one CUDA graph a rank and
 * launched, or enqueued as stream launches where the graphs are off, the
 * run-ahead of the next sweep's first MTTKRP, and the wait for the
 * results. The group itself, its layout and the steps it shares with the
 * per-mode calls are group.cu's (group_internal.cuh); the design of both is
 * group.cu's opening comment. */
#include <string.h>

#include "group_internal.cuh"

namespace {

/* A sweep's steps for rank q (its device current) and a mode: the
 * MTTKRP; the side stream's work; the wait for it; (the update and the
 * collective, update_and_gather;) the fold.
 *
 * `captured`: the steps are being captured into the rank's graph
 * (run_group_sweep); what depends on the host's state at the call (the
 * stamps' zeroing, the host's Grams) is then left to launch_rank_sweep,
 * before each launch of the graph, and the side stream joins the capture
 * at the sweep's start. */

/* The ranks' MTTKRPs go first, each with as little before it as can be:
 * they start together (what one rank starts late, every rank waits for at
 * the mode's collective). After the first mode, the side stream has
 * zeroed what a scheme-2 MTTKRP adds to, beside the previous MTTKRP. */
thg_status sweep_mttkrp(thg_group *g, uint32_t q, uint32_t mode, bool captured, char *err,
                        size_t errlen)
{
    thg_context *ctx = g->ranks[q];
    thg_status st = mode == 0 && !captured ? thg_sweep_zero_stamps(ctx, err, errlen) : THG_OK;
    if (st == THG_OK)
        st = thg_launch_mttkrp(ctx, mode, ctx->sweep.stamps_dev + 2u * mode, mode == 0 ? 1 : 0,
                               err, errlen);
    return st;
}

/* On the side stream, after the previous mode's fold (the fork event,
 * recorded before this mode's MTTKRP): its finish, then this mode's solve
 * for W from the Grams, beside this mode's MTTKRP (as thg_als_sweep does),
 * then the next MTTKRP's result zeroed; before the first solve, the
 * failure flag zeroed and the host's Grams copied (when they changed),
 * after every rank's first MTTKRP. Every rank finishes and solves the same bits,
 * and so gets the same W. mode == nmodes: the last mode's finish, and in a
 * capture the results copy and results_ready. */
thg_status sweep_side(thg_group *g, uint32_t q, uint32_t mode, const double *const *grams,
                      int use_max_norm, bool captured, bool from_ahead, char *err,
                      size_t errlen)
{
    thg_context *ctx = g->ranks[q];
    thg_status st = THG_OK;
    if (mode == 0) {
        /* In a capture, the fork event marks the sweep's start. The
         * run-ahead's span (the previous sweep's, when this one takes its
         * result) goes where mode 0's MTTKRP stamps, and its stamps are
         * zeroed for this sweep's run-ahead. */
        if (captured) {
            THG_CUDA(cudaStreamWaitEvent(ctx->side_stream, ctx->fork_event, 0));
            if (from_ahead)
                THG_CUDA(cudaMemcpyAsync(thg_sweep_mttkrp_span(ctx, 0), ahead_stamps(g, q),
                                         2u * sizeof(unsigned long long),
                                         cudaMemcpyDeviceToDevice, ctx->side_stream));
            THG_CUDA(cudaMemsetAsync(ahead_stamps(g, q), 0, 2u * sizeof(unsigned long long),
                                     ctx->side_stream));
        }
        st = thg_sweep_zero_flag(ctx, ctx->side_stream, err, errlen);
        if (st == THG_OK && grams)
            st = thg_sweep_copy_grams(ctx, grams, ctx->side_stream, err, errlen);
    } else {
        THG_CUDA(cudaStreamWaitEvent(ctx->side_stream, ctx->fork_event, 0));
        st = finish_rank(g, mode - 1, q, thg_sweep_out_slot(ctx, mode - 1), true,
                         ctx->side_stream, err, errlen);
    }
    if (st == THG_OK && mode < g->nmodes)
        st = thg_launch_solve(ctx, mode, use_max_norm, 0.0, ctx->side_stream, err, errlen);
    if (st == THG_OK && mode + 1 < g->nmodes)
        st = thg_zero_mttkrp_result(ctx, mode + 1, ctx->side_stream, err, errlen);
    /* A captured sweep's results leave from here, beside the run-ahead. */
    if (st == THG_OK && mode == g->nmodes && captured) {
        st = thg_sweep_enqueue_results(ctx, 1, ctx->side_stream, err, errlen);
        if (st == THG_OK)
            THG_CUDA(cudaEventRecordWithFlags(g->results_ready[q], ctx->side_stream,
                                              cudaEventRecordExternal));
    }
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaEventRecord(ctx->join_event, ctx->side_stream));
    return THG_OK;
}

thg_status sweep_join(thg_group *g, uint32_t q, char *err, size_t errlen)
{
    THG_CUDA(cudaStreamWaitEvent(g->ranks[q]->stream, g->ranks[q]->join_event, 0));
    return THG_OK;
}

/* After the collective: the fold, then the side stream's finish and the
 * next solve (which overwrites W) may start. */
thg_status sweep_fold(thg_group *g, uint32_t q, uint32_t mode, char *err, size_t errlen)
{
    const thg_status st = rank_fold(g, q, mode, true, err, errlen);
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaEventRecord(g->ranks[q]->fork_event, g->ranks[q]->stream));
    return THG_OK;
}

/* Instead of rank q's first MTTKRP: the one the previous sweep ran ahead,
 * copied into the mode's result, where the update and mttkrp() results
 * read it (the run-ahead's buffer is rewritten at the sweep's end). */
thg_status take_run_ahead(thg_group *g, uint32_t q, char *err, size_t errlen)
{
    thg_context *ctx = g->ranks[q];
    const thg_result_target from = ahead_target(g, q), to = thg_result_of(ctx, 0);
    const size_t R = ctx->rank, held = ctx->result_end[0] - ctx->result_begin[0];
    if (held > 0)
        THG_CUDA(cudaMemcpyAsync(to.block, from.block, sizeof(float) * held * R,
                                 cudaMemcpyDeviceToDevice, ctx->stream));
    THG_CUDA(cudaMemcpyAsync(to.scale, from.scale, sizeof(float) * R, cudaMemcpyDeviceToDevice,
                             ctx->stream));
    return THG_OK;
}

/* The end of rank q's captured sweep, right after the last fold, beside
 * the side stream's finish and results copy: the next sweep's first
 * MTTKRP run ahead, its span stamped into the run-ahead's buffer. */
thg_status run_ahead(thg_group *g, uint32_t q, char *err, size_t errlen)
{
    return thg_launch_mttkrp_into(g->ranks[q], 0, ahead_target(g, q), ahead_stamps(g, q), 1,
                                  err, errlen);
}

/* The steps for every rank, mode by mode, each collective one group over
 * the ranks; grams: the host's Grams where the devices' differ, else
 * NULL (always in a capture). A captured sweep ends with the run-ahead;
 * `from_ahead`: it starts from the previous one's (captured only). */
thg_status enqueue_group_sweep(thg_group *g, const double *const *grams, int use_max_norm,
                               bool captured, bool from_ahead, char *err, size_t errlen)
{
    for (uint32_t mode = 0; mode <= g->nmodes; ++mode) {
        for (uint32_t q = g->first; q < g->last && mode < g->nmodes; ++q) {
            THG_CUDA(cudaSetDevice(g->devices[q]));
            if (mode == 0 && captured)
                THG_CUDA(cudaEventRecord(g->ranks[q]->fork_event, g->ranks[q]->stream));
            const thg_status st = mode == 0 && from_ahead
                                      ? take_run_ahead(g, q, err, errlen)
                                      : sweep_mttkrp(g, q, mode, captured, err, errlen);
            if (st != THG_OK)
                return st;
        }
        for (uint32_t q = g->first; q < g->last; ++q) {
            THG_CUDA(cudaSetDevice(g->devices[q]));
            thg_status st = sweep_side(g, q, mode, grams, use_max_norm, captured, from_ahead,
                                       err, errlen);
            if (st == THG_OK && mode == g->nmodes && captured)
                st = run_ahead(g, q, err, errlen);
            if (st == THG_OK)
                st = sweep_join(g, q, err, errlen);
            if (st == THG_OK && mode == g->nmodes && !captured)
                st = thg_sweep_enqueue_results(g->ranks[q], 1, g->ranks[q]->stream, err,
                                               errlen);
            if (st != THG_OK)
                return st;
        }
        if (mode == g->nmodes)
            break;
        thg_status st = update_and_gather(g, mode, true, err, errlen);
        for (uint32_t q = g->first; q < g->last && st == THG_OK; ++q) {
            THG_CUDA(cudaSetDevice(g->devices[q]));
            st = sweep_fold(g, q, mode, err, errlen);
        }
        if (st != THG_OK)
            return st;
    }
    return THG_OK;
}

/* Every rank's sweep captured into g->sweep_graphs[from_ahead][norm],
 * one graph a rank (each rank's stream captures its own steps: no step of
 * one rank waits on another's stream; they meet inside the direct
 * exchange). The capture runs nothing, but its steps mark the stamps as
 * re-zeroed: the flags are put back. */
thg_status capture_sweep_graphs(thg_group *g, int from_ahead, int norm, char *err,
                                size_t errlen)
{
    int zeroed[THG_MAX_COMM_RANKS];
    uint32_t capturing = 0;
    thg_status st = THG_OK;
    for (uint32_t q = g->first; q < g->last; ++q)
        zeroed[q] = g->ranks[q]->sweep.stamps_zeroed;
    for (capturing = g->first; capturing < g->last; ++capturing) {
        cudaError_t e = cudaSetDevice(g->devices[capturing]);
        if (e == cudaSuccess)
            e = cudaStreamBeginCapture(g->ranks[capturing]->stream,
                                       cudaStreamCaptureModeThreadLocal);
        if (e != cudaSuccess) {
            st = thg_cuda_fail(err, errlen, e, "cudaStreamBeginCapture", __FILE__, __LINE__);
            break;
        }
    }
    if (st == THG_OK)
        st = enqueue_group_sweep(g, nullptr, norm, true, from_ahead != 0, err, errlen);
    /* Every capture ended (also after a failure) before any graph is
     * instantiated: instantiating is not permitted while a stream of this
     * thread still captures. */
    cudaGraph_t graphs[THG_MAX_COMM_RANKS] = {};
    for (uint32_t q = g->first; q < capturing; ++q) {
        cudaError_t e = cudaSetDevice(g->devices[q]);
        if (e == cudaSuccess)
            e = cudaStreamEndCapture(g->ranks[q]->stream, &graphs[q]);
        if (st == THG_OK && e != cudaSuccess)
            st = thg_cuda_fail(err, errlen, e, "cudaStreamEndCapture", __FILE__, __LINE__);
    }
    for (uint32_t q = g->first; q < capturing; ++q) {
        cudaError_t e = cudaSetDevice(g->devices[q]);
        if (st == THG_OK && e == cudaSuccess)
            e = cudaGraphInstantiate(&g->sweep_graphs[from_ahead][norm][q], graphs[q], 0);
        if (graphs[q])
            cudaGraphDestroy(graphs[q]);
        if (st == THG_OK && e != cudaSuccess)
            st = thg_cuda_fail(err, errlen, e, "cudaGraphInstantiate", __FILE__, __LINE__);
    }
    for (uint32_t q = g->first; q < g->last; ++q)
        g->ranks[q]->sweep.stamps_zeroed = zeroed[q];
    if (st != THG_OK) {
        cudaGetLastError(); /* capture errors are not sticky; clear the record */
        destroy_sweep_graphs(g);
    }
    return st;
}

/* Rank q's graph launched (its device made current), after what the
 * graph leaves to the host: the stamps zeroed where the last sweep did
 * not re-zero them, and the host's Grams copied where the devices' differ
 * (`grams`, else NULL). */
thg_status launch_rank_sweep(thg_group *g, uint32_t q, const double *const *grams,
                             int from_ahead, int norm, char *err, size_t errlen)
{
    thg_context *ctx = g->ranks[q];
    THG_CUDA(cudaSetDevice(g->devices[q]));
    thg_status st = thg_sweep_zero_stamps(ctx, err, errlen);
    if (st == THG_OK && grams)
        st = thg_sweep_copy_grams(ctx, grams, ctx->stream, err, errlen);
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaGraphLaunch(g->sweep_graphs[from_ahead][norm][q], ctx->stream));
    ctx->sweep.stamps_zeroed = 1; /* after the graph's results copy */
    return THG_OK;
}

/* The sweep on every rank: its graph (captured on first use; a capture
 * that fails turns the graphs off, with the reason in graphs_note), or
 * its steps as stream launches. The host's Grams are compared with rank
 * 0's mirror alone: every rank's sweep leaves the same bits, and a copy
 * goes to every rank; so the other ranks' mirrors go unread (and their
 * results uncopied, thg_group_als_sweep), a compare and two copies of
 * every Gram less a rank. *graphed: whether the graphs ran (and so the
 * run-ahead). */
thg_status run_group_sweep(thg_group *g, double *const *grams, int norm, bool *graphed,
                           char *err, size_t errlen)
{
    *graphed = false;
    const double *const *changed =
        thg_sweep_grams_current(lead(g), grams) ? nullptr : grams;
    bool graphs = !g->graphs_failed && !why_no_sweep_graphs(g);
    const int from_ahead = g->ahead_valid ? 1 : 0;
    if (graphs && !g->sweep_graphs[from_ahead][norm][g->first]) {
        char why[TH_GPU_NOTE_SIZE];
        if (capture_sweep_graphs(g, from_ahead, norm, why, sizeof why) != THG_OK) {
            g->graphs_failed = true;
            /* The reason without thg_cuda_fail's "CUDA error at file:line in call: ". */
            const char *reason = strstr(why, ": ");
            snprintf(g->graphs_note, sizeof g->graphs_note, "off (capture failed: %.70s)",
                     reason ? reason + 2 : why);
            graphs = false;
        }
    }
    if (!graphs)
        return enqueue_group_sweep(g, changed, norm, false, false, err, errlen);
    for (uint32_t q = g->first; q < g->last; ++q) {
        const thg_status st = launch_rank_sweep(g, q, changed, from_ahead, norm, err, errlen);
        if (st != THG_OK)
            return st;
    }
    *graphed = true;
    return THG_OK;
}

/* The host's wait for a sweep: where the graphs ran, for every rank's
 * results (the run-ahead MTTKRP goes on); else for everything. */
thg_status wait_for_sweep(thg_group *g, bool graphed, char *err, size_t errlen)
{
    if (!graphed)
        return sync_all(g, err, errlen);
    for (uint32_t q = g->first; q < g->last; ++q) {
        THG_CUDA(cudaSetDevice(g->devices[q]));
        THG_CUDA(cudaEventSynchronize(g->results_ready[q]));
    }
    return THG_OK;
}

} // namespace

extern "C" thg_status thg_group_als_sweep(thg_group *g, double *const *grams, int use_max_norm,
                                          double *lambda, double *inner, uint32_t *modes_done,
                                          char *err, size_t errlen)
{
    *modes_done = 0;
    if (g->nmodes == 0)
        return thg_fail(err, errlen, THG_ERR_STATE, "no tensor loaded");
    /* The device has not started: a plain store is seen by the launches. */
    for (uint32_t q = g->first; q < g->last; ++q)
        *(volatile uint32_t *)g->ranks[q]->sweep.status_host = 0u;
    THG_CUDA(cudaSetDevice(g->devices[g->first]));
    THG_CUDA(cudaEventRecord(g->sweep_start, lead(g)->stream));
    const int norm = use_max_norm ? 1 : 0;
    for (uint32_t m = 0; m < g->nmodes; ++m) {
        begin_mode_timing(g, m);
        /* The sweep's updates leave the split rows' partials uncombined. */
        g->modes[m].results_partial = true;
    }
    const bool from_ahead = g->ahead_valid;
    bool graphed = false;
    thg_status st = run_group_sweep(g, grams, norm, &graphed, err, errlen);
    g->ahead_valid = st == THG_OK && graphed;
    if (st != THG_OK) /* the results are whatever part of the sweep ran left */
        for (uint32_t q = g->first; q < g->last; ++q)
            for (uint32_t m = 0; m < g->nmodes; ++m)
                g->ranks[q]->copies[m].has_result = 0;
    if (st == THG_OK && !graphed) {
        THG_CUDA(cudaSetDevice(g->devices[g->first]));
        THG_CUDA(cudaEventRecord(g->sweep_stop, lead(g)->stream));
    }
    /* Also after a failure: no mirror may change under a pending copy. */
    const thg_status synced = st == THG_OK ? wait_for_sweep(g, graphed, err, errlen)
                                           : sync_all(g, err, errlen);
    if (st != THG_OK || synced != THG_OK) {
        drop_run_ahead(g);
        for (uint32_t q = g->first; q < g->last; ++q)
            g->ranks[q]->sweep.mirror_valid = 0;
        return st != THG_OK ? st : synced;
    }
    THG_CUDA(cudaSetDevice(g->devices[g->first]));
    float ms = 0.0f;
    THG_CUDA(cudaEventElapsedTime(&ms, g->sweep_start,
                                  graphed ? g->results_ready[g->first] : g->sweep_stop));
    /* Every rank finished with the same bits: the first local rank's are
     * read; the others' spans alone. */
    for (uint32_t q = g->first; q < g->last; ++q)
        thg_sweep_collect(g->ranks[q], q == g->first ? grams : nullptr, lambda, inner,
                          modes_done);
    /* A sweep that took the run-ahead MTTKRP started (sweep_start) at its
     * end, or at the call when it had finished before: its device time is
     * that MTTKRP's span and the rest. (A sweep that could not take it, its
     * graph's capture having failed, computed its own inside the rest.) */
    const bool took_ahead = from_ahead && graphed;
    g->last_sweep_seconds =
        ms * 1e-3 + (took_ahead ? lead(g)->copies[0].last_seconds : 0.0);
    /* A sweep stopped by a solve's breakdown: the host finishes the
     * iteration with its own updates (which drop the run-ahead too). */
    if (*modes_done < g->nmodes)
        drop_run_ahead(g);
    const bool stamped = sweep_stamps_comm(g);
    for (uint32_t m = 0; m < g->nmodes; ++m) {
        double slowest = 0.0, slowest_comm = 0.0;
        for (uint32_t q = g->first; q < g->last; ++q) {
            const double s = g->ranks[q]->copies[m].last_seconds;
            slowest = s > slowest ? s : slowest;
            const double c = stamped ? thg_sweep_comm_seconds(g->ranks[q], m) : 0.0;
            slowest_comm = c > slowest_comm ? c : slowest_comm;
        }
        g->modes[m].mttkrp_seconds = slowest;
        g->modes[m].comm_seconds = slowest_comm; /* events, if any, are read when asked for */
    }
    return THG_OK;
}
