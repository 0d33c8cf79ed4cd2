/* libFuzzer target for the config loader. The input is a TOML document,
 * optionally followed by a line "#--set" and one --set override per line, so
 * the fuzzer reaches the override parser as well as the file walker. Every
 * input must end in a config or in one error with a message; nothing else
 * (a crash, a leak, an error without text) is acceptable. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_entry(const char *key, const th_config_value *value, void *user_data)
{
    size_t *total = user_data;
    if (!key || !*key || !value || !value->text)
        abort();
    if (value->kind == TH_CONFIG_VALUE_STRING_LIST && !value->items)
        abort();
    if (value->kind == TH_CONFIG_VALUE_NUMBER_LIST && (!value->numbers || !value->numbers->len))
        abort();
    *total += strlen(key) + strlen(value->text);
}

/* Splits off the override lines (NUL-terminated copies for the API). */
static char **split_overrides(const char *text, size_t size, size_t *document_size)
{
    static const char marker[] = "\n#--set\n";
    const char *found = NULL;
    for (size_t i = 0; i + sizeof marker - 1 <= size; i++) {
        if (memcmp(text + i, marker, sizeof marker - 1) == 0) {
            found = text + i;
            break;
        }
    }
    *document_size = found ? (size_t)(found - text) : size;
    if (!found)
        return NULL;
    const char *start = found + sizeof marker - 1;
    g_autofree char *lines = g_strndup(start, (size_t)(text + size - start));
    return g_strsplit(lines, "\n", 16);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    size_t document_size = 0;
    g_auto(GStrv) overrides = split_overrides(text, size, &document_size);

    GError *error = NULL;
    th_config *config = th_config_load_from_string(
        "fuzz/config.toml", text, (gssize)document_size, (const char *const *)overrides, &error);
    if (config) {
        if (error || !config->tensor_path || config->rank < 1 || config->rank > 4096)
            abort();
        size_t total = 0;
        th_config_foreach(config, check_entry, &total);
        th_config_free(config);
    } else {
        if (!error || error->domain != TH_CONFIG_ERROR || !error->message || !*error->message)
            abort();
        g_error_free(error);
    }
    return 0;
}
