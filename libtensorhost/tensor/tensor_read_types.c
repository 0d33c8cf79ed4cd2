/* The error domain of tensor files and what the readers share (tensor_read_types.h). */
#include "tensor/tensor_read_types.h"

#include <math.h>

G_DEFINE_QUARK(th-tensor-reader-error-quark, th_tensor_reader_error)

const char *th_tensor_read_nonnegative_reason(const th_tensor_read_options *options)
{
    if (options == NULL || !options->require_nonnegative)
        return NULL;
    return options->nonnegative_reason != NULL ? options->nonnegative_reason
                                               : "values must be >= 0";
}

gboolean th_tensor_read_bounded(const th_tensor_read_options *options, uint32_t nmodes)
{
    return options != NULL && options->bound_dims != NULL && options->bound_nmodes == nmodes;
}

const char *th_tensor_read_bound_owner(const th_tensor_read_options *options)
{
    return options != NULL && options->bound_owner != NULL ? options->bound_owner
                                                           : "the given bound";
}

gboolean th_tensor_read_merge(th_sptensor *t, const char *name, GError **error)
{
    if (th_sptensor_sort_and_merge(t))
        return TRUE;
    uint64_t k = 0;
    while (k < t->nnz && isfinite(t->values[k]))
        ++k;
    g_autoptr(GString) coordinates = g_string_new(NULL);
    for (uint32_t m = 0; k < t->nnz && m < t->nmodes; ++m)
        g_string_append_printf(coordinates, "%s%" G_GUINT64_FORMAT, m ? " " : "",
                               (uint64_t)t->indices[m][k] + 1);
    g_set_error(error, TH_TENSOR_READER_ERROR, TH_TENSOR_READER_ERROR_VALUE,
                "%s: the values given for coordinates %s (1-based) sum to a number beyond "
                "the range of a double; the tensor's repeated entries are added together",
                name, coordinates->str);
    return FALSE;
}
