/*
 * gw_sessions.c — sessions.patch and sessions.reset as QuantumClaw 2026.3.22
 * defines them (schema SessionsPatchParams / SessionsResetParams; both need
 * operator.admin):
 *   sessions.patch {key, label?, thinkingLevel?, fastMode?, verboseLevel?,
 *     reasoningLevel?, responseUsage?, elevatedLevel?, execHost?,
 *     execSecurity?, execAsk?, execNode?, model?, sendPolicy?,
 *     groupActivation?}  each value normalised as the reference does (its
 *     aliases: "on" thinking is "low", "enable" usage is "tokens", …), null
 *     clears it; model "provider/model", a bare id of the default provider
 *     or an alias becomes providerOverride + modelOverride as /model sets
 *     them (agent/model_select.h: the default model, or null, clears both;
 *     with agents.defaults.models set only those, the chain's and the
 *     default are allowed).
 *     Answers {ok, path, key, entry, resolved:{modelProvider, model}}.
 *   sessions.reset {key, reason?: "new"|"reset"}: a new sessionId and
 *     transcript, the old one archived (cm_session_reset). Answers {ok, key,
 *     entry}.
 * A webchat client other than a Control UI may not patch (the reference's
 * rejectWebchatSessionMutation). The entry is made when missing. Both broadcast "sessions.changed"
 * {sessionKey, reason, ts}. clawmem's runs honour model and reasoningLevel;
 * the other fields are kept for QuantumClaw reading the same store. The
 * spawn lineage fields (spawnedBy, spawnDepth, subagent*) of subagent
 * sessions are refused: clawmem has no subagents.
 */
#include <ctype.h>
#include <strings.h>

#include "../../agent/model_select.h"
#include "../../agent/session_cmds.h"
#include "../../config/config.h"
#include "../../session/sessions.h"
#include "gw_sessions.h"

/* An alias and its canonical value; tables end with {NULL, NULL}. */
typedef struct alias {
    const char *from, *to;
} alias;

static const alias S_onoff_full[] = {{"off", "off"},  {"false", "off"}, {"no", "off"},
                                     {"0", "off"},    {"on", "on"},     {"true", "on"},
                                     {"yes", "on"},   {"1", "on"},      {"full", "full"},
                                     {"all", "full"}, {NULL, NULL}};
static const alias S_reasoning[] = {
    {"off", "off"},       {"false", "off"},        {"no", "off"},       {"0", "off"},
    {"hide", "off"},      {"hidden", "off"},       {"disable", "off"},  {"disabled", "off"},
    {"on", "on"},         {"true", "on"},          {"yes", "on"},       {"1", "on"},
    {"show", "on"},       {"visible", "on"},       {"enable", "on"},    {"enabled", "on"},
    {"stream", "stream"}, {"streaming", "stream"}, {"draft", "stream"}, {"live", "stream"},
    {NULL, NULL}};
static const alias S_usage[] = {
    {"off", "off"},       {"false", "off"},    {"no", "off"},        {"0", "off"},
    {"disable", "off"},   {"disabled", "off"}, {"on", "tokens"},     {"true", "tokens"},
    {"yes", "tokens"},    {"1", "tokens"},     {"enable", "tokens"}, {"enabled", "tokens"},
    {"tokens", "tokens"}, {"token", "tokens"}, {"tok", "tokens"},    {"minimal", "tokens"},
    {"min", "tokens"},    {"full", "full"},    {"session", "full"},  {NULL, NULL}};
static const alias S_elevated[] = {{"off", "off"},
                                   {"false", "off"},
                                   {"no", "off"},
                                   {"0", "off"},
                                   {"full", "full"},
                                   {"auto", "full"},
                                   {"auto-approve", "full"},
                                   {"autoapprove", "full"},
                                   {"ask", "ask"},
                                   {"prompt", "ask"},
                                   {"approval", "ask"},
                                   {"approve", "ask"},
                                   {"on", "on"},
                                   {"true", "on"},
                                   {"yes", "on"},
                                   {"1", "on"},
                                   {NULL, NULL}};
static const alias S_exec_host[] = {
    {"sandbox", "sandbox"}, {"gateway", "gateway"}, {"node", "node"}, {NULL, NULL}};
static const alias S_exec_sec[] = {
    {"deny", "deny"}, {"allowlist", "allowlist"}, {"full", "full"}, {NULL, NULL}};
static const alias S_exec_ask[] = {
    {"off", "off"}, {"on-miss", "on-miss"}, {"always", "always"}, {NULL, NULL}};
static const alias S_send[] = {{"allow", "allow"}, {"deny", "deny"}, {NULL, NULL}};
static const alias S_activation[] = {{"mention", "mention"}, {"always", "always"}, {NULL, NULL}};

/* The string fields: name, table (NULL: thinking levels, as /think reads
 * them), the reference's error text. */
static const struct {
    const char *name;
    const alias *table;
    const char *why;
} S_fields[] = {
    {"thinkingLevel", NULL, "invalid thinkingLevel (use off|minimal|low|medium|high|adaptive)"},
    {"verboseLevel", S_onoff_full, "invalid verboseLevel (use \"on\"|\"off\")"},
    {"reasoningLevel", S_reasoning, "invalid reasoningLevel (use \"on\"|\"off\"|\"stream\")"},
    {"responseUsage", S_usage, "invalid responseUsage (use \"off\"|\"tokens\"|\"full\")"},
    {"elevatedLevel", S_elevated, "invalid elevatedLevel (use \"on\"|\"off\"|\"ask\"|\"full\")"},
    {"execHost", S_exec_host, "invalid execHost (use \"sandbox\"|\"gateway\"|\"node\")"},
    {"execSecurity", S_exec_sec, "invalid execSecurity (use \"deny\"|\"allowlist\"|\"full\")"},
    {"execAsk", S_exec_ask, "invalid execAsk (use \"off\"|\"on-miss\"|\"always\")"},
    {"sendPolicy", S_send, "invalid sendPolicy (use \"allow\"|\"deny\")"},
    {"groupActivation", S_activation, "invalid groupActivation (use \"mention\"|\"always\")"},
};

static const char *S_norm(const char *raw, const alias *t)
{
    char key[64];
    size_t n = 0;
    while (isspace((unsigned char)*raw))
        raw++;
    for (; raw[n] && n + 1 < sizeof key; n++)
        key[n] = (char)tolower((unsigned char)raw[n]);
    while (n && isspace((unsigned char)key[n - 1]))
        n--;
    key[n] = 0;
    for (size_t i = 0; t[i].from; i++)
        if (!strcmp(t[i].from, key)) return t[i].to;
    return NULL;
}

static void S_invalid(gw_ws_client *cl, const char *id, const char *why)
{
    cm_gw_ws_fail(cl, id, "INVALID_REQUEST", why, NULL);
}

static void S_bad_params(gw_ws_client *cl, const char *id, const char *method, const char *why)
{
    char msg[256];
    snprintf(msg, sizeof msg, "invalid %s params: %s", method, why);
    cm_gw_ws_fail(cl, id, "INVALID_REQUEST", msg, NULL);
}

/* Params must be an object of known members with a non-empty string key. */
static bool S_check(gw_ws_client *cl, const char *id, const char *method, const json_t *p,
                    const char *const *known)
{
    const char *k;
    json_t *v;
    if (!json_is_object(p) || !json_is_string(json_object_get(p, "key")) ||
        !*json_string_value(json_object_get(p, "key"))) {
        S_bad_params(cl, id, method, "must have required property 'key'");
        return false;
    }
    json_object_foreach((json_t *)p, k, v)
    {
        size_t i = 0;
        while (known[i] && strcmp(known[i], k))
            i++;
        if (!known[i]) {
            char why[160];
            snprintf(why, sizeof why, "at root: unexpected property '%.80s'", k);
            S_bad_params(cl, id, method, why);
            return false;
        }
        if (strcmp(k, "key") && strcmp(k, "fastMode") && strcmp(k, "spawnDepth") &&
            !json_is_null(v) && (!json_is_string(v) || !*json_string_value(v))) {
            char why[160];
            snprintf(why, sizeof why, "at /%.80s: must be a non-empty string or null", k);
            S_bad_params(cl, id, method, why);
            return false;
        }
    }
    return true;
}

static void S_quiet(void *ctx, cm_log_level level, const char *msg)
{
    (void)ctx, (void)level, (void)msg; /* config warnings: logged at the gateway's start */
}

/* The store of key's agent ("agent:<id>:…", else the default agent). */
static cm_rc S_store(gw_ws *w, const char *key, session_store *st, buf *path, char *err,
                     size_t errlen)
{
    char agent[128];
    const char *a = w->agent_id0;
    if (!strncmp(key, "agent:", 6)) {
        const char *end = strchr(key + 6, ':');
        size_t n = end ? (size_t)(end - key - 6) : strlen(key + 6);
        snprintf(agent, sizeof agent, "%.*s", (int)(n < sizeof agent ? n : sizeof agent - 1),
                 key + 6);
        a = agent;
    }
    cm_config cfg = {0};
    cm_config_args ca = {a, w->workspace, w->config_path, w->state_dir};
    cm_logger lg = {S_quiet, NULL};
    cm_rc rc = cm_config_init(&ca, &lg, &cfg, err, errlen);
    if (!rc && cm_session_store_path(path, cfg.state_dir, cfg.agent_id))
        rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    cm_config_release(&cfg);
    if (!rc) rc = cm_session_store_read(st, path->data, err, errlen);
    return rc;
}

/* The default agent's model chain "default,fallback,…" into out. */
static void S_chain(gw_ws *w, buf *out)
{
    cm_options o = w->opt;
    o.agent_id = w->agent_id0;
    char err[256], *js = NULL;
    cm_buf_reset(out);
    if (cm_models_status_at(&o, &js, err, sizeof err)) return;
    json_t *s = json_loads(js, 0, NULL);
    cm_free(js);
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(s, "chain"), i, m)
    {
        if (cm_buf_printf(out, "%s%s", i ? "," : "", json_string_value(m))) break;
    }
    json_decref(s);
}

/* The agent's default model "provider/model" (the chain's first) into out. */
static void S_default_model(gw_ws *w, char *out, size_t n)
{
    buf chain = BUF_INIT;
    S_chain(w, &chain);
    snprintf(out, n, "%.*s", chain.data ? (int)strcspn(chain.data, ",") : 0,
             chain.data ? chain.data : "");
    cm_buf_release(&chain);
}

/* The model member into patch as 2026.3.22's sessions.patch applies it
 * (agent/model_select.h: aliases, the allowlist, the entry's change); false
 * with why set when refused. */
static bool S_model(gw_ws *w, const json_t *v, const json_t *entry, json_t *patch, char *why,
                    size_t n)
{
    buf chain = BUF_INIT;
    S_chain(w, &chain);
    cm_rtcfg *hold;
    model_rules r = {cm_gw_ws_config(w, &hold), chain.data ? chain.data : ""};
    model_ref m;
    bool is_default = true, ok = true;
    if (json_is_null(v)) {
        if (!cm_model_default(&r, &m)) memset(&m, 0, sizeof m);
    } else {
        const char *raw = json_string_value(v);
        char key[400];
        switch (cm_model_pick(&r, raw, false, &m, NULL, &is_default)) {
        case MODEL_PICKED:
            break;
        case MODEL_UNRECOGNIZED: {
            while (isspace((unsigned char)*raw))
                raw++;
            size_t len = strlen(raw);
            while (len && isspace((unsigned char)raw[len - 1]))
                len--;
            if (!len)
                snprintf(why, n, "invalid model: empty");
            else
                snprintf(why, n, "invalid model: %.*s", (int)CM_MIN(len, (size_t)400), raw);
            ok = false;
            break;
        }
        case MODEL_NOT_ALLOWED:
            cm_model_key(&m, key);
            snprintf(why, n, "model not allowed: %.400s", key);
            ok = false;
            break;
        }
    }
    json_t *ch = ok ? cm_model_override_patch(entry, &m, is_default, NULL) : NULL;
    if (ch) json_object_update(patch, ch);
    json_decref(ch);
    cm_rtcfg_unref(hold);
    cm_buf_release(&chain);
    return ok;
}

static const char *const S_patch_known[] = {
    "key",           "label",           "thinkingLevel",
    "fastMode",      "verboseLevel",    "reasoningLevel",
    "responseUsage", "elevatedLevel",   "execHost",
    "execSecurity",  "execAsk",         "execNode",
    "model",         "spawnedBy",       "spawnedWorkspaceDir",
    "spawnDepth",    "subagentRole",    "subagentControlScope",
    "sendPolicy",    "groupActivation", NULL};

/* The patch for the store (null members clear), or NULL with why set. */
static json_t *S_build(gw_ws *w, const json_t *p, const session_store *st, const char *key,
                       char *why, size_t n)
{
    json_t *patch = json_object(), *v;
    const char *k;
    json_object_foreach((json_t *)p, k, v)
    {
        if (!strcmp(k, "key")) continue;
        if (!strncmp(k, "spawn", 5) || !strncmp(k, "subagent", 8)) {
            if (json_is_null(v)) continue;
            snprintf(why, n, "%s is only supported for subagent:* or acp:* sessions", k);
            goto bad;
        }
        if (!strcmp(k, "model")) {
            if (!S_model(w, v, cm_session_store_get(st, key), patch, why, n)) goto bad;
            continue;
        }
        if (json_is_null(v)) {
            json_object_set_new(patch, k, json_null());
            continue;
        }
        if (!strcmp(k, "label")) {
            const char *raw = json_string_value(v);
            while (isspace((unsigned char)*raw))
                raw++;
            size_t len = strlen(raw);
            while (len && isspace((unsigned char)raw[len - 1]))
                len--;
            if (!len) {
                snprintf(why, n, "invalid label: empty");
                goto bad;
            }
            if (len > 512) {
                snprintf(why, n, "invalid label: too long (max 512)");
                goto bad;
            }
            json_t *all = cm_session_store_snapshot(st), *e;
            const char *ok;
            bool taken = false;
            json_object_foreach(all, ok, e)
            {
                const char *l = json_string_value(json_object_get(e, "label"));
                taken |= strcasecmp(ok, key) && l && strlen(l) == len && !strncmp(l, raw, len);
            }
            json_decref(all);
            if (taken) {
                snprintf(why, n, "label already in use: %.*s", (int)len, raw);
                goto bad;
            }
            json_object_set_new(patch, k, json_stringn(raw, len));
            continue;
        }
        if (!strcmp(k, "fastMode")) {
            int fm = json_is_boolean(v) ? json_is_true(v) : -1;
            if (json_is_string(v)) {
                const char *s = S_norm(json_string_value(v), S_reasoning);
                fm = s && !strcmp(s, "on") ? 1 : s && !strcmp(s, "off") ? 0 : -1;
                if (!strcasecmp(json_string_value(v), "fast")) fm = 1;
                if (!strcasecmp(json_string_value(v), "normal")) fm = 0;
            }
            if (fm < 0) {
                snprintf(why, n, "invalid fastMode (use true or false)");
                goto bad;
            }
            json_object_set_new(patch, k, json_boolean(fm));
            continue;
        }
        if (!strcmp(k, "execNode")) {
            json_object_set(patch, k, v);
            continue;
        }
        size_t i = 0;
        while (strcmp(S_fields[i].name, k))
            i++; /* every other known member is in S_fields */
        const char *canon = S_fields[i].table ? S_norm(json_string_value(v), S_fields[i].table)
                                              : cm_agent_think_parse(json_string_value(v));
        if (!canon) {
            snprintf(why, n, "%s", S_fields[i].why);
            goto bad;
        }
        if (!strcmp(k, "thinkingLevel") && !strcmp(canon, "xhigh")) {
            snprintf(why, n,
                     "thinkingLevel \"xhigh\" is only supported for provider models "
                     "that advertise xhigh reasoning");
            goto bad;
        }
        json_object_set_new(patch, k,
                            !strcmp(k, "responseUsage") && !strcmp(canon, "off")
                                ? json_null()
                                : json_string(canon));
    }
    return patch;
bad:
    json_decref(patch);
    return NULL;
}

static void S_changed(gw_ws *w, const char *key, const char *reason)
{
    cm_gw_ws_broadcast(w, "sessions.changed",
                       json_pack("{s:s,s:s,s:I}", "sessionKey", key, "reason", reason, "ts",
                                 (json_int_t)cm_wall_ms()));
}

void cm_gw_ws_sessions_patch(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    if (!S_check(cl, id, "sessions.patch", p, S_patch_known)) return;
    if (cl->webchat)
        return S_invalid(cl, id,
                         "webchat clients cannot patch sessions; use chat.send for "
                         "session-scoped updates");
    char err[512], why[512], sid[160];
    char *key = cm_gw_ws_session_key(w, json_string_value(json_object_get(p, "key")));
    session_store st;
    memset(&st, 0, sizeof st);
    buf path = BUF_INIT;
    json_t *patch = NULL;
    if (!key) {
        cm_gw_ws_fail(cl, id, "UNAVAILABLE", "out of memory", NULL);
        goto out;
    }
    if (S_store(w, key, &st, &path, err, sizeof err)) {
        cm_gw_ws_fail(cl, id, "UNAVAILABLE", err, NULL);
        goto out;
    }
    if (!(patch = S_build(w, p, &st, key, why, sizeof why))) {
        S_invalid(cl, id, why);
        goto out;
    }
    if (cm_session_touch(&st, key, patch, cm_wall_ms(), sid, err, sizeof err)) {
        cm_gw_ws_fail(cl, id, "UNAVAILABLE", err, NULL);
        goto out;
    }
    const json_t *e = cm_session_store_get(&st, key);
    const char *po = json_string_value(json_object_get(e, "providerOverride"));
    const char *mo = json_string_value(json_object_get(e, "modelOverride"));
    char def[256];
    S_default_model(w, def, sizeof def);
    const char *ds = strchr(def, '/');
    char dprov[128];
    snprintf(dprov, sizeof dprov, "%.*s", ds ? (int)(ds - def) : 0, def);
    cm_gw_ws_ok(cl, id,
                json_pack("{s:b,s:s,s:s,s:O,s:{s:s,s:s}}", "ok", 1, "path", path.data, "key", key,
                          "entry", e, "resolved", "modelProvider", po ? po : dprov, "model",
                          mo ? mo : (ds ? ds + 1 : def)));
    S_changed(w, key, "patch");
out:
    json_decref(patch);
    cm_session_store_release(&st);
    cm_buf_release(&path);
    free(key);
}

static const char *const S_reset_known[] = {"key", "reason", NULL};

void cm_gw_ws_sessions_reset(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    if (!S_check(cl, id, "sessions.reset", p, S_reset_known)) return;
    const char *reason = json_string_value(json_object_get(p, "reason"));
    if (json_object_get(p, "reason") &&
        (!reason || (strcmp(reason, "new") && strcmp(reason, "reset"))))
        return S_bad_params(cl, id, "sessions.reset", "at /reason: must be \"new\" or \"reset\"");
    char err[512], sid[160];
    char *key = cm_gw_ws_session_key(w, json_string_value(json_object_get(p, "key")));
    session_store st;
    memset(&st, 0, sizeof st);
    buf path = BUF_INIT;
    if (!key) {
        cm_gw_ws_fail(cl, id, "UNAVAILABLE", "out of memory", NULL);
        goto out;
    }
    cm_rc rc = S_store(w, key, &st, &path, err, sizeof err);
    if (!rc && !cm_session_store_get(&st, key))
        rc = cm_session_touch(&st, key, NULL, cm_wall_ms(), sid, err, sizeof err);
    else if (!rc)
        rc = cm_session_reset(&st, key, cm_wall_ms(), sid, err, sizeof err);
    if (rc) {
        cm_gw_ws_fail(cl, id, "UNAVAILABLE", err, NULL);
        goto out;
    }
    cm_gw_ws_ok(
        cl, id,
        json_pack("{s:b,s:s,s:O}", "ok", 1, "key", key, "entry", cm_session_store_get(&st, key)));
    S_changed(w, key, reason && !strcmp(reason, "new") ? "new" : "reset");
out:
    cm_session_store_release(&st);
    cm_buf_release(&path);
    free(key);
}

void cm_gw_ws_sessions_overrides(gw_ws *w, json_t *rows)
{
    static const char *const fields[] = {
        "label",         "model",      "modelProvider",   "providerOverride", "modelOverride",
        "thinkingLevel", "fastMode",   "verboseLevel",    "reasoningLevel",   "responseUsage",
        "elevatedLevel", "sendPolicy", "groupActivation", "execHost",         "execSecurity",
        "execAsk",       "execNode"};
    session_store st;
    memset(&st, 0, sizeof st);
    buf path = BUF_INIT;
    char err[256];
    if (S_store(w, w->agent_id0, &st, &path, err, sizeof err)) goto out;
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r)
    {
        const json_t *e = cm_session_store_get(&st, json_string_value(json_object_get(r, "key")));
        for (size_t f = 0; e && f < sizeof fields / sizeof *fields; f++) {
            json_t *v = json_object_get(e, fields[f]);
            if (v && !json_is_null(v)) json_object_set(r, fields[f], v);
        }
    }
out:
    cm_session_store_release(&st);
    cm_buf_release(&path);
}
