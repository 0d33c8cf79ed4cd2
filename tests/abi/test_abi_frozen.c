/* The current host keeps loading plugins built against the frozen ABI 1.0
 * .. 1.5 headers (fixture_frozen_v1_0 .. _v1_5, one source built against
 * each) and computes with them: load through th_plugin_load, one MTTKRP
 * checked by hand, the optional queries whose structs the host sizes (a
 * field newer than the plugin's header reads as its "absent" default), from
 * 1.1 on als_update and als_sweep through the host, and a whole CP-ALS run,
 * whose initial factors the host draws for those before 1.3 exactly as
 * cpu-reference draws its own, and the later plugins draw themselves. Only
 * the 1.4 and 1.5 plugins have generalized_mttkrp and factor_update, and
 * run the Poisson model as cpu-reference does; only the 1.5 one has
 * row_least_squares and als_update_nonneg, and runs tensor completion as
 * cpu-reference does and nonnegative CP with its updates in the backend as
 * the host's own update does: the host sees each function absent from the
 * plugins whose entry ends before it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "base/log.h"
#include "plugin/backend.h"
#include "cpd/cp_als.h"
#include "cpd/cp_apr.h"
#include "cpd/completion_data.h"
#include "cpd/cp_complete.h"
#include "plugin/plugin_loader.h"
#include "test_support.h"

#define FROZEN_PLUGIN(version) TH_ABI_PLUGIN_DIR "/fixture_frozen_v" version ".so"

/* A 2 x 2 x 2 tensor with three nonzeros, rank 2. */
static const uint32_t dims[3] = {2, 2, 2};
static const uint32_t i0[3] = {0, 1, 1}, i1[3] = {0, 0, 1}, i2[3] = {1, 0, 1};
static const uint32_t *const indices[3] = {i0, i1, i2};
static const double values[3] = {2.0, 3.0, 5.0};

static th_plugin *load(const char *path)
{
    th_host_services services = th_host_services_make();
    GError *error = NULL;
    th_plugin *plugin = th_plugin_load(path, &services, &error);
    if (plugin == NULL)
        fail_msg("%s", error->message);
    return plugin;
}

/* One MTTKRP by hand, and the queries: the plugin's header has no
 * last_sweep_seconds, so the host's default (negative) stays. */
static void check_mttkrp_and_queries(th_plugin *plugin, const char *abi)
{
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

    GError *error = NULL;
    th_runtime_info runtime;
    assert_true(th_instance_runtime_info(plugin, inst, &runtime, &error));
    g_autofree char *device = g_strdup_printf("CPU (ABI %s fixture)", abi);
    g_autofree char *details = g_strdup_printf("built_against=%s", abi);
    assert_string_equal(runtime.device, device);
    assert_string_equal(runtime.details, details);
    assert_int_equal(runtime.struct_size, sizeof runtime);
    assert_true(runtime.last_sweep_seconds < 0);
    th_mode_info mode;
    assert_true(th_instance_mode_info(plugin, inst, 0, &mode, &error));
    assert_string_equal(mode.scheme, "naive-coo");

    plugin->entry.destroy(inst);
}

static void test_frozen_v1_0_loads_and_computes(void **state)
{
    (void)state;
    th_plugin *plugin = load(FROZEN_PLUGIN("1_0"));
    assert_string_equal(plugin->info->id, "fixture_frozen_v1_0");
    assert_int_equal(plugin->plugin_entry_size, TH_PLUGIN_ENTRY_V1_0_SIZE);
    assert_int_equal(plugin->entry.abi_version.minor, 0);
    assert_null(plugin->entry.als_update);
    assert_null(plugin->entry.als_sweep);
    assert_null(plugin->entry.init_factors);
    check_mttkrp_and_queries(plugin, "1.0");
    th_plugin_unload(plugin);
}

static void test_frozen_v1_1_loads_and_computes(void **state)
{
    (void)state;
    th_plugin *plugin = load(FROZEN_PLUGIN("1_1"));
    assert_string_equal(plugin->info->id, "fixture_frozen_v1_1");
    assert_int_equal(plugin->plugin_entry_size, TH_PLUGIN_ENTRY_V1_1_SIZE);
    assert_int_equal(plugin->entry.abi_version.minor, 1);
    assert_non_null(plugin->entry.als_update);
    assert_non_null(plugin->entry.als_sweep);
    assert_null(plugin->entry.init_factors);
    check_mttkrp_and_queries(plugin, "1.1");
    th_plugin_unload(plugin);
}

static void test_frozen_v1_2_loads_and_computes(void **state)
{
    (void)state;
    th_plugin *plugin = load(FROZEN_PLUGIN("1_2"));
    assert_string_equal(plugin->info->id, "fixture_frozen_v1_2");
    /* 1.2 did not grow the entry. */
    assert_int_equal(plugin->plugin_entry_size, TH_PLUGIN_ENTRY_V1_1_SIZE);
    assert_int_equal(plugin->entry.abi_version.minor, 2);
    assert_non_null(plugin->entry.als_update);
    assert_non_null(plugin->entry.als_sweep);
    assert_null(plugin->entry.init_factors);
    check_mttkrp_and_queries(plugin, "1.2");
    th_plugin_unload(plugin);
}

static void test_frozen_v1_3_loads_and_computes(void **state)
{
    (void)state;
    th_plugin *plugin = load(FROZEN_PLUGIN("1_3"));
    assert_string_equal(plugin->info->id, "fixture_frozen_v1_3");
    assert_int_equal(plugin->plugin_entry_size, TH_PLUGIN_ENTRY_V1_3_SIZE);
    assert_int_equal(plugin->entry.abi_version.minor, 3);
    assert_non_null(plugin->entry.als_update);
    assert_non_null(plugin->entry.als_sweep);
    assert_non_null(plugin->entry.init_factors);
    /* The 1.4 functions lie beyond the 1.3 entry: the host reads them as absent. */
    assert_null(plugin->entry.generalized_mttkrp);
    assert_null(plugin->entry.factor_update);
    check_mttkrp_and_queries(plugin, "1.3");
    th_plugin_unload(plugin);
}

static void test_frozen_v1_4_loads_and_computes(void **state)
{
    (void)state;
    th_plugin *plugin = load(FROZEN_PLUGIN("1_4"));
    assert_string_equal(plugin->info->id, "fixture_frozen_v1_4");
    assert_int_equal(plugin->plugin_entry_size, TH_PLUGIN_ENTRY_V1_4_SIZE);
    assert_int_equal(plugin->entry.abi_version.minor, 4);
    assert_non_null(plugin->entry.init_factors);
    assert_non_null(plugin->entry.generalized_mttkrp);
    assert_non_null(plugin->entry.factor_update);
    /* The 1.5 functions lie beyond the 1.4 entry: the host reads them as absent. */
    assert_null(plugin->entry.row_least_squares);
    assert_null(plugin->entry.als_update_nonneg);
    check_mttkrp_and_queries(plugin, "1.4");
    th_plugin_unload(plugin);
}

static void test_frozen_v1_5_loads_and_computes(void **state)
{
    (void)state;
    th_plugin *plugin = load(FROZEN_PLUGIN("1_5"));
    assert_string_equal(plugin->info->id, "fixture_frozen_v1_5");
    assert_int_equal(plugin->plugin_entry_size, TH_PLUGIN_ENTRY_V1_5_SIZE);
    /* 1.7's function lies beyond the 1.5 entry: the host reads it as absent
     * and runs CP-APR's inner iterations itself (the Poisson runs below). */
    assert_null(plugin->entry.multiplicative_updates);
    assert_int_equal(plugin->entry.abi_version.minor, 5);
    assert_non_null(plugin->entry.generalized_mttkrp);
    assert_non_null(plugin->entry.row_least_squares);
    assert_non_null(plugin->entry.als_update_nonneg);
    check_mttkrp_and_queries(plugin, "1.5");
    th_plugin_unload(plugin);
}

/* ---- ABI 1.1's ALS calls through a later host ------------------------------ */

/* A dense 3 x 4 x 5 tensor (every slice full), rank 2: well conditioned
 * enough that no solve breaks down. */
#define NM 3
#define RANK 2
static const uint32_t dense_dims[NM] = {3, 4, 5};

typedef struct dense_tensor {
    uint32_t idx[NM][60];
    const uint32_t *idx_ptrs[NM];
    double values[60];
    th_coo_tensor coo;
} dense_tensor;

static void dense_tensor_init(dense_tensor *t)
{
    uint64_t k = 0;
    double norm_squared = 0.0;
    for (uint32_t a = 0; a < dense_dims[0]; a++)
        for (uint32_t b = 0; b < dense_dims[1]; b++)
            for (uint32_t c = 0; c < dense_dims[2]; c++, k++) {
                t->idx[0][k] = a;
                t->idx[1][k] = b;
                t->idx[2][k] = c;
                t->values[k] = 1.0 + (double)((a * 7 + b * 3 + c * 5) % 11) / 4.0;
                norm_squared += t->values[k] * t->values[k];
            }
    for (int m = 0; m < NM; m++)
        t->idx_ptrs[m] = t->idx[m];
    t->coo = (th_coo_tensor){.struct_size = sizeof t->coo, .nmodes = NM, .nnz = k,
                             .dims = dense_dims, .indices = t->idx_ptrs,
                             .values = t->values, .norm_squared = norm_squared};
}

static void gram_of(const double *a, uint32_t rows, double *gram)
{
    for (int r = 0; r < RANK; r++)
        for (int s = 0; s < RANK; s++) {
            gram[r * RANK + s] = 0.0;
            for (uint32_t i = 0; i < rows; i++)
                gram[r * RANK + s] += a[i * RANK + r] * a[i * RANK + s];
        }
}

static void assert_close(double got, double want, const char *what)
{
    if (!(fabs(got - want) <= 1e-9 * fmax(1.0, fabs(want))))
        fail_msg("%s: %.17g, expected %.17g", what, got, want);
}

/* One sweep through th_instance_als_sweep from factors set by the host, then
 * the contract checked on what the plugin hands back: every Gram is its
 * factor's, and the last mode solves the normal equations
 * A diag(lambda) (G_0 .* G_1) = M_2 with the updated Grams, its inner
 * products being those of M_2 and A. A plugin of ABI `minor` (1 or 2)
 * reports its sweep time from 1.2 on; before, the field reads as absent. */
static void check_sweeps_and_updates(const char *version, uint16_t minor)
{
    g_autofree char *path = g_strdup_printf(FROZEN_PLUGIN("%s"), version);
    th_plugin *plugin = load(path);
    assert_int_equal(plugin->entry.abi_version.minor, minor);
    dense_tensor t;
    dense_tensor_init(&t);
    char err[TH_ERROR_SIZE] = "";
    th_instance *inst = NULL;
    assert_int_equal(plugin->entry.create(NULL, 0, &plugin->services, &inst, err), TH_OK);
    assert_int_equal(plugin->entry.load_tensor(inst, &t.coo, RANK, err), TH_OK);

    double grams[NM][RANK * RANK];
    double *gram_ptrs[NM];
    for (int m = 0; m < NM; m++) {
        double a[5 * RANK];
        for (uint32_t i = 0; i < dense_dims[m]; i++) {
            a[i * RANK] = 1.0 + 0.5 * i + m;
            a[i * RANK + 1] = (i % 2 ? -1.0 : 2.0) + 0.25 * m;
        }
        assert_int_equal(plugin->entry.set_factor(inst, (uint32_t)m, a, err), TH_OK);
        gram_of(a, dense_dims[m], grams[m]);
        gram_ptrs[m] = grams[m];
    }
    double lambda[RANK], inner[RANK];
    th_als_sweep_io io = {.struct_size = sizeof io, .norm = TH_NORM_2, .nmodes = NM,
                          .grams = gram_ptrs, .lambda = lambda, .inner = inner};
    GError *error = NULL;
    if (!th_instance_als_sweep(plugin, inst, &io, &error))
        fail_msg("%s", error->message);
    assert_int_equal(io.modes_done, NM);

    double a[NM][5 * RANK];
    for (int m = 0; m < NM; m++) {
        assert_int_equal(plugin->entry.get_factor(inst, (uint32_t)m, a[m], err), TH_OK);
        double gram[RANK * RANK];
        gram_of(a[m], dense_dims[m], gram);
        for (int k = 0; k < RANK * RANK; k++)
            assert_close(grams[m][k], gram[k], "Gram of the swept factor");
    }
    double m2[5 * RANK];
    assert_int_equal(plugin->entry.get_mttkrp_result(inst, NM - 1, m2, err), TH_OK);
    for (uint32_t i = 0; i < dense_dims[NM - 1]; i++)
        for (int s = 0; s < RANK; s++) {
            double sum = 0.0;
            for (int r = 0; r < RANK; r++)
                sum += a[NM - 1][i * RANK + r] * lambda[r] * grams[0][r * RANK + s] *
                       grams[1][r * RANK + s];
            assert_close(sum, m2[i * RANK + s], "normal equations of the last mode");
        }
    for (int r = 0; r < RANK; r++) {
        double sum = 0.0;
        for (uint32_t i = 0; i < dense_dims[NM - 1]; i++)
            sum += m2[i * RANK + r] * a[NM - 1][i * RANK + r];
        assert_close(inner[r], sum, "inner");
        assert_true(lambda[r] > 0.0);
    }

    /* als_update on mode 0 with w = identity and the max-norm: A_0 = M_0 / lambda. */
    const double w[RANK * RANK] = {1, 0, 0, 1};
    double gram[RANK * RANK];
    th_als_output out = {.struct_size = sizeof out, .lambda = lambda, .gram = gram,
                         .inner = inner};
    double m0[3 * RANK];
    assert_int_equal(plugin->entry.mttkrp(inst, 0, err), TH_OK);
    assert_int_equal(plugin->entry.get_mttkrp_result(inst, 0, m0, err), TH_OK);
    assert_int_equal(plugin->entry.als_update(inst, 0, w, TH_NORM_MAX, &out, err), TH_OK);
    assert_int_equal(plugin->entry.get_factor(inst, 0, a[0], err), TH_OK);
    for (int r = 0; r < RANK; r++) {
        double largest = 1.0;
        for (uint32_t i = 0; i < dense_dims[0]; i++)
            largest = fmax(largest, fabs(m0[i * RANK + r]));
        assert_close(lambda[r], largest, "max-norm lambda");
        for (uint32_t i = 0; i < dense_dims[0]; i++)
            assert_close(a[0][i * RANK + r] * lambda[r], m0[i * RANK + r], "updated factor");
    }

    /* The 1.2 field: absent after a sweep of the 1.1 plugin, which cannot
     * know it; the 1.2 plugin's own time. */
    th_runtime_info runtime;
    assert_true(th_instance_runtime_info(plugin, inst, &runtime, &error));
    if (minor < 2)
        assert_true(runtime.last_sweep_seconds < 0);
    else
        assert_true(runtime.last_sweep_seconds >= 0);

    plugin->entry.destroy(inst);
    th_plugin_unload(plugin);
}

static void test_frozen_v1_1_sweeps_and_updates(void **state)
{
    (void)state;
    check_sweeps_and_updates("1_1", 1);
}

static void test_frozen_v1_2_sweeps_and_updates(void **state)
{
    (void)state;
    check_sweeps_and_updates("1_2", 2);
}

static void test_frozen_v1_3_sweeps_and_updates(void **state)
{
    (void)state;
    check_sweeps_and_updates("1_3", 3);
}

static void test_frozen_v1_4_sweeps_and_updates(void **state)
{
    (void)state;
    check_sweeps_and_updates("1_4", 4);
}

static void test_frozen_v1_5_sweeps_and_updates(void **state)
{
    (void)state;
    check_sweeps_and_updates("1_5", 5);
}

/* ---- A whole run: the host draws the factors for plugins before 1.3 -------- */

static th_cpd_result *run_cp_als(const char *plugin_path, const th_sptensor *t,
                                 th_backend **backend_out)
{
    g_autoptr(GError) error = NULL;
    th_backend *backend = th_backend_open(plugin_path, NULL, NULL, NULL, &error);
    if (backend == NULL || !th_backend_load_tensor(backend, t, RANK, &error))
        fail_msg("%s: %s", plugin_path, error->message);
    const th_cpd_params params = {.rank = RANK, .max_iters = 8, .tolerance = 0, .seed = 5};
    th_cpd_result *r = th_cp_als(backend, t, &params, NULL, &error);
    if (r == NULL)
        fail_msg("%s: cp_als: %s", plugin_path, error->message);
    *backend_out = backend;
    return r;
}

/* Each frozen plugin before 1.3 runs CP-ALS from factors the host drew (it
 * has no init_factors), the later ones from factors they drew themselves,
 * and each reaches, iteration by iteration, the fits of cpu-reference,
 * which drew the same factors itself (ABI 1.3). Only those of 1.4 and
 * later can run other models (generalized_mttkrp, ABI 1.4), and only the
 * 1.5 one tensor completion and nonnegative CP in the backend
 * (row_least_squares and als_update_nonneg, ABI 1.5). */
static void test_frozen_plugins_start_from_the_host_drawn_factors(void **state)
{
    (void)state;
    dense_tensor t;
    dense_tensor_init(&t);
    g_autoptr(th_sptensor) tensor = th_sptensor_new(NM, t.coo.nnz);
    memcpy(tensor->dims, dense_dims, sizeof dense_dims);
    for (int m = 0; m < NM; m++)
        memcpy(tensor->indices[m], t.idx[m], sizeof(uint32_t) * t.coo.nnz);
    memcpy(tensor->values, t.values, sizeof(double) * t.coo.nnz);

    th_backend *reference_backend = NULL;
    g_autoptr(th_cpd_result) reference =
        run_cp_als(TH_PLUGIN_DIR "/cpu-reference.so", tensor, &reference_backend);
    assert_int_equal(reference->initial_factors, TH_INIT_BACKEND);
    th_backend_close(reference_backend);

    const char *const versions[] = {"1_0", "1_1", "1_2", "1_3", "1_4", "1_5"};
    for (size_t v = 0; v < G_N_ELEMENTS(versions); v++) {
        th_backend *backend = NULL;
        g_autofree char *path = g_strdup_printf(FROZEN_PLUGIN("%s"), versions[v]);
        g_autoptr(th_cpd_result) r = run_cp_als(path, tensor, &backend);
        const gboolean draws_itself = strcmp(versions[v], "1_3") >= 0;
        assert_int_equal(th_backend_has_init_factors(backend), draws_itself);
        assert_int_equal(r->initial_factors, draws_itself ? TH_INIT_BACKEND : TH_INIT_HOST);
        assert_int_equal(th_backend_has_generalized_mttkrp(backend),
                         strcmp(versions[v], "1_4") >= 0);
        assert_int_equal(th_backend_has_row_least_squares(backend),
                         strcmp(versions[v], "1_5") >= 0);
        assert_int_equal(th_backend_has_als_update_nonneg(backend),
                         strcmp(versions[v], "1_5") >= 0);
        assert_int_equal(r->iterations->len, reference->iterations->len);
        for (guint i = 0; i < r->iterations->len; i++) {
            const double a = g_array_index(r->iterations, th_cpd_iteration, i).fit;
            const double b = g_array_index(reference->iterations, th_cpd_iteration, i).fit;
            if (!(fabs(a - b) < 1e-10))
                fail_msg("v%s, iteration %u: fit %.17g, cpu-reference %.17g", versions[v],
                         i + 1, a, b);
        }
        th_backend_close(backend);
    }
}

/* ---- ABI 1.4's functions through a later host -------------------------------- */

static th_cpd_result *run_poisson(const char *plugin_path, const th_sptensor *t)
{
    g_autoptr(GError) error = NULL;
    th_backend *backend = th_backend_open(plugin_path, NULL, NULL, NULL, &error);
    const th_cpd_params params = {.model = TH_MODEL_POISSON, .apr = th_apr_params_default(),
                                  .rank = RANK, .max_iters = 6, .tolerance = 0, .seed = 5};
    if (backend == NULL || !th_cpd_plan(backend, &params, NULL, &error) ||
        !th_backend_load_tensor(backend, t, RANK, &error))
        fail_msg("%s: %s", plugin_path, error->message);
    th_cpd_result *r = th_cp_apr(backend, t, &params, NULL, &error);
    th_backend_close(backend);
    if (r == NULL)
        fail_msg("%s: cp_apr: %s", plugin_path, error->message);
    return r;
}

/* The 1.4 plugin runs CP-APR through generalized_mttkrp and factor_update
 * and reaches, iteration by iteration, cpu-reference's log-likelihoods. */
static void test_frozen_v1_4_runs_the_poisson_model(void **state)
{
    (void)state;
    dense_tensor t;
    dense_tensor_init(&t);
    g_autoptr(th_sptensor) tensor = th_sptensor_new(NM, t.coo.nnz);
    memcpy(tensor->dims, dense_dims, sizeof dense_dims);
    for (int m = 0; m < NM; m++)
        memcpy(tensor->indices[m], t.idx[m], sizeof(uint32_t) * t.coo.nnz);
    memcpy(tensor->values, t.values, sizeof(double) * t.coo.nnz);

    g_autoptr(th_cpd_result) reference = run_poisson(TH_PLUGIN_DIR "/cpu-reference.so", tensor);
    g_autoptr(th_cpd_result) r = run_poisson(FROZEN_PLUGIN("1_4"), tensor);
    assert_int_equal(r->iterations->len, reference->iterations->len);
    for (guint i = 0; i < r->iterations->len; i++) {
        const double a = g_array_index(r->iterations, th_cpd_iteration, i).log_likelihood;
        const double b = g_array_index(reference->iterations, th_cpd_iteration, i).log_likelihood;
        if (!(fabs(a - b) <= 1e-10 * fabs(b)))
            fail_msg("iteration %u: log-likelihood %.17g, cpu-reference %.17g", i + 1, a, b);
    }
}

/* ---- ABI 1.5's functions through a later host -------------------------------- */

static th_sptensor *dense_sptensor(void)
{
    dense_tensor t;
    dense_tensor_init(&t);
    th_sptensor *tensor = th_sptensor_new(NM, t.coo.nnz);
    memcpy(tensor->dims, dense_dims, sizeof dense_dims);
    for (int m = 0; m < NM; m++)
        memcpy(tensor->indices[m], t.idx[m], sizeof(uint32_t) * t.coo.nnz);
    memcpy(tensor->values, t.values, sizeof(double) * t.coo.nnz);
    return tensor;
}

/* Every entry but one in three of the dense tensor: the observed ones. */
static th_sptensor *observed_entries(const th_sptensor *dense)
{
    uint64_t kept = 0;
    for (uint64_t k = 0; k < dense->nnz; k++)
        kept += k % 3 != 1;
    th_sptensor *t = th_sptensor_new(NM, kept);
    memcpy(t->dims, dense->dims, sizeof dense_dims);
    uint64_t j = 0;
    for (uint64_t k = 0; k < dense->nnz; k++) {
        if (k % 3 == 1)
            continue;
        for (int m = 0; m < NM; m++)
            t->indices[m][j] = dense->indices[m][k];
        t->values[j++] = dense->values[k];
    }
    return t;
}

static th_cpd_result *run_completion(const char *plugin_path, const th_sptensor *t,
                                     uint64_t nonneg_modes)
{
    g_autoptr(GError) error = NULL;
    th_backend *backend = th_backend_open(plugin_path, NULL, NULL, NULL, &error);
    const th_cpd_params params = {.model = TH_MODEL_COMPLETION, .rank = RANK, .max_iters = 6,
                                  .tolerance = 0, .seed = 5, .nonneg_modes = nonneg_modes,
                                  .completion = {.l2 = 0.1, .passes = 3}};
    uint64_t empty_rows = 0;
    if (backend == NULL ||
        !th_completion_check_rows(t, params.completion.l2, &empty_rows, NULL, &error) ||
        !th_cpd_plan(backend, &params, NULL, &error) ||
        !th_backend_load_tensor(backend, t, RANK, &error))
        fail_msg("%s: %s", plugin_path, error->message);
    th_cpd_result *r = th_cp_complete(backend, t, NULL, empty_rows, &params, NULL, &error);
    th_backend_close(backend);
    if (r == NULL)
        fail_msg("%s: cp_complete: %s", plugin_path, error->message);
    return r;
}

/* The 1.5 plugin runs tensor completion through row_least_squares (and the
 * training error through generalized_mttkrp) and reaches, iteration by
 * iteration, cpu-reference's training fits: unconstrained and with every
 * mode nonnegative (its coordinate descent). */
static void test_frozen_v1_5_runs_completion(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) dense = dense_sptensor();
    g_autoptr(th_sptensor) observed = observed_entries(dense);
    const uint64_t masks[] = {0, UINT64_MAX};
    for (size_t k = 0; k < G_N_ELEMENTS(masks); k++) {
        g_autoptr(th_cpd_result) reference =
            run_completion(TH_PLUGIN_DIR "/cpu-reference.so", observed, masks[k]);
        g_autoptr(th_cpd_result) r = run_completion(FROZEN_PLUGIN("1_5"), observed, masks[k]);
        assert_int_equal(r->iterations->len, reference->iterations->len);
        for (guint i = 0; i < r->iterations->len; i++) {
            const double a = g_array_index(r->iterations, th_cpd_iteration, i).fit;
            const double b = g_array_index(reference->iterations, th_cpd_iteration, i).fit;
            if (!(fabs(a - b) < 1e-10))
                fail_msg("nonneg modes %#" G_GINT64_MODIFIER "x, iteration %u: fit %.17g, "
                         "cpu-reference %.17g", masks[k], i + 1, a, b);
        }
    }
}

static th_cpd_result *run_nonneg(const char *plugin_path, const th_sptensor *t,
                                 th_update_path update)
{
    const th_cpd_params params = {.rank = RANK, .max_iters = 8, .tolerance = 0, .seed = 5,
                                  .update = update, .nonneg_modes = UINT64_MAX};
    return th_test_cp_als_on(plugin_path, t, &params);
}

/* The 1.5 plugin runs nonnegative CP with every update in the backend
 * (als_update_nonneg, the mode path) and reaches, iteration by iteration,
 * the fits of the host's own nonnegative update (on cpu-reference, the
 * host path), with every factor >= 0: the host asks a 1.5 plugin for the
 * 1.5 update, whatever 1.6 added. */
static void test_frozen_v1_5_runs_nonnegative_cp(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = dense_sptensor();
    for (uint64_t k = 0; k < t->nnz; k++) /* both signs: the bound is active */
        t->values[k] = k % 4 == 0 ? -t->values[k] : t->values[k];
    g_autoptr(th_cpd_result) host =
        run_nonneg(TH_PLUGIN_DIR "/cpu-reference.so", t, TH_UPDATE_HOST);
    g_autoptr(th_cpd_result) r = run_nonneg(FROZEN_PLUGIN("1_5"), t, TH_UPDATE_MODE);
    assert_int_equal(r->update_path, TH_UPDATE_MODE);
    assert_int_equal(host->update_path, TH_UPDATE_HOST);
    assert_int_equal(r->iterations->len, host->iterations->len);
    for (guint i = 0; i < r->iterations->len; i++) {
        const double a = g_array_index(r->iterations, th_cpd_iteration, i).fit;
        const double b = g_array_index(host->iterations, th_cpd_iteration, i).fit;
        if (!(fabs(a - b) < 1e-10))
            fail_msg("iteration %u: fit %.17g, the host's update %.17g", i + 1, a, b);
    }
    for (uint32_t m = 0; m < NM; m++)
        for (uint64_t k = 0; k < (uint64_t)dense_dims[m] * RANK; k++)
            assert_true(r->factors[m][k] >= 0.0);
}

int main(void)
{
    th_log_set_level(TH_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frozen_v1_0_loads_and_computes),
        cmocka_unit_test(test_frozen_v1_1_loads_and_computes),
        cmocka_unit_test(test_frozen_v1_2_loads_and_computes),
        cmocka_unit_test(test_frozen_v1_3_loads_and_computes),
        cmocka_unit_test(test_frozen_v1_4_loads_and_computes),
        cmocka_unit_test(test_frozen_v1_5_loads_and_computes),
        cmocka_unit_test(test_frozen_v1_1_sweeps_and_updates),
        cmocka_unit_test(test_frozen_v1_2_sweeps_and_updates),
        cmocka_unit_test(test_frozen_v1_3_sweeps_and_updates),
        cmocka_unit_test(test_frozen_v1_4_sweeps_and_updates),
        cmocka_unit_test(test_frozen_v1_5_sweeps_and_updates),
        cmocka_unit_test(test_frozen_plugins_start_from_the_host_drawn_factors),
        cmocka_unit_test(test_frozen_v1_4_runs_the_poisson_model),
        cmocka_unit_test(test_frozen_v1_5_runs_completion),
        cmocka_unit_test(test_frozen_v1_5_runs_nonnegative_cp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
