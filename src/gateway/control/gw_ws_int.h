/*
 * gw_ws_int.h — what gw_ws.c (connections, handshake, events, the run
 * wrapper) shares with the files of the methods (gw_methods.c and the
 * gw_*.c handlers it names): the connection and gateway structs, the method
 * type, and gw_ws.c's answers, events and calls into the runtime. Not for
 * other files.
 */
#ifndef CM_GW_WS_INT_H
#define CM_GW_WS_INT_H

#include <pthread.h>

#include "../channels/channel.h"
#include "gw_ws.h"

typedef struct gw_ws_client {
    httpd_conn *c;
    char conn_id[40];
    bool ready; /* connect succeeded */
    bool scope_read, scope_write, scope_admin;
    bool webchat; /* a webchat client that is not a Control UI: may not patch sessions */
    bool tool_events; /* connect.caps had "tool-events": gets the "agent" tool events */
    bool loopback;   /* connected from 127.0.0.0/8 or ::1 */
    bool has_origin; /* its upgrade carried an Origin header (a browser) */
    char nonce[64];  /* the connect.challenge nonce a device signs */
    int refs;     /* broadcasts writing to it (under w->mu) */
    struct gw_ws_client *next;
} gw_ws_client;

/* A chat.send not yet taken by a run, or the run under way. */
typedef struct gw_ws_run {
    char *key, *run_id;
    bool running;
    struct gw_ws_run *next;
} gw_ws_run;

struct gw_ws {
    gw_channel chan; /* the "webchat" channel; first */
    gw_ws_opts o;
    char *workspace, *config_path, *state_dir, *agent_id0;
    cm_options opt;
    char *token, *password;
    enum { GW_AUTH_TOKEN, GW_AUTH_PASSWORD, GW_AUTH_NONE } mode;
    bool ui_enabled;
    char base_path[128]; /* "" or "/prefix" without a trailing slash */
    const json_t *allowed_origins;
    gw_runtime *rt;
    gw_sink_fn sink; /* NULL once stopped */
    void *sink_ctx;
    int inflight;  /* sink or status calls under way (under mu) */
    bool detached; /* cm_gw_ws_detach: no sink, no status */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    gw_ws_client *clients;
    gw_ws_run *runs;
    uint64_t seq, counter;
    int64_t started;
    /* log ring (under mu) */
    char *log[GW_WS_LOG_LINES];
    uint64_t log_next; /* cursor of the next line */
};

/* A method: its scope and handler. The handler answers with gw_ws_reply. */
typedef enum { GW_SCOPE_READ, GW_SCOPE_WRITE, GW_SCOPE_ADMIN } gw_ws_scope;
typedef void (*gw_ws_method_fn)(gw_ws *w, gw_ws_client *cl, const char *id, json_t *params);
typedef struct gw_ws_method {
    const char *name;
    gw_ws_scope scope;
    gw_ws_method_fn fn;
} gw_ws_method;

/* Sends {"type":"res","id","ok":true,"payload"} (payload stolen). */
void cm_gw_ws_ok(gw_ws_client *cl, const char *id, json_t *payload);
/* Sends {"type":"res","id","ok":false,"error":{"code","message"[,"details"]}}
 * (details stolen, may be NULL). */
void cm_gw_ws_fail(gw_ws_client *cl, const char *id, const char *code, const char *message,
                   json_t *details);
/* Sends {"type":"event","event","payload","seq"} to every connected client
 * (payload stolen). */
void cm_gw_ws_broadcast(gw_ws *w, const char *event, json_t *payload);
/* The same, to the clients that asked for tool events only. */
void cm_gw_ws_broadcast_tools(gw_ws *w, const char *event, json_t *payload);
/* The canonical session key: "agent:<default agent>:<key>" unless key has the
 * "agent:" prefix; "main" is the agent's main session. NULL on no memory. */
char *cm_gw_ws_session_key(gw_ws *w, const char *key);

/* Calls the runtime's sink with m under the inflight count: CM_EBUSY once
 * stopped or detached. */
cm_rc cm_gw_ws_sink(gw_ws *w, const gw_msg *m);
/* cm_gw_runtime_notify under the inflight count: false once stopped or
 * detached. */
bool cm_gw_ws_notify(gw_ws *w, const char *channel, const char *account, const char *peer,
                     const char *text);
/* The gateway's status (a new object) or NULL once detached. */
json_t *cm_gw_ws_status(gw_ws *w);
/* The config the gateway runs with now: the runtime's live snapshot (a
 * reload replaces it) with a reference in *hold, or o.config (*hold NULL)
 * before the runtime is attached or once stopped. Valid until
 * cm_rtcfg_unref(*hold); may be NULL (no config). */
const json_t *cm_gw_ws_config(gw_ws *w, cm_rtcfg **hold);

/* One text message (a req frame, hostile) from cl: the handshake until cl
 * is ready, then a method with its scope checked; the answers go to cl->c
 * (nowhere when NULL: the fuzz target). False: close the connection. */
bool cm_gw_ws_message(gw_ws *w, gw_ws_client *cl, const char *text, size_t n);

#endif
