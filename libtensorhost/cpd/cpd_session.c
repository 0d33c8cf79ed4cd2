#include "cpd/cpd_session.h"

#include <limits.h>

#include "cpd/completion_data.h"
#include "cpd/cp_apr.h"
#include "cpd/cp_complete.h"
#include "dist/dist_deal.h"

struct th_cpd_session {
    th_backend *backend; /* borrowed, planned */
    th_cpd_params params;
    /* The warning terms, owned copies of the caller's. */
    char *tensor_term, *rank_term, *max_iters_term, *tolerance_term;
    /* Prepared: the caller's, or scaled_copy; completion: train. */
    const th_sptensor *tensor;
    th_sptensor *scaled_copy;
    /* Completion: the listed entries split (completion_data.h), and the
     * rows of train without an entry, counted by the split's check. */
    th_sptensor *train, *held_out;
    uint64_t empty_rows;
    GPtrArray *warnings;    /* th_cpd_warning */
    guint tensor_warnings;  /* the first ones, from prepare */
};

th_cpd_session *th_cpd_session_new(th_backend *backend, const th_cpd_params *params,
                                   const char *where, const th_cpd_warning_terms *terms,
                                   GError **error)
{
    if (!th_cpd_plan(backend, params, where, error))
        return NULL;
    th_cpd_session *s = g_new0(th_cpd_session, 1);
    s->backend = backend;
    s->params = *params;
    s->tensor_term = g_strdup(terms->tensor);
    s->rank_term = g_strdup(terms->rank);
    s->max_iters_term = g_strdup(terms->max_iters);
    s->tolerance_term = g_strdup(terms->tolerance);
    s->warnings = th_cpd_warnings_new();
    return s;
}

void th_cpd_session_free(th_cpd_session *s)
{
    if (!s)
        return;
    th_sptensor_free(s->scaled_copy);
    th_sptensor_free(s->train);
    th_sptensor_free(s->held_out);
    g_ptr_array_unref(s->warnings);
    g_free(s->tensor_term);
    g_free(s->rank_term);
    g_free(s->max_iters_term);
    g_free(s->tolerance_term);
    g_free(s);
}

const th_cpd_params *th_cpd_session_params(const th_cpd_session *s) { return &s->params; }

static th_cpd_warning_terms terms_of(const th_cpd_session *s)
{
    return (th_cpd_warning_terms){
        .tensor = s->tensor_term,
        .rank = s->rank_term,
        .max_iters = s->max_iters_term,
        .tolerance = s->tolerance_term,
    };
}

/* Regularised CP-ALS fits the values as read (th_cpd_check_regularised_values). */
static gboolean fits_values_as_read(const th_cpd_session *s)
{
    return s->params.model == TH_MODEL_LEAST_SQUARES &&
           th_cpd_regularised(&s->params, TH_MAX_MODES);
}

/* Completion's entries: the listed ones split into training and held-out
 * entries, the training ones checked to reach every factor row (an error
 * without a ridge, a warning with one). */
static gboolean split_for_completion(th_cpd_session *s, const th_sptensor *tensor,
                                     uint64_t *empty_rows, char **description, GError **error)
{
    g_clear_pointer(&s->train, th_sptensor_free);
    g_clear_pointer(&s->held_out, th_sptensor_free);
    const th_completion_params *c = &s->params.completion;
    return th_completion_check_values(tensor, error) &&
           th_cpd_check_constraints_order(&s->params, tensor->nmodes, error) &&
           th_completion_split(tensor, c->holdout, s->params.seed, &s->train, &s->held_out,
                               error) &&
           th_completion_check_rows(s->train, c->l2, empty_rows, description, error);
}

/* What a distributed run's share stands for (prepare_share): the whole
 * tensor's squared norm and counts, summed over the processes. */
typedef struct {
    double norm_squared;
    uint64_t nnz, underflowed_values;
} whole_tensor;

/* The checks of a prepared tensor (in the safe range for least squares;
 * as read, nonnegative, for Poisson; split for completion), and the
 * warnings known before the run; with `whole`, of a share whose checks
 * and warnings count the whole tensor. */
static gboolean take_tensor(th_cpd_session *s, const th_sptensor *tensor,
                            const whole_tensor *whole, GError **error)
{
    uint64_t non_integer = 0, empty_rows = 0;
    g_autofree char *empty_description = NULL;
    gboolean ok;
    switch (s->params.model) {
    case TH_MODEL_POISSON:
        ok = th_cp_apr_check_tensor(tensor, &non_integer, error);
        break;
    case TH_MODEL_COMPLETION:
        ok = split_for_completion(s, tensor, &empty_rows, &empty_description, error);
        if (ok)
            tensor = s->train;
        s->empty_rows = empty_rows;
        break;
    default:
        ok = (whole ? th_cpd_check_norm(whole->norm_squared, whole->nnz, error)
                    : th_cpd_check_tensor(tensor, error)) &&
             th_cpd_check_constraints_order(&s->params, tensor->nmodes, error) &&
             th_cpd_check_regularised_values(&s->params, tensor, error);
        break;
    }
    if (!ok)
        return FALSE;
    s->tensor = tensor;
    /* The warnings read the counts and sizes alone: a share's header with
     * the whole tensor's counts stands for the tensor. */
    th_sptensor counted = *tensor;
    if (whole) {
        counted.nnz = whole->nnz;
        counted.underflowed_values = whole->underflowed_values;
    }
    g_ptr_array_set_size(s->warnings, 0);
    const th_cpd_warning_terms terms = terms_of(s);
    th_cpd_tensor_warnings(s->warnings, &counted, s->params.rank, &terms);
    th_cpd_count_warnings(s->warnings, non_integer, counted.nnz, &terms);
    th_cpd_empty_row_warnings(s->warnings, empty_rows, empty_description,
                              s->params.completion.l2);
    s->tensor_warnings = s->warnings->len;
    return TRUE;
}

gboolean th_cpd_prepare_tensor_for(th_sptensor *tensor, th_cpd_model model, gboolean *scaled,
                                   GError **error)
{
    if (model == TH_MODEL_POISSON || model == TH_MODEL_COMPLETION) {
        if (scaled)
            *scaled = FALSE;
        return model == TH_MODEL_POISSON ? th_cp_apr_check_tensor(tensor, NULL, error)
                                         : th_completion_check_values(tensor, error);
    }
    const gboolean did_scale = th_sptensor_scale_to_safe_range(tensor);
    if (scaled)
        *scaled = did_scale;
    return th_cpd_check_tensor(tensor, error);
}

gboolean th_cpd_prepare_tensor(th_sptensor *tensor, gboolean *scaled, GError **error)
{
    return th_cpd_prepare_tensor_for(tensor, TH_MODEL_LEAST_SQUARES, scaled, error);
}

/* A distributed run's tensor (params.dist): this process's share, scaled
 * by the whole tensor's largest value and checked by its norm, every
 * process's collectives made before any check can fail. */
static gboolean prepare_share(th_cpd_session *s, th_sptensor *share, gboolean *scaled,
                              GError **error)
{
    th_dist *dist = s->params.dist;
    double largest = th_sptensor_max_abs(share);
    if (!th_dist_max(dist, &largest, 1, error))
        return FALSE;
    const gboolean did_scale =
        !fits_values_as_read(s) && th_sptensor_scale_for_largest(share, largest);
    if (scaled)
        *scaled = did_scale;
    whole_tensor whole = {.norm_squared = th_sptensor_norm_squared(share)};
    uint64_t counts[2] = {share->nnz, share->underflowed_values};
    if (!th_dist_sum(dist, &whole.norm_squared, 1, error) ||
        !th_dist_sum_u64(dist, counts, 2, error))
        return FALSE;
    whole.nnz = counts[0];
    whole.underflowed_values = counts[1];
    return take_tensor(s, share, &whole, error);
}

gboolean th_cpd_session_prepare(th_cpd_session *s, th_sptensor *tensor, gboolean *scaled,
                                GError **error)
{
    if (s->params.dist != NULL)
        return prepare_share(s, tensor, scaled, error);
    if (fits_values_as_read(s)) {
        if (scaled)
            *scaled = FALSE;
        return take_tensor(s, tensor, NULL, error);
    }
    return th_cpd_prepare_tensor_for(tensor, s->params.model, scaled, error) &&
           take_tensor(s, tensor, NULL, error);
}

gboolean th_cpd_session_prepare_copy(th_cpd_session *s, const th_sptensor *tensor,
                                     GError **error)
{
    g_clear_pointer(&s->scaled_copy, th_sptensor_free);
    /* The Poisson model and completion take the values as they are (they
     * are not scale-invariant). */
    if (s->params.model == TH_MODEL_LEAST_SQUARES && !fits_values_as_read(s) &&
        !th_sptensor_in_safe_range(tensor)) {
        s->scaled_copy = th_sptensor_copy(tensor);
        th_sptensor_scale_to_safe_range(s->scaled_copy);
    }
    return take_tensor(s, s->scaled_copy ? s->scaled_copy : tensor, NULL, error);
}

/* A distributed run whose backend builds each mode from its own nonzeros:
 * each mode's nonzeros dealt to the processes by the plan (dist_deal.h),
 * every process's owned rows known to all (two numbers a process and
 * mode), and the backend loaded with them, so that each mode's exchange
 * gathers owned rows: the host's (als_step.c), or the backend's own where
 * it sums over the processes itself (the GPU plugins' group across the
 * processes). */
static gboolean load_dealt(th_cpd_session *s, GError **error)
{
    th_dist *dist = s->params.dist;
    const th_sptensor *share = s->tensor;
    const uint32_t n = share->nmodes, P = th_dist_size(dist), me = th_dist_rank(dist);
    const gint64 start = g_get_monotonic_time();
    th_sptensor *dealt[TH_MAX_MODES] = {NULL};
    /* Per mode: the P + 1 owned-row boundaries, then the P window ends
     * (th_backend_load_mode_tensors). */
    const size_t per_mode = 2 * (size_t)P + 1;
    uint64_t *owned = g_new(uint64_t, n * per_mode);
    g_autofree double *ends = g_new(double, 2 * (size_t)P);
    g_autofree uint64_t *counts = g_new(uint64_t, P);
    for (uint32_t p = 0; p < P; ++p)
        counts[p] = 2;
    gboolean ok = TRUE;
    for (uint32_t m = 0; ok && m < n; ++m) {
        th_dist_dealt facts;
        dealt[m] = th_dist_deal_mode(dist, share, m, &facts, error);
        ok = dealt[m] != NULL;
        if (ok) {
            ends[2 * me] = (double)facts.owned.begin; /* rows < 2^32: exact */
            ends[2 * me + 1] = (double)facts.owned.window_end;
            ok = th_dist_allgather(dist, NULL, 2, ends, counts, error);
        }
        if (ok) {
            uint64_t *begin = owned + m * per_mode, *window_end = begin + P + 1;
            for (uint32_t p = 0; p < P; ++p) {
                begin[p] = (uint64_t)ends[2 * p];
                window_end[p] = (uint64_t)ends[2 * p + 1];
            }
            begin[P] = share->dims[m];
        }
    }
    if (ok) {
        ok = th_backend_load_mode_tensors(s->backend, dealt, s->params.rank, P, owned, error);
        /* The deal is the run's preprocessing too. */
        s->backend->load_seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    } else {
        g_free(owned);
    }
    for (uint32_t m = 0; m < n; ++m)
        th_sptensor_free(dealt[m]);
    return ok;
}

/* Whether a distributed run deals each mode's nonzeros and gathers owned
 * rows (*wanted), by bytes a process moves: the deal sends nnz / P records
 * of 4N + 8 bytes for each mode but the first, once; each iteration then
 * saves about 8 R sum_n I_n (a gather of the rows, where the sums'
 * all-reduce moves twice them), so it deals when max_iters iterations save
 * at least that. A backend that sums over the processes itself (the GPUs)
 * keeps its sums where every process is on one host: there its exchange
 * runs over the devices' links, far faster than the host deals (two
 * H200s: 1.3 s of deal at load against 0.14 ms saved an iteration on
 * nell-2, BENCHMARKS.md). TH_HOST_OWNED_ROWS=1 or 0 (given to every
 * process) decides instead, for comparisons; a mode of more than INT_MAX
 * doubles of results (MPI's counts) keeps the sums, which go in pieces.
 * Every process decides alike (one "no" is every process's). */
static gboolean deal_wanted(th_cpd_session *s, gboolean *wanted, GError **error)
{
    th_dist *dist = s->params.dist;
    const th_sptensor *share = s->tensor;
    uint64_t nnz = share->nnz;
    if (!th_dist_sum_u64(dist, &nnz, 1, error))
        return FALSE;
    double rows = 0.0;
    gboolean fits = TRUE; /* each result's doubles within MPI's int counts (th_dist_allgather) */
    for (uint32_t m = 0; m < share->nmodes; ++m) {
        rows += share->dims[m];
        fits = fits && (uint64_t)share->dims[m] * s->params.rank <= INT_MAX;
    }
    const double saved = (double)s->params.max_iters * 8.0 * s->params.rank * rows;
    const double dealt = (double)nnz * (4.0 * share->nmodes + 8.0) * (share->nmodes - 1) /
                         th_dist_size(dist);
    const char *forced = g_getenv("TH_HOST_OWNED_ROWS");
    const gboolean devices_link =
        s->backend->planned_process_sums && th_dist_one_host(dist);
    uint64_t refused = !fits || (forced ? g_strcmp0(forced, "0") == 0
                                        : devices_link || saved < dealt);
    if (!th_dist_max_u64(dist, &refused, 1, error))
        return FALSE;
    *wanted = refused == 0;
    return TRUE;
}

gboolean th_cpd_session_load(th_cpd_session *s, GError **error)
{
    g_return_val_if_fail(s->tensor != NULL, FALSE); /* prepared first */
    if (s->params.dist != NULL && s->params.model == TH_MODEL_LEAST_SQUARES &&
        th_backend_takes_mode_nonzeros(s->backend)) {
        gboolean wanted = FALSE;
        if (!deal_wanted(s, &wanted, error))
            return FALSE;
        if (wanted)
            return load_dealt(s, error);
    }
    return th_backend_load_tensor(s->backend, s->tensor, s->params.rank, error);
}

th_cpd_result *th_cpd_session_run(th_cpd_session *s, const th_cpd_callbacks *callbacks,
                                  GError **error)
{
    g_return_val_if_fail(s->tensor != NULL, NULL);
    /* Each model is a kind of run of this one sequence. */
    th_cpd_result *result =
        s->params.model == TH_MODEL_POISSON
            ? th_cp_apr(s->backend, s->tensor, &s->params, callbacks, error)
        : s->params.model == TH_MODEL_COMPLETION
            ? th_cp_complete(s->backend, s->tensor, s->held_out, s->empty_rows, &s->params,
                             callbacks, error)
            : th_cp_als(s->backend, s->tensor, &s->params, callbacks, error);
    if (!result)
        return NULL;
    g_ptr_array_set_size(s->warnings, s->tensor_warnings);
    const th_cpd_warning_terms terms = terms_of(s);
    th_cpd_result_warnings(s->warnings, &s->params, result, &terms);
    return result;
}

const th_sptensor *th_cpd_session_tensor(const th_cpd_session *s) { return s->tensor; }

const th_sptensor *th_cpd_session_held_out(const th_cpd_session *s) { return s->held_out; }

const GPtrArray *th_cpd_session_warnings(const th_cpd_session *s) { return s->warnings; }
