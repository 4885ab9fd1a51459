/*
 * test_harden.c — the indexer, watcher and store against a hostile workspace
 * or index (issue 10): a directory swapped for a symbolic link while the
 * indexer runs (renameat2 RENAME_EXCHANGE in a loop), a FIFO swapped in for a
 * note, crafted index rows, a read-only state dir, the journal mode of a
 * rebuilt index, a no-op sync over many directories, long paths in errors,
 * symlinked notes in status, and the watcher near symbolic links.
 */
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/index/discover.h"
#include "../src/index/watch.h"
#include "test.h"

typedef struct henv {
    char *dir;
    char ws[1024], state[1024], cfg[1024], db[1024];
} henv;

static void henv_init(henv *e)
{
    e->dir = tmp_dir();
    snprintf(e->ws, sizeof e->ws, "%s/ws", e->dir);
    snprintf(e->state, sizeof e->state, "%s/state", e->dir);
    snprintf(e->cfg, sizeof e->cfg, "%s/config.json", e->dir);
    snprintf(e->db, sizeof e->db, "%s/state/memory/main.clawmem.sqlite", e->dir);
    write_file(e->dir, "config.json", "{}");
}

static cm_engine *h_open(const henv *e)
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

static cm_rc h_sync(const henv *e, unsigned flags, char *err, size_t errlen)
{
    cm_engine *eng = h_open(e);
    if (!eng) return CM_ECONFIG;
    cm_rc rc = cm_engine_sync(eng, flags, NULL, NULL, NULL, err, errlen);
    cm_engine_close(eng);
    return rc;
}

/* The search payload (caller frees), or NULL. */
static json_t *h_search(const henv *e, const char *q)
{
    cm_engine *eng = h_open(e);
    if (!eng) return NULL;
    char err[512], *js = NULL;
    cm_search_opts o = {10, 0, 0};
    json_t *j = NULL;
    if (cm_memory_search(eng, q, &o, &js, err, sizeof err) == CM_OK) j = json_loads(js, 0, NULL);
    cm_free(js);
    cm_engine_close(eng);
    return j;
}

static json_t *h_status(const henv *e)
{
    cm_engine *eng = h_open(e);
    if (!eng) return NULL;
    char err[512], *js = NULL;
    json_t *j = NULL;
    if (cm_engine_status(eng, 0, &js, err, sizeof err) == CM_OK) j = json_loads(js, 0, NULL);
    cm_free(js);
    cm_engine_close(eng);
    return j;
}

static size_t h_hits(json_t *p)
{
    return json_array_size(json_object_get(p, "results"));
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- a directory swapped for a symbolic link during sync ---------------- */

typedef struct swapper {
    const char *a, *b;
    volatile int stop;
    long swaps;
} swapper;

static void *swap_loop(void *arg)
{
    swapper *s = arg;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        if (renameat2(AT_FDCWD, s->a, AT_FDCWD, s->b, RENAME_EXCHANGE) == 0) s->swaps++;
    }
    return NULL;
}

TEST(harden_index_race_never_indexes_outside)
{
    henv e;
    henv_init(&e);
    write_file(e.ws, "memory/top.md", "# Top\nan ordinary note\n");
    for (int i = 0; i < 20; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "memory/sub/n%02d.md", i);
        write_file(e.ws, rel, "# Inside\nan inside note about gardening\n");
    }
    for (int i = 0; i < 20; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "outside/n%02d.md", i);
        write_file(e.dir, rel, "# Secret\nthe outside marker zebraquokka\n");
    }
    char sub[1100], link[1100];
    snprintf(sub, sizeof sub, "%s/memory/sub", e.ws);
    snprintf(link, sizeof link, "%s/memory/link", e.ws);
    EXPECT(symlink(path_in(e.dir, "outside"), link) == 0);
    char err[1024];
    EXPECT_INT(h_sync(&e, 0, err, sizeof err), CM_OK);
    swapper s = {sub, link, 0, 0};
    pthread_t t;
    EXPECT(pthread_create(&t, NULL, swap_loop, &s) == 0);
    int runs = 0, escapes = 0, failures = 0;
    double t0 = now_s();
    while (now_s() - t0 < 2.0 && runs < 400) {
        if (h_sync(&e, runs % 2 ? 0 : CM_SYNC_FORCE, err, sizeof err) != CM_OK) failures++;
        json_t *p = h_search(&e, "zebraquokka");
        if (!p || h_hits(p) != 0) escapes++;
        json_decref(p);
        runs++;
    }
    __atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    /* undo the swap (an odd number of exchanges leaves sub as the link) */
    struct stat st;
    if (lstat(sub, &st) == 0 && S_ISLNK(st.st_mode))
        EXPECT(renameat2(AT_FDCWD, sub, AT_FDCWD, link, RENAME_EXCHANGE) == 0);
    EXPECT(runs >= 4);
    EXPECT(s.swaps > 100);
    EXPECT_INT(escapes, 0);
    EXPECT_INT(failures, 0);
    /* and after the swaps stop, still nothing from outside, everything inside */
    EXPECT_INT(h_sync(&e, 0, err, sizeof err), CM_OK);
    json_t *p = h_search(&e, "zebraquokka");
    EXPECT_INT(h_hits(p), 0);
    json_decref(p);
    p = h_search(&e, "gardening");
    EXPECT_INT(h_hits(p), 10);
    json_decref(p);
}

/* ---- FIFOs and devices never block ------------------------------------- */

TEST(harden_reader_refuses_a_fifo_swapped_in)
{
    char *d = tmp_dir();
    write_file(d, "ws/memory/a.md", "alpha\n");
    write_file(d, "ws/memory/b.md", "beta\n");
    cm_config c = {0};
    c.workspace = cm_strdup(path_in(d, "ws"));
    file_list l;
    problem_list pl = {0};
    EXPECT_INT(cm_discover_files(&c, &l, &pl), CM_OK);
    EXPECT_INT(l.n, 2);
    /* b.md becomes a FIFO (nobody writes to it) after discovery listed it */
    EXPECT(unlink(path_in(d, "ws/memory/b.md")) == 0);
    EXPECT(mkfifo(path_in(d, "ws/memory/b.md"), 0600) == 0);
    file_reader r;
    cm_index_file_reader_init(&r, &l);
    buf out = BUF_INIT;
    struct stat st;
    char why[256];
    double t0 = now_s();
    EXPECT_INT(cm_index_file_reader_read(&r, &l.v[1], 1 << 20, &out, &st, why, sizeof why), CM_EIO);
    EXPECT(now_s() - t0 < 1.0);
    EXPECT_STR(why, "not a regular file");
    /* a.md reads, with size and mtime from the descriptor's fstat */
    EXPECT_INT(cm_index_file_reader_read(&r, &l.v[0], 1 << 20, &out, &st, why, sizeof why), CM_OK);
    EXPECT_STR(out.data, "alpha\n");
    EXPECT_INT(st.st_size, 6);
    /* a symbolic link swapped in is refused, not followed */
    write_file(d, "outside.md", "secret\n");
    EXPECT(unlink(path_in(d, "ws/memory/a.md")) == 0);
    EXPECT(symlink(path_in(d, "outside.md"), path_in(d, "ws/memory/a.md")) == 0);
    cm_buf_reset(&out);
    EXPECT_INT(cm_index_file_reader_read(&r, &l.v[0], 1 << 20, &out, &st, why, sizeof why), CM_EIO);
    EXPECT_STR(why, "symbolic link, not followed");
    /* and so is a directory of the path swapped for a link */
    cm_index_file_reader_release(&r);
    EXPECT(rename(path_in(d, "ws/memory"), path_in(d, "ws/real")) == 0);
    EXPECT(symlink(path_in(d, "ws/real"), path_in(d, "ws/memory")) == 0);
    cm_index_file_reader_init(&r, &l);
    EXPECT_INT(cm_index_file_reader_read(&r, &l.v[0], 1 << 20, &out, &st, why, sizeof why), CM_EIO);
    EXPECT_STR(why, "symbolic link, not followed");
    cm_index_file_reader_release(&r);
    cm_buf_release(&out);
    cm_index_file_list_release(&l);
    cm_index_problem_list_release(&pl);
    free(c.workspace);
}

typedef struct fifo_swap {
    char note[1100], fifo[1100];
    volatile int stop;
} fifo_swap;

static void *fifo_loop(void *arg)
{
    fifo_swap *s = arg;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE))
        renameat2(AT_FDCWD, s->note, AT_FDCWD, s->fifo, RENAME_EXCHANGE);
    return NULL;
}

/* In a child with a watchdog: syncs while a FIFO is exchanged with a note. */
static int fifo_child(const henv *e)
{
    alarm(30); /* a blocked open or read would end here, with SIGALRM */
    fifo_swap s;
    snprintf(s.note, sizeof s.note, "%s/memory/b.md", e->ws);
    snprintf(s.fifo, sizeof s.fifo, "%s/memory/fifo", e->ws);
    __atomic_store_n(&s.stop, 0, __ATOMIC_RELEASE);
    pthread_t t;
    if (pthread_create(&t, NULL, fifo_loop, &s) != 0) return 2;
    char err[1024];
    int bad = 0;
    double t0 = now_s();
    for (int i = 0; i < 200 && now_s() - t0 < 1.5; i++)
        if (h_sync(e, i % 2 ? 0 : CM_SYNC_FORCE, err, sizeof err) != CM_OK) bad++;
    __atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    return bad ? 3 : 0;
}

TEST(harden_fifo_swapped_in_never_blocks_sync)
{
    henv e;
    henv_init(&e);
    write_file(e.ws, "memory/a.md", "alpha note\n");
    write_file(e.ws, "memory/b.md", "beta note\n");
    EXPECT(mkfifo(path_in(e.ws, "memory/fifo"), 0600) == 0);
    /* a FIFO named like a note is a problem, never opened */
    EXPECT(mkfifo(path_in(e.ws, "memory/pipe.md"), 0600) == 0);
    char err[1024];
    EXPECT_INT(h_sync(&e, 0, err, sizeof err), CM_OK);
    pid_t pid = fork();
    if (pid == 0) _exit(fifo_child(&e));
    int st = 0;
    waitpid(pid, &st, 0);
    EXPECT(WIFEXITED(st));
    EXPECT_INT(WEXITSTATUS(st), 0);
    /* the writer lock was released: a sync that does not wait gets it */
    cm_engine *eng = h_open(&e);
    EXPECT(eng != NULL);
    EXPECT_INT(cm_engine_sync(eng, CM_SYNC_NOWAIT, NULL, NULL, NULL, err, sizeof err), CM_OK);
    cm_engine_close(eng);
    json_t *s = h_status(&e);
    char *dump = json_dumps(s, 0);
    EXPECT_CONTAINS(dump, "memory/pipe.md");
    EXPECT_CONTAINS(dump, "not a regular file");
    free(dump);
    json_decref(s);
}

/* ---- crafted index rows ------------------------------------------------ */

static bool craft(const char *db, const char *sql)
{
    sqlite3 *h = NULL;
    bool ok =
        sqlite3_open(db, &h) == SQLITE_OK && sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK;
    if (!ok) fprintf(stderr, "  craft: %s\n", sqlite3_errmsg(h));
    sqlite3_close(h);
    return ok;
}

#define LOOSE_CHUNKS                                                                               \
    "CREATE TABLE c2 AS SELECT * FROM chunks; DROP TABLE chunks; CREATE TABLE chunks(id "          \
    "INTEGER PRIMARY KEY, path, source, start_line, end_line, hash, model, text, updated_at); "    \
    "INSERT INTO chunks SELECT * FROM c2; DROP TABLE c2;"

TEST(harden_crafted_rows_are_corrupt_errors)
{
    static const struct {
        const char *sql;
        bool status, search; /* which of them read the damaged value */
    } cases[] = {
        {"UPDATE files SET path = NULL", true, true},
        {LOOSE_CHUNKS "UPDATE chunks SET text = NULL", false, true},
        {LOOSE_CHUNKS "UPDATE chunks SET path = NULL", false, true},
        {LOOSE_CHUNKS "UPDATE chunks SET source = x'00ff'", false, true},
        {"UPDATE chunks SET start_line = -3", false, true},
        {"UPDATE chunks SET end_line = 'many'", false, true},
        {"UPDATE chunks SET end_line = 0", false, true},
        {"UPDATE files SET mtime = 'yesterday'", false, true},
        {"UPDATE files SET problem = x'07'", true, false},
        {"INSERT OR REPLACE INTO meta VALUES('clawmem_sync_problems', '[{\"path\":1}]')", true,
         false},
        {"INSERT OR REPLACE INTO meta VALUES('clawmem_sync_problems', '[garbage')", true, false},
        {"INSERT OR REPLACE INTO meta VALUES('clawmem_vector_dims', '1,\"x\":2')", true, false},
    };
    henv e;
    henv_init(&e);
    write_file(e.ws, "memory/a.md", "# A\nalpha walnut\n");
    write_file(e.ws, "memory/b.md", "# B\nalpha pecan\n");
    const char *env[] = {NULL};
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char err[1024];
        EXPECT_INT(h_sync(&e, CM_SYNC_FORCE, err, sizeof err), CM_OK);
        if (!strstr(cases[i].sql, "problem")) EXPECT(craft(e.db, "UPDATE files SET problem = 'p'"));
        EXPECT(craft(e.db, cases[i].sql));
        json_t *s = h_status(&e);
        EXPECT(s != NULL);
        const char *ie = json_string_value(json_object_get(s, "indexError"));
        if (!cases[i].status)
            ie = "corrupt clawmem index --force"; /* not read: no crash is enough */
        if (!ie || !strstr(ie, "corrupt") || !strstr(ie, "clawmem index --force")) {
            test_fail(__FILE__, __LINE__, "case %zu: indexError %s", i, ie ? ie : "(none)");
            json_decref(s);
            return;
        }
        EXPECT(!strstr(ie, "SELECT") && !strstr(ie, "UPDATE"));
        json_decref(s);
        json_t *p = h_search(&e, "alpha");
        EXPECT(p != NULL);
        if (cases[i].search) {
            const char *pe = json_string_value(json_object_get(p, "error"));
            if (!pe || !strstr(pe, "clawmem index --force") || h_hits(p) != 0) {
                test_fail(__FILE__, __LINE__, "case %zu: search error %s", i, pe ? pe : "(none)");
                json_decref(p);
                return;
            }
        }
        json_decref(p);
        /* the command line: a clear line, no crash */
        const char *st_args[] = {"--workspace", e.ws,  "--state-dir", e.state,
                                 "--config",    e.cfg, "status",      NULL};
        run_result r = run_clawmem(env, st_args);
        EXPECT(r.status < 128);
        if (cases[i].status) EXPECT_CONTAINS(r.out, "clawmem index --force");
        run_result_release(&r);
        const char *se_args[] = {"--workspace", e.ws,     "--state-dir", e.state, "--config",
                                 e.cfg,         "search", "alpha",       NULL};
        r = run_clawmem(env, se_args);
        EXPECT(r.status < 128);
        if (cases[i].search) {
            EXPECT_INT(r.status, 1);
            EXPECT_CONTAINS(r.err, "clawmem index --force");
        }
        run_result_release(&r);
        const char *mcp_args[] = {"--workspace", e.ws,     "--state-dir", e.state, "--config",
                                  e.cfg,         "status", "--json",      NULL};
        r = run_clawmem(env, mcp_args);
        EXPECT(r.status < 128);
        json_t *j = json_loads(r.out, 0, NULL);
        EXPECT(j != NULL); /* still valid JSON */
        json_decref(j);
        run_result_release(&r);
        /* a sync over the damaged index: done, or the corrupt error */
        cm_rc rc = h_sync(&e, 0, err, sizeof err);
        if (rc) EXPECT_CONTAINS(err, "clawmem index --force");
    }
    /* --force recovers */
    char err[1024];
    EXPECT_INT(h_sync(&e, CM_SYNC_FORCE, err, sizeof err), CM_OK);
    json_t *p = h_search(&e, "walnut");
    EXPECT_INT(h_hits(p), 1);
    json_decref(p);
}

/* ---- a read-only state dir --------------------------------------------- */

static int readonly_case(void *arg)
{
    henv *e = arg;
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/memory", e->state);
    char side[1100];
    snprintf(side, sizeof side, "%s-wal", e->db);
    chmod(side, 0444);
    snprintf(side, sizeof side, "%s-shm", e->db);
    chmod(side, 0444);
    if (chmod(e->db, 0444) != 0 || chmod(dir, 0555) != 0) return 1;
    json_t *p = h_search(e, "walnut");
    int rc = !p ? 2 : h_hits(p) != 1 ? 3 : json_object_get(p, "error") ? 4 : 0;
    json_decref(p);
    if (rc) return rc;
    json_t *s = h_status(e);
    rc = !s                                                     ? 5
         : json_object_get(s, "indexError")                     ? 6
         : json_integer_value(json_object_get(s, "files")) != 2 ? 7
                                                                : 0;
    json_decref(s);
    return rc;
}

TEST(harden_readonly_state_dir_serves_search)
{
    for (int wal = 0; wal < 2; wal++) {
        henv e;
        henv_init(&e);
        write_file(e.ws, "memory/a.md", "# A\nalpha walnut\n");
        write_file(e.ws, "memory/b.md", "# B\nalpha pecan\n");
        char err[1024];
        EXPECT_INT(h_sync(&e, 0, err, sizeof err), CM_OK);
        json_t *p = h_search(&e, "walnut"); /* leaves -wal and -shm as a reader would */
        EXPECT_INT(h_hits(p), 1);
        json_decref(p);
        if (!wal) { /* everything in the main file, no -wal or -shm */
            EXPECT(craft(e.db, "PRAGMA wal_checkpoint(TRUNCATE)"));
            char side[1100];
            snprintf(side, sizeof side, "%s-wal", e.db);
            unlink(side);
            snprintf(side, sizeof side, "%s-shm", e.db);
            unlink(side);
        }
        int rc = run_unprivileged(e.dir, readonly_case, &e);
        if (rc) test_fail(__FILE__, __LINE__, "wal=%d: readonly_case returned %d", wal, rc);
        if (rc) return;
    }
}

/* ---- the journal mode of a rebuilt index ------------------------------- */

TEST(harden_rebuilt_index_is_wal_before_the_swap)
{
    henv e;
    henv_init(&e);
    write_file(e.ws, "memory/a.md", "# A\nalpha walnut\n");
    char err[1024];
    EXPECT_INT(h_sync(&e, CM_SYNC_FORCE, err, sizeof err), CM_OK);
    /* the file's header says WAL (bytes 18 and 19 are 2) */
    FILE *f = fopen(e.db, "rb");
    EXPECT(f != NULL);
    unsigned char hdr[20] = {0};
    EXPECT_INT(fread(hdr, 1, sizeof hdr, f), 20);
    fclose(f);
    EXPECT_INT(hdr[18], 2);
    EXPECT_INT(hdr[19], 2);
    /* an outside reader in a read transaction right after --force does not
     * keep a search from opening the index */
    EXPECT_INT(h_sync(&e, CM_SYNC_FORCE, err, sizeof err), CM_OK);
    sqlite3 *h = NULL;
    EXPECT_INT(sqlite3_open_v2(e.db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    EXPECT_INT(sqlite3_exec(h, "BEGIN; SELECT count(*) FROM chunks;", NULL, NULL, NULL), SQLITE_OK);
    setenv("CLAWMEM_BUSY_TIMEOUT_MS", "300", 1);
    json_t *p = h_search(&e, "walnut");
    unsetenv("CLAWMEM_BUSY_TIMEOUT_MS");
    sqlite3_exec(h, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(h);
    EXPECT_INT(h_hits(p), 1);
    json_decref(p);
}

/* ---- a no-op sync over many directories -------------------------------- */

TEST(harden_noop_sync_is_linear_in_directories)
{
    henv e;
    henv_init(&e);
    write_file(e.ws, "memory/top.md", "top\n");
    char p[1400];
    int ndirs = 0;
    for (int a = 0; a < 200; a++) {
        snprintf(p, sizeof p, "%s/memory/a%03d", e.ws, a);
        EXPECT(mkdir(p, 0700) == 0);
        ndirs++;
        for (int b = 0; b < 100; b++) {
            snprintf(p, sizeof p, "%s/memory/a%03d/b%03d", e.ws, a, b);
            EXPECT(mkdir(p, 0700) == 0);
            ndirs++;
        }
        snprintf(p, sizeof p, "memory/a%03d/b000/n.md", a);
        write_file(e.ws, p, "a note\n");
    }
    char err[1024];
    EXPECT_INT(h_sync(&e, 0, err, sizeof err), CM_OK);
    /* the walk looks at O(1) set slots per directory; the old list scanned
     * every directory seen for each new one (~n²/2 = 2e8 here) */
    cm_config c = {0};
    c.workspace = e.ws;
    file_list l;
    problem_list pl = {0};
    EXPECT_INT(cm_discover_files(&c, &l, &pl), CM_OK);
    EXPECT_INT(l.n, 201);
    EXPECT(l.dirs_read >= (size_t)ndirs);
    EXPECT(l.dir_probes <= 4 * l.dirs_read);
    cm_index_file_list_release(&l);
    cm_index_problem_list_release(&pl);
    double t0 = now_s();
    cm_engine *eng = h_open(&e);
    cm_sync_stats st;
    EXPECT_INT(cm_engine_sync(eng, 0, NULL, NULL, &st, err, sizeof err), CM_OK);
    cm_engine_close(eng);
    double dt = now_s() - t0;
    EXPECT_INT(st.files_unchanged, 201);
    EXPECT_INT(st.files_indexed, 0);
    if (dt > 5.0) test_fail(__FILE__, __LINE__, "no-op sync over %d dirs took %.2f s", ndirs, dt);
}

/* ---- long paths in errors ---------------------------------------------- */

TEST(harden_long_path_errors_keep_the_reason)
{
    henv e;
    henv_init(&e);
    write_file(e.ws, "memory/a.md", "alpha\n");
    /* a state dir 2 KiB deep whose parent is a regular file */
    buf sd = BUF_INIT;
    cm_buf_adds(&sd, e.dir);
    for (int i = 0; i < 14; i++) {
        cm_buf_adds(&sd, "/");
        for (int k = 0; k < 160; k++)
            cm_buf_addc(&sd, (char)('a' + i));
        EXPECT(mkdir(sd.data, 0700) == 0);
    }
    cm_buf_adds(&sd, "/blocker");
    int fd = open(sd.data, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    EXPECT(fd >= 0);
    close(fd);
    cm_buf_adds(&sd, "/state");
    EXPECT(sd.len > 2000);
    cm_options o = {NULL, e.ws, e.cfg, sd.data, NULL, NULL, 0};
    cm_engine *eng = NULL;
    char err[1024];
    EXPECT_INT(cm_engine_open(&o, &eng, err, sizeof err), CM_OK);
    EXPECT(cm_engine_sync(eng, 0, NULL, NULL, NULL, err, sizeof err) != CM_OK);
    EXPECT_CONTAINS(err, "Not a directory");
    cm_engine_close(eng);
    /* through the command line too */
    const char *args[] = {"--workspace", e.ws,  "--state-dir", sd.data,
                          "--config",    e.cfg, "index",       NULL};
    run_result r = run_clawmem(NULL, args);
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "Not a directory");
    run_result_release(&r);
    /* a missing workspace with a long name */
    buf ws = BUF_INIT;
    cm_buf_printf(&ws, "%s/missing", sd.data);
    cm_options o2 = {NULL, ws.data, e.cfg, e.state, NULL, NULL, 0};
    EXPECT_INT(cm_engine_open(&o2, &eng, err, sizeof err), CM_OK);
    EXPECT_INT(cm_engine_sync(eng, 0, NULL, NULL, NULL, err, sizeof err), CM_ENOTFOUND);
    EXPECT_CONTAINS(err, "does not exist");
    cm_engine_close(eng);
    cm_buf_release(&ws);
    cm_buf_release(&sd);
    /* cm_fs_clip keeps the start and the end */
    char big[600], clip[FS_CLIP_MAX + 1];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    big[0] = '/';
    memcpy(big + sizeof big - 6, "e.md", 5);
    const char *c = cm_fs_clip(big, clip);
    EXPECT(strlen(c) <= FS_CLIP_MAX);
    EXPECT(c[0] == '/');
    EXPECT_CONTAINS(c, "...");
    EXPECT(strcmp(c + strlen(c) - 4, "e.md") == 0);
}

/* ---- nested too deep, symlinked notes ---------------------------------- */

TEST(harden_problems_name_links_and_depth)
{
    henv e;
    henv_init(&e);
    write_file(e.ws, "notes/real.md", "real\n");
    write_file(e.ws, "memory/a.md", "alpha\n");
    EXPECT(symlink(path_in(e.ws, "notes/real.md"), path_in(e.ws, "memory/link.md")) == 0);
    buf deep = BUF_INIT;
    cm_buf_adds(&deep, "memory");
    for (int i = 0; i < 70; i++)
        cm_buf_adds(&deep, "/d");
    cm_buf_adds(&deep, "/x.md");
    write_file(e.ws, deep.data, "too deep\n");
    cm_buf_release(&deep);
    char err[1024];
    EXPECT_INT(h_sync(&e, 0, err, sizeof err), CM_OK);
    json_t *s = h_status(&e);
    char *dump = json_dumps(s, 0);
    EXPECT_CONTAINS(dump,
                    "{\"path\": \"memory/link.md\", \"problem\": \"symbolic link, not followed\"}");
    EXPECT_CONTAINS(dump, "nested more than 64 directories deep");
    EXPECT(!strstr(dump, "symbolic links\"")); /* not "Too many levels of symbolic links" */
    free(dump);
    json_decref(s);
}

/* ---- the watcher never follows a link ---------------------------------- */

TEST(harden_watcher_never_follows_links)
{
    henv e;
    henv_init(&e);
    write_file(e.ws, "memory/sub/a.md", "alpha\n");
    write_file(e.dir, "outside/b/x.md", "outside\n");
    write_file(e.dir, "outside/c/y.md", "outside\n");
    EXPECT(symlink(path_in(e.dir, "outside"), path_in(e.ws, "memory/link")) == 0);
    cm_config c = {0};
    c.workspace = e.ws;
    watcher *w = NULL;
    char err[256];
    EXPECT_INT(cm_watcher_open(&c, NULL, &w, err, sizeof err), CM_OK);
    EXPECT_INT(cm_watcher_count(w), 3); /* ws, memory, memory/sub: not the link's tree */
    /* a directory appears, and before the watcher looks, its parent is
     * swapped for a link to outside/ (which has a b/ too) */
    EXPECT(mkdir(path_in(e.ws, "memory/a"), 0700) == 0);
    EXPECT(cm_watcher_read(w) & WATCH_CHANGED);
    EXPECT_INT(cm_watcher_count(w), 4);
    EXPECT(mkdir(path_in(e.ws, "memory/a/b"), 0700) == 0);
    EXPECT(rename(path_in(e.ws, "memory/a"), path_in(e.ws, "memory/a_real")) == 0);
    EXPECT(symlink(path_in(e.dir, "outside"), path_in(e.ws, "memory/a")) == 0);
    cm_watcher_read(w);
    EXPECT_INT(cm_watcher_count(w), 4); /* outside/b is not watched */
    write_file(e.dir, "outside/b/z.md", "changed outside\n");
    write_file(e.dir, "outside/new.md", "changed outside\n");
    EXPECT_INT(cm_watcher_read(w) & WATCH_CHANGED, 0);
    cm_watcher_close(w);
}
