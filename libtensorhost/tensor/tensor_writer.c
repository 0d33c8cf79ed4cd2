/* Writing sparse tensors as FROSTT .tns text, after the tensorhost header
 * (tns_header.h) that keeps the dims and the label: lines formatted by hand
 * into a 1 MB buffer (gzip through GIO's GZlibCompressor when the path ends
 * in ".gz"), into a temporary file next to the target that is synced and
 * renamed over it, so no reader ever sees half a tensor. */
#define _DEFAULT_SOURCE /* fsync, O_CLOEXEC */

#include "tensor/tensor_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "base/decimal.h"
#include "base/atomic_file.h"
#include "base/cancel.h"
#include "tensor/tensor_reader.h"
#include "tensor/tns_header.h"

/* At most 9 fractional digits are written, each value k / 10^d with the
 * reader's exact powers of ten (decimal.h), so k / 10^d here is the double
 * a read gives back. */
#define MAX_FRACTION_DIGITS 9

#define WRITE_BUFFER ((size_t)1 << 20)

typedef struct {
    int fd;
    GConverter *gzip; /* NULL for plain text */
    char *text;
    size_t used;
    char *compressed;
} tns_writer;

static gboolean write_all(int fd, const char *data, size_t length)
{
    while (length > 0) {
        ssize_t n = write(fd, data, length);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return FALSE;
        data += n;
        length -= (size_t)n;
    }
    return TRUE;
}

static gboolean writer_flush(tns_writer *w, gboolean at_end, GError **error)
{
    if (w->gzip == NULL) {
        gboolean ok = write_all(w->fd, w->text, w->used);
        w->used = 0;
        if (!ok)
            g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "%s",
                        g_strerror(errno));
        return ok;
    }
    const char *in = w->text;
    size_t left = w->used;
    for (;;) {
        gsize read = 0, written = 0;
        GConverterResult r = g_converter_convert(
            w->gzip, in, left, w->compressed, WRITE_BUFFER,
            at_end ? G_CONVERTER_INPUT_AT_END : G_CONVERTER_NO_FLAGS, &read, &written, error);
        if (r == G_CONVERTER_ERROR)
            return FALSE;
        if (!write_all(w->fd, w->compressed, written)) {
            g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "%s",
                        g_strerror(errno));
            return FALSE;
        }
        in += read;
        left -= read;
        if (r == G_CONVERTER_FINISHED || (!at_end && left == 0))
            break;
    }
    w->used = 0;
    return TRUE;
}

static char *format_uint(char *out, uint64_t v)
{
    char digits[24];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v != 0);
    while (n > 0)
        *out++ = digits[--n];
    return out;
}

/* Shortest decimal with at most 9 fractional digits that reads back as
 * exactly `v` through the reader's fast path (k / 10^d is computed the same
 * way both sides); otherwise %.17g, which always round-trips. */
static char *format_value(char *out, double v)
{
    double magnitude = fabs(v);
    for (int d = 0; d <= MAX_FRACTION_DIGITS; ++d) {
        double scaled = nearbyint(magnitude * th_exact_powers_of_ten[d]);
        if (scaled >= 9007199254740992.0 || scaled / th_exact_powers_of_ten[d] != magnitude)
            continue;
        if (signbit(v))
            *out++ = '-';
        char digits[24];
        char *end = format_uint(digits, (uint64_t)scaled);
        int len = (int)(end - digits);
        if (d == 0) {
            memcpy(out, digits, (size_t)len);
            return out + len;
        }
        int int_len = len > d ? len - d : 0;
        if (int_len == 0)
            *out++ = '0';
        memcpy(out, digits, (size_t)int_len);
        out += int_len;
        *out++ = '.';
        for (int z = len; z < d; ++z)
            *out++ = '0';
        memcpy(out, digits + int_len, (size_t)(len - int_len));
        return out + (len - int_len);
    }
    return out + g_snprintf(out, 32, "%.17g", v);
}

/* Appends `length` bytes of text, through as many flushes as they take. */
static gboolean writer_append(tns_writer *w, const char *text, size_t length, GError **error)
{
    while (length > 0) {
        if (w->used == WRITE_BUFFER && !writer_flush(w, FALSE, error))
            return FALSE;
        const size_t n = MIN(length, WRITE_BUFFER - w->used);
        memcpy(w->text + w->used, text, n);
        w->used += n;
        text += n;
        length -= n;
    }
    return TRUE;
}

/* `comment`'s lines as "# " comment lines. */
static gboolean write_comment(tns_writer *w, const char *comment, GError **error)
{
    g_auto(GStrv) lines = g_strsplit(comment, "\n", -1);
    for (char **l = lines; *l != NULL; ++l) {
        g_autofree char *line = g_strdup_printf("# %s\n", *l);
        if (!writer_append(w, line, strlen(line), error))
            return FALSE;
    }
    return TRUE;
}

static gboolean write_lines(tns_writer *w, const th_sptensor *t, const char *header,
                            const char *comment, GError **error)
{
    if (!writer_append(w, header, strlen(header), error))
        return FALSE;
    if (comment != NULL && !write_comment(w, comment, error))
        return FALSE;
    /* The longest line: 64 indices of 10 digits, a %.17g value, blanks. */
    const size_t max_line = TH_MAX_MODES * 11u + 40u;
    for (uint64_t i = 0; i < t->nnz; ++i) {
        if (w->used + max_line > WRITE_BUFFER) {
            if (th_cancel_requested()) {
                g_set_error_literal(error, TH_TENSOR_READER_ERROR,
                                    TH_TENSOR_READER_ERROR_CANCELLED, "writing interrupted");
                return FALSE;
            }
            if (!writer_flush(w, FALSE, error))
                return FALSE;
        }
        char *p = w->text + w->used;
        for (uint32_t m = 0; m < t->nmodes; ++m) {
            const th_index index = t->indices[m][i];
            /* The header's dims would contradict the line: no reader would
             * take the file. */
            if (G_UNLIKELY(index >= t->dims[m])) {
                g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_INDEX_RANGE,
                            "nonzero %" G_GUINT64_FORMAT ": mode %u index %u (1-based) is "
                            "beyond the tensor's mode size %u",
                            i + 1u, m + 1u, index + 1u, t->dims[m]);
                return FALSE;
            }
            p = format_uint(p, (uint64_t)index + 1u);
            *p++ = ' ';
        }
        p = format_value(p, t->values[i]);
        *p++ = '\n';
        w->used = (size_t)(p - w->text);
    }
    return writer_flush(w, TRUE, error);
}

gboolean th_tensor_write_tns_full(const th_sptensor *t, const char *path, const char *comment,
                                  GError **error)
{
    g_return_val_if_fail(t != NULL && path != NULL, FALSE);
    g_autofree char *problem = NULL;
    g_autofree char *header = th_tns_header_text(t, &problem);
    if (header == NULL) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                    "%s: cannot write the tensor: %s", path, problem);
        return FALSE;
    }
    g_autofree char *tmp_path = g_strconcat(path, ".tmp-XXXXXX", NULL);
    int fd = g_mkstemp_full(tmp_path, O_WRONLY | O_CLOEXEC, 0666);
    if (fd < 0) {
        int saved = errno;
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                    "%s: cannot create a temporary file next to it: %s", path,
                    g_strerror(saved));
        return FALSE;
    }
    tns_writer w = {.fd = fd, .text = g_malloc(WRITE_BUFFER)};
    if (g_str_has_suffix(path, ".gz")) {
        w.gzip = G_CONVERTER(g_zlib_compressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP, 6));
        w.compressed = g_malloc(WRITE_BUFFER);
    }
    GError *write_error = NULL;
    gboolean ok = write_lines(&w, t, header, comment, &write_error);
    if (ok && fsync(fd) != 0) {
        ok = FALSE;
        g_set_error(&write_error, G_IO_ERROR, g_io_error_from_errno(errno), "fsync: %s",
                    g_strerror(errno));
    }
    if (close(fd) != 0 && ok) {
        ok = FALSE;
        g_set_error(&write_error, G_IO_ERROR, g_io_error_from_errno(errno), "close: %s",
                    g_strerror(errno));
    }
    if (ok && g_rename(tmp_path, path) != 0) {
        ok = FALSE;
        g_set_error(&write_error, G_IO_ERROR, g_io_error_from_errno(errno), "rename: %s",
                    g_strerror(errno));
    }
    g_free(w.text);
    g_free(w.compressed);
    g_clear_object(&w.gzip);
    if (!ok) {
        g_unlink(tmp_path);
        const gboolean cancelled = g_error_matches(write_error, TH_TENSOR_READER_ERROR,
                                                   TH_TENSOR_READER_ERROR_CANCELLED);
        g_set_error(error, TH_TENSOR_READER_ERROR,
                    cancelled ? TH_TENSOR_READER_ERROR_CANCELLED : TH_TENSOR_READER_ERROR_IO,
                    cancelled ? "%s: %s; the file was not written" : "%s: cannot write: %s",
                    path, write_error->message);
        g_error_free(write_error);
        return FALSE;
    }
    th_atomic_file_sync_folder(path);
    return TRUE;
}

gboolean th_tensor_write_tns_to_fd(const th_sptensor *t, int fd, const char *name,
                                   const char *comment, GError **error)
{
    g_return_val_if_fail(t != NULL && name != NULL, FALSE);
    g_autofree char *problem = NULL;
    g_autofree char *header = th_tns_header_text(t, &problem);
    if (header == NULL) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                    "%s: cannot write the tensor: %s", name, problem);
        return FALSE;
    }
    tns_writer w = {.fd = fd, .text = g_malloc(WRITE_BUFFER)};
    GError *write_error = NULL;
    const gboolean ok = write_lines(&w, t, header, comment, &write_error);
    g_free(w.text);
    if (!ok) {
        const gboolean cancelled = g_error_matches(write_error, TH_TENSOR_READER_ERROR,
                                                   TH_TENSOR_READER_ERROR_CANCELLED);
        g_set_error(error, TH_TENSOR_READER_ERROR,
                    cancelled ? TH_TENSOR_READER_ERROR_CANCELLED : TH_TENSOR_READER_ERROR_IO,
                    cancelled ? "%s: %s; what was written is incomplete" : "%s: cannot write: %s",
                    name, write_error->message);
        g_error_free(write_error);
    }
    return ok;
}

gboolean th_tensor_write_tns(const th_sptensor *t, const char *path, GError **error)
{
    return th_tensor_write_tns_full(t, path, NULL, error);
}
