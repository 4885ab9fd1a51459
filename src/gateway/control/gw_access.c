/*
 * gw_access.c — clawmem's own gateway methods for the Control UI's Access
 * page (QuantumClaw 2026.3.22 has no gateway method for channel DM pairing:
 * its `openclaw pairing` CLI edits the stores directly; these use the same
 * stores through pairing.c, so either side sees the other's changes):
 *   clawmem.pairing.list    {}  (operator.read)
 *       {"ts","channels":[{"channel","dmPolicy","allowFrom":[config],
 *        "accounts":[{"accountId","approved":[store]}],"requests":[{"code",
 *        "id","accountId","createdAt","lastSeenAt"}]}]}
 *   clawmem.pairing.approve {channel, code, accountId?, notify? (true)}
 *       (operator.write) {"ok","channel","id","notified"}: the sender is
 *       allowed and, unless notify is false, told so on its channel with the
 *       reference's approval message (its `pairing approve --notify`)
 *   clawmem.pairing.deny    {channel, code, accountId?} (operator.write)
 *       {"ok","channel","id"}: the request is dropped; the sender stays
 *       unapproved (a later message asks again)
 * A code not pending is NOT_FOUND. Each call reads the config's state dir;
 * the channels listed are the configured, the running and any with a
 * pairing store there (QuantumClaw may have written it).
 */
#include <ctype.h>
#include <dirent.h>

#include "../../config/config.h"
#include "gw_access.h"
#include "../core/pairing.h"

#define APPROVED_TEXT "\xe2\x9c\x85 QuantumClaw access approved. Send a message to start chatting."

static void log_to(void *ctx, cm_log_level level, const char *msg)
{
    (void)ctx, (void)level, (void)msg; /* config warnings: the gateway logged them at start */
}

static cm_rc S_config(gw_ws *w, cm_config *cfg, char *err, size_t errlen)
{
    cm_config_args a = {w->agent_id0, w->workspace, w->config_path, w->state_dir};
    cm_logger lg = {log_to, NULL};
    return cm_config_init(&a, &lg, cfg, err, errlen);
}

/* The channel id lower-cased into out; false when absent or too long. */
static bool S_channel(const json_t *p, char *out, size_t n)
{
    const char *s = json_string_value(json_object_get(p, "channel"));
    size_t len = s ? strlen(s) : 0;
    if (!len || len >= n) return false;
    for (size_t i = 0; i <= len; i++)
        out[i] = (char)tolower((unsigned char)s[i]);
    return true;
}

static bool S_in(const json_t *arr, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        if (json_is_string(v) && !strcmp(json_string_value(v), s)) return true;
    }
    return false;
}

/* The channels to show: the configured ones, those running (not webchat,
 * which has no access rules), then any with a pairing store under
 * <state_dir>/credentials/ (<channel>-pairing.json). */
static json_t *S_channel_names(gw_ws *w, const json_t *root, const char *state_dir)
{
    json_t *names = json_array();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)json_object_get(root, "channels"), k, v)
    {
        if (json_is_object(v) && !S_in(names, k)) json_array_append_new(names, json_string(k));
    }
    json_t *s = cm_gw_ws_status(w);
    size_t i;
    json_array_foreach(json_object_get(s, "channels"), i, v)
    {
        const char *n = json_string_value(json_object_get(v, "channel"));
        if (n && strcmp(n, "webchat") && strcmp(n, "terminal") && !S_in(names, n))
            json_array_append_new(names, json_string(n));
    }
    json_decref(s);
    buf dir = BUF_INIT;
    DIR *d = cm_buf_printf(&dir, "%s/credentials", state_dir) ? NULL : opendir(dir.data);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t n = strlen(de->d_name), suf = sizeof "-pairing.json" - 1;
        if (n <= suf || n - suf >= 64 || strcmp(de->d_name + n - suf, "-pairing.json")) continue;
        char ch[64];
        snprintf(ch, sizeof ch, "%.*s", (int)(n - suf), de->d_name);
        bool plain = true;
        for (const char *q = ch; *q; q++)
            plain &=
                islower((unsigned char)*q) || isdigit((unsigned char)*q) || *q == '_' || *q == '-';
        if (plain && !S_in(names, ch)) json_array_append_new(names, json_string(ch));
    }
    if (d) closedir(d);
    cm_buf_release(&dir);
    return names;
}

static json_t *S_one(const json_t *root, const char *state_dir, const char *name, int64_t now)
{
    const json_t *cc = json_object_get(json_object_get(root, "channels"), name);
    const char *pol = json_string_value(json_object_get(cc, "dmPolicy"));
    json_t *allow = json_array(), *accts = json_array(), *reqs = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(cc, "allowFrom"), i, v)
    {
        char e[512];
        if (cm_gw_allow_entry(v, e, sizeof e)) json_array_append_new(allow, json_string(e));
    }
    char ch[128], err[256];
    snprintf(ch, sizeof ch, "%s", name);
    for (char *p = ch; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    json_t *names = json_pack("[s]", "default");
    const char *k;
    json_object_foreach((json_t *)json_object_get(cc, "accounts"), k, v)
    {
        if (!S_in(names, k)) json_array_append_new(names, json_string(k));
    }
    json_array_foreach(names, i, v)
    {
        json_t *got = json_array();
        if (cm_gw_allowfrom_read(state_dir, ch, json_string_value(v), got, err, sizeof err))
            json_array_clear(got);
        json_array_append_new(accts, json_pack("{s:O,s:o}", "accountId", v, "approved", got));
    }
    json_decref(names);
    if (cm_gw_pairing_list(state_dir, ch, now, reqs, err, sizeof err)) json_array_clear(reqs);
    return json_pack("{s:s,s:s,s:o,s:o,s:o}", "channel", name, "dmPolicy", pol ? pol : "pairing",
                     "allowFrom", allow, "accounts", accts, "requests", reqs);
}

static void m_list(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    (void)p;
    cm_config cfg = {0};
    char err[512];
    if (S_config(w, &cfg, err, sizeof err)) {
        cm_config_release(&cfg);
        return cm_gw_ws_fail(cl, id, "UNAVAILABLE", err, NULL);
    }
    int64_t now = cm_wall_ms();
    cm_rtcfg *hold;
    const json_t *root = cm_gw_ws_config(w, &hold);
    json_t *names = S_channel_names(w, root, cfg.state_dir), *out = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(names, i, v)
    {
        json_array_append_new(out, S_one(root, cfg.state_dir, json_string_value(v), now));
    }
    cm_rtcfg_unref(hold);
    json_decref(names);
    cm_config_release(&cfg);
    cm_gw_ws_ok(cl, id, json_pack("{s:I,s:o}", "ts", (json_int_t)now, "channels", out));
}

static void S_resolve(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p, bool approve)
{
    const char *method = approve ? "clawmem.pairing.approve" : "clawmem.pairing.deny";
    char ch[128], sender[512], err[512], msg[256];
    const char *code = json_string_value(json_object_get(p, "code"));
    const char *acct = json_string_value(json_object_get(p, "accountId"));
    if (!S_channel(p, ch, sizeof ch) || !code || !*code) {
        snprintf(msg, sizeof msg, "invalid %s params: channel and code are required", method);
        return cm_gw_ws_fail(cl, id, "INVALID_REQUEST", msg, NULL);
    }
    cm_config cfg = {0};
    cm_rc rc = S_config(w, &cfg, err, sizeof err);
    if (!rc)
        rc = (approve ? cm_gw_pairing_approve
                      : cm_gw_pairing_deny)(cfg.state_dir, ch, acct && *acct ? acct : NULL, code,
                                            cm_wall_ms(), sender, sizeof sender, err, sizeof err);
    cm_config_release(&cfg);
    if (rc == CM_ENOTFOUND || rc == CM_EINVAL)
        return cm_gw_ws_fail(cl, id, "NOT_FOUND", "no pending pairing request with that code",
                             NULL);
    if (rc) return cm_gw_ws_fail(cl, id, "UNAVAILABLE", err, NULL);
    cm_logf(w->o.log, CM_LOG_INFO, "gateway: pairing %s on %s: %s", approve ? "approved" : "denied",
            ch, sender);
    json_t *res = json_pack("{s:b,s:s,s:s}", "ok", 1, "channel", ch, "id", sender);
    if (approve) {
        bool notify = !json_is_false(json_object_get(p, "notify")), sent = false;
        if (notify)
            sent = cm_gw_ws_notify(w, ch, acct && *acct ? acct : NULL, sender, APPROVED_TEXT);
        json_object_set_new(res, "notified", json_boolean(sent));
    }
    cm_gw_ws_ok(cl, id, res);
}

void cm_gw_ws_pairing_list(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    m_list(w, cl, id, p);
}

void cm_gw_ws_pairing_approve(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    S_resolve(w, cl, id, p, true);
}

void cm_gw_ws_pairing_deny(gw_ws *w, gw_ws_client *cl, const char *id, json_t *p)
{
    S_resolve(w, cl, id, p, false);
}
