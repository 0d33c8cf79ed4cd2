#include "hals_oracle.h"

#include <math.h>

gboolean th_test_solve_small(double *s, double *b, uint32_t n)
{
    for (uint32_t c = 0; c < n; ++c) {
        uint32_t pivot = c;
        for (uint32_t r = c + 1; r < n; ++r)
            if (fabs(s[r * n + c]) > fabs(s[pivot * n + c]))
                pivot = r;
        if (fabs(s[pivot * n + c]) < 1e-300)
            return FALSE;
        for (uint32_t k = 0; k < n; ++k) {
            const double t = s[c * n + k];
            s[c * n + k] = s[pivot * n + k];
            s[pivot * n + k] = t;
        }
        const double t = b[c];
        b[c] = b[pivot];
        b[pivot] = t;
        for (uint32_t r = c + 1; r < n; ++r) {
            const double factor = s[r * n + c] / s[c * n + c];
            for (uint32_t k = c; k < n; ++k)
                s[r * n + k] -= factor * s[c * n + k];
            b[r] -= factor * b[c];
        }
    }
    for (uint32_t c = n; c-- > 0;) {
        for (uint32_t k = c + 1; k < n; ++k)
            b[c] -= s[c * n + k] * b[k];
        b[c] /= s[c * n + c];
    }
    return TRUE;
}

uint32_t th_test_hals_columns(const double *m, const double *v, uint64_t rows, uint32_t rank,
                              double ridge, double l1, gboolean nonneg, uint32_t sweeps,
                              double tolerance, double *a)
{
    double first = 0.0;
    for (uint32_t pass = 0; pass < sweeps; pass++) {
        double change = 0.0;
        for (uint32_t r = 0; r < rank; r++) {
            const double vrr = v[(size_t)r * rank + r], d = vrr + ridge;
            if (d == 0.0)
                continue;
            for (uint64_t i = 0; i < rows; i++) {
                double n = m[i * rank + r];
                for (uint32_t q = 0; q < rank; q++)
                    n -= a[i * rank + q] * v[(size_t)q * rank + r];
                n += vrr * a[i * rank + r];
                const double sign = (double)((n > 0.0) - (n < 0.0));
                const double next =
                    nonneg ? fmax(0.0, n - l1) / d : sign * fmax(0.0, fabs(n) - l1) / d;
                change += (next - a[i * rank + r]) * (next - a[i * rank + r]);
                a[i * rank + r] = next;
            }
        }
        if (pass == 0)
            first = change;
        if (change <= tolerance * first)
            return pass + 1;
    }
    return sweeps;
}
