/*
 * batch_call.c — what the batch APIs share, below batch.c, batch_files.c
 * and batch_gemini.c: the injectable clock, the split limits, and one HTTP
 * call with retries whose answer is kept or streamed line by line.
 */
#include <stdarg.h>
#include <time.h>

#include "batch_int.h"

/* ---- the clock ------------------------------------------------------------ */

static embed_batch_clock clock_hook;

void cm_embed_batch_set_clock(const embed_batch_clock *c)
{
    if (c)
        clock_hook = *c;
    else
        memset(&clock_hook, 0, sizeof clock_hook);
}

int64_t cm_embed_batch_now(void)
{
    return clock_hook.now_ms ? clock_hook.now_ms(clock_hook.ctx) : cm_now_ms();
}

void cm_embed_batch_sleep(long ms)
{
    if (clock_hook.sleep_ms) {
        clock_hook.sleep_ms(clock_hook.ctx, ms);
        return;
    }
    if (ms <= 0) return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static size_t limit_requests, limit_bytes;

void cm_embed_batch_set_limits(size_t max_requests, size_t max_bytes)
{
    limit_requests = max_requests;
    limit_bytes = max_bytes;
}

size_t cm_embed_batch_max_requests(void)
{
    return limit_requests ? limit_requests : EMBED_BATCH_MAX_REQUESTS;
}

size_t cm_embed_batch_max_bytes(void)
{
    return limit_bytes ? limit_bytes : EMBED_BATCH_FILE_BYTES;
}

/* ---- HTTP ----------------------------------------------------------------- */

#define BATCH_ATTEMPTS    3
#define BATCH_BACKOFF_MS  300
#define BATCH_MAX_ANSWER  ((size_t)16 << 20) /* a status or create answer */
#define BATCH_MAX_LINE    ((size_t)8 << 20)  /* one result line (a vector in JSON) */
#define BATCH_ERROR_BYTES 4096               /* of an error answer, for its message */

typedef struct stream {
    batch_call *c;
    buf line;
    bool delivered; /* a line went to on_line: no retry after this */
    cm_rc rc;
} stream;

static bool on_data(http_fetch *f, const char *p, size_t n)
{
    stream *s = f->ctx;
    batch_call *c = s->c;
    bool ok = f->status >= 200 && f->status < 300;
    if (!ok || !c->on_line) {
        size_t cap = ok ? BATCH_MAX_ANSWER : BATCH_ERROR_BYTES;
        if (c->resp.len + n > cap) {
            if (ok) {
                s->rc = CM_ETOOBIG;
                return false;
            }
            n = cap - c->resp.len; /* an error answer: its start is enough */
        }
        if (n && cm_buf_add(&c->resp, p, n)) {
            s->rc = CM_ENOMEM;
            return false;
        }
        return true;
    }
    while (n) {
        const char *nl = memchr(p, '\n', n);
        size_t take = nl ? (size_t)(nl - p) : n;
        if (s->line.len + take > BATCH_MAX_LINE) {
            s->rc = CM_ETOOBIG;
            return false;
        }
        if (take && cm_buf_add(&s->line, p, take)) {
            s->rc = CM_ENOMEM;
            return false;
        }
        p += take;
        n -= take;
        if (nl) {
            p++;
            n--;
            s->delivered = true;
            if (s->line.len && (s->rc = c->on_line(c->ctx, s->line.data, s->line.len)) != CM_OK)
                return false;
            cm_buf_reset(&s->line);
        }
    }
    return true;
}

void cm_embed_batch_call_release(batch_call *c)
{
    cm_buf_release(&c->resp);
}

cm_rc cm_embed_batch_http(embed_provider *p, batch_call *c, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    cm_strlist h = {NULL, 0};
    stream s = {c, BUF_INIT, false, CM_OK};
    char msg[400] = "";
    for (size_t i = 0; i < p->headers.n; i++)
        CHECK(cm_config_header_set(&h, p->headers.v[i]));
    if (c->ctype) {
        buf ct = BUF_INIT;
        rc = cm_buf_printf(&ct, "Content-Type: %s", c->ctype);
        if (!rc) rc = cm_config_header_set(&h, ct.data);
        cm_buf_release(&ct);
        CHECK(rc);
    }
    if (c->extra_header) CHECK(cm_config_header_set(&h, c->extra_header));
    CHECK(cm_config_header_set(&h, "Expect:")); /* no 100-continue wait on an upload */
    /* the one retry policy (net/http_retry.h): backoff with jitter,
     * Retry-After honoured up to a minute */
    http_retry policy = {BATCH_ATTEMPTS, BATCH_BACKOFF_MS, 60000, 60000, false, false};
    uint64_t seed = (uint64_t)cm_now_ms() ^ (uint64_t)(uintptr_t)c;
    for (int attempt = 1;; attempt++) {
        http_fetch f = {0};
        f.url = c->url;
        f.headers = &h;
        f.body = c->body;
        f.body_len = c->body_len;
        f.timeout_ms = c->body ? 600000 : 0; /* an upload: 10 minutes; a download streams */
        f.on_data = on_data;
        f.ctx = &s;
        cm_buf_reset(&c->resp);
        cm_buf_reset(&s.line);
        s.rc = CM_OK;
        rc = cm_http_fetch_run(&f, msg, sizeof msg);
        c->status = f.status;
        if (s.rc) { /* our callback stopped it */
            rc = s.rc;
            if (rc == CM_ETOOBIG) FAIL(rc, "%s failed: the answer is too large", c->what);
            goto out;
        }
        if (!rc && s.line.len && c->on_line && f.status >= 200 && f.status < 300) {
            s.delivered = true; /* the last line, without a newline */
            CHECK(c->on_line(c->ctx, s.line.data, s.line.len));
        }
        if (!rc && f.status >= 200 && f.status < 300) break;
        bool again = f.retryable && attempt < BATCH_ATTEMPTS && !s.delivered;
        if (again) {
            cm_embed_batch_sleep(cm_http_backoff_ms(&policy, attempt, f.retry_after_ms, &seed));
            continue;
        }
        if (rc) FAIL(CM_EIO, "%s failed: %s", c->what, msg);
        buf shown = BUF_INIT;
        cm_http_error_text(c->url, &h, c->resp.data, c->resp.len, 200, &shown);
        rc = cm_seterr(err, errlen, f.status == 404 ? CM_ENOTFOUND : CM_EIO, "%s failed: %ld %s",
                       c->what, f.status, shown.data);
        cm_buf_release(&shown);
        goto out;
    }
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_buf_release(&s.line);
    for (size_t i = 0; i < h.n; i++)
        free(h.v[i]);
    free(h.v);
    return rc;
}

cm_rc cm_embed_batch_json(const batch_call *c, json_t **out, char *err, size_t errlen)
{
    json_error_t je;
    *out = json_loadb(c->resp.data, c->resp.len, 0, &je);
    if (*out && json_is_object(*out)) return CM_OK;
    json_decref(*out);
    *out = NULL;
    return cm_seterr(err, errlen, CM_EIO, "%s: the answer is not a JSON object", c->what);
}

const char *cm_embed_batch_jstr(json_t *o, ...)
{
    va_list ap;
    va_start(ap, o);
    const char *k;
    while (o && (k = va_arg(ap, const char *)))
        o = json_object_get(o, k);
    va_end(ap);
    return json_string_value(o);
}

void cm_embed_batch_redact(const embed_provider *p, const char *url, char *s, size_t n)
{
    buf out = BUF_INIT;
    if (s[0] && cm_http_error_text(url, &p->headers, s, strlen(s), n - 1, &out) == CM_OK)
        snprintf(s, n, "%s", out.data);
    else if (s[0])
        snprintf(s, n, "[unreadable]");
    cm_buf_release(&out);
}

void cm_embed_batch_copy(char *dst, size_t n, const char *s)
{
    snprintf(dst, n, "%s", s ? s : "");
}
