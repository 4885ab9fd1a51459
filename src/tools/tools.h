/*
 * tools.h — the agent-facing payloads of memory_search and memory_get, exactly
 * as QuantumClaw's builtin memory shapes them, and those of memory_get and
 * memory_write (whose path rules and file access are index/memfile.h's).
 */
#ifndef CM_TOOLS_H
#define CM_TOOLS_H

#include "../base/buf.h"
#include "../config/config.h"
#include "../search/rank.h"
#include "../index/memfile.h"

/* Snippets are cut to this many characters (code points), then the citation
 * footer is appended. */
#define TOOLS_SNIPPET_CHARS 700
/* memory_get returns at most this many bytes of text, cut at a line end. */
#define TOOLS_GET_MAX_BYTES MEMFILE_READ_MAX_BYTES

/* What every memory_search payload carries besides the results. */
typedef struct tools_head {
    const char *provider, *model;
    const char *fallback; /* why a fallback provider serves, or NULL */
    cm_citations citations;
    const char *session_key; /* the caller's session, or NULL: decides "auto" citations */
    const char *mode;        /* the payload's "mode" (NULL: cm_tools_search_mode's) */
} tools_head;

/* The chat type QuantumClaw 2026.3.22's memory_search derives from a session
 * key for its citation rule: "agent:<id>:<rest>" (trimmed, lower-cased, empty
 * ':' parts dropped, at least three parts) whose rest has a "channel" part →
 * channel, else a "group" part → group; anything else (no key, another
 * shape) → direct. */
typedef enum tools_chat { TOOLS_CHAT_DIRECT, TOOLS_CHAT_GROUP, TOOLS_CHAT_CHANNEL } tools_chat;
tools_chat cm_tools_chat_type(const char *session_key);

/* Whether results carry citations: "on" always, "off" never, "auto" only
 * in direct chats (and when the session is not known). */
bool cm_tools_cite(cm_citations c, const char *session_key);

/* The payload's top-level "mode", as 2026.3.22 reports it: "fts-only" when
 * no embedding provider serves, else "hybrid" (also when hybrid merging is
 * off or a query falls back to keywords). */
const char *cm_tools_search_mode(const char *provider);

/* {"results":[...],"provider","model","fallback"?,"citations","mode"} for
 * hits v[0..n). Each result: {"id","path","startLine","endLine","score",
 * "textScore"?,"snippet","source","citation"?}; "id" is 2026.3.22's chunk id,
 * sha256 hex of "<source>:<path>:<startLine>:<endLine>:<sha256 of the chunk
 * text>:<model or fts-only>"; "textScore" (the keyword side's 0..1 score,
 * before weighting and decay) is on every hit the keyword side found. */
cm_rc cm_tools_search_payload(const search_hit *v, size_t n, const tools_head *h, buf *out);

/* The same results, each to fn (cm_memory_search_each): snippet and
 * citation as in the payload (citation "" unless cite), no id. A nonzero
 * return from fn stops with CM_ECANCELED. */
cm_rc cm_tools_search_each(const search_hit *v, size_t n, bool cite, cm_search_result_fn fn,
                           void *ctx);

/* {"results":[],"disabled":true,"error":msg,...}: a search that could not run. */
cm_rc cm_tools_search_error(const char *msg, const tools_head *h, buf *out);

/* memory_get: appends {"path","text"} for the memory file path (path[0..len)
 * may hold any bytes): cm_index_memfile_read's rules and text, with
 * "truncated":true,"nextFrom":N and "nextOffset":K when it was cut. */
cm_rc cm_tools_get(const cm_config *cfg, const char *path, size_t len, long from, long offset,
                   long lines, buf *out, char *err, size_t errlen);

/* memory_get of a file beneath a directory other than the memory files (a
 * QMD collection's root): cm_index_memfile_read_beneath, shaped as cm_tools_get. */
cm_rc cm_tools_get_beneath(const char *root, const char *inner, const char *name, long from,
                           long offset, long lines, buf *out, char *err, size_t errlen);

/* The payload of memory_get for the text t. */
cm_rc cm_tools_get_payload(const memfile_text *t, buf *out);

/* memory_write notes are at most this many bytes. */
#define TOOLS_WRITE_MAX_BYTES MEMFILE_WRITE_MAX_BYTES

/* memory_write: cm_index_memfile_write (its rules, paths and atomicity), then appends
 * {"path","startLine","endLine","bytes"} to out and the file's
 * workspace-relative name to rel_out (may be NULL). */
cm_rc cm_tools_write(const cm_config *cfg, const char *path, const char *text, int64_t now,
                     buf *out, buf *rel_out, char *err, size_t errlen);

/* The payload of memory_write for the note n. */
cm_rc cm_tools_write_payload(const memfile_note *n, buf *out);

/* The citation "path#L12" or "path#L12-L30". */
cm_rc cm_tools_citation(buf *out, const char *path, int start_line, int end_line);

#endif
