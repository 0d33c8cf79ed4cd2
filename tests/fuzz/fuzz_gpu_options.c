/* libFuzzer target for the GPU plugins' options (plugins/gpu-common/
 * gpu_options.h). The input's first byte picks the plugin's policy; the
 * rest is lines of KEY=VALUE (a line without '=' is a key with a NULL
 * value), at most 8. Every input ends in options within their bounds or
 * in one refusal with a message naming an option; nothing crashes or
 * reads past the input. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_OPTIONS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    static const thg_policy policies[] = {THG_POLICY_ADAPTIVE, THG_POLICY_SCHEME1,
                                          THG_POLICY_SCHEME2};
    const thg_policy policy = policies[data[0] % 3u];
    /* NUL-terminated copies of the lines; '=' splits key from value. */
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    th_option options[MAX_OPTIONS];
    uint32_t n = 0;
    for (char *line = text; line && n < MAX_OPTIONS;) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *eq = strchr(line, '=');
        if (eq)
            *eq = '\0';
        options[n++] = (th_option){.key = line, .value = eq ? eq + 1 : NULL};
        line = next;
    }
    thg_config config = {.device = 0, .kappa = 0, .P = 0, .policy = policy,
                         .rule = THG_RULE_BALANCED};
    gpu_device_list devices;
    memset(&devices, 0, sizeof devices);
    char err[TH_ERROR_SIZE] = "";
    const th_status st = gpu_parse_options(options, n, "gpu-fuzz", &config, &devices, err);
    if (st == TH_OK) {
        if (err[0] != '\0' || config.kappa > 1048576u || config.P > THG_MAX_P ||
            config.device < 0 || config.device > 1023 || devices.count == 1 ||
            devices.count > THG_MAX_GROUP_RANKS || (devices.all && devices.count != 0))
            abort();
        for (uint32_t d = 0; d < devices.count; ++d)
            if (devices.ordinal[d] < 0 || devices.ordinal[d] > 1023)
                abort();
        if (policy != THG_POLICY_ADAPTIVE && config.rule != THG_RULE_BALANCED)
            abort();
    } else if (st != TH_ERR_INVALID_ARGUMENT ||
               (strncmp(err, "option", 6) != 0 && strncmp(err, "unknown option", 14) != 0) ||
               memchr(err, '\0', sizeof err) == NULL) {
        abort();
    }
    free(text);
    return 0;
}
