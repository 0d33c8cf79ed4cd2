/* cpu-reference's als_update_nonneg (ABI 1.5) against the host's own
 * nonnegative update on the same inputs (th_dense_hals_nonneg from the
 * factor times the scale, then th_dense_normalize_columns, the Gram and
 * the inner products): the factor, lambda and the passes the same bits,
 * the Gram and inner to rounding; on 2-, 3- and 4-mode tensors, both
 * norms, scale NULL and given, several sweeps and tolerances, through a
 * 1.6 io (ridge 0, l1 0, unbounded 0) and a 1.5 one (whose
 * defaults they are). ABI 1.6's ridge, l1 and unbounded 1 against
 * the tests' own coordinate descent, written from plugin.h (hals_oracle.h).
 * Then: the same bits on 1, 2 and 4 threads, the passes counted, a nonnegative result
 * from a factor of both signs, nothing but mode's factor changed, a stop
 * between passes leaving the factor whole, and every argument error. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "cpd/dense.h"
#include "plugin/backend.h"
#include "hals_oracle.h"
#include "test_support.h"

typedef th_test_cpu_fixture fixture;

static int setup(void **state) { return th_test_cpu_fixture_setup(state, 20261129u); }

/* What one update takes and gives. The 1.6 terms: ridge, l1 and
 * `unbounded` (no bound; else A >= 0); `v1_5`
 * passes them as a host of ABI 1.5 would: a struct without them, its tail
 * (where a 1.6 struct has them) holding nonsense. */
typedef struct update_case {
    int32_t norm;
    gboolean scaled;
    uint32_t sweeps;
    double tolerance;
    double ridge, l1;
    gboolean unbounded;
    gboolean v1_5;
} update_case;

typedef struct update_result {
    double *factor;                /* [dims[mode] * rank] */
    double *lambda, *gram, *inner; /* [rank], [rank * rank], [rank] */
    uint32_t passes;
} update_result;

static void result_init(update_result *r, uint64_t rows, uint32_t rank)
{
    r->factor = g_new(double, rows * rank);
    r->lambda = g_new(double, rank);
    r->gram = g_new(double, (size_t)rank * rank);
    r->inner = g_new(double, rank);
    r->passes = 0;
}

static void result_clear(update_result *r)
{
    g_free(r->factor);
    g_free(r->lambda);
    g_free(r->gram);
    g_free(r->inner);
}

/* v = the Hadamard product of the Grams of the factors other than mode's. */
static double *other_grams(double *const *factors, const th_sptensor *t, uint32_t rank,
                           uint32_t mode)
{
    double **grams = g_new(double *, t->nmodes);
    for (uint32_t m = 0; m < t->nmodes; m++) {
        grams[m] = g_new(double, (size_t)rank * rank);
        th_dense_gram(factors[m], t->dims[m], rank, grams[m]);
    }
    double *v = g_new(double, (size_t)rank * rank);
    th_dense_hadamard_except(grams, t->nmodes, mode, rank, v);
    for (uint32_t m = 0; m < t->nmodes; m++)
        g_free(grams[m]);
    g_free(grams);
    return v;
}

/* Weights in [0.5, 2), as the last mode's lambda would be. */
static double *random_scale(uint32_t rank, GRand *rng)
{
    double *scale = g_new(double, rank);
    for (uint32_t r = 0; r < rank; r++)
        scale[r] = g_rand_double_range(rng, 0.5, 2.0);
    return scale;
}

/* The host's nonnegative update (als_step.c's hals_factor and
 * host_update) of `factor` against MTTKRP result `m`. */
static void host_update(const double *m, const double *v, const double *factor,
                        const double *scale, uint64_t rows, uint32_t rank,
                        const update_case *c, update_result *out)
{
    memcpy(out->factor, factor, rows * rank * sizeof(double));
    for (uint64_t i = 0; scale && i < rows; i++)
        for (uint32_t r = 0; r < rank; r++)
            out->factor[i * rank + r] *= scale[r];
    out->passes = th_dense_hals_nonneg(m, v, rows, rank, c->sweeps, c->tolerance, out->factor);
    th_dense_normalize_columns(out->factor, rows, rank, c->norm == TH_NORM_MAX, out->lambda);
    th_dense_gram(out->factor, rows, rank, out->gram);
    th_dense_column_inner(m, out->factor, rows, rank, out->inner);
}

/* plugin.h's update (th_nonneg_update_io, ABI 1.6) as it reads, written
 * apart from the plugin's: A(:, r) *= scale[r]; then the passes of
 * coordinate descent (th_test_hals_columns, a column at a time over every
 * row); then lambda (2-norm, or max(max |a|, 1)), A / lambda (a zero
 * lambda divides nothing), the Gram and inner = <M, A> per column. */
static void naive_update(const double *m, const double *v, const double *factor,
                         const double *scale, uint64_t rows, uint32_t rank,
                         const update_case *c, update_result *out)
{
    double *a = out->factor;
    for (uint64_t i = 0; i < rows; i++)
        for (uint32_t r = 0; r < rank; r++)
            a[i * rank + r] = factor[i * rank + r] * (scale ? scale[r] : 1.0);
    out->passes = th_test_hals_columns(m, v, rows, rank, c->ridge, c->l1, !c->unbounded,
                                       c->sweeps, c->tolerance, a);
    for (uint32_t r = 0; r < rank; r++) {
        double size = 0.0;
        for (uint64_t i = 0; i < rows; i++)
            size = c->norm == TH_NORM_2 ? size + a[i * rank + r] * a[i * rank + r]
                                        : fmax(size, fabs(a[i * rank + r]));
        out->lambda[r] = c->norm == TH_NORM_2 ? sqrt(size) : fmax(size, 1.0);
        out->inner[r] = 0.0;
        for (uint64_t i = 0; i < rows; i++) {
            if (out->lambda[r] > 0.0)
                a[i * rank + r] /= out->lambda[r];
            out->inner[r] += m[i * rank + r] * a[i * rank + r];
        }
    }
    for (uint32_t r = 0; r < rank; r++)
        for (uint32_t s = 0; s < rank; s++) {
            double sum = 0.0;
            for (uint64_t i = 0; i < rows; i++)
                sum += a[i * rank + r] * a[i * rank + s];
            out->gram[(size_t)r * rank + s] = sum;
        }
}

static th_status call_update(const th_plugin *plugin, th_instance *inst, uint32_t mode,
                             const double *v, const double *scale, const update_case *c,
                             update_result *out, char *err)
{
    th_nonneg_update_io io = {.struct_size = sizeof io, .mode = mode, .v = v, .scale = scale,
                              .tolerance = c->tolerance, .sweeps = c->sweeps, .norm = c->norm,
                              .ridge = c->ridge, .l1 = c->l1,
                              .unbounded = c->unbounded ? 1u : 0u};
    if (c->v1_5) {
        io.struct_size = TH_NONNEG_UPDATE_IO_V1_5_SIZE;
        io.ridge = -1.0, io.l1 = NAN, io.unbounded = 7; /* beyond struct_size: unread */
    }
    th_als_output o = {.struct_size = sizeof o, .lambda = out->lambda, .gram = out->gram,
                       .inner = out->inner};
    const th_status status = plugin->entry.als_update_nonneg(inst, &io, &o, err);
    out->passes = io.passes;
    return status;
}

/* The plugin's update of mode (after its mttkrp) into `out`, and the
 * MTTKRP result it used into `m`. */
static void plugin_update(const th_plugin *plugin, th_instance *inst, uint32_t mode,
                          const double *v, const double *scale, const update_case *c,
                          double *m, update_result *out)
{
    char err[TH_ERROR_SIZE] = "";
    th_test_assert_ok(plugin->entry.mttkrp(inst, mode, err), err);
    th_test_assert_ok(plugin->entry.get_mttkrp_result(inst, mode, m, err), err);
    th_test_assert_ok(call_update(plugin, inst, mode, v, scale, c, out, err), err);
    th_test_assert_ok(plugin->entry.get_factor(inst, mode, out->factor, err), err);
}

static void assert_close(const double *got, const double *want, size_t n, const char *what,
                         const char *label)
{
    const double e = th_test_relative_error(got, want, n);
    if (!(e <= 1e-14))
        fail_msg("%s: %s differs by %.3g", label, what, e);
}

/* Every mode of `t` from the same factors, against the host's update. */
static void check_against_host(const fixture *f, const th_sptensor *t, uint32_t rank,
                               const update_case *c, const char *label)
{
    const th_plugin *plugin = f->plugin;
    double **factors = th_test_random_factors(t, rank, f->rng);
    g_autofree double *scale = c->scaled ? random_scale(rank, f->rng) : NULL;
    for (uint32_t mode = 0; mode < t->nmodes; mode++) {
        const uint64_t rows = t->dims[mode];
        g_autofree double *v = other_grams(factors, t, rank, mode);
        g_autofree double *m = g_new(double, rows * rank);
        update_result got, want;
        result_init(&got, rows, rank);
        result_init(&want, rows, rank);
        th_instance *inst = th_test_create_instance(plugin, "threads", "3", NULL);
        th_test_load_and_set(plugin, inst, t, rank, factors);
        plugin_update(plugin, inst, mode, v, scale, c, m, &got);
        host_update(m, v, factors[mode], scale, rows, rank, c, &want);
        g_autofree char *where = g_strdup_printf("%s, mode %u", label, mode);
        assert_memory_equal(got.factor, want.factor, rows * rank * sizeof(double));
        assert_memory_equal(got.lambda, want.lambda, rank * sizeof(double));
        assert_int_equal(got.passes, want.passes);
        assert_close(got.gram, want.gram, (size_t)rank * rank, "the Gram", where);
        assert_close(got.inner, want.inner, rank, "inner", where);
        for (uint64_t k = 0; k < rows * rank; k++)
            assert_true(got.factor[k] >= 0.0);
        plugin->entry.destroy(inst);
        result_clear(&got);
        result_clear(&want);
    }
    th_test_free_factors(factors, t->nmodes);
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

static const update_case every_case[] = {
    {.norm = TH_NORM_2, .scaled = FALSE, .sweeps = 1, .tolerance = 0.0},
    {.norm = TH_NORM_MAX, .scaled = TRUE, .sweeps = 5, .tolerance = 1e-8},
    {.norm = TH_NORM_2, .scaled = TRUE, .sweeps = 5, .tolerance = 0.0},
    {.norm = TH_NORM_MAX, .scaled = FALSE, .sweeps = 40, .tolerance = 1e-3},
    {.norm = TH_NORM_2, .scaled = TRUE, .sweeps = 5, .tolerance = 1e-8, .v1_5 = TRUE},
    {.norm = TH_NORM_MAX, .scaled = FALSE, .sweeps = 1, .tolerance = 0.0, .v1_5 = TRUE},
};

/* 2, 3 and 4 modes at ranks 1 to 9; the random factors have both signs,
 * so the result's nonnegativity is the update's doing. */
static void test_matches_the_host(void **state)
{
    fixture *f = *state;
    const uint32_t dims2[2] = {30, 25}, dims3[3] = {12, 140, 9}, dims4[4] = {8, 7, 30, 6};
    g_autoptr(th_sptensor) t2 = th_test_random_tensor(2, dims2, 300, f->rng);
    g_autoptr(th_sptensor) t3 = th_test_random_tensor(3, dims3, 900, f->rng);
    g_autoptr(th_sptensor) t4 = th_test_random_tensor(4, dims4, 700, f->rng);
    const th_sptensor *tensors[] = {t2, t3, t4};
    const uint32_t ranks[] = {1, 4, 9};
    for (size_t ti = 0; ti < G_N_ELEMENTS(tensors); ti++)
        for (size_t ri = 0; ri < G_N_ELEMENTS(ranks); ri++)
            for (size_t ci = 0; ci < G_N_ELEMENTS(every_case); ci++) {
                const update_case *c = &every_case[ci];
                g_autofree char *label = g_strdup_printf(
                    "%u modes rank %u norm %d scaled %d sweeps %u tolerance %g io of %s",
                    tensors[ti]->nmodes, ranks[ri], c->norm, c->scaled, c->sweeps,
                    c->tolerance, c->v1_5 ? "1.5" : "1.6");
                check_against_host(f, tensors[ti], ranks[ri], c, label);
            }
}

/* ABI 1.6's terms against naive_update: ridge alone, l1 alone and both,
 * with and without the bound, on every mode of a 3- and a 4-mode tensor
 * from factors of both signs. The cases must show what they test: l1 zeroes
 * some entries but not all, and an unbounded result has negative entries. */
static void test_regularised_update_is_plugin_h(void **state)
{
    fixture *f = *state;
    const th_plugin *plugin = f->plugin;
    const uint32_t dims3[3] = {12, 140, 9}, dims4[4] = {8, 7, 30, 6};
    g_autoptr(th_sptensor) t3 = th_test_random_tensor(3, dims3, 900, f->rng);
    g_autoptr(th_sptensor) t4 = th_test_random_tensor(4, dims4, 700, f->rng);
    const th_sptensor *tensors[] = {t3, t4};
    const uint32_t ranks[] = {4, 9};
    const update_case cases[] = {
        {.norm = TH_NORM_2, .sweeps = 3, .ridge = 2.0, .unbounded = TRUE},
        {.norm = TH_NORM_MAX, .sweeps = 5, .tolerance = 1e-8, .l1 = 0.5, .unbounded = TRUE,
         .scaled = TRUE},
        {.norm = TH_NORM_2, .sweeps = 5, .ridge = 1.5, .l1 = 0.5, .unbounded = TRUE},
        {.norm = TH_NORM_2, .sweeps = 4, .ridge = 1.5, .l1 = 0.5, .scaled = TRUE},
        {.norm = TH_NORM_MAX, .sweeps = 1, .ridge = 3.0},
    };
    for (size_t ti = 0; ti < G_N_ELEMENTS(tensors); ti++)
        for (size_t ci = 0; ci < G_N_ELEMENTS(cases); ci++) {
            const th_sptensor *t = tensors[ti];
            const update_case *c = &cases[ci];
            const uint32_t rank = ranks[ti];
            double **factors = th_test_random_factors(t, rank, f->rng);
            g_autofree double *scale = c->scaled ? random_scale(rank, f->rng) : NULL;
            uint64_t zeros = 0, negatives = 0, entries = 0;
            for (uint32_t mode = 0; mode < t->nmodes; mode++) {
                const uint64_t rows = t->dims[mode];
                g_autofree double *v = other_grams(factors, t, rank, mode);
                g_autofree double *m = g_new(double, rows * rank);
                update_result got, want;
                result_init(&got, rows, rank);
                result_init(&want, rows, rank);
                th_instance *inst = th_test_create_instance(plugin, "threads", "2", NULL);
                th_test_load_and_set(plugin, inst, t, rank, factors);
                plugin_update(plugin, inst, mode, v, scale, c, m, &got);
                naive_update(m, v, factors[mode], scale, rows, rank, c, &want);
                g_autofree char *where = g_strdup_printf(
                    "%u modes, case %zu (ridge %g l1 %g %s), mode %u", t->nmodes, ci, c->ridge,
                    c->l1, c->unbounded ? "unbounded" : "nonnegative", mode);
                assert_int_equal(got.passes, want.passes);
                static const char *const parts[4] = {"the factor", "lambda", "the Gram",
                                                     "inner"};
                const double e[4] = {
                    th_test_relative_error(got.factor, want.factor, rows * rank),
                    th_test_relative_error(got.lambda, want.lambda, rank),
                    th_test_relative_error(got.gram, want.gram, (uint64_t)rank * rank),
                    th_test_relative_error(got.inner, want.inner, rank)};
                for (int k = 0; k < 4; k++)
                    if (!(e[k] <= 1e-12))
                        fail_msg("%s: %s differs by %.3g", where, parts[k], e[k]);
                for (uint64_t k = 0; k < rows * rank; k++) {
                    zeros += got.factor[k] == 0.0;
                    negatives += got.factor[k] < 0.0;
                    if (!c->unbounded && !(got.factor[k] >= 0.0))
                        fail_msg("%s: entry %" G_GUINT64_FORMAT " is %g", where, k,
                                 got.factor[k]);
                }
                entries += rows * rank;
                plugin->entry.destroy(inst);
                result_clear(&got);
                result_clear(&want);
            }
            if (c->l1 > 0.0 && !(zeros > 0 && zeros < entries))
                fail_msg("%u modes, case %zu: l1 %g zeroed %" G_GUINT64_FORMAT " of %"
                         G_GUINT64_FORMAT " entries", t->nmodes, ci, c->l1, zeros, entries);
            if (c->unbounded && negatives == 0)
                fail_msg("%u modes, case %zu: an unbounded update with no negative entry",
                         t->nmodes, ci);
            th_test_free_factors(factors, t->nmodes);
        }
}

/* The same bits (factor, out, passes) on 1, 2 and 4 threads, on a mode
 * long enough that the plugin runs the passes and the sums on the team,
 * with an early stop (the blocks' changes decide it): nonnegative, and
 * (ABI 1.6) unbounded with ridge and l1. */
static void check_thread_counts(const fixture *f, const update_case *c)
{
    const th_plugin *plugin = f->plugin;
    const uint32_t dims[3] = {20000, 300, 200}, rank = 32, mode = 0;
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 60000, f->rng);
    double **factors = th_test_random_factors(t, rank, f->rng);
    g_autofree double *v = other_grams(factors, t, rank, mode);
    g_autofree double *scale = random_scale(rank, f->rng);
    g_autofree double *m = g_new(double, (size_t)dims[mode] * rank);
    const char *threads[] = {"1", "2", "4"};
    update_result results[3];
    for (int k = 0; k < 3; k++) {
        result_init(&results[k], dims[mode], rank);
        th_instance *inst = th_test_create_instance(plugin, "threads", threads[k], NULL);
        th_test_load_and_set(plugin, inst, t, rank, factors);
        plugin_update(plugin, inst, mode, v, scale, c, m, &results[k]);
        plugin->entry.destroy(inst);
    }
    assert_true(results[0].passes > 1 && results[0].passes < c->sweeps);
    for (int k = 1; k < 3; k++) {
        assert_memory_equal(results[0].factor, results[k].factor,
                            (size_t)dims[mode] * rank * sizeof(double));
        assert_memory_equal(results[0].lambda, results[k].lambda, rank * sizeof(double));
        assert_memory_equal(results[0].gram, results[k].gram, (size_t)rank * rank * sizeof(double));
        assert_memory_equal(results[0].inner, results[k].inner, rank * sizeof(double));
        assert_int_equal(results[0].passes, results[k].passes);
    }
    for (int k = 0; k < 3; k++)
        result_clear(&results[k]);
    th_test_free_factors(factors, 3);
}

static void test_thread_count_does_not_change_results(void **state)
{
    const fixture *f = *state;
    const update_case nonneg = {.norm = TH_NORM_MAX, .scaled = TRUE, .sweeps = 50,
                                .tolerance = 1e-2};
    const update_case regularised = {.norm = TH_NORM_2, .scaled = TRUE, .sweeps = 50,
                                     .tolerance = 1e-2, .ridge = 1.0, .l1 = 0.3,
                                     .unbounded = TRUE};
    check_thread_counts(f, &nonneg);
    check_thread_counts(f, &regularised);
}

/* passes: every sweep with tolerance 0 (the change of a pass on random
 * data is not 0), one with tolerance 1 (the first pass's change is at
 * most itself), and fewer than the sweeps once the passes converge. */
static void test_passes_counted(void **state)
{
    fixture *f = *state;
    const th_plugin *plugin = f->plugin;
    const uint32_t dims[3] = {40, 30, 20}, rank = 5;
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 2000, f->rng);
    double **factors = th_test_random_factors(t, rank, f->rng);
    g_autofree double *v = other_grams(factors, t, rank, 1);
    g_autofree double *m = g_new(double, (size_t)dims[1] * rank);
    const struct {
        uint32_t sweeps;
        double tolerance;
        uint32_t at_least, at_most;
    } cases[] = {{7, 0.0, 7, 7}, {7, 1.0, 1, 1}, {1, 0.0, 1, 1}, {500, 1e-10, 2, 499}};
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        const update_case c = {.norm = TH_NORM_2, .sweeps = cases[i].sweeps,
                               .tolerance = cases[i].tolerance};
        update_result r;
        result_init(&r, dims[1], rank);
        th_instance *inst = th_test_create_instance(plugin, NULL);
        th_test_load_and_set(plugin, inst, t, rank, factors);
        plugin_update(plugin, inst, 1, v, NULL, &c, m, &r);
        if (r.passes < cases[i].at_least || r.passes > cases[i].at_most)
            fail_msg("sweeps %u tolerance %g: %u passes", c.sweeps, c.tolerance, r.passes);
        plugin->entry.destroy(inst);
        result_clear(&r);
    }
    th_test_free_factors(factors, 3);
}

/* Only mode's factor changes: every other factor and every MTTKRP result
 * stay as they were, bit for bit; a newer host's longer io has its tail
 * left alone and struct_size unwritten. */
static void test_nothing_else_changes(void **state)
{
    fixture *f = *state;
    const th_plugin *plugin = f->plugin;
    const uint32_t dims[3] = {9, 8, 7}, rank = 3;
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 200, f->rng);
    double **factors = th_test_random_factors(t, rank, f->rng);
    g_autofree double *v = other_grams(factors, t, rank, 1);
    th_instance *inst = th_test_create_instance(plugin, NULL);
    th_test_load_and_set(plugin, inst, t, rank, factors);
    char err[TH_ERROR_SIZE] = "";
    double lambda[3], gram[9], inner[3];
    double **results = th_test_mttkrp_every_mode(plugin, inst, t, rank);
    struct {
        th_nonneg_update_io io;
        double tail[2];
    } longer = {.io = {.struct_size = sizeof longer, .mode = 1, .v = v, .sweeps = 3,
                       .norm = TH_NORM_2},
                .tail = {-1.0, -1.0}};
    th_als_output out = {.struct_size = sizeof out, .lambda = lambda, .gram = gram,
                         .inner = inner};
    th_test_assert_ok(plugin->entry.als_update_nonneg(inst, &longer.io, &out, err), err);
    assert_int_equal(longer.io.struct_size, sizeof longer);
    assert_int_equal(longer.io.passes, 3);
    assert_true(longer.tail[0] == -1.0 && longer.tail[1] == -1.0);
    th_test_assert_only_factor_changed(plugin, inst, t, rank, results, factors, 1);
    plugin->entry.destroy(inst);
    th_test_free_factors(results, 3);
    th_test_free_factors(factors, 3);
}

/* A stop requested before the call: one pass, then TH_ERR_CANCELLED; the
 * factor and `out` are as they were (the passes ran on a copy). */
static void test_stop_between_passes(void **state)
{
    fixture *f = *state;
    const th_plugin *plugin = f->plugin;
    const uint32_t dims[3] = {50, 30, 20}, rank = 4;
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 3000, f->rng);
    double **factors = th_test_random_factors(t, rank, f->rng);
    g_autofree double *v = other_grams(factors, t, rank, 0);
    th_instance *inst = th_test_create_cancelled_instance(plugin, NULL);
    char err[TH_ERROR_SIZE] = "";
    th_test_load_and_set(plugin, inst, t, rank, factors);
    th_test_assert_ok(plugin->entry.mttkrp(inst, 0, err), err);
    update_result r;
    result_init(&r, dims[0], rank);
    for (uint32_t k = 0; k < rank; k++)
        r.lambda[k] = r.inner[k] = -7.0;
    const update_case c = {.norm = TH_NORM_2, .sweeps = 5, .tolerance = 0.0};
    assert_int_equal(call_update(plugin, inst, 0, v, NULL, &c, &r, err), TH_ERR_CANCELLED);
    assert_string_equal(err, "als_update_nonneg(mode 0) given up after 1 of at most 5 passes: "
                             "stop requested (the factor is unchanged)");
    assert_int_equal(r.passes, 0);
    for (uint32_t k = 0; k < rank; k++)
        assert_true(r.lambda[k] == -7.0 && r.inner[k] == -7.0);
    th_test_assert_ok(plugin->entry.get_factor(inst, 0, r.factor, err), err);
    assert_memory_equal(r.factor, factors[0], (size_t)dims[0] * rank * sizeof(double));
    /* One sweep has no pass to stop before. */
    const update_case one = {.norm = TH_NORM_2, .sweeps = 1, .tolerance = 0.0};
    th_test_assert_ok(call_update(plugin, inst, 0, v, NULL, &one, &r, err), err);
    assert_int_equal(r.passes, 1);
    result_clear(&r);
    plugin->entry.destroy(inst);
    th_test_free_factors(factors, 3);
}

static void expect_error(const th_plugin *plugin, th_instance *inst,
                         const th_nonneg_update_io *in, th_als_output *out, th_status status,
                         const char *message)
{
    th_nonneg_update_io io = *in;
    char err[TH_ERROR_SIZE] = "";
    assert_int_equal(plugin->entry.als_update_nonneg(inst, &io, out, err), status);
    assert_string_equal(err, message);
    assert_int_equal(io.passes, 0);
}

static void test_errors(void **state)
{
    fixture *f = *state;
    const th_plugin *plugin = f->plugin;
    double v[4] = {1.0, 0.0, 0.0, 1.0}, lambda[2], gram[4], inner[2];
    th_als_output out = {.struct_size = sizeof out, .lambda = lambda, .gram = gram,
                         .inner = inner};
    const th_nonneg_update_io ok = {.struct_size = sizeof ok, .mode = 0, .v = v, .sweeps = 2,
                                    .tolerance = 1e-8, .norm = TH_NORM_2};
    th_instance *inst = th_test_create_instance(plugin, NULL);
    expect_error(plugin, inst, &ok, &out, TH_ERR_BAD_STATE,
                 "als_update_nonneg: no tensor loaded (call load_tensor first)");

    const uint32_t dims[3] = {3, 2, 4};
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 5, f->rng);
    double **factors = th_test_random_factors(t, 2, f->rng);
    th_test_load_and_set(plugin, inst, t, 2, factors);
    char err[TH_ERROR_SIZE] = "";
    /* No MTTKRP of the mode yet. */
    expect_error(plugin, inst, &ok, &out, TH_ERR_BAD_STATE,
                 "als_update_nonneg: mode 0 has no MTTKRP result yet (call mttkrp first)");
    th_test_assert_ok(plugin->entry.mttkrp(inst, 0, err), err);
    assert_int_equal(plugin->entry.als_update_nonneg(inst, NULL, &out, err),
                     TH_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "als_update_nonneg: io is NULL");
    th_nonneg_update_io io = ok;
    assert_int_equal(plugin->entry.als_update_nonneg(NULL, &io, &out, err),
                     TH_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "als_update_nonneg: the instance is NULL");

    io.struct_size = TH_NONNEG_UPDATE_IO_V1_5_SIZE - 1;
    expect_error(plugin, inst, &io, &out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: io.struct_size 47 is shorter than the 48 bytes of "
                 "th_nonneg_update_io in ABI 1.5");
    io = ok;
    io.mode = 3;
    expect_error(plugin, inst, &io, &out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: mode 3 is out of range; the tensor has 3 modes (0..2)");
    io = ok;
    io.v = NULL;
    expect_error(plugin, inst, &io, &out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: mode 0: v is NULL");
    expect_error(plugin, inst, &ok, NULL, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: the output struct is NULL");
    th_als_output short_out = out;
    short_out.struct_size = TH_ALS_OUTPUT_V1_0_SIZE - 1;
    expect_error(plugin, inst, &ok, &short_out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: the output struct is shorter than the th_als_output of "
                 "ABI 1.0");
    th_als_output no_gram = out;
    no_gram.gram = NULL;
    expect_error(plugin, inst, &ok, &no_gram, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: output array 'gram' is NULL");
    io = ok;
    io.sweeps = 0;
    expect_error(plugin, inst, &io, &out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: io.sweeps is 0; at least one pass is needed");
    io = ok;
    io.tolerance = -1e-3;
    expect_error(plugin, inst, &io, &out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: io.tolerance -0.001 must be finite and >= 0");
    io.tolerance = NAN;
    expect_error(plugin, inst, &io, &out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: io.tolerance nan must be finite and >= 0");
    io.tolerance = INFINITY;
    expect_error(plugin, inst, &io, &out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: io.tolerance inf must be finite and >= 0");
    io = ok;
    io.norm = 7;
    expect_error(plugin, inst, &io, &out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: norm 7 is neither TH_NORM_2 (0) nor TH_NORM_MAX (1)");
    /* ABI 1.6's fields, each named. */
    io = ok;
    io.ridge = -0.5;
    expect_error(plugin, inst, &io, &out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: io.ridge -0.5 must be finite and >= 0");
    io.ridge = NAN;
    expect_error(plugin, inst, &io, &out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: io.ridge nan must be finite and >= 0");
    io.ridge = INFINITY;
    expect_error(plugin, inst, &io, &out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: io.ridge inf must be finite and >= 0");
    io = ok;
    io.l1 = -1e-9;
    expect_error(plugin, inst, &io, &out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: io.l1 -1e-09 must be finite and >= 0");
    io.l1 = -INFINITY;
    expect_error(plugin, inst, &io, &out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: io.l1 -inf must be finite and >= 0");
    io.l1 = NAN;
    expect_error(plugin, inst, &io, &out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: io.l1 nan must be finite and >= 0");
    io = ok;
    io.unbounded = 2;
    expect_error(plugin, inst, &io, &out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: io.unbounded 2 must be 0 or 1");
    io.unbounded = UINT32_MAX;
    expect_error(plugin, inst, &io, &out, TH_ERR_INVALID_ARGUMENT,
                 "als_update_nonneg: io.unbounded 4294967295 must be 0 or 1");
    /* A struct that ends before a field means its default, whatever the
     * memory beyond struct_size holds. */
    io.struct_size = (uint32_t)offsetof(th_nonneg_update_io, unbounded);
    io.unbounded = 2;
    io.ridge = 0.25;
    th_test_assert_ok(plugin->entry.als_update_nonneg(inst, &io, &out, err), err);
    io = ok;
    io.struct_size = (uint32_t)offsetof(th_nonneg_update_io, l1);
    io.l1 = NAN;
    th_test_assert_ok(plugin->entry.als_update_nonneg(inst, &io, &out, err), err);
    /* -0.0 is a tolerance, a ridge and an l1 of zero (from the factor of
     * both signs again: two passes, as it has a change to make). */
    th_test_assert_ok(plugin->entry.set_factor(inst, 0, factors[0], err), err);
    io = ok;
    io.tolerance = -0.0;
    io.ridge = -0.0;
    io.l1 = -0.0;
    th_test_assert_ok(plugin->entry.als_update_nonneg(inst, &io, &out, err), err);
    assert_int_equal(io.passes, 2);

    plugin->entry.destroy(inst);
    th_test_free_factors(factors, 3);
}

int main(void)
{
    th_log_set_level(TH_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_the_host),
        cmocka_unit_test(test_regularised_update_is_plugin_h),
        cmocka_unit_test(test_thread_count_does_not_change_results),
        cmocka_unit_test(test_passes_counted),
        cmocka_unit_test(test_nothing_else_changes),
        cmocka_unit_test(test_stop_between_passes),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, th_test_cpu_fixture_teardown);
}
