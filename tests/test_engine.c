/*
 * test_engine.c — the engine through the public API: incremental sync,
 * fingerprint rebuilds, crash safety of rebuilds and syncs (the indexer is
 * killed with SIGKILL at many points), problems in status, CJK search, and a
 * corrupt index. The tests marked TEST_BOTH run twice: over SQLite, and as
 * NAME_pg over the PostgreSQL store (the cluster of scripts/pg-test-cluster.sh,
 * $CLAWMEM_TEST_PG_DSN; skipped without one).
 */
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/store/store.h"
#include "test.h"

typedef struct env {
    char *dir;
    char ws[1024], state[1024], cfg[1024], db[1024];
} env;

static void env_init(env *e)
{
    e->dir = tmp_dir();
    snprintf(e->ws, sizeof e->ws, "%s/ws", e->dir);
    snprintf(e->state, sizeof e->state, "%s/state", e->dir);
    snprintf(e->cfg, sizeof e->cfg, "%s/config.json", e->dir);
    snprintf(e->db, sizeof e->db, "%s/state/memory/main.clawmem.sqlite", e->dir);
    write_file(e->dir, "config.json", "{}");
    if (pg_dsn) pg_overlay(e->state, "main");
}

static cm_engine *open_engine(const env *e)
{
    cm_options o = {NULL, e->ws, e->cfg, e->state, NULL, NULL, 0};
    cm_engine *eng = NULL;
    char err[512];
    if (cm_engine_open(&o, &eng, err, sizeof err) != CM_OK) {
        fprintf(stderr, "  open: %s\n", err);
        return NULL;
    }
    return eng;
}

static cm_rc sync_e(const env *e, unsigned flags, cm_sync_stats *st)
{
    cm_engine *eng = open_engine(e);
    if (!eng) return CM_ECONFIG;
    char err[512];
    cm_rc rc = cm_engine_sync(eng, flags, NULL, NULL, st, err, sizeof err);
    if (rc) fprintf(stderr, "  sync: %s\n", err);
    cm_engine_close(eng);
    return rc;
}

/* Runs a search and returns the payload (static, valid until the next call). */
static json_t *search_e(const env *e, const char *q)
{
    static json_t *last;
    json_decref(last);
    last = NULL;
    cm_engine *eng = open_engine(e);
    if (!eng) return NULL;
    char err[512], *js = NULL;
    cm_search_opts o = {10, 0, 0};
    if (cm_memory_search(eng, q, &o, &js, err, sizeof err) == CM_OK) last = json_loads(js, 0, NULL);
    cm_free(js);
    cm_engine_close(eng);
    return last;
}

static size_t nresults(json_t *p)
{
    return json_array_size(json_object_get(p, "results"));
}

static const char *result_path(json_t *p, size_t i)
{
    return json_string_value(
        json_object_get(json_array_get(json_object_get(p, "results"), i), "path"));
}

static bool any_leftovers(const env *e)
{
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/memory", e->state);
    DIR *d = opendir(dir);
    bool found = false;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, ".rebuild-")) found = true;
    if (d) closedir(d);
    return found;
}

static bool integrity_ok(const env *e)
{
    return pg_dsn ? pg_integrity_ok("main") : db_integrity_ok(e->db);
}

TEST_BOTH(engine_incremental_sync)
{
    env e;
    env_init(&e);
    write_file(e.ws, "MEMORY.md", "# Facts\nThe dog is called Biscuit.\n");
    write_file(e.ws, "memory/2026-02-10.md", "Configured the Omada router.\n");
    write_file(e.ws, "memory/2026-02-11.md", "Dentist on Friday.\n");
    cm_sync_stats st;
    EXPECT_INT(sync_e(&e, 0, &st), CM_OK);
    EXPECT(st.rebuilt);
    EXPECT_INT(st.files_indexed, 3);
    /* no change: nothing read */
    EXPECT_INT(sync_e(&e, 0, &st), CM_OK);
    EXPECT(!st.rebuilt);
    EXPECT_INT(st.files_unchanged, 3);
    EXPECT_INT(st.bytes_read, 0);
    /* edit one, add one, delete one */
    write_file(e.ws, "memory/2026-02-10.md", "Replaced the router with a Ubiquiti gateway.\n");
    set_mtime(path_in(e.ws, "memory/2026-02-10.md"), 2000000000);
    write_file(e.ws, "memory/2026-02-12.md", "Biscuit has a vet appointment.\n");
    unlink(path_in(e.ws, "memory/2026-02-11.md"));
    EXPECT_INT(sync_e(&e, 0, &st), CM_OK);
    EXPECT(!st.rebuilt);
    EXPECT_INT(st.files_indexed, 2);
    EXPECT_INT(st.files_unchanged, 1);
    EXPECT_INT(st.files_removed, 1);
    EXPECT_INT(nresults(search_e(&e, "Omada")), 0);
    EXPECT_INT(nresults(search_e(&e, "Ubiquiti")), 1);
    EXPECT_INT(nresults(search_e(&e, "Dentist")), 0);
    json_t *p = search_e(&e, "Biscuit");
    EXPECT_INT(nresults(p), 2);
    /* touched but identical content: hashed, not re-chunked */
    set_mtime(path_in(e.ws, "MEMORY.md"), 1900000000);
    EXPECT_INT(sync_e(&e, 0, &st), CM_OK);
    EXPECT_INT(st.files_unchanged, 3);
    EXPECT_INT(st.chunks_written, 0);
    EXPECT(st.bytes_read > 0);
    EXPECT(integrity_ok(&e));
}

TEST_BOTH(engine_unchanged_size_and_mtime_are_not_read)
{
    env e;
    env_init(&e);
    write_file(e.ws, "memory/a.md", "alphaqz bravoqz\n");
    set_mtime(path_in(e.ws, "memory/a.md"), 1800000000);
    EXPECT_INT(sync_e(&e, 0, NULL), CM_OK);
    /* same size, same mtime, new content: a stat-only sync cannot see it
     * (words the static model lacks: its fallback would find "alpha" from
     * "delta") */
    write_file(e.ws, "memory/a.md", "deltaqz gammaqz\n");
    set_mtime(path_in(e.ws, "memory/a.md"), 1800000000);
    cm_sync_stats st;
    EXPECT_INT(sync_e(&e, 0, &st), CM_OK);
    EXPECT_INT(st.bytes_read, 0);
    EXPECT_INT(nresults(search_e(&e, "alphaqz")), 1);
    EXPECT_INT(nresults(search_e(&e, "deltaqz")), 0);
    EXPECT_INT(sync_e(&e, CM_SYNC_FORCE, &st), CM_OK); /* --force re-reads everything */
    EXPECT_INT(nresults(search_e(&e, "deltaqz")), 1);
}

TEST_BOTH(engine_fingerprint_change_rebuilds)
{
    env e;
    env_init(&e);
    write_file(e.ws, "MEMORY.md", "# A\nsome words\n");
    cm_sync_stats st;
    EXPECT_INT(sync_e(&e, 0, &st), CM_OK);
    /* an incremental change leaves frames in the (persistent) WAL ... */
    write_file(e.ws, "memory/b.md", "walnut frames\n");
    EXPECT_INT(sync_e(&e, 0, &st), CM_OK);
    EXPECT(!st.rebuilt);
    write_file(e.dir, "config.json",
               "{agents: {defaults: {memorySearch: {chunking: {tokens: 50}}}}}");
    EXPECT_INT(sync_e(&e, 0, &st), CM_OK);
    EXPECT(st.rebuilt);
    /* ... which must not be replayed onto the rebuilt file: the new
     * fingerprint holds, so the next sync does not rebuild again */
    EXPECT_INT(sync_e(&e, 0, &st), CM_OK);
    EXPECT(!st.rebuilt);
    EXPECT(integrity_ok(&e));
    EXPECT_INT(nresults(search_e(&e, "walnut")), 1);
    write_file(e.dir, "config.json",
               "{agents: {defaults: {memorySearch: {store: {fts: {tokenizer: 'trigram'}}}}}}");
    EXPECT_INT(sync_e(&e, 0, &st), CM_OK);
    EXPECT(st.rebuilt);
    EXPECT_INT(nresults(search_e(&e, "words")), 1);
    write_file(e.dir, "config.json",
               "{agents: {defaults: {memorySearch: {extraPaths: ['../x']}}}}");
    EXPECT_INT(sync_e(&e, 0, &st), CM_OK);
    EXPECT(st.rebuilt);
    EXPECT(!any_leftovers(&e));
    EXPECT(integrity_ok(&e));
}

TEST_BOTH(engine_cjk_queries_find_their_notes)
{
    env e;
    env_init(&e);
    write_file(e.ws, "memory/2026-10-05.md",
               "# 2026-10-05\n서울 사무실에서 검색 인덱스 회의를 했다.\n");
    write_file(e.ws, "memory/2026-10-09.md",
               "# 2026-10-09\n東京に到着した。羽田空港から電車で移動。\n");
    write_file(e.ws, "memory/2026-11-12.md", "# 2026-11-12\n我们讨论了向量数据库的选择。\n");
    write_file(e.ws, "memory/2026-11-13.md",
               "# 2026-11-13\nNothing in CJK here, just database notes.\n");
    EXPECT_INT(sync_e(&e, 0, NULL), CM_OK);
    const char *cases[][2] = {
        {"서울", "memory/2026-10-05.md"},        {"회의", "memory/2026-10-05.md"},
        {"검색 인덱스", "memory/2026-10-05.md"}, {"羽田", "memory/2026-10-09.md"},
        {"東京", "memory/2026-10-09.md"},        {"数据库", "memory/2026-11-12.md"},
        {"向量数据库", "memory/2026-11-12.md"},  {"电车", NULL}, /* simplified ≠ 電車 */
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        json_t *p = search_e(&e, cases[i][0]);
        if (!cases[i][1]) {
            EXPECT_INT(nresults(p), 0);
            continue;
        }
        EXPECT_INT(nresults(p), 1);
        EXPECT_STR(result_path(p, 0), cases[i][1]);
    }
    /* the trigram tokenizer finds runs of 3+ characters */
    write_file(e.dir, "config.json",
               "{agents: {defaults: {memorySearch: {store: {fts: {tokenizer: 'trigram'}}}}}}");
    EXPECT_INT(sync_e(&e, 0, NULL), CM_OK);
    json_t *p = search_e(&e, "数据库");
    EXPECT_INT(nresults(p), 1);
    EXPECT_STR(result_path(p, 0), "memory/2026-11-12.md");
}

TEST_BOTH(engine_and_then_or_fallback)
{
    env e;
    env_init(&e);
    write_file(e.ws, "memory/a.md", "Rod has standup at 14:15 on weekdays.\n");
    write_file(e.ws, "memory/b.md", "Zeb prefers tea.\n");
    EXPECT_INT(sync_e(&e, 0, NULL), CM_OK);
    json_t *p = search_e(&e, "what time is Rod's standup?");
    EXPECT_INT(nresults(p), 1);
    EXPECT_STR(result_path(p, 0), "memory/a.md");
}

TEST_BOTH(engine_problems_in_status)
{
    env e;
    env_init(&e);
    write_file(e.ws, "memory/good.md", "good file\n");
    write_bytes(e.ws, "memory/binary.md", "PK\x03\x04\0\0garbage", 12);
    write_bytes(e.ws, "memory/latin1.md", "caf\xE9 cr\xE8me brulee\n", 18);
    EXPECT_INT(sync_e(&e, 0, NULL), CM_OK);
    cm_engine *eng = open_engine(&e);
    char err[512], *js = NULL;
    EXPECT_INT(cm_engine_status(eng, 1, &js, err, sizeof err), CM_OK);
    json_t *s = json_loads(js, 0, NULL);
    cm_free(js);
    cm_engine_close(eng);
    json_t *probs = json_object_get(s, "problems");
    EXPECT_INT(json_array_size(probs), 2);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(probs, 0), "path")),
               "memory/binary.md");
    EXPECT_CONTAINS(json_string_value(json_object_get(json_array_get(probs, 0), "problem")),
                    "binary");
    EXPECT_CONTAINS(json_string_value(json_object_get(json_array_get(probs, 1), "problem")),
                    "invalid UTF-8");
    EXPECT_STR(json_string_value(json_object_get(s, "integrity")), "ok");
    EXPECT_INT(json_integer_value(json_object_get(s, "dirtyFiles")), 0);
    EXPECT_INT(json_integer_value(json_object_get(s, "files")), 3);
    json_decref(s);
    /* the bad-UTF-8 file is still searchable; its snippet is valid UTF-8 */
    json_t *p = search_e(&e, "brulee");
    EXPECT_INT(nresults(p), 1);
    EXPECT_INT(nresults(search_e(&e, "garbage")), 0);
}

TEST(engine_corrupt_index_is_reported_and_force_recovers)
{
    env e;
    env_init(&e);
    write_file(e.ws, "MEMORY.md", "remember the milk\n");
    EXPECT_INT(sync_e(&e, 0, NULL), CM_OK);
    char junk[8192];
    memset(junk, 'Z', sizeof junk);
    unlink(path_in(e.state, "memory/main.clawmem.sqlite-wal"));
    unlink(path_in(e.state, "memory/main.clawmem.sqlite-shm"));
    write_bytes(e.state, "memory/main.clawmem.sqlite", junk, sizeof junk);
    json_t *p = search_e(&e, "milk");
    EXPECT(json_is_true(json_object_get(p, "disabled")));
    EXPECT_CONTAINS(json_string_value(json_object_get(p, "error")), "clawmem index --force");
    cm_engine *eng = open_engine(&e);
    char err[512];
    EXPECT_INT(cm_engine_sync(eng, 0, NULL, NULL, NULL, err, sizeof err), CM_ECORRUPT);
    EXPECT_CONTAINS(err, "--force");
    EXPECT_INT(cm_engine_sync(eng, CM_SYNC_FORCE, NULL, NULL, NULL, err, sizeof err), CM_OK);
    cm_engine_close(eng);
    EXPECT_INT(nresults(search_e(&e, "milk")), 1);
    EXPECT(integrity_ok(&e));
}

static int kill_after;
static int suicide(void *ctx, const cm_progress *p)
{
    (void)ctx;
    if ((int)p->files_done >= kill_after) raise(SIGKILL);
    return 0;
}

/* Forks a child that syncs with flags and SIGKILLs itself after k files. */
static int killed_sync(const env *e, unsigned flags, int k)
{
    pid_t pid = fork();
    if (pid == 0) {
        kill_after = k;
        cm_engine *eng = open_engine(e);
        char err[512];
        cm_engine_sync(eng, flags, suicide, NULL, NULL, err, sizeof err);
        _exit(0); /* reached only when k is past the last file */
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) ? WTERMSIG(st) : -1;
}

TEST_BOTH(engine_survives_sigkill_during_rebuild_and_sync)
{
    env e;
    env_init(&e);
    for (int i = 0; i < 40; i++) {
        char rel[64], text[256];
        snprintf(rel, sizeof rel, "memory/note-%02d.md", i);
        snprintf(text, sizeof text, "# Note %d\nversion one of note %d, keyword oldstate\n", i, i);
        write_file(e.ws, rel, text);
    }
    EXPECT_INT(sync_e(&e, 0, NULL), CM_OK);
    for (int k = 1; k <= 40; k += 3) {
        /* a forced rebuild killed after k files: the old index stays whole */
        EXPECT_INT(killed_sync(&e, CM_SYNC_FORCE, k), SIGKILL);
        /* the half-built file of the dead process (PostgreSQL: a rolled-back transaction) */
        EXPECT(pg_dsn || any_leftovers(&e));
        EXPECT(integrity_ok(&e));
        EXPECT_INT(nresults(search_e(&e, "oldstate")), 10);
        EXPECT(!any_leftovers(&e)); /* removed by the next engine open */
    }
    /* an incremental sync killed part-way: each file is all old or all new */
    for (int i = 0; i < 40; i++) {
        char rel[64], text[256];
        snprintf(rel, sizeof rel, "memory/note-%02d.md", i);
        snprintf(text, sizeof text, "# Note %d\nversion two of note %d, keyword newstate\n", i, i);
        write_file(e.ws, rel, text);
        set_mtime(path_in(e.ws, rel), 1900000000 + i);
    }
    for (int k = 5; k <= 35; k += 10) {
        EXPECT_INT(killed_sync(&e, 0, k), SIGKILL);
        EXPECT(integrity_ok(&e));
        cm_search_opts o = {100, 0, 0};
        cm_engine *eng = open_engine(&e);
        char err[512], *a = NULL;
        EXPECT_INT(cm_memory_search(eng, "keyword", &o, &a, err, sizeof err), CM_OK);
        json_t *pa = json_loads(a, 0, NULL);
        EXPECT_INT(nresults(pa), 40); /* every note present, old or new, never both or none */
        json_decref(pa);
        cm_free(a);
        cm_engine_close(eng);
    }
    cm_sync_stats st;
    EXPECT_INT(sync_e(&e, 0, &st), CM_OK);
    EXPECT(!any_leftovers(&e));
    EXPECT_INT(nresults(search_e(&e, "oldstate")), 0);
    EXPECT_INT(nresults(search_e(&e, "newstate")), 10);
    EXPECT(integrity_ok(&e));
}

TEST(engine_missing_workspace_is_an_error)
{
    env e;
    env_init(&e);
    cm_engine *eng = open_engine(&e);
    char err[512];
    EXPECT_INT(cm_engine_sync(eng, 0, NULL, NULL, NULL, err, sizeof err), CM_ENOTFOUND);
    EXPECT_CONTAINS(err, "does not exist");
    char *js = NULL;
    EXPECT_INT(cm_memory_search(eng, "x", NULL, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "\"results\":[]");
    cm_free(js);
    cm_engine_close(eng);
}

static int unreadable_case(void *arg)
{
    env *e = arg;
    /* index once while everything is readable, then lose read access */
    if (sync_e(e, 0, NULL) != CM_OK) return 1;
    if (chmod(path_in(e->ws, "memory/locked.md"), 0) != 0) return 2;
    set_mtime(path_in(e->ws, "memory/locked.md"), 1950000000);
    cm_sync_stats st;
    if (sync_e(e, 0, &st) != CM_OK) return 3;
    if (st.files_skipped != 1) return 4;
    cm_engine *eng = open_engine(e);
    char err[512], *js = NULL;
    if (!eng || cm_engine_status(eng, 0, &js, err, sizeof err) != CM_OK) return 5;
    int rc = strstr(js, "memory/locked.md") && strstr(js, "cannot read") ? 0 : 6;
    cm_free(js);
    cm_engine_close(eng);
    if (rc) return rc;
    /* what the index had for the file is kept, and searchable */
    json_t *p = search_e(e, "lockedword");
    return nresults(p) == 1 ? 0 : 7;
}

TEST(engine_unreadable_file_is_reported_and_kept)
{
    env e;
    env_init(&e);
    write_file(e.ws, "memory/open.md", "readable\n");
    write_file(e.ws, "memory/locked.md", "lockedword lives here\n");
    EXPECT_INT(run_unprivileged(e.dir, unreadable_case, &e), 0);
}

TEST_BOTH(engine_porter_tokenizer_stems)
{
    env e;
    env_init(&e);
    write_file(e.ws, "memory/a.md", "She was running the migrations all night.\n");
    write_file(e.dir, "config.json",
               "{agents: {defaults: {memorySearch: {store: {fts: {tokenizer: 'unicode61'}}}}}}");
    EXPECT_INT(sync_e(&e, 0, NULL), CM_OK);
    EXPECT_INT(nresults(search_e(&e, "runs migration")), 0); /* unicode61: no stemming */
    /* porter is the default: an index built with unicode61 is rebuilt */
    write_file(e.dir, "config.json", "{}");
    cm_sync_stats st;
    EXPECT_INT(sync_e(&e, 0, &st), CM_OK);
    EXPECT(st.rebuilt);
    json_t *p = search_e(&e, "runs migration");
    EXPECT_INT(nresults(p), 1);
    EXPECT_STR(result_path(p, 0), "memory/a.md");
}

/* index --drop: the agent's index is gone (its rows in PostgreSQL, its file
 * in SQLite), the memory files stay, another agent's index stays, a search
 * finds nothing and the next sync builds it again. */
TEST_BOTH(engine_drop_index)
{
    env e;
    env_init(&e);
    write_file(e.ws, "MEMORY.md", "# Facts\nThe dog is called Biscuit.\n");
    EXPECT_INT(sync_e(&e, 0, NULL), CM_OK);
    /* a second agent in the same database (or state dir) */
    cm_options oo = {"ops", e.ws, e.cfg, e.state, NULL, NULL, 0};
    cm_engine *ops = NULL;
    char err[512];
    EXPECT_INT(cm_engine_open(&oo, &ops, err, sizeof err), CM_OK);
    EXPECT_INT(cm_engine_sync(ops, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    cm_engine *eng = open_engine(&e);
    int dropped = -1;
    EXPECT_INT(cm_engine_drop_index(eng, &dropped, err, sizeof err), CM_OK);
    EXPECT_INT(dropped, 1);
    if (!pg_dsn) {
        EXPECT(access(e.db, F_OK) != 0);
        char wal[1100];
        snprintf(wal, sizeof wal, "%s-wal", e.db);
        EXPECT(access(wal, F_OK) != 0);
    }
    EXPECT(access(path_in(e.ws, "MEMORY.md"), F_OK) == 0);
    char *js = NULL;
    EXPECT_INT(cm_memory_search(eng, "Biscuit", NULL, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "\"results\":[]");
    cm_free(js);
    /* nothing left to drop */
    EXPECT_INT(cm_engine_drop_index(eng, &dropped, err, sizeof err), CM_OK);
    EXPECT_INT(dropped, 0);
    /* the other agent still answers */
    js = NULL;
    EXPECT_INT(cm_memory_search(ops, "Biscuit", NULL, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "MEMORY.md");
    cm_free(js);
    cm_engine_close(ops);
    /* the next sync builds it again */
    cm_sync_stats st;
    EXPECT_INT(cm_engine_sync(eng, 0, NULL, NULL, &st, err, sizeof err), CM_OK);
    EXPECT(st.rebuilt);
    js = NULL;
    EXPECT_INT(cm_memory_search(eng, "Biscuit", NULL, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "MEMORY.md");
    cm_free(js);
    cm_engine_close(eng);
}
