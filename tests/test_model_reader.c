/* A run's model folder read back (model_reader.h): every bit from the .npy
 * files, the text's digits from the .mat files, and each way a folder can
 * fail to be a model named with its file and what was expected. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "output/factor_io.h"
#include "output/model_reader.h"
#include "output/npy_io.h"
#include "test_support.h"

enum { NMODES = 3, RANK = 4 };
static const th_index dims[NMODES] = {5, 2, 7};

/* A model as a run hands it to th_write_cpd_factors: entries from `seed`. */
typedef struct written_model {
    th_index dims[NMODES];
    double lambda[RANK];
    double *factors[NMODES];
    th_cpd_result result; /* borrows the arrays above */
} written_model;

static void written_model_init(written_model *w, guint32 seed)
{
    g_autoptr(GRand) rng = g_rand_new_with_seed(seed);
    memcpy(w->dims, dims, sizeof dims);
    for (uint32_t r = 0; r < RANK; ++r)
        w->lambda[r] = g_rand_double_range(rng, 0.5, 20.0);
    for (uint32_t m = 0; m < NMODES; ++m) {
        w->factors[m] = g_new(double, (size_t)dims[m] * RANK);
        for (size_t i = 0; i < (size_t)dims[m] * RANK; ++i)
            w->factors[m][i] = g_rand_double_range(rng, -1.0, 1.0) / 3.0;
    }
    w->result = (th_cpd_result){.nmodes = NMODES, .rank = RANK, .dims = w->dims,
                                .lambda = w->lambda, .factors = w->factors};
}

static void written_model_clear(written_model *w)
{
    for (uint32_t m = 0; m < NMODES; ++m)
        g_free(w->factors[m]);
}

/* A fresh folder holding the model's files in `formats`. */
static char *model_dir(const char *name, const written_model *w, unsigned formats)
{
    char *dir = g_build_filename(th_test_scratch, name, NULL);
    g_autoptr(GError) error = NULL;
    if (!th_make_output_dir(dir, &error) || !th_write_cpd_factors(dir, &w->result, formats, &error))
        fail_msg("%s", error->message);
    return dir;
}

static char *file_in(const char *dir, const char *name)
{
    return g_build_filename(dir, name, NULL);
}

static void assert_model_equal(const th_saved_model *model, const written_model *w,
                               double tolerance)
{
    assert_int_equal(model->nmodes, NMODES);
    assert_int_equal(model->rank, RANK);
    for (uint32_t r = 0; r < RANK; ++r)
        assert_true(fabs(model->lambda[r] - w->lambda[r]) <= tolerance * fabs(w->lambda[r]));
    for (uint32_t m = 0; m < NMODES; ++m) {
        assert_int_equal(model->dims[m], dims[m]);
        for (size_t i = 0; i < (size_t)dims[m] * RANK; ++i)
            if (fabs(model->factors[m][i] - w->factors[m][i]) > tolerance)
                fail_msg("mode %u, value %zu: %.17g, expected %.17g", m + 1, i,
                         model->factors[m][i], w->factors[m][i]);
    }
}

/* With both formats there, the .npy files: every bit. */
static void test_npy_preferred_and_exact(void **state)
{
    (void)state;
    written_model w;
    written_model_init(&w, 1);
    g_autofree char *dir = model_dir("both", &w, TH_FACTORS_TEXT | TH_FACTORS_NPY);
    g_autoptr(GError) error = NULL;
    g_autoptr(th_saved_model) model = th_saved_model_read(dir, &error);
    assert_non_null(model);
    assert_string_equal(model->format, "npy");
    assert_model_equal(model, &w, 0.0);
    written_model_clear(&w);
}

/* Text alone: the files' nine digits. */
static void test_text_when_no_npy(void **state)
{
    (void)state;
    written_model w;
    written_model_init(&w, 2);
    g_autofree char *dir = model_dir("text", &w, TH_FACTORS_TEXT);
    g_autoptr(GError) error = NULL;
    g_autoptr(th_saved_model) model = th_saved_model_read(dir, &error);
    assert_non_null(model);
    assert_string_equal(model->format, "text");
    assert_model_equal(model, &w, 1e-8);
    written_model_clear(&w);
}

static void assert_read_fails(const char *dir, const char *expected)
{
    GError *error = NULL;
    th_saved_model *model = th_saved_model_read(dir, &error);
    assert_null(model);
    assert_non_null(error);
    if (strcmp(error->message, expected) != 0)
        fail_msg("message:\n  %s\nexpected:\n  %s", error->message, expected);
    g_error_free(error);
}

static void test_not_a_model_folder(void **state)
{
    (void)state;
    g_autofree char *missing = file_in(th_test_scratch, "nowhere");
    g_autofree char *expected = g_strdup_printf("%s: no such folder", missing);
    assert_read_fails(missing, expected);

    g_autofree char *file = file_in(th_test_scratch, "a-file");
    assert_true(g_file_set_contents(file, "x", -1, NULL));
    g_free(expected);
    expected = g_strdup_printf("%s: not a folder (a model is the folder of files a run wrote, "
                               "its output.dir)",
                               file);
    assert_read_fails(file, expected);

    g_autofree char *empty = file_in(th_test_scratch, "empty");
    assert_int_equal(g_mkdir(empty, 0755), 0);
    g_free(expected);
    expected = g_strdup_printf("%s: neither mode1.npy nor mode1.mat is there: expected the files "
                               "of a CP model as a run writes them (mode1 ... modeN and lambda, "
                               ".npy or .mat)",
                               empty);
    assert_read_fails(empty, expected);
}

/* A missing mode among those present, one mode alone, a missing lambda. */
static void test_missing_files_are_named(void **state)
{
    (void)state;
    written_model w;
    written_model_init(&w, 3);
    g_autofree char *gap = model_dir("gap", &w, TH_FACTORS_NPY);
    g_autofree char *mode2 = file_in(gap, "mode2.npy");
    assert_int_equal(g_unlink(mode2), 0);
    g_autofree char *expected =
        g_strdup_printf("%s is missing: expected one factor file per mode, mode1.npy to "
                        "mode3.npy",
                        mode2);
    assert_read_fails(gap, expected);

    g_autofree char *alone = model_dir("alone", &w, TH_FACTORS_TEXT);
    g_autofree char *alone2 = file_in(alone, "mode2.mat");
    g_autofree char *alone3 = file_in(alone, "mode3.mat");
    assert_int_equal(g_unlink(alone2), 0);
    assert_int_equal(g_unlink(alone3), 0);
    g_free(expected);
    expected = g_strdup_printf("%s is missing: a model has a factor file for each of its modes, "
                               "at least 2 (mode1.mat, mode2.mat, ...)",
                               alone2);
    assert_read_fails(alone, expected);

    g_autofree char *no_lambda = model_dir("no-lambda", &w, TH_FACTORS_NPY);
    g_autofree char *lambda = file_in(no_lambda, "lambda.npy");
    assert_int_equal(g_unlink(lambda), 0);
    g_free(expected);
    expected = g_strdup_printf("%s is missing: expected the model's 4 weights beside its factors",
                               lambda);
    assert_read_fails(no_lambda, expected);

    /* Names that are not a run's (mode02.npy, mode.npy) are not modes. */
    g_autofree char *extra = model_dir("extra", &w, TH_FACTORS_NPY);
    g_autofree char *odd = file_in(extra, "mode04.npy");
    g_autofree char *bare = file_in(extra, "mode.npy");
    assert_true(g_file_set_contents(odd, "x", -1, NULL));
    assert_true(g_file_set_contents(bare, "x", -1, NULL));
    GError *error = NULL;
    g_autoptr(th_saved_model) model = th_saved_model_read(extra, &error);
    assert_null(error);
    assert_int_equal(model->nmodes, NMODES);
    written_model_clear(&w);
}

/* Files that disagree with mode1 on the rank, or hold what no factor
 * holds. */
static void test_inconsistent_files_are_named(void **state)
{
    (void)state;
    written_model w;
    written_model_init(&w, 4);
    g_autofree char *dir = model_dir("inconsistent", &w, TH_FACTORS_NPY);
    g_autofree char *mode3 = file_in(dir, "mode3.npy");
    g_autofree char *mode1 = file_in(dir, "mode1.npy");
    g_autofree char *lambda = file_in(dir, "lambda.npy");
    g_autoptr(GError) error = NULL;
    double values[7 * 5] = {0};

    assert_true(th_write_npy(mode3, values, 7, 5, &error));
    g_autofree char *expected =
        g_strdup_printf("%s: 5 columns, expected 4 (the rank: %s has 4)", mode3, mode1);
    assert_read_fails(dir, expected);

    assert_true(th_write_npy(mode3, values, 7, 0, &error)); /* 1-D */
    g_free(expected);
    expected = g_strdup_printf("%s: a 1-D array: expected a factor matrix, one row per index of "
                               "mode 3 and one column per component",
                               mode3);
    assert_read_fails(dir, expected);

    values[2 * 4 + 1] = NAN;
    assert_true(th_write_npy(mode3, values, 7, 4, &error));
    g_free(expected);
    expected = g_strdup_printf("%s: row 3, column 2 (1-based) is nan: expected a finite number",
                               mode3);
    assert_read_fails(dir, expected);
    values[2 * 4 + 1] = 0.0;
    assert_true(th_write_npy(mode3, values, 7, 4, &error));

    assert_true(th_write_npy(lambda, values, 3, 0, &error));
    g_free(expected);
    expected = g_strdup_printf("%s: 3 weights, expected 4 weights, one per component (the rank: "
                               "%s has 4 columns), as a 1-D array or one column",
                               lambda, mode1);
    assert_read_fails(dir, expected);
    assert_true(th_write_npy(lambda, values, 2, 2, &error));
    g_free(expected);
    expected = g_strdup_printf("%s: a 2 x 2 array, expected 4 weights, one per component (the "
                               "rank: %s has 4 columns), as a 1-D array or one column",
                               lambda, mode1);
    assert_read_fails(dir, expected);

    /* One column of weights, as the text layout has it, reads. */
    const double weights[] = {4.0, 3.0, 2.0, 1.0};
    assert_true(th_write_npy(lambda, weights, 4, 1, &error));
    g_autoptr(th_saved_model) model = th_saved_model_read(dir, &error);
    assert_non_null(model);
    assert_true(model->lambda[3] == 1.0);
    written_model_clear(&w);
}

/* A text file that is not numbers: th_read_matrix's message, file:line. */
static void test_text_errors_name_the_line(void **state)
{
    (void)state;
    written_model w;
    written_model_init(&w, 5);
    g_autofree char *dir = model_dir("bad-text", &w, TH_FACTORS_TEXT);
    g_autofree char *mode2 = file_in(dir, "mode2.mat");
    assert_true(g_file_set_contents(mode2, "1 2 3 4\n1 x 3 4\n", -1, NULL));
    g_autofree char *expected = g_strdup_printf("%s:2: expected a number, found 'x'", mode2);
    assert_read_fails(dir, expected);
    assert_true(g_file_set_contents(mode2, "", -1, NULL));
    g_free(expected);
    expected = g_strdup_printf("%s: no values: expected a factor matrix, one row per index of "
                               "mode 2 and one column per component",
                               mode2);
    assert_read_fails(dir, expected);
    written_model_clear(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npy_preferred_and_exact),
        cmocka_unit_test(test_text_when_no_npy),
        cmocka_unit_test(test_not_a_model_folder),
        cmocka_unit_test(test_missing_files_are_named),
        cmocka_unit_test(test_inconsistent_files_are_named),
        cmocka_unit_test(test_text_errors_name_the_line),
    };
    return cmocka_run_group_tests(tests, th_test_make_scratch, th_test_remove_scratch);
}
