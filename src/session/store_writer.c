/*
 * store_writer.c — the registry of session stores, their writes and the
 * writer thread (store_writer.h).
 */
#include "../base/caps.h"
#include "../base/fs.h"
#include "../base/lockfile.h"
#include "maintenance.h"
#include "store_ix_int.h"
#include "store_writer.h"

/* the registry and the writer thread */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv;
static store_ix *g_list;
static bool g_writer, g_stop, g_pending;
static int64_t g_due_ms; /* monotonic ms when the pending changes are due */
/* The least time between two writes, from the last write's length: 99
 * times it (the writer rewrites a large store at most 1% of its time; the
 * journal keeps what waits meanwhile), or 9 times it once a store's journal
 * has grown to an eighth of the store's size (its replay after a crash, and
 * its disk use, stay bounded by the store's); at most 30 s either way. */
static int64_t g_took_ms; /* the last write's length (before any: the longest read's) */
static bool g_soon;       /* a change since the last write asked for the shorter gap */
#define GAP_MAX_MS       30000
#define GAP_TIMES        99
#define GAP_TIMES_SOON   9
#define JOURNAL_SHARE    8
/* the store is written in pieces of this size (cm_lockfile_replace_paced) */
#define STORE_WRITE_CHUNK (2u << 20)
/* After a failed pass the writer waits before the next: 1 s, doubling to
 * RETRY_MAX_MS while passes keep failing (a full disk), since each pass
 * writes the store's temporary file as far as the disk takes it, and logs
 * (only the 1st, 2nd, 4th, 8th, … failure of a store in a row). */
#define RETRY_MAX_MS 60000
static int g_failed;       /* passes failed in a row */
static int64_t g_retry_ms; /* monotonic ms before which no pass starts (0: none) */
static pthread_t g_thread;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void atfork_prepare(void)
{
    pthread_mutex_lock(&g_mu);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&g_mu);
}

static void init_cv(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cv, &ca);
    pthread_condattr_destroy(&ca);
}

static void atfork_child(void)
{
    /* the parent's writer thread was most likely waiting on g_cv: the copy
     * counts that waiter, who is not in the child, and the child's first
     * broadcast would wait for it forever */
    init_cv();
    g_writer = false; /* the thread is not in the child */
    g_pending = false;
    g_failed = 0;
    g_retry_ms = 0;
    pthread_mutex_unlock(&g_mu);
}

static void init_once(void)
{
    init_cv();
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

cm_rc cm_store_ix_get(const char *path, store_ix **out, char *err, size_t errlen)
{
    pthread_once(&g_once, init_once);
    pthread_mutex_lock(&g_mu);
    store_ix *ix = g_list;
    while (ix && strcmp(ix->path, path))
        ix = ix->next;
    if (!ix && (ix = calloc(1, sizeof *ix))) {
        ix->path = cm_strdup(path);
        ix->doc = json_object();
        ix->dirty = json_object();
        cm_session_maint_defaults(&ix->o.maint);
        if (!ix->path || !ix->doc || !ix->dirty) {
            free(ix->path);
            json_decref(ix->doc);
            json_decref(ix->dirty);
            free(ix);
            ix = NULL;
        } else {
            pthread_mutex_init(&ix->mu, NULL);
            pthread_cond_init(&ix->cv, NULL);
            ix->next = g_list;
            g_list = ix;
        }
    }
    pthread_mutex_unlock(&g_mu);
    *out = ix;
    return ix ? CM_OK : cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
}

/* Appends the text of e as json_dumps(store, JSON_INDENT(2)) writes a
 * member's value: its own lines indented one level more. */
static cm_rc add_indented(buf *out, const char *t)
{
    cm_rc rc = CM_OK;
    for (const char *p = t; *p && !rc;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        rc = cm_buf_add(out, p, n);
        if (!rc && nl) rc = cm_buf_adds(out, "\n  ");
        p += n + (nl != NULL);
    }
    return rc;
}

/* One member's text ("  <key>: <value>", no separator) as json_dumps of
 * the whole store writes it. */
static cm_rc member_text(buf *b, const char *key, const json_t *e)
{
    json_t *k = json_string(key);
    char *kt = k ? json_dumps(k, JSON_ENCODE_ANY) : NULL;
    char *t = kt ? json_dumps(e, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY) : NULL;
    json_decref(k);
    cm_rc rc = t ? cm_buf_printf(b, "  %s: ", kt) : CM_ENOMEM;
    if (!rc) rc = add_indented(b, t);
    free(kt);
    free(t);
    return rc;
}

/* How far ahead in the last write's members an entry is looked for (entries
 * removed since: maintenance, deletions). A changed entry keeps its place
 * (jansson replaces a member's value in place; new members come last). */
#define SKIP_AHEAD 16

/* The store's text, byte for byte what json_dumps(snap, JSON_INDENT(2) |
 * JSON_PRESERVE_ORDER) gives. The last write's text and its members'
 * places are kept (ix->text, ix->mt): an entry that is still the same object
 * (entries never change, and one object is under one key only) at the same
 * place has its text copied from there, so a write makes text only for the
 * entries changed since (the copy of the rest is a memcpy per member). The
 * result replaces ix->text; *out borrows it. */
static cm_rc serialise(store_ix *ix, const json_t *snap, const char **out, size_t *formatted)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;
    size_t n = json_object_size(snap), j = 0, i = 0;
    member_pos *mt = calloc(n ? n : 1, sizeof *mt);
    *out = NULL;
    if (!mt) return CM_ENOMEM;
    /* the old text is about the new one's size */
    if (ix->text_len && cm_buf_grow(&b, ix->text_len + ix->text_len / 16 + 64))
        rc = CM_ENOMEM;
    if (!rc) rc = cm_buf_adds(&b, n ? "{\n" : "{}");
    const char *key;
    json_t *e;
    json_object_foreach((json_t *)snap, key, e)
    {
        if (rc) break;
        size_t at = j;
        while (at < ix->mt_n && at < j + SKIP_AHEAD && ix->mt[at].e != e)
            at++;
        mt[i].e = json_incref(e);
        mt[i].off = b.len;
        if (at < ix->mt_n && ix->mt[at].e == e) {
            rc = cm_buf_add(&b, ix->text + ix->mt[at].off, ix->mt[at].len);
            j = at + 1;
        } else {
            rc = member_text(&b, key, e);
            ++*formatted;
            j++; /* most likely the entry at j, changed (replaced in place) */
        }
        mt[i].len = b.len - mt[i].off;
        i++;
        if (!rc) rc = cm_buf_adds(&b, i < n ? ",\n" : "\n");
    }
    if (!rc && n) rc = cm_buf_addc(&b, '}');
    size_t len = b.len;
    char *text = rc ? NULL : cm_buf_detach(&b);
    if (!rc && !text) rc = CM_ENOMEM;
    if (rc) {
        for (size_t k = 0; k < i; k++)
            json_decref(mt[k].e);
        free(mt);
        cm_buf_release(&b);
        return rc;
    }
    cm_store_ix_members_free(ix->mt, ix->mt_n);
    free(ix->text);
    ix->mt = mt;
    ix->mt_n = i;
    ix->text = text;
    ix->text_len = len;
    *out = text;
    return CM_OK;
}

/* Journal files kept while writes of the store fail (see the failure path
 * of cm_store_writer_flush). */
#define WAL_KEPT 4

/* The journal lines that restate the unwritten changes (dirty: key -> true
 * | a patch) at their current values (under ix->mu): replayed after every
 * record journaled so far, they give what memory holds, so the files that
 * held those records are no longer needed once these are synced. */
static cm_rc restate(store_ix *ix, const json_t *dirty, buf *out)
{
    cm_rc rc = CM_OK;
    const char *key;
    json_t *mark;
    json_object_foreach((json_t *)dirty, key, mark)
    {
        json_t *cur = json_object_get(ix->doc, key), *patch = NULL;
        if (cur && json_is_object(mark)) {
            if (!(patch = json_object())) return CM_ENOMEM;
            const char *f;
            json_t *v;
            json_object_foreach(mark, f, v)
            {
                json_t *now = json_object_get(cur, f);
                if (json_object_set(patch, f, now ? now : json_null())) rc = CM_ENOMEM;
            }
        }
        if (!rc) rc = cm_store_wal_line(out, ++ix->wal_seq, key, patch, cur);
        json_decref(patch);
        if (rc) return rc;
    }
    return CM_OK;
}

/* Writes the unwritten changes; the store's lock l is held. */
cm_rc cm_store_writer_flush(store_ix *ix, lockfile *l, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    json_t *snap = NULL, *pending = NULL;
    const char *text = NULL;
    maint_result r = {0};
    store_wal_file *rotated = NULL, *done = NULL;
    CHECK(cm_store_ix_refresh(ix, err, errlen));
    pthread_mutex_lock(&ix->mu);
    if (!json_object_size(ix->dirty)) {
        pthread_mutex_unlock(&ix->mu);
        goto out;
    }
    /* The writer's copy of the store (ix->wdoc) follows doc through the
     * changed keys only, so that the mutex is held for the changes, not for
     * a copy of every entry; a whole copy only after doc was re-read. */
    json_t *changes = NULL;
    if (!ix->wdoc || ix->wdoc_stale) {
        json_decref(ix->wdoc);
        ix->wdoc = json_copy(ix->doc);
        ix->wdoc_stale = false;
        ix->st.locked_copies++;
    } else if ((changes = json_object())) {
        const char *ck;
        json_t *cv;
        json_object_foreach(ix->dirty, ck, cv)
        {
            json_t *cur = json_object_get(ix->doc, ck);
            json_object_set(changes, ck, cur ? cur : json_null());
        }
    }
    snap = json_incref(ix->wdoc);
    /* the text last read, when it is newer than the last write's */
    char *seed = ix->seed;
    size_t seed_len = ix->seed_len, seed_n = ix->seed_n;
    member_pos *seed_mt = ix->seed_mt;
    ix->seed = NULL;
    ix->seed_mt = NULL;
    pending = ix->dirty;
    ix->dirty = json_object();
    ix->writing++;
    /* records from here on go to a new journal generation: this one's are
     * all in snap */
    rotated = ix->wal;
    ix->wal = NULL;
    ix->wal_bytes = 0;
    int64_t now = ix->last_now;
    store_ix_opts o = ix->o;
    pthread_mutex_unlock(&ix->mu);
    if (seed) { /* the write's own fields (the lock file is held) */
        cm_store_ix_members_free(ix->mt, ix->mt_n);
        free(ix->text);
        ix->text = seed;
        ix->text_len = seed_len;
        ix->mt = seed_mt;
        ix->mt_n = seed_n;
    }
    if (!snap || !ix->dirty) {
        json_decref(changes);
        FAIL(CM_ENOMEM, "out of memory");
    }
    const char *ck;
    json_t *cv;
    json_object_foreach(changes, ck, cv)
    {
        if (json_is_null(cv))
            json_object_del(snap, ck);
        else
            json_object_set(snap, ck, cv);
    }
    json_decref(changes);
    CHECK(cm_session_maint_entries(snap, &o.maint, now, pending, &o.log, &r)
              ? cm_seterr(err, errlen, CM_ENOMEM, "out of memory")
              : CM_OK);
    /* QuantumClaw's JSON.stringify(store, null, 2): no final newline. */
    size_t formatted = 0;
    if (serialise(ix, snap, &text, &formatted)) FAIL(CM_ENOMEM, "out of memory");
    bool rewrite = false;
    cm_session_maint_files(snap, ix->path, &o.maint, now, pending, ix->text_len, &o.log, &r,
                           &rewrite);
    if (rewrite) {
        if (serialise(ix, snap, &text, &formatted)) FAIL(CM_ENOMEM, "out of memory");
    }
    CHECK(cm_lockfile_replace_paced(l, text, ix->text_len, STORE_WRITE_CHUNK, err, errlen));
    cm_session_maint_written(ix->path, &r, true);
    file_id fid;
    cm_store_ix_id_of(ix->path, &fid);
    pthread_mutex_lock(&ix->mu);
    ix->id = fid;
    ix->writing--;
    const char *key;
    json_t *e;
    json_object_foreach(r.removed, key, e)
    {
        /* removed by maintenance: unless it changed since the snapshot */
        if (json_object_get(ix->doc, key) == e && !json_object_get(ix->dirty, key))
            json_object_del(ix->doc, key);
    }
    ix->st.writes++;
    ix->st.formatted += (int64_t)formatted;
    ix->st.pruned += r.pruned;
    ix->st.capped += r.capped;
    ix->st.warnings += r.warned;
    ix->st.rotations += r.rotated;
    /* the store now holds every record of the rotated generation and of the
     * older files: they go once their appends in progress have ended */
    while (rotated && rotated->users)
        pthread_cond_wait(&ix->cv, &ix->mu);
    done = ix->wal_done;
    ix->wal_done = NULL;
    pthread_mutex_unlock(&ix->mu);
    json_decref(pending);
    pending = NULL;
    if (rotated) rotated->next = done, done = rotated;
    rotated = NULL;
out:
    if (pending) { /* not written: keep the changes for the next write */
        pthread_mutex_lock(&ix->mu);
        ix->writing--;
        const char *pk;
        json_t *mark;
        json_object_foreach(pending, pk, mark)
        {
            /* changed again meanwhile: both changes are unwritten */
            json_t *newer = json_object_get(ix->dirty, pk);
            if (!newer || (json_is_true(mark) && !json_is_true(newer))) {
                json_object_set(ix->dirty, pk, mark);
            } else if (json_is_object(newer) && json_is_object(mark)) {
                const char *f;
                json_t *v;
                json_object_foreach(mark, f, v)
                {
                    if (!json_object_get(newer, f)) json_object_set(newer, f, v);
                }
            }
        }
        ix->wdoc_stale = true; /* maintenance may have changed it */
        /* and their journal, until a write holds them */
        while (rotated && rotated->users)
            pthread_cond_wait(&ix->cv, &ix->mu);
        if (rotated && !ix->wal) { /* nothing journaled since: it goes on */
            ix->wal = rotated;
            rotated = NULL;
        }
        /* A change was journaled meanwhile, in a newer file: the rotated one
         * is kept until a write holds its changes, but no more than
         * WAL_KEPT files are, however many writes fail while turns go on:
         * then every unwritten change is restated in the newest file and
         * the older ones go (each held a descriptor). */
        size_t kept = 1;
        for (store_wal_file *k = ix->wal_done; k; k = k->next)
            kept++;
        buf again = BUF_INIT;
        store_wal_file *cur = NULL, *older = NULL;
        if (rotated && kept >= WAL_KEPT && !restate(ix, ix->dirty, &again)) {
            cur = ix->wal;
            cur->users++;
            older = ix->wal_done;
            ix->wal_done = NULL;
        }
        pthread_mutex_unlock(&ix->mu);
        if (cur && !cm_store_ix_wal_append(ix, cur, again.data, again.len, NULL, 0)) {
            rotated->next = older; /* their changes are in cur now */
            done = rotated;
            rotated = older = NULL;
        }
        cm_buf_release(&again);
        if (rotated) {
            pthread_mutex_lock(&ix->mu);
            rotated->next = ix->wal_done;
            ix->wal_done = rotated;
            while (older) {
                store_wal_file *w = older;
                older = w->next;
                w->next = ix->wal_done;
                ix->wal_done = w;
            }
            pthread_mutex_unlock(&ix->mu);
        }
        json_decref(pending);
    }
    while (done) {
        store_wal_file *w = done;
        done = w->next;
        cm_store_wal_close(w, true);
        cm_store_wal_free(w);
    }
    cm_session_maint_written(ix->path, &r, false); /* not written: its backup goes */
    cm_session_maint_result_release(&r);
    json_decref(snap);
    return rc;
}

cm_rc cm_store_ix_sync(store_ix *ix, char *err, size_t errlen)
{
    pthread_mutex_lock(&ix->mu);
    /* A write in progress (another thread's) holds the changes this call is
     * to make durable: its outcome is this call's too, so take the lock
     * after it and look again (a failed write puts its changes back). */
    bool due = json_object_size(ix->dirty) > 0 || ix->writing > 0;
    pthread_mutex_unlock(&ix->mu);
    if (!due) return CM_OK;
    lockfile l;
    cm_rc rc = cm_lockfile_take(&l, ix->path, LOCKFILE_REPLACE, NULL, err, errlen);
    if (rc) return rc;
    rc = cm_store_writer_flush(ix, &l, err, errlen);
    cm_lockfile_release(&l);
    return rc;
}

/* Writes every store with unwritten changes; the first error is kept. */
static cm_rc sync_every(char *err, size_t errlen)
{
    cm_rc first = CM_OK;
    pthread_mutex_lock(&g_mu);
    store_ix *list = g_list; /* stores are never freed; new ones go in front */
    pthread_mutex_unlock(&g_mu);
    for (store_ix *ix = list; ix; ix = ix->next) {
        char e[512];
        cm_rc rc = cm_store_ix_sync(ix, e, sizeof e);
        pthread_mutex_lock(&ix->mu);
        cm_logger lg = ix->o.log;
        int64_t n = rc ? ++ix->st.failed_writes : ix->st.failed_writes;
        ix->st.failed_writes = rc ? n : 0;
        pthread_mutex_unlock(&ix->mu);
        if (rc && (n & (n - 1)) == 0) /* a store that keeps failing: 1, 2, 4, 8, … */
            cm_logf(&lg, CM_LOG_WARN, "sessions: %s (%lld failed write%s in a row)", e,
                    (long long)n, n > 1 ? "s" : "");
        else if (!rc && n)
            cm_logf(&lg, CM_LOG_INFO, "sessions: %s written again after %lld failed writes",
                    ix->path, (long long)n);
        if (rc && !first) first = cm_seterr(err, errlen, rc, "%s", e);
    }
    return first;
}

bool cm_store_writer_journal_big(uint64_t journal_bytes, int64_t store_bytes)
{
    return store_bytes <= 0 || journal_bytes >= (uint64_t)store_bytes / JOURNAL_SHARE;
}

static int64_t gap_of(int64_t took_ms, bool soon)
{
    int64_t t = took_ms > 0 ? took_ms : 0, k = soon ? GAP_TIMES_SOON : GAP_TIMES;
    return t >= GAP_MAX_MS / k ? GAP_MAX_MS : t * k;
}

int64_t cm_store_ix_gap_ms(int64_t took_ms, uint64_t journal_bytes, int64_t store_bytes)
{
    return gap_of(took_ms, cm_store_writer_journal_big(journal_bytes, store_bytes));
}

/* A read of a store took took_ms: until a write is timed, the gap is
 * estimated from it (a read parses what a write formats), so that the
 * first write of a large store waits as the later ones do. */
void cm_store_writer_note_read(int64_t took_ms)
{
    pthread_mutex_lock(&g_mu);
    if (took_ms > g_took_ms) g_took_ms = took_ms;
    pthread_mutex_unlock(&g_mu);
}

static void *writer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_mu);
    while (!g_stop) {
        if (!g_pending) {
            pthread_cond_wait(&g_cv, &g_mu);
            continue;
        }
        int64_t left = g_due_ms - cm_now_ms();
        if (left > 0) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_sec += left / 1000;
            ts.tv_nsec += (left % 1000) * 1000000;
            if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
            pthread_cond_timedwait(&g_cv, &g_mu, &ts);
            continue;
        }
        g_pending = false;
        g_soon = false;
        pthread_mutex_unlock(&g_mu);
        char err[512];
        int64_t t0 = cm_now_ms();
        cm_rc rc = sync_every(err, sizeof err);
        int64_t took = cm_now_ms() - t0;
        pthread_mutex_lock(&g_mu);
        g_took_ms = took;
        /* changes made during this write wait the gap after it (they were
         * scheduled with the last write's) */
        int64_t after = cm_now_ms() + gap_of(took, g_soon);
        if (g_pending && g_due_ms < after) g_due_ms = after;
        if (rc) { /* try again later, and later still while it keeps failing */
            g_retry_ms = cm_now_ms() + (g_failed < 6 ? 1000LL << g_failed : RETRY_MAX_MS);
            g_failed++;
            if (!g_pending || g_due_ms < g_retry_ms) g_due_ms = g_retry_ms;
            g_pending = true;
        } else {
            g_failed = 0;
            g_retry_ms = 0;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

/* A deferred change is waiting: the writer writes it within flush_ms, or
 * the gap after the last write (soon: the shorter one, see g_gap_ms). */
void cm_store_writer_schedule(int64_t flush_ms, bool soon)
{
    pthread_mutex_lock(&g_mu);
    int64_t gap = gap_of(g_took_ms, soon);
    if (flush_ms < gap) flush_ms = gap;
    g_soon |= soon;
    int64_t due = cm_now_ms() + flush_ms;
    if (due < g_retry_ms) due = g_retry_ms; /* after a failed pass: not before its retry */
    if (!g_pending || g_due_ms > due) {
        g_pending = true;
        g_due_ms = due;
        pthread_cond_broadcast(&g_cv);
    }
    if (!g_writer) {
        g_stop = false;
        g_writer = pthread_create(&g_thread, NULL, writer, NULL) == 0;
    }
    pthread_mutex_unlock(&g_mu);
}

cm_rc cm_store_ix_sync_all(char *err, size_t errlen)
{
    pthread_once(&g_once, init_once);
    pthread_mutex_lock(&g_mu);
    bool running = g_writer;
    g_stop = true;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    if (running) pthread_join(g_thread, NULL);
    pthread_mutex_lock(&g_mu);
    g_writer = false;
    g_pending = false;
    pthread_mutex_unlock(&g_mu);
    return sync_every(err, errlen);
}
