/*
 * runtime.c — the running gateway (runtime.h): the sink (journal, dedupe,
 * then dispatch.c's pipeline), the worker pool running one agent run per
 * session at a time (deliver.c executes each job), the timer that flushes
 * debounce windows and queue delays, start with crash recovery, drain,
 * status.
 */
#include <limits.h>

#include "runtime_int.h"
#include "deliver.h"
#include "dispatch.h"
#include "jobs.h"

#include <stdatomic.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* A compaction of the journal when its answered lines make up half of it
 * (no lock held: it reads and writes the file). */
static void S_compact(gw_runtime *rt)
{
    char err[256];
    if (cm_gw_journal_compact(rt->journal, cm_gw_rt_now(rt), false, err, sizeof err))
        cm_logf(rt->o.log, CM_LOG_WARN, "gateway: the journal was not compacted: %s", err);
}

cm_rc cm_gw_runtime_sink(void *ctx, const gw_msg *msg)
{
    gw_runtime *rt = ctx;
    gw_msg stamped = *msg, *m = &stamped;
    cm_rc rc = CM_OK;
    char err[256];
    buf k = BUF_INIT, lk = BUF_INIT;
    pthread_mutex_lock(&rt->mu);
    if (!rt->accepting) {
        pthread_mutex_unlock(&rt->mu);
        return CM_EBUSY;
    }
    int64_t now = cm_gw_rt_now(rt);
    if (m->ts_ms <= 0) m->ts_ms = now; /* journaled: a replay keeps the time it came */
    bool keyed = cm_gw_dedupe_key(m, &k);
    /* a key an older version journaled (until they expire) */
    bool legacy = rt->legacy_keys && cm_gw_dedupe_key_legacy(m, &lk);
    if ((keyed && cm_gw_dedupe_peek(rt->dedupe, k.data, now)) ||
        (legacy && cm_gw_dedupe_peek(rt->dedupe, lk.data, now))) {
        if (keyed) cm_gw_dedupe_check(rt->dedupe, k.data, now); /* refreshes its time */
        rt->duplicates++;
        pthread_mutex_unlock(&rt->mu);
        goto out;
    }
    pthread_mutex_unlock(&rt->mu);
    /* The fsync happens outside the pipeline's lock: other channels' messages
     * and the workers go on meanwhile. */
    uint64_t jid = 0;
    rc = cm_gw_journal_accept(rt->journal, m, now, &jid, err, sizeof err);
    if (rc) {
        cm_logf(rt->o.log, rc == CM_ERATELIMIT ? CM_LOG_WARN : CM_LOG_ERROR, "gateway: %s", err);
        goto compact;
    }
    pthread_mutex_lock(&rt->mu);
    bool dup = keyed && cm_gw_dedupe_check(rt->dedupe, k.data, now);
    if (dup) rt->duplicates++; /* the same message came in on another thread meanwhile */
    pthread_mutex_unlock(&rt->mu);
    if (dup) {
        cm_gw_journal_done(rt->journal, jid, "duplicate");
        goto compact;
    }
    /* access (the pairing store's files) and a /new's session reset are
     * decided here, without the lock: other conversations go on */
    gw_pre pre;
    cm_gw_rt_prepare(rt, m, &pre);
    pthread_mutex_lock(&rt->mu);
    rt->accepted++;
    cm_gw_rt_process(rt, m, jid, now, &pre);
    pthread_mutex_unlock(&rt->mu);
    cm_gw_rt_finish(rt, &pre);
compact:
    S_compact(rt);
out:
    cm_buf_release(&k);
    cm_buf_release(&lk);
    return rc;
}

void cm_gw_runtime_tick(gw_runtime *rt)
{
    pthread_mutex_lock(&rt->mu);
    cm_gw_rt_tick_locked(rt, false);
    pthread_mutex_unlock(&rt->mu);
}

uint64_t cm_gw_runtime_tick_visits(gw_runtime *rt)
{
    pthread_mutex_lock(&rt->mu);
    uint64_t v = rt->tick_visits;
    pthread_mutex_unlock(&rt->mu);
    return v;
}

static atomic_bool g_trim; /* cm_gw_malloc_tune was called: the timers trim the heap */

static void *S_timer(void *arg)
{
    gw_runtime *rt = arg;
    int64_t trim_at = cm_gw_rt_now(rt) + GW_MALLOC_TRIM_MS;
    pthread_mutex_lock(&rt->mu);
    while (!rt->stopping) {
        cm_gw_rt_tick_locked(rt, false);
        int64_t next = cm_gw_rt_next_deadline(rt), now = cm_gw_rt_now(rt);
#ifdef __GLIBC__
        if (now >= trim_at && atomic_load(&g_trim)) { /* not under mu: it walks every arena */
            trim_at = now + GW_MALLOC_TRIM_MS;
            pthread_mutex_unlock(&rt->mu);
            malloc_trim(0);
            pthread_mutex_lock(&rt->mu);
            continue;
        }
#endif
        int64_t wait = next == INT64_MAX ? 1000 : next - now;
        if (wait < 1) wait = 1;
        if (wait > 1000) wait = 1000;
        struct timespec ts = cm_deadline_in(CLOCK_MONOTONIC, wait);
        pthread_cond_timedwait(&rt->timer_cv, &rt->mu, &ts);
    }
    pthread_mutex_unlock(&rt->mu);
    return NULL;
}

/* ---- workers -------------------------------------------------------------- */

static void *S_worker(void *arg)
{
    const struct gw_worker_arg *wa = arg;
    gw_runtime *rt = wa->rt;
    pthread_mutex_lock(&rt->mu);
    for (;;) {
        while (!rt->stopping && !rt->ready_head)
            pthread_cond_wait(&rt->work_cv, &rt->mu);
        if (rt->stopping) break; /* what is left stays journaled for the next start */
        gw_job *j = rt->ready_head;
        rt->ready_head = j->next;
        if (!rt->ready_head) rt->ready_tail = NULL;
        rt->ready_n--;
        rt->running++;
        if (j->sess && j->kind == GW_JOB_RUN) j->sess->running = j;
        pthread_mutex_unlock(&rt->mu);
        cm_gw_rt_execute(rt, j, wa->idx);
        S_compact(rt);
        pthread_mutex_lock(&rt->mu);
        rt->running--;
        gw_sess *s = j->sess;
        if (s) {
            s->active = false;
            if (s->running == j) s->running = NULL;
            cm_gw_rt_steer_leftover(rt, s, j);
            /* followups wait their debounce; an interrupt's run goes now */
            if (s->next_job || s->cmd_head) cm_gw_rt_session_due(rt, s, cm_gw_rt_now(rt), false);
        }
        cm_gw_job_free(j);
        pthread_cond_broadcast(&rt->idle_cv);
        pthread_cond_signal(&rt->timer_cv);
    }
    pthread_mutex_unlock(&rt->mu);
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------- */

void cm_gw_malloc_tune(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, (int)GW_MALLOC_MMAP_BYTES); /* also ends the dynamic threshold */
    atomic_store(&g_trim, true);
#endif
}

cm_rc cm_gw_runtime_new(const gw_runtime_opts *o, gw_runtime **out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    gw_runtime *rt = calloc(1, sizeof *rt);
    *out = NULL;
    if (!rt) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    rt->o = *o;
    if (rt->o.workers <= 0) rt->o.workers = 4;
    if (rt->o.workers > GW_RT_MAX_WORKERS) rt->o.workers = GW_RT_MAX_WORKERS;
    if (rt->o.max_attempts <= 0) rt->o.max_attempts = 2;
    pthread_mutex_init(&rt->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&rt->work_cv, &ca);
    pthread_cond_init(&rt->idle_cv, &ca);
    pthread_cond_init(&rt->timer_cv, &ca);
    pthread_cond_init(&rt->reply_cv, &ca);
    pthread_condattr_destroy(&ca);
    rt->inited = true;
    if (o->rtcfg)
        rt->cfg = cm_rtcfg_ref(o->rtcfg);
    else
        CHECK(cm_rtcfg_from_json(o->config, &rt->cfg, err, errlen));
    rt->o.config = NULL; /* borrowed for the call only: the runtime reads rt->cfg */
    int64_t hl = rt->cfg->messages.group_history_limit;
    cm_gw_history_init(&rt->history, hl != CM_RT_UNSET ? (int)CM_MIN(hl, INT_MAX) : -1);
    CHECK(cm_gw_dedupe_open(GW_DEDUPE_TTL_MS, GW_DEDUPE_MAX, &rt->dedupe));
    CHECK(cm_gw_dedupe_open(GW_QUEUE_RECENT_TTL_MS, GW_QUEUE_RECENT_MAX, &rt->recent));
    CHECK(cm_gw_debounce_open(rt->cfg, &rt->debounce));
    CHECK(cm_gw_journal_open(o->state_dir, cm_gw_rt_now(rt), GW_DEDUPE_TTL_MS, &rt->journal,
                             &rt->pending, &rt->seen, err, errlen));
    gw_journal_stats js;
    cm_gw_journal_stats(rt->journal, &js);
    if (js.torn)
        cm_logf(rt->o.log, CM_LOG_WARN,
                "gateway: %zu torn line%s of the journal skipped at replay (never acknowledged, "
                "or cut by a failed write)",
                js.torn, js.torn == 1 ? "" : "s");
    if (js.unrewritten)
        cm_logf(rt->o.log, CM_LOG_WARN,
                "gateway: no room to rewrite the journal at start (a full disk?): kept as it was");
    *out = rt;
    rt = NULL;
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_gw_runtime_free(rt);
    return rc;
}

void cm_gw_runtime_set_journal_limit(gw_runtime *rt, uint64_t bytes)
{
    cm_gw_journal_set_limit(rt->journal, bytes);
}

cm_rc cm_gw_runtime_add_channel(gw_runtime *rt, gw_channel *ch, const char *name,
                                const char *account, char *err, size_t errlen)
{
    if (rt->nch == GW_RT_MAX_CHANNELS)
        return cm_seterr(err, errlen, CM_EINVAL, "too many channels");
    snprintf(rt->ch[rt->nch].account, sizeof rt->ch[0].account, "%s",
             account && *account ? account : "default");
    snprintf(rt->ch[rt->nch].name, sizeof rt->ch[0].name, "%s", name ? name : ch->ops->name);
    rt->ch[rt->nch].ch = ch;
    for (size_t i = 0; i < rt->nch; i++)
        if (rt->ch[i].ch == ch) rt->ch[rt->nch].started = true; /* an alias: started once */
    rt->nch++;
    return CM_OK;
}

cm_rc cm_gw_runtime_start(gw_runtime *rt, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    size_t i;
    json_t *e;
    /* the recovered messages' access and resets, decided before the lock */
    size_t np = json_array_size(rt->pending);
    gw_pre *pres = np ? calloc(np, sizeof *pres) : NULL;
    if (np && !pres) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    json_array_foreach(rt->pending, i, e)
    {
        if (json_integer_value(json_object_get(e, "runs")) >= rt->o.max_attempts) continue;
        gw_msg m;
        cm_gw_journal_msg(json_object_get(e, "msg"), &m);
        cm_gw_rt_prepare(rt, &m, &pres[i]);
    }
    pthread_mutex_lock(&rt->mu);
    int64_t now = cm_gw_rt_now(rt);
    json_array_foreach(rt->seen, i, e)
    {
        json_int_t ts = json_integer_value(json_object_get(e, "ts"));
        const char *k = json_string_value(json_object_get(e, "key"));
        if (k) cm_gw_dedupe_check(rt->dedupe, k, ts > now ? now : ts);
        if (k && !strncmp(k, GW_DEDUPE_LEGACY_PREFIX, strlen(GW_DEDUPE_LEGACY_PREFIX)))
            rt->legacy_keys = true;
    }
    rt->accepting = true;
    /* Crash recovery: what was accepted and not answered runs again, unless
     * it already took max_attempts runs (then it is answered as failed). */
    json_array_foreach(rt->pending, i, e)
    {
        gw_msg m;
        cm_gw_journal_msg(json_object_get(e, "msg"), &m);
        uint64_t jid = (uint64_t)json_integer_value(json_object_get(e, "id"));
        buf k = BUF_INIT;
        if (cm_gw_dedupe_key(&m, &k)) cm_gw_dedupe_check(rt->dedupe, k.data, now);
        cm_buf_release(&k);
        rt->recovered++;
        if (json_integer_value(json_object_get(e, "runs")) >= rt->o.max_attempts) {
            gw_ids ids = {0};
            cm_gw_ids_add(&ids, jid);
            cm_gw_rt_notice(
                rt, m.channel ? m.channel : "unknown", m.account, m.peer, m.thread, m.message_id,
                "⚠️ This message was not answered: the gateway stopped while answering "
                "it. Please send it again.",
                &ids, "failed");
            cm_gw_ids_release(&ids);
            continue;
        }
        cm_gw_rt_process(rt, &m, jid, now, &pres[i]);
    }
    json_decref(rt->pending);
    json_decref(rt->seen);
    rt->pending = rt->seen = NULL;
    for (int w = 0; w < rt->o.workers; w++) {
        rt->wargs[w].rt = rt;
        rt->wargs[w].idx = w;
        if (pthread_create(&rt->workers[w], NULL, S_worker, &rt->wargs[w])) {
            rc = cm_seterr(err, errlen, CM_EIO, "cannot start the gateway's workers");
            break;
        }
        rt->nworkers++;
    }
    if (!rc && !rt->o.manual) {
        if (pthread_create(&rt->timer, NULL, S_timer, rt))
            rc = cm_seterr(err, errlen, CM_EIO, "cannot start the gateway's timer");
        else
            rt->has_timer = true;
    }
    pthread_mutex_unlock(&rt->mu);
    for (size_t p = 0; p < np; p++)
        cm_gw_rt_finish(rt, &pres[p]);
    free(pres);
    for (size_t c = 0; !rc && c < rt->nch; c++) {
        if (rt->ch[c].started) continue; /* an alias of a channel started above */
        rc = rt->ch[c].ch->ops->start(rt->ch[c].ch, cm_gw_runtime_sink, rt, err, errlen);
        if (!rc) rt->ch[c].started = true;
    }
    return rc;
}

static bool S_busy(gw_runtime *rt)
{
    if (rt->ready_head || rt->running) return true;
    for (size_t b = 0; b < GW_RT_BUCKETS; b++)
        for (gw_sess *s = rt->sess[b]; s; s = s->next)
            if (s->active) return true;
    return false;
}

static bool S_wait_idle_locked(gw_runtime *rt, int64_t timeout_ms, bool drain)
{
    int64_t end = cm_now_ms() + timeout_ms;
    for (;;) {
        if (drain) cm_gw_rt_tick_locked(rt, true);
        bool busy = S_busy(rt);
        if (!busy && drain) {
            for (size_t b = 0; b < GW_RT_BUCKETS && !busy; b++)
                for (gw_sess *s = rt->sess[b]; s && !busy; s = s->next)
                    busy = cm_gw_queue_depth(s->q) || s->next_job;
            busy = busy || cm_gw_debounce_pending(rt->debounce);
        }
        if (!busy) return true;
        int64_t left = end - cm_now_ms();
        if (left <= 0) return false;
        struct timespec ts = cm_deadline_in(CLOCK_MONOTONIC, left < 50 ? left : 50);
        pthread_cond_timedwait(&rt->idle_cv, &rt->mu, &ts);
    }
}

bool cm_gw_runtime_wait_idle(gw_runtime *rt, int64_t timeout_ms)
{
    pthread_mutex_lock(&rt->mu);
    bool ok = S_wait_idle_locked(rt, timeout_ms, false);
    pthread_mutex_unlock(&rt->mu);
    return ok;
}

/* Stops each distinct channel once. */
static void S_stop_channels(gw_runtime *rt)
{
    for (size_t c = 0; c < rt->nch; c++) {
        bool seen = false;
        for (size_t i = 0; i < c; i++)
            seen = seen || rt->ch[i].ch == rt->ch[c].ch;
        if (rt->ch[c].started && !seen) rt->ch[c].ch->ops->stop(rt->ch[c].ch);
    }
}

bool cm_gw_runtime_drain(gw_runtime *rt, int64_t timeout_ms)
{
    pthread_mutex_lock(&rt->mu);
    rt->accepting = false;
    pthread_mutex_unlock(&rt->mu);
    S_stop_channels(rt);
    pthread_mutex_lock(&rt->mu);
    bool ok = S_wait_idle_locked(rt, timeout_ms, true);
    pthread_mutex_unlock(&rt->mu);
    return ok && cm_gw_journal_backlog(rt->journal) == 0;
}

bool cm_gw_runtime_notify(gw_runtime *rt, const char *channel, const char *account,
                          const char *peer, const char *text)
{
    pthread_mutex_lock(&rt->mu);
    bool go = rt->accepting;
    size_t before = rt->ready_n;
    if (go) cm_gw_rt_notice(rt, channel, account, peer, NULL, NULL, text, NULL, "answered");
    go = go && rt->ready_n > before;
    pthread_mutex_unlock(&rt->mu);
    return go;
}

json_t *cm_gw_runtime_status(gw_runtime *rt)
{
    json_t *chs = json_array(), *ss = json_array();
    gw_journal_stats js; /* taken before mu: the journal's lock is never inside it */
    cm_gw_journal_stats(rt->journal, &js);
    pthread_mutex_lock(&rt->mu);
    for (size_t c = 0; c < rt->nch; c++)
        json_array_append_new(
            chs, json_pack("{s:s,s:s}", "channel", rt->ch[c].name, "account", rt->ch[c].account));
    size_t active = 0;
    for (size_t b = 0; b < GW_RT_BUCKETS; b++)
        for (gw_sess *s = rt->sess[b]; s; s = s->next) {
            active += s->active;
            if (!s->active && !cm_gw_queue_depth(s->q)) continue;
            json_array_append_new(ss, json_pack("{s:s,s:b,s:I}", "key", s->key, "active", s->active,
                                                "queued", (json_int_t)cm_gw_queue_depth(s->q)));
        }
    json_t *o = json_pack(
        "{s:b,s:o,s:o,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "accepting", rt->accepting,
        "channels", chs, "sessions", ss, "knownSessions", (json_int_t)rt->nsess, "activeRuns",
        (json_int_t)active, "readyJobs", (json_int_t)rt->ready_n, "debouncePending",
        (json_int_t)cm_gw_debounce_pending(rt->debounce), "journalBacklog", (json_int_t)js.backlog,
        "journalBytes", (json_int_t)js.bytes, "journalPendingBytes", (json_int_t)js.live_bytes,
        "accepted", (json_int_t)rt->accepted, "duplicates", (json_int_t)rt->duplicates, "recovered",
        (json_int_t)rt->recovered, "runs", (json_int_t)__atomic_load_n(&rt->runs, __ATOMIC_RELAXED),
        "replies", (json_int_t)__atomic_load_n(&rt->replies, __ATOMIC_RELAXED));
    pthread_mutex_unlock(&rt->mu);
    return o;
}

cm_rtcfg *cm_gw_rt_config(gw_runtime *rt)
{
    pthread_mutex_lock(&rt->mu);
    cm_rtcfg *c = cm_rtcfg_ref(rt->cfg);
    pthread_mutex_unlock(&rt->mu);
    return c;
}

cm_rtcfg *cm_gw_runtime_config(gw_runtime *rt)
{
    return cm_gw_rt_config(rt);
}

void cm_gw_runtime_reload(gw_runtime *rt, cm_rtcfg *fresh)
{
    cm_rtcfg_ref(fresh);
    pthread_mutex_lock(&rt->mu);
    cm_rtcfg *old = rt->cfg;
    rt->cfg = fresh;
    cm_gw_debounce_set_config(rt->debounce, fresh);
    pthread_mutex_unlock(&rt->mu);
    cm_rtcfg_unref(old); /* freed here unless a turn still holds it */
}

void cm_gw_runtime_free(gw_runtime *rt)
{
    if (!rt) return;
    if (rt->inited) {
        pthread_mutex_lock(&rt->mu);
        rt->stopping = true;
        rt->accepting = false;
        pthread_cond_broadcast(&rt->work_cv);
        pthread_cond_broadcast(&rt->timer_cv);
        pthread_cond_broadcast(&rt->reply_cv); /* a sessions_send waiting gives up */
        pthread_mutex_unlock(&rt->mu);
    }
    S_stop_channels(rt);
    if (rt->has_timer) pthread_join(rt->timer, NULL);
    for (int w = 0; w < rt->nworkers; w++)
        pthread_join(rt->workers[w], NULL);
    for (gw_job *j = rt->ready_head, *n; j; j = n) {
        n = j->next;
        cm_gw_job_free(j);
    }
    for (size_t b = 0; b < GW_RT_BUCKETS; b++) {
        for (gw_sess *s = rt->sess[b], *n; s; s = n) {
            n = s->next;
            cm_gw_sess_free(s);
        }
        for (gw_dkey *d = rt->dkeys[b], *n; d; d = n) {
            n = d->next;
            cm_gw_ids_release(&d->ids);
            free(d->key);
            free(d);
        }
    }
    cm_gw_debounce_close(rt->debounce);
    cm_gw_dedupe_close(rt->dedupe);
    cm_gw_dedupe_close(rt->recent);
    cm_gw_history_release(&rt->history);
    cm_gw_journal_close(rt->journal);
    json_decref(rt->pending);
    json_decref(rt->seen);
    cm_rtcfg_unref(rt->cfg);
    if (rt->inited) {
        pthread_mutex_destroy(&rt->mu);
        pthread_cond_destroy(&rt->work_cv);
        pthread_cond_destroy(&rt->idle_cv);
        pthread_cond_destroy(&rt->timer_cv);
        pthread_cond_destroy(&rt->reply_cv);
    }
    free(rt);
}
