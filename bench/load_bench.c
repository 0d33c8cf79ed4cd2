/* load_bench: how fast tensors load, as the program loads them
 * (th_tensor_read_file: text, .tns.gz or binary, by content). Each file is
 * read once untimed (so every file is timed from the page cache, not the
 * disk) and then N times; the best and the median time are printed with
 * the file's bytes per second, and the ratio of the first two files'
 * medians, so that one run compares, e.g., the text and the binary form of
 * one tensor:
 *
 *   build/bin/load_bench -n 5 nell-2.tns nell-2.tnsb
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensor_reader.h"

typedef struct {
    const char *path;
    guint64 bytes;
    uint64_t nnz;
    uint32_t nmodes;
    th_index dims[TH_MAX_MODES];
    double norm_squared;
    double best, median;
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
    printf("%-40s %14s %12s %9s %9s %9s\n", "file", "bytes", "nnz", "best s", "median s",
           "GB/s");
    for (guint i = 0; i < n; ++i) {
        if (!measure(paths[i], runs, &results[i])) {
            g_free(results);
            return 1;
        }
        const load_result *r = &results[i];
        printf("%-40s %14" G_GUINT64_FORMAT " %12" G_GUINT64_FORMAT " %9.3f %9.3f %9.2f\n",
               r->path, r->bytes, r->nnz, r->best, r->median,
               r->median > 0 ? (double)r->bytes / 1e9 / r->median : 0.0);
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
