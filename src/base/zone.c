/*
 * zone.c — local time in a named time zone (zone.h): the TZif file (RFC 8536,
 * versions 1-4) read into transitions and types, the POSIX TZ footer rule
 * for times after the last transition, and the zones seen so far cached
 * behind a mutex (the lock guards the list only; files are read outside it).
 * Leap-second records are skipped, as the zoneinfo files in use carry none.
 */
#include "zone.h"

#include <pthread.h>

#include "buf.h"
#include "caps.h"
#include "fs.h"

#define ZONE_DIR   "/usr/share/zoneinfo/"
#define ZONE_CACHE 64 /* zones kept; past this one is read per call */

typedef struct zdate {
    char kind; /* 'J' Julian day 1-365 (no Feb 29), 'D' day 0-365, 'M' month.week.day */
    int n, m, w, d;
    int32_t secs; /* local time of day of the change (may be negative or past 24 h) */
} zdate;

typedef struct zrule {
    char std[16], dst[16];
    int32_t std_off, dst_off; /* seconds east of UTC */
    bool has_dst;
    zdate start, end;
} zrule;

typedef struct ztype {
    int32_t off;
    bool dst;
    uint8_t abbr; /* index into abbrs */
} ztype;

typedef struct zone {
    struct zone *next;
    char *name;
    bool ok; /* false: unknown, answered as UTC */
    int64_t *trans;
    uint8_t *idx;
    size_t ntrans;
    ztype *types;
    size_t ntypes;
    char *abbrs;
    size_t nabbrs;
    bool has_rule;
    zrule rule;
} zone;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static zone *cache;
static size_t ncached;

bool cm_zone_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 200 || name[0] == '/' || name[n - 1] == '/') return false;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '+' || c == '-' || c == '.' || c == '/'))
            return false;
    }
    for (const char *p = name; *p;) { /* components: none empty, ".", ".." */
        size_t l = strcspn(p, "/");
        if (l == 0 || (l == 1 && p[0] == '.') || (l == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        p += l + (p[l] == '/');
    }
    return true;
}

/* ---- the POSIX TZ rule ---- */

static const char *rule_name(const char *p, char out[16])
{
    size_t n = 0;
    if (*p == '<') {
        p++;
        while (*p && *p != '>') {
            char c = *p;
            if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '+' || c == '-'))
                return NULL;
            if (n < 15) out[n++] = c;
            p++;
        }
        if (*p++ != '>') return NULL;
    } else {
        while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')) {
            if (n < 15) out[n++] = *p;
            p++;
        }
    }
    out[n] = 0;
    return n >= 3 ? p : NULL;
}

static const char *rule_num(const char *p, int lo, int hi, int *v)
{
    if (*p < '0' || *p > '9') return NULL;
    long x = 0;
    while (*p >= '0' && *p <= '9' && x <= hi)
        x = x * 10 + (*p++ - '0');
    if (x < lo || x > hi) return NULL;
    *v = (int)x;
    return p;
}

/* [+-]hh[:mm[:ss]] with hh at most maxh; the signed seconds. */
static const char *rule_time(const char *p, int maxh, int32_t *secs)
{
    int sign = 1, h = 0, m = 0, s = 0;
    if (*p == '+' || *p == '-') sign = *p++ == '-' ? -1 : 1;
    if (!(p = rule_num(p, 0, maxh, &h))) return NULL;
    if (*p == ':' && !(p = rule_num(p + 1, 0, 59, &m))) return NULL;
    if (*p == ':' && !(p = rule_num(p + 1, 0, 59, &s))) return NULL;
    *secs = sign * (h * 3600 + m * 60 + s);
    return p;
}

static const char *rule_date(const char *p, zdate *d)
{
    memset(d, 0, sizeof *d);
    if (*p == 'J') {
        d->kind = 'J';
        p = rule_num(p + 1, 1, 365, &d->n);
    } else if (*p == 'M') {
        d->kind = 'M';
        if ((p = rule_num(p + 1, 1, 12, &d->m)) && *p == '.' &&
            (p = rule_num(p + 1, 1, 5, &d->w)) && *p == '.')
            p = rule_num(p + 1, 0, 6, &d->d);
        else
            p = NULL;
    } else {
        d->kind = 'D';
        p = rule_num(p, 0, 365, &d->n);
    }
    d->secs = 7200;
    if (p && *p == '/') p = rule_time(p + 1, 167, &d->secs);
    return p;
}

/* Parses a whole POSIX TZ rule; false when it is not one. */
static bool rule_parse(const char *s, zrule *r)
{
    memset(r, 0, sizeof *r);
    int32_t west;
    const char *p = rule_name(s, r->std);
    if (!p || !(p = rule_time(p, 24, &west))) return false;
    r->std_off = -west;
    if (!*p) return true;
    if (!(p = rule_name(p, r->dst))) return false;
    r->has_dst = true;
    r->dst_off = r->std_off + 3600;
    if (*p && *p != ',') {
        if (!(p = rule_time(p, 24, &west))) return false;
        r->dst_off = -west;
    }
    if (!*p) { /* no rule given: the US rule, as glibc assumes */
        r->start = (zdate){'M', 0, 3, 2, 0, 7200};
        r->end = (zdate){'M', 0, 11, 1, 0, 7200};
        return true;
    }
    if (*p != ',' || !(p = rule_date(p + 1, &r->start)) || *p != ',' ||
        !(p = rule_date(p + 1, &r->end)))
        return false;
    return *p == 0;
}

static bool leap_year(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* The local time (seconds from the epoch, as if local were UTC) of d in year
 * y. As glibc, a year before 1970 has its day of the year counted from
 * 1970-01-01 (so a rule-only zone shows no DST change before 1970). */
static int64_t rule_when(const zdate *d, int64_t y)
{
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int64_t jan1 = days_from_civil(y, 1, 1), day;
    if (d->kind == 'J') {
        day = d->n - 1 + (leap_year(y) && d->n >= 60);
    } else if (d->kind == 'D') {
        day = d->n;
    } else {
        int64_t first = days_from_civil(y, d->m, 1);
        int64_t wd = ((first + 4) % 7 + 7) % 7; /* 1970-01-01 was a Thursday */
        int len = mdays[d->m - 1] + (d->m == 2 && leap_year(y));
        int64_t k = (d->d - wd + 7) % 7 + (int64_t)(d->w - 1) * 7;
        while (k >= len)
            k -= 7;
        day = first - jan1 + k;
    }
    return ((y > 1970 ? jan1 : 0) + day) * 86400 + d->secs;
}

/* Offset, DST flag and abbreviation of t under rule r (the change times
 * worked out for t's UTC year, as glibc does). */
static void rule_at(const zrule *r, int64_t t, int32_t *off, bool *dst, const char **abbr)
{
    *off = r->std_off;
    *dst = false;
    *abbr = r->std;
    if (!r->has_dst) return;
    time_t tt = (time_t)t;
    struct tm u;
    if (!gmtime_r(&tt, &u)) return;
    int64_t y = (int64_t)u.tm_year + 1900;
    int64_t start = rule_when(&r->start, y) - r->std_off;
    int64_t end = rule_when(&r->end, y) - r->dst_off;
    bool in = start < end ? (t >= start && t < end) : !(t >= end && t < start);
    if (in) {
        *off = r->dst_off;
        *dst = true;
        *abbr = r->dst;
    }
}

/* ---- the TZif file ---- */

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const uint8_t *p)
{
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

/* The size of a data block with the header's counts c and times of ts bytes. */
static size_t block_size(const uint32_t c[6], size_t ts)
{
    /* c: isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt (all < 2^32) */
    return (size_t)c[3] * ts + c[3] + (size_t)c[4] * 6 + c[5] + (size_t)c[2] * (ts + 4) + c[1] +
           c[0];
}

static bool tzif_parse(const uint8_t *d, size_t n, zone *z)
{
    uint32_t c[6];
    if (n < 44 || memcmp(d, "TZif", 4) != 0) return false;
    for (int i = 0; i < 6; i++)
        c[i] = be32(d + 20 + 4 * i);
    size_t ts = 4, at = 44;
    if (d[4] >= '2') { /* skip the 32-bit block for the 64-bit one */
        at += block_size(c, 4);
        if (at > n || n - at < 44 || memcmp(d + at, "TZif", 4) != 0) return false;
        for (int i = 0; i < 6; i++)
            c[i] = be32(d + at + 20 + 4 * i);
        at += 44;
        ts = 8;
    }
    if (c[4] == 0 || c[4] > 256 || c[5] == 0 || c[3] > (1u << 20) || c[2] > (1u << 16) ||
        c[5] > (1u << 16) || c[1] > c[4] || c[0] > c[4] || block_size(c, ts) > n - at)
        return false;
    const uint8_t *p = d + at;
    z->ntrans = c[3];
    z->ntypes = c[4];
    z->nabbrs = c[5];
    z->trans = malloc((z->ntrans + 1) * sizeof *z->trans);
    z->idx = malloc(z->ntrans + 1);
    z->types = malloc(z->ntypes * sizeof *z->types);
    z->abbrs = malloc(z->nabbrs + 1);
    if (!z->trans || !z->idx || !z->types || !z->abbrs) return false;
    for (size_t i = 0; i < z->ntrans; i++, p += ts) {
        z->trans[i] = ts == 8 ? be64(p) : (int64_t)(int32_t)be32(p);
        if (i && z->trans[i] <= z->trans[i - 1]) return false;
    }
    for (size_t i = 0; i < z->ntrans; i++, p++) {
        if (*p >= z->ntypes) return false;
        z->idx[i] = *p;
    }
    for (size_t i = 0; i < z->ntypes; i++, p += 6) {
        z->types[i].off = (int32_t)be32(p);
        z->types[i].dst = p[4] != 0;
        z->types[i].abbr = p[5];
        if (p[5] >= z->nabbrs || z->types[i].off < -25 * 3600 || z->types[i].off > 26 * 3600)
            return false;
    }
    memcpy(z->abbrs, p, z->nabbrs);
    z->abbrs[z->nabbrs] = 0;
    p += z->nabbrs + (size_t)c[2] * (ts + 4) + c[1] + c[0];
    if (ts == 8 && p < d + n && *p == '\n') { /* the footer: "\n<rule>\n" */
        const uint8_t *e = memchr(p + 1, '\n', (size_t)(d + n - p - 1));
        char s[128];
        size_t l = e ? (size_t)(e - p - 1) : 0;
        if (l > 0 && l < sizeof s) {
            memcpy(s, p + 1, l);
            s[l] = 0;
            z->has_rule = rule_parse(s, &z->rule);
        }
    }
    return true;
}

static void zone_free(zone *z)
{
    if (!z) return;
    free(z->name);
    free(z->trans);
    free(z->idx);
    free(z->types);
    free(z->abbrs);
    free(z);
}

/* Reads zone name (never NULL but on ENOMEM; ok false when unknown). */
static zone *zone_load(const char *name)
{
    zone *z = calloc(1, sizeof *z);
    if (!z || !(z->name = cm_strdup(name))) {
        free(z);
        return NULL;
    }
    if (cm_zone_name_ok(name)) {
        buf path = BUF_INIT, data = BUF_INIT;
        char err[64];
        if (cm_buf_adds(&path, ZONE_DIR) == CM_OK && cm_buf_adds(&path, name) == CM_OK &&
            cm_fs_read_file_follow(path.data, CM_CAP_ZONE_FILE, &data, err, sizeof err) == CM_OK)
            z->ok = tzif_parse((const uint8_t *)data.data, data.len, z);
        cm_buf_release(&path);
        cm_buf_release(&data);
    }
    if (!z->ok) { /* not a zone file: a POSIX rule, or unknown */
        free(z->trans);
        free(z->idx);
        free(z->types);
        free(z->abbrs);
        z->trans = NULL;
        z->idx = NULL;
        z->types = NULL;
        z->abbrs = NULL;
        z->ntrans = z->ntypes = z->nabbrs = 0;
        z->ok = z->has_rule = rule_parse(name, &z->rule);
    }
    return z;
}

/* Offset, DST flag and abbreviation of t in z, as glibc's __tzfile_compute
 * picks them. */
static void zone_at(const zone *z, int64_t t, int32_t *off, bool *dst, const char **abbr)
{
    *off = 0;
    *dst = false;
    *abbr = "UTC";
    if (!z->ok) return;
    if (!z->ntypes) {
        rule_at(&z->rule, t, off, dst, abbr);
        return;
    }
    size_t ti;
    if (!z->ntrans || t < z->trans[0]) { /* the first standard-time type */
        ti = 0;
        while (ti < z->ntypes && z->types[ti].dst)
            ti++;
        if (ti == z->ntypes) ti = 0;
    } else if (t >= z->trans[z->ntrans - 1]) {
        if (z->has_rule) {
            rule_at(&z->rule, t, off, dst, abbr);
            return;
        }
        ti = z->idx[z->ntrans - 1];
    } else { /* trans[lo] <= t < trans[hi] */
        size_t lo = 0, hi = z->ntrans - 1;
        while (hi - lo > 1) {
            size_t mid = lo + (hi - lo) / 2;
            if (t >= z->trans[mid])
                lo = mid;
            else
                hi = mid;
        }
        ti = z->idx[lo];
    }
    *off = z->types[ti].off;
    *dst = z->types[ti].dst;
    *abbr = z->abbrs + z->types[ti].abbr;
}

static zone *cache_find(const char *name)
{
    for (zone *z = cache; z; z = z->next)
        if (!strcmp(z->name, name)) return z;
    return NULL;
}

bool cm_zone_localtime(const char *name, int64_t t, struct tm *tm)
{
    int32_t off = 0;
    bool dst = false, ok = true;
    const char *abbr = "UTC";
    if (t < -((int64_t)1 << 55)) t = -((int64_t)1 << 55); /* gmtime_r's year stays an int */
    if (t > ((int64_t)1 << 55)) t = (int64_t)1 << 55;
    if (name && *name) {
        pthread_mutex_lock(&cache_mu);
        zone *z = cache_find(name);
        pthread_mutex_unlock(&cache_mu);
        zone *own = NULL;
        if (!z && (own = zone_load(name))) {
            pthread_mutex_lock(&cache_mu);
            if (!(z = cache_find(name)) && ncached < ZONE_CACHE) {
                own->next = cache;
                cache = z = own;
                ncached++;
                own = NULL;
            }
            pthread_mutex_unlock(&cache_mu);
            if (!z) z = own;
        }
        /* A cached zone is never changed or freed: read without the lock. */
        if (z) zone_at(z, t, &off, &dst, &abbr);
        ok = z && z->ok;
        if (own && z == own) abbr = dst ? "DST" : "STD"; /* its storage goes below */
        zone_free(own);
    }
    time_t lt = (time_t)(t + off);
    memset(tm, 0, sizeof *tm);
    gmtime_r(&lt, tm);
    tm->tm_isdst = dst;
    tm->tm_gmtoff = off;
    tm->tm_zone = abbr;
    return ok;
}
