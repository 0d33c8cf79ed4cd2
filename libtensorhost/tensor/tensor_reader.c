/* Reading sparse tensors from text (tensor_writer.c writes them).
 *
 * Plain files are memory-mapped and split at newlines into chunks that
 * threads (one per online processor, each given at least a few MB) parse at
 * once; gzip (through GIO's GZlibDecompressor, all members of a multi-member
 * file) and pipes stream in one thread. Reads of the mapping run under a
 * SIGBUS guard (sigbus_guard.h), so a file truncated by another process
 * while it is parsed is an error, not a crash.
 * The per-line parser is hand-written: indices are plain decimal digits, values
 * take a Clinger fast path (mantissa below 2^53 and a power of ten up to 22:
 * one exact IEEE division or multiplication, so correctly rounded) and fall
 * back to g_ascii_strtod for anything else (long mantissas, hex, inf/nan).
 *
 * Semantics worth knowing:
 *  - duplicate coordinates are summed, and counted in duplicates_merged;
 *  - explicit zero values are kept: they are nonzeros the file stores; they
 *    are counted (explicit_zeros), and so are nonzero literals that round to
 *    0.0 (underflowed_values);
 *  - a leading UTF-8 byte-order mark is skipped, and UTF-16 text refused;
 *    a line ends at "\n" or "\r\n", and a carriage return anywhere else, a
 *    NUL byte anywhere, or a line longer than TH_TENSOR_MAX_LINE_BYTES is an
 *    error;
 *  - th_cancel_requested() is polled every CHECK_EVERY bytes of each thread;
 *  - in a .tns file dims are the largest index per mode, unless the
 *    tensorhost header (tns_header.h: comment lines before the first nonzero
 *    line) gives them; in an sptensor file they come from its header; given
 *    dims, indices must lie inside them. The tensorhost header's label is
 *    the tensor's;
 *  - the number of fields of the first nonzero line fixes the order;
 *  - with the option require_nonnegative, a value below zero is an error
 *    on its line (-0.0 is not below zero); each worker stops at its first
 *    error, and the first failed worker in input order is the one reported,
 *    so the earliest line wins whatever the thread count.
 * Input that starts with the binary format's magic bytes goes to its reader
 * (tensor_binary.c) instead.
 */
#define _DEFAULT_SOURCE /* madvise */

#include "tensor/tensor_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/decimal.h"
#include "base/cancel.h"
#include "host_memory.h"
#include "base/message_text.h"
#include "base/sigbus_guard.h"
#include "tensor/sptensor.h"
#include "tensor/tensor_binary.h"
#include "tensor/tns_header.h"

/* Largest 0-based index: dims (index + 1) must still fit a th_index. */
#define TH_MAX_INDEX0 ((uint64_t)UINT32_MAX - 1u)
#define PROGRESS_EVERY ((uint64_t)64 << 20)
/* Bytes of one worker between two polls of the cancel flag (and progress
 * accounting): a few ms of parsing. */
#define CHECK_EVERY ((size_t)4 << 20)
#define MIN_BYTES_PER_THREAD TH_TENSOR_READER_MIN_BYTES_PER_THREAD
#define MAX_THREADS TH_TENSOR_READER_MAX_THREADS
#define STREAM_BUFFER ((size_t)4 << 20)
#define QUOTE_MAX 60u
#define MAX_LINE TH_TENSOR_MAX_LINE_BYTES
/* An sptensor header's count must be below this: 2^40 nonzeros would take
 * 20 TB of arrays and more of text. */
#define MAX_DECLARED_NNZ ((uint64_t)1 << 40)

/* A stream buffer always holds a whole line or more than MAX_LINE bytes. */
G_STATIC_ASSERT(MAX_LINE + 2u < STREAM_BUFFER);

static const char utf8_bom[3] = {'\xef', '\xbb', '\xbf'};
static const char utf16le_bom[2] = {'\xff', '\xfe'};
static const char utf16be_bom[2] = {'\xfe', '\xff'};

/* th_tensor_reader_set_threads(); 0: one per processor. */
static atomic_uint forced_threads = 0;

typedef enum {
    STATE_DETECT,    /* before the first content line */
    STATE_SPT_ORDER, /* after "sptensor" */
    STATE_SPT_DIMS,
    STATE_SPT_NNZ,
    STATE_DATA,
} parse_state;

/* Shared by the workers of one read: bytes parsed so far (for the progress
 * callback, when there is one, and for the message of a cancelled read). */
typedef struct {
    const th_tensor_read_options *options; /* NULL: no callback */
    atomic_uint_fast64_t done;
    uint64_t total;
    uint64_t next_report;
} progress_ctx;

/* One parser over one run of lines. The first worker reads the header; the
 * others are clones made once the format is known. */
typedef struct {
    parse_state state;
    gboolean sptensor; /* 0-based, dims from the header */
    uint32_t nmodes;   /* 0 until known */
    th_index dims[TH_MAX_MODES];
    uint64_t index_limit[TH_MAX_MODES]; /* largest 0-based index allowed */
    uint64_t declared_nnz;
    uint64_t declared_nnz_line;
    /* The tensorhost header (tns_header.h), before the first nonzero line;
     * each *_line is 0 until its line is read. With dims_line, dims[] holds
     * the header's dims, which an sptensor header must repeat. */
    uint64_t version_line;
    uint32_t version_minor;
    uint64_t dims_line;
    uint32_t dims_nmodes;
    uint64_t label_line;
    char *label;
    char *legacy_label; /* an older tensorhost-synth's first line */

    th_index *cols[TH_MAX_MODES];
    double *vals;
    uint64_t count, capacity;
    th_index max_index[TH_MAX_MODES];
    uint64_t explicit_zeros;
    uint64_t underflowed_values;
    /* The read's require_nonnegative: why a value must be >= 0; NULL when
     * a value may be anything finite. */
    const char *nonnegative_reason;
    /* The read's bound_dims, bound_nmodes and bound_owner: dims the
     * indices must fit besides the file's own, for a file of that order. */
    const th_index *bound_dims;
    uint32_t bound_nmodes;
    const char *bound_owner;

    uint64_t lines; /* lines seen; absolute for the first worker, local for clones */
    size_t bytes_seen;
    /* A stream's worker (gzip, a pipe), whose input's size is not known
     * ahead: its storage grows within what the host has (worker_grow). */
    gboolean guard_growth;
    gboolean bom_checked; /* the start of the input was looked at for a BOM */

    gboolean failed;
    th_tensor_reader_error err_code;
    uint64_t err_line;
    gboolean err_whole_file; /* the message is about the file, not a line */
    /* The error is about a well-formed line's meaning (a negative value),
     * not its bytes: explain_bad_bytes leaves it, so that the read fails
     * exactly where the read without the option would have read the line. */
    gboolean err_not_bytes;
    char *err_msg;           /* NULL for TH_TENSOR_READER_ERROR_CANCELLED */

    progress_ctx *progress; /* NULL: no progress accounting */
    gboolean reports;       /* this worker calls the callback (main thread) */
    const char *check_from; /* where the bytes since the last check begin */
} worker;

/* ---- small helpers ------------------------------------------------------- */

static inline gboolean is_digit(char c) { return (unsigned)(c - '0') < 10u; }
/* A carriage return is not a blank: the line splitter removes the one of a
 * "\r\n" ending, and one anywhere else is an error (it would otherwise
 * silently join the lines of a file with old Mac "\r" endings into one). */
static inline gboolean is_blank(char c) { return c == ' ' || c == '\t'; }
/* A field ends at a blank, at a trailing comment, or at the end of the line. */
static inline gboolean is_field_end(char c) { return is_blank(c) || c == '#'; }

static inline const char *skip_blanks(const char *p, const char *eol)
{
    while (p < eol && is_blank(*p))
        ++p;
    return p;
}

static const char *field_end(const char *p, const char *eol)
{
    while (p < eol && !is_field_end(*p))
        ++p;
    return p;
}

static uint32_t count_fields(const char *p, const char *eol)
{
    uint32_t n = 0;
    p = skip_blanks(p, eol);
    while (p < eol && *p != '#') {
        ++n;
        p = skip_blanks(field_end(p, eol), eol);
    }
    return n;
}

/* Whether a character shows as itself: not a control, format (byte-order
 * mark, bidirectional overrides), space or line separator, nor unassigned. */
static gboolean is_visible_unichar(gunichar c)
{
    GUnicodeType type = g_unichar_type(c);
    return g_unichar_isgraph(c) && type != G_UNICODE_LINE_SEPARATOR &&
           type != G_UNICODE_PARAGRAPH_SEPARATOR;
}

/* The text of [begin, end) for a message: printable ASCII and visible
 * characters of valid UTF-8 as is, other bytes as \xNN and invisible
 * characters as \uNNNN, long text cut. */
static char *quote_text(const char *begin, const char *end)
{
    size_t len = (size_t)(end - begin);
    gboolean cut = len > QUOTE_MAX;
    if (cut)
        len = QUOTE_MAX;
    GString *s = g_string_sized_new(len + 8);
    const char *valid_end = NULL;
    g_utf8_validate_len(begin, len, &valid_end);
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)begin[i];
        if (c >= 0x80 && begin + i < valid_end) {
            gunichar u = g_utf8_get_char(begin + i);
            size_t bytes = (size_t)g_utf8_skip[(guchar)c];
            if (is_visible_unichar(u))
                g_string_append_len(s, begin + i, (gssize)bytes);
            else
                g_string_append_printf(s, "\\u%04" G_GINT32_MODIFIER "x", u);
            i += bytes;
            continue;
        }
        if (c >= 0x20 && c < 0x7f)
            g_string_append_c(s, (char)c);
        else
            g_string_append_printf(s, "\\x%02x", c);
        ++i;
    }
    if (cut)
        g_string_append(s, "...");
    return g_string_free(s, FALSE);
}

static char *quote_field(const char *field, const char *eol)
{
    return quote_text(field, field_end(field, eol));
}

/* The line without its comment and surrounding blanks, quoted. */
static char *quote_content(const char *p, const char *eol)
{
    p = skip_blanks(p, eol);
    const char *end = p;
    while (end < eol && *end != '#')
        ++end;
    while (end > p && is_blank(end[-1]))
        --end;
    return quote_text(p, end);
}

G_GNUC_PRINTF(3, 4)
static gboolean fail(worker *w, th_tensor_reader_error code, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    w->failed = TRUE;
    w->err_code = code;
    w->err_line = w->lines;
    w->err_whole_file = FALSE;
    g_free(w->err_msg);
    w->err_msg = g_strdup_vprintf(format, args);
    va_end(args);
    return FALSE;
}

/* The file shrank under the mapping (a SIGBUS was caught). */
static void fail_shrank(worker *w)
{
    fail(w, TH_TENSOR_READER_ERROR_IO,
         "the file shrank while it was read (truncated or rewritten by another process?); "
         "read it again once it is complete");
    w->err_whole_file = TRUE;
}

/* The message, which gives how far the read got, is written once every
 * worker has stopped. */
static gboolean fail_cancelled(worker *w)
{
    w->failed = TRUE;
    w->err_code = TH_TENSOR_READER_ERROR_CANCELLED;
    w->err_whole_file = TRUE;
    g_clear_pointer(&w->err_msg, g_free);
    return FALSE;
}

static gboolean fail_nul(worker *w, const char *line, const char *nul)
{
    return fail(w, TH_TENSOR_READER_ERROR_NOT_TEXT,
                "byte %zu of the line is a NUL byte: a tensor file is text (is this a binary "
                "file?)",
                (size_t)(nul - line) + 1u);
}

/* [line, scanned) is the part of the line looked at: a NUL byte there is
 * the better explanation (a binary file, /dev/zero). */
static gboolean fail_long_line(worker *w, const char *line, const char *scanned)
{
    const char *nul = memchr(line, '\0', (size_t)(scanned - line));
    if (nul != NULL)
        return fail_nul(w, line, nul);
    return fail(w, TH_TENSOR_READER_ERROR_NOT_TEXT,
                "the line is longer than %zu bytes, the most a line of a tensor file may "
                "take (is this a text tensor?)",
                (size_t)MAX_LINE);
}

/* A line that failed to parse: when it holds a NUL byte or a carriage
 * return, that is the error to report, not what it did to a field. */
static void explain_bad_bytes(worker *w, const char *line, const char *eol)
{
    if (w->err_not_bytes)
        return;
    const char *nul = memchr(line, '\0', (size_t)(eol - line));
    if (nul != NULL) {
        fail_nul(w, line, nul);
        return;
    }
    const char *cr = memchr(line, '\r', (size_t)(eol - line));
    if (cr != NULL)
        fail(w, TH_TENSOR_READER_ERROR_NOT_TEXT,
             "byte %zu of the line is a carriage return (\\r) inside the line: lines end in "
             "\\n or \\r\\n (a file with old Mac line endings?)",
             (size_t)(cr - line) + 1u);
}

/* A comment may say anything but hold a NUL byte. */
static inline gboolean check_comment(worker *w, const char *line, const char *comment,
                                     const char *eol)
{
    const char *nul = memchr(comment, '\0', (size_t)(eol - comment));
    return G_LIKELY(nul == NULL) || fail_nul(w, line, nul);
}

/* Parses a whole field of decimal digits as an unsigned integer; values past
 * 2^40 saturate (they are out of every range anyway). */
#define UINT_FIELD_SATURATES ((uint64_t)1 << 40)
static gboolean parse_uint_field(const char *field, const char *eol, uint64_t *out)
{
    const char *end = field_end(field, eol);
    if (end == field)
        return FALSE;
    uint64_t v = 0;
    for (const char *p = field; p < end; ++p) {
        if (!is_digit(*p))
            return FALSE;
        if (v < UINT_FIELD_SATURATES)
            v = v * 10u + (uint64_t)(*p - '0');
    }
    *out = v;
    return TRUE;
}

/* ---- values -------------------------------------------------------------- */

/* Anything the fast path declines: copy the field and let g_ascii_strtod
 * (correctly rounded, locale independent) have it. */
static const char *parse_double_slow(const char *field, const char *eol, double *out)
{
    const char *end = field_end(field, eol);
    size_t len = (size_t)(end - field);
    /* g_ascii_strtod skips leading white space as isspace() knows it
     * ("\v1" would read as 1): a field never starts with a blank, so
     * anything it would skip is not text a value may hold. */
    if (len > 0 && strchr(" \t\n\v\f\r", field[0]) != NULL)
        return NULL;
    char small[128];
    char *copy = len < sizeof small ? small : g_malloc(len + 1);
    memcpy(copy, field, len);
    copy[len] = '\0';
    char *stop = NULL;
    double v = g_ascii_strtod(copy, &stop);
    gboolean whole = len > 0 && stop == copy + len;
    if (copy != small)
        g_free(copy);
    if (!whole)
        return NULL;
    *out = v;
    return end;
}

/* Returns the end of the value field, or NULL if it is not a number. */
static inline const char *parse_double(const char *field, const char *eol, double *out)
{
    const char *p = th_decimal_parse_fast(field, eol, out);
    if (p && (p == eol || is_field_end(*p)))
        return p;
    return parse_double_slow(field, eol, out);
}

/* Whether the significand of a numeric literal (decimal or hexadecimal,
 * which g_ascii_strtod accepts) has only zero digits: a value that parsed as
 * 0.0 was then written as zero; otherwise it underflowed. */
static gboolean literal_is_zero(const char *field, const char *end)
{
    const char *p = field;
    if (p < end && (*p == '-' || *p == '+'))
        ++p;
    gboolean hex = end - p >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
    if (hex)
        p += 2;
    for (; p < end; ++p) {
        char c = *p;
        if (hex ? (c == 'p' || c == 'P') : (c == 'e' || c == 'E'))
            break;
        if (c != '0' && c != '.')
            return FALSE;
    }
    return TRUE;
}

/* ---- storage ------------------------------------------------------------- */

static void worker_reserve(worker *w, uint64_t capacity)
{
    if (capacity <= w->capacity)
        return;
    for (uint32_t m = 0; m < w->nmodes; ++m)
        w->cols[m] = g_renew(th_index, w->cols[m], capacity);
    w->vals = g_renew(double, w->vals, capacity);
    w->capacity = capacity;
}

/* Whether the host can take the arrays of `at_least` nonzeros, which
 * `basis` puts the input at; else the read's error (about the whole
 * file). */
static gboolean host_has_room_for(worker *w, const char *basis, uint64_t at_least)
{
    g_autofree char *short_of = NULL;
    if (th_sptensor_host_has_room(at_least, w->nmodes, &short_of))
        return TRUE;
    fail(w, TH_TENSOR_READER_ERROR_MEMORY, "%s puts it at %" PRIu64 " nonzeros or more, which %s",
         basis, at_least, short_of);
    w->err_whole_file = TRUE;
    return FALSE;
}

/* Room for half again as many nonzeros. A stream's worker first asks the
 * host (th_host_available) and grows by at most three quarters of what it
 * can still take, so that an input larger than the host's memory stops
 * with an error once not even a small step (1/64 of what is held) is
 * left, instead of the process being killed midway as the pages of an
 * overcommitted allocation are touched; an input that fits grows as
 * before. */
static gboolean worker_grow(worker *w)
{
    uint64_t step = w->capacity / 2u + 1024u;
    uint64_t available = 0;
    char source[256];
    if (w->guard_growth && th_host_available(&available, source, sizeof source) == 0) {
        const uint64_t per_nonzero = th_sptensor_bytes_per_nonzero(w->nmodes);
        step = MIN(step, available / per_nonzero / 4u * 3u);
        if (step < MAX((uint64_t)1024u, w->count / 64u)) {
            char held[32], free_text[32];
            return fail(w, TH_TENSOR_READER_ERROR_MEMORY,
                        "the %" PRIu64 " nonzeros read so far take %s, and %s is free (%s): "
                        "too little to read on (the input is a stream, whose size is not known "
                        "ahead; an uncompressed or binary file is checked before it is read)",
                        w->count, th_size_text(w->count * per_nonzero, held, sizeof held),
                        th_size_text(available, free_text, sizeof free_text), source);
        }
    }
    worker_reserve(w, w->capacity + step);
    return TRUE;
}

/* The fewest bytes a nonzero line can take ("0 0 0 1\n"), to bound what
 * any header or estimate may make us preallocate. */
static uint64_t min_line_bytes(uint32_t nmodes)
{
    return 2u * ((uint64_t)nmodes + 1u);
}

/* The newlines in `bytes` of text at `begin`. */
static uint64_t count_newlines(const char *begin, size_t bytes)
{
    uint64_t lines = 0;
    for (const char *p = begin, *end = begin + bytes;
         (p = memchr(p, '\n', (size_t)(end - p))) != NULL; ++p)
        ++lines;
    return lines;
}

/* Room for the nonzeros in `bytes` of input, from the line density of its
 * first 64 KB; growth covers a low guess. */
static uint64_t estimate_capacity(const worker *w, const char *begin, size_t bytes)
{
    size_t sample = MIN(bytes, (size_t)64 << 10);
    uint64_t lines = 1 + count_newlines(begin, sample);
    uint64_t guess = (uint64_t)((double)bytes / (double)MAX(sample, 1u) * (double)lines * 1.02) + 64u;
    guess = MIN(guess, bytes / min_line_bytes(w->nmodes) + 1u);
    if (w->sptensor)
        guess = MIN(guess, w->declared_nnz + 1u);
    return guess;
}

static void worker_free(worker *w)
{
    if (w == NULL)
        return;
    for (uint32_t m = 0; m < TH_MAX_MODES; ++m)
        g_free(w->cols[m]);
    g_free(w->vals);
    g_free(w->err_msg);
    g_free(w->label);
    g_free(w->legacy_label);
    g_free(w);
}

/* Whether the file gives the dims (an sptensor header, or the tensorhost
 * header's dims line), which the indices must then fit. */
static gboolean worker_has_dims(const worker *w)
{
    return w->sptensor || w->dims_line != 0;
}

/* The largest 0-based index of mode m the file itself allows. */
static uint64_t own_index_limit(const worker *w, uint32_t m)
{
    return worker_has_dims(w) ? (uint64_t)w->dims[m] - 1u : TH_MAX_INDEX0;
}

/* Whether the read's bound applies: given, and for a file of this order. */
static gboolean worker_is_bounded(const worker *w)
{
    return w->bound_dims != NULL && w->bound_nmodes == w->nmodes;
}

static void worker_set_order(worker *w, uint32_t nmodes)
{
    w->nmodes = nmodes;
    for (uint32_t m = 0; m < nmodes; ++m) {
        w->index_limit[m] = own_index_limit(w, m);
        if (worker_is_bounded(w))
            w->index_limit[m] = MIN(w->index_limit[m], (uint64_t)w->bound_dims[m] - 1u);
    }
}

/* Takes the read's options that every worker applies to its lines. */
static void worker_take_options(worker *w, const th_tensor_read_options *options)
{
    w->nonnegative_reason = th_tensor_read_nonnegative_reason(options);
    if (options != NULL && options->bound_dims != NULL) {
        w->bound_dims = options->bound_dims;
        w->bound_nmodes = options->bound_nmodes;
        w->bound_owner = th_tensor_read_bound_owner(options);
    }
}

/* A worker for a later chunk: same format, empty storage, local lines. */
static worker *worker_clone_format(const worker *w0)
{
    worker *w = g_new0(worker, 1);
    w->state = STATE_DATA;
    w->sptensor = w0->sptensor;
    w->dims_line = w0->dims_line;
    w->dims_nmodes = w0->dims_nmodes;
    memcpy(w->dims, w0->dims, sizeof w->dims);
    w->declared_nnz = w0->declared_nnz;
    w->nonnegative_reason = w0->nonnegative_reason;
    w->bound_dims = w0->bound_dims;
    w->bound_nmodes = w0->bound_nmodes;
    w->bound_owner = w0->bound_owner;
    worker_set_order(w, w0->nmodes);
    w->bom_checked = TRUE; /* a later chunk does not start the input */
    w->progress = w0->progress;
    return w;
}

/* ---- progress and cancellation ------------------------------------------- */

/* Adds the bytes parsed since the last call to the shared count. */
static uint64_t account_progress(worker *w, const char *p)
{
    uint64_t bytes = (uint64_t)(p - w->check_from);
    w->check_from = p;
    if (w->progress == NULL)
        return 0;
    return atomic_fetch_add(&w->progress->done, bytes) + bytes;
}

/* Every CHECK_EVERY bytes: progress, and whether to stop. */
static gboolean worker_checkpoint(worker *w, const char *p)
{
    uint64_t done = account_progress(w, p);
    progress_ctx *ctx = w->progress;
    if (w->reports && ctx != NULL && ctx->options != NULL && ctx->options->progress != NULL &&
        done >= ctx->next_report) {
        ctx->options->progress(done, ctx->total, ctx->options->user_data);
        ctx->next_report = done + PROGRESS_EVERY;
    }
    if (th_cancel_requested())
        return fail_cancelled(w);
    return TRUE;
}

/* ---- lines --------------------------------------------------------------- */

/* Every error about a nonzero line checks the field count first: a line with
 * the wrong number of fields is reported as that, not as whichever field
 * happened to be parsed in the wrong role. */
static gboolean fail_if_wrong_field_count(worker *w, const char *line, const char *eol)
{
    uint32_t found = count_fields(line, eol);
    if (found == w->nmodes + 1u)
        return TRUE;
    return fail(w, TH_TENSOR_READER_ERROR_COLUMNS,
                "expected %u fields (%u indices and a value), found %u", w->nmodes + 1u,
                w->nmodes, found);
}

static gboolean fail_columns(worker *w, const char *line, const char *eol)
{
    if (!fail_if_wrong_field_count(w, line, eol))
        return FALSE;
    g_return_val_if_reached(fail(w, TH_TENSOR_READER_ERROR_COLUMNS, "malformed line"));
}

static gboolean fail_index(worker *w, uint32_t mode, uint64_t value, const char *field,
                           const char *line, const char *eol)
{
    if (!fail_if_wrong_field_count(w, line, eol))
        return FALSE;
    g_autofree char *text = quote_field(field, eol);
    uint32_t column = mode + 1u;
    const char *end = field_end(field, eol);
    gboolean all_digits = end > field;
    for (const char *p = field; p < end; ++p)
        all_digits = all_digits && is_digit(*p);
    if (!all_digits) {
        gboolean negative = field[0] == '-' && end > field + 1;
        for (const char *p = field + 1; negative && p < end; ++p)
            negative = is_digit(*p);
        if (negative)
            return fail(w, TH_TENSOR_READER_ERROR_INDEX_RANGE, "column %u: negative index '%s'",
                        column, text);
        return fail(w, TH_TENSOR_READER_ERROR_NUMBER,
                    "column %u: '%s' is not an index (expected a non-negative integer)",
                    column, text);
    }
    if (!w->sptensor && value == 0)
        return fail(w, TH_TENSOR_READER_ERROR_INDEX_RANGE,
                    "column %u: index 0 in a 1-based file (.tns indices start at 1)", column);
    uint64_t max_allowed = w->sptensor ? TH_MAX_INDEX0 : TH_MAX_INDEX0 + 1u;
    if (value > max_allowed)
        return fail(w, TH_TENSOR_READER_ERROR_INDEX_RANGE,
                    "column %u: index '%s' does not fit the 32-bit index type "
                    "(at most %" PRIu64 " in a %s file)",
                    column, text, max_allowed, w->sptensor ? "0-based" : "1-based");
    const uint64_t index0 = w->sptensor ? value : value - 1u;
    if (worker_is_bounded(w) && index0 <= own_index_limit(w, mode) &&
        index0 >= w->bound_dims[mode]) {
        const uint64_t first = w->sptensor ? 0u : 1u;
        return fail(w, TH_TENSOR_READER_ERROR_INDEX_RANGE,
                    "column %u: index %" PRIu64 " is out of range: %s has mode %u size %u "
                    "(indices %" PRIu64 " to %" PRIu64 ")",
                    column, value, w->bound_owner, column, w->bound_dims[mode], first,
                    first + w->bound_dims[mode] - 1u);
    }
    if (w->sptensor)
        return fail(w, TH_TENSOR_READER_ERROR_INDEX_RANGE,
                    "column %u: index %" PRIu64 " is out of range: the header gives mode %u "
                    "size %u (indices 0 to %u)",
                    column, value, column, w->dims[mode], w->dims[mode] - 1u);
    return fail(w, TH_TENSOR_READER_ERROR_INDEX_RANGE,
                "column %u: index %" PRIu64 " is out of range: the tensorhost header's dims "
                "(line %" PRIu64 ") give mode %u size %u (indices 1 to %u)",
                column, value, w->dims_line, column, w->dims[mode], w->dims[mode]);
}

static gboolean fail_value(worker *w, const char *field, const char *line, const char *eol,
                           gboolean parsed)
{
    if (!fail_if_wrong_field_count(w, line, eol))
        return FALSE;
    g_autofree char *text = quote_field(field, eol);
    if (parsed)
        return fail(w, TH_TENSOR_READER_ERROR_VALUE, "column %u: value '%s' is not finite",
                    w->nmodes + 1u, text);
    return fail(w, TH_TENSOR_READER_ERROR_NUMBER,
                "column %u: '%s' is not a number (expected a value such as 3, -0.5 or 1e-3)",
                w->nmodes + 1u, text);
}

/* A value below zero in a read that requires values >= 0; the rest of the
 * line was found well-formed. */
static gboolean fail_negative(worker *w, const char *field, const char *eol)
{
    g_autofree char *text = quote_field(field, eol);
    fail(w, TH_TENSOR_READER_ERROR_VALUE, "column %u: value '%s' is negative: %s",
         w->nmodes + 1u, text, w->nonnegative_reason);
    w->err_not_bytes = TRUE;
    return FALSE;
}

/* [*key, *key_end) of a tensorhost header line, "# tensorhost KEY: VALUE"
 * (tns_header.h), when the comment at `p` is one. */
static gboolean header_line_key(const char *p, const char *eol, const char **key,
                                const char **key_end)
{
    const size_t prefix = strlen(TH_TNS_HEADER_PREFIX);
    if ((size_t)(eol - p) <= prefix || memcmp(p, TH_TNS_HEADER_PREFIX, prefix) != 0)
        return FALSE;
    const char *k = p + prefix, *e = k;
    while (e < eol && (g_ascii_islower(*e) || g_ascii_isdigit(*e) || *e == '_'))
        ++e;
    if (e == k || e == eol || *e != ':')
        return FALSE;
    *key = k;
    *key_end = e;
    return TRUE;
}

static gboolean is_header_line(const char *p, const char *eol)
{
    const char *key, *key_end;
    return header_line_key(p, eol, &key, &key_end);
}

/* A header line after the header's place: taking it would change what
 * lines already read meant; skipping it would drop it unseen. */
static gboolean fail_misplaced_header(worker *w)
{
    return fail(w, TH_TENSOR_READER_ERROR_HEADER,
                "a tensorhost header line ('" TH_TNS_HEADER_PREFIX "KEY: ...') must come "
                "before the nonzero lines and before an sptensor header");
}

/* The hot loop: one nonzero line, or a blank or comment line. */
static inline gboolean parse_data_line(worker *w, const char *line, const char *eol)
{
    const char *p = skip_blanks(line, eol);
    if (p == eol)
        return TRUE;
    if (*p == '#') {
        if (G_UNLIKELY(is_header_line(p, eol)))
            return fail_misplaced_header(w);
        return check_comment(w, line, p, eol);
    }
    if (G_UNLIKELY(w->count == w->capacity) && !worker_grow(w))
        return FALSE;
    const uint64_t n = w->count;
    const uint32_t nmodes = w->nmodes;
    const uint64_t base = w->sptensor ? 0u : 1u;
    for (uint32_t m = 0; m < nmodes; ++m) {
        if (G_UNLIKELY(p == eol || *p == '#'))
            return fail_columns(w, line, eol);
        const char *field = p;
        uint64_t v = 0;
        for (; p < eol && is_digit(*p); ++p)
            if (v < ((uint64_t)1 << 40))
                v = v * 10u + (uint64_t)(*p - '0');
        /* v - base wraps for a 0 in a 1-based file, so one compare catches
         * zero, too large and outside the header's dims. */
        if (G_UNLIKELY(p == field || (p < eol && !is_field_end(*p)) ||
                       v - base > w->index_limit[m]))
            return fail_index(w, m, v, field, line, eol);
        th_index idx = (th_index)(v - base);
        w->cols[m][n] = idx;
        if (idx > w->max_index[m])
            w->max_index[m] = idx;
        p = skip_blanks(p, eol);
    }
    if (G_UNLIKELY(p == eol || *p == '#'))
        return fail_columns(w, line, eol);
    const char *field = p;
    double value = 0.0;
    p = parse_double(field, eol, &value);
    if (G_UNLIKELY(p == NULL))
        return fail_value(w, field, line, eol, FALSE);
    if (G_UNLIKELY(!isfinite(value)))
        return fail_value(w, field, line, eol, TRUE);
    if (G_UNLIKELY(value == 0.0)) {
        if (literal_is_zero(field, p))
            ++w->explicit_zeros;
        else
            ++w->underflowed_values;
    }
    p = skip_blanks(p, eol);
    if (G_UNLIKELY(p != eol && *p != '#'))
        return fail_columns(w, line, eol);
    if (G_UNLIKELY(p != eol) && !check_comment(w, line, p, eol))
        return FALSE;
    /* -0.0 < 0.0 is false: a negative zero passes. */
    if (G_UNLIKELY(w->nonnegative_reason != NULL) && value < 0.0)
        return fail_negative(w, field, eol);
    w->vals[n] = value;
    w->count = n + 1u;
    return TRUE;
}

static gboolean line_is_word(const char *p, const char *eol, const char *word)
{
    size_t len = strlen(word);
    if ((size_t)(eol - p) < len || memcmp(p, word, len) != 0)
        return FALSE;
    p = skip_blanks(p + len, eol);
    return p == eol || *p == '#';
}

static gboolean start_tns(worker *w, const char *line, const char *eol)
{
    uint32_t found = count_fields(line, eol);
    if (w->dims_line != 0 && found != w->dims_nmodes + 1u)
        return fail(w, TH_TENSOR_READER_ERROR_COLUMNS,
                    "expected %u fields (%u indices and a value, as the tensorhost header's "
                    "dims on line %" PRIu64 " give %u modes), found %u",
                    w->dims_nmodes + 1u, w->dims_nmodes, w->dims_line, w->dims_nmodes, found);
    if (found < 3)
        return fail(w, TH_TENSOR_READER_ERROR_ORDER,
                    "found %u field%s; a nonzero line needs at least 2 indices and a value",
                    found, found == 1 ? "" : "s");
    if (found - 1u > TH_MAX_MODES)
        return fail(w, TH_TENSOR_READER_ERROR_ORDER,
                    "found %u fields, that is %u modes; tensorhost supports at most %u", found,
                    found - 1u, TH_MAX_MODES);
    worker_set_order(w, found - 1u);
    w->state = STATE_DATA;
    worker_reserve(w, 1024);
    return parse_data_line(w, line, eol);
}

static gboolean parse_spt_order(worker *w, const char *p, const char *eol)
{
    uint64_t order = 0;
    if (count_fields(p, eol) != 1 || !parse_uint_field(p, eol, &order)) {
        g_autofree char *text = quote_content(p, eol);
        return fail(w, TH_TENSOR_READER_ERROR_HEADER,
                    "sptensor header: expected the order (number of modes) alone on this line, "
                    "found '%s'",
                    text);
    }
    if (order < 2 || order > TH_MAX_MODES) {
        g_autofree char *text = quote_field(p, eol);
        return fail(w, TH_TENSOR_READER_ERROR_ORDER,
                    "sptensor header: order %s is out of range (2 to %u modes)", text,
                    TH_MAX_MODES);
    }
    if (w->dims_line != 0 && order != w->dims_nmodes)
        return fail(w, TH_TENSOR_READER_ERROR_HEADER,
                    "sptensor header: order %" PRIu64 " differs from the tensorhost header's "
                    "dims (line %" PRIu64 "), which give %u modes",
                    order, w->dims_line, w->dims_nmodes);
    w->nmodes = (uint32_t)order;
    w->state = STATE_SPT_DIMS;
    return TRUE;
}

static gboolean parse_spt_dims(worker *w, const char *p, const char *eol)
{
    uint32_t found = count_fields(p, eol);
    if (found != w->nmodes)
        return fail(w, TH_TENSOR_READER_ERROR_HEADER,
                    "sptensor header: expected %u dimensions (one per mode), found %u",
                    w->nmodes, found);
    for (uint32_t m = 0; m < w->nmodes; ++m) {
        uint64_t dim = 0;
        if (!parse_uint_field(p, eol, &dim) || dim == 0 || dim > UINT32_MAX) {
            g_autofree char *text = quote_field(p, eol);
            return fail(w, TH_TENSOR_READER_ERROR_HEADER,
                        "sptensor header: dimension %u is '%s'; expected a size from 1 to %u",
                        m + 1u, text, UINT32_MAX);
        }
        if (w->dims_line != 0 && dim != w->dims[m])
            return fail(w, TH_TENSOR_READER_ERROR_HEADER,
                        "sptensor header: dimension %u is %" PRIu64 ", but the tensorhost "
                        "header's dims (line %" PRIu64 ") give %u",
                        m + 1u, dim, w->dims_line, w->dims[m]);
        w->dims[m] = (th_index)dim;
        p = skip_blanks(field_end(p, eol), eol);
    }
    w->state = STATE_SPT_NNZ;
    return TRUE;
}

/* Whether the host can take the arrays of the nonzeros the sptensor header
 * declares; else the read's error, on the header's line. The count is not
 * an estimate (a file with another stops at its end), so all of it is
 * asked. `rest` is the bytes after the header (UINT64_MAX when not known,
 * in a stream): a count more than they can hold lines is the header's
 * error, not the host's. */
static gboolean host_has_room_for_declared(worker *w, uint64_t rest)
{
    const uint64_t declared = w->declared_nnz;
    g_autofree char *short_of = NULL;
    if (th_sptensor_host_has_room(declared, w->nmodes, &short_of))
        return TRUE;
    /* The last line may lack its newline. */
    const uint64_t most =
        rest == UINT64_MAX ? UINT64_MAX : (rest + 1u) / min_line_bytes(w->nmodes);
    if (declared > most)
        fail(w, TH_TENSOR_READER_ERROR_HEADER,
             "the sptensor header declares %" PRIu64 " %s, but the %" PRIu64 " %s after it can "
             "hold at most %" PRIu64 " nonzero %s",
             declared, th_plural(declared, "nonzero", "nonzeros"), rest,
             th_plural(rest, "byte", "bytes"), most, th_plural(most, "line", "lines"));
    else
        fail(w, TH_TENSOR_READER_ERROR_MEMORY,
             "the sptensor header declares %" PRIu64 " %s, which %s", declared,
             th_plural(declared, "nonzero", "nonzeros"), short_of);
    w->err_line = w->declared_nnz_line;
    return FALSE;
}

static gboolean parse_spt_nnz(worker *w, const char *p, const char *eol)
{
    uint64_t nnz = 0;
    if (count_fields(p, eol) != 1 || !parse_uint_field(p, eol, &nnz)) {
        g_autofree char *text = quote_content(p, eol);
        return fail(w, TH_TENSOR_READER_ERROR_HEADER,
                    "sptensor header: expected the number of nonzeros alone on this line, "
                    "found '%s'",
                    text);
    }
    /* parse_uint_field saturates here: beyond, the number is not known. */
    if (nnz >= MAX_DECLARED_NNZ) {
        g_autofree char *text = quote_field(p, eol);
        return fail(w, TH_TENSOR_READER_ERROR_HEADER,
                    "sptensor header: %s nonzeros are more than tensorhost reads (at most "
                    "%" PRIu64 ")",
                    text, MAX_DECLARED_NNZ - 1u);
    }
    w->declared_nnz = nnz;
    w->declared_nnz_line = w->lines;
    /* A stream's one check ahead (a mapped file's: check_host_room). */
    if (w->guard_growth && !host_has_room_for_declared(w, UINT64_MAX))
        return FALSE;
    worker_set_order(w, w->nmodes);
    w->state = STATE_DATA;
    /* The header may claim anything: growth, not the claim, sizes storage. */
    worker_reserve(w, MIN(nnz, (uint64_t)1 << 12) + 1u);
    return TRUE;
}

/* ---- the tensorhost header (tns_header.h) --------------------------------- */

/* Each header key stands once: FALSE (the error set) for a second `key:`
 * line, the first having been line `first_line` (0: none yet). */
static gboolean first_time(worker *w, uint64_t first_line, const char *key)
{
    if (first_line == 0)
        return TRUE;
    return fail(w, TH_TENSOR_READER_ERROR_HEADER,
                "tensorhost header: a second '%s:' line (the first is line %" PRIu64 ")", key,
                first_line);
}

/* "header: MAJOR.MINOR", the header's first line. */
static gboolean parse_header_version(worker *w, const char *value, const char *end)
{
    if (!first_time(w, w->version_line, "header"))
        return FALSE;
    uint64_t major = 0, minor = 0;
    const char *dot = memchr(value, '.', (size_t)(end - value));
    if (dot == NULL || !parse_uint_field(value, dot, &major) ||
        !parse_uint_field(dot + 1, end, &minor) || field_end(dot + 1, end) != end) {
        g_autofree char *text = quote_text(value, end);
        return fail(w, TH_TENSOR_READER_ERROR_HEADER,
                    "tensorhost header: version '%s' is not MAJOR.MINOR (e.g. %u.%u)", text,
                    TH_TNS_HEADER_MAJOR, TH_TNS_HEADER_MINOR);
    }
    if (major != TH_TNS_HEADER_MAJOR) {
        g_autofree char *text = quote_text(value, end);
        return fail(w, TH_TENSOR_READER_ERROR_UNSUPPORTED,
                    "tensorhost header: version %s is not supported by this reader, which reads "
                    "versions %u.x (written by another tensorhost?)",
                    text, TH_TNS_HEADER_MAJOR);
    }
    w->version_line = w->lines;
    w->version_minor = (uint32_t)MIN(minor, (uint64_t)UINT32_MAX);
    return TRUE;
}

/* "dims: D1 ... DN": the tensor's dims, which the nonzero lines must fit. */
static gboolean parse_header_dims(worker *w, const char *value, const char *end)
{
    if (!first_time(w, w->dims_line, "dims"))
        return FALSE;
    const uint32_t found = count_fields(value, end);
    if (found < 2 || found > TH_MAX_MODES)
        return fail(w, TH_TENSOR_READER_ERROR_HEADER,
                    "tensorhost header: dims: expected 2 to %u sizes (one per mode), found %u",
                    TH_MAX_MODES, found);
    const char *p = value;
    for (uint32_t m = 0; m < found; ++m) {
        uint64_t dim = 0;
        if (!parse_uint_field(p, end, &dim) || dim == 0 || dim > UINT32_MAX) {
            g_autofree char *text = quote_field(p, end);
            return fail(w, TH_TENSOR_READER_ERROR_HEADER,
                        "tensorhost header: dims: size %u is '%s'; expected a size from 1 to %u",
                        m + 1u, text, UINT32_MAX);
        }
        w->dims[m] = (th_index)dim;
        p = skip_blanks(field_end(p, end), end);
    }
    w->dims_nmodes = found;
    w->dims_line = w->lines;
    return TRUE;
}

/* "label: TEXT", with the escapes tns_header.h gives. */
static gboolean parse_header_label(worker *w, const char *value, const char *end)
{
    if (!first_time(w, w->label_line, "label"))
        return FALSE;
    if (value == end)
        return fail(w, TH_TENSOR_READER_ERROR_HEADER,
                    "tensorhost header: the label is empty (leave the line out for none)");
    g_autofree char *problem = NULL;
    w->label = th_tns_label_unescape(value, (size_t)(end - value), &problem);
    if (w->label == NULL)
        return fail(w, TH_TENSOR_READER_ERROR_HEADER, "tensorhost header: label: %s", problem);
    w->label_line = w->lines;
    return TRUE;
}

static gboolean key_is(const char *key, const char *key_end, const char *name)
{
    return (size_t)(key_end - key) == strlen(name) && memcmp(key, name, strlen(name)) == 0;
}

/* One header line; [key, key_end) is its key. */
static gboolean parse_tns_header_line(worker *w, const char *key, const char *key_end,
                                      const char *eol)
{
    /* The blanks around a value are not part of it (tns_header.h). */
    const char *value = skip_blanks(key_end + 1, eol);
    const char *end = eol;
    while (end > value && is_blank(end[-1]))
        --end;
    if (key_is(key, key_end, "header"))
        return parse_header_version(w, value, end);
    const int key_length = (int)(key_end - key);
    if (w->version_line == 0)
        return fail(w, TH_TENSOR_READER_ERROR_HEADER,
                    "tensorhost header: '%.*s:' comes before the header's first line, "
                    "'" TH_TNS_HEADER_PREFIX "header: %u.%u'",
                    key_length, key, TH_TNS_HEADER_MAJOR, TH_TNS_HEADER_MINOR);
    if (key_is(key, key_end, "dims"))
        return parse_header_dims(w, value, end);
    if (key_is(key, key_end, "label"))
        return parse_header_label(w, value, end);
    /* A later minor version's key, which this reader may skip. */
    if (w->version_minor > TH_TNS_HEADER_MINOR)
        return TRUE;
    return fail(w, TH_TENSOR_READER_ERROR_HEADER,
                "tensorhost header: unknown key '%.*s' (version %u.%u has header, dims and "
                "label)",
                key_length, key, TH_TNS_HEADER_MAJOR, TH_TNS_HEADER_MINOR);
}

/* Files an older tensorhost-synth wrote, before the header, start with
 * their label as a comment: kept as the label, so that they stay labelled
 * (a header's label line wins). */
static void take_legacy_label(worker *w, const char *p, const char *eol)
{
    static const char mark[] = "# synthetic tensor: tensorhost-synth ";
    const size_t length = (size_t)(eol - p);
    if (w->lines != 1 || length < strlen(mark) || length - 2u > TH_TNS_MAX_LABEL_BYTES ||
        memcmp(p, mark, strlen(mark)) != 0 || !g_utf8_validate_len(p, length, NULL))
        return;
    while (eol > p && is_blank(eol[-1]))
        --eol;
    w->legacy_label = g_strndup(p + 2, (size_t)(eol - p) - 2u);
}

/* A comment line before the first nonzero line: a header line, or a
 * comment. */
static gboolean parse_comment_line(worker *w, const char *p, const char *eol)
{
    const char *key, *key_end;
    if (!header_line_key(p, eol, &key, &key_end)) {
        take_legacy_label(w, p, eol);
        return TRUE;
    }
    if (w->state != STATE_DETECT)
        return fail_misplaced_header(w);
    return parse_tns_header_line(w, key, key_end, eol);
}

static gboolean parse_header_line(worker *w, const char *line, const char *eol)
{
    /* Header lines are few: look at the whole line (comments included). */
    const char *nul = memchr(line, '\0', (size_t)(eol - line));
    if (nul != NULL)
        return fail_nul(w, line, nul);
    const char *p = skip_blanks(line, eol);
    if (p == eol)
        return TRUE;
    if (*p == '#')
        return parse_comment_line(w, p, eol);
    switch (w->state) {
    case STATE_DETECT:
        if (line_is_word(p, eol, "sptensor")) {
            w->sptensor = TRUE;
            w->state = STATE_SPT_ORDER;
            return TRUE;
        }
        return start_tns(w, line, eol);
    case STATE_SPT_ORDER:
        return parse_spt_order(w, p, eol);
    case STATE_SPT_DIMS:
        return parse_spt_dims(w, p, eol);
    case STATE_SPT_NNZ:
        return parse_spt_nnz(w, p, eol);
    case STATE_DATA:
        break;
    }
    g_return_val_if_reached(FALSE);
}

typedef enum {
    START_READY,     /* parse from *p */
    START_NEED_MORE, /* too few bytes yet to tell (a stream delivers more) */
    START_FAILED,    /* UTF-16 text: w has the error */
} start_result;

/* Whether [p, p + have) could still grow into `mark`. */
static gboolean may_become(const char *p, size_t have, const char *mark, size_t mark_length)
{
    return have < mark_length && memcmp(p, mark, have) == 0;
}

static gboolean starts_with(const char *p, size_t have, const char *mark, size_t mark_length)
{
    return have >= mark_length && memcmp(p, mark, mark_length) == 0;
}

/* At the start of the input: skips a UTF-8 byte-order mark, and refuses
 * UTF-16 text (Windows tools write it), whose every other byte is NUL. */
static start_result look_at_start(worker *w, const char **p, const char *end, gboolean at_eof)
{
    size_t have = (size_t)(end - *p);
    if (!at_eof && (may_become(*p, have, utf8_bom, sizeof utf8_bom) ||
                    may_become(*p, have, utf16le_bom, sizeof utf16le_bom) ||
                    may_become(*p, have, utf16be_bom, sizeof utf16be_bom)))
        return START_NEED_MORE;
    w->bom_checked = TRUE;
    if (starts_with(*p, have, utf8_bom, sizeof utf8_bom)) {
        *p += sizeof utf8_bom;
    } else if (starts_with(*p, have, utf16le_bom, sizeof utf16le_bom) ||
               starts_with(*p, have, utf16be_bom, sizeof utf16be_bom)) {
        w->lines = 1;
        fail(w, TH_TENSOR_READER_ERROR_NOT_TEXT,
             "the file is UTF-16 text (it starts with the byte-order mark \\x%02x\\x%02x); "
             "save it as UTF-8 or ASCII",
             (unsigned char)(*p)[0], (unsigned char)(*p)[1]);
        return START_FAILED;
    }
    return START_READY;
}

/* Parses the complete lines of [p, end) (and a last unterminated one when
 * `at_eof`). Sets *resume to the first byte not consumed. With
 * `stop_when_ready`, returns as soon as the order is known and the header
 * (if any) is done, so the rest can be split among threads. Never looks
 * further than MAX_LINE + 2 bytes for the end of a line. */
static gboolean worker_parse(worker *w, const char *p, const char *end, gboolean at_eof,
                             gboolean stop_when_ready, const char **resume)
{
    const char *start = p;
    *resume = p;
    if (G_UNLIKELY(!w->bom_checked)) {
        start_result first = look_at_start(w, &p, end, at_eof);
        if (first != START_READY)
            return first == START_NEED_MORE;
    }
    while (p < end) {
        /* A line of MAX_LINE bytes, "\r\n" and all, fits the span. */
        size_t span = MIN((size_t)(end - p), MAX_LINE + 2u);
        const char *eol = memchr(p, '\n', span);
        const char *next;
        if (eol != NULL) {
            next = eol + 1;
        } else if (span == MAX_LINE + 2u) {
            ++w->lines;
            return fail_long_line(w, p, p + span);
        } else {
            if (!at_eof)
                break;
            eol = end;
            next = end;
        }
        ++w->lines;
        const char *scanned = eol;
        if (eol > p && eol[-1] == '\r') /* the "\r" of a "\r\n" ending */
            --eol;
        if (G_UNLIKELY((size_t)(eol - p) > MAX_LINE))
            return fail_long_line(w, p, scanned);
        gboolean ok = G_LIKELY(w->state == STATE_DATA) ? parse_data_line(w, p, eol)
                                                       : parse_header_line(w, p, eol);
        if (G_UNLIKELY(!ok)) {
            explain_bad_bytes(w, p, eol);
            return FALSE;
        }
        p = next;
        if (G_UNLIKELY((size_t)(p - w->check_from) >= CHECK_EVERY) && !worker_checkpoint(w, p))
            return FALSE;
        if (stop_when_ready && w->state == STATE_DATA)
            break;
    }
    w->bytes_seen += (size_t)(p - start);
    *resume = p;
    return TRUE;
}

/* ---- assembling the result ----------------------------------------------- */

/* How far a read got, for the message of a cancelled one. */
typedef struct {
    uint64_t done;
    uint64_t total; /* 0 when unknown (a stream) */
} read_extent;

static void set_cancelled_error(const char *name, read_extent extent, GError **error)
{
    /* In MB as the progress display counts; small inputs in bytes. */
    gboolean in_mb = MAX(extent.done, extent.total) >= 1000000u;
    double scale = in_mb ? 1e6 : 1.0;
    const char *unit = in_mb ? "MB" : "bytes";
    if (extent.total > 0)
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_CANCELLED,
                    "%s: reading interrupted after %.0f of %.0f %s", name,
                    (double)extent.done / scale, (double)extent.total / scale, unit);
    else
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_CANCELLED,
                    "%s: reading interrupted after %.0f %s", name, (double)extent.done / scale,
                    unit);
}

static void set_worker_error(const worker *w, const char *name, uint64_t line,
                             read_extent extent, GError **error)
{
    if (w->err_code == TH_TENSOR_READER_ERROR_CANCELLED)
        set_cancelled_error(name, extent, error);
    else if (w->err_whole_file)
        g_set_error(error, TH_TENSOR_READER_ERROR, (gint)w->err_code, "%s: %s", name,
                    w->err_msg);
    else
        g_set_error(error, TH_TENSOR_READER_ERROR, (gint)w->err_code, "%s:%" PRIu64 ": %s",
                    name, line, w->err_msg);
}

static gboolean check_end_of_input(const worker *w0, const char *name, uint64_t total_lines,
                                   uint64_t total_nnz, uint64_t total_bytes, GError **error)
{
    uint64_t last_line = MAX(total_lines, 1u);
    static const char *const awaited[] = {
        [STATE_SPT_ORDER] = "the order",
        [STATE_SPT_DIMS] = "the dimensions",
        [STATE_SPT_NNZ] = "the number of nonzeros",
    };
    if (w0->state == STATE_SPT_ORDER || w0->state == STATE_SPT_DIMS ||
        w0->state == STATE_SPT_NNZ) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_HEADER,
                    "%s:%" PRIu64 ": the file ends inside the sptensor header (expected %s)",
                    name, last_line, awaited[w0->state]);
        return FALSE;
    }
    if (w0->sptensor && total_nnz != w0->declared_nnz) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_HEADER,
                    "%s:%" PRIu64 ": the sptensor header declares %" PRIu64
                    " %s, but the file has %" PRIu64,
                    name, w0->declared_nnz_line, w0->declared_nnz,
                    th_plural(w0->declared_nnz, "nonzero", "nonzeros"), total_nnz);
        return FALSE;
    }
    if (total_nnz == 0) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_EMPTY,
                    "%s:%" PRIu64 ": no nonzero found: %s", name, last_line,
                    total_bytes == 0 ? "the file is empty"
                                     : "the file has only blank lines, comments and headers");
        return FALSE;
    }
    return TRUE;
}

/* Turns the workers' storage into one tensor (freeing it as it goes, so the
 * peak is one copy plus one column), sorted with duplicates merged. The
 * first failed worker in input order has the error to report: its line is
 * the earliest that failed. */
static th_sptensor *assemble(worker **ws, uint32_t nworkers, const char *name,
                             read_extent extent, GError **error)
{
    uint64_t line_offset = 0, total_nnz = 0, explicit_zeros = 0, underflowed = 0;
    for (uint32_t k = 0; k < nworkers; ++k) {
        if (ws[k]->failed) {
            set_worker_error(ws[k], name, line_offset + ws[k]->err_line, extent, error);
            return NULL;
        }
        line_offset += ws[k]->lines;
        total_nnz += ws[k]->count;
        explicit_zeros += ws[k]->explicit_zeros;
        underflowed += ws[k]->underflowed_values;
    }
    worker *w0 = ws[0];
    if (!check_end_of_input(w0, name, line_offset, total_nnz, extent.total, error))
        return NULL;
    /* Sorting a large tensor takes seconds: the last chance to stop cheaply. */
    if (th_cancel_requested()) {
        set_cancelled_error(name, extent, error);
        return NULL;
    }

    th_sptensor *t = g_new0(th_sptensor, 1);
    t->value_scale = 1.0;
    t->nmodes = w0->nmodes;
    t->nnz = total_nnz;
    t->lines_read = total_nnz;
    t->explicit_zeros = explicit_zeros;
    t->underflowed_values = underflowed;
    t->dims = g_new0(th_index, t->nmodes);
    t->indices = g_new0(th_index *, t->nmodes);
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        th_index max_index = 0;
        for (uint32_t k = 0; k < nworkers; ++k)
            max_index = MAX(max_index, ws[k]->max_index[m]);
        t->dims[m] = worker_has_dims(w0) ? w0->dims[m] : max_index + 1u;

        th_index *col = g_renew(th_index, w0->cols[m], total_nnz);
        w0->cols[m] = NULL;
        uint64_t at = w0->count;
        for (uint32_t k = 1; k < nworkers; ++k) {
            if (ws[k]->count > 0)
                memcpy(col + at, ws[k]->cols[m], ws[k]->count * sizeof *col);
            at += ws[k]->count;
            g_clear_pointer(&ws[k]->cols[m], g_free);
        }
        t->indices[m] = col;
    }
    t->values = g_renew(double, w0->vals, total_nnz);
    w0->vals = NULL;
    t->label = w0->label != NULL ? g_steal_pointer(&w0->label) : g_steal_pointer(&w0->legacy_label);
    uint64_t at = w0->count;
    for (uint32_t k = 1; k < nworkers; ++k) {
        if (ws[k]->count > 0)
            memcpy(t->values + at, ws[k]->vals, ws[k]->count * sizeof *t->values);
        at += ws[k]->count;
        g_clear_pointer(&ws[k]->vals, g_free);
    }
    if (!th_tensor_read_merge(t, name, error)) {
        th_sptensor_free(t);
        return NULL;
    }
    return t;
}

/* ---- reading from memory (mmap or buffer) -------------------------------- */

/* One read from memory: its input and what its phases share. */
typedef struct {
    const char *data;
    size_t length;
    gboolean mapped; /* a mapped file: reads run under the SIGBUS guard */
    progress_ctx progress;
    worker **ws;     /* [MAX_THREADS], nworkers of them made */
    uint32_t nworkers;
    struct chunk_job *jobs; /* [MAX_THREADS], njobs to run (0 after a failed header) */
    uint32_t njobs;
} memory_read;

typedef struct chunk_job {
    const memory_read *read;
    worker *w;
    const char *begin, *end;
} chunk_job;

/* Runs fn(arg), which reads the input; FALSE when the mapped file shrank
 * under it. */
static gboolean run_reading(const memory_read *r, th_guarded_fn fn, void *arg)
{
    if (!r->mapped) {
        fn(arg);
        return TRUE;
    }
    return th_sigbus_guard_run(r->data, r->length, fn, arg);
}

static void parse_chunk(void *arg)
{
    chunk_job *job = arg;
    const char *resume = NULL;
    if (worker_parse(job->w, job->begin, job->end, TRUE, FALSE, &resume))
        account_progress(job->w, job->end);
}

static gpointer parse_chunk_thread(gpointer data)
{
    chunk_job *job = data;
    if (!run_reading(job->read, parse_chunk, job))
        fail_shrank(job->w);
    return NULL;
}

static uint32_t choose_thread_count(size_t bytes)
{
    uint32_t forced = atomic_load(&forced_threads);
    if (forced > 0)
        return forced;
    uint64_t by_size = bytes / MIN_BYTES_PER_THREAD;
    uint64_t n = MIN((uint64_t)g_get_num_processors(), MIN((uint64_t)MAX_THREADS, by_size));
    return (uint32_t)MAX(n, 1u);
}

void th_tensor_reader_set_threads(uint32_t threads)
{
    atomic_store(&forced_threads, MIN(threads, MAX_THREADS));
}

/* The end of a chunk that should end near `target`: after the next newline.
 * Looks no further than a line may be long: without a newline there, the
 * line through `target` is too long, the chunk's worker reports it, and the
 * cut does not matter. */
static const char *chunk_boundary(const char *target, const char *end)
{
    size_t span = MIN((size_t)(end - target), MAX_LINE + 2u);
    const char *nl = memchr(target, '\n', span);
    if (nl != NULL)
        return nl + 1;
    return target + span;
}

/* About how many nonzero lines `bytes` of text at `begin` hold: every line
 * of a small input; else the line density of kDensityWindows windows spread
 * over it (a sorted file's lines lengthen as its indices grow, so its start
 * alone would overstate the count). Comment lines count as nonzeros. */
static uint64_t estimate_nonzeros(const char *begin, size_t bytes)
{
    enum { kDensityWindows = 16 };
    const size_t window = (size_t)64 << 10;
    if (bytes <= kDensityWindows * window)
        return count_newlines(begin, bytes) + 1u; /* a last line without its newline */
    uint64_t lines = 0;
    for (uint32_t k = 0; k < kDensityWindows; ++k)
        lines += count_newlines(begin + (bytes - window) / (kDensityWindows - 1u) * k, window);
    return (uint64_t)((double)lines / (double)(kDensityWindows * window) * (double)bytes);
}

/* A mapped file's arrays are asked of the host before the workers reserve
 * them, as a binary file's are: a text tensor the host cannot hold stops
 * here, before minutes of parsing end in the process being killed. The
 * count is an estimate (the header's, or the lines' density), so the host
 * is asked for nine tenths of it: no tensor that fits is refused for a
 * high guess. */
static gboolean check_host_room(worker *w0, const char *p, const char *end)
{
    if (p >= end)
        return TRUE;
    if (w0->sptensor)
        return host_has_room_for_declared(w0, (uint64_t)(end - p));
    const uint64_t estimate = w0->count + estimate_nonzeros(p, (size_t)(end - p));
    return host_has_room_for(w0, "the density of its lines", estimate - estimate / 10u);
}

/* The first phase, in the main thread: the header (if any) and the order,
 * the host's memory for a mapped file's arrays, then the split of the rest
 * into chunks, one worker each. */
static void parse_header_and_plan(void *arg)
{
    memory_read *r = arg;
    worker *w0 = r->ws[0];
    const char *end = r->data + r->length;
    const char *p = r->data;
    if (!worker_parse(w0, p, end, TRUE, TRUE, &p))
        return;
    if (r->mapped && !check_host_room(w0, p, end))
        return;
    uint32_t nchunks = p < end ? choose_thread_count((size_t)(end - p)) : 1u;
    const char *chunk_begin = p;
    for (uint32_t k = 0; k < nchunks; ++k) {
        const char *chunk_end = end;
        if (k + 1 < nchunks) {
            const char *target = p + (size_t)(end - p) / nchunks * (k + 1u);
            chunk_end = chunk_boundary(MAX(target, chunk_begin), end);
        }
        if (k > 0) {
            r->ws[k] = worker_clone_format(w0);
            r->ws[k]->check_from = chunk_begin;
            r->nworkers = k + 1u;
        }
        worker *w = r->ws[k];
        worker_reserve(w, w->count + estimate_capacity(w, chunk_begin,
                                                       (size_t)(chunk_end - chunk_begin)));
        r->jobs[k] = (chunk_job){.read = r, .w = w, .begin = chunk_begin, .end = chunk_end};
        chunk_begin = chunk_end;
    }
    r->njobs = nchunks;
}

/* Runs the jobs, the first in this thread. A thread that cannot be created
 * (a process limit) leaves its job to this thread. */
static void run_jobs(memory_read *r)
{
    GThread **threads = g_new0(GThread *, r->njobs);
    for (uint32_t k = 1; k < r->njobs; ++k)
        threads[k] = g_thread_try_new("th-parse", parse_chunk_thread, &r->jobs[k], NULL);
    for (uint32_t k = 0; k < r->njobs; ++k)
        if (k == 0 || threads[k] == NULL)
            parse_chunk_thread(&r->jobs[k]);
    for (uint32_t k = 1; k < r->njobs; ++k)
        if (threads[k] != NULL)
            g_thread_join(threads[k]);
    g_free(threads);
}

static th_sptensor *read_memory(const char *name, const char *data, size_t length,
                                gboolean mapped, const th_tensor_read_options *options,
                                GError **error)
{
    if (th_cancel_requested()) {
        set_cancelled_error(name, (read_extent){.done = 0, .total = length}, error);
        return NULL;
    }
    memory_read r = {
        .data = data,
        .length = length,
        .mapped = mapped,
        .progress = {.options = options, .total = length, .next_report = PROGRESS_EVERY},
        .ws = g_new0(worker *, MAX_THREADS),
        .nworkers = 1,
        .jobs = g_new0(chunk_job, MAX_THREADS),
    };
    atomic_init(&r.progress.done, 0);
    worker *w0 = r.ws[0] = g_new0(worker, 1);
    w0->state = STATE_DETECT;
    w0->reports = TRUE;
    w0->check_from = data;
    w0->progress = &r.progress;
    worker_take_options(w0, options);

    if (!run_reading(&r, parse_header_and_plan, &r)) {
        fail_shrank(w0);
        r.njobs = 0;
    }
    run_jobs(&r);
    gboolean all_ok = TRUE;
    for (uint32_t k = 0; k < r.nworkers; ++k)
        all_ok = all_ok && !r.ws[k]->failed;
    if (all_ok && options != NULL && options->progress != NULL)
        options->progress(length, length, options->user_data);

    read_extent extent = {.done = atomic_load(&r.progress.done), .total = length};
    th_sptensor *t = assemble(r.ws, r.nworkers, name, extent, error);
    for (uint32_t k = 0; k < r.nworkers; ++k)
        worker_free(r.ws[k]);
    g_free(r.ws);
    g_free(r.jobs);
    return t;
}

/* ---- reading a stream (gzip, pipes) -------------------------------------- */

/* Text from a stream, gunzipped on the way when `gunzip` is set. The
 * decompressor is driven directly rather than through GConverterInputStream
 * so that concatenated gzip members (cat a.gz b.gz, bgzip, pigz -i) are all
 * read: a converter input stream stops at the end of the first member and
 * would silently drop the rest. */
typedef struct {
    GInputStream *raw;
    GConverter *gunzip; /* NULL for plain text */
    char *in;
    size_t in_len, in_pos;
    gboolean raw_eof;
    gboolean member_done;
} text_source;

/* Like g_input_stream_read: bytes of text, 0 at the end, -1 on error. */
static gssize source_read(text_source *s, char *out, size_t capacity, GError **error)
{
    if (s->gunzip == NULL)
        return g_input_stream_read(s->raw, out, capacity, NULL, error);
    for (;;) {
        if (s->in_pos == s->in_len && !s->raw_eof) {
            gssize got = g_input_stream_read(s->raw, s->in, STREAM_BUFFER, NULL, error);
            if (got < 0)
                return -1;
            s->in_len = (size_t)got;
            s->in_pos = 0;
            s->raw_eof = got == 0;
        }
        if (s->member_done) {
            if (s->in_pos == s->in_len)
                return 0; /* only reached at raw EOF */
            g_converter_reset(s->gunzip); /* another member follows */
            s->member_done = FALSE;
        }
        gsize read = 0, written = 0;
        GError *convert_error = NULL;
        GConverterResult r = g_converter_convert(
            s->gunzip, s->in + s->in_pos, s->in_len - s->in_pos, out, capacity,
            s->raw_eof ? G_CONVERTER_INPUT_AT_END : G_CONVERTER_NO_FLAGS, &read, &written,
            &convert_error);
        if (r == G_CONVERTER_ERROR) {
            if (g_error_matches(convert_error, G_IO_ERROR, G_IO_ERROR_PARTIAL_INPUT) &&
                !s->raw_eof) {
                g_error_free(convert_error); /* it consumed all input: read more */
                s->in_pos = s->in_len;
                continue;
            }
            if (g_error_matches(convert_error, G_IO_ERROR, G_IO_ERROR_PARTIAL_INPUT))
                g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_PARTIAL_INPUT,
                                    "gzip data ends too early (truncated file?)");
            else
                g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "invalid gzip data: %s",
                            convert_error->message);
            g_error_free(convert_error);
            return -1;
        }
        s->in_pos += read;
        if (r == G_CONVERTER_FINISHED)
            s->member_done = TRUE;
        if (written > 0)
            return (gssize)written;
        if (read == 0 && r != G_CONVERTER_FINISHED && s->raw_eof) { /* no progress possible */
            g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_PARTIAL_INPUT,
                                "gzip data ends too early (truncated file?)");
            return -1;
        }
    }
}

/* Streams parse in one thread through a buffer of STREAM_BUFFER bytes:
 * since that is longer than any valid line, a full buffer always holds a
 * complete line, or the worker reports the line as too long. */
static th_sptensor *read_stream(const char *name, text_source *source,
                                const th_tensor_read_options *options, GError **error)
{
    if (th_cancel_requested()) {
        set_cancelled_error(name, (read_extent){0, 0}, error);
        return NULL;
    }
    worker *w = g_new0(worker, 1);
    w->state = STATE_DETECT;
    w->guard_growth = TRUE;
    worker_take_options(w, options);
    const size_t capacity = STREAM_BUFFER;
    size_t have = 0;
    char *buffer = g_malloc(capacity);
    uint64_t consumed = 0, next_report = PROGRESS_EVERY;
    gboolean at_eof = FALSE, ok = TRUE;
    while (ok && !at_eof) {
        if (th_cancel_requested()) {
            ok = fail_cancelled(w);
            break;
        }
        GError *read_error = NULL;
        gssize got = source_read(source, buffer + have, capacity - have, &read_error);
        if (got < 0) {
            g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                        "%s:%" PRIu64 ": cannot read: %s", name, w->lines + 1u,
                        read_error->message);
            g_error_free(read_error);
            g_free(buffer);
            worker_free(w);
            return NULL;
        }
        at_eof = got == 0;
        have += (size_t)got;
        const char *resume = buffer;
        w->check_from = buffer; /* the buffer moves: its own count of checked bytes */
        ok = worker_parse(w, buffer, buffer + have, at_eof, FALSE, &resume);
        size_t used = (size_t)(resume - buffer);
        consumed += used;
        memmove(buffer, resume, have - used);
        have -= used;
        if (options != NULL && options->progress != NULL && consumed >= next_report) {
            options->progress(consumed, 0, options->user_data);
            next_report = consumed + PROGRESS_EVERY;
        }
    }
    g_free(buffer);
    if (ok && options != NULL && options->progress != NULL)
        options->progress(consumed, consumed, options->user_data);
    /* Total unknown for a cancelled stream; otherwise all of it was read. */
    read_extent extent = {.done = consumed, .total = ok ? consumed : 0};
    th_sptensor *t = assemble(&w, 1, name, extent, error);
    worker_free(w);
    return t;
}

static th_sptensor *read_raw_stream(const char *name, GInputStream *raw, gboolean gzip,
                                    const th_tensor_read_options *options, GError **error)
{
    text_source source = {.raw = raw};
    if (gzip) {
        source.gunzip = G_CONVERTER(g_zlib_decompressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP));
        source.in = g_malloc(STREAM_BUFFER);
    }
    th_sptensor *t = read_stream(name, &source, options, error);
    g_clear_object(&source.gunzip);
    g_free(source.in);
    return t;
}

static gboolean has_gzip_magic(const void *data, size_t length)
{
    const unsigned char *b = data;
    return length >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}

th_sptensor *th_tensor_read_buffer_full(const char *name, const char *data, size_t length,
                                        const th_tensor_read_options *options, GError **error)
{
    g_return_val_if_fail(name != NULL && (data != NULL || length == 0), NULL);
    if (th_tensor_binary_has_magic(data, length))
        return th_tensor_binary_read_buffer_full(name, data, length, options, error);
    if (has_gzip_magic(data, length)) {
        g_autoptr(GInputStream) raw = g_memory_input_stream_new_from_data(data, (gssize)length,
                                                                          NULL);
        return read_raw_stream(name, raw, TRUE, options, error);
    }
    return read_memory(name, length > 0 ? data : "", length, FALSE, options, error);
}

th_sptensor *th_tensor_read_buffer(const char *name, const char *data, size_t length,
                                   GError **error)
{
    return th_tensor_read_buffer_full(name, data, length, NULL, error);
}

static th_sptensor *read_mapped(const char *path, const th_tensor_read_options *options,
                                GError **error)
{
    GError *map_error = NULL;
    GMappedFile *mapped = g_mapped_file_new(path, FALSE, &map_error);
    if (mapped == NULL) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO, "%s: cannot map: %s",
                    path, map_error->message);
        g_error_free(map_error);
        return NULL;
    }
    const char *data = g_mapped_file_get_contents(mapped);
    size_t length = g_mapped_file_get_length(mapped);
    if (data == NULL || length == 0) {
        data = "";
        length = 0;
    } else {
        /* Advice only: a failure changes nothing but speed. */
        (void)madvise((void *)(uintptr_t)data, length, MADV_SEQUENTIAL | MADV_WILLNEED);
    }
    th_sptensor *t = read_memory(path, data, length, TRUE, options, error);
    g_mapped_file_unref(mapped);
    return t;
}

th_sptensor *th_tensor_read_file(const char *path, const th_tensor_read_options *options,
                                 GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    /* The system's own words for why a file cannot be opened (GIO's repeat
     * the path: "Error opening file PATH: ..."). Only a regular file is
     * opened to find out: opening a FIFO would consume its writer. */
    GStatBuf st;
    int probe_errno = g_stat(path, &st) != 0 ? errno : 0;
    if (probe_errno == 0 && S_ISREG(st.st_mode)) {
        const int probe = g_open(path, O_RDONLY, 0);
        if (probe < 0)
            probe_errno = errno;
        else
            close(probe);
    }
    if (probe_errno != 0) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                    "%s: cannot open: %s", path, g_strerror(probe_errno));
        return NULL;
    }
    g_autoptr(GFile) file = g_file_new_for_path(path);
    GError *open_error = NULL;
    g_autoptr(GFileInputStream) file_in = g_file_read(file, NULL, &open_error);
    if (file_in == NULL) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                    "%s: cannot open: %s", path, open_error->message);
        g_error_free(open_error);
        return NULL;
    }
    g_autoptr(GFileInfo) info = g_file_input_stream_query_info(
        file_in, G_FILE_ATTRIBUTE_STANDARD_TYPE, NULL, NULL);
    gboolean regular = info != NULL && g_file_info_get_file_type(info) == G_FILE_TYPE_REGULAR;

    /* Peek at the first bytes without consuming them: pipes cannot rewind. */
    g_autoptr(GInputStream) buffered = g_buffered_input_stream_new(G_INPUT_STREAM(file_in));
    GBufferedInputStream *b = G_BUFFERED_INPUT_STREAM(buffered);
    GError *read_error = NULL;
    while (g_buffered_input_stream_get_available(b) < TH_TENSOR_BINARY_MAGIC_BYTES) {
        gssize got = g_buffered_input_stream_fill(b, TH_TENSOR_BINARY_MAGIC_BYTES, NULL,
                                                  &read_error);
        if (got < 0) {
            g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                        "%s: cannot read: %s", path, read_error->message);
            g_error_free(read_error);
            return NULL;
        }
        if (got == 0)
            break;
    }
    gsize available = 0;
    const void *head = g_buffered_input_stream_peek_buffer(b, &available);
    if (th_tensor_binary_has_magic(head, available)) { /* its reader maps the file */
        g_input_stream_close(buffered, NULL, NULL);
        return th_tensor_binary_read(path, options, error);
    }
    gboolean gzip = has_gzip_magic(head, available);
    if (regular && !gzip) {
        g_input_stream_close(buffered, NULL, NULL);
        return read_mapped(path, options, error);
    }
    return read_raw_stream(path, buffered, gzip, options, error);
}
