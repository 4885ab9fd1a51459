/*
 * reply.c — the runtime's pure decisions about a reply and a route, read
 * from the config as QuantumClaw 2026.3.22 reads it: the silent token, the
 * responsePrefix cascade with its template variables, replyToMode, the
 * channel's text limit and block streaming settings, bindings → agent and
 * the session key.
 */
#include <ctype.h>
#include <limits.h>
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

cm_rc cm_gw_reply_prefix(buf *out, const cm_rtcfg *cfg, const char *agent_id, const char *channel,
                         const char *account, const char *model)
{
    cm_rc rc = CM_OK;
    const char *t = cm_rtcfg_chan(cfg, channel, account)->response_prefix;
    if (!t && cfg) t = cfg->messages.response_prefix;
    if (!t || !*t) return CM_OK;
    if (!strcmp(t, "auto")) t = "[{identity.name}]";
    const cm_rt_agent *ag = cm_rtcfg_agent(cfg, agent_id);
    const char *name = ag ? ag->name : NULL;
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

gw_reply_to_mode cm_gw_reply_to_mode_of(const cm_rtcfg *cfg, const char *channel,
                                        const char *account)
{
    int m = cm_rtcfg_chan(cfg, channel, account)->reply_to_mode; /* off|first|all */
    return m == 1 ? GW_REPLYTO_FIRST : m == 2 ? GW_REPLYTO_ALL : GW_REPLYTO_OFF;
}

int cm_gw_reply_text_limit(const cm_rtcfg *cfg, const char *channel, const char *account,
                           size_t channel_limit)
{
    int64_t v = cm_rtcfg_chan(cfg, channel, account)->text_chunk_limit;
    int lim = cm_gw_channel_resolve_limit(channel, v > 0 ? (int)CM_MIN(v, INT_MAX) : 0);
    if (channel_limit && (size_t)lim > channel_limit) lim = (int)channel_limit;
    return lim < 1 ? 1 : lim;
}

bool cm_gw_reply_block_streaming(const cm_rtcfg *cfg, const char *channel, const char *account)
{
    int v = cm_rtcfg_chan(cfg, channel, account)->block_streaming;
    if (v >= 0) return v == 1;
    return cfg && cfg->defaults.block_streaming_default == 1; /* "on" */
}

/* An int64 setting as the stream config's int (unset: dflt). */
static int S_int(int64_t v, int dflt)
{
    return v == CM_RT_UNSET ? dflt : (int)CM_MIN(v, INT_MAX);
}

void cm_gw_reply_stream_cfg(const cm_rtcfg *c, const char *channel, int text_limit,
                            gw_stream_break *brk, gw_stream_cfg *cfg)
{
    static const cm_rt_agent_defaults none = {.block_streaming_break = -1,
                                              .chunk_min = CM_RT_UNSET,
                                              .chunk_max = CM_RT_UNSET,
                                              .chunk_break = -1,
                                              .coalesce_min = CM_RT_UNSET,
                                              .coalesce_max = CM_RT_UNSET,
                                              .coalesce_idle_ms = CM_RT_UNSET};
    const cm_rt_agent_defaults *d = c ? &c->defaults : &none;
    static const char *const prefs[] = {"paragraph", "newline", "sentence"};
    *brk = d->block_streaming_break == 1 ? GW_STREAM_MESSAGE_END : GW_STREAM_TEXT_END;
    gw_stream_cfg rq = {S_int(d->chunk_min, 0),
                        S_int(d->chunk_max, 0),
                        cm_gw_break_pref_parse(d->chunk_break >= 0 ? prefs[d->chunk_break] : NULL),
                        S_int(d->coalesce_min, 0),
                        S_int(d->coalesce_max, 0),
                        S_int(d->coalesce_idle_ms, -1)};
    cm_gw_stream_cfg_resolve(cfg, channel, text_limit, &rq);
}

/* ---- routing ------------------------------------------------------------ */

static bool S_eq(const char *a, const char *b)
{
    return a && b && !strcasecmp(a, b);
}

cm_rc cm_gw_route_agent(buf *out, const cm_rtcfg *cfg, const char *channel, const char *account,
                        const char *peer, bool is_group)
{
    /* bindings[] stay raw: matched in order, a handful per config */
    const json_t *root = cfg ? cfg->root : NULL;
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
    if (!best && cfg) { /* agents.list's default entry, else its first */
        for (i = 0; i < cfg->nagents; i++) {
            const char *id = cfg->agents[i].id;
            if (id && !best) best = id;
            if (id && cfg->agents[i].is_default == 1) {
                best = id;
                break;
            }
        }
    }
    return cm_session_agent_id(out, best ? best : "main");
}

cm_rc cm_gw_route_session(buf *out, const cm_rtcfg *cfg, const char *agent_id, const char *channel,
                          const char *account, const char *peer, const char *thread, bool is_group)
{
    int scope = cfg ? cfg->session.dm_scope : -1; /* session_dm_scope's order */
    session_route r = {agent_id,
                       channel,
                       account,
                       is_group ? "group" : "direct",
                       peer,
                       thread,
                       scope < 0 ? SESSION_DM_MAIN : (session_dm_scope)scope,
                       cfg && cfg->session.scope == CM_RT_SCOPE_GLOBAL,
                       cfg ? cfg->session.identity_links : NULL};
    return cm_session_key_for(out, &r);
}
