/* example-minimal: the smallest complete tensorhost backend.
 *
 * A plain, single-threaded CPU MTTKRP over a copy of the host's coordinate
 * (COO) tensor. It implements the required functions of the ABI, so the host
 * does the CP-ALS update itself, and the two of ABI 1.4 that models other
 * than least squares (CP-APR, Poisson) run on: generalized_mttkrp and
 * factor_update. It leaves out ABI 1.5's optional row_least_squares, so the
 * host runs no tensor completion on it. Read it top to bottom with
 * docs/plugin-guide.md; <tensorhost/plugin.h> is the contract. */
#include <tensorhost/plugin.h>
#include <tensorhost/plugin_sdk.h>

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXAMPLE_ID "example-minimal"
#define EXAMPLE_MAX_MODES 16u

/* One instance: everything the backend holds between calls. */
struct th_instance {
    uint32_t nmodes, rank; /* 0 until load_tensor() succeeds */
    uint64_t nnz;
    uint32_t dims[EXAMPLE_MAX_MODES];
    uint32_t *indices[EXAMPLE_MAX_MODES]; /* [nnz] each: our copy, the host's is borrowed */
    double *values;                       /* [nnz] */
    double *factors[EXAMPLE_MAX_MODES];   /* [dims[m] * rank] each, row-major */
    double *results[EXAMPLE_MAX_MODES];   /* latest MTTKRP of each mode, same shape */
    bool has_result[EXAMPLE_MAX_MODES];   /* whether results[m] was computed yet */
};

static const th_plugin_info example_info = {
    .struct_size = sizeof(th_plugin_info),
    .flags = 0, /* no als_update, no GPU */
    .id = EXAMPLE_ID,
    .name = "Minimal example backend",
    .version = "1.0.0",
    .description = "Single-threaded COO MTTKRP, the SDK's example plugin.",
    .max_modes = EXAMPLE_MAX_MODES,
    .max_rank = 4096,
    .value_type = TH_VALUE_F64,
};

static const th_plugin_info *example_get_info(void)
{
    return &example_info;
}

/* This backend has no options, so every key is unknown: refuse it by name
 * rather than ignore it, or a typo in the user's config goes unnoticed. */
static th_status example_create(const th_option *options, uint32_t n_options,
                                const th_host_services *host, th_instance **out, char *err)
{
    (void)host; /* a backend with something to say would call host->log */
    if (n_options > 0)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                    "unknown option '%s' (" EXAMPLE_ID " accepts no options)", options[0].key);
    *out = calloc(1, sizeof **out);
    return *out ? TH_OK : th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY, "out of memory");
}

/* Frees the tensor copy, factors and results; the instance stays usable. */
static void release_tensor(th_instance *inst)
{
    for (uint32_t m = 0; m < EXAMPLE_MAX_MODES; m++) {
        free(inst->indices[m]);
        free(inst->factors[m]);
        free(inst->results[m]);
    }
    free(inst->values);
    memset(inst, 0, sizeof *inst);
}

static void example_destroy(th_instance *inst)
{
    if (inst != NULL) { /* the ABI says destroy() accepts NULL */
        release_tensor(inst);
        free(inst);
    }
}

/* Copies the borrowed tensor and allocates a factor and a result per mode. */
static th_status example_load_tensor(th_instance *inst, const th_coo_tensor *t, uint32_t rank,
                                     char *err)
{
    if (t->nmodes > EXAMPLE_MAX_MODES)
        return th_plugin_fail(err, TH_ERR_UNSUPPORTED, "%u modes: at most %u", t->nmodes, EXAMPLE_MAX_MODES);
    if (rank < 1 || rank > example_info.max_rank)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "rank %u: expected 1 to %u", rank,
                    example_info.max_rank);
    release_tensor(inst); /* load_tensor() replaces any earlier tensor */

    int ok = (inst->values = malloc(t->nnz * sizeof(double))) != NULL;
    for (uint32_t m = 0; m < t->nmodes && ok; m++) {
        inst->indices[m] = malloc(t->nnz * sizeof(uint32_t));
        inst->factors[m] = calloc((size_t)t->dims[m] * rank, sizeof(double));
        inst->results[m] = calloc((size_t)t->dims[m] * rank, sizeof(double));
        ok = inst->indices[m] && inst->factors[m] && inst->results[m];
        if (ok)
            memcpy(inst->indices[m], t->indices[m], t->nnz * sizeof(uint32_t));
    }
    if (!ok) {
        release_tensor(inst);
        return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY, "out of memory at rank %u", rank);
    }
    memcpy(inst->values, t->values, t->nnz * sizeof(double));
    memcpy(inst->dims, t->dims, t->nmodes * sizeof(uint32_t));
    inst->nmodes = t->nmodes;
    inst->rank = rank;
    inst->nnz = t->nnz;
    return TH_OK;
}

/* Every per-mode call needs a loaded tensor and a valid mode. */
static th_status check_mode(const th_instance *inst, uint32_t mode, const char *call, char *err)
{
    if (inst->nmodes == 0)
        return th_plugin_fail(err, TH_ERR_BAD_STATE, "%s: no tensor loaded (call load_tensor first)", call);
    if (mode >= inst->nmodes)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "%s: mode %u out of range (tensor has %u)",
                    call, mode, inst->nmodes);
    return TH_OK;
}

/* The three copies below move one dims[mode] x rank row-major matrix. */
#define MATRIX_BYTES(inst, mode) ((size_t)(inst)->dims[mode] * (inst)->rank * sizeof(double))

static th_status example_set_factor(th_instance *inst, uint32_t mode, const double *data,
                                    char *err)
{
    th_status status = check_mode(inst, mode, "set_factor", err);
    if (status == TH_OK)
        memcpy(inst->factors[mode], data, MATRIX_BYTES(inst, mode));
    return status;
}

static th_status example_get_factor(th_instance *inst, uint32_t mode, double *data, char *err)
{
    th_status status = check_mode(inst, mode, "get_factor", err);
    if (status == TH_OK)
        memcpy(data, inst->factors[mode], MATRIX_BYTES(inst, mode));
    return status;
}

/* M(i_mode, r) = sum over nonzeros x(i_1..i_N) of x * prod_{m != mode} A_m(i_m, r). */
static th_status example_mttkrp(th_instance *inst, uint32_t mode, char *err)
{
    th_status status = check_mode(inst, mode, "mttkrp", err);
    if (status != TH_OK)
        return status;
    uint32_t rank = inst->rank;
    memset(inst->results[mode], 0, MATRIX_BYTES(inst, mode));
    for (uint64_t k = 0; k < inst->nnz; k++) {
        double *row = inst->results[mode] + (size_t)inst->indices[mode][k] * rank;
        for (uint32_t r = 0; r < rank; r++) {
            double term = inst->values[k];
            for (uint32_t m = 0; m < inst->nmodes; m++)
                if (m != mode)
                    term *= inst->factors[m][(size_t)inst->indices[m][k] * rank + r];
            row[r] += term;
        }
    }
    inst->has_result[mode] = true;
    return TH_OK;
}

static th_status example_get_mttkrp_result(th_instance *inst, uint32_t mode, double *data,
                                           char *err)
{
    th_status status = check_mode(inst, mode, "get_mttkrp_result", err);
    if (status == TH_OK)
        memcpy(data, inst->results[mode], MATRIX_BYTES(inst, mode));
    return status;
}

/* ---- ABI 1.4: generalized_mttkrp and factor_update ----------------------- */

/* The model's value at nonzero k: m = sum_r w_r prod_m A_m(i_m, r). */
static double model_at(const th_instance *inst, uint64_t k, const double *weights)
{
    double sum = 0.0;
    for (uint32_t r = 0; r < inst->rank; r++) {
        double term = weights ? weights[r] : 1.0;
        for (uint32_t m = 0; m < inst->nmodes; m++)
            term *= inst->factors[m][(size_t)inst->indices[m][k] * inst->rank + r];
        sum += term;
    }
    return sum;
}

/* G(j, r) = sum over nonzeros with i_mode = j of g(x, m) prod_{m' != mode} A_m'(i_m', r),
 * reduced = sum over all nonzeros of h(x, m). */
static th_status example_generalized_mttkrp(th_instance *inst, th_generalized_mttkrp_io *io,
                                            char *err)
{
    if (inst->nmodes == 0)
        return th_plugin_fail(err, TH_ERR_BAD_STATE, "generalized_mttkrp: no tensor loaded");
    /* Passed in: refuse only a struct shorter than the version that brought it. */
    if (io->struct_size < TH_GENERALIZED_MTTKRP_IO_V1_4_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "generalized_mttkrp: io.struct_size %u is too short", io->struct_size);
    const uint32_t mode = io->mode;
    const bool has_mode = mode != TH_MODE_NONE;
    if (has_mode && mode >= inst->nmodes)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "generalized_mttkrp: io.mode %u out of range (tensor has %u)", mode,
                              inst->nmodes);
    const int32_t g = io->elementwise, h = io->reduction;
    if (has_mode && g != TH_ELEMENTWISE_VALUE && g != TH_ELEMENTWISE_POISSON_RATIO &&
        g != TH_ELEMENTWISE_RESIDUAL)
        return th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                              "generalized_mttkrp: io.elementwise %d unknown", (int)g);
    if (h < TH_REDUCTION_NONE || h > TH_REDUCTION_INNER_PRODUCT)
        return th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                              "generalized_mttkrp: io.reduction %d unknown", (int)h);
    if (has_mode && g == TH_ELEMENTWISE_POISSON_RATIO && !(io->epsilon > 0.0))
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "generalized_mttkrp: io.epsilon %g must be > 0", io->epsilon);

    const uint32_t rank = inst->rank;
    if (has_mode)
        memset(inst->results[mode], 0, MATRIX_BYTES(inst, mode));
    double reduced = 0.0;
    for (uint64_t k = 0; k < inst->nnz; k++) {
        const double x = inst->values[k];
        const bool needs_m = h != TH_REDUCTION_NONE || (has_mode && g != TH_ELEMENTWISE_VALUE);
        const double m = needs_m ? model_at(inst, k, io->weights) : 0.0;
        if (h == TH_REDUCTION_POISSON_LOG_LIKELIHOOD && x != 0.0)
            reduced += x * (m > 0.0 ? log(m) : -INFINITY);
        else if (h == TH_REDUCTION_SQUARED_RESIDUAL)
            reduced += (m - x) * (m - x);
        else if (h == TH_REDUCTION_INNER_PRODUCT)
            reduced += x * m;
        if (!has_mode)
            continue;
        const double value = g == TH_ELEMENTWISE_VALUE          ? x
                             : g == TH_ELEMENTWISE_POISSON_RATIO ? x / fmax(m, io->epsilon)
                                                                 : m - x;
        double *row = inst->results[mode] + (size_t)inst->indices[mode][k] * rank;
        for (uint32_t r = 0; r < rank; r++) {
            double term = value;
            for (uint32_t n = 0; n < inst->nmodes; n++)
                if (n != mode)
                    term *= inst->factors[n][(size_t)inst->indices[n][k] * rank + r];
            row[r] += term;
        }
    }
    if (has_mode)
        inst->has_result[mode] = true;
    io->reduced = reduced; /* an out-field within the size checked above */
    return TH_OK;
}

/* One elementwise operation on factor A = A_mode, with Phi its latest result. */
static th_status example_factor_update(th_instance *inst, th_factor_update_io *io, char *err)
{
    if (io->struct_size < TH_FACTOR_UPDATE_IO_V1_4_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "factor_update: io.struct_size %u is too short", io->struct_size);
    th_status status = check_mode(inst, io->mode, "factor_update", err);
    if (status != TH_OK)
        return status;
    const uint32_t rank = inst->rank;
    const size_t rows = inst->dims[io->mode], cells = rows * rank;
    double *a = inst->factors[io->mode];
    const double *phi = inst->results[io->mode];
    switch (io->operation) {
    case TH_FACTOR_SCALE_COLUMNS: /* A(:, r) *= vector[r] */
    case TH_FACTOR_NORMALIZE_1:   /* vector[r] <- sum_i |A(i, r)|; A(:, r) /= it where > 0 */
        if (io->vector == NULL)
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "factor_update: io.vector is NULL");
        if (io->operation == TH_FACTOR_NORMALIZE_1)
            for (uint32_t r = 0; r < rank; r++) {
                io->vector[r] = 0.0;
                for (size_t i = 0; i < rows; i++)
                    io->vector[r] += fabs(a[i * rank + r]);
            }
        for (size_t k = 0; k < cells; k++) {
            const double v = io->vector[k % rank];
            if (io->operation == TH_FACTOR_SCALE_COLUMNS)
                a[k] *= v;
            else if (v > 0.0)
                a[k] /= v;
        }
        return TH_OK;
    case TH_FACTOR_MULTIPLICATIVE_UPDATE:
    case TH_FACTOR_RAISE_INADMISSIBLE_ZEROS:
        if (!inst->has_result[io->mode]) /* both read Phi */
            return th_plugin_fail(err, TH_ERR_BAD_STATE,
                                  "factor_update: mode %u has no MTTKRP result yet", io->mode);
        break;
    default:
        return th_plugin_fail(err, TH_ERR_UNSUPPORTED, "factor_update: io.operation %d unknown",
                              (int)io->operation);
    }
    if (io->operation == TH_FACTOR_MULTIPLICATIVE_UPDATE) {
        /* CP-APR: the KKT violation of A, then A .*= Phi unless already converged. */
        double violation = 0.0;
        for (size_t k = 0; k < cells; k++)
            violation = fmax(violation, fabs(fmin(a[k], 1.0 - phi[k])));
        io->violation = violation;
        io->count = violation >= io->tolerance;
        if (io->count)
            for (size_t k = 0; k < cells; k++)
                a[k] *= phi[k];
    } else {
        /* CP-APR: lift entries stuck at zero where the gradient says grow. */
        io->count = 0;
        for (size_t k = 0; k < cells; k++)
            if (phi[k] > io->threshold && a[k] < io->tolerance) {
                a[k] += io->offset;
                io->count++;
            }
    }
    return TH_OK;
}

/* The one exported symbol. Optional functions left out are NULL. */
TH_PLUGIN_EXPORT const th_plugin_entry tensorhost_plugin_entry = {
    TH_PLUGIN_ENTRY_HEADER,
    .get_info = example_get_info,
    .create = example_create,
    .destroy = example_destroy,
    .load_tensor = example_load_tensor,
    .set_factor = example_set_factor,
    .get_factor = example_get_factor,
    .mttkrp = example_mttkrp,
    .get_mttkrp_result = example_get_mttkrp_result,
    .generalized_mttkrp = example_generalized_mttkrp,
    .factor_update = example_factor_update,
};
