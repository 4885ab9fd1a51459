/*
 * suggest.h — "did you mean …?": the edit distance between a word someone
 * typed and the words that would have been understood, and the closest of
 * those when it is close enough to be a typo. Used for the command line's
 * commands and options and for the config's keys. No allocation.
 */
#ifndef CM_SUGGEST_H
#define CM_SUGGEST_H

#include <stdbool.h>
#include <stddef.h>

/* Words longer than this get no suggestion (and a distance of SIZE_MAX). */
#define SUGGEST_MAX_LEN 64

/* The optimal-string-alignment distance between a and b: insertions,
 * deletions, substitutions and swaps of two neighbours each cost 1; ASCII
 * letters compare without case. SIZE_MAX when either is longer than
 * SUGGEST_MAX_LEN bytes. */
size_t cm_edit_distance(const char *a, size_t alen, const char *b, size_t blen);

/* Collects candidates one by one and keeps the closest to word that is close
 * enough to be a typo of it (a distance of at most 1 for a word of up to 3
 * bytes, 2 up to 6 bytes, else 3, and less than word's length); on a tie the
 * first added wins. A candidate equal to word is not a suggestion. */
typedef struct suggest {
    const char *word;
    size_t word_len;
    const char *best; /* the closest candidate so far (not NUL-terminated), or NULL */
    size_t best_len, best_dist;
} suggest;

void cm_suggest_init(suggest *s, const char *word);

/* Offers cand[0..len). */
void cm_suggest_add(suggest *s, const char *cand, size_t len);

/* Offers each word of a list written "a|b|c". */
void cm_suggest_add_list(suggest *s, const char *choices);

/* Writes the suggestion into out (NUL-terminated, cut to outlen) and returns
 * true, or returns false (out "") when no candidate was close enough. */
bool cm_suggest_result(const suggest *s, char *out, size_t outlen);

#endif
