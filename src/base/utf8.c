/*
 * utf8.c — decoding by the Unicode 15 well-formedness table (no overlongs, no
 * surrogates, nothing above U+10FFFF) and the character classes of utf8.h.
 */
#include "utf8.h"

size_t cm_utf8_decode(const char *str, size_t n, int32_t *cp)
{
    const unsigned char *s = (const unsigned char *)str;
    *cp = -1;
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = (int32_t)c;
        return 1;
    }
    size_t len;
    int32_t v;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        v = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 1;
    }
    if (n < len) return 1;
    for (size_t i = 1; i < len; i++) {
        unsigned b = s[i];
        if (b < lo || b > hi) return 1;
        lo = 0x80;
        hi = 0xBF;
        v = (v << 6) | (int32_t)(b & 0x3F);
    }
    *cp = v;
    return len;
}

size_t cm_utf8_valid_prefix(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        int32_t cp;
        size_t l = cm_utf8_decode(s + i, n - i, &cp);
        if (cp < 0) return i;
        i += l;
    }
    return n;
}

cm_rc cm_utf8_put(buf *out, int32_t cp)
{
    char t[4];
    size_t n;
    if (cp < 0x80) {
        t[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        t[0] = (char)(0xC0 | (cp >> 6));
        t[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        t[0] = (char)(0xE0 | (cp >> 12));
        t[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        t[0] = (char)(0xF0 | (cp >> 18));
        t[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        t[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return cm_buf_add(out, t, n);
}

cm_rc cm_utf8_repair(buf *out, const char *s, size_t n)
{
    cm_rc rc = CM_OK;
    size_t i = 0;
    while (i < n && !rc) {
        size_t good = cm_utf8_valid_prefix(s + i, n - i);
        rc = cm_buf_add(out, s + i, good);
        i += good;
        if (i < n && !rc) {
            rc = cm_utf8_put(out, 0xFFFD);
            i++;
        }
    }
    return rc;
}

bool cm_utf8_needs_escape(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) return true;
        if (c < 0x80) {
            i++;
            continue;
        }
        int32_t cp;
        i += cm_utf8_decode(s + i, n - i, &cp);
        if (cp < 0 || cp <= 0x9f) return true;
    }
    return false;
}

cm_rc cm_utf8_escape_line(buf *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    cm_rc rc = CM_OK;
    for (size_t i = 0; i < n && !rc;) {
        unsigned char c = (unsigned char)s[i];
        int32_t cp;
        size_t l = cm_utf8_decode(s + i, n - i, &cp);
        if (cp >= 0x20 && cp != 0x7f && (cp < 0x80 || cp > 0x9f)) {
            rc = cm_buf_add(out, s + i, l);
        } else if (cp == '\n' || cp == '\r' || cp == '\t') {
            char e[2] = {'\\', cp == '\n' ? 'n' : cp == '\r' ? 'r' : 't'};
            rc = cm_buf_add(out, e, 2);
        } else if (cp >= 0x80) { /* C1 */
            char e[6] = {'\\', 'u', '0', '0', hex[cp >> 4], hex[cp & 15]};
            rc = cm_buf_add(out, e, 6);
        } else { /* other C0, DEL, or a byte of invalid UTF-8 */
            char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
            rc = cm_buf_add(out, e, 4);
        }
        i += l;
    }
    return rc;
}

bool cm_utf8_is_cjk(int32_t cp)
{
    return (cp >= 0x1100 && cp <= 0x11FF)       /* Hangul Jamo */
           || (cp >= 0x3040 && cp <= 0x30FF)    /* Hiragana, Katakana */
           || (cp >= 0x3130 && cp <= 0x318F)    /* Hangul compatibility jamo */
           || (cp >= 0x31F0 && cp <= 0x31FF)    /* Katakana phonetic extensions */
           || (cp >= 0x3400 && cp <= 0x4DBF)    /* CJK extension A */
           || (cp >= 0x4E00 && cp <= 0x9FFF)    /* CJK unified ideographs */
           || (cp >= 0xA960 && cp <= 0xA97F)    /* Hangul jamo extended A */
           || (cp >= 0xAC00 && cp <= 0xD7AF)    /* Hangul syllables */
           || (cp >= 0xF900 && cp <= 0xFAFF)    /* CJK compatibility ideographs */
           || (cp >= 0xFF66 && cp <= 0xFF9F)    /* halfwidth Katakana */
           || (cp >= 0x20000 && cp <= 0x3134F); /* extensions B..G */
}

bool cm_utf8_is_word(int32_t cp)
{
    if (cp < 0) return false;
    if (cp < 0x80)
        return (cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') ||
               cp == '_';
    if (cp <= 0xBF || cp == 0xD7 || cp == 0xF7) return false; /* Latin-1 punctuation */
    if (cp >= 0x2000 && cp <= 0x2BFF) return false;           /* punctuation, symbols, arrows */
    if (cp >= 0x2E00 && cp <= 0x2E7F) return false;           /* supplemental punctuation */
    if (cp >= 0x3000 && cp <= 0x303F) return false;           /* CJK symbols and punctuation */
    if (cp >= 0xFE10 && cp <= 0xFE6F) return false;           /* vertical, small form variants */
    if (cp >= 0xFF00 && cp <= 0xFF0F) return false;           /* fullwidth punctuation */
    if (cp >= 0xFF1A && cp <= 0xFF20) return false;
    if (cp >= 0xFF3B && cp <= 0xFF40) return false;
    if (cp >= 0xFF5B && cp <= 0xFF65) return false;
    if (cp == 0xFEFF || cp == 0xFFFD) return false;
    if (cp >= 0x1F000 && cp <= 0x1FAFF) return false; /* emoji and pictographs */
    return true;
}

cm_rc cm_utf8_cjk_expand(buf *out, const char *s, size_t n)
{
    cm_rc rc = CM_OK;
    size_t i = 0, run = 0; /* run: start of the bytes copied as they are */
    while (i < n && !rc) {
        /* Below 0xE1 a byte is ASCII, a continuation, or the lead of a
         * character before U+1000: never CJK (the first range is U+1100) */
        if ((unsigned char)s[i] < 0xE1) {
            i++;
            continue;
        }
        int32_t cp;
        size_t l = cm_utf8_decode(s + i, n - i, &cp);
        if (!cm_utf8_is_cjk(cp)) {
            i += l;
            continue;
        }
        rc = cm_buf_add(out, s + run, i - run);
        /* A run of CJK characters: emit "ab bc cd d". */
        size_t prev = i, prevlen = l;
        i += l;
        if (!rc) rc = cm_buf_addc(out, ' ');
        for (;;) {
            int32_t next;
            size_t nl = i < n ? cm_utf8_decode(s + i, n - i, &next) : 0;
            if (!nl || !cm_utf8_is_cjk(next)) break;
            if (!rc) rc = cm_buf_add(out, s + prev, prevlen + nl);
            if (!rc) rc = cm_buf_addc(out, ' ');
            prev = i;
            prevlen = nl;
            i += nl;
        }
        if (!rc) rc = cm_buf_add(out, s + prev, prevlen);
        if (!rc) rc = cm_buf_addc(out, ' ');
        run = i;
    }
    if (!rc) rc = cm_buf_add(out, s + run, n - run);
    return rc;
}

cm_rc cm_utf8_add_json_str(buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    cm_rc rc = cm_buf_addc(b, '"');
    size_t run = 0; /* start of the pending run of bytes that need no escape */
    for (size_t i = 0; i < n && !rc;) {
        unsigned char c = (unsigned char)s[i];
        int32_t cp = c;
        size_t l = 1;
        if (c >= 0x80) l = cm_utf8_decode(s + i, n - i, &cp);
        if (cp >= 0x20 && cp != '"' && cp != '\\' && (cp < 0x7f || cp > 0x9f)) {
            i += l;
            continue;
        }
        rc = cm_buf_add(b, s + run, i - run);
        i += l;
        run = i;
        if (rc) break;
        switch (cp) {
        case '"':
            rc = cm_buf_add(b, "\\\"", 2);
            break;
        case '\\':
            rc = cm_buf_add(b, "\\\\", 2);
            break;
        case '\n':
            rc = cm_buf_add(b, "\\n", 2);
            break;
        case '\r':
            rc = cm_buf_add(b, "\\r", 2);
            break;
        case '\t':
            rc = cm_buf_add(b, "\\t", 2);
            break;
        case -1: /* invalid UTF-8: U+FFFD, as a JSON string must be valid UTF-8 */
            rc = cm_buf_add(b, "\xEF\xBF\xBD", 3);
            break;
        default: { /* C0, DEL and C1 controls */
            char esc[6] = {'\\', 'u', '0', '0', hex[cp >> 4], hex[cp & 15]};
            rc = cm_buf_add(b, esc, 6);
        }
        }
    }
    if (!rc) rc = cm_buf_add(b, s + run, n - run);
    if (!rc) rc = cm_buf_addc(b, '"');
    return rc;
}

/* A failed call leaves the buffer as it was before the call. */
static void jw_end(jw *w, size_t before, cm_rc rc)
{
    w->rc = rc;
    if (rc && w->b->len > before) w->b->data[w->b->len = before] = 0;
}

void cm_jw_raw(jw *w, const char *s)
{
    if (!w->rc) w->rc = cm_buf_adds(w->b, s);
}

void cm_jw_str(jw *w, const char *s)
{
    if (w->rc) return;
    size_t before = w->b->len;
    jw_end(w, before, s ? cm_utf8_add_json_str(w->b, s, strlen(s)) : cm_buf_adds(w->b, "null"));
}

void cm_jw_printf(jw *w, const char *fmt, ...)
{
    if (w->rc) return;
    va_list ap;
    va_start(ap, fmt);
    w->rc = cm_buf_vprintf(w->b, fmt, ap);
    va_end(ap);
}

/* The value of 4 hex digits at p; -1 when they are not. */
static int32_t hex4(const char *p)
{
    int32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

size_t cm_utf8_json_tolerate(char *s, size_t n)
{
    size_t fixed = 0;
    bool in = false; /* inside a string */
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            int32_t cp;
            size_t l = cm_utf8_decode(s + i, n - i, &cp);
            if (cp < 0) {
                s[i] = '?';
                fixed++;
                l = 1;
            }
            i += l;
            continue;
        }
        if (!in || c == '"') {
            in = in ? false : c == '"';
            i++;
            continue;
        }
        if (c < 0x20) {
            s[i++] = ' ';
            fixed++;
            continue;
        }
        if (c != '\\') {
            i++;
            continue;
        }
        int32_t u = i + 6 <= n && s[i + 1] == 'u' ? hex4(s + i + 2) : -1;
        if (u < 0) { /* another escape (or a bad one, left to the parser) */
            i += 2;
            continue;
        }
        bool pair = u >= 0xD800 && u <= 0xDBFF && i + 12 <= n && s[i + 6] == '\\' &&
                    s[i + 7] == 'u' && hex4(s + i + 8) >= 0xDC00 && hex4(s + i + 8) <= 0xDFFF;
        if (pair) {
            i += 12;
            continue;
        }
        if (u == 0 || (u >= 0xD800 && u <= 0xDFFF)) {
            memcpy(s + i, "\\ufffd", 6);
            fixed++;
        }
        i += 6;
    }
    return fixed;
}

size_t cm_utf8_prefix_chars(const char *s, size_t n, size_t max, size_t *chars)
{
    size_t i = 0, k = 0;
    while (i < n && k < max) {
        int32_t cp;
        i += cm_utf8_decode(s + i, n - i, &cp); /* >= 1 */
        k++;
    }
    if (chars) *chars = k;
    return i;
}
