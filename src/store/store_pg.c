/*
 * store_pg.c — the index in PostgreSQL (memorySearch.store.driver
 * "postgres"): one database shared by many agents and processes. libpq is
 * loaded with dlopen on the first open, so nothing that uses SQLite only
 * pays for it.
 *
 * Schema: every table carries agent_id first and every statement filters on
 * it, joins only within one agent_id, so Citus can distribute each table by
 * agent_id, colocated (README "PostgreSQL store").
 *   clawmem_agents(agent_id, version, tokenizer, nchunks, ntok)   version: bumped
 *                                   by each write transaction (the data version);
 *                                   nchunks, ntok: totals of the agent's chunks
 *   clawmem_meta(agent_id, key, value)
 *   clawmem_files(agent_id, path, source, hash, mtime, size, problem)
 *   clawmem_chunks(agent_id, id, path, source, start_line, end_line, hash, text,
 *                  updated_at, tsv, ntok)          tsv: the keyword text (CJK bigrams as
 *                                                  in SQLite), ntok: its token count
 *   clawmem_vectors(agent_id, chunk_id, dims, embedding)  little-endian float32
 *   clawmem_cache(agent_id, provider, model, provider_key, hash, dims, embedding,
 *                 updated_at)
 * Keyword ranking is cm_bm25 (fts_rank.c) computed in SQL: the same IDF,
 * length normalisation and coverage penalty over PostgreSQL's lexemes.
 * Writers take a transaction-scoped advisory lock of their agent, so many
 * processes on many hosts can write one database; a rebuild is one
 * transaction, invisible until it commits.
 */
#include <dlfcn.h>
#include <endian.h>
#include <libpq-fe.h>
#include <math.h>
#include <pthread.h>
#include <time.h>

#include "../base/utf8.h"
#include "fts_rank.h"
#include "store_pg.h"

/* ---- libpq, loaded on first use ----------------------------------------- */

static struct {
    void *h;
    PGconn *(*connectdb)(const char *);
    ConnStatusType (*status)(const PGconn *);
    char *(*error_message)(const PGconn *);
    void (*finish)(PGconn *);
    PGresult *(*exec)(PGconn *, const char *);
    void (*reset)(PGconn *);
    PGresult *(*exec_params)(PGconn *, const char *, int, const Oid *, const char *const *,
                             const int *, const int *, int);
    ExecStatusType (*result_status)(const PGresult *);
    char *(*result_error_field)(const PGresult *, int);
    void (*clear)(PGresult *);
    int (*ntuples)(const PGresult *);
    char *(*getvalue)(const PGresult *, int, int);
    int (*getisnull)(const PGresult *, int, int);
    int (*getlength)(const PGresult *, int, int);
    PQnoticeProcessor (*set_notice_processor)(PGconn *, PQnoticeProcessor, void *);
    bool ok;
} pq;

static pthread_once_t pq_once = PTHREAD_ONCE_INIT;

#define PQ_SYM(field, name)                                                                        \
    do {                                                                                           \
        *(void **)&pq.field = dlsym(pq.h, name);                                                   \
        if (!pq.field) ok = false;                                                                 \
    } while (0)

static void pq_load(void)
{
    pq.h = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
    if (!pq.h) return;
    bool ok = true;
    PQ_SYM(connectdb, "PQconnectdb");
    PQ_SYM(status, "PQstatus");
    PQ_SYM(error_message, "PQerrorMessage");
    PQ_SYM(finish, "PQfinish");
    PQ_SYM(exec, "PQexec");
    PQ_SYM(reset, "PQreset");
    PQ_SYM(exec_params, "PQexecParams");
    PQ_SYM(result_status, "PQresultStatus");
    PQ_SYM(result_error_field, "PQresultErrorField");
    PQ_SYM(clear, "PQclear");
    PQ_SYM(ntuples, "PQntuples");
    PQ_SYM(getvalue, "PQgetvalue");
    PQ_SYM(getisnull, "PQgetisnull");
    PQ_SYM(getlength, "PQgetlength");
    PQ_SYM(set_notice_processor, "PQsetNoticeProcessor");
    pq.ok = ok;
}

/* ---- the connection ------------------------------------------------------ */

struct store_pg {
    PGconn *conn;
    char *agent;
    const char *tsconfig;   /* "english" (porter) or "simple" */
    int depth;              /* begin/commit nesting; the outermost is the transaction */
    bool dirty;             /* the open transaction wrote */
    bool fresh;             /* a rebuild's transaction: the agent has no rows to replace */
    char lock_ms[16];       /* lock_timeout, set again after a reconnect */
    int64_t dchunks, dntok; /* the open transaction's change to the agent's totals */
};

static void no_notices(void *arg, const char *message)
{
    (void)arg;
    (void)message; /* library code never prints */
}

/* Maps a failed result to cm_rc with a message naming the agent and what
 * was being done, with the server's primary message (never the DSN). */
static cm_rc pg_fail(store *s, const PGresult *res, const char *what, char *err, size_t errlen)
{
    const char *state = res ? pq.result_error_field(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? pq.result_error_field(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    if (!msg && s->pg && s->pg->conn) msg = pq.error_message(s->pg->conn);
    if (!msg) msg = "no answer from the server";
    cm_rc rc = CM_EDB;
    if (!state || strncmp(state, "08", 2) == 0)
        rc = CM_EIO;
    else if (strcmp(state, "55P03") == 0 || strcmp(state, "40001") == 0 ||
             strcmp(state, "40P01") == 0)
        rc = CM_EBUSY;
    else if (strncmp(state, "53", 2) == 0)
        rc = strcmp(state, "53200") == 0 ? CM_ENOMEM : CM_EIO;
    else if (strcmp(state, "42P01") == 0 || strcmp(state, "42703") == 0)
        rc = CM_ECORRUPT;
    size_t ml = strcspn(msg, "\n");
    if (rc == CM_EBUSY)
        return cm_seterr(err, errlen, rc, "index of agent %s is locked by another process (%s)",
                         s->pg->agent, what);
    return cm_seterr(err, errlen, rc, "postgres index of agent %s: %s: %.*s", s->pg->agent, what,
                     (int)ml, msg);
}

static bool ok_status(const PGresult *r)
{
    ExecStatusType st = r ? pq.result_status(r) : PGRES_FATAL_ERROR;
    return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

/* Executes sql (n < 0: several statements without parameters; lens[i] > 0:
 * parameter i is binary; bin: binary results). Outside a transaction, a
 * connection the server dropped (a restart, a failover) is reset and the
 * statement tried once more, so a long-lived engine outlives its server. */
static PGresult *exec_once(store *s, const char *sql, int n, const char *const *v, const int *lens,
                           int bin)
{
    int fmts[16] = {0};
    for (int i = 0; lens && i < n && i < 16; i++)
        fmts[i] = lens[i] > 0 ? 1 : 0;
    PGconn *c = s->pg->conn;
    return n < 0 ? pq.exec(c, sql) : pq.exec_params(c, sql, n, NULL, v, lens, fmts, bin);
}

static PGresult *exec_sql(store *s, const char *sql, int n, const char *const *v, const int *lens,
                          int bin)
{
    PGresult *r = exec_once(s, sql, n, v, lens, bin);
    if (ok_status(r) || s->pg->depth || pq.status(s->pg->conn) != CONNECTION_BAD) return r;
    pq.reset(s->pg->conn);
    if (pq.status(s->pg->conn) != CONNECTION_OK) return r;
    pq.set_notice_processor(s->pg->conn, no_notices, NULL);
    const char *p1[] = {s->pg->lock_ms};
    PGresult *t = pq.exec_params(s->pg->conn, "SELECT set_config('lock_timeout', $1, false)", 1,
                                 NULL, p1, NULL, NULL, 0);
    bool set = ok_status(t);
    if (t) pq.clear(t);
    if (!set) return r;
    if (r) pq.clear(r);
    return exec_once(s, sql, n, v, lens, bin);
}

/* Runs sql with text parameters (a NULL value is SQL NULL); *res receives
 * the result when the caller wants rows (then it must clear it). n < 0: sql
 * is several statements without parameters. */
static cm_rc run(store *s, const char *sql, int n, const char *const *v, const char *what,
                 PGresult **res, char *err, size_t errlen)
{
    PGresult *r = exec_sql(s, sql, n, v, NULL, 0);
    if (!ok_status(r)) {
        cm_rc rc = pg_fail(s, r, what, err, errlen);
        if (r) pq.clear(r);
        return rc;
    }
    if (res)
        *res = r;
    else
        pq.clear(r);
    return CM_OK;
}

/* run with binary parameters where lens[i] > 0 (bytea), binary results when bin. */
static cm_rc run_bin(store *s, const char *sql, int n, const char *const *v, const int *lens,
                     int bin, const char *what, PGresult **res, char *err, size_t errlen)
{
    PGresult *r = exec_sql(s, sql, n, v, lens, bin);
    if (!ok_status(r)) {
        cm_rc rc = pg_fail(s, r, what, err, errlen);
        if (r) pq.clear(r);
        return rc;
    }
    if (res)
        *res = r;
    else
        pq.clear(r);
    return CM_OK;
}

static const char schema_sql[] =
    "SELECT pg_advisory_xact_lock(7236417707411525);" /* one creator at a time */
    "CREATE TABLE IF NOT EXISTS clawmem_agents(agent_id text NOT NULL PRIMARY KEY, version "
    "bigint NOT NULL DEFAULT 0, tokenizer text NOT NULL, nchunks bigint NOT NULL DEFAULT 0, ntok "
    "bigint NOT NULL DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS clawmem_meta(agent_id text NOT NULL, key text NOT NULL, value "
    "text NOT NULL, PRIMARY KEY(agent_id, key));"
    "CREATE TABLE IF NOT EXISTS clawmem_files(agent_id text NOT NULL, path text NOT NULL, source "
    "text NOT NULL, hash text NOT NULL, mtime bigint NOT NULL, size bigint NOT NULL, problem "
    "text, PRIMARY KEY(agent_id, path));"
    "CREATE TABLE IF NOT EXISTS clawmem_chunks(agent_id text NOT NULL, id bigserial, path text "
    "NOT NULL, source text NOT NULL, start_line int NOT NULL, end_line int NOT NULL, hash text "
    "NOT NULL, text text NOT NULL, updated_at bigint NOT NULL, tsv tsvector NOT NULL, ntok int "
    "NOT NULL, PRIMARY KEY(agent_id, id));"
    "CREATE INDEX IF NOT EXISTS clawmem_chunks_path ON clawmem_chunks(agent_id, path);"
    "CREATE TABLE IF NOT EXISTS clawmem_vectors(agent_id text NOT NULL, chunk_id bigint NOT NULL, "
    "dims int NOT NULL, embedding bytea NOT NULL, PRIMARY KEY(agent_id, chunk_id));"
    "CREATE TABLE IF NOT EXISTS clawmem_cache(agent_id text NOT NULL, provider text NOT NULL, "
    "model text NOT NULL, provider_key text NOT NULL, hash text NOT NULL, dims int NOT NULL, "
    "embedding bytea NOT NULL, updated_at bigint NOT NULL, PRIMARY KEY(agent_id, provider, "
    "model, provider_key, hash));";

/* The keyword index: GIN over (agent_id, tsv) with btree_gin when the
 * extension can be had, else over tsv alone. */
static cm_rc ensure_schema(store *s, char *err, size_t errlen)
{
    PGresult *r = NULL;
    cm_rc rc = run(s, "SELECT to_regclass('clawmem_chunks_tsv') IS NOT NULL", 0, NULL,
                   "read the schema", &r, err, errlen);
    if (rc) return rc;
    bool have = pq.getvalue(r, 0, 0)[0] == 't';
    pq.clear(r);
    if (have) return CM_OK;
    rc = run(s, "BEGIN", 0, NULL, "create the tables", NULL, err, errlen);
    if (!rc) rc = run(s, schema_sql, -1, NULL, "create the tables", NULL, err, errlen);
    if (!rc) rc = run(s, "COMMIT", 0, NULL, "create the tables", NULL, err, errlen);
    if (rc) {
        run(s, "ROLLBACK", 0, NULL, "", NULL, NULL, 0);
        return rc;
    }
    char ignore[8];
    if (run(s, "CREATE EXTENSION IF NOT EXISTS btree_gin", 0, NULL, "", NULL, ignore,
            sizeof ignore) == CM_OK &&
        run(s,
            "CREATE INDEX IF NOT EXISTS clawmem_chunks_tsv ON clawmem_chunks USING gin(agent_id, "
            "tsv)",
            0, NULL, "", NULL, ignore, sizeof ignore) == CM_OK)
        return CM_OK;
    return run(s, "CREATE INDEX IF NOT EXISTS clawmem_chunks_tsv ON clawmem_chunks USING gin(tsv)",
               0, NULL, "create the keyword index", NULL, err, errlen);
}

cm_rc cm_store_open_pg(store *s, const char *dsn, const char *agent, const char *tokenizer,
                       unsigned flags, int busy_ms, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    PGresult *r = NULL;
    memset(s, 0, sizeof *s);
    cm_buf_init(&s->scratch, 0);
    pthread_once(&pq_once, pq_load);
    if (!pq.ok)
        return cm_seterr(err, errlen, CM_EIO,
                         "memorySearch.store.driver \"postgres\" needs libpq (libpq.so.5; Debian: "
                         "apt-get install libpq5)");
    if (!(s->pg = calloc(1, sizeof *s->pg))) CHECK(CM_ENOMEM);
    if (!(s->pg->agent = cm_strdup(agent))) CHECK(CM_ENOMEM);
    buf name = BUF_INIT;
    if (cm_buf_printf(&name, "postgres:%s", agent)) CHECK(CM_ENOMEM);
    s->path = cm_buf_detach(&name);
    s->pg->conn = pq.connectdb(dsn);
    if (!s->pg->conn) CHECK(CM_ENOMEM);
    if (pq.status(s->pg->conn) != CONNECTION_OK) {
        const char *m = pq.error_message(s->pg->conn);
        FAIL(CM_EIO, "postgres index of agent %s: cannot connect: %.*s", agent,
             (int)strcspn(m, "\n"), m);
    }
    pq.set_notice_processor(s->pg->conn, no_notices, NULL);
    snprintf(s->pg->lock_ms, sizeof s->pg->lock_ms, "%d", busy_ms > 0 ? busy_ms : 1);
    const char *p1[] = {s->pg->lock_ms};
    CHECK(run(s, "SELECT set_config('lock_timeout', $1, false)", 1, p1, "set the lock timeout",
              NULL, err, errlen));
    if (flags & STORE_CREATE) CHECK(ensure_schema(s, err, errlen));
    const char *pa[] = {agent};
    rc = run(s, "SELECT tokenizer FROM clawmem_agents WHERE agent_id = $1", 1, pa, "read the agent",
             &r, err, errlen);
    if (rc == CM_ECORRUPT && !(flags & STORE_CREATE))
        FAIL(CM_ENOTFOUND, "postgres index of agent %s does not exist yet", agent);
    CHECK(rc);
    const char *tok = pq.ntuples(r) ? pq.getvalue(r, 0, 0) : NULL;
    if (!tok && !(flags & STORE_CREATE))
        FAIL(CM_ENOTFOUND, "postgres index of agent %s does not exist yet", agent);
    if (!tok) tok = tokenizer;
    /* trigram has no tsvector counterpart: unicode61 with CJK bigrams serves */
    s->pg->tsconfig = tok && strcmp(tok, "porter") == 0 ? "english" : "simple";
    s->trigram = false;
out:
    if (r) pq.clear(r);
    if (rc) cm_store_pg_close(s);
    return rc;
}

void cm_store_pg_close(store *s)
{
    if (s->pg) {
        if (s->pg->conn) pq.finish(s->pg->conn);
        free(s->pg->agent);
        free(s->pg);
    }
    free(s->path);
    cm_buf_release(&s->scratch);
    memset(s, 0, sizeof *s);
}

/* ---- transactions ---------------------------------------------------------- */

cm_rc cm_store_pg_begin(store *s, char *err, size_t errlen)
{
    struct store_pg *p = s->pg;
    if (p->depth++) return CM_OK;
    p->dirty = false;
    p->dchunks = p->dntok = 0;
    const char *pa[] = {p->agent};
    cm_rc rc = run(s, "BEGIN", 0, NULL, "begin", NULL, err, errlen);
    /* writers of one agent take turns, across processes and hosts */
    if (!rc)
        rc = run(s, "SELECT pg_advisory_xact_lock(hashtextextended('clawmem:' || $1, 0))", 1, pa,
                 "lock the agent", NULL, err, errlen);
    if (rc) cm_store_pg_rollback(s);
    return rc;
}

cm_rc cm_store_pg_commit(store *s, char *err, size_t errlen)
{
    struct store_pg *p = s->pg;
    if (p->depth > 1) {
        p->depth--;
        return CM_OK;
    }
    if (p->depth == 0) return CM_OK;
    p->fresh = false;
    cm_rc rc = CM_OK;
    /* One update of the agent's row a transaction: updating one row for
     * each file of a rebuild would grow its version chain quadratically. */
    char dc[32], dt[32];
    snprintf(dc, sizeof dc, "%lld", (long long)p->dchunks);
    snprintf(dt, sizeof dt, "%lld", (long long)p->dntok);
    const char *pu[] = {p->agent, dc, dt};
    if (p->dirty)
        rc = run(s,
                 "UPDATE clawmem_agents SET version = version + 1, nchunks = nchunks + $2, ntok = "
                 "ntok + $3 WHERE agent_id = $1",
                 3, pu, "commit", NULL, err, errlen);
    if (!rc) rc = run(s, "COMMIT", 0, NULL, "commit", NULL, err, errlen);
    if (rc) cm_store_pg_rollback(s);
    p->depth = 0;
    return rc;
}

void cm_store_pg_rollback(store *s)
{
    if (!s->pg || !s->pg->depth) return;
    s->pg->depth = 0;
    s->pg->fresh = false;
    char ignore[8];
    run(s, "ROLLBACK", 0, NULL, "", NULL, ignore, sizeof ignore);
}

/* A write outside a transaction runs in one of its own. */
static cm_rc w_begin(store *s, bool *own, char *err, size_t errlen)
{
    *own = s->pg->depth == 0;
    cm_rc rc = *own ? cm_store_pg_begin(s, err, errlen) : CM_OK;
    if (!rc) s->pg->dirty = true;
    return rc;
}

static cm_rc w_end(store *s, bool own, cm_rc rc, char *err, size_t errlen)
{
    if (!own) return rc;
    if (rc) {
        cm_store_pg_rollback(s);
        return rc;
    }
    return cm_store_pg_commit(s, err, errlen);
}

cm_rc cm_store_pg_rebuild_begin(store *s, const char *tokenizer, char *err, size_t errlen)
{
    cm_rc rc = cm_store_pg_begin(s, err, errlen);
    if (rc) return rc;
    s->pg->dirty = true;
    s->pg->tsconfig = tokenizer && strcmp(tokenizer, "porter") == 0 ? "english" : "simple";
    const char *pa[] = {s->pg->agent, tokenizer ? tokenizer : "porter"};
    static const char *const sql[] = {
        "DELETE FROM clawmem_vectors WHERE agent_id = $1",
        "DELETE FROM clawmem_chunks WHERE agent_id = $1",
        "DELETE FROM clawmem_files WHERE agent_id = $1",
        "DELETE FROM clawmem_meta WHERE agent_id = $1",
    };
    for (size_t i = 0; !rc && i < ARRAY_LEN(sql); i++)
        rc = run(s, sql[i], 1, pa, "clear the index for a rebuild", NULL, err, errlen);
    if (!rc)
        rc = run(s,
                 "INSERT INTO clawmem_agents(agent_id, tokenizer) VALUES($1, $2) ON CONFLICT "
                 "(agent_id) DO UPDATE SET tokenizer = excluded.tokenizer, nchunks = 0, ntok = 0",
                 2, pa, "register the agent", NULL, err, errlen);
    if (rc) cm_store_pg_rollback(s);
    if (!rc) s->pg->fresh = true;
    return rc;
}

bool cm_store_pg_connected(const store *s)
{
    return s->pg && s->pg->conn && pq.status(s->pg->conn) == CONNECTION_OK;
}

cm_rc cm_store_drop_agent(store *s, char *err, size_t errlen)
{
    if (!s->pg) return cm_seterr(err, errlen, CM_EINVAL, "not a postgres index");
    cm_rc rc = cm_store_pg_begin(s, err, errlen);
    if (rc) return rc;
    const char *pa[] = {s->pg->agent};
    static const char *const sql[] = {
        "DELETE FROM clawmem_vectors WHERE agent_id = $1",
        "DELETE FROM clawmem_chunks WHERE agent_id = $1",
        "DELETE FROM clawmem_files WHERE agent_id = $1",
        "DELETE FROM clawmem_meta WHERE agent_id = $1",
        "DELETE FROM clawmem_cache WHERE agent_id = $1",
        "DELETE FROM clawmem_agents WHERE agent_id = $1",
    };
    for (size_t i = 0; !rc && i < ARRAY_LEN(sql); i++)
        rc = run(s, sql[i], 1, pa, "delete the agent", NULL, err, errlen);
    s->pg->dirty = false; /* its version row is gone */
    if (rc) {
        cm_store_pg_rollback(s);
        return rc;
    }
    return cm_store_pg_commit(s, err, errlen);
}

/* ---- meta and files ---------------------------------------------------------- */

cm_rc cm_store_pg_meta_get(store *s, const char *key, char **json, char *err, size_t errlen)
{
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent, key};
    *json = NULL;
    cm_rc rc = run(s, "SELECT value FROM clawmem_meta WHERE agent_id = $1 AND key = $2", 2, pa,
                   "read meta", &r, err, errlen);
    if (rc) return rc;
    if (pq.ntuples(r) && !(*json = cm_strdup(pq.getvalue(r, 0, 0)))) rc = CM_ENOMEM;
    pq.clear(r);
    return rc;
}

cm_rc cm_store_pg_meta_set(store *s, const char *key, const char *json, char *err, size_t errlen)
{
    bool own;
    cm_rc rc = w_begin(s, &own, err, errlen);
    if (rc) return rc;
    const char *pa[] = {s->pg->agent, key, json};
    rc = run(s,
             "INSERT INTO clawmem_meta(agent_id, key, value) VALUES($1, $2, $3) ON CONFLICT "
             "(agent_id, key) DO UPDATE SET value = excluded.value",
             3, pa, "write meta", NULL, err, errlen);
    return w_end(s, own, rc, err, errlen);
}

cm_rc cm_store_pg_files_load(store *s, stored_files *out, char *err, size_t errlen)
{
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent};
    memset(out, 0, sizeof *out);
    cm_rc rc = run(s,
                   "SELECT path, hash, mtime, size FROM clawmem_files WHERE agent_id = $1 ORDER "
                   "BY path COLLATE \"C\"",
                   1, pa, "read files", &r, err, errlen);
    if (rc) return rc;
    int n = pq.ntuples(r);
    if (n && !(out->v = calloc((size_t)n, sizeof *out->v))) CHECK(CM_ENOMEM);
    for (int i = 0; i < n; i++) {
        stored_file *f = &out->v[out->n++];
        f->path = cm_strdup(pq.getvalue(r, i, 0));
        f->hash = cm_strdup(pq.getvalue(r, i, 1));
        f->mtime_ns = strtoll(pq.getvalue(r, i, 2), NULL, 10);
        f->size = strtoll(pq.getvalue(r, i, 3), NULL, 10);
        if (!f->path || !f->hash) FAIL(CM_ENOMEM, "out of memory");
    }
out:
    pq.clear(r);
    if (rc) cm_store_stored_files_release(out);
    return rc;
}

static cm_rc delete_chunks(store *s, const char *path, char *err, size_t errlen)
{
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent, path};
    cm_rc rc = run(s,
                   "DELETE FROM clawmem_vectors v USING clawmem_chunks c WHERE v.agent_id = $1 AND "
                   "c.agent_id = $1 AND c.path = $2 AND v.chunk_id = c.id",
                   2, pa, "delete vectors", NULL, err, errlen);
    if (!rc)
        rc = run(s,
                 "WITH d AS (DELETE FROM clawmem_chunks WHERE agent_id = $1 AND path = $2 "
                 "RETURNING ntok) SELECT count(*), coalesce(sum(ntok), 0) FROM d",
                 2, pa, "delete chunks", &r, err, errlen);
    if (!rc) {
        s->pg->dchunks -= strtoll(pq.getvalue(r, 0, 0), NULL, 10);
        s->pg->dntok -= strtoll(pq.getvalue(r, 0, 1), NULL, 10);
        pq.clear(r);
    }
    return rc;
}

/* Chunks go in one statement per file (arrays unnested), the tsvector and
 * its token count computed by the server; the agent's chunk and token
 * totals (BM25's N and average length) change by what each insert and
 * delete returns, applied at commit. */
static const char insert_chunks_sql[] =
    "WITH i AS (INSERT INTO clawmem_chunks(agent_id, path, source, start_line, end_line, hash, "
    "text, "
    "updated_at, tsv, ntok) SELECT $1, $2, $3, t.sl, t.el, t.h, t.tx, t.u, v.tsv, (SELECT "
    "coalesce(sum(cardinality(positions)), 0) FROM unnest(v.tsv)) FROM unnest($4::int[], "
    "$5::int[], $6::text[], $7::text[], $8::bigint[], $9::text[]) WITH ORDINALITY AS t(sl, el, h, "
    "tx, u, kw, i) CROSS JOIN LATERAL (SELECT to_tsvector($10::regconfig, t.kw) AS tsv) v ORDER "
    "BY t.i RETURNING ntok) SELECT count(*), coalesce(sum(ntok), 0) FROM i";

/* Appends s[0..n) as a quoted element of a PostgreSQL array literal. */
static cm_rc array_sep(buf *b)
{
    if (!b->len) return cm_buf_addc(b, '{');
    return b->data[b->len - 1] == '{' ? CM_OK : cm_buf_addc(b, ',');
}

static cm_rc array_elem(buf *b, const char *s, size_t n)
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

cm_rc cm_store_pg_file_replace(store *s, const char *path, const char *source, const char *hash,
                               int64_t mtime_ns, int64_t size, const char *problem,
                               const chunk_list *chunks, char *err, size_t errlen)
{
    bool own;
    cm_rc rc = w_begin(s, &own, err, errlen);
    if (rc) return rc;
    buf a[6];
    for (int k = 0; k < 6; k++)
        cm_buf_init(&a[k], 0);
    if (!s->pg->fresh) CHECK(delete_chunks(s, path, err, errlen));
    int64_t now = (int64_t)time(NULL);
    for (size_t i = 0; i < chunks->n; i++) {
        const chunk *c = &chunks->v[i];
        if (!a[0].len) {
            for (int k = 0; k < 6; k++)
                CHECK(cm_buf_addc(&a[k], '{'));
        }
        CHECK(array_int(&a[0], c->start_line));
        CHECK(array_int(&a[1], c->end_line));
        CHECK(array_elem(&a[2], c->hash, SHA256_HEX_LEN));
        CHECK(array_elem(&a[3], c->text, c->len));
        CHECK(array_int(&a[4], c->time_s ? c->time_s : now));
        CHECK(cm_store_keyword_text(s, &s->scratch, c->text, c->len));
        words_apart(&s->scratch);
        CHECK(array_elem(&a[5], s->scratch.data ? s->scratch.data : "", s->scratch.len));
    }
    if (chunks->n) {
        for (int k = 0; k < 6; k++)
            CHECK(cm_buf_addc(&a[k], '}'));
        const char *pa[] = {s->pg->agent, path,      source,    a[0].data, a[1].data,
                            a[2].data,    a[3].data, a[4].data, a[5].data, s->pg->tsconfig};
        PGresult *r = NULL;
        CHECK(run(s, insert_chunks_sql, 10, pa, "insert chunks", &r, err, errlen));
        s->pg->dchunks += strtoll(pq.getvalue(r, 0, 0), NULL, 10);
        s->pg->dntok += strtoll(pq.getvalue(r, 0, 1), NULL, 10);
        pq.clear(r);
    }
    char mt[32], sz[32];
    snprintf(mt, sizeof mt, "%lld", (long long)mtime_ns);
    snprintf(sz, sizeof sz, "%lld", (long long)size);
    const char *pf[] = {s->pg->agent, path, source, hash, mt, sz, problem};
    CHECK(run(s,
              "INSERT INTO clawmem_files(agent_id, path, source, hash, mtime, size, problem) "
              "VALUES($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (agent_id, path) DO UPDATE SET "
              "source = excluded.source, hash = excluded.hash, mtime = excluded.mtime, size = "
              "excluded.size, problem = excluded.problem",
              7, pf, "write file row", NULL, err, errlen));
out:
    for (int k = 0; k < 6; k++)
        cm_buf_release(&a[k]);
    return w_end(s, own, rc, err, errlen);
}

cm_rc cm_store_pg_file_touch(store *s, const char *path, int64_t mtime_ns, int64_t size, char *err,
                             size_t errlen)
{
    bool own;
    cm_rc rc = w_begin(s, &own, err, errlen);
    if (rc) return rc;
    char mt[32], sz[32];
    snprintf(mt, sizeof mt, "%lld", (long long)mtime_ns);
    snprintf(sz, sizeof sz, "%lld", (long long)size);
    const char *pa[] = {s->pg->agent, path, mt, sz};
    rc = run(s, "UPDATE clawmem_files SET mtime = $3, size = $4 WHERE agent_id = $1 AND path = $2",
             4, pa, "update file row", NULL, err, errlen);
    return w_end(s, own, rc, err, errlen);
}

cm_rc cm_store_pg_file_delete(store *s, const char *path, char *err, size_t errlen)
{
    bool own;
    cm_rc rc = w_begin(s, &own, err, errlen);
    if (rc) return rc;
    const char *pa[] = {s->pg->agent, path};
    rc = delete_chunks(s, path, err, errlen);
    if (!rc)
        rc = run(s, "DELETE FROM clawmem_files WHERE agent_id = $1 AND path = $2", 2, pa,
                 "delete file row", NULL, err, errlen);
    return w_end(s, own, rc, err, errlen);
}

/* ---- keyword search ---------------------------------------------------------- */

/* Translates the FTS5 expression of query.c ("a" AND ("b c" OR "d"*)) into
 * to_tsquery text ('a' & ('b c' | 'd':*)), the array of its phrases as
 * to_tsquery text, and their OR ('a' | 'b c' | 'd':*). */
static cm_rc translate(const char *m, buf *tsq, buf *aq, buf *tor, int *nphrase)
{
    cm_rc rc = CM_OK;
    bool operand = false; /* the last item was a phrase or ')' */
    buf ph = BUF_INIT, q1 = BUF_INIT;
    *nphrase = 0;
    for (const char *c = m; *c && !rc;) {
        if (*c == ' ') {
            c++;
        } else if (*c == '(' || *c == ')') {
            if (*c == '(' && operand) rc = cm_buf_adds(tsq, " & ");
            if (!rc) rc = cm_buf_addc(tsq, *c);
            operand = *c == ')';
            c++;
        } else if (strncmp(c, "AND ", 4) == 0 || strncmp(c, "OR ", 3) == 0 ||
                   strncmp(c, "NOT ", 4) == 0) {
            rc = cm_buf_adds(tsq, *c == 'A' ? " & " : *c == 'O' ? " | " : " & !");
            c += *c == 'O' ? 3 : 4;
            operand = false;
        } else if (*c == '"') {
            cm_buf_reset(&ph);
            for (c++; *c && !rc; c++) {
                if (*c == '"' && c[1] == '"') {
                    rc = cm_buf_addc(&ph, '"');
                    c++;
                } else if (*c == '"') {
                    c++;
                    break;
                } else {
                    rc = cm_buf_addc(&ph, *c);
                }
            }
            bool prefix = *c == '*';
            if (prefix) c++;
            cm_buf_reset(&q1);
            if (!rc) rc = cm_buf_addc(&q1, '\'');
            for (size_t i = 0; !rc && i < ph.len; i++) {
                char ch = ph.data[i];
                if (ch == '\'' || ch == '\\') rc = cm_buf_addc(&q1, ch);
                if (!rc) rc = cm_buf_addc(&q1, ch);
            }
            if (!rc) rc = cm_buf_adds(&q1, prefix ? "':*" : "'");
            if (!rc && operand) rc = cm_buf_adds(tsq, " & ");
            if (!rc) rc = cm_buf_add(tsq, q1.data, q1.len);
            if (!rc) rc = array_elem(aq, q1.data, q1.len);
            if (!rc && tor->len) rc = cm_buf_adds(tor, " | ");
            if (!rc) rc = cm_buf_add(tor, q1.data, q1.len);
            operand = true;
            (*nphrase)++;
        } else {
            c++; /* nothing else is written by query.c */
        }
    }
    if (!rc && *nphrase) rc = cm_buf_addc(aq, '}');
    cm_buf_release(&ph);
    cm_buf_release(&q1);
    return rc;
}

#define STR_(x) #x
#define STR(x)  STR_(x)

/* cm_bm25 in SQL. One index scan fetches the agent's chunks that hold any
 * phrase of the query (u; hit: those that match the query itself): every
 * chunk with a phrase is among them, so each phrase's document frequency
 * (its IDF: Robertson–Spärck Jones', at least FTS_RANK_IDF_FLOOR, N at
 * least FTS_RANK_MIN_ROWS) is counted there rather than by an
 * index scan of its own. Per hit, the phrase's frequency is ts_rank_cd with
 * every weight 1 and no normalisation: each cover of the phrase (an
 * occurrence; for a prefix, of any lexeme it starts) adds exactly 1, so it
 * counts FTS5's phrase instances, in C (0: the chunk lacks the phrase). Then BM25 with k1 1.2, b
 * 0.75 over the chunk's token count, and the coverage penalty of 6. */
static const char search_sql[] =
    "WITH ph AS (SELECT t.i, to_tsquery($6::regconfig, t.q) AS q FROM unnest($2::text[]) WITH "
    "ORDINALITY AS t(q, i)), "
    "php AS (SELECT * FROM ph WHERE numnode(q) > 0), "
    "st AS (SELECT greatest(nchunks, " STR(
        FTS_RANK_MIN_ROWS) ")::float8 AS n, CASE WHEN nchunks > "
                           "0 AND ntok > 0 THEN ntok::float8 / nchunks ELSE 1 END AS avgdl FROM "
                           "clawmem_agents WHERE "
                           "agent_id = $1), "
                           "u AS (SELECT c.id, c.ntok, c.tsv, c.tsv @@ to_tsquery($6::regconfig, "
                           "$4) AS hit FROM "
                           "clawmem_chunks c WHERE c.agent_id = $1 AND c.tsv @@ "
                           "to_tsquery($6::regconfig, $3)), "
                           "tf AS (SELECT u.id, u.ntok, u.hit, php.i, ts_rank_cd('{1,1,1,1}', "
                           "u.tsv, php.q, 0)::float8 AS tf FROM u CROSS JOIN php), "
                           "idf AS (SELECT d.i, greatest(" STR(
                               FTS_RANK_IDF_FLOOR) ", ln((st.n - d.n + 0.5) / "
                                                   "(d.n + 0.5))) AS idf "
                                                   "FROM (SELECT i, "
                                                   "count(*) FILTER (WHERE tf > 0)::float8 AS n "
                                                   "FROM tf GROUP BY i) d "
                                                   "CROSS JOIN st), "
                                                   "sc AS (SELECT tf.id, sum(CASE WHEN tf.tf > 0 "
                                                   "THEN idf.idf * tf.tf * "
                                                   "2.2 / (tf.tf + 1.2 * "
                                                   "(0.25 + 0.75 * tf.ntok / st.avgdl)) ELSE 0 "
                                                   "END) AS s, sum(CASE WHEN "
                                                   "tf.tf > 0 THEN idf.idf "
                                                   "ELSE 0 END) AS have, sum(idf.idf) AS alli FROM "
                                                   "tf JOIN idf ON idf.i = "
                                                   "tf.i CROSS JOIN st "
                                                   "WHERE tf.hit GROUP BY tf.id), "
                                                   "r AS (SELECT id, CASE WHEN alli > 0 AND have < "
                                                   "alli THEN greatest(s - "
                                                   "6 * (1 - have / alli), "
                                                   "s * 0.001) ELSE s END AS score FROM sc ORDER "
                                                   "BY 2 DESC, id LIMIT $5) "
                                                   "SELECT c.id, c.path, c.source, c.start_line, "
                                                   "c.end_line, c.text, "
                                                   "-r.score, CASE WHEN "
                                                   "c.source = 'sessions' THEN c.updated_at * "
                                                   "1000000000 ELSE (SELECT "
                                                   "f.mtime FROM clawmem_files "
                                                   "f WHERE f.agent_id = $1 AND f.path = c.path) "
                                                   "END FROM r JOIN "
                                                   "clawmem_chunks c ON c.agent_id "
                                                   "= $1 AND c.id = r.id ORDER BY r.score DESC, "
                                                   "c.id";

static const char hit_sql[] =
    "SELECT c.id, c.path, c.source, c.start_line, c.end_line, c.text, 0, CASE WHEN c.source = "
    "'sessions' THEN c.updated_at * 1000000000 ELSE (SELECT f.mtime FROM clawmem_files f WHERE "
    "f.agent_id = $1 AND f.path = c.path) END FROM clawmem_chunks c WHERE c.agent_id = $1 AND "
    "c.id = $2";

/* Reads row i of r (the columns of search_sql) into h. */
static cm_rc hit_row(store *s, PGresult *r, int i, fts_hit *h, char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    for (int k = 0; k < 8; k++)
        if (pq.getisnull(r, i, k)) return cm_store_corrupt(s, "the chunks table", err, errlen);
    h->id = strtoll(pq.getvalue(r, i, 0), NULL, 10);
    h->start_line = (int)strtol(pq.getvalue(r, i, 3), NULL, 10);
    h->end_line = (int)strtol(pq.getvalue(r, i, 4), NULL, 10);
    h->rank = strtod(pq.getvalue(r, i, 6), NULL);
    h->mtime_ns = strtoll(pq.getvalue(r, i, 7), NULL, 10);
    return cm_store_hit_strings(h, pq.getvalue(r, i, 1), pq.getvalue(r, i, 2), pq.getvalue(r, i, 5),
                                err, errlen);
}

cm_rc cm_store_pg_fts_search(store *s, const char *match, int limit, fts_hits *out, char *err,
                             size_t errlen)
{
    buf tsq = BUF_INIT, aq = BUF_INIT, tor = BUF_INIT;
    PGresult *r = NULL;
    int nphrase = 0;
    cm_rc rc = translate(match, &tsq, &aq, &tor, &nphrase);
    if (rc || !nphrase) goto out;
    char lim[16];
    snprintf(lim, sizeof lim, "%d", limit);
    const char *pa[] = {s->pg->agent, aq.data, tor.data, tsq.data, lim, s->pg->tsconfig};
    rc = run(s, search_sql, 6, pa, "keyword search", &r, err, errlen);
    if (rc == CM_EDB) rc = CM_EINVAL; /* the query itself: a syntax error */
    if (rc) goto out;
    int n = pq.ntuples(r);
    for (int i = 0; i < n; i++) {
        if (out->n == out->cap) {
            size_t cap = out->cap ? out->cap * 2 : 32;
            fts_hit *nv = realloc(out->v, cap * sizeof *nv);
            if (!nv) FAIL(CM_ENOMEM, "out of memory");
            out->v = nv;
            out->cap = cap;
        }
        CHECK(hit_row(s, r, i, out->v + out->n, err, errlen));
        out->n++;
    }
out:
    if (r) pq.clear(r);
    cm_buf_release(&tsq);
    cm_buf_release(&aq);
    cm_buf_release(&tor);
    return rc;
}

cm_rc cm_store_pg_chunk_get(store *s, int64_t id, fts_hit *out, char *err, size_t errlen)
{
    PGresult *r = NULL;
    char ids[32];
    snprintf(ids, sizeof ids, "%lld", (long long)id);
    const char *pa[] = {s->pg->agent, ids};
    memset(out, 0, sizeof *out);
    cm_rc rc = run(s, hit_sql, 2, pa, "read a chunk", &r, err, errlen);
    if (rc) return rc;
    if (!pq.ntuples(r))
        rc = cm_seterr(err, errlen, CM_ENOTFOUND, "chunk %lld is gone", (long long)id);
    else
        rc = hit_row(s, r, 0, out, err, errlen);
    pq.clear(r);
    return rc;
}

/* ---- status -------------------------------------------------------------------- */

cm_rc cm_store_pg_file_problems(store *s, buf *out, char *err, size_t errlen)
{
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent};
    cm_rc rc = run(s,
                   "SELECT path, problem FROM clawmem_files WHERE agent_id = $1 AND problem IS "
                   "NOT NULL ORDER BY path COLLATE \"C\"",
                   1, pa, "read problems", &r, err, errlen);
    if (rc) return rc;
    rc = cm_buf_addc(out, '[');
    for (int i = 0; !rc && i < pq.ntuples(r); i++) {
        const char *p = pq.getvalue(r, i, 0), *w = pq.getvalue(r, i, 1);
        if (i) rc = cm_buf_addc(out, ',');
        if (!rc) rc = cm_buf_adds(out, "{\"path\":");
        if (!rc) rc = cm_utf8_add_json_str(out, p, strlen(p));
        if (!rc) rc = cm_buf_adds(out, ",\"problem\":");
        if (!rc) rc = cm_utf8_add_json_str(out, w, strlen(w));
        if (!rc) rc = cm_buf_addc(out, '}');
    }
    if (!rc) rc = cm_buf_addc(out, ']');
    pq.clear(r);
    return rc;
}

cm_rc cm_store_pg_count(store *s, const char *from, int64_t *n, char *err, size_t errlen)
{
    /* from: one of the SQLite store's table names with an optional WHERE */
    static const struct {
        const char *sqlite, *pg;
    } map[] = {{"files", "clawmem_files"},
               {"chunks", "clawmem_chunks"},
               {"vectors", "clawmem_vectors"},
               {"embedding_cache", "clawmem_cache"}};
    size_t tl = strcspn(from, " ");
    const char *table = NULL;
    for (size_t i = 0; i < ARRAY_LEN(map); i++)
        if (strlen(map[i].sqlite) == tl && strncmp(from, map[i].sqlite, tl) == 0) table = map[i].pg;
    if (!table) return cm_seterr(err, errlen, CM_EINVAL, "no table %.*s", (int)tl, from);
    const char *where = strstr(from + tl, "WHERE ");
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE agent_id = $1%s%s", table,
             where ? " AND " : "", where ? where + 6 : "");
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent};
    cm_rc rc = run(s, sql, 1, pa, "count", &r, err, errlen);
    if (rc) return rc;
    *n = strtoll(pq.getvalue(r, 0, 0), NULL, 10);
    pq.clear(r);
    return CM_OK;
}

cm_rc cm_store_pg_check(store *s, bool *ok, char *err, size_t errlen)
{
    /* The server keeps its own pages sound; what can go wrong is ours: a
     * chunk without its file row, a vector without its chunk, totals that
     * do not add up. */
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent};
    *ok = false;
    cm_rc rc = run(s,
                   "SELECT (SELECT count(*) FROM clawmem_chunks c WHERE c.agent_id = $1 AND NOT "
                   "EXISTS (SELECT 1 FROM clawmem_files f WHERE f.agent_id = $1 AND f.path = "
                   "c.path)) + (SELECT count(*) FROM clawmem_vectors v WHERE v.agent_id = $1 AND "
                   "NOT EXISTS (SELECT 1 FROM clawmem_chunks c WHERE c.agent_id = $1 AND c.id = "
                   "v.chunk_id)) + (SELECT count(*) FROM clawmem_agents a WHERE a.agent_id = $1 "
                   "AND (a.nchunks <> (SELECT count(*) FROM clawmem_chunks c WHERE c.agent_id = "
                   "$1) OR a.ntok <> (SELECT coalesce(sum(ntok), 0) FROM clawmem_chunks c WHERE "
                   "c.agent_id = $1)))",
                   1, pa, "integrity check", &r, err, errlen);
    if (rc) return rc;
    *ok = strcmp(pq.getvalue(r, 0, 0), "0") == 0;
    pq.clear(r);
    return CM_OK;
}

int64_t cm_store_pg_data_version(store *s)
{
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent};
    char ignore[8];
    int64_t v = -1;
    if (run(s, "SELECT version FROM clawmem_agents WHERE agent_id = $1", 1, pa, "", &r, ignore,
            sizeof ignore) == CM_OK) {
        if (pq.ntuples(r)) v = strtoll(pq.getvalue(r, 0, 0), NULL, 10);
        pq.clear(r);
    }
    return v;
}

/* ---- vectors and the embedding cache ------------------------------------------ */

static void le_floats(float *v, size_t n)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        u = __builtin_bswap32(u);
        memcpy(&v[i], &u, 4);
    }
#else
    (void)v;
    (void)n;
#endif
}

cm_rc cm_store_pg_pending_vectors(store *s, int64_t after_id, size_t limit, pending_chunk **out,
                                  size_t *n, char *err, size_t errlen)
{
    PGresult *r = NULL;
    char after[32], lim[32];
    snprintf(after, sizeof after, "%lld", (long long)after_id);
    snprintf(lim, sizeof lim, "%zu", limit);
    const char *pa[] = {s->pg->agent, after, lim};
    *n = 0;
    *out = calloc(limit ? limit : 1, sizeof **out);
    if (!*out) return CM_ENOMEM;
    cm_rc rc =
        run(s,
            "SELECT c.id, c.hash, c.text, c.path FROM clawmem_chunks c WHERE c.agent_id = $1 AND "
            "c.id > $2 AND NOT EXISTS (SELECT 1 FROM clawmem_vectors v WHERE v.agent_id = "
            "$1 AND v.chunk_id = c.id) ORDER BY c.id LIMIT $3",
            3, pa, "read chunks to embed", &r, err, errlen);
    for (int i = 0; !rc && i < pq.ntuples(r) && (size_t)i < limit; i++) {
        const char *hash = pq.getvalue(r, i, 1);
        if (strlen(hash) != SHA256_HEX_LEN) {
            rc = cm_store_corrupt(s, "the chunks table", err, errlen);
            break;
        }
        pending_chunk *p = &(*out)[(*n)++];
        p->id = strtoll(pq.getvalue(r, i, 0), NULL, 10);
        snprintf(p->hash, sizeof p->hash, "%s", hash);
        if (!(p->text = cm_strdup(pq.getvalue(r, i, 2))) ||
            !(p->path = cm_strdup(pq.getvalue(r, i, 3))))
            rc = CM_ENOMEM;
    }
    if (r) pq.clear(r);
    if (rc) {
        cm_store_pending_release(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

cm_rc cm_store_pg_cache_get(store *s, const char *provider, const char *model, const char *key,
                            const char *hash, float **out, int *dims, char *err, size_t errlen)
{
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent, provider, model, key, hash};
    *out = NULL;
    *dims = 0;
    cm_rc rc = run_bin(s,
                       "SELECT dims, embedding FROM clawmem_cache WHERE agent_id = $1 AND "
                       "provider = $2 AND model = $3 AND provider_key = $4 AND hash = $5",
                       5, pa, NULL, 1, "read the embedding cache", &r, err, errlen);
    if (rc) return rc;
    if (pq.ntuples(r) && pq.getlength(r, 0, 0) == 4) {
        uint32_t d;
        memcpy(&d, pq.getvalue(r, 0, 0), 4);
        d = be32toh(d);
        if (d > 0 && d < (1u << 20) && pq.getlength(r, 0, 1) == (int)d * 4) {
            if (!(*out = malloc((size_t)d * 4))) {
                rc = CM_ENOMEM;
            } else {
                memcpy(*out, pq.getvalue(r, 0, 1), (size_t)d * 4);
                le_floats(*out, d);
                *dims = (int)d;
            }
        }
    }
    pq.clear(r);
    return rc;
}

/* v as little-endian float32 bytes (malloc'd). */
static char *le_blob(const float *v, int dims)
{
    float *le = malloc(dims ? (size_t)dims * 4 : 1);
    if (le && dims) {
        memcpy(le, v, (size_t)dims * 4);
        le_floats(le, (size_t)dims);
    }
    return (char *)le;
}

cm_rc cm_store_pg_cache_put(store *s, const char *provider, const char *model, const char *key,
                            const char *hash, const float *v, int dims, char *err, size_t errlen)
{
    char *blob = le_blob(v, dims);
    if (!blob) return CM_ENOMEM;
    char d[16], now[32];
    snprintf(d, sizeof d, "%d", dims);
    snprintf(now, sizeof now, "%lld", (long long)time(NULL));
    const char *pa[] = {s->pg->agent, provider, model, key, hash, d, blob, now};
    int lens[] = {0, 0, 0, 0, 0, 0, dims * 4, 0};
    bool own;
    cm_rc rc = w_begin(s, &own, err, errlen);
    if (!rc) {
        if (dims == 0) pa[6] = "", lens[6] = 0; /* an empty bytea, as text */
        rc = run_bin(s,
                     "INSERT INTO clawmem_cache(agent_id, provider, model, provider_key, hash, "
                     "dims, embedding, updated_at) VALUES($1, $2, $3, $4, $5, $6, $7, $8) ON "
                     "CONFLICT (agent_id, provider, model, provider_key, hash) DO UPDATE SET dims "
                     "= excluded.dims, embedding = excluded.embedding, updated_at = "
                     "excluded.updated_at",
                     8, pa, lens, 0, "write a vector", NULL, err, errlen);
        rc = w_end(s, own, rc, err, errlen);
    }
    free(blob);
    return rc;
}

cm_rc cm_store_pg_cache_trim(store *s, int max_entries, char *err, size_t errlen)
{
    char mx[16];
    snprintf(mx, sizeof mx, "%d", max_entries < 0 ? 0 : max_entries);
    const char *pa[] = {s->pg->agent, mx};
    bool own;
    cm_rc rc = w_begin(s, &own, err, errlen);
    if (rc) return rc;
    rc = run(s,
             "DELETE FROM clawmem_cache d USING (SELECT provider, model, provider_key, hash FROM "
             "clawmem_cache WHERE agent_id = $1 ORDER BY updated_at DESC, hash OFFSET $2) o WHERE "
             "d.agent_id = $1 AND d.provider = o.provider AND d.model = o.model AND "
             "d.provider_key = o.provider_key AND d.hash = o.hash",
             2, pa, "trim the embedding cache", NULL, err, errlen);
    return w_end(s, own, rc, err, errlen);
}

cm_rc cm_store_pg_vector_put(store *s, int64_t chunk_id, const float *v, int dims, char *err,
                             size_t errlen)
{
    char *blob = le_blob(v, dims);
    if (!blob) return CM_ENOMEM;
    char id[32], d[16];
    snprintf(id, sizeof id, "%lld", (long long)chunk_id);
    snprintf(d, sizeof d, "%d", dims);
    const char *pa[] = {s->pg->agent, id, d, dims ? blob : ""};
    int lens[] = {0, 0, 0, dims * 4};
    bool own;
    cm_rc rc = w_begin(s, &own, err, errlen);
    if (!rc) {
        rc = run_bin(s,
                     "INSERT INTO clawmem_vectors(agent_id, chunk_id, dims, embedding) VALUES($1, "
                     "$2, $3, $4) ON CONFLICT (agent_id, chunk_id) DO UPDATE SET dims = "
                     "excluded.dims, embedding = excluded.embedding",
                     4, pa, lens, 0, "write a vector", NULL, err, errlen);
        rc = w_end(s, own, rc, err, errlen);
    }
    free(blob);
    return rc;
}

cm_rc cm_store_pg_vectors_load(store *s, int dims, vec_index *x, char *err, size_t errlen)
{
    PGresult *r = NULL;
    char d[16];
    snprintf(d, sizeof d, "%d", dims);
    const char *pa[] = {s->pg->agent, d};
    cm_rc rc = cm_vec_index_init(x, (size_t)dims);
    if (rc) return cm_seterr(err, errlen, rc, "bad vector dimensions %d", dims);
    float *v = malloc((size_t)dims * 4);
    if (!v) rc = CM_ENOMEM;
    if (!rc)
        rc = run_bin(s,
                     "SELECT v.chunk_id, v.embedding, c.source = 'sessions' FROM clawmem_vectors v "
                     "JOIN clawmem_chunks c ON c.agent_id = v.agent_id AND c.id = v.chunk_id "
                     "WHERE v.agent_id = $1 AND v.dims = $2",
                     2, pa, NULL, 1, "load vectors", &r, err, errlen);
    for (int i = 0; !rc && i < pq.ntuples(r); i++) {
        if (pq.getlength(r, i, 0) != 8 || pq.getlength(r, i, 1) != dims * 4) continue;
        uint64_t id;
        memcpy(&id, pq.getvalue(r, i, 0), 8);
        id = be64toh(id);
        memcpy(v, pq.getvalue(r, i, 1), (size_t)dims * 4);
        le_floats(v, (size_t)dims);
        uint8_t src = pq.getlength(r, i, 2) == 1 && pq.getvalue(r, i, 2)[0] ? 1 : 0;
        cm_rc ar = cm_vec_index_add(x, (int64_t)id, v, src);
        if (ar == CM_ENOMEM) rc = ar;
    }
    if (r) pq.clear(r);
    free(v);
    if (rc) cm_vec_index_release(x);
    return rc;
}
