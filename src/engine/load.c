/*
 * load.c — one file of a sync read through its descriptor, hashed, checked
 * (binary, invalid UTF-8) and chunked; a session transcript first reduced to
 * what QuantumClaw indexes of it. Used by the incremental sync, the rebuild's
 * reader thread and memory_write's indexing alike.
 */
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>

#include "../base/utf8.h"
#include "../index/media.h"
#include "../session/extract.h"
#include "engine_int.h"

static cm_rc load_session(sync_run *r, const mem_file *f, char hash[SHA256_HEX_LEN + 1],
                          buf *problem);
static cm_rc load_media(sync_run *r, const mem_file *f, unsigned kind,
                        char hash[SHA256_HEX_LEN + 1], buf *problem);

/* A warning about a file: logged now, or kept for the writer's thread. */
__attribute__((format(printf, 2, 3))) static void load_warn(sync_run *r, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* Kept with its NUL, or (out of memory) lost whole, as a log line would be. */
    if (!r->log_later)
        cm_logf(&r->e->lg, CM_LOG_WARN, "%s", msg);
    else if (cm_buf_add(r->log_later, msg, strlen(msg) + 1) != CM_OK)
        return;
}

/* Reads, hashes, checks and chunks one file into r->chunks; r->size and
 * r->mtime_ns receive the fstat of the descriptor that was read (never a stat
 * by name). problem receives why the file is indexed imperfectly (binary: no
 * chunks; invalid UTF-8: chunked with U+FFFD), or stays empty. An unreadable
 * file is CM_EIO and is recorded as a transient problem of this sync. */
cm_rc cm_engine_load_file(sync_run *r, const mem_file *f, char hash[SHA256_HEX_LEN + 1],
                          buf *problem, char *err, size_t errlen)
{
    cm_buf_reset(&r->text);
    cm_buf_reset(&r->clean);
    cm_buf_reset(problem);
    cm_chunk_list_release(&r->chunks);
    char why[512];
    struct stat st;
    unsigned kind = strcmp(f->source, "memory") == 0 ? cm_index_media_kind(&r->e->cfg, f->rel) : 0;
    size_t max = kind ? (size_t)r->e->cfg.multimodal_max_bytes : (size_t)DISCOVER_MAX_FILE_BYTES;
    cm_rc rc = cm_index_file_reader_read(r->rd, f, max, &r->text, &st, why, sizeof why);
    if (rc == CM_ENOMEM) return cm_seterr(err, errlen, rc, "out of memory reading %s", f->rel);
    if (rc) {
        if (cm_index_problem_add(&r->problems, f->rel, "cannot read: %s", why)) return CM_ENOMEM;
        load_warn(r, "%s: cannot read: %s", f->rel, why);
        return CM_EIO;
    }
    r->size = st.st_size;
    r->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (strcmp(f->source, "sessions") == 0) return load_session(r, f, hash, problem);
    if (kind) return load_media(r, f, kind, hash, problem);
    return cm_engine_chunk_loaded(r, f, hash, problem);
}

/* An image or audio file of multimodal memory (r->text holds its bytes): one
 * chunk, lines 1-1, its label as text; its bytes are read again when it is
 * embedded (cm_engine_fill_media). A file whose content is not of its
 * extension's modality (a PDF named .png) is not indexed, as in 2026.3.22. */
static cm_rc load_media(sync_run *r, const mem_file *f, unsigned kind,
                        char hash[SHA256_HEX_LEN + 1], buf *problem)
{
    const unsigned char *d = (const unsigned char *)(r->text.data);
    size_t n = r->text.len;
    r->stats->bytes_read += n;
    const char *mime = cm_index_media_mime(f->rel, d, n);
    const char *want = cm_index_media_kind_name(kind);
    if (!mime || strncmp(mime, want, strlen(want)) != 0 || mime[strlen(want)] != '/') {
        cm_sha256_hex(d, n, hash);
        load_warn(r, "%s: content is %s, not %s; not indexed", f->rel, mime ? mime : "unknown",
                  want);
        return cm_buf_printf(problem, "content is %s, not %s; not indexed", mime ? mime : "unknown",
                             want);
    }
    buf label = BUF_INIT;
    cm_rc rc = cm_index_media_chunk(kind, f->rel, mime, d, n, &label, hash);
    chunk *nv = rc ? NULL : realloc(r->chunks.v, (r->chunks.n + 1) * sizeof *nv);
    if (!rc && !nv) rc = CM_ENOMEM;
    if (!rc) {
        r->chunks.v = nv;
        r->chunks.cap = r->chunks.n + 1;
        chunk *c = &r->chunks.v[r->chunks.n++];
        memset(c, 0, sizeof *c);
        c->start_line = c->end_line = 1;
        c->len = label.len;
        c->text = cm_buf_detach(&label);
        memcpy(c->hash, hash, sizeof c->hash);
    }
    cm_buf_release(&label);
    return rc;
}

/* A session transcript (r->text holds its JSONL): what QuantumClaw indexes
 * of it — "User: …" / "Assistant: …" lines, secrets redacted — chunked, and
 * each chunk's lines mapped back to the transcript's JSONL lines. */
static cm_rc load_session(sync_run *r, const mem_file *f, char hash[SHA256_HEX_LEN + 1],
                          buf *problem)
{
    session_doc d;
    cm_rc rc = cm_session_extract(r->text.data, r->text.len, &d);
    if (rc) return rc;
    cm_buf_reset(&r->text);
    rc = cm_buf_add(&r->text, d.text.data, d.text.len);
    if (!rc) rc = cm_engine_chunk_loaded(r, f, hash, problem);
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
    cm_session_doc_release(&d);
    return rc;
}

/* The part of cm_engine_load_file after the read: r->text holds the file's bytes. */
cm_rc cm_engine_chunk_loaded(sync_run *r, const mem_file *f, char hash[SHA256_HEX_LEN + 1],
                             buf *problem)
{
    cm_rc rc;
    const char *s = r->text.data;
    size_t n = r->text.len;
    r->stats->bytes_read += n;
    cm_sha256_hex(s, n, hash);
    const char *nul = memchr(s, 0, n);
    if (nul) {
        load_warn(r, "%s: binary file (NUL byte at offset %zu), not indexed", f->rel,
                  (size_t)(nul - s));
        return cm_buf_printf(problem, "binary file (NUL byte at offset %zu); not indexed",
                             (size_t)(nul - s));
    }
    size_t good = cm_utf8_valid_prefix(s, n);
    if (good != n) {
        load_warn(r, "%s: invalid UTF-8 at byte %zu; indexed with U+FFFD", f->rel, good);
        if ((rc = cm_buf_printf(
                 problem, "invalid UTF-8 at byte %zu; indexed with replacement characters", good)))
            return rc;
        if ((rc = cm_utf8_repair(&r->clean, s, n))) return rc;
        s = r->clean.data;
        n = r->clean.len;
    }
    return cm_chunk_text(s, n, r->e->cfg.chunk_tokens, r->e->cfg.chunk_overlap, &r->chunks);
}

/* Counts a file as done and asks the caller whether to go on. */
cm_rc cm_engine_report(sync_run *r, const mem_file *f, char *err, size_t errlen)
{
    r->prog.files_done++;
    r->prog.bytes_done += (uint64_t)f->size;
    if (r->progress && r->progress(r->pctx, &r->prog))
        return cm_seterr(err, errlen, CM_ECANCELED, "sync cancelled");
    return CM_OK;
}

/* Writes the transient problems of this sync into the meta table. */
cm_rc cm_engine_save_problems(store *st, const problem_list *pl, char *err, size_t errlen)
{
    buf b = BUF_INIT;
    cm_rc rc = cm_buf_addc(&b, '[');
    for (size_t i = 0; i < pl->n && !rc; i++) {
        if (i) rc = cm_buf_addc(&b, ',');
        if (!rc) rc = cm_buf_adds(&b, "{\"path\":");
        if (!rc) rc = cm_utf8_add_json_str(&b, pl->v[i].path, strlen(pl->v[i].path));
        if (!rc) rc = cm_buf_adds(&b, ",\"problem\":");
        if (!rc) rc = cm_utf8_add_json_str(&b, pl->v[i].what, strlen(pl->v[i].what));
        if (!rc) rc = cm_buf_addc(&b, '}');
    }
    if (!rc) rc = cm_buf_addc(&b, ']');
    if (!rc) rc = cm_store_meta_set(st, STORE_PROBLEMS_KEY, b.data, err, errlen);
    cm_buf_release(&b);
    return rc;
}
