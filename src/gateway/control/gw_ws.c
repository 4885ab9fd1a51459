/*
 * gw_ws.c — the gateway protocol's connections (gw_ws.h): the upgrade and
 * origin check, the connect handshake and auth, req frames dispatched to
 * gw_methods.c's table with their scope checked, events broadcast, the run
 * wrapper streaming "chat" events, and the "webchat" channel.
 */
#include "gw_ws_int.h"
#include "control_ui.h"
#include "gw_methods.h"

#include <ctype.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "../../base/redact.h"
#include "../../base/utf8.h"
#include "../../config/secret.h"
#include "../../net/wsframe.h"
#include "gw_device.h"

/* ---- sending ---------------------------------------------------------------- */

/* One JSON text frame to one client (o stolen). */
static void S_send(httpd_conn *c, json_t *o)
{
    char *s = o && c ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s) return;
    buf f = BUF_INIT;
    if (!cm_ws_frame_encode(&f, WS_OP_TEXT, s, strlen(s), false, NULL))
        cm_net_httpd_raw_write(c, f.data, f.len);
    cm_buf_release(&f);
    free(s);
}

static void S_send_close(httpd_conn *c, int code, const char *why)
{
    if (!c) return;
    uint8_t p[125];
    size_t n = strnlen(why, sizeof p - 2);
    p[0] = (uint8_t)(code >> 8), p[1] = (uint8_t)code;
    memcpy(p + 2, why, n);
    buf f = BUF_INIT;
    if (!cm_ws_frame_encode(&f, WS_OP_CLOSE, p, n + 2, false, NULL))
        cm_net_httpd_raw_write(c, f.data, f.len);
    cm_buf_release(&f);
}

void cm_gw_ws_ok(gw_ws_client *cl, const char *id, json_t *payload)
{
    S_send(cl->c, json_pack("{s:s,s:s,s:b,s:o}", "type", "res", "id", id, "ok", 1, "payload",
                            payload ? payload : json_object()));
}

void cm_gw_ws_fail(gw_ws_client *cl, const char *id, const char *code, const char *message,
                   json_t *details)
{
    json_t *e = json_pack("{s:s,s:s}", "code", code, "message", message);
    if (e && details) json_object_set_new(e, "details", details);
    else json_decref(details);
    S_send(cl->c, json_pack("{s:s,s:s,s:b,s:o}", "type", "res", "id", id ? id : "", "ok", 0,
                            "error", e));
}

static void S_broadcast(gw_ws *w, const char *event, json_t *payload, bool tools)
{
    gw_ws_client *to[256];
    size_t n = 0;
    pthread_mutex_lock(&w->mu);
    json_t *o = json_pack("{s:s,s:s,s:o,s:I}", "type", "event", "event", event, "payload",
                          payload, "seq", (json_int_t)++w->seq);
    for (gw_ws_client *c = w->clients; c && n < 256; c = c->next)
        if (c->ready && c->scope_read && (!tools || c->tool_events)) {
            c->refs++;
            to[n++] = c;
        }
    pthread_mutex_unlock(&w->mu);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    buf f = BUF_INIT;
    bool framed = s && !cm_ws_frame_encode(&f, WS_OP_TEXT, s, strlen(s), false, NULL);
    for (size_t i = 0; i < n; i++)
        if (framed) cm_net_httpd_raw_write(to[i]->c, f.data, f.len);
    cm_buf_release(&f);
    free(s);
    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; i < n; i++)
        to[i]->refs--;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void cm_gw_ws_broadcast(gw_ws *w, const char *event, json_t *payload)
{
    S_broadcast(w, event, payload, false);
}

void cm_gw_ws_broadcast_tools(gw_ws *w, const char *event, json_t *payload)
{
    S_broadcast(w, event, payload, true);
}

char *cm_gw_ws_session_key(gw_ws *w, const char *key)
{
    buf b = BUF_INIT;
    if (!strncmp(key, "agent:", 6)) return cm_strdup(key);
    if (cm_buf_printf(&b, "agent:%s:%s", w->agent_id0, key)) return NULL;
    return cm_buf_detach(&b);
}

/* ---- the handshake ------------------------------------------------------------ */

static bool S_has_scope(const json_t *scopes, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(scopes, i, v)
    {
        if (json_is_string(v) && !strcmp(json_string_value(v), s)) return true;
    }
    return false;
}

/* Constant-time comparison of two secrets. */
static bool S_secret_eq(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    unsigned char d = na != nb;
    for (size_t i = 0; i < na; i++)
        d |= (unsigned char)(a[i] ^ b[i % (nb ? nb : 1)]);
    return d == 0;
}

/* A client-chosen name for the log: at most 64 of [A-Za-z0-9._:-], the rest
 * as '?' (no control characters or fake log lines). */
static void S_log_name(const char *in, char out[65])
{
    size_t n = 0;
    for (; in && in[n] && n < 64; n++)
        out[n] = isalnum((unsigned char)in[n]) || strchr("._:-", in[n]) ? in[n] : '?';
    out[n] = 0;
}

/* An operator's signed device identity (after its shared secret passed):
 * checked as the reference checks it, then taken as the reference's silent
 * local pairing takes it: from a loopback client that is not a browser
 * page (the Control UI and webchat excepted), with no device token issued.
 * Anywhere else it would need a pairing clawmem does not offer. True: go on. */
static bool S_device(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    json_t *client = json_object_get(p, "client");
    json_t *dev = json_object_get(p, "device");
    char who[65];
    S_log_name(json_string_value(json_object_get(dev, "id")), who);
    gw_device_refusal why;
    if (!json_is_object(dev)) {
        cm_gw_ws_fail(cl, id, "INVALID_REQUEST", "invalid connect params", NULL);
        S_send_close(cl->c, WS_CLOSE_POLICY, "invalid handshake");
        return false;
    }
    if (!cm_gw_device_verify(p, cl->nonce, cm_wall_ms(), &why)) {
        cm_logf(w->o.log, CM_LOG_WARN, "gateway: ws device %.12s refused (%s): %s", who,
                cl->conn_id, why.reason);
        cm_gw_ws_fail(cl, id, "INVALID_REQUEST", why.message,
                      json_pack("{s:s,s:s}", "code", why.code, "reason", why.reason));
        S_send_close(cl->c, WS_CLOSE_POLICY, why.message);
        return false;
    }
    const char *cid = json_string_value(json_object_get(client, "id"));
    const char *cmode = json_string_value(json_object_get(client, "mode"));
    bool page = cl->has_origin && !(cmode && !strcasecmp(cmode, "webchat")) &&
                !(cid && (!strcmp(cid, "openclaw-control-ui") || !strcmp(cid, "webchat-ui") ||
                          !strcmp(cid, "quantumclaw-control-ui") ||
                          !strcmp(cid, "clawmem-control-ui")));
    if (!cl->loopback || page) {
        cm_logf(w->o.log, CM_LOG_WARN, "gateway: ws device %.12s refused (%s): not paired", who,
                cl->conn_id);
        cm_gw_ws_fail(cl, id, "NOT_PAIRED", "pairing required",
                      json_pack("{s:s,s:s}", "code", "PAIRING_REQUIRED", "reason", "not-paired"));
        S_send_close(cl->c, WS_CLOSE_POLICY, "pairing required");
        return false;
    }
    return true;
}

/* The connect req: true when the client may go on. */
static bool S_connect(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    static const char hint[] = "open the dashboard URL and paste the token in Control UI settings";
    json_t *client = json_object_get(p, "client");
    if (!json_is_object(p) || !json_is_integer(json_object_get(p, "minProtocol")) ||
        !json_is_integer(json_object_get(p, "maxProtocol")) || !json_is_object(client) ||
        !json_is_string(json_object_get(client, "id")) ||
        !json_is_string(json_object_get(client, "mode"))) {
        cm_gw_ws_fail(cl, id, "INVALID_REQUEST", "invalid connect params", NULL);
        S_send_close(cl->c, WS_CLOSE_POLICY, "invalid handshake");
        return false;
    }
    json_int_t lo = json_integer_value(json_object_get(p, "minProtocol"));
    json_int_t hi = json_integer_value(json_object_get(p, "maxProtocol"));
    if (hi < GW_WS_PROTOCOL || lo > GW_WS_PROTOCOL) {
        cm_gw_ws_fail(cl, id, "INVALID_REQUEST", "protocol mismatch",
                      json_pack("{s:i}", "expectedProtocol", GW_WS_PROTOCOL));
        S_send_close(cl->c, WS_CLOSE_PROTOCOL, "protocol mismatch");
        return false;
    }
    const char *role = json_string_value(json_object_get(p, "role"));
    if (!role) role = "operator";
    if (strcmp(role, "operator") && strcmp(role, "node")) {
        cm_gw_ws_fail(cl, id, "INVALID_REQUEST", "invalid role", NULL);
        S_send_close(cl->c, WS_CLOSE_POLICY, "invalid role");
        return false;
    }
    /* auth first, as the reference does */
    json_t *auth = json_object_get(p, "auth");
    const char *given = NULL, *reason = NULL, *code = NULL;
    if (w->mode == GW_AUTH_TOKEN) {
        given = json_string_value(json_object_get(auth, "token"));
        if (!given || !*given)
            reason = "gateway token missing", code = "AUTH_TOKEN_MISSING";
        else if (!S_secret_eq(given, w->token))
            reason = "gateway token mismatch", code = "AUTH_TOKEN_MISMATCH";
    } else if (w->mode == GW_AUTH_PASSWORD) {
        given = json_string_value(json_object_get(auth, "password"));
        if (!given || !*given)
            reason = "gateway password missing", code = "AUTH_PASSWORD_MISSING";
        else if (!S_secret_eq(given, w->password))
            reason = "gateway password mismatch", code = "AUTH_PASSWORD_MISMATCH";
    }
    if (reason) {
        char msg[256];
        snprintf(msg, sizeof msg, "unauthorized: %s (%s)", reason,
                 w->mode == GW_AUTH_PASSWORD ? "enter the password in Control UI settings" : hint);
        char who[65];
        S_log_name(json_string_value(json_object_get(client, "id")), who);
        cm_logf(w->o.log, CM_LOG_WARN, "gateway: ws client %s refused (%s): %s", who, cl->conn_id,
                reason);
        cm_gw_ws_fail(cl, id, "INVALID_REQUEST", msg,
                      json_pack("{s:s,s:b,s:s}", "code", code, "canRetryWithDeviceToken", 0,
                                "recommendedNextStep", "update_auth_credentials"));
        S_send_close(cl->c, WS_CLOSE_POLICY, "unauthorized");
        return false;
    }
    /* nodes need a pairing we do not offer */
    json_t *dev = json_object_get(p, "device");
    if (!strcmp(role, "node")) {
        bool has = json_is_object(dev);
        cm_gw_ws_fail(cl, id, "NOT_PAIRED", has ? "pairing required" : "device identity required",
                      json_pack("{s:s}", "code",
                                has ? "PAIRING_REQUIRED" : "DEVICE_IDENTITY_REQUIRED"));
        S_send_close(cl->c, WS_CLOSE_POLICY,
                     has ? "pairing required" : "device identity required");
        return false;
    }
    if (dev && !S_device(w, cl, id, p)) return false;
    json_t *scopes = json_object_get(p, "scopes");
    /* the reference's isWebchatClient, its Control UI excepted */
    const char *cmode = json_string_value(json_object_get(client, "mode"));
    const char *cid = json_string_value(json_object_get(client, "id"));
    cl->webchat = ((cmode && !strcasecmp(cmode, "webchat")) ||
                   (cid && !strcmp(cid, "webchat-ui"))) &&
                  !(cid && (!strcmp(cid, "openclaw-control-ui") ||
                            !strcmp(cid, "quantumclaw-control-ui") ||
                            !strcmp(cid, "clawmem-control-ui")));
    cl->tool_events = S_has_scope(json_object_get(p, "caps"), "tool-events");
    cl->scope_admin = S_has_scope(scopes, "operator.admin");
    cl->scope_write = cl->scope_admin || S_has_scope(scopes, "operator.write");
    cl->scope_read = cl->scope_write || S_has_scope(scopes, "operator.read");
    json_t *methods = json_array();
    for (const gw_ws_method *m = cm_gw_ws_methods; m->name; m++)
        json_array_append_new(methods, json_string(m->name));
    json_t *hello = json_pack(
        "{s:s,s:i,s:{s:s,s:s},s:{s:o,s:[sssss]},s:{s:I,s:I,s:i},s:{s:s,s:o}}", "type", "hello-ok",
        "protocol", GW_WS_PROTOCOL, "server", "version", w->o.version ? w->o.version : "",
        "connId", cl->conn_id, "features", "methods", methods, "events", "connect.challenge",
        "agent", "chat", "tick", "sessions.changed", "policy", "maxPayload", (json_int_t)GW_WS_MAX_PAYLOAD,
        "maxBufferedBytes", (json_int_t)GW_WS_MAX_PAYLOAD * 2, "tickIntervalMs", GW_WS_TICK_MS,
        "auth", "role", "operator", "scopes", json_incref(scopes ? scopes : json_array()));
    if (!scopes) json_decref(json_object_get(json_object_get(hello, "auth"), "scopes"));
    cm_gw_ws_ok(cl, id, hello);
    char who[65];
    S_log_name(json_string_value(json_object_get(client, "id")), who);
    cm_logf(w->o.log, CM_LOG_INFO, "gateway: ws client %s connected (%s, scopes %s)", who,
            cl->conn_id,
            cl->scope_admin   ? "admin"
            : cl->scope_write ? "read, write"
            : cl->scope_read  ? "read"
                              : "none");
    pthread_mutex_lock(&w->mu);
    cl->ready = true;
    pthread_mutex_unlock(&w->mu);
    return true;
}

bool cm_gw_ws_message(gw_ws *w, gw_ws_client *cl, const char *text, size_t n)
{
    json_t *f = json_loadb(text, n, 0, NULL);
    const char *type = json_string_value(json_object_get(f, "type"));
    const char *id = json_string_value(json_object_get(f, "id"));
    const char *method = json_string_value(json_object_get(f, "method"));
    json_t *params = json_object_get(f, "params");
    bool go = true;
    if (!json_is_object(f) || !type || strcmp(type, "req") || !id || !method) {
        if (!cl->ready) {
            S_send_close(cl->c, WS_CLOSE_POLICY, "invalid handshake");
            go = false;
        } else {
            cm_gw_ws_fail(cl, id, "INVALID_REQUEST", "invalid request frame", NULL);
        }
        goto out;
    }
    if (!cl->ready) {
        if (strcmp(method, "connect")) {
            cm_gw_ws_fail(cl, id, "INVALID_REQUEST",
                          "invalid handshake: first request must be connect", NULL);
            S_send_close(cl->c, WS_CLOSE_POLICY, "invalid handshake");
            go = false;
        } else {
            go = S_connect(w, cl, id, params);
        }
        goto out;
    }
    const gw_ws_method *m = cm_gw_ws_methods;
    while (m->name && strcmp(m->name, method))
        m++;
    if (!m->name) {
        char msg[160];
        snprintf(msg, sizeof msg, "unknown method: %.100s", method);
        cm_gw_ws_fail(cl, id, "INVALID_REQUEST", msg, NULL);
        goto out;
    }
    bool allowed = m->scope == GW_SCOPE_READ    ? cl->scope_read
                   : m->scope == GW_SCOPE_WRITE ? cl->scope_write
                                                : cl->scope_admin;
    if (!allowed) {
        cm_gw_ws_fail(cl, id, "INVALID_REQUEST",
                      m->scope == GW_SCOPE_READ    ? "missing scope: operator.read"
                      : m->scope == GW_SCOPE_WRITE ? "missing scope: operator.write"
                                                   : "missing scope: operator.admin",
                      NULL);
        goto out;
    }
    m->fn(w, cl, id, json_is_object(params) ? params : NULL);
out:
    json_decref(f);
    return go;
}

/* ---- the connection ----------------------------------------------------------- */

static void S_serve(gw_ws *w, httpd_conn *c, bool loopback, bool has_origin)
{
    gw_ws_client cl;
    memset(&cl, 0, sizeof cl);
    cl.c = c;
    cl.loopback = loopback;
    cl.has_origin = has_origin;
    buf in, msg;
    cm_buf_init(&in, GW_WS_MAX_PAYLOAD + 64);
    cm_buf_init(&msg, GW_WS_MAX_PAYLOAD);
    int msg_op = 0; /* the opcode of a fragmented message under way, 0: none */
    pthread_mutex_lock(&w->mu);
    snprintf(cl.conn_id, sizeof cl.conn_id, "c%llu-%llx", (unsigned long long)++w->counter,
             (unsigned long long)(cm_wall_ms() ^ (int64_t)getpid()));
    cl.next = w->clients;
    w->clients = &cl;
    pthread_mutex_unlock(&w->mu);
    snprintf(cl.nonce, sizeof cl.nonce, "%s-%llx", cl.conn_id, (unsigned long long)cm_now_ms());
    S_send(c, json_pack("{s:s,s:s,s:{s:s,s:I}}", "type", "event", "event", "connect.challenge",
                        "payload", "nonce", cl.nonce, "ts", (json_int_t)cm_wall_ms()));
    int64_t handshake_end = cm_now_ms() + GW_WS_HANDSHAKE_MS;
    for (;;) {
        if (cm_buf_grow(&in, 16384)) {
            S_send_close(c, WS_CLOSE_TOO_BIG, "message too big");
            break;
        }
        int wait = cl.ready ? GW_WS_TICK_MS : (int)CM_MAX(handshake_end - cm_now_ms(), 1);
        long r = cm_net_httpd_raw_read(c, in.data + in.len, in.cap - in.len - 1, wait);
        if (r < 0) break;
        if (r == 0) {
            if (!cl.ready) {
                S_send_close(c, WS_CLOSE_POLICY, "handshake timeout");
                break;
            }
            S_send(c, json_pack("{s:s,s:s,s:{s:I}}", "type", "event", "event", "tick", "payload",
                                "ts", (json_int_t)cm_wall_ms()));
            continue;
        }
        in.len += (size_t)r;
        bool go = true;
        size_t at = 0;
        while (go) {
            ws_frame fr;
            long k = cm_ws_frame_parse((uint8_t *)in.data + at, in.len - at, true,
                                       GW_WS_MAX_PAYLOAD, &fr);
            if (k == 0) break;
            if (k < 0) {
                S_send_close(c, (int)-k, k == -WS_CLOSE_TOO_BIG ? "too big" : "protocol error");
                go = false;
                break;
            }
            at += (size_t)k;
            if (fr.opcode == WS_OP_CLOSE) {
                S_send_close(c, WS_CLOSE_NORMAL, "");
                go = false;
            } else if (fr.opcode == WS_OP_PING) {
                buf f = BUF_INIT;
                if (!cm_ws_frame_encode(&f, WS_OP_PONG, fr.payload, fr.len, false, NULL))
                    cm_net_httpd_raw_write(c, f.data, f.len);
                cm_buf_release(&f);
            } else if (fr.opcode == WS_OP_PONG) {
                continue;
            } else if ((fr.opcode == WS_OP_CONT) != (msg_op != 0)) {
                S_send_close(c, WS_CLOSE_PROTOCOL, "bad continuation");
                go = false;
            } else {
                if (fr.opcode != WS_OP_CONT) msg_op = fr.opcode;
                if (cm_buf_add(&msg, fr.payload, fr.len)) {
                    S_send_close(c, WS_CLOSE_TOO_BIG, "message too big");
                    go = false;
                } else if (fr.fin) {
                    if (msg_op == WS_OP_BINARY) {
                        S_send_close(c, WS_CLOSE_BAD_DATA, "text frames only");
                        go = false;
                    } else {
                        go = cm_gw_ws_message(w, &cl, msg.data, msg.len);
                    }
                    cm_buf_reset(&msg);
                    msg_op = 0;
                }
            }
        }
        if (!go) break;
        memmove(in.data, in.data + at, in.len - at);
        in.len -= at;
    }
    pthread_mutex_lock(&w->mu);
    for (gw_ws_client **p = &w->clients; *p; p = &(*p)->next)
        if (*p == &cl) {
            *p = cl.next;
            break;
        }
    while (cl.refs)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    if (cl.ready) cm_logf(w->o.log, CM_LOG_INFO, "gateway: ws client gone (%s)", cl.conn_id);
    cm_buf_release(&in);
    cm_buf_release(&msg);
}

/* The host part of an origin or Host value compared without case. */
bool cm_gw_ws_origin_ok(const char *origin, const char *host, const json_t *allowed)
{
    if (!origin) return true; /* not a browser: the token decides */
    size_t i;
    json_t *v;
    json_array_foreach(allowed, i, v)
    {
        const char *a = json_string_value(v);
        if (a && (!strcmp(a, "*") || !strcasecmp(a, origin))) return true;
    }
    if (!host || !*host) return false;
    const char *rest = !strncasecmp(origin, "http://", 7)    ? origin + 7
                       : !strncasecmp(origin, "https://", 8) ? origin + 8
                                                             : NULL;
    return rest && !strcasecmp(rest, host);
}

static bool S_upgrade(gw_ws *w, const httpd_req *rq, httpd_conn *c)
{
    static const char *const json_hdr[] = {"Content-Type: text/plain; charset=utf-8", NULL};
    const char *up = cm_net_httpd_header_get(rq, "Upgrade");
    const char *key = cm_net_httpd_header_get(rq, "Sec-WebSocket-Key");
    const char *ver = cm_net_httpd_header_get(rq, "Sec-WebSocket-Version");
    if (strcmp(rq->method, "GET") || !key || strlen(key) != 24) {
        cm_net_httpd_respond(c, 400, json_hdr, "bad websocket upgrade\n", 22);
        return true;
    }
    if (!ver || strcmp(ver, "13")) {
        static const char *const h[] = {"Sec-WebSocket-Version: 13", NULL};
        cm_net_httpd_respond(c, 426, h, "", 0);
        return true;
    }
    (void)up;
    if (!cm_gw_ws_origin_ok(cm_net_httpd_header_get(rq, "Origin"),
                            cm_net_httpd_header_get(rq, "Host"), w->allowed_origins)) {
        cm_net_httpd_respond(c, 403, json_hdr, "origin not allowed\n", 19);
        return true;
    }
    char accept[29], line[64];
    cm_ws_accept_key(key, accept);
    snprintf(line, sizeof line, "Sec-WebSocket-Accept: %s", accept);
    const char *const h[] = {"Upgrade: websocket", "Connection: Upgrade", line, NULL};
    if (cm_net_httpd_upgrade(c, h)) return true;
    const char *peer = rq->peer ? rq->peer : "";
    bool loopback = !strncmp(peer, "127.", 4) || !strncmp(peer, "[::1]", 5) ||
                    !strncmp(peer, "[::ffff:127.", 12);
    S_serve(w, c, loopback, cm_net_httpd_header_get(rq, "Origin") != NULL);
    return true;
}

bool cm_gw_ws_route(void *ctx, const httpd_req *rq, httpd_conn *c)
{
    gw_ws *w = ctx;
    const char *up = cm_net_httpd_header_get(rq, "Upgrade");
    if (up && !strcasecmp(up, "websocket")) return S_upgrade(w, rq, c);
    if (!w->ui_enabled) return false;
    return cm_gw_ui_serve(w->base_path, rq, c);
}

/* ---- runs ---------------------------------------------------------------------- */

typedef struct run_tap {
    gw_ws *w;
    const gw_run_req *rq;
    const char *run_id;
    buf text;
    int64_t sent_at;
    size_t sent_len;
    int64_t seq; /* the run's agent events so far (1: its start), as the reference's
                    chat events count them: each text chunk one, the end one */
} run_tap;

static json_t *S_message_json(const char *text)
{
    return json_pack("{s:s,s:[{s:s,s:s}],s:I}", "role", "assistant", "content", "type", "text",
                     "text", text, "timestamp", (json_int_t)cm_wall_ms());
}

static void S_delta(void *ctx, const char *p, size_t n)
{
    run_tap *t = ctx;
    if (t->rq->on_delta) t->rq->on_delta(t->rq->delta_ctx, p, n);
    t->seq++;
    if (cm_buf_add(&t->text, p, n)) return;
    int64_t now = cm_now_ms();
    if (t->sent_len && now - t->sent_at < 150) return; /* the reference's throttle */
    t->sent_at = now;
    t->sent_len = t->text.len;
    cm_gw_ws_broadcast(t->w, "chat",
                       json_pack("{s:s,s:s,s:I,s:s,s:o}", "runId", t->run_id, "sessionKey",
                                 t->rq->session_key, "seq", (json_int_t)t->seq, "state", "delta",
                                 "message", S_message_json(t->text.data)));
}

/* A tool call's "agent" event (stream "tool", as the reference's
 * emitAgentEvent sends it): phase "start" with the arguments, then "result"
 * with isError and the result's text (at most GW_WS_TOOL_RESULT_BYTES). The
 * text streamed so far goes out first, so a card follows the words before
 * it. */
static void S_tool(void *ctx, const char *call_id, const char *name, const char *args_json,
                   const char *result, bool is_error)
{
    run_tap *t = ctx;
    if (t->rq->on_tool) t->rq->on_tool(t->rq->tool_ctx, call_id, name, args_json, result, is_error);
    if (!result && t->text.len > t->sent_len) {
        t->sent_at = cm_now_ms();
        t->sent_len = t->text.len;
        cm_gw_ws_broadcast(t->w, "chat",
                           json_pack("{s:s,s:s,s:I,s:s,s:o}", "runId", t->run_id, "sessionKey",
                                     t->rq->session_key, "seq", (json_int_t)t->seq, "state",
                                     "delta", "message", S_message_json(t->text.data)));
    }
    t->seq++;
    json_t *data = json_pack("{s:s,s:s,s:s}", "phase", result ? "result" : "start", "name",
                             name ? name : "", "toolCallId", call_id ? call_id : "");
    if (!data) return;
    if (!result) {
        json_t *args = args_json ? json_loads(args_json, 0, NULL) : NULL;
        json_object_set_new(data, "args", json_is_object(args) ? args : json_object());
        if (!json_is_object(args)) json_decref(args);
    } else {
        size_t n = cm_utf8_valid_prefix(result, CM_MIN(strlen(result), GW_WS_TOOL_RESULT_BYTES));
        json_t *text = json_stringn(result, n);
        json_object_set_new(data, "isError", json_boolean(is_error));
        json_object_set_new(data, "result",
                            json_pack("{s:[{s:s,s:o}]}", "content", "type", "text", "text", text));
        if (n < strlen(result)) json_object_set_new(data, "truncated", json_true());
    }
    cm_gw_ws_broadcast_tools(t->w, "agent",
                             json_pack("{s:s,s:s,s:o,s:s,s:I,s:I}", "runId", t->run_id, "stream",
                                       "tool", "data", data, "sessionKey", t->rq->session_key,
                                       "seq", (json_int_t)t->seq, "ts", (json_int_t)cm_wall_ms()));
}

cm_rc cm_gw_ws_run(void *ctx, const gw_run_req *rq, gw_run_res *out, char *err, size_t errlen)
{
    gw_ws *w = ctx;
    char own[48];
    gw_ws_run *mine = NULL;
    pthread_mutex_lock(&w->mu);
    /* the newest chat.send waiting for this session names the run; older
     * ones merged into it (a collected queue) are dropped */
    for (gw_ws_run **p = &w->runs; *p;) {
        gw_ws_run *r = *p;
        if (!r->running && !strcmp(r->key, rq->session_key)) {
            if (mine) {
                *p = r->next;
                free(r->key), free(r->run_id), free(r);
                continue;
            }
            mine = r;
        }
        p = &r->next;
    }
    if (mine) mine->running = true;
    snprintf(own, sizeof own, "run-%llu", (unsigned long long)++w->counter);
    const char *run_id = mine ? mine->run_id : own;
    pthread_mutex_unlock(&w->mu);
    run_tap t = {w, rq, run_id, BUF_INIT, 0, 0, 1};
    gw_run_req r2 = *rq;
    r2.on_delta = S_delta;
    r2.delta_ctx = &t;
    r2.on_tool = S_tool;
    r2.tool_ctx = &t;
    cm_rc rc = w->o.run(w->o.run_ctx, &r2, out, err, errlen);
    json_t *p = json_pack("{s:s,s:s,s:I}", "runId", run_id, "sessionKey", rq->session_key, "seq",
                          (json_int_t)(t.seq + 1));
    if (rc == CM_ECANCELED) {
        json_object_set_new(p, "state", json_string("aborted"));
        json_object_set_new(p, "stopReason", json_string("rpc"));
    } else if (rc) {
        json_object_set_new(p, "state", json_string("error"));
        json_object_set_new(p, "errorMessage", json_string(err));
    } else {
        json_object_set_new(p, "state", json_string("final"));
        const char *text = out->text && *out->text ? out->text : t.text.data;
        if (!out->silent && text && *text)
            json_object_set_new(p, "message", S_message_json(text));
    }
    cm_gw_ws_broadcast(w, "chat", p);
    cm_buf_release(&t.text);
    pthread_mutex_lock(&w->mu);
    for (gw_ws_run **q = &w->runs; *q; q = &(*q)->next)
        if (*q == mine) {
            *q = mine->next;
            free(mine->key), free(mine->run_id), free(mine);
            break;
        }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* ---- the webchat channel --------------------------------------------------------- */

static cm_rc S_ch_start(gw_channel *ch, gw_sink_fn sink, void *ctx, char *err, size_t errlen)
{
    gw_ws *w = (gw_ws *)ch;
    (void)err, (void)errlen;
    pthread_mutex_lock(&w->mu);
    w->sink = sink;
    w->sink_ctx = ctx;
    pthread_mutex_unlock(&w->mu);
    return CM_OK;
}

static cm_rc S_ch_send(gw_channel *ch, const gw_outbound *o, char *err, size_t errlen)
{
    gw_ws *w = (gw_ws *)ch;
    (void)err, (void)errlen;
    if (!o->plain) return CM_OK; /* a reply: the run wrapper has shown it */
    char id[48];
    pthread_mutex_lock(&w->mu);
    snprintf(id, sizeof id, "notice-%llu", (unsigned long long)++w->counter);
    pthread_mutex_unlock(&w->mu);
    cm_gw_ws_broadcast(w, "chat",
                       json_pack("{s:s,s:s,s:I,s:s,s:o}", "runId", id, "sessionKey", o->peer,
                                 "seq", (json_int_t)1, "state", "final", "message",
                                 S_message_json(o->text)));
    return CM_OK;
}

static void S_ch_stop(gw_channel *ch)
{
    gw_ws *w = (gw_ws *)ch;
    pthread_mutex_lock(&w->mu);
    w->sink = NULL;
    while (w->inflight)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

void cm_gw_ws_detach(gw_ws *w)
{
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->detached = true;
    pthread_mutex_unlock(&w->mu);
    S_ch_stop(&w->chan);
}

cm_rc cm_gw_ws_sink(gw_ws *w, const gw_msg *m)
{
    pthread_mutex_lock(&w->mu);
    gw_sink_fn sink = w->detached ? NULL : w->sink;
    void *ctx = w->sink_ctx;
    w->inflight += sink != NULL;
    pthread_mutex_unlock(&w->mu);
    if (!sink) return CM_EBUSY;
    cm_rc rc = sink(ctx, m);
    pthread_mutex_lock(&w->mu);
    w->inflight--;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

bool cm_gw_ws_notify(gw_ws *w, const char *channel, const char *account, const char *peer,
                     const char *text)
{
    pthread_mutex_lock(&w->mu);
    gw_runtime *rt = w->detached || !w->sink ? NULL : w->rt;
    w->inflight += rt != NULL;
    pthread_mutex_unlock(&w->mu);
    if (!rt) return false;
    bool ok = cm_gw_runtime_notify(rt, channel, account, peer, text);
    pthread_mutex_lock(&w->mu);
    w->inflight--;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return ok;
}

json_t *cm_gw_ws_status(gw_ws *w)
{
    pthread_mutex_lock(&w->mu);
    bool go = !w->detached && w->o.status;
    w->inflight += go;
    pthread_mutex_unlock(&w->mu);
    if (!go) return NULL;
    json_t *o = w->o.status(w->o.status_ctx);
    pthread_mutex_lock(&w->mu);
    w->inflight--;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return o;
}

const json_t *cm_gw_ws_config(gw_ws *w, cm_rtcfg **hold)
{
    *hold = NULL;
    pthread_mutex_lock(&w->mu);
    gw_runtime *rt = w->detached || !w->sink ? NULL : w->rt;
    w->inflight += rt != NULL;
    pthread_mutex_unlock(&w->mu);
    if (!rt) return w->o.config;
    *hold = cm_gw_runtime_config(rt); /* its own reference: outlives the runtime */
    pthread_mutex_lock(&w->mu);
    w->inflight--;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return *hold ? (*hold)->root : w->o.config;
}

static void S_ch_close(gw_channel *ch)
{
    (void)ch; /* owned by the gw_ws */
}

static const gw_channel_ops S_ops = {"webchat", 0,    S_ch_start, S_ch_send, S_ch_stop,
                                     S_ch_close, NULL, NULL,       NULL,      NULL};

gw_channel *cm_gw_ws_channel(gw_ws *w)
{
    return &w->chan;
}

void cm_gw_ws_set_runtime(gw_ws *w, gw_runtime *rt)
{
    w->rt = rt;
}

/* ---- logs ------------------------------------------------------------------------ */

void cm_gw_ws_log(gw_ws *w, cm_log_level level, const char *msg)
{
    redact r;
    cm_redact_init(&r);
    buf b = BUF_INIT;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    static const char *const names[] = {"debug", "info", "warn", "error"};
    const char *lv = (unsigned)level < 4 ? names[level] : "info";
    if ((w->token && cm_redact_add(&r, w->token)) ||
        (w->password && cm_redact_add(&r, w->password)) || cm_buf_printf(&b, "%s %s ", ts, lv) ||
        cm_redact_text(&r, msg, strlen(msg), 2000, &b)) {
        cm_buf_release(&b);
        cm_redact_release(&r);
        return;
    }
    cm_redact_release(&r);
    char *line = cm_buf_detach(&b);
    pthread_mutex_lock(&w->mu);
    size_t at = (size_t)(w->log_next++ % GW_WS_LOG_LINES);
    free(w->log[at]);
    w->log[at] = line;
    pthread_mutex_unlock(&w->mu);
}

/* ---- life ----------------------------------------------------------------------- */

static cm_rc S_secret(const json_t *root, const json_t *v, const char *env, char **out,
                      const char *what, char *err, size_t errlen)
{
    char why[256];
    secrets sec = {{json_object_get(root, "secrets"), NULL}};
    const char *e = getenv(env);
    if (v) {
        if (cm_secret_resolve(&sec, v, out, why, sizeof why))
            return cm_seterr(err, errlen, CM_ECONFIG, "%s: %s", what, why);
    } else if (e && *e) {
        *out = cm_strdup(e);
        if (!*out) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    }
    return CM_OK;
}

cm_rc cm_gw_ws_new(const gw_ws_opts *o, gw_ws **out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    *out = NULL;
    gw_ws *w = calloc(1, sizeof *w);
    if (!w) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    w->chan.ops = &S_ops;
    w->o = *o;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->started = cm_wall_ms();
    const cm_options *op = o->opt;
    w->workspace = op && op->workspace ? cm_strdup(op->workspace) : NULL;
    w->state_dir = op && op->state_dir ? cm_strdup(op->state_dir) : NULL;
    w->config_path = o->config_path ? cm_strdup(o->config_path)
                     : op && op->config_path ? cm_strdup(op->config_path)
                                             : NULL;
    w->opt.workspace = w->workspace;
    w->opt.state_dir = w->state_dir;
    w->opt.config_path = w->config_path;
    w->o.config_path = w->config_path;
    w->o.opt = &w->opt;
    buf a = BUF_INIT;
    const json_t *root = o->config;
    cm_rtcfg *rc0 = NULL; /* once, at start */
    CHECK(cm_rtcfg_from_json(root, &rc0, err, errlen));
    rc = cm_gw_route_agent(&a, rc0, "webchat", NULL, NULL, false);
    cm_rtcfg_unref(rc0);
    if (rc) FAIL(CM_ENOMEM, "out of memory");
    w->agent_id0 = cm_buf_detach(&a);
    const json_t *gw = json_object_get(root, "gateway");
    const json_t *auth = json_object_get(gw, "auth");
    CHECK(S_secret(root, json_object_get(auth, "token"), "QUANTUMCLAW_GATEWAY_TOKEN", &w->token,
                   "gateway.auth.token", err, errlen));
    CHECK(S_secret(root, json_object_get(auth, "password"), "QUANTUMCLAW_GATEWAY_PASSWORD",
                   &w->password, "gateway.auth.password", err, errlen));
    const char *mode = json_string_value(json_object_get(auth, "mode"));
    if (!mode) mode = w->token || !w->password ? "token" : "password";
    if (!strcmp(mode, "token")) {
        w->mode = GW_AUTH_TOKEN;
        if (!w->token || !*w->token)
            FAIL(CM_ECONFIG, "gateway.auth.mode token needs gateway.auth.token");
    } else if (!strcmp(mode, "password")) {
        w->mode = GW_AUTH_PASSWORD;
        if (!w->password || !*w->password)
            FAIL(CM_ECONFIG, "gateway.auth.mode password needs gateway.auth.password");
    } else if (!strcmp(mode, "none")) {
        w->mode = GW_AUTH_NONE;
    } else {
        FAIL(CM_ECONFIG, "gateway.auth.mode: %s is not supported here (token, password, none)",
             mode);
    }
    const json_t *ui = json_object_get(gw, "controlUi");
    w->ui_enabled = !json_is_false(json_object_get(ui, "enabled"));
    const char *bp = json_string_value(json_object_get(ui, "basePath"));
    if (bp && *bp) {
        size_t n = strlen(bp);
        while (n && bp[n - 1] == '/')
            n--;
        if (n + 2 > sizeof w->base_path || strpbrk(bp, "?#\\ \"'<>"))
            FAIL(CM_ECONFIG, "gateway.controlUi.basePath: a plain path is needed");
        snprintf(w->base_path, sizeof w->base_path, "%s%.*s", bp[0] == '/' ? "" : "/", (int)n,
                 bp);
        if (!strcmp(w->base_path, "/")) w->base_path[0] = 0;
    }
    w->allowed_origins = json_object_get(ui, "allowedOrigins");
    *out = w;
    w = NULL;
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_gw_ws_free(w);
    return rc;
}

void cm_gw_ws_free(gw_ws *w)
{
    if (!w) return;
    for (gw_ws_run *r = w->runs, *n; r; r = n) {
        n = r->next;
        free(r->key), free(r->run_id), free(r);
    }
    for (size_t i = 0; i < GW_WS_LOG_LINES; i++)
        free(w->log[i]);
    if (w->token) explicit_bzero(w->token, strlen(w->token));
    if (w->password) explicit_bzero(w->password, strlen(w->password));
    free(w->token), free(w->password);
    free(w->workspace), free(w->state_dir), free(w->config_path), free(w->agent_id0);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}
