/*
 * sync.c — the builtin backend's sync (cm_engine_sync): discovery, the
 * fingerprint that decides between an incremental sync (files paired with
 * their rows, only changed ones read) and a full rebuild (rebuild.c), under
 * the writer lock. A search's sync (CM_SYNC_NOWAIT) that finds nothing
 * changed is read-only (no lock, no transaction). Also the indexing of a note
 * that memory_write just wrote.
 */
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/fs.h"
#include "../base/path.h"
#include "../base/utf8.h"
#include "../index/dir_records.h"
#include "../index/memfile.h"
#include "../store/term_rows.h"
#include "engine_int.h"

/* The read-only no-change check: the index exists with this fingerprint,
 * every discovered file matches its row (size and mtime), none is gone, no
 * problem is recorded or found, and no chunk waits for a vector. Then a
 * sync would write nothing, and it is skipped without the writer lock. */
static bool nothing_changed(cm_engine *e, const file_list *files, const store_snap *snap,
                            const problem_list *pl, const char *meta)
{
    char msg[512], *stored = NULL, *prev = NULL;
    size_t dirty = 1;
    bool same = false;
    dev_t dev = e->st_dev;
    ino_t ino = e->st_ino;
    if (pl->n || cm_engine_ensure_store(e, msg, sizeof msg) != CM_OK) return false;
    if (e->st_dev != dev || e->st_ino != ino) snap = NULL; /* another index swapped in */
    if (cm_store_meta_get(&e->st, STORE_META_KEY, &stored, msg, sizeof msg) != CM_OK) goto out;
    if (!stored || strcmp(stored, meta) != 0) goto out;
    if (cm_store_meta_get(&e->st, STORE_PROBLEMS_KEY, &prev, msg, sizeof msg) != CM_OK) goto out;
    if (prev && strcmp(prev, "[]") != 0) goto out;
    if (cm_engine_count_dirty_in(e, files, snap, &dirty, msg, sizeof msg) != CM_OK || dirty)
        goto out;
    if (e->have_prov) {
        pending_chunk *pc = NULL;
        size_t n = 0;
        if (cm_store_pending_vectors(&e->st, 0, 1, &pc, &n, msg, sizeof msg) != CM_OK) goto out;
        cm_store_pending_release(pc, n);
        if (n) goto out;
    }
    same = true;
out:
    free(stored);
    free(prev);
    return same;
}

/* Finalizes the stat snapshot a sync held (if the index's reopen did not). */
static void snap_release(cm_engine *e, store_snap *snap)
{
    if (e->snap_held == snap) e->snap_held = NULL;
    cm_store_files_stat_close(snap);
}

/* The fingerprint: a change in any field means the whole index is rebuilt. */
static cm_rc meta_json(const cm_engine *e, buf *out)
{
    const cm_config *c = &e->cfg;
    buf scope = BUF_INIT;
    cm_rc rc = CM_OK;
    for (size_t i = 0; i < c->extra_paths.n && !rc; i++)
        rc = cm_buf_printf(&scope, "%s\n", c->extra_paths.v[i]);
    /* multimodal memory changes which files are indexed (only when on, so
     * that indexes built without it keep their fingerprint) */
    if (!rc && c->multimodal)
        rc =
            cm_buf_printf(&scope, "multimodal:%s%s:%d\n", c->multimodal & CM_MEDIA_AUDIO ? "a" : "",
                          c->multimodal & CM_MEDIA_IMAGE ? "i" : "", c->multimodal_max_bytes);
    char scope_hash[SHA256_HEX_LEN + 1];
    cm_sha256_hex(scope.data, scope.len, scope_hash);
    cm_buf_release(&scope);
    /* version 2: chunks within their budget, no byte-order mark (chunk.h) */
    if (!rc)
        rc = cm_buf_printf(
            out,
            "{\"version\":2,\"provider\":\"%s\",\"model\":\"%s\",\"providerKey\":\"%s\","
            "\"sources\":[",
            e->provider, e->model, e->have_prov ? e->prov.key_hash : "");
    for (size_t i = 0; i < c->sources.n && !rc; i++)
        rc = cm_buf_printf(out, "%s\"%s\"", i ? "," : "", c->sources.v[i]);
    if (!rc)
        rc = cm_buf_printf(
            out,
            "],\"scopeHash\":\"%s\",\"chunkTokens\":%d,\"chunkOverlap\":%d,"
            "\"vectorDims\":%d,\"ftsTokenizer\":\"%s%s\",\"workspace\":",
            scope_hash, c->chunk_tokens, c->chunk_overlap, c->output_dims, c->fts_tokenizer,
            strcmp(c->fts_tokenizer, "trigram") == 0 ? "" : "+" KEYWORD_TEXT_VERSION);
    /* the workspace the index holds: another one rebuilds it (and search
     * refuses it until then, see cm_engine_index_workspace_matches) */
    if (!rc) rc = cm_utf8_add_json_str(out, c->workspace, strlen(c->workspace));
    if (!rc) rc = cm_buf_addc(out, '}');
    return rc;
}

/* Pairs files on disk with their rows in the index in one merge pass (both
 * are sorted by path, and SQLite's BINARY order is strcmp's): match[i] is the
 * row of files->v[i] or NULL; kept[j] tells whether row j still has a file. */
static cm_rc pair_files(const file_list *files, const stored_files *old, const stored_file ***match,
                        bool **kept)
{
    *match = calloc(files->n ? files->n : 1, sizeof **match);
    *kept = calloc(old->n ? old->n : 1, sizeof **kept);
    if (!*match || !*kept) {
        free(*match);
        free(*kept);
        return CM_ENOMEM;
    }
    size_t j = 0;
    for (size_t i = 0; i < files->n; i++) {
        int c = -1;
        while (j < old->n && (c = strcmp(old->v[j].path, files->v[i].rel)) < 0)
            j++;
        if (j < old->n && c == 0) {
            (*match)[i] = &old->v[j];
            (*kept)[j] = true;
        }
    }
    return CM_OK;
}

/* Whether a session transcript that grew since it was indexed grew by less
 * than sync.sessions.deltaBytes and deltaMessages (newlines) both: it waits
 * for more, as QuantumClaw's session sync does. A transcript that shrank was
 * rewritten and is indexed again. */
static bool session_below_delta(const cm_config *c, file_reader *rd, const mem_file *f,
                                const stored_file *sf)
{
    if (!sf || strcmp(f->source, "sessions") != 0 || f->size < sf->size) return false;
    if (f->size - sf->size >= c->sessions_delta_bytes) return false;
    buf b = BUF_INIT;
    char why[256];
    struct stat st;
    bool below = false;
    if (cm_index_file_reader_read(rd, f, (size_t)DISCOVER_MAX_FILE_BYTES, &b, &st, why,
                                  sizeof why) == CM_OK &&
        (int64_t)b.len >= sf->size) {
        long lines = 0;
        for (size_t i = (size_t)sf->size; i < b.len; i++)
            lines += b.data[i] == '\n';
        below = lines < c->sessions_delta_messages;
    }
    cm_buf_release(&b);
    return below;
}

/* Brings an existing index up to date file by file. */
static cm_rc incremental(sync_run *r, const file_list *files, char *err, size_t errlen)
{
    cm_engine *e = r->e;
    store *st = &e->st;
    cm_rc rc = CM_OK;
    stored_files old = {0};
    const stored_file **match = NULL;
    bool *kept = NULL;
    buf problem = BUF_INIT;
    CHECK(cm_store_files_load(st, &old, err, errlen));
    CHECK(pair_files(files, &old, &match, &kept));
    for (size_t i = 0; i < files->n; i++) {
        const mem_file *f = &files->v[i];
        const stored_file *sf = match[i];
        if ((sf && sf->size == f->size && sf->mtime_ns == f->mtime_ns) ||
            session_below_delta(&r->e->cfg, r->rd, f, sf)) {
            r->stats->files_unchanged++;
            CHECK(cm_engine_report(r, f, err, errlen));
            continue;
        }
        char hash[SHA256_HEX_LEN + 1];
        rc = cm_engine_load_file(r, f, hash, &problem, err, errlen);
        if (rc == CM_EIO) { /* keep what the index has; retried next sync */
            rc = CM_OK;
            r->stats->files_skipped++;
            CHECK(cm_engine_report(r, f, err, errlen));
            continue;
        }
        CHECK(rc);
        CHECK(cm_store_begin(st, err, errlen));
        if (sf && strcmp(sf->hash, hash) == 0) {
            rc = cm_store_file_touch(st, f->rel, r->mtime_ns, r->size, err, errlen);
            r->stats->files_unchanged++;
        } else {
            rc = cm_store_file_replace(st, f->rel, f->source, hash, r->mtime_ns, r->size,
                                       problem.len ? problem.data : NULL, &r->chunks, err, errlen);
            r->stats->files_indexed++;
            r->stats->chunks_written += r->chunks.n;
        }
        if (!rc) rc = cm_store_commit(st, err, errlen);
        if (rc) cm_store_rollback(st);
        CHECK(rc);
        CHECK(cm_engine_report(r, f, err, errlen));
    }
    /* Files gone from disk. Unreadable files are still listed by discovery,
     * so they are not removed. */
    bool in_tx = false;
    for (size_t i = 0; i < old.n; i++) {
        if (kept[i]) continue;
        if (!in_tx) CHECK(cm_store_begin(st, err, errlen));
        in_tx = true;
        CHECK(cm_store_file_delete(st, old.v[i].path, err, errlen));
        r->stats->files_removed++;
    }
    /* Record this sync's transient problems (rewritten only when there are
     * some now or were some before, so a no-op sync writes nothing). */
    char *prev = NULL;
    CHECK(cm_store_meta_get(st, STORE_PROBLEMS_KEY, &prev, err, errlen));
    if (r->problems.n || (prev && strcmp(prev, "[]") != 0) || in_tx) {
        if (!in_tx) rc = cm_store_begin(st, err, errlen);
        in_tx = true;
        if (!rc) rc = cm_engine_save_problems(st, &r->problems, err, errlen);
    }
    free(prev);
    CHECK(rc);
    if (in_tx) {
        in_tx = false;
        CHECK(cm_store_commit(st, err, errlen));
    }
out:
    if (rc) cm_store_rollback(st);
    cm_store_stored_files_release(&old);
    free(match);
    free(kept);
    cm_buf_release(&problem);
    return rc;
}

/* Counts the files of a discovery that a sync would read (new, changed) or
 * drop. The files (in any order) are looked up by path in an open-addressing
 * table of their indexes. */
typedef struct dirty_count {
    cm_engine *e;
    const file_list *files;
    file_reader *rd;
    bool *seen;     /* per file: it has a row */
    uint32_t *slot; /* file index + 1; 0: empty. Built at the first row out of order */
    size_t mask, dirty;
    size_t next; /* the file after the last one matched: the next row's, in order */
    bool oom;
} dirty_count;

static uint64_t path_hash(const char *p)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
}

/* The hash table of the discovered files' paths. */
static bool build_slots(dirty_count *x)
{
    const file_list *l = x->files;
    size_t cap = 16;
    while (cap < 2 * l->n)
        cap *= 2;
    if (!(x->slot = calloc(cap, sizeof(uint32_t)))) return false;
    x->mask = cap - 1;
    for (size_t i = 0; i < l->n; i++) { /* rel is unique in a discovery */
        size_t j = path_hash(l->v[i].rel) & x->mask;
        while (x->slot[j])
            j = (j + 1) & x->mask;
        x->slot[j] = (uint32_t)(i + 1);
    }
    return true;
}

/* One files row against the discovered files. Rows and files mostly come
 * in the same order (both by path: the rows after a rebuild, a directory's
 * files as its walk lists them), so the file after the last match is tried
 * first, and the hash table is built only for a row that is not that one. */
static bool dirty_row(void *ctx, const char *path, int64_t mtime_ns, int64_t size)
{
    dirty_count *x = ctx;
    const file_list *l = x->files;
    size_t i = l->n;
    if (x->next < l->n && strcmp(l->v[x->next].rel, path) == 0) {
        i = x->next;
    } else {
        if (!x->slot && !build_slots(x)) {
            x->oom = true;
            return false;
        }
        for (size_t j = path_hash(path) & x->mask; x->slot[j]; j = (j + 1) & x->mask)
            if (strcmp(l->v[x->slot[j] - 1].rel, path) == 0) {
                i = x->slot[j] - 1;
                break;
            }
    }
    if (i == l->n) { /* its file is gone */
        x->dirty++;
        return true;
    }
    x->next = i + 1;
    x->seen[i] = true;
    const mem_file *f = &l->v[i];
    stored_file sf = {NULL, NULL, mtime_ns, size};
    /* a transcript that grew less than the delta is left as the sync leaves it */
    if ((size != f->size || mtime_ns != f->mtime_ns) &&
        !session_below_delta(&x->e->cfg, x->rd, f, &sf))
        x->dirty++;
    return true;
}

cm_rc cm_engine_count_dirty_in(cm_engine *e, const file_list *files, const store_snap *held,
                               size_t *dirty, char *err, size_t errlen)
{
    if (files->n >= UINT32_MAX / 4) return cm_seterr(err, errlen, CM_ETOOBIG, "too many files");
    file_reader rd;
    cm_index_file_reader_init(&rd, files);
    dirty_count x = {.e = e,
                     .files = files,
                     .rd = &rd,
                     .seen = calloc(files->n ? files->n : 1, sizeof(bool))};
    cm_rc rc = x.seen ? CM_OK : CM_ENOMEM;
    if (!rc) rc = cm_store_files_each(&e->st, held, dirty_row, &x, err, errlen);
    if (!rc && x.oom) rc = CM_ENOMEM;
    for (size_t i = 0; !rc && i < files->n; i++)
        x.dirty += !x.seen[i]; /* a file without its row */
    *dirty = x.dirty;
    cm_index_file_reader_release(&rd);
    free(x.seen);
    free(x.slot);
    return rc;
}

static int64_t (*sync_clock)(void); /* tests: ns since the epoch */

void cm_engine_sync_test_clock(int64_t (*now_ns)(void))
{
    sync_clock = now_ns;
}

/* The time before which a directory's ctime must lie for the walk to record
 * its names (discover.h's DISCOVER_RECORD_MARGIN_NS behind the clock). */
static int64_t record_before(void)
{
    struct timespec ts;
    int64_t now = 0;
    if (sync_clock)
        now = sync_clock();
    else if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
        now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    return now > DISCOVER_RECORD_MARGIN_NS ? now - DISCOVER_RECORD_MARGIN_NS : 0;
}

/* Writes the files rows' stat snapshot when a write dropped it (or the index
 * predates it), under the writer lock: the next no-change check then reads
 * one value instead of the table (files_stat.h), and skips reading the
 * directories a walk recorded that are unchanged since. files: that walk
 * (NULL after memory_write's one note); replace: rewrite a snapshot that is
 * there too (its records are not the walk's). Best effort: without it the
 * check reads the table and every directory. */
static void stat_refresh(cm_engine *e, const file_list *files, bool replace, bool changed)
{
    char msg[512];
    bool was_open = e->st_open; /* a rebuild leaves the live index closed: so it stays */
    bool wrote = false, filled = false;
    const buf *dirs = files ? &files->dir_record : NULL;
    if (cm_engine_ensure_store(e, msg, sizeof msg) != CM_OK ||
        cm_store_files_stat_refresh(&e->st, dirs ? dirs->data : NULL, dirs ? dirs->len : 0, replace,
                                    &wrote, msg, sizeof msg) != CM_OK)
        cm_logf(&e->lg, CM_LOG_INFO, "files' stat snapshot not written: %s", msg);
    /* the term counts, when a write without them dropped their mark (or the
     * index predates them): searches count the rows meanwhile */
    else if (cm_term_rows_repair(&e->st, &filled, msg, sizeof msg) != CM_OK)
        cm_logf(&e->lg, CM_LOG_INFO, "term counts not written: %s", msg);
    /* what a sync wrote goes into the index's file, and the WAL is emptied
     * when no reader holds it: each later process (a search) then opens an
     * index with nothing to read back from its WAL. memory_write's note
     * (files NULL) leaves that to the next sync, as before. */
    if (files && e->st_open && ((changed && was_open) || wrote || filled))
        cm_store_checkpoint(&e->st);
    if (!was_open) cm_engine_close_store(e);
}

cm_rc cm_builtin_sync(cm_engine *e, unsigned flags, cm_progress_fn progress, void *progress_ctx,
                      cm_sync_stats *stats, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    int lock = -1;
    file_list files = {0};
    buf meta = BUF_INIT;
    store_snap snap = {0};
    char *stored = NULL;
    cm_sync_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    file_reader rd;
    cm_index_file_reader_init(&rd, &files);
    sync_run r = {e,        progress, progress_ctx, {0}, stats, {0}, BUF_INIT,
                  BUF_INIT, {0},      &rd,          0,   0,     NULL};
    CHECK(cm_engine_workspace_exists(e, err, errlen));
    if ((flags & CM_SYNC_UNLESS_WATCHED) && !(flags & CM_SYNC_FORCE) && cm_engine_watched_fresh(e))
        goto out; /* a live watcher keeps the index fresh */
    cm_engine_provider_ready(e, true, progress,
                             progress_ctx); /* before the lock: a download takes a while */
    /* batch_fill.c reports its state through these */
    e->batch_progress = progress;
    e->batch_pctx = progress_ctx;
    e->batch_nowait = (flags & CM_SYNC_NOWAIT) != 0;
    /* The stat snapshot, read once for the walk and the check: the
     * directories its walk recorded that are still as they were are not
     * read again (discover.h). Held (a read of the index) until the check
     * is done; none for a forced rebuild. Best effort: an index that
     * cannot be read here is left to the steps below, as before. */
    char msg[512];
    if (!(flags & CM_SYNC_FORCE) && cm_engine_ensure_store(e, msg, sizeof msg) == CM_OK) {
        if (cm_store_files_stat_open(&e->st, &snap, msg, sizeof msg) == CM_OK)
            e->snap_held = &snap; /* a reopen of the index (a swap) closes it first */
        else
            cm_store_files_stat_close(&snap);
    }
    /* sorted only when the sync goes on: the no-change check needs no order */
    CHECK(cm_discover_files_hinted(&e->cfg, snap.dirs, snap.dirs_len, record_before(), &files,
                                   &r.problems));
    CHECK(meta_json(e, &meta));
    /* a search's or a watcher's sync (NOWAIT) reads before it locks; an
     * explicit index waits for the writer lock as before */
    if ((flags & CM_SYNC_NOWAIT) && !(flags & CM_SYNC_FORCE) &&
        nothing_changed(e, &files, &snap, &r.problems, meta.data)) {
        stats->files_seen = stats->files_unchanged = files.n;
        goto out;
    }
    /* a walk that recorded other directories than the snapshot holds
     * (one changed, or old enough now) writes them at the end */
    bool new_records =
        snap.p && !cm_discover_records_same(snap.dirs, snap.dirs_len, files.dir_record.data,
                                            files.dir_record.len);
    snap_release(e, &snap); /* before any write */
    cm_discover_sort(&files);
    stats->files_seen = files.n; /* walked, even when the lock is busy */
    CHECK(cm_engine_lock_acquire(e, !(flags & CM_SYNC_NOWAIT), &lock, err, errlen));
    cm_store_remove_leftovers(e->cfg.store_path, true);
    for (size_t i = 0; i < r.problems.n; i++)
        cm_logf(&e->lg, CM_LOG_WARN, "%s: %s", r.problems.v[i].path, r.problems.v[i].what);
    r.prog.files_total = files.n;
    r.prog.bytes_total = files.total_bytes;

    bool full = (flags & CM_SYNC_FORCE) != 0;
    if (!full) {
        rc = cm_engine_ensure_store(e, err, errlen);
        if (rc == CM_ENOTFOUND) {
            full = true;
            rc = CM_OK;
        }
        CHECK(rc);
    }
    if (!full) {
        CHECK(cm_store_meta_get(&e->st, STORE_META_KEY, &stored, err, errlen));
        if (!stored || strcmp(stored, meta.data) != 0) {
            if (stored)
                cm_logf(&e->lg, CM_LOG_INFO, "index settings changed; rebuilding the index");
            full = true;
        }
    }
    if (full) {
        CHECK(cm_engine_rebuild(&r, &files, meta.data, err, errlen));
        if (cm_engine_batch_on(e)) { /* so that a killed sync finds its batches recorded */
            CHECK(cm_engine_ensure_store(e, err, errlen));
            CHECK(cm_engine_fill_vectors(e, &e->st, stats, err, errlen));
        }
    } else {
        CHECK(cm_store_vector_log_ensure(&e->st, err, errlen));
        CHECK(incremental(&r, &files, err, errlen));
        CHECK(cm_engine_fill_vectors(e, &e->st, stats, err, errlen));
    }
    bool changed = stats->files_indexed || stats->files_removed || stats->chunks_embedded;
    if (!full && changed) CHECK(cm_store_vector_log_trim(&e->st, err, errlen));
    if (changed) e->vx_stale = true; /* the next search applies the vector log */
    stat_refresh(e, &files, new_records, changed);
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory while indexing");
    e->batch_progress = NULL;
    cm_engine_lock_release(lock);
    cm_index_file_reader_release(&rd);
    cm_index_file_list_release(&files);
    cm_index_problem_list_release(&r.problems);
    cm_buf_release(&r.text);
    cm_buf_release(&r.clean);
    cm_chunk_list_release(&r.chunks);
    snap_release(e, &snap);
    cm_buf_release(&meta);
    free(stored);
    return rc;
}

/* How long memory_write waits for a running sync before it leaves the
 * written note to the next one. */
#define WRITE_INDEX_WAIT_MS 2000

/* Indexes the memory file rel that memory_write just wrote, so that a search
 * finds the note at once (its vectors follow with the next sync): under the
 * writer lock, read through the same descriptor walk as memory_get, with the
 * size and mtime of what was read. Best effort — the note is on disk either
 * way — and skipped when there is no index yet, its settings changed (the
 * next sync rebuilds it), or another writer holds the lock for long. */
void cm_engine_index_written(cm_engine *e, const char *rel)
{
    char msg[512] = "";
    int lock = -1, fd = -1;
    buf meta = BUF_INIT, name = BUF_INIT, problem = BUF_INIT;
    char *stored = NULL;
    cm_sync_stats stats = {0};
    sync_run r = {.e = e, .stats = &stats, .text = BUF_INIT, .clean = BUF_INIT};
    int busy = e->busy_ms;
    e->busy_ms = CM_MIN(busy, WRITE_INDEX_WAIT_MS);
    cm_rc rc = cm_engine_lock_acquire(e, true, &lock, msg, sizeof msg);
    e->busy_ms = busy;
    if (!rc) rc = cm_engine_ensure_store(e, msg, sizeof msg);
    if (!rc) rc = meta_json(e, &meta);
    if (!rc) rc = cm_store_meta_get(&e->st, STORE_META_KEY, &stored, msg, sizeof msg);
    if (!rc && (!stored || strcmp(stored, meta.data) != 0)) rc = CM_ENOTFOUND;
    struct stat st = {0};
    if (!rc) rc = cm_index_memfile_open(&e->cfg, rel, &fd, &st, &name, msg, sizeof msg);
    if (!rc && st.st_size > DISCOVER_MAX_FILE_BYTES) rc = CM_ETOOBIG;
    if (!rc)
        rc = cm_path_read_fd(fd, rel, (size_t)DISCOVER_MAX_FILE_BYTES, &r.text, msg, sizeof msg);
    char hash[SHA256_HEX_LEN + 1];
    mem_file f = {.rel = name.data, .source = "memory", .size = st.st_size};
    f.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (!rc) rc = cm_engine_chunk_loaded(&r, &f, hash, &problem);
    if (!rc) rc = cm_store_begin(&e->st, msg, sizeof msg);
    if (!rc) {
        rc = cm_store_file_replace(&e->st, f.rel, f.source, hash, f.mtime_ns, f.size,
                                   problem.len ? problem.data : NULL, &r.chunks, msg, sizeof msg);
        if (!rc) rc = cm_store_commit(&e->st, msg, sizeof msg);
        if (rc) cm_store_rollback(&e->st);
    }
    if (!rc && e->vx_loaded) { /* its old chunks are gone: reloaded by the next search */
        cm_engine_drop_vectors(e);
    }
    if (!rc) stat_refresh(e, NULL, false, false);
    if (rc && rc != CM_ENOTFOUND)
        cm_logf(&e->lg, CM_LOG_INFO, "%s: written; indexed by the next sync (%s)", rel, msg);
    if (fd >= 0) close(fd);
    cm_engine_lock_release(lock);
    free(stored);
    cm_buf_release(&meta);
    cm_buf_release(&name);
    cm_buf_release(&problem);
    cm_buf_release(&r.text);
    cm_buf_release(&r.clean);
    cm_chunk_list_release(&r.chunks);
    cm_index_problem_list_release(&r.problems);
}
