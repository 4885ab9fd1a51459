/*
 * extract.c — transcript text for session memory search (extract.h). The
 * redaction patterns are QuantumClaw's defaults, written as POSIX extended
 * regular expressions (glibc: \b and back-references) and applied one after
 * the other over the whole text, as it applies them — except that private
 * key blocks go first: in QuantumClaw's order `key: -----BEGIN …` loses its
 * BEGIN marker to the key=value pattern and the key's body stays.
 */
#include <jansson.h>
#include <pthread.h>
#include <regex.h>
#include <strings.h>

#include "../base/jnum.h"
#include "../base/sha256.h"
#include "../base/utf8.h"
#include "extract.h"

static const char *const patterns[] = {
    NULL, /* PEM private keys: matched by hand (the block spans lines) */
    "\\b[A-Z0-9_]*(KEY|TOKEN|SECRET|PASSWORD|PASSWD)\\b[[:space:]]*[=:][[:space:]]*([\"']?)"
    "([^[:space:]\"'\\\\]+)\\2",
    "\"(apiKey|token|secret|password|passwd|accessToken|refreshToken)\"[[:space:]]*:[[:space:]]*"
    "\"([^\"]+)\"",
    "--(api[-_]?key|token|secret|password|passwd)[[:space:]]+([\"']?)([^[:space:]\"']+)\\2",
    "Authorization[[:space:]]*[:=][[:space:]]*Bearer[[:space:]]+([A-Za-z0-9._+=-]+)",
    "\\bBearer[[:space:]]+([A-Za-z0-9._+=-]{18,})\\b",
    "\\b(sk-[A-Za-z0-9_-]{8,})\\b",
    "\\b(ghp_[A-Za-z0-9]{20,})\\b",
    "\\b(github_pat_[A-Za-z0-9_]{20,})\\b",
    "\\b(xox[baprs]-[A-Za-z0-9-]{10,})\\b",
    "\\b(xapp-[A-Za-z0-9-]{10,})\\b",
    "\\b(gsk_[A-Za-z0-9_-]{10,})\\b",
    "\\b(AIza[0-9A-Za-z_-]{20,})\\b",
    "\\b(pplx-[A-Za-z0-9_-]{10,})\\b",
    "\\b(npm_[A-Za-z0-9]{10,})\\b",
    "\\bbot([0-9]{6,}:[A-Za-z0-9_-]{20,})\\b",
    "\\b([0-9]{6,}:[A-Za-z0-9_-]{20,})\\b",
};
#define NPAT (sizeof patterns / sizeof patterns[0])

/* What a text must contain for each pattern to match it (any of the
 * '|'-separated words, ignoring ASCII case; "#:" is six digits and a colon):
 * a text without it skips the pattern's scan, the indexer's main cost. */
static const char *const needles[NPAT] = {
    NULL,
    "key|token|secret|passw",
    "apikey|token|secret|passw",
    "--",
    "authorization",
    "bearer",
    "sk-",
    "ghp_",
    "github_pat_",
    "xox",
    "xapp-",
    "gsk_",
    "aiza",
    "pplx-",
    "npm_",
    "#:",
    "#:",
};

static bool digits_colon(const char *s)
{
    for (const char *c = strchr(s, ':'); c; c = strchr(c + 1, ':')) {
        int k = 0;
        for (const char *q = c; q > s && q[-1] >= '0' && q[-1] <= '9' && k < 6; q--)
            k++;
        if (k >= 6) return true;
    }
    return false;
}

/* s is the text in ASCII lower case. */
static bool may_match(size_t i, const char *s)
{
    const char *w = needles[i];
    if (!w) return true;
    if (!strcmp(w, "#:")) return digits_colon(s);
    while (*w) {
        const char *bar = strchr(w, '|');
        size_t n = bar ? (size_t)(bar - w) : strlen(w);
        char word[32];
        memcpy(word, w, n);
        word[n] = 0;
        if (strstr(s, word)) return true;
        w += n + (bar != NULL);
    }
    return false;
}

static regex_t compiled[NPAT];
static bool compiled_ok[NPAT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void compile_all(void)
{
    for (size_t i = 0; i < NPAT; i++)
        compiled_ok[i] =
            patterns[i] && regcomp(&compiled[i], patterns[i], REG_EXTENDED | REG_ICASE) == 0;
}

/* Bytes of the UTF-8 sequence at p (1 for a stray byte). */
static size_t seq_len(const unsigned char *p)
{
    return *p >= 0xF0 ? 4 : *p >= 0xE0 ? 3 : *p >= 0xC0 ? 2 : 1;
}

/* The masked form of a token: its first 6 and last 4 characters around "…"
 * when it has 18 or more, else "***". Characters are counted in UTF-16
 * units, as JavaScript's length and slice count them. */
static cm_rc mask(buf *out, const char *tok, size_t n)
{
    const unsigned char *p = (const unsigned char *)tok;
    size_t units = 0;
    for (size_t i = 0; i < n; i += seq_len(p + i))
        units += seq_len(p + i) == 4 ? 2 : 1;
    if (units < 18) return cm_buf_adds(out, "***");
    size_t head = 0, u = 0;
    while (head < n && u < 6) {
        u += seq_len(p + head) == 4 ? 2 : 1;
        head += seq_len(p + head);
    }
    size_t tail = n;
    u = 0;
    while (tail > 0 && u < 4) {
        size_t b = tail - 1;
        while (b > 0 && (p[b] & 0xC0) == 0x80)
            b--;
        u += seq_len(p + b) == 4 ? 2 : 1;
        tail = b;
    }
    cm_rc rc = cm_buf_add(out, tok, CM_MIN(head, n));
    if (!rc) rc = cm_buf_adds(out, "\xe2\x80\xa6");
    if (!rc) rc = cm_buf_add(out, tok + tail, n - tail);
    return rc;
}

/* One pattern over in (NUL-terminated), into out. */
static cm_rc apply(const regex_t *re, const char *in, buf *out)
{
    cm_rc rc = CM_OK;
    regmatch_t m[4];
    const char *p = in;
    int flags = 0;
    while (!rc && *p && regexec(re, p, 4, m, flags) == 0) {
        if (m[0].rm_eo == m[0].rm_so) { /* an empty match: step over a byte */
            rc = cm_buf_add(out, p, (size_t)m[0].rm_so + 1);
            p += m[0].rm_so + 1;
            flags = REG_NOTBOL;
            continue;
        }
        /* the token: the last non-empty group, else the whole match */
        regoff_t ts = m[0].rm_so, te = m[0].rm_eo;
        for (int g = 3; g >= 1; g--)
            if (m[g].rm_so >= 0 && m[g].rm_eo > m[g].rm_so) {
                ts = m[g].rm_so;
                te = m[g].rm_eo;
                break;
            }
        /* As QuantumClaw: the first occurrence of the token in the match is
         * masked (for these patterns, the group itself or an equal text
         * before it). */
        const char *ms = p + m[0].rm_so, *tok = p + ts;
        size_t mlen = (size_t)(m[0].rm_eo - m[0].rm_so), tlen = (size_t)(te - ts);
        const char *first = tok;
        for (const char *q = ms; q + tlen <= ms + mlen; q++)
            if (!memcmp(q, tok, tlen)) {
                first = q;
                break;
            }
        rc = cm_buf_add(out, p, (size_t)(first - p));
        if (!rc) rc = mask(out, tok, tlen);
        if (!rc) rc = cm_buf_add(out, first + tlen, (size_t)(ms + mlen - (first + tlen)));
        p = ms + mlen;
        flags = REG_NOTBOL;
    }
    if (!rc) rc = cm_buf_adds(out, p);
    return rc;
}

/* Whether p starts with the ASCII word w, ignoring case. */
static bool starts_ci(const char *p, const char *w)
{
    return strncasecmp(p, w, strlen(w)) == 0;
}

/* Where "[A-Za-z ]*PRIVATE KEY-----" matching at p ends (the regex's greedy
 * run backtracked to the last "PRIVATE KEY-----" it can end on), or NULL. */
static const char *pem_label_end(const char *p)
{
    const char *k = p;
    while ((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == ' ')
        k++;
    for (const char *q = k; q >= p; q--)
        if (starts_ci(q, "PRIVATE KEY-----")) return q + 16;
    return NULL;
}

/* PEM private key blocks, as QuantumClaw's pattern
 * -----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]+?-----END [A-Z ]*PRIVATE KEY-----
 * (case-insensitive) matches them: a block of two or more non-empty lines
 * becomes its first line, "…redacted…" and its last line; one line (a
 * transcript's text is collapsed to one) becomes "***"; a block whose
 * markers are not in upper case is masked like a token. */
static cm_rc redact_pem(const char *in, buf *out)
{
    cm_rc rc = CM_OK;
    const char *p = in;
    for (const char *b = p; (b = strcasestr(b, "-----BEGIN ")) != NULL;) {
        const char *body = pem_label_end(b + 11), *end = NULL, *e = NULL;
        if (!body) {
            b++;
            continue;
        }
        for (e = body + (*body ? 1 : 0); *body && (e = strcasestr(e, "-----END ")); e++)
            if ((end = pem_label_end(e + 9))) break;
        if (!end) break; /* no block ends after this one: none will */
        size_t n = (size_t)(end - b);
        rc = cm_buf_add(out, p, (size_t)(b - p));
        if (rc) return rc;
        bool upper = false; /* JavaScript's includes("PRIVATE KEY-----") */
        for (const char *q = b; q + 16 <= end && !upper; q++)
            upper = !strncmp(q, "PRIVATE KEY-----", 16);
        const char *first = NULL, *first_end = NULL, *last = NULL, *last_end = NULL;
        size_t lines = 0;
        for (const char *l = b; l < end;) { /* lines split at \r?\n, empty ones dropped */
            const char *nl = memchr(l, '\n', (size_t)(end - l));
            const char *le = nl ? nl : end;
            const char *lt = le > l && le[-1] == '\r' && nl ? le - 1 : le;
            if (lt > l) {
                if (!lines++) first = l, first_end = lt;
                last = l, last_end = lt;
            }
            l = nl ? nl + 1 : end;
        }
        if (!upper)
            rc = mask(out, b, n);
        else if (lines < 2)
            rc = cm_buf_adds(out, "***");
        else {
            rc = cm_buf_add(out, first, (size_t)(first_end - first));
            if (!rc) rc = cm_buf_adds(out, "\n\xe2\x80\xa6redacted\xe2\x80\xa6\n");
            if (!rc) rc = cm_buf_add(out, last, (size_t)(last_end - last));
        }
        if (rc) return rc;
        p = b = end;
    }
    return cm_buf_adds(out, p);
}

cm_rc cm_session_redact(const char *text, size_t n, buf *out)
{
    pthread_once(&once, compile_all);
    buf a = BUF_INIT, b = BUF_INIT;
    cm_rc rc = cm_buf_add(&a, text, n);
    buf low = BUF_INIT; /* the text as the needles see it */
    if (!rc) rc = cm_buf_add(&low, a.data, a.len);
    for (size_t i = 0; !rc && i < low.len; i++)
        if (low.data[i] >= 'A' && low.data[i] <= 'Z') low.data[i] |= 0x20;
    for (size_t i = 0; i < NPAT && !rc; i++) {
        if (patterns[i] && (!compiled_ok[i] || !may_match(i, low.data))) continue;
        cm_buf_reset(&b);
        rc = patterns[i] ? apply(&compiled[i], a.data, &b) : redact_pem(a.data, &b);
        buf t = a;
        a = b;
        b = t;
    }
    if (!rc) rc = cm_buf_add(out, a.data, a.len);
    cm_buf_release(&a);
    cm_buf_release(&b);
    cm_buf_release(&low);
    return rc;
}

/* The length of the JavaScript \s character at p (0 when none). */
static size_t js_space(const unsigned char *p)
{
    if (*p == ' ' || (*p >= '\t' && *p <= '\r')) return 1;
    if (p[0] == 0xC2 && p[1] == 0xA0) return 2;                 /* U+00A0 */
    if (p[0] == 0xE1 && p[1] == 0x9A && p[2] == 0x80) return 3; /* U+1680 */
    if (p[0] == 0xE2 && p[1] == 0x80 &&
        ((p[2] >= 0x80 && p[2] <= 0x8A) || p[2] == 0xA8 || p[2] == 0xA9 || p[2] == 0xAF))
        return 3; /* U+2000–200A, 2028, 2029, 202F */
    if (p[0] == 0xE2 && p[1] == 0x81 && p[2] == 0x9F) return 3; /* U+205F */
    if (p[0] == 0xE3 && p[1] == 0x80 && p[2] == 0x80) return 3; /* U+3000 */
    if (p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF) return 3; /* U+FEFF */
    return 0;
}

/* Appends s with every run of whitespace as one space, trimmed. */
static cm_rc add_collapsed(buf *out, const char *s, size_t n)
{
    cm_rc rc = CM_OK;
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    bool pending = false, any = false;
    while (p < end && !rc) {
        size_t w = js_space(p);
        if (w) {
            pending = any;
            p += w;
            continue;
        }
        if (pending) rc = cm_buf_addc(out, ' ');
        pending = false;
        any = true;
        if (!rc) rc = cm_buf_addc(out, (char)*p++);
    }
    return rc;
}

/* The message's text: a string, or its text blocks joined by a space. */
static cm_rc message_text(const json_t *content, buf *out)
{
    cm_rc rc = CM_OK;
    if (json_is_string(content))
        return add_collapsed(out, json_string_value(content), json_string_length(content));
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b)
    {
        const char *t = json_string_value(json_object_get(b, "type"));
        json_t *tx = json_object_get(b, "text");
        if (!t || strcmp(t, "text") || !json_is_string(tx)) continue;
        size_t before = out->len;
        if (out->len) rc = cm_buf_addc(out, ' ');
        size_t mark = out->len;
        if (!rc) rc = add_collapsed(out, json_string_value(tx), json_string_length(tx));
        if (!rc && out->len == mark) { /* nothing but spaces: drop the separator */
            out->len = before;
            if (out->cap) out->data[out->len] = 0;
        }
        if (rc) break;
    }
    return rc;
}

static int64_t timestamp_of(const json_t *rec, const json_t *msg)
{
    json_t *t = json_object_get(msg, "timestamp");
    if (json_is_number(t)) return cm_jnum_int64(t, -CM_JNUM_MS_MAX, CM_JNUM_MS_MAX, 0);
    const char *iso = json_string_value(json_object_get(rec, "timestamp"));
    struct tm tm = {0};
    int ms = 0;
    if (iso && sscanf(iso, "%4d-%2d-%2dT%2d:%2d:%2d.%3d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                      &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) >= 6) {
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        return (int64_t)timegm(&tm) * 1000 + ms;
    }
    return 0;
}

void cm_session_doc_release(session_doc *d)
{
    cm_buf_release(&d->text);
    free(d->line_map);
    free(d->ts);
    memset(d, 0, sizeof *d);
    cm_buf_init(&d->text, 0);
}

cm_rc cm_session_extract(const char *jsonl, size_t len, session_doc *d)
{
    cm_rc rc = CM_OK;
    size_t cap = 0;
    buf msg = BUF_INIT, red = BUF_INIT, h = BUF_INIT;
    memset(d, 0, sizeof *d);
    cm_buf_init(&d->text, 0);
    int line = 0;
    for (size_t i = 0; i < len && !rc;) {
        size_t e = i;
        while (e < len && jsonl[e] != '\n')
            e++;
        line++;
        json_t *rec = e > i ? json_loadb(jsonl + i, e - i, 0, NULL) : NULL;
        i = e + 1;
        json_t *m = json_object_get(rec, "message");
        const char *type = json_string_value(json_object_get(rec, "type"));
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!type || strcmp(type, "message") || !role ||
            (strcmp(role, "user") && strcmp(role, "assistant"))) {
            json_decref(rec);
            continue;
        }
        cm_buf_reset(&msg);
        cm_buf_reset(&red);
        rc = message_text(json_object_get(m, "content"), &msg);
        if (!rc && msg.len) rc = cm_session_redact(msg.data, msg.len, &red);
        if (!rc && red.len) {
            if (d->n == cap) {
                cap = cap ? cap * 2 : 64;
                int *lm = realloc(d->line_map, cap * sizeof *lm);
                if (lm) d->line_map = lm;
                int64_t *ts = lm ? realloc(d->ts, cap * sizeof *ts) : NULL;
                if (ts) d->ts = ts;
                if (!lm || !ts) rc = CM_ENOMEM;
            }
            if (!rc && d->n) rc = cm_buf_addc(&d->text, '\n');
            if (!rc) rc = cm_buf_adds(&d->text, role[0] == 'u' ? "User: " : "Assistant: ");
            if (!rc) rc = cm_buf_add(&d->text, red.data, red.len);
            if (!rc) {
                d->line_map[d->n] = line;
                d->ts[d->n] = timestamp_of(rec, m);
                d->n++;
            }
        }
        json_decref(rec);
    }
    if (!rc) rc = cm_buf_add(&h, d->text.data, d->text.len);
    if (!rc) rc = cm_buf_addc(&h, '\n');
    for (size_t k = 0; k < d->n && !rc; k++)
        rc = cm_buf_printf(&h, "%s%d", k ? "," : "", d->line_map[k]);
    if (!rc) {
        cm_sha256_hex(h.data, h.len, d->hash);
    }
    cm_buf_release(&msg);
    cm_buf_release(&red);
    cm_buf_release(&h);
    if (rc) cm_session_doc_release(d);
    return rc;
}
