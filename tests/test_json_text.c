/* JSON text any parser reads (libtensorhost/base/json_text.h): doubles in
 * exponent form come out without json-glib 1.6's ".0" after the exponent
 * (1e-10, not 1e-10.0), other numbers and every string as the generator
 * wrote them, and the text parses back to the same values. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <json-glib/json-glib.h>

#include "base/json_text.h"

static char *repaired(const char *text)
{
    char *copy = g_strdup(text);
    const gsize n = th_json_repair_numbers(copy, strlen(copy));
    assert_int_equal(n, strlen(copy));
    return copy;
}

static void test_repair_keeps_strings_and_plain_numbers(void **state)
{
    (void)state;
    g_autofree char *a = repaired("[1e-10.0, -2E+22.0, 5e-324.0, 2.5, 1.0, 0, -3, 1.5e-05]");
    assert_string_equal(a, "[1e-10, -2E+22, 5e-324, 2.5, 1.0, 0, -3, 1.5e-05]");
    /* Strings stay as they are, escaped quotes and backslashes included. */
    g_autofree char *b = repaired("{\"1e-10.0\" : \"x \\\" 1e5.0 \\\\\", \"k\" : 1e5.0}");
    assert_string_equal(b, "{\"1e-10.0\" : \"x \\\" 1e5.0 \\\\\", \"k\" : 1e5}");
    g_autofree char *c = repaired("");
    assert_string_equal(c, "");
}

/* The generator's own text for doubles in exponent form, repaired, read
 * back by json-glib's parser: the same values, every one. */
static void test_generated_text_parses(void **state)
{
    (void)state;
    static const double values[] = {1e-10, 1e22, 5e-324, 1e-5, 2.5, 1.0, 0.0, -3e100,
                                    1.7976931348623157e308, 123456789.0};
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "label");
    json_builder_add_string_value(b, "tolerance 1e-10.0 \"quoted\"");
    json_builder_set_member_name(b, "values");
    json_builder_begin_array(b);
    for (size_t i = 0; i < sizeof values / sizeof values[0]; ++i)
        json_builder_add_double_value(b, values[i]);
    json_builder_end_array(b);
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    for (int pretty = 0; pretty < 2; ++pretty) {
        gsize length = 0;
        g_autofree char *text = th_json_to_text(root, pretty, &length);
        assert_int_equal(length, strlen(text));
        assert_null(strstr(text, "e-10.0,"));
        g_autoptr(JsonParser) parser = json_parser_new();
        g_autoptr(GError) error = NULL;
        if (!json_parser_load_from_data(parser, text, (gssize)length, &error))
            fail_msg("%s: %s", error->message, text);
        JsonObject *object = json_node_get_object(json_parser_get_root(parser));
        assert_string_equal(json_object_get_string_member(object, "label"),
                            "tolerance 1e-10.0 \"quoted\"");
        JsonArray *array = json_object_get_array_member(object, "values");
        assert_int_equal(json_array_get_length(array), sizeof values / sizeof values[0]);
        for (guint i = 0; i < json_array_get_length(array); ++i) {
            JsonNode *node = json_array_get_element(array, i);
            const double back = json_node_get_value_type(node) == G_TYPE_INT64
                                    ? (double)json_node_get_int(node)
                                    : json_node_get_double(node);
            assert_true(back == values[i]);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repair_keeps_strings_and_plain_numbers),
        cmocka_unit_test(test_generated_text_parses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
