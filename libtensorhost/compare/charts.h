/* Bar charts drawn with cairo, written as PNG and SVG: a small, generic
 * grouped / stacked bar chart, and the three charts of a comparison. */
#ifndef TH_CHARTS_H
#define TH_CHARTS_H

#include <glib.h>

#include "compare/compare_result.h"
#include "base/output_set.h"

typedef enum {
    TH_CHART_SECONDS, /* ticks in µs, ms or s, chosen from the largest value */
    TH_CHART_BYTES,   /* ticks in MiB or GiB */
} th_chart_unit;

/* Values are indexed [group][series][stack]. Two layouts:
 *  - grouped (panels = FALSE): one cluster of bars per group along x, one
 *    bar per series, coloured by series (the legend); n_stack must be 1;
 *    linear or log scale, optional min-max whiskers;
 *  - panels (panels = TRUE): one small chart per group, each with its own
 *    linear y scale, one bar per series along x, stacked by `stack`
 *    (coloured by stack: the legend).
 * A NaN value draws no bar; `notes` (may be NULL) then says why ("skipped"). */
typedef struct th_bar_chart {
    const char *title;
    const char *subtitle;  /* device, date, settings */
    const char *y_label;   /* the quantity; " (unit[, log scale])" is appended */
    const char *footnote;  /* may be NULL */
    th_chart_unit unit;
    gboolean log_scale;
    gboolean panels;
    guint n_groups;
    const char *const *groups;
    guint n_series;
    const char *const *series;
    guint n_stack;
    const char *const *stack; /* names of the stack segments; NULL when n_stack is 1 */
    const double *values;     /* [n_groups * n_series * n_stack] */
    const double *low, *high; /* [n_groups * n_series] whiskers, may be NULL */
    const char *const *notes; /* [n_groups * n_series], may be NULL */
} th_bar_chart;

/* Writes STEM.png and STEM.svg as finished files of `set` (output_set.h),
 * to be swapped in with the rest of the outputs. */
gboolean th_bar_chart_stage(const th_bar_chart *chart, th_output_set *set, const char *stem,
                            GError **error);

/* The comparison's charts, as files of `set`: time-total (MTTKRP over all modes per
 * tensor per backend, log scale, min-max whiskers), time-per-mode (one
 * panel per tensor, bars stacked by mode) and memory (one panel per
 * tensor, tensor copies + factors + workspace), each as .png and .svg. */
gboolean th_charts_stage_comparison(const th_compare_result *result, th_output_set *set,
                                    GError **error);

#endif
