/* The generic MTTKRP kernels (THG_GENERIC, mttkrp_impl.cuh): compiled
 * here so that they form a CUDA module of their own. */
#include "mttkrp_impl.cuh"

namespace thg_mttkrp_kernels {
THG_GENERIC()
} // namespace thg_mttkrp_kernels
