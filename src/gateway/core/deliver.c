/*
 * deliver.c — a worker's job: the agent run of a session turn and its reply
 * shaped as QuantumClaw 2026.3.22 shapes it (NO_REPLY suppressed, the
 * responsePrefix on the first block, replyToMode threading, pieces within
 * the channel's text limit with code fences closed and reopened, block
 * streaming when enabled), sent through the channel; or a notice sent as it
 * is. The job's journal entries are marked answered (or failed) after.
 * While a run goes on, the channel shows signs of life when it has them
 * (feel.h): the typing indicator from the run's start (or its first text)
 * until the reply is out, and — without block streaming — a preview of the
 * answer sent and edited in place as it streams, which the final reply
 * then replaces: edited into it when it fits one message, else deleted once
 * the pieces are out (2026.3.22's Telegram draft lane). The session's
 * reasoningLevel shapes the reasoning: "stream" streams it into a preview
 * of its own (the reasoning lane) that stays above the answer; "on" sends
 * it as a message before the answer (and the answer has no preview then).
 * A session command job (/compact, /think, /reasoning) gets the agent's
 * answer sent as it is.
 */
#include "deliver.h"
#include "dispatch.h"
#include "jobs.h"

#include <errno.h>
#include <limits.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "../../base/utf8.h"
#include "../../session/sessions.h"
#include "../channels/feel.h"
#include "../channels/preview.h"

typedef struct deliver {
    gw_runtime *rt;
    cm_rtcfg *cfg; /* the config snapshot of this job (a reference, dropped at its end) */
    gw_job *j;
    gw_channel *ch;
    int limit;
    gw_reply_to_mode mode;
    size_t sent, failed;
    buf prefix; /* the responsePrefix and a space, or empty */
    bool streaming, released, prefixed;
    gw_stream st;
    buf held; /* streamed text held back while it may still be NO_REPLY */
    gw_delay_mode delay;
    int delay_min, delay_max;
    gw_typing_mode tmode;
    int64_t tinterval;
    bool typing;     /* the typing indicator was turned on */
    bool previewing; /* a preview stream (channel preview ops, no block streaming) */
    gw_preview pv;
    bool reasoning_lane; /* reasoningLevel "stream" on a channel with previews */
    gw_preview rpv;      /* its preview */
    bool trusted; /* the run's sender may use the host tools and message anywhere allowed */
} deliver;

/* agents.defaults.humanDelay {mode: off|natural|custom, minMs, maxMs}. */
static void S_delay_cfg(const cm_rtcfg *c, deliver *d)
{
    const cm_rt_agent_defaults *a = &c->defaults;
    d->delay = a->human_delay_mode == 1   ? GW_DELAY_NATURAL
               : a->human_delay_mode == 2 ? GW_DELAY_CUSTOM
                                          : GW_DELAY_OFF;
    d->delay_min = a->human_delay_min_ms >= 0 ? (int)CM_MIN(a->human_delay_min_ms, INT_MAX) : 0;
    d->delay_max = a->human_delay_max_ms >= 0 ? (int)CM_MIN(a->human_delay_max_ms, INT_MAX) : 0;
}

/* humanDelay before every block after the first (real time: it is what the
 * person on the other side sees). */
static void S_human_pause(deliver *d)
{
    if (d->delay == GW_DELAY_OFF || d->sent == 0) return;
    uint32_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        rnd = (uint32_t)cm_now_ms();
    int ms = cm_gw_human_delay_ms(d->delay, d->delay_min, d->delay_max, rnd);
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (ms > 0 && nanosleep(&ts, &ts))
        ;
}

/* The route of the job as an outbound message with text (reply_to per
 * replyToMode for the next piece). */
static gw_outbound S_route(const deliver *d, const char *text, bool plain)
{
    bool reply = d->mode == GW_REPLYTO_ALL || (d->mode == GW_REPLYTO_FIRST && d->sent == 0);
    gw_outbound o = {d->j->account, d->j->peer, d->j->thread, reply ? d->j->reply_to : NULL,
                     text,          plain};
    return o;
}

/* The typing indicator on (refreshed by the channel) or off. */
static void S_typing(deliver *d, bool on)
{
    if (!d->ch || !d->ch->ops->typing || on == d->typing || d->tinterval <= 0) return;
    if (on && d->tmode == GW_TYPING_NEVER) return;
    d->typing = on;
    gw_outbound o = S_route(d, "", true);
    d->ch->ops->typing(d->ch, &o, on ? d->tinterval : 0);
}

static void S_send_as(deliver *d, const char *text, bool plain)
{
    const char *p = text;
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
        p++;
    if (!*p || !d->ch) {
        if (!d->ch && *p) d->failed++;
        return;
    }
    S_human_pause(d);
    gw_outbound o = S_route(d, text, plain);
    char err[256];
    if (d->ch->ops->send(d->ch, &o, err, sizeof err)) {
        d->failed++;
        cm_logf(d->rt->o.log, CM_LOG_WARN, "gateway: %s: a reply could not be sent: %s",
                d->ch->ops->name, err);
        return;
    }
    d->sent++;
    __atomic_fetch_add(&d->rt->replies, 1, __ATOMIC_RELAXED);
}

static void S_send(deliver *d, const char *text)
{
    S_send_as(d, text, d->j->kind == GW_JOB_NOTICE);
}

static void S_send_pieces(deliver *d, gw_pieces *p)
{
    for (size_t i = 0; i < p->n; i++)
        S_send(d, p->v[i]);
    cm_gw_pieces_release(p);
    cm_gw_pieces_init(p);
}

/* The whole reply at once, cut to the channel's limit. */
static void S_send_text(deliver *d, const char *text)
{
    buf all = BUF_INIT;
    gw_pieces p;
    cm_gw_pieces_init(&p);
    if (cm_buf_add(&all, d->prefix.data ? d->prefix.data : "", d->prefix.len) ||
        cm_buf_adds(&all, text) ||
        cm_gw_chunk_text(all.data, all.len, d->limit, GW_BREAK_PARAGRAPH, &p)) {
        d->failed++;
    } else {
        S_send_pieces(d, &p);
    }
    cm_gw_pieces_release(&p);
    cm_buf_release(&all);
}

/* NO_REPLY's first characters: text that could still become it. */
static bool S_maybe_silent(const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r'))
        s++, n--;
    return n <= 8 && !strncmp(s, "NO_REPLY", n);
}

static bool S_cancelled(void *ctx)
{
    const deliver *d = ctx;
    return __atomic_load_n(&d->j->cancel, __ATOMIC_RELAXED) != 0;
}

/* The next steered text for the run (its journal ids join the run's). */
static char *S_steer(void *ctx)
{
    deliver *d = ctx;
    gw_job *j = d->j;
    char *t = NULL;
    pthread_mutex_lock(&d->rt->mu);
    if (j->nsteer && !S_cancelled(d)) {
        t = j->steer[0];
        memmove(j->steer, j->steer + 1, --j->nsteer * sizeof *j->steer);
        if (!j->nsteer && cm_gw_ids_move(&j->ids, &j->steer_ids) == CM_OK)
            cm_gw_ids_release(&j->steer_ids);
    }
    pthread_mutex_unlock(&d->rt->mu);
    return t;
}

/* A preview (the answer's or the reasoning's) brought up to date when its
 * pacing allows (preview.h). */
static void S_preview_step(deliver *d, gw_preview *pv, int64_t now)
{
    gw_preview_act a = cm_gw_preview_next(pv, now);
    if (a == GW_PREVIEW_NONE) return;
    gw_outbound o = S_route(d, cm_gw_preview_text(pv), false);
    char id[32] = "", err[256];
    long ra = -1;
    cm_rc rc = d->ch->ops->preview(d->ch, &o, a == GW_PREVIEW_EDIT ? pv->id : NULL, false, id,
                                   sizeof id, &ra, err, sizeof err);
    if (!rc) {
        cm_gw_preview_done(pv, a == GW_PREVIEW_SEND ? id : NULL, now);
        return;
    }
    cm_gw_preview_failed(pv, rc == CM_ERATELIMIT ? ra : -1, now);
    if (rc != CM_ERATELIMIT)
        cm_logf(d->rt->o.log, CM_LOG_INFO, "gateway: %s: the preview stopped: %s",
                d->ch->ops->name, err);
}

static void S_delta(void *ctx, const char *text, size_t n)
{
    deliver *d = ctx;
    if (S_cancelled(d)) return; /* an aborted run says nothing more */
    bool typing_on_text = d->tmode == GW_TYPING_MESSAGE || d->tmode == GW_TYPING_THINKING;
    if (!d->streaming && !d->previewing && !typing_on_text) return;
    gw_pieces p;
    cm_gw_pieces_init(&p);
    int64_t now = cm_gw_rt_now(d->rt);
    bool first = false;
    if (!d->released) {
        if (cm_buf_add(&d->held, text, n)) return;
        if (S_maybe_silent(d->held.data, d->held.len)) return;
        d->released = first = true;
        text = d->held.data;
        n = d->held.len;
    }
    if (typing_on_text) S_typing(d, true); /* the first text that is not NO_REPLY */
    if (d->streaming) {
        if (first && d->prefix.len)
            cm_gw_stream_delta(&d->st, d->prefix.data, d->prefix.len, now, &p);
        cm_gw_stream_delta(&d->st, text, n, now, &p);
        cm_gw_stream_due(&d->st, now, &p);
        S_send_pieces(d, &p);
    } else if (d->previewing) {
        if (cm_gw_preview_add(&d->pv, text, n) == CM_OK) S_preview_step(d, &d->pv, now);
    }
    cm_gw_pieces_release(&p);
}

/* The reasoning so far, whole and formatted (gw_run_req.on_reasoning), into
 * the reasoning lane. */
static void S_reasoning(void *ctx, const char *text, size_t n)
{
    deliver *d = ctx;
    if (S_cancelled(d) || !d->reasoning_lane) return;
    if (cm_gw_preview_set(&d->rpv, text, n) == CM_OK)
        S_preview_step(d, &d->rpv, cm_gw_rt_now(d->rt));
}

/* The end of the reasoning lane, before the answer: its preview edited to
 * the whole reasoning (and kept), or — when none went out yet — the
 * reasoning sent as a message. */
static void S_reasoning_finish(deliver *d)
{
    const char *t = cm_gw_preview_text(&d->rpv);
    if (!*t) return;
    if (!d->rpv.id[0]) {
        S_send(d, t);
        return;
    }
    if (!strcmp(t, d->rpv.shown.data ? d->rpv.shown.data : "")) return;
    gw_outbound o = S_route(d, t, false);
    char err[256];
    if (d->ch->ops->preview(d->ch, &o, d->rpv.id, true, NULL, 0, NULL, err, sizeof err))
        cm_logf(d->rt->o.log, CM_LOG_INFO, "gateway: %s: the reasoning was not finished: %s",
                d->ch->ops->name, err);
}

/* The session's reasoningLevel ("off" when unset or unreadable: the
 * store's own cache makes this a lookup). */
static void S_reasoning_level(gw_runtime *rt, const gw_job *j, char out[8])
{
    buf p = BUF_INIT;
    session_store st;
    char err[256];
    memset(&st, 0, sizeof st);
    snprintf(out, 8, "off");
    if (!cm_session_store_path(&p, rt->o.state_dir, j->agent_id) &&
        !cm_session_store_read(&st, p.data, err, sizeof err)) {
        const char *l =
            json_string_value(json_object_get(cm_session_store_get(&st, j->key), "reasoningLevel"));
        if (l && (!strcmp(l, "on") || !strcmp(l, "stream"))) snprintf(out, 8, "%s", l);
    }
    cm_session_store_release(&st);
    cm_buf_release(&p);
}

const char *cm_gw_failure_reason(cm_rc rc)
{
    switch (rc) {
    case CM_ERATELIMIT:
        return "the model is unavailable (rate limited)";
    case CM_EAUTH:
        return "the model is unavailable (credentials refused)";
    case CM_EBILLING:
        return "the model is unavailable (billing)";
    case CM_ETIMEOUT:
        return "the model did not answer in time";
    case CM_EIO:
    case CM_EDB:
    case CM_ECORRUPT:
    case CM_ENOTFOUND:
        return "the agent's state could not be read or written";
    case CM_ECONFIG:
        return "the agent's configuration is invalid";
    case CM_ENOMEM:
        return "the gateway ran out of memory";
    default:
        return "an internal error";
    }
}

/* A short random id tying a chat's failure notice to its log line. */
static void S_error_id(char out[16])
{
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) r = (uint32_t)cm_now_ms();
    snprintf(out, 16, "%08x", r);
}

static size_t S_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* The end of a preview run: text (the final reply, NULL when there is none
 * to send) edited into the preview message when it fits one, else sent as
 * usual and the preview deleted (as it is when there is nothing to say). */
static void S_preview_finish(deliver *d, const char *text)
{
    bool have = d->pv.id[0] != 0;
    if (text && have) {
        buf all = BUF_INIT;
        const char *p = text;
        while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
            p++;
        if (*p && !cm_buf_add(&all, d->prefix.data ? d->prefix.data : "", d->prefix.len) &&
            !cm_buf_adds(&all, p)) {
            while (all.len && strchr(" \n\t\r", all.data[all.len - 1]))
                all.data[--all.len] = 0;
            if (S_chars(all.data) <= d->pv.max_chars &&
                (d->limit <= 0 || S_chars(all.data) <= (size_t)d->limit)) {
                gw_outbound o = S_route(d, all.data, false);
                char err[256];
                cm_rc rc = d->ch->ops->preview(d->ch, &o, d->pv.id, true, NULL, 0, NULL, err,
                                               sizeof err);
                if (!rc) {
                    d->sent++;
                    __atomic_fetch_add(&d->rt->replies, 1, __ATOMIC_RELAXED);
                    cm_buf_release(&all);
                    return;
                }
                cm_logf(d->rt->o.log, CM_LOG_WARN,
                        "gateway: %s: the preview could not become the reply (%s); sent anew",
                        d->ch->ops->name, err);
            }
        }
        cm_buf_release(&all);
    }
    if (text) S_send_text(d, text);
    if (have && d->ch->ops->unsend) {
        gw_outbound o = S_route(d, "", true);
        char err[256];
        if (d->ch->ops->unsend(d->ch, &o, d->pv.id, err, sizeof err))
            cm_logf(d->rt->o.log, CM_LOG_INFO, "gateway: %s: a preview was not deleted: %s",
                    d->ch->ops->name, err);
    }
}

/* Whether target is a group configured by id (not "*") in
 * channels.<ch>[.accounts.<acct>].groups. */
static bool S_group_listed(const json_t *cfg, const char *ch, const char *acct,
                           const char *target)
{
    const json_t *c = json_object_get(json_object_get(cfg, "channels"), ch);
    const json_t *a = json_object_get(json_object_get(c, "accounts"), acct ? acct : "default");
    const json_t *g = json_object_get(json_object_get(a, "groups"), target);
    if (!g) g = json_object_get(json_object_get(c, "groups"), target);
    return json_is_object(g) && !json_is_false(json_object_get(g, "enabled")) &&
           strcmp(target, "*") != 0;
}

/* The message tool's send (gw_run_req.send): this conversation always; any
 * other target only for a trusted sender, and only a sender the access
 * policy names (cm_gw_access_trusted) or a configured group. */
static cm_rc S_tool_send(void *ctx, const char *channel, const char *account, const char *target,
                         const char *text, char *err, size_t errlen)
{
    deliver *d = ctx;
    gw_job *j = d->j;
    const char *chn = channel ? channel : j->channel, *acct = account ? account : j->account;
    const char *to = target ? target : j->peer;
    if (!chn || !to) return cm_seterr(err, errlen, CM_EINVAL, "message: a target is required");
    bool here = j->channel && !strcasecmp(chn, j->channel) && j->peer && !strcmp(to, j->peer) &&
                !strcasecmp(acct ? acct : "default", j->account ? j->account : "default");
    if (!here) {
        bool ok = false;
        char terr[256];
        if (!d->trusted)
            return cm_seterr(err, errlen, CM_EPATH,
                             "message: this sender may only send to the current conversation");
        if (cm_gw_access_trusted(d->cfg, d->rt->o.state_dir, chn, acct, to, false, &ok, terr,
                                 sizeof terr))
            ok = false;
        if (!ok) ok = S_group_listed(d->cfg->root, chn, acct, to);
        if (!ok || !strcmp(chn, "terminal") || !strcmp(chn, "webchat"))
            return cm_seterr(err, errlen, CM_EPATH,
                             "message: %.64s is not an allowed target on %.32s (allowFrom, a "
                             "paired sender or a configured group)",
                             to, chn);
    }
    gw_channel *ch = cm_gw_rt_channel(d->rt, chn, acct);
    if (!ch || !ch->ops->send)
        return cm_seterr(err, errlen, CM_ENOTFOUND, "message: no %.32s channel is running", chn);
    size_t chars = 0;
    cm_utf8_prefix_chars(text, strlen(text), SIZE_MAX, &chars);
    if (ch->ops->text_limit && chars > ch->ops->text_limit)
        return cm_seterr(err, errlen, CM_ETOOBIG, "message: %.32s takes at most %zu characters",
                         chn, ch->ops->text_limit);
    gw_outbound o = {acct, to, here ? j->thread : NULL, NULL, text, false};
    return ch->ops->send(ch, &o, err, errlen);
}

/* The run that answered an internal message (sessions_send's, its id
 * reply_to) has ended: its waiter, if any, is told (rc, the reply). */
static void S_waiter_done(gw_runtime *rt, const gw_job *j, cm_rc rc, const char *why,
                          const char *reply)
{
    if (!j->channel || strcmp(j->channel, GW_INTERNAL_CHANNEL) || !j->reply_to) return;
    pthread_mutex_lock(&rt->mu);
    for (gw_waiter *w = rt->waiters; w; w = w->next) {
        if (w->done || strcmp(w->run_id, j->reply_to)) continue;
        w->done = true;
        w->rc = rc;
        snprintf(w->error, sizeof w->error, "%s", why ? why : "");
        w->reply = reply && *reply ? cm_strdup(reply) : NULL;
        pthread_cond_broadcast(&rt->reply_cv);
    }
    pthread_mutex_unlock(&rt->mu);
}

/* sessions_send's queueing (gw_run_req.session_send): the text enters the
 * target session as a message of the "internal" channel (no access check,
 * never trusted: no exec there; its answer is delivered nowhere, it stays
 * in the session's transcript), journaled and queued like any other; with
 * wait_ms the caller's worker then waits for that run's end (real time: it
 * is another worker's run), or for the gateway to stop. A message merged
 * into another's turn by the queue is answered by that turn (the waiter of
 * its last message is told). A message to the caller's own session runs
 * only after the caller's turn: it times out at once instead of holding the
 * worker until timeoutSeconds. */
static cm_rc S_tool_session_send(void *ctx, const char *key, const char *text, int64_t wait_ms,
                                 char *run_id, size_t run_id_len, char **reply, char *err,
                                 size_t errlen)
{
    deliver *d = ctx;
    gw_runtime *rt = d->rt;
    unsigned char r[8] = {0};
    *reply = NULL;
    run_id[0] = 0;
    char id[64];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return cm_seterr(err, errlen, CM_EIO, "sessions_send: no random run id");
    snprintf(id, sizeof id, "a2a-%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4],
             r[5], r[6], r[7]);
    gw_waiter *w = NULL;
    bool own = d->j->key && !strcasecmp(d->j->key, key);
    if (wait_ms > 0 && !own) { /* registered first: the run may end before the sink returns */
        if (!(w = calloc(1, sizeof *w))) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
        snprintf(w->run_id, sizeof w->run_id, "%s", id);
        pthread_mutex_lock(&rt->mu);
        w->next = rt->waiters;
        rt->waiters = w;
        pthread_mutex_unlock(&rt->mu);
    }
    gw_msg m = {0};
    m.channel = GW_INTERNAL_CHANNEL;
    m.peer = key;
    m.session = key;
    m.message_id = id;
    m.sender = d->j->key; /* the sending session */
    m.text = text;
    cm_rc rc = cm_gw_runtime_sink(rt, &m);
    if (rc)
        cm_seterr(err, errlen, rc, "sessions_send: the gateway did not accept it (%s)",
                  cm_strerror(rc));
    else
        snprintf(run_id, run_id_len, "%s", id);
    if (!w) return !rc && wait_ms > 0 ? CM_ETIMEOUT : rc; /* own session: never before */
    pthread_mutex_lock(&rt->mu);
    struct timespec until = cm_deadline_in(CLOCK_MONOTONIC, wait_ms);
    while (!rc && !w->done && !rt->stopping &&
           pthread_cond_timedwait(&rt->reply_cv, &rt->mu, &until) != ETIMEDOUT)
        ;
    for (gw_waiter **p = &rt->waiters; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    pthread_mutex_unlock(&rt->mu);
    if (!rc && !w->done)
        rc = CM_ETIMEOUT;
    else if (!rc && w->rc)
        rc = cm_seterr(err, errlen, w->rc, "%s", w->error[0] ? w->error : "agent error");
    else if (!rc) {
        *reply = w->reply;
        w->reply = NULL;
    }
    free(w->reply);
    free(w);
    return rc;
}

static void S_run(gw_runtime *rt, gw_job *j, deliver *d, int worker)
{
    const cm_rtcfg *cfg = d->cfg;
    if (S_cancelled(d)) { /* aborted before a worker took it: the model is never asked */
        cm_gw_rt_done_all(rt, &j->ids, "aborted");
        S_waiter_done(rt, j, CM_ECANCELED, "the run was aborted", NULL);
        return;
    }
    for (size_t i = 0; i < j->ids.n; i++)
        cm_gw_journal_run(rt->journal, j->ids.v[i]);
    __atomic_fetch_add(&rt->runs, 1, __ATOMIC_RELAXED);
    if (j->text) S_send_as(d, j->text, true); /* /new's notice before its greeting */
    char rlevel[8];
    S_reasoning_level(rt, j, rlevel);
    d->streaming = cm_gw_reply_block_streaming(cfg, j->channel, j->account);
    d->tmode = cm_gw_typing_mode(cfg, j->is_group, j->mentioned, &d->tinterval);
    /* 2026.3.22: block streaming, when on, replaces the preview; so does
     * reasoning "on" (its message comes before the answer); "stream" has a
     * preview of its own whatever the answer's */
    d->previewing = !d->streaming && d->ch && d->ch->ops->preview && strcmp(rlevel, "on") != 0 &&
                    cm_gw_preview_enabled(cfg, j->channel, j->account);
    d->reasoning_lane = d->ch && d->ch->ops->preview && !strcmp(rlevel, "stream");
    size_t max = GW_PREVIEW_MAX_CHARS;
    if (d->limit > 0 && (size_t)d->limit < max) max = (size_t)d->limit;
    if (d->previewing)
        cm_gw_preview_init(&d->pv, GW_PREVIEW_THROTTLE_MS, GW_PREVIEW_MIN_CHARS, max);
    if (d->reasoning_lane)
        cm_gw_preview_init(&d->rpv, GW_PREVIEW_THROTTLE_MS, GW_PREVIEW_MIN_CHARS, max);
    if (d->tmode == GW_TYPING_INSTANT) S_typing(d, true);
    if (d->streaming) {
        gw_stream_break brk;
        gw_stream_cfg sc;
        cm_gw_reply_stream_cfg(cfg, j->channel, d->limit, &brk, &sc);
        cm_gw_stream_init(&d->st, brk, sc.chunk_min, sc.chunk_max, sc.pref, sc.co_min, sc.co_max,
                          sc.idle_ms);
    }
    /* The prefix's {model} is the configured primary: known before the run. */
    const char *model = cfg->defaults.model;
    if (!cm_gw_reply_prefix(&d->prefix, cfg, j->agent_id, j->channel, j->account, model) &&
        d->prefix.len && cm_buf_addc(&d->prefix, ' '))
        cm_buf_reset(&d->prefix); /* out of memory: no prefix rather than half of one */
    gw_run_req rq = {.agent_id = j->agent_id,
                     .session_key = j->key,
                     .prompt = j->prompt,
                     .channel = j->channel,
                     .account = j->account,
                     .worker = worker,
                     .on_delta = S_delta,
                     .delta_ctx = d,
                     .cancelled = S_cancelled,
                     .steer = S_steer,
                     .hook_ctx = d,
                     .peer = j->peer,
                     .is_group = j->is_group,
                     .thread = j->thread,
                     .label = j->label,
                     .subject = j->subject,
                     .trusted = false,
                     .send = S_tool_send,
                     .session_send = S_tool_session_send,
                     .on_reasoning = d->reasoning_lane ? S_reasoning : NULL,
                     .reasoning_ctx = d};
    char terr[256];
    if (cm_gw_access_trusted(cfg, rt->o.state_dir, j->channel, j->account, j->peer, j->is_group,
                             &rq.trusted, terr, sizeof terr))
        cm_logf(rt->o.log, CM_LOG_WARN, "gateway: the sender's trust is unknown (no exec): %s",
                terr);
    d->trusted = rq.trusted;
    gw_run_res res;
    memset(&res, 0, sizeof res);
    char err[512] = "";
    cm_rc rc = rt->o.run(rt->o.run_ctx, &rq, &res, err, sizeof err);
    const char *status = "answered";
    bool said = !rc && !S_cancelled(d) && !res.silent && !cm_gw_reply_is_silent(res.text);
    if (said && d->reasoning_lane) S_reasoning_finish(d); /* above the answer */
    if (said && res.reasoning && *res.reasoning) {        /* "on": a message of its own first */
        buf why = BUF_INIT;
        gw_pieces p;
        cm_gw_pieces_init(&p);
        if (!cm_buf_adds(&why, res.reasoning) &&
            !cm_gw_chunk_text(why.data, why.len, d->limit, GW_BREAK_PARAGRAPH, &p))
            S_send_pieces(d, &p);
        cm_gw_pieces_release(&p);
        cm_buf_release(&why);
    }
    if (S_cancelled(d)) {
        status = "aborted"; /* interrupt or /stop: no reply of this run */
        rc = CM_OK;
        if (d->previewing) S_preview_finish(d, NULL);
    } else if (rc) {
        /* the chat gets a short reason and an id; the error itself (paths,
         * model URLs) goes to the log under that id only */
        char eid[16], text[256];
        S_error_id(eid);
        cm_logf(rt->o.log, CM_LOG_ERROR, "gateway: turn failed [error %s] (%s, session %s): %s",
                eid, j->agent_id, j->key, err[0] ? err : cm_strerror(rc));
        snprintf(text, sizeof text,
                 "⚠️ Agent failed before reply: %s.\nError id: %s (in the gateway's log).",
                 cm_gw_failure_reason(rc), eid);
        S_send_text(d, text);
        if (d->previewing) S_preview_finish(d, NULL); /* an error never edits the preview */
        status = "failed";
    } else if (res.silent || cm_gw_reply_is_silent(res.text)) {
        status = "silent";
        if (d->previewing) S_preview_finish(d, NULL);
    } else if (d->streaming && d->released) {
        gw_pieces p;
        cm_gw_pieces_init(&p);
        cm_gw_stream_message_end(&d->st, cm_gw_rt_now(rt), &p);
        S_send_pieces(d, &p);
        cm_gw_pieces_release(&p);
    } else if (res.text && *res.text) {
        /* the model that answered (after any fallback) names the prefix */
        if (res.model[0]) {
            cm_buf_reset(&d->prefix);
            if (!cm_gw_reply_prefix(&d->prefix, cfg, j->agent_id, j->channel, j->account,
                                    res.model) &&
                d->prefix.len && cm_buf_addc(&d->prefix, ' '))
                cm_buf_reset(&d->prefix);
        }
        if (d->previewing)
            S_preview_finish(d, res.text);
        else
            S_send_text(d, res.text);
    } else if (d->previewing) {
        S_preview_finish(d, NULL);
    }
    S_typing(d, false);
    if (d->previewing) cm_gw_preview_release(&d->pv);
    if (d->reasoning_lane) cm_gw_preview_release(&d->rpv);
    if (!rc && d->failed) status = "undelivered";
    cm_gw_rt_done_all(rt, &j->ids, status);
    if (d->streaming) cm_gw_stream_release(&d->st);
    if (S_cancelled(d))
        S_waiter_done(rt, j, CM_ECANCELED, "the run was aborted", NULL);
    else
        S_waiter_done(rt, j, rc, rc ? cm_gw_failure_reason(rc) : NULL,
                      !rc && !res.silent && !cm_gw_reply_is_silent(res.text) ? res.text : NULL);
    free(res.text);
    free(res.reasoning);
}

/* A session command (/compact, /think, /reasoning, /model, /models): the agent's answer
 * sent as it is; a failure as a turn's is, with an error id. */
static void S_command(gw_runtime *rt, gw_job *j, deliver *d, int worker)
{
    for (size_t i = 0; i < j->ids.n; i++)
        cm_gw_journal_run(rt->journal, j->ids.v[i]);
    __atomic_fetch_add(&rt->runs, 1, __ATOMIC_RELAXED);
    gw_run_req rq = {.agent_id = j->agent_id,
                     .session_key = j->key,
                     .prompt = j->prompt,
                     .channel = j->channel,
                     .account = j->account,
                     .worker = worker,
                     .peer = j->peer,
                     .is_group = j->is_group,
                     .thread = j->thread,
                     .command = true,
                     .status_queue = j->status_queue};
    gw_run_res res;
    memset(&res, 0, sizeof res);
    char err[512] = "";
    cm_rc rc = rt->o.run(rt->o.run_ctx, &rq, &res, err, sizeof err);
    if (rc) {
        char eid[16], text[256];
        S_error_id(eid);
        cm_logf(rt->o.log, CM_LOG_ERROR,
                "gateway: a command failed [error %s] (%s, session %s): %s", eid, j->agent_id,
                j->key, err[0] ? err : cm_strerror(rc));
        snprintf(text, sizeof text,
                 "⚠️ The command failed: %s.\nError id: %s (in the gateway's log).",
                 cm_gw_failure_reason(rc), eid);
        S_send_as(d, text, true);
    } else if (res.text && *res.text) {
        S_send_as(d, res.text, true);
    }
    cm_gw_rt_done_all(rt, &j->ids, rc ? "failed" : d->failed ? "undelivered" : "answered");
    free(res.text);
    free(res.reasoning);
}

void cm_gw_rt_execute(gw_runtime *rt, gw_job *j, int worker)
{
    deliver d;
    memset(&d, 0, sizeof d);
    d.rt = rt;
    d.j = j;
    d.cfg = cm_gw_rt_config(rt); /* one snapshot for the whole job, even across a reload */
    d.ch = cm_gw_rt_channel(rt, j->channel, j->account);
    d.limit =
        cm_gw_reply_text_limit(d.cfg, j->channel, j->account, d.ch ? d.ch->ops->text_limit : 0);
    d.mode = cm_gw_reply_to_mode_of(d.cfg, j->channel, j->account);
    S_delay_cfg(d.cfg, &d);
    if (j->command) { /* a session command, or /status (a notice the agent writes) */
        S_command(rt, j, &d, worker);
    } else if (j->kind == GW_JOB_RUN) {
        S_run(rt, j, &d, worker);
    } else {
        S_send_text(&d, j->text ? j->text : "");
        cm_gw_rt_done_all(rt, &j->ids, j->status ? j->status : "answered");
    }
    cm_buf_release(&d.prefix);
    cm_buf_release(&d.held);
    cm_rtcfg_unref(d.cfg);
}

cm_rc cm_gw_rt_reset_session(gw_runtime *rt, const char *agent_id, const char *key, char *err,
                             size_t errlen)
{
    cm_rc rc = CM_OK;
    buf p = BUF_INIT;
    session_store st;
    memset(&st, 0, sizeof st);
    char id[160];
    CHECK(cm_session_store_path(&p, rt->o.state_dir, agent_id) ? CM_ENOMEM : CM_OK);
    CHECK(cm_session_store_read(&st, p.data, err, errlen));
    if (cm_session_store_get(&st, key))
        CHECK(cm_session_reset(&st, key, cm_wall_ms(), id, err, errlen));
out:
    cm_session_store_release(&st);
    cm_buf_release(&p);
    return rc;
}
