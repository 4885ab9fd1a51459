/*
 * typo.c — the words one edit away from a keyword (typo.h).
 */
#include "typo.h"

/* Whether cand[0..cl) already stands in out, or is w itself. */
static bool seen(const buf *out, size_t start, const char *cand, size_t cl, const char *w,
                 size_t len)
{
    if (cl == len && memcmp(cand, w, len) == 0) return true;
    const char *p = out->data ? out->data + start : NULL, *end = out->data + out->len;
    while (p && p < end) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        size_t l = sp ? (size_t)(sp - p) : (size_t)(end - p);
        if (l == cl && memcmp(p, cand, cl) == 0) return true;
        p = sp ? sp + 1 : end;
    }
    return false;
}

static cm_rc put(buf *out, size_t start, const char *cand, size_t cl, const char *w, size_t len,
                 size_t *n)
{
    if (seen(out, start, cand, cl, w, len)) return CM_OK;
    cm_rc rc = cm_buf_add(out, cand, cl);
    if (!rc) rc = cm_buf_addc(out, ' ');
    if (!rc) (*n)++;
    return rc;
}

cm_rc cm_typo_edits(const char *w, size_t len, buf *out, size_t *n)
{
    *n = 0;
    if (len < TYPO_MIN_LEN || len > TYPO_MAX_LEN) return CM_OK;
    for (size_t i = 0; i < len; i++)
        if (w[i] < 'a' || w[i] > 'z') return CM_OK;
    char c[TYPO_MAX_LEN + 2];
    size_t start = out->len;
    cm_rc rc = CM_OK;
    for (size_t i = 0; i < len && !rc; i++) { /* deletions */
        memcpy(c, w, i);
        memcpy(c + i, w + i + 1, len - i - 1);
        rc = put(out, start, c, len - 1, w, len, n);
    }
    for (size_t i = 0; i + 1 < len && !rc; i++) { /* transpositions */
        memcpy(c, w, len);
        c[i] = w[i + 1];
        c[i + 1] = w[i];
        rc = put(out, start, c, len, w, len, n);
    }
    for (size_t i = 0; i < len && !rc; i++) /* substitutions */
        for (char l = 'a'; l <= 'z' && !rc; l++) {
            if (l == w[i]) continue;
            memcpy(c, w, len);
            c[i] = l;
            rc = put(out, start, c, len, w, len, n);
        }
    for (size_t i = 0; i <= len && !rc; i++) /* insertions */
        for (char l = 'a'; l <= 'z' && !rc; l++) {
            memcpy(c, w, i);
            c[i] = l;
            memcpy(c + i + 1, w + i, len - i);
            rc = put(out, start, c, len + 1, w, len, n);
        }
    return rc;
}
