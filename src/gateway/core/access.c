/*
 * access.c — who may reach the agent: DM policies (pairing, allowlist, open,
 * disabled), group policies with groups entries, groupAllowFrom and mention
 * gating, as QuantumClaw 2026.3.22 decides them. The pairing store itself
 * (pending requests, approved senders) is pairing.c.
 */
#include "access.h"
#include "pairing.h"

#include <ctype.h>
#include <strings.h>

/* ---- config ------------------------------------------------------------- */

/* The policies as 2026.3.22 names them (runtime_config.h's indexes). */
static const char *const S_dm_names[] = {"pairing", "allowlist", "open", "disabled"};
static const char *const S_group_names[] = {"open", "disabled", "allowlist"};

static const char *S_dm_policy(const cm_rt_chan *c)
{
    return c->dm_policy >= 0 ? S_dm_names[c->dm_policy] : "pairing";
}

static size_t S_count(const json_t *list)
{
    size_t i, k = 0;
    const json_t *v;
    char e[512];
    json_array_foreach(list, i, v) k += cm_gw_allow_entry(v, e, sizeof e);
    return k;
}

static bool S_has_wildcard(const json_t *list)
{
    size_t i;
    const json_t *v;
    char e[512];
    json_array_foreach(list, i,
                       v) if (cm_gw_allow_entry(v, e, sizeof e) && strcmp(e, "*") == 0) return true;
    return false;
}

/* True when sender is in list: "*", the id itself, or "<channel>:<id>". */
static bool S_listed(const json_t *list, const char *channel, const char *sender, bool wildcard)
{
    size_t i, cl = strlen(channel);
    const json_t *v;
    char e[512];
    if (!sender || !*sender) return false;
    json_array_foreach(list, i, v)
    {
        if (!cm_gw_allow_entry(v, e, sizeof e)) continue;
        if (wildcard && strcmp(e, "*") == 0) return true;
        const char *id = e;
        if (strncasecmp(e, channel, cl) == 0 && e[cl] == ':') id = e + cl + 1;
        if (strcmp(id, sender) == 0) return true;
    }
    return false;
}

cm_rc cm_gw_access_validate(const cm_rtcfg *cfg, const char *channel, const char *account,
                            char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    /* kinds and choices were checked at load (runtime_config.c); what is
     * left is 2026.3.22's requireAllowlistAllowFrom / requireOpenAllowFrom */
    const cm_rt_chan *c = cm_rtcfg_chan(cfg, channel, account);
    const char *p = S_dm_policy(c);
    if (!strcmp(p, "allowlist") && S_count(c->allow_from) == 0)
        FAIL(CM_ECONFIG, "channels.%s.dmPolicy is \"allowlist\" but allowFrom is empty", channel);
    if (!strcmp(p, "open") && !S_has_wildcard(c->allow_from))
        FAIL(CM_ECONFIG, "channels.%s.dmPolicy is \"open\" but allowFrom lacks \"*\"", channel);
out:
    return rc;
}

/* ---- the check ---------------------------------------------------------- */

/* commands.allowFrom["<ch>"], else its "*" entry: NULL when neither is a list. */
static const json_t *S_cmd_allow(const json_t *root, const char *ch)
{
    const json_t *ca = json_object_get(json_object_get(root, "commands"), "allowFrom");
    const json_t *l = json_object_get(ca, ch);
    if (!json_is_array(l)) l = json_object_get(ca, "*");
    return json_is_array(l) ? l : NULL;
}

/* res->commands for an allowed message whose chat allowlist is list (may
 * be NULL) and whose sender was listed in it (listed). */
static void S_commands(const json_t *root, const char *ch, const gw_msg *m, const json_t *list,
                       bool listed, gw_access_result *res)
{
    const json_t *ca = S_cmd_allow(root, ch);
    if (json_is_false(json_object_get(json_object_get(root, "commands"), "useAccessGroups")))
        res->commands = true;
    else if (ca)
        res->commands = S_listed(ca, ch, m->sender, true);
    else
        res->commands = listed || (S_count(list) && S_listed(list, ch, m->sender, true));
}

static cm_rc S_check_group(const json_t *root, const cm_rt_chan *c, const char *ch, const gw_msg *m,
                           gw_access_result *res)
{
    /* groups.<id> stay raw: a record of objects looked up by the peer */
    const json_t *groups = c->groups;
    const json_t *entry = json_object_get(groups, m->peer ? m->peer : "");
    const json_t *star = json_object_get(groups, "*");
    const json_t *gp = json_object_get(entry, "groupPolicy");
    if (!gp) gp = json_object_get(star, "groupPolicy");
    const char *policy = json_is_string(gp)     ? json_string_value(gp)
                         : c->group_policy >= 0 ? S_group_names[c->group_policy]
                                                : "allowlist";
    res->verdict = GW_ACCESS_DENY;
    if (strcmp(policy, "open") && strcmp(policy, "disabled")) policy = "allowlist";
    if (!strcmp(policy, "disabled")) {
        res->reason = "groupPolicy=disabled";
        return CM_OK;
    }
    if (json_is_false(json_object_get(entry, "enabled"))) {
        res->reason = "group disabled";
        return CM_OK;
    }
    /* groups entries, when present, are the group allowlist whatever the
     * policy; with none, only an open policy lets a group in */
    if (json_object_size(groups) > 0 ? !entry && !star : !strcmp(policy, "allowlist")) {
        res->reason = "groupPolicy=allowlist (group not allowlisted)";
        return CM_OK;
    }
    const json_t *list = json_object_get(entry, "allowFrom");
    if (!S_count(list)) list = c->group_allow_from;
    if (!S_count(list)) list = c->allow_from;
    if (!strcmp(policy, "allowlist")) {
        if (!S_count(list)) {
            res->reason = "groupPolicy=allowlist (empty allowlist)";
            return CM_OK;
        }
        if (!S_listed(list, ch, m->sender, true)) {
            res->reason = "groupPolicy=allowlist (not allowlisted)";
            return CM_OK;
        }
    }
    const json_t *rm = json_object_get(entry, "requireMention");
    if (!json_is_boolean(rm)) rm = json_object_get(star, "requireMention");
    bool require = json_is_boolean(rm) ? json_is_true(rm) : true;
    if (require && !m->mentioned) {
        res->verdict = GW_ACCESS_NO_MENTION;
        res->reason = "requireMention (not mentioned)";
        return CM_OK;
    }
    res->verdict = GW_ACCESS_ALLOW;
    res->reason = !strcmp(policy, "open") ? "groupPolicy=open" : "groupPolicy=allowlist";
    S_commands(root, ch, m, list, false, res);
    return CM_OK;
}

cm_rc cm_gw_access_check(const cm_rtcfg *cfg, const char *state_dir, const gw_msg *m,
                         int64_t now_ms, gw_access_result *res, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    json_t *store = NULL;
    char acct[128], ch[128];
    memset(res, 0, sizeof *res);
    res->verdict = GW_ACCESS_DENY;
    res->reason = "error";
    if (!m->channel || !*m->channel) FAIL(CM_EINVAL, "an inbound message without a channel");
    snprintf(ch, sizeof ch, "%s", m->channel);
    for (char *p = ch; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    /* normalizePairingAccountId: trimmed, lower-cased, "default" when blank */
    json_t *a = m->account ? json_string(m->account) : NULL;
    if (!a || !cm_gw_allow_entry(a, acct, sizeof acct)) snprintf(acct, sizeof acct, "default");
    json_decref(a);
    for (char *p = acct; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    CHECK(cm_gw_access_validate(cfg, ch, acct, err, errlen));
    const cm_rt_chan *c = cm_rtcfg_chan(cfg, ch, acct);
    const json_t *root = cfg ? cfg->root : NULL; /* commands.* are read raw */
    if (m->is_group) {
        CHECK(S_check_group(root, c, ch, m, res));
        goto out;
    }
    const char *policy = S_dm_policy(c);
    const json_t *allow = c->allow_from;
    if (!strcmp(policy, "disabled")) {
        res->reason = "dmPolicy=disabled";
        goto out;
    }
    if (!strcmp(policy, "open")) {
        res->verdict = GW_ACCESS_ALLOW;
        res->reason = "dmPolicy=open";
        S_commands(root, ch, m, allow, true, res); /* allowFrom holds "*" */
        goto out;
    }
    if (!m->sender || !*m->sender) {
        res->reason = "no sender id";
        goto out;
    }
    bool listed = S_listed(allow, ch, m->sender, true);
    if (!listed && strcmp(policy, "allowlist") != 0) {
        if (!(store = json_array())) FAIL(CM_ENOMEM, "out of memory");
        CHECK(cm_gw_allowfrom_read(state_dir, ch, acct, store, err, errlen));
        listed = S_listed(store, ch, m->sender, false);
    }
    if (listed) {
        res->verdict = GW_ACCESS_ALLOW;
        res->reason = !strcmp(policy, "pairing") ? "dmPolicy=pairing (allowlisted)"
                                                 : "dmPolicy=allowlist (allowlisted)";
        S_commands(root, ch, m, allow, true, res);
        goto out;
    }
    if (!strcmp(policy, "allowlist")) {
        res->reason = "dmPolicy=allowlist (not allowlisted)";
        goto out;
    }
    CHECK(cm_gw_pairing_request(state_dir, ch, acct, m->sender, now_ms, res, err, errlen));
out:
    if (rc || res->verdict != GW_ACCESS_ALLOW) res->commands = false;
    if (rc) {
        res->verdict = GW_ACCESS_DENY; /* an error never lets a message through */
        res->code[0] = 0;
        res->reason = "error";
    }
    json_decref(store);
    return rc;
}

/* ---- trust: who may be offered exec ------------------------------------- */

cm_rc cm_gw_access_trusted(const cm_rtcfg *cfg, const char *state_dir, const char *channel,
                           const char *account, const char *peer, bool is_group, bool *trusted,
                           char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    json_t *store = NULL;
    char acct[128], ch[128];
    *trusted = false;
    if (!channel || !*channel) return CM_OK; /* a run without a channel: the caller decides */
    if (!strcmp(channel, "terminal") || !strcmp(channel, "webchat")) {
        *trusted = true; /* the owner's console, behind the gateway token */
        return CM_OK;
    }
    if (is_group || !peer || !*peer) return CM_OK; /* a group has many writers */
    if (!strcmp(channel, "internal")) return CM_OK; /* sessions_send: never trusted */
    snprintf(ch, sizeof ch, "%s", channel);
    for (char *p = ch; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    json_t *a = account ? json_string(account) : NULL;
    if (!a || !cm_gw_allow_entry(a, acct, sizeof acct)) snprintf(acct, sizeof acct, "default");
    json_decref(a);
    for (char *p = acct; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    const cm_rt_chan *c = cm_rtcfg_chan(cfg, ch, acct);
    const char *policy = S_dm_policy(c);
    if (!strcmp(policy, "disabled")) goto out;
    /* anyone may write when the policy is open: with the default dmScope
     * "main" their messages share the session every DM runs in */
    int scope = cfg ? cfg->session.dm_scope : -1; /* 0: main */
    if (!strcmp(policy, "open") && scope <= 0) goto out;
    /* named explicitly ("*" is no one in particular) */
    if (S_listed(c->allow_from, ch, peer, false)) {
        *trusted = true;
        goto out;
    }
    if (!strcmp(policy, "pairing")) { /* approved through pairing */
        if (!(store = json_array())) FAIL(CM_ENOMEM, "out of memory");
        CHECK(cm_gw_allowfrom_read(state_dir, ch, acct, store, err, errlen));
        *trusted = S_listed(store, ch, peer, false);
    }
out:
    if (rc) *trusted = false;
    json_decref(store);
    return rc;
}
