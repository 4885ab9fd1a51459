/*
 * test_fresh.c — the freshness check of a search: a sync that finds nothing
 * changed takes no writer lock and writes nothing; with a live watcher
 * keeping the index fresh, a search's sync (CM_SYNC_UNLESS_WATCHED) looks at
 * no file; a stopped or killed watcher is not trusted.
 */
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

typedef struct fr {
    char *dir;
    char ws[1024], state[1024], cfg[1024], db[1100];
} fr;

static void fr_init(fr *f)
{
    f->dir = tmp_dir();
    snprintf(f->ws, sizeof f->ws, "%s/ws", f->dir);
    snprintf(f->state, sizeof f->state, "%s/state", f->dir);
    snprintf(f->cfg, sizeof f->cfg, "%s/qc.json", f->dir);
    snprintf(f->db, sizeof f->db, "%s/memory/main.clawmem.sqlite", f->state);
    write_file(f->dir, "qc.json", "{}");
    for (int i = 0; i < 20; i++) {
        char rel[64], text[64];
        snprintf(rel, sizeof rel, "memory/n%02d.md", i);
        snprintf(text, sizeof text, "note %d about otters\n", i);
        write_file(f->ws, rel, text);
    }
    write_file(f->ws, "MEMORY.md", "root\n");
}

static cm_engine *fr_open(const fr *f)
{
    cm_options o = {NULL, f->ws, f->cfg, f->state, NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[512];
    if (cm_engine_open(&o, &e, err, sizeof err)) fprintf(stderr, "  open: %s\n", err);
    return e;
}

static cm_rc fr_sync(cm_engine *e, unsigned flags, cm_sync_stats *st)
{
    char err[512];
    cm_rc rc = cm_engine_sync(e, flags, NULL, NULL, st, err, sizeof err);
    if (rc && rc != CM_EBUSY) fprintf(stderr, "  sync: %s\n", err);
    return rc;
}

TEST(fresh_noop_sync_takes_no_lock_and_writes_nothing)
{
    fr f;
    fr_init(&f);
    cm_engine *e = fr_open(&f);
    cm_sync_stats st;
    EXPECT_INT(fr_sync(e, 0, &st), CM_OK);
    EXPECT_INT(st.files_indexed, 21);
    /* another process holds the writer lock (a separate open file: flock
     * conflicts even within one process) */
    char lockp[1200], walp[1200];
    snprintf(lockp, sizeof lockp, "%s.lock", f.db);
    snprintf(walp, sizeof walp, "%s-wal", f.db);
    int fd = open(lockp, O_RDWR);
    EXPECT(fd >= 0);
    EXPECT_INT(flock(fd, LOCK_EX | LOCK_NB), 0);
    struct stat a, b, wa, wb;
    EXPECT_INT(stat(f.db, &a), 0);
    int wal_a = stat(walp, &wa);
    /* nothing changed: no lock needed, so no CM_EBUSY, and no byte written */
    EXPECT_INT(fr_sync(e, CM_SYNC_NOWAIT, &st), CM_OK);
    EXPECT_INT(st.files_seen, 21);
    EXPECT_INT(st.files_unchanged, 21);
    EXPECT_INT(st.files_indexed, 0);
    cm_engine *e2 = fr_open(&f); /* a fresh process's engine too */
    EXPECT_INT(fr_sync(e2, CM_SYNC_NOWAIT, &st), CM_OK);
    EXPECT_INT(stat(f.db, &b), 0);
    EXPECT_INT(a.st_size, b.st_size);
    EXPECT(a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec);
    if (wal_a == 0) {
        EXPECT_INT(stat(walp, &wb), 0);
        EXPECT(wa.st_mtim.tv_sec == wb.st_mtim.tv_sec && wa.st_mtim.tv_nsec == wb.st_mtim.tv_nsec);
    }
    /* a change needs the lock: busy now, done once it is free */
    write_file(f.ws, "memory/n03.md", "note 3 now about beavers\n");
    EXPECT_INT(fr_sync(e2, CM_SYNC_NOWAIT, &st), CM_EBUSY);
    flock(fd, LOCK_UN);
    close(fd);
    EXPECT_INT(fr_sync(e2, CM_SYNC_NOWAIT, &st), CM_OK);
    EXPECT_INT(st.files_indexed, 1);
    /* a deleted file is a change too */
    unlink(path_in(f.ws, "memory/n04.md"));
    EXPECT_INT(fr_sync(e2, CM_SYNC_NOWAIT, &st), CM_OK);
    EXPECT_INT(st.files_removed, 1);
    cm_engine_close(e);
    cm_engine_close(e2);
}

typedef struct wt {
    cm_engine *e;
    volatile int stop;
    pthread_t tid;
} wt;

static void *run_watch(void *arg)
{
    wt *t = arg;
    cm_watch_opts o = {&t->stop, -1, 20, NULL, t, 0};
    char err[512];
    cm_engine_watch(t->e, &o, err, sizeof err);
    return NULL;
}

/* The record's state word ("fresh", "pending", "stopped"), or "", and its
 * sequence number (it grows with each "fresh" the watcher publishes; 0
 * without a record), from one read. */
static void record_read(const fr *f, char out[16], unsigned long long *seq)
{
    char p[1200], rec[64] = "";
    snprintf(p, sizeof p, "%s.watch", f->db);
    int fd = open(p, O_RDONLY);
    out[0] = 0;
    *seq = 0;
    if (fd < 0) return;
    ssize_t n = pread(fd, rec, sizeof rec - 1, 0);
    close(fd);
    rec[n > 0 ? n : 0] = 0;
    if (sscanf(rec, "clawmem-watch 1 %15s %llu", out, seq) != 2) {
        out[0] = 0;
        *seq = 0;
    }
}

static void record_state(const fr *f, char out[16])
{
    unsigned long long seq;
    record_read(f, out, &seq);
}

static unsigned long long record_seq(const fr *f)
{
    char s[16];
    unsigned long long seq;
    record_read(f, s, &seq);
    return seq;
}

/* How long a wait for the watcher may take before the test calls it hung:
 * only a guard, no outcome depends on it (a loaded machine is slow, not
 * wrong). */
#define WATCH_WAIT_MS 120000

/* Polls until the record says fresh with a sequence number above after: the
 * watcher finished a sync begun after that point, released the writer lock,
 * and waits for the next event. */
static bool wait_fresh_after(const fr *f, unsigned long long after)
{
    char s[16];
    unsigned long long seq;
    for (int t = 0; t < WATCH_WAIT_MS; t += 10) {
        record_read(f, s, &seq);
        if (!strcmp(s, "fresh") && seq > after) return true;
        usleep(10000);
    }
    return false;
}

static size_t hits(cm_engine *e, const char *q)
{
    char err[512], *js = NULL;
    cm_search_opts o = {50, 0, 0};
    if (cm_memory_search(e, q, &o, &js, err, sizeof err)) return 0;
    json_t *p = json_loads(js, 0, NULL);
    size_t n = json_array_size(json_object_get(p, "results"));
    json_decref(p);
    cm_free(js);
    return n;
}

TEST(fresh_search_trusts_a_live_watcher_only)
{
    fr f;
    fr_init(&f);
    cm_engine *r = fr_open(&f);
    cm_sync_stats st;
    EXPECT_INT(fr_sync(r, 0, &st), CM_OK);
    /* no watcher yet: the search's check walks the tree */
    EXPECT_INT(fr_sync(r, CM_SYNC_UNLESS_WATCHED, &st), CM_OK);
    EXPECT_INT(st.files_seen, 21);

    wt t = {fr_open(&f), 0, 0};
    pthread_create(&t.tid, NULL, run_watch, &t);
    EXPECT(wait_fresh_after(&f, 0));
    EXPECT_INT(fr_sync(r, CM_SYNC_UNLESS_WATCHED, &st), CM_OK);
    EXPECT_INT(st.files_seen, 0);          /* not a single stat */
    EXPECT_INT(fr_sync(r, 0, &st), CM_OK); /* an index's sync still checks */
    EXPECT_INT(st.files_seen, 21);
    /* an edit: the watcher syncs it and is fresh again; a search sees it.
     * Waiting for that fresh, not for a search to see the note, also waits
     * for the watcher to let go of the writer lock: it holds the lock past
     * the commit that makes the note searchable (the checkpoint follows). */
    unsigned long long before = record_seq(&f);
    EXPECT(before > 0);
    write_file(f.ws, "memory/n07.md", "note 7 about a capybara\n");
    EXPECT(wait_fresh_after(&f, before));
    EXPECT_INT(fr_sync(r, CM_SYNC_UNLESS_WATCHED, &st), CM_OK);
    EXPECT_INT(st.files_seen, 0); /* the watcher indexed it, not this sync */
    EXPECT_INT(hits(r, "capybara"), 1);
    /* a search with other index settings (another fingerprint) does not
     * trust this watcher: it walks the tree and, the watcher idle, takes
     * the writer lock to rebuild for its own settings */
    write_file(f.dir, "other.json", "{agents:{defaults:{memorySearch:{chunking:{tokens:200}}}}}");
    char other[1100];
    snprintf(other, sizeof other, "%s/other.json", f.dir);
    cm_options oo = {NULL, f.ws, other, f.state, NULL, NULL, 0};
    cm_engine *r2 = NULL;
    char err[512];
    EXPECT_INT(cm_engine_open(&oo, &r2, err, sizeof err), CM_OK);
    cm_rc rc2 = fr_sync(r2, CM_SYNC_NOWAIT | CM_SYNC_UNLESS_WATCHED, &st);
    EXPECT_INT(rc2, CM_OK);
    EXPECT_INT(st.files_seen, 21);
    cm_engine_close(r2);
    __atomic_store_n(&t.stop, 1, __ATOMIC_RELEASE);
    pthread_join(t.tid, NULL);
    cm_engine_close(t.e);
    char stopped[16]; /* written before the watcher returned */
    record_state(&f, stopped);
    EXPECT_STR(stopped, "stopped");
    EXPECT_INT(fr_sync(r, CM_SYNC_UNLESS_WATCHED, &st), CM_OK);
    EXPECT_INT(st.files_seen, 21);

    /* a watcher killed with SIGKILL leaves its record saying fresh, but the
     * kernel dropped its lock: not trusted */
    pid_t pid = fork();
    if (pid == 0) {
        cm_engine *c = fr_open(&f);
        wt ct = {c, 0, 0};
        run_watch(&ct);
        _exit(0);
    }
    EXPECT(pid > 0);
    EXPECT(wait_fresh_after(&f, 0));
    EXPECT_INT(fr_sync(r, CM_SYNC_UNLESS_WATCHED, &st), CM_OK);
    EXPECT_INT(st.files_seen, 0);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    char s[16];
    record_state(&f, s);
    EXPECT_STR(s, "fresh");
    write_file(f.ws, "memory/n08.md", "note 8 about a narwhal\n");
    EXPECT_INT(fr_sync(r, CM_SYNC_UNLESS_WATCHED, &st), CM_OK);
    EXPECT_INT(st.files_seen, 21);
    EXPECT_INT(st.files_indexed, 1);
    EXPECT_INT(hits(r, "narwhal"), 1);
    cm_engine_close(r);
}

/* A watcher started on a fresh install (no index, no index dir yet) claims
 * its record once its first sync made them, and searches can trust it. */
TEST(fresh_watcher_on_a_fresh_install_publishes_its_record)
{
    fr f;
    fr_init(&f);
    wt t = {fr_open(&f), 0, 0};
    pthread_create(&t.tid, NULL, run_watch, &t);
    EXPECT(wait_fresh_after(&f, 0));
    cm_engine *r = fr_open(&f);
    cm_sync_stats st;
    EXPECT_INT(fr_sync(r, CM_SYNC_UNLESS_WATCHED, &st), CM_OK);
    EXPECT_INT(st.files_seen, 0); /* trusted: no walk */
    __atomic_store_n(&t.stop, 1, __ATOMIC_RELEASE);
    pthread_join(t.tid, NULL);
    cm_engine_close(t.e);
    cm_engine_close(r);
}

static long fr_dirty(cm_engine *e)
{
    char err[512], *js = NULL;
    if (cm_engine_status(e, 1, &js, err, sizeof err) != CM_OK) return -1;
    json_t *s = json_loads(js, 0, NULL);
    cm_free(js);
    long n = (long)json_integer_value(json_object_get(s, "dirtyFiles"));
    json_decref(s);
    return n;
}

/* The no-change check streams the files rows against the discovered files:
 * rows out of path order (a note added after the first index sorts first)
 * are still paired, and a changed, a new and a removed file each count. */
TEST(fresh_check_counts_changed_new_and_gone_files)
{
    fr f;
    fr_init(&f);
    cm_engine *e = fr_open(&f);
    cm_sync_stats st;
    EXPECT_INT(fr_sync(e, 0, &st), CM_OK);
    write_file(f.ws, "memory/a-first.md", "added later, sorts first\n");
    EXPECT_INT(fr_sync(e, 0, &st), CM_OK);
    EXPECT_INT(st.files_indexed, 1);
    EXPECT_INT(fr_dirty(e), 0);
    EXPECT_INT(fr_sync(e, CM_SYNC_NOWAIT, &st), CM_OK);
    EXPECT_INT(st.files_indexed, 0);
    EXPECT_INT(st.files_unchanged, 22);
    write_file(f.ws, "memory/n07.md", "note 7 about otters, now longer\n"); /* changed */
    write_file(f.ws, "memory/b-new.md", "new\n");                           /* new */
    char gone[1200];
    snprintf(gone, sizeof gone, "%s/memory/n12.md", f.ws);
    EXPECT_INT(unlink(gone), 0); /* gone */
    EXPECT_INT(fr_dirty(e), 3);
    EXPECT_INT(fr_sync(e, CM_SYNC_NOWAIT, &st), CM_OK);
    EXPECT_INT(st.files_indexed, 2);
    EXPECT_INT(fr_dirty(e), 0);
    cm_engine_close(e);
}
