/*
 * mcp_sessions.h — `clawmem serve`'s MCP sessions (the Mcp-Session-Id of
 * the 2025-11-25 era and older; the stateless 2026-07-28 era needs none).
 * Without a database they live in this process's memory; with the
 * PostgreSQL store they live in the database (store_pg_shared.h), so a
 * session opened on one replica is accepted on every other, and this process
 * keeps a short-lived cache of the sessions it confirmed there. A session
 * belongs to one agent and to the token that opened it; it expires idle_ms
 * after its last use. Thread safe.
 */
#ifndef CM_MCP_SESSIONS_H
#define CM_MCP_SESSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clawmem.h"

#define SESSION_MAX       4096 /* sessions (or cached ones) this process holds */
#define SESSION_PER_AGENT 1024 /* ... of one agent */
#define SESSION_PER_TOKEN 256  /* ... opened with one token */
#define SESSION_IDLE_MS   (60LL * 60 * 1000)
/* How long a session the database confirmed is accepted here without asking
 * it again: a session ended on another replica may serve this long. */
#define SESSION_CACHE_MS 2000

typedef struct mcp_sessions mcp_sessions;

typedef struct mcp_sessions_opts {
    const char *dsn;           /* PostgreSQL (a secret): shared sessions; NULL: in memory */
    const char *const *tokens; /* the --tokens secrets, token i = owner i (hashed, not kept) */
    size_t ntokens;
    int64_t idle_ms;                    /* <= 0: SESSION_IDLE_MS */
    int64_t cache_ms;                   /* < 0: SESSION_CACHE_MS; 0: always ask the database */
    int64_t (*now_ms)(void *clock_ctx); /* NULL: the wall clock (shared by hosts) */
    void *clock_ctx;
} mcp_sessions_opts;

/* *out is freed with mcp_sessions_free. With a DSN, connects and creates
 * the sessions table when absent. */
cm_rc mcp_sessions_open(const mcp_sessions_opts *o, mcp_sessions **out, char *err, size_t errlen);
void mcp_sessions_free(mcp_sessions *ss);

/* A new session for agent opened with token owner (-1: no tokens): its id
 * (32 hex digits from getrandom) in out[33]. At a cap the least recently
 * used session goes: the token's own at SESSION_PER_TOKEN; at
 * SESSION_PER_AGENT or SESSION_MAX, one of the token holding the most, so a
 * tenant cannot push out another's sessions by opening many of its own. */
cm_rc mcp_sessions_new(mcp_sessions *ss, const char *agent, long owner, char out[33], char *err,
                       size_t errlen);

/* *found: session id exists for agent and owner and has not expired; then
 * it is touched or, with drop, ended (everywhere). CM_OK with *found false
 * is "no such session" (HTTP 404); a failure is the database's (503). */
cm_rc mcp_sessions_use(mcp_sessions *ss, const char *id, const char *agent, long owner, bool drop,
                       bool *found, char *err, size_t errlen);

/* Sessions held in this process (with a database: those cached). */
size_t mcp_sessions_count(mcp_sessions *ss);

/* Whether the sessions live in the database. */
bool mcp_sessions_shared(const mcp_sessions *ss);

#endif
