/*
 * passage.c — the best line or sentence of a chunk for a query (passage.h).
 * One pass over the text: each word is lower-cased, stemmed and compared with
 * the query's terms (a bit each); a passage scores the terms it holds.
 */
#include "../base/utf8.h"
#include "passage.h"

static bool ends(const char *w, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    return n >= k && memcmp(w + n - k, suf, k) == 0;
}

static bool vowel(char c)
{
    return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u';
}

/* A light English stemmer over lower-case ASCII: plurals, -ed, -ing, a final
 * e or y; enough for "signed" and "sign", "paintings" and "painting",
 * "pottery" and "potteries" to meet. Returns the stem's length (w changes). */
static size_t stem(char *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)w[i] >= 0x80) return n; /* not English */
    if (ends(w, n, "sses"))
        n -= 2;
    else if (n > 4 && ends(w, n, "ies"))
        n -= 2, w[n - 1] = 'i';
    else if (n > 3 && w[n - 1] == 's' && w[n - 2] != 's' && w[n - 2] != 'u')
        n--;
    bool cut = false;
    if (n > 5 && ends(w, n, "ing"))
        n -= 3, cut = true;
    else if (n > 4 && ends(w, n, "ed"))
        n -= 2, cut = true;
    if (cut && n > 3 && w[n - 1] == w[n - 2] && !vowel(w[n - 1]) && w[n - 1] != 'l' &&
        w[n - 1] != 's' && w[n - 1] != 'z')
        n--; /* stopped → stop */
    if (n > 3 && w[n - 1] == 'e')
        n--;
    else if (n > 3 && w[n - 1] == 'y')
        w[n - 1] = 'i';
    return n;
}

/* Copies s[0..len) lower-cased (ASCII) into w and stems it; its length. */
static size_t fold(const char *s, size_t len, char *w)
{
    for (size_t k = 0; k < len; k++) {
        unsigned char b = (unsigned char)s[k];
        w[k] = b < 0x80 ? (char)utf8_lower(b) : (char)b;
    }
    return stem(w, len);
}

size_t cm_rank_passage_stem(char *w, size_t n)
{
    return stem(w, n);
}

size_t cm_rank_passage_terms(const char *match, passage_terms *out)
{
    cm_rank_passage_groups(match, NULL, out);
    return out->n;
}

size_t cm_rank_passage_groups(const char *match, const char *weights, passage_terms *out)
{
    memset(out, 0, sizeof *out);
    const char *wc = weights && *weights ? weights : NULL;
    if (wc && *wc == 'c') /* "c<x> ": the coverage share, not a phrase's weight */
        wc = strchr(wc, ' ') ? strchr(wc, ' ') + 1 : NULL;
    int group = -1, last = -1; /* the phrase's group; the last group given a number */
    for (const char *c = match ? match : ""; *c; c++) {
        if (*c != '"') continue;
        const char *s = ++c;
        bool simple = true; /* query.c's tokens hold no '"' */
        while (*c && *c != '"') {
            if (*c == ' ') simple = false; /* a phrase of several tokens */
            c++;
        }
        if (!*c) break;
        size_t len = (size_t)(c - s);
        if (c[1] == '*') simple = false;
        double w = 1.0;
        if (wc) {
            char *end = NULL;
            w = strtod(wc, &end);
            if (end && end != wc && *end == '/') /* "w/a": the weight when the keyword is absent */
                (void)strtod(end + 1, &end);
            wc = end && end != wc ? end : NULL;
        }
        if (!wc || w >= 1 || group < 0) group++; /* a keyword: a group of its own */
        if (!simple || len == 0 || len > PASSAGE_TERM_MAX || out->n == PASSAGE_MAX_TERMS) continue;
        if (group != last) out->ngroups++;
        last = group;
        out->group[out->n] = (unsigned char)(out->ngroups - 1);
        char *t = out->term[out->n++];
        t[fold(s, len, t)] = '\0';
        out->first[(unsigned char)t[0]] = true;
    }
    return out->ngroups;
}

/* ASCII word characters: digits, letters, '_'. */
static const bool ascii_word[128] = {
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
    ['8'] = 1, ['9'] = 1, ['_'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1,
    ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1,
    ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1,
    ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1, ['A'] = 1, ['B'] = 1, ['C'] = 1,
    ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1,
    ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1,
    ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1};

/* Whether code point cp (of a byte >= 0x80) is a word character, not CJK. */
static bool wide_word(int32_t cp)
{
    return cm_utf8_is_word(cp) && !cm_utf8_is_cjk(cp);
}

/* Where the word that goes on at text[i] ends: a loop of its own, as it
 * runs over most characters of the best hits' text. */
static size_t word_end(const char *text, size_t i, size_t n)
{
    while (i < n) {
        unsigned char b = (unsigned char)text[i];
        if (b < 0x80) {
            if (!ascii_word[b]) break;
            i++;
            continue;
        }
        int32_t cp = 0;
        size_t l = cm_utf8_decode(text + i, n - i, &cp);
        if (!wide_word(cp)) break;
        i += l;
    }
    return i;
}

/* The terms a word matches, as a bit mask. */
static uint64_t word_terms(const char *s, size_t len, const passage_terms *t)
{
    char w[PASSAGE_TERM_MAX + 1];
    unsigned char c0 = (unsigned char)s[0];
    if (len > PASSAGE_TERM_MAX || !t->first[c0 < 0x80 ? utf8_lower(c0) : c0]) return 0;
    size_t n = fold(s, len, w);
    uint64_t m = 0;
    for (size_t i = 0; i < t->n; i++)
        if (strncmp(t->term[i], w, n) == 0 && t->term[i][n] == '\0') m |= 1ull << t->group[i];
    return m;
}

static unsigned bits(uint64_t m)
{
    unsigned k = 0;
    for (; m; m &= m - 1)
        k++;
    return k;
}

double cm_rank_passage_best(const char *text, const passage_terms *t, size_t sentence_over)
{
    if (!text || !t->n) return 0;
    size_t n = strlen(text), i = 0;
    uint64_t cur = 0;
    unsigned best = 0;
    bool split = false; /* this line is split into sentences */
    for (size_t line = 0; i <= n;) {
        if (i == line) {
            const char *nl = memchr(text + i, '\n', n - i);
            split = sentence_over && (nl ? (size_t)(nl - text) : n) - i > sentence_over;
        }
        int32_t cp = 0;
        size_t l = 1;
        if (i < n) {
            unsigned char b = (unsigned char)text[i];
            if (b < 0x80)
                cp = b;
            else
                l = cm_utf8_decode(text + i, n - i, &cp);
            if (b < 0x80 ? ascii_word[b] : wide_word(cp)) {
                size_t s = i;
                i = word_end(text, i + l, n);
                cur |= word_terms(text + s, i - s, t);
                continue;
            }
        }
        bool end = i == n || cp == '\n' ||
                   (split && (cp == '.' || cp == '?' || cp == '!') &&
                    (i + 1 == n || text[i + 1] == ' ' || text[i + 1] == '\n'));
        if (end) {
            unsigned k = bits(cur);
            if (k > best) best = k;
            cur = 0;
        }
        if (cp == '\n') line = i + 1;
        i += l;
    }
    return (double)best / (double)t->ngroups;
}
