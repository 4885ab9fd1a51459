/*
 * debounce.h — the gateway's debounce of rapid texts into one turn
 * (debounce.c). Pure logic over an injected clock (`now_ms`): no threads,
 * no sleeping; not thread safe: one owner. 2026.3.22's semantics.
 */
#ifndef CM_GW_DEBOUNCE_H
#define CM_GW_DEBOUNCE_H

#include "../../base/common.h"
#include "../../config/runtime_config.h"
#include "inbound.h"

/* messages.inbound.debounceMs when unset: the 2000 (2026.3.22's code
 * falls back to 0, off; its docs/concepts/messages.md shows 2000). */
#define GW_DEBOUNCE_MS_DEFAULT 2000
/* Not in 2026.3.22: a burst is flushed early past this many messages or
 * bytes, so a sender cannot grow a pending batch without bound. */
#define GW_DEBOUNCE_MAX_PARTS 256
#define GW_DEBOUNCE_MAX_BYTES (256 * 1024)

/* The debounce window for channel: messages.inbound.byChannel.<channel>,
 * else messages.inbound.debounceMs, else GW_DEBOUNCE_MS_DEFAULT (the load
 * rejects a negative or fractional one). cfg may be NULL. */
int64_t cm_gw_debounce_ms(const cm_rtcfg *cfg, const char *channel);

/* One agent turn out of the debouncer: the newest message's fields (its id is
 * the one to reply to) with the texts of the batch joined by '\n' (empty
 * texts skipped). All strings owned (NULL when absent). */
typedef struct gw_turn {
    char *channel, *account, *peer, *session, *thread, *message_id, *sender, *text;
    bool is_group, has_media;
    bool mentioned; /* any message of the batch mentioned the bot */
    size_t count;   /* messages merged into this turn */
    char *sender_name, *sender_username, *chat_title; /* the newest message's */
    int64_t ts_ms;                                    /* the newest message's */
} gw_turn;

typedef struct gw_turns {
    gw_turn *v;
    size_t n, cap;
} gw_turns;

/* Frees every turn and the array; leaves t empty and reusable. */
void cm_gw_turns_release(gw_turns *t);

typedef struct gw_debounce gw_debounce;

/* A debouncer reading its windows and gated commands from cfg (borrowed,
 * may be NULL: defaults). */
cm_rc cm_gw_debounce_open(const cm_rtcfg *cfg, gw_debounce **out);
/* Reads cfg from now on (a reload; the caller's lock guards d). */
void cm_gw_debounce_set_config(gw_debounce *d, const cm_rtcfg *cfg);
void cm_gw_debounce_close(gw_debounce *d);

/* Takes one inbound message at now_ms and appends the turns that are ready
 * to ready (existing turns kept). A text-only, non-command message with a
 * sender and a conversation joins the pending batch of (channel, account,
 * conversation, thread, sender), whose deadline moves to now_ms + window.
 * Anything else — media, a control command, a window of 0 — flushes that
 * batch first (as its own turn) and then is a turn by itself. */
cm_rc cm_gw_debounce_push(gw_debounce *d, const gw_msg *m, int64_t now_ms, gw_turns *ready);

/* Appends the batches whose deadline is <= now_ms, oldest deadline first. */
cm_rc cm_gw_debounce_due(gw_debounce *d, int64_t now_ms, gw_turns *ready);

/* Appends every pending batch (shutdown / drain). */
cm_rc cm_gw_debounce_flush_all(gw_debounce *d, gw_turns *ready);

/* The earliest pending deadline, or INT64_MAX when nothing is pending. */
int64_t cm_gw_debounce_next_deadline(const gw_debounce *d);

/* Pending batches. */
size_t cm_gw_debounce_pending(const gw_debounce *d);

#endif
