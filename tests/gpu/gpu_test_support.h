/* What the GPU test programs share: the three GPU plugins beside
 * cpu-reference as a cmocka group state, synthetic test tensors, the quick
 * (compute-sanitizer) switch, and the skip rule without a CUDA device. */
#ifndef TH_GPU_TEST_SUPPORT_H
#define TH_GPU_TEST_SUPPORT_H

#include <stdint.h>

#include "plugin/plugin_loader.h"
#include "tensor/sptensor.h"

#define TH_GPU_TEST_N_PLUGINS 3u

/* "gpu-adaptive", "gpu-scheme1", "gpu-scheme2". */
extern const char *const th_gpu_test_plugin_ids[TH_GPU_TEST_N_PLUGINS];

typedef struct th_gpu_test_plugins {
    th_plugin *ref; /* cpu-reference */
    th_plugin *gpu[TH_GPU_TEST_N_PLUGINS];
} th_gpu_test_plugins;

/* cmocka group setup/teardown: *state becomes a th_gpu_test_plugins. */
int th_gpu_test_setup_plugins(void **state);
int th_gpu_test_teardown_plugins(void **state);

/* The built plugin `id` in TH_PLUGIN_DIR; free with g_free. */
char *th_gpu_test_plugin_path(const char *id);

/* TH_GPU_TEST_QUICK=1: a small subset, for compute-sanitizer. */
int th_gpu_test_quick(void);

/* TH_GPU_TEST_FILTER=PATTERN: only the tests whose names match (cmocka's
 * pattern: * and ? wildcards), so a slow program's tests can run as
 * separate processes side by side under a sanitizer. Call before
 * cmocka_run_group_tests. */
void th_gpu_test_apply_filter(void);

/* A synthetic tensor (libtensorhost/tensor/synth.h) of the given shape and skew. */
typedef struct th_gpu_test_case {
    const char *name;
    uint32_t nmodes;
    th_index dims[8];
    uint64_t nnz;
    double skew[8];
} th_gpu_test_case;
th_sptensor *th_gpu_test_make_tensor(const th_gpu_test_case *c, uint64_t seed);

/* Runs mttkrp on `mode` and copies the result out into out (dims[mode] x
 * rank); the buffer is poisoned with NaN first, so an entry the plugin
 * never writes cannot pass. Fails the test on an error. */
void th_gpu_test_run_mode(const th_plugin *plugin, th_instance *inst, const th_sptensor *t,
                          uint32_t rank, uint32_t mode, double *out);

/* 1 with a CUDA device; else prints "SKIPPED: no CUDA device: why" and
 * returns 0, after which main returns 77 (ctest: skipped). */
int th_gpu_test_have_device(void);

#endif
