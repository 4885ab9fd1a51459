/*
 * telegram_int.h — what the Telegram channel's files share: the channel
 * struct and telegram.c's wire (one Bot API call, the wait, the retry delay)
 * for telegram_send.c (the outbound side, telegram_send.h). Not for other
 * files.
 */
#ifndef CM_GW_TELEGRAM_INT_H
#define CM_GW_TELEGRAM_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "../../base/log.h"
#include "../../base/redact.h"
#include "telegram.h"

#define TG_DEFAULT_BASE   "https://api.telegram.org"
#define TG_POLL_S         30 /* 2026.3.22 extensions/telegram/src/monitor.ts fetch.timeout */
#define TG_REQ_TIMEOUT_MS 30000L
#define TG_TEXT_LIMIT     4096
#define TG_BODY_MAX       (16u << 20)
#define TG_SEND_ATTEMPTS  4
#define TG_MAX_BACKOFF_MS 30000L
#define TG_MAX_WAIT_MS    3600000L /* a retry_after longer than an hour is capped */
#define TG_OFFSET_VERSION 2

typedef struct tg_chan {
    gw_channel base;
    char *token, *api_base, *account, *offset_path;
    char bot_id[32];        /* the digits before ':' in the token */
    char bot_username[128]; /* from getMe */
    int64_t bot_uid;
    long poll_s, req_ms, backoff_ms;
    int64_t last_update; /* -1: none confirmed yet */
    gw_sink_fn sink;
    void *ctx;
    pthread_t tid;
    bool running;
    atomic_bool stop;    /* polling: set by stop() */
    atomic_bool closing; /* sends: set by close() (a send may outlive stop()) */
    pthread_mutex_t mu;  /* guards last_err and the stop wait */
    pthread_cond_t cv;
    char last_err[512];
    redact red;                  /* the token */
    cm_logger log;               /* cm_gw_telegram_set_logger; set before start */
    struct tg_signals *sig;      /* telegram_send.c: typing and reactions, or NULL */
    int64_t (*clock)(void *ctx); /* cm_gw_telegram_set_clock; NULL: monotonic */
    void *clock_ctx;
} tg_chan;

typedef struct call_res {
    long status;
    long retry_after_ms; /* parameters.retry_after or Retry-After; -1 none */
    bool retryable;
    bool unreadable;  /* a 2xx answer that is not JSON even read leniently */
    int64_t first_id; /* then: the first "update_id" number in it, or -1 */
    json_t *result;   /* "result" of an ok answer (owned) */
} call_res;

/* One attempt of method with params (a JSON object, may be NULL) within
 * limit_ms. CM_OK with r->result on {"ok":true}; otherwise a code and err
 * (token redacted): CM_ERATELIMIT (429), CM_EAUTH (401/403/404: the token),
 * CM_EIO (retryable when r->retryable), CM_ECANCELED (*watch was set). */
cm_rc cm_gw_tg_call(tg_chan *t, const char *method, const json_t *params, long limit_ms,
                    atomic_bool *watch, call_res *r, char *err, size_t errlen);
/* Waits ms unless *watch is set first (stop or close); false then. */
bool cm_gw_tg_wait(tg_chan *t, long ms, atomic_bool *watch);
/* The delay before retry number `attempt` (0-based) after a failure r. */
long cm_gw_tg_retry_delay(const tg_chan *t, const call_res *r, int attempt);
/* The number after the first "update_id": in an answer jansson could not
 * read (NUL-terminated), or -1. */
int64_t cm_gw_tg_first_update_id(const char *s);
/* Hands one update (an element of getUpdates' result) to t->sink as a
 * gw_msg; the sink's code. CM_OK also for an update that carries no message
 * to deliver (skipped: the offset moves past it); CM_EINVAL, without a call
 * of the sink, for a message whose chat, message or sender id is not an
 * integer (refused for good). Uses bot_uid,
 * bot_username and account only, so the fuzz target can call it. */
cm_rc cm_gw_tg_deliver(tg_chan *t, const json_t *upd);

#endif
