/*
 * irregular.h — the forms of English irregular verbs, for the query side of
 * keyword search. A question asks in the base form ("when did Nate win",
 * "what did Dave buy") and a note tells in the past ("won", "bought"); no
 * stemmer (Porter, Snowball, passage.h's light one) joins them, and the
 * static model's word families (suffix variants) do not either. The table
 * is a fixed list of common verbs; forms that are mostly other words ("bit",
 * "rose", "lay", "wound") are left out.
 */
#ifndef CM_IRREGULAR_H
#define CM_IRREGULAR_H

#include "../base/common.h"

/* The other forms (base, simple past, past participle) of the verb form
 * w[0..len) (lower-case ASCII), as static strings into out, at most cap;
 * returns how many. A word that is no form of a listed verb gives 0. */
size_t cm_irregular_forms(const char *w, size_t len, const char **out, size_t cap);

#endif
