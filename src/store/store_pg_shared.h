/*
 * store_pg_shared.h — what `clawmem serve` replicas over one PostgreSQL
 * share beside the index (docs/postgresql.md "Replicas"):
 *   - MCP sessions of the 2025-11-25 era in clawmem_mcp_sessions(agent_id,
 *     id, owner, created_ms, last_ms, expires_ms), so a session opened on one
 *     replica is accepted on every other until it expires. The table holds a
 *     hash of each session id and of each bearer token, never either.
 *   - the watcher lease: a session-level advisory lock per agent that one
 *     replica at a time holds while its watcher writes that agent's index;
 *     the others follow the index (searches read committed rows, vectors
 *     follow the vector log). The lock ends with its connection, so a
 *     replica that dies (kill -9 too) hands the lease on.
 * Thread safety: a cm_pg_shared may be used by many threads at once (a small
 * pool of connections, taken under a mutex, used outside it); a cm_pg_lease
 * by one thread at a time.
 */
#ifndef CM_STORE_PG_SHARED_H
#define CM_STORE_PG_SHARED_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/common.h"

/* Connections a cm_pg_shared opens at most (on demand). */
#define PG_SHARED_POOL 4

typedef struct cm_pg_shared cm_pg_shared;

/* Connects to dsn (a secret: never in a message) and creates the sessions
 * table when absent (idempotent, many replicas at once). *out is freed with
 * cm_pg_shared_free. */
cm_rc cm_pg_shared_open(const char *dsn, cm_pg_shared **out, char *err, size_t errlen);
void cm_pg_shared_free(cm_pg_shared *sh);

/* One session row: the agent, a hash of the token that opened it ("" without
 * tokens) and a hash of its id (both hex, never the secrets themselves). */
typedef struct pg_session_key {
    const char *agent, *owner, *id_hash;
} pg_session_key;

/* Records a new session at now_ms (wall clock) that expires idle_ms after its
 * last use, and drops the agent's expired sessions; then the least recently
 * used ones beyond per_owner of this owner, and beyond per_agent of the
 * agent (those of the owner holding the most), so one tenant cannot push out
 * another's sessions. */
cm_rc cm_pg_session_put(cm_pg_shared *sh, const pg_session_key *k, int64_t now_ms, int64_t idle_ms,
                        int per_owner, int per_agent, char *err, size_t errlen);

/* *found: the session exists for this agent and owner and has not expired
 * at now_ms; then it is touched (expires idle_ms after now_ms) or, with
 * drop, removed. */
cm_rc cm_pg_session_touch(cm_pg_shared *sh, const pg_session_key *k, int64_t now_ms,
                          int64_t idle_ms, bool drop, bool *found, char *err, size_t errlen);

typedef struct cm_pg_lease cm_pg_lease;

/* A lease handle for agent's watcher on dsn (its own connection, made on
 * the first cm_pg_lease_try). Freed with cm_pg_lease_free, which releases
 * the lease if held. */
cm_rc cm_pg_lease_new(const char *dsn, const char *agent, cm_pg_lease **out, char *err,
                      size_t errlen);
void cm_pg_lease_free(cm_pg_lease *l);

/* Takes the lease unless another connection holds it; *held says whether
 * this handle holds it now. When held already, checks that the connection
 * (and so the lock) is still there: a server restart ends it, and *held is
 * then false until a later try takes it again. A connection that broke is
 * made again. */
cm_rc cm_pg_lease_try(cm_pg_lease *l, bool *held, char *err, size_t errlen);

#endif
