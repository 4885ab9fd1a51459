/*
 * tools.h — the agent-facing payloads of memory_search and memory_get, exactly
 * as QuantumClaw's builtin memory shapes them, and memory_get's path rules.
 */
#ifndef CM_TOOLS_H
#define CM_TOOLS_H

#include "../base/buf.h"
#include "../config/config.h"
#include "../search/rank.h"

/* Snippets are cut to this many characters (code points), then the citation
 * footer is appended. */
#define TOOLS_SNIPPET_CHARS 700
/* memory_get returns at most this many bytes of text, cut at a line end. */
#define TOOLS_GET_MAX_BYTES (1u << 20)

/* What every memory_search payload carries besides the results. */
typedef struct tools_head {
    const char *provider, *model;
    const char *fallback; /* why a fallback provider serves, or NULL */
    cm_citations citations;
    const char *session_key; /* the caller's session, or NULL: decides "auto" citations */
} tools_head;

/* The chat type QuantumClaw 2026.3.22's memory_search derives from a session
 * key for its citation rule: "agent:<id>:<rest>" (trimmed, lower-cased, empty
 * ':' parts dropped, at least three parts) whose rest has a "channel" part →
 * channel, else a "group" part → group; anything else (no key, another
 * shape) → direct. */
typedef enum tools_chat { TOOLS_CHAT_DIRECT, TOOLS_CHAT_GROUP, TOOLS_CHAT_CHANNEL } tools_chat;
tools_chat tools_chat_type(const char *session_key);

/* Whether results carry citations: "on" always, "off" never, "auto" only
 * in direct chats (and when the session is not known). */
bool tools_cite(cm_citations c, const char *session_key);

/* The payload's top-level "mode", as 2026.3.22 reports it: "fts-only" when
 * no embedding provider serves, else "hybrid" (also when hybrid merging is
 * off or a query falls back to keywords). */
const char *tools_search_mode(const char *provider);

/* {"results":[...],"provider","model","fallback"?,"citations","mode"} for
 * hits v[0..n). Each result: {"id","path","startLine","endLine","score",
 * "textScore"?,"snippet","source","citation"?}; "id" is 2026.3.22's chunk id,
 * sha256 hex of "<source>:<path>:<startLine>:<endLine>:<sha256 of the chunk
 * text>:<model or fts-only>"; "textScore" (the keyword side's 0..1 score,
 * before weighting and decay) is on every hit the keyword side found. */
cm_rc tools_search_payload(const search_hit *v, size_t n, const tools_head *h, buf *out);

/* {"results":[],"disabled":true,"error":msg,...}: a search that could not run. */
cm_rc tools_search_error(const char *msg, const tools_head *h, buf *out);

/* Checks a memory_get path (path[0..len) may hold any bytes) and appends the
 * absolute file path to abs. Allowed: MEMORY.md, memory.md, memory/ (any depth) and
 * .md files inside extraPaths; rejected with CM_EPATH and the rule broken:
 * empty, NUL bytes, absolute, '..' leaving the allowed roots, not .md, a
 * symbolic link anywhere on the way. */
cm_rc tools_resolve_path(const cm_config *cfg, const char *path, size_t len, buf *abs, char *err,
                         size_t errlen);

/* memory_get: appends {"path","text"} (plus "truncated":true,"nextFrom":N
 * when the text was cut at TOOLS_GET_MAX_BYTES). from is 1-based (<=0 → 1),
 * lines <= 0 means to the end. A missing file gives empty text. */
cm_rc tools_get(const cm_config *cfg, const char *path, size_t len, long from, long lines, buf *out,
                char *err, size_t errlen);

/* memory_write notes are at most this many bytes. */
#define TOOLS_WRITE_MAX_BYTES (64u << 10)

/* memory_write: appends text (a new paragraph) to the memory file path
 * (path NULL: memory/YYYY-MM-DD.md for the local date of now) and appends
 * {"path","startLine","endLine","bytes"} to out. Atomic (temporary file,
 * fsync, rename, fsync of the directory) under an flock of the file's
 * directory, so concurrent writers, threads or processes, serialise. */
cm_rc tools_write(const cm_config *cfg, const char *path, const char *text, int64_t now, buf *out,
                  char *err, size_t errlen);

/* The citation "path#L12" or "path#L12-L30". */
cm_rc tools_citation(buf *out, const char *path, int start_line, int end_line);

const char *tools_citations_name(cm_citations c);

#endif
