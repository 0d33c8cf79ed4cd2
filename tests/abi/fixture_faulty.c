/* Plugins that load fine but break one conformance rule each, so the
 * checker's tests can see it FAIL (or SKIP) exactly that check. Built once
 * per fault, with -DFAULT_<NAME>:
 *   FAULT_WRONG_MTTKRP     results are 1% too large (a plausible scaling bug);
 *   FAULT_LENIENT_OPTIONS  create() ignores unknown options instead of naming them;
 *   FAULT_NO_DEVICE        create() reports TH_ERR_NO_DEVICE, like a GPU
 *                          backend on a machine without a GPU;
 *   FAULT_WRONG_INIT       init_factors (ABI 1.3) draws its values through
 *                          float, so an f64 backend holds factors other than
 *                          set_factor would (its Grams are those of what it
 *                          holds, so only the factors are wrong);
 *   FAULT_HALF_GENERALIZED factor_update (ABI 1.4) without generalized_mttkrp:
 *                          the host needs both for models beyond least squares;
 *   FAULT_HALF_COMPLETION  a correct row_least_squares (ABI 1.5) without
 *                          generalized_mttkrp: the host needs both for tensor
 *                          completion (its numbers pass, the pairing fails);
 *   FAULT_WRONG_COMPLETION the same, but a singular row is zeroed instead of
 *                          left as it was (a plausible reading of "no
 *                          solution"), so the ridge-0 cases fail too. */
#if defined(FAULT_WRONG_MTTKRP)
#define FIXTURE_ID "fixture_wrong_mttkrp"
#elif defined(FAULT_LENIENT_OPTIONS)
#define FIXTURE_ID "fixture_lenient_options"
#elif defined(FAULT_NO_DEVICE)
#define FIXTURE_ID "fixture_no_device"
#elif defined(FAULT_WRONG_INIT)
#define FIXTURE_ID "fixture_wrong_init"
#elif defined(FAULT_HALF_GENERALIZED)
#define FIXTURE_ID "fixture_half_generalized"
#elif defined(FAULT_HALF_COMPLETION)
#define FIXTURE_ID "fixture_half_completion"
#elif defined(FAULT_WRONG_COMPLETION)
#define FIXTURE_ID "fixture_wrong_completion"
#define FAULT_HALF_COMPLETION
#else
#error "define one FAULT_* macro"
#endif
#include "fixture_common.h"
#if defined(FAULT_WRONG_INIT) || defined(FAULT_HALF_COMPLETION)
#include "fixture_algebra.h"
#endif

static th_status faulty_create(const th_option *options, uint32_t n_options,
                               const th_host_services *host, th_instance **out, char *err)
{
#if defined(FAULT_LENIENT_OPTIONS)
    (void)options;
    n_options = 0; /* the bug: unknown keys silently dropped */
#elif defined(FAULT_NO_DEVICE)
    (void)options, (void)n_options, (void)host, (void)out;
    return th_plugin_fail(err, TH_ERR_NO_DEVICE, FIXTURE_ID ": no CUDA device (simulated)");
#endif
    return fixture_create(options, n_options, host, out, err);
}

static th_status faulty_mttkrp(th_instance *inst, uint32_t mode, char *err)
{
    th_status status = fixture_mttkrp(inst, mode, err);
#if defined(FAULT_WRONG_MTTKRP)
    if (status == TH_OK)
        for (size_t i = 0; i < (size_t)inst->dims[mode] * inst->rank; i++)
            inst->results[mode][i] *= 1.01;
#endif
    return status;
}

#if defined(FAULT_WRONG_INIT)
static th_status faulty_init_factors(th_instance *inst, th_init_factors_io *io, char *err)
{
    if (!inst->loaded)
        return th_plugin_fail(err, TH_ERR_BAD_STATE, "init_factors: no tensor loaded");
    if (io->struct_size < TH_INIT_FACTORS_IO_V1_3_SIZE || io->nmodes != inst->nmodes ||
        io->grams == NULL)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "init_factors: bad io");
    const uint32_t rank = inst->rank;
    for (uint32_t m = 0; m < inst->nmodes; m++) {
        double *a = inst->factors[m];
        for (uint32_t i = 0; i < inst->dims[m]; i++)
            for (uint32_t r = 0; r < rank; r++) /* the bug: rounded to float */
                a[(size_t)i * rank + r] = (float)th_initial_factor_value(io->seed, m, i, r);
        fixture_gram(a, inst->dims[m], rank, io->grams[m]);
    }
    return TH_OK;
}
#endif

#if defined(FAULT_HALF_GENERALIZED)
static th_status faulty_factor_update(th_instance *inst, th_factor_update_io *io, char *err)
{
    (void)inst, (void)io;
    return th_plugin_fail(err, TH_ERR_UNSUPPORTED, "factor_update: never called by the checker");
}
#endif

#if defined(FAULT_HALF_COMPLETION)
static th_status check_rls_io(const th_instance *inst, const th_row_least_squares_io *io,
                              char *err)
{
    if (!inst->loaded)
        return th_plugin_fail(err, TH_ERR_BAD_STATE, "row_least_squares: no tensor loaded");
    if (io == NULL || io->struct_size < TH_ROW_LEAST_SQUARES_IO_V1_5_SIZE ||
        io->mode >= inst->nmodes || !isfinite(io->ridge) || io->ridge < 0.0 ||
        io->nonneg > 1 || (io->nonneg == 1 && io->passes == 0))
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "row_least_squares: bad io");
    return TH_OK;
}

/* V = sum h h^T + ridge I and b = sum x h over the nonzeros of `row` of
 * `mode` (a scan of all of them); returns how many. */
static uint64_t row_normal_equations(const th_instance *inst, uint32_t mode, uint32_t row,
                                     double ridge, double *v, double *b)
{
    const uint32_t n = inst->nmodes, rank = inst->rank;
    double h[256];
    uint64_t count = 0;
    memset(v, 0, (size_t)rank * rank * sizeof *v);
    memset(b, 0, rank * sizeof *b);
    for (uint64_t k = 0; k < inst->nnz; k++) {
        const uint32_t *idx = inst->indices + k * n;
        if (idx[mode] != row)
            continue;
        count++;
        for (uint32_t r = 0; r < rank; r++) {
            h[r] = 1.0;
            for (uint32_t m = 0; m < n; m++)
                if (m != mode)
                    h[r] *= inst->factors[m][(size_t)idx[m] * rank + r];
        }
        for (uint32_t r = 0; r < rank; r++) {
            b[r] += inst->values[k] * h[r];
            for (uint32_t s = 0; s < rank; s++)
                v[(size_t)r * rank + s] += h[r] * h[s];
        }
    }
    for (uint32_t r = 0; r < rank; r++)
        v[(size_t)r * rank + r] += ridge;
    return count;
}

/* plugin.h's coordinate descent, as it states it. */
static void descend(const double *v, const double *b, uint32_t rank, uint32_t passes, double *a)
{
    for (uint32_t pass = 0; pass < passes; pass++)
        for (uint32_t r = 0; r < rank; r++) {
            const double d = v[(size_t)r * rank + r];
            double va = 0.0;
            for (uint32_t s = 0; s < rank; s++)
                va += v[(size_t)r * rank + s] * a[s];
            a[r] = d == 0.0 ? 0.0 : fmax(0.0, a[r] + (b[r] - va) / d);
        }
}

static th_status faulty_row_least_squares(th_instance *inst, th_row_least_squares_io *io,
                                          char *err)
{
    th_status status = check_rls_io(inst, io, err);
    if (status != TH_OK)
        return status;
    const uint32_t rank = inst->rank;
    double *v = malloc((size_t)rank * rank * sizeof *v), b[256];
    if (v == NULL)
        return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY, "out of memory");
    io->singular_rows = io->empty_rows = 0;
    io->factor_norm_squared = 0.0;
    for (uint32_t row = 0; row < inst->dims[io->mode]; row++) {
        double *a = inst->factors[io->mode] + (size_t)row * rank;
        if (row_normal_equations(inst, io->mode, row, io->ridge, v, b) == 0) {
            io->empty_rows++;
            if (io->ridge > 0.0)
                memset(a, 0, rank * sizeof *a);
        } else if (io->nonneg) {
            descend(v, b, rank, io->passes, a);
        } else if (fixture_cholesky(v, rank, TH_SOLVE_BREAKDOWN_FACTOR)) {
            fixture_cholesky_solve(v, rank, b);
            memcpy(a, b, rank * sizeof *a);
        } else {
            io->singular_rows++;
#if defined(FAULT_WRONG_COMPLETION)
            memset(a, 0, rank * sizeof *a); /* the bug: the row must be left as it was */
#endif
        }
        for (uint32_t r = 0; r < rank; r++)
            io->factor_norm_squared += a[r] * a[r];
    }
    free(v);
    /* residual_squared directly, from the factors as they are now. */
    io->residual_squared = 0.0;
    for (uint64_t k = 0; k < inst->nnz; k++) {
        const uint32_t *idx = inst->indices + k * inst->nmodes;
        double model = 0.0;
        for (uint32_t r = 0; r < rank; r++) {
            double h = 1.0;
            for (uint32_t m = 0; m < inst->nmodes; m++)
                h *= inst->factors[m][(size_t)idx[m] * rank + r];
            model += h;
        }
        const double e = inst->values[k] - model;
        io->residual_squared += e * e;
    }
    return TH_OK;
}
#endif

TH_PLUGIN_EXPORT const th_plugin_entry tensorhost_plugin_entry = {
    TH_PLUGIN_ENTRY_HEADER,
    .get_info = fixture_get_info,
    .create = faulty_create,
    .destroy = fixture_destroy,
    .load_tensor = fixture_load_tensor,
    .set_factor = fixture_set_factor,
    .get_factor = fixture_get_factor,
    .mttkrp = faulty_mttkrp,
    .get_mttkrp_result = fixture_get_mttkrp_result,
#if defined(FAULT_WRONG_INIT)
    .init_factors = faulty_init_factors,
#endif
#if defined(FAULT_HALF_GENERALIZED)
    .factor_update = faulty_factor_update,
#endif
#if defined(FAULT_HALF_COMPLETION)
    .row_least_squares = faulty_row_least_squares,
#endif
};
