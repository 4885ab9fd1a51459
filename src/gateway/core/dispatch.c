/*
 * dispatch.c — the runtime's pipeline under its lock (runtime_int.h): an
 * accepted message through access and debounce, turns routed to sessions
 * (the commands the gateway answers itself first: dispatch_cmds.c), the
 * session's queue actions, followup turns when their delay is over, and the
 * ready list the workers take jobs from.
 */
#include "dispatch.h"
#include "deliver.h"
#include "jobs.h"
#include "commands.h"
#include "dispatch_cmds.h"
#include "../../session/keys.h"
#include "../../session/sessions.h"
#include "../channels/feel.h"
#include "../shaping/inbound_meta.h"

#include <ctype.h>
#include <strings.h>

static uint32_t S_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static char *S_dup(const char *s)
{
    return s ? cm_strdup(s) : NULL;
}

/* A job replying to a route (strings copied). */
gw_job *cm_gw_rt_job_new(gw_job_kind kind, const char *channel, const char *account,
                         const char *peer, const char *thread, const char *reply_to)
{
    gw_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->kind = kind;
    j->channel = S_dup(channel);
    j->account = S_dup(account ? account : "default");
    j->peer = S_dup(peer);
    j->thread = S_dup(thread);
    j->reply_to = S_dup(reply_to);
    if (!j->channel || !j->account || (peer && !j->peer) || (thread && !j->thread) ||
        (reply_to && !j->reply_to)) {
        cm_gw_job_free(j);
        return NULL;
    }
    return j;
}

/* Queues a job for the workers (under mu). */
static void S_ready(gw_runtime *rt, gw_job *j)
{
    j->next = NULL;
    if (rt->ready_tail)
        rt->ready_tail->next = j;
    else
        rt->ready_head = j;
    rt->ready_tail = j;
    rt->ready_n++;
    pthread_cond_signal(&rt->work_cv);
}

/* A notice (pairing code, command answer, failure) to a route (under mu). */
void cm_gw_rt_notice(gw_runtime *rt, const char *channel, const char *account, const char *peer,
                     const char *thread, const char *reply_to, const char *text, gw_ids *ids,
                     const char *status)
{
    gw_job *j = cm_gw_rt_job_new(GW_JOB_NOTICE, channel, account, peer, thread, reply_to);
    if (j && !(j->text = cm_strdup(text))) {
        cm_gw_job_free(j);
        j = NULL;
    }
    if (!j) {
        if (ids) cm_gw_rt_done_all(rt, ids, status);
        return;
    }
    j->status = status;
    if (ids) cm_gw_ids_move(&j->ids, ids);
    S_ready(rt, j);
}

/* ---- sessions ------------------------------------------------------------ */

/* A session's /queue override as its sessions.json entry keeps it
 * (queueMode, queueDebounceMs, queueCap, queueDrop: 2026.3.22's fields), so
 * that it outlives a restart of the gateway. */
static void S_queue_load(gw_runtime *rt, gw_sess *s)
{
    buf p = BUF_INIT;
    session_store st;
    memset(&st, 0, sizeof st);
    char err[256];
    if (cm_session_store_path(&p, rt->o.state_dir, s->agent_id) ||
        cm_session_store_read(&st, p.data, err, sizeof err))
        goto out;
    const json_t *e = cm_session_store_get(&st, s->key);
    const char *mode = json_string_value(json_object_get(e, "queueMode"));
    const char *drop = json_string_value(json_object_get(e, "queueDrop"));
    const json_t *deb = json_object_get(e, "queueDebounceMs");
    const json_t *cap = json_object_get(e, "queueCap");
    if (!mode && !drop && !json_is_number(deb) && !json_is_number(cap)) goto out;
    s->has_ov = true;
    snprintf(s->ov_mode, sizeof s->ov_mode, "%s", mode ? mode : "");
    snprintf(s->ov_drop, sizeof s->ov_drop, "%s", drop ? drop : "");
    s->ov_debounce =
        json_is_number(deb) && json_number_value(deb) >= 0 ? (int64_t)json_number_value(deb) : -1;
    s->ov_cap =
        json_is_number(cap) && json_number_value(cap) >= 1 ? (long)json_number_value(cap) : 0;
out:
    cm_session_store_release(&st);
    cm_buf_release(&p);
}

/* Writes a session's /queue override (or its absence: the fields removed)
 * to its entry (file I/O: never under mu). */
static cm_rc S_queue_save(gw_runtime *rt, const gw_qsave *q, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf p = BUF_INIT;
    session_store st;
    memset(&st, 0, sizeof st);
    bool on = q->on;
    json_t *patch = json_pack(
        "{s:o,s:o,s:o,s:o}", "queueMode", on && q->mode[0] ? json_string(q->mode) : json_null(),
        "queueDrop", on && q->drop[0] ? json_string(q->drop) : json_null(), "queueDebounceMs",
        on && q->debounce >= 0 ? json_integer(q->debounce) : json_null(), "queueCap",
        on && q->cap > 0 ? json_integer(q->cap) : json_null());
    if (!patch) CHECK(CM_ENOMEM);
    CHECK(cm_session_store_path(&p, rt->o.state_dir, q->agent_id) ? CM_ENOMEM : CM_OK);
    CHECK(cm_session_store_read(&st, p.data, err, errlen));
    CHECK(cm_session_touch(&st, q->key, patch, cm_wall_ms(), NULL, err, errlen));
out:
    json_decref(patch);
    cm_session_store_release(&st);
    cm_buf_release(&p);
    return rc;
}

void cm_gw_rt_finish(gw_runtime *rt, gw_pre *pre)
{
    gw_qsave *q = &pre->qsave;
    char why[256];
    if (q->key && S_queue_save(rt, q, why, sizeof why))
        cm_logf(rt->o.log, CM_LOG_WARN, "gateway: /queue not saved to the session: %s", why);
    free(q->agent_id);
    free(q->key);
    memset(q, 0, sizeof *q);
    cm_rtcfg_unref(pre->cfg);
    pre->cfg = NULL;
}

static gw_sess *S_sess(gw_runtime *rt, const char *key, const char *agent_id)
{
    uint32_t h = S_hash(key) % GW_RT_BUCKETS;
    for (gw_sess *s = rt->sess[h]; s; s = s->next)
        if (!strcmp(s->key, key)) return s;
    gw_sess *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->key = cm_strdup(key);
    s->agent_id = cm_strdup(agent_id);
    if (!s->key || !s->agent_id || cm_gw_queue_open(key, rt->recent, &s->q)) {
        free(s->key);
        free(s->agent_id);
        free(s);
        return NULL;
    }
    S_queue_load(rt, s);
    s->next = rt->sess[h];
    rt->sess[h] = s;
    rt->nsess++;
    return s;
}

/* s (may) have work for the clock from now on: on the watch list, last
 * (the timer starts sessions' turns in the order they got work). */
static void S_watch(gw_runtime *rt, gw_sess *s)
{
    if (s->watched) return;
    s->watched = true;
    s->wnext = NULL;
    if (rt->watch_tail)
        rt->watch_tail->wnext = s;
    else
        rt->watch = s;
    rt->watch_tail = s;
}

/* Whether s has work the clock starts (or a worker, at its run's end). */
static bool S_has_work(const gw_sess *s)
{
    return cm_gw_queue_depth(s->q) || s->next_job || s->cmd_head || s->summarized_ids_pending;
}

void cm_gw_sess_free(gw_sess *s)
{
    while (s->cmd_head) { /* left journaled: answered after the next start */
        gw_job *j = s->cmd_head;
        s->cmd_head = j->next;
        cm_gw_job_free(j);
    }
    cm_gw_queue_close(s->q);
    for (size_t i = 0; i < s->ngroups; i++)
        cm_gw_ids_release(&s->groups[i]);
    free(s->groups);
    cm_gw_job_free(s->next_job);
    free(s->key);
    free(s->agent_id);
    free(s);
}

void cm_gw_rt_settings(gw_runtime *rt, gw_sess *s, const char *channel, gw_queue_settings *qs)
{
    gw_queue_override ov = {s->has_ov && s->ov_mode[0] ? s->ov_mode : NULL,
                            s->has_ov && s->ov_drop[0] ? s->ov_drop : NULL,
                            s->has_ov ? s->ov_debounce : -1, s->has_ov ? s->ov_cap : 0};
    cm_gw_queue_settings_resolve(rt->cfg, channel, &ov, qs);
}

/* Queued message groups (the ids each queued item carries). */
static cm_rc S_group_push(gw_sess *s, gw_ids *ids)
{
    if (s->ngroups == s->capgroups) {
        size_t cap = s->capgroups ? s->capgroups * 2 : 4;
        gw_ids *g = realloc(s->groups, cap * sizeof *g);
        if (!g) return CM_ENOMEM;
        s->groups = g;
        s->capgroups = cap;
    }
    memset(&s->groups[s->ngroups], 0, sizeof s->groups[0]);
    cm_rc rc = cm_gw_ids_move(&s->groups[s->ngroups], ids);
    s->ngroups++;
    return rc;
}

/* Moves the first n groups' ids into to. */
void cm_gw_rt_group_take(gw_sess *s, size_t n, gw_ids *to)
{
    if (n > s->ngroups) n = s->ngroups;
    for (size_t i = 0; i < n; i++) {
        cm_gw_ids_move(to, &s->groups[i]);
        cm_gw_ids_release(&s->groups[i]);
    }
    if (n && s->ngroups > n)
        memmove(s->groups, s->groups + n, (s->ngroups - n) * sizeof *s->groups);
    s->ngroups -= n;
}

/* ---- turns → sessions ---------------------------------------------------- */

/* Adds a steered text to the running job of s (under mu); ids, when given,
 * move to the job and are answered with it. */
static cm_rc S_steer_add(gw_sess *s, const char *text, gw_ids *ids)
{
    gw_job *r = s->running;
    if (r->nsteer == r->capsteer) {
        size_t cap = r->capsteer ? r->capsteer * 2 : 4;
        char **v = realloc(r->steer, cap * sizeof *v);
        if (!v) return CM_ENOMEM;
        r->steer = v;
        r->capsteer = cap;
    }
    if (!(r->steer[r->nsteer] = cm_strdup(text))) return CM_ENOMEM;
    r->nsteer++;
    return ids ? cm_gw_ids_move(&r->steer_ids, ids) : CM_OK;
}

void cm_gw_rt_steer_leftover(gw_runtime *rt, gw_sess *s, gw_job *j)
{
    buf p = BUF_INIT;
    gw_job *f = NULL;
    if (!j->nsteer && !j->steer_ids.n) return;
    if (__atomic_load_n(&j->cancel, __ATOMIC_RELAXED) || s->next_job) goto drop;
    for (size_t i = 0; i < j->nsteer; i++)
        if (cm_buf_printf(&p, "%s%s", i ? "\n\n" : "", j->steer[i])) goto drop;
    f = cm_gw_rt_job_new(GW_JOB_RUN, j->channel, j->account, j->peer, j->thread, j->reply_to);
    if (!f || !(f->prompt = cm_buf_detach(&p)) || !(f->agent_id = cm_strdup(j->agent_id)) ||
        !(f->key = cm_strdup(j->key)) || cm_gw_ids_move(&f->ids, &j->steer_ids))
        goto drop;
    f->is_group = j->is_group;
    f->mentioned = j->mentioned;
    f->sess = s;
    s->next_job = f;
    S_watch(rt, s);
    return;
drop:
    cm_buf_release(&p);
    cm_gw_job_free(f);
    cm_gw_rt_done_all(rt, &j->steer_ids, "dropped");
}

/* Aborts the run of s (under mu): the one a worker executes, and one still
 * waiting for a worker, which then never starts. */
void cm_gw_rt_cancel_runs(gw_runtime *rt, gw_sess *s)
{
    if (s->running) __atomic_store_n(&s->running->cancel, 1, __ATOMIC_RELAXED);
    for (gw_job *j = rt->ready_head; j; j = j->next)
        if (j->sess == s && j->kind == GW_JOB_RUN)
            __atomic_store_n(&j->cancel, 1, __ATOMIC_RELAXED);
}

/* The conversation of t for its session entry's origin (session/origin.h),
 * on j: the label 2026.3.22's Telegram gives it — a group's "<title>
 * id:<chat>[ topic:<thread>]" (or "group:<chat>…"), a direct chat's sender
 * label — and a group's title. Out of memory: left out. */
void cm_gw_rt_job_origin(gw_job *j, const gw_turn *t)
{
    buf l = BUF_INIT;
    cm_rc rc = CM_OK;
    const char *title = t->chat_title;
    while (title && (*title == ' ' || *title == '\t'))
        title++;
    if (t->is_group) {
        rc = title && *title ? cm_buf_printf(&l, "%s id:%s", title, t->peer ? t->peer : "")
                             : cm_buf_printf(&l, "group:%s", t->peer ? t->peer : "");
        if (!rc && t->thread && *t->thread) rc = cm_buf_printf(&l, " topic:%s", t->thread);
        if (title && *title) j->subject = cm_strdup(title);
    } else {
        rc = cm_gw_meta_sender_label(&l, t->sender_name, t->sender_username, t->sender);
    }
    if (!rc && l.len) j->label = cm_buf_detach(&l);
    cm_buf_release(&l);
}

/* A job outside any session to a worker now (under mu). */
void cm_gw_rt_ready(gw_runtime *rt, gw_job *j)
{
    j->sess = NULL;
    S_ready(rt, j);
}

/* Starts a run job for s now (under mu): s becomes active. */
void cm_gw_rt_start(gw_runtime *rt, gw_sess *s, gw_job *j)
{
    s->active = true;
    j->sess = s;
    S_ready(rt, j);
}

/* The prompt of a turn, as 2026.3.22 builds it for the agent: the
 * untrusted-metadata blocks (who wrote it, when, where; in groups the
 * pending history, which the turn takes), a blank line, then the text. */
static cm_rc S_prompt(gw_runtime *rt, const gw_turn *t, const char *conv, int64_t now, buf *out)
{
    cm_rc rc = CM_OK;
    const char *text = t->text && *t->text ? t->text : (t->has_media ? "<media:attachment>" : "");
    buf label = BUF_INIT, meta = BUF_INIT;
    gw_ts_opts to;
    cm_gw_ts_opts_read(rt->cfg, &to);
    gw_meta m = {t->channel,     t->is_group,       t->mentioned,  t->message_id, t->sender,
                 t->sender_name, t->sender_username, NULL,          t->chat_title, t->thread,
                 t->ts_ms > 0 ? t->ts_ms : now,     NULL,          0};
    if (t->is_group) {
        const char *title = t->chat_title;
        while (title && (*title == ' ' || *title == '\t'))
            title++;
        if (title && *title)
            rc = cm_buf_printf(&label, "%s id:%s", title, t->peer ? t->peer : "");
        else
            rc = cm_buf_printf(&label, "group:%s", t->peer ? t->peer : "");
        m.conversation_label = label.data;
        m.history = cm_gw_history_entries(&rt->history, conv, &m.nhistory);
    }
    if (!rc) rc = cm_gw_meta_prefix(&meta, &m, &to);
    if (!rc && meta.len) rc = cm_buf_printf(out, "%s\n\n", meta.data);
    if (!rc) rc = cm_buf_adds(out, text);
    if (!rc && t->is_group) cm_gw_history_clear(&rt->history, conv);
    cm_buf_release(&label);
    cm_buf_release(&meta);
    return rc;
}

/* A turn out of the debouncer (or straight from the sink, with what was
 * decided before the lock: pre) with the journal ids it answers; takes them
 * (under mu). */
static void S_dispatch(gw_runtime *rt, const gw_turn *t, gw_ids *ids, int64_t now, gw_pre *pre,
                       bool authorized)
{
    cm_rc rc = CM_OK;
    buf agent = BUF_INIT, key = BUF_INIT, prompt = BUF_INIT;
    gw_job *j = NULL;
    const char *text = t->text ? t->text : "";
    if (t->channel && !strcmp(t->channel, GW_INTERNAL_CHANNEL) && t->session)
        CHECK(cm_session_key_agent(&agent, t->session)); /* sessions_send: the key's agent */
    else
        CHECK(cm_gw_route_agent(&agent, rt->cfg, t->channel, t->account, t->peer, t->is_group));
    if (t->session && *t->session)
        CHECK(cm_buf_adds(&key, t->session));
    else
        CHECK(cm_gw_route_session(&key, rt->cfg, agent.data, t->channel, t->account, t->peer,
                                  t->thread, t->is_group));
    gw_sess *s = S_sess(rt, key.data, agent.data);
    if (!s) CHECK(CM_ENOMEM);
    S_watch(rt, s); /* whatever this turn leaves for the clock; off at the next tick if nothing */
    cmd_call call = {rt, t, ids, pre, s, agent.data, key.data, text, CM_OK, authorized};
    const char *rest = NULL;
    const gw_command *cmd = cm_gw_command_find(cm_gw_rt_commands, cm_gw_rt_ncommands, text, &rest);
    if (cmd && cmd->handler(&call, rest)) {
        rc = call.rc;
        goto out;
    }
    CHECK(call.rc);
    text = call.text;
    gw_turn cur = *t;
    cur.text = (char *)text;
    CHECK(S_prompt(rt, &cur, key.data, now, &prompt));
    gw_queue_settings qs;
    cm_gw_rt_settings(rt, s, t->channel, &qs);
    gw_queue_item item = {prompt.data, t->message_id, t->channel, t->peer, t->account, t->thread};
    /* a run a worker executes takes steered texts at its next tool-call boundary */
    gw_queue_action act =
        cm_gw_queue_on_inbound(s->q, &qs, s->active, s->running != NULL, false, &item, now);
    switch (act) {
    case GW_QACT_RUN_NOW:
    case GW_QACT_INTERRUPT:
        j = cm_gw_rt_job_new(GW_JOB_RUN, t->channel, t->account, t->peer, t->thread, t->message_id);
        if (!j || !(j->prompt = cm_buf_detach(&prompt)) || !(j->agent_id = cm_strdup(agent.data)) ||
            !(j->key = cm_strdup(key.data)))
            CHECK(CM_ENOMEM);
        j->is_group = t->is_group;
        j->mentioned = t->mentioned;
        cm_gw_rt_job_origin(j, t);
        cm_gw_ids_move(&j->ids, ids);
        if (act == GW_QACT_RUN_NOW) {
            cm_gw_rt_start(rt, s, j);
        } else { /* the active run is aborted: this one runs once it has stopped */
            cm_gw_rt_cancel_runs(rt, s);
            for (size_t i = 0; i < s->ngroups; i++)
                cm_gw_rt_done_all(rt, &s->groups[i], "dropped");
            cm_gw_rt_group_take(s, s->ngroups, &(gw_ids){0});
            if (s->next_job) cm_gw_rt_done_all(rt, &s->next_job->ids, "dropped");
            cm_gw_job_free(s->next_job);
            j->sess = s;
            s->next_job = j;
        }
        j = NULL;
        break;
    case GW_QACT_STEER:
        if (s->running) {
            CHECK(S_steer_add(s, prompt.data, ids));
            break;
        }
        /* no run to steer (streaming was false): queued */
        /* fall through */
    case GW_QACT_STEER_AND_ENQUEUE:
        if (act == GW_QACT_STEER_AND_ENQUEUE && s->running)
            CHECK(S_steer_add(s, prompt.data, NULL));
        /* fall through */
    case GW_QACT_ENQUEUE:
        CHECK(S_group_push(s, ids));
        /* drop "old"/"summarize" let the queue forget its oldest: keep the
         * groups in step with the queue's depth (the summary answers them) */
        while (s->ngroups > cm_gw_queue_depth(s->q)) {
            gw_ids old = {0};
            cm_gw_rt_group_take(s, 1, &old);
            s->summarized_ids_pending = true;
            cm_gw_ids_move(&s->summarized, &old);
            cm_gw_ids_release(&old);
        }
        pthread_cond_signal(&rt->timer_cv);
        break;
    case GW_QACT_DROP:
    default:
        cm_gw_rt_done_all(rt, ids, "dropped");
        break;
    }
out:
    if (rc) {
        cm_logf(rt->o.log, CM_LOG_WARN, "gateway: a turn could not be routed (%s)",
                cm_strerror(rc));
        cm_gw_rt_done_all(rt, ids, "failed");
    }
    cm_gw_job_free(j);
    cm_buf_release(&agent);
    cm_buf_release(&key);
    cm_buf_release(&prompt);
}

/* Debounce keys → journal ids of the batch being collected. */
static gw_dkey *S_pending(gw_runtime *rt, const char *dkey, bool create)
{
    uint32_t h = S_hash(dkey) % GW_RT_BUCKETS;
    for (gw_dkey *d = rt->dkeys[h]; d; d = d->next)
        if (!strcmp(d->key, dkey)) return d;
    if (!create) return NULL;
    gw_dkey *d = calloc(1, sizeof *d);
    if (!d || !(d->key = cm_strdup(dkey))) {
        free(d);
        return NULL;
    }
    d->next = rt->dkeys[h];
    rt->dkeys[h] = d;
    return d;
}

/* Moves the ids of a flushed batch into to and forgets its key. */
static void S_take_pending_ids(gw_runtime *rt, const char *dkey, gw_ids *to, bool *commands)
{
    *commands = false;
    uint32_t h = S_hash(dkey) % GW_RT_BUCKETS;
    for (gw_dkey **p = &rt->dkeys[h]; *p; p = &(*p)->next) {
        gw_dkey *d = *p;
        if (strcmp(d->key, dkey)) continue;
        cm_gw_ids_move(to, &d->ids);
        *commands = d->commands;
        *p = d->next;
        cm_gw_ids_release(&d->ids);
        free(d->key);
        free(d);
        return;
    }
}

static cm_rc S_turn_dkey(buf *k, const char *channel, const char *account, const char *peer,
                         const char *thread, const char *sender)
{
    cm_buf_reset(k);
    return cm_buf_printf(k, "%s\x1f%s\x1f%s\x1f%s\x1f%s", channel ? channel : "",
                         account && *account ? account : "default", peer ? peer : "",
                         thread ? thread : "", sender ? sender : "");
}

/* Dispatches turns out of the debouncer: each takes its batch's ids (the
 * extra, a message that was not batched, is given by one). */
static void S_dispatch_turns(gw_runtime *rt, gw_turns *ready, gw_ids *single, int64_t now,
                             gw_pre *pre)
{
    buf k = BUF_INIT;
    for (size_t i = 0; i < ready->n; i++) {
        gw_turn *t = &ready->v[i];
        gw_ids ids = {0};
        bool mine = single && i == ready->n - 1;
        bool authorized = false; /* for commands: the sender's (a batch has one) */
        if (mine) {
            cm_gw_ids_move(&ids, single);
            authorized = pre && pre->ar.commands;
        } else if (!S_turn_dkey(&k, t->channel, t->account, t->peer, t->thread, t->sender)) {
            S_take_pending_ids(rt, k.data, &ids, &authorized);
        }
        S_dispatch(rt, t, &ids, now, mine ? pre : NULL, authorized);
        cm_gw_rt_done_all(rt, &ids, "failed"); /* none left unless dispatch failed */
        cm_gw_ids_release(&ids);
    }
    cm_gw_turns_release(ready);
    cm_buf_release(&k);
}

/* The ack reaction on an allowed message (feel.h), handed to its channel,
 * which sends it on a thread of its own (under mu: nothing here waits). */
static void S_ack(gw_runtime *rt, const gw_msg *m)
{
    gw_channel *ch = cm_gw_rt_channel(rt, m->channel, m->account);
    if (!ch || !ch->ops->react || !m->message_id || !m->peer) return;
    buf agent = BUF_INIT;
    if (!cm_gw_route_agent(&agent, rt->cfg, m->channel, m->account, m->peer, m->is_group)) {
        const char *e = cm_gw_ack_reaction(rt->cfg, agent.data, m->channel, m->account, m->peer,
                                           m->is_group, m->mentioned);
        gw_outbound o = {m->account, m->peer, m->thread, m->message_id, "", false};
        if (e) ch->ops->react(ch, &o, e);
    }
    cm_buf_release(&agent);
}

void cm_gw_rt_prepare(gw_runtime *rt, const gw_msg *m, gw_pre *pre)
{
    buf agent = BUF_INIT, key = BUF_INIT;
    const char *rest;
    char err[256];
    memset(pre, 0, sizeof *pre);
    pre->cfg = cm_gw_rt_config(rt);
    const cm_rtcfg *cfg = pre->cfg;
    if (m->channel && (!strcmp(m->channel, "terminal") || !strcmp(m->channel, "webchat") ||
                       !strcmp(m->channel, GW_INTERNAL_CHANNEL))) {
        pre->ar.verdict = GW_ACCESS_ALLOW; /* the owner's console, behind the gateway token;
                                              sessions_send from a trusted sender's run */
        pre->ar.commands = strcmp(m->channel, GW_INTERNAL_CHANNEL) != 0;
    } else {
        pre->access_rc = cm_gw_access_check(cfg, rt->o.state_dir, m, cm_wall_ms(), &pre->ar,
                                            pre->access_err, sizeof pre->access_err);
    }
    if (pre->access_rc || pre->ar.verdict != GW_ACCESS_ALLOW || !pre->ar.commands) return;
    if (cm_gw_command_find(cm_gw_rt_commands, cm_gw_rt_ncommands, m->text, &rest) !=
        &cm_gw_rt_commands[0])
        return;
    /* the session key S_dispatch routes the turn to */
    pre->reset = true;
    pre->reset_rc = cm_gw_route_agent(&agent, cfg, m->channel, m->account, m->peer, m->is_group);
    if (!pre->reset_rc)
        pre->reset_rc = m->session && *m->session
                            ? cm_buf_adds(&key, m->session)
                            : cm_gw_route_session(&key, cfg, agent.data, m->channel, m->account,
                                                  m->peer, m->thread, m->is_group);
    if (!pre->reset_rc)
        pre->reset_rc = cm_gw_rt_reset_session(rt, agent.data, key.data, err, sizeof err);
    if (pre->reset_rc)
        cm_logf(rt->o.log, CM_LOG_WARN, "gateway: the session could not be reset: %s",
                pre->reset_rc == CM_ENOMEM ? "out of memory" : err);
    cm_buf_release(&agent);
    cm_buf_release(&key);
}

/* One accepted message (journal id jid) through access (decided in pre) and
 * debounce (under mu). */
void cm_gw_rt_process(gw_runtime *rt, const gw_msg *m, uint64_t jid, int64_t now, gw_pre *pre)
{
    gw_ids ids = {0};
    buf k = BUF_INIT;
    gw_turns ready = {0};
    cm_gw_ids_add(&ids, jid);
    gw_access_result ar = pre->ar;
    if (pre->access_rc) {
        cm_logf(rt->o.log, CM_LOG_WARN, "gateway: access check failed: %s", pre->access_err);
        cm_gw_rt_done_all(rt, &ids, "denied");
        goto out;
    }
    switch (ar.verdict) {
    case GW_ACCESS_ALLOW:
        S_ack(rt, m);
        break;
    case GW_ACCESS_PAIRING_ISSUED: {
        char text[512];
        snprintf(text, sizeof text,
                 "QuantumClaw: access not configured.\n\nYour id: %s\n\nPairing code: %s\n\nAsk "
                 "the bot owner to approve with:\nclawmem pairing approve %s %s",
                 m->sender ? m->sender : "?", ar.code, m->channel, ar.code);
        cm_gw_rt_notice(rt, m->channel, m->account, m->peer, m->thread, NULL, text, &ids, "denied");
        goto out;
    }
    case GW_ACCESS_NO_MENTION: {
        buf conv = BUF_INIT, agent = BUF_INIT;
        if (!cm_gw_route_agent(&agent, rt->cfg, m->channel, m->account, m->peer, true) &&
            !cm_gw_route_session(&conv, rt->cfg, agent.data, m->channel, m->account, m->peer,
                                 m->thread, true)) {
            buf who = BUF_INIT; /* out of memory: recorded without a sender */
            cm_gw_meta_sender_label(&who, m->sender_name, m->sender_username, m->sender);
            cm_gw_history_record(&rt->history, conv.data, who.data, m->text ? m->text : "",
                                 m->message_id, m->ts_ms > 0 ? m->ts_ms : now);
            cm_buf_release(&who);
        }
        cm_buf_release(&conv);
        cm_buf_release(&agent);
        cm_gw_rt_done_all(rt, &ids, "history");
        goto out;
    }
    default:
        cm_gw_rt_done_all(rt, &ids, "denied");
        goto out;
    }
    rt->accepted_runs++;
    /* Whether the debouncer batches m (its own rule, debounce.c). */
    const char *p = m->text ? m->text : "";
    while (isspace((unsigned char)*p))
        p++;
    bool batched = m->sender && *m->sender && m->peer && *m->peer && m->channel &&
                   cm_gw_debounce_ms(rt->cfg, m->channel) > 0 && !m->has_media && *p &&
                   !cm_gw_is_control_command(m->text, rt->cfg->root);
    if (batched) {
        gw_dkey *pend = NULL;
        if (S_turn_dkey(&k, m->channel, m->account, m->peer, m->thread, m->sender) ||
            !(pend = S_pending(rt, k.data, true)) || cm_gw_ids_move(&pend->ids, &ids)) {
            cm_gw_rt_done_all(rt, &ids, "failed");
            goto out;
        }
        pend->commands = ar.commands; /* the batch's sender, as decided for its newest message */
    }
    if (cm_gw_debounce_push(rt->debounce, m, now, &ready)) {
        cm_gw_rt_done_all(rt, &ids, "failed");
        goto out;
    }
    S_dispatch_turns(rt, &ready, batched ? NULL : &ids, now, pre);
    pthread_cond_signal(&rt->timer_cv);
out:
    cm_gw_turns_release(&ready);
    cm_gw_ids_release(&ids);
    cm_buf_release(&k);
}

/* ---- the clock: debounce windows and queue delays ------------------------- */

/* Starts the next followup turn of an idle session whose queue is due. */
void cm_gw_rt_session_due(gw_runtime *rt, gw_sess *s, int64_t now, bool force)
{
    if (s->active) return;
    if (s->cmd_head) { /* a session command waited for the run before */
        gw_job *j = s->cmd_head;
        s->cmd_head = j->next;
        if (!s->cmd_head) s->cmd_tail = NULL;
        cm_gw_rt_start(rt, s, j);
        return;
    }
    if (s->next_job) {
        gw_job *j = s->next_job;
        s->next_job = NULL;
        cm_gw_rt_start(rt, s, j);
        return;
    }
    if (!cm_gw_queue_depth(s->q) && !s->summarized_ids_pending) return;
    gw_queue_settings qs;
    cm_gw_rt_settings(rt, s, NULL, &qs);
    if (force) qs.debounce_ms = 0;
    gw_queue_run r;
    bool ok = false;
    if (cm_gw_queue_next(s->q, &qs, force ? INT64_MAX / 2 : now, &r, &ok) || !ok) return;
    gw_job *j = cm_gw_rt_job_new(GW_JOB_RUN, r.channel ? r.channel : "unknown", r.account,
                                 r.peer, r.thread, r.message_id);
    if (!j || !(j->prompt = cm_strdup(r.prompt)) || !(j->agent_id = cm_strdup(s->agent_id)) ||
        !(j->key = cm_strdup(s->key))) {
        cm_gw_job_free(j);
        cm_gw_queue_run_release(&r);
        return;
    }
    j->is_group = strstr(s->key, ":group:") || strstr(s->key, ":channel:");
    cm_gw_ids_move(&j->ids, &s->summarized);
    s->summarized_ids_pending = false;
    cm_gw_rt_group_take(s, cm_gw_queue_depth(s->q) ? r.count : s->ngroups, &j->ids);
    cm_gw_queue_run_release(&r);
    cm_gw_rt_start(rt, s, j);
}

/* Forgets idle sessions (no run, nothing queued; a /queue override is read
 * back from sessions.json when the session comes back) once
 * more than GW_RT_MAX_SESSIONS are known; they are made again on demand. */
static void S_evict_idle(gw_runtime *rt)
{
    if (rt->nsess <= GW_RT_MAX_SESSIONS) return;
    for (size_t b = 0; b < GW_RT_BUCKETS; b++)
        for (gw_sess **p = &rt->sess[b]; *p;) {
            gw_sess *s = *p;
            if (s->active || s->watched || s->next_job || s->cmd_head || s->ngroups ||
                s->summarized.n || cm_gw_queue_depth(s->q)) {
                p = &s->next;
                continue;
            }
            *p = s->next;
            cm_gw_sess_free(s);
            rt->nsess--;
        }
}

/* Everything due at now; force: every pending batch and queue at once. */
void cm_gw_rt_tick_locked(gw_runtime *rt, bool force)
{
    S_evict_idle(rt);
    int64_t now = cm_gw_rt_now(rt);
    gw_turns ready = {0};
    if (!(force ? cm_gw_debounce_flush_all(rt->debounce, &ready)
                : cm_gw_debounce_due(rt->debounce, now, &ready)))
        S_dispatch_turns(rt, &ready, NULL, now, NULL);
    cm_gw_turns_release(&ready);
    /* the watched sessions only (every one with work is watched): a tick
     * costs the sessions with work, not every session known */
    gw_sess *prev = NULL;
    for (gw_sess *s = rt->watch, *n; s; s = n) {
        rt->tick_visits++;
        cm_gw_rt_session_due(rt, s, now, force);
        n = s->wnext;
        if (S_has_work(s)) {
            prev = s;
            continue;
        }
        if (prev)
            prev->wnext = n;
        else
            rt->watch = n;
        if (rt->watch_tail == s) rt->watch_tail = prev;
        s->watched = false;
        s->wnext = NULL;
    }
}

/* The earliest deadline (clock ms) of a debounce batch or a queued turn. */
int64_t cm_gw_rt_next_deadline(gw_runtime *rt)
{
    int64_t next = cm_gw_debounce_next_deadline(rt->debounce);
    for (gw_sess *s = rt->watch; s; s = s->wnext) { /* a queue: watched */
        if (s->active || !cm_gw_queue_depth(s->q)) continue;
        gw_queue_settings qs;
        cm_gw_rt_settings(rt, s, NULL, &qs);
        int64_t d = cm_gw_queue_deadline(s->q, &qs);
        if (d < next) next = d;
    }
    return next;
}
