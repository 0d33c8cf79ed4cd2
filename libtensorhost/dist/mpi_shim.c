/* The MPI shim (mpi_shim.h): the table over one implementation's mpi.h,
 * built once per implementation as its own shared object. */
#include "dist/mpi_shim.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

static MPI_Datatype datatype(th_mpi_type type)
{
    switch (type) {
    case TH_MPI_UINT64:
        return MPI_UINT64_T;
    case TH_MPI_INT32:
        return MPI_INT32_T;
    default:
        return MPI_DOUBLE;
    }
}

static MPI_Op operation(th_mpi_op op)
{
    switch (op) {
    case TH_MPI_MAX:
        return MPI_MAX;
    case TH_MPI_MIN:
        return MPI_MIN;
    case TH_MPI_BOR:
        return MPI_BOR;
    default:
        return MPI_SUM;
    }
}

static int shim_init(void)
{
    int initialised = 0;
    int code = MPI_Initialized(&initialised);
    if (code == MPI_SUCCESS && !initialised) {
        int provided = 0;
        code = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    }
    if (code == MPI_SUCCESS)
        code = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    return code;
}

static int shim_finalize(void)
{
    int finalised = 0;
    int code = MPI_Finalized(&finalised);
    return code == MPI_SUCCESS && !finalised ? MPI_Finalize() : code;
}

static int shim_rank(int *rank) { return MPI_Comm_rank(MPI_COMM_WORLD, rank); }

static int shim_size(int *size) { return MPI_Comm_size(MPI_COMM_WORLD, size); }

static int shim_allreduce(void *buffer, int count, th_mpi_type type, th_mpi_op op)
{
    return MPI_Allreduce(MPI_IN_PLACE, buffer, count, datatype(type), operation(op),
                         MPI_COMM_WORLD);
}

static int shim_gather(const void *sent, int bytes, void *received, int root)
{
    return MPI_Gather(sent, bytes, MPI_BYTE, received, bytes, MPI_BYTE, root, MPI_COMM_WORLD);
}

static int shim_broadcast(void *buffer, int bytes, int root)
{
    return MPI_Bcast(buffer, bytes, MPI_BYTE, root, MPI_COMM_WORLD);
}

static int shim_alltoallv(const void *sent, const int *send_bytes, const int *send_offsets,
                          void *received, const int *recv_bytes, const int *recv_offsets)
{
    return MPI_Alltoallv(sent, send_bytes, send_offsets, MPI_BYTE, received, recv_bytes,
                         recv_offsets, MPI_BYTE, MPI_COMM_WORLD);
}

static int shim_alltoallv_units(const void *sent, const int *send_counts,
                                const int *send_offsets, void *received, const int *recv_counts,
                                const int *recv_offsets, int unit)
{
    MPI_Datatype record;
    int code = MPI_Type_contiguous(unit, MPI_BYTE, &record);
    if (code != MPI_SUCCESS)
        return code;
    code = MPI_Type_commit(&record);
    if (code == MPI_SUCCESS)
        code = MPI_Alltoallv(sent, send_counts, send_offsets, record, received, recv_counts,
                             recv_offsets, record, MPI_COMM_WORLD);
    const int freed = MPI_Type_free(&record);
    return code != MPI_SUCCESS ? code : freed;
}

static int shim_exscan(void *buffer, int count, th_mpi_type type, th_mpi_op op)
{
    return MPI_Exscan(MPI_IN_PLACE, buffer, count, datatype(type), operation(op),
                      MPI_COMM_WORLD);
}

static int shim_allgatherv(const double *sent, int count, double *received, const int *counts,
                           const int *offsets)
{
    return MPI_Allgatherv(sent ? (const void *)sent : MPI_IN_PLACE, count, MPI_DOUBLE, received,
                          counts, offsets, MPI_DOUBLE, MPI_COMM_WORLD);
}

static int shim_abort(int status) { return MPI_Abort(MPI_COMM_WORLD, status); }

static void shim_error_string(int code, char *text, int capacity)
{
    char message[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, message, &length) != MPI_SUCCESS)
        snprintf(message, sizeof message, "MPI error %d", code);
    snprintf(text, (size_t)capacity, "%s", message);
}

static void shim_library_version(char *text, int capacity)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    if (MPI_Get_library_version(version, &length) != MPI_SUCCESS)
        version[0] = '\0';
    version[strcspn(version, "\r\n")] = '\0';
    snprintf(text, (size_t)capacity, "%s", version);
}

static void shim_processor_name(char *text, int capacity)
{
    char name[MPI_MAX_PROCESSOR_NAME];
    int length = 0;
    if (MPI_Get_processor_name(name, &length) != MPI_SUCCESS)
        name[0] = '\0';
    snprintf(text, (size_t)capacity, "%s", name);
}

static int shim_local_size(int *size, int *rank)
{
    MPI_Comm local;
    int code = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    if (code != MPI_SUCCESS)
        return code;
    code = MPI_Comm_size(local, size);
    if (code == MPI_SUCCESS)
        code = MPI_Comm_rank(local, rank);
    const int freed = MPI_Comm_free(&local);
    return code != MPI_SUCCESS ? code : freed;
}

#ifndef TH_MPI_IMPLEMENTATION
#error "TH_MPI_IMPLEMENTATION names the implementation the shim is built against"
#endif

__attribute__((visibility("default"))) const th_mpi_shim *th_mpi_shim_table(void);

const th_mpi_shim *th_mpi_shim_table(void)
{
    static const th_mpi_shim table = {
        .version = TH_MPI_SHIM_VERSION,
        .struct_size = sizeof(th_mpi_shim),
        .implementation = TH_MPI_IMPLEMENTATION,
        .init = shim_init,
        .finalize = shim_finalize,
        .rank = shim_rank,
        .size = shim_size,
        .allreduce = shim_allreduce,
        .gather = shim_gather,
        .abort = shim_abort,
        .error_string = shim_error_string,
        .library_version = shim_library_version,
        .processor_name = shim_processor_name,
        .local_size = shim_local_size,
        .broadcast = shim_broadcast,
        .alltoallv = shim_alltoallv,
        .exscan = shim_exscan,
        .allgatherv = shim_allgatherv,
        .alltoallv_units = shim_alltoallv_units,
    };
    return &table;
}
