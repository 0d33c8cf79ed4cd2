/* The table between the library and an MPI implementation. MPI's handles
 * differ between implementations (Open MPI's are pointers to its globals,
 * MPICH's are integers), so the library is built against neither: a shim,
 * mpi_shim.c compiled against one implementation's mpi.h and linked to its
 * libmpi, is loaded at run time (dist.c) and hands over this table of plain
 * C functions. One shim is built per implementation found at build time
 * (libtensorhost-mpi-openmpi.so, libtensorhost-mpi-mpich.so).
 *
 * Every function returns an MPI error code (0 = MPI_SUCCESS) that
 * error_string turns into text; communication is over MPI_COMM_WORLD,
 * whose error handler the shim sets to MPI_ERRORS_RETURN so that a failed
 * call comes back as a code. Counts are ints, as MPI's: dist.c cuts longer
 * buffers. Called from one thread (MPI_THREAD_FUNNELED). */
#ifndef TH_MPI_SHIM_H
#define TH_MPI_SHIM_H

#include <stdint.h>

/* The shim's one exported symbol: `const th_mpi_shim *th_mpi_shim_table(void)`. */
#define TH_MPI_SHIM_SYMBOL "th_mpi_shim_table"
/* Bumped when a member changes meaning or goes; members are otherwise only
 * appended. */
#define TH_MPI_SHIM_VERSION 2u

typedef enum { TH_MPI_DOUBLE = 0, TH_MPI_UINT64 = 1, TH_MPI_INT32 = 2 } th_mpi_type;
typedef enum { TH_MPI_SUM = 0, TH_MPI_MAX = 1, TH_MPI_MIN = 2, TH_MPI_BOR = 3 } th_mpi_op;

typedef struct th_mpi_shim {
    uint32_t version;     /* TH_MPI_SHIM_VERSION */
    uint32_t struct_size; /* sizeof(th_mpi_shim) of the shim's build */
    const char *implementation; /* "Open MPI" or "MPICH": what the shim was built against */
    /* MPI_Init_thread(FUNNELED) unless MPI is initialised already. */
    int (*init)(void);
    int (*finalize)(void);
    int (*rank)(int *rank);
    int (*size)(int *size);
    /* In place (MPI_IN_PLACE) over every process. */
    int (*allreduce)(void *buffer, int count, th_mpi_type type, th_mpi_op op);
    /* `bytes` from every process into root's `received` (size * bytes). */
    int (*gather)(const void *sent, int bytes, void *received, int root);
    /* Ends every process of the job with `status`; does not return on success. */
    int (*abort)(int status);
    /* Text into `text` (at least 1024 bytes, MPI_MAX_ERROR_STRING's bound). */
    void (*error_string)(int code, char *text, int capacity);
    /* MPI_Get_library_version's first line and MPI_Get_processor_name. */
    void (*library_version)(char *text, int capacity);
    void (*processor_name)(char *text, int capacity);
    /* The processes on this process's host, itself included, and its
     * rank among them (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED). */
    int (*local_size)(int *size, int *rank);
    /* `bytes` from root's `buffer` into every process's. */
    int (*broadcast)(void *buffer, int bytes, int root);
    /* MPI_Alltoallv of bytes: send_bytes[p] bytes from sent + send_offsets[p]
     * to process p, recv_bytes[p] bytes from process p into received +
     * recv_offsets[p]. */
    int (*alltoallv)(const void *sent, const int *send_bytes, const int *send_offsets,
                     void *received, const int *recv_bytes, const int *recv_offsets);
    /* MPI_Exscan in place: each process's values become `op` over the
     * processes of lower rank; rank 0's are left undefined. */
    int (*exscan)(void *buffer, int count, th_mpi_type type, th_mpi_op op);
    /* MPI_Allgatherv of doubles: `count` from every process's `sent` into
     * every process's received + offsets[p] (counts[p] from process p);
     * `sent` NULL: in place (MPI_IN_PLACE, each process's block already
     * at its offset in `received`). */
    int (*allgatherv)(const double *sent, int count, double *received, const int *counts,
                      const int *offsets);
    /* alltoallv in units of `unit` bytes (a contiguous datatype): counts
     * and offsets count units, so that records pass MPI's int counts in
     * one call up to 2^31 records a process, where bytes go in rounds. */
    int (*alltoallv_units)(const void *sent, const int *send_counts, const int *send_offsets,
                           void *received, const int *recv_counts, const int *recv_offsets,
                           int unit);
} th_mpi_shim;

#endif
