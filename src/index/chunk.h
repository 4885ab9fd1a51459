/*
 * chunk.h — QuantumClaw's line-based Markdown chunker. A chunk gathers whole
 * lines until its size would pass tokens×4 characters (a CJK character counts
 * 4, i.e. one token); the next chunk starts with whole trailing lines of the
 * previous one worth at least overlap×4 characters — but never all of them,
 * so no chunk contains its predecessor, and never so many that the next line
 * would not fit. No chunk weighs more than tokens×4 (QuantumClaw's chunks can:
 * it carries whole segments of a long line as overlap). A line heavier than
 * the budget is cut at code-point boundaries into windows of a chunk each,
 * consecutive windows sharing overlap×4 characters (at most half a window):
 * the only overlap that is not whole lines. Lines are split on '\n' with a
 * trailing '\r' dropped (a final '\n' opens no new line), a leading UTF-8
 * byte-order mark is skipped; line numbers are 1-based; chunks that are only
 * whitespace are dropped.
 */
#ifndef CM_CHUNK_H
#define CM_CHUNK_H

#include "../base/common.h"
#include "../base/sha256.h"

typedef struct chunk {
    int start_line, end_line;
    char *text; /* NUL-terminated, owned */
    size_t len;
    char hash[SHA256_HEX_LEN + 1]; /* sha256 of text */
    int64_t time_s; /* a transcript's chunk: its newest message's time (unix s); else 0 */
} chunk;

typedef struct chunk_list {
    chunk *v;
    size_t n, cap;
} chunk_list;

/* Chunks text[0..n), which must be valid UTF-8, appending to out. */
cm_rc cm_chunk_text(const char *text, size_t n, int tokens, int overlap, chunk_list *out);
void cm_chunk_list_release(chunk_list *l);

/* Estimated size in characters: a CJK character counts 4, others 1. */
size_t cm_chunk_weight(const char *s, size_t n);

#endif
