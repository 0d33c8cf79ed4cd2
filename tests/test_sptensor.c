/* th_sptensor (sort/merge, statistics) and the synthetic generator. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/sptensor.h"
#include "tensor/synth.h"

/* A deterministic generator for test data, independent of the code under
 * test. */
static uint64_t test_rng_state = 88172645463325252ull;
static uint64_t test_rand(void)
{
    test_rng_state ^= test_rng_state << 13;
    test_rng_state ^= test_rng_state >> 7;
    test_rng_state ^= test_rng_state << 17;
    return test_rng_state;
}

static th_sptensor *random_tensor(uint32_t nmodes, uint64_t nnz, const th_index *dims)
{
    th_sptensor *t = th_sptensor_new(nmodes, nnz);
    for (uint32_t m = 0; m < nmodes; ++m)
        t->dims[m] = dims[m];
    for (uint64_t i = 0; i < nnz; ++i) {
        for (uint32_t m = 0; m < nmodes; ++m)
            t->indices[m][i] = (th_index)(test_rand() % dims[m]);
        t->values[i] = (double)(test_rand() % 1000) / 8.0; /* exact sums */
    }
    return t;
}

/* Reference: entries as rows, sorted with qsort, merged by hand. */
typedef struct {
    th_index idx[8];
    double value;
} row;

static uint32_t cmp_nmodes;
static int compare_rows(const void *a, const void *b)
{
    const row *x = a, *y = b;
    for (uint32_t m = 0; m < cmp_nmodes; ++m) {
        if (x->idx[m] != y->idx[m])
            return x->idx[m] < y->idx[m] ? -1 : 1;
    }
    return 0;
}

static void check_against_reference(th_sptensor *t)
{
    uint64_t n = t->nnz;
    row *rows = calloc(n, sizeof *rows);
    for (uint64_t i = 0; i < n; ++i) {
        for (uint32_t m = 0; m < t->nmodes; ++m)
            rows[i].idx[m] = t->indices[m][i];
        rows[i].value = t->values[i];
    }
    cmp_nmodes = t->nmodes;
    qsort(rows, n, sizeof *rows, compare_rows);
    uint64_t unique = 0;
    for (uint64_t i = 0; i < n; ++i) {
        if (unique > 0 && compare_rows(&rows[unique - 1], &rows[i]) == 0)
            rows[unique - 1].value += rows[i].value;
        else
            rows[unique++] = rows[i];
    }
    th_sptensor_sort_and_merge(t);
    assert_int_equal(t->nnz, unique);
    assert_int_equal(t->duplicates_merged, n - unique);
    for (uint64_t i = 0; i < unique; ++i) {
        for (uint32_t m = 0; m < t->nmodes; ++m)
            assert_int_equal(t->indices[m][i], rows[i].idx[m]);
        assert_true(t->values[i] == rows[i].value);
    }
    free(rows);
}

static void test_sort_merge_small_dims(void **state)
{
    (void)state;
    /* Many duplicates: 4000 draws over 5*7*3 = 105 cells. */
    const th_index dims[] = {5, 7, 3};
    th_sptensor *t = random_tensor(3, 4000, dims);
    check_against_reference(t);
    assert_int_equal(t->nnz, 105);
    th_sptensor_free(t);
}

static void test_sort_merge_one_key_word(void **state)
{
    (void)state;
    const th_index dims[] = {12092, 9184, 28818};
    th_sptensor *t = random_tensor(3, 200000, dims);
    check_against_reference(t);
    th_sptensor_free(t);
}

static void test_sort_merge_several_key_words(void **state)
{
    (void)state;
    /* 31 + 32 + 30 + 20 bits: more than one 64-bit key word. */
    const th_index dims[] = {2000000000u, 4294967295u, 1000000000u, 1000000u};
    th_sptensor *t = random_tensor(4, 50000, dims);
    /* Force duplicates that differ only in the low word or the high word. */
    for (uint64_t i = 0; i < 1000; ++i) {
        uint64_t j = 1000 + i;
        for (uint32_t m = 0; m < 4; ++m)
            t->indices[m][j] = t->indices[m][i];
        if (i % 2 == 0)
            t->indices[3][j] = (t->indices[3][i] + 1) % dims[3];
    }
    check_against_reference(t);
    assert_int_equal(t->duplicates_merged, 500);
    th_sptensor_free(t);
}

/* Coordinates wider than one 64-bit key, sorted through 64-bit
 * permutations (the path of tensors past 2^32 nonzeros): the same result
 * as the reference. */
static void test_sort_merge_wide_permutations(void **state)
{
    th_sptensor_set_wide_sort(TRUE);
    test_sort_merge_several_key_words(state);
    th_sptensor_set_wide_sort(FALSE);
}

/* The radix sorts cut into chunks on several threads: the same result as
 * the reference (a stable sort whatever the chunks), on the one-word path,
 * the several-word path through 32- and 64-bit permutations, and with more
 * threads than nonzeros. */
static void test_sort_merge_threads(void **state)
{
    static const uint32_t thread_counts[] = {2, 3, 7, 64};
    for (size_t c = 0; c < sizeof thread_counts / sizeof thread_counts[0]; ++c) {
        th_sptensor_set_sort_threads(thread_counts[c]);
        test_sort_merge_small_dims(state);
        test_sort_merge_one_key_word(state);
        test_sort_merge_several_key_words(state);
        test_sort_merge_wide_permutations(state);
        const th_index dims[] = {3, 2};
        th_sptensor *t = random_tensor(2, 5, dims);
        check_against_reference(t);
        th_sptensor_free(t);
    }
    th_sptensor_set_sort_threads(0);
}

static void test_sort_merge_eight_modes(void **state)
{
    (void)state;
    const th_index dims[] = {3, 2, 4, 2, 3, 2, 2, 5};
    th_sptensor *t = random_tensor(8, 30000, dims);
    check_against_reference(t);
    th_sptensor_free(t);
}

/* Tensors of several chunks of the order passes (2^20 nonzeros each), on
 * every OpenMP thread: sorted input whose runs of equal coordinates
 * straddle the chunks' edges (the sums as one pass adds them); sorted
 * input with one pair out of order near the end (found, and sorted); and
 * a sum past the largest double (reported). */
static void test_merge_across_chunks(void **state)
{
    (void)state;
    const uint64_t n = 3 * ((uint64_t)1 << 20) + 7;
    th_sptensor *t = th_sptensor_new(2, n);
    t->dims[0] = 2000;
    t->dims[1] = 1000;
    for (uint64_t i = 0; i < n; ++i) {
        const uint64_t cell = i / 3; /* runs of 3: 2^20 is not a multiple of 3 */
        t->indices[0][i] = (th_index)(cell / 1000);
        t->indices[1][i] = (th_index)(cell % 1000);
        t->values[i] = (double)(i % 5) - 1.5;
    }
    assert_true(th_sptensor_sort_and_merge(t));
    const uint64_t cells = (n + 2) / 3;
    assert_int_equal(t->nnz, cells);
    assert_int_equal(t->duplicates_merged, n - cells);
    for (uint64_t c = 0; c < cells; ++c) {
        assert_int_equal(t->indices[0][c], c / 1000);
        assert_int_equal(t->indices[1][c], c % 1000);
        double want = 0.0;
        for (uint64_t i = 3 * c; i < MIN(n, 3 * c + 3); ++i)
            want += (double)(i % 5) - 1.5;
        assert_true(t->values[c] == want);
    }
    th_sptensor_free(t);

    /* Sorted and distinct but for the last two, swapped. */
    const uint64_t m = ((uint64_t)1 << 21) + 3;
    t = th_sptensor_new(3, m);
    for (uint32_t d = 0; d < 3; ++d)
        t->dims[d] = 4000;
    for (uint64_t i = 0; i < m; ++i) {
        t->indices[0][i] = (th_index)(i / 1000000);
        t->indices[1][i] = (th_index)(i / 1000 % 1000);
        t->indices[2][i] = (th_index)(i % 1000);
        t->values[i] = (double)i;
    }
    for (uint32_t d = 0; d < 3; ++d) {
        const th_index x = t->indices[d][m - 2];
        t->indices[d][m - 2] = t->indices[d][m - 1];
        t->indices[d][m - 1] = x;
    }
    check_against_reference(t);
    assert_int_equal(t->duplicates_merged, 0);
    th_sptensor_free(t);

    /* Two halves of the largest double at one place, past a chunk's edge. */
    t = th_sptensor_new(1, ((uint64_t)1 << 20) + 2);
    t->dims[0] = 3;
    for (uint64_t i = 0; i < t->nnz; ++i) {
        t->indices[0][i] = i <= ((uint64_t)1 << 20) ? 0 : 1;
        t->values[i] = i + 1 >= ((uint64_t)1 << 20) && i <= ((uint64_t)1 << 20) ? DBL_MAX : 0.0;
    }
    assert_false(th_sptensor_sort_and_merge(t));
    th_sptensor_free(t);
}

/* The order check compares every pair of neighbours, the pairs that
 * straddle a chunk's edge (nonzeros 2^20 - 1 and 2^20) too: sorted,
 * distinct nonzeros but for one pair there, out of order or equal. */
static void test_order_check_sees_the_chunk_edges(void **state)
{
    (void)state;
    const uint64_t edge = (uint64_t)1 << 20, n = 2 * edge + 5;
    for (int equal = 0; equal < 2; ++equal) {
        th_sptensor *t = th_sptensor_new(2, n);
        t->dims[0] = 4000;
        t->dims[1] = 1000;
        for (uint64_t i = 0; i < n; ++i) {
            t->indices[0][i] = (th_index)(i / 1000);
            t->indices[1][i] = (th_index)(i % 1000);
            t->values[i] = (double)i;
        }
        for (uint32_t d = 0; d < 2; ++d) {
            if (equal) {
                t->indices[d][edge] = t->indices[d][edge - 1];
            } else {
                const th_index x = t->indices[d][edge - 1];
                t->indices[d][edge - 1] = t->indices[d][edge];
                t->indices[d][edge] = x;
            }
        }
        assert_true(th_sptensor_sort_and_merge(t));
        assert_int_equal(t->nnz, equal ? n - 1 : n);
        assert_int_equal(t->duplicates_merged, equal ? 1 : 0);
        for (uint64_t i = 1; i < t->nnz; ++i) {
            const uint64_t a = (uint64_t)t->indices[0][i - 1] * 1000 + t->indices[1][i - 1];
            const uint64_t b = (uint64_t)t->indices[0][i] * 1000 + t->indices[1][i];
            if (a >= b)
                fail_msg("%s at the edge: nonzeros %" G_GUINT64_FORMAT " and %" G_GUINT64_FORMAT
                         " not in order after the sort",
                         equal ? "a duplicate" : "a swap", i - 1, i);
        }
        if (equal)
            assert_true(t->values[edge - 1] == (double)(edge - 1) + (double)edge);
        th_sptensor_free(t);
    }
}

static void test_sort_merge_already_sorted_and_zeros(void **state)
{
    (void)state;
    th_sptensor *t = th_sptensor_new(2, 5);
    const th_index a[] = {0, 0, 1, 1, 2}, b[] = {1, 1, 0, 3, 2};
    const double v[] = {1.5, -1.5, 0.0, 2.0, 4.0};
    for (int i = 0; i < 5; ++i) {
        t->indices[0][i] = a[i];
        t->indices[1][i] = b[i];
        t->values[i] = v[i];
    }
    th_sptensor_sort_and_merge(t);
    /* (0,1) sums to zero and (1,0) is an explicit zero: both stay. */
    assert_int_equal(t->nnz, 4);
    assert_int_equal(t->duplicates_merged, 1);
    assert_true(t->values[0] == 0.0);
    assert_int_equal(t->indices[0][1], 1);
    assert_int_equal(t->indices[1][1], 0);
    assert_true(t->values[1] == 0.0);
    assert_true(t->values[3] == 4.0);
    th_sptensor_free(t);
}

static void test_truncate(void **state)
{
    (void)state;
    const th_index dims[] = {10, 10};
    th_sptensor *t = random_tensor(2, 100, dims);
    th_index first = t->indices[1][0];
    th_sptensor_truncate(t, 3);
    assert_int_equal(t->nnz, 3);
    assert_int_equal(t->indices[1][0], first);
    th_sptensor_free(t);
}

static void test_statistics(void **state)
{
    (void)state;
    th_sptensor *t = th_sptensor_new(3, 3);
    const th_index dims[] = {4, 2, 10};
    memcpy(t->dims, dims, sizeof dims);
    const th_index coords[3][3] = {{0, 0, 9}, {3, 0, 9}, {3, 0, 2}};
    const double values[] = {1.0, -2.0, 3.0};
    for (int i = 0; i < 3; ++i) {
        for (int m = 0; m < 3; ++m)
            t->indices[m][i] = coords[i][m];
        t->values[i] = values[i];
    }
    assert_true(th_sptensor_norm_squared(t) == 14.0);
    assert_true(fabs(th_sptensor_density(t) - 3.0 / 80.0) < 1e-15);
    assert_int_equal(th_sptensor_empty_slices(t, 0), 2); /* 1 and 2 */
    assert_int_equal(th_sptensor_empty_slices(t, 1), 1); /* 1 */
    assert_int_equal(th_sptensor_empty_slices(t, 2), 8); /* all but 2 and 9 */
    th_sptensor_free(t);
}

static void test_empty_slices_large_dim(void **state)
{
    (void)state;
    th_sptensor *t = th_sptensor_new(2, 2);
    t->dims[0] = 4294967295u;
    t->dims[1] = 1;
    t->indices[0][0] = 4294967294u;
    t->indices[0][1] = 7;
    t->indices[1][0] = t->indices[1][1] = 0;
    t->values[0] = t->values[1] = 1.0;
    assert_int_equal(th_sptensor_empty_slices(t, 0), 4294967293ull);
    assert_int_equal(th_sptensor_empty_slices(t, 1), 0);
    th_sptensor_free(t);
}

/* ---- synthetic tensors --------------------------------------------------- */

static th_synth_params small_params(void)
{
    th_synth_params p;
    memset(&p, 0, sizeof p);
    p.nmodes = 3;
    p.dims[0] = 300;
    p.dims[1] = 50;
    p.dims[2] = 1000;
    p.skew[0] = 1.0;
    p.skew[1] = 0.5;
    p.skew[2] = 0.0;
    p.nnz = 150000;
    p.seed = 42;
    return p;
}

static void assert_valid_synthetic(const th_sptensor *t, const th_synth_params *p)
{
    assert_int_equal(t->nmodes, p->nmodes);
    for (uint32_t m = 0; m < p->nmodes; ++m)
        assert_int_equal(t->dims[m], p->dims[m]);
    for (uint64_t i = 0; i < t->nnz; ++i) {
        for (uint32_t m = 0; m < t->nmodes; ++m)
            assert_true(t->indices[m][i] < p->dims[m]);
        assert_true(t->values[i] > 0.0 && t->values[i] <= 1.0);
        if (i > 0) { /* strictly increasing: sorted and unique */
            int c = 0;
            for (uint32_t m = 0; m < t->nmodes && c == 0; ++m)
                c = t->indices[m][i - 1] < t->indices[m][i]   ? -1
                    : t->indices[m][i - 1] > t->indices[m][i] ? 1
                                                              : 0;
            assert_true(c < 0);
        }
    }
}

static void test_synth_reaches_target_and_is_valid(void **state)
{
    (void)state;
    th_synth_params p = small_params();
    GError *error = NULL;
    th_sptensor *t = th_synth_generate(&p, &error);
    assert_null(error);
    assert_non_null(t);
    /* 150000 of 15M cells with skew: duplicates happen and are redrawn. */
    assert_int_equal(t->nnz, p.nnz);
    assert_true(t->duplicates_merged > 0);
    assert_int_equal(t->lines_read - t->duplicates_merged, t->nnz);
    assert_valid_synthetic(t, &p);
    th_sptensor_free(t);
}

/* The generator asks the host for its arrays' memory before drawing. */
static void test_synth_asks_the_host_first(void **state)
{
    (void)state;
    th_synth_params p = small_params();
    GError *error = NULL;
    g_setenv("TH_TEST_HOST_FREE_BYTES", "1000", TRUE);
    th_sptensor *t = th_synth_generate(&p, &error);
    g_unsetenv("TH_TEST_HOST_FREE_BYTES");
    assert_null(t);
    assert_true(g_error_matches(error, TH_SYNTH_ERROR, TH_SYNTH_ERROR_MEMORY));
    g_autofree char *want = g_strdup_printf(
        "generating %" G_GUINT64_FORMAT " nonzeros: their arrays need ", p.nnz);
    assert_true(g_str_has_prefix(error->message, want));
    assert_non_null(strstr(error->message, "is free (TH_TEST_HOST_FREE_BYTES)"));
    g_error_free(error);
}

static void test_synth_is_deterministic(void **state)
{
    (void)state;
    th_synth_params p = small_params();
    th_sptensor *a = th_synth_generate(&p, NULL);
    th_sptensor *b = th_synth_generate(&p, NULL);
    p.seed = 43;
    th_sptensor *c = th_synth_generate(&p, NULL);
    assert_int_equal(a->nnz, b->nnz);
    gboolean differs_from_c = a->nnz != c->nnz;
    for (uint32_t m = 0; m < 3; ++m) {
        assert_memory_equal(a->indices[m], b->indices[m], a->nnz * sizeof(th_index));
        if (!differs_from_c)
            differs_from_c = memcmp(a->indices[m], c->indices[m], a->nnz * sizeof(th_index)) != 0;
    }
    assert_memory_equal(a->values, b->values, a->nnz * sizeof(double));
    assert_true(differs_from_c);
    th_sptensor_free(a);
    th_sptensor_free(b);
    th_sptensor_free(c);
}

/* The merges cut into 1, 2, 3 and 64 segments (the last more than some
 * top-up rounds have entries), and sorts into 1 and 5 chunks: the same
 * tensor, bit for bit. */
static void test_synth_same_on_any_segments(void **state)
{
    (void)state;
    th_synth_params p = small_params();
    th_synth_set_merge_segments(1);
    th_sptensor_set_sort_threads(1);
    th_sptensor *want = th_synth_generate(&p, NULL);
    assert_valid_synthetic(want, &p);
    static const uint32_t segments[] = {2, 3, 64};
    for (size_t c = 0; c < sizeof segments / sizeof segments[0]; ++c) {
        th_synth_set_merge_segments(segments[c]);
        th_sptensor_set_sort_threads(c == 1 ? 5u : 0u);
        th_sptensor *got = th_synth_generate(&p, NULL);
        assert_int_equal(got->nnz, want->nnz);
        assert_int_equal(got->duplicates_merged, want->duplicates_merged);
        for (uint32_t m = 0; m < p.nmodes; ++m)
            assert_memory_equal(got->indices[m], want->indices[m], want->nnz * sizeof(th_index));
        assert_memory_equal(got->values, want->values, want->nnz * sizeof(double));
        th_sptensor_free(got);
    }
    th_synth_set_merge_segments(0);
    th_sptensor_set_sort_threads(0);
    th_sptensor_free(want);
}

static void count_frequencies(const th_sptensor *t, uint32_t mode, uint64_t *counts)
{
    memset(counts, 0, t->dims[mode] * sizeof *counts);
    for (uint64_t i = 0; i < t->nnz; ++i)
        ++counts[t->indices[mode][i]];
}

static uint64_t max_of(const uint64_t *x, uint64_t n)
{
    uint64_t best = 0;
    for (uint64_t i = 0; i < n; ++i)
        best = x[i] > best ? x[i] : best;
    return best;
}

static void test_synth_skew_shapes_frequencies(void **state)
{
    (void)state;
    /* 1000 x 1000 x 10^6 cells, 20000 draws: practically no duplicates, so
     * frequencies are the sampling distribution's. */
    th_synth_params p;
    memset(&p, 0, sizeof p);
    p.nmodes = 3;
    p.dims[0] = 1000;
    p.dims[1] = 1000;
    p.dims[2] = 1000000;
    p.skew[0] = 1.0;
    p.skew[1] = 0.0;
    p.skew[2] = 0.0;
    p.nnz = 20000;
    p.seed = 7;
    th_sptensor *t = th_synth_generate(&p, NULL);
    assert_non_null(t);
    uint64_t counts[1000];
    /* Zipf a=1 over 1000: the top index has 1/H(1000) = 13.4% of the draws,
     * the 100th 0.13%; uniform gives each index 0.1% (20 draws). */
    count_frequencies(t, 0, counts);
    uint64_t top = max_of(counts, 1000);
    assert_true(top > 2000 && top < 3400);
    uint64_t top10 = 0;
    for (int k = 0; k < 10; ++k) {
        uint64_t best = 0, at = 0;
        for (uint64_t i = 0; i < 1000; ++i)
            if (counts[i] > best) {
                best = counts[i];
                at = i;
            }
        top10 += best;
        counts[at] = 0;
    }
    assert_true(top10 > 7000); /* expected H(10)/H(1000) = 39% = 7830 */
    count_frequencies(t, 1, counts);
    assert_true(max_of(counts, 1000) < 60);
    th_sptensor_free(t);
}

static void test_synth_rejects_bad_parameters(void **state)
{
    (void)state;
    th_synth_params p = small_params();
    p.nnz = 300ull * 50 * 1000 + 1;
    GError *error = NULL;
    assert_null(th_synth_generate(&p, &error));
    assert_true(g_error_matches(error, TH_SYNTH_ERROR, TH_SYNTH_ERROR_INVALID));
    assert_string_equal(error->message, "synthetic tensor: 15000001 nonzeros requested; "
                                        "expected 1 to the number of cells (15000000)");
    g_clear_error(&error);
    p = small_params();
    p.nmodes = 1;
    assert_null(th_synth_generate(&p, &error));
    assert_string_equal(error->message, "synthetic tensor: 1 mode; expected 2 to 64");
    g_clear_error(&error);
    p = small_params();
    p.dims[1] = 0;
    assert_null(th_synth_generate(&p, &error));
    assert_string_equal(error->message, "synthetic tensor: mode 2 has size 0; sizes start at 1");
    g_clear_error(&error);
    p = small_params();
    p.skew[2] = -1.0;
    assert_null(th_synth_generate(&p, &error));
    assert_string_equal(error->message,
                        "synthetic tensor: mode 3 has skew -1; expected an exponent from 0 to 100");
    g_clear_error(&error);
}

static void test_synth_dense_target_stays_at_or_below(void **state)
{
    (void)state;
    th_synth_params p;
    memset(&p, 0, sizeof p);
    p.nmodes = 2;
    p.dims[0] = 10;
    p.dims[1] = 10;
    p.nnz = 100;
    p.seed = 3;
    th_sptensor *t = th_synth_generate(&p, NULL);
    assert_true(t->nnz <= 100 && t->nnz >= 90);
    assert_valid_synthetic(t, &p);
    th_sptensor_free(t);
}

static void test_synth_presets(void **state)
{
    (void)state;
    assert_int_equal(th_synth_preset_count, 9);
    const th_synth_preset *nell = th_synth_find_preset("nell-2");
    assert_non_null(nell);
    assert_int_equal(nell->nmodes, 3);
    assert_int_equal(nell->nnz, 76879419);
    assert_int_equal(nell->dims[2], 28818);
    const th_synth_preset *nell1 = th_synth_find_preset("nell-1");
    assert_non_null(nell1);
    assert_int_equal(nell1->nnz, 143599552);
    assert_int_equal(nell1->dims[2], 25495389);
    const th_synth_preset *reddit = th_synth_find_preset("reddit");
    assert_non_null(reddit);
    assert_true(reddit->nnz > UINT32_MAX); /* 64-bit counts on every path it takes */
    assert_int_equal(reddit->nnz, 4687474081ull);
    assert_int_equal(reddit->dims[0], 8211298);
    assert_non_null(th_synth_find_preset("patents"));
    assert_null(th_synth_find_preset("nell-3"));
    th_synth_params p;
    th_synth_params_from_preset(&p, th_synth_find_preset("vast"), 5);
    char *label = th_synth_describe(&p);
    assert_string_equal(label, "tensorhost-synth dims=165427x11374x2x100x89 nnz=26021945 "
                               "skew=1,1,0.2,0.5,0.5 seed=5");
    g_free(label);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sort_merge_small_dims),
        cmocka_unit_test(test_sort_merge_one_key_word),
        cmocka_unit_test(test_sort_merge_several_key_words),
        cmocka_unit_test(test_sort_merge_threads),
        cmocka_unit_test(test_sort_merge_eight_modes),
        cmocka_unit_test(test_sort_merge_wide_permutations),
        cmocka_unit_test(test_order_check_sees_the_chunk_edges),
        cmocka_unit_test(test_sort_merge_already_sorted_and_zeros),
        cmocka_unit_test(test_merge_across_chunks),
        cmocka_unit_test(test_truncate),
        cmocka_unit_test(test_statistics),
        cmocka_unit_test(test_empty_slices_large_dim),
        cmocka_unit_test(test_synth_reaches_target_and_is_valid),
        cmocka_unit_test(test_synth_asks_the_host_first),
        cmocka_unit_test(test_synth_is_deterministic),
        cmocka_unit_test(test_synth_same_on_any_segments),
        cmocka_unit_test(test_synth_skew_shapes_frequencies),
        cmocka_unit_test(test_synth_rejects_bad_parameters),
        cmocka_unit_test(test_synth_dense_target_stays_at_or_below),
        cmocka_unit_test(test_synth_presets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
