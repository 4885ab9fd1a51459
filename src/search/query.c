/*
 * query.c — tokenises a query into word tokens and CJK runs and writes the
 * FTS5 expression: "tok" AND "tok2" AND "東京 京都 都"... Tokens are quoted
 * (FTS5 strings cannot contain '"' here: tokens are made of word characters
 * only), so no user input reaches FTS5 as syntax.
 */
#include "../base/utf8.h"
#include "query.h"
#include "stopwords.h"

typedef struct span {
    size_t start, len; /* bytes in the query */
    size_t chars;
    bool cjk;
    size_t parts; /* > 1: a hyphenated word of this many parts, q[start..start+len) */
} span;

/* Writes one token as an FTS5 string (a phrase of bigrams for a CJK run). */
static cm_rc put_token(buf *out, const char *q, const span *t, bool trigram)
{
    cm_rc rc = cm_buf_addc(out, '"');
    if (!rc && t->cjk && !trigram) {
        if (t->chars == 1) {
            /* One character: any bigram that starts with it, or the run end. */
            rc = cm_buf_add(out, q + t->start, t->len);
            if (!rc) rc = cm_buf_adds(out, "\"*");
            return rc;
        }
        buf tmp = BUF_INIT;
        rc = cm_utf8_cjk_expand(&tmp, q + t->start, t->len);
        /* Drop the trailing single character: the bigrams already pin the run. */
        if (!rc) {
            size_t end = tmp.len;
            while (end && tmp.data[end - 1] == ' ')
                end--;
            while (end && tmp.data[end - 1] != ' ')
                end--;
            while (end && tmp.data[end - 1] == ' ')
                end--;
            size_t start = 0;
            while (start < end && tmp.data[start] == ' ')
                start++;
            rc = cm_buf_add(out, tmp.data + start, end - start);
        }
        cm_buf_release(&tmp);
    } else if (!rc) {
        for (size_t i = 0; i < t->len && !rc; i++) /* a hyphenated word: its parts */
            rc = cm_buf_addc(out, t->parts > 1 && q[t->start + i] == '-' ? ' ' : q[t->start + i]);
    }
    if (!rc) rc = cm_buf_addc(out, '"');
    return rc;
}

/* Lower-cases s[0..len) (ASCII and Latin-1 letters) into low; false when it
 * does not fit, i.e. when it is longer than any stop word. */
static bool lower(const char *s, size_t len, char *low, size_t cap, size_t *out)
{
    size_t m = 0;
    for (size_t i = 0; i < len;) {
        int32_t cp;
        size_t l = cm_utf8_decode(s + i, len - i, &cp);
        cp = utf8_lower(cp);
        if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) cp += 32;
        if (m + 4 >= cap) return false;
        if (cp < 0x80) {
            low[m++] = (char)cp;
        } else if (cp < 0x800) {
            low[m++] = (char)(0xC0 | (cp >> 6));
            low[m++] = (char)(0x80 | (cp & 0x3F));
        } else {
            memcpy(low + m, s + i, l); /* unchanged */
            m += l;
        }
        i += l;
    }
    *out = m;
    return true;
}

static bool is_stop(const char *s, size_t len)
{
    char low[64];
    size_t m;
    return lower(s, len, low, sizeof low, &m) && cm_stopword_is(low, m);
}

/* Whether the token a, lower-cased, is a word of the list test. */
static bool is_word(const char *q, const span *a, bool (*test)(const char *, size_t))
{
    char low[64];
    size_t m;
    return lower(q + a->start, a->len, low, sizeof low, &m) && test(low, m);
}

typedef struct tokens {
    span v[QUERY_MAX_TOKENS];
    bool stop[QUERY_MAX_TOKENS];
    size_t n;
} tokens;

static void push(tokens *t, const char *q, size_t start, size_t len, bool cjk)
{
    if (!len || t->n == QUERY_MAX_TOKENS) return;
    size_t chars = 0;
    for (size_t i = 0; i < len; i++)
        chars += ((unsigned char)q[start + i] & 0xC0) != 0x80;
    t->v[t->n] = (span){start, len, chars, cjk, 1};
    t->stop[t->n] = is_stop(q + start, len);
    t->n++;
}

/* Joins the token just pushed to the one before it, when a single '-'
 * separates them ("wi-fi"): one keyword, never a stop word. */
static void join_hyphen(tokens *t, const char *q)
{
    if (t->n < 2) return;
    span *a = &t->v[t->n - 2], *b = &t->v[t->n - 1];
    if (a->cjk || b->cjk || a->start + a->len + 1 != b->start || q[b->start - 1] != '-') return;
    a->len = b->start + b->len - a->start;
    a->chars += b->chars + 1;
    a->parts++;
    t->stop[t->n - 2] = false;
    t->n--;
}

/* 0 kanji/other, 1 hiragana, 2 katakana (with the long-vowel mark) */
static int kana_class(int32_t cp)
{
    if (cp >= 0x3040 && cp <= 0x309F) return 1;
    if ((cp >= 0x30A0 && cp <= 0x30FF) || (cp >= 0x31F0 && cp <= 0x31FF) ||
        (cp >= 0xFF66 && cp <= 0xFF9F))
        return 2;
    return 0;
}

/* Splits a CJK run into the words a keyword query uses: Korean words lose a
 * trailing particle (서울에서 → 서울); Japanese runs are cut where the script
 * changes (kanji, hiragana, katakana), one-character hiragana being grammar;
 * Chinese runs are cut around stop words and particles (之前讨论的那个方案 →
 * 讨论, 方案). Stop words are kept, marked, for a query made only of them. */
static void cjk_words(tokens *t, const char *q, size_t start, size_t len)
{
    bool hangul = false, kana = false;
    for (size_t i = 0; i < len;) {
        int32_t cp;
        i += cm_utf8_decode(q + start + i, len - i, &cp);
        hangul |= cp >= 0xAC00 && cp <= 0xD7AF;
        kana |= kana_class(cp) != 0;
    }
    const char *s = q + start;
    if (hangul) {
        size_t p = is_stop(s, len) ? 0 : cm_stopword_ko_particle(s, len);
        if (p && len - p >= 6) len -= p; /* keep stems of two syllables or more */
        push(t, q, start, len, true);
    } else if (kana) {
        size_t seg = 0;
        int cls = -1;
        for (size_t i = 0; i <= len;) {
            int32_t cp = 0;
            size_t l = i < len ? cm_utf8_decode(s + i, len - i, &cp) : 0;
            int c = i < len ? kana_class(cp) : -2;
            if (c != cls && i > seg) {
                size_t before = t->n;
                push(t, q, start + seg, i - seg, true);
                if (t->n > before && cls == 1 && t->v[t->n - 1].chars == 1)
                    t->stop[t->n - 1] = true;
                seg = i;
            }
            if (i == seg) cls = c;
            if (!l) break;
            i += l;
        }
    } else {
        size_t seg = 0;
        for (size_t i = 0; i < len;) {
            size_t m = cm_stopword_cjk_at(s + i, len - i);
            if (m) {
                push(t, q, start + seg, i - seg, true);
                push(t, q, start + i, m, true); /* a stop word, kept marked */
                i += m;
                seg = i;
                continue;
            }
            int32_t cp;
            i += cm_utf8_decode(s + i, len - i, &cp);
        }
        push(t, q, start + seg, len - seg, true);
    }
}

static bool same_word(const char *q, const span *a, const span *b)
{
    char la[64], lb[64];
    size_t na, nb;
    if (a->len != b->len) return false;
    if (lower(q + a->start, a->len, la, sizeof la, &na) &&
        lower(q + b->start, b->len, lb, sizeof lb, &nb))
        return na == nb && memcmp(la, lb, na) == 0;
    return memcmp(q + a->start, q + b->start, a->len) == 0;
}

/* The query's tokens (at most QUERY_MAX_BYTES of it); join: hyphenated
 * words as one token. */
static void tokenize(const char *q, size_t n, bool join, tokens *t)
{
    if (n > QUERY_MAX_BYTES) n = cm_utf8_valid_prefix(q, QUERY_MAX_BYTES);
    size_t i = 0;
    while (i < n && t->n < QUERY_MAX_TOKENS) {
        int32_t cp;
        size_t l = cm_utf8_decode(q + i, n - i, &cp);
        if (!cm_utf8_is_word(cp)) {
            i += l;
            continue;
        }
        bool cjk = cm_utf8_is_cjk(cp);
        size_t start = i;
        while (i < n) {
            l = cm_utf8_decode(q + i, n - i, &cp);
            if (!cm_utf8_is_word(cp) || cm_utf8_is_cjk(cp) != cjk) break;
            i += l;
        }
        if (cjk) {
            cjk_words(t, q, start, i - start);
        } else {
            push(t, q, start, i - start, false);
            if (join) join_hyphen(t, q);
        }
    }
}

bool cm_query_has_keyword(const char *q, size_t n)
{
    tokens t = {0};
    tokenize(q, n, false, &t);
    for (size_t k = 0; k < t.n; k++)
        if (!t.stop[k]) return true;
    return false;
}

cm_rc cm_query_build(const char *q, size_t n, bool trigram, query_join join, buf *out,
                     size_t *ntokens)
{
    return cm_query_build_ex(q, n, trigram, join, NULL, NULL, out, ntokens);
}

cm_rc cm_query_build_ex(const char *q, size_t n, bool trigram, query_join join,
                        query_expand_fn expand, void *ctx, buf *out, size_t *ntokens)
{
    query_opts o = {trigram, join, expand, ctx, NULL, NULL, NULL, false, false};
    return cm_query_build_opts(q, n, &o, out, ntokens);
}

/* Writes a keyword's variants after it (the group's members) and their
 * weights; *any is set when there was one. */
static cm_rc put_variants(const query_opts *o, const char *q, const span *k, buf *out, bool *any)
{
    char low[QUERY_VARIANT_MAX];
    size_t m = 0;
    query_variant v[QUERY_MAX_VARIANTS] = {0};
    if (k->cjk || !lower(q + k->start, k->len, low, sizeof low, &m)) return CM_OK;
    for (size_t i = 0; i < m; i++)
        if (low[i] == '-') low[i] = ' ';
    size_t nv = o->variants(o->variants_ctx, low, m, v, QUERY_MAX_VARIANTS);
    cm_rc rc = CM_OK;
    for (size_t i = 0; i < nv && !rc; i++) {
        size_t len = strnlen(v[i].text, sizeof v[i].text);
        bool ok = len && len < sizeof v[i].text && v[i].weight > 0 && v[i].weight < 1;
        for (size_t j = 0; ok && j < len; j++) /* a phrase of word tokens, nothing else */
            ok = v[i].text[j] != '"';
        if (!ok) continue;
        rc = cm_buf_adds(out, " OR \"");
        if (!rc) rc = cm_buf_add(out, v[i].text, len);
        if (!rc) rc = cm_buf_addc(out, '"');
        if (!rc) rc = cm_buf_printf(o->weights, " %.3g", v[i].weight);
        if (!rc && v[i].absent > v[i].weight && v[i].absent < 1)
            rc = cm_buf_printf(o->weights, "/%.3g", v[i].absent);
        *any = true;
    }
    return rc;
}

/* ---- definitions in the query: "coronary artery bypass graft (CABG)" ---- */

static bool alnum_c(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static char low_c(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
}

/* The start (a byte of q) of the long form that the acronym q[a..a+alen)
 * abbreviates in q[0..end) (Schwartz & Hearst 2003: each letter of the
 * acronym, last to first, found in the text before it, the first at a
 * word's start); -1 when there is none within a few words. */
static long long_form(const char *q, size_t end, size_t a, size_t alen)
{
    long s = (long)alen - 1, l = (long)end - 1;
    while (l >= 0 && !alnum_c(q[l]))
        l--;
    long stop = 0; /* at most min(letters + 5, 2 × letters) words back */
    size_t letters = 0, words = 0;
    for (size_t i = 0; i < alen; i++)
        letters += alnum_c(q[a + i]);
    size_t maxw = CM_MIN(letters + 5, letters * 2);
    for (long i = l; i >= 0; i--) {
        if (alnum_c(q[i]) && (i == 0 || !alnum_c(q[i - 1])) && ++words == maxw) {
            stop = i;
            break;
        }
    }
    while (s >= 0) {
        char c = low_c(q[a + (size_t)s]);
        if (!alnum_c(c)) {
            s--;
            continue;
        }
        while (l >= stop && (low_c(q[l]) != c || (s == 0 && l > 0 && alnum_c(q[l - 1]))))
            l--;
        if (l < stop) return -1;
        l--;
        s--;
    }
    return l + 1;
}

typedef struct extra {
    char text[QUERY_VARIANT_MAX]; /* "": none */
    double w;
} extra;

/* Definitions in the query ("coronary artery bypass graft (CABG)"): the
 * acronym's group gains the long form as a phrase at QUERY_DEF_LONG, each
 * keyword of the long form gains the acronym at QUERY_DEF_SHORT, so a text
 * that writes only one of the two covers them all. */
static void definitions(const char *q, size_t n, const tokens *t, const span *keys, size_t nk,
                        extra *ex)
{
    for (size_t i = 0; i < t->n; i++) {
        const span *a = &t->v[i];
        if (a->cjk || a->start < 2 || a->start + a->len >= n || q[a->start - 1] != '(' ||
            q[a->start + a->len] != ')' || a->len > 10)
            continue;
        size_t upper = 0;
        for (size_t j = 0; j < a->len; j++)
            upper += q[a->start + j] >= 'A' && q[a->start + j] <= 'Z';
        if (upper < 2) continue;
        long ls = long_form(q, a->start - 1, a->start, a->len);
        if (ls < 0) continue;
        char phrase[QUERY_VARIANT_MAX];
        size_t pl = 0, ntok = 0;
        bool fits = true;
        for (size_t j = 0; j < i && fits; j++) {
            const span *b = &t->v[j];
            if (b->start < (size_t)ls || b->cjk) continue;
            char low[64];
            size_t m = 0;
            if (!lower(q + b->start, b->len, low, sizeof low, &m) || pl + m + 2 >= sizeof phrase) {
                fits = false;
                break;
            }
            if (pl) phrase[pl++] = ' ';
            for (size_t c = 0; c < m; c++)
                phrase[pl++] = low[c] == '-' ? ' ' : low[c];
            ntok++;
        }
        if (!fits || ntok < 2) continue;
        phrase[pl] = 0;
        char acr[16];
        size_t al = 0;
        if (!lower(q + a->start, a->len, acr, sizeof acr, &al)) continue;
        acr[al] = 0;
        for (size_t k = 0; k < nk; k++) {
            if (keys[k].start == a->start) {
                memcpy(ex[k].text, phrase, pl + 1);
                ex[k].w = QUERY_DEF_LONG;
            } else if (keys[k].start >= (size_t)ls && keys[k].start < a->start) {
                memcpy(ex[k].text, acr, al + 1);
                ex[k].w = QUERY_DEF_SHORT;
            }
        }
    }
}

cm_rc cm_query_build_opts(const char *q, size_t n, const query_opts *o, buf *out,
                          size_t *ntokens)
{
    cm_rc rc = CM_OK;
    bool trigram = o->trigram;
    query_join join = o->join;
    query_expand_fn expand = o->expand;
    void *ctx = o->expand_ctx;
    /* groups: each keyword a group of itself and its variants, weighted */
    bool groups = (o->variants || o->definitions) && o->weights && !trigram, any_variant = false;
    size_t wstart = groups ? o->weights->len : 0;
    tokens t = {0};
    tokenize(q, n, groups && o->variants && o->join_hyphens, &t);
    /* In a question, a verb that frames what was said is no keyword
     * (stopwords.h; docs/QUALITY.md, issue 30, round 8). */
    if (t.n && !t.v[0].cjk && is_word(q, &t.v[0], cm_stopword_question_opener))
        for (size_t k = 1; k < t.n; k++)
            if (!t.v[k].cjk && is_word(q, &t.v[k], cm_stopword_speech_verb)) t.stop[k] = true;
    /* Keywords are the tokens that are not stop words; a query made only of
     * stop words uses them all. */
    bool drop_short = trigram && !expand, any = false;
    for (size_t k = 0; k < t.n; k++)
        any |= !t.stop[k] && !(drop_short && t.v[k].chars < 3);
    span keys[QUERY_MAX_TOKENS];
    size_t nk = 0;
    for (size_t k = 0; k < t.n; k++) {
        if ((any && t.stop[k]) || (drop_short && t.v[k].chars < 3)) continue;
        /* Skip duplicates: "the The" adds nothing to an AND. */
        bool dup = false;
        for (size_t j = 0; j < nk && !dup; j++)
            dup = same_word(q, &keys[j], &t.v[k]);
        if (!dup) keys[nk++] = t.v[k];
    }
    extra ex[QUERY_MAX_TOKENS];
    memset(ex, 0, sizeof ex);
    if (groups && o->definitions) definitions(q, n, &t, keys, nk, ex);
    for (size_t k = 0; k < nk && !rc; k++) {
        if (k) rc = cm_buf_adds(out, join == QUERY_AND ? " AND " : " OR ");
        size_t at = out->len;
        char low[64];
        size_t m = 0;
        if (!rc && trigram && keys[k].chars < 3 &&
            lower(q + keys[k].start, keys[k].len, low, sizeof low, &m))
            rc = expand(ctx, low, m, out);
        if (groups) { /* a group: ("kw" OR "v1" ...) */
            size_t open = out->len;
            if (!rc) rc = cm_buf_addc(out, '(');
            if (!rc) rc = put_token(out, q, &keys[k], trigram);
            if (!rc) rc = cm_buf_adds(o->weights, o->weights->len > wstart ? " 1" : "1");
            size_t before = out->len;
            if (!rc && o->variants) rc = put_variants(o, q, &keys[k], out, &any_variant);
            if (!rc && ex[k].text[0]) {
                rc = cm_buf_adds(out, " OR \"");
                if (!rc) rc = cm_buf_adds(out, ex[k].text);
                if (!rc) rc = cm_buf_addc(out, '"');
                if (!rc) rc = cm_buf_printf(o->weights, " %.3g", ex[k].w);
                any_variant = true;
            }
            if (!rc && (out->len == before || join == QUERY_OR)) { /* no parentheses */
                memmove(out->data + open, out->data + open + 1, out->len - open - 1);
                out->data[--out->len] = '\0';
            } else if (!rc) {
                rc = cm_buf_addc(out, ')');
            }
            continue;
        }
        /* no expansion: the term as written (which matches nothing if short) */
        if (!rc && out->len == at) rc = put_token(out, q, &keys[k], trigram);
    }
    if (groups && !any_variant && o->weights->cap) /* plain BM25: no weights */
        o->weights->data[o->weights->len = wstart] = '\0';
    if (ntokens) *ntokens = nk;
    return rc;
}
