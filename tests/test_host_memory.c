/* What the program asks of the host before its large allocations
 * (common/host_memory.h): the parsers of /proc/meminfo, /proc/self/cgroup
 * and a cgroup's memory files, the answer on this host, sizes in words. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "host_memory.h"

#define GIB ((uint64_t)1 << 30)

static void test_meminfo(void **state)
{
    (void)state;
    uint64_t bytes = 0;
    assert_int_equal(th_parse_meminfo_available("MemTotal:       263921416 kB\n"
                                                 "MemFree:        10203040 kB\n"
                                                 "MemAvailable:   24134540 kB\n"
                                                 "Buffers:           12345 kB\n",
                                                 &bytes),
                     0);
    assert_true(bytes == (uint64_t)24134540 * 1024u);
    /* A kernel before 3.14 has no MemAvailable: the host does not say. */
    assert_int_equal(th_parse_meminfo_available("MemTotal: 1 kB\nMemFree: 1 kB\n", &bytes), -1);
    assert_int_equal(th_parse_meminfo_available("MemAvailable: kB\n", &bytes), -1);
}

static void test_cgroup_paths(void **state)
{
    (void)state;
    char path[64];
    static const char hybrid[] = "9:name=systemd:/\n"
                                 "4:memory:/batch/job_42\n"
                                 "1:cpu:/\n"
                                 "0::/user.slice/session-3.scope\n";
    assert_int_equal(th_parse_cgroup_path(hybrid, 2, path, sizeof path), 0);
    assert_string_equal(path, "/user.slice/session-3.scope");
    assert_int_equal(th_parse_cgroup_path(hybrid, 1, path, sizeof path), 0);
    assert_string_equal(path, "/batch/job_42");
    /* v2 only: no memory controller line; "10::" is not v2's "0::". */
    assert_int_equal(th_parse_cgroup_path("0::/\n", 1, path, sizeof path), -1);
    assert_int_equal(th_parse_cgroup_path("0::/\n", 2, path, sizeof path), 0);
    assert_string_equal(path, "/");
    assert_int_equal(th_parse_cgroup_path("10::/x\n", 2, path, sizeof path), -1);
    assert_int_equal(th_parse_cgroup_path(hybrid, 3, path, sizeof path), -1);
}

static void test_cgroup_headroom(void **state)
{
    (void)state;
    uint64_t bytes = 0;
    /* v2 without a limit. */
    assert_int_equal(th_parse_cgroup_headroom("max\n", "123\n", NULL, &bytes), 0);
    /* 64 GiB, 40 GiB used of which 30 GiB page cache: 54 GiB to take. */
    static const char stat[] = "anon 10737418240\n"
                               "file 32212254720\n"
                               "active_anon 1\n"
                               "inactive_anon 2\n"
                               "active_file 21474836480\n"
                               "inactive_file 10737418240\n";
    assert_int_equal(th_parse_cgroup_headroom("68719476736\n", "42949672960\n", stat, &bytes), 1);
    assert_true(bytes == 54 * GIB);
    /* Without memory.stat no cache counts. */
    assert_int_equal(th_parse_cgroup_headroom("68719476736\n", "42949672960\n", NULL, &bytes), 1);
    assert_true(bytes == 24 * GIB);
    /* Used past the limit (the limit lowered under a running job). */
    assert_int_equal(th_parse_cgroup_headroom("1073741824\n", "2147483648\n", NULL, &bytes), 1);
    assert_true(bytes == 0);
    /* v1: its "no limit", and its hierarchy-wide cache before the local one. */
    assert_int_equal(
        th_parse_cgroup_headroom("9223372036854771712\n", "942854144\n", NULL, &bytes), 0);
    static const char stat_v1[] = "cache 5\n"
                                  "active_file 1073741824\n"
                                  "inactive_file 1073741824\n"
                                  "total_active_file 4294967296\n"
                                  "total_inactive_file 4294967296\n";
    assert_int_equal(th_parse_cgroup_headroom("17179869184\n", "12884901888\n", stat_v1, &bytes),
                     1);
    assert_true(bytes == 12 * GIB);
    assert_int_equal(th_parse_cgroup_headroom("lots\n", "1\n", NULL, &bytes), -1);
    assert_int_equal(th_parse_cgroup_headroom("1\n", NULL, NULL, &bytes), -1);
}

/* This host says, and something is free; the tests' stand-in says what
 * it is given. */
static void test_this_host(void **state)
{
    (void)state;
    uint64_t bytes = 0;
    char source[256] = "";
    unsetenv("TH_TEST_HOST_FREE_BYTES");
    assert_int_equal(th_host_available(&bytes, source, sizeof source), 0);
    assert_true(bytes > 0);
    assert_true(strlen(source) > 0);
    setenv("TH_TEST_HOST_FREE_BYTES", "12345", 1);
    assert_int_equal(th_host_available(&bytes, source, sizeof source), 0);
    unsetenv("TH_TEST_HOST_FREE_BYTES");
    assert_true(bytes == 12345);
    assert_string_equal(source, "TH_TEST_HOST_FREE_BYTES");
}

static void test_size_text(void **state)
{
    (void)state;
    char text[32];
    assert_string_equal(th_size_text(105 * GIB, text, sizeof text), "105.0 GiB");
    assert_string_equal(th_size_text(30000000, text, sizeof text), "28.6 MiB");
    assert_string_equal(th_size_text(20480, text, sizeof text), "20.0 KiB");
    assert_string_equal(th_size_text(1000, text, sizeof text), "1000 B");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_meminfo),
        cmocka_unit_test(test_cgroup_paths),
        cmocka_unit_test(test_cgroup_headroom),
        cmocka_unit_test(test_this_host),
        cmocka_unit_test(test_size_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
