#include "dist/dist.h"

#include <dlfcn.h>
#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/install_dirs.h"
#include "dist/mpi_shim.h"

G_DEFINE_QUARK(th-dist-error-quark, th_dist_error)

struct th_dist {
    void *module;
    const th_mpi_shim *mpi;
    uint32_t rank, size;
    uint32_t local_size; /* the processes on this one's host, itself included */
    char library[256];
    char host[256];
    int threads; /* the OpenMP default share_the_cores set, 0 for none */
    char gpus[128]; /* the CUDA_VISIBLE_DEVICES share_the_gpus set, "" for none */
    th_dist_traffic traffic;
};

/* The largest count one MPI call takes; longer buffers go in pieces. */
#define MAX_PIECE ((uint64_t)1 << 30)

/* Whether the environment variable `variable` holds a number of 32 bits,
 * into *value. */
static gboolean announced_number(const char *variable, uint32_t *value)
{
    const char *text = g_getenv(variable);
    if (text == NULL || *text == '\0')
        return FALSE;
    char *end = NULL;
    const unsigned long long n = strtoull(text, &end, 10);
    if (*end != '\0' || n > UINT32_MAX)
        return FALSE;
    *value = (uint32_t)n;
    return TRUE;
}

/* A count of processes from `variable`: 0 when it holds none above 0. */
static uint32_t announced_by(const char *variable)
{
    uint32_t n = 0;
    return announced_number(variable, &n) ? n : 0;
}

uint32_t th_dist_announced_processes(const char **launcher)
{
    static const struct {
        const char *variable, *name;
    } launches[] = {
        {"OMPI_COMM_WORLD_SIZE", "Open MPI"},
        {"PMI_SIZE", "MPICH (PMI)"},
        {"SLURM_STEP_NUM_TASKS", "Slurm"},
    };
    *launcher = "none";
    if (g_strcmp0(g_getenv("TENSORHOST_MPI"), "off") == 0)
        return 1;
    for (size_t k = 0; k < G_N_ELEMENTS(launches); ++k) {
        const uint32_t n = announced_by(launches[k].variable);
        if (n > 0) {
            *launcher = launches[k].name;
            return n;
        }
    }
    return 1;
}

uint32_t th_dist_announced_rank(void)
{
    static const char *const variables[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                            "SLURM_PROCID"};
    uint32_t rank = 0;
    for (size_t k = 0; k < G_N_ELEMENTS(variables); ++k)
        if (announced_number(variables[k], &rank))
            return rank;
    return 0;
}

/* srun starts the tasks of an MPI program through a process-management
 * interface it offers them (PMIx, PMI-2), chosen by --mpi or slurm.conf's
 * MpiDefault; with none (`--mpi=none`, Slurm's default) MPI_Init cannot
 * find the other tasks, and Open MPI aborts each one with a page of
 * advice. Said once, before MPI starts. */
static gboolean srun_without_pmi(const char *launcher, uint32_t announced, GError **error)
{
    if (strcmp(launcher, "Slurm") != 0 || g_getenv("PMIX_RANK") != NULL ||
        g_getenv("PMI_FD") != NULL || g_getenv("PMI_RANK") != NULL)
        return FALSE;
    g_set_error(error, TH_DIST_ERROR, TH_DIST_ERROR_LAUNCH,
                "launched by srun as %u tasks without a process-management interface that MPI "
                "can start from (srun --mpi=none, or slurm.conf's MpiDefault=none): run srun "
                "--mpi=pmix (or pmi2; srun --mpi=list lists this Slurm's)",
                announced);
    return TRUE;
}

/* The shims to try, in order. */
static GPtrArray *candidates(const char *launcher)
{
    GPtrArray *paths = g_ptr_array_new_with_free_func(g_free);
    const char *chosen = g_getenv("TENSORHOST_MPI");
    g_autofree char *dir = th_installed_dir("tensorhost/mpi", TH_MPI_RELDIR);
    const char *names[2] = {"openmpi", "mpich"};
    if (chosen != NULL && *chosen != '\0' && strcmp(chosen, "openmpi") != 0 &&
        strcmp(chosen, "mpich") != 0) {
        g_ptr_array_add(paths, g_strdup(chosen)); /* a shim's path */
        return paths;
    }
    if (g_strcmp0(chosen, "mpich") == 0 ||
        (chosen == NULL && g_str_has_prefix(launcher, "MPICH"))) {
        names[0] = "mpich";
        names[1] = "openmpi";
    }
    const size_t count = chosen != NULL && *chosen != '\0' ? 1 : 2;
    for (size_t k = 0; k < count && dir != NULL; ++k) {
        g_autofree char *file = g_strdup_printf("libtensorhost-mpi-%s.so", names[k]);
        g_ptr_array_add(paths, g_build_filename(dir, file, NULL));
    }
    return paths;
}

static gboolean mpi_failed(const th_dist *d, int code, const char *what, GError **error)
{
    if (code == 0)
        return FALSE;
    char text[1024];
    d->mpi->error_string(code, text, sizeof text);
    g_set_error(error, TH_DIST_ERROR, TH_DIST_ERROR_MPI, "rank %u of %u processes: %s: %s",
                d->rank, d->size, what, text);
    return TRUE;
}

/* The shim at `path` opened, or NULL with the reason appended to `why`. */
static th_dist *open_shim(const char *path, GString *why)
{
    void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (module == NULL) {
        g_string_append_printf(why, "%s%s", why->len ? "; " : "", dlerror());
        return NULL;
    }
    const th_mpi_shim *(*table)(void) = NULL;
    *(void **)&table = dlsym(module, TH_MPI_SHIM_SYMBOL);
    const th_mpi_shim *mpi = table != NULL ? table() : NULL;
    if (mpi == NULL || mpi->version != TH_MPI_SHIM_VERSION ||
        mpi->struct_size < sizeof(th_mpi_shim)) {
        g_string_append_printf(why, "%s%s: not a tensorhost MPI shim of version %u",
                               why->len ? "; " : "", path, TH_MPI_SHIM_VERSION);
        dlclose(module);
        return NULL;
    }
    th_dist *d = g_new0(th_dist, 1);
    d->module = module;
    d->mpi = mpi;
    return d;
}

/* Processes sharing a host share its cores: unless OMP_NUM_THREADS says
 * otherwise, each one's OpenMP (the host's algebra, OpenBLAS's OpenMP
 * build, a CPU backend's default thread count, all of which follow this
 * thread's OpenMP default) takes its part of the cores it may run on. Left
 * at every core, P processes on one host run P times as many threads as it
 * has cores, and OpenMP's spinning threads then stall each other's work. */
static void share_the_cores(th_dist *d, int local)
{
    if (g_getenv("OMP_NUM_THREADS") != NULL || local <= 1)
        return;
    d->threads = MAX(1, (int)g_get_num_processors() / local);
    omp_set_num_threads(d->threads);
}

/* The NVIDIA GPUs of this host, as the driver lists them (no CUDA call:
 * CUDA must not start before CUDA_VISIBLE_DEVICES is set); 0 without. */
static int host_gpus(void)
{
    g_autoptr(GDir) dir = g_dir_open("/proc/driver/nvidia/gpus", 0, NULL);
    int count = 0;
    while (dir != NULL && g_dir_read_name(dir) != NULL)
        ++count;
    return count;
}

/* Processes sharing a host share its GPUs, as they share its cores: unless
 * CUDA_VISIBLE_DEVICES is set (a scheduler's binding, srun
 * --gpus-per-task), the `local`-th of `locals` processes sees its block of
 * G / locals GPUs (G >= locals), or GPU local mod G (fewer GPUs than
 * processes), so that a GPU backend's device 0, or devices = "all", is its
 * own. */
static void share_the_gpus(th_dist *d, int locals, int local)
{
    const int gpus = host_gpus();
    if (g_getenv("CUDA_VISIBLE_DEVICES") != NULL || locals <= 1 || gpus == 0)
        return;
    g_autoptr(GString) visible = g_string_new(NULL);
    if (gpus >= locals) {
        const int each = gpus / locals;
        for (int k = 0; k < each; ++k)
            g_string_append_printf(visible, "%s%d", k ? "," : "", local * each + k);
    } else {
        g_string_append_printf(visible, "%d", local % gpus);
    }
    g_setenv("CUDA_VISIBLE_DEVICES", visible->str, TRUE);
    g_strlcpy(d->gpus, visible->str, sizeof d->gpus);
}

static th_dist *current;

th_dist *th_dist_current(void) { return current; }

th_dist *th_dist_start(GError **error)
{
    const char *launcher = NULL;
    const uint32_t announced = th_dist_announced_processes(&launcher);
    if (announced <= 1 || srun_without_pmi(launcher, announced, error))
        return NULL;
    g_autoptr(GPtrArray) paths = candidates(launcher);
    g_autoptr(GString) why = g_string_new(NULL);
    th_dist *d = NULL;
    for (guint k = 0; k < paths->len && d == NULL; ++k)
        d = open_shim(g_ptr_array_index(paths, k), why);
    if (d == NULL) {
        g_set_error(error, TH_DIST_ERROR, TH_DIST_ERROR_LOAD,
                    "launched as %u processes (%s) but no MPI could be loaded (%s); install the "
                    "MPI the launcher belongs to, or set TENSORHOST_MPI to openmpi, mpich or a "
                    "shim's path",
                    announced, launcher, why->len ? why->str : "no shim was built");
        return NULL;
    }
    int rank = 0, size = 0;
    const int code = d->mpi->init();
    if (code != 0 || d->mpi->rank(&rank) != 0 || d->mpi->size(&size) != 0) {
        char text[1024] = "";
        d->mpi->error_string(code, text, sizeof text);
        g_set_error(error, TH_DIST_ERROR, TH_DIST_ERROR_MPI, "%s: MPI did not start: %s",
                    d->mpi->implementation, text);
        dlclose(d->module);
        g_free(d);
        return NULL;
    }
    if ((uint32_t)size != announced) {
        g_set_error(error, TH_DIST_ERROR, TH_DIST_ERROR_LOAD,
                    "launched as %u processes (%s) but %s's MPI sees %d: the launcher belongs "
                    "to another MPI; set TENSORHOST_MPI to openmpi or mpich",
                    announced, launcher, d->mpi->implementation, size);
        d->mpi->finalize();
        dlclose(d->module);
        g_free(d);
        return NULL;
    }
    d->rank = (uint32_t)rank;
    d->size = (uint32_t)size;
    d->mpi->library_version(d->library, sizeof d->library);
    d->mpi->processor_name(d->host, sizeof d->host);
    /* MPICH's version line has a tab: one line of plain text for the
     * console and report.json. */
    g_strdelimit(d->library, "\t\r\n", ' ');
    int locals = 1, local = 0;
    if (d->mpi->local_size(&locals, &local) == 0) {
        share_the_cores(d, locals);
        share_the_gpus(d, locals, local);
        d->local_size = (uint32_t)locals;
    }
    current = d;
    return d;
}

void th_dist_finish(th_dist *d)
{
    if (d == NULL)
        return;
    if (current == d)
        current = NULL;
    d->mpi->finalize();
    /* The module stays: MPI libraries keep threads and handlers that do
     * not survive an unload. */
    g_free(d);
}

uint32_t th_dist_rank(const th_dist *d) { return d ? d->rank : 0; }

uint32_t th_dist_size(const th_dist *d) { return d ? d->size : 1; }

gboolean th_dist_one_host(const th_dist *d) { return d == NULL || d->local_size == d->size; }

const char *th_dist_library(const th_dist *d) { return d ? d->library : ""; }

const char *th_dist_host(const th_dist *d) { return d ? d->host : ""; }

uint32_t th_dist_threads(const th_dist *d) { return d ? (uint32_t)d->threads : 0; }

const char *th_dist_gpus(const th_dist *d) { return d ? d->gpus : ""; }

th_dist_traffic th_dist_traffic_so_far(const th_dist *d)
{
    return d ? d->traffic : (th_dist_traffic){0};
}

static size_t type_bytes(th_mpi_type type) { return type == TH_MPI_INT32 ? 4u : 8u; }

/* One collective over the processes: an all-reduce of `type` elements by
 * `op`, or (broadcast) rank 0's bytes to every process. */
typedef struct collective {
    gboolean broadcast;
    th_mpi_type type;
    th_mpi_op op;
    const char *what;
} collective;

/* The collective over n elements of `data`, in pieces of at most
 * MAX_PIECE (MPI's counts are ints), with its traffic counted. */
static gboolean in_pieces(th_dist *d, const collective *c, void *data, uint64_t n,
                          GError **error)
{
    if (d == NULL)
        return TRUE;
    const size_t element = c->broadcast ? 1u : type_bytes(c->type);
    const gint64 start = g_get_monotonic_time();
    for (uint64_t first = 0; first < n; first += MAX_PIECE) {
        const int count = (int)MIN(MAX_PIECE, n - first);
        char *piece = (char *)data + first * element;
        const int code = c->broadcast ? d->mpi->broadcast(piece, count, 0)
                                      : d->mpi->allreduce(piece, count, c->type, c->op);
        if (mpi_failed(d, code, c->what, error))
            return FALSE;
        d->traffic.calls++;
    }
    d->traffic.bytes += n * element;
    d->traffic.seconds += (double)(g_get_monotonic_time() - start) / 1e6;
    return TRUE;
}

static gboolean reduce(th_dist *d, void *values, uint64_t n, th_mpi_type type, th_mpi_op op,
                       const char *what, GError **error)
{
    const collective c = {.broadcast = FALSE, .type = type, .op = op, .what = what};
    return in_pieces(d, &c, values, n, error);
}

gboolean th_dist_sum(th_dist *d, double *values, uint64_t n, GError **error)
{
    return reduce(d, values, n, TH_MPI_DOUBLE, TH_MPI_SUM, "a sum over the processes", error);
}

gboolean th_dist_max(th_dist *d, double *values, uint64_t n, GError **error)
{
    return reduce(d, values, n, TH_MPI_DOUBLE, TH_MPI_MAX, "a maximum over the processes",
                  error);
}

gboolean th_dist_sum_u64(th_dist *d, uint64_t *values, uint64_t n, GError **error)
{
    return reduce(d, values, n, TH_MPI_UINT64, TH_MPI_SUM, "a sum over the processes", error);
}

gboolean th_dist_max_u64(th_dist *d, uint64_t *values, uint64_t n, GError **error)
{
    return reduce(d, values, n, TH_MPI_UINT64, TH_MPI_MAX, "a maximum over the processes",
                  error);
}

gboolean th_dist_or_u64(th_dist *d, uint64_t *values, uint64_t n, GError **error)
{
    return reduce(d, values, n, TH_MPI_UINT64, TH_MPI_BOR, "a bitwise or over the processes",
                  error);
}

gboolean th_dist_broadcast(th_dist *d, void *data, uint64_t bytes, GError **error)
{
    const collective c = {.broadcast = TRUE, .what = "a broadcast"};
    return in_pieces(d, &c, data, bytes, error);
}

gboolean th_dist_gather(th_dist *d, const void *sent, uint64_t bytes, void *received,
                        GError **error)
{
    if (d == NULL) {
        memcpy(received, sent, bytes);
        return TRUE;
    }
    g_return_val_if_fail(bytes <= INT_MAX, FALSE);
    const gint64 start = g_get_monotonic_time();
    if (mpi_failed(d, d->mpi->gather(sent, (int)bytes, received, 0), "a gather", error))
        return FALSE;
    d->traffic.calls++;
    d->traffic.bytes += bytes;
    d->traffic.seconds += (double)(g_get_monotonic_time() - start) / 1e6;
    return TRUE;
}

gboolean th_dist_allgather(th_dist *d, const double *sent, uint64_t count, double *received,
                           const uint64_t *counts, GError **error)
{
    if (d == NULL) {
        if (sent)
            memmove(received, sent, count * sizeof *sent);
        return TRUE;
    }
    const uint32_t P = d->size;
    g_autofree int *sizes = g_new(int, 2 * (size_t)P);
    uint64_t total = 0;
    for (uint32_t p = 0; p < P; ++p) {
        sizes[P + p] = (int)MIN(total, (uint64_t)INT_MAX);
        sizes[p] = (int)MIN(counts[p], (uint64_t)INT_MAX);
        total += counts[p];
    }
    if (total > INT_MAX || counts[d->rank] != count) {
        g_set_error(error, TH_DIST_ERROR, TH_DIST_ERROR_MPI,
                    "rank %u of %u processes: an all-gather of %llu doubles (this process's "
                    "%llu, %llu expected) is more than MPI's int counts hold or not what the "
                    "processes agreed",
                    d->rank, d->size, (unsigned long long)total, (unsigned long long)count,
                    (unsigned long long)counts[d->rank]);
        return FALSE;
    }
    const gint64 start = g_get_monotonic_time();
    double empty[1] = {0.0};
    if (mpi_failed(d,
                   d->mpi->allgatherv(sent == NULL ? NULL : count ? sent : empty, (int)count,
                                      total ? received : empty, sizes, sizes + P),
                   "an all-gather between the processes", error))
        return FALSE;
    d->traffic.calls++;
    d->traffic.bytes += count * sizeof *sent;
    d->traffic.seconds += (double)(g_get_monotonic_time() - start) / 1e6;
    return TRUE;
}

gboolean th_dist_exscan_sum_u64(th_dist *d, uint64_t *values, uint64_t n, GError **error)
{
    if (d == NULL) {
        memset(values, 0, n * sizeof *values);
        return TRUE;
    }
    const gint64 start = g_get_monotonic_time();
    for (uint64_t first = 0; first < n; first += MAX_PIECE) {
        const int count = (int)MIN(MAX_PIECE, n - first);
        if (mpi_failed(d, d->mpi->exscan(values + first, count, TH_MPI_UINT64, TH_MPI_SUM),
                       "a prefix sum over the processes", error))
            return FALSE;
        d->traffic.calls++;
    }
    if (d->rank == 0) /* MPI leaves it undefined */
        memset(values, 0, n * sizeof *values);
    d->traffic.bytes += n * sizeof *values;
    d->traffic.seconds += (double)(g_get_monotonic_time() - start) / 1e6;
    return TRUE;
}

/* One all-to-all of int counts: every pair's block is at most `piece`
 * bytes, so a process's offsets stay within an int. `out` and `in`: the
 * rounds' packed buffers, each the size of the first round's packing
 * (sum over the pairs of min(piece, the pair's bytes)), which no later
 * round exceeds. */
static gboolean alltoallv_round(th_dist *d, const char *sent, const uint64_t *send_first,
                                const uint64_t *send_bytes, char *received,
                                const uint64_t *recv_first, const uint64_t *recv_bytes,
                                uint64_t done, uint64_t piece, int *counts, char *out, char *in,
                                GError **error)
{
    const uint32_t P = d->size;
    int *send_count = counts, *send_offset = counts + P;
    int *recv_count = counts + 2 * P, *recv_offset = counts + 3 * P;
    /* The pieces go to a packed buffer: each pair's next piece, in rank order. */
    uint64_t send_total = 0, recv_total = 0;
    for (uint32_t p = 0; p < P; ++p) {
        const uint64_t s = send_bytes[p] > done ? MIN(piece, send_bytes[p] - done) : 0;
        const uint64_t r = recv_bytes[p] > done ? MIN(piece, recv_bytes[p] - done) : 0;
        send_count[p] = (int)s;
        send_offset[p] = (int)send_total;
        recv_count[p] = (int)r;
        recv_offset[p] = (int)recv_total;
        send_total += s;
        recv_total += r;
    }
    for (uint32_t p = 0; p < P; ++p)
        if (send_count[p] > 0)
            memcpy(out + send_offset[p], sent + send_first[p] + done, (size_t)send_count[p]);
    if (mpi_failed(d,
                   d->mpi->alltoallv(out, send_count, send_offset, in, recv_count, recv_offset),
                   "an exchange between the processes", error))
        return FALSE;
    for (uint32_t p = 0; p < P; ++p)
        if (recv_count[p] > 0)
            memcpy(received + recv_first[p] + done, in + recv_offset[p], (size_t)recv_count[p]);
    d->traffic.calls++;
    d->traffic.bytes += send_total;
    return TRUE;
}

gboolean th_dist_exchange(th_dist *d, const void *sent, const uint64_t *send_bytes,
                          uint32_t unit, void **received, uint64_t *recv_bytes, GError **error)
{
    *received = NULL;
    if (d == NULL) {
        recv_bytes[0] = send_bytes[0];
        if (send_bytes[0] > 0)
            *received = g_memdup2(sent, send_bytes[0]);
        return TRUE;
    }
    const uint32_t P = d->size;
    const gint64 start = g_get_monotonic_time();
    /* The sizes first: every process learns what each sends it. */
    g_autofree int *counts = g_new(int, 4 * (size_t)P);
    for (uint32_t p = 0; p < P; ++p) {
        counts[p] = (int)sizeof(uint64_t);
        counts[P + p] = (int)(p * sizeof(uint64_t));
    }
    if (mpi_failed(d,
                   d->mpi->alltoallv(send_bytes, counts, counts + P, recv_bytes, counts,
                                     counts + P),
                   "an exchange of sizes between the processes", error))
        return FALSE;
    d->traffic.calls++;
    /* Then the records: in one call (below), or in rounds of at most
     * MAX_PIECE bytes a process, as many on every process (the most any
     * pair needs). TH_DIST_TEST_EXCHANGE_PIECE=N: rounds of N bytes a pair, however
     * small the exchange (the tests' way through the rounds). */
    const char *test_piece = g_getenv("TH_DIST_TEST_EXCHANGE_PIECE");
    const uint64_t forced = test_piece ? g_ascii_strtoull(test_piece, NULL, 10) : 0;
    const uint64_t piece = forced ? forced : MAX(MAX_PIECE / P, 1);
    uint64_t rounds = 0, recv_total = 0;
    g_autofree uint64_t *send_first = g_new(uint64_t, P);
    g_autofree uint64_t *recv_first = g_new(uint64_t, P);
    uint64_t send_total = 0;
    /* The packed buffers' sizes: the first round is the largest (a pair's
     * piece, or all it has when that is less). */
    uint64_t send_round = 0, recv_round = 0;
    for (uint32_t p = 0; p < P; ++p) {
        send_first[p] = send_total;
        recv_first[p] = recv_total;
        send_total += send_bytes[p];
        recv_total += recv_bytes[p];
        send_round += MIN(piece, send_bytes[p]);
        recv_round += MIN(piece, recv_bytes[p]);
        rounds = MAX(rounds, (MAX(send_bytes[p], recv_bytes[p]) + piece - 1) / piece);
    }
    /* Counted in units, a process's blocks fit MPI's ints far longer than
     * in bytes: one call from and into the buffers themselves where every
     * process's do (each deciding alike, as for the rounds' count). */
    uint64_t most[2] = {rounds, MAX(send_total, recv_total) / unit};
    if (!th_dist_max_u64(d, most, 2, error))
        return FALSE;
    rounds = most[0];
    char *in = recv_total > 0 ? g_malloc(recv_total) : NULL;
    if (!forced && most[1] <= INT_MAX) {
        for (uint32_t p = 0; p < P; ++p) {
            counts[p] = (int)(send_bytes[p] / unit);
            counts[P + p] = (int)(send_first[p] / unit);
            counts[2 * P + p] = (int)(recv_bytes[p] / unit);
            counts[3 * P + p] = (int)(recv_first[p] / unit);
        }
        char empty[1];
        if (mpi_failed(d,
                       d->mpi->alltoallv_units(send_total ? sent : empty, counts, counts + P,
                                               in ? in : empty, counts + 2 * P, counts + 3 * P,
                                               (int)unit),
                       "an exchange between the processes", error)) {
            g_free(in);
            return FALSE;
        }
        d->traffic.calls++;
        d->traffic.bytes += send_total;
        rounds = 0;
    }
    /* Otherwise rounds through packed buffers, allocated once (fresh pages
     * a round would each be zeroed by the kernel first) at the first
     * round's size, not P pieces: a process that sends little to its
     * peers packs little. */
    char *out_round = rounds ? g_malloc(MAX(send_round, 1)) : NULL;
    char *in_round = rounds ? g_malloc(MAX(recv_round, 1)) : NULL;
    gboolean ok = TRUE;
    for (uint64_t k = 0; ok && k < rounds; ++k)
        ok = alltoallv_round(d, sent, send_first, send_bytes, in, recv_first, recv_bytes,
                             k * piece, piece, counts, out_round, in_round, error);
    g_free(out_round);
    g_free(in_round);
    if (!ok) {
        g_free(in);
        return FALSE;
    }
    d->traffic.seconds += (double)(g_get_monotonic_time() - start) / 1e6;
    *received = in;
    return TRUE;
}

gboolean th_dist_agree(th_dist *d, GError **error)
{
    if (d == NULL)
        return error == NULL || *error == NULL;
    const gboolean failed = error != NULL && *error != NULL;
    int32_t first = failed ? (int32_t)d->rank : INT32_MAX;
    GError *local = NULL;
    if (mpi_failed(d, d->mpi->allreduce(&first, 1, TH_MPI_INT32, TH_MPI_MIN),
                   "an agreement between the processes", &local)) {
        /* Without an agreement no process can tell the others: end them. */
        g_printerr("tensorhost: error: %s\n", local->message);
        g_error_free(local);
        th_dist_abort(d, 1);
    }
    d->traffic.calls++;
    if (first == INT32_MAX)
        return TRUE;
    if ((uint32_t)first != d->rank) {
        g_clear_error(error);
        g_set_error(error, TH_DIST_ERROR, TH_DIST_ERROR_ELSEWHERE,
                    "rank %d of %u processes failed (it reports why)", first, d->size);
    }
    return FALSE;
}

void th_dist_abort(th_dist *d, int status)
{
    if (d != NULL)
        d->mpi->abort(status);
    _Exit(status);
}
