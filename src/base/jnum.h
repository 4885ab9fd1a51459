/*
 * jnum.h — numbers read from JSON state files (auth-profiles.json,
 * sessions.json, offsets) as int64_t without undefined behaviour: a real such
 * as 1e300 or -1e300 is clamped to the range before it is converted, never
 * cast as it is.
 */
#ifndef CM_JNUM_H
#define CM_JNUM_H

#include <jansson.h>
#include <stdint.h>

/* The largest time in ms a state file may name (about year 287,000): far
 * enough to mean "never", small enough that adding a day cannot overflow. */
#define CM_JNUM_MS_MAX ((int64_t)9000000000000000)

/* v as an integer in [lo, hi] (lo <= hi): an integer or a finite real is
 * clamped into the range (a real truncated toward zero); anything else
 * (absent, not a number, NaN or infinite) gives dflt. */
int64_t cm_jnum_int64(const json_t *v, int64_t lo, int64_t hi, int64_t dflt);

/* A finite real clamped into [lo, hi]; dflt when v is not a finite number. */
double cm_jnum_double(const json_t *v, double lo, double hi, double dflt);

#endif
