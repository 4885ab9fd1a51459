/*
 * inbound.h — one inbound message as a channel hands it to the gateway's
 * core (gw_msg): the type every inbound stage reads — dedupe.h, debounce.h,
 * access.h, journal.h, the channels. A type only: no functions.
 */
#ifndef CM_GW_INBOUND_H
#define CM_GW_INBOUND_H

#include "../../base/common.h"

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

#endif
