/* Shared by the .cu files of th_kernels: the context and error plumbing. */
#ifndef THG_INTERNAL_CUH
#define THG_INTERNAL_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "th_gpu.h"

/* One mode-specific copy of the tensor: every mode's indices and the values,
 * reordered for this mode's output (see build.cu), plus the kappa+1
 * partition offsets into the nonzeros. */
struct thg_mode_copy {
    uint32_t *idx[THG_MAX_MODES]; /* [nmodes] arrays of [nnz] */
    float *vals;                  /* [nnz] */
    uint32_t *offsets;            /* [kappa + 1] */
    int scheme;                   /* 1 or 2 */
    char reason[96];              /* why that scheme (thg_mode_stats.reason) */
    int has_empty_rows;           /* some output row has no nonzero: zero first */
    int has_result;               /* mttkrp ran since the last load */
    double last_seconds;
};

struct thg_context {
    int device;
    char device_name[128];
    int sm_count;
    uint32_t kappa;
    uint32_t P;
    thg_policy policy;
    thg_rule rule;
    cudaStream_t stream;
    cudaEvent_t start, stop;

    /* The loaded problem; nmodes == 0 before load. */
    uint32_t nmodes;
    uint32_t nnz;
    uint32_t rank;
    uint32_t dims[THG_MAX_MODES];
    thg_mode_copy copies[THG_MAX_MODES];
    float *factors[THG_MAX_MODES]; /* dims[m] x rank, row-major */
    float *results[THG_MAX_MODES]; /* dims[m] x rank, row-major */

    /* ALS workspace: W (rank x rank floats) and the double accumulators
     * [lambda | gram | inner | sumsq | maxabs] downloaded in one copy. */
    float *als_w;
    double *als_acc;

    uint64_t tensor_bytes;
    uint64_t factor_bytes;
    uint64_t workspace_bytes;
    double build_seconds;
    double upload_seconds;
};

/* Writes "CUDA error at FILE:LINE in CALL: reason" and maps the error. */
thg_status thg_cuda_fail(char *err, size_t errlen, cudaError_t e, const char *call,
                         const char *file, int line);
thg_status thg_fail(char *err, size_t errlen, thg_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Every CUDA call goes through this; a failure returns from the caller. */
#define THG_CUDA(call)                                                              \
    do {                                                                            \
        cudaError_t thg_e_ = (call);                                                \
        if (thg_e_ != cudaSuccess)                                                  \
            return thg_cuda_fail(err, errlen, thg_e_, #call, __FILE__, __LINE__);   \
    } while (0)

/* After every kernel launch: launch-configuration errors show up here. */
#define THG_LAUNCHED() THG_CUDA(cudaGetLastError())

/* Kernel argument block for one MTTKRP: passed by value, so the per-mode
 * pointers live in the constant bank, no device array to keep in sync. */
struct thg_mttkrp_args {
    const uint32_t *idx[THG_MAX_MODES];
    const float *factor[THG_MAX_MODES];
    const float *vals;
    const uint32_t *offsets;
    float *out;
    uint32_t nmodes;
    uint32_t out_mode;
    uint32_t rank;
};

/* mttkrp.cu */
thg_status thg_launch_mttkrp(const thg_context *ctx, uint32_t mode, char *err, size_t errlen);
/* als.cu */
thg_status thg_launch_als(thg_context *ctx, uint32_t mode, int use_max_norm, char *err,
                          size_t errlen);
/* build.cu */
thg_status thg_build_copies(thg_context *ctx, const uint32_t *const *indices,
                            const double *values, char *err, size_t errlen);
uint64_t thg_build_workspace_bytes(const thg_context *ctx, uint32_t max_dim);
void thg_free_tensor(thg_context *ctx);

/* The launch shape of one rank: lanes per nonzero group and groups per
 * block (the effective P, capped and rounded to whole warps). */
struct thg_shape {
    uint32_t lanes;
    uint32_t groups;
};
thg_shape thg_launch_shape(uint32_t rank, uint32_t P, bool owned);

#endif
