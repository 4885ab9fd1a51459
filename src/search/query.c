/*
 * query.c — tokenises a query into word tokens and CJK runs and writes the
 * FTS5 expression: "tok" AND "tok2" AND "東京 京都 都"... Tokens are quoted
 * (FTS5 strings cannot contain '"' here: tokens are made of word characters
 * only), so no user input reaches FTS5 as syntax.
 */
#include "../base/utf8.h"
#include "query.h"

typedef struct span {
    size_t start, len; /* bytes in the query */
    size_t chars;
    bool cjk;
} span;

/* Writes one token as an FTS5 string (a phrase of bigrams for a CJK run). */
static cm_rc put_token(buf *out, const char *q, const span *t, bool trigram)
{
    cm_rc rc = buf_addc(out, '"');
    if (!rc && t->cjk && !trigram) {
        if (t->chars == 1) {
            /* One character: any bigram that starts with it, or the run end. */
            rc = buf_add(out, q + t->start, t->len);
            if (!rc) rc = buf_adds(out, "\"*");
            return rc;
        }
        buf tmp = BUF_INIT;
        rc = utf8_cjk_expand(&tmp, q + t->start, t->len);
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
            rc = buf_add(out, tmp.data + start, end - start);
        }
        buf_release(&tmp);
    } else if (!rc) {
        rc = buf_add(out, q + t->start, t->len);
    }
    if (!rc) rc = buf_addc(out, '"');
    return rc;
}

cm_rc query_build(const char *q, size_t n, bool trigram, query_join join, buf *out, size_t *ntokens)
{
    cm_rc rc = CM_OK;
    span toks[QUERY_MAX_TOKENS];
    size_t nt = 0;
    if (n > QUERY_MAX_BYTES) n = utf8_valid_prefix(q, QUERY_MAX_BYTES);
    size_t i = 0;
    while (i < n && nt < QUERY_MAX_TOKENS) {
        int32_t cp;
        size_t l = utf8_decode(q + i, n - i, &cp);
        if (!utf8_is_word(cp)) {
            i += l;
            continue;
        }
        bool cjk = utf8_is_cjk(cp);
        span t = {i, 0, 0, cjk};
        while (i < n) {
            l = utf8_decode(q + i, n - i, &cp);
            if (!utf8_is_word(cp) || utf8_is_cjk(cp) != cjk) break;
            i += l;
            t.chars++;
        }
        t.len = i - t.start;
        if (trigram && t.chars < 3) continue;
        /* Skip exact duplicates: "the the" adds nothing to an AND. */
        bool dup = false;
        for (size_t k = 0; k < nt && !dup; k++)
            dup = toks[k].len == t.len && memcmp(q + toks[k].start, q + t.start, t.len) == 0;
        if (!dup) toks[nt++] = t;
    }
    for (size_t k = 0; k < nt && !rc; k++) {
        if (k) rc = buf_adds(out, join == QUERY_AND ? " AND " : " OR ");
        if (!rc) rc = put_token(out, q, &toks[k], trigram);
    }
    if (ntokens) *ntokens = nt;
    return rc;
}
