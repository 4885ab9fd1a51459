/*
 * clawmem/gateway.h — who may reach an agent through a chat channel, in
 * QuantumClaw's own pairing store (`<stateDir>/credentials/`): with
 * `channels.<channel>.dmPolicy: "pairing"` (the default) an unknown sender
 * gets a one-time code and no answer until the owner approves the code.
 * The store is QuantumClaw 2026.3.22's, so codes its gateway issued can be
 * listed and approved here, and the other way round. Included by clawmem.h.
 */
#ifndef CLAWMEM_GATEWAY_H
#define CLAWMEM_GATEWAY_H

#ifdef __cplusplus
extern "C" {
#endif

/* {"channel": c, "requests": [{"code", "id", "accountId", "createdAt",
 * "lastSeenAt"}…]}: the channel's pending pairing requests that have not
 * expired (1 hour). The caller frees *json with cm_free. */
cm_rc cm_pairing_list(const cm_options *opt, const char *channel, char **json, char *err,
                      size_t errlen);

/* Approves a pending request by its code (any case): its sender joins the
 * channel's allow-from store and the request is removed. *json receives
 * {"channel": c, "approved": id}. CM_ENOTFOUND when no
 * unexpired request has that code. */
cm_rc cm_pairing_approve(const cm_options *opt, const char *channel, const char *code,
                         char **json, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
