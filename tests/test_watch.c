/*
 * test_watch.c — the watcher and the multi-process rules: one inotify
 * descriptor for a large tree, many processes on one index with no "database
 * is locked", concurrent memory_write, and an indexer killed with SIGKILL at
 * random moments (full index, incremental sync, fingerprint rebuild).
 */
#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/index/watch.h"
#include "test.h"

typedef struct ws {
    char *dir;
    char ws[1024], state[1024], cfg[1024], db[1100];
} ws;

static void ws_init(ws *w, const char *config)
{
    w->dir = tmp_dir();
    snprintf(w->ws, sizeof w->ws, "%s/ws", w->dir);
    snprintf(w->state, sizeof w->state, "%s/state", w->dir);
    snprintf(w->cfg, sizeof w->cfg, "%s/qc.json", w->dir);
    snprintf(w->db, sizeof w->db, "%s/memory/main.clawmem.sqlite", w->state);
    write_file(w->dir, "qc.json", config ? config : "{}");
}

static cm_engine *open_w(const ws *w, int allow_write)
{
    cm_options o = {NULL, w->ws, w->cfg, w->state, NULL, NULL, allow_write};
    cm_engine *e = NULL;
    char err[512];
    if (cm_engine_open(&o, &e, err, sizeof err)) fprintf(stderr, "  open: %s\n", err);
    return e;
}

static size_t count_hits(cm_engine *e, const char *q)
{
    char err[512], *js = NULL;
    cm_search_opts o = {100, 0, 0};
    if (cm_memory_search(e, q, &o, &js, err, sizeof err)) return 0;
    json_t *p = json_loads(js, 0, NULL);
    size_t n = json_array_size(json_object_get(p, "results"));
    json_decref(p);
    cm_free(js);
    return n;
}

typedef struct watch_thread {
    cm_engine *e;
    volatile int stop;
    int syncs;
    pthread_t tid;
} watch_thread;

static void count_sync(void *ctx, cm_rc rc, const cm_sync_stats *st, const char *err)
{
    (void)st;
    (void)err;
    if (!rc) ((watch_thread *)ctx)->syncs++;
}

static void *run_watch(void *arg)
{
    watch_thread *t = arg;
    cm_watch_opts o = {&t->stop, -1, 30, count_sync, t, 0};
    char err[512];
    cm_engine_watch(t->e, &o, err, sizeof err);
    return NULL;
}

static bool wait_for(cm_engine *reader, const char *q, size_t want, int ms)
{
    for (int t = 0; t < ms; t += 20) {
        if (count_hits(reader, q) == want) return true;
        usleep(20000);
    }
    return false;
}

TEST(watch_one_descriptor_for_a_large_tree)
{
    ws w;
    ws_init(&w, NULL);
    for (int d = 0; d < 40; d++)
        for (int f = 0; f < 50; f++) {
            char rel[64], text[64];
            snprintf(rel, sizeof rel, "memory/d%02d/n%02d.md", d, f);
            snprintf(text, sizeof text, "note %d in dir %d\n", f, d);
            write_file(w.ws, rel, text);
        }
    write_file(w.ws, "MEMORY.md", "root\n");
    int before = count_fds(0);
    watch_thread t = {open_w(&w, 0), 0, 0, 0};
    cm_engine *reader = open_w(&w, 0);
    pthread_create(&t.tid, NULL, run_watch, &t);
    EXPECT(wait_for(reader, "note", 100, 10000)); /* initial sync done (100 = maxResults) */
    /* inotify (1), the watch engine's index and WAL files, the reader's: not
     * 2000. The sync may still hold a note open when the search first sees
     * every note, so poll (bounded) for the settled count. */
    int during = count_fds(0);
    for (int ms = 0; ms < 10000 && during - before > 8; ms += 50) {
        usleep(50000);
        during = count_fds(0);
    }
    EXPECT(during - before <= 8);
    write_file(w.ws, "memory/d07/new.md", "quokka sighting\n");
    EXPECT(wait_for(reader, "quokka", 1, 5000));
    write_file(w.ws, "memory/fresh/deeper/x.md", "wombat burrow\n");
    EXPECT(wait_for(reader, "wombat", 1, 5000));
    write_file(w.ws, "MEMORY.md", "root and a platypus\n");
    EXPECT(wait_for(reader, "platypus", 1, 5000));
    unlink(path_in(w.ws, "memory/d07/new.md"));
    EXPECT(wait_for(reader, "quokka", 0, 5000));
    __atomic_store_n(&t.stop, 1, __ATOMIC_RELEASE);
    pthread_join(t.tid, NULL);
    EXPECT(t.syncs >= 4);
    cm_engine_close(t.e);
    cm_engine_close(reader);
    EXPECT(count_fds(0) <= before);
}

TEST(watch_process_stops_on_sigterm)
{
    ws w;
    ws_init(&w, NULL);
    write_file(w.ws, "MEMORY.md", "hello\n");
    const char *args[] = {"--workspace", w.ws, "--state-dir", w.state, "--config", w.cfg, "watch",
                          "--debounce", "20", NULL};
    proc p;
    proc_start(&p, NULL, args);
    /* Settled, the watcher holds stdio, inotify and the index's files: under
     * a dozen. While its first sync runs it may briefly hold more (a note
     * being read, SQLite's journal), so poll for the settled count. */
    usleep(300000);
    int fds = count_fds(p.pid);
    for (int t = 0; t < 10000 && fds >= 12; t += 50) {
        usleep(50000);
        fds = count_fds(p.pid);
    }
    EXPECT(fds >= 3 && fds < 12);
    EXPECT_INT(proc_stop(&p, SIGTERM, 5000), 0);
}

/* Many processes on one index: a watcher, searches in a loop, forced and
 * plain index runs, and files changing, all at once. */
TEST(watch_many_processes_one_index)
{
    ws w;
    ws_init(&w, NULL);
    for (int i = 0; i < 200; i++) {
        char rel[64], text[64];
        snprintf(rel, sizeof rel, "memory/n%03d.md", i);
        snprintf(text, sizeof text, "shared keyword %d\n", i);
        write_file(w.ws, rel, text);
    }
    const char *wargs[] = {"--workspace", w.ws, "--state-dir", w.state, "--config", w.cfg, "watch",
                           "--debounce", "10", NULL};
    proc wproc;
    proc_start(&wproc, NULL, wargs);
    int failures = 0;
    char failure[4096] = "";
    pid_t kids[6];
    for (int k = 0; k < 6; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            for (int i = 0; i < 12; i++) {
                const char *cmd = k == 0 ? "index" : "search";
                const char *a[] = {"--workspace", w.ws, "--state-dir", w.state, "--config", w.cfg,
                                   cmd, k == 0 && i % 3 == 0 ? "--force" : "keyword", NULL};
                if (k == 0 && i % 3 != 0) a[7] = NULL;
                run_result r = run_clawmem(NULL, a);
                if (r.status != 0 || strstr(r.err, "locked")) {
                    fprintf(stderr, "  %s: exit %d: %s\n", cmd, r.status, r.err);
                    _exit(1);
                }
                run_result_release(&r);
                if (k == 5) { /* and edits, for the watcher */
                    char rel[64], text[64];
                    snprintf(rel, sizeof rel, "memory/n%03d.md", i);
                    snprintf(text, sizeof text, "shared keyword %d edited\n", i);
                    write_file(w.ws, rel, text);
                }
            }
            _exit(0);
        }
    }
    for (int k = 0; k < 6; k++) {
        int st;
        waitpid(kids[k], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failures++;
    }
    int wst = proc_stop(&wproc, SIGTERM, 10000);
    char *werr = proc_stderr(&wproc);
    if (strstr(werr, "locked")) snprintf(failure, sizeof failure, "%s", werr);
    free(werr);
    EXPECT_INT(failures, 0);
    EXPECT_INT(wst, 0);
    EXPECT_STR(failure, "");
}

static void *writer(void *arg)
{
    cm_engine *e = arg;
    char err[512], *js = NULL, text[64];
    for (int i = 0; i < 40; i++) {
        snprintf(text, sizeof text, "note %p-%d", (void *)pthread_self(), i);
        if (cm_memory_write(e, "memory/log.md", text, 0, &js, err, sizeof err) == CM_OK) cm_free(js);
        else fprintf(stderr, "  write: %s\n", err);
    }
    return NULL;
}

TEST(watch_concurrent_memory_writes_lose_nothing)
{
    ws w;
    ws_init(&w, NULL);
    write_file(w.ws, "MEMORY.md", "x\n");
    /* another process (forked first: a fork copies no thread's lock) ... */
    pid_t pid = fork();
    if (pid == 0) {
        cm_engine *pe = open_w(&w, 1);
        writer(pe);
        cm_engine_close(pe);
        _exit(0);
    }
    /* ... and four threads, each with its own engine */
    cm_engine *e[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) e[i] = open_w(&w, 1);
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, writer, e[i]);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    waitpid(pid, NULL, 0);
    for (int i = 0; i < 4; i++)
        cm_engine_close(e[i]);
    buf b = BUF_INIT;
    char err[256];
    EXPECT_INT(cm_fs_read_file(path_in(w.ws, "memory/log.md"), 1 << 20, &b, err, sizeof err),
               CM_OK);
    int notes = 0;
    for (const char *p = b.data; (p = strstr(p, "note ")); p++) notes++;
    EXPECT_INT(notes, 5 * 40);
    cm_buf_release(&b);
    /* a disabled engine refuses */
    cm_engine *ro = open_w(&w, 0);
    char *js = NULL;
    EXPECT_INT(cm_memory_write(ro, NULL, "x", 0, &js, err, sizeof err), CM_EINVAL);
    EXPECT_CONTAINS(err, "disabled");
    cm_engine_close(ro);
    /* nothing left behind */
    DIR *d = opendir(path_in(w.ws, "memory"));
    struct dirent *de;
    int stray = 0;
    while ((de = readdir(d)))
        if (strstr(de->d_name, ".tmp")) stray++;
    closedir(d);
    EXPECT_INT(stray, 0);
}

static bool index_ok(const ws *w)
{
    return db_integrity_ok(w->db);
}

static int leftovers(const ws *w)
{
    DIR *d = opendir(path_in(w->state, "memory"));
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, ".rebuild-")) n++;
    if (d) closedir(d);
    return n;
}

/* Rows of the index: chunks, and files with at least one chunk. */
static void index_counts(const ws *w, long *chunks, long *paths)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    *chunks = *paths = -1;
    if (sqlite3_open_v2(w->db, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT count(*), count(DISTINCT path) FROM chunks", -1, &q,
                           NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW) {
        *chunks = sqlite3_column_int64(q, 0);
        *paths = sqlite3_column_int64(q, 1);
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
}

/* Starts `clawmem index [flag]`, SIGKILLs it after a random delay up to
 * max_us; returns whether it was still running when killed. */
static bool kill_index_at_random(const ws *w, const char *flag, unsigned *seed, long max_us)
{
    const char *a[] = {"--workspace", w->ws, "--state-dir", w->state, "--config", w->cfg, "index", flag, NULL};
    proc p;
    proc_start(&p, NULL, a);
    usleep((useconds_t)(rand_r(seed) % max_us));
    return proc_stop(&p, SIGKILL, 5000) == 128 + SIGKILL;
}

TEST(watch_sigkill_at_random_points)
{
    ws w;
    ws_init(&w, NULL);
    for (int i = 0; i < 1500; i++) {
        char rel[64], text[128];
        snprintf(rel, sizeof rel, "memory/d%d/n%04d.md", i % 15, i);
        snprintf(text, sizeof text, "# n%d\nalpha state of note %d\nsome filler words here\n", i, i);
        write_file(w.ws, rel, text);
    }
    unsigned seed = (unsigned)time(NULL);
    cm_engine *e = NULL;
    /* How long one full index takes here: kills land anywhere inside it. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const char *full[] = {"--workspace", w.ws, "--state-dir", w.state, "--config", w.cfg, "index", NULL};
    run_result r0 = run_clawmem(NULL, full);
    run_result_release(&r0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long span = (t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000 + 1000;
    int killed = 0;
    struct {
        const char *flag, *config;
        bool edit;
    } phases[] = {
        {"--force", "{}", false},                                                    /* full index */
        {"--verbose", "{}", true},                                                   /* incremental */
        {"--verbose", "{agents:{defaults:{memorySearch:{chunking:{tokens:60}}}}}", false}, /* fingerprint */
    };
    for (size_t ph = 0; ph < ARRAY_LEN(phases); ph++) {
        write_file(w.dir, "qc.json", phases[ph].config);
        for (int round = 0; round < 6; round++) {
            if (phases[ph].edit)
                for (int i = round; i < 1500; i += 6) {
                    char rel[64], text[128];
                    snprintf(rel, sizeof rel, "memory/d%d/n%04d.md", i % 15, i);
                    snprintf(text, sizeof text, "# n%d\nbeta state of note %d round %d\n", i, i, round);
                    write_file(w.ws, rel, text);
                }
            killed += kill_index_at_random(&w, phases[ph].flag, &seed, span);
            if (!index_ok(&w)) {
                test_fail(__FILE__, __LINE__, "integrity after a kill in phase %zu, round %d", ph, round);
                return;
            }
            /* every note is there exactly once, in its old or its new state */
            long chunks, paths;
            index_counts(&w, &chunks, &paths);
            EXPECT_INT(paths, 1500);
            EXPECT_INT(chunks, 1500);
            e = open_w(&w, 0); /* and a search works; the open removes the dead's leftovers */
            EXPECT(count_hits(e, "state") > 0);
            cm_engine_close(e);
            EXPECT_INT(leftovers(&w), 0);
        }
        const char *a[] = {"--workspace", w.ws, "--state-dir", w.state, "--config", w.cfg, "index", NULL};
        run_result r = run_clawmem(NULL, a);
        EXPECT_INT(r.status, 0);
        run_result_release(&r);
        EXPECT(index_ok(&w));
        EXPECT_INT(leftovers(&w), 0);
    }
    EXPECT(killed >= 3); /* kills landed while the indexer was working */
    /* the last sync completed: every note is in its final state */
    e = open_w(&w, 0);
    EXPECT_INT(count_hits(e, "beta"), 100); /* maxResults of count_hits */
    cm_engine_close(e);
}

static unsigned settle(watcher *w)
{
    unsigned what = 0;
    for (int i = 0; i < 20; i++) { /* events arrive promptly; give them 200 ms */
        usleep(10000);
        what |= cm_watcher_read(w);
    }
    return what;
}

TEST(watch_watcher_events)
{
    ws wk;
    ws_init(&wk, NULL);
    write_file(wk.ws, "memory/a/x.md", "x\n");
    write_file(wk.ws, "memory/b/y.md", "y\n");
    write_file(wk.dir, "team/plan.md", "plan\n");
    cm_config c = {0};
    c.workspace = wk.ws;
    char *extra[] = {(char *)"../team/plan.md"};
    c.extra_paths.v = extra;
    c.extra_paths.n = 1;
    watcher *w = NULL;
    char err[256];
    EXPECT_INT(cm_watcher_open(&c, NULL, &w, err, sizeof err), CM_OK);
    EXPECT_INT(cm_watcher_count(w), 5); /* workspace, memory, a, b, team */
    EXPECT(!cm_watcher_degraded(w));
    EXPECT_INT(settle(w), 0);
    write_file(wk.ws, "memory/a/notes.txt", "not markdown\n");
    write_file(wk.ws, "README.md", "not memory\n");
    EXPECT_INT(settle(w), 0); /* neither is memory */
    write_file(wk.ws, "memory/a/x.md", "x changed\n");
    EXPECT(settle(w) & WATCH_CHANGED);
    write_file(wk.ws, "memory/new/deeper/z.md", "z\n");
    EXPECT(settle(w) & WATCH_CHANGED);
    EXPECT(cm_watcher_count(w) >= 6); /* the new directory is watched */
    write_file(wk.ws, "memory/new/deeper/w.md", "w\n");
    EXPECT(settle(w) & WATCH_CHANGED);
    write_file(wk.ws, "MEMORY.md", "root note\n");
    EXPECT(settle(w) & WATCH_CHANGED);
    write_file(wk.dir, "team/plan.md", "plan changed\n");
    EXPECT(settle(w) & WATCH_CHANGED);
    cm_watcher_close(w);
}
