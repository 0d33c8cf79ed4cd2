/* gpu-adaptive: picks scheme 1 (owned output rows, no atomics) for modes with I_d >= kappa and scheme 2 (equal nonzero chunks, atomics) otherwise. */
#include "gpu_plugin.h"

GPU_PLUGIN_DEFINE("gpu-adaptive", "GPU MTTKRP (adaptive)",
                  "Sparse MTTKRP on a CUDA GPU with mode-specific tensor copies: scheme 1 for modes with at least kappa indices, scheme 2 for shorter ones.",
                  THG_POLICY_ADAPTIVE);
