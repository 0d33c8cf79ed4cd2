/* JSON that any parser reads: the members every writer of the project's
 * JSON files adds (report.json, results.json), with one rule for values
 * JSON cannot hold, and the text from json-glib's generator. The
 * generator of json-glib 1.6 (Debian 12's) prints a double with %.17g and
 * appends ".0" whenever the result has no '.', so an exponent form such as
 * 1e-10 comes out as "1e-10.0", which no JSON parser accepts (a tolerance
 * of 1e-10 in results.json did). This writes the generator's text with the
 * ".0" after an exponent removed, outside strings only. */
#ifndef TH_JSON_TEXT_H
#define TH_JSON_TEXT_H

#include <glib.h>
#include <json-glib/json-glib.h>

/* `root` as text (indented when `pretty`), NUL-terminated, its length in
 * *length when not NULL; g_free it. */
char *th_json_to_text(JsonNode *root, gboolean pretty, gsize *length);

/* The repair alone, in place: a number token outside strings whose '.'
 * follows its exponent loses that '.' and what follows it (".0"). Returns
 * the new length. */
gsize th_json_repair_numbers(char *text, gsize length);

/* Members of the object being built. A NULL string is null. A number
 * that is not finite is null (JSON has no NaN or Inf); a "measured" one is
 * null when negative too, the project's mark of "not measured". */
void th_json_member_string(JsonBuilder *b, const char *name, const char *value);
void th_json_member_int(JsonBuilder *b, const char *name, gint64 value);
void th_json_member_bool(JsonBuilder *b, const char *name, gboolean value);
void th_json_member_number(JsonBuilder *b, const char *name, double value);
void th_json_member_measured(JsonBuilder *b, const char *name, double value);
/* A value of the array being built, by the same rules. */
void th_json_add_number(JsonBuilder *b, double value);
void th_json_add_measured(JsonBuilder *b, double value);

#endif
