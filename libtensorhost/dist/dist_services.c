#include "dist/dist_services.h"

#include "dist/dist.h"

#include <glib.h>

static uint32_t services_processes(void *host_data, uint32_t *rank)
{
    (void)host_data;
    th_dist *dist = th_dist_current();
    *rank = th_dist_rank(dist);
    return th_dist_size(dist);
}

/* A failed collective as the ABI's status and message. */
static th_status failed(GError *error, char *err)
{
    g_strlcpy(err, error->message, TH_ERROR_SIZE);
    g_error_free(error);
    return TH_ERR_INTERNAL;
}

static th_status services_broadcast(void *host_data, void *data, uint64_t bytes, char *err)
{
    (void)host_data;
    GError *error = NULL;
    return th_dist_broadcast(th_dist_current(), data, bytes, &error) ? TH_OK
                                                                      : failed(error, err);
}

static th_status services_reduce_max(void *host_data, uint64_t *values, uint64_t n, char *err)
{
    (void)host_data;
    GError *error = NULL;
    /* Unsigned maximum: MPI's MAX over MPI_UINT64_T. */
    return th_dist_max_u64(th_dist_current(), values, n, &error) ? TH_OK
                                                                  : failed(error, err);
}

void th_dist_host_services(th_host_services *services)
{
    if (th_dist_current() == NULL)
        return;
    services->processes = services_processes;
    services->broadcast = services_broadcast;
    services->reduce_max = services_reduce_max;
}
