/* cpu-reference's internals shared by its source files: the per-mode
 * layout of the tensor, the chunk size, and the vector types and copies
 * (baseline, AVX2, AVX-512) its loops are written for. Not an installed
 * header: nothing here is part of the ABI. */
#ifndef CPU_REFERENCE_INTERNAL_H
#define CPU_REFERENCE_INTERNAL_H

#include <tensorhost/plugin.h>

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define CPU_REF_MAX_MODES 64u
/* Nonzeros per MTTKRP chunk: enough that scheduling and the boundary merge
 * vanish next to the arithmetic, few enough that a tensor of a few hundred
 * thousand nonzeros still feeds every core. Fixed (not derived from the thread
 * count) so that results are identical whatever the thread count. */
#define CPU_REF_CHUNK_NNZ 4096u

/* Vectors of four doubles (GCC and Clang): the generalized MTTKRP's loop
 * for the common shapes (generalized_row_v4). */
#if defined(__GNUC__)
#define CPU_REF_HAVE_V4 1
#define CPU_REF_V4_MAX 8u /* rank 32 */
#define CPU_REF_ALWAYS_INLINE __attribute__((always_inline))
/* -O2 keeps even constant-count loops rolled, with their vectors in memory. */
#define CPU_REF_UNROLL_V4 _Pragma("GCC unroll 8")
typedef double cpu_ref_v4d __attribute__((vector_size(4 * sizeof(double))));
/* Vectors of eight doubles: registers of AVX-512 in the `wide` copies, two
 * or four of the narrower ones in the others. */
typedef double cpu_ref_v8d __attribute__((vector_size(8 * sizeof(double))));
/* *v = from[0..3], no alignment assumed. (Through a pointer: a function
 * returning a vector would have two calling conventions across the clones.) */
static inline CPU_REF_ALWAYS_INLINE void cpu_ref_load4(cpu_ref_v4d *v, const double *from)
{
    memcpy(v, from, sizeof *v);
}
/* The same loop for AVX2 beside the baseline (x86-64's SSE2), chosen at
 * load time. FMA contraction is off in ISO C mode (-std=c11), so both
 * compute the same bits. */
#if defined(__x86_64__) && !defined(__clang__)
#define CPU_REF_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CPU_REF_VECTOR_CLONES
#endif
#else
#define CPU_REF_HAVE_V4 0
#define CPU_REF_VECTOR_CLONES
#endif
/* Copies compiled for AVX-512 (x86-64-v4) beside the clones above, called
 * where cpu_ref_use_wide() says so: GCC on x86-64, as CPU_REF_VECTOR_CLONES. */
#if CPU_REF_HAVE_V4 && defined(__x86_64__) && !defined(__clang__)
#define CPU_REF_WIDE 1
#else
#define CPU_REF_WIDE 0
#endif
#if CPU_REF_HAVE_V4
#define CPU_REF_DOT_INLINE CPU_REF_ALWAYS_INLINE
#else
#define CPU_REF_DOT_INLINE
#endif
/* Set to a non-empty value, the row solve and the generalized MTTKRP keep
 * to their vectors of four on a CPU with AVX-512: the tests compare the
 * copies' bits. The results are the same either way. */
#define CPU_REF_NO_AVX512_ENV "TH_CPU_REFERENCE_NO_AVX512"

/* Whether the AVX-512 copies run: CPU_REF_WIDE, a CPU with the AVX-512 of
 * x86-64-v4, and CPU_REF_NO_AVX512_ENV not set. */
bool cpu_ref_use_wide(void);

/* sum_s u_s w_s over [0, n): four partial sums (s mod 4) added pairwise at
 * the end, a fixed order (the same bits on every run) without one long
 * chain of dependent additions. Always inlined, so that each CPU's copy of
 * a caller compiles it for that CPU. */
static inline CPU_REF_DOT_INLINE double cpu_ref_dot4(const double *restrict u,
                                                     const double *restrict w, uint32_t n)
{
    double lanes[4] = {0.0, 0.0, 0.0, 0.0};
    uint32_t s = 0;
    for (; s + 4 <= n; s += 4)
        for (uint32_t j = 0; j < 4; j++)
            lanes[j] += u[s + j] * w[s + j];
    for (uint32_t j = 0; s + j < n; j++)
        lanes[j] += u[s + j] * w[s + j];
    return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

/* Poisson CP's kernels run with subnormal numbers (below 2.2e-308) taken
 * as zero, on the calling thread, between cpu_ref_subnormals_off() and
 * cpu_ref_subnormals_restore(its value): multiplicative updates drive a
 * factor's unused entries towards zero geometrically, and once the
 * products of such entries underflow, each operation on them takes a
 * microcode assist (a Zen 5 core's outer iteration on the Uber sample
 * doubled by the 15th). CP-APR already counts entries below
 * kappa_tolerance (1e-10) as zeros, so no result moves by more than the
 * subnormal range. x86-64's MXCSR (flush-to-zero and denormals-are-zero);
 * elsewhere a no-op. Each OpenMP thread sets its own. */
#if defined(__x86_64__) && defined(__SSE__)
#include <xmmintrin.h>
#define CPU_REF_MXCSR_FLUSH_SUBNORMALS 0x8040u /* FTZ | DAZ */
static inline uint32_t cpu_ref_subnormals_off(void)
{
    const uint32_t saved = _mm_getcsr();
    _mm_setcsr(saved | CPU_REF_MXCSR_FLUSH_SUBNORMALS);
    return saved;
}
static inline void cpu_ref_subnormals_restore(uint32_t saved)
{
    _mm_setcsr(saved);
}
#else
static inline uint32_t cpu_ref_subnormals_off(void)
{
    return 0;
}
static inline void cpu_ref_subnormals_restore(uint32_t saved)
{
    (void)saved;
}
#endif

/* One mode's copy of the tensor, nonzeros grouped by row (this mode's index). */
typedef struct mode_layout {
    uint64_t nnz;        /* the mode's nonzeros (th_coo_tensor.mode_nonzeros[mode]'s, or all) */
    uint64_t *row_start; /* [dims[mode] + 1]: row i holds nonzeros row_start[i] .. row_start[i+1]-1 */
    double *values;      /* [nnz] in row order */
    uint32_t *others;    /* [nnz * (nmodes - 1)]: the other modes' indices, in mode order */
    uint64_t chunks;     /* ceil(nnz / CPU_REF_CHUNK_NNZ) */
    uint32_t *chunk_row; /* [chunks + 1]: row of each chunk's first nonzero; [chunks] = row of the last */
} mode_layout;

/* The nonzeros and rows of chunk `chunk` of a pass over l's nnz nonzeros:
 * [begin, end), its first row, its last row (which may continue into the
 * next chunk), and where its first row's nonzeros end inside it. A chunk's
 * first and last rows are partial (their sums go to the boundary slots);
 * the rows between are whole. */
typedef struct chunk_span {
    uint64_t begin, end, first_end;
    uint32_t first, last;
} chunk_span;

static inline chunk_span cpu_ref_chunk_span(const mode_layout *l, uint64_t chunk, uint64_t nnz)
{
    chunk_span c;
    c.begin = chunk * CPU_REF_CHUNK_NNZ;
    c.end = c.begin + CPU_REF_CHUNK_NNZ < nnz ? c.begin + CPU_REF_CHUNK_NNZ : nnz;
    c.first = l->chunk_row[chunk];
    /* The next chunk's first row may be one past this chunk's last nonzero's row. */
    c.last = chunk + 1 < l->chunks ? l->chunk_row[chunk + 1] : l->chunk_row[l->chunks];
    while (l->row_start[c.last] >= c.end)
        c.last--;
    c.first_end = l->row_start[c.first + 1] < c.end ? l->row_start[c.first + 1] : c.end;
    return c;
}

#endif
