/*
 * store_index.c — the in-process index of sessions.json (store_index.h).
 */
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#include "../base/caps.h"
#include "../base/fs.h"
#include "../base/lockfile.h"
#include "maintenance.h"
#include "store_index.h"
#include "store_wal.h"

#define STORE_MAX CM_CAP_SESSIONS_FILE
/* a replayed journal is written this soon when deferred writes are off */
#define CM_STORE_IX_REPLAY_MS 1000

/* A member of the last written text: its entry (a reference) and bytes. */
typedef struct member_pos {
    json_t *e;
    size_t off, len;
} member_pos;

typedef struct file_id {
    bool exists;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} file_id;

struct store_ix {
    char *path;
    pthread_mutex_t mu; /* guards every field below */
    json_t *doc;        /* key -> entry (entries never change once here) */
    json_t *dirty;      /* unwritten: key -> true (ours wins whole) | a patch of fields */
    file_id id;         /* of the file doc reflects */
    bool loaded;
    bool loading;        /* a thread is reading the file: the others wait for it */
    pthread_cond_t cv;   /* loading ended */
    int writing;      /* writes of this process in progress (the lock is held) */
    int64_t last_now; /* the latest now_ms of an update */
    store_ix_opts o;
    store_ix_stats st;
    /* The last write's text and where each member's text is in it (see
     * serialise). Used only by writes, which hold the store's lock file. */
    char *text;
    size_t text_len;
    struct member_pos *mt;
    size_t mt_n;
    /* The text the last read of the file parsed and its members' places
     * (scan_members), for the next write to start from instead of
     * formatting every entry (NULL: none); under mu, taken by the write. */
    char *seed;
    size_t seed_len;
    struct member_pos *seed_mt;
    size_t seed_n;
    /* The journal of deferred changes (store_wal.h): wal is the generation
     * new records go to (NULL: none open yet); wal_done the files whose
     * records are all in memory and are unlinked after the next write of
     * the store (earlier generations whose write failed, a crashed
     * process's journals replayed here). */
    store_wal_file *wal, *wal_done;
    /* The writer's copy of the store (see flush_locked); wdoc_stale: doc was
     * re-read since, a whole copy is due. */
    json_t *wdoc;
    bool wdoc_stale;
    int64_t wal_gen, wal_seq;
    uint64_t wal_bytes; /* journal bytes appended since the last write began */
    struct store_ix *next;
};

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
static pthread_t g_thread;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void atfork_prepare(void)
{
    pthread_mutex_lock(&g_mu);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&g_mu);
}

static void atfork_child(void)
{
    g_writer = false; /* the thread is not in the child */
    g_pending = false;
    pthread_mutex_unlock(&g_mu);
}

static void init_once(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static void id_of(const char *path, file_id *f)
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
    return !a->exists || (a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
                          a->mtime.tv_sec == b->mtime.tv_sec &&
                          a->mtime.tv_nsec == b->mtime.tv_nsec);
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
        id_of(path, &before);
        cm_buf_reset(&b);
        rc = cm_fs_read_file(path, STORE_MAX, &b, err, errlen);
        id_of(path, fid);
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

static void members_free(member_pos *mt, size_t n)
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
    if (mt) members_free(mt, n);
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

static void schedule(int64_t flush_ms, bool soon);
static void note_read(int64_t took_ms);

cm_rc cm_store_ix_refresh(store_ix *ix, char *err, size_t errlen)
{
    file_id now;
    id_of(ix->path, &now);
    pthread_mutex_lock(&ix->mu);
    while (ix->loading) /* one reader of the file at a time; the others use its result */
        pthread_cond_wait(&ix->cv, &ix->mu);
    /* while this process writes (holding the lock) the file is its own */
    bool fresh = ix->loaded && (ix->writing || same_id(&now, &ix->id));
    bool first = !ix->loaded;
    if (!fresh) ix->loading = true;
    pthread_mutex_unlock(&ix->mu);
    if (fresh) return CM_OK;
    int64_t t0 = mono_ms();
    json_t *doc, *recs = first ? json_array() : NULL;
    store_wal_file *found = NULL;
    file_id fid;
    char *text = NULL;
    size_t text_len = 0, seed_n = 0;
    member_pos *seed_mt = NULL;
    cm_rc rc = load(ix->path, &doc, &fid, &text, &text_len, err, errlen);
    if (!rc) note_read(mono_ms() - t0);
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
    if (seed_mt) members_free(seed_mt, seed_n);
    while (found) {
        store_wal_file *w = found;
        found = w->next;
        cm_store_wal_free(w);
    }
    if (replayed) schedule(flush_ms > 0 ? flush_ms : CM_STORE_IX_REPLAY_MS, true);
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
    members_free(ix->mt, ix->mt_n);
    free(ix->text);
    ix->mt = mt;
    ix->mt_n = i;
    ix->text = text;
    ix->text_len = len;
    *out = text;
    return CM_OK;
}

/* Writes the unwritten changes; the store's lock l is held. */
static cm_rc flush_locked(store_ix *ix, lockfile *l, char *err, size_t errlen)
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
        members_free(ix->mt, ix->mt_n);
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
    file_id fid;
    id_of(ix->path, &fid);
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
            if (!json_object_get(ix->dirty, pk)) json_object_set(ix->dirty, pk, mark);
        }
        ix->wdoc_stale = true; /* maintenance may have changed it */
        /* and their journal, until a write holds them */
        while (rotated && rotated->users)
            pthread_cond_wait(&ix->cv, &ix->mu);
        if (rotated) {
            rotated->next = ix->wal_done;
            ix->wal_done = rotated;
        }
        pthread_mutex_unlock(&ix->mu);
        json_decref(pending);
    }
    while (done) {
        store_wal_file *w = done;
        done = w->next;
        cm_store_wal_close(w, true);
        cm_store_wal_free(w);
    }
    cm_session_maint_result_release(&r);
    json_decref(snap);
    return rc;
}

cm_rc cm_store_ix_sync(store_ix *ix, char *err, size_t errlen)
{
    pthread_mutex_lock(&ix->mu);
    bool dirty = json_object_size(ix->dirty) > 0;
    pthread_mutex_unlock(&ix->mu);
    if (!dirty) return CM_OK;
    lockfile l;
    cm_rc rc = cm_lockfile_take(&l, ix->path, LOCKFILE_REPLACE, NULL, err, errlen);
    if (rc) return rc;
    rc = flush_locked(ix, &l, err, errlen);
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
        if (rc) {
            pthread_mutex_lock(&ix->mu);
            cm_logger lg = ix->o.log;
            pthread_mutex_unlock(&ix->mu);
            cm_logf(&lg, CM_LOG_WARN, "sessions: %s", e);
            if (!first) first = cm_seterr(err, errlen, rc, "%s", e);
        }
    }
    return first;
}

static bool journal_big(uint64_t journal_bytes, int64_t store_bytes)
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
    return gap_of(took_ms, journal_big(journal_bytes, store_bytes));
}

/* A read of a store took took_ms: until a write is timed, the gap is
 * estimated from it (a read parses what a write formats), so that the
 * first write of a large store waits as the later ones do. */
static void note_read(int64_t took_ms)
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
        int64_t left = g_due_ms - mono_ms();
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
        int64_t t0 = mono_ms();
        cm_rc rc = sync_every(err, sizeof err);
        int64_t took = mono_ms() - t0;
        pthread_mutex_lock(&g_mu);
        g_took_ms = took;
        /* changes made during this write wait the gap after it (they were
         * scheduled with the last write's) */
        int64_t after = mono_ms() + gap_of(took, g_soon);
        if (g_pending && g_due_ms < after) g_due_ms = after;
        if (rc && !g_pending) { /* try again a second later */
            g_pending = true;
            g_due_ms = mono_ms() + 1000;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

/* A deferred change is waiting: the writer writes it within flush_ms, or
 * the gap after the last write (soon: the shorter one, see g_gap_ms). */
static void schedule(int64_t flush_ms, bool soon)
{
    pthread_mutex_lock(&g_mu);
    int64_t gap = gap_of(g_took_ms, soon);
    if (flush_ms < gap) flush_ms = gap;
    g_soon |= soon;
    if (!g_pending || g_due_ms > mono_ms() + flush_ms) {
        g_pending = true;
        g_due_ms = mono_ms() + flush_ms;
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
        soon = journal_big(ix->wal_bytes, ix->id.size);
    } else {
        json_decref(e);
    }
    pthread_mutex_unlock(&ix->mu);
    if (!w) goto out;
    cm_rc wrc = cm_store_wal_write(w, line.data, line.len, err, errlen);
    pthread_mutex_lock(&ix->mu);
    /* group commit: an fdatasync begun after this line was written covers
     * it; one thread syncs, the others wait for it (the mutex is not held
     * during the fdatasync) */
    uint64_t mine = wrc ? 0 : ++w->written;
    while (!wrc && w->synced < mine) {
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
        pthread_cond_broadcast(&ix->cv);
    }
    w->users--;
    pthread_cond_broadcast(&ix->cv);
    pthread_mutex_unlock(&ix->mu);
    /* no journal: the change is made durable the slow way, by a write */
    rc = wrc ? cm_store_ix_sync(ix, err, errlen) : CM_OK;
    if (!rc) schedule(flush_ms, soon);
out:
    cm_buf_release(&line);
    return rc;
}

cm_rc cm_store_ix_update(store_ix *ix, const char *key, bool durable, int64_t now,
                         store_ix_fn fn, void *ctx, char *err, size_t errlen)
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
    if (!rc) rc = flush_locked(ix, &l, err, errlen);
    cm_lockfile_release(&l);
out:
    return rc;
}
