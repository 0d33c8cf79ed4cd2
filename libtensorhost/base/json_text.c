#include "base/json_text.h"

#include <math.h>

#include <string.h>

static gboolean is_number_char(char c)
{
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

gsize th_json_repair_numbers(char *text, gsize length)
{
    gsize in = 0, out = 0;
    gboolean in_string = FALSE;
    while (in < length) {
        const char c = text[in];
        if (in_string) {
            text[out++] = text[in++];
            if (c == '\\' && in < length)
                text[out++] = text[in++]; /* the escaped character, a quote too */
            else if (c == '"')
                in_string = FALSE;
            continue;
        }
        if (c == '"') {
            in_string = TRUE;
            text[out++] = text[in++];
            continue;
        }
        if (c != '-' && !(c >= '0' && c <= '9')) {
            text[out++] = text[in++];
            continue;
        }
        /* A number token: copied up to a '.' that follows its exponent,
         * which ends what is kept of it. */
        gboolean exponent = FALSE, dropping = FALSE;
        for (; in < length && is_number_char(text[in]); ++in) {
            exponent = exponent || text[in] == 'e' || text[in] == 'E';
            dropping = dropping || (exponent && text[in] == '.');
            if (!dropping)
                text[out++] = text[in];
        }
    }
    if (out < length)
        text[out] = '\0';
    return out;
}

char *th_json_to_text(JsonNode *root, gboolean pretty, gsize *length)
{
    g_autoptr(JsonGenerator) generator = json_generator_new();
    json_generator_set_root(generator, root);
    json_generator_set_pretty(generator, pretty);
    gsize n = 0;
    char *text = json_generator_to_data(generator, &n);
    n = th_json_repair_numbers(text, n);
    if (length)
        *length = n;
    return text;
}

void th_json_member_string(JsonBuilder *b, const char *name, const char *value)
{
    json_builder_set_member_name(b, name);
    if (value)
        json_builder_add_string_value(b, value);
    else
        json_builder_add_null_value(b);
}

void th_json_member_int(JsonBuilder *b, const char *name, gint64 value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, value);
}

void th_json_member_bool(JsonBuilder *b, const char *name, gboolean value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_boolean_value(b, value);
}

void th_json_add_number(JsonBuilder *b, double value)
{
    if (isfinite(value))
        json_builder_add_double_value(b, value);
    else
        json_builder_add_null_value(b);
}

void th_json_add_measured(JsonBuilder *b, double value)
{
    th_json_add_number(b, value < 0.0 ? NAN : value);
}

void th_json_member_number(JsonBuilder *b, const char *name, double value)
{
    json_builder_set_member_name(b, name);
    th_json_add_number(b, value);
}

void th_json_member_measured(JsonBuilder *b, const char *name, double value)
{
    json_builder_set_member_name(b, name);
    th_json_add_measured(b, value);
}
