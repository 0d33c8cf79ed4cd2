/* load_bench: how fast tensors load, as the program loads them
 * (th_tensor_read_file: text, .tns.gz or binary, by content). Each file is
 * read once untimed (so every file is timed from the page cache, not the
 * disk) and then N times; the best and the median time are printed with
 * the file's bytes per second, and the ratio of the first two files'
 * medians, so that one run compares, e.g., the text and the binary form of
 * one tensor. Beside each file, the bound a load is measured against: the
 * file's bytes copied from the page cache (a mapping) into fresh memory on
 * every processor, the least any reader that returns its own arrays does
 * (median of the same number of runs):
 *
 *   build/bin/load_bench -n 5 nell-2.tns nell-2.tnsb
 */
#define _DEFAULT_SOURCE /* O_CLOEXEC */
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tensor/sptensor.h"
#include "tensor/tensor_reader.h"

typedef struct {
    const char *path;
    guint64 bytes;
    uint64_t nnz;
    uint32_t nmodes;
    th_index dims[TH_MAX_MODES];
    double norm_squared;
    double best, median;
    double bound; /* median seconds of the page-cache copy */
} load_result;

static int compare_doubles(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Reads `path` once untimed, then `runs` times. FALSE with a message on
 * stderr when it cannot be read. */
static gboolean measure(const char *path, int runs, load_result *r)
{
    GStatBuf st;
    r->path = path;
    r->bytes = g_stat(path, &st) == 0 ? (guint64)st.st_size : 0;
    double *seconds = g_new(double, runs);
    for (int k = -1; k < runs; ++k) {
        g_autoptr(GError) error = NULL;
        const gint64 start = g_get_monotonic_time();
        th_sptensor *t = th_tensor_read_file(path, NULL, &error);
        const double elapsed = (double)(g_get_monotonic_time() - start) / 1e6;
        if (t == NULL) {
            fprintf(stderr, "load_bench: %s\n", error->message);
            g_free(seconds);
            return FALSE;
        }
        if (k < 0) { /* what the file holds, to check two files hold the same */
            r->nnz = t->nnz;
            r->nmodes = t->nmodes;
            for (uint32_t m = 0; m < t->nmodes; ++m)
                r->dims[m] = t->dims[m];
            r->norm_squared = th_sptensor_norm_squared(t);
        } else {
            seconds[k] = elapsed;
        }
        th_sptensor_free(t);
    }
    qsort(seconds, (size_t)runs, sizeof *seconds, compare_doubles);
    r->best = seconds[0];
    r->median = runs % 2 ? seconds[runs / 2] : 0.5 * (seconds[runs / 2 - 1] + seconds[runs / 2]);
    g_free(seconds);
    return TRUE;
}

typedef struct {
    char *dst;
    const char *src;
    size_t bytes;
} copy_share;

static gpointer copy_share_thread(gpointer arg)
{
    const copy_share *c = arg;
    memcpy(c->dst, c->src, c->bytes);
    return NULL;
}

/* Median seconds of copying the mapped file into fresh memory (allocated
 * as the readers allocate their arrays) on every processor; 0 when the
 * file cannot be mapped. */
static double copy_bound(const char *path, guint64 bytes, int runs)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    void *map = fd >= 0 && bytes > 0 ? mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    if (fd >= 0)
        close(fd);
    if (map == NULL || map == MAP_FAILED)
        return 0.0;
    const guint threads = g_get_num_processors();
    copy_share *shares = g_new(copy_share, threads);
    GThread **pool = g_new(GThread *, threads);
    double *seconds = g_new(double, runs);
    for (int k = -1; k < runs; ++k) {
        char *dst = th_alloc_large(bytes, 1);
        const size_t per = (bytes + threads - 1) / threads;
        const gint64 start = g_get_monotonic_time();
        for (guint i = 0; i < threads; ++i) {
            const size_t begin = MIN(bytes, (size_t)i * per);
            shares[i] = (copy_share){dst + begin, (const char *)map + begin,
                                     MIN(bytes, begin + per) - begin};
            pool[i] = g_thread_new("copy-bound", copy_share_thread, &shares[i]);
        }
        for (guint i = 0; i < threads; ++i)
            g_thread_join(pool[i]);
        if (k >= 0)
            seconds[k] = (double)(g_get_monotonic_time() - start) / 1e6;
        g_free(dst);
    }
    qsort(seconds, (size_t)runs, sizeof *seconds, compare_doubles);
    const double median =
        runs % 2 ? seconds[runs / 2] : 0.5 * (seconds[runs / 2 - 1] + seconds[runs / 2]);
    g_free(seconds);
    g_free(pool);
    g_free(shares);
    munmap(map, bytes);
    return median;
}

static gboolean same_tensor(const load_result *a, const load_result *b)
{
    if (a->nnz != b->nnz || a->nmodes != b->nmodes || a->norm_squared != b->norm_squared)
        return FALSE;
    for (uint32_t m = 0; m < a->nmodes; ++m)
        if (a->dims[m] != b->dims[m])
            return FALSE;
    return TRUE;
}

int main(int argc, char **argv)
{
    gint runs = 5;
    g_auto(GStrv) paths = NULL;
    GOptionEntry entries[] = {
        {"runs", 'n', 0, G_OPTION_ARG_INT, &runs, "Timed reads of each file (default 5)", "N"},
        {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &paths, NULL, "FILE..."},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) context = g_option_context_new("FILE... - time tensor loads");
    g_option_context_add_main_entries(context, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(context, &argc, &argv, &error) || paths == NULL || runs < 1) {
        fprintf(stderr, "load_bench: %s (see --help)\n",
                error ? error->message : "give FILE... and --runs of at least 1");
        return 2;
    }
    const guint n = g_strv_length(paths);
    load_result *results = g_new0(load_result, n);
    printf("load_bench: %d timed reads per file after one untimed, %u processors\n", runs,
           g_get_num_processors());
    printf("%-40s %14s %12s %9s %9s %9s %9s %7s\n", "file", "bytes", "nnz", "best s",
           "median s", "GB/s", "bound s", "x bound");
    for (guint i = 0; i < n; ++i) {
        if (!measure(paths[i], runs, &results[i])) {
            g_free(results);
            return 1;
        }
        results[i].bound = copy_bound(paths[i], results[i].bytes, runs);
        const load_result *r = &results[i];
        printf("%-40s %14" G_GUINT64_FORMAT " %12" G_GUINT64_FORMAT
               " %9.3f %9.3f %9.2f %9.3f %7.2f\n",
               r->path, r->bytes, r->nnz, r->best, r->median,
               r->median > 0 ? (double)r->bytes / 1e9 / r->median : 0.0, r->bound,
               r->bound > 0 ? r->median / r->bound : 0.0);
        fflush(stdout);
    }
    if (n >= 2) {
        const load_result *a = &results[0], *b = &results[1];
        printf("ratio: %s loads %.2fx as fast as %s (median times; best: %.2fx)%s\n", b->path,
               a->median / b->median, a->path, a->best / b->best,
               same_tensor(a, b) ? ", the same tensor"
                                 : "; WARNING: the files hold different tensors");
    }
    g_free(results);
    return 0;
}
