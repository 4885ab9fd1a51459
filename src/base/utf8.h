/*
 * utf8.h — the UTF-8 primitives clawmem needs without ICU: decoding, validity,
 * repair, the CJK classes that drive chunk weighting and keyword search, and a
 * coarse "is this a word character" test for query tokens.
 */
#ifndef CM_UTF8_H
#define CM_UTF8_H

#include "buf.h"

/* Decodes one code point at s[0..n). Returns its byte length (>= 1) and sets
 * *cp; an invalid or truncated sequence yields length 1 and *cp = -1. */
size_t cm_utf8_decode(const char *s, size_t n, int32_t *cp);

/* Byte length of a valid prefix of s[0..n) (the first invalid byte's index). */
size_t cm_utf8_valid_prefix(const char *s, size_t n);

/* Byte length of the first max code points of s[0..n) (an invalid byte
 * counts as one); *chars (may be NULL) receives how many were counted. */
size_t cm_utf8_prefix_chars(const char *s, size_t n, size_t max, size_t *chars);

/* Appends s with every invalid byte replaced by U+FFFD. */
cm_rc cm_utf8_repair(buf *out, const char *s, size_t n);

/* Rewrites JSON text s[0..n) in place, at the same length, so that jansson's
 * defaults read what a lenient sender wrote: inside strings, the escapes
 * \u0000 and lone surrogates (\ud83d without its low half, or a low half
 * alone) become \ufffd and raw control bytes a space; anywhere, a byte that
 * is not UTF-8 becomes '?'. Returns how many places it rewrote. */
size_t cm_utf8_json_tolerate(char *s, size_t n);

/* Appends s for a one-line message or a terminal: control characters
 * (C0, DEL, C1) are escaped ("\\n", "\\r", "\\t", others "\\xNN", C1
 * "\\u0085"), and so is every byte of invalid UTF-8 ("\\xff"), so a file name
 * or a server's answer cannot start a line or a terminal escape of its own.
 * Stops at a character boundary with CM_ETOOBIG when out->max is reached
 * (what fitted stays appended). */
cm_rc cm_utf8_escape_line(buf *out, const char *s, size_t n);

/* True when s[0..n) holds something cm_utf8_escape_line would change. */
bool cm_utf8_needs_escape(const char *s, size_t n);

/* Appends the UTF-8 encoding of cp. */
cm_rc cm_utf8_put(buf *out, int32_t cp);

/* Han, Hiragana, Katakana, Hangul (syllables and jamo), CJK compatibility and
 * extension blocks: characters written without spaces between words. */
bool cm_utf8_is_cjk(int32_t cp);

/* Letters, digits, '_', and any non-ASCII code point outside the punctuation,
 * symbol and space blocks: what a query token is made of. */
bool cm_utf8_is_word(int32_t cp);

/* ASCII lower-casing only; other scripts are compared as written. */
static inline int32_t utf8_lower(int32_t cp)
{
    return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
}

/* Appends text for the keyword index: runs of CJK characters become their
 * overlapping bigrams plus the run's last character ("東京都" → "東京 京都 都"),
 * each separated by spaces, so a two-character word matches inside a sentence
 * written without spaces; everything else is copied unchanged. */
cm_rc cm_utf8_cjk_expand(buf *out, const char *s, size_t n);

/* Appends s as a JSON string literal, quotes included. The result is always
 * valid UTF-8 JSON whatever s holds: invalid UTF-8 becomes U+FFFD (as
 * Node's UTF-8 decoding shows a file name QuantumClaw reads), and control
 * characters (C0, DEL, C1) are \u escapes, never raw bytes. */
cm_rc cm_utf8_add_json_str(buf *b, const char *s, size_t n);

/* A JSON writer with a sticky error: appends to b until one call fails,
 * keeps that rc and does nothing after it, so a run of appends is checked
 * once, at its end; the buffer keeps what the calls before the failing one
 * wrote.   jw w = {out, CM_OK}; cm_jw_raw(&w, "{\"path\":"); cm_jw_str(&w, p);
 *          cm_jw_raw(&w, "}"); return w.rc; */
typedef struct jw {
    buf *b;
    cm_rc rc;
} jw;

void cm_jw_raw(jw *w, const char *s); /* s as it is (JSON punctuation, keys) */
void cm_jw_str(jw *w, const char *s); /* s as a JSON string, NULL as null */
void cm_jw_printf(jw *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
