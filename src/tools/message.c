/*
 * message.c — the `message` tool's send action (message.h): argument checks
 * and the result; the sending itself is the gateway's.
 */
#include <string.h>

#include "../base/utf8.h"
#include "message.h"

/* An optional short string argument without control bytes; *v NULL when absent. */
static cm_rc field(const json_t *args, const char *key, const char **v, char *err, size_t errlen)
{
    const json_t *j = json_object_get(args, key);
    *v = NULL;
    if (!j || json_is_null(j)) return CM_OK;
    const char *s = json_string_value(j);
    if (!s) return cm_seterr(err, errlen, CM_EINVAL, "message: %s must be a string", key);
    size_t n = json_string_length(j);
    if (n > MESSAGE_MAX_FIELD)
        return cm_seterr(err, errlen, CM_EINVAL, "message: %s is longer than %d bytes", key,
                         MESSAGE_MAX_FIELD);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return cm_seterr(err, errlen, CM_EINVAL, "message: %s holds a control character",
                             key);
    *v = *s ? s : NULL;
    return CM_OK;
}

cm_rc cm_tool_message(message_send_fn send, void *ctx, const json_t *args, buf *out, char *err,
                      size_t errlen)
{
    cm_rc rc = CM_OK;
    const char *action = json_string_value(json_object_get(args, "action"));
    const char *channel, *target, *account;
    if (!send) FAIL(CM_EINVAL, "message: no channel is available to this run");
    if (!action || strcmp(action, "send"))
        FAIL(CM_EINVAL, "message: only action \"send\" is supported (got %.32s)",
             action ? action : "none");
    const json_t *m = json_object_get(args, "message");
    const char *text = json_string_value(m);
    if (!text || !*text) FAIL(CM_EINVAL, "message: message (a non-empty string) is required");
    if (json_string_length(m) != strlen(text)) FAIL(CM_EINVAL, "message: message holds a NUL byte");
    if (json_string_length(m) > MESSAGE_MAX_BYTES)
        FAIL(CM_ETOOBIG, "message: the message is longer than %d bytes", MESSAGE_MAX_BYTES);
    CHECK(field(args, "channel", &channel, err, errlen));
    CHECK(field(args, "target", &target, err, errlen));
    CHECK(field(args, "accountId", &account, err, errlen));
    CHECK(send(ctx, channel, account, target, text, err, errlen));
    jw w = {out, CM_OK};
    cm_jw_raw(&w, "{\"ok\":true,\"action\":\"send\",\"channel\":");
    cm_jw_str(&w, channel ? channel : "current");
    cm_jw_raw(&w, ",\"to\":");
    cm_jw_str(&w, target ? target : "current");
    cm_jw_raw(&w, "}");
    if (w.rc) FAIL(CM_ENOMEM, "out of memory");
out:
    return rc;
}

static const char message_in[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"action\":{\"type\":\"string\",\"enum\":[\"send\"]},"
    "\"channel\":{\"type\":\"string\",\"description\":\"telegram, http, … (default: this "
    "conversation's)\"},"
    "\"target\":{\"type\":\"string\",\"description\":\"Target channel/user id or name "
    "(default: this conversation)\"},"
    "\"accountId\":{\"type\":\"string\"},"
    "\"message\":{\"type\":\"string\"}},"
    "\"required\":[\"action\"]}";

static const cm_tool_def def = {
    "message", "Message",
    "Send messages via channel plugins. Current channel: the conversation this turn came from; "
    "other targets must be allowed by the channel's access policy.",
    message_in, NULL, 0};

const cm_tool_def *cm_tool_message_def(void)
{
    return &def;
}
