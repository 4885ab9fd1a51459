/*
 * body.h — the prompt text of one inbound turn, as 2026.3.22 builds it:
 * Body (the envelope "[Channel from +elapsed time] text" around the message,
 * wrapped with the pending group history), CommandBody/RawBody (the raw text,
 * for directives and commands), sender labels, the pending-only history
 * buffers and inline directive stripping on the current message only.
 * Pure text logic: no I/O, time passed in.
 */
#ifndef CM_GW_BODY_H
#define CM_GW_BODY_H

#include "../../base/buf.h"

/* The two wrapper headers (seed 001 "Messages"). */
#define GW_HISTORY_MARKER "[Chat messages since your last reply - for context]"
#define GW_CURRENT_MARKER "[Current message - respond to this]"
/* messages.groupChat.historyLimit when unset; 0 disables history. */
#define GW_HISTORY_LIMIT_DEFAULT 50
/* Conversations whose history is kept; the least recently used go first. */
#define GW_HISTORY_MAX_KEYS 1000

/* A sender as channels describe one; any field may be NULL. */
typedef struct gw_sender {
    const char *name, *username, *tag, *e164, *id;
} gw_sender;

/* Appends the sender label: the display name (name, else username, else
 * tag) and, when it differs, the id (e164, else id) in parentheses —
 * "Alice (+15550001)"; only one of them when the other is missing; nothing
 * when both are. */
cm_rc cm_gw_sender_label(buf *out, const gw_sender *s);

typedef enum { GW_TZ_LOCAL = 0, GW_TZ_UTC } gw_tz;

/* agents.defaults.envelopeTimezone (local or utc here), envelopeTimestamp
 * and envelopeElapsed ("off" turns each off; both on by default). */
typedef struct gw_envelope_opts {
    gw_tz tz;
    bool no_timestamp, no_elapsed;
} gw_envelope_opts;

/* One message to wrap. ts_ms/prev_ts_ms are Unix milliseconds, 0 = none
 * (prev_ts_ms: the previous message of the conversation, for "+5m"). */
typedef struct gw_envelope {
    const char *channel;      /* "Telegram"; NULL → "Channel" */
    const char *from;         /* "Alice id:42", "Dev group id:-100" */
    const char *sender_label; /* non-direct chats: prefixed to the body */
    bool direct, from_me;     /* from_me in a direct chat: "(self): " */
    int64_t ts_ms, prev_ts_ms;
    const char *body;
} gw_envelope;

/* Appends "[channel from +elapsed Wkd timestamp] body": header parts have
 * newlines turned to spaces, [ ] to ( ), runs of whitespace to one space;
 * the timestamp is "Mon 2026-01-05T14:30Z" in UTC, "Mon 2026-01-05 14:30
 * CET" in local time; elapsed is 45s, 5m, 3h or 2d (rounded). */
cm_rc cm_gw_envelope_format(buf *out, const gw_envelope *e, const gw_envelope_opts *o);

/* The "from" label: groups "label id:ID" (label defaults to "Group"),
 * direct chats "name id:ID" unless the id equals the name. */
cm_rc cm_gw_from_label(buf *out, bool group, const char *label, const char *id);

/* One pending history entry: a group message that did not trigger a run. */
typedef struct gw_history_entry {
    char *sender, *body, *message_id;
    int64_t ts_ms;
} gw_history_entry;

typedef struct gw_history_conv {
    char *key;
    gw_history_entry *v;
    size_t n;
    uint64_t used; /* recency, for eviction */
} gw_history_conv;

/* Pending history per conversation key, at most limit entries each (the
 * oldest dropped), at most GW_HISTORY_MAX_KEYS conversations. Not thread
 * safe: one owner (the gateway's conversation lock) at a time. */
typedef struct gw_history {
    int limit;
    gw_history_conv *conv;
    size_t n, cap;
    uint64_t clock;
} gw_history;

/* limit < 0: GW_HISTORY_LIMIT_DEFAULT; 0: history disabled. */
void cm_gw_history_init(gw_history *h, int limit);
void cm_gw_history_release(gw_history *h);
/* Records a message that did not trigger a run (nothing when disabled). */
cm_rc cm_gw_history_record(gw_history *h, const char *key, const char *sender, const char *body,
                           const char *message_id, int64_t ts_ms);
/* Forgets the key's entries: call when a run has taken them into its
 * prompt, so they are never sent twice (they are in the transcript now). */
void cm_gw_history_clear(gw_history *h, const char *key);
size_t cm_gw_history_count(const gw_history *h, const char *key);
/* The key's pending entries, oldest first (*n of them; NULL when none).
 * Valid until the next record, clear or release. */
const gw_history_entry *cm_gw_history_entries(const gw_history *h, const char *key, size_t *n);

/* How history entries are wrapped: each is an envelope of channel/from,
 * chat not direct, the entry's sender as label, its time, and its body
 * followed by " [id:MESSAGE_ID]" when it has one. */
typedef struct gw_history_fmt {
    const char *channel, *from;
    gw_envelope_opts opts;
} gw_history_fmt;

/* Appends Body: without pending entries (or with history disabled) the
 * current message as is; otherwise
 *   GW_HISTORY_MARKER \n entry \n entry … \n \n GW_CURRENT_MARKER \n current */
cm_rc cm_gw_history_build(buf *out, const gw_history *h, const char *key, const gw_history_fmt *fmt,
                          const char *current);

/* Inline directives found in a message (the raw level words, or NULL). */
typedef struct gw_directives {
    bool think, verbose, fast, reasoning, elevated, status, model;
    char level_think[32], level_verbose[32], level_fast[32], level_reasoning[32],
        level_elevated[32];
    char model_ref[256];
} gw_directives;

/* Appends text without its inline directives, as 2026.3.22 strips them:
 * the first of each of /think (/thinking, /t), /verbose (/v), /fast,
 * /reasoning (/reason), /elevated (/elev) with an optional [:] level word,
 * /status, and /model with an optional provider/model reference; each is
 * recognised at the start or after whitespace, followed by the end,
 * whitespace or ':' (case-insensitive). When one was removed, runs of
 * whitespace (newlines included) become one space; the result is trimmed.
 * found (may be NULL) tells which were seen. */
cm_rc cm_gw_directives_strip(buf *out, const char *text, gw_directives *found);

/* Strips directives from the current message only: when body holds
 * GW_CURRENT_MARKER, what precedes it and the marker line are kept as they
 * are and only the text after it is stripped; otherwise all of it. */
cm_rc cm_gw_body_strip_current(buf *out, const char *body, gw_directives *found);

#endif
