/* Tensor completion (row-wise ALS over the listed entries) through
 * cpu-reference: a planted rank-5 tensor observed at 1% of its entries
 * with noise is completed to within 1.2x the noise at held-out entries;
 * the objective never rises; the reported training RMSE (the last row
 * solve's residual_squared) is the published model's; the published model
 * is the best held-out iteration's; nonnegative modes stay nonnegative; the
 * holdout split is seeded and reproducible; rows without a training entry
 * are an error without a ridge and a warning with one; the plan refuses a
 * plugin without row_least_squares. Also completion's config keys and rules.
 *
 * The runs need cpu-reference's row_least_squares (ABI 1.5); a build whose
 * cpu-reference lacks it skips them. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <glib.h>

#include "base/rng.h"
#include "config/config.h"
#include "cpd/completion_data.h"
#include "cpd/cp_als.h"
#include "cpd/cp_complete.h"
#include "cpd/cpd_session.h"
#include "cpd/cpd_warnings.h"
#include "plugin/backend.h"
#include "test_support.h"

static th_backend *open_backend(const char *name)
{
    g_autoptr(GPtrArray) search = g_ptr_array_new();
    g_ptr_array_add(search, (gpointer)TH_PLUGIN_DIR);
    g_ptr_array_add(search, (gpointer)TH_FIXTURE_PLUGIN_DIR);
    g_autoptr(GError) error = NULL;
    th_backend *backend = th_backend_open(name, search, NULL, NULL, &error);
    if (!backend)
        fail_msg("cannot open %s: %s", name, error->message);
    return backend;
}

#define OPEN_CPU_REFERENCE_OR_SKIP(backend)                                                    \
    g_autoptr(th_backend) backend = open_backend("cpu-reference");                            \
    if (!th_backend_has_row_least_squares(backend)) {                                         \
        print_message("cpu-reference lacks row_least_squares: skipped\n");                    \
        skip();                                                                                \
    }

static th_cpd_params completion_params(uint32_t rank, uint32_t max_iters, double l2,
                                       double holdout)
{
    return (th_cpd_params){
        .model = TH_MODEL_COMPLETION,
        .rank = rank,
        .max_iters = max_iters,
        .tolerance = 1e-6,
        .seed = 11,
        .completion = {.l2 = l2, .holdout = holdout, .passes = TH_COMPLETION_DEFAULT_PASSES},
    };
}

/* A run through the session, as every caller makes it. */
static th_cpd_result *run_session(th_backend *backend, const th_sptensor *t,
                                  const th_cpd_params *p, GPtrArray **warnings)
{
    static const th_cpd_warning_terms terms = {"the tensor", "rank", "max_iters", "tolerance"};
    g_autoptr(GError) error = NULL;
    g_autoptr(th_cpd_session) s = th_cpd_session_new(backend, p, NULL, &terms, &error);
    if (!s)
        fail_msg("plan: %s", error->message);
    if (!th_cpd_session_prepare_copy(s, t, &error))
        fail_msg("prepare: %s", error->message);
    if (!th_cpd_session_load(s, &error))
        fail_msg("load: %s", error->message);
    th_cpd_result *r = th_cpd_session_run(s, NULL, &error);
    if (!r)
        fail_msg("run: %s", error->message);
    if (warnings) {
        *warnings = th_cpd_warnings_new();
        const GPtrArray *w = th_cpd_session_warnings(s);
        for (guint i = 0; i < w->len; ++i) {
            const th_cpd_warning *from = g_ptr_array_index(w, i);
            th_cpd_warning *copy = g_new0(th_cpd_warning, 1);
            copy->code = from->code;
            copy->message = g_strdup(from->message);
            g_ptr_array_add(*warnings, copy);
        }
    }
    return r;
}

/* A planted model: factors uniform in [0, 1), the tensor's entries observed
 * each with probability `observed`, plus Gaussian noise of deviation
 * `noise` (Box-Muller). */
typedef struct planted {
    th_index dims[3];
    uint32_t rank;
    double *factors[3];
} planted;

static planted planted_model(const th_index *dims, uint32_t rank, th_rng *rng)
{
    planted p = {.rank = rank};
    memcpy(p.dims, dims, sizeof p.dims);
    for (uint32_t m = 0; m < 3; ++m) {
        p.factors[m] = g_new(double, (size_t)dims[m] * rank);
        for (size_t k = 0; k < (size_t)dims[m] * rank; ++k)
            p.factors[m][k] = th_rng_uniform(rng);
    }
    return p;
}

static void planted_free(planted *p)
{
    for (uint32_t m = 0; m < 3; ++m)
        g_free(p->factors[m]);
}

static double planted_value(const planted *p, th_index i, th_index j, th_index k)
{
    double v = 0.0;
    for (uint32_t r = 0; r < p->rank; ++r)
        v += p->factors[0][(size_t)i * p->rank + r] * p->factors[1][(size_t)j * p->rank + r] *
             p->factors[2][(size_t)k * p->rank + r];
    return v;
}

static double gaussian(th_rng *rng)
{
    const double u = 1.0 - th_rng_uniform(rng), v = th_rng_uniform(rng);
    return sqrt(-2.0 * log(u)) * cos(2.0 * G_PI * v);
}

static th_sptensor *observe(const planted *p, double observed, double noise, th_rng *rng)
{
    const uint64_t cells = (uint64_t)p->dims[0] * p->dims[1] * p->dims[2];
    th_sptensor *t = th_sptensor_new(3, cells);
    memcpy(t->dims, p->dims, sizeof p->dims);
    uint64_t n = 0;
    for (th_index i = 0; i < p->dims[0]; ++i)
        for (th_index j = 0; j < p->dims[1]; ++j)
            for (th_index k = 0; k < p->dims[2]; ++k) {
                if (th_rng_uniform(rng) >= observed)
                    continue;
                t->indices[0][n] = i;
                t->indices[1][n] = j;
                t->indices[2][n] = k;
                t->values[n] = planted_value(p, i, j, k) + noise * gaussian(rng);
                ++n;
            }
    th_sptensor_truncate(t, n);
    return t;
}

static const th_cpd_iteration *iteration_at(const th_cpd_result *r, guint i)
{
    return &g_array_index(r->iterations, th_cpd_iteration, i);
}

/* The bar: a planted rank-5 tensor, 1% of its entries observed with
 * noise, completed to a held-out RMSE within 1.2x the noise. */
static void test_planted_rank5_at_one_percent(void **state)
{
    (void)state;
    OPEN_CPU_REFERENCE_OR_SKIP(backend);
    th_rng rng;
    th_rng_seed(&rng, 2026);
    const th_index dims[3] = {150, 160, 170};
    planted p = planted_model(dims, 5, &rng);
    const double noise = 0.05;
    g_autoptr(th_sptensor) t = observe(&p, 0.01, noise, &rng);
    th_cpd_params params = completion_params(5, 200, 1e-3, 0.1);
    params.tolerance = 1e-5;
    g_autoptr(th_cpd_result) r = run_session(backend, t, &params, NULL);
    const th_completion_summary *c = &r->completion;
    print_message("observed %" G_GUINT64_FORMAT ", held out %" G_GUINT64_FORMAT
                  ", %u iterations, published %u: train RMSE %.4f, held-out %.4f (noise %.2f)\n",
                  c->observed, c->held_out, r->iterations->len, c->best_iteration, c->train_rmse,
                  c->holdout_rmse, noise);
    assert_int_equal(c->observed, t->nnz);
    assert_true(c->held_out > 0 && c->held_out < c->observed / 5);
    assert_true(c->holdout_rmse <= 1.2 * noise);
    assert_true(c->train_rmse <= 1.2 * noise);
    planted_free(&p);
}

/* The training RMSE of a result's published model (lambda into mode 0)
 * over `train`, straight from its factors. */
static double direct_train_rmse(const th_cpd_result *r, const th_sptensor *train,
                                const th_index *dims, uint32_t rank)
{
    double *scaled[3];
    for (uint32_t m = 0; m < 3; ++m) {
        scaled[m] = g_new(double, (size_t)dims[m] * rank);
        for (size_t k = 0; k < (size_t)dims[m] * rank; ++k)
            scaled[m][k] = r->factors[m][k] * (m == 0 ? r->lambda[k % rank] : 1.0);
    }
    const double rmse =
        sqrt(th_completion_squared_error(train, scaled, rank) / (double)train->nnz);
    for (uint32_t m = 0; m < 3; ++m)
        g_free(scaled[m]);
    return rmse;
}

/* Each row solve minimises its own part of the objective: the objective
 * never rises, with and without nonnegative modes. */
static void test_objective_never_rises(void **state)
{
    (void)state;
    OPEN_CPU_REFERENCE_OR_SKIP(backend);
    th_rng rng;
    th_rng_seed(&rng, 5);
    const th_index dims[3] = {30, 25, 20};
    planted p = planted_model(dims, 3, &rng);
    g_autoptr(th_sptensor) t = observe(&p, 0.3, 0.1, &rng);
    for (int nonneg = 0; nonneg <= 1; ++nonneg) {
        th_cpd_params params = completion_params(4, 30, 0.01, 0.0);
        params.tolerance = 0.0;
        params.nonneg_modes = nonneg ? UINT64_MAX : 0;
        g_autoptr(th_cpd_result) r = run_session(backend, t, &params, NULL);
        assert_int_equal(r->iterations->len, 30);
        for (guint i = 1; i < r->iterations->len; ++i)
            assert_true(iteration_at(r, i)->objective <=
                        iteration_at(r, i - 1)->objective * (1.0 + 1e-12));
        /* Without a holdout: the last iteration's model, its numbers. */
        assert_int_equal(r->completion.best_iteration, 30);
        assert_true(isnan(r->completion.holdout_rmse));
        assert_float_equal(r->completion.objective, iteration_at(r, 29)->objective, 0.0);
        /* The reported training RMSE (the last row solve's residual_squared)
         * is the published model's, computed straight from its factors. */
        assert_float_equal(r->completion.train_rmse, iteration_at(r, 29)->train_rmse, 0.0);
        const double direct = direct_train_rmse(r, t, dims, 4);
        if (!(fabs(direct - r->completion.train_rmse) <= 1e-9 * direct))
            fail_msg("nonneg %d: train RMSE %.17g, from the factors %.17g", nonneg,
                     r->completion.train_rmse, direct);
        if (nonneg) {
            assert_int_equal(r->nonneg_modes, th_cpd_every_mode(3));
            for (uint32_t m = 0; m < 3; ++m)
                for (size_t k = 0; k < (size_t)dims[m] * 4; ++k)
                    assert_true(r->factors[m][k] >= 0.0);
        }
    }
    planted_free(&p);
}

/* The model the published factors describe is the one the reported
 * training error was measured on, and with a holdout it is the best
 * held-out iteration's. */
static void test_published_model_is_the_best_held_out(void **state)
{
    (void)state;
    OPEN_CPU_REFERENCE_OR_SKIP(backend);
    th_rng rng;
    th_rng_seed(&rng, 8);
    const th_index dims[3] = {20, 18, 16};
    planted p = planted_model(dims, 2, &rng);
    g_autoptr(th_sptensor) t = observe(&p, 0.2, 0.3, &rng);
    /* A high rank on noisy data overfits: the held-out RMSE turns up. */
    th_cpd_params params = completion_params(8, 40, 0.0, 0.25);
    params.tolerance = 0.0;
    g_autoptr(th_cpd_result) r = run_session(backend, t, &params, NULL);
    const th_completion_summary *c = &r->completion;
    double best = INFINITY;
    uint32_t best_at = 0;
    for (guint i = 0; i < r->iterations->len; ++i)
        if (iteration_at(r, i)->holdout_rmse < best) {
            best = iteration_at(r, i)->holdout_rmse;
            best_at = iteration_at(r, i)->iteration;
        }
    assert_int_equal(c->best_iteration, best_at);
    assert_float_equal(c->holdout_rmse, best, 0.0);

    /* Recompute both errors from the published model. */
    g_autoptr(th_sptensor) train = NULL;
    g_autoptr(th_sptensor) held = NULL;
    g_autoptr(GError) error = NULL;
    assert_true(th_completion_split(t, 0.25, params.seed, &train, &held, &error));
    assert_int_equal(held->nnz, c->held_out);
    double *scaled[3];
    for (uint32_t m = 0; m < 3; ++m) {
        scaled[m] = g_new(double, (size_t)dims[m] * 8);
        for (size_t k = 0; k < (size_t)dims[m] * 8; ++k)
            scaled[m][k] = r->factors[m][k] * (m == 0 ? r->lambda[k % 8] : 1.0);
    }
    const double held_rmse =
        sqrt(th_completion_squared_error(held, scaled, 8) / (double)held->nnz);
    const double train_rmse = direct_train_rmse(r, train, dims, 8);
    assert_true(fabs(held_rmse - c->holdout_rmse) <= 1e-9 * c->holdout_rmse);
    assert_true(fabs(train_rmse - c->train_rmse) <= 1e-9 * c->train_rmse);
    for (uint32_t m = 0; m < 3; ++m)
        g_free(scaled[m]);
    planted_free(&p);
}

/* The split is a function of (seed, entry): the same on every call, a
 * different one for another seed, about the fraction asked. */
static void test_holdout_split_is_seeded(void **state)
{
    (void)state;
    th_rng rng;
    th_rng_seed(&rng, 3);
    const th_index dims[3] = {40, 40, 40};
    planted p = planted_model(dims, 2, &rng);
    g_autoptr(th_sptensor) t = observe(&p, 0.5, 0.0, &rng);
    g_autoptr(GError) error = NULL;
    g_autoptr(th_sptensor) a = NULL, b = NULL, c = NULL, ha = NULL, hb = NULL, hc = NULL;
    assert_true(th_completion_split(t, 0.1, 1, &a, &ha, &error));
    assert_true(th_completion_split(t, 0.1, 1, &b, &hb, &error));
    assert_true(th_completion_split(t, 0.1, 2, &c, &hc, &error));
    assert_int_equal(a->nnz + ha->nnz, t->nnz);
    assert_int_equal(ha->nnz, hb->nnz);
    assert_memory_equal(ha->values, hb->values, sizeof(double) * ha->nnz);
    assert_true(hc->nnz != ha->nnz ||
                memcmp(hc->values, ha->values, sizeof(double) * ha->nnz) != 0);
    const double fraction = (double)ha->nnz / (double)t->nnz;
    assert_true(fraction > 0.09 && fraction < 0.11);
    /* Nothing left to train on. */
    g_autoptr(th_sptensor) none = NULL, all = NULL;
    assert_false(th_completion_split(t, 1.0, 1, &none, &all, &error));
    assert_true(g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT));
    assert_non_null(strstr(error->message, "none remains to train on"));
    planted_free(&p);
}

/* A row with no training entry: undetermined without a ridge (one clear
 * error naming the mode and row), zero with one (a warning). */
static void test_rows_without_entries(void **state)
{
    (void)state;
    OPEN_CPU_REFERENCE_OR_SKIP(backend);
    th_rng rng;
    th_rng_seed(&rng, 4);
    const th_index dims[3] = {12, 10, 9};
    planted p = planted_model(dims, 2, &rng);
    g_autoptr(th_sptensor) t = observe(&p, 0.6, 0.01, &rng);
    /* Drop every entry of mode 2's row 7 (0-based 6), keep the dims. */
    uint64_t n = 0;
    for (uint64_t k = 0; k < t->nnz; ++k) {
        if (t->indices[1][k] == 6)
            continue;
        for (uint32_t m = 0; m < 3; ++m)
            t->indices[m][n] = t->indices[m][k];
        t->values[n++] = t->values[k];
    }
    th_sptensor_truncate(t, n);

    static const th_cpd_warning_terms terms = {"the tensor", "rank", "max_iters", "tolerance"};
    th_cpd_params params = completion_params(2, 5, 0.0, 0.0);
    g_autoptr(GError) error = NULL;
    g_autoptr(th_cpd_session) s = th_cpd_session_new(backend, &params, NULL, &terms, &error);
    assert_non_null(s);
    assert_false(th_cpd_session_prepare_copy(s, t, &error));
    assert_true(g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT));
    assert_non_null(strstr(error->message, "1 row of mode 2 (the first: row 7) has no training"));
    assert_non_null(strstr(error->message, "l2 > 0"));

    params.completion.l2 = 1e-3;
    g_autoptr(GPtrArray) warnings = NULL;
    g_autoptr(th_cpd_result) r = run_session(backend, t, &params, &warnings);
    gboolean warned = FALSE;
    for (guint i = 0; i < warnings->len; ++i) {
        const th_cpd_warning *w = g_ptr_array_index(warnings, i);
        warned = warned || (w->code == TH_CPD_WARN_EMPTY_ROWS &&
                            strstr(w->message, "1 row of mode 2 (the first: row 7)") != NULL);
    }
    assert_true(warned);
    assert_int_equal(r->completion.empty_rows, 1);
    for (uint32_t col = 0; col < 2; ++col)
        assert_float_equal(r->factors[1][6 * 2 + col], 0.0, 0.0);
    planted_free(&p);
}

/* Values completion cannot fit as read, refused before any work. */
static void test_values_checked(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = th_sptensor_new(2, 2);
    t->dims[0] = t->dims[1] = 2;
    t->indices[0][0] = 0, t->indices[1][0] = 0, t->values[0] = 1.0;
    t->indices[0][1] = 1, t->indices[1][1] = 1, t->values[1] = 1e30;
    g_autoptr(GError) error = NULL;
    assert_false(th_completion_check_values(t, &error));
    assert_true(g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_INPUT));
    assert_non_null(strstr(error->message, "entry 2 (2, 2)"));
    g_clear_error(&error);
    t->values[1] = NAN;
    assert_false(th_completion_check_values(t, &error));
}

/* A plugin without row_least_squares is refused by the plan, naming it. */
static void test_plan_refuses_a_plugin_without_row_solves(void **state)
{
    (void)state;
    g_autoptr(th_backend) backend = open_backend("fixture_good");
    th_cpd_params params = completion_params(2, 5, 0.0, 0.0);
    g_autoptr(GError) error = NULL;
    assert_false(th_cpd_plan(backend, &params, NULL, &error));
    assert_true(g_error_matches(error, TH_CPD_ERROR, TH_CPD_ERROR_MODEL));
    assert_non_null(strstr(error->message, "row_least_squares"));
    assert_non_null(strstr(error->message, "fixture_good"));
}

static th_config *load_config(const char *text, GError **error)
{
    return th_config_load_from_string("/tmp/run.toml", text, -1, NULL, error);
}

static void expect_config_error(const char *text, const char *fragment)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(th_config) config = load_config(text, &error);
    if (config)
        fail_msg("accepted:\n%s", text);
    if (!strstr(error->message, fragment))
        fail_msg("message '%s' lacks '%s'", error->message, fragment);
}

static void test_config_keys_and_rules(void **state)
{
    (void)state;
    g_autoptr(GError) error = NULL;
    g_autoptr(th_config) config =
        load_config("[tensor]\npath = \"t.tns\"\nmissing = \"unlisted\"\nholdout = 0.2\n"
                    "[cpd]\nl2 = 0.01\nconstraints = \"nonneg\"\n",
                    &error);
    assert_non_null(config);
    const th_cpd_params params = th_cpd_params_from_config(config, 4);
    assert_int_equal(params.model, TH_MODEL_COMPLETION);
    assert_float_equal(params.completion.l2, 0.01, 0.0);
    assert_float_equal(params.completion.holdout, 0.2, 0.0);
    assert_int_equal(params.nonneg_modes, UINT64_MAX);
    assert_float_equal(params.l2, 0.0, 0.0); /* CP-ALS's: completion keeps its own */

    expect_config_error("[tensor]\npath = \"t.tns\"\nmissing = \"unlisted\"\nholdout = 1.0\n",
                        "/tmp/run.toml:4:1: tensor.holdout: expected a fraction at least 0 "
                        "and below 1");
    expect_config_error("[tensor]\npath = \"t.tns\"\nholdout = 0.1\n",
                        "/tmp/run.toml:3:1: tensor.holdout is a parameter of tensor completion");
    /* cpd.l2 is also CP-ALS's ridge (least squares with every entry
     * listed), and completion has no l1. */
    g_autoptr(th_config) ridge = load_config("[tensor]\npath = \"t.tns\"\n[cpd]\nl2 = 0.1\n", &error);
    assert_non_null(ridge);
    const th_cpd_params ridge_params = th_cpd_params_from_config(ridge, 4);
    assert_int_equal(ridge_params.model, TH_MODEL_LEAST_SQUARES);
    assert_float_equal(ridge_params.l2, 0.1, 0.0);
    expect_config_error("[tensor]\npath = \"t.tns\"\nmissing = \"unlisted\"\n[cpd]\nl1 = 0.1\n",
                        "cpd.l1: tensor completion (tensor.missing = \"unlisted\") solves each "
                        "factor row exactly by row-wise ALS, which has no l1 term");
    expect_config_error("[tensor]\npath = \"t.tns\"\nmissing = \"unlisted\"\n[cpd]\n"
                        "model = \"poisson\"\n",
                        "the Poisson model (cpd.model = \"poisson\") with unknown entries");
    expect_config_error("[tensor]\npath = \"t.tns\"\nmissing = \"unlisted\"\n[cpd]\n"
                        "update = \"sweep\"\n",
                        "completion (tensor.missing = \"unlisted\") solves each factor row");
    expect_config_error("[tensor]\npath = \"t.tns\"\nmissing = \"unlisted\"\n[backend]\n"
                        "plugin = \"gpu-adaptive\"\n[backend.options]\ndevices = \"0,1\"\n",
                        "multi-GPU completion (tensor.missing = \"unlisted\") is not "
                        "implemented");
    expect_config_error("[tensor]\npath = \"t.tns\"\nmissing = \"maybe\"\n", "tensor.missing");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planted_rank5_at_one_percent),
        cmocka_unit_test(test_objective_never_rises),
        cmocka_unit_test(test_published_model_is_the_best_held_out),
        cmocka_unit_test(test_holdout_split_is_seeded),
        cmocka_unit_test(test_rows_without_entries),
        cmocka_unit_test(test_values_checked),
        cmocka_unit_test(test_plan_refuses_a_plugin_without_row_solves),
        cmocka_unit_test(test_config_keys_and_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
