/*
 * fuzz_tg_update.c — a getUpdates answer (arbitrary bytes) read as the
 * Telegram channel reads it: leniently (cm_utf8_json_tolerate), each update
 * of "result" handed to cm_gw_tg_deliver, and for an answer jansson refuses
 * the update_id its start names. Never a crash, a leak or undefined
 * behaviour; every message the sink gets has a channel, an account, a peer,
 * a message id and a non-empty text, all valid UTF-8 (what the gateway's
 * journal and the agent expect), and an update is delivered at most once.
 */
#include <string.h>

#include "../../src/base/utf8.h"
#include "../../src/gateway/channels/telegram_int.h"
#include "fuzz.h"

static void need_utf8(const char *s)
{
    if (s && cm_utf8_valid_prefix(s, strlen(s)) != strlen(s)) __builtin_trap();
}

static cm_rc sink(void *ctx, const gw_msg *m)
{
    int *calls = ctx;
    (*calls)++;
    if (!m->channel || strcmp(m->channel, "telegram") || !m->account || !m->peer || !*m->peer ||
        !m->message_id || !*m->message_id || !m->text || !*m->text)
        __builtin_trap();
    need_utf8(m->text);
    need_utf8(m->peer);
    need_utf8(m->message_id);
    need_utf8(m->thread);
    need_utf8(m->sender);
    need_utf8(m->sender_name);
    need_utf8(m->sender_username);
    need_utf8(m->chat_title);
    return CM_OK;
}

int fuzz_tg_update(const uint8_t *data, size_t size)
{
    char *body = malloc(size + 1);
    if (!body) return 0;
    memcpy(body, data, size);
    body[size] = 0;
    tg_chan t;
    memset(&t, 0, sizeof t);
    int calls = 0;
    t.account = (char *)"default";
    snprintf(t.bot_username, sizeof t.bot_username, "clawbot");
    t.bot_uid = 123456;
    t.sink = sink;
    t.ctx = &calls;
    /* the first update_id of the raw bytes, as for an unreadable answer */
    int64_t first = cm_gw_tg_first_update_id(body);
    if (first < -1) __builtin_trap();
    cm_utf8_json_tolerate(body, size);
    json_t *doc = json_loadb(body, size, 0, NULL);
    json_t *res = json_object_get(doc, "result");
    size_t i;
    json_t *u;
    json_array_foreach(res, i, u)
    {
        int before = calls;
        cm_gw_tg_deliver(&t, u);
        if (calls > before + 1) __builtin_trap();
    }
    /* a lone update, as the isolating poll sees it */
    if (json_is_object(doc) && !res) {
        int before = calls;
        cm_gw_tg_deliver(&t, doc);
        if (calls > before + 1) __builtin_trap();
    }
    json_decref(doc);
    free(body);
    return 0;
}

FUZZ_ENTRY(fuzz_tg_update)
