/*
 * test_qmd.c — memory.backend = "qmd" (shared setup in qmd_env.c): its
 * config and scope rules and QMD's output parsed; then against the real QMD
 * that scripts/install-qmd.sh installs (make test runs it; $CLAWMEM_TEST_QMD
 * is its launcher): collections, update, search payloads,
 * qmd/<collection>/ paths through memory_get, scope allow/deny, the sessions
 * export, a note edited then found after the update interval (the clock
 * injected). After each test no process started with its QMD home is left
 * (checked through /proc).
 */
#include <signal.h>

#include "../src/backend/qmd.h"
#include "../src/base/fs.h"
#include "../src/engine/engine_int.h"
#include "qmd_env.h"

static const char *real_qmd(void)
{
    static char path[4096];
    const char *v = getenv("CLAWMEM_TEST_QMD");
    if (v && *v)
        snprintf(path, sizeof path, "%s", v);
    else
        snprintf(path, sizeof path, "build/peers/qmd-2.8.3-bun-1.4.5/bin/qmd");
    return access(path, X_OK) == 0 ? path : NULL;
}

/* ---- config and scope (no QMD) ----------------------------------------------- */

static cm_rc parse(const char *text, cm_config *cfg, char *err, size_t errlen)
{
    cm_config_args a = {NULL, "/tmp/ws", NULL, "/tmp/state"};
    cm_logger lg = {0};
    return cm_config_parse(text, strlen(text), "q.json", &a, &lg, cfg, err, errlen);
}

TEST(qmd_config)
{
    cm_config c;
    char err[512];
    EXPECT_INT(parse("{}", &c, err, sizeof err), CM_OK);
    EXPECT_INT(c.qmd.max_results, 6);
    EXPECT_INT(c.qmd.interval_ms, 300000);
    EXPECT_INT(c.qmd.embed_interval_ms, 3600000);
    EXPECT_INT(c.qmd.debounce_ms, 15000);
    EXPECT_INT(c.qmd.timeout_ms, 4000);
    EXPECT_INT(c.qmd.max_injected_chars, 4000);
    EXPECT(c.qmd.include_default_memory && c.qmd.on_boot && !c.qmd.wait_for_boot_sync);
    cm_config_release(&c);
    EXPECT_INT(parse("{memory: {backend: 'qmd', qmd: {command: 'x', searchMode: 'vsearch',"
                     " paths: [{path: '~/n', name: 'Docs'}], update: {interval: '1h30m',"
                     " debounceMs: 0, commandTimeoutMs: 0}, limits: {maxResults: 3},"
                     " sessions: {enabled: true, retentionDays: 7}}}}",
                     &c, err, sizeof err),
               CM_OK);
    EXPECT_STR(c.qmd.search_mode, "vsearch");
    EXPECT_INT(c.qmd.npaths, 1);
    EXPECT_STR(c.qmd.paths[0].name, "Docs");
    EXPECT_INT(c.qmd.interval_ms, 5400000);
    EXPECT_INT(c.qmd.debounce_ms, 0);
    EXPECT_INT(c.qmd.command_timeout_ms, 30000); /* 0 keeps the default */
    EXPECT_INT(c.qmd.max_results, 3);
    EXPECT(c.qmd.sessions_enabled);
    EXPECT_INT(c.qmd.sessions_retention_days, 7);
    cm_config_release(&c);
    EXPECT_INT(parse("{memory: {qmd: {searchMode: 'fast'}}}", &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "memory.qmd.searchMode");
    EXPECT_CONTAINS(err, "q.json:1:");
    EXPECT_INT(parse("{memory: {qmd: {update: {interval: 'soon'}}}}", &c, err, sizeof err),
               CM_ECONFIG);
    EXPECT_CONTAINS(err, "memory.qmd.update.interval");
    EXPECT_INT(parse("{memory: {qmd: {limits: {maxResults: 0}}}}", &c, err, sizeof err),
               CM_ECONFIG);
    EXPECT_INT(parse("{memory: {qmd: {scope: {rules: [{action: 'maybe'}]}}}}", &c, err, sizeof err),
               CM_ECONFIG);
    EXPECT_CONTAINS(err, "memory.qmd.scope.rules[0].action");
    int64_t ms = 0;
    EXPECT(cm_config_duration_ms("90s", 60000, &ms) && ms == 90000);
    EXPECT(cm_config_duration_ms("5", 60000, &ms) && ms == 300000);
    EXPECT(cm_config_duration_ms("250ms", 60000, &ms) && ms == 250);
    EXPECT(!cm_config_duration_ms("5 minutes", 60000, &ms));
    EXPECT(!cm_config_duration_ms("", 60000, &ms));
}

TEST(qmd_scope_rules)
{
    cm_config c;
    char err[512];
    /* the default: deny, allow direct chats */
    EXPECT_INT(parse("{}", &c, err, sizeof err), CM_OK);
    EXPECT(cm_backend_qmd_scope_allowed(&c.qmd, "agent:main:telegram:direct:42"));
    EXPECT(cm_backend_qmd_scope_allowed(&c.qmd, "agent:main:main"));
    EXPECT(!cm_backend_qmd_scope_allowed(&c.qmd, "agent:main:telegram:group:42"));
    EXPECT(!cm_backend_qmd_scope_allowed(&c.qmd, "agent:main:discord:channel:7"));
    EXPECT(!cm_backend_qmd_scope_allowed(&c.qmd, NULL)); /* no key: no chat type */
    qmd_scope_key k;
    cm_backend_qmd_scope_parse("Agent:Main:Telegram:Group:42:topic:9", &k);
    EXPECT_STR(k.normal, "telegram:group:42:topic:9");
    EXPECT_STR(k.channel, "telegram");
    EXPECT_STR(k.chat_type, "group");
    cm_config_release(&c);
    EXPECT_INT(parse("{memory: {qmd: {scope: {default: 'deny', rules: ["
                     "{action: 'deny', match: {keyPrefix: 'discord:channel:'}},"
                     "{action: 'deny', match: {rawKeyPrefix: 'agent:main:slack:'}},"
                     "{action: 'allow', match: {keyPrefix: 'agent:ops:'}},"
                     "{action: 'allow', match: {channel: 'discord'}},"
                     "{action: 'allow', match: {chatType: 'group'}}]}}}}",
                     &c, err, sizeof err),
               CM_OK);
    EXPECT(!cm_backend_qmd_scope_allowed(&c.qmd, "agent:main:discord:channel:1"));
    EXPECT(cm_backend_qmd_scope_allowed(&c.qmd, "agent:main:discord:direct:1"));
    EXPECT(!cm_backend_qmd_scope_allowed(&c.qmd, "agent:main:slack:group:1"));   /* raw prefix */
    EXPECT(cm_backend_qmd_scope_allowed(&c.qmd, "agent:ops:whatever"));          /* legacy agent: */
    EXPECT(cm_backend_qmd_scope_allowed(&c.qmd, "agent:main:telegram:group:5")); /* chatType */
    EXPECT(!cm_backend_qmd_scope_allowed(&c.qmd, "agent:main:telegram:direct:5")); /* default */
    cm_config_release(&c);
    /* a scope without "default" allows what no rule denies */
    EXPECT_INT(parse("{memory: {qmd: {scope: {rules: [{action: 'deny', match: {chatType: "
                     "'channel'}}]}}}}",
                     &c, err, sizeof err),
               CM_OK);
    EXPECT(cm_backend_qmd_scope_allowed(&c.qmd, NULL));
    EXPECT(!cm_backend_qmd_scope_allowed(&c.qmd, "agent:main:discord:channel:1"));
    cm_config_release(&c);
}

TEST(qmd_parse_output)
{
    qmd_hits h;
    char err[256];
    EXPECT_INT(cm_backend_qmd_parse_hits(
                   "[{\"docid\":\"#a1\",\"score\":0.5,\"file\":\"qmd://notes-main/a%20b/"
                   "c.md\",\"snippet\":\"@@ -4,3 @@ (1 before, 1 after)\\nx\\ny\\nz\"}]",
                   "", &h, err, sizeof err),
               CM_OK);
    EXPECT_INT(h.n, 1);
    EXPECT_STR(h.v[0].collection, "notes-main");
    EXPECT_STR(h.v[0].file, "a b/c.md");
    EXPECT_STR(h.v[0].docid, "a1");
    EXPECT_STR(h.v[0].snippet, "x\ny\nz");
    EXPECT_INT(h.v[0].start_line, 4);
    EXPECT_INT(h.v[0].end_line, 6);
    cm_backend_qmd_hits_release(&h);
    /* noise before the array; "No results found" on either stream */
    EXPECT_INT(cm_backend_qmd_parse_hits(
                   "Loading...\n[{\"file\":\"qmd://c/x.md\",\"snippet\":\"a\\nb\"}]\n", "", &h, err,
                   sizeof err),
               CM_OK);
    EXPECT_INT(h.n, 1);
    EXPECT_INT(h.v[0].end_line, 2);
    cm_backend_qmd_hits_release(&h);
    EXPECT_INT(cm_backend_qmd_parse_hits("No results found.", "", &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 0);
    EXPECT_INT(cm_backend_qmd_parse_hits("", "[warn] qmd: No results found", &h, err, sizeof err),
               CM_OK);
    EXPECT_INT(cm_backend_qmd_parse_hits("", "boom", &h, err, sizeof err), CM_EINVAL);
    EXPECT_CONTAINS(err, "stdout empty (stderr: boom)");
    EXPECT_INT(cm_backend_qmd_parse_hits("{\"docid\": ", "", &h, err, sizeof err), CM_EINVAL);
    EXPECT_CONTAINS(err, "invalid JSON");
    EXPECT(cm_backend_qmd_refused_flags("error: Unknown option '--json'"));
    EXPECT(!cm_backend_qmd_refused_flags("database is locked"));
}

/* ---- the real QMD ----------------------------------------------------------------- */

#define NEED_QMD(path)                                                                             \
    const char *path = real_qmd();                                                                 \
    if (!path) SKIP("qmd", "QMD not installed (scripts/install-qmd.sh)")

static void real_config(qenv *q, const char *qmd, const char *extra)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{memory: {backend: 'qmd', qmd: {command: '%s', update: {waitForBootSync: true},"
             " %s}}}",
             qmd, extra);
    write_file(q->dir, "quantumclaw.json", text);
}

TEST(qmd_real_search)
{
    NEED_QMD(qmd);
    qenv q;
    qenv_init(&q, "{}");
    char notes[1200], extra[1600];
    snprintf(notes, sizeof notes, "%s/notes", q.dir);
    snprintf(extra, sizeof extra, "paths: [{path: '%s', name: 'notes'}]", notes);
    real_config(&q, qmd, extra);
    write_file(q.ws, "memory/2026-02-10.md",
               "# Day\n\nDinner with my sister at the noodle place.\n");
    write_file(notes, "deep/zebra.md", "# Outside\n\nline three\nThe zebra crossing note.\n");
    write_file(q.dir, "secret.md", "# Secret\n\nzebra secret outside every root\n");
    symlink(path_in(q.dir, "secret.md"), path_in(notes, "link.md"));
    cm_engine *e = qopen(&q);
    EXPECT(e);
    json_t *o = qsearch(e, "router VLAN", DIRECT);
    EXPECT(o);
    EXPECT_STR(json_string_value(json_object_get(o, "provider")), "qmd");
    EXPECT(!json_object_get(o, "fallback"));
    EXPECT_INT(nresults(o), 1);
    EXPECT_STR(r_str(o, 0, "path"), "MEMORY.md");
    EXPECT_STR(r_str(o, 0, "source"), "memory");
    EXPECT_CONTAINS(r_str(o, 0, "snippet"), "VLAN 20");
    EXPECT_CONTAINS(r_str(o, 0, "citation"), "MEMORY.md#L");
    json_decref(o);
    /* outside the workspace: qmd/<collection>/<path>, read by memory_get */
    o = qsearch(e, "zebra crossing", DIRECT);
    EXPECT(o && nresults(o) >= 1);
    EXPECT_STR(r_str(o, 0, "path"), "qmd/notes-main/deep/zebra.md");
    json_t *first = json_array_get(json_object_get(o, "results"), 0);
    EXPECT(json_integer_value(json_object_get(first, "startLine")) <= 4); /* the note's line */
    EXPECT(json_integer_value(json_object_get(first, "endLine")) >= 4);
    json_decref(o);
    char *js = NULL, err[512];
    EXPECT_INT(cm_memory_get(e, "qmd/notes-main/deep/zebra.md", 4, 1, &js, err, sizeof err), CM_OK);
    EXPECT_STR(js,
               "{\"path\":\"qmd/notes-main/deep/zebra.md\",\"text\":\"The zebra crossing note.\"}");
    cm_free(js);
    EXPECT_INT(cm_memory_get(e, "qmd/notes-main/../secret.md", 0, 0, &js, err, sizeof err),
               CM_EPATH);
    EXPECT_INT(cm_memory_get(e, "qmd/notes-main/link.md", 0, 0, &js, err, sizeof err), CM_EPATH);
    EXPECT_INT(cm_memory_get(e, "qmd/nope-main/x.md", 0, 0, &js, err, sizeof err), CM_EPATH);
    EXPECT_CONTAINS(err, "unknown qmd collection");
    EXPECT_INT(cm_memory_get(e, "qmd/notes-main/deep/zebra.txt", 0, 0, &js, err, sizeof err),
               CM_EPATH);
    /* the workspace's memory files keep their rules */
    EXPECT_INT(cm_memory_get(e, "memory/2026-02-10.md", 3, 1, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "noodle place");
    cm_free(js);
    EXPECT_INT(cm_memory_get(e, "../secret.md", 0, 0, &js, err, sizeof err), CM_EPATH);
    /* status: QMD serves, its collections and documents */
    o = qstatus(e);
    EXPECT(o);
    EXPECT_STR(json_string_value(json_object_get(o, "backend")), "qmd");
    json_t *qs = json_object_get(o, "qmd");
    EXPECT_INT(json_array_size(json_object_get(qs, "collections")), 4);
    EXPECT(json_integer_value(json_object_get(qs, "documents")) >= 3);
    json_decref(o);
    /* maxResults and minScore of the call */
    cm_search_opts so = {1, 0.99, 0};
    EXPECT_INT(cm_memory_search_session(e, "zebra", &so, DIRECT, &js, err, sizeof err), CM_OK);
    o = json_loads(js, 0, NULL);
    cm_free(js);
    EXPECT_INT(nresults(o), 0);
    json_decref(o);
    /* a collection removed behind the backend's back is registered again */
    char xc[1300], xk[1300], xd[1300];
    snprintf(xc, sizeof xc, "XDG_CONFIG_HOME=%s/agents/main/qmd/xdg-config", q.state);
    snprintf(xd, sizeof xd, "QMD_CONFIG_DIR=%s/agents/main/qmd/xdg-config", q.state);
    snprintf(xk, sizeof xk, "XDG_CACHE_HOME=%s/agents/main/qmd/xdg-cache", q.state);
    const char *env[] = {xc, xd, xk, NULL};
    const char *rm[] = {qmd, "collection", "remove", "notes-main", NULL};
    run_result rr = run_cmd(env, rm);
    EXPECT_INT(rr.status, 0);
    run_result_release(&rr);
    o = qsearch(e, "zebra crossing", DIRECT);
    EXPECT(o && nresults(o) >= 1 && !json_object_get(o, "fallback"));
    EXPECT_STR(r_str(o, 0, "path"), "qmd/notes-main/deep/zebra.md");
    json_decref(o);
    EXPECT_CONTAINS(q.log.data, "registering the collections again");
    cm_engine_close(e);
    EXPECT_NO_LEFTOVERS(&q);
    /* a second open: the collections are registered already (no add) */
    e = qopen(&q);
    EXPECT(e);
    o = qsearch(e, "noodle", DIRECT);
    EXPECT(o && nresults(o) == 1);
    EXPECT_STR(r_str(o, 0, "path"), "memory/2026-02-10.md");
    json_decref(o);
    cm_engine_close(e);
    EXPECT_NO_LEFTOVERS(&q);
    qenv_release(&q);
}

TEST(qmd_real_scope)
{
    NEED_QMD(qmd);
    qenv q;
    qenv_init(&q, "{}");
    real_config(&q, qmd, "limits: {maxResults: 2}");
    cm_engine *e = qopen(&q);
    EXPECT(e);
    json_t *o = qsearch(e, "router", DIRECT);
    EXPECT(o && nresults(o) == 1);
    json_decref(o);
    o = qsearch(e, "router", "agent:main:telegram:group:42");
    EXPECT(o);
    EXPECT_INT(nresults(o), 0);
    EXPECT(!json_object_get(o, "fallback")); /* denied is not a failure */
    json_decref(o);
    EXPECT_CONTAINS(q.log.data, "denied by scope (channel=telegram, chatType=group");
    o = qsearch(e, "router", NULL);
    EXPECT(o && nresults(o) == 0);
    json_decref(o);
    EXPECT_CONTAINS(q.log.data, "channel=unknown, chatType=unknown, session=<none>");
    cm_engine_close(e);
    /* a scope that allows groups of one channel */
    real_config(&q, qmd,
                "scope: {default: 'deny', rules: [{action: 'allow', match: {keyPrefix: "
                "'telegram:group:'}}]}");
    e = qopen(&q);
    EXPECT(e);
    o = qsearch(e, "router", "agent:main:telegram:group:42");
    EXPECT(o && nresults(o) == 1);
    json_decref(o);
    o = qsearch(e, "router", DIRECT);
    EXPECT(o && nresults(o) == 0);
    json_decref(o);
    cm_engine_close(e);
    EXPECT_NO_LEFTOVERS(&q);
    qenv_release(&q);
}

/* `index --drop` with the QMD backend removes QMD's own index as well as the
 * builtin one, and forgets the last update; the next sync builds both
 * again and QMD answers as before. */
TEST(qmd_real_drop)
{
    NEED_QMD(qmd);
    qenv q;
    qenv_init(&q, "{}");
    real_config(&q, qmd, "update: {debounceMs: 3600000}");
    char qidx[1200], builtin[1200], state[1200];
    snprintf(qidx, sizeof qidx, "%s/agents/main/qmd/xdg-cache/qmd/index.sqlite", q.state);
    snprintf(builtin, sizeof builtin, "%s/memory/main.clawmem.sqlite", q.state);
    snprintf(state, sizeof state, "%s/agents/main/qmd/clawmem-state", q.state);
    cm_engine *e = qopen(&q);
    EXPECT(e);
    char err[512];
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    json_t *o = qsearch(e, "router VLAN", DIRECT);
    EXPECT(o && nresults(o) == 1 && !json_object_get(o, "fallback"));
    json_decref(o);
    EXPECT(access(qidx, F_OK) == 0);
    EXPECT(access(builtin, F_OK) == 0);
    EXPECT(access(state, F_OK) == 0);
    int dropped = 0;
    EXPECT_INT(cm_engine_drop_index(e, &dropped, err, sizeof err), CM_OK);
    EXPECT_INT(dropped, 1);
    EXPECT(access(qidx, F_OK) != 0);
    EXPECT(access(builtin, F_OK) != 0);
    EXPECT(access(state, F_OK) != 0);
    cm_engine_close(e);
    EXPECT_NO_LEFTOVERS(&q);
    /* built again by the next sync, within the debounce of the last update */
    e = qopen(&q);
    EXPECT(e);
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    EXPECT(access(qidx, F_OK) == 0);
    o = qsearch(e, "router VLAN", DIRECT);
    EXPECT(o && nresults(o) == 1 && !json_object_get(o, "fallback"));
    EXPECT_STR(json_string_value(json_object_get(o, "provider")), "qmd");
    json_decref(o);
    cm_engine_close(e);
    EXPECT_NO_LEFTOVERS(&q);
    /* a drop right after open (`index --drop`) calls off the boot's update,
     * which would otherwise start after it and be killed at close */
    real_config(&q, qmd, "");
    for (int i = 0; i < 3; i++) {
        cm_buf_reset(&q.log);
        e = qopen(&q);
        EXPECT(e);
        EXPECT_INT(cm_engine_drop_index(e, &dropped, err, sizeof err), CM_OK);
        cm_engine_close(e);
        EXPECT(!q.log.data || !strstr(q.log.data, "qmd update failed"));
        EXPECT(access(qidx, F_OK) != 0);
    }
    EXPECT_NO_LEFTOVERS(&q);
    qenv_release(&q);
}

TEST(qmd_real_sessions)
{
    NEED_QMD(qmd);
    qenv q;
    qenv_init(&q, "{}");
    real_config(&q, qmd, "sessions: {enabled: true, retentionDays: 30}");
    char sdir[1200];
    snprintf(sdir, sizeof sdir, "%s/agents/main/sessions", q.state);
    write_file(sdir, "s1.jsonl",
               "{\"type\":\"session\",\"id\":\"s1\"}\n"
               "{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"Where did we "
               "park the kayak? token=sk-abcdefghijklmnopqrstuvwxyz1234\"}}\n"
               "{\"type\":\"message\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":"
               "\"text\",\"text\":\"Behind the boathouse.\"}]}}\n");
    write_file(sdir, "old.jsonl",
               "{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"ancient "
               "kayak talk\"}}\n");
    set_mtime(path_in(sdir, "old.jsonl"), (long)time(NULL) - 90 * 86400);
    cm_engine *e = qopen(&q);
    EXPECT(e);
    char exp[1300];
    snprintf(exp, sizeof exp, "%s/agents/main/qmd/sessions", q.state);
    buf b = BUF_INIT;
    char err[512];
    EXPECT_INT(cm_fs_read_file(path_in(exp, "s1.md"), 1 << 20, &b, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(b.data, "# Session s1");
    EXPECT_CONTAINS(b.data, "User: Where did we park the kayak?");
    EXPECT_CONTAINS(b.data, "Assistant: Behind the boathouse.");
    EXPECT(!strstr(b.data, "sk-abcdefghijklmnopqrstuvwxyz1234")); /* sanitised */
    cm_buf_release(&b);
    EXPECT(access(path_in(exp, "old.md"), F_OK) != 0); /* past retentionDays */
    json_t *o = qsearch(e, "boathouse", DIRECT);
    EXPECT(o && nresults(o) == 1);
    EXPECT_STR(r_str(o, 0, "path"), "qmd/sessions-main/s1.md");
    EXPECT_STR(r_str(o, 0, "source"), "sessions");
    json_decref(o);
    char *js = NULL;
    EXPECT_INT(cm_memory_get(e, "qmd/sessions-main/s1.md", 1, 1, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "# Session s1");
    cm_free(js);
    /* a removed session leaves the export at the next update */
    unlink(path_in(sdir, "s1.jsonl"));
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    EXPECT(access(path_in(exp, "s1.md"), F_OK) != 0);
    o = qsearch(e, "boathouse", DIRECT);
    EXPECT(o && nresults(o) == 0);
    json_decref(o);
    cm_engine_close(e);
    EXPECT_NO_LEFTOVERS(&q);
    qenv_release(&q);
}

/* Waits (up to ms of real time) until the engine's sidecar has finished more
 * than n updates. */
static bool wait_updates(cm_engine *e, int n, int ms)
{
    for (int i = 0; i < ms / 10; i++) {
        if (cm_engine_qmd_updates(e) > n) return true;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

TEST(qmd_real_interval)
{
    NEED_QMD(qmd);
    qenv q;
    qenv_init(&q, "{}");
    real_config(&q, qmd, "update: {waitForBootSync: true, interval: '5m', debounceMs: 1000}");
    cm_engine_qmd_test_clock(fake_clock, &fake_now);
    cm_engine *e = qopen(&q);
    cm_engine_qmd_test_clock(NULL, NULL);
    EXPECT(e);
    json_t *o = qsearch(e, "heron", DIRECT);
    EXPECT(o && nresults(o) == 0);
    json_decref(o);
    write_file(q.ws, "memory/birds.md", "# Birds\n\nA grey heron nests by the lake.\n");
    int before = cm_engine_qmd_updates(e);
    /* not due yet: the note is not found */
    __atomic_add_fetch(&fake_now, 60000, __ATOMIC_SEQ_CST);
    cm_engine_qmd_poke(e);
    o = qsearch(e, "heron", DIRECT);
    EXPECT(o && nresults(o) == 0);
    json_decref(o);
    EXPECT_INT(cm_engine_qmd_updates(e), before);
    /* past update.interval: the schedule updates, and the note is found */
    __atomic_add_fetch(&fake_now, 5 * 60000, __ATOMIC_SEQ_CST);
    cm_engine_qmd_poke(e);
    EXPECT(wait_updates(e, before, 60000));
    o = qsearch(e, "heron", DIRECT);
    EXPECT(o && nresults(o) == 1);
    EXPECT_STR(r_str(o, 0, "path"), "memory/birds.md");
    json_decref(o);
    cm_engine_close(e);
    EXPECT_NO_LEFTOVERS(&q);
    qenv_release(&q);
}
