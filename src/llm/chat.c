/*
 * chat.c — one chat request over HTTP (llm.h): builds the body with the wire
 * format, POSTs it through the shared HTTP client as a streaming transfer,
 * feeds a 2xx event stream to the SSE parser and the format's event handler
 * (or reads a whole JSON answer), and turns anything else into an llm_error
 * with the failure class that drives cooldowns and fallback.
 */
#include <pthread.h>

#include "../base/redact.h"
#include "../net/http.h"
#include "../net/sse.h"
#include "llm.h"
#include "../base/caps.h"

#define ERROR_BODY_MAX CM_CAP_LLM_ERROR_BODY /* what is kept of an error answer */
#define ANSWER_MAX     CM_CAP_LLM_ANSWER     /* a whole answer or one stream event */
#define STREAMED_MAX   CM_CAP_LLM_STREAMED   /* a streamed answer's text + reasoning + arguments */

static const llm_format *const formats[LLM_API_N] = {&cm_llm_openai_format,
                                                     &cm_llm_anthropic_format};
static const char *const api_names[LLM_API_N] = {"openai-completions", "anthropic-messages"};

const char *cm_llm_api_name(llm_api a)
{
    return a >= 0 && a < LLM_API_N ? api_names[a] : "";
}

bool cm_llm_same_model(const llm_message *m, const llm_request *rq, llm_api api)
{
    if (!m->model || !rq->model) return false;
    const char *slash = strchr(m->model, '/');
    if (strcmp(m->model, rq->model) && !(slash && !strcmp(slash + 1, rq->model))) return false;
    if (m->api && strcmp(m->api, cm_llm_api_name(api))) return false;
    if (m->provider && rq->provider && strcmp(m->provider, rq->provider)) return false;
    return true;
}

int cm_llm_api_parse(const char *s)
{
    for (int i = 0; s && i < LLM_API_N; i++)
        if (!strcmp(s, api_names[i])) return i;
    return -1;
}

void cm_llm_response_release(llm_response *r)
{
    cm_buf_release(&r->text);
    cm_buf_release(&r->reasoning);
    for (size_t i = 0; i < r->ncalls; i++) {
        free(r->calls[i].id);
        free(r->calls[i].name);
        free(r->calls[i].arguments);
    }
    free(r->calls);
    for (size_t i = 0; i < r->nthinking; i++) {
        free(r->thinking[i].text);
        free(r->thinking[i].signature);
    }
    free(r->thinking);
    free(r->order);
    memset(r, 0, sizeof *r);
    cm_buf_init(&r->text, 0);
    cm_buf_init(&r->reasoning, 0);
}

bool cm_llm_str_append(llm_stream *st, char **p, const char *s)
{
    size_t have = *p ? strlen(*p) : 0, n = strlen(s);
    if (st && cm_llm_stream_budget(st, n)) return false;
    char *q = realloc(*p, have + n + 1);
    if (!q) return false;
    memcpy(q + have, s, n + 1);
    *p = q;
    return true;
}

cm_rc cm_llm_order_add(llm_response *out, llm_block_kind kind, size_t index)
{
    llm_block *o = realloc(out->order, (out->norder + 1) * sizeof *o);
    if (!o) return CM_ENOMEM;
    out->order = o;
    o[out->norder++] = (llm_block){kind, index};
    return CM_OK;
}

bool cm_llm_thinking_append(llm_stream *st, size_t ti, const char *s, size_t n)
{
    llm_thinking *t = &st->out->thinking[ti];
    if (st->think_at != ti + 1) { /* another block: its length, once */
        st->think_len = t->text ? strlen(t->text) : 0;
        st->think_cap = t->text ? st->think_len + 1 : 0;
        st->think_at = ti + 1;
    }
    if (st->think_len + n + 1 > st->think_cap) { /* grown by doubling */
        size_t cap = CM_MAX(CM_MAX(st->think_cap * 2, st->think_len + n + 1), 64);
        char *q = realloc(t->text, cap);
        if (!q) return false;
        t->text = q;
        st->think_cap = cap;
    }
    memcpy(t->text + st->think_len, s, n);
    st->think_len += n;
    t->text[st->think_len] = 0;
    return true;
}

llm_thinking *cm_llm_thinking_new(llm_response *out)
{
    if (cm_llm_order_add(out, LLM_BLOCK_THINKING, out->nthinking)) return NULL;
    llm_thinking *t = realloc(out->thinking, (out->nthinking + 1) * sizeof *t);
    if (!t) return NULL;
    out->thinking = t;
    t = &t[out->nthinking++];
    memset(t, 0, sizeof *t);
    return t;
}

llm_tool_call *cm_llm_stream_call(llm_stream *st, size_t i)
{
    llm_response *o = st->out;
    if (i >= CM_CAP_LLM_CALLS) {
        st->too_long = true;
        return NULL;
    }
    if (i >= o->ncalls) {
        llm_tool_call *c = realloc(o->calls, (i + 1) * sizeof *c);
        if (!c) return NULL;
        o->calls = c;
        buf *a = realloc(st->args, (i + 1) * sizeof *a);
        if (!a) return NULL;
        st->args = a;
        for (size_t k = o->ncalls; k <= i; k++) {
            memset(&o->calls[k], 0, sizeof o->calls[k]);
            cm_buf_init(&st->args[k], ANSWER_MAX);
        }
        size_t had = o->ncalls;
        o->ncalls = i + 1;
        for (size_t k = had; k <= i; k++)
            if (cm_llm_order_add(o, LLM_BLOCK_CALL, k)) return NULL;
    }
    return &o->calls[i];
}

json_t *cm_llm_json_object(const char *text)
{
    json_t *j = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    if (!json_is_object(j)) {
        json_decref(j);
        j = json_object();
    }
    return j;
}

/* cm_llm_json_object_text's cache: the compact text of the schemas seen
 * last, by their text (any slot; when all are taken, the next in turn is
 * replaced; a schema past the size cap is never kept). The mutex guards
 * only the slots. */
#define SCHEMA_SLOTS 64
#define SCHEMA_MAX   (64 * 1024)
static struct schema_slot {
    uint64_t hash;
    char *text, *compact;
} g_schemas[SCHEMA_SLOTS];
static size_t g_schemas_next; /* the slot replaced next */
static pthread_mutex_t g_schemas_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

cm_rc cm_llm_json_object_text(const char *text, buf *out)
{
    const char *t = text ? text : "";
    size_t n = strlen(t);
    uint64_t h = fnv1a(t);
    cm_rc rc = CM_OK;
    bool hit = false;
    pthread_mutex_lock(&g_schemas_mu);
    for (size_t i = 0; i < SCHEMA_SLOTS && g_schemas[i].text && !hit; i++)
        if (g_schemas[i].hash == h && !strcmp(g_schemas[i].text, t)) {
            hit = true;
            rc = cm_buf_adds(out, g_schemas[i].compact);
        }
    pthread_mutex_unlock(&g_schemas_mu);
    if (hit) return rc;
    json_t *j = cm_llm_json_object(text);
    char *c = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!c) return CM_ENOMEM;
    rc = cm_buf_adds(out, c);
    char *keep = n <= SCHEMA_MAX ? cm_strdup(t) : NULL;
    char *old_text = NULL, *old_compact = c;
    if (keep) {
        pthread_mutex_lock(&g_schemas_mu);
        size_t i = 0;
        while (i < SCHEMA_SLOTS && g_schemas[i].text)
            i++;
        if (i == SCHEMA_SLOTS) i = g_schemas_next++ % SCHEMA_SLOTS;
        old_text = g_schemas[i].text;
        old_compact = g_schemas[i].compact;
        g_schemas[i] = (struct schema_slot){h, keep, c};
        pthread_mutex_unlock(&g_schemas_mu);
    }
    free(old_text);
    free(old_compact);
    return rc;
}

/* Counts n more streamed bytes; CM_ETOOBIG (and too_long) past the cap. */
static cm_rc stream_budget(llm_stream *st, size_t n)
{
    if (n > STREAMED_MAX - st->streamed) {
        st->too_long = true;
        return CM_ETOOBIG;
    }
    st->streamed += n;
    return CM_OK;
}

cm_rc cm_llm_stream_budget(llm_stream *st, size_t n)
{
    return stream_budget(st, n);
}

cm_rc cm_llm_stream_text(llm_stream *st, const char *s, size_t n)
{
    cm_rc rc = stream_budget(st, n);
    if (!rc && n && !st->out->text.len) rc = cm_llm_order_add(st->out, LLM_BLOCK_TEXT, 0);
    if (!rc) rc = cm_buf_add(&st->out->text, s, n);
    if (!rc && st->on_delta) st->on_delta(st->ctx, s, n);
    return rc;
}

cm_rc cm_llm_stream_reasoning(llm_stream *st, const char *s, size_t n)
{
    cm_rc rc = stream_budget(st, n);
    if (!rc) rc = cm_buf_add(&st->out->reasoning, s, n);
    if (!rc && st->on_reasoning) st->on_reasoning(st->reasoning_ctx, s, n);
    return rc;
}

cm_rc cm_llm_stream_args(llm_stream *st, size_t i, const char *s)
{
    size_t n = strlen(s);
    cm_rc rc = stream_budget(st, n);
    return rc ? rc : cm_buf_add(&st->args[i], s, n);
}

typedef struct chat_run {
    const llm_format *fmt;
    llm_stream st;
    sse_parser sse;
    bool streaming; /* the answer is an event stream */
    bool bad;       /* an event could not be read */
    bool decided;   /* streaming decided from the first body bytes */
    buf body;       /* a whole answer, or an error answer (capped) */
    bool (*cancelled)(void *ctx);
    void *cancel_ctx;
    bool stopped; /* the caller cancelled the request */
} chat_run;

/* True (and remembered) once the caller cancels the request. */
static bool S_cancelled(chat_run *r)
{
    if (!r->stopped && r->cancelled && r->cancelled(r->cancel_ctx)) r->stopped = true;
    return r->stopped;
}

static bool on_tick(http_fetch *f)
{
    return !S_cancelled(f->ctx);
}

static bool on_event(void *ctx, const char *event, const char *data, size_t len)
{
    chat_run *r = ctx;
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        r->st.done = true;
        return true;
    }
    json_t *j = json_loadb(data, len, 0, NULL);
    bool ok = r->fmt->event(&r->st, event, j);
    json_decref(j);
    if (!ok && !r->st.too_long) r->bad = true;
    return ok && !r->st.error[0];
}

static bool on_data(http_fetch *f, const char *p, size_t n)
{
    chat_run *r = f->ctx;
    if (S_cancelled(r)) return false;
    if (!r->decided) {
        r->decided = true;
        r->streaming = f->status >= 200 && f->status < 300 &&
                       strcmp(f->content_type, "text/event-stream") == 0;
    }
    if (r->streaming) {
        cm_rc rc = cm_sse_feed(&r->sse, p, n);
        if (rc == CM_ETOOBIG) r->bad = true;
        return rc == CM_OK;
    }
    bool ok = f->status >= 200 && f->status < 300;
    size_t room = (ok ? ANSWER_MAX : ERROR_BODY_MAX) - r->body.len;
    if (cm_buf_add(&r->body, p, CM_MIN(n, room))) return false;
    return ok ? n <= room : true; /* an error body is only cut, never fails the read */
}

/* Streamed tool-call arguments become the calls' JSON text; every call gets
 * an id and a name (maybe empty); the stop reason defaults to "stop". */
static cm_rc finish_calls(chat_run *r, llm_response *out)
{
    for (size_t i = 0; r->st.args && i < out->ncalls; i++) {
        llm_tool_call *c = &out->calls[i];
        if (!c->arguments &&
            !(c->arguments = r->st.args[i].len ? cm_buf_detach(&r->st.args[i]) : cm_strdup("{}")))
            return CM_ENOMEM;
        if (!c->id && !(c->id = cm_strdup(""))) return CM_ENOMEM;
        if (!c->name && !(c->name = cm_strdup(""))) return CM_ENOMEM;
    }
    if (!out->stop_reason[0]) snprintf(out->stop_reason, sizeof out->stop_reason, "stop");
    return CM_OK;
}

static void run_init(chat_run *r, llm_api api, llm_response *out, llm_delta_fn fn, void *ctx)
{
    memset(r, 0, sizeof *r);
    memset(out, 0, sizeof *out);
    cm_buf_init(&out->text, 0);
    cm_buf_init(&out->reasoning, 0);
    r->fmt = formats[api];
    r->st.out = out;
    r->st.on_delta = fn;
    r->st.ctx = ctx;
    cm_sse_init(&r->sse, ANSWER_MAX, on_event, r);
    cm_buf_init(&r->body, ANSWER_MAX);
}

static void run_release(chat_run *r)
{
    for (size_t i = 0; r->st.args && i < r->st.out->ncalls; i++)
        cm_buf_release(&r->st.args[i]);
    free(r->st.args);
    free(r->st.block_call);
    free(r->st.block_think);
    cm_sse_release(&r->sse);
    cm_buf_release(&r->body);
}

cm_rc cm_llm_parse(llm_api api, bool stream, const char *data, size_t n, llm_response *out,
                   char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    chat_run r;
    json_t *doc = NULL;
    if (api < 0 || api >= LLM_API_N) return cm_seterr(err, errlen, CM_EINVAL, "unknown model api");
    run_init(&r, api, out, NULL, NULL);
    if (stream) {
        rc = cm_sse_feed(&r.sse, data, n);
        cm_sse_finish(&r.sse);
        if (r.st.error[0]) FAIL(CM_EIO, "error in the stream");
        if (r.st.too_long) {
            snprintf(out->stop_reason, sizeof out->stop_reason, "length");
            FAIL(CM_ETOOBIG, "the streamed answer is longer than %u bytes", STREAMED_MAX);
        }
        if (rc || r.bad) FAIL(CM_EIO, "unreadable stream event");
        if (!r.st.done) FAIL(CM_EIO, "the stream ended before the answer did");
    } else {
        doc = json_loadb(data, n, 0, NULL);
        if (!doc || !r.fmt->whole(out, doc))
            FAIL(CM_EIO, "not a %s response", cm_llm_api_name(api));
    }
    if (finish_calls(&r, out)) FAIL(CM_ENOMEM, "out of memory");
out:
    json_decref(doc);
    run_release(&r);
    return rc;
}

/* Server text fit for a message: one line, the request's secrets and
 * credential-looking patterns redacted (base/redact), at most max-1 bytes. */
static void clean_text(const redact *rd, const char *s, size_t n, char *out, size_t max)
{
    buf b = BUF_INIT;
    if (cm_redact_text(rd, s, n, 240, &b) == CM_OK)
        snprintf(out, max, "%s", b.data);
    else
        snprintf(out, max, "(unreadable)");
    cm_buf_release(&b);
}

/* The message of an error answer: error.message of the JSON, else the text. */
static void error_text(const buf *b, const redact *rd, char *out, size_t max)
{
    json_t *j = b->len ? json_loadb(b->data, b->len, 0, NULL) : NULL;
    json_t *e = json_object_get(j, "error");
    const char *m = json_string_value(json_object_get(e, "message"));
    if (!m) m = json_string_value(e);
    if (!m) m = json_string_value(json_object_get(j, "message"));
    if (m)
        clean_text(rd, m, strlen(m), out, max);
    else
        clean_text(rd, b->data, b->len, out, max);
    json_decref(j);
}

/* A model call is repeated in place only when the server asks for a short
 * wait (429/5xx with Retry-After ≤ LLM_RETRY_WAIT_MAX_MS) before any byte of
 * the answer arrived; every other failure goes back to the runner, whose
 * failover (another profile or model) and cooldowns decide. */
#define LLM_RETRY_WAIT_MAX_MS 5000L
static http_retry llm_retry(void)
{
    return (http_retry){.max_attempts = 3,
                        .backoff_ms = 250,
                        .max_backoff_ms = LLM_RETRY_WAIT_MAX_MS,
                        .max_retry_after_ms = LLM_RETRY_WAIT_MAX_MS,
                        .longer_fails = true,
                        .only_when_asked = true};
}

cm_rc cm_llm_chat(const llm_endpoint *ep, const llm_request *rq, llm_delta_fn on_delta, void *ctx,
                  llm_response *out, llm_error *e, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf url = BUF_INIT;
    cm_strlist headers = {0};
    char *body = NULL, where[200] = "";
    json_t *doc = NULL;
    chat_run r;
    redact rd;
    cm_redact_init(&rd);
    *e = (llm_error){0, AUTH_R_NONE, -1, false, false};
    if (ep->api < 0 || ep->api >= LLM_API_N) {
        memset(out, 0, sizeof *out);
        cm_buf_init(&out->text, 0);
        cm_buf_init(&out->reasoning, 0);
        return cm_seterr(err, errlen, CM_EINVAL, "unknown model api");
    }
    run_init(&r, ep->api, out, on_delta, ctx);
    r.st.on_reasoning = rq->on_reasoning;
    r.st.reasoning_ctx = rq->reasoning_ctx;
    r.cancelled = rq->cancelled;
    r.cancel_ctx = rq->cancel_ctx;
    if (S_cancelled(&r)) FAIL(CM_ECANCELED, "the request was cancelled");
    if (r.fmt->endpoint(ep, rq, &url, &headers)) FAIL(CM_ENOMEM, "out of memory");
    for (size_t i = 0; ep->headers && i < ep->headers->n; i++)
        if (cm_config_header_set(&headers, ep->headers->v[i])) FAIL(CM_ENOMEM, "out of memory");
    if (cm_config_header_set(&headers, "Content-Type: application/json") ||
        cm_config_header_set(&headers,
                             rq->stream ? "Accept: text/event-stream" : "Accept: application/json"))
        FAIL(CM_ENOMEM, "out of memory");
    if (cm_http_redact_init(&rd, url.data, &headers)) FAIL(CM_ENOMEM, "out of memory");
    cm_redact_url_to(url.data, where, sizeof where);
    /* the body's text written directly where the format can; else (or for
     * what only the tree handles) built as a tree and dumped */
    buf bt = BUF_INIT;
    cm_rc brc = r.fmt->body_text ? r.fmt->body_text(rq, &bt) : CM_EINVAL;
    if (brc == CM_OK) {
        body = cm_buf_detach(&bt);
    } else {
        cm_buf_release(&bt);
        if (brc != CM_EINVAL) FAIL(CM_ENOMEM, "out of memory");
        json_t *j = r.fmt->body(rq);
        body = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
    }
    if (!body) FAIL(CM_ENOMEM, "out of memory");
    http_fetch f = {.url = url.data,
                    .headers = &headers,
                    .body = body,
                    .body_len = strlen(body),
                    .timeout_ms = ep->timeout_ms > 0 ? ep->timeout_ms : 600000,
                    .stall_ms = ep->stall_ms > 0 ? ep->stall_ms : 90000,
                    .on_data = on_data,
                    .on_tick = r.cancelled ? on_tick : NULL,
                    .ctx = &r,
                    .retry = llm_retry()};
    char why[400];
    rc = cm_http_fetch_run(&f, why, sizeof why);
    e->status = f.status;
    e->retry_after_ms = f.retry_after_ms;
    if (rc == CM_ECANCELED && r.stopped) {
        e->reason = AUTH_R_NONE;
        e->retryable = false;
        FAIL(CM_ECANCELED, "%s: the request was cancelled", where);
    }
    if (r.st.too_long) { /* we stopped the read: the answer would not end */
        e->reason = AUTH_R_NONE;
        e->retryable = false;
        snprintf(out->stop_reason, sizeof out->stop_reason, "length");
        FAIL(CM_ETOOBIG, "%s: the streamed answer is longer than %u bytes (text, reasoning and "
             "tool arguments; %zu tool calls at most): stopped",
             where, STREAMED_MAX, (size_t)CM_CAP_LLM_CALLS);
    }
    if (rc == CM_ECANCELED && r.st.error[0]) rc = CM_OK; /* handled below */
    if (rc == CM_ECANCELED && r.bad) {
        e->retryable = true;
        FAIL(CM_EIO, "%s: unreadable stream event", where);
    }
    if (rc == CM_ECANCELED && !r.bad) { /* we stopped the read: not the provider's failure */
        e->reason = AUTH_R_NONE;
        e->retryable = false;
        if (!r.streaming && r.body.len >= ANSWER_MAX)
            FAIL(CM_EIO, "%s: the answer is larger than %u bytes", where, ANSWER_MAX);
        FAIL(CM_ENOMEM, "%s: out of memory reading the answer", where);
    }
    if (rc) {
        e->retryable = f.retryable || rc == CM_EIO;
        e->reason = AUTH_R_TIMEOUT; /* network failures and timeouts */
        /* why is "<url>: <cause>"; the URL is shown as `where` (no userinfo). */
        size_t ul = CM_MIN(strcspn(url.data, "?"), 150);
        const char *cause = strncmp(why, url.data, ul) == 0 && why[ul] == ':' ? why + ul + 2 : why;
        char clean[400];
        clean_text(&rd, cause, strlen(cause), clean, sizeof clean);
        FAIL(rc == CM_ECANCELED ? CM_ECANCELED : CM_EIO, "%s: %s", where, clean);
    }
    if (f.status < 200 || f.status >= 300) {
        char msg[300];
        error_text(&r.body, &rd, msg, sizeof msg);
        e->context_overflow = cm_auth_context_overflow(msg);
        e->reason = e->context_overflow ? AUTH_R_NONE : cm_auth_classify((int)f.status, msg);
        e->retryable = f.status == 429 || f.status >= 500;
        FAIL(CM_EIO, "%s: HTTP %ld%s%s", where, f.status, msg[0] ? ": " : "", msg);
    }
    if (r.streaming) {
        cm_sse_finish(&r.sse);
        if (r.st.error[0]) {
            char msg[300];
            clean_text(&rd, r.st.error, strlen(r.st.error), msg, sizeof msg);
            e->reason = cm_auth_classify(0, msg);
            if (e->reason == AUTH_R_NONE) e->reason = AUTH_R_UNKNOWN;
            e->retryable = true;
            FAIL(CM_EIO, "%s: error in the stream: %s", where, msg);
        }
        if (r.bad) {
            e->retryable = true;
            FAIL(CM_EIO, "%s: unreadable stream event", where);
        }
        if (!r.st.done) {
            e->retryable = true;
            e->reason = AUTH_R_TIMEOUT;
            FAIL(CM_EIO, "%s: the stream ended before the answer did", where);
        }
    } else {
        json_error_t je;
        doc = json_loadb(r.body.data, r.body.len, 0, &je);
        if (!doc || !r.fmt->whole(out, doc)) {
            e->retryable = true;
            FAIL(CM_EIO, "%s: the answer is not a %s response", where, cm_llm_api_name(ep->api));
        }
    }
    if (finish_calls(&r, out)) FAIL(CM_ENOMEM, "out of memory");
out:
    run_release(&r);
    cm_redact_release(&rd);
    json_decref(doc);
    free(body);
    cm_buf_release(&url);
    for (size_t i = 0; i < headers.n; i++)
        free(headers.v[i]);
    free(headers.v);
    return rc;
}
