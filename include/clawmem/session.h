/*
 * clawmem/session.h — an agent's sessions in QuantumClaw's own files:
 * `<stateDir>/agents/<agentId>/sessions/sessions.json` (session key → entry)
 * and one `<sessionId>.jsonl` transcript per session. Included by clawmem.h.
 *
 * Session keys follow QuantumClaw's grammar (`agent:<agentId>:main` for the
 * agent's direct chats, `agent:<id>:<channel>:group:<id>` …); a key given
 * without the `agent:<id>:` prefix gets it. Every call that returns JSON
 * gives a string the caller frees with cm_free. Writes are safe against
 * other processes (clawmem's and QuantumClaw's) writing the same files.
 */
#ifndef CLAWMEM_SESSION_H
#define CLAWMEM_SESSION_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cm_sessions cm_sessions;

/* Opens the session store of the agent opt names (state dir, agent, config
 * as for cm_engine_open; `session.store` in the config may move
 * sessions.json). Reads nothing yet. */
cm_rc cm_sessions_open(const cm_options *opt, cm_sessions **out, char *err, size_t errlen);
void cm_sessions_close(cm_sessions *s);

/* {"store": path, "sessions": [{"key", "sessionId", "updatedAt", "chatType",
 * "compactionCount", "totalTokens"?, "transcript", "transcriptBytes"}…]},
 * most recently updated first. */
cm_rc cm_sessions_list(cm_sessions *s, char **json, char *err, size_t errlen);

/* {"key", "entry": {…}, "transcript": path, "records": [the last `last`
 * transcript records (0: all)]}. CM_ENOTFOUND for an unknown session. */
cm_rc cm_sessions_show(cm_sessions *s, const char *key, unsigned last, char **json, char *err,
                       size_t errlen);

/* Appends a message (role "user" or "assistant") to the session's
 * transcript, making the session when it is new: {"key", "sessionId", "id"}
 * (id: the new record's). An assistant message is written as QuantumClaw
 * writes one no model produced (api "openai-responses", provider
 * "openclaw", model "delivery-mirror", zero usage). */
cm_rc cm_sessions_append(cm_sessions *s, const char *key, const char *role, const char *text,
                         char **json, char *err, size_t errlen);

/* /new and /reset: the transcript is archived (`*.jsonl.reset.<time>`) and
 * the session starts again with a new id: {"key", "sessionId"}. */
cm_rc cm_sessions_reset(cm_sessions *s, const char *key, char **json, char *err, size_t errlen);

/* Removes the session, archiving its transcript (`*.jsonl.deleted.<time>`). */
cm_rc cm_sessions_delete(cm_sessions *s, const char *key, char *err, size_t errlen);

/* Whether the memory flush is due for the session before a turn with
 * prompt (may be NULL): {"due", "reason", "tokens", "threshold",
 * "transcriptBytes", "contextHash", "targetPath", "prompt", "systemPrompt"}.
 * context_window: the model's context (0: 200000). writable: whether the
 * agent may write its workspace. */
cm_rc cm_sessions_flush_check(cm_sessions *s, const char *key, const char *prompt,
                              long context_window, int writable, char **json, char *err,
                              size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
