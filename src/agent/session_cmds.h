/*
 * session_cmds.h — the chat commands that change or act on one session and
 * answer in text, as QuantumClaw 2026.3.22 answers them: /compact
 * [instructions] (the memory flush of the cycle, then the compaction, then
 * "⚙️ Compacted (…) • Context …"), /think [level] (sessions.json
 * thinkingLevel), /reasoning [level] (reasoningLevel), and /model and
 * /models (model_cmds.c). The caller has checked that the sender may use
 * commands.
 */
#ifndef CM_AGENT_SESSION_CMDS_H
#define CM_AGENT_SESSION_CMDS_H

#include "../session/sessions.h"
#include "session_turn.h"

/* Runs text when it is one of the commands above (after blanks; "/cmd",
 * "/cmd args" or "/cmd: args"; aliases /thinking, /t, /reason): *handled
 * true and *reply (malloc'd) the answer to deliver; the session key is made
 * when new (for /think and /reasoning). Anything else: *handled false and
 * nothing done. A failed compaction is an answer ("⚙️ Compaction failed:
 * …"), not an error; errors are the store's. */
cm_rc cm_agent_session_command(agent_ctx *a, const char *key, const char *text, bool *handled,
                               char **reply, char *err, size_t errlen);

/* /status: the session's status card (status_card.h) as 2026.3.22 answers
 * it, into *reply (malloc'd): the entry read (not made when missing), the
 * model the next run asks first and how it authenticates. queue_line is
 * the gateway's "🪢 Queue: …" (NULL: unknown), time_line the tool's
 * "🕒 Time: …" (NULL: none). */
cm_rc cm_agent_session_status(agent_ctx *a, const char *key, const char *queue_line,
                              const char *time_line, char **reply, char *err, size_t errlen);

/* A standalone "/reasoning [level]" (also "/reason", "/reasoning: level"):
 * with a level (cm_agent_reasoning_parse) sets the session's reasoningLevel,
 * without one shows it; *reply (malloc'd) is the answer to deliver. Sets
 * *handled false and does nothing when text is not that command. */
cm_rc cm_agent_session_reasoning_command(agent_ctx *a, const char *key, const char *text,
                                         bool *handled, char **reply, char *err, size_t errlen);

/* The thinking level a "/think" argument names, as 2026.3.22 normalizes it
 * (on → low, max → high, auto → adaptive, extra-high → xhigh, …; any case),
 * a static string; NULL for anything else. */
const char *cm_agent_think_parse(const char *arg);

/* For the commands' files: the session's entry of key k, made when missing
 * (create), in st (released by the caller on success); the full key into
 * key[1100]. */
cm_rc cm_agent_session_open(agent_ctx *a, const char *k, bool create, session_store *st,
                            char key[1100], char *err, size_t errlen);

/* The model the session's next run asks first ("provider/model" into
 * out): entry e's override (providerOverride/modelOverride) when allowed
 * (cm_agent_model_override), else the runner's first; "" when none. */
void cm_agent_session_model(agent_ctx *a, const json_t *e, char out[320]);

#endif
