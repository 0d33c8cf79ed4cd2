/* In-memory sparse tensor in coordinate form (structure of arrays). */
#ifndef TH_SPTENSOR_H
#define TH_SPTENSOR_H

#include <stddef.h>
#include <stdint.h>
#include <glib.h>

/* Index type of one coordinate: 32 bits, fixed (never chosen at build time,
 * since it crosses the plugin ABI). */
typedef uint32_t th_index;

/* The largest order tensorhost accepts. Arbitrary but generous: the paper's
 * baselines stop at 4 or 5 modes; tensorhost must not. */
#define TH_MAX_MODES 64u

typedef struct th_sptensor {
    uint32_t nmodes;
    uint64_t nnz;
    th_index *dims;     /* [nmodes] */
    th_index **indices; /* [nmodes] arrays of [nnz], 0-based */
    double *values;     /* [nnz] */
    /* What loading saw, for the summary and the report. */
    uint64_t duplicates_merged; /* input lines whose coordinates repeated an earlier one */
    uint64_t lines_read;        /* nonzero lines read from the file */
    /* Of those lines, values written as zero ("0", "0.0", "-0e5"): kept, as
     * the file stores them, but worth a warning. */
    uint64_t explicit_zeros;
    /* Of those lines, nonzero values too small for a double ("1e-400"):
     * they read as 0.0 and are kept as such. A value that becomes subnormal
     * is representable and not counted. */
    uint64_t underflowed_values;
    /* `values` hold the file's values times this power of two (1 unless
     * th_sptensor_scale_to_safe_range changed them). */
    double value_scale;
    /* What the file says the tensor is (a binary file's note, a text file's
     * "# tensorhost label:" line; tns_header.h), e.g. "synthetic tensor:
     * tensorhost-synth dims=..."; NULL for none. UTF-8, owned (g_free); the
     * writers carry it into the files they write. */
    char *label;
} th_sptensor;

/* count * size bytes, uninitialised, for arrays of tens of MB and more:
 * backed by transparent huge pages where the system allows it. Freed with
 * g_free (and resized with g_realloc) like any GLib allocation; aborts on
 * overflow or out-of-memory as g_new does. */
void *th_alloc_large(size_t count, size_t size);

/* Allocates a tensor with room for `nnz` nonzeros and zeroed dims.
 * Aborts (g_malloc) on out-of-memory, like the rest of GLib. */
th_sptensor *th_sptensor_new(uint32_t nmodes, uint64_t nnz);

/* Bytes of the arrays a nonzero takes: nmodes indices and a value. */
uint64_t th_sptensor_bytes_per_nonzero(uint32_t nmodes);

/* Whether the host has the memory for the arrays of a tensor of `nnz`
 * nonzeros and `nmodes` modes (nnz * (4 * nmodes + 8) bytes), asked of the
 * host before they are allocated (common/host_memory.h: past what it has,
 * a read or a generation would be killed midway): TRUE when it has, or
 * does not say; FALSE otherwise, with "need X of memory for their arrays,
 * and Y is free (SOURCE)" in *message (g_free it). */
gboolean th_sptensor_host_has_room(uint64_t nnz, uint32_t nmodes, char **message);
/* A deep copy: the nonzeros, the dims and what loading saw. */
th_sptensor *th_sptensor_copy(const th_sptensor *t);
void th_sptensor_free(th_sptensor *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(th_sptensor, th_sptensor_free)

/* Shrinks storage to `nnz` nonzeros (nnz <= current). */
void th_sptensor_truncate(th_sptensor *t, uint64_t nnz);

/* Sorts nonzeros lexicographically by coordinates and merges duplicates by
 * summing their values; adds the number merged to t->duplicates_merged.
 * Returns FALSE when some sum is not finite (finite duplicates whose sum
 * overflows a double): the tensor is merged all the same, with that value
 * infinite or NaN, and not fit for a decomposition. */
gboolean th_sptensor_sort_and_merge(th_sptensor *t);

/* Tests: TRUE makes th_sptensor_sort_and_merge sort through 64-bit
 * permutations at any nnz, the path it otherwise takes only past 2^32
 * nonzeros (with coordinates too wide for one 64-bit key). */
void th_sptensor_set_wide_sort(gboolean wide);

/* The chunks th_sptensor_sort_and_merge's radix sorts are cut into, spread
 * over OpenMP's threads: 0 (the default) is OpenMP's thread count, up to 64, for
 * sorts of 2^20 keys or more and one chunk below; any other count applies
 * to every sort (tests). The result is the same for any number. */
void th_sptensor_set_sort_threads(uint32_t threads);

/* "(i, j, k)": entry k's coordinates, 1-based as in .tns files, for
 * messages (g_free). */
char *th_sptensor_entry_text(const th_sptensor *t, uint64_t k);

/* Sum of squared values. */
double th_sptensor_norm_squared(const th_sptensor *t);

/* ||X||_F in the file's units (value_scale undone) without overflow or
 * underflow: the values divided by the largest magnitude before they are
 * squared (values near 1e154 and beyond, which a run accepts by scaling
 * them, would square to Inf). */
double th_sptensor_norm(const th_sptensor *t);

/* Sum of (value / divisor)^2 (divisor > 0): th_sptensor_norm's sum, for
 * a norm without overflow over several shares of one tensor. */
double th_sptensor_scaled_norm_squared(const th_sptensor *t, double divisor);

/* Largest |value|. */
double th_sptensor_max_abs(const th_sptensor *t);

/* TRUE when th_sptensor_scale_to_safe_range would leave `t` as it is: its
 * largest |value| lies in [2^-64, 2^64], or every value is zero. */
gboolean th_sptensor_in_safe_range(const th_sptensor *t);

/* Values whose squares overflow or underflow (beyond about 1e154 or below
 * about 1e-154) would make norms, Grams and fits infinite or zero, and fp32
 * backends overflow sooner. When the largest |value| lies outside
 * [2^-64, 2^64], multiplies every value by the power of two that brings it
 * into [0.5, 1) (exact: only exponents change) and records the factor in
 * value_scale, so a decomposition can divide its weights by it. Returns
 * TRUE when it scaled. */
gboolean th_sptensor_scale_to_safe_range(th_sptensor *t);
/* The same with `largest` standing for the largest |value| (that of a
 * whole tensor whose share `t` is), so that every share scales alike. */
gboolean th_sptensor_scale_for_largest(th_sptensor *t, double largest);

/* Number of indices in [0, dims[mode]) with no nonzero. */
uint64_t th_sptensor_empty_slices(const th_sptensor *t, uint32_t mode);
/* The same in two steps, for bitmaps joined (OR) across the shares of a
 * tensor: bit x of mode `mode`'s bitmap (th_sptensor_bitmap_words(dim)
 * 64-bit words, g_free) set when index x has a nonzero; then the unset
 * indices of [0, dim). */
uint64_t *th_sptensor_slice_bitmap(const th_sptensor *t, uint32_t mode);
uint64_t th_sptensor_bitmap_words(uint64_t dim);
uint64_t th_sptensor_bitmap_unset(const uint64_t *bitmap, uint64_t dim);

/* Density nnz / prod(dims), computed in double. */
double th_sptensor_density(const th_sptensor *t);

#endif
