/*
 * jnum.c — range-checked numbers from JSON (jnum.h).
 */
#include "jnum.h"

#include <math.h>

int64_t cm_jnum_int64(const json_t *v, int64_t lo, int64_t hi, int64_t dflt)
{
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        return i < lo ? lo : i > hi ? hi : (int64_t)i;
    }
    if (!json_is_real(v)) return dflt;
    double d = json_real_value(v);
    if (!isfinite(d)) return dflt;
    /* compared as doubles first: only a value inside the range is converted */
    if (d <= (double)lo) return lo;
    if (d >= (double)hi) return hi;
    return (int64_t)d;
}

double cm_jnum_double(const json_t *v, double lo, double hi, double dflt)
{
    if (!json_is_number(v)) return dflt;
    double d = json_number_value(v);
    if (!isfinite(d)) return dflt;
    return d < lo ? lo : d > hi ? hi : d;
}
