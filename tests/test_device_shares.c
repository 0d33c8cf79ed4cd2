/* Dealing a mode's nonzeros to devices (common/device_shares.h):
 * shares cover every nonzero once, differ by at most one nonzero whatever
 * the skew, split a hot row across devices with matching flags, name the
 * share holding any position (thp_share_holding), and count
 * in 64 bits; the rows each rank owns cover the mode once, and each is
 * owned where its nonzeros are; every rank's extent alone rebuilds the
 * plan (thp_shares_from_extents). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "device_shares.h"

/* Every invariant of a plan over `offsets`. */
static void check_plan(const uint64_t *offsets, uint64_t rows, uint32_t devices)
{
    thp_share shares[64];
    assert_true(devices <= 64);
    assert_int_equal(thp_plan_shares(offsets, rows, devices, shares), 0);
    const uint64_t nnz = offsets[rows];
    uint64_t smallest = UINT64_MAX, largest = 0;
    for (uint32_t d = 0; d < devices; ++d) {
        const thp_share *s = &shares[d];
        assert_int_equal(s->nnz_begin, d == 0 ? 0 : shares[d - 1].nnz_end);
        const uint64_t size = s->nnz_end - s->nnz_begin;
        smallest = size < smallest ? size : smallest;
        largest = size > largest ? size : largest;
        if (size == 0)
            continue;
        /* Its first and last positions are its own (thp_share_holding). */
        assert_int_equal(thp_share_holding(shares, devices, s->nnz_begin), d);
        assert_int_equal(thp_share_holding(shares, devices, s->nnz_end - 1), d);
        /* The rows named hold exactly the share's first and last nonzero. */
        assert_true(offsets[s->row_begin] <= s->nnz_begin &&
                    s->nnz_begin < offsets[s->row_begin + 1]);
        assert_true(offsets[s->row_end - 1] < s->nnz_end && s->nnz_end <= offsets[s->row_end]);
        assert_int_equal(s->splits_first_row, offsets[s->row_begin] < s->nnz_begin);
        assert_int_equal(s->splits_last_row, offsets[s->row_end] > s->nnz_end);
        /* A split row is the neighbour's too. */
        if (s->splits_last_row) {
            assert_true(d + 1 < devices);
            assert_true(shares[d + 1].splits_first_row);
            assert_int_equal(shares[d + 1].row_begin, s->row_end - 1);
        }
    }
    assert_int_equal(shares[devices - 1].nnz_end, nnz);
    assert_true(largest - smallest <= 1);
    /* Ownership: consecutive ranges covering the mode; a rank's MTTKRP
     * writes only rows of its window; every row with nonzeros is owned by
     * a rank whose share holds some of them (so its MTTKRP row, summed
     * with the split partials, is whole there). */
    uint64_t next = 0;
    for (uint32_t d = 0; d < devices; ++d) {
        const thp_owned_rows o = thp_owned_rows_of(shares, devices, d, rows);
        assert_int_equal(o.begin, next);
        assert_true(o.begin <= o.end && o.end <= o.window_end && o.window_end <= rows);
        next = o.end;
        const thp_share *s = &shares[d];
        if (s->nnz_end > s->nnz_begin)
            assert_true(o.begin <= s->row_begin && s->row_end <= o.window_end);
        for (uint64_t r = o.begin; r < o.end; ++r)
            if (offsets[r + 1] > offsets[r])
                assert_true(s->nnz_end > s->nnz_begin && s->row_begin <= r && r < s->row_end);
    }
    assert_int_equal(next, rows);
    /* What each rank alone knows of its share (a process of a run of
     * several) rebuilds the plan exactly. */
    thp_share_extent extents[64];
    thp_share rebuilt[64];
    for (uint32_t d = 0; d < devices; ++d) {
        const thp_share *s = &shares[d];
        extents[d] = (thp_share_extent){s->nnz_end - s->nnz_begin, s->row_begin, s->row_end};
    }
    uint32_t bad = 0;
    assert_int_equal(thp_shares_from_extents(extents, devices, rebuilt, &bad), 0);
    for (uint32_t d = 0; d < devices; ++d) {
        assert_int_equal(rebuilt[d].nnz_begin, shares[d].nnz_begin);
        assert_int_equal(rebuilt[d].nnz_end, shares[d].nnz_end);
        assert_int_equal(rebuilt[d].row_begin, shares[d].row_begin);
        assert_int_equal(rebuilt[d].row_end, shares[d].row_end);
        assert_int_equal(rebuilt[d].splits_first_row, shares[d].splits_first_row);
        assert_int_equal(rebuilt[d].splits_last_row, shares[d].splits_last_row);
    }
}

static void test_uniform_rows(void **state)
{
    (void)state;
    uint64_t offsets[101];
    for (uint64_t r = 0; r <= 100; ++r)
        offsets[r] = 7 * r;
    for (uint32_t devices = 1; devices <= 16; ++devices)
        check_plan(offsets, 100, devices);
}

/* One row with 40% of the nonzeros, empty rows around it: the hot row is
 * dealt to several devices instead of stalling one. */
static void test_hot_row_is_split(void **state)
{
    (void)state;
    uint64_t offsets[11] = {0};
    const uint64_t counts[10] = {5, 0, 3, 400, 0, 0, 200, 192, 200, 0};
    for (int r = 0; r < 10; ++r)
        offsets[r + 1] = offsets[r] + counts[r];
    assert_int_equal(offsets[10], 1000);
    thp_share shares[4];
    assert_int_equal(thp_plan_shares(offsets, 10, 4, shares), 0);
    int holding_hot_row = 0;
    for (int d = 0; d < 4; ++d)
        holding_hot_row += shares[d].row_begin <= 3 && 3 < shares[d].row_end;
    assert_int_equal(holding_hot_row, 2);
    for (uint32_t devices = 1; devices <= 12; ++devices)
        check_plan(offsets, 10, devices);
}

static void test_fewer_nonzeros_than_devices(void **state)
{
    (void)state;
    const uint64_t offsets[4] = {0, 1, 1, 3};
    check_plan(offsets, 3, 8);
    thp_share shares[8];
    assert_int_equal(thp_plan_shares(offsets, 3, 8, shares), 0);
    int empty = 0;
    for (int d = 0; d < 8; ++d)
        empty += shares[d].nnz_begin == shares[d].nnz_end;
    assert_int_equal(empty, 5);
}

/* Counts past 2^32 (tensors of several billion nonzeros), without
 * allocating them: only the prefix sums are needed. */
static void test_64_bit_counts(void **state)
{
    (void)state;
    const uint64_t big = (uint64_t)1 << 40;
    const uint64_t offsets[4] = {0, big, 2 * big + 5, 3 * big + 7};
    check_plan(offsets, 3, 7);
    check_plan(offsets, 3, 64);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    const uint64_t offsets[3] = {0, 4, 2};
    thp_share shares[2];
    assert_int_equal(thp_plan_shares(offsets, 2, 2, shares), -1); /* not prefix sums */
    const uint64_t good[2] = {0, 4};
    assert_int_equal(thp_plan_shares(good, 1, 0, shares), -1);
    assert_int_equal(thp_plan_shares(good, 1, THP_MAX_DEVICES + 1, shares), -1);
}

/* Extents that are no deal by rows: a share reaching past the next one's
 * first row, or one with no rows for its nonzeros. */
static void test_extents_not_dealt_by_rows(void **state)
{
    (void)state;
    thp_share shares[3];
    uint32_t bad = 99;
    const thp_share_extent overlapping[3] = {{4, 0, 3}, {4, 1, 5}, {4, 5, 9}};
    assert_int_equal(thp_shares_from_extents(overlapping, 3, shares, &bad), -1);
    assert_int_equal(bad, 1);
    const thp_share_extent no_rows[2] = {{4, 0, 3}, {4, 3, 3}};
    assert_int_equal(thp_shares_from_extents(no_rows, 2, shares, &bad), -1);
    assert_int_equal(bad, 1);
    /* Neighbours meeting in one row split it; an empty share in between
     * is skipped. */
    const thp_share_extent meeting[3] = {{4, 0, 3}, {0, 0, 0}, {4, 2, 6}};
    assert_int_equal(thp_shares_from_extents(meeting, 3, shares, &bad), 0);
    assert_true(shares[0].splits_last_row && shares[2].splits_first_row);
    assert_int_equal(shares[2].nnz_begin, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform_rows),
        cmocka_unit_test(test_hot_row_is_split),
        cmocka_unit_test(test_fewer_nonzeros_than_devices),
        cmocka_unit_test(test_64_bit_counts),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_extents_not_dealt_by_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
