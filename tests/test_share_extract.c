/* The nonzeros the host hands each rank of a multi-device run
 * (plugins/gpu-common/share_extract.h): the shares of a mode are the
 * consecutive pieces of its stable row order, and the distributed MTTKRP
 * they imply (each rank's rows of its share, a split hot row summed from
 * its two ranks' partials) is the whole tensor's MTTKRP, exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <glib.h>

#include "share_extract.h"

#define NMODES 3u
#define RANK 4u

typedef struct {
    uint32_t dims[NMODES];
    uint64_t nnz;
    uint32_t *idx[NMODES];
    double *values;
    thp_coo_view view;
} test_tensor;

/* Integer values and a hot row (row 7 of mode 0 holds ~30% of the
 * nonzeros), so that every sum below is exact in double. */
static void make_tensor(test_tensor *t, uint64_t nnz, guint32 seed)
{
    static const uint32_t dims[NMODES] = {60, 40, 25};
    GRand *rng = g_rand_new_with_seed(seed);
    memcpy(t->dims, dims, sizeof dims);
    t->nnz = nnz;
    for (uint32_t m = 0; m < NMODES; ++m)
        t->idx[m] = g_new(uint32_t, nnz);
    t->values = g_new(double, nnz);
    for (uint64_t i = 0; i < nnz; ++i) {
        for (uint32_t m = 0; m < NMODES; ++m)
            t->idx[m][i] = (uint32_t)g_rand_int_range(rng, 0, (gint32)dims[m]);
        if (g_rand_int_range(rng, 0, 10) < 3)
            t->idx[0][i] = 7;
        t->values[i] = g_rand_int_range(rng, 1, 6);
    }
    g_rand_free(rng);
    t->view = (thp_coo_view){NMODES, nnz, t->dims, (const uint32_t *const *)t->idx, t->values};
}

static void free_tensor(test_tensor *t)
{
    for (uint32_t m = 0; m < NMODES; ++m)
        g_free(t->idx[m]);
    g_free(t->values);
}

/* The stable row order of `mode`, computed the plain way: nonzero ids
 * sorted by (row, id). */
static const uint32_t *sort_rows;
static int by_row_then_id(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    if (sort_rows[x] != sort_rows[y])
        return sort_rows[x] < sort_rows[y] ? -1 : 1;
    return (x > y) - (x < y);
}

static uint64_t *stable_row_order(const test_tensor *t, uint32_t mode)
{
    uint64_t *order = g_new(uint64_t, t->nnz);
    for (uint64_t i = 0; i < t->nnz; ++i)
        order[i] = i;
    sort_rows = t->idx[mode];
    qsort(order, t->nnz, sizeof *order, by_row_then_id);
    return order;
}

/* out[row * RANK + r] += value * prod over the other modes of A_m(i_m, r). */
static void add_mttkrp(uint32_t mode, uint64_t n, uint32_t *const *idx, const double *values,
                       double *const *factors, double *out)
{
    for (uint64_t k = 0; k < n; ++k)
        for (uint32_t r = 0; r < RANK; ++r) {
            double p = values[k];
            for (uint32_t m = 0; m < NMODES; ++m)
                if (m != mode)
                    p *= factors[m][(uint64_t)idx[m][k] * RANK + r];
            out[(uint64_t)idx[mode][k] * RANK + r] += p;
        }
}

static void test_shares_are_pieces_of_the_row_order(void **state)
{
    (void)state;
    test_tensor t;
    make_tensor(&t, 3001, 17);
    for (uint32_t mode = 0; mode < NMODES; ++mode) {
        uint64_t *offsets = g_new(uint64_t, t.dims[mode] + 1u);
        assert_int_equal(thp_count_rows(&t.view, mode, offsets), 0);
        assert_int_equal(offsets[t.dims[mode]], t.nnz);
        g_autofree uint64_t *order = stable_row_order(&t, mode);
        for (uint32_t devices = 1; devices <= 7; ++devices) {
            thp_share shares[7];
            assert_int_equal(thp_plan_shares(offsets, t.dims[mode], devices, shares), 0);
            for (uint32_t d = 0; d < devices; ++d) {
                const uint64_t n = shares[d].nnz_end - shares[d].nnz_begin;
                /* One element more, a sentinel that must stay. */
                uint32_t *out_idx[NMODES];
                for (uint32_t m = 0; m < NMODES; ++m) {
                    out_idx[m] = g_new(uint32_t, n + 1u);
                    out_idx[m][n] = 0xdeadbeefu;
                }
                double *out_values = g_new(double, n + 1u);
                out_values[n] = -1.0;
                assert_int_equal(thp_extract_share(&t.view, mode, offsets, &shares[d], out_idx,
                                                   out_values),
                                 0);
                for (uint32_t m = 0; m < NMODES; ++m)
                    assert_int_equal(out_idx[m][n], 0xdeadbeefu);
                assert_true(out_values[n] == -1.0);
                for (uint64_t k = 0; k < n; ++k) {
                    const uint64_t id = order[shares[d].nnz_begin + k];
                    for (uint32_t m = 0; m < NMODES; ++m)
                        assert_int_equal(out_idx[m][k], t.idx[m][id]);
                    assert_true(out_values[k] == t.values[id]);
                }
                for (uint32_t m = 0; m < NMODES; ++m)
                    g_free(out_idx[m]);
                g_free(out_values);
            }
        }
        g_free(offsets);
    }
    free_tensor(&t);
}

static void test_distributed_mttkrp_is_the_mttkrp(void **state)
{
    (void)state;
    test_tensor t;
    make_tensor(&t, 4999, 23);
    GRand *rng = g_rand_new_with_seed(5);
    double *factors[NMODES];
    for (uint32_t m = 0; m < NMODES; ++m) {
        factors[m] = g_new(double, (size_t)t.dims[m] * RANK);
        for (size_t k = 0; k < (size_t)t.dims[m] * RANK; ++k)
            factors[m][k] = g_rand_int_range(rng, -3, 4);
    }
    g_rand_free(rng);
    for (uint32_t mode = 0; mode < NMODES; ++mode) {
        const size_t size = (size_t)t.dims[mode] * RANK;
        g_autofree double *whole = g_new0(double, size);
        add_mttkrp(mode, t.nnz, t.idx, t.values, factors, whole);
        g_autofree uint64_t *offsets = g_new(uint64_t, t.dims[mode] + 1u);
        assert_int_equal(thp_count_rows(&t.view, mode, offsets), 0);
        for (uint32_t devices = 2; devices <= 6; ++devices) {
            thp_share shares[6];
            assert_int_equal(thp_plan_shares(offsets, t.dims[mode], devices, shares), 0);
            /* Each rank's partial result, then the rows summed: a row that
             * is not split has one contribution, a split one two or more. */
            g_autofree double *combined = g_new0(double, size);
            uint32_t split_rows = 0;
            for (uint32_t d = 0; d < devices; ++d) {
                const uint64_t n = shares[d].nnz_end - shares[d].nnz_begin;
                uint32_t *idx[NMODES];
                for (uint32_t m = 0; m < NMODES; ++m)
                    idx[m] = g_new(uint32_t, n + 1u);
                double *values = g_new(double, n + 1u);
                assert_int_equal(
                    thp_extract_share(&t.view, mode, offsets, &shares[d], idx, values), 0);
                double *partial = g_new0(double, size);
                add_mttkrp(mode, n, idx, values, factors, partial);
                /* A rank writes only the rows of its share. */
                for (size_t k = 0; k < size; ++k) {
                    const uint64_t row = k / RANK;
                    if (n == 0 || row < shares[d].row_begin || row >= shares[d].row_end)
                        assert_true(partial[k] == 0.0);
                    combined[k] += partial[k];
                }
                split_rows += shares[d].splits_last_row;
                for (uint32_t m = 0; m < NMODES; ++m)
                    g_free(idx[m]);
                g_free(values);
                g_free(partial);
            }
            assert_memory_equal(combined, whole, sizeof(double) * size);
            /* Mode 0's hot row (~30%) is split once two devices share it. */
            if (mode == 0)
                assert_true(split_rows >= 1);
        }
    }
    for (uint32_t m = 0; m < NMODES; ++m)
        g_free(factors[m]);
    free_tensor(&t);
}

static void test_refusals(void **state)
{
    (void)state;
    test_tensor t;
    make_tensor(&t, 50, 3);
    uint64_t offsets[61];
    assert_int_equal(thp_count_rows(&t.view, 3, offsets), -1);
    assert_int_equal(thp_count_rows(&t.view, 0, offsets), 0);
    thp_share share = {.nnz_begin = 10, .nnz_end = 51, .row_begin = 0, .row_end = 60};
    uint32_t a[60], b[60], c[60];
    uint32_t *out[NMODES] = {a, b, c};
    double values[60];
    assert_int_equal(thp_extract_share(&t.view, 0, offsets, &share, out, values), -1);
    share.nnz_end = 5; /* ends before it begins */
    assert_int_equal(thp_extract_share(&t.view, 0, offsets, &share, out, values), -1);
    t.idx[1][4] = 40; /* mode 2 has 40 rows */
    uint64_t offsets1[41];
    assert_int_equal(thp_count_rows(&t.view, 1, offsets1), -1);
    free_tensor(&t);
}

/* The threaded forms give what the one-pass calls give: every mode's row
 * counts, and every rank's share of every mode (4 ranks, so the hot row is
 * split), on 1, 2 and 5 threads (more threads than modes, and jobs left
 * for this thread alone) and on 40 and 200 (each mode's count and each
 * job's pass cut into chunks); one bad job fails the call, the others
 * still run; an index out of range fails the count, chunked or not. */
static void test_threaded_passes(void **state)
{
    (void)state;
    enum { DEVICES = 4 };
    test_tensor t;
    make_tensor(&t, 2003, 29);
    uint64_t *offsets[NMODES];
    thp_share shares[NMODES][DEVICES];
    for (uint32_t m = 0; m < NMODES; ++m) {
        offsets[m] = g_new(uint64_t, t.dims[m] + 1u);
        assert_int_equal(thp_count_rows(&t.view, m, offsets[m]), 0);
        assert_int_equal(thp_plan_shares(offsets[m], t.dims[m], DEVICES, shares[m]), 0);
    }
    /* 40 and 200: more threads than the 12 jobs, so each job's pass is cut
     * into chunks (3 and 16 a job). */
    static const uint32_t thread_counts[] = {1, 2, 5, 40, 200};
    for (size_t c = 0; c < G_N_ELEMENTS(thread_counts); ++c) {
        uint64_t *counted[NMODES];
        for (uint32_t m = 0; m < NMODES; ++m)
            counted[m] = g_new0(uint64_t, t.dims[m] + 1u);
        assert_int_equal(thp_count_rows_all(&t.view, counted, thread_counts[c]), 0);
        for (uint32_t m = 0; m < NMODES; ++m) {
            assert_memory_equal(counted[m], offsets[m], sizeof(uint64_t) * (t.dims[m] + 1u));
            g_free(counted[m]);
        }
        thp_share_job jobs[NMODES * DEVICES];
        uint32_t *idx[NMODES * DEVICES][NMODES];
        double *values[NMODES * DEVICES];
        for (uint32_t m = 0; m < NMODES; ++m)
            for (uint32_t d = 0; d < DEVICES; ++d) {
                const uint32_t j = m * DEVICES + d;
                const uint64_t n = shares[m][d].nnz_end - shares[m][d].nnz_begin;
                for (uint32_t k = 0; k < NMODES; ++k)
                    idx[j][k] = g_new(uint32_t, n);
                values[j] = g_new(double, n);
                jobs[j] = (thp_share_job){m, offsets[m], &shares[m][d], idx[j], values[j]};
            }
        assert_int_equal(thp_extract_shares(&t.view, jobs, NMODES * DEVICES, thread_counts[c]),
                         0);
        for (uint32_t j = 0; j < NMODES * DEVICES; ++j) {
            const thp_share *sh = jobs[j].share;
            const uint64_t n = sh->nnz_end - sh->nnz_begin;
            uint32_t *want_idx[NMODES];
            for (uint32_t k = 0; k < NMODES; ++k)
                want_idx[k] = g_new(uint32_t, n);
            double *want_values = g_new(double, n);
            assert_int_equal(thp_extract_share(&t.view, jobs[j].mode, jobs[j].row_offsets, sh,
                                               want_idx, want_values),
                             0);
            for (uint32_t k = 0; k < NMODES; ++k) {
                assert_memory_equal(idx[j][k], want_idx[k], sizeof(uint32_t) * n);
                g_free(want_idx[k]);
            }
            assert_memory_equal(values[j], want_values, sizeof(double) * n);
            g_free(want_values);
        }
        /* A share past the tensor's end: that job fails, the call says so. */
        thp_share bad = shares[0][DEVICES - 1];
        bad.nnz_end = t.nnz + 1u;
        jobs[DEVICES - 1].share = &bad;
        assert_int_equal(thp_extract_shares(&t.view, jobs, NMODES * DEVICES, thread_counts[c]),
                         -1);
        for (uint32_t j = 0; j < NMODES * DEVICES; ++j) {
            for (uint32_t k = 0; k < NMODES; ++k)
                g_free(idx[j][k]);
            g_free(values[j]);
        }
    }
    /* An index outside its mode fails the counting of that mode. */
    t.idx[2][5] = t.dims[2];
    uint64_t *counted[NMODES];
    for (uint32_t m = 0; m < NMODES; ++m)
        counted[m] = g_new0(uint64_t, t.dims[m] + 1u);
    assert_int_equal(thp_count_rows_all(&t.view, counted, 3), -1);
    assert_int_equal(thp_count_rows_all(&t.view, counted, 40), -1);
    for (uint32_t m = 0; m < NMODES; ++m) {
        g_free(counted[m]);
        g_free(offsets[m]);
    }
    free_tensor(&t);
}

/* The threaded extraction of `share` on each of `counts` thread counts
 * gives the one pass's arrays. */
static void assert_threaded_is_one_pass(const thp_coo_view *view, uint32_t mode,
                                        const uint64_t *offsets, const thp_share *share,
                                        const uint32_t *threads, size_t counts)
{
    const uint64_t n = share->nnz_end - share->nnz_begin;
    uint32_t *want[NMODES], *got[NMODES];
    for (uint32_t k = 0; k < NMODES; ++k) {
        want[k] = g_new0(uint32_t, n + 1u);
        got[k] = g_new0(uint32_t, n + 1u);
    }
    double *want_values = g_new0(double, n + 1u);
    double *got_values = g_new0(double, n + 1u);
    assert_int_equal(thp_extract_share(view, mode, offsets, share, want, want_values), 0);
    for (size_t c = 0; c < counts; ++c) {
        const thp_share_job job = {mode, offsets, share, got, got_values};
        assert_int_equal(thp_extract_shares(view, &job, 1, threads[c]), 0);
        for (uint32_t k = 0; k < NMODES; ++k)
            assert_memory_equal(got[k], want[k], sizeof(uint32_t) * n);
        assert_memory_equal(got_values, want_values, sizeof(double) * n);
    }
    for (uint32_t k = 0; k < NMODES; ++k) {
        g_free(want[k]);
        g_free(got[k]);
    }
    g_free(want_values);
    g_free(got_values);
}

/* One share cut into more chunks than the tensor has nonzeros, than the
 * share has rows, and into a few: the same arrays as one pass, for every
 * share of a split hot row and for tensors of 1 to 9 nonzeros. */
static void test_chunked_pass_edges(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {1, 2, 9, 517};
    for (size_t z = 0; z < G_N_ELEMENTS(sizes); ++z) {
        test_tensor t;
        make_tensor(&t, sizes[z], 41 + (guint32)z);
        for (uint32_t m = 0; m < NMODES; ++m) {
            uint64_t *offsets = g_new(uint64_t, t.dims[m] + 1u);
            assert_int_equal(thp_count_rows(&t.view, m, offsets), 0);
            thp_share shares[3];
            assert_int_equal(thp_plan_shares(offsets, t.dims[m], 3, shares), 0);
            static const uint32_t threads[] = {3, 7, 64};
            for (uint32_t d = 0; d < 3; ++d)
                assert_threaded_is_one_pass(&t.view, m, offsets, &shares[d], threads,
                                            G_N_ELEMENTS(threads));
            g_free(offsets);
        }
        free_tensor(&t);
    }
}

/* The threaded extraction puts a share's rows into blocks looked up by
 * granules of consecutive rows; granules hold several rows only past 2^18
 * rows. Mode 0 here has 2^20: uniform rows, a hot row with a tenth of the
 * nonzeros between two warm neighbours in its granule (a block of its own,
 * sorted with the hot row moved in one piece and more nonzeros than a
 * block's buffer going around it), split between ranks as their count
 * grows; the
 * tensor once in random order and once sorted by mode 0 (every block
 * already in row order). Every rank's share of every mode is the one
 * pass's, on 1, 4 and 16 threads. */
static void test_blocked_extraction(void **state)
{
    (void)state;
    enum { NNZ = 200000, HOT = 524294 }; /* inside its granule of 4 or 8 rows */
    uint32_t dims[NMODES] = {1u << 20, 3000, 7};
    test_tensor t = {.nnz = NNZ};
    memcpy(t.dims, dims, sizeof dims);
    GRand *rng = g_rand_new_with_seed(61);
    for (uint32_t m = 0; m < NMODES; ++m)
        t.idx[m] = g_new(uint32_t, NNZ);
    t.values = g_new(double, NNZ);
    for (uint64_t i = 0; i < NNZ; ++i) {
        for (uint32_t m = 0; m < NMODES; ++m)
            t.idx[m][i] = (uint32_t)g_rand_int_range(rng, 0, (gint32)dims[m]);
        const gint32 pick = g_rand_int_range(rng, 0, 100);
        if (pick < 16)
            t.idx[0][i] = pick < 10 ? HOT : pick < 13 ? HOT - 1 : HOT + 1;
        t.values[i] = g_rand_int_range(rng, 1, 6);
    }
    t.idx[0][0] = 0; /* the granules start at row 0 with one device */
    g_rand_free(rng);
    t.view = (thp_coo_view){NMODES, NNZ, t.dims, (const uint32_t *const *)t.idx, t.values};
    for (int sorted = 0; sorted < 2; ++sorted) {
        if (sorted) { /* by mode 0, stably */
            g_autofree uint64_t *order = stable_row_order(&t, 0);
            for (uint32_t m = 0; m < NMODES; ++m) {
                uint32_t *moved = g_new(uint32_t, NNZ);
                for (uint64_t i = 0; i < NNZ; ++i)
                    moved[i] = t.idx[m][order[i]];
                g_free(t.idx[m]);
                t.idx[m] = moved;
            }
            double *moved = g_new(double, NNZ);
            for (uint64_t i = 0; i < NNZ; ++i)
                moved[i] = t.values[order[i]];
            g_free(t.values);
            t.values = moved;
            t.view.indices = (const uint32_t *const *)t.idx;
            t.view.values = t.values;
        }
        uint32_t hot_splits = 0;
        for (uint32_t m = 0; m < NMODES; ++m) {
            g_autofree uint64_t *offsets = g_new(uint64_t, (gsize)t.dims[m] + 1u);
            assert_int_equal(thp_count_rows(&t.view, m, offsets), 0);
            static const uint32_t device_counts[] = {1, 2, 3, 5};
            for (size_t g = 0; g < G_N_ELEMENTS(device_counts); ++g) {
                const uint32_t devices = device_counts[g];
                thp_share shares[5];
                assert_int_equal(thp_plan_shares(offsets, t.dims[m], devices, shares), 0);
                static const uint32_t threads[] = {1, 4, 16};
                for (uint32_t d = 0; d < devices; ++d) {
                    hot_splits += m == 0 && shares[d].splits_last_row &&
                                  shares[d].row_end - 1u == HOT;
                    assert_threaded_is_one_pass(&t.view, m, offsets, &shares[d], threads,
                                                G_N_ELEMENTS(threads));
                }
            }
        }
        /* Two devices split the hot row (it straddles the middle). */
        assert_true(hot_splits >= 1);
    }
    free_tensor(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shares_are_pieces_of_the_row_order),
        cmocka_unit_test(test_distributed_mttkrp_is_the_mttkrp),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_threaded_passes),
        cmocka_unit_test(test_chunked_pass_edges),
        cmocka_unit_test(test_blocked_extraction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
