/* What a comparison measured: the result types the runner (compare.c)
 * fills and the outputs (compare_output.c, charts.c) read, and the
 * statistics both use. Plain data: nothing here calls a backend. */
#ifndef TH_COMPARE_RESULT_H
#define TH_COMPARE_RESULT_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin/backend.h"
#include "config/config.h"
#include "cpd/cp_als.h"
#include "tensor/sptensor.h"

/* Seconds; all three negative when not measured (e.g. a backend without its
 * own timer). */
typedef struct th_compare_stat {
    double median, min, max;
} th_compare_stat;

typedef enum {
    TH_COMPARE_OK,       /* verified and timed */
    TH_COMPARE_SKIPPED,  /* could not run here (see reason); not a failure */
    TH_COMPARE_MISMATCH, /* results disagree with the baseline beyond the tolerance */
    TH_COMPARE_FAILED,   /* a call failed (see reason) */
} th_compare_status;

typedef struct th_compare_mode {
    th_compare_stat host;    /* wall time around one mttkrp() (cpd: mean per iteration) */
    th_compare_stat backend; /* the backend's own time for it */
    double error;        /* relative Frobenius error vs the baseline; NAN if not checked */
    double speedup;      /* baseline median / this median by the comparison's timer; NAN n/a */
    double speedup_host;    /* the same by host wall time */
    double speedup_backend; /* the same by the backends' own times; NAN unless both report them */
} th_compare_mode;

/* One backend on one tensor. */
typedef struct th_compare_run {
    char *label;
    char *plugin;    /* as configured */
    char *plugin_id; /* as the plugin reports itself; "" when it did not open */
    char *options;   /* "key=value key=value", as handed to the plugin */
    gboolean is_baseline;
    th_compare_status status;
    char *reason;    /* why skipped / failed; NULL when OK */
    /* What the backend said of itself once loaded and run (its device,
     * memory, preprocessing time, each mode's scheme): the facts
     * report.json gives too, kept whole; NULL when it never loaded. */
    th_backend_facts *facts;
    uint32_t nmodes;
    th_compare_mode *modes; /* [nmodes]; NULL when it never ran */
    th_compare_stat total_host;    /* all modes per run (cpd: per iteration) */
    th_compare_stat total_backend; /* negative unless every mode reports its own time */
    double speedup;         /* by the comparison's timer; NAN n/a */
    double speedup_host;    /* by host wall time */
    double speedup_backend; /* by the backends' own times; NAN unless both report them */
    double max_error;       /* over the modes; NAN if not checked */
    /* job = "cpd" */
    double fit;              /* final (least-squares) fit; NAN otherwise */
    double fit_difference;   /* fit - baseline's fit */
    uint32_t iterations;
    th_compare_stat seconds_per_iteration;
    /* job = "cpd" with the Poisson model (th_compare_result.model); NAN and
     * 0 otherwise. The difference is relative: (log_likelihood - the
     * baseline's) / |the baseline's|, which the comparison's tolerance
     * checks instead of the fit's. */
    double log_likelihood;
    double log_likelihood_difference;
    double kkt_violation;
    uint32_t inner_iterations; /* summed over the outer iterations */
    /* job = "cpd" with completion: the published model's training and
     * held-out RMSE (NAN otherwise, and held-out without a holdout). */
    double train_rmse;
    double holdout_rmse;
} th_compare_run;

typedef struct th_compare_tensor {
    char *label;
    char *source;        /* the file, or th_synth_describe() of a synthetic tensor */
    gboolean synthetic;
    uint32_t nmodes;
    th_index *dims;
    uint64_t nnz;
    double read_seconds; /* reading or generating it */
    GPtrArray *runs;     /* th_compare_run*, in the config's backend order */
} th_compare_tensor;

/* Geometric mean over the tensors of one backend's speedups. */
typedef struct th_compare_geomean {
    char *label;
    double speedup;         /* by the comparison's timer; NAN when no tensor had one */
    double speedup_host;
    double speedup_backend;
    guint tensors;          /* how many tensors entered `speedup` */
} th_compare_geomean;

typedef struct th_compare_result {
    const th_config *config; /* borrowed */
    char *job, *baseline, *timer;
    /* The model job "cpd" fits (cpd.model); least squares for the others. */
    th_cpd_model model;
    /* Job "cpd": the modes cpd.constraints keeps nonnegative (as
     * th_cpd_params.nonneg_modes; 0: none, and for the other jobs), and how
     * many it names (1 when it gives one value for every mode). */
    uint64_t nonneg_modes;
    uint32_t constraint_modes;
    /* Job "cpd" with the least-squares model: cpd.l2 and cpd.l1 (l1 per
     * mode when listed: l1_modes of them, else 1), and whether they
     * regularise the runs (then the tensors are fitted as read, never
     * scaled: th_cpd_check_regularised_values). */
    double l2;
    double l1[TH_MAX_MODES];
    uint32_t l1_modes;
    gboolean regularised;
    /* ... and, where some mode is updated by coordinate descent
     * (descent), cpd.hals_passes and cpd.hals_budget, which choose each
     * mode's passes from the tensor's shape (every backend the same). */
    gboolean descent;
    uint32_t hals_max_passes;
    double hals_budget;
    uint32_t rank, repeats, warmup;
    double tolerance;
    uint64_t seed;
    char *date;        /* ISO 8601, local time, when the comparison started */
    char *devices;     /* the distinct devices of the backends that ran, "; "-joined */
    GPtrArray *tensors;  /* th_compare_tensor* */
    GPtrArray *geomeans; /* th_compare_geomean*, in backend order */
    GPtrArray *failures; /* char*: one line per mismatch or failed call */
    gboolean interrupted; /* stopped by Ctrl-C; later runs are marked skipped */
} th_compare_result;

void th_compare_result_free(th_compare_result *result);

/* A run's facts, with what a run that never loaded shows: mode m's scheme
 * ("" when not reported) and partitions, its device (""), the memory it
 * held in all (0: not reported) and its preprocessing time (< 0: not
 * measured). */
const char *th_compare_run_scheme(const th_compare_run *run, uint32_t mode);
uint32_t th_compare_run_partitions(const th_compare_run *run, uint32_t mode);
const char *th_compare_run_device(const th_compare_run *run);
uint64_t th_compare_run_memory(const th_compare_run *run);
double th_compare_run_preprocess_seconds(const th_compare_run *run);
/* GDestroyNotify for the arrays of the result: th_compare_run*,
 * th_compare_tensor* (its runs too), th_compare_geomean*. */
void th_compare_run_free(gpointer run);
void th_compare_tensor_free(gpointer tensor);
void th_compare_geomean_free(gpointer geomean);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(th_compare_result, th_compare_result_free)

/* The geometric mean of the finite, positive entries of `values` (others
 * are left out); NAN when there is none. */
double th_compare_geometric_mean(const double *values, size_t n);

/* Median (mean of the middle two for an even count), min and max of
 * `samples`, which are sorted in place; all -1 when n is 0. */
th_compare_stat th_compare_stat_of(double *samples, size_t n);

/* ||a - b||_F / ||b||_F; ||a - b||_F when b is zero; NAN if any entry of a
 * is not finite. */
double th_compare_relative_error(const double *a, const double *b, size_t n);

const char *th_compare_status_name(th_compare_status status);

#endif
