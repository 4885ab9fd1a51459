/*
 * query.h — builds the FTS5 MATCH expression for a user's query, as
 * QuantumClaw does: the query's letter/number tokens, each quoted, joined with
 * AND (or OR, for the fallback when AND finds nothing). clawmem adds CJK: a run
 * of CJK characters becomes the phrase of its bigrams, which matches the
 * bigram-expanded keyword text of the index (utf8_cjk_expand) wherever the run
 * occurs, even inside a sentence written without spaces. With the trigram
 * tokenizer tokens are used as written and those under 3 characters dropped.
 */
#ifndef CM_QUERY_H
#define CM_QUERY_H

#include "../base/buf.h"

typedef enum query_join { QUERY_AND, QUERY_OR } query_join;

/* Queries longer than this many bytes are cut (at a character boundary). */
#define QUERY_MAX_BYTES 4096
/* At most this many tokens take part in the MATCH expression. */
#define QUERY_MAX_TOKENS 64

/* Appends the MATCH expression to out; appends nothing when the query has no
 * usable token. Returns the number of tokens used. */
cm_rc query_build(const char *q, size_t n, bool trigram, query_join join, buf *out,
                  size_t *ntokens);

#endif
