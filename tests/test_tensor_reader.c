/* The tensor reader: every malformed case (code, exact message, line) and the
 * good ones (comments, CRLF, gzip, sptensor, 16 modes, real data); hostile
 * input (byte-order marks, NUL bytes, endless lines, files that shrink while
 * mapped, interruption); the same result whatever the thread count; a
 * read that requires values >= 0 (the first negative line, also in gzip,
 * in parallel chunks and in binary files), and one bounded by a caller's
 * dims (the first line beyond them, likewise); writing to a descriptor. */
#define _DEFAULT_SOURCE /* ftruncate, mmap, fork */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <math.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cancel.h"
#include "output/report.h"
#include "base/sigbus_guard.h"
#include "tensor/tensor_binary.h"
#include "tensor/tensor_reader.h"
#include "tensor/tensor_writer.h"
#include "tensor/tns_header.h"

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
    /* Finite values whose sum, as repeated entries, is not. */
    assert_read_error("2 1 3 1e308\n1 1 1 1\n2 1 3 1e308\n", TH_TENSOR_READER_ERROR_VALUE,
                      "t.tns: the values given for coordinates 2 1 3 (1-based) sum to a number "
                      "beyond the range of a double; the tensor's repeated entries are added "
                      "together");
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
                      "t.tns:4: the sptensor header declares 1 nonzero, but the file has 2");
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

/* Large enough (45 MB, > 2 x TH_TENSOR_READER_MIN_BYTES_PER_THREAD) to be
 * split among threads by default: line numbers must stay absolute and the
 * chunks' nonzeros must all arrive, in order. */
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

/* An sptensor file whose header declares 1000 nonzeros (0-based lines
 * after it), mapped or gzip-compressed, with 100 bytes free: refused at
 * its header's count, before the lines are parsed. */
static void assert_declared_count_refused(gboolean gzip)
{
    GString *spt = g_string_new("sptensor\n3\n10 10 1000\n1000\n");
    for (uint32_t i = 0; i < 1000; ++i)
        g_string_append_printf(spt, "%u %u %u 2.0\n", i % 10, i / 10 % 10, i / 100);
    g_autoptr(GBytes) bytes = gzip ? gzip_bytes(spt->str) : g_bytes_new(spt->str, spt->len);
    gsize length = 0;
    const char *data = g_bytes_get_data(bytes, &length);
    g_autofree char *path =
        write_temp(gzip ? "declared.sptensor.txt.gz" : "declared.sptensor.txt", data, length);
    GError *error = NULL;
    g_setenv("TH_TEST_HOST_FREE_BYTES", "100", TRUE);
    assert_null(th_tensor_read_file(path, NULL, &error));
    g_unsetenv("TH_TEST_HOST_FREE_BYTES");
    assert_true(g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_MEMORY));
    g_autofree char *prefix =
        g_strdup_printf("%s:4: the sptensor header declares 1000 nonzeros, which need ", path);
    if (!g_str_has_prefix(error->message, prefix))
        fail_msg("message: %s", error->message);
    g_clear_error(&error);
    g_string_free(spt, TRUE);
}

/* A text file's arrays are asked of the host before it is parsed, as a
 * binary file's are: with far less free than its lines' density puts them
 * at, the read stops there, naming the file, the estimate, the need and
 * what is free; with exactly what the tensor needs free, it is read (the
 * estimate, over lines that lengthen through a sorted file, stays within
 * the margin); an sptensor file's estimate is its header's count; a
 * buffer (already in memory) is not asked. */
static void test_host_memory_asked_before_parsing(void **state)
{
    (void)state;
    const uint64_t n = 120000; /* ~2.7 MB: the density comes from windows spread over it */
    GString *text = g_string_new("# sorted: the lines lengthen\n");
    for (uint64_t i = 1; i <= n; ++i)
        g_string_append_printf(text, "%" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT
                               " %" G_GUINT64_FORMAT " 1.5\n", i, i * 7, i * 131);
    g_autofree char *path = write_temp("sorted.tns", text->str, text->len);
    const uint64_t need = n * (3 * sizeof(th_index) + sizeof(double));
    GError *error = NULL;

    g_autofree char *half = g_strdup_printf("%" G_GUINT64_FORMAT, need / 2);
    g_setenv("TH_TEST_HOST_FREE_BYTES", half, TRUE);
    th_sptensor *refused = th_tensor_read_file(path, NULL, &error);
    th_sptensor *from_buffer = th_tensor_read_buffer("buffer", text->str, text->len, NULL);
    g_autofree char *exact = g_strdup_printf("%" G_GUINT64_FORMAT, need);
    g_setenv("TH_TEST_HOST_FREE_BYTES", exact, TRUE);
    th_sptensor *read = th_tensor_read_file(path, NULL, NULL);
    g_unsetenv("TH_TEST_HOST_FREE_BYTES");

    assert_null(refused);
    assert_true(g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_MEMORY));
    g_autofree char *prefix = g_strdup_printf("%s: the density of its lines puts it at ", path);
    if (!g_str_has_prefix(error->message, prefix) ||
        !strstr(error->message, " nonzeros or more, which need ") ||
        !strstr(error->message, "is free (TH_TEST_HOST_FREE_BYTES)"))
        fail_msg("message: %s", error->message);
    g_clear_error(&error);
    assert_non_null(from_buffer);
    assert_int_equal(from_buffer->nnz, n);
    assert_non_null(read);
    assert_int_equal(read->nnz, n);
    th_sptensor_free(from_buffer);
    th_sptensor_free(read);
    g_string_free(text, TRUE);

    assert_declared_count_refused(FALSE);
}

/* A stream (here gzip) has no size ahead: its arrays grow within what the
 * host has free, and with far too little free the read stops at a growth,
 * naming the file and line, what the nonzeros read take and what is
 * free; with enough, it is read. An sptensor header's count is asked of
 * the host ahead, as for a mapped file. */
static void test_host_memory_guards_a_stream(void **state)
{
    (void)state;
    const uint64_t n = 5000, per_nonzero = 3 * sizeof(th_index) + sizeof(double);
    GString *text = g_string_new(NULL);
    for (uint64_t i = 0; i < n; ++i)
        g_string_append_printf(text, "%" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " 1 0.5\n",
                               i + 1, i % 7 + 1);
    g_autoptr(GBytes) gz = gzip_bytes(text->str);
    gsize length = 0;
    const char *data = g_bytes_get_data(gz, &length);
    g_autofree char *path = write_temp("stream.tns.gz", data, length);
    GError *error = NULL;

    /* Room for a thousand nonzeros: the first growth, past the first 1024, stops. */
    g_autofree char *little = g_strdup_printf("%" G_GUINT64_FORMAT, 1000 * per_nonzero);
    g_setenv("TH_TEST_HOST_FREE_BYTES", little, TRUE);
    th_sptensor *refused = th_tensor_read_file(path, NULL, &error);
    g_autofree char *ample = g_strdup_printf("%" G_GUINT64_FORMAT, 2 * n * per_nonzero);
    g_setenv("TH_TEST_HOST_FREE_BYTES", ample, TRUE);
    th_sptensor *read = th_tensor_read_file(path, NULL, NULL);
    g_unsetenv("TH_TEST_HOST_FREE_BYTES");

    assert_null(refused);
    assert_true(g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_MEMORY));
    g_autofree char *prefix =
        g_strdup_printf("%s:1025: the 1024 nonzeros read so far take ", path);
    if (!g_str_has_prefix(error->message, prefix) ||
        !strstr(error->message, "is free (TH_TEST_HOST_FREE_BYTES): too little to read on") ||
        !strstr(error->message, "the input is a stream"))
        fail_msg("message: %s", error->message);
    g_clear_error(&error);
    assert_non_null(read);
    assert_int_equal(read->nnz, n);
    th_sptensor_free(read);
    g_string_free(text, TRUE);

    assert_declared_count_refused(TRUE);
}

/* A stop request abandons a text write between blocks: no file, no
 * temporary file, and an existing file keeps its contents. */
static void test_write_stops_on_request(void **state)
{
    (void)state;
    const uint64_t n = 200000; /* some 4 MB of text: several blocks */
    th_sptensor *t = th_sptensor_new(3, n);
    for (uint64_t i = 0; i < n; ++i) {
        t->indices[0][i] = (th_index)(i % 1000);
        t->indices[1][i] = (th_index)(i / 1000);
        t->indices[2][i] = 7;
        t->values[i] = 1.0 / (double)(i + 1);
    }
    t->dims[0] = 1000, t->dims[1] = 200, t->dims[2] = 8;
    g_autofree char *dir = g_build_filename(temp_dir, "stopped", NULL);
    assert_int_equal(g_mkdir(dir, 0700), 0);
    g_autofree char *kept = g_build_filename(dir, "kept.tns", NULL);
    assert_true(g_file_set_contents(kept, "previous\n", -1, NULL));
    th_cancel_reset();
    th_cancel_request();
    GError *error = NULL;
    assert_false(th_tensor_write_tns(t, kept, &error));
    th_cancel_reset();
    assert_true(g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_CANCELLED));
    g_autofree char *expected =
        g_strdup_printf("%s: writing interrupted; the file was not written", kept);
    assert_string_equal(error->message, expected);
    g_clear_error(&error);
    g_autofree char *contents = NULL;
    assert_true(g_file_get_contents(kept, &contents, NULL, NULL));
    assert_string_equal(contents, "previous\n");
    g_autoptr(GDir) listing = g_dir_open(dir, 0, NULL);
    assert_string_equal(g_dir_read_name(listing), "kept.tns");
    assert_null(g_dir_read_name(listing));
    g_unlink(kept);
    g_rmdir(dir);
    th_sptensor_free(t);
}

static void test_write_round_trip(void **state)
{
    (void)state;
    th_sptensor *t = th_sptensor_new(3, 6);
    t->dims[0] = 6;
    t->dims[1] = 5001;
    t->dims[2] = 4294967295u;
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
    assert_true(g_str_has_prefix(contents, "# tensorhost header: 1.0\n"
                                           "# tensorhost dims: 6 5001 4294967295\n"
                                           "# first\n# second\n1 1 4294967295 0.1\n2 1001 "
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

/* ---- hostile input ------------------------------------------------------- */

static void assert_file_error(const char *path, int expected_code, const char *expected_suffix)
{
    GError *error = NULL;
    th_sptensor *t = th_tensor_read_file(path, NULL, &error);
    assert_null(t);
    assert_non_null(error);
    g_autofree char *expected = g_strdup_printf("%s%s", path, expected_suffix);
    assert_string_equal(error->message, expected);
    assert_int_equal(error->code, expected_code);
    g_error_free(error);
}

/* A UTF-8 byte-order mark (Windows editors write one) starts the text; it
 * is not part of the first field, whatever the path the bytes take. */
static void test_byte_order_mark_skipped(void **state)
{
    (void)state;
    const char *text = "\xef\xbb\xbf" "1 2 1.5\n2 1 2.5\n";
    th_sptensor *t = read_ok(text);
    assert_int_equal(t->nnz, 2);
    assert_entry(t, 0, (th_index[]){0, 1}, 1.5);
    th_sptensor_free(t);

    t = read_ok("\xef\xbb\xbf" "sptensor\n2\n3 3\n1\n0 2 4\n");
    assert_int_equal(t->dims[1], 3);
    assert_entry(t, 0, (th_index[]){0, 2}, 4.0);
    th_sptensor_free(t);

    /* Mapped file, gzip file, gzip buffer. */
    g_autofree char *plain = write_temp("bom.tns", text, strlen(text));
    g_autoptr(GBytes) gz = gzip_bytes(text);
    gsize gz_length = 0;
    const char *gz_data = g_bytes_get_data(gz, &gz_length);
    g_autofree char *gz_path = write_temp("bom.tns.gz", gz_data, gz_length);
    for (int way = 0; way < 3; ++way) {
        GError *error = NULL;
        t = way == 0   ? th_tensor_read_file(plain, NULL, &error)
            : way == 1 ? th_tensor_read_file(gz_path, NULL, &error)
                       : th_tensor_read_buffer("b.gz", gz_data, gz_length, &error);
        assert_null(error);
        assert_int_equal(t->nnz, 2);
        assert_entry(t, 1, (th_index[]){1, 0}, 2.5);
        th_sptensor_free(t);
    }

    /* Only at the start: elsewhere it is a character a field cannot hold,
     * and the message shows it, since it is invisible. */
    assert_read_error("1 1 1\n\xef\xbb\xbf" "1 1 1\n", TH_TENSOR_READER_ERROR_NUMBER,
                      "t.tns:2: column 1: '\\ufeff1' is not an index (expected a non-negative "
                      "integer)");
    assert_read_error("\xef\xbb\xbf", TH_TENSOR_READER_ERROR_EMPTY,
                      "t.tns:1: no nonzero found: the file has only blank lines, comments and "
                      "headers");
    /* Half a mark is no mark. */
    assert_read_error("\xef\xbb" "1 1 1\n", TH_TENSOR_READER_ERROR_NUMBER,
                      "t.tns:1: column 1: '\\xef\\xbb1' is not an index (expected a "
                      "non-negative integer)");
}

/* UTF-16 (as Windows tools write it) is refused as such, not as NUL bytes. */
static void test_utf16_refused(void **state)
{
    (void)state;
    static const char le[] = "\xff\xfe" "1\0 \0" "1\0 \0" "1\0\n\0";
    static const char be[] = "\xfe\xff" "\0" "1\0 \0" "1\0 \0" "1\0\n";
    GError *error = NULL;
    assert_null(th_tensor_read_buffer("t.tns", le, sizeof le - 1, &error));
    assert_string_equal(error->message, "t.tns:1: the file is UTF-16 text (it starts with the "
                                        "byte-order mark \\xff\\xfe); save it as UTF-8 or "
                                        "ASCII");
    assert_int_equal(error->code, TH_TENSOR_READER_ERROR_NOT_TEXT);
    g_clear_error(&error);
    g_autofree char *path = write_temp("utf16.tns", be, sizeof be - 1);
    assert_file_error(path, TH_TENSOR_READER_ERROR_NOT_TEXT,
                      ":1: the file is UTF-16 text (it starts with the byte-order mark "
                      "\\xfe\\xff); save it as UTF-8 or ASCII");
    /* A lone 0xff is no mark: an ordinary error. */
    assert_read_error("\xff", TH_TENSOR_READER_ERROR_ORDER,
                      "t.tns:1: found 1 field; a nonzero line needs at least 2 indices and a "
                      "value");
}

/* Invisible characters in quoted input are escaped, not shown as is. */
static void test_invisible_characters_escaped(void **state)
{
    (void)state;
    assert_read_error("1 1\xc2\xa0" "2 1\n", TH_TENSOR_READER_ERROR_NUMBER,
                      "t.tns:1: column 2: '1\\u00a02' is not an index (expected a non-negative "
                      "integer)");
    assert_read_error("1 1 \xe2\x80\xae" "5\n", TH_TENSOR_READER_ERROR_NUMBER,
                      "t.tns:1: column 3: '\\u202e5' is not a number (expected a value such as "
                      "3, -0.5 or 1e-3)");
    /* Visible non-ASCII text stays readable. */
    assert_read_error("1 1 \xc3\xa9t\xc3\xa9\n", TH_TENSOR_READER_ERROR_NUMBER,
                      "t.tns:1: column 3: '\xc3\xa9t\xc3\xa9' is not a number (expected a value "
                      "such as 3, -0.5 or 1e-3)");
}

/* Zeros written in the file and nonzero literals that round to 0.0 are kept
 * as stored entries and counted apart; subnormal values are neither. */
static void test_explicit_zeros_and_underflow_counted(void **state)
{
    (void)state;
    th_sptensor *t = read_ok("1 1 0\n"
                             "1 2 0.0\n"
                             "1 3 -0e5\n"
                             "1 4 00.000e-999\n"
                             "1 5 0x0p3\n"
                             "1 6 1e-400\n"
                             "1 7 -2e-324\n"
                             "1 8 0x1p-1100\n"
                             "1 9 4.9e-324\n"
                             "1 10 3e-324\n"
                             "1 11 1.5\n"
                             "1 1 0\n"); /* a duplicate: both lines count */
    assert_int_equal(t->nnz, 11);
    assert_int_equal(t->lines_read, 12);
    assert_int_equal(t->explicit_zeros, 6);
    assert_int_equal(t->underflowed_values, 3);
    for (uint64_t i = 0; i < 8; ++i)
        assert_true(t->values[i] == 0.0);
    assert_true(t->values[8] > 0.0 && t->values[9] > 0.0);

    /* The report's tensor node carries both counts. */
    th_tensor_facts facts;
    th_tensor_facts_of(t, &facts);
    JsonNode *node = th_report_tensor_node(&facts, "t.tns");
    JsonObject *o = json_node_get_object(node);
    assert_int_equal(json_object_get_int_member(o, "explicit_zeros"), 6);
    assert_int_equal(json_object_get_int_member(o, "underflowed_values"), 3);
    json_node_unref(node);
    th_sptensor_free(t);

    t = read_ok("1 1 1\n2 2 -7.25e-3\n");
    assert_int_equal(t->explicit_zeros, 0);
    assert_int_equal(t->underflowed_values, 0);
    th_sptensor_free(t);
}

/* The report's norm is the file's ||X||_F: values whose squares overflow
 * give a finite norm, and after the run's scaling into the safe range
 * (value_scale) still the file's units, not the scaled ones. */
static void test_report_norm_in_the_files_units(void **state)
{
    (void)state;
    th_sptensor *t = read_ok("1 1 3e200\n2 2 4e200\n");
    for (int scaled = 0; scaled < 2; ++scaled) {
        if (scaled)
            assert_true(th_sptensor_scale_to_safe_range(t));
        th_tensor_facts facts;
        th_tensor_facts_of(t, &facts);
        JsonNode *node = th_report_tensor_node(&facts, "t.tns");
        const double norm = json_object_get_double_member(json_node_get_object(node), "norm");
        if (!(fabs(norm / 5e200 - 1.0) < 1e-12))
            fail_msg("%s: report norm %g, the file's is 5e200", scaled ? "scaled" : "as read",
                     norm);
        json_node_unref(node);
    }
    th_sptensor_free(t);
}

/* "\v1.5" must not read as 1.5 (strtod skips leading white space). */
static void test_value_with_leading_control_character(void **state)
{
    (void)state;
    assert_read_error("1 1 \v1.5\n", TH_TENSOR_READER_ERROR_NUMBER,
                      "t.tns:1: column 3: '\\x0b1.5' is not a number (expected a value such as "
                      "3, -0.5 or 1e-3)");
    assert_read_error("1 1 \f2\n", TH_TENSOR_READER_ERROR_NUMBER,
                      "t.tns:1: column 3: '\\x0c2' is not a number (expected a value such as "
                      "3, -0.5 or 1e-3)");
}

static void test_nul_byte(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t length;
        const char *message;
    } cases[] = {
#define NUL_CASE(literal, message) {literal, sizeof literal - 1, message}
        NUL_CASE("1 1 1\n# comment\0 hidden\n2 2 2\n",
                 "t.tns:2: byte 10 of the line is a NUL byte: a tensor file is text (is this a "
                 "binary file?)"),
        NUL_CASE("1 1 1 # trailing\0\n",
                 "t.tns:1: byte 17 of the line is a NUL byte: a tensor file is text (is this a "
                 "binary file?)"),
        NUL_CASE("1 1 1\n1 1\0 1\n",
                 "t.tns:2: byte 4 of the line is a NUL byte: a tensor file is text (is this a "
                 "binary file?)"),
        NUL_CASE("1 1 1.0\0\n",
                 "t.tns:1: byte 8 of the line is a NUL byte: a tensor file is text (is this a "
                 "binary file?)"),
        NUL_CASE("\0\0\0\0",
                 "t.tns:1: byte 1 of the line is a NUL byte: a tensor file is text (is this a "
                 "binary file?)"),
        NUL_CASE("sptensor\n2 # order\0\n",
                 "t.tns:2: byte 10 of the line is a NUL byte: a tensor file is text (is this a "
                 "binary file?)"),
        NUL_CASE("# \0\n1 1 1\n",
                 "t.tns:1: byte 3 of the line is a NUL byte: a tensor file is text (is this a "
                 "binary file?)"),
#undef NUL_CASE
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); ++i) {
        GError *error = NULL;
        assert_null(th_tensor_read_buffer("t.tns", cases[i].text, cases[i].length, &error));
        assert_string_equal(error->message, cases[i].message);
        assert_int_equal(error->code, TH_TENSOR_READER_ERROR_NOT_TEXT);
        g_error_free(error);
    }
}

/* Old Mac line endings ("\r" alone) would otherwise join every line into
 * one nonzero of a high order. */
static void test_carriage_return_inside_line(void **state)
{
    (void)state;
    assert_read_error("1 1 1.0\r2 2 2.0\r3 3 3.0\r", TH_TENSOR_READER_ERROR_NOT_TEXT,
                      "t.tns:1: byte 8 of the line is a carriage return (\\r) inside the line: "
                      "lines end in \\n or \\r\\n (a file with old Mac line endings?)");
    assert_read_error("1 1 1.0\n2 2\r 2.0\n", TH_TENSOR_READER_ERROR_NOT_TEXT,
                      "t.tns:2: byte 4 of the line is a carriage return (\\r) inside the line: "
                      "lines end in \\n or \\r\\n (a file with old Mac line endings?)");
    /* In a comment it is harmless text. */
    th_sptensor *t = read_ok("# a\rb\r\n1 1 1\r\n");
    assert_int_equal(t->nnz, 1);
    th_sptensor_free(t);
}

/* A line of TH_TENSOR_MAX_LINE_BYTES is read; one byte more is an error at
 * once, on every input path. */
static void test_line_length_limit(void **state)
{
    (void)state;
    const size_t max = TH_TENSOR_MAX_LINE_BYTES;
    GString *text = g_string_new("1 1 1\n#");
    for (size_t i = 1; i < max; ++i)
        g_string_append_c(text, 'x');
    g_string_append(text, "\r\n2 2 2\n"); /* "\r\n" is not part of the line */
    th_sptensor *t = read_ok(text->str);
    assert_int_equal(t->nnz, 2);
    th_sptensor_free(t);

    g_string_insert_c(text, 8, 'x'); /* line 2 now has max + 1 bytes */
    char *expected_message = g_strdup_printf(
        "t.tns:2: the line is longer than %zu bytes, the most a line of a tensor file may take "
        "(is this a text tensor?)",
        max);
    assert_read_error(text->str, TH_TENSOR_READER_ERROR_NOT_TEXT, expected_message);
    g_free(expected_message);
    /* Unterminated at the end of the input, too. */
    g_string_truncate(text, 6 + max + 1);
    g_autofree char *suffix = g_strdup_printf(
        ":2: the line is longer than %zu bytes, the most a line of a tensor file may take (is "
        "this a text tensor?)",
        max);
    GError *error = NULL;
    assert_null(th_tensor_read_buffer("t.tns", text->str, text->len, &error));
    g_autofree char *expected_buffer = g_strdup_printf("t.tns%s", suffix);
    assert_string_equal(error->message, expected_buffer);
    g_clear_error(&error);

    /* Mapped, and streamed through gzip (where the line would have grown
     * the buffer without bound). */
    g_string_append(text, "\n");
    g_autofree char *plain = write_temp("long.tns", text->str, text->len);
    assert_file_error(plain, TH_TENSOR_READER_ERROR_NOT_TEXT, suffix);
    GString *huge = g_string_new("1 1 1\n");
    while (huge->len < ((size_t)12 << 20))
        g_string_append(huge, "1234567890 ");
    g_autoptr(GBytes) gz = gzip_bytes(huge->str);
    g_string_free(huge, TRUE);
    g_autofree char *gz_path = write_temp("long.tns.gz", g_bytes_get_data(gz, NULL),
                                          g_bytes_get_size(gz));
    assert_file_error(gz_path, TH_TENSOR_READER_ERROR_NOT_TEXT, suffix);
    g_string_free(text, TRUE);
}

/* /dev/zero as the tensor: an endless line of NUL bytes, streamed. */
static void test_endless_binary_stream(void **state)
{
    (void)state;
    if (!g_file_test("/dev/zero", G_FILE_TEST_EXISTS))
        skip();
    assert_file_error("/dev/zero", TH_TENSOR_READER_ERROR_NOT_TEXT,
                      ":1: byte 1 of the line is a NUL byte: a tensor file is text (is this a "
                      "binary file?)");
}

/* ---- files that shrink while mapped -------------------------------------- */

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* A file of three pages, mapped, then cut to one: reading the third page of
 * the mapping raises SIGBUS. */
static char *map_shrunk_file(const char *name, int *fd_out)
{
    size_t page = page_size();
    char *bytes = g_malloc(3 * page);
    memset(bytes, 'a', 3 * page);
    g_autofree char *path = write_temp(name, bytes, 3 * page);
    g_free(bytes);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    char *map = mmap(NULL, 3 * page, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(map != MAP_FAILED);
    assert_int_equal(ftruncate(fd, (off_t)page), 0);
    *fd_out = fd;
    return map;
}

typedef struct {
    const volatile char *at;
    char seen;
    gboolean completed;
    const char *range;
} byte_read;

static void read_one_byte(void *arg)
{
    byte_read *r = arg;
    r->seen = *r->at;
}

static gpointer guarded_read_thread(gpointer data)
{
    byte_read *r = data;
    r->completed = th_sigbus_guard_run(r->range, 3 * page_size(), read_one_byte, r);
    return NULL;
}

static void assert_same_sigbus_action(const struct sigaction *before)
{
    struct sigaction now;
    assert_int_equal(sigaction(SIGBUS, NULL, &now), 0);
    assert_true(now.sa_handler == before->sa_handler);
    assert_int_equal(now.sa_flags & SA_SIGINFO, before->sa_flags & SA_SIGINFO);
}

static void test_sigbus_guard(void **state)
{
    (void)state;
    struct sigaction before;
    assert_int_equal(sigaction(SIGBUS, NULL, &before), 0);
    int fd = -1;
    char *map = map_shrunk_file("guard.bin", &fd);
    size_t page = page_size();

    byte_read inside = {.at = map, .range = map};
    assert_true(th_sigbus_guard_run(map, 3 * page, read_one_byte, &inside));
    assert_int_equal(inside.seen, 'a');
    byte_read past_end = {.at = map + 2 * page, .range = map};
    assert_false(th_sigbus_guard_run(map, 3 * page, read_one_byte, &past_end));
    assert_same_sigbus_action(&before);

    /* Several threads at once, each recovering on its own. */
    enum { NTHREADS = 6 };
    byte_read reads[NTHREADS];
    GThread *threads[NTHREADS];
    for (int k = 0; k < NTHREADS; ++k) {
        reads[k] = (byte_read){.at = map + (k % 2 ? 2 : 1) * page + (size_t)k, .range = map,
                               .completed = TRUE};
        threads[k] = g_thread_new("guarded-read", guarded_read_thread, &reads[k]);
    }
    for (int k = 0; k < NTHREADS; ++k) {
        g_thread_join(threads[k]);
        assert_false(reads[k].completed);
    }
    assert_same_sigbus_action(&before);

    /* A fault outside the guarded range is not swallowed: it gets the
     * previous disposition (the child dies of it, or a sanitizer reports it). */
    fflush(NULL);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        signal(SIGBUS, SIG_DFL); /* not the test framework's handler */
        byte_read elsewhere = {.at = map + 2 * page};
        th_sigbus_guard_run(map, page, read_one_byte, &elsewhere);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_false(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    munmap(map, 3 * page);
    close(fd);
}

/* A file of at least `bytes`: one nonzero, comment lines (cheap to write
 * and to parse), another nonzero. Big enough for the reader's progress
 * calls (every 64 MB), which the tests use to act in the middle of a read. */
static GString *long_commented_text(size_t bytes)
{
    GString *text = g_string_sized_new(bytes + 64);
    g_string_append(text, "1 1 1.0\n");
    char line[1024];
    memset(line, 'c', sizeof line);
    line[0] = '#';
    line[sizeof line - 1] = '\n';
    while (text->len < bytes)
        g_string_append_len(text, line, sizeof line);
    g_string_append(text, "2 2 2.0\n");
    return text;
}

#define LONG_TEXT_BYTES ((size_t)72 << 20)

typedef struct {
    const char *path;
    int calls_in_the_middle;
} midway_action;

static void truncate_midway(uint64_t done, uint64_t total, void *user_data)
{
    midway_action *a = user_data;
    if (done < total && a->calls_in_the_middle++ == 0)
        assert_int_equal(truncate(a->path, 4096), 0);
}

/* Another process cuts the file while it is parsed: an error naming the
 * file, no crash. The cut happens from the progress callback, which the
 * parsing thread calls, so it lands deterministically in the middle of the
 * read (one thread: nothing is parsed elsewhere meanwhile). */
static void test_file_shrinks_while_read(void **state)
{
    (void)state;
    GString *text = long_commented_text(LONG_TEXT_BYTES);
    g_autofree char *path = write_temp("shrinks.tns", text->str, text->len);
    g_string_free(text, TRUE);
    struct sigaction before;
    assert_int_equal(sigaction(SIGBUS, NULL, &before), 0);

    midway_action action = {.path = path};
    th_tensor_read_options options = {.progress = truncate_midway, .user_data = &action};
    th_tensor_reader_set_threads(1);
    GError *error = NULL;
    th_sptensor *t = th_tensor_read_file(path, &options, &error);
    th_tensor_reader_set_threads(0);
    assert_null(t);
    assert_int_equal(action.calls_in_the_middle, 1);
    g_autofree char *expected = g_strdup_printf(
        "%s: the file shrank while it was read (truncated or rewritten by another process?); "
        "read it again once it is complete",
        path);
    assert_string_equal(error->message, expected);
    assert_int_equal(error->code, TH_TENSOR_READER_ERROR_IO);
    g_error_free(error);
    assert_same_sigbus_action(&before);
}

/* ---- interruption -------------------------------------------------------- */

static void cancel_midway(uint64_t done, uint64_t total, void *user_data)
{
    int *calls = user_data;
    if (total == 0 || done < total) {
        ++*calls;
        th_cancel_request();
    }
}

static void assert_cancelled(GError *error, const char *name, gboolean total_known)
{
    assert_non_null(error);
    assert_int_equal(error->code, TH_TENSOR_READER_ERROR_CANCELLED);
    g_autofree char *prefix = g_strdup_printf("%s: reading interrupted after ", name);
    assert_true(g_str_has_prefix(error->message, prefix));
    double done = -1.0, total = -1.0;
    const char *numbers = error->message + strlen(prefix);
    if (total_known) {
        assert_int_equal(sscanf(numbers, "%lf of %lf MB", &done, &total), 2);
        assert_true(total >= 75.0 && total <= 76.0); /* 72 MiB */
        assert_true(done < total);
    } else {
        assert_int_equal(sscanf(numbers, "%lf MB", &done), 1);
    }
    assert_true(done >= 64.0); /* stopped after the first progress call */
}

static void test_cancel_before_reading(void **state)
{
    (void)state;
    th_cancel_request();
    assert_read_error("1 1 1.5\n", TH_TENSOR_READER_ERROR_CANCELLED,
                      "t.tns: reading interrupted after 0 of 8 bytes");
    g_autoptr(GBytes) gz = gzip_bytes("1 1 1.5\n");
    g_autofree char *gz_path = write_temp("cancel.tns.gz", g_bytes_get_data(gz, NULL),
                                          g_bytes_get_size(gz));
    assert_file_error(gz_path, TH_TENSOR_READER_ERROR_CANCELLED,
                      ": reading interrupted after 0 bytes");
    th_cancel_reset();
    th_sptensor *t = read_ok("1 1 1.5\n");
    th_sptensor_free(t);
}

/* A request during the read stops it within a few MB, in the mapped and
 * the streamed path; the request comes from the progress callback, so it
 * lands in the middle of the read. */
static void test_cancel_while_reading(void **state)
{
    (void)state;
    GString *text = long_commented_text(LONG_TEXT_BYTES);
    g_autofree char *path = write_temp("cancel.tns", text->str, text->len);
    g_autoptr(GBytes) gz = gzip_bytes(text->str);
    g_string_free(text, TRUE);
    g_autofree char *gz_path = write_temp("cancel-long.tns.gz", g_bytes_get_data(gz, NULL),
                                          g_bytes_get_size(gz));
    for (int gzip = 0; gzip < 2; ++gzip) {
        int calls = 0;
        th_tensor_read_options options = {.progress = cancel_midway, .user_data = &calls};
        th_tensor_reader_set_threads(1);
        GError *error = NULL;
        th_sptensor *t = th_tensor_read_file(gzip ? gz_path : path, &options, &error);
        th_tensor_reader_set_threads(0);
        th_cancel_reset();
        assert_null(t);
        assert_int_equal(calls, 1);
        assert_cancelled(error, gzip ? gz_path : path, !gzip);
        g_error_free(error);
    }
}

/* ---- thread counts ------------------------------------------------------- */

static void assert_same_tensor(const th_sptensor *a, const th_sptensor *b)
{
    assert_int_equal(a->nmodes, b->nmodes);
    assert_int_equal(a->nnz, b->nnz);
    assert_int_equal(a->lines_read, b->lines_read);
    assert_int_equal(a->duplicates_merged, b->duplicates_merged);
    assert_int_equal(a->explicit_zeros, b->explicit_zeros);
    assert_int_equal(a->underflowed_values, b->underflowed_values);
    assert_memory_equal(a->dims, b->dims, a->nmodes * sizeof *a->dims);
    for (uint32_t m = 0; m < a->nmodes; ++m)
        assert_memory_equal(a->indices[m], b->indices[m], a->nnz * sizeof(th_index));
    assert_memory_equal(a->values, b->values, a->nnz * sizeof(double));
}

/* Lines of every kind the reader accepts, in a fixed pseudo-random mix:
 * comments, blanks, CRLF, duplicates, zeros, underflow, long mantissas. */
static GString *mixed_text(uint32_t lines, const char *header, int base)
{
    GRand *rand = g_rand_new_with_seed(7);
    GString *text = g_string_new(header);
    for (uint32_t l = 0; l < lines; ++l) {
        switch (g_rand_int_range(rand, 0, 10)) {
        case 0:
            g_string_append(text, "# a comment 1 2 3\n");
            break;
        case 1:
            g_string_append(text, " \t\r\n");
            break;
        default: {
            const char *const values[] = {"0", "1e-400", "0.1", "-2.5e-3",
                                          "0.12345678901234567890123", "7"};
            g_string_append_printf(text, "%d\t%d %d %s%s", base + g_rand_int_range(rand, 0, 20),
                                   base + g_rand_int_range(rand, 0, 9),
                                   base + g_rand_int_range(rand, 0, 30),
                                   values[g_rand_int_range(rand, 0, G_N_ELEMENTS(values))],
                                   g_rand_boolean(rand) ? "\r\n" : " # why\n");
        }
        }
    }
    g_rand_free(rand);
    return text;
}

static th_sptensor *read_with_options(uint32_t threads, const char *path, const GString *text,
                                      const th_tensor_read_options *options, GError **error)
{
    th_tensor_reader_set_threads(threads);
    th_sptensor *t =
        path != NULL ? th_tensor_read_file(path, options, error)
                     : th_tensor_read_buffer_full("t.tns", text->str, text->len, options, error);
    th_tensor_reader_set_threads(0);
    return t;
}

static const uint32_t thread_counts[] = {2, 3, 4, 7, 16, 64, 255, TH_TENSOR_READER_MAX_THREADS};

/* The same text read with every thread count gives the same tensor, or the
 * same error, as one thread does. */
static void assert_thread_count_invariant_with(const GString *text, const char *path,
                                               const th_tensor_read_options *options)
{
    GError *error1 = NULL;
    th_sptensor *one = read_with_options(1, path, text, options, &error1);
    for (size_t i = 0; i < G_N_ELEMENTS(thread_counts); ++i) {
        GError *error = NULL;
        th_sptensor *t = read_with_options(thread_counts[i], path, text, options, &error);
        if (one != NULL) {
            assert_null(error);
            assert_same_tensor(one, t);
            th_sptensor_free(t);
        } else {
            assert_null(t);
            assert_string_equal(error->message, error1->message);
            assert_int_equal(error->code, error1->code);
            g_error_free(error);
        }
    }
    th_sptensor_free(one);
    g_clear_error(&error1);
}

static void assert_thread_count_invariant(const GString *text, const char *path)
{
    assert_thread_count_invariant_with(text, path, NULL);
}

static void test_thread_count_does_not_change_result(void **state)
{
    (void)state;
    GString *text = mixed_text(5000, "\xef\xbb\xbf# mixed\n", 1);
    th_sptensor *t = read_ok(text->str);
    assert_true(t->explicit_zeros > 0 && t->underflowed_values > 0 && t->duplicates_merged > 0);
    th_sptensor_free(t);
    assert_thread_count_invariant(text, NULL);
    g_autofree char *path = write_temp("mixed.tns", text->str, text->len);
    assert_thread_count_invariant(text, path);

    /* Errors: the first bad line is reported, with its absolute number. */
    GString *bad = g_string_new(text->str);
    g_string_append(bad, "1 2 3 x\n");
    g_string_append(bad, text->str + 4); /* more lines after it, without the BOM */
    g_string_append(bad, "1 2\n");
    assert_thread_count_invariant(bad, NULL);
    GError *error = NULL;
    assert_null(th_tensor_read_buffer("t.tns", bad->str, bad->len, &error));
    assert_true(g_str_has_prefix(error->message, "t.tns:5002: column 4: 'x'"));
    g_clear_error(&error);

    /* An over-long line somewhere in the middle. */
    GString *long_line = g_string_new(text->str);
    g_string_append(long_line, "#");
    for (size_t i = 0; i < TH_TENSOR_MAX_LINE_BYTES + 100; ++i)
        g_string_append_c(long_line, 'x');
    g_string_append(long_line, "\n");
    g_string_append(long_line, text->str + 3);
    assert_thread_count_invariant(long_line, NULL);

    /* The sptensor variant: its header is read once, its count checked over
     * all chunks. */
    GString *spt = g_string_new("sptensor\n3\n20 9 30\n");
    g_autoptr(GString) body = mixed_text(2000, "", 0);
    uint64_t nonzero_lines = 0;
    for (const char *l = body->str; *l != '\0'; l = strchr(l, '\n') + 1)
        nonzero_lines += g_ascii_isdigit(*l) ? 1u : 0u;
    g_string_append_printf(spt, "%" G_GUINT64_FORMAT "\n%s", nonzero_lines, body->str);
    t = read_ok(spt->str);
    assert_int_equal(t->lines_read, nonzero_lines);
    th_sptensor_free(t);
    assert_thread_count_invariant(spt, NULL);

    /* A few lines and many threads: most chunks are empty. */
    GString *tiny = g_string_new("1 1 1\n2 2 2");
    assert_thread_count_invariant(tiny, NULL);

    g_string_free(tiny, TRUE);
    g_string_free(spt, TRUE);
    g_string_free(long_line, TRUE);
    g_string_free(bad, TRUE);
    g_string_free(text, TRUE);
}

/* ---- the tensorhost header (tns_header.h) --------------------------------- */

#define HEADER_1_0 "# tensorhost header: 1.0\n"

/* The header's dims are the tensor's, also past the largest index of a
 * mode, whatever the thread count; its label is the tensor's. */
static void test_tns_header_dims_and_label(void **state)
{
    (void)state;
    th_sptensor *t = read_ok(HEADER_1_0 "# tensorhost dims: 5 6 7\n"
                                        "# tensorhost label: synthetic tensor: a\\\\b\\tc\\x20\n"
                                        "1 1 1 1.0\n2 3 4 2.0\n");
    assert_int_equal(t->nmodes, 3);
    assert_int_equal(t->dims[0], 5);
    assert_int_equal(t->dims[1], 6);
    assert_int_equal(t->dims[2], 7);
    assert_string_equal(t->label, "synthetic tensor: a\\b\tc ");
    th_sptensor_free(t);

    /* Without the header: the largest indices, no label. */
    t = read_ok("# an ordinary comment\n# tensorhost rocks\n# tensorhost: x\n1 1 1 1.0\n"
                "2 3 4 2.0\n");
    assert_int_equal(t->dims[1], 3);
    assert_null(t->label);
    th_sptensor_free(t);

    /* Chunks after the first know the dims: an index beyond them, far into
     * the file, is found by whichever thread reads it. */
    GString *text = g_string_new(HEADER_1_0 "# tensorhost dims: 100 10\n");
    for (int i = 1; i <= 30000; ++i)
        g_string_append_printf(text, "%d %d 1.5\n", i % 100 + 1, i % 10 + 1);
    const uint32_t threads[] = {1, 3};
    for (size_t k = 0; k < G_N_ELEMENTS(threads); ++k) {
        th_tensor_reader_set_threads(threads[k]);
        t = read_ok(text->str);
        assert_int_equal(t->dims[0], 100);
        assert_int_equal(t->dims[1], 10);
        th_sptensor_free(t);
    }
    g_string_append(text, "5 11 1.0\n");
    for (size_t k = 0; k < G_N_ELEMENTS(threads); ++k) {
        th_tensor_reader_set_threads(threads[k]);
        assert_read_error(text->str, TH_TENSOR_READER_ERROR_INDEX_RANGE,
                          "t.tns:30003: column 2: index 11 is out of range: the tensorhost "
                          "header's dims (line 2) give mode 2 size 10 (indices 1 to 10)");
    }
    th_tensor_reader_set_threads(0);
    g_string_free(text, TRUE);
}

static void test_tns_header_errors(void **state)
{
    (void)state;
    assert_read_error(HEADER_1_0 "# tensorhost dims: 5 6 7\n1 1 1 1.0\n2 7 4 2.0\n",
                      TH_TENSOR_READER_ERROR_INDEX_RANGE,
                      "t.tns:4: column 2: index 7 is out of range: the tensorhost header's dims "
                      "(line 2) give mode 2 size 6 (indices 1 to 6)");
    assert_read_error(HEADER_1_0 "# tensorhost dims: 5 6\n1 1 1 1.0\n",
                      TH_TENSOR_READER_ERROR_COLUMNS,
                      "t.tns:3: expected 3 fields (2 indices and a value, as the tensorhost "
                      "header's dims on line 2 give 2 modes), found 4");
    assert_read_error("# tensorhost dims: 5 6\n" HEADER_1_0 "1 1 1.0\n",
                      TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:1: tensorhost header: 'dims:' comes before the header's first "
                      "line, '# tensorhost header: 1.0'");
    assert_read_error(HEADER_1_0 HEADER_1_0, TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:2: tensorhost header: a second 'header:' line (the first is line "
                      "1)");
    assert_read_error("# tensorhost header: 2.0\n1 1 1.0\n", TH_TENSOR_READER_ERROR_UNSUPPORTED,
                      "t.tns:1: tensorhost header: version 2.0 is not supported by this "
                      "reader, which reads versions 1.x (written by another tensorhost?)");
    assert_read_error("# tensorhost header: 1\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:1: tensorhost header: version '1' is not MAJOR.MINOR (e.g. 1.0)");
    assert_read_error("# tensorhost header: 1.0 beta\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:1: tensorhost header: version '1.0 beta' is not MAJOR.MINOR (e.g. "
                      "1.0)");
    assert_read_error(HEADER_1_0 "# tensorhost dims: 5 6\n# tensorhost dims: 5 6\n",
                      TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:3: tensorhost header: a second 'dims:' line (the first is line 2)");
    assert_read_error(HEADER_1_0 "# tensorhost dims: 5\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:2: tensorhost header: dims: expected 2 to 64 sizes (one per "
                      "mode), found 1");
    assert_read_error(HEADER_1_0 "# tensorhost dims: 5 0\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:2: tensorhost header: dims: size 2 is '0'; expected a size from 1 "
                      "to 4294967295");
    assert_read_error(HEADER_1_0 "# tensorhost dims: 4294967296 2\n",
                      TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:2: tensorhost header: dims: size 1 is '4294967296'; expected a "
                      "size from 1 to 4294967295");
    assert_read_error(HEADER_1_0 "# tensorhost dim: 5 6\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:2: tensorhost header: unknown key 'dim' (version 1.0 has header, "
                      "dims and label)");
    /* After the nonzeros (a cat of two files?) or inside an sptensor
     * header, a header line would change what was read: refused. */
    assert_read_error("1 1 1.0\n" HEADER_1_0, TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:2: a tensorhost header line ('# tensorhost KEY: ...') must come "
                      "before the nonzero lines and before an sptensor header");
    assert_read_error("sptensor\n" HEADER_1_0, TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:2: a tensorhost header line ('# tensorhost KEY: ...') must come "
                      "before the nonzero lines and before an sptensor header");
}

static void test_tns_header_label_errors(void **state)
{
    (void)state;
    assert_read_error(HEADER_1_0 "# tensorhost label:   \n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:2: tensorhost header: the label is empty (leave the line out for "
                      "none)");
    assert_read_error(HEADER_1_0 "# tensorhost label: a\\qb\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:2: tensorhost header: label: '\\q' is not an escape of a label "
                      "(\\\\, \\n, \\r, \\t and \\xHH are)");
    assert_read_error(HEADER_1_0 "# tensorhost label: a\\\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:2: tensorhost header: label: it ends in a lone backslash (write "
                      "\\\\ for one)");
    assert_read_error(HEADER_1_0 "# tensorhost label: a\\x00b\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:2: tensorhost header: label: \\x00: a label is text and holds no "
                      "NUL byte");
    assert_read_error(HEADER_1_0 "# tensorhost label: a\\xffb\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:2: tensorhost header: label: not UTF-8 text once its escapes are "
                      "decoded");
    assert_read_error(HEADER_1_0 "# tensorhost label: a\n# tensorhost label: b\n",
                      TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:3: tensorhost header: a second 'label:' line (the first is line 2)");
}

/* A later minor version's keys are skipped; its dims and label are read. */
static void test_tns_header_later_minor_version(void **state)
{
    (void)state;
    th_sptensor *t = read_ok("# tensorhost header: 1.7\n# tensorhost dims: 3 3\n"
                             "# tensorhost checksum: 1234\n# tensorhost label: x\n1 1 1.0\n");
    assert_int_equal(t->dims[0], 3);
    assert_string_equal(t->label, "x");
    th_sptensor_free(t);
}

/* A file an older tensorhost-synth wrote keeps its label: its first line. */
static void test_legacy_synthetic_label(void **state)
{
    (void)state;
    th_sptensor *t = read_ok("# synthetic tensor: tensorhost-synth dims=3x3 nnz=1 skew=0,0 "
                             "seed=1\n1 1 1.0\n");
    assert_string_equal(t->label, "synthetic tensor: tensorhost-synth dims=3x3 nnz=1 skew=0,0 "
                                  "seed=1");
    th_sptensor_free(t);
    /* Anywhere else it is a comment. */
    t = read_ok("# x\n# synthetic tensor: tensorhost-synth dims=3x3\n1 1 1.0\n");
    assert_null(t->label);
    th_sptensor_free(t);
}

/* Before an sptensor header, the label is read and the dims must agree. */
static void test_tns_header_with_sptensor(void **state)
{
    (void)state;
    th_sptensor *t = read_ok(HEADER_1_0 "# tensorhost dims: 3 4\n# tensorhost label: s\n"
                                        "sptensor\n2\n3 4\n1\n0 3 1.0\n");
    assert_int_equal(t->dims[1], 4);
    assert_string_equal(t->label, "s");
    th_sptensor_free(t);
    assert_read_error(HEADER_1_0 "# tensorhost dims: 3 4\nsptensor\n3\n",
                      TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:4: sptensor header: order 3 differs from the tensorhost header's "
                      "dims (line 2), which give 2 modes");
    assert_read_error(HEADER_1_0 "# tensorhost dims: 3 4\nsptensor\n2\n3 5\n",
                      TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:5: sptensor header: dimension 2 is 5, but the tensorhost header's "
                      "dims (line 2) give 4");
}

/* Escapes both ways give back every label, blanks at its ends included. */
static void test_label_escapes_round_trip(void **state)
{
    (void)state;
    const char *labels[] = {"plain", " lead and trail ", "a\\b\nc\rd\te\x01\x7f", "#x: y",
                            "\xc3\xa9t\xc3\xa9", "\\x41"};
    for (size_t i = 0; i < G_N_ELEMENTS(labels); ++i) {
        g_autofree char *escaped = th_tns_label_escape(labels[i]);
        assert_null(strpbrk(escaped, "\n\r\t"));
        g_autofree char *problem = NULL;
        g_autofree char *back = th_tns_label_unescape(escaped, strlen(escaped), &problem);
        assert_null(problem);
        assert_string_equal(back, labels[i]);
    }
    /* The longest label a binary note takes; one byte more is refused. */
    g_autofree char *longest = g_strnfill(TH_TNS_MAX_LABEL_BYTES, 'a');
    g_autofree char *problem = NULL;
    g_autofree char *kept = th_tns_label_unescape(longest, TH_TNS_MAX_LABEL_BYTES, &problem);
    assert_non_null(kept);
    g_autofree char *too_long = g_strnfill(TH_TNS_MAX_LABEL_BYTES + 1u, 'a');
    assert_null(th_tns_label_unescape(too_long, TH_TNS_MAX_LABEL_BYTES + 1u, &problem));
    assert_string_equal(problem, "65537 bytes, more than the 65536 a label may take");
}

/* The writer's header gives the reader back the dims and the label; an
 * index beyond the dims is refused before a contradicting file is
 * written. */
static void test_write_keeps_dims_and_label(void **state)
{
    (void)state;
    th_sptensor *t = th_sptensor_new(2, 2);
    t->dims[0] = 10;
    t->dims[1] = 20;
    t->indices[0][0] = 0, t->indices[1][0] = 1, t->values[0] = 1.0;
    t->indices[0][1] = 2, t->indices[1][1] = 3, t->values[1] = 2.0;
    t->label = g_strdup("synthetic tensor: tensorhost-synth dims=10x20 \\ \n end");
    const char *names[] = {"dims.tns", "dims.tns.gz"};
    for (size_t n = 0; n < G_N_ELEMENTS(names); ++n) {
        g_autofree char *path = g_build_filename(temp_dir, names[n], NULL);
        GError *error = NULL;
        assert_true(th_tensor_write_tns(t, path, &error));
        th_sptensor *back = th_tensor_read_file(path, NULL, &error);
        if (back == NULL)
            fail_msg("%s", error->message);
        assert_int_equal(back->dims[0], 10);
        assert_int_equal(back->dims[1], 20);
        assert_string_equal(back->label, t->label);
        th_sptensor_free(back);
    }
    g_autofree char *plain = g_build_filename(temp_dir, "dims.tns", NULL);
    g_autofree char *contents = NULL;
    assert_true(g_file_get_contents(plain, &contents, NULL, NULL));
    assert_string_equal(contents, "# tensorhost header: 1.0\n"
                                  "# tensorhost dims: 10 20\n"
                                  "# tensorhost label: synthetic tensor: tensorhost-synth "
                                  "dims=10x20 \\\\ \\n end\n"
                                  "1 2 1\n3 4 2\n");

    t->dims[1] = 3;
    GError *error = NULL;
    g_autofree char *refused = g_build_filename(temp_dir, "refused.tns", NULL);
    assert_false(th_tensor_write_tns(t, refused, &error));
    g_autofree char *expected = g_strdup_printf(
        "%s: cannot write: nonzero 2: mode 2 index 4 (1-based) is beyond the tensor's mode "
        "size 3",
        refused);
    assert_string_equal(error->message, expected);
    g_error_free(error);
    assert_false(g_file_test(refused, G_FILE_TEST_EXISTS));
    th_sptensor_free(t);
}

/* A huge sptensor count is reported as written, on its line: past what the
 * reader takes; past what the rest of the file can hold; past the host's
 * memory (a stream, whose size is not known ahead); or, from memory, as
 * the count the file does not have. */
static void test_sptensor_huge_count(void **state)
{
    (void)state;
    assert_read_error("sptensor\n2\n3 3\n99999999999999999999\n0 0 1\n",
                      TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:4: sptensor header: 99999999999999999999 nonzeros are more than "
                      "tensorhost reads (at most 1099511627775)");
    assert_read_error("sptensor\n2\n3 3\n4294967296\n0 0 1\n", TH_TENSOR_READER_ERROR_HEADER,
                      "t.tns:4: the sptensor header declares 4294967296 nonzeros, but the file "
                      "has 1");
    const char *text = "sptensor\n2\n3 3\n4294967296\n0 0 1\n";
    g_autofree char *path = write_temp("huge.sptensor.txt", text, strlen(text));
    g_autoptr(GBytes) gz = gzip_bytes(text);
    gsize length = 0;
    const char *data = g_bytes_get_data(gz, &length);
    g_autofree char *gz_path = write_temp("huge.sptensor.txt.gz", data, length);
    GError *error = NULL, *gz_error = NULL;
    g_setenv("TH_TEST_HOST_FREE_BYTES", "1048576", TRUE);
    assert_null(th_tensor_read_file(path, NULL, &error));
    assert_null(th_tensor_read_file(gz_path, NULL, &gz_error));
    g_unsetenv("TH_TEST_HOST_FREE_BYTES");
    g_autofree char *expected = g_strdup_printf(
        "%s:4: the sptensor header declares 4294967296 nonzeros, but the 6 bytes after it can "
        "hold at most 1 nonzero line",
        path);
    assert_string_equal(error->message, expected);
    assert_int_equal(error->code, TH_TENSOR_READER_ERROR_HEADER);
    g_autofree char *gz_expected = g_strdup_printf(
        "%s:4: the sptensor header declares 4294967296 nonzeros, which need 64.0 GiB of "
        "memory for their arrays, and 1.0 MiB is free (TH_TEST_HOST_FREE_BYTES)",
        gz_path);
    assert_string_equal(gz_error->message, gz_expected);
    assert_int_equal(gz_error->code, TH_TENSOR_READER_ERROR_MEMORY);
    g_error_free(error);
    g_error_free(gz_error);
}

/* ---- values >= 0 (require_nonnegative) ----------------------------------- */

#define POISSON_REASON "the Poisson model needs counts >= 0"

static const th_tensor_read_options nonnegative = {
    .require_nonnegative = TRUE,
    .nonnegative_reason = POISSON_REASON,
};

static th_sptensor *read_nonnegative(const char *text, const th_tensor_read_options *options,
                                     GError **error)
{
    return th_tensor_read_buffer_full("t.tns", text, strlen(text), options, error);
}

static void assert_nonnegative_error(const char *text, int expected_code,
                                     const char *expected_message)
{
    GError *error = NULL;
    assert_null(read_nonnegative(text, &nonnegative, &error));
    assert_non_null(error);
    assert_true(error->domain == TH_TENSOR_READER_ERROR);
    assert_string_equal(error->message, expected_message);
    assert_int_equal(error->code, expected_code);
    g_error_free(error);
}

static th_sptensor *read_nonnegative_ok(const char *text)
{
    GError *error = NULL;
    th_sptensor *t = read_nonnegative(text, &nonnegative, &error);
    if (error != NULL)
        fail_msg("unexpected error: %s", error->message);
    assert_non_null(t);
    return t;
}

/* The first negative value in file order is the error, on its line: comment
 * and blank lines count; the value as written. */
static void test_negative_value_names_its_line(void **state)
{
    (void)state;
    const char *text = "# counts\n\n1 1 1 2\n   # indented comment\n\t\n2 1 2 -3 # here\n"
                       "1 2 2 -4\n";
    assert_nonnegative_error(text, TH_TENSOR_READER_ERROR_VALUE,
                             "t.tns:6: column 4: value '-3' is negative: " POISSON_REASON);
    /* The first nonzero line (which fixes the order), CRLF, other spellings. */
    assert_nonnegative_error("1 1 -1.5e2\r\n", TH_TENSOR_READER_ERROR_VALUE,
                             "t.tns:1: column 3: value '-1.5e2' is negative: " POISSON_REASON);
    assert_nonnegative_error("1 1 1\n1 2 -0x1p-3\n", TH_TENSOR_READER_ERROR_VALUE,
                             "t.tns:2: column 3: value '-0x1p-3' is negative: " POISSON_REASON);
    assert_nonnegative_error("1 1 1\n1 2 -0.12345678901234567890123\n",
                             TH_TENSOR_READER_ERROR_VALUE,
                             "t.tns:2: column 3: value '-0.12345678901234567890123' is "
                             "negative: " POISSON_REASON);
    /* The 0-based variant: lines of its header count. */
    assert_nonnegative_error("sptensor\n2\n3 3\n2\n0 0 1\n2 2 -7\n", TH_TENSOR_READER_ERROR_VALUE,
                             "t.tns:6: column 3: value '-7' is negative: " POISSON_REASON);
    /* A line wrong in another way says that, as without the option. */
    assert_nonnegative_error("1 1 1 1\n1 1 -3\n", TH_TENSOR_READER_ERROR_COLUMNS,
                             "t.tns:2: expected 4 fields (3 indices and a value), found 3");
    assert_nonnegative_error("1 1 1 1\n1 1 1 -3 4\n", TH_TENSOR_READER_ERROR_COLUMNS,
                             "t.tns:2: expected 4 fields (3 indices and a value), found 5");
    assert_nonnegative_error("1 1 1 -inf\n", TH_TENSOR_READER_ERROR_VALUE,
                             "t.tns:1: column 4: value '-inf' is not finite");
    assert_nonnegative_error("1 1 1 -x\n", TH_TENSOR_READER_ERROR_NUMBER,
                             "t.tns:1: column 4: '-x' is not a number (expected a value such as "
                             "3, -0.5 or 1e-3)");
    /* A line the read without the option takes (a carriage return in its
     * comment) is refused for its value only. */
    th_sptensor *t = read_ok("1 1 -3 # a\rb\n");
    th_sptensor_free(t);
    assert_nonnegative_error("1 1 -3 # a\rb\n", TH_TENSOR_READER_ERROR_VALUE,
                             "t.tns:1: column 3: value '-3' is negative: " POISSON_REASON);
    /* Duplicates are refused one by one, before they are summed. */
    assert_nonnegative_error("1 1 5\n1 1 -2\n", TH_TENSOR_READER_ERROR_VALUE,
                             "t.tns:2: column 3: value '-2' is negative: " POISSON_REASON);
    /* No reason given: a plain one. */
    const th_tensor_read_options plain = {.require_nonnegative = TRUE};
    GError *error = NULL;
    assert_null(read_nonnegative("1 1 1\n2 2 -1\n", &plain, &error));
    assert_string_equal(error->message,
                        "t.tns:2: column 3: value '-1' is negative: values must be >= 0");
    g_clear_error(&error);
}

/* Negative zero is zero: "-0", "-0.0e7", and a negative literal that
 * underflows to -0.0, are accepted (and counted as before). */
static void test_negative_zero_is_not_negative(void **state)
{
    (void)state;
    th_sptensor *t = read_nonnegative_ok("1 1 -0\n1 2 -0.0e7\n2 1 -1e-400\n2 2 3\n");
    assert_int_equal(t->nnz, 4);
    assert_int_equal(t->explicit_zeros, 2);
    assert_int_equal(t->underflowed_values, 1);
    for (uint64_t k = 0; k < t->nnz; ++k)
        assert_false(t->values[k] < 0.0);
    th_sptensor_free(t);
}

/* Without the option (or with options but not it), negative values are
 * read as always. */
static void test_negative_values_accepted_when_not_required(void **state)
{
    (void)state;
    const char *text = "1 1 1 2\n2 1 2 -3\n";
    th_sptensor *t = read_ok(text);
    assert_entry(t, 1, (const th_index[]){1, 0, 1}, -3.0);
    th_sptensor_free(t);
    const th_tensor_read_options off = {.nonnegative_reason = POISSON_REASON};
    GError *error = NULL;
    t = read_nonnegative(text, &off, &error);
    assert_null(error);
    assert_entry(t, 1, (const th_index[]){1, 0, 1}, -3.0);
    th_sptensor_free(t);
    g_autofree char *path = write_temp("negative.tns", text, strlen(text));
    t = th_tensor_read_file(path, &off, &error);
    assert_null(error);
    assert_int_equal(t->nnz, 2);
    th_sptensor_free(t);
}

/* Nonnegative lines (comments and blanks among them) with negative values
 * on the given lines (1-based; ascending). */
static GString *counts_text(uint32_t lines, const uint32_t *negative_lines, size_t nnegative)
{
    GString *text = g_string_new(NULL);
    size_t next = 0;
    for (uint32_t l = 1; l <= lines; ++l) {
        if (next < nnegative && negative_lines[next] == l) {
            g_string_append_printf(text, "%u 2 3 -%u\n", l % 17u + 1u, l);
            ++next;
        } else if (l % 10u == 3u) {
            g_string_append(text, "# a comment -1 -2\n");
        } else if (l % 10u == 7u) {
            g_string_append(text, "\n");
        } else {
            g_string_append_printf(text, "%u %u %u %u.5\r\n", l % 17u + 1u, l % 5u + 1u,
                                   l % 11u + 1u, l % 9u);
        }
    }
    return text;
}

/* Split among threads, the earliest negative line is reported, whatever the
 * chunks: one in the middle of the second quarter wins over others at the
 * start of the third and fourth, which their own threads meet first. */
static void test_earliest_negative_line_wins_in_parallel(void **state)
{
    (void)state;
    const uint32_t lines = 40000;
    const uint32_t negatives[] = {15001, 20002, 30001, 39999};
    GString *text = counts_text(lines, negatives, G_N_ELEMENTS(negatives));
    const char *expected = "column 4: value '-15001' is negative: " POISSON_REASON;
    for (uint32_t threads = 1; threads <= 8; threads *= 2) {
        GError *error = NULL;
        assert_null(read_with_options(threads, NULL, text, &nonnegative, &error));
        g_autofree char *message = g_strdup_printf("t.tns:15001: %s", expected);
        assert_string_equal(error->message, message);
        g_clear_error(&error);
    }
    assert_thread_count_invariant_with(text, NULL, &nonnegative);
    g_autofree char *path = write_temp("negatives.tns", text->str, text->len);
    assert_thread_count_invariant_with(text, path, &nonnegative);
    GError *error = NULL;
    assert_null(read_with_options(4, path, NULL, &nonnegative, &error));
    g_autofree char *message = g_strdup_printf("%s:15001: %s", path, expected);
    assert_string_equal(error->message, message);
    g_clear_error(&error);

    /* The same lines without negatives: the same tensor as without the
     * option, whatever the thread count. */
    GString *clean = counts_text(lines, NULL, 0);
    th_sptensor *plain = read_with_options(1, NULL, clean, NULL, &error);
    assert_non_null(plain);
    for (size_t i = 0; i < G_N_ELEMENTS(thread_counts); ++i) {
        th_sptensor *t = read_with_options(thread_counts[i], NULL, clean, &nonnegative, &error);
        assert_null(error);
        assert_same_tensor(plain, t);
        th_sptensor_free(t);
    }
    th_sptensor_free(plain);
    g_string_free(clean, TRUE);
    g_string_free(text, TRUE);
}

/* A gzip file (one stream, one thread) and a gzip buffer: the same line. */
static void test_negative_value_in_gzip(void **state)
{
    (void)state;
    const uint32_t negatives[] = {1234, 5000};
    GString *text = counts_text(6000, negatives, G_N_ELEMENTS(negatives));
    g_autoptr(GBytes) gz = gzip_bytes(text->str);
    gsize length = 0;
    const char *data = g_bytes_get_data(gz, &length);
    g_autofree char *path = write_temp("negatives.tns.gz", data, length);
    GError *error = NULL;
    assert_null(th_tensor_read_file(path, &nonnegative, &error));
    g_autofree char *message = g_strdup_printf(
        "%s:1234: column 4: value '-1234' is negative: " POISSON_REASON, path);
    assert_string_equal(error->message, message);
    assert_int_equal(error->code, TH_TENSOR_READER_ERROR_VALUE);
    g_clear_error(&error);
    assert_null(th_tensor_read_buffer_full("b.gz", data, length, &nonnegative, &error));
    assert_string_equal(error->message,
                        "b.gz:1234: column 4: value '-1234' is negative: " POISSON_REASON);
    g_clear_error(&error);
    th_sptensor *t = th_tensor_read_file(path, NULL, &error); /* option off */
    assert_null(error);
    th_sptensor_free(t);
    g_string_free(text, TRUE);
}

/* A binary tensor names the nonzero (1-based, in file order) and its
 * coordinates; the earliest wins over every chunk and thread count. */
static void test_negative_value_in_binary(void **state)
{
    (void)state;
    const uint64_t nnz = 100000;
    g_autoptr(th_sptensor) t = th_sptensor_new(3, nnz);
    for (uint32_t m = 0; m < 3; ++m)
        t->dims[m] = 1000;
    for (uint64_t k = 0; k < nnz; ++k) { /* sorted, distinct */
        t->indices[0][k] = (th_index)(k / 1000u);
        t->indices[1][k] = (th_index)(k % 1000u);
        t->indices[2][k] = (th_index)(k % 7u);
        t->values[k] = (double)(k % 5u);
    }
    t->values[10] = -0.0;
    g_autofree char *clean = g_build_filename(temp_dir, "clean.tnsb", NULL);
    GError *error = NULL;
    assert_true(th_tensor_binary_write(clean, t, &error));
    th_sptensor *back = th_tensor_read_file(clean, &nonnegative, &error);
    assert_null(error);
    assert_int_equal(back->nnz, nnz);
    th_sptensor_free(back);

    t->values[70001] = -2.0;
    t->values[9000] = -3.0;
    t->values[99999] = -1.0;
    g_autofree char *path = g_build_filename(temp_dir, "negative.tnsb", NULL);
    assert_true(th_tensor_binary_write(path, t, &error));
    g_autofree char *expected = g_strdup_printf(
        "%s: nonzero 9001 of 100000 at (10, 1, 6) (1-based): value -3 is negative: "
        POISSON_REASON, path);
    const uint32_t threads[] = {0, 1, 2, 3, 8};
    for (size_t i = 0; i < G_N_ELEMENTS(threads); ++i) {
        th_tensor_binary_set_threads(threads[i]);
        assert_null(th_tensor_read_file(path, &nonnegative, &error));
        th_tensor_binary_set_threads(0);
        assert_string_equal(error->message, expected);
        assert_int_equal(error->code, TH_TENSOR_READER_ERROR_VALUE);
        g_clear_error(&error);
    }
    /* From memory, too. */
    g_autofree char *contents = NULL;
    gsize length = 0;
    assert_true(g_file_get_contents(path, &contents, &length, NULL));
    assert_null(th_tensor_read_buffer_full("b.tnsb", contents, length, &nonnegative, &error));
    assert_true(g_str_has_prefix(error->message, "b.tnsb: nonzero 9001 of 100000 at"));
    g_clear_error(&error);
    /* Option off: read as always. */
    back = th_tensor_read_file(path, NULL, &error);
    assert_null(error);
    assert_true(back->values[9000] == -3.0);
    th_sptensor_free(back);
}

/* ---- coordinates bounded by a caller's dims (bound_dims) ------------------ */

static const th_index model_dims[] = {4, 3, 5};

static const th_tensor_read_options bounded = {
    .bound_dims = model_dims,
    .bound_nmodes = 3,
    .bound_owner = "the model in m",
};

static void assert_bounded_error(const char *text, const char *expected_message)
{
    GError *error = NULL;
    assert_null(th_tensor_read_buffer_full("t.tns", text, strlen(text), &bounded, &error));
    assert_non_null(error);
    assert_string_equal(error->message, expected_message);
    assert_int_equal(error->code, TH_TENSOR_READER_ERROR_INDEX_RANGE);
    g_error_free(error);
}

/* The first index beyond the bound, in file order, is named on its line with
 * its mode; the file's own dims, when smaller, keep their message. */
static void test_bound_names_the_line_and_mode(void **state)
{
    (void)state;
    assert_bounded_error("# entries\n1 1 1 0\n\n4 3 5 1\n2 4 1 0\n5 1 1 0\n",
                         "t.tns:5: column 2: index 4 is out of range: the model in m has mode "
                         "2 size 3 (indices 1 to 3)");
    /* 0-based: the message counts from 0. */
    assert_bounded_error("sptensor\n3\n9 9 9\n2\n0 0 0 1\n0 0 5 1\n",
                         "t.tns:6: column 3: index 5 is out of range: the model in m has mode "
                         "3 size 5 (indices 0 to 4)");
    /* The tensorhost header's dims, smaller than the bound, say it first. */
    assert_bounded_error("# tensorhost header: 1.0\n# tensorhost dims: 2 3 5\n3 1 1 1\n",
                         "t.tns:3: column 1: index 3 is out of range: the tensorhost header's "
                         "dims (line 2) give mode 1 size 2 (indices 1 to 2)");
    /* ... and larger ones leave it to the bound. */
    assert_bounded_error("# tensorhost header: 1.0\n# tensorhost dims: 9 9 9\n1 1 6 1\n",
                         "t.tns:3: column 3: index 6 is out of range: the model in m has mode "
                         "3 size 5 (indices 1 to 5)");
    /* No owner given: a plain one. */
    const th_tensor_read_options plain = {.bound_dims = model_dims, .bound_nmodes = 3};
    GError *error = NULL;
    assert_null(th_tensor_read_buffer_full("t.tns", "5 1 1 1\n", 8, &plain, &error));
    assert_string_equal(error->message, "t.tns:1: column 1: index 5 is out of range: the given "
                                        "bound has mode 1 size 4 (indices 1 to 4)");
    g_clear_error(&error);
}

/* Coordinates within the bound read as without it; a file of another order
 * reads as if no bound were given (its caller names the order). */
static void test_bound_leaves_other_files_alone(void **state)
{
    (void)state;
    const char *text = "4 3 5 1.5\n1 1 1 2\n";
    th_sptensor *t = th_tensor_read_buffer_full("t.tns", text, strlen(text), &bounded, NULL);
    assert_non_null(t);
    assert_int_equal(t->nnz, 2);
    assert_int_equal(t->dims[0], 4); /* the file's own dims, as always */
    th_sptensor_free(t);
    const char *other_order = "9 9 1\n";
    GError *error = NULL;
    t = th_tensor_read_buffer_full("t.tns", other_order, strlen(other_order), &bounded, &error);
    assert_null(error);
    assert_int_equal(t->nmodes, 2);
    th_sptensor_free(t);
}

/* Split among threads, the earliest line beyond the bound is reported, also
 * from a file and from gzip. */
static void test_bound_earliest_line_wins_in_parallel(void **state)
{
    (void)state;
    GString *text = g_string_new(NULL);
    const uint32_t lines = 40000;
    for (uint32_t l = 1; l <= lines; ++l) {
        const uint32_t first = l == 15001 || l == 30001 ? 9u : l % 4u + 1u;
        g_string_append_printf(text, "%u %u %u %u\n", first, l % 3u + 1u, l % 5u + 1u, l);
    }
    const char *expected = "column 1: index 9 is out of range: the model in m has mode 1 "
                           "size 4 (indices 1 to 4)";
    g_autofree char *message = g_strdup_printf("t.tns:15001: %s", expected);
    for (uint32_t threads = 1; threads <= 8; threads *= 2) {
        GError *error = NULL;
        assert_null(read_with_options(threads, NULL, text, &bounded, &error));
        assert_string_equal(error->message, message);
        g_clear_error(&error);
    }
    assert_thread_count_invariant_with(text, NULL, &bounded);
    g_autoptr(GBytes) gz = gzip_bytes(text->str);
    gsize length = 0;
    const char *data = g_bytes_get_data(gz, &length);
    g_autofree char *path = write_temp("bounded.tns.gz", data, length);
    GError *error = NULL;
    assert_null(th_tensor_read_file(path, &bounded, &error));
    g_autofree char *gz_message = g_strdup_printf("%s:15001: %s", path, expected);
    assert_string_equal(error->message, gz_message);
    g_clear_error(&error);
    g_string_free(text, TRUE);
}

/* A binary tensor names the nonzero (1-based, in file order) beyond the
 * bound, with its 0-based index as the binary format's messages do. */
static void test_bound_in_binary(void **state)
{
    (void)state;
    const uint64_t nnz = 20000;
    g_autoptr(th_sptensor) t = th_sptensor_new(3, nnz);
    t->dims[0] = 10;
    t->dims[1] = 3;
    t->dims[2] = 5;
    for (uint64_t k = 0; k < nnz; ++k) {
        t->indices[0][k] = (th_index)(k % 4u);
        t->indices[1][k] = (th_index)(k % 3u);
        t->indices[2][k] = (th_index)(k % 5u);
        t->values[k] = 1.0;
    }
    t->indices[0][12345] = 7;
    t->indices[0][17000] = 9;
    g_autofree char *path = g_build_filename(temp_dir, "bounded.tnsb", NULL);
    GError *error = NULL;
    assert_true(th_tensor_binary_write(path, t, &error));
    g_autofree char *expected = g_strdup_printf(
        "%s: nonzero 12346 of 20000: mode 1 index 7 is out of range: the model in m has mode "
        "1 size 4 (indices 0 to 3)",
        path);
    const uint32_t threads[] = {0, 1, 3, 8};
    for (size_t i = 0; i < G_N_ELEMENTS(threads); ++i) {
        th_tensor_binary_set_threads(threads[i]);
        assert_null(th_tensor_read_file(path, &bounded, &error));
        th_tensor_binary_set_threads(0);
        assert_string_equal(error->message, expected);
        assert_int_equal(error->code, TH_TENSOR_READER_ERROR_INDEX_RANGE);
        g_clear_error(&error);
    }
    th_sptensor *back = th_tensor_read_file(path, NULL, &error); /* unbounded */
    assert_null(error);
    assert_int_equal(back->lines_read, nnz);
    th_sptensor_free(back);
}

/* ---- writing to a descriptor ----------------------------------------------- */

/* The text th_tensor_write_tns writes, to an open descriptor: the same
 * bytes, plain even for a name ending in .gz. */
static void test_write_to_descriptor(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = th_sptensor_new(2, 3);
    t->dims[0] = 3;
    t->dims[1] = 4;
    for (uint64_t i = 0; i < 3; ++i) {
        t->indices[0][i] = (th_index)i;
        t->indices[1][i] = (th_index)(3 - i);
        t->values[i] = 0.25 * (double)i - 1.0 / 3.0;
    }
    g_autofree char *file = g_build_filename(temp_dir, "atomic.tns", NULL);
    g_autofree char *streamed = g_build_filename(temp_dir, "streamed.tns", NULL);
    GError *error = NULL;
    assert_true(th_tensor_write_tns_full(t, file, "a comment", &error));
    const int fd = open(streamed, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    assert_true(fd >= 0);
    assert_true(th_tensor_write_tns_to_fd(t, fd, "x.gz", "a comment", &error));
    assert_int_equal(close(fd), 0);
    g_autofree char *expected = NULL, *got = NULL;
    assert_true(g_file_get_contents(file, &expected, NULL, NULL));
    assert_true(g_file_get_contents(streamed, &got, NULL, NULL));
    assert_string_equal(got, expected);
    /* A descriptor that cannot be written: the error names the stand-in. */
    assert_false(th_tensor_write_tns_to_fd(t, -1, "standard output", NULL, &error));
    assert_true(g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO));
    assert_true(g_str_has_prefix(error->message, "standard output: cannot write: "));
    g_clear_error(&error);
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
        cmocka_unit_test(test_byte_order_mark_skipped),
        cmocka_unit_test(test_utf16_refused),
        cmocka_unit_test(test_invisible_characters_escaped),
        cmocka_unit_test(test_explicit_zeros_and_underflow_counted),
        cmocka_unit_test(test_report_norm_in_the_files_units),
        cmocka_unit_test(test_value_with_leading_control_character),
        cmocka_unit_test(test_nul_byte),
        cmocka_unit_test(test_carriage_return_inside_line),
        cmocka_unit_test(test_line_length_limit),
        cmocka_unit_test(test_endless_binary_stream),
        cmocka_unit_test(test_sigbus_guard),
        cmocka_unit_test(test_file_shrinks_while_read),
        cmocka_unit_test(test_cancel_before_reading),
        cmocka_unit_test(test_cancel_while_reading),
        cmocka_unit_test(test_thread_count_does_not_change_result),
        cmocka_unit_test(test_host_memory_asked_before_parsing),
        cmocka_unit_test(test_host_memory_guards_a_stream),
        cmocka_unit_test(test_write_stops_on_request),
        cmocka_unit_test(test_tns_header_dims_and_label),
        cmocka_unit_test(test_tns_header_errors),
        cmocka_unit_test(test_tns_header_label_errors),
        cmocka_unit_test(test_tns_header_later_minor_version),
        cmocka_unit_test(test_legacy_synthetic_label),
        cmocka_unit_test(test_tns_header_with_sptensor),
        cmocka_unit_test(test_label_escapes_round_trip),
        cmocka_unit_test(test_write_keeps_dims_and_label),
        cmocka_unit_test(test_sptensor_huge_count),
        cmocka_unit_test(test_negative_value_names_its_line),
        cmocka_unit_test(test_negative_zero_is_not_negative),
        cmocka_unit_test(test_negative_values_accepted_when_not_required),
        cmocka_unit_test(test_earliest_negative_line_wins_in_parallel),
        cmocka_unit_test(test_negative_value_in_gzip),
        cmocka_unit_test(test_negative_value_in_binary),
        cmocka_unit_test(test_bound_names_the_line_and_mode),
        cmocka_unit_test(test_bound_leaves_other_files_alone),
        cmocka_unit_test(test_bound_earliest_line_wins_in_parallel),
        cmocka_unit_test(test_bound_in_binary),
        cmocka_unit_test(test_write_to_descriptor),
    };
    return cmocka_run_group_tests(tests, make_temp_dir, remove_temp_dir);
}
