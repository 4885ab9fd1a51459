/*
 * journal.c — the durable journal of accepted inbound messages (journal.h):
 * replay and rewrite at open, fsynced appends of accepted messages, run and
 * done marks appended whole lines at a time.
 */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <unistd.h>

#include "../base/fs.h"

/* A journal larger than this is rewritten when nothing is pending. */
#define GW_JOURNAL_REWRITE_BYTES (8u << 20)
/* The largest journal replayed at open. */
#define GW_JOURNAL_MAX_BYTES (512u << 20)

struct gw_journal {
    pthread_mutex_t mu;
    pthread_cond_t synced_cv;
    uint64_t written, synced; /* accepted lines written / covered by an fdatasync */
    bool syncing;
    int fd, lockfd;
    char *path;
    uint64_t next_id;
    size_t backlog;
    uint64_t bytes;
};

static json_t *S_msg_json(const gw_msg *m)
{
    json_t *o = json_object();
    if (!o) return NULL;
    const char *k[] = {"channel", "account",   "peer",   "session",
                       "thread",  "messageId", "sender", "text"};
    const char *v[] = {m->channel, m->account,    m->peer,   m->session,
                       m->thread,  m->message_id, m->sender, m->text};
    bool ok = true;
    for (size_t i = 0; i < ARRAY_LEN(k); i++)
        if (v[i]) ok = ok && !json_object_set_new(o, k[i], json_string(v[i]));
    ok = ok && !json_object_set_new(o, "group", json_boolean(m->is_group)) &&
         !json_object_set_new(o, "media", json_boolean(m->has_media)) &&
         !json_object_set_new(o, "mentioned", json_boolean(m->mentioned));
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
    m->text = json_string_value(json_object_get(msg, "text"));
    m->is_group = json_is_true(json_object_get(msg, "group"));
    m->has_media = json_is_true(json_object_get(msg, "media"));
    m->mentioned = json_is_true(json_object_get(msg, "mentioned"));
}

/* Writes all of line (a whole line) to fd. */
static cm_rc S_write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return CM_EIO;
        s += w;
        n -= (size_t)w;
    }
    return CM_OK;
}

static cm_rc S_append(gw_journal *j, json_t *o, bool sync)
{
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s) return CM_ENOMEM;
    size_t n = strlen(s);
    s[n] = '\n'; /* json_dumps leaves room: replace the NUL, write n + 1 */
    cm_rc rc = S_write_all(j->fd, s, n + 1);
    if (!rc) j->bytes += n + 1;
    free(s);
    if (rc || !sync) return rc;
    /* Group commit: one fdatasync covers every line written before it, so
     * concurrent accepts share it; the lock is not held during the sync. */
    uint64_t mine = ++j->written;
    while (j->synced < mine) {
        if (j->syncing) {
            pthread_cond_wait(&j->synced_cv, &j->mu);
            continue;
        }
        j->syncing = true;
        uint64_t upto = j->written;
        int fd = j->fd;
        pthread_mutex_unlock(&j->mu);
        int r = fdatasync(fd);
        pthread_mutex_lock(&j->mu);
        j->syncing = false;
        if (!r && upto > j->synced) j->synced = upto;
        pthread_cond_broadcast(&j->synced_cv);
        if (r) return CM_EIO;
    }
    return CM_OK;
}

/* Replays buf's lines into pending (by id) and seen. */
static cm_rc S_replay(const buf *b, int64_t now_ms, int64_t keep_ms, json_t *pending, json_t *seen,
                      uint64_t *max_id)
{
    json_t *by_id = json_object(); /* id → entry */
    if (!by_id) return CM_ENOMEM;
    const char *p = b->data ? b->data : "", *end = p + b->len;
    char idk[32];
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) break; /* a torn last line: never acknowledged */
        json_t *o = json_loadb(p, (size_t)(nl - p), 0, NULL);
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
            buf k = BUF_INIT;
            gw_msg m;
            cm_gw_journal_msg(json_object_get(e, "msg"), &m);
            if (e && ts > now_ms - keep_ms && cm_gw_dedupe_key(&m, &k))
                json_array_append_new(seen, json_pack("{s:s,s:I}", "key", k.data, "ts", ts));
            cm_buf_release(&k);
            json_object_del(by_id, idk);
        } else if (t && !strcmp(t, "seen") &&
                   json_integer_value(json_object_get(o, "ts")) > now_ms - keep_ms) {
            json_array_append(seen, o);
        }
        json_decref(o);
    }
    /* by_id keeps insertion order only with JSON_PRESERVE_ORDER semantics;
     * sort the pending entries by id instead. */
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

/* Rewrites the journal with the pending entries and seen keys. */
static cm_rc S_rewrite(gw_journal *j, const json_t *pending, const json_t *seen, char *err,
                       size_t errlen)
{
    cm_rc rc = CM_OK;
    buf tmp = BUF_INIT, out = BUF_INIT;
    int fd = -1;
    size_t i;
    json_t *e;
    CHECK(cm_buf_printf(&tmp, "%s.tmp", j->path) ? CM_ENOMEM : CM_OK);
    json_array_foreach(pending, i, e)
    {
        json_t *c = json_deep_copy(e);
        json_int_t runs = json_integer_value(json_object_get(c, "runs"));
        json_object_del(c, "runs");
        char *s = c ? json_dumps(c, JSON_COMPACT) : NULL;
        json_decref(c);
        if (!s) FAIL(CM_ENOMEM, "out of memory");
        rc = cm_buf_adds(&out, s);
        free(s);
        if (!rc) rc = cm_buf_addc(&out, '\n');
        for (json_int_t r = 0; !rc && r < runs; r++)
            rc = cm_buf_printf(&out, "{\"j\":\"run\",\"id\":%lld}\n",
                               (long long)json_integer_value(json_object_get(e, "id")));
        CHECK(rc);
    }
    json_array_foreach(seen, i, e)
    {
        json_t *c = json_pack("{s:s,s:s,s:I}", "j", "seen", "key",
                              json_string_value(json_object_get(e, "key")), "ts",
                              json_integer_value(json_object_get(e, "ts")));
        char *s = c ? json_dumps(c, JSON_COMPACT) : NULL;
        json_decref(c);
        if (!s) FAIL(CM_ENOMEM, "out of memory");
        rc = cm_buf_adds(&out, s);
        free(s);
        CHECK(rc ? rc : cm_buf_addc(&out, '\n'));
    }
    fd = open(tmp.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) FAIL(CM_EIO, "cannot write the gateway journal: %s", strerror(errno));
    if (S_write_all(fd, out.data ? out.data : "", out.len) || fsync(fd))
        FAIL(CM_EIO, "cannot write the gateway journal: %s", strerror(errno));
    close(fd);
    fd = -1;
    if (rename(tmp.data, j->path))
        FAIL(CM_EIO, "cannot replace the gateway journal: %s", strerror(errno));
    char *dir = cm_fs_dirname(j->path);
    if (dir) cm_fs_sync_dir(dir);
    free(dir);
    j->bytes = out.len;
out:
    if (fd >= 0) close(fd);
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_buf_release(&tmp);
    cm_buf_release(&out);
    return rc;
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
    CHECK(S_replay(&data, now_ms, keep_ms, *pending, *seen, &max_id));
    CHECK(S_rewrite(j, *pending, *seen, err, errlen));
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
    free(j->path);
    free(j);
}

cm_rc cm_gw_journal_accept(gw_journal *j, const gw_msg *m, int64_t ts, uint64_t *id, char *err,
                           size_t errlen)
{
    pthread_mutex_lock(&j->mu);
    uint64_t my = j->next_id;
    json_t *msg = S_msg_json(m);
    json_t *o = msg ? json_pack("{s:s,s:I,s:I,s:o}", "j", "in", "id", (json_int_t)my, "ts",
                                (json_int_t)ts, "msg", msg)
                    : NULL;
    /* Counted before the write: the file is never cut (cm_gw_journal_done)
     * while this line waits for its sync. */
    j->backlog++;
    j->next_id++;
    cm_rc rc = o ? S_append(j, o, true) : CM_ENOMEM;
    if (rc)
        j->backlog--;
    else
        *id = my;
    pthread_mutex_unlock(&j->mu);
    if (rc == CM_ENOMEM) return cm_seterr(err, errlen, rc, "out of memory");
    if (rc)
        return cm_seterr(err, errlen, rc, "cannot write the gateway journal: %s", strerror(errno));
    return CM_OK;
}

cm_rc cm_gw_journal_run(gw_journal *j, uint64_t id)
{
    pthread_mutex_lock(&j->mu);
    cm_rc rc = S_append(j, json_pack("{s:s,s:I}", "j", "run", "id", (json_int_t)id), false);
    pthread_mutex_unlock(&j->mu);
    return rc;
}

cm_rc cm_gw_journal_done(gw_journal *j, uint64_t id, const char *status)
{
    pthread_mutex_lock(&j->mu);
    cm_rc rc = S_append(
        j, json_pack("{s:s,s:I,s:s}", "j", "done", "id", (json_int_t)id, "status", status), false);
    if (j->backlog) j->backlog--;
    /* Nothing pending and the file large: start it over (nothing is lost;
     * only the dedupe memory of answered messages, which the process keeps). */
    if (!j->backlog && !j->syncing && j->bytes > GW_JOURNAL_REWRITE_BYTES && !ftruncate(j->fd, 0))
        j->bytes = 0;
    pthread_mutex_unlock(&j->mu);
    return rc;
}

size_t cm_gw_journal_backlog(gw_journal *j)
{
    pthread_mutex_lock(&j->mu);
    size_t n = j->backlog;
    pthread_mutex_unlock(&j->mu);
    return n;
}
