/*
 * store_pg.c — the index in PostgreSQL (memorySearch.store.driver
 * "postgres"): one database shared by many agents and processes. libpq is
 * loaded with dlopen on the first open, so nothing that uses SQLite only
 * pays for it.
 *
 * Schema: every table carries agent_id first and every statement filters on
 * it, joins only within one agent_id, so Citus can distribute each table by
 * agent_id, colocated (README "PostgreSQL store").
 *   clawmem_agents(agent_id, version, tokenizer, nchunks, ntok, lexer)   version:
 *                                   bumped by each write transaction (the data
 *                                   version); nchunks, ntok: totals of the agent's
 *                                   chunks; lexer 1: tsv written by clawmem's
 *                                   FTS5 tokenizer (store_pg_lex.c), 0: by the
 *                                   server's to_tsvector (until a rebuild)
 *   clawmem_meta(agent_id, key, value)
 *   clawmem_files(agent_id, path, source, hash, mtime, size, problem)
 *   clawmem_chunks(agent_id, id, path, source, start_line, end_line, hash, text,
 *                  updated_at, tsv, ntok)          tsv: the keyword text (CJK bigrams as
 *                                                  in SQLite), ntok: its token count
 *   clawmem_vectors(agent_id, chunk_id, dims, embedding)  little-endian float32
 *   clawmem_cache(agent_id, provider, model, provider_key, hash, dims, embedding,
 *                 updated_at)
 *   clawmem_embed_batches(agent_id, id, provider, model, provider_key, state,
 *                         items, created, updated)   embedding batches submitted to
 *                                   the provider's batch API and not collected yet
 *   clawmem_embed_batch_items(agent_id, batch_id, hash)   the chunk hashes each
 *                                   covers (store_pg_batches.c)
 *   clawmem_vector_log(agent_id, seq, chunk_id)   a chunk whose vector was
 *                                   written or deleted, numbered per agent in
 *                                   commit order; clawmem_agents.log_seq is the
 *                                   last number (a gap after a rebuild), and
 *                                   log_version the version whose commit set
 *                                   it: another version means a writer that
 *                                   keeps no log (an older clawmem) wrote
 * Keyword ranking is cm_bm25 (fts_rank.c) computed in SQL: the same IDF,
 * length normalisation and coverage penalty over PostgreSQL's lexemes.
 * Writers take a transaction-scoped advisory lock of their agent, so many
 * processes on many hosts can write one database; a rebuild is one
 * transaction, invisible until it commits.
 */
#include <dlfcn.h>
#include <libpq-fe.h>
#include <pthread.h>

#include "../base/redact.h"
#include "fts_rank.h"
#include "store_pg_files.h"
#include "store_pg_int.h"

/* A rebuild that writes at least this many chunks analyzes the table. */
#define PG_ANALYZE_CHUNKS 1000

/* ---- libpq, loaded on first use ----------------------------------------- */

store_pg_lib cm_store_pg_lib;

static pthread_once_t pq_once = PTHREAD_ONCE_INIT;

#define PQ_SYM(field, name)                                                                        \
    do {                                                                                           \
        *(void **)&cm_store_pg_lib.field = dlsym(cm_store_pg_lib.h, name);                         \
        if (!cm_store_pg_lib.field) ok = false;                                                    \
    } while (0)

static void pq_load(void)
{
    cm_store_pg_lib.h = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
    if (!cm_store_pg_lib.h) return;
    bool ok = true;
    PQ_SYM(connectdb, "PQconnectdb");
    PQ_SYM(connectdb_params, "PQconnectdbParams");
    PQ_SYM(status, "PQstatus");
    PQ_SYM(error_message, "PQerrorMessage");
    PQ_SYM(finish, "PQfinish");
    PQ_SYM(exec, "PQexec");
    PQ_SYM(reset, "PQreset");
    PQ_SYM(exec_params, "PQexecParams");
    PQ_SYM(prepare, "PQprepare");
    PQ_SYM(send_query_params, "PQsendQueryParams");
    PQ_SYM(get_result, "PQgetResult");
    PQ_SYM(exec_prepared, "PQexecPrepared");
    PQ_SYM(result_status, "PQresultStatus");
    PQ_SYM(result_error_field, "PQresultErrorField");
    PQ_SYM(clear, "PQclear");
    PQ_SYM(ntuples, "PQntuples");
    PQ_SYM(getvalue, "PQgetvalue");
    PQ_SYM(getisnull, "PQgetisnull");
    PQ_SYM(getlength, "PQgetlength");
    PQ_SYM(set_notice_processor, "PQsetNoticeProcessor");
    PQ_SYM(put_copy_data, "PQputCopyData");
    PQ_SYM(put_copy_end, "PQputCopyEnd");
    PQ_SYM(send_query, "PQsendQuery");
    PQ_SYM(consume_input, "PQconsumeInput");
    PQ_SYM(is_busy, "PQisBusy");
    cm_store_pg_lib.ok = ok;
}

bool cm_store_pg_lib_load(void)
{
    pthread_once(&pq_once, pq_load);
    return cm_store_pg_lib.ok;
}

/* ---- the connection ------------------------------------------------------ */

static void no_notices(void *arg, const char *message)
{
    (void)arg;
    (void)message; /* library code never prints */
}

void cm_store_pg_conn_text(const char *dsn, const char *m, char *out, size_t n)
{
    redact r;
    buf b;
    cm_redact_init(&r);
    cm_buf_init(&b, n ? n - 1 : 0);
    if (!m) m = "no answer from the server";
    if (cm_redact_add_conninfo(&r, dsn) ||
        cm_redact_text(&r, m, strcspn(m, "\n"), 300, &b) == CM_ENOMEM)
        cm_buf_reset(&b); /* CM_ETOOBIG keeps what fitted */
    if (n) snprintf(out, n, "%s", b.len ? b.data : "(unreadable)");
    cm_buf_release(&b);
    cm_redact_release(&r);
}

/* Maps a failed result to cm_rc with a message naming the agent and what
 * was being done, with the server's primary message (never the DSN). */
cm_rc cm_store_pg_fail(store *s, const PGresult *res, const char *what, char *err, size_t errlen)
{
    const char *state = res ? cm_store_pg_lib.result_error_field(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? cm_store_pg_lib.result_error_field(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    char conn_text[320];
    if (!msg && s->pg && s->pg->conn) { /* the connection's own: it may quote the DSN */
        cm_store_pg_conn_text(s->pg->dsn, cm_store_pg_lib.error_message(s->pg->conn), conn_text,
                              sizeof conn_text);
        msg = conn_text;
    }
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

bool cm_store_pg_ok(const PGresult *r)
{
    ExecStatusType st = r ? cm_store_pg_lib.result_status(r) : PGRES_FATAL_ERROR;
    return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

/* A session's settings: the lock timeout ($1 ms), and generic plans for
 * prepared statements: the search's plan does not depend on its
 * parameters' values, and planning it costs more than running it. */
static const char session_sql[] =
    "SELECT set_config('lock_timeout', $1, false), set_config('plan_cache_mode', "
    "'force_generic_plan', false)";

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
    s->pg->round_trips++;
    return n < 0 ? cm_store_pg_lib.exec(c, sql)
                 : cm_store_pg_lib.exec_params(c, sql, n, NULL, v, lens, fmts, bin);
}

static PGresult *exec_sql(store *s, const char *sql, int n, const char *const *v, const int *lens,
                          int bin)
{
    PGresult *r = exec_once(s, sql, n, v, lens, bin);
    if (cm_store_pg_ok(r) || s->pg->depth || cm_store_pg_lib.status(s->pg->conn) != CONNECTION_BAD)
        return r;
    cm_store_pg_lib.reset(s->pg->conn);
    if (cm_store_pg_lib.status(s->pg->conn) != CONNECTION_OK) return r;
    s->pg->session_gen++; /* a new session: its session-level locks are gone */
    cm_store_pg_lib.set_notice_processor(s->pg->conn, no_notices, NULL);
    const char *p1[] = {s->pg->lock_ms};
    s->pg->prepared = 0; /* a new session: nothing prepared */
    PGresult *t = cm_store_pg_lib.exec_params(s->pg->conn, session_sql, 1, NULL, p1, NULL, NULL, 0);
    bool set = cm_store_pg_ok(t);
    if (t) cm_store_pg_lib.clear(t);
    if (!set) return r;
    if (r) cm_store_pg_lib.clear(r);
    return exec_once(s, sql, n, v, lens, bin);
}

/* The name statement id is prepared under. */
static const char *stmt_name(int id, char *name, size_t cap)
{
    snprintf(name, cap, "cm_stmt_%d", id);
    return name;
}

/* Prepares statement id on the connection unless it has it. */
static PGresult *prepare_once(store *s, int id, const char *sql, int n)
{
    if (s->pg->prepared & (1u << id)) return NULL;
    char name[32];
    s->pg->round_trips++;
    PGresult *r =
        cm_store_pg_lib.prepare(s->pg->conn, stmt_name(id, name, sizeof name), sql, n, NULL);
    if (!cm_store_pg_ok(r)) return r;
    cm_store_pg_lib.clear(r);
    s->pg->prepared |= 1u << id;
    return NULL;
}

cm_rc cm_store_pg_run_prepared(store *s, int id, const char *sql, int n, const char *const *v,
                               const char *what, PGresult **res, char *err, size_t errlen)
{
    s->pg->version_fresh = false;
    bool pend = s->pg->npend || s->pg->copying;
    cm_rc frc = pend ? cm_store_pg_flush_files(s, err, errlen) : CM_OK;
    if (!frc && s->pg->inflight) frc = cm_store_pg_collect_batch(s, err, errlen);
    if (frc) return frc;
    PGresult *r = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (r) cm_store_pg_lib.clear(r);
        r = prepare_once(s, id, sql, n);
        if (!r) {
            char name[32];
            s->pg->round_trips++;
            r = cm_store_pg_lib.exec_prepared(s->pg->conn, stmt_name(id, name, sizeof name), n, v,
                                              NULL, NULL, 0);
        }
        if (cm_store_pg_ok(r) || s->pg->depth ||
            cm_store_pg_lib.status(s->pg->conn) != CONNECTION_BAD)
            break;
        /* the server dropped the connection: a new session, prepared again */
        PGresult *t = exec_sql(s, "SELECT 1", 0, NULL, NULL, 0);
        bool up = cm_store_pg_ok(t);
        if (t) cm_store_pg_lib.clear(t);
        if (!up) break;
    }
    if (!cm_store_pg_ok(r)) {
        cm_rc rc = cm_store_pg_fail(s, r, what, err, errlen);
        if (r) cm_store_pg_lib.clear(r);
        return rc;
    }
    if (res)
        *res = r;
    else
        cm_store_pg_lib.clear(r);
    return CM_OK;
}

/* Runs sql with text parameters (a NULL value is SQL NULL); *res receives
 * the result when the caller wants rows (then it must clear it). n < 0: sql
 * is several statements without parameters. A rebuild's pending files are
 * written first. */
cm_rc cm_store_pg_run(store *s, const char *sql, int n, const char *const *v, const char *what,
                      PGresult **res, char *err, size_t errlen)
{
    return cm_store_pg_run_bin(s, sql, n, v, NULL, 0, what, res, err, errlen);
}

/* run with binary parameters where lens[i] > 0 (bytea; lens NULL: none), binary results
 * when bin. */
cm_rc cm_store_pg_run_bin(store *s, const char *sql, int n, const char *const *v, const int *lens,
                          int bin, const char *what, PGresult **res, char *err, size_t errlen)
{
    s->pg->version_fresh = false;
    bool pend = s->pg->npend || s->pg->copying;
    cm_rc frc = pend ? cm_store_pg_flush_files(s, err, errlen) : CM_OK;
    if (!frc && s->pg->inflight) frc = cm_store_pg_collect_batch(s, err, errlen);
    if (frc) return frc;
    PGresult *r = exec_sql(s, sql, n, v, lens, bin);
    if (!cm_store_pg_ok(r)) {
        cm_rc rc = cm_store_pg_fail(s, r, what, err, errlen);
        if (r) cm_store_pg_lib.clear(r);
        return rc;
    }
    if (res)
        *res = r;
    else
        cm_store_pg_lib.clear(r);
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
    "model, provider_key, hash));"
    "ALTER TABLE clawmem_agents ADD COLUMN IF NOT EXISTS log_seq bigint NOT NULL DEFAULT 0;"
    "ALTER TABLE clawmem_agents ADD COLUMN IF NOT EXISTS log_version bigint NOT NULL DEFAULT -1;"
    "CREATE TABLE IF NOT EXISTS clawmem_vector_log(agent_id text NOT NULL, seq bigint NOT NULL, "
    "chunk_id bigint NOT NULL, PRIMARY KEY(agent_id, seq));"
    "ALTER TABLE clawmem_agents ADD COLUMN IF NOT EXISTS lexer smallint NOT NULL DEFAULT 0;"
    "ALTER TABLE clawmem_chunks ALTER COLUMN tsv SET STORAGE MAIN;"
    "CREATE TABLE IF NOT EXISTS clawmem_embed_batches(agent_id text NOT NULL, id text NOT NULL, "
    "provider text NOT NULL, model text NOT NULL, provider_key text NOT NULL, state text NOT "
    "NULL, items bigint NOT NULL, created bigint NOT NULL, updated bigint NOT NULL, PRIMARY "
    "KEY(agent_id, id));"
    "CREATE TABLE IF NOT EXISTS clawmem_embed_batch_items(agent_id text NOT NULL, batch_id text "
    "NOT NULL, hash text NOT NULL, PRIMARY KEY(agent_id, batch_id, hash));";

/* The tables (create: when absent), or what a database made by an earlier
 * version lacks (the vector log, the embedding batch tables) at any open;
 * s->pg->has_log and has_batches say whether they are there. An open that
 * need not create, by a role that may not add the log, goes on without it
 * (readers then load the vectors whole on each new version, and a write
 * says why it cannot); one that may not add the batch tables goes on
 * without them (a sync then embeds synchronously). The keyword index: GIN
 * over (agent_id, tsv) with btree_gin when the extension can be had, else
 * over tsv alone. Each chunk's tsv stays in its row (STORAGE MAIN: the text
 * goes to TOAST first), where a search reads it for each of its matches: out
 * of line, every use of it read TOAST again (docs/BENCHMARKS.md); rows
 * written before keep their place until rewritten. */
static cm_rc ensure_schema(store *s, bool create, char *err, size_t errlen)
{
    PGresult *r = NULL;
    cm_rc rc = cm_store_pg_run(
        s,
        "SELECT to_regclass('clawmem_chunks_tsv') IS NOT NULL AND to_regclass("
        "'clawmem_vector_log') IS NOT NULL AND EXISTS (SELECT 1 FROM pg_attribute WHERE "
        "attrelid = to_regclass('clawmem_agents') AND attname = 'log_version' AND NOT "
        "attisdropped), to_regclass('clawmem_chunks') IS NOT NULL, EXISTS (SELECT 1 FROM "
        "pg_attribute WHERE attrelid = to_regclass('clawmem_agents') AND attname = 'lexer' AND "
        "NOT attisdropped), EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass("
        "'clawmem_chunks') AND attname = 'tsv' AND attstorage = 'm'), to_regclass("
        "'clawmem_embed_batches') IS NOT NULL AND to_regclass('clawmem_embed_batch_items') IS "
        "NOT NULL",
        0, NULL, "read the schema", &r, err, errlen);
    if (rc) return rc;
    bool log = cm_store_pg_lib.getvalue(r, 0, 0)[0] == 't';
    bool tables = cm_store_pg_lib.getvalue(r, 0, 1)[0] == 't';
    bool lexer = cm_store_pg_lib.getvalue(r, 0, 2)[0] == 't';
    bool inrow = cm_store_pg_lib.getvalue(r, 0, 3)[0] == 't';
    bool batches = cm_store_pg_lib.getvalue(r, 0, 4)[0] == 't';
    bool have = log && lexer && batches;
    cm_store_pg_lib.clear(r);
    s->pg->has_log = log;
    s->pg->has_lexer = lexer;
    s->pg->has_batches = batches;
    char ignore[8];
    if (log && lexer && !inrow) /* a database of an earlier clawmem: best effort */
        cm_store_pg_run(s, "ALTER TABLE clawmem_chunks ALTER COLUMN tsv SET STORAGE MAIN", 0, NULL,
                        "", NULL, ignore, sizeof ignore);
    if (have || (!create && !tables)) return CM_OK; /* else created, or added to */
    char why[256];
    rc = cm_store_pg_run(s, "BEGIN", 0, NULL, "create the tables", NULL, why, sizeof why);
    if (!rc)
        rc = cm_store_pg_run(s, schema_sql, -1, NULL, "create the tables", NULL, why, sizeof why);
    if (!rc) rc = cm_store_pg_run(s, "COMMIT", 0, NULL, "create the tables", NULL, why, sizeof why);
    if (rc) {
        cm_store_pg_run(s, "ROLLBACK", 0, NULL, "", NULL, NULL, 0);
        if (!create && tables) return CM_OK; /* without the log */
        /* only the batch tables are missing: the index works without them
         * (batch embedding says why it cannot run) */
        if (log && lexer) return CM_OK;
        return cm_seterr(err, errlen, rc, "%s", why);
    }
    s->pg->has_log = s->pg->has_lexer = s->pg->has_batches = true;
    if (cm_store_pg_run(s, "CREATE EXTENSION IF NOT EXISTS btree_gin", 0, NULL, "", NULL, ignore,
                        sizeof ignore) == CM_OK &&
        cm_store_pg_run(
            s,
            "CREATE INDEX IF NOT EXISTS clawmem_chunks_tsv ON clawmem_chunks USING gin(agent_id, "
            "tsv)",
            0, NULL, "", NULL, ignore, sizeof ignore) == CM_OK)
        return CM_OK;
    return cm_store_pg_run(
        s, "CREATE INDEX IF NOT EXISTS clawmem_chunks_tsv ON clawmem_chunks USING gin(tsv)", 0,
        NULL, "create the keyword index", NULL, err, errlen);
}

cm_rc cm_store_open_pg(store *s, const char *dsn, const char *agent, const char *tokenizer,
                       unsigned flags, int busy_ms, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    PGresult *r = NULL;
    memset(s, 0, sizeof *s);
    cm_buf_init(&s->scratch, 0);
    pthread_once(&pq_once, pq_load);
    if (!cm_store_pg_lib.ok)
        return cm_seterr(err, errlen, CM_EIO,
                         "memorySearch.store.driver \"postgres\" needs libpq (libpq.so.5; Debian: "
                         "apt-get install libpq5)");
    if (!(s->pg = calloc(1, sizeof *s->pg))) CHECK(CM_ENOMEM);
    if (!(s->pg->agent = cm_strdup(agent))) CHECK(CM_ENOMEM);
    buf name = BUF_INIT;
    if (cm_buf_printf(&name, "postgres:%s", agent)) CHECK(CM_ENOMEM);
    s->path = cm_buf_detach(&name);
    s->pg->seen_version = s->pg->meta_version = -1;
    s->pg->lexer_undo = -1;
    if (!(s->pg->dsn = cm_strdup(dsn))) CHECK(CM_ENOMEM);
    s->pg->conn = cm_store_pg_lib.connectdb(dsn);
    if (!s->pg->conn) CHECK(CM_ENOMEM);
    if (cm_store_pg_lib.status(s->pg->conn) != CONNECTION_OK) {
        char m[320];
        cm_store_pg_conn_text(dsn, cm_store_pg_lib.error_message(s->pg->conn), m, sizeof m);
        FAIL(CM_EIO, "postgres index of agent %s: cannot connect: %s", agent, m);
    }
    cm_store_pg_lib.set_notice_processor(s->pg->conn, no_notices, NULL);
    snprintf(s->pg->lock_ms, sizeof s->pg->lock_ms, "%d", busy_ms > 0 ? busy_ms : 1);
    const char *p1[] = {s->pg->lock_ms};
    CHECK(cm_store_pg_run(s, session_sql, 1, p1, "set the lock timeout", NULL, err, errlen));
    CHECK(ensure_schema(s, (flags & STORE_CREATE) != 0, err, errlen));
    const char *pa[] = {agent};
    rc = cm_store_pg_run(s,
                         s->pg->has_lexer
                             ? "SELECT tokenizer, lexer FROM clawmem_agents WHERE agent_id = $1"
                             : "SELECT tokenizer, 0 FROM clawmem_agents WHERE agent_id = $1",
                         1, pa, "read the agent", &r, err, errlen);
    if (rc == CM_ECORRUPT && (flags & STORE_ANY_AGENT))
        FAIL(CM_ENOTFOUND, "the database holds no clawmem tables");
    if (rc == CM_ECORRUPT && !(flags & STORE_CREATE))
        FAIL(CM_ENOTFOUND, "postgres index of agent %s does not exist yet", agent);
    CHECK(rc);
    const char *tok = cm_store_pg_lib.ntuples(r) ? cm_store_pg_lib.getvalue(r, 0, 0) : NULL;
    /* STORE_ANY_AGENT (agents list|delete): the tables, whatever rows they hold */
    if (!tok && !(flags & (STORE_CREATE | STORE_ANY_AGENT)))
        FAIL(CM_ENOTFOUND, "postgres index of agent %s does not exist yet", agent);
    s->pg->lexer = tok && strcmp(cm_store_pg_lib.getvalue(r, 0, 1), "1") == 0;
    if (!tok) tok = tokenizer;
    /* trigram has no tsvector counterpart: unicode61 with CJK bigrams serves */
    s->pg->tsconfig = tok && strcmp(tok, "porter") == 0 ? "english" : "simple";
    s->trigram = false;
    if (s->pg->lexer) CHECK(cm_store_pg_lex_open(s, tok, err, errlen));
out:
    if (r) cm_store_pg_lib.clear(r);
    if (rc) cm_store_pg_close(s);
    return rc;
}

void cm_store_pg_close(store *s)
{
    if (s->pg) {
        cm_store_pg_merge_aside_end(s, false);
        if (s->pg->dsn) memset(s->pg->dsn, 0, strlen(s->pg->dsn)); /* a secret: wiped */
        free(s->pg->dsn);
        if (s->pg->conn) cm_store_pg_lib.finish(s->pg->conn);
        cm_store_pg_lex_close(s);
        cm_buf_release(&s->pg->lexbuf);
        cm_buf_release(&s->pg->lexbytes);
        cm_buf_release(&s->pg->copybuf);
        free(s->pg->lextok);
        free(s->pg->agent);
        cm_store_pg_meta_forget(s);
        for (size_t k = 0; k < ARRAY_LEN(s->pg->pend_chunks); k++)
            cm_buf_release(&s->pg->pend_chunks[k]);
        for (size_t k = 0; k < ARRAY_LEN(s->pg->pend_files); k++)
            cm_buf_release(&s->pg->pend_files[k]);
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
    p->log_known = false;
    p->nlog = 0;
    const char *pa[] = {p->agent};
    cm_rc rc = cm_store_pg_run(s, "BEGIN", 0, NULL, "begin", NULL, err, errlen);
    /* writers of one agent take turns, across processes and hosts */
    if (!rc)
        rc = cm_store_pg_run(s,
                             "SELECT pg_advisory_xact_lock(hashtextextended('clawmem:' || $1, 0))",
                             1, pa, "lock the agent", NULL, err, errlen);
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
    bool rebuilt = p->fresh;
    p->fresh = false;
    /* the last batch, before the totals are read */
    cm_rc rc = p->npend || p->copying ? cm_store_pg_flush_files(s, err, errlen) : CM_OK;
    if (!rc && p->inflight) rc = cm_store_pg_collect_batch(s, err, errlen);
    if (rc) {
        cm_store_pg_rollback(s);
        return rc;
    }
    /* One update of the agent's row a transaction: updating one row for
     * each file of a rebuild would grow its version chain quadratically. */
    char dc[32], dt[32], dl[32], keep[32];
    snprintf(dc, sizeof dc, "%lld", (long long)p->dchunks);
    snprintf(dt, sizeof dt, "%lld", (long long)p->dntok);
    snprintf(dl, sizeof dl, "%lld", (long long)(p->log_known ? p->log_base + p->nlog : -1));
    snprintf(keep, sizeof keep, "%d", VECTOR_LOG_KEEP);
    const char *pu[] = {p->agent, dc, dt, dl};
    /* the log's head moves past this transaction's entries, and one more
     * (a gap: readers load again) when a writer without the log committed
     * since the last one with it */
    if (p->dirty && p->has_log)
        rc = cm_store_pg_run(
            s,
            "UPDATE clawmem_agents SET version = version + 1, nchunks = nchunks + $2, ntok = "
            "ntok + $3, log_seq = greatest(log_seq, $4::bigint) + CASE WHEN log_version = "
            "version THEN 0 ELSE 1 END, log_version = version + 1 WHERE agent_id = $1",
            4, pu, "commit", NULL, err, errlen);
    else if (p->dirty)
        rc = cm_store_pg_run(s,
                             "UPDATE clawmem_agents SET version = version + 1, nchunks = nchunks "
                             "+ $2, ntok = ntok + $3 WHERE agent_id = $1",
                             3, pu, "commit", NULL, err, errlen);
    const char *pt[] = {p->agent, dl, keep};
    if (!rc && p->dirty && p->nlog) /* the log keeps its last entries */
        rc = cm_store_pg_run(s,
                             "DELETE FROM clawmem_vector_log WHERE agent_id = $1 AND seq <= "
                             "$2::bigint - $3::bigint",
                             3, pt, "trim the vector log", NULL, err, errlen);
    if (!rc) rc = cm_store_pg_run(s, "COMMIT", 0, NULL, "commit", NULL, err, errlen);
    if (rc) cm_store_pg_rollback(s);
    p->lexer_undo = -1;
    /* A rebuild that wrote many chunks: the planner learns of them now, not
     * at autovacuum's next round, or a search planned before then (its plan
     * kept for the connection) would read all the agent's chunks instead of
     * the keyword index's matches. Best effort (a role that does not own
     * the table gets a warning). The table's size and agent_id only: the
     * search's generic plan estimates its match without statistics (a
     * parameter), and the keyword text's (every lexeme of 30,000 sampled
     * rows counted) made this statement most of a second of a tldr rebuild
     * (docs/BENCHMARKS.md); autovacuum's next round computes them all. */
    if (!rc && rebuilt && p->dchunks >= PG_ANALYZE_CHUNKS) {
        char ignore[8];
        cm_store_pg_run(s, "ANALYZE clawmem_chunks(agent_id)", 0, NULL, "", NULL, ignore,
                        sizeof ignore);
    }
    if (p->dirty) cm_store_pg_meta_forget(s); /* a new version, perhaps new meta */
    p->depth = 0;
    /* a rebuild merges the keyword index's pending list now: what the
     * merger has not (it finishes first) */
    cm_store_pg_merge_aside_end(s, !rc);
    if (!rc && rebuilt) cm_store_pg_merge_pending(s);
    return rc;
}

/* Merges the keyword index's pending list into the index. */
static const char merge_sql[] = "SELECT gin_clean_pending_list('clawmem_chunks_tsv'::regclass)";

/* The keyword index takes new entries into its pending list (GIN's
 * fastupdate), which every search then reads whole until autovacuum's next
 * round merges it: after a rebuild up to gin_pending_list_limit (4 MB), a
 * third of a search's time on tldr; after an incremental sync of 1% of tldr
 * 60 pages, 0.5 ms of every search (docs/BENCHMARKS.md), and autovacuum
 * counts inserted rows, so a few small syncs do not start it. This merges
 * it when this connection inserted chunks since it last did: at a
 * rebuild's commit and at the end of a sync (cm_store_checkpoint), not at
 * each file's commit (a sync commits each file on its own: hundreds).
 * Best effort, as ANALYZE: the index's owner only (another role gets an
 * error, ignored), and a merge already running elsewhere (autovacuum's) is
 * waited for no longer than the lock timeout. */
void cm_store_pg_merge_pending(store *s)
{
    struct store_pg *p = s->pg;
    if (!p->unmerged || p->depth) return;
    char ignore[8];
    cm_store_pg_run(s, merge_sql, 0, NULL, "", NULL, ignore, sizeof ignore);
    p->unmerged = false;
}

/* The merger starts a merge after at least this many chunks came since its
 * last one began. */
#define PG_ASIDE_CHUNKS 4096

/* A rebuild's COPY fills the keyword index's pending list, and merging it
 * at the commit took a third of a tldr rebuild's server time, while the
 * client and the server's COPY left the second core mostly idle
 * (docs/BENCHMARKS.md). The merger, a second connection, merges the list
 * while the COPY goes on: GIN's pending list takes new entries during a
 * merge (autovacuum merges beside writers the same way), and its index
 * entries need no visibility, so entries of the uncommitted rebuild may
 * move into the index (a rolled-back rebuild's entries then point at dead
 * rows, as after any aborted insert). Nothing waits for it but the
 * commit; a merger that cannot connect, or a role that may not merge (the
 * index's owner only: its error ignored), leaves the merge to the commit,
 * as before. */
void cm_store_pg_merge_aside(store *s)
{
    struct store_pg *p = s->pg;
    if (!p->fresh || !p->dsn || p->aside_off) return;
    if (p->aside_busy) {
        if (!cm_store_pg_lib.consume_input(p->aside)) {
            cm_store_pg_merge_aside_end(s, false);
            p->aside_off = true;
            return;
        }
        if (cm_store_pg_lib.is_busy(p->aside)) return; /* still merging */
        PGresult *r;
        while ((r = cm_store_pg_lib.get_result(p->aside)) != NULL)
            cm_store_pg_lib.clear(r);
        p->aside_busy = false;
    }
    if (p->dchunks - p->aside_at < PG_ASIDE_CHUNKS) return;
    if (!p->aside) {
        p->aside = cm_store_pg_lib.connectdb(p->dsn);
        if (!p->aside || cm_store_pg_lib.status(p->aside) != CONNECTION_OK) {
            if (p->aside) cm_store_pg_lib.finish(p->aside);
            p->aside = NULL;
            p->aside_off = true;
            return;
        }
        cm_store_pg_lib.set_notice_processor(p->aside, no_notices, NULL);
    }
    if (!cm_store_pg_lib.send_query(p->aside, merge_sql)) {
        cm_store_pg_merge_aside_end(s, false);
        p->aside_off = true;
        return;
    }
    p->aside_busy = true;
    p->aside_at = p->dchunks;
    p->merges_aside++;
}

void cm_store_pg_merge_aside_end(store *s, bool wait)
{
    struct store_pg *p = s->pg;
    if (p->aside) {
        PGresult *r;
        while (wait && p->aside_busy && (r = cm_store_pg_lib.get_result(p->aside)) != NULL)
            cm_store_pg_lib.clear(r);
        cm_store_pg_lib.finish(p->aside); /* a merge still running ends on its own */
    }
    p->aside = NULL;
    p->aside_busy = p->aside_off = false;
    p->aside_at = 0;
}

uint64_t cm_store_pg_merges_aside(const store *s)
{
    return s->pg ? s->pg->merges_aside : 0;
}

cm_rc cm_store_pg_log_next(store *s, int64_t *seq, char *err, size_t errlen)
{
    struct store_pg *p = s->pg;
    if (!p->has_log)
        return cm_seterr(err, errlen, CM_EIO,
                         "postgres index of agent %s: the database predates the vector log and "
                         "this role may not add it; open it once as a role that may create "
                         "tables (any `clawmem index` run by the tables' owner does)",
                         p->agent);
    if (!p->log_known) {
        /* the agent's head; for an agent without its row yet (a first
         * rebuild, or one after a drop) the clock in microseconds, so that
         * numbers never repeat for a reader that loaded the dropped agent */
        PGresult *r = NULL;
        const char *pa[] = {p->agent};
        cm_rc rc = cm_store_pg_run(
            s,
            "SELECT coalesce((SELECT log_seq FROM clawmem_agents WHERE agent_id = $1), "
            "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint)",
            1, pa, "read the vector log", &r, err, errlen);
        if (rc) return rc;
        p->log_base = strtoll(cm_store_pg_lib.getvalue(r, 0, 0), NULL, 10);
        cm_store_pg_lib.clear(r);
        p->log_known = true;
        p->nlog = 0;
    }
    *seq = p->log_base + ++p->nlog;
    return CM_OK;
}

void cm_store_pg_rollback(store *s)
{
    if (!s->pg || !s->pg->depth) return;
    cm_store_pg_drop_pending(s->pg); /* never sent: the transaction ends without them */
    cm_store_pg_copy_abort(s);       /* an open COPY ends, failed */
    cm_store_pg_merge_aside_end(s, false);
    if (s->pg->inflight) { /* sent: its result read and dropped */
        char ignore0[8];
        cm_store_pg_collect_batch(s, ignore0, sizeof ignore0);
    }
    s->pg->depth = 0;
    s->pg->fresh = false;
    if (s->pg->lexer_undo >= 0) { /* a rebuild undone: the agent's rows as they were */
        s->pg->lexer = s->pg->lexer_undo;
        s->pg->lexer_undo = -1;
    }
    char ignore[8];
    cm_store_pg_run(s, "ROLLBACK", 0, NULL, "", NULL, ignore, sizeof ignore);
}

/* A write outside a transaction runs in one of its own. */
cm_rc cm_store_pg_w_begin(store *s, bool *own, char *err, size_t errlen)
{
    *own = s->pg->depth == 0;
    cm_rc rc = *own ? cm_store_pg_begin(s, err, errlen) : CM_OK;
    if (!rc) s->pg->dirty = true;
    return rc;
}

cm_rc cm_store_pg_w_end(store *s, bool own, cm_rc rc, char *err, size_t errlen)
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
    /* a rebuild lexes here when the database can say so (its lexer column) */
    cm_store_pg_lex_close(s); /* the tokenizer may be another */
    s->pg->lexer_undo = s->pg->lexer;
    s->pg->lexer = s->pg->has_lexer;
    if (s->pg->lexer) rc = cm_store_pg_lex_open(s, tokenizer ? tokenizer : "porter", err, errlen);
    if (rc) {
        cm_store_pg_rollback(s);
        return rc;
    }
    const char *pa[] = {s->pg->agent, tokenizer ? tokenizer : "porter", s->pg->lexer ? "1" : "0"};
    static const char *const sql[] = {
        "DELETE FROM clawmem_vectors WHERE agent_id = $1",
        "DELETE FROM clawmem_vector_log WHERE agent_id = $1",
        "DELETE FROM clawmem_chunks WHERE agent_id = $1",
        "DELETE FROM clawmem_files WHERE agent_id = $1",
        "DELETE FROM clawmem_meta WHERE agent_id = $1",
    };
    for (size_t i = 0; !rc && i < ARRAY_LEN(sql); i++)
        rc = cm_store_pg_run(s, sql[i], 1, pa, "clear the index for a rebuild", NULL, err, errlen);
    /* For this transaction only: the keyword index's pending list may hold
     * the whole rebuild (64 MB, not 4), merged once at the commit
     * (cm_store_pg_merge_pending) instead of every 4 MB of entries during
     * the COPY with 4 MB of work memory; a tldr rebuild's server time about
     * 15% less (docs/BENCHMARKS.md). Both are settings any role may
     * change. */
    if (!rc)
        rc = cm_store_pg_run(s,
                             "SELECT set_config('gin_pending_list_limit', '65536', true), "
                             "set_config('work_mem', '65536', true)",
                             0, NULL, "size the rebuild's keyword index memory", NULL, err, errlen);
    /* a number without an entry: a reader that loaded the old vectors finds
     * the gap and loads them all again */
    int64_t gap;
    if (!rc) rc = cm_store_pg_log_next(s, &gap, err, errlen);
    if (!rc)
        rc = cm_store_pg_run(
            s,
            /* a new agent's version starts from the clock (microseconds): an
             * agent dropped and made again never shows an engine that loaded
             * the old one the version it saw */
            s->pg->has_lexer
                ? "INSERT INTO clawmem_agents(agent_id, tokenizer, version, log_version, lexer) "
                  "VALUES($1, $2, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, "
                  "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint, $3::smallint) ON "
                  "CONFLICT (agent_id) DO UPDATE SET tokenizer = excluded.tokenizer, nchunks = 0, "
                  "ntok = 0, lexer = excluded.lexer"
                : "INSERT INTO clawmem_agents(agent_id, tokenizer, version, log_version) VALUES("
                  "$1, $2, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, (extract("
                  "epoch FROM clock_timestamp()) * 1000000)::bigint) ON CONFLICT (agent_id) DO "
                  "UPDATE SET tokenizer = excluded.tokenizer, nchunks = 0, ntok = 0",
            s->pg->has_lexer ? 3 : 2, pa, "register the agent", NULL, err, errlen);
    if (rc) cm_store_pg_rollback(s);
    if (!rc) s->pg->fresh = true;
    return rc;
}

cm_rc cm_store_pg_ping(const char *dsn, int timeout_s, char *err, size_t errlen)
{
    pthread_once(&pq_once, pq_load);
    if (!cm_store_pg_lib.ok) return cm_seterr(err, errlen, CM_EIO, "libpq (libpq.so.5) is missing");
    char to[16];
    snprintf(to, sizeof to, "%d", timeout_s > 0 ? timeout_s : 2);
    /* dbname expands the DSN (keywords or a URI); the timeout after it wins */
    const char *const keys[] = {"dbname", "connect_timeout", NULL};
    const char *const vals[] = {dsn, to, NULL};
    PGconn *c = cm_store_pg_lib.connectdb_params(keys, vals, 1);
    cm_rc rc = CM_OK;
    if (!c) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    char m[320];
    if (cm_store_pg_lib.status(c) != CONNECTION_OK) {
        cm_store_pg_conn_text(dsn, cm_store_pg_lib.error_message(c), m, sizeof m);
        rc = cm_seterr(err, errlen, CM_EIO, "postgres: cannot connect: %s", m);
    } else {
        cm_store_pg_lib.set_notice_processor(c, no_notices, NULL);
        PGresult *r = cm_store_pg_lib.exec(c, "SELECT 1");
        if (!cm_store_pg_ok(r)) {
            cm_store_pg_conn_text(dsn, cm_store_pg_lib.error_message(c), m, sizeof m);
            rc = cm_seterr(err, errlen, CM_EIO, "postgres: SELECT 1 failed: %s", m);
        }
        if (r) cm_store_pg_lib.clear(r);
    }
    cm_store_pg_lib.finish(c);
    return rc;
}

uint64_t cm_store_pg_round_trips(const store *s)
{
    return s->pg ? s->pg->round_trips : 0;
}

bool cm_store_pg_connected(const store *s)
{
    return s->pg && s->pg->conn && cm_store_pg_lib.status(s->pg->conn) == CONNECTION_OK;
}
