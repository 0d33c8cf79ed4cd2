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

/* p = the Hadamard product of nonzero k's rows of the other factors, in
 * mode order: the one order every scalar loop here forms it in. */
static inline void row_product_scalar(const mode_layout *l, const double *const *other_factors,
                                      uint32_t width, uint32_t rank, uint64_t k,
                                      double *restrict p)
{
    const uint32_t *idx = l->others + k * width;
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
        const double x = l->values[k];
        row_product_scalar(l, other_factors, width, rank, k, p);
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

/* Nonzeros whose model values are formed before their h's are summed:
 * h (a log) is a call, which would otherwise spill the row's vectors
 * around every nonzero. */
#define CPU_REF_H_BATCH 32u

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
        double models[CPU_REF_H_BATCH];                                                       \
        for (uint64_t first = begin; first < end; first += CPU_REF_H_BATCH) {                 \
            const uint64_t last = end - first < CPU_REF_H_BATCH ? end : first + CPU_REF_H_BATCH; \
            for (uint64_t k = first; k < last; k++) {                                         \
                VEC p[MAX];                                                                   \
                const double m = ROW_PRODUCT(l, other_factors, width, nv, k, wa, p);          \
                models[k - first] = m;                                                        \
                if (out != NULL) {                                                            \
                    const double g =                                                          \
                        elementwise_g(op->elementwise, l->values[k], m, op->epsilon);         \
                    CPU_REF_UNROLL_V4                                                         \
                    for (uint32_t v = 0; v < nv; v++)                                         \
                        acc[v] += g * p[v];                                                   \
                }                                                                             \
            }                                                                                 \
            if (op->reduction != TH_REDUCTION_NONE)                                           \
                for (uint64_t k = first; k < last; k++)                                       \
                    h_sum += reduction_h(op->reduction, l->values[k], models[k - first]);     \
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


/* ------------------------------------------------------------------------ */
/* One row's Phi for multiplicative_updates (ABI 1.7)                        */
/* ------------------------------------------------------------------------ */

/* Where a row's sum must be the loop's bit for bit, it is formed as
 * generalized_pass forms it: one sum per stretch of the row inside a chunk
 * (CPU_REF_CHUNK_NNZ nonzeros), each in nonzero order from zero, and the
 * stretches added left to right (merge_boundaries). */

/* Phi's row formed as the loop forms it (MU_PRODUCTS_NONE): each stretch
 * by generalized_row itself, its target the row `a` (row 0 of a one-row
 * factor). scratch: 3 R doubles. */
static void multiplicative_row_formed(const mode_layout *l, const double *const *other_factors,
                                      uint32_t width, uint32_t rank, uint64_t begin,
                                      uint64_t end, const double *a, double epsilon, bool wide,
                                      double *restrict scratch, double *restrict phi)
{
    const generalized_op op = {.elementwise = TH_ELEMENTWISE_POISSON_RATIO,
                               .reduction = TH_REDUCTION_NONE,
                               .epsilon = epsilon,
                               .weights = NULL,
                               .target = a,
                               .wide = wide};
    double *restrict stretch = scratch + 2 * (size_t)rank;
    double unused = 0.0; /* the sum of h: none */
    uint64_t from = begin;
    do {
        const uint64_t to = (from / CPU_REF_CHUNK_NNZ + 1) * CPU_REF_CHUNK_NNZ < end
                                ? (from / CPU_REF_CHUNK_NNZ + 1) * CPU_REF_CHUNK_NNZ
                                : end;
        generalized_row(l, other_factors, width, rank, 0, from, to, &op, scratch,
                        from == begin ? phi : stretch, &unused);
        if (from != begin)
            for (uint32_t r = 0; r < rank; r++)
                phi[r] += stretch[r];
        from = to;
    } while (from < end);
}

/* Phi's row over nonzeros [begin, end) for the target row a (no weights)
 * from the row products in `products` (R doubles a nonzero, row by row),
 * which FILL first fills: as generalized_row_scalar with
 * TH_ELEMENTWISE_POISSON_RATIO forms it, the same bits. */
static void multiplicative_row_scalar(const mode_layout *l, const double *const *other_factors,
                                      uint32_t width, uint32_t rank, uint64_t begin, uint64_t end,
                                      const double *restrict a, double epsilon,
                                      double *restrict products, mu_products use,
                                      double *restrict scratch, double *restrict phi)
{
    if (use == MU_PRODUCTS_FILL)
        for (uint64_t k = begin; k < end; k++)
            row_product_scalar(l, other_factors, width, rank, k, products + (k - begin) * rank);
    double *restrict acc = scratch;
    for (uint32_t r = 0; r < rank; r++)
        acc[r] = 0.0;
    bool first_stretch = true;
    uint64_t boundary = (begin / CPU_REF_CHUNK_NNZ + 1) * CPU_REF_CHUNK_NNZ;
    for (uint64_t k = begin; k < end; k++) {
        if (k == boundary) {
            for (uint32_t r = 0; r < rank; r++) {
                phi[r] = first_stretch ? acc[r] : phi[r] + acc[r];
                acc[r] = 0.0;
            }
            first_stretch = false;
            boundary += CPU_REF_CHUNK_NNZ;
        }
        const double *q = products + (k - begin) * rank;
        const double m = cpu_ref_dot4(a, q, rank);
        const double g = l->values[k] / (m > epsilon ? m : epsilon);
        for (uint32_t r = 0; r < rank; r++)
            acc[r] += g * q[r];
    }
    for (uint32_t r = 0; r < rank; r++)
        phi[r] = first_stretch ? acc[r] : phi[r] + acc[r];
}

#if CPU_REF_HAVE_V4
typedef long long cpu_ref_v8i __attribute__((vector_size(8 * sizeof(long long))));

/* *pair = row first's half h (doubles 4 h .. 4 h + 3 of rows[first][q])
 * beside row first + 2's. */
static inline CPU_REF_ALWAYS_INLINE void half_rows(const cpu_ref_v8d (*rows)[4], uint32_t q,
                                                   int first, int h, cpu_ref_v8d *pair)
{
    cpu_ref_v4d low, high;
    memcpy(&low, (const double *)&rows[first][q] + 4 * h, sizeof low);
    memcpy(&high, (const double *)&rows[first + 2][q] + 4 * h, sizeof high);
    *pair = __builtin_shufflevector(low, high, 0, 1, 2, 3, 4, 5, 6, 7);
}

/* Eight rows of eight doubles (rows[i][q], i = 0 .. 7) into columns: out
 * + 8 j gets column j (rows[0][q][j] .. rows[7][q][j]). The first round
 * of the transpose is loads of half rows (rows 0 and 2, 1 and 3, 4 and 6,
 * 5 and 7 side by side), the second in-lane unpacks, the third one
 * shuffle of 128-bit lanes per pair of columns: half the cross-lane
 * shuffles of three rounds in registers, which made a third of filling
 * the cache on a Zen 5 core (__builtin_shufflevector: GCC 12 and Clang). */
static inline CPU_REF_ALWAYS_INLINE void transpose8_rows(const cpu_ref_v8d (*rows)[4], uint32_t q,
                                                         double *restrict out)
{
    _Pragma("GCC unroll 2")
    for (int h = 0; h < 2; h++) { /* columns 4 h .. 4 h + 3 */
        cpu_ref_v8d p0, p1, p2, p3;
        half_rows(rows, q, 0, h, &p0);
        half_rows(rows, q, 1, h, &p1);
        half_rows(rows, q, 4, h, &p2);
        half_rows(rows, q, 5, h, &p3);
        /* even: columns 0 and 2 of the half, rows 0-3 (even0) and 4-7 (even1)
         * by pairs of rows; odd: columns 1 and 3 */
        const cpu_ref_v8d even0 = __builtin_shufflevector(p0, p1, 0, 8, 2, 10, 4, 12, 6, 14);
        const cpu_ref_v8d odd0 = __builtin_shufflevector(p0, p1, 1, 9, 3, 11, 5, 13, 7, 15);
        const cpu_ref_v8d even1 = __builtin_shufflevector(p2, p3, 0, 8, 2, 10, 4, 12, 6, 14);
        const cpu_ref_v8d odd1 = __builtin_shufflevector(p2, p3, 1, 9, 3, 11, 5, 13, 7, 15);
        const cpu_ref_v8d c0 = __builtin_shufflevector(even0, even1, 0, 1, 4, 5, 8, 9, 12, 13);
        const cpu_ref_v8d c2 = __builtin_shufflevector(even0, even1, 2, 3, 6, 7, 10, 11, 14, 15);
        const cpu_ref_v8d c1 = __builtin_shufflevector(odd0, odd1, 0, 1, 4, 5, 8, 9, 12, 13);
        const cpu_ref_v8d c3 = __builtin_shufflevector(odd0, odd1, 2, 3, 6, 7, 10, 11, 14, 15);
        memcpy(out + 8 * (4 * h + 0), &c0, sizeof c0);
        memcpy(out + 8 * (4 * h + 1), &c1, sizeof c1);
        memcpy(out + 8 * (4 * h + 2), &c2, sizeof c2);
        memcpy(out + 8 * (4 * h + 3), &c3, sizeof c3);
    }
}

/* A block of eight nonzeros into the cache: rows[lane] their products
 * (rank / 8 vectors each), values their values; `block` gets, for each r,
 * the eight products as one vector, then the eight values. */
static inline CPU_REF_ALWAYS_INLINE void keep_block(cpu_ref_v8d (*rows)[4], const double *values,
                                                    uint32_t rank, double *restrict block)
{
    for (uint32_t q = 0; q < rank / 8; q++)
        transpose8_rows((const cpu_ref_v8d(*)[4])rows, q, block + (size_t)q * 64);
    memcpy(block + (size_t)rank * 8, values, 8 * sizeof(double));
}

/* Eight whole nonzeros k .. k + 7 into the cache (`block`, as keep_block
 * lays it out): each nonzero's products of the other factors' rows,
 * multiplied in ROW_PRODUCT's order (so the same bits), into a staging
 * block in L1, then transposed from it (transpose8_rows). */
static inline CPU_REF_ALWAYS_INLINE void fill_block(const mode_layout *l,
                                                    const double *const *other_factors,
                                                    const uint32_t width, const uint32_t rank,
                                                    uint64_t k, double *restrict block)
{
    const uint32_t *idx = l->others + k * width;
    const double *rows0[8], *rows1[8], *rows2[8];
    _Pragma("GCC unroll 8")
    for (uint32_t lane = 0; lane < 8; lane++) {
        rows0[lane] = other_factors[0] + (size_t)idx[lane * width] * rank;
        rows1[lane] = other_factors[1] + (size_t)idx[lane * width + 1] * rank;
        rows2[lane] = width == 3 ? other_factors[2] + (size_t)idx[lane * width + 2] * rank
                                 : NULL;
    }
    /* Each lane's products first, into rows in L1, then the rows
     * transposed: one phase at a time, each within the registers. */
    cpu_ref_v8d rows[8][4] __attribute__((aligned(64)));
    _Pragma("GCC unroll 8")
    for (uint32_t lane = 0; lane < 8; lane++) {
        _Pragma("GCC unroll 4")
        for (uint32_t q = 0; q < rank / 8; q++) {
            cpu_ref_v8d x, y;
            memcpy(&x, rows0[lane] + 8 * q, sizeof x);
            memcpy(&y, rows1[lane] + 8 * q, sizeof y);
            rows[lane][q] = x * y;
            if (width == 3) {
                cpu_ref_v8d z;
                memcpy(&z, rows2[lane] + 8 * q, sizeof z);
                rows[lane][q] = rows[lane][q] * z;
            }
        }
    }
    _Pragma("GCC unroll 4")
    for (uint32_t q = 0; q < rank / 8; q++)
        transpose8_rows((const cpu_ref_v8d(*)[4])rows, q, block + (size_t)q * 64);
    memcpy(block + (size_t)rank * 8, l->values + k, 8 * sizeof(double));
}

/* One block of eight nonzeros from the cache (`block`: R vectors of the
 * eight nonzeros' products, one per r, then their eight values): the
 * eight model values m_k = sum_r a_r p_k(r), in four partial sums (r mod
 * 4) added pairwise, as every m here, and g = x / max(m, epsilon) in one
 * division, into *g (through a pointer: the clones' vector returns would
 * differ in ABI). */
static inline CPU_REF_ALWAYS_INLINE void block_ratio(const double *restrict block,
                                                     const double *a, uint32_t rank,
                                                     double epsilon, cpu_ref_v8d *g)
{
    cpu_ref_v8d m0 = {0.0}, m1 = {0.0}, m2 = {0.0}, m3 = {0.0};
    _Pragma("GCC unroll 32")
    for (uint32_t r = 0; r < rank; r += 4) { /* rank: a multiple of 4 */
        cpu_ref_v8d p0, p1, p2, p3;
        memcpy(&p0, block + (size_t)r * 8, sizeof p0);
        memcpy(&p1, block + (size_t)(r + 1) * 8, sizeof p1);
        memcpy(&p2, block + (size_t)(r + 2) * 8, sizeof p2);
        memcpy(&p3, block + (size_t)(r + 3) * 8, sizeof p3);
        const double a0 = a[r], a1 = a[r + 1], a2 = a[r + 2], a3 = a[r + 3];
        m0 += (cpu_ref_v8d){a0, a0, a0, a0, a0, a0, a0, a0} * p0;
        m1 += (cpu_ref_v8d){a1, a1, a1, a1, a1, a1, a1, a1} * p1;
        m2 += (cpu_ref_v8d){a2, a2, a2, a2, a2, a2, a2, a2} * p2;
        m3 += (cpu_ref_v8d){a3, a3, a3, a3, a3, a3, a3, a3} * p3;
    }
    const cpu_ref_v8d m = (m0 + m1) + (m2 + m3);
    const cpu_ref_v8d floor = {epsilon, epsilon, epsilon, epsilon,
                               epsilon, epsilon, epsilon, epsilon};
    const cpu_ref_v8i above = m > floor; /* false for a NaN m, as m > epsilon */
    cpu_ref_v8i mi, fi;
    memcpy(&mi, &m, sizeof mi);
    memcpy(&fi, &floor, sizeof fi);
    const cpu_ref_v8i chosen = (mi & above) | (fi & ~above);
    cpu_ref_v8d divisor, values;
    memcpy(&divisor, &chosen, sizeof divisor);
    memcpy(&values, block + (size_t)rank * 8, sizeof values);
    *g = values / divisor;
}

/* acc[r] += g p(r) for the block's eight nonzeros, each lane its own sum. */
static inline CPU_REF_ALWAYS_INLINE void block_accumulate(const double *restrict block,
                                                          const cpu_ref_v8d *g, uint32_t rank,
                                                          cpu_ref_v8d *acc)
{
    _Pragma("GCC unroll 32")
    for (uint32_t r = 0; r < rank; r++) {
        cpu_ref_v8d p;
        memcpy(&p, block + (size_t)r * 8, sizeof p);
        acc[r] += *g * p;
    }
}

/* A row's sums from its cached blocks: each block's ratio one block ahead
 * of its accumulation, so that the division's latency overlaps the
 * previous block's sums instead of holding them (the same operations in
 * the same order per sum as block by block). The pointers pass through
 * empty asm so that the compiler loads the target row and the previous
 * block again from L1 rather than keep them in registers that the sums
 * need, spilling both (1.25x the pass on a Zen 5 core). */
static inline CPU_REF_ALWAYS_INLINE void blocks_update(const double *restrict products,
                                                       uint64_t blocks, size_t block_doubles,
                                                       const double *a, uint32_t rank,
                                                       double epsilon, cpu_ref_v8d *acc)
{
    if (blocks == 0)
        return;
    cpu_ref_v8d g, next;
    block_ratio(products, a, rank, epsilon, &g);
    for (uint64_t b = 1; b < blocks; b++) {
        const double *a_b = a;
        __asm__("" : "+r"(a_b));
        block_ratio(products + b * block_doubles, a_b, rank, epsilon, &next);
        const double *previous = products + (b - 1) * block_doubles;
        __asm__("" : "+r"(previous));
        block_accumulate(previous, &g, rank, acc);
        g = next;
    }
    block_accumulate(products + (blocks - 1) * block_doubles, &g, rank, acc);
}

/* The cache in vectors (type VEC of LANES doubles, at most MAX a row;
 * rank LANES * nv): FILL keeps each nonzero's products (formed as
 * ROW_PRODUCT forms them: fill_block, or ROW_PRODUCT itself for the last,
 * short block, whose empty lanes are zero and add nothing) with the values
 * in blocks of eight nonzeros (mu_cache_doubles), every block of the row
 * first, then sums them as USE does (forming and summing interleaved, the
 * sums' sixteen accumulators and the forming's rows competed for the
 * registers); USE runs from them a block at a time
 * (blocks_update): each nonzero's m as generalized_row_v4 forms it, the
 * row's sum in eight lanes (nonzero k in lane k mod 8) added at the end
 * in a fixed order. USE reads R + 1 doubles a nonzero where forming the
 * products gathers N - 1 rows, and needs no horizontal sum per nonzero;
 * its sums differ from the loop's by rounding only, the same on every
 * thread count. */
#define CPU_REF_DEFINE_MULTIPLICATIVE_ROW(NAME, VEC, LANES, MAX, ROW_PRODUCT)                  \
    static inline CPU_REF_ALWAYS_INLINE void NAME(                                            \
        const mode_layout *l, const double *const *other_factors, const uint32_t width,       \
        const uint32_t nv, uint64_t begin, uint64_t end, const double *a, double epsilon,     \
        double *restrict products, const mu_products use, double *restrict phi)               \
    {                                                                                         \
        const uint32_t rank = (LANES) * nv;                                                   \
        const uint64_t n = end - begin, blocks = (n + 7) / 8;                                 \
        const size_t block_doubles = 8 * ((size_t)rank + 1);                                  \
        VEC wa[MAX];                                                                          \
        CPU_REF_UNROLL_V4                                                                     \
        for (uint32_t v = 0; v < nv; v++)                                                     \
            memcpy(&wa[v], a + (LANES) * v, sizeof wa[v]);                                    \
        cpu_ref_v8d acc[(LANES) * (MAX)];                                                     \
        _Pragma("GCC unroll 32")                                                              \
        for (uint32_t r = 0; r < rank; r++)                                                   \
            acc[r] = (cpu_ref_v8d){0.0};                                                      \
        if (use == MU_PRODUCTS_FILL) { /* every block kept, then summed as USE sums them */  \
            const uint64_t whole = n / 8;                                                     \
            for (uint64_t b = 0; b < whole; b++)                                              \
                fill_block(l, other_factors, width, rank, begin + b * 8,                      \
                           products + b * block_doubles);                                     \
            if (whole < blocks) { /* the last, short: its empty lanes zero */                 \
                cpu_ref_v8d rows[8][(LANES) * (MAX) / 8];                                     \
                double values[8];                                                             \
                const uint64_t k = begin + whole * 8;                                         \
                for (uint32_t lane = 0; lane < 8; lane++) {                                   \
                    if (k + lane < end) {                                                     \
                        VEC p[MAX];                                                           \
                        (void)ROW_PRODUCT(l, other_factors, width, nv, k + lane, wa, p);      \
                        memcpy(rows[lane], p, rank * sizeof(double));                         \
                        values[lane] = l->values[k + lane];                                   \
                    } else {                                                                  \
                        memset(rows[lane], 0, rank * sizeof(double));                         \
                        values[lane] = 0.0;                                                   \
                    }                                                                         \
                }                                                                             \
                keep_block(rows, values, rank, products + whole * block_doubles);             \
            }                                                                                 \
        }                                                                                     \
        blocks_update(products, blocks, block_doubles, a, rank, epsilon, acc);                \
        _Pragma("GCC unroll 32")                                                              \
        for (uint32_t r = 0; r < rank; r++) {                                                 \
            const cpu_ref_v8d s = acc[r];                                                     \
            phi[r] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));       \
        }                                                                                     \
    }

CPU_REF_DEFINE_MULTIPLICATIVE_ROW(multiplicative_row_v4, cpu_ref_v4d, 4, CPU_REF_V4_MAX,
                                  row_product_v4)
CPU_REF_DEFINE_MULTIPLICATIVE_ROW(multiplicative_row_v8, cpu_ref_v8d, 8, CPU_REF_V8_MAX,
                                  row_product_v8)

/* One inlined copy a shape: FILL only adds the forming before the sums
 * both run. */
#define CPU_REF_MULTIPLICATIVE_CASE(KERNEL, LANES, W, NV)                                      \
    if (width == (W) && rank == (LANES) * (NV)) {                                              \
        KERNEL(l, other_factors, (W), (NV), begin, end, a, epsilon, products, use, phi);       \
        return;                                                                                \
    }
#endif

/* One row's Phi from the cache, or the cache filled: a vector copy for
 * the shapes generalized_row_body has them for, the scalar loop for the
 * others. */
static inline CPU_REF_ALWAYS_INLINE void
multiplicative_row_body(const mode_layout *l, const double *const *other_factors, uint32_t width,
                        uint32_t rank, uint64_t begin, uint64_t end, const double *a,
                        double epsilon, double *restrict products, mu_products use,
                        double *restrict scratch, double *restrict phi, const bool wide)
{
#if CPU_REF_HAVE_V4
    if (wide) {
        CPU_REF_MULTIPLICATIVE_CASE(multiplicative_row_v8, 8, 2, 1)
        CPU_REF_MULTIPLICATIVE_CASE(multiplicative_row_v8, 8, 2, 2)
        CPU_REF_MULTIPLICATIVE_CASE(multiplicative_row_v8, 8, 2, 4)
        CPU_REF_MULTIPLICATIVE_CASE(multiplicative_row_v8, 8, 3, 1)
        CPU_REF_MULTIPLICATIVE_CASE(multiplicative_row_v8, 8, 3, 2)
        CPU_REF_MULTIPLICATIVE_CASE(multiplicative_row_v8, 8, 3, 4)
    } else {
        CPU_REF_MULTIPLICATIVE_CASE(multiplicative_row_v4, 4, 2, 2)
        CPU_REF_MULTIPLICATIVE_CASE(multiplicative_row_v4, 4, 2, 4)
        CPU_REF_MULTIPLICATIVE_CASE(multiplicative_row_v4, 4, 2, 8)
        CPU_REF_MULTIPLICATIVE_CASE(multiplicative_row_v4, 4, 3, 2)
        CPU_REF_MULTIPLICATIVE_CASE(multiplicative_row_v4, 4, 3, 4)
        CPU_REF_MULTIPLICATIVE_CASE(multiplicative_row_v4, 4, 3, 8)
    }
#else
    (void)wide;
#endif
    multiplicative_row_scalar(l, other_factors, width, rank, begin, end, a, epsilon, products,
                              use, scratch, phi);
}

CPU_REF_VECTOR_CLONES
static void multiplicative_row_narrow(const mode_layout *l, const double *const *other_factors,
                                      uint32_t width, uint32_t rank, uint64_t begin, uint64_t end,
                                      const double *a, double epsilon, double *restrict products,
                                      mu_products use, double *restrict scratch,
                                      double *restrict phi)
{
    multiplicative_row_body(l, other_factors, width, rank, begin, end, a, epsilon, products, use,
                            scratch, phi, false);
}

#if CPU_REF_WIDE
__attribute__((target("arch=x86-64-v4"))) static void
multiplicative_row_wide(const mode_layout *l, const double *const *other_factors, uint32_t width,
                        uint32_t rank, uint64_t begin, uint64_t end, const double *a,
                        double epsilon, double *restrict products, mu_products use,
                        double *restrict scratch, double *restrict phi)
{
    multiplicative_row_body(l, other_factors, width, rank, begin, end, a, epsilon, products, use,
                            scratch, phi, true);
}
#endif

void multiplicative_row_phi(const mode_layout *l, const double *const *other_factors,
                            uint32_t width, uint32_t rank, uint64_t begin, uint64_t end,
                            const double *a, double epsilon, double *restrict products,
                            mu_products use, bool wide, double *restrict scratch,
                            double *restrict phi)
{
    if (use == MU_PRODUCTS_NONE) {
        multiplicative_row_formed(l, other_factors, width, rank, begin, end, a, epsilon, wide,
                                  scratch, phi);
        return;
    }
#if CPU_REF_WIDE
    if (wide) {
        multiplicative_row_wide(l, other_factors, width, rank, begin, end, a, epsilon, products,
                                use, scratch, phi);
        return;
    }
#else
    (void)wide;
#endif
    multiplicative_row_narrow(l, other_factors, width, rank, begin, end, a, epsilon, products,
                              use, scratch, phi);
}
