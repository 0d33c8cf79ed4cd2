/* Shared by the two files of a run over several devices: group.cu (the
 * group: its ranks and communicator, the layout, factors, the per-mode
 * steps and the collectives they share with the sweep) and group_sweep.cu
 * (the whole-iteration sweep: its steps over the ranks, its CUDA graphs' capture
 * and launch, and the run-ahead of the next sweep's first MTTKRP). Host code
 * only. */
#ifndef THG_GROUP_INTERNAL_CUH
#define THG_GROUP_INTERNAL_CUH

#include "comm.cuh"
#include "thg_internal.cuh"

/* The collectives of one mode's step, each timed on every rank. */
enum collective { kBoundary = 0, kParts = 1, kCollectives = 2 };

struct thg_group {
    uint32_t G = 0;
    /* The ranks this process drives, [first, last): all G, or one in a
     * group across processes (thg_group_create_across), whose other ranks
     * are other processes' (no context, no device here: their entries
     * below stay empty; the layout and the offsets are every rank's). */
    uint32_t first = 0, last = 0;
    /* Whether the contexts are the group's to destroy (not the one a
     * group across processes adopts). */
    bool owns_ranks = true;
    int devices[THG_MAX_COMM_RANKS] = {};
    thg_context *ranks[THG_MAX_COMM_RANKS] = {};
    thg_comm *comm = nullptr;
    char description[192] = {};
    /* After thg_group_set_layout. */
    uint32_t nmodes = 0;
    uint32_t rank = 0;
    struct mode_layout {
        uint64_t own[THG_MAX_COMM_RANKS + 1]; /* rank q owns rows [own[q], own[q + 1]) */
        /* The sweep's partial update of rank q starts here: past its first
         * row when that is split (fold.rows names it). */
        uint64_t update_begin[THG_MAX_COMM_RANKS];
        /* partial_rows[2q], [2q + 1]: rank q's share's first and last row
         * when split with another rank's (kNoRow if not); rows: the split
         * rows, each named by its owner; partials: set per rank at launch. */
        thg_als_fold fold;
        /* The owners' split rows hold their own partial alone (after a
         * sweep): a reader of the results combines them first. */
        bool results_partial;
        uint64_t factor_offsets[THG_MAX_COMM_RANKS + 1]; /* the same in bytes of a factor */
        /* The latest step's collectives, the slowest rank's: what was read
         * (the sweep's stamps, events read) plus what comm_timed says the
         * events hold and no one has read yet. */
        double comm_seconds;
        double mttkrp_seconds; /* the latest MTTKRP, the slowest rank's */
    } modes[THG_MAX_MODES];
    /* The exchange buffer: two halves, the even modes' and the odd modes',
     * each one block per rank: its update's sums (thg_als_acc_bytes) then
     * its split rows' partials (2 x R floats), so that one all-gather
     * carries both. Two halves, so that inside the sweep a rank may store
     * its sums of mode n + 1 while another still reads those of mode n
     * (the sweep's collectives then need no entry barrier). */
    size_t block_bytes = 0;
    uint64_t block_offsets[2][THG_MAX_COMM_RANKS + 1] = {}; /* per half, from the buffer's start */
    size_t scratch_offset = 0; /* the fold's scratch block, after the halves */
    /* Per rank, on its device (from the communicator, thg_comm_alloc): the
     * exchange buffer, the two halves, then the scratch block. */
    char *exchange[THG_MAX_COMM_RANKS] = {};
    /* Each rank's factors come from the communicator (thg_comm_alloc),
     * through its context's factor_allocator with this as its user data,
     * and are registered with it while a layout is set. */
    struct rank_of {
        thg_comm *comm;
        uint32_t rank;
    } allocators[THG_MAX_COMM_RANKS] = {};
    /* Registrations with the communicator: per mode, every rank's factor;
     * every rank's exchange buffer. */
    void *factor_handles[THG_MAX_MODES][THG_MAX_COMM_RANKS] = {};
    void *exchange_handles[THG_MAX_COMM_RANKS] = {};
    /* Per rank, around each collective of each mode where no stamps time
     * it (only the sweep's direct exchange stamps itself); comm_timed: the
     * events hold a time not yet read. They are read when asked for
     * (thg_group_get_mode_stats), so that a step's host time carries no
     * event reads; the next step that starts the mode replaces them. */
    cudaEvent_t comm_events[THG_MAX_COMM_RANKS][THG_MAX_MODES][kCollectives][2] = {};
    bool comm_timed[THG_MAX_MODES][kCollectives] = {};
    cudaEvent_t sweep_start = nullptr, sweep_stop = nullptr; /* rank 0's */
    double last_sweep_seconds = -1.0;
    /* The sweep as one CUDA graph a rank, per start (0: its own first
     * MTTKRP; 1: the one run ahead, below) and norm (0: 2-norm, 1:
     * max-norm), captured on first use unless why_no_sweep_graphs says
     * why not or a capture failed (graphs_failed); destroyed with the
     * layout. graphs_note: "on", or "off (why)", set with the layout and
     * by a failed capture. */
    cudaGraphExec_t sweep_graphs[2][2][THG_MAX_COMM_RANKS] = {};
    bool graphs_failed = false;
    /* The run-ahead: each rank's graph ends with the next sweep's first
     * MTTKRP into ahead[q] (mode 0's result and result scale as the rank
     * holds them), beside the results copy after which results_ready
     * (what the host waits for) is recorded. A sweep's first MTTKRP reads no factor of its
     * own mode, so that one is the next sweep's as long as no factor
     * changes in between: ahead_valid, cleared by every call that changes
     * a factor or the layout and by a sweep that stopped early. The next
     * sweep then copies it into the mode's result and starts at the
     * update: the host's return, its next call and the ranks' launches,
     * one after another, overlap that MTTKRP instead of leaving the GPUs
     * idle and the ranks ~20 us apart (BENCHMARKS.md, "Several GPUs").
     * ahead[q]: one allocation, the rows, the R scale factors, then the
     * run-ahead's span (its two stamps), which the next sweep moves to
     * mode 0's before its results copy. */
    float *ahead[THG_MAX_COMM_RANKS] = {};
    cudaEvent_t results_ready[THG_MAX_COMM_RANKS] = {};
    bool ahead_valid = false;
    char graphs_note[TH_GPU_NOTE_SIZE] = "off (no tensor loaded)";
};

/* The first rank this process drives: the one whose copies of what every
 * rank holds alike (the factors, lambda, the Grams) are read. */
inline thg_context *lead(const thg_group *g) { return g->ranks[g->first]; }

/* group.cu: the steps and the state that the sweep shares with the per-mode
 * calls (each described at its definition). */
void destroy_sweep_graphs(thg_group *g);
unsigned long long *ahead_stamps(const thg_group *g, uint32_t q);
thg_result_target ahead_target(const thg_group *g, uint32_t q);
void drop_run_ahead(thg_group *g);
void begin_mode_timing(thg_group *g, uint32_t mode);
bool sweep_stamps_comm(const thg_group *g);
const char *why_no_sweep_graphs(const thg_group *g);
thg_status sync_all(thg_group *g, char *err, size_t errlen);
thg_status update_and_gather(thg_group *g, uint32_t mode, bool in_sweep, char *err,
                             size_t errlen);
thg_status rank_fold(thg_group *g, uint32_t q, uint32_t mode, bool in_sweep, char *err,
                     size_t errlen);
thg_status finish_rank(thg_group *g, uint32_t mode, uint32_t q, double *out, bool in_sweep,
                       cudaStream_t stream, char *err, size_t errlen);

#endif
