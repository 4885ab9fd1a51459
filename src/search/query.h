/*
 * query.h — builds the FTS5 MATCH expression for a user's query, as
 * QuantumClaw does: the query's letter/number tokens, each quoted, joined with
 * AND (or OR, for the fallback when AND finds nothing). clawmem adds CJK: a run
 * of CJK characters becomes the phrase of its bigrams, which matches the
 * bigram-expanded keyword text of the index (cm_utf8_cjk_expand) wherever the run
 * occurs, even inside a sentence written without spaces. With the trigram
 * tokenizer tokens are used as written; those under 3 characters match as
 * substrings through an expander (cm_query_build_ex), else they are dropped.
 * Stop words (stopwords.h) are not keywords: a query keeps them only when it
 * has nothing else, so they never make a hit on their own.
 */
#ifndef CM_QUERY_H
#define CM_QUERY_H

#include "../base/buf.h"
#include "../base/caps.h"

typedef enum query_join { QUERY_AND, QUERY_OR } query_join;

/* Queries longer than this many bytes are cut (at a character boundary). */
#define QUERY_MAX_BYTES CM_CAP_QUERY
/* At most this many tokens take part in the MATCH expression. */
#define QUERY_MAX_TOKENS 64

/* Appends the MATCH expression to out; appends nothing when the query has no
 * usable token. Returns the number of tokens used. */
cm_rc cm_query_build(const char *q, size_t n, bool trigram, query_join join, buf *out,
                     size_t *ntokens);

/* Whether q[0..n) holds a token that is not a stop word. */
bool cm_query_has_keyword(const char *q, size_t n);

/* With the trigram tokenizer, a term of one or two characters (lower-cased,
 * term[0..len)) has no trigram of its own: the expander appends to out an FTS5
 * expression matching the rows that hold it as a substring (the OR of the
 * index's trigrams that start with it), or nothing when the index has none. */
typedef cm_rc (*query_expand_fn)(void *ctx, const char *term, size_t len, buf *out);

/* cm_query_build with an expander for short trigram terms (NULL: they are
 * dropped, as cm_query_build does). */
cm_rc cm_query_build_ex(const char *q, size_t n, bool trigram, query_join join,
                        query_expand_fn expand, void *ctx, buf *out, size_t *ntokens);

/* Query-side vocabulary bridging: the variants of one keyword (lower-cased;
 * the tokens of a hyphenated keyword such as "wi-fi" joined by one space),
 * each a phrase (tokens separated by spaces) with a weight in (0, 1), and
 * optionally a higher weight for when the index holds no chunk with the
 * keyword itself (absent; 0: none). out arrives zeroed. Returns how many
 * were written to out (at most cap). */
#define QUERY_VARIANT_MAX 64 /* bytes of a variant, its NUL included */
typedef struct query_variant {
    char text[QUERY_VARIANT_MAX];
    double weight;
    double absent; /* in (weight, 1): cm_bm25's "w/a" (fts_rank.h); else unused */
} query_variant;
typedef size_t (*query_variants_fn)(void *ctx, const char *kw, size_t len, query_variant *out,
                                    size_t cap);
#define QUERY_MAX_VARIANTS 8 /* per keyword */

/* Everything cm_query_build_opts reads besides the query. */
typedef struct query_opts {
    bool trigram;
    query_join join;
    query_expand_fn expand; /* see cm_query_build_ex; NULL: none */
    void *expand_ctx;
    /* NULL: none. Each keyword becomes the group ("kw" OR "v1" OR "v2") (under
     * AND; its members under OR), and *weights receives one weight a phrase
     * of the expression, in order ("1 1 0.4 0.1/0.9 ..."; 1 opens a group, a
     * weight under 1 is a variant of the group before it, "w/a" one with an
     * absent weight, query_variant), for cm_bm25. weights is
     * left empty when no keyword has a variant. Not with trigram. */
    query_variants_fn variants;
    void *variants_ctx;
    buf *weights;
    bool join_hyphens; /* with variants: "wi-fi" is one keyword, the phrase "wi fi" */
    /* with weights: a definition in the query, "reactive oxygen species
     * (ROS)" (an acronym in parentheses after the words its letters start
     * or occur in, Schwartz & Hearst's rule), joins the two forms: the
     * acronym's group gains the long form as a phrase at QUERY_DEF_LONG, and
     * each keyword of the long form gains the acronym at QUERY_DEF_SHORT, so a
     * text that writes only one form covers the other's keywords too. */
    bool definitions;
} query_opts;

/* The weights of a definition's forms (docs/QUALITY.md, issue 30). */
#define QUERY_DEF_LONG  0.5
#define QUERY_DEF_SHORT 0.2

/* cm_query_build_ex with variants; with join_hyphens, a hyphenated word of
 * the query ("wi-fi", "e-mail") is one keyword, the phrase of its parts. */
cm_rc cm_query_build_opts(const char *q, size_t n, const query_opts *o, buf *out,
                          size_t *ntokens);

#endif
