/*
 * batch_fill.c — the vectors of a sync through the provider's batch API
 * (memorySearch.remote.batch.enabled, openai/gemini/voyage): the chunks
 * without a vector, one request per distinct text (custom id = chunk hash),
 * split into batches at the provider's limits, at most remote.batch.concurrency
 * of them pending at once. Every submitted batch is recorded in the index
 * before it is waited for, so a sync that is killed, times out or does not
 * wait (remote.batch.wait false, or a search's sync) resumes the same batches
 * next time and uploads nothing twice. Items a batch did not embed are
 * embedded synchronously; after EMBED_BATCH_FAILURE_LIMIT failed batches the
 * rest of the sync is synchronous (2026.3.22's rule). No synchronous request
 * is made otherwise: the vectors' dimensions come from the batch output.
 *
 * Over PostgreSQL several processes (`clawmem serve` replicas, a CLI) may
 * sync one agent: only the holder of the agent's batch lease (a
 * session-level advisory lock, store_pg_batches.c) lists, submits, polls
 * and collects its batches. A sync that cannot have the lease leaves the
 * agent's vectors to the holder (embedding nothing itself, which could pay
 * for chunks already in the holder's batches), and a holder that loses it
 * (its session ended) stops before its next submission or status round.
 */
#include <jansson.h>

#include "../base/utf8.h"
#include "../embed/batch.h"
#include "engine_int.h"

#define BATCH_ERROR_KEY "clawmem_batch_last_error"

bool cm_engine_batch_on(const cm_engine *e)
{
    return e->have_prov && e->cfg.batch_enabled && cm_embed_batch_supported(&e->prov);
}

/* One distinct text without a vector: its hash and the chunks that hold it. */
typedef struct item {
    char hash[SHA256_HEX_LEN + 1];
    size_t first, n; /* ids[first .. first+n) */
    int state;       /* ITEM_* */
} item;

enum { ITEM_NEW, ITEM_PENDING, ITEM_DONE, ITEM_RETRY };

typedef struct pending {
    char *id;
    char state[32];
    int64_t checked; /* wall ms of the last status request (recorded: updated) */
    char **hashes;
    size_t n;
} pending;

typedef struct run {
    cm_engine *e;
    store *st;
    cm_sync_stats *stats;
    embed_provider *p;
    item *items;
    size_t nitems;
    int64_t *ids; /* chunk ids, grouped by item */
    pending *pend;
    size_t npend;
    size_t chunks_pending; /* chunks the pending batches cover */
    int failures;
    bool off;
    bool lost; /* the batch lease went (PostgreSQL): nothing more is submitted or collected */
    sqlite3_stmt *text_q; /* cm_store_chunk_text's */
} run;

static int cmp_pc(const void *a, const void *b)
{
    const pending_chunk *x = a, *y = b;
    int c = strcmp(x->hash, y->hash);
    return c ? c : (x->id > y->id) - (x->id < y->id);
}

static item *find(run *r, const char *hash)
{
    size_t lo = 0, hi = r->nitems;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(r->items[mid].hash, hash);
        if (!c) return &r->items[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Loads the chunks without a vector, grouped by hash (texts are read again
 * when needed, so 100k pending chunks cost ids and hashes only). */
static cm_rc load_items(run *r, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    pending_chunk *all = NULL, *pc = NULL;
    size_t n = 0, cap = 0, got = 0;
    int64_t after = 0;
    for (;;) {
        CHECK(cm_store_pending_vectors(r->st, after, 4096, &pc, &got, err, errlen));
        if (!got) break;
        after = pc[got - 1].id;
        if (n + got > cap) {
            size_t nc = CM_MAX(cap * 2, n + got);
            pending_chunk *na = realloc(all, nc * sizeof *na);
            if (!na) CHECK(CM_ENOMEM);
            all = na;
            cap = nc;
        }
        for (size_t i = 0; i < got; i++) {
            bool media = cm_engine_media_chunk(r->e, &pc[i]); /* cm_engine_fill_media's */
            free(pc[i].text);
            free(pc[i].path);
            pc[i].text = pc[i].path = NULL;
            if (!media) all[n++] = pc[i];
        }
        free(pc);
        pc = NULL;
        got = 0;
    }
    if (!n) goto out;
    qsort(all, n, sizeof *all, cmp_pc);
    r->ids = malloc(n * sizeof *r->ids);
    r->items = calloc(n, sizeof *r->items);
    if (!r->ids || !r->items) CHECK(CM_ENOMEM);
    for (size_t i = 0; i < n; i++) {
        r->ids[i] = all[i].id;
        if (!r->nitems || strcmp(r->items[r->nitems - 1].hash, all[i].hash) != 0) {
            item *it = &r->items[r->nitems++];
            memcpy(it->hash, all[i].hash, sizeof it->hash);
            it->first = i;
        }
        r->items[r->nitems - 1].n++;
    }
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_store_pending_release(pc, got);
    free(all);
    return rc;
}

/* Writes v (dims floats) as the vector of every chunk of it (an all-zero
 * vector as a row of 0 dimensions: done, never searched), and into the
 * cache. Inside the caller's transaction. */
static cm_rc put(run *r, item *it, const float *v, int dims, char *err, size_t errlen)
{
    const cm_config *c = &r->e->cfg;
    bool zero = true;
    for (int d = 0; d < dims && zero; d++)
        zero = v[d] == 0;
    cm_rc rc = CM_OK;
    for (size_t k = 0; k < it->n && !rc; k++)
        rc = cm_store_vector_put(r->st, r->ids[it->first + k], v, zero ? 0 : dims, err, errlen);
    if (!rc && !zero && c->cache_enabled)
        rc = cm_store_cache_put(r->st, cm_embed_name(r->p), r->p->model, r->p->key_hash, it->hash,
                                v, dims, err, errlen);
    if (!rc) {
        it->state = ITEM_DONE;
        r->stats->chunks_embedded += it->n;
    }
    return rc;
}

/* The text of an item (its first chunk's), malloc'd; NULL when the chunk is
 * gone or cannot be read. */
static char *item_text(run *r, const item *it, char *err, size_t errlen)
{
    char *text = NULL;
    for (size_t k = 0; k < it->n && !text; k++)
        if (cm_store_chunk_text(r->st, &r->text_q, r->ids[it->first + k], &text, err, errlen) !=
            CM_OK)
            break;
    return text;
}

/* Cache hits first: texts embedded before need no batch. */
static cm_rc from_cache(run *r, char *err, size_t errlen)
{
    if (!r->e->cfg.cache_enabled || !r->nitems) return CM_OK;
    cm_rc rc = cm_store_begin(r->st, err, errlen);
    for (size_t i = 0; !rc && i < r->nitems; i++) {
        float *v = NULL;
        int d = 0;
        rc = cm_store_cache_get(r->st, cm_embed_name(r->p), r->p->model, r->p->key_hash,
                                r->items[i].hash, &v, &d, err, errlen);
        if (!rc && v && (!r->p->dims || d == r->p->dims)) {
            if (!r->p->dims) r->p->dims = d;
            size_t before = r->stats->chunks_embedded;
            rc = put(r, &r->items[i], v, d, err, errlen);
            r->stats->chunks_embedded = before; /* not embedded: from the cache */
            r->stats->cache_hits += r->items[i].n;
        }
        free(v);
    }
    if (!rc) rc = cm_store_commit(r->st, err, errlen);
    if (rc) cm_store_rollback(r->st);
    return rc;
}

/* Embeds the items in ITEM_RETRY state synchronously (a round of up to 256
 * texts per transaction). A provider failure is recorded and leaves them
 * for a later sync. */
static cm_rc retry_sync(run *r, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    size_t i = 0;
    while (i < r->nitems) {
        item *batch[256];
        char *texts[256];
        size_t n = 0;
        for (; i < r->nitems && n < 256; i++) {
            if (r->items[i].state != ITEM_RETRY) continue;
            char *t = item_text(r, &r->items[i], err, errlen);
            r->items[i].state = ITEM_DONE; /* tried once in this sync */
            if (!t) continue;
            batch[n] = &r->items[i];
            texts[n++] = t;
        }
        if (!n) continue;
        float *m = NULL;
        char msg[512] = "";
        if (cm_embed_documents(r->p, (const char *const *)texts, n, &m, msg, sizeof msg) != CM_OK) {
            snprintf(r->e->last_error, sizeof r->e->last_error, "%s", msg);
            cm_logf(&r->e->lg, CM_LOG_WARN, "%s (vectors will be completed by a later sync)", msg);
            for (size_t k = 0; k < n; k++)
                free(texts[k]);
            break;
        }
        rc = cm_store_begin(r->st, err, errlen);
        for (size_t k = 0; k < n && !rc; k++)
            rc = put(r, batch[k], m + k * (size_t)r->p->dims, r->p->dims, err, errlen);
        if (!rc) rc = cm_store_commit(r->st, err, errlen);
        if (rc) cm_store_rollback(r->st);
        for (size_t k = 0; k < n; k++)
            free(texts[k]);
        free(m);
        if (rc) break;
    }
    return rc;
}

static void pending_free(pending *b)
{
    free(b->id);
    for (size_t i = 0; i < b->n; i++)
        free(b->hashes[i]);
    free(b->hashes);
    memset(b, 0, sizeof *b);
}

/* Drops pending batch i from the index and the list; its items not embedded
 * are marked for the synchronous retry. */
static cm_rc settle(run *r, size_t i, char *err, size_t errlen)
{
    pending *b = &r->pend[i];
    for (size_t k = 0; k < b->n; k++) {
        item *it = find(r, b->hashes[k]);
        if (!it) continue;
        if (it->state == ITEM_PENDING) {
            it->state = ITEM_RETRY;
            r->chunks_pending -= CM_MIN(r->chunks_pending, it->n);
        }
    }
    cm_rc rc = cm_store_batch_delete(r->st, b->id, err, errlen);
    pending_free(b);
    r->pend[i] = r->pend[--r->npend];
    return rc;
}

static void failed(run *r, const char *why, bool force_off)
{
    r->failures++;
    r->stats->batches_failed++;
    snprintf(r->e->batch_error, sizeof r->e->batch_error, "%s", why);
    /* kept in the index for status (best effort: a JSON string) */
    buf j = BUF_INIT;
    char e2[128];
    if (cm_utf8_add_json_str(&j, why, strlen(why)) == CM_OK)
        cm_store_meta_set(r->st, BATCH_ERROR_KEY, j.data, e2, sizeof e2);
    cm_buf_release(&j);
    if (force_off || r->failures >= EMBED_BATCH_FAILURE_LIMIT) r->off = true;
    cm_logf(&r->e->lg, CM_LOG_WARN,
            "%s batch failed (%d/%d); %s; its items are embedded synchronously: %s",
            cm_embed_name(r->p), r->failures, EMBED_BATCH_FAILURE_LIMIT,
            r->off ? "batch mode off for the rest of this sync" : "keeping batch mode", why);
}

typedef struct collect {
    run *r;
    size_t bad;
    char err[256]; /* why storing a result failed */
} collect;

static cm_rc on_item(void *ctx, const char *id, const float *v, int dims, const char *why)
{
    collect *c = ctx;
    item *it = find(c->r, id);
    if (!it || it->state == ITEM_DONE) return CM_OK; /* not ours, or already had */
    if (!v) {
        c->bad++;
        return CM_OK; /* left PENDING: settle() retries it */
    }
    (void)why;
    c->r->chunks_pending -= CM_MIN(c->r->chunks_pending, it->n);
    return put(c->r, it, v, dims, c->err, sizeof c->err);
}

/* Reads a completed batch's results into the index, then settles it. */
static cm_rc complete(run *r, size_t i, const embed_batch_status *s, bool *later, char *err,
                      size_t errlen)
{
    collect c = {r, 0, ""};
    char msg[512] = "";
    cm_rc rc = cm_store_begin(r->st, err, errlen);
    if (rc) return rc;
    cm_rc got = cm_embed_batch_results(r->p, s, on_item, &c, msg, sizeof msg);
    if (got && got != CM_EIO && got != CM_ENOTFOUND && got != CM_ETOOBIG) {
        cm_store_rollback(r->st);
        return cm_seterr(err, errlen, got, "%s", c.err[0] ? c.err : msg);
    }
    if (got && got != CM_EIO) { /* the output is gone or unreadable: what is not read is retried */
        snprintf(r->e->batch_error, sizeof r->e->batch_error, "%s", msg);
        cm_logf(&r->e->lg, CM_LOG_WARN, "%s (its items are embedded synchronously)", msg);
        got = CM_OK;
    }
    if (got) { /* the output could not be read now: kept for a later sync */
        cm_store_rollback(r->st);
        snprintf(r->e->batch_error, sizeof r->e->batch_error, "%s", msg);
        cm_logf(&r->e->lg, CM_LOG_WARN, "%s (the batch is read again by a later sync)", msg);
        for (size_t k = 0; k < r->pend[i].n; k++) { /* undo what the rollback undid */
            item *it = find(r, r->pend[i].hashes[k]);
            if (it && it->state == ITEM_DONE) {
                it->state = ITEM_PENDING;
                r->stats->chunks_embedded -= CM_MIN(r->stats->chunks_embedded, it->n);
            }
        }
        *later = true;
        return CM_OK;
    }
    rc = settle(r, i, err, errlen);
    if (!rc) rc = cm_store_commit(r->st, err, errlen);
    if (rc) cm_store_rollback(r->st);
    if (!rc) {
        r->stats->batches_completed++;
        r->failures = 0; /* recovered */
        if (c.bad)
            cm_logf(&r->e->lg, CM_LOG_INFO,
                    "%s batch: %zu items failed; embedding them synchronously", cm_embed_name(r->p),
                    c.bad);
    }
    return rc;
}

/* Builds the next batch from the items not yet covered, from *cursor on,
 * within the provider's limits. */
static cm_rc next_group(run *r, size_t *cursor, buf *jsonl, const char ***hashes, size_t *n,
                        char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf line = BUF_INIT;
    cm_buf_reset(jsonl);
    *n = 0;
    while (*cursor < r->nitems && *n < cm_embed_batch_max_requests()) {
        item *it = &r->items[*cursor];
        if (it->state != ITEM_NEW) {
            (*cursor)++;
            continue;
        }
        char *text = item_text(r, it, err, errlen);
        if (!text) { /* gone since: nothing to embed */
            it->state = ITEM_DONE;
            (*cursor)++;
            continue;
        }
        cm_buf_reset(&line);
        rc = cm_embed_batch_line(r->p, it->hash, text, &line);
        free(text);
        CHECK(rc);
        if (*n && jsonl->len + line.len > cm_embed_batch_max_bytes()) break;
        CHECK(cm_buf_add(jsonl, line.data, line.len));
        (*hashes)[(*n)++] = it->hash;
        (*cursor)++;
    }
out:
    cm_buf_release(&line);
    return rc;
}

/* Reports the batches' state; nonzero when the caller asks to stop. */
static int report(run *r)
{
    cm_engine *e = r->e;
    if (!e->batch_progress) return 0;
    cm_progress pr = {0};
    pr.batch_state = r->npend ? r->pend[0].state : "done";
    pr.batches_pending = r->npend;
    pr.batch_chunks = r->chunks_pending;
    return e->batch_progress(e->batch_pctx, &pr);
}

/* Whether this sync still holds the agent's batch lease (always over
 * SQLite); logs the loss once. */
static bool still_ours(run *r)
{
    if (r->lost) return false;
    if (cm_store_batches_leased(r->st)) return true;
    r->lost = true;
    cm_logf(&r->e->lg, CM_LOG_WARN,
            "the batch lease of agent %s was lost (its database session ended); its %s batches "
            "are left to the process that holds it now",
            r->e->cfg.agent_id, cm_embed_name(r->p));
    return false;
}

/* Submits one batch for the group in jsonl and records it. */
static cm_rc submit(run *r, const buf *jsonl, const char **hashes, size_t n, char *err,
                    size_t errlen)
{
    char *id = NULL, msg[512] = "";
    embed_batch_status s;
    cm_rc got = cm_embed_batch_submit(r->p, jsonl, n, &id, &s, &r->stats->batch_bytes_sent, msg,
                                      sizeof msg);
    if (got == CM_ENOMEM) return cm_seterr(err, errlen, got, "out of memory");
    if (got) {
        failed(r, msg, got == CM_ENOTFOUND);
        for (size_t k = 0; k < n; k++)
            find(r, hashes[k])->state = ITEM_RETRY;
        return CM_OK;
    }
    cm_rc rc = CM_OK;
    pending *np = realloc(r->pend, (r->npend + 1) * sizeof *np);
    if (!np) {
        free(id);
        return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    }
    r->pend = np;
    pending *b = &r->pend[r->npend];
    memset(b, 0, sizeof *b);
    b->id = id;
    snprintf(b->state, sizeof b->state, "%s", s.state[0] ? s.state : "submitted");
    b->hashes = calloc(n ? n : 1, sizeof *b->hashes);
    if (!b->hashes) {
        free(id);
        return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    }
    r->npend++;
    for (size_t k = 0; k < n; k++) {
        if (!(b->hashes[k] = cm_strdup(hashes[k])))
            return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
        b->n++;
        item *it = find(r, hashes[k]);
        it->state = ITEM_PENDING;
        r->chunks_pending += it->n;
    }
    store_batch row = {
        b->id, (char *)cm_embed_name(r->p), r->p->model, r->p->key_hash, b->state, 0, cm_wall_ms(),
        0};
    rc = cm_store_begin(r->st, err, errlen);
    if (!rc) rc = cm_store_batch_add(r->st, &row, hashes, n, err, errlen);
    if (!rc) rc = cm_store_commit(r->st, err, errlen);
    if (rc) cm_store_rollback(r->st);
    if (!rc) r->stats->batches_submitted++;
    return rc;
}

/* The batches recorded by earlier syncs: those of this provider, model and
 * key are resumed; others (settings changed since) are forgotten. */
static cm_rc resume(run *r, char *err, size_t errlen)
{
    store_batch *rows = NULL;
    size_t nrows = 0;
    cm_rc rc = cm_store_batches_list(r->st, &rows, &nrows, err, errlen);
    for (size_t i = 0; !rc && i < nrows; i++) {
        store_batch *row = &rows[i];
        if (strcmp(row->provider, cm_embed_name(r->p)) || strcmp(row->model, r->p->model) ||
            strcmp(row->key, r->p->key_hash)) {
            rc = cm_store_batch_delete(r->st, row->id, err, errlen);
            continue;
        }
        pending *np = realloc(r->pend, (r->npend + 1) * sizeof *np);
        if (!np) {
            rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
            break;
        }
        r->pend = np;
        pending *b = &r->pend[r->npend++];
        memset(b, 0, sizeof *b);
        b->id = row->id;
        row->id = NULL;
        snprintf(b->state, sizeof b->state, "%s", row->state);
        b->checked = row->updated;
        rc = cm_store_batch_hashes(r->st, b->id, &b->hashes, &b->n, err, errlen);
        for (size_t k = 0; !rc && k < b->n; k++) {
            item *it = find(r, b->hashes[k]);
            if (it && it->state == ITEM_NEW) {
                it->state = ITEM_PENDING;
                r->chunks_pending += it->n;
            }
        }
    }
    cm_store_batches_release(rows, nrows);
    return rc;
}

cm_rc cm_engine_fill_batch(cm_engine *e, store *st, cm_sync_stats *stats, bool *sync_rest,
                           char *err, size_t errlen)
{
    const cm_config *c = &e->cfg;
    run r = {.e = e, .st = st, .stats = stats, .p = &e->prov};
    cm_rc rc = CM_OK;
    buf jsonl = BUF_INIT;
    const char **hashes = NULL;
    bool wait = c->batch_wait && !e->batch_nowait;
    int concurrency = CM_MAX(1, c->batch_concurrency);
    bool leased = false;
    *sync_rest = false;
    rc = cm_store_batches_ensure(st, err, errlen);
    if (rc == CM_EIO && store_is_pg(st)) { /* an older database this role may not extend */
        cm_logf(&e->lg, CM_LOG_WARN, "%s; embedding synchronously", err);
        *sync_rest = true;
        rc = CM_OK;
        goto out;
    }
    CHECK(rc);
    /* an explicit sync waits for the lease as for the writer lock; a
     * search's or watcher's asks once */
    CHECK(cm_store_batches_lease(st, !e->batch_nowait, &leased, err, errlen));
    if (!leased) {
        cm_logf(&e->lg, CM_LOG_INFO,
                "another process submits and collects agent %s's embedding batches; its "
                "vectors come with that process's syncs",
                c->agent_id);
        goto out;
    }
    CHECK(load_items(&r, err, errlen));
    CHECK(from_cache(&r, err, errlen));
    CHECK(resume(&r, err, errlen));
    hashes = malloc(cm_embed_batch_max_requests() * sizeof *hashes);
    if (!hashes) CHECK(CM_ENOMEM);
    size_t cursor = 0;
    int64_t start = cm_embed_batch_now();
    for (;;) {
        if (!still_ours(&r)) break;
        /* submit while there is room */
        while (!r.off && (int)r.npend < concurrency && cursor < r.nitems) {
            size_t n = 0;
            CHECK(next_group(&r, &cursor, &jsonl, &hashes, &n, err, errlen));
            if (!n || !still_ours(&r)) break;
            CHECK(submit(&r, &jsonl, hashes, n, err, errlen));
        }
        cm_buf_release(&jsonl);
        if (r.lost) break;
        /* one status round */
        bool stalled = false;
        for (size_t i = 0; i < r.npend && !stalled;) {
            embed_batch_status s;
            char msg[512] = "";
            /* a search's sync asks at most once per poll interval */
            if (e->batch_nowait && cm_wall_ms() - r.pend[i].checked < c->batch_poll_ms) {
                i++;
                continue;
            }
            cm_rc got = cm_embed_batch_poll(r.p, r.pend[i].id, &s, msg, sizeof msg);
            if (got == CM_ENOMEM) CHECK(got);
            if (got == CM_ENOTFOUND) { /* the provider no longer knows it: as failed */
                memset(&s, 0, sizeof s);
                s.phase = EMBED_BATCH_FAILED;
                snprintf(s.state, sizeof s.state, "gone");
                snprintf(s.why, sizeof s.why, "%.200s", msg);
                got = CM_OK;
            }
            if (got) { /* the provider cannot say now: ask again on a later sync */
                snprintf(e->batch_error, sizeof e->batch_error, "%s", msg);
                cm_logf(&e->lg, CM_LOG_WARN, "%s (the batch is polled again by a later sync)", msg);
                stalled = true;
                break;
            }
            if (s.phase == EMBED_BATCH_COMPLETED) {
                bool later = false;
                CHECK(complete(&r, i, &s, &later, err, errlen));
                if (later) {
                    stalled = true;
                    break;
                }
                continue; /* pend[i] is another batch now */
            }
            if (s.phase == EMBED_BATCH_FAILED) {
                char why[600];
                snprintf(why, sizeof why, "%s batch %s %s: %s", cm_embed_name(r.p), r.pend[i].id,
                         s.state, s.why);
                failed(&r, why, false);
                CHECK(cm_store_begin(st, err, errlen));
                rc = settle(&r, i, err, errlen);
                if (!rc) rc = cm_store_commit(st, err, errlen);
                if (rc) cm_store_rollback(st);
                CHECK(rc);
                continue;
            }
            snprintf(r.pend[i].state, sizeof r.pend[i].state, "%s", s.state);
            r.pend[i].checked = cm_wall_ms();
            CHECK(cm_store_batch_state(st, r.pend[i].id, s.state, r.pend[i].checked, err, errlen));
            i++;
        }
        if (report(&r)) /* stopped: the batches stay recorded for a later sync */
            FAIL(CM_ECANCELED, "sync stopped while waiting for %s batches", cm_embed_name(r.p));
        /* failed items: synchronously, now */
        CHECK(retry_sync(&r, err, errlen));
        bool more = !r.off && cursor < r.nitems;
        if (stalled || !wait || (!r.npend && !more)) break;
        if (cm_embed_batch_now() - start > (int64_t)c->batch_timeout_min * 60000) {
            cm_logf(&e->lg, CM_LOG_WARN,
                    "%s batches still pending after %d minutes; a later sync collects them",
                    cm_embed_name(r.p), c->batch_timeout_min);
            break;
        }
        if (r.npend && (int)r.npend >= concurrency)
            cm_embed_batch_sleep(c->batch_poll_ms);
        else if (r.npend && !more)
            cm_embed_batch_sleep(c->batch_poll_ms);
    }
    *sync_rest = r.off && !r.lost; /* a lost lease: the holder embeds the rest */
    if (r.p->dims) {
        char d[32];
        snprintf(d, sizeof d, "%d", r.p->dims);
        CHECK(cm_store_meta_set(st, VECTOR_DIMS_KEY, d, err, errlen));
    }
    if (c->cache_enabled) CHECK(cm_store_cache_trim(st, c->cache_max_entries, err, errlen));
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    if (leased) cm_store_batches_unlease(st);
    stats->batches_pending = r.npend;
    cm_buf_release(&jsonl);
    free(hashes);
    for (size_t i = 0; i < r.npend; i++)
        pending_free(&r.pend[i]);
    free(r.pend);
    free(r.items);
    free(r.ids);
    sqlite3_finalize(r.text_q);
    return rc;
}

cm_rc cm_engine_batch_status(cm_engine *e, buf *out, char *err, size_t errlen)
{
    const cm_config *c = &e->cfg;
    store_batch *rows = NULL;
    size_t n = 0;
    cm_rc rc =
        cm_buf_printf(out,
                      ",\"batch\":{\"enabled\":%s,\"active\":%s,\"wait\":%s,\"concurrency\":%d,"
                      "\"pollIntervalMs\":%d,\"timeoutMinutes\":%d,\"pending\":[",
                      c->batch_enabled ? "true" : "false", cm_engine_batch_on(e) ? "true" : "false",
                      c->batch_wait ? "true" : "false", c->batch_concurrency, c->batch_poll_ms,
                      c->batch_timeout_min);
    if (!rc && e->st_open) rc = cm_store_batches_list(&e->st, &rows, &n, err, errlen);
    for (size_t i = 0; !rc && i < n; i++) {
        rc = cm_buf_adds(out, i ? ",{\"id\":" : "{\"id\":");
        if (!rc) rc = cm_utf8_add_json_str(out, rows[i].id, strlen(rows[i].id));
        if (!rc) rc = cm_buf_adds(out, ",\"provider\":");
        if (!rc) rc = cm_utf8_add_json_str(out, rows[i].provider, strlen(rows[i].provider));
        if (!rc) rc = cm_buf_adds(out, ",\"state\":");
        if (!rc) rc = cm_utf8_add_json_str(out, rows[i].state, strlen(rows[i].state));
        if (!rc)
            rc = cm_buf_printf(out, ",\"chunks\":%lld,\"submittedAt\":%lld}",
                               (long long)rows[i].items, (long long)rows[i].created);
    }
    if (!rc) rc = cm_buf_adds(out, "]");
    char *stored = NULL;
    if (!rc && !e->batch_error[0] && e->st_open)
        rc = cm_store_meta_get(&e->st, BATCH_ERROR_KEY, &stored, err, errlen);
    json_t *sj = stored ? json_loads(stored, JSON_DECODE_ANY, NULL) : NULL;
    const char *last = e->batch_error[0] ? e->batch_error : json_string_value(sj);
    if (!rc && last) {
        rc = cm_buf_adds(out, ",\"lastError\":");
        if (!rc) rc = cm_utf8_add_json_str(out, last, strlen(last));
    }
    json_decref(sj);
    free(stored);
    if (!rc) rc = cm_buf_adds(out, "}");
    cm_store_batches_release(rows, n);
    return rc;
}
