/*
 * store_pg_int.h — what the files of the PostgreSQL store share
 * (store_pg.c: libpq, the connection, transactions, file writes;
 * store_pg_meta.c: meta, file rows and status; store_pg_search.c: keyword
 * search; store_pg_vectors.c: vectors and the embedding cache). Not for
 * other callers: they use store_pg.h.
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
    bool ok;
} store_pg_lib;
extern store_pg_lib cm_store_pg_lib;
/* Loads libpq once (thread safe); whether it is there. */
bool cm_store_pg_lib_load(void);

struct store_pg {
    PGconn *conn;
    char *agent;
    const char *tsconfig;   /* "english" (porter) or "simple" */
    int depth;              /* begin/commit nesting; the outermost is the transaction */
    bool dirty;             /* the open transaction wrote */
    bool fresh;             /* a rebuild's transaction: the agent has no rows to replace */
    char lock_ms[16];       /* lock_timeout, set again after a reconnect */
    int64_t dchunks, dntok; /* the open transaction's change to the agent's totals */
    /* The vector log (cm_store_pg_log_next): the open transaction's entries
     * take the numbers after log_base (read at its first entry), nlog of
     * them so far; the agent's log_seq moves on by nlog at commit. */
    int64_t log_base, nlog;
    bool log_known;
    bool has_log; /* the database has the vector log (ensure_schema) */
    /* A rebuild's files not yet sent (store_pg.c): their chunks' and rows'
     * columns as array literals, written by one statement each per batch,
     * before any other statement runs. */
    buf pend_chunks[8], pend_files[6];
    size_t npend;
    unsigned prepared; /* the statements of cm_store_pg_run_prepared this connection has */
    bool inflight;     /* a rebuild's batch sent, its result not read yet (store_pg.c) */
};

/* Statements prepared once per connection (cm_store_pg_run_prepared). */
enum { PG_STMT_SEARCH, PG_STMT_N };

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
/* Appends s[0..n) to b as the next element of a PostgreSQL array literal
 * (quoted, escaped; a comma before all but the first). */
cm_rc cm_store_pg_array_elem(buf *b, const char *s, size_t n);

#endif
