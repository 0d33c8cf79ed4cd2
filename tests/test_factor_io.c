/* Text factor files: th_format_matrix_rows writes exactly the bytes of
 * printf's "%+0.8e " for every kind of double; th_write_matrix writes the
 * text the old one-fprintf-per-value loop wrote, whatever its thread count
 * and block size; th_read_matrix reads it back and names file:line on bad
 * input; an aborted write leaves nothing behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>

#include <gio/gio.h>
#include <glib.h>
#include <glib/gstdio.h>

#include "base/cancel.h"
#include "output/factor_io.h"
#include "output/npy_io.h"
#include "base/number_format.h"
#include "output/report.h"
#include "test_support.h"

/* What the writer wrote before {fmt}: one snprintf per value. */
static GString *printf_text(const double *data, uint64_t rows, uint32_t cols)
{
    GString *text = g_string_new(NULL);
    char value[64];
    for (uint64_t i = 0; i < rows; ++i) {
        for (uint32_t j = 0; j < cols; ++j) {
            snprintf(value, sizeof value, "%+0.8e ", data[i * cols + j]);
            g_string_append(text, value);
        }
        g_string_append_c(text, '\n');
    }
    return text;
}

/* th_format_matrix_rows over all of `data` against printf_text, with the
 * first value that differs in the failure message. */
static void assert_formats_as_printf(const double *data, uint64_t rows, uint32_t cols)
{
    const size_t cap = th_format_rows_bound(rows, cols);
    g_autofree char *buf = g_malloc(cap + 1);
    const size_t length = th_format_matrix_rows(buf, cap, data, 0, rows, cols);
    g_autoptr(GString) expected = printf_text(data, rows, cols);
    if (length == expected->len && memcmp(buf, expected->str, length) == 0)
        return;
    char got[64];
    for (uint64_t k = 0; k < rows * cols; ++k) {
        char want[64];
        snprintf(want, sizeof want, "%+0.8e ", data[k]);
        const size_t n = th_format_matrix_rows(got, sizeof got, data, k, 1, 1);
        got[n ? n - 1 : 0] = '\0'; /* drop the '\n' */
        if (strcmp(got, want) != 0) {
            guint64 bits;
            memcpy(&bits, &data[k], sizeof bits);
            fail_msg("%.17g (bits %016" G_GINT64_MODIFIER "x): printf '%s', formatted '%s'",
                     data[k], bits, want, got);
        }
    }
    fail_msg("%" G_GUINT64_FORMAT " x %u: %zu bytes, printf %zu", rows, cols, length,
             expected->len);
}

static void test_special_values_match_printf(void **state)
{
    (void)state;
    const double values[] = {
        0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 10.0, 0.1, 1.0 / 3.0, -2.0 / 3.0,
        1e-300, -1e-300, 1e300, 1e100, 1e-100, 9.99e99, 9.999999999e99, 1e-99,
        4.9e-324, -4.9e-324,               /* the smallest subnormal */
        2.2250738585072009e-308,           /* the largest subnormal */
        2.2250738585072014e-308,           /* the smallest normal */
        1.7e308, 1.7976931348623157e308, -1.7976931348623157e308,
        /* Round up across a power of ten at 9 significant digits. */
        9.999999999e5, 0.99999999995, 9.9999999995, 99999999.95, 9.999999995e-300,
        -9.999999999e307,
        /* Ties in decimal: exactly representable, ...5 in the 10th digit. */
        1234567885.0, 1234567895.0, 1234567875.0, 9999999995.0, 1000000005.0, 0.5000000005,
        /* Exact halves of small binary fractions. */
        1.00000000390625, 3.0517578125e-05,
    };
    assert_formats_as_printf(values, 1, G_N_ELEMENTS(values));
    assert_formats_as_printf(values, G_N_ELEMENTS(values), 1);
}

/* printf's "+nan", "-nan", "+inf", "-inf": factors never hold them, but a
 * broken model written as text must still say what it holds. */
static void test_nan_and_infinity_match_printf(void **state)
{
    (void)state;
    const double values[] = {NAN, -NAN, INFINITY, -INFINITY};
    assert_formats_as_printf(values, 2, 2);
    char buf[4 * TH_FORMAT_VALUE_MAX + 1];
    const size_t n = th_format_matrix_rows(buf, sizeof buf, values, 0, 1, 4);
    assert_int_equal(n, 21);
    assert_memory_equal(buf, "+nan -nan +inf -inf \n", n);
}

/* Three-digit exponents take the bound's 17 bytes; two-digit ones 16. */
static void test_value_lengths(void **state)
{
    (void)state;
    const double wide[] = {-1.5e-300};
    const double narrow[] = {-1.5e-30};
    char buf[TH_FORMAT_VALUE_MAX + 1];
    assert_int_equal(th_format_matrix_rows(buf, sizeof buf, wide, 0, 1, 1),
                     TH_FORMAT_VALUE_MAX + 1);
    assert_memory_equal(buf, "-1.50000000e-300 \n", TH_FORMAT_VALUE_MAX + 1);
    assert_int_equal(th_format_matrix_rows(buf, sizeof buf, narrow, 0, 1, 1), 17);
    /* A buffer below the bound gets nothing, even where the text would fit. */
    assert_int_equal(th_format_matrix_rows(buf, TH_FORMAT_VALUE_MAX, narrow, 0, 1, 1), 0);
    assert_int_equal(th_format_rows_bound(3, 2), 3 * (2 * TH_FORMAT_VALUE_MAX + 1));
    assert_int_equal(th_format_rows_bound(0, 5), 0);
    assert_int_equal(th_format_rows_bound(UINT64_MAX, 2), SIZE_MAX);
}

/* Random bit patterns (every exponent, subnormals included), 10-digit
 * integers (decimal ties), and short binary fractions at every scale. */
static void test_random_values_match_printf(void **state)
{
    (void)state;
    enum { COUNT = 600000 };
    g_autoptr(GRand) rng = g_rand_new_with_seed(20240611);
    g_autofree double *values = g_new(double, COUNT);
    for (size_t k = 0; k < COUNT; ++k) {
        double v;
        switch (k % 3) {
        case 0: {
            const guint64 bits = ((guint64)g_rand_int(rng) << 32) | g_rand_int(rng);
            memcpy(&v, &bits, sizeof v);
            if (isnan(v))
                v = 0.25;
            break;
        }
        case 1:
            v = (double)(g_rand_int_range(rng, 100000, 1000000)) * 10000.0 +
                g_rand_int_range(rng, 0, 10000);
            break;
        default:
            v = ldexp((double)(g_rand_int(rng) >> 4), g_rand_int_range(rng, -1100, 1000));
            break;
        }
        values[k] = v;
    }
    assert_formats_as_printf(values, COUNT / 8, 8);
    /* A row range from the middle of the matrix. */
    char buf[3 * (8 * TH_FORMAT_VALUE_MAX + 1)];
    const size_t n = th_format_matrix_rows(buf, sizeof buf, values, 1000, 3, 8);
    g_autoptr(GString) expected = printf_text(values + 8000, 3, 8);
    assert_int_equal(n, expected->len);
    assert_memory_equal(buf, expected->str, n);
}

static char *file_text(const char *path, gsize *length)
{
    char *text = NULL;
    g_autoptr(GError) error = NULL;
    if (!g_file_get_contents(path, &text, length, &error))
        fail_msg("%s", error->message);
    return text;
}

static void assert_no_temp_files(void)
{
    g_autoptr(GDir) d = g_dir_open(th_test_scratch, 0, NULL);
    assert_non_null(d);
    for (const char *name; (name = g_dir_read_name(d));)
        if (strstr(name, ".tmp-"))
            fail_msg("temporary file left behind: %s", name);
}

/* The file is the old writer's text for every shape, thread count and
 * block size: rows a multiple of the block or not, one column, no rows. */
static void test_write_matches_printf_for_any_threads(void **state)
{
    (void)state;
    const struct {
        uint64_t rows;
        uint32_t cols;
    } shapes[] = {{0, 3}, {1, 1}, {7, 1}, {1000, 1}, {1001, 5}, {64, 32}, {333, 32}, {5, 300}};
    const uint32_t threads[] = {1, 2, 3, 8};
    const uint64_t block_rows[] = {1, 7, 64, 0};
    g_autoptr(GRand) rng = g_rand_new_with_seed(7);
    g_autofree char *path = g_build_filename(th_test_scratch, "m.mat", NULL);
    for (size_t s = 0; s < G_N_ELEMENTS(shapes); ++s) {
        const uint64_t rows = shapes[s].rows;
        const uint32_t cols = shapes[s].cols;
        g_autofree double *data = th_test_random_matrix(rows, cols, rng);
        if (rows * cols > 2)
            data[2] = -1e-300; /* a three-digit exponent amid two-digit ones */
        g_autoptr(GString) expected = printf_text(data, rows, cols);
        for (size_t t = 0; t < G_N_ELEMENTS(threads); ++t) {
            for (size_t b = 0; b < G_N_ELEMENTS(block_rows); ++b) {
                th_write_matrix_set_parallelism(threads[t], block_rows[b]);
                g_autoptr(GError) error = NULL;
                if (!th_write_matrix(path, data, rows, cols, &error))
                    fail_msg("%s", error->message);
                gsize length = 0;
                g_autofree char *text = file_text(path, &length);
                if (length != expected->len || memcmp(text, expected->str, length) != 0)
                    fail_msg("%" G_GUINT64_FORMAT " x %u, %u threads, blocks of %" G_GUINT64_FORMAT
                             " rows: %zu bytes differ from printf's %zu",
                             rows, cols, threads[t], block_rows[b], (size_t)length,
                             expected->len);
            }
        }
    }
    th_write_matrix_set_parallelism(0, 0);
    assert_no_temp_files();
}

/* th_read_matrix gives back what the 9 digits of each value say (as
 * g_ascii_strtod reads them), at every scale: its fast path for plain
 * decimals and its fallback agree with strtod. */
static void test_round_trip(void **state)
{
    (void)state;
    g_autoptr(GRand) rng = g_rand_new_with_seed(11);
    const uint64_t rows = 20000;
    const uint32_t cols = 16;
    g_autofree double *data = th_test_random_matrix(rows, cols, rng);
    for (uint64_t k = 0; k < rows * cols; k += 2)
        data[k] = ldexp(data[k], g_rand_int_range(rng, -1074, 1024));
    data[0] = -0.0;
    data[1] = 4.9e-324;
    data[2] = 1.7976931348623157e308;
    data[3] = -1e-300;
    g_autofree char *path = g_build_filename(th_test_scratch, "round.mat", NULL);
    g_autoptr(GError) error = NULL;
    assert_true(th_write_matrix(path, data, rows, cols, &error));
    uint64_t back_rows = 0;
    uint32_t back_cols = 0;
    g_autofree double *back = th_read_matrix(path, &back_rows, &back_cols, &error);
    if (!back)
        fail_msg("%s", error->message);
    assert_int_equal(back_rows, rows);
    assert_int_equal(back_cols, cols);
    for (uint64_t k = 0; k < rows * cols; ++k) {
        char text[64];
        snprintf(text, sizeof text, "%+0.8e", data[k]);
        const double expected = g_ascii_strtod(text, NULL);
        if (memcmp(&back[k], &expected, sizeof expected) != 0)
            fail_msg("value %" G_GUINT64_FORMAT ": wrote %s, read %.17g", k, text, back[k]);
    }
    assert_true(signbit(back[0]));
}

static double *read_text(const char *name, const char *contents, uint64_t *rows, uint32_t *cols,
                         GError **error)
{
    g_autofree char *path = g_build_filename(th_test_scratch, name, NULL);
    assert_true(g_file_set_contents(path, contents, -1, NULL));
    return th_read_matrix(path, rows, cols, error);
}

/* Any whitespace layout, blank lines, CRLF and a missing last newline are
 * read; a bad number or a short row is refused with file:line. */
static void test_read_layouts_and_errors(void **state)
{
    (void)state;
    uint64_t rows = 9;
    uint32_t cols = 9;
    g_autoptr(GError) error = NULL;
    g_autofree double *m = read_text("layout.mat", "\n  1\t-2.5e+00 \r\n\n3 4e-1\n\t \n5 6",
                                     &rows, &cols, &error);
    assert_non_null(m);
    assert_int_equal(rows, 3);
    assert_int_equal(cols, 2);
    const double expected[] = {1, -2.5, 3, 0.4, 5, 6};
    assert_memory_equal(m, expected, sizeof expected);

    g_autofree double *empty = read_text("empty.mat", "", &rows, &cols, &error);
    assert_non_null(empty);
    assert_int_equal(rows, 0);
    assert_int_equal(cols, 0);

    const struct {
        const char *contents, *message;
    } bad[] = {
        {"1 2\n3 abc\n", "bad.mat:2: expected a number, found 'abc'"},
        {"1 2\n\n3 4x 5\n", "bad.mat:3: expected a number, found '4x'"},
        {"1 2\n3 4 5\n", "bad.mat:2: expected 2 columns, found 3"},
        {"1 2\n3\n", "bad.mat:2: expected 2 columns, found 1"},
        {"1 2,5\n", "bad.mat:1: expected a number, found '2,5'"},
    };
    for (size_t k = 0; k < G_N_ELEMENTS(bad); ++k) {
        g_clear_error(&error);
        g_autofree double *none = read_text("bad.mat", bad[k].contents, &rows, &cols, &error);
        assert_null(none);
        assert_non_null(error);
        if (!g_str_has_suffix(error->message, bad[k].message))
            fail_msg("'%s': got '%s', expected '%s'", bad[k].contents, error->message,
                     bad[k].message);
    }
}

/* A second stop while outputs are written (cancel.h) aborts the write: the
 * file keeps its previous contents and no temporary file stays, for the
 * text factors, the .npy files and report.json alike. A first stop alone
 * asks to stop after the outputs, so the write goes on. */
static void test_abort_leaves_the_previous_file(void **state)
{
    (void)state;
    g_autoptr(GRand) rng = g_rand_new_with_seed(3);
    const uint64_t rows = 5000;
    g_autofree double *data = th_test_random_matrix(rows, 4, rng);
    g_autofree char *path = g_build_filename(th_test_scratch, "abort.mat", NULL);
    g_autofree char *fresh = g_build_filename(th_test_scratch, "fresh.mat", NULL);
    assert_true(g_file_set_contents(path, "previous\n", -1, NULL));
    th_write_matrix_set_parallelism(2, 100);

    th_cancel_reset();
    th_cancel_request();
    g_autoptr(GError) error = NULL;
    assert_true(th_write_matrix(fresh, data, rows, 4, &error));
    gsize length = 0;
    g_autofree char *written = file_text(fresh, &length);
    assert_true(length > 0);

    th_cancel_reset();
    th_cancel_install_handlers();
    th_cancel_defer_abort(TRUE);
    raise(SIGINT); /* the first: stop after the outputs */
    raise(SIGINT); /* the second: abort the write */
    assert_true(th_cancel_abort_requested());
    g_assert_no_error(error);
    assert_false(th_write_matrix(path, data, rows, 4, &error));
    assert_true(g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED));
    assert_non_null(strstr(error->message, path));
    g_clear_error(&error);
    assert_false(th_write_matrix(fresh, data, rows, 4, &error));
    g_clear_error(&error);
    /* The .npy files and report.json alike. */
    g_autofree char *npy = g_build_filename(th_test_scratch, "abort.npy", NULL);
    g_autofree char *report = g_build_filename(th_test_scratch, "report.json", NULL);
    assert_true(g_file_set_contents(npy, "previous\n", -1, NULL));
    assert_true(g_file_set_contents(report, "previous\n", -1, NULL));
    assert_false(th_write_npy(npy, data, rows, 4, &error));
    assert_true(g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED));
    assert_non_null(strstr(error->message, npy));
    g_clear_error(&error);
    const th_run_summary summary = {0};
    g_autoptr(th_output_set) set =
        th_output_set_new(th_test_scratch, TH_RUN_OUTPUT_NAMES, TH_RUN_REPORT_NAME);
    assert_false(th_report_stage(set, &summary, &error));
    assert_true(g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED));
    assert_non_null(strstr(error->message, report));
    th_cancel_reset();
    th_write_matrix_set_parallelism(0, 0);

    g_autofree char *kept = file_text(path, &length);
    assert_string_equal(kept, "previous\n");
    g_autofree char *kept_npy = file_text(npy, &length);
    assert_string_equal(kept_npy, "previous\n");
    g_autofree char *kept_report = file_text(report, &length);
    assert_string_equal(kept_report, "previous\n");
    g_autofree char *still = file_text(fresh, &length);
    assert_string_equal(still, written);
    assert_no_temp_files();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_special_values_match_printf),
        cmocka_unit_test(test_nan_and_infinity_match_printf),
        cmocka_unit_test(test_value_lengths),
        cmocka_unit_test(test_random_values_match_printf),
        cmocka_unit_test(test_write_matches_printf_for_any_threads),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_read_layouts_and_errors),
        cmocka_unit_test(test_abort_leaves_the_previous_file),
    };
    return cmocka_run_group_tests(tests, th_test_make_scratch, th_test_remove_scratch);
}
