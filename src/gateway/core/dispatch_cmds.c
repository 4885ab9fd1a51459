/*
 * dispatch_cmds.c — the commands the gateway answers itself, for
 * dispatch.c (under the runtime's lock): /new and /reset, /queue, /stop,
 * /whoami, /help and /commands answered here; /compact, /think and /reasoning handed
 * to the agent as a session's command job, /status, /model and /models as
 * jobs outside the session; the table of their handlers.
 */
#include "dispatch_cmds.h"
#include "deliver.h"
#include "jobs.h"
#include "../channels/feel.h"

#include <ctype.h>

/* The gate of every command the gateway answers (2026.3.22's
 * rejectUnauthorizedCommand and its early return for a control command):
 * a sender not authorized for commands (gw_access_result.commands, the one
 * decision access.c makes) gets no answer, its message no run and no
 * effect — the ids are marked denied. True when c was refused. */
static bool S_refused(cmd_call *c)
{
    if (c->authorized) return false;
    cm_logf(c->rt->o.log, CM_LOG_INFO,
            "gateway: a command from a sender not authorized for commands was ignored");
    cm_gw_rt_done_all(c->rt, c->ids, "denied");
    return true;
}

/* Drops what s has queued (under mu): the queue and its groups' ids. */
static void S_drop_queued(gw_runtime *rt, gw_sess *s)
{
    for (size_t i = 0; i < s->ngroups; i++)
        cm_gw_rt_done_all(rt, &s->groups[i], "dropped");
    cm_gw_rt_group_take(s, s->ngroups, &(gw_ids){0});
}

/* /new and /reset: the transcript was archived (cm_gw_rt_prepare, before
 * the lock); text after the command is the new session's first message. */
static bool S_cmd_new(void *ctx, const char *rest)
{
    cmd_call *c = ctx;
    gw_runtime *rt = c->rt;
    const gw_turn *t = c->t;
    gw_sess *s = c->s;
    if (S_refused(c)) return true; /* with its tail: not reset, not a turn */
    cm_gw_queue_clear(s->q);
    S_drop_queued(rt, s);
    cm_rc r = c->pre && c->pre->reset ? c->pre->reset_rc : CM_EINVAL;
    if (!c->pre || !c->pre->reset) /* a command is never batched: only from the sink */
        cm_logf(rt->o.log, CM_LOG_WARN, "gateway: a reset without its preparation ignored");
    if (*rest) {
        c->text = rest;
        return false;
    }
    /* 2026.3.22: the notice names the model, then the agent greets in a turn
     * of the new session (after the run still going, if any, has been
     * answered: then the notice alone) */
    buf model = BUF_INIT, note = BUF_INIT, greet = BUF_INIT;
    gw_job *j = NULL;
    bool ok = !r && !cm_gw_agent_model(&model, rt->cfg, c->agent) &&
              !cm_gw_new_session_notice(&note, model.data);
    if (ok && !s->active && !cm_gw_greeting_prompt(&greet, cm_wall_ms()) &&
        (j = cm_gw_rt_job_new(GW_JOB_RUN, t->channel, t->account, t->peer, t->thread,
                              t->message_id)) &&
        (j->prompt = cm_buf_detach(&greet)) && (j->text = cm_buf_detach(&note)) &&
        (j->agent_id = cm_strdup(c->agent)) && (j->key = cm_strdup(c->key))) {
        j->is_group = t->is_group;
        j->mentioned = t->mentioned;
        cm_gw_rt_job_origin(j, t);
        cm_gw_ids_move(&j->ids, c->ids);
        cm_gw_rt_start(rt, s, j);
        j = NULL;
    } else {
        cm_gw_rt_notice(rt, t->channel, t->account, t->peer, t->thread, t->message_id,
                        r    ? "⚠️ The session could not be reset."
                        : ok ? note.data
                             : "✅ New session started.",
                        c->ids, "answered");
    }
    cm_gw_job_free(j);
    cm_buf_release(&model);
    cm_buf_release(&note);
    cm_buf_release(&greet);
    return true;
}

/* /queue: the session's queue settings (cm_gw_queue_parse_command), saved
 * to the session store by cm_gw_rt_finish once the lock is released. */
static bool S_cmd_queue(void *ctx, const char *rest)
{
    cmd_call *c = ctx;
    gw_runtime *rt = c->rt;
    const gw_turn *t = c->t;
    gw_sess *s = c->s;
    gw_queue_override ov;
    bool reset = false;
    (void)rest;
    if (S_refused(c)) return true;
    if (!cm_gw_queue_parse_command(c->text, &ov, &reset)) return false;
    buf msg = BUF_INIT;
    cm_rc rc = CM_OK;
    if (reset) {
        s->has_ov = false;
        rc = cm_buf_adds(&msg, "Queue settings reset to the defaults.");
    } else {
        if (!s->has_ov) {
            s->has_ov = true;
            s->ov_mode[0] = s->ov_drop[0] = 0;
            s->ov_debounce = -1;
            s->ov_cap = 0;
        }
        if (ov.mode) snprintf(s->ov_mode, sizeof s->ov_mode, "%s", ov.mode);
        if (ov.drop) snprintf(s->ov_drop, sizeof s->ov_drop, "%s", ov.drop);
        if (ov.debounce_ms >= 0) s->ov_debounce = ov.debounce_ms;
        if (ov.cap > 0) s->ov_cap = ov.cap;
    }
    gw_qsave *q = c->pre ? &c->pre->qsave : NULL;
    if (q && !q->key && (q->agent_id = cm_strdup(s->agent_id)) && (q->key = cm_strdup(s->key))) {
        q->on = s->has_ov;
        snprintf(q->mode, sizeof q->mode, "%s", s->ov_mode);
        snprintf(q->drop, sizeof q->drop, "%s", s->ov_drop);
        q->debounce = s->ov_debounce;
        q->cap = s->ov_cap;
    } else {
        cm_logf(rt->o.log, CM_LOG_WARN, "gateway: /queue not saved to the session");
    }
    if (!reset) {
        gw_queue_settings qs;
        cm_gw_rt_settings(rt, s, t->channel, &qs);
        static const char *const names[] = {"collect", "followup", "steer", "steer-backlog",
                                            "interrupt"};
        rc = cm_buf_printf(&msg, "Queue mode set to %s (debounce %lldms, cap %zu).", names[qs.mode],
                           (long long)qs.debounce_ms, qs.cap);
    }
    cm_gw_rt_notice(rt, t->channel, t->account, t->peer, t->thread, t->message_id,
                    msg.data ? msg.data : "Queue settings updated.", c->ids, "answered");
    cm_buf_release(&msg);
    c->rc = rc;
    return true;
}

/* /stop and the abort words: the session's runs aborted, its queue dropped. */
static bool S_cmd_stop(void *ctx, const char *rest)
{
    cmd_call *c = ctx;
    gw_runtime *rt = c->rt;
    const gw_turn *t = c->t;
    gw_sess *s = c->s;
    (void)rest;
    if (S_refused(c)) return true; /* the abort words too: nothing aborted */
    cm_gw_rt_cancel_runs(rt, s);
    size_t n = cm_gw_queue_clear(s->q);
    S_drop_queued(rt, s);
    if (s->next_job) { /* an interrupt's run waiting for the aborted one */
        cm_gw_rt_done_all(rt, &s->next_job->ids, "dropped");
        cm_gw_job_free(s->next_job);
        s->next_job = NULL;
        n++;
    }
    cm_logf(rt->o.log, CM_LOG_INFO, "gateway: /stop: %zu queued message%s dropped", n,
            n == 1 ? "" : "s");
    /* QuantumClaw's answer (the running run, if any, is aborted above) */
    cm_gw_rt_notice(rt, t->channel, t->account, t->peer, t->thread, t->message_id,
                    "⚙️ Agent was aborted.", c->ids, "answered");
    return true;
}

/* /compact [instructions], /think [level] and /reasoning [level]: answered
 * by the agent on a worker (agent/session_cmds.h: the session's store read
 * and written, /compact's flush and summary asked of the model), after the
 * session's active run — which /compact aborts first, as 2026.3.22 does.
 * A sender not authorized for commands gets no answer (2026.3.22 drops the
 * message). /think or /reasoning followed by more than one word is an
 * ordinary turn. */
static bool S_cmd_session(void *ctx, const char *rest)
{
    cmd_call *c = ctx;
    gw_runtime *rt = c->rt;
    const gw_turn *t = c->t;
    gw_sess *s = c->s;
    const char *r2;
    bool compact = cm_gw_command_word(c->text, "/compact", &r2);
    if (!compact) {
        const char *p = rest + strcspn(rest, " \t\r\n");
        while (isspace((unsigned char)*p))
            p++;
        if (*p) return false;
    }
    if (S_refused(c)) return true;
    gw_job *j =
        cm_gw_rt_job_new(GW_JOB_RUN, t->channel, t->account, t->peer, t->thread, t->message_id);
    if (!j || !(j->prompt = cm_strdup(c->text)) || !(j->agent_id = cm_strdup(c->agent)) ||
        !(j->key = cm_strdup(c->key))) {
        cm_gw_job_free(j);
        c->rc = CM_ENOMEM;
        return true;
    }
    j->command = true;
    j->is_group = t->is_group;
    j->mentioned = t->mentioned;
    cm_gw_ids_move(&j->ids, c->ids);
    if (!s->active) {
        cm_gw_rt_start(rt, s, j);
        return true;
    }
    if (compact) cm_gw_rt_cancel_runs(rt, s);
    j->sess = s;
    j->next = NULL;
    if (s->cmd_tail)
        s->cmd_tail->next = j;
    else
        s->cmd_head = j;
    s->cmd_tail = j;
    return true;
}

/* Whether nothing but blanks follows a command word. */
static bool S_bare(const char *rest)
{
    while (isspace((unsigned char)*rest))
        rest++;
    return !*rest;
}

/* The session's queue as /status shows it (2026.3.22's formatQueueDetails):
 * its mode and depth, and the settings themselves when /queue set any. */
static cm_rc S_queue_line(gw_runtime *rt, gw_sess *s, const char *channel, buf *out)
{
    static const char *const modes[] = {"collect", "followup", "steer", "steer-backlog",
                                        "interrupt"};
    static const char *const drops[] = {"summarize", "old", "new"};
    gw_queue_settings qs;
    cm_gw_rt_settings(rt, s, channel, &qs);
    cm_rc rc = cm_buf_printf(out, "🪢 Queue: %s (depth %zu", modes[qs.mode], cm_gw_queue_depth(s->q));
    if (!rc && s->has_ov && (s->ov_debounce >= 0 || s->ov_cap > 0 || s->ov_drop[0])) {
        int64_t ms = qs.debounce_ms < 0 ? 0 : qs.debounce_ms;
        if (ms >= 1000 && ms % 1000 == 0)
            rc = cm_buf_printf(out, " · debounce %llds", (long long)(ms / 1000));
        else if (ms >= 1000)
            rc = cm_buf_printf(out, " · debounce %.1fs", (double)ms / 1000.0);
        else
            rc = cm_buf_printf(out, " · debounce %lldms", (long long)ms);
        if (!rc) rc = cm_buf_printf(out, " · cap %zu · drop %s", qs.cap, drops[qs.drop]);
    }
    if (!rc) rc = cm_buf_addc(out, ')');
    return rc;
}

/* /status: the agent writes the session's card (it reads sessions.json, so
 * not here under the lock) on a worker at once — outside the session, as
 * 2026.3.22 answers it beside a running turn; the queue line is ours. */
static bool S_cmd_status(void *ctx, const char *rest)
{
    cmd_call *c = ctx;
    const gw_turn *t = c->t;
    if (!S_bare(rest)) return false;
    if (S_refused(c)) return true;
    buf q = BUF_INIT;
    gw_job *j =
        cm_gw_rt_job_new(GW_JOB_NOTICE, t->channel, t->account, t->peer, t->thread, t->message_id);
    if (!j || S_queue_line(c->rt, c->s, t->channel, &q) || !(j->status_queue = cm_buf_detach(&q)) ||
        !(j->prompt = cm_strdup("/status")) || !(j->agent_id = cm_strdup(c->agent)) ||
        !(j->key = cm_strdup(c->key))) {
        cm_gw_job_free(j);
        cm_buf_release(&q);
        c->rc = CM_ENOMEM;
        return true;
    }
    j->command = true;
    j->is_group = t->is_group;
    cm_gw_ids_move(&j->ids, c->ids);
    cm_gw_rt_ready(c->rt, j);
    return true;
}

/* /model [ref|status|list] and /models [provider] [page]: the agent answers
 * (agent/model_cmds.h: it reads and writes sessions.json, so not here
 * under the lock) on a worker at once, outside the session, as 2026.3.22
 * answers a directive-only message beside a running turn; the next turn
 * runs with the model set. "/model" with more than one word is a turn. */
static bool S_cmd_model(void *ctx, const char *rest)
{
    cmd_call *c = ctx;
    const gw_turn *t = c->t;
    const char *r2;
    if (cm_gw_command_word(c->text, "/model", &r2)) {
        const char *p = rest + strcspn(rest, " \t\r\n");
        if (!S_bare(p)) return false;
    }
    if (S_refused(c)) return true;
    gw_job *j =
        cm_gw_rt_job_new(GW_JOB_NOTICE, t->channel, t->account, t->peer, t->thread, t->message_id);
    if (!j || !(j->prompt = cm_strdup(c->text)) || !(j->agent_id = cm_strdup(c->agent)) ||
        !(j->key = cm_strdup(c->key))) {
        cm_gw_job_free(j);
        c->rc = CM_ENOMEM;
        return true;
    }
    j->command = true;
    j->is_group = t->is_group;
    cm_gw_ids_move(&j->ids, c->ids);
    cm_gw_rt_ready(c->rt, j);
    return true;
}

/* /whoami and /id: who the channel says wrote (2026.3.22's handleWhoamiCommand). */
static bool S_cmd_whoami(void *ctx, const char *rest)
{
    cmd_call *c = ctx;
    const gw_turn *t = c->t;
    if (!S_bare(rest)) return false;
    if (S_refused(c)) return true;
    buf m = BUF_INIT;
    const char *u = t->sender_username;
    cm_rc rc = cm_buf_printf(&m, "🧭 Identity\nChannel: %s", t->channel ? t->channel : "unknown");
    if (!rc && t->sender && *t->sender) rc = cm_buf_printf(&m, "\nUser id: %s", t->sender);
    if (!rc && u && *u) rc = cm_buf_printf(&m, "\nUsername: %s%s", *u == '@' ? "" : "@", u);
    if (!rc && t->is_group && t->peer)
        rc = cm_buf_printf(&m, "\nChat: %s:group:%s%s%s", t->channel ? t->channel : "unknown",
                           t->peer, t->thread ? ":topic:" : "", t->thread ? t->thread : "");
    if (!rc && t->thread) rc = cm_buf_printf(&m, "\nThread: %s", t->thread);
    if (!rc && t->sender && *t->sender) rc = cm_buf_printf(&m, "\nAllowFrom: %s", t->sender);
    cm_gw_rt_notice(c->rt, t->channel, t->account, t->peer, t->thread, t->message_id,
                    rc ? "🧭 Identity" : m.data, c->ids, "answered");
    cm_buf_release(&m);
    c->rc = rc;
    return true;
}

/* /help: 2026.3.22's card, naming the commands this gateway answers (its
 * /fast, /verbose, /context and /skill are not here: docs/runtime.md). */
static bool S_cmd_help(void *ctx, const char *rest)
{
    cmd_call *c = ctx;
    const gw_turn *t = c->t;
    if (!S_bare(rest)) return false;
    if (S_refused(c)) return true;
    cm_gw_rt_notice(c->rt, t->channel, t->account, t->peer, t->thread, t->message_id,
                    "ℹ️ Help\n\n"
                    "Session\n/new  |  /reset  |  /compact [instructions]  |  /stop\n\n"
                    "Options\n/think <level>  |  /model <id>  |  /reasoning on|off|stream  |  "
                    "/queue <mode>\n\n"
                    "Status\n/status  |  /whoami\n\nMore: /commands for full list",
                    c->ids, "answered");
    return true;
}

/* /commands: 2026.3.22's list (its category, registry order and
 * descriptions) of the commands this gateway answers, in one message on
 * every channel (Telegram's pages of 8 with buttons are not here). */
static bool S_cmd_commands(void *ctx, const char *rest)
{
    cmd_call *c = ctx;
    const gw_turn *t = c->t;
    if (!S_bare(rest)) return false;
    if (S_refused(c)) return true;
    cm_gw_rt_notice(c->rt, t->channel, t->account, t->peer, t->thread, t->message_id,
                    "ℹ️ Slash commands\n\n"
                    "Session\n"
                    "/stop - Stop the current run.\n"
                    "/reset - Reset the current session.\n"
                    "/new - Start a new session.\n"
                    "/compact - Compact the session context.\n\n"
                    "Options\n"
                    "/think (/thinking, /t) - Set thinking level.\n"
                    "/reasoning (/reason) - Toggle reasoning visibility.\n"
                    "/model - Show or set the model.\n"
                    "/models - List model providers or provider models.\n"
                    "/queue - Adjust queue settings.\n\n"
                    "Status\n"
                    "/help - Show available commands.\n"
                    "/commands - List all slash commands.\n"
                    "/status - Show current status.\n"
                    "/whoami (/id) - Show your sender id.",
                    c->ids, "answered");
    return true;
}

static const char *const S_new_aliases[] = {"/reset", NULL};
static const char *const S_think_aliases[] = {"/thinking", "/t", NULL};
static const char *const S_reasoning_aliases[] = {"/reason", NULL};
static const char *const S_whoami_aliases[] = {"/id", NULL};

/* The commands the gateway answers itself, in the order they are tried;
 * every other text (2026.3.22's other commands included) is a turn. */
const gw_command cm_gw_rt_commands[] = {
    {"/new", S_new_aliases, S_cmd_new, NULL},
    {"/queue", NULL, S_cmd_queue, NULL},
    {"/stop", NULL, S_cmd_stop, cm_gw_is_abort_request},
    {"/compact", NULL, S_cmd_session, NULL},
    {"/think", S_think_aliases, S_cmd_session, NULL},
    {"/reasoning", S_reasoning_aliases, S_cmd_session, NULL},
    {"/status", NULL, S_cmd_status, NULL},
    {"/models", NULL, S_cmd_model, NULL},
    {"/model", NULL, S_cmd_model, NULL},
    {"/whoami", S_whoami_aliases, S_cmd_whoami, NULL},
    {"/help", NULL, S_cmd_help, NULL},
    {"/commands", NULL, S_cmd_commands, NULL},
};
const size_t cm_gw_rt_ncommands = ARRAY_LEN(cm_gw_rt_commands);
