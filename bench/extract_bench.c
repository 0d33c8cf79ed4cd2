/* extract_bench: how fast the host hands a multi-device run its shares
 * (plugins/gpu-common/share_extract.c), the host-bound part of loading a
 * tensor onto several GPUs. The tensor is a file (any form the program
 * reads) or a synthetic one of a tensorhost-synth preset's shape and skew
 * with `--nnz` nonzeros. Every mode's row counts (thp_count_rows_all) and,
 * for each rank in turn, its share of every mode side by side
 * (thp_extract_shares, as the plugin's group load calls it) are timed
 * `--reps` times, the median printed with the share's nonzeros a second,
 * and the first round apart: rank 0's first writes into fresh buffers, as
 * a load does, and the ranks after it reuse them, as the group load does.
 * With `--check` every rank's shares are compared with the one-pass
 * thp_extract_share.
 *
 *   build/bin/extract_bench --preset reddit --nnz 200000000 --ranks 2 --check
 *   build/bin/extract_bench --ranks 4 nell-2.tnsb
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device_shares.h"
#include "share_extract.h"
#include "tensor/synth.h"
#include "tensor/tensor_reader.h"

static int compare_doubles(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *seconds, int n)
{
    qsort(seconds, (size_t)n, sizeof *seconds, compare_doubles);
    return n % 2 ? seconds[n / 2] : 0.5 * (seconds[n / 2 - 1] + seconds[n / 2]);
}

static double now(void) { return (double)g_get_monotonic_time() / 1e6; }

/* Rank q's share of every mode into `bufs` (values, then nmodes index
 * arrays, each share long), the jobs as the group load makes them. */
static void make_jobs(const th_sptensor *t, uint64_t *const *offsets, const thp_share *shares,
                      uint32_t ranks, uint32_t q, void *const *bufs, uint32_t **indices,
                      thp_share_job *jobs)
{
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        const thp_share *s = &shares[(size_t)m * ranks + q];
        const uint64_t n = s->nnz_end - s->nnz_begin;
        double *values = bufs[m];
        for (uint32_t k = 0; k < t->nmodes; ++k)
            indices[m * t->nmodes + k] = (uint32_t *)(values + n) + (size_t)k * n;
        jobs[m] = (thp_share_job){m, offsets[m], s, indices + m * t->nmodes, values};
    }
}

/* Whether job's arrays are what the one-pass extraction gives. */
static gboolean same_as_one_pass(const thp_coo_view *view, const thp_share_job *job)
{
    const uint64_t n = job->share->nnz_end - job->share->nnz_begin;
    double *values = g_new(double, n + 1u);
    uint32_t *indices[TH_MAX_MODES];
    for (uint32_t k = 0; k < view->nmodes; ++k)
        indices[k] = g_new(uint32_t, n + 1u);
    gboolean same = thp_extract_share(view, job->mode, job->row_offsets, job->share, indices,
                                      values) == 0 &&
                    memcmp(values, job->out_values, sizeof(double) * n) == 0;
    for (uint32_t k = 0; k < view->nmodes; ++k) {
        same = same && memcmp(indices[k], job->out_indices[k], sizeof(uint32_t) * n) == 0;
        g_free(indices[k]);
    }
    g_free(values);
    return same;
}

int main(int argc, char **argv)
{
    const char *preset_name = "reddit";
    gint64 nnz = 100000000;
    gint ranks = 2, reps = 3, threads = 0;
    gboolean check = FALSE;
    const GOptionEntry entries[] = {
        {"preset", 0, 0, G_OPTION_ARG_STRING, &preset_name, "tensorhost-synth preset", "NAME"},
        {"nnz", 0, 0, G_OPTION_ARG_INT64, &nnz, "nonzeros to generate", "N"},
        {"ranks", 0, 0, G_OPTION_ARG_INT, &ranks, "ranks the tensor is shared over", "G"},
        {"reps", 0, 0, G_OPTION_ARG_INT, &reps, "timed repetitions", "N"},
        {"threads", 0, 0, G_OPTION_ARG_INT, &threads,
         "host threads (0: every processor, at most 64, as the plugin)", "N"},
        {"check", 0, 0, G_OPTION_ARG_NONE, &check, "compare with the one-pass extraction",
         NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) context =
        g_option_context_new("[TENSOR] - time the shares' extraction");
    g_option_context_add_main_entries(context, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(context, &argc, &argv, &error)) {
        fprintf(stderr, "extract_bench: %s\n", error->message);
        return 2;
    }
    const th_synth_preset *preset = th_synth_find_preset(preset_name);
    if ((argc < 2 && preset == NULL) || argc > 2 || nnz < 1 || ranks < 1 || ranks > 64 ||
        reps < 1 || threads < 0) {
        fprintf(stderr, "extract_bench: one tensor file or a known --preset (not %s), and "
                        "--nnz, --ranks (1 to 64), --reps, --threads in range\n",
                preset_name);
        return 2;
    }
    if (threads == 0) {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n < 1 ? 1 : n > 64 ? 64 : (gint)n;
    }
    double start = now();
    g_autoptr(th_sptensor) t = NULL;
    g_autofree char *label = NULL;
    if (argc == 2) {
        t = th_tensor_read_file(argv[1], NULL, &error);
        label = g_strdup(argv[1]);
    } else {
        th_synth_params params;
        th_synth_params_from_preset(&params, preset, 1);
        params.nnz = (uint64_t)nnz;
        t = th_synth_generate(&params, &error);
        g_autofree char *described = th_synth_describe(&params);
        label = g_strdup_printf("%s (synthetic, %s shape)", described, preset_name);
    }
    if (t == NULL) {
        fprintf(stderr, "extract_bench: %s\n", error->message);
        return 1;
    }
    printf("%s: %" G_GUINT64_FORMAT " nonzeros, made in %.2f s; %d ranks, %d threads\n", label,
           t->nnz, now() - start, ranks, threads);

    const uint32_t N = t->nmodes, G = (uint32_t)ranks;
    const thp_coo_view view = {N, t->nnz, t->dims, (const uint32_t *const *)t->indices,
                               t->values};
    uint64_t *offsets[TH_MAX_MODES];
    for (uint32_t m = 0; m < N; ++m)
        offsets[m] = g_new(uint64_t, (gsize)t->dims[m] + 1u);
    double *seconds = g_new(double, reps);
    for (int r = 0; r < reps; ++r) {
        start = now();
        if (thp_count_rows_all(&view, offsets, (uint32_t)threads) != 0) {
            fprintf(stderr, "extract_bench: the rows could not be counted\n");
            return 1;
        }
        seconds[r] = now() - start;
    }
    printf("row counts, every mode: %.3f s median of %d\n", median(seconds, reps), reps);

    thp_share *shares = g_new(thp_share, (gsize)N * G);
    for (uint32_t m = 0; m < N; ++m)
        thp_plan_shares(offsets[m], t->dims[m], G, shares + (size_t)m * G);
    void *bufs[TH_MAX_MODES];
    for (uint32_t m = 0; m < N; ++m) {
        uint64_t largest = 1;
        for (uint32_t q = 0; q < G; ++q) {
            const thp_share *s = &shares[(size_t)m * G + q];
            largest = MAX(largest, s->nnz_end - s->nnz_begin);
        }
        bufs[m] = g_malloc(largest * (sizeof(double) + sizeof(uint32_t) * N));
    }
    uint32_t *indices[TH_MAX_MODES * TH_MAX_MODES];
    thp_share_job jobs[TH_MAX_MODES];
    int status = 0;
    for (uint32_t q = 0; q < G; ++q) {
        make_jobs(t, offsets, shares, G, q, bufs, indices, jobs);
        uint64_t share_nnz = 0;
        for (uint32_t m = 0; m < N; ++m)
            share_nnz += jobs[m].share->nnz_end - jobs[m].share->nnz_begin;
        for (int r = 0; r < reps; ++r) {
            start = now();
            if (thp_extract_shares(&view, jobs, N, (uint32_t)threads) != 0) {
                fprintf(stderr, "extract_bench: rank %u's shares could not be extracted\n", q);
                return 1;
            }
            seconds[r] = now() - start;
        }
        gboolean same = TRUE;
        for (uint32_t m = 0; check && m < N; ++m)
            same = same && same_as_one_pass(&view, &jobs[m]);
        const double first = seconds[0];
        const double s = median(seconds, reps);
        printf("rank %u: every mode's share (%" G_GUINT64_FORMAT " nonzeros in all): %.3f s "
               "median of %d (the first %.3f s), %.0f M nonzeros/s%s\n",
               q, share_nnz, s, reps, first, share_nnz / s / 1e6,
               !check ? "" : same ? "; the same as one pass" : "; DIFFERENT FROM ONE PASS");
        status = same ? status : 1;
    }
    for (uint32_t m = 0; m < N; ++m) {
        g_free(bufs[m]);
        g_free(offsets[m]);
    }
    g_free(shares);
    g_free(seconds);
    return status;
}
