/*
 * keys.h — QuantumClaw 2026.3.22's session keys: `agent:<agentId>:<rest>`,
 * lower case. Direct chats collapse to the agent's main key
 * (`agent:<id>:main`) unless session.dmScope asks for per-peer keys; groups
 * and channels get `agent:<id>:<channel>:<group|channel>:<peerId>`; a thread
 * or topic appends `:thread:<threadId>`. Agent and account ids are normalised
 * as QuantumClaw does (`[a-z0-9][a-z0-9_-]{0,63}`, other runs become "-").
 * Every function writes into a caller's buffer and never fails but for
 * memory (CM_ENOMEM).
 */
#ifndef CM_SESSION_KEYS_H
#define CM_SESSION_KEYS_H

#include "../base/buf.h"

/* session.dmScope */
typedef enum session_dm_scope {
    SESSION_DM_MAIN,
    SESSION_DM_PER_PEER,
    SESSION_DM_PER_CHANNEL_PEER,
    SESSION_DM_PER_ACCOUNT_CHANNEL_PEER
} session_dm_scope;

typedef enum session_chat {
    SESSION_CHAT_UNKNOWN,
    SESSION_CHAT_DIRECT,
    SESSION_CHAT_GROUP,
    SESSION_CHAT_CHANNEL
} session_chat;

/* "main", "per-peer", … → the scope; -1 for an unknown name. */
int cm_session_dm_scope_parse(const char *s);

/* Appends the normalised agent id ("main" when empty). */
cm_rc cm_session_agent_id(buf *out, const char *agent_id);
/* Appends `agent:<id>:main`. */
cm_rc cm_session_main_key(buf *out, const char *agent_id);

/* Where an inbound message belongs. peer_kind "direct", "group" or
 * "channel"; channel ("telegram", "http", …), account and peer ids as the
 * channel gives them; thread_id may be NULL. identity_links (may be NULL)
 * maps a canonical peer name to ids ("telegram:123" or "123") that collapse
 * to it for per-peer scopes. */
typedef struct session_route {
    const char *agent_id, *channel, *account_id, *peer_kind, *peer_id, *thread_id;
    session_dm_scope dm_scope;
    bool global;                /* session.scope "global": every message shares the key "global" */
    const void *identity_links; /* a jansson object, or NULL */
} session_route;

cm_rc cm_session_key_for(buf *out, const session_route *r);

/* A request key as the store keeps it: "main" or "" → the main key; a key
 * without the agent prefix gets it; everything lower case. */
cm_rc cm_session_store_key(buf *out, const char *agent_id, const char *request_key);

/* The chat type a key names ("group", "channel", "direct"/"dm" tokens). */
session_chat cm_session_chat_of(const char *key);

/* The agent id a key names ("main" when it names none). */
cm_rc cm_session_key_agent(buf *out, const char *key);

#endif
