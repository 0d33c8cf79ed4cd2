/* Decimal numbers in text, read at the speed of the text: Clinger's fast
 * path, shared by every reader of numbers the project writes (the tensor
 * parser, the factor files) and by the writer that picks digits the fast
 * path gives back exactly (tensor_writer). */
#ifndef TH_DECIMAL_H
#define TH_DECIMAL_H

#include <stddef.h>
#include <stdint.h>

/* 10^0 .. 10^22: every power of ten a double holds exactly. */
#define TH_EXACT_POWERS_OF_TEN 23
extern const double th_exact_powers_of_ten[TH_EXACT_POWERS_OF_TEN];

/* The plain decimal at the start of [at, end), [+-]d[.d][(e|E)[+-]d], read
 * as a double when it has at most 19 significant digits making a mantissa
 * up to 2^53 and a power of ten up to 22 in magnitude: then one exact IEEE
 * multiplication or division gives the correctly rounded value, as strtod
 * would. Returns the end of the number (the caller decides whether what
 * follows ends its field), or NULL for any other text, which the caller
 * reads the slow way (g_ascii_strtod). Inline: the tensor parser calls it
 * once a nonzero. */
static inline const char *th_decimal_parse_fast(const char *at, const char *end, double *value)
{
    const char *p = at;
    const int negative = p < end && *p == '-';
    if (p < end && (*p == '-' || *p == '+'))
        ++p;
    uint64_t mantissa = 0;
    int digits = 0, exp10 = 0, any_digit = 0;
    for (; p < end && (unsigned)(*p - '0') < 10u; ++p) {
        any_digit = 1;
        if (mantissa == 0 && *p == '0')
            continue; /* leading zeros are not significant */
        if (++digits > 19)
            return NULL;
        mantissa = mantissa * 10u + (uint64_t)(*p - '0');
    }
    if (p < end && *p == '.') {
        for (++p; p < end && (unsigned)(*p - '0') < 10u; ++p) {
            any_digit = 1;
            --exp10;
            if (mantissa == 0 && *p == '0')
                continue;
            if (++digits > 19)
                return NULL;
            mantissa = mantissa * 10u + (uint64_t)(*p - '0');
        }
    }
    if (!any_digit)
        return NULL;
    if (p < end && (*p == 'e' || *p == 'E')) {
        ++p;
        const int exp_negative = p < end && *p == '-';
        if (p < end && (*p == '-' || *p == '+'))
            ++p;
        if (p == end || (unsigned)(*p - '0') >= 10u)
            return NULL;
        int e = 0;
        for (; p < end && (unsigned)(*p - '0') < 10u; ++p)
            if (e < 100000)
                e = e * 10 + (*p - '0');
        exp10 += exp_negative ? -e : e;
    }
    if (mantissa > ((uint64_t)1 << 53))
        return NULL;
    if (mantissa == 0)
        exp10 = 0;
    if (exp10 < -22 || exp10 > 22)
        return NULL;
    const double v = (double)mantissa;
    const double magnitude = exp10 < 0 ? v / th_exact_powers_of_ten[-exp10]
                                       : v * th_exact_powers_of_ten[exp10];
    *value = negative ? -magnitude : magnitude;
    return p;
}

#endif
