/*
 * test_coexist.c — clawmem beside QuantumClaw 2026.3.22 on one state dir.
 * QuantumClaw keeps its memory index at <stateDir>/memory/<agentId>.sqlite
 * with clawmem's table names and other columns; clawmem's default index is
 * memory/<agentId>.clawmem.sqlite. Each program's sync leaves the other's
 * file byte-identical with its mtime; an index of clawmem's at the old
 * default path moves once (also when processes race); another program's
 * file at a configured store.path is reported by every command and never
 * written without --force.
 */
#include <jansson.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "test.h"

typedef struct ctx {
    char *dir;
    char ws[1024], state[1024], cfg[1024];
    char qc[1100], ours[1100]; /* QuantumClaw's index, clawmem's default one */
} ctx;

static void ctx_init(ctx *c)
{
    c->dir = tmp_dir();
    snprintf(c->ws, sizeof c->ws, "%s/ws", c->dir);
    snprintf(c->state, sizeof c->state, "%s/state", c->dir);
    snprintf(c->cfg, sizeof c->cfg, "%s/qc.json", c->dir);
    snprintf(c->qc, sizeof c->qc, "%s/memory/main.sqlite", c->state);
    snprintf(c->ours, sizeof c->ours, "%s/memory/main.clawmem.sqlite", c->state);
    write_file(c->ws, "MEMORY.md", "# Facts\n\nThe dog is called Biscuit.\n");
    write_file(c->dir, "qc.json", "{}");
    mkdir(c->state, 0700);
    mkdir(path_in(c->state, "memory"), 0700);
}

/* clawmem CMD [a1 [a2]] on c's workspace, state dir and config. */
static run_result cm(const ctx *c, const char *cmd, const char *a1, const char *a2)
{
    const char *args[] = {"--workspace", c->ws, "--state-dir", c->state, "--config", c->cfg,
                          cmd,           a1,    a2,            NULL};
    return run_clawmem(NULL, args);
}

/* A file's bytes and mtime. */
typedef struct snap {
    buf bytes;
    struct timespec mtime;
    ino_t ino;
} snap;

static snap take(const char *path)
{
    snap s = {BUF_INIT, {0, 0}, 0};
    struct stat st;
    FILE *f = fopen(path, "rb");
    char tmp[4096];
    size_t n;
    while (f && (n = fread(tmp, 1, sizeof tmp, f)) > 0)
        cm_buf_add(&s.bytes, tmp, n);
    if (f) fclose(f);
    if (stat(path, &st) == 0) {
        s.mtime = st.st_mtim;
        s.ino = st.st_ino;
    }
    return s;
}

/* path still has a's bytes and mtime. */
static bool same(const char *path, const snap *a)
{
    snap b = take(path);
    bool eq = b.bytes.len == a->bytes.len && a->bytes.len > 0 &&
              memcmp(b.bytes.data, a->bytes.data, a->bytes.len) == 0 &&
              b.mtime.tv_sec == a->mtime.tv_sec && b.mtime.tv_nsec == a->mtime.tv_nsec;
    cm_buf_release(&b.bytes);
    return eq;
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* No journal, WAL or shared-memory file beside path. */
static bool no_sidecars(const char *path)
{
    static const char *const tails[] = {"-journal", "-wal", "-shm"};
    char p[1200];
    for (size_t i = 0; i < ARRAY_LEN(tails); i++) {
        snprintf(p, sizeof p, "%s%s", path, tails[i]);
        if (exists(p)) return false;
    }
    return true;
}

TEST(coexist_each_sync_leaves_the_others_index_alone)
{
    ctx c;
    ctx_init(&c);
    qc_index_sync(c.qc, "MEMORY.md", "The dog is called Biscuit.");
    set_mtime(c.qc, 1700000000);
    snap q = take(c.qc);
    EXPECT(q.bytes.len > 0);

    /* clawmem's sync: its own file beside QuantumClaw's */
    run_result r = cm(&c, "index", NULL, NULL);
    EXPECT_INT(r.status, 0);
    run_result_release(&r);
    EXPECT(exists(c.ours));
    EXPECT(same(c.qc, &q));
    EXPECT(no_sidecars(c.qc));
    r = cm(&c, "search", "Biscuit", NULL);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "MEMORY.md");
    run_result_release(&r);
    r = cm(&c, "search", "Biscuit", "--no-sync");
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "MEMORY.md");
    run_result_release(&r);
    r = cm(&c, "status", "--json", NULL);
    json_t *st = json_loads(r.out, 0, NULL);
    EXPECT_STR(json_string_value(json_object_get(st, "indexPath")), c.ours);
    EXPECT(json_object_get(st, "indexError") == NULL);
    json_decref(st);
    run_result_release(&r);
    EXPECT(same(c.qc, &q));

    /* QuantumClaw's sync: clawmem's file is left alone, and clawmem's next
     * sync finds its index as it left it (no rebuild) */
    snap o = take(c.ours);
    qc_index_sync(c.qc, "memory/2026-03-01.md", "Walked Biscuit by the river.");
    set_mtime(c.qc, 1700000100);
    cm_buf_release(&q.bytes);
    q = take(c.qc);
    EXPECT(same(c.ours, &o));
    r = cm(&c, "index", NULL, NULL);
    EXPECT_INT(r.status, 0);
    EXPECT(strstr(r.out, "full rebuild") == NULL);
    run_result_release(&r);
    EXPECT(same(c.qc, &q));
    EXPECT(no_sidecars(c.qc));
    cm_buf_release(&q.bytes);
    cm_buf_release(&o.bytes);
}

TEST(coexist_another_programs_index_is_reported_never_written)
{
    /* store.path set (in clawmem.json) to QuantumClaw's own file */
    ctx c;
    ctx_init(&c);
    write_file(c.state, "clawmem.json",
               "{agents: {defaults: {memorySearch: {store: {path: 'memory/{agentId}.sqlite'}}}}}");
    qc_index_sync(c.qc, "MEMORY.md", "The dog is called Biscuit.");
    set_mtime(c.qc, 1700000000);
    snap q = take(c.qc);
    static const char *const want[] = {"another program's index (QuantumClaw's)",
                                       "memorySearch.store.path", "clawmem index --force"};

    run_result r = cm(&c, "status", NULL, NULL);
    for (size_t i = 0; i < ARRAY_LEN(want); i++)
        EXPECT_CONTAINS(r.out, want[i]);
    run_result_release(&r);
    r = cm(&c, "status", "--json", NULL);
    json_t *st = json_loads(r.out, 0, NULL);
    EXPECT_CONTAINS(json_string_value(json_object_get(st, "indexError")), want[0]);
    json_decref(st);
    run_result_release(&r);
    /* search, with and without its sync, and index: an error, not an empty answer */
    const char *const runs[][3] = {{"search", "Biscuit", NULL},
                                   {"search", "Biscuit", "--no-sync"},
                                   {"index", NULL, NULL},
                                   {"index", "--verbose", NULL}};
    for (size_t k = 0; k < ARRAY_LEN(runs); k++) {
        r = cm(&c, runs[k][0], runs[k][1], runs[k][2]);
        EXPECT_INT(r.status, 1);
        for (size_t i = 0; i < ARRAY_LEN(want); i++)
            EXPECT_CONTAINS(r.err, want[i]);
        run_result_release(&r);
    }
    /* get answers from the file, and warns */
    r = cm(&c, "get", "MEMORY.md", NULL);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "Biscuit");
    EXPECT_CONTAINS(r.err, want[0]);
    run_result_release(&r);
    /* mcp: the payload says so */
    proc p;
    const char *margs[] = {"--workspace", c.ws, "--state-dir", c.state, "--config", c.cfg,
                           "mcp",         NULL};
    proc_start(&p, NULL, margs);
    proc_send(&p, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"memory_search\",\"arguments\":{\"query\":\"Biscuit\"}}}");
    char *line = proc_line(&p, 10000);
    json_t *a = line ? json_loads(line, 0, NULL) : NULL;
    json_t *sc = json_object_get(json_object_get(a, "result"), "structuredContent");
    EXPECT(json_is_true(json_object_get(sc, "disabled")));
    EXPECT_CONTAINS(json_string_value(json_object_get(sc, "error")), want[0]);
    json_decref(a);
    free(line);
    EXPECT_INT(proc_stop(&p, 0, 10000), 0);
    char *perr = proc_stderr(&p);
    EXPECT_CONTAINS(perr, want[0]); /* the watcher's sync, on stderr */
    free(perr);

    EXPECT(same(c.qc, &q));
    EXPECT(no_sidecars(c.qc));
    cm_buf_release(&q.bytes);

    /* --force: the user asked for clawmem's index there */
    r = cm(&c, "index", "--force", NULL);
    EXPECT_INT(r.status, 0);
    run_result_release(&r);
    r = cm(&c, "search", "Biscuit", "--no-sync");
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "MEMORY.md");
    run_result_release(&r);
}

/* A child: opens the engine (which moves the index) once the barrier opens. */
static void open_after(const ctx *c, int barrier)
{
    char b;
    ssize_t n = read(barrier, &b, 1); /* returns at EOF: the parent closed it */
    (void)n;
    cm_options o = {NULL, c->ws, c->cfg, c->state, NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[CM_ERR_SIZE];
    int ok = cm_engine_open(&o, &e, err, sizeof err) == CM_OK;
    cm_engine_close(e);
    _exit(ok ? 0 : 1);
}

TEST(coexist_old_default_index_moves_once)
{
    /* an index of clawmem's at the old default path (built with store.path
     * naming it), then the default again: it moves, with its WAL files */
    ctx c;
    ctx_init(&c);
    write_file(c.state, "clawmem.json",
               "{agents: {defaults: {memorySearch: {store: {path: 'memory/{agentId}.sqlite'}}}}}");
    run_result r = cm(&c, "index", NULL, NULL);
    EXPECT_INT(r.status, 0);
    run_result_release(&r);
    r = cm(&c, "search", "Biscuit", NULL); /* a reader keeps the -wal and -shm files */
    EXPECT_INT(r.status, 0);
    run_result_release(&r);
    EXPECT(exists(c.qc));
    char wal[1200], shm[1200];
    snprintf(wal, sizeof wal, "%s-wal", c.qc);
    snprintf(shm, sizeof shm, "%s-shm", c.qc);
    EXPECT(exists(wal));
    /* a commit still in the WAL only (no checkpoint on close) must move too */
    sqlite3 *db = NULL;
    EXPECT(sqlite3_open(c.qc, &db) == SQLITE_OK);
    int on = 1;
    sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &on);
    sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    EXPECT(sqlite3_exec(db,
                        "PRAGMA wal_autocheckpoint=0; INSERT INTO meta VALUES('test_marker', 'x')",
                        NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    struct stat wst;
    EXPECT(stat(wal, &wst) == 0 && wst.st_size > 0);
    snap before = take(c.qc);
    unlink(path_in(c.state, "clawmem.json"));

    /* four processes open it at once: one moves it, none rebuilds it */
    int bar[2];
    EXPECT(pipe(bar) == 0);
    pid_t kids[4];
    for (int i = 0; i < 4; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            close(bar[1]);
            open_after(&c, bar[0]);
        }
    }
    close(bar[0]);
    close(bar[1]);
    for (int i = 0; i < 4; i++) {
        int st = 0;
        waitpid(kids[i], &st, 0);
        EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    EXPECT(!exists(c.qc));
    EXPECT(!exists(wal));
    EXPECT(!exists(shm));
    EXPECT(exists(c.ours));
    struct stat st;
    EXPECT(stat(c.ours, &st) == 0 && st.st_ino == before.ino); /* the same file, moved */
    cm_buf_release(&before.bytes);
    EXPECT(db_integrity_ok(c.ours));
    db = NULL;
    sqlite3_stmt *q = NULL;
    EXPECT(sqlite3_open(c.ours, &db) == SQLITE_OK);
    EXPECT(sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'test_marker'", -1, &q,
                              NULL) == SQLITE_OK);
    bool marked = sqlite3_step(q) == SQLITE_ROW;
    sqlite3_finalize(q);
    sqlite3_close(db);
    EXPECT(marked);
    r = cm(&c, "index", NULL, NULL);
    EXPECT_INT(r.status, 0);
    EXPECT(strstr(r.out, "full rebuild") == NULL);
    run_result_release(&r);
    r = cm(&c, "search", "Biscuit", "--no-sync");
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "MEMORY.md");
    run_result_release(&r);

    /* a store.path set explicitly stays where it is */
    write_file(c.state, "clawmem.json",
               "{agents: {defaults: {memorySearch: {store: {path: 'memory/{agentId}.sqlite'}}}}}");
    r = cm(&c, "index", NULL, NULL);
    EXPECT_INT(r.status, 0);
    run_result_release(&r);
    r = cm(&c, "search", "Biscuit", NULL);
    EXPECT_INT(r.status, 0);
    run_result_release(&r);
    EXPECT(exists(c.qc));
    EXPECT(exists(c.ours)); /* and the moved one is not touched */
}
