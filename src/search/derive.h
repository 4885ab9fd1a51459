/*
 * derive.h — derivationally related words, for the query side of keyword
 * search: a question asks about a "marriage", an "adoption", a "painter",
 * and the note says "married", "adopted", "painting"; Porter keeps these
 * apart. The table comes from WordNet 3.0's derivation pointers (its "+"
 * pointers between lemmas of two parts of speech), converted at build time
 * from Debian's wordnet-base package (derive_build.h) into a sorted text
 * file, one line a word: the word, a tab, its related words separated by
 * single spaces (none for a lemma without derivations: a word WordNet
 * knows is its own base form). No table: no derivations, search as
 * without them.
 */
#ifndef CM_DERIVE_H
#define CM_DERIVE_H

#include "../base/common.h"

#define DERIVE_TABLE_NAME "wordnet-derivations.txt"

/* A mapped table (read-only after cm_derive_open). */
typedef struct derive_table {
    const char *data;
    size_t len;
    void *map;
} derive_table;

/* Maps the table at path; CM_ENOTFOUND when there is none (err says why for
 * other errors). A table that does not end in a newline is refused. */
cm_rc cm_derive_open(derive_table *t, const char *path, char *err, size_t errlen);
void cm_derive_close(derive_table *t);

/* The related words of w[0..len) (lower-case ASCII): of w itself when the
 * table lists it, else of the first base form WordNet's detachment rules
 * give that the table lists ("marriages" -> marriage, "adopted" -> adopt).
 * Into out (NUL-terminated, space-separated; cap bytes, words that do not
 * fit left out); returns how many. */
size_t cm_derive_forms(const derive_table *t, const char *w, size_t len, char *out, size_t cap);

#endif
