/*
 * typo.c — the words one edit away from a keyword (typo.h).
 */
#include "typo.h"

/* Appends cand[0..cl) and a space. The callers skip the edits that repeat
 * another: deleting or inserting a letter next to the same letter, swapping
 * two equal letters; what is left is distinct (a swap of two different
 * letters changes two places, a replacement one). */
static cm_rc put(buf *out, const char *cand, size_t cl, size_t *n)
{
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
    cm_rc rc = CM_OK;
    for (size_t i = 0; i < len && !rc; i++) { /* deletions */
        if (i + 1 < len && w[i] == w[i + 1]) continue;
        memcpy(c, w, i);
        memcpy(c + i, w + i + 1, len - i - 1);
        rc = put(out, c, len - 1, n);
    }
    for (size_t i = 0; i + 1 < len && !rc; i++) { /* transpositions */
        if (w[i] == w[i + 1]) continue;
        memcpy(c, w, len);
        c[i] = w[i + 1];
        c[i + 1] = w[i];
        rc = put(out, c, len, n);
    }
    for (size_t i = 0; i < len && !rc; i++) /* substitutions */
        for (char l = 'a'; l <= 'z' && !rc; l++) {
            if (l == w[i]) continue;
            memcpy(c, w, len);
            c[i] = l;
            rc = put(out, c, len, n);
        }
    for (size_t i = 0; i <= len && !rc; i++) /* insertions */
        for (char l = 'a'; l <= 'z' && !rc; l++) {
            if (i > 0 && w[i - 1] == l) continue;
            memcpy(c, w, i);
            c[i] = l;
            memcpy(c + i + 1, w + i, len - i);
            rc = put(out, c, len + 1, n);
        }
    return rc;
}
