#include "compare/compare_result.h"

#include <math.h>
#include <stdlib.h>

double th_compare_geometric_mean(const double *values, size_t n)
{
    double log_sum = 0.0;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (isfinite(values[i]) && values[i] > 0.0) {
            log_sum += log(values[i]);
            used++;
        }
    }
    return used ? exp(log_sum / (double)used) : NAN;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

th_compare_stat th_compare_stat_of(double *samples, size_t n)
{
    th_compare_stat stat = {-1.0, -1.0, -1.0};
    if (n == 0)
        return stat;
    qsort(samples, n, sizeof *samples, compare_doubles);
    stat.min = samples[0];
    stat.max = samples[n - 1];
    stat.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
    return stat;
}

double th_compare_relative_error(const double *a, const double *b, size_t n)
{
    double difference = 0.0, reference = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            return NAN;
        double d = a[i] - b[i];
        difference += d * d;
        reference += b[i] * b[i];
    }
    return reference > 0.0 ? sqrt(difference / reference) : sqrt(difference);
}

const char *th_compare_status_name(th_compare_status status)
{
    switch (status) {
    case TH_COMPARE_OK:
        return "ok";
    case TH_COMPARE_SKIPPED:
        return "skipped";
    case TH_COMPARE_MISMATCH:
        return "mismatch";
    case TH_COMPARE_FAILED:
        return "failed";
    }
    return "?";
}

/* ---- Results ------------------------------------------------------------- */

/* ---- Freeing -------------------------------------------------------------- */

void th_compare_run_free(gpointer data)
{
    th_compare_run *run = data;
    g_free(run->label);
    g_free(run->plugin);
    g_free(run->plugin_id);
    g_free(run->options);
    g_free(run->reason);
    th_backend_facts_free(run->facts);
    g_free(run->modes);
    g_free(run);
}

static const th_backend_mode_facts *mode_facts(const th_compare_run *run, uint32_t mode)
{
    const th_backend_facts *f = run->facts;
    return f && mode < f->nmodes && f->modes[mode].reported ? &f->modes[mode] : NULL;
}

const char *th_compare_run_scheme(const th_compare_run *run, uint32_t mode)
{
    const th_backend_mode_facts *m = mode_facts(run, mode);
    return m && m->scheme ? m->scheme : "";
}

uint32_t th_compare_run_partitions(const th_compare_run *run, uint32_t mode)
{
    const th_backend_mode_facts *m = mode_facts(run, mode);
    return m ? m->partitions : 0;
}

const char *th_compare_run_device(const th_compare_run *run)
{
    return run->facts && run->facts->device ? run->facts->device : "";
}

uint64_t th_compare_run_memory(const th_compare_run *run)
{
    const th_backend_facts *f = run->facts;
    return f ? f->tensor_bytes + f->factor_bytes + f->workspace_bytes : 0;
}

double th_compare_run_preprocess_seconds(const th_compare_run *run)
{
    return run->facts ? run->facts->load_seconds : -1.0;
}

void th_compare_tensor_free(gpointer data)
{
    th_compare_tensor *tensor = data;
    g_free(tensor->label);
    g_free(tensor->source);
    g_free(tensor->dims);
    g_clear_pointer(&tensor->runs, g_ptr_array_unref);
    g_free(tensor);
}

void th_compare_geomean_free(gpointer data)
{
    th_compare_geomean *geomean = data;
    g_free(geomean->label);
    g_free(geomean);
}

void th_compare_result_free(th_compare_result *result)
{
    if (!result)
        return;
    g_free(result->job);
    g_free(result->baseline);
    g_free(result->timer);
    g_free(result->date);
    g_free(result->devices);
    g_clear_pointer(&result->tensors, g_ptr_array_unref);
    g_clear_pointer(&result->geomeans, g_ptr_array_unref);
    g_clear_pointer(&result->failures, g_ptr_array_unref);
    g_free(result);
}

