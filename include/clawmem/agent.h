/*
 * clawmem/agent.h — the agent runtime of one agent: its memory engine, the
 * model runner (models.providers, auth profiles with rotation, cooldowns
 * and model fallback) and its sessions. Included by clawmem.h.
 *
 * JSON results are strings the caller frees with cm_free. Secrets (keys,
 * tokens) never appear in them or in error messages.
 */
#ifndef CLAWMEM_AGENT_H
#define CLAWMEM_AGENT_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cm_agent cm_agent;

/* Opens the agent opt names: its config, memory engine (memory_write
 * follows opt->allow_write or clawmem.memoryWrite; the memory flush needs
 * it) and runner. The engine is synced on open without waiting for another
 * writer. */
cm_rc cm_agent_open(const cm_options *opt, cm_agent **out, char *err, size_t errlen);

/* cm_agent_open for an agent that runs turns on many threads at once (a
 * gateway's workers): its engine is opened shared (cm_engine_open_shared);
 * the config, runner and tool settings are read-only after open. Turns of
 * one session key must still not overlap (the gateway's queue sees to it). */
cm_rc cm_agent_open_shared(const cm_options *opt, cm_agent **out, char *err, size_t errlen);
void cm_agent_close(cm_agent *a);

/* The agent's memory engine (borrowed: valid until cm_agent_close; shared,
 * so callable from any thread, when the agent was opened shared). */
cm_engine *cm_agent_engine(cm_agent *a);

/* Streamed reply text. */
typedef void (*cm_text_fn)(void *ctx, const char *text, size_t n);

/* One turn: in the session session_key (made when new; NULL: a turn with no
 * session, nothing recorded), with the memory flush first when it is due and
 * compaction when the context has grown too large. model: a
 * "provider/model" override or NULL. json: {"reply","silent","flushed",
 * "compacted","model","toolCalls","usage":{"input","output","cacheRead",
 * "cacheWrite","total"}}. */
cm_rc cm_agent_turn(cm_agent *a, const char *session_key, const char *prompt, const char *model,
                    cm_text_fn on_text, void *ctx, char **json, char *err, size_t errlen);

/* The memory flush of a session now ({"flushed","toolCalls"}). */
cm_rc cm_agent_flush(cm_agent *a, const char *session_key, char **json, char *err, size_t errlen);

/* Compacts a session now ({"compacted"}). */
cm_rc cm_agent_compact(cm_agent *a, const char *session_key, char **json, char *err, size_t errlen);

/* The runner's state: {"authStore", "chain":[…], "imageChain":[…],
 * "providers":{<provider>:{"api","baseUrl","profiles":[{"id","type",
 * "usable","unusableUntil"?,"disabledReason"?,"errorCount","lastUsed"?}…]}}},
 * profiles in the order they would be tried now. */
cm_rc cm_models_status(cm_agent *a, char **json, char *err, size_t errlen);

/* The same document for opt's agent without opening it (its config and
 * model runner only, no memory engine): the gateway's Models page. Profiles
 * also carry "lastFailureAt" and "failureCounts" ({reason: count}) when the
 * store has them (both forms). */
cm_rc cm_models_status_at(const cm_options *opt, char **json, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
