/*
 * json5.c — recursive-descent JSON5 parser (spec: json5.org, ES5.1 grammar for
 * identifiers simplified to ASCII letters, digits, '_', '$' and any non-ASCII
 * UTF-8). Values become jansson objects; member positions go to doc->pos.
 */
#include <float.h>
#include <limits.h>
#include <math.h>

#include "buf.h"
#include "json5.h"
#include "utf8.h"

#define JSON5_MAX_DEPTH 128

typedef struct parser {
    const char *s;
    size_t n, i;
    int line;
    size_t line_start;
    const char *name;
    json5_doc *doc;
    char *err;
    size_t errlen;
} parser;

static cm_rc perr(parser *p, const char *what)
{
    return cm_seterr(p->err, p->errlen, CM_ECONFIG, "%s:%d:%zu: %s", p->name, p->line,
                     p->i - p->line_start + 1, what);
}

static void advance(parser *p, size_t k)
{
    while (k-- && p->i < p->n) {
        if (p->s[p->i] == '\n') {
            p->line++;
            p->line_start = p->i + 1;
        }
        p->i++;
    }
}

static int peek(const parser *p, size_t off)
{
    return p->i + off < p->n ? (unsigned char)p->s[p->i + off] : -1;
}

static cm_rc skip_space(parser *p)
{
    for (;;) {
        int c = peek(p, 0);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
            advance(p, 1);
        } else if (c == 0xC2 && peek(p, 1) == 0xA0) { /* no-break space */
            advance(p, 2);
        } else if (c == 0xEF && peek(p, 1) == 0xBB && peek(p, 2) == 0xBF) { /* BOM */
            advance(p, 3);
        } else if (c == 0xE2 && peek(p, 1) == 0x80 && (peek(p, 2) == 0xA8 || peek(p, 2) == 0xA9)) {
            advance(p, 3); /* line / paragraph separator */
        } else if (c == '/' && peek(p, 1) == '/') {
            while (p->i < p->n && p->s[p->i] != '\n')
                advance(p, 1);
        } else if (c == '/' && peek(p, 1) == '*') {
            advance(p, 2);
            while (p->i < p->n && !(p->s[p->i] == '*' && peek(p, 1) == '/'))
                advance(p, 1);
            if (p->i >= p->n) return perr(p, "unterminated /* comment");
            advance(p, 2);
        } else {
            return CM_OK;
        }
    }
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static cm_rc parse_string(parser *p, buf *out)
{
    int q = peek(p, 0);
    advance(p, 1);
    for (;;) {
        int c = peek(p, 0);
        if (c < 0) return perr(p, "unterminated string");
        if (c == q) {
            advance(p, 1);
            return CM_OK;
        }
        if (c == '\n' || c == '\r') return perr(p, "newline in string (escape it as \\n)");
        if (c == 0) return perr(p, "NUL character in string");
        if (c != '\\') {
            if (cm_buf_addc(out, (char)c)) return CM_ENOMEM;
            advance(p, 1);
            continue;
        }
        advance(p, 1);
        int e = peek(p, 0);
        int32_t cp = -1;
        switch (e) {
        case 'b':
            cp = '\b';
            break;
        case 'f':
            cp = '\f';
            break;
        case 'n':
            cp = '\n';
            break;
        case 'r':
            cp = '\r';
            break;
        case 't':
            cp = '\t';
            break;
        case 'v':
            cp = '\v';
            break;
        case '0':
            if (hexval(peek(p, 1)) >= 0 && peek(p, 1) <= '9') return perr(p, "octal escape");
            cp = 0;
            break;
        case '\n':
            advance(p, 1);
            continue; /* line continuation */
        case '\r':
            advance(p, 1);
            if (peek(p, 0) == '\n') advance(p, 1);
            continue;
        case 'x': {
            int h1 = hexval(peek(p, 1)), h2 = hexval(peek(p, 2));
            if (h1 < 0 || h2 < 0) return perr(p, "bad \\x escape");
            cp = h1 * 16 + h2;
            advance(p, 2);
            break;
        }
        case 'u': {
            int32_t v = 0;
            for (int k = 1; k <= 4; k++) {
                int h = hexval(peek(p, (size_t)k));
                if (h < 0) return perr(p, "bad \\u escape");
                v = v * 16 + h;
            }
            advance(p, 4);
            if (v >= 0xD800 && v <= 0xDBFF && peek(p, 1) == '\\' && peek(p, 2) == 'u') {
                int32_t lo = 0;
                for (int k = 3; k <= 6; k++) {
                    int h = hexval(peek(p, (size_t)k));
                    if (h < 0) return perr(p, "bad \\u escape");
                    lo = lo * 16 + h;
                }
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                    advance(p, 6);
                }
            }
            if (v >= 0xD800 && v <= 0xDFFF) return perr(p, "unpaired surrogate in \\u escape");
            cp = v;
            break;
        }
        case -1:
            return perr(p, "unterminated string");
        default:
            if (e >= '1' && e <= '9') return perr(p, "bad escape");
            /* any other character escapes itself, including ' " \ / */
            if (cm_buf_addc(out, (char)e)) return CM_ENOMEM;
            advance(p, 1);
            continue;
        }
        if (cp == 0) return perr(p, "NUL character in string");
        if (cm_utf8_put(out, cp)) return CM_ENOMEM;
        advance(p, 1);
    }
}

static bool is_ident_char(int c, bool first)
{
    if (c < 0) return false;
    if (c >= 0x80) return true;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$') return true;
    return !first && c >= '0' && c <= '9';
}

static cm_rc parse_value(parser *p, json_t **out, int depth);

static cm_rc add_pos(parser *p, const json_t *parent, const char *key, size_t index, int line,
                     int col)
{
    json5_doc *d = p->doc;
    if (d->npos == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 32;
        json5_pos *np = realloc(d->pos, cap * sizeof *np);
        if (!np) return CM_ENOMEM;
        d->pos = np;
        d->cap = cap;
    }
    json5_pos *e = &d->pos[d->npos];
    e->parent = parent;
    e->key = key ? cm_strdup(key) : NULL;
    if (key && !e->key) return CM_ENOMEM;
    e->index = index;
    e->line = line;
    e->col = col;
    d->npos++;
    return CM_OK;
}

static cm_rc parse_object(parser *p, json_t **out, int depth)
{
    cm_rc rc = CM_OK;
    buf key = BUF_INIT;
    json_t *obj = json_object();
    if (!obj) return CM_ENOMEM;
    advance(p, 1); /* { */
    for (;;) {
        CHECK(skip_space(p));
        int c = peek(p, 0);
        if (c == '}') {
            advance(p, 1);
            break;
        }
        cm_buf_reset(&key);
        int kline = p->line, kcol = (int)(p->i - p->line_start + 1);
        if (c == '"' || c == '\'') {
            CHECK(parse_string(p, &key));
        } else if (is_ident_char(c, true)) {
            while (is_ident_char(peek(p, 0), false)) {
                if (cm_buf_addc(&key, (char)peek(p, 0))) CHECK(CM_ENOMEM);
                advance(p, 1);
            }
        } else {
            CHECK(
                perr(p, c < 0 ? "unexpected end of file, expected '}'" : "expected a key or '}'"));
        }
        if (cm_utf8_valid_prefix(key.data, key.len) != key.len)
            CHECK(perr(p, "key is not valid UTF-8"));
        CHECK(skip_space(p));
        if (peek(p, 0) != ':') CHECK(perr(p, "expected ':' after key"));
        advance(p, 1);
        CHECK(skip_space(p));
        json_t *v = NULL;
        CHECK(parse_value(p, &v, depth + 1));
        const char *k = key.data;
        if (json_object_set_new(obj, k, v)) CHECK(CM_ENOMEM);
        CHECK(add_pos(p, obj, k, 0, kline, kcol));
        CHECK(skip_space(p));
        c = peek(p, 0);
        if (c == ',') {
            advance(p, 1);
            continue;
        }
        if (c == '}') {
            advance(p, 1);
            break;
        }
        CHECK(perr(p, c < 0 ? "unexpected end of file, expected '}'" : "expected ',' or '}'"));
    }
out:
    cm_buf_release(&key);
    if (rc)
        json_decref(obj);
    else
        *out = obj;
    return rc;
}

static cm_rc parse_array(parser *p, json_t **out, int depth)
{
    cm_rc rc = CM_OK;
    json_t *arr = json_array();
    if (!arr) return CM_ENOMEM;
    advance(p, 1); /* [ */
    for (;;) {
        CHECK(skip_space(p));
        int c = peek(p, 0);
        if (c == ']') {
            advance(p, 1);
            break;
        }
        int line = p->line, col = (int)(p->i - p->line_start + 1);
        json_t *v = NULL;
        CHECK(parse_value(p, &v, depth + 1));
        if (json_array_append_new(arr, v)) CHECK(CM_ENOMEM);
        CHECK(add_pos(p, arr, NULL, json_array_size(arr) - 1, line, col));
        CHECK(skip_space(p));
        c = peek(p, 0);
        if (c == ',') {
            advance(p, 1);
            continue;
        }
        if (c == ']') {
            advance(p, 1);
            break;
        }
        CHECK(perr(p, c < 0 ? "unexpected end of file, expected ']'" : "expected ',' or ']'"));
    }
out:
    if (rc)
        json_decref(arr);
    else
        *out = arr;
    return rc;
}

static bool match_word(parser *p, const char *w)
{
    size_t n = strlen(w);
    if (p->n - p->i < n || memcmp(p->s + p->i, w, n) != 0) return false;
    if (is_ident_char(peek(p, n), false)) return false;
    advance(p, n);
    return true;
}

static cm_rc parse_number(parser *p, json_t **out)
{
    double sign = 1;
    if (peek(p, 0) == '+' || peek(p, 0) == '-') {
        sign = peek(p, 0) == '-' ? -1 : 1;
        advance(p, 1);
    }
    /* jansson holds finite numbers only: Infinity becomes ±DBL_MAX (out of
     * range for every setting), NaN is refused. */
    if (match_word(p, "Infinity")) {
        *out = json_real(sign * DBL_MAX);
        return *out ? CM_OK : CM_ENOMEM;
    }
    if (match_word(p, "NaN")) return perr(p, "NaN is not a usable value");
    if (peek(p, 0) == '0' && (peek(p, 1) == 'x' || peek(p, 1) == 'X')) {
        advance(p, 2);
        uint64_t v = 0;
        size_t digits = 0;
        while (hexval(peek(p, 0)) >= 0) {
            if (v >> 60) return perr(p, "hex number too large");
            v = v * 16 + (uint64_t)hexval(peek(p, 0));
            advance(p, 1);
            digits++;
        }
        if (!digits) return perr(p, "expected hex digits");
        if (v > (uint64_t)INT64_MAX) return perr(p, "hex number too large");
        json_int_t iv = (json_int_t)v;
        *out = json_integer(sign < 0 ? -iv : iv);
        return *out ? CM_OK : CM_ENOMEM;
    }
    size_t start = p->i;
    bool is_real = false, digits = false;
    while (peek(p, 0) >= '0' && peek(p, 0) <= '9')
        advance(p, 1), digits = true;
    if (peek(p, 0) == '.') {
        is_real = true;
        advance(p, 1);
        while (peek(p, 0) >= '0' && peek(p, 0) <= '9')
            advance(p, 1), digits = true;
    }
    if (!digits) return perr(p, "unexpected character, expected a value");
    if (peek(p, 0) == 'e' || peek(p, 0) == 'E') {
        is_real = true;
        advance(p, 1);
        if (peek(p, 0) == '+' || peek(p, 0) == '-') advance(p, 1);
        if (!(peek(p, 0) >= '0' && peek(p, 0) <= '9')) return perr(p, "bad exponent");
        while (peek(p, 0) >= '0' && peek(p, 0) <= '9')
            advance(p, 1);
    }
    if (is_ident_char(peek(p, 0), false)) return perr(p, "bad number");
    char tmp[64];
    size_t len = p->i - start;
    if (len >= sizeof tmp) is_real = true;
    if (!is_real) {
        memcpy(tmp, p->s + start, len);
        tmp[len] = 0;
        char *end;
        long long v = strtoll(tmp, &end, 10);
        if (v != LLONG_MAX) {
            *out = json_integer((json_int_t)(sign < 0 ? -v : v));
            return *out ? CM_OK : CM_ENOMEM;
        }
    }
    char *num = cm_strndup(p->s + start, len);
    if (!num) return CM_ENOMEM;
    double d = strtod(num, NULL);
    free(num);
    if (!isfinite(d)) d = DBL_MAX;
    *out = json_real(sign * d);
    return *out ? CM_OK : CM_ENOMEM;
}

static cm_rc parse_value(parser *p, json_t **out, int depth)
{
    if (depth > JSON5_MAX_DEPTH) return perr(p, "nesting too deep");
    int c = peek(p, 0);
    if (c == '{') return parse_object(p, out, depth);
    if (c == '[') return parse_array(p, out, depth);
    if (c == '"' || c == '\'') {
        buf s = BUF_INIT;
        cm_rc rc = parse_string(p, &s);
        if (!rc) {
            if (cm_utf8_valid_prefix(s.data, s.len) != s.len) {
                rc = perr(p, "string is not valid UTF-8");
            } else {
                *out = json_stringn(s.data, s.len);
                if (!*out) rc = CM_ENOMEM;
            }
        }
        cm_buf_release(&s);
        return rc;
    }
    if (match_word(p, "true")) return (*out = json_true()) ? CM_OK : CM_ENOMEM;
    if (match_word(p, "false")) return (*out = json_false()) ? CM_OK : CM_ENOMEM;
    if (match_word(p, "null")) return (*out = json_null()) ? CM_OK : CM_ENOMEM;
    if (c < 0) return perr(p, "unexpected end of file, expected a value");
    return parse_number(p, out);
}

cm_rc cm_json5_parse(const char *text, size_t n, const char *name, json5_doc *doc, char *err,
                     size_t errlen)
{
    memset(doc, 0, sizeof *doc);
    parser p = {text, n, 0, 1, 0, name ? name : "<config>", doc, err, errlen};
    cm_rc rc = skip_space(&p);
    if (!rc) rc = parse_value(&p, &doc->root, 0);
    if (!rc) rc = skip_space(&p);
    if (!rc && p.i < p.n) rc = perr(&p, "unexpected content after the value");
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "%s: out of memory", p.name);
    if (rc) cm_json5_doc_release(doc);
    return rc;
}

void cm_json5_doc_release(json5_doc *doc)
{
    for (size_t i = 0; i < doc->npos; i++)
        free(doc->pos[i].key);
    free(doc->pos);
    json_decref(doc->root);
    memset(doc, 0, sizeof *doc);
}

bool cm_json5_where(const json5_doc *doc, const json_t *parent, const char *key, size_t index,
                    int *line, int *col)
{
    /* Last match wins: a duplicated key keeps the value that was set last. */
    for (size_t i = doc->npos; i-- > 0;) {
        const json5_pos *e = &doc->pos[i];
        if (e->parent != parent) continue;
        if (key ? (e->key && strcmp(e->key, key) == 0) : (!e->key && e->index == index)) {
            *line = e->line;
            *col = e->col;
            return true;
        }
    }
    return false;
}
