/*
 * http_channel.c — the gateway's HTTP channel (http_channel.h): inbound
 * messages by POST, replies on server-sent-event streams, by polling and to
 * a callback URL.
 */
#include "http_channel.h"

#include <ctype.h>
#include <pthread.h>
#include <strings.h>
#include <time.h>

#include "../../config/secret.h"
#include "../../net/http.h"
#include "../../net/httpd.h"

#define GW_HTTP_PING_MS 15000
/* Retry-After (seconds) of a POST refused while the journal is full (runs
 * answering the backlog make room) and after a failed journal write (a
 * full disk). */
#define GW_HTTP_RETRY_FULL_S 30
#define GW_HTTP_RETRY_IO_S   10

/* A reply kept for late readers: in its conversation's list (oldest first)
 * and in the channel's list of every kept reply (oldest first), which the
 * byte budget trims. */
typedef struct hreply {
    uint64_t seq;
    char *json;
    size_t bytes;
    struct hconv *conv;
    struct hreply *next;          /* the conversation's next */
    struct hreply *gprev, *gnext; /* the channel's */
} hreply;

typedef struct hconv {
    char *key; /* account \x1f peer \x1f thread */
    hreply *first, *last;
    size_t n;
    uint64_t seq; /* the last reply's */
    uint64_t used;
    struct hconv *next;
} hconv;

#define HC_BUCKETS 1024

typedef struct gw_http {
    gw_channel base;
    char *listen, *token, *callback;
    httpd *srv;
    gw_sink_fn sink;
    void *sink_ctx;
    gw_http_status_fn status;
    void *status_ctx;
    gw_http_route_fn route;
    void *route_ctx;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    hconv *conv[HC_BUCKETS];
    size_t nconv;
    hreply *oldest, *newest; /* every kept reply, by age */
    size_t kept, kept_bytes;
    uint64_t clock;
    bool receiving, closing;
    int inflight; /* sink calls under way (stop waits for them) */
    http_client *cb;
    pthread_mutex_t cb_mu;
} gw_http;

/* ---- conversations -------------------------------------------------------- */

static uint32_t S_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* Forgets c's oldest reply (under mu). */
static void S_reply_drop(gw_http *h, hconv *c)
{
    hreply *r = c->first;
    c->first = r->next;
    if (!c->first) c->last = NULL;
    c->n--;
    if (r->gprev)
        r->gprev->gnext = r->gnext;
    else
        h->oldest = r->gnext;
    if (r->gnext)
        r->gnext->gprev = r->gprev;
    else
        h->newest = r->gprev;
    h->kept--;
    h->kept_bytes -= r->bytes;
    free(r->json);
    free(r);
}

static void S_conv_free(gw_http *h, hconv *c)
{
    while (c->first)
        S_reply_drop(h, c);
    free(c->key);
    free(c);
}

/* Drops the least recently used conversation (under mu). */
static void S_evict(gw_http *h)
{
    hconv **best = NULL;
    for (size_t b = 0; b < HC_BUCKETS; b++)
        for (hconv **p = &h->conv[b]; *p; p = &(*p)->next)
            if (!best || (*p)->used < (*best)->used) best = p;
    if (!best) return;
    hconv *c = *best;
    *best = c->next;
    S_conv_free(h, c);
    h->nconv--;
}

static hconv *S_conv(gw_http *h, const char *key, bool create)
{
    uint32_t b = S_hash(key) % HC_BUCKETS;
    for (hconv *c = h->conv[b]; c; c = c->next)
        if (!strcmp(c->key, key)) {
            c->used = ++h->clock;
            return c;
        }
    if (!create) return NULL;
    if (h->nconv >= GW_HTTP_MAX_CONVS) S_evict(h);
    hconv *c = calloc(1, sizeof *c);
    if (!c || !(c->key = cm_strdup(key))) {
        free(c);
        return NULL;
    }
    c->used = ++h->clock;
    c->next = h->conv[b];
    h->conv[b] = c;
    h->nconv++;
    return c;
}

static cm_rc S_conv_key(buf *k, const char *account, const char *peer, const char *thread)
{
    cm_buf_reset(k);
    return cm_buf_printf(k, "%s\x1f%s\x1f%s", account && *account ? account : "default",
                         peer ? peer : "", thread ? thread : "");
}

/* ---- requests ------------------------------------------------------------- */

static int S_hex(int c)
{
    return isdigit(c) ? c - '0' : isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
}

/* The percent-decoded value of name in query, into out; false when absent. */
static bool S_param(const char *query, const char *name, buf *out)
{
    size_t n = strlen(name);
    cm_buf_reset(out);
    for (const char *p = query; p && *p;) {
        const char *amp = strchr(p, '&'), *end = amp ? amp : p + strlen(p);
        if ((size_t)(end - p) > n && !strncmp(p, name, n) && p[n] == '=') {
            for (const char *q = p + n + 1; q < end; q++) {
                int c = (unsigned char)*q;
                if (c == '+')
                    c = ' ';
                else if (c == '%' && q + 2 < end && S_hex(q[1]) >= 0 && S_hex(q[2]) >= 0) {
                    c = S_hex(q[1]) * 16 + S_hex(q[2]);
                    q += 2;
                }
                if (cm_buf_addc(out, (char)c)) return false;
            }
            return true;
        }
        p = amp ? amp + 1 : NULL;
    }
    return false;
}

static void S_json(httpd_conn *c, int status, json_t *o)
{
    static const char *const hdr[] = {"Content-Type: application/json", NULL};
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s) {
        cm_net_httpd_respond(c, 500, hdr, "{\"error\":\"out of memory\"}", 25);
        return;
    }
    cm_net_httpd_respond(c, status, hdr, s, strlen(s));
    free(s);
}

static void S_error(httpd_conn *c, int status, const char *msg)
{
    S_json(c, status, json_pack("{s:b,s:s}", "accepted", 0, "error", msg));
}

/* A refusal the client should try again after retry_s seconds. */
static void S_error_retry(httpd_conn *c, int status, const char *msg, int retry_s)
{
    char ra[40];
    snprintf(ra, sizeof ra, "Retry-After: %d", retry_s);
    const char *const hdr[] = {"Content-Type: application/json", ra, NULL};
    json_t *o = json_pack("{s:b,s:s,s:i}", "accepted", 0, "error", msg, "retryAfter", retry_s);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (s)
        cm_net_httpd_respond(c, status, hdr, s, strlen(s));
    else
        cm_net_httpd_respond(c, 500, hdr, "{\"error\":\"out of memory\"}", 25);
    free(s);
}

/* Constant-time comparison of the bearer token. */
static bool S_authorized(gw_http *h, const httpd_req *rq)
{
    const char *a = cm_net_httpd_header_get(rq, "authorization");
    if (!a || strncasecmp(a, "Bearer ", 7)) return false;
    a += 7;
    while (*a == ' ')
        a++;
    size_t n = strlen(a), m = strlen(h->token);
    unsigned char diff = (unsigned char)(n != m);
    for (size_t i = 0; i < m; i++)
        diff |= (unsigned char)(h->token[i] ^ (i < n ? a[i] : 0));
    return diff == 0;
}

static const char *S_str(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) && *json_string_value(v) ? json_string_value(v) : NULL;
}

static void S_post_message(gw_http *h, const httpd_req *rq, httpd_conn *c)
{
    json_error_t je;
    json_t *o = json_loadb(rq->body, rq->body_len, 0, &je);
    char idbuf[64];
    if (!json_is_object(o)) {
        json_decref(o);
        return S_error(c, 400, "the body must be a JSON object");
    }
    const char *ch = S_str(o, "channel");
    if (ch && strcmp(ch, "http") && strcmp(ch, "terminal")) {
        json_decref(o);
        return S_error(c, 400, "channel must be \"http\" or \"terminal\"");
    }
    const char *type = S_str(o, "chatType");
    if (type && strcmp(type, "direct") && strcmp(type, "group") && strcmp(type, "channel")) {
        json_decref(o);
        return S_error(c, 400, "chatType must be direct, group or channel");
    }
    const json_t *media = json_object_get(o, "media");
    const json_t *jid = json_object_get(o, "messageId");
    const char *mid = S_str(o, "messageId");
    if (json_is_integer(jid)) {
        snprintf(idbuf, sizeof idbuf, "%lld", (long long)json_integer_value(jid));
        mid = idbuf;
    }
    gw_msg m = {ch ? ch : "http",
                S_str(o, "account"),
                S_str(o, "peer"),
                NULL,
                S_str(o, "thread"),
                mid,
                S_str(o, "sender"),
                json_string_value(json_object_get(o, "text")),
                type && strcmp(type, "direct"),
                (json_is_array(media) && json_array_size(media)) ||
                    (json_is_string(media) && *json_string_value(media)),
                json_is_true(json_object_get(o, "mentioned")),
                NULL,
                NULL,
                NULL,
                0};
    m.sender_name = S_str(o, "senderName");
    m.sender_username = S_str(o, "senderUsername");
    m.chat_title = S_str(o, "chatTitle");
    const json_t *ts = json_object_get(o, "timestamp"); /* Unix ms */
    if (json_is_integer(ts) && json_integer_value(ts) > 0 &&
        json_integer_value(ts) < 253402300800000LL)
        m.ts_ms = (int64_t)json_integer_value(ts);
    if (!m.peer) {
        json_decref(o);
        return S_error(c, 400, "peer is required");
    }
    if (!m.sender && !m.is_group) m.sender = m.peer;
    if ((!m.text || !*m.text) && !m.has_media) {
        json_decref(o);
        return S_error(c, 400, "text or media is required");
    }
    pthread_mutex_lock(&h->mu);
    bool receiving = h->receiving;
    h->inflight += receiving;
    pthread_mutex_unlock(&h->mu);
    cm_rc rc = receiving ? h->sink(h->sink_ctx, &m) : CM_EBUSY;
    if (receiving) {
        pthread_mutex_lock(&h->mu);
        h->inflight--;
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
    }
    /* a refusal never acknowledges: the message was not recorded */
    if (rc == CM_EBUSY)
        S_error(c, 503, "the gateway is shutting down; send again later");
    else if (rc == CM_ERATELIMIT)
        S_error_retry(c, 503, "the gateway has too many unanswered messages; send again later",
                      GW_HTTP_RETRY_FULL_S);
    else if (rc == CM_ETOOBIG)
        S_error(c, 413, "the message is too large for the gateway's journal");
    else if (rc == CM_EIO)
        S_error_retry(c, 503, "the message could not be recorded; send again later",
                      GW_HTTP_RETRY_IO_S);
    else if (rc)
        S_error(c, 500, "the message could not be recorded");
    else
        S_json(c, 202, json_pack("{s:b,s:s*}", "accepted", 1, "messageId", m.message_id));
    json_decref(o);
}

/* The conversation key of a GET's query; false (answered 400) without peer. */
static bool S_query_conv(const httpd_req *rq, httpd_conn *c, buf *key, uint64_t *after)
{
    buf peer = BUF_INIT, acc = BUF_INIT, th = BUF_INIT, a = BUF_INIT;
    bool ok = S_param(rq->query, "peer", &peer) && peer.len;
    S_param(rq->query, "account", &acc);
    S_param(rq->query, "thread", &th);
    *after = UINT64_MAX; /* only new replies */
    if (S_param(rq->query, "after", &a) && a.len) *after = strtoull(a.data, NULL, 10);
    const char *last = cm_net_httpd_header_get(rq, "last-event-id");
    if (last && *last) *after = strtoull(last, NULL, 10);
    if (!ok)
        S_error(c, 400, "peer is required");
    else if (S_conv_key(key, acc.data, peer.data, th.data))
        ok = false, S_error(c, 500, "out of memory");
    cm_buf_release(&peer);
    cm_buf_release(&acc);
    cm_buf_release(&th);
    cm_buf_release(&a);
    return ok;
}

/* Copies the replies of key after seq (under mu) into out; *last the
 * conversation's last seq. */
static void S_collect(gw_http *h, const char *key, uint64_t after, json_t *out, uint64_t *last)
{
    hconv *cv = S_conv(h, key, false);
    *last = cv ? cv->seq : 0;
    if (!cv) return;
    for (const hreply *r = cv->first; r; r = r->next)
        if (r->seq > after) json_array_append_new(out, json_string(r->json));
}

static void S_get_replies(gw_http *h, const httpd_req *rq, httpd_conn *c)
{
    buf key = BUF_INIT;
    uint64_t after, last;
    if (!S_query_conv(rq, c, &key, &after)) goto out;
    if (after == UINT64_MAX) after = 0;
    json_t *texts = json_array(), *list = json_array();
    pthread_mutex_lock(&h->mu);
    S_collect(h, key.data, after, texts, &last);
    pthread_mutex_unlock(&h->mu);
    size_t i;
    json_t *t;
    json_array_foreach(texts, i, t)
        json_array_append_new(list, json_loads(json_string_value(t), 0, NULL));
    json_decref(texts);
    S_json(c, 200, json_pack("{s:o,s:I}", "replies", list, "last", (json_int_t)last));
out:
    cm_buf_release(&key);
}

/* The SSE stream of a conversation: runs on the connection's thread until
 * the client goes or the channel closes. */
static void S_get_events(gw_http *h, const httpd_req *rq, httpd_conn *c)
{
    buf key = BUF_INIT;
    uint64_t after, last;
    if (!S_query_conv(rq, c, &key, &after)) goto out;
    if (cm_net_httpd_sse_begin(c, 200, NULL)) goto out;
    pthread_mutex_lock(&h->mu);
    if (after == UINT64_MAX) {
        hconv *cv = S_conv(h, key.data, true);
        after = cv ? cv->seq : 0;
    }
    int64_t ping = cm_now_ms() + GW_HTTP_PING_MS;
    while (!h->closing && !cm_net_httpd_conn_gone(c)) {
        json_t *texts = json_array();
        S_collect(h, key.data, after, texts, &last);
        if (json_array_size(texts)) {
            pthread_mutex_unlock(&h->mu);
            size_t i;
            json_t *t;
            json_array_foreach(texts, i, t)
            {
                const char *s = json_string_value(t);
                json_t *r = json_loads(s, 0, NULL);
                char id[32];
                snprintf(id, sizeof id, "%llu",
                         (unsigned long long)json_integer_value(json_object_get(r, "seq")));
                json_decref(r);
                cm_net_httpd_sse_event(c, "reply", id, s, strlen(s));
            }
            json_decref(texts);
            after = last;
            pthread_mutex_lock(&h->mu);
            continue;
        }
        json_decref(texts);
        if (cm_now_ms() >= ping) {
            pthread_mutex_unlock(&h->mu);
            cm_net_httpd_sse_comment(c, "ping");
            pthread_mutex_lock(&h->mu);
            ping = cm_now_ms() + GW_HTTP_PING_MS;
        }
        struct timespec ts = cm_deadline_in(CLOCK_MONOTONIC, 250);
        pthread_cond_timedwait(&h->cv, &h->mu, &ts);
    }
    pthread_mutex_unlock(&h->mu);
    cm_net_httpd_sse_end(c);
out:
    cm_buf_release(&key);
}

static void S_handle(void *ctx, const httpd_req *rq, httpd_conn *c)
{
    gw_http *h = ctx;
    bool get = !strcmp(rq->method, "GET"), post = !strcmp(rq->method, "POST");
    if (h->route && h->route(h->route_ctx, rq, c)) return;
    if (get && !strcmp(rq->path, "/healthz")) {
        cm_net_httpd_respond(c, 200, NULL, "ok\n", 3);
        return;
    }
    if (strncmp(rq->path, "/v1/", 4)) return S_error(c, 404, "not found");
    if (!S_authorized(h, rq)) {
        static const char *const hdr[] = {"WWW-Authenticate: Bearer",
                                          "Content-Type: application/json", NULL};
        const char *b = "{\"error\":\"a valid bearer token is required\"}";
        cm_net_httpd_respond(c, 401, hdr, b, strlen(b));
        return;
    }
    if (!strcmp(rq->path, "/v1/messages")) {
        if (!post) return S_error(c, 405, "use POST");
        return S_post_message(h, rq, c);
    }
    if (!get) return S_error(c, 405, "use GET");
    if (!strcmp(rq->path, "/v1/events")) return S_get_events(h, rq, c);
    if (!strcmp(rq->path, "/v1/replies")) return S_get_replies(h, rq, c);
    if (!strcmp(rq->path, "/v1/status")) {
        char *s = h->status ? h->status(h->status_ctx) : NULL;
        static const char *const hdr[] = {"Content-Type: application/json", NULL};
        if (s)
            cm_net_httpd_respond(c, 200, hdr, s, strlen(s));
        else
            S_error(c, 500, "no status");
        free(s);
        return;
    }
    S_error(c, 404, "not found");
}

/* ---- the channel's operations --------------------------------------------- */

static cm_rc S_start(gw_channel *ch, gw_sink_fn sink, void *ctx, char *err, size_t errlen)
{
    gw_http *h = (gw_http *)ch;
    h->sink = sink;
    h->sink_ctx = ctx;
    httpd_opts o = cm_net_httpd_defaults();
    o.listen = h->listen;
    o.handler = S_handle;
    o.ctx = h;
    o.max_body = 1 << 20;
    h->receiving = true;
    cm_rc rc = cm_net_httpd_start(&o, &h->srv, err, errlen);
    if (rc) h->receiving = false;
    return rc;
}

static cm_rc S_send(gw_channel *ch, const gw_outbound *ob, char *err, size_t errlen)
{
    gw_http *h = (gw_http *)ch;
    cm_rc rc = CM_OK;
    buf key = BUF_INIT;
    char *s = NULL;
    pthread_mutex_lock(&h->mu);
    hconv *c =
        S_conv_key(&key, ob->account, ob->peer, ob->thread) ? NULL : S_conv(h, key.data, true);
    if (c) {
        json_t *o =
            json_pack("{s:I,s:s,s:s,s:s*,s:s*,s:s*,s:s}", "seq", (json_int_t)(c->seq + 1),
                      "channel", "http", "account", ob->account ? ob->account : "default", "peer",
                      ob->peer, "thread", ob->thread, "replyTo", ob->reply_to, "text", ob->text);
        s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
    }
    if (!c || !s) {
        pthread_mutex_unlock(&h->mu);
        rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
        goto out;
    }
    hreply *r = calloc(1, sizeof *r);
    if (r && (r->json = cm_strdup(s))) {
        r->seq = ++c->seq;
        r->bytes = sizeof *r + strlen(s) + 1;
        r->conv = c;
        if (c->last)
            c->last->next = r;
        else
            c->first = r;
        c->last = r;
        c->n++;
        r->gprev = h->newest;
        if (h->newest)
            h->newest->gnext = r;
        else
            h->oldest = r;
        h->newest = r;
        h->kept++;
        h->kept_bytes += r->bytes;
        /* the bounds: per conversation, then the oldest replies of all */
        if (c->n > GW_HTTP_KEEP) S_reply_drop(h, c);
        while (h->kept_bytes > GW_HTTP_KEEP_BYTES && h->oldest != r)
            S_reply_drop(h, h->oldest->conv);
    } else {
        free(r);
    }
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    if (h->callback) {
        cm_strlist hdrs = {0};
        const char *ct = "Content-Type: application/json";
        hdrs.v = (char **)&ct;
        hdrs.n = 1;
        http_req q;
        memset(&q, 0, sizeof q);
        q.url = h->callback;
        q.headers = &hdrs;
        q.body = s;
        q.body_len = strlen(s);
        http_opts ho = cm_http_defaults(10000);
        ho.max_attempts = 3;
        pthread_mutex_lock(&h->cb_mu);
        if (!h->cb) rc = cm_http_client_open(&h->cb, err, errlen);
        if (!rc) rc = cm_http_post_all(h->cb, &q, 1, &ho, err, errlen);
        pthread_mutex_unlock(&h->cb_mu);
        if (!rc && (q.status < 200 || q.status >= 300))
            rc = cm_seterr(err, errlen, CM_EIO, "the callback URL answered %ld", q.status);
        cm_buf_release(&q.resp);
    }
out:
    free(s);
    cm_buf_release(&key);
    return rc;
}

static void S_stop(gw_channel *ch)
{
    gw_http *h = (gw_http *)ch;
    pthread_mutex_lock(&h->mu);
    h->receiving = false; /* POSTs get 503; streams go on delivering replies */
    while (h->inflight)   /* the sink is not called after stop returns */
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

static void S_close(gw_channel *ch)
{
    gw_http *h = (gw_http *)ch;
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    h->receiving = false;
    h->closing = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    cm_net_httpd_stop(h->srv, 2000);
    for (size_t b = 0; b < HC_BUCKETS; b++)
        for (hconv *c = h->conv[b], *n; c; c = n) {
            n = c->next;
            S_conv_free(h, c);
        }
    if (h->cb) cm_http_client_close(h->cb);
    pthread_mutex_destroy(&h->mu);
    pthread_mutex_destroy(&h->cb_mu);
    pthread_cond_destroy(&h->cv);
    if (h->token) explicit_bzero(h->token, strlen(h->token));
    free(h->token);
    free(h->listen);
    free(h->callback);
    free(h);
}

static const gw_channel_ops S_ops = {"http", GW_TEXT_LIMIT_HTTP, S_start, S_send, S_stop,
                                     S_close, NULL, NULL, NULL, NULL};

void cm_gw_http_kept(gw_channel *ch, size_t *convs, size_t *replies, size_t *bytes)
{
    gw_http *h = (gw_http *)ch;
    pthread_mutex_lock(&h->mu);
    *convs = h->nconv;
    *replies = h->kept;
    *bytes = h->kept_bytes;
    pthread_mutex_unlock(&h->mu);
}

void cm_gw_http_set_status(gw_channel *ch, gw_http_status_fn fn, void *ctx)
{
    gw_http *h = (gw_http *)ch;
    h->status = fn;
    h->status_ctx = ctx;
}

void cm_gw_http_set_route(gw_channel *ch, gw_http_route_fn fn, void *ctx)
{
    gw_http *h = (gw_http *)ch;
    h->route = fn;
    h->route_ctx = ctx;
}

const char *cm_gw_http_address(gw_channel *ch)
{
    gw_http *h = (gw_http *)ch;
    return h->srv ? cm_net_httpd_addr(h->srv) : NULL;
}

cm_rc cm_gw_http_open(const json_t *root, const char *listen, gw_channel **out, char *err,
                      size_t errlen)
{
    cm_rc rc = CM_OK;
    char why[256];
    *out = NULL;
    gw_http *h = calloc(1, sizeof *h);
    if (!h) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    h->base.ops = &S_ops;
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->cb_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cv, &ca);
    pthread_condattr_destroy(&ca);
    const json_t *gw = json_object_get(root, "gateway");
    const json_t *tok = json_object_get(json_object_get(gw, "auth"), "token");
    const char *env = getenv("QUANTUMCLAW_GATEWAY_TOKEN");
    secrets sec = {{json_object_get(root, "secrets"), NULL}};
    if (tok) {
        if (cm_secret_resolve(&sec, tok, &h->token, why, sizeof why))
            FAIL(CM_ECONFIG, "gateway.auth.token: %s", why);
    } else if (env && *env) {
        h->token = cm_strdup(env);
    }
    if (!h->token || !*h->token)
        FAIL(CM_ECONFIG, "the HTTP channel needs a bearer token: set gateway.auth.token (or "
                         "$QUANTUMCLAW_GATEWAY_TOKEN)");
    if (listen && *listen) {
        h->listen = cm_strdup(listen);
    } else {
        const char *bind = json_string_value(json_object_get(gw, "bind"));
        const char *host = "127.0.0.1";
        if (bind && !strcmp(bind, "lan")) host = "0.0.0.0";
        if (bind && !strcmp(bind, "custom"))
            host = json_string_value(json_object_get(gw, "customBindHost"));
        if (bind && strcmp(bind, "loopback") && strcmp(bind, "lan") && strcmp(bind, "custom") &&
            strcmp(bind, "auto"))
            FAIL(CM_ECONFIG, "gateway.bind: %s is not supported here (loopback, lan, custom)",
                 bind);
        if (!host || !*host)
            FAIL(CM_ECONFIG, "gateway.customBindHost is required with bind custom");
        const json_t *port = json_object_get(gw, "port");
        json_int_t p = json_is_integer(port) ? json_integer_value(port) : GW_HTTP_DEFAULT_PORT;
        if (p < 0 || p > 65535) FAIL(CM_ECONFIG, "gateway.port: expected 0..65535");
        buf l = BUF_INIT;
        if (cm_buf_printf(&l, strchr(host, ':') ? "[%s]:%lld" : "%s:%lld", host, (long long)p))
            FAIL(CM_ENOMEM, "out of memory");
        h->listen = cm_buf_detach(&l);
    }
    const char *cb = json_string_value(
        json_object_get(json_object_get(json_object_get(root, "channels"), "http"), "callbackUrl"));
    if (cb && *cb && !(h->callback = cm_strdup(cb))) FAIL(CM_ENOMEM, "out of memory");
    if (!h->listen) FAIL(CM_ENOMEM, "out of memory");
    *out = &h->base;
    h = NULL;
out:
    if (h) S_close(&h->base);
    return rc;
}
