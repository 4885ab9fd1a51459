/*
 * fill_media.c — vectors for the chunks of multimodal memory's image and
 * audio files. Such a chunk's text is only its label; its bytes are read
 * again here, through the same descriptor walk as memory_get (no symbolic
 * link followed), checked against the chunk's hash (a file changed since it
 * was indexed waits for the next sync), and sent to Gemini Embedding 2 as an
 * inline data part, MEDIA_GROUP files at a time. The embedding cache serves
 * them as any chunk (the hash covers the bytes). A file the provider refuses
 * as too large is marked done without a vector (keyword search still finds
 * its label), as 2026.3.22 skips it; any other failure stops the filling and
 * the next sync retries.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "../base/path.h"
#include "../embed/multimodal.h"
#include "../index/media.h"
#include "../index/memfile.h"
#include "engine_int.h"

/* Media files read and embedded per round (each up to maxFileBytes). */
#define MEDIA_GROUP 4

bool cm_engine_media_chunk(const cm_engine *e, const pending_chunk *pc)
{
    return e->cfg.multimodal && pc->path && cm_index_media_kind(&e->cfg, pc->path);
}

/* Reads the bytes of a media chunk's file into data and its MIME type into
 * *mime; false when the file is gone, unreadable or not what was indexed. */
static bool read_media(cm_engine *e, const pending_chunk *pc, buf *data, const char **mime)
{
    char msg[512], hash[SHA256_HEX_LEN + 1];
    int fd = -1;
    struct stat st;
    buf label = BUF_INIT;
    bool ok = false;
    unsigned kind = cm_index_media_kind(&e->cfg, pc->path);
    cm_buf_reset(data);
    if (cm_index_memfile_open_media(&e->cfg, pc->path, &fd, &st, msg, sizeof msg) != CM_OK)
        goto out;
    if (cm_path_read_fd(fd, pc->path, (size_t)e->cfg.multimodal_max_bytes, data, msg, sizeof msg))
        goto out;
    *mime = cm_index_media_mime(pc->path, (const unsigned char *)(data->data ? data->data : ""),
                                data->len);
    if (!*mime || cm_index_media_chunk(kind, pc->path, *mime, data->data ? data->data : "",
                                       data->len, &label, hash) != CM_OK)
        goto out;
    ok = strcmp(hash, pc->hash) == 0;
out:
    if (fd >= 0) close(fd);
    cm_buf_release(&label);
    return ok;
}

/* Embeds the media chunks pcs[0..n) (bytes in data[]) and stores their
 * vectors; *stop when a failure should end this sync's filling. */
static cm_rc embed_group(cm_engine *e, store *st, pending_chunk **pcs, buf *data,
                         const char **mimes, size_t n, cm_sync_stats *stats, bool *stop, char *err,
                         size_t errlen)
{
    embed_provider *p = &e->prov;
    embed_media_doc docs[MEDIA_GROUP];
    memset(docs, 0, sizeof docs);
    for (size_t i = 0; i < n; i++)
        docs[i] = (embed_media_doc){.label = pcs[i]->text,
                                    .mime = mimes[i],
                                    .data = data[i].data ? data[i].data : "",
                                    .len = data[i].len};
    char msg[512];
    cm_rc rc = cm_embed_media(p, docs, n, msg, sizeof msg);
    if (rc == CM_ENOMEM) return cm_seterr(err, errlen, rc, "out of memory");
    if (rc) {
        snprintf(e->last_error, sizeof e->last_error, "%s", msg);
        cm_logf(&e->lg, CM_LOG_WARN, "%s (vectors will be completed by a later sync)", msg);
        *stop = true;
        return CM_OK;
    }
    size_t done = 0;
    if ((rc = cm_store_begin(st, err, errlen))) goto out;
    for (size_t i = 0; i < n && !rc; i++) {
        if (docs[i].vec) {
            rc = cm_store_vector_put(st, pcs[i]->id, docs[i].vec, p->dims, err, errlen);
            if (!rc && e->cfg.cache_enabled)
                rc = cm_store_cache_put(st, cm_embed_name(p), p->model, p->key_hash, pcs[i]->hash,
                                        docs[i].vec, p->dims, err, errlen);
            done++;
        } else if (docs[i].too_large) {
            /* marked done without a vector: retrying cannot help */
            cm_logf(&e->lg, CM_LOG_WARN, "%s: refused as too large, not embedded (%s)",
                    pcs[i]->path, docs[i].err);
            rc = cm_store_vector_put(st, pcs[i]->id, NULL, 0, err, errlen);
        } else {
            snprintf(e->last_error, sizeof e->last_error, "%s", docs[i].err);
            cm_logf(&e->lg, CM_LOG_WARN, "%s: %s (vectors will be completed by a later sync)",
                    pcs[i]->path, docs[i].err);
            *stop = true;
        }
    }
    if (!rc) rc = cm_store_commit(st, err, errlen);
    if (rc) cm_store_rollback(st);
    if (!rc) stats->chunks_embedded += done;
out:
    for (size_t i = 0; i < n; i++)
        free(docs[i].vec);
    return rc;
}

cm_rc cm_engine_fill_media(cm_engine *e, store *st, cm_sync_stats *stats, char *err, size_t errlen)
{
    if (!e->cfg.multimodal || !e->have_prov) return CM_OK;
    embed_provider *p = &e->prov;
    cm_rc rc = CM_OK;
    int64_t after = 0;
    pending_chunk *pc = NULL, *group[MEDIA_GROUP];
    const char *mimes[MEDIA_GROUP];
    buf data[MEDIA_GROUP];
    size_t n = 0, ng = 0;
    bool stop = false;
    for (size_t i = 0; i < MEDIA_GROUP; i++)
        cm_buf_init(&data[i], 0);
    while (!stop) {
        CHECK(cm_store_pending_vectors(st, after, 256, &pc, &n, err, errlen));
        if (n == 0) break;
        after = pc[n - 1].id;
        for (size_t i = 0; i < n && !stop; i++) {
            if (!cm_engine_media_chunk(e, &pc[i])) continue;
            float *v = NULL;
            int d = 0;
            if (e->cfg.cache_enabled)
                CHECK(cm_store_cache_get(st, cm_embed_name(p), p->model, p->key_hash, pc[i].hash,
                                         &v, &d, err, errlen));
            if (v && (!p->dims || d == p->dims)) {
                if (!p->dims) p->dims = d;
                rc = cm_store_vector_put(st, pc[i].id, v, d, err, errlen);
                free(v);
                CHECK(rc);
                stats->cache_hits++;
                continue;
            }
            free(v);
            if (!read_media(e, &pc[i], &data[ng], &mimes[ng])) {
                cm_logf(&e->lg, CM_LOG_INFO, "%s: changed since it was indexed; embedded next sync",
                        pc[i].path);
                continue;
            }
            group[ng++] = &pc[i];
            if (ng == MEDIA_GROUP) {
                CHECK(embed_group(e, st, group, data, mimes, ng, stats, &stop, err, errlen));
                ng = 0;
            }
        }
        if (ng && !stop)
            CHECK(embed_group(e, st, group, data, mimes, ng, stats, &stop, err, errlen));
        ng = 0;
        cm_store_pending_release(pc, n);
        pc = NULL;
        n = 0;
    }
out:
    cm_store_pending_release(pc, n);
    for (size_t i = 0; i < MEDIA_GROUP; i++)
        cm_buf_release(&data[i]);
    return rc;
}
