/*
 * zone.h — local time in a named IANA time zone without touching the process
 * environment (setenv("TZ") + tzset() race with every other thread's
 * localtime_r and getenv). The zone's TZif file under /usr/share/zoneinfo is
 * read once into its transitions and its POSIX TZ footer rule (used after the
 * last transition), and kept in a per-process cache (memory only; a tzdata
 * update on disk is seen after a restart).
 */
#ifndef CM_ZONE_H
#define CM_ZONE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* True when name may be looked up as a file: 1-200 bytes of [A-Za-z0-9_+-./],
 * no leading or trailing '/', no empty, "." or ".." component. */
bool cm_zone_name_ok(const char *name);

/* Fills tm with the local time of t (seconds since the epoch) in zone, as
 * glibc's localtime_r with TZ=zone would (tm_isdst, tm_gmtoff; tm_zone points
 * at cached storage, or at "UTC"). A zone that is not a valid name (above)
 * nor a readable TZif file is tried as a POSIX TZ rule ("CET-1CEST,M3.5.0,
 * M10.5.0/3"); failing that the answer is UTC and false is returned.
 * NULL or "" is UTC (true). Thread-safe. */
bool cm_zone_localtime(const char *zone, int64_t t, struct tm *tm);

#endif
