/*
 * runtime_int.h — the state runtime.c (the sink, timer, workers, lifecycle),
 * dispatch.c (the pipeline under the lock: access, debounce, sessions,
 * queues), deliver.c (a job executed: the agent run, the reply shaped and
 * sent) and jobs.c share: the runtime, its sessions and jobs; and
 * runtime.c's snapshot reference. Each file's functions are in its own
 * header (jobs.h, dispatch.h, deliver.h). Not for other files.
 */
#ifndef CM_GW_RUNTIME_INT_H
#define CM_GW_RUNTIME_INT_H

#include <pthread.h>

#include "../../base/log.h"
#include "../shaping/body.h"
#include "access.h"
#include "debounce.h"
#include "dedupe.h"
#include "journal.h"
#include "queue.h"
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
    char *status_queue; /* GW_JOB_NOTICE: /status's queue line; the agent writes the text */
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
    /* On the runtime's watch list (linked by wnext): every session that may
     * have work for the clock (a queue, next_job, cmd_head, a summary's
     * ids) is on it; the timer walks it instead of every known session and
     * takes off those with none. A watched session is never evicted. */
    bool watched;
    gw_sess *wnext;
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
    bool commands; /* its sender may use commands (gw_access_result.commands) */
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
    gw_sess *watch, *watch_tail; /* the sessions with work for the clock (gw_sess.watched) */
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
    uint64_t tick_visits; /* sessions the clock has looked at (cm_gw_runtime_tick_visits) */
};

/* A reference to the current config snapshot (takes mu briefly: not under
 * it); the caller drops it with cm_rtcfg_unref. */
cm_rtcfg *cm_gw_rt_config(gw_runtime *rt);

#endif
