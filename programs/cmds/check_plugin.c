/* The plugin conformance checker; see check_plugin.h.
 *
 * The checks go from the outside in: first what the loader sees (the raw
 * entry, then th_plugin_load and the info), then the error paths of a fresh
 * instance, then the numbers against cpu-reference, then the life-cycle
 * stress. A problem early on stops only what depends on it, so one run lists
 * as many faults as it can. */
#define _GNU_SOURCE /* realpath() */

#include "check_plugin.h"

#include "cpd/dense.h"
#include "base/log.h"
#include "cpd/als_step.h"
#include "plugin/backend.h"
#include "cpd/cp_als.h"
#include "plugin/plugin_loader.h"
#include "base/rng.h"
#include "tensor/sptensor.h"
#include "tensor/synth.h"

#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UNKNOWN_OPTION_KEY "th-check-no-such-option"
#define CREATE_DESTROY_CYCLES 50
#define LOAD_TENSOR_CYCLES 20
#define LOAD_UNLOAD_CYCLES 20
#define CHECK_MAX_ORDER 8u /* the orders the GPU backends are tested on: 3 to 8 */

/* ------------------------------------------------------------------------ */
/* Reporting                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct checker {
    const th_check_options *opts;
    FILE *out;
    th_check_counts counts;
    th_host_services services;
    th_plugin *plugin;    /* under test */
    th_plugin *reference; /* NULL when it could not be loaded; may equal plugin */
    gboolean reference_is_plugin;
    th_instance *inst;     /* the plugin's instance for the numeric checks */
    th_instance *ref_inst; /* the reference's */
    double tolerance;      /* relative Frobenius error allowed */
} checker;

/* The line a crash prints; written by begin(), read by the signal handler. */
static char crash_line[256] = "FAIL (before the first check): crashed\n";
static volatile sig_atomic_t crash_fd = STDOUT_FILENO;

static void begin(checker *c, const char *name)
{
    fflush(c->out);
    int fd = fileno(c->out);
    crash_fd = fd >= 0 ? fd : STDERR_FILENO;
    g_snprintf(crash_line, sizeof crash_line, "FAIL %s: crashed (signal ", name);
}

static void report(checker *c, const char *verdict, const char *name, const char *separator,
                   const char *format, va_list args) G_GNUC_PRINTF(5, 0);

static void report(checker *c, const char *verdict, const char *name, const char *separator,
                   const char *format, va_list args)
{
    g_autofree char *why = format ? g_strdup_vprintf(format, args) : NULL;
    if (why != NULL && why[0] != '\0')
        fprintf(c->out, "%s %s%s%s%s\n", verdict, name, separator, why,
                strcmp(separator, " (") == 0 ? ")" : "");
    else
        fprintf(c->out, "%s %s\n", verdict, name);
    fflush(c->out);
}

static void pass(checker *c, const char *name, const char *format, ...) G_GNUC_PRINTF(3, 4);
static void fail(checker *c, const char *name, const char *format, ...) G_GNUC_PRINTF(3, 4);
static void skip(checker *c, const char *name, const char *format, ...) G_GNUC_PRINTF(3, 4);

static void pass(checker *c, const char *name, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    report(c, "PASS", name, " (", format, args);
    va_end(args);
    c->counts.passed++;
}

static void fail(checker *c, const char *name, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    report(c, "FAIL", name, ": ", format, args);
    va_end(args);
    c->counts.failed++;
}

static void skip(checker *c, const char *name, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    report(c, "SKIP", name, ": ", format, args);
    va_end(args);
    c->counts.skipped++;
}

/* A plugin's message is untrusted: bound it, and say when there is none. */
static const char *message_of(char *err)
{
    err[TH_ERROR_SIZE - 1] = '\0';
    return err[0] != '\0' ? err : "(no message)";
}

/* Whether an als_sweep call on a well-conditioned case succeeded and
 * updated every mode; a failure otherwise, named. */
static gboolean swept_every_mode(checker *c, const char *name, th_status status, char *err,
                                 const th_als_sweep_io *io, uint32_t nmodes)
{
    if (status != TH_OK) {
        fail(c, name, "als_sweep: %s (%s)", message_of(err), th_status_name(status));
        return FALSE;
    }
    if (io->modes_done != nmodes) {
        fail(c, name, "modes_done %u on a well-conditioned case, expected %u (a full sweep)",
             io->modes_done, nmodes);
        return FALSE;
    }
    return TRUE;
}

/* ------------------------------------------------------------------------ */
/* Crash report (command-line tool only)                                     */
/* ------------------------------------------------------------------------ */

static void on_crash(int signal_number)
{
    char digits[4] = {(char)('0' + signal_number / 10 % 10), (char)('0' + signal_number % 10),
                      ')', '\n'};
    ssize_t ignored = write(crash_fd, crash_line, strlen(crash_line));
    ignored = write(crash_fd, digits, sizeof digits);
    (void)ignored;
    _exit(1);
}

void th_check_install_crash_report(void)
{
    const int signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < G_N_ELEMENTS(signals); i++) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = on_crash;
        sigemptyset(&action.sa_mask);
        action.sa_flags = (int)SA_RESETHAND;
        sigaction(signals[i], &action, NULL);
    }
}

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum { SKEW_UNIFORM, SKEW_ZIPF, SKEW_DEGENERATE, SKEW_COUNT } skew_kind;

static const char *const skew_names[SKEW_COUNT] = {"uniform", "zipf", "dim1-empty-slices"};

/* A generated tensor and the borrowed ABI view of it. */
typedef struct test_tensor {
    th_sptensor *t;
    const uint32_t *index_ptrs[TH_MAX_MODES];
    th_coo_tensor coo;
} test_tensor;

static void test_tensor_free(test_tensor *tt)
{
    if (tt == NULL)
        return;
    th_sptensor_free(tt->t);
    g_free(tt);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(test_tensor, test_tensor_free)

static test_tensor *wrap(th_sptensor *t)
{
    test_tensor *tt = g_new0(test_tensor, 1);
    tt->t = t;
    for (uint32_t m = 0; m < t->nmodes; m++)
        tt->index_ptrs[m] = t->indices[m];
    tt->coo = (th_coo_tensor){
        .struct_size = (uint32_t)sizeof(th_coo_tensor),
        .nmodes = t->nmodes,
        .nnz = t->nnz,
        .dims = t->dims,
        .indices = tt->index_ptrs,
        .values = t->values,
        .norm_squared = th_sptensor_norm_squared(t),
    };
    return tt;
}

static uint32_t uniform_between(th_rng *rng, uint32_t low, uint32_t high)
{
    return low + (uint32_t)(th_rng_next(rng) % (uint64_t)(high - low + 1));
}

/* Uniform: every slice likely hit. Zipf: a few slices hold most nonzeros and
 * many are empty. Degenerate: mode 0 has a single slice and the others are
 * long and sparsely hit, so empty slices are certain. */
static test_tensor *make_tensor(uint32_t nmodes, skew_kind skew, uint64_t nnz, uint64_t seed,
                                GError **error)
{
    th_synth_params params;
    memset(&params, 0, sizeof params);
    params.nmodes = nmodes;
    params.seed = seed;
    th_rng rng;
    th_rng_seed(&rng, seed ^ 0x5eedc0de);
    double cells = 1.0;
    for (uint32_t m = 0; m < nmodes; m++) {
        switch (skew) {
        case SKEW_UNIFORM:
            params.dims[m] = uniform_between(&rng, 8, 40);
            params.skew[m] = 0.0;
            break;
        case SKEW_ZIPF:
            params.dims[m] = uniform_between(&rng, 30, 200);
            params.skew[m] = 1.6;
            break;
        default:
            params.dims[m] = m == 0 ? 1 : uniform_between(&rng, 3 * 40, 3 * 80);
            params.skew[m] = 0.8;
            break;
        }
        cells *= params.dims[m];
    }
    if (skew == SKEW_DEGENERATE)
        nnz = MIN(nnz, 40); /* far fewer nonzeros than slices */
    params.nnz = (uint64_t)MIN((double)nnz, cells / 2.0);
    th_sptensor *t = th_synth_generate(&params, error);
    return t ? wrap(t) : NULL;
}

static double *random_matrix(th_rng *rng, size_t count)
{
    double *data = g_new(double, count);
    for (size_t i = 0; i < count; i++)
        data[i] = th_rng_uniform(rng);
    return data;
}

/* The checker's own MTTKRP: obviously right, used to vouch for the reference. */
static void naive_mttkrp(const th_sptensor *t, double *const *factors, uint32_t rank,
                         uint32_t mode, double *out)
{
    memset(out, 0, (size_t)t->dims[mode] * rank * sizeof *out);
    for (uint64_t k = 0; k < t->nnz; k++)
        for (uint32_t r = 0; r < rank; r++) {
            double term = t->values[k];
            for (uint32_t m = 0; m < t->nmodes; m++)
                if (m != mode)
                    term *= factors[m][(size_t)t->indices[m][k] * rank + r];
            out[(size_t)t->indices[mode][k] * rank + r] += term;
        }
}

/* ||a - b||_F / ||b||_F (absolute when b is zero). NaN stays NaN, so callers
 * compare with !(error <= tolerance). */
static double relative_error(const double *a, const double *b, size_t count)
{
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < count; i++) {
        diff += (a[i] - b[i]) * (a[i] - b[i]);
        norm += b[i] * b[i];
    }
    return norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
}

/* ------------------------------------------------------------------------ */
/* Entry and info                                                            */
/* ------------------------------------------------------------------------ */

/* What the loader checks, looked at directly so each fault gets its own line.
 * Returns FALSE when the loader cannot possibly accept the plugin. */
static gboolean check_raw_entry(checker *c, const char *path)
{
    begin(c, "dlopen");
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        fail(c, "dlopen", "%s", dlerror());
        return FALSE;
    }
    pass(c, "dlopen", NULL);

    const th_plugin_entry *raw = dlsym(handle, TH_PLUGIN_ENTRY_SYMBOL);
    if (raw == NULL) {
        fail(c, "entry symbol", "no symbol '%s' exported", TH_PLUGIN_ENTRY_SYMBOL);
        dlclose(handle);
        return FALSE;
    }
    pass(c, "entry symbol", NULL);

    gboolean ok = TRUE;
    th_abi_version v = raw->abi_version;
    if (v.major != TH_ABI_VERSION_MAJOR) {
        fail(c, "entry version", "ABI %u.%u, but this host speaks ABI %u.x", v.major, v.minor,
             TH_ABI_VERSION_MAJOR);
        ok = FALSE;
    } else {
        pass(c, "entry version", "ABI %u.%u, host %u.%u%s", v.major, v.minor,
             TH_ABI_VERSION_MAJOR, TH_ABI_VERSION_MINOR,
             v.minor > TH_ABI_VERSION_MINOR ? "; the host ignores the newer fields" : "");
    }

    /* A plugin of the host's own minor must declare exactly the host's size;
     * of an older minor, no more; of a newer one, at least as much. */
    uint32_t size = raw->struct_size;
    size_t full = sizeof(th_plugin_entry);
    gboolean newer = v.minor > TH_ABI_VERSION_MINOR;
    gboolean older = !newer && v.minor != TH_ABI_VERSION_MINOR;
    if (size < TH_PLUGIN_ENTRY_V1_0_SIZE)
        fail(c, "entry size", "struct_size %u is below the %zu bytes of ABI 1.0", size,
             (size_t)TH_PLUGIN_ENTRY_V1_0_SIZE);
    else if (v.minor == TH_ABI_VERSION_MINOR && size != full)
        fail(c, "entry size", "struct_size %u for ABI %u.%u, whose entry is %zu bytes", size,
             v.major, v.minor, full);
    else if ((older && size > full) || (newer && size < full))
        fail(c, "entry size", "struct_size %u does not fit ABI %u.%u (this host's is %zu bytes)",
             size, v.major, v.minor, full);
    else
        pass(c, "entry size", "%u bytes", size);
    ok = ok && size >= TH_PLUGIN_ENTRY_V1_0_SIZE;

    if (size >= TH_PLUGIN_ENTRY_V1_0_SIZE) {
        const struct {
            const char *name;
            gboolean present;
        } required[] = {
            {"get_info", raw->get_info != NULL},       {"create", raw->create != NULL},
            {"destroy", raw->destroy != NULL},         {"load_tensor", raw->load_tensor != NULL},
            {"set_factor", raw->set_factor != NULL},   {"get_factor", raw->get_factor != NULL},
            {"mttkrp", raw->mttkrp != NULL},
            {"get_mttkrp_result", raw->get_mttkrp_result != NULL},
        };
        g_autoptr(GString) missing = g_string_new(NULL);
        for (size_t i = 0; i < G_N_ELEMENTS(required); i++)
            if (!required[i].present)
                g_string_append_printf(missing, "%s%s", missing->len ? ", " : "",
                                       required[i].name);
        if (missing->len > 0) {
            fail(c, "required functions", "NULL: %s", missing->str);
            ok = FALSE;
        } else {
            pass(c, "required functions", NULL);
        }
    }
    dlclose(handle);
    return ok;
}

static gboolean info_string_ok(checker *c, const char *field, const char *value)
{
    if (value != NULL && value[0] != '\0')
        return TRUE;
    fail(c, "info", "%s is %s", field, value == NULL ? "NULL" : "empty");
    return FALSE;
}

static void check_info(checker *c)
{
    begin(c, "info");
    const th_plugin_info *info = c->plugin->info;
    if (!info_string_ok(c, "id", info->id) || !info_string_ok(c, "name", info->name) ||
        !info_string_ok(c, "version", info->version) ||
        !info_string_ok(c, "description", info->description))
        return;
    if (info->max_modes < 3 || info->max_rank < 1) {
        fail(c, "info", "max_modes %u, max_rank %u: expected max_modes >= 3, max_rank >= 1",
             info->max_modes, info->max_rank);
        return;
    }
    gboolean flag = (info->flags & TH_CAP_ALS_UPDATE) != 0;
    if (flag != (c->plugin->entry.als_update != NULL)) {
        fail(c, "info", "TH_CAP_ALS_UPDATE is %s but als_update is %s", flag ? "set" : "clear",
             c->plugin->entry.als_update ? "present" : "NULL");
        return;
    }
    if (info->value_type != TH_VALUE_F32 && info->value_type != TH_VALUE_F64) {
        fail(c, "info", "value_type %u: expected TH_VALUE_F32 or TH_VALUE_F64", info->value_type);
        return;
    }
    gboolean sweep = (info->flags & TH_CAP_ALS_SWEEP) != 0;
    if (sweep != (c->plugin->entry.als_sweep != NULL)) {
        fail(c, "info", "TH_CAP_ALS_SWEEP is %s but als_sweep is %s", sweep ? "set" : "clear",
             c->plugin->entry.als_sweep ? "present" : "NULL (or beyond the entry's struct_size)");
        return;
    }
    if (sweep && !flag) {
        fail(c, "info", "als_sweep without als_update: a sweep that stops early needs it");
        return;
    }
    pass(c, "info", "id '%s', version %s, %s, max_modes %u, max_rank %u%s%s%s%s", info->id,
         info->version, info->value_type == TH_VALUE_F32 ? "f32" : "f64", info->max_modes,
         info->max_rank, flag ? ", als_update" : "", sweep ? ", als_sweep" : "",
         c->plugin->entry.init_factors ? ", init_factors" : "",
         (info->flags & TH_CAP_GPU) ? ", gpu" : "");
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                   */
/* ------------------------------------------------------------------------ */

static char *real_path_of(const char *path)
{
    char *resolved = realpath(path, NULL);
    char *copy = g_strdup(resolved ? resolved : path);
    free(resolved);
    return copy;
}

static void load_reference(checker *c, const char *plugin_path)
{
    const char *name = c->opts->reference ? c->opts->reference : "cpu-reference";
    begin(c, "reference");
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) search = th_plugin_search_path(NULL);
    g_autofree char *path = th_plugin_resolve(name, search, &error);
    if (path == NULL) {
        fail(c, "reference", "%s", error->message);
        return;
    }
    g_autofree char *real_ref = real_path_of(path);
    g_autofree char *real_plugin = real_path_of(plugin_path);
    if (strcmp(real_ref, real_plugin) == 0) {
        /* Loading one object twice would run its init() twice. The checker's
         * own naive MTTKRP still vouches for the numbers. */
        c->reference = c->plugin;
        c->reference_is_plugin = TRUE;
        pass(c, "reference", "the plugin is the reference: %s", path);
        return;
    }
    c->reference = th_plugin_load(path, &c->services, &error);
    if (c->reference == NULL)
        fail(c, "reference", "%s", error->message);
    else
        pass(c, "reference", "%s %s", c->reference->info->id, path);
}

/* create() with `options`; TRUE when it returned TH_OK and an instance. */
static th_status create_instance(th_plugin *plugin, const th_option *options, uint32_t n,
                                 th_instance **out, char *err)
{
    *out = NULL;
    err[0] = '\0';
    return th_call_create(plugin, options, n, out, err);
}

/* ------------------------------------------------------------------------ */
/* Error paths                                                               */
/* ------------------------------------------------------------------------ */

/* Checks that a call failed (any error status) and said why. Returns the
 * text of the problem, or NULL when the call behaved. */
static char *expect_error(const char *call, th_status status, char *err)
{
    if (status == TH_OK)
        return g_strdup_printf("%s returned TH_OK", call);
    err[TH_ERROR_SIZE - 1] = '\0';
    if (err[0] == '\0')
        return g_strdup_printf("%s returned %s but wrote no message", call,
                               th_status_name(status));
    return NULL;
}

static void check_unknown_option(checker *c)
{
    const char *name = "unknown option";
    begin(c, name);
    const th_option option = {.key = UNKNOWN_OPTION_KEY, .value = "1"};
    char err[TH_ERROR_SIZE];
    th_instance *inst = NULL;
    th_status status = create_instance(c->plugin, &option, 1, &inst, err);
    if (status == TH_OK) {
        th_call_destroy(c->plugin, inst);
        fail(c, name, "create() accepted option '%s'; unknown keys must be errors",
             UNKNOWN_OPTION_KEY);
    } else if (status != TH_ERR_INVALID_ARGUMENT) {
        fail(c, name, "create() returned %s, expected TH_ERR_INVALID_ARGUMENT: %s",
             th_status_name(status), message_of(err));
    } else if (strstr(message_of(err), UNKNOWN_OPTION_KEY) == NULL) {
        fail(c, name, "the message does not name the key '%s': %s", UNKNOWN_OPTION_KEY,
             message_of(err));
    } else {
        pass(c, name, "%s", message_of(err));
    }
}

static void check_before_load(checker *c)
{
    const char *name = "mttkrp before load_tensor";
    begin(c, name);
    char err[TH_ERROR_SIZE];
    th_instance *inst = NULL;
    if (create_instance(c->plugin, NULL, 0, &inst, err) != TH_OK) {
        fail(c, name, "create() failed: %s", message_of(err));
        return;
    }
    double sink[64] = {0};
    err[0] = '\0';
    g_autofree char *problem = expect_error("mttkrp(0)", th_call_mttkrp(c->plugin, inst, 0, err), err);
    if (problem == NULL) {
        err[0] = '\0';
        problem = expect_error("get_mttkrp_result(0)",
                               th_call_get_mttkrp_result(c->plugin, inst, 0, sink, err), err);
    }
    th_call_destroy(c->plugin, inst);
    if (problem)
        fail(c, name, "%s", problem);
    else
        pass(c, name, NULL);
}

/* load_tensor() on the shared instance, reporting a failure under `name`. */
static gboolean load_on(checker *c, th_plugin *plugin, th_instance *inst, const test_tensor *tt,
                        uint32_t rank, const char *name)
{
    char err[TH_ERROR_SIZE] = "";
    th_status status = th_call_load_tensor(plugin, inst, &tt->coo, rank, err);
    if (status == TH_OK)
        return TRUE;
    fail(c, name, "%s load_tensor(%u modes, %" G_GUINT64_FORMAT " nonzeros, rank %u): %s (%s)",
         plugin == c->plugin ? "plugin" : "reference", tt->coo.nmodes, tt->coo.nnz, rank,
         message_of(err), th_status_name(status));
    return FALSE;
}

static void check_bad_rank(checker *c, const test_tensor *tt, uint32_t rank, const char *name)
{
    begin(c, name);
    char err[TH_ERROR_SIZE] = "";
    g_autofree char *call = g_strdup_printf("load_tensor(rank %u)", rank);
    g_autofree char *problem =
        expect_error(call, th_call_load_tensor(c->plugin, c->inst, &tt->coo, rank, err), err);
    if (problem)
        fail(c, name, "%s", problem);
    else
        pass(c, name, "%s", message_of(err));
}

static void check_mode_out_of_range(checker *c, const test_tensor *tt)
{
    const char *name = "mode out of range";
    begin(c, name);
    if (!load_on(c, c->plugin, c->inst, tt, 2, name))
        return;
    uint32_t bad = tt->coo.nmodes;
    uint32_t largest = 0;
    for (uint32_t m = 0; m < tt->coo.nmodes; m++)
        largest = MAX(largest, tt->coo.dims[m]);
    /* Room for any mode's matrix, so a plugin that wrongly accepts the mode
     * fails this check instead of corrupting the checker. */
    g_autofree double *buffer = g_new0(double, (size_t)largest * 2);
    const th_plugin_entry *e = &c->plugin->entry;
    char err[TH_ERROR_SIZE] = "";
    char *problem = expect_error("mttkrp", e->mttkrp(c->inst, bad, err), err);
    if (!problem) {
        err[0] = '\0';
        problem = expect_error("set_factor", e->set_factor(c->inst, bad, buffer, err), err);
    }
    if (!problem) {
        err[0] = '\0';
        problem = expect_error("get_factor", e->get_factor(c->inst, bad, buffer, err), err);
    }
    if (!problem) {
        err[0] = '\0';
        problem = expect_error("get_mttkrp_result",
                               e->get_mttkrp_result(c->inst, bad, buffer, err), err);
    }
    if (problem)
        fail(c, name, "mode %u of a %u-mode tensor: %s", bad, tt->coo.nmodes, problem);
    else
        pass(c, name, "mode %u", bad);
    g_free(problem);
}

static void check_too_many_modes(checker *c)
{
    const char *name = "tensor it cannot hold";
    begin(c, name);
    uint32_t max_modes = c->plugin->info->max_modes;
    if (max_modes >= TH_MAX_MODES) {
        skip(c, name, "max_modes %u reaches the host's limit of %u modes", max_modes,
             TH_MAX_MODES);
        return;
    }
    g_autoptr(GError) error = NULL;
    g_autoptr(test_tensor) tt = make_tensor(max_modes + 1, SKEW_UNIFORM, 16, c->opts->seed, &error);
    if (tt == NULL) {
        fail(c, name, "cannot generate the tensor: %s", error->message);
        return;
    }
    char err[TH_ERROR_SIZE] = "";
    th_status status = th_call_load_tensor(c->plugin, c->inst, &tt->coo, 1, err);
    if (status == TH_ERR_UNSUPPORTED || status == TH_ERR_INVALID_ARGUMENT)
        pass(c, name, "%u modes: %s", max_modes + 1, message_of(err));
    else
        fail(c, name, "load_tensor of %u modes (max_modes %u) returned %s, expected "
             "TH_ERR_UNSUPPORTED or TH_ERR_INVALID_ARGUMENT",
             max_modes + 1, max_modes, th_status_name(status));
}

/* ------------------------------------------------------------------------ */
/* Numbers                                                                   */
/* ------------------------------------------------------------------------ */

/* The same random factors on both instances; returns them for the naive MTTKRP. */
static double **set_factors(checker *c, const test_tensor *tt, uint32_t rank, uint64_t seed,
                            const char *name)
{
    th_rng rng;
    th_rng_seed(&rng, seed);
    uint32_t n = tt->coo.nmodes;
    double **factors = g_new0(double *, n);
    gboolean ok = TRUE;
    for (uint32_t m = 0; m < n && ok; m++) {
        factors[m] = random_matrix(&rng, (size_t)tt->coo.dims[m] * rank);
        char err[TH_ERROR_SIZE] = "";
        th_status status = th_call_set_factor(c->plugin, c->inst, m, factors[m], err);
        if (status != TH_OK) {
            fail(c, name, "plugin set_factor(%u): %s (%s)", m, message_of(err),
                 th_status_name(status));
            ok = FALSE;
        } else if ((status = th_call_set_factor(c->reference, c->ref_inst, m, factors[m], err)) !=
                   TH_OK) {
            fail(c, name, "reference set_factor(%u): %s (%s)", m, message_of(err),
                 th_status_name(status));
            ok = FALSE;
        }
    }
    if (!ok) {
        for (uint32_t m = 0; m < n; m++)
            g_free(factors[m]);
        g_clear_pointer(&factors, g_free);
    }
    return factors;
}

static void free_factors(double **factors, uint32_t n)
{
    for (uint32_t m = 0; factors && m < n; m++)
        g_free(factors[m]);
    g_free(factors);
}

/* mttkrp + get_mttkrp_result on one instance. */
static gboolean run_mttkrp(checker *c, th_plugin *plugin, th_instance *inst, uint32_t mode,
                           double *out, const char *name)
{
    const char *who = plugin == c->plugin && inst == c->inst ? "plugin" : "reference";
    char err[TH_ERROR_SIZE] = "";
    th_status status = th_call_mttkrp(plugin, inst, mode, err);
    if (status == TH_OK)
        status = th_call_get_mttkrp_result(plugin, inst, mode, out, err);
    if (status == TH_OK)
        return TRUE;
    fail(c, name, "%s mode %u: %s (%s)", who, mode, message_of(err), th_status_name(status));
    return FALSE;
}

/* Every mode of the loaded tensor: plugin vs reference, reference vs naive.
 * Returns the largest relative error seen, or a negative value after a FAIL. */
static double compare_all_modes(checker *c, const test_tensor *tt, uint32_t rank,
                                double *const *factors, const char *name)
{
    double worst = 0.0;
    size_t largest = 0;
    for (uint32_t m = 0; m < tt->coo.nmodes; m++)
        largest = MAX(largest, (size_t)tt->coo.dims[m] * rank);
    g_autofree double *got = g_new(double, largest);
    g_autofree double *expected = g_new(double, largest);
    g_autofree double *naive = g_new(double, largest);
    for (uint32_t m = 0; m < tt->coo.nmodes; m++) {
        size_t count = (size_t)tt->coo.dims[m] * rank;
        if (!run_mttkrp(c, c->plugin, c->inst, m, got, name) ||
            !run_mttkrp(c, c->reference, c->ref_inst, m, expected, name))
            return -1.0;
        naive_mttkrp(tt->t, factors, rank, m, naive);
        double reference_error = relative_error(expected, naive, count);
        if (!(reference_error <= 1e-12)) {
            fail(c, name, "mode %u: the reference disagrees with the checker's naive MTTKRP "
                 "(relative error %.3g)", m, reference_error);
            return -1.0;
        }
        double error = relative_error(got, expected, count);
        if (!(error <= c->tolerance)) {
            fail(c, name, "mode %u: relative Frobenius error %.3g > tolerance %.0e", m, error,
                 c->tolerance);
            return -1.0;
        }
        worst = MAX(worst, error);
    }
    return worst;
}

typedef struct als_arrays {
    double *lambda, *gram, *inner, *factor;
} als_arrays;

static gboolean run_als(checker *c, th_plugin *plugin, th_instance *inst, uint32_t mode,
                        const double *w, int32_t norm, uint32_t rank, als_arrays *a,
                        const char *name)
{
    th_als_output out = {.struct_size = (uint32_t)sizeof out,
                         .lambda = a->lambda, .gram = a->gram, .inner = a->inner};
    char err[TH_ERROR_SIZE] = "";
    th_status status = th_call_als_update(plugin, inst, mode, w, norm, &out, err);
    if (status == TH_OK)
        status = th_call_get_factor(plugin, inst, mode, a->factor, err);
    (void)rank;
    if (status == TH_OK)
        return TRUE;
    fail(c, name, "%s mode %u: %s (%s)", inst == c->inst ? "plugin" : "reference", mode,
         message_of(err), th_status_name(status));
    return FALSE;
}

/* One als_update on `mode` (whose MTTKRP both instances just computed) with
 * the same well-conditioned w on both sides, compared field by field. */
static void check_als_update(checker *c, const test_tensor *tt, uint32_t rank, uint32_t mode,
                             int32_t norm, uint64_t seed, const char *case_name)
{
    g_autofree char *name = g_strdup_printf("als_update %s mode=%u norm=%s", case_name, mode,
                                            norm == TH_NORM_2 ? "2" : "max");
    begin(c, name);
    if (c->reference->entry.als_update == NULL) {
        skip(c, name, "the reference %s has no als_update", c->reference->info->id);
        return;
    }
    th_rng rng;
    th_rng_seed(&rng, seed);
    g_autofree double *w = random_matrix(&rng, (size_t)rank * rank);
    for (uint32_t r = 0; r < rank; r++)
        w[(size_t)r * rank + r] += rank; /* diagonally dominant: small condition number */
    size_t rows = (size_t)tt->coo.dims[mode] * rank;
    g_autofree double *buffers = g_new0(double, 2 * (2 * rank + (size_t)rank * rank + rows));
    als_arrays got = {buffers, got.lambda + rank, got.gram + (size_t)rank * rank,
                      got.inner + rank};
    als_arrays want = {got.factor + rows, want.lambda + rank, want.gram + (size_t)rank * rank,
                       want.inner + rank};
    if (!run_als(c, c->plugin, c->inst, mode, w, norm, rank, &got, name) ||
        !run_als(c, c->reference, c->ref_inst, mode, w, norm, rank, &want, name))
        return;
    const struct {
        const char *what;
        const double *a, *b;
        size_t count;
    } parts[] = {
        {"lambda", got.lambda, want.lambda, rank},
        {"gram", got.gram, want.gram, (size_t)rank * rank},
        {"inner", got.inner, want.inner, rank},
        {"factor (get_factor)", got.factor, want.factor, rows},
    };
    double worst = 0.0;
    for (size_t i = 0; i < G_N_ELEMENTS(parts); i++) {
        double error = relative_error(parts[i].a, parts[i].b, parts[i].count);
        if (!(error <= c->tolerance)) {
            fail(c, name, "%s: relative error %.3g > tolerance %.0e", parts[i].what, error,
                 c->tolerance);
            return;
        }
        worst = MAX(worst, error);
    }
    pass(c, name, "max relative error %.2g", worst);
}

static void check_mttkrp_case(checker *c, uint32_t nmodes, skew_kind skew, uint32_t rank,
                              uint64_t nnz, uint64_t case_seed)
{
    g_autofree char *case_name =
        g_strdup_printf("modes=%u skew=%s rank=%u", nmodes, skew_names[skew], rank);
    g_autofree char *name = g_strdup_printf("mttkrp %s", case_name);
    begin(c, name);
    g_autoptr(GError) error = NULL;
    g_autoptr(test_tensor) tt = make_tensor(nmodes, skew, nnz, case_seed, &error);
    if (tt == NULL) {
        fail(c, name, "cannot generate the tensor: %s", error->message);
        return;
    }
    if (!load_on(c, c->plugin, c->inst, tt, rank, name) ||
        !load_on(c, c->reference, c->ref_inst, tt, rank, name))
        return;
    double **factors = set_factors(c, tt, rank, case_seed + 1, name);
    if (factors == NULL)
        return;
    double worst = compare_all_modes(c, tt, rank, factors, name);
    free_factors(factors, nmodes);
    if (worst < 0.0)
        return;
    uint64_t empty = 0;
    for (uint32_t m = 0; m < nmodes; m++)
        empty += th_sptensor_empty_slices(tt->t, m);
    pass(c, name, "%" G_GUINT64_FORMAT " nonzeros, %" G_GUINT64_FORMAT
         " empty slices, max relative error %.2g", tt->coo.nnz, empty, worst);

    if (c->plugin->entry.als_update == NULL)
        return;
    /* The last MTTKRP computed was of the last mode on both instances. */
    check_als_update(c, tt, rank, nmodes - 1, (rank % 2) ? TH_NORM_2 : TH_NORM_MAX,
                     case_seed + 2, case_name);
}

/* Mode m's nonzeros with a mode-m index below half the dimension: the
 * rows a process of a run might own. */
static th_sptensor *lower_rows(const th_sptensor *t, uint32_t mode)
{
    uint64_t kept = 0;
    for (uint64_t k = 0; k < t->nnz; k++)
        kept += t->indices[mode][k] < (t->dims[mode] + 1) / 2;
    th_sptensor *sub = th_sptensor_new(t->nmodes, kept);
    memcpy(sub->dims, t->dims, t->nmodes * sizeof *t->dims);
    for (uint64_t k = 0, j = 0; k < t->nnz; k++) {
        if (t->indices[mode][k] >= (t->dims[mode] + 1) / 2)
            continue;
        for (uint32_t m = 0; m < t->nmodes; m++)
            sub->indices[m][j] = t->indices[m][k];
        sub->values[j++] = t->values[k];
    }
    return sub;
}

/* ABI 1.10: a plugin that says it takes each mode's own nonzeros is loaded
 * with a different half of the rows for each mode, and each mode's MTTKRP
 * must be the checker's naive one of that mode's nonzeros (zero on the
 * other rows). */
static void check_mode_nonzeros(checker *c)
{
    const char *name = "mttkrp mode_nonzeros";
    begin(c, name);
    th_runtime_info runtime;
    g_autoptr(GError) error = NULL;
    if (c->plugin->entry.abi_version.minor < 10 || c->plugin->entry.get_runtime_info == NULL ||
        !th_instance_runtime_info(c->plugin, c->inst, &runtime, &error) ||
        runtime.mode_nonzeros == 0) {
        skip(c, name, "the plugin does not say it builds each mode from its own nonzeros "
                      "(th_runtime_info.mode_nonzeros, ABI 1.10)");
        return;
    }
    const uint32_t nmodes = 3, rank = MIN(7u, c->plugin->info->max_rank);
    g_autoptr(test_tensor) tt = make_tensor(nmodes, SKEW_ZIPF, 1500, c->opts->seed + 17, &error);
    if (tt == NULL) {
        fail(c, name, "cannot generate the tensor: %s", error->message);
        return;
    }
    th_sptensor *subs[3];
    th_coo_tensor views[3];
    const uint32_t *index_ptrs[3][TH_MAX_MODES];
    const th_coo_tensor *per_mode[3];
    for (uint32_t m = 0; m < nmodes; m++) {
        subs[m] = lower_rows(tt->t, m);
        for (uint32_t d = 0; d < nmodes; d++)
            index_ptrs[m][d] = subs[m]->indices[d];
        views[m] = tt->coo;
        views[m].nnz = subs[m]->nnz;
        views[m].indices = index_ptrs[m];
        views[m].values = subs[m]->values;
        views[m].norm_squared = th_sptensor_norm_squared(subs[m]);
        per_mode[m] = &views[m];
    }
    th_coo_tensor view = views[0];
    view.mode_nonzeros = per_mode;
    char err[TH_ERROR_SIZE] = "";
    th_rng rng;
    th_rng_seed(&rng, c->opts->seed + 18);
    double *factors[3] = {NULL, NULL, NULL};
    th_status status = th_call_load_tensor(c->plugin, c->inst, &view, rank, err);
    for (uint32_t m = 0; status == TH_OK && m < nmodes; m++) {
        factors[m] = random_matrix(&rng, (size_t)tt->coo.dims[m] * rank);
        status = th_call_set_factor(c->plugin, c->inst, m, factors[m], err);
    }
    double worst = 0.0;
    gboolean ok = status == TH_OK;
    if (!ok)
        fail(c, name, "load_tensor or set_factor: %s (%s)", message_of(err),
             th_status_name(status));
    for (uint32_t m = 0; ok && m < nmodes; m++) {
        const size_t count = (size_t)tt->coo.dims[m] * rank;
        g_autofree double *got = g_new(double, count), *want = g_new(double, count);
        ok = run_mttkrp(c, c->plugin, c->inst, m, got, name);
        if (ok) {
            naive_mttkrp(subs[m], factors, rank, m, want);
            const double e = relative_error(got, want, count);
            worst = MAX(worst, e);
            if (!(e <= c->tolerance)) {
                fail(c, name, "mode %u (built from %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
                     " nonzeros): relative Frobenius error %.3g against the MTTKRP of those "
                     "nonzeros > tolerance %.0e",
                     m, subs[m]->nnz, tt->coo.nnz, e, c->tolerance);
                ok = FALSE;
            }
        }
    }
    if (ok)
        pass(c, name, "3 modes, each from its lower half of rows, max relative error %.2g",
             worst);
    for (uint32_t m = 0; m < nmodes; m++) {
        th_sptensor_free(subs[m]);
        g_free(factors[m]);
    }
}

static void check_all_mttkrp(checker *c)
{
    static const uint32_t ranks[] = {1, 7, 16, 32};
    static const uint32_t quick_ranks[] = {1, 16};
    const th_plugin_info *info = c->plugin->info;
    uint32_t top = MIN(info->max_modes, CHECK_MAX_ORDER);
    uint64_t nnz = c->opts->quick ? 400 : 1500;
    const uint32_t *rank_list = c->opts->quick ? quick_ranks : ranks;
    size_t n_ranks = c->opts->quick ? G_N_ELEMENTS(quick_ranks) : G_N_ELEMENTS(ranks);
    uint64_t case_seed = c->opts->seed * 1000003u;
    for (uint32_t nmodes = 3; nmodes <= top; nmodes++) {
        if (c->opts->quick && nmodes != 3 && nmodes != 4 && nmodes != top)
            continue;
        for (size_t r = 0; r < n_ranks; r++) {
            for (int skew = 0; skew < SKEW_COUNT; skew++) {
                case_seed += 7919;
                if (rank_list[r] > info->max_rank) {
                    g_autofree char *name = g_strdup_printf(
                        "mttkrp modes=%u skew=%s rank=%u", nmodes, skew_names[skew], rank_list[r]);
                    skip(c, name, "rank above max_rank %u", info->max_rank);
                    continue;
                }
                check_mttkrp_case(c, nmodes, (skew_kind)skew, rank_list[r], nnz, case_seed);
            }
        }
    }
    if (c->plugin->entry.als_update == NULL)
        skip(c, "als_update", "not implemented (optional; the host updates the factors itself)");
}

/* ------------------------------------------------------------------------ */
/* als_sweep (ABI 1.1)                                                       */
/* ------------------------------------------------------------------------ */

/* What one CP-ALS iteration leaves behind, on either side. */
typedef struct iteration_state {
    uint32_t nmodes, rank;
    double *grams[TH_MAX_MODES];   /* rank x rank each */
    double *factors[TH_MAX_MODES]; /* dims[m] x rank each, read back with get_factor */
    double *lambda, *inner;        /* [rank], of the last mode */
} iteration_state;

static void iteration_state_init(iteration_state *st, const test_tensor *tt, uint32_t rank,
                                 double *const *initial)
{
    memset(st, 0, sizeof *st);
    st->nmodes = tt->coo.nmodes;
    st->rank = rank;
    for (uint32_t m = 0; m < st->nmodes; m++) {
        st->grams[m] = g_new(double, (size_t)rank * rank);
        th_dense_gram(initial[m], tt->coo.dims[m], rank, st->grams[m]);
        st->factors[m] = g_new0(double, (size_t)tt->coo.dims[m] * rank);
    }
    st->lambda = g_new0(double, rank);
    st->inner = g_new0(double, rank);
}

static void iteration_state_clear(iteration_state *st)
{
    for (uint32_t m = 0; m < st->nmodes; m++) {
        g_free(st->grams[m]);
        g_free(st->factors[m]);
    }
    g_free(st->lambda);
    g_free(st->inner);
}

static gboolean set_all_factors(checker *c, th_plugin *plugin, th_instance *inst,
                                double *const *factors, uint32_t nmodes, const char *name)
{
    for (uint32_t m = 0; m < nmodes; m++) {
        char err[TH_ERROR_SIZE] = "";
        th_status status = th_call_set_factor(plugin, inst, m, factors[m], err);
        if (status != TH_OK) {
            fail(c, name, "%s set_factor(%u): %s (%s)", inst == c->inst ? "plugin" : "reference",
                 m, message_of(err), th_status_name(status));
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean get_factors_into(checker *c, th_plugin *plugin, th_instance *inst,
                                 double *const *factors, uint32_t nmodes, const char *name)
{
    for (uint32_t m = 0; m < nmodes; m++) {
        char err[TH_ERROR_SIZE] = "";
        th_status status = th_call_get_factor(plugin, inst, m, factors[m], err);
        if (status != TH_OK) {
            fail(c, name, "%s get_factor(%u): %s (%s)", inst == c->inst ? "plugin" : "reference",
                 m, message_of(err), th_status_name(status));
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean get_all_factors(checker *c, th_plugin *plugin, th_instance *inst,
                                iteration_state *st, const char *name)
{
    return get_factors_into(c, plugin, inst, st->factors, st->nmodes, name);
}

/* The host's iteration (als_step.h: per mode mttkrp(), the host's solve,
 * als_update()) on `inst`, from the Grams in `st`; its results back into
 * `st`. *pinv_used tells whether a solve needed the pseudo-inverse (then
 * the sweep was entitled to stop early, and the case proves nothing). */
static gboolean per_mode_iteration(checker *c, th_plugin *plugin, th_instance *inst,
                                   const test_tensor *tt, int32_t norm, iteration_state *st,
                                   gboolean *pinv_used, const char *name)
{
    const uint32_t rank = st->rank;
    const size_t gram_bytes = sizeof(double) * rank * rank;
    th_backend view = th_backend_borrow(plugin, inst, st->nmodes, rank, tt->coo.dims);
    g_autoptr(th_als_state) als = th_als_state_new(&view, TH_UPDATE_MODE);
    for (uint32_t m = 0; m < st->nmodes; m++)
        memcpy(als->grams[m], st->grams[m], gram_bytes);
    g_autoptr(GError) error = NULL;
    if (!th_als_step(als, 1, norm, NULL, &error)) {
        fail(c, name, "%s per-mode iteration, mode %u: %s",
             inst == c->inst ? "plugin" : "reference", als->modes_updated, error->message);
        return FALSE;
    }
    *pinv_used = als->pinv_fallbacks > 0;
    for (uint32_t m = 0; m < st->nmodes; m++)
        memcpy(st->grams[m], als->grams[m], gram_bytes);
    memcpy(st->lambda, als->lambda, sizeof(double) * rank);
    memcpy(st->inner, als->inner, sizeof(double) * rank);
    return get_all_factors(c, plugin, inst, st, name);
}

/* The ABI 1.6 fields at their defaults (hals_sweeps 1): what the checker
 * gives a plugin of any minor unless it checks those fields. */
static th_als_sweep_io sweep_io(iteration_state *st, int32_t norm)
{
    return (th_als_sweep_io){
        .struct_size = (uint32_t)sizeof(th_als_sweep_io),
        .norm = norm,
        .nmodes = st->nmodes,
        .modes_done = UINT32_MAX, /* the plugin must set it */
        .grams = st->grams,
        .lambda = st->lambda,
        .inner = st->inner,
        .hals_sweeps = 1,
    };
}

/* Field by field, within the checker's tolerance; FALSE after a FAIL. */
static gboolean compare_iterations(checker *c, const iteration_state *got,
                                   const iteration_state *want, const test_tensor *tt,
                                   double *worst, const char *name)
{
    const uint32_t rank = got->rank;
    *worst = 0.0;
    for (uint32_t part = 0; part < 2 + 2 * got->nmodes; part++) {
        const double *a, *b;
        size_t count;
        g_autofree char *what = NULL;
        if (part == 0) {
            a = got->lambda, b = want->lambda, count = rank, what = g_strdup("lambda");
        } else if (part == 1) {
            a = got->inner, b = want->inner, count = rank, what = g_strdup("inner");
        } else if (part < 2 + got->nmodes) {
            uint32_t m = part - 2;
            a = got->grams[m], b = want->grams[m], count = (size_t)rank * rank;
            what = g_strdup_printf("gram of mode %u", m);
        } else {
            uint32_t m = part - 2 - got->nmodes;
            a = got->factors[m], b = want->factors[m], count = (size_t)tt->coo.dims[m] * rank;
            what = g_strdup_printf("factor of mode %u (get_factor)", m);
        }
        double error = relative_error(a, b, count);
        if (!(error <= c->tolerance)) {
            fail(c, name, "%s: relative error %.3g > tolerance %.0e", what, error, c->tolerance);
            return FALSE;
        }
        *worst = MAX(*worst, error);
    }
    return TRUE;
}

/* Uniform in [-0.5, 0.5): nearly orthogonal columns, so every Hadamard
 * product of Grams is well conditioned and an f32 backend's Cholesky agrees
 * with the host's solve to its own precision. */
static double **centred_factors(const test_tensor *tt, uint32_t rank, uint64_t seed)
{
    th_rng rng;
    th_rng_seed(&rng, seed);
    double **factors = g_new0(double *, tt->coo.nmodes);
    for (uint32_t m = 0; m < tt->coo.nmodes; m++) {
        size_t count = (size_t)tt->coo.dims[m] * rank;
        factors[m] = g_new(double, count);
        for (size_t i = 0; i < count; i++)
            factors[m][i] = th_rng_uniform(&rng) - 0.5;
    }
    return factors;
}

/* One sweep on the plugin against one per-mode iteration (mttkrp, the
 * host's solve, als_update) from the same factors on the reference, or on
 * the plugin itself when the reference has no als_update. */
static void check_als_sweep_case(checker *c, uint32_t nmodes, uint32_t rank, int32_t norm,
                                 uint64_t seed)
{
    g_autofree char *name = g_strdup_printf("als_sweep modes=%u rank=%u norm=%s", nmodes, rank,
                                            norm == TH_NORM_2 ? "2" : "max");
    begin(c, name);
    g_autoptr(GError) error = NULL;
    g_autoptr(test_tensor) tt = make_tensor(nmodes, SKEW_UNIFORM, 400, seed, &error);
    if (tt == NULL) {
        fail(c, name, "cannot generate the tensor: %s", error->message);
        return;
    }
    gboolean use_reference = c->ref_inst != NULL && c->reference->entry.als_update != NULL;
    th_plugin *oracle = use_reference ? c->reference : c->plugin;
    th_instance *oracle_inst = use_reference ? c->ref_inst : c->inst;
    double **initial = centred_factors(tt, rank, seed + 1);
    iteration_state want, got;
    iteration_state_init(&want, tt, rank, initial);
    iteration_state_init(&got, tt, rank, initial);
    gboolean pinv_used = FALSE;
    if (!load_on(c, oracle, oracle_inst, tt, rank, name) ||
        !set_all_factors(c, oracle, oracle_inst, initial, nmodes, name) ||
        !per_mode_iteration(c, oracle, oracle_inst, tt, norm, &want, &pinv_used, name))
        goto done;
    if (pinv_used) {
        skip(c, name, "the host's solve needed the pseudo-inverse on this case");
        goto done;
    }
    /* On the plugin's own instance the tensor is loaded; only reset factors. */
    if ((use_reference && !load_on(c, c->plugin, c->inst, tt, rank, name)) ||
        !set_all_factors(c, c->plugin, c->inst, initial, nmodes, name))
        goto done;
    th_als_sweep_io io = sweep_io(&got, norm);
    char err[TH_ERROR_SIZE] = "";
    th_status status = th_call_als_sweep(c->plugin, c->inst, &io, err);
    if (!swept_every_mode(c, name, status, err, &io, nmodes))
        goto done;
    double worst = 0.0;
    if (get_all_factors(c, c->plugin, c->inst, &got, name) &&
        compare_iterations(c, &got, &want, tt, &worst, name))
        pass(c, name, "vs %s per-mode iteration, max relative error %.2g",
             use_reference ? "the reference's" : "its own", worst);
done:
    iteration_state_clear(&want);
    iteration_state_clear(&got);
    free_factors(initial, nmodes);
}

/* A call that must fail: `status` and `err` are what `call` answered;
 * `wanted` the exact status required (0: any error). */
static void judge_call_error(checker *c, const char *name, const char *call, th_status status,
                             char *err, th_status wanted)
{
    g_autofree char *problem = expect_error(call, status, err);
    if (problem)
        fail(c, name, "%s", problem);
    else if (wanted != TH_OK && status != wanted)
        fail(c, name, "%s returned %s, expected %s: %s", call, th_status_name(status),
             th_status_name(wanted), message_of(err));
    else
        pass(c, name, "%s: %s", th_status_name(status), message_of(err));
}

static void check_sweep_before_load(checker *c)
{
    const char *name = "als_sweep before load_tensor";
    begin(c, name);
    char err[TH_ERROR_SIZE] = "";
    th_instance *inst = NULL;
    if (create_instance(c->plugin, NULL, 0, &inst, err) != TH_OK) {
        fail(c, name, "create() failed: %s", message_of(err));
        return;
    }
    /* Room for rank 8 on three modes, should the plugin wrongly go ahead. */
    double sink[3][64] = {{0}}, lambda[8] = {0}, inner[8] = {0};
    double *grams[3] = {sink[0], sink[1], sink[2]};
    th_als_sweep_io io = {.struct_size = (uint32_t)sizeof io, .norm = TH_NORM_2, .nmodes = 3,
                          .grams = grams, .lambda = lambda, .inner = inner};
    err[0] = '\0';
    th_status status = th_call_als_sweep(c->plugin, inst, &io, err);
    th_call_destroy(c->plugin, inst);
    judge_call_error(c, name, "als_sweep", status, err, TH_ERR_BAD_STATE);
}

/* A struct one field short, then a wrong order: both refused, on a loaded
 * instance with buffers large enough that a plugin going ahead anyway
 * fails the check instead of corrupting the checker. */
static void check_sweep_bad_io(checker *c)
{
    const uint32_t rank = MIN(4u, c->plugin->info->max_rank);
    g_autoptr(GError) error = NULL;
    g_autoptr(test_tensor) tt = make_tensor(3, SKEW_UNIFORM, 60, c->opts->seed + 41, &error);
    const char *short_name = "als_sweep short io";
    const char *order_name = "als_sweep nmodes mismatch";
    begin(c, short_name);
    if (tt == NULL) {
        fail(c, short_name, "cannot generate the tensor: %s", error->message);
        return;
    }
    if (!load_on(c, c->plugin, c->inst, tt, rank, short_name))
        return;
    double **initial = centred_factors(tt, rank, c->opts->seed + 42);
    iteration_state st;
    iteration_state_init(&st, tt, rank, initial);
    /* One more Gram than the tensor has modes, for the mismatch below. */
    st.grams[3] = g_new0(double, (size_t)rank * rank);
    if (set_all_factors(c, c->plugin, c->inst, initial, 3, short_name)) {
        th_als_sweep_io io = sweep_io(&st, TH_NORM_2);
        io.struct_size = (uint32_t)offsetof(th_als_sweep_io, inner);
        char err[TH_ERROR_SIZE] = "";
        judge_call_error(c, short_name, "als_sweep",
                         th_call_als_sweep(c->plugin, c->inst, &io, err), err,
                         TH_ERR_INVALID_ARGUMENT);

        begin(c, order_name);
        io = sweep_io(&st, TH_NORM_2);
        io.nmodes = 4;
        err[0] = '\0';
        judge_call_error(c, order_name, "als_sweep",
                         th_call_als_sweep(c->plugin, c->inst, &io, err), err, TH_OK);
    }
    g_free(st.grams[3]);
    st.grams[3] = NULL;
    iteration_state_clear(&st);
    free_factors(initial, 3);
}

static void check_all_sweep(checker *c)
{
    if (c->plugin->entry.als_sweep == NULL) {
        skip(c, "als_sweep", "not implemented (optional, ABI 1.1; the host runs each mode "
                             "itself)");
        return;
    }
    const uint32_t max_rank = c->plugin->info->max_rank;
    check_als_sweep_case(c, 3, MIN(4u, max_rank), TH_NORM_2, c->opts->seed * 31 + 1);
    if (c->plugin->info->max_modes >= 4)
        check_als_sweep_case(c, 4, MIN(7u, max_rank), TH_NORM_MAX, c->opts->seed * 31 + 2);
    check_sweep_before_load(c);
    check_sweep_bad_io(c);
}

/* ------------------------------------------------------------------------ */
/* init_factors (ABI 1.3)                                                    */
/* ------------------------------------------------------------------------ */

/* The first entry where two factors differ, as a FAIL line. */
static void fail_factor_mismatch(checker *c, const char *name, uint32_t mode, uint32_t rank,
                                 const double *drawn, const double *uploaded, size_t count)
{
    size_t k = 0;
    while (k < count && memcmp(&drawn[k], &uploaded[k], sizeof *drawn) == 0)
        k++;
    fail(c, name, "mode %u row %zu column %zu: %.17g after init_factors, %.17g after set_factor "
         "of the host's draw (they must be bitwise identical)",
         mode, k / rank, k % rank, drawn[k], uploaded[k]);
}

/* init_factors(seed) on the plugin against the host's draw of the same
 * seed (th_cpd_initial_factors): every factor read back with get_factor
 * must be bitwise what get_factor gives after set_factor of the host's
 * draw (so an f32 backend rounds as its set_factor does), and the Grams it
 * returned must match the host's Gram of those factors within the
 * tolerance. */
static void check_init_factors_case(checker *c, uint32_t nmodes, skew_kind skew, uint32_t rank,
                                    uint64_t seed, uint64_t tensor_seed)
{
    g_autofree char *name =
        g_strdup_printf("init_factors modes=%u skew=%s rank=%u seed=%" G_GUINT64_FORMAT, nmodes,
                        skew_names[skew], rank, seed);
    begin(c, name);
    g_autoptr(GError) error = NULL;
    g_autoptr(test_tensor) tt = make_tensor(nmodes, skew, 300, tensor_seed, &error);
    if (tt == NULL) {
        fail(c, name, "cannot generate the tensor: %s", error->message);
        return;
    }
    if (!load_on(c, c->plugin, c->inst, tt, rank, name))
        return;
    const uint32_t *dims = tt->coo.dims;
    const size_t gram_count = (size_t)rank * rank;
    double *grams[TH_MAX_MODES] = {NULL}, *drawn[TH_MAX_MODES] = {NULL};
    double **host = th_cpd_initial_factors(dims, nmodes, rank, seed);
    g_autofree double *want = g_new(double, gram_count);
    size_t largest = 0;
    for (uint32_t m = 0; m < nmodes; m++) {
        /* NaN: a Gram the plugin leaves unwritten fails the comparison. */
        grams[m] = g_new(double, gram_count);
        for (size_t k = 0; k < gram_count; k++)
            grams[m][k] = NAN;
        drawn[m] = g_new0(double, (size_t)dims[m] * rank);
        largest = MAX(largest, (size_t)dims[m] * rank);
    }
    g_autofree double *uploaded = g_new0(double, largest);
    th_init_factors_io io = {.struct_size = (uint32_t)sizeof io, .nmodes = nmodes, .seed = seed,
                             .grams = grams};
    char err[TH_ERROR_SIZE] = "";
    th_status status = th_call_init_factors(c->plugin, c->inst, &io, err);
    if (status != TH_OK) {
        fail(c, name, "init_factors: %s (%s)", message_of(err), th_status_name(status));
        goto done;
    }
    if (!get_factors_into(c, c->plugin, c->inst, drawn, nmodes, name) ||
        !set_all_factors(c, c->plugin, c->inst, host, nmodes, name))
        goto done;
    double worst = 0.0;
    for (uint32_t m = 0; m < nmodes; m++) {
        const size_t count = (size_t)dims[m] * rank;
        status = th_call_get_factor(c->plugin, c->inst, m, uploaded, err);
        if (status != TH_OK) {
            fail(c, name, "plugin get_factor(%u): %s (%s)", m, message_of(err),
                 th_status_name(status));
            goto done;
        }
        if (memcmp(drawn[m], uploaded, count * sizeof *uploaded) != 0) {
            fail_factor_mismatch(c, name, m, rank, drawn[m], uploaded, count);
            goto done;
        }
        th_dense_gram(uploaded, dims[m], rank, want);
        const double gram_error = relative_error(grams[m], want, gram_count);
        if (!(gram_error <= c->tolerance)) {
            fail(c, name, "gram of mode %u: relative error %.3g > tolerance %.0e against the "
                 "host's Gram of the factor", m, gram_error, c->tolerance);
            goto done;
        }
        worst = MAX(worst, gram_error);
    }
    pass(c, name, "factors bitwise those of set_factor, Grams max relative error %.2g", worst);
done:
    for (uint32_t m = 0; m < nmodes; m++) {
        g_free(grams[m]);
        g_free(drawn[m]);
    }
    th_cpd_free_factors(host, nmodes);
}

static void check_init_factors_before_load(checker *c)
{
    const char *name = "init_factors before load_tensor";
    begin(c, name);
    char err[TH_ERROR_SIZE] = "";
    th_instance *inst = NULL;
    if (create_instance(c->plugin, NULL, 0, &inst, err) != TH_OK) {
        fail(c, name, "create() failed: %s", message_of(err));
        return;
    }
    /* Room for rank 8 on three modes, should the plugin wrongly go ahead. */
    double sink[3][64] = {{0}};
    double *grams[3] = {sink[0], sink[1], sink[2]};
    th_init_factors_io io = {.struct_size = (uint32_t)sizeof io, .nmodes = 3, .seed = 1,
                             .grams = grams};
    err[0] = '\0';
    th_status status = th_call_init_factors(c->plugin, inst, &io, err);
    th_call_destroy(c->plugin, inst);
    judge_call_error(c, name, "init_factors", status, err, TH_ERR_BAD_STATE);
}

/* A struct one field short, then a wrong order: both refused, on a loaded
 * instance with Gram buffers for one mode more than the tensor has. */
static void check_init_factors_bad_io(checker *c)
{
    const uint32_t rank = MIN(4u, c->plugin->info->max_rank);
    const char *short_name = "init_factors short io";
    const char *order_name = "init_factors nmodes mismatch";
    begin(c, short_name);
    g_autoptr(GError) error = NULL;
    g_autoptr(test_tensor) tt = make_tensor(3, SKEW_UNIFORM, 60, c->opts->seed + 43, &error);
    if (tt == NULL) {
        fail(c, short_name, "cannot generate the tensor: %s", error->message);
        return;
    }
    if (!load_on(c, c->plugin, c->inst, tt, rank, short_name))
        return;
    double sink[4][16] = {{0}};
    double *grams[4] = {sink[0], sink[1], sink[2], sink[3]};
    th_init_factors_io io = {.struct_size = (uint32_t)offsetof(th_init_factors_io, grams),
                             .nmodes = 3, .seed = 1, .grams = grams};
    char err[TH_ERROR_SIZE] = "";
    judge_call_error(c, short_name, "init_factors",
                     th_call_init_factors(c->plugin, c->inst, &io, err), err,
                     TH_ERR_INVALID_ARGUMENT);

    begin(c, order_name);
    io.struct_size = (uint32_t)sizeof io;
    io.nmodes = 4;
    err[0] = '\0';
    judge_call_error(c, order_name, "init_factors",
                     th_call_init_factors(c->plugin, c->inst, &io, err), err, TH_OK);
}

/* Several seeds (0 and UINT64_MAX among them) and shapes, a mode of length
 * 1 included, then the error paths. */
static void check_all_init_factors(checker *c)
{
    if (c->plugin->entry.init_factors == NULL) {
        skip(c, "init_factors", "not implemented (optional, ABI 1.3; the host draws the "
                                "initial factors and uploads them)");
        return;
    }
    const th_plugin_info *info = c->plugin->info;
    const uint32_t four = MIN(4u, info->max_modes), top = MIN(info->max_modes, 6u);
    const uint64_t s = c->opts->seed;
    const struct {
        uint32_t nmodes;
        skew_kind skew;
        uint32_t rank;
        uint64_t seed;
    } cases[] = {
        {3, SKEW_UNIFORM, 4, 0},
        {four, SKEW_ZIPF, 16, UINT64_MAX},
        {3, SKEW_DEGENERATE, 7, s},
        {top, SKEW_UNIFORM, 32, s ^ UINT64_C(0x8000000000000000)},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++)
        check_init_factors_case(c, cases[i].nmodes, cases[i].skew,
                                MIN(cases[i].rank, info->max_rank), cases[i].seed,
                                s * 37 + 11 + i);
    check_init_factors_before_load(c);
    check_init_factors_bad_io(c);
}

/* ------------------------------------------------------------------------ */
/* generalized_mttkrp and factor_update (ABI 1.4)                            */
/* ------------------------------------------------------------------------ */

/* The checker's own generalized MTTKRP in double (plugin.h's formulas,
 * obviously right): mode's G into `out` (mode TH_MODE_NONE: none) and the
 * sum of h; *scale gets the sum of |h|, the size a rounding error is
 * measured against. */
static double naive_generalized(const th_sptensor *t, double *const *factors, uint32_t rank,
                                uint32_t mode, int32_t elementwise, int32_t reduction,
                                double epsilon, const double *weights, double *out,
                                double *scale)
{
    if (mode != TH_MODE_NONE)
        memset(out, 0, (size_t)t->dims[mode] * rank * sizeof *out);
    double sum = 0.0, size = 0.0;
    for (uint64_t k = 0; k < t->nnz; k++) {
        const double x = t->values[k];
        double m = 0.0;
        for (uint32_t r = 0; r < rank; r++) {
            double term = weights ? weights[r] : 1.0;
            for (uint32_t n = 0; n < t->nmodes; n++)
                term *= factors[n][(size_t)t->indices[n][k] * rank + r];
            m += term;
        }
        double h = 0.0;
        if (reduction == TH_REDUCTION_POISSON_LOG_LIKELIHOOD)
            h = x != 0.0 ? x * log(m) : 0.0;
        else if (reduction == TH_REDUCTION_SQUARED_RESIDUAL)
            h = (m - x) * (m - x);
        else if (reduction == TH_REDUCTION_INNER_PRODUCT)
            h = x * m;
        sum += h;
        size += fabs(h);
        if (mode == TH_MODE_NONE)
            continue;
        const double g = elementwise == TH_ELEMENTWISE_POISSON_RATIO ? x / fmax(m, epsilon)
                         : elementwise == TH_ELEMENTWISE_RESIDUAL    ? m - x
                                                                     : x;
        for (uint32_t r = 0; r < rank; r++) {
            double term = g;
            for (uint32_t n = 0; n < t->nmodes; n++)
                if (n != mode)
                    term *= factors[n][(size_t)t->indices[n][k] * rank + r];
            out[(size_t)t->indices[mode][k] * rank + r] += term;
        }
    }
    *scale = size;
    return sum;
}

/* One generalized_mttkrp on the plugin; the io as it came back. FALSE
 * after a FAIL (an error, or a struct_size the plugin wrote). */
static gboolean run_generalized(checker *c, th_generalized_mttkrp_io *io, const char *name)
{
    const uint32_t size = io->struct_size;
    char err[TH_ERROR_SIZE] = "";
    th_status status = th_call_generalized_mttkrp(c->plugin, c->inst, io, err);
    if (status != TH_OK) {
        fail(c, name, "generalized_mttkrp(mode %d, elementwise %d, reduction %d): %s (%s)",
             io->mode == TH_MODE_NONE ? -1 : (int)io->mode, (int)io->elementwise,
             (int)io->reduction, message_of(err), th_status_name(status));
        return FALSE;
    }
    if (io->struct_size != size) {
        fail(c, name, "generalized_mttkrp wrote struct_size (%u, was %u): the callee never "
             "writes it", io->struct_size, size);
        return FALSE;
    }
    return TRUE;
}

static gboolean run_factor_update(checker *c, th_factor_update_io *io, const char *name)
{
    const uint32_t size = io->struct_size;
    char err[TH_ERROR_SIZE] = "";
    th_status status = th_call_factor_update(c->plugin, c->inst, io, err);
    if (status != TH_OK) {
        fail(c, name, "factor_update(mode %u, operation %d): %s (%s)", io->mode,
             (int)io->operation, message_of(err), th_status_name(status));
        return FALSE;
    }
    if (io->struct_size != size) {
        fail(c, name, "factor_update wrote struct_size (%u, was %u): the callee never writes it",
             io->struct_size, size);
        return FALSE;
    }
    return TRUE;
}

/* |got - want| within the tolerance of `scale` (at least 1). */
static gboolean close_to(const checker *c, double got, double want, double scale)
{
    return got == want || fabs(got - want) <= c->tolerance * fmax(1.0, scale);
}

/* Positive factors, as a Poisson model's. */
static double **positive_factors(const test_tensor *tt, uint32_t rank, uint64_t seed)
{
    th_rng rng;
    th_rng_seed(&rng, seed);
    double **factors = g_new0(double *, tt->coo.nmodes);
    for (uint32_t m = 0; m < tt->coo.nmodes; m++) {
        factors[m] = random_matrix(&rng, (size_t)tt->coo.dims[m] * rank);
        for (size_t k = 0; k < (size_t)tt->coo.dims[m] * rank; k++)
            factors[m][k] += 0.05;
    }
    return factors;
}

/* A 300-nonzero tensor of the case, loaded on the plugin at `rank`; NULL
 * after a FAIL of `name`. */
static test_tensor *loaded_tensor(checker *c, uint32_t nmodes, skew_kind skew, uint32_t rank,
                                  uint64_t seed, const char *name)
{
    g_autoptr(GError) error = NULL;
    test_tensor *tt = make_tensor(nmodes, skew, 300, seed, &error);
    if (tt == NULL) {
        fail(c, name, "cannot generate the tensor: %s", error->message);
        return NULL;
    }
    if (!load_on(c, c->plugin, c->inst, tt, rank, name)) {
        test_tensor_free(tt);
        return NULL;
    }
    return tt;
}

/* The most doubles one mode's dims x rank matrix of t takes. */
static size_t largest_matrix(const th_sptensor *t, uint32_t rank)
{
    size_t largest = 0;
    for (uint32_t m = 0; m < t->nmodes; m++)
        largest = MAX(largest, (size_t)t->dims[m] * rank);
    return largest;
}

/* Every mode of one tensor under the three elementwise functions, each with
 * a reduction (weights given for the Poisson ratio), TH_MODE_NONE (which
 * must leave the results alone), then the factor operations on each mode's
 * Poisson Phi, all against the checker's own double computation. A struct
 * longer than the plugin's (a newer host's) is used throughout. */
static void check_generalized_case(checker *c, uint32_t nmodes, skew_kind skew, uint32_t rank,
                                   uint64_t seed)
{
    g_autofree char *name = g_strdup_printf("generalized_mttkrp modes=%u skew=%s rank=%u", nmodes,
                                            skew_names[skew], rank);
    g_autofree char *fname = g_strdup_printf("factor_update modes=%u skew=%s rank=%u", nmodes,
                                             skew_names[skew], rank);
    begin(c, name);
    g_autoptr(test_tensor) tt = loaded_tensor(c, nmodes, skew, rank, seed, name);
    if (tt == NULL)
        return;
    const th_sptensor *t = tt->t;
    double **factors = positive_factors(tt, rank, seed + 1);
    const size_t largest = largest_matrix(t, rank);
    g_autofree double *got = g_new(double, largest);
    g_autofree double *want = g_new(double, largest);
    g_autofree double *factor = g_new(double, largest);
    g_autofree double *weights = g_new(double, rank);
    g_autofree double *vector = g_new(double, rank);
    for (uint32_t r = 0; r < rank; r++)
        weights[r] = 0.5 + 0.25 * r;
    const struct {
        int32_t elementwise, reduction;
        gboolean weighted;
    } kinds[] = {
        {TH_ELEMENTWISE_POISSON_RATIO, TH_REDUCTION_POISSON_LOG_LIKELIHOOD, TRUE},
        {TH_ELEMENTWISE_RESIDUAL, TH_REDUCTION_SQUARED_RESIDUAL, FALSE},
        {TH_ELEMENTWISE_VALUE, TH_REDUCTION_INNER_PRODUCT, FALSE},
    };
    /* A newer host's longer struct: the tail must be ignored. */
    struct {
        th_generalized_mttkrp_io io;
        double tail[2];
    } longer;
    double worst = 0.0;
    if (!set_all_factors(c, c->plugin, c->inst, factors, nmodes, name))
        goto done;
    for (uint32_t mode = 0; mode < nmodes; mode++) {
        const size_t count = (size_t)t->dims[mode] * rank;
        for (size_t i = 0; i < G_N_ELEMENTS(kinds); i++) {
            const double *w = kinds[i].weighted ? weights : NULL;
            memset(&longer, 0, sizeof longer);
            longer.io = (th_generalized_mttkrp_io){
                .struct_size = (uint32_t)sizeof longer, .mode = mode,
                .elementwise = kinds[i].elementwise, .reduction = kinds[i].reduction,
                .epsilon = 1e-10, .weights = w, .reduced = 0.0};
            longer.tail[0] = longer.tail[1] = -1.0;
            if (!run_generalized(c, &longer.io, name))
                goto done;
            char err[TH_ERROR_SIZE] = "";
            th_status status = th_call_get_mttkrp_result(c->plugin, c->inst, mode, got, err);
            if (status != TH_OK) {
                fail(c, name, "get_mttkrp_result(%u) after generalized_mttkrp: %s (%s)", mode,
                     message_of(err), th_status_name(status));
                goto done;
            }
            double scale = 0.0;
            const double reduced =
                naive_generalized(t, factors, rank, mode, kinds[i].elementwise,
                                  kinds[i].reduction, 1e-10, w, want, &scale);
            const double e = relative_error(got, want, count);
            if (!(e <= c->tolerance)) {
                fail(c, name, "mode %u elementwise %d: relative Frobenius error %.3g > "
                     "tolerance %.0e", mode, (int)kinds[i].elementwise, e, c->tolerance);
                goto done;
            }
            if (!close_to(c, longer.io.reduced, reduced, scale)) {
                fail(c, name, "mode %u reduction %d: reduced %.17g, expected %.17g", mode,
                     (int)kinds[i].reduction, longer.io.reduced, reduced);
                goto done;
            }
            if (longer.tail[0] != -1.0 || longer.tail[1] != -1.0) {
                fail(c, name, "generalized_mttkrp wrote beyond its own struct");
                goto done;
            }
            worst = MAX(worst, e);
        }
        /* Mode's result is now the plain MTTKRP (VALUE): TH_MODE_NONE must
         * leave it as it is. */
        th_generalized_mttkrp_io none = {.struct_size = (uint32_t)sizeof none,
                                         .mode = TH_MODE_NONE, .elementwise = 99,
                                         .reduction = TH_REDUCTION_POISSON_LOG_LIKELIHOOD,
                                         .weights = weights};
        if (!run_generalized(c, &none, name))
            goto done;
        double scale = 0.0;
        const double ll = naive_generalized(t, factors, rank, TH_MODE_NONE, 0,
                                            TH_REDUCTION_POISSON_LOG_LIKELIHOOD, 0.0, weights,
                                            NULL, &scale);
        if (!close_to(c, none.reduced, ll, scale)) {
            fail(c, name, "TH_MODE_NONE log-likelihood %.17g, expected %.17g", none.reduced, ll);
            goto done;
        }
        char err[TH_ERROR_SIZE] = "";
        double *after = want; /* want holds the VALUE oracle: compare with the plugin's own */
        memcpy(after, got, count * sizeof *got);
        if (th_call_get_mttkrp_result(c->plugin, c->inst, mode, got, err) != TH_OK ||
            memcmp(after, got, count * sizeof *got) != 0) {
            fail(c, name, "mode %u: generalized_mttkrp(TH_MODE_NONE) changed the result", mode);
            goto done;
        }
    }
    pass(c, name, "max relative error %.2g", worst);

    /* The factor operations, on each mode's Poisson Phi. */
    begin(c, fname);
    for (uint32_t mode = 0; mode < nmodes; mode++) {
        const size_t count = (size_t)t->dims[mode] * rank;
        th_generalized_mttkrp_io io = {.struct_size = (uint32_t)sizeof io, .mode = mode,
                                       .elementwise = TH_ELEMENTWISE_POISSON_RATIO,
                                       .reduction = TH_REDUCTION_NONE, .epsilon = 1e-10};
        char err[TH_ERROR_SIZE] = "";
        if (!run_generalized(c, &io, fname) ||
            th_call_get_mttkrp_result(c->plugin, c->inst, mode, got, err) != TH_OK) {
            fail(c, fname, "mode %u: no Poisson Phi: %s", mode, message_of(err));
            goto done;
        }
        /* MULTIPLICATIVE_UPDATE at tolerance 0: always applied. */
        double violation = 0.0;
        for (size_t k = 0; k < count; k++)
            violation = fmax(violation, fabs(fmin(factors[mode][k], 1.0 - got[k])));
        th_factor_update_io fio = {.struct_size = (uint32_t)sizeof fio, .mode = mode,
                                   .operation = TH_FACTOR_MULTIPLICATIVE_UPDATE,
                                   .tolerance = 0.0};
        if (!run_factor_update(c, &fio, fname))
            goto done;
        if (!close_to(c, fio.violation, violation, violation) || fio.count != 1) {
            fail(c, fname, "mode %u MULTIPLICATIVE_UPDATE: violation %.17g count %" G_GUINT64_FORMAT
                 ", expected %.17g and 1", mode, fio.violation, fio.count, violation);
            goto done;
        }
        for (size_t k = 0; k < count; k++)
            want[k] = factors[mode][k] * got[k];
        if (th_call_get_factor(c->plugin, c->inst, mode, factor, err) != TH_OK ||
            !(relative_error(factor, want, count) <= c->tolerance)) {
            fail(c, fname, "mode %u MULTIPLICATIVE_UPDATE: the factor is not A .* Phi", mode);
            goto done;
        }
        /* Past the tolerance: nothing changes, count 0. */
        fio = (th_factor_update_io){.struct_size = (uint32_t)sizeof fio, .mode = mode,
                                    .operation = TH_FACTOR_MULTIPLICATIVE_UPDATE,
                                    .tolerance = INFINITY};
        if (!run_factor_update(c, &fio, fname))
            goto done;
        double *unchanged = want;
        if (fio.count != 0 ||
            th_call_get_factor(c->plugin, c->inst, mode, unchanged, err) != TH_OK ||
            memcmp(unchanged, factor, count * sizeof *factor) != 0) {
            fail(c, fname, "mode %u MULTIPLICATIVE_UPDATE below the tolerance changed the "
                 "factor or counted %" G_GUINT64_FORMAT, mode, fio.count);
            goto done;
        }
        /* RAISE_INADMISSIBLE_ZEROS, on the factor as it now is, with a
         * threshold among the plugin's own Phi values (neither the host's
         * 1 nor pyttb's 0), so that the plugin must read it. */
        const double limit = 0.3, offset = 0.01, threshold = got[count / 2];
        uint64_t changed = 0;
        for (size_t k = 0; k < count; k++) {
            want[k] = factor[k];
            if (got[k] > threshold && factor[k] < limit) {
                want[k] += offset;
                changed++;
            }
        }
        fio = (th_factor_update_io){.struct_size = (uint32_t)sizeof fio, .mode = mode,
                                    .operation = TH_FACTOR_RAISE_INADMISSIBLE_ZEROS,
                                    .tolerance = limit, .offset = offset,
                                    .threshold = threshold};
        if (!run_factor_update(c, &fio, fname))
            goto done;
        if (fio.count != changed ||
            th_call_get_factor(c->plugin, c->inst, mode, factor, err) != TH_OK ||
            !(relative_error(factor, want, count) <= c->tolerance)) {
            fail(c, fname, "mode %u RAISE_INADMISSIBLE_ZEROS: count %" G_GUINT64_FORMAT
                 " (expected %" G_GUINT64_FORMAT ") or the factor is wrong", mode, fio.count,
                 changed);
            goto done;
        }
        /* NORMALIZE_1 then SCALE_COLUMNS by the norms: back where it was. */
        fio = (th_factor_update_io){.struct_size = (uint32_t)sizeof fio, .mode = mode,
                                    .operation = TH_FACTOR_NORMALIZE_1, .vector = vector};
        if (!run_factor_update(c, &fio, fname))
            goto done;
        for (uint32_t r = 0; r < rank; r++) {
            double norm = 0.0;
            for (uint32_t i = 0; i < t->dims[mode]; i++)
                norm += fabs(factor[(size_t)i * rank + r]);
            if (!close_to(c, vector[r], norm, norm)) {
                fail(c, fname, "mode %u NORMALIZE_1: column %u norm %.17g, expected %.17g",
                     mode, r, vector[r], norm);
                goto done;
            }
        }
        fio.operation = TH_FACTOR_SCALE_COLUMNS;
        if (!run_factor_update(c, &fio, fname) ||
            th_call_get_factor(c->plugin, c->inst, mode, want, err) != TH_OK ||
            !(relative_error(want, factor, count) <= c->tolerance)) {
            fail(c, fname, "mode %u: NORMALIZE_1 then SCALE_COLUMNS by its norms is not the "
                 "factor it started from", mode);
            goto done;
        }
    }
    pass(c, fname, NULL);
done:
    free_factors(factors, nmodes);
}

/* The error rules of plugin.h: before load_tensor, before a result of the
 * mode, a short io, a mode out of range, unknown functions, a zero epsilon
 * where it divides. */
static void check_generalized_errors(checker *c)
{
    char err[TH_ERROR_SIZE] = "";
    const th_generalized_mttkrp_io good = {
        .struct_size = (uint32_t)sizeof good, .mode = 0,
        .elementwise = TH_ELEMENTWISE_POISSON_RATIO, .reduction = TH_REDUCTION_NONE,
        .epsilon = 1e-10};
    const th_factor_update_io fgood = {.struct_size = (uint32_t)sizeof fgood, .mode = 0,
                                       .operation = TH_FACTOR_MULTIPLICATIVE_UPDATE,
                                       .tolerance = 1e-4};
    th_generalized_mttkrp_io io = good;
    th_factor_update_io fio = fgood;

    const char *name = "generalized_mttkrp/factor_update before load_tensor";
    begin(c, name);
    th_instance *fresh = NULL;
    if (create_instance(c->plugin, NULL, 0, &fresh, err) != TH_OK) {
        fail(c, name, "create() failed: %s", message_of(err));
        return;
    }
    err[0] = '\0';
    th_status status = th_call_generalized_mttkrp(c->plugin, fresh, &io, err);
    g_autofree char *problem = status == TH_ERR_BAD_STATE ? NULL
                                                          : g_strdup_printf(
                                                                "generalized_mttkrp returned %s",
                                                                th_status_name(status));
    char ferr[TH_ERROR_SIZE] = "";
    const th_status fstatus = th_call_factor_update(c->plugin, fresh, &fio, ferr);
    th_call_destroy(c->plugin, fresh);
    if (problem != NULL)
        fail(c, name, "%s, expected TH_ERR_BAD_STATE: %s", problem, message_of(err));
    else
        judge_call_error(c, name, "factor_update", fstatus, ferr, TH_ERR_BAD_STATE);

    const uint32_t rank = MIN(4u, c->plugin->info->max_rank);
    g_autoptr(GError) error = NULL;
    g_autoptr(test_tensor) tt = make_tensor(3, SKEW_UNIFORM, 60, c->opts->seed + 47, &error);
    name = "factor_update before a result of the mode";
    begin(c, name);
    if (tt == NULL) {
        fail(c, name, "cannot generate the tensor: %s", error->message);
        return;
    }
    if (!load_on(c, c->plugin, c->inst, tt, rank, name))
        return;
    err[0] = '\0';
    judge_call_error(c, name, "factor_update", th_call_factor_update(c->plugin, c->inst, &fio, err),
                     err, TH_ERR_BAD_STATE);

    const struct {
        const char *name;
        int field; /* 0: generalized_mttkrp, 1: factor_update */
        th_status wanted;
    } cases[] = {
        {"generalized_mttkrp short io", 0, TH_ERR_INVALID_ARGUMENT},
        {"generalized_mttkrp mode out of range", 0, TH_ERR_INVALID_ARGUMENT},
        {"generalized_mttkrp unknown elementwise", 0, TH_ERR_UNSUPPORTED},
        {"generalized_mttkrp unknown reduction", 0, TH_ERR_UNSUPPORTED},
        {"generalized_mttkrp epsilon 0", 0, TH_ERR_INVALID_ARGUMENT},
        {"factor_update short io", 1, TH_ERR_INVALID_ARGUMENT},
        {"factor_update mode out of range", 1, TH_ERR_INVALID_ARGUMENT},
        {"factor_update unknown operation", 1, TH_ERR_UNSUPPORTED},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        begin(c, cases[i].name);
        io = good;
        fio = fgood;
        fio.operation = TH_FACTOR_NORMALIZE_1; /* reads no Phi */
        double vector[8] = {0};
        fio.vector = vector;
        switch (i) {
        case 0: io.struct_size = (uint32_t)offsetof(th_generalized_mttkrp_io, reduced); break;
        case 1: io.mode = 3; break;
        case 2: io.elementwise = 0x7fff; break;
        case 3: io.reduction = 0x7fff; break;
        case 4: io.epsilon = 0.0; break;
        case 5: fio.struct_size = (uint32_t)offsetof(th_factor_update_io, count); break;
        case 6: fio.mode = 3; break;
        default: fio.operation = 0x7fff; break;
        }
        err[0] = '\0';
        status = cases[i].field == 0 ? th_call_generalized_mttkrp(c->plugin, c->inst, &io, err)
                                     : th_call_factor_update(c->plugin, c->inst, &fio, err);
        judge_call_error(c, cases[i].name, cases[i].field == 0 ? "generalized_mttkrp"
                                                               : "factor_update",
                         status, err, cases[i].wanted);
    }
}

/* Both functions or neither: the host runs a model other than least
 * squares only on a backend with both. */
static void check_all_generalized(checker *c)
{
    const gboolean has_g = c->plugin->entry.generalized_mttkrp != NULL;
    const gboolean has_f = c->plugin->entry.factor_update != NULL;
    if (!has_g && !has_f) {
        skip(c, "generalized_mttkrp", "lacks generalized_mttkrp/factor_update (ABI 1.4): models "
                                      "other than least squares will not run on it");
        return;
    }
    begin(c, "generalized_mttkrp");
    if (!has_g || !has_f) {
        fail(c, "generalized_mttkrp", "implements %s but not %s: the host runs models other "
             "than least squares only on a backend with both (ABI 1.4)",
             has_g ? "generalized_mttkrp" : "factor_update",
             has_g ? "factor_update" : "generalized_mttkrp");
        return;
    }
    const th_plugin_info *info = c->plugin->info;
    const uint64_t s = c->opts->seed;
    check_generalized_case(c, 3, SKEW_UNIFORM, MIN(4u, info->max_rank), s * 41 + 1);
    check_generalized_case(c, 3, SKEW_DEGENERATE, MIN(3u, info->max_rank), s * 41 + 2);
    if (info->max_modes >= 4)
        check_generalized_case(c, 4, SKEW_ZIPF, MIN(7u, info->max_rank), s * 41 + 3);
    check_generalized_errors(c);
}

/* ------------------------------------------------------------------------ */
/* multiplicative_updates (ABI 1.7)                                          */
/* ------------------------------------------------------------------------ */

/* The checker's own inner iterations (plugin.h's loop over its own
 * generalized MTTKRP): factors[mode] updated in place, `phi` the last Phi,
 * violations[i] each iteration's violation. Returns the iterations run. */
static uint32_t naive_multiplicative(const th_sptensor *t, double *const *factors, uint32_t rank,
                                     uint32_t mode, uint32_t max_iterations, double epsilon,
                                     double tolerance, double *phi, double *violations,
                                     uint32_t *updates)
{
    const size_t count = (size_t)t->dims[mode] * rank;
    double *a = factors[mode];
    *updates = 0;
    for (uint32_t i = 0; i < max_iterations; i++) {
        double scale = 0.0;
        naive_generalized(t, factors, rank, mode, TH_ELEMENTWISE_POISSON_RATIO,
                          TH_REDUCTION_NONE, epsilon, NULL, phi, &scale);
        double violation = 0.0;
        for (size_t k = 0; k < count; k++)
            violation = fmax(violation, fabs(fmin(a[k], 1.0 - phi[k])));
        violations[i] = violation;
        if (violation < tolerance)
            return i + 1;
        for (size_t k = 0; k < count; k++)
            a[k] *= phi[k];
        ++*updates;
    }
    return max_iterations;
}

/* A tolerance the loop stops at after a few iterations, with a margin on
 * both sides: half way between violations[s] and the smallest before it,
 * for the first s >= 2 below all before it; 0 (no stop) if none. */
static double stopping_tolerance(const double *violations, uint32_t n)
{
    double smallest = violations[0];
    for (uint32_t s = 1; s < n; s++) {
        if (s >= 2 && violations[s] < smallest * (1.0 - 1e-3))
            return 0.5 * (violations[s] + smallest);
        smallest = fmin(smallest, violations[s]);
    }
    return 0.0;
}

/* Each mode's inner iterations in one call against the checker's loop from
 * the same factors: to the end (tolerance 0), then stopped part way. */
static void check_multiplicative_case(checker *c, uint32_t nmodes, skew_kind skew, uint32_t rank,
                                      uint64_t seed)
{
    enum { ITERATIONS = 5 };
    const double epsilon = 1e-10;
    g_autofree char *name = g_strdup_printf("multiplicative_updates modes=%u skew=%s rank=%u",
                                            nmodes, skew_names[skew], rank);
    begin(c, name);
    g_autoptr(test_tensor) tt = loaded_tensor(c, nmodes, skew, rank, seed, name);
    if (tt == NULL)
        return;
    const th_sptensor *t = tt->t;
    double **start = positive_factors(tt, rank, seed + 1);
    double **mine = positive_factors(tt, rank, seed + 1);
    const size_t largest = largest_matrix(t, rank);
    g_autofree double *phi = g_new(double, largest);
    g_autofree double *got = g_new(double, largest);
    double violations[ITERATIONS];
    double worst = 0.0;
    uint32_t stopped = 0; /* modes whose second round stopped part way */
    for (uint32_t mode = 0; mode < nmodes; mode++) {
        const size_t count = (size_t)t->dims[mode] * rank;
        double tolerance = 0.0;
        for (int round = 0; round < 2; round++) {
            if (round == 1 && tolerance == 0.0)
                break;
            for (uint32_t m = 0; m < nmodes; m++)
                memcpy(mine[m], start[m], (size_t)t->dims[m] * rank * sizeof(double));
            uint32_t updates = 0;
            const uint32_t iterations =
                naive_multiplicative(t, mine, rank, mode, ITERATIONS, epsilon, tolerance, phi,
                                     violations, &updates);
            if (!set_all_factors(c, c->plugin, c->inst, start, nmodes, name))
                goto done;
            th_multiplicative_updates_io io = {.struct_size = (uint32_t)sizeof io,
                                               .mode = mode,
                                               .elementwise = TH_ELEMENTWISE_POISSON_RATIO,
                                               .max_iterations = ITERATIONS,
                                               .epsilon = epsilon,
                                               .tolerance = tolerance};
            char err[TH_ERROR_SIZE] = "";
            const th_status status =
                th_call_multiplicative_updates(c->plugin, c->inst, &io, err);
            if (status != TH_OK) {
                fail(c, name, "mode %u, tolerance %g: %s (%s)", mode, tolerance,
                     message_of(err), th_status_name(status));
                goto done;
            }
            if (io.iterations != iterations || io.updates != updates ||
                !close_to(c, io.violation, violations[iterations - 1],
                          violations[iterations - 1])) {
                fail(c, name, "mode %u, tolerance %g: %u iterations, %u updates, violation "
                     "%.17g; the loop runs %u, %u, %.17g", mode, tolerance, io.iterations,
                     io.updates, io.violation, iterations, updates, violations[iterations - 1]);
                goto done;
            }
            /* Each update multiplies the error in: a few iterations' worth. */
            const double allowed = c->tolerance * ITERATIONS;
            if (th_call_get_factor(c->plugin, c->inst, mode, got, err) != TH_OK ||
                relative_error(got, mine[mode], count) > allowed) {
                fail(c, name, "mode %u, tolerance %g: the factor is not the loop's (relative "
                     "error %.3g)", mode, tolerance, relative_error(got, mine[mode], count));
                goto done;
            }
            worst = fmax(worst, relative_error(got, mine[mode], count));
            stopped += iterations < ITERATIONS;
            if (th_call_get_mttkrp_result(c->plugin, c->inst, mode, got, err) != TH_OK ||
                relative_error(got, phi, count) > allowed) {
                fail(c, name, "mode %u, tolerance %g: the result is not the last Phi", mode,
                     tolerance);
                goto done;
            }
            tolerance = stopping_tolerance(violations, ITERATIONS);
        }
    }
    pass(c, name, "max relative error %.2g; stopped by the tolerance part way in %u of %u modes",
         worst, stopped, nmodes);
done:
    free_factors(start, nmodes);
    free_factors(mine, nmodes);
}

/* The error rules of plugin.h, on the loaded instance. */
static void check_multiplicative_errors(checker *c)
{
    const char *name = "multiplicative_updates errors";
    begin(c, name);
    const th_multiplicative_updates_io good = {.struct_size = (uint32_t)sizeof good,
                                               .mode = 0,
                                               .elementwise = TH_ELEMENTWISE_POISSON_RATIO,
                                               .max_iterations = 2,
                                               .epsilon = 1e-10,
                                               .tolerance = 1e-4};
    struct {
        const char *what;
        th_multiplicative_updates_io io;
        th_status expected;
    } cases[] = {
        {"a struct_size of 8", good, TH_ERR_INVALID_ARGUMENT},
        {"mode 99", good, TH_ERR_INVALID_ARGUMENT},
        {"max_iterations 0", good, TH_ERR_INVALID_ARGUMENT},
        {"epsilon 0", good, TH_ERR_INVALID_ARGUMENT},
        {"a NaN tolerance", good, TH_ERR_INVALID_ARGUMENT},
        {"TH_ELEMENTWISE_RESIDUAL", good, TH_ERR_UNSUPPORTED},
    };
    cases[0].io.struct_size = 8;
    cases[1].io.mode = 99;
    cases[2].io.max_iterations = 0;
    cases[3].io.epsilon = 0.0;
    cases[4].io.tolerance = NAN;
    cases[5].io.elementwise = TH_ELEMENTWISE_RESIDUAL;
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        char err[TH_ERROR_SIZE] = "";
        const th_status status =
            th_call_multiplicative_updates(c->plugin, c->inst, &cases[i].io, err);
        if (status != cases[i].expected || err[0] == '\0') {
            fail(c, name, "%s: %s (%s), expected %s with a message", cases[i].what,
                 th_status_name(status), message_of(err), th_status_name(cases[i].expected));
            return;
        }
    }
    pass(c, name, NULL);
}

static void check_all_multiplicative(checker *c)
{
    if (c->plugin->entry.multiplicative_updates == NULL) {
        skip(c, "multiplicative_updates", "lacks multiplicative_updates (ABI 1.7): the host "
                                          "runs CP-APR's inner iterations one call each");
        return;
    }
    if (c->plugin->entry.generalized_mttkrp == NULL || c->plugin->entry.factor_update == NULL) {
        begin(c, "multiplicative_updates");
        fail(c, "multiplicative_updates", "implements multiplicative_updates without "
             "generalized_mttkrp and factor_update (ABI 1.4), which it stands for");
        return;
    }
    const th_plugin_info *info = c->plugin->info;
    const uint64_t s = c->opts->seed;
    check_multiplicative_case(c, 3, SKEW_UNIFORM, MIN(4u, info->max_rank), s * 43 + 1);
    check_multiplicative_case(c, 3, SKEW_DEGENERATE, MIN(8u, info->max_rank), s * 43 + 2);
    if (info->max_modes >= 4)
        check_multiplicative_case(c, 4, SKEW_ZIPF, MIN(16u, info->max_rank), s * 43 + 3);
    check_multiplicative_errors(c);
}

/* ------------------------------------------------------------------------ */
/* row_least_squares (ABI 1.5)                                               */
/* ------------------------------------------------------------------------ */

/* What one row_least_squares call is asked. */
typedef struct rls_kind {
    double ridge;
    uint32_t nonneg;
    uint32_t passes;
} rls_kind;

/* The rows a completion tensor shapes on purpose: row `empty_row` of mode
 * `empty_mode` has no nonzero; row `thin_row` of mode `thin_mode` keeps
 * only its first `thin_keep` (fewer than the rank: singular at ridge 0). */
typedef struct row_shape {
    uint32_t empty_mode, empty_row;
    uint32_t thin_mode, thin_row, thin_keep;
} row_shape;

/* The lower Cholesky factor l of the n x n V (the checker's own); FALSE at
 * plugin.h's breakdown: a pivot not above max_i V(i,i) * n * DBL_EPSILON *
 * TH_SOLVE_BREAKDOWN_FACTOR. */
static gboolean naive_cholesky(const double *v, uint32_t n, double *l)
{
    double largest = 0.0;
    for (uint32_t i = 0; i < n; i++)
        largest = fmax(largest, v[(size_t)i * n + i]);
    const double threshold = largest * n * DBL_EPSILON * TH_SOLVE_BREAKDOWN_FACTOR;
    memset(l, 0, (size_t)n * n * sizeof *l);
    for (uint32_t j = 0; j < n; j++)
        for (uint32_t i = j; i < n; i++) {
            double sum = v[(size_t)i * n + j];
            for (uint32_t k = 0; k < j; k++)
                sum -= l[(size_t)i * n + k] * l[(size_t)j * n + k];
            if (i > j)
                l[(size_t)i * n + j] = sum / l[(size_t)j * n + j];
            else if (sum > threshold)
                l[(size_t)j * n + j] = sqrt(sum);
            else
                return FALSE;
        }
    return TRUE;
}

/* x = (l l^T)^-1 b: the two triangular solves. */
static void naive_cholesky_solve(const double *l, const double *b, uint32_t n, double *x)
{
    for (uint32_t i = 0; i < n; i++) {
        x[i] = b[i];
        for (uint32_t k = 0; k < i; k++)
            x[i] -= l[(size_t)i * n + k] * x[k];
        x[i] /= l[(size_t)i * n + i];
    }
    for (uint32_t i = n; i-- > 0;) {
        for (uint32_t k = i + 1; k < n; k++)
            x[i] -= l[(size_t)k * n + i] * x[k];
        x[i] /= l[(size_t)i * n + i];
    }
}

/* plugin.h's coordinate descent on V a = b under a >= 0, from `a`. */
static void naive_coordinate_descent(const double *v, const double *b, uint32_t n,
                                     uint32_t passes, double *a)
{
    for (uint32_t pass = 0; pass < passes; pass++)
        for (uint32_t r = 0; r < n; r++) {
            const double d = v[(size_t)r * n + r];
            double va = 0.0;
            for (uint32_t s = 0; s < n; s++)
                va += v[(size_t)r * n + s] * a[s];
            a[r] = d == 0.0 ? 0.0 : fmax(0.0, a[r] + (b[r] - va) / d);
        }
}

/* The checker's own row_least_squares (plugin.h's words), from `factors`
 * as the plugin holds them, into `out` (mode's factor updated): every
 * row's V = sum h h^T + ridge I and b = sum x h straight from the
 * nonzeros, then the row's solve. */
static void naive_row_least_squares(const th_sptensor *t, double *const *factors,
                                    uint32_t rank, uint32_t mode, const rls_kind *kind,
                                    double *out, uint64_t *singular, uint64_t *empty)
{
    const uint32_t rows = t->dims[mode];
    const size_t r2 = (size_t)rank * rank;
    g_autofree double *v = g_new0(double, rows * r2);
    g_autofree double *b = g_new0(double, (size_t)rows * rank);
    g_autofree uint64_t *count = g_new0(uint64_t, rows);
    g_autofree double *h = g_new(double, rank);
    g_autofree double *x = g_new(double, rank);
    g_autofree double *l = g_new(double, r2);
    for (uint64_t k = 0; k < t->nnz; k++) {
        const uint32_t row = t->indices[mode][k];
        for (uint32_t r = 0; r < rank; r++) {
            h[r] = 1.0;
            for (uint32_t m = 0; m < t->nmodes; m++)
                if (m != mode)
                    h[r] *= factors[m][(size_t)t->indices[m][k] * rank + r];
        }
        for (uint32_t r = 0; r < rank; r++) {
            b[(size_t)row * rank + r] += t->values[k] * h[r];
            for (uint32_t s = 0; s < rank; s++)
                v[row * r2 + (size_t)r * rank + s] += h[r] * h[s];
        }
        count[row]++;
    }
    memcpy(out, factors[mode], (size_t)rows * rank * sizeof *out);
    *singular = *empty = 0;
    for (uint32_t row = 0; row < rows; row++) {
        double *a = out + (size_t)row * rank, *vr = v + row * r2, *br = b + (size_t)row * rank;
        for (uint32_t r = 0; r < rank; r++)
            vr[(size_t)r * rank + r] += kind->ridge;
        if (count[row] == 0) {
            ++*empty;
            if (kind->ridge > 0.0)
                memset(a, 0, rank * sizeof *a);
        } else if (kind->nonneg) {
            naive_coordinate_descent(vr, br, rank, kind->passes, a);
        } else if ((kind->ridge > 0.0 || count[row] >= rank) && naive_cholesky(vr, rank, l)) {
            naive_cholesky_solve(l, br, rank, x);
            memcpy(a, x, rank * sizeof *a);
        } else {
            ++*singular;
        }
    }
}

/* Whether `index` (one coordinate per mode) lies in row `row` of `mode`. */
static gboolean in_row(const uint32_t *index, uint32_t mode, uint32_t row)
{
    return index[mode] == row;
}

/* Every cell of the box `dims` observed with probability `observed`
 * (values uniform in [-1, 1)), except the rows `shape` empties or thins:
 * rows hold many nonzeros against the rank, so every other row's system is
 * well conditioned and no solve is near its breakdown. */
static test_tensor *make_completion_tensor(uint32_t nmodes, const uint32_t *dims,
                                           double observed, const row_shape *shape,
                                           uint64_t seed)
{
    th_rng rng;
    th_rng_seed(&rng, seed);
    uint64_t cells = 1;
    for (uint32_t m = 0; m < nmodes; m++)
        cells *= dims[m];
    g_autoptr(GArray) kept = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    uint32_t thin = 0, index[TH_MAX_MODES];
    for (uint64_t cell = 0; cell < cells; cell++) {
        for (uint64_t rest = cell, m = nmodes; m-- > 0; rest /= dims[m])
            index[m] = (uint32_t)(rest % dims[m]);
        if (!(th_rng_uniform(&rng) < observed) ||
            in_row(index, shape->empty_mode, shape->empty_row))
            continue;
        if (in_row(index, shape->thin_mode, shape->thin_row) && thin++ >= shape->thin_keep)
            continue;
        g_array_append_val(kept, cell);
    }
    th_sptensor *t = th_sptensor_new(nmodes, kept->len);
    memcpy(t->dims, dims, nmodes * sizeof *t->dims);
    for (guint k = 0; k < kept->len; k++) {
        uint64_t rest = g_array_index(kept, uint64_t, k);
        for (uint32_t m = nmodes; m-- > 0; rest /= dims[m])
            t->indices[m][k] = (uint32_t)(rest % dims[m]);
        t->values[k] = 2.0 * th_rng_uniform(&rng) - 1.0;
    }
    return wrap(t);
}

/* One row_least_squares on the plugin, through a newer host's longer
 * struct whose tail must stay as it was; the io as it came back. FALSE
 * after a FAIL. */
static gboolean run_row_least_squares(checker *c, uint32_t mode, const rls_kind *kind,
                                      th_row_least_squares_io *out, const char *name)
{
    struct {
        th_row_least_squares_io io;
        double tail[2];
    } longer;
    memset(&longer, 0, sizeof longer);
    longer.io = (th_row_least_squares_io){.struct_size = (uint32_t)sizeof longer, .mode = mode,
                                          .ridge = kind->ridge, .nonneg = kind->nonneg,
                                          .passes = kind->passes};
    longer.tail[0] = longer.tail[1] = -1.0;
    char err[TH_ERROR_SIZE] = "";
    th_status status = th_call_row_least_squares(c->plugin, c->inst, &longer.io, err);
    if (status != TH_OK) {
        fail(c, name, "row_least_squares(mode %u): %s (%s)", mode, message_of(err),
             th_status_name(status));
        return FALSE;
    }
    if (longer.io.struct_size != sizeof longer) {
        fail(c, name, "row_least_squares wrote struct_size (%u, was %zu): the callee never "
             "writes it", longer.io.struct_size, sizeof longer);
        return FALSE;
    }
    if (longer.tail[0] != -1.0 || longer.tail[1] != -1.0) {
        fail(c, name, "row_least_squares wrote beyond its own struct");
        return FALSE;
    }
    *out = longer.io;
    return TRUE;
}

/* The sum over the nonzeros of (x_i - model_i)^2 straight from the
 * factors (mode's from `own`, the others from `factors`): what
 * residual_squared must be. */
static double naive_residual_squared(const th_sptensor *t, double *const *factors,
                                     const double *own, uint32_t rank, uint32_t mode)
{
    double sum = 0.0;
    for (uint64_t k = 0; k < t->nnz; k++) {
        double model = 0.0;
        for (uint32_t r = 0; r < rank; r++) {
            double p = own[(size_t)t->indices[mode][k] * rank + r];
            for (uint32_t m = 0; m < t->nmodes; m++)
                if (m != mode)
                    p *= factors[m][(size_t)t->indices[m][k] * rank + r];
            model += p;
        }
        const double e = t->values[k] - model;
        sum += e * e;
    }
    return sum;
}

/* Where `got` differs most from `want` (NaN first), as an index. */
static size_t largest_difference(const double *got, const double *want, size_t count)
{
    size_t where = 0;
    double largest = -1.0;
    for (size_t k = 0; k < count && !isnan(largest); k++) {
        const double difference = fabs(got[k] - want[k]);
        if (isnan(difference) || difference > largest) {
            largest = difference;
            where = k;
        }
    }
    return where;
}

/* The rows `shape` made, checked exactly: the thin row left as it was at
 * ridge 0 without nonneg (singular), the empty row left at ridge 0 and
 * zero at ridge > 0. FALSE after a FAIL. */
static gboolean check_shaped_rows(checker *c, const row_shape *shape, uint32_t mode,
                                  uint32_t rank, const rls_kind *kind, const double *got,
                                  const double *before, const char *name)
{
    const size_t bytes = rank * sizeof *got;
    if (shape->thin_mode == mode && kind->ridge == 0.0 && !kind->nonneg &&
        memcmp(got + (size_t)shape->thin_row * rank, before + (size_t)shape->thin_row * rank,
               bytes) != 0) {
        fail(c, name, "mode %u row %u has %u nonzeros at rank %u, ridge 0: its system is "
             "singular and the row must be left as it was", mode, shape->thin_row,
             shape->thin_keep, rank);
        return FALSE;
    }
    if (shape->empty_mode != mode)
        return TRUE;
    const double *row = got + (size_t)shape->empty_row * rank;
    const double *was = before + (size_t)shape->empty_row * rank;
    gboolean ok = kind->ridge > 0.0 || memcmp(row, was, bytes) == 0;
    for (uint32_t r = 0; r < rank && kind->ridge > 0.0; r++)
        ok = ok && row[r] == 0.0;
    if (!ok)
        fail(c, name, "mode %u row %u has no nonzero: it must be %s", mode, shape->empty_row,
             kind->ridge > 0.0 ? "zero at ridge > 0" : "left as it was at ridge 0");
    return ok;
}

/* Every mode of `tt` from the same factors (set, then read back as the
 * plugin holds them, so an f32 backend's rounding is in the oracle's
 * input): mode's factor against the checker's own solve, both counts,
 * factor_norm_squared against the factor returned, residual_squared
 * against the squared residuals of the factors returned, every other factor
 * bitwise as it was, and the shaped rows exactly (shape may be NULL). */
static void check_rls_case(checker *c, const test_tensor *tt, const char *label, uint32_t rank,
                           const rls_kind *kind, const row_shape *shape, uint64_t seed)
{
    g_autofree char *name = g_strdup_printf("row_least_squares %s rank=%u ridge=%g nonneg=%u",
                                            label, rank, kind->ridge, kind->nonneg);
    begin(c, name);
    if (!load_on(c, c->plugin, c->inst, tt, rank, name))
        return;
    const uint32_t nmodes = tt->coo.nmodes;
    double **factors = centred_factors(tt, rank, seed);
    double *held[TH_MAX_MODES] = {NULL};
    size_t largest = 0;
    for (uint32_t m = 0; m < nmodes; m++) {
        held[m] = g_new(double, (size_t)tt->coo.dims[m] * rank);
        largest = MAX(largest, (size_t)tt->coo.dims[m] * rank);
    }
    g_autofree double *want = g_new(double, largest);
    g_autofree double *got = g_new(double, largest);
    double worst = 0.0;
    uint64_t singular_total = 0, empty_total = 0;
    for (uint32_t mode = 0; mode < nmodes; mode++) {
        const uint32_t rows = tt->coo.dims[mode];
        const size_t count = (size_t)rows * rank;
        uint64_t singular = 0, empty = 0;
        th_row_least_squares_io io;
        char err[TH_ERROR_SIZE] = "";
        if (!set_all_factors(c, c->plugin, c->inst, factors, nmodes, name) ||
            !get_factors_into(c, c->plugin, c->inst, held, nmodes, name) ||
            !run_row_least_squares(c, mode, kind, &io, name))
            goto done;
        naive_row_least_squares(tt->t, held, rank, mode, kind, want, &singular, &empty);
        th_status status = th_call_get_factor(c->plugin, c->inst, mode, got, err);
        if (status != TH_OK) {
            fail(c, name, "get_factor(%u) after row_least_squares: %s (%s)", mode,
                 message_of(err), th_status_name(status));
            goto done;
        }
        if (shape && !check_shaped_rows(c, shape, mode, rank, kind, got, held[mode], name))
            goto done;
        const double e = relative_error(got, want, count);
        if (!(e <= c->tolerance)) {
            const size_t k = largest_difference(got, want, count);
            fail(c, name, "mode %u: relative Frobenius error %.3g > tolerance %.0e (largest "
                 "at row %zu column %zu: %.17g, expected %.17g)", mode, e, c->tolerance,
                 k / rank, k % rank, got[k], want[k]);
            goto done;
        }
        if (io.singular_rows != singular || io.empty_rows != empty) {
            fail(c, name, "mode %u: %" G_GUINT64_FORMAT " singular and %" G_GUINT64_FORMAT
                 " empty rows, expected %" G_GUINT64_FORMAT " and %" G_GUINT64_FORMAT, mode,
                 io.singular_rows, io.empty_rows, singular, empty);
            goto done;
        }
        double norm = 0.0;
        for (size_t k = 0; k < count; k++)
            norm += got[k] * got[k];
        if (!close_to(c, io.factor_norm_squared, norm, norm)) {
            fail(c, name, "mode %u: factor_norm_squared %.17g, but the factor's is %.17g", mode,
                 io.factor_norm_squared, norm);
            goto done;
        }
        /* Relative to the direct sum, at the checker's tolerance (an f32
         * backend's: its x^T x - 2 a^T b + a^T G a cancels in double, its
         * factors in fp32). */
        const double residual = naive_residual_squared(tt->t, held, got, rank, mode);
        if (!close_to(c, io.residual_squared, residual, residual)) {
            fail(c, name, "mode %u: residual_squared %.17g, but the sum of the squared "
                 "residuals of the factors returned is %.17g (relative difference %.3g)",
                 mode, io.residual_squared, residual,
                 fabs(io.residual_squared - residual) / fmax(residual, DBL_MIN));
            goto done;
        }
        for (uint32_t m = 0; m < nmodes; m++) {
            if (m == mode)
                continue;
            if (th_call_get_factor(c->plugin, c->inst, m, got, err) != TH_OK ||
                memcmp(got, held[m], (size_t)tt->coo.dims[m] * rank * sizeof *got) != 0) {
                fail(c, name, "row_least_squares(mode %u) changed the factor of mode %u", mode,
                     m);
                goto done;
            }
        }
        worst = MAX(worst, e);
        singular_total += singular;
        empty_total += empty;
    }
    pass(c, name, "max relative error %.2g; %" G_GUINT64_FORMAT " singular and %"
         G_GUINT64_FORMAT " empty rows over the modes", worst, singular_total, empty_total);
done:
    for (uint32_t m = 0; m < nmodes; m++)
        g_free(held[m]);
    free_factors(factors, nmodes);
}

/* The error rules of plugin.h: before load_tensor, then one bad field at a
 * time on a loaded instance. */
static void check_rls_errors(checker *c)
{
    const char *name = "row_least_squares before load_tensor";
    begin(c, name);
    const th_row_least_squares_io good = {.struct_size = (uint32_t)sizeof good, .mode = 0,
                                          .ridge = 0.1, .nonneg = 1, .passes = 2};
    th_row_least_squares_io io = good;
    char err[TH_ERROR_SIZE] = "";
    th_instance *fresh = NULL;
    if (create_instance(c->plugin, NULL, 0, &fresh, err) != TH_OK) {
        fail(c, name, "create() failed: %s", message_of(err));
        return;
    }
    err[0] = '\0';
    th_status status = th_call_row_least_squares(c->plugin, fresh, &io, err);
    th_call_destroy(c->plugin, fresh);
    judge_call_error(c, name, "row_least_squares", status, err, TH_ERR_BAD_STATE);

    const char *const names[] = {
        "row_least_squares short io",       "row_least_squares mode out of range",
        "row_least_squares negative ridge", "row_least_squares NaN ridge",
        "row_least_squares nonneg 2",       "row_least_squares passes 0 with nonneg 1",
    };
    g_autoptr(GError) error = NULL;
    g_autoptr(test_tensor) tt = make_tensor(3, SKEW_UNIFORM, 60, c->opts->seed + 53, &error);
    begin(c, names[0]);
    if (tt == NULL) {
        fail(c, names[0], "cannot generate the tensor: %s", error->message);
        return;
    }
    if (!load_on(c, c->plugin, c->inst, tt, MIN(4u, c->plugin->info->max_rank), names[0]))
        return;
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        begin(c, names[i]);
        io = good;
        switch (i) {
        case 0:
            io.struct_size = (uint32_t)offsetof(th_row_least_squares_io, factor_norm_squared);
            break;
        case 1: io.mode = 3; break;
        case 2: io.ridge = -0.5; break;
        case 3: io.ridge = NAN; break;
        case 4: io.nonneg = 2; break;
        default: io.passes = 0; break;
        }
        err[0] = '\0';
        judge_call_error(c, names[i], "row_least_squares",
                         th_call_row_least_squares(c->plugin, c->inst, &io, err), err,
                         TH_ERR_INVALID_ARGUMENT);
    }
}

/* Ridge 0 and > 0, nonneg 0 and 1, on tensors whose shaped rows test the
 * singular and empty rules, and on a skewed one with many empty rows
 * (there at ridge > 0 or under nonneg only: its rows of a few nonzeros
 * make systems near their breakdown, which no two precisions need decide
 * alike); then the error rules. The host runs tensor completion only on a
 * backend that also has generalized_mttkrp (its training error): one
 * without it fails, and its row_least_squares is still checked. */
static void check_all_row_least_squares(checker *c)
{
    if (c->plugin->entry.row_least_squares == NULL) {
        skip(c, "row_least_squares", "not implemented (optional, ABI 1.5): tensor completion "
                                     "will not run on it");
        return;
    }
    if (c->plugin->entry.generalized_mttkrp == NULL) {
        begin(c, "row_least_squares");
        fail(c, "row_least_squares", "implements row_least_squares but not generalized_mttkrp: "
             "the host runs tensor completion only on a backend with both (ABI 1.5)");
    }
    const th_plugin_info *info = c->plugin->info;
    const uint64_t s = c->opts->seed;
    const rls_kind kinds[] = {
        {.ridge = 0.0, .nonneg = 0, .passes = 0},
        {.ridge = 0.1, .nonneg = 0, .passes = 0},
        {.ridge = 0.0, .nonneg = 1, .passes = 1},
        {.ridge = 0.1, .nonneg = 1, .passes = 3},
    };
    const uint32_t dims3[3] = {12, 10, 9}, dims4[4] = {6, 7, 5, 8};
    const uint32_t rank3 = MIN(4u, info->max_rank), rank4 = MIN(7u, info->max_rank);
    const row_shape shape3 = {.empty_mode = 1, .empty_row = 3, .thin_mode = 0, .thin_row = 5,
                              .thin_keep = rank3 - 1};
    const row_shape shape4 = {.empty_mode = 3, .empty_row = 2, .thin_mode = 2, .thin_row = 1,
                              .thin_keep = rank4 - 1};
    g_autoptr(test_tensor) t3 = make_completion_tensor(3, dims3, 0.5, &shape3, s * 43 + 1);
    g_autoptr(test_tensor) t4 =
        info->max_modes >= 4 ? make_completion_tensor(4, dims4, 0.4, &shape4, s * 43 + 2) : NULL;
    for (size_t k = 0; k < G_N_ELEMENTS(kinds); k++)
        check_rls_case(c, t3, "modes=3 shape=thin-and-empty-rows", rank3, &kinds[k], &shape3,
                       s * 43 + 4 + k);
    for (size_t k = 0; t4 != NULL && k < G_N_ELEMENTS(kinds); k++)
        check_rls_case(c, t4, "modes=4 shape=thin-and-empty-rows", rank4, &kinds[k], &shape4,
                       s * 43 + 8 + k);
    g_autoptr(GError) error = NULL;
    g_autoptr(test_tensor) skewed = make_tensor(3, SKEW_ZIPF, 300, s * 43 + 3, &error);
    if (skewed == NULL) {
        begin(c, "row_least_squares modes=3 skew=zipf");
        fail(c, "row_least_squares modes=3 skew=zipf", "cannot generate the tensor: %s",
             error->message);
    }
    for (size_t k = 1; skewed != NULL && k < G_N_ELEMENTS(kinds); k++)
        check_rls_case(c, skewed, "modes=3 skew=zipf", MIN(3u, info->max_rank), &kinds[k], NULL,
                       s * 43 + 12 + k);
    check_rls_errors(c);
}

/* ------------------------------------------------------------------------ */
/* als_update_nonneg (ABI 1.5)                                               */
/* ------------------------------------------------------------------------ */

/* One als_update_nonneg call's inputs. ridge, l1 and unbounded
 * (TH_CONSTRAINT_NONE; else TH_CONSTRAINT_NONNEG) are ABI 1.6's: zero
 * (their defaults) for a plugin of an older minor. */
typedef struct nonneg_kind {
    int32_t norm;
    gboolean scaled;
    uint32_t sweeps;
    double tolerance;
    double ridge, l1;
    gboolean unbounded;
} nonneg_kind;

static gboolean nonneg_kind_is_v1_6(const nonneg_kind *kind)
{
    return kind->ridge != 0.0 || kind->l1 != 0.0 || kind->unbounded;
}

/* plugin.h's step 2 as it reads, a column at a time: column r of every row
 * before column r + 1 (each row's arithmetic is that of a row at a time),
 * with d = V(r,r) + ridge, n = M(i,r) - (A V)(i,r) + V(r,r) A(i,r) and
 * A(i,r) = max(0, n - l1) / d, or sign(n) max(0, |n| - l1) / d unbounded;
 * the passes made. */
static uint32_t naive_hals(const double *m, const double *v, uint32_t rows, uint32_t rank,
                           const nonneg_kind *kind, double *a)
{
    double first = 0.0;
    for (uint32_t pass = 0; pass < kind->sweeps; pass++) {
        double change = 0.0;
        for (uint32_t r = 0; r < rank; r++) {
            const double vrr = v[(size_t)r * rank + r], d = vrr + kind->ridge;
            if (d == 0.0)
                continue;
            for (uint32_t i = 0; i < rows; i++) {
                double *row = a + (size_t)i * rank;
                double av = 0.0;
                for (uint32_t q = 0; q < rank; q++)
                    av += row[q] * v[(size_t)q * rank + r];
                const double n = m[(size_t)i * rank + r] - av + vrr * row[r];
                const double sign = n > 0.0 ? 1.0 : (n < 0.0 ? -1.0 : 0.0);
                const double next = kind->unbounded ? sign * fmax(0.0, fabs(n) - kind->l1) / d
                                                    : fmax(0.0, n - kind->l1) / d;
                change += (next - row[r]) * (next - row[r]);
                row[r] = next;
            }
        }
        if (pass == 0)
            first = change;
        if (change <= kind->tolerance * first)
            return pass + 1;
    }
    return kind->sweeps;
}

/* als_update's step 3 (plugin.h): lambda the column norms (a zero 2-norm
 * divides nothing), A / lambda, its Gram and inner[r] = sum_i M(i,r) A(i,r). */
static void naive_normalise(const double *m, uint32_t rows, uint32_t rank, int32_t norm,
                            double *a, double *lambda, double *gram, double *inner)
{
    for (uint32_t r = 0; r < rank; r++) {
        double size = 0.0;
        for (uint32_t i = 0; i < rows; i++) {
            const double x = a[(size_t)i * rank + r];
            size = norm == TH_NORM_2 ? size + x * x : fmax(size, fabs(x));
        }
        lambda[r] = norm == TH_NORM_2 ? sqrt(size) : fmax(size, 1.0);
        inner[r] = 0.0;
        for (uint32_t i = 0; i < rows; i++) {
            if (lambda[r] > 0.0)
                a[(size_t)i * rank + r] /= lambda[r];
            inner[r] += m[(size_t)i * rank + r] * a[(size_t)i * rank + r];
        }
    }
    for (uint32_t r = 0; r < rank; r++)
        for (uint32_t s = 0; s < rank; s++) {
            double sum = 0.0;
            for (uint32_t i = 0; i < rows; i++)
                sum += a[(size_t)i * rank + r] * a[(size_t)i * rank + s];
            gram[(size_t)r * rank + s] = sum;
        }
}

/* v = the Hadamard product of the Grams of `factors` other than mode's. */
static double *hadamard_of_others(const test_tensor *tt, double *const *factors, uint32_t rank,
                                  uint32_t mode)
{
    const size_t r2 = (size_t)rank * rank;
    double *v = g_new(double, r2), *gram = g_new(double, r2);
    for (size_t k = 0; k < r2; k++)
        v[k] = 1.0;
    for (uint32_t m = 0; m < tt->coo.nmodes; m++) {
        if (m == mode)
            continue;
        th_dense_gram(factors[m], tt->coo.dims[m], rank, gram);
        for (size_t k = 0; k < r2; k++)
            v[k] *= gram[k];
    }
    g_free(gram);
    return v;
}

/* The plugin's outputs and the oracle's, of one mode. */
typedef struct nonneg_outputs {
    double *factor, *lambda, *gram, *inner;
    uint32_t passes;
} nonneg_outputs;

/* One als_update_nonneg on the plugin, through a newer host's longer
 * struct whose tail must stay as it was; FALSE after a FAIL, or with
 * *refused set when a plugin of 1.6 or later answered TH_ERR_UNSUPPORTED
 * to the 1.6 fields (allowed; the message in `why`). */
static gboolean run_nonneg_update(checker *c, uint32_t mode, const double *v,
                                  const double *scale, const nonneg_kind *kind,
                                  nonneg_outputs *got, gboolean *refused, char *why,
                                  const char *name)
{
    struct {
        th_nonneg_update_io io;
        double tail[2];
    } longer;
    memset(&longer, 0, sizeof longer);
    longer.io = (th_nonneg_update_io){.struct_size = (uint32_t)sizeof longer, .mode = mode,
                                      .v = v, .scale = scale, .tolerance = kind->tolerance,
                                      .sweeps = kind->sweeps, .norm = kind->norm,
                                      .ridge = kind->ridge, .l1 = kind->l1,
                                      .unbounded = kind->unbounded ? 1u : 0u};
    longer.tail[0] = longer.tail[1] = -1.0;
    th_als_output out = {.struct_size = (uint32_t)sizeof out, .lambda = got->lambda,
                         .gram = got->gram, .inner = got->inner};
    char err[TH_ERROR_SIZE] = "";
    th_status status = th_call_als_update_nonneg(c->plugin, c->inst, &longer.io, &out, err);
    if (status == TH_ERR_UNSUPPORTED && nonneg_kind_is_v1_6(kind)) {
        *refused = TRUE;
        g_strlcpy(why, message_of(err), TH_ERROR_SIZE);
        return FALSE;
    }
    if (status == TH_OK)
        status = th_call_get_factor(c->plugin, c->inst, mode, got->factor, err);
    if (status != TH_OK) {
        fail(c, name, "als_update_nonneg(mode %u): %s (%s)", mode, message_of(err),
             th_status_name(status));
        return FALSE;
    }
    if (longer.io.struct_size != sizeof longer || longer.tail[0] != -1.0 ||
        longer.tail[1] != -1.0) {
        fail(c, name, "als_update_nonneg wrote struct_size or beyond its own struct");
        return FALSE;
    }
    got->passes = longer.io.passes;
    return TRUE;
}

/* The oracle's update of mode from the factor the plugin holds (`held`,
 * times scale) and the MTTKRP result it computed (`m`). */
static void naive_nonneg_update(const double *m, const double *v, const double *held,
                                const double *scale, uint32_t rows, uint32_t rank,
                                const nonneg_kind *kind, nonneg_outputs *want)
{
    for (size_t k = 0; k < (size_t)rows * rank; k++)
        want->factor[k] = held[k] * (scale ? scale[k % rank] : 1.0);
    want->passes = naive_hals(m, v, rows, rank, kind, want->factor);
    naive_normalise(m, rows, rank, kind->norm, want->factor, want->lambda, want->gram,
                    want->inner);
}

/* got against want: the passes exactly, every entry >= 0 (bounded), each
 * output within the checker's tolerance; FALSE after a FAIL, else *worst
 * grows. */
static gboolean compare_nonneg(checker *c, const nonneg_outputs *got, const nonneg_outputs *want,
                               const nonneg_kind *kind, uint32_t mode, size_t count,
                               uint32_t rank, double *worst, const char *name)
{
    if (got->passes != want->passes) {
        fail(c, name, "mode %u: %u passes, expected %u", mode, got->passes, want->passes);
        return FALSE;
    }
    for (size_t k = 0; !kind->unbounded && k < count; k++)
        if (!(got->factor[k] >= 0.0)) {
            fail(c, name, "mode %u: factor entry (%zu, %zu) is %.17g, not >= 0", mode, k / rank,
                 k % rank, got->factor[k]);
            return FALSE;
        }
    const struct {
        const char *what;
        const double *a, *b;
        size_t count;
    } parts[] = {
        {"lambda", got->lambda, want->lambda, rank},
        {"gram", got->gram, want->gram, (size_t)rank * rank},
        {"inner", got->inner, want->inner, rank},
        {"factor (get_factor)", got->factor, want->factor, count},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(parts); i++) {
        const double error = relative_error(parts[i].a, parts[i].b, parts[i].count);
        if (!(error <= c->tolerance)) {
            fail(c, name, "mode %u: %s: relative error %.3g > tolerance %.0e", mode,
                 parts[i].what, error, c->tolerance);
            return FALSE;
        }
        *worst = MAX(*worst, error);
    }
    return TRUE;
}

static void nonneg_outputs_init(nonneg_outputs *o, size_t count, uint32_t rank)
{
    o->factor = g_new0(double, count);
    o->lambda = g_new0(double, rank);
    o->gram = g_new0(double, (size_t)rank * rank);
    o->inner = g_new0(double, rank);
    o->passes = 0;
}

static void nonneg_outputs_clear(nonneg_outputs *o)
{
    g_free(o->factor);
    g_free(o->lambda);
    g_free(o->gram);
    g_free(o->inner);
}

/* One mode of a case: the MTTKRP, the update, the oracle and the other
 * factors untouched. FALSE after a FAIL, or with *refused set (and mode's
 * factor checked unchanged) after an allowed TH_ERR_UNSUPPORTED. */
static gboolean check_nonneg_mode(checker *c, const test_tensor *tt, uint32_t rank,
                                  uint32_t mode, double *const *held, const double *scale,
                                  const nonneg_kind *kind, double *worst, uint32_t *passes,
                                  gboolean *refused, char *why, const char *name)
{
    const uint32_t rows = tt->coo.dims[mode];
    const size_t count = (size_t)rows * rank;
    g_autofree double *m = g_new(double, count);
    g_autofree double *v = hadamard_of_others(tt, held, rank, mode);
    nonneg_outputs got, want;
    nonneg_outputs_init(&got, count, rank);
    nonneg_outputs_init(&want, count, rank);
    gboolean ok = run_mttkrp(c, c->plugin, c->inst, mode, m, name) &&
                  run_nonneg_update(c, mode, v, scale, kind, &got, refused, why, name);
    if (ok) {
        naive_nonneg_update(m, v, held[mode], scale, rows, rank, kind, &want);
        ok = compare_nonneg(c, &got, &want, kind, mode, count, rank, worst, name);
        *passes = got.passes;
    }
    /* Refused: "before changing anything" (plugin.h). */
    char message[TH_ERROR_SIZE] = "";
    if (*refused && (th_call_get_factor(c->plugin, c->inst, mode, got.factor, message) != TH_OK ||
                     memcmp(got.factor, held[mode], count * sizeof *got.factor) != 0)) {
        fail(c, name, "als_update_nonneg(mode %u) answered TH_ERR_UNSUPPORTED but changed the "
             "factor (a refusal must come before changing anything)", mode);
        *refused = FALSE;
    }
    for (uint32_t other = 0; ok && other < tt->coo.nmodes; other++) {
        char err[TH_ERROR_SIZE] = "";
        const size_t other_count = (size_t)tt->coo.dims[other] * rank;
        g_autofree double *now = g_new(double, other_count);
        if (other != mode && (th_call_get_factor(c->plugin, c->inst, other, now, err) != TH_OK ||
                              memcmp(now, held[other], other_count * sizeof *now) != 0)) {
            fail(c, name, "als_update_nonneg(mode %u) changed the factor of mode %u", mode,
                 other);
            ok = FALSE;
        }
    }
    nonneg_outputs_clear(&got);
    nonneg_outputs_clear(&want);
    return ok;
}

/* Every mode of `tt` from the same factors of both signs (set, then read
 * back as the plugin holds them, so an f32 backend's rounding is in the
 * oracle's input) against the checker's own HALS and normalisation. */
static void check_nonneg_case(checker *c, const test_tensor *tt, const char *label,
                              uint32_t rank, const nonneg_kind *kind, uint64_t seed)
{
    g_autofree char *v1_6 =
        nonneg_kind_is_v1_6(kind)
            ? g_strdup_printf(" ridge=%g l1=%g unbounded=%u", kind->ridge, kind->l1,
                              kind->unbounded ? 1u : 0u)
            : g_strdup("");
    g_autofree char *name = g_strdup_printf(
        "als_update_nonneg %s rank=%u norm=%s scale=%s sweeps=%u tolerance=%g%s", label, rank,
        kind->norm == TH_NORM_2 ? "2" : "max", kind->scaled ? "given" : "NULL", kind->sweeps,
        kind->tolerance, v1_6);
    begin(c, name);
    if (!load_on(c, c->plugin, c->inst, tt, rank, name))
        return;
    const uint32_t nmodes = tt->coo.nmodes;
    double **factors = centred_factors(tt, rank, seed);
    double *held[TH_MAX_MODES] = {NULL};
    for (uint32_t m = 0; m < nmodes; m++)
        held[m] = g_new(double, (size_t)tt->coo.dims[m] * rank);
    th_rng rng;
    th_rng_seed(&rng, seed + 1);
    g_autofree double *scale = kind->scaled ? random_matrix(&rng, rank) : NULL;
    for (uint32_t r = 0; scale && r < rank; r++)
        scale[r] = 0.5 + 1.5 * scale[r]; /* weights in [0.5, 2) */
    double worst = 0.0;
    GString *passes = g_string_new(NULL);
    gboolean ok = TRUE, refused = FALSE;
    char why[TH_ERROR_SIZE] = "";
    for (uint32_t mode = 0; ok && mode < nmodes; mode++) {
        uint32_t made = 0;
        ok = set_all_factors(c, c->plugin, c->inst, factors, nmodes, name) &&
             get_factors_into(c, c->plugin, c->inst, held, nmodes, name) &&
             check_nonneg_mode(c, tt, rank, mode, held, scale, kind, &worst, &made, &refused,
                               why, name);
        g_string_append_printf(passes, "%s%u", mode ? ", " : "", made);
    }
    if (refused)
        skip(c, name, "TH_ERR_UNSUPPORTED (allowed from ABI 1.6: the host then updates the "
             "mode itself): %s", why);
    else if (ok)
        pass(c, name, "max relative error %.2g; passes by mode %s", worst, passes->str);
    g_string_free(passes, TRUE);
    for (uint32_t m = 0; m < nmodes; m++)
        g_free(held[m]);
    free_factors(factors, nmodes);
}

/* plugin.h's error rules: before load_tensor and before the mode's first
 * MTTKRP (TH_ERR_BAD_STATE), then one bad argument at a time. */
static void check_nonneg_errors(checker *c)
{
    const uint32_t rank = MIN(4u, c->plugin->info->max_rank);
    double v[16] = {0}, lambda[4] = {0}, gram[16] = {0}, inner[4] = {0};
    for (uint32_t r = 0; r < rank; r++)
        v[r * rank + r] = 1.0;
    th_als_output out = {.struct_size = (uint32_t)sizeof out, .lambda = lambda, .gram = gram,
                         .inner = inner};
    const th_nonneg_update_io good = {.struct_size = (uint32_t)sizeof good, .mode = 0, .v = v,
                                      .tolerance = 1e-8, .sweeps = 2, .norm = TH_NORM_2};
    th_nonneg_update_io io = good;
    char err[TH_ERROR_SIZE] = "";
    const char *name = "als_update_nonneg before load_tensor";
    begin(c, name);
    th_instance *fresh = NULL;
    if (create_instance(c->plugin, NULL, 0, &fresh, err) != TH_OK) {
        fail(c, name, "create() failed: %s", message_of(err));
        return;
    }
    err[0] = '\0';
    th_status status = th_call_als_update_nonneg(c->plugin, fresh, &io, &out, err);
    th_call_destroy(c->plugin, fresh);
    judge_call_error(c, name, "als_update_nonneg", status, err, TH_ERR_BAD_STATE);

    name = "als_update_nonneg before mttkrp";
    begin(c, name);
    g_autoptr(GError) error = NULL;
    g_autoptr(test_tensor) tt = make_tensor(3, SKEW_UNIFORM, 60, c->opts->seed + 59, &error);
    if (tt == NULL) {
        fail(c, name, "cannot generate the tensor: %s", error->message);
        return;
    }
    if (!load_on(c, c->plugin, c->inst, tt, rank, name))
        return;
    err[0] = '\0';
    judge_call_error(c, name, "als_update_nonneg",
                     th_call_als_update_nonneg(c->plugin, c->inst, &io, &out, err), err,
                     TH_ERR_BAD_STATE);

    const char *const names[] = {
        "als_update_nonneg short io",           "als_update_nonneg mode out of range",
        "als_update_nonneg NULL v",             "als_update_nonneg NULL out",
        "als_update_nonneg sweeps 0",           "als_update_nonneg negative tolerance",
        "als_update_nonneg NaN tolerance",      "als_update_nonneg infinite tolerance",
        "als_update_nonneg norm 7",
    };
    begin(c, names[0]);
    if (th_call_mttkrp(c->plugin, c->inst, 0, err) != TH_OK) {
        fail(c, names[0], "mttkrp(0): %s", message_of(err));
        return;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        begin(c, names[i]);
        io = good;
        switch (i) {
        case 0: io.struct_size = (uint32_t)offsetof(th_nonneg_update_io, passes); break;
        case 1: io.mode = 3; break;
        case 2: io.v = NULL; break;
        case 3: break;
        case 4: io.sweeps = 0; break;
        case 5: io.tolerance = -1e-3; break;
        case 6: io.tolerance = NAN; break;
        case 7: io.tolerance = INFINITY; break;
        default: io.norm = 7; break;
        }
        err[0] = '\0';
        judge_call_error(c, names[i], "als_update_nonneg",
                         th_call_als_update_nonneg(c->plugin, c->inst, &io, i == 3 ? NULL : &out,
                                                   err),
                         err, TH_ERR_INVALID_ARGUMENT);
    }
    if (c->plugin->entry.abi_version.minor < 6)
        return; /* the fields below are never set for it (check_all_nonneg_update) */
    const char *const v1_6_names[] = {
        "als_update_nonneg negative ridge", "als_update_nonneg infinite ridge",
        "als_update_nonneg NaN l1",         "als_update_nonneg negative l1",
        "als_update_nonneg unbounded 2",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(v1_6_names); i++) {
        begin(c, v1_6_names[i]);
        io = good;
        switch (i) {
        case 0: io.ridge = -0.5; break;
        case 1: io.ridge = INFINITY; break;
        case 2: io.l1 = NAN; break;
        case 3: io.l1 = -1e-3; break;
        default: io.unbounded = 2; break;
        }
        err[0] = '\0';
        judge_call_error(c, v1_6_names[i], "als_update_nonneg",
                         th_call_als_update_nonneg(c->plugin, c->inst, &io, &out, err), err,
                         TH_ERR_INVALID_ARGUMENT);
    }
}

/* Both norms, scale NULL and given, one pass and five, tolerance 0 and
 * 1e-8 (TensorLy's), on a 3-mode tensor; a skewed 4-mode one (empty rows)
 * on two of them; then the error rules. */
static void check_all_nonneg_update(checker *c)
{
    if (c->plugin->entry.als_update_nonneg == NULL) {
        skip(c, "als_update_nonneg", "not implemented (optional, ABI 1.5): nonnegative CP "
                                     "updates its factors on the host");
        return;
    }
    const th_plugin_info *info = c->plugin->info;
    const uint64_t s = c->opts->seed;
    g_autoptr(GError) error = NULL;
    g_autoptr(test_tensor) t3 = make_tensor(3, SKEW_UNIFORM, 500, s * 47 + 1, &error);
    g_autoptr(test_tensor) t4 =
        t3 && info->max_modes >= 4 ? make_tensor(4, SKEW_ZIPF, 500, s * 47 + 2, &error) : NULL;
    if (t3 == NULL || (info->max_modes >= 4 && t4 == NULL)) {
        begin(c, "als_update_nonneg");
        fail(c, "als_update_nonneg", "cannot generate the tensor: %s", error->message);
        return;
    }
    uint64_t seed = s * 47 + 3;
    for (int norm = TH_NORM_2; norm <= TH_NORM_MAX; norm++)
        for (int scaled = 0; scaled < 2; scaled++)
            for (uint32_t sweeps = 1; sweeps <= 5; sweeps += 4)
                for (int stop = 0; stop < 2; stop++) {
                    const nonneg_kind kind = {.norm = norm, .scaled = scaled, .sweeps = sweeps,
                                              .tolerance = stop ? TH_HALS_TOLERANCE : 0.0};
                    check_nonneg_case(c, t3, "modes=3", MIN(6u, info->max_rank), &kind, ++seed);
                }
    const nonneg_kind skewed[] = {
        {.norm = TH_NORM_2, .scaled = FALSE, .sweeps = 5, .tolerance = TH_HALS_TOLERANCE},
        {.norm = TH_NORM_MAX, .scaled = TRUE, .sweeps = 5, .tolerance = 0.0},
    };
    for (size_t k = 0; t4 != NULL && k < G_N_ELEMENTS(skewed); k++)
        check_nonneg_case(c, t4, "modes=4 skew=zipf", MIN(3u, info->max_rank), &skewed[k],
                          ++seed);
    /* ABI 1.6: ridge, l1, and coordinate descent without the bound; a host
     * sets them only for a plugin of 1.6 or later, and so does the checker. */
    const uint16_t minor = c->plugin->entry.abi_version.minor;
    if (minor < 6) {
        skip(c, "als_update_nonneg ridge, l1 and unbounded",
             "the plugin's entry says ABI 1.%u: these fields of ABI 1.6 are never set for it",
             (unsigned)minor);
    } else {
        const nonneg_kind regularised[] = {
            {.norm = TH_NORM_2, .sweeps = 3, .ridge = 0.5, .unbounded = TRUE},
            {.norm = TH_NORM_MAX, .scaled = TRUE, .sweeps = 5, .tolerance = TH_HALS_TOLERANCE,
             .l1 = 0.05, .unbounded = TRUE},
            {.norm = TH_NORM_2, .scaled = TRUE, .sweeps = 5, .ridge = 0.25, .l1 = 0.05},
        };
        for (size_t k = 0; k < G_N_ELEMENTS(regularised); k++)
            check_nonneg_case(c, t3, "modes=3", MIN(6u, info->max_rank), &regularised[k],
                              ++seed);
        if (t4 != NULL) {
            const nonneg_kind both = {.norm = TH_NORM_2, .scaled = TRUE, .sweeps = 5,
                                      .tolerance = TH_HALS_TOLERANCE, .ridge = 0.1, .l1 = 0.02,
                                      .unbounded = TRUE};
            check_nonneg_case(c, t4, "modes=4 skew=zipf", MIN(3u, info->max_rank), &both,
                              ++seed);
        }
    }
    check_nonneg_errors(c);
}

/* ------------------------------------------------------------------------ */
/* als_sweep with ABI 1.6's fields                                           */
/* ------------------------------------------------------------------------ */

/* One sweep's 1.6 fields: NULL arrays and ridge 0 are the defaults. */
typedef struct sweep_v16_case {
    uint32_t nmodes, rank;
    int32_t norm;
    double ridge;
    const int32_t *constraints; /* [nmodes] or NULL */
    const double *l1;           /* [nmodes] or NULL */
    gboolean scaled;            /* io->scale given (else NULL) */
    uint32_t hals_sweeps;
    double hals_tolerance;
    const uint32_t *mode_sweeps; /* [nmodes] hals_mode_sweeps (ABI 1.9), or NULL */
} sweep_v16_case;

/* The passes of mode n in a case: hals_mode_sweeps' where given. */
static uint32_t case_sweeps(const sweep_v16_case *k, uint32_t n)
{
    return k->mode_sweeps ? k->mode_sweeps[n] : k->hals_sweeps;
}

/* plugin.h (als_sweep): every mode but one with TH_CONSTRAINT_NONE and l1 0
 * is updated by als_update_nonneg's step. */
static gboolean sweep_by_descent(const sweep_v16_case *k, uint32_t mode)
{
    return (k->constraints && k->constraints[mode] != TH_CONSTRAINT_NONE) ||
           (k->l1 && k->l1[mode] != 0.0);
}

/* "als_sweep modes=3 rank=4 norm=2", then the 1.6 fields the case sets. */
static char *sweep_v16_name(const sweep_v16_case *k)
{
    GString *name = g_string_new(NULL);
    g_string_printf(name, "als_sweep modes=%u rank=%u norm=%s", k->nmodes, k->rank,
                    k->norm == TH_NORM_2 ? "2" : "max");
    if (k->ridge != 0.0)
        g_string_append_printf(name, " ridge=%g", k->ridge);
    gboolean descent = FALSE;
    for (uint32_t m = 0; m < k->nmodes; m++)
        descent |= sweep_by_descent(k, m);
    for (uint32_t m = 0; k->constraints && m < k->nmodes; m++)
        g_string_append_printf(name, "%s%s", m ? "," : " constraints=",
                               k->constraints[m] == TH_CONSTRAINT_NONE ? "none" : "nonneg");
    for (uint32_t m = 0; k->l1 && m < k->nmodes; m++)
        g_string_append_printf(name, "%s%g", m ? "," : " l1=", k->l1[m]);
    if (k->scaled)
        g_string_append(name, " scale=given");
    if (descent && !k->mode_sweeps)
        g_string_append_printf(name, " hals_sweeps=%u", k->hals_sweeps);
    for (uint32_t m = 0; k->mode_sweeps && m < k->nmodes; m++)
        g_string_append_printf(name, "%s%u", m ? "," : " hals_mode_sweeps=", k->mode_sweeps[m]);
    if (descent)
        g_string_append_printf(name, " hals_tolerance=%g", k->hals_tolerance);
    return g_string_free(name, FALSE);
}

/* The checker's own sweep (plugin.h, als_sweep() from 1.6) on `st`, which
 * holds the factors as the plugin holds them and their Grams: per mode n,
 * the naive MTTKRP M of the factors as they are, V the Hadamard product of
 * the other Grams, then A_n = M (V + ridge I)^-1 (a mode with
 * TH_CONSTRAINT_NONE and l1 0) or naive_hals from A_n times the weights
 * before it (io->scale for mode 0, else the lambda of mode n-1), and
 * naive_normalise into st's factor, lambda, Gram and inner. FALSE when a
 * solve breaks down (plugin.h's test on V + ridge I). */
static gboolean naive_sweep_v16(const test_tensor *tt, const sweep_v16_case *k,
                                const double *scale, iteration_state *st)
{
    const uint32_t rank = k->rank;
    const size_t r2 = (size_t)rank * rank;
    size_t largest = 0;
    for (uint32_t m = 0; m < k->nmodes; m++)
        largest = MAX(largest, (size_t)tt->coo.dims[m] * rank);
    g_autofree double *mttkrp = g_new(double, largest);
    g_autofree double *v = g_new(double, r2);
    g_autofree double *l = g_new(double, r2);
    g_autofree double *weights = g_new(double, rank);
    for (uint32_t n = 0; n < k->nmodes; n++) {
        const uint32_t rows = tt->coo.dims[n];
        double *a = st->factors[n];
        naive_mttkrp(tt->t, st->factors, rank, n, mttkrp);
        for (size_t e = 0; e < r2; e++) {
            v[e] = 1.0;
            for (uint32_t m = 0; m < k->nmodes; m++)
                if (m != n)
                    v[e] *= st->grams[m][e];
        }
        const double *before = n == 0 ? scale : weights;
        if (n > 0)
            memcpy(weights, st->lambda, rank * sizeof *weights);
        if (sweep_by_descent(k, n)) {
            for (size_t e = 0; before && e < (size_t)rows * rank; e++)
                a[e] *= before[e % rank];
            const nonneg_kind kind = {
                .sweeps = case_sweeps(k, n), .tolerance = k->hals_tolerance, .ridge = k->ridge,
                .l1 = k->l1 ? k->l1[n] : 0.0,
                .unbounded = !k->constraints || k->constraints[n] == TH_CONSTRAINT_NONE};
            naive_hals(mttkrp, v, rows, rank, &kind, a);
        } else {
            for (uint32_t r = 0; r < rank; r++)
                v[(size_t)r * rank + r] += k->ridge;
            if (!naive_cholesky(v, rank, l))
                return FALSE;
            for (uint32_t i = 0; i < rows; i++)
                naive_cholesky_solve(l, mttkrp + (size_t)i * rank, rank, a + (size_t)i * rank);
        }
        naive_normalise(mttkrp, rows, rank, k->norm, a, st->lambda, st->grams[n], st->inner);
    }
    return TRUE;
}

/* One sweep with the case's fields on the plugin, from factors of both
 * signs as the plugin holds them, against naive_sweep_v16. A plugin may
 * refuse with TH_ERR_UNSUPPORTED (a SKIP), but only before changing
 * anything. */
static void check_sweep_v16_case(checker *c, const sweep_v16_case *k, uint64_t seed)
{
    g_autofree char *name = sweep_v16_name(k);
    begin(c, name);
    g_autoptr(GError) error = NULL;
    g_autoptr(test_tensor) tt = make_tensor(k->nmodes, SKEW_UNIFORM, 400, seed, &error);
    if (tt == NULL) {
        fail(c, name, "cannot generate the tensor: %s", error->message);
        return;
    }
    const uint32_t nmodes = k->nmodes, rank = k->rank;
    double **initial = centred_factors(tt, rank, seed + 1);
    iteration_state want, got;
    iteration_state_init(&want, tt, rank, initial);
    iteration_state_init(&got, tt, rank, initial);
    th_rng rng;
    th_rng_seed(&rng, seed + 2);
    g_autofree double *scale = k->scaled ? random_matrix(&rng, rank) : NULL;
    for (uint32_t r = 0; scale && r < rank; r++)
        scale[r] = 0.5 + 1.5 * scale[r]; /* weights in [0.5, 2) */
    if (!load_on(c, c->plugin, c->inst, tt, rank, name) ||
        !set_all_factors(c, c->plugin, c->inst, initial, nmodes, name) ||
        !get_factors_into(c, c->plugin, c->inst, want.factors, nmodes, name))
        goto done;
    for (uint32_t m = 0; m < nmodes; m++) { /* the Grams of what the plugin holds */
        th_dense_gram(want.factors[m], tt->coo.dims[m], rank, want.grams[m]);
        memcpy(got.grams[m], want.grams[m], sizeof(double) * rank * rank);
    }
    th_als_sweep_io io = sweep_io(&got, k->norm);
    io.constraints = k->constraints;
    io.l1 = k->l1;
    io.ridge = k->ridge;
    io.scale = scale;
    io.hals_sweeps = k->hals_sweeps;
    io.hals_tolerance = k->hals_tolerance;
    io.hals_mode_sweeps = k->mode_sweeps;
    char err[TH_ERROR_SIZE] = "";
    th_status status = th_call_als_sweep(c->plugin, c->inst, &io, err);
    if (status == TH_ERR_UNSUPPORTED) {
        g_autofree char *why = g_strdup(message_of(err));
        if (!get_all_factors(c, c->plugin, c->inst, &got, name))
            goto done;
        for (uint32_t m = 0; m < nmodes; m++)
            if (memcmp(got.factors[m], want.factors[m],
                       sizeof(double) * tt->coo.dims[m] * rank) != 0) {
                fail(c, name, "als_sweep answered TH_ERR_UNSUPPORTED but changed the factor of "
                     "mode %u (a refusal must come before changing anything)", m);
                goto done;
            }
        skip(c, name, "TH_ERR_UNSUPPORTED (allowed from ABI 1.6: the host then runs the "
             "iteration per mode): %s", why);
        goto done;
    }
    if (!swept_every_mode(c, name, status, err, &io, nmodes))
        goto done;
    if (!naive_sweep_v16(tt, k, scale, &want)) {
        skip(c, name, "the checker's own solve broke down on this case");
        goto done;
    }
    double worst = 0.0;
    if (get_all_factors(c, c->plugin, c->inst, &got, name) &&
        compare_iterations(c, &got, &want, tt, &worst, name))
        pass(c, name, "vs the checker's own sweep, max relative error %.2g", worst);
done:
    iteration_state_clear(&want);
    iteration_state_clear(&got);
    free_factors(initial, nmodes);
}

/* Bad 1.6 values, one at a time, on a loaded 3-mode instance:
 * TH_ERR_INVALID_ARGUMENT (plugin.h, als_sweep). */
static void check_sweep_v16_errors(checker *c)
{
    const uint32_t rank = MIN(4u, c->plugin->info->max_rank);
    const char *const names[] = {
        "als_sweep constraint 2", "als_sweep negative ridge", "als_sweep NaN l1",
        "als_sweep hals_sweeps 0 with a nonnegative mode",
        "als_sweep hals_mode_sweeps entry 0 for a nonnegative mode",
    };
    /* The last, a 1.9 field, only for a plugin of 1.9. */
    const size_t count = c->plugin->entry.abi_version.minor >= 9 ? G_N_ELEMENTS(names)
                                                                  : G_N_ELEMENTS(names) - 1;
    const uint32_t zero_sweeps[3] = {2, 0, 2};
    g_autoptr(GError) error = NULL;
    g_autoptr(test_tensor) tt = make_tensor(3, SKEW_UNIFORM, 60, c->opts->seed + 61, &error);
    begin(c, names[0]);
    if (tt == NULL) {
        fail(c, names[0], "cannot generate the tensor: %s", error->message);
        return;
    }
    if (!load_on(c, c->plugin, c->inst, tt, rank, names[0]))
        return;
    double **initial = centred_factors(tt, rank, c->opts->seed + 62);
    iteration_state st;
    iteration_state_init(&st, tt, rank, initial);
    const int32_t bad_constraint[3] = {TH_CONSTRAINT_NONE, 2, TH_CONSTRAINT_NONE};
    const int32_t nonneg[3] = {TH_CONSTRAINT_NONNEG, TH_CONSTRAINT_NONNEG, TH_CONSTRAINT_NONNEG};
    const double bad_l1[3] = {0.0, NAN, 0.0};
    for (size_t i = 0; i < count; i++) {
        begin(c, names[i]);
        if (!set_all_factors(c, c->plugin, c->inst, initial, 3, names[i]))
            break;
        th_als_sweep_io io = sweep_io(&st, TH_NORM_2);
        switch (i) {
        case 0: io.constraints = bad_constraint; break;
        case 1: io.ridge = -0.5; break;
        case 2: io.l1 = bad_l1; break;
        case 3: io.constraints = nonneg, io.hals_sweeps = 0; break;
        default: io.constraints = nonneg, io.hals_sweeps = 2, io.hals_mode_sweeps = zero_sweeps;
        }
        char err[TH_ERROR_SIZE] = "";
        judge_call_error(c, names[i], "als_sweep",
                         th_call_als_sweep(c->plugin, c->inst, &io, err), err,
                         TH_ERR_INVALID_ARGUMENT);
    }
    iteration_state_clear(&st);
    free_factors(initial, 3);
}

/* (a) ridge alone, every mode unconstrained (the Cholesky of V + ridge I);
 * (b) every mode nonnegative; (c) mixed, with l1 on an unconstrained mode
 * and io->scale given; on 4 modes, a descent mode after a Cholesky one.
 * Only for a plugin of 1.6 or later: a host sets these fields for no
 * other, and neither does the checker. */
static void check_all_sweep_v16(checker *c)
{
    if (c->plugin->entry.als_sweep == NULL)
        return; /* check_all_sweep said so */
    const uint16_t minor = c->plugin->entry.abi_version.minor;
    if (minor < 6) {
        skip(c, "als_sweep constraints, l1, ridge and scale",
             "the plugin's entry says ABI 1.%u: these fields of ABI 1.6 are never set for it",
             (unsigned)minor);
        return;
    }
    const th_plugin_info *info = c->plugin->info;
    const uint64_t s = c->opts->seed * 53;
    const int32_t none = TH_CONSTRAINT_NONE, nonneg = TH_CONSTRAINT_NONNEG;
    const int32_t all_nonneg[3] = {nonneg, nonneg, nonneg};
    const int32_t mixed[3] = {none, nonneg, none};
    const double mixed_l1[3] = {0.05, 0.02, 0.0};
    const sweep_v16_case cases[] = {
        {.nmodes = 3, .rank = MIN(4u, info->max_rank), .norm = TH_NORM_2, .ridge = 0.5},
        {.nmodes = 3, .rank = MIN(4u, info->max_rank), .norm = TH_NORM_MAX,
         .constraints = all_nonneg, .hals_sweeps = 3},
        {.nmodes = 3, .rank = MIN(5u, info->max_rank), .norm = TH_NORM_2, .ridge = 0.25,
         .constraints = mixed, .l1 = mixed_l1, .scaled = TRUE, .hals_sweeps = 5,
         .hals_tolerance = TH_HALS_TOLERANCE},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++)
        check_sweep_v16_case(c, &cases[i], s + i + 1);
    if (info->max_modes >= 4) {
        const int32_t after[4] = {nonneg, none, none, nonneg};
        const double after_l1[4] = {0.0, 0.05, 0.0, 0.02};
        const sweep_v16_case four = {.nmodes = 4, .rank = MIN(3u, info->max_rank),
                                     .norm = TH_NORM_2, .ridge = 0.1, .constraints = after,
                                     .l1 = after_l1, .scaled = TRUE, .hals_sweeps = 1};
        check_sweep_v16_case(c, &four, s + 9);
    }
    /* ABI 1.9: each mode its own passes (the tolerance 0, so that every
     * pass is made and a plugin that took one count for all would differ). */
    if (minor >= 9) {
        const uint32_t mode_sweeps[3] = {1, 4, 2};
        const sweep_v16_case per_mode = {.nmodes = 3, .rank = MIN(4u, info->max_rank),
                                         .norm = TH_NORM_2, .constraints = all_nonneg,
                                         .scaled = TRUE, .hals_sweeps = 4,
                                         .mode_sweeps = mode_sweeps};
        check_sweep_v16_case(c, &per_mode, s + 11);
    } else {
        skip(c, "als_sweep hals_mode_sweeps",
             "the plugin's entry says ABI 1.%u: this field of ABI 1.9 is never set for it",
             (unsigned)minor);
    }
    check_sweep_v16_errors(c);
}

/* ------------------------------------------------------------------------ */
/* Optional queries and life cycles                                          */
/* ------------------------------------------------------------------------ */

static void check_optional_info(checker *c, uint32_t nmodes)
{
    begin(c, "runtime info");
    g_autoptr(GError) error = NULL;
    th_runtime_info runtime;
    if (c->plugin->entry.get_runtime_info == NULL)
        skip(c, "runtime info", "get_runtime_info not implemented (optional)");
    else if (!th_instance_runtime_info(c->plugin, c->inst, &runtime, &error))
        fail(c, "runtime info", "%s", error->message);
    else if (runtime.process_sums != 0)
        fail(c, "runtime info",
             "process_sums is %u in a run of one process: a backend sums its MTTKRPs over "
             "the processes only in a run of several (ABI 1.8)",
             runtime.process_sums);
    else
        pass(c, "runtime info", "device '%s'", runtime.device);

    begin(c, "mode info");
    if (c->plugin->entry.get_mode_info == NULL) {
        skip(c, "mode info", "get_mode_info not implemented (optional)");
        return;
    }
    for (uint32_t m = 0; m < nmodes; m++) {
        th_mode_info info;
        if (!th_instance_mode_info(c->plugin, c->inst, m, &info, &error)) {
            fail(c, "mode info", "%s", error->message);
            return;
        }
    }
    pass(c, "mode info", "%u modes", nmodes);
}

/* load_tensor() again and again on one instance, alternating shapes and
 * ranks; the last tensor must then compute right. */
static void check_repeated_load(checker *c)
{
    g_autofree char *name = g_strdup_printf("load_tensor x%d", LOAD_TENSOR_CYCLES);
    begin(c, name);
    const uint32_t top = MIN(c->plugin->info->max_modes, 4u);
    const struct {
        uint32_t nmodes, rank;
        skew_kind skew;
    } shapes[] = {{3, 5, SKEW_UNIFORM}, {top, 3, SKEW_ZIPF}, {3, 8, SKEW_DEGENERATE}};
    test_tensor *tensors[G_N_ELEMENTS(shapes)] = {NULL};
    uint32_t ranks[G_N_ELEMENTS(shapes)];
    for (size_t i = 0; i < G_N_ELEMENTS(shapes); i++) {
        g_autoptr(GError) error = NULL;
        ranks[i] = MIN(shapes[i].rank, c->plugin->info->max_rank);
        tensors[i] = make_tensor(shapes[i].nmodes, shapes[i].skew, 300, c->opts->seed + 17 + i,
                                 &error);
        if (tensors[i] == NULL) {
            fail(c, name, "cannot generate the tensor: %s", error->message);
            goto done;
        }
    }
    size_t last = 0;
    for (int cycle = 0; cycle < LOAD_TENSOR_CYCLES; cycle++) {
        last = (size_t)cycle % G_N_ELEMENTS(shapes);
        if (!load_on(c, c->plugin, c->inst, tensors[last], ranks[last], name))
            goto done;
    }
    if (c->reference == NULL || c->ref_inst == NULL) {
        pass(c, name, "results not compared: no reference");
        goto done;
    }
    if (!load_on(c, c->reference, c->ref_inst, tensors[last], ranks[last], name))
        goto done;
    double **factors = set_factors(c, tensors[last], ranks[last], c->opts->seed + 99, name);
    if (factors == NULL)
        goto done;
    double worst = compare_all_modes(c, tensors[last], ranks[last], factors, name);
    free_factors(factors, tensors[last]->coo.nmodes);
    if (worst >= 0.0) {
        pass(c, name, "then max relative error %.2g", worst);
        check_optional_info(c, tensors[last]->coo.nmodes);
    }
done:
    for (size_t i = 0; i < G_N_ELEMENTS(shapes); i++)
        test_tensor_free(tensors[i]);
}

static void check_create_destroy(checker *c)
{
    g_autofree char *name = g_strdup_printf("create/destroy x%d", CREATE_DESTROY_CYCLES);
    begin(c, name);
    for (int cycle = 0; cycle < CREATE_DESTROY_CYCLES; cycle++) {
        char err[TH_ERROR_SIZE];
        th_instance *inst = NULL;
        th_status status = create_instance(c->plugin, NULL, 0, &inst, err);
        if (status != TH_OK || inst == NULL) {
            fail(c, name, "cycle %d: create() %s: %s", cycle + 1,
                 status == TH_OK ? "gave no instance" : th_status_name(status), message_of(err));
            return;
        }
        th_call_destroy(c->plugin, inst);
    }
    begin(c, "destroy(NULL)");
    th_call_destroy(c->plugin, NULL);
    pass(c, name, "and destroy(NULL)");
}

/* The whole object: dlopen, init, an instance with a tensor and one MTTKRP,
 * destroy, deinit, dlclose, again and again. Run after the checker let go
 * of the plugin, so dlclose() really unloads it (unless it asks to stay). */
static void check_load_unload(checker *c, const char *path)
{
    g_autofree char *name = g_strdup_printf("load/unload x%d", LOAD_UNLOAD_CYCLES);
    begin(c, name);
    g_autoptr(GError) error = NULL;
    g_autoptr(test_tensor) tt = make_tensor(3, SKEW_UNIFORM, 100, c->opts->seed + 5, &error);
    if (tt == NULL) {
        fail(c, name, "cannot generate the tensor: %s", error->message);
        return;
    }
    for (int cycle = 0; cycle < LOAD_UNLOAD_CYCLES; cycle++) {
        th_plugin *plugin = th_plugin_load(path, &c->services, &error);
        if (plugin == NULL) {
            fail(c, name, "cycle %d: %s", cycle + 1, error->message);
            return;
        }
        char err[TH_ERROR_SIZE] = "";
        th_instance *inst = NULL;
        th_status status = create_instance(plugin, NULL, 0, &inst, err);
        if (status == TH_OK)
            status = th_call_load_tensor(plugin, inst, &tt->coo, 1, err);
        if (status == TH_OK)
            status = th_call_mttkrp(plugin, inst, 0, err);
        if (inst != NULL)
            th_call_destroy(plugin, inst);
        th_plugin_unload(plugin);
        if (status != TH_OK) {
            fail(c, name, "cycle %d: %s (%s)", cycle + 1, message_of(err),
                 th_status_name(status));
            return;
        }
    }
    pass(c, name, NULL);
}

/* ------------------------------------------------------------------------ */
/* The run                                                                   */
/* ------------------------------------------------------------------------ */

/* Everything that needs an instance: all of it is skipped without a device. */
static const char *const device_checks[] = {
    "reference",        "unknown option",  "mttkrp before load_tensor",
    "rank 0",           "rank max_rank+1", "mode out of range",
    "tensor it cannot hold", "mttkrp",     "als_update",
    "als_sweep",        "init_factors",     "generalized_mttkrp",
    "row_least_squares", "als_update_nonneg", "load_tensor x20", "create/destroy x50",
    "load/unload x20",
};

static void check_with_instances(checker *c)
{
    begin(c, "create");
    char err[TH_ERROR_SIZE];
    th_status status = create_instance(c->plugin, NULL, 0, &c->inst, err);
    if (status == TH_ERR_NO_DEVICE) {
        c->counts.no_device = TRUE;
        skip(c, "create", "no device: %s", message_of(err));
        for (size_t i = 0; i < G_N_ELEMENTS(device_checks); i++)
            skip(c, device_checks[i], "no device");
        return;
    }
    if (status != TH_OK || c->inst == NULL) {
        fail(c, "create", "create() without options %s: %s",
             status == TH_OK ? "gave no instance" : th_status_name(status), message_of(err));
        c->inst = NULL;
        return;
    }
    pass(c, "create", NULL);

    load_reference(c, c->plugin->path);
    check_unknown_option(c);
    check_before_load(c);

    g_autoptr(GError) error = NULL;
    g_autoptr(test_tensor) small = make_tensor(3, SKEW_UNIFORM, 60, c->opts->seed + 3, &error);
    if (small == NULL) {
        fail(c, "rank 0", "cannot generate the tensor: %s", error->message);
        return;
    }
    check_bad_rank(c, small, 0, "rank 0");
    uint32_t max_rank = c->plugin->info->max_rank;
    if (max_rank < UINT32_MAX)
        check_bad_rank(c, small, max_rank + 1, "rank max_rank+1");
    else
        skip(c, "rank max_rank+1", "max_rank is the largest uint32_t");
    check_mode_out_of_range(c, small);
    check_too_many_modes(c);

    if (c->reference != NULL) {
        status = create_instance(c->reference, NULL, 0, &c->ref_inst, err);
        if (status != TH_OK || c->ref_inst == NULL) {
            fail(c, "reference", "create(): %s (%s)", message_of(err), th_status_name(status));
            c->ref_inst = NULL;
        }
    }
    if (c->ref_inst != NULL)
        check_all_mttkrp(c);
    else
        skip(c, "mttkrp", "no reference to compare with");
    check_mode_nonzeros(c);
    check_all_sweep(c);
    check_all_init_factors(c);
    check_all_generalized(c);
    check_all_multiplicative(c);
    check_all_row_least_squares(c);
    check_all_nonneg_update(c);
    check_all_sweep_v16(c);
    check_repeated_load(c);
    check_create_destroy(c);
}

static void release(checker *c)
{
    if (c->inst != NULL)
        th_call_destroy(c->plugin, c->inst);
    if (c->ref_inst != NULL)
        th_call_destroy(c->reference, c->ref_inst);
    if (!c->reference_is_plugin)
        th_plugin_unload(c->reference);
    th_plugin_unload(c->plugin);
    c->inst = c->ref_inst = NULL;
    c->plugin = c->reference = NULL;
}

static void run_checks(checker *c)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) search = th_plugin_search_path(NULL);
    begin(c, "load");
    g_autofree char *path = th_plugin_resolve(c->opts->plugin, search, &error);
    if (path == NULL) {
        fail(c, "load", "%s", error->message);
        return;
    }
    if (!check_raw_entry(c, path))
        return;
    begin(c, "load");
    c->plugin = th_plugin_load(path, &c->services, &error);
    if (c->plugin == NULL) {
        fail(c, "load", "%s", error->message);
        return;
    }
    pass(c, "load", "%s", path);
    check_info(c);
    c->tolerance = c->plugin->info->value_type == TH_VALUE_F32 ? 1e-5 : 1e-10;
    check_with_instances(c);
    gboolean no_device = c->counts.no_device;
    release(c);
    if (!no_device)
        check_load_unload(c, path);
}

int th_check_plugin(const th_check_options *options, th_check_counts *counts)
{
    g_return_val_if_fail(options != NULL && options->plugin != NULL, 1);
    checker c;
    memset(&c, 0, sizeof c);
    c.opts = options;
    c.out = options->out ? options->out : stdout;
    c.services = th_host_services_make();
    run_checks(&c);
    fprintf(c.out, "%u passed, %u failed, %u skipped\n", c.counts.passed, c.counts.failed,
            c.counts.skipped);
    fflush(c.out);
    if (counts != NULL)
        *counts = c.counts;
    if (c.counts.failed > 0)
        return 1;
    return c.counts.no_device ? TH_CHECK_EXIT_NO_DEVICE : 0;
}
