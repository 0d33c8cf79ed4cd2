/* Text helpers for messages: one line per message whatever the input holds,
 * counted nouns, and "did you mean" suggestions. */
#ifndef TH_MESSAGE_TEXT_H
#define TH_MESSAGE_TEXT_H

#include <glib.h>
#include <stdint.h>

/* `text` with control characters, quotes and backslashes escaped C-style
 * (\n, \t, \", \\, \033 ...), so it stays on one line; UTF-8 and other
 * non-ASCII bytes are kept as they are, so names in any script stay
 * readable. */
char *th_escape_for_message(const char *text);

/* `text` with only control characters escaped (quotes and backslashes
 * kept): for whole messages, which quote names themselves. */
char *th_escape_control(const char *text);

/* `singular` when `count` is 1, else `plural`: for "%u %s" in messages
 * ("1 value", "2 values", "0 values"). */
const char *th_plural(uint64_t count, const char *singular, const char *plural);

/* Levenshtein distance between two byte strings. */
size_t th_edit_distance(const char *a, const char *b);

/* The candidate nearest to `word` when it is close enough to be a likely
 * typo (at most max(2, strlen(word) / 3) edits), else NULL. Borrowed. */
const char *th_nearest_name(const char *word, const char *const *candidates, size_t n);

#endif
