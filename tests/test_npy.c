/* numpy's .npy files: what th_write_npy writes th_read_npy reads back
 * exactly, in numpy's layout (data aligned to 64 bytes), and every
 * malformed file is refused with the file and the reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "output/npy_io.h"
#include "test_support.h"

static void test_matrix_and_vector_round_trip(void **state)
{
    (void)state;
    const double matrix[] = {1.0, -2.5, 3e-300, 4e300, 0.0, -0.0};
    g_autofree char *path = g_build_filename(th_test_scratch, "m.npy", NULL);
    g_autoptr(GError) error = NULL;
    assert_true(th_write_npy(path, matrix, 3, 2, &error));
    uint64_t rows = 0;
    uint32_t cols = 99;
    g_autofree double *back = th_read_npy(path, &rows, &cols, &error);
    assert_non_null(back);
    assert_int_equal(rows, 3);
    assert_int_equal(cols, 2);
    assert_memory_equal(back, matrix, sizeof matrix); /* bit for bit, -0.0 included */

    g_autofree char *contents = NULL;
    gsize length = 0;
    assert_true(g_file_get_contents(path, &contents, &length, NULL));
    assert_int_equal((length - sizeof matrix) % 64, 0); /* numpy's alignment */
    assert_non_null(strstr(contents + 10, "{'descr': '<f8', 'fortran_order': False, "
                                          "'shape': (3, 2), }"));

    g_autofree char *vector_path = g_build_filename(th_test_scratch, "v.npy", NULL);
    assert_true(th_write_npy(vector_path, matrix, 4, 0, &error));
    g_autofree double *vector = th_read_npy(vector_path, &rows, &cols, &error);
    assert_non_null(vector);
    assert_int_equal(rows, 4);
    assert_int_equal(cols, 0);
    assert_memory_equal(vector, matrix, 4 * sizeof(double));
}

/* A header as numpy writes it, with `header` as its dict and `values`
 * doubles of data (zeros). */
static GByteArray *npy_image(const char *header, size_t values)
{
    GByteArray *image = g_byte_array_new();
    const uint8_t magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    g_byte_array_append(image, magic, sizeof magic);
    g_autoptr(GString) text = g_string_new(header);
    while ((10 + text->len + 1) % 64)
        g_string_append_c(text, ' ');
    g_string_append_c(text, '\n');
    const uint8_t length[] = {(uint8_t)(text->len & 0xff), (uint8_t)(text->len >> 8)};
    g_byte_array_append(image, length, 2);
    g_byte_array_append(image, (const uint8_t *)text->str, (guint)text->len);
    for (size_t i = 0; i < values * sizeof(double); ++i) {
        const uint8_t zero = 0;
        g_byte_array_append(image, &zero, 1);
    }
    return image;
}

static void expect_refused(GByteArray *image, const char *expected)
{
    uint64_t rows = 0;
    uint32_t cols = 0;
    g_autoptr(GError) error = NULL;
    double *values = th_parse_npy("x.npy", image->data, image->len, &rows, &cols, &error);
    if (values || !error || !strstr(error->message, expected))
        fail_msg("expected an error with '%s', got %s", expected,
                 error ? error->message : "values");
    assert_non_null(strstr(error->message, "x.npy: "));
    g_byte_array_unref(image);
}

static void test_malformed_files_are_refused(void **state)
{
    (void)state;
    expect_refused(npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 1),
                   "not little-endian doubles");
    expect_refused(npy_image("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2), }", 4),
                   "Fortran order");
    expect_refused(npy_image("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2, 2), }",
                             8),
                   "'shape' is not a tuple of one or two lengths");
    expect_refused(npy_image("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }", 5),
                   "says 6 values but the file holds 40 bytes");
    expect_refused(npy_image("{'descr': '<f8', 'shape': (2,), }", 2), "lacks");
    expect_refused(npy_image("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", 1),
                   "a scalar");
    expect_refused(npy_image("{'descr': '<f8', 'fortran_order': Maybe, 'shape': (1,), }", 1),
                   "neither True nor False");
    expect_refused(npy_image("[1, 2]", 0), "not a Python dict");
    expect_refused(npy_image("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 0), }", 0),
                   "an empty array");
    GByteArray *bad_magic = npy_image("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 1);
    bad_magic->data[1] = 'X';
    expect_refused(bad_magic, ".npy magic");
    GByteArray *short_header = npy_image("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 0);
    g_byte_array_set_size(short_header, 20);
    expect_refused(short_header, "the header runs past the end of the file");
    /* A huge shape must not be believed: the body is checked against it. */
    expect_refused(npy_image("{'descr': '<f8', 'fortran_order': False, "
                             "'shape': (8589934592, 4294967295), }", 1),
                   "the shape overflows");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix_and_vector_round_trip),
        cmocka_unit_test(test_malformed_files_are_refused),
    };
    return cmocka_run_group_tests(tests, th_test_make_scratch, th_test_remove_scratch);
}
