/*
 * store.h — the index database: SQLite in WAL mode holding the meta
 * fingerprint, files, chunks, a contentless FTS5 table over the chunks'
 * keyword text, and (for later layers) vectors and the embedding cache.
 * All SQLite error codes are mapped to cm_rc here and nowhere else. A store is
 * one connection: use it from one thread at a time.
 */
#ifndef CM_STORE_H
#define CM_STORE_H

#include <sqlite3.h>

#include "../base/buf.h"
#include "../index/chunk.h"
#include "../vector/vector.h"

#define STORE_META_KEY     "memory_index_meta_v1"  /* the fingerprint */
#define STORE_PROBLEMS_KEY "clawmem_sync_problems" /* problems seen by the last sync */

enum {
    STORE_CREATE = 1 << 0, /* create the file and the schema when absent */
    STORE_BULK = 1 << 1,   /* a private file being built: no journal, no fsync */
    /* PostgreSQL: open the tables for an agent that may have no index
     * (agents list|delete); never creates them */
    STORE_ANY_AGENT = 1 << 2,
};

struct store_pg;
struct term_rows;

typedef struct store {
    sqlite3 *db;
    struct store_pg *pg; /* a PostgreSQL index (cm_store_open_pg): db is NULL */
    char *path;
    bool trigram;            /* FTS tokenizer is trigram (else unicode61 with CJK bigrams) */
    bool readonly;           /* opened read-only (no write access to the index or its dir) */
    bool bulk;               /* STORE_BULK: keyword entries wait for cm_store_bulk_keywords */
    sqlite3_stmt *stmts[10]; /* prepared on first use, see store.c */
    buf scratch;             /* keyword text of one chunk */
    int busy_ms;             /* the busy timeout it was opened with */
    fts5_api *fts;           /* SQLite's FTS5, from registering cm_bm25 */
    char *tokenize;          /* the keyword table's tokenize= words (NULL: not plain words) */
    struct term_rows *terms; /* the term counts' tokenizer and a transaction's changes */
} store;

/* SQL for a hit's time (ns) from its chunks row c: a transcript's chunk
 * carries its newest message's time in updated_at (seconds), any other
 * chunk goes by its file's mtime. */
#define STORE_HIT_TIME(c)                                                                          \
    "(CASE WHEN " c ".source = 'sessions' THEN " c ".updated_at * 1000000000 ELSE (SELECT mtime "  \
    "FROM files WHERE files.path = " c ".path) END)"

typedef struct stored_file {
    char *path, *hash;
    int64_t mtime_ns, size;
} stored_file;

typedef struct stored_files {
    stored_file *v; /* sorted by path (BINARY, i.e. strcmp order) */
    size_t n;
} stored_files;

typedef struct fts_hit {
    int64_t id;
    char *path, *source, *text;
    int start_line, end_line;
    double rank;      /* FTS5 bm25: negative, lower is better */
    int64_t mtime_ns; /* of the file */
} fts_hit;

typedef struct fts_hits {
    fts_hit *v;
    size_t n, cap;
} fts_hits;

/* Opens the database at path. Without STORE_CREATE a missing file is
 * CM_ENOTFOUND; an existing index without write access to it or to its
 * directory is opened read-only (s->readonly; searches work, writes fail),
 * and nothing is written to open it. tokenizer ("unicode61"|"trigram"|"porter": unicode61 with
 * English Porter stemming) is used when creating the
 * schema; an existing schema keeps its own. A file that is not a valid index
 * is CM_ECORRUPT. busy_ms bounds waits on another process's transaction. */
cm_rc cm_store_open(store *s, const char *path, const char *tokenizer, unsigned flags, int busy_ms,
                    char *err, size_t errlen);
void cm_store_close(store *s);

/* Opens the index of agent in the PostgreSQL database dsn (a libpq
 * connection string; libpq is loaded on first use). With STORE_CREATE the
 * tables are created when absent; without it an agent that has no index yet
 * is CM_ENOTFOUND. Every store_* function below then works on that agent's
 * rows only; begin/commit nest (only the outermost commits), and a write
 * transaction holds the agent's advisory lock, so processes on many hosts
 * can share the database. trigram is served as unicode61 (s->trigram false). */
cm_rc cm_store_open_pg(store *s, const char *dsn, const char *agent, const char *tokenizer,
                       unsigned flags, int busy_ms, char *err, size_t errlen);
/* Begins a rebuild of a PostgreSQL index: a transaction that deletes the
 * agent's rows (its embedding cache stays) and records tokenizer; nothing of
 * it is visible to other connections until its cm_store_commit. */
cm_rc cm_store_pg_rebuild_begin(store *s, const char *tokenizer, char *err, size_t errlen);
/* Whether the PostgreSQL server of dsn answers (a connection of its own,
 * waiting at most timeout_s seconds for it, and SELECT 1): readiness for a
 * load balancer. The message never holds the DSN's password. */
cm_rc cm_store_pg_ping(const char *dsn, int timeout_s, char *err, size_t errlen);
/* How many statements a PostgreSQL store has sent to its server (each a
 * round trip; a rebuild's batch too); 0 for SQLite. For tests and figures. */
uint64_t cm_store_pg_round_trips(const store *s);
/* Merges of the keyword index's pending list a PostgreSQL rebuild started
 * on its second connection while it copied (for tests; 0 for SQLite). */
uint64_t cm_store_pg_merges_aside(const store *s);
/* Whether a PostgreSQL store's connection is still up (false after the
 * server went away: reopen it). */
bool cm_store_pg_connected(const store *s);
/* Deletes every row of the agent of a PostgreSQL index, cache included. */
cm_rc cm_store_drop_agent(store *s, char *err, size_t errlen);

/* The tables of a PostgreSQL index, in the order of the counts below; the
 * last, clawmem_mcp_sessions, is serve's (store_pg_shared.h), present once a
 * replica has kept sessions there. */
#define STORE_PG_NTABLES 10
extern const char *const cm_store_pg_tables[STORE_PG_NTABLES];
/* cm_store_drop_agent in one transaction under the agent's write lock,
 * rows[i] receiving how many rows of cm_store_pg_tables[i] went. */
cm_rc cm_store_pg_drop_counted(store *s, int64_t rows[STORE_PG_NTABLES], char *err, size_t errlen);
/* One agent's rows in each table of a PostgreSQL index. */
typedef struct store_pg_agent {
    char *id;
    int64_t rows[STORE_PG_NTABLES];
} store_pg_agent;
/* Every agent that has a row in any table (sorted by id); the caller frees
 * with cm_store_pg_agents_release. One statement. */
cm_rc cm_store_pg_agents(store *s, store_pg_agent **out, size_t *n, char *err, size_t errlen);
void cm_store_pg_agents_release(store_pg_agent *v, size_t n);
static inline bool store_is_pg(const store *s)
{
    return s->pg != NULL;
}

/* Maps an SQLite result code to cm_rc with a message naming the index and
 * what was being done (corrupt, or a schema that is not ours → "run clawmem
 * index --force", busy → "locked by another process"); never SQL text. For
 * the store's own files. */
cm_rc cm_store_fail(store *s, int code, const char *what, char *err, size_t errlen);
/* CM_ECORRUPT for a NULL or invalid value read from the index (where: which
 * table), with the --force hint. */
cm_rc cm_store_corrupt(store *s, const char *where, char *err, size_t errlen);
/* Column i as TEXT, or NULL when it holds anything else (NULL, a number...). */
const char *cm_store_col_text(sqlite3_stmt *q, int i);
/* Column i as an INTEGER within [lo, hi]; false when it is not one. */
bool cm_store_col_int(sqlite3_stmt *q, int i, int64_t lo, int64_t hi, int64_t *v);
/* Switches a store opened with STORE_BULK to WAL before it becomes the
 * index, so that no reader has to change the journal mode of a live file. */
cm_rc cm_store_wal(store *s, char *err, size_t errlen);

/* *json receives the meta row under key, or NULL when there is none. */
cm_rc cm_store_meta_get(store *s, const char *key, char **json, char *err, size_t errlen);
/* cm_store_meta_get as of the last data version this connection saw: a
 * PostgreSQL store answers from a copy while no statement of its saw a newer
 * version (a search's checks; never a write's decisions). SQLite reads. */
cm_rc cm_store_meta_get_recent(store *s, const char *key, char **json, char *err, size_t errlen);
cm_rc cm_store_meta_set(store *s, const char *key, const char *json, char *err, size_t errlen);

cm_rc cm_store_begin(store *s, char *err, size_t errlen);
/* Copies committed WAL content into the database file without blocking
 * readers (connections do not checkpoint on close), then, when every frame
 * is in the file and no reader holds an older snapshot, empties the WAL
 * (tried once, never waited for): the next process to open the index then
 * has no frames to read back into its WAL index before its first read.
 * PostgreSQL: merges the keyword index's pending list if this connection
 * inserted chunks since it last did (outside a transaction; best effort). A
 * sync that wrote (files, or only the stat snapshot) calls it when done. */
void cm_store_checkpoint(store *s);
cm_rc cm_store_commit(store *s, char *err, size_t errlen);

/* A STORE_BULK index: cm_store_file_replace writes chunks only (its files
 * row waits in a temporary table in memory), and this writes the files rows
 * in the order they came, then every chunk's keyword entry in one pass, in
 * chunk order, inside the caller's transaction. The files table and the
 * keyword tables then lie in contiguous pages after the chunks (a search
 * reads a few hundred keyword rows: ~50 fewer page faults than when they
 * are spread among the chunks; the no-change check reads every files row:
 * ~30 fewer on 1,296 files) and FTS5 writes its postings in segments of up
 * to 16 MiB.
 * Any other store: nothing to do. */
cm_rc cm_store_bulk_keywords(store *s, char *err, size_t errlen);
void cm_store_rollback(store *s);

cm_rc cm_store_files_load(store *s, stored_files *out, char *err, size_t errlen);
void cm_store_stored_files_release(stored_files *f);
/* Calls fn for every files row (path, mtime, size) in table order, copying
 * nothing (the no-change check); fn returns false to stop early. Reads the
 * stat snapshot when the index has one (files_stat.h; held: one already
 * read, NULL: read it now), else the table. */
typedef bool (*store_file_fn)(void *ctx, const char *path, int64_t mtime_ns, int64_t size);
struct store_snap;
cm_rc cm_store_files_each(store *s, const struct store_snap *held, store_file_fn fn, void *ctx,
                          char *err, size_t errlen);

/* Replaces a file's row and all its chunks (call inside a transaction). */
cm_rc cm_store_file_replace(store *s, const char *path, const char *source, const char *hash,
                            int64_t mtime_ns, int64_t size, const char *problem,
                            const chunk_list *chunks, char *err, size_t errlen);
/* Updates only size and mtime (content hash unchanged). */
cm_rc cm_store_file_touch(store *s, const char *path, int64_t mtime_ns, int64_t size, char *err,
                          size_t errlen);
/* Removes a file's row and chunks (call inside a transaction). */
cm_rc cm_store_file_delete(store *s, const char *path, char *err, size_t errlen);

/* For a trigram index: appends to out the FTS5 expression ("t1" OR "t2" …)
 * of the index's trigrams that start with term[0..len) (one or two
 * characters, lower-cased), at most STORE_TRIGRAM_TERMS of them, the most
 * frequent first; nothing when there are none. Such a term is then found
 * wherever it is followed by another character in a chunk's text. */
#define STORE_TRIGRAM_TERMS 256
cm_rc cm_store_trigram_terms(store *s, const char *term, size_t len, buf *out, char *err,
                             size_t errlen);
/* The number of chunks that hold each of the n index terms in terms (as the
 * index stores them: stems with porter), separated by single spaces, into
 * docs[0..n) (0 for a term the index lacks). SQLite only: with PostgreSQL
 * every count is 0. Through FTS5's fts5vocab table, one lookup a term. */
cm_rc cm_store_term_docs(store *s, const char *terms, size_t n, int64_t *docs, char *err,
                         size_t errlen);
/* Runs an FTS5 MATCH expression; appends up to limit hits, best first. A
 * syntax error in match is CM_EINVAL. weights: NULL or "" (plain), or one
 * weight a phrase of match for cm_bm25 (fts_rank.h; query.h writes them);
 * PostgreSQL ignores them. */
#define QUERY_WEIGHTS_MAX 2048
cm_rc cm_store_fts_search(store *s, const char *match, const char *weights, int limit,
                          fts_hits *out, char *err, size_t errlen);
/* cm_store_fts_search of match (the query's words joined by AND); when that
 * finds fewer than limit hits and or_match (the same words joined by OR,
 * with or_weights) is not NULL, the hits of or_match instead, *used_or then
 * true. PostgreSQL answers both in one statement (one round trip). */
cm_rc cm_store_fts_search_and_or(store *s, const char *match, const char *weights,
                                 const char *or_match, const char *or_weights, int limit,
                                 fts_hits *out, bool *used_or, char *err, size_t errlen);
void cm_fts_hits_release(fts_hits *h);
/* Appends up to limit chunks (rank 0) of the files whose path p has from <=
 * p < to (daily notes: "memory/2026-11-20" to "memory/2026-11-23") and of
 * session transcripts updated in [t0, t1) (unix seconds). Nothing from
 * PostgreSQL. */
cm_rc cm_store_chunks_dated(store *s, const char *from, const char *to, int64_t t0, int64_t t1,
                            int limit, fts_hits *out, char *err, size_t errlen);
/* Reads a hit from columns i-1..i+6 of q (id, path, source, start_line,
 * end_line, text, -, mtime), checking each; CM_ECORRUPT when one is invalid. */
cm_rc cm_store_hit_row(store *s, sqlite3_stmt *q, int i, fts_hit *h, char *err, size_t errlen);

/* Keyword text for the FTS index: the chunk text, with CJK runs expanded to
 * bigrams unless the tokenizer is trigram. */
cm_rc cm_store_keyword_text(const store *s, buf *out, const char *text, size_t n);
/* Copies a hit's path, source and text into h (both stores' rows);
 * CM_ENOMEM leaves h zeroed. */
cm_rc cm_store_hit_strings(fts_hit *h, const char *path, const char *source, const char *text,
                           char *err, size_t errlen);

/* ---- vectors and the embedding cache (vector_tables.c) ---- */

typedef struct pending_chunk {
    int64_t id;
    char hash[SHA256_HEX_LEN + 1];
    char *text;
    char *path; /* of its file (multimodal memory reads a media file's bytes) */
} pending_chunk;

/* Up to limit chunks with an id above after_id that have no vector row yet,
 * by id. (A chunk whose embedding was all zeros gets a row of dims 0.) */
cm_rc cm_store_pending_vectors(store *s, int64_t after_id, size_t limit, pending_chunk **out,
                               size_t *n, char *err, size_t errlen);
void cm_store_pending_release(pending_chunk *p, size_t n);

/* The cached vector of a chunk hash for (provider, model, key): *out
 * (malloc'd, *dims floats) or NULL when there is none. */
cm_rc cm_store_cache_get(store *s, const char *provider, const char *model, const char *key,
                         const char *hash, float **out, int *dims, char *err, size_t errlen);
cm_rc cm_store_cache_put(store *s, const char *provider, const char *model, const char *key,
                         const char *hash, const float *v, int dims, char *err, size_t errlen);
/* Drops the oldest entries beyond max_entries. */
cm_rc cm_store_cache_trim(store *s, int max_entries, char *err, size_t errlen);
/* Copies the embedding cache of the index at old_path (a rebuild keeps it);
 * an unreadable old index is skipped. */
cm_rc cm_store_cache_import(store *s, const char *old_path, char *err, size_t errlen);

cm_rc cm_store_vector_put(store *s, int64_t chunk_id, const float *v, int dims, char *err,
                          size_t errlen);
/* Loads every vector of dims into x (source 0 = memory, 1 = sessions);
 * *seq receives the vector log's position of that snapshot (-1: no log). */
cm_rc cm_store_vectors_load(store *s, int dims, vec_index *x, int64_t *seq, char *err,
                            size_t errlen);
/* Applies to x the vector changes logged after *seq (each changed chunk id
 * looked up: replaced, added or removed) and advances *seq. *reload is set,
 * and x left as it was, when the log cannot say (no log, trimmed past *seq,
 * another file, a PostgreSQL rebuild's gap) or a reload would be cheaper. */
cm_rc cm_store_vectors_update(store *s, int dims, vec_index *x, int64_t *seq, bool *reload,
                              char *err, size_t errlen);
/* Entries the vector log keeps (both stores); a reader further behind reloads. */
#define VECTOR_LOG_KEEP 100000
/* Creates the vector log and its triggers when the index has none (a write;
 * the writer holds the lock). */
cm_rc cm_store_vector_log_ensure(store *s, char *err, size_t errlen);
/* Keeps the log's last entries only (see vector_tables.c). */
cm_rc cm_store_vector_log_trim(store *s, char *err, size_t errlen);
/* One chunk by id (CM_ENOTFOUND when gone). */
cm_rc cm_store_chunk_get(store *s, int64_t id, fts_hit *out, char *err, size_t errlen);
/* The vector log's last position (0 when empty), -1 when there is no log or
 * the index is in PostgreSQL: a snapshot loaded at this position is current. */
int64_t cm_store_vector_log_head(store *s);
/* Changes whenever another connection commits (PRAGMA data_version). */
int64_t cm_store_data_version(store *s);

/* ---- embedding batches waiting at the provider (batches.c) ---- */

typedef struct store_batch {
    char *id, *provider, *model, *key; /* the batch at the provider, and what it embeds with */
    char *state;                       /* the provider's last word ("in_progress"…) */
    int64_t items, created, updated;   /* chunk hashes covered; wall ms */
} store_batch;

/* Creates the batch tables when the index has none (a write). PostgreSQL:
 * part of the schema; CM_EIO when the database predates them and the role
 * could not add them. */
cm_rc cm_store_batches_ensure(store *s, char *err, size_t errlen);
/* The batch lease: only its holder submits and collects the agent's batches.
 * SQLite: always held (the caller holds the index's writer lock). PostgreSQL:
 * a session-level advisory lock of the agent (store_pg_batches.c), waited
 * for up to the busy timeout when wait, else tried once; *held says whether
 * this store holds it now. Kept until cm_store_batches_unlease or the end
 * of the connection's session. */
cm_rc cm_store_batches_lease(store *s, bool wait, bool *held, char *err, size_t errlen);
/* Whether the store still holds the lease (PostgreSQL: one statement asks
 * the server; false once the session that took it is gone). */
bool cm_store_batches_leased(store *s);
void cm_store_batches_unlease(store *s);
/* Every recorded batch, oldest first (none in an index without the tables). */
cm_rc cm_store_batches_list(store *s, store_batch **out, size_t *n, char *err, size_t errlen);
void cm_store_batches_release(store_batch *b, size_t n);
/* Records batch b covering hashes[0..n) (call inside a transaction). */
cm_rc cm_store_batch_add(store *s, const store_batch *b, const char *const *hashes, size_t n,
                         char *err, size_t errlen);
/* The chunk hashes batch id covers (*hashes: n strings, free each and it). */
cm_rc cm_store_batch_hashes(store *s, const char *id, char ***hashes, size_t *n, char *err,
                            size_t errlen);
cm_rc cm_store_batch_state(store *s, const char *id, const char *state, int64_t now, char *err,
                           size_t errlen);
cm_rc cm_store_batch_delete(store *s, const char *id, char *err, size_t errlen);
/* The text of chunk id in *text (malloc'd; NULL when the chunk is gone),
 * through *q: a statement prepared on the first call and kept by the caller
 * for the next ones (sqlite3_finalize it when done; PostgreSQL leaves it
 * NULL). */
cm_rc cm_store_chunk_text(store *s, sqlite3_stmt **q, int64_t id, char **text, char *err,
                          size_t errlen);
/* Copies the batches of the index at old_path (a rebuild keeps them;
 * PostgreSQL: nothing to copy, a rebuild leaves the agent's batch rows). */
cm_rc cm_store_batches_import(store *s, const char *old_path, char *err, size_t errlen);

/* ---- whose index a file is (store_owner.c) ---- */

typedef enum store_owner {
    STORE_OWNER_NONE,    /* no file */
    STORE_OWNER_CLAWMEM, /* an index with clawmem's schema */
    STORE_OWNER_OTHER,   /* an SQLite database whose tables are another program's
                            (QuantumClaw's memory index has the same table names) */
    STORE_OWNER_UNKNOWN, /* cannot tell: empty, not SQLite, unreadable */
} store_owner;

/* Who made the file at path, read without writing anything to it or beside
 * it (no lock, no -wal, no -shm). *quantumclaw (may be NULL) is set when an
 * OTHER file has QuantumClaw's memory-index tables. */
store_owner cm_store_owner(const char *path, bool *quantumclaw);
/* The same for the database open on db (reads sqlite_master only); returns
 * the SQLite code (SQLITE_OK when *out was set). */
int cm_store_schema_owner(sqlite3 *db, store_owner *out, bool *quantumclaw);
/* CM_EDB with the message for an index of another program at path: what it
 * is and the two ways out (a store.path of clawmem's own, or --force). */
cm_rc cm_store_foreign(const char *path, bool quantumclaw, char *err, size_t errlen);

typedef enum store_move {
    STORE_MOVE_NONE, /* nothing moved: path exists, or old_path holds no index of clawmem's */
    STORE_MOVE_DONE, /* clawmem's index (with its -wal and -shm) is now at path */
    STORE_MOVE_STAY, /* clawmem's index is at old_path and could not be moved (err says why) */
} store_move;
/* Moves clawmem's index from old_path to path (a new name in its directory),
 * when path does not exist and old_path holds an index of clawmem's; a file
 * of another program is never moved. Its WAL is checkpointed into the main
 * file, then -wal and -shm move, then the main file (the rename that moves
 * the index, never replacing a file at path). Processes that race serialise
 * on an flock() of the old file: the second finds the index moved. *how says
 * what happened; CM_EIO only with STORE_MOVE_STAY. */
cm_rc cm_store_migrate(const char *old_path, const char *path, store_move *how, char *err,
                       size_t errlen);

/* The store's other parts, declared beside their files. */
#include "files_stat.h"
#include "store_stats.h"
#include "store_swap.h"

#endif
