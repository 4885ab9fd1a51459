/*
 * gw_methods.c — the gateway protocol's methods (gw_methods.h's table), with
 * QuantumClaw 2026.3.22's names, scopes (method-scopes: read, write or admin) and
 * payload shapes where clawmem has the data: health, status,
 * channels.status, sessions.list, chat.history, chat.send, chat.abort,
 * models.list, logs.tail, config.get.
 */
#include <ctype.h>
#include <strings.h>

#include "gw_methods.h"
#include "gw_access.h"
#include "gw_memory.h"
#include "gw_sessions.h"
#include "gw_transcript.h"
#include "gw_usage.h"
#include "../../base/redact.h"

#define HISTORY_DEFAULT   200
#define HISTORY_MAX       1000
#define HISTORY_ONE_BYTES (128 * 1024) /* the reference's per-message cap */
#define LOGS_DEFAULT      500
#define LOGS_MAX          5000
#define LOGS_BYTES        250000
#define SENTINEL          "__QUANTUMCLAW_REDACTED__" /* the reference's sentinel */

static const char *S_str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s && *s ? s : NULL;
}

static json_int_t S_int(const json_t *o, const char *k, json_int_t def, json_int_t lo,
                        json_int_t hi)
{
    const json_t *v = json_object_get(o, k);
    json_int_t n = json_is_number(v) ? (json_int_t)json_number_value(v) : def;
    return n < lo ? lo : n > hi ? hi : n;
}

static void S_bad(gw_ws_client *cl, const char *id, const char *method, const char *why)
{
    char msg[256];
    snprintf(msg, sizeof msg, "invalid %s params: %s", method, why);
    cm_gw_ws_fail(cl, id, "INVALID_REQUEST", msg, NULL);
}

/* ---- health, status, channels ------------------------------------------------- */

/* A channel's label as the reference shows it ("telegram" -> "Telegram"). */
static json_t *S_label(const char *name)
{
    char l[64];
    snprintf(l, sizeof l, "%s", name);
    if (l[0]) l[0] = (char)toupper((unsigned char)l[0]);
    return json_string(l);
}

/* The reference's per-agent heartbeat row: clawmem runs no heartbeat turns. */
static json_t *S_heartbeat_off(const char *agent)
{
    return json_pack("{s:s,s:b,s:s,s:n}", "agentId", agent, "enabled", 0, "every", "disabled",
                     "everyMs");
}

/* The default agent's stored sessions as the reference's status and health
 * summarise them: {path, count, recent: the 10 newest {key, kind, sessionId,
 * updatedAt, age}}. NULL when the store cannot be read. */
static json_t *S_session_summary(gw_ws *w)
{
    char err[512], *js = NULL;
    cm_sessions *s = NULL;
    cm_options o = w->opt;
    o.agent_id = w->agent_id0;
    cm_rc rc = cm_sessions_open(&o, &s, err, sizeof err);
    if (!rc) rc = cm_sessions_list(s, &js, err, sizeof err);
    cm_sessions_close(s);
    if (rc) return NULL;
    json_t *doc = json_loads(js, 0, NULL), *recent = json_array();
    cm_free(js);
    int64_t now = cm_wall_ms();
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(doc, "sessions"), i, e)
    {
        const char *key = json_string_value(json_object_get(e, "key"));
        if (!key || json_array_size(recent) >= 10) continue;
        json_int_t at = json_integer_value(json_object_get(e, "updatedAt"));
        const char *kind = strstr(key, ":group:")     ? "group"
                           : strstr(key, ":channel:") ? "channel"
                                                      : "direct";
        json_array_append_new(recent, json_pack("{s:s,s:s,s:s,s:O*,s:I,s:I}", "agentId",
                                                w->agent_id0, "key", key, "kind", kind, "sessionId",
                                                json_object_get(e, "sessionId"), "updatedAt", at,
                                                "age", (json_int_t)(now - at)));
    }
    json_t *out =
        json_pack("{s:O*,s:I,s:o}", "path", json_object_get(doc, "store"), "count",
                  (json_int_t)json_array_size(json_object_get(doc, "sessions")), "recent", recent);
    json_decref(doc);
    return out;
}

/* clawmem's gateway counters, plus the fields the reference's status has
 * (runtimeVersion, heartbeat, channelSummary, queuedSystemEvents and its
 * sessions object; clawmem's active sessions are activeSessions). */
static void m_status(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    (void)p;
    json_t *s = cm_gw_ws_status(w);
    if (!s) return cm_gw_ws_fail(cl, id, "UNAVAILABLE", "the gateway is stopping", NULL);
    json_object_set_new(s, "uptimeMs", json_integer(cm_wall_ms() - w->started));
    json_object_set_new(s, "defaultAgentId", json_string(w->agent_id0));
    json_object_set(s, "activeSessions", json_object_get(s, "sessions"));
    json_object_set_new(s, "runtimeVersion", json_string(w->o.version ? w->o.version : ""));
    json_object_set_new(s, "heartbeat",
                        json_pack("{s:s,s:[o]}", "defaultAgentId", w->agent_id0, "agents",
                                  S_heartbeat_off(w->agent_id0)));
    json_t *summary = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(s, "channels"), i, c)
    {
        const char *name = json_string_value(json_object_get(c, "channel"));
        if (!name) continue;
        json_t *l = S_label(name);
        char line[128];
        snprintf(line, sizeof line, "%s: configured", json_string_value(l));
        json_decref(l);
        json_array_append_new(summary, json_string(line));
    }
    json_object_set_new(s, "channelSummary", summary);
    json_object_set_new(s, "queuedSystemEvents", json_array());
    json_t *ss = S_session_summary(w);
    if (ss) {
        json_t *paths = json_array();
        if (json_object_get(ss, "path")) json_array_append(paths, json_object_get(ss, "path"));
        json_object_set_new(s, "sessions",
                            json_pack("{s:o,s:O,s:{},s:O,s:[{s:s,s:O*,s:O,s:O}]}", "paths", paths,
                                      "count", json_object_get(ss, "count"), "defaults", "recent",
                                      json_object_get(ss, "recent"), "byAgent", "agentId",
                                      w->agent_id0, "path", json_object_get(ss, "path"), "count",
                                      json_object_get(ss, "count"), "recent",
                                      json_object_get(ss, "recent")));
        json_decref(ss);
    } else {
        json_object_del(s, "sessions");
    }
    cm_gw_ws_ok(cl, id, s);
}

static void m_health(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    (void)p;
    int64_t t0 = cm_now_ms();
    json_t *s = cm_gw_ws_status(w);
    if (!s) return cm_gw_ws_fail(cl, id, "UNAVAILABLE", "the gateway is stopping", NULL);
    json_t *ch = json_object(), *order = json_array(), *labels = json_object();
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(s, "channels"), i, c)
    {
        const char *why = S_str(c, "lastError");
        const char *name = json_string_value(json_object_get(c, "channel"));
        if (!name) continue;
        if (!json_object_get(ch, name)) {
            json_array_append_new(order, json_string(name));
            json_object_set_new(labels, name, S_label(name));
        }
        json_object_set_new(
            ch, name, json_pack("{s:b,s:b,s:s*}", "configured", 1, "running", 1, "lastError", why));
    }
    json_t *ss = S_session_summary(w);
    if (!ss) ss = json_pack("{s:O}", "count", json_object_get(s, "knownSessions"));
    json_t *agent = json_pack("{s:s,s:b,s:o,s:O}", "agentId", w->agent_id0, "isDefault", 1,
                              "heartbeat", S_heartbeat_off(w->agent_id0), "sessions", ss);
    json_object_del(json_object_get(agent, "heartbeat"), "agentId");
    cm_gw_ws_ok(cl, id,
                json_pack("{s:b,s:I,s:I,s:o,s:o,s:o,s:i,s:s,s:[o],s:o}", "ok",
                          json_is_true(json_object_get(s, "accepting")), "ts",
                          (json_int_t)cm_wall_ms(), "durationMs", (json_int_t)(cm_now_ms() - t0),
                          "channels", ch, "channelOrder", order, "channelLabels", labels,
                          "heartbeatSeconds", 0, "defaultAgentId", w->agent_id0, "agents", agent,
                          "sessions", ss));
    json_decref(s);
}

/* The reference's agents.list: the configured agents (agents.list[] ids
 * with their names and identities; the default agent alone without one),
 * the default agent, the main session key and the session scope. */
static void m_agents_list(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    (void)p;
    cm_rtcfg *hold;
    const json_t *cfg = cm_gw_ws_config(w, &hold);
    const json_t *sess = json_object_get(cfg, "session");
    const char *main_key = S_str(sess, "mainKey"), *scope = S_str(sess, "scope");
    json_t *agents = json_array();
    bool has_default = false;
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(json_object_get(cfg, "agents"), "list"), i, a)
    {
        const char *aid = S_str(a, "id");
        if (!aid) continue;
        char low[128];
        size_t n = 0;
        for (; aid[n] && n < sizeof low - 1; n++)
            low[n] = (char)tolower((unsigned char)aid[n]);
        low[n] = 0;
        has_default |= !strcmp(low, w->agent_id0);
        json_t *ident = json_object_get(a, "identity"), *row = json_pack("{s:s}", "id", low);
        if (S_str(a, "name")) json_object_set(row, "name", json_object_get(a, "name"));
        if (json_is_object(ident)) {
            json_t *id2 = json_object();
            static const char *const keys[] = {"name", "theme", "emoji", "avatar"};
            for (size_t k = 0; k < 4; k++)
                if (S_str(ident, keys[k]))
                    json_object_set(id2, keys[k], json_object_get(ident, keys[k]));
            json_object_set_new(row, "identity", id2);
        }
        json_array_append_new(agents, row);
    }
    if (!has_default) json_array_append_new(agents, json_pack("{s:s}", "id", w->agent_id0));
    cm_gw_ws_ok(cl, id,
                json_pack("{s:s,s:s,s:s,s:o}", "defaultId", w->agent_id0, "mainKey",
                          main_key ? main_key : "main", "scope", scope ? scope : "per-sender",
                          "agents", agents));
    cm_rtcfg_unref(hold);
}

static void m_channels_status(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    (void)p;
    json_t *s = cm_gw_ws_status(w);
    if (!s) return cm_gw_ws_fail(cl, id, "UNAVAILABLE", "the gateway is stopping", NULL);
    json_t *order = json_array(), *chans = json_object(), *accts = json_object();
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(s, "channels"), i, c)
    {
        const char *name = json_string_value(json_object_get(c, "channel"));
        const char *acc = json_string_value(json_object_get(c, "account"));
        const char *why = S_str(c, "lastError");
        if (!name) continue;
        json_t *list = json_object_get(accts, name);
        if (!list) {
            json_array_append_new(order, json_string(name));
            json_object_set_new(
                chans, name,
                json_pack("{s:b,s:b,s:s*}", "configured", 1, "running", 1, "lastError", why));
            json_object_set_new(accts, name, list = json_array());
        } else if (why) {
            json_object_set_new(json_object_get(chans, name), "lastError", json_string(why));
        }
        json_array_append_new(list,
                              json_pack("{s:s,s:b,s:b,s:s*}", "accountId", acc ? acc : "default",
                                        "configured", 1, "running", 1, "lastError", why));
    }
    cm_gw_ws_ok(cl, id,
                json_pack("{s:I,s:o,s:o,s:o}", "ts", (json_int_t)cm_wall_ms(), "channelOrder",
                          order, "channels", chans, "channelAccounts", accts));
    json_decref(s);
}

/* ---- sessions ------------------------------------------------------------------ */

static cm_rc S_sessions(gw_ws *w, cm_sessions **s, char *err, size_t errlen)
{
    cm_options o = w->opt;
    o.agent_id = w->agent_id0;
    return cm_sessions_open(&o, s, err, errlen);
}

static const char *S_kind(const char *key)
{
    return strstr(key, ":group:") ? "group" : strstr(key, ":channel:") ? "channel" : "direct";
}

static void m_sessions_list(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    char err[512], *js = NULL;
    cm_sessions *s = NULL;
    json_int_t limit = S_int(p, "limit", 500, 1, 5000);
    if (S_sessions(w, &s, err, sizeof err) || cm_sessions_list(s, &js, err, sizeof err)) {
        cm_sessions_close(s);
        return cm_gw_ws_fail(cl, id, "UNAVAILABLE", err, NULL);
    }
    cm_sessions_close(s);
    json_t *o = json_loads(js, 0, NULL), *out = json_array();
    cm_free(js);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(o, "sessions"), i, e)
    {
        if ((json_int_t)i >= limit) break;
        const char *key = json_string_value(json_object_get(e, "key"));
        if (!key) continue;
        json_t *row =
            json_pack("{s:s,s:s,s:O*,s:O*,s:O*,s:O*}", "key", key, "kind", S_kind(key), "sessionId",
                      json_object_get(e, "sessionId"), "updatedAt", json_object_get(e, "updatedAt"),
                      "chatType", json_object_get(e, "chatType"), "totalTokens",
                      json_object_get(e, "totalTokens"));
        json_array_append_new(out, row);
    }
    cm_gw_ws_sessions_overrides(w, out);
    cm_gw_ws_ok(cl, id,
                json_pack("{s:I,s:O*,s:I,s:{s:s},s:o}", "ts", (json_int_t)cm_wall_ms(), "path",
                          json_object_get(o, "store"), "count", (json_int_t)json_array_size(out),
                          "defaults", "agentId", w->agent_id0, "sessions", out));
    json_decref(o);
}

static void m_chat_history(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    const char *key0 = S_str(p, "sessionKey");
    if (!key0) return S_bad(cl, id, "chat.history", "sessionKey is required");
    json_int_t limit = S_int(p, "limit", HISTORY_DEFAULT, 1, HISTORY_MAX);
    char err[512], *js = NULL, *key = cm_gw_ws_session_key(w, key0);
    cm_sessions *s = NULL;
    json_t *msgs = json_array(), *o = NULL;
    const char *sid = NULL;
    cm_rc rc = key ? S_sessions(w, &s, err, sizeof err) : CM_ENOMEM;
    if (!rc) rc = cm_sessions_show(s, key, (unsigned)limit, &js, err, sizeof err);
    cm_sessions_close(s);
    if (rc && rc != CM_ENOTFOUND) {
        json_decref(msgs);
        free(key);
        return cm_gw_ws_fail(cl, id, "UNAVAILABLE", rc == CM_ENOMEM ? "out of memory" : err, NULL);
    }
    if (!rc) {
        o = json_loads(js, 0, NULL);
        cm_free(js);
        sid = json_string_value(json_object_get(json_object_get(o, "entry"), "sessionId"));
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(o, "records"), i, r)
        {
            json_t *m = json_object_get(r, "message");
            if (!json_is_object(m) || !S_str(m, "role")) continue;
            char *one = json_dumps(m, JSON_COMPACT);
            if (one && strlen(one) > HISTORY_ONE_BYTES)
                json_array_append_new(msgs, json_pack("{s:O,s:[{s:s,s:s}]}", "role",
                                                      json_object_get(m, "role"), "content", "type",
                                                      "text", "text",
                                                      "[chat.history omitted: message too large]"));
            else
                json_array_append(msgs, m);
            free(one);
        }
    }
    /* size-bounded: the oldest messages go first */
    size_t total = 0, keep_from = json_array_size(msgs);
    while (keep_from > 0) {
        char *one = json_dumps(json_array_get(msgs, keep_from - 1), JSON_COMPACT);
        size_t n = one ? strlen(one) + 1 : 0;
        free(one);
        if (total + n > GW_WS_HISTORY_BYTES) break;
        total += n;
        keep_from--;
    }
    for (size_t i = 0; i < keep_from; i++)
        json_array_remove(msgs, 0);
    /* the session's thinking level, "off" unless set (the reference's default
     * for a model without reasoning) */
    const char *think =
        json_string_value(json_object_get(json_object_get(o, "entry"), "thinkingLevel"));
    cm_gw_ws_ok(cl, id,
                json_pack("{s:s,s:s*,s:o,s:s}", "sessionKey", key, "sessionId", sid, "messages",
                          msgs, "thinkingLevel", think ? think : "off"));
    json_decref(o);
    free(key);
}

/* ---- chat ------------------------------------------------------------------------ */

static void S_abort(gw_ws *w, gw_ws_client *cl, const char *id, const char *key, const char *run_id)
{
    json_t *ids = json_array();
    pthread_mutex_lock(&w->mu);
    for (gw_ws_run *r = w->runs; r; r = r->next)
        if (r->running && !strcmp(r->key, key) && (!run_id || !strcmp(r->run_id, run_id)))
            json_array_append_new(ids, json_string(r->run_id));
    char mid[48];
    snprintf(mid, sizeof mid, "abort-%llu", (unsigned long long)++w->counter);
    pthread_mutex_unlock(&w->mu);
    if (json_array_size(ids)) {
        gw_msg m = {"webchat", "default", key,   key,  NULL, mid,  "operator", "/stop",
                    false,     false,     false, NULL, NULL, NULL, 0};
        if (cm_gw_ws_sink(w, &m)) json_array_clear(ids);
    }
    cm_gw_ws_ok(
        cl, id,
        json_pack("{s:b,s:b,s:o}", "ok", 1, "aborted", json_array_size(ids) > 0, "runIds", ids));
}

static void m_chat_abort(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    const char *key0 = S_str(p, "sessionKey");
    if (!key0) return S_bad(cl, id, "chat.abort", "sessionKey is required");
    char *key = cm_gw_ws_session_key(w, key0);
    if (!key) return cm_gw_ws_fail(cl, id, "UNAVAILABLE", "out of memory", NULL);
    S_abort(w, cl, id, key, S_str(p, "runId"));
    free(key);
}

static bool S_is_stop(const char *t)
{
    while (isspace((unsigned char)*t))
        t++;
    size_t n = strlen(t);
    while (n && isspace((unsigned char)t[n - 1]))
        n--;
    return n == 5 && !strncasecmp(t, "/stop", 5);
}

static void m_chat_send(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    const char *key0 = S_str(p, "sessionKey"), *text = S_str(p, "message");
    const char *idem = S_str(p, "idempotencyKey");
    if (!key0) return S_bad(cl, id, "chat.send", "sessionKey is required");
    if (!idem) return S_bad(cl, id, "chat.send", "idempotencyKey is required");
    if (!text)
        return cm_gw_ws_fail(cl, id, "INVALID_REQUEST", "message or attachment required", NULL);
    if (strlen(idem) > 200) return S_bad(cl, id, "chat.send", "idempotencyKey is too long");
    char *key = cm_gw_ws_session_key(w, key0);
    if (!key) return cm_gw_ws_fail(cl, id, "UNAVAILABLE", "out of memory", NULL);
    if (S_is_stop(text)) {
        S_abort(w, cl, id, key, NULL);
        free(key);
        return;
    }
    gw_ws_run *r = calloc(1, sizeof *r);
    bool dup = false;
    pthread_mutex_lock(&w->mu);
    for (gw_ws_run *q = w->runs; q; q = q->next)
        dup |= !strcmp(q->run_id, idem);
    if (!dup && r && (r->key = cm_strdup(key)) && (r->run_id = cm_strdup(idem))) {
        r->next = w->runs;
        w->runs = r;
    } else if (r) {
        free(r->key), free(r->run_id), free(r);
        r = NULL;
    }
    pthread_mutex_unlock(&w->mu);
    if (dup) {
        cm_gw_ws_ok(cl, id, json_pack("{s:s,s:s}", "runId", idem, "status", "in_flight"));
        free(key);
        return;
    }
    if (!r) {
        free(key);
        return cm_gw_ws_fail(cl, id, "UNAVAILABLE", "out of memory", NULL);
    }
    gw_msg m = {"webchat", "default", key,   key,  NULL, idem, "operator", text,
                false,     false,     false, NULL, NULL, NULL, 0};
    cm_rc rc = cm_gw_ws_sink(w, &m);
    if (rc) {
        pthread_mutex_lock(&w->mu);
        for (gw_ws_run **q = &w->runs; *q; q = &(*q)->next)
            if (*q == r) {
                *q = r->next;
                break;
            }
        pthread_mutex_unlock(&w->mu);
        free(r->key), free(r->run_id), free(r);
        cm_gw_ws_fail(cl, id, "UNAVAILABLE",
                      rc == CM_EBUSY ? "the gateway is shutting down; send again later"
                                     : "the message could not be recorded",
                      json_pack("{s:b}", "retryable", 1));
    } else {
        cm_gw_ws_ok(cl, id, json_pack("{s:s,s:s}", "runId", idem, "status", "started"));
    }
    free(key);
}

/* ---- models, logs, config ------------------------------------------------------------ */

static void S_add_model(json_t *out, const char *ref, const char *name)
{
    if (!ref || !*ref) return;
    const char *slash = strchr(ref, '/');
    size_t i;
    json_t *m;
    json_array_foreach(out, i, m)
    {
        const char *p = S_str(m, "provider"), *mid = S_str(m, "id");
        if (slash && p && mid && strlen(p) == (size_t)(slash - ref) &&
            !strncmp(p, ref, strlen(p)) && !strcmp(mid, slash + 1))
            return;
    }
    char prov[128];
    snprintf(prov, sizeof prov, "%.*s", slash ? (int)(slash - ref) : 0, ref);
    json_array_append_new(out,
                          json_pack("{s:s,s:s,s:s}", "id", slash ? slash + 1 : ref, "name",
                                    name ? name : (slash ? slash + 1 : ref), "provider", prov));
}

static void m_models_list(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    (void)p;
    json_t *out = json_array();
    cm_rtcfg *hold;
    const json_t *root = cm_gw_ws_config(w, &hold);
    const json_t *dm =
        json_object_get(json_object_get(json_object_get(root, "agents"), "defaults"), "model");
    if (json_is_string(dm)) S_add_model(out, json_string_value(dm), NULL);
    S_add_model(out, S_str(dm, "primary"), NULL);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(dm, "fallbacks"), i, v)
    {
        S_add_model(out, json_string_value(v), NULL);
    }
    const char *prov;
    json_t *pv;
    json_object_foreach((json_t *)json_object_get(json_object_get(root, "models"), "providers"),
                        prov, pv)
    {
        json_array_foreach(json_object_get(pv, "models"), i, v)
        {
            const char *mid = S_str(v, "id");
            if (!mid) continue;
            buf ref = BUF_INIT;
            if (!cm_buf_printf(&ref, "%s/%s", prov, mid))
                S_add_model(out, ref.data, S_str(v, "name"));
            cm_buf_release(&ref);
        }
    }
    cm_rtcfg_unref(hold);
    cm_gw_ws_ok(cl, id, json_pack("{s:o}", "models", out));
}

/* clawmem.models.status: `clawmem models status --json` (cm_models_status_at)
 * for the default agent, plus "ts" (the gateway's wall clock, so a client
 * counts cooldowns down from the same now). */
static void m_models_status(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    (void)p;
    cm_options o = w->opt;
    o.agent_id = w->agent_id0;
    char err[512], *js = NULL;
    if (cm_models_status_at(&o, &js, err, sizeof err))
        return cm_gw_ws_fail(cl, id, "UNAVAILABLE", err, NULL);
    json_t *s = json_loads(js, 0, NULL);
    cm_free(js);
    if (!json_is_object(s)) {
        json_decref(s);
        return cm_gw_ws_fail(cl, id, "UNAVAILABLE", "out of memory", NULL);
    }
    json_object_set_new(s, "ts", json_integer(cm_wall_ms()));
    cm_gw_ws_ok(cl, id, s);
}

static void m_logs_tail(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    json_int_t limit = S_int(p, "limit", LOGS_DEFAULT, 1, LOGS_MAX);
    json_int_t max_bytes = S_int(p, "maxBytes", LOGS_BYTES, 1, 1000000);
    const json_t *cur = json_object_get(p, "cursor");
    json_t *lines = json_array();
    pthread_mutex_lock(&w->mu);
    uint64_t end = w->log_next;
    uint64_t oldest = end > GW_WS_LOG_LINES ? end - GW_WS_LOG_LINES : 0;
    uint64_t from = json_is_integer(cur) && json_integer_value(cur) >= 0
                        ? (uint64_t)json_integer_value(cur)
                        : (end > (uint64_t)limit ? end - (uint64_t)limit : 0);
    bool reset = from < oldest || from > end;
    if (reset) from = end > (uint64_t)limit ? end - (uint64_t)limit : 0;
    if (from < oldest) from = oldest;
    bool truncated = end - from > (uint64_t)limit;
    if (truncated) from = end - (uint64_t)limit;
    /* newest lines within maxBytes */
    uint64_t first = end;
    size_t bytes = 0;
    while (first > from) {
        size_t n = strlen(w->log[(first - 1) % GW_WS_LOG_LINES]) + 1;
        if (bytes + n > (size_t)max_bytes) {
            truncated = true;
            break;
        }
        bytes += n;
        first--;
    }
    for (uint64_t i = first; i < end; i++)
        json_array_append_new(lines, json_string(w->log[i % GW_WS_LOG_LINES]));
    pthread_mutex_unlock(&w->mu);
    cm_gw_ws_ok(cl, id,
                json_pack("{s:s,s:I,s:I,s:o,s:b,s:b}", "file", "(memory)", "cursor",
                          (json_int_t)end, "size", (json_int_t)end, "lines", lines, "truncated",
                          truncated, "reset", reset));
}

/* Whether the value v under key k is a credential: the reference's
 * /token$/, /password/, /secret/, /api.?key/ and a few more (a header's
 * name among them). A key ending in "tokens" too, unless its value is a
 * number: a list of tokens is hidden, maxTokens and contextTokens are
 * counts, and tokenizer is neither. */
static bool S_sensitive(const char *k, const json_t *v)
{
    static const char *const words[] = {
        "secret",     "password",      "apikey",     "api_key",    "api-key",          "cookie",
        "credential", "authorization", "privatekey", "passphrase", "subscription-key", "dsn"};
    char low[128];
    size_t n = 0;
    for (; k[n] && n + 1 < sizeof low; n++)
        low[n] = (char)tolower((unsigned char)k[n]);
    low[n] = 0;
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (strstr(low, words[i])) return true;
    bool token =
        (n >= 5 && !strcmp(low + n - 5, "token")) || (n >= 6 && !strcmp(low + n - 6, "tokens"));
    return token && !json_is_number(v);
}

/* A string that is a URL with userinfo or a query string (either may carry
 * a key, as Gemini's ?key= does): shown as a message shows a URL, without
 * them. Other strings: NULL. */
static json_t *S_url_shown(const char *v)
{
    const char *sep = strstr(v, "://");
    if (!sep || strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-") !=
                    (size_t)(sep - v))
        return NULL;
    size_t auth = strcspn(sep + 3, "/?#");
    if (!memchr(sep + 3, '@', auth) && !strpbrk(sep + 3, "?#")) return NULL;
    buf b = BUF_INIT;
    json_t *out = cm_redact_url(v, 0, &b) == CM_OK ? json_string(b.data) : NULL;
    cm_buf_release(&b);
    return out ? out : json_string(SENTINEL);
}

/* A copy of v with the values under sensitive keys replaced, every value
 * under a headers key too (a header's value is a credential as often as
 * not: x-api-key, Ocp-Apim-Subscription-Key, …; headers is set below one),
 * and the credentials of URLs dropped. */
static json_t *S_redact(const json_t *v, bool headers)
{
    if (json_is_object(v)) {
        json_t *o = json_object();
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x)
        {
            bool hide = S_sensitive(k, x) && !json_is_boolean(x) && !json_is_null(x);
            json_object_set_new(o, k,
                                hide ? json_string(SENTINEL)
                                     : S_redact(x, headers || !strcasecmp(k, "headers")));
        }
        return o;
    }
    if (json_is_array(v)) {
        json_t *a = json_array();
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
        {
            json_array_append_new(a, S_redact(x, headers));
        }
        return a;
    }
    if (headers && !json_is_boolean(v) && !json_is_null(v)) return json_string(SENTINEL);
    json_t *u = json_is_string(v) ? S_url_shown(json_string_value(v)) : NULL;
    return u ? u : json_deep_copy(v);
}

static void m_config_get(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    (void)p;
    cm_rtcfg *hold; /* the snapshot the gateway runs with: a reload's, not the start's */
    const json_t *cfg = cm_gw_ws_config(w, &hold);
    json_t *red = S_redact(cfg, false);
    cm_rtcfg_unref(hold);
    cm_gw_ws_ok(cl, id,
                json_pack("{s:s*,s:b,s:b,s:o}", "path", w->config_path, "exists", cfg != NULL,
                          "valid", 1, "config", red));
}

const gw_ws_method cm_gw_ws_methods[] = {
    {"health", GW_SCOPE_READ, m_health},
    {"agents.list", GW_SCOPE_READ, m_agents_list},
    {"status", GW_SCOPE_READ, m_status},
    {"channels.status", GW_SCOPE_READ, m_channels_status},
    {"sessions.list", GW_SCOPE_READ, m_sessions_list},
    {"chat.history", GW_SCOPE_READ, m_chat_history},
    {"sessions.patch", GW_SCOPE_ADMIN, cm_gw_ws_sessions_patch},
    {"sessions.reset", GW_SCOPE_ADMIN, cm_gw_ws_sessions_reset},
    {"chat.send", GW_SCOPE_WRITE, m_chat_send},
    {"chat.abort", GW_SCOPE_WRITE, m_chat_abort},
    {"models.list", GW_SCOPE_READ, m_models_list},
    {"logs.tail", GW_SCOPE_READ, m_logs_tail},
    {"config.get", GW_SCOPE_READ, m_config_get},
    {"memory.search", GW_SCOPE_READ, cm_gw_ws_memory_search},         /* clawmem's own */
    {"memory.get", GW_SCOPE_READ, cm_gw_ws_memory_get},               /* clawmem's own */
    {"clawmem.models.status", GW_SCOPE_READ, m_models_status},        /* clawmem's own */
    {"clawmem.models.usage", GW_SCOPE_READ, cm_gw_ws_models_usage},   /* clawmem's own */
    {"clawmem.memory.plot", GW_SCOPE_READ, cm_gw_ws_memory_plot},     /* clawmem's own */
    {"clawmem.memory.status", GW_SCOPE_READ, cm_gw_ws_memory_status}, /* clawmem's own */
    {"clawmem.sessions.transcript", GW_SCOPE_READ,
     cm_gw_ws_sessions_transcript},                                        /* clawmem's own */
    {"clawmem.pairing.list", GW_SCOPE_READ, cm_gw_ws_pairing_list},        /* clawmem's own */
    {"clawmem.pairing.approve", GW_SCOPE_WRITE, cm_gw_ws_pairing_approve}, /* clawmem's own */
    {"clawmem.pairing.deny", GW_SCOPE_WRITE, cm_gw_ws_pairing_deny},       /* clawmem's own */
    {NULL, GW_SCOPE_READ, NULL},
};
