/*
 * ctx_cache.h — the records of each session's model context, parsed once
 * and kept by the process: a turn parses only the lines appended to the
 * transcript since the last turn instead of every record from the
 * context's start.
 *
 * An entry is keyed by the transcript's path and holds the records read
 * (from the context's start, cm_transcript_context_offset, to the end of
 * the last whole line read), the file's device and inode, that end, and
 * the 64 bytes before it. It is used only while the file is the same one
 * (device, inode), no shorter, and still has those bytes there; then the
 * lines after the end are parsed and added. Anything else — another
 * process replaced, truncated or rewrote the file, a compaction record
 * among the new lines (the context's start moves) — reads the context
 * again from the file, as without the cache. So an outside writer
 * (QuantumClaw appending to the same transcript, an editor) is seen at the
 * next turn. At most CTX_CACHE_MAX transcripts are kept, each at most
 * CTX_CACHE_BYTES of text and CTX_CACHE_TOTAL all together (the least
 * recently used dropped first; once the total is reached only one new
 * transcript in eight is let in, so that more conversations in rotation
 * than fit still find most of those kept).
 */
#ifndef CM_CTX_CACHE_H
#define CM_CTX_CACHE_H

#include <jansson.h>

#include "../base/common.h"

#define CTX_CACHE_MAX   4096 /* as many as the gateway keeps sessions (GW_RT_MAX_SESSIONS) */
#define CTX_CACHE_BYTES (1u << 20)  /* the most text of one transcript's context kept */
#define CTX_CACHE_TOTAL (32u << 20) /* of all of them */

/* The context's records of the transcript at path, as
 * cm_transcript_context_offset then cm_transcript_read_from(max) give them,
 * in *out (a new array owned by the caller; its records are shared with
 * the cache and with other threads: read-only). *whole: they start at the
 * file's beginning. A missing file: an empty array, *whole true. Thread-safe
 * (the cache's mutex guards memory only; the file is read outside it). */
cm_rc cm_ctx_cache_read(const char *path, size_t max, json_t **out, bool *whole, char *err,
                        size_t errlen);

typedef struct ctx_cache_stats {
    int64_t reads;  /* contexts read from their start */
    int64_t hits;   /* contexts taken from the cache (plus the lines appended since) */
    int64_t parsed; /* lines parsed (by both) */
} ctx_cache_stats;

void cm_ctx_cache_stats_get(ctx_cache_stats *out);

#endif
