/* gpu-scheme2: forces scheme 2 on every mode, for A/B comparison with gpu-adaptive. */
#include "gpu_plugin.h"

GPU_PLUGIN_DEFINE("gpu-scheme2", "GPU MTTKRP (scheme 2)",
                  "Sparse MTTKRP on a CUDA GPU with mode-specific tensor copies, scheme 2 (equal nonzero chunks, global atomics) on every mode.",
                  THG_POLICY_SCHEME2);
