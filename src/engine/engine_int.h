/*
 * engine_int.h — what the files of src/engine/ share, and nothing outside it
 * includes: the engine's struct, in sections by the file that keeps those
 * fields, and the functions one file of the engine offers the others. The
 * files, one job each: engine.c (the cm_engine_* entry points: the handle,
 * sync, status; and engine.h's search, get and write for tools/, through the
 * backend's calls), watch_loop.c, builtin.c
 * (the builtin backend's table) with its status.c, search.c and sync.c
 * (discovery pairing, incremental sync, the no-change check), rebuild.c (the
 * full rebuild and its reader thread), load.c (one file read and chunked),
 * lock.c (the writer lock, the watcher's record), provider.c (the embedding
 * provider and the vector filling), batch_fill.c (the vector filling through
 * the providers' batch APIs), conn.c (the index connection), share.c (a
 * shared engine's pool of views and its vector snapshot).
 */
#ifndef CM_ENGINE_INT_H
#define CM_ENGINE_INT_H

#include <sys/types.h>

#include "../config/config.h"
#include "../embed/embed.h"
#include "../index/chunk.h"
#include "../index/discover.h"
#include "../search/derive.h"
#include "../store/store.h"
#include "engine.h"

/* Version of the keyword text derived from chunks (CJK bigrams); part of the
 * fingerprint so that a change of derivation rebuilds the index. */
#define KEYWORD_TEXT_VERSION "cjk2"

#define VECTOR_DIMS_KEY "clawmem_vector_dims"

/* A backend: what serves sync, search and status behind the entry points
 * of engine.c (as git's struct ref_storage_be). One today: builtin.c,
 * clawmem's own index; qmd_backend.c, the QMD sidecar (memory.backend =
 * "qmd"), which answers with builtin's calls when QMD fails. */
typedef struct engine_backend {
    const char *name; /* as status shows it */
    /* after the config is loaded; a failure fails cm_engine_open */
    cm_rc (*open)(cm_engine *e, char *err, size_t errlen);
    cm_rc (*sync)(cm_engine *e, unsigned flags, cm_progress_fn progress, void *progress_ctx,
                  cm_sync_stats *stats, char *err, size_t errlen);
    /* the hits and head facts; tools/ shapes the payload (engine.h) */
    cm_rc (*search)(cm_engine *e, const char *query, const cm_search_opts *opts,
                    const char *session_key, engine_result *out, char *err, size_t errlen);
    cm_rc (*status)(cm_engine *e, int deep, char **json, char *err, size_t errlen);
    /* releases what open and the other calls left; safe after a failed open */
    void (*close)(cm_engine *e);
    /* memory_get's text, or NULL: the memory files' rules (cm_index_memfile_read) */
    cm_rc (*get)(cm_engine *e, const char *path, long from, long offset, long lines,
                 memfile_text *out, char *err, size_t errlen);
    /* removes the backend's own index besides the builtin one (`index
     * --drop`; *dropped: there was one), or NULL: it has none */
    cm_rc (*drop_own)(cm_engine *e, int *dropped, char *err, size_t errlen);
} engine_backend;

struct cm_engine {
    /* engine.c: the settings, the handle's options and the backend */
    cm_config cfg;
    cm_logger lg;
    int busy_ms;
    bool allow_write;
    const engine_backend *be;
    /* conn.c: the open index */
    store st;
    bool st_open;
    dev_t st_dev; /* identity of the index file the connection has open */
    ino_t st_ino;
    /* a sync's stat snapshot, a statement on st while held: finalized
     * before st closes, so that no connection to a swapped-out index lives
     * on beside the new one (their -shm is one file, and closing the old
     * connection's descriptor of it later would drop the process's locks on
     * it, letting another process truncate it under the new connection) */
    store_snap *snap_held;
    bool foreign_checked; /* cm_engine_warn_foreign looked at the index file */
    /* provider.c: the embedding provider */
    char provider[32], model[128];
    char *provider_note; /* why the effective provider differs from the requested one */
    embed_provider prov;
    bool have_prov;
    bool fallback_used;   /* provider_note says why the fallback serves */
    char last_error[512]; /* the provider's last failure, for status */
    /* search.c: the in-memory vector index and its freshness */
    vec_index vx;
    bool vx_loaded;
    int64_t vx_version;
    int64_t vx_seq;                /* the vector log position vx reflects (-1: no log) */
    bool vx_stale;                 /* this engine's own sync changed vectors since */
    unsigned vx_loads, vx_updates; /* full loads; updates applied from the log */
    /* search.c: the static model's vocabulary for the query's variants,
     * mapped on the first search (qm_state 1; -1: not installed) */
    static_model qm;
    int qm_state;
    /* search.c: the derivation table (search/derive.h), mapped on the
     * first search (dt_state 1; -1: none) */
    derive_table dt;
    int dt_state;
    /* qmd_backend.c: the QMD sidecar (memory.backend = "qmd") */
    struct engine_qmd *qmd;
    /* batch_fill.c: the batch APIs during a sync (set by cm_builtin_sync) */
    cm_progress_fn batch_progress;
    void *batch_pctx;
    bool batch_nowait;     /* a search's or watcher's sync: submit and poll, never wait */
    char batch_error[512]; /* the last batch failure, for status */
    /* share.c: an engine opened shared (cm_engine_open_shared) keeps a pool
     * of views; a view borrows its owner's cfg and lg and reads the pool's
     * vector snapshot through vx (a shallow copy of snap->vx then) */
    struct engine_pool *pool; /* the shared engine's; NULL otherwise */
    cm_engine *owner;         /* a view's shared engine; NULL otherwise */
    struct vec_snap *snap;    /* the snapshot a view's vx borrows; NULL: vx is its own */
};

/* Whether the index is in PostgreSQL (memorySearch.store.driver). */
static inline bool engine_pg(const cm_engine *e)
{
    return e->cfg.store_driver && strcmp(e->cfg.store_driver, "postgres") == 0;
}

/* Whether memory_write may write (cm_engine_writable). */
static inline bool engine_writable(const cm_engine *e)
{
    return e->allow_write || e->cfg.memory_write;
}

/* ---- builtin.c: the builtin backend ------------------------------------- */

extern const engine_backend cm_engine_builtin;
/* Its sync (sync.c), search (search.c) and status (status.c). */
cm_rc cm_builtin_sync(cm_engine *e, unsigned flags, cm_progress_fn progress, void *progress_ctx,
                      cm_sync_stats *stats, char *err, size_t errlen);
cm_rc cm_builtin_search(cm_engine *e, const char *query, const cm_search_opts *opts,
                        const char *session_key, engine_result *out, char *err, size_t errlen);
cm_rc cm_builtin_status(cm_engine *e, int deep, char **json, char *err, size_t errlen);
/* For tests: the clock (ns since the epoch; NULL: the real one) against
 * which a sync's walk decides which directories it may record (sync.c). */
void cm_engine_sync_test_clock(int64_t (*now_ns)(void));

/* ---- qmd_backend.c: the QMD backend -------------------------------------- */

extern const engine_backend cm_engine_qmd_backend;
/* For tests: the clock (ms since the epoch) of the QMD sidecars opened from
 * now on (NULL: the real clock), and a look at an engine's sidecar: updates
 * finished so far (-1: no sidecar); cm_engine_qmd_poke wakes its schedule. */
void cm_engine_qmd_test_clock(int64_t (*clock)(void *ctx), void *ctx);
int cm_engine_qmd_updates(cm_engine *e);
void cm_engine_qmd_poke(cm_engine *e);

/* ---- share.c: one engine for concurrent callers --------------------------- */

/* Makes e a shared engine (an empty pool); CM_ENOMEM. */
cm_rc cm_engine_pool_init(cm_engine *e);
/* Closes the views and the snapshot (no call may be running). */
void cm_engine_pool_free(cm_engine *e);
/* *v: the engine a call runs on: e itself when e is not shared, else an
 * idle view (made when none is idle; a failure to make one is returned with
 * err set). Give it back with cm_engine_unlease. Thread safe. */
cm_rc cm_engine_lease(cm_engine *e, cm_engine **v, char *err, size_t errlen);
void cm_engine_unlease(cm_engine *e, cm_engine *v);
/* A view's ensure_vectors (SQLite): adopts the pool's snapshot when it is at
 * the index's vector log head, else brings a copy of it (or a fresh load) up
 * to date and publishes it. Does the index I/O outside the pool's lock. */
cm_rc cm_engine_share_vectors(cm_engine *e, int dims, char *err, size_t errlen);
/* Drops the vectors e holds: its own, or its reference to a snapshot. */
void cm_engine_drop_vectors(cm_engine *e);
/* For tests and status: views made so far; vector snapshots loaded or copied
 * (each one a full load or a copy-on-write update). */
size_t cm_engine_pool_views(cm_engine *e);
size_t cm_engine_pool_snapshots(cm_engine *e);
/* The heap of the pool: the snapshot once, and conn_bytes of each view. */
size_t cm_engine_pool_memory(cm_engine *e, size_t (*conn_bytes)(const cm_engine *v));

/* ---- conn.c: the index connection --------------------------------------- */

/* Closes the index and drops the loaded vectors. */
void cm_engine_close_store(cm_engine *e);
/* Opens the index, or reopens it after a swap; CM_ENOTFOUND: no index yet. */
cm_rc cm_engine_ensure_store(cm_engine *e, char *err, size_t errlen);
/* CM_ENOTFOUND when the configured workspace is not a directory. */
cm_rc cm_engine_workspace_exists(const cm_engine *e, char *err, size_t errlen);
/* CM_ENOTFOUND when the open index records another workspace. */
cm_rc cm_engine_index_workspace_matches(cm_engine *e, bool recent, char *err, size_t errlen);
/* Once per engine, for what does not open the index (memory_get): a warning
 * through the logger when the index file is another program's. */
void cm_engine_warn_foreign(cm_engine *e);

/* ---- provider.c: the embedding provider --------------------------------- */

/* Sets up memorySearch.provider (or its fallback, or none) at open. */
void cm_engine_choose_provider(cm_engine *e);
/* Downloads (when fetch) and loads a local model; the fallback when it fails. */
void cm_engine_provider_ready(cm_engine *e, bool fetch, cm_progress_fn progress,
                              void *progress_ctx);
/* For status: the fallback when a local model's download failed lately. */
void cm_engine_provider_check(cm_engine *e);
/* Gives every chunk of st without a vector one (cache, then the provider). */
cm_rc cm_engine_fill_vectors(cm_engine *e, store *st, cm_sync_stats *stats, char *err,
                             size_t errlen);

/* ---- fill_media.c: vectors of multimodal memory's image and audio files -- */

/* Whether a chunk waiting for a vector is a media file's. */
bool cm_engine_media_chunk(const cm_engine *e, const pending_chunk *pc);
/* Gives every media chunk without a vector one (cache, then the provider). */
cm_rc cm_engine_fill_media(cm_engine *e, store *st, cm_sync_stats *stats, char *err, size_t errlen);
/* ---- batch_fill.c: the batch APIs (memorySearch.remote.batch) --------- */

/* Whether this sync embeds documents through the provider's batch API. */
bool cm_engine_batch_on(const cm_engine *e);
/* Gives the chunks of st without a vector theirs through batches: resumes
 * the batches recorded in the index, submits new ones for the rest, waits
 * for them (remote.batch.wait, unless e->batch_nowait) and retries failed
 * items synchronously. *sync_rest is set when repeated batch failures turned
 * batch mode off: the caller then embeds what is left synchronously. */
cm_rc cm_engine_fill_batch(cm_engine *e, store *st, cm_sync_stats *stats, bool *sync_rest,
                           char *err, size_t errlen);
/* Appends ,"batch":{…} to a status payload: settings and pending batches. */
cm_rc cm_engine_batch_status(cm_engine *e, buf *out, char *err, size_t errlen);

/* ---- lock.c: the writer lock and the watcher's record ------------------- */

/* Takes "<index>.lock" (waiting up to busy_ms when wait); *fd_out holds it. */
cm_rc cm_engine_lock_acquire(cm_engine *e, bool wait, int *fd_out, char *err, size_t errlen);
void cm_engine_lock_release(int fd);
/* The watcher's record: claimed (-1: not this process's), published, given up. */
int cm_engine_watch_claim(const cm_engine *e);
void cm_engine_watch_publish(const cm_engine *e, int fd, const char *state, uint64_t seq);
void cm_engine_watch_unclaim(const cm_engine *e, int fd);
/* True when a live watcher vouches that the index is fresh. */
bool cm_engine_watched_fresh(const cm_engine *e);

/* ---- load.c: one file read, checked and chunked for a sync -------------- */

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
    int64_t size, mtime_ns; /* of the file cm_engine_load_file read, from its descriptor */
    buf *log_later;         /* the rebuild's reader thread: warnings kept here (NUL-separated) and
                               logged by the writer, on the caller's thread */
} sync_run;

/* Reads, hashes and chunks f into r->chunks; CM_EIO: unreadable (a problem). */
cm_rc cm_engine_load_file(sync_run *r, const mem_file *f, char hash[SHA256_HEX_LEN + 1],
                          buf *problem, char *err, size_t errlen);
/* cm_engine_load_file after the read: r->text holds the file's bytes. */
cm_rc cm_engine_chunk_loaded(sync_run *r, const mem_file *f, char hash[SHA256_HEX_LEN + 1],
                             buf *problem);
/* Counts f as done; CM_ECANCELED when the progress callback says stop. */
cm_rc cm_engine_report(sync_run *r, const mem_file *f, char *err, size_t errlen);
/* Writes the transient problems of this sync into the meta table. */
cm_rc cm_engine_save_problems(store *st, const problem_list *pl, char *err, size_t errlen);

/* ---- rebuild.c: the full rebuild ---------------------------------------- */

/* Builds a fresh index in a temporary file and swaps it in. */
cm_rc cm_engine_rebuild(sync_run *r, const file_list *files, const char *meta, char *err,
                        size_t errlen);

/* ---- sync.c: the sync --------------------------------------------------- */

/* Counts the files of a discovery that a sync would read or drop, against
 * the stat snapshot held (NULL: read now; files_stat.h). */
cm_rc cm_engine_count_dirty_in(cm_engine *e, const file_list *files, const store_snap *held,
                               size_t *dirty, char *err, size_t errlen);
/* Indexes the memory file rel that memory_write just wrote (best effort). */
void cm_engine_index_written(cm_engine *e, const char *rel);

#endif
