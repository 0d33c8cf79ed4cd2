/* The order of an atomic write's steps, which is what makes it survive a
 * crash: a file's bytes reach the disk (fsync of the file) before the
 * rename puts it in place, and the folder is flushed after the rename; an
 * output set flushes every file before the first rename. This program
 * defines fsync and rename itself, so that every call in it (the
 * library's, and GLib's g_rename) comes here first and is recorded, then
 * passed on to the C library's. */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "base/atomic_file.h"
#include "output/factor_io.h"
#include "base/output_set.h"
#include "test_support.h"

/* "fsync NAME" and "rename NAME -> NAME" (base names), in call order. */
static GPtrArray *events;

static char *name_of_fd(int fd)
{
    g_autofree char *link = g_strdup_printf("/proc/self/fd/%d", fd);
    g_autofree char *target = g_file_read_link(link, NULL);
    return g_path_get_basename(target ? target : "?");
}

int fsync(int fd)
{
    if (events) {
        g_autofree char *name = name_of_fd(fd);
        g_ptr_array_add(events, g_strdup_printf("fsync %s", name));
    }
    void *symbol = dlsym(RTLD_NEXT, "fsync");
    int (*real)(int);
    memcpy(&real, &symbol, sizeof real); /* ISO C has no object-to-function cast */
    return real(fd);
}

int rename(const char *from, const char *to)
{
    if (events) {
        g_autofree char *a = g_path_get_basename(from);
        g_autofree char *b = g_path_get_basename(to);
        g_ptr_array_add(events, g_strdup_printf("rename %s -> %s", a, b));
    }
    void *symbol = dlsym(RTLD_NEXT, "rename");
    int (*real)(const char *, const char *);
    memcpy(&real, &symbol, sizeof real);
    return real(from, to);
}

static void record(void) { events = g_ptr_array_new_with_free_func(g_free); }

static char *recorded(void)
{
    g_ptr_array_add(events, NULL);
    char *text = g_strjoinv("\n", (char **)events->pdata);
    g_ptr_array_free(events, TRUE);
    events = NULL;
    return text;
}

/* Temporary names end in a random suffix: "x.tmp-AbC123" reads "x.tmp". */
static char *without_suffixes(const char *text)
{
    g_autoptr(GRegex) suffix = g_regex_new("\\.tmp-[A-Za-z0-9]{6}", 0, 0, NULL);
    return g_regex_replace_literal(suffix, text, -1, 0, ".tmp", 0, NULL);
}

static void test_one_file_is_flushed_before_its_rename(void **state)
{
    (void)state;
    g_autofree char *dir = g_build_filename(th_test_scratch, "one", NULL);
    assert_int_equal(g_mkdir_with_parents(dir, 0777), 0);
    g_autofree char *path = g_build_filename(dir, "out.txt", NULL);
    g_autoptr(GError) error = NULL;
    record();
    assert_true(th_atomic_write_string(path, "text\n", 5, &error));
    g_autofree char *raw = recorded();
    g_autofree char *seen = without_suffixes(raw);
    assert_string_equal(seen, "fsync out.txt.tmp\n"
                              "rename out.txt.tmp -> out.txt\n"
                              "fsync one");
}

/* Every file of a set is on disk before the first rename; the index is
 * renamed last, and the folder flushed once after. */
static void test_a_set_is_flushed_before_it_is_swapped_in(void **state)
{
    (void)state;
    g_autofree char *dir = g_build_filename(th_test_scratch, "set", NULL);
    assert_int_equal(g_mkdir_with_parents(dir, 0777), 0);
    g_autoptr(th_output_set) set = th_output_set_new(dir, TH_RUN_OUTPUT_NAMES, TH_RUN_REPORT_NAME);
    const double values[3] = {1.0, 2.0, 3.0};
    static const char *const names[] = {"report.json", "mode1.mat", "lambda.mat"};
    record();
    for (size_t k = 0; k < G_N_ELEMENTS(names); ++k) {
        g_autofree char *path = th_output_set_path(set, names[k]);
        g_autoptr(GError) error = NULL;
        th_atomic_file *file = th_write_matrix_staged(path, values, 3, 1, &error);
        g_assert_no_error(error);
        th_output_set_add(set, file);
    }
    g_autoptr(GError) error = NULL;
    assert_true(th_output_set_install(set, NULL, &error));
    g_autofree char *raw = recorded();
    g_autofree char *seen = without_suffixes(raw);
    assert_string_equal(seen, "fsync report.json.tmp\n"
                              "fsync mode1.mat.tmp\n"
                              "fsync lambda.mat.tmp\n"
                              "rename mode1.mat.tmp -> mode1.mat\n"
                              "rename lambda.mat.tmp -> lambda.mat\n"
                              "rename report.json.tmp -> report.json\n"
                              "fsync set");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_file_is_flushed_before_its_rename),
        cmocka_unit_test(test_a_set_is_flushed_before_it_is_swapped_in),
    };
    return cmocka_run_group_tests(tests, th_test_make_scratch, th_test_remove_scratch);
}
