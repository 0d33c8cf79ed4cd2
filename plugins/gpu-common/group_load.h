/* Loading a tensor onto a multi-device group (th_gpu.h, thg_group): every
 * mode's nonzeros dealt to the ranks (device_shares.h), the memory plan
 * checked for every rank before anything is allocated (memory_plan.h),
 * each rank's shares extracted (share_extract.h) and loaded into its
 * context, and the rows each rank owns handed to the group. A group
 * across processes (thg_group_load_across) takes each mode's share as the
 * host dealt it instead. */
#ifndef TH_GROUP_LOAD_H
#define TH_GROUP_LOAD_H

#include <tensorhost/plugin.h>

#include "th_gpu.h"

/* The ABI's load_tensor for a group: TH_OK, or the failure with its
 * message in err (TH_ERROR_SIZE bytes); TH_ERR_OUT_OF_MEMORY, before any
 * allocation on a device, when some rank's part does not fit, naming the
 * rank, its needs and how many such devices would hold the tensor. */
th_status thg_group_load_tensor(thg_group *group, const th_coo_tensor *tensor, uint32_t rank,
                                char *err);

/* The same for a group across a run's processes (thg_group_create_across),
 * collective: this process's rank loads tensor->mode_nonzeros, the host's
 * deal of each mode by the same plan (so that every rank's share is the
 * plan's), and the processes learn each other's shares through the host's
 * reduce_max to make the layout. The memory check is each process's own
 * (thg_load_shares); a failure on any process fails every one, before the
 * layout's collectives. */
th_status thg_group_load_across(thg_group *group, const th_coo_tensor *tensor, uint32_t rank,
                                const th_host_services *host, char *err);

#endif
