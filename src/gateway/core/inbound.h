/*
 * inbound.h — the gateway's inbound decisions, before any agent run: dedupe
 * of redelivered messages (dedupe.c), debounce of rapid texts into one turn
 * (debounce.c) and who may reach the agent at all (access.c). Pure logic over
 * an injected clock (`now_ms`, milliseconds): no sockets, no threads, no
 * sleeping; the gateway command drives it. Not thread safe: one owner each.
 * Constants and semantics are QuantumClaw 2026.3.22's (named at each one).
 */
#ifndef CM_GW_INBOUND_H
#define CM_GW_INBOUND_H

#include <jansson.h>

#include "../../base/buf.h"
#include "../../base/common.h"
#include "../../config/runtime_config.h"
#include "commands.h"

/* One inbound message as a channel adapter hands it over. Strings are
 * borrowed (the caller keeps them alive for the call); NULL means absent. */
typedef struct gw_msg {
    const char *channel;    /* "telegram", "http", … */
    const char *account;    /* the channel account ("default" when NULL) */
    const char *peer;       /* the conversation: DM peer id, group or chat id */
    const char *session;    /* the session key when already routed, else NULL */
    const char *thread;     /* thread / topic id, or NULL */
    const char *message_id; /* the channel's message id */
    const char *sender;     /* the sender id */
    const char *text;       /* the text, or NULL */
    bool is_group;          /* group or channel chat (else direct) */
    bool has_media;         /* carries media or attachments */
    bool mentioned;         /* the bot was mentioned (groups) */
    /* Who wrote it, as the channel tells (untrusted, any bytes; NULL when
     * unknown): display name ("First Last"), username without '@', the
     * chat's title (groups), and when it was written (Unix ms; 0: unknown —
     * the runtime stamps the time it accepted the message). */
    const char *sender_name, *sender_username, *chat_title;
    int64_t ts_ms;
} gw_msg;

/* ---- dedupe (dedupe.c) -------------------------------------------------- */

/* 2026.3.22 src/auto-reply/reply/inbound-dedupe.ts: ttlMs 20 min, maxSize 5000. */
#define GW_DEDUPE_TTL_MS (20 * 60 * 1000)
#define GW_DEDUPE_MAX    5000

typedef struct gw_dedupe gw_dedupe;

/* A cache of seen keys, each forgotten ttl_ms after it was last seen, at most
 * max keys (the least recently seen evicted first). ttl_ms 0: no expiry.
 * CM_EINVAL when max is 0. */
cm_rc cm_gw_dedupe_open(int64_t ttl_ms, size_t max, gw_dedupe **out);
void cm_gw_dedupe_close(gw_dedupe *d);

/* Writes m's dedupe key into out (reset first): channel (trimmed,
 * lower-cased), account, session scope ("agent:<id>" for an "agent:<id>:…"
 * session key, else the key), peer, thread and message id, each trimmed and
 * written as <length>:<bytes> (an absent part "0:"), joined with '|' — the
 * length prefixes make the key unambiguous whatever the parts contain.
 * Returns false (out empty) when the message has no channel, message id or
 * peer — such a message is never treated as a duplicate. */
bool cm_gw_dedupe_key(const gw_msg *m, buf *out);

/* Keys journaled by versions before the length-prefixed form: the non-empty
 * parts joined with '|' (ambiguous: "alice|7" as a peer or "alice" and
 * thread "7"), behind this prefix so that they never equal a current key.
 * Read back from an older journal and checked only until they expire. */
#define GW_DEDUPE_LEGACY_PREFIX "v1|"
bool cm_gw_dedupe_key_legacy(const gw_msg *m, buf *out);

/* Returns true when key was seen less than ttl ago (a duplicate: drop it);
 * either way key is recorded as seen at now_ms. On out of memory the key is
 * treated as new (false) and not recorded. O(1) amortized. */
bool cm_gw_dedupe_check(gw_dedupe *d, const char *key, int64_t now_ms);

/* True when key was seen less than ttl ago; records nothing. */
bool cm_gw_dedupe_peek(const gw_dedupe *d, const char *key, int64_t now_ms);

/* Checks m (cm_gw_dedupe_key then cm_gw_dedupe_check). */
bool cm_gw_dedupe_check_msg(gw_dedupe *d, const gw_msg *m, int64_t now_ms);

size_t cm_gw_dedupe_size(const gw_dedupe *d);

/* ---- debounce (debounce.c) ---------------------------------------------- */

/* messages.inbound.debounceMs when unset: the issue's 2000 (2026.3.22's code
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

/* ---- access (access.c) -------------------------------------------------- */

/* 2026.3.22 src/pairing/pairing-store.ts: 8 characters from an alphabet
 * without 0 O 1 I, pending for 1 hour, at most 3 pending per channel. */
#define GW_PAIRING_CODE_LEN    8
#define GW_PAIRING_ALPHABET    "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
#define GW_PAIRING_TTL_MS      (60 * 60 * 1000)
#define GW_PAIRING_MAX_PENDING 3

typedef enum gw_access_verdict {
    GW_ACCESS_ALLOW,           /* run the agent */
    GW_ACCESS_DENY,            /* drop: no run, no reply */
    GW_ACCESS_PAIRING_ISSUED,  /* a new pairing request: send code to the sender, no run */
    GW_ACCESS_PAIRING_PENDING, /* a request is already pending (or the cap is hit): no run,
                                  no reply */
    GW_ACCESS_NO_MENTION       /* allowed group message without a mention: history only */
} gw_access_verdict;

typedef struct gw_access_result {
    gw_access_verdict verdict;
    char code[GW_PAIRING_CODE_LEN + 1]; /* GW_ACCESS_PAIRING_ISSUED: the code */
    const char *reason;                 /* static, for logs: "dmPolicy=pairing (…)" */
    /* GW_ACCESS_ALLOW: the sender may use the control commands (2026.3.22's
     * command authorization): commands.useAccessGroups false; else the
     * sender named in commands.allowFrom["<channel>"] (or its "*" entry)
     * when that is set; else in a non-empty allowlist of the chat — a DM's
     * allowFrom ("*" counts) or its approved senders, a group's allowFrom,
     * groupAllowFrom or allowFrom. An open group with no list: false. */
    bool commands;
} gw_access_result;

/* Checks channels.<channel> (and channels.<channel>.accounts.<account>, which
 * overrides it key by key) for the access rules' config errors the load
 * leaves (it checks kinds and choices): dmPolicy "allowlist" with an empty
 * allowFrom, dmPolicy "open" without "*" in allowFrom. CM_ECONFIG with the
 * key named. cfg may be NULL (defaults). */
cm_rc cm_gw_access_validate(const cm_rtcfg *cfg, const char *channel, const char *account,
                            char *err, size_t errlen);

/* Decides whether m may reach the agent, as 2026.3.22 does:
 * - direct: dmPolicy disabled → deny; open → allow; a sender in allowFrom
 *   (or, unless the policy is allowlist, in the pairing allow-from store) →
 *   allow; pairing → a pending request in <state_dir>/credentials/
 *   <channel>-pairing.json (issued or already pending); allowlist → deny;
 * - group: the group's groupPolicy (groups.<peer> or groups."*", else the
 *   channel's, default allowlist): disabled → deny; a group entry with
 *   enabled false → deny; allowlist → the group must be a groups entry (or
 *   "*" be one) and the sender in the group's allowFrom, else groupAllowFrom,
 *   else allowFrom (never the pairing store); then requireMention (default
 *   true) without m->mentioned → GW_ACCESS_NO_MENTION.
 * now_ms is wall-clock Unix time in ms (stored as ISO timestamps). Runs
 * cm_gw_access_validate first: a config error is CM_ECONFIG and never an allow.
 * Store files are written under src/base/lockfile.h's lock. */
cm_rc cm_gw_access_check(const cm_rtcfg *cfg, const char *state_dir, const gw_msg *m,
                         int64_t now_ms, gw_access_result *res, char *err, size_t errlen);

/* Whether the sender of a run may be offered the tools that act on the
 * host (exec, process): the owner's console ("terminal", "webchat"), or a
 * direct chat whose peer (the sender: a DM's peer is its writer) is named in
 * channels.<channel>[.accounts.<acct>].allowFrom (not by "*") or, under
 * dmPolicy pairing, approved in the allow-from store. Never a group, never
 * dmPolicy disabled, and never dmPolicy open while session.dmScope is "main"
 * (anyone's messages then share the session). An error is CM_E* with
 * *trusted false. No channel: *trusted false (the caller decides). */
cm_rc cm_gw_access_trusted(const cm_rtcfg *cfg, const char *state_dir, const char *channel,
                           const char *account, const char *peer, bool is_group, bool *trusted,
                           char *err, size_t errlen);

/* `pairing approve <channel> <code>`: the pending request with code (any
 * case, surrounding blanks ignored; of account when account is not NULL) is
 * removed and its sender added to the allow-from store of the request's
 * account (<channel>-<account>-allowFrom.json, {"version":1,"allowFrom":[…]}).
 * Writes the approved sender id into id (may be NULL). CM_ENOTFOUND when no
 * unexpired request has that code. */
cm_rc cm_gw_pairing_approve(const char *state_dir, const char *channel, const char *account,
                            const char *code, int64_t now_ms, char *id, size_t idlen, char *err,
                            size_t errlen);

/* Denies the pending request with code (as cm_gw_pairing_approve finds it):
 * removed without approving its sender, whose id is written into id (may be
 * NULL). CM_ENOTFOUND when no unexpired request has that code. */
cm_rc cm_gw_pairing_deny(const char *state_dir, const char *channel, const char *account,
                         const char *code, int64_t now_ms, char *id, size_t idlen, char *err,
                         size_t errlen);

/* `pairing list <channel>`: appends the unexpired pending requests of
 * <channel>-pairing.json to out as {"code","id","accountId","createdAt",
 * "lastSeenAt"} (nothing when the file is missing). */
cm_rc cm_gw_pairing_list(const char *state_dir, const char *channel, int64_t now_ms, json_t *out,
                         char *err, size_t errlen);

/* Shared by access.c and pairing.c (not for other callers). */
/* An allow-list entry (string or integer) as a trimmed string; false when
 * blank or longer than n - 1. */
bool cm_gw_allow_entry(const json_t *v, char *out, size_t n);
/* upsertChannelPairingRequest for sender: res becomes PAIRING_ISSUED (new
 * code) or PAIRING_PENDING. channel and account already lower-cased. */
cm_rc cm_gw_pairing_request(const char *state_dir, const char *channel, const char *account,
                            const char *sender, int64_t now_ms, gw_access_result *res, char *err,
                            size_t errlen);
/* Appends the approved senders of (channel, account) to out, a JSON array. */
cm_rc cm_gw_allowfrom_read(const char *state_dir, const char *channel, const char *account,
                           json_t *out, char *err, size_t errlen);

/* ---- queueing while a run is active (queue.c) --------------------------- */

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
