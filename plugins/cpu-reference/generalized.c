/* cpu-reference's generalized MTTKRP kernels (generalized.h): per nonzero
 * the row product p of the other factors' rows, the model value
 * m = sum_r w_r A_mode(row, r) p_r, then g(x, m) p into the row and h(x, m)
 * into the chunk's sum, both in nonzero order. Three copies of the row's
 * loop compute the same bits: the scalar one for any shape, one in vectors
 * of four doubles (baseline and AVX2 clones) and one in vectors of eight
 * (AVX-512) for 3- and 4-mode tensors at ranks 8, 16 and 32. */
#include "generalized.h"

#include <math.h>

static inline double elementwise_g(int32_t elementwise, double x, double m, double epsilon)
{
    if (elementwise == TH_ELEMENTWISE_POISSON_RATIO)
        return x / (m > epsilon ? m : epsilon);
    return m - x; /* TH_ELEMENTWISE_RESIDUAL */
}

static inline double reduction_h(int32_t reduction, double x, double m)
{
    switch (reduction) {
    case TH_REDUCTION_POISSON_LOG_LIKELIHOOD:
        if (x == 0.0)
            return 0.0;
        return m > 0.0 ? x * log(m) : x * -INFINITY;
    case TH_REDUCTION_SQUARED_RESIDUAL:
        return (m - x) * (m - x);
    case TH_REDUCTION_INNER_PRODUCT:
        return x * m;
    default:
        return 0.0;
    }
}

/* One row `row` of the layout, nonzeros [begin, end): for each nonzero its
 * row product p = Hadamard product of the other factors' rows, the model
 * m = sum_r w_r A_mode(row, r) p_r, then out += g(x, m) p (when out is not
 * NULL) and *sum += h(x, m), both in nonzero order. `wa` and `p` are scratch
 * of R doubles each. generalized_row_v4 computes the same values the same
 * way, so which of the two runs does not change a bit of the result. */
static void generalized_row_scalar(const mode_layout *l, const double *const *other_factors,
                                   uint32_t width, uint32_t rank, uint32_t row, uint64_t begin,
                                   uint64_t end, const generalized_op *op, double *restrict wa,
                                   double *restrict p, double *restrict out, double *sum)
{
    const double *restrict a_row = op->target + (size_t)row * rank;
    for (uint32_t r = 0; r < rank; r++)
        wa[r] = op->weights != NULL ? op->weights[r] * a_row[r] : a_row[r];
    if (out != NULL)
        for (uint32_t r = 0; r < rank; r++)
            out[r] = 0.0;
    double h_sum = 0.0;
    for (uint64_t k = begin; k < end; k++) {
        const uint32_t *idx = l->others + k * width;
        const double x = l->values[k];
        const double *restrict first = other_factors[0] + (size_t)idx[0] * rank;
        if (width == 1) {
            for (uint32_t r = 0; r < rank; r++)
                p[r] = first[r];
        } else if (width == 2) {
            const double *restrict second = other_factors[1] + (size_t)idx[1] * rank;
            for (uint32_t r = 0; r < rank; r++)
                p[r] = first[r] * second[r];
        } else if (width == 3) {
            const double *restrict second = other_factors[1] + (size_t)idx[1] * rank;
            const double *restrict third = other_factors[2] + (size_t)idx[2] * rank;
            for (uint32_t r = 0; r < rank; r++)
                p[r] = first[r] * second[r] * third[r];
        } else {
            const double *restrict second = other_factors[1] + (size_t)idx[1] * rank;
            for (uint32_t r = 0; r < rank; r++)
                p[r] = first[r] * second[r];
            for (uint32_t j = 2; j < width; j++) {
                const double *restrict next = other_factors[j] + (size_t)idx[j] * rank;
                for (uint32_t r = 0; r < rank; r++)
                    p[r] *= next[r];
            }
        }
        const double m = cpu_ref_dot4(wa, p, rank);
        if (out != NULL) {
            const double g = elementwise_g(op->elementwise, x, m, op->epsilon);
            for (uint32_t r = 0; r < rank; r++)
                out[r] += g * p[r];
        }
        h_sum += reduction_h(op->reduction, x, m);
    }
    *sum += h_sum;
}

#if CPU_REF_HAVE_V4
/* Nonzero k's row product p (nv vectors of LANES doubles, type VEC) and
 * its model value m with the weighted target row wa, as
 * generalized_row_scalar forms them: FOLD adds a vector of products wa * p
 * into the four partial sums (r mod 4) in r order. One definition for the
 * vectors of four and of eight below. */
#define CPU_REF_DEFINE_ROW_PRODUCT(NAME, VEC, LANES, FOLD)                                     \
    static inline CPU_REF_ALWAYS_INLINE double NAME(                                          \
        const mode_layout *l, const double *const *other_factors, const uint32_t width,       \
        const uint32_t nv, uint64_t k, const VEC *wa, VEC *p)                                 \
    {                                                                                         \
        const uint32_t rank = (LANES) * nv;                                                   \
        const uint32_t *idx = l->others + k * width;                                          \
        const double *first = other_factors[0] + (size_t)idx[0] * rank;                       \
        const double *second = other_factors[1] + (size_t)idx[1] * rank;                      \
        const double *third = width == 3 ? other_factors[2] + (size_t)idx[2] * rank : NULL;   \
        cpu_ref_v4d lanes = {0.0, 0.0, 0.0, 0.0};                                             \
        CPU_REF_UNROLL_V4                                                                     \
        for (uint32_t v = 0; v < nv; v++) {                                                   \
            VEC a, b;                                                                         \
            memcpy(&a, first + (LANES) * v, sizeof a);                                        \
            memcpy(&b, second + (LANES) * v, sizeof b);                                       \
            p[v] = a * b;                                                                     \
            if (width == 3) {                                                                 \
                VEC c;                                                                        \
                memcpy(&c, third + (LANES) * v, sizeof c);                                    \
                p[v] = p[v] * c;                                                              \
            }                                                                                 \
            const VEC t = wa[v] * p[v];                                                       \
            FOLD(&lanes, &t);                                                                 \
        }                                                                                     \
        return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);                                 \
    }

/* (Vectors through pointers, as cpu_ref_load4: by value they would have
 * two calling conventions across the clones.) */
static inline CPU_REF_ALWAYS_INLINE void fold_v4(cpu_ref_v4d *lanes, const cpu_ref_v4d *t)
{
    *lanes += *t;
}

CPU_REF_DEFINE_ROW_PRODUCT(row_product_v4, cpu_ref_v4d, 4, fold_v4)

/* The row loop of generalized_row_scalar in vectors of LANES doubles
 * (type VEC, at most MAX a row), each nonzero's row product and model
 * value from ROW_PRODUCT: one definition for the vectors of four and of
 * eight below. */
#define CPU_REF_DEFINE_GENERALIZED_ROW(NAME, VEC, LANES, MAX, ROW_PRODUCT)                     \
    static inline CPU_REF_ALWAYS_INLINE void NAME(                                            \
        const mode_layout *l, const double *const *other_factors, const uint32_t width,       \
        const uint32_t nv, uint32_t row, uint64_t begin, uint64_t end,                        \
        const generalized_op *op, double *restrict out, double *sum)                          \
    {                                                                                         \
        const uint32_t rank = (LANES) * nv;                                                   \
        VEC wa[MAX], acc[MAX];                                                                \
        const double *a_row = op->target + (size_t)row * rank;                                \
        CPU_REF_UNROLL_V4                                                                     \
        for (uint32_t v = 0; v < nv; v++) {                                                   \
            memcpy(&wa[v], a_row + (LANES) * v, sizeof wa[v]);                                \
            if (op->weights != NULL) {                                                        \
                VEC w;                                                                        \
                memcpy(&w, op->weights + (LANES) * v, sizeof w);                              \
                wa[v] = w * wa[v];                                                            \
            }                                                                                 \
            acc[v] = (VEC){0.0};                                                              \
        }                                                                                     \
        double h_sum = 0.0;                                                                   \
        for (uint64_t k = begin; k < end; k++) {                                              \
            VEC p[MAX];                                                                       \
            const double m = ROW_PRODUCT(l, other_factors, width, nv, k, wa, p);              \
            const double x = l->values[k];                                                    \
            if (out != NULL) {                                                                \
                const double g = elementwise_g(op->elementwise, x, m, op->epsilon);           \
                CPU_REF_UNROLL_V4                                                             \
                for (uint32_t v = 0; v < nv; v++)                                             \
                    acc[v] += g * p[v];                                                       \
            }                                                                                 \
            h_sum += reduction_h(op->reduction, x, m);                                        \
        }                                                                                     \
        if (out != NULL)                                                                      \
            CPU_REF_UNROLL_V4                                                                 \
            for (uint32_t v = 0; v < nv; v++)                                                 \
                memcpy(out + (LANES) * v, &acc[v], sizeof acc[v]);                            \
        *sum += h_sum;                                                                        \
    }

/* generalized_row_scalar for 3- and 4-mode tensors (width 2 or 3) and a
 * rank of 4 * nv, written in vectors of four doubles (r mod 4 is a vector
 * lane, so the four partial sums of m are one vector). Inlined with width
 * and nv as constants, the weighted target row, the row product and the
 * row's sum stay in registers, where the scalar loop has run-time trip
 * counts and round trips through memory; AVX2 halves its instructions
 * (CPU_REF_VECTOR_CLONES). What is left waits on each nonzero's row
 * gathers and division (kernels/DESIGN.md, "not kept"). */
CPU_REF_DEFINE_GENERALIZED_ROW(generalized_row_v4, cpu_ref_v4d, 4, CPU_REF_V4_MAX, row_product_v4)

#define CPU_REF_GENERALIZED_V4(W, NV)                                                          \
    if (width == (W) && rank == 4 * (NV)) {                                                    \
        generalized_row_v4(l, other_factors, (W), (NV), row, begin, end, op, out, sum);        \
        return;                                                                                \
    }
#endif

#if CPU_REF_HAVE_V4
#define CPU_REF_V8_MAX 4u /* rank 32 */

/* A vector of eight products into the four partial sums: its low half,
 * then its high half (r order). */
static inline CPU_REF_ALWAYS_INLINE void fold_v8(cpu_ref_v4d *lanes, const cpu_ref_v8d *t)
{
    cpu_ref_v4d low, high;
    memcpy(&low, t, sizeof low);
    memcpy(&high, (const char *)t + sizeof low, sizeof high);
    *lanes += low;
    *lanes += high;
}

CPU_REF_DEFINE_ROW_PRODUCT(row_product_v8, cpu_ref_v8d, 8, fold_v8)

/* generalized_row_scalar for 3- and 4-mode tensors (width 2 or 3) and a
 * rank of 8 * nw, in vectors of eight doubles: one register each with
 * AVX-512, two with AVX2, four with SSE2. Inlined with width and nw as
 * constants, the weighted target row, the row product and the row's sum
 * stay in registers. */
CPU_REF_DEFINE_GENERALIZED_ROW(generalized_row_v8, cpu_ref_v8d, 8, CPU_REF_V8_MAX, row_product_v8)

#define CPU_REF_GENERALIZED_V8(W, NW)                                                          \
    if (width == (W) && rank == 8 * (NW)) {                                                    \
        generalized_row_v8(l, other_factors, (W), (NW), row, begin, end, op, out, sum);        \
        return;                                                                                \
    }
#endif

/* One row of a generalized pass: a vector copy for the common shapes
 * (3- and 4-mode tensors at ranks 8, 16 and 32; vectors of eight with
 * AVX-512, `wide`, of four otherwise), the scalar loop for the others.
 * `scratch` is 2 R doubles. */
static inline CPU_REF_ALWAYS_INLINE void
generalized_row_body(const mode_layout *l, const double *const *other_factors, uint32_t width,
                     uint32_t rank, uint32_t row, uint64_t begin, uint64_t end,
                     const generalized_op *op, double *restrict scratch, double *restrict out,
                     double *sum, const bool wide)
{
#if CPU_REF_HAVE_V4
    if (wide) {
        CPU_REF_GENERALIZED_V8(2, 1)
        CPU_REF_GENERALIZED_V8(2, 2)
        CPU_REF_GENERALIZED_V8(2, 4)
        CPU_REF_GENERALIZED_V8(3, 1)
        CPU_REF_GENERALIZED_V8(3, 2)
        CPU_REF_GENERALIZED_V8(3, 4)
    } else {
        CPU_REF_GENERALIZED_V4(2, 2)
        CPU_REF_GENERALIZED_V4(2, 4)
        CPU_REF_GENERALIZED_V4(2, 8)
        CPU_REF_GENERALIZED_V4(3, 2)
        CPU_REF_GENERALIZED_V4(3, 4)
        CPU_REF_GENERALIZED_V4(3, 8)
    }
#else
    (void)wide;
#endif
    generalized_row_scalar(l, other_factors, width, rank, row, begin, end, op, scratch,
                           scratch + rank, out, sum);
}

CPU_REF_VECTOR_CLONES
static void generalized_row_narrow(const mode_layout *l, const double *const *other_factors,
                                   uint32_t width, uint32_t rank, uint32_t row, uint64_t begin,
                                   uint64_t end, const generalized_op *op,
                                   double *restrict scratch, double *restrict out, double *sum)
{
    generalized_row_body(l, other_factors, width, rank, row, begin, end, op, scratch, out, sum,
                         false);
}

#if CPU_REF_WIDE
/* generalized_row for CPUs with AVX-512 (generalized_op.wide). */
__attribute__((target("arch=x86-64-v4"))) static void
generalized_row_wide(const mode_layout *l, const double *const *other_factors, uint32_t width,
                     uint32_t rank, uint32_t row, uint64_t begin, uint64_t end,
                     const generalized_op *op, double *restrict scratch, double *restrict out,
                     double *sum)
{
    generalized_row_body(l, other_factors, width, rank, row, begin, end, op, scratch, out, sum,
                         true);
}
#endif

static void generalized_row(const mode_layout *l, const double *const *other_factors,
                            uint32_t width, uint32_t rank, uint32_t row, uint64_t begin,
                            uint64_t end, const generalized_op *op, double *restrict scratch,
                            double *restrict out, double *sum)
{
#if CPU_REF_WIDE
    if (op->wide) {
        generalized_row_wide(l, other_factors, width, rank, row, begin, end, op, scratch, out,
                             sum);
        return;
    }
#endif
    generalized_row_narrow(l, other_factors, width, rank, row, begin, end, op, scratch, out, sum);
}

/* One chunk of a generalized pass, laid out as mttkrp_chunk (inner rows to
 * `result`, end rows to `slots`), with the chunk's sum of h into *sum.
 * result NULL: the sum only. */
void generalized_chunk(const mode_layout *l, const double *const *other_factors, uint32_t width,
                       uint32_t rank, uint64_t chunk, uint64_t nnz, const generalized_op *op,
                       double *restrict scratch, double *restrict slots, double *result,
                       double *sum)
{
    const chunk_span c = cpu_ref_chunk_span(l, chunk, nnz);
    *sum = 0.0;
    generalized_row(l, other_factors, width, rank, c.first, c.begin, c.first_end, op, scratch,
                    result ? slots : NULL, sum);
    for (uint32_t row = c.first + 1; row < c.last; row++)
        generalized_row(l, other_factors, width, rank, row, l->row_start[row],
                        l->row_start[row + 1], op, scratch,
                        result ? result + (size_t)row * rank : NULL, sum);
    if (c.last > c.first)
        generalized_row(l, other_factors, width, rank, c.last, l->row_start[c.last], c.end, op,
                        scratch, result ? slots + rank : NULL, sum);
}

