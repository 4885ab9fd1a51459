/*
 * test_exec.c — the agent's exec and process tools (src/tools/exec.c,
 * exec_jobs.c): off unless tools.exec enables it, never for an untrusted
 * sender, hostile commands (huge or binary output, timeouts, a fork tree
 * killed with its group, NUL bytes, workdirs outside the workspace, secrets
 * in the environment), allowlist mode without a shell, and a background
 * job's life through process.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/agent/session_turn.h"
#include "../src/gateway/core/access.h"
#include "../src/tools/exec.h"
#include "fakeserver.h"
#include "test.h"

static exec_cfg cfg_of(const char *json)
{
    exec_cfg c;
    json_t *root = json_loads(json, 0, NULL);
    if (!root || cm_exec_cfg_init(&c, root, "main"))
        test_fail(__FILE__, __LINE__, "config: %s", json);
    json_decref(root);
    return c;
}

static const char FULL[] = "{\"tools\":{\"exec\":{\"host\":\"gateway\",\"security\":\"full\"}}}";

/* Runs exec (or process) with args in ws; "ERR: …" or "FAILED: …" prefixes
 * mark an error and a command's own failure. */
static char *run_tool(cm_rc (*fn)(const exec_env *, const json_t *, buf *, bool *, char *, size_t),
                      const exec_env *env, json_t *args)
{
    buf out = BUF_INIT;
    char err[1024] = "";
    bool failed = false;
    cm_rc rc = fn(env, args, &out, &failed, err, sizeof err);
    json_decref(args);
    buf r = BUF_INIT;
    if (rc) (void)!cm_buf_printf(&r, "ERR: %s", err);
    else (void)!cm_buf_printf(&r, "%s%s", failed ? "FAILED: " : "", out.data);
    cm_buf_release(&out);
    return cm_buf_detach(&r);
}

static char *ex(const exec_env *env, const char *args_json)
{
    json_t *a = json_loads(args_json, 0, NULL);
    if (!a) test_fail(__FILE__, __LINE__, "bad JSON: %s", args_json);
    return run_tool(cm_tool_exec, env, a);
}

static char *pr(const exec_env *env, const char *args_json)
{
    json_t *a = json_loads(args_json, 0, NULL);
    if (!a) test_fail(__FILE__, __LINE__, "bad JSON: %s", args_json);
    return run_tool(cm_tool_process, env, a);
}

/* The process group id a command printed as "PG=<n>". */
static pid_t pg_of(const char *out)
{
    const char *p = out ? strstr(out, "PG=") : NULL;
    return p ? (pid_t)strtol(p + 3, NULL, 10) : 0;
}

/* No process is left in group pg (give the kernel a moment to reap). */
static bool group_gone(pid_t pg)
{
    for (int i = 0; i < 200; i++) {
        if (kill(-pg, 0) == -1 && errno == ESRCH) return true;
        usleep(10000);
    }
    return false;
}

TEST(exec_config_is_off_unless_enabled)
{
    static const struct {
        const char *json;
        bool on;
        exec_security sec;
    } cases[] = {
        {"{}", false, EXEC_SEC_DENY},
        /* the reference's default host is the sandbox, which clawmem does not run */
        {"{\"tools\":{\"exec\":{\"security\":\"full\"}}}", false, EXEC_SEC_DENY},
        {"{\"tools\":{\"exec\":{\"host\":\"sandbox\",\"security\":\"full\"}}}", false,
         EXEC_SEC_DENY},
        {"{\"tools\":{\"exec\":{\"host\":\"node\",\"security\":\"full\"}}}", false, EXEC_SEC_DENY},
        {"{\"tools\":{\"exec\":{\"host\":\"gateway\"}}}", true, EXEC_SEC_ALLOWLIST},
        {"{\"tools\":{\"exec\":{\"host\":\"gateway\",\"security\":\"deny\"}}}", false,
         EXEC_SEC_DENY},
        {"{\"tools\":{\"exec\":{\"host\":\"gateway\",\"security\":\"bogus\"}}}", false,
         EXEC_SEC_DENY},
        {FULL, true, EXEC_SEC_FULL},
        {"{\"tools\":{\"exec\":{\"host\":\"gateway\",\"security\":\"full\",\"ask\":\"always\"}}}",
         false, EXEC_SEC_FULL},
        /* the agent's own section wins key by key */
        {"{\"tools\":{\"exec\":{\"host\":\"gateway\",\"security\":\"full\"}},\"agents\":{\"list\":"
         "[{\"id\":\"main\",\"tools\":{\"exec\":{\"security\":\"deny\"}}}]}}",
         false, EXEC_SEC_DENY},
        {"{\"agents\":{\"list\":[{\"id\":\"main\",\"tools\":{\"exec\":{\"host\":\"gateway\","
         "\"security\":\"full\"}}}]}}",
         true, EXEC_SEC_FULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        exec_cfg c = cfg_of(cases[i].json);
        if (c.enabled != cases[i].on || c.security != cases[i].sec)
            test_fail(__FILE__, __LINE__, "case %zu: %s", i, cases[i].json);
        cm_exec_cfg_release(&c);
    }
    exec_cfg c = cfg_of("{}");
    EXPECT_INT(c.timeout_ms, 1800 * 1000);
    EXPECT_INT(c.yield_ms, 10000);
    EXPECT_INT(c.nsafe, 6); /* cut uniq head tail tr wc */
    exec_env env = {&c, "/tmp", "main", "agent:main:main", true};
    char *r = ex(&env, "{\"command\":\"echo hi\"}");
    EXPECT_CONTAINS(r, "ERR: exec is disabled");
    free(r);
    cm_exec_cfg_release(&c);
}

TEST(exec_runs_in_the_workspace_with_the_reference_texts)
{
    char *d = tmp_dir();
    char *ws = realpath(path_in(d, "ws"), NULL);
    if (!ws) {
        write_file(d, "ws/a.txt", "A\n");
        ws = realpath(path_in(d, "ws"), NULL);
    }
    mkdir(path_in(d, "ws/sub"), 0755);
    exec_cfg c = cfg_of(FULL);
    exec_env env = {&c, ws, "main", "agent:main:main", true};
    char *r = ex(&env, "{\"command\":\"pwd\"}");
    buf want = BUF_INIT;
    EXPECT_INT(cm_buf_printf(&want, "%s\n", ws), CM_OK);
    EXPECT_STR(r, want.data);
    free(r);
    r = ex(&env, "{\"command\":\"pwd\",\"workdir\":\"sub\"}");
    EXPECT_CONTAINS(r, "/sub\n");
    free(r);
    r = ex(&env, "{\"command\":\"true\"}");
    EXPECT_STR(r, "(no output)");
    free(r);
    r = ex(&env, "{\"command\":\"echo out; echo err >&2; exit 3\"}");
    EXPECT_STR(r, "out\nerr\n\n\n(Command exited with code 3)");
    free(r);
    r = ex(&env, "{\"command\":\"no-such-program-xyz\"}");
    EXPECT_CONTAINS(r, "FAILED: ");
    EXPECT_CONTAINS(r, "Command not found");
    free(r);
    /* stdout and stderr in one stream, in order; QUANTUMCLAW_SHELL set */
    r = ex(&env, "{\"command\":\"echo $QUANTUMCLAW_SHELL\"}");
    EXPECT_STR(r, "exec\n");
    free(r);
    cm_buf_release(&want);
    cm_exec_cfg_release(&c);
    free(ws);
}

TEST(exec_hostile_arguments_are_refused)
{
    char *d = tmp_dir();
    write_file(d, "ws/a.txt", "A\n");
    write_file(d, "outside/s.txt", "S\n");
    EXPECT_INT(symlink(path_in(d, "outside"), path_in(d, "ws/out")), 0);
    char *ws = realpath(path_in(d, "ws"), NULL);
    exec_cfg c = cfg_of(FULL);
    exec_env env = {&c, ws, "main", "agent:main:main", true};
    const char *bad[][2] = {
        {"{}", "Provide a command to start."},
        {"{\"command\":\"\"}", "Provide a command to start."},
        {"{\"command\":\"pwd\",\"workdir\":\"..\"}", "inside the workspace"},
        {"{\"command\":\"pwd\",\"workdir\":\"/\"}", "inside the workspace"},
        {"{\"command\":\"pwd\",\"workdir\":\"out\"}", "inside the workspace"}, /* a link out */
        {"{\"command\":\"pwd\",\"workdir\":\"nope\"}", "does not exist"},
        {"{\"command\":\"pwd\",\"workdir\":5}", "workdir must be a string"},
        {"{\"command\":\"pwd\",\"env\":{\"PATH\":\"/tmp\"}}", "may not be overridden"},
        {"{\"command\":\"pwd\",\"env\":{\"LD_PRELOAD\":\"/tmp/x.so\"}}", "may not be overridden"},
        {"{\"command\":\"pwd\",\"env\":{\"A=B\":\"x\"}}", "bad variable name"},
        {"{\"command\":\"pwd\",\"env\":{\"A\":1}}", "must be a string"},
        {"{\"command\":\"pwd\",\"env\":[]}", "env must be an object"},
        {"{\"command\":\"pwd\",\"host\":\"node\"}", "only host=gateway"},
        {"{\"command\":\"pwd\",\"security\":\"deny\"}", "only host=gateway"},
        {"{\"command\":\"pwd\",\"elevated\":true}", "elevated is not available"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *r = ex(&env, bad[i][0]);
        if (strncmp(r, "ERR: ", 5) || !strstr(r, bad[i][1]))
            test_fail(__FILE__, __LINE__, "%s gave %s", bad[i][0], r);
        free(r);
    }
    /* NUL bytes inside the command, the workdir or an env value */
    json_t *a = json_object();
    json_object_set_new(a, "command", json_stringn("echo a\0; rm -rf x", 17));
    char *r = run_tool(cm_tool_exec, &env, a);
    EXPECT_CONTAINS(r, "ERR: exec: the command holds a NUL byte");
    free(r);
    a = json_pack("{s:s,s:o}", "command", "pwd", "workdir", json_stringn("sub\0/..", 7));
    r = run_tool(cm_tool_exec, &env, a);
    EXPECT_CONTAINS(r, "NUL byte");
    free(r);
    a = json_pack("{s:s,s:{s:o}}", "command", "pwd", "env", "X", json_stringn("a\0b", 3));
    r = run_tool(cm_tool_exec, &env, a);
    EXPECT_CONTAINS(r, "without NUL bytes");
    free(r);
    /* a command larger than the cap */
    buf big = BUF_INIT;
    EXPECT_INT(cm_buf_adds(&big, "echo "), CM_OK);
    for (int i = 0; i < EXEC_MAX_COMMAND; i++)
        EXPECT_INT(cm_buf_addc(&big, 'x'), CM_OK);
    a = json_pack("{s:s}", "command", big.data);
    r = run_tool(cm_tool_exec, &env, a);
    EXPECT_CONTAINS(r, "longer than");
    free(r);
    cm_buf_release(&big);
    cm_exec_cfg_release(&c);
    free(ws);
}

TEST(exec_environment_carries_no_secret)
{
    char *d = tmp_dir();
    write_file(d, "ws/a.txt", "A\n");
    char *ws = realpath(path_in(d, "ws"), NULL);
    setenv("OPENAI_API_KEY", "sk-leak-openai-0001", 1);
    setenv("TELEGRAM_BOT_TOKEN", "123:leak-telegram-0002", 1);
    setenv("QUANTUMCLAW_GATEWAY_TOKEN", "leak-gateway-0003", 1);
    setenv("HOME_SECRET_PASSWORD", "leak-password-0004", 1);
    char *tz = getenv("TZ") ? cm_strdup(getenv("TZ")) : NULL;
    setenv("TZ", "Monkey/Keyboard", 1); /* a harmless name: its value is never judged */
    exec_cfg c = cfg_of(FULL);
    exec_env env = {&c, ws, "main", "agent:main:main", true};
    /* the model's own variables pass, secret-looking names do not */
    char *r = ex(&env, "{\"command\":\"env; cat /proc/self/environ | tr '\\\\000' '\\\\n'\","
                       "\"env\":{\"GREETING\":\"hello\",\"MY_API_KEY\":\"leak-model-0005\"}}");
    EXPECT(strstr(r, "leak-") == NULL);
    EXPECT_CONTAINS(r, "GREETING=hello");
    EXPECT_CONTAINS(r, "PATH=");
    EXPECT_CONTAINS(r, "QUANTUMCLAW_SHELL=exec");
    EXPECT_CONTAINS(r, "TZ=Monkey/Keyboard");
    free(r);
    if (tz) setenv("TZ", tz, 1);
    else unsetenv("TZ");
    free(tz);
    unsetenv("OPENAI_API_KEY");
    unsetenv("TELEGRAM_BOT_TOKEN");
    unsetenv("QUANTUMCLAW_GATEWAY_TOKEN");
    unsetenv("HOME_SECRET_PASSWORD");
    cm_exec_cfg_release(&c);
    free(ws);
}

TEST(exec_output_is_capped_head_and_tail)
{
    char *d = tmp_dir();
    write_file(d, "ws/a.txt", "A\n");
    char *ws = realpath(path_in(d, "ws"), NULL);
    exec_cfg c = cfg_of(FULL);
    exec_env env = {&c, ws, "main", "agent:main:main", true};
    /* 8 MB of output: the first and last 100,000 bytes kept, a marker between */
    char *r = ex(&env, "{\"command\":\"echo FIRST; head -c 8000000 /dev/zero | tr '\\\\000' "
                       "x; echo; echo LAST\"}");
    EXPECT(strlen(r) < EXEC_MAX_OUTPUT + 200);
    EXPECT(!strncmp(r, "FIRST\nxxx", 9));
    EXPECT_CONTAINS(r, "bytes of output left out");
    size_t n = strlen(r);
    EXPECT(n > 6 && !strcmp(r + n - 6, "\nLAST\n"));
    free(r);
    /* NUL and invalid bytes become U+FFFD: the result is valid UTF-8 text */
    r = ex(&env, "{\"command\":\"printf 'a\\\\000b\\\\377c'\"}");
    EXPECT_STR(r, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c");
    free(r);
    cm_exec_cfg_release(&c);
    free(ws);
}

TEST(exec_timeout_kills_the_whole_group)
{
    char *d = tmp_dir();
    write_file(d, "ws/a.txt", "A\n");
    char *ws = realpath(path_in(d, "ws"), NULL);
    exec_cfg c = cfg_of(FULL);
    exec_env env = {&c, ws, "main", "agent:main:main", false};
    int64_t t0 = cm_wall_ms();
    char *r = ex(&env, "{\"command\":\"echo PG=$$; sleep 30 & sleep 30 & sleep 30\","
                       "\"timeout\":0.5}");
    EXPECT(cm_wall_ms() - t0 < 10000);
    EXPECT_CONTAINS(r, "FAILED: PG=");
    EXPECT_CONTAINS(r, "Command timed out after 0.5 seconds");
    pid_t pg = pg_of(r);
    EXPECT(pg > 1);
    if (pg > 1) EXPECT(group_gone(pg));
    free(r);
    /* a fork tree (2^6 processes) dies with its group at the timeout */
    t0 = cm_wall_ms();
    r = ex(&env, "{\"command\":\"echo PG=$$; f(){ if [ $1 -gt 0 ]; then f $(($1-1)) & "
                 "f $(($1-1)) & fi; sleep 60; }; f 5\",\"timeout\":1}");
    EXPECT(cm_wall_ms() - t0 < 15000);
    EXPECT_CONTAINS(r, "timed out");
    pg = pg_of(r);
    EXPECT(pg > 1);
    if (pg > 1) EXPECT(group_gone(pg));
    free(r);
    /* what a command leaves running in the background dies when it exits */
    r = ex(&env, "{\"command\":\"echo PG=$$; sleep 60 & echo left\"}");
    EXPECT_CONTAINS(r, "left");
    pg = pg_of(r);
    if (pg > 1) EXPECT(group_gone(pg));
    free(r);
    cm_exec_cfg_release(&c);
    free(ws);
}

TEST(exec_split_argv_rejects_what_needs_a_shell)
{
    char err[256];
    char **v;
    size_t n;
    EXPECT_INT(cm_exec_split_argv("tr  'a;b' \"c\\\"d\" e\\ f", 21, &v, &n, err, sizeof err),
               CM_OK);
    EXPECT_INT(n, 4);
    if (n == 4) {
        EXPECT_STR(v[0], "tr");
        EXPECT_STR(v[1], "a;b");
        EXPECT_STR(v[2], "c\"d");
        EXPECT_STR(v[3], "e f");
        EXPECT(v[4] == NULL);
    }
    cm_exec_argv_free(v);
    const char *bad[] = {"wc; rm -rf /", "wc | sh",  "wc && id",  "wc `id`",  "wc $(id)",
                         "wc \"$HOME\"", "wc > x",   "wc < /etc", "wc 'open", "wc \"open",
                         "wc\nid",       "wc *",     "wc ~",      "",         "   ",
                         "wc \\"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (cm_exec_split_argv(bad[i], strlen(bad[i]), &v, &n, err, sizeof err) != CM_EINVAL)
            test_fail(__FILE__, __LINE__, "accepted: %s", bad[i]);
        EXPECT(v == NULL);
    }
    EXPECT_INT(cm_exec_split_argv("wc\0id", 5, &v, &n, err, sizeof err), CM_EINVAL);
    EXPECT_CONTAINS(err, "NUL");
}

TEST(exec_allowlist_runs_safe_bins_without_a_shell)
{
    char *d = tmp_dir();
    write_file(d, "ws/a.txt", "A\n");
    char *ws = realpath(path_in(d, "ws"), NULL);
    exec_cfg c = cfg_of("{\"tools\":{\"exec\":{\"host\":\"gateway\"}}}");
    EXPECT(c.enabled && c.security == EXEC_SEC_ALLOWLIST);
    exec_env env = {&c, ws, "main", "agent:main:main", true};
    const char *denied[][2] = {
        {"{\"command\":\"cat a.txt\"}", "not in tools.exec.safeBins"},
        {"{\"command\":\"sh -c id\"}", "not in tools.exec.safeBins"},
        {"{\"command\":\"/usr/bin/wc -c\"}", "not in tools.exec.safeBins"},
        {"{\"command\":\"head /etc/passwd\"}", "is a path"},
        {"{\"command\":\"head ../x\"}", "is a path"},
        {"{\"command\":\"wc -c; id\"}", "needs a shell"},
        {"{\"command\":\"wc $(id)\"}", "needs a shell"},
    };
    for (size_t i = 0; i < sizeof denied / sizeof *denied; i++) {
        char *r = ex(&env, denied[i][0]);
        if (strncmp(r, "ERR: ", 5) || !strstr(r, denied[i][1]))
            test_fail(__FILE__, __LINE__, "%s gave %s", denied[i][0], r);
        free(r);
    }
    /* a per-call "full" does not widen the config's allowlist */
    char *r = ex(&env, "{\"command\":\"cat a.txt\",\"security\":\"full\"}");
    EXPECT_CONTAINS(r, "ERR: ");
    free(r);
    /* a safe bin reads what process writes to its stdin */
    r = ex(&env, "{\"command\":\"wc -c\",\"background\":true}");
    EXPECT_CONTAINS(r, "Command still running (session ");
    char id[32] = "";
    const char *s = strstr(r, "(session ");
    if (s) sscanf(s + 9, "%31[0-9a-f]", id);
    free(r);
    char args[256];
    snprintf(args, sizeof args, "{\"action\":\"write\",\"sessionId\":\"%s\",\"data\":\"hello\","
             "\"eof\":true}", id);
    r = pr(&env, args);
    char want[128];
    snprintf(want, sizeof want, "Wrote 5 bytes to session %s (stdin closed).", id);
    EXPECT_STR(r, want);
    free(r);
    snprintf(args, sizeof args, "{\"action\":\"poll\",\"sessionId\":\"%s\",\"timeout\":10000}",
             id);
    r = pr(&env, args);
    EXPECT_STR(r, "5\n\nProcess exited with code 0.");
    free(r);
    cm_exec_jobs_shutdown();
    cm_exec_cfg_release(&c);
    free(ws);
}

TEST(exec_process_background_lifecycle)
{
    char *d = tmp_dir();
    write_file(d, "ws/a.txt", "A\n");
    char *ws = realpath(path_in(d, "ws"), NULL);
    exec_cfg c = cfg_of(FULL);
    exec_env env = {&c, ws, "main", "agent:main:s1", true};
    exec_env other = {&c, ws, "main", "agent:main:s2", true};
    char *r = pr(&env, "{\"action\":\"list\"}");
    EXPECT_STR(r, "No running or recent sessions.");
    free(r);
    r = ex(&env, "{\"command\":\"echo start; read x; echo got $x\",\"background\":true}");
    EXPECT_CONTAINS(r, "Command still running (session ");
    EXPECT_CONTAINS(r, "Use process (list/poll/log/write/kill/clear/remove) for follow-up.");
    char id[32] = "";
    const char *s = strstr(r, "(session ");
    if (s) sscanf(s + 9, "%31[0-9a-f]", id);
    free(r);
    EXPECT(strlen(id) == 12);
    char args[512];
    r = pr(&env, "{\"action\":\"list\"}");
    EXPECT_CONTAINS(r, id);
    EXPECT_CONTAINS(r, "running");
    free(r);
    /* another session does not see it */
    r = pr(&other, "{\"action\":\"list\"}");
    EXPECT_STR(r, "No running or recent sessions.");
    free(r);
    snprintf(args, sizeof args, "{\"action\":\"poll\",\"sessionId\":\"%s\"}", id);
    r = pr(&other, args);
    EXPECT_CONTAINS(r, "FAILED: No session found for ");
    free(r);
    /* the first line, then still running */
    snprintf(args, sizeof args, "{\"action\":\"poll\",\"sessionId\":\"%s\",\"timeout\":200}", id);
    for (int i = 0; i < 50; i++) { /* until "start" has been read */
        r = pr(&env, args);
        if (strstr(r, "start")) break;
        free(r);
        r = NULL;
    }
    EXPECT_STR(r, "start\n\nProcess still running.");
    free(r);
    snprintf(args, sizeof args,
             "{\"action\":\"write\",\"sessionId\":\"%s\",\"data\":\"hello\\n\",\"eof\":true}", id);
    r = pr(&env, args);
    char want[128];
    snprintf(want, sizeof want, "Wrote 6 bytes to session %s (stdin closed).", id);
    EXPECT_STR(r, want);
    free(r);
    snprintf(args, sizeof args, "{\"action\":\"poll\",\"sessionId\":\"%s\",\"timeout\":10000}",
             id);
    r = pr(&env, args);
    EXPECT_STR(r, "got hello\n\nProcess exited with code 0.");
    free(r);
    snprintf(args, sizeof args, "{\"action\":\"log\",\"sessionId\":\"%s\"}", id);
    r = pr(&env, args);
    EXPECT_STR(r, "start\ngot hello");
    free(r);
    snprintf(args, sizeof args, "{\"action\":\"log\",\"sessionId\":\"%s\",\"offset\":1,"
             "\"limit\":1}", id);
    r = pr(&env, args);
    EXPECT_STR(r, "got hello");
    free(r);
    snprintf(args, sizeof args, "{\"action\":\"remove\",\"sessionId\":\"%s\"}", id);
    r = pr(&env, args);
    EXPECT_CONTAINS(r, "Removed session ");
    free(r);
    snprintf(args, sizeof args, "{\"action\":\"poll\",\"sessionId\":\"%s\"}", id);
    r = pr(&env, args);
    EXPECT_CONTAINS(r, "No session found");
    free(r);
    /* a child that closed its stdin: the write fails, no SIGPIPE reaches us */
    r = ex(&env, "{\"command\":\"exec 0<&-; echo closed; sleep 30\",\"background\":true}");
    s = strstr(r, "(session ");
    if (s) sscanf(s + 9, "%31[0-9a-f]", id);
    free(r);
    snprintf(args, sizeof args, "{\"action\":\"poll\",\"sessionId\":\"%s\",\"timeout\":200}", id);
    for (int i = 0; i < 50; i++) {
        r = pr(&env, args);
        bool seen = strstr(r, "closed") != NULL;
        free(r);
        if (seen) break;
    }
    snprintf(args, sizeof args, "{\"action\":\"write\",\"sessionId\":\"%s\",\"data\":\"x\"}", id);
    r = pr(&env, args);
    EXPECT_CONTAINS(r, "FAILED: Session ");
    EXPECT_CONTAINS(r, "stdin is full or closed");
    free(r);
    snprintf(args, sizeof args, "{\"action\":\"remove\",\"sessionId\":\"%s\"}", id);
    r = pr(&env, args);
    EXPECT_CONTAINS(r, "Removed session ");
    free(r);
    /* yieldMs: a slow command goes to the background; kill ends it */
    r = ex(&env, "{\"command\":\"echo PG=$$; sleep 60\",\"yieldMs\":10}");
    EXPECT_CONTAINS(r, "Command still running");
    s = strstr(r, "(session ");
    if (s) sscanf(s + 9, "%31[0-9a-f]", id);
    free(r);
    snprintf(args, sizeof args, "{\"action\":\"kill\",\"sessionId\":\"%s\"}", id);
    r = pr(&env, args);
    EXPECT_CONTAINS(r, "Killed session ");
    free(r);
    snprintf(args, sizeof args, "{\"action\":\"poll\",\"sessionId\":\"%s\",\"timeout\":10000}",
             id);
    r = pr(&env, args);
    EXPECT_CONTAINS(r, "FAILED: PG=");
    EXPECT_CONTAINS(r, "Process exited with signal KILL.");
    pid_t pg = pg_of(r);
    if (pg > 1) EXPECT(group_gone(pg));
    free(r);
    r = pr(&env, "{\"action\":\"bogus\",\"sessionId\":\"x\"}");
    EXPECT_CONTAINS(r, "FAILED: No session found");
    free(r);
    r = pr(&env, "{\"action\":\"poll\"}");
    EXPECT_STR(r, "FAILED: sessionId is required for this action.");
    free(r);
    /* without process, a background request runs in the foreground */
    exec_env fg = {&c, ws, "main", "agent:main:s1", false};
    r = ex(&fg, "{\"command\":\"echo now\",\"background\":true}");
    EXPECT_STR(r, "Warning: background execution is disabled; running synchronously.\n\nnow\n");
    free(r);
    cm_exec_jobs_shutdown();
    cm_exec_cfg_release(&c);
    free(ws);
}

/* ---- who is offered exec --------------------------------------------------------- */

static bool offers(const agent_tools *t, const char *name)
{
    llm_tool_def d[AGENT_TOOLS_MAX];
    size_t n = cm_agent_tools_offered(t, d, AGENT_TOOLS_MAX);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(d[i].name, name)) return true;
    return false;
}

TEST(exec_never_offered_to_an_untrusted_sender)
{
    exec_cfg on = cfg_of(FULL), off = cfg_of("{}");
    agent_tools t = {.workspace = "/tmp", .exec = &on, .trusted = false};
    EXPECT(!offers(&t, "exec"));
    EXPECT(!offers(&t, "process"));
    t.trusted = true;
    EXPECT(offers(&t, "exec"));
    EXPECT(offers(&t, "process"));
    t.exec = &off;
    EXPECT(!offers(&t, "exec"));
    t.exec = &on;
    t.workspace = NULL;
    EXPECT(!offers(&t, "exec"));
    /* the policy can still take it away */
    t.workspace = "/tmp";
    tool_policy p;
    json_t *root = json_loads("{\"tools\":{\"deny\":[\"group:runtime\"]}}", 0, NULL);
    EXPECT_INT(cm_tool_policy_init(&p, root, "main"), CM_OK);
    t.policy = &p;
    EXPECT(!offers(&t, "exec"));
    cm_tool_policy_release(&p);
    json_decref(root);
    cm_exec_cfg_release(&on);
    cm_exec_cfg_release(&off);
}

TEST(exec_gateway_trust_follows_the_access_policy)
{
    char *d = tmp_dir();
    const char *state = path_in(d, "state");
    char *st = cm_strdup(state);
    write_file(d, "state/credentials/telegram-default-allowFrom.json",
               "{\"version\":1,\"allowFrom\":[\"555\"]}");
    static const struct {
        const char *cfg, *channel, *peer;
        bool group, want;
    } cases[] = {
        {"{}", "terminal", "x", false, true},
        {"{}", "webchat", "x", false, true},
        {"{}", NULL, "x", false, false},
        {"{\"channels\":{\"telegram\":{\"allowFrom\":[\"42\"]}}}", "telegram", "42", false, true},
        {"{\"channels\":{\"telegram\":{\"allowFrom\":[\"telegram:42\"]}}}", "telegram", "42",
         false, true},
        {"{\"channels\":{\"telegram\":{\"allowFrom\":[\"42\"]}}}", "telegram", "43", false, false},
        /* "*" lets anyone write, but names no one */
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"allowlist\",\"allowFrom\":[\"*\"]}}}",
         "telegram", "43", false, false},
        /* a group is never trusted, even with its writer listed */
        {"{\"channels\":{\"telegram\":{\"allowFrom\":[\"42\"]}}}", "telegram", "42", true, false},
        /* approved through pairing (the default dmPolicy) */
        {"{}", "telegram", "555", false, true},
        /* ...but not under allowlist, where the pairing store does not count */
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"allowlist\",\"allowFrom\":[\"1\"]}}}",
         "telegram", "555", false, false},
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"disabled\",\"allowFrom\":[\"42\"]}}}",
         "telegram", "42", false, false},
        /* open DMs share the main session: nobody there is trusted */
        {"{\"channels\":{\"telegram\":{\"dmPolicy\":\"open\",\"allowFrom\":[\"*\",\"42\"]}}}",
         "telegram", "42", false, false},
        {"{\"session\":{\"dmScope\":\"per-peer\"},\"channels\":{\"telegram\":{\"dmPolicy\":"
         "\"open\",\"allowFrom\":[\"*\",\"42\"]}}}",
         "telegram", "42", false, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *root = json_loads(cases[i].cfg, 0, NULL);
        cm_rtcfg *c = NULL;
        bool tr = !cases[i].want;
        char err[256];
        EXPECT_INT(cm_rtcfg_from_json(root, &c, err, sizeof err), CM_OK);
        json_decref(root);
        cm_rc rc = cm_gw_access_trusted(c, st, cases[i].channel, NULL, cases[i].peer,
                                        cases[i].group, &tr, err, sizeof err);
        cm_rtcfg_unref(c);
        EXPECT_INT(rc, CM_OK);
        if (tr != cases[i].want) test_fail(__FILE__, __LINE__, "case %zu", i);
    }
    free(st);
}

/* The model asks for exec in a session turn: an untrusted sender's turn
 * never runs it ("Tool exec not found"); the owner's does. */
TEST(exec_session_turn_untrusted_sender_cannot_run_it)
{
    char base[64];
    fake_server *fs = fake_start(8, base);
    char *d = tmp_dir();
    write_file(d, "ws/a.txt", "A\n");
    char *ws = realpath(path_in(d, "ws"), NULL);
    char *state = cm_strdup(path_in(d, "state"));
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\"}},\"tools\":{\"exec\":{"
             "\"host\":\"gateway\",\"security\":\"full\"}},\"models\":{\"providers\":{\"openai\":"
             "{\"baseUrl\":\"%s/v1\",\"apiKey\":\"sk-test-exec-0001\",\"models\":[]}}}}",
             base);
    json_t *root = json_loads(cfg, 0, NULL);
    llm_runner *runner = NULL;
    char err[512];
    llm_runner_opts ro = {root, state, "main", NULL, NULL};
    EXPECT_INT(cm_llm_runner_open(&ro, &runner, err, sizeof err), CM_OK);
    exec_cfg ec = cfg_of(cfg);
    char store[4096];
    snprintf(store, sizeof store, "%s/agents/main/sessions/sessions.json", state);
    agent_ctx a = {root, state, "main", store, ws, NULL, runner, true, NULL, NULL, NULL, NULL,
                   &ec};
    for (int trusted = 0; trusted < 2; trusted++) {
        fake_push_chat_call(fs, "c1", "exec", "{\"command\":\"echo PWNED > pwned.txt\"}");
        fake_push_chat_text(fs, "done", 10);
        agent_inbound in = {.chat_id = "telegram:42",
                            .account_id = "default",
                            .channel = "telegram",
                            .provider = "telegram",
                            .surface = "telegram",
                            .chat_type = "direct",
                            .trusted_sender = trusted != 0};
        agent_turn_opts o = {"run it", NULL, NULL, NULL, NULL, NULL, NULL, &in};
        agent_reply r;
        EXPECT_INT(cm_agent_session_turn_opts(&a, "agent:main:telegram:direct:42", &o, &r, err,
                                              sizeof err),
                   CM_OK);
        cm_agent_reply_release(&r);
        bool ran = access(path_in(d, "ws/pwned.txt"), F_OK) == 0;
        EXPECT(ran == (trusted != 0));
        /* what the model was offered in the first request of the turn */
        const fake_request *q = fake_get(fs, trusted * 2);
        EXPECT(q != NULL);
        if (q) EXPECT((strstr(q->body, "\"exec\"") != NULL) == (trusted != 0));
        const fake_request *q2 = fake_get(fs, trusted * 2 + 1);
        if (q2 && !trusted) EXPECT_CONTAINS(q2->body, "Tool exec not found");
    }
    cm_exec_cfg_release(&ec);
    cm_llm_runner_close(runner);
    json_decref(root);
    fake_stop(fs);
    free(ws);
    free(state);
}

/* ---- message ---------------------------------------------------------------------- */

typedef struct sent {
    char channel[64], target[64], text[64];
    int n;
} sent;

static cm_rc fake_send(void *ctx, const char *channel, const char *account, const char *target,
                       const char *text, char *err, size_t errlen)
{
    sent *s = ctx;
    (void)account;
    if (target && !strcmp(target, "refused"))
        return cm_seterr(err, errlen, CM_EPATH, "message: refused is not an allowed target");
    snprintf(s->channel, sizeof s->channel, "%s", channel ? channel : "");
    snprintf(s->target, sizeof s->target, "%s", target ? target : "");
    snprintf(s->text, sizeof s->text, "%.63s", text);
    s->n++;
    return CM_OK;
}

static char *msg(sent *s, json_t *args)
{
    buf out = BUF_INIT;
    char err[512];
    cm_rc rc = cm_tool_message(fake_send, s, args, &out, err, sizeof err);
    json_decref(args);
    if (rc) {
        cm_buf_reset(&out);
        (void)!cm_buf_printf(&out, "ERR: %s", err);
    }
    return cm_buf_detach(&out);
}

TEST(exec_message_tool_checks_its_arguments)
{
    sent s = {0};
    char *r = msg(&s, json_pack("{s:s,s:s}", "action", "send", "message", "hello"));
    EXPECT_STR(r, "{\"ok\":true,\"action\":\"send\",\"channel\":\"current\",\"to\":\"current\"}");
    EXPECT_INT(s.n, 1);
    EXPECT_STR(s.text, "hello");
    free(r);
    r = msg(&s, json_pack("{s:s,s:s,s:s,s:s}", "action", "send", "channel", "telegram", "target",
                          "42", "message", "hi"));
    EXPECT_STR(r, "{\"ok\":true,\"action\":\"send\",\"channel\":\"telegram\",\"to\":\"42\"}");
    EXPECT_STR(s.target, "42");
    free(r);
    buf big = BUF_INIT;
    for (int i = 0; i <= MESSAGE_MAX_BYTES; i++)
        EXPECT_INT(cm_buf_addc(&big, 'x'), CM_OK);
    struct {
        json_t *args;
        const char *want;
    } bad[] = {
        {json_pack("{s:s}", "message", "hi"), "only action \"send\""},
        {json_pack("{s:s,s:s}", "action", "react", "message", "hi"), "only action \"send\""},
        {json_pack("{s:s}", "action", "send"), "message (a non-empty string)"},
        {json_pack("{s:s,s:s}", "action", "send", "message", ""), "message (a non-empty string)"},
        {json_pack("{s:s,s:o}", "action", "send", "message", json_stringn("a\0b", 3)), "NUL"},
        {json_pack("{s:s,s:s}", "action", "send", "message", big.data), "longer than"},
        {json_pack("{s:s,s:s,s:s}", "action", "send", "message", "hi", "target", "a\nb"),
         "control character"},
        {json_pack("{s:s,s:s,s:i}", "action", "send", "message", "hi", "channel", 5),
         "must be a string"},
        {json_pack("{s:s,s:s,s:s}", "action", "send", "message", "hi", "target", "refused"),
         "not an allowed target"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = msg(&s, bad[i].args);
        if (strncmp(r, "ERR: ", 5) || !strstr(r, bad[i].want))
            test_fail(__FILE__, __LINE__, "case %zu gave %s", i, r);
        free(r);
    }
    EXPECT_INT(s.n, 2);
    cm_buf_release(&big);
    /* without a channel (a run outside the gateway) the tool is not offered */
    agent_tools t = {.workspace = "/tmp"};
    EXPECT(!offers(&t, "message"));
    agent_hooks hk = {NULL, NULL, &s, fake_send, NULL, NULL, NULL};
    t.hooks = &hk;
    EXPECT(offers(&t, "message"));
}
