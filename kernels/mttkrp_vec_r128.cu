/* The vector MTTKRP kernels of one group of ranks (THG_VEC_R128, mttkrp_impl.cuh):
 * compiled here so that they form a CUDA module of their own. */
#include "mttkrp_impl.cuh"

namespace thg_mttkrp_kernels {
THG_VEC_R128()
} // namespace thg_mttkrp_kernels
