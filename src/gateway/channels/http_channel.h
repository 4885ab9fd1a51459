/*
 * http_channel.h — the gateway's HTTP channel, on net/httpd: a client POSTs
 * an inbound message as JSON and gets 202 once the gateway accepted it
 * (journaled), 503 while it drains, 503 with Retry-After while the journal
 * is full of unanswered messages or cannot be written (nothing recorded:
 * send again), 413 for a message above the journal's limit; replies come
 * back on a per-conversation server-sent-events stream, by polling, and,
 * when channels.http.callbackUrl is set, as a POST of each reply. Every /v1 route needs
 * "Authorization: Bearer <gateway.auth.token>"; the token is never logged.
 *
 *   POST /v1/messages  {"peer", "text", "messageId", "sender", "chatType":
 *                       "direct"|"group"|"channel", "account", "thread",
 *                       "media": […], "mentioned", "channel": "http"|"terminal"}
 *   GET  /v1/events?peer=P[&account=A][&thread=T][&after=SEQ]   (SSE "reply")
 *   GET  /v1/replies?peer=P[&account=A][&thread=T][&after=SEQ]  (JSON)
 *   GET  /v1/status                                              (JSON)
 *   GET  /healthz                                                (no token)
 *
 * A reply is {"seq","channel","account","peer","thread","replyTo","text"};
 * each conversation keeps its last GW_HTTP_KEEP replies for late readers,
 * and the channel at most GW_HTTP_KEEP_BYTES of them in all (the oldest of
 * every conversation go first), so its memory does not grow with the
 * conversations' length or number (GW_HTTP_MAX_CONVS, least recently used
 * forgotten).
 */
#ifndef CM_GW_HTTP_CHANNEL_H
#define CM_GW_HTTP_CHANNEL_H

#include "../../net/httpd.h"
#include "channel.h"

#define GW_HTTP_KEEP         256   /* replies kept per conversation */
#define GW_HTTP_KEEP_BYTES   (8u << 20) /* replies kept in all (with their bookkeeping) */
#define GW_HTTP_MAX_CONVS    20000 /* conversations kept; the least recently used go */
#define GW_HTTP_DEFAULT_PORT 18789
#define GW_TEXT_LIMIT_HTTP   4000 /* characters per reply message */

/* The status document GET /v1/status answers (a new string, or NULL). */
typedef char *(*gw_http_status_fn)(void *ctx);

/* Opens the HTTP channel from root: listen is "ADDR:PORT" (NULL: gateway.
 * bind — loopback (default) 127.0.0.1, lan 0.0.0.0, custom gateway.
 * customBindHost — and gateway.port, default 18789); the token is gateway.
 * auth.token (a secret input) or $QUANTUMCLAW_GATEWAY_TOKEN; without one
 * CM_ECONFIG. Nothing listens before start. */
cm_rc cm_gw_http_open(const json_t *root, const char *listen, gw_channel **out, char *err,
                      size_t errlen);

/* Sets what GET /v1/status answers (before start). */
void cm_gw_http_set_status(gw_channel *ch, gw_http_status_fn fn, void *ctx);

/* Another handler for the same port, asked first for every request (the
 * gateway protocol's WebSocket upgrade and the Control UI, gw_ws.h): it
 * returns false for a request it does not take. Before start. */
typedef bool (*gw_http_route_fn)(void *ctx, const httpd_req *rq, httpd_conn *c);
void cm_gw_http_set_route(gw_channel *ch, gw_http_route_fn fn, void *ctx);

/* What the channel keeps for late readers: conversations, replies and the
 * replies' bytes (with their bookkeeping). */
void cm_gw_http_kept(gw_channel *ch, size_t *convs, size_t *replies, size_t *bytes);

/* The bound address "ADDR:PORT" once started, else NULL. */
const char *cm_gw_http_address(gw_channel *ch);

#endif
