/*
 * runtime.h — the running gateway: channels hand inbound messages to the
 * sink, which writes each to a durable journal (<stateDir>/gateway/
 * journal.jsonl, fsynced before it returns), then dedupe, access (pairing
 * codes go back through the channel), debounce, routing to a session key
 * (bindings / agents.list pick the agent), the session's queue (queue modes,
 * /queue overrides), agent runs on a worker pool — one run per session at a
 * time —, and the reply shaped (NO_REPLY, responsePrefix, replyToMode,
 * chunked to the channel's limit, block streaming) and sent back.
 *
 * Time comes from the options' clock. With manual set no timer thread runs:
 * the caller drives debounce windows and queue delays with cm_gw_runtime_tick
 * (tests advance a fake clock and never sleep). Thread safe: the sink may be
 * called from any channel thread.
 */
#ifndef CM_GW_RUNTIME_H
#define CM_GW_RUNTIME_H

#include <jansson.h>

#include "../../config/runtime_config.h"
#include "../../llm/llm.h"
#include "../shaping/blocks.h"
#include "../shaping/reply.h"
#include "../channels/channel.h"

typedef int64_t (*gw_clock_fn)(void *ctx);

/* The channel of sessions_send's messages (tools/session_tools.h): made by
 * the runtime itself, let through without an access check, never trusted,
 * answered nowhere. */
#define GW_INTERNAL_CHANNEL "internal"

/* One agent run as the runtime asks for it (strings borrowed). */
typedef struct gw_run_req {
    const char *agent_id, *session_key, *prompt;
    const char *channel, *account;
    int worker;            /* the worker thread running it, 0 .. workers - 1 */
    llm_delta_fn on_delta; /* streamed text (block streaming); may be ignored */
    void *delta_ctx;
    /* Each tool call as it starts (result NULL) and ends, with tool_ctx (the
     * agent's agent_tool_fn, turn.h); may be NULL or ignored. */
    void (*on_tool)(void *ctx, const char *call_id, const char *name, const char *args_json,
                    const char *result, bool is_error);
    void *tool_ctx;
    /* The run's controls: cancelled true once an interrupt or /stop aborts
     * it (stop, fail with CM_ECANCELED); steer the next steered text
     * (malloc'd) or NULL. hook_ctx is theirs. */
    bool (*cancelled)(void *ctx);
    char *(*steer)(void *ctx);
    void *hook_ctx;
    const char *peer; /* the conversation (the chat id the system prompt names) */
    bool is_group;
    /* For the session entry's origin (may be NULL): the thread, the
     * conversation label ("Alice (@alice) id:111", "Dev id:-100") and a
     * group's title. */
    const char *thread, *label, *subject;
    /* The sender may be offered exec and process (cm_gw_access_trusted);
     * false unless the runtime found it so. */
    bool trusted;
    /* The message tool's sending (tools/message.h) with hook_ctx; may be NULL. */
    cm_rc (*send)(void *ctx, const char *channel, const char *account, const char *target,
                  const char *text, char *err, size_t errlen);
    /* sessions_send's queueing and waiting (tools/session_tools.h:
     * session_send_fn) with hook_ctx; may be NULL. */
    cm_rc (*session_send)(void *ctx, const char *key, const char *text, int64_t wait_ms,
                          char *run_id, size_t run_id_len, char **reply, char *err, size_t errlen);
    /* The session's reasoning while it streams (reasoningLevel "stream"):
     * each call the whole formatted reasoning so far ("Reasoning:\n_…_"),
     * replacing the last; may be NULL, and may be ignored. */
    llm_delta_fn on_reasoning;
    void *reasoning_ctx;
    /* prompt is a session command the agent answers itself (/compact,
     * /think, /reasoning: agent/session_cmds.h), not a turn; its answer is
     * the result's text. */
    bool command;
    /* With command: /status, answered by the agent with this queue line
     * ("🪢 Queue: collect (depth 0)") at the card's end; NULL otherwise. */
    const char *status_queue;
} gw_run_req;

typedef struct gw_run_res {
    char *text;      /* malloc'd; NULL or "" when nothing to say */
    char *reasoning; /* malloc'd or NULL: reasoningLevel "on"'s message, sent before text */
    bool silent;     /* the model answered NO_REPLY */
    char model[192]; /* "provider/model" that answered, or "" */
} gw_run_res;

/* Runs one agent turn; called on a worker thread, never twice at once for
 * the same session key. */
typedef cm_rc (*gw_run_fn)(void *ctx, const gw_run_req *rq, gw_run_res *out, char *err,
                           size_t errlen);

typedef struct gw_runtime_opts {
    const json_t *config; /* the whole merged config (borrowed for cm_gw_runtime_new),
                             unless rtcfg is given */
    const char *state_dir;
    gw_run_fn run;
    void *run_ctx;
    gw_clock_fn clock; /* NULL: wall clock (ms) */
    void *clock_ctx;
    int workers;          /* agent runs at once; 0: 4 */
    bool manual;          /* no timer thread: the caller calls cm_gw_runtime_tick */
    int max_attempts;     /* runs of one journaled message before it is answered as
                             failed at recovery; 0: 2 */
    const cm_logger *log; /* may be NULL */
    /* The typed config snapshot (runtime_config.h; the runtime takes its own
     * reference); NULL: built from config (a bad value fails
     * cm_gw_runtime_new). The runtime reads only its snapshot (config is
     * not kept: a reload may free the tree it came from). */
    cm_rtcfg *rtcfg;
} gw_runtime_opts;

typedef struct gw_runtime gw_runtime;

/* For a process that runs a gateway for months (cm_gateway_start and the
 * bench call it once at start): every allocation of GW_MALLOC_MMAP_BYTES
 * or more gets its own mapping, returned to the system when freed. glibc
 * otherwise raises that threshold to the largest block freed so far, so
 * the store's multi-megabyte texts (a sessions.json written every few
 * seconds) come from the heap and leave holes between long-lived small
 * blocks that it cannot give back: RSS grew with the run. And every
 * runtime's timer thread then gives the free pages inside the heap back
 * every GW_MALLOC_TRIM_MS of its clock (malloc_trim, no lock held): what
 * the churn of sessions and replies leaves free between live blocks.
 * Process-wide; a no-op where the C library is not glibc. */
#define GW_MALLOC_MMAP_BYTES (256u << 10)
#define GW_MALLOC_TRIM_MS    15000
void cm_gw_malloc_tune(void);

/* Opens the journal (creating <stateDir>/gateway/) and starts the workers
 * (and the timer unless manual). Nothing is accepted before
 * cm_gw_runtime_start. */
cm_rc cm_gw_runtime_new(const gw_runtime_opts *o, gw_runtime **out, char *err, size_t errlen);

/* Bytes of accepted, unanswered messages in the journal before new ones are
 * refused (the sink's CM_ERATELIMIT: HTTP 503 with Retry-After, a Telegram
 * update asked again later); 0 or above it: GW_JOURNAL_PENDING_MAX (64 MiB).
 * The journal file may grow to twice it before a compaction. */
void cm_gw_runtime_set_journal_limit(gw_runtime *rt, uint64_t bytes);

/* Registers a channel (borrowed; the runtime sends through it and stops it
 * at drain) for account (NULL: "default"), under the name its ops give or
 * name (not NULL: replies to messages of that channel name go through ch
 * too; the HTTP channel carries "terminal", `clawmem chat`). Before
 * cm_gw_runtime_start. */
cm_rc cm_gw_runtime_add_channel(gw_runtime *rt, gw_channel *ch, const char *name,
                                const char *account, char *err, size_t errlen);

/* Recovers the journal — every accepted message not marked answered is run
 * again, or answered as failed (visibly) once it has used up its attempts —
 * then starts the channels. */
cm_rc cm_gw_runtime_start(gw_runtime *rt, char *err, size_t errlen);

/* The sink channels call (ctx = the runtime): CM_OK once m is journaled
 * (a duplicate is CM_OK without a new entry); CM_EBUSY while draining;
 * CM_ERATELIMIT while the journal is full (answers make room); CM_ETOOBIG
 * for a message larger than the journal's limit; CM_EIO when it could not be
 * written.
 * Messages of channel "terminal" (`clawmem chat`, through the HTTP
 * channel's bearer token: the owner) skip access control. */
cm_rc cm_gw_runtime_sink(void *ctx, const gw_msg *m);

/* Due debounce batches and queued followup turns at the clock's now. */
void cm_gw_runtime_tick(gw_runtime *rt);

/* Waits (real time, at most timeout_ms) until no run is active or ready;
 * true when idle. Does not flush debounce or queue delays. */
bool cm_gw_runtime_wait_idle(gw_runtime *rt, int64_t timeout_ms);

/* Drains: new messages are refused (CM_EBUSY), channels stop receiving,
 * pending debounce batches and queued turns run at once, active runs finish.
 * Waits at most timeout_ms (real time; what is left stays journaled and is
 * recovered at the next start). True when everything was answered. */
bool cm_gw_runtime_drain(gw_runtime *rt, int64_t timeout_ms);

/* {"accepting","channels":[{"channel","account"}],"sessions":[{"key",
 * "active","queued"}] (those running or with a queue),"knownSessions",
 * "activeRuns","readyJobs","debouncePending","journalBacklog","accepted",
 * "duplicates","recovered","runs","replies"} — a new object. */
json_t *cm_gw_runtime_status(gw_runtime *rt);

/* Sessions the clock (ticks, the timer) has looked at so far: those with
 * work (a queue, a followup, a command) since the last tick, not every
 * session known. For tests and benches. Thread-safe. */
uint64_t cm_gw_runtime_tick_visits(gw_runtime *rt);

/* Sends text to peer of (channel, account) as the gateway's own notice (sent
 * as written, like a pairing code), through the workers: returns at once.
 * False while draining or out of memory. */
bool cm_gw_runtime_notify(gw_runtime *rt, const char *channel, const char *account,
                          const char *peer, const char *text);

/* A reference to the config snapshot new work reads (drop it with
 * cm_rtcfg_unref). */
cm_rtcfg *cm_gw_runtime_config(gw_runtime *rt);

/* Makes fresh (the runtime takes a reference) the snapshot every message
 * and run from now on reads; a run already going keeps the one it started
 * with, and the old snapshot is freed when its last reader drops it. The
 * swap is one pointer under the runtime's lock (no I/O under it): no reader
 * ever sees a mix of the two. Channels, workers and the journal are not
 * restarted: keys that only take effect at start (gateway.port, bind,
 * auth, the channels' tokens) need a restart. */
void cm_gw_runtime_reload(gw_runtime *rt, cm_rtcfg *fresh);

/* Stops everything (drain first for a clean stop) and frees. */
void cm_gw_runtime_free(gw_runtime *rt);

#endif
