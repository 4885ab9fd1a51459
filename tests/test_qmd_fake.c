/*
 * test_qmd_fake.c — memory.backend = "qmd" with a stand-in shell script
 * (shared setup in qmd_env.c) printing QMD's documented output or
 * misbehaving on purpose: vsearch/query, refused flags, crash, hang past the
 * timeout, garbage JSON, a missing binary, the builtin fallback and the
 * recovery, the session key through the CLI and MCP, and the update lock.
 * After each test no process started with its QMD home is left.
 */
#include <signal.h>
#include <sys/file.h>

#include "../src/base/fs.h"
#include "../src/engine/engine_int.h"
#include "qmd_env.h"

/* ---- the stand-in ----------------------------------------------------------------- */

/* A qmd that prints QMD's documented output, or misbehaves as the file
 * <dir>/mode says: refuse (flags refused by all but query), crash, hang,
 * garbage, none, hang-update. Each call is appended to <dir>/calls. */
static void write_fake(qenv *q)
{
    char text[4096];
    snprintf(
        text, sizeof text,
        "#!/bin/sh\n"
        "d='%s'\n"
        "echo \"$*\" >>\"$d/calls\"\n"
        "mode=$(cat \"$d/mode\" 2>/dev/null)\n"
        "case \"$1\" in\n"
        "collection) exit 0;;\n"
        "update|embed) [ \"$mode\" = hang-update ] && { sleep 30 & sleep 30; }; exit 0;;\n"
        "search|vsearch|query)\n"
        "  case \"$mode\" in\n"
        "  refuse) [ \"$1\" != query ] && { echo \"error: unknown option '-n'\" >&2; exit 2; };;\n"
        "  crash) echo 'segfault' >&2; kill -SEGV $$;;\n"
        "  hang) sleep 30 & sleep 30; exit 0;;\n"
        "  garbage) echo 'Loading model... {\"docid\": '; exit 0;;\n"
        "  none) echo 'No results found.'; exit 0;;\n"
        "  docid) printf '%%s\\n' '[{\"docid\":\"#beef01\",\"score\":0.5,"
        "\"snippet\":\"@@ -3,1 @@\\nA grey heron\"}]'; exit 0;;\n"
        "  esac\n"
        "  printf '%%s\\n' "
        "'[{\"docid\":\"#ab12cd\",\"score\":0.87,\"file\":\"qmd://memory-dir-main/"
        "heron.md\",\"line\":3,\"title\":\"Birds\",\"snippet\":\"@@ -2,3 @@ (1 before, 1 "
        "after)\\n\\nA grey heron nests by the lake.\\n\"}]'\n"
        "  exit 0;;\n"
        "esac\n"
        "exit 0\n",
        q->dir);
    write_file(q->dir, "fake", text);
    chmod(q->fake, 0755);
}

static void set_mode(qenv *q, const char *mode)
{
    write_file(q->dir, "mode", mode);
}

static void fake_config(qenv *q, const char *command, const char *extra)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{memory: {backend: 'qmd', citations: 'off', qmd: {command: '%s', update: "
             "{waitForBootSync: true, interval: '0'}, limits: {timeoutMs: 400}, %s}}}",
             command, extra);
    write_file(q->dir, "quantumclaw.json", text);
    write_file(q->ws, "memory/heron.md", "# Birds\n\nA grey heron nests by the lake.\n");
}

static bool calls_have(qenv *q, const char *what)
{
    buf b = BUF_INIT;
    char err[256];
    bool yes = cm_fs_read_file(path_in(q->dir, "calls"), 1 << 20, &b, err, sizeof err) == CM_OK &&
               b.data && strstr(b.data, what);
    cm_buf_release(&b);
    return yes;
}

TEST(qmd_fake_modes)
{
    qenv q;
    qenv_init(&q, "{}");
    write_fake(&q);
    fake_config(&q, q.fake, "searchMode: 'vsearch'");
    cm_engine *e = qopen(&q);
    EXPECT(e);
    EXPECT(calls_have(&q, "collection add"));
    EXPECT(calls_have(&q, "update"));
    EXPECT(calls_have(&q, "embed")); /* vsearch needs vectors: embed on boot */
    json_t *o = qsearch(e, "heron", DIRECT);
    EXPECT(o && nresults(o) == 1);
    EXPECT(calls_have(&q, "vsearch heron --json -n 6 -c memory-root-main -c memory-alt-main -c "
                          "memory-dir-main"));
    EXPECT_STR(r_str(o, 0, "path"), "memory/heron.md");
    EXPECT_STR(r_str(o, 0, "snippet"), "\nA grey heron nests by the lake.\n");
    EXPECT(!r_str(o, 0, "citation")); /* citations off */
    json_t *h = json_array_get(json_object_get(o, "results"), 0);
    EXPECT_INT(json_integer_value(json_object_get(h, "startLine")), 2);
    EXPECT_INT(json_integer_value(json_object_get(h, "endLine")), 4);
    EXPECT_NEAR(json_number_value(json_object_get(h, "score")), 0.87, 1e-9);
    json_decref(o);
    /* flags refused: retried with qmd query */
    set_mode(&q, "refuse");
    o = qsearch(e, "heron", DIRECT);
    EXPECT(o && nresults(o) == 1 && !json_object_get(o, "fallback"));
    EXPECT(calls_have(&q, "query heron --json -n 6"));
    EXPECT_CONTAINS(q.log.data, "retrying the search with qmd query");
    json_decref(o);
    /* a hit that names only its docid: found in QMD's index */
    char db[1400];
    snprintf(db, sizeof db, "%s/agents/main/qmd/xdg-cache/qmd/index.sqlite", q.state);
    sqlite3 *h3 = NULL;
    char dbdir[1400];
    snprintf(dbdir, sizeof dbdir, "%s/agents/main/qmd/xdg-cache/qmd", q.state);
    char e3[256];
    EXPECT_INT(cm_fs_mkdirs(dbdir, e3, sizeof e3), CM_OK);
    EXPECT_INT(sqlite3_open(db, &h3), SQLITE_OK);
    EXPECT_INT(
        sqlite3_exec(h3,
                     "CREATE TABLE documents (id INTEGER PRIMARY KEY, collection TEXT, path "
                     "TEXT, hash TEXT, active INTEGER);"
                     "INSERT INTO documents VALUES (1, 'memory-dir-main', 'gone.md', "
                     "'beef01cafe', 0), (2, 'memory-dir-main', 'heron.md', 'beef01cafe', 1);",
                     NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(h3);
    set_mode(&q, "docid");
    o = qsearch(e, "heron", DIRECT);
    EXPECT(o && nresults(o) == 1);
    EXPECT_STR(r_str(o, 0, "path"), "memory/heron.md");
    EXPECT_STR(r_str(o, 0, "snippet"), "A grey heron");
    json_decref(o);
    /* "No results found." */
    set_mode(&q, "none");
    o = qsearch(e, "heron", DIRECT);
    EXPECT(o && nresults(o) == 0 && !json_object_get(o, "fallback"));
    json_decref(o);
    cm_engine_close(e);
    EXPECT_NO_LEFTOVERS(&q);
    qenv_release(&q);
}

/* A failure mode: the builtin index answers with the reason, status says so,
 * and once QMD answers again it serves again. */
static void check_fallback(qenv *q, cm_engine *e, const char *mode, const char *reason)
{
    set_mode(q, mode);
    json_t *o = qsearch(e, "heron", DIRECT);
    EXPECT(o);
    EXPECT_INT(nresults(o), 1); /* from the builtin index */
    EXPECT_STR(r_str(o, 0, "path"), "memory/heron.md");
    EXPECT_CONTAINS(json_string_value(json_object_get(o, "fallback")), reason);
    EXPECT_STR(json_string_value(json_object_get(o, "backend")), "builtin");
    json_decref(o);
    o = qstatus(e);
    EXPECT_STR(json_string_value(json_object_get(o, "backend")), "builtin");
    EXPECT_CONTAINS(json_string_value(json_object_get(json_object_get(o, "fallback"), "reason")),
                    reason);
    json_decref(o);
    EXPECT_NO_LEFTOVERS(q);
    set_mode(q, "ok");
    o = qsearch(e, "heron", DIRECT);
    EXPECT(o && nresults(o) == 1 && !json_object_get(o, "fallback"));
    EXPECT_STR(json_string_value(json_object_get(o, "provider")), "qmd");
    json_decref(o);
    o = qstatus(e);
    EXPECT_STR(json_string_value(json_object_get(o, "backend")), "qmd");
    EXPECT(!json_object_get(o, "fallback"));
    json_decref(o);
}

TEST(qmd_fake_failures)
{
    qenv q;
    qenv_init(&q, "{}");
    write_fake(&q);
    fake_config(&q, q.fake, "searchMode: 'query'");
    cm_engine *e = qopen(&q);
    EXPECT(e);
    char err[512];
    EXPECT_INT(cm_engine_sync(e, CM_SYNC_NOWAIT, NULL, NULL, NULL, err, sizeof err), CM_OK);
    check_fallback(&q, e, "crash", "qmd query was killed by a signal");
    if (test_failed()) goto done;
    check_fallback(&q, e, "garbage", "invalid JSON");
    if (test_failed()) goto done;
done:
    cm_engine_close(e);
    EXPECT_NO_LEFTOVERS(&q);
    qenv_release(&q);
}

/* A QMD that hangs is killed at limits.timeoutMs; then the builtin index
 * answers at once, without asking QMD, for a minute (two after a second
 * timeout); QMD serves again once it answers. */
TEST(qmd_fake_hang_backs_off)
{
    qenv q;
    qenv_init(&q, "{}");
    write_fake(&q);
    fake_config(&q, q.fake, "searchMode: 'query'");
    cm_engine_qmd_test_clock(fake_clock, &fake_now);
    cm_engine *e = qopen(&q);
    cm_engine_qmd_test_clock(NULL, NULL);
    EXPECT(e);
    char err[512];
    EXPECT_INT(cm_engine_sync(e, CM_SYNC_NOWAIT, NULL, NULL, NULL, err, sizeof err), CM_OK);
    set_mode(&q, "hang");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    json_t *o = qsearch(e, "heron", DIRECT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    EXPECT(t1.tv_sec - t0.tv_sec < 20); /* the stand-in sleeps 30 s: killed at 400 ms */
    EXPECT(o && nresults(o) == 1);
    EXPECT_CONTAINS(json_string_value(json_object_get(o, "fallback")),
                    "qmd query timed out after 400ms");
    json_decref(o);
    EXPECT_NO_LEFTOVERS(&q);
    /* within the minute: answered by the builtin index, QMD not run */
    unlink(path_in(q.dir, "calls"));
    __atomic_add_fetch(&fake_now, 30000, __ATOMIC_SEQ_CST);
    o = qsearch(e, "heron", DIRECT);
    EXPECT(o && nresults(o) == 1);
    EXPECT_CONTAINS(json_string_value(json_object_get(o, "fallback")), "asked again in 30 s");
    json_decref(o);
    EXPECT(!calls_have(&q, "query"));
    /* past it: asked again; a second timeout pauses it for two minutes */
    __atomic_add_fetch(&fake_now, 31000, __ATOMIC_SEQ_CST);
    o = qsearch(e, "heron", DIRECT);
    EXPECT(o && nresults(o) == 1);
    json_decref(o);
    EXPECT(calls_have(&q, "query heron"));
    unlink(path_in(q.dir, "calls"));
    __atomic_add_fetch(&fake_now, 90000, __ATOMIC_SEQ_CST);
    o = qsearch(e, "heron", DIRECT);
    EXPECT_CONTAINS(json_string_value(json_object_get(o, "fallback")), "asked again in 30 s");
    json_decref(o);
    EXPECT(!calls_have(&q, "query"));
    /* QMD answers again after the pause: it serves, and the pause is over */
    set_mode(&q, "ok");
    __atomic_add_fetch(&fake_now, 31000, __ATOMIC_SEQ_CST);
    o = qsearch(e, "heron", DIRECT);
    EXPECT(o && nresults(o) == 1 && !json_object_get(o, "fallback"));
    EXPECT_STR(json_string_value(json_object_get(o, "provider")), "qmd");
    json_decref(o);
    o = qstatus(e);
    EXPECT_STR(json_string_value(json_object_get(o, "backend")), "qmd");
    json_decref(o);
    cm_engine_close(e);
    EXPECT_NO_LEFTOVERS(&q);
    qenv_release(&q);
}

TEST(qmd_fake_missing_binary)
{
    qenv q;
    qenv_init(&q, "{}");
    write_fake(&q);
    char missing[1200];
    snprintf(missing, sizeof missing, "%s/bin/qmd", q.dir);
    fake_config(&q, missing, "searchMode: 'search'");
    cm_engine *e = qopen(&q); /* opens: the builtin index stands in */
    EXPECT(e);
    EXPECT_CONTAINS(q.log.data, "qmd memory unavailable");
    char err[512];
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    json_t *o = qsearch(e, "heron", DIRECT);
    EXPECT(o && nresults(o) == 1);
    EXPECT_CONTAINS(json_string_value(json_object_get(o, "fallback")), "cannot run");
    json_decref(o);
    o = qstatus(e);
    EXPECT_STR(json_string_value(json_object_get(o, "backend")), "builtin");
    json_decref(o);
    /* installed later: the next search starts QMD and it serves */
    char bin[1200];
    snprintf(bin, sizeof bin, "%s/bin", q.dir);
    mkdir(bin, 0755);
    EXPECT_INT(symlink(q.fake, missing), 0);
    set_mode(&q, "ok");
    o = qsearch(e, "heron", DIRECT);
    EXPECT(o && nresults(o) == 1 && !json_object_get(o, "fallback"));
    EXPECT_STR(json_string_value(json_object_get(o, "provider")), "qmd");
    json_decref(o);
    cm_engine_close(e);
    EXPECT_NO_LEFTOVERS(&q);
    qenv_release(&q);
}

TEST(qmd_fake_update_never_blocks)
{
    qenv q;
    qenv_init(&q, "{}");
    write_fake(&q);
    write_file(q.ws, "memory/heron.md", "# Birds\n\nA grey heron nests by the lake.\n");
    char text[2048];
    /* the boot update in the background hangs; searches still answer at once */
    snprintf(text, sizeof text,
             "{memory: {backend: 'qmd', qmd: {command: '%s', update: {interval: '5m', "
             "updateTimeoutMs: 60000}, limits: {timeoutMs: 20000}}}}",
             q.fake);
    write_file(q.dir, "quantumclaw.json", text);
    set_mode(&q, "hang-update");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cm_engine *e = qopen(&q);
    EXPECT(e);
    json_t *o = qsearch(e, "heron", DIRECT);
    EXPECT(o && nresults(o) == 1 && !json_object_get(o, "fallback"));
    json_decref(o);
    /* the hanging update is there to be seen (the check of leftovers sees it) */
    int seen = 0;
    for (int i = 0; i < 1000 && !seen; i++) {
        seen = leftovers(q.dir);
        struct timespec ts = {0, 10 * 1000 * 1000};
        if (!seen) nanosleep(&ts, NULL);
    }
    EXPECT(seen > 0);
    o = qsearch(e, "heron", DIRECT); /* still answered while it hangs */
    EXPECT(o && nresults(o) == 1);
    json_decref(o);
    cm_engine_close(e); /* kills the update in progress */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    EXPECT(t1.tv_sec - t0.tv_sec < 20); /* the update sleeps 30 s */
    EXPECT(calls_have(&q, "update"));
    EXPECT_NO_LEFTOVERS(&q);
    qenv_release(&q);
}

static size_t payload_hits(const char *js)
{
    json_t *o = json_loads(js ? js : "", 0, NULL);
    json_t *sc = json_object_get(json_object_get(o, "result"), "structuredContent");
    size_t n = json_array_size(json_object_get(sc ? sc : o, "results"));
    json_decref(o);
    return n;
}

/* The caller's session key reaches the backend from the CLI and from MCP. */
TEST(qmd_fake_session_key_cli_mcp)
{
    qenv q;
    qenv_init(&q, "{}");
    write_fake(&q);
    fake_config(&q, q.fake, "searchMode: 'search'");
    const char *group = "agent:main:telegram:group:1";
    const char *g[] = {"--workspace", q.ws,    "--state-dir", q.state,         "--config", q.cfg,
                       "search",      "heron", "--json",      "--session-key", group,      NULL};
    run_result r = run_clawmem(NULL, g);
    EXPECT_INT(r.status, 0);
    EXPECT_INT(payload_hits(r.out), 0);
    EXPECT_CONTAINS(r.err, "denied by scope (channel=telegram, chatType=group");
    run_result_release(&r);
    const char *d[] = {"--workspace", q.ws,    "--state-dir", q.state,         "--config", q.cfg,
                       "search",      "heron", "--json",      "--session-key", DIRECT,     NULL};
    r = run_clawmem(NULL, d);
    EXPECT_INT(r.status, 0);
    EXPECT_INT(payload_hits(r.out), 1);
    EXPECT_CONTAINS(r.out, "\"provider\":\"qmd\"");
    run_result_release(&r);
    const char *st[] = {"--workspace", q.ws,  "--state-dir", q.state,
                        "--config",    q.cfg, "status",      NULL};
    r = run_clawmem(NULL, st);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "Backend: qmd (QMD ");
    EXPECT_CONTAINS(r.out, "mode search, 3 collections");
    run_result_release(&r);
    /* MCP: the server's --session-key, and a call's own sessionKey */
    proc p;
    const char *m[] = {"--workspace", q.ws,         "--state-dir",   q.state, "--config", q.cfg,
                       "mcp",         "--no-watch", "--session-key", group,   NULL};
    proc_start(&p, NULL, m);
    proc_send(&p, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"memory_search\",\"arguments\":{\"query\":\"heron\"}}}");
    char *line = proc_line(&p, 20000);
    size_t n1 = payload_hits(line);
    free(line);
    proc_send(&p, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"memory_search\",\"arguments\":{\"query\":\"heron\",\"sessionKey\":\"" DIRECT
                  "\"}}}");
    line = proc_line(&p, 20000);
    size_t n2 = payload_hits(line);
    free(line);
    proc_stop(&p, 0, 20000);
    EXPECT_INT(n1, 0);
    EXPECT_INT(n2, 1);
    EXPECT_NO_LEFTOVERS(&q);
    qenv_release(&q);
}

/* Updates are serialised across processes by <home>/update.lock: a boot
 * update finds it held and leaves the update to its holder; a forced one
 * (clawmem index) waits for it. */
TEST(qmd_fake_update_lock)
{
    qenv q;
    qenv_init(&q, "{}");
    write_fake(&q);
    fake_config(&q, q.fake, "searchMode: 'search'");
    char home[1300], err[512];
    snprintf(home, sizeof home, "%s/agents/main/qmd", q.state);
    EXPECT_INT(cm_fs_mkdirs(home, err, sizeof err), CM_OK);
    int fd = open(path_in(home, "update.lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    EXPECT(fd >= 0);
    EXPECT_INT(flock(fd, LOCK_EX), 0);
    cm_engine *e = qopen(&q);
    EXPECT(e);
    EXPECT(calls_have(&q, "collection add"));
    EXPECT(!calls_have(&q, "update")); /* held elsewhere: skipped */
    EXPECT_INT(cm_engine_qmd_updates(e), 0);
    close(fd); /* released: a forced update runs */
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    EXPECT(calls_have(&q, "update"));
    EXPECT_INT(cm_engine_qmd_updates(e), 1);
    cm_engine_close(e);
    EXPECT_NO_LEFTOVERS(&q);
    qenv_release(&q);
}
