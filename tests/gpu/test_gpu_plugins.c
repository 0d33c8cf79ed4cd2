/* GPU plugins against cpu-reference, all through the plugin ABI.
 *
 * Needs a CUDA device: without one it prints "SKIPPED: no CUDA device: ..."
 * and exits 77, which ctest reports as skipped. TH_GPU_TEST_QUICK=1 runs a
 * small subset (for compute-sanitizer, which slows kernels a hundredfold). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>
#include <math.h>

#include "cpd/dense.h"
#include "gpu_test_support.h"
#include "cpd/initial_factors.h"
#include "test_support.h"

#define TOLERANCE 1e-5

/* Modes with I_d = 1, 2, < kappa and >> kappa (kappa = SM count, ~132),
 * uniform and heavily skewed indices, empty slices, nnz primes (a multiple
 * of nothing), a single nonzero, 3 to 8 modes. */
static const th_gpu_test_case cases[] = {
    {"3 modes, uniform, I=2 and I<kappa", 3, {1000, 40, 2}, 5003, {0, 0, 0}},
    {"4 modes, skewed, I=1", 4, {1, 300, 7000, 13}, 20011, {0, 1.2, 1.5, 0.8}},
    {"5 modes, skewed", 5, {17, 5000, 3, 260, 90}, 9973, {1.0, 1.5, 0, 1.1, 0.5}},
    {"6 modes, mixed", 6, {200, 2, 150, 31, 1000, 9}, 7919, {0.5, 0, 1.0, 0, 2.0, 0}},
    {"7 modes", 7, {11, 60, 5, 300, 2, 140, 7}, 6007, {0, 1.0, 0, 1.5, 0, 0.7, 0}},
    {"8 modes, uniform", 8, {3, 4, 5, 6, 7, 8, 9, 200}, 4099, {0}},
    {"single nonzero", 3, {10, 20, 30}, 1, {0}},
    {"empty slices, heavy skew", 3, {5000, 500, 64}, 301, {2.0, 0, 1.5}},
    {"one hot row", 3, {300, 1000, 1000}, 50021, {3.0, 0, 0}},
};
#define N_CASES (sizeof(cases) / sizeof(cases[0]))
/* 4, 8 and 12: the vector kernel's 2- and 4-lane groups (8 leaves two lanes
 * idle, 12 one);
 * 48: an 8-lane kernel with a column test (half the lanes idle on a row's
 * second float4), of which two blocks would fit an SM (the launch asks for
 * shared memory that keeps one: mttkrp_impl.cuh, one_block_smem). Ranks that are
 * not multiples of 4 take float2 (even) or float (odd) elements: 6 and 1 on
 * 4 lanes; 10, 30, 50 and 126 on 8 lanes of 1, 2, 4 and 8 float2; 7, 13,
 * 25 and 45 on 8 lanes of 1, 2, 4 and 8 floats; 99 on the generic kernel. */
static const uint32_t ranks[] = {1,  4,  6,  7,  8,  10, 12, 13, 16,  25,
                                 30, 32, 45, 48, 50, 64, 96, 99, 126, 128};
#define N_RANKS (sizeof(ranks) / sizeof(ranks[0]))

/* The quick subset (sanitizers): the 8-lane kernels, whose lanes cover a
 * row with 1 to 4 float4 (32, 48, 64, 96, 128) or 4 and 8 floats or float2
 * (25, 45, 50), and the generic kernel (99). */
static bool quick_rank(uint32_t rank)
{
    static const uint32_t quick[] = {25, 32, 45, 48, 50, 64, 96, 99, 128};
    for (size_t i = 0; i < sizeof(quick) / sizeof(quick[0]); ++i)
        if (quick[i] == rank)
            return true;
    return false;
}

static double **reference_results(const th_gpu_test_plugins *p, const th_sptensor *t, uint32_t rank,
                                  double *const *factors)
{
    th_instance *ref = th_test_create_instance(p->ref, NULL);
    th_test_load_and_set(p->ref, ref, t, rank, factors);
    double **out = g_new0(double *, t->nmodes);
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        out[m] = g_new(double, (size_t)t->dims[m] * rank);
        th_gpu_test_run_mode(p->ref, ref, t, rank, m, out[m]);
    }
    p->ref->entry.destroy(ref);
    return out;
}

static void check_against(const th_plugin *plugin, th_instance *inst, const char *what,
                          const th_sptensor *t, uint32_t rank, double *const *factors,
                          double *const *expected)
{
    th_test_load_and_set(plugin, inst, t, rank, factors);
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        const size_t n = (size_t)t->dims[m] * rank;
        g_autofree double *got = g_new(double, n);
        th_gpu_test_run_mode(plugin, inst, t, rank, m, got);
        const double e = th_test_relative_error(got, expected[m], n);
        if (!(e < TOLERANCE))
            fail_msg("%s (%s): rank %u mode %u (I=%u): relative error %.3g >= %g", what,
                     plugin->info->id, rank, m, t->dims[m], e, TOLERANCE);
    }
}

static void test_mttkrp_matches_reference(void **state)
{
    const th_gpu_test_plugins *p = *state;
    GRand *rng = g_rand_new_with_seed(20240611);
    unsigned checked = 0;
    for (size_t c = 0; c < N_CASES; ++c) {
        /* Quick (sanitizer) runs: two small cases, and "one hot row" for
         * gpu-adaptive's device-side balance check only. */
        const int hot_only = th_gpu_test_quick() && c == 8;
        if (th_gpu_test_quick() && c != 0 && c != 7 && !hot_only)
            continue;
        g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[c], 1000 + c);
        for (size_t ri = 0; ri < N_RANKS; ++ri) {
            const uint32_t rank = ranks[ri];
            if (th_gpu_test_quick() && !quick_rank(rank))
                continue;
            double **factors = th_test_random_factors(t, rank, rng);
            double **expected = reference_results(p, t, rank, factors);
            for (uint32_t g = 0; g < TH_GPU_TEST_N_PLUGINS && !hot_only; ++g) {
                th_instance *inst = th_test_create_instance(p->gpu[g], NULL);
                check_against(p->gpu[g], inst, cases[c].name, t, rank, factors, expected);
                p->gpu[g]->entry.destroy(inst);
                checked += t->nmodes;
                /* The factors taken as larger than L2 (read at create): the
                 * kernels that load the indices through L1 (mttkrp_impl.cuh,
                 * launch_vec_l1). */
                g_setenv("TH_GPU_TEST_L2_BYTES", "0", TRUE);
                inst = th_test_create_instance(p->gpu[g], NULL);
                g_unsetenv("TH_GPU_TEST_L2_BYTES");
                check_against(p->gpu[g], inst, cases[c].name, t, rank, factors, expected);
                p->gpu[g]->entry.destroy(inst);
                checked += t->nmodes;
            }
            /* Non-default options: few partitions, few nonzeros in flight,
             * and the paper's rule, so long modes go to scheme 1 with many
             * rows per partition, hot rows included. */
            th_instance *inst = NULL;
            if (!hot_only) {
                inst = th_test_create_instance(p->gpu[0], "kappa", "5", "P", "8", "rule", "paper",
                                               NULL);
                check_against(p->gpu[0], inst, cases[c].name, t, rank, factors, expected);
                p->gpu[0]->entry.destroy(inst);
                checked += t->nmodes;
            }
            /* kappa = 16: partitions of over a thousand nonzeros on the
             * bigger cases, so the balanced rule's device-side check runs
             * and picks either scheme (the scheme-2 outcome keeps the
             * index order through an all-zero partition sort). */
            inst = th_test_create_instance(p->gpu[0], "kappa", "16", NULL);
            check_against(p->gpu[0], inst, cases[c].name, t, rank, factors, expected);
            p->gpu[0]->entry.destroy(inst);
            checked += t->nmodes;
            th_test_free_factors(expected, t->nmodes);
            th_test_free_factors(factors, t->nmodes);
        }
    }
    printf("checked %u mode results against cpu-reference\n", checked);
    g_rand_free(rng);
}

/* Copies of 32 MB and more take other paths than the cases above
 * (kernels/transfer.cu: host threads, each on its own stream through its
 * own pinned pieces, converting between fp64 and fp32 on the host): a
 * tensor whose index arrays (36 MB each) and values (72 MB) take them, with
 * an uneven split over the threads, checked by its MTTKRP against
 * cpu-reference (a 128 MB result with empty rows among them); and a factor
 * of 128 MB that must come back exactly as its values rounded to fp32.
 * (The tall case of the update test downloads large factors with column
 * scales other than 1.) */
static void test_large_transfers(void **state)
{
    const th_gpu_test_plugins *p = *state;
    static const th_gpu_test_case large = {
        "9M nonzeros", 3, {2000003, 3001, 53}, 9000011, {0.5, 0, 0}};
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&large, 77);
    GRand *rng = g_rand_new_with_seed(4242);
    const uint32_t rank = 8;
    double **factors = th_test_random_factors(t, rank, rng);
    double **expected = reference_results(p, t, rank, factors);
    th_instance *inst = th_test_create_instance(p->gpu[0], NULL);
    check_against(p->gpu[0], inst, large.name, t, rank, factors, expected);

    const size_t n = (size_t)t->dims[0] * rank;
    char err[TH_ERROR_SIZE] = "";
    g_autofree double *back = g_new(double, n);
    th_test_assert_ok(p->gpu[0]->entry.get_factor(inst, 0, back, err), err);
    for (size_t k = 0; k < n; ++k)
        if (back[k] != (double)(float)factors[0][k])
            fail_msg("factor element %zu: %.9g came back as %.9g", k, factors[0][k], back[k]);
    p->gpu[0]->entry.destroy(inst);
    th_test_free_factors(expected, t->nmodes);
    th_test_free_factors(factors, t->nmodes);
    g_rand_free(rng);
}

/* A load refused for memory says, before allocating anything, how many
 * devices like this one would hold the tensor shared out by its nonzeros
 * (plugins/gpu-common/memory_plan.h): the free memory is capped
 * (TH_GPU_TEST_FREE_BYTES, read at create) below the 4M-nonzero tensor's
 * ~0.35 GB on one device, so a few devices would do; capped at one byte,
 * none would. */
static void test_memory_advice(void **state)
{
    const th_gpu_test_plugins *p = *state;
    static const th_gpu_test_case dense = {"4M nonzeros", 3, {1000, 1000, 1000}, 4000000, {0}};
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&dense, 5);
    th_coo_tensor view;
    th_test_coo_view(t, &view);
    static const char *const caps[2] = {"150000000", "1"};
    for (int k = 0; k < 2; ++k) {
        g_setenv("TH_GPU_TEST_FREE_BYTES", caps[k], TRUE);
        th_instance *inst = th_test_create_instance(p->gpu[0], NULL);
        g_unsetenv("TH_GPU_TEST_FREE_BYTES");
        char err[TH_ERROR_SIZE] = "";
        assert_int_equal(p->gpu[0]->entry.load_tensor(inst, &view, 8, err),
                         TH_ERR_OUT_OF_MEMORY);
        printf("capped at %s bytes: %s\n", caps[k], err);
        assert_non_null(strstr(err, "tensor does not fit on "));
        if (k == 0) {
            const char *advice = strstr(err, "; its nonzeros shared out over ");
            assert_non_null(advice);
            unsigned devices = 0;
            assert_int_equal(sscanf(advice, "; its nonzeros shared out over %u such devices",
                                    &devices), 1);
            assert_true(devices >= 2 && devices <= 8);
        } else {
            assert_non_null(strstr(err, "; no sharing of its nonzeros over up to 1024 such "
                                        "devices fits"));
        }
        p->gpu[0]->entry.destroy(inst);
    }
}

static void assert_close(const double *got, const double *want, size_t n, const char *what,
                         const char *plugin_id, uint32_t rank, int32_t norm)
{
    const double e = th_test_relative_error(got, want, n);
    if (!(e < TOLERANCE))
        fail_msg("als_update %s (%s, rank %u, norm %d): relative error %.3g", what, plugin_id,
                 rank, (int)norm, e);
}

static void test_als_update_matches_reference(void **state)
{
    const th_gpu_test_plugins *p = *state;
    GRand *rng = g_rand_new_with_seed(7);
    /* A tall mode: many more tiles of rows than resident blocks, so every
     * block of the update loops over several tiles, and a last partial tile;
     * at ranks 16, 32 and 64 it takes the tensor-core update
     * (als_tensor_core.cu), at the others the SIMT one (als.cu). */
    static const th_gpu_test_case tall = {"tall mode", 3, {300007, 40, 25}, 120011, {0.5, 0, 0}};
    const th_gpu_test_case *als_cases[] = {&cases[1], &cases[0], &tall};
    /* Ranks whose padded width is and is not their own (R % 4), one 4-wide
     * column quad, one Gram block (<= 64) and several along y (128). */
    const uint32_t als_ranks[] = {16, 7, 128, 1, 5, 32, 64};
    for (size_t ci = 0; ci < G_N_ELEMENTS(als_cases); ++ci) {
        g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(als_cases[ci], 77 + ci);
        for (size_t ri = 0; ri < G_N_ELEMENTS(als_ranks); ++ri) {
            const uint32_t rank = als_ranks[ri];
            /* Quick (sanitizer) runs: the small shapes at the usual ranks,
             * and the tall mode (the tensor-core update) at ranks 32 and 64. */
            if (th_gpu_test_quick() &&
                (rank == 128 || (ci == 2 ? rank != 32 && rank != 64 : rank == 64)))
                continue;
            double **factors = th_test_random_factors(t, rank, rng);
            g_autofree double *w = th_test_random_matrix(rank, rank, rng);
            for (uint32_t g = 0; g < TH_GPU_TEST_N_PLUGINS; ++g) {
                /* A fresh reference per plugin: the updates change the
                 * factors the next mode's MTTKRP reads, on both sides. */
                th_instance *ref = th_test_create_instance(p->ref, NULL);
                th_test_load_and_set(p->ref, ref, t, rank, factors);
                th_instance *inst = th_test_create_instance(p->gpu[g], NULL);
                th_test_load_and_set(p->gpu[g], inst, t, rank, factors);
                for (uint32_t mode = 0; mode < t->nmodes; ++mode) {
                    const int32_t norm = mode % 2 ? TH_NORM_MAX : TH_NORM_2;
                    const size_t rows = t->dims[mode];
                    double *bufs[2][4];
                    const th_plugin *pl[2] = {p->ref, p->gpu[g]};
                    th_instance *in[2] = {ref, inst};
                    for (int s = 0; s < 2; ++s) {
                        char err[TH_ERROR_SIZE] = "";
                        bufs[s][0] = g_new(double, rank);
                        bufs[s][1] = g_new(double, (size_t)rank * rank);
                        bufs[s][2] = g_new(double, rank);
                        bufs[s][3] = g_new(double, rows * rank);
                        th_test_assert_ok(pl[s]->entry.set_factor(in[s], mode, factors[mode], err),
                                          err);
                        th_test_assert_ok(pl[s]->entry.mttkrp(in[s], mode, err), err);
                        th_als_output out = {.struct_size = sizeof(th_als_output),
                                             .lambda = bufs[s][0],
                                             .gram = bufs[s][1],
                                             .inner = bufs[s][2]};
                        th_test_assert_ok(pl[s]->entry.als_update(in[s], mode, w, norm, &out, err),
                                          err);
                        th_test_assert_ok(pl[s]->entry.get_factor(in[s], mode, bufs[s][3], err),
                                          err);
                    }
                    const char *id = p->gpu[g]->info->id;
                    assert_close(bufs[1][0], bufs[0][0], rank, "lambda", id, rank, norm);
                    assert_close(bufs[1][1], bufs[0][1], (size_t)rank * rank, "gram", id, rank,
                                 norm);
                    assert_close(bufs[1][2], bufs[0][2], rank, "inner", id, rank, norm);
                    assert_close(bufs[1][3], bufs[0][3], rows * rank, "factor", id, rank, norm);
                    for (int s = 0; s < 2; ++s)
                        for (int b = 0; b < 4; ++b)
                            g_free(bufs[s][b]);
                }
                p->gpu[g]->entry.destroy(inst);
                p->ref->entry.destroy(ref);
            }
            th_test_free_factors(factors, t->nmodes);
        }
    }
    g_rand_free(rng);
}

/* init_factors leaves what set_factor of the host's draw leaves, bit for
 * bit (the fp32 rounding of the same doubles), and the Grams of it. */
static void test_init_factors_match_the_host_draw(void **state)
{
    const th_gpu_test_plugins *p = *state;
    static const th_gpu_test_case tall = {"tall mode", 3, {300007, 40, 25}, 120011, {0.5, 0, 0}};
    const th_gpu_test_case *init_cases[] = {&cases[0], &cases[1], &tall};
    const uint64_t seeds[] = {0, 42, UINT64_MAX};
    const uint32_t init_ranks[] = {5, 32, 128};
    for (size_t ci = 0; ci < G_N_ELEMENTS(init_cases); ++ci) {
        g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(init_cases[ci], 5 + ci);
        for (size_t ri = 0; ri < G_N_ELEMENTS(init_ranks); ++ri) {
            const uint32_t rank = init_ranks[ri];
            if (th_gpu_test_quick() && (rank == 128 || ci == 2))
                continue;
            const uint64_t seed = seeds[(ci + ri) % G_N_ELEMENTS(seeds)];
            const th_plugin *pl = p->gpu[ri % TH_GPU_TEST_N_PLUGINS];
            char err[TH_ERROR_SIZE] = "";
            th_instance *drawn = th_test_create_instance(pl, NULL);
            th_instance *uploaded = th_test_create_instance(pl, NULL);
            double **host = g_new0(double *, t->nmodes);
            double **grams = g_new0(double *, t->nmodes);
            for (uint32_t m = 0; m < t->nmodes; ++m) {
                host[m] = g_new(double, (size_t)t->dims[m] * rank);
                th_initial_factor_fill(host[m], t->dims[m], rank, seed, m);
                grams[m] = g_new(double, (size_t)rank * rank);
            }
            th_test_load_and_set(pl, uploaded, t, rank, host);
            th_test_load_and_set(pl, drawn, t, rank, host); /* then overwritten: */
            th_init_factors_io io = {.struct_size = sizeof io, .nmodes = t->nmodes,
                                     .seed = seed, .grams = grams};
            th_test_assert_ok(pl->entry.init_factors(drawn, &io, err), err);
            for (uint32_t m = 0; m < t->nmodes; ++m) {
                const size_t n = (size_t)t->dims[m] * rank;
                g_autofree double *a = g_new(double, n);
                g_autofree double *b = g_new(double, n);
                th_test_assert_ok(pl->entry.get_factor(drawn, m, a, err), err);
                th_test_assert_ok(pl->entry.get_factor(uploaded, m, b, err), err);
                if (memcmp(a, b, sizeof(double) * n) != 0)
                    fail_msg("%s, rank %u, seed %" G_GUINT64_FORMAT ", mode %u: init_factors "
                             "differs from set_factor of the host's draw",
                             init_cases[ci]->name, rank, seed, m);
                g_autofree double *want = g_new(double, (size_t)rank * rank);
                th_dense_gram(b, t->dims[m], rank, want);
                assert_close(grams[m], want, (size_t)rank * rank, "init Gram", pl->info->id,
                             rank, 0);
            }
            pl->entry.destroy(drawn);
            pl->entry.destroy(uploaded);
            th_test_free_factors(host, t->nmodes);
            th_test_free_factors(grams, t->nmodes);
        }
    }
}

static void expect_create_error(const th_plugin *plugin, const char *key, const char *value,
                                th_status want, const char *needle)
{
    th_option opt = {.key = key, .value = value};
    th_instance *inst = NULL;
    char err[TH_ERROR_SIZE] = "";
    const th_status st = plugin->entry.create(&opt, 1, &plugin->services, &inst, err);
    if (st != want || strstr(err, needle) == NULL)
        fail_msg("%s: create(%s=%s) gave %s \"%s\", expected %s naming \"%s\"",
                 plugin->info->id, key, value, th_status_name(st), err, th_status_name(want),
                 needle);
    assert_null(inst);
}

static void expect_status(th_status got, th_status want, const char *err, const char *needle,
                          const char *what)
{
    if (got != want || (needle && strstr(err, needle) == NULL))
        fail_msg("%s gave %s \"%s\", expected %s%s%s", what, th_status_name(got), err,
                 th_status_name(want), needle ? " naming " : "", needle ? needle : "");
}

static void test_error_paths(void **state)
{
    const th_gpu_test_plugins *p = *state;
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[0], 5);
    th_coo_tensor view;
    th_test_coo_view(t, &view);
    for (uint32_t g = 0; g < TH_GPU_TEST_N_PLUGINS; ++g) {
        const th_plugin *pl = p->gpu[g];
        expect_create_error(pl, "kapa", "3", TH_ERR_INVALID_ARGUMENT, "\"kapa\"");
        expect_create_error(pl, "kappa", "0", TH_ERR_INVALID_ARGUMENT, "kappa");
        expect_create_error(pl, "kappa", "-4", TH_ERR_INVALID_ARGUMENT, "kappa");
        expect_create_error(pl, "P", "513", TH_ERR_INVALID_ARGUMENT, "option P");
        expect_create_error(pl, "P", "8x", TH_ERR_INVALID_ARGUMENT, "option P");
        expect_create_error(pl, "device", "999", TH_ERR_INVALID_ARGUMENT, "device=999");
        if (g == 0)
            expect_create_error(pl, "rule", "fast", TH_ERR_INVALID_ARGUMENT,
                                "option rule: \"fast\" is not valid: expected \"balanced\" or "
                                "\"paper\"");
        else
            expect_create_error(pl, "rule", "paper", TH_ERR_INVALID_ARGUMENT,
                                "rule applies to gpu-adaptive only");

        th_instance *inst = th_test_create_instance(pl, NULL);
        char err[TH_ERROR_SIZE] = "";
        expect_status(pl->entry.mttkrp(inst, 0, err), TH_ERR_BAD_STATE, err, "no tensor",
                      "mttkrp before load_tensor");
        expect_status(pl->entry.load_tensor(inst, &view, 0, err), TH_ERR_INVALID_ARGUMENT, err,
                      "rank 0", "load_tensor rank 0");
        expect_status(pl->entry.load_tensor(inst, &view, 129, err), TH_ERR_UNSUPPORTED, err,
                      "rank 129", "load_tensor rank 129");
        th_test_assert_ok(pl->entry.load_tensor(inst, &view, 8, err), err);
        g_autofree double *buf = g_new0(double, (size_t)1000 * 8);
        expect_status(pl->entry.mttkrp(inst, 3, err), TH_ERR_INVALID_ARGUMENT, err, "mode 3",
                      "mttkrp mode 3");
        expect_status(pl->entry.set_factor(inst, 7, buf, err), TH_ERR_INVALID_ARGUMENT, err,
                      "mode 7", "set_factor mode 7");
        expect_status(pl->entry.get_factor(inst, 3, buf, err), TH_ERR_INVALID_ARGUMENT, err,
                      "mode 3", "get_factor mode 3");
        expect_status(pl->entry.get_mttkrp_result(inst, 1, buf, err), TH_ERR_BAD_STATE, err,
                      "mode 1", "get_mttkrp_result before mttkrp");
        g_autofree double *w = g_new0(double, 64);
        double lambda[8], gram[64], inner[8];
        th_als_output out = {.struct_size = sizeof(out), .lambda = lambda, .gram = gram,
                             .inner = inner};
        expect_status(pl->entry.als_update(inst, 0, w, TH_NORM_2, &out, err), TH_ERR_BAD_STATE,
                      err, "mode 0", "als_update before mttkrp");
        th_test_assert_ok(pl->entry.mttkrp(inst, 0, err), err);
        expect_status(pl->entry.als_update(inst, 0, w, 5, &out, err), TH_ERR_INVALID_ARGUMENT,
                      err, "norm 5", "als_update norm 5");
        th_mode_info mi = {.struct_size = sizeof(mi)};
        expect_status(pl->entry.get_mode_info(inst, 3, &mi, err), TH_ERR_INVALID_ARGUMENT, err,
                      "mode 3", "get_mode_info mode 3");
        pl->entry.destroy(inst);
    }
}

/* Mode info's scheme is "schemeN (reason)". */
static void assert_scheme(const char *got, const char *want)
{
    const size_t n = strlen(want);
    if (strncmp(got, want, n) != 0 || strncmp(got + n, " (", 2) != 0)
        fail_msg("scheme \"%s\", expected \"%s (reason)\"", got, want);
}

static void test_runtime_and_mode_info(void **state)
{
    const th_gpu_test_plugins *p = *state;
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[0], 9); /* dims 1000, 40, 2 */
    int sm_count = 0;
    assert_int_equal(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0),
                     cudaSuccess);
    /* gpu-adaptive: 5003 nonzeros over 132 partitions is under one chunk
     * per group, so even the long mode 0 goes to scheme 2. */
    const char *const want[TH_GPU_TEST_N_PLUGINS][3] = {{"scheme2", "scheme2", "scheme2"},
                                                {"scheme1", "scheme1", "scheme1"},
                                                {"scheme2", "scheme2", "scheme2"}};
    for (uint32_t g = 0; g < TH_GPU_TEST_N_PLUGINS; ++g) {
        const th_plugin *pl = p->gpu[g];
        assert_true(pl->info->flags & TH_CAP_GPU);
        assert_true(pl->info->flags & TH_CAP_ALS_UPDATE);
        assert_int_equal(pl->info->value_type, TH_VALUE_F32);
        th_instance *inst = th_test_create_instance(pl, NULL);
        GRand *rng = g_rand_new_with_seed(g);
        double **factors = th_test_random_factors(t, 32, rng);
        g_rand_free(rng);
        th_test_load_and_set(pl, inst, t, 32, factors);
        char err[TH_ERROR_SIZE] = "";
        th_runtime_info ri;
        th_runtime_info_init(&ri);
        ri.last_sweep_seconds = 0.0; /* the plugin must write it: no sweep yet is < 0 */
        th_test_assert_ok(pl->entry.get_runtime_info(inst, &ri, err), err);
        assert_true(ri.last_sweep_seconds < 0);
        printf("%s: %s | %s | tensor %llu B, factors %llu B\n", pl->info->id, ri.device,
               ri.details, (unsigned long long)ri.tensor_bytes,
               (unsigned long long)ri.factor_bytes);
        assert_non_null(strstr(ri.device, "(device 0)"));
        /* Rank 32 runs 8 lanes per nonzero, 128 nonzeros per 1024-thread block. */
        g_autofree char *kappa = g_strdup_printf("kappa=%d P=128%s lanes=8 schemes=", sm_count,
                                                 g == 0 ? " rule=balanced" : "");
        if (!strstr(ri.details, kappa))
            fail_msg("%s: details \"%s\" lack \"%s\"", pl->info->id, ri.details, kappa);
        assert_non_null(strstr(ri.details, "mode0=\""));
        assert_true(ri.tensor_bytes >= 3ull * t->nnz * 4 * 4);
        assert_int_equal(ri.factor_bytes, 2ull * 4 * 32 * (1000 + 40 + 2));
        for (uint32_t m = 0; m < 3; ++m) {
            th_mode_info mi = {.struct_size = sizeof(mi)};
            th_test_assert_ok(pl->entry.get_mode_info(inst, m, &mi, err), err);
            assert_true(mi.last_mttkrp_seconds < 0.0);
            /* mttkrp() returns with its result complete: its kernel time
             * fits inside the call. */
            const gint64 start = g_get_monotonic_time();
            const th_status status = pl->entry.mttkrp(inst, m, err);
            const double wall = (double)(g_get_monotonic_time() - start) * 1e-6;
            th_test_assert_ok(status, err);
            th_test_assert_ok(pl->entry.get_mode_info(inst, m, &mi, err), err);
            assert_scheme(mi.scheme, want[g][m]);
            if (g == 0 && m == 0)
                assert_non_null(strstr(mi.scheme, "nnz/partition < 1024"));
            assert_int_equal(mi.partitions, (uint32_t)sm_count);
            assert_true(mi.last_mttkrp_seconds > 0.0 && mi.last_mttkrp_seconds <= wall);
        }
        /* A host built against a shorter (older) struct gets only its part. */
        th_mode_info small;
        memset(&small, 0x5a, sizeof(small));
        small.struct_size = (uint32_t)offsetof(th_mode_info, scheme);
        th_test_assert_ok(pl->entry.get_mode_info(inst, 0, &small, err), err);
        assert_int_equal(small.partitions, (uint32_t)sm_count);
        assert_int_equal((unsigned char)small.scheme[0], 0x5a);
        th_test_free_factors(factors, 3);
        pl->entry.destroy(inst);
    }

    /* gpu-adaptive leaves scheme 1 for a long mode whose hot row would
     * overload one partition (mode 0 of "one hot row": I = 300 >= kappa).
     * kappa = 16 gives partitions of ~3000 nonzeros, above the "one chunk
     * per group" floor (1024 at rank 8) under which it takes scheme 2. */
    g_autoptr(th_sptensor) hot = th_gpu_test_make_tensor(&cases[8], 9);
    th_instance *inst = th_test_create_instance(p->gpu[0], "kappa", "16", NULL);
    th_coo_tensor view;
    th_test_coo_view(hot, &view);
    char err[TH_ERROR_SIZE] = "";
    th_test_assert_ok(p->gpu[0]->entry.load_tensor(inst, &view, 8, err), err);
    const char *const hot_want[3] = {"scheme2", "scheme1", "scheme1"};
    for (uint32_t m = 0; m < 3; ++m) {
        th_mode_info mi = {.struct_size = sizeof(mi)};
        th_test_assert_ok(p->gpu[0]->entry.get_mode_info(inst, m, &mi, err), err);
        assert_scheme(mi.scheme, hot_want[m]);
        assert_non_null(strstr(mi.scheme, m == 0 ? "(hot rows)" : "(balanced)"));
    }
    p->gpu[0]->entry.destroy(inst);

    /* rule = "paper" is the literal I_d >= kappa: the hot mode keeps scheme 1. */
    inst = th_test_create_instance(p->gpu[0], "rule", "paper", NULL);
    th_test_assert_ok(p->gpu[0]->entry.load_tensor(inst, &view, 8, err), err);
    for (uint32_t m = 0; m < 3; ++m) {
        th_mode_info mi = {.struct_size = sizeof(mi)};
        th_test_assert_ok(p->gpu[0]->entry.get_mode_info(inst, m, &mi, err), err);
        assert_scheme(mi.scheme, "scheme1");
        assert_non_null(strstr(mi.scheme, "rule=paper: I_d="));
    }
    p->gpu[0]->entry.destroy(inst);
}

#define THG_TEST_MAX_MODES 8u

static size_t free_device_bytes(void)
{
    size_t free_b = 0, total = 0;
    assert_int_equal(cudaMemGetInfo(&free_b, &total), cudaSuccess);
    return free_b;
}

static void one_cycle(const th_plugin *pl, const th_sptensor *t, double *const *factors)
{
    th_instance *inst = th_test_create_instance(pl, NULL);
    th_test_load_and_set(pl, inst, t, 32, factors);
    char err[TH_ERROR_SIZE] = "";
    for (uint32_t m = 0; m < t->nmodes; ++m)
        th_test_assert_ok(pl->entry.mttkrp(inst, m, err), err);
    double lambda[32], gram[32 * 32], inner[32], w[32 * 32];
    for (int k = 0; k < 32 * 32; ++k)
        w[k] = (k % 33 == 0) ? 1.0 : 0.01;
    th_als_output out = {.struct_size = sizeof(out), .lambda = lambda, .gram = gram,
                         .inner = inner};
    th_test_assert_ok(pl->entry.als_update(inst, 1, w, TH_NORM_2, &out, err), err);
    /* The sweep's buffers and graphs too (ABI 1.1). */
    double *grams[THG_TEST_MAX_MODES];
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        grams[m] = g_new(double, 32 * 32);
        th_dense_gram(factors[m], t->dims[m], 32, grams[m]);
    }
    th_als_sweep_io io = {.struct_size = sizeof(io), .norm = TH_NORM_MAX, .nmodes = t->nmodes,
                          .grams = grams, .lambda = lambda, .inner = inner};
    th_test_assert_ok(pl->entry.als_sweep(inst, &io, err), err);
    for (uint32_t m = 0; m < t->nmodes; ++m)
        g_free(grams[m]);
    pl->entry.destroy(inst);
}

#define LEAK_SLACK (2u << 20)

static void test_repeated_use_leaks_nothing(void **state)
{
    const th_gpu_test_plugins *p = *state;
    g_autoptr(th_sptensor) t = th_gpu_test_make_tensor(&cases[1], 11);
    GRand *rng = g_rand_new_with_seed(3);
    double **factors = th_test_random_factors(t, 32, rng);
    g_rand_free(rng);
    const int cycles = th_gpu_test_quick() ? 3 : 20;
    for (uint32_t g = 0; g < TH_GPU_TEST_N_PLUGINS; ++g) {
        one_cycle(p->gpu[g], t, factors); /* warm: module load, first-touch pools */
        const size_t baseline = free_device_bytes();
        for (int i = 0; i < cycles; ++i)
            one_cycle(p->gpu[g], t, factors);
        const size_t after = free_device_bytes();
        printf("%s: %d create/load/run/destroy cycles: free device memory %zu -> %zu\n",
               p->gpu[g]->info->id, cycles, baseline, after);
        if (after + LEAK_SLACK < baseline)
            fail_msg("%s leaked %zu bytes over %d cycles", p->gpu[g]->info->id,
                     baseline - after, cycles);
    }
    /* Whole plugin load/unload cycles (dlopen, CUDA module registration). */
    g_autofree char *path = th_gpu_test_plugin_path("gpu-scheme2");
    {
        th_plugin *pl = th_test_load_plugin(path);
        one_cycle(pl, t, factors);
        th_plugin_unload(pl);
    }
    const size_t baseline = free_device_bytes();
    for (int i = 0; i < (th_gpu_test_quick() ? 2 : 5); ++i) {
        th_plugin *pl = th_test_load_plugin(path);
        one_cycle(pl, t, factors);
        th_plugin_unload(pl);
    }
    const size_t after = free_device_bytes();
    printf("gpu-scheme2: plugin load/unload cycles: free device memory %zu -> %zu\n", baseline,
           after);
    if (after + LEAK_SLACK < baseline)
        fail_msg("loading and unloading gpu-scheme2 leaked %zu bytes", baseline - after);
    th_test_free_factors(factors, t->nmodes);
}

int main(void)
{
    if (!th_gpu_test_have_device())
        return 77;
    th_gpu_test_apply_filter();
    /* Result rows the MTTKRP never writes start as NaN: any reader that
     * takes them for anything but zero fails a comparison. */
    g_setenv("TH_GPU_POISON_RESULTS", "1", TRUE);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_paths),
        cmocka_unit_test(test_runtime_and_mode_info),
        cmocka_unit_test(test_mttkrp_matches_reference),
        cmocka_unit_test(test_large_transfers),
        cmocka_unit_test(test_memory_advice),
        cmocka_unit_test(test_als_update_matches_reference),
        cmocka_unit_test(test_init_factors_match_the_host_draw),
        cmocka_unit_test(test_repeated_use_leaks_nothing),
    };
    return cmocka_run_group_tests(tests, th_gpu_test_setup_plugins, th_gpu_test_teardown_plugins);
}
