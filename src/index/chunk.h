/*
 * chunk.h — QuantumClaw's line-based Markdown chunker. A chunk gathers whole
 * lines until its size would pass tokens×4 characters (a CJK character counts
 * 4, i.e. one token); the next chunk starts with whole trailing lines of the
 * previous one worth at least overlap×4 characters — but never all of them,
 * so no chunk contains its predecessor (QuantumClaw's only divergence: it
 * would repeat a whole chunk, e.g. every segment of a very long line). A line
 * longer than the budget is cut into segments at code-point boundaries. Lines
 * are split on '\n' with a trailing '\r' dropped (a final '\n' opens no new
 * line); line numbers are 1-based; chunks that are only whitespace are dropped.
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
} chunk;

typedef struct chunk_list {
    chunk *v;
    size_t n, cap;
} chunk_list;

/* Chunks text[0..n), which must be valid UTF-8, appending to out. */
cm_rc chunk_text(const char *text, size_t n, int tokens, int overlap, chunk_list *out);
void chunk_list_release(chunk_list *l);

/* Estimated size in characters: a CJK character counts 4, others 1. */
size_t chunk_weight(const char *s, size_t n);

#endif
