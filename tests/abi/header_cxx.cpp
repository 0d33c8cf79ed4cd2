// Compiles the plugin header as C++17 with -Wall -Wextra -Wpedantic -Werror:
// a plugin may be written in C++ (extern "C" linkage comes from the header).
#include <tensorhost/plugin.h>
#include <tensorhost/plugin_sdk.h>

#include <cstddef>
#include <type_traits>

static_assert(std::is_standard_layout<th_plugin_entry>::value, "C-compatible layout");
static_assert(std::is_trivially_copyable<th_plugin_entry>::value, "plain data");
static_assert(std::is_standard_layout<th_runtime_info>::value, "C-compatible layout");

namespace {
th_status noop_create(const th_option *, uint32_t, const th_host_services *, th_instance **,
                      char *err)
{
    err[0] = '\0';
    return TH_ERR_UNSUPPORTED;
}

// A plugin's own status names, from the header's one list.
const char *status_name(th_status status)
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
} // namespace

int th_abi_header_cxx_uses_everything();

int th_abi_header_cxx_uses_everything()
{
    th_plugin_entry entry{};
    entry.struct_size = static_cast<uint32_t>(sizeof entry);
    entry.abi_version = th_abi_version{TH_ABI_VERSION_MAJOR, TH_ABI_VERSION_MINOR};
    entry.create = noop_create;
    th_option option{"threads", "2"};
    th_host_services host{};
    char err[TH_ERROR_SIZE];
    th_plugin_fail(err, TH_ERR_UNSUPPORTED, "C++ too: %d", 1);
    th_runtime_info runtime{};
    runtime.struct_size = static_cast<uint32_t>(TH_RUNTIME_INFO_V1_0_SIZE);
    const bool has_sweep_time =
        TH_HAS_FIELD(runtime.struct_size, th_runtime_info, last_sweep_seconds);
    th_init_factors_io init{};
    init.struct_size = static_cast<uint32_t>(TH_INIT_FACTORS_IO_V1_3_SIZE);
    init.seed = UINT64_MAX;
    const double first = th_initial_factor_value(init.seed, 1, 2, 3);
    return entry.create(&option, 1, &host, nullptr, err) +
           static_cast<int>(TH_PLUGIN_ENTRY_V1_0_SIZE + TH_RUNTIME_INFO_V1_2_SIZE +
                            TH_PLUGIN_ENTRY_V1_3_SIZE) +
           (has_sweep_time ? 1 : 0) + (status_name(TH_ERR_DEVICE)[0] == 'T' ? 1 : 0) +
           (first >= 0.0 && first < 1.0 ? 1 : 0);
}
