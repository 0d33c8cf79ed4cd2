/* The rule ABI 1.6 added to plugin.h's "Growth": a plugin built against an
 * older header ignores, unseen, an in-field its header lacks, so a host
 * sets an in-field to anything but its default only for a plugin whose
 * entry says the version that added it or a later one, and takes its own
 * path for that work with an older plugin.
 *
 * fixture_sweep_v1_5_witness declares ABI 1.5 and has als_sweep and
 * als_update_nonneg; both refuse (TH_ERR_INVALID_ARGUMENT, a message naming
 * the field) a call whose 1.6 fields ask for more than 1.5 does: a ridge or
 * an l1 other than 0, a sweep's constraint other than TH_CONSTRAINT_NONE,
 * the update's other than TH_CONSTRAINT_NONNEG. So a run on it completes
 * only where the host kept those fields at their defaults: least squares
 * on the sweep path, and nonnegative CP on whichever path the host picks
 * for it, each reaching the fits of the same run on cpu-reference (the
 * nonnegative one on the host's own update). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "base/log.h"
#include "cpd/cp_als.h"
#include "plugin/backend.h"
#include "test_support.h"

#define WITNESS TH_FIXTURE_PLUGIN_DIR "/fixture_sweep_v1_5_witness.so"
#define CPU_REFERENCE TH_PLUGIN_DIR "/cpu-reference.so"

#define NM 3
#define RANK 3
static const uint32_t dims[NM] = {6, 5, 7};

/* Every entry of a 6 x 5 x 7 tensor, one in four negative (so that a
 * nonnegative run's bound is active). */
static th_sptensor *dense_tensor(void)
{
    th_sptensor *t = th_sptensor_new(NM, (uint64_t)dims[0] * dims[1] * dims[2]);
    memcpy(t->dims, dims, sizeof dims);
    uint64_t k = 0;
    for (uint32_t a = 0; a < dims[0]; a++)
        for (uint32_t b = 0; b < dims[1]; b++)
            for (uint32_t c = 0; c < dims[2]; c++, k++) {
                t->indices[0][k] = a;
                t->indices[1][k] = b;
                t->indices[2][k] = c;
                const double value = 1.0 + (double)((a * 7 + b * 3 + c * 5) % 11) / 4.0;
                t->values[k] = k % 4 == 0 ? -value : value;
            }
    return t;
}

static th_cpd_result *run(const char *plugin_path, const th_sptensor *t, th_update_path update,
                          uint64_t nonneg_modes)
{
    const th_cpd_params params = {.rank = RANK, .max_iters = 8, .tolerance = 0, .seed = 3,
                                  .update = update, .nonneg_modes = nonneg_modes};
    return th_test_cp_als_on(plugin_path, t, &params);
}

static void assert_same_fits(const th_cpd_result *a, const th_cpd_result *b)
{
    assert_int_equal(a->iterations->len, b->iterations->len);
    for (guint i = 0; i < a->iterations->len; i++) {
        const double fa = g_array_index(a->iterations, th_cpd_iteration, i).fit;
        const double fb = g_array_index(b->iterations, th_cpd_iteration, i).fit;
        if (!(fabs(fa - fb) < 1e-9))
            fail_msg("iteration %u: fit %.17g, expected %.17g", i + 1, fa, fb);
    }
}

/* Least squares with every update in the witness's sweep: the host gives
 * its sweep the 1.6 fields' defaults (a refusal would end the run). */
static void test_sweep_of_a_v1_5_plugin_gets_the_defaults(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = dense_tensor();
    g_autoptr(th_cpd_result) reference = run(CPU_REFERENCE, t, TH_UPDATE_AUTO, 0);
    g_autoptr(th_cpd_result) r = run(WITNESS, t, TH_UPDATE_SWEEP, 0);
    assert_int_equal(r->update_path, TH_UPDATE_SWEEP);
    assert_same_fits(r, reference);
}

/* Nonnegative CP on the path the host picks for a 1.5 plugin with
 * als_update_nonneg: the host asks it for the 1.5 update (unbounded at its
 * default TH_CONSTRAINT_NONNEG, ridge and l1 0) or takes its own path; the
 * fits are those of the host's own nonnegative update. */
static void test_nonneg_run_on_a_v1_5_plugin_gets_the_defaults(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = dense_tensor();
    g_autoptr(th_cpd_result) host = run(CPU_REFERENCE, t, TH_UPDATE_HOST, UINT64_MAX);
    g_autoptr(th_cpd_result) r = run(WITNESS, t, TH_UPDATE_AUTO, UINT64_MAX);
    assert_same_fits(r, host);
    for (uint32_t m = 0; m < NM; m++)
        for (uint64_t k = 0; k < (uint64_t)dims[m] * RANK; k++)
            assert_true(r->factors[m][k] >= 0.0);
}

int main(void)
{
    th_log_set_level(TH_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep_of_a_v1_5_plugin_gets_the_defaults),
        cmocka_unit_test(test_nonneg_run_on_a_v1_5_plugin_gets_the_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
