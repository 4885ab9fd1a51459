/*
 * channel.h — the gateway's channels: where inbound messages come from and
 * where replies go. The gateway command opens one gw_channel per configured
 * channel account (the HTTP channel, Telegram, …), starts it with a sink that
 * takes each inbound message (inbound.h's gw_msg) into the core's pipeline,
 * and sends the reply chunks back through it. A channel knows its wire
 * protocol only: access, dedupe, debounce, queueing, sessions and chunking
 * are the gateway's. Each channel's constructor is in its own header
 * (http_channel.h, telegram.h).
 */
#ifndef CM_GW_CHANNEL_H
#define CM_GW_CHANNEL_H

#include <jansson.h>

#include "../core/inbound.h"
#include "tg_html.h"

typedef struct gw_channel gw_channel;

/* Takes one inbound message, called from the channel's own thread; m and
 * its strings are borrowed for the call. CM_OK means accepted: recorded
 * durably, so it is answered even after a crash. A channel that acknowledges
 * deliveries (Telegram's getUpdates offset) moves past a message only once
 * the sink accepted it; on another code it tries that message again later. */
typedef cm_rc (*gw_sink_fn)(void *ctx, const gw_msg *m);

/* One outbound message: a chunk already within the channel's text_limit.
 * Strings borrowed; NULL means absent. */
typedef struct gw_outbound {
    const char *account;  /* the channel account ("default" when NULL) */
    const char *peer;     /* the conversation (gw_msg.peer) */
    const char *thread;   /* thread / topic id, or NULL */
    const char *reply_to; /* the message id this chunk replies to, or NULL */
    const char *text;
    bool plain; /* the gateway's own notice (pairing code, command answer): sent as
                   written, never formatted as a reply's Markdown is */
} gw_outbound;

typedef struct gw_channel_ops {
    const char *name;  /* "http", "telegram": the gw_msg.channel it produces */
    size_t text_limit; /* characters per outbound message (Telegram: 4096) */
    /* Starts receiving in a thread of its own; sink(ctx, m) per message. */
    cm_rc (*start)(gw_channel *ch, gw_sink_fn sink, void *ctx, char *err, size_t errlen);
    /* Sends one chunk (blocking; retries the channel's own rate limits). */
    cm_rc (*send)(gw_channel *ch, const gw_outbound *o, char *err, size_t errlen);
    /* Stops receiving; returns once the receiving thread has ended. */
    void (*stop)(gw_channel *ch);
    /* Frees the channel (stopped first when it still runs). */
    void (*close)(gw_channel *ch);
    /* The signs of life (feel.h); each optional, NULL when the channel has
     * none. */
    /* The typing indicator of o's conversation (peer, thread): shown now and
     * refreshed every interval_ms until called with 0, for at most
     * GW_TYPING_TTL_MS. Never blocks; at most one request in flight per
     * conversation; failures are logged once and otherwise ignored. */
    void (*typing)(gw_channel *ch, const gw_outbound *o, int64_t interval_ms);
    /* An emoji reaction on message o->reply_to of o->peer. Never blocks;
     * failures are logged. */
    void (*react)(gw_channel *ch, const gw_outbound *o, const char *emoji);
    /* A preview of a reply: o->text (Markdown, formatted as send formats it,
     * as plain text when the formatting is refused) sent as a new message
     * when message_id is NULL (its id written to id), else message_id
     * edited to it ("not modified" counts as done). One attempt, unless
     * final: then retried as send retries. CM_ERATELIMIT sets
     * *retry_after_ms; CM_ETOOBIG when o->text is over text_limit. */
    cm_rc (*preview)(gw_channel *ch, const gw_outbound *o, const char *message_id, bool final,
                     char *id, size_t idlen, long *retry_after_ms, char *err, size_t errlen);
    /* Deletes message_id of o->peer (a preview no longer wanted). */
    cm_rc (*unsend)(gw_channel *ch, const gw_outbound *o, const char *message_id, char *err,
                    size_t errlen);
} gw_channel_ops;

/* Every channel implementation starts with this header. */
struct gw_channel {
    const gw_channel_ops *ops;
};

#endif
