#include "kernel_bridge.h"

th_status gpu_plugin_status(thg_status status)
{
    switch (status) {
    case THG_OK:
        return TH_OK;
    case THG_ERR_INVALID:
        return TH_ERR_INVALID_ARGUMENT;
    case THG_ERR_UNSUPPORTED:
        return TH_ERR_UNSUPPORTED;
    case THG_ERR_OUT_OF_MEMORY:
        return TH_ERR_OUT_OF_MEMORY;
    case THG_ERR_NO_DEVICE:
        return TH_ERR_NO_DEVICE;
    case THG_ERR_DEVICE:
        return TH_ERR_DEVICE;
    case THG_ERR_STATE:
        return TH_ERR_BAD_STATE;
    }
    return TH_ERR_INTERNAL;
}

thp_memory_model gpu_memory_model(const th_coo_tensor *t, uint32_t rank,
                                  const thg_memory_terms *terms,
                                  const uint64_t *const *row_offsets)
{
    return (thp_memory_model){
        .nmodes = t->nmodes,
        .rank = rank,
        .kappa = terms->kappa,
        .dims = t->dims,
        .row_offsets = row_offsets,
        .fixed_bytes = terms->fixed_bytes,
        .build_bytes_per_nonzero = terms->build_bytes_per_nonzero,
        .build_bytes_per_row = terms->build_bytes_per_row,
    };
}
