/*
 * chunk.c — the chunker of chunk.h. Works on slices of the input (no copy per
 * line); only a finished chunk's text is allocated.
 */
#include "../base/buf.h"
#include "../base/utf8.h"
#include "chunk.h"

typedef struct piece {
    const char *s;
    size_t len;
    size_t weight;
    int line;
} piece;

typedef struct chunker {
    piece *cur;
    size_t n, cap;
    size_t weight; /* sum of piece weight + 1 (the newline) over cur */
    size_t max_chars, overlap_chars;
    chunk_list *out;
} chunker;

size_t chunk_weight(const char *s, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        if ((unsigned char)s[i] < 0x80) {
            w++;
            i++;
            continue;
        }
        int32_t cp;
        i += utf8_decode(s + i, n - i, &cp);
        w += utf8_is_cjk(cp) ? 4 : 1;
    }
    return w;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r' && s[i] != '\f' &&
            s[i] != '\v')
            return false;
    return true;
}

static cm_rc flush(chunker *c)
{
    if (c->n == 0) return CM_OK;
    buf b = BUF_INIT;
    cm_rc rc = CM_OK;
    for (size_t i = 0; i < c->n && !rc; i++) {
        if (i) rc = buf_addc(&b, '\n');
        if (!rc) rc = buf_add(&b, c->cur[i].s, c->cur[i].len);
    }
    if (rc) {
        buf_release(&b);
        return rc;
    }
    if (blank(b.data ? b.data : "", b.len)) {
        buf_release(&b);
        return CM_OK;
    }
    chunk_list *l = c->out;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        chunk *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv) {
            buf_release(&b);
            return CM_ENOMEM;
        }
        l->v = nv;
        l->cap = cap;
    }
    chunk *ch = &l->v[l->n++];
    ch->start_line = c->cur[0].line;
    ch->end_line = c->cur[c->n - 1].line;
    ch->len = b.len;
    ch->text = buf_detach(&b);
    sha256_hex(ch->text, ch->len, ch->hash);
    return CM_OK;
}

/* Keeps whole trailing pieces worth at least overlap_chars, but never the
 * whole flushed chunk: the next chunk must not contain its predecessor. */
static void carry_overlap(chunker *c)
{
    if (c->overlap_chars == 0 || c->n <= 1) {
        c->n = 0;
        c->weight = 0;
        return;
    }
    size_t acc = 0, keep = 0;
    for (size_t i = c->n; i-- > 1;) {
        acc += c->cur[i].weight + 1;
        keep++;
        if (acc >= c->overlap_chars) break;
    }
    memmove(c->cur, c->cur + (c->n - keep), keep * sizeof *c->cur);
    c->n = keep;
    c->weight = acc;
}

static cm_rc add_piece(chunker *c, const char *s, size_t len, size_t weight, int line)
{
    cm_rc rc;
    if (c->weight + weight + 1 > c->max_chars && c->n > 0) {
        if ((rc = flush(c))) return rc;
        carry_overlap(c);
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        piece *nv = realloc(c->cur, cap * sizeof *nv);
        if (!nv) return CM_ENOMEM;
        c->cur = nv;
        c->cap = cap;
    }
    c->cur[c->n++] = (piece){s, len, weight, line};
    c->weight += weight + 1;
    return CM_OK;
}

cm_rc chunk_text(const char *text, size_t n, int tokens, int overlap, chunk_list *out)
{
    chunker c = {NULL, 0, 0, 0, 0, 0, out};
    c.max_chars = (size_t)CM_MAX(32, tokens * 4);
    c.overlap_chars = (size_t)CM_MAX(0, overlap * 4);
    cm_rc rc = CM_OK;
    int line = 0;
    size_t pos = 0;
    while (pos <= n && !rc) {
        const char *nl = memchr(text + pos, '\n', n - pos);
        size_t end = nl ? (size_t)(nl - text) : n;
        size_t len = end - pos;
        if (len && text[pos + len - 1] == '\r') len--;
        line++;
        const char *s = text + pos;
        if (len == 0) {
            rc = add_piece(&c, s, 0, 0, line);
        } else {
            /* Segments of at most max_chars weighted characters. */
            size_t i = 0;
            while (i < len && !rc) {
                size_t start = i, w = 0;
                while (i < len) {
                    int32_t cp;
                    size_t l = 1, cw = 1;
                    if ((unsigned char)s[i] >= 0x80) {
                        l = utf8_decode(s + i, len - i, &cp);
                        cw = utf8_is_cjk(cp) ? 4 : 1;
                    }
                    if (w + cw > c.max_chars && i > start) break;
                    w += cw;
                    i += l;
                }
                rc = add_piece(&c, s + start, i - start, w, line);
            }
        }
        if (!nl || end + 1 == n) break; /* a final '\n' ends the last line, opens none */
        pos = end + 1;
    }
    if (!rc) rc = flush(&c);
    free(c.cur);
    return rc;
}

void chunk_list_release(chunk_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].text);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}
