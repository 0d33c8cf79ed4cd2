/* The plugin ABI glue shared by gpu-adaptive, gpu-scheme1 and gpu-scheme2:
 * option parsing, status mapping and the instance functions over th_kernels.
 * Built once, with the kernels, as libtensorhost-gpu.so, which exports
 * these functions alone; each plugin's entry file only picks a policy and
 * names itself (see GPU_PLUGIN_DEFINE). The library keeps no state between
 * instances, so plugins loaded side by side (a comparison's) share it. */
#ifndef TH_GPU_PLUGIN_H
#define TH_GPU_PLUGIN_H

#include <tensorhost/plugin.h>

#include "th_gpu.h"

/* What libtensorhost-gpu exports. */
#define GPU_PLUGIN_API __attribute__((visibility("default")))

GPU_PLUGIN_API th_status gpu_plugin_create(thg_policy policy, const char *plugin_id,
                            const th_option *options, uint32_t n_options,
                            const th_host_services *host, th_instance **out, char *err);
GPU_PLUGIN_API void gpu_plugin_destroy(th_instance *instance);
GPU_PLUGIN_API th_status gpu_plugin_load_tensor(th_instance *instance, const th_coo_tensor *tensor,
                                 uint32_t rank, char *err);
GPU_PLUGIN_API th_status gpu_plugin_set_factor(th_instance *instance, uint32_t mode, const double *data,
                                char *err);
GPU_PLUGIN_API th_status gpu_plugin_get_factor(th_instance *instance, uint32_t mode, double *data, char *err);
GPU_PLUGIN_API th_status gpu_plugin_mttkrp(th_instance *instance, uint32_t mode, char *err);
GPU_PLUGIN_API th_status gpu_plugin_get_mttkrp_result(th_instance *instance, uint32_t mode, double *data,
                                       char *err);
GPU_PLUGIN_API th_status gpu_plugin_als_update(th_instance *instance, uint32_t mode, const double *w,
                                int32_t norm, th_als_output *out, char *err);
GPU_PLUGIN_API th_status gpu_plugin_als_sweep(th_instance *instance, th_als_sweep_io *io, char *err);
GPU_PLUGIN_API th_status gpu_plugin_init_factors(th_instance *instance, th_init_factors_io *io, char *err);
GPU_PLUGIN_API th_status gpu_plugin_generalized_mttkrp(th_instance *instance,
                                                       th_generalized_mttkrp_io *io, char *err);
GPU_PLUGIN_API th_status gpu_plugin_factor_update(th_instance *instance, th_factor_update_io *io,
                                                  char *err);
GPU_PLUGIN_API th_status gpu_plugin_row_least_squares(th_instance *instance,
                                                      th_row_least_squares_io *io, char *err);
GPU_PLUGIN_API th_status gpu_plugin_als_update_nonneg(th_instance *instance,
                                                      th_nonneg_update_io *io,
                                                      th_als_output *out, char *err);
GPU_PLUGIN_API th_status gpu_plugin_get_runtime_info(th_instance *instance, th_runtime_info *info, char *err);
GPU_PLUGIN_API th_status gpu_plugin_get_mode_info(th_instance *instance, uint32_t mode, th_mode_info *info,
                                   char *err);

/* Defines the exported entry of a GPU plugin with the given policy. The
 * ALS flags match the functions the entry has, for hosts before ABI 1.2,
 * which refuse a flag that disagrees with its function. */
#define GPU_PLUGIN_DEFINE(ID, NAME, DESCRIPTION, POLICY)                                  \
    static const th_plugin_info gpu_plugin_info_ = {                                     \
        .struct_size = (uint32_t)sizeof(th_plugin_info),                                 \
        .flags = TH_CAP_ALS_UPDATE | TH_CAP_ALS_SWEEP | TH_CAP_GPU,                       \
        .id = ID,                                                                         \
        .name = NAME,                                                                     \
        .version = "0.1.0",                                                               \
        .description = DESCRIPTION,                                                       \
        .max_modes = THG_MAX_MODES,                                                       \
        .max_rank = THG_MAX_RANK,                                                         \
        .value_type = TH_VALUE_F32,                                                       \
    };                                                                                    \
    static const th_plugin_info *gpu_plugin_get_info_(void) { return &gpu_plugin_info_; } \
    static th_status gpu_plugin_create_(const th_option *options, uint32_t n_options,     \
                                        const th_host_services *host, th_instance **out,  \
                                        char *err)                                        \
    {                                                                                     \
        return gpu_plugin_create(POLICY, ID, options, n_options, host, out, err);         \
    }                                                                                     \
    TH_PLUGIN_EXPORT const th_plugin_entry tensorhost_plugin_entry = {                   \
        TH_PLUGIN_ENTRY_HEADER,                                                           \
        .init = NULL,                                                                     \
        .deinit = NULL,                                                                   \
        .get_info = gpu_plugin_get_info_,                                                 \
        .create = gpu_plugin_create_,                                                     \
        .destroy = gpu_plugin_destroy,                                                    \
        .load_tensor = gpu_plugin_load_tensor,                                            \
        .set_factor = gpu_plugin_set_factor,                                              \
        .get_factor = gpu_plugin_get_factor,                                              \
        .mttkrp = gpu_plugin_mttkrp,                                                      \
        .get_mttkrp_result = gpu_plugin_get_mttkrp_result,                                \
        .als_update = gpu_plugin_als_update,                                              \
        .get_runtime_info = gpu_plugin_get_runtime_info,                                  \
        .get_mode_info = gpu_plugin_get_mode_info,                                        \
        .als_sweep = gpu_plugin_als_sweep,                                                \
        .init_factors = gpu_plugin_init_factors,                                          \
        .generalized_mttkrp = gpu_plugin_generalized_mttkrp,                              \
        .factor_update = gpu_plugin_factor_update,                                        \
        .row_least_squares = gpu_plugin_row_least_squares,                                \
        .als_update_nonneg = gpu_plugin_als_update_nonneg,                                \
    }

#endif
