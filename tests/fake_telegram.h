/*
 * fake_telegram.h — a loopback fake of the Telegram Bot API for the tests
 * (a fakeserver.c handler): getMe, long-polling getUpdates over a queue of
 * updates that an offset confirms, sendMessage recorded; editMessageText,
 * deleteMessage, sendChatAction and setMessageReaction recorded too, every
 * call in order in calls. The token it accepts is TGFAKE_TOKEN.
 */
#ifndef CM_TEST_FAKE_TELEGRAM_H
#define CM_TEST_FAKE_TELEGRAM_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define TGFAKE_TOKEN  "123456:AAE-secretTokenValue_xyz"
#define TGFAKE_BOT_ID 123456

typedef struct tgfake {
    pthread_mutex_t mu;
    json_t *updates; /* pending: dropped once an offset confirms them */
    json_t *raw;     /* pending raw updates: [{"id":N,"text":"<JSON text as sent>"}] */
    json_t *sent;    /* sendMessage parameters */
    json_t *offsets; /* the offset of every getUpdates (-1: none) */
    json_t *calls;   /* every call but getMe/getUpdates: {"method", "params"} in order */
    int next_id;     /* the message_id of the next sendMessage (from 900) */
    int edit_429;    /* the next this many editMessageText answer 429, retry_after 2 */
    int polls, getme;
    long hold_ms;           /* a getUpdates with nothing to give waits this long at most */
    const char *getme_fail; /* the body of a failed getMe, with getme_fail_status */
    int getme_fail_status;
    atomic_int stop;
} tgfake;

void tgfake_init(tgfake *f);
void tgfake_release(tgfake *f);
/* Queues an update (JSON text). */
void tgfake_add_update(tgfake *f, const char *json);
/* Queues an update sent exactly as text (which jansson may refuse, e.g.
 * "\u0000"), with update_id id; answers put updates in id order. */
void tgfake_add_raw_update(tgfake *f, long long id, const char *text);
int tgfake_polls(tgfake *f);
/* Calls of method so far (NULL: any but getMe/getUpdates). */
int tgfake_count(tgfake *f, const char *method);
/* The fakeserver handler: fake_handler(srv, tgfake_handler, f). */
bool tgfake_handler(void *ctx, const char *method, const char *path, const char *body,
                    size_t body_len, int *status, const char **ctype, char **answer,
                    size_t *answer_len);

#endif
