/*
 * reply.c — the runtime's pure decisions about a reply and a route, read
 * from the config as QuantumClaw 2026.3.22 reads it: the silent token, the
 * responsePrefix cascade with its template variables, replyToMode, the
 * channel's text limit and block streaming settings, bindings → agent and
 * the session key.
 */
#include <ctype.h>
#include <strings.h>

#include "../../session/keys.h"
#include "reply.h"

bool cm_gw_reply_is_silent(const char *text)
{
    if (!text) return false;
    while (isspace((unsigned char)*text))
        text++;
    size_t n = strlen(text);
    while (n && isspace((unsigned char)text[n - 1]))
        n--;
    return n == 8 && !strncmp(text, "NO_REPLY", 8);
}

/* channels.<ch> and, when present, channels.<ch>.accounts.<acc>. */
static void S_channel_objs(const json_t *root, const char *channel, const char *account,
                           const json_t **ch, const json_t **acc)
{
    *ch = json_object_get(json_object_get(root, "channels"), channel ? channel : "");
    *acc = json_object_get(json_object_get(*ch, "accounts"), account ? account : "default");
}

/* The most specific of account → channel → fallback holding key. */
static const json_t *S_cascade(const json_t *root, const char *channel, const char *account,
                               const char *key, const json_t *fallback)
{
    const json_t *ch, *acc;
    S_channel_objs(root, channel, account, &ch, &acc);
    const json_t *v = json_object_get(acc, key);
    if (!v) v = json_object_get(ch, key);
    return v ? v : fallback;
}

/* agents.list[] entry of agent_id, or NULL. */
static const json_t *S_agent_entry(const json_t *root, const char *agent_id)
{
    const json_t *list = json_object_get(json_object_get(root, "agents"), "list");
    size_t i;
    const json_t *e;
    json_array_foreach(list, i, e)
    {
        const char *id = json_string_value(json_object_get(e, "id"));
        if (id && agent_id && !strcasecmp(id, agent_id)) return e;
    }
    return NULL;
}

/* extractShortModelName: no provider, no -YYYYMMDD or -latest suffix. */
static cm_rc S_short_model(buf *out, const char *full)
{
    const char *s = strrchr(full, '/');
    s = s ? s + 1 : full;
    size_t n = strlen(s);
    if (n > 9 && s[n - 9] == '-') {
        bool digits = true;
        for (size_t i = n - 8; i < n; i++)
            digits = digits && isdigit((unsigned char)s[i]);
        if (digits) n -= 9;
    }
    if (n > 7 && !strncmp(s + n - 7, "-latest", 7)) n -= 7;
    return cm_buf_add(out, s, n);
}

cm_rc cm_gw_reply_prefix(buf *out, const json_t *root, const char *agent_id, const char *channel,
                         const char *account, const char *model)
{
    cm_rc rc = CM_OK;
    const json_t *global = json_object_get(json_object_get(root, "messages"), "responsePrefix");
    const char *t = json_string_value(S_cascade(root, channel, account, "responsePrefix", global));
    if (!t || !*t) return CM_OK;
    if (!strcmp(t, "auto")) t = "[{identity.name}]";
    const char *name = json_string_value(
        json_object_get(json_object_get(S_agent_entry(root, agent_id), "identity"), "name"));
    const char *slash = model && *model ? strchr(model, '/') : NULL;
    for (const char *p = t; *p && !rc;) {
        const char *e = *p == '{' ? strchr(p, '}') : NULL;
        bool var = e && e > p + 1 && isalpha((unsigned char)p[1]);
        for (const char *q = p + 1; var && q < e; q++)
            var = isalnum((unsigned char)*q) || *q == '.';
        if (!var) {
            rc = cm_buf_addc(out, *p++);
            continue;
        }
        char v[64];
        size_t n = (size_t)(e - p - 1);
        if (n >= sizeof v) n = sizeof v - 1;
        memcpy(v, p + 1, n);
        v[n] = 0;
        bool done = true;
        if (!strcasecmp(v, "model") && model && *model)
            rc = S_short_model(out, model);
        else if (!strcasecmp(v, "modelfull") && model && *model)
            rc = cm_buf_adds(out, model);
        else if (!strcasecmp(v, "provider") && slash)
            rc = cm_buf_add(out, model, (size_t)(slash - model));
        else if ((!strcasecmp(v, "thinkinglevel") || !strcasecmp(v, "think")) && model && *model)
            rc = cm_buf_adds(out, "off");
        else if ((!strcasecmp(v, "identity.name") || !strcasecmp(v, "identityname")) && name)
            rc = cm_buf_adds(out, name);
        else
            done = false;
        if (!done) rc = cm_buf_add(out, p, (size_t)(e - p + 1));
        p = e + 1;
    }
    return rc;
}

gw_reply_to_mode cm_gw_reply_to_mode_of(const json_t *root, const char *channel,
                                        const char *account)
{
    const char *m = json_string_value(S_cascade(root, channel, account, "replyToMode", NULL));
    if (m && !strcasecmp(m, "first")) return GW_REPLYTO_FIRST;
    if (m && !strcasecmp(m, "all")) return GW_REPLYTO_ALL;
    return GW_REPLYTO_OFF;
}

int cm_gw_reply_text_limit(const json_t *root, const char *channel, const char *account,
                           size_t channel_limit)
{
    const json_t *v = S_cascade(root, channel, account, "textChunkLimit", NULL);
    int lim =
        cm_gw_channel_resolve_limit(channel, json_is_integer(v) ? (int)json_integer_value(v) : 0);
    if (channel_limit && (size_t)lim > channel_limit) lim = (int)channel_limit;
    return lim < 1 ? 1 : lim;
}

bool cm_gw_reply_block_streaming(const json_t *root, const char *channel, const char *account)
{
    const json_t *v = S_cascade(root, channel, account, "blockStreaming", NULL);
    if (json_is_boolean(v)) return json_is_true(v);
    const json_t *d = json_object_get(json_object_get(json_object_get(root, "agents"), "defaults"),
                                      "blockStreamingDefault");
    const char *s = json_string_value(d);
    return json_is_true(d) || (s && !strcasecmp(s, "on"));
}

static int S_int(const json_t *o, const char *key, int dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? (int)json_number_value(v) : dflt;
}

void cm_gw_reply_stream_cfg(const json_t *root, const char *channel, int text_limit,
                            gw_stream_break *brk, gw_stream_cfg *cfg)
{
    const json_t *d = json_object_get(json_object_get(root, "agents"), "defaults");
    const char *b = json_string_value(json_object_get(d, "blockStreamingBreak"));
    *brk = b && !strcasecmp(b, "message_end") ? GW_STREAM_MESSAGE_END : GW_STREAM_TEXT_END;
    const json_t *ck = json_object_get(d, "blockStreamingChunk");
    const json_t *co = json_object_get(d, "blockStreamingCoalesce");
    gw_stream_cfg rq = {
        S_int(ck, "minChars", 0),
        S_int(ck, "maxChars", 0),
        cm_gw_break_pref_parse(json_string_value(json_object_get(ck, "breakPreference"))),
        S_int(co, "minChars", 0),
        S_int(co, "maxChars", 0),
        S_int(co, "idleMs", -1)};
    cm_gw_stream_cfg_resolve(cfg, channel, text_limit, &rq);
}

/* ---- routing ------------------------------------------------------------ */

static bool S_eq(const char *a, const char *b)
{
    return a && b && !strcasecmp(a, b);
}

cm_rc cm_gw_route_agent(buf *out, const json_t *root, const char *channel, const char *account,
                        const char *peer, bool is_group)
{
    const char *best = NULL;
    int best_score = -1;
    const char *acc = account ? account : "default";
    size_t i;
    const json_t *b;
    json_array_foreach(json_object_get(root, "bindings"), i, b)
    {
        const json_t *m = json_object_get(b, "match");
        const char *id = json_string_value(json_object_get(b, "agentId"));
        if (!id || !S_eq(json_string_value(json_object_get(m, "channel")), channel)) continue;
        int score = 1;
        const char *ma = json_string_value(json_object_get(m, "accountId"));
        if (ma && strcmp(ma, "*")) {
            if (!S_eq(ma, acc)) continue;
            score = 2;
        }
        const json_t *mp = json_object_get(m, "peer");
        if (mp) {
            const char *kind = json_string_value(json_object_get(mp, "kind"));
            const char *pid = json_string_value(json_object_get(mp, "id"));
            bool kind_ok = !kind || (is_group ? (S_eq(kind, "group") || S_eq(kind, "channel"))
                                              : (S_eq(kind, "direct") || S_eq(kind, "dm")));
            if (!kind_ok || !pid || !peer || strcmp(pid, peer)) continue;
            score = 3;
        }
        if (score > best_score) best = id, best_score = score;
    }
    if (!best) {
        const json_t *list = json_object_get(json_object_get(root, "agents"), "list");
        const json_t *e;
        json_array_foreach(list, i, e)
        {
            const char *id = json_string_value(json_object_get(e, "id"));
            if (id && !best) best = id;
            if (id && json_is_true(json_object_get(e, "default"))) {
                best = id;
                break;
            }
        }
    }
    return cm_session_agent_id(out, best ? best : "main");
}

cm_rc cm_gw_route_session(buf *out, const json_t *root, const char *agent_id, const char *channel,
                          const char *account, const char *peer, const char *thread, bool is_group)
{
    const json_t *s = json_object_get(root, "session");
    int scope = cm_session_dm_scope_parse(json_string_value(json_object_get(s, "dmScope")));
    const char *sc = json_string_value(json_object_get(s, "scope"));
    session_route r = {agent_id,
                       channel,
                       account,
                       is_group ? "group" : "direct",
                       peer,
                       thread,
                       scope < 0 ? SESSION_DM_MAIN : (session_dm_scope)scope,
                       sc && !strcasecmp(sc, "global"),
                       json_object_get(s, "identityLinks")};
    return cm_session_key_for(out, &r);
}
