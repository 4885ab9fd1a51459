/*
 * extract.h — what session memory search indexes of a transcript, as
 * QuantumClaw 2026.3.22 builds it: only `message` records of role user or
 * assistant; their text (a string, or the `text` blocks joined by a space;
 * tool calls, tool results and thinking dropped) with whitespace collapsed,
 * secrets masked as its "tools" redaction does, one line per message —
 * "User: …" / "Assistant: …" — and for each line the JSONL line it came from,
 * so chunk line ranges map back to the transcript. The document's hash is
 * sha256(text + "\n" + line numbers joined by ","), as 2026.3.22 computes it.
 */
#ifndef CM_EXTRACT_H
#define CM_EXTRACT_H

#include "../base/buf.h"

typedef struct session_doc {
    buf text;      /* the lines, joined by "\n" (no final newline) */
    int *line_map; /* line_map[i]: the 1-based JSONL line of text line i */
    int64_t *ts;   /* message timestamps (ms since the epoch; 0 unknown) */
    size_t n;      /* lines */
    char hash[65];
} session_doc;

/* Extracts the document from a transcript's bytes. */
cm_rc cm_session_extract(const char *jsonl, size_t len, session_doc *out);
void cm_session_doc_release(session_doc *d);

/* Appends text with QuantumClaw's default redaction applied: values of
 * KEY/TOKEN/SECRET/PASSWORD assignments, JSON "apiKey"/"token"/… members,
 * --api-key style flags, Bearer tokens, PEM private keys, and sk-, ghp_,
 * github_pat_, xox?-, xapp-, gsk_, AIza, pplx-, npm_ and Telegram bot
 * tokens; a token of 18 characters or more keeps its first 6 and last 4
 * ("sk-abc…wxyz"), a shorter one becomes "***". */
cm_rc cm_session_redact(const char *text, size_t n, buf *out);

#endif
