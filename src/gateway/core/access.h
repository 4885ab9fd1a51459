/*
 * access.h — who may reach the agent at all (access.c): dmPolicy and
 * groupPolicy, the chat's allowlists, the command authorization, and which
 * senders are trusted with the host tools. The pairing store it consults is
 * pairing.h's. 2026.3.22's semantics.
 */
#ifndef CM_GW_ACCESS_H
#define CM_GW_ACCESS_H

#include "../../base/common.h"
#include "../../config/runtime_config.h"
#include "inbound.h"

/* 2026.3.22 src/pairing/pairing-store.ts: 8 characters from an alphabet
 * without 0 O 1 I, pending for 1 hour, at most 3 pending per channel. */
#define GW_PAIRING_CODE_LEN    8
#define GW_PAIRING_ALPHABET    "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
#define GW_PAIRING_TTL_MS      (60 * 60 * 1000)
#define GW_PAIRING_MAX_PENDING 3

typedef enum gw_access_verdict {
    GW_ACCESS_ALLOW,           /* run the agent */
    GW_ACCESS_DENY,            /* drop: no run, no reply */
    GW_ACCESS_PAIRING_ISSUED,  /* a new pairing request: send code to the sender, no run */
    GW_ACCESS_PAIRING_PENDING, /* a request is already pending (or the cap is hit): no run,
                                  no reply */
    GW_ACCESS_NO_MENTION       /* allowed group message without a mention: history only */
} gw_access_verdict;

typedef struct gw_access_result {
    gw_access_verdict verdict;
    char code[GW_PAIRING_CODE_LEN + 1]; /* GW_ACCESS_PAIRING_ISSUED: the code */
    const char *reason;                 /* static, for logs: "dmPolicy=pairing (…)" */
    /* GW_ACCESS_ALLOW: the sender may use the control commands (2026.3.22's
     * command authorization): commands.useAccessGroups false; else the
     * sender named in commands.allowFrom["<channel>"] (or its "*" entry)
     * when that is set; else in a non-empty allowlist of the chat — a DM's
     * allowFrom ("*" counts) or its approved senders, a group's allowFrom,
     * groupAllowFrom or allowFrom. An open group with no list: false. */
    bool commands;
} gw_access_result;

/* Checks channels.<channel> (and channels.<channel>.accounts.<account>, which
 * overrides it key by key) for the access rules' config errors the load
 * leaves (it checks kinds and choices): dmPolicy "allowlist" with an empty
 * allowFrom, dmPolicy "open" without "*" in allowFrom. CM_ECONFIG with the
 * key named. cfg may be NULL (defaults). */
cm_rc cm_gw_access_validate(const cm_rtcfg *cfg, const char *channel, const char *account,
                            char *err, size_t errlen);

/* Decides whether m may reach the agent, as 2026.3.22 does:
 * - direct: dmPolicy disabled → deny; open → allow; a sender in allowFrom
 *   (or, unless the policy is allowlist, in the pairing allow-from store) →
 *   allow; pairing → a pending request in <state_dir>/credentials/
 *   <channel>-pairing.json (issued or already pending); allowlist → deny;
 * - group: the group's groupPolicy (groups.<peer> or groups."*", else the
 *   channel's, default allowlist): disabled → deny; a group entry with
 *   enabled false → deny; allowlist → the group must be a groups entry (or
 *   "*" be one) and the sender in the group's allowFrom, else groupAllowFrom,
 *   else allowFrom (never the pairing store); then requireMention (default
 *   true) without m->mentioned → GW_ACCESS_NO_MENTION.
 * now_ms is wall-clock Unix time in ms (stored as ISO timestamps). Runs
 * cm_gw_access_validate first: a config error is CM_ECONFIG and never an allow.
 * Store files are written under src/base/lockfile.h's lock. */
cm_rc cm_gw_access_check(const cm_rtcfg *cfg, const char *state_dir, const gw_msg *m,
                         int64_t now_ms, gw_access_result *res, char *err, size_t errlen);

/* Whether the sender of a run may be offered the tools that act on the
 * host (exec, process): the owner's console ("terminal", "webchat"), or a
 * direct chat whose peer (the sender: a DM's peer is its writer) is named in
 * channels.<channel>[.accounts.<acct>].allowFrom (not by "*") or, under
 * dmPolicy pairing, approved in the allow-from store. Never a group, never
 * dmPolicy disabled, and never dmPolicy open while session.dmScope is "main"
 * (anyone's messages then share the session). An error is CM_E* with
 * *trusted false. No channel: *trusted false (the caller decides). */
cm_rc cm_gw_access_trusted(const cm_rtcfg *cfg, const char *state_dir, const char *channel,
                           const char *account, const char *peer, bool is_group, bool *trusted,
                           char *err, size_t errlen);

#endif
