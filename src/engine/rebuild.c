/*
 * rebuild.c — the full rebuild: a fresh index written to
 * "<index>.rebuild-<pid>" and renamed over the index, so a crash at any
 * point leaves the old index whole; the next writer removes the leftovers.
 * A reader thread reads and chunks the files ahead of the single writer.
 */
#include <pthread.h>
#include <unistd.h>

#include "engine_int.h"

/* While the single writer puts file i into the rebuild, a reader thread
 * reads, hashes and chunks the files after it, up to PIPE_SLOTS ahead. Each
 * slot is a private sync_run for cm_engine_load_file (own buffers, problems and
 * stats), merged into the real one in file order by the writer. */
#define PIPE_SLOTS     32
#define PIPE_MIN_FILES 64 /* fewer files: no thread */

typedef struct pipe_slot {
    sync_run r;
    cm_sync_stats stats;
    cm_rc rc;
    char hash[SHA256_HEX_LEN + 1];
    buf problem;
    buf log; /* the reader's warnings for this file, logged by the writer */
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
        cm_index_problem_list_release(&s->r.problems);
        cm_buf_reset(&s->log);
        s->rc = cm_engine_load_file(&s->r, &p->files->v[i], s->hash, &s->problem, s->err,
                                    sizeof s->err);
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
    for (size_t k = 0; k < s->log.len; k += strlen(s->log.data + k) + 1) /* on our thread */
        cm_logf(&r->e->lg, CM_LOG_WARN, "%s", s->log.data + k);
    r->stats->bytes_read += s->stats.bytes_read;
    for (size_t j = 0; j < s->r.problems.n && s->rc != CM_ENOMEM; j++)
        if (cm_index_problem_add(&r->problems, s->r.problems.v[j].path, "%s",
                                 s->r.problems.v[j].what))
            s->rc = CM_ENOMEM;
    return s;
}

/* A slot's text buffers over this are freed once their file is written:
 * 32 slots must not each keep the largest file they ever held. */
#define PIPE_KEEP_BYTES (1u << 20)

static void pipe_done(pipeline *p, size_t i)
{
    sync_run *r = &p->slot[i % PIPE_SLOTS].r; /* the reader is not using it */
    if (r->text.cap > PIPE_KEEP_BYTES) cm_buf_release(&r->text);
    if (r->clean.cap > PIPE_KEEP_BYTES) cm_buf_release(&r->clean);
    pthread_mutex_lock(&p->mu);
    p->consumed = i + 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void pipe_release(pipeline *p)
{
    for (size_t i = 0; i < PIPE_SLOTS; i++) {
        pipe_slot *s = &p->slot[i];
        cm_index_problem_list_release(&s->r.problems);
        cm_buf_release(&s->r.text);
        cm_buf_release(&s->r.clean);
        cm_chunk_list_release(&s->r.chunks);
        cm_buf_release(&s->problem);
        cm_buf_release(&s->log);
    }
    cm_index_file_reader_release(&p->rd);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
}

/* Builds a fresh index in a temporary file and swaps it in (PostgreSQL: in
 * one transaction, begun by cm_store_pg_rebuild_begin; the nested begin and
 * commit of the steps below are part of it). */
cm_rc cm_engine_rebuild(sync_run *r, const file_list *files, const char *meta, char *err,
                        size_t errlen)
{
    cm_engine *e = r->e;
    cm_rc rc = CM_OK;
    store tmp;
    bool tmp_open = false, reader = false;
    buf problem = BUF_INIT;
    pipeline *pl = NULL;
    pthread_t reader_tid;
    bool pg = engine_pg(e);
    char *path = pg ? NULL : cm_store_rebuild_path(e->cfg.store_path);
    if (pg) {
        /* PostgreSQL: one transaction on a connection of its own replaces the
         * agent's rows; readers see the old index until it commits */
        CHECK(cm_store_open_pg(&tmp, e->cfg.store_dsn, e->cfg.agent_id, e->cfg.fts_tokenizer,
                               STORE_CREATE, e->busy_ms, err, errlen));
        tmp_open = true;
        CHECK(cm_store_pg_rebuild_begin(&tmp, e->cfg.fts_tokenizer, err, errlen));
    } else {
        if (!path) CHECK(CM_ENOMEM);
        cm_store_remove_leftovers(e->cfg.store_path, true);
        CHECK(cm_store_open(&tmp, path, e->cfg.fts_tokenizer, STORE_CREATE | STORE_BULK, e->busy_ms,
                            err, errlen));
        tmp_open = true;
    }
    CHECK(cm_store_begin(&tmp, err, errlen));
    if (files->n >= PIPE_MIN_FILES && !(pl = calloc(1, sizeof *pl))) CHECK(CM_ENOMEM);
    if (pl) {
        pl->files = files;
        cm_index_file_reader_init(&pl->rd, files);
        pthread_mutex_init(&pl->mu, NULL);
        pthread_cond_init(&pl->cv, NULL);
        for (size_t i = 0; i < PIPE_SLOTS; i++) {
            pipe_slot *s = &pl->slot[i];
            s->r = (sync_run){e,        NULL, NULL,    {0}, &s->stats, {0},    BUF_INIT,
                              BUF_INIT, {0},  &pl->rd, 0,   0,         &s->log};
            cm_buf_init(&s->problem, 0);
            cm_buf_init(&s->log, 0);
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
            rc = cm_engine_load_file(r, f, hash, &problem, err, errlen);
            why = problem.len ? problem.data : NULL;
        }
        if (rc == CM_EIO) {
            rc = CM_OK;
            r->stats->files_skipped++;
            if (pl) pipe_done(pl, i);
            CHECK(cm_engine_report(r, f, err, errlen));
            continue;
        }
        CHECK(rc);
        const sync_run *lr = pl ? &s->r : r; /* size and mtime of what was read */
        CHECK(cm_store_file_replace(&tmp, f->rel, f->source, hash, lr->mtime_ns, lr->size, why,
                                    chunks, err, errlen));
        r->stats->files_indexed++;
        r->stats->chunks_written += chunks->n;
        if (pl) pipe_done(pl, i);
        CHECK(cm_engine_report(r, f, err, errlen));
    }
    if (pl) { /* the reader has finished: every file was taken */
        pthread_join(reader_tid, NULL);
        reader = false;
    }
    CHECK(cm_store_bulk_keywords(&tmp, err, errlen));
    CHECK(cm_store_meta_set(&tmp, STORE_META_KEY, meta, err, errlen));
    CHECK(cm_engine_save_problems(&tmp, &r->problems, err, errlen));
    CHECK(cm_store_commit(&tmp, err, errlen));
    /* Vectors before the swap, reusing the old index's embedding cache. */
    if (e->have_prov) {
        if (e->cfg.cache_enabled)
            CHECK(cm_store_cache_import(&tmp, e->cfg.store_path, err, errlen));
        /* batches: filled after the swap (sync.c), recorded in the live index */
        if (cm_engine_batch_on(e))
            CHECK(cm_store_batches_import(&tmp, e->cfg.store_path, err, errlen));
        else
            CHECK(cm_engine_fill_vectors(e, &tmp, r->stats, err, errlen));
    }
    CHECK(
        cm_store_vector_log_ensure(&tmp, err, errlen)); /* empty: readers load the new file whole */
    /* In WAL mode before the swap: a reader that opens the new index right
     * away must not find it in rollback mode (changing it needs exclusivity),
     * and its first reader writes nothing. */
    CHECK(cm_store_wal(&tmp, err, errlen));
    if (pg) CHECK(cm_store_commit(&tmp, err, errlen)); /* the rebuild's own transaction */
    cm_store_close(&tmp);
    tmp_open = false;
    cm_engine_close_store(e);
    if (!pg) CHECK(cm_store_swap(path, e->cfg.store_path, err, errlen));
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
        cm_store_rollback(&tmp);
        cm_store_close(&tmp);
    }
    if (rc && path) unlink(path);
    free(path);
    cm_buf_release(&problem);
    return rc;
}
