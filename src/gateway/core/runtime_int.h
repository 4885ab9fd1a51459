/*
 * runtime_int.h — what runtime.c (the sink, timer, workers, lifecycle),
 * dispatch.c (the pipeline under the lock: access, debounce, sessions,
 * queues) and deliver.c (a job executed: the agent run, the reply shaped
 * and sent) share. Not for other files.
 */
#ifndef CM_GW_RUNTIME_INT_H
#define CM_GW_RUNTIME_INT_H

#include <pthread.h>

#include "../../base/log.h"
#include "../shaping/body.h"
#include "journal.h"
#include "runtime.h"

#define GW_RT_BUCKETS      1024
#define GW_RT_MAX_WORKERS  64
#define GW_RT_MAX_CHANNELS 32
/* Idle sessions kept in memory past this many are forgotten. */
#define GW_RT_MAX_SESSIONS 4096

/* Journal ids a job answers. */
typedef struct gw_ids {
    uint64_t *v;
    size_t n, cap;
} gw_ids;

cm_rc cm_gw_ids_add(gw_ids *v, uint64_t id);
/* Appends from's ids to to and empties from. */
cm_rc cm_gw_ids_move(gw_ids *to, gw_ids *from);
void cm_gw_ids_release(gw_ids *v);

typedef struct gw_sess gw_sess;

typedef enum { GW_JOB_RUN, GW_JOB_NOTICE } gw_job_kind;

/* A unit of work for the workers: an agent run for a session, or a notice
 * (pairing code, command answer, failure) sent as it is. */
typedef struct gw_job {
    gw_job_kind kind;
    gw_sess *sess; /* GW_JOB_RUN: the session (active while the job lives) */
    char *agent_id, *key, *prompt;
    char *channel, *account, *peer, *thread, *reply_to;
    bool is_group;
    bool mentioned;     /* the turn mentioned the bot (typing mode, feel.h) */
    bool command;       /* GW_JOB_RUN: prompt is a session command (gw_run_req.command) */
    char *text;         /* GW_JOB_NOTICE; GW_JOB_RUN: a notice sent before the run (or NULL) */
    char *label, *subject; /* GW_JOB_RUN: the conversation label, a group's title (or NULL) */
    const char *status; /* GW_JOB_NOTICE: the journal status of its ids */
    gw_ids ids;
    struct gw_job *next;
    /* GW_JOB_RUN while it runs: cancel (atomic) set by an interrupt or
     * /stop; steered texts not yet taken by the run and their journal ids
     * (under mu) */
    int cancel;
    char **steer;
    size_t nsteer, capsteer;
    gw_ids steer_ids;
} gw_job;

void cm_gw_job_free(gw_job *j);

struct gw_sess {
    char *key, *agent_id;
    gw_queue *q;
    gw_ids *groups; /* the journal ids of each queued item, in queue order */
    size_t ngroups, capgroups;
    gw_ids summarized; /* ids of items the queue dropped into its summary */
    bool summarized_ids_pending;
    gw_job *next_job; /* interrupt: runs when the active run ends */
    /* session commands (/compact, /think, /reasoning) waiting for the
     * active run to end, in order (linked by next); before any other run */
    gw_job *cmd_head, *cmd_tail;
    bool active;      /* a run is ready or running */
    gw_job *running;  /* the run a worker executes now, or NULL */
    bool has_ov;      /* a /queue override */
    char ov_mode[32], ov_drop[32];
    int64_t ov_debounce;
    long ov_cap;
    gw_sess *next;
};

/* A sessions_send waiting for the run that answers its message (run_id:
 * the message's id); done, rc, reply and error set by that run's end. */
typedef struct gw_waiter {
    char run_id[64];
    bool done;
    cm_rc rc;
    char *reply;
    char error[160];
    struct gw_waiter *next;
} gw_waiter;

typedef struct gw_dkey {
    char *key;
    gw_ids ids;
    struct gw_dkey *next;
} gw_dkey;

struct gw_runtime {
    gw_runtime_opts o;
    pthread_mutex_t mu;
    /* The config snapshot new work reads (one reference). Swapped under mu
     * by cm_gw_runtime_reload; code under mu reads it as it is, code outside
     * takes its own reference (cm_gw_rt_config). */
    cm_rtcfg *cfg;
    pthread_cond_t work_cv, idle_cv, timer_cv;
    pthread_cond_t reply_cv; /* a waiter's run ended (gw_waiter) */
    gw_waiter *waiters;      /* under mu */
    bool inited, accepting, stopping, has_timer;
    bool legacy_keys; /* the journal gave back dedupe keys of the older form */
    gw_journal *journal;
    json_t *pending, *seen; /* from the journal, until start */
    gw_dedupe *dedupe, *recent;
    gw_debounce *debounce;
    gw_history history;
    gw_sess *sess[GW_RT_BUCKETS];
    size_t nsess;
    gw_dkey *dkeys[GW_RT_BUCKETS];
    gw_job *ready_head, *ready_tail;
    size_t ready_n, running;
    pthread_t workers[GW_RT_MAX_WORKERS], timer;
    struct gw_worker_arg {
        gw_runtime *rt;
        int idx;
    } wargs[GW_RT_MAX_WORKERS];
    int nworkers;
    struct {
        gw_channel *ch;
        char name[64], account[128];
        bool started;
    } ch[GW_RT_MAX_CHANNELS];
    size_t nch;
    /* counters (under mu, except runs/replies: atomics in deliver.c) */
    uint64_t accepted, duplicates, accepted_runs, recovered;
    uint64_t runs, replies;
};

int64_t cm_gw_rt_now(gw_runtime *rt);
/* A reference to the current config snapshot (takes mu briefly: not under
 * it); the caller drops it with cm_rtcfg_unref. */
cm_rtcfg *cm_gw_rt_config(gw_runtime *rt);
/* Marks every id done with status and empties v. */
void cm_gw_rt_done_all(gw_runtime *rt, gw_ids *v, const char *status);
/* The channel registered for (name, account), else any of that name. */
gw_channel *cm_gw_rt_channel(gw_runtime *rt, const char *name, const char *account);

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
    bool reset; /* m is an allowed /new or /reset: reset_rc its reset's outcome */
    cm_rc reset_rc;
    gw_qsave qsave; /* set under mu by a /queue command */
} gw_pre;

/* dispatch.c, with no lock held: fills pre for m. */
void cm_gw_rt_prepare(gw_runtime *rt, const gw_msg *m, gw_pre *pre);
/* dispatch.c, with no lock held, after cm_gw_rt_process: does what it left
 * to do and releases pre. */
void cm_gw_rt_finish(gw_runtime *rt, gw_pre *pre);

/* dispatch.c, all under rt->mu: */
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

/* deliver.c: what a chat is told of a failed turn, by its code: a short
 * static reason without paths or URLs ("the model is unavailable (rate
 * limited)"). */
const char *cm_gw_failure_reason(cm_rc rc);

/* deliver.c: runs a job on a worker thread (no lock held) and marks its
 * journal ids. */
void cm_gw_rt_execute(gw_runtime *rt, gw_job *j, int worker);
/* deliver.c: /new and /reset — the session key's transcript archived
 * (file I/O: never under mu). */
cm_rc cm_gw_rt_reset_session(gw_runtime *rt, const char *agent_id, const char *key, char *err,
                             size_t errlen);

#endif
