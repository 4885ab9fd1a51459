/*
 * keys.c — session keys (keys.h).
 */
#include <ctype.h>
#include <jansson.h>

#include "keys.h"

int cm_session_dm_scope_parse(const char *s)
{
    static const char *const names[] = {"main", "per-peer", "per-channel-peer",
                                        "per-account-channel-peer"};
    for (int i = 0; s && i < 4; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

/* Appends s trimmed and lower-cased. */
static cm_rc add_lower(buf *out, const char *s)
{
    const char *p = s ? s : "";
    while (isspace((unsigned char)*p))
        p++;
    size_t n = strlen(p);
    while (n && isspace((unsigned char)p[n - 1]))
        n--;
    cm_rc rc = CM_OK;
    for (size_t i = 0; i < n && !rc; i++)
        rc = cm_buf_addc(out, (char)tolower((unsigned char)p[i]));
    return rc;
}

static bool id_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-';
}

/* QuantumClaw's id rule: an id matching [a-z0-9][a-z0-9_-]{0,63} is
 * lower-cased; otherwise runs of other characters become "-", leading and
 * trailing dashes go, and 64 characters are kept; dflt when nothing is left. */
static cm_rc add_id(buf *out, const char *id, const char *dflt)
{
    buf t = BUF_INIT, r = BUF_INIT;
    cm_rc rc = add_lower(&t, id);
    const char *s = t.data;
    size_t n = strlen(s);
    bool valid = n > 0 && n <= 64 && isalnum((unsigned char)s[0]);
    for (size_t i = 0; valid && i < n; i++)
        valid = id_char(s[i]);
    if (valid) {
        rc = cm_buf_add(out, s, n);
        goto out;
    }
    for (size_t i = 0; i < n && !rc;) {
        if (id_char(s[i])) {
            rc = cm_buf_addc(&r, s[i++]);
        } else {
            rc = cm_buf_addc(&r, '-');
            while (i < n && !id_char(s[i]))
                i++;
        }
    }
    const char *p = r.data;
    size_t len = r.len;
    while (len && *p == '-')
        p++, len--;
    while (len && p[len - 1] == '-')
        len--;
    if (len > 64) len = 64;
    if (!rc) rc = len ? cm_buf_add(out, p, len) : cm_buf_adds(out, dflt);
out:
    cm_buf_release(&t);
    cm_buf_release(&r);
    return rc;
}

cm_rc cm_session_agent_id(buf *out, const char *agent_id)
{
    return add_id(out, agent_id, "main");
}

cm_rc cm_session_main_key(buf *out, const char *agent_id)
{
    cm_rc rc = cm_buf_adds(out, "agent:");
    if (!rc) rc = cm_session_agent_id(out, agent_id);
    if (!rc) rc = cm_buf_adds(out, ":main");
    return rc;
}

/* The canonical name identity_links gives peer on channel, or NULL. */
static const char *linked_peer(const json_t *links, const char *channel, const char *peer)
{
    buf a = BUF_INIT, b = BUF_INIT;
    const char *found = NULL;
    if (add_lower(&a, peer)) cm_buf_reset(&a); /* out of memory: no match */
    if (channel && *channel &&
        (add_lower(&b, channel) || cm_buf_addc(&b, ':') || add_lower(&b, peer)))
        cm_buf_reset(&b);
    const char *name;
    json_t *ids;
    json_object_foreach((json_t *)links, name, ids)
    {
        size_t i;
        json_t *id;
        json_array_foreach(ids, i, id)
        {
            buf t = BUF_INIT;
            add_lower(&t, json_string_value(id));
            bool hit =
                t.len && ((a.len && !strcmp(t.data, a.data)) || (b.len && !strcmp(t.data, b.data)));
            cm_buf_release(&t);
            if (hit && !found && *name) found = name;
        }
    }
    cm_buf_release(&a);
    cm_buf_release(&b);
    return found;
}

cm_rc cm_session_key_for(buf *out, const session_route *r)
{
    cm_rc rc = CM_OK;
    if (r->global) return cm_buf_adds(out, "global");
    const char *kind = r->peer_kind && *r->peer_kind ? r->peer_kind : "direct";
    const char *peer = r->peer_id ? r->peer_id : "";
    while (isspace((unsigned char)*peer))
        peer++;
    buf base = BUF_INIT;
    if (!strcmp(kind, "direct")) {
        const char *link = r->dm_scope != SESSION_DM_MAIN && r->identity_links
                               ? linked_peer(r->identity_links, r->channel, peer)
                               : NULL;
        if (link) peer = link;
        if (r->dm_scope == SESSION_DM_MAIN || !*peer) {
            rc = cm_session_main_key(&base, r->agent_id);
        } else {
            rc = cm_buf_adds(&base, "agent:");
            if (!rc) rc = cm_session_agent_id(&base, r->agent_id);
            if (!rc && r->dm_scope != SESSION_DM_PER_PEER) {
                rc = cm_buf_addc(&base, ':');
                size_t at = base.len;
                if (!rc) rc = add_lower(&base, r->channel);
                if (!rc && base.len == at) rc = cm_buf_adds(&base, "unknown");
                if (!rc && r->dm_scope == SESSION_DM_PER_ACCOUNT_CHANNEL_PEER) {
                    rc = cm_buf_addc(&base, ':');
                    if (!rc) rc = add_id(&base, r->account_id, "default");
                }
            }
            if (!rc) rc = cm_buf_adds(&base, ":direct:");
            if (!rc) rc = add_lower(&base, peer);
        }
    } else {
        rc = cm_buf_adds(&base, "agent:");
        if (!rc) rc = cm_session_agent_id(&base, r->agent_id);
        if (!rc) rc = cm_buf_addc(&base, ':');
        size_t at = base.len;
        if (!rc) rc = add_lower(&base, r->channel);
        if (!rc && base.len == at) rc = cm_buf_adds(&base, "unknown");
        if (!rc) rc = cm_buf_printf(&base, ":%s:", kind);
        at = base.len;
        if (!rc) rc = add_lower(&base, peer);
        if (!rc && base.len == at) rc = cm_buf_adds(&base, "unknown");
    }
    if (!rc) rc = cm_buf_add(out, base.data, base.len);
    if (!rc && r->thread_id && *r->thread_id) {
        rc = cm_buf_adds(out, ":thread:");
        if (!rc) rc = add_lower(out, r->thread_id);
    }
    cm_buf_release(&base);
    return rc;
}

/* Whether key is `agent:<id>:<rest>` with both parts present. */
static bool agent_scoped(const char *key, const char **id, size_t *idlen, const char **rest)
{
    while (isspace((unsigned char)*key))
        key++;
    if (strncasecmp(key, "agent:", 6) != 0) return false;
    const char *p = key + 6;
    while (*p == ':')
        p++;
    const char *e = strchr(p, ':');
    if (!e || e == p) return false;
    const char *r = e;
    while (*r == ':')
        r++;
    if (!*r) return false;
    *id = p;
    *idlen = (size_t)(e - p);
    *rest = r;
    return true;
}

cm_rc cm_session_store_key(buf *out, const char *agent_id, const char *request_key)
{
    const char *raw = request_key ? request_key : "";
    while (isspace((unsigned char)*raw))
        raw++;
    if (!*raw || !strcasecmp(raw, "main")) return cm_session_main_key(out, agent_id);
    const char *id, *rest;
    size_t idlen;
    if (agent_scoped(raw, &id, &idlen, &rest)) {
        char idbuf[80];
        snprintf(idbuf, sizeof idbuf, "%.*s", (int)CM_MIN(idlen, sizeof idbuf - 1), id);
        cm_rc rc = cm_buf_adds(out, "agent:");
        if (!rc) rc = add_lower(out, idbuf);
        if (!rc) rc = cm_buf_addc(out, ':');
        if (!rc) rc = add_lower(out, rest);
        return rc;
    }
    if (!strncasecmp(raw, "agent:", 6)) return add_lower(out, raw);
    cm_rc rc = cm_buf_adds(out, "agent:");
    if (!rc) rc = cm_session_agent_id(out, agent_id);
    if (!rc) rc = cm_buf_addc(out, ':');
    if (!rc) rc = add_lower(out, raw);
    return rc;
}

session_chat cm_session_chat_of(const char *key)
{
    const char *id, *rest;
    size_t idlen;
    const char *scoped = agent_scoped(key ? key : "", &id, &idlen, &rest) ? rest : key ? key : "";
    bool group = false, channel = false, direct = false;
    for (const char *p = scoped; *p;) {
        size_t n = strcspn(p, ":");
        if (n == 5 && !strncasecmp(p, "group", 5)) group = true;
        if (n == 7 && !strncasecmp(p, "channel", 7)) channel = true;
        if ((n == 6 && !strncasecmp(p, "direct", 6)) || (n == 2 && !strncasecmp(p, "dm", 2)))
            direct = true;
        p += n + (p[n] == ':');
    }
    return group     ? SESSION_CHAT_GROUP
           : channel ? SESSION_CHAT_CHANNEL
           : direct  ? SESSION_CHAT_DIRECT
                     : SESSION_CHAT_UNKNOWN;
}

cm_rc cm_session_key_agent(buf *out, const char *key)
{
    const char *id, *rest;
    size_t idlen;
    if (!agent_scoped(key ? key : "", &id, &idlen, &rest)) return cm_buf_adds(out, "main");
    char idbuf[80];
    snprintf(idbuf, sizeof idbuf, "%.*s", (int)CM_MIN(idlen, sizeof idbuf - 1), id);
    return cm_session_agent_id(out, idbuf);
}
