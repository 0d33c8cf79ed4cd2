#include "host_memory.h"

#include <inttypes.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A cgroup v1 "limit" this large is none (the kernel's is 2^63 - 4096,
 * rounded to pages). */
#define CGROUP_V1_NO_LIMIT ((uint64_t)1 << 62)

/* The unsigned number after `key` at the start of a line of `text`. */
static int find_number(const char *text, const char *key, uint64_t *value)
{
    const size_t key_length = strlen(key);
    for (const char *line = text; line != NULL && *line != '\0';) {
        if (strncmp(line, key, key_length) == 0) {
            char *end;
            const unsigned long long v = strtoull(line + key_length, &end, 10);
            if (end == line + key_length)
                return -1;
            *value = v;
            return 0;
        }
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    return -1;
}

int th_parse_meminfo_available(const char *meminfo, uint64_t *bytes)
{
    uint64_t kib;
    if (meminfo == NULL || bytes == NULL || find_number(meminfo, "MemAvailable:", &kib) != 0 ||
        kib > UINT64_MAX / 1024u)
        return -1;
    *bytes = kib * 1024u;
    return 0;
}

int th_parse_cgroup_headroom(const char *limit_text, const char *usage_text, const char *stat,
                             uint64_t *bytes)
{
    if (limit_text == NULL || bytes == NULL)
        return -1;
    if (strncmp(limit_text, "max", 3) == 0)
        return 0;
    uint64_t limit, used, active = 0, inactive = 0;
    if (find_number(limit_text, "", &limit) != 0 || usage_text == NULL ||
        find_number(usage_text, "", &used) != 0)
        return -1;
    if (limit >= CGROUP_V1_NO_LIMIT)
        return 0;
    /* The cache: v1's hierarchy-wide counters where they are, as its
     * usage is; a cgroup without the lines counts none. */
    if (stat != NULL && (find_number(stat, "total_active_file ", &active) != 0 ||
                         find_number(stat, "total_inactive_file ", &inactive) != 0)) {
        active = inactive = 0;
        find_number(stat, "active_file ", &active);
        find_number(stat, "inactive_file ", &inactive);
    }
    const uint64_t cache = active < used && inactive < used - active ? active + inactive : used;
    *bytes = limit > used - cache ? limit - (used - cache) : 0;
    return 1;
}

/* The file's first `size` - 1 bytes, NUL-terminated; 0, or -1 when it
 * cannot be read. */
static int read_text(const char *path, char *text, size_t size)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    const size_t n = fread(text, 1, size - 1u, f);
    fclose(f);
    text[n] = '\0';
    return 0;
}

/* Where a cgroup hierarchy keeps its memory limits. */
typedef struct cgroup_files {
    int version;
    const char *root; /* the hierarchy's mount */
    const char *limit, *usage;
} cgroup_files;

static const cgroup_files cgroup_v2 = {2, "/sys/fs/cgroup", "memory.max", "memory.current"};
static const cgroup_files cgroup_v1 = {1, "/sys/fs/cgroup/memory", "memory.limit_in_bytes",
                                       "memory.usage_in_bytes"};

int th_parse_cgroup_path(const char *membership, int version, char *path, size_t size)
{
    if (membership == NULL || path == NULL || size == 0 || (version != 1 && version != 2))
        return -1;
    /* What precedes the path on the hierarchy's line. */
    const char *line_key = version == 2 ? "0::" : ":memory:";
    for (const char *line = membership; line != NULL && *line != '\0';) {
        const size_t length = strcspn(line, "\n");
        const char *key = strstr(line, line_key);
        if (key != NULL && key < line + length && (version == 1 || key == line)) {
            const char *p = key + strlen(line_key);
            snprintf(path, size, "%.*s", (int)(line + length - p), p);
            return 0;
        }
        line = line[length] == '\n' ? line + length + 1 : NULL;
    }
    return -1;
}

/* The least headroom of this process's cgroup and every cgroup above it
 * in one hierarchy that has a memory limit; 1 and *bytes with the limiting
 * one's directory in `source`, 0 when none has a limit or the hierarchy is
 * not there. */
static int cgroup_headroom(const char *membership, const cgroup_files *files, uint64_t *bytes,
                           char *source, size_t source_size)
{
    char path[4096], dir[4096 + 64], file[sizeof dir + 32];
    if (th_parse_cgroup_path(membership, files->version, path, sizeof path) != 0)
        return 0;
    /* "/" is the namespace's root: the cgroup mounted at the root. */
    snprintf(dir, sizeof dir, "%s%s", files->root, strcmp(path, "/") == 0 ? "" : path);
    const size_t root_length = strlen(files->root);
    int found = 0;
    for (;;) {
        char limit[64], usage[64], stat[8192];
        snprintf(file, sizeof file, "%s/%s", dir, files->limit);
        const int has_limit = read_text(file, limit, sizeof limit) == 0;
        snprintf(file, sizeof file, "%s/%s", dir, files->usage);
        const int has_usage = read_text(file, usage, sizeof usage) == 0;
        snprintf(file, sizeof file, "%s/memory.stat", dir);
        const int has_stat = read_text(file, stat, sizeof stat) == 0;
        uint64_t headroom;
        if (has_limit && has_usage &&
            th_parse_cgroup_headroom(limit, usage, has_stat ? stat : NULL, &headroom) == 1 &&
            (!found || headroom < *bytes)) {
            *bytes = headroom;
            snprintf(source, source_size, "the memory limit of cgroup %.300s", dir);
            found = 1;
        }
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= root_length || slash == NULL || (size_t)(slash - dir) < root_length)
            break;
        *slash = '\0';
    }
    return found;
}

int th_host_available(uint64_t *bytes, char *source, size_t source_size)
{
    char meminfo[8192];
    uint64_t available;
    if (bytes == NULL || source == NULL || source_size == 0)
        return -1;
    const char *cap = getenv("TH_TEST_HOST_FREE_BYTES");
    if (cap != NULL && *cap != '\0') {
        *bytes = strtoull(cap, NULL, 10);
        snprintf(source, source_size, "TH_TEST_HOST_FREE_BYTES");
        return 0;
    }
    if (read_text("/proc/meminfo", meminfo, sizeof meminfo) != 0 ||
        th_parse_meminfo_available(meminfo, &available) != 0)
        return -1;
    snprintf(source, source_size, "MemAvailable");
    char membership[4096];
    if (read_text("/proc/self/cgroup", membership, sizeof membership) == 0) {
        static const cgroup_files *const hierarchies[] = {&cgroup_v2, &cgroup_v1};
        for (size_t h = 0; h < sizeof hierarchies / sizeof *hierarchies; ++h) {
            char cgroup_source[512];
            uint64_t headroom = 0;
            if (cgroup_headroom(membership, hierarchies[h], &headroom, cgroup_source,
                                sizeof cgroup_source) == 1 &&
                headroom < available) {
                available = headroom;
                snprintf(source, source_size, "%s", cgroup_source);
            }
        }
    }
    *bytes = available;
    return 0;
}

const char *th_size_text(uint64_t bytes, char *text, size_t size)
{
    if (bytes >= ((uint64_t)1 << 30))
        snprintf(text, size, "%.1f GiB", bytes / 1073741824.0);
    else if (bytes >= ((uint64_t)1 << 20))
        snprintf(text, size, "%.1f MiB", bytes / 1048576.0);
    else if (bytes >= 1024u)
        snprintf(text, size, "%.1f KiB", bytes / 1024.0);
    else
        snprintf(text, size, "%" PRIu64 " B", bytes);
    return text;
}
