/*
 * qmd.h — the QMD sidecar (memory.backend = "qmd"), below the engine: running
 * the qmd command (qmd_proc.c), the scope rule for a caller's session key
 * (qmd_scope.c), the search and its JSON (qmd_search.c), and the sidecar's
 * collections, updates, sessions export and their schedule (qmd_sidecar.c).
 * The engine's QMD backend (src/engine/qmd_backend.c) stands on these and
 * answers with the builtin engine when QMD fails.
 */
#ifndef CM_QMD_H
#define CM_QMD_H

#include <pthread.h>
#include <sys/types.h>

#include "../base/buf.h"
#include "../base/log.h"
#include "../config/config.h"

/* ---- qmd_proc.c: one run of the command ---------------------------------- */

/* Output kept of each stream; more fails the run ("too much output"). */
#define QMD_MAX_OUTPUT (200u * 1000u)

typedef struct qmd_run_result {
    int status;     /* exit code; -1 when killed by a signal or not started */
    bool timed_out; /* killed (with its process group) at the deadline */
    bool not_found; /* the executable does not exist (or is not executable) */
    buf out, err;   /* stdout (unless discarded) and stderr, each at most QMD_MAX_OUTPUT */
    bool too_much;  /* a stream passed QMD_MAX_OUTPUT */
} qmd_run_result;

/* The live runs of a sidecar: cm_backend_qmd_kill_all() kills their process groups
 * (closing the engine while an update runs). */
typedef struct qmd_procs {
    pthread_mutex_t mu;
    pid_t pids[8];
    bool closed; /* cm_backend_qmd_kill_all ran: a run starting now is killed at once */
} qmd_procs;

/* Runs argv (argv[0] looked up on PATH when it has no '/') with envp, in cwd,
 * stdin from /dev/null, in a process group of its own; reads both streams
 * until the child exits; at timeout_ms (> 0) kills the group with SIGKILL.
 * The group is killed and the child reaped before returning, whatever
 * happened, so that nothing it started is left behind. procs (may be NULL)
 * records the live child. CM_OK when the child ran (res says how it ended);
 * CM_EIO when it could not be started (res->not_found: missing executable). */
cm_rc cm_backend_qmd_run(const char *const *argv, char *const *envp, const char *cwd,
                         int64_t timeout_ms, bool discard_out, qmd_procs *procs,
                         qmd_run_result *res, char *err, size_t errlen);
void cm_backend_qmd_run_result_release(qmd_run_result *r);
/* One line for a failed run: "qmd update timed out after 100ms", "... failed
 * (code 2): <stderr>", "... produced too much output", or NULL for success. */
cm_rc cm_backend_qmd_run_failure(const qmd_run_result *r, const char *summary, int64_t timeout_ms,
                                 buf *out);
void cm_backend_qmd_kill_all(qmd_procs *p);

/* ---- qmd_scope.c: may this session see QMD's results? -------------------- */

/* What 2026.3.22 derives from a session key: the key lower-cased with
 * "agent:<id>:" stripped, the channel (first part when the second is
 * group/channel/direct/dm) and the chat type ("direct", "group", "channel";
 * "" when no key: it matches no chatType rule). */
typedef struct qmd_scope_key {
    char normal[256], channel[64], chat_type[16];
} qmd_scope_key;
void cm_backend_qmd_scope_parse(const char *session_key, qmd_scope_key *k);
/* The scope's verdict for session_key (NULL: unknown caller). */
bool cm_backend_qmd_scope_allowed(const cm_qmd_config *q, const char *session_key);

/* ---- qmd_search.c: a search and its JSON ---------------------------------- */

typedef struct qmd_hit {
    char *collection, *file; /* file: collection-relative */
    char *docid;
    double score;
    char *snippet; /* the snippet without QMD's "@@ -a,b @@" header line */
    int start_line, end_line;
} qmd_hit;

typedef struct qmd_hits {
    qmd_hit *v;
    size_t n;
} qmd_hits;

void cm_backend_qmd_hits_release(qmd_hits *h);

/* The command line of a search: "<mode> <query> --json -n <limit>" then
 * "-c <name>" for each collection (a han query in mode "search" reduced to
 * its keywords, as 2026.3.22 does). argv receives pointers into the caller's
 * strings and into store (at least 64 bytes); returns the count. */
size_t cm_backend_qmd_search_argv(const char *mode, const char *query, int limit,
                                  char *const *collections, size_t ncollections, const char **argv,
                                  size_t max, char *store);

/* Parses what `qmd <mode> --json` printed: a JSON array of {docid, score,
 * file ("qmd://<collection>/<path>"), snippet}, possibly after noise; "No
 * results found" (on stdout, or on stderr with stdout empty) is no hits.
 * CM_EINVAL with a reason when it is not that ("returned invalid JSON: ..."). */
cm_rc cm_backend_qmd_parse_hits(const char *out, const char *errs, qmd_hits *hits, char *err,
                                size_t errlen);

/* True when stderr/stdout say the command refused a flag ("unknown option",
 * "unknown flag", "unrecognized option", "unexpected argument", ...). */
bool cm_backend_qmd_refused_flags(const char *text);

/* ---- qmd_sidecar.c: collections, updates, the schedule -------------------- */

/* One collection: name (stable, "<base>-<agentId>"), root (absolute),
 * pattern and whether it holds exported sessions. */
typedef struct qmd_collection {
    char *name, *root, *pattern;
    bool sessions;
} qmd_collection;

typedef int64_t (*qmd_clock_fn)(void *ctx); /* milliseconds since the epoch */

typedef struct qmd_sidecar {
    /* set by cm_backend_qmd_sidecar_init, read-only afterwards */
    const cm_config *cfg;
    cm_logger lg;
    char *command;                /* the executable (first word of memory.qmd.command) */
    char *mode;                   /* search, vsearch or query */
    char *dir;                    /* <stateDir>/agents/<agentId>/qmd */
    char *xdg_config, *xdg_cache; /* dir/xdg-config, dir/xdg-cache */
    char *export_dir;             /* sessions export, or NULL */
    char **env;                   /* the environment of every run */
    qmd_collection *cols;
    size_t ncols;
    qmd_clock_fn clock;
    void *clock_ctx;
    qmd_procs procs;
    /* the schedule: guarded by mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool thread_started, stop, updating, kick, force;
    unsigned drops; /* cm_backend_qmd_sidecar_drop calls so far (under mu) */
    int64_t last_update_ms, last_embed_ms, embed_backoff_until_ms;
    int embed_failures;
    unsigned updates; /* updates finished (succeeded or not) */
    char last_update_error[256];
} qmd_sidecar;

/* Sets up q for cfg (which must outlive it): the collections of
 * includeDefaultMemory, paths[] and the sessions export, the QMD home and
 * the environment. clock NULL: the real clock. Runs nothing. */
cm_rc cm_backend_qmd_sidecar_init(qmd_sidecar *q, const cm_config *cfg, const cm_logger *lg,
                                  qmd_clock_fn clock, void *clock_ctx, char *err, size_t errlen);
/* Creates the QMD home and registers the collections (`qmd collection add`)
 * that QMD does not list yet, or lists with another root or pattern; then,
 * with update.onBoot, the boot update (waited for with waitForBootSync,
 * else on the schedule's thread), and the schedule's thread when
 * update.interval > 0 or a boot update runs in the background. CM_EIO when
 * QMD cannot run (missing binary, failure, timeout): the caller falls back. */
cm_rc cm_backend_qmd_sidecar_start(qmd_sidecar *q, char *err, size_t errlen);
/* One update now on the caller's thread (sessions export, `qmd update`, and
 * `qmd embed` when due and the mode needs vectors): `clawmem index` and the
 * schedule's thread. Skipped within update.debounceMs of the last unless
 * force. Another update in progress: waits for it (force) or returns. */
cm_rc cm_backend_qmd_sidecar_update(qmd_sidecar *q, bool force, char *err, size_t errlen);
/* Registers the collections again after QMD said one is missing (`qmd
 * collection list` consulted whatever the record says). */
cm_rc cm_backend_qmd_sidecar_repair(qmd_sidecar *q, char *err, size_t errlen);
/* Removes QMD's index (index.sqlite with its -wal and -shm) once this
 * process's update and any other process's (the update lock) are done; the
 * record of the last update and embedding goes (this process keeps its
 * schedule's time but embeds at the next update), so the next update builds
 * it again. An update asked for and not begun (the boot's) is called off.
 * The collections stay registered. *dropped: there was an index. */
cm_rc cm_backend_qmd_sidecar_drop(qmd_sidecar *q, int *dropped, char *err, size_t errlen);
/* Wakes the schedule's thread to look at the clock again (tests that move it). */
void cm_backend_qmd_sidecar_poke(qmd_sidecar *q);
/* Stops the thread (killing a run in progress) and frees q. */
void cm_backend_qmd_sidecar_release(qmd_sidecar *q);

/* Runs `qmd <args>` in q's home with timeout_ms; res as cm_backend_qmd_run. */
cm_rc cm_backend_qmd_sidecar_run(qmd_sidecar *q, const char *const *args, int64_t timeout_ms,
                                 bool discard, qmd_run_result *res, char *err, size_t errlen);
/* The collection named name, or NULL. */
const qmd_collection *cm_backend_qmd_sidecar_collection(const qmd_sidecar *q, const char *name);
/* Writes the sessions export now (sanitised User/Assistant transcripts as
 * Markdown, one file per session, older than retentionDays left out, files of
 * removed sessions deleted). */
cm_rc cm_backend_qmd_export_sessions(qmd_sidecar *q, char *err, size_t errlen);

#endif
