/* Compiles the plugin header and the SDK helpers as a plugin author's C
 * would: C11 and C17, -Wall -Wextra -Wpedantic -Werror, using every type,
 * macro and helper once. */
#include <tensorhost/plugin.h>
#include <tensorhost/plugin_sdk.h>

int th_abi_header_c_uses_everything(void);

/* A plugin's own status names, from the header's one list. */
static const char *status_name(th_status status)
{
#define NAME_CASE(name, value) \
    case name:                 \
        return #name;
    switch (status) {
        TH_STATUS_LIST(NAME_CASE)
    default:
        return "unknown";
    }
#undef NAME_CASE
}

static th_status noop_create(const th_option *options, uint32_t n_options,
                             const th_host_services *host, th_instance **out, char *err)
{
    (void)options, (void)n_options, (void)host, (void)out;
    err[0] = '\0';
    return TH_ERR_UNSUPPORTED;
}

static const th_plugin_entry entry = {
    TH_PLUGIN_ENTRY_HEADER,
    .create = noop_create,
};

int th_abi_header_c_uses_everything(void)
{
    th_coo_tensor coo = {.struct_size = sizeof coo, .nmodes = 3};
    th_runtime_info runtime = {.struct_size = sizeof runtime, .last_sweep_seconds = -1.0};
    th_mode_info mode = {.struct_size = sizeof mode};
    th_als_output als = {.struct_size = sizeof als};
    th_plugin_info info = {.struct_size = sizeof info, .flags = TH_CAP_ALS_UPDATE | TH_CAP_GPU};
    th_host_services host = {.struct_size = sizeof host};
    th_option option = {.key = "threads", .value = "2"};
    double *grams[1] = {NULL};
    th_init_factors_io init = {.struct_size = sizeof init, .nmodes = 1, .seed = 42, .grams = grams};
    const double first = th_initial_factor_value(init.seed, 0, 0, 0);
    const double same = th_initial_factor_from_row_key(th_initial_factor_row_key(42, 0, 0), 0);
    char err[TH_ERROR_SIZE];
    th_runtime_info full = {.struct_size = sizeof full, .tensor_bytes = 1};
    th_plugin_copy_out(&runtime, &full, sizeof full);
    th_plugin_log(&host, TH_LOG_INFO, "%s", "no log function: nothing happens");
    if (th_plugin_fail(err, TH_ERR_UNSUPPORTED, "mode %u", 1u) != TH_ERR_UNSUPPORTED)
        return -1;
    if (!TH_HAS_FIELD(runtime.struct_size, th_runtime_info, last_sweep_seconds) ||
        status_name(TH_ERR_NO_DEVICE)[0] != 'T' || first != same ||
        th_initial_factor_mix(0) != 0)
        return -1;
    const size_t sizes = TH_HOST_SERVICES_V1_0_SIZE + TH_COO_TENSOR_V1_0_SIZE +
                         TH_PLUGIN_INFO_V1_0_SIZE + TH_RUNTIME_INFO_V1_0_SIZE +
                         TH_RUNTIME_INFO_V1_2_SIZE + TH_MODE_INFO_V1_0_SIZE +
                         TH_ALS_OUTPUT_V1_0_SIZE + TH_ALS_SWEEP_IO_V1_1_SIZE +
                         TH_PLUGIN_ENTRY_V1_1_SIZE + TH_PLUGIN_ENTRY_V1_3_SIZE +
                         TH_INIT_FACTORS_IO_V1_3_SIZE + TH_FIELD_END(th_option, value);
    return (int)(coo.nmodes + runtime.struct_size + mode.struct_size + als.struct_size +
                 info.flags + host.struct_size + (option.key[0] == 't') +
                 TH_PLUGIN_ENTRY_V1_0_SIZE) +
           entry.create(&option, 1, &host, NULL, err) + (int)sizeof TH_PLUGIN_ENTRY_SYMBOL +
           (int)sizes;
}
