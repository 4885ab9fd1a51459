/*
 * term_rows.h — how many rows of the keyword table hold each term, kept in
 * a table of the index (term_rows) beside FTS5, so that cm_bm25 reads a
 * one-term phrase's row count with one lookup instead of walking the term's
 * rows through xQueryPhrase (docs/BENCHMARKS.md, issue 30 item 7, eleventh
 * round).
 *
 * The table mirrors the FTS5 index exactly or says it does not: its row ''
 * (no term is empty) marks it current. A rebuild fills it from the index
 * (fts5vocab) after the keyword entries; a write of keyword entries through
 * the store adds or takes one per distinct term of each chunk's text,
 * tokenised as FTS5 tokenises it, and puts the mark back at commit. The
 * triggers on files (files_stat.h) drop the mark in the transaction of any
 * other write, whoever writes (an older clawmem): every write of chunks and
 * their keyword entries comes with a write of their file's row. Triggers on
 * chunks would be exact for a writer that skips the files row too, but any
 * trigger on chunks makes SQLite open a statement savepoint for each chunk
 * inserted, at which FTS5 writes its pending postings as a segment of their
 * own (a one-file sync: 9 segments instead of 1, and a merge of the whole
 * index every few syncs). A search that finds no mark (or no table: an
 * older index) counts rows as before, and a sync under the writer lock
 * fills the table again. Not for a trigram index (its phrases are runs of
 * trigrams) nor PostgreSQL.
 */
#ifndef CM_TERM_ROWS_H
#define CM_TERM_ROWS_H

#include "store.h"

/* Before a store function writes files rows (and chunks with their keyword
 * entries): whether this transaction keeps the table current (it was, and a
 * transaction is open). */
cm_rc cm_term_rows_arm(store *s, char *err, size_t errlen);

/* A keyword entry of text[0..len) written (sign 1) or deleted (-1). */
cm_rc cm_term_rows_note(store *s, const char *text, size_t len, int sign, char *err, size_t errlen);

/* Before COMMIT: the transaction's changes into the table, the mark back. */
cm_rc cm_term_rows_flush(store *s, char *err, size_t errlen);

/* After COMMIT or ROLLBACK: forget the transaction's changes. */
void cm_term_rows_end(store *s);

/* The whole table from the keyword index, marked current, with the files
 * triggers that drop the mark; inside the caller's transaction. */
cm_rc cm_term_rows_fill(store *s, char *err, size_t errlen);

/* Under the writer lock, after a sync: fills the table in a transaction of
 * its own when it is absent or not marked current (*wrote then true). */
cm_rc cm_term_rows_repair(store *s, bool *wrote, char *err, size_t errlen);

/* For a search's MATCH expression (query.c's: quoted phrases, '*' after a
 * prefix one): one item a phrase, in order, into out: the row count of a
 * phrase of one term, '-' for any other. out stays empty when the table
 * cannot say (absent, not current, a trigram index): cm_bm25 then counts. */
cm_rc cm_term_rows_counts(store *s, const char *match, buf *out, char *err, size_t errlen);

/* cm_term_rows_counts for cm_bm25 (fts_rank.h's cm_fts_counts_fn, ctx the
 * store): asked at a search's first row, inside the search's read of the
 * index, so that the counts and the rows are of one snapshot, and not at
 * all by a search that matches nothing. NULL when the table cannot say. */
const char *cm_term_rows_lookup(void *ctx, const char *match);

void cm_term_rows_free(store *s);

#endif
