/* Host memory a multi-device load can still take, asked before it
 * allocates its share buffers (the largest rank's share of every mode,
 * about 20 bytes a nonzero of a 3-mode tensor: 105 GB for 3.5 billion
 * nonzeros on two ranks). Memory is overcommitted on Linux, so an
 * allocation past what the host has succeeds and the process is killed
 * later, mid-load, when the pages are touched; asking first turns that
 * into an error that says what is short.
 *
 * What the host has is the lesser of the kernel's estimate for the whole
 * machine (MemAvailable in /proc/meminfo) and, for a process in cgroups
 * with memory limits (a container, a batch job; v2, or v1's memory
 * controller), each limit at or above its cgroup less that cgroup's use,
 * its reclaimable page cache counted as free (a tensor file just read
 * stays in the cache, charged to the cgroup, and would be dropped for the
 * load). Plain C; the parsers take text so that they are tested without
 * the files. */
#ifndef TH_HOST_MEMORY_H
#define TH_HOST_MEMORY_H

#include <stddef.h>
#include <stdint.h>

/* MemAvailable of /proc/meminfo's text in bytes into *bytes; 0, or -1
 * when the text has no such line. */
int thg_parse_meminfo_available(const char *meminfo, uint64_t *bytes);

/* One cgroup's headroom from the text of its limit (v2's memory.max:
 * "max" or bytes; v1's memory.limit_in_bytes: bytes, 2^62 and more for
 * none), its use (memory.current, memory.usage_in_bytes) and, or NULL,
 * its memory.stat (the page cache of v1's total_active_file and
 * total_inactive_file, or else of active_file and inactive_file, counts
 * as free): limit - use + that cache, 0 when the use is past the limit.
 * 1 and *bytes when the cgroup has a limit, 0 when it has none, -1 when
 * the text cannot be read. */
int thg_parse_cgroup_headroom(const char *limit, const char *usage, const char *stat,
                              uint64_t *bytes);

/* The path of this process's cgroup in cgroup `version` 2 (the line
 * "0::PATH") or 1 (the memory controller's line, "N:memory:PATH") of
 * /proc/self/cgroup's text, into `path` (`size` bytes); 0, or -1 without
 * such a line. */
int thg_parse_cgroup_path(const char *membership, int version, char *path, size_t size);

/* The bytes this process can still take (above), into *bytes and where
 * they come from into `source` ("MemAvailable", or the cgroup's path);
 * 0, or -1 when the host does not say (no /proc). */
int thg_host_available(uint64_t *bytes, char *source, size_t source_size);

/* Whether `need` bytes of share buffers fit in `available`: 0 when they
 * do, or -1 with the refusal in words into `message` (`size` bytes): what
 * the largest rank's shares need, what the host has and where that comes
 * from, and what lowers it (the buffers are 1/G of every mode, so more
 * devices lower them in proportion); sizes in GiB, or MiB below one. */
int thg_host_check_shares(uint64_t need, uint64_t available, const char *source,
                          uint32_t devices, char *message, size_t size);

#endif
