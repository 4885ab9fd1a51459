/*
 * suggest.c — edit distance and the closest candidate (suggest.h).
 */
#include "suggest.h"

#include "common.h"

static unsigned char fold(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

static size_t min3(size_t a, size_t b, size_t c)
{
    size_t m = a < b ? a : b;
    return m < c ? m : c;
}

size_t cm_edit_distance(const char *a, size_t alen, const char *b, size_t blen)
{
    /* three rows of the dynamic programme: i-2, i-1 and i */
    size_t rows[3][SUGGEST_MAX_LEN + 1];
    if (alen > SUGGEST_MAX_LEN || blen > SUGGEST_MAX_LEN) return SIZE_MAX;
    for (size_t j = 0; j <= blen; j++)
        rows[0][j] = j;
    for (size_t i = 1; i <= alen; i++) {
        size_t *prev2 = rows[(i + 1) % 3], *prev = rows[(i + 2) % 3], *cur = rows[i % 3];
        cur[0] = i;
        for (size_t j = 1; j <= blen; j++) {
            unsigned char ca = fold((unsigned char)a[i - 1]), cb = fold((unsigned char)b[j - 1]);
            size_t d = min3(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb));
            if (i > 1 && j > 1 && ca == fold((unsigned char)b[j - 2]) &&
                fold((unsigned char)a[i - 2]) == cb && prev2[j - 2] + 1 < d)
                d = prev2[j - 2] + 1;
            cur[j] = d;
        }
    }
    return rows[alen % 3][blen];
}

void cm_suggest_init(suggest *s, const char *word)
{
    memset(s, 0, sizeof *s);
    s->word = word ? word : "";
    s->word_len = strlen(s->word);
    s->best_dist = SIZE_MAX;
}

void cm_suggest_add(suggest *s, const char *cand, size_t len)
{
    if (len == s->word_len && memcmp(cand, s->word, len) == 0) return;
    size_t limit = s->word_len <= 3 ? 1 : s->word_len <= 6 ? 2 : 3;
    size_t d = cm_edit_distance(s->word, s->word_len, cand, len);
    if (d > limit || d >= s->word_len || d >= s->best_dist) return;
    s->best = cand;
    s->best_len = len;
    s->best_dist = d;
}

void cm_suggest_add_list(suggest *s, const char *choices)
{
    for (const char *p = choices; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        cm_suggest_add(s, p, n);
        p += n + (bar != NULL);
    }
}

bool cm_suggest_result(const suggest *s, char *out, size_t outlen)
{
    if (outlen) out[0] = 0;
    if (!s->best) return false;
    if (outlen) snprintf(out, outlen, "%.*s", (int)s->best_len, s->best);
    return true;
}
