/*
 * sessions.h — sessions.json as QuantumClaw 2026.3.22 keeps it:
 * `<stateDir>/agents/<agentId>/sessions/sessions.json`, an object from
 * lower-cased session key to entry ({sessionId, updatedAt, sessionFile,
 * token counts, compactionCount, the memory-flush bookkeeping, …}), written
 * as JSON with two-space indent. Fields clawmem does not know are kept.
 *
 * Every change is a locked read-modify-write through base/lockfile (shared
 * with QuantumClaw's own `sessions.json.lock`) and an atomic replace, so any
 * number of processes updating different sessions lose nothing. Transcripts
 * are archived on reset (`<file>.reset.<ISO time with "-" for ":">`) and on
 * delete (`.deleted.`), as QuantumClaw names them. Time is passed in.
 */
#ifndef CM_SESSION_STORE_H
#define CM_SESSION_STORE_H

#include <jansson.h>

#include "../base/buf.h"

typedef struct session_store {
    char *path; /* sessions.json */
    char *dir;  /* its directory: the transcripts' */
    json_t *doc;
} session_store;

/* Appends <stateDir>/agents/<agentId>/sessions/sessions.json. */
cm_rc cm_session_store_path(buf *out, const char *state_dir, const char *agent_id);

/* Reads the store at path (a missing file is an empty store; CM_ECORRUPT
 * names file:line:column when it is not a JSON object). */
cm_rc cm_session_store_read(session_store *s, const char *path, char *err, size_t errlen);
void cm_session_store_release(session_store *s);

/* The entry of key (looked up lower-cased), borrowed until the next update
 * of s (every update replaces s->doc with the file's fresh content); NULL
 * when none. */
json_t *cm_session_store_get(const session_store *s, const char *key);

/* fn changes the store object in place and sets *changed. */
typedef cm_rc (*session_update_fn)(json_t *store, const char *dir, void *ctx, int64_t now_ms,
                                   bool *changed, char *err, size_t errlen);
/* Locks, re-reads, applies fn, writes when changed, unlocks; s (may not be
 * NULL) holds the fresh store afterwards. */
cm_rc cm_session_store_update(session_store *s, int64_t now_ms, session_update_fn fn, void *ctx,
                              char *err, size_t errlen);

/* The entry of key, made when missing (a new sessionId, its sessionFile,
 * compactionCount 0, chatType from the key), with patch's members merged in
 * (borrowed, may be NULL; a null member removes that field; updatedAt never
 * goes back). The session id goes to
 * id_out. */
cm_rc cm_session_touch(session_store *s, const char *key, const json_t *patch, int64_t now_ms,
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

/* "<ISO time with '-' for ':'>", QuantumClaw's archive suffix, into out[32]. */
void cm_session_archive_stamp(int64_t ms, char out[32]);

#endif
