/*
 * test_session_scale.c — sessions at scale: session.maintenance (config,
 * warn and enforce with an injected clock) and the in-process index of
 * sessions.json (parsed once, another process's write seen and merged,
 * deferred and copy-free writes). Transcripts and the context cache:
 * test_session_context.c.
 */
#include <dirent.h>
#include <math.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/config/config.h"
#include "../src/session/maintenance.h"
#include "../src/session/sessions.h"
#include "../src/session/store_index.h"
#include "test.h"

#define T0     1800000000000LL
#define DAY_MS (24LL * 3600 * 1000)

static char logged[65536];

static void collect(void *ctx, cm_log_level lv, const char *msg)
{
    (void)ctx;
    (void)lv;
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%s\n", msg);
}

static cm_rc parse_cfg(const char *text, cm_config *cfg, char *err, size_t errlen)
{
    cm_config_args a = {NULL, NULL, NULL, "/tmp/qc-state"};
    cm_logger lg = {collect, NULL};
    logged[0] = 0;
    return cm_config_parse(text, text ? strlen(text) : 0, "qc.json", &a, &lg, cfg, err, errlen);
}

TEST(session_maintenance_config_keys_and_defaults)
{
    cm_config c;
    char err[512];
    EXPECT_INT(parse_cfg(NULL, &c, err, sizeof err), CM_OK);
    cm_session_maint *m = &c.session_maint;
    EXPECT(!m->enforce);
    EXPECT_INT(m->prune_after_ms, 30 * DAY_MS);
    EXPECT_INT(m->max_entries, 500);
    EXPECT_INT(m->rotate_bytes, 10485760);
    EXPECT_INT(m->reset_retention_ms, 30 * DAY_MS); /* defaults to pruneAfter */
    EXPECT_INT(m->max_disk_bytes, -1);
    EXPECT_INT(m->high_water_bytes, -1);
    cm_config_release(&c);

    EXPECT_INT(parse_cfg("{session: {maintenance: {mode: 'enforce', pruneAfter: '7d', "
                         "maxEntries: 50, rotateBytes: '1mb', resetArchiveRetention: false, "
                         "maxDiskBytes: '500mb'}}}",
                         &c, err, sizeof err),
               CM_OK);
    EXPECT(m->enforce);
    EXPECT_INT(m->prune_after_ms, 7 * DAY_MS);
    EXPECT_INT(m->max_entries, 50);
    EXPECT_INT(m->rotate_bytes, 1048576);
    EXPECT_INT(m->reset_retention_ms, -1);
    EXPECT_INT(m->max_disk_bytes, 524288000);
    EXPECT_INT(m->high_water_bytes, 419430400); /* 80% */
    cm_config_release(&c);

    /* a bare number of pruneAfter is days; highWaterBytes at most maxDiskBytes */
    EXPECT_INT(parse_cfg("{session: {maintenance: {pruneAfter: 12, resetArchiveRetention: '36h', "
                         "maxDiskBytes: 1000, highWaterBytes: '2kb', pruneDays: 3}}}",
                         &c, err, sizeof err),
               CM_OK);
    EXPECT_INT(m->prune_after_ms, 12 * DAY_MS);
    EXPECT_INT(m->reset_retention_ms, 36 * 3600 * 1000LL);
    EXPECT_INT(m->high_water_bytes, 1000);
    cm_config_release(&c);
    EXPECT_INT(parse_cfg("{session: {maintenance: {pruneDays: 3}}}", &c, err, sizeof err), CM_OK);
    EXPECT_INT(m->prune_after_ms, 3 * DAY_MS);
    cm_config_release(&c);

    EXPECT_INT(parse_cfg("{session: {maintenance: {mode: 'off'}}}", &c, err, sizeof err),
               CM_ECONFIG);
    EXPECT_CONTAINS(err, "qc.json:1:");
    EXPECT_CONTAINS(err, "session.maintenance.mode");
    EXPECT_INT(parse_cfg("{session: {maintenance: {rotateBytes: '10 parsecs'}}}", &c, err,
                         sizeof err),
               CM_ECONFIG);
    EXPECT_CONTAINS(err, "session.maintenance.rotateBytes");
    EXPECT_INT(parse_cfg("{session: {maintenance: {maxEntries: 0}}}", &c, err, sizeof err),
               CM_ECONFIG);
    EXPECT_INT(parse_cfg("{session: {maintenance: {pruneAfter: 'soon'}}}", &c, err, sizeof err),
               CM_ECONFIG);
    EXPECT_INT(parse_cfg("{session: {maintenance: {maxEntriez: 5}}}", &c, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(logged, "session.maintenance.maxEntriez");
    cm_config_release(&c);
}

/* ---- the store -------------------------------------------------------------- */

static char *store_path(const char *state)
{
    buf p = BUF_INIT;
    cm_session_store_path(&p, state, "main");
    return cm_buf_detach(&p);
}

static void entry(json_t *store, const char *key, const char *id, int64_t updated)
{
    json_t *e = json_pack("{s:s}", "sessionId", id);
    if (updated) json_object_set_new(e, "updatedAt", json_integer(updated));
    json_object_set_new(store, key, e);
}

static void write_store(const char *path, json_t *store)
{
    char *text = json_dumps(store, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.other", path);
    FILE *f = fopen(tmp, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    rename(tmp, path); /* as QuantumClaw writes it: whole, then renamed */
    free(text);
}

static json_t *disk(const char *path)
{
    return json_load_file(path, 0, NULL);
}

static void configure(const char *path, bool enforce, int64_t max_entries, int64_t flush_ms)
{
    session_store_config c = {{0}, flush_ms, {collect, NULL}};
    cm_session_maint_defaults(&c.maint);
    c.maint.enforce = enforce;
    c.maint.max_entries = max_entries;
    char err[256];
    cm_session_store_configure(path, &c, err, sizeof err);
}

static bool exists(const char *dir, const char *name)
{
    return access(path_in(dir, name), F_OK) == 0;
}

TEST(session_maintenance_enforce_prunes_and_caps)
{
    char *state = tmp_dir(), *path = store_path(state), *dir = cm_fs_dirname(path);
    cm_fs_mkdirs(dir, NULL, 0);
    json_t *st = json_object();
    entry(st, "agent:main:a", "ida", T0 - 40 * DAY_MS); /* stale */
    entry(st, "agent:main:b", "idb", T0 - 1 * DAY_MS);
    entry(st, "agent:main:c", "idc", T0 - 2 * DAY_MS);
    entry(st, "agent:main:d", "idd", T0 - 3 * DAY_MS);
    entry(st, "agent:main:e", "ide", 0); /* no updatedAt: never stale, capped first */
    write_store(path, st);
    json_decref(st);
    write_file(dir, "ida.jsonl", "{}\n");
    write_file(dir, "ide.jsonl", "{}\n");
    write_file(dir, "old.jsonl.reset.2026-12-01T00-00-00.000Z", "{}\n"); /* > 30 days */
    write_file(dir, "new.jsonl.reset.2027-01-14T00-00-00.000Z", "{}\n"); /* 1 day */
    configure(path, true, 3, 0);
    session_store s;
    char err[256];
    EXPECT_INT(cm_session_store_read(&s, path, err, sizeof err), CM_OK);
    EXPECT_INT(cm_session_touch(&s, "agent:main:b", NULL, T0, NULL, err, sizeof err), CM_OK);
    json_t *d = disk(path);
    EXPECT_INT(json_object_size(d), 3);
    EXPECT(json_object_get(d, "agent:main:a") == NULL); /* pruned */
    EXPECT(json_object_get(d, "agent:main:e") == NULL); /* capped */
    EXPECT(json_object_get(d, "agent:main:b") && json_object_get(d, "agent:main:d"));
    json_decref(d);
    EXPECT(cm_session_store_get(&s, "agent:main:a") == NULL);
    char stamp[32], name[128];
    cm_session_archive_stamp(T0, stamp);
    snprintf(name, sizeof name, "ida.jsonl.deleted.%s", stamp);
    EXPECT(exists(dir, name));
    snprintf(name, sizeof name, "ide.jsonl.deleted.%s", stamp);
    EXPECT(exists(dir, name));
    EXPECT(!exists(dir, "old.jsonl.reset.2026-12-01T00-00-00.000Z"));
    EXPECT(exists(dir, "new.jsonl.reset.2027-01-14T00-00-00.000Z"));
    /* the text is what json_dumps (JSON.stringify(store, null, 2)) makes,
     * entries reused from the last write included */
    json_t *nested = json_pack("{s:{s:s,s:[i,{}]},s:s}", "deliveryContext", "channel", "tg", "x",
                               1, "label", "a \"q\"\nline");
    EXPECT_INT(cm_session_touch(&s, "agent:main:c", nested, T0, NULL, err, sizeof err), CM_OK);
    EXPECT_INT(cm_session_touch(&s, "agent:main:d", NULL, T0, NULL, err, sizeof err), CM_OK);
    json_decref(nested);
    buf text = BUF_INIT;
    EXPECT_INT(cm_fs_read_file(path, 1 << 20, &text, err, sizeof err), CM_OK);
    d = json_loads(text.data, 0, NULL);
    char *again = json_dumps(d, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    EXPECT_STR(text.data, again);
    free(again);
    json_decref(d);
    cm_buf_release(&text);
    store_ix_stats x;
    cm_store_ix_stats_get(s.ix, &x);
    EXPECT_INT(x.pruned, 1);
    EXPECT_INT(x.capped, 1);
    cm_session_store_release(&s);
    free(dir);
    free(path);
}

TEST(session_maintenance_warn_keeps_everything_and_warns)
{
    char *state = tmp_dir(), *path = store_path(state), *dir = cm_fs_dirname(path);
    cm_fs_mkdirs(dir, NULL, 0);
    json_t *st = json_object();
    entry(st, "agent:main:a", "ida", T0 - 40 * DAY_MS);
    entry(st, "agent:main:b", "idb", T0 - DAY_MS);
    entry(st, "agent:main:c", "idc", T0 + 3600000); /* newer than the injected now */
    entry(st, "agent:main:d", "idd", T0 + 7200000);
    write_store(path, st);
    json_decref(st);
    configure(path, false, 2, 0);
    session_store s;
    char err[256];
    EXPECT_INT(cm_session_store_read(&s, path, err, sizeof err), CM_OK);
    logged[0] = 0;
    /* b, written at T0, is not among the 2 most recent: it would be capped */
    EXPECT_INT(cm_session_touch(&s, "agent:main:b", NULL, T0, NULL, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(logged, "would evict active session");
    EXPECT_CONTAINS(logged, "agent:main:b");
    json_t *d = disk(path);
    EXPECT_INT(json_object_size(d), 4); /* warn removes nothing */
    json_decref(d);
    /* a touch of the newest says nothing */
    logged[0] = 0;
    EXPECT_INT(cm_session_touch(&s, "agent:main:d", NULL, T0, NULL, err, sizeof err), CM_OK);
    EXPECT_STR(logged, "");
    /* the same store in enforce mode at a later time prunes a and caps b */
    configure(path, true, 2, 0);
    EXPECT_INT(cm_session_touch(&s, "agent:main:c", NULL, T0 + DAY_MS, NULL, err, sizeof err),
               CM_OK);
    d = disk(path);
    EXPECT_INT(json_object_size(d), 2);
    EXPECT(json_object_get(d, "agent:main:c") && json_object_get(d, "agent:main:d"));
    json_decref(d);
    cm_session_store_release(&s);
    free(dir);
    free(path);
}

/* The reference for the warning: the store's keys sorted newest first by
 * a stable sort (ties, and entries without updatedAt, in the store's order). */
typedef struct ref_key {
    const char *key;
    double at;
    size_t pos;
} ref_key;

static int ref_newest_first(const void *a, const void *b)
{
    const ref_key *x = a, *y = b;
    if (x->at != y->at) return x->at < y->at ? 1 : -1;
    return x->pos < y->pos ? -1 : 1;
}

/* Which active sessions the warning names as beyond maxEntries: exactly
 * those a stable sort of the store puts at maxEntries or later, with many
 * equal times and entries without one, for every maxEntries. */
TEST(session_maintenance_warn_names_the_capped_as_a_sort_does)
{
    json_t *st = json_object(), *active = json_object();
    ref_key k[240];
    unsigned r = 7;
    for (size_t i = 0; i < 240; i++) {
        char key[32], id[32];
        snprintf(key, sizeof key, "agent:main:k%zu", i);
        snprintf(id, sizeof id, "id%zu", i);
        r = r * 1103515245u + 12345u;
        int64_t at = (r >> 16) % 9 == 0 ? 0 : T0 + (int64_t)((r >> 16) % 12) * 1000;
        entry(st, key, id, at);
        if (i % 3 == 0) json_object_set_new(active, key, json_true());
    }
    size_t i = 0;
    const char *key;
    json_t *e;
    json_object_foreach(st, key, e)
    {
        json_t *u = json_object_get(e, "updatedAt");
        k[i] = (ref_key){key, u ? (double)json_integer_value(u) : -INFINITY, i};
        i++;
    }
    qsort(k, 240, sizeof *k, ref_newest_first);
    static const int64_t maxes[] = {1, 2, 17, 20, 100, 150, 219, 239};
    for (size_t m = 0; m < sizeof maxes / sizeof *maxes; m++) {
        cm_session_maint mt;
        cm_session_maint_defaults(&mt);
        mt.enforce = false;
        mt.max_entries = maxes[m];
        mt.prune_after_ms = 1000LL * DAY_MS;
        cm_logger lg = {collect, NULL};
        maint_result res;
        logged[0] = 0;
        EXPECT_INT(cm_session_maint_entries(st, &mt, T0, active, &lg, &res), CM_OK);
        cm_session_maint_result_release(&res);
        for (size_t j = 0; j < 240; j++) {
            if (!json_object_get(active, k[j].key)) continue;
            char line[96];
            snprintf(line, sizeof line, "(%s: beyond maxEntries;", k[j].key);
            bool named = strstr(logged, line) != NULL;
            if (named != (j >= (size_t)maxes[m]))
                fprintf(stderr, "  maxEntries %lld: %s at %zu named %d\n", (long long)maxes[m],
                        k[j].key, j, named);
            EXPECT(named == (j >= (size_t)maxes[m]));
        }
    }
    json_decref(st);
    json_decref(active);
}

TEST(session_store_parses_once_and_sees_another_process)
{
    char *state = tmp_dir(), *path = store_path(state), *dir = cm_fs_dirname(path);
    cm_fs_mkdirs(dir, NULL, 0);
    json_t *st = json_object();
    entry(st, "agent:main:k1", "id1", T0);
    json_object_set_new(json_object_get(st, "agent:main:k1"), "label", json_string("one"));
    write_store(path, st);
    session_store s;
    char err[256];
    for (int i = 0; i < 4; i++) { /* unchanged: parsed once */
        EXPECT_INT(cm_session_store_read(&s, path, err, sizeof err), CM_OK);
        EXPECT_STR(json_string_value(
                       json_object_get(cm_session_store_get(&s, "agent:main:k1"), "label")),
                   "one");
        store_ix_stats x;
        cm_store_ix_stats_get(s.ix, &x);
        EXPECT_INT(x.loads, 1);
        cm_session_store_release(&s);
    }
    /* another process replaces the file */
    pid_t pid = fork();
    if (pid == 0) {
        json_object_set_new(json_object_get(st, "agent:main:k1"), "label", json_string("two"));
        entry(st, "agent:main:k2", "id2", T0);
        write_store(path, st);
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    EXPECT_INT(cm_session_store_read(&s, path, err, sizeof err), CM_OK);
    EXPECT_STR(json_string_value(json_object_get(cm_session_store_get(&s, "agent:main:k1"), "label")),
               "two");
    EXPECT(cm_session_store_get(&s, "agent:main:k2") != NULL);

    /* a deferred change is seen here at once, written later, merged with the
     * other process's write field by field */
    configure(path, false, 500, 60000);
    json_t *patch = json_pack("{s:i}", "totalTokens", 7);
    EXPECT_INT(cm_session_note(&s, "agent:main:k1", patch, T0 + 5, NULL, err, sizeof err), CM_OK);
    json_decref(patch);
    EXPECT_INT(json_integer_value(
                   json_object_get(cm_session_store_get(&s, "agent:main:k1"), "totalTokens")),
               7);
    json_t *d = disk(path);
    EXPECT(json_object_get(json_object_get(d, "agent:main:k1"), "totalTokens") == NULL);
    json_decref(d);
    pid = fork();
    if (pid == 0) {
        json_object_set_new(json_object_get(st, "agent:main:k1"), "label", json_string("three"));
        entry(st, "agent:main:k3", "id3", T0);
        write_store(path, st);
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    EXPECT_INT(cm_session_store_sync(path, err, sizeof err), CM_OK);
    d = disk(path);
    json_t *k1 = json_object_get(d, "agent:main:k1");
    EXPECT_STR(json_string_value(json_object_get(k1, "label")), "three");
    EXPECT_INT(json_integer_value(json_object_get(k1, "totalTokens")), 7);
    EXPECT_INT(json_integer_value(json_object_get(k1, "updatedAt")), T0 + 5);
    EXPECT(json_object_get(d, "agent:main:k3") != NULL);
    EXPECT(json_object_get(d, "agent:main:k2") == NULL); /* removed there, untouched here */
    json_decref(d);
    configure(path, false, 500, 0);
    cm_session_store_release(&s);
    json_decref(st);
    free(dir);
    free(path);
}

/* The journal files of the store at path left in its directory. */
static int wal_files(const char *dir, char *name, size_t n)
{
    int count = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, ".clawmem-wal.")) {
            count++;
            if (name) snprintf(name, n, "%s/%s", dir, de->d_name);
        }
    if (d) closedir(d);
    return count;
}

/* A compaction's bookkeeping (compactionCount, the fresh token count) is
 * seen at once and written by the writer, as a turn's usage is: not a whole
 * rewrite of the store per compaction. */
TEST(session_store_compaction_bookkeeping_is_deferred)
{
    char *state = tmp_dir(), *path = store_path(state), *dir = cm_fs_dirname(path);
    cm_fs_mkdirs(dir, NULL, 0);
    json_t *st = json_object();
    entry(st, "agent:main:k1", "id1", T0);
    write_store(path, st);
    configure(path, false, 500, 60000);
    session_store s;
    char err[256];
    EXPECT_INT(cm_session_store_read(&s, path, err, sizeof err), CM_OK);
    struct stat before, after;
    EXPECT_INT(stat(path, &before), 0);
    EXPECT_INT(cm_session_compacted(&s, "agent:main:k1", 321, T0 + 5, err, sizeof err), CM_OK);
    json_t *e = cm_session_store_get(&s, "agent:main:k1");
    EXPECT_INT(json_integer_value(json_object_get(e, "compactionCount")), 1);
    EXPECT_INT(json_integer_value(json_object_get(e, "totalTokens")), 321);
    EXPECT_INT(stat(path, &after), 0);
    EXPECT(after.st_ino == before.st_ino && after.st_size == before.st_size &&
           after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
           after.st_mtim.tv_nsec == before.st_mtim.tv_nsec); /* not rewritten */
    EXPECT_INT(wal_files(dir, NULL, 0), 1);                  /* journaled */
    EXPECT_INT(cm_session_store_sync(path, err, sizeof err), CM_OK);
    json_t *d = disk(path);
    EXPECT_INT(json_integer_value(json_object_get(json_object_get(d, "agent:main:k1"),
                                                  "compactionCount")),
               1);
    json_decref(d);
    /* a session that is not there is still an error, and nothing is made */
    EXPECT_INT(cm_session_compacted(&s, "agent:main:none", 5, T0 + 6, err, sizeof err),
               CM_ENOTFOUND);
    EXPECT(cm_session_store_get(&s, "agent:main:none") == NULL);
    configure(path, false, 500, 0);
    cm_session_store_release(&s);
    json_decref(st);
    free(dir);
    free(path);
}


/* Deferred bookkeeping is coalesced, not lost: a process killed (SIGKILL)
 * right after its turns' notes returned leaves them in the journal only;
 * the next process to open the store replays them (a torn last line
 * skipped) and writes them, and the journal goes. */
TEST(session_store_deferred_changes_survive_kill_9)
{
    char *state = tmp_dir(), *path = store_path(state), *dir = cm_fs_dirname(path);
    cm_fs_mkdirs(dir, NULL, 0);
    json_t *st = json_object();
    entry(st, "agent:main:k1", "id1", T0);
    entry(st, "agent:main:k2", "id2", T0);
    write_store(path, st);
    json_decref(st);
    pid_t pid = fork();
    if (pid == 0) { /* the gateway: turns, then kill -9 before any write */
        session_store s;
        char err[256];
        configure(path, false, 500, 600000);
        if (cm_session_store_read(&s, path, err, sizeof err) ||
            cm_session_note(&s, "agent:main:new", NULL, T0 + 1, NULL, err, sizeof err))
            _exit(2);
        for (int turn = 1; turn <= 3; turn++) {
            json_t *patch = json_pack("{s:i,s:s}", "totalTokens", 100 * turn, "model", "m");
            if (cm_session_note(&s, "agent:main:k1", patch, T0 + turn, NULL, err, sizeof err))
                _exit(3);
            json_decref(patch);
        }
        json_t *gone = json_pack("{s:n}", "label");
        if (cm_session_note(&s, "agent:main:k2", gone, T0 + 9, NULL, err, sizeof err)) _exit(4);
        json_decref(gone);
        kill(getpid(), SIGKILL);
        _exit(5);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    /* coalesced: nothing of it in sessions.json yet */
    json_t *d = disk(path);
    EXPECT(json_object_get(json_object_get(d, "agent:main:k1"), "totalTokens") == NULL);
    json_decref(d);
    char wal[1024] = "";
    if (wal_files(dir, wal, sizeof wal) == 1) { /* a torn record after the last one */
        int fd = open(wal, O_WRONLY | O_APPEND);
        EXPECT(fd >= 0 &&
               write(fd, "{\"s\":99,\"k\":\"agent:main:k1\",\"p\":{\"totalTo", 40) == 40);
        if (fd >= 0) close(fd);
    }

    /* the restart: every acknowledged change is there */
    session_store s;
    char err[256];
    EXPECT_INT(cm_session_store_read(&s, path, err, sizeof err), CM_OK);
    json_t *k1 = cm_session_store_get(&s, "agent:main:k1");
    EXPECT_INT(json_integer_value(json_object_get(k1, "totalTokens")), 300);
    EXPECT_INT(json_integer_value(json_object_get(k1, "updatedAt")), T0 + 3);
    EXPECT(cm_session_store_get(&s, "agent:main:new") != NULL);
    EXPECT(json_object_get(cm_session_store_get(&s, "agent:main:k2"), "label") == NULL);
    EXPECT_INT(cm_session_store_sync(path, err, sizeof err), CM_OK);
    d = disk(path);
    EXPECT_INT(json_integer_value(json_object_get(json_object_get(d, "agent:main:k1"), "totalTokens")),
               300);
    EXPECT(json_is_string(json_object_get(json_object_get(d, "agent:main:new"), "sessionId")));
    EXPECT(json_object_get(json_object_get(d, "agent:main:k2"), "sessionId") != NULL);
    json_decref(d);
    EXPECT_INT(wal_files(dir, NULL, 0), 0);
    cm_session_store_release(&s);
    free(dir);
    free(path);
}

/* The first write after the store is read formats only what changed: the
 * unchanged entries' text is copied from the file as read (it was the
 * whole store's, formatted, before) and the result is still byte for byte
 * the store as JSON.stringify(store, null, 2) writes it. A file of another
 * layout (compact) is formatted whole, as before. */
TEST(session_store_first_write_formats_only_changes)
{
    for (int compact = 0; compact < 2; compact++) {
        char *state = tmp_dir(), *path = store_path(state), *dir = cm_fs_dirname(path);
        cm_fs_mkdirs(dir, NULL, 0);
        json_t *st = json_object();
        for (int i = 0; i < 400; i++) {
            char key[64], id[32];
            snprintf(key, sizeof key, "agent:main:peer\"%d\\x", i);
            snprintf(id, sizeof id, "id%d", i);
            entry(st, key, id, T0 + i);
            json_object_set_new(json_object_get(st, key), "origin",
                                json_pack("{s:s,s:[i,s]}", "label", "a, {b} [c]\n\"d\"", "to", i,
                                          "}]"));
        }
        for (int i = 0; i < 50; i++) { /* keys without escapes too */
            char key[64];
            snprintf(key, sizeof key, "agent:main:plain%d", i);
            entry(st, key, "plain", T0 + i);
        }
        if (compact) {
            char *text = json_dumps(st, JSON_COMPACT | JSON_PRESERVE_ORDER);
            write_file(dir, "sessions.json", text);
            free(text);
        } else {
            write_store(path, st);
        }
        session_store s;
        char err[256];
        EXPECT_INT(cm_session_store_read(&s, path, err, sizeof err), CM_OK);
        store_ix_stats x0, x1;
        cm_store_ix_stats_get(s.ix, &x0);
        json_t *patch = json_pack("{s:s}", "label", "changed");
        EXPECT_INT(cm_session_note(&s, "agent:main:peer\"7\\x", patch, T0 + 1000, NULL, err,
                                   sizeof err),
                   CM_OK);
        json_decref(patch);
        cm_store_ix_stats_get(s.ix, &x1);
        EXPECT_INT(x1.writes - x0.writes, 1);
        EXPECT_INT(x1.formatted - x0.formatted, compact ? 450 : 1);
        buf b = BUF_INIT;
        EXPECT_INT(cm_fs_read_file(path, 1 << 24, &b, err, sizeof err), CM_OK);
        json_t *d = json_loadb(b.data ? b.data : "", b.len, 0, NULL);
        char *canon = d ? json_dumps(d, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        EXPECT(canon && b.data && !strcmp(canon, b.data)); /* the canonical layout */
        EXPECT_INT(json_object_size(d), 450);
        EXPECT(json_equal(json_object_get(d, "agent:main:plain9"),
                          json_object_get(st, "agent:main:plain9")));
        json_t *e7 = json_object_get(d, "agent:main:peer\"7\\x");
        EXPECT_STR(json_string_value(json_object_get(e7, "label")), "changed");
        EXPECT(json_equal(json_object_get(d, "agent:main:peer\"8\\x"),
                          json_object_get(st, "agent:main:peer\"8\\x")));
        free(canon);
        json_decref(d);
        cm_buf_release(&b);
        cm_session_store_release(&s);
        json_decref(st);
        free(dir);
        free(path);
    }
}

/* The writer's copy of the store is made where the file is read, outside
 * the index's mutex: also when the read came before deferred writes were
 * configured (the gateway's dispatch reads the store before the agent that
 * configures them opens) and when a file another process wrote is read
 * back with unwritten changes merged over it. So no write copies the whole
 * store under the mutex every turn takes (at 100,000 entries 100-270 ms of
 * turns stalled; the old code did it at the first write after such a
 * read), and what is written is still ours over theirs. */
TEST(session_store_write_copies_nothing_under_the_mutex)
{
    char *state = tmp_dir(), *path = store_path(state), *dir = cm_fs_dirname(path);
    cm_fs_mkdirs(dir, NULL, 0);
    json_t *st = json_object();
    for (int i = 0; i < 300; i++) {
        char key[64], id[32];
        snprintf(key, sizeof key, "agent:main:k%d", i);
        snprintf(id, sizeof id, "id%d", i);
        entry(st, key, id, T0 + i);
    }
    write_store(path, st);
    session_store s;
    char err[256];
    EXPECT_INT(cm_session_store_read(&s, path, err, sizeof err), CM_OK); /* not configured yet */
    configure(path, false, 100000, 600000);                               /* deferred writes */
    json_t *patch = json_pack("{s:s}", "label", "ours");
    EXPECT_INT(cm_session_note(&s, "agent:main:k1", patch, T0 + 1000, NULL, err, sizeof err),
               CM_OK);
    EXPECT_INT(cm_session_store_sync(path, err, sizeof err), CM_OK);
    store_ix_stats x;
    cm_store_ix_stats_get(s.ix, &x);
    EXPECT_INT(x.writes, 1);
    EXPECT_INT(x.locked_copies, 0);
    /* unwritten changes, then another process writes the file */
    EXPECT_INT(cm_session_note(&s, "agent:main:k2", patch, T0 + 1001, NULL, err, sizeof err),
               CM_OK);
    EXPECT_INT(cm_session_note(&s, "agent:main:new", NULL, T0 + 1002, NULL, err, sizeof err),
               CM_OK);
    /* it read the file after our first write */
    json_object_set_new(json_object_get(st, "agent:main:k1"), "label", json_string("ours"));
    json_object_set_new(json_object_get(st, "agent:main:k2"), "model", json_string("theirs"));
    json_object_set_new(json_object_get(st, "agent:main:k3"), "model", json_string("theirs"));
    json_object_del(st, "agent:main:k4");
    entry(st, "agent:main:other", "other", T0 + 5);
    write_store(path, st);
    session_store s2;
    EXPECT_INT(cm_session_store_read(&s2, path, err, sizeof err), CM_OK); /* re-read, merged */
    EXPECT_INT(cm_session_note(&s2, "agent:main:k5", patch, T0 + 1003, NULL, err, sizeof err),
               CM_OK);
    EXPECT_INT(cm_session_store_sync(path, err, sizeof err), CM_OK);
    cm_store_ix_stats_get(s.ix, &x);
    EXPECT_INT(x.writes, 2);
    EXPECT_INT(x.locked_copies, 0);
    json_t *d = disk(path);
    EXPECT_INT(json_object_size(d), 301); /* 300 - k4 + other + new */
    EXPECT_STR(json_string_value(json_object_get(json_object_get(d, "agent:main:k1"), "label")),
               "ours");
    json_t *k2 = json_object_get(d, "agent:main:k2");
    EXPECT_STR(json_string_value(json_object_get(k2, "label")), "ours");
    EXPECT_STR(json_string_value(json_object_get(k2, "model")), "theirs");
    EXPECT_STR(json_string_value(json_object_get(json_object_get(d, "agent:main:k3"), "model")),
               "theirs");
    EXPECT_STR(json_string_value(json_object_get(json_object_get(d, "agent:main:k5"), "label")),
               "ours");
    EXPECT(json_object_get(d, "agent:main:k4") == NULL);
    EXPECT(json_is_string(json_object_get(json_object_get(d, "agent:main:new"), "sessionId")));
    EXPECT(json_object_get(d, "agent:main:other") != NULL);
    /* and exactly what the index holds */
    json_t *snap = cm_session_store_snapshot(&s2);
    EXPECT(json_equal(snap, d));
    json_decref(snap);
    json_decref(d);
    json_decref(patch);
    cm_session_store_release(&s);
    cm_session_store_release(&s2);
    json_decref(st);
    free(dir);
    free(path);
}

/* How long the writer waits between two writes: 99 times the last write's
 * length (a 53 MB store written in 300 ms: every 29.7 s, at most 1% of the
 * time rewriting it, the journal holding the changes meanwhile), 9 times
 * it once the journal holds an eighth of the store's size (its replay and
 * its disk use bounded by the store's), at most 30 s. The old writer
 * waited 9 times the length whatever the journal held (every 2.7 s). */
TEST(session_store_write_gap_bounded_by_the_journal)
{
    const int64_t mb = 1 << 20, store = 53 * mb;
    EXPECT_INT(cm_store_ix_gap_ms(300, (uint64_t)mb, store), 29700);
    EXPECT_INT(cm_store_ix_gap_ms(300, (uint64_t)(store / 8) - 1, store), 29700);
    EXPECT_INT(cm_store_ix_gap_ms(300, (uint64_t)(store / 8), store), 2700);
    EXPECT_INT(cm_store_ix_gap_ms(2, 100, 0), 18); /* no file yet */
    EXPECT_INT(cm_store_ix_gap_ms(2, 100, 500000), 198);
    EXPECT_INT(cm_store_ix_gap_ms(1000, 0, store), 30000);
    EXPECT_INT(cm_store_ix_gap_ms(5000, (uint64_t)store, store), 30000);
    EXPECT_INT(cm_store_ix_gap_ms(0, 0, store), 0);
}
