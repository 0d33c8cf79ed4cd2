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
 *                          the host needs both for models beyond least squares. */
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
#else
#error "define one FAULT_* macro"
#endif
#include "fixture_common.h"
#if defined(FAULT_WRONG_INIT)
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
};
