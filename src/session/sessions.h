/*
 * sessions.h — sessions.json as QuantumClaw 2026.3.22 keeps it:
 * `<stateDir>/agents/<agentId>/sessions/sessions.json`, an object from
 * lower-cased session key to entry ({sessionId, updatedAt, sessionFile,
 * token counts, compactionCount, the memory-flush bookkeeping, …}), written
 * as JSON with two-space indent. Fields clawmem does not know are kept.
 *
 * The file is parsed once per process and kept in memory (store_index.h):
 * reading an entry costs the same with 10 or 100,000 entries, and the file
 * is re-read only when another process replaced it. Every change is written
 * through base/lockfile (shared with QuantumClaw's own `sessions.json.lock`)
 * and an atomic replace, so any number of processes updating different
 * sessions lose nothing; with cm_session_store_configure's flush_ms a turn's
 * bookkeeping is journalled, then written by a writer thread, coalesced with
 * other turns'. session.maintenance runs on every write. Transcripts are
 * archived on reset (`<file>.reset.<ISO time with "-" for ":">`) and on
 * delete (`.deleted.`), as QuantumClaw names them. Time is passed in.
 */
#ifndef CM_SESSION_STORE_H
#define CM_SESSION_STORE_H

#include <jansson.h>

#include "../base/buf.h"
#include "../base/log.h"
#include "../config/config.h"

struct store_ix;

/* A handle on the store: the entries looked at through it are kept (shared,
 * read-only) until the next update through it. */
typedef struct session_store {
    char *path; /* sessions.json */
    char *dir;  /* its directory: the transcripts' */
    json_t *doc;  /* the entries looked at (lower-cased key -> entry) */
    json_t *old;  /* entries looked at before an update (still borrowed by callers) */
    struct store_ix *ix;
} session_store;

/* How this process writes the store at a path (every handle on it). */
typedef struct session_store_config {
    cm_session_maint maint; /* session.maintenance (cm_session_maint_defaults) */
    /* 0: every change is written before the call returns. > 0: a turn's
     * bookkeeping (cm_session_note, a new entry included) is journalled
     * (fdatasynced beside the store) before the call returns and written to
     * sessions.json later, many turns' changes in one write; a crash loses
     * none of them (the journal is replayed by the next process to open the
     * store). Every other change (cm_session_touch, resets, deletions,
     * compactions) is written at once. */
    int64_t flush_ms;
    cm_logger log; /* maintenance warnings (fn NULL: none) */
} session_store_config;

/* The default flush_ms of a long-running process (the agent API, the gateway). */
#define CM_SESSION_FLUSH_MS 500

/* Applies c to the store at path (until changed again). */
cm_rc cm_session_store_configure(const char *path, const session_store_config *c, char *err,
                                 size_t errlen);

/* Writes the store's (path; NULL: every store's) unwritten changes now. */
cm_rc cm_session_store_sync(const char *path, char *err, size_t errlen);

/* Appends <stateDir>/agents/<agentId>/sessions/sessions.json. */
cm_rc cm_session_store_path(buf *out, const char *state_dir, const char *agent_id);

/* Opens the store at path (a missing file is an empty store; CM_ECORRUPT
 * names file:line:column when it is not a JSON object): parsed only when
 * this process has not seen the file's current version yet. */
cm_rc cm_session_store_read(session_store *s, const char *path, char *err, size_t errlen);
void cm_session_store_release(session_store *s);

/* The entry of key (looked up lower-cased; read-only), borrowed until s is
 * released; an update through s makes later calls see the new entry. NULL
 * when none. */
json_t *cm_session_store_get(const session_store *s, const char *key);

/* Every entry (a new object; the entries are shared and read-only). */
json_t *cm_session_store_snapshot(const session_store *s);

/* The entry of key, made when missing (a new sessionId, its sessionFile,
 * compactionCount 0, chatType from the key), with patch's members merged in
 * (borrowed, may be NULL; a null member removes that field; updatedAt never
 * goes back). The session id goes to
 * id_out. */
cm_rc cm_session_touch(session_store *s, const char *key, const json_t *patch, int64_t now_ms,
                       char id_out[160], char *err, size_t errlen);

/* cm_session_touch for a turn's bookkeeping (updatedAt, token counts,
 * model, flags, the memory-flush fields): with the store's flush_ms > 0 the
 * change (a new entry too) is journalled at once and written to the store
 * by the writer thread later (visible to this process at once). */
cm_rc cm_session_note(session_store *s, const char *key, const json_t *patch, int64_t now_ms,
                      char id_out[160], char *err, size_t errlen);

/* /new and /reset: the transcript is archived, the entry gets a new
 * sessionId and transcript, its counters, token counts, flush bookkeeping
 * and auth-profile pin are cleared; its settings stay. */
cm_rc cm_session_reset(session_store *s, const char *key, int64_t now_ms, char id_out[160],
                       char *err, size_t errlen);

/* Removes the entry and archives its transcript (`.deleted.`). CM_ENOTFOUND
 * when there is no such session. */
cm_rc cm_session_delete(session_store *s, const char *key, int64_t now_ms, char *err,
                        size_t errlen);

/* A compaction completed: compactionCount + 1, updatedAt = now; with
 * tokens_after > 0 totalTokens = tokens_after (fresh) and the input, output
 * and cache counts cleared; an automatic auth-profile pin is dropped. */
cm_rc cm_session_compacted(session_store *s, const char *key, int64_t tokens_after, int64_t now_ms,
                           char *err, size_t errlen);

/* The transcript path of an entry: its sessionFile when that resolves inside
 * the store's directory, else <dir>/<sessionId>.jsonl. */
cm_rc cm_session_transcript_of(const session_store *s, const json_t *entry, buf *out);
/* The same for a store whose directory is dir. */
cm_rc cm_session_transcript_in(const char *dir, const json_t *entry, buf *out);

/* "<ISO time with '-' for ':'>", QuantumClaw's archive suffix, into out[32]. */
void cm_session_archive_stamp(int64_t ms, char out[32]);

#endif
