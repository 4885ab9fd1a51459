/*
 * test_gateway_journal.c — the gateway's journal (src/gateway/core/journal.h):
 * a disk filling up mid-append on a small tmpfs, then a crash (the writer
 * process exits without closing) — every acknowledged message replayed
 * exactly once; a short write that cannot even be cut back (injected);
 * torn lines skipped without losing the lines after them; many accept/done
 * cycles keep the file bounded (compaction while running); the accept
 * limit; dedupe keys journaled by an older version read back.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/gateway/core/dedupe.h"
#include "../src/gateway/core/journal.h"
#include "test.h"

#define NOW 1800000000000LL
#define DAY (24LL * 3600 * 1000)

static gw_journal *t_open(const char *state, json_t **pending, json_t **seen)
{
    gw_journal *j = NULL;
    char err[256] = "";
    if (cm_gw_journal_open(state, NOW, GW_DEDUPE_TTL_MS, &j, pending, seen, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "journal open: %s", err);
        return NULL;
    }
    return j;
}

/* The message ids of the pending entries, space-separated, in a new buf. */
static char *t_pending_ids(const json_t *pending)
{
    buf b = BUF_INIT;
    cm_buf_adds(&b, "");
    size_t i;
    json_t *e;
    json_array_foreach(pending, i, e)
    {
        const char *id = json_string_value(json_object_get(json_object_get(e, "msg"), "messageId"));
        cm_buf_printf(&b, "%s%s", i ? " " : "", id ? id : "?");
    }
    return cm_buf_detach(&b);
}

static cm_rc t_accept(gw_journal *j, const char *id, const char *text, uint64_t *jid)
{
    gw_msg m = {.channel = "http", .peer = "p", .sender = "p", .message_id = id, .text = text};
    char err[256];
    return cm_gw_journal_accept(j, &m, NOW, jid, err, sizeof err);
}

/* ---- torn lines ------------------------------------------------------------ */

TEST(gw_journal_torn_lines_skipped_not_the_lines_after)
{
    char *dir = tmp_dir();
    char *state = cm_strdup(path_in(dir, "state"));
#define IN(id)  "{\"j\":\"in\",\"id\":" #id ",\"ts\":1,\"msg\":{\"channel\":\"http\",\"peer\":\"p\","
#define MID(id) "\"messageId\":\"m" #id "\",\"text\":\"t\"}}"
    /* 2 torn by a failed write and 3 appended to the same line (what an
     * older version left), a torn last line */
    write_file(dir, "state/gateway/journal.jsonl",
               IN(1) MID(1) "\n" IN(2) "\"messageId\":\"m2\",\"te" IN(3)
                   MID(3) "\n"
                          "\n" IN(4)
                              MID(4) "\n{\"j\":\"run\",\"id\":4}\n{\"j\":\"done\",\"id\":1,\"sta");
    json_t *pending = NULL, *seen = NULL;
    gw_journal *j = t_open(state, &pending, &seen);
    if (!j) return;
    gw_journal_stats st;
    cm_gw_journal_stats(j, &st);
    char *ids = t_pending_ids(pending);
    json_int_t runs4 = json_integer_value(json_object_get(json_array_get(pending, 2), "runs"));
    cm_gw_journal_close(j);
    json_decref(pending);
    json_decref(seen);
    /* rewritten whole: a second open finds the same and nothing torn */
    j = t_open(state, &pending, &seen);
    if (!j) return;
    gw_journal_stats st2;
    cm_gw_journal_stats(j, &st2);
    char *ids2 = t_pending_ids(pending);
    cm_gw_journal_close(j);
    json_decref(pending);
    json_decref(seen);
    free(state);
    char a[128], b[128];
    snprintf(a, sizeof a, "%s", ids);
    snprintf(b, sizeof b, "%s", ids2);
    free(ids);
    free(ids2);
    EXPECT_STR(a, "m1 m3 m4");
    EXPECT_INT(st.torn, 2);
    EXPECT_INT(runs4, 1);
    EXPECT_STR(b, "m1 m3 m4");
    EXPECT_INT(st2.torn, 0);
#undef IN
#undef MID
}

/* ---- a full disk, then a crash ---------------------------------------------- */

/* The child: accepts 3,000-byte messages until the disk is full, frees the
 * filler, accepts five more, and exits without closing the journal. Each
 * acknowledged message id goes down the pipe as a line; "FAIL <n>" counts
 * the refused accepts. */
static void t_fill_child(const char *state, const char *filler, int wfd)
{
    json_t *pending = NULL, *seen = NULL;
    gw_journal *j = NULL;
    char err[256], line[64], text[3001];
    memset(text, 'x', 3000);
    text[3000] = 0;
    if (cm_gw_journal_open(state, NOW, GW_DEDUPE_TTL_MS, &j, &pending, &seen, err, sizeof err))
        _exit(2);
    int fails = 0, after = 0;
    for (int i = 0; i < 1000 && after < 5; i++) {
        char id[32];
        snprintf(id, sizeof id, "m%d", i);
        uint64_t jid = 0;
        gw_msg m = {.channel = "http", .peer = "p", .message_id = id, .text = text};
        cm_rc rc = cm_gw_journal_accept(j, &m, NOW, &jid, err, sizeof err);
        if (rc == CM_OK) {
            int n = snprintf(line, sizeof line, "%s\n", id);
            if (write(wfd, line, (size_t)n) != n) _exit(3);
            after += fails > 0;
        } else if (fails++ == 0) {
            unlink(filler); /* room again: the next accept must stand on its own */
        }
    }
    int n = snprintf(line, sizeof line, "FAIL %d\n", fails);
    if (write(wfd, line, (size_t)n) != n) _exit(3);
    _exit(0); /* a crash: the journal is never closed */
}

TEST(gw_journal_disk_full_then_crash_replays_every_ack_once)
{
    char *dir = tmp_dir();
    char mnt[4096];
    snprintf(mnt, sizeof mnt, "%s", path_in(dir, "mnt"));
    if (mkdir(mnt, 0700)) SKIP("tmpfs", "mkdir: %s", strerror(errno));
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=256k,mode=0700"))
        SKIP("tmpfs", "cannot mount a small tmpfs here (%s): needs root", strerror(errno));
    char state[4200], filler[4200];
    snprintf(state, sizeof state, "%s/state", mnt);
    snprintf(filler, sizeof filler, "%s/filler", mnt);
    char zeros[4096] = {0};
    int ffd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    for (int i = 0; ffd >= 0 && i < 48; i++) /* 192 KiB of the 256 */
        if (write(ffd, zeros, sizeof zeros) != (ssize_t)sizeof zeros) break;
    if (ffd >= 0) close(ffd);
    int p[2];
    if (pipe(p)) {
        umount2(mnt, MNT_DETACH);
        EXPECT(!"pipe");
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        t_fill_child(state, filler, p[1]);
    }
    close(p[1]);
    buf acks = BUF_INIT;
    char tmp[4096];
    ssize_t r;
    while ((r = read(p[0], tmp, sizeof tmp)) > 0)
        cm_buf_add(&acks, tmp, (size_t)r);
    close(p[0]);
    int status = -1;
    waitpid(pid, &status, 0);
    /* the restart: every acknowledged message pending exactly once */
    json_t *pending = NULL, *seen = NULL;
    gw_journal *j = t_open(state, &pending, &seen);
    gw_journal_stats st = {0};
    if (j) cm_gw_journal_stats(j, &st);
    char *ids = t_pending_ids(pending);
    cm_gw_journal_close(j);
    json_decref(pending);
    json_decref(seen);
    umount2(mnt, MNT_DETACH);
    /* acks: "m0\nm1\n…FAIL n\n" → "m0 m1 …" */
    const char *fail = acks.data ? strstr(acks.data, "FAIL ") : NULL;
    int fails = fail ? (int)strtol(fail + 5, NULL, 10) : -1;
    buf want = BUF_INIT;
    cm_buf_adds(&want, "");
    for (const char *s = acks.data ? acks.data : ""; *s && s != fail;) {
        const char *nl = strchr(s, '\n');
        if (!nl) break;
        cm_buf_printf(&want, "%s%.*s", want.len ? " " : "", (int)(nl - s), s);
        s = nl + 1;
    }
    bool same = !strcmp(ids, want.data);
    if (!same) test_fail(__FILE__, __LINE__, "replayed: %s\nacknowledged: %s", ids, want.data);
    free(ids);
    cm_buf_release(&acks);
    cm_buf_release(&want);
    if (!same) return;
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT(fails >= 1); /* the disk did fill up */
    EXPECT_INT(st.torn, 0);
}

/* ---- a short write that cannot be cut back ------------------------------------ */

static int g_short, g_enospc, g_trunc_fail;

static ssize_t t_write(int fd, const void *p, size_t n)
{
    if (g_enospc) {
        g_enospc = 0;
        errno = ENOSPC;
        return -1;
    }
    if (g_short && n > 1) { /* half the line, then the disk is full */
        g_short = 0;
        g_enospc = 1;
        return write(fd, p, n / 2);
    }
    return write(fd, p, n);
}

static int t_truncate(int fd, off_t len)
{
    if (g_trunc_fail > 0) {
        g_trunc_fail--;
        errno = EIO;
        return -1;
    }
    return ftruncate(fd, len);
}

TEST(gw_journal_short_write_cut_back_or_refused_until_healed)
{
    char *dir = tmp_dir();
    char *state = cm_strdup(path_in(dir, "state"));
    json_t *pending = NULL, *seen = NULL;
    gw_journal *j = t_open(state, &pending, &seen);
    json_decref(pending);
    json_decref(seen);
    if (!j) return;
    gw_journal_io io = {.write = t_write, .truncate = t_truncate};
    cm_gw_journal_set_io(j, &io);
    uint64_t a = 0, x = 0;
    cm_rc r[6];
    gw_journal_stats st[3];
    r[0] = t_accept(j, "a", "first", &a);
    g_short = 1; /* cut back: the next one stands on its own line */
    r[1] = t_accept(j, "b", "torn", &x);
    cm_gw_journal_stats(j, &st[0]);
    r[2] = t_accept(j, "c", "after a cut", &x);
    g_short = 1, g_trunc_fail = 2; /* not even cut back: refused until it is */
    r[3] = t_accept(j, "d", "torn, uncut", &x);
    cm_gw_journal_stats(j, &st[1]);
    r[4] = t_accept(j, "e", "refused", &x);
    r[5] = t_accept(j, "f", "healed", &x);
    cm_gw_journal_stats(j, &st[2]);
    cm_gw_journal_done(j, a, "answered");
    cm_gw_journal_close(j); /* writes nothing: as a crash */
    g_short = g_enospc = g_trunc_fail = 0;
    j = t_open(state, &pending, &seen);
    free(state);
    gw_journal_stats after = {0};
    if (j) cm_gw_journal_stats(j, &after);
    char *ids = t_pending_ids(pending);
    cm_gw_journal_close(j);
    json_decref(pending);
    json_decref(seen);
    char got[64];
    snprintf(got, sizeof got, "%s", ids);
    free(ids);
    EXPECT_INT(r[0], CM_OK);
    EXPECT_INT(r[1], CM_EIO);
    EXPECT(!st[0].broken);
    EXPECT_INT(r[2], CM_OK);
    EXPECT_INT(r[3], CM_EIO);
    EXPECT(st[1].broken);
    EXPECT_INT(r[4], CM_EIO);
    EXPECT_INT(r[5], CM_OK);
    EXPECT(!st[2].broken);
    EXPECT_STR(got, "c f");
    EXPECT_INT(after.torn, 0);
}

/* ---- bounded while running ---------------------------------------------------- */

TEST(gw_journal_many_cycles_stay_bounded)
{
    char *dir = tmp_dir();
    char *state = cm_strdup(path_in(dir, "state"));
    json_t *pending = NULL, *seen = NULL;
    gw_journal *j = t_open(state, &pending, &seen);
    json_decref(pending);
    json_decref(seen);
    if (!j) return;
    const uint64_t limit = 16u << 10;
    cm_gw_journal_set_limit(j, limit);
    char text[201], id[32], err[256];
    memset(text, 'y', 200);
    text[200] = 0;
    uint64_t max_bytes = 0, jid = 0;
    int refused = 0;
    /* three never answered (a run stuck on them), then 800 answered */
    for (int i = 0; i < 3; i++) {
        snprintf(id, sizeof id, "stuck%d", i);
        refused += t_accept(j, id, text, &jid) != CM_OK;
        cm_gw_journal_run(j, jid);
    }
    for (int i = 0; i < 800; i++) {
        snprintf(id, sizeof id, "m%d", i);
        if (t_accept(j, id, text, &jid)) {
            refused++;
        } else {
            cm_gw_journal_run(j, jid);
            cm_gw_journal_done(j, jid, "answered");
        }
        if (cm_gw_journal_compact(j, NOW + i, false, err, sizeof err))
            test_fail(__FILE__, __LINE__, "compact: %s", err);
        gw_journal_stats st;
        cm_gw_journal_stats(j, &st);
        if (st.bytes > max_bytes) max_bytes = st.bytes;
    }
    gw_journal_stats st;
    cm_gw_journal_stats(j, &st);
    cm_gw_journal_close(j);
    j = t_open(state, &pending, &seen);
    free(state);
    char *ids = t_pending_ids(pending);
    json_int_t runs = json_integer_value(json_object_get(json_array_get(pending, 0), "runs"));
    size_t nseen = json_array_size(seen);
    cm_gw_journal_close(j);
    json_decref(pending);
    json_decref(seen);
    char got[128];
    snprintf(got, sizeof got, "%s", ids);
    free(ids);
    EXPECT_INT(refused, 0);
    EXPECT(max_bytes <= 2 * limit);
    EXPECT(st.compactions >= 10);
    EXPECT_STR(got, "stuck0 stuck1 stuck2");
    EXPECT_INT(runs, 1);
    EXPECT(nseen > 0); /* the newest answered keys kept for dedupe */
}

/* ---- the accept limit ------------------------------------------------------------ */

TEST(gw_journal_accept_limit_refuses_until_answers_make_room)
{
    char *dir = tmp_dir();
    char *state = cm_strdup(path_in(dir, "state"));
    json_t *pending = NULL, *seen = NULL;
    gw_journal *j = t_open(state, &pending, &seen);
    json_decref(pending);
    json_decref(seen);
    if (!j) return;
    cm_gw_journal_set_limit(j, 8u << 10);
    char text[1001], big[9001], id[32];
    memset(text, 'z', 1000);
    text[1000] = 0;
    memset(big, 'z', 9000);
    big[9000] = 0;
    uint64_t ids[32], x;
    int ok = 0;
    cm_rc last = CM_OK;
    while (ok < 32) {
        snprintf(id, sizeof id, "m%d", ok);
        if ((last = t_accept(j, id, text, &ids[ok]))) break;
        ok++;
    }
    cm_rc too_big = t_accept(j, "big", big, &x);
    cm_gw_journal_done(j, ids[0], "answered");
    cm_gw_journal_done(j, ids[1], "answered");
    cm_rc again = t_accept(j, "again", text, &x);
    cm_gw_journal_close(j);
    free(state);
    EXPECT(ok >= 6 && ok <= 8);
    EXPECT_INT(last, CM_ERATELIMIT);
    EXPECT_INT(too_big, CM_ETOOBIG);
    EXPECT_INT(again, CM_OK);
}

/* ---- dedupe keys of an older version -------------------------------------------- */

TEST(gw_journal_old_dedupe_keys_read_back)
{
    char *dir = tmp_dir();
    char *state = cm_strdup(path_in(dir, "state"));
    char text[512];
    snprintf(text, sizeof text,
             "{\"j\":\"seen\",\"key\":\"telegram|alice|7|42\",\"ts\":%lld}\n"
             "{\"j\":\"seen\",\"key\":\"8:telegram|0:|0:|2:bo|0:|1:1\",\"ts\":%lld,\"kv\":2}\n"
             "{\"j\":\"seen\",\"key\":\"telegram|old|1\",\"ts\":%lld}\n",
             NOW - 1000, NOW - 1000, NOW - DAY);
    write_file(dir, "state/gateway/journal.jsonl", text);
    json_t *pending = NULL, *seen = NULL;
    char keys[2][2][128];
    for (int round = 0; round < 2; round++) { /* read back, then after its rewrite */
        gw_journal *j = t_open(state, &pending, &seen);
        if (!j) return;
        cm_gw_journal_close(j);
        for (int k = 0; k < 2; k++)
            snprintf(keys[round][k], sizeof keys[0][0], "%s",
                     json_array_size(seen) == 2
                         ? json_string_value(json_object_get(json_array_get(seen, k), "key"))
                         : "(count)");
        json_decref(pending);
        json_decref(seen);
    }
    free(state);
    gw_msg m = {.channel = "telegram", .peer = "alice|7", .message_id = "42"};
    buf lk = BUF_INIT;
    cm_gw_dedupe_key_legacy(&m, &lk);
    char legacy[128];
    snprintf(legacy, sizeof legacy, "%s", lk.data ? lk.data : "");
    cm_buf_release(&lk);
    for (int round = 0; round < 2; round++) {
        EXPECT_STR(keys[round][0], legacy);
        EXPECT_STR(keys[round][1], "8:telegram|0:|0:|2:bo|0:|1:1");
    }
}

/* ---- compaction while other threads accept and answer ---------------------------- */

typedef struct cycler {
    gw_journal *j;
    int t, refused, failed;
    char why[256]; /* the first refusal's or failure's message */
} cycler;

static void *S_cycle(void *arg)
{
    cycler *c = arg;
    char id[32], err[256];
    for (int i = 0; i < 800; i++) {
        snprintf(id, sizeof id, "t%d-%d", c->t, i);
        uint64_t jid = 0;
        gw_msg m = {.channel = "http", .peer = "p", .message_id = id, .text = "a short text"};
        /* a refusal (the file at its limit while a compaction copies what
         * came meanwhile) is tried again after a compaction, as the
         * runtime's sink does */
        cm_rc rc = CM_OK;
        for (int64_t end = cm_now_ms() + 10000; cm_now_ms() < end;) {
            rc = cm_gw_journal_accept(c->j, &m, NOW, &jid, err, sizeof err);
            if (rc != CM_ERATELIMIT) break;
            if (!c->refused++) snprintf(c->why, sizeof c->why, "%s", err);
            if (cm_gw_journal_compact(c->j, NOW, false, err, sizeof err)) c->failed++;
            struct timespec ts = {0, 1000000L}; /* the other threads' compaction goes on */
            nanosleep(&ts, NULL);
        }
        if (rc) {
            c->failed++;
            snprintf(c->why, sizeof c->why, "%s", err);
            continue;
        }
        cm_gw_journal_run(c->j, jid);
        if (i % 50) cm_gw_journal_done(c->j, jid, "answered"); /* every 50th stays */
        if (cm_gw_journal_compact(c->j, NOW, false, err, sizeof err) && !c->failed++ && !c->refused)
            snprintf(c->why, sizeof c->why, "%s", err);
    }
    return NULL;
}

TEST(gw_journal_compaction_races_accepts_and_answers)
{
    char *dir = tmp_dir();
    char *state = cm_strdup(path_in(dir, "state"));
    json_t *pending = NULL, *seen = NULL;
    gw_journal *j = t_open(state, &pending, &seen);
    json_decref(pending);
    json_decref(seen);
    if (!j) return;
    cm_gw_journal_set_limit(j, 64u << 10);
    cycler c[4];
    pthread_t th[4];
    for (int t = 0; t < 4; t++) {
        c[t] = (cycler){j, t, 0, 0, ""};
        pthread_create(&th[t], NULL, S_cycle, &c[t]);
    }
    for (int t = 0; t < 4; t++)
        pthread_join(th[t], NULL);
    gw_journal_stats st;
    cm_gw_journal_stats(j, &st);
    cm_gw_journal_close(j);
    j = t_open(state, &pending, &seen);
    free(state);
    /* exactly the unanswered ones, each once, each with its run */
    buf want = BUF_INIT;
    int bad_runs = 0, n = 0;
    size_t i;
    json_t *e;
    json_array_foreach(pending, i, e) bad_runs +=
        json_integer_value(json_object_get(e, "runs")) != 1;
    for (int t = 0; t < 4; t++)
        for (int k = 0; k < 800; k += 50, n++)
            cm_buf_printf(&want, "t%d-%d\n", t, k);
    char *ids = t_pending_ids(pending);
    int found = 0;
    for (char *s = want.data; s && *s;) {
        char *nl = strchr(s, '\n');
        *nl = 0;
        char pat[40];
        snprintf(pat, sizeof pat, " %s ", s);
        buf hay = BUF_INIT;
        cm_buf_printf(&hay, " %s ", ids);
        found += strstr(hay.data, pat) != NULL;
        cm_buf_release(&hay);
        s = nl + 1;
    }
    size_t npending = json_array_size(pending);
    cm_gw_journal_close(j);
    json_decref(pending);
    json_decref(seen);
    free(ids);
    cm_buf_release(&want);
    for (int t = 0; t < 4; t++) {
        if (c[t].failed)
            test_fail(__FILE__, __LINE__, "thread %d: %d refused, %d failed: %s", t, c[t].refused,
                      c[t].failed, c[t].why);
        EXPECT(!c[t].failed);
    }
    EXPECT(st.compactions >= 5);
    EXPECT(st.bytes <= 2 * (64u << 10));
    EXPECT_INT(npending, n);
    EXPECT_INT(found, n);
    EXPECT_INT(bad_runs, 0);
}

/* ---- no fsync under the journal's lock ------------------------------------ */

/* An fsync that stalls on its 2nd and 3rd calls (a compaction's swap: the
 * copied tail, then the file in place) until the test lets it go. */
static pthread_mutex_t g_st_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_st_cv = PTHREAD_COND_INITIALIZER;
static int g_st_calls, g_st_stalled, g_st_released;

static int t_stall_fsync(int fd)
{
    pthread_mutex_lock(&g_st_mu);
    int call = ++g_st_calls;
    if (call == 2 || call == 3) {
        g_st_stalled = call;
        pthread_cond_broadcast(&g_st_cv);
        while (g_st_released < call)
            pthread_cond_wait(&g_st_cv, &g_st_mu);
    }
    pthread_mutex_unlock(&g_st_mu);
    return fsync(fd);
}

typedef struct stall_run {
    gw_journal *j;
    uint64_t done_id;
    cm_rc rc;
    bool finished;
} stall_run;

static void *S_compact_forced(void *arg)
{
    stall_run *r = arg;
    char err[256];
    r->rc = cm_gw_journal_compact(r->j, NOW, true, err, sizeof err);
    return NULL;
}

/* What other threads do while the fsync stalls: read the stats and mark an
 * entry answered (both take the journal's lock). */
static void *S_meanwhile(void *arg)
{
    stall_run *r = arg;
    gw_journal_stats st;
    cm_gw_journal_stats(r->j, &st);
    cm_gw_journal_done(r->j, r->done_id, "answered");
    pthread_mutex_lock(&g_st_mu);
    r->finished = true;
    pthread_cond_broadcast(&g_st_cv);
    pthread_mutex_unlock(&g_st_mu);
    return NULL;
}

/* Waits (up to 5 s) for cond under g_st_mu; whether it came. */
static bool t_wait_for(bool (*cond)(void *), void *arg)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 5;
    pthread_mutex_lock(&g_st_mu);
    while (!cond(arg) && !pthread_cond_timedwait(&g_st_cv, &g_st_mu, &ts)) {
    }
    bool ok = cond(arg);
    pthread_mutex_unlock(&g_st_mu);
    return ok;
}

static bool t_stalled_at(void *arg)
{
    return g_st_stalled == *(int *)arg;
}
static bool t_finished(void *arg)
{
    return ((stall_run *)arg)->finished;
}

TEST(gw_journal_compaction_fsyncs_outside_the_lock)
{
    char *dir = tmp_dir();
    char *state = cm_strdup(path_in(dir, "state"));
    json_t *pending = NULL, *seen = NULL;
    gw_journal *j = t_open(state, &pending, &seen);
    json_decref(pending);
    json_decref(seen);
    if (!j) return;
    uint64_t ids[40];
    char mid[16];
    for (int i = 0; i < 40; i++) {
        snprintf(mid, sizeof mid, "m%d", i);
        EXPECT_INT(t_accept(j, mid, "hello", &ids[i]), CM_OK);
    }
    for (int i = 0; i < 30; i++) /* answered: the compaction drops them */
        EXPECT_INT(cm_gw_journal_done(j, ids[i], "answered"), CM_OK);
    g_st_calls = g_st_stalled = g_st_released = 0;
    gw_journal_io io = {.fsync = t_stall_fsync};
    cm_gw_journal_set_io(j, &io);
    stall_run cr = {j, 0, CM_OK, false};
    pthread_t tc;
    pthread_create(&tc, NULL, S_compact_forced, &cr);
    for (int call = 2; call <= 3; call++) {
        EXPECT(t_wait_for(t_stalled_at, &call));
        /* while that fsync stalls, the lock is free */
        stall_run mr = {j, ids[30 + call], CM_OK, false};
        pthread_t tm;
        pthread_create(&tm, NULL, S_meanwhile, &mr);
        bool free_lock = t_wait_for(t_finished, &mr);
        if (!free_lock)
            test_fail(__FILE__, __LINE__, "fsync %d ran under the journal's lock", call);
        pthread_mutex_lock(&g_st_mu);
        g_st_released = call;
        pthread_cond_broadcast(&g_st_cv);
        pthread_mutex_unlock(&g_st_mu);
        pthread_join(tm, NULL);
    }
    pthread_join(tc, NULL);
    EXPECT_INT(cr.rc, CM_OK);
    gw_journal_stats st;
    cm_gw_journal_stats(j, &st);
    EXPECT_INT(st.compactions, 1);
    cm_gw_journal_close(j);
    /* the unanswered ones, each once: 40 accepted, 30 + 2 answered */
    j = t_open(state, &pending, &seen);
    EXPECT_INT(json_array_size(pending), 8);
    char *got = t_pending_ids(pending);
    EXPECT_STR(got, "m30 m31 m34 m35 m36 m37 m38 m39");
    free(got);
    if (j) cm_gw_journal_close(j);
    json_decref(pending);
    json_decref(seen);
    free(state);
}

/* ---- an fdatasync that fails for a group --------------------------------------- */

/* The kernel reports a writeback error once per open file: after a group
 * commit's fdatasync failed, the next one on the same descriptor succeeds
 * even though the lines the failed one covered may not be on the disk. So
 * an accept whose line that fdatasync covered must fail too, not be
 * acknowledged by its own later fdatasync. */
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

typedef struct acc_run {
    gw_journal *j;
    const char *id;
    cm_rc rc;
} acc_run;

static void *S_accept_run(void *arg)
{
    acc_run *a = arg;
    uint64_t jid;
    a->rc = t_accept(a->j, a->id, "hello", &jid);
    return NULL;
}

TEST(gw_journal_failed_group_fdatasync_fails_every_line_it_covered)
{
    char *dir = tmp_dir();
    char *state = cm_strdup(path_in(dir, "state"));
    json_t *pending = NULL, *seen = NULL;
    gw_journal *j = t_open(state, &pending, &seen);
    json_decref(pending);
    json_decref(seen);
    if (!j) return;
    g_ds_calls = g_ds_open = 0;
    gw_journal_io io = {.datasync = t_datasync};
    cm_gw_journal_set_io(j, &io);
    acc_run a = {j, "a", -1}, b = {j, "b", -1}, c = {j, "c", -1};
    pthread_t ta, tb, tc;
    pthread_create(&ta, NULL, S_accept_run, &a);
    pthread_mutex_lock(&g_ds_mu);
    while (g_ds_calls < 1) /* a's fdatasync is under way */
        pthread_cond_wait(&g_ds_cv, &g_ds_mu);
    pthread_mutex_unlock(&g_ds_mu);
    gw_journal_stats st;
    cm_gw_journal_stats(j, &st);
    uint64_t one = st.bytes;
    pthread_create(&tb, NULL, S_accept_run, &b);
    pthread_create(&tc, NULL, S_accept_run, &c);
    for (int i = 0; i < 2000; i++) { /* b and c have written their lines and wait */
        cm_gw_journal_stats(j, &st);
        if (st.bytes >= 3 * one) break;
        usleep(1000);
    }
    EXPECT(st.bytes >= 3 * one);
    pthread_mutex_lock(&g_ds_mu);
    g_ds_open = 1;
    pthread_cond_broadcast(&g_ds_cv);
    pthread_mutex_unlock(&g_ds_mu);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_join(tc, NULL);
    cm_gw_journal_close(j);
    /* what was acknowledged is what a restart replays */
    j = t_open(state, &pending, &seen);
    char *got = t_pending_ids(pending);
    if (j) cm_gw_journal_close(j);
    json_decref(pending);
    json_decref(seen);
    free(state);
    char ids[64];
    snprintf(ids, sizeof ids, "%s", got);
    free(got);
    EXPECT_INT(a.rc, CM_OK);
    EXPECT_INT(b.rc, CM_EIO); /* one of them ran the failed fdatasync, */
    EXPECT_INT(c.rc, CM_EIO); /* which covered the other's line too */
    EXPECT_STR(ids, "a");
}
