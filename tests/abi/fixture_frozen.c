/* Plugins exactly as a third party would have written them against ABI 1.0,
 * 1.1, 1.2, 1.3, 1.4 and 1.5: compiled against a frozen copy of that version's header
 * (frozen/v1.N, named by TH_ABI_HEADER), never the current one. Every later
 * host must keep loading them and computing with them; test_abi_frozen and
 * the conformance checker prove that.
 *
 * Built once per frozen header. Against 1.0 it implements the required
 * functions plus get_runtime_info and get_mode_info, whose out-structs are
 * sized by the host, so the "write only what fits both sizes" rule is
 * exercised across versions. Against 1.1 it adds what a 1.1 author would:
 * als_update and als_sweep, with the TH_CAP_* flags that 1.1 hosts demand,
 * and the struct-size checks that header allowed (its own sizeof()).
 * Against 1.2 it checks sizes by the version size macros instead, as that
 * header's growth rule says, and reports its sweep time in
 * th_runtime_info.last_sweep_seconds. None of those has init_factors (1.3),
 * so a later host draws their initial factors itself and uploads them.
 * Against 1.3 it adds init_factors, the formula written out from that
 * header's words (a frozen header has no SDK beside it). None of those has
 * 1.4's generalized_mttkrp or factor_update, so a later host runs only
 * least squares on them. Against 1.4 it adds both, naive loops over the
 * nonzeros written from that header's formulas, so a later host runs the
 * Poisson model on it too. None of those has 1.5's row_least_squares, so
 * no host runs tensor completion on them. Against 1.5 it adds
 * row_least_squares and als_update_nonneg, each row's normal equations and
 * the hierarchical ALS passes written from that header's words, so a later
 * host runs completion and nonnegative CP with every update in it; it
 * cannot see 1.6's ridge, l1 or unbounded, which a later host therefore
 * never sets for it.
 * A section is added for a version when its header is frozen; what a
 * version's build compiles never changes. */
#include TH_ABI_HEADER /* a frozen header, by absolute path */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if TH_ABI_VERSION_MINOR == 0
#define FROZEN_ID "fixture_frozen_v1_0"
#define FROZEN_ABI "1.0"
#define FROZEN_FLAGS 0u
#elif TH_ABI_VERSION_MINOR == 1
#define FROZEN_ID "fixture_frozen_v1_1"
#define FROZEN_ABI "1.1"
#define FROZEN_FLAGS ((uint32_t)(TH_CAP_ALS_UPDATE | TH_CAP_ALS_SWEEP))
#include <float.h>
#include <math.h>

#include "fixture_algebra.h"
#elif TH_ABI_VERSION_MINOR == 2
#define FROZEN_ID "fixture_frozen_v1_2"
#define FROZEN_ABI "1.2"
#define FROZEN_FLAGS ((uint32_t)(TH_CAP_ALS_UPDATE | TH_CAP_ALS_SWEEP))
#include <float.h>
#include <math.h>
#include <time.h>

#include "fixture_algebra.h"
#elif TH_ABI_VERSION_MINOR == 3
#define FROZEN_ID "fixture_frozen_v1_3"
#define FROZEN_ABI "1.3"
#define FROZEN_FLAGS ((uint32_t)(TH_CAP_ALS_UPDATE | TH_CAP_ALS_SWEEP))
#include <float.h>
#include <math.h>
#include <time.h>

#include "fixture_algebra.h"
#elif TH_ABI_VERSION_MINOR == 4
#define FROZEN_ID "fixture_frozen_v1_4"
#define FROZEN_ABI "1.4"
#define FROZEN_FLAGS ((uint32_t)(TH_CAP_ALS_UPDATE | TH_CAP_ALS_SWEEP))
#include <float.h>
#include <math.h>
#include <time.h>

#include "fixture_algebra.h"
#elif TH_ABI_VERSION_MINOR == 5
#define FROZEN_ID "fixture_frozen_v1_5"
#define FROZEN_ABI "1.5"
#define FROZEN_FLAGS ((uint32_t)(TH_CAP_ALS_UPDATE | TH_CAP_ALS_SWEEP))
#include <float.h>
#include <math.h>
#include <time.h>

#include "fixture_algebra.h"
#else
#error "build this fixture against a frozen header (tests/abi/frozen/v1.N)"
#endif

/* The shortest in-struct accepted: before 1.2 the header offered only the
 * plugin's own sizeof(); from 1.2 on, the size of the version that
 * introduced the fields read (plugin.h, "Growth"). */
#if TH_ABI_VERSION_MINOR >= 2
#define FROZEN_MIN_SIZE(type, version_size) ((size_t)(version_size))
#else
#define FROZEN_MIN_SIZE(type, version_size) sizeof(type)
#endif

struct th_instance {
    uint32_t nmodes, rank;
    uint64_t nnz;
    uint32_t *dims;
    uint32_t *indices; /* [nnz * nmodes], nonzero-major */
    double *values;
    double *factors[16];
    double *results[16];
#if TH_ABI_VERSION_MINOR >= 2
    double last_sweep_seconds; /* negative before the first sweep */
#endif
#if TH_ABI_VERSION_MINOR >= 4
    int result_ready[16]; /* factor_update's operations on Phi need one */
#endif
};

static const th_plugin_info frozen_info = {
    .struct_size = sizeof(th_plugin_info),
    .flags = FROZEN_FLAGS,
    .id = FROZEN_ID,
    .name = "ABI " FROZEN_ABI " compatibility fixture",
    .version = FROZEN_ABI ".0",
    .description = "A plugin built against the frozen ABI " FROZEN_ABI " header.",
    .max_modes = 16,
    .max_rank = 1024,
    .value_type = TH_VALUE_F64,
};

static th_status fail(char *err, th_status status, const char *message)
{
    snprintf(err, TH_ERROR_SIZE, "%s: %s", FROZEN_ID, message);
    return status;
}

static const th_plugin_info *frozen_get_info(void)
{
    return &frozen_info;
}

static th_status frozen_create(const th_option *options, uint32_t n_options,
                               const th_host_services *host, th_instance **out, char *err)
{
    (void)host;
    if (n_options > 0) {
        snprintf(err, TH_ERROR_SIZE, "unknown option '%s' (" FROZEN_ID " accepts none)",
                 options[0].key);
        return TH_ERR_INVALID_ARGUMENT;
    }
    *out = calloc(1, sizeof **out);
#if TH_ABI_VERSION_MINOR >= 2
    if (*out)
        (*out)->last_sweep_seconds = -1.0;
#endif
    return *out ? TH_OK : fail(err, TH_ERR_OUT_OF_MEMORY, "out of memory");
}

static void release(th_instance *inst)
{
    for (uint32_t m = 0; m < inst->nmodes; m++) {
        free(inst->factors[m]);
        free(inst->results[m]);
    }
    free(inst->dims);
    free(inst->indices);
    free(inst->values);
    memset(inst, 0, sizeof *inst);
#if TH_ABI_VERSION_MINOR >= 2
    inst->last_sweep_seconds = -1.0;
#endif
}

static void frozen_destroy(th_instance *inst)
{
    if (inst != NULL) {
        release(inst);
        free(inst);
    }
}

static th_status frozen_load_tensor(th_instance *inst, const th_coo_tensor *t, uint32_t rank,
                                    char *err)
{
    if (t->nmodes > frozen_info.max_modes)
        return fail(err, TH_ERR_UNSUPPORTED, "too many modes");
    if (rank < 1 || rank > frozen_info.max_rank)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "rank out of range");
    release(inst);
    uint32_t n = t->nmodes;
    inst->dims = malloc(n * sizeof *inst->dims);
    inst->indices = malloc(t->nnz * n * sizeof *inst->indices);
    inst->values = malloc(t->nnz * sizeof *inst->values);
    if (!inst->dims || !inst->indices || !inst->values) {
        release(inst);
        return fail(err, TH_ERR_OUT_OF_MEMORY, "out of memory");
    }
    inst->nmodes = n;
    inst->rank = rank;
    inst->nnz = t->nnz;
    memcpy(inst->dims, t->dims, n * sizeof *inst->dims);
    memcpy(inst->values, t->values, t->nnz * sizeof *inst->values);
    for (uint64_t k = 0; k < t->nnz; k++)
        for (uint32_t m = 0; m < n; m++)
            inst->indices[k * n + m] = t->indices[m][k];
    for (uint32_t m = 0; m < n; m++) {
        inst->factors[m] = calloc((size_t)t->dims[m] * rank, sizeof(double));
        inst->results[m] = calloc((size_t)t->dims[m] * rank, sizeof(double));
        if (!inst->factors[m] || !inst->results[m]) {
            release(inst);
            return fail(err, TH_ERR_OUT_OF_MEMORY, "out of memory");
        }
    }
    return TH_OK;
}

static th_status check_mode(const th_instance *inst, uint32_t mode, char *err)
{
    if (inst->nmodes == 0)
        return fail(err, TH_ERR_BAD_STATE, "no tensor loaded");
    if (mode >= inst->nmodes)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "mode out of range");
    return TH_OK;
}

static th_status frozen_set_factor(th_instance *inst, uint32_t mode, const double *data,
                                   char *err)
{
    th_status status = check_mode(inst, mode, err);
    if (status == TH_OK)
        memcpy(inst->factors[mode], data, (size_t)inst->dims[mode] * inst->rank * sizeof *data);
    return status;
}

static th_status frozen_get_factor(th_instance *inst, uint32_t mode, double *data, char *err)
{
    th_status status = check_mode(inst, mode, err);
    if (status == TH_OK)
        memcpy(data, inst->factors[mode], (size_t)inst->dims[mode] * inst->rank * sizeof *data);
    return status;
}

static th_status frozen_mttkrp(th_instance *inst, uint32_t mode, char *err)
{
    th_status status = check_mode(inst, mode, err);
    if (status != TH_OK)
        return status;
    uint32_t n = inst->nmodes, rank = inst->rank;
    double *out = inst->results[mode];
    memset(out, 0, (size_t)inst->dims[mode] * rank * sizeof *out);
    for (uint64_t k = 0; k < inst->nnz; k++)
        for (uint32_t r = 0; r < rank; r++) {
            double term = inst->values[k];
            for (uint32_t m = 0; m < n; m++)
                if (m != mode)
                    term *= inst->factors[m][(size_t)inst->indices[k * n + m] * rank + r];
            out[(size_t)inst->indices[k * n + mode] * rank + r] += term;
        }
#if TH_ABI_VERSION_MINOR >= 4
    inst->result_ready[mode] = 1;
#endif
    return TH_OK;
}

static th_status frozen_get_mttkrp_result(th_instance *inst, uint32_t mode, double *data,
                                          char *err)
{
    th_status status = check_mode(inst, mode, err);
    if (status == TH_OK)
        memcpy(data, inst->results[mode], (size_t)inst->dims[mode] * inst->rank * sizeof *data);
    return status;
}

/* The host's struct may be larger (a newer minor) or, in principle, smaller:
 * fill a full local copy and hand over only the bytes both sides know. */
static th_status frozen_get_runtime_info(th_instance *inst, th_runtime_info *info, char *err)
{
    (void)err;
    th_runtime_info mine;
    memset(&mine, 0, sizeof mine);
    mine.struct_size = info->struct_size;
    snprintf(mine.device, sizeof mine.device, "CPU (ABI " FROZEN_ABI " fixture)");
    mine.tensor_bytes = inst->nnz * (inst->nmodes * sizeof(uint32_t) + sizeof(double));
    snprintf(mine.details, sizeof mine.details, "built_against=" FROZEN_ABI);
#if TH_ABI_VERSION_MINOR >= 2
    mine.last_sweep_seconds = inst->last_sweep_seconds;
#endif
    size_t common = info->struct_size < sizeof mine ? info->struct_size : sizeof mine;
    memcpy(info, &mine, common);
    return TH_OK;
}

static th_status frozen_get_mode_info(th_instance *inst, uint32_t mode, th_mode_info *info,
                                      char *err)
{
    th_status status = check_mode(inst, mode, err);
    if (status != TH_OK)
        return status;
    th_mode_info mine;
    memset(&mine, 0, sizeof mine);
    mine.struct_size = info->struct_size;
    snprintf(mine.scheme, sizeof mine.scheme, "naive-coo");
    mine.last_mttkrp_seconds = -1.0;
    size_t common = info->struct_size < sizeof mine ? info->struct_size : sizeof mine;
    memcpy(info, &mine, common);
    return TH_OK;
}

#if TH_ABI_VERSION_MINOR >= 1
/* ---- ABI 1.1: als_update and als_sweep ------------------------------------ */

/* factors[mode] holds the unnormalised new factor: normalise it, then
 * lambda, Gram and inner as th_als_output says. */
static void finish_update(th_instance *inst, uint32_t mode, int32_t norm, double *lambda,
                          double *gram, double *inner)
{
    fixture_finish_update(inst->factors[mode], inst->results[mode], inst->dims[mode],
                          inst->rank, norm == TH_NORM_MAX, lambda, gram, inner);
}

static th_status check_norm(int32_t norm, char *err)
{
    if (norm != TH_NORM_2 && norm != TH_NORM_MAX)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "unknown norm");
    return TH_OK;
}

static th_status frozen_als_update(th_instance *inst, uint32_t mode, const double *w,
                                   int32_t norm, th_als_output *out, char *err)
{
    th_status status = check_mode(inst, mode, err);
    if (status == TH_OK)
        status = check_norm(norm, err);
    if (status != TH_OK)
        return status;
    if (w == NULL || out == NULL ||
        out->struct_size < FROZEN_MIN_SIZE(th_als_output, TH_ALS_OUTPUT_V1_0_SIZE) ||
        out->lambda == NULL || out->gram == NULL || out->inner == NULL)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "als_update: bad w or output");
    const uint32_t rank = inst->rank;
    for (size_t i = 0; i < inst->dims[mode]; i++)
        for (uint32_t c = 0; c < rank; c++) {
            double sum = 0.0;
            for (uint32_t r = 0; r < rank; r++)
                sum += inst->results[mode][i * rank + r] * w[(size_t)r * rank + c];
            inst->factors[mode][i * rank + c] = sum;
        }
    finish_update(inst, mode, norm, out->lambda, out->gram, out->inner);
    return TH_OK;
}

static th_status frozen_als_sweep(th_instance *inst, th_als_sweep_io *io, char *err)
{
    if (inst->nmodes == 0)
        return fail(err, TH_ERR_BAD_STATE, "als_sweep: no tensor loaded");
    if (io == NULL || io->struct_size < FROZEN_MIN_SIZE(th_als_sweep_io, TH_ALS_SWEEP_IO_V1_1_SIZE))
        return fail(err, TH_ERR_INVALID_ARGUMENT, "als_sweep: th_als_sweep_io too short");
    if (io->nmodes != inst->nmodes)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "als_sweep: nmodes differs from the tensor's");
    th_status status = check_norm(io->norm, err);
    if (status != TH_OK)
        return status;
    if (io->grams == NULL || io->lambda == NULL || io->inner == NULL)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "als_sweep: a NULL array");
    for (uint32_t m = 0; m < inst->nmodes; m++)
        if (io->grams[m] == NULL)
            return fail(err, TH_ERR_INVALID_ARGUMENT, "als_sweep: a NULL Gram");
    const uint32_t rank = inst->rank;
    const size_t n2 = (size_t)rank * rank;
    double *v = malloc(n2 * sizeof *v);
    if (v == NULL)
        return fail(err, TH_ERR_OUT_OF_MEMORY, "out of memory");
#if TH_ABI_VERSION_MINOR >= 2
    const clock_t start = clock(); /* the fixture's own timing: processor time */
#endif
    uint32_t done = 0;
    for (; done < inst->nmodes; done++) {
        const uint32_t mode = done;
        frozen_mttkrp(inst, mode, err); /* cannot fail: loaded, mode in range */
        for (size_t k = 0; k < n2; k++)
            v[k] = 1.0;
        for (uint32_t m = 0; m < inst->nmodes; m++)
            if (m != mode)
                for (size_t k = 0; k < n2; k++)
                    v[k] *= io->grams[m][k];
        if (!fixture_cholesky(v, rank, 16.0 /* the frozen headers state the factor in words */))
            break; /* the host finishes the iteration from this mode */
        double *a = inst->factors[mode];
        memcpy(a, inst->results[mode], (size_t)inst->dims[mode] * rank * sizeof *a);
        for (size_t i = 0; i < inst->dims[mode]; i++)
            fixture_cholesky_solve(v, rank, a + i * rank); /* V symmetric: a_i = m_i V^-1 */
        finish_update(inst, mode, io->norm, io->lambda, io->grams[mode], io->inner);
    }
    free(v);
    io->modes_done = done;
#if TH_ABI_VERSION_MINOR >= 2
    inst->last_sweep_seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
#endif
    return TH_OK;
}
#endif

#if TH_ABI_VERSION_MINOR >= 3
/* ---- ABI 1.3: init_factors ------------------------------------------------ */

/* SplitMix64's finaliser, as the 1.3 header's "Initial factors" states it. */
static uint64_t frozen_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static th_status frozen_init_factors(th_instance *inst, th_init_factors_io *io, char *err)
{
    if (inst->nmodes == 0)
        return fail(err, TH_ERR_BAD_STATE, "init_factors: no tensor loaded");
    if (io == NULL || io->struct_size < TH_INIT_FACTORS_IO_V1_3_SIZE)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "init_factors: th_init_factors_io too short");
    if (io->nmodes != inst->nmodes)
        return fail(err, TH_ERR_INVALID_ARGUMENT,
                    "init_factors: nmodes differs from the tensor's");
    if (io->grams == NULL)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "init_factors: grams is NULL");
    for (uint32_t m = 0; m < inst->nmodes; m++)
        if (io->grams[m] == NULL)
            return fail(err, TH_ERR_INVALID_ARGUMENT, "init_factors: a NULL Gram");
    const uint64_t gamma = 0x9e3779b97f4a7c15u;
    for (uint32_t m = 0; m < inst->nmodes; m++) {
        const uint64_t mode_key = frozen_mix(io->seed ^ frozen_mix((uint64_t)m + gamma));
        double *a = inst->factors[m];
        for (uint64_t i = 0; i < inst->dims[m]; i++) {
            const uint64_t row_key = frozen_mix(mode_key ^ frozen_mix(i + 2u * gamma));
            for (uint32_t r = 0; r < inst->rank; r++) {
                const uint64_t bits = frozen_mix(row_key + ((uint64_t)r + 1u) * gamma);
                a[i * inst->rank + r] = (double)(bits >> 11) * 0x1p-53;
            }
        }
        fixture_gram(a, inst->dims[m], inst->rank, io->grams[m]);
    }
    return TH_OK;
}
#endif

#if TH_ABI_VERSION_MINOR >= 4
/* ---- ABI 1.4: generalized_mttkrp and factor_update ----------------------- */

/* The model at nonzero k: sum_r w_r prod_m A_m(i_m, r) (w NULL: ones). */
static double frozen_model_value(const th_instance *inst, uint64_t k, const double *w)
{
    const uint32_t n = inst->nmodes, rank = inst->rank;
    double value = 0.0;
    for (uint32_t r = 0; r < rank; r++) {
        double term = w != NULL ? w[r] : 1.0;
        for (uint32_t m = 0; m < n; m++)
            term *= inst->factors[m][(size_t)inst->indices[k * n + m] * rank + r];
        value += term;
    }
    return value;
}

static double frozen_elementwise(int32_t g, double x, double m, double epsilon)
{
    if (g == TH_ELEMENTWISE_POISSON_RATIO)
        return x / fmax(m, epsilon);
    return g == TH_ELEMENTWISE_RESIDUAL ? m - x : x;
}

static double frozen_reduction(int32_t h, double x, double m)
{
    if (h == TH_REDUCTION_POISSON_LOG_LIKELIHOOD)
        return x == 0.0 ? 0.0 : (m > 0.0 ? x * log(m) : -INFINITY);
    if (h == TH_REDUCTION_SQUARED_RESIDUAL)
        return (m - x) * (m - x);
    return h == TH_REDUCTION_INNER_PRODUCT ? x * m : 0.0;
}

static th_status check_generalized_io(const th_instance *inst,
                                      const th_generalized_mttkrp_io *io, char *err)
{
    if (inst->nmodes == 0)
        return fail(err, TH_ERR_BAD_STATE, "generalized_mttkrp: no tensor loaded");
    if (io == NULL || io->struct_size < TH_GENERALIZED_MTTKRP_IO_V1_4_SIZE)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "generalized_mttkrp: io too short");
    const int has_mode = io->mode != TH_MODE_NONE;
    if (has_mode && io->mode >= inst->nmodes)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "generalized_mttkrp: mode out of range");
    if (has_mode && (io->elementwise < TH_ELEMENTWISE_VALUE ||
                     io->elementwise > TH_ELEMENTWISE_RESIDUAL))
        return fail(err, TH_ERR_UNSUPPORTED, "generalized_mttkrp: unknown elementwise function");
    if (io->reduction < TH_REDUCTION_NONE || io->reduction > TH_REDUCTION_INNER_PRODUCT)
        return fail(err, TH_ERR_UNSUPPORTED, "generalized_mttkrp: unknown reduction");
    if (has_mode && io->elementwise == TH_ELEMENTWISE_POISSON_RATIO && !(io->epsilon > 0.0))
        return fail(err, TH_ERR_INVALID_ARGUMENT, "generalized_mttkrp: epsilon must be > 0");
    return TH_OK;
}

static th_status frozen_generalized_mttkrp(th_instance *inst, th_generalized_mttkrp_io *io,
                                           char *err)
{
    th_status status = check_generalized_io(inst, io, err);
    if (status != TH_OK)
        return status;
    const uint32_t n = inst->nmodes, rank = inst->rank, mode = io->mode;
    double *out = mode != TH_MODE_NONE ? inst->results[mode] : NULL;
    if (out != NULL)
        memset(out, 0, (size_t)inst->dims[mode] * rank * sizeof *out);
    double reduced = 0.0;
    for (uint64_t k = 0; k < inst->nnz; k++) {
        const double x = inst->values[k];
        const double m = frozen_model_value(inst, k, io->weights);
        reduced += frozen_reduction(io->reduction, x, m);
        if (out == NULL)
            continue;
        const double g = frozen_elementwise(io->elementwise, x, m, io->epsilon);
        for (uint32_t r = 0; r < rank; r++) {
            double term = g;
            for (uint32_t j = 0; j < n; j++)
                if (j != mode)
                    term *= inst->factors[j][(size_t)inst->indices[k * n + j] * rank + r];
            out[(size_t)inst->indices[k * n + mode] * rank + r] += term;
        }
    }
    if (out != NULL)
        inst->result_ready[mode] = 1;
    io->reduced = reduced;
    return TH_OK;
}

static th_status check_factor_io(const th_instance *inst, const th_factor_update_io *io,
                                 char *err)
{
    if (inst->nmodes == 0)
        return fail(err, TH_ERR_BAD_STATE, "factor_update: no tensor loaded");
    if (io == NULL || io->struct_size < TH_FACTOR_UPDATE_IO_V1_4_SIZE)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "factor_update: io too short");
    if (io->mode >= inst->nmodes)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "factor_update: mode out of range");
    switch (io->operation) {
    case TH_FACTOR_SCALE_COLUMNS:
    case TH_FACTOR_NORMALIZE_1:
        return io->vector != NULL ? TH_OK
                                  : fail(err, TH_ERR_INVALID_ARGUMENT, "factor_update: no vector");
    case TH_FACTOR_MULTIPLICATIVE_UPDATE:
    case TH_FACTOR_RAISE_INADMISSIBLE_ZEROS:
        return inst->result_ready[io->mode]
                   ? TH_OK
                   : fail(err, TH_ERR_BAD_STATE, "factor_update: the mode has no Phi yet");
    default:
        return fail(err, TH_ERR_UNSUPPORTED, "factor_update: unknown operation");
    }
}

static th_status frozen_factor_update(th_instance *inst, th_factor_update_io *io, char *err)
{
    th_status status = check_factor_io(inst, io, err);
    if (status != TH_OK)
        return status;
    const uint32_t rank = inst->rank;
    const size_t rows = inst->dims[io->mode], cells = rows * rank;
    double *a = inst->factors[io->mode];
    const double *phi = inst->results[io->mode];
    if (io->operation == TH_FACTOR_SCALE_COLUMNS) {
        for (size_t k = 0; k < cells; k++)
            a[k] *= io->vector[k % rank];
    } else if (io->operation == TH_FACTOR_NORMALIZE_1) {
        for (uint32_t r = 0; r < rank; r++) {
            io->vector[r] = 0.0;
            for (size_t i = 0; i < rows; i++)
                io->vector[r] += fabs(a[i * rank + r]);
            for (size_t i = 0; io->vector[r] > 0.0 && i < rows; i++)
                a[i * rank + r] /= io->vector[r];
        }
    } else if (io->operation == TH_FACTOR_MULTIPLICATIVE_UPDATE) {
        io->violation = 0.0;
        for (size_t k = 0; k < cells; k++)
            io->violation = fmax(io->violation, fabs(fmin(a[k], 1.0 - phi[k])));
        io->count = io->violation >= io->tolerance;
        for (size_t k = 0; io->count && k < cells; k++)
            a[k] *= phi[k];
    } else { /* TH_FACTOR_RAISE_INADMISSIBLE_ZEROS */
        io->count = 0;
        for (size_t k = 0; k < cells; k++)
            if (phi[k] > io->threshold && a[k] < io->tolerance) {
                a[k] += io->offset;
                io->count++;
            }
    }
    return TH_OK;
}
#endif

#if TH_ABI_VERSION_MINOR >= 5
/* ---- ABI 1.5: row_least_squares and als_update_nonneg --------------------- */

static th_status check_rls_io(const th_instance *inst, const th_row_least_squares_io *io,
                              char *err)
{
    if (inst->nmodes == 0)
        return fail(err, TH_ERR_BAD_STATE, "row_least_squares: no tensor loaded");
    if (io == NULL || io->struct_size < TH_ROW_LEAST_SQUARES_IO_V1_5_SIZE)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "row_least_squares: io too short");
    if (io->mode >= inst->nmodes)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "row_least_squares: mode out of range");
    if (!isfinite(io->ridge) || io->ridge < 0.0)
        return fail(err, TH_ERR_INVALID_ARGUMENT,
                    "row_least_squares: ridge must be finite and >= 0");
    if (io->nonneg > 1)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "row_least_squares: nonneg must be 0 or 1");
    if (io->nonneg == 1 && io->passes == 0)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "row_least_squares: passes 0 with nonneg 1");
    return TH_OK;
}

/* Row `row`'s system from its own nonzeros: g = sum h h^T, b = sum x h
 * (h the row product of the other factors), *xx = sum x^2; the count. */
static uint64_t row_system(const th_instance *inst, uint32_t mode, uint32_t row, double *g,
                           double *b, double *h, double *xx)
{
    const uint32_t n = inst->nmodes, rank = inst->rank;
    memset(g, 0, (size_t)rank * rank * sizeof *g);
    memset(b, 0, rank * sizeof *b);
    *xx = 0.0;
    uint64_t count = 0;
    for (uint64_t k = 0; k < inst->nnz; k++) {
        if (inst->indices[k * n + mode] != row)
            continue;
        count++;
        const double x = inst->values[k];
        for (uint32_t r = 0; r < rank; r++) {
            h[r] = 1.0;
            for (uint32_t m = 0; m < n; m++)
                if (m != mode)
                    h[r] *= inst->factors[m][(size_t)inst->indices[k * n + m] * rank + r];
        }
        for (uint32_t r = 0; r < rank; r++) {
            b[r] += x * h[r];
            for (uint32_t c = 0; c < rank; c++)
                g[(size_t)r * rank + c] += h[r] * h[c];
        }
        *xx += x * x;
    }
    return count;
}

static th_status frozen_row_least_squares(th_instance *inst, th_row_least_squares_io *io,
                                          char *err)
{
    th_status status = check_rls_io(inst, io, err);
    if (status != TH_OK)
        return status;
    const uint32_t rank = inst->rank, mode = io->mode;
    const size_t r2 = (size_t)rank * rank;
    double *g = malloc(r2 * sizeof *g), *v = malloc(r2 * sizeof *v);
    double *b = malloc(rank * sizeof *b), *h = malloc(rank * sizeof *h);
    if (g == NULL || v == NULL || b == NULL || h == NULL) {
        free(g), free(v), free(b), free(h);
        return fail(err, TH_ERR_OUT_OF_MEMORY, "out of memory");
    }
    uint64_t singular = 0, empty = 0;
    double residual = 0.0, norm_squared = 0.0;
    for (uint32_t row = 0; row < inst->dims[mode]; row++) {
        double *a = inst->factors[mode] + (size_t)row * rank, xx = 0.0;
        const uint64_t count = row_system(inst, mode, row, g, b, h, &xx);
        if (count == 0) { /* zero when ridge > 0 (the minimiser), else as it was */
            empty++;
            if (io->ridge > 0.0)
                memset(a, 0, rank * sizeof *a);
        } else if (io->nonneg == 1) { /* coordinate descent from the row as it was */
            for (uint32_t pass = 0; pass < io->passes; pass++)
                for (uint32_t r = 0; r < rank; r++) {
                    const double d = g[(size_t)r * rank + r] + io->ridge;
                    double va = io->ridge * a[r];
                    for (uint32_t c = 0; c < rank; c++)
                        va += g[(size_t)r * rank + c] * a[c];
                    a[r] = d == 0.0 ? 0.0 : fmax(0.0, a[r] + (b[r] - va) / d);
                }
        } else {
            memcpy(v, g, r2 * sizeof *v);
            for (uint32_t r = 0; r < rank; r++)
                v[(size_t)r * rank + r] += io->ridge;
            if ((io->ridge == 0.0 && count < rank) || !fixture_cholesky(v, rank, 16.0)) {
                singular++; /* left as it was */
            } else {
                memcpy(a, b, rank * sizeof *a);
                fixture_cholesky_solve(v, rank, a);
            }
        }
        if (count > 0) { /* x^T x - 2 a^T b + a^T G a, G without the ridge */
            double agb = 0.0;
            for (uint32_t r = 0; r < rank; r++) {
                double ga = 0.0;
                for (uint32_t c = 0; c < rank; c++)
                    ga += g[(size_t)r * rank + c] * a[c];
                agb += a[r] * (ga - 2.0 * b[r]);
            }
            residual += xx + agb;
        }
        for (uint32_t r = 0; r < rank; r++)
            norm_squared += a[r] * a[r];
    }
    free(g), free(v), free(b), free(h);
    io->singular_rows = singular;
    io->empty_rows = empty;
    io->factor_norm_squared = norm_squared;
    io->residual_squared = residual;
    return TH_OK;
}

/* als_update's step under A >= 0: A(:, r) *= scale[r], the passes of
 * hierarchical ALS (fixture_hals, the bound on, no ridge or l1: the 1.5
 * header has neither), then as als_update. */
static th_status frozen_als_update_nonneg(th_instance *inst, th_nonneg_update_io *io,
                                          th_als_output *out, char *err)
{
    if (inst->nmodes == 0)
        return fail(err, TH_ERR_BAD_STATE, "als_update_nonneg: no tensor loaded");
    if (io == NULL || io->struct_size < TH_NONNEG_UPDATE_IO_V1_5_SIZE)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "als_update_nonneg: io too short");
    th_status status = check_mode(inst, io->mode, err);
    if (status == TH_OK)
        status = check_norm(io->norm, err);
    if (status != TH_OK)
        return status;
    if (io->v == NULL || out == NULL || out->struct_size < TH_ALS_OUTPUT_V1_0_SIZE ||
        out->lambda == NULL || out->gram == NULL || out->inner == NULL)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "als_update_nonneg: a NULL v or output");
    if (io->sweeps == 0)
        return fail(err, TH_ERR_INVALID_ARGUMENT, "als_update_nonneg: sweeps 0");
    if (!isfinite(io->tolerance) || io->tolerance < 0.0)
        return fail(err, TH_ERR_INVALID_ARGUMENT,
                    "als_update_nonneg: tolerance must be finite and >= 0");
    if (!inst->result_ready[io->mode])
        return fail(err, TH_ERR_BAD_STATE, "als_update_nonneg: the mode has no MTTKRP result");
    const uint32_t rank = inst->rank;
    const size_t rows = inst->dims[io->mode];
    double *a = inst->factors[io->mode];
    for (size_t i = 0; io->scale != NULL && i < rows; i++)
        for (uint32_t r = 0; r < rank; r++)
            a[i * rank + r] *= io->scale[r];
    io->passes = fixture_hals(a, inst->results[io->mode], io->v, rows, rank, 0.0, 0.0, 1,
                              io->sweeps, io->tolerance);
    finish_update(inst, io->mode, io->norm, out->lambda, out->gram, out->inner);
    return TH_OK;
}
#endif

TH_PLUGIN_EXPORT const th_plugin_entry tensorhost_plugin_entry = {
    TH_PLUGIN_ENTRY_HEADER,
    .get_info = frozen_get_info,
    .create = frozen_create,
    .destroy = frozen_destroy,
    .load_tensor = frozen_load_tensor,
    .set_factor = frozen_set_factor,
    .get_factor = frozen_get_factor,
    .mttkrp = frozen_mttkrp,
    .get_mttkrp_result = frozen_get_mttkrp_result,
    .get_runtime_info = frozen_get_runtime_info,
    .get_mode_info = frozen_get_mode_info,
#if TH_ABI_VERSION_MINOR >= 1
    .als_update = frozen_als_update,
    .als_sweep = frozen_als_sweep,
#endif
#if TH_ABI_VERSION_MINOR >= 3
    .init_factors = frozen_init_factors,
#endif
#if TH_ABI_VERSION_MINOR >= 4
    .generalized_mttkrp = frozen_generalized_mttkrp,
    .factor_update = frozen_factor_update,
#endif
#if TH_ABI_VERSION_MINOR >= 5
    .row_least_squares = frozen_row_least_squares,
    .als_update_nonneg = frozen_als_update_nonneg,
#endif
};
