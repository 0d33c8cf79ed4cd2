/* The tensor reader: every malformed case (code, exact message, line) and the
 * good ones (comments, CRLF, gzip, sptensor, 16 modes, real data). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "tensor_reader.h"

/* ---- helpers ------------------------------------------------------------- */

static th_sptensor *read_text(const char *text, GError **error)
{
    return th_tensor_read_buffer("t.tns", text, strlen(text), error);
}

#define assert_read_error(text, expected_code, expected_message)                                         \
    do {                                                                               \
        GError *err_ = NULL;                                                           \
        th_sptensor *t_ = read_text(text, &err_);                                      \
        assert_null(t_);                                                               \
        assert_non_null(err_);                                                         \
        assert_true(err_->domain == TH_TENSOR_READER_ERROR);                           \
        assert_string_equal(err_->message, expected_message);                          \
        assert_int_equal(err_->code, expected_code);                                   \
        g_error_free(err_);                                                            \
    } while (0)

static th_sptensor *read_ok(const char *text)
{
    GError *error = NULL;
    th_sptensor *t = read_text(text, &error);
    if (error != NULL)
        fail_msg("unexpected error: %s", error->message);
    assert_non_null(t);
    return t;
}

static void assert_entry(const th_sptensor *t, uint64_t i, const th_index *coords, double value)
{
    for (uint32_t m = 0; m < t->nmodes; ++m)
        assert_int_equal(t->indices[m][i], coords[m]);
    assert_true(t->values[i] == value);
}

static char *temp_dir;

static int make_temp_dir(void **state)
{
    (void)state;
    temp_dir = g_dir_make_tmp("th-reader-XXXXXX", NULL);
    return temp_dir == NULL;
}

static void remove_file(const char *name)
{
    g_autofree char *path = g_build_filename(temp_dir, name, NULL);
    g_unlink(path);
}

static int remove_temp_dir(void **state)
{
    (void)state;
    g_autoptr(GDir) dir = g_dir_open(temp_dir, 0, NULL);
    const char *name;
    while (dir != NULL && (name = g_dir_read_name(dir)) != NULL)
        remove_file(name);
    g_rmdir(temp_dir);
    g_free(temp_dir);
    return 0;
}

static char *write_temp(const char *name, const void *data, size_t length)
{
    char *path = g_build_filename(temp_dir, name, NULL);
    assert_true(g_file_set_contents(path, data, (gssize)length, NULL));
    return path;
}

static GBytes *gzip_bytes(const char *text)
{
    g_autoptr(GZlibCompressor) z = g_zlib_compressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP, -1);
    g_autoptr(GOutputStream) mem = g_memory_output_stream_new_resizable();
    g_autoptr(GOutputStream) out = g_converter_output_stream_new(mem, G_CONVERTER(z));
    assert_true(g_output_stream_write_all(out, text, strlen(text), NULL, NULL, NULL));
    assert_true(g_output_stream_close(out, NULL, NULL));
    return g_memory_output_stream_steal_as_bytes(G_MEMORY_OUTPUT_STREAM(mem));
}

/* ---- malformed input ----------------------------------------------------- */

static void test_too_few_columns(void **state)
{
    (void)state;
    assert_read_error("1 1 1 1.0\n2 2 2.0\n", TH_TENSOR_READER_ERROR_COLUMNS,
                      "t.tns:2: expected 4 fields (3 indices and a value), found 3");
    assert_read_error("# c\n\n1 1 1 1.0\n1 2 # 3 4\n", TH_TENSOR_READER_ERROR_COLUMNS,
                      "t.tns:4: expected 4 fields (3 indices and a value), found 2");
}

static void test_too_many_columns(void **state)
{
    (void)state;
    assert_read_error("1 1 1 1.0\n1 1 1 1 5\n", TH_TENSOR_READER_ERROR_COLUMNS,
                      "t.tns:2: expected 4 fields (3 indices and a value), found 5");
}

static void test_column_count_wins_over_field_content(void **state)
{
    (void)state;
    assert_read_error("1 1 1 1.0\n1 x 1\n", TH_TENSOR_READER_ERROR_COLUMNS,
                      "t.tns:2: expected 4 fields (3 indices and a value), found 3");
}

static void test_non_numeric_index(void **state)
{
    (void)state;
    assert_read_error("1 1 1 1\n1 x 1 2\n", TH_TENSOR_READER_ERROR_NUMBER,
                      "t.tns:2: column 2: 'x' is not an index (expected a non-negative integer)");
    assert_read_error("1 1 1 1\n1 1 2.0 2\n", TH_TENSOR_READER_ERROR_NUMBER,
                      "t.tns:2: column 3: '2.0' is not an index (expected a non-negative integer)");
    assert_read_error("1 1\x01 1 1\n", TH_TENSOR_READER_ERROR_NUMBER,
                      "t.tns:1: column 2: '1\\x01' is not an index (expected a non-negative "
                      "integer)");
}

static void test_non_numeric_value(void **state)
{
    (void)state;
    assert_read_error("1 1 1 abc\n", TH_TENSOR_READER_ERROR_NUMBER,
                      "t.tns:1: column 4: 'abc' is not a number (expected a value such as 3, "
                      "-0.5 or 1e-3)");
    assert_read_error("1 1 1 1\n\n1 1 2 1e\n", TH_TENSOR_READER_ERROR_NUMBER,
                      "t.tns:3: column 4: '1e' is not a number (expected a value such as 3, "
                      "-0.5 or 1e-3)");
    assert_read_error("1 1 1,5\n", TH_TENSOR_READER_ERROR_NUMBER,
                      "t.tns:1: column 3: '1,5' is not a number (expected a value such as 3, "
                      "-0.5 or 1e-3)");
}

static void test_zero_index_in_one_based_file(void **state)
{
    (void)state;
    assert_read_error("# header\n1 0 1 1\n", TH_TENSOR_READER_ERROR_INDEX_RANGE,
                      "t.tns:2: column 2: index 0 in a 1-based file (.tns indices start at 1)");
}

static void test_index_beyond_32_bits(void **state)
{
    (void)state;
    assert_read_error("1 4294967296 1 1\n", TH_TENSOR_READER_ERROR_INDEX_RANGE,
                      "t.tns:1: column 2: index '4294967296' does not fit the 32-bit index "
                      "type (at most 4294967295 in a 1-based file)");
    assert_read_error("1 1 99999999999999999999999 1\n", TH_TENSOR_READER_ERROR_INDEX_RANGE,
                      "t.tns:1: column 3: index '99999999999999999999999' does not fit the "
                      "32-bit index type (at most 4294967295 in a 1-based file)");
    /* The largest index that fits still loads, as a dim of 2^32 - 1. */
    th_sptensor *t = read_ok("4294967295 1 1\n");
    assert_int_equal(t->dims[0], 4294967295u);
    assert_int_equal(t->indices[0][0], 4294967294u);
    th_sptensor_free(t);
}

static void test_negative_index(void **state)
{
    (void)state;
    assert_read_error("1 1 1 1\n2 -3 1 1\n", TH_TENSOR_READER_ERROR_INDEX_RANGE,
                      "t.tns:2: column 2: negative index '-3'");
}

static void test_nan_and_inf_values(void **state)
{
    (void)state;
    assert_read_error("1 1 1 nan\n", TH_TENSOR_READER_ERROR_VALUE,
                      "t.tns:1: column 4: value 'nan' is not finite");
    assert_read_error("1 1 1 1\n1 1 2 -Inf\n", TH_TENSOR_READER_ERROR_VALUE,
                      "t.tns:2: column 4: value '-Inf' is not finite");
    assert_read_error("1 1 1e999\n", TH_TENSOR_READER_ERROR_VALUE,
                      "t.tns:1: column 3: value '1e999' is not finite");
}

static void test_empty_input(void **state)
{
    (void)state;
    assert_read_error("", TH_TENSOR_READER_ERROR_EMPTY,
                      "t.tns:1: no nonzero found: the file is empty");
    assert_read_error("# only a comment\n\n   \n", TH_TENSOR_READER_ERROR_EMPTY,
                      "t.tns:3: no nonzero found: the file has only blank lines, comments and "
                      "headers");
}

static void test_order_out_of_range(void **state)
{
    (void)state;
    assert_read_error("\n1 5\n", TH_TENSOR_READER_ERROR_ORDER,
                      "t.tns:2: found 2 fields; a nonzero line needs at least 2 indices and a "
                      "value");
    GString *wide = g_string_new("");
    for (int i = 0; i < 65; ++i)
        g_string_append(wide, "1 ");
    g_string_append(wide, "1.0\n");
    assert_read_error(wide->str, TH_TENSOR_READER_ERROR_ORDER,
                      "t.tns:1: found 66 fields, that is 65 modes; tensorhost supports at most 64");
    g_string_free(wide, TRUE);
}

static void test_sptensor_header_errors(void **state)
{
    (void)state;
    assert_read_error("sptensor\nx\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:2: sptensor header: expected the order (number of modes) alone on "
                      "this line, found 'x'");
    assert_read_error("sptensor\n3 4\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:2: sptensor header: expected the order (number of modes) alone on "
                      "this line, found '3 4'");
    assert_read_error("sptensor\n1\n", TH_TENSOR_READER_ERROR_ORDER,
                      "t.tns:2: sptensor header: order 1 is out of range (2 to 64 modes)");
    assert_read_error("sptensor\n65\n", TH_TENSOR_READER_ERROR_ORDER,
                      "t.tns:2: sptensor header: order 65 is out of range (2 to 64 modes)");
    assert_read_error("sptensor\n3\n5 6\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:3: sptensor header: expected 3 dimensions (one per mode), found 2");
    assert_read_error("sptensor\n3\n5 0 2\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:3: sptensor header: dimension 2 is '0'; expected a size from 1 to "
                      "4294967295");
    assert_read_error("sptensor\n2\n5 4294967296\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:3: sptensor header: dimension 2 is '4294967296'; expected a size "
                      "from 1 to 4294967295");
    assert_read_error("sptensor\n2\n5 6\nmany\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:4: sptensor header: expected the number of nonzeros alone on this "
                      "line, found 'many'");
    assert_read_error("sptensor\n3\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:2: the file ends inside the sptensor header (expected the "
                      "dimensions)");
    assert_read_error("sptensor\n2\n3 3\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:3: the file ends inside the sptensor header (expected the number "
                      "of nonzeros)");
}

static void test_sptensor_count_mismatch(void **state)
{
    (void)state;
    assert_read_error("sptensor\n2\n3 3\n3\n0 0 1\n1 1 2\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:4: the sptensor header declares 3 nonzeros, but the file has 2");
    assert_read_error("sptensor\n2\n3 3\n1\n0 0 1\n1 1 2\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:4: the sptensor header declares 1 nonzeros, but the file has 2");
    assert_read_error("sptensor\n2\n3 3\n0\n", TH_TENSOR_READER_ERROR_EMPTY,
                      "t.tns:4: no nonzero found: the file has only blank lines, comments and "
                      "headers");
}

static void test_sptensor_index_errors(void **state)
{
    (void)state;
    assert_read_error("sptensor\n2\n3 3\n2\n0 0 1\n0 3 1\n", TH_TENSOR_READER_ERROR_INDEX_RANGE,
                      "t.tns:6: column 2: index 3 is out of range: the header gives mode 2 size "
                      "3 (indices 0 to 2)");
    assert_read_error("sptensor\n2\n3 4294967295\n1\n0 4294967295 1\n",
                      TH_TENSOR_READER_ERROR_INDEX_RANGE,
                      "t.tns:5: column 2: index '4294967295' does not fit the 32-bit index type "
                      "(at most 4294967294 in a 0-based file)");
    assert_read_error("sptensor\n2\n3 3\n1\n0 0 0 1\n", TH_TENSOR_READER_ERROR_COLUMNS,
                      "t.tns:5: expected 3 fields (2 indices and a value), found 4");
}

static void test_missing_file(void **state)
{
    (void)state;
    GError *error = NULL;
    g_autofree char *path = g_build_filename(temp_dir, "missing.tns", NULL);
    assert_null(th_tensor_read_file(path, NULL, &error));
    assert_true(g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO));
    g_autofree char *prefix = g_strdup_printf("%s: cannot open: ", path);
    assert_true(g_str_has_prefix(error->message, prefix));
    g_error_free(error);
}

static void test_corrupt_gzip(void **state)
{
    (void)state;
    g_autoptr(GBytes) gz = gzip_bytes("1 1 1 1.0\n2 2 2 2.0\n");
    gsize length = 0;
    const unsigned char *data = g_bytes_get_data(gz, &length);
    unsigned char *broken = g_memdup2(data, length);
    for (gsize i = 12; i < length - 8; ++i)
        broken[i] ^= 0x5a;
    g_autofree char *path = write_temp("broken.tns.gz", broken, length);
    g_free(broken);
    GError *error = NULL;
    assert_null(th_tensor_read_file(path, NULL, &error));
    assert_true(g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO));
    g_autofree char *prefix = g_strdup_printf("%s:1: cannot read: ", path);
    assert_true(g_str_has_prefix(error->message, prefix));
    g_error_free(error);
}

/* ---- good input ---------------------------------------------------------- */

static void test_comments_blanks_tabs_crlf(void **state)
{
    (void)state;
    th_sptensor *t = read_ok("# FROSTT-style comment\r\n"
                             "\r\n"
                             "1\t2 3  1.5 # trailing comment\r\n"
                             "   \t\r\n"
                             "2 1\t1\t-2.5e1\r\n"
                             "  # indented comment\n"
                             "2 2 2 +3E-2#glued comment\n"
                             "1 1 1 .5\n"
                             "1 1 2 7.\n"
                             "1 1 3 0"); /* no final newline */
    assert_int_equal(t->nmodes, 3);
    assert_int_equal(t->nnz, 6);
    assert_int_equal(t->lines_read, 6);
    assert_int_equal(t->dims[0], 2);
    assert_int_equal(t->dims[1], 2);
    assert_int_equal(t->dims[2], 3);
    /* Sorted, 0-based. */
    assert_entry(t, 0, (th_index[]){0, 0, 0}, 0.5);
    assert_entry(t, 1, (th_index[]){0, 0, 1}, 7.0);
    assert_entry(t, 2, (th_index[]){0, 0, 2}, 0.0); /* explicit zero kept */
    assert_entry(t, 3, (th_index[]){0, 1, 2}, 1.5);
    assert_entry(t, 4, (th_index[]){1, 0, 0}, -25.0);
    assert_entry(t, 5, (th_index[]){1, 1, 1}, 0.03);
    th_sptensor_free(t);
}

static void test_values_round_correctly(void **state)
{
    (void)state;
    static const char *const numbers[] = {
        "0.1", "0.3", "123456.789", "1e22", "1e23", "9007199254740993", "-0.0",
        "0.12345678901234567890123", "2.2250738585072014e-308", "4.9e-324",
        "1.7976931348623157e308", "0x1.8p1", "000123.4500", "6.02214076e23",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(numbers); ++i) {
        g_autofree char *line = g_strdup_printf("1 1 %s\n", numbers[i]);
        th_sptensor *t = read_ok(line);
        double expected = g_ascii_strtod(numbers[i], NULL);
        if (memcmp(&t->values[0], &expected, sizeof expected) != 0)
            fail_msg("%s read as %.17g, expected %.17g", numbers[i], t->values[0], expected);
        th_sptensor_free(t);
    }
}

static void test_duplicates_summed_and_counted(void **state)
{
    (void)state;
    th_sptensor *t = read_ok("3 1 2.0\n1 1 1.0\n3 1 0.5\n1 2 4.0\n3 1 0.25\n");
    assert_int_equal(t->nnz, 3);
    assert_int_equal(t->lines_read, 5);
    assert_int_equal(t->duplicates_merged, 2);
    assert_entry(t, 0, (th_index[]){0, 0}, 1.0);
    assert_entry(t, 1, (th_index[]){0, 1}, 4.0);
    assert_entry(t, 2, (th_index[]){2, 0}, 2.75);
    th_sptensor_free(t);
}

static void test_dims_from_largest_index_and_empty_slices(void **state)
{
    (void)state;
    th_sptensor *t = read_ok("1 1 5 1\n4 2 1 1\n");
    assert_int_equal(t->dims[0], 4);
    assert_int_equal(t->dims[1], 2);
    assert_int_equal(t->dims[2], 5);
    assert_int_equal(th_sptensor_empty_slices(t, 0), 2);
    assert_int_equal(th_sptensor_empty_slices(t, 1), 0);
    assert_int_equal(th_sptensor_empty_slices(t, 2), 3);
    th_sptensor_free(t);
}

static void test_sixteen_modes(void **state)
{
    (void)state;
    GString *text = g_string_new("# 16 modes\n");
    for (int line = 0; line < 3; ++line) {
        for (int m = 0; m < 16; ++m)
            g_string_append_printf(text, "%d ", m + 1 + line);
        g_string_append_printf(text, "%d.25\n", line);
    }
    th_sptensor *t = read_ok(text->str);
    g_string_free(text, TRUE);
    assert_int_equal(t->nmodes, 16);
    assert_int_equal(t->nnz, 3);
    for (uint32_t m = 0; m < 16; ++m) {
        assert_int_equal(t->dims[m], m + 3);
        for (uint32_t i = 0; i < 3; ++i)
            assert_int_equal(t->indices[m][i], m + i);
    }
    assert_true(t->values[2] == 2.25);
    th_sptensor_free(t);
}

static void test_sptensor_variant(void **state)
{
    (void)state;
    th_sptensor *t = read_ok("sptensor\n# comment\n3\n2 3 4\n2\n1 2 3 -1.0\n0 0 0 2\n");
    assert_int_equal(t->nmodes, 3);
    assert_int_equal(t->dims[0], 2);
    assert_int_equal(t->dims[1], 3);
    assert_int_equal(t->dims[2], 4); /* from the header, not from the indices */
    assert_entry(t, 0, (th_index[]){0, 0, 0}, 2.0);
    assert_entry(t, 1, (th_index[]){1, 2, 3}, -1.0);
    assert_int_equal(th_sptensor_empty_slices(t, 2), 2);
    th_sptensor_free(t);
}

static void test_real_aminoacid(void **state)
{
    (void)state;
    GError *error = NULL;
    th_sptensor *t =
        th_tensor_read_file(TH_TEST_DATA_DIR "/aminoacid.sptensor.txt", NULL, &error);
    assert_null(error);
    assert_int_equal(t->nmodes, 3);
    assert_int_equal(t->dims[0], 5);
    assert_int_equal(t->dims[1], 201);
    assert_int_equal(t->dims[2], 61);
    assert_int_equal(t->nnz, 61305);
    assert_int_equal(t->duplicates_merged, 0);
    assert_entry(t, 0, (th_index[]){0, 0, 0}, 0.858);
    th_sptensor_free(t);
}

static void progress_counter(uint64_t done, uint64_t total, void *user_data)
{
    uint64_t *calls = user_data;
    ++calls[0];
    calls[1] = done;
    calls[2] = total;
}

static void test_real_uber_gzip(void **state)
{
    (void)state;
    GError *error = NULL;
    uint64_t calls[3] = {0, 0, 0};
    th_tensor_read_options options = {.progress = progress_counter, .user_data = calls};
    th_sptensor *t =
        th_tensor_read_file(TH_TEST_DATA_DIR "/uber-2014-sample.tns.gz", &options, &error);
    assert_null(error);
    assert_int_equal(t->nmodes, 4);
    assert_int_equal(t->dims[0], 183);
    assert_int_equal(t->dims[1], 24);
    assert_int_equal(t->dims[2], 874);
    assert_int_equal(t->dims[3], 1247);
    /* The file has 353486 nonzero lines and no repeated coordinate. */
    assert_int_equal(t->nnz, 353486);
    assert_int_equal(t->lines_read, 353486);
    assert_int_equal(t->duplicates_merged, 0);
    assert_entry(t, 0, (th_index[]){0, 0, 375, 738}, 1.0);
    /* The final call reports completion (gzip: total known only at the end). */
    assert_true(calls[0] >= 1);
    assert_int_equal(calls[1], calls[2]);
    th_sptensor_free(t);
}

static void test_gzip_file_and_buffer(void **state)
{
    (void)state;
    const char *text = "# gz\n1 1 1 1.0\n2 3 1 2.5\n\n2 3 1 0.5\n";
    g_autoptr(GBytes) gz = gzip_bytes(text);
    gsize length = 0;
    const char *data = g_bytes_get_data(gz, &length);
    g_autofree char *path = write_temp("small.tns.gz", data, length);
    for (int from_buffer = 0; from_buffer < 2; ++from_buffer) {
        GError *error = NULL;
        th_sptensor *t = from_buffer ? th_tensor_read_buffer("b.gz", data, length, &error)
                                     : th_tensor_read_file(path, NULL, &error);
        assert_null(error);
        assert_int_equal(t->nnz, 2);
        assert_int_equal(t->duplicates_merged, 1);
        assert_entry(t, 1, (th_index[]){1, 2, 0}, 3.0);
        th_sptensor_free(t);
    }
    /* Errors inside gzip data carry line numbers too. */
    g_autoptr(GBytes) bad = gzip_bytes("1 1 1\n1 1 1\n1 1\n");
    GError *error = NULL;
    assert_null(th_tensor_read_buffer("bad.gz", g_bytes_get_data(bad, NULL), g_bytes_get_size(bad),
                                      &error));
    assert_string_equal(error->message,
                        "bad.gz:3: expected 3 fields (2 indices and a value), found 2");
    assert_int_equal(error->code, TH_TENSOR_READER_ERROR_COLUMNS);
    g_error_free(error);
}

/* cat a.gz b.gz is one valid gzip file; every member must be read. */
static void test_multi_member_gzip(void **state)
{
    (void)state;
    g_autoptr(GBytes) first = gzip_bytes("1 1 1.0\n2 2 2.0\n");
    g_autoptr(GBytes) second = gzip_bytes("3 3 3.0\n");
    GByteArray *both = g_byte_array_new();
    g_byte_array_append(both, g_bytes_get_data(first, NULL), (guint)g_bytes_get_size(first));
    g_byte_array_append(both, g_bytes_get_data(second, NULL), (guint)g_bytes_get_size(second));
    g_autofree char *path = write_temp("two-members.tns.gz", both->data, both->len);
    GError *error = NULL;
    th_sptensor *t = th_tensor_read_file(path, NULL, &error);
    assert_null(error);
    assert_int_equal(t->nnz, 3);
    assert_entry(t, 2, (th_index[]){2, 2}, 3.0);
    th_sptensor_free(t);
    /* Cut inside the second member's trailer: an error, not a silent short
     * read; its three lines were decoded, so the reader was at line 4. */
    g_autofree char *cut = write_temp("cut.tns.gz", both->data, both->len - 5);
    assert_null(th_tensor_read_file(cut, NULL, &error));
    g_autofree char *expected = g_strdup_printf(
        "%s:4: cannot read: gzip data ends too early (truncated file?)", cut);
    assert_string_equal(error->message, expected);
    assert_int_equal(error->code, TH_TENSOR_READER_ERROR_IO);
    g_error_free(error);
    g_byte_array_unref(both);
}

static void test_crlf_file_on_disk(void **state)
{
    (void)state;
    const char *text = "1 1 1\r\n2 2 2\r\nx 1 1\r\n";
    g_autofree char *path = write_temp("crlf.tns", text, strlen(text));
    GError *error = NULL;
    assert_null(th_tensor_read_file(path, NULL, &error));
    g_autofree char *expected = g_strdup_printf(
        "%s:3: column 1: 'x' is not an index (expected a non-negative integer)", path);
    assert_string_equal(error->message, expected);
    assert_int_equal(error->code, TH_TENSOR_READER_ERROR_NUMBER);
    g_error_free(error);
}

/* Large enough (> 2 x 16 MB) to be split among threads: line numbers must
 * stay absolute and the chunks' nonzeros must all arrive, in order. */
static void test_threaded_read_keeps_lines_and_data(void **state)
{
    (void)state;
    const uint64_t lines = 3000000;
    GString *text = g_string_sized_new(lines * 16);
    g_string_append(text, "# big\n");
    for (uint64_t i = 0; i < lines; ++i)
        g_string_append_printf(text, "%" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT
                               ".5\n", i / 1000 + 1, i % 1000 + 1, i % 7);
    g_autofree char *path = write_temp("big.tns", text->str, text->len);
    GError *error = NULL;
    uint64_t calls[3] = {0, 0, 0};
    th_tensor_read_options options = {.progress = progress_counter, .user_data = calls};
    th_sptensor *t = th_tensor_read_file(path, &options, &error);
    assert_null(error);
    assert_int_equal(t->nnz, lines);
    assert_int_equal(t->dims[0], 3000);
    assert_int_equal(t->dims[1], 1000);
    assert_int_equal(calls[1], text->len);
    assert_int_equal(calls[2], text->len);
    for (uint64_t i = 0; i < lines; i += 99991)
        assert_entry(t, i, (th_index[]){(th_index)(i / 1000), (th_index)(i % 1000)},
                     (double)(i % 7) + 0.5);
    th_sptensor_free(t);

    /* Break a line near the end (surely in the last chunk). */
    uint64_t bad_line = 2999990;
    const char *p = text->str;
    for (uint64_t l = 1; l < bad_line; ++l)
        p = strchr(p, '\n') + 1;
    text->str[p - text->str] = 'q';
    g_autofree char *bad_path = write_temp("big-bad.tns", text->str, text->len);
    assert_null(th_tensor_read_file(bad_path, NULL, &error));
    g_autofree char *prefix = g_strdup_printf("%s:%" G_GUINT64_FORMAT ": column 1: 'q", bad_path,
                                              bad_line);
    assert_true(g_str_has_prefix(error->message, prefix));
    g_error_free(error);
    g_string_free(text, TRUE);
}

static void test_write_round_trip(void **state)
{
    (void)state;
    th_sptensor *t = th_sptensor_new(3, 6);
    const double values[] = {0.1, -2.5, 1.0 / 3.0, 1e-300, 123456789.125, -0.0};
    for (uint64_t i = 0; i < 6; ++i) {
        t->indices[0][i] = (th_index)i;
        t->indices[1][i] = (th_index)(i * 1000);
        t->indices[2][i] = 4294967294u - (th_index)i;
        t->values[i] = values[i];
    }
    const char *names[] = {"out.tns", "out.tns.gz"};
    for (size_t n = 0; n < 2; ++n) {
        g_autofree char *path = g_build_filename(temp_dir, names[n], NULL);
        GError *error = NULL;
        assert_true(th_tensor_write_tns_full(t, path, "first\nsecond", &error));
        assert_null(error);
        th_sptensor *back = th_tensor_read_file(path, NULL, &error);
        assert_null(error);
        assert_int_equal(back->nnz, 6);
        for (uint64_t i = 0; i < 6; ++i) {
            for (uint32_t m = 0; m < 3; ++m)
                assert_int_equal(back->indices[m][i], t->indices[m][i]);
            assert_memory_equal(&back->values[i], &t->values[i], sizeof(double));
        }
        th_sptensor_free(back);
    }
    g_autofree char *plain = g_build_filename(temp_dir, "out.tns", NULL);
    g_autofree char *contents = NULL;
    assert_true(g_file_get_contents(plain, &contents, NULL, NULL));
    assert_true(g_str_has_prefix(contents, "# first\n# second\n1 1 4294967295 0.1\n2 1001 "
                                           "4294967294 -2.5\n"));
    /* No temporary file is left behind. */
    g_autoptr(GDir) dir = g_dir_open(temp_dir, 0, NULL);
    const char *name;
    while ((name = g_dir_read_name(dir)) != NULL)
        assert_null(strstr(name, ".tmp-"));
    /* A directory that does not exist: an error, no crash. */
    GError *error = NULL;
    assert_false(th_tensor_write_tns(t, "/nonexistent-dir/x.tns", &error));
    assert_true(g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO));
    assert_true(g_str_has_prefix(error->message, "/nonexistent-dir/x.tns: cannot create a "
                                                 "temporary file next to it: "));
    g_error_free(error);
    th_sptensor_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_too_few_columns),
        cmocka_unit_test(test_too_many_columns),
        cmocka_unit_test(test_column_count_wins_over_field_content),
        cmocka_unit_test(test_non_numeric_index),
        cmocka_unit_test(test_non_numeric_value),
        cmocka_unit_test(test_zero_index_in_one_based_file),
        cmocka_unit_test(test_index_beyond_32_bits),
        cmocka_unit_test(test_negative_index),
        cmocka_unit_test(test_nan_and_inf_values),
        cmocka_unit_test(test_empty_input),
        cmocka_unit_test(test_order_out_of_range),
        cmocka_unit_test(test_sptensor_header_errors),
        cmocka_unit_test(test_sptensor_count_mismatch),
        cmocka_unit_test(test_sptensor_index_errors),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_corrupt_gzip),
        cmocka_unit_test(test_comments_blanks_tabs_crlf),
        cmocka_unit_test(test_values_round_correctly),
        cmocka_unit_test(test_duplicates_summed_and_counted),
        cmocka_unit_test(test_dims_from_largest_index_and_empty_slices),
        cmocka_unit_test(test_sixteen_modes),
        cmocka_unit_test(test_sptensor_variant),
        cmocka_unit_test(test_real_aminoacid),
        cmocka_unit_test(test_real_uber_gzip),
        cmocka_unit_test(test_gzip_file_and_buffer),
        cmocka_unit_test(test_multi_member_gzip),
        cmocka_unit_test(test_crlf_file_on_disk),
        cmocka_unit_test(test_threaded_read_keeps_lines_and_data),
        cmocka_unit_test(test_write_round_trip),
    };
    return cmocka_run_group_tests(tests, make_temp_dir, remove_temp_dir);
}
