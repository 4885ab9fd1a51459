/*
 * clawmem/gateway.h — who may reach an agent through a chat channel, in
 * QuantumClaw's own pairing store (`<stateDir>/credentials/`): with
 * `channels.<channel>.dmPolicy: "pairing"` (the default) an unknown sender
 * gets a one-time code and no answer until the owner approves the code.
 * The store is QuantumClaw 2026.3.22's, so codes its gateway issued can be
 * listed and approved here, and the other way round. Included by clawmem.h.
 */
#ifndef CLAWMEM_GATEWAY_H
#define CLAWMEM_GATEWAY_H

#ifdef __cplusplus
extern "C" {
#endif

/* {"channel": c, "requests": [{"code", "id", "accountId", "createdAt",
 * "lastSeenAt"}…]}: the channel's pending pairing requests that have not
 * expired (1 hour). The caller frees *json with cm_free. */
cm_rc cm_pairing_list(const cm_options *opt, const char *channel, char **json, char *err,
                      size_t errlen);

/* Approves a pending request by its code (any case): its sender joins the
 * channel's allow-from store and the request is removed. *json receives
 * {"channel": c, "approved": id}. CM_ENOTFOUND when no
 * unexpired request has that code. */
cm_rc cm_pairing_approve(const cm_options *opt, const char *channel, const char *code, char **json,
                         char *err, size_t errlen);

/* ---- the gateway (clawmem gateway) ---------------------------------------
 * Chat channels in, agent turns out: the channels the config enables (the
 * HTTP channel when gateway.auth.token is set), a journal of accepted
 * messages under <stateDir>/gateway/ (answered after a crash), dedupe,
 * access, debounce, sessions, queueing, reply chunking. */

typedef struct cm_gateway cm_gateway;

typedef struct cm_gateway_opts {
    const char *listen; /* the HTTP channel's "ADDR:PORT"; NULL: gateway.bind/port */
    int workers;        /* agent runs at once; 0: 4 */
} cm_gateway_opts;

/* Opens the channels and starts: unanswered journal entries run first.
 * CM_EBUSY when another gateway runs on the state dir; CM_ECONFIG when no
 * channel can be opened. */
cm_rc cm_gateway_start(const cm_options *opt, const cm_gateway_opts *go, cm_gateway **out,
                       char *err, size_t errlen);

/* The HTTP channel's bound "ADDR:PORT", or NULL without one. */
const char *cm_gateway_address(const cm_gateway *g);

/* SIGTERM's drain: no new message is accepted (the HTTP channel answers
 * 503), debounce batches and queued turns run, active runs finish; waits
 * at most timeout_ms. 1 when every accepted message was answered (what is
 * left stays journaled for the next start), else 0. */
int cm_gateway_drain(cm_gateway *g, int timeout_ms);

/* SIGHUP's reload: the config files are read again on the gateway's
 * reloader thread, and what changed applies to the next message (see
 * docs/gateway.md, "Config reload"); a file that fails to load changes
 * nothing and is logged with its file:line:column. Returns at once; safe
 * from a signal handler (one write(2)). The gateway also watches the files
 * itself unless gateway.reload.mode is "off". */
void cm_gateway_reload(cm_gateway *g);

/* Stops and frees (drain first for a clean stop). NULL is a no-op. */
void cm_gateway_free(cm_gateway *g);

/* The state of the gateway of opt's state dir: {"running", "pid",
 * "address", "startedAt", "updatedAt", "channels", "sessions": [{"key",
 * "active","queued"}], "activeRuns", "debouncePending", "journalBacklog",
 * …} from its status file (<stateDir>/gateway/status.json, rewritten every
 * second); {"running": false} when none ever ran. */
cm_rc cm_gateway_status(const cm_options *opt, char **json, char *err, size_t errlen);

/* One message from the terminal (`clawmem chat`): through the running
 * gateway's HTTP channel (channel "terminal", the main session) when one
 * runs, else in this process straight to the agent's main session.
 * on_text receives the reply's messages; *via is "gateway" or "local". */
typedef void (*cm_chat_fn)(void *ctx, const char *text);
cm_rc cm_chat_send(const cm_options *opt, const char *text, int timeout_ms, cm_chat_fn on_text,
                   void *ctx, const char **via, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
