/*
 * inbound_meta.h — who is writing, told to the model as 2026.3.22 tells it:
 * the user message of a turn starts with "Conversation info (untrusted
 * metadata):" and "Sender (untrusted metadata):" blocks and, in groups, the
 * pending history as "Chat history since last reply (untrusted, for
 * context):" — each a JSON value (2-space indent, keys in 2026.3.22's order,
 * absent fields left out) in a ```json fence — then a blank line and the
 * message text. Every string is JSON-escaped, so no newline reaches the
 * fenced text and a name cannot close the fence or add a line of its own.
 * Also the envelope timestamp ("Mon 2026-01-05 14:30 EST") in the configured
 * zone. Pure text logic over the injected time: no I/O but the zone files.
 */
#ifndef CM_GW_INBOUND_META_H
#define CM_GW_INBOUND_META_H

#include <jansson.h>

#include "../../base/buf.h"
#include "../../config/runtime_config.h"
#include "body.h"

#define GW_META_CONVERSATION_HEADER "Conversation info (untrusted metadata):"
#define GW_META_SENDER_HEADER       "Sender (untrusted metadata):"
#define GW_META_HISTORY_HEADER      "Chat history since last reply (untrusted, for context):"
/* Not in 2026.3.22: a sender's name or username longer than this (bytes) is
 * cut at a character boundary and ends with "…", so a hostile 10 KB name
 * costs the prompt little. */
#define GW_META_NAME_MAX 256

/* How timestamps are written: agents.defaults.envelopeTimezone ("local" or
 * unset: the host's zone; "utc"/"gmt"; "user": agents.defaults.userTimezone,
 * else local; an IANA name, else UTC when it is unknown) and
 * envelopeTimestamp ("off": none). */
typedef struct gw_ts_opts {
    bool off, utc;
    char zone[256]; /* IANA name; "" and !utc: the host's local time */
} gw_ts_opts;

/* agents.defaults.envelopeTimestamp / envelopeTimezone (and userTimezone)
 * of cfg (NULL: defaults) resolved. */
void cm_gw_ts_opts_read(const cm_rtcfg *cfg, gw_ts_opts *o);

/* Appends "Wkd YYYY-MM-DDTHH:MMZ" (UTC) or "Wkd YYYY-MM-DD HH:MM ZONE" where
 * ZONE is what en-US Intl calls it ("EST", "PDT", "UTC", else "GMT+1",
 * "GMT+5:30"). Nothing for ts_ms <= 0 or o->off. */
cm_rc cm_gw_ts_format(buf *out, int64_t ts_ms, const gw_ts_opts *o);

/* One turn's facts (borrowed; NULL / 0 when unknown). */
typedef struct gw_meta {
    const char *channel; /* "telegram", "http", "webchat", … */
    bool is_group, mentioned;
    const char *message_id, *sender_id, *sender_name, *sender_username;
    const char *conversation_label; /* groups: "Title id:-100" or "group:-100" */
    const char *group_subject;      /* groups: the chat's title */
    const char *thread;             /* topic id */
    int64_t ts_ms;
    const gw_history_entry *history; /* pending group history, oldest first */
    size_t nhistory;
} gw_meta;

/* Appends the blocks for m (joined by a blank line; nothing when there is
 * nothing to tell). Direct chats of "webchat"/"terminal" (the owner's own
 * console) get no ids, as 2026.3.22 leaves them out of webchat, and no
 * Sender block. */
cm_rc cm_gw_meta_prefix(buf *out, const gw_meta *m, const gw_ts_opts *o);

/* Appends the history sender label 2026.3.22's Telegram writes: "Name
 * (@user) id:ID", parts left out when unknown ("id:unknown" when nothing
 * is). */
cm_rc cm_gw_meta_sender_label(buf *out, const char *name, const char *username, const char *id);

#endif
