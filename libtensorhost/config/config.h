/* The run configuration: a TOML file (through the toml++ shim), validated
 * into typed fields, with --set KEY=VALUE overrides applied on top. */
#ifndef TH_CONFIG_H
#define TH_CONFIG_H

#include <glib.h>
#include <stdint.h>

#include "config/config_types.h"

/* One [[compare.tensor]]: a tensor file, or a synthetic tensor of a FROSTT
 * preset's shape (libtensorhost/tensor/synth.h). */
typedef struct th_compare_tensor_config {
    char *label;     /* default: the file name without .tns/.gz/.txt, or the preset's
                        name; a synthetic tensor's label always ends in " (synthetic)" */
    char *path;      /* resolved; NULL for a synthetic tensor */
    char *synthetic; /* a preset name (th_synth_find_preset); NULL for a file */
    uint64_t nnz;    /* synthetic: target nonzeros; 0 = the preset's */
    uint64_t seed;   /* synthetic: the generator's seed, default 1 */
    char *where;     /* "FILE:LINE:COLUMN" of the table, for messages */
} th_compare_tensor_config;

/* One sweep = { KEY = [values] } entry of a [[compare.backend]]. */
typedef struct th_config_sweep {
    char *key;
    GPtrArray *values; /* char*, rendered like [backend.options] values */
    GArray *kinds;     /* th_config_value_kind of each value */
} th_config_sweep;

/* One backend of a comparison. A [[compare.backend]] with a sweep is
 * expanded into one of these per combination of the swept values, labelled
 * "LABEL[KEY=VALUE,...]", with the swept values appended to its options. */
typedef struct th_compare_backend_config {
    char *label;        /* default: the plugin's name (a path's file name without .so) */
    char *plugin;       /* as backend.plugin: a name, "auto", or a resolved path */
    GPtrArray *options; /* th_config_option*, file order, then the swept values */
    GPtrArray *sweep;   /* th_config_sweep*; empty once expanded */
    char *where;        /* "FILE:LINE:COLUMN" of the table, for messages */
} th_compare_backend_config;

/* [compare]: several backends (and tensors) run on the same inputs,
 * verified against a baseline, timed and plotted. */
typedef struct th_compare_config {
    char *job;         /* "mttkrp" (default) or "cpd" */
    char *baseline;    /* a backend label; default the first backend's */
    uint32_t repeats;  /* timed runs, default 10 */
    uint32_t warmup;   /* untimed runs before, default 2 */
    double tolerance;  /* relative Frobenius error vs the baseline / |fit difference|, 1e-4 */
    uint32_t rank;     /* default cpd.rank */
    char *timer;       /* "host" (default) or "backend": the time speedups and charts use */
    GPtrArray *tensors;  /* th_compare_tensor_config*; tensor.path when the file has none */
    GPtrArray *backends; /* th_compare_backend_config*, sweeps expanded, at least one */
    /* [compare.output] */
    char *output_dir;  /* resolved; default output.dir */
    gboolean charts;   /* draw PNG and SVG charts, default true */
} th_compare_config;

/* A key that takes one of its choices for every mode, or an array of them,
 * one per mode (cpd.constraints): `items` holds the one value (listed
 * FALSE) or the values in mode order (listed TRUE); never empty. */
typedef struct th_config_choices {
    GPtrArray *items; /* char* */
    gboolean listed;
} th_config_choices;

/* A number for every mode, or an array of them, one per mode (cpd.l1):
 * `values` (double) holds the one value (listed FALSE) or the values in
 * mode order (listed TRUE); never empty. */
typedef struct th_config_numbers {
    GArray *values;
    gboolean listed;
} th_config_numbers;

typedef struct th_config {
    char *source_path; /* the config file as given, for messages */

    /* [tensor] */
    char *tensor_path; /* resolved: relative paths are relative to the config file */
    /* "zero" (default): the entries the file does not list are zeros (CP-ALS,
     * CP-APR); "unlisted": they are unknown, and the least-squares model is
     * fitted to the listed ones only (tensor completion). */
    char *missing;
    /* Completion only: the fraction of the listed entries kept out of
     * training, in [0, 1) (default 0). */
    double holdout;

    /* [cpd] */
    uint32_t rank;      /* default 16, 1..4096 */
    uint32_t max_iters; /* default 50, >= 1 */
    double tolerance;   /* default 1e-5, >= 0 */
    uint64_t seed;      /* default 42, 0..INT64_MAX */
    char *update;       /* "auto" (default), "sweep", "mode" or "host": th_update_path_name() */
    /* "least-squares" (default) or "poisson": th_cpd_model_name(). With
     * "poisson", tolerance (the KKT tolerance) defaults to 1e-4 and
     * max_iters to 1000 (pyttb's cp_apr), update must be "auto", and the
     * backend options may name one GPU only. */
    char *model;
    /* "none" (default) or "nonneg" for every mode, or one of them per mode
     * (an array, checked against the tensor's order when the run is
     * planned): factors constrained nonnegative (least squares only; each
     * constrained mode's update by hierarchical ALS, in the backend or on
     * the host). */
    th_config_choices constraints;
    /* The ridge weight (default 0, >= 0; least squares: CP-ALS's
     * l2/2 ||A_n||_F^2 in each mode's update, completion's l2 of
     * sum_n ||A_n||_F^2). */
    double l2;
    /* CP-ALS's l1 (lasso) weight of sum |A_n| in each mode's update, for
     * every mode or one per mode (an array, checked against the tensor's
     * order when the run is planned); default 0, each >= 0; least squares
     * without tensor.missing = "unlisted" only. */
    th_config_numbers l1;
    /* CP-ALS's hierarchical-ALS passes per mode update (least squares
     * without tensor.missing = "unlisted", with a mode updated by
     * coordinate descent): at most hals_passes (default 5, >= 1), as the
     * mode's cost allows with budget hals_budget (default 0.5, >= 0;
     * als_step.h's th_hals_passes). */
    uint32_t hals_passes;
    double hals_budget;
    /* CP-APR's (model "poisson" only; setting one with another model is an
     * error): inner iterations per mode (default 10, >= 1), the offset of
     * inadmissible zeros (0.01, >= 0), what counts as zero there (1e-10,
     * >= 0), the floor of the model in divisions (1e-10, > 0). */
    uint32_t max_inner_iters;
    double kappa;
    double kappa_tolerance;
    double epsilon;
    /* A factor entry below kappa_tolerance is an inadmissible zero where
     * Phi exceeds this (default 1, >= 0). */
    double phi_threshold;

    /* [backend] */
    char *plugin;              /* default "auto": a name, or a path when it contains '/' or
                                  ends in ".so" (then resolved) */
    GPtrArray *search_path;    /* char*, resolved directories, searched before the others */
    /* th_config_option*, in file order: the scalars of [backend.options],
     * for whichever plugin runs. */
    GPtrArray *plugin_options;
    /* th_config_plugin_options*: the [backend.options.NAME] tables. */
    GPtrArray *plugin_option_tables;

    /* [output] */
    char *output_dir;      /* resolved; default "tensorhost-out" next to the config file */
    gboolean write_factors; /* default true */
    char *output_format;    /* "text" (default), "npy" or "both": the factor files' format */

    /* [compare]: NULL unless the config has that section. Then tensor.path
     * may be left out (when [[compare.tensor]] tables name the tensors), and
     * backend.plugin, backend.options, output.write_factors and output.format
 * must be. */
    th_compare_config *compare;

    /* Dotted key -> where its value came from ("FILE:LINE:COLUMN" or
     * "--set ARG"), for every key the file or an override set. */
    GHashTable *where;
} th_config;

/* Loads `path` and applies `overrides` ("section.key=value", the value in
 * TOML syntax, bare words taken as strings; NULL-terminated, may be NULL).
 * Relative paths in the file are relative to the file's directory; relative
 * paths in overrides are relative to the current directory.
 * Every error names FILE:LINE:COLUMN (or the --set argument), the key, and
 * what was expected. Unknown keys are errors with the nearest valid key. */
th_config *th_config_load(const char *path, const char *const *overrides, GError **error);
/* The same for a document already in memory: `length` bytes of `text` (-1:
 * NUL-terminated). `name` stands for the file in messages, and relative
 * paths are resolved against its directory. */
th_config *th_config_load_from_string(const char *name, const char *text, gssize length,
                                      const char *const *overrides, GError **error);
void th_config_free(th_config *config);

/* Where `key` (dotted, e.g. "tensor.path") was set: "FILE:LINE:COLUMN",
 * "--set ARG", or, for a key left at its default, the config file's name.
 * Owned by the config. Every error about a config value starts with it. */
const char *th_config_where(const th_config *config, const char *key);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(th_config, th_config_free)

/* One resolved value as th_config_foreach hands it out; every member is
 * borrowed for the duration of the call. */
typedef struct th_config_value {
    th_config_value_kind kind;
    const char *text;       /* every kind, as text: "16", "1e-05", "true", "[\"/p\"]" */
    int64_t integer;        /* INTEGER */
    double number;          /* NUMBER */
    gboolean boolean;       /* BOOLEAN */
    const GPtrArray *items; /* STRING_LIST: char* */
    const GArray *numbers;  /* NUMBER_LIST: double */
} th_config_value;

/* Calls `fn` for every schema key with its resolved value, in schema order
 * ("cpd.rank" -> the integer 16; backend options as "backend.options.KEY"
 * and a [backend.options.NAME] table's as "backend.options.NAME.KEY", with
 * the type they were written with; the [compare] keys only when the
 * config has that section, array elements as "compare.backend[0].label",
 * sweeps as their expanded options; unset optional strings are left out).
 * For reports. */
void th_config_foreach(const th_config *config,
                       void (*fn)(const char *key, const th_config_value *value, void *user_data),
                       void *user_data);

#endif
