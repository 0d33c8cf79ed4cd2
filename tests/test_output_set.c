/* One run's outputs per folder: a run's files are swapped in as one set, so
 * an output folder holds the previous run's outputs or this run's, never a
 * mix; a stop while they are written (at any file) leaves the previous ones
 * whole and no temporary file; report.json lists exactly the model files
 * its run wrote, and the previous run's other model files make way. The
 * runs are th_run_file (what `tensorhost --config` does), in this
 * process, so that a stop can be injected at a chosen file. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "base/atomic_file.h"
#include "base/cancel.h"
#include "output/factor_io.h"
#include "base/log.h"
#include "base/output_set.h"
#include "run.h"
#include "test_support.h"

/* ---- Folders ------------------------------------------------------------ */

/* name -> contents of every file in `dir`. */
static GHashTable *folder_snapshot(const char *dir)
{
    GHashTable *files = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    assert_non_null(d);
    for (const char *name; (name = g_dir_read_name(d)) != NULL;) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        char *contents = NULL;
        if (!g_file_get_contents(path, &contents, NULL, NULL))
            fail_msg("cannot read %s", path);
        g_hash_table_insert(files, g_strdup(name), contents);
    }
    return files;
}

static void assert_same_folder(GHashTable *before, GHashTable *after, const char *when)
{
    GHashTableIter it;
    gpointer name, contents;
    g_hash_table_iter_init(&it, after);
    while (g_hash_table_iter_next(&it, &name, &contents)) {
        const char *old = g_hash_table_lookup(before, name);
        if (!old)
            fail_msg("%s: %s appeared", when, (const char *)name);
        if (strcmp(old, contents) != 0)
            fail_msg("%s: %s changed", when, (const char *)name);
    }
    if (g_hash_table_size(before) != g_hash_table_size(after))
        fail_msg("%s: %u files before, %u after", when, g_hash_table_size(before),
                 g_hash_table_size(after));
}

/* g_ptr_array_sort hands the comparison pointers to its elements. */
static gint compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The sorted names in `dir` that a run writes (TH_RUN_OUTPUT_NAMES), as one
 * space-separated string. */
static char *run_files_in(const char *dir)
{
    g_autoptr(GRegex) owned = g_regex_new(TH_RUN_OUTPUT_NAMES, 0, 0, NULL);
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    assert_non_null(d);
    for (const char *name; (name = g_dir_read_name(d)) != NULL;)
        if (g_regex_match(owned, name, 0, NULL))
            g_ptr_array_add(names, g_strdup(name));
    g_ptr_array_sort(names, compare_names);
    g_ptr_array_add(names, NULL);
    return g_strjoinv(" ", (char **)names->pdata);
}

/* The model files report.json lists, and report.json, sorted as above. */
static char *files_report_lists(const char *dir)
{
    g_autofree char *path = g_build_filename(dir, "report.json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    if (!json_parser_load_from_file(parser, path, &error))
        fail_msg("%s", error->message);
    JsonObject *cpd = json_object_get_object_member(json_node_get_object(
                                                        json_parser_get_root(parser)),
                                                    "cpd");
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(names, g_strdup("report.json"));
    static const char *const members[] = {"files", "npy_files"};
    for (size_t k = 0; k < G_N_ELEMENTS(members); ++k) {
        if (!json_object_has_member(cpd, members[k]))
            continue;
        JsonObject *files = json_object_get_object_member(cpd, members[k]);
        g_ptr_array_add(names, g_strdup(json_object_get_string_member(files, "lambda")));
        JsonArray *factors = json_object_get_array_member(files, "factors");
        for (guint i = 0; i < json_array_get_length(factors); ++i)
            g_ptr_array_add(names, g_strdup(json_array_get_string_element(factors, i)));
    }
    g_ptr_array_sort(names, compare_names);
    g_ptr_array_add(names, NULL);
    return g_strjoinv(" ", (char **)names->pdata);
}

static const char *report_status(const char *dir)
{
    static char status[64];
    g_autofree char *path = g_build_filename(dir, "report.json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    assert_true(json_parser_load_from_file(parser, path, NULL));
    g_strlcpy(status,
              json_object_get_string_member(json_node_get_object(json_parser_get_root(parser)),
                                            "status"),
              sizeof status);
    return status;
}

/* ---- Runs --------------------------------------------------------------- */

/* A run file for the shipped amino-acid tensor (3 modes), writing into
 * `out`; the --set overrides choose the rank, seed, format... */
static char *write_run_file(const char *dir, const char *out)
{
    g_autofree char *text = g_strdup_printf("[tensor]\npath = \"%s/aminoacid.sptensor.txt\"\n"
                                            "[cpd]\nrank = 2\nmax_iters = 3\nseed = 1\n"
                                            "[backend]\nplugin = \"%s/cpu-reference.so\"\n"
                                            "[output]\ndir = \"%s\"\n",
                                            TH_TEST_DATA_DIR, TH_PLUGIN_DIR, out);
    char *path = g_build_filename(dir, "run.toml", NULL);
    assert_true(g_file_set_contents(path, text, -1, NULL));
    return path;
}

static int run(const char *config, const char *const *overrides)
{
    th_cancel_reset();
    const int status = th_run_file(config, overrides);
    th_cancel_reset();
    return status;
}

/* The open hook: raises `signals` SIGINTs when the `at`-th file (0-based)
 * of the outputs is opened. */
typedef struct stop_at {
    int at;
    int signals;
    gint opened;
} stop_at;

static void stop_at_file(const char *path, void *data)
{
    (void)path;
    stop_at *stop = data;
    if (g_atomic_int_add(&stop->opened, 1) == stop->at)
        for (int k = 0; k < stop->signals; ++k)
            raise(SIGINT);
}

static int run_stopped_at(const char *config, const char *const *overrides, int at, int signals)
{
    stop_at stop = {.at = at, .signals = signals};
    th_atomic_file_set_open_hook(stop_at_file, &stop);
    const int status = run(config, overrides);
    th_atomic_file_set_open_hook(NULL, NULL);
    return status;
}

static char *scratch_folder(const char *name)
{
    char *dir = g_build_filename(th_test_scratch, name, NULL);
    th_test_remove_tree(dir);
    assert_int_equal(g_mkdir_with_parents(dir, 0777), 0);
    return dir;
}

/* ---- Tests -------------------------------------------------------------- */

/* The previous run wrote text and .npy at rank 2 beside a file of the
 * user's; a second Ctrl-C while the next run's outputs are written, at
 * each of its files in turn, leaves that folder exactly as it was. Then
 * the run without a stop replaces it whole: only its own files, listed by
 * its report.json, and the user's file. */
static void test_stop_at_each_file_keeps_the_previous_outputs(void **state)
{
    (void)state;
    g_autofree char *out = scratch_folder("each-file");
    g_autofree char *config = write_run_file(th_test_scratch, out);
    const char *const previous[] = {"output.format=\"both\"", NULL};
    assert_int_equal(run(config, previous), 0);
    g_autofree char *notes = g_build_filename(out, "notes.txt", NULL);
    assert_true(g_file_set_contents(notes, "the user's\n", -1, NULL));
    g_autoptr(GHashTable) before = folder_snapshot(out);

    /* Text only, rank 1, another seed: mode1..3.mat, lambda.mat, report.json. */
    const char *const next[] = {"cpd.rank=1", "cpd.seed=7", NULL};
    const int nfiles = 5;
    for (int at = 0; at < nfiles; ++at) {
        assert_int_equal(run_stopped_at(config, next, at, 2), 130);
        g_autoptr(GHashTable) after = folder_snapshot(out);
        g_autofree char *when = g_strdup_printf("stopped at file %d", at);
        assert_same_folder(before, after, when);
    }
    /* One file more than the run writes: no stop reaches the write. */
    assert_int_equal(run_stopped_at(config, next, nfiles, 2), 0);
    g_autofree char *have = run_files_in(out);
    assert_string_equal(have, "lambda.mat mode1.mat mode2.mat mode3.mat report.json");
    g_autofree char *listed = files_report_lists(out);
    assert_string_equal(listed, have);
    assert_true(g_file_test(notes, G_FILE_TEST_EXISTS));
}

/* A run with fewer modes, another format or no factors at all leaves no
 * file of the previous run's model beside its own. */
static void test_previous_model_files_make_way(void **state)
{
    (void)state;
    g_autofree char *out = scratch_folder("make-way");
    g_autofree char *config = write_run_file(th_test_scratch, out);
    /* A 4-mode .npy model as a previous run of another tensor left it. */
    static const char *const stale[] = {"mode1.npy", "mode2.npy", "mode3.npy", "mode4.npy",
                                        "lambda.npy", "mode4.mat"};
    for (size_t k = 0; k < G_N_ELEMENTS(stale); ++k) {
        g_autofree char *path = g_build_filename(out, stale[k], NULL);
        assert_true(g_file_set_contents(path, "previous\n", -1, NULL));
    }
    /* Names a run does not write are the user's. */
    static const char *const kept[] = {"mode1.mat.bak", "model.npy", "mode0.mat", "report.txt"};
    for (size_t k = 0; k < G_N_ELEMENTS(kept); ++k) {
        g_autofree char *path = g_build_filename(out, kept[k], NULL);
        assert_true(g_file_set_contents(path, "the user's\n", -1, NULL));
    }
    assert_int_equal(run(config, NULL), 0);
    g_autofree char *text_run = run_files_in(out);
    assert_string_equal(text_run, "lambda.mat mode1.mat mode2.mat mode3.mat report.json");
    g_autofree char *listed = files_report_lists(out);
    assert_string_equal(listed, text_run);

    const char *const no_factors[] = {"output.write_factors=false", NULL};
    assert_int_equal(run(config, no_factors), 0);
    g_autofree char *report_only = run_files_in(out);
    assert_string_equal(report_only, "report.json");
    g_autofree char *listed_none = files_report_lists(out);
    assert_string_equal(listed_none, "report.json");

    const char *const both[] = {"output.format=\"both\"", NULL};
    assert_int_equal(run(config, both), 0);
    g_autofree char *both_run = run_files_in(out);
    assert_string_equal(both_run, "lambda.mat lambda.npy mode1.mat mode1.npy mode2.mat "
                                  "mode2.npy mode3.mat mode3.npy report.json");
    g_autofree char *listed_both = files_report_lists(out);
    assert_string_equal(listed_both, both_run);
    for (size_t k = 0; k < G_N_ELEMENTS(kept); ++k) {
        g_autofree char *path = g_build_filename(out, kept[k], NULL);
        assert_true(g_file_test(path, G_FILE_TEST_EXISTS));
    }
}

/* One stop while the outputs are written asks to stop after them: the
 * run, already ended, writes them whole, and the exit status still tells
 * the caller of the stop. */
static void test_one_stop_while_writing_completes_the_outputs(void **state)
{
    (void)state;
    g_autofree char *out = scratch_folder("one-stop");
    g_autofree char *config = write_run_file(th_test_scratch, out);
    assert_int_equal(run_stopped_at(config, NULL, 1, 1), 130);
    g_autofree char *have = run_files_in(out);
    assert_string_equal(have, "lambda.mat mode1.mat mode2.mat mode3.mat report.json");
    assert_string_equal(report_status(out), "max_iters");
}

/* The set alone: files staged and never installed leave nothing behind. */
static void test_set_not_installed_leaves_nothing(void **state)
{
    (void)state;
    g_autofree char *out = scratch_folder("not-installed");
    g_autofree char *previous = g_build_filename(out, "report.json", NULL);
    assert_true(g_file_set_contents(previous, "previous\n", -1, NULL));
    g_autoptr(GHashTable) before = folder_snapshot(out);
    {
        g_autoptr(th_output_set) set =
            th_output_set_new(out, TH_RUN_OUTPUT_NAMES, TH_RUN_REPORT_NAME);
        const double values[2] = {1.0, 2.0};
        g_autofree char *path = th_output_set_path(set, "lambda.mat");
        g_autoptr(GError) error = NULL;
        th_atomic_file *file = th_write_matrix_staged(path, values, 2, 1, &error);
        assert_non_null(file);
        th_output_set_add(set, file);
    }
    g_autoptr(GHashTable) after = folder_snapshot(out);
    assert_same_folder(before, after, "a set freed before its install");
}

/* Folders are created as mkdir(1) creates them: 0777 less the umask. */
static void test_output_folder_follows_the_umask(void **state)
{
    (void)state;
    g_autofree char *parent = scratch_folder("umask");
    g_autofree char *out = g_build_filename(parent, "a", "b", NULL);
    const mode_t previous = umask(002);
    g_autoptr(GError) error = NULL;
    const gboolean made = th_make_output_dir(out, &error);
    umask(previous);
    g_assert_no_error(error);
    assert_true(made);
    GStatBuf st;
    assert_int_equal(g_stat(out, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0775);
}

int main(void)
{
    th_log_set_level(TH_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_at_each_file_keeps_the_previous_outputs),
        cmocka_unit_test(test_previous_model_files_make_way),
        cmocka_unit_test(test_one_stop_while_writing_completes_the_outputs),
        cmocka_unit_test(test_set_not_installed_leaves_nothing),
        cmocka_unit_test(test_output_folder_follows_the_umask),
    };
    return cmocka_run_group_tests(tests, th_test_make_scratch, th_test_remove_scratch);
}
