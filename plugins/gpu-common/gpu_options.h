/* The GPU plugins' options (plugins/README.md): kappa, P, device, devices
 * and, for gpu-adaptive, rule, read and checked before any device is
 * touched. Plain C without CUDA, so that every case is tested and fuzzed
 * on any host; gpu_plugin.c resolves devices = "all" against the devices
 * visible. */
#ifndef TH_GPU_OPTIONS_H
#define TH_GPU_OPTIONS_H

#include <tensorhost/plugin.h>

#include "th_gpu.h"

/* The devices option: "all", or ordinals separated by commas ("0,1,2,3";
 * "0,0,0,0": ranks sharing one device, which tests the distribution on one
 * GPU). */
typedef struct gpu_device_list {
    uint32_t count; /* ordinals given; 0 when the option was not, or is "all" */
    int all;        /* "all": every visible device, for the caller to count */
    int ordinal[THG_MAX_GROUP_RANKS];
} gpu_device_list;

/* options[0..n_options) into *config (device, kappa, P and rule; the
 * caller sets the policy, which decides whether rule is accepted) and
 * *devices, both zeroed by the caller first except for config's defaults.
 * A devices list of one ordinal is config->device (devices->count 0
 * after). TH_OK, or TH_ERR_INVALID_ARGUMENT with one message in `err`
 * (TH_ERROR_SIZE bytes) naming the option, its value and what is
 * accepted, or an unknown key and the keys `plugin_id` accepts. */
th_status gpu_parse_options(const th_option *options, uint32_t n_options, const char *plugin_id,
                            thg_config *config, gpu_device_list *devices, char *err);

#endif
