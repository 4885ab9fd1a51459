/*
 * inbound_meta.c — the untrusted-metadata blocks of a turn's user message
 * and envelope timestamps (contracts in inbound_meta.h). The JSON is written
 * by hand so that keys keep 2026.3.22's order and layout (JSON.stringify with
 * an indent of 2); strings go through cm_utf8_add_json_str (always valid
 * UTF-8, control characters escaped).
 */
#include "inbound_meta.h"

#include <strings.h>
#include <time.h>

#include "../../base/utf8.h"
#include "../../base/zone.h"

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* s trimmed: *n bytes from the returned pointer; NULL when blank or NULL. */
static const char *trimmed(const char *s, size_t *n)
{
    if (!s) return NULL;
    size_t e = strlen(s);
    while (*s && is_ws(*s))
        s++, e--;
    while (e && is_ws(s[e - 1]))
        e--;
    *n = e;
    return e ? s : NULL;
}

static bool has(const char *s)
{
    size_t n;
    return trimmed(s, &n) != NULL;
}

/* ---- time stamps ---------------------------------------------------------- */

void cm_gw_ts_opts_read(const cm_rtcfg *cfg, gw_ts_opts *o)
{
    memset(o, 0, sizeof *o);
    if (!cfg) return;
    const cm_rt_agent_defaults *d = &cfg->defaults;
    o->off = d->envelope_timestamp == 1; /* "off" */
    size_t n = 0;
    const char *z = trimmed(d->envelope_timezone, &n);
    if (!z || (n == 5 && !strncasecmp(z, "local", 5)) || (n == 4 && !strncasecmp(z, "host", 4)))
        return;
    if ((n == 3 && !strncasecmp(z, "utc", 3)) || (n == 3 && !strncasecmp(z, "gmt", 3))) {
        o->utc = true;
        return;
    }
    if (n == 4 && !strncasecmp(z, "user", 4)) {
        z = trimmed(d->user_timezone, &n);
        if (!z) return; /* the host's zone */
    }
    struct tm tm;
    if (n >= sizeof o->zone) {
        o->utc = true;
        return;
    }
    memcpy(o->zone, z, n);
    o->zone[n] = 0;
    /* an unknown zone: UTC (2026.3.22 falls back to UTC for an explicit
     * zone Intl does not know; a bad userTimezone means the host's zone) */
    if (!cm_zone_name_ok(o->zone) || !cm_zone_localtime(o->zone, 0, &tm)) {
        const char *ez = d->envelope_timezone;
        size_t en = 0;
        ez = trimmed(ez, &en);
        bool user = ez && en == 4 && !strncasecmp(ez, "user", 4);
        o->zone[0] = 0;
        o->utc = !user;
    }
}

/* The zone's name as en-US Intl's "short" style writes it: the US
 * abbreviations and UTC by name, everything else as an offset from GMT. */
static cm_rc add_zone_name(buf *out, const struct tm *tm, const char *zone)
{
    static const char *const us[] = {"EST", "EDT", "CST",  "CDT",  "MST", "MDT",
                                     "PST", "PDT", "AKST", "AKDT", "HST"};
    const char *abbr = tm->tm_zone ? tm->tm_zone : "";
    for (size_t i = 0; i < ARRAY_LEN(us); i++)
        if (!strcmp(abbr, us[i])) return cm_buf_adds(out, abbr);
    if (!strcmp(abbr, "UTC") && (!zone || !strncmp(zone, "Etc/", 4) || !strcmp(zone, "UTC")))
        return cm_buf_adds(out, "UTC");
    long off = tm->tm_gmtoff, a = off < 0 ? -off : off;
    if (!off) return cm_buf_adds(out, "GMT");
    if (a % 3600 / 60)
        return cm_buf_printf(out, "GMT%c%ld:%02ld", off < 0 ? '-' : '+', a / 3600, a % 3600 / 60);
    return cm_buf_printf(out, "GMT%c%ld", off < 0 ? '-' : '+', a / 3600);
}

cm_rc cm_gw_ts_format(buf *out, int64_t ts_ms, const gw_ts_opts *o)
{
    static const char *const wd[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const gw_ts_opts dflt;
    if (!o) o = &dflt;
    if (ts_ms <= 0 || o->off) return CM_OK;
    time_t t = (time_t)(ts_ms / 1000);
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    bool utc = o->utc;
    if (!utc && o->zone[0])
        utc = !cm_zone_localtime(o->zone, (int64_t)t, &tm);
    else if (!utc && !localtime_r(&t, &tm))
        utc = true;
    if (utc && !gmtime_r(&t, &tm)) return CM_OK;
    if (tm.tm_wday < 0 || tm.tm_wday > 6) return CM_OK;
    cm_rc rc = cm_buf_printf(out, "%s %04d-%02d-%02d%c%02d:%02d", wd[tm.tm_wday], tm.tm_year + 1900,
                             tm.tm_mon + 1, tm.tm_mday, utc ? 'T' : ' ', tm.tm_hour, tm.tm_min);
    if (rc) return rc;
    if (utc) return cm_buf_addc(out, 'Z');
    CHECK(cm_buf_addc(out, ' '));
    CHECK(add_zone_name(out, &tm, o->zone[0] ? o->zone : NULL));
out:
    return rc;
}

/* ---- the JSON blocks ---------------------------------------------------------- */

/* A JSON object being written with an indent: the next key's separator. */
typedef struct obj {
    buf *b;
    const char *pad; /* the indent of the object's own line */
    int n;
} obj;

static cm_rc key(obj *o, const char *k)
{
    cm_rc rc;
    CHECK(cm_buf_printf(o->b, "%s%s  \"%s\": ", o->n ? ",\n" : "{\n", o->pad, k));
    o->n++;
out:
    return rc;
}

static cm_rc close_obj(obj *o)
{
    return o->n ? cm_buf_printf(o->b, "\n%s}", o->pad) : cm_buf_adds(o->b, "{}");
}

/* s[0..n) cut to max bytes at a character boundary, then "…". */
static cm_rc add_capped(buf *b, const char *s, size_t n, size_t max)
{
    if (n <= max) return cm_utf8_add_json_str(b, s, n);
    size_t cut = max;
    while (cut && ((unsigned char)s[cut] & 0xC0) == 0x80)
        cut--;
    buf tmp = BUF_INIT;
    cm_rc rc;
    CHECK(cm_buf_add(&tmp, s, cut));
    CHECK(cm_buf_adds(&tmp, "…"));
    CHECK(cm_utf8_add_json_str(b, tmp.data, tmp.len));
out:
    cm_buf_release(&tmp);
    return rc;
}

/* "k": s (trimmed; capped when max) when s is not blank. */
static cm_rc str_field(obj *o, const char *k, const char *s, size_t max)
{
    size_t n;
    const char *t = trimmed(s, &n);
    cm_rc rc = CM_OK;
    if (!t) return CM_OK;
    CHECK(key(o, k));
    CHECK(max ? add_capped(o->b, t, n, max) : cm_utf8_add_json_str(o->b, t, n));
out:
    return rc;
}

static cm_rc true_field(obj *o, const char *k, bool on)
{
    cm_rc rc = CM_OK;
    if (!on) return CM_OK;
    CHECK(key(o, k));
    CHECK(cm_buf_adds(o->b, "true"));
out:
    return rc;
}

static cm_rc block(buf *out, const char *header, const buf *json)
{
    cm_rc rc = CM_OK;
    if (out->len) CHECK(cm_buf_adds(out, "\n\n"));
    CHECK(cm_buf_printf(out, "%s\n```json\n", header));
    CHECK(cm_buf_add(out, json->data, json->len));
    CHECK(cm_buf_adds(out, "\n```"));
out:
    return rc;
}

/* The name shown for the sender: name, else username, else id. */
static cm_rc add_label(buf *out, const gw_meta *m)
{
    cm_rc rc = CM_OK;
    buf name = BUF_INIT, user = BUF_INIT;
    size_t n;
    const char *s;
    if ((s = trimmed(m->sender_name, &n))) CHECK(cm_buf_add(&name, s, n));
    if ((s = trimmed(m->sender_username, &n))) CHECK(cm_buf_add(&user, s, n));
    gw_sender who = {name.data, user.data, NULL, NULL, m->sender_id};
    CHECK(cm_gw_sender_label(out, &who));
out:
    cm_buf_release(&name);
    cm_buf_release(&user);
    return rc;
}

cm_rc cm_gw_meta_prefix(buf *out, const gw_meta *m, const gw_ts_opts *o)
{
    cm_rc rc = CM_OK;
    buf j = BUF_INIT, ts = BUF_INIT, label = BUF_INIT, full = BUF_INIT;
    bool console =
        m->channel && (!strcmp(m->channel, "webchat") || !strcmp(m->channel, "terminal"));
    bool ids = m->is_group || (has(m->channel) && !console);
    CHECK(cm_gw_ts_format(&ts, m->ts_ms, o));
    CHECK(cm_buf_adds(&full, ""));

    obj c = {&j, "", 0};
    if (ids) {
        CHECK(str_field(&c, "message_id", m->message_id, GW_META_NAME_MAX));
        CHECK(str_field(&c, "sender_id", m->sender_id, GW_META_NAME_MAX));
    }
    if (m->is_group)
        CHECK(str_field(&c, "conversation_label", m->conversation_label, 2 * GW_META_NAME_MAX));
    if (ids) {
        const char *who = has(m->sender_name) ? m->sender_name
                          : has(m->sender_id) ? m->sender_id
                                              : m->sender_username;
        CHECK(str_field(&c, "sender", who, GW_META_NAME_MAX));
    }
    CHECK(str_field(&c, "timestamp", ts.data, 0));
    if (m->is_group) CHECK(str_field(&c, "group_subject", m->group_subject, GW_META_NAME_MAX));
    CHECK(str_field(&c, "topic_id", m->thread, GW_META_NAME_MAX));
    CHECK(true_field(&c, "is_group_chat", m->is_group));
    CHECK(true_field(&c, "was_mentioned", m->is_group && m->mentioned));
    if (m->nhistory) {
        CHECK(key(&c, "history_count"));
        CHECK(cm_buf_printf(&j, "%zu", m->nhistory));
    }
    if (c.n) {
        CHECK(close_obj(&c));
        CHECK(block(&full, GW_META_CONVERSATION_HEADER, &j));
    }

    if (!console) CHECK(add_label(&label, m)); /* the owner's console: the owner */
    if (label.len) {
        cm_buf_reset(&j);
        obj s = {&j, "", 0};
        CHECK(str_field(&s, "label", label.data, 2 * GW_META_NAME_MAX));
        CHECK(str_field(&s, "id", m->sender_id, GW_META_NAME_MAX));
        CHECK(str_field(&s, "name", m->sender_name, GW_META_NAME_MAX));
        CHECK(str_field(&s, "username", m->sender_username, GW_META_NAME_MAX));
        CHECK(close_obj(&s));
        CHECK(block(&full, GW_META_SENDER_HEADER, &j));
    }

    if (m->nhistory) {
        cm_buf_reset(&j);
        CHECK(cm_buf_adds(&j, "["));
        for (size_t i = 0; i < m->nhistory; i++) {
            const gw_history_entry *e = &m->history[i];
            CHECK(cm_buf_adds(&j, i ? ",\n  " : "\n  "));
            obj h = {&j, "  ", 0};
            if (e->sender && *e->sender) { /* as it was recorded: not trimmed */
                CHECK(key(&h, "sender"));
                CHECK(add_capped(&j, e->sender, strlen(e->sender), 2 * GW_META_NAME_MAX));
            }
            if (e->ts_ms > 0) {
                CHECK(key(&h, "timestamp_ms"));
                CHECK(cm_buf_printf(&j, "%lld", (long long)e->ts_ms));
            }
            CHECK(key(&h, "body"));
            CHECK(cm_utf8_add_json_str(&j, e->body ? e->body : "", e->body ? strlen(e->body) : 0));
            CHECK(close_obj(&h));
        }
        CHECK(cm_buf_adds(&j, "\n]"));
        CHECK(block(&full, GW_META_HISTORY_HEADER, &j));
    }
    CHECK(cm_buf_add(out, full.data, full.len));
out:
    cm_buf_release(&j);
    cm_buf_release(&ts);
    cm_buf_release(&label);
    cm_buf_release(&full);
    return rc;
}

cm_rc cm_gw_meta_sender_label(buf *out, const char *name, const char *username, const char *id)
{
    cm_rc rc = CM_OK;
    size_t nn = 0, un = 0, in = 0;
    const char *n = trimmed(name, &nn), *u = trimmed(username, &un), *i = trimmed(id, &in);
    if (n) CHECK(cm_buf_add(out, n, nn));
    if (u) CHECK(cm_buf_printf(out, n ? " (@%.*s)" : "@%.*s", (int)un, u));
    if (i) CHECK(cm_buf_printf(out, n || u ? " id:%.*s" : "id:%.*s", (int)in, i));
    if (!n && !u && !i) CHECK(cm_buf_adds(out, "id:unknown"));
out:
    return rc;
}
