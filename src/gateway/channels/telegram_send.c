/*
 * telegram_send.c — the Telegram channel's outbound side (telegram_int.h):
 * sendMessage for reply pieces (as HTML, again as plain text when Telegram
 * cannot parse the entities, retried on 429 and server faults); the
 * streamed preview sent and edited in place (editMessageText) and deleted
 * (deleteMessage); and the signs of life that must never hold up a turn —
 * sendChatAction "typing" refreshed while a turn runs and setMessageReaction
 * for the ack reaction — queued for a thread of their own, which sends one
 * request at a time (so never two for one chat), waits out a 429's
 * retry_after, and logs a failure of each kind once.
 */
#include <errno.h>
#include <time.h>

#include "../../base/log.h"
#include "feel.h"
#include "telegram_send.h"

#define TG_SIG_CHATS     256 /* conversations with typing on at once */
#define TG_SIG_REACTS    256 /* reactions waiting to go out */
#define TG_SIG_LIMIT_MS  10000L
#define TG_SIG_TICK_MS   1000L /* the real clock: the longest sleep between checks */
#define TG_SIG_FAKE_TICK 50L   /* an injected clock: read this often */

typedef struct tg_sig_chat {
    char peer[32], thread[32];
    int64_t interval, next_ms, until_ms;
    bool on;
} tg_sig_chat;

typedef struct tg_sig_react {
    char peer[32], mid[32], emoji[64];
} tg_sig_react;

struct tg_signals {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t tid;
    bool quit;
    tg_sig_chat chats[TG_SIG_CHATS];
    size_t nchats;
    tg_sig_react reacts[TG_SIG_REACTS];
    size_t nreacts;
    bool warned_typing, warned_react;
    struct tg_sig_arg {
        struct tg_chan *t;
        struct tg_signals *s;
    } arg;
};

int64_t cm_gw_tg_now(tg_chan *t)
{
    return t->clock ? t->clock(t->clock_ctx) : cm_now_ms();
}

static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* Telegram's refusal of a message's HTML (2026.3.22's PARSE_ERR_RE and
 * EMPTY_TEXT_ERR_RE). */
static bool S_entity_error(const char *err)
{
    return strcasestr(err, "can't parse entities") || strcasestr(err, "parse entities") ||
           strcasestr(err, "find end of the entity") ||
           strcasestr(err, "message text is empty"); /* HTML of nothing but markup */
}

/* 2026.3.22 MESSAGE_NOT_MODIFIED_RE: an edit to the text it already has. */
static bool S_not_modified(const char *err)
{
    return strcasestr(err, "message is not modified") || strcasestr(err, "MESSAGE_NOT_MODIFIED");
}

/* chat_id as Telegram takes it: a number when peer is one, else the string. */
static json_t *S_chat_id(const char *peer)
{
    char *end;
    long long chat = strtoll(peer, &end, 10);
    return *peer && !*end ? json_integer(chat) : json_string(peer);
}

/* The parameters of a new message to o's conversation: chat, reply and
 * thread (the General topic of a forum, 1, takes no thread id; a group's
 * peer is negative, a direct chat's positive). NULL: out of memory. */
static json_t *S_params(const gw_outbound *o, bool new_message)
{
    char *end;
    json_t *p = json_pack("{s:o}", "chat_id", S_chat_id(o->peer));
    if (!p || !new_message) return p;
    if (o->reply_to && *o->reply_to) {
        long long rid = strtoll(o->reply_to, &end, 10);
        if (!*end && rid > 0) {
            json_object_set_new(p, "reply_to_message_id", json_integer(rid));
            json_object_set_new(p, "allow_sending_without_reply", json_true());
        }
    }
    if (o->thread && *o->thread) {
        long long th = strtoll(o->thread, &end, 10);
        bool general = th == 1 && o->peer[0] == '-';
        if (!*end && th > 0 && !general)
            json_object_set_new(p, "message_thread_id", json_integer(th));
    }
    return p;
}

/* Sets p's text to o->text as HTML (2026.3.22's rendering of the Markdown)
 * unless o is plain; true when it did. */
static bool S_set_text(json_t *p, const gw_outbound *o)
{
    buf html = BUF_INIT;
    bool as_html = !o->plain && cm_gw_telegram_html(o->text, &html) == CM_OK && html.len &&
                   !json_object_set_new(p, "text", json_string(html.data)) &&
                   !json_object_set_new(p, "parse_mode", json_string("HTML"));
    cm_buf_release(&html);
    if (!as_html) json_object_set_new(p, "text", json_string(o->text));
    return as_html;
}

/* method with p (its text set by S_set_text): the plain text again when the
 * HTML is refused; attempts tries on retryable failures. *result gets the
 * answer's result (owned) on success when result is not NULL. */
static cm_rc S_deliver(tg_chan *t, const char *method, json_t *p, const gw_outbound *o,
                       bool as_html, int attempts, json_t **result, long *retry_after_ms,
                       char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    if (retry_after_ms) *retry_after_ms = -1;
    for (int attempt = 0;; attempt++) {
        call_res r;
        rc = cm_gw_tg_call(t, method, p, t->req_ms, &t->closing, &r, err, errlen);
        if (!rc && result) *result = json_incref(r.result);
        json_decref(r.result);
        if (rc && as_html && r.status == 400 && S_entity_error(err)) {
            json_object_del(p, "parse_mode");
            json_object_set_new(p, "text", json_string(o->text));
            as_html = false;
            attempt--; /* the plain text gets its own attempts */
            continue;
        }
        if (rc == CM_ERATELIMIT && retry_after_ms) *retry_after_ms = r.retry_after_ms;
        if (!rc || !r.retryable || attempt + 1 >= attempts) break;
        if (!cm_gw_tg_wait(t, cm_gw_tg_retry_delay(t, &r, attempt), &t->closing)) {
            rc = cm_seterr(err, errlen, CM_ECANCELED, "telegram %s: stopped", method);
            break;
        }
    }
    return rc;
}

cm_rc cm_gw_tg_send(gw_channel *ch, const gw_outbound *o, char *err, size_t errlen)
{
    tg_chan *t = (tg_chan *)ch;
    if (!o || !o->peer || !o->text)
        return cm_seterr(err, errlen, CM_EINVAL, "telegram: a message needs a peer and a text");
    if (utf8_chars(o->text) > TG_TEXT_LIMIT)
        return cm_seterr(err, errlen, CM_ETOOBIG, "telegram: a message is at most %d characters",
                         TG_TEXT_LIMIT);
    json_t *p = S_params(o, true);
    if (!p) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    bool as_html = S_set_text(p, o);
    cm_rc rc = S_deliver(t, "sendMessage", p, o, as_html, TG_SEND_ATTEMPTS, NULL, NULL, err,
                         errlen);
    json_decref(p);
    return rc;
}

cm_rc cm_gw_tg_preview(gw_channel *ch, const gw_outbound *o, const char *message_id, bool final,
                       char *id, size_t idlen, long *retry_after_ms, char *err, size_t errlen)
{
    tg_chan *t = (tg_chan *)ch;
    cm_rc rc = CM_OK;
    json_t *res = NULL, *p = NULL;
    if (retry_after_ms) *retry_after_ms = -1;
    if (id && idlen) id[0] = 0;
    if (!o || !o->peer || !o->text || !*o->text)
        return cm_seterr(err, errlen, CM_EINVAL, "telegram: a preview needs a peer and a text");
    if (utf8_chars(o->text) > TG_TEXT_LIMIT)
        return cm_seterr(err, errlen, CM_ETOOBIG, "telegram: a message is at most %d characters",
                         TG_TEXT_LIMIT);
    char *end;
    long long mid = message_id ? strtoll(message_id, &end, 10) : 0;
    if (message_id && (*end || mid <= 0))
        return cm_seterr(err, errlen, CM_EINVAL, "telegram: not a message id");
    if (!(p = S_params(o, !message_id))) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    if (message_id) json_object_set_new(p, "message_id", json_integer(mid));
    bool as_html = S_set_text(p, o);
    rc = S_deliver(t, message_id ? "editMessageText" : "sendMessage", p, o, as_html,
                   final ? TG_SEND_ATTEMPTS : 1, &res, retry_after_ms, err, errlen);
    if (rc && message_id && S_not_modified(err)) rc = CM_OK;
    if (!rc && !message_id) {
        json_t *m = json_object_get(res, "message_id");
        if (!json_is_integer(m))
            rc = cm_seterr(err, errlen, CM_EIO, "telegram sendMessage: no message id in the answer");
        else if (id)
            snprintf(id, idlen, "%lld", (long long)json_integer_value(m));
    }
    json_decref(res);
    json_decref(p);
    return rc;
}

cm_rc cm_gw_tg_unsend(gw_channel *ch, const gw_outbound *o, const char *message_id, char *err,
                      size_t errlen)
{
    tg_chan *t = (tg_chan *)ch;
    char *end;
    long long mid = message_id ? strtoll(message_id, &end, 10) : 0;
    if (!o || !o->peer || !message_id || *end || mid <= 0)
        return cm_seterr(err, errlen, CM_EINVAL, "telegram: deleteMessage needs a chat and an id");
    json_t *p = json_pack("{s:o,s:I}", "chat_id", S_chat_id(o->peer), "message_id",
                          (json_int_t)mid);
    if (!p) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    call_res r;
    cm_rc rc = cm_gw_tg_call(t, "deleteMessage", p, t->req_ms, &t->closing, &r, err, errlen);
    json_decref(r.result);
    json_decref(p);
    return rc;
}

/* ---- typing and reactions: a thread of their own ------------------------- */

/* One sendChatAction or setMessageReaction, no lock held. */
static void S_signal_call(tg_chan *t, struct tg_signals *s, const char *method, json_t *p,
                          bool *warned, int64_t *next, int64_t now)
{
    call_res r;
    char err[512];
    long limit = CM_MIN(t->req_ms, TG_SIG_LIMIT_MS);
    cm_rc rc = p ? cm_gw_tg_call(t, method, p, limit, &t->closing, &r, err, sizeof err) : CM_ENOMEM;
    if (p) json_decref(r.result);
    if (rc == CM_ERATELIMIT && next && r.retry_after_ms >= 0) *next = now + r.retry_after_ms;
    if (rc && rc != CM_ECANCELED) {
        pthread_mutex_lock(&s->mu);
        bool first = !*warned;
        *warned = true;
        pthread_mutex_unlock(&s->mu);
        if (first)
            cm_logf(&t->log, CM_LOG_WARN, "telegram: %s failed (%s); further failures not logged",
                    method, rc == CM_ENOMEM ? "out of memory" : err);
    }
}

typedef struct tg_sig_arg tg_sig_arg;

static void *S_signals_main(void *arg)
{
    tg_chan *t = ((tg_sig_arg *)arg)->t;
    struct tg_signals *s = ((tg_sig_arg *)arg)->s;
    pthread_mutex_lock(&s->mu);
    while (!s->quit) {
        int64_t now = cm_gw_tg_now(t), wait = t->clock ? TG_SIG_FAKE_TICK : TG_SIG_TICK_MS;
        if (s->nreacts) {
            tg_sig_react rx = s->reacts[0];
            memmove(s->reacts, s->reacts + 1, --s->nreacts * sizeof *s->reacts);
            pthread_mutex_unlock(&s->mu);
            json_t *p = json_pack("{s:o,s:I,s:[{s:s,s:s}]}", "chat_id", S_chat_id(rx.peer),
                                  "message_id", (json_int_t)strtoll(rx.mid, NULL, 10), "reaction",
                                  "type", "emoji", "emoji", rx.emoji);
            S_signal_call(t, s, "setMessageReaction", p, &s->warned_react, NULL, now);
            json_decref(p);
            pthread_mutex_lock(&s->mu);
            continue;
        }
        tg_sig_chat *due = NULL;
        for (size_t i = 0; i < s->nchats; i++) {
            tg_sig_chat *c = &s->chats[i];
            if (now >= c->until_ms) { /* the TTL: a turn that never said it ended */
                s->chats[i--] = s->chats[--s->nchats];
                continue;
            }
            if (now >= c->next_ms) {
                due = c;
                break;
            }
            wait = CM_MIN(wait, c->next_ms - now);
        }
        if (due) {
            tg_sig_chat c = *due;
            due->next_ms = now + due->interval; /* so the chat is not picked again meanwhile */
            pthread_mutex_unlock(&s->mu);
            json_t *p = json_pack("{s:o,s:s}", "chat_id", S_chat_id(c.peer), "action", "typing");
            char *end;
            long long th = c.thread[0] ? strtoll(c.thread, &end, 10) : 0;
            /* 2026.3.22 buildTypingThreadParams: the General topic (1) too */
            if (p && th > 0 && !*end) json_object_set_new(p, "message_thread_id", json_integer(th));
            int64_t next = -1;
            S_signal_call(t, s, "sendChatAction", p, &s->warned_typing, &next, now);
            json_decref(p);
            pthread_mutex_lock(&s->mu);
            if (next >= 0)
                for (size_t i = 0; i < s->nchats; i++)
                    if (!strcmp(s->chats[i].peer, c.peer) && !strcmp(s->chats[i].thread, c.thread))
                        s->chats[i].next_ms = CM_MAX(s->chats[i].next_ms, next);
            continue;
        }
        struct timespec ts = cm_deadline_in(CLOCK_MONOTONIC, CM_MAX(wait, 1));
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* The signals state, its thread started on first use; NULL when it cannot
 * be (then the signs are skipped). */
static struct tg_signals *S_signals(tg_chan *t)
{
    pthread_mutex_lock(&t->mu);
    struct tg_signals *s = t->sig;
    if (!s && !atomic_load(&t->closing) && (s = calloc(1, sizeof *s))) {
        pthread_mutex_init(&s->mu, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->cv, &ca);
        pthread_condattr_destroy(&ca);
        t->sig = s;
        s->arg.t = t;
        s->arg.s = s;
        if (pthread_create(&s->tid, NULL, S_signals_main, &s->arg)) {
            pthread_cond_destroy(&s->cv);
            pthread_mutex_destroy(&s->mu);
            free(s);
            t->sig = s = NULL;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return s;
}

void cm_gw_tg_signals_stop(tg_chan *t)
{
    pthread_mutex_lock(&t->mu);
    struct tg_signals *s = t->sig;
    t->sig = NULL;
    pthread_mutex_unlock(&t->mu);
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->quit = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->tid, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void cm_gw_tg_typing(gw_channel *ch, const gw_outbound *o, int64_t interval_ms)
{
    tg_chan *t = (tg_chan *)ch;
    if (!o || !o->peer || strlen(o->peer) >= sizeof((tg_sig_chat){0}).peer) return;
    const char *th = o->thread ? o->thread : "";
    if (strlen(th) >= sizeof((tg_sig_chat){0}).thread) return;
    struct tg_signals *s = interval_ms > 0 ? S_signals(t) : t->sig;
    if (!s) return;
    int64_t now = cm_gw_tg_now(t);
    pthread_mutex_lock(&s->mu);
    tg_sig_chat *c = NULL;
    for (size_t i = 0; i < s->nchats && !c; i++)
        if (!strcmp(s->chats[i].peer, o->peer) && !strcmp(s->chats[i].thread, th))
            c = &s->chats[i];
    if (interval_ms <= 0) {
        if (c) *c = s->chats[--s->nchats];
    } else {
        if (!c && s->nchats < TG_SIG_CHATS) {
            c = &s->chats[s->nchats++];
            memset(c, 0, sizeof *c);
            snprintf(c->peer, sizeof c->peer, "%s", o->peer);
            snprintf(c->thread, sizeof c->thread, "%s", th);
            c->next_ms = now; /* shown at once */
        }
        if (c) {
            c->interval = interval_ms;
            c->until_ms = now + GW_TYPING_TTL_MS;
        }
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

void cm_gw_tg_react(gw_channel *ch, const gw_outbound *o, const char *emoji)
{
    tg_chan *t = (tg_chan *)ch;
    if (!o || !o->peer || !o->reply_to || !emoji || !*emoji) return;
    if (strlen(o->peer) >= 32 || strlen(o->reply_to) >= 32 || strlen(emoji) >= 64) return;
    char *end;
    long long mid = strtoll(o->reply_to, &end, 10);
    if (*end || mid <= 0) return;
    struct tg_signals *s = S_signals(t);
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    if (s->nreacts < TG_SIG_REACTS) {
        tg_sig_react *r = &s->reacts[s->nreacts++];
        snprintf(r->peer, sizeof r->peer, "%s", o->peer);
        snprintf(r->mid, sizeof r->mid, "%s", o->reply_to);
        snprintf(r->emoji, sizeof r->emoji, "%s", emoji);
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
}
