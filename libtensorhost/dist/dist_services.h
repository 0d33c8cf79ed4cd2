/* The plugin ABI's process services (th_host_services.processes,
 * broadcast, reduce_max; ABI 1.8) over the run's MPI, so that a backend can
 * set up its devices' own exchange across the processes (NCCL's unique id
 * from rank 0, an agreement on whether every process can take part). */
#ifndef TH_DIST_SERVICES_H
#define TH_DIST_SERVICES_H

#include <tensorhost/plugin.h>

/* Sets services' process functions to those of th_dist_current() when a
 * run of several processes has started; leaves them (one process's)
 * otherwise. The functions read th_dist_current() when called. */
void th_dist_host_services(th_host_services *services);

#endif
