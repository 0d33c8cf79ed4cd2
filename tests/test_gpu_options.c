/* The GPU plugins' options (plugins/gpu-common/gpu_options.h), read on
 * any host: each key's bounds and its error, rule for gpu-adaptive alone,
 * the devices lists (ordinals, "all", one ordinal as device) and every
 * malformed list, device and devices together, and NULL keys and values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "gpu_options.h"

typedef struct parsed {
    th_status status;
    thg_config config;
    gpu_device_list devices;
    char err[TH_ERROR_SIZE];
} parsed;

/* Options from "key", "value" pairs (n pairs) for a plugin of `policy`. */
static parsed parse(thg_policy policy, const char *const *pairs, uint32_t n)
{
    th_option options[8];
    assert_true(n <= 8);
    for (uint32_t i = 0; i < n; ++i)
        options[i] = (th_option){.key = pairs[2 * i], .value = pairs[2 * i + 1]};
    parsed p;
    memset(&p, 0, sizeof p);
    p.config = (thg_config){.device = 0, .kappa = 0, .P = 0, .policy = policy,
                            .rule = THG_RULE_BALANCED};
    const char *id = policy == THG_POLICY_ADAPTIVE  ? "gpu-adaptive"
                     : policy == THG_POLICY_SCHEME1 ? "gpu-scheme1"
                                                    : "gpu-scheme2";
    p.status = gpu_parse_options(options, n, id, &p.config, &p.devices, p.err);
    return p;
}

static void assert_refused(const parsed *p, const char *message)
{
    assert_int_equal(p->status, TH_ERR_INVALID_ARGUMENT);
    assert_string_equal(p->err, message);
}

static void test_defaults_and_bounds(void **state)
{
    (void)state;
    parsed p = parse(THG_POLICY_ADAPTIVE, NULL, 0);
    assert_int_equal(p.status, TH_OK);
    assert_int_equal(p.config.kappa, 0);
    assert_int_equal(p.config.P, 0);
    assert_int_equal(p.config.device, 0);
    assert_int_equal(p.devices.count, 0);
    assert_false(p.devices.all);

    const char *const good[] = {"kappa", "1048576", "P", "512", "device", "1023"};
    p = parse(THG_POLICY_ADAPTIVE, good, 3);
    assert_int_equal(p.status, TH_OK);
    assert_int_equal(p.config.kappa, 1048576);
    assert_int_equal(p.config.P, THG_MAX_P);
    assert_int_equal(p.config.device, 1023);

    const char *const kappa0[] = {"kappa", "0"};
    p = parse(THG_POLICY_ADAPTIVE, kappa0, 1);
    assert_refused(&p, "option kappa: \"0\" is not valid: expected an integer from 1 to 1048576");
    const char *const big_p[] = {"P", "513"};
    p = parse(THG_POLICY_ADAPTIVE, big_p, 1);
    assert_refused(&p, "option P: \"513\" is not valid: expected an integer from 1 to 512");
    /* Signs, spaces, hex and overflow are not integers here. */
    static const char *const not_integers[] = {"-1", "+1", " 1", "1 ", "0x10", "1e3", "",
                                               "99999999999999999999999"};
    for (size_t k = 0; k < sizeof not_integers / sizeof not_integers[0]; ++k) {
        const char *const pair[] = {"device", not_integers[k]};
        p = parse(THG_POLICY_ADAPTIVE, pair, 1);
        char expected[TH_ERROR_SIZE];
        snprintf(expected, sizeof expected,
                 "option device: \"%s\" is not valid: expected an integer from 0 to 1023",
                 not_integers[k]);
        assert_refused(&p, expected);
    }
    const char *const null_value[] = {"kappa", NULL};
    p = parse(THG_POLICY_ADAPTIVE, null_value, 1);
    assert_refused(&p,
                   "option kappa: \"(null)\" is not valid: expected an integer from 1 to 1048576");
}

static void test_unknown_keys_and_rule(void **state)
{
    (void)state;
    const char *const typo[] = {"kapa", "8"};
    parsed p = parse(THG_POLICY_ADAPTIVE, typo, 1);
    assert_refused(&p, "unknown option \"kapa\": gpu-adaptive accepts kappa, P, device, devices "
                       "and rule");
    p = parse(THG_POLICY_SCHEME2, typo, 1);
    assert_refused(&p, "unknown option \"kapa\": gpu-scheme2 accepts kappa, P, device, devices");
    p = parse(THG_POLICY_SCHEME1, typo, 1);
    assert_refused(&p, "unknown option \"kapa\": gpu-scheme1 accepts kappa, P, device, devices");
    const char *const null_key[] = {NULL, "1"};
    p = parse(THG_POLICY_SCHEME1, null_key, 1);
    assert_refused(&p,
                   "unknown option \"(null)\": gpu-scheme1 accepts kappa, P, device, devices");

    const char *const paper[] = {"rule", "paper"};
    p = parse(THG_POLICY_ADAPTIVE, paper, 1);
    assert_int_equal(p.status, TH_OK);
    assert_int_equal(p.config.rule, THG_RULE_PAPER);
    const char *const balanced[] = {"rule", "paper", "rule", "balanced"};
    p = parse(THG_POLICY_ADAPTIVE, balanced, 2);
    assert_int_equal(p.status, TH_OK);
    assert_int_equal(p.config.rule, THG_RULE_BALANCED);
    const char *const bad_rule[] = {"rule", "Paper"};
    p = parse(THG_POLICY_ADAPTIVE, bad_rule, 1);
    assert_refused(&p, "option rule: \"Paper\" is not valid: expected \"balanced\" or \"paper\"");
    p = parse(THG_POLICY_SCHEME2, paper, 1);
    assert_refused(&p, "option rule: gpu-scheme2 forces its scheme on every mode; rule applies "
                       "to gpu-adaptive only");
}

static void test_device_lists(void **state)
{
    (void)state;
    const char *const four[] = {"devices", "0,1,2,3"};
    parsed p = parse(THG_POLICY_SCHEME2, four, 1);
    assert_int_equal(p.status, TH_OK);
    assert_int_equal(p.devices.count, 4);
    for (int d = 0; d < 4; ++d)
        assert_int_equal(p.devices.ordinal[d], d);
    const char *const shards[] = {"devices", "0,0,0"};
    p = parse(THG_POLICY_SCHEME2, shards, 1);
    assert_int_equal(p.status, TH_OK);
    assert_int_equal(p.devices.count, 3);
    const char *const all[] = {"devices", "all"};
    p = parse(THG_POLICY_SCHEME2, all, 1);
    assert_int_equal(p.status, TH_OK);
    assert_true(p.devices.all);
    assert_int_equal(p.devices.count, 0);
    /* One ordinal is the single-device path: device = N. */
    const char *const one[] = {"devices", "5"};
    p = parse(THG_POLICY_SCHEME2, one, 1);
    assert_int_equal(p.status, TH_OK);
    assert_int_equal(p.devices.count, 0);
    assert_int_equal(p.config.device, 5);

    /* The most ranks a run takes, and one more. */
    char list[4 * THG_MAX_GROUP_RANKS + 8] = "";
    for (uint32_t d = 0; d < THG_MAX_GROUP_RANKS; ++d)
        strcat(list, d ? ",0" : "0");
    const char *const most[] = {"devices", list};
    p = parse(THG_POLICY_SCHEME2, most, 1);
    assert_int_equal(p.status, TH_OK);
    assert_int_equal(p.devices.count, THG_MAX_GROUP_RANKS);
    strcat(list, ",0");
    p = parse(THG_POLICY_SCHEME2, most, 1);
    assert_int_equal(p.status, TH_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(p.err, "expected \"all\" or 1 to 64 device ordinals"));

    static const char *const malformed[] = {"", ",", "0,", ",0", "0,,1", "a", "-1", "1024",
                                            "0 ,1", "0;1", "ALL", "0,all", "00000000000000001"};
    for (size_t k = 0; k < sizeof malformed / sizeof malformed[0]; ++k) {
        const char *const pair[] = {"devices", malformed[k]};
        p = parse(THG_POLICY_SCHEME2, pair, 1);
        char expected[TH_ERROR_SIZE];
        snprintf(expected, sizeof expected,
                 "option devices: \"%s\" is not valid: expected \"all\" or 1 to 64 device "
                 "ordinals separated by commas, e.g. \"0,1\"",
                 malformed[k]);
        assert_refused(&p, expected);
    }
    const char *const null_list[] = {"devices", NULL};
    p = parse(THG_POLICY_SCHEME2, null_list, 1);
    assert_int_equal(p.status, TH_ERR_INVALID_ARGUMENT);
}

static void test_device_and_devices_exclude_each_other(void **state)
{
    (void)state;
    static const char *const lists[] = {"0,1", "all"};
    for (size_t k = 0; k < 2; ++k) {
        const char *const before[] = {"device", "1", "devices", lists[k]};
        const char *const after[] = {"devices", lists[k], "device", "1"};
        const parsed a = parse(THG_POLICY_ADAPTIVE, before, 2);
        const parsed b = parse(THG_POLICY_ADAPTIVE, after, 2);
        assert_refused(&a, "options device and devices: give one (device=N is devices=\"N\")");
        assert_refused(&b, "options device and devices: give one (device=N is devices=\"N\")");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_bounds),
        cmocka_unit_test(test_unknown_keys_and_rule),
        cmocka_unit_test(test_device_lists),
        cmocka_unit_test(test_device_and_devices_exclude_each_other),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
