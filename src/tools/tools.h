/*
 * tools.h — the agent-facing payloads of memory_search and memory_get, exactly
 * as QuantumClaw's builtin memory shapes them, and memory_get's path rules.
 */
#ifndef CM_TOOLS_H
#define CM_TOOLS_H

#include <sys/stat.h>

#include "../base/buf.h"
#include "../config/config.h"
#include "../search/rank.h"
#include "../base/caps.h"

/* Snippets are cut to this many characters (code points), then the citation
 * footer is appended. */
#define TOOLS_SNIPPET_CHARS 700
/* memory_get returns at most this many bytes of text, cut at a line end. */
#define TOOLS_GET_MAX_BYTES CM_CAP_TOOL_GET

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

/* Where a memory path leads: a trusted root and the path beneath it. */
typedef struct tools_loc {
    int root;          /* descriptor of the root, -1 when it does not exist (yet) */
    char *inner;       /* beneath root: normalised, no "..", e.g. "memory/2026-02-10.md" */
    char *rel;         /* workspace-relative, normalised: the name in payloads and the index */
    bool in_workspace; /* root is the workspace and inner is MEMORY.md, memory.md or memory/… */
} tools_loc;

/* Checks a memory path (path[0..len) may hold any bytes) and opens the root
 * it lies beneath. The check is lexical and follows QuantumClaw 2026.3.22:
 * surrounding white space is dropped, the path is resolved against the
 * workspace (an absolute path as it is, ".." resolved by name) and must then
 * be MEMORY.md, memory.md or under memory/ in the workspace, or an extraPaths
 * file, or inside an extraPaths directory, and end in ".md". Rejected with
 * CM_EPATH and the rule broken: empty, NUL bytes, not UTF-8, not .md,
 * outside the memory files. Nothing is followed here: symbolic links are
 * refused later, by the descriptor walk beneath loc->root. create (memory_write):
 * the root directory is created when missing. Release loc with
 * tools_loc_release (also after a failure). */
cm_rc tools_locate(const cm_config *cfg, const char *path, size_t len, bool create, tools_loc *loc,
                   char *err, size_t errlen);
void tools_loc_release(tools_loc *loc);

/* Opens the memory file path (NUL-terminated) names for reading, as
 * memory_get does (no symbolic link followed, never blocking, a regular file
 * only); *st receives its fstat and rel (may be NULL) its workspace-relative
 * name. CM_ENOTFOUND when it does not exist. The caller closes *fd. */
cm_rc tools_open(const cm_config *cfg, const char *path, int *fd, struct stat *st, buf *rel,
                 char *err, size_t errlen);

/* tools_open for an image or audio file of multimodal memory (media_kind()
 * of cfg), which tools_open and memory_get refuse: the engine reads its bytes
 * to embed them. */
cm_rc tools_open_media(const cm_config *cfg, const char *path, int *fd, struct stat *st, char *err,
                       size_t errlen);

/* memory_get: appends {"path","text"}: path is the normalised
 * workspace-relative name, text the file's bytes (U+FFFD for invalid UTF-8)
 * from line `from` (1-based, <= 0 → 1), `offset` bytes into it, through line
 * from+lines-1 without its final '\n' — the text after a final newline counts
 * as a last, empty line, so a range that reaches it ends with the newline; lines
 * <= 0 means to the end of the file. Over TOOLS_GET_MAX_BYTES the text is cut
 * after a whole line, with "truncated":true,"nextFrom":N (the next line); a
 * single line longer than that is cut at a character boundary with
 * "nextOffset":K too (continue with from=N, offset=K). A missing file gives
 * empty text. */
cm_rc tools_get(const cm_config *cfg, const char *path, size_t len, long from, long offset,
                long lines, buf *out, char *err, size_t errlen);

/* memory_get of a file beneath a directory other than the memory files (a
 * QMD collection's root): inner is relative to root ("a/b.md"; refused:
 * absolute, a ".." part, not .md, not UTF-8), read as tools_get reads (no
 * symbolic link followed, root included); name is the path the payload
 * shows. A missing file gives empty text. */
cm_rc tools_get_beneath(const char *root, const char *inner, const char *name, long from,
                        long offset, long lines, buf *out, char *err, size_t errlen);

/* memory_write notes are at most this many bytes. */
#define TOOLS_WRITE_MAX_BYTES CM_CAP_TOOL_WRITE

/* memory_write: appends text (a new paragraph) to the memory file path
 * (path NULL: memory/YYYY-MM-DD.md for the local date of now) and appends
 * {"path","startLine","endLine","bytes"} to out, and the file's
 * workspace-relative name to rel_out (may be NULL). Same path rules as
 * tools_get, missing directories created; "MEMORY.md" and "memory.md" both
 * name the indexed long-term file (MEMORY.md if it exists, else memory.md if
 * it exists). Atomic (a temporary file created with O_EXCL under an
 * unpredictable name in the note's directory, fsync, rename, fsync of the
 * directory) under an flock of that directory, so concurrent writers,
 * threads or processes, serialise; temporary files left by killed writers
 * are removed by the next writer of the directory. */
cm_rc tools_write(const cm_config *cfg, const char *path, const char *text, int64_t now, buf *out,
                  buf *rel_out, char *err, size_t errlen);

/* The citation "path#L12" or "path#L12-L30". */
cm_rc tools_citation(buf *out, const char *path, int start_line, int end_line);

const char *tools_citations_name(cm_citations c);

#endif
