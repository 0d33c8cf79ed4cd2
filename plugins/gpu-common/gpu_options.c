#include "gpu_options.h"

#include <tensorhost/plugin_sdk.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Strict decimal: digits only, no sign or spaces, within [lo, hi]. */
static int parse_uint(const char *text, unsigned long lo, unsigned long hi, unsigned long *out)
{
    if (!text || text[0] < '0' || text[0] > '9')
        return 0;
    errno = 0;
    char *end = NULL;
    const unsigned long v = strtoul(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

/* "rule" is gpu-adaptive's only: the forced plugins have no choice to make. */
static th_status parse_rule(const char *value, const char *id, thg_config *config, char *err)
{
    if (config->policy != THG_POLICY_ADAPTIVE)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "option rule: %s forces its scheme on every mode; rule applies to "
                              "gpu-adaptive only",
                              id);
    if (value && strcmp(value, "balanced") == 0)
        config->rule = THG_RULE_BALANCED;
    else if (value && strcmp(value, "paper") == 0)
        config->rule = THG_RULE_PAPER;
    else
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "option rule: \"%s\" is not valid: expected \"balanced\" or "
                              "\"paper\"",
                              value ? value : "(null)");
    return TH_OK;
}

static th_status parse_devices(const char *value, gpu_device_list *out, char *err)
{
    out->count = 0;
    out->all = value && strcmp(value, "all") == 0;
    if (out->all)
        return TH_OK;
    const char *p = value;
    int trailing_comma = 0;
    while (p && *p) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[16];
        unsigned long v = 0;
        if (len == 0 || len >= sizeof item || out->count == THG_MAX_GROUP_RANKS)
            break;
        memcpy(item, p, len);
        item[len] = '\0';
        if (!parse_uint(item, 0, 1023, &v))
            break;
        out->ordinal[out->count++] = (int)v;
        p = comma ? comma + 1 : p + len;
        trailing_comma = comma && *p == '\0';
    }
    if (p == NULL || *p != '\0' || out->count == 0 || trailing_comma)
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "option devices: \"%s\" is not valid: expected \"all\" or 1 to "
                              "%u device ordinals separated by commas, e.g. \"0,1\"",
                              value ? value : "(null)", THG_MAX_GROUP_RANKS);
    return TH_OK;
}

th_status gpu_parse_options(const th_option *options, uint32_t n_options, const char *plugin_id,
                            thg_config *config, gpu_device_list *devices, char *err)
{
    int device_given = 0;
    /* Bounds checked here, before the instance exists, so a bad value is an
     * error of create() rather than a failed launch or allocation later.
     * kappa is the grid size of every MTTKRP and sizes per-mode partition
     * tables of kappa + 1 words on the device: 2^20 is thousands of times
     * the SM count of any GPU (the useful range is about 1 to 8 x SMs) and
     * keeps those tables at 4 MiB. P is capped by what one 1024-thread block
     * holds (THG_MAX_P). device is an ordinal; thg_create checks it against
     * the devices actually visible. */
    static const struct {
        const char *key;
        unsigned long lo, hi;
    } known[] = {{"kappa", 1, 1048576}, {"P", 1, THG_MAX_P}, {"device", 0, 1023}};
    for (uint32_t i = 0; i < n_options; ++i) {
        const char *key = options[i].key ? options[i].key : "(null)";
        if (strcmp(key, "rule") == 0) {
            const th_status st = parse_rule(options[i].value, plugin_id, config, err);
            if (st != TH_OK)
                return st;
            continue;
        }
        if (strcmp(key, "devices") == 0) {
            const th_status st = parse_devices(options[i].value, devices, err);
            if (st != TH_OK)
                return st;
            continue;
        }
        size_t k = 0;
        while (k < sizeof(known) / sizeof(known[0]) && strcmp(known[k].key, key) != 0)
            ++k;
        if (k == sizeof(known) / sizeof(known[0]))
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                  "unknown option \"%s\": %s accepts kappa, P, device, devices%s",
                                  key, plugin_id,
                                  config->policy == THG_POLICY_ADAPTIVE ? " and rule" : "");
        unsigned long v = 0;
        if (!parse_uint(options[i].value, known[k].lo, known[k].hi, &v))
            return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                                  "option %s: \"%s\" is not valid: expected an integer from %lu "
                                  "to %lu",
                                  key, options[i].value ? options[i].value : "(null)",
                                  known[k].lo, known[k].hi);
        if (k == 0)
            config->kappa = (uint32_t)v;
        else if (k == 1)
            config->P = (uint32_t)v;
        else {
            config->device = (int)v;
            device_given = 1;
        }
    }
    if (device_given && (devices->count > 0 || devices->all))
        return th_plugin_fail(err, TH_ERR_INVALID_ARGUMENT,
                              "options device and devices: give one (device=N is devices=\"N\")");
    if (devices->count == 1) {
        config->device = devices->ordinal[0];
        devices->count = 0;
    }
    return TH_OK;
}
