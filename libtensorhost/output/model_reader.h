/* A CP model read back from the files a run wrote into its output folder
 * (factor_io.h): mode1 ... modeN and lambda, as .npy or as text, for
 * whatever is done with a model after its run (predicting entries,
 * cp_predict.h). */
#ifndef TH_MODEL_READER_H
#define TH_MODEL_READER_H

#include <glib.h>
#include <stdint.h>

#include "tensor/sptensor.h"

typedef struct th_saved_model {
    uint32_t nmodes;
    uint32_t rank;
    th_index *dims;   /* [nmodes]: each factor's row count */
    double *lambda;   /* [rank] */
    double **factors; /* [nmodes] arrays of dims[m] x rank, row-major */
    const char *format; /* the files read: "npy" or "text" */
} th_saved_model;

/* Reads the model in `dir`: its .npy files when mode1.npy is there (they
 * hold every bit of the doubles and load at the disk's speed), else its
 * .mat text files; the one format throughout. The modes are mode1 up to
 * the highest modeN of that format, every one of them present, at least
 * 2; each a 2-D array of finite numbers with the same column count, the
 * rank; lambda that many finite numbers (a 1-D array, or one column).
 * Anything else is an error naming the file and what was expected
 * (G_FILE_ERROR, or the .npy reader's TH_TENSOR_READER_ERROR for a file
 * that is not one it reads). th_saved_model_free the result. */
th_saved_model *th_saved_model_read(const char *dir, GError **error);
void th_saved_model_free(th_saved_model *model);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(th_saved_model, th_saved_model_free)

#endif
