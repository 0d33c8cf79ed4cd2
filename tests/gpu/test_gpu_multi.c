/* The GPU plugins over several ranks (the devices option, kernels/group.cu):
 * every mode's MTTKRP against cpu-reference and CP-ALS fits against the
 * same plugin on one device, through the same code path whether the ranks
 * share one device ("0,0,0": virtual shards, exchanging by device copies)
 * or have a device each ("0,1": NCCL, when two devices are visible). The
 * tensors have hot rows that the shares split, modes shorter than the rank
 * count (several ranks' shares inside one row) and empty rows.
 * Also: the option's refusals, and a load refused by the memory plan before
 * any allocation.
 *
 * Needs a CUDA device: without one it prints "SKIPPED: ..." and exits 77. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <glib.h>

#include "plugin/backend.h"
#include "cpd/cp_als.h"
#include "gpu_test_support.h"
#include "test_support.h"

#define TOLERANCE 1e-5
#define FIT_TOLERANCE 1e-5
#define ITERATIONS 20u

static const th_gpu_test_case cases[] = {
    {"3 modes, one hot row", 3, {300, 1000, 1000}, 50021, {3.0, 0, 0}},
    {"4 modes, skewed, a 2-row mode", 4, {2, 300, 7000, 13}, 20011, {0, 1.2, 1.5, 0.8}},
    {"5 modes, empty slices", 5, {17, 5000, 3, 260, 90}, 9973, {1.0, 1.5, 0, 1.1, 0.5}},
};
#define N_CASES (sizeof(cases) / sizeof(cases[0]))

static int device_count(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

/* The device lists tested: virtual shards always, distinct devices when
 * there are two or more. */
static const char *const virtual_lists[] = {"0,0", "0,0,0", "0,0,0,0,0"};
static const char *const distinct_lists[] = {"0,1", "all"};

/* Quick (sanitizer) runs: gpu-adaptive alone. The three plugins share the
 * multi-device path and differ in the scheme each share takes; under a
 * sanitizer every instance's NCCL set-up costs tens of seconds. */
static uint32_t quick_plugins(void) { return th_gpu_test_quick() ? 1u : TH_GPU_TEST_N_PLUGINS; }

/* Mode m's MTTKRP by `plugin`'s `inst` against cpu-reference's `ref`
 * (both loaded with t and the same factors): the relative error. */
static double mode_error(const th_gpu_test_plugins *p, th_instance *ref, const th_plugin *plugin,
                         th_instance *inst, const th_sptensor *t, uint32_t rank, uint32_t m)
{
    const size_t n = (size_t)t->dims[m] * rank;
    g_autofree double *want = g_new(double, n);
    g_autofree double *got = g_new(double, n);
    th_gpu_test_run_mode(p->ref, ref, t, rank, m, want);
    th_gpu_test_run_mode(plugin, inst, t, rank, m, got);
    return th_test_relative_error(got, want, n);
}

static void check_mttkrp(const th_gpu_test_plugins *p, const char *devices, unsigned *checked)
{
    GRand *rng = g_rand_new_with_seed(7);
    static const uint32_t ranks[] = {7, 32};
    for (size_t c = 0; c < N_CASES; ++c) {
        if (th_gpu_test_quick() && c != 0)
            continue;
        g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[c], 300 + c);
        for (size_t ri = 0; ri < G_N_ELEMENTS(ranks); ++ri) {
            const uint32_t rank = ranks[ri];
            if (th_gpu_test_quick() && ri > 0)
                continue;
            double **factors = th_test_random_factors(t, rank, rng);
            th_instance *ref = th_test_create_instance(p->ref, NULL);
            th_test_load_and_set(p->ref, ref, t, rank, factors);
            for (uint32_t g = 0; g < quick_plugins(); ++g) {
                th_instance *inst = th_test_create_instance(p->gpu[g], "devices", devices, NULL);
                th_test_load_and_set(p->gpu[g], inst, t, rank, factors);
                for (uint32_t m = 0; m < t->nmodes; ++m) {
                    const double e = mode_error(p, ref, p->gpu[g], inst, t, rank, m);
                    if (!(e < TOLERANCE))
                        fail_msg("%s, devices %s (%s): rank %u mode %u (I=%u): relative error "
                                 "%.3g >= %g",
                                 cases[c].name, devices, p->gpu[g]->info->id, rank, m,
                                 t->dims[m], e, TOLERANCE);
                    ++*checked;
                }
                p->gpu[g]->entry.destroy(inst);
            }
            p->ref->entry.destroy(ref);
            th_test_free_factors(factors, t->nmodes);
        }
    }
    g_rand_free(rng);
}

static void test_mttkrp_virtual_ranks(void **state)
{
    unsigned checked = 0;
    /* Quick (sanitizer) runs: three ranks only. */
    for (size_t k = th_gpu_test_quick() ? 1 : 0; k < G_N_ELEMENTS(virtual_lists); ++k) {
        check_mttkrp(*state, virtual_lists[k], &checked);
        if (th_gpu_test_quick())
            break;
    }
    printf("checked %u mode results on virtual ranks against cpu-reference\n", checked);
}

static void test_mttkrp_devices(void **state)
{
    if (device_count() < 2)
        skip();
    unsigned checked = 0;
    /* Quick runs: "0,1" alone ("all" is the same two on a two-GPU host). */
    for (size_t k = 0; k < (th_gpu_test_quick() ? 1 : G_N_ELEMENTS(distinct_lists)); ++k)
        check_mttkrp(*state, distinct_lists[k], &checked);
    printf("checked %u mode results on %d devices against cpu-reference\n", checked,
           device_count());
}

/* CP-ALS through the plugin with `devices` (NULL: one device), `path`. */
static double run_fit(th_plugin *plugin, const char *devices, const th_sptensor *t,
                      uint32_t rank, th_update_path path)
{
    th_instance *inst = devices ? th_test_create_instance(plugin, "devices", devices, NULL)
                                : th_test_create_instance(plugin, NULL);
    th_coo_tensor view;
    th_test_coo_view(t, &view);
    char err[TH_ERROR_SIZE] = "";
    th_test_assert_ok(plugin->entry.load_tensor(inst, &view, rank, err), err);
    th_backend backend = th_backend_borrow(plugin, inst, t->nmodes, rank, t->dims);
    th_cpd_params params = {
        .rank = rank, .max_iters = ITERATIONS, .tolerance = 0, .seed = 42, .update = path};
    g_autoptr(GError) error = NULL;
    g_autoptr(th_cpd_result) r = th_cp_als(&backend, t, &params, NULL, &error);
    if (!r)
        fail_msg("%s devices %s: cp_als: %s", plugin->info->id, devices ? devices : "(one)",
                 error->message);
    assert_int_equal(r->iterations->len, ITERATIONS);
    if (r->update_path != path)
        fail_msg("%s: asked for the %s path, ran %s", plugin->info->id,
                 th_update_path_name(path), th_update_path_name(r->update_path));
    const double fit = r->fit;
    plugin->entry.destroy(inst);
    return fit;
}

static void check_fits(const th_gpu_test_plugins *p, const char *const *lists, size_t nlists)
{
    static const th_update_path paths[] = {TH_UPDATE_SWEEP, TH_UPDATE_MODE};
    for (size_t c = 0; c < N_CASES; ++c) {
        if (th_gpu_test_quick() && c != 0)
            continue;
        g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[c], 500 + c);
        const uint32_t rank = 16;
        for (uint32_t g = 0; g < quick_plugins(); ++g)
            for (size_t k = 0; k < (th_gpu_test_quick() ? 1 : G_N_ELEMENTS(paths)); ++k) {
                const double single = run_fit(p->gpu[g], NULL, t, rank, paths[k]);
                for (size_t d = 0; d < nlists; ++d) {
                    const double fit = run_fit(p->gpu[g], lists[d], t, rank, paths[k]);
                    printf("%s, %s/%s: fit %.8f on one device, %+.2e on devices %s\n",
                           cases[c].name, p->gpu[g]->info->id, th_update_path_name(paths[k]),
                           single, fit - single, lists[d]);
                    if (!(fabs(fit - single) < FIT_TOLERANCE))
                        fail_msg("%s: %s (%s path) on devices %s: fit %.8f, on one device "
                                 "%.8f",
                                 cases[c].name, p->gpu[g]->info->id,
                                 th_update_path_name(paths[k]), lists[d], fit, single);
                }
            }
    }
}

static void test_cp_als_virtual_ranks(void **state)
{
    check_fits(*state, virtual_lists, th_gpu_test_quick() ? 1 : 2);
}

static void test_cp_als_devices(void **state)
{
    if (device_count() < 2)
        skip();
    check_fits(*state, distinct_lists, 1);
}

/* The sweep on several devices as stream launches (TH_GPU_NO_GRAPHS=1,
 * read when the instance is created) instead of a graph a rank: the fit
 * of one device. */
static void test_cp_als_devices_without_graphs(void **state)
{
    if (device_count() < 2)
        skip();
    const th_gpu_test_plugins *p = *state;
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[0], 500);
    const uint32_t rank = 16;
    const double single = run_fit(p->gpu[0], NULL, t, rank, TH_UPDATE_SWEEP);
    g_setenv("TH_GPU_NO_GRAPHS", "1", TRUE);
    const double fit = run_fit(p->gpu[0], "all", t, rank, TH_UPDATE_SWEEP);
    g_unsetenv("TH_GPU_NO_GRAPHS");
    printf("%s, %s/sweep without graphs: fit %.8f on one device, %+.2e on all devices\n",
           cases[0].name, p->gpu[0]->info->id, single, fit - single);
    if (!(fabs(fit - single) < FIT_TOLERANCE))
        fail_msg("%s without graphs on all devices: fit %.8f, on one device %.8f",
                 cases[0].name, fit, single);
}

/* One instance loaded with one tensor, then another of other sizes: the
 * ranks' factors are freed and allocated again, and on NCCL's devices
 * deregistered and registered again (thg_group_unload); both tensors'
 * MTTKRPs match cpu-reference. */
static void test_reload(void **state)
{
    const th_gpu_test_plugins *p = *state;
    const char *lists[] = {"0,0", device_count() >= 2 ? "0,1" : NULL};
    GRand *rng = g_rand_new_with_seed(11);
    for (size_t d = 0; d < G_N_ELEMENTS(lists) && lists[d]; ++d) {
        th_instance *inst = th_test_create_instance(p->gpu[0], "devices", lists[d], NULL);
        for (size_t c = 0; c < 2; ++c) {
            g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[c], 900 + c);
            const uint32_t rank = 8;
            double **factors = th_test_random_factors(t, rank, rng);
            th_instance *ref = th_test_create_instance(p->ref, NULL);
            th_test_load_and_set(p->ref, ref, t, rank, factors);
            th_test_load_and_set(p->gpu[0], inst, t, rank, factors);
            for (uint32_t m = 0; m < t->nmodes; ++m) {
                const double e = mode_error(p, ref, p->gpu[0], inst, t, rank, m);
                printf("devices %s, tensor %zu (%s) mode %u: relative error %.2e\n", lists[d],
                       c + 1, cases[c].name, m, e);
                if (!(e < TOLERANCE))
                    fail_msg("devices %s, tensor %zu after a reload: mode %u relative error %.3g",
                             lists[d], c + 1, m, e);
            }
            p->ref->entry.destroy(ref);
            th_test_free_factors(factors, t->nmodes);
        }
        p->gpu[0]->entry.destroy(inst);
    }
    g_rand_free(rng);
}

/* Values a million times larger: every update's lambda is out of bounds,
 * so every fold normalises its factor (fold_kernel's rare path), on every
 * rank alike, in the sweep and on the per-mode path. The fits equal one
 * device's, which normalises in its own scale kernel. */
static void test_cp_als_rescaled(void **state)
{
    const th_gpu_test_plugins *p = *state;
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[0], 700);
    for (uint64_t k = 0; k < t->nnz; ++k)
        t->values[k] *= 1e6;
    const char *lists[] = {"0,0,0", device_count() >= 2 ? "0,1" : NULL};
    static const th_update_path paths[] = {TH_UPDATE_SWEEP, TH_UPDATE_MODE};
    for (size_t k = 0; k < G_N_ELEMENTS(paths); ++k) {
        const double single = run_fit(p->gpu[0], NULL, t, 16, paths[k]);
        for (size_t d = 0; d < G_N_ELEMENTS(lists) && lists[d]; ++d) {
            const double fit = run_fit(p->gpu[0], lists[d], t, 16, paths[k]);
            printf("values x 1e6, %s: fit %.8f on one device, %+.2e on devices %s\n",
                   th_update_path_name(paths[k]), single, fit - single, lists[d]);
            if (!(fabs(fit - single) < FIT_TOLERANCE))
                fail_msg("values x 1e6, %s path, devices %s: fit %.8f, on one device %.8f",
                         th_update_path_name(paths[k]), lists[d], fit, single);
        }
    }
}

/* create() with devices=`value` (and device=0 when `with_device`) fails
 * with `want` and a message holding `fragment`. */
static void expect_create_error(const th_plugin *plugin, const char *value, int with_device,
                                th_status want, const char *fragment)
{
    const th_option options[2] = {{"devices", value}, {"device", "0"}};
    th_instance *inst = NULL;
    char err[TH_ERROR_SIZE] = "";
    const th_status st = plugin->entry.create(options, with_device ? 2 : 1, NULL, &inst, err);
    if (st != want || strstr(err, fragment) == NULL)
        fail_msg("devices=%s: status %d (%s), wanted %d with \"%s\"", value, (int)st, err,
                 (int)want, fragment);
    printf("devices=\"%s\"%s: %s\n", value, with_device ? " device=0" : "", err);
}

static void test_option_refusals(void **state)
{
    const th_gpu_test_plugins *p = *state;
    const th_plugin *plugin = p->gpu[0];
    expect_create_error(plugin, "", 0, TH_ERR_INVALID_ARGUMENT, "option devices");
    expect_create_error(plugin, "0,", 0, TH_ERR_INVALID_ARGUMENT, "option devices");
    expect_create_error(plugin, "0;1", 0, TH_ERR_INVALID_ARGUMENT, "option devices");
    expect_create_error(plugin, "-1", 0, TH_ERR_INVALID_ARGUMENT, "option devices");
    expect_create_error(plugin, "0,0", 1, TH_ERR_INVALID_ARGUMENT, "give one");
    char list[16];
    snprintf(list, sizeof list, "0,%d", device_count());
    expect_create_error(plugin, list, 0, TH_ERR_INVALID_ARGUMENT, "does not exist");
    if (device_count() >= 2)
        expect_create_error(plugin, "0,0,1,1", 0, TH_ERR_UNSUPPORTED, "device");
    /* A tensor with fewer nonzeros than ranks. */
    static const th_gpu_test_case tiny = {"two nonzeros", 3, {4, 5, 6}, 2, {0}};
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&tiny, 1);
    th_coo_tensor view;
    th_test_coo_view(t, &view);
    th_instance *inst = th_test_create_instance(plugin, "devices", "0,0,0", NULL);
    char err[TH_ERROR_SIZE] = "";
    assert_int_equal(plugin->entry.load_tensor(inst, &view, 4, err), TH_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "fewer than the 3 devices"));
    plugin->entry.destroy(inst);
}

/* The plan refuses, before any rank allocates, a tensor that does not fit
 * its ranks' free memory, and says how many devices would hold it. */
static void test_memory_plan_refusal(void **state)
{
    const th_gpu_test_plugins *p = *state;
    static const th_gpu_test_case dense = {"1M nonzeros", 3, {1000, 1000, 1000}, 1000000, {0}};
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&dense, 5);
    th_coo_tensor view;
    th_test_coo_view(t, &view);
    g_setenv("TH_GPU_TEST_FREE_BYTES", "40000000", TRUE);
    th_instance *inst = th_test_create_instance(p->gpu[0], "devices", "0,0", NULL);
    g_unsetenv("TH_GPU_TEST_FREE_BYTES");
    char err[TH_ERROR_SIZE] = "";
    assert_int_equal(p->gpu[0]->entry.load_tensor(inst, &view, 8, err), TH_ERR_OUT_OF_MEMORY);
    printf("two virtual ranks capped at 40 MB: %s\n", err);
    assert_non_null(strstr(err, "tensor does not fit on 2 ranks: device 0 would hold"));
    const char *advice = strstr(err, "its nonzeros shared out over ");
    assert_non_null(advice);
    unsigned devices = 0;
    assert_int_equal(sscanf(advice, "its nonzeros shared out over %u such devices", &devices),
                     1);
    assert_true(devices >= 2 && devices <= 8);
    p->gpu[0]->entry.destroy(inst);
}

/* The host's memory for the share buffers is asked before they are
 * allocated: short, the load says what the largest rank's shares need and
 * how many devices would lower it enough; the instance stays usable, and
 * loads once the host has the memory. */
static void test_host_memory_refusal(void **state)
{
    const th_gpu_test_plugins *p = *state;
    static const th_gpu_test_case dense = {"1M nonzeros", 3, {1000, 1000, 1000}, 1000000, {0}};
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&dense, 5);
    th_coo_tensor view;
    th_test_coo_view(t, &view);
    th_instance *inst = th_test_create_instance(p->gpu[0], "devices", "0,0", NULL);
    /* Three modes' shares of 500,000 nonzeros, 20 bytes each: 30 MB. */
    g_setenv("TH_TEST_HOST_FREE_BYTES", "1000000", TRUE);
    char err[TH_ERROR_SIZE] = "";
    assert_int_equal(p->gpu[0]->entry.load_tensor(inst, &view, 8, err), TH_ERR_OUT_OF_MEMORY);
    g_unsetenv("TH_TEST_HOST_FREE_BYTES");
    printf("two virtual ranks, the host capped at 1 MB: %s\n", err);
    assert_non_null(strstr(err, "the host cannot hold the shares while they are handed over"));
    assert_non_null(strstr(err, "976.6 KiB is free (TH_TEST_HOST_FREE_BYTES)"));
    assert_non_null(strstr(err, "(over 60 devices: 976.6 KiB)"));
    err[0] = '\0';
    assert_int_equal(p->gpu[0]->entry.load_tensor(inst, &view, 8, err), TH_OK);
    p->gpu[0]->entry.destroy(inst);
}

/* Runtime and mode info name the ranks, their transport and each mode's
 * time in collectives. */
static void test_runtime_info(void **state)
{
    const th_gpu_test_plugins *p = *state;
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[0], 9);
    GRand *rng = g_rand_new_with_seed(3);
    double **factors = th_test_random_factors(t, 8, rng);
    th_instance *inst = th_test_create_instance(p->gpu[0], "devices", "0,0,0", NULL);
    th_test_load_and_set(p->gpu[0], inst, t, 8, factors);
    char err[TH_ERROR_SIZE] = "";
    th_test_assert_ok(p->gpu[0]->entry.mttkrp(inst, 1, err), err);
    th_runtime_info info = {.struct_size = sizeof info};
    th_test_assert_ok(p->gpu[0]->entry.get_runtime_info(inst, &info, err), err);
    printf("device: %s\ndetails: %s\n", info.device, info.details);
    assert_non_null(strstr(info.device, "x 3 (devices 0,0,0)"));
    assert_non_null(strstr(info.details, "devices=0,0,0 comm=\"3 ranks on device 0"));
    assert_non_null(strstr(info.details, " comm_ms="));
    th_mode_info mode = {.struct_size = sizeof mode};
    th_test_assert_ok(p->gpu[0]->entry.get_mode_info(inst, 1, &mode, err), err);
    printf("mode 1: %s, %.3g s\n", mode.scheme, mode.last_mttkrp_seconds);
    assert_true(strncmp(mode.scheme, "scheme", 6) == 0);
    assert_non_null(strstr(mode.scheme, "(ranks "));
    assert_true(mode.last_mttkrp_seconds > 0);
    p->gpu[0]->entry.destroy(inst);
    th_test_free_factors(factors, t->nmodes);
    g_rand_free(rng);
}

/* The per-mode collective times (details' comm_ms) after CP-ALS on
 * `devices` through `path`: every mode's is positive, whether stamped by
 * the direct exchange (the sweep between NCCL's devices) or timed by
 * events (the per-mode path, device copies, point-to-point). */
static void check_comm_times(th_plugin *plugin, const char *devices, th_update_path path)
{
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[1], 11);
    th_instance *inst = th_test_create_instance(plugin, "devices", devices, NULL);
    th_coo_tensor view;
    th_test_coo_view(t, &view);
    char err[TH_ERROR_SIZE] = "";
    th_test_assert_ok(plugin->entry.load_tensor(inst, &view, 8, err), err);
    th_backend backend = th_backend_borrow(plugin, inst, t->nmodes, 8, t->dims);
    th_cpd_params params = {.rank = 8, .max_iters = 2, .tolerance = 0, .seed = 5, .update = path};
    g_autoptr(GError) error = NULL;
    g_autoptr(th_cpd_result) r = th_cp_als(&backend, t, &params, NULL, &error);
    if (!r)
        fail_msg("devices %s: cp_als: %s", devices, error->message);
    assert_int_equal(r->update_path, path);
    th_runtime_info info = {.struct_size = sizeof info};
    th_test_assert_ok(plugin->entry.get_runtime_info(inst, &info, err), err);
    /* The sweep runs as a graph a rank exactly where the direct exchange
     * carries its collectives and graphs are not turned off. */
    const char *no_graphs = g_getenv("TH_GPU_NO_GRAPHS"); /* as kernels/context.cu reads it */
    const int graphs = strstr(info.details, "direct exchange (device API)") &&
                       !(no_graphs && *no_graphs && strcmp(no_graphs, "0") != 0);
    if (!strstr(info.details, graphs ? " graphs=on " : " graphs=off ("))
        fail_msg("devices %s: expected graphs %s: %s", devices, graphs ? "on" : "off",
                 info.details);
    const char *list = strstr(info.details, " comm_ms=");
    assert_non_null(list);
    printf("devices %s, %s path: %.*s\n", devices, th_update_path_name(path),
           (int)strcspn(list + 1, " "), list + 1);
    const char *p = list + strlen(" comm_ms=");
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        char *end = NULL;
        const double ms = g_ascii_strtod(p, &end);
        if (end == p || !(ms > 0))
            fail_msg("devices %s, %s path: mode %u's collectives took %g ms (%s)", devices,
                     th_update_path_name(path), m, ms, list);
        p = end + (*end == ',' ? 1 : 0);
    }
    plugin->entry.destroy(inst);
}

static void test_comm_times(void **state)
{
    const th_gpu_test_plugins *p = *state;
    static const th_update_path paths[] = {TH_UPDATE_SWEEP, TH_UPDATE_MODE};
    for (size_t k = 0; k < G_N_ELEMENTS(paths); ++k) {
        check_comm_times(p->gpu[0], "0,0,0", paths[k]);
        if (device_count() >= 2)
            check_comm_times(p->gpu[0], "all", paths[k]);
    }
    if (device_count() >= 2) {
        g_setenv("TH_GPU_NO_GRAPHS", "1", TRUE);
        check_comm_times(p->gpu[0], "all", TH_UPDATE_SWEEP);
        g_unsetenv("TH_GPU_NO_GRAPHS");
    }
}

int main(void)
{
    if (!th_gpu_test_have_device())
        return 77;
    th_gpu_test_apply_filter();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mttkrp_virtual_ranks), cmocka_unit_test(test_mttkrp_devices),
        cmocka_unit_test(test_cp_als_virtual_ranks), cmocka_unit_test(test_cp_als_devices),
        cmocka_unit_test(test_cp_als_devices_without_graphs),
        cmocka_unit_test(test_cp_als_rescaled),     cmocka_unit_test(test_reload),
        cmocka_unit_test(test_option_refusals),      cmocka_unit_test(test_memory_plan_refusal),
        cmocka_unit_test(test_host_memory_refusal),  cmocka_unit_test(test_runtime_info),
        cmocka_unit_test(test_comm_times),
    };
    return cmocka_run_group_tests(tests, th_gpu_test_setup_plugins, th_gpu_test_teardown_plugins);
}
