/*
 * exec_jobs.c — exec's children (exec_int.h): posix_spawn into a new process
 * group, one reader thread per child that keeps a capped head and tail of
 * its output, kills the group at the timeout or once the command exits, and
 * the process-wide table of jobs `process` manages.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../base/utf8.h"
#include "exec_int.h"

#define HALF (EXEC_MAX_OUTPUT / 2)
#define TICK_MS 50      /* how often the reader looks for the child's exit */
#define DRAIN_MS 200    /* output still read after the group is killed */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static pthread_once_t cv_once = PTHREAD_ONCE_INIT;
static exec_job *jobs[EXEC_MAX_JOBS];
static size_t njobs;

static void cv_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&cv, &a);
    pthread_condattr_destroy(&a);
}

int64_t cm_exec_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cm_exec_lock(void)
{
    pthread_once(&cv_once, cv_init);
    pthread_mutex_lock(&mu);
}

void cm_exec_unlock(void)
{
    pthread_mutex_unlock(&mu);
}

/* ---- output ---------------------------------------------------------------- */

static cm_rc ring_init(exec_ring *r, size_t cap)
{
    r->data = malloc(cap);
    r->cap = cap;
    r->start = r->len = 0;
    return r->data ? CM_OK : CM_ENOMEM;
}

static void ring_push(exec_ring *r, const char *s, size_t n)
{
    if (n >= r->cap) { /* only the newest cap bytes survive */
        memcpy(r->data, s + n - r->cap, r->cap);
        r->start = 0;
        r->len = r->cap;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        size_t at = (r->start + r->len) % r->cap;
        r->data[at] = s[i];
        if (r->len < r->cap) r->len++;
        else r->start = (r->start + 1) % r->cap;
    }
}

static cm_rc ring_copy(const exec_ring *r, buf *tmp)
{
    size_t first = CM_MIN(r->len, r->cap - r->start);
    cm_rc rc = cm_buf_add(tmp, r->data + r->start, first);
    if (!rc) rc = cm_buf_add(tmp, r->data, r->len - first);
    return rc;
}

cm_rc cm_exec_clean_text(buf *out, const char *s, size_t n)
{
    cm_rc rc = CM_OK;
    for (size_t i = 0; i < n && !rc;) {
        size_t k = i;
        while (k < n && s[k]) /* a run without NUL */
            k++;
        rc = cm_utf8_repair(out, s + i, k - i);
        if (!rc && k < n) rc = cm_buf_adds(out, "\xEF\xBF\xBD");
        i = k + 1;
    }
    return rc;
}

static void push_output(exec_job *j, const char *s, size_t n)
{
    j->total += n;
    size_t h = CM_MIN(n, (size_t)HALF - j->head_len);
    memcpy(j->head + j->head_len, s, h);
    j->head_len += h;
    if (n > h) ring_push(&j->tail, s + h, n - h);
    ring_push(&j->pending, s, n);
}

cm_rc cm_exec_output_locked(const exec_job *j, buf *out)
{
    buf tmp = BUF_INIT;
    cm_rc rc = cm_exec_clean_text(out, j->head, j->head_len);
    uint64_t kept = j->head_len + j->tail.len;
    if (!rc && j->total > kept)
        rc = cm_buf_printf(out, "\n\n[… %llu bytes of output left out …]\n\n",
                           (unsigned long long)(j->total - kept));
    if (!rc) rc = ring_copy(&j->tail, &tmp);
    if (!rc) rc = cm_exec_clean_text(out, tmp.data, tmp.len);
    cm_buf_release(&tmp);
    return rc;
}

cm_rc cm_exec_take_pending_locked(exec_job *j, buf *out)
{
    buf tmp = BUF_INIT;
    cm_rc rc = ring_copy(&j->pending, &tmp);
    if (!rc) rc = cm_exec_clean_text(out, tmp.data, tmp.len);
    if (!rc) j->pending.start = j->pending.len = 0;
    cm_buf_release(&tmp);
    return rc;
}

/* ---- the reader thread -------------------------------------------------------- */

static void kill_group(exec_job *j)
{
    if (j->pid > 0) kill(-j->pid, SIGKILL);
}

static void *reader(void *arg)
{
    exec_job *j = arg;
    char chunk[16384];
    bool eof = false, reaped = false, killed = false;
    int status = 0;
    int64_t drain_until = 0;
    for (;;) {
        int64_t now = cm_exec_now_ms();
        if (!killed && now >= j->deadline_ms) { /* the timeout: the whole group goes */
            pthread_mutex_lock(&mu);
            j->timed_out = true;
            kill_group(j);
            pthread_mutex_unlock(&mu);
            killed = true;
        }
        if (!reaped) {
            /* exited? (not reaped yet, so the group's id cannot be reused) */
            siginfo_t si;
            memset(&si, 0, sizeof si);
            if (waitid(P_PID, (id_t)j->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                si.si_pid == j->pid) {
                kill_group(j); /* what the command left running dies with it */
                killed = true;
                waitpid(j->pid, &status, 0);
                reaped = true;
                drain_until = cm_exec_now_ms() + DRAIN_MS;
            }
        }
        if (eof && reaped) break;
        if (reaped && cm_exec_now_ms() >= drain_until) break; /* an escaped holder of the pipe */
        int wait = TICK_MS;
        if (!killed && j->deadline_ms - now < wait) wait = (int)CM_MAX(j->deadline_ms - now, 0);
        if (eof) {
            poll(NULL, 0, wait);
            continue;
        }
        struct pollfd p = {j->out_fd, POLLIN, 0};
        int r = poll(&p, 1, wait);
        if (r <= 0) continue;
        ssize_t n = read(j->out_fd, chunk, sizeof chunk);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) {
            eof = true;
            continue;
        }
        pthread_mutex_lock(&mu);
        push_output(j, chunk, (size_t)n);
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
    close(j->out_fd);
    j->out_fd = -1;
    pthread_mutex_lock(&mu);
    if (WIFEXITED(status)) j->exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) j->exit_signal = WTERMSIG(status);
    j->ended_ms = cm_exec_now_ms();
    if (!j->ended_ms) j->ended_ms = 1;
    if (j->in_fd >= 0) close(j->in_fd);
    j->in_fd = -1;
    j->exited = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* ---- the table ------------------------------------------------------------------ */

static void job_free(exec_job *j)
{
    if (!j) return;
    free(j->scope);
    free(j->command);
    free(j->cwd);
    free(j->head);
    free(j->tail.data);
    free(j->pending.data);
    free(j);
}

void cm_exec_kill_locked(exec_job *j)
{
    if (!j->exited) kill_group(j);
}

void cm_exec_remove_locked(exec_job *j)
{
    size_t i = 0;
    while (i < njobs && jobs[i] != j)
        i++;
    if (i == njobs) return;
    memmove(&jobs[i], &jobs[i + 1], (njobs - i - 1) * sizeof jobs[0]);
    njobs--;
    cm_exec_kill_locked(j);
    /* the reader finishes within TICK_MS + DRAIN_MS of the kill */
    while (!j->exited)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    pthread_join(j->thr, NULL);
    pthread_mutex_lock(&mu);
    job_free(j);
}

bool cm_exec_wait_locked(exec_job *j, int64_t deadline_ms)
{
    j->waiters++;
    while (!j->exited) {
        if (!deadline_ms) {
            pthread_cond_wait(&cv, &mu);
            continue;
        }
        int64_t left = deadline_ms - cm_exec_now_ms();
        if (left <= 0) break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += left / 1000;
        ts.tv_nsec += (left % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&cv, &mu, &ts);
    }
    j->waiters--;
    return j->exited;
}

exec_job *cm_exec_find_locked(const char *scope, const char *id)
{
    for (size_t i = 0; i < njobs; i++)
        if (jobs[i]->backgrounded && !strcmp(jobs[i]->id, id) && !strcmp(jobs[i]->scope, scope))
            return jobs[i];
    return NULL;
}

size_t cm_exec_list_locked(const char *scope, exec_job **v, size_t cap)
{
    size_t n = 0;
    for (size_t i = njobs; i-- > 0 && n < cap;)
        if (!strcmp(jobs[i]->scope, scope) && jobs[i]->backgrounded) v[n++] = jobs[i];
    return n;
}

/* Room for one more job: the oldest finished one goes when the table is full. */
static bool make_room_locked(void)
{
    if (njobs < EXEC_MAX_JOBS) return true;
    for (size_t i = 0; i < njobs; i++)
        if (jobs[i]->exited && jobs[i]->backgrounded && !jobs[i]->waiters) {
            /* a foreground one is its caller's; a polled one its poller's */
            cm_exec_remove_locked(jobs[i]);
            return njobs < EXEC_MAX_JOBS;
        }
    return false;
}

static void new_id(char *id, size_t n)
{
    unsigned char r[6] = {0};
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        static unsigned counter;
        uint64_t t = (uint64_t)cm_exec_now_ms() ^ ((uint64_t)++counter << 40);
        memcpy(r, &t, sizeof r);
    }
    snprintf(id, n, "%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5]);
}

cm_rc cm_exec_job_start(char *const argv[], char *const envp[], const char *cwd,
                        const char *command, const char *scope, int64_t timeout_ms,
                        exec_job **out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    int inp[2] = {-1, -1}, outp[2] = {-1, -1};
    bool fa_ok = false, at_ok = false;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    exec_job *j = calloc(1, sizeof *j);
    *out = NULL;
    if (!j || !(j->scope = cm_strdup(scope)) || !(j->command = cm_strdup(command)) ||
        !(j->cwd = cm_strdup(cwd)) || !(j->head = malloc(HALF)) || ring_init(&j->tail, HALF) ||
        ring_init(&j->pending, EXEC_PENDING_MAX))
        FAIL(CM_ENOMEM, "out of memory");
    j->in_fd = j->out_fd = -1;
    new_id(j->id, sizeof j->id);
    if (pipe2(inp, O_CLOEXEC) || pipe2(outp, O_CLOEXEC))
        FAIL(CM_EIO, "exec: no pipe (%s)", strerror(errno));
    fa_ok = !posix_spawn_file_actions_init(&fa);
    at_ok = !posix_spawnattr_init(&at);
    if (!fa_ok || !at_ok) FAIL(CM_ENOMEM, "out of memory");
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    if (posix_spawn_file_actions_adddup2(&fa, inp[0], 0) ||
        posix_spawn_file_actions_adddup2(&fa, outp[1], 1) ||
        posix_spawn_file_actions_adddup2(&fa, outp[1], 2) ||
        posix_spawn_file_actions_addchdir_np(&fa, cwd) ||
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                          POSIX_SPAWN_SETSIGDEF) ||
        posix_spawnattr_setpgroup(&at, 0) || posix_spawnattr_setsigmask(&at, &none) ||
        posix_spawnattr_setsigdefault(&at, &all))
        FAIL(CM_ENOMEM, "out of memory");
    cm_exec_lock();
    if (!make_room_locked()) {
        cm_exec_unlock();
        FAIL(CM_EBUSY, "exec: %d commands are running already; kill one with process first",
             EXEC_MAX_JOBS);
    }
    int e = posix_spawn(&j->pid, argv[0], &fa, &at, argv, envp);
    if (e) {
        cm_exec_unlock();
        FAIL(e == ENOENT ? CM_ENOTFOUND : CM_EIO, "exec: could not start the command (%s)",
             strerror(e));
    }
    close(inp[0]);
    close(outp[1]);
    inp[0] = outp[1] = -1;
    j->in_fd = inp[1];
    j->out_fd = outp[0];
    inp[1] = outp[0] = -1;
    fcntl(j->in_fd, F_SETFL, fcntl(j->in_fd, F_GETFL) | O_NONBLOCK);
    j->started_ms = cm_exec_now_ms();
    j->started_wall = cm_wall_ms();
    j->deadline_ms = j->started_ms + timeout_ms;
    if (pthread_create(&j->thr, NULL, reader, j)) {
        kill_group(j);
        waitpid(j->pid, NULL, 0);
        cm_exec_unlock();
        FAIL(CM_ENOMEM, "exec: no thread for the command");
    }
    jobs[njobs++] = j;
    cm_exec_unlock();
    *out = j;
    j = NULL;
out:
    if (fa_ok) posix_spawn_file_actions_destroy(&fa);
    if (at_ok) posix_spawnattr_destroy(&at);
    for (int i = 0; i < 2; i++) {
        if (inp[i] >= 0) close(inp[i]);
        if (outp[i] >= 0) close(outp[i]);
    }
    if (j) {
        if (j->in_fd >= 0) close(j->in_fd);
        if (j->out_fd >= 0) close(j->out_fd);
        job_free(j);
    }
    return rc;
}

void cm_exec_jobs_shutdown(void)
{
    cm_exec_lock();
    while (njobs)
        cm_exec_remove_locked(jobs[njobs - 1]);
    cm_exec_unlock();
}
