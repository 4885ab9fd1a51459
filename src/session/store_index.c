/*
 * store_index.c — the in-process index of sessions.json (store_index.h):
 * reading the file, the entries, updates and the journal's appends; the
 * writes and the writer thread are store_writer.c's.
 */
#include "../base/caps.h"
#include "../base/fs.h"
#include "../base/lockfile.h"
#include "maintenance.h"
#include "store_ix_int.h"
#include "store_writer.h"

#define STORE_MAX CM_CAP_SESSIONS_FILE
/* a replayed journal is written this soon when deferred writes are off */
#define CM_STORE_IX_REPLAY_MS 1000

void cm_store_ix_id_of(const char *path, file_id *f)
{
    struct stat st;
    memset(f, 0, sizeof *f);
    if (stat(path, &st)) return;
    f->exists = true;
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->size = st.st_size;
    f->mtime = st.st_mtim;
}

static bool same_id(const file_id *a, const file_id *b)
{
    if (a->exists != b->exists) return false;
    return !a->exists ||
           (a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
            a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec);
}

void cm_store_ix_configure(store_ix *ix, const store_ix_opts *o)
{
    pthread_mutex_lock(&ix->mu);
    ix->o = *o;
    pthread_mutex_unlock(&ix->mu);
}

void cm_store_ix_stats_get(store_ix *ix, store_ix_stats *out)
{
    pthread_mutex_lock(&ix->mu);
    *out = ix->st;
    pthread_mutex_unlock(&ix->mu);
}

/* Reads and parses the file (no lock held): a whole, stable version; its
 * text in *text (NULL when empty or absent; the caller frees it). */
static cm_rc load(const char *path, json_t **doc, file_id *fid, char **text, size_t *text_len,
                  char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;
    *doc = NULL;
    for (int attempt = 0;; attempt++) {
        file_id before;
        cm_store_ix_id_of(path, &before);
        cm_buf_reset(&b);
        rc = cm_fs_read_file(path, STORE_MAX, &b, err, errlen);
        cm_store_ix_id_of(path, fid);
        if (rc == CM_ENOTFOUND) fid->exists = false;
        /* replaced while read: read again (the rename is atomic) */
        if (!same_id(&before, fid) && attempt < 3) continue;
        break;
    }
    if (rc == CM_ENOTFOUND || (!rc && b.len == 0)) {
        rc = (*doc = json_object()) ? CM_OK : cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
        goto out;
    }
    if (rc) goto out;
    json_error_t je;
    *doc = json_loadb(b.data, b.len, 0, &je);
    if (!json_is_object(*doc)) {
        json_decref(*doc);
        *doc = NULL;
        FAIL(CM_ECORRUPT, "%s:%d:%d: not a session store (%s)", path, je.line, je.column,
             je.text[0] ? "a JSON object is expected" : "not JSON");
    }
    *text_len = b.len;
    *text = cm_buf_detach(&b);
out:
    cm_buf_release(&b);
    return rc;
}

void cm_store_ix_members_free(member_pos *mt, size_t n)
{
    for (size_t k = 0; k < n; k++)
        json_decref(mt[k].e);
    free(mt);
}

/* p at a string's opening quote: just past its closing one, or NULL. */
static const char *skip_string(const char *p, const char *end)
{
    for (p++; p < end; p++) {
        if (*p == '\\')
            p++;
        else if (*p == '"')
            return p + 1;
    }
    return NULL;
}

/* The end of the JSON value at p (a member's, at the top level of the
 * store): after its closing bracket, or at the ',' or newline after a
 * scalar; NULL when the text ends first. */
static const char *skip_value(const char *p, const char *end)
{
    int depth = 0;
    for (; p < end; p++) {
        char c = *p;
        if (c == '"') {
            if (!(p = skip_string(p, end))) return NULL;
            if (depth == 0) return p;
            p--;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth <= 0) return depth < 0 ? NULL : p + 1;
        } else if (depth == 0 && (c == ',' || c == '\n')) {
            return p;
        }
    }
    return NULL;
}

/* The members of t — a store laid out as JSON.stringify(store, null, 2)
 * and json_dumps(JSON_INDENT(2)) write it: "{\n", members "  \"key\":
 * value" separated by ",\n", "\n}" — matched with doc, the object parsed
 * from t: each member's entry (a reference) and place in t, so that the
 * first write of the store copies the unchanged entries' text (as the file
 * has it) instead of formatting every one. False, nothing kept, for any
 * other layout, a duplicate key or a key doc does not have. O(length of t);
 * a key with an escape is decoded, the others looked up as written. */
static bool scan_members(const char *t, size_t len, const json_t *doc, member_pos **out,
                         size_t *nout)
{
    size_t cap = json_object_size(doc), n = 0;
    const char *p = t + 2, *end = t + len;
    member_pos *mt = NULL;
    if (!cap || len < 4 || memcmp(t, "{\n", 2) || !(mt = calloc(cap, sizeof *mt))) goto fail;
    for (;;) {
        if (end - p < 3 || memcmp(p, "  \"", 3) || n == cap) goto fail;
        const char *k = p + 2, *ke = skip_string(k, end);
        if (!ke || end - ke < 2 || memcmp(ke, ": ", 2)) goto fail;
        json_t *e = NULL;
        if (!memchr(k + 1, '\\', (size_t)(ke - k - 2))) { /* as written: looked up directly */
            e = json_object_getn(doc, k + 1, (size_t)(ke - k - 2));
        } else {
            json_t *ks = json_loadb(k, (size_t)(ke - k), JSON_DECODE_ANY, NULL);
            const char *key = json_string_value(ks);
            if (key && strlen(key) == json_string_length(ks)) e = json_object_get(doc, key);
            json_decref(ks);
        }
        const char *ve = e ? skip_value(ke + 2, end) : NULL;
        if (!ve) goto fail;
        mt[n++] = (member_pos){json_incref(e), (size_t)(p - t), (size_t)(ve - p)};
        if (end - ve >= 2 && !memcmp(ve, ",\n", 2)) {
            p = ve + 2;
            continue;
        }
        if (end - ve < 2 || memcmp(ve, "\n}", 2)) goto fail;
        for (p = ve + 2; p < end; p++)
            if (*p != '\n' && *p != ' ' && *p != '\r' && *p != '\t') goto fail;
        break;
    }
    if (n != cap) goto fail; /* a key twice */
    *out = mt;
    *nout = n;
    return true;
fail:
    if (mt) cm_store_ix_members_free(mt, n);
    return false;
}

/* This process's unwritten changes over a fresh doc (under ix->mu). */
static void merge_dirty(store_ix *ix, json_t *fresh)
{
    const char *key;
    json_t *mark;
    void *tmp;
    json_object_foreach_safe(ix->dirty, tmp, key, mark)
    {
        if (json_is_true(mark)) {
            json_t *ours = json_object_get(ix->doc, key);
            if (ours)
                json_object_set(fresh, key, ours);
            else
                json_object_del(fresh, key);
            continue;
        }
        json_t *theirs = json_object_get(fresh, key);
        if (!json_is_object(theirs)) { /* removed there: a field change does not revive it */
            json_object_del(ix->dirty, key);
            continue;
        }
        json_t *e = json_copy(theirs);
        const char *f;
        json_t *v;
        json_object_foreach(mark, f, v)
        {
            if (json_is_null(v))
                json_object_del(e, f);
            else
                json_object_set(e, f, v);
        }
        json_object_set_new(fresh, key, e);
    }
}

/* A recovered journal record over doc, noted as unwritten (under ix->mu). */
static void replay(store_ix *ix, json_t *doc, const json_t *r)
{
    const char *key = json_string_value(json_object_get(r, "k"));
    const json_t *patch = json_object_get(r, "p");
    if (!json_is_object(patch)) { /* a whole entry, or its removal */
        const json_t *e = json_object_get(r, "e");
        if (json_is_object(e))
            json_object_set_new(doc, key, json_deep_copy(e));
        else
            json_object_del(doc, key);
        json_object_set_new(ix->dirty, key, json_true());
        return;
    }
    json_t *theirs = json_object_get(doc, key);
    if (!json_is_object(theirs)) return; /* removed since: a field change does not revive it */
    json_t *e = json_copy(theirs), *mark = json_object_get(ix->dirty, key);
    json_t *acc = json_is_true(mark) ? NULL : json_is_object(mark) ? mark : json_object();
    if (acc && acc != mark) json_object_set_new(ix->dirty, key, acc);
    const char *f;
    json_t *v;
    json_object_foreach((json_t *)patch, f, v)
    {
        if (json_is_null(v))
            json_object_del(e, f);
        else
            json_object_set(e, f, v);
        if (acc) json_object_set(acc, f, v);
    }
    json_object_set_new(doc, key, e);
}

cm_rc cm_store_ix_refresh(store_ix *ix, char *err, size_t errlen)
{
    file_id now;
    cm_store_ix_id_of(ix->path, &now);
    pthread_mutex_lock(&ix->mu);
    while (ix->loading) /* one reader of the file at a time; the others use its result */
        pthread_cond_wait(&ix->cv, &ix->mu);
    /* while this process writes (holding the lock) the file is its own */
    bool fresh = ix->loaded && (ix->writing || same_id(&now, &ix->id));
    bool first = !ix->loaded;
    if (!fresh) ix->loading = true;
    pthread_mutex_unlock(&ix->mu);
    if (fresh) return CM_OK;
    int64_t t0 = cm_now_ms();
    json_t *doc, *recs = first ? json_array() : NULL;
    store_wal_file *found = NULL;
    file_id fid;
    char *text = NULL;
    size_t text_len = 0, seed_n = 0;
    member_pos *seed_mt = NULL;
    cm_rc rc = load(ix->path, &doc, &fid, &text, &text_len, err, errlen);
    if (!rc) cm_store_writer_note_read(cm_now_ms() - t0);
    /* the text as read, for the next write (none: it formats every entry) */
    if (!rc && text && !scan_members(text, text_len, doc, &seed_mt, &seed_n)) {
        free(text);
        text = NULL;
    }
    /* first use in this process: a crashed writer's journal is replayed */
    if (!rc && first)
        rc = recs ? cm_store_wal_recover(ix->path, recs, &found, err, errlen)
                  : cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    /* the writer's copy of the store (the file as read), made here rather
     * than under the mutex by the next write; whatever merge_dirty and
     * replay change below is in ix->dirty, which the write applies to it */
    json_t *wcopy = !rc ? json_copy(doc) : NULL;
    bool replayed = false;
    int64_t flush_ms = 0;
    pthread_mutex_lock(&ix->mu);
    if (!rc) {
        while (found) { /* unlinked once the store holding their records is written */
            store_wal_file *w = found;
            found = w->next;
            w->next = ix->wal_done;
            ix->wal_done = w;
        }
        flush_ms = ix->o.flush_ms;
        merge_dirty(ix, doc);
        size_t i;
        json_t *r;
        json_array_foreach(recs, i, r) /* after merge_dirty: it would undo a replayed entry */
        {
            replay(ix, doc, r);
            replayed = true;
        }
        json_decref(ix->doc);
        ix->doc = doc;
        ix->wdoc_stale = true;
        if (wcopy) { /* doc as read, but for the keys in ix->dirty */
            json_decref(ix->wdoc);
            ix->wdoc = wcopy;
            wcopy = NULL;
            ix->wdoc_stale = false;
        }
        ix->id = fid;
        ix->loaded = true;
        ix->st.loads++;
        /* swapped: the older seed is freed below */
        char *ot = ix->seed;
        member_pos *omt = ix->seed_mt;
        size_t on = ix->seed_n;
        ix->seed = text;
        ix->seed_len = text_len;
        ix->seed_mt = seed_mt;
        ix->seed_n = seed_n;
        text = ot;
        seed_mt = omt;
        seed_n = on;
    }
    ix->loading = false;
    pthread_cond_broadcast(&ix->cv);
    pthread_mutex_unlock(&ix->mu);
    json_decref(recs);
    json_decref(wcopy);
    free(text);
    if (seed_mt) cm_store_ix_members_free(seed_mt, seed_n);
    while (found) {
        store_wal_file *w = found;
        found = w->next;
        cm_store_wal_free(w);
    }
    if (replayed) cm_store_writer_schedule(flush_ms > 0 ? flush_ms : CM_STORE_IX_REPLAY_MS, true);
    return rc;
}

json_t *cm_store_ix_entry(store_ix *ix, const char *key)
{
    pthread_mutex_lock(&ix->mu);
    json_t *e = json_incref(json_object_get(ix->doc, key));
    pthread_mutex_unlock(&ix->mu);
    return e;
}

json_t *cm_store_ix_snapshot(store_ix *ix)
{
    pthread_mutex_lock(&ix->mu);
    json_t *s = json_copy(ix->doc);
    pthread_mutex_unlock(&ix->mu);
    return s;
}

/* Puts e (a new reference, or NULL: removal) in place of old and notes the
 * change as unwritten (under ix->mu). */
static void record(store_ix *ix, const char *key, json_t *old, json_t *e, int64_t now)
{
    json_t *mark = json_object_get(ix->dirty, key);
    if (!old || !e || json_is_true(mark)) {
        json_object_set_new(ix->dirty, key, json_true());
    } else {
        json_t *patch = json_is_object(mark) ? json_incref(mark) : json_object();
        const char *f;
        json_t *v;
        json_object_foreach(e, f, v)
        {
            if (!json_equal(json_object_get(old, f), v)) json_object_set(patch, f, v);
        }
        json_object_foreach(old, f, v)
        {
            if (!json_object_get(e, f)) json_object_set_new(patch, f, json_null());
        }
        json_object_set_new(ix->dirty, key, patch);
    }
    if (e)
        json_object_set_new(ix->doc, key, e);
    else
        json_object_del(ix->doc, key);
    if (now > ix->last_now) ix->last_now = now;
}

/* The fields of e that differ from old (null: removed), a new object. */
static json_t *diff_of(const json_t *old, const json_t *e)
{
    json_t *patch = json_object();
    const char *f;
    json_t *v;
    json_object_foreach((json_t *)e, f, v)
    {
        if (patch && !json_equal(json_object_get(old, f), v)) json_object_set(patch, f, v);
    }
    json_object_foreach((json_t *)old, f, v)
    {
        if (patch && !json_object_get(e, f)) json_object_set_new(patch, f, json_null());
    }
    return patch;
}

cm_rc cm_store_ix_wal_append(store_ix *ix, store_wal_file *w, const char *text, size_t n, char *err,
                             size_t errlen)
{
    /* The line is written outside the mutex, so a failed fdatasync may have
     * met its bytes before they were counted in written: a ticket taken
     * before the write says whether it had begun by the time one failed. */
    pthread_mutex_lock(&ix->mu);
    uint64_t ticket = ++w->begun;
    pthread_mutex_unlock(&ix->mu);
    cm_rc wrc = cm_store_wal_write(w, text, n, err, errlen);
    pthread_mutex_lock(&ix->mu);
    /* group commit: an fdatasync begun after this line was written covers
     * it; one thread syncs, the others wait for it (the mutex is not held
     * during the fdatasync) */
    uint64_t mine = wrc ? 0 : ++w->written;
    while (!wrc && w->synced < mine) {
        if (ticket <= w->sync_failed) {
            wrc = cm_seterr(err, errlen, CM_EIO, "sessions journal: an fdatasync failed");
            break;
        }
        if (w->syncing) {
            pthread_cond_wait(&ix->cv, &ix->mu);
            continue;
        }
        w->syncing = true;
        uint64_t upto = w->written;
        pthread_mutex_unlock(&ix->mu);
        wrc = cm_store_wal_sync(w, err, errlen);
        pthread_mutex_lock(&ix->mu);
        w->syncing = false;
        if (!wrc && upto > w->synced) w->synced = upto;
        if (wrc) w->sync_failed = w->begun; /* every line begun by now */
        pthread_cond_broadcast(&ix->cv);
    }
    w->users--;
    pthread_cond_broadcast(&ix->cv);
    pthread_mutex_unlock(&ix->mu);
    return wrc;
}

/* A deferred update: applied in memory, its journal record appended and
 * fdatasynced before this returns (so nothing an update returned for is lost
 * by a crash: store_wal.h), the store written later by the writer. */
static cm_rc update_deferred(store_ix *ix, const char *key, int64_t now, int64_t flush_ms,
                             store_ix_fn fn, void *ctx, bool *durable, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf line = BUF_INIT;
    store_wal_file *w = NULL;
    CHECK(cm_store_ix_refresh(ix, err, errlen));
    pthread_mutex_lock(&ix->mu);
    while (!ix->wal) { /* a journal generation to append to (opened outside the mutex) */
        int64_t gen = ++ix->wal_gen;
        pthread_mutex_unlock(&ix->mu);
        store_wal_file *nw;
        if (cm_store_wal_open(ix->path, gen, &nw, err, errlen)) {
            *durable = true; /* no journal: this change is written at once */
            goto out;
        }
        pthread_mutex_lock(&ix->mu);
        if (!ix->wal) {
            ix->wal = nw;
        } else { /* another thread opened one meanwhile */
            cm_store_wal_close(nw, true);
            cm_store_wal_free(nw);
        }
    }
    json_t *old = json_object_get(ix->doc, key);
    json_t *e = old ? json_copy(old) : NULL;
    if (old && !e)
        rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    else
        rc = fn(&e, ctx, err, errlen);
    if (!rc && (e || old)) {
        json_t *patch = old && e ? diff_of(old, e) : NULL;
        if ((old && e && !patch) || cm_store_wal_line(&line, ++ix->wal_seq, key, patch, e))
            rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
        json_decref(patch);
    }
    bool soon = false;
    if (!rc && (e || old)) {
        record(ix, key, old, e, now);
        w = ix->wal;
        w->users++;
        ix->wal_bytes += line.len;
        soon = cm_store_writer_journal_big(ix->wal_bytes, ix->id.size);
    } else {
        json_decref(e);
    }
    pthread_mutex_unlock(&ix->mu);
    if (!w) goto out;
    cm_rc wrc = cm_store_ix_wal_append(ix, w, line.data, line.len, err, errlen);
    /* no journal: the change is made durable the slow way, by a write */
    rc = wrc ? cm_store_ix_sync(ix, err, errlen) : CM_OK;
    if (!rc) cm_store_writer_schedule(flush_ms, soon);
out:
    cm_buf_release(&line);
    return rc;
}

cm_rc cm_store_ix_update(store_ix *ix, const char *key, bool durable, int64_t now, store_ix_fn fn,
                         void *ctx, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    pthread_mutex_lock(&ix->mu);
    int64_t flush_ms = ix->o.flush_ms;
    pthread_mutex_unlock(&ix->mu);
    if (!durable && flush_ms > 0) {
        rc = update_deferred(ix, key, now, flush_ms, fn, ctx, &durable, err, errlen);
        if (rc || !durable) return rc;
    }
    lockfile l;
    CHECK(cm_lockfile_take(&l, ix->path, LOCKFILE_REPLACE, NULL, err, errlen));
    rc = cm_store_ix_refresh(ix, err, errlen);
    if (!rc) {
        pthread_mutex_lock(&ix->mu);
        json_t *old = json_object_get(ix->doc, key);
        json_t *e = old ? json_copy(old) : NULL;
        if (old && !e)
            rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
        else
            rc = fn(&e, ctx, err, errlen);
        if (!rc && (e || old))
            record(ix, key, old, e, now);
        else
            json_decref(e);
        pthread_mutex_unlock(&ix->mu);
    }
    if (!rc) rc = cm_store_writer_flush(ix, &l, err, errlen);
    cm_lockfile_release(&l);
out:
    return rc;
}
