/* First-cut GPU MTTKRP benchmark: FROSTT-shaped synthetic tensors (the
 * presets of host/synth.h) through the GPU plugins' ABI, R = 32 by default.
 *
 *   gpu_bench [--rank R] [--reps N] [--plugins a,b,c] PRESET...
 *
 * Per plugin and tensor: preprocessing (load_tensor wall time and the
 * device-side build time), each mode's MTTKRP kernel time (CUDA events, as
 * the plugin reports them; median over N runs after warm-up), the all-mode
 * sum, and one CP-ALS iteration (mttkrp + als_update per mode, wall time).
 * Also prints the device-to-device copy bandwidth measured here and the
 * bytes the method must stream, for the floor in kernels/NOTES.md. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <glib.h>

#include "log.h"
#include "plugin_loader.h"
#include "synth.h"

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

/* Device-to-device copy bandwidth, bytes read + written per second. */
static double copy_bandwidth(void)
{
    const size_t bytes = (size_t)1 << 30;
    void *a = NULL, *b = NULL;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) {
        cudaFree(a);
        return 0.0;
    }
    cudaMemset(a, 1, bytes);
    cudaEvent_t s, e;
    cudaEventCreate(&s);
    cudaEventCreate(&e);
    double t[10];
    for (int i = 0; i < 12; ++i) {
        cudaEventRecord(s, 0);
        cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
        cudaEventRecord(e, 0);
        cudaEventSynchronize(e);
        float ms = 0;
        cudaEventElapsedTime(&ms, s, e);
        if (i >= 2)
            t[i - 2] = ms * 1e-3;
    }
    cudaEventDestroy(s);
    cudaEventDestroy(e);
    cudaFree(a);
    cudaFree(b);
    return 2.0 * bytes / median(t, 10);
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

static void bench_plugin(const char *plugin_name, const char *preset, const th_sptensor *t,
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
    char err[TH_ERROR_SIZE] = "";
    th_instance *inst = NULL;
    CHECK(pl->entry.create(NULL, 0, &pl->services, &inst, err));
    th_coo_tensor view = {.struct_size = sizeof(view),
                          .nmodes = t->nmodes,
                          .nnz = t->nnz,
                          .dims = t->dims,
                          .indices = (const uint32_t *const *)t->indices,
                          .values = t->values};
    const double t0 = now_seconds();
    CHECK(pl->entry.load_tensor(inst, &view, rank, err));
    const double load_s = now_seconds() - t0;

    GRand *rng = g_rand_new_with_seed(42);
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        const size_t n = (size_t)t->dims[m] * rank;
        double *f = g_new(double, n);
        for (size_t k = 0; k < n; ++k)
            f[k] = g_rand_double_range(rng, 0.0, 1.0);
        CHECK(pl->entry.set_factor(inst, m, f, err));
        g_free(f);
    }
    g_rand_free(rng);

    double mode_times[16][64];
    double sums[64], walls[64];
    for (int rep = -3; rep < reps; ++rep) {
        double sum = 0.0;
        const double w0 = now_seconds();
        for (uint32_t m = 0; m < t->nmodes; ++m) {
            CHECK(pl->entry.mttkrp(inst, m, err));
            th_mode_info mi = {.struct_size = sizeof(mi)};
            CHECK(pl->entry.get_mode_info(inst, m, &mi, err));
            if (rep >= 0)
                mode_times[m][rep] = mi.last_mttkrp_seconds;
            sum += mi.last_mttkrp_seconds;
        }
        if (rep >= 0) {
            walls[rep] = now_seconds() - w0;
            sums[rep] = sum;
        }
    }
    /* One CP-ALS iteration: per mode an MTTKRP and the on-device update. */
    double *w = g_new0(double, (size_t)rank * rank);
    for (uint32_t r = 0; r < rank; ++r)
        w[(size_t)r * rank + r] = 1.0;
    double *lambda = g_new(double, rank), *gram = g_new(double, (size_t)rank * rank),
           *inner = g_new(double, rank);
    th_als_output out = {.struct_size = sizeof(out), .lambda = lambda, .gram = gram,
                         .inner = inner};
    double als[16];
    for (int rep = -2; rep < 9; ++rep) {
        const double a0 = now_seconds();
        for (uint32_t m = 0; m < t->nmodes; ++m) {
            CHECK(pl->entry.mttkrp(inst, m, err));
            CHECK(pl->entry.als_update(inst, m, w, TH_NORM_MAX, &out, err));
        }
        if (rep >= 0)
            als[rep] = now_seconds() - a0;
    }
    th_runtime_info ri = {.struct_size = sizeof(ri)};
    CHECK(pl->entry.get_runtime_info(inst, &ri, err));

    printf("%-8s %-13s load %7.2f ms |", preset, plugin_name, load_s * 1e3);
    for (uint32_t m = 0; m < t->nmodes; ++m)
        printf(" m%u %.4f", m, median(mode_times[m], reps) * 1e3);
    printf(" | all-modes %.4f ms (wall %.4f) | ALS iter %.4f ms | %s\n",
           median(sums, reps) * 1e3, median(walls, reps) * 1e3, median(als, 9) * 1e3,
           ri.details);
    g_free(w);
    g_free(lambda);
    g_free(gram);
    g_free(inner);
    pl->entry.destroy(inst);
    th_plugin_unload(pl);
}

int main(int argc, char **argv)
{
    uint32_t rank = 32;
    int reps = 20;
    const char *plugins = "gpu-adaptive,gpu-scheme1,gpu-scheme2";
    int first = 1;
    while (first + 1 < argc && argv[first][0] == '-') {
        if (strcmp(argv[first], "--rank") == 0)
            rank = (uint32_t)atoi(argv[first + 1]);
        else if (strcmp(argv[first], "--reps") == 0)
            reps = atoi(argv[first + 1]);
        else if (strcmp(argv[first], "--plugins") == 0)
            plugins = argv[first + 1];
        else
            break;
        first += 2;
    }
    if (reps < 1 || reps > 64 || rank < 1 || first >= argc) {
        fprintf(stderr, "usage: gpu_bench [--rank R] [--reps 1..64] [--plugins a,b] PRESET...\n");
        return 2;
    }
    th_log_set_level(TH_LOG_WARNING);
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        printf("SKIPPED: no CUDA device\n");
        return 77;
    }
    const double bw = copy_bandwidth();
    printf("device %s, %d SMs, L2 %d MB; device copy %.0f GB/s (read+write)\n", prop.name,
           prop.multiProcessorCount, prop.l2CacheSize >> 20, bw * 1e-9);
    g_auto(GStrv) names = g_strsplit(plugins, ",", -1);
    for (int a = first; a < argc; ++a) {
        const th_synth_preset *preset = th_synth_find_preset(argv[a]);
        if (!preset) {
            fprintf(stderr, "unknown preset %s\n", argv[a]);
            return 2;
        }
        th_synth_params params;
        th_synth_params_from_preset(&params, preset, 1);
        g_autoptr(GError) error = NULL;
        const double g0 = now_seconds();
        g_autoptr(th_sptensor) t = th_synth_generate(&params, &error);
        if (!t) {
            fprintf(stderr, "%s\n", error->message);
            return 1;
        }
        const double n = (double)t->nmodes;
        const double stream_bytes = n * t->nnz * (n + 1) * 4;
        const double gather_bytes = (double)t->nnz * n * (n - 1) * rank * 4;
        printf("%s: nnz %llu (generated in %.2f s); copies %.1f MB (stream floor %.3f ms), "
               "gathers %.1f MB\n",
               preset->name, (unsigned long long)t->nnz, now_seconds() - g0,
               stream_bytes * 1e-6, bw > 0 ? stream_bytes / bw * 1e3 : 0.0,
               gather_bytes * 1e-6);
        for (char **name = names; *name; ++name)
            bench_plugin(*name, preset->name, t, rank, reps);
    }
    return 0;
}
