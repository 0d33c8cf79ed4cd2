/* The current host keeps loading a plugin built against the frozen ABI 1.0
 * header (fixture_frozen_v1_0) and computes with it: load through
 * th_plugin_load, one MTTKRP checked by hand, and the optional queries whose
 * structs the host sizes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "log.h"
#include "plugin_loader.h"

#define FROZEN_PLUGIN TH_ABI_PLUGIN_DIR "/fixture_frozen_v1_0.so"

/* A 2 x 2 x 2 tensor with three nonzeros, rank 2. */
static const uint32_t dims[3] = {2, 2, 2};
static const uint32_t i0[3] = {0, 1, 1}, i1[3] = {0, 0, 1}, i2[3] = {1, 0, 1};
static const uint32_t *const indices[3] = {i0, i1, i2};
static const double values[3] = {2.0, 3.0, 5.0};

static void test_frozen_plugin_loads_and_computes(void **state)
{
    (void)state;
    th_host_services services = th_host_services_make();
    GError *error = NULL;
    th_plugin *plugin = th_plugin_load(FROZEN_PLUGIN, &services, &error);
    assert_null(error);
    assert_non_null(plugin);
    assert_string_equal(plugin->info->id, "fixture_frozen_v1_0");
    assert_int_equal(plugin->plugin_entry_size, TH_PLUGIN_ENTRY_V1_0_SIZE);
    assert_null(plugin->entry.als_update);

    char err[TH_ERROR_SIZE] = "";
    th_instance *inst = NULL;
    assert_int_equal(plugin->entry.create(NULL, 0, &plugin->services, &inst, err), TH_OK);
    th_coo_tensor coo = {.struct_size = sizeof coo, .nmodes = 3, .nnz = 3, .dims = dims,
                         .indices = indices, .values = values, .norm_squared = 38.0};
    assert_int_equal(plugin->entry.load_tensor(inst, &coo, 2, err), TH_OK);
    /* Rows of A1 and A2: row 0 = (1, 2), row 1 = (3, 4). */
    const double factor[4] = {1, 2, 3, 4};
    for (uint32_t m = 0; m < 3; m++)
        assert_int_equal(plugin->entry.set_factor(inst, m, factor, err), TH_OK);
    assert_int_equal(plugin->entry.mttkrp(inst, 0, err), TH_OK);
    double result[4] = {0};
    assert_int_equal(plugin->entry.get_mttkrp_result(inst, 0, result, err), TH_OK);
    /* M(0,:) = 2 * A1(0,:) * A2(1,:) = 2 * (1*3, 2*4) = (6, 16);
     * M(1,:) = 3 * A1(0,:) * A2(0,:) + 5 * A1(1,:) * A2(1,:)
     *        = (3*1*1 + 5*3*3, 3*2*2 + 5*4*4) = (48, 92). */
    const double expected[4] = {6, 16, 48, 92};
    for (int k = 0; k < 4; k++)
        assert_float_equal(result[k], expected[k], 1e-12);

    th_runtime_info runtime;
    assert_true(th_plugin_runtime_info(plugin, inst, &runtime, &error));
    assert_string_equal(runtime.device, "CPU (ABI 1.0 fixture)");
    assert_string_equal(runtime.details, "built_against=1.0");
    th_mode_info mode;
    assert_true(th_plugin_mode_info(plugin, inst, 0, &mode, &error));
    assert_string_equal(mode.scheme, "naive-coo");

    plugin->entry.destroy(inst);
    th_plugin_unload(plugin);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frozen_plugin_loads_and_computes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
