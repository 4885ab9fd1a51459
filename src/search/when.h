/*
 * when.h — dates in a question: "what did I decide last Tuesday", "in
 * March", "yesterday", "3 days ago", "on May 4", "2026-11-20". The first
 * such expression found gives a range of days, relative to today (the
 * caller's clock, so tests inject it), and its words are blanked out of the
 * query, so they do not count as keywords a note must hold. The search then
 * favours daily notes (memory/YYYY-MM-DD.md) and session chunks of those
 * days (engine/search.c). English, Spanish and Portuguese words for days,
 * months, today and yesterday. Pure: no I/O, no clock.
 */
#ifndef CM_WHEN_H
#define CM_WHEN_H

#include "../base/common.h"

/* Days are counted from 1970-01-01 (day 0) in the proleptic Gregorian calendar. */
typedef struct when_range {
    int64_t first, last; /* inclusive */
} when_range;

/* Finds a date expression in q[0..n) relative to today (a day number).
 * Returns true and sets *out when there is one; rest (n + 1 bytes) then
 * receives q with the expression's bytes replaced by spaces, NUL-terminated.
 * A range never ends after today. */
bool cm_when_find(const char *q, size_t n, int64_t today, char *rest, when_range *out);

/* Whether q asks when: its first word is "when" ("cuándo", "quando"), or it
 * opens with "what/which year|month|day|date|week" or "how many
 * years|months|weeks|days" (and their Spanish and Portuguese forms: "qué
 * año", "cuántos años", "quantos anos"): "Which year did Evan start ...",
 * "How many years passed between ...". */
bool cm_when_asks(const char *q, size_t n);

/* Whether text[0..n) speaks of a time outside its headings: a weekday, a
 * month (beside a number, or a full name other than "may"), today,
 * yesterday, tomorrow, "last week", "next month", a clock time (6pm,
 * 18:30) or a year. */
bool cm_when_mentions(const char *text, size_t n);

/* The day number of a civil date, and back. */
int64_t cm_when_day(int y, int m, int d);
void cm_when_civil(int64_t day, int *y, int *m, int *d);

#endif
