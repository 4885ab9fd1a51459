/*
 * turn.h — one agent turn: the conversation so far (pi-coding-agent message
 * objects, as a transcript holds them), the user's new message, then model
 * calls through the runner (llm/runner.h) until the model answers without
 * calling a tool, running the memory tools it calls in between —
 * memory_search, memory_get and, when writing is enabled, memory_write —
 * against the agent's memory engine.
 *
 * The turn's new messages come back in the transcript's own format (user,
 * assistant with text and toolCall blocks, toolResult), ready to append.
 * Tool failures go back to the model as tool results with isError; the turn
 * itself fails only when the model cannot be reached (the runner's error)
 * or the step limit is hit.
 */
#ifndef CM_AGENT_TURN_H
#define CM_AGENT_TURN_H

#include <jansson.h>

#include "../llm/runner.h"
#include "../tools/policy.h"
#include "../tools/exec.h"
#include "../tools/message.h"
#include "../tools/session_tools.h"
#include "../tools/web_fetch.h"

typedef struct agent_tools {
    cm_engine *engine;       /* NULL: no memory tools */
    const char *session_key; /* memory_search: citations, memory.qmd.scope; may be NULL */
    bool allow_write;        /* memory_write offered */
    /* Only for a flush turn: memory_write may only append to this path
     * (e.g. "memory/2026-11-30.md"); NULL: any memory file. */
    const char *write_only_to;
    /* The file tools (read; edit and write with fs_write) in this workspace
     * (absolute); NULL: none. */
    const char *workspace;
    bool fs_write;
    const tool_policy *policy; /* tools.profile/allow/deny; NULL: every tool */
    /* The session tools (sessions_list, sessions_history, session_status,
     * agents_list) over this sessions.json; NULL: none. */
    const char *store_path;
    const json_t *config; /* tools.sessions.visibility, agents.list */
    const char *agent_id;
    int64_t now_ms;
    const web_fetch_cfg *web; /* web_fetch (when enabled); NULL: none */
    /* exec and process (tools.exec enabled, a workspace, and trusted);
     * NULL: none. trusted: the sender may act on the host (default false). */
    const exec_cfg *exec;
    bool trusted;
    /* The run's controls; the message tool is offered when hooks->send is
     * set (a gateway run). May be NULL. */
    const struct agent_hooks *hooks;
} agent_tools;

/* A running turn's controls, from its caller (any may be NULL):
 * cancelled, polled before each model call, while one runs and after the
 * tools: true stops the turn with CM_ECANCELED (the messages of the steps
 * completed so far stay in out->messages); steer, asked after the tools
 * of a step, returns the next text to add as a user message before the
 * next model call (malloc'd), or NULL when there is none. */
/* A tool call as it starts (result NULL) and as it ends (result: the text
 * the model gets, is_error as the toolResult says); args_json is the call's
 * arguments as the model sent them (hostile, maybe not JSON). Called on the
 * turn's thread; the strings last for the call only. */
typedef void (*agent_tool_fn)(void *ctx, const char *call_id, const char *name,
                              const char *args_json, const char *result, bool is_error);

typedef struct agent_hooks {
    bool (*cancelled)(void *ctx);
    char *(*steer)(void *ctx);
    void *ctx;
    /* The message tool's sending (message.h), with ctx; NULL: no message tool. */
    message_send_fn send;
    /* sessions_send's queueing (session_tools.h), with ctx; NULL: no sessions_send. */
    session_send_fn session_send;
    /* Told of every tool call, with tool_ctx; NULL: nobody. */
    agent_tool_fn on_tool;
    void *tool_ctx;
} agent_hooks;

typedef struct agent_turn_in {
    llm_runner *runner;
    llm_turn turn;             /* model override, image routing, the session's pin */
    const char *system_prompt; /* may be NULL */
    const json_t *history;     /* array of message objects ({role, content, …}); may be NULL */
    const char *user_text;
    int64_t now_ms;        /* timestamps of the new messages */
    int max_steps;         /* model calls at most; 0: 12 */
    llm_delta_fn on_delta; /* streamed text of every step; may be NULL */
    void *ctx;
    llm_delta_fn on_reasoning; /* streamed reasoning of every step; may be NULL */
    void *reasoning_ctx;
    const agent_hooks *hooks; /* may be NULL */
    /* The reasoning effort asked of each model tried (llm_request.effort); may be NULL. */
    const char *(*effort)(void *ctx, const char *model);
    void *effort_ctx;
} agent_turn_in;

typedef struct agent_turn_out {
    json_t *messages; /* the new messages, in order (a new array) */
    char *reply;      /* the last assistant text (malloc'd; "" when none) */
    char *reasoning;  /* the last answer's reasoning (malloc'd; "" when none) */
    llm_usage usage;  /* the last model call's usage */
    llm_usage total;  /* summed over the turn's calls */
    llm_outcome outcome;
    int steps, tool_calls;
} agent_turn_out;

cm_rc cm_agent_turn_run(const agent_tools *tools, const agent_turn_in *in, agent_turn_out *out,
                        char *err, size_t errlen);
void cm_agent_turn_out_release(agent_turn_out *o);

/* The tools t offers (static strings) into out[0..cap), in the reference's
 * order, each allowed by t->policy; returns how many. */
#define AGENT_TOOLS_MAX 24
size_t cm_agent_tools_offered(const agent_tools *t, llm_tool_def *out, size_t cap);

#endif
