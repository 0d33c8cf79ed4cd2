#include "gpu_test_support.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "tensor/synth.h"
#include "test_support.h"

const char *const th_gpu_test_plugin_ids[TH_GPU_TEST_N_PLUGINS] = {"gpu-adaptive", "gpu-scheme1",
                                                                   "gpu-scheme2"};

char *th_gpu_test_plugin_path(const char *id)
{
    return g_strdup_printf("%s/%s.so", TH_PLUGIN_DIR, id);
}

int th_gpu_test_setup_plugins(void **state)
{
    /* The state first: a plugin that fails to load ends the setup at once,
     * and the teardown then unloads what did load. */
    th_gpu_test_plugins *p = g_new0(th_gpu_test_plugins, 1);
    *state = p;
    p->ref = th_test_load_cpu_reference();
    for (uint32_t i = 0; i < TH_GPU_TEST_N_PLUGINS; ++i) {
        g_autofree char *path = th_gpu_test_plugin_path(th_gpu_test_plugin_ids[i]);
        p->gpu[i] = th_test_load_plugin(path);
    }
    return 0;
}

int th_gpu_test_teardown_plugins(void **state)
{
    th_gpu_test_plugins *p = *state;
    if (p == NULL)
        return 0;
    for (uint32_t i = 0; i < TH_GPU_TEST_N_PLUGINS; ++i)
        th_plugin_unload(p->gpu[i]);
    th_plugin_unload(p->ref);
    g_free(p);
    return 0;
}

int th_gpu_test_quick(void)
{
    const char *q = getenv("TH_GPU_TEST_QUICK");
    return q && strcmp(q, "0") != 0;
}

void th_gpu_test_apply_filter(void)
{
    const char *pattern = getenv("TH_GPU_TEST_FILTER");
    if (pattern && *pattern)
        cmocka_set_test_filter(pattern);
}

th_sptensor *th_gpu_test_make_tensor(const th_gpu_test_case *c, uint64_t seed)
{
    th_synth_params params;
    memset(&params, 0, sizeof(params));
    params.nmodes = c->nmodes;
    params.nnz = c->nnz;
    params.seed = seed;
    for (uint32_t m = 0; m < c->nmodes; ++m) {
        params.dims[m] = c->dims[m];
        params.skew[m] = c->skew[m];
    }
    g_autoptr(GError) error = NULL;
    th_sptensor *t = th_synth_generate(&params, &error);
    if (!t)
        fail_msg("generating '%s': %s", c->name, error ? error->message : "?");
    return t;
}

int th_gpu_test_have_device(void)
{
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaSuccess && count > 0)
        return 1;
    printf("SKIPPED: no CUDA device: %s\n", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return 0;
}

void th_gpu_test_run_mode(const th_plugin *plugin, th_instance *inst, const th_sptensor *t,
                          uint32_t rank, uint32_t mode, double *out)
{
    char err[TH_ERROR_SIZE] = "";
    const size_t n = (size_t)t->dims[mode] * rank;
    for (size_t k = 0; k < n; ++k)
        out[k] = NAN;
    th_test_assert_ok(plugin->entry.mttkrp(inst, mode, err), err);
    th_test_assert_ok(plugin->entry.get_mttkrp_result(inst, mode, out, err), err);
}
