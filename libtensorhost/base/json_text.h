/* JSON text that any parser reads, from json-glib's generator. The
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

#endif
