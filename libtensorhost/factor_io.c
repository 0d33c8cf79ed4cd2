#include "factor_io.h"

#include <stdio.h>
#include <string.h>


#include "atomic_file.h"
#include "npy_io.h"

gboolean th_write_matrix(const char *path, const double *data, uint64_t rows, uint32_t cols,
                         GError **error)
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

double *th_read_matrix(const char *path, uint64_t *rows, uint32_t *cols, GError **error)
{
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, error))
        return NULL;
    g_autoptr(GArray) values = g_array_new(FALSE, FALSE, sizeof(double));
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    uint64_t nrows = 0;
    uint32_t ncols = 0;
    for (guint li = 0; lines[li]; ++li) {
        g_auto(GStrv) fields = g_strsplit_set(g_strstrip(lines[li]), " \t", -1);
        uint32_t count = 0;
        for (guint f = 0; fields[f]; ++f) {
            if (!*fields[f])
                continue;
            char *end = NULL;
            double v = g_ascii_strtod(fields[f], &end);
            if (*end) {
                g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                            "%s:%u: expected a number, found '%s'", path, li + 1, fields[f]);
                return NULL;
            }
            g_array_append_val(values, v);
            ++count;
        }
        if (count == 0)
            continue;
        if (nrows > 0 && count != ncols) {
            g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                        "%s:%u: expected %u columns, found %u", path, li + 1, ncols, count);
            return NULL;
        }
        ncols = count;
        ++nrows;
    }
    *rows = nrows;
    *cols = ncols;
    return (double *)g_array_free(g_steal_pointer(&values), FALSE);
}

unsigned th_factor_format_from_name(const char *name)
{
    if (name == NULL || strcmp(name, "text") == 0) /* NULL: a config not from the loader */
        return TH_FACTORS_TEXT;
    if (g_strcmp0(name, "npy") == 0)
        return TH_FACTORS_NPY;
    if (g_strcmp0(name, "both") == 0)
        return TH_FACTORS_TEXT | TH_FACTORS_NPY;
    return 0;
}

/* One matrix (cols > 0) or vector (cols == 0) in each format asked for. */
static gboolean write_one(const char *dir, const char *stem, const double *data, uint64_t rows,
                          uint32_t cols, unsigned formats, GError **error)
{
    if (formats & TH_FACTORS_TEXT) {
        g_autofree char *name = g_strconcat(stem, ".mat", NULL);
        g_autofree char *path = g_build_filename(dir, name, NULL);
        if (!th_write_matrix(path, data, rows, cols ? cols : 1, error))
            return FALSE;
    }
    if (formats & TH_FACTORS_NPY) {
        g_autofree char *name = g_strconcat(stem, ".npy", NULL);
        g_autofree char *path = g_build_filename(dir, name, NULL);
        if (!th_write_npy(path, data, rows, cols, error))
            return FALSE;
    }
    return TRUE;
}

gboolean th_write_cpd_factors(const char *dir, const th_cpd_result *result, unsigned formats,
                              GError **error)
{
    for (uint32_t m = 0; m < result->nmodes; ++m) {
        g_autofree char *stem = g_strdup_printf("mode%u", m + 1);
        if (!write_one(dir, stem, result->factors[m], result->dims[m], result->rank, formats,
                       error))
            return FALSE;
    }
    return write_one(dir, "lambda", result->lambda, result->rank, 0, formats, error);
}
