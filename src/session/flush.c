/*
 * flush.c — the memory flush decision (flush.h).
 */
#include <ctype.h>
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "flush.h"
#include "../base/sha256.h"
#include "../base/jnum.h"
#include "../base/zone.h"

#define TAIL_BYTES (64 * 1024)

/* The seeds' prompts (seed 001), then QuantumClaw's safety hints. */
static const char seed_prompt[] =
    "Write any lasting notes to memory/YYYY-MM-DD.md; reply with NO_REPLY if nothing to store.";
static const char seed_system_prompt[] = "Session nearing compaction. Store durable memories now.";
static const char *const hints[] = {
    "Store durable memories only in memory/YYYY-MM-DD.md (create memory/ if needed).",
    "If memory/YYYY-MM-DD.md already exists, APPEND new content only and do not overwrite "
    "existing entries.",
    "Treat workspace bootstrap/reference files such as MEMORY.md, SOUL.md, TOOLS.md, and "
    "AGENTS.md as read-only during this flush; never overwrite, replace, or edit them.",
};

/* text trimmed, with every missing hint appended, and a NO_REPLY hint. */
static char *with_hints(const char *text)
{
    buf b = BUF_INIT;
    const char *p = text;
    while (isspace((unsigned char)*p))
        p++;
    size_t n = strlen(p);
    while (n && isspace((unsigned char)p[n - 1]))
        n--;
    cm_rc rc = cm_buf_add(&b, p, n);
    for (size_t i = 0; !rc && i < ARRAY_LEN(hints); i++)
        if (!b.data || !strstr(b.data, hints[i]))
            rc = cm_buf_printf(&b, "%s%s", b.len ? "\n\n" : "", hints[i]);
    if (!rc && !strstr(b.data, "NO_REPLY"))
        rc = cm_buf_adds(&b, "\n\nIf no user-visible reply is needed, start with NO_REPLY.");
    if (rc) {
        cm_buf_release(&b);
        return NULL;
    }
    return cm_buf_detach(&b);
}

/* A non-negative integer, or a byte size like "2mb", "512kb", "1.5 MiB". */
static int64_t byte_size(const json_t *v, int64_t dflt)
{
    if (json_is_number(v)) {
        double d = json_number_value(v);
        return isfinite(d) && d >= 0 ? cm_jnum_int64(v, 0, INT64_MAX, dflt) : dflt;
    }
    const char *s = json_string_value(v);
    if (!s) return dflt;
    char *end;
    double d = strtod(s, &end);
    if (end == s || !isfinite(d) || d < 0) return dflt;
    while (isspace((unsigned char)*end))
        end++;
    double mul = 1;
    char u = (char)tolower((unsigned char)*end);
    if (u == 'k')
        mul = 1024;
    else if (u == 'm')
        mul = 1024.0 * 1024;
    else if (u == 'g')
        mul = 1024.0 * 1024 * 1024;
    else if (u != 0 && u != 'b')
        return dflt;
    return (int64_t)floor(d * mul);
}

static int64_t nonneg_int(const json_t *v, int64_t dflt)
{
    if (!json_is_number(v)) return dflt;
    double d = json_number_value(v);
    return isfinite(d) && d >= 0 ? cm_jnum_int64(v, 0, INT64_MAX, dflt) : dflt;
}

cm_rc cm_flush_settings_init(flush_settings *s, const json_t *cfg, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    const json_t *comp =
        json_object_get(json_object_get(json_object_get(cfg, "agents"), "defaults"), "compaction");
    const json_t *mf = json_object_get(comp, "memoryFlush");
    json_t *en = json_object_get(mf, "enabled");
    s->enabled = !json_is_false(en);
    s->soft_threshold = nonneg_int(json_object_get(mf, "softThresholdTokens"), 4000);
    s->force_bytes = byte_size(json_object_get(mf, "forceFlushTranscriptBytes"), 2097152);
    s->reserve_floor = nonneg_int(json_object_get(comp, "reserveTokensFloor"), 20000);
    s->reserve_tokens = nonneg_int(json_object_get(comp, "reserveTokens"), 16384);
    if (s->reserve_tokens < s->reserve_floor) s->reserve_tokens = s->reserve_floor;
    s->keep_recent = nonneg_int(json_object_get(comp, "keepRecentTokens"), 20000);
    if (s->keep_recent <= 0) s->keep_recent = 20000; /* positive only, as QuantumClaw reads it */
    const char *p = json_string_value(json_object_get(mf, "prompt"));
    const char *sp = json_string_value(json_object_get(mf, "systemPrompt"));
    s->prompt = with_hints(p && *p ? p : seed_prompt);
    s->system_prompt = with_hints(sp && *sp ? sp : seed_system_prompt);
    if (!s->prompt || !s->system_prompt) {
        cm_flush_settings_release(s);
        return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    }
    return CM_OK;
}

void cm_flush_settings_release(flush_settings *s)
{
    free(s->prompt);
    free(s->system_prompt);
    s->prompt = s->system_prompt = NULL;
}

/* Broken-down local time of now_ms in tz (NULL or "": UTC; an unknown zone
 * reads as UTC), without touching the process's TZ (base/zone). */
static void local_tm(int64_t now_ms, const char *tz, struct tm *tm)
{
    cm_zone_localtime(tz, now_ms / 1000, tm);
}

cm_rc cm_flush_target_path(int64_t now_ms, const char *tz, buf *out)
{
    struct tm tm;
    local_tm(now_ms, tz, &tm);
    return cm_buf_printf(out, "memory/%04d-%02d-%02d.md", tm.tm_year + 1900, tm.tm_mon + 1,
                         tm.tm_mday);
}

bool cm_flush_is_prompt(const char *text)
{
    /* hints[0] around its date: "<head>YYYY-MM-DD<tail>" */
    const char *h = hints[0], *d = strstr(h, "YYYY-MM-DD");
    if (!text || !d) return false;
    size_t head = (size_t)(d - h);
    for (const char *p = text; (p = strstr(p, "Store durable memories")); p++) {
        if (strncmp(p, h, head)) continue;
        const char *q = p + head;
        int digits = 0;
        for (int i = 0; i < 10 && q[i]; i++)
            digits += (i == 4 || i == 7) ? q[i] == '-' : isdigit((unsigned char)q[i]) != 0;
        if (digits == 10 && !strncmp(q + 10, d + 10, strlen(d + 10))) return true;
    }
    return false;
}

cm_rc cm_flush_prompt_for(const char *prompt, int64_t now_ms, const char *tz, buf *out)
{
    struct tm tm;
    local_tm(now_ms, tz, &tm);
    char date[48], when[64];
    snprintf(date, sizeof date, "%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
    strftime(when, sizeof when, "%A, %B %d, %Y %H:%M", &tm);
    cm_rc rc = CM_OK;
    size_t start = out->len;
    for (const char *p = prompt; *p && !rc;) {
        if (!strncmp(p, "YYYY-MM-DD", 10)) {
            rc = cm_buf_adds(out, date);
            p += 10;
        } else {
            rc = cm_buf_addc(out, *p++);
        }
    }
    while (!rc && out->len > start && isspace((unsigned char)out->data[out->len - 1]))
        out->data[--out->len] = 0;
    if (!rc && !strstr(out->data + start, "Current time:"))
        rc = cm_buf_printf(out, "%sCurrent time: %s (%s)", out->len > start ? "\n" : "", when,
                           tz && *tz ? tz : "UTC");
    return rc;
}

void cm_flush_context_hash(const json_t *messages, char out[17])
{
    buf p = BUF_INIT;
    cm_rc rc = CM_OK;
    size_t n = json_array_size(messages), first = 0, tail = 0;
    /* the last three user/assistant messages */
    for (size_t i = n; i-- > 0 && tail < 3;) {
        const char *role = json_string_value(json_object_get(json_array_get(messages, i), "role"));
        if (role && (!strcmp(role, "user") || !strcmp(role, "assistant"))) {
            tail++;
            first = i;
        }
    }
    rc = cm_buf_printf(&p, "%zu:", n);
    for (size_t i = first, k = 0; !rc && tail && i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!role || (strcmp(role, "user") && strcmp(role, "assistant"))) continue;
        json_t *c = json_object_get(m, "content");
        if (k) rc = cm_buf_addc(&p, '\0');
        if (!rc) rc = cm_buf_printf(&p, "[%zu:%s]", k++, role);
        if (!rc && json_is_string(c)) {
            rc = cm_buf_add(&p, json_string_value(c), json_string_length(c));
        } else if (!rc) {
            char *t = json_dumps(c ? c : json_string(""),
                                 JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
            if (t) rc = cm_buf_adds(&p, t);
            free(t);
        }
    }
    if (rc) cm_buf_reset(&p); /* out of memory: the hash of nothing, which matches no stored hash */
    unsigned char md[32];
    cm_sha256(p.data, p.len, md);
    for (int i = 0; i < 8; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    cm_buf_release(&p);
}

/* The final TAIL_BYTES of path, starting at a line (the whole file when
 * smaller); NULL when unreadable. */
static char *tail_of(const char *path, off_t *size_out)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0) return NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return NULL;
    }
    off_t start = st.st_size > TAIL_BYTES ? st.st_size - TAIL_BYTES : 0;
    size_t len = (size_t)(st.st_size - start);
    char *b = malloc(len + 1);
    ssize_t r = b ? pread(fd, b, len, start) : -1;
    close(fd);
    if (r < 0) {
        free(b);
        return NULL;
    }
    b[r] = 0;
    if (size_out) *size_out = st.st_size;
    if (start > 0) { /* drop the partial first line */
        char *nl = strchr(b, '\n');
        memmove(b, nl ? nl + 1 : b + r, strlen(nl ? nl + 1 : b + r) + 1);
    }
    return b;
}

json_t *cm_flush_transcript_tail(const char *path, size_t max)
{
    json_t *out = json_array();
    char *t = tail_of(path, NULL);
    if (!t || !out) {
        free(t);
        return out;
    }
    /* lines from the end */
    for (char *end = t + strlen(t); end > t && json_array_size(out) < max;) {
        char *s = end;
        while (s > t && s[-1] != '\n')
            s--;
        json_t *rec = json_loadb(s, (size_t)(end - s), 0, NULL);
        json_t *msg = json_object_get(rec, "message");
        json_t *role = json_object_get(msg, "role");
        if (json_is_string(role))
            json_array_insert_new(out, 0,
                                  json_pack("{s:O,s:O}", "role", role, "content",
                                            json_object_get(msg, "content")
                                                ? json_object_get(msg, "content")
                                                : json_null()));
        json_decref(rec);
        end = s > t ? s - 1 : t;
    }
    free(t);
    return out;
}

static double num(const json_t *o, const char *const *keys)
{
    for (; *keys; keys++) {
        json_t *v = json_object_get(o, *keys);
        if (json_is_number(v)) return json_number_value(v);
    }
    return NAN;
}

/* About 4 characters a token: a message's content as JSON. */
static int64_t content_tokens(const json_t *msg)
{
    char *t = json_dumps(json_object_get(msg, "content"), JSON_COMPACT | JSON_ENCODE_ANY);
    int64_t n = t ? (int64_t)(strlen(t) + 3) / 4 : 0;
    free(t);
    return n;
}

/* The last non-zero usage in the transcript's tail: prompt tokens (input +
 * cache read + cache write) and output tokens; *after, an estimate of the
 * user messages and tool outputs written after it (no model call has
 * counted them yet: a turn cut short, a provider that sent no usage). */
static void last_usage(const char *tail, int64_t *prompt, int64_t *output, int64_t *after)
{
    static const char *const in_k[] = {"input",        "inputTokens",   "input_tokens",
                                       "promptTokens", "prompt_tokens", NULL};
    static const char *const out_k[] = {"output",           "outputTokens",      "output_tokens",
                                        "completionTokens", "completion_tokens", NULL};
    static const char *const cr_k[] = {"cacheRead", "cache_read", "cache_read_input_tokens",
                                       "cached_tokens", NULL};
    static const char *const cw_k[] = {"cacheWrite", "cache_write", "cache_creation_input_tokens",
                                       NULL};
    static const char *const tot_k[] = {"total", "totalTokens", "total_tokens", NULL};
    *prompt = *output = *after = 0;
    for (const char *end = tail + strlen(tail); end > tail;) {
        const char *s = end;
        while (s > tail && s[-1] != '\n')
            s--;
        json_t *rec = json_loadb(s, (size_t)(end - s), 0, NULL);
        json_t *u = json_object_get(json_object_get(rec, "message"), "usage");
        if (!u) u = json_object_get(rec, "usage");
        if (json_is_object(u)) {
            double in = num(u, in_k), out = num(u, out_k), cr = num(u, cr_k), cw = num(u, cw_k),
                   tot = num(u, tot_k);
            bool nonzero = (in > 0) || (out > 0) || (cr > 0) || (cw > 0) || (tot > 0);
            if (nonzero) {
                double p = (isfinite(in) && in > 0 ? in : 0) + (isfinite(cr) ? cr : 0) +
                           (isfinite(cw) ? cw : 0);
                *prompt = p > 0 ? (int64_t)p : 0;
                *output = isfinite(out) && out > 0 ? (int64_t)out : 0;
                json_decref(rec);
                return;
            }
        }
        const json_t *m = json_object_get(rec, "message");
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role && (!strcmp(role, "user") || !strcmp(role, "toolResult")))
            *after += content_tokens(m);
        json_decref(rec);
        end = s > tail ? s - 1 : tail;
    }
}

void cm_flush_decide(const flush_settings *s, const flush_input *in, flush_decision *d)
{
    memset(d, 0, sizeof *d);
    d->transcript_bytes = -1;
    const json_t *e = in->entry;
    int64_t cw = in->context_window > 0 ? in->context_window : 200000;
    d->threshold = cw - s->reserve_floor - s->soft_threshold;
    if (!s->enabled) {
        d->why = "memoryFlush.enabled is false";
        return;
    }
    if (!in->writable) {
        d->why = "the workspace is not writable (workspaceAccess is not \"rw\")";
        return;
    }
    if (in->heartbeat) {
        d->why = "heartbeat run";
        return;
    }
    if (!e) {
        d->why = "no session";
        return;
    }
    json_t *tt = json_object_get(e, "totalTokens");
    int64_t persisted = cm_jnum_int64(tt, 0, INT64_MAX, 0);
    bool fresh = persisted > 0 && json_is_true(json_object_get(e, "totalTokensFresh"));
    int64_t t_prompt = 0, t_output = 0, t_after = 0;
    off_t size = 0;
    char *tail = in->transcript ? tail_of(in->transcript, &size) : NULL;
    if (tail) {
        d->transcript_bytes = size;
        last_usage(tail, &t_prompt, &t_output, &t_after);
    }
    /* pi's estimate: about 4 characters a token */
    int64_t estimate = 0;
    if (in->prompt) {
        size_t n = strlen(in->prompt);
        while (n && isspace((unsigned char)in->prompt[n - 1]))
            n--;
        estimate = (int64_t)((n + 3) / 4);
    }
    int64_t base = fresh ? persisted : 0;
    if (t_prompt > base) base = t_prompt;
    if (base > 0) {
        d->tokens = base + t_output;
    } else {
        /* the entry's count, unless it is known to be stale */
        json_t *f = json_object_get(e, "totalTokensFresh");
        d->tokens = persisted > 0 && !json_is_false(f) ? persisted : 0;
    }
    /* what no usage has counted yet: the incoming message (QuantumClaw adds
     * it only to a known count; a long first message counts here too), the
     * tool outputs after the last usage */
    d->tokens += estimate + t_after;
    json_t *cc = json_object_get(e, "compactionCount"),
           *fc = json_object_get(e, "memoryFlushCompactionCount");
    int64_t compactions = cm_jnum_int64(cc, INT64_MIN, INT64_MAX, 0);
    bool flushed_this_cycle =
        json_is_number(fc) && cm_jnum_int64(fc, INT64_MIN, INT64_MAX, 0) == compactions;
    bool by_tokens = d->threshold > 0 && d->tokens > 0 && d->tokens >= d->threshold;
    bool by_size =
        s->force_bytes > 0 && d->transcript_bytes >= 0 && d->transcript_bytes >= s->force_bytes;
    free(tail);
    if (!by_tokens && !by_size) {
        d->why = d->threshold <= 0 ? "the threshold is not positive" : "below the threshold";
        return;
    }
    if (flushed_this_cycle) {
        d->why = "already flushed in this compaction cycle";
        return;
    }
    /* the same context as the last flush: nothing new to store */
    if (in->transcript) {
        json_t *msgs = cm_flush_transcript_tail(in->transcript, 10);
        if (in->prompt && *in->prompt)
            json_array_append_new(msgs,
                                  json_pack("{s:s,s:s}", "role", "user", "content", in->prompt));
        if (json_array_size(msgs)) cm_flush_context_hash(msgs, d->context_hash);
        json_decref(msgs);
        const char *prev = json_string_value(json_object_get(e, "memoryFlushContextHash"));
        if (prev && d->context_hash[0] && !strcmp(prev, d->context_hash)) {
            d->why = "the context has not changed since the last flush";
            return;
        }
    }
    d->due = true;
    d->why = by_tokens ? "the token count reached the threshold"
                       : "the transcript reached forceFlushTranscriptBytes";
}

bool cm_flush_is_silent(const char *reply)
{
    if (!reply) return false;
    while (isspace((unsigned char)*reply))
        reply++;
    if (strncasecmp(reply, "NO_REPLY", 8) != 0) return false;
    for (const char *p = reply + 8; *p; p++)
        if (!isspace((unsigned char)*p)) return false;
    return true;
}
