/*
 * store_values.c — what the SQLite store (store.c, vector_tables.c) and the
 * PostgreSQL store (store_pg.c) share, below both: the release of the
 * values they return, the message of a corrupt index and a chunk's keyword
 * text (CJK bigrams, unless the tokenizer is trigram).
 */
#include "../base/fs.h"
#include "../base/utf8.h"
#include "store.h"

cm_rc cm_store_corrupt(store *s, const char *what, char *err, size_t errlen)
{
    char clip[FS_CLIP_MAX + 1];
    return cm_seterr(err, errlen, CM_ECORRUPT,
                     "index is corrupt (a missing or invalid value in %s); run `clawmem index "
                     "--force` to rebuild it: %s",
                     what, cm_fs_clip(s->path ? s->path : "", clip));
}

void cm_store_stored_files_release(stored_files *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->v[i].path);
        free(f->v[i].hash);
    }
    free(f->v);
    memset(f, 0, sizeof *f);
}

cm_rc cm_store_keyword_text(const store *s, buf *out, const char *text, size_t n)
{
    cm_buf_reset(out);
    if (s->trigram) return cm_buf_add(out, text, n);
    return cm_utf8_cjk_expand(out, text, n);
}

void cm_store_pending_release(pending_chunk *p, size_t n)
{
    for (size_t i = 0; p && i < n; i++) {
        free(p[i].text);
        free(p[i].path);
    }
    free(p);
}

cm_rc cm_store_hit_strings(fts_hit *h, const char *path, const char *source, const char *text,
                           char *err, size_t errlen)
{
    h->path = cm_strdup(path);
    h->source = cm_strdup(source);
    h->text = cm_strdup(text);
    if (h->path && h->source && h->text) return CM_OK;
    free(h->path);
    free(h->source);
    free(h->text);
    memset(h, 0, sizeof *h);
    return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
}
