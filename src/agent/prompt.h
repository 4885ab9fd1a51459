/*
 * prompt.h — the system prompt of an agent turn, as QuantumClaw 2026.3.22
 * assembles it (docs/concepts/system-prompt.md), cut down to what clawmem's
 * runtime has: identity, the tools offered, memory recall guidance, the
 * workspace, the user's time zone, silent replies, the reasoning level, and
 * the workspace bootstrap files under "# Project Context".
 *
 * Sections, in 2026.3.22's order (buildAgentSystemPrompt, full mode): the
 * identity line, Tooling, Tool Call Style, Safety, QuantumClaw CLI Quick
 * Reference, Memory Recall, Workspace, Current Date & Time, Workspace Files
 * (injected), Messaging, Group Chat Context (the inbound metadata), Project
 * Context, Silent Replies, Heartbeats, Runtime. The text is clawmem's own.
 * Left out as 2026.3.22 leaves them out when their feature is off: Skills,
 * Self-Update, Model Aliases, Documentation, Sandbox, Authorized Senders,
 * Voice, Reactions, Reasoning Format; and Reply Tags, since clawmem's
 * channels do not honour reply tags (docs/runtime.md).
 *
 * Bootstrap files, in order: AGENTS.md, SOUL.md, TOOLS.md, IDENTITY.md,
 * USER.md, HEARTBEAT.md, BOOTSTRAP.md (when present), then MEMORY.md (else
 * memory.md) only in the agent's main private session (seed 001: never in
 * groups or other sessions), then the daily logs memory/YYYY-MM-DD.md of the
 * session's start day and the day before (seed 001: "today + yesterday at
 * session start"), when present. Each file is cut to bootstrapMaxChars
 * (20000; 70% head, 20% tail around a marker naming the file), all of them
 * together to bootstrapTotalMaxChars (150000); a missing standard file is a
 * "[MISSING] Expected at: <path>" line.
 */
#ifndef CM_AGENT_PROMPT_H
#define CM_AGENT_PROMPT_H

#include <jansson.h>

#include "../base/buf.h"

#define AGENT_BOOTSTRAP_MAX_CHARS       20000
#define AGENT_BOOTSTRAP_TOTAL_MAX_CHARS 150000

/* /reasoning levels (session entry field "reasoningLevel"). */
typedef enum agent_reasoning {
    AGENT_REASONING_OFF,   /* reasoning dropped (the default) */
    AGENT_REASONING_ON,    /* delivered as a separate "Reasoning:" message before the reply */
    AGENT_REASONING_STREAM /* streamed as it comes; not repeated with the reply */
} agent_reasoning;

/* Reads a level as 2026.3.22 normalizes it (any case): off false no 0 hide
 * hidden disable disabled / on true yes 1 show visible enable enabled /
 * stream streaming draft live. -1 for anything else or NULL. */
int cm_agent_reasoning_parse(const char *s);
const char *cm_agent_reasoning_name(agent_reasoning r);

/* Appends the reasoning as it is delivered: "Reasoning:" then each
 * non-empty line of the trimmed text in underscores (Markdown italics);
 * nothing when the text is blank. */
cm_rc cm_agent_reasoning_format(const char *text, buf *out);

/* Where a turn's message came from, told to the model as trusted metadata
 * (2026.3.22's "openclaw.inbound_meta.v1"): each NULL when unknown. Who
 * wrote it is not here: that is untrusted and goes with the user message. */
typedef struct agent_inbound {
    const char *chat_id;    /* "<channel>:<chat>", e.g. "telegram:-100" */
    const char *account_id; /* the channel account ("default") */
    const char *channel, *provider, *surface;
    const char *chat_type; /* "direct", "group" */
    /* Not for the prompt: the session entry's origin and delivery route
     * (session/origin.h). peer: the chat id (NULL: no route recorded);
     * the rest may be NULL. */
    const char *peer, *thread_id;
    const char *conversation_label; /* "Alice (@alice) id:111", "Dev id:-100" */
    const char *group_subject;      /* a group's title */
    /* The sender may use the tools that act on the host (exec, process):
     * the gateway's cm_gw_access_trusted. A turn without an inbound (the
     * local CLI) is its owner's. */
    bool trusted_sender;
} agent_inbound;

typedef struct agent_prompt_in {
    const json_t *config; /* agents.defaults.{bootstrapMaxChars,bootstrapTotalMaxChars,
                             userTimezone}; may be NULL */
    const char *workspace;
    const char *agent_id;     /* NULL: "main" */
    const char *session_key;  /* the store key ("agent:<id>:…"); decides MEMORY.md */
    int64_t session_start_ms; /* the session's first message (wall clock): its day's
                                 and the previous day's logs are injected; 0: none */
    bool memory_tools;        /* memory_search and memory_get are offered */
    bool memory_write;        /* memory_write too */
    agent_reasoning reasoning;
    /* NULL: no "## Inbound Context (trusted metadata)" section. Else that
     * section, under "## Group Chat Context" before the workspace files
     * (where 2026.3.22 puts its extra system prompt), with the fields as JSON. */
    const agent_inbound *inbound;
    /* The names of the tools offered this turn (listed under "## Tooling"
     * in 2026.3.22's order; the sections on messaging, sessions and time
     * follow what is offered). NULL: the memory tools per the two flags. */
    const char *const *tools;
    size_t n_tools;
    const char *model; /* "provider/model" for the Runtime line; NULL: agents.defaults.model */
} agent_prompt_in;

/* True when key is the agent's main session (`agent:<id>:main`): direct
 * chats collapsed into it, the only session that sees MEMORY.md. */
bool cm_agent_is_main_session(const char *key, const char *agent_id);

/* The user's time zone as 2026.3.22 resolves it: agents.defaults.userTimezone
 * when it names a zone clawmem can load, else the host's zone (the name
 * /etc/localtime links to), else "UTC". Writes at most cap-1 bytes to out. */
void cm_agent_user_timezone(const json_t *config, char *out, size_t cap);

/* Appends the system prompt for in to out. Files are read under the
 * workspace without following a symbolic link at the file itself; a file
 * that cannot be read counts as missing. CM_ENOMEM only. */
cm_rc cm_agent_system_prompt(const agent_prompt_in *in, buf *out);

#endif
