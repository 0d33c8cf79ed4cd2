/* A plugin exactly as a third party would have written it against ABI 1.0:
 * compiled against the frozen copy of the 1.0 header (frozen/v1.0), never the
 * current one, and never edited as the ABI grows. Every later host must keep
 * loading it and computing with it; test_abi_frozen and the conformance
 * checker prove that.
 *
 * It implements the required functions plus get_runtime_info and
 * get_mode_info, whose out-structs are sized by the host, so the
 * "write only what fits both sizes" rule is exercised across versions. */
#include TH_ABI_HEADER /* the frozen 1.0 header, by absolute path */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FROZEN_ID "fixture_frozen_v1_0"

struct th_instance {
    uint32_t nmodes, rank;
    uint64_t nnz;
    uint32_t *dims;
    uint32_t *indices; /* [nnz * nmodes], nonzero-major */
    double *values;
    double *factors[16];
    double *results[16];
};

static const th_plugin_info frozen_info = {
    .struct_size = sizeof(th_plugin_info),
    .flags = 0,
    .id = FROZEN_ID,
    .name = "ABI 1.0 compatibility fixture",
    .version = "1.0.0",
    .description = "A plugin built against the frozen ABI 1.0 header.",
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
    snprintf(mine.device, sizeof mine.device, "CPU (ABI 1.0 fixture)");
    mine.tensor_bytes = inst->nnz * (inst->nmodes * sizeof(uint32_t) + sizeof(double));
    snprintf(mine.details, sizeof mine.details, "built_against=1.0");
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
};
