/* libFuzzer target for the host-memory parsers (common/host_memory.h): /proc/meminfo's text, /proc/self/cgroup's, and a
 * cgroup's limit, use and memory.stat. The input is cut at its first two
 * NUL bytes into three texts, each given to the parsers as its own
 * NUL-terminated copy; every call returns one of its documented values,
 * leaves a path NUL-terminated inside its buffer, and never reads past the
 * text. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host_memory.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next NUL-terminated piece of [*data, end), as a copy of exactly its
 * length + 1 bytes, so that ASan sees any read beyond it. */
static char *next_text(const uint8_t **data, const uint8_t *end)
{
    const uint8_t *nul = memchr(*data, 0, (size_t)(end - *data));
    const size_t length = nul ? (size_t)(nul - *data) : (size_t)(end - *data);
    char *text = malloc(length + 1u);
    if (text == NULL)
        abort();
    memcpy(text, *data, length);
    text[length] = '\0';
    *data = nul ? nul + 1 : end;
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *end = data + size;
    char *first = next_text(&data, end);
    char *second = next_text(&data, end);
    char *third = next_text(&data, end);

    uint64_t bytes = 0;
    const int meminfo = th_parse_meminfo_available(first, &bytes);
    if (meminfo != 0 && meminfo != -1)
        abort();
    if (meminfo == 0 && bytes % 1024u != 0)
        abort();
    for (int version = 1; version <= 2; ++version) {
        char path[16];
        memset(path, 'x', sizeof path);
        const int found = th_parse_cgroup_path(first, version, path, sizeof path);
        if (found != 0 && found != -1)
            abort();
        if (found == 0 && memchr(path, 0, sizeof path) == NULL)
            abort();
    }
    uint64_t headroom = 0;
    const int limited = th_parse_cgroup_headroom(first, second, third, &headroom);
    if (limited != 1 && limited != 0 && limited != -1)
        abort();
    if (limited == 1 && headroom > strtoull(first, NULL, 10))
        abort(); /* the headroom never passes the limit */
    free(first);
    free(second);
    free(third);
    return 0;
}
