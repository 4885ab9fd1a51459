/*
 * blocks.c — the block chunker, the coalescer and the stream that joins them
 * (contracts in blocks.h). The chunker works on byte offsets into its buffer
 * and converts the unit bounds (min, max) to byte bounds per view, so every
 * break it considers is a character boundary.
 */
#include "blocks.h"

#include "../../base/utf8.h"

gw_break_pref cm_gw_break_pref_parse(const char *s)
{
    if (s && strcmp(s, "newline") == 0) return GW_BREAK_NEWLINE;
    if (s && strcmp(s, "sentence") == 0) return GW_BREAK_SENTENCE;
    return GW_BREAK_PARAGRAPH;
}

static const struct {
    const char *channel;
    int limit;
} channel_limits[] = {
    {"telegram", 4000},    {"discord", 2000},  {"slack", 4000},
    {"signal", 4000},      {"whatsapp", 4000}, {"imessage", 4000},
    {"bluebubbles", 4000}, {"feishu", 4000},   {"line", 5000},
};

int cm_gw_channel_text_limit(const char *channel)
{
    for (size_t i = 0; channel && i < ARRAY_LEN(channel_limits); i++)
        if (strcmp(channel, channel_limits[i].channel) == 0) return channel_limits[i].limit;
    return GW_TEXT_LIMIT_DEFAULT;
}

int cm_gw_channel_resolve_limit(const char *channel, int configured)
{
    int limit = configured > 0 ? configured : cm_gw_channel_text_limit(channel);
    if (channel && strcmp(channel, "telegram") == 0 && limit > GW_TELEGRAM_HARD_LIMIT)
        limit = GW_TELEGRAM_HARD_LIMIT;
    return limit;
}

/* Byte length and UTF-16 units of the character at s[0..n). */
static size_t char_at(const char *s, size_t n, size_t *units)
{
    int32_t cp;
    size_t len = cm_utf8_decode(s, n, &cp);
    *units = cp >= 0x10000 ? 2 : 1;
    return len;
}

size_t cm_gw_u16len(const char *s, size_t n)
{
    size_t units = 0, u = 0;
    for (size_t i = 0; i < n; units += u)
        i += char_at(s + i, n - i, &u);
    return units;
}

/* cm_gw_u16len(s, n), counted only until it exceeds cap (then some value >
 * cap): what a comparison with a bound needs, in time of the bound. */
static size_t u16_upto(const char *s, size_t n, size_t cap)
{
    size_t units = 0, u = 0;
    for (size_t i = 0; i < n && units <= cap; units += u)
        i += char_at(s + i, n - i, &u);
    return units;
}

/* Largest character boundary b with cm_gw_u16len(s, b) <= units. */
static size_t byte_floor(const char *s, size_t n, size_t units)
{
    size_t i = 0, acc = 0, u;
    while (i < n) {
        size_t len = char_at(s + i, n - i, &u);
        if (acc + u > units) break;
        acc += u;
        i += len;
    }
    return i;
}

/* Smallest character boundary b with cm_gw_u16len(s, b) >= units (or n). */
static size_t byte_ceil(const char *s, size_t n, size_t units)
{
    size_t i = 0, acc = 0, u;
    while (i < n && acc < units) {
        i += char_at(s + i, n - i, &u);
        acc += u;
    }
    return i;
}

void cm_gw_pieces_init(gw_pieces *p)
{
    memset(p, 0, sizeof *p);
}

void cm_gw_pieces_release(gw_pieces *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->v[i]);
    free(p->v);
    free(p->len);
    memset(p, 0, sizeof *p);
}

cm_rc cm_gw_pieces_add(gw_pieces *p, const char *s, size_t n)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        char **v = realloc(p->v, cap * sizeof *v);
        if (!v) return CM_ENOMEM;
        p->v = v;
        size_t *len = realloc(p->len, cap * sizeof *len);
        if (!len) return CM_ENOMEM;
        p->len = len;
        p->cap = cap;
    }
    char *copy = cm_strndup(s, n);
    if (!copy) return CM_ENOMEM;
    p->v[p->n] = copy;
    p->len[p->n++] = n;
    return CM_OK;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static bool is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!is_space(s[i])) return false;
    return true;
}

static size_t skip_newlines(const char *s, size_t n, size_t i)
{
    while (i < n && s[i] == '\n')
        i++;
    return i;
}

/* A fenced block: [start, end) in the buffer (end at the closing line's
 * newline, or the buffer's end when unclosed), its opening line and the
 * closing line that matches it (indent + marker). */
typedef struct fence {
    size_t start, end;
    size_t close_off; /* where the closing line starts (end when unclosed) */
    size_t open_off, open_len;
    size_t indent, mlen;
    char mchar;
} fence;

typedef struct fences {
    fence *v;
    size_t n;
} fences;

/* Finds the fences of s[0..n): a line of 0-3 spaces and 3 or more ` or ~
 * opens (an info string may follow); a later line of 0-3 spaces and the same
 * character, at least as many, and only spaces or tabs after them closes.
 * 2026.3.22 also takes a line with text after the marker as a closing line;
 * CommonMark does not, and neither do the channels' renderers. */
static cm_rc parse_fences(const char *s, size_t n, fences *out)
{
    size_t cap = 0, off = 0;
    bool open = false;
    fence cur = {0};
    out->v = NULL;
    out->n = 0;
    while (off <= n) {
        const char *nl = memchr(s + off, '\n', n - off);
        size_t end = nl ? (size_t)(nl - s) : n;
        size_t i = off;
        while (i < end && i - off < 3 && s[i] == ' ')
            i++;
        size_t m = i;
        char mc = i < end ? s[i] : 0;
        while ((mc == '`' || mc == '~') && m < end && s[m] == mc)
            m++;
        bool is_fence = m - i >= 3 && !memchr(s + m, '\r', end - m);
        size_t k = m;
        while (k < end && (s[k] == ' ' || s[k] == '\t'))
            k++;
        if (is_fence && !open) {
            cur = (fence){off, 0, 0, off, end - off, i - off, m - i, mc};
            open = true;
        } else if (is_fence && k == end && mc == cur.mchar && m - i >= cur.mlen) {
            cur.end = end;
            cur.close_off = off;
            open = false;
            if (out->n == cap) {
                cap = cap ? cap * 2 : 8;
                fence *v = realloc(out->v, cap * sizeof *v);
                if (!v) return CM_ENOMEM;
                out->v = v;
            }
            out->v[out->n++] = cur;
        }
        if (!nl) break;
        off = end + 1;
    }
    if (open) {
        cur.end = cur.close_off = n;
        if (out->n == cap) {
            fence *v = realloc(out->v, (cap + 1) * sizeof *v);
            if (!v) return CM_ENOMEM;
            out->v = v;
        }
        out->v[out->n++] = cur;
    }
    return CM_OK;
}

static const fence *fence_at(const fences *f, size_t idx)
{
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (idx <= f->v[mid].start)
            hi = mid;
        else if (idx >= f->v[mid].end)
            lo = mid + 1;
        else
            return &f->v[mid];
    }
    return NULL;
}

static bool safe_at(const fences *f, size_t idx)
{
    return fence_at(f, idx) == NULL;
}

typedef struct pick {
    size_t idx;         /* bytes into the view; 0 = no break */
    const fence *split; /* the fence to close and reopen, or NULL */
} pick;

/* Chooses where the view (at offset abs of the buffer) breaks: the piece
 * view[0..idx) has at least min_u units and at most avail units. */
static pick pick_break(const char *s, size_t abs, size_t n, size_t min_u, size_t avail,
                       gw_break_pref pref, const fences *f, size_t reopen_units)
{
    pick r = {0, NULL};
    const char *v = s + abs;
    size_t vunits = u16_upto(v, n, CM_MAX(avail, min_u));
    if (vunits < min_u) return r;
    size_t minb = byte_ceil(v, n, min_u), winb = byte_floor(v, n, avail);
    if (pref == GW_BREAK_PARAGRAPH) {
        for (size_t p = winb >= 2 ? winb - 1 : 0; p-- > 0 && p >= minb;) {
            if (v[p] != '\n' || v[p + 1] != '\n') continue;
            if (safe_at(f, abs + p)) return (pick){p, NULL};
            if (p + 1 < winb && safe_at(f, abs + p + 1)) return (pick){p + 1, NULL};
        }
    }
    if (pref != GW_BREAK_SENTENCE) {
        for (size_t p = winb; p-- > minb;)
            if (v[p] == '\n' && safe_at(f, abs + p)) return (pick){p, NULL};
    }
    if (pref != GW_BREAK_NEWLINE) {
        size_t best = 0;
        for (size_t p = minb; p < winb; p++) {
            if (v[p] != '.' && v[p] != '!' && v[p] != '?') continue;
            if ((p + 1 == winb || is_space(v[p + 1])) && safe_at(f, abs + p + 1)) best = p + 1;
        }
        if (best > 0) return (pick){best, NULL};
    }
    if (pref == GW_BREAK_NEWLINE && vunits < avail) return r;
    for (size_t p = winb; p-- > minb && p > 0;)
        if (is_space(v[p]) && safe_at(f, abs + p)) return (pick){p, NULL};
    if (vunits < avail) return r;
    size_t hb = winb;
    if (hb == 0) hb = byte_ceil(v, n, 1); /* one character wider than avail: still progress */
    const fence *fc = fence_at(f, abs + hb);
    if (!fc) return (pick){hb, NULL};
    /* Inside a fence: leave room for "\n" + closing line + "\n", unless the
     * fence lines and one character would not fit a piece (then a plain
     * hard break, and the rest of that fence is split the same way). */
    size_t close_u = fc->indent + fc->mlen + 2;
    size_t open_u = cm_gw_u16len(s + fc->open_off, fc->open_len) + 1;
    if (close_u + open_u + 2 > avail + reopen_units || close_u + 2 > avail) return (pick){hb, NULL};
    size_t hb2 = byte_floor(v, n, avail - close_u);
    if (hb2 == 0) return (pick){hb, NULL};
    fc = fence_at(f, abs + hb2);
    if (!fc) return (pick){hb2, NULL};
    /* Better than 2026.3.22, which cuts at max: end the piece after the last
     * whole code line that fits, when there is one after the opening line. */
    size_t body = fc->open_off + fc->open_len + 1; /* first content byte */
    if (abs + hb2 < body) /* on the opening line: the fence starts the next piece */
        return fc->start > abs ? (pick){fc->start - abs, NULL} : (pick){hb, NULL};
    if (abs + hb2 > fc->close_off) { /* on the closing line: it starts the next piece */
        if (fc->close_off > abs) return (pick){fc->close_off - abs, fc};
        /* the piece starts on it: the fence's end if that fits, else a
         * plain hard break (a closing line longer than a piece) */
        return fc->end - abs <= hb ? (pick){fc->end - abs, NULL} : (pick){hb, NULL};
    }
    for (size_t q = hb2; q-- > 0 && abs + q >= body;)
        if (v[q] == '\n') return (pick){q + 1, fc};
    return (pick){hb2, fc};
}

/* The next paragraph break ("\n", spaces or tabs, "\n"s) from start that
 * lies at least min units after start and outside fences: [*at, *at+*len). */
static bool next_paragraph(const char *s, size_t n, size_t start, size_t min, const fences *f,
                           size_t *at, size_t *len)
{
    for (size_t i = start; i < n; i++) {
        if (s[i] != '\n') continue;
        size_t j = i + 1;
        while (j < n && (s[j] == ' ' || s[j] == '\t'))
            j++;
        if (j >= n || s[j] != '\n') continue;
        while (j < n && s[j] == '\n')
            j++;
        if (u16_upto(s + start, i - start, min) >= min && safe_at(f, i)) {
            *at = i;
            *len = j - i;
            return true;
        }
        i = j - 1;
    }
    return false;
}

void cm_gw_chunker_init(gw_chunker *c, int min, int max, gw_break_pref pref)
{
    c->flush_on_paragraph = false;
    c->min = CM_MAX(1, min);
    c->max = CM_MAX(c->min, max);
    c->pref = pref;
    cm_buf_init(&c->text, 0);
}

void cm_gw_chunker_release(gw_chunker *c)
{
    cm_buf_release(&c->text);
}

cm_rc cm_gw_chunker_append(gw_chunker *c, const char *s, size_t n)
{
    return n ? cm_buf_add(&c->text, s, n) : CM_OK;
}

bool cm_gw_chunker_has_buffered(const gw_chunker *c)
{
    return c->text.len > 0;
}

/* s[0..n) without a UTF-8 sequence cut short at its end (the rest of it
 * is still to be streamed). */
static size_t complete_prefix(const char *s, size_t n)
{
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xC0) == 0x80) continue; /* continuation byte */
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? n - back : n;
    }
    return n;
}

/* Appends the fence's opening line and a newline. */
static cm_rc add_open(buf *b, const char *s, const fence *fc)
{
    cm_rc rc = cm_buf_add(b, s + fc->open_off, fc->open_len);
    return rc ? rc : cm_buf_addc(b, '\n');
}

cm_rc cm_gw_chunker_drain(gw_chunker *c, bool force, gw_pieces *out)
{
    cm_rc rc = CM_OK;
    fences f = {NULL, 0};
    buf piece = BUF_INIT, rest = BUF_INIT;
    const char *s = c->text.data;
    size_t full = c->text.len, n = force ? full : complete_prefix(s, full), start = 0;
    const fence *reopen = NULL;
    size_t total = u16_upto(s, n, (size_t)c->max);
    if (n == 0 || (!force && total < (size_t)c->min)) goto out;
    if (force && total <= (size_t)c->max) {
        if (!is_blank(s, n)) CHECK(cm_gw_pieces_add(out, s, n));
        cm_buf_reset(&c->text);
        goto out;
    }
    CHECK(parse_fences(s, n, &f));
    while (start < n) {
        size_t pre = reopen ? cm_gw_u16len(s + reopen->open_off, reopen->open_len) + 1 : 0;
        size_t remaining = pre + u16_upto(s + start, n - start, (size_t)c->max);
        cm_buf_reset(&piece);
        if (reopen) CHECK(add_open(&piece, s, reopen));
        if (!force && remaining < (size_t)c->min) break;
        if (force && remaining <= (size_t)c->max) {
            CHECK(cm_buf_add(&piece, s + start, n - start));
            if (!is_blank(piece.data, piece.len))
                CHECK(cm_gw_pieces_add(out, piece.data, piece.len));
            start = n;
            reopen = NULL;
            break;
        }
        if (c->flush_on_paragraph && !force) {
            size_t at, len, limit = CM_MAX(1, (size_t)c->max - pre);
            if (next_paragraph(s, n, start, (size_t)c->min, &f, &at, &len) &&
                u16_upto(s + start, at - start, limit) <= limit) {
                CHECK(cm_buf_add(&piece, s + start, at - start));
                if (!is_blank(piece.data, piece.len))
                    CHECK(cm_gw_pieces_add(out, piece.data, piece.len));
                start = skip_newlines(s, n, at + len);
                reopen = NULL;
                continue;
            }
            if (remaining < (size_t)c->max) break;
        }
        size_t avail = (size_t)c->max - pre;
        pick p =
            pick_break(s, start, n - start, force ? 1 : (size_t)c->min, avail, c->pref, &f, pre);
        if (p.idx == 0) break;
        CHECK(cm_buf_add(&piece, s + start, p.idx));
        if (is_blank(piece.data, piece.len)) {
            start = skip_newlines(s, n, start + p.idx);
            reopen = NULL;
            continue;
        }
        if (p.split) {
            if (piece.data[piece.len - 1] != '\n') CHECK(cm_buf_addc(&piece, '\n'));
            /* The closing line: the opening line's indent and marker. */
            CHECK(cm_buf_add(&piece, s + p.split->open_off, p.split->indent + p.split->mlen));
            CHECK(cm_buf_addc(&piece, '\n'));
        }
        CHECK(cm_gw_pieces_add(out, piece.data, piece.len));
        if (p.split) {
            start += p.idx;
            reopen = p.split;
        } else {
            size_t b = start + p.idx;
            if (b < n && is_space(s[b])) b++;
            start = skip_newlines(s, n, b);
            reopen = NULL;
        }
        size_t next = (reopen ? cm_gw_u16len(s + reopen->open_off, reopen->open_len) + 1 : 0) +
                      u16_upto(s + start, n - start, (size_t)c->max);
        if (!force && next < (size_t)c->max && !c->flush_on_paragraph) break;
    }
    if (reopen)
        CHECK(add_open(&rest, s, reopen));
    else
        start = skip_newlines(s, n, start);
    CHECK(cm_buf_add(&rest, s + start, full - start));
    cm_buf_release(&c->text);
    c->text = rest;
    rest = (buf)BUF_INIT;
out:
    free(f.v);
    cm_buf_release(&piece);
    cm_buf_release(&rest);
    return rc;
}

cm_rc cm_gw_chunk_text(const char *s, size_t n, int max, gw_break_pref pref, gw_pieces *out)
{
    cm_rc rc;
    gw_chunker c;
    cm_gw_chunker_init(&c, 1, max, pref);
    CHECK(cm_gw_chunker_append(&c, s, n));
    CHECK(cm_gw_chunker_drain(&c, true, out));
out:
    cm_gw_chunker_release(&c);
    return rc;
}

void cm_gw_coalescer_init(gw_coalescer *q, int min, int max, int idle_ms, gw_break_pref pref)
{
    q->min = CM_MAX(1, min);
    q->max = CM_MAX(q->min, max);
    q->idle_ms = CM_MAX(0, idle_ms);
    q->joiner = pref == GW_BREAK_SENTENCE ? " " : pref == GW_BREAK_NEWLINE ? "\n" : "\n\n";
    q->deadline = 0;
    cm_buf_init(&q->text, 0);
}

void cm_gw_coalescer_release(gw_coalescer *q)
{
    cm_buf_release(&q->text);
}

static void arm(gw_coalescer *q, int64_t now)
{
    q->deadline = q->idle_ms > 0 ? now + q->idle_ms : 0;
}

cm_rc cm_gw_coalescer_end(gw_coalescer *q, gw_pieces *out)
{
    cm_rc rc = CM_OK;
    q->deadline = 0;
    if (q->text.len) rc = cm_gw_pieces_add(out, q->text.data, q->text.len);
    cm_buf_reset(&q->text);
    return rc;
}

cm_rc cm_gw_coalescer_push(gw_coalescer *q, const char *s, size_t n, int64_t now, gw_pieces *out)
{
    cm_rc rc = CM_OK;
    if (is_blank(s, n)) goto out;
    size_t have = cm_gw_u16len(q->text.data, q->text.len), add = cm_gw_u16len(s, n);
    size_t next = have ? have + strlen(q->joiner) + add : add;
    if (next > (size_t)q->max) {
        if (have) CHECK(cm_gw_coalescer_end(q, out));
        if (add >= (size_t)q->max || !have) {
            CHECK(cm_gw_pieces_add(out, s, n));
            goto out;
        }
        CHECK(cm_buf_add(&q->text, s, n));
        arm(q, now);
        goto out;
    }
    if (have) CHECK(cm_buf_adds(&q->text, q->joiner));
    CHECK(cm_buf_add(&q->text, s, n));
    if (next >= (size_t)q->max) {
        CHECK(cm_gw_coalescer_end(q, out));
        goto out;
    }
    arm(q, now);
out:
    return rc;
}

cm_rc cm_gw_coalescer_due(gw_coalescer *q, int64_t now, gw_pieces *out)
{
    if (!q->text.len || q->deadline == 0 || now < q->deadline) return CM_OK;
    if (cm_gw_u16len(q->text.data, q->text.len) < (size_t)q->min) {
        arm(q, now);
        return CM_OK;
    }
    return cm_gw_coalescer_end(q, out);
}

void cm_gw_stream_init(gw_stream *st, gw_stream_break brk, int chunk_min, int chunk_max,
                       gw_break_pref pref, int co_min, int co_max, int idle_ms)
{
    st->brk = brk;
    cm_gw_chunker_init(&st->chunker, chunk_min, chunk_max, pref);
    co_max = CM_MAX(1, CM_MIN(co_max, st->chunker.max));
    cm_gw_coalescer_init(&st->coalescer, CM_MIN(co_min, co_max), co_max,
                         CM_MIN(idle_ms, GW_COALESCE_IDLE_MS_MAX), pref);
}

void cm_gw_stream_release(gw_stream *st)
{
    cm_gw_chunker_release(&st->chunker);
    cm_gw_coalescer_release(&st->coalescer);
}

/* Drains the chunker and hands its pieces to the coalescer. */
static cm_rc stream_drain(gw_stream *st, bool force, int64_t now, gw_pieces *out)
{
    cm_rc rc;
    gw_pieces tmp;
    cm_gw_pieces_init(&tmp);
    CHECK(cm_gw_chunker_drain(&st->chunker, force, &tmp));
    for (size_t i = 0; i < tmp.n; i++)
        CHECK(cm_gw_coalescer_push(&st->coalescer, tmp.v[i], tmp.len[i], now, out));
out:
    cm_gw_pieces_release(&tmp);
    return rc;
}

cm_rc cm_gw_stream_delta(gw_stream *st, const char *s, size_t n, int64_t now, gw_pieces *out)
{
    cm_rc rc;
    CHECK(cm_gw_chunker_append(&st->chunker, s, n));
    if (st->brk == GW_STREAM_TEXT_END) CHECK(stream_drain(st, false, now, out));
out:
    return rc;
}

cm_rc cm_gw_stream_text_end(gw_stream *st, int64_t now, gw_pieces *out)
{
    return st->brk == GW_STREAM_TEXT_END ? stream_drain(st, true, now, out) : CM_OK;
}

cm_rc cm_gw_stream_due(gw_stream *st, int64_t now, gw_pieces *out)
{
    return cm_gw_coalescer_due(&st->coalescer, now, out);
}

cm_rc cm_gw_stream_message_end(gw_stream *st, int64_t now, gw_pieces *out)
{
    cm_rc rc;
    CHECK(stream_drain(st, true, now, out));
    CHECK(cm_gw_coalescer_end(&st->coalescer, out));
out:
    return rc;
}

static const char *const chatty_channels[] = {"discord", "slack", "signal", "mattermost"};

int cm_gw_coalesce_min_default(const char *channel)
{
    for (size_t i = 0; channel && i < ARRAY_LEN(chatty_channels); i++)
        if (strcmp(channel, chatty_channels[i]) == 0) return GW_COALESCE_MIN_CHATTY;
    return 0;
}

void cm_gw_stream_cfg_resolve(gw_stream_cfg *out, const char *channel, int text_limit,
                              const gw_stream_cfg *req)
{
    int limit = text_limit > 0 ? text_limit : cm_gw_channel_resolve_limit(channel, 0);
    out->pref = req->pref;
    out->chunk_max =
        CM_MAX(1, CM_MIN(req->chunk_max > 0 ? req->chunk_max : GW_CHUNK_MAX_DEFAULT, limit));
    out->chunk_min =
        CM_MIN(req->chunk_min > 0 ? req->chunk_min : GW_CHUNK_MIN_DEFAULT, out->chunk_max);
    int co_min = req->co_min > 0                           ? req->co_min
                 : cm_gw_coalesce_min_default(channel) > 0 ? cm_gw_coalesce_min_default(channel)
                                                           : out->chunk_min;
    int co_max = CM_MIN(req->co_max > 0 ? req->co_max : limit, limit);
    out->co_max = CM_MAX(1, CM_MIN(co_max, out->chunk_max));
    out->co_min = CM_MIN(co_min, out->co_max);
    int idle = req->idle_ms >= 0 ? req->idle_ms : GW_COALESCE_IDLE_MS_DEFAULT;
    out->idle_ms = CM_MIN(idle, GW_COALESCE_IDLE_MS_MAX);
}

int cm_gw_human_delay_ms(gw_delay_mode mode, int min_ms, int max_ms, uint32_t rnd)
{
    if (mode == GW_DELAY_OFF) return 0;
    int lo = GW_HUMAN_DELAY_MIN_MS, hi = GW_HUMAN_DELAY_MAX_MS;
    if (mode == GW_DELAY_CUSTOM) {
        if (min_ms > 0) lo = min_ms;
        if (max_ms > 0) hi = max_ms;
    }
    if (hi <= lo) return lo;
    return lo + (int)(((uint64_t)rnd * (uint64_t)(hi - lo + 1)) >> 32);
}
