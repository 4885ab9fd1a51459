/*
 * test_zone.c — local time in a named zone (base/zone) against glibc's own
 * answer: date(1) run in a child with TZ set prints each instant's local
 * time, offset and abbreviation; ours must agree for zones with DST in
 * either hemisphere, half-hour and 45-minute offsets, negative DST (Dublin),
 * dates before the first and after the last transition (the footer rule),
 * and one second either side of every change we find. Hostile zone names
 * are never looked up as files.
 */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "../src/base/buf.h"
#include "../src/base/zone.h"
#include "../src/session/flush.h"
#include "test.h"

/* Our answer in date's format: "YYYY-MM-DD HH:MM:SS +hhmm ABBR" (strftime
 * writes -0000 for a zero offset named "-00", as RFC 3339 asks). */
static void ours(const char *zone, int64_t t, buf *out)
{
    struct tm tm;
    cm_zone_localtime(zone, t, &tm);
    long off = tm.tm_gmtoff, a = off < 0 ? -off : off;
    (void)!cm_buf_printf(out, "%04d-%02d-%02d %02d:%02d:%02d %c%02ld%02ld %s\n",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                         tm.tm_sec, off < 0 || (off == 0 && tm.tm_zone[0] == '-') ? '-' : '+', a / 3600, a / 60 % 60, tm.tm_zone);
}

static int32_t offset_at(const char *zone, int64_t t)
{
    struct tm tm;
    cm_zone_localtime(zone, t, &tm);
    return (int32_t)tm.tm_gmtoff;
}

/* The instants checked in zone: every 23 days and 7 hours from 1890 to 2100,
 * and around each change of offset seen between two of those samples (found
 * by bisection, then t-1, t, t+1). */
static void instants(const char *zone, int64_t **out, size_t *n)
{
    size_t cap = 16384;
    int64_t *v = malloc(cap * sizeof *v);
    *n = 0;
    const int64_t step = 23 * 86400 + 7 * 3600;
    for (int64_t t = -2524521600LL; t < 4102444800LL && *n + 4 < cap; t += step) {
        v[(*n)++] = t;
        if (offset_at(zone, t) == offset_at(zone, t + step)) continue;
        int64_t lo = t, hi = t + step; /* offset(lo) != offset(hi) */
        while (hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;
            if (offset_at(zone, mid) == offset_at(zone, lo))
                lo = mid;
            else
                hi = mid;
        }
        v[(*n)++] = hi - 1;
        v[(*n)++] = hi;
        v[(*n)++] = hi + 1;
    }
    *out = v;
}

static void check_zone(const char *dir, const char *zone)
{
    int64_t *v;
    size_t n;
    instants(zone, &v, &n);
    buf in = BUF_INIT, want = BUF_INIT;
    for (size_t i = 0; i < n; i++) {
        (void)!cm_buf_printf(&in, "@%lld\n", (long long)v[i]);
        ours(zone, v[i], &want);
    }
    write_file(dir, "instants", in.data);
    char tzv[256];
    snprintf(tzv, sizeof tzv, "TZ=%s", zone);
    const char *argv[] = {"env",   tzv, "LC_ALL=C", "date", "-f", path_in(dir, "instants"),
                          "+%Y-%m-%d %H:%M:%S %z %Z", NULL};
    run_result r = run_cmd(NULL, argv);
    EXPECT_INT(r.status, 0);
    /* the first line that differs, with its instant */
    const char *a = r.out, *b = want.data;
    size_t line = 0;
    while (*a && *b) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || memcmp(a, b, la) != 0) {
            test_fail(__FILE__, __LINE__, "%s at @%lld: glibc %.*s, ours %.*s", zone,
                      (long long)v[line], (int)la, a, (int)lb, b);
            break;
        }
        a += la + (a[la] == '\n');
        b += lb + (b[lb] == '\n');
        line++;
    }
    EXPECT_INT(line, n);
    run_result_release(&r);
    cm_buf_release(&in);
    cm_buf_release(&want);
    free(v);
}

TEST(zone_matches_glibc)
{
    static const char *const zones[] = {
        "Europe/Berlin",       "America/New_York", "Australia/Sydney", "Australia/Lord_Howe",
        "Europe/Dublin",       "Asia/Kolkata",     "America/Sao_Paulo", "Pacific/Chatham",
        "Africa/Casablanca",   "America/Santiago", "Asia/Tehran",      "Pacific/Apia",
        "America/St_Johns",    "Antarctica/Troll", "Europe/London",    "EST5EDT",
        "UTC",                 "Asia/Tokyo",       "America/Los_Angeles",
        "CET-1CEST,M3.5.0,M10.5.0/3",              "<+0330>-3:30",     "AEST-10AEDT,M10.1.0,M4.1.0/3",
    };
    char *dir = tmp_dir();
    for (size_t i = 0; i < ARRAY_LEN(zones); i++) {
        if (!strchr(zones[i], ',') && !strchr(zones[i], '<') &&
            access(path_in("/usr/share/zoneinfo", zones[i]), R_OK) != 0)
            SKIP("tzdata", "no /usr/share/zoneinfo/%s", zones[i]);
        check_zone(dir, zones[i]);
    }
}

TEST(zone_hostile_names_are_utc)
{
    static const char *const bad[] = {
        "../../../../etc/passwd", "/etc/localtime", "Europe/../../../etc/passwd",
        "Europe//Berlin",         "Europe/Berlin/", "./UTC",
        "Europe/./Berlin",        "Nowhere/Land",   "Europe/Berlin\n",
    };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        struct tm tm;
        EXPECT(!cm_zone_localtime(bad[i], 1790000000, &tm));
        EXPECT_INT(tm.tm_gmtoff, 0);
        EXPECT_INT(tm.tm_hour, 1790000000 % 86400 / 3600);
        EXPECT_STR(tm.tm_zone, "UTC");
    }
    EXPECT(!cm_zone_name_ok(".."));
    EXPECT(!cm_zone_name_ok(""));
    EXPECT(!cm_zone_name_ok(NULL));
    EXPECT(cm_zone_name_ok("America/Argentina/Buenos_Aires"));
    EXPECT(cm_zone_name_ok("Etc/GMT+5"));
    struct tm tm;
    EXPECT(cm_zone_localtime(NULL, 0, &tm));
    EXPECT_INT(tm.tm_year, 70);
}

/* The flush file is named after the day in the configured zone. */
TEST(zone_flush_date_in_zone)
{
    buf p = BUF_INIT;
    /* 2026-03-28 23:30 UTC is already the 29th in Berlin (UTC+1) and in Tokyo. */
    EXPECT_INT(cm_flush_target_path(1774740600000LL, "Europe/Berlin", &p), CM_OK);
    EXPECT_STR(p.data, "memory/2026-03-29.md");
    cm_buf_reset(&p);
    EXPECT_INT(cm_flush_target_path(1774740600000LL, "America/New_York", &p), CM_OK);
    EXPECT_STR(p.data, "memory/2026-03-28.md");
    cm_buf_reset(&p);
    EXPECT_INT(cm_flush_target_path(1774740600000LL, "../../etc/passwd", &p), CM_OK);
    EXPECT_STR(p.data, "memory/2026-03-28.md");
    cm_buf_release(&p);
}

static void *zone_hammer(void *arg)
{
    const char *const *zones = arg;
    for (int i = 0; i < 20000; i++) {
        struct tm tm;
        cm_zone_localtime(zones[i % 4], 1700000000 + i * 3600LL, &tm);
    }
    return NULL;
}

/* Many threads, zones loaded for the first time at once: each gets the
 * answer a single thread gets (run under TSan with `make tsan`). */
TEST(zone_threads_share_the_cache)
{
    static const char *const zones[] = {"Asia/Kathmandu", "America/Denver", "Europe/Paris",
                                        "Australia/Adelaide"};
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, zone_hammer, (void *)zones);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    struct tm tm;
    EXPECT(cm_zone_localtime("Asia/Kathmandu", 1700000000, &tm));
    EXPECT_INT(tm.tm_gmtoff, 5 * 3600 + 45 * 60);
}
