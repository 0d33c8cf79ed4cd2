#include "base/message_text.h"

#include <stdint.h>
#include <string.h>

char *th_escape_for_message(const char *text)
{
    char non_ascii[129];
    for (int byte = 0x80; byte <= 0xFF; byte++)
        non_ascii[byte - 0x80] = (char)byte;
    non_ascii[128] = '\0';
    return g_strescape(text, non_ascii);
}

char *th_escape_control(const char *text)
{
    GString *out = g_string_sized_new(strlen(text));
    for (const unsigned char *p = (const unsigned char *)text; *p; ++p) {
        switch (*p) {
        case '\n':
            g_string_append(out, "\\n");
            break;
        case '\r':
            g_string_append(out, "\\r");
            break;
        case '\t':
            g_string_append(out, "\\t");
            break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                g_string_append_printf(out, "\\%03o", *p);
            else
                g_string_append_c(out, (char)*p);
        }
    }
    return g_string_free(out, FALSE);
}

const char *th_plural(uint64_t count, const char *singular, const char *plural)
{
    return count == 1 ? singular : plural;
}

size_t th_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    g_autofree size_t *row = g_new(size_t, lb + 1);
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t above = row[j];
            size_t substitution = diagonal + (a[i - 1] != b[j - 1]);
            row[j] = MIN(MIN(above + 1, row[j - 1] + 1), substitution);
            diagonal = above;
        }
    }
    return row[lb];
}

const char *th_nearest_name(const char *word, const char *const *candidates, size_t n)
{
    const size_t threshold = MAX(2, strlen(word) / 3);
    const char *best = NULL;
    size_t best_distance = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        size_t distance = th_edit_distance(word, candidates[i]);
        if (distance < best_distance) {
            best = candidates[i];
            best_distance = distance;
        }
    }
    return best && best_distance <= threshold ? best : NULL;
}
