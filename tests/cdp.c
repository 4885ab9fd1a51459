/*
 * cdp.c — the DevTools client of cdp.h: Chromium over --remote-debugging-pipe
 * (no port, no WebSocket: NUL-separated JSON on two pipes), one page in flat
 * session mode, its console and WebSocket traffic collected for the tests.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cdp.h"

extern char **environ;

#define CDP_MAX_MESSAGE (64u << 20) /* a screenshot of a tall page fits */

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

const char *cdp_find_chromium(void)
{
    const char *e = getenv("CLAWMEM_TEST_CHROMIUM");
    if (e && *e) return e;
    return access("/usr/bin/chromium", X_OK) == 0 ? "/usr/bin/chromium" : NULL;
}

/* A pipe whose ends are above fd 4 (so dup2 onto 3 and 4 never meets them). */
static bool high_pipe(int fds[2])
{
    int p[2];
    if (pipe2(p, O_CLOEXEC)) return false;
    for (int i = 0; i < 2; i++) {
        fds[i] = fcntl(p[i], F_DUPFD_CLOEXEC, 10);
        close(p[i]);
    }
    return fds[0] >= 0 && fds[1] >= 0;
}

/* json_string_value(o[k]), or dflt when absent. */
static const char *str_or(const json_t *o, const char *k, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : dflt;
}

static void add_problem(cdp *c, const char *kind, const char *text)
{
    char line[2048];
    snprintf(line, sizeof line, "%s: %s", kind, text ? text : "");
    json_array_append_new(c->problems, json_string(line));
}

/* Joins a console call's arguments into one line. */
static void console_problem(cdp *c, json_t *p)
{
    buf b = BUF_INIT;
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(p, "args"), i, a)
    {
        json_t *v = json_object_get(a, "value");
        const char *d = json_string_value(json_object_get(a, "description"));
        char *s = json_is_string(v) ? NULL : v ? json_dumps(v, JSON_ENCODE_ANY) : NULL;
        cm_buf_printf(&b, "%s%s", i ? " " : "",
                      json_is_string(v) ? json_string_value(v)
                      : s               ? s
                      : d               ? d
                                        : "?");
        free(s);
    }
    char kind[64];
    snprintf(kind, sizeof kind, "console.%s", str_or(p, "type", "log"));
    add_problem(c, kind, b.data);
    cm_buf_release(&b);
}

static void on_event(cdp *c, json_t *m)
{
    const char *method = json_string_value(json_object_get(m, "method"));
    const char *sid = json_string_value(json_object_get(m, "sessionId"));
    json_t *p = json_object_get(m, "params");
    if (!method || !sid || strcmp(sid, c->session)) return;
    if (!strcmp(method, "Runtime.consoleAPICalled")) {
        console_problem(c, p);
    } else if (!strcmp(method, "Runtime.exceptionThrown")) {
        json_t *d = json_object_get(p, "exceptionDetails");
        const char *desc =
            json_string_value(json_object_get(json_object_get(d, "exception"), "description"));
        add_problem(c, "exception", desc ? desc : json_string_value(json_object_get(d, "text")));
    } else if (!strcmp(method, "Log.entryAdded")) {
        json_t *e = json_object_get(p, "entry");
        char kind[96];
        snprintf(kind, sizeof kind, "log.%s (%s)", str_or(e, "level", "?"), str_or(e, "url", ""));
        add_problem(c, kind, json_string_value(json_object_get(e, "text")));
    } else if (!strcmp(method, "Network.webSocketFrameReceived")) {
        const char *d =
            json_string_value(json_object_get(json_object_get(p, "response"), "payloadData"));
        if (d) json_array_append_new(c->ws_frames, json_string(d));
    }
}

/* The next whole message (json_decref it), or NULL after timeout_ms, at EOF
 * or on a message that is not JSON. */
static json_t *read_message(cdp *c, int timeout_ms)
{
    long long end = now_ms() + timeout_ms;
    for (;;) {
        char *nul = c->in.len ? memchr(c->in.data, 0, c->in.len) : NULL;
        if (nul) {
            size_t n = (size_t)(nul - c->in.data);
            json_t *m = json_loadb(c->in.data, n, 0, NULL);
            memmove(c->in.data, nul + 1, c->in.len - n - 1);
            c->in.len -= n + 1;
            if (!m) snprintf(c->err, sizeof c->err, "a DevTools message that is not JSON");
            return m;
        }
        long long left = end - now_ms();
        if (left <= 0) {
            snprintf(c->err, sizeof c->err, "timed out");
            return NULL;
        }
        struct pollfd pf = {c->from, POLLIN, 0};
        int r = poll(&pf, 1, (int)left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;
        char tmp[65536];
        ssize_t k = read(c->from, tmp, sizeof tmp);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            snprintf(c->err, sizeof c->err, "chromium closed its DevTools pipe");
            return NULL;
        }
        if (c->in.len + (size_t)k > CDP_MAX_MESSAGE || cm_buf_add(&c->in, tmp, (size_t)k)) {
            snprintf(c->err, sizeof c->err, "a DevTools message over %u bytes", CDP_MAX_MESSAGE);
            return NULL;
        }
    }
}

static bool write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t k = write(fd, s, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        s += k;
        n -= (size_t)k;
    }
    return true;
}

json_t *cdp_call(cdp *c, bool page, const char *method, json_t *params, int timeout_ms)
{
    int id = ++c->next_id;
    json_t *req = json_pack("{s:i,s:s,s:o}", "id", id, "method", method, "params",
                            params ? params : json_object());
    if (page) json_object_set_new(req, "sessionId", json_string(c->session));
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    bool sent = text && write_all(c->to, text, strlen(text) + 1); /* with its NUL */
    free(text);
    if (!sent) {
        snprintf(c->err, sizeof c->err, "%s: could not write to chromium", method);
        return NULL;
    }
    long long end = now_ms() + timeout_ms;
    for (;;) {
        long long left = end - now_ms();
        json_t *m = left > 0 ? read_message(c, (int)left) : NULL;
        if (!m) {
            char why[200];
            snprintf(why, sizeof why, "%.199s", left > 0 ? c->err : "timed out");
            snprintf(c->err, sizeof c->err, "%.100s: %s", method, why);
            return NULL;
        }
        json_t *mid = json_object_get(m, "id");
        if (!mid) {
            on_event(c, m);
            json_decref(m);
            continue;
        }
        if (json_integer_value(mid) != id) {
            json_decref(m);
            continue;
        }
        json_t *res = json_object_get(m, "result");
        if (!res) {
            const char *msg =
                json_string_value(json_object_get(json_object_get(m, "error"), "message"));
            snprintf(c->err, sizeof c->err, "%s: %s", method, msg ? msg : "failed");
            json_decref(m);
            return NULL;
        }
        json_incref(res);
        json_decref(m);
        return res;
    }
}

json_t *cdp_eval(cdp *c, const char *expr, int timeout_ms)
{
    json_t *r = cdp_call(
        c, true, "Runtime.evaluate",
        json_pack("{s:s,s:b,s:b}", "expression", expr, "awaitPromise", 1, "returnByValue", 1),
        timeout_ms);
    if (!r) return NULL;
    json_t *ex = json_object_get(r, "exceptionDetails");
    if (ex) {
        const char *d =
            json_string_value(json_object_get(json_object_get(ex, "exception"), "description"));
        snprintf(c->err, sizeof c->err, "%s threw: %s", expr, d ? d : str_or(ex, "text", "?"));
        json_decref(r);
        return NULL;
    }
    json_t *v = json_object_get(json_object_get(r, "result"), "value");
    v = v ? json_incref(v) : json_null();
    json_decref(r);
    return v;
}

bool cdp_wait(cdp *c, const char *expr, int timeout_ms)
{
    long long end = now_ms() + timeout_ms;
    for (;;) {
        json_t *v = cdp_eval(c, expr, 5000);
        bool yes = json_is_true(v);
        json_decref(v);
        if (yes) return true;
        long long left = end - now_ms();
        if (left <= 0) break;
        /* wait for an event (or 100 ms) before looking again */
        struct pollfd pf = {c->from, POLLIN, 0};
        poll(&pf, 1, left < 100 ? (int)left : 100);
    }
    snprintf(c->err, sizeof c->err, "still false after %d ms: %s", timeout_ms, expr);
    return false;
}

bool cdp_goto(cdp *c, const char *url, int timeout_ms)
{
    json_t *r = cdp_call(c, true, "Page.navigate", json_pack("{s:s}", "url", url), timeout_ms);
    if (!r) return false;
    json_decref(r);
    return cdp_wait(c, "document.readyState === 'complete'", timeout_ms);
}

bool cdp_viewport(cdp *c, int width, int height)
{
    json_t *r = cdp_call(c, true, "Emulation.setDeviceMetricsOverride",
                         json_pack("{s:i,s:i,s:i,s:b}", "width", width, "height", height,
                                   "deviceScaleFactor", 1, "mobile", width < 600),
                         10000);
    json_decref(r);
    return r != NULL;
}

static int b64val(int ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+') return 62;
    if (ch == '/') return 63;
    return -1;
}

bool cdp_screenshot(cdp *c, const char *path)
{
    json_t *r =
        cdp_call(c, true, "Page.captureScreenshot", json_pack("{s:s}", "format", "png"), 30000);
    const char *d = json_string_value(json_object_get(r, "data"));
    bool ok = false;
    buf png = BUF_INIT;
    unsigned acc = 0;
    int bits = 0;
    for (const char *p = d; p && *p && *p != '='; p++) {
        int v = b64val((unsigned char)*p);
        if (v < 0) continue;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            char byte = (char)((acc >> bits) & 0xff);
            cm_buf_add(&png, &byte, 1);
        }
    }
    if (d && png.len > 8) {
        FILE *f = fopen(path, "wb");
        ok = f && fwrite(png.data, 1, png.len, f) == png.len;
        if (f && fclose(f)) ok = false;
        if (!ok) snprintf(c->err, sizeof c->err, "could not write %s", path);
    }
    cm_buf_release(&png);
    json_decref(r);
    return ok;
}

bool cdp_launch(cdp *c, const char *chromium, int width, int height)
{
    memset(c, 0, sizeof *c);
    c->pid = -1;
    c->to = c->from = -1;
    c->problems = json_array();
    c->ws_frames = json_array();
    char *dir = tmp_dir();
    char prof[4096], dataflag[4200], win[64], logpath[4200];
    snprintf(prof, sizeof prof, "%s/profile", dir);
    mkdir(prof, 0700);
    c->profile = cm_strdup(prof);
    snprintf(dataflag, sizeof dataflag, "--user-data-dir=%s", prof);
    snprintf(win, sizeof win, "--window-size=%d,%d", width, height);
    snprintf(logpath, sizeof logpath, "%s/chromium.log", dir);
    const char *argv[] = {chromium,
                          "--headless",
                          "--no-sandbox",
                          "--disable-gpu",
                          "--no-first-run",
                          "--no-default-browser-check",
                          "--disable-background-networking",
                          "--disable-component-update",
                          "--disable-sync",
                          "--disable-dev-shm-usage",
                          "--disable-breakpad",
                          "--mute-audio",
                          dataflag,
                          win,
                          "--remote-debugging-pipe",
                          "about:blank",
                          NULL};
    int cmd[2], ev[2];
    if (!high_pipe(cmd) || !high_pipe(ev)) {
        snprintf(c->err, sizeof c->err, "pipe: %s", strerror(errno));
        return false;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_adddup2(&fa, cmd[0], 3);
    posix_spawn_file_actions_adddup2(&fa, ev[1], 4);
    posix_spawnattr_t at; /* its own process group: its helpers end with it */
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    int rc = posix_spawn(&c->pid, chromium, &fa, &at, (char *const *)argv, environ);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    close(cmd[0]);
    close(ev[1]);
    c->to = cmd[1];
    c->from = ev[0];
    if (rc) {
        c->pid = -1;
        snprintf(c->err, sizeof c->err, "cannot run %s: %s", chromium, strerror(rc));
        return false;
    }
    json_t *t =
        cdp_call(c, false, "Target.createTarget", json_pack("{s:s}", "url", "about:blank"), 60000);
    const char *tid = json_string_value(json_object_get(t, "targetId"));
    json_t *a = tid ? cdp_call(c, false, "Target.attachToTarget",
                               json_pack("{s:s,s:b}", "targetId", tid, "flatten", 1), 20000)
                    : NULL;
    json_decref(t);
    const char *sid = json_string_value(json_object_get(a, "sessionId"));
    if (!sid) {
        json_decref(a);
        return false;
    }
    snprintf(c->session, sizeof c->session, "%s", sid);
    json_decref(a);
    static const char *const enable[] = {"Runtime.enable", "Log.enable", "Page.enable",
                                         "Network.enable"};
    for (size_t i = 0; i < sizeof enable / sizeof *enable; i++) {
        json_t *r = cdp_call(c, true, enable[i], NULL, 20000);
        if (!r) return false;
        json_decref(r);
    }
    return cdp_viewport(c, width, height);
}

void cdp_close(cdp *c)
{
    if (c->to >= 0) {
        json_t *r = c->pid > 0 ? cdp_call(c, false, "Browser.close", NULL, 5000) : NULL;
        json_decref(r);
        close(c->to);
    }
    if (c->from >= 0) close(c->from);
    if (c->pid > 0) {
        int st;
        long long end = now_ms() + 10000;
        bool gone = false;
        while (!gone && now_ms() < end) {
            pid_t w = waitpid(c->pid, &st, WNOHANG);
            gone = w == c->pid || (w < 0 && errno == ECHILD);
            if (!gone) {
                struct timespec ts = {0, 20 * 1000000};
                nanosleep(&ts, NULL);
            }
        }
        if (!gone) {
            kill(-c->pid, SIGKILL);
            waitpid(c->pid, &st, 0);
        }
    }
    cm_buf_release(&c->in);
    json_decref(c->problems);
    json_decref(c->ws_frames);
    free(c->profile);
    memset(c, 0, sizeof *c);
    c->to = c->from = -1;
}
