/* ABI glue over th_kernels, shared by the three GPU plugins. */
#include "gpu_plugin.h"
#include "kernel_bridge.h"

#include "gpu_options.h"
#include "group_load.h"
#include "memory_plan.h"
#include "share_extract.h"

#include <tensorhost/plugin_sdk.h>

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One device (ctx), or several (group: the option devices lists two or
 * more, kernels/group.cu, ctx its rank 0's context); or, in a run of
 * several processes whose host deals each mode's nonzeros (load_tensor's
 * mode_nonzeros), one device a process and a group across the processes
 * (across: ctx is this process's rank, the group's adopted context). */
struct th_instance {
    thg_context *ctx;
    thg_group *group;
    int across;
    /* The tensor loaded across processes: its shape and rank (0 modes
     * before), for results gathered on the host (get_result_across). */
    uint32_t nmodes, rank, dims[THG_MAX_MODES];
    const th_host_services *host;
    const char *id; /* the plugin's static id string */
    /* A run of several processes: the GPUs' exchange across them, or NULL
     * with processes_note saying why the host sums the MTTKRPs instead. */
    thg_processes *processes;
    char processes_note[160];
};

/* snprintf at the end of `buf`; stops quietly when the buffer is full. */
static void append(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t size, const char *fmt, ...)
{
    const size_t used = strlen(buf);
    if (used + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, size - used, fmt, ap);
    va_end(ap);
}

/* The norm argument of als_update and als_sweep. */
static th_status check_norm(const char *call, int32_t norm, char *err)
{
    if (norm == TH_NORM_2 || norm == TH_NORM_MAX)
        return TH_OK;
    return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "%s: unknown norm %d (expected %d or %d)", call,
                (int)norm, TH_NORM_2, TH_NORM_MAX);
}

/* devices = "all": every visible device (at most THG_MAX_GROUP_RANKS),
 * one of them being the single-device path. */
static th_status resolve_all_devices(thg_config *config, gpu_device_list *devices, char *err)
{
    int count = 0;
    char msg[TH_ERROR_SIZE / 2];
    const thg_status st = thg_device_count(&count, msg, sizeof msg);
    if (st != THG_OK)
        return th_plugin_fail(err, gpu_plugin_status(st), "option devices=all: %s", msg);
    if (count > (int)THG_MAX_GROUP_RANKS)
        count = (int)THG_MAX_GROUP_RANKS;
    devices->all = 0;
    devices->count = count > 1 ? (uint32_t)count : 0u;
    for (int d = 0; d < count; ++d)
        devices->ordinal[d] = d;
    if (count == 1)
        config->device = 0;
    return TH_OK;
}

/* The processes of the run (th_host_services.processes, ABI 1.8): 1 from
 * an older host. */
static uint32_t run_processes(const th_host_services *host, uint32_t *rank)
{
    *rank = 0;
    if (!host || !TH_HAS_FIELD(host->struct_size, th_host_services, reduce_max) ||
        !host->processes || !host->broadcast || !host->reduce_max)
        return 1;
    return host->processes(host->host_data, rank);
}

/* Why a process of a run of several cannot take part in the GPUs' exchange
 * across them ("" when it can): opens the NCCL it needs. */
static void open_processes(th_instance *instance, int grouped, char *why, size_t size)
{
    const char *off = getenv("TH_GPU_PROCESS_SUMS");
    if (off && strcmp(off, "0") == 0) {
        append(why, size, "TH_GPU_PROCESS_SUMS=0");
        return;
    }
    if (grouped) {
        append(why, size, "several devices in a process");
        return;
    }
    char msg[TH_ERROR_SIZE / 2];
    if (thg_processes_open(thg_get_device(instance->ctx), &instance->processes, msg,
                           sizeof msg) != THG_OK)
        append(why, size, "%s", msg);
}

/* The GPUs' exchange across the run's processes, set up collectively:
 * every process says whether it can take part (or failed creating its
 * instance: `failed`, returned after the collectives), and all take part or
 * none. TH_OK with instance->processes NULL where none does
 * (processes_note says why: the host then sums the MTTKRPs); an error
 * where this process failed or the host's collectives did. Makes the same
 * collectives on every process, whatever it found. `rank` of `count`
 * processes (run_processes). */
static th_status join_processes(th_instance *instance, th_status failed, int grouped,
                                uint32_t rank, uint32_t count, char *err)
{
    const th_host_services *host = instance->host;
    char why[sizeof instance->processes_note] = "";
    if (!failed)
        open_processes(instance, grouped, why, sizeof why);
    /* 2: this process failed (it says why; the others go on, and the host
     * ends the run with its error); 1: it cannot take part. */
    uint64_t worst = failed ? 2u : why[0] ? 1u : 0u;
    th_status st = host->reduce_max(host->host_data, &worst, 1, err);
    if (st != TH_OK || failed)
        return st != TH_OK ? st : failed;
    if (worst == 2u && !why[0])
        append(why, sizeof why, "another process could not create its instance");
    /* Rank 0's id and whether it made one, to every process. */
    struct {
        unsigned char id[THG_PROCESSES_ID_BYTES];
        uint64_t made;
    } shared = {{0}, 0};
    char msg[TH_ERROR_SIZE / 2] = "";
    if (worst == 0u && rank == 0)
        shared.made = thg_processes_unique_id(instance->processes, shared.id, msg,
                                              sizeof msg) == THG_OK;
    if (worst == 0u) {
        st = host->broadcast(host->host_data, &shared, sizeof shared, err);
        if (st != TH_OK)
            return st;
        uint64_t joined_failed = 1;
        if (shared.made)
            joined_failed = thg_processes_join(instance->processes, rank, count, shared.id, msg,
                                               sizeof msg) != THG_OK;
        else if (rank == 0)
            append(why, sizeof why, "rank 0 made no NCCL id: %s", msg);
        else
            append(why, sizeof why, "rank 0 made no NCCL id");
        if (shared.made && joined_failed)
            append(why, sizeof why, "%s", msg);
        st = host->reduce_max(host->host_data, &joined_failed, 1, err);
        if (st != TH_OK)
            return st;
        if (!joined_failed) {
            char attach[TH_ERROR_SIZE / 2];
            if (thg_attach_processes(instance->ctx, instance->processes, attach,
                                     sizeof attach) != THG_OK)
                return th_plugin_fail(err, TH_ERR_INTERNAL, "%s", attach);
            append(instance->processes_note, sizeof instance->processes_note, "%s",
                   thg_processes_describe(instance->processes));
            return TH_OK;
        }
        if (!why[0])
            append(why, sizeof why, "another process could not join NCCL");
    } else if (!why[0]) {
        append(why, sizeof why, "another process cannot take part");
    }
    thg_processes_destroy(instance->processes);
    instance->processes = NULL;
    append(instance->processes_note, sizeof instance->processes_note,
           "off, the host sums the MTTKRPs (%s)", why);
    return TH_OK;
}

/* The instance on its device or devices (create's work before the run's
 * processes meet, join_processes). */
static th_status create_alone(thg_policy policy, const char *plugin_id, const th_option *options,
                              uint32_t n_options, th_instance *instance, char *err)
{
    if (n_options > 0 && !options)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "create: options is NULL");
    /* No device is said before any option is judged: "auto" falls back to
     * the CPU backend on such a host whatever the options hold. */
    char probe[TH_ERROR_SIZE];
    if (thg_probe_device(0, probe, sizeof probe) == THG_ERR_NO_DEVICE)
        return th_plugin_fail(err, TH_ERR_NO_DEVICE, "%s", probe);
    thg_config config = {
        .device = 0, .kappa = 0, .P = 0, .policy = policy, .rule = THG_RULE_BALANCED};
    gpu_device_list devices = {0};
    th_status st = gpu_parse_options(options, n_options, plugin_id, &config, &devices, err);
    if (st == TH_OK && devices.all)
        st = resolve_all_devices(&config, &devices, err);
    if (st != TH_OK)
        return st;
    char msg[TH_ERROR_SIZE / 2]; /* room for the "option device=N: " prefix */
    if (devices.count > 1) {
        const thg_status gst = thg_group_create(&config, devices.ordinal, devices.count,
                                                &instance->group, msg, sizeof(msg));
        if (gst != THG_OK)
            return th_plugin_fail(err, gpu_plugin_status(gst), "option devices: %s", msg);
        instance->ctx = thg_group_rank(instance->group, 0);
        return TH_OK;
    }
    const thg_status gst = thg_create(&config, &instance->ctx, msg, sizeof(msg));
    if (gst == THG_ERR_INVALID)
        return th_plugin_fail(err, gpu_plugin_status(gst), "option device=%d: %s",
                              config.device, msg);
    if (gst != THG_OK)
        return th_plugin_fail(err, gpu_plugin_status(gst), "%s", msg);
    return TH_OK;
}

th_status gpu_plugin_create(thg_policy policy, const char *plugin_id, const th_option *options,
                            uint32_t n_options, const th_host_services *host, th_instance **out,
                            char *err)
{
    if (!out)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "create: out is NULL");
    *out = NULL;
    th_instance *instance = calloc(1, sizeof(*instance));
    if (!instance)
        return th_plugin_fail(err, TH_ERR_OUT_OF_MEMORY, "out of host memory");
    instance->host = host;
    instance->id = plugin_id;
    th_status st = create_alone(policy, plugin_id, options, n_options, instance, err);
    uint32_t rank = 0;
    const uint32_t count = run_processes(host, &rank);
    if (count > 1) {
        /* Every process meets the others, whatever it found. */
        const th_status joined =
            join_processes(instance, st, instance->group != NULL, rank, count, err);
        if (st == TH_OK)
            st = joined;
    }
    if (st != TH_OK) {
        gpu_plugin_destroy(instance);
        return st;
    }
    *out = instance;
    return TH_OK;
}

void gpu_plugin_destroy(th_instance *instance)
{
    if (!instance)
        return;
    thg_group_destroy(instance->group); /* rank 0's context with it, unless across */
    if (!instance->group || instance->across)
        thg_destroy(instance->ctx);
    thg_processes_destroy(instance->processes); /* after the context that used it */
    free(instance);
}

/* " rule=balanced" for gpu-adaptive, "" for the forced plugins. */
static const char *rule_text(const th_instance *instance, const thg_info *info)
{
    if (strcmp(instance->id, "gpu-adaptive") != 0)
        return "";
    return info->rule == THG_RULE_PAPER ? " rule=paper" : " rule=balanced";
}

static void log_layout(const th_instance *instance)
{
    const th_host_services *host = instance->host;
    if (!host || !TH_HAS_FIELD(host->struct_size, th_host_services, log) || !host->log)
        return;
    thg_info info;
    thg_get_info(instance->ctx, &info);
    char schemes[2 * THG_MAX_MODES + 1] = "";
    for (uint32_t m = 0; m < info.nmodes; ++m) {
        thg_mode_stats s;
        char scratch[TH_ERROR_SIZE];
        if (thg_get_mode_stats(instance->ctx, m, &s, scratch, sizeof(scratch)) == THG_OK)
            snprintf(schemes + strlen(schemes), sizeof(schemes) - strlen(schemes), "%s%d",
                     m ? "," : "", s.scheme);
    }
    char line[512];
    snprintf(line, sizeof(line),
             "%s: %s, kappa=%u P=%u lanes=%u%s schemes=%s, copies %.1f MiB, factors %.1f MiB, "
             "uploaded in %.3f ms, built in %.3f ms",
             instance->id, info.device_name, info.kappa, info.P, info.lanes,
             rule_text(instance, &info), schemes, info.tensor_bytes / 1048576.0,
             info.factor_bytes / 1048576.0, info.upload_seconds * 1e3,
             info.build_seconds * 1e3);
    host->log(host->host_data, TH_LOG_INFO, line);
    if (instance->group) {
        uint32_t first = 0;
        thg_group_local_ranks(instance->group, &first);
        snprintf(line, sizeof(line),
                 "%s: nonzeros of every mode shared out over %u ranks (%s); rank %u's layout "
                 "above",
                 instance->id, thg_group_size(instance->group),
                 thg_group_describe(instance->group), first);
        host->log(host->host_data, TH_LOG_INFO, line);
    }
    for (uint32_t m = 0; m < info.nmodes; ++m) {
        thg_mode_stats s;
        char scratch[TH_ERROR_SIZE];
        if (thg_get_mode_stats(instance->ctx, m, &s, scratch, sizeof(scratch)) != THG_OK)
            continue;
        snprintf(line, sizeof(line), "%s: mode %u -> scheme %d (%s)", instance->id, m, s.scheme,
                 s.reason);
        host->log(host->host_data, TH_LOG_INFO, line);
    }
}

/* Per mode, the prefix sums of its rows' nonzero counts (dims[m] + 1
 * entries); NULL when the host cannot hold them, or when they would take
 * more host memory than the tensor itself (modes far longer than the
 * nonzeros: the advice is not worth that). */
static void free_row_offsets(uint64_t **offsets, uint32_t nmodes)
{
    for (uint32_t m = 0; offsets && m < nmodes; ++m)
        free(offsets[m]);
    free(offsets);
}

static uint64_t **row_offsets_of(const th_coo_tensor *t)
{
    uint64_t offset_bytes = 0;
    for (uint32_t m = 0; m < t->nmodes; ++m)
        offset_bytes += sizeof(uint64_t) * ((uint64_t)t->dims[m] + 1u);
    if (offset_bytes / (4u * t->nmodes + 8u) > t->nnz)
        return NULL;
    const thp_coo_view view = {t->nmodes, t->nnz, t->dims, t->indices, t->values};
    uint64_t **offsets = calloc(t->nmodes, sizeof *offsets);
    for (uint32_t m = 0; offsets && m < t->nmodes; ++m) {
        offsets[m] = malloc(sizeof(uint64_t) * ((size_t)t->dims[m] + 1u));
        if (offsets[m] == NULL || thp_count_rows(&view, m, offsets[m]) != 0) {
            free_row_offsets(offsets, t->nmodes);
            return NULL;
        }
    }
    return offsets;
}

/* After a load refused for memory or size: how many devices like this one
 * the tensor would take, its nonzeros shared out by the memory plan
 * (memory_plan.h), appended to `msg`. Nothing when the plan cannot be
 * made, or says one device. */
static void append_device_advice(th_instance *instance, const th_coo_tensor *t, uint32_t rank,
                                 char *msg, size_t size)
{
    thg_memory_terms terms;
    char ignored[TH_ERROR_SIZE];
    if (thg_get_memory_terms(instance->ctx, t->nmodes, t->dims, rank, &terms, ignored,
                             sizeof ignored) != THG_OK)
        return;
    uint64_t **offsets = row_offsets_of(t);
    if (offsets == NULL)
        return;
    const thp_memory_model model =
        gpu_memory_model(t, rank, &terms, (const uint64_t *const *)offsets);
    char advice[160];
    const uint32_t devices = thp_plan_advice(&model, terms.free_bytes, THG_MAX_NNZ,
                                             THP_MAX_DEVICES, advice, sizeof advice);
    const size_t used = strlen(msg);
    if (devices != 1)
        snprintf(msg + used, size - used, "; %s; %.1f GiB free on this one", advice,
                 terms.free_bytes / 1073741824.0);
    free_row_offsets(offsets, t->nmodes);
}

/* A process's device between the two ways of a run of several processes:
 * a group across them (`across`: the host dealt each mode's nonzeros, and
 * the processes run the devices' sweep over their owned rows), or the
 * context alone, its MTTKRPs summed over the processes. Collective, as
 * the load that calls it: every process switches alike. */
static th_status switch_across(th_instance *instance, int across, char *err)
{
    char msg[TH_ERROR_SIZE];
    if (across && !instance->across) {
        thg_unload(instance->ctx);
        thg_status st = thg_attach_processes(instance->ctx, NULL, msg, sizeof msg);
        if (st == THG_OK)
            st = thg_group_create_across(instance->ctx, instance->processes, &instance->group,
                                         msg, sizeof msg);
        if (st != THG_OK)
            return th_plugin_fail(err, gpu_plugin_status(st), "the group across processes: %s",
                                  msg);
        instance->across = 1;
    } else if (!across && instance->across) {
        thg_group_destroy(instance->group); /* the context stays, without its tensor */
        instance->group = NULL;
        instance->across = 0;
        const thg_status st =
            thg_attach_processes(instance->ctx, instance->processes, msg, sizeof msg);
        if (st != THG_OK)
            return th_plugin_fail(err, gpu_plugin_status(st), "%s", msg);
    }
    return TH_OK;
}

th_status gpu_plugin_load_tensor(th_instance *instance, const th_coo_tensor *tensor,
                                 uint32_t rank, char *err)
{
    if (!instance || !tensor)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "load_tensor: instance or tensor is NULL");
    if (tensor->struct_size < TH_COO_TENSOR_V1_0_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "load_tensor: th_coo_tensor is %u bytes, shorter than the %zu of "
                              "ABI 1.0",
                              tensor->struct_size, (size_t)TH_COO_TENSOR_V1_0_SIZE);
    if (!tensor->dims || !tensor->indices || !tensor->values)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "load_tensor: tensor arrays are NULL");
    const int dealt = instance->processes && tensor->struct_size >= TH_COO_TENSOR_V1_10_SIZE &&
                      tensor->mode_nonzeros != NULL;
    if (dealt || instance->across) {
        const th_status ast = switch_across(instance, dealt, err);
        if (ast != TH_OK)
            return ast;
    }
    instance->nmodes = 0;
    if (instance->group) {
        const th_status gst =
            instance->across
                ? thg_group_load_across(instance->group, tensor, rank, instance->host, err)
                : thg_group_load_tensor(instance->group, tensor, rank, err);
        if (gst != TH_OK)
            return gst;
        instance->nmodes = tensor->nmodes;
        instance->rank = rank;
        memcpy(instance->dims, tensor->dims, sizeof(uint32_t) * tensor->nmodes);
        log_layout(instance);
        return TH_OK;
    }
    char msg[TH_ERROR_SIZE];
    const thg_status st = thg_load(instance->ctx, tensor->nmodes, tensor->nnz, tensor->dims,
                                   tensor->indices, tensor->values, rank, msg, sizeof(msg));
    if (st == THG_ERR_OUT_OF_MEMORY || (st == THG_ERR_UNSUPPORTED && tensor->nnz > THG_MAX_NNZ))
        append_device_advice(instance, tensor, rank, msg, sizeof(msg));
    if (st != THG_OK)
        return th_plugin_fail(err, gpu_plugin_status(st), "%s", msg);
    log_layout(instance);
    return TH_OK;
}

/* Runs a th_kernels call and turns its status and message into the ABI's. */
#define GPU_CALL(call)                                                 \
    do {                                                               \
        char msg_[TH_ERROR_SIZE];                                      \
        const size_t errlen = sizeof(msg_);                            \
        char *const gpu_err = msg_;                                    \
        const thg_status st_ = (call);                                 \
        if (st_ != THG_OK)                                             \
            return th_plugin_fail(err, gpu_plugin_status(st_), "%s", msg_);           \
    } while (0)

th_status gpu_plugin_set_factor(th_instance *instance, uint32_t mode, const double *data,
                                char *err)
{
    if (!instance || !data)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "set_factor: NULL argument");
    GPU_CALL(instance->group ? thg_group_set_factor(instance->group, mode, data, gpu_err, errlen)
                             : thg_set_factor(instance->ctx, mode, data, gpu_err, errlen));
    return TH_OK;
}

th_status gpu_plugin_get_factor(th_instance *instance, uint32_t mode, double *data, char *err)
{
    if (!instance || !data)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "get_factor: NULL argument");
    GPU_CALL(instance->group ? thg_group_get_factor(instance->group, mode, data, gpu_err, errlen)
                             : thg_get_factor(instance->ctx, mode, data, gpu_err, errlen));
    return TH_OK;
}

th_status gpu_plugin_mttkrp(th_instance *instance, uint32_t mode, char *err)
{
    if (!instance)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "mttkrp: instance is NULL");
    GPU_CALL(instance->group ? thg_group_mttkrp(instance->group, mode, gpu_err, errlen)
                             : thg_mttkrp(instance->ctx, mode, gpu_err, errlen));
    return TH_OK;
}

/* A group across processes: each process's owned rows, every other row
 * zero, then the maximum over the processes of the doubles' bits as
 * integers (every bit pattern is at least zero's), which is each row as
 * its owner gave it: the whole result on every process, exactly.
 * Collective, as the MTTKRPs are in such a run. */
static th_status get_result_across(th_instance *instance, uint32_t mode, double *data,
                                   char *err)
{
    if (mode >= instance->nmodes)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "get_mttkrp_result: mode %u of a %u-mode tensor", mode,
                              instance->nmodes);
    const uint64_t count = (uint64_t)instance->dims[mode] * instance->rank;
    memset(data, 0, sizeof(double) * count);
    char msg[TH_ERROR_SIZE];
    const thg_status st = thg_group_get_result(instance->group, mode, data, msg, sizeof msg);
    /* Every process meets the others, a failure too: first whether any
     * failed, then, where none did, the rows. */
    const th_host_services *host = instance->host;
    char reduce_err[TH_ERROR_SIZE];
    uint64_t failed = st != THG_OK;
    th_status reduced = host->reduce_max(host->host_data, &failed, 1, reduce_err);
    if (reduced == TH_OK && !failed)
        reduced = host->reduce_max(host->host_data, (uint64_t *)data, count, reduce_err);
    if (st != THG_OK)
        return th_plugin_fail(err, gpu_plugin_status(st), "%s", msg);
    if (reduced != TH_OK)
        return th_plugin_fail(err, reduced, "get_mttkrp_result: %s", reduce_err);
    if (failed)
        return th_plugin_fail(err, TH_ERR_DEVICE,
                              "get_mttkrp_result: another process could not read its rows");
    return TH_OK;
}

th_status gpu_plugin_get_mttkrp_result(th_instance *instance, uint32_t mode, double *data,
                                       char *err)
{
    if (!instance || !data)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "get_mttkrp_result: NULL argument");
    if (instance->across)
        return get_result_across(instance, mode, data, err);
    GPU_CALL(instance->group ? thg_group_get_result(instance->group, mode, data, gpu_err, errlen)
                             : thg_get_result(instance->ctx, mode, data, gpu_err, errlen));
    return TH_OK;
}

th_status gpu_plugin_als_update(th_instance *instance, uint32_t mode, const double *w,
                                int32_t norm, th_als_output *out, char *err)
{
    if (!instance || !w || !out)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "als_update: NULL argument");
    if (out->struct_size < TH_ALS_OUTPUT_V1_0_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "als_update: th_als_output is %u bytes, shorter than the %zu of "
                              "ABI 1.0",
                              out->struct_size, (size_t)TH_ALS_OUTPUT_V1_0_SIZE);
    if (!out->lambda || !out->gram || !out->inner)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "als_update: NULL argument");
    const th_status norm_status = check_norm("als_update", norm, err);
    if (norm_status != TH_OK)
        return norm_status;
    GPU_CALL(instance->group
                 ? thg_group_als_update(instance->group, mode, w, norm == TH_NORM_MAX,
                                        out->lambda, out->gram, out->inner, gpu_err, errlen)
                 : thg_als_update(instance->ctx, mode, w, norm == TH_NORM_MAX, out->lambda,
                                  out->gram, out->inner, gpu_err, errlen));
    return TH_OK;
}

/* The 1.6 fields of th_als_sweep_io (plugin.h's errors). */
static th_status check_sweep_reg(const thg_sweep_reg *reg, uint32_t nmodes, const double *lambda,
                                 char *err)
{
    if (!(reg->ridge >= 0.0) || !isfinite(reg->ridge))
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "als_sweep: ridge %g must be finite and at least 0", reg->ridge);
    int coordinate = 0;
    for (uint32_t m = 0; m < nmodes; ++m) {
        const int32_t c = reg->constraints ? reg->constraints[m] : TH_CONSTRAINT_NONE;
        if (c != TH_CONSTRAINT_NONE && c != TH_CONSTRAINT_NONNEG)
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                  "als_sweep: constraints[%u] is %d, not TH_CONSTRAINT_NONE (0) "
                                  "or TH_CONSTRAINT_NONNEG (1)",
                                  m, (int)c);
        const double l1 = reg->l1 ? reg->l1[m] : 0.0;
        if (!(l1 >= 0.0) || !isfinite(l1))
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                  "als_sweep: l1[%u] %g must be finite and at least 0", m, l1);
        coordinate |= thg_sweep_reg_coordinate(reg, m) != 0u;
    }
    if (!coordinate)
        return TH_OK;
    if (reg->hals_sweeps == 0)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "als_sweep: hals_sweeps 0 (at least one pass)");
    for (uint32_t m = 0; reg->hals_mode_sweeps && m < nmodes; ++m)
        if (thg_sweep_reg_coordinate(reg, m) != 0u && reg->hals_mode_sweeps[m] == 0)
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                  "als_sweep: hals_mode_sweeps[%u] 0 (at least one pass)", m);
    if (!(reg->hals_tolerance >= 0.0) || !isfinite(reg->hals_tolerance))
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "als_sweep: hals_tolerance %g must be finite and at least 0",
                              reg->hals_tolerance);
    if (reg->scale && reg->scale == lambda)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "als_sweep: scale is the same memory as lambda");
    return TH_OK;
}

th_status gpu_plugin_als_sweep(th_instance *instance, th_als_sweep_io *io, char *err)
{
    if (!instance || !io)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "als_sweep: NULL argument");
    if (io->struct_size < TH_ALS_SWEEP_IO_V1_1_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                    "als_sweep: th_als_sweep_io is %u bytes, shorter than the %zu of ABI 1.1",
                    io->struct_size, (size_t)TH_ALS_SWEEP_IO_V1_1_SIZE);
    const th_status norm_status = check_norm("als_sweep", io->norm, err);
    if (norm_status != TH_OK)
        return norm_status;
    thg_info info;
    thg_get_info(instance->ctx, &info);
    if (info.nmodes == 0)
        return th_plugin_fail(err, TH_ERR_BAD_STATE, "als_sweep: no tensor loaded");
    if (io->nmodes != info.nmodes)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                    "als_sweep: io->nmodes is %u but the loaded tensor has %u", io->nmodes,
                    info.nmodes);
    if (!io->grams || !io->lambda || !io->inner)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "als_sweep: NULL grams, lambda or inner");
    for (uint32_t m = 0; m < io->nmodes; ++m)
        if (!io->grams[m])
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "als_sweep: grams[%u] is NULL", m);
    /* ABI 1.6: the regularised and constrained sweep's fields, where the
     * struct holds them (a shorter one means their defaults). */
    thg_sweep_reg reg = {NULL, NULL, 0.0, NULL, 0.0, 1u, NULL};
    if (TH_HAS_FIELD(io->struct_size, th_als_sweep_io, reserved0)) {
        reg.constraints = io->constraints;
        reg.l1 = io->l1;
        reg.ridge = io->ridge;
        reg.scale = io->scale;
        reg.hals_tolerance = io->hals_tolerance;
        reg.hals_sweeps = io->hals_sweeps;
        /* ABI 1.9: each mode's passes. */
        if (TH_HAS_FIELD(io->struct_size, th_als_sweep_io, hals_mode_sweeps))
            reg.hals_mode_sweeps = io->hals_mode_sweeps;
        const th_status reg_status = check_sweep_reg(&reg, io->nmodes, io->lambda, err);
        if (reg_status != TH_OK)
            return reg_status;
    }
    const int regularised = thg_sweep_reg_active(&reg, io->nmodes);
    /* Several devices: the coordinate-descent passes would need the split
     * rows' exchange that als_update_nonneg lacks there too, and the ridge
     * the group's own solve; the host runs such iterations per mode. */
    if (regularised && instance->group)
        return th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                              "als_sweep: the regularised or constrained sweep is not "
                              "implemented on a group of devices (%s runs on %u); the "
                              "iteration runs per mode",
                              instance->id, thg_group_size(instance->group));
    uint32_t done = 0;
    GPU_CALL(instance->group
                 ? thg_group_als_sweep(instance->group, io->grams, io->norm == TH_NORM_MAX,
                                       io->lambda, io->inner, &done, gpu_err, errlen)
                 : thg_als_sweep(instance->ctx, io->grams, io->norm == TH_NORM_MAX,
                                 regularised ? &reg : NULL, io->lambda, io->inner, &done,
                                 gpu_err, errlen));
    io->modes_done = done;
    return TH_OK;
}

th_status gpu_plugin_init_factors(th_instance *instance, th_init_factors_io *io, char *err)
{
    if (!instance || !io)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "init_factors: NULL argument");
    if (io->struct_size < TH_INIT_FACTORS_IO_V1_3_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "init_factors: th_init_factors_io is %u bytes, shorter than the "
                              "%zu of ABI 1.3",
                              io->struct_size, (size_t)TH_INIT_FACTORS_IO_V1_3_SIZE);
    thg_info info;
    thg_get_info(instance->ctx, &info);
    if (info.nmodes == 0)
        return th_plugin_fail(err, TH_ERR_BAD_STATE, "init_factors: no tensor loaded");
    if (io->nmodes != info.nmodes)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "init_factors: io->nmodes is %u but the loaded tensor has %u",
                              io->nmodes, info.nmodes);
    if (!io->grams)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "init_factors: NULL grams");
    for (uint32_t m = 0; m < io->nmodes; ++m)
        if (!io->grams[m])
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "init_factors: grams[%u] is NULL",
                                  m);
    GPU_CALL(instance->group
                 ? thg_group_init_factors(instance->group, io->seed, io->grams, gpu_err, errlen)
                 : thg_init_factors(instance->ctx, io->seed, io->grams, gpu_err, errlen));
    return TH_OK;
}

/* Several devices: the generalized MTTKRP and the factor operations have
 * no multi-device form yet (the host refuses such runs before). */
static th_status refuse_group(const th_instance *instance, const char *call, char *err)
{
    return th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                          "%s: multi-GPU generalized MTTKRP is not implemented (%s runs on %u "
                          "devices; use one device for models other than least squares)",
                          call, instance->id, thg_group_size(instance->group));
}

/* The ABI's function and reduction codes are the kernels' (th_gpu.h). */
_Static_assert(TH_ELEMENTWISE_VALUE == (int)THG_ELEMENTWISE_VALUE &&
                   TH_ELEMENTWISE_POISSON_RATIO == (int)THG_ELEMENTWISE_POISSON_RATIO &&
                   TH_ELEMENTWISE_RESIDUAL == (int)THG_ELEMENTWISE_RESIDUAL,
               "elementwise codes");
_Static_assert(TH_REDUCTION_NONE == (int)THG_REDUCTION_NONE &&
                   TH_REDUCTION_POISSON_LOG_LIKELIHOOD ==
                       (int)THG_REDUCTION_POISSON_LOG_LIKELIHOOD &&
                   TH_REDUCTION_SQUARED_RESIDUAL == (int)THG_REDUCTION_SQUARED_RESIDUAL &&
                   TH_REDUCTION_INNER_PRODUCT == (int)THG_REDUCTION_INNER_PRODUCT,
               "reduction codes");
_Static_assert(TH_FACTOR_SCALE_COLUMNS == (int)THG_FACTOR_SCALE_COLUMNS &&
                   TH_FACTOR_NORMALIZE_1 == (int)THG_FACTOR_NORMALIZE_1 &&
                   TH_FACTOR_MULTIPLICATIVE_UPDATE == (int)THG_FACTOR_MULTIPLICATIVE_UPDATE &&
                   TH_FACTOR_RAISE_INADMISSIBLE_ZEROS ==
                       (int)THG_FACTOR_RAISE_INADMISSIBLE_ZEROS,
               "factor operation codes");
_Static_assert(TH_MODE_NONE == THG_MODE_NONE, "TH_MODE_NONE");

th_status gpu_plugin_generalized_mttkrp(th_instance *instance, th_generalized_mttkrp_io *io,
                                        char *err)
{
    if (!instance || !io)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "generalized_mttkrp: NULL argument");
    if (io->struct_size < TH_GENERALIZED_MTTKRP_IO_V1_4_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "generalized_mttkrp: th_generalized_mttkrp_io is %u bytes, "
                              "shorter than the %zu of ABI 1.4",
                              io->struct_size, (size_t)TH_GENERALIZED_MTTKRP_IO_V1_4_SIZE);
    if (instance->group)
        return refuse_group(instance, "generalized_mttkrp", err);
    double reduced = 0.0;
    char msg[TH_ERROR_SIZE];
    const thg_status st =
        thg_generalized_mttkrp(instance->ctx, io->mode, io->elementwise, io->reduction,
                               io->epsilon, io->weights, &reduced, msg, sizeof msg);
    if (st != THG_OK)
        return th_plugin_fail(err, gpu_plugin_status(st), "generalized_mttkrp: %s", msg);
    io->reduced = reduced;
    return TH_OK;
}

th_status gpu_plugin_factor_update(th_instance *instance, th_factor_update_io *io, char *err)
{
    if (!instance || !io)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "factor_update: NULL argument");
    if (io->struct_size < TH_FACTOR_UPDATE_IO_V1_4_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "factor_update: th_factor_update_io is %u bytes, shorter than the "
                              "%zu of ABI 1.4",
                              io->struct_size, (size_t)TH_FACTOR_UPDATE_IO_V1_4_SIZE);
    if (instance->group)
        return refuse_group(instance, "factor_update", err);
    double violation = 0.0;
    uint64_t count = 0;
    char msg[TH_ERROR_SIZE];
    const thg_status st =
        thg_factor_update(instance->ctx, io->mode, io->operation, io->vector, io->threshold,
                          io->tolerance, io->offset, &violation, &count, msg, sizeof msg);
    if (st != THG_OK)
        return th_plugin_fail(err, gpu_plugin_status(st), "factor_update: %s", msg);
    if (io->operation == TH_FACTOR_MULTIPLICATIVE_UPDATE) {
        io->violation = violation;
        io->count = count;
    } else if (io->operation == TH_FACTOR_RAISE_INADMISSIBLE_ZEROS) {
        io->count = count;
    }
    return TH_OK;
}

th_status gpu_plugin_row_least_squares(th_instance *instance, th_row_least_squares_io *io,
                                       char *err)
{
    if (!instance || !io)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "row_least_squares: NULL argument");
    if (io->struct_size < TH_ROW_LEAST_SQUARES_IO_V1_5_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "row_least_squares: th_row_least_squares_io is %u bytes, shorter "
                              "than the %zu of ABI 1.5",
                              io->struct_size, (size_t)TH_ROW_LEAST_SQUARES_IO_V1_5_SIZE);
    /* Several devices: each rank holds a share of every mode's nonzeros,
     * so no rank sees a whole row; there is no multi-device form yet. */
    if (instance->group)
        return th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                              "row_least_squares: multi-GPU row least squares (tensor "
                              "completion) is not implemented (%s runs on %u devices; use one "
                              "device for tensor completion)",
                              instance->id, thg_group_size(instance->group));
    if (io->nonneg > 1u)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "row_least_squares: nonneg %u must be 0 or 1", io->nonneg);
    /* The kernels check the rest (th_gpu.h): no tensor -> BAD_STATE; the
     * mode, ridge and passes -> INVALID_ARGUMENT. */
    uint64_t singular = 0, empty = 0;
    double norm = 0.0, residual = 0.0;
    char msg[TH_ERROR_SIZE];
    const thg_status st =
        thg_row_least_squares(instance->ctx, io->mode, io->ridge, (int)io->nonneg, io->passes,
                              &singular, &empty, &norm, &residual, msg, sizeof msg);
    if (st != THG_OK)
        return th_plugin_fail(err, gpu_plugin_status(st), "row_least_squares: %s", msg);
    io->singular_rows = singular;
    io->empty_rows = empty;
    io->factor_norm_squared = norm;
    io->residual_squared = residual;
    return TH_OK;
}

th_status gpu_plugin_als_update_nonneg(th_instance *instance, th_nonneg_update_io *io,
                                       th_als_output *out, char *err)
{
    if (!instance || !io)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "als_update_nonneg: NULL argument");
    if (io->struct_size < TH_NONNEG_UPDATE_IO_V1_5_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "als_update_nonneg: th_nonneg_update_io is %u bytes, shorter than "
                              "the %zu of ABI 1.5",
                              io->struct_size, (size_t)TH_NONNEG_UPDATE_IO_V1_5_SIZE);
    if (!io->v || !out)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "als_update_nonneg: NULL %s", !io->v ? "v" : "out");
    if (out->struct_size < TH_ALS_OUTPUT_V1_0_SIZE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "als_update_nonneg: th_als_output is %u bytes, shorter than the %zu "
                              "of ABI 1.0",
                              out->struct_size, (size_t)TH_ALS_OUTPUT_V1_0_SIZE);
    if (!out->lambda || !out->gram || !out->inner)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "als_update_nonneg: NULL lambda, gram or inner in out");
    if (io->sweeps == 0)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "als_update_nonneg: sweeps 0 (at least one pass)");
    if (!(io->tolerance >= 0.0) || !isfinite(io->tolerance))
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "als_update_nonneg: tolerance %g must be finite and at least 0",
                              io->tolerance);
    const th_status norm_status = check_norm("als_update_nonneg", io->norm, err);
    if (norm_status != TH_OK)
        return norm_status;
    /* Several devices: a rank holds a share of each mode's MTTKRP result
     * (the split rows' partials are summed only inside the update's
     * collective), so the passes would need that exchange too; not yet. */
    if (instance->group)
        return th_plugin_fail(err, TH_ERR_UNSUPPORTED,
                              "als_update_nonneg: multi-GPU nonnegative update is not "
                              "implemented (%s runs on %u devices; use one device for "
                              "nonnegative CP on the device, or the host's update)",
                              instance->id, thg_group_size(instance->group));
    /* The kernels check the rest (th_gpu.h): no tensor or no MTTKRP result
     * of the mode -> BAD_STATE; the mode -> INVALID_ARGUMENT. */
    /* ABI 1.6: ridge, l1 and the constraint, where the struct holds them. */
    double ridge = 0.0, l1 = 0.0;
    uint32_t unbounded = 0;
    if (TH_HAS_FIELD(io->struct_size, th_nonneg_update_io, reserved1)) {
        ridge = io->ridge;
        l1 = io->l1;
        unbounded = io->unbounded;
        if (unbounded > 1u)
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                  "als_update_nonneg: unbounded %u must be 0 or 1", unbounded);
    }
    uint32_t passes = 0;
    char msg[TH_ERROR_SIZE];
    const thg_status st = thg_als_update_nonneg(
        instance->ctx, io->mode, io->v, io->scale, io->sweeps, io->tolerance, ridge, l1,
        unbounded == 0u, io->norm == TH_NORM_MAX, out->lambda, out->gram,
        out->inner, &passes, msg, sizeof msg);
    if (st != THG_OK)
        return th_plugin_fail(err, gpu_plugin_status(st), "als_update_nonneg: %s", msg);
    io->passes = passes;
    return TH_OK;
}

/* A group's runtime info: the devices and transport, memory summed over
 * the ranks, each rank's schemes ("1,1,2/1,2,2"), the upload summed and
 * the build of the slowest rank, and each mode's time in collectives. */
static void group_runtime_info(th_instance *instance, th_runtime_info *r)
{
    thg_group *g = instance->group;
    const uint32_t G = thg_group_size(g);
    uint32_t first = 0;
    const uint32_t local = thg_group_local_ranks(g, &first), end = first + local;
    thg_info gi;
    thg_get_info(instance->ctx, &gi);
    char *paren = strstr(gi.device_name, " (device");
    if (paren)
        *paren = '\0';
    if (instance->across)
        snprintf(r->device, sizeof(r->device), "%.80s (rank %u of %u processes, device ",
                 gi.device_name, first, G);
    else
        snprintf(r->device, sizeof(r->device), "%.80s x %u (devices ", gi.device_name, G);
    append(r->details, sizeof(r->details), "devices=");
    double upload = 0.0, build = 0.0;
    for (uint32_t q = first; q < end; ++q) {
        thg_info ri;
        thg_get_info(thg_group_rank(g, q), &ri);
        append(r->device, sizeof(r->device), "%s%d", q > first ? "," : "", ri.device);
        append(r->details, sizeof(r->details), "%s%d", q > first ? "," : "", ri.device);
        r->tensor_bytes += ri.tensor_bytes;
        r->factor_bytes += ri.factor_bytes;
        r->workspace_bytes += ri.workspace_bytes;
        upload += ri.upload_seconds;
        build = ri.build_seconds > build ? ri.build_seconds : build;
    }
    append(r->device, sizeof(r->device), ")");
    append(r->details, sizeof(r->details), " comm=\"%s\" kappa=%u P=%u%s",
           thg_group_describe(g), gi.kappa, gi.P, rule_text(instance, &gi));
    r->last_sweep_seconds = -1.0; /* no sweep before a tensor is loaded (plugin.h) */
    if (gi.nmodes == 0)
        return;
    thg_group_mode_stats stats[THG_MAX_MODES];
    int have[THG_MAX_MODES];
    for (uint32_t m = 0; m < gi.nmodes; ++m) {
        char scratch[TH_ERROR_SIZE];
        have[m] = thg_group_get_mode_stats(g, m, &stats[m], scratch, sizeof(scratch)) == THG_OK;
    }
    append(r->details, sizeof(r->details), " lanes=%u schemes=", gi.lanes);
    for (uint32_t q = first; q < end; ++q)
        for (uint32_t m = 0; m < gi.nmodes; ++m)
            if (have[m])
                append(r->details, sizeof(r->details), "%s%d", m ? "," : q > first ? "/" : "",
                       stats[m].scheme[q]);
    append(r->details, sizeof(r->details), " upload_ms=%.3f build_ms=%.3f graphs=%s",
           upload * 1e3, build * 1e3, thg_group_graphs(g));
    r->last_sweep_seconds = thg_group_last_sweep_seconds(g);
    if (r->last_sweep_seconds >= 0)
        append(r->details, sizeof(r->details), " sweep_ms=%.4f", r->last_sweep_seconds * 1e3);
    append(r->details, sizeof(r->details), " comm_ms=");
    for (uint32_t m = 0; m < gi.nmodes; ++m)
        if (have[m])
            append(r->details, sizeof(r->details), "%s%.4f", m ? "," : "",
                   stats[m].last_comm_seconds >= 0 ? stats[m].last_comm_seconds * 1e3 : 0.0);
    /* Each local rank's MTTKRP of each mode (rank 0's modes, then rank
     * 1's, ...): the spread between ranks is what the collectives wait out
     * (across processes, each process's report.json record has its own). */
    append(r->details, sizeof(r->details), " rank_mttkrp_ms=");
    for (uint32_t q = first; q < end; ++q)
        for (uint32_t m = 0; m < gi.nmodes; ++m)
            if (have[m]) {
                const double s = stats[m].rank_mttkrp_seconds[q];
                append(r->details, sizeof(r->details), "%s%.3f", m ? "," : q > first ? "/" : "",
                       s >= 0 ? s * 1e3 : 0.0);
            }
}

th_status gpu_plugin_get_runtime_info(th_instance *instance, th_runtime_info *info, char *err)
{
    if (!instance || !info)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "get_runtime_info: NULL argument");
    if (instance->group) {
        th_runtime_info r;
        memset(&r, 0, sizeof(r));
        r.struct_size = (uint32_t)sizeof(r);
        group_runtime_info(instance, &r);
        if (instance->processes_note[0])
            append(r.details, sizeof(r.details), "; processes: %s", instance->processes_note);
        r.process_sums = instance->across;
        r.mode_nonzeros = instance->across;
        th_plugin_copy_out(info, &r, sizeof(r));
        return TH_OK;
    }
    thg_info gi;
    thg_get_info(instance->ctx, &gi);
    th_runtime_info r;
    memset(&r, 0, sizeof(r));
    r.struct_size = (uint32_t)sizeof(r);
    snprintf(r.device, sizeof(r.device), "%s", gi.device_name);
    r.tensor_bytes = gi.tensor_bytes;
    r.factor_bytes = gi.factor_bytes;
    r.workspace_bytes = gi.workspace_bytes;
    append(r.details, sizeof(r.details), "kappa=%u P=%u%s", gi.kappa, gi.P,
           rule_text(instance, &gi));
    if (gi.nmodes > 0) {
        append(r.details, sizeof(r.details), " lanes=%u schemes=", gi.lanes);
        for (uint32_t m = 0; m < gi.nmodes; ++m) {
            thg_mode_stats s;
            char scratch[TH_ERROR_SIZE];
            if (thg_get_mode_stats(instance->ctx, m, &s, scratch, sizeof(scratch)) == THG_OK)
                append(r.details, sizeof(r.details), "%s%d", m ? "," : "", s.scheme);
        }
        append(r.details, sizeof(r.details), " upload_ms=%.3f build_ms=%.3f graphs=%s",
               gi.upload_seconds * 1e3, gi.build_seconds * 1e3, gi.graphs);
        /* For people reading a report; programs read last_sweep_seconds. */
        if (gi.last_sweep_seconds >= 0)
            append(r.details, sizeof(r.details), " sweep_ms=%.4f", gi.last_sweep_seconds * 1e3);
        /* Why each scheme, as far as the field has room ("...;" marks a cut). */
        for (uint32_t m = 0; m < gi.nmodes; ++m) {
            thg_mode_stats s;
            char scratch[TH_ERROR_SIZE];
            if (thg_get_mode_stats(instance->ctx, m, &s, scratch, sizeof(scratch)) == THG_OK)
                append(r.details, sizeof(r.details), " mode%u=\"%s\"", m, s.reason);
        }
    }
    r.last_sweep_seconds = gi.last_sweep_seconds; /* < 0 before the first sweep */
    /* First, so that the field's cut keeps it: how the processes' MTTKRPs
     * meet decides the run's update path. */
    if (instance->processes_note[0]) {
        char details[sizeof r.details] = "";
        append(details, sizeof details, "processes: %s; %s", instance->processes_note,
               r.details);
        memcpy(r.details, details, sizeof details);
    }
    r.process_sums = instance->processes != NULL;
    /* Dealt, a process's device joins the others' in a group across them
     * (switch_across). */
    r.mode_nonzeros = instance->processes != NULL;
    th_plugin_copy_out(info, &r, sizeof(r));
    return TH_OK;
}

th_status gpu_plugin_get_mode_info(th_instance *instance, uint32_t mode, th_mode_info *info,
                                   char *err)
{
    if (!instance || !info)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT, "get_mode_info: NULL argument");
    th_mode_info r;
    memset(&r, 0, sizeof(r));
    r.struct_size = (uint32_t)sizeof(r);
    if (instance->group) {
        /* The first local rank's scheme, then every local rank's; the
         * slowest rank's time. */
        thg_group_mode_stats gs;
        GPU_CALL(thg_group_get_mode_stats(instance->group, mode, &gs, gpu_err, errlen));
        r.partitions = gs.rank0.partitions;
        snprintf(r.scheme, sizeof(r.scheme), "scheme%d (ranks ", gs.rank0.scheme);
        uint32_t first = 0;
        const uint32_t end = thg_group_local_ranks(instance->group, &first) + first;
        for (uint32_t q = first; q < end; ++q)
            append(r.scheme, sizeof(r.scheme), "%s%d", q > first ? "," : "", gs.scheme[q]);
        append(r.scheme, sizeof(r.scheme), "; rank %u %s)", first, gs.rank0.reason);
        r.last_mttkrp_seconds = gs.last_mttkrp_seconds;
        th_plugin_copy_out(info, &r, sizeof(r));
        return TH_OK;
    }
    thg_mode_stats s;
    GPU_CALL(thg_get_mode_stats(instance->ctx, mode, &s, gpu_err, errlen));
    r.partitions = s.partitions;
    /* "scheme2 (rule=balanced: I_d=24 < kappa=132)": the scheme first, so
     * readers that compare the first word keep working. */
    snprintf(r.scheme, sizeof(r.scheme), "scheme%d (%s)", s.scheme, s.reason);
    r.last_mttkrp_seconds = s.last_mttkrp_seconds;
    th_plugin_copy_out(info, &r, sizeof(r));
    return TH_OK;
}
