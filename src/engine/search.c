/*
 * search.c — the builtin backend's memory_search: keyword hits through the
 * FTS index, vector hits from the in-memory vector index (kept fresh from the
 * vector log), merged and ranked, and shaped into the tool's payload.
 */
#include "../base/fs.h"
#include "../search/derive.h"
#include "../search/irregular.h"
#include "../search/passage.h"
#include "../search/query.h"
#include "../search/rank.h"
#include "../search/stopwords.h"
#include "../search/typo.h"
#include "../search/when.h"
#include "../store/fts_rank.h"
#include "engine_int.h"

#include <unistd.h>

typedef struct expand_ctx {
    store *st;
    char *err;
    size_t errlen;
} expand_ctx;

/* Short terms of a trigram query: the index's trigrams that start with them. */
static cm_rc expand_trigram(void *ctx, const char *term, size_t len, buf *out)
{
    expand_ctx *x = ctx;
    return cm_store_trigram_terms(x->st, term, len, out, x->err, x->errlen);
}

/* Vocabulary bridging (query.h): each keyword's family in the static model
 * ("allergies": allergic; "wifi": wi-fi), words with a cosine of at least
 * VARIANT_MORPH_MIN_COS among its VARIANT_AMONG most frequent, at
 * VARIANT_MORPH_WEIGHT under the keyword itself, which keeps weight 1. No
 * nearest words in an ordinary search: they lost on LoCoMo (docs/QUALITY.md,
 * issue 30); the weak-result fallback below adds them. */
#define VARIANT_MORPH_WEIGHT  0.5
#define VARIANT_MORPH_MIN_COS 0.5
#define VARIANT_AMONG         100000

/* A keyword that is a form of an irregular verb (irregular.h) gains its
 * other forms at IRREGULAR_WEIGHT, as a family does: "win" finds "won".
 * 0.3-0.5 did best on LoCoMo, SciFact the same (docs/QUALITY.md, issue 30,
 * round 5); with or without the static model. */
#define IRREGULAR_WEIGHT 0.5

/* The weak-result fallback's nearest words (search.c's cm_builtin_search). */
#define FALLBACK_NEIGHBOURS       3
#define FALLBACK_NEIGHBOUR_WEIGHT 0.5
#define FALLBACK_NEIGHBOUR_COS    0.6
#define FALLBACK_AMONG            50000

/* Typo tolerance (typo.h): a keyword of TYPO_MIN_LEN..TYPO_CORRECT_MAX
 * letters that the static model does not know (a word of the language is no
 * typo, even when the notes lack it) and the index holds neither it nor any
 * of its variants gains the index's most frequent word one edit away at
 * TYPO_WEIGHT: "educaton" finds "education". Only with the static model.
 * Longer words were left alone: on SciFact they are technical terms whose
 * neighbour is another term ("methyltrasnferase"); docs/QUALITY.md, issue
 * 30, round 6. */
#define TYPO_WEIGHT      0.7
#define TYPO_CORRECT_MAX 9

/* Derivations (derive.h): a keyword's derivationally related words in
 * WordNet ("decision": decide; "adoption": adopt) at DERIVE_WEIGHT,
 * covering the keyword as a family does; at most DERIVE_MAX_FORMS of them
 * are considered. 0.1 did best on both datasets; WordNet's synonyms, its
 * hyponyms and two steps of derivation lost (docs/QUALITY.md, issue 30,
 * round 7). With or without the static model; with the porter tokenizer only (it joins the forms'
 * inflections, "marry" and "married"; unicode61 promises no stemming), not
 * with the PostgreSQL store. */
#define DERIVE_WEIGHT    0.1
#define DERIVE_MAX_FORMS 48
/* When the index holds no chunk with the keyword itself, its derivations
 * stand in for it at DERIVE_ABSENT_WEIGHT instead ("What did Caroline
 * decide" over notes that only say "decision"); cm_bm25 tells from the
 * keyword's row count, which it has already, so this costs no lookup. 0.9
 * gained on LoCoMo, SciFact the same (docs/QUALITY.md, issue 30, rounds 7
 * and 8). */
#define DERIVE_ABSENT_WEIGHT 0.9

/* The typo lookups of one search, kept for its other pass (the weak-result
 * fallback asks for the same keywords): which of a keyword's one-edit
 * spellings the index holds most depends on the keyword alone, and that
 * lookup of ~500 spellings is most of a search with such a word. has: the
 * correction, text; else none of them is held (or the best one cannot be
 * used). */
typedef struct typo_outcome {
    char kw[TYPO_CORRECT_MAX + 1];
    bool has;
    char text[QUERY_VARIANT_MAX];
} typo_outcome;
typedef struct typo_memo {
    size_t n;
    typo_outcome v[8];
} typo_memo;

typedef struct variant_ctx {
    const static_model *m;
    static_variant_opts o;
    double w_morph, w_near;
    fts5_api *porter;       /* the index stems with porter: its API, else NULL */
    store *st;              /* for typo tolerance; NULL: none */
    const derive_table *dt; /* derivations (derive.h); NULL: none */
    fts5_api *stem;         /* the porter API when the index stems with it, else NULL */
    typo_memo *typo;        /* the search's typo lookups so far; NULL: none kept */
} variant_ctx;

/* Drops from v[0..n) the one-word variants that the index's porter stemmer
 * makes the keyword itself or an earlier variant ("arrival" for "arrives"):
 * their phrases would match the same rows again at a lower weight, a cost
 * with no effect on any score. Returns the new n. */
static size_t porter_unique(fts5_api *api, const char *kw, size_t len, static_variant *v, size_t n)
{
    char text[QUERY_MAX_VARIANTS * 50 + 64], stems[sizeof text];
    size_t at = 0;
    if (len >= 64) return n;
    memcpy(text, kw, len);
    at = len;
    for (size_t i = 0; i < n; i++) {
        if (strchr(v[i].text, ' ')) continue; /* a phrase: kept as it is */
        size_t l = strlen(v[i].text);
        text[at++] = ' ';
        memcpy(text + at, v[i].text, l);
        at += l;
    }
    if (strchr(kw, ' ') || cm_fts_stem(api, text, (int)at, stems, sizeof stems) != SQLITE_OK)
        return n;
    const char *seen[QUERY_MAX_VARIANTS + 1];
    size_t seen_len[QUERY_MAX_VARIANTS + 1], ns = 0, w = 0;
    const char *p = stems;
    for (size_t i = 0; i <= n; i++) {
        bool phrase = i > 0 && strchr(v[i - 1].text, ' ');
        if (phrase) {
            v[w++] = v[i - 1];
            continue;
        }
        const char *sp = strchr(p, ' ');
        size_t sl = sp ? (size_t)(sp - p) : strlen(p);
        bool dup = false;
        for (size_t j = 0; j < ns && !dup; j++)
            dup = seen_len[j] == sl && memcmp(seen[j], p, sl) == 0;
        if (!dup) {
            seen[ns] = p;
            seen_len[ns++] = sl;
            if (i > 0) v[w++] = v[i - 1];
        }
        p = sp ? sp + 1 : p + sl;
    }
    return w;
}

/* The static model's vocabulary, mapped once (NULL when not installed). */
static const static_model *query_model(cm_engine *e)
{
    if (!e->qm_state) {
        char msg[256];
        char *path = cm_embed_static_path(&e->cfg);
        e->qm_state = path && !cm_static_model_map(&e->qm, path, msg, sizeof msg) ? 1 : -1;
        free(path);
    }
    return e->qm_state > 0 ? &e->qm : NULL;
}

/* Appends to out[0..n) (at most cap) the other forms of an irregular
 * verb kw, less stop words and forms already there; the new n. */
static size_t irregular_variants(const char *kw, size_t len, query_variant *out, size_t n,
                                 size_t cap)
{
    const char *f[3];
    size_t nf = cm_irregular_forms(kw, len, f, 3);
    for (size_t i = 0; i < nf && n < cap; i++) {
        size_t lf = strlen(f[i]);
        bool dup = cm_stopword_is(f[i], lf) || lf >= sizeof out[n].text;
        for (size_t j = 0; j < n && !dup; j++)
            dup = strcmp(out[j].text, f[i]) == 0;
        if (dup) continue;
        memcpy(out[n].text, f[i], lf + 1);
        out[n++].weight = IRREGULAR_WEIGHT;
    }
    return n;
}

/* The index terms of the words w (n of them, space-separated) into t: their
 * porter stems when the index stems, else the words. */
static bool index_terms(const variant_ctx *x, const buf *w, buf *t)
{
    if (!x->stem) return !cm_buf_add(t, w->data, w->len) && !cm_buf_addc(t, 0);
    if (cm_buf_grow(t, w->len + 1)) return false;
    return cm_fts_stem(x->stem, w->data, (int)w->len, t->data, t->cap) == SQLITE_OK;
}

/* Appends to out[0..n) (at most cap) the typo corrections of kw (typo.h)
 * when the index holds neither kw nor a one-word variant out[0..n) of it;
 * the new n. Errors of the lookup leave the variants as they were. */
static size_t typo_variants(variant_ctx *x, const char *kw, size_t len, query_variant *out,
                            size_t n, size_t cap)
{
    if (!x->st || !x->m || n >= cap || len < TYPO_MIN_LEN || len > TYPO_CORRECT_MAX) return n;
    for (size_t i = 0; i < len; i++)
        if (kw[i] < 'a' || kw[i] > 'z') return n;             /* letters only (typo.h) */
    if (cm_static_model_lookup(x->m, kw, len) >= 0) return n; /* a word: no typo */
    typo_outcome *memo = NULL;
    buf w = BUF_INIT, t = BUF_INIT;
    int64_t *docs = NULL;
    char err[128];
    size_t ne = 0, nw = 0;
    /* the keyword and its variants first: any of them held, no correction */
    bool ok = !cm_buf_add(&w, kw, len);
    for (size_t i = 0; i < n && ok; i++)
        if (!strchr(out[i].text, ' ')) {
            ok = !cm_buf_addc(&w, ' ') && !cm_buf_adds(&w, out[i].text);
            nw++;
        }
    nw++;
    if (!ok || !index_terms(x, &w, &t)) goto out;
    if (!(docs = calloc(nw, sizeof *docs))) goto out;
    if (cm_store_term_docs(x->st, t.data, nw, docs, err, sizeof err)) goto out;
    for (size_t i = 0; i < nw; i++)
        if (docs[i] > 0) goto out;
    free(docs);
    docs = NULL;
    w.len = 0;
    t.len = 0;
    for (size_t i = 0; x->typo && i < x->typo->n; i++) {
        if (strlen(x->typo->v[i].kw) != len || memcmp(x->typo->v[i].kw, kw, len)) continue;
        if (x->typo->v[i].has) {
            memcpy(out[n].text, x->typo->v[i].text, sizeof out[n].text);
            out[n++].weight = TYPO_WEIGHT;
        }
        goto out;
    }
    if (cm_typo_edits(kw, len, &w, &ne) || !ne) goto out;
    w.data[--w.len] = 0; /* the last space */
    if (!index_terms(x, &w, &t) || !(docs = calloc(ne, sizeof *docs))) goto out;
    if (cm_store_term_docs(x->st, t.data, ne, docs, err, sizeof err)) goto out;
    size_t best = ne;
    for (size_t i = 0; i < ne; i++)
        if (docs[i] > 0 && (best == ne || docs[i] > docs[best])) best = i;
    memo = x->typo && x->typo->n < ARRAY_LEN(x->typo->v) ? &x->typo->v[x->typo->n++] : NULL;
    if (memo) {
        memcpy(memo->kw, kw, len);
        memo->kw[len] = 0;
        memo->has = false;
    }
    if (best == ne) goto out;
    const char *p = w.data; /* the best-th word of w */
    for (size_t i = 0; i < best; i++)
        p = strchr(p, ' ') + 1;
    const char *sp = strchr(p, ' ');
    size_t l = sp ? (size_t)(sp - p) : strlen(p);
    if (l >= sizeof out[n].text || cm_stopword_is(p, l)) goto out;
    memcpy(out[n].text, p, l);
    out[n].text[l] = 0;
    out[n++].weight = TYPO_WEIGHT;
    if (memo) {
        memo->has = true;
        memcpy(memo->text, out[n - 1].text, sizeof memo->text);
    }
out:
    free(docs);
    cm_buf_release(&w);
    cm_buf_release(&t);
    return n;
}

/* The derivation table (derive.h), mapped once: the state dir's
 * models/wordnet-derivations.txt, else the copy make converts beside the
 * program (<prefix>/share/clawmem/, build/share/clawmem/). None, or an
 * empty or truncated file in the state dir: no derivations. */
static const derive_table *derive_tab(cm_engine *e)
{
    if (!e->dt_state) {
        static const char *const rels[] = {"../share/clawmem/" DERIVE_TABLE_NAME,
                                           "share/clawmem/" DERIVE_TABLE_NAME, NULL};
        char msg[256];
        buf b = BUF_INIT;
        char *path = NULL;
        if (!cm_buf_printf(&b, "%s/models/" DERIVE_TABLE_NAME, e->cfg.state_dir))
            path = access(b.data, F_OK) ? cm_fs_find_beside(rels) : cm_buf_detach(&b);
        cm_buf_release(&b);
        e->dt_state = path && !cm_derive_open(&e->dt, path, msg, sizeof msg) ? 1 : -1;
        free(path);
    }
    return e->dt_state > 0 ? &e->dt : NULL;
}

/* Appends to out[0..n) (at most cap) kw's derivationally related words
 * (derive.h) at DERIVE_WEIGHT, less stop words, words already there and
 * those the index's stemmer makes kw or an earlier form (their phrases would
 * match the same rows again); the new n. A form the index lacks matches
 * nothing and changes no score, so it is not looked up (a vocabulary lookup
 * a keyword cost more than the phrase: docs/QUALITY.md, issue 30, round 7). */
static size_t derive_variants(variant_ctx *x, const char *kw, size_t len, query_variant *out,
                              size_t n, size_t cap)
{
    char forms[1024];
    if (!x->dt || !x->stem || n >= cap || len >= 64 ||
        !cm_derive_forms(x->dt, kw, len, forms, sizeof forms))
        return n;
    buf w = BUF_INIT, t = BUF_INIT;
    const char *word[DERIVE_MAX_FORMS + 1], *stem[DERIVE_MAX_FORMS + 1];
    size_t wl[DERIVE_MAX_FORMS + 1], sl[DERIVE_MAX_FORMS + 1], nw = 0, ns = 0;
    word[nw] = kw; /* the keyword first, then its forms */
    wl[nw++] = len;
    for (char *p = forms; *p && nw <= DERIVE_MAX_FORMS;) {
        char *sp = strchr(p, ' ');
        word[nw] = p;
        wl[nw++] = sp ? (size_t)(sp - p) : strlen(p);
        p = sp ? sp + 1 : p + strlen(p);
    }
    bool ok = true;
    for (size_t i = 0; i < nw && ok; i++)
        ok = (!i || !cm_buf_addc(&w, ' ')) && !cm_buf_add(&w, word[i], wl[i]);
    if (!ok || !index_terms(x, &w, &t)) goto out;
    for (const char *p = t.data; ns < nw;) { /* the index terms, one a word */
        const char *sp = strchr(p, ' ');
        stem[ns] = p;
        sl[ns++] = sp ? (size_t)(sp - p) : strlen(p);
        if (!sp) break;
        p = sp + 1;
    }
    if (ns != nw) goto out;
    for (size_t i = 1; i < nw && n < cap; i++) {
        bool dup = wl[i] >= sizeof out[n].text || cm_stopword_is(word[i], wl[i]);
        for (size_t j = 0; j < i && !dup; j++)
            dup = sl[j] == sl[i] && !memcmp(stem[j], stem[i], sl[i]);
        for (size_t j = 0; j < n && !dup; j++)
            dup = strlen(out[j].text) == wl[i] && !memcmp(out[j].text, word[i], wl[i]);
        if (dup) continue;
        memcpy(out[n].text, word[i], wl[i]);
        out[n].text[wl[i]] = 0;
        out[n].weight = DERIVE_WEIGHT;
        out[n++].absent = DERIVE_ABSENT_WEIGHT;
    }
out:
    cm_buf_release(&w);
    cm_buf_release(&t);
    return n;
}

/* query_variants_fn: the static model's variants (when it is installed)
 * less those the stemmers already equate with the keyword, and stop words;
 * then an irregular verb's other forms, derivations and typo corrections. */
static size_t model_variants(void *ctx, const char *kw, size_t len, query_variant *out, size_t cap)
{
    variant_ctx *x = ctx;
    static_variant v[QUERY_MAX_VARIANTS];
    size_t nv = x->m ? cm_static_model_variants(x->m, kw, len, &x->o, v, QUERY_MAX_VARIANTS) : 0,
           n = 0;
    if (nv && x->porter) nv = porter_unique(x->porter, kw, len, v, nv);
    char a[64], b[64];
    size_t la = len < sizeof a ? len : sizeof a - 1;
    memcpy(a, kw, la);
    la = cm_rank_passage_stem(a, la);
    for (size_t i = 0; i < nv && n < cap; i++) {
        size_t lb = strlen(v[i].text);
        memcpy(b, v[i].text, lb);
        if (cm_stopword_is(b, lb)) continue;
        lb = cm_rank_passage_stem(b, lb);
        if (lb == la && memcmp(a, b, la) == 0) continue; /* the same stem: found anyway */
        memcpy(out[n].text, v[i].text, strlen(v[i].text) + 1);
        out[n++].weight = v[i].morph ? x->w_morph : x->w_near;
    }
    n = irregular_variants(kw, len, out, n, cap);
    n = derive_variants(x, kw, len, out, n, cap);
    return typo_variants(x, kw, len, out, n, cap);
}

/* The fallback's weights: no coverage penalty (fts_rank.h's "c0"), so a
 * hit holding a variant of one keyword of the question is not pushed under
 * minScore for lacking the others. */
static cm_rc no_coverage(buf *weights)
{
    if (!weights->len) return CM_OK;
    buf b = BUF_INIT;
    cm_rc rc = cm_buf_adds(&b, "c0 ");
    if (!rc) rc = cm_buf_add(&b, weights->data, weights->len);
    if (!rc) {
        cm_buf_release(weights);
        *weights = b;
    } else {
        cm_buf_release(&b);
    }
    return rc;
}

/* Keyword hits for query, and the FTS5 expression that found them in *match
 * and its weights in *weights (the caller releases both); typo: the
 * search's typo lookups, kept across its passes (NULL: none kept). */
static cm_rc keyword_hits(cm_engine *e, const char *query, int limit, bool fallback,
                          typo_memo *typo, fts_hits *hits, buf *match, buf *weights, char *err,
                          size_t errlen)
{
    size_t ntok = 0;
    query_expand_fn x = e->st.trigram ? expand_trigram : NULL;
    expand_ctx xc = {&e->st, err, errlen};
    variant_ctx vc = {NULL,
                      {VARIANT_MORPH_MIN_COS, 0, 1.0f, VARIANT_AMONG},
                      VARIANT_MORPH_WEIGHT,
                      0,
                      NULL,
                      NULL,
                      NULL,
                      NULL,
                      typo};
    if (fallback) {
        vc.o.neighbours = FALLBACK_NEIGHBOURS;
        vc.w_near = FALLBACK_NEIGHBOUR_WEIGHT;
        vc.o.min_cos = (float)FALLBACK_NEIGHBOUR_COS;
        vc.o.among = FALLBACK_AMONG;
    }
    /* variants (the model's families, irregular verbs, derivations): not with trigram,
     * nor the PostgreSQL store */
    bool bridge = !e->st.trigram && !e->st.pg;
    if (bridge) vc.m = query_model(e);
    if (vc.m && e->cfg.fts_tokenizer && !strcmp(e->cfg.fts_tokenizer, "porter"))
        vc.porter = e->st.fts; /* the store's, from registering cm_bm25 */
    bool porter = e->cfg.fts_tokenizer && !strcmp(e->cfg.fts_tokenizer, "porter");
    if (bridge) vc.st = &e->st;
    if (bridge && porter) vc.dt = derive_tab(e);
    if (bridge && porter) vc.stem = e->st.fts;
    query_opts o = {e->st.trigram,
                    QUERY_AND,
                    x,
                    &xc,
                    bridge ? model_variants : NULL,
                    &vc,
                    weights,
                    false,
                    !e->st.trigram && !e->st.pg};
    cm_rc rc = cm_query_build_opts(query, strlen(query), &o, match, &ntok);
    if (!rc && fallback) rc = no_coverage(weights);
    /* Too few chunks have every word: rank those with some of them too.
     * The OR query scores every chunk exactly as the AND query did (BM25
     * sums over the words a chunk holds), so its list contains the AND hits
     * at their ranks and only adds to them. The store runs it when the AND
     * query finds too few (PostgreSQL: both in one statement). */
    buf or_match = BUF_INIT, or_weights = BUF_INIT;
    size_t or_ntok = 0;
    bool used_or = false;
    if (!rc && ntok > 1 && e->st.pg) {
        o.join = QUERY_OR;
        o.weights = &or_weights;
        rc = cm_query_build_opts(query, strlen(query), &o, &or_match, &or_ntok);
        if (!rc && fallback) rc = no_coverage(&or_weights);
    }
    if (!rc && match->len)
        rc = cm_store_fts_search_and_or(&e->st, match->data, weights->data,
                                        or_match.len ? or_match.data : NULL, or_weights.data, limit,
                                        hits, &used_or, err, errlen);
    if (!rc && !e->st.pg && !used_or && hits->n < (size_t)limit && ntok > 1) {
        /* SQLite: the OR query built only when it runs */
        cm_fts_hits_release(hits);
        o.join = QUERY_OR;
        o.weights = &or_weights;
        rc = cm_query_build_opts(query, strlen(query), &o, &or_match, &or_ntok);
        if (!rc && fallback) rc = no_coverage(&or_weights);
        if (!rc && or_match.len)
            rc = cm_store_fts_search(&e->st, or_match.data, or_weights.data, limit, hits, err,
                                     errlen);
        used_or = true;
    }
    if (!rc && used_or) { /* the expression that found them, for the passage bonus */
        buf t = *match;
        *match = or_match;
        or_match = t;
        t = *weights;
        *weights = or_weights;
        or_weights = t;
    }
    cm_buf_release(&or_match);
    cm_buf_release(&or_weights);
    return rc;
}

/* The best passage's bonus: a hit among the PASSAGE_TOP best keyword hits
 * gains PASSAGE_BETA BM25 units × the share of the query's terms that its
 * best line holds (passage.h). The figures of docs/QUALITY.md (fourth round):
 * the 20 best, sentences in lines over 400 bytes (abstracts); β 0.85 then,
 * 1.0 since issue 30's round 8 (0.9-1.1 level, SciFact the same). */
#define PASSAGE_BETA          1.0
#define PASSAGE_TOP           20
#define PASSAGE_SENTENCE_OVER 400

/* The BM25 scores of hits (positive, higher is better) into s, with the
 * passage bonus; not with trigram, whose terms match inside words. */
static void keyword_scores(const cm_engine *e, const fts_hits *hits, const char *match,
                           const char *weights, double *s)
{
    for (size_t i = 0; i < hits->n; i++)
        s[i] = -hits->v[i].rank;
    passage_terms t;
    if (e->st.trigram || cm_rank_passage_groups(match, weights, &t) < 2) return;
    for (size_t i = 0; i < hits->n && i < PASSAGE_TOP; i++)
        s[i] += PASSAGE_BETA * cm_rank_passage_best(hits->v[i].text, &t, PASSAGE_SENTENCE_OVER);
}

/* Dates in the question (when.h): daily notes and session chunks of the
 * days it names gain WHEN_BONUS BM25 units when the keywords found them, and
 * enter with WHEN_BASE units (a score of 0.75) when they did not, at most
 * WHEN_MAX_CHUNKS of them, while the keyword hits of other days keep
 * WHEN_OUTSIDE of their units, so "what did I decide last Tuesday" finds
 * Tuesday's note first; a date that names no note or session leaves the query as
 * it was. */
#define WHEN_BONUS      3.0
#define WHEN_BASE       3.0
#define WHEN_OUTSIDE    0.5
#define WHEN_MAX_CHUNKS 200
#define WHEN_MAX_DAYS   400

/* A question that asks when ("when is Maya coming"): of the ASK_TOP best
 * keyword hits, those that speak of a time outside their headings (a
 * weekday, a date, 6pm, "last week": when.h) gain ASK_BONUS BM25 units. */
#define ASK_BONUS 1.0
#define ASK_TOP   20

/* Local midnight of a day number, in unix seconds. */
static int64_t local_midnight(int64_t day)
{
    int y, m, d;
    cm_when_civil(day, &y, &m, &d);
    struct tm tm = {0};
    tm.tm_year = y - 1900;
    tm.tm_mon = m - 1;
    tm.tm_mday = d;
    tm.tm_isdst = -1;
    time_t t = mktime(&tm);
    return t == (time_t)-1 ? day * 86400 : (int64_t)t;
}

/* The local day of unix time t. */
static int64_t local_day(int64_t t)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (!localtime_r(&tt, &tm)) return t / 86400;
    return cm_when_day(tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

/* The day a chunk is of: a daily note's date, a session chunk's local day
 * (mtime_ns holds its update time); INT64_MIN for anything else. */
static int64_t chunk_day(const char *path, const char *source, int64_t mtime_ns)
{
    int y, m, d;
    if (cm_discover_daily_date(path, &y, &m, &d)) return cm_when_day(y, m, d);
    if (source && strcmp(source, "sessions") == 0) return local_day(mtime_ns / 1000000000);
    return INT64_MIN;
}

/* The chunks of the days of r (daily notes and sessions) into *out. */
static cm_rc dated_chunks(cm_engine *e, when_range r, fts_hits *out, char *err, size_t errlen)
{
    char from[32], to[32];
    int y, m, d;
    if (r.last - r.first > WHEN_MAX_DAYS) r.first = r.last - WHEN_MAX_DAYS;
    cm_when_civil(r.first, &y, &m, &d);
    snprintf(from, sizeof from, "memory/%04d-%02d-%02d", y, m, d);
    cm_when_civil(r.last + 1, &y, &m, &d);
    snprintf(to, sizeof to, "memory/%04d-%02d-%02d", y, m, d);
    return cm_store_chunks_dated(&e->st, from, to, local_midnight(r.first),
                                 local_midnight(r.last + 1), WHEN_MAX_CHUNKS, out, err, errlen);
}

/* Adds the dated chunks the keywords did not find to hits (rank 0). */
static cm_rc add_dated(fts_hits *hits, fts_hits *dated)
{
    for (size_t i = 0; i < dated->n; i++) {
        bool seen = false;
        for (size_t j = 0; j < hits->n && !seen; j++)
            seen = hits->v[j].id == dated->v[i].id;
        if (seen) continue;
        if (hits->n == hits->cap) {
            size_t cap = hits->cap ? hits->cap * 2 : 16;
            fts_hit *nv = realloc(hits->v, cap * sizeof *nv);
            if (!nv) return CM_ENOMEM;
            hits->v = nv;
            hits->cap = cap;
        }
        hits->v[hits->n++] = dated->v[i];
        memset(&dated->v[i], 0, sizeof dated->v[i]); /* moved */
    }
    return CM_OK;
}

/* Loads the vectors of the open index when they are not loaded; when
 * another connection committed since (PRAGMA data_version) or this engine's
 * own sync changed vectors, applies the vector log's k changes to the loaded
 * index instead of reloading it (a reload only when the log cannot say). */
static cm_rc ensure_vectors(cm_engine *e, char *err, size_t errlen)
{
    int64_t version = cm_store_data_version(&e->st);
    if (e->vx_loaded && version == e->vx_version && !e->vx_stale) return CM_OK;
    char *dims = NULL;
    cm_rc rc = cm_store_meta_get(&e->st, VECTOR_DIMS_KEY, &dims, err, errlen);
    int d = dims ? (int)strtol(dims, NULL, 10) : 0;
    free(dims);
    if (e->owner && !engine_pg(e)) { /* a shared engine's view: the pool's snapshot */
        if (!rc && d > 0) {
            if (!e->prov.dims) e->prov.dims = d;
            rc = cm_engine_share_vectors(e, d, err, errlen);
        } else {
            cm_engine_drop_vectors(e);
        }
        if (!rc) {
            e->vx_version = version;
            e->vx_stale = false;
        }
        return rc;
    }
    if (!rc && d > 0 && e->vx_loaded && (int)e->vx.dims == d) {
        bool reload = false;
        rc = cm_store_vectors_update(&e->st, d, &e->vx, &e->vx_seq, &reload, err, errlen);
        if (!rc && !reload) {
            e->vx_version = version;
            e->vx_stale = false;
            e->vx_updates++;
            return CM_OK;
        }
        if (rc == CM_ENOMEM) return rc; /* else a reload serves */
        rc = CM_OK;
    }
    cm_engine_drop_vectors(e);
    if (rc || d <= 0) return rc; /* nothing embedded yet */
    if (!e->prov.dims) e->prov.dims = d;
    if ((rc = cm_store_vectors_load(&e->st, d, &e->vx, &e->vx_seq, err, errlen))) return rc;
    e->vx_loads++;
    e->vx_loaded = true;
    e->vx_version = version;
    e->vx_stale = false;
    return CM_OK;
}

/* Appends the vector side's candidates to *v (n, cap): the k chunks nearest
 * the query. Returns false when there is no vector side for this query
 * (no provider, no vectors yet, the query embedding failed or was zero). */
static bool vector_hits(cm_engine *e, const char *query, int k, search_hit **v, size_t *n,
                        size_t *cap)
{
    cm_engine_provider_ready(e, false, NULL, NULL);
    if (!e->have_prov || (e->prov.kind == EMBED_LOCAL && !e->prov.lm)) return false;
    char msg[512];
    float *q = NULL;
    vec_hit *hits = NULL;
    bool ok = false;
    if (ensure_vectors(e, msg, sizeof msg) || !e->vx_loaded || !e->vx.n) goto out;
    if (cm_embed_query(&e->prov, query, &q, msg, sizeof msg) != CM_OK) {
        snprintf(e->last_error, sizeof e->last_error, "%s", msg);
        cm_logf(&e->lg, CM_LOG_WARN, "%s; searching keywords only", msg);
        goto out;
    }
    if (e->prov.dims != (int)e->vx.dims || !cm_vec_normalise(q, e->vx.dims))
        goto out; /* zero: keywords only */
    if (!(hits = malloc((size_t)k * sizeof *hits))) goto out;
    size_t nh = cm_vec_search_auto(&e->vx, cm_vec_kernels_best(), q, (size_t)k, ~0u, hits);
    for (size_t i = 0; i < nh; i++) {
        fts_hit h;
        if (cm_store_chunk_get(&e->st, hits[i].id, &h, msg, sizeof msg) != CM_OK) continue;
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 64;
            search_hit *nv = realloc(*v, nc * sizeof *nv);
            if (!nv) {
                free(h.path);
                free(h.source);
                free(h.text);
                break;
            }
            *v = nv;
            *cap = nc;
        }
        (*v)[(*n)++] = (search_hit){
            h.id,       h.path,     h.source, h.text, h.start_line,
            h.end_line, h.mtime_ns, 0,        0,      CM_MAX(0.0, (double)hits[i].score),
            false,      true};
    }
    ok = true;
out:
    free(q);
    free(hits);
    return ok;
}

/* The head facts of a payload: the effective provider and why a fallback serves. */
static cm_rc set_head(cm_engine *e, engine_result *r)
{
    snprintf(r->provider, sizeof r->provider, "%s", e->provider);
    snprintf(r->model, sizeof r->model, "%s", e->model);
    if (e->provider_note && !(r->fallback = cm_strdup(e->provider_note))) return CM_ENOMEM;
    return CM_OK;
}

/* A search that could not run: why. */
static cm_rc set_error(engine_result *r, const char *why)
{
    return (r->error = cm_strdup(why)) ? CM_OK : CM_ENOMEM;
}

/* What one ranking pass reads besides the engine. */
typedef struct search_pass {
    const char *query;
    int max_results;
    double min_score;
    int64_t now;      /* the search's clock, unix seconds */
    int64_t opts_now; /* opts->now as given (0: decay reads the clock) */
    bool fallback;    /* the weak-result fallback: nearest words, no vector side */
    typo_memo *typo;  /* kept across the search's passes */
} search_pass;

/* One pass: the keyword hits (with the dated chunks of a question about a
 * time), the vector side when there is one, merged and ranked into *out
 * (*n hits). A failed keyword query leaves *why set and no hits. */
static cm_rc ranked(cm_engine *e, const search_pass *p, search_hit **out, size_t *nout, char *why,
                    size_t whylen)
{
    cm_rc rc = CM_OK;
    const cm_config *c = &e->cfg;
    fts_hits hits = {0}, dhits = {0};
    buf match = BUF_INIT, weights = BUF_INIT;
    char *rest = NULL;
    double *bm = NULL;
    search_hit *v = NULL;
    size_t n = 0, qlen = strlen(p->query);
    int cand = cm_config_candidates(c, p->max_results);
    /* a date in the question: its words are no keywords when it names notes */
    when_range wr = {0, -1};
    if (!(rest = malloc(qlen + 1))) CHECK(CM_ENOMEM);
    bool dated = cm_when_find(p->query, qlen, local_day(p->now), rest, &wr);
    if (dated) rc = dated_chunks(e, wr, &dhits, why, whylen);
    dated = dated && !rc && dhits.n;
    if (!rc && (!dated || cm_query_has_keyword(rest, qlen)))
        rc = keyword_hits(e, dated ? rest : p->query, cand, p->fallback, p->typo, &hits, &match,
                          &weights, why, whylen);
    if (!rc && dated) rc = add_dated(&hits, &dhits);
    if (rc) goto out;
    size_t cap = hits.n;
    if (hits.n && !(v = calloc(hits.n, sizeof *v))) CHECK(CM_ENOMEM);
    if (hits.n && !(bm = malloc(hits.n * sizeof *bm))) CHECK(CM_ENOMEM);
    keyword_scores(e, &hits, match.data, weights.data, bm);
    for (size_t i = 0; dated && i < hits.n; i++) {
        int64_t day = chunk_day(hits.v[i].path, hits.v[i].source, hits.v[i].mtime_ns);
        if (day >= wr.first && day <= wr.last)
            bm[i] += hits.v[i].rank < 0 ? WHEN_BONUS : WHEN_BASE;
        else
            bm[i] *= WHEN_OUTSIDE;
    }
    if (cm_when_asks(p->query, qlen)) {
        for (size_t i = 0; i < hits.n && i < ASK_TOP; i++)
            if (cm_when_mentions(hits.v[i].text, strlen(hits.v[i].text))) bm[i] += ASK_BONUS;
    }
    for (size_t i = 0; i < hits.n; i++) {
        fts_hit *h = &hits.v[i];
        v[i] = (search_hit){h->id,       h->path, h->source, h->text, h->start_line, h->end_line,
                            h->mtime_ns, 0,       0,         0,       true,          false};
        h->path = h->source = h->text = NULL; /* moved */
        v[i].text_score = cm_rank_bm25_score(-bm[i]);
        v[i].score = v[i].text_score; /* keyword-only: the text score is the score */
    }
    n = hits.n;
    /* Hybrid: the vector side's candidates, merged by chunk id with the
     * normalised weights; without hybrid, the vector side alone. */
    if (!p->fallback && vector_hits(e, p->query, cand, &v, &n, &cap)) {
        if (!c->hybrid_enabled) {
            size_t w = 0;
            for (size_t i = 0; i < n; i++) {
                if (v[i].has_vector)
                    v[w++] = v[i];
                else
                    cm_search_hit_release(&v[i]);
            }
            n = w;
            n = cm_rank_merge(v, n, 1.0, 0.0);
        } else {
            n = c->hybrid_merge == CM_MERGE_MINMAX
                    ? cm_rank_merge_minmax(v, n, c->vector_weight, c->text_weight)
                : c->hybrid_merge == CM_MERGE_RRF
                    ? cm_rank_merge_rrf(v, n, RANK_RRF_K, c->vector_weight, c->text_weight)
                    : cm_rank_merge(v, n, c->vector_weight, c->text_weight);
        }
    }
    rank_opts ro = {c->text_weight,    p->min_score, p->max_results, c->decay_enabled,
                    c->half_life_days, p->opts_now,  c->mmr_enabled, c->mmr_lambda};
    n = cm_rank_finish(v, n, &ro);
    *out = v; /* moved */
    *nout = n;
    v = NULL;
    n = 0;
out:
    for (size_t i = 0; v && i < n; i++)
        cm_search_hit_release(&v[i]);
    free(v);
    cm_fts_hits_release(&hits);
    cm_fts_hits_release(&dhits);
    cm_buf_release(&match);
    cm_buf_release(&weights);
    free(rest);
    free(bm);
    return rc;
}

cm_rc cm_builtin_search(cm_engine *e, const char *query, const cm_search_opts *opts,
                        const char *session_key, engine_result *out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    char msg[512] = "";
    (void)session_key; /* the payload's citations: the caller's */
    memset(out, 0, sizeof *out);
    if (!query) query = "";
    const cm_config *c = &e->cfg;
    typo_memo typo = {0};
    cm_engine_provider_ready(e, false, NULL,
                             NULL); /* the fallback, when the local model cannot serve */
    CHECK(set_head(e, out));
    search_pass p = {query,
                     opts && opts->max_results > 0 ? opts->max_results : c->max_results,
                     opts && opts->min_score >= 0 ? opts->min_score : c->min_score,
                     opts && opts->now ? opts->now : (int64_t)time(NULL),
                     opts ? opts->now : 0,
                     false,
                     &typo};
    if (!c->enabled) {
        CHECK(set_error(out, "memory search is disabled (memorySearch.enabled is false)"));
        goto out;
    }
    if (cm_engine_workspace_exists(e, msg, sizeof msg)) {
        CHECK(set_error(out, msg));
        goto out;
    }
    rc = cm_engine_ensure_store(e, msg, sizeof msg);
    if (rc == CM_ENOTFOUND) { /* nothing indexed yet */
        rc = CM_OK;
        goto out;
    }
    if (!rc && cm_engine_index_workspace_matches(e, true, msg, sizeof msg) == CM_ENOTFOUND) {
        rc = CM_OK;
        CHECK(set_error(out, msg));
        goto out;
    }
    if (!rc) rc = ranked(e, &p, &out->v, &out->n, msg, sizeof msg);
    /* The weak-result fallback: keywords alone found nothing above
     * minScore, no embedding provider serves, the static model is at hand:
     * the keywords' nearest words in its vectors join the query. */
    if (!rc && !out->n && !e->have_prov && !e->st.trigram && !e->st.pg && query_model(e)) {
        free(out->v);
        out->v = NULL;
        p.fallback = true;
        rc = ranked(e, &p, &out->v, &out->n, msg, sizeof msg);
        if (!rc && out->n) out->mode = "static-fallback";
    }
    if (rc == CM_ENOMEM) CHECK(rc);
    if (rc) {
        rc = CM_OK;
        CHECK(set_error(out, msg));
    }
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    return rc;
}
