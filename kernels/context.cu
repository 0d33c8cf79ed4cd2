/* The C API of th_kernels: device selection, loading, factor transfer,
 * timing, and the memory budget check. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "thg_internal.cuh"

thg_status thg_fail(char *err, size_t errlen, thg_status status, const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return status;
}

thg_status thg_cuda_fail(char *err, size_t errlen, cudaError_t e, const char *call,
                         const char *file, int line)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    const thg_status status = e == cudaErrorMemoryAllocation ? THG_ERR_OUT_OF_MEMORY
                              : (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
                                  ? THG_ERR_NO_DEVICE
                                  : THG_ERR_DEVICE;
    return thg_fail(err, errlen, status, "CUDA error at kernels/%s:%d in %s: %s (%s)", base,
                    line, call, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* Why no device is usable, in the user's terms: the runtime says "CUDA
 * driver version is insufficient" both when the driver is too old and when
 * there is no driver at all, so look for the driver library itself. */
static thg_status no_device(cudaError_t e, char *err, size_t errlen)
{
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!driver)
        return thg_fail(err, errlen, THG_ERR_NO_DEVICE,
                        "no usable CUDA device: no NVIDIA driver found (libcuda.so.1 cannot "
                        "be loaded)");
    dlclose(driver);
    int driver_version = 0;
    if (e == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver_version) == cudaSuccess)
        return thg_fail(err, errlen, THG_ERR_NO_DEVICE,
                        "no usable CUDA device: the NVIDIA driver supports CUDA %d.%d, older "
                        "than the CUDA %d.%d these plugins were built with (update the driver)",
                        driver_version / 1000, driver_version % 1000 / 10,
                        CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
    return thg_fail(err, errlen, THG_ERR_NO_DEVICE, "no usable CUDA device: %s (%s)",
                    cudaGetErrorString(e), cudaGetErrorName(e));
}

extern "C" int thg_get_device(const thg_context *ctx) { return ctx->device; }

extern "C" thg_status thg_probe_device(int device, char *err, size_t errlen)
{
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* clear, so the next probe starts clean */
        return no_device(e, err, errlen);
    }
    if (count == 0)
        return thg_fail(err, errlen, THG_ERR_NO_DEVICE, "no usable CUDA device: none found");
    if (device < 0 || device >= count)
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "CUDA device %d does not exist (%d device%s visible)", device, count,
                        count == 1 ? "" : "s");
    return THG_OK;
}

extern "C" thg_status thg_device_count(int *count, char *err, size_t errlen)
{
    const thg_status st = thg_probe_device(0, err, errlen);
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaGetDeviceCount(count));
    return THG_OK;
}

static thg_status init_context(thg_context *ctx, const thg_config *config, char *err,
                               size_t errlen)
{
    THG_CUDA(cudaSetDevice(ctx->device));
    cudaDeviceProp prop;
    THG_CUDA(cudaGetDeviceProperties(&prop, ctx->device));
    snprintf(ctx->device_name, sizeof(ctx->device_name), "%s (device %d)", prop.name,
             ctx->device);
    ctx->sm_count = prop.multiProcessorCount;
    ctx->l2_bytes = (uint64_t)prop.l2CacheSize;
    /* Two blocks need 2 (size + reserved) bytes of the SM's. */
    const size_t half = prop.sharedMemPerMultiprocessor / 2 - prop.reservedSharedMemPerBlock + 1;
    ctx->one_block_smem_bytes = half <= prop.sharedMemPerBlockOptin ? (uint32_t)half : 0u;
    ctx->kappa = config->kappa ? config->kappa : (uint32_t)prop.multiProcessorCount;
    ctx->P = config->P; /* 0: fill a 1024-thread block, decided per rank */
    if (ctx->P > THG_MAX_P)
        return thg_fail(err, errlen, THG_ERR_INVALID, "P=%u is larger than %u", ctx->P,
                        THG_MAX_P);
    THG_CUDA(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    THG_CUDA(cudaStreamCreateWithFlags(&ctx->side_stream, cudaStreamNonBlocking));
    THG_CUDA(cudaEventCreateWithFlags(&ctx->fork_event, cudaEventDisableTiming));
    THG_CUDA(cudaEventCreateWithFlags(&ctx->join_event, cudaEventDisableTiming));
    const char *no_graphs = getenv("TH_GPU_NO_GRAPHS");
    ctx->use_graphs = !(no_graphs && *no_graphs && strcmp(no_graphs, "0") != 0);
    snprintf(ctx->graph_note, sizeof(ctx->graph_note), "%s",
             ctx->use_graphs ? "on" : "off (TH_GPU_NO_GRAPHS)");
    const char *poison = getenv("TH_GPU_POISON_RESULTS");
    ctx->poison_results = poison && *poison && strcmp(poison, "0") != 0;
    const char *cap = getenv("TH_GPU_TEST_FREE_BYTES");
    ctx->free_bytes_cap = cap && *cap ? strtoull(cap, nullptr, 10) : 0;
    const char *l2 = getenv("TH_GPU_TEST_L2_BYTES");
    if (l2 && *l2)
        ctx->l2_bytes = strtoull(l2, nullptr, 10);
    const char *no_saved = getenv("TH_GPU_TEST_NONNEG_NO_SAVED");
    ctx->nonneg_no_saved = no_saved && *no_saved && strcmp(no_saved, "0") != 0;
    const char *chunk = getenv("TH_GPU_TEST_RLS_CHUNK");
    ctx->rls_chunk_override = chunk && *chunk ? (uint32_t)strtoul(chunk, nullptr, 10) : 0;
    for (uint32_t m = 0; m < THG_MAX_MODES; ++m) {
        THG_CUDA(cudaEventCreate(&ctx->copies[m].start));
        THG_CUDA(cudaEventCreate(&ctx->copies[m].stop));
    }
    return THG_OK;
}

extern "C" thg_status thg_create(const thg_config *config, thg_context **out, char *err,
                                 size_t errlen)
{
    *out = nullptr;
    thg_status st = thg_probe_device(config->device, err, errlen);
    if (st != THG_OK)
        return st;
    thg_context *ctx = (thg_context *)calloc(1, sizeof(thg_context));
    if (!ctx)
        return thg_fail(err, errlen, THG_ERR_OUT_OF_MEMORY, "out of host memory");
    ctx->device = config->device;
    ctx->policy = config->policy;
    ctx->rule = config->rule;
    ctx->factor_allocator = thg_device_allocator;
    st = init_context(ctx, config, err, errlen);
    if (st == THG_OK)
        st = thg_build_warmup(ctx, err, errlen);
    if (st != THG_OK) {
        thg_destroy(ctx);
        return st;
    }
    *out = ctx;
    return THG_OK;
}

extern "C" void thg_destroy(thg_context *ctx)
{
    if (!ctx)
        return;
    cudaSetDevice(ctx->device);
    if (ctx->stream)
        cudaStreamSynchronize(ctx->stream);
    if (ctx->side_stream)
        cudaStreamSynchronize(ctx->side_stream);
    thg_free_tensor(ctx);
    for (uint32_t m = 0; m < THG_MAX_MODES; ++m) {
        if (ctx->copies[m].start)
            cudaEventDestroy(ctx->copies[m].start);
        if (ctx->copies[m].stop)
            cudaEventDestroy(ctx->copies[m].stop);
    }
    if (ctx->fork_event)
        cudaEventDestroy(ctx->fork_event);
    if (ctx->join_event)
        cudaEventDestroy(ctx->join_event);
    if (ctx->side_stream)
        cudaStreamDestroy(ctx->side_stream);
    if (ctx->stream)
        cudaStreamDestroy(ctx->stream);
    free(ctx);
}

static thg_status validate_problem(uint32_t nmodes, uint64_t nnz, const uint32_t *dims,
                                   uint32_t rank, char *err, size_t errlen)
{
    /* nnz: the whole tensor's for thg_load, each share's for thg_load_shares. */
    if (nmodes < 2)
        return thg_fail(err, errlen, THG_ERR_INVALID, "tensor has %u mode%s; at least 2 needed",
                        nmodes, nmodes == 1 ? "" : "s");
    if (nmodes > THG_MAX_MODES)
        return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                        "tensor has %u modes; the GPU kernels support at most %u", nmodes,
                        THG_MAX_MODES);
    if (nnz == 0)
        return thg_fail(err, errlen, THG_ERR_INVALID, "tensor has no nonzeros");
    if (nnz > THG_MAX_NNZ)
        return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                        "tensor has %llu nonzeros; the GPU kernels support at most %u",
                        (unsigned long long)nnz, THG_MAX_NNZ);
    for (uint32_t m = 0; m < nmodes; ++m)
        if (dims[m] == 0)
            return thg_fail(err, errlen, THG_ERR_INVALID, "mode %u has dimension 0", m);
    if (rank == 0)
        return thg_fail(err, errlen, THG_ERR_INVALID, "rank 0 is invalid: it must be 1 to %u",
                        THG_MAX_RANK);
    if (rank > THG_MAX_RANK)
        return thg_fail(err, errlen, THG_ERR_UNSUPPORTED,
                        "rank %u is not supported: the GPU kernels support ranks 1 to %u",
                        rank, THG_MAX_RANK);
    return THG_OK;
}

thg_status thg_free_device_bytes(thg_context *ctx, uint64_t *out, char *err, size_t errlen)
{
    size_t free_bytes = 0, total_bytes = 0;
    THG_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    *out = ctx->free_bytes_cap && ctx->free_bytes_cap < free_bytes ? ctx->free_bytes_cap
                                                                    : free_bytes;
    return THG_OK;
}

/* What one device holds whatever its share of the tensor: the ALS and
 * sweep workspace, the column scales and the staging of factor copies. */
static uint64_t fixed_bytes(uint32_t nmodes, const uint32_t *dims, uint32_t rank)
{
    const uint64_t scale_bytes = 2ull * sizeof(float) * nmodes * rank;
    return thg_als_w_bytes(rank) + thg_als_acc_bytes(rank) + thg_sweep_bytes(nmodes, rank) +
           thg_gen_bytes(rank) + scale_bytes +
           sizeof(double) * thg_transfer_elems(nmodes, dims, rank);
}

extern "C" thg_status thg_get_memory_terms(thg_context *ctx, uint32_t nmodes,
                                           const uint32_t *dims, uint32_t rank,
                                           thg_memory_terms *out, char *err, size_t errlen)
{
    if (nmodes < 1 || nmodes > THG_MAX_MODES || rank < 1)
        return thg_fail(err, errlen, THG_ERR_INVALID, "memory terms: %u modes, rank %u",
                        nmodes, rank);
    uint32_t max_dim = 1;
    for (uint32_t m = 0; m < nmodes; ++m)
        max_dim = dims[m] > max_dim ? dims[m] : max_dim;
    /* Per nonzero at the largest share a device takes, per row at the
     * longest mode, each rounded up: both over-count the other's share. */
    const uint64_t n = THG_MAX_NNZ;
    out->fixed_bytes = fixed_bytes(nmodes, dims, rank);
    out->build_bytes_per_nonzero = (thg_build_bytes(nmodes, n, 1, ctx->kappa) + n - 1) / n;
    out->build_bytes_per_row =
        (thg_build_bytes(nmodes, 1, max_dim, ctx->kappa) + max_dim - 1) / max_dim;
    THG_CUDA(cudaSetDevice(ctx->device));
    thg_status st = thg_free_device_bytes(ctx, &out->free_bytes, err, errlen);
    if (st != THG_OK)
        return st;
    out->kappa = ctx->kappa;
    return THG_OK;
}

/* Everything load allocates, checked against free memory before any of it. */
static thg_status check_budget(thg_context *ctx, char *err, size_t errlen)
{
    uint32_t max_dim = 1;
    uint64_t factor_bytes = 0;
    uint64_t row_bitmap_bytes = 0;
    for (uint32_t m = 0; m < ctx->nmodes; ++m) {
        max_dim = ctx->dims[m] > max_dim ? ctx->dims[m] : max_dim;
        factor_bytes += sizeof(float) * ((uint64_t)ctx->dims[m] + ctx->result_end[m] -
                                         ctx->result_begin[m]) * ctx->rank;
        row_bitmap_bytes += thg_row_present_bytes(ctx->dims[m]);
    }
    uint64_t tensor_bytes = row_bitmap_bytes;
    for (uint32_t m = 0; m < ctx->nmodes; ++m)
        tensor_bytes += (uint64_t)ctx->copies[m].nnz * (ctx->nmodes + 1) * sizeof(uint32_t) +
                        (ctx->kappa + 1ull) * sizeof(uint32_t);
    const uint64_t workspace_bytes = fixed_bytes(ctx->nmodes, ctx->dims, ctx->rank);
    const uint64_t build_bytes = thg_build_workspace_bytes(ctx, max_dim);
    const uint64_t needed = tensor_bytes + factor_bytes + workspace_bytes + build_bytes;
    uint64_t free_bytes = 0;
    const thg_status st = thg_free_device_bytes(ctx, &free_bytes, err, errlen);
    if (st != THG_OK)
        return st;
    if (needed > free_bytes)
        return thg_fail(err, errlen, THG_ERR_OUT_OF_MEMORY,
                        "tensor does not fit on %s: %llu bytes needed (%u mode copies "
                        "%llu, factors and results %llu, build workspace %llu), %llu bytes "
                        "available",
                        ctx->device_name, (unsigned long long)needed, ctx->nmodes,
                        (unsigned long long)tensor_bytes, (unsigned long long)factor_bytes,
                        (unsigned long long)build_bytes, (unsigned long long)free_bytes);
    ctx->tensor_bytes = tensor_bytes;
    ctx->factor_bytes = factor_bytes;
    ctx->workspace_bytes = workspace_bytes;
    return THG_OK;
}

static thg_status device_alloc(void *, size_t bytes, void **ptr, char *err, size_t errlen)
{
    THG_CUDA(cudaMalloc(ptr, bytes));
    return THG_OK;
}

static void device_free(void *, void *ptr) { cudaFree(ptr); }

const thg_factor_allocator thg_device_allocator = {device_alloc, device_free, nullptr};

static thg_status alloc_dense(thg_context *ctx, char *err, size_t errlen)
{
    const size_t R = ctx->rank;
    for (uint32_t m = 0; m < ctx->nmodes; ++m) {
        const size_t bytes = sizeof(float) * ctx->dims[m] * R;
        const thg_factor_allocator &a = ctx->factor_allocator;
        const thg_status st = a.alloc(a.user, bytes, (void **)&ctx->factors[m], err, errlen);
        if (st != THG_OK)
            return st;
        const size_t held_rows = ctx->result_end[m] - ctx->result_begin[m];
        const size_t result_bytes = sizeof(float) * (held_rows > 0 ? held_rows : 1) * R;
        THG_CUDA(cudaMalloc(&ctx->result_blocks[m], result_bytes));
        /* Indexed by row whatever the rows held: no reader or writer goes
         * outside them (an address computation only). */
        ctx->results[m] = ctx->result_blocks[m] - ctx->result_begin[m] * R;
        /* Defined contents until set_factor, so a premature mttkrp reads
         * zeros rather than garbage. */
        THG_CUDA(cudaMemsetAsync(ctx->factors[m], 0, bytes, ctx->stream));
        /* The tests' check that no reader takes a result row the MTTKRP
         * never writes (rows without nonzeros) for anything but zero. */
        if (ctx->poison_results)
            THG_CUDA(cudaMemsetAsync(ctx->result_blocks[m], 0xff, result_bytes,
                                     ctx->stream)); /* NaN */
    }
    /* Every factor starts normalised (column scale 1); result scales are
     * written by each MTTKRP. */
    const size_t scale_floats = (size_t)ctx->nmodes * R;
    THG_CUDA(cudaMalloc(&ctx->col_scale, 2 * sizeof(float) * scale_floats));
    ctx->result_scale = ctx->col_scale + scale_floats;
    const thg_status filled = thg_fill_floats(ctx, ctx->col_scale, 2 * scale_floats, 1.0f, err,
                                              errlen);
    if (filled != THG_OK)
        return filled;
    ctx->transfer_elems = thg_transfer_elems(ctx->nmodes, ctx->dims, ctx->rank);
    THG_CUDA(cudaMalloc(&ctx->transfer_dev, sizeof(double) * ctx->transfer_elems));
    THG_CUDA(cudaMalloc(&ctx->als_w, thg_als_w_bytes(ctx->rank)));
    const size_t acc_bytes = thg_als_acc_bytes(ctx->rank);
    THG_CUDA(cudaMalloc(&ctx->als_acc_block, acc_bytes));
    /* Zero once: every update's last block re-zeroes them (als.cu). */
    THG_CUDA(cudaMemsetAsync(ctx->als_acc_block, 0, acc_bytes, ctx->stream));
    thg_als_acc_view(ctx->als_acc_block, ctx->rank, &ctx->als_acc);
    /* Pinned: W's upload is a true async copy; the results come back
     * through mapped memory the last ALS block writes directly. */
    THG_CUDA(cudaHostAlloc(&ctx->als_w_host, thg_als_w_bytes(ctx->rank), cudaHostAllocDefault));
    THG_CUDA(cudaHostAlloc(&ctx->als_out_host, sizeof(double) * (R * R + 2 * R),
                           cudaHostAllocMapped));
    THG_CUDA(cudaHostGetDevicePointer(&ctx->als_out_dev, ctx->als_out_host, 0));
    thg_status st = thg_sweep_alloc(ctx, err, errlen);
    if (st == THG_OK)
        st = thg_gen_alloc(ctx, err, errlen);
    if (st != THG_OK)
        return st;
    return thg_als_prepare(ctx, err, errlen);
}

extern "C" thg_status thg_load_shares(thg_context *ctx, uint32_t nmodes, const uint32_t *dims,
                                      const thg_mode_input *inputs, uint32_t rank, char *err,
                                      size_t errlen)
{
    if (nmodes < 1 || nmodes > THG_MAX_MODES)
        return validate_problem(nmodes, 1, dims, rank, err, errlen);
    uint64_t largest = 0;
    for (uint32_t m = 0; m < nmodes; ++m) {
        const thg_status st = validate_problem(nmodes, inputs[m].nnz, dims, rank, err, errlen);
        if (st != THG_OK)
            return st;
        if (inputs[m].result_begin > inputs[m].result_end || inputs[m].result_end > dims[m])
            return thg_fail(err, errlen, THG_ERR_INVALID,
                            "mode %u: result rows [%llu, %llu) outside its %u rows", m,
                            (unsigned long long)inputs[m].result_begin,
                            (unsigned long long)inputs[m].result_end, dims[m]);
        largest = inputs[m].nnz > largest ? inputs[m].nnz : largest;
    }
    THG_CUDA(cudaSetDevice(ctx->device));
    THG_CUDA(cudaStreamSynchronize(ctx->stream));
    thg_free_tensor(ctx);
    ctx->nmodes = nmodes;
    ctx->nnz = (uint32_t)largest;
    ctx->rank = rank;
    memset(ctx->dims, 0, sizeof(ctx->dims));
    memcpy(ctx->dims, dims, sizeof(uint32_t) * nmodes);
    for (uint32_t m = 0; m < nmodes; ++m) {
        ctx->copies[m].nnz = (uint32_t)inputs[m].nnz;
        ctx->result_begin[m] = inputs[m].result_begin;
        ctx->result_end[m] = inputs[m].result_end;
    }
    thg_status st = check_budget(ctx, err, errlen);
    if (st == THG_OK)
        st = alloc_dense(ctx, err, errlen);
    if (st == THG_OK)
        st = thg_build_copies(ctx, inputs, err, errlen);
    if (st != THG_OK) {
        cudaStreamSynchronize(ctx->stream);
        thg_free_tensor(ctx);
        return st;
    }
    /* Summed over processes, a row this share lacks may be another's: the
     * results are read whole (thg_launch_mttkrp zeroes them). */
    for (uint32_t m = 0; ctx->processes != nullptr && m < nmodes; ++m)
        ctx->copies[m].has_empty_rows = 0;
    return THG_OK;
}

extern "C" void thg_unload(thg_context *ctx)
{
    if (cudaSetDevice(ctx->device) != cudaSuccess)
        return;
    cudaStreamSynchronize(ctx->stream);
    cudaStreamSynchronize(ctx->side_stream);
    thg_free_tensor(ctx);
}

extern "C" thg_status thg_load(thg_context *ctx, uint32_t nmodes, uint64_t nnz,
                               const uint32_t *dims, const uint32_t *const *indices,
                               const double *values, uint32_t rank, char *err, size_t errlen)
{
    thg_status st = validate_problem(nmodes, nnz, dims, rank, err, errlen);
    if (st != THG_OK)
        return st;
    thg_mode_input inputs[THG_MAX_MODES];
    for (uint32_t m = 0; m < nmodes; ++m)
        inputs[m] = {nnz, indices, values, 0, dims[m]};
    return thg_load_shares(ctx, nmodes, dims, inputs, rank, err, errlen);
}

thg_status thg_check_mode(const thg_context *ctx, uint32_t mode, char *err, size_t errlen)
{
    if (ctx->nmodes == 0)
        return thg_fail(err, errlen, THG_ERR_STATE, "no tensor loaded");
    if (mode >= ctx->nmodes)
        return thg_fail(err, errlen, THG_ERR_INVALID,
                        "mode %u is out of range: the tensor has modes 0 to %u", mode,
                        ctx->nmodes - 1);
    return THG_OK;
}

static thg_status resolve_timing(thg_context *ctx, thg_mode_copy &copy, char *err,
                                 size_t errlen);

/* `record_flags` makes the event records real graph nodes when the stream
 * is being captured. */
thg_status thg_enqueue_mttkrp(thg_context *ctx, uint32_t mode, unsigned record_flags, char *err,
                              size_t errlen)
{
    thg_mode_copy &copy = ctx->copies[mode];
    THG_CUDA(cudaEventRecordWithFlags(copy.start, ctx->stream, record_flags));
    const thg_status st = thg_launch_mttkrp(ctx, mode, nullptr, 1, err, errlen);
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaEventRecordWithFlags(copy.stop, ctx->stream, record_flags));
    return THG_OK;
}

static thg_status enqueue_als(thg_context *ctx, uint32_t mode, unsigned record_flags, char *err,
                              size_t errlen)
{
    (void)record_flags;
    THG_CUDA(cudaMemcpyAsync(ctx->als_w, ctx->als_w_host, thg_als_w_bytes(ctx->rank),
                             cudaMemcpyHostToDevice, ctx->stream));
    return thg_launch_als(ctx, mode, ctx->als_out_dev, nullptr, nullptr, nullptr, nullptr, err,
                          errlen);
}

static thg_status capture(thg_context *ctx, uint32_t arg, thg_enqueue_fn fn,
                          cudaGraphExec_t *exec, char *err, size_t errlen)
{
    THG_CUDA(cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal));
    const thg_status st = fn(ctx, arg, cudaEventRecordExternal, err, errlen);
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(ctx->stream, &graph); /* also after a failure */
    if (st == THG_OK && e == cudaSuccess)
        e = cudaGraphInstantiate(exec, graph, 0);
    if (graph)
        cudaGraphDestroy(graph);
    if (st != THG_OK)
        return st;
    THG_CUDA(e);
    return THG_OK;
}

/* The sequences are small operations whose launch gaps would be a large
 * share of a CP-ALS iteration on the small shapes (kernels/DESIGN.md).
 * A capture that fails turns graphs off for the context, with the reason
 * in graph_note. */
thg_status thg_run_sequence(thg_context *ctx, uint32_t arg, thg_enqueue_fn fn,
                            cudaGraphExec_t *exec, char *err, size_t errlen)
{
    if (ctx->use_graphs && !*exec) {
        char why[TH_GPU_NOTE_SIZE];
        if (capture(ctx, arg, fn, exec, why, sizeof(why)) != THG_OK) {
            cudaGetLastError(); /* capture errors are not sticky; clear the record */
            *exec = nullptr;
            ctx->use_graphs = 0;
            snprintf(ctx->graph_note, sizeof(ctx->graph_note), "off (capture failed: %.60s)",
                     why);
        }
    }
    if (ctx->use_graphs && *exec) {
        THG_CUDA(cudaGraphLaunch(*exec, ctx->stream));
        return THG_OK;
    }
    return fn(ctx, arg, cudaEventRecordDefault, err, errlen);
}

extern "C" thg_status thg_mttkrp(thg_context *ctx, uint32_t mode, char *err, size_t errlen)
{
    thg_status st = thg_check_mode(ctx, mode, err, errlen);
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaSetDevice(ctx->device));
    thg_mode_copy &copy = ctx->copies[mode];
    st = thg_run_sequence(ctx, mode, thg_enqueue_mttkrp, &copy.mttkrp_graph, err, errlen);
    if (st != THG_OK)
        return st;
    copy.timing_pending = 1;
    copy.has_result = 1;
    /* The ABI's mttkrp returns when the result is complete: the host's wall
     * time around the call must mean the MTTKRP's time (A/B comparisons
     * report it beside the event time), and a kernel fault must surface
     * here, in the call that caused it. Waiting on the stop event alone
     * costs CP-ALS nothing: it asks for this time right after anyway. */
    return resolve_timing(ctx, copy, err, errlen);
}

extern "C" thg_status thg_get_result(thg_context *ctx, uint32_t mode, double *data, char *err,
                                     size_t errlen)
{
    thg_status st = thg_check_mode(ctx, mode, err, errlen);
    if (st != THG_OK)
        return st;
    if (!ctx->copies[mode].has_result)
        return thg_fail(err, errlen, THG_ERR_STATE, "no MTTKRP result for mode %u yet", mode);
    THG_CUDA(cudaSetDevice(ctx->device));
    const thg_mode_copy &copy = ctx->copies[mode];
    return thg_download_matrix(ctx, data, ctx->results[mode], ctx->dims[mode],
                               ctx->result_scale + (size_t)mode * ctx->rank,
                               copy.has_empty_rows ? copy.row_present : nullptr, 0, err, errlen);
}

thg_status thg_als_stage(thg_context *ctx, uint32_t mode, const double *w, int use_max_norm,
                         char *err, size_t errlen)
{
    thg_status st = thg_check_mode(ctx, mode, err, errlen);
    if (st != THG_OK)
        return st;
    if (!ctx->copies[mode].has_result)
        return thg_fail(err, errlen, THG_ERR_STATE,
                        "als_update on mode %u needs an MTTKRP result of that mode first",
                        mode);
    const size_t R = ctx->rank;
    /* The staging buffer is free: the previous update synchronised. */
    for (size_t k = 0; k < R * R; ++k)
        ctx->als_w_host[k] = (float)w[k];
    memcpy(ctx->als_w_host + R * R, &use_max_norm, sizeof(int));
    return THG_OK;
}

void thg_als_read_out(const thg_context *ctx, double *lambda, double *gram, double *inner)
{
    const size_t R = ctx->rank;
    const double *out = ctx->als_out_host; /* [lambda | gram | inner] */
    memcpy(lambda, out, sizeof(double) * R);
    memcpy(gram, out + R, sizeof(double) * R * R);
    memcpy(inner, out + R + R * R, sizeof(double) * R);
}

extern "C" thg_status thg_als_update(thg_context *ctx, uint32_t mode, const double *w,
                                     int use_max_norm, double *lambda, double *gram,
                                     double *inner, char *err, size_t errlen)
{
    thg_status st = thg_als_stage(ctx, mode, w, use_max_norm, err, errlen);
    if (st != THG_OK)
        return st;
    THG_CUDA(cudaSetDevice(ctx->device));
    st = thg_run_sequence(ctx, mode, enqueue_als, &ctx->copies[mode].als_graph, err, errlen);
    /* The only synchronisation of the update; also on failure, so the
     * staging buffer is not rewritten under a pending copy. */
    const cudaError_t e = cudaStreamSynchronize(ctx->stream);
    if (st != THG_OK)
        return st;
    THG_CUDA(e);
    thg_als_read_out(ctx, lambda, gram, inner);
    return THG_OK;
}

extern "C" void thg_get_info(const thg_context *ctx, thg_info *info)
{
    memset(info, 0, sizeof(*info));
    snprintf(info->device_name, sizeof(info->device_name), "%s", ctx->device_name);
    info->device = ctx->device;
    info->kappa = ctx->kappa;
    info->P = ctx->P;
    info->rule = ctx->rule;
    if (ctx->nmodes > 0) {
        const thg_shape shape = thg_launch_shape(ctx->rank, ctx->P);
        info->lanes = shape.lanes;
        info->groups = shape.groups;
        info->P = shape.groups;
    }
    info->nmodes = ctx->nmodes;
    info->tensor_bytes = ctx->tensor_bytes;
    info->factor_bytes = ctx->factor_bytes;
    info->workspace_bytes = ctx->workspace_bytes;
    info->build_seconds = ctx->build_seconds;
    info->upload_seconds = ctx->upload_seconds;
    snprintf(info->graphs, sizeof(info->graphs), "%s", ctx->graph_note);
    info->last_sweep_seconds =
        ctx->nmodes > 0 && ctx->sweep.last_seconds > 0 ? ctx->sweep.last_seconds : -1.0;
}

/* Waits for the latest mttkrp of the mode (its stop event only) the first
 * time its duration is asked for. */
static thg_status resolve_timing(thg_context *ctx, thg_mode_copy &copy, char *err,
                                 size_t errlen)
{
    if (!copy.timing_pending)
        return THG_OK;
    THG_CUDA(cudaSetDevice(ctx->device));
    THG_CUDA(cudaEventSynchronize(copy.stop));
    float ms = 0.0f;
    THG_CUDA(cudaEventElapsedTime(&ms, copy.start, copy.stop));
    copy.last_seconds = ms * 1e-3;
    copy.timing_pending = 0;
    return THG_OK;
}

extern "C" thg_status thg_get_mode_stats(thg_context *ctx, uint32_t mode,
                                         thg_mode_stats *stats, char *err, size_t errlen)
{
    thg_status st = thg_check_mode(ctx, mode, err, errlen);
    if (st != THG_OK)
        return st;
    thg_mode_copy &copy = ctx->copies[mode];
    st = resolve_timing(ctx, copy, err, errlen);
    if (st != THG_OK)
        return st;
    stats->scheme = copy.scheme;
    snprintf(stats->reason, sizeof(stats->reason), "%s", copy.reason);
    stats->partitions = ctx->kappa;
    stats->last_mttkrp_seconds = copy.has_result ? copy.last_seconds : -1.0;
    return THG_OK;
}
