/* Times writing a factor matrix as text (the modeN.mat layout): the old
 * writer, one fprintf("%+0.8e ") per value (kept here only, as the
 * baseline), against th_write_matrix ({fmt} on worker threads), on one
 * thread and on one per online processor. Every file is written atomically
 * and fsync'ed, as a run writes it, and each new file is checked byte for
 * byte against the baseline's. The same matrix as .npy (th_write_npy) is
 * timed too, for what text costs against binary.
 *
 * Usage: text_write_bench [ROWS [RANK [DIR [RUNS]]]]
 *        (default: 2000000 32 $TMPDIR 3; each time is the fastest of RUNS)
 * The values are uniform in [-1, 1), so nearly all take 16 bytes of text. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "base/atomic_file.h"
#include "output/factor_io.h"
#include "output/npy_io.h"
#include "base/rng.h"

/* th_write_matrix as it was before {fmt}. */
static gboolean write_matrix_fprintf(const char *path, const double *data, uint64_t rows,
                                     uint32_t cols, GError **error)
{
    th_atomic_file *file = th_atomic_file_open(path, error);
    if (!file)
        return FALSE;
    FILE *out = th_atomic_file_stream(file);
    for (uint64_t i = 0; i < rows; ++i) {
        for (uint32_t j = 0; j < cols; ++j)
            fprintf(out, "%+0.8e ", data[i * cols + j]);
        fputc('\n', out);
    }
    return th_atomic_file_commit(file, error);
}

static gboolean same_contents(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    gboolean same = fa != NULL && fb != NULL;
    enum { CHUNK = 1 << 20 };
    char *ba = g_malloc(CHUNK), *bb = g_malloc(CHUNK);
    while (same) {
        const size_t na = fread(ba, 1, CHUNK, fa), nb = fread(bb, 1, CHUNK, fb);
        if (na != nb || memcmp(ba, bb, na) != 0)
            same = FALSE;
        if (na < CHUNK)
            break;
    }
    g_free(ba);
    g_free(bb);
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

typedef struct timing {
    double seconds;
    uint64_t bytes;
} timing;

typedef gboolean (*matrix_writer)(const char *path, const double *data, uint64_t rows,
                                  uint32_t cols, GError **error);

static timing time_write_once(matrix_writer writer, const char *path, const double *data,
                              uint64_t rows, uint32_t cols)
{
    g_autoptr(GError) error = NULL;
    const gint64 start = g_get_monotonic_time();
    const gboolean ok = writer(path, data, rows, cols, &error);
    const double seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    if (!ok) {
        fprintf(stderr, "text_write_bench: %s\n", error->message);
        exit(1);
    }
    GStatBuf st;
    if (g_stat(path, &st) != 0) {
        fprintf(stderr, "text_write_bench: %s: %s\n", path, g_strerror(errno));
        exit(1);
    }
    return (timing){seconds, (uint64_t)st.st_size};
}

/* The fastest of `runs` writes: on a shared machine the others only add
 * what other processes took. */
static timing time_write(matrix_writer writer, const char *path, const double *data,
                         uint64_t rows, uint32_t cols, unsigned runs)
{
    timing best = time_write_once(writer, path, data, rows, cols);
    for (unsigned r = 1; r < runs; ++r) {
        const timing t = time_write_once(writer, path, data, rows, cols);
        if (t.seconds < best.seconds)
            best = t;
    }
    return best;
}

static void print_row(const char *what, timing t, double baseline_seconds)
{
    printf("| %s | %.2f | %.0f | %.2fx |\n", what, t.seconds, (double)t.bytes / 1e6 / t.seconds,
           baseline_seconds / t.seconds);
}

int main(int argc, char **argv)
{
    const uint64_t rows = argc > 1 ? g_ascii_strtoull(argv[1], NULL, 10) : 2000000;
    const uint32_t rank = argc > 2 ? (uint32_t)g_ascii_strtoull(argv[2], NULL, 10) : 32;
    const char *dir = argc > 3 ? argv[3] : g_get_tmp_dir();
    const unsigned runs = argc > 4 ? (unsigned)g_ascii_strtoull(argv[4], NULL, 10) : 3;
    if (rows == 0 || rank == 0 || runs == 0) {
        fprintf(stderr, "usage: text_write_bench [ROWS [RANK [DIR [RUNS]]]]\n");
        return 2;
    }
    double *data = g_new(double, rows * rank);
    th_rng rng;
    th_rng_seed(&rng, 42);
    for (uint64_t k = 0; k < rows * rank; ++k)
        data[k] = 2.0 * th_rng_uniform(&rng) - 1.0;

    g_autofree char *old_path = g_build_filename(dir, "text_write_bench-old.mat", NULL);
    g_autofree char *new_path = g_build_filename(dir, "text_write_bench-new.mat", NULL);
    const unsigned processors = g_get_num_processors();
    printf("%" G_GUINT64_FORMAT " x %u factor, %u online processors, files in %s, fastest of %u "
           "runs\n\n",
           rows, rank, processors, dir, runs);
    printf("| writer | seconds | MB/s | speed-up |\n|---|---:|---:|---:|\n");

    const timing old = time_write(write_matrix_fprintf, old_path, data, rows, rank, runs);
    print_row("fprintf per value (before)", old, old.seconds);

    const unsigned threads[] = {1, MIN(processors, TH_WRITE_MATRIX_MAX_THREADS)};
    for (size_t t = 0; t < G_N_ELEMENTS(threads); ++t) {
        if (t > 0 && threads[t] == threads[0])
            break;
        th_write_matrix_set_parallelism(threads[t], 0);
        const timing now = time_write(th_write_matrix, new_path, data, rows, rank, runs);
        g_autofree char *what = g_strdup_printf("th_write_matrix, %u thread%s", threads[t],
                                                threads[t] == 1 ? "" : "s");
        print_row(what, now, old.seconds);
        if (now.bytes != old.bytes || !same_contents(old_path, new_path)) {
            fprintf(stderr, "text_write_bench: %s differs from %s\n", new_path, old_path);
            return 1;
        }
    }
    th_write_matrix_set_parallelism(0, 0);
    g_autofree char *npy_path = g_build_filename(dir, "text_write_bench.npy", NULL);
    print_row(".npy (th_write_npy), for comparison",
              time_write(th_write_npy, npy_path, data, rows, rank, runs), old.seconds);
    g_unlink(npy_path);
    printf("\n%.1f bytes per value; every file identical to the fprintf one\n",
           (double)old.bytes / ((double)rows * rank));
    g_unlink(old_path);
    g_unlink(new_path);
    g_free(data);
    return 0;
}
