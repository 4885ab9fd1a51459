/*
 * session_tools.h — the agent's session tools `sessions_list`,
 * `sessions_history`, `session_status` and `agents_list`, with QuantumClaw
 * 2026.3.22's names, parameters and JSON results, over the agent's
 * sessions.json and transcripts. What a session may see follows
 * `tools.sessions.visibility` (self | tree | agent | all; default tree):
 * clawmem runs no sub-agents, so self and tree show the caller's own
 * session, agent and all every session of the caller's agent (other agents'
 * stores are never read: the reference needs `tools.agentToAgent` for them,
 * which clawmem does not implement). Transcripts are read from their end,
 * at most SESSION_TOOLS_TAIL_BYTES, whatever their size.
 */
#ifndef CM_SESSION_TOOLS_H
#define CM_SESSION_TOOLS_H

#include <jansson.h>

#include "../base/buf.h"
#include "clawmem.h"

#define SESSION_TOOLS_HISTORY_MAX_BYTES (80 * 1024) /* sessions_history's result */
#define SESSION_TOOLS_TEXT_MAX_CHARS    4000        /* one text block in it */
#define SESSION_TOOLS_TAIL_BYTES        (8u << 20)  /* of a transcript read */

typedef struct session_tool_env {
    const json_t *config;    /* the whole config (borrowed) */
    const char *store_path;  /* the agent's sessions.json */
    const char *agent_id;    /* the caller's agent */
    const char *session_key; /* the caller's session (store key), may be NULL */
    int64_t now_ms;
    const char *time_zone; /* the user's (session_status's time line); NULL: UTC */
} session_tool_env;

cm_rc cm_tool_sessions_list(const session_tool_env *env, const json_t *args, buf *out, char *err,
                            size_t errlen);
cm_rc cm_tool_sessions_history(const session_tool_env *env, const json_t *args, buf *out,
                               char *err, size_t errlen);
cm_rc cm_tool_session_status(const session_tool_env *env, const json_t *args, buf *out,
                             char *err, size_t errlen);
cm_rc cm_tool_agents_list(const session_tool_env *env, const json_t *args, buf *out, char *err,
                          size_t errlen);

/* agents_list, sessions_list, sessions_history and session_status (the
 * reference's order) as the model is told of them (all read-only). */
const cm_tool_def *cm_tool_session_defs(size_t *n);

#define SESSION_TOOLS_SEND_MAX_BYTES (64 * 1024) /* sessions_send's message */

/* Queues text as a message into the session key (a store key of the
 * caller's agent) and writes the run's id into run_id; the caller's own
 * function (the gateway's queue). With wait_ms > 0 it then waits (at most
 * that long) for the run that answers the message: CM_OK with *reply its
 * answer (malloc'd; NULL when it said nothing), CM_ETIMEOUT when it has
 * not ended, another code with err when it failed. A failure before
 * run_id is set is the send's own. */
typedef cm_rc (*session_send_fn)(void *ctx, const char *key, const char *text, int64_t wait_ms,
                                 char *run_id, size_t run_id_len, char **reply, char *err,
                                 size_t errlen);

/* The longest sessions_send waits, whatever timeoutSeconds asks (a worker
 * of the gateway waits with it). */
#define SESSION_TOOLS_SEND_MAX_WAIT_S 600

/* sessions_send {sessionKey | label, message, timeoutSeconds?, agentId?}:
 * the target resolved as sessions_history resolves it (or by its entry's
 * label), visible as sessions_list decides, existing in the store; then
 * send, and — unless timeoutSeconds is 0 (default 30, at most
 * SESSION_TOOLS_SEND_MAX_WAIT_S) — wait for the target's answer. The
 * result is the reference's JSON: {"runId","status":"ok","reply"?,
 * "sessionKey"}, {"runId","status":"timeout","sessionKey"}, {"runId",
 * "status":"accepted","sessionKey"} for timeoutSeconds 0, or {"runId"?,
 * "status":"error"|"forbidden","error","sessionKey"?}. */
cm_rc cm_tool_sessions_send(const session_tool_env *env, const json_t *args, session_send_fn send,
                            void *ctx, buf *out, char *err, size_t errlen);

/* sessions_send as the model is told of it. */
const cm_tool_def *cm_tool_sessions_send_def(void);

#endif
