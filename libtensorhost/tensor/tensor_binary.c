/* The binary tensor format: see tensor_binary.h for the layout.
 *
 * Reading is three steps. The metadata (header, dims, checksums, note) is
 * copied out of the mapping and checked completely: every size field is
 * bounded before it is used, the size arithmetic is checked for overflow,
 * and the file must be exactly as long as the header says, so nothing
 * after this step can read past the end or allocate more than the file
 * holds. Then worker threads take chunks of nonzeros in turn and copy them
 * from the mapping into the tensor, block by block, checking each block
 * while it is still in the cache (indices below their mode's size, values
 * finite, and, for a file flagged sorted, the order) and, in version 2,
 * hashing it, since version 2's checksums are made of one checksum per
 * block. Version 1's checksums cover each array whole, so they are
 * computed after the copy, one array per thread (the values, 40% of a
 * 3-mode file, then take one thread as long as the whole parallel copy).
 * A checksum mismatch is reported before any content error, since it
 * explains them.
 *
 * The copy reads the mapping under a SIGBUS guard (sigbus_guard.h), as the
 * text reader does: a file cut short by another process while it is read
 * is an error, not a crash. */
#define _DEFAULT_SOURCE /* madvise, O_CLOEXEC */

#include "tensor/tensor_binary.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/atomic_file.h"
#include "base/cancel.h"
#include "base/message_text.h"
#include "base/sigbus_guard.h"

/* The arrays are copied as they are: on a big-endian host every element
 * would need a byte swap, which nothing here does yet. */
#if G_BYTE_ORDER != G_LITTLE_ENDIAN
#error "tensor_binary.c reads and writes little-endian arrays in place: add byte swaps first"
#endif

/* The fixed header's fields (tensor_binary.h). */
enum {
    OFF_MAJOR = 8,
    OFF_MINOR = 10,
    OFF_HEADER_BYTES = 12,
    OFF_NMODES = 16,
    OFF_INDEX_BYTES = 20,
    OFF_VALUE_TYPE = 21,
    OFF_NNZ = 24,
    OFF_FLAGS = 32,
    OFF_NOTE_BYTES = 40,
    OFF_HEADER_CHECKSUM = 56,
};

/* The most metadata a file can have: the largest fixed header, dims and
 * checksums of TH_MAX_MODES modes, the longest note. */
#define MAX_METADATA_BYTES                                                                  \
    ((size_t)TH_TENSOR_BINARY_MAX_HEADER_BYTES + 16u * TH_MAX_MODES + 8u +                \
     TH_TENSOR_BINARY_MAX_NOTE_BYTES)

/* Nonzeros copied and checked at once: their indices and values stay in
 * the cache between the copy, the checks and (version 2) the hashing (32
 * KB a mode). Version 2's checksum block (tensor_binary.h), so a block
 * hashed is a block copied. */
#define BLOCK_NNZ ((uint64_t)TH_TENSOR_BINARY_CHECKSUM_BLOCK)
/* Chunks handed to the threads: small enough to share the work out evenly
 * (about four a thread) and to poll the cancel flag every few ms, large
 * enough that handing them out costs nothing. */
#define MIN_CHUNK_NNZ ((uint64_t)1 << 16)
#define MAX_CHUNK_NNZ ((uint64_t)1 << 20)
#define CHUNKS_PER_THREAD 4u
/* Each thread is given at least this many bytes of the file. */
#define MIN_BYTES_PER_THREAD ((uint64_t)8 << 20)
#define MAX_THREADS 256u
#define PROGRESS_EVERY ((uint64_t)32 << 20)
/* The writer writes arrays in pieces of this size, polling the cancel flag
 * between them. */
#define WRITE_PIECE ((size_t)64 << 20)

/* th_tensor_binary_set_threads(); 0: the default. */
static atomic_uint forced_threads = 0;

void th_tensor_binary_set_threads(uint32_t threads)
{
    atomic_store(&forced_threads, MIN(threads, MAX_THREADS));
}

gboolean th_tensor_binary_has_magic(const void *data, size_t length)
{
    return length >= TH_TENSOR_BINARY_MAGIC_BYTES &&
           memcmp(data, TH_TENSOR_BINARY_MAGIC, TH_TENSOR_BINARY_MAGIC_BYTES) == 0;
}

/* ---- little-endian fields ------------------------------------------------ */

static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; ++i)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}

/* ---- layout -------------------------------------------------------------- */

/* What the header says, and where everything lies. Section s < nmodes is
 * the indices of mode s + 1; section nmodes is the values. */
typedef struct {
    uint16_t major, minor;
    uint32_t header_bytes;
    uint32_t nmodes;
    uint32_t index_bytes;
    uint32_t value_type;
    uint64_t nnz;
    uint64_t flags;
    uint64_t note_bytes;
    uint64_t header_checksum;
    uint64_t metadata_end;
    uint64_t dims[TH_MAX_MODES];
    uint64_t checksums[TH_MAX_MODES + 1];
    /* Set by locate_sections: */
    uint64_t offsets[TH_MAX_MODES + 1];
    uint64_t file_bytes;
} binary_layout;

static uint64_t section_element_bytes(const binary_layout *l, uint32_t s)
{
    return s < l->nmodes ? l->index_bytes : sizeof(double);
}

/* "mode 2 indices", "values": modes count from 1, as in every message. */
static char *section_name(uint32_t nmodes, uint32_t s)
{
    return s < nmodes ? g_strdup_printf("mode %u indices", s + 1u) : g_strdup("values");
}

/* Section `s` of a file of `nmodes` modes does not hash to its checksum. */
static void set_checksum_error(const char *name, uint32_t nmodes, uint32_t s, GError **error)
{
    g_autofree char *section = section_name(nmodes, s);
    g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_CHECKSUM,
                "%s: checksum mismatch in the %s: the file is corrupt", name, section);
}

static gboolean align_up(uint64_t offset, uint64_t *out)
{
    const uint64_t a = TH_TENSOR_BINARY_ALIGNMENT;
    if (offset > UINT64_MAX - (a - 1u))
        return FALSE;
    *out = (offset + a - 1u) / a * a;
    return TRUE;
}

/* The sections' offsets and the file size. FALSE when they overflow 64 bits
 * (an nnz no file can have). */
static gboolean locate_sections(binary_layout *l)
{
    uint64_t end = l->metadata_end;
    for (uint32_t s = 0; s <= l->nmodes; ++s) {
        uint64_t bytes = 0;
        if (!align_up(end, &l->offsets[s]) ||
            !g_uint64_checked_mul(&bytes, l->nnz, section_element_bytes(l, s)) ||
            !g_uint64_checked_add(&end, l->offsets[s], bytes))
            return FALSE;
    }
    l->file_bytes = end;
    return TRUE;
}

typedef enum {
    LOCATE_OK,
    LOCATE_TRUNCATED,   /* shorter than the metadata */
    LOCATE_NOT_BINARY,  /* no magic */
    LOCATE_VERSION,     /* another major version */
    LOCATE_HEADER_SIZE, /* header_bytes out of range */
    LOCATE_ORDER,       /* nmodes out of range */
    LOCATE_NOTE,        /* note_bytes out of range */
} locate_result;

/* Reads the fields that locate the metadata, then the metadata, from the
 * `length` bytes at `data`; fills `l` up to metadata_end. */
static locate_result locate_metadata(const uint8_t *data, size_t length, binary_layout *l)
{
    memset(l, 0, sizeof *l);
    if (length < TH_TENSOR_BINARY_MAGIC_BYTES)
        return memcmp(data, TH_TENSOR_BINARY_MAGIC, length) == 0 ? LOCATE_TRUNCATED
                                                                  : LOCATE_NOT_BINARY;
    if (!th_tensor_binary_has_magic(data, length))
        return LOCATE_NOT_BINARY;
    if (length < OFF_MINOR + 2u)
        return LOCATE_TRUNCATED;
    l->major = get_u16(data + OFF_MAJOR);
    l->minor = get_u16(data + OFF_MINOR);
    /* The version decides what the rest means: checked before the rest. */
    if (l->major < TH_TENSOR_BINARY_OLDEST_MAJOR || l->major > TH_TENSOR_BINARY_VERSION_MAJOR)
        return LOCATE_VERSION;
    if (length < TH_TENSOR_BINARY_HEADER_BYTES)
        return LOCATE_TRUNCATED;
    l->header_bytes = get_u32(data + OFF_HEADER_BYTES);
    l->nmodes = get_u32(data + OFF_NMODES);
    l->index_bytes = data[OFF_INDEX_BYTES];
    l->value_type = data[OFF_VALUE_TYPE];
    l->nnz = get_u64(data + OFF_NNZ);
    l->flags = get_u64(data + OFF_FLAGS);
    l->note_bytes = get_u64(data + OFF_NOTE_BYTES);
    l->header_checksum = get_u64(data + OFF_HEADER_CHECKSUM);
    if (l->header_bytes < TH_TENSOR_BINARY_HEADER_BYTES ||
        l->header_bytes > TH_TENSOR_BINARY_MAX_HEADER_BYTES || l->header_bytes % 8u != 0)
        return LOCATE_HEADER_SIZE;
    if (l->nmodes < 2 || l->nmodes > TH_MAX_MODES)
        return LOCATE_ORDER;
    if (l->note_bytes > TH_TENSOR_BINARY_MAX_NOTE_BYTES)
        return LOCATE_NOTE;
    /* All three bounded above: no overflow, and at most MAX_METADATA_BYTES. */
    l->metadata_end = (uint64_t)l->header_bytes + 16u * l->nmodes + 8u + l->note_bytes;
    if (length < l->metadata_end)
        return LOCATE_TRUNCATED;
    const uint8_t *p = data + l->header_bytes;
    for (uint32_t m = 0; m < l->nmodes; ++m, p += 8)
        l->dims[m] = get_u64(p);
    for (uint32_t s = 0; s <= l->nmodes; ++s, p += 8)
        l->checksums[s] = get_u64(p);
    return LOCATE_OK;
}

/* XXH3-64 of the metadata with the header checksum's bytes as zeros. */
static uint64_t metadata_checksum(const uint8_t *metadata, uint64_t metadata_end)
{
    static const uint8_t zeros[8] = {0};
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    XXH3_64bits_update(&state, metadata, OFF_HEADER_CHECKSUM);
    XXH3_64bits_update(&state, zeros, sizeof zeros);
    XXH3_64bits_update(&state, metadata + OFF_HEADER_CHECKSUM + 8u,
                       (size_t)metadata_end - OFF_HEADER_CHECKSUM - 8u);
    return XXH3_64bits_digest(&state);
}

/* Version 1's checksum of a section: XXH3-64 of it whole. Version 2's: of
 * the XXH3-64s (8 bytes each, little-endian) of its blocks of
 * BLOCK_NNZ elements, so that threads can hash the blocks in any order. */
static uint64_t blocks_checksum(const uint64_t *block_sums, uint64_t nblocks)
{
    return XXH3_64bits(block_sums, (size_t)nblocks * sizeof *block_sums);
}

static uint64_t blocks_of(uint64_t nnz)
{
    return (nnz + BLOCK_NNZ - 1u) / BLOCK_NNZ;
}

static uint64_t section_checksum(uint16_t major, const void *array, uint64_t nnz,
                                 uint64_t element_bytes)
{
    if (major < 2u)
        return XXH3_64bits(array, (size_t)(nnz * element_bytes));
    const uint64_t nblocks = blocks_of(nnz);
    uint64_t *sums = g_new(uint64_t, MAX(nblocks, 1u));
    for (uint64_t b = 0; b < nblocks; ++b) {
        const uint64_t first = b * BLOCK_NNZ, n = MIN(BLOCK_NNZ, nnz - first);
        sums[b] = XXH3_64bits((const uint8_t *)array + first * element_bytes,
                              (size_t)(n * element_bytes));
    }
    const uint64_t sum = blocks_checksum(sums, nblocks);
    g_free(sums);
    return sum;
}

gboolean th_tensor_binary_reseal(void *data, size_t length)
{
    g_return_val_if_fail(data != NULL || length == 0, FALSE);
    uint8_t *bytes = data;
    binary_layout l;
    if (length == 0 || locate_metadata(bytes, length, &l) != LOCATE_OK ||
        (l.index_bytes != 4 && l.index_bytes != 8) || !locate_sections(&l) ||
        l.file_bytes > length)
        return FALSE;
    uint8_t *table = bytes + l.header_bytes + 8u * l.nmodes;
    for (uint32_t s = 0; s <= l.nmodes; ++s) {
        put_u64(table + 8u * s, section_checksum(l.major, bytes + l.offsets[s], l.nnz,
                                                 section_element_bytes(&l, s)));
    }
    put_u64(bytes + OFF_HEADER_CHECKSUM, metadata_checksum(bytes, l.metadata_end));
    return TRUE;
}

/* ---- checking the header ------------------------------------------------- */

static gboolean fail_header(GError **error, const char *name, th_tensor_reader_error code,
                            const char *format, ...) G_GNUC_PRINTF(4, 5);

static gboolean fail_header(GError **error, const char *name, th_tensor_reader_error code,
                            const char *format, ...)
{
    va_list args;
    va_start(args, format);
    g_autofree char *message = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(error, TH_TENSOR_READER_ERROR, (gint)code, "%s: %s", name, message);
    return FALSE;
}

static gboolean fail_truncated(GError **error, const char *name, uint64_t expected,
                               uint64_t actual, const char *what)
{
    return fail_header(error, name, TH_TENSOR_READER_ERROR_TRUNCATED,
                       "truncated binary tensor: expected %s%" PRIu64 " bytes, the file has %" PRIu64
                       " (cut short while copied or written?)",
                       what, expected, actual);
}

/* Everything about the header, before any array is read: `metadata` holds
 * the first min(length, MAX_METADATA_BYTES) bytes of the `length` bytes of
 * the file. Fills `l` completely. */
static gboolean check_header(const char *name, const uint8_t *metadata, uint64_t length,
                             binary_layout *l, GError **error)
{
    const size_t have = (size_t)MIN(length, (uint64_t)MAX_METADATA_BYTES);
    switch (locate_metadata(metadata, have, l)) {
    case LOCATE_OK:
        break;
    case LOCATE_NOT_BINARY:
        return fail_header(error, name, TH_TENSOR_READER_ERROR_NOT_BINARY,
                           "not a tensorhost binary tensor: it does not start with \"%s\"",
                           TH_TENSOR_BINARY_MAGIC);
    case LOCATE_TRUNCATED:
        if (length < TH_TENSOR_BINARY_HEADER_BYTES)
            return fail_truncated(error, name, TH_TENSOR_BINARY_HEADER_BYTES, length,
                                  "a header of at least ");
        return fail_truncated(error, name, l->metadata_end, length,
                              "a header, dims, checksums and note of ");
    case LOCATE_VERSION:
        return fail_header(error, name, TH_TENSOR_READER_ERROR_UNSUPPORTED,
                           "binary tensor format version %u.%u is not supported by this "
                           "reader, which reads versions %u.x to %u.x (written by another "
                           "tensorhost?)",
                           l->major, l->minor, TH_TENSOR_BINARY_OLDEST_MAJOR,
                           TH_TENSOR_BINARY_VERSION_MAJOR);
    case LOCATE_HEADER_SIZE:
        return fail_header(error, name, TH_TENSOR_READER_ERROR_HEADER,
                           "header size %u bytes is invalid (expected a multiple of 8 from %u "
                           "to %u)",
                           l->header_bytes, TH_TENSOR_BINARY_HEADER_BYTES,
                           TH_TENSOR_BINARY_MAX_HEADER_BYTES);
    case LOCATE_ORDER:
        return fail_header(error, name, TH_TENSOR_READER_ERROR_ORDER,
                           "the header gives %u %s; tensorhost reads tensors of 2 to %u",
                           l->nmodes, th_plural(l->nmodes, "mode", "modes"), TH_MAX_MODES);
    case LOCATE_NOTE:
        return fail_header(error, name, TH_TENSOR_READER_ERROR_HEADER,
                           "the header gives a note of %" PRIu64 " bytes, more than the %u a "
                           "note may take",
                           l->note_bytes, TH_TENSOR_BINARY_MAX_NOTE_BYTES);
    }
    /* Every field below is covered by the checksum: a corrupt header is
     * reported as such, not as whatever the corruption made a field say. */
    if (metadata_checksum(metadata, l->metadata_end) != l->header_checksum)
        return fail_header(error, name, TH_TENSOR_READER_ERROR_CHECKSUM,
                           "checksum mismatch in the header (bytes 0 to %" PRIu64
                           "): the file is corrupt",
                           l->metadata_end - 1u);
    if (l->index_bytes == 8)
        return fail_header(error, name, TH_TENSOR_READER_ERROR_UNSUPPORTED,
                           "index width 8 is not supported by this reader (tensorhost "
                           "indices are 32-bit)");
    if (l->index_bytes != 4)
        return fail_header(error, name, TH_TENSOR_READER_ERROR_HEADER,
                           "index width %u bytes is invalid (expected 4)", l->index_bytes);
    if (l->value_type != TH_TENSOR_BINARY_VALUE_FLOAT64)
        return fail_header(error, name, TH_TENSOR_READER_ERROR_UNSUPPORTED,
                           "value type %u is not supported by this reader (it reads %u, "
                           "float64)",
                           l->value_type, TH_TENSOR_BINARY_VALUE_FLOAT64);
    for (uint32_t m = 0; m < l->nmodes; ++m)
        if (l->dims[m] < 1 || l->dims[m] > UINT32_MAX)
            return fail_header(error, name, TH_TENSOR_READER_ERROR_HEADER,
                               "the header gives mode %u size %" PRIu64
                               " (expected 1 to %u: indices are 32-bit)",
                               m + 1u, l->dims[m], UINT32_MAX);
    if (l->nnz == 0)
        return fail_header(error, name, TH_TENSOR_READER_ERROR_EMPTY,
                           "no nonzero found: the header gives nnz 0");
    if (!locate_sections(l))
        return fail_header(error, name, TH_TENSOR_READER_ERROR_TRUNCATED,
                           "the header gives nnz %" PRIu64 ", more than any file holds (the "
                           "file has %" PRIu64 " bytes)",
                           l->nnz, length);
    if (length < l->file_bytes)
        return fail_truncated(error, name, l->file_bytes, length, "");
    if (length > l->file_bytes)
        return fail_header(error, name, TH_TENSOR_READER_ERROR_TRUNCATED,
                           "the file has %" PRIu64 " bytes, more than the %" PRIu64
                           " its header gives (bytes appended after the values?)",
                           length, l->file_bytes);
    return TRUE;
}

/* ---- copying the arrays -------------------------------------------------- */

/* A content error: the nonzero (0-based) and the section (a mode, or
 * nmodes for a value not finite, or NEGATIVE_SECTION(nmodes) for a
 * negative one where the read requires values >= 0); the earliest in the
 * file is reported (at one nonzero, the lowest section). */
#define NEGATIVE_SECTION(nmodes) ((nmodes) + 1u)
typedef struct {
    gboolean found;
    uint64_t nonzero;
    uint32_t section;
} content_error;

static void note_content_error(content_error *e, uint64_t nonzero, uint32_t section)
{
    if (!e->found || nonzero < e->nonzero || (nonzero == e->nonzero && section < e->section))
        *e = (content_error){.found = TRUE, .nonzero = nonzero, .section = section};
}

/* One read: its input, its output, and what the threads share. */
typedef struct {
    const uint8_t *data;
    uint64_t length;
    gboolean mapped; /* reads of `data` run under the SIGBUS guard */
    const binary_layout *layout;
    th_sptensor *t;
    /* The file's nonzero that t's first one is: 0, or a share's first
     * (th_tensor_binary_read_share). */
    uint64_t first;
    gboolean check_order; /* the file says it is sorted: verify */
    /* Version 2: each section's block checksums, [section][block], filled
     * by the copy; NULL for version 1 (hashed after the copy). */
    uint64_t *block_sums;
    uint64_t nblocks;
    const th_tensor_read_options *options;
    const char *nonnegative_reason; /* NULL: negative values are fine */
    /* [nmodes] the largest index + 1 of each mode: the file's dims, or the
     * read's bound_dims where they are smaller (tensor_read_types.h). */
    th_index *index_limits;

    uint64_t chunk_nnz, nchunks;
    atomic_uint_fast64_t next_chunk;
    atomic_uint_fast64_t bytes_done;
    atomic_bool stop; /* a thread faulted or saw a cancel: the rest stop */
    uint64_t next_report;
} copy_run;

typedef struct {
    copy_run *run;
    gboolean reports; /* calls the progress callback (the calling thread) */
    gboolean shrank;
    gboolean cancelled;
    gboolean out_of_order; /* two neighbours of one chunk are not increasing */
    uint64_t zeros;
    content_error error;
    uint32_t ord[BLOCK_NNZ]; /* scratch of block_in_order */
} copy_worker;

/* Whether nonzero i - 1 comes strictly before nonzero i. */
static inline gboolean in_order(th_index *const *indices, uint32_t nmodes, uint64_t i)
{
    for (uint32_t m = 0; m < nmodes; ++m) {
        const th_index a = indices[m][i - 1], b = indices[m][i];
        if (a != b)
            return a < b;
    }
    return FALSE; /* the same coordinates twice */
}

/* The checks below run on every nonzero, so they are written to vectorize
 * at -O2: branch-free inner loops of a fixed LANES elements, which GCC's
 * cheap cost model takes since they need no remainder loop of their own
 * (the few elements left over take a scalar loop). */
#define LANES 16u

/* Whether any of idx[0, n) is not below dim. */
static gboolean any_index_beyond(const th_index *idx, uint64_t n, th_index dim)
{
    uint32_t beyond = 0;
    uint64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (uint32_t j = 0; j < LANES; ++j)
            beyond |= idx[i + j] >= dim;
    for (; i < n; ++i)
        beyond |= idx[i] >= dim;
    return beyond != 0;
}

/* Doubles as pairs of 32-bit words (low word first: little-endian), which
 * SSE2 compares (it has no 64-bit compare). */
typedef uint32_t G_GNUC_MAY_ALIAS aliased_word;

/* The values of v[0, n) that are not finite (exponent all ones: Inf,
 * NaN); adds those that are zero (either sign) to *zeros. */
static uint32_t count_non_finite(const double *v, uint64_t n, uint64_t *zeros)
{
    const aliased_word *w = (const aliased_word *)v;
    const uint32_t exponent = 0x7ff00000u;
    uint32_t bad = 0, zero = 0;
    uint64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (uint32_t j = 0; j < LANES; ++j) {
            const uint32_t lo = w[2 * (i + j)], hi = w[2 * (i + j) + 1];
            bad += (hi & exponent) == exponent;
            zero += ((hi << 1) | lo) == 0;
        }
    for (; i < n; ++i) {
        const uint32_t lo = w[2 * i], hi = w[2 * i + 1];
        bad += (hi & exponent) == exponent;
        zero += ((hi << 1) | lo) == 0;
    }
    *zeros += zero;
    return bad;
}

/* Whether any of v[0, n) is below zero (-0.0 and NaN are not). Only
 * called when the read requires values >= 0. */
static gboolean any_negative(const double *v, uint64_t n)
{
    uint32_t negative = 0;
    uint64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (uint32_t j = 0; j < LANES; ++j)
            negative |= v[i + j] < 0.0;
    for (; i < n; ++i)
        negative |= v[i] < 0.0;
    return negative != 0;
}

/* One mode's step of comparing the coordinates of nonzeros k and k + 1 of
 * a[] for k in [0, n), from the last mode to the first: the pair is in
 * order when this mode increases, or stays equal and the later modes put
 * it in order. ord[] holds all ones for "in order", else zero. */
static void order_step(const th_index *restrict a, uint32_t *restrict ord, uint64_t n)
{
    uint64_t k = 0;
    for (; k + LANES <= n; k += LANES)
        for (uint32_t j = 0; j < LANES; ++j) {
            const th_index p = a[k + j], c = a[k + j + 1];
            ord[k + j] = (uint32_t)-(p < c) | ((uint32_t)-(p == c) & ord[k + j]);
        }
    for (; k < n; ++k) {
        const th_index p = a[k], c = a[k + 1];
        ord[k] = (uint32_t)-(p < c) | ((uint32_t)-(p == c) & ord[k]);
    }
}

/* Whether each nonzero of [first + 1, first + n] comes strictly after the
 * one before it; n <= BLOCK_NNZ. */
static gboolean block_in_order(th_index *const *indices, uint32_t nmodes, uint64_t first,
                               uint64_t n, uint32_t *ord)
{
    memset(ord, 0, n * sizeof *ord); /* all modes equal: a repeat, not in order */
    for (uint32_t m = nmodes; m-- > 0;)
        order_step(indices[m] + first, ord, n);
    uint32_t all = ~0u;
    uint64_t k = 0;
    for (; k + LANES <= n; k += LANES)
        for (uint32_t j = 0; j < LANES; ++j)
            all &= ord[k + j];
    for (; k < n; ++k)
        all &= ord[k];
    return all != 0;
}

/* Copies nonzeros [begin, begin + n) and checks them. */
static void copy_block(copy_worker *w, uint64_t begin, uint64_t n, uint64_t chunk_begin)
{
    const copy_run *r = w->run;
    const binary_layout *l = r->layout;
    th_sptensor *t = r->t;
    for (uint32_t m = 0; m < l->nmodes; ++m) {
        th_index *dst = t->indices[m] + begin;
        memcpy(dst, r->data + l->offsets[m] + (r->first + begin) * sizeof *dst,
               n * sizeof *dst);
        if (r->block_sums != NULL)
            r->block_sums[m * r->nblocks + begin / BLOCK_NNZ] = XXH3_64bits(dst, n * sizeof *dst);
        const th_index dim = r->index_limits[m];
        if (G_UNLIKELY(any_index_beyond(dst, n, dim))) {
            uint64_t i = 0;
            while (dst[i] < dim)
                ++i;
            note_content_error(&w->error, begin + i, m);
        }
    }
    double *values = t->values + begin;
    memcpy(values, r->data + l->offsets[l->nmodes] + (r->first + begin) * sizeof *values,
           n * sizeof *values);
    if (r->block_sums != NULL)
        r->block_sums[l->nmodes * r->nblocks + begin / BLOCK_NNZ] =
            XXH3_64bits(values, n * sizeof *values);
    if (G_UNLIKELY(count_non_finite(values, n, &w->zeros) > 0)) {
        uint64_t i = 0;
        while (isfinite(values[i]))
            ++i;
        note_content_error(&w->error, begin + i, l->nmodes);
    }
    if (r->nonnegative_reason != NULL && G_UNLIKELY(any_negative(values, n))) {
        uint64_t i = 0;
        while (!(values[i] < 0.0))
            ++i;
        note_content_error(&w->error, begin + i, NEGATIVE_SECTION(l->nmodes));
    }
    /* Pairs inside the chunk; those across chunks are checked later. */
    const uint64_t first = MAX(begin, chunk_begin + 1u) - 1u; /* the pair (first, first + 1) */
    if (r->check_order && !w->out_of_order && first + 1u < begin + n &&
        !block_in_order(t->indices, l->nmodes, first, begin + n - 1u - first, w->ord))
        w->out_of_order = TRUE;
}

static void report_progress(copy_worker *w, uint64_t done)
{
    copy_run *r = w->run;
    if (!w->reports || r->options == NULL || r->options->progress == NULL ||
        done < r->next_report)
        return;
    r->options->progress(done, r->length, r->options->user_data);
    r->next_report = done + PROGRESS_EVERY;
}

/* Takes chunks until none is left or the read stops. */
static void copy_chunks(void *arg)
{
    copy_worker *w = arg;
    copy_run *r = w->run;
    const uint64_t bytes_per_nonzero = th_sptensor_bytes_per_nonzero(r->layout->nmodes);
    while (!atomic_load(&r->stop)) {
        if (th_cancel_requested()) {
            w->cancelled = TRUE;
            atomic_store(&r->stop, TRUE);
            return;
        }
        const uint64_t chunk = atomic_fetch_add(&r->next_chunk, 1);
        if (chunk >= r->nchunks)
            return;
        const uint64_t begin = chunk * r->chunk_nnz;
        const uint64_t end = MIN(begin + r->chunk_nnz, r->t->nnz);
        for (uint64_t b = begin; b < end; b += BLOCK_NNZ)
            copy_block(w, b, MIN(BLOCK_NNZ, end - b), begin);
        const uint64_t bytes = (end - begin) * bytes_per_nonzero;
        report_progress(w, atomic_fetch_add(&r->bytes_done, bytes) + bytes);
    }
}

/* Runs fn(arg), which reads the input; FALSE when the mapped file shrank
 * under it. */
static gboolean run_reading(const copy_run *r, th_guarded_fn fn, void *arg)
{
    if (!r->mapped) {
        fn(arg);
        return TRUE;
    }
    return th_sigbus_guard_run(r->data, (size_t)r->length, fn, arg);
}

static gpointer copy_thread(gpointer arg)
{
    copy_worker *w = arg;
    if (!run_reading(w->run, copy_chunks, w)) {
        w->shrank = TRUE;
        atomic_store(&w->run->stop, TRUE);
    }
    return NULL;
}

/* Runs fn on every worker, the first in this thread. A thread that cannot
 * be created (a process limit) leaves its share to the others. */
static void run_workers(GThreadFunc fn, void *workers, size_t worker_size, uint32_t nworkers)
{
    GThread **threads = g_new0(GThread *, nworkers);
    char *base = workers;
    for (uint32_t k = 1; k < nworkers; ++k)
        threads[k] = g_thread_try_new("th-binary", fn, base + k * worker_size, NULL);
    fn(base);
    for (uint32_t k = 1; k < nworkers; ++k)
        if (threads[k] != NULL)
            g_thread_join(threads[k]);
    g_free(threads);
}

static uint32_t choose_thread_count(uint64_t bytes, uint64_t nchunks_at_most)
{
    uint32_t forced = atomic_load(&forced_threads);
    if (forced > 0)
        return forced;
    uint64_t n = MIN((uint64_t)g_get_num_processors(), (uint64_t)MAX_THREADS);
    n = MIN(n, bytes / MIN_BYTES_PER_THREAD);
    n = MIN(n, nchunks_at_most);
    return (uint32_t)MAX(n, 1u);
}

/* ---- checksums of the copied arrays -------------------------------------- */

typedef struct {
    const binary_layout *layout;
    const th_sptensor *t;
    uint32_t order[TH_MAX_MODES + 1]; /* sections, the largest first */
    atomic_uint next;
    gboolean mismatch[TH_MAX_MODES + 1];
} checksum_run;

typedef struct {
    checksum_run *run;
} checksum_worker;

static gpointer checksum_thread(gpointer arg)
{
    checksum_run *r = ((checksum_worker *)arg)->run;
    const binary_layout *l = r->layout;
    for (;;) {
        const uint32_t k = atomic_fetch_add(&r->next, 1);
        if (k > l->nmodes)
            return NULL;
        const uint32_t s = r->order[k];
        const void *array = s < l->nmodes ? (const void *)r->t->indices[s] : r->t->values;
        const uint64_t sum = XXH3_64bits(array, (size_t)(l->nnz * section_element_bytes(l, s)));
        r->mismatch[s] = sum != l->checksums[s];
    }
}

/* The first section whose checksum does not match, or -1: version 2's from
 * the block checksums the copy made, version 1's by hashing each copied
 * array whole, one array per thread. */
static int64_t first_checksum_mismatch(const copy_run *r, uint32_t nthreads)
{
    const binary_layout *l = r->layout;
    if (r->block_sums != NULL) {
        for (uint32_t s = 0; s <= l->nmodes; ++s)
            if (blocks_checksum(r->block_sums + s * r->nblocks, r->nblocks) != l->checksums[s])
                return s;
        return -1;
    }
    checksum_run run = {.layout = l, .t = r->t};
    atomic_init(&run.next, 0);
    run.order[0] = l->nmodes; /* the values, twice as long as an index array */
    for (uint32_t m = 0; m < l->nmodes; ++m)
        run.order[m + 1u] = m;
    const uint32_t n = MIN(nthreads, l->nmodes + 1u);
    checksum_worker *workers = g_new(checksum_worker, n);
    for (uint32_t k = 0; k < n; ++k)
        workers[k].run = &run;
    run_workers(checksum_thread, workers, sizeof *workers, n);
    g_free(workers);
    for (uint32_t s = 0; s <= l->nmodes; ++s)
        if (run.mismatch[s])
            return s;
    return -1;
}

/* ---- reading ------------------------------------------------------------- */

/* How far a read got, for the message of a cancelled one (as the text
 * reader words it). */
static void set_cancelled_error(const char *name, uint64_t done, uint64_t total,
                                GError **error)
{
    gboolean in_mb = total >= 1000000u;
    double scale = in_mb ? 1e6 : 1.0;
    g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_CANCELLED,
                "%s: reading interrupted after %.0f of %.0f %s", name, (double)done / scale,
                (double)total / scale, in_mb ? "MB" : "bytes");
}

static void set_content_error(const char *name, const binary_layout *l, const th_sptensor *t,
                              uint64_t first, content_error e, const char *reason,
                              const th_tensor_read_options *options, GError **error)
{
    const uint64_t number = first + e.nonzero + 1u; /* in the file, from 1 */
    const th_index index = e.section < l->nmodes ? t->indices[e.section][e.nonzero] : 0;
    if (e.section < l->nmodes && index < t->dims[e.section]) { /* beyond the bound alone */
        const th_index dim = options->bound_dims[e.section];
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_INDEX_RANGE,
                    "%s: nonzero %" PRIu64 " of %" PRIu64 ": mode %u index %u is out of range: "
                    "%s has mode %u size %u (indices 0 to %u)",
                    name, number, l->nnz, e.section + 1u, index,
                    th_tensor_read_bound_owner(options), e.section + 1u, dim, dim - 1u);
        return;
    }
    if (e.section < l->nmodes) {
        const th_index dim = t->dims[e.section];
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_INDEX_RANGE,
                    "%s: nonzero %" PRIu64 " of %" PRIu64 ": mode %u index %u is out of range: "
                    "the header gives mode %u size %u (indices 0 to %u)",
                    name, number, l->nnz, e.section + 1u, t->indices[e.section][e.nonzero],
                    e.section + 1u, dim, dim - 1u);
        return;
    }
    if (e.section == NEGATIVE_SECTION(l->nmodes)) {
        g_autoptr(GString) at = g_string_new(NULL);
        for (uint32_t m = 0; m < l->nmodes; ++m)
            g_string_append_printf(at, "%s%" PRIu64, m ? ", " : "",
                                   (uint64_t)t->indices[m][e.nonzero] + 1u);
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_VALUE,
                    "%s: nonzero %" PRIu64 " of %" PRIu64 " at (%s) (1-based): value %g is "
                    "negative: %s",
                    name, number, l->nnz, at->str, t->values[e.nonzero], reason);
        return;
    }
    g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_VALUE,
                "%s: nonzero %" PRIu64 " of %" PRIu64 ": value %g is not finite", name, number,
                l->nnz, t->values[e.nonzero]);
}

/* Whether the zero bytes between the metadata and the sections, and between
 * sections, are zero: nothing else covers them. */
typedef struct {
    const uint8_t *data;
    const binary_layout *layout;
    int64_t bad_section; /* the section the nonzero gap precedes, or -1 */
} padding_check;

static void check_padding(void *arg)
{
    padding_check *c = arg;
    const binary_layout *l = c->layout;
    uint64_t end = l->metadata_end;
    c->bad_section = -1;
    for (uint32_t s = 0; s <= l->nmodes; ++s) {
        for (uint64_t i = end; i < l->offsets[s]; ++i)
            if (c->data[i] != 0) {
                c->bad_section = s;
                return;
            }
        end = l->offsets[s] + l->nnz * section_element_bytes(l, s);
    }
}

typedef struct {
    const uint8_t *data;
    uint8_t *copy;
    size_t length;
} metadata_copy;

static void copy_metadata(void *arg)
{
    metadata_copy *c = arg;
    memcpy(c->copy, c->data, c->length);
}

static void set_shrank_error(const char *name, GError **error)
{
    g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                "%s: the file shrank while it was read (truncated or rewritten by another "
                "process?); read it again once it is complete",
                name);
}

/* The header and the padding, checked before any array is read; fills
 * `layout`. */
/* The note as the tensor's label: NULL for none; UTF-8 whatever the bytes
 * (the note is free text, not part of the tensor: a byte that is not UTF-8,
 * or a NUL, shows as U+FFFD rather than failing the read). */
static char *label_from_note(const uint8_t *metadata, const binary_layout *l)
{
    if (l->note_bytes == 0)
        return NULL;
    const char *note = (const char *)metadata + (l->metadata_end - l->note_bytes);
    return g_utf8_make_valid(note, (gssize)l->note_bytes);
}

/* The header checked, and the padding; *label from the note. */
static gboolean check_metadata(const char *name, const copy_run *r, binary_layout *layout,
                               char **label, GError **error)
{
    /* The header, from a copy: nothing below reads the mapping unguarded. */
    metadata_copy meta = {.data = r->data, .length = (size_t)MIN(r->length, MAX_METADATA_BYTES)};
    meta.copy = g_malloc(MAX(meta.length, 1u));
    if (!run_reading(r, copy_metadata, &meta)) {
        g_free(meta.copy);
        set_shrank_error(name, error);
        return FALSE;
    }
    const gboolean ok = check_header(name, meta.copy, r->length, layout, error);
    *label = ok ? label_from_note(meta.copy, layout) : NULL;
    g_free(meta.copy);
    if (!ok)
        return FALSE;
    padding_check padding = {.data = r->data, .layout = layout};
    if (!run_reading(r, check_padding, &padding)) {
        set_shrank_error(name, error);
        return FALSE;
    }
    if (padding.bad_section >= 0) {
        g_autofree char *section = section_name(layout->nmodes, (uint32_t)padding.bad_section);
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_CHECKSUM,
                    "%s: the padding before the %s is not zero: the file is corrupt", name,
                    section);
        return FALSE;
    }
    return TRUE;
}

/* How many threads, and the chunks they take. */
static uint32_t plan_chunks(copy_run *r)
{
    const uint64_t nnz = r->t->nnz;
    const uint32_t forced = atomic_load(&forced_threads);
    const uint32_t nthreads =
        choose_thread_count(r->length, (nnz + MIN_CHUNK_NNZ - 1u) / MIN_CHUNK_NNZ);
    const uint64_t chunks = (uint64_t)CHUNKS_PER_THREAD * nthreads;
    uint64_t chunk = (nnz + chunks - 1u) / chunks;
    chunk = forced == 0 ? CLAMP(chunk, MIN_CHUNK_NNZ, MAX_CHUNK_NNZ) : MIN(chunk, MAX_CHUNK_NNZ);
    chunk = MAX(chunk, 1u);
    if (r->block_sums != NULL) /* whole checksum blocks, each hashed where it is copied */
        chunk = (chunk + BLOCK_NNZ - 1u) / BLOCK_NNZ * BLOCK_NNZ;
    r->chunk_nnz = chunk;
    r->nchunks = (nnz + r->chunk_nnz - 1u) / r->chunk_nnz;
    return nthreads;
}

/* What the copy found, over all threads. */
typedef struct {
    gboolean shrank, cancelled, out_of_order;
    content_error first;
} copy_outcome;

/* Copies every array into r->t with `nthreads` threads; counts the zeros. */
static copy_outcome copy_arrays(copy_run *r, uint32_t nthreads)
{
    atomic_init(&r->next_chunk, 0);
    atomic_init(&r->bytes_done, 0);
    atomic_init(&r->stop, FALSE);
    copy_worker *workers = g_new0(copy_worker, nthreads);
    for (uint32_t k = 0; k < nthreads; ++k)
        workers[k].run = r;
    workers[0].reports = TRUE;
    run_workers(copy_thread, workers, sizeof *workers, nthreads);
    copy_outcome out = {0};
    for (uint32_t k = 0; k < nthreads; ++k) {
        const copy_worker *w = &workers[k];
        out.shrank = out.shrank || w->shrank;
        out.cancelled = out.cancelled || w->cancelled;
        out.out_of_order = out.out_of_order || w->out_of_order;
        r->t->explicit_zeros += w->zeros;
        if (w->error.found)
            note_content_error(&out.first, w->error.nonzero, w->error.section);
    }
    g_free(workers);
    /* The pairs that straddle two chunks. */
    for (uint64_t c = 1; r->check_order && !out.out_of_order && c < r->nchunks; ++c)
        out.out_of_order = !in_order(r->t->indices, r->t->nmodes, c * r->chunk_nnz);
    return out;
}

/* A share's part of the file: `part` of `parts` (th_tensor_binary_read_share). */
typedef struct {
    uint32_t part, parts;
} share_request;

/* The XXH3-64s of the checksum blocks that start in the share
 * [first, first + count), whole (a block's end may lie in the next share),
 * into share->block_sums. Runs under the SIGBUS guard. */
typedef struct {
    const uint8_t *data;
    const binary_layout *layout;
    th_tensor_share *share;
} share_hashing;

static void hash_share_blocks(void *arg)
{
    share_hashing *h = arg;
    const binary_layout *l = h->layout;
    th_tensor_share *sh = h->share;
    for (uint32_t s = 0; s <= l->nmodes; ++s) {
        const uint64_t bytes = section_element_bytes(l, s);
        for (uint64_t b = 0; b < sh->nblocks; ++b) {
            const uint64_t first = (sh->first_block + b) * BLOCK_NNZ;
            const uint64_t n = MIN(BLOCK_NNZ, l->nnz - first);
            sh->block_sums[s * sh->nblocks + b] =
                XXH3_64bits(h->data + l->offsets[s] + first * bytes, (size_t)(n * bytes));
        }
    }
}

/* Whether the nonzero before the share (the file's first - 1) comes before
 * the share's first one: the one pair of a sorted file a share's own check
 * does not see. Runs under the SIGBUS guard. */
typedef struct {
    const uint8_t *data;
    const binary_layout *layout;
    const th_sptensor *t;
    uint64_t first;
    gboolean in_order;
} share_boundary;

static void check_share_boundary(void *arg)
{
    share_boundary *b = arg;
    const binary_layout *l = b->layout;
    b->in_order = TRUE;
    if (b->first == 0 || b->t->nnz == 0)
        return;
    for (uint32_t m = 0; m < l->nmodes; ++m) {
        th_index before;
        memcpy(&before, b->data + l->offsets[m] + (b->first - 1u) * sizeof before, sizeof before);
        const th_index here = b->t->indices[m][0];
        if (before != here) {
            b->in_order = before < here;
            return;
        }
    }
    b->in_order = FALSE; /* the same coordinate twice */
}

/* The share's nonzeros and checksum blocks, from the file's header;
 * FALSE for a version 1 file (its checksums cover whole arrays). */
static gboolean plan_share(const char *name, const binary_layout *l, share_request request,
                           th_tensor_share *share, GError **error)
{
    if (l->major < 2u) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_UNSUPPORTED,
                    "%s: a version %u.%u binary tensor is checked whole, so it cannot be read "
                    "in shares; convert it again (tensorhost convert writes version %u)",
                    name, l->major, l->minor, TH_TENSOR_BINARY_VERSION_MAJOR);
        return FALSE;
    }
    if ((l->flags & TH_TENSOR_BINARY_FLAG_SORTED) == 0) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_UNSUPPORTED,
                    "%s: the file is not flagged sorted, so a coordinate could repeat across "
                    "two shares; convert it again (tensorhost convert writes sorted files)",
                    name);
        return FALSE;
    }
    memset(share, 0, sizeof *share);
    share->nnz_total = l->nnz;
    share->first = l->nnz / request.parts * request.part +
                   MIN(request.part, l->nnz % request.parts);
    share->count = l->nnz / request.parts + (request.part < l->nnz % request.parts ? 1u : 0u);
    share->nsections = l->nmodes + 1u;
    share->file_blocks = blocks_of(l->nnz);
    const uint64_t end = share->first + share->count;
    share->first_block = blocks_of(share->first);
    share->nblocks = blocks_of(end) - share->first_block;
    for (uint32_t s = 0; s <= l->nmodes; ++s)
        share->checksums[s] = l->checksums[s];
    return TRUE;
}

/* The end of a share's read: the hashes of its checksum blocks, for the
 * processes to check together (th_tensor_binary_check_block_sums), the
 * order across its first pair, and the content errors. */
static gboolean read_share_end(const char *name, const copy_run *r, th_tensor_share *share,
                               copy_outcome copied, const th_tensor_read_options *options,
                               GError **error)
{
    share->block_sums = g_new(uint64_t, share->nsections * MAX(share->nblocks, 1u));
    share_hashing hashing = {.data = r->data, .layout = r->layout, .share = share};
    share_boundary boundary = {
        .data = r->data, .layout = r->layout, .t = r->t, .first = share->first};
    if (!run_reading(r, hash_share_blocks, &hashing) ||
        !run_reading(r, check_share_boundary, &boundary)) {
        set_shrank_error(name, error);
        return FALSE;
    }
    if (copied.first.found) {
        set_content_error(name, r->layout, r->t, r->first, copied.first, r->nonnegative_reason,
                          options, error);
        return FALSE;
    }
    if (copied.out_of_order || !boundary.in_order) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_CHECKSUM,
                    "%s: the file is flagged sorted, but nonzeros %" PRIu64 " to %" PRIu64
                    " are not in order without repeats: the file is corrupt; convert it again",
                    name, share->first + 1u, share->first + share->count);
        return FALSE;
    }
    return TRUE;
}

/* The whole read of `length` bytes at `data`, or with `request` one share
 * of it (described in *share). */
static th_sptensor *read_memory(const char *name, const uint8_t *data, uint64_t length,
                                gboolean mapped, const th_tensor_read_options *options,
                                const share_request *request, th_tensor_share *share,
                                GError **error)
{
    if (th_cancel_requested()) {
        set_cancelled_error(name, 0, length, error);
        return NULL;
    }
    copy_run r = {.data = data, .length = length, .mapped = mapped, .options = options,
                  .nonnegative_reason = th_tensor_read_nonnegative_reason(options),
                  .next_report = PROGRESS_EVERY};
    binary_layout layout;
    g_autofree char *label = NULL;
    if (!check_metadata(name, &r, &layout, &label, error))
        return NULL;
    uint64_t count = layout.nnz;
    if (request != NULL) {
        if (!plan_share(name, &layout, *request, share, error))
            return NULL;
        r.first = share->first;
        count = share->count;
    }
    /* A file's arrays are asked of the host before they are allocated. */
    g_autofree char *short_of = NULL;
    if (mapped && !th_sptensor_host_has_room(count, layout.nmodes, &short_of)) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_MEMORY,
                    "%s: %s%" PRIu64 " nonzeros %s", name, request ? "this process's " : "its ",
                    count, short_of);
        return NULL;
    }

    g_autoptr(th_sptensor) t = th_sptensor_new(layout.nmodes, count);
    for (uint32_t m = 0; m < layout.nmodes; ++m)
        t->dims[m] = (th_index)layout.dims[m];
    t->label = g_steal_pointer(&label);
    t->lines_read = count;
    r.layout = &layout;
    r.t = t;
    g_autofree th_index *index_limits = g_memdup2(t->dims, sizeof(th_index) * layout.nmodes);
    if (th_tensor_read_bounded(options, layout.nmodes))
        for (uint32_t m = 0; m < layout.nmodes; ++m)
            index_limits[m] = MIN(index_limits[m], options->bound_dims[m]);
    r.index_limits = index_limits;
    r.check_order = (layout.flags & TH_TENSOR_BINARY_FLAG_SORTED) != 0;
    g_autofree uint64_t *block_sums = NULL;
    if (layout.major >= 2u && request == NULL) {
        r.nblocks = blocks_of(layout.nnz);
        block_sums = g_new(uint64_t, (layout.nmodes + 1u) * MAX(r.nblocks, 1u));
        r.block_sums = block_sums;
    }
    const uint32_t nthreads = plan_chunks(&r);
    const copy_outcome copied = copy_arrays(&r, nthreads);
    if (copied.shrank) {
        set_shrank_error(name, error);
        return NULL;
    }
    if (copied.cancelled) {
        set_cancelled_error(name, atomic_load(&r.bytes_done), length, error);
        return NULL;
    }
    if (request != NULL) /* the checksums are the processes' to check together */
        return read_share_end(name, &r, share, copied, options, error)
                   ? g_steal_pointer(&t)
                   : NULL;
    /* Corruption explains any content error: it is reported first. */
    const int64_t mismatch = first_checksum_mismatch(&r, nthreads);
    if (mismatch >= 0) {
        set_checksum_error(name, layout.nmodes, (uint32_t)mismatch, error);
        return NULL;
    }
    if (copied.first.found) {
        set_content_error(name, &layout, t, r.first, copied.first, r.nonnegative_reason, options,
                          error);
        return NULL;
    }
    if (options != NULL && options->progress != NULL)
        options->progress(length, length, options->user_data);
    if (r.check_order && !copied.out_of_order)
        return g_steal_pointer(&t);
    /* Sorting a large tensor takes seconds: the last chance to stop cheaply. */
    if (th_cancel_requested()) {
        set_cancelled_error(name, length, length, error);
        return NULL;
    }
    if (!th_tensor_read_merge(t, name, error))
        return NULL;
    return g_steal_pointer(&t);
}

th_sptensor *th_tensor_binary_read_buffer_full(const char *name, const void *data,
                                               size_t length,
                                               const th_tensor_read_options *options,
                                               GError **error)
{
    g_return_val_if_fail(name != NULL && (data != NULL || length == 0), NULL);
    static const uint8_t empty[1] = {0};
    return read_memory(name, length > 0 ? data : empty, length, FALSE, options, NULL, NULL,
                       error);
}

th_sptensor *th_tensor_binary_read_buffer(const char *name, const void *data, size_t length,
                                          GError **error)
{
    return th_tensor_binary_read_buffer_full(name, data, length, NULL, error);
}

th_sptensor *th_tensor_binary_read_share_buffer(const char *name, const void *data,
                                                size_t length, uint32_t part, uint32_t parts,
                                                const th_tensor_read_options *options,
                                                th_tensor_share *share, GError **error)
{
    g_return_val_if_fail(name != NULL && (data != NULL || length == 0) && share != NULL &&
                             part < parts,
                         NULL);
    memset(share, 0, sizeof *share);
    static const uint8_t empty[1] = {0};
    const share_request request = {.part = part, .parts = parts};
    th_sptensor *t = read_memory(name, length > 0 ? data : empty, length, FALSE, options,
                                 &request, share, error);
    if (t == NULL)
        th_tensor_share_clear(share);
    return t;
}

/* The file at `path` mapped and read (whole, or the share `request`). */
static th_sptensor *read_file(const char *path, const th_tensor_read_options *options,
                              const share_request *request, th_tensor_share *share,
                              GError **error)
{
    /* O_NONBLOCK: a FIFO opens at once, to be refused below. */
    const int fd = g_open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
    if (fd < 0) {
        int saved = errno;
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                    "%s: cannot open: %s", path, g_strerror(saved));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int saved = errno;
        close(fd);
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                    "%s: cannot read: %s", path, g_strerror(saved));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                    "%s: a binary tensor is read by mapping it, which takes a regular file "
                    "(not a pipe or a device): copy it to a file first",
                    path);
        return NULL;
    }
    const uint64_t length = (uint64_t)st.st_size;
    if (length == 0) {
        close(fd);
        static const uint8_t empty[1] = {0};
        return read_memory(path, empty, 0, FALSE, options, request, share, error);
    }
    if ((uint64_t)(size_t)length != length) {
        close(fd);
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                    "%s: cannot map: %" PRIu64 " bytes do not fit this system's address space",
                    path, length);
        return NULL;
    }
    void *map = mmap(NULL, (size_t)length, PROT_READ, MAP_PRIVATE, fd, 0);
    const int map_errno = errno;
    close(fd); /* the mapping keeps the file */
    if (map == MAP_FAILED) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                    "%s: cannot map: %s", path, g_strerror(map_errno));
        return NULL;
    }
    /* Advice only: a failure changes nothing but speed. */
    (void)madvise(map, (size_t)length, MADV_SEQUENTIAL);
    (void)madvise(map, (size_t)length, MADV_WILLNEED);
    th_sptensor *t = read_memory(path, map, length, TRUE, options, request, share, error);
    munmap(map, (size_t)length);
    return t;
}

th_sptensor *th_tensor_binary_read(const char *path, const th_tensor_read_options *options,
                                   GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    return read_file(path, options, NULL, NULL, error);
}

th_sptensor *th_tensor_binary_read_share(const char *path, uint32_t part, uint32_t parts,
                                         const th_tensor_read_options *options,
                                         th_tensor_share *share, GError **error)
{
    g_return_val_if_fail(path != NULL && share != NULL && part < parts, NULL);
    memset(share, 0, sizeof *share);
    const share_request request = {.part = part, .parts = parts};
    th_sptensor *t = read_file(path, options, &request, share, error);
    if (t == NULL)
        th_tensor_share_clear(share);
    return t;
}

void th_tensor_share_clear(th_tensor_share *share)
{
    g_clear_pointer(&share->block_sums, g_free);
}

gboolean th_tensor_binary_check_block_sums(const char *name, const th_tensor_share *share,
                                           const uint64_t *sums, GError **error)
{
    for (uint32_t s = 0; s < share->nsections; ++s) {
        if (blocks_checksum(sums + (uint64_t)s * share->file_blocks, share->file_blocks) ==
            share->checksums[s])
            continue;
        set_checksum_error(name, share->nsections - 1u, s, error);
        return FALSE;
    }
    return TRUE;
}

/* ---- writing ------------------------------------------------------------- */

/* Whether the nonzeros are sorted with no coordinate twice, and the first
 * one a reader would refuse (an index beyond its mode's size, a value not
 * finite), if any. */
static gboolean check_writable(const char *name, const th_sptensor *t, gboolean *sorted,
                               GError **error)
{
    if (t->nmodes < 2 || t->nmodes > TH_MAX_MODES) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_ORDER,
                    "%s: cannot write a tensor of %u modes (2 to %u can be read back)", name,
                    t->nmodes, TH_MAX_MODES);
        return FALSE;
    }
    if (t->nnz == 0) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_EMPTY,
                    "%s: cannot write a tensor without nonzeros (it could not be read back)",
                    name);
        return FALSE;
    }
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        if (t->dims[m] == 0) {
            g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_HEADER,
                        "%s: cannot write a tensor whose mode %u has size 0", name, m + 1u);
            return FALSE;
        }
        const th_index *idx = t->indices[m];
        for (uint64_t i = 0; i < t->nnz; ++i)
            if (idx[i] >= t->dims[m]) {
                g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_INDEX_RANGE,
                            "%s: cannot write nonzero %" PRIu64 ": mode %u index %u is not "
                            "below the mode's size %u",
                            name, i + 1u, m + 1u, idx[i], t->dims[m]);
                return FALSE;
            }
    }
    for (uint64_t i = 0; i < t->nnz; ++i)
        if (!isfinite(t->values[i])) {
            g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_VALUE,
                        "%s: cannot write nonzero %" PRIu64 ": value %g is not finite", name,
                        i + 1u, t->values[i]);
            return FALSE;
        }
    *sorted = TRUE;
    for (uint64_t i = 1; i < t->nnz && *sorted; ++i)
        *sorted = in_order(t->indices, t->nmodes, i);
    return TRUE;
}

static gboolean write_bytes(FILE *out, const char *name, const void *data, size_t length,
                            GError **error)
{
    const uint8_t *p = data;
    while (length > 0) {
        if (th_cancel_requested()) {
            g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_CANCELLED,
                        "%s: writing interrupted", name);
            return FALSE;
        }
        const size_t piece = MIN(length, WRITE_PIECE);
        errno = 0;
        if (fwrite(p, 1, piece, out) != piece) {
            int saved = errno ? errno : EIO;
            g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                        "%s: cannot write: %s", name, g_strerror(saved));
            return FALSE;
        }
        p += piece;
        length -= piece;
    }
    return TRUE;
}

static gboolean write_zeros(FILE *out, const char *name, uint64_t count, GError **error)
{
    static const uint8_t zeros[TH_TENSOR_BINARY_ALIGNMENT] = {0};
    g_assert(count < sizeof zeros);
    return write_bytes(out, name, zeros, (size_t)count, error);
}

gboolean th_tensor_binary_write_stream(FILE *out, const char *name, const th_sptensor *t,
                                       const char *note, GError **error)
{
    g_return_val_if_fail(out != NULL && name != NULL && t != NULL, FALSE);
    const size_t note_bytes = note != NULL ? strlen(note) : 0;
    if (note_bytes > TH_TENSOR_BINARY_MAX_NOTE_BYTES) {
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_HEADER,
                    "%s: a note of %zu bytes is longer than the %u a note may take", name,
                    note_bytes, TH_TENSOR_BINARY_MAX_NOTE_BYTES);
        return FALSE;
    }
    gboolean sorted = FALSE;
    if (!check_writable(name, t, &sorted, error))
        return FALSE;

    binary_layout l = {
        .header_bytes = TH_TENSOR_BINARY_HEADER_BYTES,
        .nmodes = t->nmodes,
        .index_bytes = sizeof(th_index),
        .nnz = t->nnz,
        .note_bytes = note_bytes,
    };
    l.metadata_end = (uint64_t)l.header_bytes + 16u * l.nmodes + 8u + l.note_bytes;
    if (!locate_sections(&l)) { /* an nnz no memory holds: cannot happen */
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                    "%s: cannot write: the tensor is too large", name);
        return FALSE;
    }
    uint8_t *meta = g_malloc0((size_t)l.metadata_end);
    memcpy(meta, TH_TENSOR_BINARY_MAGIC, TH_TENSOR_BINARY_MAGIC_BYTES);
    put_u16(meta + OFF_MAJOR, TH_TENSOR_BINARY_VERSION_MAJOR);
    put_u16(meta + OFF_MINOR, TH_TENSOR_BINARY_VERSION_MINOR);
    put_u32(meta + OFF_HEADER_BYTES, l.header_bytes);
    put_u32(meta + OFF_NMODES, l.nmodes);
    meta[OFF_INDEX_BYTES] = (uint8_t)l.index_bytes;
    meta[OFF_VALUE_TYPE] = TH_TENSOR_BINARY_VALUE_FLOAT64;
    put_u64(meta + OFF_NNZ, l.nnz);
    put_u64(meta + OFF_FLAGS, sorted ? TH_TENSOR_BINARY_FLAG_SORTED : 0u);
    put_u64(meta + OFF_NOTE_BYTES, l.note_bytes);
    uint8_t *p = meta + l.header_bytes;
    for (uint32_t m = 0; m < l.nmodes; ++m, p += 8)
        put_u64(p, t->dims[m]);
    for (uint32_t s = 0; s <= l.nmodes; ++s, p += 8) {
        const void *array = s < l.nmodes ? (const void *)t->indices[s] : t->values;
        put_u64(p, section_checksum(TH_TENSOR_BINARY_VERSION_MAJOR, array, l.nnz,
                                    section_element_bytes(&l, s)));
    }
    if (note_bytes > 0)
        memcpy(p, note, note_bytes);
    put_u64(meta + OFF_HEADER_CHECKSUM, metadata_checksum(meta, l.metadata_end));

    gboolean ok = write_bytes(out, name, meta, (size_t)l.metadata_end, error);
    g_free(meta);
    uint64_t end = l.metadata_end;
    for (uint32_t s = 0; ok && s <= l.nmodes; ++s) {
        const void *array = s < l.nmodes ? (const void *)t->indices[s] : t->values;
        const size_t bytes = (size_t)(l.nnz * section_element_bytes(&l, s));
        ok = write_zeros(out, name, l.offsets[s] - end, error) &&
             write_bytes(out, name, array, bytes, error);
        end = l.offsets[s] + bytes;
    }
    return ok;
}

/* An atomic file's error (its message names the path already) in the
 * tensor's domain. */
static gboolean fail_with_file_error(GError **error, GError *file_error)
{
    g_set_error_literal(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_IO,
                        file_error->message);
    g_error_free(file_error);
    return FALSE;
}

gboolean th_tensor_binary_write_full(const char *path, const th_sptensor *t, const char *note,
                                     GError **error)
{
    g_return_val_if_fail(path != NULL && t != NULL, FALSE);
    GError *file_error = NULL;
    th_atomic_file *file = th_atomic_file_open(path, &file_error);
    if (file == NULL)
        return fail_with_file_error(error, file_error);
    if (!th_tensor_binary_write_stream(th_atomic_file_stream(file), path, t, note, error)) {
        th_atomic_file_abort(file);
        return FALSE;
    }
    /* The flush to disk is the long part for a large file: a stop during
     * it still leaves no file, as one during the writes does. */
    if (!th_atomic_file_sync(file, &file_error)) {
        th_atomic_file_abort(file);
        return fail_with_file_error(error, file_error);
    }
    if (th_cancel_requested()) {
        th_atomic_file_abort(file);
        g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_CANCELLED,
                    "%s: writing interrupted", path);
        return FALSE;
    }
    if (!th_atomic_file_commit(file, &file_error))
        return fail_with_file_error(error, file_error);
    return TRUE;
}

gboolean th_tensor_binary_write(const char *path, const th_sptensor *t, GError **error)
{
    return th_tensor_binary_write_full(path, t, t->label, error);
}
