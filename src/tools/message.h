/*
 * message.h — the agent's `message` tool with QuantumClaw 2026.3.22's name
 * and its `send` action ({action:"send", channel?, target?, accountId?,
 * message}): the text goes out through the gateway's channel (Telegram, the
 * HTTP channel, …) by the caller's send function, which decides where the
 * access policy lets it go. clawmem implements no other action (reactions,
 * polls, edits, threads, …: refused with an error naming send).
 */
#ifndef CM_TOOLS_MESSAGE_H
#define CM_TOOLS_MESSAGE_H

#include <jansson.h>

#include "../base/buf.h"
#include "clawmem.h"

#define MESSAGE_MAX_BYTES 16384 /* of one message's text */
#define MESSAGE_MAX_FIELD 256   /* bytes of channel, target, accountId */

/* Sends text to target (NULL: the current conversation) on channel (NULL:
 * the current one) of account (NULL: the current one); CM_OK once sent,
 * else a CM_E* with err saying why (a refused target: CM_EPATH). */
typedef cm_rc (*message_send_fn)(void *ctx, const char *channel, const char *account,
                                 const char *target, const char *text, char *err, size_t errlen);

/* message: validates the arguments (action "send", a non-empty message
 * without NUL bytes of at most MESSAGE_MAX_BYTES, short single-line
 * channel/target/accountId), sends, and appends {"ok":true,"action":"send",
 * "channel","to"} to out. */
cm_rc cm_tool_message(message_send_fn send, void *ctx, const json_t *args, buf *out, char *err,
                      size_t errlen);

const cm_tool_def *cm_tool_message_def(void);

#endif
