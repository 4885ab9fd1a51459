/*
 * rank.c — decay, MMR and the final filter (see rank.h). MMR is O(k²) over the
 * candidate pool (at most 200), with each hit's token set built once.
 */
#include <math.h>
#include <time.h>

#include "../base/utf8.h"
#include "../index/discover.h"
#include "rank.h"

double cm_rank_bm25_score(double rank)
{
    if (!isfinite(rank)) return 0;
    if (rank >= 0) return 1.0 / (1.0 + rank);
    double r = -rank;
    return r / (1.0 + r);
}

static int64_t days_from_civil(int y, int m, int d)
{
    /* Howard Hinnant's algorithm: days since 1970-01-01 in the proleptic Gregorian calendar. */
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

double cm_rank_decay_multiplier(const char *path, int64_t mtime_ns, int64_t now,
                                double half_life_days)
{
    int y, m, d;
    double age_days;
    if (cm_discover_daily_date(path, &y, &m, &d)) {
        age_days = (double)(now - days_from_civil(y, m, d) * 86400) / 86400.0;
    } else if (strcmp(path, "MEMORY.md") == 0 || strcmp(path, "memory.md") == 0 ||
               strncmp(path, "memory/", 7) == 0) {
        return 1.0;
    } else {
        age_days = ((double)now - (double)mtime_ns / 1e9) / 86400.0;
    }
    if (age_days <= 0 || half_life_days <= 0) return 1.0;
    return exp(-M_LN2 / half_life_days * age_days);
}

/* A sorted set of 64-bit token hashes. */
typedef struct tokset {
    uint64_t *v;
    size_t n;
} tokset;

static uint64_t fnv(const char *s, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static cm_rc tokset_build(const char *s, tokset *out)
{
    size_t n = strlen(s), cap = 64;
    out->n = 0;
    out->v = malloc(cap * sizeof *out->v);
    if (!out->v) return CM_ENOMEM;
    size_t i = 0;
    size_t prev_cjk_at = 0, prev_cjk_len = 0; /* previous CJK character, for bigrams */
    while (i < n) {
        int32_t cp;
        size_t l = cm_utf8_decode(s + i, n - i, &cp);
        if (out->n + 2 >= cap) {
            cap *= 2;
            uint64_t *nv = realloc(out->v, cap * sizeof *nv);
            if (!nv) return CM_ENOMEM;
            out->v = nv;
        }
        if (cm_utf8_is_cjk(cp)) {
            out->v[out->n++] = fnv(s + i, l, 0xcbf29ce484222325ull);
            if (prev_cjk_len && prev_cjk_at + prev_cjk_len == i)
                out->v[out->n++] = fnv(s + prev_cjk_at, prev_cjk_len + l, 0xcbf29ce484222325ull);
            prev_cjk_at = i;
            prev_cjk_len = l;
            i += l;
        } else if (cm_utf8_is_word(cp)) {
            uint64_t h = 0xcbf29ce484222325ull;
            while (i < n) {
                l = cm_utf8_decode(s + i, n - i, &cp);
                /* "192.168.10.2" and "2.2.1" stay one token: a '.' between digits */
                if (cp == '.' && i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9' && i + 1 < n &&
                    s[i + 1] >= '0' && s[i + 1] <= '9') {
                    h = fnv(".", 1, h);
                    i++;
                    continue;
                }
                if (!cm_utf8_is_word(cp) || cm_utf8_is_cjk(cp)) break;
                if (cp < 0x80) {
                    char c = (char)utf8_lower(cp);
                    h = fnv(&c, 1, h);
                } else {
                    h = fnv(s + i, l, h);
                }
                i += l;
            }
            out->v[out->n++] = h ^ 1; /* keep words apart from CJK unigrams */
        } else {
            i += l;
        }
    }
    qsort(out->v, out->n, sizeof *out->v, cmp_u64);
    size_t w = 0;
    for (size_t k = 0; k < out->n; k++)
        if (w == 0 || out->v[w - 1] != out->v[k]) out->v[w++] = out->v[k];
    out->n = w;
    return CM_OK;
}

static double tokset_jaccard(const tokset *a, const tokset *b)
{
    if (a->n == 0 && b->n == 0) return 1.0;
    if (a->n == 0 || b->n == 0) return 0.0;
    size_t i = 0, j = 0, inter = 0;
    while (i < a->n && j < b->n) {
        if (a->v[i] == b->v[j])
            inter++, i++, j++;
        else if (a->v[i] < b->v[j])
            i++;
        else
            j++;
    }
    return (double)inter / (double)(a->n + b->n - inter);
}

double cm_rank_jaccard(const char *a, const char *b)
{
    tokset ta = {0}, tb = {0};
    double r = 0;
    if (!tokset_build(a, &ta) && !tokset_build(b, &tb)) r = tokset_jaccard(&ta, &tb);
    free(ta.v);
    free(tb.v);
    return r;
}

cm_rc cm_rank_mmr(search_hit *v, size_t n, double lambda)
{
    if (n <= 1) return CM_OK;
    if (lambda < 0) lambda = 0;
    if (lambda > 1) lambda = 1;
    cm_rc rc = CM_OK;
    tokset *sets = calloc(n, sizeof *sets);
    search_hit *picked = malloc(n * sizeof *picked);
    bool *used = calloc(n, sizeof *used);
    size_t *order = malloc(n * sizeof *order);
    double *maxsim = calloc(n, sizeof *maxsim);
    if (!sets || !picked || !used || !order || !maxsim) CHECK(CM_ENOMEM);
    for (size_t i = 0; i < n; i++)
        CHECK(tokset_build(v[i].text ? v[i].text : "", &sets[i]));
    for (size_t k = 0; k < n; k++) {
        size_t best = n;
        double best_val = -INFINITY;
        for (size_t i = 0; i < n; i++) {
            if (used[i]) continue;
            double val = lambda * v[i].score - (1 - lambda) * maxsim[i];
            if (val > best_val || (val == best_val && best < n && v[i].score > v[best].score)) {
                best_val = val;
                best = i;
            }
        }
        used[best] = true;
        order[k] = best;
        /* Similarity to the selected set only grows: update incrementally. */
        for (size_t i = 0; i < n; i++)
            if (!used[i]) maxsim[i] = CM_MAX(maxsim[i], tokset_jaccard(&sets[i], &sets[best]));
    }
    for (size_t k = 0; k < n; k++)
        picked[k] = v[order[k]];
    memcpy(v, picked, n * sizeof *v);
out:
    for (size_t i = 0; sets && i < n; i++)
        free(sets[i].v);
    free(sets);
    free(picked);
    free(used);
    free(order);
    free(maxsim);
    return rc;
}

static int by_id(const void *a, const void *b)
{
    const search_hit *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

size_t cm_rank_merge(search_hit *v, size_t n, double vector_weight, double text_weight)
{
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, by_id);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w && v[w - 1].id == v[i].id) {
            search_hit *d = &v[w - 1];
            if (v[i].has_text) {
                d->has_text = true;
                d->text_score = v[i].text_score;
            }
            if (v[i].has_vector) {
                d->has_vector = true;
                d->vector_score = v[i].vector_score;
            }
            cm_search_hit_release(&v[i]);
            continue;
        }
        if (w != i) v[w] = v[i];
        w++;
    }
    for (size_t i = 0; i < w; i++)
        v[i].score = vector_weight * (v[i].has_vector ? v[i].vector_score : 0) +
                     text_weight * (v[i].has_text ? v[i].text_score : 0);
    memset(v + w, 0, (n - w) * sizeof *v);
    return w;
}

size_t cm_rank_merge_rrf(search_hit *v, size_t n, int k, double vector_weight, double text_weight)
{
    if (n == 0) return 0;
    /* Ranks from the order of arrival: each side's list is in rank order. */
    int nt = 0, nv = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].has_text) v[i].text_score = 1.0 / (k + ++nt);
        if (v[i].has_vector) v[i].vector_score = 1.0 / (k + ++nv);
    }
    size_t w = cm_rank_merge(v, n, vector_weight, text_weight);
    for (size_t i = 0; i < w; i++)
        v[i].score *= (double)(k + 1);
    return w;
}

size_t cm_rank_merge_minmax(search_hit *v, size_t n, double vector_weight, double text_weight)
{
    size_t w = cm_rank_merge(v, n, vector_weight, text_weight);
    double tlo = INFINITY, thi = -INFINITY, vlo = INFINITY, vhi = -INFINITY;
    for (size_t i = 0; i < w; i++) {
        if (v[i].has_text) tlo = fmin(tlo, v[i].text_score), thi = fmax(thi, v[i].text_score);
        if (v[i].has_vector) vlo = fmin(vlo, v[i].vector_score), vhi = fmax(vhi, v[i].vector_score);
    }
    for (size_t i = 0; i < w; i++) {
        double t = !v[i].has_text ? 0 : thi > tlo ? (v[i].text_score - tlo) / (thi - tlo) : 1;
        double x = !v[i].has_vector ? 0 : vhi > vlo ? (v[i].vector_score - vlo) / (vhi - vlo) : 1;
        v[i].score = vector_weight * x + text_weight * t;
    }
    return w;
}

static int by_score(const void *a, const void *b)
{
    const search_hit *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->id != y->id) return x->id < y->id ? -1 : 1; /* stable, deterministic */
    return 0;
}

void cm_search_hit_release(search_hit *h)
{
    free(h->path);
    free(h->source);
    free(h->text);
    memset(h, 0, sizeof *h);
}

/* FNV-1a of a path: the hits of one file share it. */
static uint64_t path_hash(const char *p)
{
    uint64_t h = 14695981039346656037ull;
    for (; p && *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

typedef struct spread_key {
    double key;
    size_t at; /* the position in score order: ties keep it */
} spread_key;

static int by_key(const void *a, const void *b)
{
    const spread_key *x = a, *y = b;
    if (x->key != y->key) return x->key > y->key ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

cm_rc cm_rank_spread_files(search_hit *v, size_t n, double factor)
{
    if (n < 2 || !(factor < 1)) return CM_OK;
    cm_rc rc = CM_OK;
    uint64_t *h = malloc(n * sizeof *h);
    spread_key *k = malloc(n * sizeof *k);
    search_hit *tmp = malloc(n * sizeof *tmp);
    if (!h || !k || !tmp) CHECK(CM_ENOMEM);
    for (size_t i = 0; i < n; i++) {
        h[i] = path_hash(v[i].path);
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = h[j] == h[i] && v[j].path && v[i].path && !strcmp(v[j].path, v[i].path);
        k[i] = (spread_key){seen ? v[i].score * factor : v[i].score, i};
    }
    qsort(k, n, sizeof *k, by_key);
    for (size_t i = 0; i < n; i++)
        tmp[i] = v[k[i].at];
    memcpy(v, tmp, n * sizeof *v);
out:
    free(h);
    free(k);
    free(tmp);
    return rc;
}

size_t cm_rank_finish(search_hit *v, size_t n, const rank_opts *o)
{
    if (n == 0) return 0;
    if (o->decay) {
        int64_t now = o->now ? o->now : (int64_t)time(NULL);
        for (size_t i = 0; i < n; i++)
            v[i].score *=
                cm_rank_decay_multiplier(v[i].path, v[i].mtime_ns, now, o->half_life_days);
    }
    qsort(v, n, sizeof *v, by_score);
    if (!o->mmr) (void)cm_rank_spread_files(v, n, RANK_SAME_FILE);
    if (o->mmr) (void)cm_rank_mmr(v, n, o->mmr_lambda); /* on ENOMEM the relevance order stands */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].score >= o->min_score) kept++;
    double floor = o->min_score;
    if (kept == 0) {
        /* Second chance: keyword hits at min(minScore, textWeight). */
        floor = CM_MIN(o->min_score, o->text_weight);
    }
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        bool keep = v[i].score >= floor && (kept > 0 || v[i].has_text) &&
                    w < (size_t)CM_MAX(0, o->max_results);
        if (keep) {
            if (w != i) v[w] = v[i];
            w++;
        } else {
            cm_search_hit_release(&v[i]);
        }
    }
    memset(v + w, 0, (n - w) * sizeof *v); /* moved-from slots alias kept hits */
    return w;
}
