/*
 * qmd_proc.c — one run of the qmd command: posix_spawn into a process group
 * of its own with both streams piped, a deadline that kills the whole group,
 * and the group killed and the child reaped before returning, so that no
 * qmd (or the bun it runs) outlives the call.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "qmd.h"

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cm_backend_qmd_run_result_release(qmd_run_result *r)
{
    cm_buf_release(&r->out);
    cm_buf_release(&r->err);
    memset(r, 0, sizeof *r);
}

static void procs_set(qmd_procs *p, pid_t pid, bool on)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    if (on && p->closed) kill(-pid, SIGKILL);
    for (size_t i = 0; i < ARRAY_LEN(p->pids); i++) {
        if (on && p->pids[i] == 0) {
            p->pids[i] = pid;
            break;
        }
        if (!on && p->pids[i] == pid) {
            p->pids[i] = 0;
            break;
        }
    }
    pthread_mutex_unlock(&p->mu);
}

void cm_backend_qmd_kill_all(qmd_procs *p)
{
    pthread_mutex_lock(&p->mu);
    p->closed = true;
    for (size_t i = 0; i < ARRAY_LEN(p->pids); i++)
        if (p->pids[i] > 0) kill(-p->pids[i], SIGKILL); /* the run reaps it */
    pthread_mutex_unlock(&p->mu);
}

/* Appends what fd has to b (discard: read and drop); false at end of file. */
static bool drain(int fd, buf *b, bool discard, bool *too_much)
{
    char tmp[8192];
    ssize_t n = read(fd, tmp, sizeof tmp);
    if (n < 0) return errno == EINTR || errno == EAGAIN;
    if (n == 0) return false;
    if (discard) return true;
    if (b->len + (size_t)n > QMD_MAX_OUTPUT) {
        *too_much = true;
        return true;
    }
    if (cm_buf_add(b, tmp, (size_t)n)) *too_much = true;
    return true;
}

cm_rc cm_backend_qmd_run(const char *const *argv, char *const *envp, const char *cwd,
                         int64_t timeout_ms, bool discard_out, qmd_procs *procs,
                         qmd_run_result *res, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    pid_t pid = -1;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    bool fa_init = false, at_init = false;
    memset(res, 0, sizeof *res);
    res->status = -1;
    if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC))
        FAIL(CM_EIO, "qmd: pipe: %s", strerror(errno));
    if (posix_spawn_file_actions_init(&fa)) FAIL(CM_ENOMEM, "out of memory");
    fa_init = true;
    if (posix_spawnattr_init(&at)) FAIL(CM_ENOMEM, "out of memory");
    at_init = true;
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    if (cwd) posix_spawn_file_actions_addchdir_np(&fa, cwd);
    /* its own process group (killed whole), default signal handling */
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
    int e = strchr(argv[0], '/') ? posix_spawn(&pid, argv[0], &fa, &at, (char *const *)argv, envp)
                                 : posix_spawnp(&pid, argv[0], &fa, &at, (char *const *)argv, envp);
    if (e) {
        pid = -1;
        res->not_found = e == ENOENT || e == EACCES || e == ENOTDIR;
        FAIL(CM_EIO, "%s: cannot run: %s", argv[0], strerror(e));
    }
    procs_set(procs, pid, true);
    close(po[1]);
    close(pe[1]);
    po[1] = pe[1] = -1;
    int64_t deadline = timeout_ms > 0 ? mono_ms() + timeout_ms : 0;
    bool open_o = true, open_e = true;
    while (open_o || open_e) {
        struct pollfd pf[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
        int wait = -1;
        if (deadline) {
            int64_t left = deadline - mono_ms();
            if (left <= 0) {
                res->timed_out = true;
                break;
            }
            wait = (int)CM_MIN(left, 1000);
        }
        pf[0].fd = open_o ? po[0] : -1;
        pf[1].fd = open_e ? pe[0] : -1;
        int n = poll(pf, 2, wait);
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        if (open_o && (pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
            open_o = drain(po[0], &res->out, discard_out, &res->too_much);
        if (open_e && (pf[1].revents & (POLLIN | POLLHUP | POLLERR)))
            open_e = drain(pe[0], &res->err, false, &res->too_much);
    }
    /* Both streams closed (or the deadline passed): wait for the exit without
     * reaping, so that the group still exists to be killed, then reap. */
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        int w = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
        if (w == 0 && si.si_pid == pid) break;
        if (w < 0 && errno != EINTR) break;
        if (deadline && mono_ms() >= deadline) {
            res->timed_out = true;
            kill(-pid, SIGKILL);
            deadline = 0; /* killed: now it ends */
        }
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(-pid, SIGKILL); /* anything it left in its group */
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    procs_set(procs, pid, false);
    if (WIFEXITED(status) && !res->timed_out) res->status = WEXITSTATUS(status);
out:
    if (po[0] >= 0) close(po[0]);
    if (po[1] >= 0) close(po[1]);
    if (pe[0] >= 0) close(pe[0]);
    if (pe[1] >= 0) close(pe[1]);
    if (fa_init) posix_spawn_file_actions_destroy(&fa);
    if (at_init) posix_spawnattr_destroy(&at);
    return rc;
}

cm_rc cm_backend_qmd_run_failure(const qmd_run_result *r, const char *summary, int64_t timeout_ms,
                                 buf *out)
{
    if (r->timed_out)
        return cm_buf_printf(out, "%s timed out after %lldms", summary, (long long)timeout_ms);
    if (r->too_much)
        return cm_buf_printf(out, "%s produced too much output (limit %u chars)", summary,
                             QMD_MAX_OUTPUT);
    if (r->status == 0) return CM_OK;
    const buf *why = r->err.len ? &r->err : &r->out;
    size_t n = why->len;
    while (n && (why->data[n - 1] == '\n' || why->data[n - 1] == ' '))
        n--;
    if (r->status < 0)
        return cm_buf_printf(out, "%s was killed by a signal: %.*s", summary, (int)CM_MIN(n, 300),
                             n ? why->data : "");
    return cm_buf_printf(out, "%s failed (code %d): %.*s", summary, r->status, (int)CM_MIN(n, 300),
                         n ? why->data : "");
}
