/*
 * dispatch.h — the pipeline of an accepted message (dispatch.c): access,
 * debounce, sessions and their queues (the commands the gateway answers
 * itself: dispatch_cmds.h). For runtime.c, deliver.c and dispatch_cmds.c;
 * not for other files.
 */
#ifndef CM_GW_DISPATCH_H
#define CM_GW_DISPATCH_H

#include "runtime_int.h"

/* A /queue override to write to the session's sessions.json entry. */
typedef struct gw_qsave {
    char *agent_id, *key; /* NULL: nothing to save */
    bool on;
    char mode[32], drop[32];
    int64_t debounce;
    long cap;
} gw_qsave;

/* The file I/O of an accepted message, kept out of mu: decided before it
 * (cm_gw_rt_prepare: the access verdict — the allow-from and pairing stores
 * read, locked up to 10 s, written — and a /new or /reset's session reset,
 * sessions.json rewritten) or after it (cm_gw_rt_finish: a /queue override
 * saved). */
typedef struct gw_pre {
    cm_rtcfg *cfg; /* the snapshot the verdict was decided under (a reference) */
    cm_rc access_rc;
    char access_err[256];
    gw_access_result ar;
    bool reset; /* m is a /new or /reset from a sender authorized for commands:
                   reset_rc its reset's outcome */
    cm_rc reset_rc;
    gw_qsave qsave; /* set under mu by a /queue command */
} gw_pre;

/* With no lock held: fills pre for m. */
void cm_gw_rt_prepare(gw_runtime *rt, const gw_msg *m, gw_pre *pre);
/* With no lock held, after cm_gw_rt_process: does what it left
 * to do and releases pre. */
void cm_gw_rt_finish(gw_runtime *rt, gw_pre *pre);

/* All under rt->mu: */
/* One accepted message (journal id jid) through access (pre's verdict) and
 * debounce. */
void cm_gw_rt_process(gw_runtime *rt, const gw_msg *m, uint64_t jid, int64_t now, gw_pre *pre);
/* A notice to a route; its job takes ids (marked status once sent). */
void cm_gw_rt_notice(gw_runtime *rt, const char *channel, const char *account, const char *peer,
                     const char *thread, const char *reply_to, const char *text, gw_ids *ids,
                     const char *status);
/* The next turn of an idle session: an interrupt's, or queued followups once
 * due (force: at once). */
void cm_gw_rt_session_due(gw_runtime *rt, gw_sess *s, int64_t now, bool force);
/* Under mu, once run j of s has ended: the steered texts it never took
 * become the session's next run (unless an interrupt's run waits, or j was
 * aborted: then they are dropped). */
void cm_gw_rt_steer_leftover(gw_runtime *rt, gw_sess *s, gw_job *j);
/* Due debounce batches and followups (force: all of them now). */
void cm_gw_rt_tick_locked(gw_runtime *rt, bool force);
/* The earliest deadline (clock ms) of a debounce batch or queued turn. */
int64_t cm_gw_rt_next_deadline(gw_runtime *rt);
void cm_gw_sess_free(gw_sess *s);

/* For dispatch_cmds.c, under mu: */
/* A job replying to a route (strings copied), or NULL (ENOMEM). */
gw_job *cm_gw_rt_job_new(gw_job_kind kind, const char *channel, const char *account,
                         const char *peer, const char *thread, const char *reply_to);
/* The conversation label and group title of t on j (out of memory: left out). */
void cm_gw_rt_job_origin(gw_job *j, const gw_turn *t);
/* Hands job j to a worker now, outside any session (a /status answer). */
void cm_gw_rt_ready(gw_runtime *rt, gw_job *j);
/* Starts run job j for s now: s becomes active. */
void cm_gw_rt_start(gw_runtime *rt, gw_sess *s, gw_job *j);
/* Aborts the runs of s: the one a worker executes and one still waiting. */
void cm_gw_rt_cancel_runs(gw_runtime *rt, gw_sess *s);
/* Moves the ids of the first n queued groups of s into to. */
void cm_gw_rt_group_take(gw_sess *s, size_t n, gw_ids *to);
/* The queue settings of s on channel (may be NULL): the config's, then the
 * session's /queue override. */
void cm_gw_rt_settings(gw_runtime *rt, gw_sess *s, const char *channel, gw_queue_settings *qs);

#endif
