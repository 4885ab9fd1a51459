/*
 * exec.c — the `exec` and `process` tools (exec.h): tools.exec parsed once,
 * the allowlist mode's word splitter, the child's environment and working
 * directory, the result texts of 2026.3.22. The children themselves are
 * exec_jobs.c's.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec_int.h"

extern char **environ;

static const char *const default_safe_bins[] = {"cut", "uniq", "head", "tail", "tr", "wc"};
static const char *const builtin_trusted[] = {"/bin", "/usr/bin"};

/* ---- config ------------------------------------------------------------------- */

static const json_t *agent_exec(const json_t *root, const char *agent_id)
{
    const json_t *list = json_object_get(json_object_get(root, "agents"), "list");
    size_t i;
    const json_t *a;
    json_array_foreach(list, i, a)
    {
        const char *id = json_string_value(json_object_get(a, "id"));
        if (id && agent_id && !strcasecmp(id, agent_id))
            return json_object_get(json_object_get(a, "tools"), "exec");
    }
    return NULL;
}

/* The agent's value of key, else the global one. */
static const json_t *pick(const json_t *mine, const json_t *global, const char *key)
{
    const json_t *v = json_object_get(mine, key);
    return v && !json_is_null(v) ? v : json_object_get(global, key);
}

static cm_rc push_str(char ***v, size_t *n, const char *s)
{
    char **nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv) return CM_ENOMEM;
    *v = nv;
    if (!(nv[*n] = cm_strdup(s))) return CM_ENOMEM;
    (*n)++;
    return CM_OK;
}

void cm_exec_cfg_release(exec_cfg *c)
{
    for (size_t i = 0; i < c->nsafe; i++)
        free(c->safe_bins[i]);
    for (size_t i = 0; i < c->ntrusted; i++)
        free(c->trusted_dirs[i]);
    free(c->safe_bins);
    free(c->trusted_dirs);
    memset(c, 0, sizeof *c);
}

cm_rc cm_exec_cfg_init(exec_cfg *c, const json_t *root, const char *agent_id)
{
    cm_rc rc = CM_OK;
    memset(c, 0, sizeof *c);
    const json_t *global = json_object_get(json_object_get(root, "tools"), "exec");
    const json_t *mine = agent_exec(root, agent_id);
    const char *host = json_string_value(pick(mine, global, "host"));
    const char *sec = json_string_value(pick(mine, global, "security"));
    const char *ask = json_string_value(pick(mine, global, "ask"));
    bool gateway = host && !strcmp(host, "gateway");
    /* the reference's default: deny on the sandbox host, allowlist on gateway */
    c->security = !gateway                       ? EXEC_SEC_DENY
                  : !sec                         ? EXEC_SEC_ALLOWLIST
                  : !strcmp(sec, "full")         ? EXEC_SEC_FULL
                  : !strcmp(sec, "allowlist")    ? EXEC_SEC_ALLOWLIST
                                                 : EXEC_SEC_DENY;
    c->enabled = c->security != EXEC_SEC_DENY && !(ask && !strcmp(ask, "always"));
    const json_t *t = pick(mine, global, "timeoutSec"), *y = pick(mine, global, "backgroundMs");
    c->timeout_ms = json_is_integer(t) && json_integer_value(t) > 0 &&
                            json_integer_value(t) < 7 * 86400
                        ? json_integer_value(t) * 1000
                        : EXEC_DEFAULT_TIMEOUT * 1000;
    c->yield_ms = json_is_integer(y) && json_integer_value(y) > 0
                      ? CM_MAX(10, CM_MIN(json_integer_value(y), EXEC_MAX_YIELD))
                      : EXEC_DEFAULT_YIELD;
    const json_t *bins = pick(mine, global, "safeBins");
    size_t i;
    const json_t *b;
    if (json_is_array(bins)) {
        json_array_foreach(bins, i, b)
        {
            const char *s = json_string_value(b);
            /* a bare program name only: a path is never a safe bin */
            if (s && *s && !strchr(s, '/') && strlen(s) < 128 &&
                (rc = push_str(&c->safe_bins, &c->nsafe, s)))
                goto out;
        }
    } else {
        for (i = 0; i < sizeof default_safe_bins / sizeof *default_safe_bins; i++)
            if ((rc = push_str(&c->safe_bins, &c->nsafe, default_safe_bins[i]))) goto out;
    }
    for (i = 0; i < 2; i++)
        if ((rc = push_str(&c->trusted_dirs, &c->ntrusted, builtin_trusted[i]))) goto out;
    json_array_foreach(pick(mine, global, "safeBinTrustedDirs"), i, b)
    {
        const char *s = json_string_value(b);
        if (s && s[0] == '/' && strlen(s) < PATH_MAX - 130 &&
            (rc = push_str(&c->trusted_dirs, &c->ntrusted, s)))
            goto out;
    }
out:
    if (rc) cm_exec_cfg_release(c);
    return rc;
}

/* ---- allowlist mode: words without a shell ------------------------------------- */

void cm_exec_argv_free(char **argv)
{
    for (size_t i = 0; argv && argv[i]; i++)
        free(argv[i]);
    free(argv);
}

cm_rc cm_exec_split_argv(const char *s, size_t len, char ***argv_out, size_t *argc, char *err,
                         size_t errlen)
{
    cm_rc rc = CM_OK;
    char **argv = NULL;
    size_t n = 0;
    buf w = BUF_INIT;
    bool in_word = false;
    *argv_out = NULL;
    *argc = 0;
    if (len > EXEC_MAX_COMMAND) FAIL(CM_EINVAL, "the command is longer than %d bytes", EXEC_MAX_COMMAND);
    for (size_t i = 0; i <= len; i++) {
        char ch = i < len ? s[i] : ' ';
        if (i < len && ch == 0) FAIL(CM_EINVAL, "the command holds a NUL byte");
        if (ch == ' ' || ch == '\t') {
            if (in_word) {
                if (n + 1 >= EXEC_MAX_ARGS) FAIL(CM_EINVAL, "more than %d words", EXEC_MAX_ARGS);
                char **nv = realloc(argv, (n + 2) * sizeof *nv);
                if (!nv) FAIL(CM_ENOMEM, "out of memory");
                argv = nv;
                if (!(argv[n] = cm_strdup(w.data))) FAIL(CM_ENOMEM, "out of memory");
                argv[++n] = NULL;
                cm_buf_reset(&w);
                in_word = false;
            }
            continue;
        }
        in_word = true;
        if (ch == '\'') {
            size_t k = i + 1;
            while (k < len && s[k] != '\'' && s[k])
                k++;
            if (k >= len || !s[k]) FAIL(CM_EINVAL, "an unclosed ' quote");
            CHECK(cm_buf_add(&w, s + i + 1, k - i - 1));
            i = k;
        } else if (ch == '"') {
            size_t k = i + 1;
            for (; k < len && s[k] != '"'; k++) {
                if (!s[k]) FAIL(CM_EINVAL, "the command holds a NUL byte");
                if (s[k] == '$' || s[k] == '`')
                    FAIL(CM_EINVAL, "%c inside double quotes needs a shell, which allowlist mode "
                                    "never starts", s[k]);
                if (s[k] == '\\' && k + 1 < len && (s[k + 1] == '"' || s[k + 1] == '\\')) k++;
                CHECK(cm_buf_addc(&w, s[k]));
            }
            if (k >= len) FAIL(CM_EINVAL, "an unclosed \" quote");
            i = k;
        } else if (ch == '\\') {
            if (i + 1 >= len || !s[i + 1] || s[i + 1] == '\n')
                FAIL(CM_EINVAL, "a backslash at the end of the command");
            CHECK(cm_buf_addc(&w, s[++i]));
        } else if (strchr("|&;<>()$`*?[]{}~!#\n\r", ch)) {
            FAIL(CM_EINVAL, "'%c' needs a shell, which allowlist mode never starts (one program "
                            "and its arguments only; quote it to pass it literally)",
                 ch == '\n' || ch == '\r' ? ' ' : ch);
        } else {
            CHECK(cm_buf_addc(&w, ch));
        }
    }
    if (!n) FAIL(CM_EINVAL, "the command is empty");
    *argv_out = argv;
    *argc = n;
    argv = NULL;
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_exec_argv_free(argv);
    cm_buf_release(&w);
    return rc;
}

/* The safe bin argv[0] in a trusted directory (path[PATH_MAX]), and no word a
 * path: stdin-only filters, as the reference means safe bins. */
static cm_rc allowlisted(const exec_cfg *c, char **argv, char *path, char *err, size_t errlen)
{
    bool listed = false;
    for (size_t i = 0; i < c->nsafe && !listed; i++)
        listed = !strcmp(c->safe_bins[i], argv[0]);
    if (!listed)
        return cm_seterr(err, errlen, CM_EPATH,
                         "exec denied: %.64s is not in tools.exec.safeBins (security allowlist)",
                         argv[0]);
    for (size_t i = 1; argv[i]; i++)
        if (strchr(argv[i], '/') || argv[i][0] == '~' || !strcmp(argv[i], ".."))
            return cm_seterr(err, errlen, CM_EPATH,
                             "exec denied: safe bins read stdin only; argument %zu is a path", i);
    for (size_t i = 0; i < c->ntrusted; i++) {
        struct stat st;
        snprintf(path, PATH_MAX, "%s/%s", c->trusted_dirs[i], argv[0]);
        if (!stat(path, &st) && S_ISREG(st.st_mode) && !access(path, X_OK)) return CM_OK;
    }
    return cm_seterr(err, errlen, CM_ENOTFOUND,
                     "exec denied: %.64s is not in a trusted directory (/bin, /usr/bin, "
                     "tools.exec.safeBinTrustedDirs)", argv[0]);
}

/* ---- environment and working directory ----------------------------------------- */

/* Whether a variable name may carry a secret (never passed from the call's env). */
static bool secret_name(const char *k)
{
    static const char *const words[] = {"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD",
                                        "CREDENTIAL", "AUTH", "COOKIE", "SESSION"};
    char up[256];
    size_t n = strlen(k);
    if (n >= sizeof up) return true;
    for (size_t i = 0; i <= n; i++)
        up[i] = (char)toupper((unsigned char)k[i]);
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (strstr(up, words[i])) return true;
    return false;
}

static bool passed_through(const char *entry)
{
    static const char *const keep[] = {"PATH=", "HOME=", "LANG=",  "TERM=",   "TZ=",
                                       "USER=", "LOGNAME=", "TMPDIR=", "LC_"};
    for (size_t i = 0; i < sizeof keep / sizeof *keep; i++)
        if (!strncmp(entry, keep[i], strlen(keep[i]))) return true;
    return false;
}

static cm_rc env_add(char ***v, size_t *n, const char *k, const char *val)
{
    buf b = BUF_INIT;
    cm_rc rc = cm_buf_printf(&b, "%s=%s", k, val);
    char **nv = rc ? NULL : realloc(*v, (*n + 2) * sizeof *nv);
    if (!nv) {
        cm_buf_release(&b);
        return CM_ENOMEM;
    }
    *v = nv;
    nv[(*n)++] = cm_buf_detach(&b);
    nv[*n] = NULL;
    return nv[*n - 1] ? CM_OK : CM_ENOMEM;
}

/* The child's environment: a few harmless variables of ours, the call's own. */
static cm_rc build_env(const json_t *extra, char ***out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    char **v = NULL;
    size_t n = 0;
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || !passed_through(*e)) continue;
        char k[128];
        if ((size_t)(eq - *e) >= sizeof k) continue;
        snprintf(k, sizeof k, "%.*s", (int)(eq - *e), *e);
        if (secret_name(k)) continue; /* by its name (LC_AUTH_TOKEN…), never its value */
        CHECK(env_add(&v, &n, k, eq + 1));
    }
    if (!getenv("PATH")) CHECK(env_add(&v, &n, "PATH", "/usr/local/bin:/usr/bin:/bin"));
    CHECK(env_add(&v, &n, "QUANTUMCLAW_SHELL", "exec"));
    if (extra && !json_is_object(extra)) FAIL(CM_EINVAL, "exec: env must be an object of strings");
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)extra, k, val)
    {
        const char *s = json_string_value(val);
        if (!s || strlen(s) != json_string_length(val))
            FAIL(CM_EINVAL, "exec: env.%.64s must be a string without NUL bytes", k);
        bool name_ok = *k && !isdigit((unsigned char)*k) && strlen(k) < 128;
        for (const char *p = k; *p && name_ok; p++)
            name_ok = isalnum((unsigned char)*p) || *p == '_';
        if (!name_ok) FAIL(CM_EINVAL, "exec: env has a bad variable name");
        if (!strcmp(k, "PATH") || !strncmp(k, "LD_", 3) || !strncmp(k, "DYLD_", 5))
            FAIL(CM_EINVAL, "exec: env.%s may not be overridden (binary hijacking)", k);
        if (secret_name(k)) continue; /* never a way to hand a secret to a child */
        CHECK(env_add(&v, &n, k, s));
    }
    *out = v;
    v = NULL;
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_exec_argv_free(v);
    return rc;
}

/* The working directory: the workspace, or workdir inside it (real paths). */
static cm_rc resolve_cwd(const char *workspace, const char *workdir, char *cwd, char *err,
                         size_t errlen)
{
    char ws[PATH_MAX], want[PATH_MAX];
    if (!realpath(workspace, ws))
        return cm_seterr(err, errlen, CM_ENOTFOUND, "exec: the workspace does not exist");
    if (!workdir || !*workdir) {
        snprintf(cwd, PATH_MAX, "%s", ws);
        return CM_OK;
    }
    if (strlen(workdir) >= PATH_MAX - strlen(ws) - 2)
        return cm_seterr(err, errlen, CM_EPATH, "exec: workdir is too long");
    char joined[PATH_MAX * 2];
    snprintf(joined, sizeof joined, "%s%s%s", workdir[0] == '/' ? "" : ws,
             workdir[0] == '/' ? "" : "/", workdir);
    size_t wl = strlen(ws);
    if (!realpath(joined, want))
        return cm_seterr(err, errlen, CM_ENOTFOUND, "exec: workdir does not exist");
    if (strncmp(want, ws, wl) || (want[wl] && want[wl] != '/'))
        return cm_seterr(err, errlen, CM_EPATH, "exec: workdir must be inside the workspace");
    snprintf(cwd, PATH_MAX, "%s", want);
    return CM_OK;
}

/* ---- exec ---------------------------------------------------------------------- */

static cm_rc scope_of(const exec_env *env, buf *s)
{
    return cm_buf_printf(s, "%s\n%s", env->agent_id ? env->agent_id : "main",
                         env->session_key ? env->session_key : "");
}

static double num_or(const json_t *v, double dflt)
{
    return json_is_number(v) ? json_number_value(v) : dflt;
}

/* A finished job's text: its output and how it ended (2026.3.22's wording). */
static cm_rc finished_text(const exec_job *j, int64_t timeout_ms, buf *out, bool *failed)
{
    size_t start = out->len;
    cm_rc rc = cm_exec_output_locked(j, out);
    *failed = j->timed_out || j->exit_signal || j->exit_code == 126 || j->exit_code == 127;
    if (rc) return rc;
    const char *sep = out->len > start ? "\n\n" : "";
    if (j->timed_out)
        return cm_buf_printf(out, "%sCommand timed out after %g seconds. If this command is expected "
                                  "to take longer, re-run with a higher timeout (e.g., exec "
                                  "timeout=300).", sep, (double)timeout_ms / 1000);
    if (j->exit_signal)
        return cm_buf_printf(out, "%sCommand aborted by signal %s", sep, sigabbrev_np(j->exit_signal)
                                                                             ? sigabbrev_np(j->exit_signal)
                                                                             : "?");
    if (j->exit_code == 127) return cm_buf_printf(out, "%sCommand not found", sep);
    if (j->exit_code == 126) return cm_buf_printf(out, "%sCommand not executable (permission denied)", sep);
    if (out->len == start) rc = cm_buf_adds(out, "(no output)");
    if (!rc && j->exit_code) rc = cm_buf_printf(out, "\n\n(Command exited with code %d)", j->exit_code);
    return rc;
}

cm_rc cm_tool_exec(const exec_env *env, const json_t *args, buf *out, bool *failed, char *err,
                   size_t errlen)
{
    cm_rc rc = CM_OK;
    char **argv = NULL, **envp = NULL, cwd[PATH_MAX], prog[PATH_MAX];
    size_t argc = 0;
    buf scope = BUF_INIT, warn = BUF_INIT;
    *failed = true;
    if (!env->cfg || !env->cfg->enabled || !env->workspace)
        FAIL(CM_EINVAL, "exec is disabled (tools.exec: host \"gateway\" with security "
                        "\"allowlist\" or \"full\" enables it)");
    const json_t *jc = json_object_get(args, "command");
    const char *command = json_string_value(jc);
    if (!command || !*command) FAIL(CM_EINVAL, "Provide a command to start.");
    size_t clen = json_string_length(jc);
    if (clen != strlen(command)) FAIL(CM_EINVAL, "exec: the command holds a NUL byte");
    if (clen > EXEC_MAX_COMMAND) FAIL(CM_ETOOBIG, "exec: the command is longer than %d bytes", EXEC_MAX_COMMAND);
    /* per-call host/security/ask may only tighten what the config allows */
    const char *sec = json_string_value(json_object_get(args, "security"));
    const char *host = json_string_value(json_object_get(args, "host"));
    if ((sec && !strcmp(sec, "deny")) || (host && strcmp(host, "gateway")))
        FAIL(CM_EINVAL, "exec denied: only host=gateway runs commands here");
    bool full = env->cfg->security == EXEC_SEC_FULL && !(sec && !strcmp(sec, "allowlist"));
    if (json_is_true(json_object_get(args, "elevated")))
        FAIL(CM_EINVAL, "elevated is not available right now (clawmem has no elevated mode)");
    const json_t *wd = json_object_get(args, "workdir");
    if (wd && !json_is_string(wd)) FAIL(CM_EINVAL, "exec: workdir must be a string");
    if (wd && json_string_length(wd) != strlen(json_string_value(wd)))
        FAIL(CM_EINVAL, "exec: workdir holds a NUL byte");
    CHECK(resolve_cwd(env->workspace, json_string_value(wd), cwd, err, errlen));
    CHECK(build_env(json_object_get(args, "env"), &envp, err, errlen));
    if (full) {
        static char sh[] = "/bin/sh", dash_c[] = "-c";
        argv = calloc(4, sizeof *argv);
        if (!argv || !(argv[0] = cm_strdup(sh)) || !(argv[1] = cm_strdup(dash_c)) ||
            !(argv[2] = cm_strdup(command)))
            FAIL(CM_ENOMEM, "out of memory");
    } else {
        CHECK(cm_exec_split_argv(command, clen, &argv, &argc, err, errlen));
        CHECK(allowlisted(env->cfg, argv, prog, err, errlen));
        free(argv[0]);
        if (!(argv[0] = cm_strdup(prog))) FAIL(CM_ENOMEM, "out of memory");
    }
    int64_t timeout_ms = env->cfg->timeout_ms;
    double t = num_or(json_object_get(args, "timeout"), 0);
    if (t > 0) timeout_ms = (int64_t)(CM_MIN(t, 7 * 86400.0) * 1000);
    if (timeout_ms < 1) timeout_ms = 1;
    bool bg = json_is_true(json_object_get(args, "background"));
    const json_t *y = json_object_get(args, "yieldMs");
    if (!env->allow_background && (bg || y))
        CHECK(cm_buf_adds(&warn, "Warning: background execution is disabled; running synchronously.\n\n"));
    int64_t yield = !env->allow_background ? 0
                    : bg                   ? -1
                                           : (int64_t)CM_MAX(10, CM_MIN(num_or(y, (double)env->cfg->yield_ms),
                                                                        (double)EXEC_MAX_YIELD));
    CHECK(scope_of(env, &scope));
    exec_job *j = NULL;
    CHECK(cm_exec_job_start(argv, envp, cwd, command, scope.data, timeout_ms, &j, err, errlen));
    cm_exec_lock();
    bool done = yield < 0 ? false : cm_exec_wait_locked(j, yield ? cm_exec_now_ms() + yield : 0);
    if (!done) { /* it goes on in the background */
        j->backgrounded = true;
        *failed = false;
        rc = cm_buf_printf(out, "%sCommand still running (session %s, pid %d). Use process "
                                "(list/poll/log/write/kill/clear/remove) for follow-up.",
                           warn.data, j->id, (int)j->pid);
        cm_exec_unlock();
        if (rc) FAIL(CM_ENOMEM, "out of memory");
        goto out;
    }
    rc = cm_buf_adds(out, warn.data);
    if (!rc) rc = finished_text(j, timeout_ms, out, failed);
    cm_exec_remove_locked(j);
    cm_exec_unlock();
    if (rc) FAIL(CM_ENOMEM, "out of memory");
out:
    cm_exec_argv_free(argv);
    cm_exec_argv_free(envp);
    cm_buf_release(&scope);
    cm_buf_release(&warn);
    return rc;
}

/* ---- process --------------------------------------------------------------------- */

/* write() to a pipe whose reader may be gone, without a SIGPIPE reaching the
 * process (library code may not assume the caller ignores it): the signal is
 * blocked in this thread and, if the write raised it, taken back. */
static ssize_t write_nosigpipe(int fd, const void *p, size_t n)
{
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigpending(&pending);
    bool was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    ssize_t w = write(fd, p, n);
    int e = errno;
    if (w < 0 && e == EPIPE && !was_pending) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return w;
}

static const char *status_of(const exec_job *j)
{
    if (!j->exited) return "running";
    return j->exit_code || j->exit_signal || j->timed_out ? "failed" : "completed";
}

static cm_rc ended_text(const exec_job *j, buf *out)
{
    if (j->exit_signal || j->timed_out)
        return cm_buf_printf(out, "\n\nProcess exited with signal %s.",
                             sigabbrev_np(j->exit_signal ? j->exit_signal : 9)
                                 ? sigabbrev_np(j->exit_signal ? j->exit_signal : 9)
                                 : "?");
    return cm_buf_printf(out, "\n\nProcess exited with code %d.", j->exit_code);
}

/* log: lines [offset, offset+limit) of the whole output; by default the last 200. */
static cm_rc log_text(const exec_job *j, const json_t *args, buf *out)
{
    buf all = BUF_INIT;
    cm_rc rc = cm_exec_output_locked(j, &all);
    size_t lines = 0;
    for (size_t i = 0; i < all.len; i++)
        if (all.data[i] == '\n') lines++;
    if (all.len && all.data[all.len - 1] != '\n') lines++;
    const json_t *o = json_object_get(args, "offset"), *l = json_object_get(args, "limit");
    bool dflt = !o && !l;
    double off = num_or(o, 0), lim = num_or(l, dflt ? 200 : 1e12);
    size_t first = dflt ? (lines > 200 ? lines - 200 : 0) : (size_t)CM_MAX(0.0, CM_MIN(off, 1e12));
    size_t count = (size_t)CM_MAX(0.0, CM_MIN(lim, 1e12));
    size_t line = 0, at = 0, start = all.len, end = all.len;
    for (; at <= all.len; at++) {
        if (line == first && start == all.len) start = at;
        if (line == first + count) {
            end = at ? at - 1 : 0;
            break;
        }
        if (at < all.len && all.data[at] == '\n') line++;
    }
    if (end > start && all.data[end - 1] == '\n') end--; /* lines joined, none after the last */
    if (!rc && start < end) rc = cm_buf_add(out, all.data + start, end - start);
    if (!rc && start >= end) rc = cm_buf_adds(out, "(no output yet)");
    if (!rc && dflt && lines > 200)
        rc = cm_buf_printf(out, "\n\n[showing last 200 of %zu lines; pass offset/limit to page]",
                           lines);
    cm_buf_release(&all);
    return rc;
}

static cm_rc list_text(const char *scope, buf *out)
{
    exec_job *v[EXEC_MAX_JOBS];
    size_t n = cm_exec_list_locked(scope, v, EXEC_MAX_JOBS);
    int64_t now = cm_exec_now_ms();
    cm_rc rc = CM_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        int64_t ms = (v[i]->exited ? v[i]->ended_ms : now) - v[i]->started_ms;
        rc = cm_buf_printf(out, "%s%s %-9s %llds :: %.120s", i ? "\n" : "", v[i]->id,
                           status_of(v[i]), (long long)(ms / 1000), v[i]->command);
    }
    if (!rc && !n) rc = cm_buf_adds(out, "No running or recent sessions.");
    return rc;
}

cm_rc cm_tool_process(const exec_env *env, const json_t *args, buf *out, bool *failed, char *err,
                      size_t errlen)
{
    cm_rc rc = CM_OK;
    buf scope = BUF_INIT;
    *failed = true;
    const char *action = json_string_value(json_object_get(args, "action"));
    const char *id = json_string_value(json_object_get(args, "sessionId"));
    if (!env->cfg || !env->cfg->enabled) FAIL(CM_EINVAL, "process is disabled (exec is off)");
    if (!action) FAIL(CM_EINVAL, "action is required");
    CHECK(scope_of(env, &scope));
    cm_exec_lock();
    if (!strcmp(action, "list")) {
        *failed = false;
        rc = list_text(scope.data, out);
        goto unlock;
    }
    if (!id) {
        rc = cm_buf_adds(out, "sessionId is required for this action.");
        goto unlock;
    }
    exec_job *j = cm_exec_find_locked(scope.data, id);
    if (!j) {
        rc = cm_buf_printf(out, "No session found for %.64s", id);
        goto unlock;
    }
    if (!strcmp(action, "poll")) {
        double w = num_or(json_object_get(args, "timeout"), 0);
        if (w > 0) cm_exec_wait_locked(j, cm_exec_now_ms() + (int64_t)CM_MIN(w, 120000.0));
        size_t start = out->len;
        rc = cm_exec_take_pending_locked(j, out);
        while (!rc && out->len > start && strchr(" \t\r\n", out->data[out->len - 1]))
            out->data[--out->len] = 0;
        if (!rc && out->len == start) rc = cm_buf_adds(out, "(no new output)");
        if (!rc) rc = j->exited ? ended_text(j, out) : cm_buf_adds(out, "\n\nProcess still running.");
        *failed = j->exited && strcmp(status_of(j), "completed");
    } else if (!strcmp(action, "log")) {
        *failed = false;
        rc = log_text(j, args, out);
    } else if (!strcmp(action, "write") || !strcmp(action, "submit")) {
        const json_t *d = json_object_get(args, "data");
        const char *data = action[0] == 's' ? "\r" : json_string_value(d);
        size_t dl = action[0] == 's' ? 1 : data ? json_string_length(d) : 0;
        if (j->exited || j->in_fd < 0) {
            rc = cm_buf_printf(out, "Session %s stdin is not writable.", j->id);
            goto unlock;
        }
        ssize_t w = dl ? write_nosigpipe(j->in_fd, data, dl) : 0;
        if (w < 0 || (size_t)w != dl) {
            rc = cm_buf_printf(out, "Session %s stdin is full or closed (%zd of %zu bytes written).",
                               j->id, w < 0 ? (ssize_t)0 : w, dl);
            goto unlock;
        }
        bool eof = json_is_true(json_object_get(args, "eof"));
        if (eof) {
            close(j->in_fd);
            j->in_fd = -1;
        }
        *failed = false;
        rc = cm_buf_printf(out, "Wrote %zu bytes to session %s%s.", dl, j->id,
                           eof ? " (stdin closed)" : "");
    } else if (!strcmp(action, "kill")) {
        cm_exec_kill_locked(j);
        *failed = false;
        rc = cm_buf_printf(out, "Killed session %s.", j->id);
    } else if (!strcmp(action, "clear") || !strcmp(action, "remove")) {
        if (action[0] == 'c' && !j->exited) {
            rc = cm_buf_printf(out, "Session %s is still running; kill or remove it.", j->id);
            goto unlock;
        }
        char gone[20];
        snprintf(gone, sizeof gone, "%s", j->id);
        cm_exec_remove_locked(j);
        *failed = false;
        rc = cm_buf_printf(out, "%s session %s.", action[0] == 'c' ? "Cleared" : "Removed", gone);
    } else {
        rc = cm_buf_printf(out, "Unknown action %.64s", action);
    }
unlock:
    cm_exec_unlock();
    if (rc) FAIL(CM_ENOMEM, "out of memory");
out:
    cm_buf_release(&scope);
    return rc;
}

/* ---- definitions ------------------------------------------------------------------ */

static const char exec_in[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"command\":{\"type\":\"string\",\"description\":\"Shell command to execute\"},"
    "\"workdir\":{\"type\":\"string\",\"description\":\"Working directory (defaults to cwd)\"},"
    "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},"
    "\"yieldMs\":{\"type\":\"number\",\"description\":\"Milliseconds to wait before "
    "backgrounding (default 10000)\"},"
    "\"background\":{\"type\":\"boolean\",\"description\":\"Run in background immediately\"},"
    "\"timeout\":{\"type\":\"number\",\"description\":\"Timeout in seconds (optional, kills "
    "process on expiry)\"},"
    "\"pty\":{\"type\":\"boolean\",\"description\":\"Run in a pseudo-terminal (PTY) when "
    "available (TTY-required CLIs, coding agents)\"},"
    "\"elevated\":{\"type\":\"boolean\",\"description\":\"Run on the host with elevated "
    "permissions (if allowed)\"},"
    "\"host\":{\"type\":\"string\",\"description\":\"Exec host (sandbox|gateway|node).\"},"
    "\"security\":{\"type\":\"string\",\"description\":\"Exec security mode "
    "(deny|allowlist|full).\"},"
    "\"ask\":{\"type\":\"string\",\"description\":\"Exec ask mode (off|on-miss|always).\"},"
    "\"node\":{\"type\":\"string\",\"description\":\"Node id/name for host=node.\"}},"
    "\"required\":[\"command\"]}";
static const char process_in[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"action\":{\"type\":\"string\",\"description\":\"Process action\"},"
    "\"sessionId\":{\"type\":\"string\",\"description\":\"Session id for actions other than "
    "list\"},"
    "\"data\":{\"type\":\"string\",\"description\":\"Data to write for write\"},"
    "\"eof\":{\"type\":\"boolean\",\"description\":\"Close stdin after write\"},"
    "\"offset\":{\"type\":\"number\",\"description\":\"Log offset\"},"
    "\"limit\":{\"type\":\"number\",\"description\":\"Log length\"},"
    "\"timeout\":{\"type\":\"number\",\"description\":\"For poll: wait up to this many "
    "milliseconds before returning\",\"minimum\":0}},"
    "\"required\":[\"action\"]}";

static const cm_tool_def defs[] = {
    {"exec", "exec",
     "Execute shell commands with background continuation. Use yieldMs/background to continue "
     "later via process tool. Use pty=true for TTY-required commands (terminal UIs, coding "
     "agents).",
     exec_in, NULL, 0},
    {"process", "process",
     "Manage running exec sessions: list, poll, log, write, submit, kill, clear, remove.",
     process_in, NULL, 0},
};

const cm_tool_def *cm_tool_exec_defs(size_t *n)
{
    *n = sizeof defs / sizeof defs[0];
    return defs;
}
