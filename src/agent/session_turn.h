/*
 * session_turn.h — an agent turn inside a session, as QuantumClaw runs one:
 * the session's history from its transcript (after the last compaction: the
 * summary, then the kept messages), the memory flush first when it is due
 * (seed 001: a silent turn whose writes may only append to today's
 * memory/YYYY-MM-DD.md; a NO_REPLY answer is not delivered; the bookkeeping
 * in sessions.json), the turn itself through the model runner with the
 * memory tools, its messages appended to the transcript, the entry's token
 * counts, model and automatic auth-profile pin updated; then compaction
 * when the context has grown past contextWindow − reserveTokens, where
 * reserveTokens is max(compaction.reserveTokens or 16384,
 * compaction.reserveTokensFloor or 20000) (and once more when the model
 * says the prompt is too long).
 *
 * Every compaction — after a turn, on the model's overflow, or asked for —
 * is preceded by the memory flush of its compaction cycle unless one already
 * ran in it: silent, with the history about to be summarised (when that
 * overflows the model too, the most recent part that fits, halved up to 5
 * times); a flush that fails never stops the turn or the compaction, and
 * the compacted messages stay in the transcript file.
 *
 * Compaction summarises the turns before a cut that keeps about
 * compaction.keepRecentTokens (default 20,000) tokens of recent messages, cut only before a user message so a tool call
 * and its result are never separated, into a `compaction` record
 * {summary, firstKeptEntryId, tokensBefore}; compactionCount goes up.
 */
#ifndef CM_SESSION_TURN_H
#define CM_SESSION_TURN_H

#include "bootstrap.h" /* the gateway starts agents through this header */
#include "prompt.h"
#include "turn.h"

typedef struct agent_ctx {
    const json_t *config;                          /* the whole config (borrowed) */
    const char *state_dir, *agent_id, *store_path; /* store_path: sessions.json */
    const char *workspace;
    cm_engine *engine; /* the agent's memory; NULL: no memory tools */
    llm_runner *runner;
    bool writable;      /* the agent may write its workspace */
    llm_clock_fn clock; /* NULL: the real clock */
    void *clock_ctx;
    const tool_policy *tools; /* tools.profile/allow/deny (parsed once); NULL: every tool */
    const web_fetch_cfg *web; /* tools.web.fetch (parsed once); NULL: no web_fetch */
    const exec_cfg *exec;     /* tools.exec (parsed once); NULL: no exec or process */
} agent_ctx;

typedef struct agent_reply {
    char *text;      /* what to deliver ("" when silent) */
    bool silent;     /* the model answered NO_REPLY */
    bool flushed;    /* a memory flush ran (before the turn or a compaction) */
    bool compacted;  /* a compaction ran */
    char model[192]; /* the model that answered */
    llm_usage usage; /* the last call's */
    int tool_calls;
    /* The reasoning message to deliver before text ("Reasoning:\n_…_", as
     * cm_agent_reasoning_format writes it) when the session's reasoningLevel
     * is "on"; "" otherwise (off: dropped; stream: it went to on_reasoning). */
    char *reasoning;
    agent_reasoning reasoning_level; /* the level the turn ran with */
    /* A compaction's estimated context before and after it (tokens), and
     * why one that was asked for did not run (a static string, "no real
     * conversation messages"), or NULL. */
    int64_t tokens_before, tokens_after;
    const char *skipped;
} agent_reply;

void cm_agent_reply_release(agent_reply *r);

/* A user message to the session key (made when new): flush if due, the
 * turn, compaction if needed. model: an override or NULL. */
cm_rc cm_agent_session_turn(agent_ctx *a, const char *key, const char *prompt, const char *model,
                            llm_delta_fn on_delta, void *ctx, agent_reply *out, char *err,
                            size_t errlen);

/* One turn's inputs for cm_agent_session_turn_opts. */
typedef struct agent_turn_opts {
    const char *prompt;
    const char *model; /* an override, or NULL */
    llm_delta_fn on_delta;
    void *ctx;
    /* Only when the session's reasoningLevel is "stream": called as the
     * model's reasoning arrives, each time with the whole reasoning so far
     * as it is shown (cm_agent_reasoning_format), to replace the previous
     * draft. May be NULL. */
    llm_delta_fn on_reasoning;
    void *reasoning_ctx;
    /* Cancel and steer (turn.h); may be NULL. A cancelled turn fails with
     * CM_ECANCELED and records the user message and the steps completed
     * before it (never a half answer). */
    const agent_hooks *hooks;
    /* Where the message came from, for the system prompt's inbound
     * context (prompt.h); NULL: none. */
    const agent_inbound *inbound;
} agent_turn_opts;

/* cm_agent_session_turn with reasoning: the system prompt of prompt.h (the
 * workspace bootstrap; MEMORY.md only in the main session; the daily logs
 * of the session's start), the session's reasoningLevel applied to the
 * model's reasoning (out->reasoning, o->on_reasoning). */
cm_rc cm_agent_session_turn_opts(agent_ctx *a, const char *key, const agent_turn_opts *o,
                                 agent_reply *out, char *err, size_t errlen);

/* The memory flush now (force) or only when due before a turn with prompt. */
cm_rc cm_agent_session_flush(agent_ctx *a, const char *key, const char *prompt, bool force,
                             agent_reply *out, char *err, size_t errlen);

/* Compacts the session now, after the memory flush of the cycle when none
 * ran in it yet (out->flushed). */
cm_rc cm_agent_session_compact(agent_ctx *a, const char *key, agent_reply *out, char *err,
                               size_t errlen);
/* The same with the user's instructions for the summary (may be NULL). */
cm_rc cm_agent_session_compact_with(agent_ctx *a, const char *key, const char *instructions,
                                    agent_reply *out, char *err, size_t errlen);

/* The session's history for the model (a new array of messages). */
cm_rc cm_agent_session_history(const char *transcript, json_t **out, char *err, size_t errlen);

/* The context window of a "provider/model" (models.providers.<p>.models[]
 * contextWindow), else agents.defaults.contextTokens, else 200000. */
int64_t cm_agent_context_window(const json_t *config, const char *model);

/* cm_agent_turn (include/clawmem/agent.h) with a running turn's cancel
 * and steer hooks (NULL: none; a cancelled turn fails with CM_ECANCELED)
 * and where the message came from (NULL: not told; session turns only). */
struct cm_agent;
cm_rc cm_agent_turn_hooked(struct cm_agent *a, const char *key, const char *prompt,
                           const char *model, llm_delta_fn on_text, void *ctx,
                           const agent_hooks *hooks, const agent_inbound *inbound, char **json,
                           char *err, size_t errlen);

/* cm_agent_turn_hooked with the session's reasoning delivered: on_reasoning
 * (may be NULL) gets the formatted reasoning so far while it streams under
 * reasoningLevel "stream"; json gains "reasoning" (the "Reasoning:"
 * message to send before the reply under "on", else ""). */
cm_rc cm_agent_turn_reasoned(struct cm_agent *a, const char *key, const char *prompt,
                             llm_delta_fn on_text, void *ctx, llm_delta_fn on_reasoning,
                             void *reasoning_ctx, const agent_hooks *hooks,
                             const agent_inbound *inbound, char **json, char *err, size_t errlen);

/* cm_agent_session_status (session_cmds.h: /status) for the agent a. */
cm_rc cm_agent_status(struct cm_agent *a, const char *key, const char *queue_line, char **reply,
                      char *err, size_t errlen);

/* cm_agent_session_command (session_cmds.h) for the agent a. */
cm_rc cm_agent_command(struct cm_agent *a, const char *key, const char *text, bool *handled,
                       char **reply, char *err, size_t errlen);

#endif
