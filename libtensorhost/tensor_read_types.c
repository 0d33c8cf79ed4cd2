/* The error domain of tensor files (tensor_read_types.h). */
#include "tensor_read_types.h"

G_DEFINE_QUARK(th-tensor-reader-error-quark, th_tensor_reader_error)
