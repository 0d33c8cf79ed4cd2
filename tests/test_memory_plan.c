/* Device memory per rank (plugins/gpu-common/memory_plan.h): on one device
 * the single-GPU load's terms; the copies fall as 1/G while the factors do
 * not; every row has an owner; a hot row does not unbalance the shares;
 * the fewest devices that fit, and in words; counts past 2^32 without overflow; bad
 * models refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "memory_plan.h"

#define GIB ((uint64_t)1 << 30)

#define MAX_TEST_MODES 4

/* A model over per-row nonzero counts (prefix sums made here). */
typedef struct {
    uint32_t dims[MAX_TEST_MODES];
    uint64_t *offsets[MAX_TEST_MODES];
    const uint64_t *view[MAX_TEST_MODES];
    thp_memory_model model;
} test_model;

static void model_init(test_model *t, uint32_t nmodes, const uint32_t *dims,
                       const uint64_t *const *counts, uint32_t rank)
{
    for (uint32_t k = 0; k < nmodes; ++k) {
        t->dims[k] = dims[k];
        t->offsets[k] = calloc(dims[k] + 1u, sizeof(uint64_t));
        assert_non_null(t->offsets[k]);
        for (uint32_t r = 0; r < dims[k]; ++r)
            t->offsets[k][r + 1] = t->offsets[k][r] + counts[k][r];
        t->view[k] = t->offsets[k];
    }
    t->model = (thp_memory_model){.nmodes = nmodes, .rank = rank, .kappa = 2, .dims = t->dims,
                                  .row_offsets = t->view, .fixed_bytes = 1000,
                                  .build_bytes_per_nonzero = 10, .build_bytes_per_row = 3};
}

static void model_free(test_model *t)
{
    for (uint32_t k = 0; k < t->model.nmodes; ++k)
        free(t->offsets[k]);
}

/* 20 nonzeros over modes of 5, 7 and 3 rows, some rows empty. */
static const uint64_t small_a[] = {4, 0, 10, 6, 0};
static const uint64_t small_b[] = {1, 1, 1, 1, 1, 5, 10};
static const uint64_t small_c[] = {0, 20, 0};

static void small_model(test_model *t)
{
    const uint32_t dims[] = {5, 7, 3};
    const uint64_t *counts[] = {small_a, small_b, small_c};
    model_init(t, 3, dims, counts, 4);
}

static void test_one_device_is_the_single_gpu_budget(void **state)
{
    (void)state;
    test_model t;
    small_model(&t);
    thp_rank_memory r;
    assert_int_equal(thp_plan_rank_memory(&t.model, 1, 0, &r), 0);
    /* Per mode: 20 nonzeros x 4 words x 4 bytes, kappa + 1 offsets, one
     * bitmap word. */
    assert_int_equal(r.copies, 3u * (20u * 16u + 3u * 4u + 4u));
    assert_int_equal(r.factors, (5u + 7u + 3u) * 4u * 4u);
    assert_int_equal(r.results, r.factors); /* one device owns every row */
    assert_int_equal(r.run_ahead, 0u);      /* a multi-device sweep's alone */
    assert_int_equal(r.fixed, 1000u);
    assert_int_equal(r.build, 20u * 10u + 7u * 3u);
    assert_int_equal(r.resident, r.copies + r.factors + r.results + r.fixed);
    assert_int_equal(r.peak, r.resident + r.build);
    model_free(&t);
}

/* Deterministic skewed counts: row r of a mode of n rows gets ~n / (r + 1). */
static uint64_t *skewed_counts(uint32_t rows, uint64_t scale)
{
    uint64_t *c = malloc(sizeof *c * rows);
    assert_non_null(c);
    for (uint32_t r = 0; r < rows; ++r)
        c[r] = (r % 7u == 3u) ? 0u : scale / (r + 1u);
    return c;
}

static void test_copies_fall_and_every_row_has_an_owner(void **state)
{
    (void)state;
    const uint32_t dims[] = {1000, 37, 5000};
    uint64_t *a = skewed_counts(dims[0], 40000), *b = NULL, *c = NULL;
    /* The other modes hold the same nonzeros, spread differently. */
    uint64_t nnz = 0;
    for (uint32_t r = 0; r < dims[0]; ++r)
        nnz += a[r];
    b = calloc(dims[1], sizeof *b);
    c = calloc(dims[2], sizeof *c);
    for (uint64_t k = 0; k < nnz; ++k) {
        b[(k * 7u) % dims[1]]++;
        c[(k * k + 3u) % dims[2]]++;
    }
    const uint64_t *counts[] = {a, b, c};
    test_model t;
    model_init(&t, 3, dims, counts, 32);
    thp_rank_memory one;
    assert_int_equal(thp_plan_rank_memory(&t.model, 1, 0, &one), 0);
    for (uint32_t g = 1; g <= 16; ++g) {
        uint64_t owned_rows = 0, ahead_rows = 0;
        for (uint32_t d = 0; d < g; ++d) {
            thp_rank_memory r;
            assert_int_equal(thp_plan_rank_memory(&t.model, g, d, &r), 0);
            assert_int_equal(r.resident,
                             r.copies + r.factors + r.results + r.run_ahead + r.fixed);
            /* Mode 0's rows (at least one) and its scale, once more, and
             * the stamps. */
            if (g == 1) {
                assert_int_equal(r.run_ahead, 0u);
            } else {
                const uint64_t floats = r.run_ahead - THP_RUN_AHEAD_STAMP_BYTES;
                assert_int_equal(floats % (32u * 4u), 0u);
                assert_true(floats >= 2u * 32u * 4u);
                ahead_rows += floats / (32u * 4u) - 1u;
            }
            /* Shares differ by one nonzero at most: copies as 1/G, beside
             * each mode's offsets and bitmap. */
            const uint64_t quota = (nnz + g - 1u) / g;
            const uint64_t per_mode_fixed = (one.copies - 3u * nnz * 16u); /* all modes' */
            assert_true(r.copies <= 3u * quota * 16u + per_mode_fixed);
            assert_true(r.copies >= 3u * (nnz / g) * 16u + per_mode_fixed);
            assert_int_equal(r.factors, one.factors);
            owned_rows += r.results / (32u * 4u);
        }
        /* Every row owned once, a split row twice: at most one per boundary
         * and mode. */
        assert_true(owned_rows >= 1000u + 37u + 5000u);
        assert_true(owned_rows <= 1000u + 37u + 5000u + 3u * (g - 1u));
        if (g > 1) { /* mode 0's 1000 rows, a split row twice */
            assert_true(ahead_rows >= 1000u);
            assert_true(ahead_rows <= 1000u + (g - 1u));
        }
        thp_rank_memory largest;
        assert_int_equal(thp_plan_largest_rank(&t.model, g, &largest), 0);
        assert_true(largest.peak <= one.peak);
    }
    model_free(&t);
    free(a);
    free(b);
    free(c);
}

static void test_hot_row_is_split(void **state)
{
    (void)state;
    /* Row 0 of mode 0 holds 90% of the nonzeros. */
    uint64_t a[100], b[100];
    for (int r = 0; r < 100; ++r) {
        a[r] = r == 0 ? 9000u : 10u + (r % 3 == 0 ? 1u : 0u) - (r % 3 == 1 ? 1u : 0u);
        b[r] = 0;
    }
    uint64_t nnz = 0;
    for (int r = 0; r < 100; ++r)
        nnz += a[r];
    for (uint64_t k = 0; k < nnz; ++k)
        b[k % 100u]++;
    const uint32_t dims[] = {100, 100};
    const uint64_t *counts[] = {a, b};
    test_model t;
    model_init(&t, 2, dims, counts, 8);
    for (uint32_t d = 0; d < 4; ++d) {
        thp_rank_memory r;
        assert_int_equal(thp_plan_rank_memory(&t.model, 4, d, &r), 0);
        const uint64_t fixed_copies = 2u * (3u * 4u + 4u * 4u); /* offsets and bitmaps */
        const uint64_t share_bytes = r.copies - fixed_copies;
        /* Each share of each mode is nnz / 4, the hot row included. */
        assert_true(share_bytes >= 2u * (nnz / 4u) * 12u);
        assert_true(share_bytes <= 2u * (nnz / 4u + 1u) * 12u);
    }
    /* The hot row's three ranks own it (a split row counts for each);
     * the last owns the other 99 rows of mode 0. */
    thp_rank_memory last;
    assert_int_equal(thp_plan_rank_memory(&t.model, 4, 3, &last), 0);
    assert_true(last.results >= 99u * 8u * 4u);
    model_free(&t);
}

static void test_fewest_devices_that_fit(void **state)
{
    (void)state;
    const uint32_t dims[] = {50, 40, 30};
    uint64_t *a = skewed_counts(dims[0], 4000), *b = calloc(40, sizeof *b),
             *c = calloc(30, sizeof *c);
    uint64_t nnz = 0;
    for (uint32_t r = 0; r < dims[0]; ++r)
        nnz += a[r];
    for (uint64_t k = 0; k < nnz; ++k) {
        b[k % 40u]++;
        c[(k / 3u) % 30u]++;
    }
    const uint64_t *counts[] = {a, b, c};
    test_model t;
    model_init(&t, 3, dims, counts, 16);
    uint64_t peak[9];
    for (uint32_t g = 1; g <= 8; ++g) {
        thp_rank_memory r;
        assert_int_equal(thp_plan_largest_rank(&t.model, g, &r), 0);
        peak[g] = r.peak;
    }
    assert_true(peak[4] < peak[1]);
    assert_int_equal(thp_plan_devices_needed(&t.model, peak[1], 8), 1);
    assert_int_equal(thp_plan_devices_needed(&t.model, UINT64_MAX, 8), 1);
    const uint32_t needed = thp_plan_devices_needed(&t.model, peak[4], 8);
    assert_true(needed >= 2 && needed <= 4);
    assert_true(peak[needed] <= peak[4]);
    assert_true(peak[needed - 1] > peak[4]);
    /* Less than the factors and the fixed workspace, which every rank holds. */
    assert_int_equal(thp_plan_devices_needed(&t.model, 1000u, 8), 0);
    /* A cap on each share's nonzeros (the kernels' 32-bit counts) raises
     * the count to what the cap needs, even where memory would do with
     * fewer; the largest rank reported is that count's. */
    thp_rank_memory largest;
    assert_int_equal(thp_plan_devices_for(&t.model, UINT64_MAX, nnz, 8, &largest), 1);
    const uint64_t cap = nnz / 5u + 1u; /* shares of nnz / 5 + 1 at most: 5 devices */
    assert_int_equal(thp_plan_devices_for(&t.model, UINT64_MAX, cap, 8, &largest), 5);
    assert_true(largest.peak == peak[5]);
    assert_int_equal(thp_plan_devices_for(&t.model, UINT64_MAX, cap - 2u, 8, &largest), 6);
    assert_true(largest.peak == peak[6]);
    assert_int_equal(thp_plan_devices_for(&t.model, UINT64_MAX, nnz / 9u, 8, &largest), 0);
    /* The same in words, for a refusal. */
    char advice[160], want[160];
    assert_int_equal(thp_plan_advice(&t.model, UINT64_MAX, cap, 8, advice, sizeof advice), 5);
    snprintf(want, sizeof want,
             "its nonzeros shared out over 5 such devices would fit (%.2f GiB on the fullest)",
             peak[5] / 1073741824.0);
    assert_string_equal(advice, want);
    assert_int_equal(thp_plan_advice(&t.model, UINT64_MAX, nnz / 9u, 8, advice, sizeof advice),
                     0);
    assert_string_equal(advice, "no sharing of its nonzeros over up to 8 such devices fits");
    model_free(&t);
    free(a);
    free(b);
    free(c);
}

static void test_counts_past_2_32(void **state)
{
    (void)state;
    const uint64_t huge = 5ull * (1ull << 32) + 7u; /* nonzeros of the tensor */
    const uint64_t a[] = {huge - 3u, 1, 2}, b[] = {huge / 2u, huge - huge / 2u}, c[] = {huge};
    const uint32_t dims[] = {3, 2, 1};
    const uint64_t *counts[] = {a, b, c};
    test_model t;
    model_init(&t, 3, dims, counts, 32);
    thp_rank_memory one, quarter;
    assert_int_equal(thp_plan_rank_memory(&t.model, 1, 0, &one), 0);
    assert_int_equal(one.copies, 3u * (huge * 16u + 3u * 4u + 4u));
    assert_int_equal(one.build, huge * 10u + 3u * 3u);
    assert_int_equal(thp_plan_rank_memory(&t.model, 4, 1, &quarter), 0);
    assert_int_equal(quarter.copies, 3u * ((huge / 4u + (1u < huge % 4u)) * 16u + 3u * 4u + 4u));
    model_free(&t);
}

static void test_bad_models_are_refused(void **state)
{
    (void)state;
    test_model t;
    small_model(&t);
    thp_rank_memory r;
    assert_int_equal(thp_plan_rank_memory(&t.model, 0, 0, &r), -1);
    assert_int_equal(thp_plan_rank_memory(&t.model, THP_MAX_DEVICES + 1u, 0, &r), -1);
    assert_int_equal(thp_plan_rank_memory(&t.model, 2, 2, &r), -1);
    assert_int_equal(thp_plan_rank_memory(NULL, 1, 0, &r), -1);
    /* Modes that disagree on nnz. */
    t.offsets[1][7] += 1;
    assert_int_equal(thp_plan_rank_memory(&t.model, 1, 0, &r), -1);
    t.offsets[1][7] -= 1;
    /* Offsets that decrease. */
    const uint64_t saved = t.offsets[0][2];
    t.offsets[0][2] = 100;
    assert_int_equal(thp_plan_rank_memory(&t.model, 1, 0, &r), -1);
    assert_int_equal(thp_plan_devices_needed(&t.model, UINT64_MAX, 4), 0);
    t.offsets[0][2] = saved;
    assert_int_equal(thp_plan_rank_memory(&t.model, 1, 0, &r), 0);
    /* Sizes past 2^64 bytes. */
    t.model.build_bytes_per_nonzero = UINT64_MAX / 4u;
    assert_int_equal(thp_plan_rank_memory(&t.model, 1, 0, &r), -1);
    model_free(&t);
}

static void test_fewer_nonzeros_than_devices(void **state)
{
    (void)state;
    const uint64_t a[] = {0, 2, 0, 1}, b[] = {3}, c[] = {1, 1, 1};
    const uint32_t dims[] = {4, 1, 3};
    const uint64_t *counts[] = {a, b, c};
    test_model t;
    model_init(&t, 3, dims, counts, 4);
    uint64_t owned_rows = 0;
    for (uint32_t d = 0; d < 8; ++d) {
        thp_rank_memory r;
        assert_int_equal(thp_plan_rank_memory(&t.model, 8, d, &r), 0);
        owned_rows += r.results / 16u;
        if (d >= 3) /* empty shares */
            assert_int_equal(r.results, 0u);
    }
    assert_true(owned_rows >= 4u + 1u + 3u);
    model_free(&t);
}

/* The host's refusal of a multi-device load's share buffers, in words. */
static void test_host_refusal_in_words(void **state)
{
    (void)state;
    char message[512] = "untouched";
    assert_int_equal(thp_plan_host_refusal(10 * GIB, 10 * GIB, "MemAvailable", 2, message,
                                           sizeof message),
                     0);
    assert_string_equal(message, "untouched");
    /* 105 GiB of shares on two devices with 23 GiB free: ten devices take
     * 21 GiB each. */
    assert_int_equal(thp_plan_host_refusal(105 * GIB, 23 * GIB, "MemAvailable", 2, message,
                                           sizeof message),
                     -1);
    assert_non_null(strstr(message, "needs 105.0 GiB of host memory"));
    assert_non_null(strstr(message, "23.0 GiB is free (MemAvailable)"));
    assert_non_null(strstr(message, "(over 10 devices: 21.0 GiB)"));
    /* Nothing free: no count of devices helps. */
    assert_int_equal(thp_plan_host_refusal(GIB, 0, "the memory limit of cgroup /sys/fs/cgroup/a",
                                           4, message, sizeof message),
                     -1);
    assert_non_null(
        strstr(message, "0 B is free (the memory limit of cgroup /sys/fs/cgroup/a)"));
    assert_null(strstr(message, "devices:"));
    /* Below one GiB, in MiB and KiB: 30 MB of shares on two devices with 1 MB
     * free need 60 devices. */
    assert_int_equal(thp_plan_host_refusal(30000000, 1000000, "MemAvailable", 2, message,
                                           sizeof message),
                     -1);
    assert_non_null(strstr(message, "needs 28.6 MiB of host memory"));
    assert_non_null(strstr(message, "(over 60 devices: 976.6 KiB)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_device_is_the_single_gpu_budget),
        cmocka_unit_test(test_copies_fall_and_every_row_has_an_owner),
        cmocka_unit_test(test_hot_row_is_split),
        cmocka_unit_test(test_fewest_devices_that_fit),
        cmocka_unit_test(test_counts_past_2_32),
        cmocka_unit_test(test_bad_models_are_refused),
        cmocka_unit_test(test_fewer_nonzeros_than_devices),
        cmocka_unit_test(test_host_refusal_in_words),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
