/*
 * typo.h — typo tolerance for the query side of keyword search. A question
 * may misspell a word ("educaton", "funraiser", "tennesee") that its note
 * spells right; no stemmer joins them. A keyword of at least TYPO_MIN_LEN
 * letters that the index does not hold is joined by the words one edit away
 * (Damerau–Levenshtein distance 1: a letter deleted, inserted, replaced, or
 * two neighbours swapped) that the index does hold (search.c looks them up).
 */
#ifndef CM_TYPO_H
#define CM_TYPO_H

#include "../base/buf.h"

#define TYPO_MIN_LEN 5  /* shorter words have too many neighbours */
#define TYPO_MAX_LEN 32 /* longer ones are no words to correct */

/* Appends to out the distinct words one edit away from w[0..len)
 * (lower-case ASCII letters a-z only, TYPO_MIN_LEN..TYPO_MAX_LEN bytes; else
 * nothing), each followed by one space; w itself is not among them. Edits use
 * the letters a-z. Returns how many were appended (*n), or CM_ENOMEM. */
cm_rc cm_typo_edits(const char *w, size_t len, buf *out, size_t *n);

#endif
