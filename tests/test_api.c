#define _POSIX_C_SOURCE 200809L /* setenv, fork */
/* libtensorhost through its public header only, as a C user links it:
 * tensors from COO arrays and files, a backend by name, CP-ALS with a
 * callback that stops, the result in the published form, its warnings,
 * the log handler, and misuse. */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <tensorhost/tensorhost.h>

#define AMINOACID TH_TEST_DATA_DIR "/aminoacid.sptensor.txt"

static void expect_ok(int32_t status, const char *err)
{
    if (status != TENSORHOST_OK)
        fail_msg("%s: %s", tensorhost_status_name(status), err);
}

static tensorhost_backend *open_cpu(void)
{
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_backend *backend = NULL;
    const tensorhost_option threads = {"threads", "2"};
    expect_ok(tensorhost_backend_open("cpu-reference", TH_PLUGIN_DIR, &threads, 1, &backend, err),
              err);
    return backend;
}

static void test_version(void **state)
{
    (void)state;
    assert_int_equal(tensorhost_api_version() >> 16, TENSORHOST_API_VERSION_MAJOR);
    assert_int_equal(tensorhost_api_version() & 0xffff, TENSORHOST_API_VERSION_MINOR);
    assert_string_equal(tensorhost_version_string(), TH_VERSION);
    assert_string_equal(tensorhost_status_name(TENSORHOST_ERR_IO), "TENSORHOST_ERR_IO");
    assert_string_equal(tensorhost_status_name(12345), "?");
}

/* Duplicates are summed and the stats say so; bad arrays are refused with
 * the nonzero and mode at fault. */
static void test_tensor_from_coo(void **state)
{
    (void)state;
    const uint64_t dims[] = {2, 3, 4};
    const uint64_t indices[] = {0, 0, 0, 1, 2, 3, 0, 0, 0, 1, 1, 1};
    const double values[] = {1.0, 2.0, 0.5, -3.0};
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_tensor *t = NULL;
    expect_ok(tensorhost_tensor_new(3, dims, 4, indices, values, &t, err), err);
    tensorhost_tensor_stats stats = TENSORHOST_TENSOR_STATS_INIT;
    expect_ok(tensorhost_tensor_get_stats(t, &stats, err), err);
    assert_int_equal(stats.nmodes, 3);
    assert_int_equal(stats.nnz, 3);
    assert_int_equal(stats.duplicates_merged, 1);
    assert_int_equal(stats.dims[2], 4);
    assert_true(fabs(stats.norm - sqrt(1.5 * 1.5 + 4.0 + 9.0)) < 1e-12);
    tensorhost_tensor_free(t);

    const uint64_t out_of_range[] = {0, 0, 0, 1, 3, 3};
    tensorhost_tensor *bad = NULL;
    assert_int_equal(tensorhost_tensor_new(3, dims, 2, out_of_range, values, &bad, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "nonzero 1: index 3 in mode 1 is out of range [0, 3)"));
    assert_null(bad);
    const double not_finite[] = {1.0, NAN};
    assert_int_equal(tensorhost_tensor_new(3, dims, 2, indices, not_finite, &bad, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "nonzero 1: value nan is not finite"));
    assert_int_equal(tensorhost_tensor_new(1, dims, 2, indices, values, &bad, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_int_equal(tensorhost_tensor_new(3, dims, 0, indices, values, &bad, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);

    /* A tensor the host cannot hold is refused before the copy. */
    setenv("TH_TEST_HOST_FREE_BYTES", "40", 1);
    const int32_t refused = tensorhost_tensor_new(3, dims, 4, indices, values, &bad, err);
    unsetenv("TH_TEST_HOST_FREE_BYTES");
    assert_int_equal(refused, TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "a tensor of 4 nonzeros and 3 modes: need 80 B of memory for "
                             "their arrays, and 40 B is free (TH_TEST_HOST_FREE_BYTES)");
    assert_null(bad);

    /* The norm of values whose squares overflow a double is still finite. */
    const double huge[] = {3e200, 4e200, 0.0, 0.0};
    expect_ok(tensorhost_tensor_new(3, dims, 2, indices, huge, &t, err), err);
    expect_ok(tensorhost_tensor_get_stats(t, &stats, err), err);
    if (!(fabs(stats.norm / 5e200 - 1.0) < 1e-15))
        fail_msg("norm %g, expected 5e200", stats.norm);
    tensorhost_tensor_free(t);
}

static void test_tensor_read_errors(void **state)
{
    (void)state;
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_tensor *t = NULL;
    assert_int_equal(tensorhost_tensor_read("/nonexistent/x.tns", &t, err), TENSORHOST_ERR_IO);
    assert_non_null(strstr(err, "/nonexistent/x.tns"));
    assert_null(t);
}

static int32_t stop_after_two(uint32_t iteration, double fit, double delta, double seconds,
                              void *user_data)
{
    (void)fit, (void)delta, (void)seconds;
    *(uint32_t *)user_data = iteration;
    return iteration >= 2;
}

/* The result is the published model: unit columns, weights sorted, and its
 * fit, recomputed here from the arrays against the tensor, is the one
 * reported. */
static void test_cp_als_result(void **state)
{
    (void)state;
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_tensor *t = NULL;
    expect_ok(tensorhost_tensor_read(AMINOACID, &t, err), err);
    tensorhost_backend *backend = open_cpu();
    assert_string_equal(tensorhost_backend_id(backend), "cpu-reference");
    tensorhost_cpd_params params = TENSORHOST_CPD_PARAMS_INIT;
    params.rank = 3;
    params.max_iters = 20;
    params.tolerance = 0.0;
    tensorhost_cpd *r = NULL;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_non_null(strstr(tensorhost_backend_device(backend), "CPU"));
    assert_int_equal(tensorhost_cpd_status_of(r), TENSORHOST_CPD_MAX_ITERS);
    assert_int_equal(tensorhost_cpd_iterations(r), 20);
    assert_int_equal(tensorhost_cpd_nmodes(r), 3);
    assert_int_equal(tensorhost_cpd_rank(r), 3);
    const double *lambda = tensorhost_cpd_weights(r);
    for (uint32_t k = 1; k < 3; ++k)
        assert_true(lambda[k] <= lambda[k - 1]);
    for (uint32_t m = 0; m < 3; ++m) {
        const double *a = tensorhost_cpd_factor(r, m);
        for (uint32_t k = 0; k < 3; ++k) {
            double sum = 0.0;
            for (uint64_t i = 0; i < tensorhost_cpd_dim(r, m); ++i)
                sum += a[i * 3 + k] * a[i * 3 + k];
            assert_true(fabs(sqrt(sum) - 1.0) < 1e-12);
        }
    }
    assert_null(tensorhost_cpd_factor(r, 3));
    assert_true(tensorhost_cpd_fits(r)[19] == tensorhost_cpd_fit(r));
    assert_true(tensorhost_cpd_fit(r) > 0.9); /* three fluorophores */
    tensorhost_cpd_timings timings = TENSORHOST_CPD_TIMINGS_INIT;
    expect_ok(tensorhost_cpd_get_timings(r, &timings, err), err);
    assert_true(timings.total > 0.0 && timings.mttkrp >= 0.0);
    tensorhost_cpd_free(r);

    /* The callback stops the run: interrupted, with a model. */
    uint32_t last = 0;
    params.on_iteration = stop_after_two;
    params.user_data = &last;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_int_equal(last, 2);
    assert_int_equal(tensorhost_cpd_status_of(r), TENSORHOST_CPD_INTERRUPTED);
    assert_int_equal(tensorhost_cpd_iterations(r), 2);
    assert_non_null(tensorhost_cpd_weights(r));
    tensorhost_cpd_free(r);

    /* Bad parameters name the parameter and leave no result. */
    params.on_iteration = NULL;
    params.rank = 0;
    r = NULL;
    assert_int_equal(tensorhost_cp_als(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "rank 0"));
    assert_null(r);
    params.rank = 3;
    params.update = TENSORHOST_UPDATE_SWEEP; /* cpu-reference has no als_sweep */
    assert_int_equal(tensorhost_cp_als(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "als_sweep"));
    tensorhost_backend_close(backend);
    tensorhost_tensor_free(t);
}

/* Initial factors handed in are the ones used: from the exact factors of a
 * rank-2 tensor one iteration keeps the exact model (fit 1), from the
 * seed's random ones it does not get there. */
static void test_initial_factors(void **state)
{
    (void)state;
    const double a[2][3] = {{1, 2, 0}, {0, 1, 3}}, b[2][3] = {{1, 0, 1}, {2, 1, 0}},
                 c[2][2] = {{1, 1}, {1, -1}};
    const uint64_t dims[] = {3, 3, 2};
    uint64_t indices[18 * 3];
    double values[18];
    uint64_t k = 0;
    for (uint64_t i = 0; i < 3; ++i)
        for (uint64_t j = 0; j < 3; ++j)
            for (uint64_t l = 0; l < 2; ++l, ++k) {
                indices[k * 3] = i, indices[k * 3 + 1] = j, indices[k * 3 + 2] = l;
                values[k] = a[0][i] * b[0][j] * c[0][l] + a[1][i] * b[1][j] * c[1][l];
            }
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_tensor *t = NULL;
    expect_ok(tensorhost_tensor_new(3, dims, 18, indices, values, &t, err), err);
    tensorhost_backend *backend = open_cpu();
    double a0[6], a1[6], a2[4]; /* row-major: row i holds both components */
    for (int i = 0; i < 3; ++i)
        for (int r = 0; r < 2; ++r)
            a0[i * 2 + r] = a[r][i], a1[i * 2 + r] = b[r][i];
    for (int l = 0; l < 2; ++l)
        for (int r = 0; r < 2; ++r)
            a2[l * 2 + r] = c[r][l];
    const double *const exact[] = {a0, a1, a2};
    tensorhost_cpd_params params = TENSORHOST_CPD_PARAMS_INIT;
    params.rank = 2;
    params.max_iters = 1;
    params.initial_factors = exact;
    tensorhost_cpd *r = NULL;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    if (!(tensorhost_cpd_fit(r) > 1.0 - 1e-6))
        fail_msg("fit %.12f from the exact factors", tensorhost_cpd_fit(r));
    tensorhost_cpd_free(r);

    /* A missing or non-finite initial factor is refused, naming it. */
    const double *const missing[] = {a0, NULL, a2};
    params.initial_factors = missing;
    r = NULL;
    assert_int_equal(tensorhost_cp_als(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "initial_factors[1] is NULL: give all 3 factors, or none");
    assert_null(r);
    double bad[6];
    memcpy(bad, a1, sizeof bad);
    bad[3] = NAN;
    const double *const not_finite[] = {a0, bad, a2};
    params.initial_factors = not_finite;
    assert_int_equal(tensorhost_cp_als(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err,
                        "initial_factors[1] row 1, column 1 is nan: expected a finite number");

    /* A struct_size that ends inside initial_factors (a pointer cut in
     * half) leaves it at its default: the seed's factors. */
    params.initial_factors = exact;
    params.struct_size = (uint32_t)(offsetof(tensorhost_cpd_params, initial_factors) + 4);
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    if (!(tensorhost_cpd_fit(r) < 0.999))
        fail_msg("fit %.12f: the half-covered initial_factors were used", tensorhost_cpd_fit(r));
    tensorhost_cpd_free(r);
    params.struct_size = (uint32_t)sizeof params;

    params.initial_factors = NULL;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    if (!(tensorhost_cpd_fit(r) < 0.999))
        fail_msg("fit %.12f from the seed's factors after one iteration", tensorhost_cpd_fit(r));
    tensorhost_cpd_free(r);
    tensorhost_backend_close(backend);
    tensorhost_tensor_free(t);
}

/* The warning of `code` among the result's, or NULL; fails on a result
 * that has it twice. */
static const char *warning_of(const tensorhost_cpd *r, int32_t code)
{
    char err[TENSORHOST_ERROR_SIZE] = "";
    const char *found = NULL;
    for (uint32_t i = 0; i < tensorhost_cpd_warning_count(r); ++i) {
        int32_t c = 0;
        const char *message = NULL;
        expect_ok(tensorhost_cpd_warning(r, i, &c, &message, err), err);
        assert_non_null(message);
        assert_null(strchr(message, '\n'));
        if (c == code) {
            if (found)
                fail_msg("%s twice: %s / %s", tensorhost_warning_name(code), found, message);
            found = message;
        }
    }
    return found;
}

/* A rank above what the tensor can have (3 nonzeros: at most rank 3) is
 * said, and so are the rank-deficient solves it brings; a rank the tensor
 * can have gets neither. */
static void test_warnings_rank(void **state)
{
    (void)state;
    const uint64_t dims[] = {2, 2, 2};
    const uint64_t indices[] = {0, 0, 0, 1, 1, 0, 0, 1, 1};
    const double values[] = {1.0, 2.0, 3.0};
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_tensor *t = NULL;
    expect_ok(tensorhost_tensor_new(3, dims, 3, indices, values, &t, err), err);
    tensorhost_backend *backend = open_cpu();
    tensorhost_cpd_params params = TENSORHOST_CPD_PARAMS_INIT;
    params.rank = 5;
    params.max_iters = 5;
    params.tolerance = 0.0;
    tensorhost_cpd *r = NULL;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    const char *above = warning_of(r, TENSORHOST_WARN_RANK_ABOVE_BOUND);
    assert_non_null(above);
    assert_non_null(strstr(above, "rank 5 is above the largest rank this tensor can have (3:"));
    const char *deficient = warning_of(r, TENSORHOST_WARN_RANK_DEFICIENT);
    assert_non_null(deficient);
    assert_non_null(strstr(deficient, "normal-equation solves were rank deficient"));
    assert_null(warning_of(r, TENSORHOST_WARN_NOT_CONVERGED)); /* tolerance 0 */
    /* In the documented order: the tensor's warnings before the run's. */
    int32_t first = 0;
    expect_ok(tensorhost_cpd_warning(r, 0, &first, NULL, err), err);
    assert_int_equal(first, TENSORHOST_WARN_RANK_ABOVE_BOUND);
    tensorhost_cpd_free(r);

    params.rank = 1;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_null(warning_of(r, TENSORHOST_WARN_RANK_ABOVE_BOUND));
    assert_null(warning_of(r, TENSORHOST_WARN_RANK_DEFICIENT));
    tensorhost_cpd_free(r);
    tensorhost_backend_close(backend);
    tensorhost_tensor_free(t);
}

/* A run that stops at max_iters with a tolerance above 0 says so, naming
 * both; one that converged, ran with tolerance 0, or was stopped does not. */
static void test_warnings_not_converged(void **state)
{
    (void)state;
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_tensor *t = NULL;
    expect_ok(tensorhost_tensor_read(AMINOACID, &t, err), err);
    tensorhost_backend *backend = open_cpu();
    tensorhost_cpd_params params = TENSORHOST_CPD_PARAMS_INIT;
    params.rank = 3;
    params.max_iters = 2;
    params.tolerance = 1e-12;
    tensorhost_cpd *r = NULL;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_status_of(r), TENSORHOST_CPD_MAX_ITERS);
    assert_int_equal(tensorhost_cpd_warning_count(r), 1);
    const char *message = warning_of(r, TENSORHOST_WARN_NOT_CONVERGED);
    assert_non_null(message);
    assert_non_null(strstr(message, "not converged: stopped at max_iters = 2 with |fit change|"));
    assert_non_null(strstr(message, "above tolerance 1e-12"));
    tensorhost_cpd_free(r);

    params.tolerance = 0.0; /* exactly max_iters iterations, as asked */
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_warning_count(r), 0);
    tensorhost_cpd_free(r);

    params.tolerance = 1e-4;
    params.max_iters = 500;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_status_of(r), TENSORHOST_CPD_CONVERGED);
    assert_int_equal(tensorhost_cpd_warning_count(r), 0);
    tensorhost_cpd_free(r);

    uint32_t last = 0;
    params.tolerance = 1e-12;
    params.on_iteration = stop_after_two;
    params.user_data = &last;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_status_of(r), TENSORHOST_CPD_INTERRUPTED);
    assert_int_equal(tensorhost_cpd_warning_count(r), 0);

    /* Past the count, and on no result. */
    assert_int_equal(tensorhost_cpd_warning(r, 0, NULL, NULL, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "warning 0: the result has 0 warnings");
    tensorhost_cpd_free(r);
    assert_int_equal(tensorhost_cpd_warning_count(NULL), 0);
    assert_int_equal(tensorhost_cpd_warning(NULL, 0, NULL, NULL, err), TENSORHOST_ERR_MISUSE);
    assert_string_equal(tensorhost_warning_name(TENSORHOST_WARN_NOT_CONVERGED),
                        "TENSORHOST_WARN_NOT_CONVERGED");
    assert_string_equal(tensorhost_warning_name(0), "?");
    tensorhost_backend_close(backend);
    tensorhost_tensor_free(t);
}

/* Values of the file too small for a double are read as zero; the run
 * says how many, naming the file. */
static void test_warnings_underflowed_values(void **state)
{
    (void)state;
    char path[] = "/tmp/test_api_underflow_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char text[] = "1 1 1 1.0\n2 1 1 1e-400\n1 2 1 2.0\n2 2 2 -1e-999\n1 1 2 3.0\n";
    assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_tensor *t = NULL;
    expect_ok(tensorhost_tensor_read(path, &t, err), err);
    unlink(path);
    tensorhost_tensor_stats stats = TENSORHOST_TENSOR_STATS_INIT;
    expect_ok(tensorhost_tensor_get_stats(t, &stats, err), err);
    assert_int_equal(stats.underflowed_values, 2);
    tensorhost_backend *backend = open_cpu();
    tensorhost_cpd_params params = TENSORHOST_CPD_PARAMS_INIT;
    params.rank = 1;
    params.max_iters = 3;
    params.tolerance = 0.0;
    tensorhost_cpd *r = NULL;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    const char *message = warning_of(r, TENSORHOST_WARN_UNDERFLOWED_VALUES);
    assert_non_null(message);
    assert_non_null(strstr(message, path));
    assert_non_null(strstr(message, ": 2 values are too small for a double"));
    tensorhost_cpd_free(r);
    tensorhost_backend_close(backend);
    tensorhost_tensor_free(t);

    /* From arrays there is nothing to underflow: no warning. */
    const uint64_t dims[] = {2, 2};
    const uint64_t indices[] = {0, 0, 1, 1};
    const double values[] = {1.0, 2.0};
    expect_ok(tensorhost_tensor_new(2, dims, 2, indices, values, &t, err), err);
    backend = open_cpu();
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_null(warning_of(r, TENSORHOST_WARN_UNDERFLOWED_VALUES));
    tensorhost_cpd_free(r);
    tensorhost_backend_close(backend);
    tensorhost_tensor_free(t);
}

typedef struct log_seen {
    int lines;
    int instance_debug; /* the plugin's "instance with 2 threads" at DEBUG */
    int warnings;       /* lines at WARNING */
    int replaced;       /* set when the handler replaced itself */
} log_seen;

/* ---- CP-APR (1.2) ----------------------------------------------------------- */

/* A small count tensor: every entry of a 4 x 3 x 2 array, integers 0 to 4
 * (the zeros left out); the fourth nonzero `negative_at_3` when that is
 * below 0. */
static tensorhost_tensor *small_counts(double negative_at_3)
{
    uint64_t dims[] = {4, 3, 2}, indices[24 * 3];
    double values[24];
    uint64_t n = 0;
    for (uint64_t i = 0; i < 4; ++i)
        for (uint64_t j = 0; j < 3; ++j)
            for (uint64_t k = 0; k < 2; ++k) {
                const double v = (double)((i * 2 + j * 3 + k) % 5);
                if (v == 0.0)
                    continue;
                indices[n * 3] = i, indices[n * 3 + 1] = j, indices[n * 3 + 2] = k;
                values[n] = n == 3 && negative_at_3 < 0.0 ? negative_at_3 : v;
                ++n;
            }
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_tensor *t = NULL;
    expect_ok(tensorhost_tensor_new(3, dims, n, indices, values, &t, err), err);
    return t;
}

/* pyttb's defaults; the checks of every parameter before any work; a
 * least-squares result has no Poisson facts. */
static void test_cp_apr_parameters(void **state)
{
    (void)state;
    const tensorhost_apr_params defaults = TENSORHOST_APR_PARAMS_INIT;
    assert_int_equal(defaults.struct_size, sizeof(tensorhost_apr_params));
    assert_int_equal(defaults.max_iters, 1000);
    assert_int_equal(defaults.max_inner_iters, 10);
    assert_true(defaults.stoptol == 1e-4 && defaults.kappa == 0.01 &&
                defaults.kappa_tolerance == 1e-10 && defaults.epsilon == 1e-10);
    assert_null(defaults.initial_factors);
    assert_null(defaults.initial_weights);
    assert_null(defaults.on_iteration);

    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_backend *backend = open_cpu();
    tensorhost_tensor *t = small_counts(0.0);
    tensorhost_cpd *r = NULL;
    tensorhost_apr_params params = defaults;
    params.rank = 0;
    assert_int_equal(tensorhost_cp_apr(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "rank 0: expected 1 to 4096");
    params = defaults;
    params.max_inner_iters = 0;
    assert_int_equal(tensorhost_cp_apr(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "max_inner_iters 0"));
    params = defaults;
    params.stoptol = -1e-4;
    assert_int_equal(tensorhost_cp_apr(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "stoptol -0.0001: expected a finite number >= 0");
    params = defaults;
    params.kappa = -1.0;
    assert_int_equal(tensorhost_cp_apr(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "kappa -1: expected a finite number >= 0");
    params = defaults;
    params.epsilon = NAN;
    assert_int_equal(tensorhost_cp_apr(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "epsilon"));
    params = defaults;
    params.struct_size = 8;
    assert_int_equal(tensorhost_cp_apr(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "TENSORHOST_APR_PARAMS_INIT"));
    assert_int_equal(tensorhost_cp_apr(backend, t, NULL, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);

    /* Initial factors and weights: >= 0 and > 0. */
    params = defaults;
    params.rank = 2;
    double a[4 * 2], b[3 * 2], c[2 * 2];
    for (int i = 0; i < 8; ++i)
        a[i] = 0.5;
    for (int i = 0; i < 6; ++i)
        b[i] = 0.5;
    for (int i = 0; i < 4; ++i)
        c[i] = 0.5;
    const double *factors[] = {a, b, c};
    b[3] = -0.25;
    params.initial_factors = factors;
    assert_int_equal(tensorhost_cp_apr(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "initial_factors[1] row 1, column 1 is -0.25"));
    b[3] = 0.25;
    const double weights[] = {1.0, -2.0};
    params.initial_weights = weights;
    assert_int_equal(tensorhost_cp_apr(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "initial_weights[1] is -2: expected a finite number >= 0");
    assert_null(r);
    tensorhost_tensor_free(t);

    /* A negative value, named by its coordinates, before any work. */
    t = small_counts(-1.5);
    params = defaults;
    params.rank = 2;
    assert_int_equal(tensorhost_cp_apr(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "has the value -1.5: the Poisson model needs finite values "
                                ">= 0"));
    assert_null(r);
    tensorhost_tensor_free(t);

    /* CP-ALS's results: least squares, no Poisson facts. */
    t = small_counts(0.0);
    tensorhost_cpd_params als = TENSORHOST_CPD_PARAMS_INIT;
    als.rank = 2;
    als.max_iters = 3;
    als.tolerance = 0.0;
    expect_ok(tensorhost_cp_als(backend, t, &als, &r, err), err);
    assert_int_equal(tensorhost_cpd_model(r), TENSORHOST_MODEL_LEAST_SQUARES);
    assert_true(isnan(tensorhost_cpd_log_likelihood(r)));
    assert_true(isnan(tensorhost_cpd_kkt_violation(r)));
    assert_null(tensorhost_cpd_log_likelihoods(r));
    assert_null(tensorhost_cpd_kkt_violations(r));
    assert_null(tensorhost_cpd_inner_iterations(r));
    tensorhost_cpd_free(r);
    assert_int_equal(tensorhost_cpd_model(NULL), TENSORHOST_ERR_MISUSE);
    assert_true(isnan(tensorhost_cpd_log_likelihood(NULL)));
    assert_string_equal(tensorhost_warning_name(TENSORHOST_WARN_NON_INTEGER_VALUES),
                        "TENSORHOST_WARN_NON_INTEGER_VALUES");
    tensorhost_tensor_free(t);
    tensorhost_backend_close(backend);
}

static int32_t apr_stop_after_two(uint32_t iteration, double log_likelihood,
                                  double kkt_violation, double seconds, void *user_data)
{
    (void)seconds;
    assert_true(isfinite(log_likelihood) && kkt_violation >= 0.0);
    *(uint32_t *)user_data = iteration;
    return iteration >= 2;
}

/* The model of a Poisson result: unit 1-norm columns, weights decreasing,
 * its log-likelihood that of the model returned (sum x log m - sum m, the
 * model's sum being the weights' with unit 1-norm columns), the Poisson
 * facts of every iteration; initial weights give the model they scale. */
static void test_cp_apr_result(void **state)
{
    (void)state;
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_backend *backend = open_cpu();
    tensorhost_tensor *t = small_counts(0.0);
    tensorhost_apr_params params = TENSORHOST_APR_PARAMS_INIT;
    params.rank = 2;
    params.max_iters = 5;
    params.stoptol = 1e-12;
    tensorhost_cpd *r = NULL;
    expect_ok(tensorhost_cp_apr(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_model(r), TENSORHOST_MODEL_POISSON);
    assert_int_equal(tensorhost_cpd_status_of(r), TENSORHOST_CPD_MAX_ITERS);
    assert_int_equal(tensorhost_cpd_iterations(r), 5);
    const double *lambda = tensorhost_cpd_weights(r);
    assert_true(lambda[0] >= lambda[1] && lambda[1] >= 0.0);
    for (uint32_t m = 0; m < 3; ++m) {
        const double *f = tensorhost_cpd_factor(r, m);
        for (uint32_t k = 0; k < 2; ++k) {
            double sum = 0.0;
            for (uint64_t i = 0; i < tensorhost_cpd_dim(r, m); ++i) {
                assert_true(f[i * 2 + k] >= 0.0);
                sum += f[i * 2 + k];
            }
            assert_true(fabs(sum - 1.0) < 1e-12);
        }
    }
    /* The log-likelihood of the model returned. */
    double loglik = -(lambda[0] + lambda[1]);
    for (uint64_t i = 0; i < 4; ++i)
        for (uint64_t j = 0; j < 3; ++j)
            for (uint64_t k = 0; k < 2; ++k) {
                const double x = (double)((i * 2 + j * 3 + k) % 5);
                double m = 0.0;
                for (uint32_t q = 0; q < 2; ++q)
                    m += lambda[q] * tensorhost_cpd_factor(r, 0)[i * 2 + q] *
                         tensorhost_cpd_factor(r, 1)[j * 2 + q] *
                         tensorhost_cpd_factor(r, 2)[k * 2 + q];
                if (x > 0.0)
                    loglik += x * log(m);
            }
    const double ll = tensorhost_cpd_log_likelihood(r);
    assert_true(fabs(ll - loglik) <= 1e-9 * fabs(loglik));
    assert_true(fabs(tensorhost_cpd_log_likelihoods(r)[4] - ll) <= 1e-9 * fabs(ll));
    assert_true(tensorhost_cpd_fits(r)[4] == tensorhost_cpd_log_likelihoods(r)[4]);
    for (uint32_t i = 0; i < 5; ++i) {
        assert_true(tensorhost_cpd_inner_iterations(r)[i] >= 1 &&
                    tensorhost_cpd_inner_iterations(r)[i] <= 3 * 10);
        assert_true(tensorhost_cpd_kkt_violations(r)[i] >= 0.0);
    }
    for (uint32_t i = 1; i < 5; ++i) /* multiplicative updates never lose likelihood */
        assert_true(tensorhost_cpd_log_likelihoods(r)[i] >=
                    tensorhost_cpd_log_likelihoods(r)[i - 1] - 1e-9 * fabs(ll));
    assert_true(tensorhost_cpd_kkt_violation(r) == tensorhost_cpd_kkt_violations(r)[4]);
    const double fit = tensorhost_cpd_fit(r);
    assert_true(fit > 0.0 && fit < 1.0);
    /* Stopped at max_iters above stoptol: not converged, naming stoptol. */
    const char *message = warning_of(r, TENSORHOST_WARN_NOT_CONVERGED);
    assert_non_null(message);
    assert_non_null(strstr(message, "stoptol"));
    tensorhost_cpd_free(r);

    /* Given factors with weights equal the weights folded into a factor. */
    const double a[4 * 2] = {0.1, 0.9, 0.4, 0.3, 0.7, 0.2, 0.5, 0.8},
                 b[3 * 2] = {0.6, 0.1, 0.2, 0.9, 0.3, 0.4}, c[2 * 2] = {0.5, 0.2, 0.4, 0.7};
    const double weights[] = {3.0, 0.5};
    double a_weighted[8];
    for (int i = 0; i < 8; ++i)
        a_weighted[i] = a[i] * weights[i % 2];
    const double *given[] = {a, b, c}, *folded[] = {a_weighted, b, c};
    params.initial_factors = given;
    params.initial_weights = weights;
    expect_ok(tensorhost_cp_apr(backend, t, &params, &r, err), err);
    params.initial_factors = folded;
    params.initial_weights = NULL;
    tensorhost_cpd *r2 = NULL;
    expect_ok(tensorhost_cp_apr(backend, t, &params, &r2, err), err);
    assert_true(fabs(tensorhost_cpd_log_likelihood(r) - tensorhost_cpd_log_likelihood(r2)) <=
                1e-12 * fabs(tensorhost_cpd_log_likelihood(r)));
    tensorhost_cpd_free(r2);
    tensorhost_cpd_free(r);

    /* The callback sees the log-likelihood and KKT violation and stops. */
    uint32_t last = 0;
    params.on_iteration = apr_stop_after_two;
    params.user_data = &last;
    expect_ok(tensorhost_cp_apr(backend, t, &params, &r, err), err);
    assert_int_equal(last, 2);
    assert_int_equal(tensorhost_cpd_status_of(r), TENSORHOST_CPD_INTERRUPTED);
    assert_int_equal(tensorhost_cpd_iterations(r), 2);
    tensorhost_cpd_free(r);

    /* With the defaults it stops by the KKT rule. */
    params = (tensorhost_apr_params)TENSORHOST_APR_PARAMS_INIT;
    params.rank = 2;
    expect_ok(tensorhost_cp_apr(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_status_of(r), TENSORHOST_CPD_CONVERGED);
    assert_true(tensorhost_cpd_kkt_violation(r) < 1e-4);
    assert_null(warning_of(r, TENSORHOST_WARN_NOT_CONVERGED));
    tensorhost_cpd_free(r);
    tensorhost_tensor_free(t);
    tensorhost_backend_close(backend);
}

static void note_log(int32_t level, const char *message, void *user_data)
{
    log_seen *seen = user_data;
    assert_non_null(message);
    assert_null(strchr(message, '\n'));
    assert_null(strstr(message, "tensorhost: ")); /* no console decoration */
    seen->lines++;
    if (level == TENSORHOST_LOG_DEBUG &&
        strcmp(message, "[plugin] cpu-reference: instance with 2 threads") == 0)
        seen->instance_debug++;
    if (level == TENSORHOST_LOG_WARNING)
        seen->warnings++;
}

static void replace_self(int32_t level, const char *message, void *user_data)
{
    (void)level, (void)message;
    log_seen *seen = user_data;
    seen->replaced++;
    tensorhost_set_log_handler(note_log, seen); /* allowed inside the handler */
}

/* ---- Constraints (1.3) ------------------------------------------------------ */

/* constraints = NONNEG: every factor entry >= 0 on a tensor with negative
 * values (amino-acid); a caller's 1.2 struct (without the field) runs
 * unconstrained (another model); an unknown value and a backend update
 * path are errors naming them. */
static void test_constraints(void **state)
{
    (void)state;
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_backend *backend = open_cpu();
    tensorhost_tensor *t = NULL;
    expect_ok(tensorhost_tensor_read(AMINOACID, &t, err), err);
    tensorhost_cpd_params params = TENSORHOST_CPD_PARAMS_INIT;
    params.rank = 3;
    params.max_iters = 20;
    params.tolerance = 0.0;
    assert_int_equal(params.constraints, TENSORHOST_CONSTRAINTS_NONE);
    params.constraints = TENSORHOST_CONSTRAINTS_NONNEG;
    tensorhost_cpd *r = NULL;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_constraints(r), TENSORHOST_CONSTRAINTS_NONNEG);
    for (uint32_t m = 0; m < 3; ++m) {
        const double *f = tensorhost_cpd_factor(r, m);
        for (uint64_t k = 0; k < tensorhost_cpd_dim(r, m) * 3; ++k)
            assert_true(f[k] >= 0.0);
    }
    const double nonneg_fit = tensorhost_cpd_fit(r);
    /* (1.6) Amino-acid's modes (5, 201 and 61 rows, 61,305 nonzeros) cost
     * far less to pass over than to form M: the cap of 5 each. */
    for (uint32_t m = 0; m < 3; ++m)
        assert_int_equal(tensorhost_cpd_hals_passes(r, m), 5);
    assert_int_equal(tensorhost_cpd_hals_passes(r, 3), 0);
    assert_int_equal(tensorhost_cpd_hals_passes(NULL, 0), 0);
    tensorhost_cpd_free(r);
    /* A budget of 0: one pass a mode, another run. */
    params.hals_budget = 0.0;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_hals_passes(r, 1), 1);
    assert_true(tensorhost_cpd_fit(r) != nonneg_fit);
    tensorhost_cpd_free(r);
    params.hals_budget = -1.0;
    assert_int_equal(tensorhost_cp_als(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "hals_budget -1: expected a finite number >= 0");
    params.hals_budget = 0.5;
    params.hals_passes = 0;
    assert_int_equal(tensorhost_cp_als(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "hals_passes 0"));
    params.hals_passes = 5;
    /* A 1.5 caller's struct ends before the fields: their defaults. */
    params.struct_size = (uint32_t)offsetof(tensorhost_cpd_params, hals_passes);
    params.hals_budget = 0.0; /* beyond struct_size: not read */
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_true(tensorhost_cpd_fit(r) == nonneg_fit);
    tensorhost_cpd_free(r);
    params.struct_size = (uint32_t)sizeof params;
    params.hals_budget = 0.5;

    /* A 1.2 caller's struct ends before the field: unconstrained. */
    params.struct_size = (uint32_t)offsetof(tensorhost_cpd_params, constraints);
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_constraints(r), TENSORHOST_CONSTRAINTS_NONE);
    assert_true(tensorhost_cpd_fit(r) != nonneg_fit);
    tensorhost_cpd_free(r);
    params.struct_size = (uint32_t)sizeof params;

    /* One per mode: modes 1 and 3 nonnegative. */
    const int32_t per_mode[3] = {TENSORHOST_CONSTRAINTS_NONNEG, TENSORHOST_CONSTRAINTS_NONE,
                                 TENSORHOST_CONSTRAINTS_NONNEG};
    params.mode_constraints = per_mode;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_constraints(r), TENSORHOST_CONSTRAINTS_NONNEG);
    for (uint32_t m = 0; m < 3; ++m)
        assert_int_equal(tensorhost_cpd_mode_constraints(r, m), per_mode[m]);
    assert_int_equal(tensorhost_cpd_mode_constraints(r, 3), TENSORHOST_ERR_INVALID_ARGUMENT);
    for (uint64_t k = 0; k < tensorhost_cpd_dim(r, 2) * 3; ++k)
        assert_true(tensorhost_cpd_factor(r, 2)[k] >= 0.0);
    tensorhost_cpd_free(r);
    const int32_t bad[3] = {0, 5, 0};
    params.mode_constraints = bad;
    assert_int_equal(tensorhost_cp_als(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "mode_constraints[1] = 5"));
    params.mode_constraints = NULL;

    params.constraints = 7;
    assert_int_equal(tensorhost_cp_als(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "constraints 7"));
    params.constraints = TENSORHOST_CONSTRAINTS_NONNEG;
    /* The update in the backend (cpu-reference's als_update_nonneg) and on
     * the host: the same run. */
    params.update = TENSORHOST_UPDATE_MODE;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_true(fabs(tensorhost_cpd_fit(r) - nonneg_fit) < 1e-12);
    tensorhost_cpd_free(r);
    params.update = TENSORHOST_UPDATE_HOST;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_true(fabs(tensorhost_cpd_fit(r) - nonneg_fit) < 1e-12);
    tensorhost_cpd_free(r);
    /* (1.5) The sweep with constraints is the plan's to judge: a plugin
     * without als_sweep (cpu-reference) is refused by name. */
    params.update = TENSORHOST_UPDATE_SWEEP;
    assert_int_equal(tensorhost_cp_als(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "needs als_sweep"));
    assert_non_null(strstr(err, "'cpu-reference'"));
    assert_int_equal(tensorhost_cpd_constraints(NULL), TENSORHOST_ERR_MISUSE);
    assert_int_equal(tensorhost_cpd_mode_constraints(NULL, 0), TENSORHOST_ERR_MISUSE);
    tensorhost_tensor_free(t);
    tensorhost_backend_close(backend);
}


/* ---- Regularised CP-ALS (1.5) ----------------------------------------------- */

/* l2, l1 and mode_l1 reach the run: a ridge alone runs in the backend
 * (als_update with the ridge's inverse) as on the host; the objective of
 * the final model, each iteration's where every l1 is 0 (NaN where one is
 * not); a caller of an earlier minor, whose struct ends before the fields,
 * gets an unregularised run; bad weights are named. */
static void test_regularisation(void **state)
{
    (void)state;
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_backend *backend = open_cpu();
    tensorhost_tensor *t = NULL;
    expect_ok(tensorhost_tensor_read(AMINOACID, &t, err), err);
    tensorhost_cpd_params params = TENSORHOST_CPD_PARAMS_INIT;
    assert_true(params.l2 == 0.0 && params.l1 == 0.0 && params.mode_l1 == NULL);
    params.rank = 3;
    params.max_iters = 15;
    params.tolerance = 0.0;
    tensorhost_cpd *plain = NULL;
    expect_ok(tensorhost_cp_als(backend, t, &params, &plain, err), err);
    assert_true(isnan(tensorhost_cpd_objective(plain)));
    assert_null(tensorhost_cpd_objectives(plain));

    params.l2 = 1e3;
    tensorhost_cpd *ridge = NULL, *ridge_host = NULL;
    expect_ok(tensorhost_cp_als(backend, t, &params, &ridge, err), err);
    params.update = TENSORHOST_UPDATE_HOST;
    expect_ok(tensorhost_cp_als(backend, t, &params, &ridge_host, err), err);
    params.update = TENSORHOST_UPDATE_AUTO;
    assert_true(fabs(tensorhost_cpd_fit(ridge) - tensorhost_cpd_fit(ridge_host)) < 1e-12);
    assert_true(tensorhost_cpd_fit(ridge) != tensorhost_cpd_fit(plain));
    const double objective = tensorhost_cpd_objective(ridge);
    assert_true(isfinite(objective) && objective > 0.0);
    const double *objectives = tensorhost_cpd_objectives(ridge);
    assert_non_null(objectives);
    assert_true(fabs(objectives[14] - objective) <= 1e-12 * objective);
    assert_true(fabs(tensorhost_cpd_objective(ridge_host) - objective) <= 1e-12 * objective);
    tensorhost_cpd_free(ridge_host);

    /* An earlier minor's struct: the fields are not there, so no ridge. */
    params.struct_size = (uint32_t)offsetof(tensorhost_cpd_params, l2);
    tensorhost_cpd *old = NULL;
    expect_ok(tensorhost_cp_als(backend, t, &params, &old, err), err);
    assert_true(tensorhost_cpd_fit(old) == tensorhost_cpd_fit(plain));
    assert_true(isnan(tensorhost_cpd_objective(old)));
    tensorhost_cpd_free(old);
    params.struct_size = (uint32_t)sizeof params;

    /* l1 on the host path: sparser factors; per mode. */
    params.l2 = 0.0;
    params.l1 = 1e4;
    params.constraints = TENSORHOST_CONSTRAINTS_NONNEG;
    params.update = TENSORHOST_UPDATE_HOST;
    tensorhost_cpd *sparse = NULL;
    expect_ok(tensorhost_cp_als(backend, t, &params, &sparse, err), err);
    assert_true(isfinite(tensorhost_cpd_objective(sparse)));
    assert_true(isnan(tensorhost_cpd_objectives(sparse)[0])); /* an l1: the final one only */
    const double per_mode[3] = {0.0, 1e4, 0.0};
    params.mode_l1 = per_mode;
    tensorhost_cpd *one_mode = NULL;
    expect_ok(tensorhost_cp_als(backend, t, &params, &one_mode, err), err);
    assert_true(tensorhost_cpd_objective(one_mode) != tensorhost_cpd_objective(sparse));
    tensorhost_cpd_free(one_mode);
    tensorhost_cpd_free(sparse);

    const double bad_modes[3] = {0.0, -1.0, 0.0};
    params.mode_l1 = bad_modes;
    assert_int_equal(tensorhost_cp_als(backend, t, &params, &one_mode, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "mode_l1[1] = -1: expected a finite number >= 0");
    params.mode_l1 = NULL;
    params.l1 = NAN;
    assert_int_equal(tensorhost_cp_als(backend, t, &params, &one_mode, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "l1 nan: expected a finite number >= 0"));
    params.l1 = 0.0;
    params.l2 = -0.5;
    assert_int_equal(tensorhost_cp_als(backend, t, &params, &one_mode, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "l2 -0.5: expected a finite number >= 0"));
    assert_true(isnan(tensorhost_cpd_objective(NULL)));

    tensorhost_cpd_free(ridge);
    tensorhost_cpd_free(plain);
    tensorhost_tensor_free(t);
    tensorhost_backend_close(backend);
}

/* ---- Tensor completion (1.4) ------------------------------------------------ */

/* An exact rank-2 model of a 6 x 5 x 4 tensor and its value at (i, j, k):
 * factor entries spread over [-1, 1) by a multiplicative hash, so the
 * columns are far from collinear (positive ones would put ALS in a
 * swamp of hundreds of iterations). */
static double planted_entry(uint64_t mode, uint64_t row, uint64_t column)
{
    const uint64_t h = (mode * 131 + row * 17 + column * 7 + 1) * UINT64_C(0x9e3779b97f4a7c15);
    return (double)(h >> 11) * 0x1.0p-52 - 1.0;
}

static double planted_value(uint64_t i, uint64_t j, uint64_t k)
{
    double v = 0.0;
    for (uint64_t r = 0; r < 2; ++r)
        v += planted_entry(0, i, r) * planted_entry(1, j, r) * planted_entry(2, k, r);
    return v;
}

/* Whether cell (i, j, k) of the planted tensor is listed (observed). */
static int planted_listed(uint64_t i, uint64_t j, uint64_t k) { return (i + 2 * j + k) % 3 != 0; }

/* The planted tensor's listed cells, the `zero_at`-th (< 0: none) set to
 * an observed 0 and, when `one_entry_row` is set, the last row of the
 * first mode reduced to one entry (fewer than the rank). */
static tensorhost_tensor *planted_partial(int zero_at, int one_entry_row, uint64_t *listed)
{
    uint64_t dims[] = {6, 5, 4}, indices[120 * 3];
    double values[120];
    uint64_t n = 0;
    for (uint64_t i = 0; i < 6; ++i)
        for (uint64_t j = 0; j < 5; ++j)
            for (uint64_t k = 0; k < 4; ++k) {
                if (!planted_listed(i, j, k) || (one_entry_row && i == 5 && (j || k)))
                    continue;
                indices[n * 3] = i, indices[n * 3 + 1] = j, indices[n * 3 + 2] = k;
                values[n] = (int)n == zero_at ? 0.0 : planted_value(i, j, k);
                ++n;
            }
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_tensor *t = NULL;
    expect_ok(tensorhost_tensor_new(3, dims, n, indices, values, &t, err), err);
    if (listed)
        *listed = n;
    return t;
}

/* The published model's value at (i, j, k). */
static double model_value(const tensorhost_cpd *r, uint64_t i, uint64_t j, uint64_t k)
{
    const uint32_t rank = tensorhost_cpd_rank(r);
    const double *lambda = tensorhost_cpd_weights(r);
    double v = 0.0;
    for (uint32_t q = 0; q < rank; ++q)
        v += lambda[q] * tensorhost_cpd_factor(r, 0)[i * rank + q] *
             tensorhost_cpd_factor(r, 1)[j * rank + q] * tensorhost_cpd_factor(r, 2)[k * rank + q];
    return v;
}

/* Defaults; every parameter checked before any work, each error naming
 * it; a plugin without row_least_squares refused before any work; the
 * tensor's values and its rows checked by the session. */
static void test_complete_parameters(void **state)
{
    (void)state;
    const tensorhost_complete_params defaults = TENSORHOST_COMPLETE_PARAMS_INIT;
    assert_int_equal(defaults.struct_size, sizeof(tensorhost_complete_params));
    assert_int_equal(defaults.rank, 16);
    assert_int_equal(defaults.max_iters, 50);
    assert_true(defaults.tolerance == 1e-5 && defaults.l2 == 0.0 && defaults.holdout == 0.0);
    assert_int_equal(defaults.seed, 42);
    assert_int_equal(defaults.constraints, TENSORHOST_CONSTRAINTS_NONE);
    assert_null(defaults.mode_constraints);
    assert_null(defaults.initial_factors);
    assert_null(defaults.on_iteration);

    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_backend *backend = open_cpu();
    tensorhost_tensor *t = planted_partial(-1, 0, NULL);
    tensorhost_cpd *r = NULL;
    tensorhost_complete_params params = defaults;
    params.rank = 0;
    assert_int_equal(tensorhost_complete(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "rank 0: expected 1 to 4096");
    params = defaults;
    params.max_iters = 0;
    assert_int_equal(tensorhost_complete(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "max_iters 0: expected at least 1");
    params = defaults;
    params.tolerance = -1e-5;
    assert_int_equal(tensorhost_complete(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "tolerance -1e-05: expected a finite number >= 0");
    params = defaults;
    params.l2 = -0.5;
    assert_int_equal(tensorhost_complete(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "l2 -0.5: expected a finite number >= 0 (the ridge's weight)");
    params.l2 = INFINITY;
    assert_int_equal(tensorhost_complete(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "l2 inf"));
    params.l2 = NAN;
    assert_int_equal(tensorhost_complete(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "l2 nan"));
    const double bad_holdouts[] = {1.0, -0.1, NAN, 1.5};
    for (size_t i = 0; i < 4; ++i) {
        params = defaults;
        params.holdout = bad_holdouts[i];
        assert_int_equal(tensorhost_complete(backend, t, &params, &r, err),
                         TENSORHOST_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(err, "expected a fraction in [0, 1)"));
    }
    assert_string_equal(err, "holdout 1.5: expected a fraction in [0, 1) (of the listed "
                             "entries, held out of training)");
    params = defaults;
    params.constraints = 7;
    assert_int_equal(tensorhost_complete(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "constraints 7: expected TENSORHOST_CONSTRAINTS_NONE or _NONNEG");
    const int32_t per_mode[] = {TENSORHOST_CONSTRAINTS_NONNEG, 5, TENSORHOST_CONSTRAINTS_NONE};
    params = defaults;
    params.mode_constraints = per_mode;
    assert_int_equal(tensorhost_complete(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "mode_constraints[1] = 5"));
    params = defaults;
    params.struct_size = (uint32_t)offsetof(tensorhost_complete_params, seed);
    assert_int_equal(tensorhost_complete(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "below the 1.4 minimum; start from "
                                "TENSORHOST_COMPLETE_PARAMS_INIT"));
    assert_int_equal(tensorhost_complete(backend, t, NULL, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_int_equal(tensorhost_complete(backend, t, &defaults, NULL, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "tensorhost_complete: out is NULL");

    /* Initial factors: all there, finite, >= 0 in the nonnegative modes
     * (the coordinate descent keeps feasibility, it does not restore it). */
    params = defaults;
    params.rank = 2;
    double a[6 * 2], b[5 * 2], c[4 * 2];
    for (int i = 0; i < 12; ++i)
        a[i] = 0.5;
    for (int i = 0; i < 10; ++i)
        b[i] = 0.5;
    for (int i = 0; i < 8; ++i)
        c[i] = 0.5;
    const double *factors[] = {a, b, c}, *missing[] = {a, NULL, c};
    params.initial_factors = missing;
    assert_int_equal(tensorhost_complete(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "initial_factors[1] is NULL"));
    params.initial_factors = factors;
    c[5] = NAN;
    assert_int_equal(tensorhost_complete(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "initial_factors[2] row 2, column 1 is nan"));
    c[5] = -0.25;
    const int32_t nonneg_last[] = {TENSORHOST_CONSTRAINTS_NONE, TENSORHOST_CONSTRAINTS_NONE,
                                   TENSORHOST_CONSTRAINTS_NONNEG};
    params.mode_constraints = nonneg_last;
    assert_int_equal(tensorhost_complete(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "initial_factors[2] row 2, column 1 is -0.25: a nonnegative mode "
                             "(TENSORHOST_CONSTRAINTS_NONNEG) starts from factors >= 0");
    params.mode_constraints = NULL; /* unconstrained: a negative start is fine */
    params.max_iters = 1;
    expect_ok(tensorhost_complete(backend, t, &params, &r, err), err);
    tensorhost_cpd_free(r);
    r = NULL;
    tensorhost_tensor_free(t);

    /* The values as they are: one below 2^-64 in magnitude is refused. */
    {
        const uint64_t dims[] = {2, 2, 2};
        const uint64_t indices[] = {0, 0, 0, 1, 1, 1};
        const double tiny[] = {1.0, 1e-30};
        expect_ok(tensorhost_tensor_new(3, dims, 2, indices, tiny, &t, err), err);
    }
    params = defaults;
    params.rank = 1;
    params.l2 = 0.1;
    assert_int_equal(tensorhost_complete(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "entry 2 (2, 2, 2) of the tensor has the value 1e-30"));
    tensorhost_tensor_free(t);

    /* A row no entry reaches: undetermined without a ridge. */
    {
        const uint64_t dims[] = {3, 2, 2};
        const uint64_t indices[] = {0, 0, 0, 0, 1, 1, 1, 0, 1, 1, 1, 0};
        const double values[] = {1.0, 2.0, 3.0, 4.0};
        expect_ok(tensorhost_tensor_new(3, dims, 4, indices, values, &t, err), err);
    }
    params.l2 = 0.0;
    assert_int_equal(tensorhost_complete(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "1 row of mode 1 (the first: row 3) has no training entry"));
    assert_null(r);
    tensorhost_tensor_free(t);
    tensorhost_backend_close(backend);

    /* A plugin without row_least_squares (built against the frozen 1.3
     * header): refused before any work, naming the plugin and the
     * function. */
    assert_int_equal(
        tensorhost_backend_open(TH_ABI_PLUGIN_DIR "/fixture_frozen_v1_3.so", NULL, NULL, 0,
                                &backend, err),
        TENSORHOST_OK);
    t = planted_partial(-1, 0, NULL);
    params = defaults;
    params.rank = 2;
    assert_int_equal(tensorhost_complete(backend, t, &params, &r, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "row_least_squares"));
    assert_non_null(strstr(err, tensorhost_backend_id(backend)));
    assert_null(r);
    tensorhost_tensor_free(t);
    tensorhost_backend_close(backend);
}

typedef struct complete_seen {
    uint32_t calls, stop_at;
    double train_rmse[64], holdout_rmse[64], objective[64];
} complete_seen;

static int32_t note_complete(uint32_t iteration, double train_rmse, double holdout_rmse,
                             double objective, double seconds, void *user_data)
{
    complete_seen *seen = user_data;
    assert_true(seconds >= 0.0);
    assert_int_equal(iteration, seen->calls + 1);
    if (seen->calls < 64) {
        seen->train_rmse[seen->calls] = train_rmse;
        seen->holdout_rmse[seen->calls] = holdout_rmse;
        seen->objective[seen->calls] = objective;
    }
    seen->calls++;
    return seen->stop_at && iteration >= seen->stop_at;
}

/* Sum over the listed cells of the planted tensor (as planted_partial
 * lists them) of (x - m)^2 for the published model, and the RMSE of the
 * cells it does not list. */
static double listed_squared_error(const tensorhost_cpd *r, double *unlisted_rmse)
{
    double listed = 0.0, unlisted = 0.0;
    uint64_t n_unlisted = 0;
    for (uint64_t i = 0; i < 6; ++i)
        for (uint64_t j = 0; j < 5; ++j)
            for (uint64_t k = 0; k < 4; ++k) {
                const double e = planted_value(i, j, k) - model_value(r, i, j, k);
                if (planted_listed(i, j, k)) {
                    listed += e * e;
                } else {
                    unlisted += e * e;
                    ++n_unlisted;
                }
            }
    *unlisted_rmse = sqrt(unlisted / (double)n_unlisted);
    return listed;
}

/* A run without a holdout on an exact rank-2 model's listed cells fits
 * them and fills in the others; its per-iteration facts and its summary
 * agree with each other and with the model returned (the published form,
 * recomputed here); the objective never rises. */
static void test_complete_result(void **state)
{
    (void)state;
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_backend *backend = open_cpu();
    uint64_t listed = 0;
    tensorhost_tensor *t = planted_partial(-1, 0, &listed);
    tensorhost_complete_params params = TENSORHOST_COMPLETE_PARAMS_INIT;
    params.rank = 2;
    params.max_iters = 2000;
    params.tolerance = 1e-13;
    params.seed = 3;
    tensorhost_cpd *r = NULL;
    expect_ok(tensorhost_complete(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_model(r), TENSORHOST_MODEL_COMPLETION);
    const uint32_t n = tensorhost_cpd_iterations(r);
    assert_int_equal(tensorhost_cpd_status_of(r), TENSORHOST_CPD_CONVERGED);
    assert_int_equal(tensorhost_cpd_constraints(r), TENSORHOST_CONSTRAINTS_NONE);
    assert_true(n >= 2 && n < 2000);
    const double *train = tensorhost_cpd_train_rmses(r), *held = tensorhost_cpd_holdout_rmses(r),
                 *objective = tensorhost_cpd_objectives(r);
    assert_non_null(train);
    assert_non_null(held);
    assert_non_null(objective);
    for (uint32_t i = 0; i < n; ++i) {
        assert_true(isnan(held[i]));
        /* l2 = 0: the objective is the training entries' squared error. */
        assert_true(fabs(objective[i] - train[i] * train[i] * (double)listed) <=
                    1e-9 * objective[i] + 1e-300);
        if (i > 0 && objective[i] > objective[i - 1] * (1.0 + 1e-9) + 1e-24)
            fail_msg("the objective rose from %.17g to %.17g at iteration %u", objective[i - 1],
                     objective[i], i + 1);
    }
    tensorhost_completion_info info = TENSORHOST_COMPLETION_INFO_INIT;
    expect_ok(tensorhost_cpd_get_completion(r, &info, err), err);
    assert_int_equal(info.struct_size, sizeof info);
    assert_int_equal(info.observed, listed);
    assert_int_equal(info.training, listed);
    assert_int_equal(info.held_out, 0);
    assert_true(info.l2 == 0.0 && info.holdout == 0.0);
    assert_int_equal(info.published_iteration, n);
    assert_true(info.objective == objective[n - 1] && info.train_rmse == train[n - 1]);
    assert_true(tensorhost_cpd_objective(r) == info.objective); /* (1.5) */
    assert_true(isnan(info.holdout_rmse));
    assert_int_equal(info.singular_row_solves, 0);
    assert_int_equal(info.empty_rows, 0);
    /* The model returned is the one the numbers are of, and an exact
     * rank-2 tensor's listed two thirds determine the rest. */
    double unlisted_rmse = 0.0;
    const double sse = listed_squared_error(r, &unlisted_rmse);
    assert_true(fabs(sqrt(sse / (double)listed) - info.train_rmse) < 1e-10);
    if (!(info.train_rmse < 1e-6 && unlisted_rmse < 1e-5))
        fail_msg("rank-2 completion: training RMSE %g, unlisted cells' RMSE %g after %u "
                 "iterations",
                 info.train_rmse, unlisted_rmse, n);
    assert_true(tensorhost_cpd_fits(r)[n - 1] == tensorhost_cpd_fit(r));
    const double *lambda = tensorhost_cpd_weights(r);
    assert_true(lambda[0] >= lambda[1] && lambda[1] >= 0.0);
    for (uint32_t m = 0; m < 3; ++m)
        for (uint32_t q = 0; q < 2; ++q) {
            double sum = 0.0;
            for (uint64_t i = 0; i < tensorhost_cpd_dim(r, m); ++i)
                sum += tensorhost_cpd_factor(r, m)[i * 2 + q] * tensorhost_cpd_factor(r, m)[i * 2 + q];
            assert_true(fabs(sqrt(sum) - 1.0) < 1e-12);
        }
    assert_null(warning_of(r, TENSORHOST_WARN_NOT_CONVERGED));
    tensorhost_cpd_free(r);

    /* The same seed gives the same bits. */
    params.max_iters = 5;
    params.tolerance = 0.0;
    tensorhost_cpd *r2 = NULL;
    expect_ok(tensorhost_complete(backend, t, &params, &r, err), err);
    expect_ok(tensorhost_complete(backend, t, &params, &r2, err), err);
    assert_memory_equal(tensorhost_cpd_factor(r, 1), tensorhost_cpd_factor(r2, 1),
                        5 * 2 * sizeof(double));
    assert_true(tensorhost_cpd_objectives(r)[4] == tensorhost_cpd_objectives(r2)[4]);
    tensorhost_cpd_free(r2);
    tensorhost_cpd_free(r);

    /* With nonnegative factors every published entry is >= 0. */
    params.constraints = TENSORHOST_CONSTRAINTS_NONNEG;
    expect_ok(tensorhost_complete(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_constraints(r), TENSORHOST_CONSTRAINTS_NONNEG);
    for (uint32_t m = 0; m < 3; ++m)
        for (uint64_t k = 0; k < tensorhost_cpd_dim(r, m) * 2; ++k)
            assert_true(tensorhost_cpd_factor(r, m)[k] >= 0.0);
    tensorhost_cpd_free(r);

    /* A caller of struct_size through seed: the fields after it are their
     * defaults (no constraints, no callback). */
    complete_seen seen = {0};
    params.on_iteration = note_complete;
    params.user_data = &seen;
    params.struct_size = (uint32_t)(offsetof(tensorhost_complete_params, seed) + sizeof(uint64_t));
    expect_ok(tensorhost_complete(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_constraints(r), TENSORHOST_CONSTRAINTS_NONE);
    assert_int_equal(seen.calls, 0);
    assert_int_equal(tensorhost_cpd_iterations(r), 5);
    tensorhost_cpd_free(r);
    tensorhost_tensor_free(t);
    tensorhost_backend_close(backend);
}

/* With a holdout: the split's counts, the held-out RMSE of every
 * iteration (what the callback heard), the published model the best
 * held-out iteration's (tolerance 0 stops at the first iteration that
 * does not improve on the best: the one before it is published), and a
 * stop from the callback. */
static void test_complete_holdout(void **state)
{
    (void)state;
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_backend *backend = open_cpu();
    uint64_t listed = 0;
    tensorhost_tensor *t = planted_partial(7, 0, &listed); /* with an observed 0 */
    tensorhost_complete_params params = TENSORHOST_COMPLETE_PARAMS_INIT;
    params.rank = 2;
    params.max_iters = 60;
    params.tolerance = 0.0;
    params.holdout = 0.25;
    params.l2 = 1e-3;
    complete_seen seen = {0};
    params.on_iteration = note_complete;
    params.user_data = &seen;
    tensorhost_cpd *r = NULL;
    expect_ok(tensorhost_complete(backend, t, &params, &r, err), err);
    const uint32_t n = tensorhost_cpd_iterations(r);
    assert_int_equal(tensorhost_cpd_status_of(r), TENSORHOST_CPD_CONVERGED);
    assert_true(n >= 2 && n < 60);
    assert_int_equal(seen.calls, n);
    tensorhost_completion_info info = TENSORHOST_COMPLETION_INFO_INIT;
    expect_ok(tensorhost_cpd_get_completion(r, &info, err), err);
    assert_int_equal(info.observed, listed);
    assert_int_equal(info.observed, info.training + info.held_out);
    assert_true(info.held_out > 0 && info.training > info.held_out);
    assert_true(info.l2 == 1e-3 && info.holdout == 0.25);
    const double *held = tensorhost_cpd_holdout_rmses(r);
    uint32_t best = 0;
    for (uint32_t i = 0; i < n; ++i) {
        assert_true(isfinite(held[i]) && held[i] >= 0.0);
        assert_true(held[i] == seen.holdout_rmse[i]);
        assert_true(tensorhost_cpd_train_rmses(r)[i] == seen.train_rmse[i]);
        assert_true(tensorhost_cpd_objectives(r)[i] == seen.objective[i]);
        /* The ridge is part of the objective. */
        const double rmse = tensorhost_cpd_train_rmses(r)[i];
        assert_true(seen.objective[i] > rmse * rmse * (double)info.training);
        if (held[i] < held[best])
            best = i;
    }
    assert_int_equal(info.published_iteration, best + 1);
    /* Stopped by the holdout: 5 iterations in a row without an improvement. */
    assert_int_equal(info.published_iteration, n - 5);
    for (uint32_t i = n - 5; i < n; ++i)
        assert_true(held[i] >= held[best]);
    assert_true(info.holdout_rmse == held[best]);
    assert_true(info.train_rmse == tensorhost_cpd_train_rmses(r)[best]);
    assert_true(info.objective == tensorhost_cpd_objectives(r)[best]);
    assert_true(tensorhost_cpd_fit(r) == tensorhost_cpd_fits(r)[best]);
    tensorhost_cpd_free(r);

    /* The seed draws the split: another one holds out other entries. */
    uint64_t held_by_seed[8];
    params.max_iters = 1;
    params.on_iteration = NULL;
    int differ = 0;
    for (uint64_t seed = 0; seed < 8; ++seed) {
        params.seed = seed;
        expect_ok(tensorhost_complete(backend, t, &params, &r, err), err);
        tensorhost_completion_info other = TENSORHOST_COMPLETION_INFO_INIT;
        expect_ok(tensorhost_cpd_get_completion(r, &other, err), err);
        held_by_seed[seed] = other.held_out;
        differ = differ || held_by_seed[seed] != held_by_seed[0];
        tensorhost_cpd_free(r);
    }
    assert_true(differ);

    /* The callback stops the run after the second iteration. */
    memset(&seen, 0, sizeof seen);
    seen.stop_at = 2;
    params.on_iteration = note_complete;
    params.seed = 42;
    params.max_iters = 60;
    expect_ok(tensorhost_complete(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_status_of(r), TENSORHOST_CPD_INTERRUPTED);
    assert_int_equal(tensorhost_cpd_iterations(r), 2);
    assert_non_null(tensorhost_cpd_weights(r));
    tensorhost_cpd_free(r);

    /* The stopping rule on the held-out RMSE ends a run with a tolerance. */
    params.on_iteration = NULL;
    params.tolerance = 1e-3;
    params.max_iters = 500;
    expect_ok(tensorhost_complete(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_status_of(r), TENSORHOST_CPD_CONVERGED);
    assert_true(tensorhost_cpd_iterations(r) < 500);
    tensorhost_cpd_free(r);
    tensorhost_tensor_free(t);
    tensorhost_backend_close(backend);
}

/* Another model's result has no completion facts; the info struct's
 * size is checked; the completion warnings: empty rows (with a ridge),
 * singular row solves, not converged on the held-out RMSE. */
static void test_complete_accessors_and_warnings(void **state)
{
    (void)state;
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_backend *backend = open_cpu();
    tensorhost_tensor *t = planted_partial(-1, 0, NULL);
    tensorhost_cpd_params als = TENSORHOST_CPD_PARAMS_INIT;
    als.rank = 2;
    als.max_iters = 2;
    als.tolerance = 0.0;
    tensorhost_cpd *r = NULL;
    expect_ok(tensorhost_cp_als(backend, t, &als, &r, err), err);
    assert_null(tensorhost_cpd_train_rmses(r));
    assert_null(tensorhost_cpd_holdout_rmses(r));
    assert_null(tensorhost_cpd_objectives(r));
    tensorhost_completion_info info = TENSORHOST_COMPLETION_INFO_INIT;
    assert_int_equal(tensorhost_cpd_get_completion(r, &info, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_string_equal(err, "the result is of the least-squares model, not of tensor "
                             "completion (tensorhost_complete)");
    tensorhost_cpd_free(r);
    assert_null(tensorhost_cpd_train_rmses(NULL));
    assert_int_equal(tensorhost_cpd_get_completion(NULL, &info, err), TENSORHOST_ERR_MISUSE);

    tensorhost_complete_params params = TENSORHOST_COMPLETE_PARAMS_INIT;
    params.rank = 2;
    params.max_iters = 3;
    params.tolerance = 0.0;
    expect_ok(tensorhost_complete(backend, t, &params, &r, err), err);
    assert_true(isnan(tensorhost_cpd_log_likelihood(r)));
    assert_null(tensorhost_cpd_log_likelihoods(r));
    info.struct_size = (uint32_t)offsetof(tensorhost_completion_info, empty_rows);
    assert_int_equal(tensorhost_cpd_get_completion(r, &info, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "TENSORHOST_COMPLETION_INFO_INIT"));
    info.struct_size = (uint32_t)sizeof info;
    assert_int_equal(tensorhost_cpd_get_completion(r, NULL, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_int_equal(tensorhost_cpd_warning_count(r), 0); /* tolerance 0: no warning */
    tensorhost_cpd_free(r);

    /* Stopped at max_iters with the held-out RMSE still improving: not
     * converged, in the held-out RMSE's terms. */
    params.max_iters = 3;
    params.tolerance = 1e-6;
    params.holdout = 0.2;
    expect_ok(tensorhost_complete(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_status_of(r), TENSORHOST_CPD_MAX_ITERS);
    const char *not_converged = warning_of(r, TENSORHOST_WARN_NOT_CONVERGED);
    assert_non_null(not_converged);
    assert_non_null(strstr(not_converged, "held-out RMSE"));
    assert_non_null(strstr(not_converged, "max_iters = 3"));
    tensorhost_cpd_free(r);
    tensorhost_tensor_free(t);

    /* The last row of the first mode holds one entry, fewer than the
     * rank: without a ridge its system is singular and it keeps its
     * values (a warning with the count of such solves, one an
     * iteration). */
    t = planted_partial(-1, 1, NULL);
    params.max_iters = 4;
    params.tolerance = 0.0;
    params.holdout = 0.0;
    expect_ok(tensorhost_complete(backend, t, &params, &r, err), err);
    expect_ok(tensorhost_cpd_get_completion(r, &info, err), err);
    assert_int_equal(info.singular_row_solves, 4);
    const char *deficient = warning_of(r, TENSORHOST_WARN_RANK_DEFICIENT);
    assert_non_null(deficient);
    assert_non_null(strstr(deficient, "4 row solves were singular"));
    tensorhost_cpd_free(r);
    tensorhost_tensor_free(t);

    /* A row no entry reaches, with a ridge: made 0, with a warning. */
    {
        const uint64_t dims[] = {3, 2, 2};
        const uint64_t indices[] = {0, 0, 0, 0, 1, 1, 1, 0, 1, 1, 1, 0};
        const double values[] = {1.0, 2.0, 3.0, 4.0};
        expect_ok(tensorhost_tensor_new(3, dims, 4, indices, values, &t, err), err);
    }
    params = (tensorhost_complete_params)TENSORHOST_COMPLETE_PARAMS_INIT;
    params.rank = 1;
    params.l2 = 0.01;
    params.max_iters = 3;
    params.tolerance = 0.0;
    expect_ok(tensorhost_complete(backend, t, &params, &r, err), err);
    const char *empty = warning_of(r, TENSORHOST_WARN_EMPTY_ROWS);
    assert_non_null(empty);
    assert_non_null(strstr(empty, "1 row of mode 1 (the first: row 3) has no training entry"));
    expect_ok(tensorhost_cpd_get_completion(r, &info, err), err);
    assert_int_equal(info.empty_rows, 1);
    assert_true(tensorhost_cpd_factor(r, 0)[2] == 0.0);
    assert_string_equal(tensorhost_warning_name(TENSORHOST_WARN_EMPTY_ROWS),
                        "TENSORHOST_WARN_EMPTY_ROWS");
    tensorhost_cpd_free(r);
    tensorhost_tensor_free(t);
    tensorhost_backend_close(backend);
}

/* The handler gets every level, the plugins' lines included; the run's
 * warnings are not log lines; NULL puts the default back. */
static void test_log_handler(void **state)
{
    (void)state;
    log_seen seen = {0};
    tensorhost_set_log_handler(note_log, &seen);
    tensorhost_backend *backend = open_cpu();
    assert_int_equal(seen.instance_debug, 1);

    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_tensor *t = NULL;
    expect_ok(tensorhost_tensor_read(AMINOACID, &t, err), err);
    tensorhost_cpd_params params = TENSORHOST_CPD_PARAMS_INIT;
    params.rank = 3;
    params.max_iters = 2;
    params.tolerance = 1e-12;
    tensorhost_cpd *r = NULL;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_non_null(warning_of(r, TENSORHOST_WARN_NOT_CONVERGED));
    assert_int_equal(seen.warnings, 0); /* on the result only */
    tensorhost_cpd_free(r);
    tensorhost_backend_close(backend);

    log_seen again = {0};
    tensorhost_set_log_handler(replace_self, &again);
    backend = open_cpu();
    tensorhost_backend_close(backend);
    assert_int_equal(again.replaced, 1);
    assert_true(again.lines >= 1); /* the lines after the first went to note_log */

    const int before = seen.lines + again.lines;
    tensorhost_set_log_handler(NULL, NULL);
    backend = open_cpu();
    tensorhost_backend_close(backend);
    assert_int_equal(seen.lines + again.lines, before);
    tensorhost_tensor_free(t);
}

/* A stop asked between calls is forgotten: the next read and run go to
 * their end. A device string stays valid until the backend is closed,
 * however often it is asked for (ASan sees a use after free). */
static void test_stop_between_calls_and_device_strings(void **state)
{
    (void)state;
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_request_stop();
    tensorhost_tensor *t = NULL;
    expect_ok(tensorhost_tensor_read(AMINOACID, &t, err), err);
    tensorhost_backend *backend = open_cpu();
    const char *before = tensorhost_backend_device(backend);
    tensorhost_request_stop();
    tensorhost_cpd_params params = TENSORHOST_CPD_PARAMS_INIT;
    params.rank = 3;
    params.max_iters = 3;
    params.tolerance = 0.0;
    tensorhost_cpd *r = NULL;
    expect_ok(tensorhost_cp_als(backend, t, &params, &r, err), err);
    assert_int_equal(tensorhost_cpd_status_of(r), TENSORHOST_CPD_MAX_ITERS);
    assert_int_equal(tensorhost_cpd_iterations(r), 3);
    const char *after = tensorhost_backend_device(backend);
    assert_non_null(strstr(after, "CPU"));
    assert_true(strlen(before) < 1000); /* still readable */
    assert_string_equal(tensorhost_backend_device(backend), after);
    tensorhost_cpd_free(r);
    tensorhost_backend_close(backend);
    tensorhost_tensor_free(t);
}

static void test_backend_errors(void **state)
{
    (void)state;
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_backend *backend = NULL;
    assert_int_equal(tensorhost_backend_open("no-such-backend", TH_PLUGIN_DIR, NULL, 0, &backend,
                                             err),
                     TENSORHOST_ERR_PLUGIN);
    assert_non_null(strstr(err, "no-such-backend"));
    const tensorhost_option bad = {"threads", "100000"};
    assert_int_equal(tensorhost_backend_open("cpu-reference", TH_PLUGIN_DIR, &bad, 1, &backend,
                                             err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "threads"));
    assert_null(backend);
}

typedef struct plugin_seen {
    int cpu_reference_usable;
    int count;
} plugin_seen;

static void note_plugin(const char *name, const char *path, const char *problem,
                        void *user_data)
{
    plugin_seen *seen = user_data;
    assert_non_null(strstr(path, name));
    seen->count++;
    if (strcmp(name, "cpu-reference") == 0 && problem == NULL)
        seen->cpu_reference_usable = 1;
    if (strncmp(name, "gpu-", 4) == 0 && problem != NULL) /* a host without a GPU */
        assert_non_null(strstr(problem, "device"));
}

static void test_list_plugins(void **state)
{
    (void)state;
    char err[TENSORHOST_ERROR_SIZE] = "";
    plugin_seen seen = {0};
    expect_ok(tensorhost_list_plugins(TH_PLUGIN_DIR, note_plugin, &seen, err), err);
    assert_true(seen.cpu_reference_usable);
    assert_true(seen.count >= 1);
    assert_int_equal(tensorhost_list_plugins(NULL, NULL, NULL, err),
                     TENSORHOST_ERR_INVALID_ARGUMENT);
}

/* NULL handles are reported; a freed one aborts with a message where debug
 * checks are on (a child process, so the test survives it). */
static void test_misuse(void **state)
{
    (void)state;
    char err[TENSORHOST_ERROR_SIZE] = "";
    tensorhost_cpd *r = NULL;
    tensorhost_cpd_params params = TENSORHOST_CPD_PARAMS_INIT;
    assert_int_equal(tensorhost_cp_als(NULL, NULL, &params, &r, err), TENSORHOST_ERR_MISUSE);
    assert_non_null(strstr(err, "the backend is NULL"));
    tensorhost_tensor_free(NULL);
    tensorhost_backend_close(NULL);
    tensorhost_cpd_free(NULL);
    assert_null(tensorhost_cpd_weights(NULL));
    assert_int_equal(tensorhost_cpd_status_of(NULL), TENSORHOST_ERR_MISUSE);
#ifndef NDEBUG
    /* In a fresh process (this program, re-run), without leak checking:
     * the abort leaves the tensor behind on purpose. */
    const pid_t child = fork();
    if (child == 0) {
        setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
        execl("/proc/self/exe", "test_api", "--free-twice", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT))
        fail_msg("a second free did not abort (wait status %d)", status);
#endif
}

/* The child of test_misuse: frees one tensor twice, which must abort. */
static int free_twice(void)
{
    char err[TENSORHOST_ERROR_SIZE] = "";
    const uint64_t dims[] = {2, 2};
    const uint64_t indices[] = {0, 1};
    const double values[] = {1.0};
    tensorhost_tensor *t = NULL;
    if (tensorhost_tensor_new(2, dims, 1, indices, values, &t, err) != TENSORHOST_OK)
        return 2;
    tensorhost_tensor_free(t);
    tensorhost_tensor_free(t);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--free-twice") == 0)
        return free_twice();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),           cmocka_unit_test(test_tensor_from_coo),
        cmocka_unit_test(test_tensor_read_errors), cmocka_unit_test(test_cp_als_result),
        cmocka_unit_test(test_initial_factors),   cmocka_unit_test(test_backend_errors),
        cmocka_unit_test(test_list_plugins),      cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_stop_between_calls_and_device_strings),
        cmocka_unit_test(test_warnings_rank),     cmocka_unit_test(test_warnings_not_converged),
        cmocka_unit_test(test_warnings_underflowed_values),
        cmocka_unit_test(test_cp_apr_parameters), cmocka_unit_test(test_cp_apr_result),
        cmocka_unit_test(test_constraints),
        cmocka_unit_test(test_regularisation),       cmocka_unit_test(test_complete_parameters),
        cmocka_unit_test(test_complete_result),   cmocka_unit_test(test_complete_holdout),
        cmocka_unit_test(test_complete_accessors_and_warnings),
        cmocka_unit_test(test_log_handler),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
