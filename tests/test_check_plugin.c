/* The plugin conformance checker (programs/cmds/check_plugin.c): correct plugins pass
 * with the expected lines, and each deliberately broken fixture fails the
 * one check that names its fault while the others still pass. */
#define _GNU_SOURCE /* open_memstream() */

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_plugin.h"

#define CPU_REFERENCE TH_PLUGIN_DIR "/cpu-reference.so"
#define FIXTURE(name) TH_FIXTURE_PLUGIN_DIR "/" name ".so"
#define ABI_FIXTURE(name) TH_ABI_PLUGIN_DIR "/" name ".so"

typedef struct run {
    int status;
    th_check_counts counts;
    char *output;
} run;

static run check(const char *plugin, const char *reference)
{
    run r = {0};
    size_t size = 0;
    FILE *out = open_memstream(&r.output, &size);
    assert_non_null(out);
    th_check_options options = {
        .plugin = plugin, .reference = reference, .seed = 7, .quick = TRUE, .out = out};
    r.status = th_check_plugin(&options, &r.counts);
    fclose(out);
    return r;
}

static void run_clear(run *r)
{
    free(r->output);
}

static unsigned lines_starting(const char *output, const char *prefix)
{
    unsigned count = 0;
    for (const char *line = output; line && *line; line = strchr(line, '\n') + 1) {
        if (strncmp(line, prefix, strlen(prefix)) == 0)
            count++;
        if (strchr(line, '\n') == NULL)
            break;
    }
    return count;
}

/* The line must be present, whole. */
static void assert_line(const run *r, const char *line)
{
    char *found = strstr(r->output, line);
    if (found == NULL || (found != r->output && found[-1] != '\n') ||
        (found[strlen(line)] != '\n')) {
        print_error("missing line: %s\noutput:\n%s\n", line, r->output);
        fail();
    }
}

/* A whole line that starts with `head` and ends with `tail` (a measured
 * number between them). */
static void assert_line_around(const run *r, const char *head, const char *tail)
{
    for (const char *line = r->output; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        const size_t length = end ? (size_t)(end - line) : strlen(line);
        if (length >= strlen(head) + strlen(tail) && strncmp(line, head, strlen(head)) == 0 &&
            strncmp(line + length - strlen(tail), tail, strlen(tail)) == 0)
            return;
        line = end ? end + 1 : NULL;
    }
    print_error("missing line: %s...%s\noutput:\n%s\n", head, tail, r->output);
    fail();
}

/* The counts agree with the lines, and the summary says the same. */
static void assert_consistent(const run *r)
{
    assert_int_equal(lines_starting(r->output, "PASS "), r->counts.passed);
    assert_int_equal(lines_starting(r->output, "FAIL "), r->counts.failed);
    assert_int_equal(lines_starting(r->output, "SKIP "), r->counts.skipped);
    char summary[96];
    snprintf(summary, sizeof summary, "%u passed, %u failed, %u skipped", r->counts.passed,
             r->counts.failed, r->counts.skipped);
    assert_line(r, summary);
}

static void test_cpu_reference_passes(void **state)
{
    (void)state;
    run r = check(CPU_REFERENCE, NULL);
    assert_consistent(&r);
    assert_int_equal(r.counts.failed, 0);
    assert_int_equal(r.status, 0);
    assert_line(&r, "PASS required functions");
    /* ABI 1.10: each mode built from its own nonzeros. */
    assert_non_null(strstr(r.output, "\nPASS mttkrp mode_nonzeros (3 modes, each from its "
                                     "lower half of rows, max relative error "));
    assert_line(&r, "PASS info (id 'cpu-reference', version 1.0.0, f64, max_modes 64, "
                    "max_rank 4096, als_update, init_factors)");
    assert_line(&r, "PASS mttkrp before load_tensor");
    assert_line(&r, "PASS unknown option (unknown option 'th-check-no-such-option' "
                    "(cpu-reference accepts: threads))");
    /* cpu-reference supports the host's 64 modes: nothing bigger to try. */
    assert_line(&r, "SKIP tensor it cannot hold: max_modes 64 reaches the host's limit of 64 "
                    "modes");
    assert_non_null(strstr(r.output, "\nPASS mttkrp modes=8 skew=zipf rank=16 ("));
    assert_non_null(strstr(r.output, "\nPASS als_update modes=3 skew=uniform rank=1 mode=2 "
                                     "norm=2 ("));
    assert_line(&r, "PASS create/destroy x50 (and destroy(NULL))");
    assert_line(&r, "PASS load/unload x20");
    /* ABI 1.7: the inner iterations in one call, to the end and stopped part
     * way, against the checker's own loop. */
    assert_non_null(strstr(r.output, "\nPASS multiplicative_updates modes=4 skew=zipf rank=16 "
                                     "(max relative error "));
    assert_line(&r, "PASS multiplicative_updates errors");
    /* ABI 1.3: its own draw of the initial factors is the host's, bit for
     * bit, over seeds from 0 to UINT64_MAX and a mode of length 1. */
    assert_non_null(strstr(r.output, "\nPASS init_factors modes=3 skew=uniform rank=4 seed=0 "
                                     "(factors bitwise those of set_factor, Grams max relative "
                                     "error "));
    assert_non_null(strstr(r.output, "\nPASS init_factors modes=4 skew=zipf rank=16 "
                                     "seed=18446744073709551615 ("));
    assert_non_null(strstr(r.output, "\nPASS init_factors modes=3 skew=dim1-empty-slices "
                                     "rank=7 seed=7 ("));
    assert_non_null(strstr(r.output, "\nPASS init_factors modes=6 skew=uniform rank=32 "
                                     "seed=9223372036854775815 ("));
    assert_line(&r, "PASS init_factors before load_tensor (TH_ERR_BAD_STATE: init_factors: no "
                    "tensor loaded (call load_tensor first))");
    assert_line(&r, "PASS init_factors short io (TH_ERR_INVALID_ARGUMENT: init_factors: "
                    "th_init_factors_io is shorter than the one of ABI 1.3)");
    assert_line(&r, "PASS init_factors nmodes mismatch (TH_ERR_INVALID_ARGUMENT: init_factors: "
                    "io.nmodes is 4 but the loaded tensor has 3 modes)");
    assert_int_equal(lines_starting(r.output, "PASS init_factors "), 7);
    /* ABI 1.4: the generalized MTTKRP and the factor operations against the
     * checker's own double computation, on empty slices and 4 modes too,
     * and the error rules. */
    assert_non_null(strstr(r.output, "\nPASS generalized_mttkrp modes=3 skew=uniform rank=4 "
                                     "(max relative error "));
    assert_non_null(strstr(r.output, "\nPASS generalized_mttkrp modes=3 "
                                     "skew=dim1-empty-slices rank=3 ("));
    assert_non_null(strstr(r.output, "\nPASS generalized_mttkrp modes=4 skew=zipf rank=7 ("));
    assert_line(&r, "PASS factor_update modes=4 skew=zipf rank=7");
    assert_line(&r, "PASS factor_update before a result of the mode (TH_ERR_BAD_STATE: "
                    "factor_update: TH_FACTOR_MULTIPLICATIVE_UPDATE reads Phi, but mode 0 has no "
                    "MTTKRP result yet (call generalized_mttkrp first))");
    assert_line(&r, "PASS generalized_mttkrp epsilon 0 (TH_ERR_INVALID_ARGUMENT: "
                    "generalized_mttkrp: io.epsilon 0 must be > 0 for "
                    "TH_ELEMENTWISE_POISSON_RATIO (it floors the divisor))");
    assert_int_equal(lines_starting(r.output, "PASS generalized_mttkrp "), 8);
    assert_int_equal(lines_starting(r.output, "PASS factor_update "), 7);
    /* ABI 1.5: row_least_squares against the checker's own solve, with a
     * singular and an empty row at ridge 0 and > 0, nonneg 0 and 1, and the
     * error rules. */
    assert_line_around(&r,
                       "PASS row_least_squares modes=3 shape=thin-and-empty-rows rank=4 ridge=0 "
                       "nonneg=0 (max relative error ",
                       "; 1 singular and 1 empty rows over the modes)");
    assert_non_null(strstr(r.output, "\nPASS row_least_squares modes=4 "
                                     "shape=thin-and-empty-rows rank=7 ridge=0.1 nonneg=1 ("));
    assert_non_null(strstr(r.output, "\nPASS row_least_squares modes=3 skew=zipf rank=3 "
                                     "ridge=0 nonneg=1 ("));
    assert_line(&r, "PASS row_least_squares NaN ridge (TH_ERR_INVALID_ARGUMENT: "
                    "row_least_squares: io.ridge nan must be finite and >= 0)");
    assert_line(&r, "PASS row_least_squares passes 0 with nonneg 1 (TH_ERR_INVALID_ARGUMENT: "
                    "row_least_squares: io.passes is 0 with io.nonneg 1; at least one pass of "
                    "coordinate descent is needed)");
    assert_int_equal(lines_starting(r.output, "PASS row_least_squares "), 11 + 7);
    /* ABI 1.5: als_update_nonneg against the checker's own HALS (both
     * norms, scale NULL and given, 1 and 5 sweeps, tolerance 0 and 1e-8; a
     * skewed 4-mode tensor), the passes reported, and the error rules. */
    assert_non_null(strstr(r.output, "\nPASS als_update_nonneg modes=3 rank=6 norm=2 scale=NULL "
                                     "sweeps=5 tolerance=0 (max relative error "));
    assert_non_null(strstr(r.output, "; passes by mode 5, 5, 5)\n"));
    assert_non_null(strstr(r.output, "\nPASS als_update_nonneg modes=3 rank=6 norm=max "
                                     "scale=given sweeps=5 tolerance=1e-08 ("));
    assert_non_null(strstr(r.output, "\nPASS als_update_nonneg modes=4 skew=zipf rank=3 "
                                     "norm=2 scale=NULL sweeps=5 tolerance=1e-08 ("));
    assert_line(&r, "PASS als_update_nonneg before mttkrp (TH_ERR_BAD_STATE: als_update_nonneg: "
                    "mode 0 has no MTTKRP result yet (call mttkrp first))");
    assert_line(&r, "PASS als_update_nonneg NaN tolerance (TH_ERR_INVALID_ARGUMENT: "
                    "als_update_nonneg: io.tolerance nan must be finite and >= 0)");
    /* ABI 1.6: ridge, l1 and TH_CONSTRAINT_NONE against the same oracle,
     * and their error rules. */
    assert_non_null(strstr(r.output, "\nPASS als_update_nonneg modes=3 rank=6 norm=2 scale=NULL "
                                     "sweeps=3 tolerance=0 ridge=0.5 l1=0 unbounded=1 (max "
                                     "relative error "));
    assert_non_null(strstr(r.output, "\nPASS als_update_nonneg modes=3 rank=6 norm=max "
                                     "scale=given sweeps=5 tolerance=1e-08 ridge=0 l1=0.05 "
                                     "unbounded=1 ("));
    assert_non_null(strstr(r.output, "\nPASS als_update_nonneg modes=3 rank=6 norm=2 "
                                     "scale=given sweeps=5 tolerance=0 ridge=0.25 l1=0.05 "
                                     "unbounded=0 ("));
    assert_non_null(strstr(r.output, "\nPASS als_update_nonneg modes=4 skew=zipf rank=3 norm=2 "
                                     "scale=given sweeps=5 tolerance=1e-08 ridge=0.1 l1=0.02 "
                                     "unbounded=1 ("));
    assert_line(&r, "PASS als_update_nonneg NaN l1 (TH_ERR_INVALID_ARGUMENT: als_update_nonneg: "
                    "io.l1 nan must be finite and >= 0)");
    assert_line(&r, "PASS als_update_nonneg unbounded 2 (TH_ERR_INVALID_ARGUMENT: "
                    "als_update_nonneg: io.unbounded 2 must be 0 or 1)");
    assert_int_equal(lines_starting(r.output, "PASS als_update_nonneg "), 16 + 2 + 4 + 11 + 5);
    run_clear(&r);
}

static void test_fixture_good_passes_against_the_reference(void **state)
{
    (void)state;
    run r = check(FIXTURE("fixture_good"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.counts.failed, 0);
    assert_non_null(strstr(r.output, "\nPASS reference (cpu-reference "));
    assert_line(&r, "PASS tensor it cannot hold (17 modes: 17 modes not supported)");
    assert_line(&r, "SKIP als_update: not implemented (optional; the host updates the factors "
                    "itself)");
    assert_line(&r, "SKIP runtime info: get_runtime_info not implemented (optional)");
    run_clear(&r);
}

static void test_frozen_v1_0_plugin_passes(void **state)
{
    (void)state;
    run r = check(ABI_FIXTURE("fixture_frozen_v1_0"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 0);
    assert_line(&r, "PASS entry version (ABI 1.0, host 1.10)");
    assert_line(&r, "PASS entry size (112 bytes)");
    assert_line(&r, "PASS runtime info (device 'CPU (ABI 1.0 fixture)')");
    assert_line(&r, "SKIP als_sweep: not implemented (optional, ABI 1.1; the host runs each "
                    "mode itself)");
    assert_line(&r, "SKIP init_factors: not implemented (optional, ABI 1.3; the host draws the "
                    "initial factors and uploads them)");
    assert_line(&r, "SKIP generalized_mttkrp: lacks generalized_mttkrp/factor_update (ABI 1.4): "
                    "models other than least squares will not run on it");
    assert_line(&r, "SKIP row_least_squares: not implemented (optional, ABI 1.5): tensor "
                    "completion will not run on it");
    assert_line(&r, "SKIP als_update_nonneg: not implemented (optional, ABI 1.5): nonnegative "
                    "CP updates its factors on the host");
    run_clear(&r);
}

static void test_frozen_v1_2_plugin_passes(void **state)
{
    (void)state;
    run r = check(ABI_FIXTURE("fixture_frozen_v1_2"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.counts.failed, 0);
    assert_line(&r, "PASS entry version (ABI 1.2, host 1.10)");
    assert_line(&r, "PASS entry size (120 bytes)");
    assert_non_null(strstr(r.output, "\nPASS als_sweep modes=3 rank=4 norm=2 (vs the "
                                     "reference's per-mode iteration, max relative error "));
    assert_line(&r, "SKIP init_factors: not implemented (optional, ABI 1.3; the host draws the "
                    "initial factors and uploads them)");
    assert_line(&r, "SKIP generalized_mttkrp: lacks generalized_mttkrp/factor_update (ABI 1.4): "
                    "models other than least squares will not run on it");
    run_clear(&r);
}

/* ABI 1.4 through a 1.5 host: the generalized MTTKRP and the factor
 * operations pass; row_least_squares lies beyond its entry. */
static void test_frozen_v1_4_plugin_passes(void **state)
{
    (void)state;
    run r = check(ABI_FIXTURE("fixture_frozen_v1_4"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.counts.failed, 0);
    assert_line(&r, "PASS entry version (ABI 1.4, host 1.10)");
    assert_line(&r, "PASS entry size (144 bytes)");
    assert_int_equal(lines_starting(r.output, "PASS generalized_mttkrp "), 8);
    assert_int_equal(lines_starting(r.output, "PASS factor_update "), 7);
    assert_line(&r, "SKIP row_least_squares: not implemented (optional, ABI 1.5): tensor "
                    "completion will not run on it");
    assert_line(&r, "SKIP als_update_nonneg: not implemented (optional, ABI 1.5): nonnegative "
                    "CP updates its factors on the host");
    run_clear(&r);
}

/* ABI 1.5 through a 1.7 host: row_least_squares and als_update_nonneg
 * pass; the 1.6 fields are never set for it, and the checks of them say so;
 * it has no multiplicative_updates (1.7). */
static void test_frozen_v1_5_plugin_passes(void **state)
{
    (void)state;
    run r = check(ABI_FIXTURE("fixture_frozen_v1_5"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.counts.failed, 0);
    assert_line(&r, "PASS entry version (ABI 1.5, host 1.10)");
    assert_line(&r, "PASS entry size (160 bytes)");
    assert_int_equal(lines_starting(r.output, "PASS row_least_squares "), 11 + 7);
    assert_int_equal(lines_starting(r.output, "PASS als_update_nonneg "), 16 + 2 + 11);
    assert_int_equal(lines_starting(r.output, "PASS als_sweep "), 5);
    assert_line(&r, "SKIP als_update_nonneg ridge, l1 and unbounded: the plugin's entry says "
                    "ABI 1.5: these fields of ABI 1.6 are never set for it");
    assert_line(&r, "SKIP als_sweep constraints, l1, ridge and scale: the plugin's entry says "
                    "ABI 1.5: these fields of ABI 1.6 are never set for it");
    assert_line(&r, "SKIP multiplicative_updates: lacks multiplicative_updates (ABI 1.7): the "
                    "host runs CP-APR's inner iterations one call each");
    assert_line(&r, "SKIP mttkrp mode_nonzeros: the plugin does not say it builds each mode "
                    "from its own nonzeros (th_runtime_info.mode_nonzeros, ABI 1.10)");
    assert_int_equal(r.counts.skipped, 4);
    run_clear(&r);
}

/* ABI 1.1: a sweep is checked against the reference's per-mode iteration
 * from the same factors, and its error paths one by one. */
static void test_sweep_plugin_passes_its_sweep_checks(void **state)
{
    (void)state;
    run r = check(FIXTURE("fixture_sweep"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.counts.failed, 0);
    assert_line(&r, "PASS entry version (ABI 1.10, host 1.10)");
    assert_line(&r, "PASS info (id 'fixture_sweep', version 0.0.1, f64, max_modes 16, "
                    "max_rank 256, als_update, als_sweep)");
    assert_non_null(strstr(r.output, "\nPASS als_sweep modes=3 rank=4 norm=2 (vs the "
                                     "reference's per-mode iteration, max relative error "));
    assert_non_null(strstr(r.output, "\nPASS als_sweep modes=4 rank=7 norm=max (vs the "
                                     "reference's per-mode iteration, max relative error "));
    assert_line(&r, "PASS als_sweep before load_tensor (TH_ERR_BAD_STATE: als_sweep: no tensor "
                    "loaded)");
    assert_line(&r, "PASS als_sweep short io (TH_ERR_INVALID_ARGUMENT: als_sweep: "
                    "th_als_sweep_io is 32 bytes, expected at least 40)");
    assert_line(&r, "PASS als_sweep nmodes mismatch (TH_ERR_INVALID_ARGUMENT: als_sweep: "
                    "io.nmodes is 4 but the loaded tensor has 3 modes)");
    /* ABI 1.6: ridge alone, every mode nonnegative, mixed with l1 on an
     * unconstrained mode and a scale, and on 4 modes a descent mode after a
     * Cholesky one, against the checker's own sweep; then the bad values. */
    assert_non_null(strstr(r.output, "\nPASS als_sweep modes=3 rank=4 norm=2 ridge=0.5 (vs the "
                                     "checker's own sweep, max relative error "));
    assert_non_null(strstr(r.output, "\nPASS als_sweep modes=3 rank=4 norm=max "
                                     "constraints=nonneg,nonneg,nonneg hals_sweeps=3 "
                                     "hals_tolerance=0 (vs the checker's own sweep, "));
    assert_non_null(strstr(r.output, "\nPASS als_sweep modes=3 rank=5 norm=2 ridge=0.25 "
                                     "constraints=none,nonneg,none l1=0.05,0.02,0 scale=given "
                                     "hals_sweeps=5 hals_tolerance=1e-08 (vs the checker's own "
                                     "sweep, "));
    assert_non_null(strstr(r.output, "\nPASS als_sweep modes=4 rank=3 norm=2 ridge=0.1 "
                                     "constraints=nonneg,none,none,nonneg l1=0,0.05,0,0.02 "
                                     "scale=given hals_sweeps=1 hals_tolerance=0 (vs the "
                                     "checker's own sweep, "));
    assert_line(&r, "PASS als_sweep constraint 2 (TH_ERR_INVALID_ARGUMENT: als_sweep: "
                    "io.constraints[1] is 2, not a TH_CONSTRAINT_*)");
    assert_line(&r, "PASS als_sweep hals_sweeps 0 with a nonnegative mode "
                    "(TH_ERR_INVALID_ARGUMENT: als_sweep: io.hals_sweeps is 0 with a mode "
                    "updated by coordinate descent)");
    /* ABI 1.9: each mode its own passes, and an entry 0 refused. */
    assert_non_null(strstr(r.output, "\nPASS als_sweep modes=3 rank=4 norm=2 "
                                     "constraints=nonneg,nonneg,nonneg scale=given "
                                     "hals_mode_sweeps=1,4,2 hals_tolerance=0 (vs the checker's "
                                     "own sweep, "));
    assert_line(&r, "PASS als_sweep hals_mode_sweeps entry 0 for a nonnegative mode "
                    "(TH_ERR_INVALID_ARGUMENT: als_sweep: io.hals_mode_sweeps[1] is 0 for a "
                    "mode updated by coordinate descent)");
    assert_int_equal(lines_starting(r.output, "PASS als_sweep "), 5 + 5 + 5);
    run_clear(&r);

    /* Without a reference that has als_update, the plugin's own per-mode
     * path is the yardstick. */
    r = check(FIXTURE("fixture_sweep"), FIXTURE("fixture_good"));
    assert_consistent(&r);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.output, "\nPASS als_sweep modes=3 rank=4 norm=2 (vs its own "
                                     "per-mode iteration, max relative error "));
    run_clear(&r);
}

static void test_sweep_with_wrong_lambda_fails_the_sweep_checks(void **state)
{
    (void)state;
    run r = check(FIXTURE("fixture_sweep_wrong_lambda"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 1);
    assert_line(&r, "FAIL als_sweep modes=3 rank=4 norm=2: lambda: relative error 0.01 > "
                    "tolerance 1e-10");
    assert_line(&r, "FAIL als_sweep modes=4 rank=7 norm=max: lambda: relative error 0.01 > "
                    "tolerance 1e-10");
    /* So are the sweeps with ABI 1.6's fields, against the checker's own. */
    assert_non_null(strstr(r.output, "\nFAIL als_sweep modes=3 rank=4 norm=2 ridge=0.5: lambda: "
                                     "relative error 0.01 > tolerance 1e-10\n"));
    /* Only the sweep is wrong: MTTKRP and als_update still pass. */
    assert_int_equal(r.counts.failed, 2 + 5);
    assert_int_equal(lines_starting(r.output, "FAIL als_sweep "), 2 + 5);
    run_clear(&r);
}

/* ABI 1.6: a sweep that claims 1.6 but ignores its fields (sweeps as 1.5
 * did) fails every 1.6 sweep case and bad-value check, and nothing else. */
static void test_sweep_ignoring_v1_6_fails_the_v1_6_checks(void **state)
{
    (void)state;
    run r = check(FIXTURE("fixture_sweep_ignores_1_6"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.output, "\nFAIL als_sweep modes=3 rank=4 norm=2 ridge=0.5: lambda: "
                                     "relative error "));
    assert_non_null(strstr(r.output, "\nFAIL als_sweep modes=3 rank=4 norm=max "
                                     "constraints=nonneg,nonneg,nonneg hals_sweeps=3 "
                                     "hals_tolerance=0: "));
    assert_non_null(strstr(r.output, "\nFAIL als_sweep modes=3 rank=5 norm=2 ridge=0.25 "
                                     "constraints=none,nonneg,none l1=0.05,0.02,0 scale=given "
                                     "hals_sweeps=5 hals_tolerance=1e-08: "));
    assert_line(&r, "FAIL als_sweep constraint 2: als_sweep returned TH_OK");
    assert_int_equal(lines_starting(r.output, "FAIL als_sweep "), 5 + 5);
    assert_int_equal(r.counts.failed, 5 + 5);
    /* The 1.1 sweep is right. */
    assert_int_equal(lines_starting(r.output, "PASS als_sweep "), 5);
    run_clear(&r);
}

/* ABI 1.6: a plugin may refuse the 1.6 fields with TH_ERR_UNSUPPORTED: each
 * such case is a SKIP that says so, not a FAIL; bad values must still be
 * TH_ERR_INVALID_ARGUMENT, and the 1.5 update still passes. */
static void test_unsupported_v1_6_fields_skip(void **state)
{
    (void)state;
    run r = check(FIXTURE("fixture_sweep_refuses_1_6"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.counts.failed, 0);
    assert_line(&r, "SKIP als_sweep modes=3 rank=4 norm=2 ridge=0.5: TH_ERR_UNSUPPORTED "
                    "(allowed from ABI 1.6: the host then runs the iteration per mode): "
                    "fixture_sweep_refuses_1_6: als_sweep: constraints, l1 and ridge are not "
                    "supported here (test fixture)");
    assert_int_equal(lines_starting(r.output, "SKIP als_sweep modes="), 5);
    assert_line(&r, "SKIP als_update_nonneg modes=3 rank=6 norm=2 scale=NULL sweeps=3 "
                    "tolerance=0 ridge=0.5 l1=0 unbounded=1: TH_ERR_UNSUPPORTED (allowed "
                    "from ABI 1.6: the host then updates the mode itself): "
                    "fixture_sweep_refuses_1_6: als_update_nonneg: ridge, l1 and "
                    "TH_CONSTRAINT_NONE are not supported here (test fixture)");
    assert_int_equal(lines_starting(r.output, "SKIP als_update_nonneg modes="), 4);
    assert_int_equal(lines_starting(r.output, "PASS als_update_nonneg modes="), 16 + 2);
    assert_int_equal(lines_starting(r.output, "PASS als_sweep "), 5 + 5);
    run_clear(&r);
}

/* A plugin of ABI 1.5 is never given a field of 1.6: the witness refuses
 * (TH_ERR_INVALID_ARGUMENT) any call whose 1.6 fields ask for more than
 * 1.5 does, so every sweep and update case passing shows the checker kept
 * them at their defaults; the 1.6 checks are SKIPs naming ABI 1.6. */
static void test_v1_5_plugin_is_never_given_the_v1_6_fields(void **state)
{
    (void)state;
    run r = check(FIXTURE("fixture_sweep_v1_5_witness"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.counts.failed, 0);
    assert_line(&r, "PASS entry version (ABI 1.5, host 1.10)");
    assert_int_equal(lines_starting(r.output, "PASS als_sweep "), 5);
    assert_int_equal(lines_starting(r.output, "PASS als_update_nonneg modes="), 16 + 2);
    assert_line(&r, "SKIP als_sweep constraints, l1, ridge and scale: the plugin's entry says "
                    "ABI 1.5: these fields of ABI 1.6 are never set for it");
    assert_line(&r, "SKIP als_update_nonneg ridge, l1 and unbounded: the plugin's entry says "
                    "ABI 1.5: these fields of ABI 1.6 are never set for it");
    run_clear(&r);
}

/* An init_factors whose values differ from the host's draw (rounded to
 * float in an f64 backend) fails every init_factors case and nothing else. */
static void test_wrong_init_fails_the_init_checks(void **state)
{
    (void)state;
    run r = check(ABI_FIXTURE("fixture_wrong_init"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 1);
    assert_line(&r, "FAIL init_factors modes=3 skew=uniform rank=4 seed=0: mode 0 row 0 column "
                    "0: 0.32280194759368896 after init_factors, 0.32280196242879522 after "
                    "set_factor of the host's draw (they must be bitwise identical)");
    assert_int_equal(lines_starting(r.output, "FAIL init_factors "), 4);
    assert_int_equal(r.counts.failed, 4);
    /* Its error paths are right. */
    assert_int_equal(lines_starting(r.output, "PASS init_factors "), 3);
    run_clear(&r);
}

/* ABI 1.5: a correct row_least_squares without generalized_mttkrp fails
 * the pairing only; one that zeroes singular rows fails the two ridge-0
 * unconstrained cases too, naming the row. */
/* The run failed exactly one check, the one `line` names. */
static void assert_one_failure(const run *r, const char *line)
{
    assert_consistent(r);
    assert_int_equal(r->status, 1);
    assert_int_equal(r->counts.failed, 1);
    assert_line(r, line);
}

static void test_completion_faults_fail_their_checks(void **state)
{
    (void)state;
    const char *half = "FAIL row_least_squares: implements row_least_squares but not "
                       "generalized_mttkrp: the host runs tensor completion only on a backend "
                       "with both (ABI 1.5)";
    run r = check(ABI_FIXTURE("fixture_half_completion"), NULL);
    assert_one_failure(&r, half);
    assert_int_equal(lines_starting(r.output, "PASS row_least_squares "), 11 + 7);
    run_clear(&r);

    r = check(ABI_FIXTURE("fixture_wrong_completion"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 1);
    assert_int_equal(r.counts.failed, 3);
    assert_line(&r, half);
    assert_line(&r, "FAIL row_least_squares modes=3 shape=thin-and-empty-rows rank=4 ridge=0 "
                    "nonneg=0: mode 0 row 5 has 3 nonzeros at rank 4, ridge 0: its system is "
                    "singular and the row must be left as it was");
    assert_line(&r, "FAIL row_least_squares modes=4 shape=thin-and-empty-rows rank=7 ridge=0 "
                    "nonneg=0: mode 2 row 1 has 6 nonzeros at rank 7, ridge 0: its system is "
                    "singular and the row must be left as it was");
    assert_int_equal(lines_starting(r.output, "PASS row_least_squares "), 9 + 7);
    run_clear(&r);
}

static void test_wrong_mttkrp_fails_every_case_and_only_those(void **state)
{
    (void)state;
    run r = check(ABI_FIXTURE("fixture_wrong_mttkrp"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 1);
    assert_line(&r, "FAIL mttkrp modes=3 skew=uniform rank=1: mode 0: relative Frobenius "
                    "error 0.01 > tolerance 1e-10");
    assert_line(&r, "FAIL load_tensor x20: mode 0: relative Frobenius error 0.01 > "
                    "tolerance 1e-10");
    /* Quick: orders 3, 4, 8 x ranks 1, 16 x 3 skews, plus the repeated load. */
    assert_int_equal(r.counts.failed, 3 * 2 * 3 + 1);
    assert_int_equal(lines_starting(r.output, "FAIL mttkrp "), 18);
    assert_line(&r, "PASS create/destroy x50 (and destroy(NULL))");
    run_clear(&r);
}

static void test_lenient_options_fails_the_option_check(void **state)
{
    (void)state;
    run r = check(ABI_FIXTURE("fixture_lenient_options"), NULL);
    assert_one_failure(&r, "FAIL unknown option: create() accepted option "
                           "'th-check-no-such-option'; unknown keys must be errors");
    run_clear(&r);
}

/* process_sums (ABI 1.8) is for runs of several processes: a plugin that
 * says it in the checker's run of one fails that check and only that. */
static void test_process_sums_in_one_process_fails_the_info_check(void **state)
{
    (void)state;
    run r = check(FIXTURE("fixture_processes"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.counts.failed, 0);
    assert_int_equal(lines_starting(r.output, "PASS runtime info"), 1);
    run_clear(&r);

    setenv("TH_FIXTURE_PROCESS_SUMS", "always", 1);
    r = check(FIXTURE("fixture_processes"), NULL);
    unsetenv("TH_FIXTURE_PROCESS_SUMS");
    assert_one_failure(&r, "FAIL runtime info: process_sums is 1 in a run of one process: a "
                           "backend sums its MTTKRPs over the processes only in a run of "
                           "several (ABI 1.8)");
    run_clear(&r);
}

static void test_no_device_skips_with_77(void **state)
{
    (void)state;
    run r = check(ABI_FIXTURE("fixture_no_device"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, TH_CHECK_EXIT_NO_DEVICE);
    assert_true(r.counts.no_device);
    assert_int_equal(r.counts.failed, 0);
    assert_line(&r, "PASS info (id 'fixture_no_device', version 0.0.1, f64, max_modes 16, "
                    "max_rank 256)");
    assert_line(&r, "SKIP create: no device: fixture_no_device: no CUDA device (simulated)");
    assert_line(&r, "SKIP mttkrp: no device");
    assert_line(&r, "SKIP load/unload x20: no device");
    assert_int_equal(lines_starting(r.output, "PASS "), 7); /* the entry and info checks */
    run_clear(&r);
}

static void test_broken_entries_fail_with_the_reason(void **state)
{
    (void)state;
    run r = check(FIXTURE("fixture_null_function"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 1);
    assert_line(&r, "FAIL required functions: NULL: mttkrp");
    run_clear(&r);

    r = check(FIXTURE("fixture_wrong_major"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 1);
    assert_line(&r, "FAIL entry version: ABI 2.0, but this host speaks ABI 1.x");
    run_clear(&r);

    r = check(FIXTURE("fixture_no_symbol"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 1);
    assert_line(&r, "FAIL entry symbol: no symbol 'tensorhost_plugin_entry' exported");
    run_clear(&r);

    r = check(TH_FIXTURE_PLUGIN_DIR "/no-such-plugin.so", NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 1);
    assert_line(&r, "FAIL load: " TH_FIXTURE_PLUGIN_DIR "/no-such-plugin.so: plugin file not "
                    "found");
    run_clear(&r);
}

static void test_newer_minor_is_accepted(void **state)
{
    (void)state;
    run r = check(FIXTURE("fixture_newer_minor"), NULL);
    assert_consistent(&r);
    assert_int_equal(r.status, 0);
    assert_line(&r, "PASS entry version (ABI 1.99, host 1.10; the host ignores the newer "
                    "fields)");
    run_clear(&r);
}

/* --reference: any plugin can be the oracle; one without als_update makes
 * the als_update comparisons skip, not fail. */
static void test_other_reference(void **state)
{
    (void)state;
    run r = check(CPU_REFERENCE, FIXTURE("fixture_good"));
    assert_consistent(&r);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.output, "\nPASS reference (fixture_good "));
    assert_line(&r, "SKIP als_update modes=3 skew=uniform rank=1 mode=2 norm=2: the reference "
                    "fixture_good has no als_update");
    run_clear(&r);

    r = check(CPU_REFERENCE, TH_FIXTURE_PLUGIN_DIR "/missing-reference.so");
    assert_consistent(&r);
    assert_int_equal(r.status, 1);
    assert_line(&r, "FAIL reference: " TH_FIXTURE_PLUGIN_DIR "/missing-reference.so: plugin "
                    "file not found");
    assert_line(&r, "SKIP mttkrp: no reference to compare with");
    run_clear(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_reference_passes),
        cmocka_unit_test(test_fixture_good_passes_against_the_reference),
        cmocka_unit_test(test_frozen_v1_0_plugin_passes),
        cmocka_unit_test(test_frozen_v1_2_plugin_passes),
        cmocka_unit_test(test_frozen_v1_4_plugin_passes),
        cmocka_unit_test(test_frozen_v1_5_plugin_passes),
        cmocka_unit_test(test_sweep_plugin_passes_its_sweep_checks),
        cmocka_unit_test(test_sweep_with_wrong_lambda_fails_the_sweep_checks),
        cmocka_unit_test(test_sweep_ignoring_v1_6_fails_the_v1_6_checks),
        cmocka_unit_test(test_unsupported_v1_6_fields_skip),
        cmocka_unit_test(test_v1_5_plugin_is_never_given_the_v1_6_fields),
        cmocka_unit_test(test_wrong_init_fails_the_init_checks),
        cmocka_unit_test(test_completion_faults_fail_their_checks),
        cmocka_unit_test(test_wrong_mttkrp_fails_every_case_and_only_those),
        cmocka_unit_test(test_lenient_options_fails_the_option_check),
        cmocka_unit_test(test_process_sums_in_one_process_fails_the_info_check),
        cmocka_unit_test(test_no_device_skips_with_77),
        cmocka_unit_test(test_broken_entries_fail_with_the_reason),
        cmocka_unit_test(test_newer_minor_is_accepted),
        cmocka_unit_test(test_other_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
