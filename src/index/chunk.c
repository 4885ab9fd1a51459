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
    bool part; /* a window of an over-long line, not a whole line: never carried */
} piece;

typedef struct chunker {
    piece *cur;
    size_t n, cap;
    size_t weight; /* sum of piece weight + 1 (the newline) over cur */
    size_t max_chars, overlap_chars;
    chunk_list *out;
} chunker;

size_t cm_chunk_weight(const char *s, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        if ((unsigned char)s[i] < 0x80) {
            w++;
            i++;
            continue;
        }
        int32_t cp;
        i += cm_utf8_decode(s + i, n - i, &cp);
        w += cm_utf8_is_cjk(cp) ? 4 : 1;
    }
    return w;
}

/* Weight and byte length of the code point at s[0..n). */
static size_t char_at(const char *s, size_t n, size_t *weight)
{
    int32_t cp;
    if ((unsigned char)s[0] < 0x80) {
        *weight = 1;
        return 1;
    }
    size_t l = cm_utf8_decode(s, n, &cp);
    *weight = cm_utf8_is_cjk(cp) ? 4 : 1;
    return l;
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
        if (i) rc = cm_buf_addc(&b, '\n');
        if (!rc) rc = cm_buf_add(&b, c->cur[i].s, c->cur[i].len);
    }
    if (rc) {
        cm_buf_release(&b);
        return rc;
    }
    if (blank(b.data, b.len)) {
        cm_buf_release(&b);
        return CM_OK;
    }
    chunk_list *l = c->out;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        chunk *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv) {
            cm_buf_release(&b);
            return CM_ENOMEM;
        }
        l->v = nv;
        l->cap = cap;
    }
    chunk *ch = &l->v[l->n++];
    ch->start_line = c->cur[0].line;
    ch->end_line = c->cur[c->n - 1].line;
    ch->len = b.len;
    ch->time_s = 0;
    ch->text = cm_buf_detach(&b);
    cm_sha256_hex(ch->text, ch->len, ch->hash);
    return CM_OK;
}

/* Keeps whole trailing lines worth at least overlap_chars, but never the
 * whole flushed chunk (the next chunk must not contain its predecessor),
 * never a window of an over-long line, and only as many as leave room for
 * `need` more weight (the piece that comes next) within the budget. */
static void carry_overlap(chunker *c, size_t need)
{
    size_t acc = 0, keep = 0;
    for (size_t i = c->n; c->overlap_chars && i-- > 1 && !c->cur[i].part;) {
        acc += c->cur[i].weight + 1;
        keep++;
        if (acc >= c->overlap_chars) break;
    }
    while (keep && acc + need > c->max_chars) {
        acc -= c->cur[c->n - keep].weight + 1;
        keep--;
    }
    memmove(c->cur, c->cur + (c->n - keep), keep * sizeof *c->cur);
    c->n = keep;
    c->weight = acc;
}

static cm_rc push(chunker *c, piece p)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        piece *nv = realloc(c->cur, cap * sizeof *nv);
        if (!nv) return CM_ENOMEM;
        c->cur = nv;
        c->cap = cap;
    }
    c->cur[c->n++] = p;
    c->weight += p.weight + 1;
    return CM_OK;
}

/* Adds a whole line that fits the budget on its own. */
static cm_rc add_line(chunker *c, const char *s, size_t len, size_t weight, int line)
{
    cm_rc rc;
    if (c->weight + weight + 1 > c->max_chars && c->n > 0) {
        if ((rc = flush(c))) return rc;
        carry_overlap(c, weight + 1);
    }
    return push(c, (piece){s, len, weight, line, false});
}

/* Bytes of s[from..len) that weigh at most `room`, at least one character. */
static size_t take(const char *s, size_t from, size_t len, size_t room, size_t *weight)
{
    size_t i = from, w = 0;
    while (i < len) {
        size_t cw, l = char_at(s + i, len - i, &cw);
        if (w + cw > room && i > from) break;
        w += cw;
        i += l;
    }
    *weight = w;
    return i - from;
}

/* A line heavier than the budget: windows of it, each filling a chunk, the
 * next window repeating the previous one's last overlap_chars (at most half a
 * window) so that no text is cut off from its context. The first window
 * follows the carried whole lines of the previous chunk when they leave at
 * least half the budget; the last window stays open for the lines after it. */
static cm_rc add_long_line(chunker *c, const char *s, size_t len, int line)
{
    cm_rc rc = CM_OK;
    if (c->n > 0) {
        if ((rc = flush(c))) return rc;
        carry_overlap(c, c->max_chars / 2);
    }
    size_t pos = 0;
    for (;;) {
        size_t room = c->max_chars > c->weight ? c->max_chars - c->weight : 1, w;
        size_t l = take(s, pos, len, room, &w);
        if ((rc = push(c, (piece){s + pos, l, w, line, true}))) return rc;
        if (pos + l == len) return CM_OK;
        if ((rc = flush(c))) return rc;
        c->n = 0;
        c->weight = 0;
        /* Back up over the window's tail worth overlap_chars. */
        size_t tail = CM_MIN(c->overlap_chars, w / 2), back = pos + l, tw = 0;
        while (back > pos && tw < tail) {
            size_t b = back - 1, cw;
            while (b > pos && ((unsigned char)s[b] & 0xC0) == 0x80)
                b--;
            char_at(s + b, len - b, &cw);
            if (tw + cw > tail) break;
            tw += cw;
            back = b;
        }
        pos = back;
    }
}

cm_rc cm_chunk_text(const char *text, size_t n, int tokens, int overlap, chunk_list *out)
{
    chunker c = {NULL, 0, 0, 0, 0, 0, out};
    c.max_chars = (size_t)CM_MAX(32, tokens * 4);
    c.overlap_chars = (size_t)CM_MAX(0, overlap * 4);
    cm_rc rc = CM_OK;
    int line = 0;
    size_t pos = 0;
    /* A UTF-8 byte-order mark is not text: no chunk (or snippet) holds it. */
    if (n >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) pos = 3;
    while (pos <= n && !rc) {
        const char *nl = memchr(text + pos, '\n', n - pos);
        size_t end = nl ? (size_t)(nl - text) : n;
        size_t len = end - pos;
        if (len && text[pos + len - 1] == '\r') len--;
        line++;
        const char *s = text + pos;
        size_t w = cm_chunk_weight(s, len);
        if (w + 1 <= c.max_chars)
            rc = add_line(&c, s, len, w, line);
        else
            rc = add_long_line(&c, s, len, line);
        if (!nl || end + 1 == n) break; /* a final '\n' ends the last line, opens none */
        pos = end + 1;
    }
    if (!rc) rc = flush(&c);
    free(c.cur);
    return rc;
}

void cm_chunk_list_release(chunk_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].text);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}
