/*
 * http_headers.c — the response header parser of http_headers.h. Lines are
 * hostile: each field is read within the line, numbers are range-checked,
 * strings are cut to their buffers.
 */
#include <strings.h>

#include "http_headers.h"

#define DAY_MS (86400L * 1000)

void cm_http_meta_init(http_meta *m)
{
    memset(m, 0, sizeof *m);
    m->content_length = m->range_first = m->range_total = -1;
    m->retry_after_ms = -1;
}

/* A non-negative decimal at *s (advanced past it), or -1. */
static int64_t parse_size(const char **s)
{
    const char *p = *s;
    int64_t v = 0;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (*p - '0');
    }
    *s = p;
    return v;
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

/* An IMF-fixdate in seconds since the epoch, or -1. */
static int64_t parse_imf_date(const char *v)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    const char *comma = strchr(v, ',');
    if (!comma) return -1;
    const char *p = comma + 1 + strspn(comma + 1, " ");
    int64_t d = parse_size(&p);
    if (d < 1 || d > 31 || *p++ != ' ') return -1;
    int mon = 0;
    for (int i = 0; i < 12; i++)
        if (strncasecmp(p, months + 3 * i, 3) == 0) mon = i + 1;
    if (!mon || p[3] != ' ') return -1;
    p += 4;
    int64_t y = parse_size(&p);
    if (y < 1970 || y > 9999 || *p++ != ' ') return -1;
    int64_t hh = parse_size(&p);
    if (hh < 0 || hh > 23 || *p++ != ':') return -1;
    int64_t mm = parse_size(&p);
    if (mm < 0 || mm > 59 || *p++ != ':') return -1;
    int64_t ss = parse_size(&p);
    if (ss < 0 || ss > 60) return -1;
    p += strspn(p, " ");
    if (strncasecmp(p, "GMT", 3) != 0) return -1;
    return days_from_civil(y, mon, (int)d) * 86400 + hh * 3600 + mm * 60 + ss;
}

long cm_http_retry_after_ms(const char *v, int64_t now_s)
{
    const char *p = v + strspn(v, " \t");
    const char *q = p;
    int64_t secs = parse_size(&q);
    if (secs >= 0 && q[strspn(q, " \t")] == 0) return (long)CM_MIN(secs, 86400) * 1000;
    int64_t when = parse_imf_date(p);
    if (when < 0) return -1;
    int64_t left = when - now_s;
    return left <= 0 ? 0 : (long)CM_MIN(left, 86400) * 1000;
}

/* The value of header `name` ("retry-after:") in line, or NULL. */
static const char *value_of(const char *line, const char *name)
{
    size_t n = strlen(name);
    if (strncasecmp(line, name, n) != 0) return NULL;
    return line + n + strspn(line + n, " \t");
}

void cm_http_meta_line(http_meta *m, const char *p, size_t n, int64_t now_s)
{
    char line[512];
    size_t l = CM_MIN(n, sizeof line - 1);
    memcpy(line, p, l);
    line[l] = 0;
    line[strcspn(line, "\r\n")] = 0;
    const char *v;
    if (strncmp(line, "HTTP/", 5) == 0) { /* a new response (redirect, 100): forget the last */
        char etag[sizeof m->linked_etag];
        memcpy(etag, m->linked_etag, sizeof etag);
        cm_http_meta_init(m);
        memcpy(m->linked_etag, etag, sizeof etag);
        const char *sp = strchr(line, ' ');
        if (sp) {
            sp++;
            int64_t st = parse_size(&sp);
            m->status = st >= 100 && st <= 999 ? (long)st : 0;
        }
    } else if ((v = value_of(line, "retry-after:"))) {
        m->retry_after_ms = cm_http_retry_after_ms(v, now_s);
    } else if ((v = value_of(line, "content-type:"))) {
        snprintf(m->content_type, sizeof m->content_type, "%.*s", (int)strcspn(v, "; \t"), v);
    } else if ((v = value_of(line, "content-length:"))) {
        m->content_length = parse_size(&v);
    } else if ((v = value_of(line, "x-linked-etag:"))) {
        if (strncmp(v, "W/", 2) == 0) v += 2;
        v += *v == '"';
        snprintf(m->linked_etag, sizeof m->linked_etag, "%.*s", (int)strcspn(v, "\" \t"), v);
    } else if ((v = value_of(line, "content-range:"))) {
        if (strncasecmp(v, "bytes", 5) != 0) return;
        v += 5 + strspn(v + 5, " \t");
        int64_t first = -1;
        if (*v == '*') {
            v++;
        } else {
            first = parse_size(&v);
            if (first < 0 || *v++ != '-' || parse_size(&v) < 0) return;
        }
        if (*v++ != '/') return;
        m->range_first = first;
        m->range_total = *v == '*' ? -1 : parse_size(&v);
    }
}
