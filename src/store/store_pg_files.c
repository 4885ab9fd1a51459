/*
 * store_pg_files.c — a file's rows in the PostgreSQL store: its chunks and
 * its row written (a rebuild's in batches of files sent without waiting),
 * replaced, touched and deleted (store_pg.c's head describes the tables).
 */
#include <time.h>

#include "store_pg_files.h"
#include "store_pg_int.h"

/* ---- file writes ---------------------------------------------------------- */

static cm_rc delete_chunks(store *s, const char *path, char *err, size_t errlen)
{
    PGresult *r = NULL;
    int64_t next;
    cm_rc rc = cm_store_pg_log_next(s, &next, err, errlen);
    if (rc) return rc;
    char base[32];
    snprintf(base, sizeof base, "%lld", (long long)(next - 1));
    const char *pa[] = {s->pg->agent, path, base};
    /* each deleted vector logged, numbered on from the last entry */
    rc = cm_store_pg_run(
        s,
        "WITH d AS (DELETE FROM clawmem_vectors v USING clawmem_chunks c WHERE v.agent_id = $1 "
        "AND c.agent_id = $1 AND c.path = $2 AND v.chunk_id = c.id RETURNING v.chunk_id), l AS "
        "(INSERT INTO clawmem_vector_log(agent_id, seq, chunk_id) SELECT $1, $3::bigint + "
        "row_number() OVER (ORDER BY chunk_id), chunk_id FROM d RETURNING 1) SELECT count(*) "
        "FROM l",
        3, pa, "delete vectors", &r, err, errlen);
    if (!rc) {
        /* log_next took one number; the entries took count */
        s->pg->nlog += strtoll(cm_store_pg_lib.getvalue(r, 0, 0), NULL, 10) - 1;
        cm_store_pg_lib.clear(r);
        r = NULL;
    }
    if (!rc)
        rc = cm_store_pg_run(
            s,
            "WITH d AS (DELETE FROM clawmem_chunks WHERE agent_id = $1 AND path = $2 "
            "RETURNING ntok) SELECT count(*), coalesce(sum(ntok), 0) FROM d",
            2, pa, "delete chunks", &r, err, errlen);
    if (!rc) {
        s->pg->dchunks -= strtoll(cm_store_pg_lib.getvalue(r, 0, 0), NULL, 10);
        s->pg->dntok -= strtoll(cm_store_pg_lib.getvalue(r, 0, 1), NULL, 10);
        cm_store_pg_lib.clear(r);
    }
    return rc;
}

/* Chunks go in one statement per batch of files (arrays unnested: one
 * element per chunk, its file's path and source repeated), the tsvector and
 * its token count computed by the server; the agent's chunk and token
 * totals (BM25's N and average length) change by what each insert and
 * delete returns, applied at commit. OFFSET 0 keeps the lateral subquery
 * whole: pulled up, its to_tsvector would run once for each use of tsv. */
static const char insert_chunks_sql[] =
    "WITH i AS (INSERT INTO clawmem_chunks(agent_id, path, source, start_line, end_line, hash, "
    "text, updated_at, tsv, ntok) SELECT $1, t.p, t.so, t.sl, t.el, t.h, t.tx, t.u, v.tsv, "
    "(SELECT coalesce(sum(cardinality(positions)), 0) FROM unnest(v.tsv)) FROM unnest($2::text[], "
    "$3::text[], $4::int[], $5::int[], $6::text[], $7::text[], $8::bigint[], $9::text[]) WITH "
    "ORDINALITY AS t(p, so, sl, el, h, tx, u, kw, i) CROSS JOIN LATERAL (SELECT "
    "to_tsvector($10::regconfig, t.kw) AS tsv OFFSET 0) v ORDER BY t.i RETURNING ntok) SELECT "
    "count(*), "
    "coalesce(sum(ntok), 0) FROM i";

/* A rebuild's batch, one statement sent without waiting for it (the next
 * statement reads its result first): the chunks as insert_chunks_sql
 * ($1..$10), the files' rows as upsert_files_sql ($11..$16; a rebuild's
 * agent has none to conflict with). */
static const char insert_batch_sql[] =
    "WITH i AS (INSERT INTO clawmem_chunks(agent_id, path, source, start_line, end_line, hash, "
    "text, updated_at, tsv, ntok) SELECT $1, t.p, t.so, t.sl, t.el, t.h, t.tx, t.u, v.tsv, "
    "(SELECT coalesce(sum(cardinality(positions)), 0) FROM unnest(v.tsv)) FROM unnest($2::text[], "
    "$3::text[], $4::int[], $5::int[], $6::text[], $7::text[], $8::bigint[], $9::text[]) WITH "
    "ORDINALITY AS t(p, so, sl, el, h, tx, u, kw, i) CROSS JOIN LATERAL (SELECT "
    "to_tsvector($10::regconfig, t.kw) AS tsv OFFSET 0) v ORDER BY t.i RETURNING ntok), "
    "f AS (INSERT INTO clawmem_files(agent_id, path, source, hash, mtime, size, problem) SELECT "
    "$1, t.p, t.so, t.h, t.m, t.sz, t.pr FROM unnest($11::text[], $12::text[], $13::text[], "
    "$14::bigint[], $15::bigint[], $16::text[]) AS t(p, so, h, m, sz, pr) RETURNING 1) "
    "SELECT count(*), coalesce(sum(ntok), 0), (SELECT count(*) FROM f) FROM i";

/* insert_chunks_sql and insert_batch_sql for an agent lexed here
 * (store_pg_lex.c): $9 holds each chunk's tsvector literal, $10 its token
 * count; the server only parses them. */
#define LEX_CHUNKS                                                                                 \
    "WITH i AS (INSERT INTO clawmem_chunks(agent_id, path, source, start_line, end_line, hash, "   \
    "text, updated_at, tsv, ntok) SELECT $1, t.p, t.so, t.sl, t.el, t.h, t.tx, t.u, t.kw, t.n "    \
    "FROM unnest($2::text[], $3::text[], $4::int[], $5::int[], $6::text[], $7::text[], "          \
    "$8::bigint[], $9::tsvector[], $10::int[]) WITH ORDINALITY AS t(p, so, sl, el, h, tx, u, kw, " \
    "n, i) ORDER BY t.i RETURNING ntok)"
static const char insert_chunks_lex_sql[] = LEX_CHUNKS
    " SELECT count(*), coalesce(sum(ntok), 0) FROM i";
static const char insert_batch_lex_sql[] = LEX_CHUNKS
    ", f AS (INSERT INTO clawmem_files(agent_id, path, source, hash, mtime, size, problem) SELECT "
    "$1, t.p, t.so, t.h, t.m, t.sz, t.pr FROM unnest($11::text[], $12::text[], $13::text[], "
    "$14::bigint[], $15::bigint[], $16::text[]) AS t(p, so, h, m, sz, pr) RETURNING 1) "
    "SELECT count(*), coalesce(sum(ntok), 0), (SELECT count(*) FROM f) FROM i";

/* The files' rows of a batch, one statement. */
static const char upsert_files_sql[] =
    "INSERT INTO clawmem_files(agent_id, path, source, hash, mtime, size, problem) SELECT $1, "
    "t.p, t.so, t.h, t.m, t.sz, t.pr FROM unnest($2::text[], $3::text[], $4::text[], "
    "$5::bigint[], $6::bigint[], $7::text[]) AS t(p, so, h, m, sz, pr) ON CONFLICT (agent_id, "
    "path) DO UPDATE SET source = excluded.source, hash = excluded.hash, mtime = excluded.mtime, "
    "size = excluded.size, problem = excluded.problem";

/* A rebuild sends its files in batches of this many, or of this many bytes
 * of chunk text, whichever comes first. */
#define PG_BATCH_FILES 512
#define PG_BATCH_BYTES (8u << 20)

/* Appends s[0..n) as a quoted element of a PostgreSQL array literal. */
static cm_rc array_sep(buf *b)
{
    if (!b->len) return cm_buf_addc(b, '{');
    return b->data[b->len - 1] == '{' ? CM_OK : cm_buf_addc(b, ',');
}

cm_rc cm_store_pg_array_elem(buf *b, const char *s, size_t n)
{
    cm_rc rc = array_sep(b);
    if (!rc) rc = cm_buf_addc(b, '"');
    for (size_t i = 0; !rc && i < n; i++) {
        if (s[i] == 0) continue; /* text holds no NUL */
        if (s[i] == '"' || s[i] == '\\') rc = cm_buf_addc(b, '\\');
        if (!rc) rc = cm_buf_addc(b, s[i]);
    }
    return rc ? rc : cm_buf_addc(b, '"');
}

static cm_rc array_int(buf *b, int64_t v)
{
    cm_rc rc = array_sep(b);
    return rc ? rc : cm_buf_printf(b, "%lld", (long long)v);
}

/* ASCII punctuation becomes a space, so that PostgreSQL's parser splits the
 * text where unicode61 (and query.c) do: "foo@bar.com", "e-mail", "3.14" and
 * URLs are words apart, not one token (plus parts) as its parser makes them. */
static void words_apart(buf *b)
{
    for (size_t i = 0; i < b->len; i++) {
        unsigned char ch = (unsigned char)b->data[i];
        if (ch < 0x80 && ch > ' ' &&
            !((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')))
            b->data[i] = ' ';
    }
}

static cm_rc array_null(buf *b)
{
    cm_rc rc = array_sep(b);
    return rc ? rc : cm_buf_adds(b, "NULL");
}

void cm_store_pg_drop_pending(struct store_pg *p)
{
    for (size_t k = 0; k < ARRAY_LEN(p->pend_chunks); k++)
        cm_buf_reset(&p->pend_chunks[k]);
    for (size_t k = 0; k < ARRAY_LEN(p->pend_files); k++)
        cm_buf_reset(&p->pend_files[k]);
    p->npend = 0;
    cm_buf_reset(&p->copybuf);
}

/* ---- a rebuild's chunks by COPY --------------------------------------------- */

/* A rebuild lexed here streams its chunks in COPY's binary form, one COPY
 * open across its files: the server stores each row as it arrives while
 * this process reads and lexes the next files, and parses no literal (the
 * array and tsvector literals were most of its parsing, docs/BENCHMARKS.md).
 * The rows take their ids in file order, as the batch inserts did. The
 * files' rows wait in the pending arrays and are written when the COPY
 * ends: at the next other statement, at commit, or after PG_COPY_FILES
 * files. */
static const char copy_chunks_sql[] =
    "COPY clawmem_chunks(agent_id, path, source, start_line, end_line, hash, text, updated_at, "
    "tsv, ntok) FROM STDIN (FORMAT binary)";
#define PG_COPY_FILES  8192
#define PG_COPY_FLUSH  (1u << 20) /* bytes handed to libpq at a time */
#define PG_COPY_FIELDS 10

static cm_rc put_be(buf *b, uint64_t v, int n)
{
    unsigned char o[8];
    for (int i = 0; i < n; i++)
        o[i] = (unsigned char)(v >> (8 * (n - 1 - i)));
    return cm_buf_add(b, o, (size_t)n);
}

/* A field of text: its length, then its bytes without NUL (text holds
 * none, the server refuses them). */
static cm_rc put_text(buf *b, const char *t, size_t n)
{
    size_t nul = 0;
    for (const char *c = memchr(t, 0, n); c; c = memchr(c + 1, 0, n - (size_t)(c + 1 - t)))
        nul++;
    if (n - nul > INT32_MAX) return CM_EINVAL;
    cm_rc rc = put_be(b, n - nul, 4);
    if (rc || !nul) return rc ? rc : cm_buf_add(b, t, n);
    for (size_t i = 0; !rc && i < n; i++)
        if (t[i]) rc = cm_buf_addc(b, t[i]);
    return rc;
}

static cm_rc copy_send(store *s, char *err, size_t errlen)
{
    struct store_pg *p = s->pg;
    if (!p->copybuf.len) return CM_OK;
    if (cm_store_pg_lib.put_copy_data(p->conn, p->copybuf.data, (int)p->copybuf.len) != 1)
        return cm_store_pg_fail(s, NULL, "copy chunks", err, errlen);
    cm_buf_reset(&p->copybuf);
    return CM_OK;
}

/* Opens the COPY (any batch in flight read first) with its header. */
static cm_rc copy_begin(store *s, char *err, size_t errlen)
{
    struct store_pg *p = s->pg;
    cm_rc rc = CM_OK;
    if (p->inflight) CHECK(cm_store_pg_collect_batch(s, err, errlen));
    p->round_trips++;
    PGresult *r = cm_store_pg_lib.exec(p->conn, copy_chunks_sql);
    if (!r || cm_store_pg_lib.result_status(r) != PGRES_COPY_IN) {
        rc = cm_store_pg_fail(s, r, "copy chunks", err, errlen);
        if (r) cm_store_pg_lib.clear(r);
        goto out;
    }
    cm_store_pg_lib.clear(r);
    p->copying = true;
    cm_buf_reset(&p->copybuf);
    CHECK(cm_buf_add(&p->copybuf, "PGCOPY\n\377\r\n", 11)); /* signature, with its NUL */
    CHECK(put_be(&p->copybuf, 0, 4));                      /* flags */
    CHECK(put_be(&p->copybuf, 0, 4));                      /* header extension */
out:
    return rc;
}

/* Ends the COPY: its last rows and trailer sent, its result read (a
 * failure of any row is this call's). */
static cm_rc copy_end(store *s, char *err, size_t errlen)
{
    struct store_pg *p = s->pg;
    cm_rc rc = put_be(&p->copybuf, 0xffff, 2);
    p->copying = false;
    if (!rc) rc = copy_send(s, err, errlen);
    if (cm_store_pg_lib.put_copy_end(p->conn, rc ? "failed" : NULL) != 1 && !rc)
        rc = cm_store_pg_fail(s, NULL, "copy chunks", err, errlen);
    PGresult *r;
    while ((r = cm_store_pg_lib.get_result(p->conn)) != NULL) {
        if (!rc && !cm_store_pg_ok(r)) rc = cm_store_pg_fail(s, r, "copy chunks", err, errlen);
        cm_store_pg_lib.clear(r);
    }
    cm_buf_reset(&p->copybuf);
    return rc;
}

void cm_store_pg_copy_abort(store *s)
{
    struct store_pg *p = s->pg;
    if (!p || !p->copying) return;
    p->copying = false;
    cm_buf_reset(&p->copybuf);
    cm_store_pg_lib.put_copy_end(p->conn, "rolled back");
    PGresult *r;
    while ((r = cm_store_pg_lib.get_result(p->conn)) != NULL)
        cm_store_pg_lib.clear(r);
}

/* One chunk's row: the chunk and its file's columns, its tsvector lexed
 * here; the agent's totals move by it (the server returns nothing). */
static cm_rc copy_chunk(store *s, const char *path, const char *source, const chunk *c, int64_t now,
                        char *err, size_t errlen)
{
    struct store_pg *p = s->pg;
    buf *b = &p->copybuf;
    cm_rc rc = CM_OK;
    int64_t ntok = 0;
    CHECK(put_be(b, PG_COPY_FIELDS, 2));
    CHECK(put_text(b, p->agent, strlen(p->agent)));
    CHECK(put_text(b, path, strlen(path)));
    CHECK(put_text(b, source, strlen(source)));
    CHECK(put_be(b, 4, 4));
    CHECK(put_be(b, (uint32_t)c->start_line, 4));
    CHECK(put_be(b, 4, 4));
    CHECK(put_be(b, (uint32_t)c->end_line, 4));
    CHECK(put_text(b, c->hash, SHA256_HEX_LEN));
    CHECK(put_text(b, c->text, c->len));
    CHECK(put_be(b, 8, 4));
    CHECK(put_be(b, (uint64_t)(c->time_s ? c->time_s : now), 8));
    CHECK(cm_store_keyword_text(s, &s->scratch, c->text, c->len));
    size_t at = b->len; /* the tsvector's length, known after it */
    CHECK(put_be(b, 0, 4));
    CHECK(cm_store_pg_lex_doc_bin(s, s->scratch.data, s->scratch.len, b, &ntok));
    size_t n = b->len - at - 4;
    if (n > INT32_MAX || ntok > INT32_MAX) CHECK(CM_EINVAL);
    for (int i = 0; i < 4; i++)
        b->data[at + (size_t)i] = (char)(unsigned char)(n >> (8 * (3 - i)));
    CHECK(put_be(b, 4, 4));
    CHECK(put_be(b, (uint32_t)ntok, 4));
    p->dchunks++;
    p->dntok += ntok;
    p->unmerged = true;
    if (b->len >= PG_COPY_FLUSH) {
        rc = copy_send(s, err, errlen);
        if (!rc) cm_store_pg_merge_aside(s); /* the server has more rows: merge them beside */
    }
out:
    return rc;
}

/* Reads the result of the batch in flight: its chunk and token totals
 * count, its failure is this call's. */
cm_rc cm_store_pg_collect_batch(store *s, char *err, size_t errlen)
{
    struct store_pg *p = s->pg;
    cm_rc rc = CM_OK;
    PGresult *r;
    p->inflight = false;
    while ((r = cm_store_pg_lib.get_result(p->conn)) != NULL) {
        if (!rc && !cm_store_pg_ok(r)) {
            rc = cm_store_pg_fail(s, r, "insert chunks", err, errlen);
        } else if (!rc && cm_store_pg_lib.ntuples(r) == 1) {
            p->dchunks += strtoll(cm_store_pg_lib.getvalue(r, 0, 0), NULL, 10);
            p->dntok += strtoll(cm_store_pg_lib.getvalue(r, 0, 1), NULL, 10);
            p->unmerged = true;
        }
        cm_store_pg_lib.clear(r);
    }
    return rc;
}

/* A rebuild's batch: sent with the arrays closed, read by the next
 * statement (collect_batch), so the server indexes it while this process
 * reads and chunks the next files. */
static cm_rc send_batch(store *s, char *err, size_t errlen)
{
    struct store_pg *p = s->pg;
    cm_rc rc = CM_OK;
    for (size_t k = 0; k < ARRAY_LEN(p->pend_chunks); k++)
        CHECK(p->pend_chunks[k].len ? cm_buf_addc(&p->pend_chunks[k], '}')
                                    : cm_buf_adds(&p->pend_chunks[k], "{}"));
    const char *pa[16] = {p->agent};
    for (size_t k = 0; k < 8; k++)
        pa[1 + k] = p->pend_chunks[k].data;
    pa[9] = p->lexer ? p->pend_chunks[8].data : p->tsconfig;
    for (size_t k = 0; k < ARRAY_LEN(p->pend_files); k++)
        pa[10 + k] = p->pend_files[k].data;
    p->round_trips++;
    if (!cm_store_pg_lib.send_query_params(p->conn,
                                           p->lexer ? insert_batch_lex_sql : insert_batch_sql, 16,
                                           NULL, pa, NULL, NULL, 0)) {
        rc = cm_store_pg_fail(s, NULL, "insert chunks", err, errlen);
        goto out;
    }
    p->inflight = true;
out:
    return rc;
}

/* Closes the pending arrays and writes them: the chunks of every pending
 * file in one statement, their rows in another (a rebuild: one statement,
 * not waited for). */
cm_rc cm_store_pg_flush_files(store *s, char *err, size_t errlen)
{
    struct store_pg *p = s->pg;
    cm_rc rc = CM_OK;
    size_t nfiles = p->npend;
    p->npend = 0; /* the statements below run through cm_store_pg_run */
    if (p->copying) CHECK(copy_end(s, err, errlen)); /* the chunks first */
    if (!nfiles) return CM_OK;
    if (p->inflight) CHECK(cm_store_pg_collect_batch(s, err, errlen)); /* one statement at a time */
    for (size_t k = 0; k < ARRAY_LEN(p->pend_files); k++)
        CHECK(cm_buf_addc(&p->pend_files[k], '}'));
    if (p->fresh) {
        CHECK(send_batch(s, err, errlen));
        goto out;
    }
    if (p->pend_chunks[0].len) {
        for (size_t k = 0; k < ARRAY_LEN(p->pend_chunks); k++)
            CHECK(cm_buf_addc(&p->pend_chunks[k], '}'));
        const char *pa[10] = {p->agent};
        for (size_t k = 0; k < 8; k++)
            pa[1 + k] = p->pend_chunks[k].data;
        pa[9] = p->lexer ? p->pend_chunks[8].data : p->tsconfig;
        PGresult *r = NULL;
        CHECK(cm_store_pg_run(s, p->lexer ? insert_chunks_lex_sql : insert_chunks_sql, 10, pa,
                              "insert chunks", &r, err, errlen));
        p->dchunks += strtoll(cm_store_pg_lib.getvalue(r, 0, 0), NULL, 10);
        p->dntok += strtoll(cm_store_pg_lib.getvalue(r, 0, 1), NULL, 10);
        p->unmerged = true;
        cm_store_pg_lib.clear(r);
    }
    const char *pf[7] = {p->agent};
    for (size_t k = 0; k < ARRAY_LEN(p->pend_files); k++)
        pf[1 + k] = p->pend_files[k].data;
    CHECK(cm_store_pg_run(s, upsert_files_sql, 7, pf, "write file rows", NULL, err, errlen));
out:
    cm_store_pg_drop_pending(p);
    return rc;
}

cm_rc cm_store_pg_file_replace(store *s, const char *path, const char *source, const char *hash,
                               int64_t mtime_ns, int64_t size, const char *problem,
                               const chunk_list *chunks, char *err, size_t errlen)
{
    struct store_pg *p = s->pg;
    bool own;
    cm_rc rc = cm_store_pg_w_begin(s, &own, err, errlen);
    if (rc) return rc;
    if (!p->fresh) CHECK(delete_chunks(s, path, err, errlen));
    buf *a = p->pend_chunks, *f = p->pend_files;
    if (!p->npend) { /* a new batch: every array opens */
        for (size_t k = 0; k < ARRAY_LEN(p->pend_chunks); k++)
            cm_buf_reset(&a[k]);
        for (size_t k = 0; k < ARRAY_LEN(p->pend_files); k++)
            CHECK(cm_buf_addc(&f[k], '{'));
    }
    p->npend++;
    int64_t now = (int64_t)time(NULL);
    size_t plen = strlen(path), slen = strlen(source);
    bool copy = p->fresh && p->lexer; /* a rebuild lexed here: by COPY */
    if (copy && !p->copying && chunks->n) CHECK(copy_begin(s, err, errlen));
    for (size_t i = 0; copy && i < chunks->n; i++)
        CHECK(copy_chunk(s, path, source, &chunks->v[i], now, err, errlen));
    for (size_t i = 0; !copy && i < chunks->n; i++) {
        const chunk *c = &chunks->v[i];
        if (!a[0].len)
            for (size_t k = 0; k < ARRAY_LEN(p->pend_chunks); k++)
                CHECK(cm_buf_addc(&a[k], '{'));
        CHECK(cm_store_pg_array_elem(&a[0], path, plen));
        CHECK(cm_store_pg_array_elem(&a[1], source, slen));
        CHECK(array_int(&a[2], c->start_line));
        CHECK(array_int(&a[3], c->end_line));
        CHECK(cm_store_pg_array_elem(&a[4], c->hash, SHA256_HEX_LEN));
        CHECK(cm_store_pg_array_elem(&a[5], c->text, c->len));
        CHECK(array_int(&a[6], c->time_s ? c->time_s : now));
        CHECK(cm_store_keyword_text(s, &s->scratch, c->text, c->len));
        if (p->lexer) { /* the tsvector itself, and its token count */
            int64_t ntok = 0;
            CHECK(cm_store_pg_lex_doc(s, s->scratch.data, s->scratch.len, &p->lexbuf, &ntok));
            CHECK(cm_store_pg_array_elem(&a[7], p->lexbuf.data, p->lexbuf.len));
            CHECK(array_int(&a[8], ntok));
        } else {
            words_apart(&s->scratch);
            CHECK(cm_store_pg_array_elem(&a[7], s->scratch.data, s->scratch.len));
            CHECK(array_int(&a[8], 0));
        }
    }
    CHECK(cm_store_pg_array_elem(&f[0], path, plen));
    CHECK(cm_store_pg_array_elem(&f[1], source, slen));
    CHECK(cm_store_pg_array_elem(&f[2], hash, strlen(hash)));
    CHECK(array_int(&f[3], mtime_ns));
    CHECK(array_int(&f[4], size));
    CHECK(problem ? cm_store_pg_array_elem(&f[5], problem, strlen(problem)) : array_null(&f[5]));
    /* a rebuild sends its files in batches; any other write at once */
    if (!p->fresh || p->npend >= (copy ? PG_COPY_FILES : PG_BATCH_FILES) ||
        a[5].len >= PG_BATCH_BYTES)
        CHECK(cm_store_pg_flush_files(s, err, errlen));
out:
    if (rc) cm_store_pg_drop_pending(p);
    return cm_store_pg_w_end(s, own, rc, err, errlen);
}

cm_rc cm_store_pg_file_touch(store *s, const char *path, int64_t mtime_ns, int64_t size, char *err,
                             size_t errlen)
{
    bool own;
    cm_rc rc = cm_store_pg_w_begin(s, &own, err, errlen);
    if (rc) return rc;
    char mt[32], sz[32];
    snprintf(mt, sizeof mt, "%lld", (long long)mtime_ns);
    snprintf(sz, sizeof sz, "%lld", (long long)size);
    const char *pa[] = {s->pg->agent, path, mt, sz};
    rc = cm_store_pg_run(
        s, "UPDATE clawmem_files SET mtime = $3, size = $4 WHERE agent_id = $1 AND path = $2", 4,
        pa, "update file row", NULL, err, errlen);
    return cm_store_pg_w_end(s, own, rc, err, errlen);
}

cm_rc cm_store_pg_file_delete(store *s, const char *path, char *err, size_t errlen)
{
    bool own;
    cm_rc rc = cm_store_pg_w_begin(s, &own, err, errlen);
    if (rc) return rc;
    const char *pa[] = {s->pg->agent, path};
    rc = delete_chunks(s, path, err, errlen);
    if (!rc)
        rc = cm_store_pg_run(s, "DELETE FROM clawmem_files WHERE agent_id = $1 AND path = $2", 2,
                             pa, "delete file row", NULL, err, errlen);
    return cm_store_pg_w_end(s, own, rc, err, errlen);
}
