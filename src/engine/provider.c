/*
 * provider.c — the embedding provider: memorySearch.provider or the seeds'
 * auto-select order, the fallback when it cannot serve (at open, or when a
 * local model fails to download or load), and the filling of the index's
 * missing vectors, from the embedding cache or the provider.
 */
#include "../net/download.h"
#include "engine_int.h"

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
        if (cm_embed_open(c, c->fallback, &e->prov, why2, sizeof why2) == CM_OK) {
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
    snprintf(e->provider, sizeof e->provider, "%s",
             e->have_prov ? cm_embed_name(&e->prov) : "none");
    snprintf(e->model, sizeof e->model, "%s", e->have_prov ? e->prov.model : "");
}

/* The embedding provider: memorySearch.provider, or the seeds' auto-select
 * order; memorySearch.fallback when the primary cannot be set up; none (the
 * keyword-only search) otherwise. No network is touched here, and a local
 * model is only named: cm_engine_provider_ready() loads it. */
void cm_engine_choose_provider(cm_engine *e)
{
    const cm_config *c = &e->cfg;
    const char *want = c->provider;
    if (!strcmp(want, "auto")) want = cm_embed_auto(c); /* NULL: no key anywhere, as QuantumClaw */
    char why[512] = "";
    if (want && strcmp(want, "none") != 0) {
        if (cm_embed_open(c, want, &e->prov, why, sizeof why) == CM_OK)
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
    cm_embed_close(&e->prov);
    e->have_prov = false;
    fall_back(e, "local", msg);
    name_provider(e);
}

/* Finishes setting up a local provider: downloads its model when it is not
 * in the cache yet (a sync; a search does not wait for a download, it
 * searches keywords until the model is there), and loads it. When that fails
 * the fallback takes over for the engine's life, as in QuantumClaw; a
 * cancelled download does not count as a failure (it resumes next time). */
void cm_engine_provider_ready(cm_engine *e, bool fetch, cm_progress_fn progress, void *progress_ctx)
{
    if (!e->have_prov || e->prov.kind != EMBED_LOCAL || e->prov.lm) return;
    download_ctx d = {progress, progress_ctx, e->prov.model};
    char why[600];
    cm_rc rc = cm_embed_prepare(&e->prov, fetch, on_download, &d, why, sizeof why);
    if (rc == CM_OK || rc == CM_ECANCELED) return;
    if (rc == CM_ENOTFOUND && !fetch && !strncmp(e->prov.model, "hf:", 3)) return; /* not yet */
    local_unavailable(e, why);
}

/* For status, without loading a model: a local model whose download failed
 * lately (download.h) is not waited for; the fallback serves, as after a
 * failed sync. */
void cm_engine_provider_check(cm_engine *e)
{
    if (!e->have_prov || e->prov.kind != EMBED_LOCAL || e->prov.lm) return;
    char why[600], *path = NULL;
    if (cm_net_model_resolve(e->prov.model, e->prov.local_cache, false, NULL, NULL, &path, why,
                             sizeof why) == CM_EIO)
        local_unavailable(e, why);
    free(path);
}

/* Chunks embedded per request round during a sync. */
#define EMBED_ROUND 256

/* Gives every chunk without a vector one: from the embedding cache when the
 * same text was embedded before, else from the provider, EMBED_ROUND chunks
 * per round, each round committed on its own. A provider failure stops the
 * filling (the keyword index is complete either way; the next sync resumes)
 * and is recorded for status. */
cm_rc cm_engine_fill_vectors(cm_engine *e, store *st, cm_sync_stats *stats, char *err,
                             size_t errlen)
{
    if (!e->have_prov) return CM_OK;
    cm_rc mrc = cm_engine_fill_media(e, st, stats, err, errlen); /* image and audio files first */
    if (mrc) return mrc;
    if (cm_engine_batch_on(e)) { /* remote.batch: through the batch API (batch_fill.c) */
        bool rest = false;
        cm_rc brc = cm_engine_fill_batch(e, st, stats, &rest, err, errlen);
        if (brc || !rest) return brc;
    }
    embed_provider *p = &e->prov;
    const cm_config *c = &e->cfg;
    const char *name = cm_embed_name(p);
    cm_rc rc = CM_OK;
    int64_t after = 0;
    pending_chunk *pc = NULL;
    size_t n = 0;
    float **vecs = NULL, *fresh = NULL;
    const char **texts = NULL;
    size_t *miss = NULL;
    for (;;) {
        CHECK(cm_store_pending_vectors(st, after, EMBED_ROUND, &pc, &n, err, errlen));
        if (n == 0) break;
        after = pc[n - 1].id;
        vecs = calloc(n, sizeof *vecs);
        texts = calloc(n, sizeof *texts);
        miss = calloc(n, sizeof *miss);
        if (!vecs || !texts || !miss) CHECK(CM_ENOMEM);
        size_t nmiss = 0;
        for (size_t i = 0; i < n; i++) {
            int d = 0;
            if (cm_engine_media_chunk(e, &pc[i])) continue; /* cm_engine_fill_media's */
            if (c->cache_enabled)
                CHECK(cm_store_cache_get(st, name, p->model, p->key_hash, pc[i].hash, &vecs[i], &d,
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
            if (cm_embed_documents(p, texts, nmiss, &fresh, msg, sizeof msg) != CM_OK) {
                snprintf(e->last_error, sizeof e->last_error, "%s", msg);
                cm_logf(&e->lg, CM_LOG_WARN, "%s (vectors will be completed by a later sync)", msg);
                failed = true;
                nmiss = 0;
            }
        }
        CHECK(cm_store_begin(st, err, errlen));
        for (size_t i = 0; i < n; i++) {
            if (!vecs[i]) continue;
            rc = cm_store_vector_put(st, pc[i].id, vecs[i], p->dims, err, errlen);
            if (rc) break;
        }
        for (size_t j = 0; !rc && j < nmiss; j++) {
            float *v = fresh + j * (size_t)p->dims;
            bool zero = true;
            for (int d = 0; d < p->dims && zero; d++)
                zero = v[d] == 0;
            /* an all-zero vector cannot be searched: a row of 0 dimensions marks it done */
            rc = cm_store_vector_put(st, pc[miss[j]].id, v, zero ? 0 : p->dims, err, errlen);
            if (!rc && !zero && c->cache_enabled)
                rc = cm_store_cache_put(st, name, p->model, p->key_hash, pc[miss[j]].hash, v,
                                        p->dims, err, errlen);
        }
        if (!rc) rc = cm_store_commit(st, err, errlen);
        if (rc) cm_store_rollback(st);
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
        cm_store_pending_release(pc, n);
        pc = NULL;
        if (failed) break;
    }
    if (p->dims) {
        char d[32];
        snprintf(d, sizeof d, "%d", p->dims);
        CHECK(cm_store_meta_set(st, VECTOR_DIMS_KEY, d, err, errlen));
    }
    if (c->cache_enabled) CHECK(cm_store_cache_trim(st, c->cache_max_entries, err, errlen));
out:
    for (size_t i = 0; vecs && i < n; i++)
        free(vecs[i]);
    free(vecs);
    free(texts);
    free(miss);
    free(fresh);
    cm_store_pending_release(pc, n);
    return rc;
}
