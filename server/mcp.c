/*
 * mcp.c — the MCP stdio server of mcp.h.
 *
 * Threads: the main thread reads requests, answers them with the "reader"
 * engine (searches see the last committed index state and never wait for a
 * sync), and alone writes to stdout. A second thread owns a "writer" engine
 * and runs cm_engine_watch (or one sync, with sync.watch off). Shutdown on end
 * of input or SIGTERM/SIGINT: the watcher is told through a pipe, a sync in
 * progress stops at the next file, and the process exits 0 — also while a
 * client that stopped reading keeps stdout full (writes wait in poll() beside
 * the signal pipe).
 *
 * The messages themselves are answered by mcp_rpc.c, which the HTTP server
 * (serve.c) shares: both protocol eras can be mixed on one process.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "first_sync.h"
#include "mcp.h"
#include "mcp_rpc.h"
/* the functions too easy to misuse are compile errors here too (macros only) */
#include "../src/base/banned.h"

static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    ssize_t w = write(sig_pipe[1], "x", 1);
    (void)w;
    errno = saved;
}

/* ---- output -------------------------------------------------------------- */

/* Writes n bytes to stdout without ever blocking where SIGTERM/SIGINT could
 * not interrupt it: each write waits in poll() beside the signal pipe, a pipe
 * gets at most PIPE_BUF bytes per write once it has room (which never blocks),
 * a socket is written with MSG_DONTWAIT, and the descriptor's flags are left
 * alone (they are shared with whoever else holds it). -1 when stdout is gone
 * or a signal asked us to stop. */
static int put_out(const char *s, size_t n)
{
    static int kind = -1; /* 0 other, 1 pipe, 2 socket */
    if (kind < 0) {
        struct stat st;
        kind = fstat(1, &st) ? 0 : S_ISFIFO(st.st_mode) ? 1 : S_ISSOCK(st.st_mode) ? 2 : 0;
    }
    size_t off = 0;
    while (off < n) {
        struct pollfd p[2] = {{1, POLLOUT, 0}, {sig_pipe[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (p[1].revents & POLLIN) return -1; /* SIGTERM or SIGINT */
        if (!(p[0].revents & POLLOUT)) {
            if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL)) return -1;
            continue;
        }
        size_t left = n - off;
        ssize_t w;
        if (kind == 2)
            w = send(1, s + off, left, MSG_DONTWAIT | MSG_NOSIGNAL);
        else
            w = write(1, s + off, kind == 1 && left > PIPE_BUF ? PIPE_BUF : left);
        if (w < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (w < 0) return -1;
        off += (size_t)w;
    }
    return 0;
}

static int send_json(json_t *msg)
{
    if (!msg) return 0;
    char *s = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (!s) return -1;
    int rc = put_out(s, strlen(s)) || put_out("\n", 1) ? -1 : 0;
    free(s);
    return rc;
}

/* Whether msg calls memory_search. */
static bool is_search(json_t *msg)
{
    const char *m = json_string_value(json_object_get(msg, "method"));
    const char *t = json_string_value(json_object_get(json_object_get(msg, "params"), "name"));
    return m && t && !strcmp(m, "tools/call") && !strcmp(t, "memory_search");
}

/* Handles one message (a line): a memory_search waits (bounded) for the
 * first sync first. Returns -1 when stdout is gone (or a signal interrupted
 * the answer). */
static int handle(mcp_rpc *s, first_sync *fs, int wait_ms, const char *line, size_t n)
{
    json_error_t je;
    char status[256];
    json_t *msg = json_loadb(line, n, JSON_ALLOW_NUL, &je);
    if (!msg) return send_json(mcp_rpc_parse_error(je.text));
    s->search_status = NULL;
    if (is_search(msg) && !mcp_first_sync_wait(fs, wait_ms, sig_pipe[0])) {
        mcp_first_sync_status(status, sizeof status, wait_ms);
        s->search_status = status;
    }
    int rc = send_json(mcp_rpc_answer(s, msg));
    s->search_status = NULL;
    json_decref(msg);
    return rc;
}

/* ---- background sync ------------------------------------------------------ */

typedef struct syncer {
    cm_options opt;
    mcp_opts mo;
    volatile int stop;
    int wake[2];
    first_sync first; /* searches wait for the first sync */
} syncer;

static void log_sync(void *ctx, cm_rc rc, const cm_sync_stats *st, const char *err)
{
    syncer *y = ctx;
    mcp_first_sync_done(&y->first);
    if (!y->opt.log) return;
    char msg[1200];
    if (rc)
        snprintf(msg, sizeof msg, "sync failed: %s", err);
    else
        snprintf(msg, sizeof msg, "synced %zu files: %zu indexed, %zu removed%s", st->files_seen,
                 st->files_indexed, st->files_removed, st->rebuilt ? " (rebuilt)" : "");
    y->opt.log(y->opt.log_ctx, rc ? CM_LOG_WARN : CM_LOG_INFO, msg);
}

static int stop_sync(void *ctx, const cm_progress *p)
{
    (void)p;
    return __atomic_load_n(&((const syncer *)ctx)->stop, __ATOMIC_ACQUIRE);
}

static void *sync_main(void *arg)
{
    syncer *y = arg;
    char err[CM_ERR_SIZE];
    cm_engine *e = NULL;
    /* The server goes on without its background sync: a warning. */
    if (cm_engine_open(&y->opt, &e, err, sizeof err)) {
        if (y->opt.log) y->opt.log(y->opt.log_ctx, CM_LOG_WARN, err);
        mcp_first_sync_done(&y->first);
        return NULL;
    }
    if (y->mo.watch) {
        cm_watch_opts wo = {&y->stop, y->wake[0], y->mo.debounce_ms, log_sync, y, 0};
        if (cm_engine_watch(e, &wo, err, sizeof err) && y->opt.log)
            y->opt.log(y->opt.log_ctx, CM_LOG_WARN, err);
    } else {
        cm_sync_stats st;
        cm_rc rc = cm_engine_sync(e, 0, stop_sync, y, &st, err, sizeof err);
        if (rc != CM_ECANCELED) log_sync(y, rc, &st, err);
    }
    cm_engine_close(e);
    mcp_first_sync_done(&y->first);
    return NULL;
}

/* ---- main loop ------------------------------------------------------------ */

int mcp_serve(const cm_options *opt, const mcp_opts *mo)
{
    int status = 0;
    char err[CM_ERR_SIZE];
    mcp_rpc s = {0};
    syncer y = {.opt = *opt, .mo = *mo, .wake = {-1, -1}};
    int wait_ms = mo->first_sync_wait_ms < 0 ? FIRST_SYNC_WAIT_MS : mo->first_sync_wait_ms;
    pthread_t tid;
    bool thread = false;
    char *in = NULL;
    mcp_first_sync_init(&y.first);
    if (cm_engine_open(opt, &s.engine, err, sizeof err)) {
        if (opt->log) opt->log(opt->log_ctx, CM_LOG_ERROR, err);
        mcp_first_sync_release(&y.first);
        return 1;
    }
    /* memory_write is listed only when it is enabled. */
    s.can_write = cm_engine_writable(s.engine) != 0;
    s.session_key = mo->session_key;
    s.tools = mcp_rpc_tools(s.can_write);

    if (y.mo.watch < 0) { /* sync.watch decides */
        char *js = NULL;
        y.mo.watch = 1;
        if (cm_engine_status(s.engine, 0, &js, err, sizeof err) == CM_OK) {
            json_t *st = json_loads(js, 0, NULL);
            if (json_is_false(json_object_get(json_object_get(st, "sync"), "watch")))
                y.mo.watch = 0;
            json_decref(st);
        }
        cm_free(js);
    }
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) || pipe2(y.wake, O_CLOEXEC)) {
        status = 1;
        goto out;
    }
    /* No SA_RESTART: a signal interrupts whatever the main thread waits in;
     * the sync thread blocks both, so they are delivered to the main thread. */
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    thread = pthread_create(&tid, NULL, sync_main, &y) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!thread) mcp_first_sync_done(&y.first); /* no sync will come */

    size_t cap = 64 * 1024, len = 0;
    bool skipping = false; /* discarding the rest of an oversized message */
    in = malloc(cap);
    if (!in) {
        status = 1;
        goto out;
    }
    for (;;) {
        struct pollfd p[2] = {{0, POLLIN, 0}, {sig_pipe[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (p[1].revents & POLLIN) break;   /* SIGTERM or SIGINT */
        if (p[0].revents & POLLNVAL) break; /* no standard input at all */
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (len == cap) {
            size_t ncap = cap * 2 > MCP_MAX_MESSAGE + 1 ? MCP_MAX_MESSAGE + 1 : cap * 2;
            char *nb = ncap > cap ? realloc(in, ncap) : NULL;
            if (nb) {
                in = nb;
                cap = ncap;
            }
        }
        ssize_t r = read(0, in + len, cap - len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { /* end of input: a last message may lack its newline */
            if (len && !skipping) handle(&s, &y.first, wait_ms, in, len);
            break;
        }
        len += (size_t)r;
        size_t start = 0;
        for (;;) {
            char *nl = memchr(in + start, '\n', len - start);
            if (!nl) break;
            size_t n = (size_t)(nl - (in + start));
            if (skipping) {
                skipping = false;
            } else if (n > 0 && !(n == 1 && in[start] == '\r')) {
                if (handle(&s, &y.first, wait_ms, in + start, n) < 0) goto out;
            }
            start += n + 1;
        }
        memmove(in, in + start, len - start);
        len -= start;
        if (len >= MCP_MAX_MESSAGE) { /* too long and still no newline */
            if (!skipping && send_json(mcp_rpc_error(NULL, MCP_INVALID_REQUEST,
                                                     "Invalid Request: message too large")) < 0)
                goto out;
            skipping = true;
            len = 0;
        }
    }
out:
    __atomic_store_n(&y.stop, 1, __ATOMIC_RELEASE);
    if (y.wake[1] >= 0) {
        ssize_t w = write(y.wake[1], "x", 1);
        (void)w;
    }
    if (thread) pthread_join(tid, NULL);
    free(in);
    json_decref(s.tools);
    cm_engine_close(s.engine);
    for (int i = 0; i < 2; i++) {
        if (sig_pipe[i] >= 0) close(sig_pipe[i]);
        if (y.wake[i] >= 0) close(y.wake[i]);
        sig_pipe[i] = -1;
    }
    mcp_first_sync_release(&y.first);
    return status;
}
