/*
 * redact.c — secrets out of messages built from remote bytes (see redact.h).
 * Three passes over a bounded window of the input: the exact secrets, then
 * the credential patterns, then the one-line clean-up and the length cap.
 */
#include <strings.h>

#include "redact.h"
#include "utf8.h"

/* Bytes of a body looked at; a message shows a few hundred characters. */
#define REDACT_WINDOW (64u << 10)

void cm_redact_init(redact *r)
{
    memset(r, 0, sizeof *r);
    r->patterns = REDACT_ALL;
}

void cm_redact_release(redact *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->secrets[i]);
    free(r->secrets);
    memset(r, 0, sizeof *r);
}

static cm_rc add_n(redact *r, const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    if (n < 4) return CM_OK;
    for (size_t i = 0; i < r->n; i++)
        if (strlen(r->secrets[i]) == n && !memcmp(r->secrets[i], s, n)) return CM_OK;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 8;
        char **v = realloc(r->secrets, cap * sizeof *v);
        if (!v) return CM_ENOMEM;
        r->secrets = v;
        r->cap = cap;
    }
    if (!(r->secrets[r->n] = cm_strndup(s, n))) return CM_ENOMEM;
    r->n++;
    return CM_OK;
}

cm_rc cm_redact_add(redact *r, const char *secret)
{
    return secret ? add_n(r, secret, strlen(secret)) : CM_OK;
}

static bool prefix_ci(const char *s, size_t n, const char *p)
{
    size_t k = strlen(p);
    return n >= k && strncasecmp(s, p, k) == 0;
}

cm_rc cm_redact_add_header(redact *r, const char *line)
{
    if (!line) return CM_OK;
    const char *colon = strchr(line, ':');
    if (!colon) return CM_OK;
    size_t nl = (size_t)(colon - line);
    static const char *const plain[] = {"content-type", "accept",         "user-agent",
                                        "expect",       "content-length", "accept-encoding"};
    for (size_t i = 0; i < ARRAY_LEN(plain); i++)
        if (nl == strlen(plain[i]) && !strncasecmp(line, plain[i], nl)) return CM_OK;
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    cm_rc rc = add_n(r, v, strlen(v));
    const char *sp = strchr(v, ' ');
    if (!rc && sp &&
        (prefix_ci(v, strlen(v), "bearer ") || prefix_ci(v, strlen(v), "basic ") ||
         prefix_ci(v, strlen(v), "token ")))
        rc = add_n(r, sp + 1, strlen(sp + 1));
    return rc;
}

/* The span [*a, *b) of url's authority (after "scheme://"), or false. */
static bool authority(const char *url, size_t *a, size_t *b)
{
    const char *sep = strstr(url, "://");
    if (!sep) return false;
    *a = (size_t)(sep + 3 - url);
    *b = *a + strcspn(url + *a, "/?#");
    return true;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* A secret as written in a URL and, when it holds %XX escapes, as sent. */
static cm_rc add_pct_decoded(redact *r, const char *s, size_t n)
{
    cm_rc rc = add_n(r, s, n);
    if (rc || !memchr(s, '%', n)) return rc;
    buf d = BUF_INIT;
    for (size_t i = 0; i < n && !rc; i++) {
        if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            rc = cm_buf_addc(&d, (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2])));
            i += 2;
        } else {
            rc = cm_buf_addc(&d, s[i]);
        }
    }
    if (!rc && d.len) rc = add_n(r, d.data, d.len);
    cm_buf_release(&d);
    return rc;
}

cm_rc cm_redact_add_url(redact *r, const char *url)
{
    if (!url) return CM_OK;
    cm_rc rc = CM_OK;
    size_t a, b;
    if (authority(url, &a, &b)) {
        const char *at = memchr(url + a, '@', b - a);
        if (at) {
            size_t ui = (size_t)(at - url) - a;
            const char *colon = memchr(url + a, ':', ui);
            if (colon) {
                rc = add_pct_decoded(r, url + a, (size_t)(colon - url) - a);
                if (!rc) rc = add_pct_decoded(r, colon + 1, (size_t)(at - colon) - 1);
            } else {
                rc = add_pct_decoded(r, url + a, ui);
            }
        }
    }
    const char *q = strchr(url, '?');
    while (q && !rc) {
        q++;
        size_t len = strcspn(q, "&#");
        const char *eq = memchr(q, '=', len);
        if (eq) rc = add_pct_decoded(r, eq + 1, len - (size_t)(eq + 1 - q));
        q = q[len] == '&' ? q + len : NULL;
    }
    return rc;
}

static bool conninfo_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

cm_rc cm_redact_add_conninfo(redact *r, const char *dsn)
{
    if (!dsn) return CM_OK;
    cm_rc rc = add_n(r, dsn, strlen(dsn));
    if (rc || strstr(dsn, "://")) return rc ? rc : cm_redact_add_url(r, dsn);
    /* key = value pairs as libpq reads them: a value unquoted up to a space,
     * or in single quotes; a backslash escapes the next character */
    const char *p = dsn;
    while (!rc) {
        while (conninfo_space(*p))
            p++;
        if (!*p) break;
        const char *k = p;
        while (*p && !conninfo_space(*p) && *p != '=')
            p++;
        size_t kl = (size_t)(p - k);
        const char *q = p;
        while (conninfo_space(*q))
            q++;
        if (*q != '=') { /* a word libpq will name: it may be a password's half */
            rc = add_n(r, k, kl);
            continue;
        }
        p = q + 1;
        while (conninfo_space(*p))
            p++;
        bool quoted = *p == '\'';
        const char *v = p += quoted;
        while (*p && (quoted ? *p != '\'' : !conninfo_space(*p)))
            p += p[0] == '\\' && p[1] ? 2 : 1;
        if ((kl == 8 && !strncasecmp(k, "password", 8)) ||
            (kl == 11 && !strncasecmp(k, "sslpassword", 11)))
            rc = add_n(r, v, (size_t)(p - v));
        if (quoted && *p) p++;
    }
    return rc;
}

/* ---- the patterns ---------------------------------------------------------- */

static bool wordc(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

static bool tokenc(unsigned char c)
{
    return wordc(c) || c == '.' || c == '~' || c == '+' || c == '/' || c == '=';
}

/* Header names whose value is a credential; separator ':' or '='. */
static const char *const cred_headers[] = {
    "proxy-authorization",
    "authorization",
    "x-goog-api-key",
    "x-api-key",
    "api-key",
    "x-auth-token",
    "x-access-token",
    "set-cookie",
    "cookie",
    "ocp-apim-subscription-key",
};
/* Parameter names whose value is a credential; separator '=' (or ':' when
 * the name is quoted, as in JSON). */
static const char *const cred_params[] = {
    "access_token", "refresh_token", "id_token",  "client_secret", "api_key", "apikey", "password",
    "passwd",       "secret",        "signature", "token",         "key",     "sig",    "auth",
};
/* Key shapes: a prefix then at least 16 token characters. */
static const char *const key_prefixes[] = {"sk-",  "sk_", "hf_",  "gsk_",
                                           "xai-", "pa-", "AIza", "eyJ"};

/* At s[i] (a word start), the length of a credential name from list and
 * the position after it, or 0. */
static size_t name_at(const char *s, size_t n, size_t i, const char *const *list, size_t k)
{
    for (size_t j = 0; j < k; j++) {
        size_t l = strlen(list[j]);
        if (n - i >= l && !strncasecmp(s + i, list[j], l) &&
            (i + l == n || !wordc((unsigned char)s[i + l])))
            return l;
    }
    return 0;
}

/* After a name at s[p]: an optional closing quote, spaces, the separator,
 * spaces, an optional opening quote. Returns the value's start and sets
 * *quote (0 when unquoted), or 0 when no separator follows. */
static size_t value_start(const char *s, size_t n, size_t p, bool colon_ok, char *quote)
{
    if (p < n && (s[p] == '"' || s[p] == '\'')) p++, colon_ok = true;
    while (p < n && s[p] == ' ')
        p++;
    if (p >= n || !(s[p] == '=' || (colon_ok && s[p] == ':'))) return 0;
    p++;
    while (p < n && s[p] == ' ')
        p++;
    *quote = 0;
    if (p < n && (s[p] == '"' || s[p] == '\'')) *quote = s[p++];
    return p;
}

static bool digitc(char c)
{
    return c >= '0' && c <= '9';
}

/* At s[i], the end of a Telegram bot token to mask, or 0: "/bot" then digits
 * then ":" and the secret's characters (any number: a cut one too), or
 * "/bot" and digits up to the end of s or a "…" cut mark; at a word start
 * without "/bot", 6+ digits, ":" and 30+ token characters. *keep is how many
 * bytes stay shown ("/bot"). */
static size_t bot_token_end(const char *s, size_t n, size_t i, bool start, size_t *keep)
{
    size_t d = i;
    *keep = 0;
    if (n - i > 4 && !memcmp(s + i, "/bot", 4)) {
        *keep = 4;
        d = i + 4;
    } else if (!start) {
        return 0;
    }
    size_t e = d;
    while (e < n && digitc(s[e]))
        e++;
    if (e == d) return 0;
    if (*keep && (e == n || (n - e >= 3 && !memcmp(s + e, "\xE2\x80\xA6", 3)))) return e;
    if (e >= n || s[e] != ':') return 0;
    size_t v = ++e;
    while (e < n && wordc((unsigned char)s[e]))
        e++;
    if (*keep) return e;
    return e - d >= 7 && e - v >= 30 && (e == n || !wordc((unsigned char)s[e])) ? e : 0;
}

static cm_rc patterns(unsigned which, const char *s, size_t n, buf *out)
{
    cm_rc rc = CM_OK;
    size_t i = 0;
    while (i < n && !rc) {
        bool start = i == 0 || !wordc((unsigned char)s[i - 1]);
        size_t l, keep;
        char q;
        if ((which & REDACT_BOT) && (l = bot_token_end(s, n, i, start, &keep))) {
            rc = cm_buf_add(out, s + i, keep);
            if (!rc) rc = cm_buf_adds(out, REDACTED);
            i = l;
            continue;
        }
        if (!start) {
            rc = cm_buf_addc(out, s[i++]);
            continue;
        }
        /* Authorization: …, x-goog-api-key=…: the whole value. */
        if ((which & REDACT_HEADERS) &&
            (l = name_at(s, n, i, cred_headers, ARRAY_LEN(cred_headers)))) {
            size_t v = value_start(s, n, i + l, true, &q);
            if (v) {
                size_t e = v;
                while (e < n && (q ? s[e] != q : !strchr("\r\n\",;&}<", s[e])))
                    e++;
                rc = cm_buf_add(out, s + i, v - i);
                if (!rc) rc = cm_buf_adds(out, REDACTED);
                i = e;
                continue;
            }
        }
        if ((which & REDACT_PARAMS) &&
            (l = name_at(s, n, i, cred_params, ARRAY_LEN(cred_params)))) {
            bool quoted = i > 0 && (s[i - 1] == '"' || s[i - 1] == '\'');
            size_t v = value_start(s, n, i + l, quoted, &q);
            if (v && v < n && (q || !strchr(" \t\r\n&", s[v]))) {
                size_t e = v;
                while (e < n && (q ? s[e] != q : !strchr(" \t\r\n&\"'<>,;)}", s[e])))
                    e++;
                rc = cm_buf_add(out, s + i, v - i);
                if (!rc) rc = cm_buf_adds(out, REDACTED);
                i = e;
                continue;
            }
        }
        /* Bearer <token>, Basic <token>. */
        if ((which & REDACT_BEARER) &&
            (prefix_ci(s + i, n - i, "bearer ") || prefix_ci(s + i, n - i, "basic "))) {
            size_t w = (s[i] == 'b' || s[i] == 'B') && (s[i + 1] == 'e' || s[i + 1] == 'E') ? 6 : 5;
            size_t v = i + w;
            while (v < n && s[v] == ' ')
                v++;
            size_t e = v;
            while (e < n && tokenc((unsigned char)s[e]))
                e++;
            while (e > v && s[e - 1] == '.')
                e--;
            if (e > v) {
                rc = cm_buf_add(out, s + i, w);
                if (!rc) rc = cm_buf_addc(out, ' ');
                if (!rc) rc = cm_buf_adds(out, REDACTED);
                i = e;
                continue;
            }
        }
        if (which & REDACT_SK) {
            bool hit = false;
            for (size_t j = 0; j < ARRAY_LEN(key_prefixes) && !hit; j++) {
                size_t pl = strlen(key_prefixes[j]);
                if (n - i < pl || memcmp(s + i, key_prefixes[j], pl)) continue;
                size_t e = i + pl;
                while (e < n && tokenc((unsigned char)s[e]))
                    e++;
                while (e > i + pl && s[e - 1] == '.')
                    e--; /* the sentence's full stop */
                if (e - i - pl >= 16) {
                    rc = cm_buf_adds(out, REDACTED);
                    i = e;
                    hit = true;
                }
            }
            if (hit) continue;
        }
        rc = cm_buf_addc(out, s[i++]);
    }
    return rc;
}

/* ---- the passes ------------------------------------------------------------ */

static cm_rc mask_known(const redact *r, const char *s, size_t n, buf *out)
{
    cm_rc rc = CM_OK;
    size_t i = 0, run = 0;
    while (i < n && !rc) {
        size_t best = 0;
        for (size_t j = 0; r && j < r->n; j++) {
            size_t l = strlen(r->secrets[j]);
            if (l > best && n - i >= l && s[i] == r->secrets[j][0] &&
                !memcmp(s + i, r->secrets[j], l))
                best = l;
        }
        if (!best) {
            i++;
            continue;
        }
        rc = cm_buf_add(out, s + run, i - run);
        if (!rc) rc = cm_buf_adds(out, REDACTED);
        i += best;
        run = i;
    }
    if (!rc) rc = cm_buf_add(out, s + run, n - run);
    return rc;
}

/* One line: whitespace and controls as one space, U+FFFD for invalid
 * bytes, trimmed, at most max characters. */
static cm_rc one_line(const char *s, size_t n, size_t max, buf *out)
{
    cm_rc rc = CM_OK;
    size_t chars = 0, start = out->len;
    bool space = false;
    for (size_t i = 0; i < n && !rc;) {
        int32_t cp;
        size_t l = cm_utf8_decode(s + i, n - i, &cp);
        bool blank = cp >= 0 && (cp <= 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) ||
                                 cp == 0x2028 || cp == 0x2029 || cp == 0x85);
        if (blank) {
            space = out->len > start;
            i += l;
            continue;
        }
        if (max && chars + (space ? 1 : 0) + 1 > max) {
            rc = cm_buf_adds(out, "\xE2\x80\xA6"); /* … */
            break;
        }
        if (space) {
            rc = cm_buf_addc(out, ' ');
            chars++;
            space = false;
        }
        if (!rc) rc = cp < 0 ? cm_utf8_put(out, 0xFFFD) : cm_buf_add(out, s + i, l);
        chars++;
        i += l;
    }
    return rc;
}

cm_rc cm_redact_text(const redact *r, const char *s, size_t n, size_t max_chars, buf *out)
{
    cm_rc rc = CM_OK;
    buf a = BUF_INIT, b = BUF_INIT;
    if (!s) n = 0;
    if (n > REDACT_WINDOW) {
        /* Cut at a space: a secret cut in two would escape both passes. */
        n = REDACT_WINDOW;
        while (n && s[n - 1] != ' ' && s[n - 1] != '\n')
            n--;
    }
    CHECK(mask_known(r, s ? s : "", n, &a));
    CHECK(patterns(r ? r->patterns : REDACT_ALL, a.data, a.len, &b));
    CHECK(one_line(b.data, b.len, max_chars, out));
out:
    cm_buf_release(&a);
    cm_buf_release(&b);
    return rc;
}

cm_rc cm_redact_url(const char *url, size_t max_chars, buf *out)
{
    cm_rc rc = CM_OK;
    buf tmp = BUF_INIT, masked = BUF_INIT;
    if (!url) url = "";
    size_t end = strcspn(url, "?#"), a, b;
    if (authority(url, &a, &b) && b <= end) {
        const char *at = memchr(url + a, '@', b - a);
        CHECK(cm_buf_add(&tmp, url, a));
        if (at) a = (size_t)(at - url) + 1;
        CHECK(cm_buf_add(&tmp, url + a, end - a));
    } else {
        CHECK(cm_buf_add(&tmp, url, end));
    }
    /* masked whole, then cut */
    CHECK(patterns(REDACT_SK | REDACT_BOT, tmp.data, tmp.len, &masked));
    cm_buf_release(&tmp);
    tmp = masked;
    masked = (buf)BUF_INIT;
    size_t i = cm_utf8_prefix_chars(tmp.data, tmp.len, max_chars ? max_chars : SIZE_MAX, NULL);
    CHECK(cm_utf8_escape_line(out, tmp.data, i));
    if (i < tmp.len) CHECK(cm_buf_adds(out, "\xE2\x80\xA6"));
out:
    cm_buf_release(&tmp);
    cm_buf_release(&masked);
    return rc;
}

void cm_redact_url_to(const char *url, char *out, size_t size)
{
    if (!size) return;
    buf b;
    cm_buf_init(&b, size - 1);
    cm_redact_url(url, size > 4 ? size - 4 : 0, &b); /* CM_ETOOBIG keeps what fitted */
    memcpy(out, b.data, b.len);
    out[b.len] = 0;
    cm_buf_release(&b);
}
