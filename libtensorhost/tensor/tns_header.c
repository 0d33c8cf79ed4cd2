#include "tensor/tns_header.h"

#include <string.h>

#include "tensor/tensor_binary.h"

/* A label read from text fits a binary file's note. */
G_STATIC_ASSERT(TH_TNS_MAX_LABEL_BYTES == TH_TENSOR_BINARY_MAX_NOTE_BYTES);

char *th_tns_label_escape(const char *label)
{
    const size_t length = strlen(label);
    GString *out = g_string_sized_new(length + 8);
    for (size_t i = 0; i < length; ++i) {
        const unsigned char c = (unsigned char)label[i];
        /* A reader trims the blanks around a value: an outer space survives
         * only as an escape. */
        const gboolean outer = i == 0 || i + 1 == length;
        if (c == '\\')
            g_string_append(out, "\\\\");
        else if (c == '\n')
            g_string_append(out, "\\n");
        else if (c == '\r')
            g_string_append(out, "\\r");
        else if (c == '\t')
            g_string_append(out, "\\t");
        else if (c < 0x20 || c == 0x7f || (c == ' ' && outer))
            g_string_append_printf(out, "\\x%02x", c);
        else
            g_string_append_c(out, (char)c);
    }
    return g_string_free(out, FALSE);
}

char *th_tns_header_text(const th_sptensor *t, char **problem)
{
    if (t->label != NULL && strlen(t->label) > TH_TNS_MAX_LABEL_BYTES) {
        *problem = g_strdup_printf("its label of %zu bytes is longer than the %u a label may take",
                                   strlen(t->label), TH_TNS_MAX_LABEL_BYTES);
        return NULL;
    }
    GString *out = g_string_new(NULL);
    g_string_append_printf(out, TH_TNS_HEADER_PREFIX "header: %u.%u\n", TH_TNS_HEADER_MAJOR,
                           TH_TNS_HEADER_MINOR);
    g_string_append(out, TH_TNS_HEADER_PREFIX "dims:");
    for (uint32_t m = 0; m < t->nmodes; ++m)
        g_string_append_printf(out, " %u", t->dims[m]);
    g_string_append_c(out, '\n');
    if (t->label != NULL && t->label[0] != '\0') {
        g_autofree char *escaped = th_tns_label_escape(t->label);
        g_string_append_printf(out, TH_TNS_HEADER_PREFIX "label: %s\n", escaped);
    }
    return g_string_free(out, FALSE);
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The byte of the escape at text[i] (a backslash), and its length; FALSE
 * with `*problem` set when it is not one of the label's escapes. */
static gboolean decode_escape(const char *text, size_t length, size_t i, char *byte,
                              size_t *escape_length, char **problem)
{
    const char next = i + 1 < length ? text[i + 1] : '\0';
    static const char simple_from[] = "\\nrt", simple_to[] = "\\\n\r\t";
    const char *simple = next != '\0' ? strchr(simple_from, next) : NULL;
    if (simple != NULL) {
        *byte = simple_to[simple - simple_from];
        *escape_length = 2;
        return TRUE;
    }
    if (next == 'x' && i + 3 < length && hex_digit(text[i + 2]) >= 0 &&
        hex_digit(text[i + 3]) >= 0) {
        const int value = hex_digit(text[i + 2]) * 16 + hex_digit(text[i + 3]);
        if (value == 0) {
            *problem = g_strdup("\\x00: a label is text and holds no NUL byte");
            return FALSE;
        }
        *byte = (char)value;
        *escape_length = 4;
        return TRUE;
    }
    if (next == '\0')
        *problem = g_strdup("it ends in a lone backslash (write \\\\ for one)");
    else
        *problem = g_strdup_printf("'\\%c' is not an escape of a label (\\\\, \\n, \\r, \\t and "
                                   "\\xHH are)",
                                   g_ascii_isprint(next) ? next : '?');
    return FALSE;
}

char *th_tns_label_unescape(const char *text, size_t length, char **problem)
{
    GString *out = g_string_sized_new(length);
    for (size_t i = 0; i < length;) {
        size_t step = 1;
        char byte = text[i];
        if (byte == '\\' && !decode_escape(text, length, i, &byte, &step, problem)) {
            g_string_free(out, TRUE);
            return NULL;
        }
        g_string_append_c(out, byte);
        i += step;
    }
    if (out->len > TH_TNS_MAX_LABEL_BYTES) {
        *problem = g_strdup_printf("%zu bytes, more than the %u a label may take", out->len,
                                   TH_TNS_MAX_LABEL_BYTES);
        g_string_free(out, TRUE);
        return NULL;
    }
    if (!g_utf8_validate_len(out->str, out->len, NULL)) {
        *problem = g_strdup("not UTF-8 text once its escapes are decoded");
        g_string_free(out, TRUE);
        return NULL;
    }
    return g_string_free(out, FALSE);
}
