/*
 * body.c — envelopes, sender labels, pending group history and inline
 * directive stripping (contracts in body.h). Formats follow 2026.3.22's
 * auto-reply envelope and history code; whitespace is ASCII whitespace.
 */
#include "body.h"

#include <strings.h>
#include <time.h>

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* s[*b..*e) trimmed of whitespace. */
static void trim(const char *s, size_t *b, size_t *e)
{
    while (*b < *e && is_ws(s[*b]))
        (*b)++;
    while (*e > *b && is_ws(s[*e - 1]))
        (*e)--;
}

static bool has_text(const char *s)
{
    size_t b = 0, e = s ? strlen(s) : 0;
    if (s) trim(s, &b, &e);
    return e > b;
}

/* Appends s trimmed, with runs of whitespace as one space and, when header
 * is set, [ ] as ( ). */
static cm_rc add_collapsed(buf *out, const char *s, size_t n, bool header)
{
    cm_rc rc = CM_OK;
    size_t b = 0, e = n;
    trim(s, &b, &e);
    for (size_t i = b; i < e; i++) {
        char c = s[i];
        if (is_ws(c)) {
            while (i + 1 < e && is_ws(s[i + 1]))
                i++;
            c = ' ';
        } else if (header && c == '[') {
            c = '(';
        } else if (header && c == ']') {
            c = ')';
        }
        CHECK(cm_buf_addc(out, c));
    }
out:
    return rc;
}

static cm_rc add_trimmed(buf *out, const char *s)
{
    size_t b = 0, e = strlen(s);
    trim(s, &b, &e);
    return cm_buf_add(out, s + b, e - b);
}

static const char *first_text(const char *a, const char *b, const char *c)
{
    return has_text(a) ? a : has_text(b) ? b : has_text(c) ? c : NULL;
}

cm_rc cm_gw_sender_label(buf *out, const gw_sender *s)
{
    cm_rc rc = CM_OK;
    const char *display = first_text(s->name, s->username, s->tag);
    const char *id = first_text(s->e164, s->id, NULL);
    buf d = BUF_INIT, i = BUF_INIT;
    if (display) CHECK(add_trimmed(&d, display));
    if (id) CHECK(add_trimmed(&i, id));
    if (display && id && strcmp(d.data, i.data) != 0) {
        CHECK(cm_buf_printf(out, "%s (%s)", d.data, i.data));
    } else if (display) {
        CHECK(cm_buf_adds(out, d.data));
    } else if (id) {
        CHECK(cm_buf_adds(out, i.data));
    }
out:
    cm_buf_release(&d);
    cm_buf_release(&i);
    return rc;
}

/* Math.round(a / b) for a >= 0, b > 0. */
static int64_t round_div(int64_t a, int64_t b)
{
    return (2 * a + b) / (2 * b);
}

/* formatTimeAgo without suffix: "45s", "5m", "3h", "2d". */
static cm_rc add_elapsed(buf *out, int64_t ms)
{
    int64_t secs = round_div(ms, 1000), mins = round_div(secs, 60);
    if (mins < 1) return cm_buf_printf(out, "%llds", (long long)secs);
    if (mins < 60) return cm_buf_printf(out, "%lldm", (long long)mins);
    int64_t hours = round_div(mins, 60);
    if (hours < 48) return cm_buf_printf(out, "%lldh", (long long)hours);
    return cm_buf_printf(out, "%lldd", (long long)round_div(hours, 24));
}

static cm_rc add_timestamp(buf *out, int64_t ts_ms, gw_tz tz)
{
    time_t t = (time_t)(ts_ms / 1000);
    struct tm tm;
    char text[96];
    if (tz == GW_TZ_UTC ? !gmtime_r(&t, &tm) : !localtime_r(&t, &tm)) return CM_OK;
    size_t n = strftime(text, sizeof text,
                        tz == GW_TZ_UTC ? "%a %Y-%m-%dT%H:%MZ" : "%a %Y-%m-%d %H:%M %Z", &tm);
    return n ? cm_buf_add(out, text, n) : CM_OK;
}

cm_rc cm_gw_envelope_format(buf *out, const gw_envelope *e, const gw_envelope_opts *o)
{
    cm_rc rc;
    static const gw_envelope_opts defaults = {GW_TZ_LOCAL, false, false};
    buf sender = BUF_INIT, elapsed = BUF_INIT;
    if (!o) o = &defaults;
    if (!o->no_elapsed && e->ts_ms && e->prev_ts_ms && e->ts_ms >= e->prev_ts_ms)
        CHECK(add_elapsed(&elapsed, e->ts_ms - e->prev_ts_ms));
    CHECK(cm_buf_addc(out, '['));
    const char *ch = has_text(e->channel) ? e->channel : "Channel";
    CHECK(add_collapsed(out, ch, strlen(ch), true));
    if (has_text(e->from)) {
        CHECK(cm_buf_addc(out, ' '));
        CHECK(add_collapsed(out, e->from, strlen(e->from), true));
        if (elapsed.len) CHECK(cm_buf_printf(out, " +%s", elapsed.data));
    } else if (elapsed.len) {
        CHECK(cm_buf_printf(out, " +%s", elapsed.data));
    }
    if (!o->no_timestamp && e->ts_ms) {
        CHECK(cm_buf_addc(out, ' '));
        CHECK(add_timestamp(out, e->ts_ms, o->tz));
    }
    CHECK(cm_buf_adds(out, "] "));
    if (has_text(e->sender_label))
        CHECK(add_collapsed(&sender, e->sender_label, strlen(e->sender_label), true));
    if (e->direct && e->from_me)
        CHECK(cm_buf_adds(out, "(self): "));
    else if (!e->direct && sender.len)
        CHECK(cm_buf_printf(out, "%s: ", sender.data));
    CHECK(cm_buf_adds(out, e->body ? e->body : ""));
out:
    cm_buf_release(&sender);
    cm_buf_release(&elapsed);
    return rc;
}

cm_rc cm_gw_from_label(buf *out, bool group, const char *label, const char *id)
{
    cm_rc rc = CM_OK;
    buf l = BUF_INIT, i = BUF_INIT;
    CHECK(cm_buf_adds(&l, ""));
    CHECK(cm_buf_adds(&i, ""));
    if (label) CHECK(add_trimmed(&l, label));
    if (id) CHECK(add_trimmed(&i, id));
    if (group && !l.len) CHECK(cm_buf_adds(&l, "Group"));
    CHECK(cm_buf_adds(out, l.data));
    if (i.len && (group || strcmp(i.data, l.data) != 0))
        CHECK(cm_buf_printf(out, " id:%s", i.data));
out:
    cm_buf_release(&l);
    cm_buf_release(&i);
    return rc;
}

void cm_gw_history_init(gw_history *h, int limit)
{
    memset(h, 0, sizeof *h);
    h->limit = limit < 0 ? GW_HISTORY_LIMIT_DEFAULT : limit;
}

static void entry_release(gw_history_entry *e)
{
    free(e->sender);
    free(e->body);
    free(e->message_id);
}

static void conv_release(gw_history_conv *c)
{
    for (size_t i = 0; i < c->n; i++)
        entry_release(&c->v[i]);
    free(c->v);
    free(c->key);
}

void cm_gw_history_release(gw_history *h)
{
    for (size_t i = 0; i < h->n; i++)
        conv_release(&h->conv[i]);
    free(h->conv);
    memset(h, 0, sizeof *h);
}

static gw_history_conv *conv_find(const gw_history *h, const char *key)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->conv[i].key, key) == 0) return &h->conv[i];
    return NULL;
}

/* Drops the least recently used conversation. */
static void evict_one(gw_history *h)
{
    size_t old = 0;
    for (size_t i = 1; i < h->n; i++)
        if (h->conv[i].used < h->conv[old].used) old = i;
    conv_release(&h->conv[old]);
    h->conv[old] = h->conv[--h->n];
}

cm_rc cm_gw_history_record(gw_history *h, const char *key, const char *sender, const char *body,
                           const char *message_id, int64_t ts_ms)
{
    cm_rc rc = CM_OK;
    if (h->limit <= 0 || !key || !body) return CM_OK;
    gw_history_conv *c = conv_find(h, key);
    if (!c) {
        if (h->n >= GW_HISTORY_MAX_KEYS) evict_one(h);
        if (h->n == h->cap) {
            size_t cap = h->cap ? h->cap * 2 : 8;
            gw_history_conv *v = realloc(h->conv, cap * sizeof *v);
            if (!v) return CM_ENOMEM;
            h->conv = v;
            h->cap = cap;
        }
        c = &h->conv[h->n];
        memset(c, 0, sizeof *c);
        c->v = calloc((size_t)h->limit, sizeof *c->v);
        c->key = cm_strdup(key);
        if (!c->v || !c->key) {
            free(c->v);
            free(c->key);
            return CM_ENOMEM;
        }
        h->n++;
    }
    c->used = ++h->clock;
    gw_history_entry e = {cm_strdup(sender ? sender : ""), cm_strdup(body),
                          message_id ? cm_strdup(message_id) : NULL, ts_ms};
    if (!e.sender || !e.body || (message_id && !e.message_id)) {
        entry_release(&e);
        return CM_ENOMEM;
    }
    if (c->n == (size_t)h->limit) { /* the oldest goes */
        entry_release(&c->v[0]);
        memmove(c->v, c->v + 1, (c->n - 1) * sizeof *c->v);
        c->n--;
    }
    c->v[c->n++] = e;
    return rc;
}

void cm_gw_history_clear(gw_history *h, const char *key)
{
    gw_history_conv *c = key ? conv_find(h, key) : NULL;
    if (!c) return;
    for (size_t i = 0; i < c->n; i++)
        entry_release(&c->v[i]);
    c->n = 0;
}

size_t cm_gw_history_count(const gw_history *h, const char *key)
{
    const gw_history_conv *c = key ? conv_find(h, key) : NULL;
    return c ? c->n : 0;
}

const gw_history_entry *cm_gw_history_entries(const gw_history *h, const char *key, size_t *n)
{
    const gw_history_conv *c = h->limit > 0 && key ? conv_find(h, key) : NULL;
    *n = c ? c->n : 0;
    return *n ? c->v : NULL;
}

cm_rc cm_gw_history_build(buf *out, const gw_history *h, const char *key, const gw_history_fmt *fmt,
                          const char *current)
{
    cm_rc rc = CM_OK;
    buf body = BUF_INIT;
    const gw_history_conv *c = h->limit > 0 && key ? conv_find(h, key) : NULL;
    if (!c || c->n == 0) return cm_buf_adds(out, current);
    CHECK(cm_buf_adds(out, GW_HISTORY_MARKER "\n"));
    for (size_t i = 0; i < c->n; i++) {
        const gw_history_entry *e = &c->v[i];
        cm_buf_reset(&body);
        CHECK(cm_buf_adds(&body, e->body));
        if (e->message_id && *e->message_id) CHECK(cm_buf_printf(&body, " [id:%s]", e->message_id));
        gw_envelope env = {fmt->channel, fmt->from, e->sender, false,
                           false,        e->ts_ms,  0,         body.data};
        CHECK(cm_gw_envelope_format(out, &env, &fmt->opts));
        CHECK(cm_buf_addc(out, '\n'));
    }
    CHECK(cm_buf_adds(out, "\n" GW_CURRENT_MARKER "\n"));
    CHECK(cm_buf_adds(out, current));
out:
    cm_buf_release(&body);
    return rc;
}

enum { DIR_LEVEL, DIR_SIMPLE, DIR_MODEL };

static const struct directive {
    int kind;
    const char *names[3];
} directives[] = {
    {DIR_LEVEL, {"thinking", "think", "t"}}, {DIR_LEVEL, {"verbose", "v", NULL}},
    {DIR_LEVEL, {"fast", NULL, NULL}},       {DIR_LEVEL, {"reasoning", "reason", NULL}},
    {DIR_LEVEL, {"elevated", "elev", NULL}}, {DIR_SIMPLE, {"status", NULL, NULL}},
    {DIR_MODEL, {"model", NULL, NULL}},
};

/* The first "/name" at the start or after whitespace, followed by the end,
 * whitespace or ':': *start is where the match begins (the whitespace before
 * it), *after just past the name. */
static bool find_directive(const char *s, size_t n, const struct directive *d, size_t *start,
                           size_t *after)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '/' || (i > 0 && !is_ws(s[i - 1]))) continue;
        for (size_t k = 0; k < ARRAY_LEN(d->names) && d->names[k]; k++) {
            size_t len = strlen(d->names[k]), j = i + 1 + len;
            if (j > n || strncasecmp(s + i + 1, d->names[k], len) != 0) continue;
            if (j < n && !is_ws(s[j]) && s[j] != ':') continue;
            *start = i > 0 ? i - 1 : 0;
            *after = j;
            return true;
        }
    }
    return false;
}

static bool is_ref_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           strchr("_.:@-", c) != NULL;
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && is_ws(s[i]))
        i++;
    return i;
}

static void copy_word(char *dst, size_t size, const char *s, size_t n)
{
    n = CM_MIN(n, size - 1);
    memcpy(dst, s, n);
    dst[n] = 0;
}

/* Removes directive d from cur (into next); true when it was there. */
static cm_rc strip_one(const struct directive *d, buf *cur, buf *next, gw_directives *found,
                       bool *hit)
{
    cm_rc rc = CM_OK;
    const char *s = cur->data;
    size_t n = cur->len, start, end, word = 0, wlen = 0;
    *hit = find_directive(s, n, d, &start, &end);
    if (!*hit) goto out;
    if (d->kind == DIR_LEVEL) {
        end = skip_ws(s, n, end);
        if (end < n && s[end] == ':') end = skip_ws(s, n, end + 1);
        word = end;
        while (end < n && ((s[end] >= 'A' && s[end] <= 'Z') || (s[end] >= 'a' && s[end] <= 'z') ||
                           s[end] == '-'))
            end++;
        wlen = end - word;
    } else if (d->kind == DIR_SIMPLE) {
        size_t k = skip_ws(s, n, end);
        if (k < n && s[k] == ':') end = skip_ws(s, n, k + 1);
    } else {
        end = skip_ws(s, n, end);
        if (end < n && s[end] == ':') end++;
        end = skip_ws(s, n, end);
        word = end;
        while (end < n && is_ref_char(s[end])) {
            while (end < n && is_ref_char(s[end]))
                end++;
            if (end + 1 < n && s[end] == '/' && is_ref_char(s[end + 1])) end++;
        }
        wlen = end - word;
    }
    if (found) {
        const char *name = d->names[0];
        char *level = NULL;
        size_t size = 32;
        if (strcmp(name, "thinking") == 0) found->think = true, level = found->level_think;
        if (strcmp(name, "verbose") == 0) found->verbose = true, level = found->level_verbose;
        if (strcmp(name, "fast") == 0) found->fast = true, level = found->level_fast;
        if (strcmp(name, "reasoning") == 0) found->reasoning = true, level = found->level_reasoning;
        if (strcmp(name, "elevated") == 0) found->elevated = true, level = found->level_elevated;
        if (strcmp(name, "status") == 0) found->status = true;
        if (strcmp(name, "model") == 0)
            found->model = true, level = found->model_ref, size = sizeof found->model_ref;
        if (level) copy_word(level, size, s + word, wlen);
    }
    cm_buf_reset(next);
    CHECK(cm_buf_add(next, s, start));
    CHECK(cm_buf_addc(next, ' '));
    CHECK(cm_buf_add(next, s + end, n - end));
out:
    return rc;
}

cm_rc cm_gw_directives_strip(buf *out, const char *text, gw_directives *found)
{
    cm_rc rc = CM_OK;
    buf a = BUF_INIT, b = BUF_INIT, *cur = &a, *next = &b;
    bool any = false;
    if (found) memset(found, 0, sizeof *found);
    CHECK(cm_buf_adds(cur, text ? text : ""));
    for (size_t i = 0; i < ARRAY_LEN(directives); i++) {
        bool hit;
        CHECK(strip_one(&directives[i], cur, next, found, &hit));
        if (!hit) continue;
        any = true;
        buf *t = cur;
        cur = next;
        next = t;
    }
    if (any) {
        CHECK(add_collapsed(out, cur->data, cur->len, false));
    } else {
        size_t s = 0, e = cur->len;
        trim(cur->data, &s, &e);
        CHECK(cm_buf_add(out, cur->data + s, e - s));
    }
out:
    cm_buf_release(&a);
    cm_buf_release(&b);
    return rc;
}

cm_rc cm_gw_body_strip_current(buf *out, const char *body, gw_directives *found)
{
    cm_rc rc;
    const char *m = body ? strstr(body, GW_CURRENT_MARKER) : NULL;
    if (!m) return cm_gw_directives_strip(out, body, found);
    /* 2026.3.22 also loses the newline after the marker here; we keep it. */
    CHECK(cm_buf_add(out, body, (size_t)(m - body) + strlen(GW_CURRENT_MARKER)));
    CHECK(cm_buf_addc(out, '\n'));
    CHECK(cm_gw_directives_strip(out, m + strlen(GW_CURRENT_MARKER), found));
out:
    return rc;
}
