/*
 * journal.c — the durable journal of accepted inbound messages (journal.h):
 * replay (torn lines skipped) and rewrite at open, fsynced appends of
 * accepted messages under the accept limits, run and done marks appended
 * whole lines at a time, a failed append cut back, and compaction while
 * running (read, rewritten and fsynced outside the journal's lock, swapped in
 * under it: no fsync runs under the lock).
 */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <unistd.h>

#include "../../base/fs.h"
#include "dedupe.h"

/* Lines appended during a compaction are copied over without the lock
 * until at most this much is left, then under it. */
#define GW_JOURNAL_TAIL_LOCKED (64u << 10)
/* Dedupe keys kept by a rewrite (the dedupe cache holds no more). */
#define GW_JOURNAL_SEEN_MAX GW_DEDUPE_MAX

struct gw_journal {
    pthread_mutex_t mu;
    pthread_cond_t synced_cv; /* a group fdatasync or a compaction's swap ended */
    uint64_t written, synced; /* accepted lines written / covered by an fdatasync */
    /* the lines up to here were covered by an fdatasync that failed: a
     * later one on the same file does not report that error again (the
     * kernel reports a writeback error once per open file), so it cannot
     * vouch for them */
    uint64_t sync_failed;
    int sync_errno;
    bool syncing, compacting;
    bool broken; /* a failed append left bytes past `bytes` that could not be cut */
    int fd, lockfd;
    char *path;
    uint64_t next_id;
    size_t backlog;
    uint64_t bytes; /* the file's length: whole lines only */
    uint64_t live;  /* bytes of the "in" lines of entries not done */
    json_t *lens;   /* entry id → the length of its "in" line, entries not done */
    uint64_t pending_max, file_max, compact_min;
    uint64_t compact_after; /* no compaction before bytes reach this (one failed) */
    int64_t keep_ms;
    size_t torn;
    bool unrewritten; /* the rewrite at open failed: the file was kept as it was */
    uint64_t compactions;
    gw_journal_io io;
};

static json_t *S_msg_json(const gw_msg *m)
{
    json_t *o = json_object();
    if (!o) return NULL;
    const char *k[] = {"channel",   "account", "peer",       "session",        "thread",
                       "messageId", "sender",  "senderName", "senderUsername", "chatTitle",
                       "text"};
    const char *v[] = {m->channel,    m->account, m->peer,        m->session,
                       m->thread,     m->message_id, m->sender,   m->sender_name,
                       m->sender_username, m->chat_title, m->text};
    bool ok = true;
    for (size_t i = 0; i < ARRAY_LEN(k); i++)
        if (v[i]) ok = ok && !json_object_set_new(o, k[i], json_string(v[i]));
    ok = ok && !json_object_set_new(o, "group", json_boolean(m->is_group)) &&
         !json_object_set_new(o, "media", json_boolean(m->has_media)) &&
         !json_object_set_new(o, "mentioned", json_boolean(m->mentioned));
    if (m->ts_ms > 0) ok = ok && !json_object_set_new(o, "timestamp", json_integer(m->ts_ms));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

void cm_gw_journal_msg(const json_t *msg, gw_msg *m)
{
    memset(m, 0, sizeof *m);
    m->channel = json_string_value(json_object_get(msg, "channel"));
    m->account = json_string_value(json_object_get(msg, "account"));
    m->peer = json_string_value(json_object_get(msg, "peer"));
    m->session = json_string_value(json_object_get(msg, "session"));
    m->thread = json_string_value(json_object_get(msg, "thread"));
    m->message_id = json_string_value(json_object_get(msg, "messageId"));
    m->sender = json_string_value(json_object_get(msg, "sender"));
    m->sender_name = json_string_value(json_object_get(msg, "senderName"));
    m->sender_username = json_string_value(json_object_get(msg, "senderUsername"));
    m->chat_title = json_string_value(json_object_get(msg, "chatTitle"));
    json_t *ts = json_object_get(msg, "timestamp");
    if (json_is_integer(ts) && json_integer_value(ts) > 0 &&
        json_integer_value(ts) < 253402300800000LL) /* before the year 10000 */
        m->ts_ms = (int64_t)json_integer_value(ts);
    m->text = json_string_value(json_object_get(msg, "text"));
    m->is_group = json_is_true(json_object_get(msg, "group"));
    m->has_media = json_is_true(json_object_get(msg, "media"));
    m->mentioned = json_is_true(json_object_get(msg, "mentioned"));
}

static ssize_t S_sys_write(int fd, const void *p, size_t n)
{
    return write(fd, p, n);
}

static int S_sys_truncate(int fd, off_t len)
{
    return ftruncate(fd, len);
}

/* Writes all of s[0..n) to fd through write_fn. */
static cm_rc S_write_all(ssize_t (*write_fn)(int, const void *, size_t), int fd, const char *s,
                         size_t n)
{
    while (n) {
        ssize_t w = write_fn(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = ENOSPC;
            return CM_EIO;
        }
        s += w;
        n -= (size_t)w;
    }
    return CM_OK;
}

/* o (taken) as one compact JSON line ending in '\n', malloc'd; *n its length. */
static char *S_line(json_t *o, size_t *n)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s) return NULL;
    size_t k = strlen(s);
    s[k] = '\n'; /* json_dumps leaves room: replace the NUL, write k + 1 */
    *n = k + 1;
    return s;
}

/* Appends one whole line (under mu). A failed write is cut back so that the
 * file ends at its last whole line; when that fails too the journal is
 * broken, and each later append first tries the cut again. errno is kept. */
static cm_rc S_write_line(gw_journal *j, const char *s, size_t n)
{
    if (j->broken) {
        if (j->io.truncate(j->fd, (off_t)j->bytes)) return CM_EIO;
        j->broken = false;
    }
    cm_rc rc = S_write_all(j->io.write, j->fd, s, n);
    if (rc) {
        int e = errno;
        if (j->io.truncate(j->fd, (off_t)j->bytes)) j->broken = true;
        errno = e;
        return rc;
    }
    j->bytes += n;
    return CM_OK;
}

/* Appends o (taken), not synced (under mu). */
static cm_rc S_append(gw_journal *j, json_t *o)
{
    size_t n = 0;
    char *s = S_line(o, &n);
    if (!s) return CM_ENOMEM;
    cm_rc rc = S_write_line(j, s, n);
    free(s);
    return rc;
}

/* Group commit (under mu, released while syncing): one fdatasync covers
 * every line written before it, so concurrent accepts share it; when it
 * fails, every line it covered fails (a later fdatasync succeeding says
 * nothing about them). */
static cm_rc S_sync(gw_journal *j)
{
    uint64_t mine = ++j->written;
    while (j->synced < mine) {
        if (mine <= j->sync_failed) {
            errno = j->sync_errno;
            return CM_EIO;
        }
        if (j->syncing) {
            pthread_cond_wait(&j->synced_cv, &j->mu);
            continue;
        }
        j->syncing = true;
        uint64_t upto = j->written;
        int fd = j->fd; /* a compaction swaps fd only while nobody syncs */
        pthread_mutex_unlock(&j->mu);
        int r = j->io.datasync(fd);
        int e = errno;
        pthread_mutex_lock(&j->mu);
        j->syncing = false;
        if (!r && upto > j->synced) j->synced = upto;
        if (r && upto > j->sync_failed) {
            j->sync_failed = upto;
            j->sync_errno = e;
        }
        pthread_cond_broadcast(&j->synced_cv);
        if (r) {
            errno = e;
            return CM_EIO;
        }
    }
    return CM_OK;
}

/* The last start of a journal line ({"j":) after the first byte of
 * p[0..n), or NULL: where a whole line glued to a torn one begins. */
static const char *S_glued(const char *p, size_t n)
{
    static const char mark[] = "{\"j\":";
    const char *last = NULL;
    for (size_t i = 1; i + sizeof mark - 1 <= n; i++)
        if (p[i] == '{' && !memcmp(p + i, mark, sizeof mark - 1)) last = p + i;
    return last;
}

/* Replays buf's lines into pending (by id) and seen; *torn counts the
 * lines that did not parse (a torn last line included). */
static cm_rc S_replay(const buf *b, int64_t now_ms, int64_t keep_ms, json_t *pending, json_t *seen,
                      uint64_t *max_id, size_t *torn)
{
    json_t *by_id = json_object(); /* id → entry */
    if (!by_id) return CM_ENOMEM;
    const char *p = b->data ? b->data : "", *end = p + b->len;
    char idk[32];
    buf k = BUF_INIT;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) { /* a torn last line: its accept never returned */
            (*torn)++;
            break;
        }
        size_t len = (size_t)(nl - p);
        json_t *o = len ? json_loadb(p, len, 0, NULL) : NULL;
        if (len && !o) {
            /* cut short by a failed write (an older version did not cut it
             * back): a whole line appended after it is still read */
            (*torn)++;
            const char *g = S_glued(p, len);
            if (g) o = json_loadb(g, (size_t)(nl - g), 0, NULL);
        }
        p = nl + 1;
        const char *t = json_string_value(json_object_get(o, "j"));
        json_int_t id = json_integer_value(json_object_get(o, "id"));
        snprintf(idk, sizeof idk, "%lld", (long long)id);
        if (id > 0 && (uint64_t)id > *max_id) *max_id = (uint64_t)id;
        if (t && !strcmp(t, "in") && id > 0) {
            json_object_set_new(o, "runs",
                                json_integer(json_integer_value(json_object_get(o, "runs"))));
            json_object_set(by_id, idk, o);
        } else if (t && !strcmp(t, "run")) {
            json_t *e = json_object_get(by_id, idk);
            if (e)
                json_object_set_new(
                    e, "runs", json_integer(json_integer_value(json_object_get(e, "runs")) + 1));
        } else if (t && !strcmp(t, "done")) {
            json_t *e = json_object_get(by_id, idk);
            json_int_t ts = json_integer_value(json_object_get(e, "ts"));
            gw_msg m;
            cm_gw_journal_msg(json_object_get(e, "msg"), &m);
            if (e && ts > now_ms - keep_ms && cm_gw_dedupe_key(&m, &k))
                json_array_append_new(seen, json_pack("{s:s,s:I}", "key", k.data, "ts", ts));
            json_object_del(by_id, idk);
        } else if (t && !strcmp(t, "seen") &&
                   json_integer_value(json_object_get(o, "ts")) > now_ms - keep_ms) {
            const char *key = json_string_value(json_object_get(o, "key"));
            json_int_t ts = json_integer_value(json_object_get(o, "ts"));
            /* without "kv":2 the key is in the old '|'-joined form */
            cm_buf_reset(&k);
            if (key && (json_integer_value(json_object_get(o, "kv")) == 2
                            ? !cm_buf_adds(&k, key)
                            : !cm_buf_printf(&k, "%s%s", GW_DEDUPE_LEGACY_PREFIX, key)))
                json_array_append_new(seen, json_pack("{s:s,s:I}", "key", k.data, "ts", ts));
        }
        json_decref(o);
    }
    cm_buf_release(&k);
    /* sort the pending entries by id */
    const char *key;
    json_t *e;
    json_object_foreach(by_id, key, e)
    {
        json_int_t id = json_integer_value(json_object_get(e, "id"));
        size_t at = json_array_size(pending);
        while (at &&
               json_integer_value(json_object_get(json_array_get(pending, at - 1), "id")) > id)
            at--;
        json_array_insert(pending, at, e);
    }
    json_decref(by_id);
    return CM_OK;
}

/* The journal holding pending (with their run marks) and the newest of
 * seen (at most GW_JOURNAL_SEEN_MAX, about seen_budget bytes), into out;
 * lens (may be NULL) receives each pending entry's "in" line length by id. */
static cm_rc S_serialize(const json_t *pending, const json_t *seen, uint64_t seen_budget, buf *out,
                         json_t *lens)
{
    cm_rc rc = CM_OK;
    size_t i;
    json_t *e;
    char idk[32];
    json_array_foreach(pending, i, e)
    {
        json_t *c = json_deep_copy(e);
        json_int_t runs = json_integer_value(json_object_get(c, "runs"));
        json_int_t id = json_integer_value(json_object_get(e, "id"));
        json_object_del(c, "runs");
        size_t n = 0;
        char *s = S_line(c, &n);
        if (!s) return CM_ENOMEM;
        rc = cm_buf_add(out, s, n);
        free(s);
        snprintf(idk, sizeof idk, "%lld", (long long)id);
        if (!rc && lens && json_object_set_new(lens, idk, json_integer((json_int_t)n)))
            rc = CM_ENOMEM;
        for (json_int_t r = 0; !rc && r < runs; r++)
            rc = cm_buf_printf(out, "{\"j\":\"run\",\"id\":%lld}\n", (long long)id);
        if (rc) return rc;
    }
    /* the newest keys that fit (a seen line is its key and ~40 bytes) */
    size_t from = json_array_size(seen);
    uint64_t used = 0;
    while (from > 0 && json_array_size(seen) - from < GW_JOURNAL_SEEN_MAX) {
        const char *k = json_string_value(json_object_get(json_array_get(seen, from - 1), "key"));
        uint64_t n = (k ? strlen(k) : 0) + 48;
        if (used + n > seen_budget) break;
        used += n;
        from--;
    }
    json_array_foreach(seen, i, e)
    {
        if (i < from) continue;
        json_t *c = json_pack("{s:s,s:s,s:I,s:i}", "j", "seen", "key",
                              json_string_value(json_object_get(e, "key")), "ts",
                              json_integer_value(json_object_get(e, "ts")), "kv", 2);
        size_t n = 0;
        char *s = c ? S_line(c, &n) : NULL;
        if (!s) return CM_ENOMEM;
        rc = cm_buf_add(out, s, n);
        free(s);
        if (rc) return rc;
    }
    return CM_OK;
}

/* Reads [off, end) of fd into out (appending). */
static cm_rc S_pread_all(int fd, uint64_t off, uint64_t end, buf *out)
{
    char tmp[65536];
    while (off < end) {
        size_t want = end - off < sizeof tmp ? (size_t)(end - off) : sizeof tmp;
        ssize_t r = pread(fd, tmp, want, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO; /* shorter than the lines written */
            return CM_EIO;
        }
        if (cm_buf_add(out, tmp, (size_t)r)) return CM_ENOMEM;
        off += (uint64_t)r;
    }
    return CM_OK;
}

/* Copies [off, end) of the journal (rfd) to the end of tfd. */
static cm_rc S_copy_tail(int rfd, int tfd, uint64_t off, uint64_t end)
{
    buf b = BUF_INIT;
    cm_rc rc = S_pread_all(rfd, off, end, &b);
    if (!rc) rc = S_write_all(S_sys_write, tfd, b.data ? b.data : "", b.len);
    cm_buf_release(&b);
    return rc;
}

/* Writes data to <path>.tmp, fsynced; *fd receives it opened for appends. */
static cm_rc S_write_tmp(const char *tmp, const buf *data, int *fd, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    *fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (*fd < 0) FAIL(CM_EIO, "cannot write the gateway journal: %s", strerror(errno));
    if (S_write_all(S_sys_write, *fd, data->data ? data->data : "", data->len))
        FAIL(CM_EIO, "cannot write the gateway journal: %s", strerror(errno));
out:
    return rc;
}

/* Rewrites the journal with the pending entries and seen keys (at open). */
static cm_rc S_rewrite(gw_journal *j, const json_t *pending, const json_t *seen, char *err,
                       size_t errlen)
{
    cm_rc rc = CM_OK;
    buf tmp = BUF_INIT, out = BUF_INIT;
    int fd = -1;
    CHECK(cm_buf_printf(&tmp, "%s.tmp", j->path) ? CM_ENOMEM : CM_OK);
    CHECK(S_serialize(pending, seen, j->compact_min / 2, &out, j->lens));
    CHECK(S_write_tmp(tmp.data, &out, &fd, err, errlen));
    if (fsync(fd)) FAIL(CM_EIO, "cannot write the gateway journal: %s", strerror(errno));
    if (rename(tmp.data, j->path))
        FAIL(CM_EIO, "cannot replace the gateway journal: %s", strerror(errno));
    cm_fs_sync_dir(j->path);
    j->bytes = out.len;
    const char *k;
    json_t *v;
    j->live = 0;
    json_object_foreach(j->lens, k, v) j->live += (uint64_t)json_integer_value(v);
out:
    if (fd >= 0) close(fd);
    if (rc && tmp.data) unlink(tmp.data);
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_buf_release(&tmp);
    cm_buf_release(&out);
    return rc;
}

/* The journal kept without a rewrite: cut after its last whole line of
 * data (its content); the lengths of the pending entries taken from their
 * serialized form. */
static cm_rc S_keep_as_is(gw_journal *j, const buf *data, const json_t *pending, const json_t *seen)
{
    const char *last = data->len ? memrchr(data->data, '\n', data->len) : NULL;
    uint64_t whole = last ? (uint64_t)(last - data->data) + 1 : 0;
    if (whole < data->len && truncate(j->path, (off_t)whole)) return CM_EIO;
    buf scratch = BUF_INIT;
    json_object_clear(j->lens);
    cm_rc rc = S_serialize(pending, seen, 0, &scratch, j->lens);
    cm_buf_release(&scratch);
    if (rc) return rc;
    j->bytes = whole;
    const char *k;
    json_t *v;
    j->live = 0;
    json_object_foreach(j->lens, k, v) j->live += (uint64_t)json_integer_value(v);
    return CM_OK;
}

void cm_gw_journal_set_limit(gw_journal *j, uint64_t pending_max)
{
    if (!pending_max || pending_max > GW_JOURNAL_PENDING_MAX) pending_max = GW_JOURNAL_PENDING_MAX;
    pthread_mutex_lock(&j->mu);
    j->pending_max = pending_max;
    j->file_max = 2 * pending_max;
    j->compact_min = pending_max / 4 < (1u << 20) ? pending_max / 4 : (1u << 20);
    pthread_mutex_unlock(&j->mu);
}

void cm_gw_journal_set_io(gw_journal *j, const gw_journal_io *io)
{
    pthread_mutex_lock(&j->mu);
    j->io.write = io && io->write ? io->write : S_sys_write;
    j->io.truncate = io && io->truncate ? io->truncate : S_sys_truncate;
    j->io.fsync = io && io->fsync ? io->fsync : fsync;
    j->io.datasync = io && io->datasync ? io->datasync : fdatasync;
    pthread_mutex_unlock(&j->mu);
}

cm_rc cm_gw_journal_open(const char *state_dir, int64_t now_ms, int64_t keep_ms, gw_journal **out,
                         json_t **pending, json_t **seen, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf dir = BUF_INIT, path = BUF_INIT, data = BUF_INIT;
    gw_journal *j = calloc(1, sizeof *j);
    *out = NULL;
    *pending = json_array();
    *seen = json_array();
    if (!j || !*pending || !*seen) FAIL(CM_ENOMEM, "out of memory");
    j->fd = j->lockfd = -1;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->synced_cv, NULL);
    if (!(j->lens = json_object())) FAIL(CM_ENOMEM, "out of memory");
    j->keep_ms = keep_ms;
    cm_gw_journal_set_io(j, NULL);
    cm_gw_journal_set_limit(j, 0);
    CHECK(cm_fs_join(&dir, state_dir, "gateway") ? CM_ENOMEM : CM_OK);
    CHECK(cm_fs_mkdirs(dir.data, err, errlen));
    CHECK(cm_fs_join(&path, dir.data, "journal.jsonl") ? CM_ENOMEM : CM_OK);
    j->path = cm_strdup(path.data);
    if (!j->path) FAIL(CM_ENOMEM, "out of memory");
    cm_buf_reset(&dir);
    CHECK(cm_buf_printf(&dir, "%s.lock", path.data) ? CM_ENOMEM : CM_OK);
    j->lockfd = open(dir.data, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (j->lockfd < 0) FAIL(CM_EIO, "cannot open the gateway journal lock: %s", strerror(errno));
    if (flock(j->lockfd, LOCK_EX | LOCK_NB))
        FAIL(CM_EBUSY, "another gateway is running on this state dir (its journal is locked)");
    if (access(path.data, F_OK) == 0)
        CHECK(cm_fs_read_file(path.data, GW_JOURNAL_MAX_BYTES, &data, err, errlen));
    uint64_t max_id = 0;
    CHECK(S_replay(&data, now_ms, keep_ms, *pending, *seen, &max_id, &j->torn));
    rc = S_rewrite(j, *pending, *seen, err, errlen);
    if (rc == CM_EIO && data.len) {
        /* no room for the rewrite (a full disk): go on with the file as it
         * is, cut after its last whole line so that appends start clean */
        rc = S_keep_as_is(j, &data, *pending, *seen);
        if (rc) FAIL(CM_EIO, "cannot open the gateway journal: %s", strerror(errno));
        j->unrewritten = true;
    }
    CHECK(rc);
    j->fd = open(path.data, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    if (j->fd < 0) FAIL(CM_EIO, "cannot open the gateway journal: %s", strerror(errno));
    j->next_id = max_id + 1;
    j->backlog = json_array_size(*pending);
    *out = j;
    j = NULL;
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    if (rc) {
        json_decref(*pending);
        json_decref(*seen);
        *pending = *seen = NULL;
    }
    cm_gw_journal_close(j);
    cm_buf_release(&dir);
    cm_buf_release(&path);
    cm_buf_release(&data);
    return rc;
}

void cm_gw_journal_close(gw_journal *j)
{
    if (!j) return;
    if (j->fd >= 0) close(j->fd);
    if (j->lockfd >= 0) close(j->lockfd);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->synced_cv);
    json_decref(j->lens);
    free(j->path);
    free(j);
}

/* Forgets entry id's "in" line (under mu). */
static void S_forget(gw_journal *j, uint64_t id)
{
    char idk[32];
    snprintf(idk, sizeof idk, "%llu", (unsigned long long)id);
    json_t *v = json_object_get(j->lens, idk);
    if (!v) return;
    uint64_t n = (uint64_t)json_integer_value(v);
    j->live = n > j->live ? 0 : j->live - n;
    json_object_del(j->lens, idk);
}

cm_rc cm_gw_journal_accept(gw_journal *j, const gw_msg *m, int64_t ts, uint64_t *id, char *err,
                           size_t errlen)
{
    cm_rc rc = CM_OK;
    char idk[32];
    pthread_mutex_lock(&j->mu);
    uint64_t my = j->next_id;
    json_t *msg = S_msg_json(m);
    size_t n = 0;
    char *line = S_line(msg ? json_pack("{s:s,s:I,s:I,s:o}", "j", "in", "id", (json_int_t)my, "ts",
                                        (json_int_t)ts, "msg", msg)
                            : NULL,
                        &n);
    if (!line) FAIL(CM_ENOMEM, "out of memory");
    if (n > j->pending_max)
        FAIL(CM_ETOOBIG, "the message is larger than the gateway journal's limit (%llu bytes)",
             (unsigned long long)j->pending_max);
    if (j->live + n > j->pending_max || j->bytes + n > j->file_max)
        FAIL(CM_ERATELIMIT,
             "the gateway journal is full (%llu bytes unanswered, %llu bytes of file): "
             "messages are refused until answered ones make room",
             (unsigned long long)j->live, (unsigned long long)j->bytes);
    snprintf(idk, sizeof idk, "%llu", (unsigned long long)my);
    if (json_object_set_new(j->lens, idk, json_integer((json_int_t)n)))
        FAIL(CM_ENOMEM, "out of memory");
    if (S_write_line(j, line, n)) {
        json_object_del(j->lens, idk);
        FAIL(CM_EIO, "cannot write the gateway journal: %s", strerror(errno));
    }
    j->next_id++;
    j->live += n;
    j->backlog++;
    if (S_sync(j)) {
        /* not acknowledged: marked answered, so that a replay does not
         * answer what its sender was told failed */
        rc = cm_seterr(err, errlen, CM_EIO, "cannot sync the gateway journal: %s", strerror(errno));
        S_append(j, json_pack("{s:s,s:I,s:s}", "j", "done", "id", (json_int_t)my, "status",
                              "unrecorded"));
        S_forget(j, my);
        j->backlog--;
        goto out;
    }
    *id = my;
out:
    pthread_mutex_unlock(&j->mu);
    free(line);
    return rc;
}

cm_rc cm_gw_journal_run(gw_journal *j, uint64_t id)
{
    pthread_mutex_lock(&j->mu);
    cm_rc rc = S_append(j, json_pack("{s:s,s:I}", "j", "run", "id", (json_int_t)id));
    pthread_mutex_unlock(&j->mu);
    return rc;
}

cm_rc cm_gw_journal_done(gw_journal *j, uint64_t id, const char *status)
{
    pthread_mutex_lock(&j->mu);
    cm_rc rc = S_append(
        j, json_pack("{s:s,s:I,s:s}", "j", "done", "id", (json_int_t)id, "status", status));
    if (j->backlog) j->backlog--;
    S_forget(j, id);
    pthread_mutex_unlock(&j->mu);
    return rc;
}

/* Whether a compaction is due (under mu): answered lines are at least half
 * of a file past compact_min. */
static bool S_due(const gw_journal *j)
{
    return j->bytes >= j->compact_min && j->bytes >= j->compact_after &&
           j->bytes - (j->live < j->bytes ? j->live : j->bytes) >= j->bytes / 2;
}

cm_rc cm_gw_journal_compact(gw_journal *j, int64_t now_ms, bool force, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf tmp = BUF_INIT, data = BUF_INIT, out = BUF_INIT;
    json_t *pending = NULL, *seen = NULL;
    int rfd = -1, tfd = -1;
    bool locked = false, renamed = false, swapping = false;
    pthread_mutex_lock(&j->mu);
    if (j->compacting || (!force && !S_due(j))) {
        pthread_mutex_unlock(&j->mu);
        return CM_OK;
    }
    j->compacting = true;
    uint64_t snap = j->bytes, off;
    pthread_mutex_unlock(&j->mu);
    /* the file only grows by whole lines past snap (a failed append is cut
     * back to a length >= snap): [0, snap) is read without the lock */
    CHECK(cm_buf_printf(&tmp, "%s.tmp", j->path) ? CM_ENOMEM : CM_OK);
    rfd = open(j->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (rfd < 0) FAIL(CM_EIO, "cannot read the gateway journal: %s", strerror(errno));
    if (S_pread_all(rfd, 0, snap, &data))
        FAIL(CM_EIO, "cannot read the gateway journal: %s", strerror(errno));
    pending = json_array();
    seen = json_array();
    if (!pending || !seen) CHECK(CM_ENOMEM);
    uint64_t max_id = 0;
    size_t torn = 0;
    CHECK(S_replay(&data, now_ms, j->keep_ms, pending, seen, &max_id, &torn));
    cm_buf_release(&data);
    CHECK(S_serialize(pending, seen, j->compact_min / 2, &out, NULL));
    CHECK(S_write_tmp(tmp.data, &out, &tfd, err, errlen));
    /* synced now, so that the swap's fsyncs have only the tail left */
    if (j->io.fsync(tfd)) FAIL(CM_EIO, "cannot compact the gateway journal: %s", strerror(errno));
    /* lines appended meanwhile: copied without the lock while there are many */
    for (off = snap;;) {
        pthread_mutex_lock(&j->mu);
        locked = true;
        uint64_t end = j->bytes;
        if (end - off <= GW_JOURNAL_TAIL_LOCKED) break;
        pthread_mutex_unlock(&j->mu);
        locked = false;
        if (S_copy_tail(rfd, tfd, off, end))
            FAIL(CM_EIO, "cannot compact the gateway journal: %s", strerror(errno));
        off = end;
    }
    /* the swap. No fdatasync of the old file runs, and none starts until it
     * is over (syncing): accepts wait for it as for a group commit, but the
     * mutex is not held across an fsync. Nothing written from here on is
     * acknowledged before the new file is synced in place. */
    while (j->syncing)
        pthread_cond_wait(&j->synced_cv, &j->mu);
    j->syncing = swapping = true;
    uint64_t end = j->bytes;
    if (S_copy_tail(rfd, tfd, off, end))
        FAIL(CM_EIO, "cannot compact the gateway journal: %s", strerror(errno));
    pthread_mutex_unlock(&j->mu);
    locked = false;
    if (j->io.fsync(tfd))
        FAIL(CM_EIO, "cannot compact the gateway journal: %s", strerror(errno));
    pthread_mutex_lock(&j->mu);
    locked = true;
    /* what was appended during that fsync (its writers wait in S_sync) */
    uint64_t end2 = j->bytes;
    if (S_copy_tail(rfd, tfd, end, end2))
        FAIL(CM_EIO, "cannot compact the gateway journal: %s", strerror(errno));
    if (rename(tmp.data, j->path))
        FAIL(CM_EIO, "cannot replace the gateway journal: %s", strerror(errno));
    renamed = true;
    close(j->fd);
    int nfd = j->fd = tfd; /* opened O_APPEND; the inode renamed into place */
    tfd = -1;
    j->bytes = out.len + (end2 - snap);
    j->broken = false; /* torn bytes past the old end stayed behind */
    uint64_t upto = j->written;
    j->compactions++;
    pthread_mutex_unlock(&j->mu);
    locked = false;
    /* the copied tail and the name: then every line written before the swap
     * is covered (later ones, in the new file, get their own fdatasync) */
    bool in_place = !j->io.fsync(nfd);
    cm_fs_sync_dir(j->path);
    pthread_mutex_lock(&j->mu);
    locked = true;
    /* on failure the waiting writers fdatasync the new file themselves */
    if (in_place && upto > j->synced) j->synced = upto;
out:
    if (!locked) pthread_mutex_lock(&j->mu);
    j->compacting = false;
    if (swapping) {
        j->syncing = false;
        pthread_cond_broadcast(&j->synced_cv);
    }
    if (rc) j->compact_after = j->bytes + j->compact_min; /* not again at once */
    pthread_mutex_unlock(&j->mu);
    if (rfd >= 0) close(rfd);
    if (tfd >= 0) close(tfd);
    if (rc && !renamed && tmp.data) unlink(tmp.data);
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    json_decref(pending);
    json_decref(seen);
    cm_buf_release(&tmp);
    cm_buf_release(&data);
    cm_buf_release(&out);
    return rc;
}

void cm_gw_journal_stats(gw_journal *j, gw_journal_stats *st)
{
    pthread_mutex_lock(&j->mu);
    st->bytes = j->bytes;
    st->live_bytes = j->live;
    st->backlog = j->backlog;
    st->torn = j->torn;
    st->compactions = j->compactions;
    st->broken = j->broken;
    st->unrewritten = j->unrewritten;
    pthread_mutex_unlock(&j->mu);
}

size_t cm_gw_journal_backlog(gw_journal *j)
{
    pthread_mutex_lock(&j->mu);
    size_t n = j->backlog;
    pthread_mutex_unlock(&j->mu);
    return n;
}
