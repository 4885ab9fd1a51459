/*
 * pairing.h — QuantumClaw's pairing and allow-from stores (pairing.c):
 * <state_dir>/credentials/<channel>-pairing.json and
 * <channel>-<account>-allowFrom.json, written under src/base/lockfile.h's
 * lock. 2026.3.22's formats.
 */
#ifndef CM_GW_PAIRING_H
#define CM_GW_PAIRING_H

#include <jansson.h>

#include "../../base/common.h"
#include "access.h"

/* `pairing approve <channel> <code>`: the pending request with code (any
 * case, surrounding blanks ignored; of account when account is not NULL) is
 * removed and its sender added to the allow-from store of the request's
 * account (<channel>-<account>-allowFrom.json, {"version":1,"allowFrom":[…]}).
 * Writes the approved sender id into id (may be NULL). CM_ENOTFOUND when no
 * unexpired request has that code. */
cm_rc cm_gw_pairing_approve(const char *state_dir, const char *channel, const char *account,
                            const char *code, int64_t now_ms, char *id, size_t idlen, char *err,
                            size_t errlen);

/* Denies the pending request with code (as cm_gw_pairing_approve finds it):
 * removed without approving its sender, whose id is written into id (may be
 * NULL). CM_ENOTFOUND when no unexpired request has that code. */
cm_rc cm_gw_pairing_deny(const char *state_dir, const char *channel, const char *account,
                         const char *code, int64_t now_ms, char *id, size_t idlen, char *err,
                         size_t errlen);

/* `pairing list <channel>`: appends the unexpired pending requests of
 * <channel>-pairing.json to out as {"code","id","accountId","createdAt",
 * "lastSeenAt"} (nothing when the file is missing). */
cm_rc cm_gw_pairing_list(const char *state_dir, const char *channel, int64_t now_ms, json_t *out,
                         char *err, size_t errlen);

/* For access.c (not for other callers). */
/* An allow-list entry (string or integer) as a trimmed string; false when
 * blank or longer than n - 1. */
bool cm_gw_allow_entry(const json_t *v, char *out, size_t n);
/* upsertChannelPairingRequest for sender: res becomes PAIRING_ISSUED (new
 * code) or PAIRING_PENDING. channel and account already lower-cased. */
cm_rc cm_gw_pairing_request(const char *state_dir, const char *channel, const char *account,
                            const char *sender, int64_t now_ms, gw_access_result *res, char *err,
                            size_t errlen);
/* Appends the approved senders of (channel, account) to out, a JSON array. */
cm_rc cm_gw_allowfrom_read(const char *state_dir, const char *channel, const char *account,
                           json_t *out, char *err, size_t errlen);

#endif
