/* Host memory this process can still take, asked before the large
 * allocations whose size is known (or estimated) ahead: reading a tensor
 * file or generating one (libtensorhost), a multi-device load's share
 * buffers (the GPU plugins). Memory is overcommitted on Linux, so an allocation past
 * what the host has succeeds and the process is killed later, midway,
 * when the pages are touched; asking first turns that into an error that
 * says what is short. Plain C with no GLib or CUDA, shared by the library
 * and the in-tree plugins (common/).
 *
 * What the host has is the lesser of the kernel's estimate for the whole
 * machine (MemAvailable in /proc/meminfo) and, for a process in cgroups
 * with memory limits (a container, a batch job; v2, or v1's memory
 * controller), each limit at or above its cgroup less that cgroup's use,
 * its reclaimable page cache counted as free (a tensor file just read
 * stays in the cache, charged to the cgroup, and would be dropped for the
 * load). Plain C; the parsers take text so that they are tested without
 * the files. */
#ifndef TH_COMMON_HOST_MEMORY_H
#define TH_COMMON_HOST_MEMORY_H

#include <stddef.h>
#include <stdint.h>

/* MemAvailable of /proc/meminfo's text in bytes into *bytes; 0, or -1
 * when the text has no such line. */
int th_parse_meminfo_available(const char *meminfo, uint64_t *bytes);

/* One cgroup's headroom from the text of its limit (v2's memory.max:
 * "max" or bytes; v1's memory.limit_in_bytes: bytes, 2^62 and more for
 * none), its use (memory.current, memory.usage_in_bytes) and, or NULL,
 * its memory.stat (the page cache of v1's total_active_file and
 * total_inactive_file, or else of active_file and inactive_file, counts
 * as free): limit - use + that cache, 0 when the use is past the limit.
 * 1 and *bytes when the cgroup has a limit, 0 when it has none, -1 when
 * the text cannot be read. */
int th_parse_cgroup_headroom(const char *limit, const char *usage, const char *stat,
                             uint64_t *bytes);

/* The path of this process's cgroup in cgroup `version` 2 (the line
 * "0::PATH") or 1 (the memory controller's line, "N:memory:PATH") of
 * /proc/self/cgroup's text, into `path` (`size` bytes); 0, or -1 without
 * such a line. */
int th_parse_cgroup_path(const char *membership, int version, char *path, size_t size);

/* The bytes this process can still take (above), into *bytes and where
 * they come from into `source` ("MemAvailable", or the cgroup's path);
 * 0, or -1 when the host does not say (no /proc). TH_TEST_HOST_FREE_BYTES=N
 * in the environment says N instead (source "TH_TEST_HOST_FREE_BYTES"),
 * for the tests. */
int th_host_available(uint64_t *bytes, char *source, size_t source_size);

/* "X.X GiB", or below one GiB "X.X MiB", "X.X KiB" or "N B", into `text`;
 * returns it. */
const char *th_size_text(uint64_t bytes, char *text, size_t size);

#endif
