/* The model files a run writes (factor_io.c) read back: the format chosen
 * once for the folder, the modes counted from the names in it, and every
 * file checked against the first before the model is handed out, so that
 * a stale or foreign file is named rather than half used. */
#include "output/model_reader.h"

#include <math.h>
#include <string.h>

#include "base/message_text.h"
#include "output/factor_io.h"
#include "output/npy_io.h"

typedef struct model_format {
    const char *name;      /* th_saved_model.format */
    const char *extension; /* of every file of the model */
} model_format;

static const model_format npy_format = {"npy", ".npy"};
static const model_format text_format = {"text", ".mat"};

void th_saved_model_free(th_saved_model *model)
{
    if (model == NULL)
        return;
    for (uint32_t m = 0; model->factors != NULL && m < model->nmodes; ++m)
        g_free(model->factors[m]);
    g_free(model->factors);
    g_free(model->lambda);
    g_free(model->dims);
    g_free(model);
}

static char *model_file_path(const char *dir, const char *stem, const model_format *format)
{
    g_autofree char *name = g_strconcat(stem, format->extension, NULL);
    return g_build_filename(dir, name, NULL);
}

static char *mode_file_path(const char *dir, uint64_t mode, const model_format *format)
{
    g_autofree char *stem = g_strdup_printf("mode%" G_GUINT64_FORMAT, mode);
    return model_file_path(dir, stem, format);
}

/* Whether `name` is "modeN" and the format's extension, N a positive
 * number written as a run writes it (no leading zero); *mode = N. */
static gboolean parse_mode_file_name(const char *name, const model_format *format,
                                     uint64_t *mode)
{
    const size_t prefix = strlen("mode"), suffix = strlen(format->extension);
    const size_t length = strlen(name);
    if (length <= prefix + suffix || strncmp(name, "mode", prefix) != 0 ||
        !g_str_has_suffix(name, format->extension))
        return FALSE;
    const char *digits = name + prefix;
    const size_t count = length - prefix - suffix;
    /* Nine digits are far beyond TH_MAX_MODES and cannot overflow. */
    if (count > 9 || digits[0] == '0')
        return FALSE;
    uint64_t value = 0;
    for (size_t i = 0; i < count; ++i) {
        if (!g_ascii_isdigit(digits[i]))
            return FALSE;
        value = value * 10u + (uint64_t)(digits[i] - '0');
    }
    *mode = value;
    return TRUE;
}

/* The highest N of the files modeN in `dir` (0 when none). */
static gboolean find_highest_mode(const char *dir, const model_format *format,
                                  uint64_t *highest, GError **error)
{
    g_autoptr(GError) open_error = NULL;
    g_autoptr(GDir) folder = g_dir_open(dir, 0, &open_error);
    if (folder == NULL) {
        g_set_error(error, G_FILE_ERROR, open_error->code, "%s: cannot list the folder: %s",
                    dir, open_error->message);
        return FALSE;
    }
    *highest = 0;
    for (const char *name; (name = g_dir_read_name(folder)) != NULL;) {
        uint64_t mode = 0;
        if (parse_mode_file_name(name, format, &mode))
            *highest = MAX(*highest, mode);
    }
    return TRUE;
}

/* The folder's format: .npy when mode1.npy is there, else text when
 * mode1.mat is; NULL (the error set) when neither is. */
static const model_format *choose_format(const char *dir, GError **error)
{
    if (!g_file_test(dir, G_FILE_TEST_EXISTS)) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOENT, "%s: no such folder", dir);
        return NULL;
    }
    if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOTDIR,
                    "%s: not a folder (a model is the folder of files a run wrote, its "
                    "output.dir)",
                    dir);
        return NULL;
    }
    const model_format *formats[] = {&npy_format, &text_format};
    for (size_t f = 0; f < G_N_ELEMENTS(formats); ++f) {
        g_autofree char *first = mode_file_path(dir, 1, formats[f]);
        if (g_file_test(first, G_FILE_TEST_EXISTS))
            return formats[f];
    }
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOENT,
                "%s: neither mode1.npy nor mode1.mat is there: expected the files of a CP "
                "model as a run writes them (mode1 ... modeN and lambda, .npy or .mat)",
                dir);
    return NULL;
}

/* The number of modes: mode1 to the highest modeN, each present. */
static gboolean count_modes(const char *dir, const model_format *format, uint32_t *nmodes,
                            GError **error)
{
    uint64_t highest = 0;
    if (!find_highest_mode(dir, format, &highest, error))
        return FALSE;
    if (highest > TH_MAX_MODES) {
        g_autofree char *path = mode_file_path(dir, highest, format);
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "%s: a model of %" G_GUINT64_FORMAT " modes; tensorhost supports at most %u",
                    path, highest, TH_MAX_MODES);
        return FALSE;
    }
    if (highest < 2) {
        g_autofree char *second = mode_file_path(dir, 2, format);
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOENT,
                    "%s is missing: a model has a factor file for each of its modes, at least "
                    "2 (mode1%s, mode2%s, ...)",
                    second, format->extension, format->extension);
        return FALSE;
    }
    for (uint64_t mode = 1; mode <= highest; ++mode) {
        g_autofree char *path = mode_file_path(dir, mode, format);
        if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
            g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOENT,
                        "%s is missing: expected one factor file per mode, mode1%s to "
                        "mode%" G_GUINT64_FORMAT "%s",
                        path, format->extension, highest, format->extension);
            return FALSE;
        }
    }
    *nmodes = (uint32_t)highest;
    return TRUE;
}

static double *read_values(const char *path, const model_format *format, uint64_t *rows,
                           uint32_t *cols, GError **error)
{
    if (format == &npy_format)
        return th_read_npy(path, rows, cols, error);
    return th_read_matrix(path, rows, cols, error);
}

/* The first value of `values` (rows x MAX(cols, 1)) that is not finite,
 * named by its 1-based place; TRUE when there is none. */
static gboolean check_finite(const char *path, const double *values, uint64_t rows,
                             uint32_t cols, GError **error)
{
    const uint64_t width = MAX(cols, 1u);
    for (uint64_t k = 0; k < rows * width; ++k) {
        if (isfinite(values[k]))
            continue;
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "%s: row %" G_GUINT64_FORMAT ", column %" G_GUINT64_FORMAT
                    " (1-based) is %g: expected a finite number",
                    path, k / width + 1u, k % width + 1u, values[k]);
        return FALSE;
    }
    return TRUE;
}

/* Factor `mode` (0-based), a 2-D array of finite numbers with `*rank`
 * columns (set from mode 0's). */
static double *read_factor(const char *dir, const model_format *format, uint32_t mode,
                           uint32_t *rank, th_index *dim, GError **error)
{
    g_autofree char *path = mode_file_path(dir, (uint64_t)mode + 1u, format);
    uint64_t rows = 0;
    uint32_t cols = 0;
    g_autofree double *values = read_values(path, format, &rows, &cols, error);
    if (values == NULL)
        return NULL;
    if (rows == 0 || cols == 0) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "%s: %s: expected a factor matrix, one row per index of mode %u and one "
                    "column per component",
                    path, rows == 0 ? "no values" : "a 1-D array", mode + 1u);
        return NULL;
    }
    if (mode > 0 && cols != *rank) {
        g_autofree char *first = mode_file_path(dir, 1, format);
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "%s: %u %s, expected %u (the rank: %s has %u)", path, cols,
                    th_plural(cols, "column", "columns"), *rank, first, *rank);
        return NULL;
    }
    if (rows > UINT32_MAX) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "%s: %" G_GUINT64_FORMAT " rows, more than the %u indices a mode can have",
                    path, rows, UINT32_MAX);
        return NULL;
    }
    if (!check_finite(path, values, rows, cols, error))
        return NULL;
    *rank = cols;
    *dim = (th_index)rows;
    return g_steal_pointer(&values);
}

/* lambda: `rank` finite numbers, a 1-D array or one column. */
static double *read_lambda(const char *dir, const model_format *format, uint32_t rank,
                           GError **error)
{
    g_autofree char *path = model_file_path(dir, "lambda", format);
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOENT,
                    "%s is missing: expected the model's %u %s beside its factors", path, rank,
                    th_plural(rank, "weight", "weights"));
        return NULL;
    }
    uint64_t rows = 0;
    uint32_t cols = 0;
    g_autofree double *values = read_values(path, format, &rows, &cols, error);
    if (values == NULL)
        return NULL;
    if (cols > 1 || rows != rank) {
        g_autofree char *first = mode_file_path(dir, 1, format);
        g_autofree char *found =
            cols > 1 ? g_strdup_printf("a %" G_GUINT64_FORMAT " x %u array", rows, cols)
                     : g_strdup_printf("%" G_GUINT64_FORMAT " %s", rows,
                                       th_plural(rows, "weight", "weights"));
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "%s: %s, expected %u %s, one per component (the rank: %s has %u "
                    "columns), as a 1-D array or one column",
                    path, found, rank, th_plural(rank, "weight", "weights"), first, rank);
        return NULL;
    }
    if (!check_finite(path, values, rows, 1, error))
        return NULL;
    return g_steal_pointer(&values);
}

th_saved_model *th_saved_model_read(const char *dir, GError **error)
{
    g_return_val_if_fail(dir != NULL, NULL);
    const model_format *format = choose_format(dir, error);
    uint32_t nmodes = 0;
    if (format == NULL || !count_modes(dir, format, &nmodes, error))
        return NULL;
    g_autoptr(th_saved_model) model = g_new0(th_saved_model, 1);
    model->nmodes = nmodes;
    model->format = format->name;
    model->dims = g_new0(th_index, nmodes);
    model->factors = g_new0(double *, nmodes);
    for (uint32_t m = 0; m < nmodes; ++m) {
        model->factors[m] = read_factor(dir, format, m, &model->rank, &model->dims[m], error);
        if (model->factors[m] == NULL)
            return NULL;
    }
    model->lambda = read_lambda(dir, format, model->rank, error);
    if (model->lambda == NULL)
        return NULL;
    return g_steal_pointer(&model);
}
