/*
 * exec_int.h — what exec.c (the tools) and exec_jobs.c (the children and
 * their table) share; not for other callers.
 */
#ifndef CM_TOOLS_EXEC_INT_H
#define CM_TOOLS_EXEC_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "exec.h"

/* The newest cap bytes pushed (a ring). */
typedef struct exec_ring {
    char *data;
    size_t cap, start, len;
} exec_ring;

/* One command. Fields below "guarded" change under the table's lock only. */
typedef struct exec_job {
    char id[20];
    char *scope; /* "<agent>\n<session>" */
    char *command, *cwd;
    pid_t pid; /* also the process group's id */
    pthread_t thr;
    int out_fd; /* the reader thread's */
    /* guarded */
    int in_fd; /* the child's stdin (write end); -1 once closed */
    char *head;
    size_t head_len;     /* the first EXEC_MAX_OUTPUT/2 bytes */
    exec_ring tail;      /* the newest EXEC_MAX_OUTPUT/2 bytes after the head */
    exec_ring pending;   /* output not polled yet */
    uint64_t total;      /* bytes of output in all */
    int64_t started_ms, ended_ms, deadline_ms; /* ended_ms: monotonic, 0 while running */
    int64_t started_wall;
    bool exited, timed_out, backgrounded;
    int exit_code, exit_signal;
    int waiters; /* callers inside cm_exec_wait_locked: the job is not evicted */
} exec_job;

/* Starts argv[0] (an absolute path) with envp in cwd in its own process
 * group and adds the job to the table; its reader thread collects output and
 * kills the group at timeout_ms (monotonic) or when the command exits.
 * The returned job stays owned by the table. */
cm_rc cm_exec_job_start(char *const argv[], char *const envp[], const char *cwd,
                        const char *command, const char *scope, int64_t timeout_ms,
                        exec_job **out, char *err, size_t errlen);

/* The table's lock (for reading a job's guarded fields). */
void cm_exec_lock(void);
void cm_exec_unlock(void);

/* Waits, locked, until job exited or until the monotonic deadline
 * (0: no deadline); true when it exited. */
bool cm_exec_wait_locked(exec_job *j, int64_t deadline_ms);

/* The job id in scope, locked; NULL when there is none. */
exec_job *cm_exec_find_locked(const char *scope, const char *id);

/* Jobs of scope, locked, newest first: v[0..return) (at most cap). */
size_t cm_exec_list_locked(const char *scope, exec_job **v, size_t cap);

/* Removes the job from the table (killing its group first if it runs) and
 * frees it; locked on entry, locked on return. */
void cm_exec_remove_locked(exec_job *j);

/* SIGKILL to the job's process group (while it runs). Locked. */
void cm_exec_kill_locked(exec_job *j);

/* Appends the job's whole output (head, marker, tail), locked, repaired to
 * valid UTF-8 without NUL bytes. */
cm_rc cm_exec_output_locked(const exec_job *j, buf *out);
/* Appends and empties the unpolled output, locked. */
cm_rc cm_exec_take_pending_locked(exec_job *j, buf *out);

/* Appends s[0..n) as valid UTF-8 with every NUL byte and invalid byte U+FFFD. */
cm_rc cm_exec_clean_text(buf *out, const char *s, size_t n);

int64_t cm_exec_now_ms(void); /* monotonic */

#endif
