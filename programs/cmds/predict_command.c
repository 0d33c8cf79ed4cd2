/* `tensorhost predict` (predict_command.h): the model read and checked,
 * the entries read bounded by its dims (so a coordinate beyond them is
 * named on its line), their values computed, written, and their RMSE
 * against the file's values reported. */
#include "predict_command.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "base/atomic_file.h"
#include "base/cancel.h"
#include "base/message_text.h"
#include "base/progress.h"
#include "console_report.h"
#include "cpd/cp_predict.h"
#include "output/model_reader.h"
#include "run.h"
#include "tensor/tensor_reader.h"
#include "tensor/tensor_writer.h"

enum { EXIT_USAGE = 2 };

/* What the command line asks. */
typedef struct predict_request {
    char *model_dir;
    char *indices_path;
    char *output_path; /* NULL or "-": standard output */
    gboolean quiet;
} predict_request;

static void predict_request_clear(predict_request *request)
{
    g_free(request->model_dir);
    g_free(request->indices_path);
    g_free(request->output_path);
}

static gboolean writes_to_stdout(const predict_request *request)
{
    return request->output_path == NULL || strcmp(request->output_path, "-") == 0;
}

/* A stop during the read or the write: `outcome` says what it left. */
static int report_interruption(GError *error, const char *outcome)
{
    g_autofree char *message = th_escape_control(error->message);
    fprintf(stderr, "tensorhost: interrupted (%s); %s\n", message, outcome);
    g_error_free(error);
    return th_cancel_exit_status();
}

static int fail(GError *error, const predict_request *request)
{
    if (g_error_matches(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_CANCELLED))
        return report_interruption(error, writes_to_stdout(request)
                                              ? "the predictions written are incomplete"
                                              : "nothing was written");
    return th_run_fail(error);
}

static const char description[] =
    "--model DIR: the folder a run wrote its model into (output.dir): mode1 ... modeN\n"
    "and lambda, read from the .npy files when mode1.npy is there, else from the .mat\n"
    "text files.\n"
    "--indices FILE: the entries to predict, as a tensor file tensorhost reads (FROSTT\n"
    ".tns, .tns.gz, sptensor text, the binary format): on each line the N coordinates\n"
    "(1-based in .tns) and a value. The value column is needed (a line of\n"
    "coordinates alone reads as one mode fewer); it is used only to report the RMSE\n"
    "of the predictions against it: where there are no true values, write any\n"
    "number, 0 say, and -q leaves the RMSE line out. The file must have the model's\n"
    "number of modes, and every coordinate must lie within the model's dims (an error\n"
    "names the line and the mode).\n"
    "--output OUT: the predictions as FROSTT .tns text (gzip-compressed when OUT ends\n"
    "in .gz): each entry's coordinates with the model's value in the value column,\n"
    "sorted by coordinates, an entry listed twice given once; written atomically (an\n"
    "error or Ctrl-C leaves no partial OUT), to standard output when OUT is absent or\n"
    "\"-\". OUT may not be FILE, nor a link to it.\n"
    "On stderr: \"tensorhost predict: RMSE R over K entries ...\" against FILE's values.\n\n"
    "Exit status: 0 done, 1 an error, 2 a bad command line, 130/143 interrupted.\n"
    "Example: tensorhost predict --model out --indices held-out.tns --output predicted.tns\n";

static int parse_command_line(int argc, char **argv, predict_request *request)
{
    g_auto(GStrv) operands = NULL;
    GOptionEntry entries[] = {
        {"model", 'm', 0, G_OPTION_ARG_FILENAME, &request->model_dir,
         "The model: the output folder of a run", "DIR"},
        {"indices", 'i', 0, G_OPTION_ARG_FILENAME, &request->indices_path,
         "The entries to predict: a tensor file (its values serve the RMSE only)", "FILE"},
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &request->output_path,
         "Where the predictions go, as .tns text (default: standard output)", "OUT"},
        {"quiet", 'q', 0, G_OPTION_ARG_NONE, &request->quiet,
         "Print errors only (no RMSE line)", NULL},
        {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &operands, NULL, NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_set_prgname("tensorhost predict");
    g_autoptr(GOptionContext) context =
        g_option_context_new("- the values a saved CP model gives to chosen entries");
    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(context, description);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(context, &argc, &argv, &error)) {
        fprintf(stderr, "tensorhost predict: %s (see --help)\n", error->message);
        return EXIT_USAGE;
    }
    if (operands != NULL && operands[0] != NULL) {
        fprintf(stderr, "tensorhost predict: unexpected argument '%s' (see --help)\n",
                operands[0]);
        return EXIT_USAGE;
    }
    if (request->model_dir == NULL || request->indices_path == NULL) {
        fprintf(stderr, "tensorhost predict: expected --model DIR and --indices FILE; %s "
                        "(see --help)\n",
                request->model_dir == NULL ? "--model is missing" : "--indices is missing");
        return EXIT_USAGE;
    }
    return 0;
}

/* Where the predictions go is checked before any reading, which may take
 * minutes. */
static gboolean check_output(const predict_request *request, GError **error)
{
    if (writes_to_stdout(request))
        return TRUE;
    return th_atomic_file_check_target(request->output_path, error) &&
           th_atomic_file_check_not_replacing(request->output_path, request->indices_path,
                                              "--output", "--indices",
                                              "writing the predictions", error);
}

/* The entries, each coordinate checked against the model's dims on its
 * line as the file is parsed. */
static th_sptensor *read_entries(const predict_request *request, const th_saved_model *model,
                                 GError **error)
{
    g_autofree char *owner = g_strdup_printf("the model in %s", request->model_dir);
    th_tensor_read_options options = {
        .bound_dims = model->dims,
        .bound_nmodes = model->nmodes,
        .bound_owner = owner,
    };
    if (th_progress_enabled())
        options.progress = th_console_read_progress;
    th_cancel_set_activity("now: the read is abandoned and nothing is written");
    th_sptensor *t = th_tensor_read_file(request->indices_path, &options, error);
    th_progress_clear();
    return t;
}

/* A file of another order than the model's, which the bounded read let
 * through for this message. */
static gboolean check_order(const th_sptensor *t, const th_saved_model *model,
                            const predict_request *request, GError **error)
{
    if (t->nmodes == model->nmodes)
        return TRUE;
    const char *ext = strcmp(model->format, "npy") == 0 ? ".npy" : ".mat";
    const char *hint =
        t->nmodes + 1u == model->nmodes
            ? "; a line of coordinates alone reads as one mode fewer: add a value column "
              "(any number: it serves only the RMSE)"
            : "";
    g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_ORDER,
                "%s: entries of %u modes (%u coordinates each), but the model in %s has %u "
                "(mode1%s to mode%u%s)%s",
                request->indices_path, t->nmodes, t->nmodes, request->model_dir,
                model->nmodes, ext, model->nmodes, ext, hint);
    return FALSE;
}

/* sqrt(mean((predicted - given)^2)), summed in the entries' order. */
static double rmse(const double *predicted, const double *given, uint64_t count)
{
    double sum = 0.0;
    for (uint64_t k = 0; k < count; ++k) {
        const double difference = predicted[k] - given[k];
        sum += difference * difference;
    }
    return count > 0 ? sqrt(sum / (double)count) : 0.0;
}

static void print_rmse(const predict_request *request, const th_sptensor *t,
                       const double *given)
{
    g_autofree char *merged =
        t->duplicates_merged > 0
            ? g_strdup_printf(" (%" G_GUINT64_FORMAT " repeated %s summed)",
                              t->duplicates_merged,
                              th_plural(t->duplicates_merged, "entry", "entries"))
            : g_strdup("");
    g_autofree char *path = th_escape_control(request->indices_path);
    fprintf(stderr,
            "tensorhost predict: RMSE %.6g over %" G_GUINT64_FORMAT " %s, against the values "
            "in %s%s\n",
            rmse(t->values, given, t->nnz), t->nnz, th_plural(t->nnz, "entry", "entries"),
            path, merged);
}

/* `t` turned into the predictions: the model's values in place of the
 * file's, which are returned, the model's dims in the header, and no label
 * (the file's would no longer describe it). */
static double *replace_values(th_sptensor *t, double *predicted, const th_saved_model *model)
{
    double *given = t->values;
    t->values = predicted;
    memcpy(t->dims, model->dims, sizeof(th_index) * model->nmodes);
    g_clear_pointer(&t->label, g_free);
    return given;
}

static gboolean write_predictions(const predict_request *request, const th_sptensor *t,
                                  const th_saved_model *model, GError **error)
{
    g_autofree char *dir = th_escape_control(request->model_dir);
    g_autofree char *comment = g_strdup_printf(
        "values: the predictions of the CP model in %s (rank %u, its %s files)", dir,
        model->rank, model->format);
    if (writes_to_stdout(request)) {
        th_cancel_set_activity("now: the predictions written so far stay incomplete");
        const gboolean ok = th_tensor_write_tns_to_fd(t, STDOUT_FILENO, "standard output",
                                                      comment, error);
        fflush(stdout);
        return ok;
    }
    th_cancel_set_activity("now: the output is abandoned and nothing is written");
    return th_tensor_write_tns_full(t, request->output_path, comment, error);
}

static int predict(const predict_request *request)
{
    g_autoptr(GError) error = NULL;
    th_cancel_install_handlers();
    if (!check_output(request, &error))
        return fail(g_steal_pointer(&error), request);
    g_autoptr(th_saved_model) model = th_saved_model_read(request->model_dir, &error);
    if (model == NULL)
        return fail(g_steal_pointer(&error), request);
    g_autoptr(th_sptensor) t = read_entries(request, model, &error);
    if (t == NULL || !check_order(t, model, request, &error))
        return fail(g_steal_pointer(&error), request);
    if (th_cancel_requested()) {
        fprintf(stderr, "tensorhost: interrupted after the read; nothing was written\n");
        return th_cancel_exit_status();
    }
    double *predicted = g_new(double, MAX(t->nnz, 1u));
    th_cp_predict(model->lambda, (const double *const *)model->factors, model->nmodes,
                  model->rank, t->indices, t->nnz, predicted);
    g_autofree double *given = replace_values(t, predicted, model);
    if (!write_predictions(request, t, model, &error))
        return fail(g_steal_pointer(&error), request);
    if (!request->quiet)
        print_rmse(request, t, given);
    return th_cancel_requested() ? th_cancel_exit_status() : 0;
}

int th_predict_main(int argc, char **argv)
{
    predict_request request = {0};
    int status = parse_command_line(argc, argv, &request);
    if (status == 0)
        status = predict(&request);
    predict_request_clear(&request);
    return status;
}
