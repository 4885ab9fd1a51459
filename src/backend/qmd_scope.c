/*
 * qmd_scope.c — memory.qmd.scope, as QuantumClaw 2026.3.22 applies it: the
 * caller's session key lower-cased, "agent:<id>:" stripped (the normalised
 * key), its channel and chat type derived; the first rule whose match fits
 * decides, else the default. keyPrefix matches the normalised key, except a
 * legacy "agent:…" prefix, which matches the raw key, as rawKeyPrefix does.
 */
#include <ctype.h>

#include "qmd.h"

/* s[0..n) trimmed and lower-cased into out (cut to cap). */
static void lower_trim(const char *s, char *out, size_t cap)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    while (n && isspace((unsigned char)*s))
        s++, n--;
    size_t i = 0;
    for (; i < n && i + 1 < cap; i++)
        out[i] = (char)tolower((unsigned char)s[i]);
    out[i] = 0;
}

void cm_backend_qmd_scope_parse(const char *session_key, qmd_scope_key *k)
{
    char raw[256], *parts[16];
    size_t np = 0;
    memset(k, 0, sizeof *k);
    if (!session_key) return;
    lower_trim(session_key, raw, sizeof raw);
    if (!*raw) return;
    /* "agent:<id>:<rest>" (empty parts dropped) → rest */
    const char *rest = raw, *p = raw;
    while (*p == ':')
        p++;
    if (!strncmp(p, "agent:", 6)) {
        const char *id = p + 6;
        while (*id == ':')
            id++;
        const char *id_end = strchr(id, ':');
        if (id_end && id_end > id) {
            const char *r = id_end;
            while (*r == ':')
                r++;
            if (*r) rest = r;
        }
    }
    snprintf(k->normal, sizeof k->normal, "%s", rest);
    if (!strncmp(k->normal, "subagent:", 9)) { /* 2026.3.22: no scope for subagents */
        k->normal[0] = 0;
        return;
    }
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", k->normal);
    for (char *cur = tmp, *save = NULL; np < ARRAY_LEN(parts);) {
        char *t = strtok_r(cur, ":", &save);
        cur = NULL;
        if (!t) break;
        parts[np++] = t;
    }
    if (np >= 2 && (!strcmp(parts[1], "group") || !strcmp(parts[1], "channel") ||
                    !strcmp(parts[1], "direct") || !strcmp(parts[1], "dm"))) {
        const char *type = "direct";
        for (size_t i = 0; i < np; i++)
            if (!strcmp(parts[i], "group")) {
                type = "group";
                break;
            }
        if (!strcmp(type, "direct"))
            for (size_t i = 0; i < np; i++)
                if (!strcmp(parts[i], "channel")) type = "channel";
        snprintf(k->channel, sizeof k->channel, "%s", parts[0]);
        snprintf(k->chat_type, sizeof k->chat_type, "%s", type);
        return;
    }
    snprintf(k->chat_type, sizeof k->chat_type, "%s",
             strstr(k->normal, ":group:")     ? "group"
             : strstr(k->normal, ":channel:") ? "channel"
                                              : "direct");
}

bool cm_backend_qmd_scope_allowed(const cm_qmd_config *q, const char *session_key)
{
    const cm_qmd_rule *rules = q->rules;
    size_t nrules = q->nrules;
    bool def = q->scope_default_allow;
    static const cm_qmd_rule dm_only = {true, NULL, (char *)"direct", NULL, NULL};
    if (!q->scope_set) { /* 2026.3.22's default: deny, allow direct chats */
        rules = &dm_only;
        nrules = 1;
        def = false;
    }
    qmd_scope_key k;
    char raw[256] = "", pre[256];
    cm_backend_qmd_scope_parse(session_key, &k);
    if (session_key) lower_trim(session_key, raw, sizeof raw);
    for (size_t i = 0; i < nrules; i++) {
        const cm_qmd_rule *r = &rules[i];
        if (r->channel) {
            lower_trim(r->channel, pre, sizeof pre);
            if (strcmp(pre, k.channel) != 0) continue;
        }
        if (r->chat_type && strcmp(r->chat_type, k.chat_type) != 0) continue;
        if (r->raw_key_prefix) {
            lower_trim(r->raw_key_prefix, pre, sizeof pre);
            if (*pre && strncmp(raw, pre, strlen(pre)) != 0) continue;
        }
        if (r->key_prefix) {
            lower_trim(r->key_prefix, pre, sizeof pre);
            const char *against = !strncmp(pre, "agent:", 6) ? raw : k.normal;
            if (*pre && strncmp(against, pre, strlen(pre)) != 0) continue;
        }
        return r->allow;
    }
    return def;
}
