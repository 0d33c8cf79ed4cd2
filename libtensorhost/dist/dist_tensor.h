/* A tensor read for a run of several processes: each reads its share of
 * the binary tensor file by offset (th_tensor_binary_read_share), so no
 * process holds the whole tensor, and together they check the file's
 * checksums (each hashes the checksum blocks that start in its share; rank
 * 0 checks the joined hashes). */
#ifndef TH_DIST_TENSOR_H
#define TH_DIST_TENSOR_H

#include <glib.h>

#include "dist/dist.h"
#include "tensor/sptensor.h"
#include "tensor/tensor_facts.h"
#include "tensor/tensor_read_types.h"

/* Where this process's share lies in the file. */
typedef struct th_dist_share_info {
    uint64_t nnz_total; /* the file's nonzeros */
    uint64_t first;     /* this process's first one */
} th_dist_share_info;

/* Called by every process. With `dist` NULL: th_tensor_read_file, the
 * whole file in any format. Else this process's share (nnz / size
 * consecutive nonzeros, the first nnz mod size ranks one more) of a binary tensor; a
 * text file is refused (TH_TENSOR_READER_ERROR_NOT_BINARY, saying how to
 * convert it), as is a binary file of version 1 or not flagged sorted,
 * and one with fewer nonzeros than processes (TH_TENSOR_READER_ERROR_EMPTY:
 * a backend loads one nonzero at least).
 * NULL on every process when any failed (th_dist_agree: the process whose
 * error it is keeps it). */
th_sptensor *th_dist_read_tensor(th_dist *dist, const char *path,
                                 const th_tensor_read_options *options,
                                 th_dist_share_info *info, GError **error);

/* The whole tensor's facts (tensor_facts.h) from every process's share,
 * computed together (called by every process); th_tensor_facts_of with
 * `dist` NULL. */
gboolean th_dist_tensor_facts(th_dist *dist, const th_sptensor *share, th_tensor_facts *facts,
                              GError **error);

#endif
