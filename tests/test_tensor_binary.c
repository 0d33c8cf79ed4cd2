/* The binary tensor format: the writer against an encoder of the layout
 * the header documents (written here independently, checksums included),
 * round trips with the text format, every way a file can be wrong (magic,
 * versions, widths, every truncation point, every flipped byte, indices
 * out of range and values not finite behind valid checksums, nnz 0),
 * unsorted files, thread counts, files that shrink while mapped,
 * interruption, shares (th_tensor_binary_read_share: together the whole
 * read, their joined block hashes, what only shares refuse); and, as a
 * second group run by its own ctest entry (test_convert, label e2e),
 * `tensorhost convert` as a user runs it. */
#define _DEFAULT_SOURCE /* truncate, mkfifo, open_memstream */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/cancel.h"
#include "tensor/sptensor.h"
#include "tensor/tensor_binary.h"
#include "tensor/tensor_reader.h"
#include "tensor/tensor_writer.h"
#include "test_support.h"

/* ---- scratch folder ------------------------------------------------------ */

static char *temp_dir;

static int make_temp_dir(void **state)
{
    (void)state;
    temp_dir = g_dir_make_tmp("th-binary-XXXXXX", NULL);
    return temp_dir == NULL;
}

static int remove_temp_dir(void **state)
{
    (void)state;
    th_test_remove_tree(temp_dir);
    g_clear_pointer(&temp_dir, g_free);
    return 0;
}

static char *temp_path(const char *name)
{
    return g_build_filename(temp_dir, name, NULL);
}

static char *write_temp(const char *name, const void *data, size_t length)
{
    char *path = temp_path(name);
    if (!g_file_set_contents(path, data, (gssize)length, NULL))
        fail_msg("cannot write %s", path);
    return path;
}

/* ---- an encoder of the documented layout (tensor_binary.h) --------------- */

/* What to write; zero fields take version 2.0's values. */
typedef struct {
    const th_sptensor *t; /* nmodes, nnz, dims and arrays (not checked) */
    uint16_t major, minor;
    uint32_t header_bytes;
    uint8_t index_bytes;
    uint8_t value_type;
    uint64_t flags;
    const char *note;
} layout_spec;

static void put_le(GByteArray *b, size_t at, uint64_t v, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; ++i)
        b->data[at + i] = (uint8_t)(v >> (8 * i));
}

static void append_le(GByteArray *b, uint64_t v, unsigned bytes)
{
    const size_t at = b->len;
    g_byte_array_set_size(b, b->len + bytes);
    put_le(b, at, v, bytes);
}

static void pad_to_64(GByteArray *b)
{
    while (b->len % 64u != 0)
        append_le(b, 0, 1);
}

/* A section's checksum as the header comment defines it: version 1, of
 * the array whole; version 2, of its blocks' checksums. */
static uint64_t documented_checksum(uint16_t major, const uint8_t *array, size_t elements,
                                    size_t element_bytes)
{
    if (major == 1u)
        return XXH3_64bits(array, elements * element_bytes);
    const size_t block = 8192;
    g_autoptr(GByteArray) sums = g_byte_array_new();
    for (size_t first = 0; first < elements; first += block) {
        const size_t n = MIN(block, elements - first);
        append_le(sums, XXH3_64bits(array + first * element_bytes, n * element_bytes), 8);
    }
    return XXH3_64bits(sums->data, sums->len);
}

/* The file, byte for byte as the header comment describes it. */
static GByteArray *encode(const layout_spec *spec)
{
    const uint16_t major = spec->major ? spec->major : 2u;
    const th_sptensor *t = spec->t;
    const uint32_t header_bytes = spec->header_bytes ? spec->header_bytes : 64u;
    const unsigned index_bytes = spec->index_bytes ? spec->index_bytes : 4u;
    const size_t note_bytes = spec->note ? strlen(spec->note) : 0;
    GByteArray *b = g_byte_array_new();
    g_byte_array_append(b, (const guint8 *)"THTENSOR", 8);
    append_le(b, major, 2);
    append_le(b, spec->minor, 2);
    append_le(b, header_bytes, 4);
    append_le(b, t->nmodes, 4);
    append_le(b, index_bytes, 1);
    append_le(b, spec->value_type ? spec->value_type : 1u, 1);
    append_le(b, 0, 2);
    append_le(b, t->nnz, 8);
    append_le(b, spec->flags, 8);
    append_le(b, note_bytes, 8);
    append_le(b, 0, 8);
    append_le(b, 0, 8); /* the header checksum, computed last */
    while (b->len < header_bytes)
        append_le(b, 0, 1);
    for (uint32_t m = 0; m < t->nmodes; ++m)
        append_le(b, t->dims[m], 8);
    const size_t table = b->len;
    for (uint32_t s = 0; s <= t->nmodes; ++s)
        append_le(b, 0, 8);
    g_byte_array_append(b, (const guint8 *)(spec->note ? spec->note : ""), (guint)note_bytes);
    const size_t metadata_end = b->len;
    for (uint32_t s = 0; s <= t->nmodes; ++s) {
        pad_to_64(b);
        const size_t start = b->len;
        for (uint64_t i = 0; i < t->nnz; ++i) {
            if (s < t->nmodes) {
                append_le(b, t->indices[s][i], index_bytes);
            } else {
                uint64_t bits;
                memcpy(&bits, &t->values[i], sizeof bits);
                append_le(b, bits, 8);
            }
        }
        const size_t element_bytes = s < t->nmodes ? index_bytes : 8u;
        put_le(b, table + 8u * s,
               documented_checksum(major, b->data + start, (b->len - start) / element_bytes,
                                   element_bytes),
               8);
    }
    put_le(b, 56, XXH3_64bits(b->data, metadata_end), 8);
    return b;
}

/* Where section s (a mode's indices, or the values at s = nmodes) starts, by
 * the documented rule. */
static size_t section_offset(const th_sptensor *t, size_t metadata_end, uint32_t s)
{
    size_t at = metadata_end;
    for (uint32_t k = 0;; ++k) {
        at = (at + 63u) / 64u * 64u;
        if (k == s)
            return at;
        at += (size_t)t->nnz * (k < t->nmodes ? 4u : 8u);
    }
}

static size_t metadata_end_of(const th_sptensor *t, const char *note)
{
    return 64u + 16u * t->nmodes + 8u + (note ? strlen(note) : 0u);
}

/* ---- tensors ------------------------------------------------------------- */

/* A small 3-mode tensor, sorted, with the given entries. */
static th_sptensor *small_tensor(uint64_t nnz, const th_index *coords, const double *values,
                                 const th_index *dims)
{
    th_sptensor *t = th_sptensor_new(3, nnz);
    memcpy(t->dims, dims, 3 * sizeof *dims);
    for (uint64_t i = 0; i < nnz; ++i) {
        for (uint32_t m = 0; m < 3; ++m)
            t->indices[m][i] = coords[3 * i + m];
        t->values[i] = values[i];
    }
    return t;
}

static const th_index six_dims[3] = {4, 7, 5};
static const th_index six_coords[18] = {0, 0, 0, 0, 1, 4, 1, 6, 2, 2, 3, 3, 3, 0, 1, 3, 6, 4};
static const double six_values[6] = {1.5, -2.25, 1e-300, 0.0, 3e300, -7.0};

static th_sptensor *six_nonzeros(void)
{
    return small_tensor(6, six_coords, six_values, six_dims);
}

static th_sptensor *random_tensor(uint32_t nmodes, uint64_t nnz, guint32 seed)
{
    static const uint32_t dims[8] = {40, 31, 17, 9, 5, 6, 7, 3};
    g_autoptr(GRand) rng = g_rand_new_with_seed(seed);
    return th_test_random_tensor(nmodes, dims, nnz, rng);
}

static void assert_same_tensor(const th_sptensor *a, const th_sptensor *b)
{
    assert_int_equal(a->nmodes, b->nmodes);
    assert_int_equal(a->nnz, b->nnz);
    assert_memory_equal(a->dims, b->dims, a->nmodes * sizeof *a->dims);
    for (uint32_t m = 0; m < a->nmodes; ++m)
        assert_memory_equal(a->indices[m], b->indices[m], a->nnz * sizeof(th_index));
    assert_memory_equal(a->values, b->values, a->nnz * sizeof(double)); /* bitwise */
}

static th_sptensor *read_bytes(const GByteArray *b, GError **error)
{
    return th_tensor_binary_read_buffer("t.tnsb", b->data, b->len, error);
}

static th_sptensor *read_bytes_ok(const GByteArray *b)
{
    GError *error = NULL;
    th_sptensor *t = read_bytes(b, &error);
    if (error != NULL)
        fail_msg("unexpected error: %s", error->message);
    assert_non_null(t);
    return t;
}

static void assert_error(GError *error, int code, const char *message)
{
    assert_non_null(error);
    assert_true(error->domain == TH_TENSOR_READER_ERROR);
    if (message != NULL && strcmp(error->message, message) != 0)
        fail_msg("message\n  %s\nexpected\n  %s", error->message, message);
    if (error->code != code)
        fail_msg("code %d, expected %d (%s)", error->code, code, error->message);
}

static void assert_bytes_error(const GByteArray *b, int code, const char *message)
{
    GError *error = NULL;
    th_sptensor *t = read_bytes(b, &error);
    assert_null(t);
    assert_error(error, code, message);
    g_error_free(error);
}

/* The writer's bytes, through a memory stream. */
static GByteArray *write_to_memory(const th_sptensor *t, const char *note)
{
    char *data = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&data, &size);
    assert_non_null(out);
    GError *error = NULL;
    const gboolean ok = th_tensor_binary_write_stream(out, "mem.tnsb", t, note, &error);
    assert_int_equal(fclose(out), 0);
    if (!ok)
        fail_msg("%s", error->message);
    GByteArray *b = g_byte_array_new();
    g_byte_array_append(b, (const guint8 *)data, (guint)size);
    free(data);
    return b;
}

static void assert_same_bytes(const GByteArray *a, const GByteArray *b)
{
    assert_int_equal(a->len, b->len);
    for (guint i = 0; i < a->len; ++i)
        if (a->data[i] != b->data[i])
            fail_msg("byte %u differs: %u, expected %u", i, a->data[i], b->data[i]);
}

/* ---- the layout ---------------------------------------------------------- */

/* The writer writes what the header documents, flagged sorted only when it
 * is, with the note; the reader gives the tensor back. */
/* Finite repeated entries whose sum is not: refused after the merge, as
 * the text reader refuses them (fuzz_tensor_binary found the case). */
static void test_duplicates_summing_beyond_double(void **state)
{
    (void)state;
    const th_index dims[3] = {3, 3, 3};
    const th_index coords[9] = {1, 0, 2, 0, 0, 0, 1, 0, 2};
    const double values[3] = {1e308, 1.0, 1e308};
    g_autoptr(th_sptensor) t = small_tensor(3, coords, values, dims);
    g_autoptr(GByteArray) bytes = write_to_memory(t, NULL);
    assert_bytes_error(bytes, TH_TENSOR_READER_ERROR_VALUE,
                       "t.tnsb: the values given for coordinates 2 1 3 (1-based) sum to a number "
                       "beyond the range of a double; the tensor's repeated entries are added "
                       "together");
}

static void test_writer_matches_documented_layout(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) unsorted = random_tensor(4, 500, 11);
    g_autoptr(GByteArray) written = write_to_memory(unsorted, "a note");
    g_autoptr(GByteArray) expected =
        encode(&(layout_spec){.t = unsorted, .flags = 0, .note = "a note"});
    assert_same_bytes(written, expected);
    assert_int_equal(written->data[32], 0); /* the sorted flag, clear */

    th_sptensor_sort_and_merge(unsorted);
    g_autoptr(GByteArray) sorted_written = write_to_memory(unsorted, NULL);
    g_autoptr(GByteArray) sorted_expected = encode(&(layout_spec){.t = unsorted, .flags = 1});
    assert_same_bytes(sorted_written, sorted_expected);
    assert_int_equal(sorted_written->len % 8u, 0);

    /* Several checksum blocks, the last one partial. */
    g_autoptr(th_sptensor) large = random_tensor(3, 20000, 12);
    g_autoptr(GByteArray) large_written = write_to_memory(large, NULL);
    g_autoptr(GByteArray) large_expected = encode(&(layout_spec){.t = large, .flags = 0});
    assert_same_bytes(large_written, large_expected);

    g_autoptr(th_sptensor) back = read_bytes_ok(sorted_written);
    assert_same_tensor(back, unsorted);
    assert_int_equal(back->lines_read, unsorted->nnz);
    assert_int_equal(back->duplicates_merged, 0);
    assert_int_equal(back->underflowed_values, 0);
    assert_true(back->value_scale == 1.0);
}

/* Resealing an altered file gives the checksums the encoder computes. */
static void test_reseal(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = six_nonzeros();
    g_autoptr(GByteArray) b = encode(&(layout_spec){.t = t, .flags = 1, .note = "x"});
    const size_t values = section_offset(t, metadata_end_of(t, "x"), 3);
    t->values[2] = 42.0;
    memcpy(b->data + values + 2 * 8, &t->values[2], 8);
    assert_true(th_tensor_binary_reseal(b->data, b->len));
    g_autoptr(GByteArray) expected = encode(&(layout_spec){.t = t, .flags = 1, .note = "x"});
    assert_same_bytes(b, expected);
    assert_false(th_tensor_binary_reseal(b->data, 63));
    assert_false(th_tensor_binary_reseal(b->data, b->len - 1)); /* sections cut */
    b->data[0] = 'X';
    assert_false(th_tensor_binary_reseal(b->data, b->len));
}

/* ---- round trips --------------------------------------------------------- */

/* Text -> tensor -> binary -> tensor: the same dims, indices and values,
 * to the bit (values that text writes and reads back exactly, including
 * -0.0, a subnormal and the largest double); through every entry point. */
static void test_round_trip_text_binary(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) source = random_tensor(4, 3000, 5);
    source->values[0] = -0.0;
    source->values[1] = 4.9406564584124654e-324;
    source->values[2] = 1.7976931348623157e308;
    source->values[3] = 0.1;
    g_autofree char *text_path = temp_path("round.tns");
    GError *error = NULL;
    assert_true(th_tensor_write_tns(source, text_path, &error));
    g_autoptr(th_sptensor) from_text = th_tensor_read_file(text_path, NULL, &error);
    assert_non_null(from_text);

    g_autofree char *binary_path = temp_path("round.tnsb");
    assert_true(th_tensor_binary_write(binary_path, from_text, &error));
    g_autoptr(th_sptensor) direct = th_tensor_binary_read(binary_path, NULL, &error);
    assert_non_null(direct);
    assert_same_tensor(direct, from_text);
    assert_int_equal(direct->explicit_zeros, from_text->explicit_zeros);
    assert_int_equal(direct->explicit_zeros, 1);
    assert_int_equal(direct->lines_read, from_text->nnz);

    /* Wherever a tensor path is taken: by content, whatever the name. */
    g_autofree char *disguised = temp_path("disguised.tns");
    assert_int_equal(g_rename(binary_path, disguised), 0);
    g_autoptr(th_sptensor) by_content = th_tensor_read_file(disguised, NULL, &error);
    assert_non_null(by_content);
    assert_same_tensor(by_content, from_text);
    char *contents = NULL;
    gsize length = 0;
    assert_true(g_file_get_contents(disguised, &contents, &length, NULL));
    g_autoptr(th_sptensor) from_buffer = th_tensor_read_buffer("b", contents, length, &error);
    g_free(contents);
    assert_non_null(from_buffer);
    assert_same_tensor(from_buffer, from_text);

    /* And back to text, which reads as the same tensor. */
    g_autofree char *text_again = temp_path("again.tns");
    assert_true(th_tensor_write_tns(by_content, text_again, &error));
    g_autoptr(th_sptensor) again = th_tensor_read_file(text_again, NULL, &error);
    assert_non_null(again);
    assert_same_tensor(again, from_text);
}

/* A file's arrays are asked of the host before they are allocated: with
 * less free than they need, the read stops there, naming the file, the
 * need and what is free; a buffer (already in memory) is not asked. */
static void test_host_memory_asked_first(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) source = random_tensor(3, 1000, 7);
    g_autofree char *path = temp_path("asked.tnsb");
    GError *error = NULL;
    assert_true(th_tensor_binary_write(path, source, &error));
    g_setenv("TH_TEST_HOST_FREE_BYTES", "100", TRUE);
    th_sptensor *refused = th_tensor_read_file(path, NULL, &error);
    char *contents = NULL;
    gsize length = 0;
    assert_true(g_file_get_contents(path, &contents, &length, NULL));
    g_autoptr(th_sptensor) from_buffer = th_tensor_binary_read_buffer("b", contents, length, NULL);
    g_unsetenv("TH_TEST_HOST_FREE_BYTES");
    g_free(contents);
    assert_null(refused);
    assert_true(g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_MEMORY));
    assert_true(g_str_has_prefix(error->message, path));
    /* 1000 nonzeros of 3 modes: 20 bytes each. */
    assert_non_null(strstr(error->message, "its 1000 nonzeros need 19.5 KiB of memory for their "
                                           "arrays, and 100 B is free "
                                           "(TH_TEST_HOST_FREE_BYTES)"));
    g_clear_error(&error);
    assert_non_null(from_buffer);
    g_autoptr(th_sptensor) read = th_tensor_read_file(path, NULL, &error);
    assert_non_null(read);
    assert_same_tensor(read, from_buffer);
}

/* A later minor version with a longer header reads as 2.0 does. */
static void test_later_minor_version(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = six_nonzeros();
    g_autoptr(GByteArray) b =
        encode(&(layout_spec){.t = t, .minor = 7, .header_bytes = 80, .flags = 1});
    g_autoptr(th_sptensor) back = read_bytes_ok(b);
    assert_same_tensor(back, t);
    assert_int_equal(back->explicit_zeros, 1);
}

/* ---- files that are not right --------------------------------------------- */

static void test_not_binary(void **state)
{
    (void)state;
    static const char text[] = "1 1 1 1.0\n2 2 2 2.0\n";
    g_autofree char *path = write_temp("text.tns", text, sizeof text - 1);
    GError *error = NULL;
    assert_null(th_tensor_binary_read(path, NULL, &error));
    g_autofree char *expected = g_strdup_printf(
        "%s: not a tensorhost binary tensor: it does not start with \"THTENSOR\"", path);
    assert_error(error, TH_TENSOR_READER_ERROR_NOT_BINARY, expected);
    g_clear_error(&error);
    /* The general entry point reads it as text. */
    g_autoptr(th_sptensor) t = th_tensor_read_file(path, NULL, &error);
    assert_non_null(t);
}

static void test_other_major_version(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = six_nonzeros();
    g_autoptr(GByteArray) b = encode(&(layout_spec){.t = t, .major = 3, .minor = 1});
    assert_bytes_error(b, TH_TENSOR_READER_ERROR_UNSUPPORTED,
                       "t.tnsb: binary tensor format version 3.1 is not supported by this "
                       "reader, which reads versions 1.x to 2.x (written by another "
                       "tensorhost?)");
}

static void test_index_width_8(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = six_nonzeros();
    g_autoptr(GByteArray) b = encode(&(layout_spec){.t = t, .index_bytes = 8});
    assert_bytes_error(b, TH_TENSOR_READER_ERROR_UNSUPPORTED,
                       "t.tnsb: index width 8 is not supported by this reader (tensorhost "
                       "indices are 32-bit)");
    g_autoptr(GByteArray) b2 = encode(&(layout_spec){.t = t, .index_bytes = 2});
    assert_bytes_error(b2, TH_TENSOR_READER_ERROR_HEADER,
                       "t.tnsb: index width 2 bytes is invalid (expected 4)");
}

static void test_bad_header_fields(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = six_nonzeros();
    g_autoptr(GByteArray) value_type = encode(&(layout_spec){.t = t, .value_type = 2});
    assert_bytes_error(value_type, TH_TENSOR_READER_ERROR_UNSUPPORTED,
                       "t.tnsb: value type 2 is not supported by this reader (it reads 1, "
                       "float64)");
    g_autoptr(GByteArray) header_size = encode(&(layout_spec){.t = t, .header_bytes = 68});
    assert_bytes_error(header_size, TH_TENSOR_READER_ERROR_HEADER,
                       "t.tnsb: header size 68 bytes is invalid (expected a multiple of 8 "
                       "from 64 to 4096)");

    t->dims[1] = 0;
    g_autoptr(GByteArray) zero_dim = encode(&(layout_spec){.t = t});
    assert_bytes_error(zero_dim, TH_TENSOR_READER_ERROR_HEADER,
                       "t.tnsb: the header gives mode 2 size 0 (expected 1 to 4294967295: "
                       "indices are 32-bit)");
    t->dims[1] = 7;
    g_autoptr(GByteArray) big_dim = encode(&(layout_spec){.t = t});
    put_le(big_dim, 64 + 8, (uint64_t)1 << 32, 8);
    assert_true(th_tensor_binary_reseal(big_dim->data, big_dim->len));
    assert_bytes_error(big_dim, TH_TENSOR_READER_ERROR_HEADER,
                       "t.tnsb: the header gives mode 2 size 4294967296 (expected 1 to "
                       "4294967295: indices are 32-bit)");

    g_autoptr(GByteArray) one_mode = encode(&(layout_spec){.t = t});
    put_le(one_mode, 16, 1, 4);
    assert_bytes_error(one_mode, TH_TENSOR_READER_ERROR_ORDER,
                       "t.tnsb: the header gives 1 mode; tensorhost reads tensors of 2 to 64");
    g_autoptr(GByteArray) long_note = encode(&(layout_spec){.t = t});
    put_le(long_note, 40, 65537, 8);
    assert_bytes_error(long_note, TH_TENSOR_READER_ERROR_HEADER,
                       "t.tnsb: the header gives a note of 65537 bytes, more than the 65536 a "
                       "note may take");
    /* nnz so large that the size overflows: the checksum is valid. */
    g_autoptr(GByteArray) huge = encode(&(layout_spec){.t = t});
    put_le(huge, 24, UINT64_MAX / 4u, 8);
    put_le(huge, 56, 0, 8);
    put_le(huge, 56, XXH3_64bits(huge->data, metadata_end_of(t, NULL)), 8);
    assert_bytes_error(huge, TH_TENSOR_READER_ERROR_TRUNCATED, NULL);
}

static void test_zero_nnz(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = th_sptensor_new(3, 0);
    t->dims[0] = t->dims[1] = t->dims[2] = 2;
    g_autoptr(GByteArray) b = encode(&(layout_spec){.t = t});
    assert_bytes_error(b, TH_TENSOR_READER_ERROR_EMPTY,
                       "t.tnsb: no nonzero found: the header gives nnz 0");
}

/* Every prefix of a file is refused as truncated, from memory and from a
 * mapped file, through th_tensor_read_file too once the magic is whole. */
static void test_every_truncation(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = six_nonzeros();
    g_autoptr(GByteArray) b = encode(&(layout_spec){.t = t, .flags = 1, .note = "note"});
    g_autofree char *path = temp_path("cut.tnsb");
    for (guint length = 0; length < b->len; ++length) {
        GError *error = NULL;
        assert_null(th_tensor_binary_read_buffer("t.tnsb", b->data, length, &error));
        assert_error(error, TH_TENSOR_READER_ERROR_TRUNCATED, NULL);
        assert_non_null(strstr(error->message, "truncated binary tensor: expected "));
        g_clear_error(&error);

        assert_true(g_file_set_contents(path, (const char *)b->data, length, NULL));
        assert_null(th_tensor_binary_read(path, NULL, &error));
        assert_error(error, TH_TENSOR_READER_ERROR_TRUNCATED, NULL);
        g_clear_error(&error);
        if (length >= 8) {
            assert_null(th_tensor_read_file(path, NULL, &error));
            assert_error(error, TH_TENSOR_READER_ERROR_TRUNCATED, NULL);
            g_clear_error(&error);
        }
    }
    const size_t metadata_end = metadata_end_of(t, "note");
    GError *error = NULL;
    assert_null(th_tensor_binary_read_buffer("t.tnsb", b->data, 40, &error));
    assert_error(error, TH_TENSOR_READER_ERROR_TRUNCATED,
                 "t.tnsb: truncated binary tensor: expected a header of at least 64 bytes, "
                 "the file has 40 (cut short while copied or written?)");
    g_clear_error(&error);
    assert_null(th_tensor_binary_read_buffer("t.tnsb", b->data, metadata_end - 1, &error));
    g_autofree char *in_metadata = g_strdup_printf(
        "t.tnsb: truncated binary tensor: expected a header, dims, checksums and note of %zu "
        "bytes, the file has %zu (cut short while copied or written?)",
        metadata_end, metadata_end - 1);
    assert_error(error, TH_TENSOR_READER_ERROR_TRUNCATED, in_metadata);
    g_clear_error(&error);
    assert_null(th_tensor_binary_read_buffer("t.tnsb", b->data, b->len - 8, &error));
    g_autofree char *in_values = g_strdup_printf(
        "t.tnsb: truncated binary tensor: expected %u bytes, the file has %u (cut short while "
        "copied or written?)",
        b->len, b->len - 8);
    assert_error(error, TH_TENSOR_READER_ERROR_TRUNCATED, in_values);
    g_clear_error(&error);

    /* And bytes after the end. */
    g_byte_array_append(b, (const guint8 *)"", 1);
    g_autofree char *longer = g_strdup_printf(
        "t.tnsb: the file has %u bytes, more than the %u its header gives (bytes appended "
        "after the values?)",
        b->len, b->len - 1);
    assert_bytes_error(b, TH_TENSOR_READER_ERROR_TRUNCATED, longer);
}

static char *section_label(const th_sptensor *t, uint32_t s)
{
    return s < t->nmodes ? g_strdup_printf("mode %u indices", s + 1u) : g_strdup("values");
}

/* The error that flipping byte `at` must give; NULL for the fields that
 * locate the metadata (magic, version, sizes), whose corruption gives
 * other errors. */
static char *expected_corruption(const th_sptensor *t, size_t metadata_end, size_t at)
{
    if (at < 10 || (at >= 12 && at < 20) || (at >= 40 && at < 48))
        return NULL;
    if (at < metadata_end)
        return g_strdup_printf("t.tnsb: checksum mismatch in the header (bytes 0 to %zu): the "
                               "file is corrupt",
                               metadata_end - 1);
    size_t previous_end = metadata_end;
    for (uint32_t s = 0; s <= t->nmodes; ++s) {
        const size_t start = section_offset(t, metadata_end, s);
        const size_t end = start + t->nnz * (s < t->nmodes ? 4u : 8u);
        g_autofree char *name = section_label(t, s);
        if (at >= previous_end && at < start)
            return g_strdup_printf(
                "t.tnsb: the padding before the %s is not zero: the file is corrupt", name);
        if (at >= start && at < end)
            return g_strdup_printf("t.tnsb: checksum mismatch in the %s: the file is corrupt",
                                   name);
        previous_end = end;
    }
    fail_msg("byte %zu lies past the end", at);
    return NULL;
}

/* Every byte flipped, anywhere, is an error; outside the few fields that
 * locate the rest, the error names the corrupt section. */
static void test_every_flipped_byte(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = six_nonzeros();
    const char *note = "seven b";
    const size_t metadata_end = metadata_end_of(t, note);
    for (uint16_t major = 1; major <= 2; ++major) {
        g_autoptr(GByteArray) b =
            encode(&(layout_spec){.t = t, .major = major, .flags = 1, .note = note});
        for (guint at = 0; at < b->len; ++at) {
            for (unsigned bit = 0; bit < 8; bit += 3) {
                b->data[at] ^= (uint8_t)(1u << bit);
                GError *error = NULL;
                th_sptensor *back = read_bytes(b, &error);
                b->data[at] ^= (uint8_t)(1u << bit);
                if (back != NULL)
                    fail_msg("byte %u bit %u flipped: read without an error", at, bit);
                g_autofree char *expected = expected_corruption(t, metadata_end, at);
                if (expected != NULL)
                    assert_error(error, TH_TENSOR_READER_ERROR_CHECKSUM, expected);
                else
                    assert_error(error, error->code, NULL);
                g_error_free(error);
            }
        }
    }
}

/* Version 2's checksums are of blocks: a byte flipped in any block of a
 * long section is found, whatever the threads. */
static void test_flipped_byte_in_later_block(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = random_tensor(3, 20000, 5);
    th_sptensor_sort_and_merge(t);
    g_autoptr(GByteArray) b = encode(&(layout_spec){.t = t, .flags = 1});
    const size_t metadata_end = metadata_end_of(t, NULL);
    /* mode 2's block 1 (of 0 to 2), and the values' last block */
    const size_t at[2] = {section_offset(t, metadata_end, 1) + 4u * 9000u + 1u,
                          section_offset(t, metadata_end, 3) + 8u * (t->nnz - 1u) + 7u};
    const char *const named[2] = {"mode 2 indices", "values"};
    for (int k = 0; k < 2; ++k)
        for (uint32_t threads = 1; threads <= 3; ++threads) {
            th_tensor_binary_set_threads(threads);
            b->data[at[k]] ^= 0x10u;
            g_autofree char *expected = g_strdup_printf(
                "t.tnsb: checksum mismatch in the %s: the file is corrupt", named[k]);
            assert_bytes_error(b, TH_TENSOR_READER_ERROR_CHECKSUM, expected);
            b->data[at[k]] ^= 0x10u;
        }
    th_tensor_binary_set_threads(0);
    g_autoptr(th_sptensor) back = read_bytes_ok(b);
    assert_same_tensor(back, t);
}

/* Files of version 1 (whole-array checksums) read as they did. */
static void test_version_1_files(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = random_tensor(3, 20000, 8);
    g_autoptr(GByteArray) b = encode(&(layout_spec){.t = t, .major = 1, .flags = 0});
    th_sptensor_sort_and_merge(t);
    for (uint32_t threads = 0; threads <= 4; ++threads) {
        th_tensor_binary_set_threads(threads);
        g_autoptr(th_sptensor) back = read_bytes_ok(b);
        assert_same_tensor(back, t);
    }
    th_tensor_binary_set_threads(0);
    const size_t values = section_offset(t, metadata_end_of(t, NULL), 3);
    b->data[values + 8u * 15000u + 3u] ^= 0x01u;
    assert_bytes_error(b, TH_TENSOR_READER_ERROR_CHECKSUM,
                       "t.tnsb: checksum mismatch in the values: the file is corrupt");
}

/* An index beyond its mode's size behind valid checksums: the earliest
 * such nonzero is named, whatever the thread count. */
static void test_index_out_of_range(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = six_nonzeros();
    t->indices[1][3] = 7; /* mode 2 has size 7 */
    t->indices[2][5] = 9; /* later: not the one named */
    g_autoptr(GByteArray) b = encode(&(layout_spec){.t = t, .flags = 1});
    for (uint32_t threads = 1; threads <= 4; ++threads) {
        th_tensor_binary_set_threads(threads);
        assert_bytes_error(b, TH_TENSOR_READER_ERROR_INDEX_RANGE,
                           "t.tnsb: nonzero 4 of 6: mode 2 index 7 is out of range: the header "
                           "gives mode 2 size 7 (indices 0 to 6)");
    }
    th_tensor_binary_set_threads(0);
}

static void test_values_not_finite(void **state)
{
    (void)state;
    const double bad[3] = {NAN, INFINITY, -INFINITY};
    const char *const shown[3] = {"nan", "inf", "-inf"};
    for (int k = 0; k < 3; ++k) {
        g_autoptr(th_sptensor) t = six_nonzeros();
        t->values[4] = bad[k];
        g_autoptr(GByteArray) b = encode(&(layout_spec){.t = t, .flags = 1});
        g_autofree char *expected =
            g_strdup_printf("t.tnsb: nonzero 5 of 6: value %s is not finite", shown[k]);
        assert_bytes_error(b, TH_TENSOR_READER_ERROR_VALUE, expected);
    }
}

/* ---- order --------------------------------------------------------------- */

/* Unsorted, with repeated coordinates: sorted and merged, flag clear or
 * (wrongly) set, with any thread count; the pairs that straddle two
 * threads' chunks are checked too. */
static void test_unsorted_is_sorted_and_merged(void **state)
{
    (void)state;
    static const th_index dims[3] = {3, 3, 3};
    static const th_index coords[21] = {2, 2, 2, 0, 1, 0, 1, 1, 1, 0, 1, 0,
                                        0, 0, 2, 2, 0, 0, 1, 1, 1};
    static const double values[7] = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0};
    g_autoptr(th_sptensor) t = small_tensor(7, coords, values, dims);
    static const th_index sorted_coords[15] = {0, 0, 2, 0, 1, 0, 1, 1, 1, 2, 0, 0, 2, 2, 2};
    static const double merged_values[5] = {5.0, 6.0, 10.0, 6.0, 1.0};
    g_autoptr(th_sptensor) expected = small_tensor(5, sorted_coords, merged_values, dims);
    for (uint64_t flags = 0; flags < 2; ++flags) {
        g_autoptr(GByteArray) b = encode(&(layout_spec){.t = t, .flags = flags});
        for (uint32_t threads = 1; threads <= 5; ++threads) {
            th_tensor_binary_set_threads(threads);
            g_autoptr(th_sptensor) back = read_bytes_ok(b);
            assert_same_tensor(back, expected);
            assert_int_equal(back->duplicates_merged, 2);
            assert_int_equal(back->lines_read, 7);
        }
    }
    th_tensor_binary_set_threads(0);

    /* Sorted except across what would be a chunk boundary. */
    g_autoptr(th_sptensor) almost = six_nonzeros();
    for (uint32_t m = 0; m < 3; ++m) { /* swap nonzeros 3 and 4 */
        th_index tmp = almost->indices[m][3];
        almost->indices[m][3] = almost->indices[m][4];
        almost->indices[m][4] = tmp;
    }
    g_autoptr(th_sptensor) six = six_nonzeros();
    g_autoptr(GByteArray) lying = encode(&(layout_spec){.t = almost, .major = 1, .flags = 1});
    for (uint32_t threads = 1; threads <= 6; ++threads) {
        th_tensor_binary_set_threads(threads);
        g_autoptr(th_sptensor) back = read_bytes_ok(lying);
        assert_memory_equal(back->indices[0], six->indices[0], 6 * sizeof(th_index));
        assert_memory_equal(back->indices[1], six->indices[1], 6 * sizeof(th_index));
        assert_memory_equal(back->indices[2], six->indices[2], 6 * sizeof(th_index));
    }
    th_tensor_binary_set_threads(0);

    /* Version 2's chunks are whole checksum blocks: out of order across
     * the first block boundary. */
    g_autoptr(th_sptensor) sorted = random_tensor(3, 20000, 9);
    th_sptensor_sort_and_merge(sorted);
    g_autoptr(th_sptensor) swapped = random_tensor(3, 20000, 9);
    th_sptensor_sort_and_merge(swapped);
    for (uint32_t m = 0; m < 3; ++m) { /* swap nonzeros 8191 and 8192 */
        th_index tmp = swapped->indices[m][8191];
        swapped->indices[m][8191] = swapped->indices[m][8192];
        swapped->indices[m][8192] = tmp;
    }
    const double value = swapped->values[8191];
    swapped->values[8191] = swapped->values[8192];
    swapped->values[8192] = value;
    g_autoptr(GByteArray) lying_v2 = encode(&(layout_spec){.t = swapped, .flags = 1});
    for (uint32_t threads = 1; threads <= 3; ++threads) {
        th_tensor_binary_set_threads(threads);
        g_autoptr(th_sptensor) back = read_bytes_ok(lying_v2);
        assert_same_tensor(back, sorted);
    }
    th_tensor_binary_set_threads(0);
}

/* Larger, through several threads: the same tensor whatever their number. */
static void test_thread_counts_agree(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = random_tensor(5, 20000, 3);
    g_autoptr(GByteArray) unsorted = write_to_memory(t, NULL);
    th_sptensor_sort_and_merge(t);
    g_autoptr(GByteArray) sorted = write_to_memory(t, NULL);
    for (uint32_t threads = 0; threads <= 7; ++threads) {
        th_tensor_binary_set_threads(threads);
        g_autoptr(th_sptensor) a = read_bytes_ok(unsorted);
        g_autoptr(th_sptensor) b = read_bytes_ok(sorted);
        assert_same_tensor(a, t);
        assert_same_tensor(b, t);
    }
    th_tensor_binary_set_threads(0);
}

/* ---- the writer ---------------------------------------------------------- */

/* What the reader would refuse, the writer refuses, leaving nothing. */
static void test_writer_refuses_unreadable(void **state)
{
    (void)state;
    g_autofree char *path = temp_path("refused.tnsb");
    GError *error = NULL;
    g_autoptr(th_sptensor) t = six_nonzeros();
    t->values[1] = NAN;
    assert_false(th_tensor_binary_write(path, t, &error));
    assert_error(error, TH_TENSOR_READER_ERROR_VALUE, NULL);
    g_clear_error(&error);
    t->values[1] = 1.0;
    t->indices[0][2] = 4;
    assert_false(th_tensor_binary_write(path, t, &error));
    assert_error(error, TH_TENSOR_READER_ERROR_INDEX_RANGE, NULL);
    g_clear_error(&error);
    g_autoptr(th_sptensor) empty = th_sptensor_new(3, 0);
    empty->dims[0] = empty->dims[1] = empty->dims[2] = 1;
    assert_false(th_tensor_binary_write(path, empty, &error));
    assert_error(error, TH_TENSOR_READER_ERROR_EMPTY, NULL);
    g_clear_error(&error);
    g_autoptr(GDir) dir = g_dir_open(temp_dir, 0, NULL);
    for (const char *name; (name = g_dir_read_name(dir));)
        if (g_str_has_prefix(name, "refused"))
            fail_msg("left behind: %s", name);

    g_autofree char *nowhere = temp_path("missing-dir/x.tnsb");
    t->indices[0][2] = 1;
    assert_false(th_tensor_binary_write(nowhere, t, &error));
    assert_error(error, TH_TENSOR_READER_ERROR_IO, NULL);
    assert_true(g_str_has_prefix(error->message, nowhere));
    g_clear_error(&error);
}

/* Files get the mode open() gives: 0666 less the umask. */
static void test_writer_file_mode(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = six_nonzeros();
    g_autofree char *path = temp_path("mode.tnsb");
    const mode_t saved = umask(027);
    GError *error = NULL;
    const gboolean ok = th_tensor_binary_write(path, t, &error);
    umask(saved);
    assert_true(ok);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
}

/* ---- the file under the reader -------------------------------------------- */

/* A file of about 72 MB: enough chunks that the progress callback runs in
 * the middle of a one-thread read. */
static char *write_long_file(const char *name, th_sptensor **out)
{
    const uint64_t nnz = (uint64_t)72 << 20 >> 4; /* 16 bytes a nonzero, 2 modes */
    th_sptensor *t = th_sptensor_new(2, nnz);
    t->dims[0] = (th_index)(nnz / 1024u + 1u);
    t->dims[1] = 1024;
    for (uint64_t i = 0; i < nnz; ++i) {
        t->indices[0][i] = (th_index)(i / 1024u);
        t->indices[1][i] = (th_index)(i % 1024u);
        t->values[i] = (double)(i % 7u) + 0.5;
    }
    char *path = temp_path(name);
    GError *error = NULL;
    if (!th_tensor_binary_write(path, t, &error))
        fail_msg("%s", error->message);
    *out = t;
    return path;
}

typedef struct {
    const char *path;
    int calls_in_the_middle;
    gboolean cancel; /* else truncate */
    uint64_t last_done, last_total;
} midway_action;

static void act_midway(uint64_t done, uint64_t total, void *user_data)
{
    midway_action *a = user_data;
    a->last_done = done;
    a->last_total = total;
    if (done >= total || a->calls_in_the_middle++ > 0)
        return;
    if (a->cancel)
        th_cancel_request();
    else
        assert_int_equal(truncate(a->path, 4096), 0);
}

static void test_progress_and_shrinking_file(void **state)
{
    (void)state;
    th_sptensor *t = NULL;
    g_autofree char *path = write_long_file("long.tnsb", &t);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);

    /* Undisturbed: progress ends at the total. */
    midway_action watch = {.path = path, .calls_in_the_middle = 1};
    th_tensor_read_options options = {.progress = act_midway, .user_data = &watch};
    GError *error = NULL;
    th_sptensor *back = th_tensor_read_file(path, &options, &error);
    assert_non_null(back);
    assert_same_tensor(back, t);
    th_sptensor_free(back);
    th_sptensor_free(t);
    assert_int_equal(watch.last_total, (uint64_t)st.st_size);
    assert_int_equal(watch.last_done, (uint64_t)st.st_size);

    /* Interrupted from the callback: stops at the next chunk. */
    midway_action stop = {.path = path, .cancel = TRUE};
    options.user_data = &stop;
    th_tensor_binary_set_threads(1);
    back = th_tensor_read_file(path, &options, &error);
    th_cancel_reset();
    assert_null(back);
    assert_int_equal(stop.calls_in_the_middle, 1);
    assert_error(error, TH_TENSOR_READER_ERROR_CANCELLED, NULL);
    g_autofree char *prefix = g_strdup_printf("%s: reading interrupted after ", path);
    assert_true(g_str_has_prefix(error->message, prefix));
    g_clear_error(&error);

    /* Cut by another process in the middle: an error, not a crash. */
    struct sigaction before, after;
    assert_int_equal(sigaction(SIGBUS, NULL, &before), 0);
    midway_action cut = {.path = path};
    options.user_data = &cut;
    back = th_tensor_read_file(path, &options, &error);
    th_tensor_binary_set_threads(0);
    assert_null(back);
    assert_int_equal(cut.calls_in_the_middle, 1);
    g_autofree char *shrank = g_strdup_printf(
        "%s: the file shrank while it was read (truncated or rewritten by another process?); "
        "read it again once it is complete",
        path);
    assert_error(error, TH_TENSOR_READER_ERROR_IO, shrank);
    g_clear_error(&error);
    assert_int_equal(sigaction(SIGBUS, NULL, &after), 0);
    assert_true(after.sa_handler == before.sa_handler);
}

static void test_cancel_before_reading(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = six_nonzeros();
    g_autoptr(GByteArray) b = encode(&(layout_spec){.t = t, .flags = 1});
    th_cancel_request();
    g_autofree char *expected =
        g_strdup_printf("t.tnsb: reading interrupted after 0 of %u bytes", b->len);
    assert_bytes_error(b, TH_TENSOR_READER_ERROR_CANCELLED, expected);
    th_cancel_reset();
    g_autoptr(th_sptensor) back = read_bytes_ok(b);
    assert_same_tensor(back, t);
}

/* A pipe cannot be mapped: a clear error, and no wait for a writer. */
static void test_fifo(void **state)
{
    (void)state;
    g_autofree char *path = temp_path("fifo");
    assert_int_equal(mkfifo(path, 0600), 0);
    GError *error = NULL;
    assert_null(th_tensor_binary_read(path, NULL, &error));
    g_autofree char *expected = g_strdup_printf(
        "%s: a binary tensor is read by mapping it, which takes a regular file (not a pipe or "
        "a device): copy it to a file first",
        path);
    assert_error(error, TH_TENSOR_READER_ERROR_IO, expected);
    g_clear_error(&error);
    assert_null(th_tensor_binary_read(temp_dir, NULL, &error)); /* a folder */
    assert_error(error, TH_TENSOR_READER_ERROR_IO, NULL);
    g_clear_error(&error);
}

/* ---- the label ------------------------------------------------------------ */

static void assert_same_label(const char *label, const char *expected)
{
    if (g_strcmp0(label, expected) != 0)
        fail_msg("label %s%s%s, expected %s%s%s", label ? "'" : "", label ? label : "NULL",
                 label ? "'" : "", expected ? "'" : "", expected ? expected : "NULL",
                 expected ? "'" : "");
}

/* The note is the tensor's label both ways: read into it, and written from
 * it by th_tensor_binary_write; a note that is not UTF-8 still reads. */
static void test_note_is_the_label(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = six_nonzeros();
    g_autoptr(GByteArray) with_note = write_to_memory(t, "synthetic tensor: x");
    g_autoptr(th_sptensor) labelled = read_bytes_ok(with_note);
    assert_same_label(labelled->label, "synthetic tensor: x");
    g_autoptr(GByteArray) without = write_to_memory(t, NULL);
    g_autoptr(th_sptensor) unlabelled = read_bytes_ok(without);
    assert_same_label(unlabelled->label, NULL);
    g_autoptr(GByteArray) not_utf8 = write_to_memory(t, "a\xff" "b");
    g_autoptr(th_sptensor) replaced = read_bytes_ok(not_utf8);
    assert_same_label(replaced->label, "a\xef\xbf\xbd" "b");

    t->label = g_strdup("from the tensor");
    g_autofree char *path = temp_path("labelled.tnsb");
    GError *error = NULL;
    assert_true(th_tensor_binary_write(path, t, &error));
    g_autoptr(th_sptensor) back = th_tensor_read_file(path, NULL, &error);
    assert_non_null(back);
    assert_same_label(back->label, "from the tensor");
}

/* Binary -> text -> binary keeps every nonzero, the dims (here larger than
 * any index: empty last slices) and the label: the two binary files are
 * the same bytes. */
static void test_round_trip_keeps_dims_and_label(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = six_nonzeros();
    t->dims[0] = 1000;
    t->dims[2] = 70000;
    t->label = g_strdup("synthetic tensor: tensorhost-synth dims=1000x7x70000 \\ # x");
    g_autofree char *first = temp_path("first.tnsb");
    g_autofree char *text = temp_path("middle.tns");
    g_autofree char *gzip = temp_path("middle.tns.gz");
    g_autofree char *second = temp_path("second.tnsb");
    GError *error = NULL;
    assert_true(th_tensor_binary_write(first, t, &error));
    g_autoptr(th_sptensor) from_binary = th_tensor_read_file(first, NULL, &error);
    assert_non_null(from_binary);
    assert_true(th_tensor_write_tns(from_binary, text, &error));
    assert_true(th_tensor_write_tns(from_binary, gzip, &error));
    g_autoptr(th_sptensor) from_gzip = th_tensor_read_file(gzip, NULL, &error);
    assert_non_null(from_gzip);
    assert_same_tensor(from_gzip, t);
    assert_same_label(from_gzip->label, t->label);
    g_autoptr(th_sptensor) from_text = th_tensor_read_file(text, NULL, &error);
    assert_non_null(from_text);
    assert_same_tensor(from_text, t);
    assert_same_label(from_text->label, t->label);
    assert_true(th_tensor_binary_write(second, from_text, &error));
    g_autofree char *a = NULL, *b = NULL;
    gsize a_length = 0, b_length = 0;
    assert_true(g_file_get_contents(first, &a, &a_length, NULL));
    assert_true(g_file_get_contents(second, &b, &b_length, NULL));
    assert_int_equal(a_length, b_length);
    assert_memory_equal(a, b, a_length);
}

/* ---- shares (th_tensor_binary_read_share) -------------------------------- */

#define MOST_PARTS 5u

/* Every share of one file, read from memory. */
typedef struct {
    uint32_t parts;
    th_sptensor *t[MOST_PARTS];
    th_tensor_share share[MOST_PARTS];
} share_set;

static void share_set_clear(share_set *set)
{
    for (uint32_t p = 0; p < set->parts; ++p) {
        g_clear_pointer(&set->t[p], th_sptensor_free);
        th_tensor_share_clear(&set->share[p]);
    }
}

static th_sptensor *read_share_bytes(const GByteArray *b, uint32_t part, uint32_t parts,
                                     th_tensor_share *share, GError **error)
{
    return th_tensor_binary_read_share_buffer("t.tnsb", b->data, b->len, part, parts, NULL,
                                              share, error);
}

/* Every share of `parts`, each of which must read. */
static void read_shares_ok(const GByteArray *b, uint32_t parts, share_set *set)
{
    assert_true(parts >= 1 && parts <= MOST_PARTS);
    memset(set, 0, sizeof *set);
    set->parts = parts;
    for (uint32_t p = 0; p < parts; ++p) {
        GError *error = NULL;
        set->t[p] = read_share_bytes(b, p, parts, &set->share[p], &error);
        if (error != NULL)
            fail_msg("share %u of %u: unexpected error: %s", p, parts, error->message);
        assert_non_null(set->t[p]);
    }
}

/* The shares' block hashes as dist_tensor.c joins them, [nsections]
 * [file_blocks]; every block must come from exactly one share. */
static uint64_t *join_block_sums(const share_set *set)
{
    const th_tensor_share *any = &set->share[0];
    uint64_t *sums = g_new(uint64_t, any->nsections * MAX(any->file_blocks, 1u));
    g_autofree uint32_t *from = g_new0(uint32_t, MAX(any->file_blocks, 1u));
    for (uint32_t p = 0; p < set->parts; ++p) {
        const th_tensor_share *sh = &set->share[p];
        assert_int_equal(sh->nsections, any->nsections);
        assert_int_equal(sh->file_blocks, any->file_blocks);
        assert_true(sh->first_block + sh->nblocks <= sh->file_blocks);
        for (uint64_t k = 0; k < sh->nblocks; ++k)
            ++from[sh->first_block + k];
        for (uint32_t s = 0; s < sh->nsections; ++s)
            memcpy(sums + s * sh->file_blocks + sh->first_block, sh->block_sums + s * sh->nblocks,
                   sh->nblocks * sizeof *sums);
    }
    for (uint64_t k = 0; k < any->file_blocks; ++k)
        if (from[k] != 1)
            fail_msg("checksum block %" G_GUINT64_FORMAT " came from %u shares", k, from[k]);
    return sums;
}

/* Sorted, one nonzero to each mode-1 slice of three, so that any mode's
 * index may change by one and the file stay sorted; some values zero,
 * some negative. */
static th_sptensor *spread_tensor(uint64_t nnz)
{
    th_sptensor *t = th_sptensor_new(3, nnz);
    t->dims[0] = (th_index)(3u * nnz);
    t->dims[1] = 7;
    t->dims[2] = 5;
    for (uint64_t i = 0; i < nnz; ++i) {
        t->indices[0][i] = (th_index)(3u * i);
        t->indices[1][i] = (th_index)(i % 7u);
        t->indices[2][i] = (th_index)(i % 5u);
        t->values[i] = i % 11u == 0 ? 0.0 : ((double)i - 9000.5) / 7.0;
    }
    return t;
}

/* The shares' nonzeros one after the other, in part order. */
static th_sptensor *concatenate_shares(const share_set *set)
{
    uint64_t nnz = 0;
    for (uint32_t p = 0; p < set->parts; ++p)
        nnz += set->t[p]->nnz;
    const th_sptensor *first = set->t[0];
    th_sptensor *all = th_sptensor_new(first->nmodes, nnz);
    memcpy(all->dims, first->dims, first->nmodes * sizeof *all->dims);
    uint64_t at = 0;
    for (uint32_t p = 0; p < set->parts; ++p) {
        const th_sptensor *t = set->t[p];
        if (t->nnz == 0) /* its arrays may be NULL */
            continue;
        for (uint32_t m = 0; m < t->nmodes; ++m)
            memcpy(all->indices[m] + at, t->indices[m], t->nnz * sizeof(th_index));
        memcpy(all->values + at, t->values, t->nnz * sizeof(double));
        at += t->nnz;
    }
    return all;
}

/* The sign of nonzero i's coordinates against `c`'s. */
static int compare_coords(const th_sptensor *t, uint64_t i, const th_index *c)
{
    for (uint32_t m = 0; m < t->nmodes; ++m)
        if (t->indices[m][i] != c[m])
            return t->indices[m][i] < c[m] ? -1 : 1;
    return 0;
}

/* Whether nonzero i of sorted `t`, with `index` for its mode-m index,
 * still lies strictly between its neighbours. */
static gboolean keeps_order(const th_sptensor *t, uint64_t i, uint32_t m, th_index index)
{
    th_index c[TH_MAX_MODES];
    for (uint32_t k = 0; k < t->nmodes; ++k)
        c[k] = t->indices[k][i];
    c[m] = index;
    return (i == 0 || compare_coords(t, i - 1u, c) < 0) &&
           (i + 1u == t->nnz || compare_coords(t, i + 1u, c) > 0);
}

/* The first nonzero from `from` on whose mode-m index may become `index`
 * (with `flip`: its own index ^ 1, in range) with the file still sorted. */
static uint64_t settable_nonzero(const th_sptensor *t, uint64_t from, uint32_t m,
                                 gboolean flip, th_index index)
{
    for (uint64_t i = from; i < t->nnz; ++i) {
        const th_index wanted = flip ? t->indices[m][i] ^ 1u : index;
        if ((!flip || wanted < t->dims[m]) && keeps_order(t, i, m, wanted))
            return i;
    }
    fail_msg("no nonzero from %" G_GUINT64_FORMAT " can take another mode %u index", from, m + 1u);
    return 0;
}

/* What each share of `parts` promises of a file of `whole`'s nonzeros
 * (whole read of the same bytes): together, exactly the whole read, in
 * order; each block's hash where the documented layout puts it; the
 * joined hashes pass the check. */
static void assert_shares_make_whole(const GByteArray *b, const th_sptensor *whole,
                                     const char *note, uint32_t parts)
{
    share_set set;
    read_shares_ok(b, parts, &set);
    const uint64_t nnz = whole->nnz;
    uint64_t next = 0, zeros = 0;
    for (uint32_t p = 0; p < parts; ++p) {
        const th_tensor_share *sh = &set.share[p];
        const th_sptensor *t = set.t[p];
        assert_int_equal(sh->first, next);
        assert_int_equal(sh->count, nnz / parts + (p < nnz % parts ? 1u : 0u));
        assert_int_equal(sh->nnz_total, nnz);
        assert_int_equal(sh->nsections, whole->nmodes + 1u);
        assert_int_equal(sh->file_blocks, (nnz + 8191u) / 8192u);
        assert_int_equal(t->nnz, sh->count);
        assert_int_equal(t->lines_read, sh->count);
        assert_int_equal(t->duplicates_merged, 0);
        assert_int_equal(t->nmodes, whole->nmodes);
        assert_memory_equal(t->dims, whole->dims, whole->nmodes * sizeof *t->dims);
        assert_same_label(t->label, note);
        /* The blocks that start in the share: block k starts at 8192 k. */
        assert_int_equal(sh->first_block, (sh->first + 8191u) / 8192u);
        assert_int_equal(sh->first_block + sh->nblocks,
                         (sh->first + sh->count + 8191u) / 8192u);
        next += sh->count;
        zeros += t->explicit_zeros;
    }
    assert_int_equal(next, nnz);
    assert_int_equal(zeros, whole->explicit_zeros);
    g_autoptr(th_sptensor) all = concatenate_shares(&set);
    assert_same_tensor(all, whole);

    g_autofree uint64_t *sums = join_block_sums(&set);
    const th_tensor_share *sh = &set.share[0];
    const size_t metadata_end = metadata_end_of(whole, note);
    for (uint32_t s = 0; s < sh->nsections; ++s) {
        const size_t bytes = s < whole->nmodes ? 4u : 8u;
        const uint8_t *section = b->data + section_offset(whole, metadata_end, s);
        for (uint64_t k = 0; k < sh->file_blocks; ++k) {
            const uint64_t n = MIN(8192u, nnz - 8192u * k);
            assert_int_equal(sums[s * sh->file_blocks + k],
                             XXH3_64bits(section + 8192u * k * bytes, n * bytes));
        }
    }
    GError *error = NULL;
    if (!th_tensor_binary_check_block_sums("t.tnsb", sh, sums, &error))
        fail_msg("%u shares: %s", parts, error->message);
    assert_null(error);
    share_set_clear(&set);
}

/* For tensors of fewer nonzeros than shares, of part of a checksum block,
 * of whole blocks, and of several blocks and a part, with any thread
 * count: the shares, one after the other, are the whole read. */
static void test_shares_make_the_whole(void **state)
{
    (void)state;
    static const struct {
        uint32_t nmodes;
        uint64_t nnz;
    } cases[] = {{3, 1}, {3, 2}, {3, 4}, {4, 8191}, {3, 8192}, {3, 8193}, {4, 16384},
                 {3, 20000}, {4, 24577}};
    static const uint32_t parts[] = {1, 2, 3, 5};
    const char *note = "shared";
    th_sptensor *tensors[G_N_ELEMENTS(cases) + 2];
    for (size_t k = 0; k < G_N_ELEMENTS(cases); ++k) {
        tensors[k] = random_tensor(cases[k].nmodes, cases[k].nnz, 40u + (guint32)k);
        th_sptensor_sort_and_merge(tensors[k]);
        assert_int_equal(tensors[k]->nnz, cases[k].nnz);
    }
    tensors[G_N_ELEMENTS(cases)] = six_nonzeros(); /* a zero among the values */
    tensors[G_N_ELEMENTS(cases) + 1] = spread_tensor(20003);
    for (size_t k = 0; k < G_N_ELEMENTS(tensors); ++k) {
        g_autoptr(GByteArray) b = write_to_memory(tensors[k], note);
        g_autoptr(th_sptensor) whole = read_bytes_ok(b);
        assert_same_tensor(whole, tensors[k]);
        for (uint32_t threads = 1; threads <= 3; ++threads) {
            th_tensor_binary_set_threads(threads);
            for (size_t p = 0; p < G_N_ELEMENTS(parts); ++p)
                assert_shares_make_whole(b, whole, note, parts[p]);
        }
        th_tensor_binary_set_threads(0);
        th_sptensor_free(tensors[k]);
    }
}

/* A byte changed in a section, behind the header's checksums, with the
 * content still valid: every share reads, and only the joined hashes
 * find it, naming the section as a whole read does. */
static void test_shares_find_a_flipped_byte_together(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = spread_tensor(20003); /* gaps between the sections */
    g_autoptr(GByteArray) b = write_to_memory(t, NULL);
    const size_t metadata_end = metadata_end_of(t, NULL);
    static const uint32_t parts[] = {1, 2, 3, 5};
    for (uint32_t s = 0; s <= t->nmodes; ++s) {
        /* A nonzero in a later share and block for each section. */
        const uint64_t wanted = 3000u + 4500u * s;
        size_t at;
        if (s < t->nmodes) {
            const uint64_t i = settable_nonzero(t, wanted, s, TRUE, 0);
            at = section_offset(t, metadata_end, s) + 4u * i; /* the low byte: ^ 1 */
        } else {
            at = section_offset(t, metadata_end, s) + 8u * wanted; /* the lowest mantissa bits */
        }
        b->data[at] ^= 0x01u;
        g_autofree char *name = section_label(t, s);
        g_autofree char *expected =
            g_strdup_printf("t.tnsb: checksum mismatch in the %s: the file is corrupt", name);
        assert_bytes_error(b, TH_TENSOR_READER_ERROR_CHECKSUM, expected);
        for (size_t p = 0; p < G_N_ELEMENTS(parts); ++p) {
            share_set set;
            read_shares_ok(b, parts[p], &set);
            g_autofree uint64_t *sums = join_block_sums(&set);
            GError *error = NULL;
            assert_false(th_tensor_binary_check_block_sums("t.tnsb", &set.share[0], sums, &error));
            assert_error(error, TH_TENSOR_READER_ERROR_CHECKSUM, expected);
            g_error_free(error);
            share_set_clear(&set);
        }
        b->data[at] ^= 0x01u;
    }

    /* Two sections changed: the first is named. */
    const uint64_t i = settable_nonzero(t, 17000, 2, TRUE, 0);
    const size_t in_mode_3 = section_offset(t, metadata_end, 2) + 4u * i;
    const size_t in_values = section_offset(t, metadata_end, 3) + 8u * 100u + 1u;
    b->data[in_mode_3] ^= 0x01u;
    b->data[in_values] ^= 0x80u;
    share_set set;
    read_shares_ok(b, 3, &set);
    g_autofree uint64_t *sums = join_block_sums(&set);
    GError *error = NULL;
    assert_false(th_tensor_binary_check_block_sums("t.tnsb", &set.share[0], sums, &error));
    assert_error(error, TH_TENSOR_READER_ERROR_CHECKSUM,
                 "t.tnsb: checksum mismatch in the mode 3 indices: the file is corrupt");
    g_error_free(error);
    share_set_clear(&set);
    b->data[in_mode_3] ^= 0x01u;
    b->data[in_values] ^= 0x80u;

    /* The padding has no checksum: each share checks it. */
    const size_t gap = section_offset(t, metadata_end, 1) - 1u;
    assert_true(gap >= section_offset(t, metadata_end, 0) + 4u * t->nnz);
    b->data[gap] = 1;
    for (uint32_t p = 0; p < 3; ++p) {
        th_tensor_share share;
        GError *padding_error = NULL;
        assert_null(read_share_bytes(b, p, 3, &share, &padding_error));
        assert_error(padding_error, TH_TENSOR_READER_ERROR_CHECKSUM,
                     "t.tnsb: the padding before the mode 2 indices is not zero: the file is "
                     "corrupt");
        assert_null(share.block_sums);
        g_error_free(padding_error);
    }
}

/* Only a version 2 file flagged sorted can be shared: others are refused
 * by every share, saying to convert again. */
static void test_shares_need_a_sorted_version_2_file(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = random_tensor(3, 9000, 12);
    th_sptensor_sort_and_merge(t);
    static const struct {
        uint16_t major;
        uint64_t flags;
        const char *expected;
    } cases[] = {
        {2, 0,
         "t.tnsb: the file is not flagged sorted, so a coordinate could repeat across two "
         "shares; convert it again (tensorhost convert writes sorted files)"},
        {1, 1,
         "t.tnsb: a version 1.0 binary tensor is checked whole, so it cannot be read in "
         "shares; convert it again (tensorhost convert writes version 2)"},
        {1, 0,
         "t.tnsb: a version 1.0 binary tensor is checked whole, so it cannot be read in "
         "shares; convert it again (tensorhost convert writes version 2)"},
    };
    for (size_t k = 0; k < G_N_ELEMENTS(cases); ++k) {
        g_autoptr(GByteArray) b =
            encode(&(layout_spec){.t = t, .major = cases[k].major, .flags = cases[k].flags});
        g_autoptr(th_sptensor) whole = read_bytes_ok(b); /* a whole read takes it */
        assert_same_tensor(whole, t);
        for (uint32_t parts = 1; parts <= 3; ++parts)
            for (uint32_t p = 0; p < parts; ++p) {
                th_tensor_share share;
                GError *error = NULL;
                assert_null(read_share_bytes(b, p, parts, &share, &error));
                assert_error(error, TH_TENSOR_READER_ERROR_UNSUPPORTED, cases[k].expected);
                assert_null(share.block_sums);
                g_error_free(error);
            }
    }
    /* The writer's own file, its flag bit cleared and the file resealed. */
    g_autoptr(GByteArray) b = write_to_memory(t, NULL);
    assert_int_equal(b->data[32] & 1u, 1u);
    b->data[32] &= (uint8_t)~1u;
    assert_true(th_tensor_binary_reseal(b->data, b->len));
    th_tensor_share share;
    GError *error = NULL;
    assert_null(read_share_bytes(b, 1, 2, &share, &error));
    assert_error(error, TH_TENSOR_READER_ERROR_UNSUPPORTED, cases[0].expected);
    g_error_free(error);
}

/* Reads every share of `parts`: share `bad` must fail with `code` and
 * `expected`, the others read. */
static void assert_only_share_fails(const GByteArray *b, uint32_t parts, uint32_t bad, int code,
                                    const char *expected)
{
    for (uint32_t p = 0; p < parts; ++p) {
        th_tensor_share share;
        GError *error = NULL;
        th_sptensor *t = read_share_bytes(b, p, parts, &share, &error);
        if (p == bad) {
            if (t != NULL)
                fail_msg("share %u of %u read without an error", p, parts);
            assert_error(error, code, expected);
            assert_null(share.block_sums);
            g_error_free(error);
            continue;
        }
        if (error != NULL)
            fail_msg("share %u of %u: unexpected error: %s", p, parts, error->message);
        th_sptensor_free(t);
        th_tensor_share_clear(&share);
    }
}

static void swap_nonzeros(th_sptensor *t, uint64_t i, uint64_t j)
{
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        const th_index index = t->indices[m][i];
        t->indices[m][i] = t->indices[m][j];
        t->indices[m][j] = index;
    }
    const double value = t->values[i];
    t->values[i] = t->values[j];
    t->values[j] = value;
}

/* A file flagged sorted that is out of order, or repeats a coordinate,
 * exactly across two shares (each share in order by itself): the share
 * that starts there finds it, whatever the threads. */
static void test_share_boundary_order(void **state)
{
    (void)state;
    /* Six nonzeros, two shares of [0, 3) and [3, 6). */
    g_autoptr(th_sptensor) swapped = six_nonzeros();
    swap_nonzeros(swapped, 2, 3);
    g_autoptr(GByteArray) b = encode(&(layout_spec){.t = swapped, .flags = 1});
    assert_only_share_fails(b, 2, 1, TH_TENSOR_READER_ERROR_CHECKSUM,
                            "t.tnsb: the file is flagged sorted, but nonzeros 4 to 6 are not in "
                            "order without repeats: the file is corrupt; convert it again");
    g_autoptr(th_sptensor) repeated = six_nonzeros();
    for (uint32_t m = 0; m < 3; ++m)
        repeated->indices[m][3] = repeated->indices[m][2];
    g_autoptr(GByteArray) r = encode(&(layout_spec){.t = repeated, .flags = 1});
    assert_only_share_fails(r, 2, 1, TH_TENSOR_READER_ERROR_CHECKSUM,
                            "t.tnsb: the file is flagged sorted, but nonzeros 4 to 6 are not in "
                            "order without repeats: the file is corrupt; convert it again");

    /* 20000 nonzeros in three shares, from 0, 6667 and 13334; swapped
     * across the second boundary, in a checksum block's middle. */
    g_autoptr(th_sptensor) t = random_tensor(3, 20000, 13);
    th_sptensor_sort_and_merge(t);
    swap_nonzeros(t, 13333, 13334);
    g_autoptr(GByteArray) large = encode(&(layout_spec){.t = t, .flags = 1});
    for (uint32_t threads = 1; threads <= 3; ++threads) {
        th_tensor_binary_set_threads(threads);
        assert_only_share_fails(large, 3, 2, TH_TENSOR_READER_ERROR_CHECKSUM,
                                "t.tnsb: the file is flagged sorted, but nonzeros 13335 to 20000 "
                                "are not in order without repeats: the file is corrupt; convert "
                                "it again");
        /* In two shares, the pair lies inside the second: found there. */
        assert_only_share_fails(large, 2, 1, TH_TENSOR_READER_ERROR_CHECKSUM,
                                "t.tnsb: the file is flagged sorted, but nonzeros 10001 to 20000 "
                                "are not in order without repeats: the file is corrupt; convert "
                                "it again");
    }
    th_tensor_binary_set_threads(0);
}

/* A content error inside a share names the nonzero by its number in the
 * file, not in the share. */
static void test_share_content_error_numbers(void **state)
{
    (void)state;
    g_autoptr(th_sptensor) t = random_tensor(3, 20000, 14);
    th_sptensor_sort_and_merge(t);
    const uint64_t i = settable_nonzero(t, 15000, 2, FALSE, 17); /* mode 3 has size 17 */
    assert_true(i >= 13334); /* in the last of three shares */
    g_autoptr(th_sptensor) beyond = th_sptensor_copy(t);
    beyond->indices[2][i] = 17;
    g_autoptr(GByteArray) b = encode(&(layout_spec){.t = beyond, .flags = 1});
    g_autofree char *expected = g_strdup_printf(
        "t.tnsb: nonzero %" G_GUINT64_FORMAT " of 20000: mode 3 index 17 is out of range: "
        "the header gives mode 3 size 17 (indices 0 to 16)",
        i + 1u);
    assert_bytes_error(b, TH_TENSOR_READER_ERROR_INDEX_RANGE, expected);
    for (uint32_t threads = 1; threads <= 3; ++threads) {
        th_tensor_binary_set_threads(threads);
        assert_only_share_fails(b, 2, 1, TH_TENSOR_READER_ERROR_INDEX_RANGE, expected);
        assert_only_share_fails(b, 3, 2, TH_TENSOR_READER_ERROR_INDEX_RANGE, expected);
        assert_only_share_fails(b, 5, (uint32_t)(i / 4000u), TH_TENSOR_READER_ERROR_INDEX_RANGE,
                                expected);
    }
    th_tensor_binary_set_threads(0);

    g_autoptr(th_sptensor) not_finite = th_sptensor_copy(t);
    not_finite->values[4321] = INFINITY;
    g_autoptr(GByteArray) v = encode(&(layout_spec){.t = not_finite, .flags = 1});
    const char *value_error = "t.tnsb: nonzero 4322 of 20000: value inf is not finite";
    assert_bytes_error(v, TH_TENSOR_READER_ERROR_VALUE, value_error);
    assert_only_share_fails(v, 5, 1, TH_TENSOR_READER_ERROR_VALUE, value_error);
}

/* ---- tensorhost convert --------------------------------------------------- */

/* Runs `tensorhost convert ARGS...` (NULL-terminated). */
static th_test_run run_convert(const char *first, ...)
{
    const char *argv[16] = {"convert"};
    size_t n = 1;
    va_list args;
    va_start(args, first);
    for (const char *a = first; a != NULL; a = va_arg(args, const char *)) {
        assert_true(n + 1 < G_N_ELEMENTS(argv));
        argv[n++] = a;
    }
    va_end(args);
    return th_test_run_program(TH_TENSORHOST_EXE, argv);
}

static void assert_status(const th_test_run *r, int status)
{
    if (r->status != status)
        fail_msg("exit %d, expected %d\nstdout:\n%s\nstderr:\n%s", r->status, status, r->out,
                 r->err);
}

/* The names in `dir` other than those listed (NULL-terminated). */
static void assert_only_files(const char *dir, ...)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    assert_non_null(d);
    for (const char *name; (name = g_dir_read_name(d));) {
        gboolean listed = FALSE;
        va_list args;
        va_start(args, dir);
        for (const char *n = va_arg(args, const char *); n != NULL && !listed;
             n = va_arg(args, const char *))
            listed = strcmp(n, name) == 0;
        va_end(args);
        if (!listed)
            fail_msg("unexpected file in %s: %s", dir, name);
    }
}

static char *scratch_dir(void)
{
    char *dir = g_build_filename(temp_dir, "convert-XXXXXX", NULL);
    if (!g_mkdtemp(dir))
        fail_msg("cannot make a folder: %s", g_strerror(errno));
    return dir;
}

/* Text -> binary -> text and .tns.gz, with the summary line, the files'
 * modes from the umask, and the same tensor at every step. */
static void test_convert_both_ways(void **state)
{
    (void)state;
    g_autofree char *dir = scratch_dir();
    g_autoptr(th_sptensor) source = random_tensor(3, 2000, 9);
    g_autofree char *text = g_build_filename(dir, "in.tns", NULL);
    GError *error = NULL;
    assert_true(th_tensor_write_tns(source, text, &error));
    g_autoptr(th_sptensor) expected = th_tensor_read_file(text, NULL, &error);
    assert_non_null(expected);

    g_autofree char *binary = g_build_filename(dir, "out.tnsb", NULL);
    const mode_t saved = umask(027); /* inherited by the program */
    th_test_run r = run_convert(text, binary, NULL);
    umask(saved);
    assert_status(&r, 0);
    g_autofree char *dims = g_strdup_printf("%ux%ux%u", expected->dims[0], expected->dims[1],
                                            expected->dims[2]);
    assert_true(g_str_has_prefix(r.out, "tensorhost convert: "));
    assert_non_null(strstr(r.out, " -> "));
    assert_non_null(strstr(r.out, "(binary): 2000 nonzeros, dims "));
    assert_non_null(strstr(r.out, dims));
    assert_string_equal(strchr(r.out, '\n'), "\n"); /* one line */
    assert_string_equal(r.err, "");
    th_test_run_clear(&r);
    struct stat st;
    assert_int_equal(stat(binary, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    g_autoptr(th_sptensor) from_binary = th_tensor_binary_read(binary, NULL, &error);
    assert_non_null(from_binary);
    assert_same_tensor(from_binary, expected);

    g_autofree char *back = g_build_filename(dir, "back.tns", NULL);
    g_autofree char *back_gz = g_build_filename(dir, "back.tns.gz", NULL);
    g_autofree char *copy = g_build_filename(dir, "copy.bin", NULL);
    const char *outputs[3] = {back, back_gz, copy};
    for (int k = 0; k < 3; ++k) {
        r = run_convert("-q", binary, outputs[k], NULL);
        assert_status(&r, 0);
        assert_string_equal(r.out, "");
        th_test_run_clear(&r);
        g_autoptr(th_sptensor) again = th_tensor_read_file(outputs[k], NULL, &error);
        assert_non_null(again);
        assert_same_tensor(again, expected);
    }
    /* .tns is text, .tns.gz gzip, anything else binary. */
    char head[32];
    FILE *f = fopen(back, "rb");
    assert_non_null(f);
    assert_int_equal(fread(head, 1, 25, f), 25);
    fclose(f);
    assert_memory_equal(head, "# tensorhost header: 1.0\n", 25);
    f = fopen(back_gz, "rb");
    assert_int_equal(fread(head, 1, 2, f), 2);
    fclose(f);
    assert_true((uint8_t)head[0] == 0x1f && (uint8_t)head[1] == 0x8b);
    f = fopen(copy, "rb");
    assert_int_equal(fread(head, 1, 8, f), 8);
    fclose(f);
    assert_memory_equal(head, "THTENSOR", 8);
    assert_only_files(dir, "in.tns", "out.tnsb", "back.tns", "back.tns.gz", "copy.bin", NULL);
}

/* Errors: one line, exit 1, and nothing written, not even a temporary file;
 * an existing OUT is left as it was. */
static void test_convert_errors_leave_nothing(void **state)
{
    (void)state;
    g_autofree char *dir = scratch_dir();
    g_autofree char *missing = g_build_filename(dir, "missing.tns", NULL);
    g_autofree char *out = g_build_filename(dir, "out.tnsb", NULL);
    th_test_run r = run_convert(missing, out, NULL);
    assert_status(&r, 1);
    g_autofree char *expected =
        g_strdup_printf("tensorhost: error: %s: cannot open: No such file or directory\n",
                        missing);
    assert_string_equal(r.err, expected);
    assert_string_equal(r.out, "");
    th_test_run_clear(&r);
    assert_only_files(dir, NULL);

    /* A corrupt binary input, over an existing OUT. */
    g_autoptr(th_sptensor) t = six_nonzeros();
    g_autoptr(GByteArray) b = encode(&(layout_spec){.t = t, .flags = 1});
    const size_t values = section_offset(t, metadata_end_of(t, NULL), 3);
    b->data[values + 3] ^= 0x10;
    g_autofree char *corrupt = g_build_filename(dir, "corrupt.tnsb", NULL);
    assert_true(g_file_set_contents(corrupt, (const char *)b->data, b->len, NULL));
    assert_true(g_file_set_contents(out, "keep", 4, NULL));
    r = run_convert(corrupt, out, NULL);
    assert_status(&r, 1);
    g_autofree char *corrupt_message = g_strdup_printf(
        "tensorhost: error: %s: checksum mismatch in the values: the file is corrupt\n",
        corrupt);
    assert_string_equal(r.err, corrupt_message);
    th_test_run_clear(&r);
    g_autofree char *kept = NULL;
    assert_true(g_file_get_contents(out, &kept, NULL, NULL));
    assert_string_equal(kept, "keep");
    assert_only_files(dir, "corrupt.tnsb", "out.tnsb", NULL);

    /* An output folder that does not exist. */
    g_autofree char *good = g_build_filename(dir, "good.tnsb", NULL);
    b->data[values + 3] ^= 0x10;
    assert_true(g_file_set_contents(good, (const char *)b->data, b->len, NULL));
    g_autofree char *nowhere = g_build_filename(dir, "no", "such", "dir.tns", NULL);
    r = run_convert(good, nowhere, NULL);
    assert_status(&r, 1);
    assert_true(g_str_has_prefix(r.err, "tensorhost: error: "));
    assert_non_null(strstr(r.err, nowhere));
    th_test_run_clear(&r);
    assert_only_files(dir, "corrupt.tnsb", "out.tnsb", "good.tnsb", NULL);

    /* Where OUT goes is checked before the input is read: a folder as OUT
     * is the error even with a missing input. */
    r = run_convert(missing, dir, NULL);
    assert_status(&r, 1);
    g_autofree char *folder = g_strdup_printf(
        "tensorhost: error: %s is a folder; name the file to write\n", dir);
    assert_string_equal(r.err, folder);
    th_test_run_clear(&r);
    assert_only_files(dir, "corrupt.tnsb", "out.tnsb", "good.tnsb", NULL);
}

static void test_convert_usage(void **state)
{
    (void)state;
    th_test_run r = run_convert("only-one.tns", NULL);
    assert_status(&r, 2);
    assert_string_equal(r.err,
                        "tensorhost convert: expected IN and OUT, got fewer (see --help)\n");
    th_test_run_clear(&r);
    r = run_convert("a", "b", "c", NULL);
    assert_status(&r, 2);
    th_test_run_clear(&r);
    r = run_convert("--bogus", "a", "b", NULL);
    assert_status(&r, 2);
    assert_non_null(strstr(r.err, "--bogus"));
    th_test_run_clear(&r);
    r = run_convert("--help", NULL);
    assert_status(&r, 0);
    assert_non_null(strstr(r.out, "tensorhost convert"));
    assert_non_null(strstr(r.out, ".tnsb"));
    th_test_run_clear(&r);
}

/* What the program printed on stdout, checked to be one summary line. */
static const char *summary_line(const th_test_run *r)
{
    assert_true(g_str_has_prefix(r->out, "tensorhost convert: "));
    assert_string_equal(strchr(r->out, '\n'), "\n");
    return r->out;
}

/* The case: a synthetic tensor of the vast shape, whose modes' last
 * indices hold no nonzero, to text and back keeps its dims and its label,
 * and the summaries say what was written. */
static void test_convert_keeps_dims_and_label(void **state)
{
    (void)state;
    g_autofree char *dir = scratch_dir();
    g_autofree char *synthetic = g_build_filename(dir, "vast.tnsb", NULL);
    const char *synth_args[] = {"--preset", "vast", "--nnz", "40", "--output", synthetic, NULL};
    th_test_run r = th_test_run_program(TH_SYNTH_EXE, synth_args);
    assert_status(&r, 0);
    th_test_run_clear(&r);
    GError *error = NULL;
    g_autoptr(th_sptensor) original = th_tensor_read_file(synthetic, NULL, &error);
    assert_non_null(original);
    assert_non_null(original->label);
    assert_true(g_str_has_prefix(original->label, "synthetic tensor: tensorhost-synth dims="
                                                  "165427x11374x2x100x89 nnz=40 "));
    const char *dims = "dims 165427x11374x2x100x89";

    const char *texts[] = {"vast.tns", "vast.tns.gz"};
    for (size_t k = 0; k < G_N_ELEMENTS(texts); ++k) {
        g_autofree char *text = g_build_filename(dir, texts[k], NULL);
        g_autofree char *back = g_build_filename(dir, "back.tnsb", NULL);
        r = run_convert(synthetic, text, NULL);
        assert_status(&r, 0);
        const char *line = summary_line(&r);
        assert_non_null(strstr(line, "(text): 40 nonzeros, "));
        assert_non_null(strstr(line, dims));
        g_autofree char *label = g_strdup_printf("; label: %s\n", original->label);
        assert_true(g_str_has_suffix(line, label));
        th_test_run_clear(&r);

        r = run_convert(text, back, NULL);
        assert_status(&r, 0);
        line = summary_line(&r);
        assert_non_null(strstr(line, dims));
        assert_true(g_str_has_suffix(line, label));
        th_test_run_clear(&r);
        g_autoptr(th_sptensor) again = th_tensor_read_file(back, NULL, &error);
        assert_non_null(again);
        assert_same_tensor(again, original);
        assert_same_label(again->label, original->label);
    }
}

/* The summary's counts in the singular; a tensor without a label says so. */
static void test_convert_summary_of_one_nonzero(void **state)
{
    (void)state;
    g_autofree char *dir = scratch_dir();
    g_autofree char *in = g_build_filename(dir, "one.tns", NULL);
    g_autofree char *out = g_build_filename(dir, "one.tnsb", NULL);
    assert_true(g_file_set_contents(in, "2 3 1.5\n2 3 1.0\n", -1, NULL));
    th_test_run r = run_convert(in, out, NULL);
    assert_status(&r, 0);
    const char *line = summary_line(&r);
    assert_non_null(strstr(line, "(binary): 1 nonzero (1 duplicate summed), dims 2x3, "));
    assert_true(g_str_has_suffix(line, "; no label\n"));
    th_test_run_clear(&r);
}

/* Bytes and modification time of a file, to see that it was not touched. */
static char *file_state(const char *path)
{
    g_autofree char *contents = NULL;
    gsize length = 0;
    assert_true(g_file_get_contents(path, &contents, &length, NULL));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return g_strdup_printf("%" G_GSIZE_FORMAT " bytes, ino %lu, mtime %ld.%09ld: %s", length,
                           (unsigned long)st.st_ino, (long)st.st_mtim.tv_sec,
                           (long)st.st_mtim.tv_nsec, contents);
}

/* OUT naming IN's file, by the same path, another path, a symbolic link or a
 * hard link, either way round: one error before any work, the input as it
 * was, nothing else written. */
static void test_convert_refuses_output_as_input(void **state)
{
    (void)state;
    g_autofree char *dir = scratch_dir();
    g_autofree char *in = g_build_filename(dir, "in.tns", NULL);
    g_autofree char *dotted = g_build_filename(dir, ".", "sub", "..", "in.tns", NULL);
    g_autofree char *symlink_path = g_build_filename(dir, "symlink.tns", NULL);
    g_autofree char *hardlink = g_build_filename(dir, "hardlink.tns", NULL);
    assert_true(g_file_set_contents(in, "1 1 1.0\n2 2 2.0\n", -1, NULL));
    g_autofree char *sub = g_build_filename(dir, "sub", NULL);
    assert_int_equal(g_mkdir(sub, 0700), 0);
    assert_int_equal(symlink("in.tns", symlink_path), 0);
    assert_int_equal(link(in, hardlink), 0);
    g_autofree char *before = file_state(in);
    const struct {
        const char *in, *out;
        gboolean same_path;
    } cases[] = {
        {in, in, TRUE},
        {in, dotted, TRUE},
        {in, symlink_path, FALSE},
        {symlink_path, in, FALSE},
        {in, hardlink, FALSE},
        {hardlink, in, FALSE},
    };
    for (size_t k = 0; k < G_N_ELEMENTS(cases); ++k) {
        th_test_run r = run_convert(cases[k].in, cases[k].out, NULL);
        assert_status(&r, 1);
        g_autofree char *expected =
            cases[k].same_path
                ? g_strdup_printf("tensorhost: error: OUT %s is IN itself: converting would "
                                  "replace the input; name another file to write\n",
                                  cases[k].out)
                : g_strdup_printf("tensorhost: error: OUT %s is the same file as IN %s (a link "
                                  "to it, or another path to it): converting would replace "
                                  "the input; name another file to write\n",
                                  cases[k].out, cases[k].in);
        assert_string_equal(r.err, expected);
        assert_string_equal(r.out, "");
        th_test_run_clear(&r);
        g_autofree char *after = file_state(in);
        assert_string_equal(after, before);
        assert_only_files(dir, "in.tns", "sub", "symlink.tns", "hardlink.tns", NULL);
    }
    struct stat st;
    assert_int_equal(lstat(symlink_path, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
}

/* tensorhost-synth's counts: 0 and negative named as what is wrong. */
static void test_synth_nnz_messages(void **state)
{
    (void)state;
    g_autofree char *dir = scratch_dir();
    g_autofree char *out = g_build_filename(dir, "s.tns", NULL);
    const struct {
        const char *dims_or_preset, *value, *nnz, *expected;
    } cases[] = {
        {"--dims", "10x10", "0",
         "tensorhost-synth: --nnz 0: expected 1 or more (the number of distinct nonzeros to "
         "generate)\n"},
        {"--preset", "uber", "0",
         "tensorhost-synth: --nnz 0: expected 1 or more (the number of distinct nonzeros to "
         "generate)\n"},
        {"--dims", "10x10", "-3",
         "tensorhost-synth: --nnz -3: expected 1 or more (the number of distinct nonzeros to "
         "generate)\n"},
        {"--dims", "10x10", NULL,
         "tensorhost-synth: --dims gives no count: give --nnz N too (the number of distinct "
         "nonzeros, 1 or more)\n"},
    };
    for (size_t k = 0; k < G_N_ELEMENTS(cases); ++k) {
        const char *args[] = {cases[k].dims_or_preset, cases[k].value, "--output", out,
                              cases[k].nnz ? "--nnz" : NULL, cases[k].nnz, NULL};
        th_test_run r = th_test_run_program(TH_SYNTH_EXE, args);
        assert_status(&r, 2);
        assert_string_equal(r.err, cases[k].expected);
        th_test_run_clear(&r);
    }
    assert_only_files(dir, NULL);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest format_tests[] = {
        cmocka_unit_test(test_writer_matches_documented_layout),
        cmocka_unit_test(test_duplicates_summing_beyond_double),
        cmocka_unit_test(test_reseal),
        cmocka_unit_test(test_round_trip_text_binary),
        cmocka_unit_test(test_host_memory_asked_first),
        cmocka_unit_test(test_later_minor_version),
        cmocka_unit_test(test_not_binary),
        cmocka_unit_test(test_other_major_version),
        cmocka_unit_test(test_index_width_8),
        cmocka_unit_test(test_bad_header_fields),
        cmocka_unit_test(test_zero_nnz),
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_every_flipped_byte),
        cmocka_unit_test(test_flipped_byte_in_later_block),
        cmocka_unit_test(test_version_1_files),
        cmocka_unit_test(test_index_out_of_range),
        cmocka_unit_test(test_values_not_finite),
        cmocka_unit_test(test_unsorted_is_sorted_and_merged),
        cmocka_unit_test(test_thread_counts_agree),
        cmocka_unit_test(test_writer_refuses_unreadable),
        cmocka_unit_test(test_writer_file_mode),
        cmocka_unit_test(test_progress_and_shrinking_file),
        cmocka_unit_test(test_cancel_before_reading),
        cmocka_unit_test(test_fifo),
        cmocka_unit_test(test_note_is_the_label),
        cmocka_unit_test(test_round_trip_keeps_dims_and_label),
        cmocka_unit_test(test_shares_make_the_whole),
        cmocka_unit_test(test_shares_find_a_flipped_byte_together),
        cmocka_unit_test(test_shares_need_a_sorted_version_2_file),
        cmocka_unit_test(test_share_boundary_order),
        cmocka_unit_test(test_share_content_error_numbers),
    };
    const struct CMUnitTest convert_tests[] = {
        cmocka_unit_test(test_convert_both_ways),
        cmocka_unit_test(test_convert_errors_leave_nothing),
        cmocka_unit_test(test_convert_usage),
        cmocka_unit_test(test_convert_keeps_dims_and_label),
        cmocka_unit_test(test_convert_summary_of_one_nonzero),
        cmocka_unit_test(test_convert_refuses_output_as_input),
        cmocka_unit_test(test_synth_nnz_messages),
    };
    /* "convert": the program's tests (ctest test_convert, label e2e). */
    if (argc > 1 && strcmp(argv[1], "convert") == 0)
        return cmocka_run_group_tests_name("tensorhost convert", convert_tests, make_temp_dir,
                                           remove_temp_dir);
    return cmocka_run_group_tests_name("binary tensor format", format_tests, make_temp_dir,
                                       remove_temp_dir);
}
