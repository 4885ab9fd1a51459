/*
 * origin.h — what QuantumClaw 2026.3.22 records in a sessions.json entry
 * about where a session's messages come from and where its replies go, so
 * that either program reads the other's entries:
 *
 * - `origin` {label, provider, surface, chatType, from, to, accountId,
 *   threadId}: the last inbound message's conversation, merged field by
 *   field into the entry's (a field the message lacks keeps its value);
 * - the delivery route `deliveryContext` {channel, to, accountId,
 *   threadId?} mirrored in `lastChannel`, `lastTo`, `lastAccountId`,
 *   `lastThreadId` (removed when the message has no thread);
 * - for groups and channels `chatType`, `channel`, `groupId`, `subject`
 *   (or `groupChannel` for a "#name" title) and `displayName`
 *   ("telegram:g-<slug of the title>").
 *
 * Addresses are written as QuantumClaw's Telegram does: to
 * "<channel>:<chat>", from the same for a direct chat and
 * "<channel>:group:<chat>[:topic:<thread>]" for a group. Pure functions.
 */
#ifndef CM_SESSION_ORIGIN_H
#define CM_SESSION_ORIGIN_H

#include <jansson.h>

#include "../base/buf.h"

/* An inbound message's conversation; strings borrowed, NULL when unknown. */
typedef struct session_origin {
    const char *channel;   /* "telegram", "http", … (required) */
    const char *account;   /* the channel account; NULL: "default" */
    const char *peer;      /* the chat id (required) */
    const char *thread;    /* thread / topic id, or NULL */
    const char *chat_type; /* "direct", "group" or "channel"; NULL: "direct" */
    const char *label;     /* the conversation label ("Alice (@alice) id:111",
                              "Dev id:-100"), or NULL */
    const char *subject;   /* a group's title, or NULL */
} session_origin;

/* The members to merge into entry (may be NULL: a new one) for a message
 * of o, as a new object (a null member removes that field); NULL when o
 * lacks its channel or peer, or out of memory. */
json_t *cm_session_origin_patch(const json_t *entry, const session_origin *o);

/* Appends QuantumClaw's displayName of a group: "<channel>:" then the
 * title (groupChannel, else subject, else the id) as a slug ([a-z0-9#@._+-],
 * other runs one "-") prefixed "g-" unless it starts with "@" or "#" or
 * holds "#"; "<channel>" alone when the slug is empty. */
cm_rc cm_session_group_display_name(buf *out, const char *channel, const char *subject,
                                    const char *group_channel, const char *id);

#endif
