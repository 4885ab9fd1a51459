/*
 * test_session_disk.c — sessions.json and transcripts when the disk refuses
 * writes. The failure is injected without root or a mount: RLIMIT_FSIZE in
 * a forked child (SIGXFSZ ignored) makes every write past the limit fail
 * with EFBIG, as a nearly full disk refuses the large file and takes the
 * small ones.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/config/config.h"
#include "../src/session/sessions.h"
#include "../src/session/store_index.h"
#include "../src/session/store_wal.h"
#include "../src/session/transcript.h"
#include "test.h"

#define T0 1800000000000LL

static char *store_path(const char *state)
{
    buf p = BUF_INIT;
    cm_session_store_path(&p, state, "main");
    return cm_buf_detach(&p);
}

/* Files in dir whose name contains part. */
static int count_files(const char *dir, const char *part)
{
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += strstr(de->d_name, part) != NULL;
    if (d) closedir(d);
    return n;
}

static int open_fds(void)
{
    return count_files("/proc/self/fd", "") - 2; /* . and .. */
}

static void limit_file_size(rlim_t bytes)
{
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {bytes, RLIM_INFINITY};
    setrlimit(RLIMIT_FSIZE, &rl);
}

/* A store whose sessions.json no longer fits under the file size limit,
 * while the journal's small records still do: every note returns (its
 * change journaled), every write of the store fails. The journal files and
 * their descriptors must not grow with the failed writes; once the limit
 * is lifted one write holds every change and the journal goes. The child
 * reports: failed writes, wal files and descriptors after 3 and after 60
 * rounds, then the final write's result and the wal files left. */
TEST(session_store_failed_writes_keep_journal_files_bounded)
{
    char *state = tmp_dir(), *path = store_path(state), *dir = cm_fs_dirname(path);
    cm_fs_mkdirs(dir, NULL, 0);
    json_t *st = json_object();
    for (int i = 0; i < 200; i++) {
        char key[64];
        snprintf(key, sizeof key, "agent:main:peer%03d", i);
        json_object_set_new(st, key, json_pack("{s:s,s:I}", "sessionId", key, "updatedAt", T0));
    }
    char *text = json_dumps(st, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    write_file(dir, "sessions.json", text);
    size_t store_len = strlen(text);
    free(text);
    json_decref(st);
    int p[2];
    EXPECT(pipe(p) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        session_store_config c = {{0}, 600000, {NULL, NULL}};
        cm_session_maint_defaults(&c.maint);
        char err[256];
        session_store s;
        cm_session_store_configure(path, &c, err, sizeof err);
        if (cm_session_store_read(&s, path, err, sizeof err)) _exit(2);
        limit_file_size(store_len / 2);
        int failed = 0, wal3 = 0, fd3 = 0;
        for (int round = 0; round < 60; round++) {
            char key[64];
            snprintf(key, sizeof key, "agent:main:peer%03d", round);
            json_t *patch = json_pack("{s:I}", "totalTokens", (json_int_t)(100 + round));
            if (cm_session_note(&s, key, patch, T0 + round, NULL, err, sizeof err)) _exit(3);
            json_decref(patch);
            failed += cm_session_store_sync(path, err, sizeof err) != CM_OK;
            if (round == 2) wal3 = count_files(dir, ".clawmem-wal."), fd3 = open_fds();
        }
        int wal60 = count_files(dir, ".clawmem-wal."), fd60 = open_fds();
        limit_file_size(RLIM_INFINITY);
        cm_rc rc = cm_session_store_sync(path, err, sizeof err);
        int left = count_files(dir, ".clawmem-wal.");
        dprintf(p[1], "%d %d %d %d %d %d %d\n", failed, wal3, fd3, wal60, fd60, (int)rc, left);
        _exit(0);
    }
    close(p[1]);
    char out[256] = "";
    ssize_t n = read(p[0], out, sizeof out - 1);
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    out[n > 0 ? n : 0] = 0;
    int failed = -1, wal3 = -1, fd3 = -1, wal60 = -1, fd60 = -1, rc = -1, left = -1;
    sscanf(out, "%d %d %d %d %d %d %d", &failed, &wal3, &fd3, &wal60, &fd60, &rc, &left);
    fprintf(stderr, "  failed %d, wal files %d -> %d, fds %d -> %d, rc %d, left %d\n", failed, wal3,
            wal60, fd3, fd60, rc, left);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_INT(failed, 60); /* the store never fitted */
    EXPECT(wal60 <= wal3 + 1);
    EXPECT(fd60 <= fd3 + 1);
    EXPECT_INT(rc, CM_OK);
    EXPECT_INT(left, 0);
    /* every journaled change is in the store */
    json_t *d = json_load_file(path, 0, NULL);
    int have = 0;
    for (int round = 0; round < 60; round++) {
        char key[64];
        snprintf(key, sizeof key, "agent:main:peer%03d", round);
        have += json_integer_value(json_object_get(json_object_get(d, key), "totalTokens")) ==
                100 + round;
    }
    json_decref(d);
    EXPECT_INT(have, 60);
    free(dir);
    free(path);
}

#define NOTES    150 /* notes of the turns */
#define KEYS     10  /* the sessions they touch */
#define FIELD(i) ((i) / KEYS % 2 ? "inputTokens" : "totalTokens")

typedef struct noter {
    session_store *s;
    int rounds, failed;
    _Atomic bool done;
} noter;

static void *note_loop(void *arg)
{
    noter *n = arg;
    char err[256], key[64];
    for (int i = 0; i < n->rounds; i++) {
        snprintf(key, sizeof key, "agent:main:peer%03d", i % KEYS);
        /* two fields in turn: a failed write's changes and the ones made
         * during it are both kept */
        json_t *patch = json_pack("{s:I}", FIELD(i), (json_int_t)(1000 + i));
        n->failed += cm_session_note(n->s, key, patch, T0 + i, NULL, err, sizeof err) != CM_OK;
        json_decref(patch);
    }
    n->done = true;
    return NULL;
}

/* The same while turns go on during the failing writes: a change journaled
 * during a write opens a newer journal file, and the failed write's one is
 * restated into it instead of being kept. */
TEST(session_store_failed_writes_during_turns_keep_journal_bounded)
{
    char *state = tmp_dir(), *path = store_path(state), *dir = cm_fs_dirname(path);
    cm_fs_mkdirs(dir, NULL, 0);
    char pad[2049];
    memset(pad, 'p', 2048);
    pad[2048] = 0;
    json_t *st = json_object();
    for (int i = 0; i < 200; i++) {
        char key[64];
        snprintf(key, sizeof key, "agent:main:peer%03d", i);
        json_t *e = json_pack("{s:s,s:I}", "sessionId", key, "updatedAt", T0);
        json_object_set_new(e, "label", json_string(pad)); /* a large store */
        json_object_set_new(st, key, e);
    }
    char *text = json_dumps(st, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    write_file(dir, "sessions.json", text);
    size_t store_len = strlen(text);
    free(text);
    json_decref(st);
    int p[2];
    EXPECT(pipe(p) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        session_store_config c = {{0}, 600000, {NULL, NULL}};
        cm_session_maint_defaults(&c.maint);
        char err[256];
        session_store s;
        cm_session_store_configure(path, &c, err, sizeof err);
        if (cm_session_store_read(&s, path, err, sizeof err)) _exit(2);
        int fd0 = open_fds();
        limit_file_size(store_len / 2);
        noter n = {&s, NOTES, 0, false};
        pthread_t t;
        if (pthread_create(&t, NULL, note_loop, &n)) _exit(3);
        int writes = 0, most = 0;
        (void)writes;
        int wfail = 0;
        while (!n.done) { /* writes of the store while the turns go on */
            writes++;
            wfail += cm_session_store_sync(path, err, sizeof err) != CM_OK;
            int w = count_files(dir, ".clawmem-wal.");
            if (w > most) most = w;
        }
        pthread_join(t, NULL);
        int fds = open_fds() - fd0;
        dprintf(p[1], "%d %d %d %d\n", n.failed, most, fds, wfail);
        _exit(0); /* a crash: nothing more is written */
    }
    close(p[1]);
    char out[256] = "";
    ssize_t n = read(p[0], out, sizeof out - 1);
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    out[n > 0 ? n : 0] = 0;
    int failed = -1, most = -1, fds = -1, wfail = -1;
    sscanf(out, "%d %d %d %d", &failed, &most, &fds, &wfail);
    fprintf(stderr, "  failed notes %d, failed writes %d, most wal files %d, fds +%d\n", failed,
            wfail, most, fds);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_INT(failed, 0);
    EXPECT(wfail > 0); /* the store never fitted */
    /* four kept at most (and one a turn is opening) */
    EXPECT(most <= 5);
    EXPECT(fds <= 4);
    /* the restart replays what the journal kept: the last value of each */
    session_store s;
    char err[256];
    EXPECT_INT(cm_session_store_read(&s, path, err, sizeof err), CM_OK);
    int seen = 0;
    for (int i = NOTES - 2 * KEYS; i < NOTES; i++) {
        char key[64];
        snprintf(key, sizeof key, "agent:main:peer%03d", i % KEYS);
        seen += json_integer_value(json_object_get(cm_session_store_get(&s, key), FIELD(i))) ==
                1000 + i;
    }
    cm_session_store_release(&s);
    EXPECT_INT(seen, 2 * KEYS);
    EXPECT_INT(cm_session_store_sync(path, err, sizeof err), CM_OK);
    EXPECT_INT(count_files(dir, ".clawmem-wal."), 0);
    json_t *d = json_load_file(path, 0, NULL);
    int have = 0;
    for (int i = NOTES - 2 * KEYS; i < NOTES; i++) {
        char key[64];
        snprintf(key, sizeof key, "agent:main:peer%03d", i % KEYS);
        have += json_integer_value(json_object_get(json_object_get(d, key), FIELD(i))) == 1000 + i;
    }
    json_decref(d);
    EXPECT_INT(have, 2 * KEYS);
    free(dir);
    free(path);
}

/* A transcript append the disk refuses midway is cut back: no torn line is
 * left for the next writer (QuantumClaw appends to the same file) to glue
 * its own to. A lock that cannot be taken says why and of which file (it
 * said "short write" of a temporary name). */
TEST(session_transcript_refused_append_is_cut_back_and_says_why)
{
    char *dir = tmp_dir();
    char path[4200];
    snprintf(path, sizeof path, "%s/sess-1.jsonl", dir);
    char big[600];
    memset(big, 'w', sizeof big - 1);
    big[sizeof big - 1] = 0;
    int p[2];
    EXPECT(pipe(p) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        char err[512] = "", err2[512] = "", id[40];
        json_t *m = json_pack("{s:{s:s,s:s}}", "message", "role", "user", "content", "hi");
        json_t *mb = json_pack("{s:{s:s,s:s}}", "message", "role", "user", "content", big);
        cm_rc r1 =
            cm_transcript_append(path, "sess-1", "/w", "message", m, T0, id, err, sizeof err);
        struct stat st;
        off_t s1 = stat(path, &st) ? -1 : st.st_size;
        limit_file_size((rlim_t)s1 + 100); /* the lock's file fits, the record does not */
        cm_rc r2 =
            cm_transcript_append(path, "sess-1", "/w", "message", mb, T0 + 1, id, err, sizeof err);
        off_t s2 = stat(path, &st) ? -1 : st.st_size;
        limit_file_size(10); /* not even the lock's file */
        cm_rc r3 =
            cm_transcript_append(path, "sess-1", "/w", "message", m, T0 + 2, id, err2, sizeof err2);
        limit_file_size(RLIM_INFINITY);
        cm_rc r4 = cm_transcript_append(path, "sess-1", "/w", "message", m, T0 + 3, id, NULL, 0);
        dprintf(p[1], "%d %d %d %d %lld %lld\n%s\n%s\n", (int)r1, (int)r2, (int)r3, (int)r4,
                (long long)s1, (long long)s2, err, err2);
        _exit(0);
    }
    close(p[1]);
    char out[2048] = "";
    size_t got = 0;
    ssize_t n;
    while (got < sizeof out - 1 && (n = read(p[0], out + got, sizeof out - 1 - got)) > 0)
        got += (size_t)n;
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    int r1 = -1, r2 = -1, r3 = -1, r4 = -1;
    long long s1 = -1, s2 = -1;
    sscanf(out, "%d %d %d %d %lld %lld", &r1, &r2, &r3, &r4, &s1, &s2);
    char *e1 = strchr(out, '\n'), *e2 = e1 ? strchr(e1 + 1, '\n') : NULL;
    if (e2) *e2++ = 0;
    if (e2 && strchr(e2, '\n')) *strchr(e2, '\n') = 0;
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_INT(r1, CM_OK);
    EXPECT_INT(r2, CM_EIO);
    EXPECT_INT(s2, s1); /* cut back: nothing torn left */
    EXPECT_CONTAINS(e1, path);
    EXPECT_CONTAINS(e1, strerror(EFBIG));
    EXPECT_INT(r3, CM_EIO);
    EXPECT_CONTAINS(e2, path);
    EXPECT_CONTAINS(e2, strerror(EFBIG));
    EXPECT_INT(r4, CM_OK);
    /* every line whole: the header and two records */
    buf b = BUF_INIT;
    cm_fs_read_file(path, 1 << 20, &b, NULL, 0);
    int lines = 0, parsed = 0;
    for (char *s = b.data; s && *s;) {
        char *nl = strchr(s, '\n');
        if (!nl) break;
        json_t *o = json_loadb(s, (size_t)(nl - s), 0, NULL);
        lines++;
        parsed += o != NULL;
        json_decref(o);
        s = nl + 1;
    }
    bool ends = b.len && b.data[b.len - 1] == '\n';
    cm_buf_release(&b);
    EXPECT(ends);
    EXPECT_INT(lines, 3);
    EXPECT_INT(parsed, 3);
}

static atomic_int g_warnings, g_infos;

static void count_log(void *ctx, cm_log_level lv, const char *msg)
{
    (void)ctx;
    (void)msg;
    if (lv == CM_LOG_WARN) atomic_fetch_add(&g_warnings, 1);
    if (lv == CM_LOG_INFO) atomic_fetch_add(&g_infos, 1);
}

/* The writer thread retries a store it cannot write later and later (1 s,
 * 2 s, 4 s, … at most a minute), since each attempt writes the store's
 * temporary file as far as the disk takes it, and logs only the 1st, 2nd,
 * 4th, … failure in a row: a disk full for a day is not a write and a
 * warning a second. The child reports the failed writes and warnings 2.5 s
 * after the first failure (1 s apart they were 3), then the first write
 * that works after the limit is lifted. */
TEST(session_store_writer_backs_off_while_writes_fail)
{
    char *state = tmp_dir(), *path = store_path(state), *dir = cm_fs_dirname(path);
    cm_fs_mkdirs(dir, NULL, 0);
    json_t *st = json_object();
    for (int i = 0; i < 40; i++) {
        char key[64];
        snprintf(key, sizeof key, "agent:main:peer%03d", i);
        json_object_set_new(st, key, json_pack("{s:s,s:I}", "sessionId", key, "updatedAt", T0));
    }
    char *text = json_dumps(st, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    write_file(dir, "sessions.json", text);
    size_t store_len = strlen(text);
    free(text);
    json_decref(st);
    int p[2];
    EXPECT(pipe(p) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        session_store_config c = {{0}, 1, {count_log, NULL}};
        cm_session_maint_defaults(&c.maint);
        char err[256], label[1025];
        session_store s;
        cm_session_store_configure(path, &c, err, sizeof err);
        if (cm_session_store_read(&s, path, err, sizeof err)) _exit(2);
        limit_file_size(store_len / 2);
        /* a large change: the writer is due soon after it */
        memset(label, 'l', 1024);
        label[1024] = 0;
        json_t *patch = json_pack("{s:s}", "label", label);
        if (cm_session_note(&s, "agent:main:peer000", patch, T0 + 1, NULL, err, sizeof err))
            _exit(3);
        json_decref(patch);
        store_ix_stats xs = {0};
        int64_t t1 = 0;
        for (int i = 0; i < 1000 && !t1; i++) { /* the first failed write */
            cm_store_ix_stats_get(s.ix, &xs);
            if (xs.failed_writes)
                t1 = cm_now_ms();
            else
                usleep(10000);
        }
        if (!t1) _exit(4);
        while (cm_now_ms() < t1 + 2500)
            usleep(20000);
        cm_store_ix_stats_get(s.ix, &xs);
        int failed = (int)xs.failed_writes, warned = atomic_load(&g_warnings);
        limit_file_size(RLIM_INFINITY);
        cm_rc rc = cm_session_store_sync(NULL, err, sizeof err); /* every store, as at exit */
        cm_store_ix_stats_get(s.ix, &xs);
        dprintf(p[1], "%d %d %d %d %d\n", failed, warned, (int)rc, (int)xs.failed_writes,
                atomic_load(&g_infos));
        _exit(0);
    }
    close(p[1]);
    char out[256] = "";
    ssize_t n = read(p[0], out, sizeof out - 1);
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    out[n > 0 ? n : 0] = 0;
    int failed = -1, warned = -1, rc = -1, after = -1, infos = -1;
    sscanf(out, "%d %d %d %d %d", &failed, &warned, &rc, &after, &infos);
    fprintf(stderr, "  in 2.5 s: %d failed writes, %d warnings; then rc %d, %d, %d info\n", failed,
            warned, rc, after, infos);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_INT(failed, 2); /* at the first, and 1 s later; the next 2 s after that */
    EXPECT_INT(warned, 2);
    EXPECT_INT(rc, CM_OK);
    EXPECT_INT(after, 0);
    EXPECT_INT(infos, 1); /* "written again after 2 failed writes" */
    json_t *d = json_load_file(path, 0, NULL);
    EXPECT_INT(strlen(json_string_value(
                   json_object_get(json_object_get(d, "agent:main:peer000"), "label"))),
               1024);
    json_decref(d);
    free(dir);
    free(path);
}

/* A process that forks while its writer thread waits for the next write
 * (the runner of these tests; any child that goes on using sessions): the
 * child's own writer must work. The condition variable the parent's thread
 * was waiting on is copied with that waiter, who does not exist in the
 * child; unless it is made anew, the child's first broadcast can wait for
 * it forever. */
TEST(session_store_writer_works_in_a_forked_child)
{
    char *state = tmp_dir(), *pa = store_path(state), *dir = cm_fs_dirname(pa);
    cm_fs_mkdirs(dir, NULL, 0);
    write_file(dir, "sessions.json", "{}");
    char *other = tmp_dir(), *pb = store_path(other), *dirb = cm_fs_dirname(pb);
    cm_fs_mkdirs(dirb, NULL, 0);
    write_file(dirb, "sessions.json", "{}");
    session_store_config c = {{0}, 600000, {NULL, NULL}};
    cm_session_maint_defaults(&c.maint);
    char err[256];
    session_store s;
    cm_session_store_configure(pa, &c, err, sizeof err);
    EXPECT_INT(cm_session_store_read(&s, pa, err, sizeof err), CM_OK);
    /* the writer thread starts and waits (ten minutes) */
    EXPECT_INT(cm_session_note(&s, "agent:main:a", NULL, T0, NULL, err, sizeof err), CM_OK);
    usleep(50000);
    pid_t pid = fork();
    if (pid == 0) {
        session_store t;
        session_store_config cc = {{0}, 1, {NULL, NULL}};
        cm_session_maint_defaults(&cc.maint);
        cm_session_store_configure(pb, &cc, err, sizeof err);
        if (cm_session_store_read(&t, pb, err, sizeof err)) _exit(2);
        for (int i = 0; i < 20; i++) {
            if (cm_session_note(&t, "agent:main:b", NULL, T0 + i, NULL, err, sizeof err)) _exit(3);
            usleep(5000);
        }
        _exit(cm_session_store_sync(NULL, err, sizeof err) ? 4 : 0);
    }
    int status = -1;
    for (int i = 0; i < 500; i++) { /* 5 s */
        if (waitpid(pid, &status, WNOHANG) == pid) break;
        status = -1;
        usleep(10000);
    }
    if (status == -1) { /* hung */
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    EXPECT_INT(cm_session_store_sync(pa, err, sizeof err), CM_OK);
    cm_session_store_release(&s);
    json_t *d = json_load_file(pb, 0, NULL);
    bool written = json_object_get(d, "agent:main:b") != NULL;
    json_decref(d);
    free(pa);
    free(pb);
    free(dir);
    free(dirb);
    EXPECT(status != -1);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT(written);
}

/* session.maintenance in enforce mode keeps a backup of a store past
 * rotateBytes (sessions.json.bak.<ms>) before the write. The backup must
 * not take sessions.json's place until the new one is in: when the write
 * then fails (a full disk; or a crash), sessions.json was gone, every reader
 * found an empty store, and this process re-read it as empty and wrote back
 * only its own unwritten entries: every other session forgotten. */
TEST(session_store_rotation_then_failed_write_keeps_the_store)
{
    char *state = tmp_dir(), *path = store_path(state), *dir = cm_fs_dirname(path);
    cm_fs_mkdirs(dir, NULL, 0);
    json_t *st = json_object();
    for (int i = 0; i < 40; i++) {
        char key[64];
        snprintf(key, sizeof key, "agent:main:peer%03d", i);
        json_object_set_new(st, key, json_pack("{s:s,s:I}", "sessionId", key, "updatedAt", T0));
    }
    char *text = json_dumps(st, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    write_file(dir, "sessions.json", text);
    size_t store_len = strlen(text);
    free(text);
    json_decref(st);
    int p[2];
    EXPECT(pipe(p) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        session_store_config c = {{0}, 0, {NULL, NULL}};
        cm_session_maint_defaults(&c.maint);
        c.maint.enforce = true;
        c.maint.rotate_bytes = 1024; /* the store is past it */
        char err[256];
        session_store s;
        cm_session_store_configure(path, &c, err, sizeof err);
        if (cm_session_store_read(&s, path, err, sizeof err)) _exit(2);
        limit_file_size(store_len / 2);
        json_t *patch = json_pack("{s:i}", "totalTokens", 5);
        cm_rc r1 = cm_session_touch(&s, "agent:main:peer001", patch, T0 + 1, NULL, err, sizeof err);
        json_t *d = json_load_file(path, 0, NULL);
        int after_fail = (int)json_object_size(d);
        json_decref(d);
        limit_file_size(RLIM_INFINITY);
        cm_rc r2 = cm_session_touch(&s, "agent:main:peer002", patch, T0 + 2, NULL, err, sizeof err);
        int backups = count_files(dir, "sessions.json.bak.");
        for (int i = 3; i < 8; i++) /* five more writes, each backed up: the 3 newest kept */
            cm_session_touch(&s, "agent:main:peer003", patch, T0 + i, NULL, err, sizeof err);
        json_decref(patch);
        dprintf(p[1], "%d %d %d %d %d\n", (int)r1, after_fail, (int)r2, backups,
                count_files(dir, "sessions.json.bak."));
        _exit(0);
    }
    close(p[1]);
    char out[256] = "";
    ssize_t n = read(p[0], out, sizeof out - 1);
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    out[n > 0 ? n : 0] = 0;
    int r1 = -1, after_fail = -1, r2 = -1, backups = -1, kept = -1;
    sscanf(out, "%d %d %d %d %d", &r1, &after_fail, &r2, &backups, &kept);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_INT(r1, CM_EIO);
    EXPECT_INT(after_fail, 40); /* the store is still there, whole */
    EXPECT_INT(r2, CM_OK);
    json_t *d = json_load_file(path, 0, NULL);
    size_t entries = json_object_size(d);
    json_int_t t1 = json_integer_value(
        json_object_get(json_object_get(d, "agent:main:peer001"), "totalTokens"));
    json_int_t t2 = json_integer_value(
        json_object_get(json_object_get(d, "agent:main:peer002"), "totalTokens"));
    json_decref(d);
    EXPECT_INT(entries, 40); /* every session kept */
    EXPECT_INT(t1, 5);       /* the failed write's change, written by the next */
    EXPECT_INT(t2, 5);
    EXPECT_INT(backups, 1); /* the failed write's backup went, the next one's stayed */
    EXPECT_INT(kept, 3);
    free(dir);
    free(path);
}

/* ---- a group fdatasync of the journal that fails ---- */

/* The kernel reports a writeback error once per open file: after the
 * journal's group fdatasync failed, the next one on the same file succeeds
 * though the lines the failed one covered may not be on the disk. A note
 * whose line that fdatasync covered must fail with it (when the store
 * cannot be written instead either), not return as durable after its own
 * later fdatasync. */
static pthread_mutex_t g_ds_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_ds_cv = PTHREAD_COND_INITIALIZER;
static int g_ds_calls, g_ds_open; /* fdatasync calls; the first waits until open */

static int t_datasync(int fd)
{
    pthread_mutex_lock(&g_ds_mu);
    int call = ++g_ds_calls;
    pthread_cond_broadcast(&g_ds_cv);
    while (call == 1 && !g_ds_open)
        pthread_cond_wait(&g_ds_cv, &g_ds_mu);
    pthread_mutex_unlock(&g_ds_mu);
    if (call == 2) { /* the group's: the disk failed the writeback */
        errno = EIO;
        return -1;
    }
    return fdatasync(fd);
}

typedef struct one_note {
    session_store *s;
    const char *key;
    cm_rc rc;
} one_note;

static void *note_once(void *arg)
{
    one_note *n = arg;
    char err[256];
    json_t *patch = json_pack("{s:s}", "label", n->key);
    n->rc = cm_session_note(n->s, n->key, patch, T0 + 1, NULL, err, sizeof err);
    json_decref(patch);
    return NULL;
}

/* Lines in the store's journal files; *bytes: the largest file's size. */
static int wal_lines(const char *dir, off_t *bytes)
{
    int lines = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!strstr(de->d_name, ".clawmem-wal.")) continue;
        buf b = BUF_INIT;
        if (cm_fs_read_file(path_in(dir, de->d_name), 1 << 20, &b, NULL, 0) == CM_OK)
            for (size_t i = 0; i < b.len; i++)
                lines += b.data[i] == '\n';
        if (bytes && (off_t)b.len > *bytes) *bytes = (off_t)b.len;
        cm_buf_release(&b);
    }
    if (d) closedir(d);
    return lines;
}

TEST(session_store_failed_group_fdatasync_fails_every_note_it_covered)
{
    char *state = tmp_dir(), *path = store_path(state), *dir = cm_fs_dirname(path);
    cm_fs_mkdirs(dir, NULL, 0);
    char pad[2049];
    memset(pad, 'p', 2048);
    pad[2048] = 0;
    json_t *st = json_object();
    for (int i = 0; i < 100; i++) {
        char key[64];
        snprintf(key, sizeof key, "agent:main:peer%03d", i);
        json_t *e = json_pack("{s:s,s:I}", "sessionId", key, "updatedAt", T0);
        json_object_set_new(e, "label", json_string(pad)); /* a large store */
        json_object_set_new(st, key, e);
    }
    char *text = json_dumps(st, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    write_file(dir, "sessions.json", text);
    size_t store_len = strlen(text);
    free(text);
    json_decref(st);
    int p[2];
    EXPECT(pipe(p) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        session_store_config c = {{0}, 600000, {NULL, NULL}};
        cm_session_maint_defaults(&c.maint);
        char err[256];
        session_store s;
        cm_session_store_configure(path, &c, err, sizeof err);
        if (cm_session_store_read(&s, path, err, sizeof err)) _exit(2);
        limit_file_size(store_len / 2); /* the store cannot be written instead, */
        cm_store_wal_datasync = t_datasync;
        one_note a = {&s, "agent:main:peer001", -1}, b = {&s, "agent:main:peer002", -1},
                 c3 = {&s, "agent:main:peer003", -1};
        pthread_t ta, tb, tc;
        if (pthread_create(&ta, NULL, note_once, &a)) _exit(3);
        pthread_mutex_lock(&g_ds_mu);
        while (g_ds_calls < 1) /* a's fdatasync is under way */
            pthread_cond_wait(&g_ds_cv, &g_ds_mu);
        pthread_mutex_unlock(&g_ds_mu);
        int one = wal_lines(dir, NULL);
        if (pthread_create(&tb, NULL, note_once, &b) || pthread_create(&tc, NULL, note_once, &c3))
            _exit(4);
        int i = 0;
        off_t bytes = 0;
        for (; i < 2000 && wal_lines(dir, NULL) < one + 2; i++) /* b's and c's lines wait */
            usleep(1000);
        /* nor can a failed note's change be restated into the journal: only
         * an fdatasync could still make it durable */
        wal_lines(dir, &bytes);
        limit_file_size((rlim_t)bytes);
        pthread_mutex_lock(&g_ds_mu);
        g_ds_open = 1;
        pthread_cond_broadcast(&g_ds_cv);
        pthread_mutex_unlock(&g_ds_mu);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        pthread_join(tc, NULL);
        dprintf(p[1], "%d %d %d %d\n", (int)a.rc, (int)b.rc, (int)c3.rc, i < 2000);
        _exit(0);
    }
    close(p[1]);
    char out[256] = "";
    ssize_t n = read(p[0], out, sizeof out - 1);
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    out[n > 0 ? n : 0] = 0;
    int ra = -1, rb = -1, rc = -1, waited = 0;
    sscanf(out, "%d %d %d %d", &ra, &rb, &rc, &waited);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_INT(waited, 1);
    EXPECT_INT(ra, CM_OK);
    EXPECT(rb != CM_OK); /* one of them ran the failed fdatasync, */
    EXPECT(rc != CM_OK); /* which covered the other's line too */
    free(dir);
    free(path);
}
