/*
 * store_pg_int.h — what the files of the PostgreSQL store share
 * (store_pg.c: libpq, the connection, transactions; store_pg_files.c: file
 * writes; store_pg_meta.c: meta, file rows and status; store_pg_search.c:
 * keyword search; store_pg_vectors.c: vectors and the embedding cache). Not
 * for other callers: they use store_pg.h.
 */
#ifndef CM_STORE_PG_INT_H
#define CM_STORE_PG_INT_H

#include <libpq-fe.h>

#include "store_pg.h"

/* libpq's functions, loaded with dlopen on the first open (store_pg.c). */
typedef struct store_pg_lib {
    void *h;
    PGconn *(*connectdb)(const char *);
    PGconn *(*connectdb_params)(const char *const *, const char *const *, int);
    ConnStatusType (*status)(const PGconn *);
    char *(*error_message)(const PGconn *);
    void (*finish)(PGconn *);
    PGresult *(*exec)(PGconn *, const char *);
    void (*reset)(PGconn *);
    PGresult *(*exec_params)(PGconn *, const char *, int, const Oid *, const char *const *,
                             const int *, const int *, int);
    int (*send_query_params)(PGconn *, const char *, int, const Oid *, const char *const *,
                             const int *, const int *, int);
    PGresult *(*get_result)(PGconn *);
    PGresult *(*prepare)(PGconn *, const char *, const char *, int, const Oid *);
    PGresult *(*exec_prepared)(PGconn *, const char *, int, const char *const *, const int *,
                               const int *, int);
    ExecStatusType (*result_status)(const PGresult *);
    char *(*result_error_field)(const PGresult *, int);
    void (*clear)(PGresult *);
    int (*ntuples)(const PGresult *);
    char *(*getvalue)(const PGresult *, int, int);
    int (*getisnull)(const PGresult *, int, int);
    int (*getlength)(const PGresult *, int, int);
    PQnoticeProcessor (*set_notice_processor)(PGconn *, PQnoticeProcessor, void *);
    int (*put_copy_data)(PGconn *, const char *, int);
    int (*put_copy_end)(PGconn *, const char *);
    int (*send_query)(PGconn *, const char *);
    int (*consume_input)(PGconn *);
    int (*is_busy)(PGconn *);
    bool ok;
} store_pg_lib;
extern store_pg_lib cm_store_pg_lib;
/* Loads libpq once (thread safe); whether it is there. */
bool cm_store_pg_lib_load(void);
/* The first line of libpq's message m about the connection to dsn, fit for
 * an error: libpq quotes a DSN it cannot parse back whole (password
 * included), so dsn's secrets are redacted (base/redact.h) into out, which
 * is always NUL-terminated (store_pg.c). */
void cm_store_pg_conn_text(const char *dsn, const char *m, char *out, size_t n);

struct store_pg {
    PGconn *conn;
    char *agent;
    const char *tsconfig;   /* "english" (porter) or "simple" */
    int depth;              /* begin/commit nesting; the outermost is the transaction */
    bool dirty;             /* the open transaction wrote */
    bool fresh;             /* a rebuild's transaction: the agent has no rows to replace */
    char lock_ms[16];       /* lock_timeout, set again after a reconnect */
    int64_t dchunks, dntok; /* the open transaction's change to the agent's totals */
    bool unmerged;          /* chunks inserted since the keyword index's pending list was merged */
    /* The vector log (cm_store_pg_log_next): the open transaction's entries
     * take the numbers after log_base (read at its first entry), nlog of
     * them so far; the agent's log_seq moves on by nlog at commit. */
    int64_t log_base, nlog;
    bool log_known;
    bool has_log;     /* the database has the vector log (ensure_schema) */
    bool has_batches; /* the database has the embedding batch tables (ensure_schema) */
    /* session_gen: bumped whenever the connection was made again (a new
     * server session, without the locks of the old one); batch_lease: this
     * session holds the agent's batch lease (store_pg_batches.c), taken in
     * session batch_lease_gen. */
    uint64_t session_gen, batch_lease_gen;
    bool batch_lease;
    /* A rebuild's files not yet sent (store_pg.c): their chunks' and rows'
     * columns as array literals, written by one statement each per batch,
     * before any other statement runs. */
    buf pend_chunks[9], pend_files[6];
    size_t npend;
    /* The agent's data version as the last search statement returned it
     * (-1: unknown); version_fresh: no other statement ran since, so
     * cm_store_pg_data_version may answer with it. The meta row under
     * meta_key as read at meta_version (cm_store_pg_meta_get_recent). */
    int64_t seen_version, meta_version;
    bool version_fresh, meta_have;
    char *meta_key, *meta_val;
    /* lexer: the agent's keyword text is lexed here (store_pg_lex.c) into
     * tsvector literals, not by the server's to_tsvector (clawmem_agents.
     * lexer 1); has_lexer: the database has that column. lex_fn, lex_tok:
     * the FTS5 tokenizer (NULL until the first use). */
    bool lexer, has_lexer;
    int lexer_undo; /* a rebuild's transaction: lexer before it (-1: none) */
    fts5_tokenizer lex_fn;
    Fts5Tokenizer *lex_tok;
    buf lexbuf; /* one chunk's tsvector literal */
    /* one chunk's tokens while it is lexed (store_pg_lex.c): their bytes,
     * and (offset, length, position) of each */
    buf lexbytes;
    struct pg_lex_tok *lextok;
    size_t nlextok, caplextok;
    uint64_t round_trips; /* statements sent (cm_store_pg_round_trips) */
    unsigned prepared;    /* the statements of cm_store_pg_run_prepared this connection has */
    bool inflight;        /* a rebuild's batch sent, its result not read yet (store_pg.c) */
    /* copying: a rebuild lexed here streams its chunks by COPY (binary) and
     * the COPY is open; copybuf: its rows not handed to libpq yet
     * (store_pg_files.c) */
    bool copying;
    buf copybuf;
    /* A rebuild's merger (cm_store_pg_merge_aside): a second connection
     * that merges the keyword index's pending list while this one copies;
     * dsn: kept for it (a secret: wiped at close); aside_busy: a merge sent
     * and not finished; aside_off: no merger for this rebuild (it could
     * not connect); aside_at: dchunks when the last merge started;
     * merges_aside: merges started (cm_store_pg_merges_aside). */
    char *dsn;
    PGconn *aside;
    bool aside_busy, aside_off;
    int64_t aside_at;
    uint64_t merges_aside;
};

/* During a rebuild, after COPY data went to the server: starts a merge of
 * the keyword index's pending list on the merger (a second connection,
 * made at the first call) when it is idle and enough chunks came since
 * the last one, so that the merge runs beside the COPY, on another
 * server process, rather than after it (store_pg.c). Best effort: never
 * fails the rebuild. */
void cm_store_pg_merge_aside(store *s);
/* Ends the merger: its merge waited for when wait, then its connection
 * closed. */
void cm_store_pg_merge_aside_end(store *s, bool wait);

/* A statement read the agent's data version v (see seen_version). */
void cm_store_pg_saw_version(store *s, int64_t v);
/* Forgets the copy of meta_get_recent (a write of this store). */
void cm_store_pg_meta_forget(store *s);

/* Statements prepared once per connection (cm_store_pg_run_prepared): the
 * search of any number of phrases (server-lexed, lexed here), then the
 * search of exactly k phrases, 1 <= k <= PG_FLAT_MAX (store_pg_search.c),
 * server-lexed (PG_STMT_FLAT + k - 1) and lexed here (+ PG_FLAT_MAX). */
#define PG_FLAT_MAX 8
enum {
    PG_STMT_SEARCH,
    PG_STMT_SEARCH_LEX,
    PG_STMT_FLAT,
    PG_STMT_N = PG_STMT_FLAT + 2 * PG_FLAT_MAX
};
_Static_assert(PG_STMT_N <= 32, "one bit of store_pg.prepared per statement");

/* store_pg_lex.c: the tokenizer of the SQLite store's tokenizer name
 * (porter: porter over unicode61; else unicode61), made once per store and
 * deleted by cm_store_pg_lex_close. */
cm_rc cm_store_pg_lex_open(store *s, const char *tokenizer, char *err, size_t errlen);
void cm_store_pg_lex_close(store *s);
/* Writes text[0..len)'s tsvector literal into out (replaced): each lexeme
 * once, in the server's order, with its distinct positions (at most 256);
 * *ntok its token count (FTS5's document length). Needs
 * cm_store_pg_lex_open. */
cm_rc cm_store_pg_lex_doc(store *s, const char *text, size_t len, buf *out, int64_t *ntok);
/* cm_store_pg_lex_doc in tsvector's binary form (tsvectorrecv's input: a
 * COPY field), appended to out. */
cm_rc cm_store_pg_lex_doc_bin(store *s, const char *text, size_t len, buf *out, int64_t *ntok);
/* Appends a phrase's tsquery operand, in parentheses: its tokens joined by
 * <->, the last one a prefix when prefix. Needs cm_store_pg_lex_open. */
cm_rc cm_store_pg_lex_query(store *s, const char *phrase, size_t len, bool prefix, buf *out);

/* Runs sql with n text parameters v (n < 0: several statements without
 * parameters); *res receives the rows when res is not NULL (the caller
 * clears it). A failure names what in err. */
cm_rc cm_store_pg_run(store *s, const char *sql, int n, const char *const *v, const char *what,
                      PGresult **res, char *err, size_t errlen);
/* cm_store_pg_run with binary parameters where lens[i] > 0 (bytea), binary
 * results when bin. */
cm_rc cm_store_pg_run_bin(store *s, const char *sql, int n, const char *const *v, const int *lens,
                          int bin, const char *what, PGresult **res, char *err, size_t errlen);
/* cm_store_pg_run for a statement prepared once per connection under the
 * name of id (its generic plan: no planning per call, one round trip). */
cm_rc cm_store_pg_run_prepared(store *s, int id, const char *sql, int n, const char *const *v,
                               const char *what, PGresult **res, char *err, size_t errlen);
/* A write outside a transaction runs in one of its own: begin sets *own
 * when it opened one, end commits it (or rolls it back when rc failed). */
cm_rc cm_store_pg_w_begin(store *s, bool *own, char *err, size_t errlen);
cm_rc cm_store_pg_w_end(store *s, bool own, cm_rc rc, char *err, size_t errlen);
/* The number before the open transaction's next vector log entry (reads
 * the agent's log head at the first call of a transaction). */
cm_rc cm_store_pg_log_next(store *s, int64_t *seq, char *err, size_t errlen);
/* Maps a failed result (NULL: the connection's error) to cm_rc with a
 * message naming the agent and what was being done (store_pg.c). */
cm_rc cm_store_pg_fail(store *s, const PGresult *res, const char *what, char *err, size_t errlen);
/* Whether r is a successful result (store_pg.c). */
bool cm_store_pg_ok(const PGresult *r);
/* Appends s[0..n) to b as the next element of a PostgreSQL array literal
 * (quoted, escaped; a comma before all but the first; store_pg_files.c). */
cm_rc cm_store_pg_array_elem(buf *b, const char *s, size_t n);

#endif
