/*
 * dedupe.h — the gateway's dedupe of redelivered messages (dedupe.c): a
 * cache of seen keys with a TTL and a size cap, and the key of a message.
 * Pure logic over an injected clock (`now_ms`); not thread safe: one owner.
 * Constants and semantics are QuantumClaw 2026.3.22's.
 */
#ifndef CM_GW_DEDUPE_H
#define CM_GW_DEDUPE_H

#include "../../base/buf.h"
#include "../../base/common.h"
#include "inbound.h"

/* 2026.3.22 src/auto-reply/reply/inbound-dedupe.ts: ttlMs 20 min, maxSize 5000. */
#define GW_DEDUPE_TTL_MS (20 * 60 * 1000)
#define GW_DEDUPE_MAX    5000

typedef struct gw_dedupe gw_dedupe;

/* A cache of seen keys, each forgotten ttl_ms after it was last seen, at most
 * max keys (the least recently seen evicted first). ttl_ms 0: no expiry.
 * CM_EINVAL when max is 0. */
cm_rc cm_gw_dedupe_open(int64_t ttl_ms, size_t max, gw_dedupe **out);
void cm_gw_dedupe_close(gw_dedupe *d);

/* Writes m's dedupe key into out (reset first): channel (trimmed,
 * lower-cased), account, session scope ("agent:<id>" for an "agent:<id>:…"
 * session key, else the key), peer, thread and message id, each trimmed and
 * written as <length>:<bytes> (an absent part "0:"), joined with '|' — the
 * length prefixes make the key unambiguous whatever the parts contain.
 * Returns false (out empty) when the message has no channel, message id or
 * peer — such a message is never treated as a duplicate. */
bool cm_gw_dedupe_key(const gw_msg *m, buf *out);

/* Keys journaled by versions before the length-prefixed form: the non-empty
 * parts joined with '|' (ambiguous: "alice|7" as a peer or "alice" and
 * thread "7"), behind this prefix so that they never equal a current key.
 * Read back from an older journal and checked only until they expire. */
#define GW_DEDUPE_LEGACY_PREFIX "v1|"
bool cm_gw_dedupe_key_legacy(const gw_msg *m, buf *out);

/* Returns true when key was seen less than ttl ago (a duplicate: drop it);
 * either way key is recorded as seen at now_ms. On out of memory the key is
 * treated as new (false) and not recorded. O(1) amortized. */
bool cm_gw_dedupe_check(gw_dedupe *d, const char *key, int64_t now_ms);

/* True when key was seen less than ttl ago; records nothing. */
bool cm_gw_dedupe_peek(const gw_dedupe *d, const char *key, int64_t now_ms);

/* Checks m (cm_gw_dedupe_key then cm_gw_dedupe_check). */
bool cm_gw_dedupe_check_msg(gw_dedupe *d, const gw_msg *m, int64_t now_ms);

size_t cm_gw_dedupe_size(const gw_dedupe *d);

#endif
