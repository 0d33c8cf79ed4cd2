/* tensorhost-synth: writes a synthetic tensor (labelled as such: a text
 * file's header, a binary file's note), or with --read, loads a tensor file
 * and reports how long parsing took (the parse benchmark uses that). */
#define _POSIX_C_SOURCE 200809L /* isatty */

#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/atomic_file.h"
#include "base/cancel.h"
#include "base/message_text.h"
#include "tensor/synth.h"
#include "tensor/tensor_binary.h"
#include "tensor/tensor_reader.h"
#include "tensor/tensor_writer.h"

static char *opt_dims = NULL;
static char *opt_skew = NULL;
static char *opt_preset = NULL;
static char *opt_output = NULL;
static char *opt_read = NULL;
/* --nnz not given: the preset's count (a count given is checked, 0 too). */
#define NNZ_NOT_GIVEN G_MININT64
static gint64 opt_nnz = NNZ_NOT_GIVEN;
static gint64 opt_seed = 1;
static gint opt_rounds = -1; /* not given: the library's default */
static gboolean opt_list = FALSE;

static const GOptionEntry entries[] = {
    {"preset", 'p', 0, G_OPTION_ARG_STRING, &opt_preset,
     "FROSTT shape, nnz and skew (see --list-presets); --dims/--nnz/--skew override", "NAME"},
    {"dims", 'd', 0, G_OPTION_ARG_STRING, &opt_dims, "Mode sizes, e.g. 183x24x1140x1717", "AxBx..."},
    {"nnz", 'n', 0, G_OPTION_ARG_INT64, &opt_nnz, "Target number of distinct nonzeros", "N"},
    {"skew", 's', 0, G_OPTION_ARG_STRING, &opt_skew,
     "Zipf exponent per mode (one value for all modes, or one per mode; 0 = uniform)", "a,b,..."},
    {"seed", 0, 0, G_OPTION_ARG_INT64, &opt_seed, "Random seed (default 1)", "S"},
    {"rounds", 0, 0, G_OPTION_ARG_INT, &opt_rounds,
     "Top-up rounds to replace merged duplicates (default 64)", "R"},
    {"output", 'o', 0, G_OPTION_ARG_FILENAME, &opt_output,
     "Write FROSTT .tns here (gzip when it ends in .gz; the binary format when it ends in "
     TH_TENSOR_BINARY_EXTENSION ")", "FILE"},
    {"read", 'r', 0, G_OPTION_ARG_FILENAME, &opt_read,
     "Instead: read a tensor file and print its statistics and load speed", "FILE"},
    {"list-presets", 0, 0, G_OPTION_ARG_NONE, &opt_list, "List the presets and exit", NULL},
    G_OPTION_ENTRY_NULL,
};

static gboolean parse_u64(const char *text, guint64 max, guint64 *out)
{
    return g_ascii_string_to_unsigned(text, 10, 1, max, out, NULL);
}

static gboolean parse_dims(const char *text, th_synth_params *p, GError **error)
{
    g_auto(GStrv) parts = g_strsplit(text, "x", -1);
    guint n = g_strv_length(parts);
    if (n < 2 || n > TH_MAX_MODES) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--dims '%s': expected 2 to %u sizes separated by 'x'", text, TH_MAX_MODES);
        return FALSE;
    }
    for (guint m = 0; m < n; ++m) {
        guint64 dim = 0;
        if (!parse_u64(parts[m], UINT32_MAX, &dim)) {
            g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "--dims '%s': size %u '%s' is not an integer from 1 to %u", text, m + 1,
                        parts[m], UINT32_MAX);
            return FALSE;
        }
        p->dims[m] = (th_index)dim;
    }
    p->nmodes = n;
    return TRUE;
}

static gboolean parse_skew(const char *text, th_synth_params *p, GError **error)
{
    g_auto(GStrv) parts = g_strsplit(text, ",", -1);
    guint n = g_strv_length(parts);
    if (n != 1 && n != p->nmodes) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--skew '%s': expected 1 or %u exponents (one per mode), found %u", text,
                    p->nmodes, n);
        return FALSE;
    }
    for (guint m = 0; m < p->nmodes; ++m) {
        const char *s = parts[n == 1 ? 0 : m];
        char *end = NULL;
        double a = g_ascii_strtod(s, &end);
        if (end == s || *end != '\0' || !(a >= 0.0)) {
            g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "--skew '%s': '%s' is not a non-negative number", text, s);
            return FALSE;
        }
        p->skew[m] = a;
    }
    return TRUE;
}

static gboolean build_params(th_synth_params *p, GError **error)
{
    memset(p, 0, sizeof *p);
    if (opt_preset != NULL) {
        const th_synth_preset *preset = th_synth_find_preset(opt_preset);
        if (preset == NULL) {
            g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "--preset '%s': unknown (see --list-presets)", opt_preset);
            return FALSE;
        }
        th_synth_params_from_preset(p, preset, 0);
    }
    if (opt_dims != NULL) {
        if (!parse_dims(opt_dims, p, error))
            return FALSE;
        if (opt_skew == NULL)
            memset(p->skew, 0, sizeof p->skew); /* a preset's skews fit its own dims */
    }
    if (p->nmodes == 0) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "give --preset or --dims (and --nnz)");
        return FALSE;
    }
    if (opt_skew != NULL && !parse_skew(opt_skew, p, error))
        return FALSE;
    if (opt_nnz != NNZ_NOT_GIVEN) {
        if (opt_nnz < 1) {
            g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "--nnz %" G_GINT64_FORMAT ": expected 1 or more (the number of "
                        "distinct nonzeros to generate)",
                        opt_nnz);
            return FALSE;
        }
        p->nnz = (uint64_t)opt_nnz;
    }
    if (p->nnz == 0) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--dims gives no count: give --nnz N too (the number of distinct "
                    "nonzeros, 1 or more)");
        return FALSE;
    }
    if (opt_seed < 0) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--seed %" G_GINT64_FORMAT ": expected 0 or more", opt_seed);
        return FALSE;
    }
    p->seed = (uint64_t)opt_seed;
    if (opt_rounds == 0 || opt_rounds < -1) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--rounds %d: expected 1 or more", opt_rounds);
        return FALSE;
    }
    p->max_rounds = opt_rounds > 0 ? (uint32_t)opt_rounds : 0u;
    return TRUE;
}

static void print_dims(FILE *out, const th_sptensor *t)
{
    for (uint32_t m = 0; m < t->nmodes; ++m)
        fprintf(out, "%s%u", m ? "x" : "", t->dims[m]);
}

static void show_progress(uint64_t done, uint64_t total, void *user_data)
{
    (void)user_data;
    if (total > 0)
        fprintf(stderr, "\rreading: %.0f%% (%" G_GUINT64_FORMAT " MB)", 100.0 * (double)done / (double)total,
                done >> 20);
    else
        fprintf(stderr, "\rreading: %" G_GUINT64_FORMAT " MB", done >> 20);
    if (total > 0 && done == total)
        fputc('\n', stderr);
}

static int run_read(const char *path)
{
    th_tensor_read_options options = {0};
    if (isatty(STDERR_FILENO))
        options.progress = show_progress;
    GStatBuf st;
    guint64 bytes = g_stat(path, &st) == 0 ? (guint64)st.st_size : 0;
    gint64 start = g_get_monotonic_time();
    g_autoptr(GError) error = NULL;
    g_autoptr(th_sptensor) t = th_tensor_read_file(path, &options, &error);
    double seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    if (t == NULL) {
        fprintf(stderr, "tensorhost-synth: %s\n", error->message);
        return 1;
    }
    printf("file: %s\nbytes: %" G_GUINT64_FORMAT "\ndims: ", path, bytes);
    print_dims(stdout, t);
    printf("\nnnz: %" G_GUINT64_FORMAT "\nlines: %" G_GUINT64_FORMAT
           "\nduplicates_merged: %" G_GUINT64_FORMAT "\nseconds: %.3f\nMB_per_s: %.1f\n",
           t->nnz, t->lines_read, t->duplicates_merged, seconds,
           seconds > 0 ? (double)bytes / 1e6 / seconds : 0.0);
    if (t->label != NULL) {
        g_autofree char *label = th_escape_control(t->label);
        printf("label: %s\n", label);
    }
    return 0;
}

static void list_presets(void)
{
    for (size_t i = 0; i < th_synth_preset_count; ++i) {
        th_synth_params p;
        th_synth_params_from_preset(&p, &th_synth_presets[i], 1);
        g_autofree char *label = th_synth_describe(&p);
        printf("%-8s %s\n", th_synth_presets[i].name, label + strlen("tensorhost-synth "));
    }
}

int main(int argc, char **argv)
{
    g_autoptr(GOptionContext) context =
        g_option_context_new("- write a synthetic sparse tensor (FROSTT .tns)");
    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(
        context, "Indices per mode follow a Zipf law (P(i) ~ 1/i^a over a random permutation\n"
                 "of the mode); duplicates are merged and redrawn up to --rounds times.\n"
                 "The output is labelled synthetic (a .tns file in its header, a binary file\n"
                 "in its note; docs/tensor-format.md).\n\n"
                 "Example: tensorhost-synth --preset uber --seed 1 --output uber-synth.tns\n");
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(context, &argc, &argv, &error)) {
        fprintf(stderr, "tensorhost-synth: %s\n", error->message);
        return 2;
    }
    if (argc > 1) {
        fprintf(stderr, "tensorhost-synth: unexpected argument '%s'\n", argv[1]);
        return 2;
    }
    if (opt_list) {
        list_presets();
        return 0;
    }
    if (opt_read != NULL) {
        if (opt_preset || opt_dims || opt_skew || opt_nnz != NNZ_NOT_GIVEN || opt_output ||
            opt_rounds != -1) {
            fprintf(stderr, "tensorhost-synth: --read times loading a file and generates "
                            "nothing: it takes no --preset, --dims, --skew, --nnz, --rounds or "
                            "--output\n");
            return 2;
        }
        return run_read(opt_read);
    }
    th_synth_params params;
    if (!build_params(&params, &error)) {
        fprintf(stderr, "tensorhost-synth: %s\n", error->message);
        return 2;
    }
    if (opt_output == NULL) {
        fprintf(stderr, "tensorhost-synth: give --output FILE\n");
        return 2;
    }
    /* Where the output goes is checked before the generation, which may
     * take minutes; the generation itself is a run (its errors exit 1). */
    if (!th_atomic_file_check_target(opt_output, &error)) {
        fprintf(stderr, "tensorhost-synth: %s\n", error->message);
        return 1;
    }
    gint64 start = g_get_monotonic_time();
    g_autoptr(th_sptensor) t = th_synth_generate(&params, &error);
    if (t == NULL) {
        fprintf(stderr, "tensorhost-synth: %s\n", error->message);
        return 1;
    }
    double gen_seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    start = g_get_monotonic_time();
    /* The files keep t's label (a binary file's note, a text file's header),
     * so that they stay labelled as synthetic. Until here a signal ends
     * the process (nothing is written yet); from here a stop abandons the
     * write, so that no temporary file is left. */
    th_cancel_install_handlers();
    th_cancel_set_activity("now: the output is abandoned and nothing is written");
    const gboolean binary = g_str_has_suffix(opt_output, TH_TENSOR_BINARY_EXTENSION);
    if (binary ? !th_tensor_binary_write(opt_output, t, &error)
               : !th_tensor_write_tns(t, opt_output, &error)) {
        fprintf(stderr, "tensorhost-synth: %s\n", error->message);
        return g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_CANCELLED)
                   ? th_cancel_exit_status()
                   : 1;
    }
    double write_seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    fprintf(stderr,
            "tensorhost-synth: %s: %" G_GUINT64_FORMAT " %s (target %" G_GUINT64_FORMAT
            ", %" G_GUINT64_FORMAT " duplicate %s merged), dims ",
            opt_output, t->nnz, th_plural(t->nnz, "nonzero", "nonzeros"), params.nnz,
            t->duplicates_merged, th_plural(t->duplicates_merged, "draw", "draws"));
    print_dims(stderr, t);
    fprintf(stderr, "; generated in %.2f s, written in %.2f s\n", gen_seconds, write_seconds);
    return 0;
}
