/*
 * transcript.h — session transcripts as QuantumClaw 2026.3.22 (through
 * pi-coding-agent 0.61.1) writes them: `<sessionsDir>/<sessionId>.jsonl`,
 * one compact JSON object per line; the first line is the header
 * {"type":"session","version":3,"id","timestamp","cwd"}, every other record
 * is {"type","id","parentId","timestamp",…} with an 8-hex-digit id and the
 * previous record's id as parentId (a chain; null for the first).
 *
 * Appends go through base/lockfile (flock on the file, then QuantumClaw's
 * `<file>.lock`, stale after 30 minutes as its session write lock) and write
 * whole lines (a turn's records together) with one write() and an fsync.
 * A crash can leave at most a torn last line: readers skip it, and the next
 * append cuts it off first.
 * The file is created mode 0600.
 */
#ifndef CM_TRANSCRIPT_H
#define CM_TRANSCRIPT_H

#include <jansson.h>

#include "../base/buf.h"

#define TRANSCRIPT_VERSION 3

/* A session id QuantumClaw accepts: /^[a-z0-9][a-z0-9._-]{0,127}$/i. */
bool cm_transcript_id_valid(const char *session_id);

/* Appends <sessions_dir>/<session_id>.jsonl, or
 * <session_id>-topic-<percent-encoded topic>.jsonl for a thread/topic. */
cm_rc cm_transcript_path(buf *out, const char *sessions_dir, const char *session_id,
                         const char *topic_id);

/* A new random UUID (v4) as text, into out[37]. */
void cm_transcript_uuid(char out[37]);

/* ISO 8601 UTC with milliseconds ("2026-11-30T12:00:00.000Z") of ms since
 * the epoch, into out[32]. */
void cm_transcript_iso(int64_t ms, char out[32]);

/* Appends one record to the transcript at path: the header first when the
 * file is new or empty (session_id, cwd), a torn last line cut off, then
 * {"type":type,"id","parentId","timestamp"} followed by the members of
 * fields (borrowed; may be NULL). id_out (may be NULL) receives the new
 * record's id. */
cm_rc cm_transcript_append(const char *path, const char *session_id, const char *cwd,
                           const char *type, const json_t *fields, int64_t now_ms, char id_out[40],
                           char *err, size_t errlen);

/* One record for cm_transcript_append_all: its type and its fields
 * (borrowed; may be NULL). */
typedef struct transcript_entry {
    const char *type;
    const json_t *fields;
} transcript_entry;

/* Appends e[0..n) as cm_transcript_append does one, each record's parent
 * the one before it, all under one taking of the lock, with one write and
 * one fdatasync (a crash keeps a prefix of them, at most the last torn).
 * QuantumClaw holds its session write lock for a whole run and appends
 * without one per record; this holds it for the turn's records. id_out
 * (may be NULL) receives the last record's id. n == 0 writes nothing. */
cm_rc cm_transcript_append_all(const char *path, const char *session_id, const char *cwd,
                               const transcript_entry *e, size_t n, int64_t now_ms,
                               char id_out[40], char *err, size_t errlen);

/* Calls fn for every record that parses (1-based JSONL line numbers; the
 * header is line 1), skipping blank, torn and invalid lines. fn returns
 * false to stop. A missing file is CM_ENOTFOUND. max caps the file size. */
typedef bool (*transcript_record_fn)(void *ctx, int line, json_t *record);
cm_rc cm_transcript_read(const char *path, size_t max, transcript_record_fn fn, void *ctx,
                         char *err, size_t errlen);

/* cm_transcript_read from byte offset `from` (a line start; line numbers
 * count from there), reading block by block: fn's records are parsed one
 * line at a time, and stopping early reads no further. max caps the bytes
 * from `from` to the end (CM_ETOOBIG). */
cm_rc cm_transcript_read_from(const char *path, int64_t from, size_t max,
                              transcript_record_fn fn, void *ctx, char *err, size_t errlen);

/* Where the model's context starts, found by reading back from the end and
 * parsing only candidate lines: the offset of the line of the last
 * `compaction` record's firstKeptEntryId record (which is before it), else
 * of that compaction record itself; 0 when there is no compaction. Reading
 * from there gives the same context as reading the whole file. */
cm_rc cm_transcript_context_offset(const char *path, int64_t *offset, char *err, size_t errlen);

/* The model of a run, for cm_transcript_note_model (strings borrowed). */
typedef struct transcript_model {
    const char *provider, *model_id;
    const char *api;            /* "openai-completions", "anthropic-messages", … */
    const char *thinking_level; /* "off", "low", … */
} transcript_model;

/* The records QuantumClaw 2026.3.22 (through pi-coding-agent) writes about
 * a run's model before the run's messages, appended when due:
 * - at a session's start (no message and no model_change record yet):
 *   model_change {provider, modelId} and thinking_level_change
 *   {thinkingLevel};
 * - in a session with messages but no thinking_level_change, or whose
 *   last one names another level (a /think since): one;
 * - a custom "model-snapshot" {timestamp, provider, modelApi, modelId} when
 *   there is none yet or the last one names another provider, api or model.
 * Looked for in the transcript's head (its first 32 records) and in recent
 * (the records from the context's start, cm_transcript_context_offset, in
 * order; NULL: read here), so a turn's cost does not grow with the file.
 * A file that does not exist yet is a session's start. */
cm_rc cm_transcript_note_model(const char *path, const char *session_id, const char *cwd,
                               const transcript_model *m, const json_t *recent, int64_t now_ms,
                               char *err, size_t errlen);

/* A turn's records in one append (cm_transcript_append_all): the model
 * records cm_transcript_note_model would write for m (none when m is NULL:
 * no model was reached), then one "message" record per element of msgs
 * (the AgentMessages, borrowed; may be NULL). recent_whole: recent holds
 * every record of the file, read from its start, so its head is not read
 * again (recent is then the head; a file that does not exist yet is read
 * as an empty recent). */
cm_rc cm_transcript_note_turn(const char *path, const char *session_id, const char *cwd,
                              const transcript_model *m, const json_t *recent, bool recent_whole,
                              const json_t *msgs, int64_t now_ms, char *err, size_t errlen);

/* Message bodies as pi-coding-agent writes them (new objects). */
json_t *cm_transcript_user_message(const char *text, int64_t now_ms);
json_t *cm_transcript_assistant_message(const char *text, const char *api, const char *provider,
                                        const char *model, const char *stop_reason, int64_t now_ms);
json_t *cm_transcript_tool_result(const char *call_id, const char *tool_name, const char *text,
                                  bool is_error, int64_t now_ms);

#endif
