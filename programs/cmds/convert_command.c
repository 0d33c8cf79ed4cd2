/* `tensorhost convert IN OUT` (convert_command.h): one read, one atomic
 * write, one summary line. The input's format is found from its content by
 * the reader; the output's from OUT's name. */
#include "convert_command.h"

#include <stdio.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "base/atomic_file.h"
#include "base/cancel.h"
#include "console_report.h"
#include "base/message_text.h"
#include "base/progress.h"
#include "run.h"
#include "tensor/tensor_binary.h"
#include "tensor/tensor_reader.h"
#include "tensor/tensor_writer.h"

enum { EXIT_USAGE = 2 };

gboolean th_convert_wants_text(const char *path)
{
    return g_str_has_suffix(path, ".tns") || g_str_has_suffix(path, ".tns.gz");
}

static double seconds_since(gint64 start)
{
    return (double)(g_get_monotonic_time() - start) / 1e6;
}

static guint64 file_bytes(const char *path)
{
    GStatBuf st;
    return g_stat(path, &st) == 0 ? (guint64)st.st_size : 0;
}

/* A stop during the read or the write: nothing was written. */
static int report_interruption(GError *error)
{
    g_autofree char *message = th_escape_control(error->message);
    fprintf(stderr, "tensorhost: interrupted (%s); nothing was written\n", message);
    g_error_free(error);
    return th_cancel_exit_status();
}

static int fail(GError *error)
{
    if (g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_CANCELLED))
        return report_interruption(error);
    return th_run_fail(error);
}

static th_sptensor *read_input(const char *path, GError **error)
{
    th_tensor_read_options options = {0};
    if (th_progress_enabled())
        options.progress = th_console_read_progress;
    th_cancel_set_activity("now: the read is abandoned and nothing is written");
    th_sptensor *t = th_tensor_read_file(path, &options, error);
    th_progress_clear();
    return t;
}

static gboolean write_output(const char *path, const th_sptensor *t, GError **error)
{
    th_cancel_set_activity("now: the output is abandoned and nothing is written");
    if (th_convert_wants_text(path))
        return th_tensor_write_tns(t, path, error);
    th_progress_show(TRUE, "writing %s...", path);
    const gboolean ok = th_tensor_binary_write(path, t, error);
    th_progress_clear();
    return ok;
}

/* What was written: both writers keep t's nonzeros, dims and label. */
static void print_summary(const char *in, const char *out, const th_sptensor *t,
                          double read_seconds, double write_seconds)
{
    g_autoptr(GString) dims = g_string_new(NULL);
    for (uint32_t m = 0; m < t->nmodes; ++m)
        g_string_append_printf(dims, "%s%u", m ? "x" : "", t->dims[m]);
    g_autofree char *merged =
        t->duplicates_merged > 0
            ? g_strdup_printf(" (%" G_GUINT64_FORMAT " %s summed)", t->duplicates_merged,
                              th_plural(t->duplicates_merged, "duplicate", "duplicates"))
            : g_strdup("");
    g_autofree char *label_text = t->label != NULL ? th_escape_control(t->label) : NULL;
    g_autofree char *label =
        label_text != NULL ? g_strdup_printf("; label: %s", label_text) : g_strdup("; no label");
    const guint64 in_bytes = file_bytes(in), out_bytes = file_bytes(out);
    printf("tensorhost convert: %s -> %s (%s): %" G_GUINT64_FORMAT " %s%s, dims %s, "
           "%" G_GUINT64_FORMAT " -> %" G_GUINT64_FORMAT " %s, read in %.3f s, written in "
           "%.3f s%s\n",
           in, out, th_convert_wants_text(out) ? "text" : "binary", t->nnz,
           th_plural(t->nnz, "nonzero", "nonzeros"), merged, dims->str, in_bytes, out_bytes,
           th_plural(out_bytes, "byte", "bytes"), read_seconds, write_seconds, label);
    fflush(stdout);
}

int th_convert_main(int argc, char **argv)
{
    gboolean quiet = FALSE;
    g_auto(GStrv) operands = NULL;
    GOptionEntry entries[] = {
        {"quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "Print errors only (no summary line)",
         NULL},
        {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &operands, NULL, "IN OUT"},
        G_OPTION_ENTRY_NULL,
    };
    g_set_prgname("tensorhost convert");
    g_autoptr(GOptionContext) context =
        g_option_context_new("- convert a sparse tensor between text and binary");
    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(
        context,
        "IN: any tensor tensorhost reads: FROSTT .tns, .tns.gz, sptensor text, or the binary\n"
        "format, recognized by content. Duplicate coordinates are summed; the output is\n"
        "sorted.\n"
        "OUT: FROSTT text when it ends in .tns (gzip-compressed in .tns.gz), else the\n"
        "binary format (by convention named " TH_TENSOR_BINARY_EXTENSION
        "), which loads at the disk's or the page\n"
        "cache's speed instead of the parser's. Written atomically: an error or Ctrl-C\n"
        "leaves no partial OUT. The dims and the label (a synthetic tensor's) are kept:\n"
        "text gets them in a header of comment lines. OUT may not be IN, nor a link to\n"
        "it.\n\n"
        "Exit status: 0 done, 1 an error, 2 a bad command line, 130/143 interrupted.\n"
        "Example: tensorhost convert nell-2.tns nell-2" TH_TENSOR_BINARY_EXTENSION "\n"
        "The format: docs/tensor-format.md.\n");
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(context, &argc, &argv, &error)) {
        fprintf(stderr, "tensorhost convert: %s (see --help)\n", error->message);
        return EXIT_USAGE;
    }
    const guint n = operands ? g_strv_length(operands) : 0u;
    if (n != 2) {
        fprintf(stderr, "tensorhost convert: expected IN and OUT, %s (see --help)\n",
                n < 2 ? "got fewer" : "got more");
        return EXIT_USAGE;
    }
    const char *in = operands[0], *out = operands[1];

    th_cancel_install_handlers();
    /* Where OUT goes is checked before the read, which may take minutes. */
    if (!th_atomic_file_check_target(out, &error) ||
        !th_atomic_file_check_not_replacing(out, in, "OUT", "IN", "converting", &error))
        return fail(g_steal_pointer(&error));
    const gint64 start = g_get_monotonic_time();
    g_autoptr(th_sptensor) t = read_input(in, &error);
    if (!t)
        return fail(g_steal_pointer(&error));
    const double read_seconds = seconds_since(start);
    if (th_cancel_requested()) {
        fprintf(stderr, "tensorhost: interrupted after the read; nothing was written\n");
        return th_cancel_exit_status();
    }
    const gint64 write_start = g_get_monotonic_time();
    if (!write_output(out, t, &error))
        return fail(g_steal_pointer(&error));
    if (!quiet)
        print_summary(in, out, t, read_seconds, seconds_since(write_start));
    return th_cancel_requested() ? th_cancel_exit_status() : 0;
}
