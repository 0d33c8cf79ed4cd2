/* cpu-reference against brute force over the dense tensor: MTTKRP of every
 * mode for random tensors of 3 to 6 modes and several ranks, edge shapes,
 * the ALS update against a host-side computation, and every error path. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "plugin/backend.h"
#include "base/log.h"
#include "test_support.h"

#define TOLERANCE 1e-12

static const uint32_t test_ranks[] = {1, 3, 8, 16};

typedef th_test_cpu_fixture fixture;

static int setup(void **state) { return th_test_cpu_fixture_setup(state, 20240611u); }

/* A tensor with the given coordinates (row-major, nnz x nmodes) and values. */
static th_sptensor *tensor_from(uint32_t nmodes, const uint32_t *dims, uint64_t nnz,
                                const uint32_t *coords, const double *values)
{
    th_sptensor *t = th_sptensor_new(nmodes, nnz);
    memcpy(t->dims, dims, nmodes * sizeof *dims);
    for (uint64_t k = 0; k < nnz; k++) {
        for (uint32_t m = 0; m < nmodes; m++)
            t->indices[m][k] = coords[k * nmodes + m];
        t->values[k] = values[k];
    }
    return t;
}

/* Runs MTTKRP on every mode through `instance` and compares each with the
 * dense brute force. */
static void check_all_modes(const fixture *f, th_instance *inst, const th_sptensor *t,
                            uint32_t rank, double *const *factors, const char *label)
{
    const th_plugin_entry *e = &f->plugin->entry;
    g_autofree double *dense = th_test_densify(t);
    char err[TH_ERROR_SIZE] = "";
    for (uint32_t mode = 0; mode < t->nmodes; mode++) {
        size_t cells = (size_t)t->dims[mode] * rank;
        g_autofree double *expected = g_new(double, cells);
        g_autofree double *actual = g_new(double, cells);
        th_test_dense_mttkrp(t, dense, factors, rank, mode, expected);
        th_test_assert_ok(e->mttkrp(inst, mode, err), err);
        th_test_assert_ok(e->get_mttkrp_result(inst, mode, actual, err), err);
        double error = th_test_relative_error(actual, expected, cells);
        if (!(error < TOLERANCE))
            fail_msg("%s: mode %u rank %u: relative error %.3g", label, mode, rank, error);
    }
}

static void check_tensor(const fixture *f, const th_sptensor *t, uint32_t rank,
                         const char *threads, const char *label)
{
    double **factors = th_test_random_factors(t, rank, f->rng);
    th_instance *inst = th_test_create_instance(f->plugin, "threads", threads, NULL);
    th_test_load_and_set(f->plugin, inst, t, rank, factors);
    check_all_modes(f, inst, t, rank, factors, label);
    f->plugin->entry.destroy(inst);
    th_test_free_factors(factors, t->nmodes);
}

/* ------------------------------------------------------------------------ */
/* MTTKRP correctness                                                        */
/* ------------------------------------------------------------------------ */

static void test_random_tensors_every_mode(void **state)
{
    fixture *f = *state;
    int cases = 0;
    for (uint32_t nmodes = 3; nmodes <= 6; nmodes++) {
        for (int repeat = 0; repeat < 3; repeat++) {
            uint32_t dims[6];
            uint64_t cells = 1;
            for (uint32_t m = 0; m < nmodes; m++) {
                dims[m] = (uint32_t)g_rand_int_range(f->rng, 2, 8);
                cells *= dims[m];
            }
            /* From very sparse (many empty slices) to a fifth of the cells. */
            uint64_t max_nnz = MAX(cells / 5, 1);
            uint64_t nnz = 1 + (uint64_t)g_rand_int_range(f->rng, 0, (gint32)MIN(max_nnz, G_MAXINT32));
            g_autoptr(th_sptensor) t = th_test_random_tensor(nmodes, dims, nnz, f->rng);
            for (size_t r = 0; r < G_N_ELEMENTS(test_ranks); r++) {
                g_autofree char *label = g_strdup_printf(
                    "%u modes, %" G_GUINT64_FORMAT " nnz, case %d", nmodes, nnz, repeat);
                check_tensor(f, t, test_ranks[r], repeat % 2 ? "3" : "1", label);
                cases++;
            }
        }
    }
    assert_int_equal(cases, 4 * 3 * 4);
}

static void test_mode_of_dimension_one(void **state)
{
    fixture *f = *state;
    const uint32_t dims[4] = {4, 1, 5, 3};
    g_autoptr(th_sptensor) t = th_test_random_tensor(4, dims, 17, f->rng);
    for (size_t r = 0; r < G_N_ELEMENTS(test_ranks); r++)
        check_tensor(f, t, test_ranks[r], "2", "dimension 1");
}

static void test_single_nonzero(void **state)
{
    fixture *f = *state;
    const uint32_t dims[3] = {3, 4, 2};
    const uint32_t coords[3] = {2, 1, 0};
    const double values[1] = {-0.75};
    g_autoptr(th_sptensor) t = tensor_from(3, dims, 1, coords, values);
    for (size_t r = 0; r < G_N_ELEMENTS(test_ranks); r++)
        check_tensor(f, t, test_ranks[r], "2", "single nonzero");

    const uint32_t dims2[2] = {1, 1};
    const uint32_t origin[2] = {0, 0};
    g_autoptr(th_sptensor) scalar = tensor_from(2, dims2, 1, origin, values);
    check_tensor(f, scalar, 3, "1", "1 x 1 matrix");
}

/* First and last slices of each mode empty, and a hole in the middle. */
static void test_empty_slices(void **state)
{
    fixture *f = *state;
    const uint32_t dims[3] = {6, 5, 7};
    const uint32_t coords[] = {1, 1, 1, 1, 3, 2, 2, 2, 5, 4, 3, 3, 4, 1, 4, 4, 3, 5};
    const double values[] = {1.0, -2.0, 0.5, 3.0, -1.5, 0.25};
    g_autoptr(th_sptensor) t = tensor_from(3, dims, 6, coords, values);
    assert_int_equal(th_sptensor_empty_slices(t, 0), 3); /* rows 0, 3, 5 */
    for (size_t r = 0; r < G_N_ELEMENTS(test_ranks); r++)
        check_tensor(f, t, test_ranks[r], "4", "empty slices");

    /* Partitions are chunks of 4096 nonzeros. */
    th_instance *inst = th_test_create_instance(f->plugin, NULL);
    double **factors = th_test_random_factors(t, 2, f->rng);
    th_test_load_and_set(f->plugin, inst, t, 2, factors);
    g_autoptr(GError) error = NULL;
    for (uint32_t m = 0; m < 3; m++) {
        th_mode_info info;
        assert_true(th_instance_mode_info(f->plugin, inst, m, &info, &error));
        assert_int_equal(info.partitions, (t->nnz + 4095) / 4096);
        assert_string_equal(info.scheme, "nnz-chunked");
        assert_true(info.last_mttkrp_seconds < 0); /* no MTTKRP yet */
    }
    char err[TH_ERROR_SIZE] = "";
    th_test_assert_ok(f->plugin->entry.mttkrp(inst, 1, err), err);
    th_mode_info info;
    assert_true(th_instance_mode_info(f->plugin, inst, 1, &info, &error));
    assert_true(info.last_mttkrp_seconds >= 0);
    f->plugin->entry.destroy(inst);
    th_test_free_factors(factors, 3);
}

/* A skewed short mode: one row holds 10000 nonzeros (three chunks), rows
 * between are empty, another row is partly filled, the last row has a single
 * nonzero. Chunk ends then fall inside rows, on row starts and between empty
 * rows; every mode must still match the dense computation. */
static void test_rows_spanning_chunks(void **state)
{
    fixture *f = *state;
    const uint32_t dims[3] = {6, 50, 200};
    uint64_t nnz = 0;
    g_autoptr(th_sptensor) t = th_sptensor_new(3, 6 * 50 * 200);
    for (uint32_t i = 0; i < 6; i++)
        for (uint32_t j = 0; j < 50; j++)
            for (uint32_t k = 0; k < 200; k++) {
                gboolean take = i == 0 || (i == 3 && g_rand_int_range(f->rng, 0, 5) < 2) ||
                                (i == 5 && j == 49 && k == 199);
                if (!take)
                    continue;
                t->indices[0][nnz] = i;
                t->indices[1][nnz] = j;
                t->indices[2][nnz] = k;
                t->values[nnz++] = g_rand_double_range(f->rng, 0.1, 1.0);
            }
    th_sptensor_truncate(t, nnz);
    memcpy(t->dims, dims, sizeof dims);
    assert_true(nnz > 3 * 4096);
    for (uint32_t rank = 1; rank <= 9; rank += 8)
        check_tensor(f, t, rank, "3", "rows spanning chunks");
}

/* Chunk boundaries depend on the nonzero count, not on the thread count, and
 * end rows are merged in chunk order, so the sums are the same whatever the
 * thread count: bitwise equal results. 40000 nonzeros span ten chunks. */
static void test_thread_count_does_not_change_results(void **state)
{
    fixture *f = *state;
    const uint32_t dims[4] = {40, 30, 20, 10};
    const uint32_t rank = 8;
    g_autoptr(th_sptensor) t = th_test_random_tensor(4, dims, 40000, f->rng);
    double **factors = th_test_random_factors(t, rank, f->rng);
    const char *threads[] = {"1", "2", "7"};
    double *results[3][4];
    char err[TH_ERROR_SIZE] = "";
    for (int k = 0; k < 3; k++) {
        th_instance *inst = th_test_create_instance(f->plugin, "threads", threads[k], NULL);
        th_test_load_and_set(f->plugin, inst, t, rank, factors);
        for (uint32_t m = 0; m < 4; m++) {
            results[k][m] = g_new(double, (size_t)dims[m] * rank);
            th_test_assert_ok(f->plugin->entry.mttkrp(inst, m, err), err);
            th_test_assert_ok(f->plugin->entry.get_mttkrp_result(inst, m, results[k][m], err),
                              err);
        }
        f->plugin->entry.destroy(inst);
    }
    for (uint32_t m = 0; m < 4; m++) {
        for (int k = 1; k < 3; k++)
            assert_memory_equal(results[0][m], results[k][m], (size_t)dims[m] * rank * sizeof(double));
        for (int k = 0; k < 3; k++)
            g_free(results[k][m]);
    }
    th_test_free_factors(factors, 4);
}

/* The vector copies of the row loop (ranks 8, 16 and 32 of 3- and 4-mode
 * tensors; vectors of eight with AVX-512, of four without or with
 * TH_CPU_REFERENCE_NO_AVX512) compute exactly the scalar loop's sums:
 * per row, ((x a) b) c of each nonzero added in the order given, from
 * zero. Under 4096 nonzeros (one chunk) no row is split, so an oracle
 * summing in that order gives the same bits. */
static void test_vector_rows_are_the_scalar_sums(void **state)
{
    fixture *f = *state;
    const uint32_t ranks[] = {8, 16, 32};
    for (uint32_t nmodes = 3; nmodes <= 4; nmodes++) {
        const uint32_t dims[4] = {17, 23, 11, 5};
        g_autoptr(th_sptensor) t = th_test_random_tensor(nmodes, dims, 3000, f->rng);
        for (size_t ri = 0; ri < G_N_ELEMENTS(ranks); ri++) {
            const uint32_t rank = ranks[ri];
            double **factors = th_test_random_factors(t, rank, f->rng);
            for (int avx512 = 0; avx512 < 2; avx512++) {
                if (!avx512)
                    g_setenv("TH_CPU_REFERENCE_NO_AVX512", "1", TRUE);
                th_instance *inst = th_test_create_instance(f->plugin, "threads", "2", NULL);
                th_test_load_and_set(f->plugin, inst, t, rank, factors);
                char err[TH_ERROR_SIZE] = "";
                for (uint32_t mode = 0; mode < nmodes; mode++) {
                    const size_t count = (size_t)dims[mode] * rank;
                    g_autofree double *got = g_new(double, count);
                    g_autofree double *want = g_new0(double, count);
                    th_test_assert_ok(f->plugin->entry.mttkrp(inst, mode, err), err);
                    th_test_assert_ok(f->plugin->entry.get_mttkrp_result(inst, mode, got, err),
                                      err);
                    for (uint64_t k = 0; k < t->nnz; k++) {
                        double *out = want + (size_t)t->indices[mode][k] * rank;
                        for (uint32_t r = 0; r < rank; r++) {
                            double term = t->values[k];
                            for (uint32_t m = 0; m < nmodes; m++)
                                if (m != mode)
                                    term = term * factors[m][(size_t)t->indices[m][k] * rank + r];
                            out[r] += term;
                        }
                    }
                    if (memcmp(got, want, count * sizeof(double)) != 0)
                        fail_msg("modes %u rank %u mode %u%s: not the scalar loop's bits", nmodes,
                                 rank, mode, avx512 ? "" : " (vectors of four)");
                }
                f->plugin->entry.destroy(inst);
                g_unsetenv("TH_CPU_REFERENCE_NO_AVX512");
            }
            th_test_free_factors(factors, nmodes);
        }
    }
}

/* load_tensor replaces the previous tensor, even of another order and rank. */
static void test_reload_replaces_tensor(void **state)
{
    fixture *f = *state;
    const uint32_t dims_a[5] = {3, 4, 2, 3, 2}, dims_b[3] = {6, 5, 4};
    g_autoptr(th_sptensor) a = th_test_random_tensor(5, dims_a, 40, f->rng);
    g_autoptr(th_sptensor) b = th_test_random_tensor(3, dims_b, 30, f->rng);
    double **fa = th_test_random_factors(a, 16, f->rng);
    double **fb = th_test_random_factors(b, 3, f->rng);
    th_instance *inst = th_test_create_instance(f->plugin, "threads", "2", NULL);
    th_test_load_and_set(f->plugin, inst, a, 16, fa);
    check_all_modes(f, inst, a, 16, fa, "first tensor");
    th_test_load_and_set(f->plugin, inst, b, 3, fb);
    check_all_modes(f, inst, b, 3, fb, "second tensor");
    f->plugin->entry.destroy(inst);
    th_test_free_factors(fa, 5);
    th_test_free_factors(fb, 3);
}

static void test_set_get_factor_round_trip(void **state)
{
    fixture *f = *state;
    const uint32_t dims[3] = {5, 4, 3};
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 10, f->rng);
    double **factors = th_test_random_factors(t, 3, f->rng);
    th_instance *inst = th_test_create_instance(f->plugin, NULL);
    th_test_load_and_set(f->plugin, inst, t, 3, factors);
    char err[TH_ERROR_SIZE] = "";
    for (uint32_t m = 0; m < 3; m++) {
        g_autofree double *back = g_new(double, (size_t)dims[m] * 3);
        th_test_assert_ok(f->plugin->entry.get_factor(inst, m, back, err), err);
        assert_memory_equal(back, factors[m], (size_t)dims[m] * 3 * sizeof(double));
    }
    f->plugin->entry.destroy(inst);
    th_test_free_factors(factors, 3);
}

/* ------------------------------------------------------------------------ */
/* als_update                                                                */
/* ------------------------------------------------------------------------ */

/* The update as the host would do it without the plugin's help: plain
 * loops, each sum taken in index order (the loops run row by row so that a
 * tall case stays quick). */
static void host_als_update(const double *m, const double *w, uint64_t rows, uint32_t rank,
                            int32_t norm, double *a, double *lambda, double *gram,
                            double *inner)
{
    memset(a, 0, rows * rank * sizeof *a);
    for (uint64_t i = 0; i < rows; i++)
        for (uint32_t s = 0; s < rank; s++)
            for (uint32_t r = 0; r < rank; r++)
                a[i * rank + r] += m[i * rank + s] * w[s * rank + r];
    for (uint32_t r = 0; r < rank; r++) {
        double acc = 0.0;
        for (uint64_t i = 0; i < rows; i++)
            acc = norm == TH_NORM_2 ? acc + a[i * rank + r] * a[i * rank + r]
                                    : fmax(acc, fabs(a[i * rank + r]));
        lambda[r] = norm == TH_NORM_2 ? sqrt(acc) : fmax(acc, 1.0);
        if (lambda[r] != 0.0)
            for (uint64_t i = 0; i < rows; i++)
                a[i * rank + r] /= lambda[r];
    }
    memset(inner, 0, rank * sizeof *inner);
    memset(gram, 0, (size_t)rank * rank * sizeof *gram);
    for (uint64_t i = 0; i < rows; i++) {
        const double *a_row = a + i * rank;
        for (uint32_t r = 0; r < rank; r++) {
            inner[r] += m[i * rank + r] * a_row[r];
            for (uint32_t s = 0; s < rank; s++)
                gram[r * rank + s] += a_row[r] * a_row[s];
        }
    }
}

/* A tensor shape for the update and the mode it updates. */
typedef struct als_case {
    uint32_t nmodes;
    uint32_t dims[4];
    uint32_t mode;
    uint64_t nnz;
} als_case;

static const als_case small_case = {4, {9, 6, 7, 5}, 2, 80};
/* The update works in blocks of 8 MiB of new rows (3495 rows at rank 300),
 * so mode 0's 7200 rows span three blocks at that rank. */
static const als_case tall_case = {3, {7200, 5, 4}, 0, 20000};
enum { TALL_RANK = 300 };

static void check_als_update_of(const fixture *f, const als_case *c, uint32_t rank, int32_t norm,
                                gboolean zero_column)
{
    const uint32_t *dims = c->dims;
    const uint32_t mode = c->mode;
    const th_plugin_entry *e = &f->plugin->entry;
    g_autoptr(th_sptensor) t = th_test_random_tensor(c->nmodes, dims, c->nnz, f->rng);
    double **factors = th_test_random_factors(t, rank, f->rng);
    g_autofree double *w = th_test_random_matrix(rank, rank, f->rng);
    if (zero_column) /* column 0 of A = M w becomes exactly zero */
        for (uint32_t s = 0; s < rank; s++)
            w[s * rank] = 0.0;

    th_instance *inst = th_test_create_instance(f->plugin, "threads", "3", NULL);
    th_test_load_and_set(f->plugin, inst, t, rank, factors);
    char err[TH_ERROR_SIZE] = "";
    size_t cells = (size_t)dims[mode] * rank;
    g_autofree double *m = g_new(double, cells);
    th_test_assert_ok(e->mttkrp(inst, mode, err), err);
    th_test_assert_ok(e->get_mttkrp_result(inst, mode, m, err), err);

    g_autofree double *a_expected = g_new(double, cells);
    g_autofree double *lambda_expected = g_new(double, rank);
    g_autofree double *gram_expected = g_new(double, (size_t)rank * rank);
    g_autofree double *inner_expected = g_new(double, rank);
    host_als_update(m, w, dims[mode], rank, norm, a_expected, lambda_expected, gram_expected,
                    inner_expected);

    g_autofree double *lambda = g_new(double, rank);
    g_autofree double *gram = g_new(double, (size_t)rank * rank);
    g_autofree double *inner = g_new(double, rank);
    g_autofree double *a = g_new(double, cells);
    th_als_output out = {.struct_size = sizeof out, .lambda = lambda, .gram = gram, .inner = inner};
    th_test_assert_ok(e->als_update(inst, mode, w, norm, &out, err), err);
    th_test_assert_ok(e->get_factor(inst, mode, a, err), err);

    assert_true(th_test_relative_error(a, a_expected, cells) < TOLERANCE);
    assert_true(th_test_relative_error(lambda, lambda_expected, rank) < TOLERANCE);
    assert_true(th_test_relative_error(gram, gram_expected, (uint64_t)rank * rank) < TOLERANCE);
    assert_true(th_test_relative_error(inner, inner_expected, rank) < TOLERANCE);
    for (size_t i = 0; i < cells; i++)
        assert_true(isfinite(a[i]));
    if (zero_column) {
        assert_true(lambda[0] == (norm == TH_NORM_2 ? 0.0 : 1.0));
        for (uint32_t i = 0; i < dims[mode]; i++)
            assert_true(a[(size_t)i * rank] == 0.0);
    }
    if (norm == TH_NORM_MAX)
        for (uint32_t r = 0; r < rank; r++)
            assert_true(lambda[r] >= 1.0);

    /* The next MTTKRP of another mode uses the updated factor. */
    factors[mode] = memcpy(factors[mode], a, cells * sizeof(double));
    check_all_modes(f, inst, t, rank, factors, "after als_update");
    e->destroy(inst);
    th_test_free_factors(factors, c->nmodes);
}

static void check_als_update(const fixture *f, uint32_t rank, int32_t norm, gboolean zero_column)
{
    check_als_update_of(f, &small_case, rank, norm, zero_column);
}

static void test_als_update_matches_host(void **state)
{
    fixture *f = *state;
    for (size_t r = 0; r < G_N_ELEMENTS(test_ranks); r++) {
        check_als_update(f, test_ranks[r], TH_NORM_2, FALSE);
        check_als_update(f, test_ranks[r], TH_NORM_MAX, FALSE);
    }
}

static void test_als_update_zero_column(void **state)
{
    fixture *f = *state;
    check_als_update(f, 4, TH_NORM_2, TRUE);
    check_als_update(f, 4, TH_NORM_MAX, TRUE);
}

/* A mode of several update blocks: every block's rows, column sums and
 * Gram must come out as one plain computation over all rows. */
static void test_als_update_in_blocks(void **state)
{
    fixture *f = *state;
    check_als_update_of(f, &tall_case, TALL_RANK, TH_NORM_2, FALSE);
    check_als_update_of(f, &tall_case, TALL_RANK, TH_NORM_MAX, FALSE);
    check_als_update_of(f, &tall_case, TALL_RANK, TH_NORM_2, TRUE);
}

/* Host services whose is_cancelled() says stop from its `stop_at`-th call
 * on (0: never), counting the calls. */
typedef struct stop_switch {
    int calls;
    int stop_at;
} stop_switch;

static int32_t stop_switch_is_cancelled(void *host_data)
{
    stop_switch *s = host_data;
    s->calls++;
    return s->stop_at > 0 && s->calls >= s->stop_at;
}

/* A stop inside the update gives it up with TH_ERR_CANCELLED and leaves
 * the factor and the outputs as they were; the instance then updates
 * normally once the stop is withdrawn. */
static void test_als_update_stops_between_blocks(void **state)
{
    fixture *f = *state;
    const als_case *c = &tall_case;
    const uint32_t rank = TALL_RANK, mode = c->mode;
    const th_plugin_entry *e = &f->plugin->entry;
    g_autoptr(th_sptensor) t = th_test_random_tensor(c->nmodes, c->dims, c->nnz, f->rng);
    double **factors = th_test_random_factors(t, rank, f->rng);
    g_autofree double *w = th_test_random_matrix(rank, rank, f->rng);
    stop_switch stop = {.calls = 0, .stop_at = 1};
    th_host_services services = f->plugin->services;
    services.host_data = &stop;
    services.is_cancelled = stop_switch_is_cancelled;
    const th_option option = {.key = "threads", .value = "2"};
    th_instance *inst = NULL;
    char err[TH_ERROR_SIZE] = "";
    th_test_assert_ok(e->create(&option, 1, &services, &inst, err), err);
    th_test_load_and_set(f->plugin, inst, t, rank, factors);
    th_test_assert_ok(e->mttkrp(inst, mode, err), err);

    const size_t cells = (size_t)c->dims[mode] * rank, grams = (size_t)rank * rank;
    g_autofree double *lambda = g_new(double, rank);
    g_autofree double *gram = g_new(double, grams);
    g_autofree double *inner = g_new(double, rank);
    g_autofree double *a = g_new(double, cells);
    for (uint32_t r = 0; r < rank; r++)
        lambda[r] = inner[r] = -7.0;
    for (size_t k = 0; k < grams; k++)
        gram[k] = -7.0;
    th_als_output out = {.struct_size = sizeof out, .lambda = lambda, .gram = gram, .inner = inner};
    assert_int_equal(e->als_update(inst, mode, w, TH_NORM_2, &out, err), TH_ERR_CANCELLED);
    assert_non_null(strstr(err, "stop requested"));
    assert_int_equal(stop.calls, 1); /* asked once, after the first block */
    th_test_assert_ok(e->get_factor(inst, mode, a, err), err);
    assert_memory_equal(a, factors[mode], cells * sizeof(double));
    for (uint32_t r = 0; r < rank; r++)
        assert_true(lambda[r] == -7.0 && inner[r] == -7.0);
    for (size_t k = 0; k < grams; k++)
        assert_true(gram[k] == -7.0);

    stop.stop_at = 0;
    th_test_assert_ok(e->als_update(inst, mode, w, TH_NORM_2, &out, err), err);
    assert_true(stop.calls > 1);
    g_autofree double *m = g_new(double, cells);
    g_autofree double *a_expected = g_new(double, cells);
    g_autofree double *lambda_expected = g_new(double, rank);
    g_autofree double *gram_expected = g_new(double, grams);
    g_autofree double *inner_expected = g_new(double, rank);
    th_test_assert_ok(e->get_mttkrp_result(inst, mode, m, err), err);
    host_als_update(m, w, c->dims[mode], rank, TH_NORM_2, a_expected, lambda_expected,
                    gram_expected, inner_expected);
    th_test_assert_ok(e->get_factor(inst, mode, a, err), err);
    assert_true(th_test_relative_error(a, a_expected, cells) < TOLERANCE);
    assert_true(th_test_relative_error(lambda, lambda_expected, rank) < TOLERANCE);
    assert_true(th_test_relative_error(gram, gram_expected, grams) < TOLERANCE);
    assert_true(th_test_relative_error(inner, inner_expected, rank) < TOLERANCE);
    e->destroy(inst);
    th_test_free_factors(factors, c->nmodes);
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

static void expect_create_error(const fixture *f, const char *key, const char *value,
                                const char *expected)
{
    th_option option = {.key = key, .value = value};
    th_instance *inst = NULL;
    char err[TH_ERROR_SIZE] = "";
    assert_int_equal(f->plugin->entry.create(&option, 1, &f->plugin->services, &inst, err),
                     TH_ERR_INVALID_ARGUMENT);
    assert_null(inst);
    assert_string_equal(err, expected);
}

static void test_option_errors(void **state)
{
    fixture *f = *state;
    expect_create_error(f, "foo", "1", "unknown option 'foo' (cpu-reference accepts: threads)");
    const char *bad[] = {"x", "0", "-1", "2.5", "", " 2", "+2", "99999999999"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autofree char *expected =
            g_strdup_printf("option 'threads': expected a positive integer, found '%s'", bad[i]);
        expect_create_error(f, "threads", bad[i], expected);
    }
    th_option twice[2] = {{"threads", "2"}, {"threads", "3"}};
    th_instance *inst = NULL;
    char err[TH_ERROR_SIZE] = "";
    assert_int_equal(f->plugin->entry.create(twice, 2, &f->plugin->services, &inst, err),
                     TH_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "option 'threads' given twice");
}

static void test_runtime_info(void **state)
{
    fixture *f = *state;
    const uint32_t dims[3] = {10, 20, 30};
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 100, f->rng);
    double **factors = th_test_random_factors(t, 4, f->rng);
    th_instance *inst = th_test_create_instance(f->plugin, "threads", "3", NULL);
    th_test_load_and_set(f->plugin, inst, t, 4, factors);
    g_autoptr(GError) error = NULL;
    th_runtime_info info;
    assert_true(th_instance_runtime_info(f->plugin, inst, &info, &error));
    assert_string_equal(info.device, "CPU (3 threads)");
    assert_string_equal(info.details, "threads=3 layout=csr-per-mode chunk=4096");
    /* Per mode: nnz * (8 + 2 * 4) bytes of layout + (dim + 1) row starts. */
    assert_int_equal(info.tensor_bytes, 3 * 100 * 16 + (11 + 21 + 31) * 8);
    assert_int_equal(info.factor_bytes, (10 + 20 + 30) * 4 * 2 * 8);
    /* Per thread two rank-4 scratch rows each padded to a cache line, plus
     * two boundary rows and one sum (generalized_mttkrp's) for the one
     * chunk of 100 nonzeros, plus als_update's work matrix of the longest
     * mode, its Gram and two rows of column sums padded to a cache line. */
    assert_int_equal(info.workspace_bytes,
                     3 * 2 * 8 * 8 + 1 * 2 * 4 * 8 + 1 * 8 + (30 * 4 + 4 * 4 + 2 * 8) * 8);

    /* A host with an older, shorter struct gets only the fields it has. */
    th_runtime_info older;
    memset(&older, 0x7f, sizeof older);
    older.struct_size = (uint32_t)offsetof(th_runtime_info, tensor_bytes);
    char err[TH_ERROR_SIZE] = "";
    th_test_assert_ok(f->plugin->entry.get_runtime_info(inst, &older, err), err);
    assert_int_equal(older.struct_size, offsetof(th_runtime_info, tensor_bytes));
    assert_string_equal(older.device, "CPU (3 threads)");
    assert_int_equal(older.tensor_bytes, 0x7f7f7f7f7f7f7f7full);
    f->plugin->entry.destroy(inst);
    th_test_free_factors(factors, 3);
}

static void expect_load_error(const fixture *f, th_instance *inst, const th_coo_tensor *t,
                              uint32_t rank, th_status status, const char *expected)
{
    char err[TH_ERROR_SIZE] = "";
    assert_int_equal(f->plugin->entry.load_tensor(inst, t, rank, err), status);
    assert_string_equal(err, expected);
}

static void test_load_errors(void **state)
{
    fixture *f = *state;
    const uint32_t dims[3] = {3, 2, 4};
    const uint32_t coords[] = {0, 0, 0, 2, 1, 3, 1, 1, 1};
    const double values[] = {1.0, 2.0, 3.0};
    g_autoptr(th_sptensor) t = tensor_from(3, dims, 3, coords, values);
    th_instance *inst = th_test_create_instance(f->plugin, NULL);
    th_coo_tensor view;
    th_test_coo_view(t, &view);

    expect_load_error(f, inst, &view, 0, TH_ERR_INVALID_ARGUMENT,
                      "load_tensor: rank 0; the rank must be >= 1");
    expect_load_error(f, inst, &view, 4097, TH_ERR_UNSUPPORTED,
                      "load_tensor: rank 4097 is above the maximum rank 4096 of cpu-reference");

    t->indices[1][2] = 2; /* nonzero 2: mode-1 index 2 with dimension 2 */
    t->indices[2][2] = 9; /* a later mode of the same nonzero: not the first */
    expect_load_error(f, inst, &view, 2, TH_ERR_INVALID_ARGUMENT,
                      "load_tensor: nonzero 2 has mode-1 index 2, out of range for dimension 2");
    t->indices[1][2] = 1;
    t->indices[2][2] = 1;

    t->dims[2] = 0;
    expect_load_error(f, inst, &view, 2, TH_ERR_INVALID_ARGUMENT,
                      "load_tensor: mode 2 has dimension 0; every dimension must be >= 1");
    t->dims[2] = 4;

    t->values[1] = NAN;
    expect_load_error(f, inst, &view, 2, TH_ERR_INVALID_ARGUMENT,
                      "load_tensor: nonzero 1 has a non-finite value nan");
    t->values[1] = 2.0;

    th_coo_tensor one_mode = view;
    one_mode.nmodes = 1;
    expect_load_error(f, inst, &one_mode, 2, TH_ERR_INVALID_ARGUMENT,
                      "load_tensor: the tensor has 1 mode; at least 2 are needed");
    th_coo_tensor many_modes = view;
    many_modes.nmodes = 65;
    expect_load_error(f, inst, &many_modes, 2, TH_ERR_UNSUPPORTED,
                      "load_tensor: the tensor has 65 modes; cpu-reference supports at most 64");

    /* Before any successful load: calls that need a tensor say so. */
    char err[TH_ERROR_SIZE] = "";
    double buffer[8];
    assert_int_equal(f->plugin->entry.mttkrp(inst, 0, err), TH_ERR_BAD_STATE);
    assert_string_equal(err, "mttkrp: no tensor loaded (call load_tensor first)");
    assert_int_equal(f->plugin->entry.set_factor(inst, 0, buffer, err), TH_ERR_BAD_STATE);
    assert_string_equal(err, "set_factor: no tensor loaded (call load_tensor first)");

    /* After a good load, the instance works. */
    double **factors = th_test_random_factors(t, 2, f->rng);
    th_test_load_and_set(f->plugin, inst, t, 2, factors);
    check_all_modes(f, inst, t, 2, factors, "after errors");

    /* A reload refused by validation keeps the tensor loaded before. */
    expect_load_error(f, inst, &view, 0, TH_ERR_INVALID_ARGUMENT,
                      "load_tensor: rank 0; the rank must be >= 1");
    th_test_assert_ok(f->plugin->entry.mttkrp(inst, 0, err), err);

    f->plugin->entry.destroy(inst);
    th_test_free_factors(factors, 3);
}

static void test_call_errors(void **state)
{
    fixture *f = *state;
    const th_plugin_entry *e = &f->plugin->entry;
    const uint32_t dims[3] = {3, 2, 4};
    g_autoptr(th_sptensor) t = th_test_random_tensor(3, dims, 5, f->rng);
    double **factors = th_test_random_factors(t, 2, f->rng);
    th_instance *inst = th_test_create_instance(f->plugin, NULL);
    th_test_load_and_set(f->plugin, inst, t, 2, factors);
    char err[TH_ERROR_SIZE] = "";
    double buffer[8], w[4] = {1, 0, 0, 1}, lambda[2], gram[4], inner[2];
    th_als_output out = {.struct_size = sizeof out, .lambda = lambda, .gram = gram, .inner = inner};

    assert_int_equal(e->mttkrp(inst, 3, err), TH_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "mttkrp: mode 3 is out of range; the tensor has 3 modes (0..2)");
    assert_int_equal(e->set_factor(inst, 7, buffer, err), TH_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "set_factor: mode 7 is out of range; the tensor has 3 modes (0..2)");
    assert_int_equal(e->get_factor(inst, 3, buffer, err), TH_ERR_INVALID_ARGUMENT);
    assert_int_equal(e->get_mttkrp_result(inst, 3, buffer, err), TH_ERR_INVALID_ARGUMENT);
    assert_int_equal(e->als_update(inst, 3, w, TH_NORM_2, &out, err), TH_ERR_INVALID_ARGUMENT);
    th_mode_info info = {.struct_size = sizeof info};
    assert_int_equal(e->get_mode_info(inst, 3, &info, err), TH_ERR_INVALID_ARGUMENT);

    /* Results before the MTTKRP that makes them. */
    assert_int_equal(e->get_mttkrp_result(inst, 1, buffer, err), TH_ERR_BAD_STATE);
    assert_string_equal(err, "get_mttkrp_result: mode 1 has no result yet (call mttkrp first)");
    assert_int_equal(e->als_update(inst, 1, w, TH_NORM_2, &out, err), TH_ERR_BAD_STATE);
    assert_string_equal(err, "als_update: mode 1 has no MTTKRP result yet (call mttkrp first)");

    th_test_assert_ok(e->mttkrp(inst, 1, err), err);
    assert_int_equal(e->als_update(inst, 1, w, 7, &out, err), TH_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "als_update: norm 7 is neither TH_NORM_2 (0) nor TH_NORM_MAX (1)");
    out.gram = NULL;
    assert_int_equal(e->als_update(inst, 1, w, TH_NORM_2, &out, err), TH_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "als_update: output array 'gram' is NULL");
    out.gram = gram;
    th_test_assert_ok(e->als_update(inst, 1, w, TH_NORM_2, &out, err), err);

    e->destroy(inst);
    e->destroy(NULL); /* accepted, as the ABI says */
    th_test_free_factors(factors, 3);
}

int main(void)
{
    th_log_set_level(TH_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_tensors_every_mode),
        cmocka_unit_test(test_mode_of_dimension_one),
        cmocka_unit_test(test_single_nonzero),
        cmocka_unit_test(test_empty_slices),
        cmocka_unit_test(test_rows_spanning_chunks),
        cmocka_unit_test(test_thread_count_does_not_change_results),
        cmocka_unit_test(test_vector_rows_are_the_scalar_sums),
        cmocka_unit_test(test_reload_replaces_tensor),
        cmocka_unit_test(test_set_get_factor_round_trip),
        cmocka_unit_test(test_als_update_matches_host),
        cmocka_unit_test(test_als_update_zero_column),
        cmocka_unit_test(test_als_update_in_blocks),
        cmocka_unit_test(test_als_update_stops_between_blocks),
        cmocka_unit_test(test_option_errors),
        cmocka_unit_test(test_runtime_info),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_call_errors),
    };
    return cmocka_run_group_tests(tests, setup, th_test_cpu_fixture_teardown);
}
