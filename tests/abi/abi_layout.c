/* The ABI's binary layout, pinned: every struct's size and every field's
 * offset on x86-64 (LP64), and every constant a compiled plugin carries.
 * Compiled against the current header and against each frozen copy
 * (TH_ABI_HEADER names which). A minor version may only append fields, so
 * when the header grows, the asserts on what exists stay true; the new
 * fields, the new size macros and the grown sizeof() lines go in a section
 * for that minor, together with the header's changelog, never an edit of an
 * offset. A failing assert is a build error. */
#include TH_ABI_HEADER

#include <assert.h>
#include <stdio.h>
#include <string.h>

#define OFFSET(type, field, value) static_assert(offsetof(type, field) == (value), #type "." #field)
#define SIZE(type, value) static_assert(sizeof(type) == (value), "sizeof " #type)

/* Constants: a plugin compiles them in, so they can never change in 1.x. */
static_assert(TH_ABI_VERSION_MAJOR == 1, "major");
static_assert(TH_ERROR_SIZE == 512 && TH_NAME_SIZE == 128 && TH_DETAILS_SIZE == 512, "sizes");
static_assert(TH_OK == 0 && TH_ERR_INVALID_ARGUMENT == -1 && TH_ERR_UNSUPPORTED == -2 &&
                  TH_ERR_OUT_OF_MEMORY == -3 && TH_ERR_NO_DEVICE == -4 && TH_ERR_DEVICE == -5 &&
                  TH_ERR_BAD_STATE == -6 && TH_ERR_CANCELLED == -7 && TH_ERR_INTERNAL == -8,
              "status codes");
static_assert(TH_LOG_ERROR == 0 && TH_LOG_WARNING == 1 && TH_LOG_INFO == 2 && TH_LOG_DEBUG == 3,
              "log levels");
static_assert(TH_VALUE_F32 == 1 && TH_VALUE_F64 == 2, "value types");
/* TH_CAP_THREAD_SAFE_INSTANCES is ignored since 1.2 but stays defined and
 * its bit reserved, so that plugins which set it still compile. */
static_assert(TH_CAP_ALS_UPDATE == 1 && TH_CAP_GPU == 2 && TH_CAP_THREAD_SAFE_INSTANCES == 4,
              "capability flags");
#if TH_ABI_VERSION_MINOR >= 1
static_assert(TH_CAP_ALS_SWEEP == 8, "capability flags (1.1)");
#endif
static_assert(TH_NORM_2 == 0 && TH_NORM_MAX == 1, "norms");
static_assert(sizeof(th_status) == 4, "th_status is int32_t");

#if TH_ABI_VERSION_MINOR >= 2
/* The one list of status codes: it holds the nine pinned codes above (a
 * minor may append), and each enumerator has its listed value. */
#define COUNT_ONE(name, value) +1
#define ENUM_MATCHES_LIST(name, value) static_assert(name == (value), #name " in TH_STATUS_LIST");
enum { LISTED_STATUS_COUNT = 0 TH_STATUS_LIST(COUNT_ONE) };
static_assert(LISTED_STATUS_COUNT == 9, "TH_STATUS_LIST holds the codes of 1.0");
TH_STATUS_LIST(ENUM_MATCHES_LIST)
#endif

#if defined(__x86_64__) && defined(__LP64__)
#define TH_LAYOUT_PINNED 1

SIZE(th_abi_version, 4);
OFFSET(th_abi_version, major, 0);
OFFSET(th_abi_version, minor, 2);

#if TH_ABI_VERSION_MINOR < 8
SIZE(th_host_services, 32);
#endif
OFFSET(th_host_services, struct_size, 0);
OFFSET(th_host_services, reserved0, 4);
OFFSET(th_host_services, host_data, 8);
OFFSET(th_host_services, log, 16);
OFFSET(th_host_services, is_cancelled, 24);

SIZE(th_option, 16);
OFFSET(th_option, key, 0);
OFFSET(th_option, value, 8);

#if TH_ABI_VERSION_MINOR < 10
SIZE(th_coo_tensor, 48);
#endif
OFFSET(th_coo_tensor, struct_size, 0);
OFFSET(th_coo_tensor, nmodes, 4);
OFFSET(th_coo_tensor, nnz, 8);
OFFSET(th_coo_tensor, dims, 16);
OFFSET(th_coo_tensor, indices, 24);
OFFSET(th_coo_tensor, values, 32);
OFFSET(th_coo_tensor, norm_squared, 40);

SIZE(th_plugin_info, 56);
OFFSET(th_plugin_info, struct_size, 0);
OFFSET(th_plugin_info, flags, 4);
OFFSET(th_plugin_info, id, 8);
OFFSET(th_plugin_info, name, 16);
OFFSET(th_plugin_info, version, 24);
OFFSET(th_plugin_info, description, 32);
OFFSET(th_plugin_info, max_modes, 40);
OFFSET(th_plugin_info, max_rank, 44);
OFFSET(th_plugin_info, value_type, 48);
OFFSET(th_plugin_info, reserved0, 52);

OFFSET(th_runtime_info, struct_size, 0);
OFFSET(th_runtime_info, reserved0, 4);
OFFSET(th_runtime_info, device, 8);
OFFSET(th_runtime_info, tensor_bytes, 136);
OFFSET(th_runtime_info, factor_bytes, 144);
OFFSET(th_runtime_info, workspace_bytes, 152);
OFFSET(th_runtime_info, details, 160);
#if TH_ABI_VERSION_MINOR < 2
SIZE(th_runtime_info, 672);
#endif

SIZE(th_mode_info, 144);
OFFSET(th_mode_info, struct_size, 0);
OFFSET(th_mode_info, partitions, 4);
OFFSET(th_mode_info, scheme, 8);
OFFSET(th_mode_info, last_mttkrp_seconds, 136);

SIZE(th_als_output, 32);
OFFSET(th_als_output, struct_size, 0);
OFFSET(th_als_output, reserved0, 4);
OFFSET(th_als_output, lambda, 8);
OFFSET(th_als_output, gram, 16);
OFFSET(th_als_output, inner, 24);

OFFSET(th_plugin_entry, struct_size, 0);
OFFSET(th_plugin_entry, abi_version, 4);
OFFSET(th_plugin_entry, init, 8);
OFFSET(th_plugin_entry, deinit, 16);
OFFSET(th_plugin_entry, get_info, 24);
OFFSET(th_plugin_entry, create, 32);
OFFSET(th_plugin_entry, destroy, 40);
OFFSET(th_plugin_entry, load_tensor, 48);
OFFSET(th_plugin_entry, set_factor, 56);
OFFSET(th_plugin_entry, get_factor, 64);
OFFSET(th_plugin_entry, mttkrp, 72);
OFFSET(th_plugin_entry, get_mttkrp_result, 80);
OFFSET(th_plugin_entry, als_update, 88);
OFFSET(th_plugin_entry, get_runtime_info, 96);
OFFSET(th_plugin_entry, get_mode_info, 104);
/* The host's floor for every 1.x plugin: the 1.0 entry, whatever grows later. */
static_assert(TH_PLUGIN_ENTRY_V1_0_SIZE == 112, "TH_PLUGIN_ENTRY_V1_0_SIZE");

#if TH_ABI_VERSION_MINOR == 0
SIZE(th_plugin_entry, 112);
#else
/* 1.1: als_sweep appended to the entry, and its in/out struct. */
#if TH_ABI_VERSION_MINOR < 3
SIZE(th_plugin_entry, 120);
#endif
OFFSET(th_plugin_entry, als_sweep, 112);
static_assert(TH_PLUGIN_ENTRY_V1_1_SIZE == 120, "TH_PLUGIN_ENTRY_V1_1_SIZE");

#if TH_ABI_VERSION_MINOR < 6
SIZE(th_als_sweep_io, 40);
#endif
OFFSET(th_als_sweep_io, struct_size, 0);
OFFSET(th_als_sweep_io, norm, 4);
OFFSET(th_als_sweep_io, nmodes, 8);
OFFSET(th_als_sweep_io, modes_done, 12);
OFFSET(th_als_sweep_io, grams, 16);
OFFSET(th_als_sweep_io, lambda, 24);
OFFSET(th_als_sweep_io, inner, 32);
#endif

#if TH_ABI_VERSION_MINOR >= 2
/* 1.2: last_sweep_seconds appended to th_runtime_info (the entry did not
 * grow), and a size macro for every version of every sized struct: each
 * equals the struct's sizeof() in that version, pinned above. */
#if TH_ABI_VERSION_MINOR < 8
SIZE(th_runtime_info, 680);
#endif
OFFSET(th_runtime_info, last_sweep_seconds, 672);
static_assert(TH_RUNTIME_INFO_V1_0_SIZE == 672, "TH_RUNTIME_INFO_V1_0_SIZE");
static_assert(TH_RUNTIME_INFO_V1_2_SIZE == 680, "TH_RUNTIME_INFO_V1_2_SIZE");
static_assert(TH_HOST_SERVICES_V1_0_SIZE == 32, "TH_HOST_SERVICES_V1_0_SIZE");
static_assert(TH_COO_TENSOR_V1_0_SIZE == 48, "TH_COO_TENSOR_V1_0_SIZE");
static_assert(TH_PLUGIN_INFO_V1_0_SIZE == 56, "TH_PLUGIN_INFO_V1_0_SIZE");
static_assert(TH_MODE_INFO_V1_0_SIZE == 144, "TH_MODE_INFO_V1_0_SIZE");
static_assert(TH_ALS_OUTPUT_V1_0_SIZE == 32, "TH_ALS_OUTPUT_V1_0_SIZE");
static_assert(TH_ALS_SWEEP_IO_V1_1_SIZE == 40, "TH_ALS_SWEEP_IO_V1_1_SIZE");
#endif

#if TH_ABI_VERSION_MINOR >= 3
/* 1.3: init_factors appended to the entry, and its in/out struct. */
#if TH_ABI_VERSION_MINOR < 4
SIZE(th_plugin_entry, 128);
#endif
OFFSET(th_plugin_entry, init_factors, 120);
static_assert(TH_PLUGIN_ENTRY_V1_3_SIZE == 128, "TH_PLUGIN_ENTRY_V1_3_SIZE");

SIZE(th_init_factors_io, 24);
OFFSET(th_init_factors_io, struct_size, 0);
OFFSET(th_init_factors_io, nmodes, 4);
OFFSET(th_init_factors_io, seed, 8);
OFFSET(th_init_factors_io, grams, 16);
static_assert(TH_INIT_FACTORS_IO_V1_3_SIZE == 24, "TH_INIT_FACTORS_IO_V1_3_SIZE");
#endif

#if TH_ABI_VERSION_MINOR >= 4
/* 1.4: generalized_mttkrp and factor_update appended to the entry, and
 * their in/out structs. */
#if TH_ABI_VERSION_MINOR < 5
SIZE(th_plugin_entry, 144);
#endif
OFFSET(th_plugin_entry, generalized_mttkrp, 128);
OFFSET(th_plugin_entry, factor_update, 136);
static_assert(TH_PLUGIN_ENTRY_V1_4_SIZE == 144, "TH_PLUGIN_ENTRY_V1_4_SIZE");

SIZE(th_generalized_mttkrp_io, 40);
OFFSET(th_generalized_mttkrp_io, struct_size, 0);
OFFSET(th_generalized_mttkrp_io, mode, 4);
OFFSET(th_generalized_mttkrp_io, elementwise, 8);
OFFSET(th_generalized_mttkrp_io, reduction, 12);
OFFSET(th_generalized_mttkrp_io, epsilon, 16);
OFFSET(th_generalized_mttkrp_io, weights, 24);
OFFSET(th_generalized_mttkrp_io, reduced, 32);
static_assert(TH_GENERALIZED_MTTKRP_IO_V1_4_SIZE == 40, "TH_GENERALIZED_MTTKRP_IO_V1_4_SIZE");

SIZE(th_factor_update_io, 64);
OFFSET(th_factor_update_io, struct_size, 0);
OFFSET(th_factor_update_io, mode, 4);
OFFSET(th_factor_update_io, operation, 8);
OFFSET(th_factor_update_io, reserved0, 12);
OFFSET(th_factor_update_io, vector, 16);
OFFSET(th_factor_update_io, tolerance, 24);
OFFSET(th_factor_update_io, offset, 32);
OFFSET(th_factor_update_io, violation, 40);
OFFSET(th_factor_update_io, count, 48);
OFFSET(th_factor_update_io, threshold, 56);
static_assert(TH_FACTOR_UPDATE_IO_V1_4_SIZE == 64, "TH_FACTOR_UPDATE_IO_V1_4_SIZE");
#endif

#if TH_ABI_VERSION_MINOR >= 5
/* 1.5: row_least_squares and als_update_nonneg appended to the entry, and
 * their in/out structs. */
#if TH_ABI_VERSION_MINOR < 7
SIZE(th_plugin_entry, 160);
#endif
OFFSET(th_plugin_entry, row_least_squares, 144);
OFFSET(th_plugin_entry, als_update_nonneg, 152);
static_assert(TH_PLUGIN_ENTRY_V1_5_SIZE == 160, "TH_PLUGIN_ENTRY_V1_5_SIZE");

SIZE(th_row_least_squares_io, 56);
OFFSET(th_row_least_squares_io, struct_size, 0);
OFFSET(th_row_least_squares_io, mode, 4);
OFFSET(th_row_least_squares_io, ridge, 8);
OFFSET(th_row_least_squares_io, nonneg, 16);
OFFSET(th_row_least_squares_io, passes, 20);
OFFSET(th_row_least_squares_io, singular_rows, 24);
OFFSET(th_row_least_squares_io, empty_rows, 32);
OFFSET(th_row_least_squares_io, factor_norm_squared, 40);
OFFSET(th_row_least_squares_io, residual_squared, 48);
static_assert(TH_ROW_LEAST_SQUARES_IO_V1_5_SIZE == 56, "TH_ROW_LEAST_SQUARES_IO_V1_5_SIZE");

#if TH_ABI_VERSION_MINOR < 6
SIZE(th_nonneg_update_io, 48);
#endif
OFFSET(th_nonneg_update_io, struct_size, 0);
OFFSET(th_nonneg_update_io, mode, 4);
OFFSET(th_nonneg_update_io, v, 8);
OFFSET(th_nonneg_update_io, scale, 16);
OFFSET(th_nonneg_update_io, tolerance, 24);
OFFSET(th_nonneg_update_io, sweeps, 32);
OFFSET(th_nonneg_update_io, norm, 36);
OFFSET(th_nonneg_update_io, passes, 40);
OFFSET(th_nonneg_update_io, reserved0, 44);
static_assert(TH_NONNEG_UPDATE_IO_V1_5_SIZE == 48, "TH_NONNEG_UPDATE_IO_V1_5_SIZE");
#endif

#if TH_ABI_VERSION_MINOR >= 6
/* 1.6: the regularised and constrained sweep's in-fields appended to
 * th_als_sweep_io, ridge, l1 and unbounded to th_nonneg_update_io (the
 * entry did not grow). */
#if TH_ABI_VERSION_MINOR < 9
SIZE(th_als_sweep_io, 88);
#endif
OFFSET(th_als_sweep_io, constraints, 40);
OFFSET(th_als_sweep_io, l1, 48);
OFFSET(th_als_sweep_io, ridge, 56);
OFFSET(th_als_sweep_io, scale, 64);
OFFSET(th_als_sweep_io, hals_tolerance, 72);
OFFSET(th_als_sweep_io, hals_sweeps, 80);
OFFSET(th_als_sweep_io, reserved0, 84);
static_assert(TH_ALS_SWEEP_IO_V1_6_SIZE == 88, "TH_ALS_SWEEP_IO_V1_6_SIZE");

SIZE(th_nonneg_update_io, 72);
OFFSET(th_nonneg_update_io, ridge, 48);
OFFSET(th_nonneg_update_io, l1, 56);
OFFSET(th_nonneg_update_io, unbounded, 64);
OFFSET(th_nonneg_update_io, reserved1, 68);
static_assert(TH_NONNEG_UPDATE_IO_V1_6_SIZE == 72, "TH_NONNEG_UPDATE_IO_V1_6_SIZE");
#endif

#if TH_ABI_VERSION_MINOR >= 7
/* 1.7: multiplicative_updates appended to the entry, and its in/out
 * struct. */
SIZE(th_plugin_entry, 168);
OFFSET(th_plugin_entry, multiplicative_updates, 160);
static_assert(TH_PLUGIN_ENTRY_V1_7_SIZE == 168, "TH_PLUGIN_ENTRY_V1_7_SIZE");

SIZE(th_multiplicative_updates_io, 48);
OFFSET(th_multiplicative_updates_io, struct_size, 0);
OFFSET(th_multiplicative_updates_io, mode, 4);
OFFSET(th_multiplicative_updates_io, elementwise, 8);
OFFSET(th_multiplicative_updates_io, max_iterations, 12);
OFFSET(th_multiplicative_updates_io, epsilon, 16);
OFFSET(th_multiplicative_updates_io, tolerance, 24);
OFFSET(th_multiplicative_updates_io, iterations, 32);
OFFSET(th_multiplicative_updates_io, updates, 36);
OFFSET(th_multiplicative_updates_io, violation, 40);
static_assert(TH_MULTIPLICATIVE_UPDATES_IO_V1_7_SIZE == 48,
              "TH_MULTIPLICATIVE_UPDATES_IO_V1_7_SIZE");
#endif

#if TH_ABI_VERSION_MINOR >= 8
/* 1.8: the run's processes in the host's services, and process_sums in
 * the runtime info. */
SIZE(th_host_services, 56);
OFFSET(th_host_services, processes, 32);
OFFSET(th_host_services, broadcast, 40);
OFFSET(th_host_services, reduce_max, 48);
static_assert(TH_HOST_SERVICES_V1_8_SIZE == 56, "TH_HOST_SERVICES_V1_8_SIZE");
SIZE(th_runtime_info, 688);
OFFSET(th_runtime_info, process_sums, 680);
#if TH_ABI_VERSION_MINOR < 10
OFFSET(th_runtime_info, reserved1, 684);
#endif
static_assert(TH_RUNTIME_INFO_V1_8_SIZE == 688, "TH_RUNTIME_INFO_V1_8_SIZE");
#endif

#if TH_ABI_VERSION_MINOR >= 9
/* 1.9: coordinate descent's passes per mode appended to th_als_sweep_io. */
SIZE(th_als_sweep_io, 96);
OFFSET(th_als_sweep_io, hals_mode_sweeps, 88);
static_assert(TH_ALS_SWEEP_IO_V1_9_SIZE == 96, "TH_ALS_SWEEP_IO_V1_9_SIZE");
#endif

#if TH_ABI_VERSION_MINOR >= 10
/* 1.10: each mode's own nonzeros appended to th_coo_tensor; the runtime
 * info's reserved word (0 in 1.8 and 1.9) becomes mode_nonzeros. */
SIZE(th_coo_tensor, 56);
OFFSET(th_coo_tensor, mode_nonzeros, 48);
static_assert(TH_COO_TENSOR_V1_0_SIZE == 48, "TH_COO_TENSOR_V1_0_SIZE");
static_assert(TH_COO_TENSOR_V1_10_SIZE == 56, "TH_COO_TENSOR_V1_10_SIZE");
OFFSET(th_runtime_info, mode_nonzeros, 684);
#endif
#endif

#if TH_ABI_VERSION_MINOR >= 4
/* 1.4's constants: a plugin compiles them in. */
static_assert(TH_MODE_NONE == UINT32_MAX, "TH_MODE_NONE");
static_assert(TH_ELEMENTWISE_VALUE == 0 && TH_ELEMENTWISE_POISSON_RATIO == 1 &&
                  TH_ELEMENTWISE_RESIDUAL == 2,
              "elementwise functions");
static_assert(TH_REDUCTION_NONE == 0 && TH_REDUCTION_POISSON_LOG_LIKELIHOOD == 1 &&
                  TH_REDUCTION_SQUARED_RESIDUAL == 2 && TH_REDUCTION_INNER_PRODUCT == 3,
              "reductions");
static_assert(TH_FACTOR_SCALE_COLUMNS == 1 && TH_FACTOR_NORMALIZE_1 == 2 &&
                  TH_FACTOR_MULTIPLICATIVE_UPDATE == 3 && TH_FACTOR_RAISE_INADMISSIBLE_ZEROS == 4,
              "factor operations");
#endif

#if TH_ABI_VERSION_MINOR >= 2
/* On any target: the newest size macro of each struct is its sizeof(), so a
 * struct that grows without a new macro fails here. */
#if TH_ABI_VERSION_MINOR < 8
static_assert(TH_HOST_SERVICES_V1_0_SIZE == sizeof(th_host_services), "th_host_services");
static_assert(TH_RUNTIME_INFO_V1_2_SIZE == sizeof(th_runtime_info), "th_runtime_info");
#endif
#if TH_ABI_VERSION_MINOR < 10
static_assert(TH_COO_TENSOR_V1_0_SIZE == sizeof(th_coo_tensor), "th_coo_tensor");
#else
static_assert(TH_COO_TENSOR_V1_10_SIZE == sizeof(th_coo_tensor), "th_coo_tensor");
#endif
static_assert(TH_PLUGIN_INFO_V1_0_SIZE == sizeof(th_plugin_info), "th_plugin_info");
static_assert(TH_MODE_INFO_V1_0_SIZE == sizeof(th_mode_info), "th_mode_info");
static_assert(TH_ALS_OUTPUT_V1_0_SIZE == sizeof(th_als_output), "th_als_output");
#endif
#if TH_ABI_VERSION_MINOR >= 2 && TH_ABI_VERSION_MINOR < 6
static_assert(TH_ALS_SWEEP_IO_V1_1_SIZE == sizeof(th_als_sweep_io), "th_als_sweep_io");
#endif
#if TH_ABI_VERSION_MINOR == 2
static_assert(TH_PLUGIN_ENTRY_V1_1_SIZE == sizeof(th_plugin_entry), "th_plugin_entry");
#endif
#if TH_ABI_VERSION_MINOR == 3
static_assert(TH_PLUGIN_ENTRY_V1_3_SIZE == sizeof(th_plugin_entry), "th_plugin_entry");
#endif
#if TH_ABI_VERSION_MINOR >= 3
static_assert(TH_INIT_FACTORS_IO_V1_3_SIZE == sizeof(th_init_factors_io), "th_init_factors_io");
#endif
#if TH_ABI_VERSION_MINOR == 4
static_assert(TH_PLUGIN_ENTRY_V1_4_SIZE == sizeof(th_plugin_entry), "th_plugin_entry");
#endif
#if TH_ABI_VERSION_MINOR >= 4
static_assert(TH_GENERALIZED_MTTKRP_IO_V1_4_SIZE == sizeof(th_generalized_mttkrp_io),
              "th_generalized_mttkrp_io");
static_assert(TH_FACTOR_UPDATE_IO_V1_4_SIZE == sizeof(th_factor_update_io), "th_factor_update_io");
#endif
#if TH_ABI_VERSION_MINOR == 5 || TH_ABI_VERSION_MINOR == 6
static_assert(TH_PLUGIN_ENTRY_V1_5_SIZE == sizeof(th_plugin_entry), "th_plugin_entry");
#endif
#if TH_ABI_VERSION_MINOR >= 5
static_assert(TH_ROW_LEAST_SQUARES_IO_V1_5_SIZE == sizeof(th_row_least_squares_io),
              "th_row_least_squares_io");
#endif
#if TH_ABI_VERSION_MINOR == 5
static_assert(TH_NONNEG_UPDATE_IO_V1_5_SIZE == sizeof(th_nonneg_update_io),
              "th_nonneg_update_io");
#endif
#if TH_ABI_VERSION_MINOR >= 6 && TH_ABI_VERSION_MINOR < 9
static_assert(TH_ALS_SWEEP_IO_V1_6_SIZE == sizeof(th_als_sweep_io), "th_als_sweep_io");
#endif
#if TH_ABI_VERSION_MINOR >= 9
static_assert(TH_ALS_SWEEP_IO_V1_9_SIZE == sizeof(th_als_sweep_io), "th_als_sweep_io");
#endif
#if TH_ABI_VERSION_MINOR >= 6
static_assert(TH_NONNEG_UPDATE_IO_V1_6_SIZE == sizeof(th_nonneg_update_io),
              "th_nonneg_update_io");
static_assert(TH_CONSTRAINT_NONE == 0 && TH_CONSTRAINT_NONNEG == 1, "constraints");
#endif
#if TH_ABI_VERSION_MINOR >= 7
static_assert(TH_PLUGIN_ENTRY_V1_7_SIZE == sizeof(th_plugin_entry), "th_plugin_entry");
static_assert(TH_MULTIPLICATIVE_UPDATES_IO_V1_7_SIZE == sizeof(th_multiplicative_updates_io),
              "th_multiplicative_updates_io");
#endif
#if TH_ABI_VERSION_MINOR >= 8
static_assert(TH_HOST_SERVICES_V1_8_SIZE == sizeof(th_host_services), "th_host_services");
static_assert(TH_RUNTIME_INFO_V1_8_SIZE == sizeof(th_runtime_info), "th_runtime_info");
#endif

/* The convenience macro must fill exactly the header fields. */
static const th_plugin_entry header_only = {TH_PLUGIN_ENTRY_HEADER};

int main(void)
{
#ifndef TH_LAYOUT_PINNED
    puts("SKIPPED: layout values are pinned for x86-64 only");
    return 77;
#else
    if (header_only.struct_size != sizeof(th_plugin_entry) ||
        header_only.abi_version.major != TH_ABI_VERSION_MAJOR ||
        header_only.abi_version.minor != TH_ABI_VERSION_MINOR || header_only.get_info != NULL) {
        puts("TH_PLUGIN_ENTRY_HEADER filled the wrong fields");
        return 1;
    }
    if (strcmp(TH_PLUGIN_ENTRY_SYMBOL, "tensorhost_plugin_entry") != 0) {
        puts("TH_PLUGIN_ENTRY_SYMBOL changed");
        return 1;
    }
    printf("ABI %u.%u layout as pinned (%s)\n", TH_ABI_VERSION_MAJOR, TH_ABI_VERSION_MINOR,
           TH_ABI_HEADER);
    return 0;
#endif
}
