/* report.json: what a run read, ran on, computed and how long it took,
 * written with json-glib, as the index of the run's output set. */
#ifndef TH_REPORT_H
#define TH_REPORT_H

#include <glib.h>
#include <json-glib/json-glib.h>
#include "plugin/backend.h"
#include "config/config.h"
#include "cpd/cp_als.h"
#include "base/output_set.h"
#include "tensor/sptensor.h"
#include "tensor/tensor_facts.h"

/* One process of a distributed run, as report.json's "processes" lists
 * it. Plain data of a fixed size, gathered from every process to rank 0. */
typedef struct th_process_record {
    uint32_t rank;
    char host[64];
    char gpus[64]; /* the CUDA_VISIBLE_DEVICES it was given, "" for none */
    uint64_t first_nonzero, nnz; /* its share of the file's nonzeros */
    double read_seconds, preprocess_seconds;
    double mttkrp_seconds; /* its MTTKRPs, summed over modes and iterations */
    double cpd_seconds;
    /* Its time in collectives (waiting for the others included), their
     * number and the bytes it sent (th_dist_traffic). */
    double collective_seconds;
    uint64_t collective_calls, collective_bytes;
} th_process_record;

/* A distributed run: its processes, in rank order. */
typedef struct th_run_processes {
    uint32_t count;
    const char *mpi_library; /* MPI's version line */
    /* How each mode's MTTKRP is made whole across them: "owned_rows" (each
     * process's owned rows gathered on the host), "host_sums" (partial
     * results summed on the host), "backend_sums" (the backend sums them
     * itself) or "backend_owned_rows" (the backend gathers the owned rows
     * itself, with each process's share of the update). */
    const char *exchange;
    const th_process_record *records; /* [count] */
} th_run_processes;

typedef struct th_run_summary {
    const th_config *config;
    const th_tensor_facts *tensor; /* the whole tensor's, over every process */
    double read_seconds;
    const th_backend_facts *backend; /* taken after the run */
    const th_cpd_result *result;  /* may be NULL if the run failed before CP-ALS */
    gboolean factors_written;
    double write_seconds; /* the factor files (report.json is written after them) */
    double total_seconds;
    const th_run_processes *processes; /* NULL: one process */
} th_run_summary;

/* "converged", "max_iters" or "interrupted". */
const char *th_run_status(const th_cpd_result *result);

/* Tensor facts: path, order, dims, nnz, density, norm, duplicates, empty slices. */
JsonNode *th_report_tensor_node(const th_tensor_facts *tensor, const char *path);
/* The resolved config: "file" (absolute) and every key with its TOML type
 * (th_config_foreach), non-finite numbers as null. */
JsonNode *th_report_config_node(const th_config *config);
/* Backend facts: id, name, version, path, device, memory, per-mode schemes. */
JsonNode *th_report_backend_node(const th_backend_facts *facts);
/* The facts report.json and a comparison's results.json both give of a
 * loaded backend, as members of the object being built: "device",
 * "details", "preprocess_seconds" (null when not measured) and
 * "memory_bytes" {tensor, factors, workspace}. `facts` NULL (a backend that
 * never loaded): "", "", null and zeros. */
void th_report_add_backend_facts(JsonBuilder *b, const th_backend_facts *facts);

/* The "constraints" member of a least-squares run (report.json's cpd and a
 * comparison's results.json): "none" or "nonneg" when each of the `nmodes`
 * modes has the same, else an array of them, one per mode (bit m of
 * nonneg_modes: mode m nonnegative; bits past nmodes are ignored). */
void th_report_add_constraints(JsonBuilder *b, uint64_t nonneg_modes, uint32_t nmodes);

/* "l2": the ridge, and "l1": one number when every one of the `nmodes`
 * modes has the same, else an array, one per mode (a least-squares run's
 * regularisation, as cpd.constraints is reported). */
void th_report_add_regularisation(JsonBuilder *b, double l2, const double *l1, uint32_t nmodes);

/* "hals": the coordinate-descent updates' bound and budget on their passes
 * (cpd.hals_passes, cpd.hals_budget; a budget that is not finite is null)
 * and, where `passes` is not NULL, "passes": the most each of the `nmodes`
 * modes' updates made (0: a mode solved exactly). report.json's cpd and a
 * comparison's results.json (which lists no passes: they depend on each
 * tensor's shape). */
void th_report_add_hals(JsonBuilder *b, uint32_t max_passes, double budget,
                        const uint32_t *passes, uint32_t nmodes);

/* The "completion" member of a completion run (report.json's cpd and a
 * comparison's results.json): the entries observed, trained on and held
 * out, l2, the published iteration and its objective and RMSEs, and the
 * row solves that were singular or had no entry. */
void th_report_add_completion(JsonBuilder *b, const th_cpd_result *result);

/* report.json, written as a finished file of `set` (output_set.h: the
 * set's index, installed last); a th_cancel_abort_requested() (a second
 * Ctrl-C while outputs are written) writes nothing, with a
 * G_IO_ERROR_CANCELLED error naming it. */
gboolean th_report_stage(th_output_set *set, const th_run_summary *summary, GError **error);

#endif
