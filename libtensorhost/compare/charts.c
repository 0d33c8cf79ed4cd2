/* Bar charts with cairo; see charts.h. The same drawing code renders onto
 * an image surface (PNG) and an SVG surface, so the two files match. */
#include "compare/charts.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/atomic_file.h"
#include "base/message_text.h"

#define FONT "DejaVu Sans"

/* ---- Geometry and style --------------------------------------------------- */

enum {
    WIDTH = 1280,
    GROUPED_HEIGHT = 720,
    PANEL_HEIGHT = 380,
    MAX_PANEL_COLUMNS = 3,
};

typedef struct rgb {
    double r, g, b;
} rgb;

/* Tableau 10: distinguishable, and readable in grey print. */
static const rgb palette[] = {
    {0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157},
    {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294}, {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498},
    {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812},
};

static void set_color(cairo_t *cr, rgb color)
{
    cairo_set_source_rgb(cr, color.r, color.g, color.b);
}

static void set_grey(cairo_t *cr, double level)
{
    cairo_set_source_rgb(cr, level, level, level);
}

static rgb color_at(guint index)
{
    return palette[index % G_N_ELEMENTS(palette)];
}

typedef struct box {
    double x, y, w, h;
} box;

/* ---- Text ----------------------------------------------------------------- */

static void use_font(cairo_t *cr, double size, gboolean bold)
{
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

static double text_width(cairo_t *cr, const char *text)
{
    cairo_text_extents_t extents;
    cairo_text_extents(cr, text, &extents);
    return extents.x_advance;
}

/* Draws `text` with its baseline at y, anchored at x by `align` (0 left,
 * 0.5 centre, 1 right) along the text direction, rotated by `angle`
 * radians about the anchor; `middle` centres it vertically on y instead. */
static void draw_text(cairo_t *cr, double x, double y, const char *text, double align,
                      double angle, gboolean middle)
{
    cairo_text_extents_t extents;
    cairo_text_extents(cr, text, &extents);
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_rotate(cr, angle);
    double dy = middle ? -(extents.y_bearing + extents.height / 2.0) : 0.0;
    cairo_move_to(cr, -align * extents.x_advance, dy);
    cairo_show_text(cr, text);
    cairo_restore(cr);
}

/* ---- Scales --------------------------------------------------------------- */

/* The display unit and its factor for values up to `max`. */
static const char *pick_unit(th_chart_unit unit, double max, double *factor)
{
    if (unit == TH_CHART_BYTES) {
        if (max >= 1024.0 * 1024.0 * 1024.0) {
            *factor = 1.0 / (1024.0 * 1024.0 * 1024.0);
            return "GiB";
        }
        *factor = 1.0 / (1024.0 * 1024.0);
        return "MiB";
    }
    /* ASCII "us": a GPU node may have no fonts, and cairo's fallback has no µ. */
    if (max < 1e-3) {
        *factor = 1e6;
        return "us";
    }
    if (max < 1.0) {
        *factor = 1e3;
        return "ms";
    }
    *factor = 1.0;
    return "s";
}

typedef struct scale {
    gboolean log;
    double lo, hi;   /* in display units */
    double step;     /* linear tick step */
    double factor;   /* data value * factor = display value */
    const char *unit;
} scale;

static double nice_step(double range)
{
    double raw = range / 5.0;
    double magnitude = pow(10.0, floor(log10(raw)));
    double fraction = raw / magnitude;
    double nice = fraction <= 1.0 ? 1.0 : fraction <= 2.0 ? 2.0 : fraction <= 5.0 ? 5.0 : 10.0;
    return nice * magnitude;
}

/* A scale covering [min_positive, max] of the data (display units after
 * `factor`): whole decades for log, 0 to a nice bound for linear. */
static scale make_scale(th_chart_unit unit, gboolean log_scale, double min_positive, double max)
{
    scale s = {.log = log_scale};
    s.unit = pick_unit(unit, max, &s.factor);
    double top = max * s.factor, bottom = min_positive * s.factor;
    if (!(top > 0.0)) {
        top = 1.0;
        bottom = 0.1;
    }
    if (log_scale) {
        s.lo = pow(10.0, floor(log10(bottom)));
        s.hi = pow(10.0, ceil(log10(top)));
        if (s.hi <= s.lo)
            s.hi = s.lo * 10.0;
    } else {
        s.lo = 0.0;
        s.step = nice_step(top);
        s.hi = ceil(top / s.step - 1e-9) * s.step;
        if (s.hi <= 0.0)
            s.hi = s.step;
    }
    return s;
}

/* y pixel of a display value inside `plot`; clamped to the plot. */
static double scale_y(const scale *s, const box *plot, double value)
{
    double t;
    if (s->log)
        t = value > 0.0 ? (log10(value) - log10(s->lo)) / (log10(s->hi) - log10(s->lo)) : 0.0;
    else
        t = (value - s->lo) / (s->hi - s->lo);
    t = CLAMP(t, 0.0, 1.0);
    return plot->y + plot->h * (1.0 - t);
}

static char *tick_text(double value)
{
    char buffer[G_ASCII_DTOSTR_BUF_SIZE];
    return g_strdup(g_ascii_formatd(buffer, sizeof buffer, "%g", value));
}

static void draw_tick(cairo_t *cr, const scale *s, const box *plot, double v, gboolean labelled)
{
    double y = round(scale_y(s, plot, v)) + 0.5;
    set_grey(cr, labelled ? 0.86 : 0.94);
    cairo_move_to(cr, plot->x, y);
    cairo_line_to(cr, plot->x + plot->w, y);
    cairo_stroke(cr);
    if (!labelled)
        return;
    set_grey(cr, 0.2);
    g_autofree char *text = tick_text(v);
    draw_text(cr, plot->x - 8, y, text, 1.0, 0.0, TRUE);
}

/* Horizontal grid lines with labels on the left, and the axis title. On a
 * log scale of few decades, 2 and 5 times each decade are labelled too. */
static void draw_y_axis(cairo_t *cr, const scale *s, const box *plot, const char *label,
                        double font_size)
{
    use_font(cr, font_size, FALSE);
    cairo_set_line_width(cr, 1.0);
    double decades = s->log ? log10(s->hi / s->lo) : 0.0;
    int count = 0;
    for (double v = s->lo; v <= s->hi * (1.0 + 1e-9) && count < 64; count++) {
        draw_tick(cr, s, plot, v, TRUE);
        if (s->log && v < s->hi * (1.0 - 1e-9)) {
            for (int k = 2; k <= 9; k++)
                draw_tick(cr, s, plot, v * k, decades <= 3.0 && (k == 2 || k == 5));
        }
        v = s->log ? s->lo * pow(10.0, count + 1) : s->lo + (count + 1) * s->step;
    }
    set_grey(cr, 0.2);
    cairo_move_to(cr, plot->x + 0.5, plot->y);
    cairo_line_to(cr, plot->x + 0.5, plot->y + plot->h);
    cairo_line_to(cr, plot->x + plot->w, plot->y + plot->h);
    cairo_stroke(cr);
    g_autofree char *title = g_strdup_printf("%s (%s%s)", label, s->unit,
                                             s->log ? ", log scale" : "");
    use_font(cr, font_size, FALSE);
    double widest = text_width(cr, "00000");
    draw_text(cr, plot->x - widest - 22, plot->y + plot->h / 2.0, title, 0.5, -G_PI / 2.0, FALSE);
}

/* Room the category labels need below the axis: horizontal labels when
 * they fit in their slots, else slanted by 45 degrees. */
static double x_label_room(cairo_t *cr, double plot_width, guint n, const char *const *labels,
                           double font_size, gboolean *slant)
{
    use_font(cr, font_size, FALSE);
    double slot = plot_width / n, widest = 0.0;
    for (guint i = 0; i < n; i++)
        widest = MAX(widest, text_width(cr, labels[i]));
    *slant = widest > slot - 6.0;
    return *slant ? widest * G_SQRT2 / 2.0 + font_size + 16.0 : font_size + 16.0;
}

static void draw_x_labels(cairo_t *cr, const box *plot, guint n, const char *const *labels,
                          double font_size)
{
    gboolean slant;
    (void)x_label_room(cr, plot->w, n, labels, font_size, &slant);
    use_font(cr, font_size, FALSE);
    set_grey(cr, 0.15);
    double slot = plot->w / n;
    for (guint i = 0; i < n; i++) {
        double x = plot->x + slot * (i + 0.5), y = plot->y + plot->h + font_size + 6.0;
        if (slant)
            draw_text(cr, x + 4.0, y - 4.0, labels[i], 1.0, -G_PI / 4.0, FALSE);
        else
            draw_text(cr, x, y, labels[i], 0.5, 0.0, FALSE);
    }
}

/* ---- Header: title, subtitle, legend ------------------------------------- */

/* Returns the y below the header. */
static double draw_header(cairo_t *cr, const th_bar_chart *chart, guint n_legend,
                          const char *const *legend)
{
    set_grey(cr, 0.1);
    use_font(cr, 22.0, TRUE);
    draw_text(cr, 30.0, 38.0, chart->title, 0.0, 0.0, FALSE);
    set_grey(cr, 0.35);
    use_font(cr, 14.0, FALSE);
    draw_text(cr, 30.0, 62.0, chart->subtitle ? chart->subtitle : "", 0.0, 0.0, FALSE);
    use_font(cr, 14.0, FALSE);
    double x = 30.0, y = 92.0;
    for (guint i = 0; i < n_legend; i++) {
        double w = 18.0 + 8.0 + text_width(cr, legend[i]) + 26.0;
        if (x + w > WIDTH - 30.0 && x > 30.0) {
            x = 30.0;
            y += 24.0;
        }
        set_color(cr, color_at(i));
        cairo_rectangle(cr, x, y - 13.0, 18.0, 18.0);
        cairo_fill(cr);
        set_grey(cr, 0.15);
        draw_text(cr, x + 26.0, y + 1.0, legend[i], 0.0, 0.0, FALSE);
        x += w;
    }
    return y + 22.0;
}

static void draw_footnote(cairo_t *cr, const th_bar_chart *chart, double height)
{
    if (!chart->footnote)
        return;
    set_grey(cr, 0.4);
    use_font(cr, 12.0, FALSE);
    draw_text(cr, 30.0, height - 14.0, chart->footnote, 0.0, 0.0, FALSE);
}

/* ---- Layouts ---------------------------------------------------------------- */

static double value_at(const th_bar_chart *c, guint group, guint series, guint stack)
{
    return c->values[((gsize)group * c->n_series + series) * c->n_stack + stack];
}

static double bar_total(const th_bar_chart *c, guint group, guint series)
{
    double total = 0.0;
    for (guint k = 0; k < c->n_stack; k++) {
        double v = value_at(c, group, series, k);
        if (isnan(v))
            return NAN;
        total += v;
    }
    return total;
}

static const char *note_at(const th_bar_chart *c, guint group, guint series)
{
    const char *note = c->notes ? c->notes[(gsize)group * c->n_series + series] : NULL;
    return note && *note ? note : "n/a";
}

/* The label of a missing bar, standing up from the axis. */
static void draw_missing(cairo_t *cr, double x, const box *plot, const char *note)
{
    set_grey(cr, 0.45);
    use_font(cr, 12.0, FALSE);
    draw_text(cr, x, plot->y + plot->h - 6.0, note, 0.0, -G_PI / 2.0, TRUE);
}

static void draw_whisker(cairo_t *cr, double x, double y_low, double y_high, double cap)
{
    set_grey(cr, 0.1);
    cairo_set_line_width(cr, 1.2);
    cairo_move_to(cr, x, y_low);
    cairo_line_to(cr, x, y_high);
    cairo_move_to(cr, x - cap, y_low);
    cairo_line_to(cr, x + cap, y_low);
    cairo_move_to(cr, x - cap, y_high);
    cairo_line_to(cr, x + cap, y_high);
    cairo_stroke(cr);
}

/* The bar's value above it, in the axis unit, when it fits the bar's width. */
static void draw_value(cairo_t *cr, double x, double y, double value, double bar)
{
    char buffer[G_ASCII_DTOSTR_BUF_SIZE];
    const char *text = g_ascii_formatd(buffer, sizeof buffer, value < 10.0 ? "%.2f" : "%.3g",
                                       value);
    use_font(cr, 11.0, FALSE);
    if (text_width(cr, text) > bar - 2.0)
        return;
    set_grey(cr, 0.2);
    draw_text(cr, x, y, text, 0.5, 0.0, FALSE);
}

static void draw_grouped(cairo_t *cr, const th_bar_chart *c, double height)
{
    double top = draw_header(cr, c, c->n_series, c->series);
    double min_positive = INFINITY, max = 0.0;
    for (guint g = 0; g < c->n_groups; g++) {
        for (guint s = 0; s < c->n_series; s++) {
            gsize i = (gsize)g * c->n_series + s;
            double v = bar_total(c, g, s);
            double hi = c->high && c->high[i] > 0.0 ? c->high[i] : v;
            double lo = c->low && c->low[i] > 0.0 ? c->low[i] : v;
            if (v > 0.0) {
                max = MAX(max, MAX(v, hi));
                min_positive = MIN(min_positive, MIN(v, lo));
            }
        }
    }
    scale s = make_scale(c->unit, c->log_scale, isfinite(min_positive) ? min_positive : max, max);
    gboolean slant;
    double room = x_label_room(cr, WIDTH - 150.0, c->n_groups, c->groups, 14.0, &slant);
    box plot = {120.0, top + 10.0, WIDTH - 120.0 - 30.0, height - top - 10.0 - room - 40.0};
    draw_y_axis(cr, &s, &plot, c->y_label, 14.0);
    double slot = plot.w / c->n_groups;
    double bar = slot * 0.8 / c->n_series;
    for (guint g = 0; g < c->n_groups; g++) {
        for (guint b = 0; b < c->n_series; b++) {
            gsize i = (gsize)g * c->n_series + b;
            double x = plot.x + slot * g + slot * 0.1 + bar * b;
            double v = bar_total(c, g, b);
            if (!(v > 0.0)) {
                draw_missing(cr, x + bar / 2.0, &plot, note_at(c, g, b));
                continue;
            }
            double y = scale_y(&s, &plot, v * s.factor);
            set_color(cr, color_at(b));
            cairo_rectangle(cr, x + 1.0, y, bar - 2.0, plot.y + plot.h - y);
            cairo_fill(cr);
            double label_y = y;
            if (c->low && c->high && c->low[i] > 0.0 && c->high[i] > 0.0) {
                double y_high = scale_y(&s, &plot, c->high[i] * s.factor);
                draw_whisker(cr, x + bar / 2.0, scale_y(&s, &plot, c->low[i] * s.factor), y_high,
                             MIN(6.0, bar / 4.0));
                label_y = MIN(label_y, y_high);
            }
            draw_value(cr, x + bar / 2.0, label_y - 5.0, v * s.factor, bar);
        }
    }
    draw_x_labels(cr, &plot, c->n_groups, c->groups, 14.0);
}

static void draw_panel(cairo_t *cr, const th_bar_chart *c, guint g, const box *area)
{
    double max = 0.0;
    for (guint b = 0; b < c->n_series; b++) {
        double v = bar_total(c, g, b);
        if (v > 0.0)
            max = MAX(max, v);
    }
    set_grey(cr, 0.1);
    use_font(cr, 15.0, TRUE);
    draw_text(cr, area->x + area->w / 2.0, area->y + 18.0, c->groups[g], 0.5, 0.0, FALSE);
    scale s = make_scale(c->unit, FALSE, max, max);
    gboolean slant;
    double room = x_label_room(cr, area->w - 110.0, c->n_series, c->series, 12.0, &slant);
    box plot = {area->x + 95.0, area->y + 32.0, area->w - 95.0 - 15.0, area->h - 32.0 - room - 10.0};
    draw_y_axis(cr, &s, &plot, c->y_label, 12.0);
    double slot = plot.w / c->n_series, bar = slot * 0.6;
    for (guint b = 0; b < c->n_series; b++) {
        double x = plot.x + slot * b + (slot - bar) / 2.0;
        if (!(bar_total(c, g, b) > 0.0)) {
            draw_missing(cr, x + bar / 2.0, &plot, note_at(c, g, b));
            continue;
        }
        double base = 0.0;
        for (guint k = 0; k < c->n_stack; k++) {
            double v = value_at(c, g, b, k);
            if (!(v > 0.0))
                continue;
            double y0 = scale_y(&s, &plot, base * s.factor);
            double y1 = scale_y(&s, &plot, (base + v) * s.factor);
            set_color(cr, color_at(k));
            cairo_rectangle(cr, x, y1, bar, y0 - y1);
            cairo_fill_preserve(cr);
            cairo_set_source_rgb(cr, 1.0, 1.0, 1.0);
            cairo_set_line_width(cr, 0.8);
            cairo_stroke(cr);
            base += v;
        }
    }
    draw_x_labels(cr, &plot, c->n_series, c->series, 12.0);
}

static void panel_grid(const th_bar_chart *c, guint *columns, guint *rows)
{
    *columns = MIN(c->n_groups, (guint)MAX_PANEL_COLUMNS);
    *columns = MAX(*columns, 1u);
    *rows = (c->n_groups + *columns - 1) / *columns;
}

static double chart_height(const th_bar_chart *c)
{
    if (!c->panels)
        return GROUPED_HEIGHT;
    guint columns, rows;
    panel_grid(c, &columns, &rows);
    return 150.0 + rows * (double)PANEL_HEIGHT + 30.0;
}

static void draw_panels(cairo_t *cr, const th_bar_chart *c)
{
    double top = draw_header(cr, c, c->n_stack, c->stack);
    guint columns, rows;
    panel_grid(c, &columns, &rows);
    double w = (WIDTH - 40.0) / columns;
    for (guint g = 0; g < c->n_groups; g++) {
        box area = {20.0 + w * (g % columns), top + PANEL_HEIGHT * (double)(g / columns), w,
                    PANEL_HEIGHT};
        draw_panel(cr, c, g, &area);
    }
}

static void draw_chart(cairo_t *cr, const th_bar_chart *chart, double height)
{
    cairo_set_source_rgb(cr, 1.0, 1.0, 1.0);
    cairo_paint(cr);
    if (chart->panels)
        draw_panels(cr, chart);
    else
        draw_grouped(cr, chart, height);
    draw_footnote(cr, chart, height);
}

/* ---- Files ---------------------------------------------------------------- */

static gboolean cairo_failed(cairo_status_t status, const char *path, GError **error)
{
    if (status == CAIRO_STATUS_SUCCESS)
        return FALSE;
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "%s: cannot draw the chart: %s", path,
                cairo_status_to_string(status));
    return TRUE;
}

/* cairo's output into an atomic file's stream. */
static cairo_status_t write_to_stream(void *stream, const unsigned char *data,
                                      unsigned int length)
{
    return fwrite(data, 1, length, stream) == length ? CAIRO_STATUS_SUCCESS
                                                      : CAIRO_STATUS_WRITE_ERROR;
}

/* Renders into a finished file of `set` (output_set.h: flushed to disk,
 * swapped in with the rest of the outputs), as every other output is
 * written. */
static gboolean write_atomically(th_output_set *set, const char *name, const th_bar_chart *chart,
                                 gboolean svg, GError **error)
{
    th_atomic_file *file = th_output_set_open(set, name, error);
    if (!file)
        return FALSE;
    const char *path = th_atomic_file_path(file);
    FILE *stream = th_atomic_file_stream(file);
    double height = chart_height(chart);
    cairo_surface_t *surface =
        svg ? cairo_svg_surface_create_for_stream(write_to_stream, stream, WIDTH, height)
            : cairo_image_surface_create(CAIRO_FORMAT_ARGB32, WIDTH, (int)height);
    cairo_t *cr = cairo_create(surface);
    draw_chart(cr, chart, height);
    cairo_status_t status = cairo_status(cr);
    cairo_destroy(cr);
    if (status == CAIRO_STATUS_SUCCESS && !svg)
        status = cairo_surface_write_to_png_stream(surface, write_to_stream, stream);
    cairo_surface_finish(surface); /* an SVG surface writes its end here */
    if (status == CAIRO_STATUS_SUCCESS)
        status = cairo_surface_status(surface);
    cairo_surface_destroy(surface);
    if (cairo_failed(status, path, error)) {
        th_atomic_file_abort(file);
        return FALSE;
    }
    return th_output_set_finish_and_add(set, file, error);
}

gboolean th_bar_chart_stage(const th_bar_chart *chart, th_output_set *set, const char *stem,
                            GError **error)
{
    g_return_val_if_fail(chart->n_groups > 0 && chart->n_series > 0 && chart->n_stack > 0,
                         FALSE);
    g_autofree char *png = g_strconcat(stem, ".png", NULL);
    g_autofree char *svg = g_strconcat(stem, ".svg", NULL);
    return write_atomically(set, png, chart, FALSE, error) &&
           write_atomically(set, svg, chart, TRUE, error);
}

/* ---- The comparison's charts ------------------------------------------- */

typedef struct comparison_data {
    const th_compare_result *result;
    guint n_tensors, n_backends;
    GPtrArray *groups, *series; /* char* */
    GPtrArray *notes;           /* char*, [tensor][backend] */
    char *subtitle;        /* for the timing charts */
    char *memory_subtitle; /* the same without the timing settings */
    gboolean by_backend;
} comparison_data;

static const th_compare_run *run_at(const comparison_data *d, guint tensor, guint backend)
{
    const th_compare_tensor *t = g_ptr_array_index(d->result->tensors, tensor);
    return g_ptr_array_index(t->runs, backend);
}

static void comparison_data_init(comparison_data *d, const th_compare_result *result)
{
    d->result = result;
    d->n_tensors = result->tensors->len;
    d->n_backends = result->geomeans->len;
    d->by_backend = strcmp(result->timer, "backend") == 0;
    d->groups = g_ptr_array_new_with_free_func(g_free);
    d->series = g_ptr_array_new_with_free_func(g_free);
    d->notes = g_ptr_array_new_with_free_func(g_free);
    for (guint t = 0; t < d->n_tensors; t++) {
        const th_compare_tensor *tensor = g_ptr_array_index(result->tensors, t);
        g_ptr_array_add(d->groups, g_strdup(tensor->label));
    }
    for (guint b = 0; b < d->n_backends; b++) {
        const th_compare_geomean *geomean = g_ptr_array_index(result->geomeans, b);
        gboolean is_baseline = strcmp(geomean->label, result->baseline) == 0;
        g_ptr_array_add(d->series, g_strdup_printf("%s%s", geomean->label,
                                                   is_baseline ? " (baseline)" : ""));
    }
    for (guint t = 0; t < d->n_tensors; t++) {
        for (guint b = 0; b < d->n_backends; b++) {
            const th_compare_run *run = run_at(d, t, b);
            g_ptr_array_add(d->notes, g_strdup(th_compare_status_name(run->status)));
        }
    }
    g_autofree char *date = g_strndup(result->date, 10);
    const char *devices = *result->devices ? result->devices : "device not reported";
    d->subtitle = g_strdup_printf("%s  |  %s  |  rank %u  |  median of %u %s  |  %s", devices,
                                  date, result->rank, result->repeats,
                                  th_plural(result->repeats, "run", "runs"),
                                  d->by_backend ? "backends' own timers" : "host wall time");
    d->memory_subtitle = g_strdup_printf("%s  |  %s  |  rank %u", devices, date, result->rank);
}

static void comparison_data_clear(comparison_data *d)
{
    g_ptr_array_unref(d->groups);
    g_ptr_array_unref(d->series);
    g_ptr_array_unref(d->notes);
    g_free(d->subtitle);
    g_free(d->memory_subtitle);
}

static const th_compare_stat *timed(const comparison_data *d, const th_compare_stat *host,
                                    const th_compare_stat *own)
{
    return d->by_backend ? own : host;
}

static gboolean write_total_time(const comparison_data *d, th_output_set *set, GError **error)
{
    gsize n = (gsize)d->n_tensors * d->n_backends;
    g_autofree double *values = g_new(double, n);
    g_autofree double *low = g_new(double, n);
    g_autofree double *high = g_new(double, n);
    for (guint t = 0; t < d->n_tensors; t++) {
        for (guint b = 0; b < d->n_backends; b++) {
            const th_compare_run *run = run_at(d, t, b);
            const th_compare_stat *stat = timed(d, &run->total_host, &run->total_backend);
            gsize i = (gsize)t * d->n_backends + b;
            gboolean ok = run->status == TH_COMPARE_OK && stat->median > 0.0;
            values[i] = ok ? stat->median : NAN;
            low[i] = ok ? stat->min : -1.0;
            high[i] = ok ? stat->max : -1.0;
        }
    }
    gboolean cpd = strcmp(d->result->job, "cpd") == 0;
    gboolean poisson = cpd && d->result->model == TH_MODEL_POISSON;
    th_bar_chart chart = {
        .title = poisson ? "Generalized MTTKRP time per CP-APR outer iteration (Poisson), all "
                           "modes, per tensor and backend"
                 : cpd   ? "MTTKRP time per CP-ALS iteration, all modes, per tensor and backend"
                         : "MTTKRP time over all modes, per tensor and backend",
        .subtitle = d->subtitle,
        .y_label = "time, all modes",
        .footnote = "Bars: median; whiskers: min and max of the timed runs. Tensors marked "
                    "(synthetic) are generated, FROSTT-shaped.",
        .unit = TH_CHART_SECONDS,
        .log_scale = TRUE,
        .n_groups = d->n_tensors,
        .groups = (const char *const *)d->groups->pdata,
        .n_series = d->n_backends,
        .series = (const char *const *)d->series->pdata,
        .n_stack = 1,
        .values = values,
        .low = low,
        .high = high,
        .notes = (const char *const *)d->notes->pdata,
    };
    return th_bar_chart_stage(&chart, set, "time-total", error);
}

static gboolean write_per_mode(const comparison_data *d, th_output_set *set, GError **error)
{
    guint max_modes = 1;
    for (guint t = 0; t < d->n_tensors; t++) {
        const th_compare_tensor *tensor = g_ptr_array_index(d->result->tensors, t);
        max_modes = MAX(max_modes, tensor->nmodes);
    }
    gsize n = (gsize)d->n_tensors * d->n_backends * max_modes;
    g_autofree double *values = g_new(double, n);
    for (guint t = 0; t < d->n_tensors; t++) {
        for (guint b = 0; b < d->n_backends; b++) {
            const th_compare_run *run = run_at(d, t, b);
            for (guint m = 0; m < max_modes; m++) {
                gsize i = ((gsize)t * d->n_backends + b) * max_modes + m;
                if (run->status != TH_COMPARE_OK || !run->modes) {
                    values[i] = NAN;
                } else if (m >= run->nmodes) {
                    values[i] = 0.0; /* a tensor of fewer modes */
                } else {
                    const th_compare_mode *mode = &run->modes[m];
                    double v = timed(d, &mode->host, &mode->backend)->median;
                    values[i] = v >= 0.0 ? v : NAN;
                }
            }
        }
    }
    g_autoptr(GPtrArray) modes = g_ptr_array_new_with_free_func(g_free);
    for (guint m = 0; m < max_modes; m++)
        g_ptr_array_add(modes, g_strdup_printf("mode %u", m + 1));
    th_bar_chart chart = {
        .title = "MTTKRP time per mode (stacked), per tensor and backend",
        .subtitle = d->subtitle,
        .y_label = "time",
        .footnote = "Each bar stacks the median time of each mode's MTTKRP; one panel per "
                    "tensor, each with its own scale.",
        .unit = TH_CHART_SECONDS,
        .panels = TRUE,
        .n_groups = d->n_tensors,
        .groups = (const char *const *)d->groups->pdata,
        .n_series = d->n_backends,
        .series = (const char *const *)d->series->pdata,
        .n_stack = max_modes,
        .stack = (const char *const *)modes->pdata,
        .values = values,
        .notes = (const char *const *)d->notes->pdata,
    };
    return th_bar_chart_stage(&chart, set, "time-per-mode", error);
}

static gboolean write_memory(const comparison_data *d, th_output_set *set, GError **error)
{
    static const char *const parts[] = {"tensor copies", "factors and results", "workspace"};
    gsize n = (gsize)d->n_tensors * d->n_backends * G_N_ELEMENTS(parts);
    g_autofree double *values = g_new(double, n);
    for (guint t = 0; t < d->n_tensors; t++) {
        for (guint b = 0; b < d->n_backends; b++) {
            const th_compare_run *run = run_at(d, t, b);
            gsize i = ((gsize)t * d->n_backends + b) * G_N_ELEMENTS(parts);
            gboolean ran = run->status == TH_COMPARE_OK;
            const th_backend_facts *f = run->facts;
            values[i] = ran && f ? (double)f->tensor_bytes : NAN;
            values[i + 1] = ran && f ? (double)f->factor_bytes : NAN;
            values[i + 2] = ran && f ? (double)f->workspace_bytes : NAN;
        }
    }
    th_bar_chart chart = {
        .title = "Memory held by each backend, per tensor",
        .subtitle = d->memory_subtitle,
        .y_label = "memory",
        .footnote = "As the backends report it (th_runtime_info): device memory on a GPU, "
                    "host memory on the CPU.",
        .unit = TH_CHART_BYTES,
        .panels = TRUE,
        .n_groups = d->n_tensors,
        .groups = (const char *const *)d->groups->pdata,
        .n_series = d->n_backends,
        .series = (const char *const *)d->series->pdata,
        .n_stack = G_N_ELEMENTS(parts),
        .stack = parts,
        .values = values,
        .notes = (const char *const *)d->notes->pdata,
    };
    return th_bar_chart_stage(&chart, set, "memory", error);
}

gboolean th_charts_stage_comparison(const th_compare_result *result, th_output_set *set,
                                    GError **error)
{
    if (result->tensors->len == 0 || result->geomeans->len == 0)
        return TRUE; /* nothing to draw */
    comparison_data d;
    comparison_data_init(&d, result);
    gboolean ok = write_total_time(&d, set, error) && write_per_mode(&d, set, error)
                  && write_memory(&d, set, error);
    comparison_data_clear(&d);
    /* Drops cairo's font caches and fontconfig's state (both rebuilt on the
     * next use): no cairo object is alive any more, and leak checkers then
     * see no leak in a run that drew charts. */
    cairo_debug_reset_static_data();
    FcFini();
    return ok;
}
