/*
 * passage.h — the best passage inside a keyword hit. A chunk holds 10–15
 * conversation turns or a whole abstract, and a question is answered by one
 * line or sentence of it, where the question's keywords tend to sit together.
 * Each line of a hit (each sentence of a line longer than a bound: an
 * abstract is one line) is scored by the share of the query's terms it
 * holds; the best one raises the hit's BM25 score (engine/search.c).
 * Terms are the phrases of the query's FTS5 expression (query.h), matched
 * against the chunk's words by a light English stemmer (plurals, -ed, -ing):
 * the index's own stemmer (SQLite's Porter, PostgreSQL's Snowball) is not at
 * hand after the store returns, and this way both stores rank alike. Every
 * term counts the same: weighting them by IDF did worse on both datasets of
 * `make eval` (docs/QUALITY.md, fourth round).
 */
#ifndef CM_PASSAGE_H
#define CM_PASSAGE_H

#include "../base/common.h"

#define PASSAGE_MAX_TERMS 64 /* a bit each */
#define PASSAGE_TERM_MAX  48 /* bytes of a term; longer ones are not matched */

typedef struct passage_terms {
    size_t n, ngroups;
    char term[PASSAGE_MAX_TERMS][PASSAGE_TERM_MAX + 1]; /* lower-cased, stemmed */
    unsigned char group[PASSAGE_MAX_TERMS]; /* a keyword and its variants share one */
    bool first[256]; /* the first bytes of the terms: other words are skipped */
} passage_terms;

/* Reads the phrases of an FTS5 expression of query.c ("a" AND "b" ...) into
 * out, stemmed (a repeated word counts each time). A phrase of several tokens (a CJK run), a prefix
 * phrase ("x"*) and a phrase longer than PASSAGE_TERM_MAX are left out.
 * Returns out->n. */
size_t cm_rank_passage_terms(const char *match, passage_terms *out);

/* cm_rank_passage_terms for an expression with variants: weights (query.h,
 * one a phrase; NULL or "": none) puts each variant in its keyword's group,
 * and a passage scores the share of the groups it holds. Returns the number
 * of groups. */
size_t cm_rank_passage_groups(const char *match, const char *weights, passage_terms *out);

/* The light stemmer of the passages, over w[0..n) lower-case (w changes);
 * the stem's length. */
size_t cm_rank_passage_stem(char *w, size_t n);

/* The share (0..1) of t's groups (terms, without variants) that the best passage of text holds: a line,
 * or for a line longer than sentence_over bytes (0: none), a sentence of it
 * (ended by '.', '?' or '!' before a space or the line's end). */
double cm_rank_passage_best(const char *text, const passage_terms *t, size_t sentence_over);

#endif
