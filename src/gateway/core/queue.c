/*
 * queue.c — what happens to a message that arrives while its session has an
 * agent run going (messages.queue): interrupt the run, steer it, or queue the
 * message for a followup turn (one by one, or collected into one prompt),
 * with a cap and a drop policy. A pure state machine per session; the caller
 * owns the runs and the clock.
 */
#include "queue.h"

#include <ctype.h>
#include <strings.h>

typedef struct q_item {
    char *prompt, *message_id, *channel, *peer, *account, *thread;
} q_item;

struct gw_queue {
    char *key;
    gw_dedupe *recent;
    q_item *v;
    size_t n, cap;
    int64_t last_enqueued;
    size_t dropped; /* dropped by the cap since the last summary */
    char **lines;   /* their one-line summaries */
    size_t nlines;
    bool force_single; /* collect: a cross-route batch drains one by one */
};

/* ---- settings ----------------------------------------------------------- */

static bool S_is(const char *s, size_t n, const char *word)
{
    return strlen(word) == n && strncasecmp(s, word, n) == 0;
}

static const char *S_trim(const char *s, size_t *n)
{
    while (isspace((unsigned char)*s))
        s++;
    *n = strlen(s);
    while (*n && isspace((unsigned char)s[*n - 1]))
        (*n)--;
    return s;
}

bool cm_gw_queue_mode_parse(const char *s, gw_queue_mode *out)
{
    size_t n;
    if (!s) return false;
    s = S_trim(s, &n);
    if (S_is(s, n, "queue") || S_is(s, n, "queued") || S_is(s, n, "steer") ||
        S_is(s, n, "steering"))
        *out = GW_QMODE_STEER;
    else if (S_is(s, n, "interrupt") || S_is(s, n, "interrupts") || S_is(s, n, "abort"))
        *out = GW_QMODE_INTERRUPT;
    else if (S_is(s, n, "followup") || S_is(s, n, "follow-ups") || S_is(s, n, "followups"))
        *out = GW_QMODE_FOLLOWUP;
    else if (S_is(s, n, "collect") || S_is(s, n, "coalesce"))
        *out = GW_QMODE_COLLECT;
    else if (S_is(s, n, "steer+backlog") || S_is(s, n, "steer-backlog") ||
             S_is(s, n, "steer_backlog"))
        *out = GW_QMODE_STEER_BACKLOG;
    else
        return false;
    return true;
}

bool cm_gw_queue_drop_parse(const char *s, gw_queue_drop *out)
{
    size_t n;
    if (!s) return false;
    s = S_trim(s, &n);
    if (S_is(s, n, "old") || S_is(s, n, "oldest"))
        *out = GW_QDROP_OLD;
    else if (S_is(s, n, "new") || S_is(s, n, "newest"))
        *out = GW_QDROP_NEW;
    else if (S_is(s, n, "summarize") || S_is(s, n, "summary"))
        *out = GW_QDROP_SUMMARIZE;
    else
        return false;
    return true;
}

/* messages.queue.mode's choices (runtime_config.h) as queue modes. */
static gw_queue_mode S_mode_of(int64_t i)
{
    static const gw_queue_mode m[] = {
        GW_QMODE_STEER,         GW_QMODE_FOLLOWUP, GW_QMODE_COLLECT,  GW_QMODE_STEER_BACKLOG,
        GW_QMODE_STEER_BACKLOG, GW_QMODE_STEER,    GW_QMODE_INTERRUPT};
    return i >= 0 && i < (int64_t)ARRAY_LEN(m) ? m[i] : GW_QMODE_COLLECT;
}

void cm_gw_queue_settings_resolve(const cm_rtcfg *cfg, const char *channel,
                                  const gw_queue_override *ov, gw_queue_settings *out)
{
    static const cm_rt_messages none = {.queue_mode = -1,
                                        .queue_drop = -1,
                                        .queue_debounce_ms = CM_RT_UNSET,
                                        .queue_cap = CM_RT_UNSET};
    const cm_rt_messages *q = cfg ? &cfg->messages : &none;
    char ch[128] = "";
    size_t n = 0;
    if (channel) {
        const char *c = S_trim(channel, &n);
        snprintf(ch, sizeof ch, "%.*s", (int)CM_MIN(n, sizeof ch - 1), c);
        for (char *p = ch; *p; p++)
            *p = (char)tolower((unsigned char)*p);
    }
    out->mode = GW_QMODE_COLLECT;
    out->debounce_ms = GW_QUEUE_DEBOUNCE_MS;
    out->cap = GW_QUEUE_CAP;
    out->drop = GW_QDROP_SUMMARIZE;
    int64_t v = -1;
    if (ov && cm_gw_queue_mode_parse(ov->mode, &out->mode))
        ;
    else if (*ch && cm_rt_map_get(&q->queue_by_channel, ch, &v))
        out->mode = S_mode_of(v);
    else if (q->queue_mode >= 0)
        out->mode = S_mode_of(q->queue_mode);
    if (ov && ov->debounce_ms >= 0)
        out->debounce_ms = ov->debounce_ms;
    else if (*ch && cm_rt_map_get(&q->queue_debounce_by_channel, ch, &v))
        out->debounce_ms = v;
    else if (q->queue_debounce_ms != CM_RT_UNSET)
        out->debounce_ms = q->queue_debounce_ms;
    if (ov && ov->cap > 0)
        out->cap = (size_t)ov->cap;
    else if (q->queue_cap != CM_RT_UNSET)
        out->cap = (size_t)q->queue_cap;
    static const gw_queue_drop drops[] = {GW_QDROP_OLD, GW_QDROP_NEW, GW_QDROP_SUMMARIZE};
    if (!(ov && cm_gw_queue_drop_parse(ov->drop, &out->drop)) && q->queue_drop >= 0)
        out->drop = drops[q->queue_drop];
}

static const char *S_mode_name(gw_queue_mode m)
{
    static const char *const names[] = {"collect", "followup", "steer", "steer-backlog",
                                        "interrupt"};
    return names[m];
}

static const char *S_drop_name(gw_queue_drop d)
{
    static const char *const names[] = {"summarize", "old", "new"};
    return names[d];
}

/* A duration such as "1500", "2s", "1.5m" in ms; -1 when unreadable. */
static int64_t S_duration_ms(const char *s, size_t n)
{
    char tmp[64], *end;
    if (n == 0 || n >= sizeof tmp) return -1;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    double v = strtod(tmp, &end);
    if (end == tmp || !(v >= 0)) return -1;
    double unit = 1;
    if (!*end || !strcasecmp(end, "ms"))
        unit = 1;
    else if (!strcasecmp(end, "s"))
        unit = 1000;
    else if (!strcasecmp(end, "m"))
        unit = 60000;
    else if (!strcasecmp(end, "h"))
        unit = 3600000;
    else if (!strcasecmp(end, "d"))
        unit = 86400000;
    else
        return -1;
    v *= unit;
    return v > 9e15 ? -1 : (int64_t)(v + 0.5);
}

bool cm_gw_queue_parse_command(const char *text, gw_queue_override *ov, bool *reset)
{
    memset(ov, 0, sizeof *ov);
    ov->debounce_ms = -1;
    *reset = false;
    if (!text) return false;
    while (isspace((unsigned char)*text))
        text++;
    if (strncasecmp(text, "/queue", 6) != 0) return false;
    const char *p = text + 6;
    if (*p && *p != ':' && !isspace((unsigned char)*p)) return false;
    if (*p == ':') p++;
    for (;;) {
        while (isspace((unsigned char)*p))
            p++;
        const char *t = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        size_t n = (size_t)(p - t);
        if (!n) break;
        gw_queue_mode m;
        gw_queue_drop d;
        char tok[64];
        snprintf(tok, sizeof tok, "%.*s", (int)CM_MIN(n, sizeof tok - 1), t);
        const char *val = tok + strcspn(tok, ":=");
        size_t klen = (size_t)(val - tok);
        if (*val) val++;
        if (S_is(tok, n, "default") || S_is(tok, n, "reset") || S_is(tok, n, "clear")) {
            *reset = true;
            break;
        }
        if (S_is(tok, klen, "debounce") && tok[klen]) {
            int64_t ms = S_duration_ms(val, strlen(val));
            if (ms > 0) ov->debounce_ms = ms;
        } else if (S_is(tok, klen, "cap") && tok[klen]) {
            char *end;
            double c = strtod(val, &end);
            if (end != val && !*end && c >= 1 && c < 1e9) ov->cap = (long)c;
        } else if (S_is(tok, klen, "drop") && tok[klen]) {
            if (cm_gw_queue_drop_parse(val, &d)) ov->drop = S_drop_name(d);
        } else if (n < sizeof tok && cm_gw_queue_mode_parse(tok, &m)) {
            ov->mode = S_mode_name(m);
        } else {
            break;
        }
    }
    return true;
}

/* ---- the queue ---------------------------------------------------------- */

static void S_item_release(q_item *it)
{
    free(it->prompt), free(it->message_id), free(it->channel), free(it->peer);
    free(it->account), free(it->thread);
    memset(it, 0, sizeof *it);
}

void cm_gw_queue_run_release(gw_queue_run *r)
{
    free(r->prompt), free(r->message_id), free(r->channel), free(r->peer);
    free(r->account), free(r->thread);
    memset(r, 0, sizeof *r);
}

static void S_clear_summary(gw_queue *q)
{
    for (size_t i = 0; i < q->nlines; i++)
        free(q->lines[i]);
    q->nlines = 0;
    q->dropped = 0;
}

size_t cm_gw_queue_clear(gw_queue *q)
{
    size_t n = q->n + q->dropped;
    for (size_t i = 0; i < q->n; i++)
        S_item_release(&q->v[i]);
    q->n = 0;
    S_clear_summary(q);
    q->last_enqueued = 0;
    q->force_single = false;
    return n;
}

cm_rc cm_gw_queue_open(const char *session_key, gw_dedupe *recent, gw_queue **out)
{
    *out = NULL;
    gw_queue *q = calloc(1, sizeof *q);
    if (!q || !(q->key = cm_strdup(session_key ? session_key : ""))) {
        free(q);
        return CM_ENOMEM;
    }
    q->recent = recent;
    *out = q;
    return CM_OK;
}

void cm_gw_queue_close(gw_queue *q)
{
    if (!q) return;
    cm_gw_queue_clear(q);
    free(q->v);
    free(q->lines);
    free(q->key);
    free(q);
}

size_t cm_gw_queue_depth(const gw_queue *q)
{
    return q ? q->n : 0;
}

static bool S_eq(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

static bool S_same_route(const q_item *it, const gw_queue_item *m)
{
    return S_eq(it->channel, m->channel) && S_eq(it->peer, m->peer) &&
           S_eq(it->account, m->account) && S_eq(it->thread, m->thread);
}

/* The recently-queued key: session, route and message id. */
static cm_rc S_recent_key(const gw_queue *q, const gw_queue_item *m, buf *b)
{
    return cm_buf_printf(b, "queue\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", q->key,
                         m->channel ? m->channel : "", m->peer ? m->peer : "",
                         m->account ? m->account : "", m->thread ? m->thread : "", m->message_id);
}

/* One summary line: whitespace runs collapsed, trimmed, cut to 160 bytes
 * (at a UTF-8 boundary) with an ellipsis. */
static char *S_summary_line(const char *text)
{
    buf b;
    cm_buf_init(&b, 0);
    bool space = false;
    for (const char *p = text ? text : ""; *p; p++) {
        if (isspace((unsigned char)*p)) {
            space = b.len > 0;
            continue;
        }
        if ((space && cm_buf_addc(&b, ' ')) || cm_buf_addc(&b, *p)) goto fail;
        space = false;
    }
    if (b.len > 160) {
        size_t cut = 159;
        while (cut && ((unsigned char)b.data[cut] & 0xC0) == 0x80)
            cut--;
        while (cut && b.data[cut - 1] == ' ')
            cut--;
        b.len = cut;
        b.data[cut] = 0;
        if (cm_buf_adds(&b, "\xE2\x80\xA6")) goto fail;
    }
    return cm_buf_detach(&b);
fail:
    cm_buf_release(&b);
    return NULL;
}

/* Drops the oldest items so one more fits under the cap; false when the
 * policy refuses the new message instead. */
static bool S_make_room(gw_queue *q, const gw_queue_settings *s)
{
    if (s->cap == 0 || q->n < s->cap) return true;
    if (s->drop == GW_QDROP_NEW) return false;
    size_t k = q->n - s->cap + 1;
    for (size_t i = 0; i < k; i++) {
        if (s->drop == GW_QDROP_SUMMARIZE) {
            q->dropped++;
            char *line = S_summary_line(q->v[i].prompt);
            char **lines = line ? realloc(q->lines, (q->nlines + 1) * sizeof *lines) : NULL;
            if (lines) {
                q->lines = lines;
                q->lines[q->nlines++] = line;
            } else {
                free(line); /* out of memory: the count still says it */
            }
        }
        S_item_release(&q->v[i]);
    }
    memmove(q->v, q->v + k, (q->n - k) * sizeof *q->v);
    q->n -= k;
    while (q->nlines > s->cap) { /* keep the newest cap lines */
        free(q->lines[0]);
        memmove(q->lines, q->lines + 1, (q->nlines - 1) * sizeof *q->lines);
        q->nlines--;
    }
    return true;
}

static char *S_dup(const char *s)
{
    return s ? cm_strdup(s) : NULL;
}

/* enqueueFollowupRun: false when the message is not queued (a duplicate,
 * the cap with drop "new", or out of memory). */
static bool S_enqueue(gw_queue *q, const gw_queue_settings *s, const gw_queue_item *m,
                      int64_t now_ms)
{
    bool ok = false;
    buf key;
    cm_buf_init(&key, 0);
    bool has_id = m->message_id && *m->message_id;
    if (has_id) {
        if (S_recent_key(q, m, &key)) goto out;
        if (q->recent && cm_gw_dedupe_peek(q->recent, key.data, now_ms)) goto out;
        for (size_t i = 0; i < q->n; i++)
            if (S_eq(q->v[i].message_id, m->message_id) && S_same_route(&q->v[i], m)) goto out;
    }
    q->last_enqueued = now_ms;
    if (!S_make_room(q, s)) goto out;
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 4;
        q_item *v = realloc(q->v, cap * sizeof *v);
        if (!v) goto out;
        q->v = v;
        q->cap = cap;
    }
    q_item it = {S_dup(m->prompt ? m->prompt : ""),
                 S_dup(m->message_id),
                 S_dup(m->channel),
                 S_dup(m->peer),
                 S_dup(m->account),
                 S_dup(m->thread)};
    if (!it.prompt || (m->message_id && !it.message_id) || (m->channel && !it.channel) ||
        (m->peer && !it.peer) || (m->account && !it.account) || (m->thread && !it.thread)) {
        S_item_release(&it);
        goto out;
    }
    q->v[q->n++] = it;
    if (has_id && q->recent) cm_gw_dedupe_check(q->recent, key.data, now_ms);
    ok = true;
out:
    cm_buf_release(&key);
    return ok;
}

gw_queue_action cm_gw_queue_on_inbound(gw_queue *q, const gw_queue_settings *s, bool active_run,
                                       bool streaming, bool heartbeat, const gw_queue_item *msg,
                                       int64_t now_ms)
{
    if (!active_run) return GW_QACT_RUN_NOW;
    if (heartbeat) return GW_QACT_DROP;
    switch (s->mode) {
    case GW_QMODE_INTERRUPT:
        cm_gw_queue_clear(q);
        return GW_QACT_INTERRUPT;
    case GW_QMODE_STEER:
        if (streaming) return GW_QACT_STEER;
        return S_enqueue(q, s, msg, now_ms) ? GW_QACT_ENQUEUE : GW_QACT_DROP;
    case GW_QMODE_STEER_BACKLOG:
        if (S_enqueue(q, s, msg, now_ms))
            return streaming ? GW_QACT_STEER_AND_ENQUEUE : GW_QACT_ENQUEUE;
        return streaming ? GW_QACT_STEER : GW_QACT_DROP;
    case GW_QMODE_FOLLOWUP:
    case GW_QMODE_COLLECT:
    default:
        return S_enqueue(q, s, msg, now_ms) ? GW_QACT_ENQUEUE : GW_QACT_DROP;
    }
}

int64_t cm_gw_queue_deadline(const gw_queue *q, const gw_queue_settings *s)
{
    if (!q || (q->n == 0 && q->dropped == 0)) return INT64_MAX;
    return q->last_enqueued + s->debounce_ms;
}

/* hasCrossChannelItems: the queued messages come from more than one route. */
static bool S_cross(const gw_queue *q)
{
    const q_item *first = NULL;
    bool unkeyed = false, distinct = false;
    for (size_t i = 0; i < q->n; i++) {
        const q_item *it = &q->v[i];
        if (!it->channel && !it->peer && !it->account && !it->thread) {
            unkeyed = true;
            continue;
        }
        if (!it->channel || !*it->channel || !it->peer || !*it->peer) return true;
        if (!first)
            first = it;
        else if (!S_eq(first->channel, it->channel) || !S_eq(first->peer, it->peer) ||
                 !S_eq(first->account, it->account) || !S_eq(first->thread, it->thread))
            distinct = true;
    }
    return first && (unkeyed || distinct);
}

/* "[Queue overflow] Dropped N message(s) due to cap." + the summary lines. */
static cm_rc S_summary(const gw_queue *q, buf *b)
{
    cm_rc rc = CM_OK;
    CHECK(cm_buf_printf(b, "[Queue overflow] Dropped %zu message%s due to cap.", q->dropped,
                        q->dropped == 1 ? "" : "s"));
    if (q->nlines) CHECK(cm_buf_adds(b, "\nSummary:"));
    for (size_t i = 0; i < q->nlines; i++)
        CHECK(cm_buf_printf(b, "\n- %s", q->lines[i]));
out:
    return rc;
}

/* Moves item i's route into out (copies). */
static cm_rc S_route(const q_item *it, gw_queue_run *out)
{
    out->message_id = S_dup(it->message_id);
    out->channel = S_dup(it->channel);
    out->peer = S_dup(it->peer);
    out->account = S_dup(it->account);
    out->thread = S_dup(it->thread);
    if ((it->message_id && !out->message_id) || (it->channel && !out->channel) ||
        (it->peer && !out->peer) || (it->account && !out->account) || (it->thread && !out->thread))
        return CM_ENOMEM;
    return CM_OK;
}

static void S_pop_front(gw_queue *q, size_t k)
{
    for (size_t i = 0; i < k; i++)
        S_item_release(&q->v[i]);
    memmove(q->v, q->v + k, (q->n - k) * sizeof *q->v);
    q->n -= k;
}

static size_t S_rtrim(const char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    return n;
}

cm_rc cm_gw_queue_next(gw_queue *q, const gw_queue_settings *s, int64_t now_ms, gw_queue_run *out,
                       bool *ready)
{
    cm_rc rc = CM_OK;
    buf b;
    cm_buf_init(&b, 0);
    memset(out, 0, sizeof *out);
    *ready = false;
    if (q->n == 0 && q->dropped == 0) {
        q->force_single = false;
        goto out;
    }
    if (now_ms - q->last_enqueued < s->debounce_ms) goto out;
    if (s->mode == GW_QMODE_COLLECT && q->n > 0) {
        bool cross = S_cross(q);
        if (cross) q->force_single = true;
        if (!q->force_single) {
            /* every queued message in one prompt, replying to the newest */
            CHECK(cm_buf_adds(&b, "[Queued messages while agent was busy]"));
            if (q->dropped) {
                CHECK(cm_buf_adds(&b, "\n\n"));
                CHECK(S_summary(q, &b));
            }
            for (size_t i = 0; i < q->n; i++)
                CHECK(cm_buf_printf(&b, "\n\n---\nQueued #%zu\n%.*s", i + 1,
                                    (int)S_rtrim(q->v[i].prompt), q->v[i].prompt));
            CHECK(S_route(&q->v[q->n - 1], out));
            out->prompt = cm_buf_detach(&b);
            out->count = q->n;
            S_pop_front(q, q->n);
            S_clear_summary(q);
            *ready = true;
            goto out;
        }
    }
    if (q->dropped) {
        /* the overflow summary is a turn of its own, routed as the oldest
         * queued message (2026.3.22 spends that message on it; here it stays
         * queued for the next turn) */
        CHECK(S_summary(q, &b));
        if (q->n) CHECK(S_route(&q->v[0], out));
        out->prompt = cm_buf_detach(&b);
        S_clear_summary(q);
        *ready = true;
        goto out;
    }
    CHECK(S_route(&q->v[0], out));
    if (!(out->prompt = cm_strdup(q->v[0].prompt))) {
        rc = CM_ENOMEM;
        goto out;
    }
    out->count = 1;
    S_pop_front(q, 1);
    *ready = true;
out:
    if (rc) {
        cm_gw_queue_run_release(out);
        *ready = false;
    }
    cm_buf_release(&b);
    return rc;
}
