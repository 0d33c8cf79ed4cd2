/* The GPU plugins load and describe themselves on any machine; create()
 * needs a device and, without one, fails with TH_ERR_NO_DEVICE and a
 * message whatever the options, which is what lets `plugin = "auto"` fall
 * back to cpu-reference.
 * Runs (and passes) with or without a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "test_support.h"

static void check_plugin(const char *id)
{
    g_autofree char *path = g_strdup_printf("%s/%s.so", TH_PLUGIN_DIR, id);
    th_plugin *pl = th_test_load_plugin(path);
    assert_string_equal(pl->info->id, id);
    assert_true(pl->info->flags & TH_CAP_GPU);
    assert_true(pl->info->max_modes >= 8);
    assert_int_equal(pl->info->max_rank, 128);
    assert_non_null(pl->entry.als_update);

    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    const int have_device = e == cudaSuccess && count > 0;
    th_instance *inst = NULL;
    char err[TH_ERROR_SIZE] = "";
    const th_status st = pl->entry.create(NULL, 0, &pl->services, &inst, err);
    if (have_device) {
        th_test_assert_ok(st, err);
        assert_non_null(inst);
        pl->entry.destroy(inst);
    } else {
        printf("%s without a device: %s: %s\n", id, th_status_name(st), err);
        assert_int_equal(st, TH_ERR_NO_DEVICE);
        assert_null(inst);
        assert_non_null(strstr(err, "no usable CUDA device"));
    }
    /* No device is said before any option is judged, so "auto" falls back
     * whatever the options hold; with a device, a bad option is an error. */
    th_option bad = {.key = "kapa", .value = "4"};
    const th_status bad_status = pl->entry.create(&bad, 1, &pl->services, &inst, err);
    if (have_device) {
        assert_int_equal(bad_status, TH_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(err, "unknown option \"kapa\""));
    } else {
        assert_int_equal(bad_status, TH_ERR_NO_DEVICE);
    }
    th_plugin_unload(pl);
}

static void test_gpu_adaptive_loads(void **state)
{
    (void)state;
    check_plugin("gpu-adaptive");
}

static void test_gpu_scheme1_loads(void **state)
{
    (void)state;
    check_plugin("gpu-scheme1");
}

static void test_gpu_scheme2_loads(void **state)
{
    (void)state;
    check_plugin("gpu-scheme2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_adaptive_loads),
        cmocka_unit_test(test_gpu_scheme1_loads),
        cmocka_unit_test(test_gpu_scheme2_loads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
