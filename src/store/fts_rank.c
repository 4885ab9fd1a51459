/*
 * fts_rank.c — cm_bm25(), see fts_rank.h. Per query, the IDF of each phrase
 * and the average row length are computed once (xQueryPhrase over the
 * phrase's rows) and kept as auxiliary data; per row, term frequencies come
 * from the instance list. Given the query's LIMIT (cm_bm25(k)), it keeps the
 * k best scores seen so far and skips a row's length lookup (a B-tree seek,
 * a third of an OR fallback's time) when even a zero-length row could not
 * reach them: that row gets its upper bound instead, below the k-th best
 * score, so the k rows returned and their scores are exact.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fts_rank.h"

#define K1 1.2
#define B  0.75
/* BM25 units a row loses for the share of the query's IDF mass it lacks: a
 * row with every keyword keeps its BM25 score, one with half of them (by IDF)
 * loses 3 (docs/QUALITY.md: 6 did best of 1.5..10 on both datasets; a strict
 * order by coverage did worse on both). */
#define COVERAGE_PENALTY 6.0

typedef struct rank_data {
    int nphrase;
    double avgdl;
    double *idf;  /* per phrase */
    double *freq; /* per phrase, scratch for one row */
    /* cm_bm25(k, 'weights'): per phrase its weight and group (NULL: each
     * phrase its own group, weight 1); a group scores its best member */
    double *w;
    int *grp, ngrp;
    double *gbest, *gcov; /* per group, scratch */
    double coverage;      /* the coverage penalty's share (1; 'c0 …' in the weights: 0) */
    /* the k best scores so far (a min-heap), k from cm_bm25(k); k = 0: none */
    double *best;
    int k, nbest;
} rank_data;

/* Where cm_bm25 asks for the phrases' row counts (its user data). */
typedef struct counts_src {
    cm_fts_counts_fn fn;
    void *ctx;
} counts_src;

static int count_row(const Fts5ExtensionApi *api, Fts5Context *fts, void *ud)
{
    (void)api;
    (void)fts;
    (*(sqlite3_int64 *)ud)++;
    return SQLITE_OK;
}

static void rank_data_free(void *p)
{
    rank_data *d = p;
    if (!d) return;
    free(d->idf);
    free(d->freq);
    free(d->best);
    free(d->w);
    free(d->grp);
    free(d->gbest);
    free(d->gcov);
    free(d);
}

/* Reads the weights "1 1 0.4 0.1/0.9 ..." (one a phrase; 1 opens a group,
 * less joins the group before; "w/a": a member at weight a when no row holds
 * its group's first phrase, the keyword) into d; d->freq holds each phrase's
 * row count. A missing, short or malformed list leaves the rest at weight 1,
 * each its own group. */
static int weights_parse(rank_data *d, const char *spec)
{
    int n = d->nphrase ? d->nphrase : 1;
    d->w = malloc((size_t)n * sizeof *d->w);
    d->grp = malloc((size_t)n * sizeof *d->grp);
    d->gbest = malloc((size_t)n * sizeof *d->gbest);
    d->gcov = malloc((size_t)n * sizeof *d->gcov);
    if (!d->w || !d->grp || !d->gbest || !d->gcov) return SQLITE_NOMEM;
    const char *c = spec;
    if (*c == 'c') { /* "c<share> ...": the coverage penalty's share, 0..1 */
        char *end = NULL;
        double x = strtod(c + 1, &end);
        if (end != c + 1 && x >= 0 && x <= 1) d->coverage = x;
        c = end != c + 1 ? end : c + 1;
    }
    d->ngrp = 0;
    int first = 0; /* the group's first phrase */
    for (int i = 0; i < d->nphrase; i++) {
        char *end = NULL;
        double x = c && *c ? strtod(c, &end) : 1.0, a = 0;
        if (end && end != c && *end == '/') {
            const char *at = end + 1;
            a = strtod(at, &end);
            if (end == at) end = NULL;
        }
        if (!end || end == c || !(x > 0 && x <= 1)) {
            x = 1.0;
            a = 0;
            c = NULL; /* malformed: the rest are plain */
        } else {
            c = end;
        }
        if (x >= 1 || !d->ngrp) {
            d->ngrp++;
            first = i;
        }
        d->w[i] = a > x && a < 1 && d->freq[first] <= 0 ? a : x;
        d->grp[i] = d->ngrp - 1;
    }
    return SQLITE_OK;
}

/* The row counts the caller read for the phrases (term_rows.h: one item a
 * phrase, a count or '-') into n (-1: count them here); none unless the
 * items are as many as the phrases and each counted one is a phrase of one
 * token, so that a list that does not line up with FTS5's phrases is not
 * used. */
static void given_counts(const Fts5ExtensionApi *api, Fts5Context *fts, const char *c, int nphrase,
                         sqlite3_int64 *n)
{
    int i = 0;
    for (; c && i < nphrase; i++) {
        while (*c == ' ')
            c++;
        n[i] = -1;
        if (*c == '-') {
            c++;
        } else {
            char *end = NULL;
            long long v = strtoll(c, &end, 10);
            if (end == c || v < 0 || api->xPhraseSize(fts, i) != 1) break;
            n[i] = v;
            c = end;
        }
        if (*c != ' ' && *c != '\0') break;
    }
    while (c && *c == ' ')
        c++;
    if (!c || i < nphrase || *c)
        for (i = 0; i < nphrase; i++)
            n[i] = -1;
}

static int rank_data_get(const Fts5ExtensionApi *api, Fts5Context *fts, int k, const char *spec,
                         const char *match, rank_data **out)
{
    rank_data *d = api->xGetAuxdata(fts, 0);
    if (d) {
        *out = d;
        return SQLITE_OK;
    }
    d = calloc(1, sizeof *d);
    if (!d) return SQLITE_NOMEM;
    d->nphrase = api->xPhraseCount(fts);
    d->idf = calloc((size_t)(d->nphrase ? d->nphrase : 1), sizeof *d->idf);
    d->freq = calloc((size_t)(d->nphrase ? d->nphrase : 1), sizeof *d->freq);
    d->k = k > 0 && k <= FTS_RANK_MAX_K ? k : 0;
    d->coverage = 1.0;
    d->best = d->k ? malloc((size_t)d->k * sizeof *d->best) : NULL;
    sqlite3_int64 nrow = 0, ntok = 0;
    int rc =
        (!d->idf || !d->freq || (d->k && !d->best)) ? SQLITE_NOMEM : api->xRowCount(fts, &nrow);
    if (rc == SQLITE_OK) rc = api->xColumnTotalSize(fts, -1, &ntok);
    d->avgdl = nrow > 0 ? (double)ntok / (double)nrow : 1.0;
    if (d->avgdl <= 0) d->avgdl = 1.0;
    sqlite3_int64 *given = NULL; /* the counts read from term_rows */
    const counts_src *src = api->xUserData(fts);
    const char *counts =
        rc == SQLITE_OK && match && d->nphrase && src && src->fn ? src->fn(src->ctx, match) : NULL;
    if (counts) {
        if (!(given = malloc((size_t)d->nphrase * sizeof *given)))
            rc = SQLITE_NOMEM;
        else
            given_counts(api, fts, counts, d->nphrase, given);
    }
    for (int i = 0; rc == SQLITE_OK && i < d->nphrase; i++) {
        sqlite3_int64 n = given ? given[i] : -1;
        if (n < 0) {
            n = 0;
            rc = api->xQueryPhrase(fts, i, &n, count_row);
        }
        double N = (double)(nrow > FTS_RANK_MIN_ROWS ? nrow : FTS_RANK_MIN_ROWS);
        d->idf[i] = fmax(FTS_RANK_IDF_FLOOR, log((N - (double)n + 0.5) / ((double)n + 0.5)));
        d->freq[i] = (double)n; /* for weights_parse; scratch of a row after */
    }
    free(given);
    if (rc == SQLITE_OK && spec) rc = weights_parse(d, spec);
    if (rc == SQLITE_OK) rc = api->xSetAuxdata(fts, d, rank_data_free);
    if (rc != SQLITE_OK) {
        rank_data_free(d);
        return rc;
    }
    *out = d;
    return SQLITE_OK;
}

/* Adds score to the heap of the k best when it belongs there. */
static void best_add(rank_data *d, double score)
{
    double *h = d->best;
    int i;
    if (d->nbest < d->k) {
        i = d->nbest++;
        while (i > 0 && h[(i - 1) / 2] > score) { /* sift up */
            h[i] = h[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        h[i] = score;
        return;
    }
    if (score <= h[0]) return;
    i = 0; /* replace the minimum, sift down */
    for (;;) {
        int c = 2 * i + 1;
        if (c >= d->k) break;
        if (c + 1 < d->k && h[c + 1] < h[c]) c++;
        if (h[c] >= score) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = score;
}

/* What the coverage rule leaves of a row's BM25 sum s (have, all: its and the
 * query's IDF mass); kept above 0, a thousandth of BM25 at least: rank 0
 * would map to 1. Monotonic in s. */
static double covered(const rank_data *d, double s, double have, double all)
{
    double pen = COVERAGE_PENALTY * d->coverage;
    if (all > 0 && have < all) return fmax(s - pen * (1.0 - have / all), s * 1e-3);
    return s;
}

/* A row's BM25 sum (over the phrases, or with weights over the groups, each
 * scoring its best member at the member's weight) and its coverage: *have
 * and *all, the IDF mass it holds and the query's (a group's, its first
 * phrase's IDF; a group held by a variant only counts whole: the variant's
 * weight acts on its BM25 term only). norm: k1 (1 − b + b·dl/avgdl). */
static double row_score(const rank_data *d, double norm, double *have, double *all)
{
    double score = 0;
    *have = *all = 0;
    if (!d->w) {
        for (int i = 0; i < d->nphrase; i++) {
            double tf = d->freq[i];
            *all += d->idf[i];
            if (tf > 0) {
                score += d->idf[i] * tf * (K1 + 1.0) / (tf + norm);
                *have += d->idf[i];
            }
        }
        return score;
    }
    for (int g = 0; g < d->ngrp; g++)
        d->gbest[g] = d->gcov[g] = 0;
    for (int i = 0; i < d->nphrase; i++) {
        double tf = d->freq[i];
        int g = d->grp[i];
        if (i == 0 || g != d->grp[i - 1]) *all += d->idf[i];
        if (tf <= 0) continue;
        double s = d->w[i] * d->idf[i] * tf * (K1 + 1.0) / (tf + norm);
        if (s > d->gbest[g]) d->gbest[g] = s;
        d->gcov[g] = 1.0; /* the group's concept is there */
    }
    for (int i = 0; i < d->nphrase; i++) {
        int g = d->grp[i];
        if (i == 0 || g != d->grp[i - 1]) {
            score += d->gbest[g];
            *have += d->idf[i] * d->gcov[g];
        }
    }
    return score;
}

static void cm_bm25(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int argc,
                    sqlite3_value **argv)
{
    rank_data *d = NULL;
    int k = argc > 0 ? sqlite3_value_int(argv[0]) : 0;
    const char *spec = argc > 1 ? (const char *)sqlite3_value_text(argv[1]) : NULL;
    const char *match = argc > 2 ? (const char *)sqlite3_value_text(argv[2]) : NULL;
    int rc = rank_data_get(api, fts, k, spec && *spec ? spec : NULL, match, &d);
    int ninst = 0, dl = 0;
    if (rc == SQLITE_OK) rc = api->xInstCount(fts, &ninst);
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(ctx, rc);
        return;
    }
    memset(d->freq, 0, (size_t)d->nphrase * sizeof *d->freq);
    for (int i = 0; i < ninst; i++) {
        int phrase, col, off;
        if (api->xInst(fts, i, &phrase, &col, &off) == SQLITE_OK && phrase >= 0 &&
            phrase < d->nphrase)
            d->freq[phrase] += 1.0;
    }
    double have = 0, all = 0;
    if (d->k && d->nbest == d->k) {
        /* the bound: the row at the length floor (norm at its least) */
        double ub = row_score(d, K1 * (1.0 - B + B * FTS_RANK_LENGTH_FLOOR), &have, &all);
        ub = covered(d, ub, have, all);
        if (ub < d->best[0]) {
            sqlite3_result_double(ctx, -ub);
            return;
        }
    }
    rc = api->xColumnSize(fts, -1, &dl);
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(ctx, rc);
        return;
    }
    double norm = K1 * (1.0 - B + B * fmax((double)dl / d->avgdl, FTS_RANK_LENGTH_FLOOR));
    double score = row_score(d, norm, &have, &all);
    score = covered(d, score, have, all);
    if (d->k) best_add(d, score);
    sqlite3_result_double(ctx, -score);
}

int cm_fts_rank_register(sqlite3 *db, fts5_api **out, cm_fts_counts_fn counts, void *ctx)
{
    fts5_api *api = cm_fts_api(db);
    *out = api;
    if (!api || api->iVersion < 2) return SQLITE_ERROR;
    counts_src *src = sqlite3_malloc(sizeof *src);
    if (!src) return SQLITE_NOMEM;
    src->fn = counts;
    src->ctx = ctx;
    return api->xCreateFunction(api, "cm_bm25", src, cm_bm25, sqlite3_free);
}

/* ---- the porter stems of words (for the query's variants) ------------------ */

typedef struct stem_out {
    char *out;
    size_t cap, len;
} stem_out;

static int stem_token(void *ctx, int flags, const char *tok, int n, int start, int end)
{
    (void)flags;
    (void)start;
    (void)end;
    stem_out *o = ctx;
    size_t need = (size_t)n + (o->len ? 1 : 0);
    if (n < 0 || o->len + need + 1 > o->cap) return SQLITE_OK; /* cut: no more room */
    if (o->len) o->out[o->len++] = ' ';
    memcpy(o->out + o->len, tok, (size_t)n);
    o->len += (size_t)n;
    o->out[o->len] = '\0';
    return SQLITE_OK;
}

fts5_api *cm_fts_api(sqlite3 *db)
{
    fts5_api *api = NULL;
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &q, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_pointer(q, 1, (void *)&api, "fts5_api_ptr", NULL);
        rc = sqlite3_step(q);
    }
    sqlite3_finalize(q);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? api : NULL;
}

int cm_fts_stem(fts5_api *api, const char *text, int n, char *out, size_t cap)
{
    if (!cap || !api) return SQLITE_MISUSE;
    out[0] = '\0';
    int rc;
    void *ud = NULL;
    fts5_tokenizer t;
    Fts5Tokenizer *tok = NULL;
    rc = api->xFindTokenizer(api, "porter", &ud, &t);
    if (rc == SQLITE_OK) rc = t.xCreate(ud, NULL, 0, &tok);
    if (rc != SQLITE_OK) return rc;
    stem_out o = {out, cap, 0};
    rc = t.xTokenize(tok, &o, FTS5_TOKENIZE_QUERY, text, n, stem_token);
    t.xDelete(tok);
    return rc;
}
