/* The plugin ABI's words for what the kernel library (th_kernels) says: its
 * status codes as th_status, and a device's memory terms as the memory
 * plan's model. Shared by the instance functions (gpu_plugin.c) and the
 * load onto several devices (group_load.c), which both talk to the
 * kernels. */
#ifndef TH_GPU_KERNEL_BRIDGE_H
#define TH_GPU_KERNEL_BRIDGE_H

#include <tensorhost/plugin.h>

#include "memory_plan.h"
#include "th_gpu.h"

/* The ABI's status for a th_kernels status. */
th_status gpu_plugin_status(thg_status status);

/* The memory plan's model of tensor `t` at `rank` (memory_plan.h), from a
 * device's terms (thg_get_memory_terms) and the modes' row offsets
 * (borrowed by the model). */
thp_memory_model gpu_memory_model(const th_coo_tensor *t, uint32_t rank,
                                  const thg_memory_terms *terms,
                                  const uint64_t *const *row_offsets);

#endif
