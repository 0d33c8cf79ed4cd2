/* Loading a tensor onto a multi-device group (th_gpu.h, thg_group): every
 * mode's nonzeros dealt to the ranks (device_shares.h), the memory plan
 * checked for every rank before anything is allocated (memory_plan.h),
 * each rank's shares extracted (share_extract.h) and loaded into its
 * context, and the rows each rank owns handed to the group. Written per
 * rank: a process per GPU would run the same steps for its own rank. */
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

#endif
