/* In-memory sparse tensor in coordinate form.
 *
 * Sorting is a least-significant-digit radix sort of a permutation. The
 * coordinates of consecutive modes are packed into 64-bit words (as many modes
 * per word as their index widths allow; for the usual FROSTT shapes the whole
 * coordinate fits one word), and the words are radix-sorted from the least to
 * the most significant, 11 bits per pass. That is O(nnz * passes) with
 * sequential memory traffic, so 100M nonzeros sort in seconds. With one word,
 * (key, value) pairs are sorted and the indices unpacked from the keys; with
 * several, a permutation is sorted and then applied. Scratch memory: two key
 * arrays plus two value (or permutation) arrays. */
#define _DEFAULT_SOURCE /* madvise, posix_memalign */
#include "tensor/sptensor.h"

#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <inttypes.h>
#include <string.h>

#include "host_memory.h"

/* Arrays this large get transparent huge pages where the system allows
 * it (madvise mode): first touching them then takes one page fault per
 * 2 MB instead of one per 4 KB, which otherwise costs about as much as
 * filling them. */
#define HUGE_PAGE_BYTES ((size_t)2 << 20)

void *th_alloc_large(size_t count, size_t size)
{
    if (size != 0 && count > SIZE_MAX / size)
        g_error("%s: overflow allocating %zu*%zu bytes", G_STRLOC, count, size); /* as g_new */
    const size_t bytes = count * size;
    if (bytes < 2 * HUGE_PAGE_BYTES)
        return g_malloc(bytes);
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE_BYTES, bytes) != 0)
        g_error("%s: failed to allocate %zu bytes", G_STRLOC, bytes); /* as g_malloc does */
    (void)madvise(p, bytes, MADV_HUGEPAGE); /* advice only */
    return p;
}

th_sptensor *th_sptensor_new(uint32_t nmodes, uint64_t nnz)
{
    g_return_val_if_fail(nmodes >= 1 && nmodes <= TH_MAX_MODES, NULL);
    th_sptensor *t = g_new0(th_sptensor, 1);
    t->nmodes = nmodes;
    t->nnz = nnz;
    t->dims = g_new0(th_index, nmodes);
    t->indices = g_new0(th_index *, nmodes);
    for (uint32_t m = 0; m < nmodes; ++m)
        t->indices[m] = th_alloc_large(nnz, sizeof(th_index));
    t->values = th_alloc_large(nnz, sizeof(double));
    t->value_scale = 1.0;
    return t;
}

uint64_t th_sptensor_bytes_per_nonzero(uint32_t nmodes)
{
    return (uint64_t)nmodes * sizeof(th_index) + sizeof(double);
}

gboolean th_sptensor_host_has_room(uint64_t nnz, uint32_t nmodes, char **message)
{
    uint64_t need, available;
    char source[256];
    if (__builtin_mul_overflow(nnz, th_sptensor_bytes_per_nonzero(nmodes), &need))
        need = UINT64_MAX;
    if (th_host_available(&available, source, sizeof source) != 0 || need <= available)
        return TRUE;
    char need_text[32], free_text[32];
    *message = g_strdup_printf("need %s of memory for their arrays, and %s is free (%s)",
                               th_size_text(need, need_text, sizeof need_text),
                               th_size_text(available, free_text, sizeof free_text), source);
    return FALSE;
}

th_sptensor *th_sptensor_copy(const th_sptensor *t)
{
    th_sptensor *copy = th_sptensor_new(t->nmodes, t->nnz);
    memcpy(copy->dims, t->dims, sizeof(th_index) * t->nmodes);
    for (uint32_t m = 0; m < t->nmodes; ++m)
        memcpy(copy->indices[m], t->indices[m], sizeof(th_index) * t->nnz);
    memcpy(copy->values, t->values, sizeof(double) * t->nnz);
    copy->duplicates_merged = t->duplicates_merged;
    copy->lines_read = t->lines_read;
    copy->explicit_zeros = t->explicit_zeros;
    copy->underflowed_values = t->underflowed_values;
    copy->value_scale = t->value_scale;
    return copy;
}

void th_sptensor_free(th_sptensor *t)
{
    if (t == NULL)
        return;
    if (t->indices != NULL) {
        for (uint32_t m = 0; m < t->nmodes; ++m)
            g_free(t->indices[m]);
    }
    g_free(t->indices);
    g_free(t->dims);
    g_free(t->values);
    g_free(t->label);
    g_free(t);
}

void th_sptensor_truncate(th_sptensor *t, uint64_t nnz)
{
    g_return_if_fail(t != NULL && nnz <= t->nnz);
    for (uint32_t m = 0; m < t->nmodes; ++m)
        t->indices[m] = g_renew(th_index, t->indices[m], nnz);
    t->values = g_renew(double, t->values, nnz);
    t->nnz = nnz;
}

/* ---- sorting ------------------------------------------------------------ */

#define RADIX_BITS 11u
#define RADIX_BUCKETS (1u << RADIX_BITS)
#define RADIX_MAX_PASSES ((64u + RADIX_BITS - 1u) / RADIX_BITS)
/* A sort of fewer keys stays on one thread (unless a test sets the count). */
#define RADIX_PARALLEL_MIN_KEYS ((uint64_t)1 << 20)
#define RADIX_MAX_CHUNKS 64u

static atomic_uint sort_threads_setting = 0u; /* 0: OpenMP's thread count */

void th_sptensor_set_sort_threads(uint32_t threads)
{
    atomic_store(&sort_threads_setting, threads);
}

/* Chunks a radix sort of n keys is cut into: one an OpenMP thread by default. */
static uint32_t sort_threads(uint64_t n)
{
    uint32_t threads = atomic_load(&sort_threads_setting);
    if (threads == 0) {
        if (n < RADIX_PARALLEL_MIN_KEYS)
            return 1u;
        threads = (uint32_t)omp_get_max_threads();
    }
    threads = MIN(threads, RADIX_MAX_CHUNKS);
    return (uint32_t)MAX(1u, MIN((uint64_t)threads, n));
}

/* Modes [first, last] packed into one 64-bit key, the last mode in the lowest
 * bits, so comparing keys compares those modes lexicographically. */
typedef struct {
    uint32_t first, last;
    uint32_t shift[TH_MAX_MODES];
    uint32_t bits;
} key_word;

static uint32_t bit_width(uint64_t x)
{
    uint32_t bits = 0;
    while (x != 0) {
        ++bits;
        x >>= 1;
    }
    return bits;
}

/* Splits the modes into key words, from the last mode (least significant)
 * backwards. Returns the number of words, words[0] being least significant. */
static uint32_t plan_key_words(const th_sptensor *t, key_word *words)
{
    uint32_t mode_bits[TH_MAX_MODES];
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        th_index max_index = 0;
        const th_index *idx = t->indices[m];
#pragma omp parallel for schedule(static) reduction(max : max_index) if (t->nnz >= RADIX_PARALLEL_MIN_KEYS)
        for (uint64_t i = 0; i < t->nnz; ++i)
            max_index = idx[i] > max_index ? idx[i] : max_index;
        mode_bits[m] = bit_width(max_index);
    }
    uint32_t nwords = 0;
    uint32_t m = t->nmodes;
    while (m > 0) {
        key_word *w = &words[nwords++];
        w->last = m - 1;
        w->bits = 0;
        /* Each mode has at most 32 bits, so a word always takes at least one. */
        while (m > 0 && w->bits + mode_bits[m - 1] <= 64) {
            --m;
            w->shift[m] = w->bits;
            w->bits += mode_bits[m];
        }
        w->first = m;
    }
    return nwords;
}

static inline uint64_t pack_key(const th_sptensor *t, const key_word *w, uint64_t i)
{
    uint64_t key = 0;
    for (uint32_t m = w->first; m <= w->last; ++m)
        key |= (uint64_t)t->indices[m][i] << w->shift[m];
    return key;
}

/* One radix sort of (keys, perm) pairs by the key bits [0, bits), stable, for
 * a permutation element type PERM_T. The result ends in keys/perm (the
 * buffers are swapped through the pointers as passes go).
 * With several chunks each pass runs in two parallel loops over chunks of
 * the keys: each chunk counts its digits; the counts become each chunk's
 * first position per digit (digit by digit, chunks in order, so the sort
 * stays stable and gives the same result for any number of chunks); each
 * chunk moves its pairs there. */
#define DEFINE_RADIX_SORT(SUFFIX, PERM_T)                                              \
    static void radix_sort_threads_##SUFFIX(uint64_t **keys, uint64_t **keys_tmp,       \
                                            PERM_T **perm, PERM_T **perm_tmp,           \
                                            uint64_t n, uint32_t bits, uint32_t nchunks) \
    {                                                                                   \
        uint32_t npasses = (bits + RADIX_BITS - 1) / RADIX_BITS;                        \
        /* where[k][b]: chunk k's count of digit b, then its next position. */         \
        uint64_t *where = g_new(uint64_t, (size_t)nchunks * RADIX_BUCKETS);             \
        for (uint32_t p = 0; p < npasses; ++p) {                                        \
            const uint64_t *ks = *keys;                                                 \
            const PERM_T *ps = *perm;                                                   \
            uint64_t *kd = *keys_tmp;                                                   \
            PERM_T *pd = *perm_tmp;                                                     \
            const uint32_t shift = p * RADIX_BITS;                                      \
            _Pragma("omp parallel for schedule(static)")                                \
            for (uint32_t k = 0; k < nchunks; ++k) {                                    \
                uint64_t *w = where + (size_t)k * RADIX_BUCKETS;                        \
                memset(w, 0, sizeof(uint64_t) * RADIX_BUCKETS);                         \
                const uint64_t end = n * (k + 1) / nchunks;                             \
                for (uint64_t i = n * k / nchunks; i < end; ++i)                        \
                    ++w[(ks[i] >> shift) & (RADIX_BUCKETS - 1)];                        \
            }                                                                           \
            gboolean trivial = FALSE;                                                   \
            uint64_t sum = 0;                                                           \
            for (uint32_t b = 0; b < RADIX_BUCKETS; ++b) {                              \
                const uint64_t start = sum;                                             \
                for (uint32_t k = 0; k < nchunks; ++k) {                                \
                    const uint64_t here = where[(size_t)k * RADIX_BUCKETS + b];         \
                    where[(size_t)k * RADIX_BUCKETS + b] = sum;                         \
                    sum += here;                                                        \
                }                                                                       \
                trivial = trivial || sum - start == n;                                  \
            }                                                                           \
            if (trivial) /* every key has the same digit: the pass would copy */        \
                continue;                                                               \
            _Pragma("omp parallel for schedule(static)")                                \
            for (uint32_t k = 0; k < nchunks; ++k) {                                    \
                uint64_t *w = where + (size_t)k * RADIX_BUCKETS;                        \
                const uint64_t end = n * (k + 1) / nchunks;                             \
                for (uint64_t i = n * k / nchunks; i < end; ++i) {                      \
                    const uint64_t dst = w[(ks[i] >> shift) & (RADIX_BUCKETS - 1)]++;   \
                    kd[dst] = ks[i];                                                    \
                    pd[dst] = ps[i];                                                    \
                }                                                                       \
            }                                                                           \
            uint64_t *kswap = *keys;                                                    \
            *keys = *keys_tmp;                                                          \
            *keys_tmp = kswap;                                                          \
            PERM_T *pswap = *perm;                                                      \
            *perm = *perm_tmp;                                                          \
            *perm_tmp = pswap;                                                          \
        }                                                                               \
        g_free(where);                                                                  \
    }                                                                                   \
                                                                                        \
    static void radix_sort_##SUFFIX(uint64_t **keys, uint64_t **keys_tmp, PERM_T **perm, \
                                    PERM_T **perm_tmp, uint64_t n, uint32_t bits)       \
    {                                                                                   \
        const uint32_t nchunks = sort_threads(n);                                       \
        if (nchunks > 1) {                                                              \
            radix_sort_threads_##SUFFIX(keys, keys_tmp, perm, perm_tmp, n, bits, nchunks); \
            return;                                                                     \
        }                                                                               \
        uint32_t npasses = (bits + RADIX_BITS - 1) / RADIX_BITS;                        \
        uint64_t *counts = g_new0(uint64_t, (size_t)RADIX_MAX_PASSES * RADIX_BUCKETS);  \
        const uint64_t *k0 = *keys;                                                     \
        for (uint64_t i = 0; i < n; ++i)                                                \
            for (uint32_t p = 0; p < npasses; ++p)                                      \
                ++counts[p * RADIX_BUCKETS + ((k0[i] >> (p * RADIX_BITS)) & (RADIX_BUCKETS - 1))]; \
        for (uint32_t p = 0; p < npasses; ++p) {                                        \
            uint64_t *c = counts + (size_t)p * RADIX_BUCKETS;                           \
            gboolean trivial = FALSE;                                                   \
            uint64_t sum = 0;                                                           \
            for (uint32_t b = 0; b < RADIX_BUCKETS; ++b) {                              \
                if (c[b] == n)                                                          \
                    trivial = TRUE;                                                     \
                uint64_t here = c[b];                                                   \
                c[b] = sum;                                                             \
                sum += here;                                                            \
            }                                                                           \
            if (trivial) /* every key has the same digit: the pass would copy */        \
                continue;                                                               \
            const uint64_t *ks = *keys;                                                 \
            const PERM_T *ps = *perm;                                                   \
            uint64_t *kd = *keys_tmp;                                                   \
            PERM_T *pd = *perm_tmp;                                                     \
            uint32_t shift = p * RADIX_BITS;                                            \
            for (uint64_t i = 0; i < n; ++i) {                                          \
                uint64_t dst = c[(ks[i] >> shift) & (RADIX_BUCKETS - 1)]++;             \
                kd[dst] = ks[i];                                                        \
                pd[dst] = ps[i];                                                        \
            }                                                                           \
            uint64_t *kswap = *keys;                                                    \
            *keys = *keys_tmp;                                                          \
            *keys_tmp = kswap;                                                          \
            PERM_T *pswap = *perm;                                                      \
            *perm = *perm_tmp;                                                          \
            *perm_tmp = pswap;                                                          \
        }                                                                               \
        g_free(counts);                                                                 \
    }

/* The permutation of a multi-word sort, and applying it. */
#define DEFINE_PERMUTATION(SUFFIX, PERM_T)                                              \
    static PERM_T *sorted_permutation_##SUFFIX(const th_sptensor *t)                    \
    {                                                                                   \
        key_word words[TH_MAX_MODES];                                                   \
        uint32_t nwords = plan_key_words(t, words);                                     \
        uint64_t n = t->nnz;                                                            \
        uint64_t *keys = g_new(uint64_t, n);                                            \
        uint64_t *keys_tmp = g_new(uint64_t, n);                                        \
        PERM_T *perm = g_new(PERM_T, n);                                                \
        PERM_T *perm_tmp = g_new(PERM_T, n);                                            \
        _Pragma("omp parallel for schedule(static) if (n >= RADIX_PARALLEL_MIN_KEYS)")  \
        for (uint64_t i = 0; i < n; ++i)                                                \
            perm[i] = (PERM_T)i;                                                        \
        for (uint32_t w = 0; w < nwords; ++w) {                                         \
            _Pragma("omp parallel for schedule(static) if (n >= RADIX_PARALLEL_MIN_KEYS)") \
            for (uint64_t i = 0; i < n; ++i)                                            \
                keys[i] = pack_key(t, &words[w], perm[i]);                              \
            radix_sort_##SUFFIX(&keys, &keys_tmp, &perm, &perm_tmp, n, words[w].bits);  \
        }                                                                               \
        g_free(keys);                                                                   \
        g_free(keys_tmp);                                                               \
        g_free(perm_tmp);                                                               \
        return perm;                                                                    \
    }                                                                                   \
                                                                                        \
    static void apply_permutation_##SUFFIX(th_sptensor *t, const PERM_T *perm)          \
    {                                                                                   \
        uint64_t n = t->nnz;                                                            \
        th_index *idx_tmp = g_new(th_index, n);                                         \
        for (uint32_t m = 0; m < t->nmodes; ++m) {                                      \
            const th_index *src = t->indices[m];                                        \
            _Pragma("omp parallel for schedule(static) if (n >= RADIX_PARALLEL_MIN_KEYS)") \
            for (uint64_t i = 0; i < n; ++i)                                            \
                idx_tmp[i] = src[perm[i]];                                              \
            th_index *old = t->indices[m];                                              \
            t->indices[m] = idx_tmp;                                                    \
            idx_tmp = old;                                                              \
        }                                                                               \
        g_free(idx_tmp);                                                                \
        double *val_tmp = g_new(double, n);                                             \
        _Pragma("omp parallel for schedule(static) if (n >= RADIX_PARALLEL_MIN_KEYS)")  \
        for (uint64_t i = 0; i < n; ++i)                                                \
            val_tmp[i] = t->values[perm[i]];                                            \
        g_free(t->values);                                                              \
        t->values = val_tmp;                                                            \
    }

DEFINE_RADIX_SORT(u32, uint32_t)
DEFINE_RADIX_SORT(u64, uint64_t)
DEFINE_RADIX_SORT(f64, double)
DEFINE_PERMUTATION(u32, uint32_t)
DEFINE_PERMUTATION(u64, uint64_t)

/* The common case, all coordinates in one 64-bit key: sort (key, value)
 * pairs and unpack the indices from the sorted keys. Everything streams;
 * there is no random gather through a permutation. */
static void sort_single_word(th_sptensor *t, const key_word *w)
{
    uint64_t n = t->nnz;
    uint64_t *keys = g_new(uint64_t, n);
#pragma omp parallel for schedule(static) if (n >= RADIX_PARALLEL_MIN_KEYS)
    for (uint64_t i = 0; i < n; ++i)
        keys[i] = pack_key(t, w, i);
    uint64_t *keys_tmp = g_new(uint64_t, n);
    double *values_tmp = g_new(double, n);
    radix_sort_f64(&keys, &keys_tmp, &t->values, &values_tmp, n, w->bits);
    g_free(keys_tmp);
    g_free(values_tmp);
    for (uint32_t m = w->first; m <= w->last; ++m) {
        uint32_t width = m == w->first ? w->bits - w->shift[m] : w->shift[m - 1] - w->shift[m];
        uint64_t mask = width >= 64 ? UINT64_MAX : ((uint64_t)1 << width) - 1u;
        th_index *idx = t->indices[m];
#pragma omp parallel for schedule(static) if (n >= RADIX_PARALLEL_MIN_KEYS)
        for (uint64_t i = 0; i < n; ++i)
            idx[i] = (th_index)((keys[i] >> w->shift[m]) & mask);
    }
    g_free(keys);
}

/* <0, 0, >0 like memcmp, comparing nonzeros a and b lexicographically. */
static inline int compare_coords(const th_sptensor *t, uint64_t a, uint64_t b)
{
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        th_index x = t->indices[m][a], y = t->indices[m][b];
        if (x != y)
            return x < y ? -1 : 1;
    }
    return 0;
}

/* Nonzeros per chunk of the parallel scans (the order checks and merge
 * below, the statistics). Fixed, so sums are taken in the same order (and
 * give the same bits) whatever the thread count. */
#define SCAN_CHUNK ((uint64_t)1 << 20)
_Static_assert(SCAN_CHUNK % 64 == 0, "the merge's chunks are whole words of its bitmap");

/* Whether the nonzeros are already in order, and if so whether any two
 * neighbours share coordinates (so the merge pass can be skipped too). */
static gboolean is_sorted(const th_sptensor *t, gboolean *has_duplicates)
{
    const uint64_t nchunks = (t->nnz + SCAN_CHUNK - 1) / SCAN_CHUNK;
    atomic_int out_of_order = 0;
    int equal_seen = 0;
#pragma omp parallel for schedule(static) reduction(| : equal_seen)
    for (uint64_t c = 0; c < nchunks; ++c) {
        if (atomic_load_explicit(&out_of_order, memory_order_relaxed))
            continue; /* the answer is known: the other chunks stop too */
        const uint64_t end = MIN(t->nnz, (c + 1) * SCAN_CHUNK);
        for (uint64_t i = MAX(c * SCAN_CHUNK, 1); i < end; ++i) {
            const int order = compare_coords(t, i - 1, i);
            if (order > 0) {
                atomic_store_explicit(&out_of_order, 1, memory_order_relaxed);
                break;
            }
            equal_seen |= order == 0;
        }
    }
    *has_duplicates = equal_seen != 0;
    return atomic_load(&out_of_order) == 0;
}

/* Sums runs of equal coordinates of a sorted tensor into their first entry.
 * Explicit zeros (and sums that cancel to zero) stay: they are nonzeros the
 * file stores, and dropping them would change nnz behind the user's back.
 * FALSE when a sum of duplicates is not finite: finite values whose sum is
 * beyond the range of a double.
 *
 * Every pass runs on OpenMP's threads: a bitmap marks where each run
 * starts, then each array is compacted into a new one of the kept length,
 * chunk by chunk (a chunk: the runs that start in its words of the bitmap;
 * it writes from the count of run starts before it), one array at a time,
 * so the memory beyond the tensor is the bitmap and one array. A run's
 * values are added in file order by one thread, as a single pass would. */
static gboolean merge_sorted_duplicates(th_sptensor *t)
{
    const uint64_t n = t->nnz;
    if (n == 0)
        return TRUE;
    const uint64_t words = (n + 63) / 64;
    uint64_t *starts = th_alloc_large(words, sizeof(uint64_t));
    uint64_t kept = 0;
#pragma omp parallel for schedule(static) reduction(+ : kept)
    for (uint64_t w = 0; w < words; ++w) {
        uint64_t bits = 0;
        const uint64_t end = MIN(n, (w + 1) * 64);
        for (uint64_t i = w * 64; i < end; ++i)
            if (i == 0 || compare_coords(t, i - 1, i) != 0)
                bits |= (uint64_t)1 << (i - w * 64);
        starts[w] = bits;
        kept += (uint64_t)__builtin_popcountll(bits);
    }
    if (kept == n) {
        g_free(starts);
        return TRUE;
    }
    const uint64_t chunk_words = SCAN_CHUNK / 64;
    const uint64_t nchunks = (words + chunk_words - 1) / chunk_words;
    uint64_t *out_at = g_new(uint64_t, nchunks + 1);
    out_at[0] = 0;
#pragma omp parallel for schedule(static)
    for (uint64_t c = 0; c < nchunks; ++c) {
        uint64_t runs = 0;
        for (uint64_t w = c * chunk_words; w < MIN(words, (c + 1) * chunk_words); ++w)
            runs += (uint64_t)__builtin_popcountll(starts[w]);
        out_at[c + 1] = runs;
    }
    for (uint64_t c = 0; c < nchunks; ++c)
        out_at[c + 1] += out_at[c];
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        const th_index *from = t->indices[m];
        th_index *to = th_alloc_large(kept, sizeof(th_index));
#pragma omp parallel for schedule(static)
        for (uint64_t c = 0; c < nchunks; ++c) {
            uint64_t k = out_at[c];
            for (uint64_t w = c * chunk_words; w < MIN(words, (c + 1) * chunk_words); ++w)
                for (uint64_t bits = starts[w]; bits != 0; bits &= bits - 1)
                    to[k++] = from[w * 64 + (uint64_t)__builtin_ctzll(bits)];
        }
        g_free(t->indices[m]);
        t->indices[m] = to;
    }
    const double *from = t->values;
    double *to = th_alloc_large(kept, sizeof(double));
    int finite = 1;
#pragma omp parallel for schedule(static) reduction(& : finite)
    for (uint64_t c = 0; c < nchunks; ++c) {
        uint64_t k = out_at[c];
        for (uint64_t w = c * chunk_words; w < MIN(words, (c + 1) * chunk_words); ++w)
            for (uint64_t bits = starts[w]; bits != 0; bits &= bits - 1) {
                uint64_t i = w * 64 + (uint64_t)__builtin_ctzll(bits);
                double sum = from[i];
                /* The run goes on to the next start, in this chunk or past it. */
                for (++i; i < n && !((starts[i / 64] >> (i % 64)) & 1u); ++i)
                    sum += from[i];
                finite &= isfinite(sum) != 0; /* inf or NaN once, never finite again */
                to[k++] = sum;
            }
    }
    g_free(t->values);
    t->values = to;
    g_free(starts);
    g_free(out_at);
    t->duplicates_merged += n - kept;
    t->nnz = kept;
    return finite != 0;
}

static atomic_bool force_wide_sort = FALSE;

void th_sptensor_set_wide_sort(gboolean wide)
{
    atomic_store(&force_wide_sort, wide != FALSE);
}

gboolean th_sptensor_sort_and_merge(th_sptensor *t)
{
    g_return_val_if_fail(t != NULL, FALSE);
    /* FROSTT files are often sorted already: one comparison pass is cheaper
     * than any sort. */
    gboolean has_duplicates = TRUE;
    if (is_sorted(t, &has_duplicates)) {
        if (!has_duplicates)
            return TRUE;
    } else {
        key_word words[TH_MAX_MODES];
        if (plan_key_words(t, words) == 1) {
            sort_single_word(t, &words[0]);
        } else if (t->nnz <= UINT32_MAX && !atomic_load(&force_wide_sort)) {
            uint32_t *perm = sorted_permutation_u32(t);
            apply_permutation_u32(t, perm);
            g_free(perm);
        } else {
            uint64_t *perm = sorted_permutation_u64(t);
            apply_permutation_u64(t, perm);
            g_free(perm);
        }
    }
    return merge_sorted_duplicates(t);
}

/* ---- statistics --------------------------------------------------------- */

/* Sum of (value / divisor)^2, on all cores. */
static double sum_of_squares(const th_sptensor *t, double divisor)
{
    const uint64_t nchunks = (t->nnz + SCAN_CHUNK - 1) / SCAN_CHUNK;
    g_autofree double *part = g_new0(double, MAX(nchunks, 1));
#pragma omp parallel for schedule(static)
    for (uint64_t c = 0; c < nchunks; ++c) {
        double sum = 0.0;
        const uint64_t end = MIN(t->nnz, (c + 1) * SCAN_CHUNK);
        for (uint64_t i = c * SCAN_CHUNK; i < end; ++i) {
            const double v = t->values[i] / divisor;
            sum += v * v;
        }
        part[c] = sum;
    }
    double sum = 0.0;
    for (uint64_t c = 0; c < nchunks; ++c)
        sum += part[c];
    return sum;
}

char *th_sptensor_entry_text(const th_sptensor *t, uint64_t k)
{
    GString *text = g_string_new("(");
    for (uint32_t m = 0; m < t->nmodes; ++m)
        g_string_append_printf(text, "%s%" PRIu64, m ? ", " : "", (uint64_t)t->indices[m][k] + 1);
    g_string_append_c(text, ')');
    return g_string_free(text, FALSE);
}

double th_sptensor_norm_squared(const th_sptensor *t)
{
    g_return_val_if_fail(t != NULL, 0.0);
    return sum_of_squares(t, 1.0);
}

double th_sptensor_scaled_norm_squared(const th_sptensor *t, double divisor)
{
    g_return_val_if_fail(t != NULL && divisor > 0.0, 0.0);
    return sum_of_squares(t, divisor);
}

double th_sptensor_norm(const th_sptensor *t)
{
    g_return_val_if_fail(t != NULL, 0.0);
    const double largest = th_sptensor_max_abs(t);
    if (largest == 0.0)
        return 0.0;
    return sqrt(sum_of_squares(t, largest)) * largest / t->value_scale;
}

double th_sptensor_max_abs(const th_sptensor *t)
{
    g_return_val_if_fail(t != NULL, 0.0);
    double largest = 0.0;
#pragma omp parallel for schedule(static) reduction(max : largest)
    for (uint64_t i = 0; i < t->nnz; ++i)
        largest = fmax(largest, fabs(t->values[i]));
    return largest;
}

static gboolean largest_in_safe_range(double largest)
{
    return largest == 0.0 || (largest >= 0x1p-64 && largest <= 0x1p64);
}

gboolean th_sptensor_in_safe_range(const th_sptensor *t)
{
    return largest_in_safe_range(th_sptensor_max_abs(t));
}

gboolean th_sptensor_scale_to_safe_range(th_sptensor *t)
{
    g_return_val_if_fail(t != NULL, FALSE);
    return th_sptensor_scale_for_largest(t, th_sptensor_max_abs(t));
}

gboolean th_sptensor_scale_for_largest(th_sptensor *t, double largest)
{
    g_return_val_if_fail(t != NULL, FALSE);
    if (largest_in_safe_range(largest))
        return FALSE;
    int exponent = 0;
    (void)frexp(largest, &exponent); /* largest = f * 2^exponent, f in [0.5, 1) */
    for (uint64_t i = 0; i < t->nnz; ++i)
        t->values[i] = ldexp(t->values[i], -exponent);
    t->value_scale = ldexp(t->value_scale, -exponent);
    return TRUE;
}

uint64_t *th_sptensor_slice_bitmap(const th_sptensor *t, uint32_t mode)
{
    g_return_val_if_fail(t != NULL && mode < t->nmodes, NULL);
    const uint64_t dim = t->dims[mode];
    uint64_t *seen = g_new0(uint64_t, MAX(th_sptensor_bitmap_words(dim), 1u));
    const th_index *idx = t->indices[mode];
    /* All cores mark the bitmap (an atomic OR per word, relaxed: only the
     * final bits matter, read after the loop's barrier). */
#pragma omp parallel for schedule(static)
    for (uint64_t i = 0; i < t->nnz; ++i) {
        const th_index x = idx[i];
        if (x >= dim)
            continue; /* outside dims: not a slice of this tensor */
        const uint64_t bit = UINT64_C(1) << (x & 63u);
        if ((__atomic_load_n(&seen[x >> 6], __ATOMIC_RELAXED) & bit) == 0)
            __atomic_fetch_or(&seen[x >> 6], bit, __ATOMIC_RELAXED);
    }
    return seen;
}

uint64_t th_sptensor_bitmap_words(uint64_t dim) { return (dim + 63u) / 64u; }

uint64_t th_sptensor_bitmap_unset(const uint64_t *bitmap, uint64_t dim)
{
    const uint64_t words = th_sptensor_bitmap_words(dim);
    uint64_t distinct = 0;
#pragma omp parallel for schedule(static) reduction(+ : distinct)
    for (uint64_t w = 0; w < words; ++w)
        distinct += (uint64_t)__builtin_popcountll(bitmap[w]);
    return dim - distinct;
}

uint64_t th_sptensor_empty_slices(const th_sptensor *t, uint32_t mode)
{
    g_return_val_if_fail(t != NULL && mode < t->nmodes, 0);
    /* A bitmap: dims can reach 2^32, so one byte per index would be 4 GB. */
    g_autofree uint64_t *seen = th_sptensor_slice_bitmap(t, mode);
    return th_sptensor_bitmap_unset(seen, t->dims[mode]);
}

double th_sptensor_density(const th_sptensor *t)
{
    g_return_val_if_fail(t != NULL, 0.0);
    double cells = 1.0;
    for (uint32_t m = 0; m < t->nmodes; ++m)
        cells *= (double)t->dims[m];
    return cells > 0.0 ? (double)t->nnz / cells : 0.0;
}
