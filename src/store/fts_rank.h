/*
 * fts_rank.h — clawmem's BM25 as an FTS5 auxiliary function, cm_bm25().
 *
 * FTS5's built-in bm25() clamps the IDF of any term found in at least half the
 * rows to 1e-6, so in a small workspace (a handful of notes) a perfectly good
 * match scores ~0 and falls under minScore. cm_bm25() uses the classic
 * Robertson–Spärck Jones IDF, ln((N − n + 0.5)/(n + 0.5)), floored at
 * FTS_RANK_IDF_FLOOR so that a term in most rows still counts a little (the
 * floor and this IDF beat Lucene's ln(1 + …) on both datasets of `make eval`,
 * docs/QUALITY.md); k1 = 1.2, b = 0.75, a row's length taken as at least half
 * the average (a note's short last chunk is no better for its shortness). An
 * index of fewer than FTS_RANK_MIN_ROWS chunks is scored as if it had that
 * many, the missing ones without the term (a prior): otherwise every term of
 * a one-note workspace is "common" and no match clears minScore. A row that
 * holds only some of the query's phrases (the OR fallback) loses BM25 units
 * in proportion to the IDF mass it lacks, so that chunks with more of the
 * keywords rank higher. cm_bm25(k, 'weights') takes one weight a phrase
 * ("1 1 0.4 0.4 1"): a phrase of weight 1 opens a group, one under 1 is a
 * variant of the group before it (query.h's vocabulary bridging); a group
 * scores its best member at that member's weight, and a group held only by
 * a variant counts as held for coverage. A variant's weight "w/a" is a when
 * no row holds its group's keyword (the group's first phrase), else w: a
 * word's derivation stands in for it fully only when the notes lack the
 * word. A list that starts "c<x> " scales the coverage penalty by x (0..1;
 * the weak-result fallback's c0: any part of the question may answer). A
 * third argument, the MATCH expression, lets it ask the registered counts
 * function for the phrases' row counts (term_rows.h) at its first row, in
 * the search's own read of the index; the phrases it gives none for are
 * counted over their rows. Like
 * bm25() it returns the negated score, so ORDER BY
 * rank puts the best first.
 */
#ifndef CM_FTS_RANK_H
#define CM_FTS_RANK_H

#include <sqlite3.h>
#include <stddef.h>

#define FTS_RANK_MIN_ROWS  100
#define FTS_RANK_IDF_FLOOR 0.5    /* 0.3..0.6 all gained on both datasets; 0.5 most */
#define FTS_RANK_MAX_K     100000 /* cm_bm25(k) keeps the k best scores up to this k */
/* A row shorter than this share of the average row is normalised as if it
 * had that length: a note's last chunk, mostly the overlap of the chunk
 * before it, and one-line notes no longer outrank fuller chunks by their
 * shortness alone (docs/QUALITY.md, issue 30, round 8: 0.5 gained on both
 * datasets of `make eval`; 0.3-0.9 swept). */
#define FTS_RANK_LENGTH_FLOOR 0.5

/* The phrases' row counts for a MATCH expression, as term_rows.h's
 * cm_term_rows_counts writes them (NULL: count them all); the string stays
 * the callee's until its next call. */
typedef const char *(*cm_fts_counts_fn)(void *ctx, const char *match);

/* Registers cm_bm25() on db, and gives db's FTS5 API in *api; counts (with
 * ctx; may be NULL) is what cm_bm25 asks for the phrases' row counts. Returns
 * an SQLite result code. */
int cm_fts_rank_register(sqlite3 *db, fts5_api **api, cm_fts_counts_fn counts, void *ctx);

/* db's FTS5 API (NULL when it has none), for cm_fts_stem; valid while db is open. */
fts5_api *cm_fts_api(sqlite3 *db);

/* The stems SQLite's porter tokenizer (over unicode61) gives text[0..n),
 * separated by spaces, into out (cap bytes, NUL-terminated; tokens that do
 * not fit are left out). Returns an SQLite result code. */
int cm_fts_stem(fts5_api *api, const char *text, int n, char *out, size_t cap);

#endif
