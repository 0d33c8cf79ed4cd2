/* gpu-adaptive: picks scheme 1 (owned output rows, no atomics) or scheme 2 (equal nonzero chunks, atomics) per mode; option rule = "balanced" (default: scheme 1 iff I_d >= kappa and the dealt partitions are balanced) or "paper" (iff I_d >= kappa). */
#include "gpu_plugin.h"

GPU_PLUGIN_DEFINE("gpu-adaptive", "GPU MTTKRP (adaptive)",
                  "Sparse MTTKRP on a CUDA GPU with mode-specific tensor copies: scheme 1 for modes with at least kappa indices whose rows deal evenly to the partitions, scheme 2 otherwise (rule=paper: I_d >= kappa alone).",
                  THG_POLICY_ADAPTIVE);
