/*
 * clawmem.h — the public API of libclawmem, QuantumClaw's agent memory in C.
 *
 * One engine per agent: it reads the QuantumClaw config, indexes the agent's
 * Markdown memory (MEMORY.md, memory/YYYY-MM-DD.md, extraPaths) into SQLite and
 * answers the two agent tools, memory_search and memory_get, with the JSON
 * payloads QuantumClaw's builtin memory returns. Handles are opaque; every call
 * returns a cm_rc and, on failure only, fills the caller's message buffer.
 * An engine is not thread-safe: use one per thread, or serialise calls.
 */
#ifndef CLAWMEM_H
#define CLAWMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CM_VERSION "0.1.0"

typedef enum cm_rc {
    CM_OK = 0,
    CM_ENOMEM,    /* out of memory */
    CM_EINVAL,    /* a bad argument or value */
    CM_ECONFIG,   /* the config file is malformed or has a bad value */
    CM_EIO,       /* a file could not be read or written */
    CM_EDB,       /* SQLite failed */
    CM_EBUSY,     /* the index is locked by another process */
    CM_ECORRUPT,  /* the index file is damaged: `clawmem index --force` rebuilds it */
    CM_EPATH,     /* a memory_get path is outside the memory files */
    CM_ETOOBIG,   /* an input exceeds a documented size cap */
    CM_ENOTFOUND, /* a file or directory does not exist */
    CM_ECANCELED, /* the caller asked to stop (a progress callback returned nonzero) */
    /* A model or embedding call that failed for good (every profile and
     * fallback tried), by the class of its last failure: */
    CM_EAUTH,       /* credentials refused or expired */
    CM_ERATELIMIT,  /* rate-limited or overloaded */
    CM_ETIMEOUT,    /* no answer in time */
    CM_EBILLING,    /* out of credit or billing disabled */
    CM_EUNAVAILABLE /* the search cannot run (memory_search's "disabled"): the error says why */
} cm_rc;

/* A static, human-readable name for rc. Never NULL. */
const char *cm_strerror(cm_rc rc);

/* Optional, for a program: call once at its start, before it starts a
 * thread or uses SQLite in any other way. Sets SQLite's process-wide options
 * for a short-lived process: no page-cache preallocation, no memory
 * statistics (so sqlite3_memory_used() stays 0 and a soft heap limit is not
 * enforced). A program that uses SQLite itself may leave it out; called
 * after SQLite has started it changes nothing, though SQLite reports the
 * call as a misuse to a SQLITE_CONFIG_LOG callback. */
void cm_process_init(void);

/* The size of a message buffer (char err[CM_ERR_SIZE]) that holds every
 * message clawmem writes; a smaller one gets the message cut at a UTF-8
 * boundary. A message is written only when the call fails, and it is the
 * innermost one: the layer that saw the failure says what failed, and a
 * caller above it passes the message up rather than writing its own. */
#define CM_ERR_SIZE 1024

typedef enum cm_log_level { CM_LOG_DEBUG, CM_LOG_INFO, CM_LOG_WARN, CM_LOG_ERROR } cm_log_level;

/* Receives the engine's diagnostics (config warnings, skipped files). Called on
 * the thread that made the call; msg is valid only during the call. */
typedef void (*cm_log_fn)(void *ctx, cm_log_level level, const char *msg);

typedef struct cm_options {
    const char *agent_id;    /* NULL: "main" */
    const char *workspace;   /* NULL: agents.defaults.workspace or <stateDir>/workspace */
    const char *config_path; /* NULL: $QUANTUMCLAW_CONFIG_PATH or <stateDir>/quantumclaw.json */
    const char *state_dir;   /* NULL: $QUANTUMCLAW_STATE_DIR or ~/.quantumclaw */
    cm_log_fn log;           /* NULL: diagnostics are dropped */
    void *log_ctx;
    int allow_write; /* enable memory_write (also: config clawmem.memoryWrite) */
} cm_options;

typedef struct cm_engine cm_engine;

/* Loads the config and opens (creating when absent) the agent's index. The
 * index is not synced: call cm_engine_sync. On failure *out is NULL and err
 * holds one line naming the cause (for config errors: file:line:column and the
 * key path). */
cm_rc cm_engine_open(const cm_options *opt, cm_engine **out, char *err, size_t errlen);

/* Closes the index and frees the engine. NULL is a no-op. */
void cm_engine_close(cm_engine *e);

/* cm_engine_open for an engine that serves concurrent callers (every thread
 * of a gateway): each call (sync, search, get, write, status, drop) leases a
 * view from the engine's pool (its own SQLite connection and embedding
 * client, the config borrowed) and returns it after; the loaded vectors are
 * one read-only snapshot shared by the views, replaced copy-on-write when the
 * index changes. A view is made only when every other is busy, so their
 * number is the peak of concurrent calls. cm_engine_watch and
 * cm_engine_memory stay one-caller calls. */
cm_rc cm_engine_open_shared(const cm_options *opt, cm_engine **out, char *err, size_t errlen);

typedef struct cm_progress {
    size_t files_done, files_total;
    uint64_t bytes_done, bytes_total;
    /* While a local model is being downloaded before the sync: its name, and
     * bytes so far and in all (0: not known yet); NULL otherwise. */
    const char *download;
    uint64_t download_done, download_total;
    /* While a sync waits for embedding batches (remote.batch): the state of
     * the oldest pending one ("validating", "in_progress"…), the batches
     * pending and the chunks they cover; NULL otherwise. */
    const char *batch_state;
    size_t batches_pending, batch_chunks;
} cm_progress;

/* Called after each file of a sync, and a few times a second while a sync
 * downloads a local model. Return 0 to go on, nonzero to stop the sync early
 * (it then returns CM_ECANCELED; what was committed stays, a cancelled
 * rebuild leaves the old index in place, a cancelled download resumes next
 * time). */
typedef int (*cm_progress_fn)(void *ctx, const cm_progress *p);

enum {
    CM_SYNC_FORCE = 1 << 0,  /* rebuild the whole index into a new file */
    CM_SYNC_NOWAIT = 1 << 1, /* if another process is writing, return CM_EBUSY at once */
    /* a search's check: nothing at all (not even a stat) when a live watcher
     * (`clawmem watch`, `clawmem mcp`) reports the index fresh; stats stay 0 */
    CM_SYNC_UNLESS_WATCHED = 1 << 2,
};

typedef struct cm_sync_stats {
    size_t files_seen, files_indexed, files_unchanged, files_removed, files_skipped;
    size_t chunks_written;
    size_t chunks_embedded, cache_hits; /* vectors from the provider, from the cache */
    uint64_t bytes_read;
    int rebuilt; /* 1 when the index was rebuilt from scratch */
    /* remote.batch: batches submitted, collected, failed (their items then
     * embedded synchronously), still pending at the provider when the sync
     * returned, and the bytes uploaded for them */
    size_t batches_submitted, batches_completed, batches_failed, batches_pending;
    uint64_t batch_bytes_sent;
} cm_sync_stats;

/* Brings the index up to date with the memory files: unchanged files (same size
 * and mtime) cost one stat; changed files are re-chunked, each in its own
 * transaction; a config fingerprint change or CM_SYNC_FORCE rebuilds into a
 * temporary file that replaces the index atomically. stats and progress may be
 * NULL. Waits for another writer up to the busy timeout, then CM_EBUSY. With
 * CM_SYNC_NOWAIT, when nothing changed the check is read-only: no lock, no
 * write transaction. */
cm_rc cm_engine_sync(cm_engine *e, unsigned flags, cm_progress_fn progress, void *progress_ctx,
                     cm_sync_stats *stats, char *err, size_t errlen);

/* Removes the agent's index, waiting for the writer lock like a sync: its
 * rows in a PostgreSQL index (every table), else the SQLite file with its
 * -wal and -shm; with memory.backend "qmd" also QMD's own index (its
 * collections stay registered). The memory files are untouched; the next
 * sync rebuilds the index. CM_EBUSY while a live watcher keeps the index.
 * *dropped is 1 when there was an index (may be NULL). */
cm_rc cm_engine_drop_index(cm_engine *e, int *dropped, char *err, size_t errlen);

typedef struct cm_search_opts {
    int max_results;  /* <= 0: memorySearch.query.maxResults */
    double min_score; /* < 0 or NaN: memorySearch.query.minScore */
    int64_t now;      /* unix seconds for temporal decay; 0: the current time */
} cm_search_opts;

/* memory_search: *json receives the tool payload
 *   {"results":[{"id","path","startLine","endLine","score","textScore"?,"snippet","source",
 *                "citation"?}],
 *    "provider","model","fallback"?,"citations","mode"}
 * ("fallback": why a fallback provider serves; "mode": "hybrid" with an
 * embedding provider, "fts-only" without; "id": the chunk's id as QuantumClaw
 * computes it, 64 hex digits; "textScore": the keyword side's score, on hits
 * the keyword side found) (free with cm_free). File names that are not valid
 * UTF-8 are shown with U+FFFD. A search never fails hard: a broken index
 * yields {"results":[],"disabled":true,"error":...} and CM_OK. A query that
 * is NULL, empty or only white space is a bad argument: CM_EINVAL, err
 * saying so (every caller, CLI and MCP included, relies on this one check).
 * opts may be NULL. */
cm_rc cm_memory_search(cm_engine *e, const char *query, const cm_search_opts *opts, char **json,
                       char *err, size_t errlen);

/* cm_memory_search for a caller whose session key is known (e.g.
 * "agent:main:telegram:group:42"; NULL: not known, as cm_memory_search).
 * With memory.citations "auto", results carry citations only in direct
 * chats: a key "agent:<id>:<rest>" whose rest has a "channel" or "group"
 * part gets none (QuantumClaw 2026.3.22's rule; the "citations" field still
 * says "auto"); any other key, or none, counts as direct. With
 * memory.backend "qmd" the key also decides memory.qmd.scope (default:
 * direct chats only; no key has no chat type and is denied by that default):
 * a denied search returns no results. The payload of a search that QMD
 * failed and the builtin index answered carries "fallback": "qmd: <why>" and
 * "backend": "builtin". */
cm_rc cm_memory_search_session(cm_engine *e, const char *query, const cm_search_opts *opts,
                               const char *session_key, char **json, char *err, size_t errlen);

/* One result of cm_memory_search_each: the payload's fields but "id" and
 * "textScore" (the snippet cut and cited as there; citation "" when the
 * results carry none). The strings are the index's bytes: a file name that
 * is not valid UTF-8 comes as it is (the payload shows U+FFFD for such
 * bytes), so it can be passed back to cm_memory_get. Valid during the
 * callback only. */
typedef struct cm_search_result {
    const char *path, *snippet, *source, *citation;
    int start_line, end_line;
    double score;
} cm_search_result;
typedef int (*cm_search_result_fn)(void *ctx, const cm_search_result *r);

/* cm_memory_search_session without the JSON: fn(ctx, r) on each result in
 * rank order (a nonzero return stops, CM_ECANCELED). A search that cannot
 * run returns CM_EUNAVAILABLE and err says why (the payload's "disabled"
 * and "error"). For a caller that shows the results itself (the CLI's text
 * output): no payload is written nor read back, and no ids computed. */
cm_rc cm_memory_search_each(cm_engine *e, const char *query, const cm_search_opts *opts,
                            const char *session_key, cm_search_result_fn fn, void *ctx, char *err,
                            size_t errlen);

/* memory_get: *json receives {"path","text"} for lines [from, from+lines) of a
 * memory file (from is 1-based; 0 means 1; lines 0 means to the end). A missing
 * file gives empty text. A path outside the memory files, not ending in .md or
 * escaping the workspace fails with CM_EPATH and a message naming the rule. */
cm_rc cm_memory_get(cm_engine *e, const char *path, long from, long lines, char **json, char *err,
                    size_t errlen);

/* memory_get continuing inside a line: as cm_memory_get, starting offset
 * bytes into line from. A reply cut inside a line longer than the 1 MiB cap
 * carries "nextFrom" and "nextOffset"; pass them back as from and offset. */
cm_rc cm_memory_get_at(cm_engine *e, const char *path, long from, long offset, long lines,
                       char **json, char *err, size_t errlen);

/* memory_write: appends text as a new paragraph to a memory file — path
 * NULL means today's memory/YYYY-MM-DD.md (local date of now, 0 = the current
 * time); "MEMORY.md" the long-term file. The same path rules as memory_get.
 * The file is rewritten through a temporary file, fsync'd and renamed into
 * place under an exclusive lock, so readers see the old or the new file and
 * concurrent writers never lose each other's notes. *json receives
 * {"path","startLine","endLine","bytes"}. CM_EINVAL when writing is not
 * enabled (cm_options.allow_write or config clawmem.memoryWrite), for empty
 * or non-UTF-8 text, or text over 64 KiB. */
cm_rc cm_memory_write(cm_engine *e, const char *path, const char *text, int64_t now, char **json,
                      char *err, size_t errlen);

/* Nonzero when memory_write is enabled for this engine. */
int cm_engine_writable(const cm_engine *e);

/* An estimate of the heap the engine holds, in bytes: the vectors it loaded,
 * its SQLite connection's page cache and statements, and a fixed share for
 * the engine itself (its config, provider and connection). For an LRU of
 * engines bounded by memory (`clawmem serve --max-engine-mb`). Not thread
 * safe against a call running on the same engine. */
size_t cm_engine_memory(const cm_engine *e);

typedef struct cm_watch_opts {
    volatile int *stop; /* set nonzero to return: from a signal handler, or from another
                           thread with an atomic store (__atomic_store_n); read atomically */
    int wake_fd;        /* a descriptor whose readability means "look at stop now", or -1:
                           then stop is looked at every 250 ms (and on signals) */
    int debounce_ms;    /* < 0: sync.watchDebounceMs (1500) */
    /* After each sync: its result (err is "" on success). May be NULL. */
    void (*on_sync)(void *ctx, cm_rc rc, const cm_sync_stats *st, const char *err);
    void *ctx;
    int session_debounce_ms; /* session transcripts' changes (session memory search):
                                <= 0: 5000, as QuantumClaw 2026.3.22 waits for them */
} cm_watch_opts;

/* Keeps the index fresh until *stop: syncs now, then after changes to the
 * memory files (inotify on one descriptor, debounced), after lost events, on
 * sync.intervalMinutes, and every 10 s when the kernel's watch limit was
 * reached. Never rebuilds unless the fingerprint changed. A sync that fails
 * (another writer, an unreadable file) is reported through on_sync and
 * retried on the next change. Blocks; returns CM_OK when stopped. */
cm_rc cm_engine_watch(cm_engine *e, const cm_watch_opts *opts, char *err, size_t errlen);

/* status as JSON (workspace, index path, files, chunks, provider, problems).
 * deep also checks the index's integrity and counts files that need a sync. */
cm_rc cm_engine_status(cm_engine *e, int deep, char **json, char *err, size_t errlen);

/* The memory tools as they are described to a model (the MCP server's
 * tools/list, the agent's model calls): memory_search, memory_get and
 * memory_write, in that order; static strings; JSON Schemas as text. */
typedef struct cm_tool_def {
    const char *name, *title, *description, *input_schema, *output_schema;
    int read_only; /* 0: memory_write, offered only when writing is enabled */
} cm_tool_def;
const cm_tool_def *cm_tool_defs(size_t *n);

/* Frees a string returned by this library. */
void cm_free(void *p);

#ifdef __cplusplus
}
#endif

/* The other areas, each with its own header. */
#include "clawmem/agent.h"
#include "clawmem/gateway.h"
#include "clawmem/session.h"
#include "clawmem/agents.h"

#endif
