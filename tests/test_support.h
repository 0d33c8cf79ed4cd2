/* Helpers shared by the tests: random sparse tensors and factors, a
 * brute-force dense MTTKRP to compare backends against, error measures, and
 * loading the cpu-reference plugin from the build tree.
 *
 * Everything here aborts the test (cmocka fail()) on misuse rather than
 * returning errors: a helper that silently degrades would hide a defect. */
#ifndef TH_TEST_SUPPORT_H
#define TH_TEST_SUPPORT_H

#include <glib.h>
#include <stdint.h>

#include "config/config.h"
#include "cpd/cp_als.h"
#include "plugin/plugin_loader.h"
#include "tensor/sptensor.h"

/* th_cp_als of `params` on the plugin at `plugin_path`, opened, planned
 * and loaded with `t` here (closed before returning); any step's error
 * fails the test with its message. */
th_cpd_result *th_test_cp_als_on(const char *plugin_path, const th_sptensor *t,
                                 const th_cpd_params *params);

/* A random tensor with exactly `nnz` distinct coordinates, chosen uniformly
 * among the prod(dims) cells (nnz <= prod(dims), which must fit in 63 bits),
 * and values uniform in +-[0.1, 1) (never zero, so densifying loses nothing).
 * Nonzeros come in random order, not sorted, as a backend may receive them.
 * The same (dims, nnz, rng state) gives the same tensor. */
th_sptensor *th_test_random_tensor(uint32_t nmodes, const uint32_t *dims, uint64_t nnz,
                                   GRand *rng);

/* Every cell of a dense box whose CP rank is exactly `rank`: factor entries
 * 0.1 + uniform [0, 1) from th_rng seeded with `seed` (positive, so no cell
 * is zero), nmodes <= 8. The same arguments give the same tensor. */
th_sptensor *th_test_planted_dense(const th_index *dims, uint32_t nmodes, uint32_t rank,
                                   uint64_t seed);

/* A 7 x 8 x 9 dense planted tensor (rank 2, seed 22) with every third
 * value negated: of both signs, so that constraints and l1 terms are
 * active. th_sptensor_free it. */
th_sptensor *th_test_mixed_signs(void);

/* A rows x cols row-major matrix with entries uniform in [-1, 1). g_free it. */
double *th_test_random_matrix(uint64_t rows, uint32_t cols, GRand *rng);

/* Random factors for every mode of `t`: factors[m] is dims[m] x rank.
 * Free with th_test_free_factors. */
double **th_test_random_factors(const th_sptensor *t, uint32_t rank, GRand *rng);
void th_test_free_factors(double **factors, uint32_t nmodes);

/* Number of cells prod(dims); fails the test if it exceeds `limit`. */
uint64_t th_test_dense_size(const th_sptensor *t, uint64_t limit);

/* The dense tensor, row-major with mode 0 slowest (cell of coordinates
 * (i_0, ..., i_{N-1}) at sum_m i_m * stride_m). g_free it. */
double *th_test_densify(const th_sptensor *t);

/* Brute-force MTTKRP in double over every cell of the dense tensor (zeros
 * included), independent of any sparse layout:
 *   out(i, r) = sum over cells with i_mode = i of X(cell) * prod_{m != mode} A_m(i_m, r).
 * `out` is dims[mode] x rank, row-major, overwritten. */
void th_test_dense_mttkrp(const th_sptensor *t, const double *dense, double *const *factors,
                          uint32_t rank, uint32_t mode, double *out);

/* ||a - b||_F / ||b||_F over n entries; ||a - b||_F when b is zero. */
double th_test_relative_error(const double *a, const double *b, uint64_t n);

/* A borrowed th_coo_tensor view of `t` (valid while `t` lives). */
void th_test_coo_view(const th_sptensor *t, th_coo_tensor *view);

/* The fit of the model in the output folder `dir` (lambda.mat, mode1.mat
 * ...) against `t`, computed independently of the CP-ALS code: <X,M> from
 * the nonzeros, ||M||^2 from the factors' Grams. */
double th_test_fit_from_files(const th_sptensor *t, const char *dir, uint32_t rank);

/* Fails the test unless the files in `dir` are in the published form
 * (libtensorhost/cpd/cp_model.h): columns of unit 2-norm (to the files' 9 digits),
 * lambda >= 0 and non-increasing, and in each component at most one mode
 * whose largest-magnitude entry is negative. */
void th_test_assert_published_form(const char *dir, const th_sptensor *t, uint32_t rank);

/* Removes `path` and, for a folder, everything under it (symbolic links are
 * removed, not followed); missing paths are ignored. For test scratch folders. */
void th_test_remove_tree(const char *path);

/* A test group's scratch folder, made by th_test_make_scratch (the group's
 * setup) and removed with its contents by th_test_remove_scratch (its
 * teardown); NULL outside the group. */
extern char *th_test_scratch;
int th_test_make_scratch(void **state);
int th_test_remove_scratch(void **state);

/* Loads TH_PLUGIN_DIR/cpu-reference.so with the host's services; fails the
 * test with the loader's message if that does not work. */
th_plugin *th_test_load_cpu_reference(void);

/* Loads the plugin at `path` (fails the test on error). */
th_plugin *th_test_load_plugin(const char *path);

/* Creates an instance from NULL-terminated key/value pairs, e.g.
 * th_test_create_instance(plugin, "threads", "2", NULL); fails the test with
 * the plugin's message if create() fails. */
th_instance *th_test_create_instance(const th_plugin *plugin, ...) G_GNUC_NULL_TERMINATED;

/* As th_test_create_instance, with host services whose is_cancelled says
 * a stop was requested at every check (in static storage, so they outlive
 * the instance; one plugin's instances at a time). */
th_instance *th_test_create_cancelled_instance(const th_plugin *plugin,
                                               ...) G_GNUC_NULL_TERMINATED;

/* create() -> load_tensor(t, rank) -> set_factor for every mode; fails the
 * test on any error. */
void th_test_load_and_set(const th_plugin *plugin, th_instance *instance,
                          const th_sptensor *t, uint32_t rank, double *const *factors);

/* The group fixture of the tests of cpu-reference's entry points: the
 * plugin, loaded once, and the group's random source. */
typedef struct th_test_cpu_fixture {
    th_plugin *plugin;
    GRand *rng;
} th_test_cpu_fixture;

/* A group setup's work: *state gets a fixture whose source is seeded with
 * `seed` (each test file its own, so its draws do not depend on another's).
 * Returns 0; a plugin that does not load fails the test. */
int th_test_cpu_fixture_setup(void **state, guint32 seed);
/* The group teardown of such a fixture. */
int th_test_cpu_fixture_teardown(void **state);

/* mttkrp() of every mode of `instance`, the results fetched: [nmodes]
 * dims[m] x rank arrays; free with th_test_free_factors. */
double **th_test_mttkrp_every_mode(const th_plugin *plugin, th_instance *instance,
                                   const th_sptensor *t, uint32_t rank);

/* Fails unless every mode's MTTKRP result in `instance` is still `results`
 * and every factor but `mode`'s still `factors`, bit for bit. */
void th_test_assert_only_factor_changed(const th_plugin *plugin, th_instance *instance,
                                        const th_sptensor *t, uint32_t rank,
                                        double *const *results, double *const *factors,
                                        uint32_t mode);

/* Asserts `status` is TH_OK, failing with the plugin's message otherwise. */
#define th_test_assert_ok(status, err)                                                   \
    do {                                                                                 \
        th_status th_test_status_ = (status);                                            \
        if (th_test_status_ != TH_OK)                                                    \
            fail_msg("%s:%d: %s -> %s: %s", __FILE__, __LINE__, #status,                \
                     th_status_name(th_test_status_), (err));                            \
    } while (0)

/* What a program run wrote and how it ended: the exit code, or 128 + the
 * signal that ended it, as a shell reports it. */
typedef struct th_test_run {
    int status;
    char *out, *err;
} th_test_run;

/* Runs `program` with `args` (NULL-terminated, after the program's name),
 * capturing its standard output and error; fails the test when it cannot
 * be started. th_test_run_clear the result. */
th_test_run th_test_run_program(const char *program, const char *const *args);
void th_test_run_clear(th_test_run *r);

/* The value of option `key` among th_config_option pointers, or NULL. */
const char *th_test_option_value(const GPtrArray *options, const char *key);

#endif
