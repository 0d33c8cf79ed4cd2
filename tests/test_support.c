#include "test_support.h"

#include "base/rng.h"

#include <glib/gstdio.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/wait.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/log.h"
#include "output/factor_io.h"
#include "cpd/dense.h"

/* ------------------------------------------------------------------------ */
/* Random data                                                               */
/* ------------------------------------------------------------------------ */

static uint64_t cell_count(uint32_t nmodes, const uint32_t *dims)
{
    uint64_t cells = 1;
    for (uint32_t m = 0; m < nmodes; m++) {
        if (dims[m] == 0 || cells > (UINT64_C(1) << 62) / dims[m])
            fail_msg("th_test: dims give more than 2^62 cells (or a zero dimension)");
        cells *= dims[m];
    }
    return cells;
}

static uint64_t random_below(GRand *rng, uint64_t bound)
{
    /* Two 32-bit draws: bounds above 2^32 occur for sparse 5- and 6-mode
     * tensors. The modulo bias is irrelevant for test data. */
    uint64_t x = ((uint64_t)g_rand_int(rng) << 32) | g_rand_int(rng);
    return x % bound;
}

th_sptensor *th_test_random_tensor(uint32_t nmodes, const uint32_t *dims, uint64_t nnz,
                                   GRand *rng)
{
    uint64_t cells = cell_count(nmodes, dims);
    if (nnz < 1 || nnz > cells)
        fail_msg("th_test_random_tensor: %" G_GUINT64_FORMAT " nonzeros do not fit in %"
                 G_GUINT64_FORMAT " cells", nnz, cells);

    /* Floyd's sampling: nnz distinct cells, uniformly, in nnz steps. */
    g_autoptr(GHashTable) chosen = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    g_autofree uint64_t *order = g_new(uint64_t, nnz);
    uint64_t count = 0;
    for (uint64_t j = cells - nnz; j < cells; j++) {
        uint64_t pick = random_below(rng, j + 1);
        gint64 key = (gint64)pick;
        if (g_hash_table_contains(chosen, &key))
            pick = j;
        gint64 *stored = g_new(gint64, 1);
        *stored = (gint64)pick;
        g_hash_table_add(chosen, stored);
        order[count++] = pick;
    }
    /* Floyd's order is biased towards high cells at the end: shuffle, so
     * backends see nonzeros in no particular order. */
    for (uint64_t k = nnz - 1; k > 0; k--) {
        uint64_t swap = random_below(rng, k + 1);
        uint64_t tmp = order[k];
        order[k] = order[swap];
        order[swap] = tmp;
    }

    th_sptensor *t = th_sptensor_new(nmodes, nnz);
    memcpy(t->dims, dims, nmodes * sizeof *t->dims);
    for (uint64_t k = 0; k < nnz; k++) {
        uint64_t cell = order[k];
        for (uint32_t m = nmodes; m-- > 0;) {
            t->indices[m][k] = (th_index)(cell % dims[m]);
            cell /= dims[m];
        }
        double magnitude = g_rand_double_range(rng, 0.1, 1.0);
        t->values[k] = g_rand_boolean(rng) ? magnitude : -magnitude;
    }
    return t;
}

double *th_test_random_matrix(uint64_t rows, uint32_t cols, GRand *rng)
{
    double *m = g_new(double, rows * cols);
    for (uint64_t i = 0; i < rows * cols; i++)
        m[i] = g_rand_double_range(rng, -1.0, 1.0);
    return m;
}

double **th_test_random_factors(const th_sptensor *t, uint32_t rank, GRand *rng)
{
    double **factors = g_new0(double *, t->nmodes);
    for (uint32_t m = 0; m < t->nmodes; m++)
        factors[m] = th_test_random_matrix(t->dims[m], rank, rng);
    return factors;
}

void th_test_free_factors(double **factors, uint32_t nmodes)
{
    if (factors == NULL)
        return;
    for (uint32_t m = 0; m < nmodes; m++)
        g_free(factors[m]);
    g_free(factors);
}

/* ------------------------------------------------------------------------ */
/* Dense reference                                                           */
/* ------------------------------------------------------------------------ */

uint64_t th_test_dense_size(const th_sptensor *t, uint64_t limit)
{
    uint64_t cells = cell_count(t->nmodes, t->dims);
    if (cells > limit)
        fail_msg("th_test: the dense tensor would have %" G_GUINT64_FORMAT
                 " cells, more than the %" G_GUINT64_FORMAT " allowed",
                 cells, limit);
    return cells;
}

/* Cells allowed in a dense copy: 2^26 doubles = 512 MiB would already be
 * absurd for a test; small random tensors stay far below. */
#define DENSE_LIMIT (UINT64_C(1) << 26)

double *th_test_densify(const th_sptensor *t)
{
    uint64_t cells = th_test_dense_size(t, DENSE_LIMIT);
    double *dense = g_new0(double, cells);
    for (uint64_t k = 0; k < t->nnz; k++) {
        uint64_t cell = 0;
        for (uint32_t m = 0; m < t->nmodes; m++)
            cell = cell * t->dims[m] + t->indices[m][k];
        dense[cell] += t->values[k];
    }
    return dense;
}

void th_test_dense_mttkrp(const th_sptensor *t, const double *dense, double *const *factors,
                          uint32_t rank, uint32_t mode, double *out)
{
    uint64_t cells = th_test_dense_size(t, DENSE_LIMIT);
    memset(out, 0, (size_t)t->dims[mode] * rank * sizeof *out);
    g_autofree uint32_t *coord = g_new0(uint32_t, t->nmodes);
    for (uint64_t cell = 0; cell < cells; cell++) {
        /* coord follows cell like an odometer, last mode fastest. */
        for (uint32_t r = 0; r < rank; r++) {
            double term = dense[cell];
            for (uint32_t m = 0; m < t->nmodes; m++)
                if (m != mode)
                    term *= factors[m][(size_t)coord[m] * rank + r];
            out[(size_t)coord[mode] * rank + r] += term;
        }
        for (uint32_t m = t->nmodes; m-- > 0;) {
            if (++coord[m] < t->dims[m])
                break;
            coord[m] = 0;
        }
    }
}

double th_test_relative_error(const double *a, const double *b, uint64_t n)
{
    double diff = 0.0, ref = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        diff += (a[i] - b[i]) * (a[i] - b[i]);
        ref += b[i] * b[i];
    }
    /* NaN in a must not compare as "small": diff is NaN then, and NaN < x is false. */
    return ref > 0.0 ? sqrt(diff) / sqrt(ref) : sqrt(diff);
}

void th_test_coo_view(const th_sptensor *t, th_coo_tensor *view)
{
    memset(view, 0, sizeof *view);
    view->struct_size = (uint32_t)sizeof *view;
    view->nmodes = t->nmodes;
    view->nnz = t->nnz;
    view->dims = t->dims;
    view->indices = (const uint32_t *const *)t->indices;
    view->values = t->values;
    double sum = 0.0;
    for (uint64_t k = 0; k < t->nnz; k++)
        sum += t->values[k] * t->values[k];
    view->norm_squared = sum;
}

/* ------------------------------------------------------------------------ */
/* Plugins                                                                   */
/* ------------------------------------------------------------------------ */

th_plugin *th_test_load_plugin(const char *path)
{
    th_host_services services = th_host_services_make();
    g_autoptr(GError) error = NULL;
    th_plugin *plugin = th_plugin_load(path, &services, &error);
    if (plugin == NULL)
        fail_msg("loading %s: %s", path, error ? error->message : "(no error)");
    return plugin;
}

th_plugin *th_test_load_cpu_reference(void)
{
    return th_test_load_plugin(TH_PLUGIN_DIR "/cpu-reference.so");
}

static th_instance *create_instance(const th_plugin *plugin, const th_host_services *services,
                                    va_list args)
{
    g_autoptr(GArray) options = g_array_new(FALSE, TRUE, sizeof(th_option));
    for (const char *key = va_arg(args, const char *); key != NULL;
         key = va_arg(args, const char *)) {
        th_option option = {.key = key, .value = va_arg(args, const char *)};
        if (option.value == NULL)
            fail_msg("th_test_create_instance: option '%s' has no value", key);
        g_array_append_val(options, option);
    }

    th_instance *instance = NULL;
    char err[TH_ERROR_SIZE] = "";
    th_test_assert_ok(plugin->entry.create((const th_option *)options->data,
                                           options->len, services, &instance, err),
                      err);
    assert_non_null(instance);
    return instance;
}

th_instance *th_test_create_instance(const th_plugin *plugin, ...)
{
    va_list args;
    va_start(args, plugin);
    th_instance *instance = create_instance(plugin, &plugin->services, args);
    va_end(args);
    return instance;
}

static int32_t always_cancelled(void *host_data)
{
    (void)host_data;
    return 1;
}

th_instance *th_test_create_cancelled_instance(const th_plugin *plugin, ...)
{
    /* The services must outlive the instance (plugin.h, create()): static,
     * and the same for every instance of the plugin. */
    static th_host_services services;
    services = plugin->services;
    services.is_cancelled = always_cancelled;
    va_list args;
    va_start(args, plugin);
    th_instance *instance = create_instance(plugin, &services, args);
    va_end(args);
    return instance;
}

int th_test_cpu_fixture_setup(void **state, guint32 seed)
{
    th_test_cpu_fixture *f = g_new0(th_test_cpu_fixture, 1);
    f->plugin = th_test_load_cpu_reference();
    f->rng = g_rand_new_with_seed(seed);
    *state = f;
    return 0;
}

int th_test_cpu_fixture_teardown(void **state)
{
    th_test_cpu_fixture *f = *state;
    th_plugin_unload(f->plugin);
    g_rand_free(f->rng);
    g_free(f);
    return 0;
}

double **th_test_mttkrp_every_mode(const th_plugin *plugin, th_instance *instance,
                                   const th_sptensor *t, uint32_t rank)
{
    double **results = g_new(double *, t->nmodes);
    char err[TH_ERROR_SIZE] = "";
    for (uint32_t m = 0; m < t->nmodes; m++) {
        results[m] = g_new(double, (size_t)t->dims[m] * rank);
        th_test_assert_ok(plugin->entry.mttkrp(instance, m, err), err);
        th_test_assert_ok(plugin->entry.get_mttkrp_result(instance, m, results[m], err), err);
    }
    return results;
}

void th_test_assert_only_factor_changed(const th_plugin *plugin, th_instance *instance,
                                        const th_sptensor *t, uint32_t rank,
                                        double *const *results, double *const *factors,
                                        uint32_t mode)
{
    char err[TH_ERROR_SIZE] = "";
    for (uint32_t m = 0; m < t->nmodes; m++) {
        const size_t size = (size_t)t->dims[m] * rank;
        g_autofree double *after = g_new(double, size);
        th_test_assert_ok(plugin->entry.get_mttkrp_result(instance, m, after, err), err);
        assert_memory_equal(results[m], after, size * sizeof(double));
        if (m == mode)
            continue;
        th_test_assert_ok(plugin->entry.get_factor(instance, m, after, err), err);
        assert_memory_equal(factors[m], after, size * sizeof(double));
    }
}

void th_test_load_and_set(const th_plugin *plugin, th_instance *instance,
                          const th_sptensor *t, uint32_t rank, double *const *factors)
{
    th_coo_tensor view;
    th_test_coo_view(t, &view);
    char err[TH_ERROR_SIZE] = "";
    th_test_assert_ok(plugin->entry.load_tensor(instance, &view, rank, err), err);
    for (uint32_t m = 0; m < t->nmodes; m++)
        th_test_assert_ok(plugin->entry.set_factor(instance, m, factors[m], err), err);
}

th_sptensor *th_test_planted_dense(const th_index *dims, uint32_t nmodes, uint32_t rank,
                                  uint64_t seed)
{
    th_rng rng;
    th_rng_seed(&rng, seed);
    double *factors[8];
    uint64_t nnz = 1;
    for (uint32_t m = 0; m < nmodes; ++m) {
        nnz *= dims[m];
        factors[m] = g_new(double, (size_t)dims[m] * rank);
        for (uint64_t k = 0; k < (uint64_t)dims[m] * rank; ++k)
            factors[m][k] = 0.1 + th_rng_uniform(&rng);
    }
    th_sptensor *t = th_sptensor_new(nmodes, nnz);
    for (uint32_t m = 0; m < nmodes; ++m)
        t->dims[m] = dims[m];
    for (uint64_t k = 0; k < nnz; ++k) {
        uint64_t rest = k;
        double value = 0.0;
        for (uint32_t m = nmodes; m-- > 0;) {
            t->indices[m][k] = (th_index)(rest % dims[m]);
            rest /= dims[m];
        }
        for (uint32_t r = 0; r < rank; ++r) {
            double product = 1.0;
            for (uint32_t m = 0; m < nmodes; ++m)
                product *= factors[m][(size_t)t->indices[m][k] * rank + r];
            value += product;
        }
        t->values[k] = value;
    }
    for (uint32_t m = 0; m < nmodes; ++m)
        g_free(factors[m]);
    return t;
}

th_sptensor *th_test_mixed_signs(void)
{
    const th_index dims[] = {7, 8, 9};
    th_sptensor *t = th_test_planted_dense(dims, 3, 2, 22);
    for (uint64_t k = 0; k < t->nnz; ++k)
        t->values[k] = (k % 3 == 0 ? -1.0 : 1.0) * t->values[k];
    return t;
}

void th_test_remove_tree(const char *path)
{
    if (g_file_test(path, G_FILE_TEST_IS_DIR) && !g_file_test(path, G_FILE_TEST_IS_SYMLINK)) {
        g_autoptr(GDir) dir = g_dir_open(path, 0, NULL);
        for (const char *name; dir && (name = g_dir_read_name(dir));) {
            g_autofree char *child = g_build_filename(path, name, NULL);
            th_test_remove_tree(child);
        }
    }
    g_remove(path);
}

double th_test_fit_from_files(const th_sptensor *t, const char *dir, uint32_t rank)
{
    uint64_t rows = 0;
    uint32_t cols = 0;
    g_autoptr(GError) error = NULL;
    g_autofree char *lambda_path = g_build_filename(dir, "lambda.mat", NULL);
    g_autofree double *lambda = th_read_matrix(lambda_path, &rows, &cols, &error);
    assert_non_null(lambda);
    assert_int_equal(rows, rank);
    assert_int_equal(cols, 1);
    double *factors[TH_MAX_MODES];
    double *grams[TH_MAX_MODES];
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        g_autofree char *name = g_strdup_printf("mode%u.mat", m + 1);
        g_autofree char *path = g_build_filename(dir, name, NULL);
        factors[m] = th_read_matrix(path, &rows, &cols, &error);
        assert_non_null(factors[m]);
        assert_int_equal(rows, t->dims[m]);
        assert_int_equal(cols, rank);
        grams[m] = g_new(double, (size_t)rank * rank);
        th_dense_gram(factors[m], rows, rank, grams[m]);
    }
    double inner = 0.0, norm_x = 0.0;
    for (uint64_t k = 0; k < t->nnz; ++k) {
        double model = 0.0;
        for (uint32_t r = 0; r < rank; ++r) {
            double p = lambda[r];
            for (uint32_t m = 0; m < t->nmodes; ++m)
                p *= factors[m][(size_t)t->indices[m][k] * rank + r];
            model += p;
        }
        inner += t->values[k] * model;
        norm_x += t->values[k] * t->values[k];
    }
    g_autofree double *hadamard = g_new(double, (size_t)rank * rank);
    th_dense_hadamard_except(grams, t->nmodes, UINT32_MAX, rank, hadamard);
    double norm_m = 0.0;
    for (uint32_t r = 0; r < rank; ++r)
        for (uint32_t q = 0; q < rank; ++q)
            norm_m += lambda[r] * lambda[q] * hadamard[(size_t)r * rank + q];
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        g_free(factors[m]);
        g_free(grams[m]);
    }
    return 1.0 - sqrt(fmax(norm_x + norm_m - 2.0 * inner, 0.0)) / sqrt(norm_x);
}

void th_test_assert_published_form(const char *dir, const th_sptensor *t, uint32_t rank)
{
    uint64_t rows = 0;
    uint32_t cols = 0;
    g_autoptr(GError) error = NULL;
    g_autofree char *lambda_path = g_build_filename(dir, "lambda.mat", NULL);
    g_autofree double *lambda = th_read_matrix(lambda_path, &rows, &cols, &error);
    assert_non_null(lambda);
    for (uint32_t r = 0; r < rank; ++r) {
        assert_true(lambda[r] >= 0.0);
        if (r > 0 && lambda[r] > lambda[r - 1])
            fail_msg("lambda not sorted: lambda[%u] = %g > lambda[%u] = %g", r, lambda[r], r - 1,
                     lambda[r - 1]);
    }
    g_autofree uint32_t *negative_modes = g_new0(uint32_t, rank);
    for (uint32_t m = 0; m < t->nmodes; ++m) {
        g_autofree char *name = g_strdup_printf("mode%u.mat", m + 1);
        g_autofree char *path = g_build_filename(dir, name, NULL);
        g_autofree double *a = th_read_matrix(path, &rows, &cols, &error);
        assert_non_null(a);
        for (uint32_t r = 0; r < rank; ++r) {
            double sum_squares = 0.0, largest = 0.0;
            for (uint64_t i = 0; i < rows; ++i) {
                const double v = a[i * rank + r];
                sum_squares += v * v;
                if (fabs(v) > fabs(largest))
                    largest = v;
            }
            if (fabs(sqrt(sum_squares) - 1.0) > 1e-7)
                fail_msg("%s column %u has 2-norm %.10f, not 1", name, r + 1, sqrt(sum_squares));
            negative_modes[r] += largest < 0.0;
        }
    }
    for (uint32_t r = 0; r < rank; ++r)
        if (negative_modes[r] > 1)
            fail_msg("component %u: %u modes with a negative largest entry", r + 1,
                     negative_modes[r]);
}

char *th_test_scratch;

int th_test_make_scratch(void **state)
{
    (void)state;
    th_test_scratch = g_dir_make_tmp("th-test-XXXXXX", NULL);
    return th_test_scratch ? 0 : -1;
}

int th_test_remove_scratch(void **state)
{
    (void)state;
    th_test_remove_tree(th_test_scratch);
    g_clear_pointer(&th_test_scratch, g_free);
    return 0;
}

th_test_run th_test_run_program(const char *program, const char *const *args)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(argv, g_strdup(program));
    for (; *args; ++args)
        g_ptr_array_add(argv, g_strdup(*args));
    g_ptr_array_add(argv, NULL);
    th_test_run r = {0};
    g_autoptr(GError) error = NULL;
    int wait_status = 0;
    if (!g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &r.out,
                      &r.err, &wait_status, &error))
        fail_msg("cannot run %s: %s", program, error->message);
    r.status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
    return r;
}

void th_test_run_clear(th_test_run *r)
{
    g_free(r->out);
    g_free(r->err);
    r->out = r->err = NULL;
}

const char *th_test_option_value(const GPtrArray *options, const char *key)
{
    for (guint i = 0; i < options->len; i++) {
        const th_config_option *option = g_ptr_array_index(options, i);
        if (strcmp(option->key, key) == 0)
            return option->value;
    }
    return NULL;
}

th_cpd_result *th_test_cp_als_on(const char *plugin_path, const th_sptensor *t,
                                 const th_cpd_params *params)
{
    g_autoptr(GError) error = NULL;
    th_backend *backend = th_backend_open(plugin_path, NULL, NULL, NULL, &error);
    if (backend == NULL || !th_cpd_plan(backend, params, NULL, &error) ||
        !th_backend_load_tensor(backend, t, params->rank, &error))
        fail_msg("%s: %s", plugin_path, error->message);
    th_cpd_result *r = th_cp_als(backend, t, params, NULL, &error);
    th_backend_close(backend);
    if (r == NULL)
        fail_msg("%s: cp_als: %s", plugin_path, error->message);
    return r;
}
