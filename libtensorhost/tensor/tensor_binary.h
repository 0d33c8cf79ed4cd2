/* The binary tensor format (".tnsb"): the nonzeros as the arrays the
 * program holds them in, so a load is a checked copy at page-cache speed
 * instead of a parse. `tensorhost convert` writes it; th_tensor_read_file
 * (tensor_reader.h) reads it wherever a tensor path is taken, recognized by
 * its magic bytes, whatever the file's name. docs/tensor-format.md has the
 * same description for users.
 *
 * Layout, version 2.0 (1.0 differs only in its section checksums, below).
 * Every integer is little-endian; offsets in bytes.
 *
 *   Fixed header (header_bytes bytes; 64 in versions 1.0 and 2.0):
 *     0  char[8]  magic "THTENSOR"
 *     8  u16      major version: 2 (1 is read too)
 *    10  u16      minor version: 0
 *    12  u32      header_bytes: size of this fixed header, a multiple of 8
 *                 from 64 to 4096; a later minor version may grow it, its
 *                 new fields going after byte 64
 *    16  u32      nmodes: 2 to 64
 *    20  u8       index width in bytes: 4 (8 is reserved, not read yet)
 *    21  u8       value type: 1 = IEEE-754 binary64 (float64)
 *    22  u16      reserved, 0
 *    24  u64      nnz: number of nonzeros, at least 1
 *    32  u64      flags: bit 0 set = the coordinates are sorted
 *                 lexicographically (mode 1 first) and none repeats; other
 *                 bits are 0 in 2.0 and ignored by 2.0 readers
 *    40  u64      note_bytes: length of the note, at most 65536
 *    48  u64      reserved, 0
 *    56  u64      header checksum: XXH3-64 (seed 0) of bytes
 *                 [0, metadata_end) with these 8 bytes counted as zeros
 *   At header_bytes:
 *         u64[nmodes]      dims, each 1 to 2^32 - 1
 *         u64[nmodes + 1]  section checksums, of each index array, then of
 *                          the values. Version 2: XXH3-64 (seed 0) of the
 *                          sequence of the XXH3-64s (seed 0; 8 bytes each,
 *                          little-endian) of the array's consecutive blocks
 *                          of 8192 elements (the last one shorter), so that
 *                          a reader hashes blocks on all its threads.
 *                          Version 1: XXH3-64 (seed 0) of the array whole
 *         u8[note_bytes]   note: free text (UTF-8), e.g. "synthetic tensor:
 *                          ..."; not part of the tensor
 *   metadata_end = header_bytes + 16 * nmodes + 8 + note_bytes
 *   Sections, each at the next multiple of 64 after the previous end
 *   (the gaps are zero bytes):
 *         u32[nnz]  mode 1 indices (0-based, each < dims[0])
 *         ...
 *         u32[nnz]  mode nmodes indices
 *         f64[nnz]  values, all finite
 *   The file ends with the values: its size is exactly what the header
 *   implies.
 *
 * Versions: a reader refuses a major version it does not know; it reads
 * any minor version of a major it knows, since minors only add fields
 * after byte 64 (and flag bits that do not change what the arrays mean).
 * This reader reads 1.x and 2.x; the writer writes 2.0. */
#ifndef TH_TENSOR_BINARY_H
#define TH_TENSOR_BINARY_H

#include <glib.h>
#include <stdio.h>

#include "tensor/sptensor.h"
#include "tensor/tensor_read_types.h"

/* The extension tensorhost gives binary tensors (a convention only: the
 * format is recognized by content). */
#define TH_TENSOR_BINARY_EXTENSION ".tnsb"

#define TH_TENSOR_BINARY_MAGIC "THTENSOR"
#define TH_TENSOR_BINARY_MAGIC_BYTES 8u
#define TH_TENSOR_BINARY_VERSION_MAJOR 2u /* written; 1 to 2 read */
#define TH_TENSOR_BINARY_VERSION_MINOR 0u
#define TH_TENSOR_BINARY_OLDEST_MAJOR 1u
/* Version 2's checksum block, in elements. */
#define TH_TENSOR_BINARY_CHECKSUM_BLOCK 8192u
#define TH_TENSOR_BINARY_HEADER_BYTES 64u    /* the fixed header of 1.0 and 2.0 */
#define TH_TENSOR_BINARY_MAX_HEADER_BYTES 4096u
#define TH_TENSOR_BINARY_MAX_NOTE_BYTES 65536u
#define TH_TENSOR_BINARY_ALIGNMENT 64u
#define TH_TENSOR_BINARY_VALUE_FLOAT64 1u
#define TH_TENSOR_BINARY_FLAG_SORTED ((uint64_t)1)

/* Whether `data` starts with the magic bytes. */
gboolean th_tensor_binary_has_magic(const void *data, size_t length);

/* Reads a binary tensor: the file is mapped, its header checked completely
 * before any array is touched, then the arrays are copied into a new tensor
 * by one thread per online processor, which check every index against its
 * mode's size, every value for being finite, and the checksums; reads of
 * the mapping run under a SIGBUS guard (a file shrinking meanwhile is an
 * error, not a crash). A tensor flagged sorted is checked to be so (and
 * sorted anyway if it is not); any other is sorted with duplicates merged.
 * lines_read is the file's nnz; explicit_zeros counts the values that are
 * zero; the label is the note (NULL when empty; bytes that are not UTF-8
 * replaced by U+FFFD). Errors are in TH_TENSOR_READER_ERROR, with messages that start with
 * "PATH: ": NOT_BINARY, UNSUPPORTED (version, index width, value type),
 * HEADER, ORDER, TRUNCATED (the size differs from the header's), CHECKSUM
 * (naming the section), INDEX_RANGE (naming the nonzero and the mode),
 * VALUE (not finite; or below zero with options->require_nonnegative,
 * naming the nonzero and its coordinates, th_tensor_read_options), EMPTY
 * (nnz 0), IO, CANCELLED (th_cancel_requested(),
 * checked before, between chunks and before sorting), MEMORY (the host has
 * not the arrays' memory: th_sptensor_host_has_room, asked after the
 * header and before any allocation; not asked of a buffer, which is in
 * memory already). */
th_sptensor *th_tensor_binary_read(const char *path, const th_tensor_read_options *options,
                                   GError **error);

/* One process's share of a binary tensor's nonzeros, as
 * th_tensor_binary_read_share leaves it: which nonzeros, and the hashes a
 * reader of the whole file would check, for the processes to check
 * together (th_tensor_binary_check_block_sums). */
typedef struct th_tensor_share {
    uint64_t first, count; /* the share's nonzeros in the file: [first, first + count) */
    uint64_t nnz_total;    /* the file's */
    uint32_t nsections;    /* nmodes + 1: each mode's indices, then the values */
    uint64_t file_blocks;  /* checksum blocks per section in the file */
    /* The blocks that start in the share, whole: [first_block, first_block
     * + nblocks), their XXH3-64s in block_sums[section * nblocks + k]
     * (owned; th_tensor_share_clear). */
    uint64_t first_block, nblocks;
    uint64_t *block_sums;
    uint64_t checksums[TH_MAX_MODES + 1]; /* the header's, per section */
} th_tensor_share;

/* Reads share `part` of `parts` of a binary tensor: consecutive nonzeros,
 * nnz / parts of them and one more in each of the first nnz % parts
 * shares, so that the shares in part order are the file's nonzeros in
 * its order; checked as th_tensor_binary_read checks them (header,
 * padding, indices, values, the order across the share's bounds) except
 * the section checksums, which need every share's block hashes (left in
 * *share). The file must be of version 2 and flagged sorted
 * (TH_TENSOR_READER_ERROR_UNSUPPORTED otherwise, saying to convert it
 * again): then no coordinate repeats across shares and none is merged. A
 * share may be empty (nnz < parts). lines_read is the share's nnz. */
th_sptensor *th_tensor_binary_read_share(const char *path, uint32_t part, uint32_t parts,
                                         const th_tensor_read_options *options,
                                         th_tensor_share *share, GError **error);
void th_tensor_share_clear(th_tensor_share *share);

/* Whether the file's checksums hold, given `sums`: every block's hash,
 * [nsections][file_blocks] in file order (the shares' block_sums joined);
 * FALSE with TH_TENSOR_READER_ERROR_CHECKSUM naming `name` and the first
 * section that differs. `share` is any share of the file (its sizes and
 * the header's checksums). */
gboolean th_tensor_binary_check_block_sums(const char *name, const th_tensor_share *share,
                                           const uint64_t *sums, GError **error);

/* Same, from memory (the fuzzer's entry); `name` stands for the path. */
th_sptensor *th_tensor_binary_read_buffer(const char *name, const void *data, size_t length,
                                          GError **error);
th_sptensor *th_tensor_binary_read_buffer_full(const char *name, const void *data,
                                               size_t length,
                                               const th_tensor_read_options *options,
                                               GError **error);

/* A share from memory, read as th_tensor_binary_read_share reads one from
 * a file, so that the tests and the fuzzer reach the share path without a
 * file per input: `data` holds the whole file, as each process maps it
 * whole; `name` stands for the path. */
th_sptensor *th_tensor_binary_read_share_buffer(const char *name, const void *data,
                                                size_t length, uint32_t part, uint32_t parts,
                                                const th_tensor_read_options *options,
                                                th_tensor_share *share, GError **error);

/* Writes `t` atomically (PATH.tmp-XXXXXX beside it, fsync, rename: never a
 * half-written file; mode 0666 less the umask), flagged sorted only when it
 * is sorted without repeated coordinates, with t->label as the note (the
 * _full variant: `note` instead; NULL for none; at most
 * TH_TENSOR_BINARY_MAX_NOTE_BYTES). Errors are
 * TH_TENSOR_READER_ERROR_IO with messages that start with "PATH: ", or
 * TH_TENSOR_READER_ERROR_CANCELLED when th_cancel_requested() turned true
 * (checked between chunks; nothing is left behind). */
gboolean th_tensor_binary_write(const char *path, const th_sptensor *t, GError **error);
gboolean th_tensor_binary_write_full(const char *path, const th_sptensor *t, const char *note,
                                     GError **error);

/* Same, to a stream (tests, open_memstream); `name` stands for the path. */
gboolean th_tensor_binary_write_stream(FILE *out, const char *name, const th_sptensor *t,
                                       const char *note, GError **error);

/* For tests and fuzzing: recomputes every checksum of the binary tensor in
 * `data`, so that a deliberately altered file reaches the checks behind
 * them. FALSE (nothing changed) when the header does not locate the
 * sections (too short, no magic, a size field out of range). */
gboolean th_tensor_binary_reseal(void *data, size_t length);

/* For tests and benchmarks: copy with exactly `threads` threads (at most
 * 256), however small the file; 0 restores the default (one per online
 * processor, each given at least a few MB). Process-wide; set it while no
 * read runs. The result never depends on the thread count. */
void th_tensor_binary_set_threads(uint32_t threads);

#endif
