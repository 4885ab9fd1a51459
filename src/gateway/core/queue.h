/*
 * queue.h — queueing while a run is active (queue.c): the queue modes,
 * their settings and /queue overrides, and one session's followup queue.
 * Pure logic over an injected clock (`now_ms`); not thread safe: one owner.
 * 2026.3.22's semantics.
 */
#ifndef CM_GW_QUEUE_H
#define CM_GW_QUEUE_H

#include "../../base/common.h"
#include "../../config/runtime_config.h"
#include "dedupe.h"

/* 2026.3.22 src/auto-reply/reply/queue/state.ts and enqueue.ts. */
#define GW_QUEUE_DEBOUNCE_MS   1000
#define GW_QUEUE_CAP           20
#define GW_QUEUE_RECENT_TTL_MS (5 * 60 * 1000) /* recently queued message ids */
#define GW_QUEUE_RECENT_MAX    10000

typedef enum gw_queue_mode {
    GW_QMODE_COLLECT, /* the default: queued messages become one followup turn */
    GW_QMODE_FOLLOWUP,
    GW_QMODE_STEER,
    GW_QMODE_STEER_BACKLOG,
    GW_QMODE_INTERRUPT
} gw_queue_mode;

typedef enum gw_queue_drop {
    GW_QDROP_SUMMARIZE, /* the default */
    GW_QDROP_OLD,
    GW_QDROP_NEW
} gw_queue_drop;

/* Reads a mode as 2026.3.22 normalizes it (trimmed, any case; aliases queue,
 * queued → steer; interrupts, abort → interrupt; steering → steer; follow-ups,
 * followups → followup; coalesce → collect; steer+backlog, steer_backlog →
 * steer-backlog). False when s is none of them. */
bool cm_gw_queue_mode_parse(const char *s, gw_queue_mode *out);
/* old, oldest / new, newest / summarize, summary. */
bool cm_gw_queue_drop_parse(const char *s, gw_queue_drop *out);

typedef struct gw_queue_settings {
    gw_queue_mode mode;
    int64_t debounce_ms; /* quiet time before a followup turn starts */
    size_t cap;          /* queued messages kept per session, >= 1 */
    gw_queue_drop drop;
} gw_queue_settings;

/* A session's /queue override; NULL / negative / 0 fields are unset. */
typedef struct gw_queue_override {
    const char *mode, *drop;
    int64_t debounce_ms; /* < 0: unset */
    long cap;            /* <= 0: unset */
} gw_queue_override;

/* The session override, else messages.queue.byChannel.<channel> (mode),
 * messages.queue.debounceMsByChannel.<channel>, messages.queue.{mode,
 * debounceMs, cap, drop}, else the defaults (collect, 1000, 20, summarize).
 * cfg and ov may be NULL. */
void cm_gw_queue_settings_resolve(const cm_rtcfg *cfg, const char *channel,
                                  const gw_queue_override *ov, gw_queue_settings *out);

/* Reads a standalone "/queue [mode] [debounce:2s] [cap:25] [drop:old]" (or
 * "/queue default|reset|clear") into ov (mode and drop as canonical static
 * names; unset fields as gw_queue_override says; debounce in ms by default,
 * or with a unit ms, s, m, h, d). Parsing stops at the first unknown token,
 * as 2026.3.22's directive parser does. *reset is true for default/reset/
 * clear: the session override is to be dropped. False when text is not a
 * /queue command. */
bool cm_gw_queue_parse_command(const char *text, gw_queue_override *ov, bool *reset);

typedef enum gw_queue_action {
    GW_QACT_RUN_NOW,           /* no run active: start one with this message */
    GW_QACT_INTERRUPT,         /* abort the active run, drop the queue, run this one */
    GW_QACT_STEER,             /* inject the text into the streaming run; nothing queued */
    GW_QACT_STEER_AND_ENQUEUE, /* inject, and also queued for a followup turn */
    GW_QACT_ENQUEUE,           /* queued for a followup turn */
    GW_QACT_DROP               /* not run: a heartbeat during a run, a duplicate, or
                                  the queue is full with drop "new" */
} gw_queue_action;

/* A queued message: the prompt and where it came from. Borrowed on input. */
typedef struct gw_queue_item {
    const char *prompt, *message_id, *channel, *peer, *account, *thread;
} gw_queue_item;

/* A followup turn out of the queue (strings owned; free with
 * cm_gw_queue_run_release). */
typedef struct gw_queue_run {
    char *prompt, *message_id, *channel, *peer, *account, *thread;
    size_t count; /* queued messages it carries */
} gw_queue_run;
void cm_gw_queue_run_release(gw_queue_run *r);

typedef struct gw_queue gw_queue;

/* A followup queue of one session. recent (may be NULL) is the gateway-wide
 * cache of recently queued message ids (GW_QUEUE_RECENT_TTL_MS,
 * GW_QUEUE_RECENT_MAX), borrowed; session_key is copied. */
cm_rc cm_gw_queue_open(const char *session_key, gw_dedupe *recent, gw_queue **out);
void cm_gw_queue_close(gw_queue *q);

/* What to do with an inbound message for this session, as 2026.3.22's
 * agent runner decides, queueing it when the answer says so. The cap and drop
 * policy apply on enqueue: "new" refuses the message, "old" drops the
 * oldest, "summarize" drops the oldest and keeps a one-line summary of each
 * (at most cap lines) for the next followup turn. */
gw_queue_action cm_gw_queue_on_inbound(gw_queue *q, const gw_queue_settings *s, bool active_run,
                                       bool streaming, bool heartbeat, const gw_queue_item *msg,
                                       int64_t now_ms);

/* Clears the queue (interrupt, /new, /reset); returns the messages dropped. */
size_t cm_gw_queue_clear(gw_queue *q);

/* When no run is active: the next followup turn, once s->debounce_ms has
 * passed since the last enqueue (*ready false otherwise, or when empty).
 * collect: every queued message in one prompt under "[Queued messages while
 * agent was busy]" ("---\nQueued #N\n<prompt>" blocks), unless they come
 * from different routes, which drain one by one; followup/steer: one message
 * a turn. A pending overflow summary goes first. */
cm_rc cm_gw_queue_next(gw_queue *q, const gw_queue_settings *s, int64_t now_ms, gw_queue_run *out,
                       bool *ready);

/* When cm_gw_queue_next will have a turn (INT64_MAX when empty). */
int64_t cm_gw_queue_deadline(const gw_queue *q, const gw_queue_settings *s);
size_t cm_gw_queue_depth(const gw_queue *q);

#endif
