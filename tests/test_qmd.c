/*
 * test_qmd.c — memory.backend = "qmd". Against the real QMD that
 * scripts/install-qmd.sh installs (make test runs it; $CLAWMEM_TEST_QMD is its
 * launcher): collections, update, search payloads, qmd/<collection>/ paths
 * through memory_get, scope allow/deny, the sessions export, a note edited
 * then found after the update interval (the clock injected). With a stand-in
 * shell script printing QMD's documented output or misbehaving on purpose:
 * vsearch/query, refused flags, crash, hang past the timeout, garbage JSON,
 * a missing binary, the builtin fallback and the recovery. After each test
 * no process started with its QMD home is left (checked through /proc).
 */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../src/backend/qmd.h"
#include "../src/base/fs.h"
#include "../src/config/config.h"
#include "../src/engine/engine_int.h"
#include "clawmem.h"
#include "test.h"

typedef struct qenv {
    char *dir;
    char ws[1024], state[1024], cfg[1024], fake[1024];
    buf log;
} qenv;

static void on_log(void *ctx, cm_log_level level, const char *msg)
{
    qenv *q = ctx;
    if (level >= CM_LOG_WARN) cm_buf_printf(&q->log, "%s\n", msg);
}

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

static void qenv_init(qenv *q, const char *config)
{
    memset(q, 0, sizeof *q);
    q->dir = tmp_dir();
    snprintf(q->ws, sizeof q->ws, "%s/ws", q->dir);
    snprintf(q->state, sizeof q->state, "%s/state", q->dir);
    snprintf(q->cfg, sizeof q->cfg, "%s/quantumclaw.json", q->dir);
    snprintf(q->fake, sizeof q->fake, "%s/fake", q->dir);
    write_file(q->dir, "quantumclaw.json", config);
    write_file(q->ws, "MEMORY.md", "# Memory\n\nThe router uses VLAN 20 for AdGuard.\n");
}

static cm_engine *qopen(qenv *q)
{
    cm_options o = {NULL, q->ws, q->cfg, q->state, on_log, q, 0};
    cm_engine *e = NULL;
    char err[512];
    if (cm_engine_open(&o, &e, err, sizeof err)) {
        fprintf(stderr, "  open: %s\n", err);
        return NULL;
    }
    return e;
}

/* The payload of a search as session key (NULL: none); NULL on failure. */
static json_t *qsearch(cm_engine *e, const char *query, const char *key)
{
    char *js = NULL, err[512];
    if (cm_memory_search_session(e, query, NULL, key, &js, err, sizeof err)) {
        fprintf(stderr, "  search: %s\n", err);
        return NULL;
    }
    json_t *o = json_loads(js, 0, NULL);
    cm_free(js);
    return o;
}

static size_t nresults(const json_t *o)
{
    return json_array_size(json_object_get(o, "results"));
}

static const char *r_str(const json_t *o, size_t i, const char *k)
{
    return json_string_value(json_object_get(json_array_get(json_object_get(o, "results"), i), k));
}

static json_t *qstatus(cm_engine *e)
{
    char *js = NULL, err[512];
    if (cm_engine_status(e, 0, &js, err, sizeof err)) return NULL;
    json_t *o = json_loads(js, 0, NULL);
    cm_free(js);
    return o;
}

/* Processes (other than this one) whose environment names dir: what a
 * sidecar run left behind. */
static int leftovers(const char *dir)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0 || pid == getpid()) continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/environ", pid);
        buf b = BUF_INIT;
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        char tmp[4096];
        size_t k;
        while ((k = fread(tmp, 1, sizeof tmp, f)) > 0)
            cm_buf_add(&b, tmp, k);
        fclose(f);
        for (size_t i = 0; i < b.len; i += strlen(b.data + i) + 1)
            if (strstr(b.data + i, dir) && !strncmp(b.data + i, "XDG_CACHE_HOME=", 15)) {
                /* a zombie being reaped by someone else is not ours to count */
                char st[64];
                snprintf(st, sizeof st, "/proc/%ld/stat", pid);
                buf s = BUF_INIT;
                FILE *g = fopen(st, "r");
                if (g) {
                    k = fread(tmp, 1, sizeof tmp - 1, g);
                    tmp[k] = 0;
                    fclose(g);
                    char *rp = strrchr(tmp, ')');
                    if (!(rp && rp[1] == ' ' && rp[2] == 'Z')) n++;
                }
                cm_buf_release(&s);
                break;
            }
        cm_buf_release(&b);
    }
    if (d) closedir(d);
    return n;
}

/* Leftovers that outlive a kill: a process SIGKILLed with its group leaves
 * /proc when the kernel gets to it, which on a loaded machine is after the
 * kill returns, so the count may fall for up to 5 s; one not killed (a sleep
 * 30 left running) is still counted then. */
static int leftovers_settled(const char *dir)
{
    int n = leftovers(dir);
    for (int i = 0; n && i < 250; i++) {
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
        n = leftovers(dir);
    }
    return n;
}

#define EXPECT_NO_LEFTOVERS(q) EXPECT_INT(leftovers_settled((q)->dir), 0)

static void qenv_release(qenv *q)
{
    cm_buf_release(&q->log);
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

#define DIRECT "agent:main:telegram:direct:42"

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

static int64_t fake_now = 1700000000000;
static int64_t fake_clock(void *ctx)
{
    return __atomic_load_n((int64_t *)ctx, __ATOMIC_SEQ_CST);
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
