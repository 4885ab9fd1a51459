/*
 * stopwords.h — stop words of the query model (query.h): the function words
 * of the languages QuantumClaw's keyword extraction covers. A keyword query
 * drops them; they never make a hit on their own.
 */
#ifndef CM_STOPWORDS_H
#define CM_STOPWORDS_H

#include "../base/common.h"

/* Whether s[0..len), already lower-cased, is a stop word of any language. */
bool cm_stopword_is(const char *s, size_t len);

/* Whether s[0..len), lower-cased, opens an English question about what
 * someone did or said: a wh-word ("what", "who") or an auxiliary ("did",
 * "is", "can"); not "how", which asks how to do a thing ("how do I share a
 * folder", "how to tell if a port is open"). */
bool cm_stopword_question_opener(const char *s, size_t len);

/* Whether s[0..len), lower-cased, is a verb that frames what was said
 * ("say", "told", "mentioned", "describes", "talked", "shared"): in a
 * question that cm_stopword_question_opener opens ("What did Maya share
 * with Tom?") it names the act of speaking, not what was said, so the query
 * model drops it there (query.c); in other queries ("samba share", "how do
 * I share a folder") it stays a keyword. */
bool cm_stopword_speech_verb(const char *s, size_t len);

/* The byte length of the longest Chinese/Japanese stop word (or particle such
 * as 的) that starts s[0..len) inside a CJK run, 0 if none. */
size_t cm_stopword_cjk_at(const char *s, size_t len);

/* The byte length of a Korean particle ending the word s[0..len) (에서, 은,
 * 를, …), shorter than the word; 0 if none. */
size_t cm_stopword_ko_particle(const char *s, size_t len);

#endif
