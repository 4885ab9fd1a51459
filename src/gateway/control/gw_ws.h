/*
 * gw_ws.h — the gateway protocol (QuantumClaw's protocol 3) on the gateway's
 * HTTP port, and the Control UI served next to it. A browser or program
 * upgrades any GET to a WebSocket; the server sends a connect.challenge
 * event, the client's first frame is a connect req (token or password auth,
 * role operator, scopes operator.read / operator.write / operator.admin), the
 * answer a hello-ok; then req/res frames for the methods of gw_methods.c and
 * event frames ("chat" deltas and finals of every agent run, "tick").
 *
 * chat.send hands the text to the runtime as a message of the "webchat"
 * channel with the session key given, so it is journaled, queued and
 * serialised with the channels' messages like any other; the run wrapper
 * cm_gw_ws_run (the runtime's gw_run_fn) streams every run's text to the
 * connected clients. Thread safe.
 */
#ifndef CM_GW_WS_H
#define CM_GW_WS_H

#include "../../net/httpd.h"
#include "../core/runtime.h"

#define GW_WS_PROTOCOL      3
#define GW_WS_MAX_PAYLOAD   (4u << 20) /* bytes of one message, in or out (reference: 25 MiB) */
#define GW_WS_HANDSHAKE_MS  10000      /* connect must come within (reference: 10 s) */
#define GW_WS_TICK_MS       30000      /* "tick" events to an idle client (reference: 30 s) */
#define GW_WS_LOG_LINES     1000       /* log lines kept for logs.tail */
#define GW_WS_HISTORY_BYTES (512 * 1024) /* chat.history's answer at most (reference: 6 MB) */
#define GW_WS_TOOL_RESULT_BYTES 8192   /* of a tool result in an "agent" tool event */

/* The gateway's status (a new object), for health and status. */
typedef json_t *(*gw_ws_status_fn)(void *ctx);

/* The memory engine of agent_id, long-lived and shared by every thread
 * (borrowed: the caller does not close it). */
typedef cm_rc (*gw_engine_fn)(void *ctx, const char *agent_id, cm_engine **out, char *err,
                              size_t errlen);

typedef struct gw_ws_opts {
    const json_t *config; /* the whole config (borrowed; outlives the gw_ws) */
    const cm_options *opt; /* paths for the session stores (copied) */
    const char *config_path; /* for config.get; may be NULL */
    gw_run_fn run;           /* the agent run the wrapper calls */
    void *run_ctx;
    gw_ws_status_fn status; /* may be NULL */
    void *status_ctx;
    const char *version; /* server.version in hello-ok */
    const cm_logger *log; /* clients connected, refused, gone; may be NULL */
    gw_engine_fn engine;  /* memory.search / memory.get; NULL: they answer UNAVAILABLE */
    void *engine_ctx;
} gw_ws_opts;

typedef struct gw_ws gw_ws;

/* Resolves the gateway's auth (gateway.auth.mode: "token", the default when a
 * token is set, "password" or "none"; gateway.auth.token / .password as
 * secret inputs, else $QUANTUMCLAW_GATEWAY_TOKEN / _PASSWORD) and the Control
 * UI settings (gateway.controlUi.enabled, .basePath, .allowedOrigins).
 * CM_ECONFIG when the mode needs a secret that is not set. */
cm_rc cm_gw_ws_new(const gw_ws_opts *o, gw_ws **out, char *err, size_t errlen);

/* Where chat.send and chat.abort deliver (before clients connect). */
void cm_gw_ws_set_runtime(gw_ws *w, gw_runtime *rt);

/* The "webchat" channel to register with the runtime: it takes the sink,
 * and shows the runtime's notices (command answers) as chat finals; replies
 * themselves reach the clients through cm_gw_ws_run. Owned by w (its close
 * op does nothing). */
gw_channel *cm_gw_ws_channel(gw_ws *w);

/* An HTTP request for the gateway port: a WebSocket upgrade (served on this
 * thread until the socket closes) or a Control UI page. False when neither
 * (the caller answers it). */
bool cm_gw_ws_route(void *ctx, const httpd_req *rq, httpd_conn *c);

/* A gw_run_fn (ctx = the gw_ws): runs the turn with opts.run and broadcasts
 * "chat" events — deltas with the text so far, then final, error or
 * aborted — and, to the clients whose connect caps had "tool-events", an
 * "agent" event (stream "tool") as each tool call starts and ends. */
cm_rc cm_gw_ws_run(void *ctx, const gw_run_req *rq, gw_run_res *out, char *err, size_t errlen);

/* Keeps a log line for logs.tail (secrets of the gateway's auth redacted). */
void cm_gw_ws_log(gw_ws *w, cm_log_level level, const char *msg);

/* Before the runtime goes: chat.send answers UNAVAILABLE, status calls stop;
 * returns once no call into the runtime or the status callback is under
 * way. */
void cm_gw_ws_detach(gw_ws *w);

/* Closes every client (1001) and frees. Call after the HTTP server stopped
 * or with no client connected. NULL is a no-op. */
void cm_gw_ws_free(gw_ws *w);

/* Whether a browser's Origin may open the socket: absent (not a browser),
 * listed in allowed (or "*" there), or the same origin as host (http:// or
 * https:// followed by the Host header). Exposed for tests. */
bool cm_gw_ws_origin_ok(const char *origin, const char *host, const json_t *allowed);

#endif
