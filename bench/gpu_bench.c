/* GPU MTTKRP benchmark and the GPU backends' performance targets ("bars"):
 * the GPU plugins and cpu-reference, through the plugin ABI, on real
 * tensors (file paths) and FROSTT-shaped synthetic ones (the presets of
 * libtensorhost/tensor/synth.h, Zipf-skewed, labelled synthetic), in one invocation on one
 * GPU, R = 32 by default.
 *
 *   gpu_bench [--rank R] [--reps N] [--plugins a,b] [--out FILE] [--devices LIST]
 *             [--option KEY=VALUE]... TENSOR...
 *   gpu_bench --ceilings   (the measured bandwidths alone: HBM, L2, row
 *                           gathers from L1, L2 and HBM, PCIe, host staging,
 *                           host memory passes, fresh memory)
 *   gpu_bench --cp-apr [--rank R] [--reps N] [--plugins a,b] TENSOR...
 *                          (CP-APR's inner iteration against the MTTKRP, below)
 *   gpu_bench --completion [--rank R] [--reps N] [--plugins a,b] TENSOR...
 *                          (tensor completion's iteration against CP-ALS's, below)
 *   gpu_bench --nonneg [--rank R] [--reps N] [--plugins a,b] TENSOR...
 *                          (nonnegative CP's iteration against CP-ALS's, below)
 *
 * --nonneg: per plugin that has als_update_nonneg (ABI 1.5), tensor,
 * medians of N after one warm-up (the first call after a load allocates
 * the update's workspace), from uniform [0, 1) factors, iterations chained
 * as nonnegative CP runs them with every update in the backend: per mode
 * mttkrp, V = the Hadamard of the other Grams on the host, and
 * als_update_nonneg (the mode updated last's lambda as scale, the passes
 * a run makes by default: at most 5, as each mode's cost allows,
 * th_hals_passes with TH_HALS_BUDGET, at tolerance 1e-8, the 2-norm); host
 * wall time of the whole iteration, and of each mode's update with its
 * pass count. Against one
 * CP-ALS iteration of the same instance: als_sweep (wall and device time,
 * median of 9 after one warm-up, as in the main table) and the per-mode
 * path (mttkrp, the host's solve, als_update: the path whose structure the
 * nonnegative iteration shares). Then, for a plugin of ABI 1.6 with
 * als_sweep, the nonnegative iteration as one als_sweep call (every mode
 * TH_CONSTRAINT_NONNEG, the same passes and tolerance, the weights as
 * scale; the passes per mode need ABI 1.9), median of N after one warm-up,
 * and the same sweep with 5 passes for every mode (TensorLy's count). The
 * bar: the faster nonnegative iteration with the default passes at most
 * 1.5x the als_sweep iteration (wall against wall).
 *
 * --completion: per plugin that has row_least_squares (ABI 1.5) and
 * generalized_mttkrp, tensor and mode, medians of N after one warm-up (the
 * first call after a load builds the row solve's plans; the warm-up takes
 * it), from uniform [0, 1) factors: row_least_squares of each mode (ridge
 * 1e-3, nonneg 0; host wall time around the call, which returns with the
 * factor updated and the training error, residual_squared, fused into it).
 * A completion iteration is every mode's solve (the host takes the last
 * mode's residual_squared: no pass of its own); against one
 * CP-ALS iteration of the same instance (als_sweep, wall and device time,
 * median of 9 after one warm-up, as in the main table). The bar: the
 * completion iteration at most 3x the CP-ALS iteration (wall against
 * wall). Untimed, after the last repetition: the last mode's
 * residual_squared against the separate pass it replaces
 * (generalized_mttkrp TH_MODE_NONE, SQUARED_RESIDUAL), as a relative
 * difference.
 *
 * --cp-apr: per plugin that has generalized_mttkrp and factor_update (ABI
 * 1.4), tensor and mode, medians of N after 3 warm-ups, from uniform
 * [0.05, 1) factors: the plain mttkrp(); the generalized MTTKRP with
 * POISSON_RATIO (epsilon 1e-10, no weights, no reduction); and one CP-APR
 * inner iteration, that generalized MTTKRP and factor_update
 * MULTIPLICATIVE_UPDATE (tolerance 0: the update always applies). Host wall
 * time around the calls and the plugin's device time of the two MTTKRPs
 * (get_mode_info), and the ratios inner iteration / plain MTTKRP (wall)
 * and generalized / plain (device); the bar is the
 * inner iteration within 1.5x the plain MTTKRP of its mode. The
 * generalized MTTKRP's wall time is the call's alone: a GPU plugin returns
 * it queued (no reduction, no weights), so its device time is the one to
 * read; the inner iteration's wall time ends with factor_update's wait.
 * On a plugin with multiplicative_updates (ABI 1.7) a second table: each
 * mode's 10 inner iterations as 10 call pairs and as that one call. Runs
 * without a CUDA device for cpu-reference.
 *
 * --devices hands the GPU plugins their `devices` option (e.g. "0,1": the
 * tensor shared over two GPUs; plugins/README.md "Several GPUs"); the
 * sweep's device time is then rank 0's events around the whole sweep.
 * --option KEY=VALUE hands them any other option (every table), e.g.
 * kappa=264.
 * TENSOR is a preset name (uber, chicago, nips, vast, enron, nell-2) or a
 * path to a .tns/.tns.gz/sptensor file. Per plugin and tensor:
 *   - MTTKRP time per mode and over all modes: the plugin's own timing
 *     (CUDA events for the GPU plugins), median of N sweeps after 3 warm-up
 *     sweeps; cpu-reference gets fewer sweeps on big tensors;
 *   - preprocessing: load_tensor wall time (upload included) and, for the
 *     GPU plugins, the device time of building all copies (build_ms), on
 *     the first load and on a second load of the same tensor into the same
 *     instance (the CUDA runtime loads each kernel on its first launch in
 *     the process, which the first build pays);
 *   - device memory held (copies, factors, workspace);
 *   - one CP-ALS iteration (median of 9 after one warm-up): with the
 *     plugin's als_sweep (ABI 1.1) when it has one, a real iteration (every
 *     mode's MTTKRP, solve and update in one call, Grams fed back from one
 *     iteration to the next), its wall time and, for the GPU plugins, its
 *     device time (CUDA events, th_runtime_info.last_sweep_seconds); the
 *     per-mode path (the host's iteration, als_step.h: mttkrp, the host's
 *     solve and als_update per mode) is also timed and printed on stderr
 *     with the split between its calls. The
 *     1.3x bar compares like with like: the sweep's device time with the
 *     MTTKRPs' device (event) time, and wall with the mttkrp calls' wall;
 *   - the method's memory floor, max(N copies streamed once at the measured
 *     HBM bandwidth, nnz*N*(N-1) factor rows of R*4 bytes at the measured
 *     L2 bandwidth), and gpu-adaptive's all-mode time over it;
 *   - the compulsory traffic (each mode's copy, nnz x (4N + 4) bytes, and
 *     every factor once a mode, at the measured HBM bandwidth) and the
 *     fraction of the all-mode time it is;
 *   - the gathers: every nonzero's N - 1 input rows once a mode, at the
 *     rate the SMs gather rows of R floats from L1 (measured:
 *     gpu_bench_l1_gather_rate), and the fraction of the all-mode time it
 *     is: what any kernel gathering each nonzero's rows takes at least,
 *     wherever they come from.
 * Then the bars, each marked met or not: gpu-adaptive's all-mode MTTKRP
 * on uber, chicago and nips under fixed times, and within 1.3x the memory
 * floor on vast, enron and nell-2; within 5% of the better single scheme;
 * building the copies within 10x one all-mode MTTKRP; a CP-ALS iteration
 * within 1.3x the all-mode MTTKRP. A Markdown table goes to stdout and,
 * with --out, to FILE. */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <glib.h>

#include "cpd/dense.h"
#include "base/log.h"
#include "cpd/als_step.h"
#include "plugin/backend.h"
#include "plugin/plugin_loader.h"
#include "tensor/synth.h"
#include "tensor/tensor_reader.h"

double gpu_bench_hbm_bandwidth(void);
double gpu_bench_l2_bandwidth(void);
double gpu_bench_l1_gather_rate(uint32_t rank);
double gpu_bench_table_gather_rate(uint32_t rank, double l2_multiple);
double gpu_bench_pcie_bandwidth(int to_device);
double gpu_bench_host_staging_bandwidth(void);
double gpu_bench_host_pass_bandwidth(int in_place);
double gpu_bench_host_fresh_bandwidth(void);

#define MAX_REPS 64
#define MAX_MODES 16

typedef struct bench_row {
    char tensor[64];
    const char *kind; /* "real" or "synthetic" (a preset, or a file labelled so) */
    char plugin[32];
    uint32_t nmodes;
    uint64_t nnz;
    uint64_t dims_sum; /* the modes' lengths summed (the factors' rows) */
    double mode_ms[MAX_MODES];
    double all_ms;
    double load_ms;  /* load_tensor wall */
    double build_ms; /* device build time; < 0 when not reported */
    double rebuild_ms; /* the same, loading the tensor a second time into the instance */
    double mem_mib;
    double als_ms; /* the sweep's when the plugin has one, else als_mode_ms */
    double als_mode_ms; /* the per-mode path */
    /* Inside the per-mode iteration: the mttkrp calls' and the als_update
     * calls' wall time (medians), to see where the overhead sits. */
    double als_mttkrp_ms, als_update_ms;
    int swept; /* als_ms is the sweep's */
    double sweep_mttkrp_ms; /* the MTTKRP kernels' spans inside one sweep (median) */
    double als_dev_ms; /* the sweep's device time (CUDA events, median); < 0: not reported */
    double all_wall_ms; /* the all-mode MTTKRP's wall time (the mttkrp calls, median) */
    int reps;
    char details[512];
} bench_row;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#define CHECK(call)                                                                    \
    do {                                                                               \
        th_status st_ = (call);                                                        \
        if (st_ != TH_OK) {                                                            \
            fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, err,     \
                    th_status_name(st_));                                              \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

static int is_gpu_plugin(const char *name) { return strncmp(name, "gpu-", 4) == 0; }

/* --devices LIST, or NULL: each GPU plugin's one device. */
static const char *bench_devices = NULL;
/* --option KEY=VALUE (repeatable): the GPU plugins' other options, e.g.
 * kappa=264 or rule=paper, so that two runs of one script compare them. */
#define MAX_BENCH_OPTIONS 8
static th_option bench_options[MAX_BENCH_OPTIONS];
static uint32_t n_bench_options = 0;

/* An instance of the plugin, created with --option, and --devices where
 * the table takes it (with_devices), for the GPU plugins; with no option
 * for cpu-reference. Exits on failure. */
static th_instance *create_instance(th_plugin *pl, const char *plugin_name, int with_devices)
{
    th_option options[MAX_BENCH_OPTIONS + 1];
    uint32_t n = 0;
    if (is_gpu_plugin(plugin_name)) {
        if (with_devices && bench_devices)
            options[n++] = (th_option){.key = "devices", .value = bench_devices};
        for (uint32_t i = 0; i < n_bench_options; ++i)
            options[n++] = bench_options[i];
    }
    char err[TH_ERROR_SIZE] = "";
    th_instance *inst = NULL;
    CHECK(th_call_create(pl, options, n, &inst, err));
    return inst;
}

/* One sweep over all modes; per-mode times as the plugin reports them. */
static double sweep(th_plugin *pl, th_instance *inst, uint32_t nmodes, double *mode_s,
                    double *wall_sum)
{
    char err[TH_ERROR_SIZE] = "";
    double sum = 0.0;
    *wall_sum = 0.0;
    for (uint32_t m = 0; m < nmodes; ++m) {
        const double w0 = now_seconds();
        CHECK(th_call_mttkrp(pl, inst, m, err));
        const double wall = now_seconds() - w0;
        *wall_sum += wall;
        th_mode_info mi = {.struct_size = sizeof(mi)};
        CHECK(th_call_get_mode_info(pl, inst, m, &mi, err));
        mode_s[m] = mi.last_mttkrp_seconds >= 0 ? mi.last_mttkrp_seconds : wall;
        sum += mode_s[m];
    }
    return sum;
}

/* Uniform [0, 1) factors, as tensorhost starts CP-ALS; their Grams into
 * `grams` when not NULL. */
static void set_random_factors(th_plugin *pl, th_instance *inst, const th_sptensor *t,
                               uint32_t rank, double *const *grams)
{
    char err[TH_ERROR_SIZE] = "";
    GRand *rng = g_rand_new_with_seed(42);
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        const size_t n = (size_t)t->dims[m] * rank;
        double *f = g_new(double, n);
        for (size_t k = 0; k < n; ++k)
            f[k] = g_rand_double_range(rng, 0.0, 1.0);
        CHECK(th_call_set_factor(pl, inst, m, f, err));
        if (grams)
            th_dense_gram(f, t->dims[m], rank, grams[m]);
        g_free(f);
    }
    g_rand_free(rng);
}

static double sum_of(const double *v, uint32_t n)
{
    double sum = 0.0;
    for (uint32_t i = 0; i < n; ++i)
        sum += v[i];
    return sum;
}

/* Wall time of one CP-ALS iteration on the per-mode path, the host's own
 * (als_step.h: mttkrp, the host's solve and als_update, mode by mode),
 * iterations chained from fresh random factors as in CP-ALS; also the
 * medians of the mttkrp calls' and the als_update calls' share of it. */
static double als_iteration_ms(th_plugin *pl, th_instance *inst, const th_sptensor *t,
                               uint32_t rank, int reps, double *mttkrp_ms, double *update_ms)
{
    th_backend view = th_backend_borrow(pl, inst, t->nmodes, rank, t->dims);
    th_als_state *als = th_als_state_new(&view, TH_UPDATE_MODE);
    set_random_factors(pl, inst, t, rank, als->grams);
    const th_als_timings *timing = &als->timings;
    double times[MAX_REPS], tm[MAX_REPS], tu[MAX_REPS];
    for (int rep = -1; rep < reps; ++rep) {
        const double mttkrp0 = sum_of(timing->mttkrp_seconds, t->nmodes);
        const double update0 = timing->update_seconds;
        GError *error = NULL;
        const double a0 = now_seconds();
        if (!th_als_step(als, (uint32_t)(rep + 2), rep < 0 ? TH_NORM_2 : TH_NORM_MAX, NULL,
                         &error)) {
            fprintf(stderr, "%s: per-mode iteration: %s\n", pl->info->id, error->message);
            exit(1);
        }
        if (rep >= 0) {
            times[rep] = now_seconds() - a0;
            tm[rep] = sum_of(timing->mttkrp_seconds, t->nmodes) - mttkrp0;
            tu[rep] = timing->update_seconds - update0;
        }
    }
    th_als_state_free(als);
    *mttkrp_ms = median(tm, reps) * 1e3;
    *update_ms = median(tu, reps) * 1e3;
    return median(times, reps) * 1e3;
}

static int has_sweep(const th_plugin *pl) { return pl->entry.als_sweep != NULL; }

/* A number the GPU plugins put in their runtime details, KEY being e.g.
 * "build_ms="; < 0 when absent. */
static double detail_number(th_plugin *pl, th_instance *inst, const char *key)
{
    char err[TH_ERROR_SIZE] = "";
    th_runtime_info ri;
    th_runtime_info_init(&ri);
    CHECK(th_call_get_runtime_info(pl, inst, &ri, err));
    const char *at = strstr(ri.details, key);
    return at ? g_ascii_strtod(at + strlen(key), NULL) : -1.0;
}

/* The latest als_sweep's device time in ms (ABI 1.2); < 0 when not measured. */
static double sweep_device_ms(th_plugin *pl, th_instance *inst)
{
    char err[TH_ERROR_SIZE] = "";
    th_runtime_info ri;
    th_runtime_info_init(&ri);
    CHECK(th_call_get_runtime_info(pl, inst, &ri, err));
    return ri.last_sweep_seconds < 0 ? -1.0 : ri.last_sweep_seconds * 1e3;
}

/* Wall time of one als_sweep call, iterations chained as in CP-ALS (the
 * first with the 2-norm, then the max-norm; each starts from the Grams the
 * previous one returned), and the device time the plugin reports for it.
 * Exits if a solve breaks down: the time would not be an iteration's. */

static double als_sweep_ms(th_plugin *pl, th_instance *inst, const th_sptensor *t,
                           uint32_t rank, int reps, double *inside_mttkrp_ms, double *dev_ms)
{
    char err[TH_ERROR_SIZE] = "";
    double *grams[MAX_MODES];
    for (uint32_t m = 0; m < t->nmodes; ++m)
        grams[m] = g_new(double, (size_t)rank * rank);
    set_random_factors(pl, inst, t, rank, grams);
    double *lambda = g_new(double, rank), *inner = g_new(double, rank);
    double times[MAX_REPS], inside[MAX_REPS], dev[MAX_REPS];
    for (int rep = -1; rep < reps; ++rep) {
        th_als_sweep_io io = {.struct_size = sizeof(io),
                              .norm = rep < 0 ? TH_NORM_2 : TH_NORM_MAX,
                              .nmodes = t->nmodes,
                              .grams = grams,
                              .lambda = lambda,
                              .inner = inner};
        const double a0 = now_seconds();
        CHECK(th_call_als_sweep(pl, inst, &io, err));
        const double wall = now_seconds() - a0;
        if (io.modes_done != t->nmodes) {
            fprintf(stderr, "%s: als_sweep stopped at mode %u (solve broke down)\n",
                    pl->info->id, io.modes_done);
            exit(1);
        }
        if (rep < 0)
            continue;
        times[rep] = wall;
        dev[rep] = sweep_device_ms(pl, inst);
        /* The MTTKRP kernels' own spans inside the sweep (the GPU's global
         * timer): the rest of the time is the updates, the solves and the
         * gaps between. */
        inside[rep] = 0.0;
        for (uint32_t m = 0; m < t->nmodes; ++m) {
            th_mode_info mi = {.struct_size = sizeof(mi)};
            CHECK(th_call_get_mode_info(pl, inst, m, &mi, err));
            inside[rep] += mi.last_mttkrp_seconds;
        }
    }
    *inside_mttkrp_ms = median(inside, reps) * 1e3;
    *dev_ms = dev[0] < 0 ? -1.0 : median(dev, reps);
    for (uint32_t m = 0; m < t->nmodes; ++m)
        g_free(grams[m]);
    g_free(lambda);
    g_free(inner);
    return median(times, reps) * 1e3;
}

static void bench_plugin(const char *plugin_name, const char *tensor_name, const char *kind,
                         const th_sptensor *t, uint32_t rank, int reps, bench_row *row)
{
    g_autofree char *path = g_strdup_printf("%s/%s.so", TH_PLUGIN_DIR, plugin_name);
    th_host_services services = th_host_services_make();
    g_autoptr(GError) error = NULL;
    th_plugin *pl = th_plugin_load(path, &services, &error);
    if (!pl) {
        fprintf(stderr, "%s\n", error->message);
        exit(1);
    }
    char err[TH_ERROR_SIZE] = "";
    th_instance *inst = create_instance(pl, plugin_name, 1);
    th_coo_tensor view = {.struct_size = sizeof(view),
                          .nmodes = t->nmodes,
                          .nnz = t->nnz,
                          .dims = t->dims,
                          .indices = (const uint32_t *const *)t->indices,
                          .values = t->values};
    const double t0 = now_seconds();
    CHECK(th_call_load_tensor(pl, inst, &view, rank, err));
    memset(row, 0, sizeof(*row));
    row->load_ms = (now_seconds() - t0) * 1e3;
    snprintf(row->tensor, sizeof(row->tensor), "%s", tensor_name);
    snprintf(row->plugin, sizeof(row->plugin), "%s", plugin_name);
    row->kind = kind;
    row->nmodes = t->nmodes;
    row->nnz = t->nnz;
    row->dims_sum = 0;
    for (uint32_t m = 0; m < t->nmodes; ++m)
        row->dims_sum += t->dims[m];
    set_random_factors(pl, inst, t, rank, NULL);

    /* The CPU takes seconds per sweep on the big tensors: fewer sweeps. */
    const int gpu = is_gpu_plugin(plugin_name);
    if (!gpu)
        reps = t->nnz > 20000000 ? 1 : t->nnz > 2000000 ? 3 : reps < 5 ? reps : 5;
    const int warmup = gpu ? 3 : 1;
    static double mode_s[MAX_MODES][MAX_REPS];
    double sums[MAX_REPS], walls[MAX_REPS], one[MAX_MODES];
    for (int rep = -warmup; rep < reps; ++rep) {
        double wall = 0.0;
        const double sum = sweep(pl, inst, t->nmodes, one, &wall);
        if (rep < 0)
            continue;
        sums[rep] = sum;
        walls[rep] = wall;
        for (uint32_t m = 0; m < t->nmodes; ++m)
            mode_s[m][rep] = one[m];
    }
    for (uint32_t m = 0; m < t->nmodes; ++m)
        row->mode_ms[m] = median(mode_s[m], reps) * 1e3;
    row->all_ms = median(sums, reps) * 1e3;
    row->all_wall_ms = median(walls, reps) * 1e3;
    row->reps = reps;
    row->als_mode_ms = als_iteration_ms(pl, inst, t, rank, gpu ? 9 : 1,
                                        &row->als_mttkrp_ms, &row->als_update_ms);
    row->swept = has_sweep(pl);
    row->als_dev_ms = -1.0;
    row->als_ms = row->swept ? als_sweep_ms(pl, inst, t, rank, gpu ? 9 : 1,
                                            &row->sweep_mttkrp_ms, &row->als_dev_ms)
                             : row->als_mode_ms;

    th_runtime_info ri;
    th_runtime_info_init(&ri);
    CHECK(th_call_get_runtime_info(pl, inst, &ri, err));
    snprintf(row->details, sizeof(row->details), "%s", ri.details);
    row->build_ms = detail_number(pl, inst, "build_ms=");
    row->rebuild_ms = -1.0;
    if (gpu) {
        CHECK(th_call_load_tensor(pl, inst, &view, rank, err));
        row->rebuild_ms = detail_number(pl, inst, "build_ms=");
    }
    row->mem_mib = gpu ? (ri.tensor_bytes + ri.factor_bytes + ri.workspace_bytes) / 1048576.0
                       : -1.0;
    fprintf(stderr,
            "  %-13s all-modes %9.4f ms (wall %.4f)  load %9.2f ms  ALS %9.4f ms (%s, device "
            "%.4f, MTTKRPs inside %.4f; per-mode path %.4f: "
            "mttkrp calls %.4f, als_update calls %.4f)  rebuild %.3f ms  %s\n",
            plugin_name, row->all_ms, row->all_wall_ms, row->load_ms, row->als_ms,
            row->swept ? "als_sweep" : "per mode", row->als_dev_ms, row->sweep_mttkrp_ms,
            row->als_mode_ms, row->als_mttkrp_ms,
            row->als_update_ms, row->rebuild_ms, ri.details);
    th_call_destroy(pl, inst);
    th_plugin_unload(pl);
}

typedef struct bar {
    const char *preset;
    double all_ms;
} bar;

/* gpu-adaptive's all-mode MTTKRP at R = 32: absolute times, set for an
 * NVIDIA H200 (about the factor-row gathers at its L2 bandwidth on uber);
 * a smaller GPU misses them without a defect. */
static const bar speed_bars[] = {{"uber", 0.56}, {"chicago", 0.88}, {"nips", 0.61}};

static const bench_row *find_row(const bench_row *rows, int n, const char *tensor,
                                 const char *plugin)
{
    for (int i = 0; i < n; ++i)
        if (strcmp(rows[i].tensor, tensor) == 0 && strcmp(rows[i].plugin, plugin) == 0)
            return &rows[i];
    return NULL;
}

/* max(stream the N copies once at HBM speed, gather nnz*N*(N-1) rows from L2). */
static double floor_ms(const bench_row *r, uint32_t rank, double hbm, double l2)
{
    const double n = r->nmodes;
    const double stream = n * (double)r->nnz * (n + 1) * 4 / hbm;
    const double gather = (double)r->nnz * n * (n - 1) * rank * 4 / l2;
    return (stream > gather ? stream : gather) * 1e3;
}

/* The compulsory traffic of an all-mode MTTKRP at HBM speed: each mode's
 * copy read once (nnz x (4N + 4) bytes: 32-bit indices, fp32 values) and,
 * a mode, every factor once (the others read, its result written: 4 R
 * bytes a row of every mode). What no layout of one copy a mode reads
 * less of; the kernels' "fraction" is this over their time. */
static double compulsory_ms(const bench_row *r, uint32_t rank, double hbm)
{
    const double n = r->nmodes;
    const double copies = n * (double)r->nnz * (4 * n + 4);
    const double factors = n * (double)r->dims_sum * rank * 4;
    return (copies + factors) / hbm * 1e3;
}

/* Every nonzero's N - 1 input rows gathered once a mode at the rate the
 * SMs gather rows of R floats from L1, measured in the run
 * (gpu_bench_l1_gather_rate): what a kernel that gathers each nonzero's
 * rows takes at least, wherever the rows come from (only rows not
 * gathered again, as the row reuse skips them, go below it). */
static double gathers_ms(const bench_row *r, double gather_rate)
{
    const double n = r->nmodes;
    return (double)r->nnz * n * (n - 1) / gather_rate * 1e3;
}

static int has_floor_bar(const char *tensor)
{
    return strcmp(tensor, "vast") == 0 || strcmp(tensor, "enron") == 0 ||
           strcmp(tensor, "nell-2") == 0;
}

static void print_report(FILE *f, const bench_row *rows, int n, uint32_t rank, double hbm,
                         double l2, double gather_rate, const char *device)
{
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof(date), "%Y-%m-%d", gmtime(&now));
    fprintf(f, "Device: %s; %s (UTC). R = %u. HBM (device copy, read+write) %.0f GB/s, "
               "L2 (re-read of an L2-resident buffer) %.0f GB/s, L1 gathers of rows of R "
               "floats %.0f G/s, all measured in this run. "
               "floor: the method's (N copies streamed, the gathers from L2), ratio the "
               "all-mode time over it; compulsory: each copy and each factor once a mode at "
               "that HBM speed, fraction it over the all-mode time; gathers: every nonzero's "
               "input rows once a mode at that L1 rate, fraction it over the all-mode "
               "time.\n\n",
            device, date, rank, hbm * 1e-9, l2 * 1e-9, gather_rate * 1e-9);
    fprintf(f, "| tensor | plugin | MTTKRP per mode (ms) | all modes (ms) | preprocessing: "
               "load / build / rebuild (ms) | device MiB | CP-ALS iter (ms) | floor (ms) | ratio "
               "| compulsory (ms) | fraction | gathers (ms) | fraction |\n");
    fprintf(f, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < n; ++i) {
        const bench_row *r = &rows[i];
        fprintf(f, "| %s (%s, %llu nnz) | %s | ", r->tensor, r->kind,
                (unsigned long long)r->nnz, r->plugin);
        for (uint32_t m = 0; m < r->nmodes; ++m)
            fprintf(f, "%s%.3f", m ? " / " : "", r->mode_ms[m]);
        fprintf(f, " | %.3f | %.1f / ", r->all_ms, r->load_ms);
        if (r->build_ms >= 0)
            fprintf(f, "%.2f / %.2f", r->build_ms, r->rebuild_ms);
        else
            fprintf(f, "-");
        if (r->mem_mib >= 0)
            fprintf(f, " | %.0f", r->mem_mib);
        else
            fprintf(f, " | -");
        fprintf(f, " | %.3f", r->als_ms);
        if (is_gpu_plugin(r->plugin) && hbm > 0 && l2 > 0) {
            const double fl = floor_ms(r, rank, hbm, l2), cf = compulsory_ms(r, rank, hbm);
            fprintf(f, " | %.3f | %.2f | %.3f | %.0f%%", fl, r->all_ms / fl, cf,
                    100.0 * cf / r->all_ms);
        } else {
            fprintf(f, " | - | - | - | -");
        }
        if (is_gpu_plugin(r->plugin) && gather_rate > 0) {
            const double g = gathers_ms(r, gather_rate);
            fprintf(f, " | %.3f | %.0f%% |\n", g, 100.0 * g / r->all_ms);
        } else {
            fprintf(f, " | - | - |\n");
        }
    }

    fprintf(f, "\nBars (performance targets), gpu-adaptive:\n\n");
    for (size_t b = 0; b < G_N_ELEMENTS(speed_bars); ++b) {
        const bench_row *a = find_row(rows, n, speed_bars[b].preset, "gpu-adaptive");
        if (a)
            fprintf(f, "- %s all-mode MTTKRP %.3f ms, bar %.2f ms: **%s**\n", a->tensor,
                    a->all_ms, speed_bars[b].all_ms,
                    a->all_ms <= speed_bars[b].all_ms ? "met" : "not met");
    }
    for (int i = 0; i < n; ++i) {
        const bench_row *a = &rows[i];
        if (strcmp(a->plugin, "gpu-adaptive") != 0)
            continue;
        if (has_floor_bar(a->tensor) && hbm > 0 && l2 > 0) {
            const double ratio = a->all_ms / floor_ms(a, rank, hbm, l2);
            fprintf(f, "- %s: %.2fx the memory floor, bar 1.3x: **%s**\n", a->tensor, ratio,
                    ratio <= 1.3 ? "met" : "not met");
        }
        const bench_row *s1 = find_row(rows, n, a->tensor, "gpu-scheme1");
        const bench_row *s2 = find_row(rows, n, a->tensor, "gpu-scheme2");
        if (s1 && s2) {
            const double best = s1->all_ms < s2->all_ms ? s1->all_ms : s2->all_ms;
            const double worst = s1->all_ms > s2->all_ms ? s1->all_ms : s2->all_ms;
            fprintf(f, "- %s: adaptive %.3f ms vs best scheme %.3f (%+.1f%%, bar <= +5%%: "
                       "**%s**), worst %.3f\n",
                    a->tensor, a->all_ms, best, 100.0 * (a->all_ms / best - 1.0),
                    a->all_ms <= 1.05 * best ? "met" : "not met", worst);
        }
        if (a->build_ms >= 0)
            fprintf(f, "- %s: building the copies %.2f ms = %.1fx one all-mode MTTKRP (bar "
                       "10x: **%s**); load_tensor with upload %.1f ms; a second build %.2f ms "
                       "= %.1fx\n",
                    a->tensor, a->build_ms, a->build_ms / a->all_ms,
                    a->build_ms <= 10 * a->all_ms ? "met" : "not met", a->load_ms,
                    a->rebuild_ms, a->rebuild_ms / a->all_ms);
        if (a->als_dev_ms >= 0) {
            /* Like for like: device time against the MTTKRPs' device time;
             * and the host's view, wall against wall. */
            fprintf(f, "- %s: CP-ALS iteration (als_sweep) %.3f ms on the device = %.2fx "
                       "the all-mode MTTKRP's %.3f ms (bar 1.3x where factors fit in L2: "
                       "**%s**); wall %.3f ms = %.2fx the mttkrp calls' %.3f ms",
                    a->tensor, a->als_dev_ms, a->als_dev_ms / a->all_ms,
                    a->all_ms, a->als_dev_ms <= 1.3 * a->all_ms ? "met" : "not met", a->als_ms,
                    a->als_ms / a->all_wall_ms, a->all_wall_ms);
            fprintf(f, "; per-mode path %.3f ms wall = %.2fx\n", a->als_mode_ms,
                    a->als_mode_ms / a->all_wall_ms);
        } else {
            fprintf(f, "- %s: CP-ALS iteration %.3f ms (%s) = %.2fx the all-mode MTTKRP (bar "
                       "1.3x where factors fit in L2: **%s**); per-mode path %.3f ms = %.2fx\n",
                    a->tensor, a->als_ms, a->swept ? "als_sweep" : "per mode",
                    a->als_ms / a->all_ms, a->als_ms <= 1.3 * a->all_ms ? "met" : "not met",
                    a->als_mode_ms, a->als_mode_ms / a->all_ms);
        }
    }
}

static th_sptensor *load_input(const char *arg, char *name, size_t name_size,
                               const char **kind)
{
    g_autoptr(GError) error = NULL;
    const th_synth_preset *preset = th_synth_find_preset(arg);
    th_sptensor *t = NULL;
    if (preset) {
        th_synth_params params;
        th_synth_params_from_preset(&params, preset, 1);
        t = th_synth_generate(&params, &error);
        *kind = "synthetic";
        snprintf(name, name_size, "%s", preset->name);
    } else {
        t = th_tensor_read_file(arg, NULL, &error);
        /* A file tensorhost-synth wrote says so in its label. */
        *kind = t && t->label && g_str_has_prefix(t->label, TH_SYNTH_LABEL_PREFIX) ? "synthetic"
                                                                                   : "real";
        g_autofree char *base = g_path_get_basename(arg);
        snprintf(name, name_size, "%s", base);
    }
    if (!t) {
        fprintf(stderr, "%s: %s\n", arg, error->message);
        exit(1);
    }
    return t;
}

/* Every mode's factor from `factors` into the instance. */
static void upload_factors(th_plugin *pl, th_instance *inst, uint32_t nmodes,
                           double *const *factors)
{
    char err[TH_ERROR_SIZE] = "";
    for (uint32_t m = 0; m < nmodes; ++m)
        CHECK(th_call_set_factor(pl, inst, m, factors[m], err));
}

/* --cp-apr on a plugin with multiplicative_updates (ABI 1.7): per mode,
 * CP-APR's 10 inner iterations (tolerance 0: all of them) as 10
 * generalized_mttkrp + factor_update calls and as one
 * multiplicative_updates call, each from the factors `start` (set again
 * before every repetition, untimed), host wall time, medians of N after
 * one warm-up, alternating. */
static void bench_multiplicative_updates(th_plugin *pl, th_instance *inst,
                                         const char *plugin_name, const char *tensor_name,
                                         const th_sptensor *t, double *const *start, int reps)
{
    enum { INNER = 10 };
    char err[TH_ERROR_SIZE] = "";
    printf("\n| tensor | plugin | mode | 10 calls each (ms) | one multiplicative_updates (ms) | "
           "ratio |\n|---|---|---:|---:|---:|---:|\n");
    double loop_all = 0.0, call_all = 0.0;
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        double loop_w[MAX_REPS], call_w[MAX_REPS];
        for (int rep = -1; rep < reps; ++rep) {
            upload_factors(pl, inst, t->nmodes, start);
            double w0 = now_seconds();
            for (int i = 0; i < INNER; ++i) {
                th_generalized_mttkrp_io gio = {.struct_size = sizeof(gio),
                                                .mode = m,
                                                .elementwise = TH_ELEMENTWISE_POISSON_RATIO,
                                                .reduction = TH_REDUCTION_NONE,
                                                .epsilon = 1e-10};
                th_factor_update_io fio = {.struct_size = sizeof(fio),
                                           .mode = m,
                                           .operation = TH_FACTOR_MULTIPLICATIVE_UPDATE,
                                           .tolerance = 0.0};
                CHECK(th_call_generalized_mttkrp(pl, inst, &gio, err));
                CHECK(th_call_factor_update(pl, inst, &fio, err));
            }
            const double lw = now_seconds() - w0;
            upload_factors(pl, inst, t->nmodes, start);
            th_multiplicative_updates_io mio = {.struct_size = sizeof(mio),
                                                .mode = m,
                                                .elementwise = TH_ELEMENTWISE_POISSON_RATIO,
                                                .max_iterations = INNER,
                                                .epsilon = 1e-10,
                                                .tolerance = 0.0};
            w0 = now_seconds();
            CHECK(th_call_multiplicative_updates(pl, inst, &mio, err));
            const double cw = now_seconds() - w0;
            if (rep < 0)
                continue;
            loop_w[rep] = lw;
            call_w[rep] = cw;
        }
        const double lw = median(loop_w, reps) * 1e3, cw = median(call_w, reps) * 1e3;
        loop_all += lw;
        call_all += cw;
        printf("| %s | %s | %u | %.3f | %.3f | %.2fx |\n", tensor_name, plugin_name, m, lw, cw,
               lw / cw);
    }
    printf("| %s | %s | all | %.3f | %.3f | %.2fx |\n\n", tensor_name, plugin_name, loop_all,
           call_all, loop_all / call_all);
}

/* --cp-apr: see the header comment. */
static void bench_cp_apr(const char *plugin_name, const char *tensor_name, const th_sptensor *t,
                         uint32_t rank, int reps)
{
    g_autofree char *path = g_strdup_printf("%s/%s.so", TH_PLUGIN_DIR, plugin_name);
    th_host_services services = th_host_services_make();
    g_autoptr(GError) error = NULL;
    th_plugin *pl = th_plugin_load(path, &services, &error);
    if (!pl) {
        fprintf(stderr, "%s\n", error->message);
        exit(1);
    }
    if (!pl->entry.generalized_mttkrp || !pl->entry.factor_update) {
        fprintf(stderr, "  %s: no generalized_mttkrp / factor_update (ABI 1.4): skipped\n",
                plugin_name);
        th_plugin_unload(pl);
        return;
    }
    char err[TH_ERROR_SIZE] = "";
    th_instance *inst = create_instance(pl, plugin_name, 0);
    th_coo_tensor view = {.struct_size = sizeof(view),
                          .nmodes = t->nmodes,
                          .nnz = t->nnz,
                          .dims = t->dims,
                          .indices = (const uint32_t *const *)t->indices,
                          .values = t->values};
    CHECK(th_call_load_tensor(pl, inst, &view, rank, err));
    GRand *rng = g_rand_new_with_seed(7);
    double *start[TH_MAX_MODES];
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        const size_t n = (size_t)t->dims[m] * rank;
        start[m] = g_new(double, n);
        for (size_t k = 0; k < n; ++k)
            start[m][k] = g_rand_double_range(rng, 0.05, 1.0);
    }
    g_rand_free(rng);
    upload_factors(pl, inst, t->nmodes, start);
    double plain_all = 0.0, iter_all = 0.0;
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        double plain_w[MAX_REPS], plain_d[MAX_REPS], gen_w[MAX_REPS], gen_d[MAX_REPS],
            iter_w[MAX_REPS];
        for (int rep = -3; rep < reps; ++rep) {
            th_mode_info mi = {.struct_size = sizeof(mi)};
            double w0 = now_seconds();
            CHECK(th_call_mttkrp(pl, inst, m, err));
            const double pw = now_seconds() - w0;
            CHECK(th_call_get_mode_info(pl, inst, m, &mi, err));
            const double pd = mi.last_mttkrp_seconds;
            th_generalized_mttkrp_io gio = {.struct_size = sizeof(gio),
                                            .mode = m,
                                            .elementwise = TH_ELEMENTWISE_POISSON_RATIO,
                                            .reduction = TH_REDUCTION_NONE,
                                            .epsilon = 1e-10};
            w0 = now_seconds();
            CHECK(th_call_generalized_mttkrp(pl, inst, &gio, err));
            const double gw = now_seconds() - w0;
            CHECK(th_call_get_mode_info(pl, inst, m, &mi, err));
            const double gd = mi.last_mttkrp_seconds;
            th_factor_update_io fio = {.struct_size = sizeof(fio),
                                       .mode = m,
                                       .operation = TH_FACTOR_MULTIPLICATIVE_UPDATE,
                                       .tolerance = 0.0};
            w0 = now_seconds();
            CHECK(th_call_generalized_mttkrp(pl, inst, &gio, err));
            CHECK(th_call_factor_update(pl, inst, &fio, err));
            const double iw = now_seconds() - w0;
            if (rep < 0)
                continue;
            plain_w[rep] = pw;
            plain_d[rep] = pd;
            gen_w[rep] = gw;
            gen_d[rep] = gd;
            iter_w[rep] = iw;
        }
        const double pw = median(plain_w, reps) * 1e3, pd = median(plain_d, reps) * 1e3;
        const double gw = median(gen_w, reps) * 1e3, gd = median(gen_d, reps) * 1e3;
        const double iw = median(iter_w, reps) * 1e3;
        plain_all += pw;
        iter_all += iw;
        printf("| %s | %s | %u | %u | %.4f | %.4f | %.4f | %.4f | %.4f | %.2fx | %.2fx | %s |\n",
               tensor_name, plugin_name, m, t->dims[m], pw, pd, gw, gd, iw, iw / pw, gd / pd,
               iw <= 1.5 * pw ? "met" : "NOT met");
    }
    printf("| %s | %s | all | | %.4f | | | | %.4f | %.2fx | | %s |\n", tensor_name,
           plugin_name, plain_all, iter_all, iter_all / plain_all,
           iter_all <= 1.5 * plain_all ? "met" : "NOT met");
    if (pl->entry.multiplicative_updates)
        bench_multiplicative_updates(pl, inst, plugin_name, tensor_name, t, start, reps);
    fflush(stdout);
    for (uint32_t m = 0; m < t->nmodes; ++m)
        g_free(start[m]);
    th_call_destroy(pl, inst);
    th_plugin_unload(pl);
}

/* --completion: see the header comment. */
static void bench_completion(const char *plugin_name, const char *tensor_name,
                             const th_sptensor *t, uint32_t rank, int reps)
{
    g_autofree char *path = g_strdup_printf("%s/%s.so", TH_PLUGIN_DIR, plugin_name);
    th_host_services services = th_host_services_make();
    g_autoptr(GError) error = NULL;
    th_plugin *pl = th_plugin_load(path, &services, &error);
    if (!pl) {
        fprintf(stderr, "%s\n", error->message);
        exit(1);
    }
    if (!pl->entry.row_least_squares || !pl->entry.generalized_mttkrp) {
        fprintf(stderr, "  %s: no row_least_squares (ABI 1.5) / generalized_mttkrp: skipped\n",
                plugin_name);
        th_plugin_unload(pl);
        return;
    }
    char err[TH_ERROR_SIZE] = "";
    th_instance *inst = create_instance(pl, plugin_name, 0);
    th_coo_tensor view = {.struct_size = sizeof(view),
                          .nmodes = t->nmodes,
                          .nnz = t->nnz,
                          .dims = t->dims,
                          .indices = (const uint32_t *const *)t->indices,
                          .values = t->values};
    CHECK(th_call_load_tensor(pl, inst, &view, rank, err));
    set_random_factors(pl, inst, t, rank, NULL);
    double mode_ms[MAX_MODES][MAX_REPS], iter_ms[MAX_REPS];
    uint64_t singular[MAX_MODES] = {0}, empty[MAX_MODES] = {0};
    double fused = 0.0;
    for (int rep = -1; rep < reps; ++rep) {
        double iteration = 0.0;
        for (uint32_t m = 0; m < t->nmodes; ++m) {
            th_row_least_squares_io io = {.struct_size = sizeof(io),
                                          .mode = m,
                                          .ridge = 1e-3,
                                          .nonneg = 0,
                                          .passes = 1};
            const double w0 = now_seconds();
            CHECK(th_call_row_least_squares(pl, inst, &io, err));
            const double w = now_seconds() - w0;
            iteration += w;
            singular[m] = io.singular_rows;
            empty[m] = io.empty_rows;
            fused = io.residual_squared;
            if (rep >= 0)
                mode_ms[m][rep] = w * 1e3;
        }
        if (rep >= 0)
            iter_ms[rep] = iteration * 1e3;
    }
    /* The pass the fused residual replaced, once, untimed: the check. */
    th_generalized_mttkrp_io gio = {.struct_size = sizeof(gio),
                                    .mode = TH_MODE_NONE,
                                    .elementwise = TH_ELEMENTWISE_VALUE,
                                    .reduction = TH_REDUCTION_SQUARED_RESIDUAL};
    CHECK(th_call_generalized_mttkrp(pl, inst, &gio, err));
    const double pass = gio.reduced;
    double inside = 0.0, dev = -1.0;
    const double als = als_sweep_ms(pl, inst, t, rank, 9, &inside, &dev);
    const double iter = median(iter_ms, reps);
    printf("| %s | %s | %u | ", tensor_name, plugin_name, rank);
    for (uint32_t m = 0; m < t->nmodes; ++m)
        printf("%s%.3f", m ? " / " : "", median(mode_ms[m], reps));
    printf(" | fused (%.2g) | %.3f | %.3f / %.3f | %.2fx | %s |",
           fabs(fused - pass) / fmax(fabs(pass), DBL_MIN), iter, als, dev, iter / als,
           iter <= 3.0 * als ? "met" : "NOT met");
    for (uint32_t m = 0; m < t->nmodes; ++m)
        printf("%s%llu/%llu", m ? ", " : " ", (unsigned long long)singular[m],
               (unsigned long long)empty[m]);
    printf(" |\n");
    fflush(stdout);
    th_call_destroy(pl, inst);
    th_plugin_unload(pl);
}

/* The nonnegative iteration as one als_sweep (ABI 1.6: every mode
 * TH_CONSTRAINT_NONNEG, `mode_sweeps` passes (ABI 1.9; NULL: 5 for every
 * mode) at 1e-8, the weights as scale): median wall of `reps` after one
 * warm-up, and the device time. */
static double nonneg_sweep_ms(th_plugin *pl, th_instance *inst, const th_sptensor *t,
                              uint32_t rank, int reps, const uint32_t *mode_sweeps,
                              double *dev_ms)
{
    char err[TH_ERROR_SIZE] = "";
    double *grams[MAX_MODES];
    int32_t constraints[MAX_MODES];
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        grams[m] = g_new(double, (size_t)rank * rank);
        constraints[m] = TH_CONSTRAINT_NONNEG;
    }
    set_random_factors(pl, inst, t, rank, grams);
    double *lambda = g_new(double, rank), *inner = g_new(double, rank);
    double *scale = g_new(double, rank);
    for (uint32_t r = 0; r < rank; ++r)
        lambda[r] = 1.0;
    double times[MAX_REPS], dev[MAX_REPS];
    for (int rep = -1; rep < reps; ++rep) {
        memcpy(scale, lambda, sizeof(double) * rank);
        th_als_sweep_io io = {.struct_size = sizeof(io),
                              .norm = TH_NORM_2,
                              .nmodes = t->nmodes,
                              .grams = grams,
                              .lambda = lambda,
                              .inner = inner,
                              .constraints = constraints,
                              .scale = scale,
                              .hals_tolerance = 1e-8,
                              .hals_sweeps = 5,
                              .hals_mode_sweeps = mode_sweeps};
        const double a0 = now_seconds();
        CHECK(th_call_als_sweep(pl, inst, &io, err));
        const double wall = now_seconds() - a0;
        if (rep < 0)
            continue;
        times[rep] = wall;
        dev[rep] = sweep_device_ms(pl, inst);
    }
    *dev_ms = dev[0] < 0 ? -1.0 : median(dev, reps);
    for (uint32_t m = 0; m < t->nmodes; ++m)
        g_free(grams[m]);
    g_free(lambda);
    g_free(inner);
    g_free(scale);
    return median(times, reps) * 1e3;
}

/* --nonneg: see the header comment. */
static void bench_nonneg(const char *plugin_name, const char *tensor_name, const th_sptensor *t,
                         uint32_t rank, int reps)
{
    g_autofree char *path = g_strdup_printf("%s/%s.so", TH_PLUGIN_DIR, plugin_name);
    th_host_services services = th_host_services_make();
    g_autoptr(GError) error = NULL;
    th_plugin *pl = th_plugin_load(path, &services, &error);
    if (!pl) {
        fprintf(stderr, "%s\n", error->message);
        exit(1);
    }
    if (!pl->entry.als_update_nonneg) {
        fprintf(stderr, "  %s: no als_update_nonneg (ABI 1.5): skipped\n", plugin_name);
        th_plugin_unload(pl);
        return;
    }
    char err[TH_ERROR_SIZE] = "";
    th_instance *inst = create_instance(pl, plugin_name, 0);
    th_coo_tensor view = {.struct_size = sizeof(view),
                          .nmodes = t->nmodes,
                          .nnz = t->nnz,
                          .dims = t->dims,
                          .indices = (const uint32_t *const *)t->indices,
                          .values = t->values};
    CHECK(th_call_load_tensor(pl, inst, &view, rank, err));
    double *grams[MAX_MODES];
    for (uint32_t m = 0; m < t->nmodes; ++m)
        grams[m] = g_new(double, (size_t)rank * rank);
    set_random_factors(pl, inst, t, rank, grams);
    double *lambda = g_new(double, rank), *scale = g_new(double, rank);
    double *inner = g_new(double, rank), *v = g_new(double, (size_t)rank * rank);
    for (uint32_t r = 0; r < rank; ++r)
        lambda[r] = 1.0;
    double iter_ms[MAX_REPS], update_ms[MAX_MODES][MAX_REPS], mttkrp_ms[MAX_MODES][MAX_REPS];
    uint32_t passes_sum[MAX_MODES] = {0};
    /* The passes a run makes by default. */
    uint32_t allowed[MAX_MODES];
    th_hals_passes(t->dims, t->nmodes, t->nnz, rank, TH_HALS_SWEEPS, TH_HALS_BUDGET, allowed);
    for (int rep = -1; rep < reps; ++rep) {
        const double i0 = now_seconds();
        for (uint32_t m = 0; m < t->nmodes; ++m) {
            double w0 = now_seconds();
            CHECK(th_call_mttkrp(pl, inst, m, err));
            const double mw = now_seconds() - w0;
            w0 = now_seconds();
            th_dense_hadamard_except(grams, t->nmodes, m, rank, v);
            memcpy(scale, lambda, sizeof(double) * rank);
            th_nonneg_update_io io = {.struct_size = sizeof(io),
                                      .mode = m,
                                      .v = v,
                                      .scale = scale,
                                      .tolerance = 1e-8,
                                      .sweeps = allowed[m],
                                      .norm = TH_NORM_2};
            th_als_output out = {.struct_size = sizeof(out),
                                 .lambda = lambda,
                                 .gram = grams[m],
                                 .inner = inner};
            CHECK(th_call_als_update_nonneg(pl, inst, &io, &out, err));
            const double uw = now_seconds() - w0;
            if (rep >= 0) {
                mttkrp_ms[m][rep] = mw * 1e3;
                update_ms[m][rep] = uw * 1e3;
                passes_sum[m] += io.passes;
            }
        }
        if (rep >= 0)
            iter_ms[rep] = (now_seconds() - i0) * 1e3;
    }
    double inside = 0.0, dev = -1.0, mttkrp_part = 0.0, update_part = 0.0;
    double nn_sweep = -1.0, nn_dev = -1.0, fixed_sweep = -1.0, fixed_dev = -1.0;
    gboolean differ = FALSE;
    for (uint32_t m = 1; m < t->nmodes; ++m)
        differ = differ || allowed[m] != allowed[0];
    if (pl->entry.als_sweep && pl->entry.abi_version.minor >= (differ ? 9 : 6)) {
        nn_sweep = nonneg_sweep_ms(pl, inst, t, rank, reps, differ ? allowed : NULL, &nn_dev);
        fixed_sweep = differ ? nonneg_sweep_ms(pl, inst, t, rank, reps, NULL, &fixed_dev)
                             : nn_sweep;
        fixed_dev = differ ? fixed_dev : nn_dev;
    }
    const double sweep = als_sweep_ms(pl, inst, t, rank, 9, &inside, &dev);
    const double per_mode = als_iteration_ms(pl, inst, t, rank, 9, &mttkrp_part, &update_part);
    const double iter = median(iter_ms, reps);
    printf("| %s | %s | %u | ", tensor_name, plugin_name, rank);
    for (uint32_t m = 0; m < t->nmodes; ++m)
        printf("%s%.3f", m ? " / " : "", median(mttkrp_ms[m], reps));
    printf(" | ");
    for (uint32_t m = 0; m < t->nmodes; ++m)
        printf("%s%.3f (%.1f)", m ? " / " : "", median(update_ms[m], reps),
               (double)passes_sum[m] / reps);
    printf(" | %.3f | %.3f / %.3f | %.3f | %.2fx | %.2fx | ", iter, sweep, dev, per_mode,
           iter / sweep, iter / per_mode);
    /* The bar on the fastest nonnegative iteration the backend offers. */
    const double best = nn_sweep > 0.0 && nn_sweep < iter ? nn_sweep : iter;
    if (nn_sweep > 0.0)
        printf("%.3f / %.3f | %.2fx | %.3f | %.2fx | ", nn_sweep, nn_dev, nn_sweep / sweep,
               fixed_sweep, fixed_sweep / sweep);
    else
        printf("- | - | - | - | ");
    printf("%s |\n", best <= 1.5 * sweep ? "met" : "NOT met");
    fflush(stdout);
    for (uint32_t m = 0; m < t->nmodes; ++m)
        g_free(grams[m]);
    g_free(lambda);
    g_free(scale);
    g_free(inner);
    g_free(v);
    th_call_destroy(pl, inst);
    th_plugin_unload(pl);
}

int main(int argc, char **argv)
{
    uint32_t rank = 32;
    int reps = 20;
    const char *plugins = "gpu-adaptive,gpu-scheme1,gpu-scheme2,cpu-reference";
    const char *out_path = NULL;
    int first = 1;
    int cp_apr = 0, completion = 0, nonneg = 0;
    if (argc > 1 && strcmp(argv[1], "--cp-apr") == 0) {
        cp_apr = 1;
        first = 2;
        plugins = "gpu-adaptive,gpu-scheme1,gpu-scheme2";
    } else if (argc > 1 && strcmp(argv[1], "--completion") == 0) {
        completion = 1;
        first = 2;
        plugins = "gpu-adaptive,gpu-scheme1,gpu-scheme2";
    } else if (argc > 1 && strcmp(argv[1], "--nonneg") == 0) {
        nonneg = 1;
        first = 2;
        plugins = "gpu-adaptive,gpu-scheme1,gpu-scheme2";
    }
    if (argc == 2 && strcmp(argv[1], "--ceilings") == 0) {
        /* The bounds alone, for bench/end-to-end.sh's phases. */
        printf("HBM %.0f GB/s (copy, read+write), L2 %.0f GB/s, gathers of 128-byte rows "
               "(R = 32) from L1 %.0f G/s, from L2 (a table of L2/4) %.0f G/s, from HBM (4 x "
               "L2) %.0f G/s, PCIe pinned %.1f GB/s to the "
               "device, %.1f GB/s back, host copy from pageable into pinned memory %.1f "
               "GB/s, host memory passes: read %.1f GB/s, scale in place %.1f GB/s, write into "
               "fresh memory %.1f GB/s\n",
               gpu_bench_hbm_bandwidth() * 1e-9, gpu_bench_l2_bandwidth() * 1e-9,
               gpu_bench_l1_gather_rate(32) * 1e-9, gpu_bench_table_gather_rate(32, 0.25) * 1e-9,
               gpu_bench_table_gather_rate(32, 4.0) * 1e-9, gpu_bench_pcie_bandwidth(1) * 1e-9,
               gpu_bench_pcie_bandwidth(0) * 1e-9,
               gpu_bench_host_staging_bandwidth() * 1e-9, gpu_bench_host_pass_bandwidth(0) * 1e-9,
               gpu_bench_host_pass_bandwidth(1) * 1e-9, gpu_bench_host_fresh_bandwidth() * 1e-9);
        return 0;
    }
    while (first + 1 < argc && argv[first][0] == '-') {
        if (strcmp(argv[first], "--rank") == 0)
            rank = (uint32_t)atoi(argv[first + 1]);
        else if (strcmp(argv[first], "--reps") == 0)
            reps = atoi(argv[first + 1]);
        else if (strcmp(argv[first], "--plugins") == 0)
            plugins = argv[first + 1];
        else if (strcmp(argv[first], "--out") == 0)
            out_path = argv[first + 1];
        else if (strcmp(argv[first], "--devices") == 0)
            bench_devices = argv[first + 1];
        else if (strcmp(argv[first], "--option") == 0) {
            char *eq = strchr(argv[first + 1], '=');
            if (!eq || eq == argv[first + 1] || n_bench_options == MAX_BENCH_OPTIONS) {
                fprintf(stderr, "gpu_bench: --option wants KEY=VALUE (at most %d), not '%s'\n",
                        MAX_BENCH_OPTIONS, argv[first + 1]);
                return 2;
            }
            *eq = '\0';
            bench_options[n_bench_options++] = (th_option){.key = argv[first + 1],
                                                           .value = eq + 1};
        } else
            break;
        first += 2;
    }
    if (reps < 1 || reps > MAX_REPS || rank < 1 || first >= argc) {
        fprintf(stderr, "usage: gpu_bench [--cp-apr | --completion | --nonneg] [--rank R] [--reps 1..64] "
                        "[--plugins a,b] [--out FILE] [--devices LIST] [--option KEY=VALUE]... "
                        "PRESET|PATH...\n");
        return 2;
    }
    th_log_set_level(TH_LOG_WARNING);
    struct cudaDeviceProp prop;
    char device[512];
    double hbm = 0.0, l2 = 0.0, gather_rate = 0.0;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
        hbm = gpu_bench_hbm_bandwidth();
        l2 = gpu_bench_l2_bandwidth();
        gather_rate = gpu_bench_l1_gather_rate(rank);
        snprintf(device, sizeof(device), "%s, %d SMs, L2 %d MB", prop.name,
                 prop.multiProcessorCount, prop.l2CacheSize >> 20);
        fprintf(stderr, "device %s; HBM %.0f GB/s (copy, read+write), L2 %.0f GB/s\n", device,
                hbm * 1e-9, l2 * 1e-9);
    } else if (cp_apr) { /* cpu-reference's side of it runs anywhere */
        snprintf(device, sizeof(device), "no CUDA device");
    } else {
        printf("SKIPPED: no CUDA device\n");
        return 77;
    }

    g_auto(GStrv) names = g_strsplit(plugins, ",", -1);
    if (nonneg) {
        printf("Nonnegative CP's iteration (per mode: mttkrp, V on the host, "
               "als_update_nonneg with the default passes, at most 5 as each mode's cost "
               "allows (cpd.hals_budget 0.5), at tolerance 1e-8; and as one als_sweep with "
               "every mode nonnegative, ABI 1.6, with those passes and with 5 for every mode) "
               "against a CP-ALS iteration "
               "(als_sweep; and the per-mode path), %s, medians of %d (CP-ALS: 9); times in ms "
               "(wall unless marked); bar: the faster nonnegative iteration <= 1.5x als_sweep "
               "(wall)\n\n",
               device, reps);
        printf("| tensor | plugin | rank | mttkrp per mode | als_update_nonneg per mode "
               "(passes) | nonnegative iteration | als_sweep iteration wall / device | "
               "per-mode CP-ALS iteration | nonnegative / als_sweep | nonnegative / per-mode | "
               "nonnegative als_sweep wall / device | nonnegative sweep / als_sweep | "
               "nonnegative sweep, 5 passes every mode | 5 passes / als_sweep | 1.5x bar |\n");
        printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
        for (int a = first; a < argc; ++a) {
            char name[64];
            const char *kind = NULL;
            g_autoptr(th_sptensor) t = load_input(argv[a], name, sizeof(name), &kind);
            fprintf(stderr, "%s (%s): %u modes, nnz %llu\n", name, kind, t->nmodes,
                    (unsigned long long)t->nnz);
            for (char **pn = names; *pn; ++pn)
                bench_nonneg(*pn, name, t, rank, reps);
        }
        return 0;
    }
    if (completion) {
        printf("Tensor completion's iteration (row_least_squares of every mode, ridge 1e-3, "
               "the training error fused into the solves: no reduction pass) against a CP-ALS "
               "iteration (als_sweep), %s, medians of %d (CP-ALS: 9); times in ms (wall unless "
               "marked); reduction: fused (the last mode's residual_squared against the "
               "SQUARED_RESIDUAL pass, relative, untimed); bar: completion <= 3x CP-ALS "
               "(wall)\n\n",
               device, reps);
        printf("| tensor | plugin | rank | row solve per mode | reduction | completion "
               "iteration | CP-ALS iteration wall / device | completion / CP-ALS | 3x bar | "
               "singular/empty rows per mode |\n");
        printf("|---|---|---:|---:|---:|---:|---:|---:|---|---|\n");
        for (int a = first; a < argc; ++a) {
            char name[64];
            const char *kind = NULL;
            g_autoptr(th_sptensor) t = load_input(argv[a], name, sizeof(name), &kind);
            fprintf(stderr, "%s (%s): %u modes, nnz %llu\n", name, kind, t->nmodes,
                    (unsigned long long)t->nnz);
            for (char **pn = names; *pn; ++pn)
                bench_completion(*pn, name, t, rank, reps);
        }
        return 0;
    }
    if (cp_apr) {
        printf("CP-APR inner iteration (generalized MTTKRP POISSON_RATIO + "
               "MULTIPLICATIVE_UPDATE) against the plain MTTKRP, rank %u, %s, medians of %d; "
               "times in ms; bar: iteration <= 1.5x plain (wall)\n\n",
               rank, device, reps);
        printf("| tensor | plugin | mode | I | plain wall | plain device | generalized wall | "
               "generalized device | iteration wall | iteration / plain | generalized / "
               "plain (device) | 1.5x bar |\n");
        printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
        for (int a = first; a < argc; ++a) {
            char name[64];
            const char *kind = NULL;
            g_autoptr(th_sptensor) t = load_input(argv[a], name, sizeof(name), &kind);
            fprintf(stderr, "%s (%s): %u modes, nnz %llu\n", name, kind, t->nmodes,
                    (unsigned long long)t->nnz);
            for (char **pn = names; *pn; ++pn)
                bench_cp_apr(*pn, name, t, rank, reps);
        }
        return 0;
    }
    const int max_rows = (argc - first) * (int)g_strv_length(names);
    bench_row *rows = g_new0(bench_row, max_rows);
    int n = 0;
    for (int a = first; a < argc; ++a) {
        char name[64];
        const char *kind = NULL;
        const double g0 = now_seconds();
        g_autoptr(th_sptensor) t = load_input(argv[a], name, sizeof(name), &kind);
        fprintf(stderr, "%s (%s): %u modes, nnz %llu, made in %.2f s\n", name, kind, t->nmodes,
                (unsigned long long)t->nnz, now_seconds() - g0);
        for (char **pn = names; *pn; ++pn)
            bench_plugin(*pn, name, kind, t, rank, reps, &rows[n++]);
    }
    print_report(stdout, rows, n, rank, hbm, l2, gather_rate, device);
    if (out_path) {
        FILE *f = fopen(out_path, "w");
        if (!f) {
            perror(out_path);
            return 1;
        }
        print_report(f, rows, n, rank, hbm, l2, gather_rate, device);
        fclose(f);
    }
    g_free(rows);
    return 0;
}
