/* cpu-reference's plain MTTKRP of one row in vectors (mttkrp_row.h). The
 * scalar loop keeps the row's sum in memory, a load and a store per
 * nonzero and vector, and its run-time rank keeps GCC to short vectors;
 * here the rank is a constant of each copy and the sum stays in registers.
 * Each lane computes ((x a_r) b_r) c_r and adds it in nonzero order, as the
 * scalar loop does, so the result is the same bits. */
#include "mttkrp_row.h"

#if CPU_REF_HAVE_V4
/* One row in vectors of LANES doubles (type VEC, nv of them a row, at most
 * MAX). */
#define CPU_REF_DEFINE_MTTKRP_ROW(NAME, VEC, LANES, MAX)                                       \
    static inline CPU_REF_ALWAYS_INLINE void NAME(                                            \
        const mode_layout *l, const double *const *other_factors, const uint32_t width,       \
        const uint32_t nv, uint64_t begin, uint64_t end, double *restrict out)                \
    {                                                                                         \
        const uint32_t rank = (LANES) * nv;                                                   \
        VEC acc[MAX];                                                                         \
        CPU_REF_UNROLL_V4                                                                     \
        for (uint32_t v = 0; v < nv; v++)                                                     \
            acc[v] = (VEC){0.0};                                                              \
        for (uint64_t k = begin; k < end; k++) {                                              \
            const uint32_t *idx = l->others + k * width;                                      \
            const double x = l->values[k];                                                    \
            const double *a = other_factors[0] + (size_t)idx[0] * rank;                       \
            const double *b = other_factors[1] + (size_t)idx[1] * rank;                       \
            const double *c = width == 3 ? other_factors[2] + (size_t)idx[2] * rank : NULL;   \
            CPU_REF_UNROLL_V4                                                                 \
            for (uint32_t v = 0; v < nv; v++) {                                               \
                VEC av, bv, t;                                                                \
                memcpy(&av, a + (LANES) * v, sizeof av);                                      \
                memcpy(&bv, b + (LANES) * v, sizeof bv);                                      \
                t = x * av;                                                                   \
                t = t * bv;                                                                   \
                if (width == 3) {                                                             \
                    VEC cv;                                                                   \
                    memcpy(&cv, c + (LANES) * v, sizeof cv);                                  \
                    t = t * cv;                                                               \
                }                                                                             \
                acc[v] += t;                                                                  \
            }                                                                                 \
        }                                                                                     \
        CPU_REF_UNROLL_V4                                                                     \
        for (uint32_t v = 0; v < nv; v++)                                                     \
            memcpy(out + (LANES) * v, &acc[v], sizeof acc[v]);                                \
    }

CPU_REF_DEFINE_MTTKRP_ROW(mttkrp_row_v4, cpu_ref_v4d, 4, CPU_REF_V4_MAX)
CPU_REF_DEFINE_MTTKRP_ROW(mttkrp_row_v8, cpu_ref_v8d, 8, 4u)

#define CPU_REF_MTTKRP_CASE(KERNEL, LANES, W, NV)                                              \
    if (width == (W) && rank == (LANES) * (NV)) {                                              \
        KERNEL(l, other_factors, (W), (NV), begin, end, out);                                  \
        return true;                                                                           \
    }

static inline CPU_REF_ALWAYS_INLINE bool
mttkrp_row_body(const mode_layout *l, const double *const *other_factors, uint32_t width,
                uint32_t rank, uint64_t begin, uint64_t end, double *restrict out,
                const bool wide)
{
    if (wide) {
        CPU_REF_MTTKRP_CASE(mttkrp_row_v8, 8, 2, 1)
        CPU_REF_MTTKRP_CASE(mttkrp_row_v8, 8, 2, 2)
        CPU_REF_MTTKRP_CASE(mttkrp_row_v8, 8, 2, 4)
        CPU_REF_MTTKRP_CASE(mttkrp_row_v8, 8, 3, 1)
        CPU_REF_MTTKRP_CASE(mttkrp_row_v8, 8, 3, 2)
        CPU_REF_MTTKRP_CASE(mttkrp_row_v8, 8, 3, 4)
    } else {
        CPU_REF_MTTKRP_CASE(mttkrp_row_v4, 4, 2, 2)
        CPU_REF_MTTKRP_CASE(mttkrp_row_v4, 4, 2, 4)
        CPU_REF_MTTKRP_CASE(mttkrp_row_v4, 4, 2, 8)
        CPU_REF_MTTKRP_CASE(mttkrp_row_v4, 4, 3, 2)
        CPU_REF_MTTKRP_CASE(mttkrp_row_v4, 4, 3, 4)
        CPU_REF_MTTKRP_CASE(mttkrp_row_v4, 4, 3, 8)
    }
    return false;
}

CPU_REF_VECTOR_CLONES
static bool mttkrp_row_narrow(const mode_layout *l, const double *const *other_factors,
                              uint32_t width, uint32_t rank, uint64_t begin, uint64_t end,
                              double *restrict out)
{
    return mttkrp_row_body(l, other_factors, width, rank, begin, end, out, false);
}

#if CPU_REF_WIDE
__attribute__((target("arch=x86-64-v4"))) static bool
mttkrp_row_wide(const mode_layout *l, const double *const *other_factors, uint32_t width,
                uint32_t rank, uint64_t begin, uint64_t end, double *restrict out)
{
    return mttkrp_row_body(l, other_factors, width, rank, begin, end, out, true);
}
#endif
#endif

bool mttkrp_row_vector(const mode_layout *l, const double *const *other_factors, uint32_t width,
                       uint32_t rank, uint64_t begin, uint64_t end, bool wide,
                       double *restrict out)
{
#if CPU_REF_HAVE_V4
#if CPU_REF_WIDE
    if (wide)
        return mttkrp_row_wide(l, other_factors, width, rank, begin, end, out);
#endif
    (void)wide;
    return mttkrp_row_narrow(l, other_factors, width, rank, begin, end, out);
#else
    (void)l, (void)other_factors, (void)width, (void)rank, (void)begin, (void)end, (void)wide,
        (void)out;
    return false;
#endif
}
