/* gpu-scheme1: forces scheme 1 on every mode, for A/B comparison with gpu-adaptive. */
#include "gpu_plugin.h"

GPU_PLUGIN_DEFINE("gpu-scheme1", "GPU MTTKRP (scheme 1)",
                  "Sparse MTTKRP on a CUDA GPU with mode-specific tensor copies, scheme 1 (output rows dealt to partitions, no atomics) on every mode.",
                  THG_POLICY_SCHEME1);
