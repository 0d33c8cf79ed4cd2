#include "output/npy_io.h"

#include <string.h>

#include <gio/gio.h> /* G_IO_ERROR_CANCELLED */

#include "base/atomic_file.h"
#include "base/cancel.h"
#include "base/message_text.h"
#include "tensor/tensor_reader.h"

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* numpy pads the header so that the data starts at a multiple of 64 bytes. */
#define NPY_ALIGN 64u
/* Values written between two looks at th_cancel_abort_requested(): 64 MB. */
#define NPY_CHUNK_VALUES ((uint64_t)8 << 20)

/* A second stop while outputs are written (cancel.h): the file is left as
 * it was. */
static void write_aborted(th_atomic_file *file, const char *path, uint64_t done,
                              uint64_t count, GError **error)
{
    th_atomic_file_abort(file);
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_CANCELLED,
                "%s: writing aborted after %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
                " values; the file was not replaced",
                path, done, count);
}

th_atomic_file *th_write_npy_staged(const char *path, const double *data, uint64_t rows,
                                    uint32_t cols, GError **error)
{
    g_autofree char *shape = cols == 0 ? g_strdup_printf("(%" G_GUINT64_FORMAT ",)", rows)
                                       : g_strdup_printf("(%" G_GUINT64_FORMAT ", %u)", rows, cols);
    GString *header = g_string_new(NULL);
    g_string_printf(header, "{'descr': '<f8', 'fortran_order': False, 'shape': %s, }", shape);
    const size_t preamble = sizeof npy_magic + 2 + 2; /* magic, version, header length */
    while ((preamble + header->len + 1) % NPY_ALIGN != 0)
        g_string_append_c(header, ' ');
    g_string_append_c(header, '\n');
    g_autofree char *text = g_string_free(header, FALSE);
    const size_t header_length = strlen(text);

    th_atomic_file *file = th_atomic_file_open(path, error);
    if (!file)
        return NULL;
    FILE *out = th_atomic_file_stream(file);
    const uint8_t version[2] = {1, 0};
    const uint8_t length[2] = {(uint8_t)(header_length & 0xff), (uint8_t)(header_length >> 8)};
    fwrite(npy_magic, 1, sizeof npy_magic, out);
    fwrite(version, 1, 2, out);
    fwrite(length, 1, 2, out);
    fwrite(text, 1, header_length, out);
    const uint64_t count = rows * (cols ? cols : 1);
    for (uint64_t done = 0; done < count; done += NPY_CHUNK_VALUES) {
        if (th_cancel_abort_requested()) {
            write_aborted(file, path, done, count, error);
            return NULL;
        }
        const uint64_t n = MIN(NPY_CHUNK_VALUES, count - done);
#if G_BYTE_ORDER == G_LITTLE_ENDIAN
        fwrite(data + done, sizeof(double), n, out);
#else
        for (uint64_t i = done; i < done + n; ++i) {
            uint64_t bits;
            memcpy(&bits, &data[i], sizeof bits);
            bits = GUINT64_TO_LE(bits);
            fwrite(&bits, sizeof bits, 1, out);
        }
#endif
    }
    if (th_cancel_abort_requested()) {
        write_aborted(file, path, count, count, error);
        return NULL;
    }
    return th_atomic_file_finish(file, error) ? file : NULL;
}

gboolean th_write_npy(const char *path, const double *data, uint64_t rows, uint32_t cols,
                      GError **error)
{
    th_atomic_file *file = th_write_npy_staged(path, data, rows, cols, error);
    return file && th_atomic_file_commit(file, error);
}

/* ---- Reading -------------------------------------------------------------- */

typedef struct header_cursor {
    const char *at, *end;
} header_cursor;

static void skip_spaces(header_cursor *c)
{
    while (c->at < c->end && (*c->at == ' ' || *c->at == '\t'))
        c->at++;
}

static gboolean take(header_cursor *c, char expected)
{
    skip_spaces(c);
    if (c->at < c->end && *c->at == expected) {
        c->at++;
        return TRUE;
    }
    return FALSE;
}

/* A quoted string ('...' or "...") without escapes, as numpy writes them. */
static char *take_string(header_cursor *c)
{
    skip_spaces(c);
    if (c->at >= c->end || (*c->at != '\'' && *c->at != '"'))
        return NULL;
    const char quote = *c->at++;
    const char *start = c->at;
    while (c->at < c->end && *c->at != quote)
        c->at++;
    if (c->at >= c->end)
        return NULL;
    char *text = g_strndup(start, (gsize)(c->at - start));
    c->at++;
    return text;
}

static gboolean take_word(header_cursor *c, const char *word)
{
    skip_spaces(c);
    const size_t n = strlen(word);
    if ((size_t)(c->end - c->at) >= n && memcmp(c->at, word, n) == 0) {
        c->at += n;
        return TRUE;
    }
    return FALSE;
}

/* "(a, b)", "(a,)" or "()": at most 2 dimensions. */
static gboolean take_shape(header_cursor *c, uint64_t *dims, int *ndims)
{
    if (!take(c, '('))
        return FALSE;
    *ndims = 0;
    for (;;) {
        if (take(c, ')'))
            return TRUE;
        skip_spaces(c);
        if (*ndims == 2 || c->at >= c->end || !g_ascii_isdigit(*c->at))
            return FALSE;
        uint64_t value = 0;
        while (c->at < c->end && g_ascii_isdigit(*c->at)) {
            const unsigned digit = (unsigned)(*c->at++ - '0');
            if (value > (UINT64_MAX - digit) / 10)
                return FALSE;
            value = value * 10 + digit;
        }
        dims[(*ndims)++] = value;
        if (!take(c, ',') && !(skip_spaces(c), c->at < c->end && *c->at == ')'))
            return FALSE;
    }
}

static double *fail(GError **error, const char *name, const char *what)
{
    g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_HEADER,
                "%s: not a .npy file of doubles this program reads: %s", name, what);
    return NULL;
}

double *th_parse_npy(const char *name, const uint8_t *data, size_t length, uint64_t *rows,
                     uint32_t *cols, GError **error)
{
    if (length < 10 || memcmp(data, npy_magic, sizeof npy_magic) != 0)
        return fail(error, name, "it does not start with the .npy magic \\x93NUMPY");
    const uint8_t major = data[6];
    size_t header_length, start;
    if (major == 1) {
        header_length = (size_t)data[8] | (size_t)data[9] << 8;
        start = 10;
    } else if (major == 2 || major == 3) {
        if (length < 12)
            return fail(error, name, "the header is truncated");
        header_length = (size_t)data[8] | (size_t)data[9] << 8 | (size_t)data[10] << 16 |
                        (size_t)data[11] << 24;
        start = 12;
    } else {
        return fail(error, name, "format version 1, 2 or 3 expected");
    }
    if (header_length > length - start)
        return fail(error, name, "the header runs past the end of the file");
    header_cursor c = {(const char *)data + start, (const char *)data + start + header_length};
    g_autofree char *descr = NULL;
    gboolean have_order = FALSE, fortran = FALSE, have_shape = FALSE;
    uint64_t dims[2] = {0, 0};
    int ndims = 0;
    if (!take(&c, '{'))
        return fail(error, name, "the header is not a Python dict");
    while (!take(&c, '}')) {
        g_autofree char *key = take_string(&c);
        if (!key || !take(&c, ':'))
            return fail(error, name, "a malformed header entry");
        if (strcmp(key, "descr") == 0) {
            g_free(descr);
            descr = take_string(&c);
            if (!descr)
                return fail(error, name, "'descr' is not a string");
        } else if (strcmp(key, "fortran_order") == 0) {
            have_order = TRUE;
            if (take_word(&c, "True"))
                fortran = TRUE;
            else if (!take_word(&c, "False"))
                return fail(error, name, "'fortran_order' is neither True nor False");
        } else if (strcmp(key, "shape") == 0) {
            have_shape = take_shape(&c, dims, &ndims);
            if (!have_shape)
                return fail(error, name, "'shape' is not a tuple of one or two lengths");
        } else {
            return fail(error, name, "an unknown header key");
        }
        if (!take(&c, ',') && !(skip_spaces(&c), c.at < c.end && *c.at == '}'))
            return fail(error, name, "a malformed header entry");
    }
    if (!descr || !have_order || !have_shape)
        return fail(error, name, "the header lacks 'descr', 'fortran_order' or 'shape'");
    if (strcmp(descr, "<f8") != 0 && strcmp(descr, "float64") != 0)
        return fail(error, name, "the values are not little-endian doubles ('<f8')");
    if (fortran && ndims == 2 && dims[0] > 1 && dims[1] > 1)
        return fail(error, name, "the values are in Fortran order; C order expected");
    if (ndims == 0)
        return fail(error, name, "a scalar; a vector or a matrix expected");
    if (dims[0] == 0 || (ndims == 2 && dims[1] == 0))
        return fail(error, name, "an empty array");
    if (ndims == 2 && dims[1] > UINT32_MAX)
        return fail(error, name, "more than 2^32 - 1 columns");
    const uint64_t count = dims[0] * (ndims == 2 ? dims[1] : 1);
    if (ndims == 2 && dims[1] != 0 && count / dims[1] != dims[0])
        return fail(error, name, "the shape overflows");
    const size_t body = length - start - header_length;
    if (count > body / sizeof(double) || body != count * sizeof(double)) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_HEADER,
                    "%s: the header says %" G_GUINT64_FORMAT " %s but the file holds %zu "
                    "%s of data (truncated or padded)",
                    name, count, th_plural(count, "value", "values"), body,
                    th_plural(body, "byte", "bytes"));
        return NULL;
    }
    double *values = g_new(double, count);
    memcpy(values, data + start + header_length, count * sizeof(double));
#if G_BYTE_ORDER != G_LITTLE_ENDIAN
    for (uint64_t i = 0; i < count; ++i) {
        uint64_t bits;
        memcpy(&bits, &values[i], sizeof bits);
        bits = GUINT64_FROM_LE(bits);
        memcpy(&values[i], &bits, sizeof bits);
    }
#endif
    *rows = dims[0];
    *cols = ndims == 2 ? (uint32_t)dims[1] : 0;
    return values;
}

double *th_read_npy(const char *path, uint64_t *rows, uint32_t *cols, GError **error)
{
    g_autofree char *contents = NULL;
    gsize length = 0;
    if (!g_file_get_contents(path, &contents, &length, error))
        return NULL;
    return th_parse_npy(path, (const uint8_t *)contents, length, rows, cols, error);
}
