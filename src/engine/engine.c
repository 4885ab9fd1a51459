/*
 * engine.c — the per-agent engine behind include/clawmem.h: config, the
 * writer lock, sync (incremental or a full rebuild swapped in atomically),
 * keyword search through the ranking pipeline, memory_get and status.
 *
 * Writers serialise on an flock()ed "<index>.lock" file; readers never take
 * it and read the last committed state (WAL). A rebuild writes
 * "<index>.rebuild-<pid>" and renames it over the index, so a crash at any
 * point leaves the old index whole; the next writer removes the leftovers.
 *
 * A search's sync (CM_SYNC_NOWAIT) that finds nothing changed is read-only
 * (no lock, no transaction).
 * A watcher (cm_engine_watch) holds an flock()ed "<index>.watch" for its
 * life and keeps in it a one-line record: fresh (its last sync is done and
 * no change is pending) or pending. A search's sync (CM_SYNC_UNLESS_WATCHED)
 * skips the tree walk while that lock is held and the record says fresh;
 * the kernel drops the lock when the watcher dies, so a dead watcher is
 * never trusted. See "Freshness" in the README.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/fs.h"
#include "../base/log.h"
#include "../base/path.h"
#include "../base/sha256.h"
#include "../base/utf8.h"
#include "../net/download.h"
#include "../embed/embed.h"
#include "../config/config.h"
#include "../index/chunk.h"
#include "../index/discover.h"
#include "../index/watch.h"
#include "../search/query.h"
#include "../search/rank.h"
#include "../session/extract.h"
#include "../store/store.h"
#include "../tools/tools.h"

#define DEFAULT_BUSY_MS 10000
/* Version of the keyword text derived from chunks (CJK bigrams); part of the
 * fingerprint so that a change of derivation rebuilds the index. */
#define KEYWORD_TEXT_VERSION "cjk2"

struct cm_engine {
    cm_config cfg;
    cm_logger lg;
    store st;
    bool st_open;
    dev_t st_dev; /* identity of the index file the connection has open */
    ino_t st_ino;
    int busy_ms;
    bool allow_write;
    char provider[32], model[128];
    char *provider_note; /* why the effective provider differs from the requested one */
    /* embeddings: the provider, the in-memory vector index and its freshness */
    embed_provider prov;
    bool have_prov;
    bool fallback_used;   /* provider_note says why the fallback serves */
    char last_error[512]; /* the provider's last failure, for status */
    vec_index vx;
    bool vx_loaded;
    int64_t vx_version;
    int64_t vx_seq;                /* the vector log position vx reflects (-1: no log) */
    bool vx_stale;                 /* this engine's own sync changed vectors since */
    unsigned vx_loads, vx_updates; /* full loads; updates applied from the log */
};

/* Chunks embedded per request round during a sync. */
#define EMBED_ROUND 256

static int busy_ms_from_env(void)
{
    const char *v = getenv("CLAWMEM_BUSY_TIMEOUT_MS");
    if (!v || !*v) return DEFAULT_BUSY_MS;
    char *end;
    long ms = strtol(v, &end, 10);
    return (*end || ms < 0 || ms > 3600000) ? DEFAULT_BUSY_MS : (int)ms;
}

static void set_note(cm_engine *e, const char *msg)
{
    free(e->provider_note);
    e->provider_note = cm_strdup(msg);
    cm_logf(&e->lg, CM_LOG_WARN, "%s", msg);
}

/* Puts memorySearch.fallback in place of a provider that cannot serve (why),
 * or leaves keyword search only; the reason is recorded either way. */
static void fall_back(cm_engine *e, const char *want, const char *why)
{
    const cm_config *c = &e->cfg;
    char msg[1100];
    if (c->fallback && strcmp(c->fallback, "none") != 0 && strcmp(c->fallback, want) != 0) {
        char why2[512];
        if (embed_open(c, c->fallback, &e->prov, why2, sizeof why2) == CM_OK) {
            e->have_prov = true;
            e->fallback_used = true;
            snprintf(msg, sizeof msg, "%s; using the fallback %s", why, c->fallback);
        } else {
            snprintf(msg, sizeof msg, "%s; fallback: %s; keyword search only", why, why2);
        }
    } else {
        snprintf(msg, sizeof msg, "%s; keyword search only", why);
    }
    set_note(e, msg);
}

static void name_provider(cm_engine *e)
{
    snprintf(e->provider, sizeof e->provider, "%s", e->have_prov ? embed_name(&e->prov) : "none");
    snprintf(e->model, sizeof e->model, "%s", e->have_prov ? e->prov.model : "");
}

/* The embedding provider: memorySearch.provider, or the seeds' auto-select
 * order; memorySearch.fallback when the primary cannot be set up; none (the
 * keyword-only search) otherwise. No network is touched here, and a local
 * model is only named: provider_ready() loads it. */
static void choose_provider(cm_engine *e)
{
    const cm_config *c = &e->cfg;
    const char *want = c->provider;
    if (!strcmp(want, "auto")) want = embed_auto(c); /* NULL: no key anywhere, as QuantumClaw */
    char why[512] = "";
    if (want && strcmp(want, "none") != 0) {
        if (embed_open(c, want, &e->prov, why, sizeof why) == CM_OK)
            e->have_prov = true;
        else
            fall_back(e, want, why);
    }
    name_provider(e);
}

typedef struct download_ctx {
    cm_progress_fn fn;
    void *ctx;
    const char *name;
} download_ctx;

static int on_download(void *ctx, uint64_t done, uint64_t total)
{
    const download_ctx *d = ctx;
    cm_progress p = {.download = d->name, .download_done = done, .download_total = total};
    return d->fn ? d->fn(d->ctx, &p) : 0;
}

/* The local provider cannot serve (why): the fallback takes over. */
static void local_unavailable(cm_engine *e, const char *why)
{
    char msg[700];
    snprintf(msg, sizeof msg, "local embeddings unavailable: %s", why);
    snprintf(e->last_error, sizeof e->last_error, "%.500s", msg);
    embed_close(&e->prov);
    e->have_prov = false;
    fall_back(e, "local", msg);
    name_provider(e);
}

/* Finishes setting up a local provider: downloads its model when it is not
 * in the cache yet (a sync; a search does not wait for a download, it
 * searches keywords until the model is there), and loads it. When that fails
 * the fallback takes over for the engine's life, as in QuantumClaw; a
 * cancelled download does not count as a failure (it resumes next time). */
static void provider_ready(cm_engine *e, bool fetch, cm_progress_fn progress, void *progress_ctx)
{
    if (!e->have_prov || e->prov.kind != EMBED_LOCAL || e->prov.lm) return;
    download_ctx d = {progress, progress_ctx, e->prov.model};
    char why[600];
    cm_rc rc = embed_prepare(&e->prov, fetch, on_download, &d, why, sizeof why);
    if (rc == CM_OK || rc == CM_ECANCELED) return;
    if (rc == CM_ENOTFOUND && !fetch && !strncmp(e->prov.model, "hf:", 3)) return; /* not yet */
    local_unavailable(e, why);
}

/* For status, without loading a model: a local model whose download failed
 * lately (download.h) is not waited for; the fallback serves, as after a
 * failed sync. */
static void provider_check(cm_engine *e)
{
    if (!e->have_prov || e->prov.kind != EMBED_LOCAL || e->prov.lm) return;
    char why[600], *path = NULL;
    if (model_resolve(e->prov.model, e->prov.local_cache, false, NULL, NULL, &path, why,
                      sizeof why) == CM_EIO)
        local_unavailable(e, why);
    free(path);
}

cm_rc cm_engine_open(const cm_options *opt, cm_engine **out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    *out = NULL;
    cm_engine *e = calloc(1, sizeof *e);
    if (!e) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    cm_options none = {0};
    if (!opt) opt = &none;
    e->lg.fn = opt->log;
    e->lg.ctx = opt->log_ctx;
    e->busy_ms = busy_ms_from_env();
    e->allow_write = opt->allow_write != 0;
    cm_config_args args = {opt->agent_id, opt->workspace, opt->config_path, opt->state_dir};
    CHECK(config_load(&args, &e->lg, &e->cfg, err, errlen));
    store_remove_leftovers(e->cfg.store_path); /* of rebuilds whose process died */
    if (strcmp(e->cfg.backend, "qmd") == 0)
        cm_logf(&e->lg, CM_LOG_WARN,
                "memory.backend = \"qmd\": clawmem serves memory itself (the builtin index)");
    choose_provider(e);
out:
    if (rc) {
        cm_engine_free(e);
        return rc;
    }
    *out = e;
    return CM_OK;
}

static void close_store(cm_engine *e)
{
    if (e->st_open) store_close(&e->st);
    e->st_open = false;
    if (e->vx_loaded) vec_index_release(&e->vx);
    e->vx_loaded = false;
}

void cm_engine_free(cm_engine *e)
{
    if (!e) return;
    close_store(e);
    if (e->have_prov) embed_close(&e->prov);
    config_release(&e->cfg);
    free(e->provider_note);
    free(e);
}

/* Opens the index for reading and writing; reopens it when another process
 * swapped a rebuilt file in. CM_ENOTFOUND when there is no index yet. */
static cm_rc ensure_store(cm_engine *e, char *err, size_t errlen)
{
    struct stat st;
    if (stat(e->cfg.store_path, &st) < 0) {
        close_store(e);
        char clip[FS_CLIP_MAX + 1];
        return cm_seterr(err, errlen, CM_ENOTFOUND,
                         "index %s does not exist yet (run `clawmem index`)",
                         fs_clip(e->cfg.store_path, clip));
    }
    if (e->st_open && st.st_dev == e->st_dev && st.st_ino == e->st_ino) return CM_OK;
    close_store(e);
    cm_rc rc =
        store_open(&e->st, e->cfg.store_path, e->cfg.fts_tokenizer, 0, e->busy_ms, err, errlen);
    if (rc) return rc;
    e->st_open = true;
    e->st_dev = st.st_dev;
    e->st_ino = st.st_ino;
    return CM_OK;
}

/* CM_ENOTFOUND when the configured workspace is not a directory: search, get
 * and status then fail rather than answer from an index of another workspace. */
static cm_rc workspace_exists(const cm_engine *e, char *err, size_t errlen)
{
    struct stat st;
    if (stat(e->cfg.workspace, &st) == 0 && S_ISDIR(st.st_mode)) return CM_OK;
    return cm_seterr(err, errlen, CM_ENOTFOUND,
                     "workspace %s does not exist (set agents.defaults.workspace or --workspace)",
                     e->cfg.workspace);
}

/* CM_ENOTFOUND when the open index records another workspace in its meta
 * row (an index from before that field is trusted: the next sync rebuilds it
 * anyway, its fingerprint having changed). */
static cm_rc index_workspace_matches(cm_engine *e, char *err, size_t errlen)
{
    char *stored = NULL;
    cm_rc rc = store_meta_get(&e->st, STORE_META_KEY, &stored, err, errlen);
    json_t *meta = rc || !stored ? NULL : json_loads(stored, 0, NULL);
    const char *ws = json_string_value(json_object_get(meta, "workspace"));
    if (!rc && ws && strcmp(ws, e->cfg.workspace) != 0)
        rc = cm_seterr(err, errlen, CM_ENOTFOUND,
                       "the index %s holds workspace %s, not %s (run `clawmem index`)",
                       e->cfg.store_path, ws, e->cfg.workspace);
    json_decref(meta);
    free(stored);
    return rc;
}

/* ---- writer lock ------------------------------------------------------- */

static cm_rc lock_acquire(cm_engine *e, bool wait, int *fd_out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf p = BUF_INIT;
    char *dir = fs_dirname(e->cfg.store_path);
    int fd = -1;
    if (!dir) CHECK(CM_ENOMEM);
    CHECK(fs_mkdirs(dir, err, errlen));
    CHECK(buf_printf(&p, "%s.lock", e->cfg.store_path));
    fd = open(p.data, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600); /* a link: not truncated */
    if (fd < 0 && errno == ELOOP) FAIL(CM_EIO, "%s is a symbolic link; remove it", p.data);
    if (fd < 0) FAIL(CM_EIO, "%s: %s", p.data, strerror(errno));
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) break;
        if (errno != EWOULDBLOCK && errno != EINTR)
            FAIL(CM_EIO, "lock %s: %s", p.data, strerror(errno));
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long waited = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (!wait || waited >= e->busy_ms) {
            char pid[32] = "";
            ssize_t r = pread(fd, pid, sizeof pid - 1, 0);
            pid[r > 0 ? r : 0] = 0;
            pid[strcspn(pid, "\n")] = 0;
            FAIL(CM_EBUSY, "index %s is being updated by another process%s%s%s; try again later",
                 e->cfg.store_path, *pid ? " (pid " : "", pid, *pid ? ")" : "");
        }
        usleep(20000);
    }
    /* The holder's pid is only a courtesy for the busy message above. */
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) == 0) {
        ssize_t w = pwrite(fd, pid, (size_t)n, 0);
        (void)w;
    }
    *fd_out = fd;
    fd = -1;
out:
    if (fd >= 0) close(fd);
    free(dir);
    buf_release(&p);
    return rc;
}

static void lock_release(int fd)
{
    if (fd < 0) return;
    int r = ftruncate(fd, 0); /* a stale pid would only mislead a busy message */
    (void)r;
    flock(fd, LOCK_UN);
    close(fd);
}

/* ---- sync -------------------------------------------------------------- */

static cm_rc count_dirty_in(cm_engine *e, const file_list *files, size_t *dirty, char *err,
                            size_t errlen);

/* ---- the watcher's liveness record -------------------------------------- */

#define WATCH_RECORD_LEN 128

/* What the record vouches for: this workspace indexed with these settings
 * (the fields of meta_json's fingerprint, the extra paths themselves rather
 * than their hash), as 16 hex digits of a 64-bit FNV-1a: no SHA-256 here,
 * whose first use costs a search process about a millisecond of libcrypto
 * set-up. */
static void watch_identity(const cm_engine *e, char id[SHA256_HEX_LEN + 1])
{
    const cm_config *c = &e->cfg;
    buf b = BUF_INIT;
    cm_rc rc = buf_printf(&b, "%s\n%s\n%s\n%s\n%d %d %d %s " KEYWORD_TEXT_VERSION "\n",
                          c->workspace, e->provider, e->model, e->have_prov ? e->prov.key_hash : "",
                          c->chunk_tokens, c->chunk_overlap, c->output_dims, c->fts_tokenizer);
    for (size_t i = 0; i < c->sources.n && !rc; i++)
        rc = buf_printf(&b, "s %s\n", c->sources.v[i]);
    for (size_t i = 0; i < c->extra_paths.n && !rc; i++)
        rc = buf_printf(&b, "x %s\n", c->extra_paths.v[i]);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; !rc && i < b.len; i++)
        h = (h ^ (unsigned char)b.data[i]) * 0x100000001b3ull;
    snprintf(id, SHA256_HEX_LEN + 1, rc ? "unknown" : "%016llx", (unsigned long long)h);
    buf_release(&b);
}

/* "<index>.watch"; the caller frees. */
static char *watch_path(const cm_engine *e)
{
    buf p = BUF_INIT;
    if (buf_printf(&p, "%s.watch", e->cfg.store_path)) {
        buf_release(&p);
        return NULL;
    }
    return buf_detach(&p);
}

/* The record, fixed length so a reader never sees a mix of two: state,
 * sequence, pid and the identity (workspace and index fingerprint), then
 * "end". */
static void watch_publish(const cm_engine *e, int fd, const char *state, uint64_t seq)
{
    if (fd < 0) return;
    char ws[SHA256_HEX_LEN + 1], rec[WATCH_RECORD_LEN + 1];
    watch_identity(e, ws);
    int n = snprintf(rec, sizeof rec, "clawmem-watch 1 %-7s %llu %ld %.16s end", state,
                     (unsigned long long)seq, (long)getpid(), ws);
    if (n < 0) return;
    memset(rec + n, ' ', (size_t)(WATCH_RECORD_LEN - 1 - n));
    rec[WATCH_RECORD_LEN - 1] = '\n';
    ssize_t w = pwrite(fd, rec, WATCH_RECORD_LEN, 0);
    (void)w;
}

/* Opens and locks the record file; -1 when another watcher has it (that one
 * publishes) or it cannot be created. */
static int watch_claim(const cm_engine *e)
{
    char *p = watch_path(e);
    int fd = p ? open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600) : -1;
    free(p);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void watch_unclaim(const cm_engine *e, int fd)
{
    if (fd < 0) return;
    watch_publish(e, fd, "stopped", 0);
    flock(fd, LOCK_UN);
    close(fd);
}

/* True when a live watcher keeps this index fresh for this workspace and
 * fingerprint: its lock is held (a shared lock cannot be had) and its record
 * says fresh. */
static bool watched_fresh(const cm_engine *e)
{
    char *p = watch_path(e);
    int fd = p ? open(p, O_RDONLY | O_CLOEXEC) : -1;
    free(p);
    if (fd < 0) return false;
    bool fresh = false;
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        flock(fd, LOCK_UN); /* nobody holds it: no live watcher */
    } else if (errno == EWOULDBLOCK) {
        char rec[WATCH_RECORD_LEN + 1], ws[SHA256_HEX_LEN + 1], want[64];
        ssize_t r = pread(fd, rec, WATCH_RECORD_LEN, 0);
        watch_identity(e, ws);
        snprintf(want, sizeof want, " %.16s end", ws);
        if (r == WATCH_RECORD_LEN) {
            rec[r] = 0;
            fresh = !strncmp(rec, "clawmem-watch 1 fresh ", 22) && strstr(rec, want) != NULL;
        }
    }
    close(fd);
    return fresh;
}

/* The read-only no-change check: the index exists with this fingerprint,
 * every discovered file matches its row (size and mtime), none is gone, no
 * problem is recorded or found, and no chunk waits for a vector. Then a
 * sync would write nothing, and it is skipped without the writer lock. */
static bool nothing_changed(cm_engine *e, const file_list *files, const problem_list *pl,
                            const char *meta)
{
    char msg[512], *stored = NULL, *prev = NULL;
    size_t dirty = 1;
    bool same = false;
    if (pl->n || ensure_store(e, msg, sizeof msg) != CM_OK) return false;
    if (store_meta_get(&e->st, STORE_META_KEY, &stored, msg, sizeof msg) != CM_OK) goto out;
    if (!stored || strcmp(stored, meta) != 0) goto out;
    if (store_meta_get(&e->st, STORE_PROBLEMS_KEY, &prev, msg, sizeof msg) != CM_OK) goto out;
    if (prev && strcmp(prev, "[]") != 0) goto out;
    if (count_dirty_in(e, files, &dirty, msg, sizeof msg) != CM_OK || dirty) goto out;
    if (e->have_prov) {
        pending_chunk *pc = NULL;
        size_t n = 0;
        if (store_pending_vectors(&e->st, 0, 1, &pc, &n, msg, sizeof msg) != CM_OK) goto out;
        pending_release(pc, n);
        if (n) goto out;
    }
    same = true;
out:
    free(stored);
    free(prev);
    return same;
}

/* The fingerprint: a change in any field means the whole index is rebuilt. */
static cm_rc meta_json(const cm_engine *e, buf *out)
{
    const cm_config *c = &e->cfg;
    buf scope = BUF_INIT;
    cm_rc rc = CM_OK;
    for (size_t i = 0; i < c->extra_paths.n && !rc; i++)
        rc = buf_printf(&scope, "%s\n", c->extra_paths.v[i]);
    char scope_hash[SHA256_HEX_LEN + 1];
    sha256_hex(scope.data ? scope.data : "", scope.len, scope_hash);
    buf_release(&scope);
    /* version 2: chunks within their budget, no byte-order mark (chunk.h) */
    if (!rc)
        rc =
            buf_printf(out,
                       "{\"version\":2,\"provider\":\"%s\",\"model\":\"%s\",\"providerKey\":\"%s\","
                       "\"sources\":[",
                       e->provider, e->model, e->have_prov ? e->prov.key_hash : "");
    for (size_t i = 0; i < c->sources.n && !rc; i++)
        rc = buf_printf(out, "%s\"%s\"", i ? "," : "", c->sources.v[i]);
    if (!rc)
        rc = buf_printf(out,
                        "],\"scopeHash\":\"%s\",\"chunkTokens\":%d,\"chunkOverlap\":%d,"
                        "\"vectorDims\":%d,\"ftsTokenizer\":\"%s%s\",\"workspace\":",
                        scope_hash, c->chunk_tokens, c->chunk_overlap, c->output_dims,
                        c->fts_tokenizer,
                        strcmp(c->fts_tokenizer, "trigram") == 0 ? "" : "+" KEYWORD_TEXT_VERSION);
    /* the workspace the index holds: another one rebuilds it (and search
     * refuses it until then, see index_workspace_matches) */
    if (!rc) rc = buf_add_json_str(out, c->workspace, strlen(c->workspace));
    if (!rc) rc = buf_addc(out, '}');
    return rc;
}

typedef struct sync_run {
    cm_engine *e;
    cm_progress_fn progress;
    void *pctx;
    cm_progress prog;
    cm_sync_stats *stats;
    problem_list problems; /* transient: unreadable or oversized files */
    buf text, clean;
    chunk_list chunks;
    file_reader *rd;        /* of the thread that reads (the rebuild's reader has its own) */
    int64_t size, mtime_ns; /* of the file load_file read, from its descriptor */
} sync_run;

static cm_rc chunk_loaded(sync_run *r, const mem_file *f, char hash[SHA256_HEX_LEN + 1],
                          buf *problem);
static cm_rc load_session(sync_run *r, const mem_file *f, char hash[SHA256_HEX_LEN + 1],
                          buf *problem);

/* Reads, hashes, checks and chunks one file into r->chunks; r->size and
 * r->mtime_ns receive the fstat of the descriptor that was read (never a stat
 * by name). problem receives why the file is indexed imperfectly (binary: no
 * chunks; invalid UTF-8: chunked with U+FFFD), or stays empty. An unreadable
 * file is CM_EIO and is recorded as a transient problem of this sync. */
static cm_rc load_file(sync_run *r, const mem_file *f, char hash[SHA256_HEX_LEN + 1], buf *problem,
                       char *err, size_t errlen)
{
    buf_reset(&r->text);
    buf_reset(&r->clean);
    buf_reset(problem);
    chunk_list_release(&r->chunks);
    char why[512];
    struct stat st;
    cm_rc rc =
        file_reader_read(r->rd, f, (size_t)DISCOVER_MAX_FILE_BYTES, &r->text, &st, why, sizeof why);
    if (rc == CM_ENOMEM) return cm_seterr(err, errlen, rc, "out of memory reading %s", f->rel);
    if (rc) {
        if (problem_add(&r->problems, f->rel, "cannot read: %s", why)) return CM_ENOMEM;
        cm_logf(&r->e->lg, CM_LOG_WARN, "%s: cannot read: %s", f->rel, why);
        return CM_EIO;
    }
    r->size = st.st_size;
    r->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (strcmp(f->source, "sessions") == 0) return load_session(r, f, hash, problem);
    return chunk_loaded(r, f, hash, problem);
}

/* A session transcript (r->text holds its JSONL): what QuantumClaw indexes
 * of it — "User: …" / "Assistant: …" lines, secrets redacted — chunked, and
 * each chunk's lines mapped back to the transcript's JSONL lines. */
static cm_rc load_session(sync_run *r, const mem_file *f, char hash[SHA256_HEX_LEN + 1],
                          buf *problem)
{
    session_doc d;
    cm_rc rc = session_extract(r->text.data ? r->text.data : "", r->text.len, &d);
    if (rc) return rc;
    buf_reset(&r->text);
    rc = buf_add(&r->text, d.text.data, d.text.len);
    if (!rc) rc = chunk_loaded(r, f, hash, problem);
    for (size_t i = 0; !rc && i < r->chunks.n; i++) {
        chunk *c = &r->chunks.v[i];
        /* its time, for temporal decay: the newest message in it (else the file's) */
        int64_t newest = 0;
        for (int l = c->start_line; l <= c->end_line && l >= 1 && (size_t)l <= d.n; l++)
            newest = CM_MAX(newest, d.ts[l - 1]);
        c->time_s = newest > 0 ? newest / 1000 : r->mtime_ns / 1000000000;
        if (c->start_line >= 1 && (size_t)c->start_line <= d.n)
            c->start_line = d.line_map[c->start_line - 1];
        if (c->end_line >= 1 && (size_t)c->end_line <= d.n)
            c->end_line = d.line_map[c->end_line - 1];
    }
    if (!rc) snprintf(hash, SHA256_HEX_LEN + 1, "%s", d.hash); /* content and line map */
    session_doc_release(&d);
    return rc;
}

/* The part of load_file after the read: r->text holds the file's bytes. */
static cm_rc chunk_loaded(sync_run *r, const mem_file *f, char hash[SHA256_HEX_LEN + 1],
                          buf *problem)
{
    cm_rc rc;
    const char *s = r->text.data ? r->text.data : "";
    size_t n = r->text.len;
    r->stats->bytes_read += n;
    sha256_hex(s, n, hash);
    const char *nul = memchr(s, 0, n);
    if (nul) {
        cm_logf(&r->e->lg, CM_LOG_WARN, "%s: binary file (NUL byte at offset %zu), not indexed",
                f->rel, (size_t)(nul - s));
        return buf_printf(problem, "binary file (NUL byte at offset %zu); not indexed",
                          (size_t)(nul - s));
    }
    size_t good = utf8_valid_prefix(s, n);
    if (good != n) {
        cm_logf(&r->e->lg, CM_LOG_WARN, "%s: invalid UTF-8 at byte %zu; indexed with U+FFFD",
                f->rel, good);
        if ((rc = buf_printf(
                 problem, "invalid UTF-8 at byte %zu; indexed with replacement characters", good)))
            return rc;
        if ((rc = utf8_repair(&r->clean, s, n))) return rc;
        s = r->clean.data;
        n = r->clean.len;
    }
    return chunk_text(s, n, r->e->cfg.chunk_tokens, r->e->cfg.chunk_overlap, &r->chunks);
}

/* Counts a file as done and asks the caller whether to go on. */
static cm_rc report(sync_run *r, const mem_file *f, char *err, size_t errlen)
{
    r->prog.files_done++;
    r->prog.bytes_done += (uint64_t)f->size;
    if (r->progress && r->progress(r->pctx, &r->prog))
        return cm_seterr(err, errlen, CM_ECANCELED, "sync cancelled");
    return CM_OK;
}

/* Writes the transient problems of this sync into the meta table. */
static cm_rc save_problems(store *st, const problem_list *pl, char *err, size_t errlen)
{
    buf b = BUF_INIT;
    cm_rc rc = buf_addc(&b, '[');
    for (size_t i = 0; i < pl->n && !rc; i++) {
        if (i) rc = buf_addc(&b, ',');
        if (!rc) rc = buf_adds(&b, "{\"path\":");
        if (!rc) rc = buf_add_json_str(&b, pl->v[i].path, strlen(pl->v[i].path));
        if (!rc) rc = buf_adds(&b, ",\"problem\":");
        if (!rc) rc = buf_add_json_str(&b, pl->v[i].what, strlen(pl->v[i].what));
        if (!rc) rc = buf_addc(&b, '}');
    }
    if (!rc) rc = buf_addc(&b, ']');
    if (!rc) rc = store_meta_set(st, STORE_PROBLEMS_KEY, b.data, err, errlen);
    buf_release(&b);
    return rc;
}

#define VECTOR_DIMS_KEY "clawmem_vector_dims"

/* Gives every chunk without a vector one: from the embedding cache when the
 * same text was embedded before, else from the provider, EMBED_ROUND chunks
 * per round, each round committed on its own. A provider failure stops the
 * filling (the keyword index is complete either way; the next sync resumes)
 * and is recorded for status. */
static cm_rc fill_vectors(cm_engine *e, store *st, cm_sync_stats *stats, char *err, size_t errlen)
{
    if (!e->have_prov) return CM_OK;
    embed_provider *p = &e->prov;
    const cm_config *c = &e->cfg;
    const char *name = embed_name(p);
    cm_rc rc = CM_OK;
    int64_t after = 0;
    pending_chunk *pc = NULL;
    size_t n = 0;
    float **vecs = NULL, *fresh = NULL;
    const char **texts = NULL;
    size_t *miss = NULL;
    for (;;) {
        CHECK(store_pending_vectors(st, after, EMBED_ROUND, &pc, &n, err, errlen));
        if (n == 0) break;
        after = pc[n - 1].id;
        vecs = calloc(n, sizeof *vecs);
        texts = calloc(n, sizeof *texts);
        miss = calloc(n, sizeof *miss);
        if (!vecs || !texts || !miss) CHECK(CM_ENOMEM);
        size_t nmiss = 0;
        for (size_t i = 0; i < n; i++) {
            int d = 0;
            if (c->cache_enabled)
                CHECK(store_cache_get(st, name, p->model, p->key_hash, pc[i].hash, &vecs[i], &d,
                                      err, errlen));
            if (vecs[i] && p->dims && d != p->dims) { /* another size: not this model's */
                free(vecs[i]);
                vecs[i] = NULL;
            }
            if (vecs[i]) {
                if (!p->dims) p->dims = d;
                stats->cache_hits++;
            } else {
                texts[nmiss] = pc[i].text;
                miss[nmiss++] = i;
            }
        }
        bool failed = false;
        if (nmiss) {
            char msg[512];
            if (embed_documents(p, texts, nmiss, &fresh, msg, sizeof msg) != CM_OK) {
                snprintf(e->last_error, sizeof e->last_error, "%s", msg);
                cm_logf(&e->lg, CM_LOG_WARN, "%s (vectors will be completed by a later sync)", msg);
                failed = true;
                nmiss = 0;
            }
        }
        CHECK(store_begin(st, err, errlen));
        for (size_t i = 0; i < n; i++) {
            if (!vecs[i]) continue;
            rc = store_vector_put(st, pc[i].id, vecs[i], p->dims, err, errlen);
            if (rc) break;
        }
        for (size_t j = 0; !rc && j < nmiss; j++) {
            float *v = fresh + j * (size_t)p->dims;
            bool zero = true;
            for (int d = 0; d < p->dims && zero; d++)
                zero = v[d] == 0;
            /* an all-zero vector cannot be searched: a row of 0 dimensions marks it done */
            rc = store_vector_put(st, pc[miss[j]].id, v, zero ? 0 : p->dims, err, errlen);
            if (!rc && !zero && c->cache_enabled)
                rc = store_cache_put(st, name, p->model, p->key_hash, pc[miss[j]].hash, v, p->dims,
                                     err, errlen);
        }
        if (!rc) rc = store_commit(st, err, errlen);
        if (rc) store_rollback(st);
        CHECK(rc);
        stats->chunks_embedded += nmiss; /* counted once committed */
        for (size_t i = 0; i < n; i++)
            free(vecs[i]);
        free(vecs);
        free(texts);
        free(miss);
        free(fresh);
        vecs = NULL;
        texts = NULL;
        miss = NULL;
        fresh = NULL;
        pending_release(pc, n);
        pc = NULL;
        if (failed) break;
    }
    if (p->dims) {
        char d[32];
        snprintf(d, sizeof d, "%d", p->dims);
        CHECK(store_meta_set(st, VECTOR_DIMS_KEY, d, err, errlen));
    }
    if (c->cache_enabled) CHECK(store_cache_trim(st, c->cache_max_entries, err, errlen));
out:
    for (size_t i = 0; vecs && i < n; i++)
        free(vecs[i]);
    free(vecs);
    free(texts);
    free(miss);
    free(fresh);
    pending_release(pc, n);
    return rc;
}

/* ---- the rebuild's reader thread ---------------------------------------- */

/* While the single writer puts file i into the rebuild, a reader thread
 * reads, hashes and chunks the files after it, up to PIPE_SLOTS ahead. Each
 * slot is a private sync_run for load_file (own buffers, problems and
 * stats), merged into the real one in file order by the writer. */
#define PIPE_SLOTS     32
#define PIPE_MIN_FILES 64 /* fewer files: no thread */

typedef struct pipe_slot {
    sync_run r;
    cm_sync_stats stats;
    cm_rc rc;
    char hash[SHA256_HEX_LEN + 1];
    buf problem;
    char err[512];
} pipe_slot;

typedef struct pipeline {
    const file_list *files;
    file_reader rd; /* the reader thread's */
    pipe_slot slot[PIPE_SLOTS];
    size_t produced, consumed;
    bool stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} pipeline;

static void *pipe_reader(void *arg)
{
    pipeline *p = arg;
    for (size_t i = 0; i < p->files->n; i++) {
        pthread_mutex_lock(&p->mu);
        while (i - p->consumed >= PIPE_SLOTS && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        bool stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop) break;
        pipe_slot *s = &p->slot[i % PIPE_SLOTS];
        memset(&s->stats, 0, sizeof s->stats);
        problem_list_release(&s->r.problems);
        s->rc = load_file(&s->r, &p->files->v[i], s->hash, &s->problem, s->err, sizeof s->err);
        pthread_mutex_lock(&p->mu);
        p->produced = i + 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    return NULL;
}

/* Waits for file i's slot and merges its problems and bytes into r. */
static pipe_slot *pipe_take(pipeline *p, sync_run *r, size_t i)
{
    pthread_mutex_lock(&p->mu);
    while (p->produced <= i)
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    pipe_slot *s = &p->slot[i % PIPE_SLOTS];
    r->stats->bytes_read += s->stats.bytes_read;
    for (size_t j = 0; j < s->r.problems.n && s->rc != CM_ENOMEM; j++)
        if (problem_add(&r->problems, s->r.problems.v[j].path, "%s", s->r.problems.v[j].what))
            s->rc = CM_ENOMEM;
    return s;
}

static void pipe_done(pipeline *p, size_t i)
{
    pthread_mutex_lock(&p->mu);
    p->consumed = i + 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void pipe_release(pipeline *p)
{
    for (size_t i = 0; i < PIPE_SLOTS; i++) {
        pipe_slot *s = &p->slot[i];
        problem_list_release(&s->r.problems);
        buf_release(&s->r.text);
        buf_release(&s->r.clean);
        chunk_list_release(&s->r.chunks);
        buf_release(&s->problem);
    }
    file_reader_release(&p->rd);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
}

/* Builds a fresh index in a temporary file and swaps it in. */
static cm_rc rebuild(sync_run *r, const file_list *files, const char *meta, char *err,
                     size_t errlen)
{
    cm_engine *e = r->e;
    cm_rc rc = CM_OK;
    store tmp;
    bool tmp_open = false, reader = false;
    buf problem = BUF_INIT;
    pipeline *pl = NULL;
    pthread_t reader_tid;
    char *path = store_rebuild_path(e->cfg.store_path);
    if (!path) CHECK(CM_ENOMEM);
    store_remove_leftovers(e->cfg.store_path);
    CHECK(store_open(&tmp, path, e->cfg.fts_tokenizer, STORE_CREATE | STORE_BULK, e->busy_ms, err,
                     errlen));
    tmp_open = true;
    CHECK(store_begin(&tmp, err, errlen));
    if (files->n >= PIPE_MIN_FILES && !(pl = calloc(1, sizeof *pl))) CHECK(CM_ENOMEM);
    if (pl) {
        pl->files = files;
        file_reader_init(&pl->rd, files);
        pthread_mutex_init(&pl->mu, NULL);
        pthread_cond_init(&pl->cv, NULL);
        for (size_t i = 0; i < PIPE_SLOTS; i++) {
            pipe_slot *s = &pl->slot[i];
            s->r = (sync_run){e,        NULL,     NULL, {0},     &s->stats, {0},
                              BUF_INIT, BUF_INIT, {0},  &pl->rd, 0,         0};
            buf_init(&s->problem, 0);
        }
        reader = pthread_create(&reader_tid, NULL, pipe_reader, pl) == 0;
        if (!reader) { /* no thread: read inline */
            pipe_release(pl);
            free(pl);
            pl = NULL;
        }
    }
    for (size_t i = 0; i < files->n; i++) {
        const mem_file *f = &files->v[i];
        char hash[SHA256_HEX_LEN + 1];
        const char *why = NULL;
        chunk_list *chunks = &r->chunks;
        pipe_slot *s = NULL;
        if (pl) {
            s = pipe_take(pl, r, i);
            rc = s->rc;
            if (rc && rc != CM_EIO) FAIL(rc, "%s", s->err);
            memcpy(hash, s->hash, sizeof hash);
            why = s->problem.len ? s->problem.data : NULL;
            chunks = &s->r.chunks;
        } else {
            rc = load_file(r, f, hash, &problem, err, errlen);
            why = problem.len ? problem.data : NULL;
        }
        if (rc == CM_EIO) {
            rc = CM_OK;
            r->stats->files_skipped++;
            if (pl) pipe_done(pl, i);
            CHECK(report(r, f, err, errlen));
            continue;
        }
        CHECK(rc);
        const sync_run *lr = pl ? &s->r : r; /* size and mtime of what was read */
        CHECK(store_file_replace(&tmp, f->rel, f->source, hash, lr->mtime_ns, lr->size, why, chunks,
                                 err, errlen));
        r->stats->files_indexed++;
        r->stats->chunks_written += chunks->n;
        if (pl) pipe_done(pl, i);
        CHECK(report(r, f, err, errlen));
    }
    if (pl) { /* the reader has finished: every file was taken */
        pthread_join(reader_tid, NULL);
        reader = false;
    }
    CHECK(store_meta_set(&tmp, STORE_META_KEY, meta, err, errlen));
    CHECK(save_problems(&tmp, &r->problems, err, errlen));
    CHECK(store_commit(&tmp, err, errlen));
    /* Vectors before the swap, reusing the old index's embedding cache. */
    if (e->have_prov) {
        if (e->cfg.cache_enabled) CHECK(store_cache_import(&tmp, e->cfg.store_path, err, errlen));
        CHECK(fill_vectors(e, &tmp, r->stats, err, errlen));
    }
    CHECK(store_vector_log_ensure(&tmp, err, errlen)); /* empty: readers load the new file whole */
    /* In WAL mode before the swap: a reader that opens the new index right
     * away must not find it in rollback mode (changing it needs exclusivity),
     * and its first reader writes nothing. */
    CHECK(store_wal(&tmp, err, errlen));
    store_close(&tmp);
    tmp_open = false;
    close_store(e);
    CHECK(store_swap(path, e->cfg.store_path, err, errlen));
    r->stats->rebuilt = 1;
out:
    if (reader) { /* stopped early: release the reader and wait for it */
        pthread_mutex_lock(&pl->mu);
        pl->stop = true;
        pthread_cond_broadcast(&pl->cv);
        pthread_mutex_unlock(&pl->mu);
        pthread_join(reader_tid, NULL);
    }
    if (pl) {
        pipe_release(pl);
        free(pl);
    }
    if (tmp_open) {
        store_rollback(&tmp);
        store_close(&tmp);
    }
    if (rc && path) unlink(path);
    free(path);
    buf_release(&problem);
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
static bool session_below_delta(sync_run *r, const mem_file *f, const stored_file *sf)
{
    if (!sf || strcmp(f->source, "sessions") != 0 || f->size < sf->size) return false;
    const cm_config *c = &r->e->cfg;
    if (f->size - sf->size >= c->sessions_delta_bytes) return false;
    buf b = BUF_INIT;
    char why[256];
    struct stat st;
    bool below = false;
    if (file_reader_read(r->rd, f, (size_t)DISCOVER_MAX_FILE_BYTES, &b, &st, why, sizeof why) ==
            CM_OK &&
        (int64_t)b.len >= sf->size) {
        long lines = 0;
        for (size_t i = (size_t)sf->size; i < b.len; i++)
            lines += b.data[i] == '\n';
        below = lines < c->sessions_delta_messages;
    }
    buf_release(&b);
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
    CHECK(store_files_load(st, &old, err, errlen));
    CHECK(pair_files(files, &old, &match, &kept));
    for (size_t i = 0; i < files->n; i++) {
        const mem_file *f = &files->v[i];
        const stored_file *sf = match[i];
        if ((sf && sf->size == f->size && sf->mtime_ns == f->mtime_ns) ||
            session_below_delta(r, f, sf)) {
            r->stats->files_unchanged++;
            CHECK(report(r, f, err, errlen));
            continue;
        }
        char hash[SHA256_HEX_LEN + 1];
        rc = load_file(r, f, hash, &problem, err, errlen);
        if (rc == CM_EIO) { /* keep what the index has; retried next sync */
            rc = CM_OK;
            r->stats->files_skipped++;
            CHECK(report(r, f, err, errlen));
            continue;
        }
        CHECK(rc);
        CHECK(store_begin(st, err, errlen));
        if (sf && strcmp(sf->hash, hash) == 0) {
            rc = store_file_touch(st, f->rel, r->mtime_ns, r->size, err, errlen);
            r->stats->files_unchanged++;
        } else {
            rc = store_file_replace(st, f->rel, f->source, hash, r->mtime_ns, r->size,
                                    problem.len ? problem.data : NULL, &r->chunks, err, errlen);
            r->stats->files_indexed++;
            r->stats->chunks_written += r->chunks.n;
        }
        if (!rc) rc = store_commit(st, err, errlen);
        if (rc) store_rollback(st);
        CHECK(rc);
        CHECK(report(r, f, err, errlen));
    }
    /* Files gone from disk. Unreadable files are still listed by discovery,
     * so they are not removed. */
    bool in_tx = false;
    for (size_t i = 0; i < old.n; i++) {
        if (kept[i]) continue;
        if (!in_tx) CHECK(store_begin(st, err, errlen));
        in_tx = true;
        CHECK(store_file_delete(st, old.v[i].path, err, errlen));
        r->stats->files_removed++;
    }
    /* Record this sync's transient problems (rewritten only when there are
     * some now or were some before, so a no-op sync writes nothing). */
    char *prev = NULL;
    CHECK(store_meta_get(st, STORE_PROBLEMS_KEY, &prev, err, errlen));
    if (r->problems.n || (prev && strcmp(prev, "[]") != 0) || in_tx) {
        if (!in_tx) rc = store_begin(st, err, errlen);
        in_tx = true;
        if (!rc) rc = save_problems(st, &r->problems, err, errlen);
    }
    free(prev);
    CHECK(rc);
    if (in_tx) {
        in_tx = false;
        CHECK(store_commit(st, err, errlen));
    }
out:
    if (rc) store_rollback(st);
    stored_files_release(&old);
    free(match);
    free(kept);
    buf_release(&problem);
    return rc;
}

cm_rc cm_engine_sync(cm_engine *e, unsigned flags, cm_progress_fn progress, void *progress_ctx,
                     cm_sync_stats *stats, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    int lock = -1;
    file_list files = {0};
    buf meta = BUF_INIT;
    char *stored = NULL;
    cm_sync_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    file_reader rd;
    file_reader_init(&rd, &files);
    sync_run r = {e, progress, progress_ctx, {0}, stats, {0}, BUF_INIT, BUF_INIT, {0}, &rd, 0, 0};
    struct stat st;
    char clip[FS_CLIP_MAX + 1];
    if (stat(e->cfg.workspace, &st) < 0 || !S_ISDIR(st.st_mode))
        FAIL(CM_ENOTFOUND,
             "workspace %s does not exist (set agents.defaults.workspace or --workspace)",
             fs_clip(e->cfg.workspace, clip));
    if ((flags & CM_SYNC_UNLESS_WATCHED) && !(flags & CM_SYNC_FORCE) && watched_fresh(e))
        goto out;                                    /* a live watcher keeps the index fresh */
    provider_ready(e, true, progress, progress_ctx); /* before the lock: a download takes a while */
    CHECK(discover_files(&e->cfg, &files, &r.problems));
    CHECK(meta_json(e, &meta));
    /* a search's or a watcher's sync (NOWAIT) reads before it locks; an
     * explicit index waits for the writer lock as before */
    if ((flags & CM_SYNC_NOWAIT) && !(flags & CM_SYNC_FORCE) &&
        nothing_changed(e, &files, &r.problems, meta.data)) {
        stats->files_seen = stats->files_unchanged = files.n;
        goto out;
    }
    CHECK(lock_acquire(e, !(flags & CM_SYNC_NOWAIT), &lock, err, errlen));
    store_remove_leftovers(e->cfg.store_path);
    for (size_t i = 0; i < r.problems.n; i++)
        cm_logf(&e->lg, CM_LOG_WARN, "%s: %s", r.problems.v[i].path, r.problems.v[i].what);
    stats->files_seen = files.n;
    r.prog.files_total = files.n;
    r.prog.bytes_total = files.total_bytes;

    bool full = (flags & CM_SYNC_FORCE) != 0;
    if (!full) {
        rc = ensure_store(e, err, errlen);
        if (rc == CM_ENOTFOUND) {
            full = true;
            rc = CM_OK;
        }
        CHECK(rc);
    }
    if (!full) {
        CHECK(store_meta_get(&e->st, STORE_META_KEY, &stored, err, errlen));
        if (!stored || strcmp(stored, meta.data) != 0) {
            if (stored)
                cm_logf(&e->lg, CM_LOG_INFO, "index settings changed; rebuilding the index");
            full = true;
        }
    }
    if (full) {
        CHECK(rebuild(&r, &files, meta.data, err, errlen));
    } else {
        CHECK(store_vector_log_ensure(&e->st, err, errlen));
        CHECK(incremental(&r, &files, err, errlen));
        CHECK(fill_vectors(e, &e->st, stats, err, errlen));
    }
    bool changed = stats->files_indexed || stats->files_removed || stats->chunks_embedded;
    if (!full && changed) CHECK(store_vector_log_trim(&e->st, err, errlen));
    if (e->st_open && changed) store_checkpoint(&e->st);
    if (changed) e->vx_stale = true; /* the next search applies the vector log */
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory while indexing");
    lock_release(lock);
    file_reader_release(&rd);
    file_list_release(&files);
    problem_list_release(&r.problems);
    buf_release(&r.text);
    buf_release(&r.clean);
    chunk_list_release(&r.chunks);
    buf_release(&meta);
    free(stored);
    return rc;
}

/* ---- tools ------------------------------------------------------------- */

typedef struct expand_ctx {
    store *st;
    char *err;
    size_t errlen;
} expand_ctx;

/* Short terms of a trigram query: the index's trigrams that start with them. */
static cm_rc expand_trigram(void *ctx, const char *term, size_t len, buf *out)
{
    expand_ctx *x = ctx;
    return store_trigram_terms(x->st, term, len, out, x->err, x->errlen);
}

static cm_rc keyword_hits(cm_engine *e, const char *query, int limit, fts_hits *hits, char *err,
                          size_t errlen)
{
    buf match = BUF_INIT;
    size_t ntok = 0;
    query_expand_fn x = e->st.trigram ? expand_trigram : NULL;
    expand_ctx xc = {&e->st, err, errlen};
    cm_rc rc =
        query_build_ex(query, strlen(query), e->st.trigram, QUERY_AND, x, &xc, &match, &ntok);
    if (!rc && match.len) rc = store_fts_search(&e->st, match.data, limit, hits, err, errlen);
    if (!rc && hits->n < (size_t)limit && ntok > 1) {
        /* Too few chunks have every word: rank those with some of them too.
         * The OR query scores every chunk exactly as the AND query did (BM25
         * sums over the words a chunk holds), so its list contains the AND
         * hits at their ranks and only adds to them. */
        fts_hits_release(hits);
        buf_reset(&match);
        rc = query_build_ex(query, strlen(query), e->st.trigram, QUERY_OR, x, &xc, &match, &ntok);
        if (!rc && match.len) rc = store_fts_search(&e->st, match.data, limit, hits, err, errlen);
    }
    buf_release(&match);
    return rc;
}

/* Loads the vectors of the open index when they are not loaded; when
 * another connection committed since (PRAGMA data_version) or this engine's
 * own sync changed vectors, applies the vector log's k changes to the loaded
 * index instead of reloading it (a reload only when the log cannot say). */
static cm_rc ensure_vectors(cm_engine *e, char *err, size_t errlen)
{
    int64_t version = store_data_version(&e->st);
    if (e->vx_loaded && version == e->vx_version && !e->vx_stale) return CM_OK;
    char *dims = NULL;
    cm_rc rc = store_meta_get(&e->st, VECTOR_DIMS_KEY, &dims, err, errlen);
    int d = dims ? (int)strtol(dims, NULL, 10) : 0;
    free(dims);
    if (!rc && d > 0 && e->vx_loaded && (int)e->vx.dims == d) {
        bool reload = false;
        rc = store_vectors_update(&e->st, d, &e->vx, &e->vx_seq, &reload, err, errlen);
        if (!rc && !reload) {
            e->vx_version = version;
            e->vx_stale = false;
            e->vx_updates++;
            return CM_OK;
        }
        if (rc == CM_ENOMEM) return rc; /* else a reload serves */
        rc = CM_OK;
    }
    if (e->vx_loaded) vec_index_release(&e->vx);
    e->vx_loaded = false;
    if (rc || d <= 0) return rc; /* nothing embedded yet */
    if (!e->prov.dims) e->prov.dims = d;
    if ((rc = store_vectors_load(&e->st, d, &e->vx, &e->vx_seq, err, errlen))) return rc;
    e->vx_loads++;
    e->vx_loaded = true;
    e->vx_version = version;
    e->vx_stale = false;
    return CM_OK;
}

/* Appends the vector side's candidates to *v (n, cap): the k chunks nearest
 * the query. Returns false when there is no vector side for this query
 * (no provider, no vectors yet, the query embedding failed or was zero). */
static bool vector_hits(cm_engine *e, const char *query, int k, search_hit **v, size_t *n,
                        size_t *cap)
{
    provider_ready(e, false, NULL, NULL);
    if (!e->have_prov || (e->prov.kind == EMBED_LOCAL && !e->prov.lm)) return false;
    char msg[512];
    float *q = NULL;
    vec_hit *hits = NULL;
    bool ok = false;
    if (ensure_vectors(e, msg, sizeof msg) || !e->vx_loaded || !e->vx.n) goto out;
    if (embed_query(&e->prov, query, &q, msg, sizeof msg) != CM_OK) {
        snprintf(e->last_error, sizeof e->last_error, "%s", msg);
        cm_logf(&e->lg, CM_LOG_WARN, "%s; searching keywords only", msg);
        goto out;
    }
    if (e->prov.dims != (int)e->vx.dims || !vec_normalise(q, e->vx.dims))
        goto out; /* zero: keywords only */
    if (!(hits = malloc((size_t)k * sizeof *hits))) goto out;
    size_t nh = vec_search_auto(&e->vx, vec_kernels_best(), q, (size_t)k, ~0u, hits);
    for (size_t i = 0; i < nh; i++) {
        fts_hit h;
        if (store_chunk_get(&e->st, hits[i].id, &h, msg, sizeof msg) != CM_OK) continue;
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 64;
            search_hit *nv = realloc(*v, nc * sizeof *nv);
            if (!nv) {
                free(h.path);
                free(h.source);
                free(h.text);
                break;
            }
            *v = nv;
            *cap = nc;
        }
        (*v)[(*n)++] = (search_hit){
            h.id,       h.path,     h.source, h.text, h.start_line,
            h.end_line, h.mtime_ns, 0,        0,      CM_MAX(0.0, (double)hits[i].score),
            false,      true};
    }
    ok = true;
out:
    free(q);
    free(hits);
    return ok;
}

cm_rc cm_memory_search(cm_engine *e, const char *query, const cm_search_opts *opts, char **json,
                       char *err, size_t errlen)
{
    return cm_memory_search_session(e, query, opts, NULL, json, err, errlen);
}

cm_rc cm_memory_search_session(cm_engine *e, const char *query, const cm_search_opts *opts,
                               const char *session_key, char **json, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf out = BUF_INIT;
    fts_hits hits = {0};
    search_hit *v = NULL;
    size_t n = 0;
    char msg[512] = "";
    *json = NULL;
    if (!query) query = "";
    const cm_config *c = &e->cfg;
    provider_ready(e, false, NULL, NULL); /* the fallback, when the local model cannot serve */
    tools_head head = {e->provider, e->model, e->provider_note, c->citations, session_key};
    int max_results = opts && opts->max_results > 0 ? opts->max_results : c->max_results;
    double min_score = opts && opts->min_score >= 0 ? opts->min_score : c->min_score;
    if (!c->enabled) {
        CHECK(tools_search_error("memory search is disabled (memorySearch.enabled is false)", &head,
                                 &out));
        goto done;
    }
    if (workspace_exists(e, msg, sizeof msg)) {
        CHECK(tools_search_error(msg, &head, &out));
        goto done;
    }
    rc = ensure_store(e, msg, sizeof msg);
    if (rc == CM_ENOTFOUND) { /* nothing indexed yet */
        rc = CM_OK;
        CHECK(tools_search_payload(NULL, 0, &head, &out));
        goto done;
    }
    if (!rc && index_workspace_matches(e, msg, sizeof msg) == CM_ENOTFOUND) {
        rc = CM_OK;
        CHECK(tools_search_error(msg, &head, &out));
        goto done;
    }
    if (!rc) rc = keyword_hits(e, query, config_candidates(c, max_results), &hits, msg, sizeof msg);
    if (rc == CM_ENOMEM) CHECK(rc);
    if (rc) {
        rc = CM_OK;
        CHECK(tools_search_error(msg, &head, &out));
        goto done;
    }
    size_t cap = hits.n;
    if (hits.n && !(v = calloc(hits.n, sizeof *v))) CHECK(CM_ENOMEM);
    for (size_t i = 0; i < hits.n; i++) {
        fts_hit *h = &hits.v[i];
        v[i] = (search_hit){h->id,       h->path, h->source, h->text, h->start_line, h->end_line,
                            h->mtime_ns, 0,       0,         0,       true,          false};
        h->path = h->source = h->text = NULL; /* moved */
        v[i].text_score = rank_bm25_score(h->rank);
        v[i].score = v[i].text_score; /* keyword-only: the text score is the score */
    }
    n = hits.n;
    /* Hybrid: the vector side's candidates, merged by chunk id with the
     * normalised weights; without hybrid, the vector side alone. */
    if (vector_hits(e, query, config_candidates(c, max_results), &v, &n, &cap)) {
        if (!c->hybrid_enabled) {
            size_t w = 0;
            for (size_t i = 0; i < n; i++) {
                if (v[i].has_vector)
                    v[w++] = v[i];
                else
                    search_hit_release(&v[i]);
            }
            n = w;
            n = rank_merge(v, n, 1.0, 0.0);
        } else {
            n = c->hybrid_merge == CM_MERGE_MINMAX
                    ? rank_merge_minmax(v, n, c->vector_weight, c->text_weight)
                : c->hybrid_merge == CM_MERGE_RRF
                    ? rank_merge_rrf(v, n, RANK_RRF_K, c->vector_weight, c->text_weight)
                    : rank_merge(v, n, c->vector_weight, c->text_weight);
        }
    }
    rank_opts ro = {c->text_weight,   min_score,         max_results,
                    c->decay_enabled, c->half_life_days, opts ? opts->now : 0,
                    c->mmr_enabled,   c->mmr_lambda};
    n = rank_finish(v, n, &ro);
    CHECK(tools_search_payload(v, n, &head, &out));
done:
    *json = buf_detach(&out);
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    for (size_t i = 0; v && i < n; i++)
        search_hit_release(&v[i]);
    free(v);
    fts_hits_release(&hits);
    buf_release(&out);
    return rc;
}

cm_rc cm_memory_get(cm_engine *e, const char *path, long from, long lines, char **json, char *err,
                    size_t errlen)
{
    return cm_memory_get_at(e, path, from, 0, lines, json, err, errlen);
}

cm_rc cm_memory_get_at(cm_engine *e, const char *path, long from, long offset, long lines,
                       char **json, char *err, size_t errlen)
{
    buf out = BUF_INIT;
    *json = NULL;
    if (!path) path = "";
    cm_rc rc = workspace_exists(e, err, errlen);
    if (!rc) rc = tools_get(&e->cfg, path, strlen(path), from, offset, lines, &out, err, errlen);
    if (rc) {
        buf_release(&out);
        return rc;
    }
    *json = buf_detach(&out);
    return CM_OK;
}

int cm_engine_writable(const cm_engine *e)
{
    return e->allow_write || e->cfg.memory_write;
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
static void index_written(cm_engine *e, const char *rel)
{
    char msg[512] = "";
    int lock = -1, fd = -1;
    buf meta = BUF_INIT, name = BUF_INIT, problem = BUF_INIT;
    char *stored = NULL;
    cm_sync_stats stats = {0};
    sync_run r = {.e = e, .stats = &stats, .text = BUF_INIT, .clean = BUF_INIT};
    int busy = e->busy_ms;
    e->busy_ms = CM_MIN(busy, WRITE_INDEX_WAIT_MS);
    cm_rc rc = lock_acquire(e, true, &lock, msg, sizeof msg);
    e->busy_ms = busy;
    if (!rc) rc = ensure_store(e, msg, sizeof msg);
    if (!rc) rc = meta_json(e, &meta);
    if (!rc) rc = store_meta_get(&e->st, STORE_META_KEY, &stored, msg, sizeof msg);
    if (!rc && (!stored || strcmp(stored, meta.data) != 0)) rc = CM_ENOTFOUND;
    struct stat st = {0};
    if (!rc) rc = tools_open(&e->cfg, rel, &fd, &st, &name, msg, sizeof msg);
    if (!rc && st.st_size > DISCOVER_MAX_FILE_BYTES) rc = CM_ETOOBIG;
    if (!rc) rc = path_read_fd(fd, rel, (size_t)DISCOVER_MAX_FILE_BYTES, &r.text, msg, sizeof msg);
    char hash[SHA256_HEX_LEN + 1];
    mem_file f = {.rel = name.data, .source = "memory", .size = st.st_size};
    f.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (!rc) rc = chunk_loaded(&r, &f, hash, &problem);
    if (!rc) rc = store_begin(&e->st, msg, sizeof msg);
    if (!rc) {
        rc = store_file_replace(&e->st, f.rel, f.source, hash, f.mtime_ns, f.size,
                                problem.len ? problem.data : NULL, &r.chunks, msg, sizeof msg);
        if (!rc) rc = store_commit(&e->st, msg, sizeof msg);
        if (rc) store_rollback(&e->st);
    }
    if (!rc && e->vx_loaded) { /* its old chunks are gone: reloaded by the next search */
        vec_index_release(&e->vx);
        e->vx_loaded = false;
    }
    if (rc && rc != CM_ENOTFOUND)
        cm_logf(&e->lg, CM_LOG_INFO, "%s: written; indexed by the next sync (%s)", rel, msg);
    if (fd >= 0) close(fd);
    lock_release(lock);
    free(stored);
    buf_release(&meta);
    buf_release(&name);
    buf_release(&problem);
    buf_release(&r.text);
    buf_release(&r.clean);
    chunk_list_release(&r.chunks);
    problem_list_release(&r.problems);
}

cm_rc cm_memory_write(cm_engine *e, const char *path, const char *text, int64_t now, char **json,
                      char *err, size_t errlen)
{
    *json = NULL;
    if (!cm_engine_writable(e))
        return cm_seterr(err, errlen, CM_EINVAL,
                         "memory_write is disabled (enable it with clawmem.memoryWrite: true "
                         "in the config, or --allow-write)");
    buf out = BUF_INIT, rel = BUF_INIT;
    cm_rc rc = tools_write(&e->cfg, path, text, now, &out, &rel, err, errlen);
    if (rc) {
        buf_release(&out);
        buf_release(&rel);
        return rc;
    }
    index_written(e, rel.data);
    buf_release(&rel);
    *json = buf_detach(&out);
    return CM_OK;
}

/* ---- watch ------------------------------------------------------------- */

#define WATCH_DEGRADED_RESCAN_MS 10000

static int stop_requested(void *ctx, const cm_progress *p)
{
    (void)p;
    const cm_watch_opts *o = ctx;
    return o->stop && *o->stop;
}

cm_rc cm_engine_watch(cm_engine *e, const cm_watch_opts *opts, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    watcher *w = NULL;
    cm_watch_opts o = *opts;
    int debounce = o.debounce_ms >= 0 ? o.debounce_ms : e->cfg.watch_debounce_ms;
    int64_t interval = (int64_t)(e->cfg.sync_interval_minutes * 60000.0);
    int live = -1;
    uint64_t seq = 0;
    CHECK(watcher_open(&e->cfg, &e->lg, &w, err, errlen));
    live = watch_claim(e); /* published from here on; pending until the first sync */
    watch_publish(e, live, "pending", seq);
    int64_t due = cm_now_ms(); /* sync on start */
    int64_t first_change = -1, last_sync = 0;
    while (!(o.stop && *o.stop)) {
        int64_t t = cm_now_ms();
        if (due >= 0 && t >= due) {
            cm_sync_stats st;
            char msg[1024] = "";
            cm_rc r = cm_engine_sync(e, CM_SYNC_NOWAIT, stop_requested, &o, &st, msg, sizeof msg);
            if (r == CM_ECANCELED) break;
            if (o.on_sync) o.on_sync(o.ctx, r, &st, r ? msg : "");
            if (r) cm_logf(&e->lg, CM_LOG_WARN, "sync: %s", msg);
            /* another writer: try again after a debounce period */
            due = r == CM_EBUSY ? t + CM_MAX(debounce, 200) : -1;
            first_change = -1;
            last_sync = cm_now_ms();
            /* fresh only when the sync succeeded, no event arrived meanwhile
             * (those are read and debounced by the loop as usual) and events
             * are reliable */
            struct pollfd ev = {watcher_fd(w), POLLIN, 0};
            if (!r && !watcher_degraded(w) && poll(&ev, 1, 0) == 0)
                watch_publish(e, live, "fresh", ++seq);
            continue;
        }
        /* When to wake up next: a pending sync, the interval, the degraded rescan. */
        int64_t next = due;
        if (interval > 0 && (next < 0 || last_sync + interval < next)) next = last_sync + interval;
        if (watcher_degraded(w) && (next < 0 || last_sync + WATCH_DEGRADED_RESCAN_MS < next))
            next = last_sync + WATCH_DEGRADED_RESCAN_MS;
        int timeout = next < 0 ? -1 : (int)CM_MAX(0, CM_MIN(next - t, 3600000));
        /* Without a wake descriptor, look at *stop at least every 250 ms. */
        if (o.wake_fd < 0 && (timeout < 0 || timeout > 250)) timeout = 250;
        struct pollfd p[2] = {{watcher_fd(w), POLLIN, 0}, {o.wake_fd, POLLIN, 0}};
        int n = poll(p, o.wake_fd >= 0 ? 2 : 1, timeout);
        if (n < 0 && errno != EINTR) FAIL(CM_EIO, "poll: %s", strerror(errno));
        t = cm_now_ms();
        if (n > 0 && (p[0].revents & POLLIN)) {
            unsigned what = watcher_read(w);
            if (what & (WATCH_CHANGED | WATCH_OVERFLOW)) watch_publish(e, live, "pending", seq);
            if (what & WATCH_OVERFLOW)
                cm_logf(&e->lg, CM_LOG_INFO, "inotify queue overflowed; rescanning everything");
            if (what & WATCH_CHANGED) {
                /* Debounce: wait for quiet, but never longer than 10 periods. */
                if (first_change < 0) first_change = t;
                due = CM_MIN(t + debounce, first_change + 10 * (int64_t)CM_MAX(debounce, 1));
            }
        }
        if (next >= 0 && t >= next && due < 0) due = t; /* interval or degraded rescan */
    }
out:
    watch_unclaim(e, live);
    watcher_free(w);
    return rc;
}

/* ---- status ------------------------------------------------------------ */

static cm_rc add_kv_str(buf *b, const char *k, const char *v)
{
    cm_rc rc = buf_printf(b, ",\"%s\":", k);
    if (!rc) rc = v ? buf_add_json_str(b, v, strlen(v)) : buf_adds(b, "null");
    return rc;
}

/* The last sync's problems (a JSON array kept in the meta table) as JSON
 * again: only {"path","problem"} strings pass, so a crafted value cannot
 * break the status payload; anything else is CM_ECORRUPT. */
static cm_rc problems_json(store *st, const char *stored, buf *out, char *err, size_t errlen)
{
    cm_rc rc = buf_addc(out, '[');
    json_t *j = stored ? json_loads(stored, JSON_REJECT_DUPLICATES, NULL) : json_array();
    if (!j || !json_is_array(j)) {
        json_decref(j);
        return rc ? rc : store_corrupt(st, "the meta table", err, errlen);
    }
    for (size_t i = 0; !rc && i < json_array_size(j); i++) {
        json_t *o = json_array_get(j, i);
        const char *p = json_string_value(json_object_get(o, "path"));
        const char *w = json_string_value(json_object_get(o, "problem"));
        if (!p || !w) {
            rc = store_corrupt(st, "the meta table", err, errlen);
            break;
        }
        if (i) rc = buf_addc(out, ',');
        if (!rc) rc = buf_adds(out, "{\"path\":");
        if (!rc) rc = buf_add_json_str(out, p, strlen(p));
        if (!rc) rc = buf_adds(out, ",\"problem\":");
        if (!rc) rc = buf_add_json_str(out, w, strlen(w));
        if (!rc) rc = buf_addc(out, '}');
    }
    json_decref(j);
    if (!rc) rc = buf_addc(out, ']');
    return rc;
}

/* A stored vector size: digits only, as the status payload shows it bare. */
static bool dims_valid(const char *d)
{
    size_t n = strspn(d, "0123456789");
    return n > 0 && n < 8 && d[n] == 0;
}

/* Counts the files of a discovery that a sync would read (new, changed) or
 * drop. */
static cm_rc count_dirty_in(cm_engine *e, const file_list *files, size_t *dirty, char *err,
                            size_t errlen)
{
    stored_files old = {0};
    const stored_file **match = NULL;
    bool *kept = NULL;
    cm_rc rc = store_files_load(&e->st, &old, err, errlen);
    if (!rc) rc = pair_files(files, &old, &match, &kept);
    *dirty = 0;
    for (size_t i = 0; !rc && i < files->n; i++) {
        const stored_file *sf = match[i];
        if (!sf || sf->size != files->v[i].size || sf->mtime_ns != files->v[i].mtime_ns) (*dirty)++;
    }
    for (size_t i = 0; !rc && i < old.n; i++)
        *dirty += !kept[i];
    free(match);
    free(kept);
    stored_files_release(&old);
    return rc;
}

/* Counts files that a sync would read (new, changed) or drop. */
static cm_rc count_dirty(cm_engine *e, size_t *dirty, char *err, size_t errlen)
{
    file_list files = {0};
    problem_list pl = {0};
    cm_rc rc = discover_files(&e->cfg, &files, &pl);
    if (!rc) rc = count_dirty_in(e, &files, dirty, err, errlen);
    file_list_release(&files);
    problem_list_release(&pl);
    return rc;
}

cm_rc cm_engine_status(cm_engine *e, int deep, char **json, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;
    char msg[512] = "";
    char *transient = NULL;
    const cm_config *c = &e->cfg;
    *json = NULL;
    rc = workspace_exists(e, err, errlen);
    if (rc) return rc;
    bool ws = true;
    CHECK(buf_adds(&b, "{\"agentId\":"));
    CHECK(buf_add_json_str(&b, c->agent_id, strlen(c->agent_id)));
    CHECK(add_kv_str(&b, "workspace", c->workspace));
    CHECK(buf_printf(&b, ",\"workspaceExists\":%s", ws ? "true" : "false"));
    CHECK(add_kv_str(&b, "stateDir", c->state_dir));
    CHECK(add_kv_str(&b, "configPath", c->config_path));
    CHECK(buf_printf(&b, ",\"configFound\":%s,\"enabled\":%s", c->config_found ? "true" : "false",
                     c->enabled ? "true" : "false"));
    CHECK(add_kv_str(&b, "clawmemConfigPath", c->overlay_path));
    CHECK(buf_printf(&b, ",\"clawmemConfigFound\":%s", c->overlay_found ? "true" : "false"));
    CHECK(add_kv_str(&b, "backend", "builtin"));
    provider_check(e);
    CHECK(add_kv_str(&b, "requestedProvider", c->provider));
    CHECK(add_kv_str(&b, "provider", e->provider));
    CHECK(add_kv_str(&b, "model", e->model));
    CHECK(add_kv_str(&b, "providerNote", e->provider_note));
    CHECK(add_kv_str(&b, "search",
                     !e->have_prov       ? "keyword"
                     : c->hybrid_enabled ? "hybrid"
                                         : "vector"));
    CHECK(add_kv_str(&b, "lastError", e->last_error[0] ? e->last_error : NULL));
    CHECK(add_kv_str(&b, "ftsTokenizer", c->fts_tokenizer));
    CHECK(buf_adds(&b, ",\"sources\":["));
    for (size_t i = 0; i < c->sources.n; i++) {
        if (i) CHECK(buf_addc(&b, ','));
        CHECK(buf_add_json_str(&b, c->sources.v[i], strlen(c->sources.v[i])));
    }
    CHECK(buf_adds(&b, "],\"extraPaths\":["));
    for (size_t i = 0; i < c->extra_paths.n; i++) {
        if (i) CHECK(buf_addc(&b, ','));
        CHECK(buf_add_json_str(&b, c->extra_paths.v[i], strlen(c->extra_paths.v[i])));
    }
    CHECK(buf_addc(&b, ']'));
    CHECK(add_kv_str(&b, "citations", tools_citations_name(c->citations)));
    CHECK(buf_printf(&b, ",\"sync\":{\"watch\":%s,\"watchDebounceMs\":%d,\"intervalMinutes\":%g}",
                     c->sync_watch ? "true" : "false", c->watch_debounce_ms,
                     c->sync_interval_minutes));
    CHECK(buf_printf(&b, ",\"memoryWrite\":%s", cm_engine_writable(e) ? "true" : "false"));
    CHECK(add_kv_str(&b, "indexPath", c->store_path));
    rc = ensure_store(e, msg, sizeof msg);
    if (!rc && index_workspace_matches(e, msg, sizeof msg) == CM_ENOTFOUND) rc = CM_ENOTFOUND;
    if (rc == CM_ENOMEM) CHECK(rc);
    if (rc) {
        CHECK(buf_printf(&b, ",\"indexExists\":%s", rc == CM_ENOTFOUND ? "false" : "true"));
        CHECK(add_kv_str(&b, "indexError", msg));
        rc = CM_OK;
        CHECK(buf_adds(&b, ",\"files\":0,\"chunks\":0,\"problems\":[]}"));
        goto done;
    }
    int64_t nfiles = 0, nchunks = 0, nvec = 0, ncache = 0;
    char *dims = NULL;
    buf fp = BUF_INIT, tp = BUF_INIT;
    /* Everything read from the index is checked before any of it is shown:
     * a damaged or crafted index is an indexError with the --force hint. */
    rc = store_counts(&e->st, &nfiles, &nchunks, msg, sizeof msg);
    if (!rc) rc = store_meta_get(&e->st, STORE_PROBLEMS_KEY, &transient, msg, sizeof msg);
    if (!rc) rc = problems_json(&e->st, transient, &tp, msg, sizeof msg);
    if (!rc) rc = store_file_problems(&e->st, &fp, msg, sizeof msg);
    if (!rc) rc = store_count(&e->st, "vectors WHERE dims > 0", &nvec, msg, sizeof msg);
    if (!rc) rc = store_count(&e->st, "embedding_cache", &ncache, msg, sizeof msg);
    if (!rc) rc = store_meta_get(&e->st, VECTOR_DIMS_KEY, &dims, msg, sizeof msg);
    if (!rc && dims && !dims_valid(dims))
        rc = store_corrupt(&e->st, "the meta table", msg, sizeof msg);
    if (rc && rc != CM_ENOMEM) {
        buf_release(&fp);
        buf_release(&tp);
        free(dims);
        CHECK(buf_adds(&b, ",\"indexExists\":true"));
        CHECK(add_kv_str(&b, "indexError", msg));
        rc = CM_OK;
        CHECK(buf_adds(&b, ",\"files\":0,\"chunks\":0,\"problems\":[]}"));
        goto done;
    }
    if (!rc)
        rc = buf_printf(&b, ",\"indexExists\":true,\"files\":%lld,\"chunks\":%lld",
                        (long long)nfiles, (long long)nchunks);
    if (!rc)
        rc = buf_printf(&b,
                        ",\"vector\":{\"enabled\":%s,\"dims\":%s,\"vectors\":%lld,"
                        "\"path\":\"in-process %s scan\",\"sqliteVec\":\"not loaded: the "
                        "in-process index serves\",\"inMemory\":{\"rows\":%zu,\"scan\":\"%s\","
                        "\"fullLoads\":%u,\"logUpdates\":%u}},\"cache\":{\"enabled\":%s,"
                        "\"entries\":%lld,\"maxEntries\":%d}",
                        e->have_prov ? "true" : "false", dims ? dims : "0", (long long)nvec,
                        vec_kernels_best()->name, e->vx_loaded ? e->vx.n : 0,
                        e->vx_loaded ? vec_search_path(&e->vx) : "not loaded", e->vx_loads,
                        e->vx_updates, c->cache_enabled ? "true" : "false", (long long)ncache,
                        c->cache_max_entries);
    free(dims);
    struct stat ist;
    if (!rc && stat(c->store_path, &ist) == 0)
        rc = buf_printf(&b, ",\"indexBytes\":%lld", (long long)ist.st_size);
    /* problems: imperfectly indexed files, then what the last sync could not read */
    if (!rc) rc = buf_adds(&b, ",\"problems\":");
    if (!rc) {
        bool a = fp.len > 2, tr = tp.len > 2;
        rc = buf_add(&b, fp.data, a ? fp.len - 1 : 1);
        if (!rc && a && tr) rc = buf_addc(&b, ',');
        if (!rc && tr) rc = buf_add(&b, tp.data + 1, tp.len - 2);
        if (!rc) rc = buf_addc(&b, ']');
    }
    buf_release(&fp);
    buf_release(&tp);
    CHECK(rc);
    if (deep) {
        bool ok = false;
        size_t dirty = 0;
        rc = store_check(&e->st, &ok, msg, sizeof msg);
        if (!rc) rc = count_dirty(e, &dirty, msg, sizeof msg);
        if (rc == CM_ENOMEM) CHECK(rc);
        if (rc) {
            CHECK(add_kv_str(&b, "integrity", msg));
            rc = CM_OK;
        } else {
            CHECK(add_kv_str(&b, "integrity", ok ? "ok" : "corrupt"));
            CHECK(buf_printf(&b, ",\"dirtyFiles\":%zu", dirty));
        }
    }
    CHECK(buf_addc(&b, '}'));
done:
    *json = buf_detach(&b);
out:
    if (rc) cm_seterr(err, errlen, rc, "status: %s", cm_strerror(rc));
    free(transient);
    buf_release(&b);
    return rc;
}
