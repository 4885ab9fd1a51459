/*
 * tg_html.c — a reply's Markdown as the HTML Telegram's parse_mode "HTML"
 * takes, the way 2026.3.22 renders it (extensions/telegram format.ts over
 * its Markdown IR): **bold** <b>, *italic* <i>, ~~strike~~ <s>, `code`
 * <code>, fenced blocks <pre><code>, ||spoiler|| <tg-spoiler>, > quotes
 * <blockquote>, [label](url) <a href>, file names that look like domains
 * ("README.md") <code>; headings lose their #s (a setext heading its
 * underline), list items become "• " or are numbered on from their list's
 * first number, a rule "───"; everything else is text with &, < and >
 * escaped. A marker without its closing twin stays as written. The channel
 * falls back to plain text when Telegram refuses the entities.
 */
#include "tg_html.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Shortens b to len (never past its end: an empty b owns nothing). */
static void S_cut(buf *b, size_t len)
{
    if (b->len > len) {
        b->len = len;
        b->data[len] = 0;
    }
}

/* Appends s[0..n) with &, < and > (and " in attributes) escaped. */
static cm_rc S_esc(buf *out, const char *s, size_t n, bool attr)
{
    cm_rc rc = CM_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        char c = s[i];
        rc = c == '&'           ? cm_buf_adds(out, "&amp;")
             : c == '<'         ? cm_buf_adds(out, "&lt;")
             : c == '>'         ? cm_buf_adds(out, "&gt;")
             : c == '"' && attr ? cm_buf_adds(out, "&quot;")
                                : cm_buf_addc(out, c);
    }
    return rc;
}

/* File names whose extension is also a top-level domain ("README.md",
 * "main.go"): Telegram would link them to a website and preview it, so they
 * go in <code> (2026.3.22's FILE_REF_EXTENSIONS_WITH_TLD). */
static const char *const S_tld_exts[] = {"md", "go", "py", "pl", "sh", "am", "at", "be", "cc"};

static bool S_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.' || c == '/';
}

/* The length of the longest file reference at the start of run (a run of
 * name characters): ending in ".<ext>" of S_tld_exts, followed by the run's
 * end or a '.'; 0 when none. A run starting "//" is part of a URL. */
static size_t S_file_ref(const char *run, size_t n)
{
    if (n >= 2 && run[0] == '/' && run[1] == '/') return 0;
    for (size_t end = n; end > 0; end--) {
        if (end < n && run[end] != '.') continue;
        const char *dot = NULL;
        for (size_t i = end; i > 0; i--)
            if (run[i - 1] == '.') {
                dot = run + i - 1;
                break;
            }
        if (!dot || dot == run) continue;
        size_t el = (size_t)(run + end - dot - 1);
        for (size_t k = 0; k < ARRAY_LEN(S_tld_exts); k++)
            if (el == strlen(S_tld_exts[k]) && !strncasecmp(dot + 1, S_tld_exts[k], el)) return end;
    }
    return 0;
}

/* Plain text: escaped, its file references in <code>. */
static cm_rc S_text(buf *out, const char *s, size_t n, bool in_link)
{
    cm_rc rc = CM_OK;
    size_t i = 0, from = 0;
    while (i < n && !rc && !in_link) {
        if (!S_name_char(s[i])) {
            i++;
            continue;
        }
        size_t run = i;
        while (i < n && S_name_char(s[i]))
            i++;
        size_t ref = S_file_ref(s + run, i - run);
        if (!ref) continue;
        rc = S_esc(out, s + from, run - from, false);
        if (!rc) rc = cm_buf_adds(out, "<code>");
        if (!rc) rc = S_esc(out, s + run, ref, false);
        if (!rc) rc = cm_buf_adds(out, "</code>");
        from = run + ref;
    }
    return rc ? rc : S_esc(out, s + from, n - from, false);
}

/* The paired inline markers, longest first; the HTML each becomes. */
static const struct {
    const char *mark, *open, *close;
} S_pairs[] = {
    {"**", "<b>", "</b>"}, {"__", "<b>", "</b>"},
    {"~~", "<s>", "</s>"}, {"||", "<tg-spoiler>", "</tg-spoiler>"},
    {"*", "<i>", "</i>"},  {"_", "<i>", "</i>"},
};

static bool S_word(char c)
{
    return isalnum((unsigned char)c) || (unsigned char)c >= 0x80;
}

/* Where the closing twin of the marker m (length ml) opened at s[at] is in
 * s[0..n), or 0: the span is not empty, does not start or end with a blank,
 * and an '_' marker closes only at a word's end (snake_case stays text). */
static size_t S_close_of(const char *s, size_t n, size_t at, const char *m, size_t ml)
{
    size_t from = at + ml;
    if (from >= n || isspace((unsigned char)s[from])) return 0;
    for (size_t j = from + 1; j + ml <= n; j++) {
        if (s[j] == '`') { /* a code span inside is skipped whole */
            const char *e = memchr(s + j + 1, '`', n - j - 1);
            if (!e) return 0;
            j = (size_t)(e - s);
            continue;
        }
        if (memcmp(s + j, m, ml) != 0 || isspace((unsigned char)s[j - 1])) continue;
        if (ml == 1 && j + 1 < n && s[j + 1] == m[0]) { /* "**" is not a closing "*" */
            j++;
            continue;
        }
        if (m[0] == '_' && j + ml < n && S_word(s[j + ml])) continue;
        return j;
    }
    return 0;
}

static cm_rc S_inline(buf *out, const char *s, size_t n, int depth, bool in_link);

/* [label](url): the link's end in s, 0 when s[at] starts none. */
static size_t S_link(buf *out, const char *s, size_t n, size_t at, int depth, cm_rc *rc)
{
    const char *lab_end = memchr(s + at + 1, ']', n - at - 1);
    if (!lab_end || (size_t)(lab_end - s) + 1 >= n || lab_end[1] != '(') return 0;
    size_t lab = at + 1, lab_n = (size_t)(lab_end - s) - lab;
    size_t url = (size_t)(lab_end - s) + 2;
    const char *url_end = memchr(s + url, ')', n - url);
    if (!url_end || !lab_n) return 0;
    size_t url_n = (size_t)(url_end - s) - url;
    for (size_t i = 0; i < url_n; i++)
        if (isspace((unsigned char)s[url + i])) return 0;
    if (!url_n) return 0;
    *rc = cm_buf_adds(out, "<a href=\"");
    if (!*rc) *rc = S_esc(out, s + url, url_n, true);
    if (!*rc) *rc = cm_buf_adds(out, "\">");
    if (!*rc) *rc = S_inline(out, s + lab, lab_n, depth + 1, true); /* no link in a link */
    if (!*rc) *rc = cm_buf_adds(out, "</a>");
    return (size_t)(url_end - s) + 1;
}

/* One line's inline Markdown; in_link: inside a link's label. */
static cm_rc S_inline(buf *out, const char *s, size_t n, int depth, bool in_link)
{
    cm_rc rc = CM_OK;
    size_t i = 0, text = 0; /* text: start of the plain run not yet written */
    while (i < n && !rc) {
        size_t next = 0;
        if (s[i] == '\\' && i + 1 < n && ispunct((unsigned char)s[i + 1])) {
            rc = S_text(out, s + text, i - text, in_link);
            text = i + 1; /* the escaped character is written as text */
            i += 2;
            continue;
        }
        if (s[i] == '`') {
            size_t ticks = 1;
            while (i + ticks < n && s[i + ticks] == '`')
                ticks++;
            for (size_t j = i + ticks; j + ticks <= n; j++) {
                if (memcmp(s + j, s + i, ticks) != 0) continue;
                if (j + ticks < n && s[j + ticks] == '`') continue;
                if (j > i + ticks) { /* not empty */
                    rc = S_text(out, s + text, i - text, in_link);
                    if (!rc) rc = cm_buf_adds(out, "<code>");
                    if (!rc) rc = S_esc(out, s + i + ticks, j - i - ticks, false);
                    if (!rc) rc = cm_buf_adds(out, "</code>");
                    next = j + ticks;
                }
                break;
            }
            if (!next)
                next = i + ticks; /* unmatched ticks are text */
            else
                text = next;
            i = next;
            continue;
        }
        if (s[i] == '[' && depth < 8 && !in_link) {
            size_t at = out->len;
            rc = S_text(out, s + text, i - text, in_link);
            if (!rc && (next = S_link(out, s, n, i, depth, &rc)) != 0) {
                text = i = next;
                continue;
            }
            S_cut(out, at); /* not a link: the run goes on */
        }
        for (size_t k = 0; depth < 8 && !next && k < ARRAY_LEN(S_pairs); k++) {
            size_t ml = strlen(S_pairs[k].mark);
            if (i + ml > n || memcmp(s + i, S_pairs[k].mark, ml) != 0) continue;
            if (S_pairs[k].mark[0] == '_' && i > 0 && S_word(s[i - 1])) continue;
            size_t j = S_close_of(s, n, i, S_pairs[k].mark, ml);
            if (!j) continue;
            rc = S_text(out, s + text, i - text, in_link);
            if (!rc) rc = cm_buf_adds(out, S_pairs[k].open);
            if (!rc) rc = S_inline(out, s + i + ml, j - i - ml, depth + 1, in_link);
            if (!rc) rc = cm_buf_adds(out, S_pairs[k].close);
            next = j + ml;
        }
        if (next) {
            text = i = next;
            continue;
        }
        /* a run of one marker character that pairs with nothing is text */
        char c = s[i];
        i++;
        if (c == '*' || c == '_' || c == '~' || c == '|')
            while (i < n && s[i] == c)
                i++;
    }
    if (!rc) rc = S_text(out, s + text, n - text, in_link);
    return rc;
}

/* The line's text after up to three spaces of indent. */
static const char *S_lead(const char *l, size_t n, size_t *ind)
{
    size_t k = 0;
    while (k < n && l[k] == ' ')
        k++;
    *ind = k;
    return l + k;
}

static bool S_fence(const char *p, size_t n, size_t ind)
{
    return ind <= 3 && n >= 3 && (!strncmp(p, "```", 3) || !strncmp(p, "~~~", 3));
}

static bool S_rule(const char *p, size_t n)
{
    if (n < 3 || (p[0] != '-' && p[0] != '*' && p[0] != '_')) return false;
    size_t marks = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == p[0])
            marks++;
        else if (p[i] != ' ' && p[i] != '\t')
            return false;
    }
    return marks >= 3;
}

/* Whether the line s (up to its newline) underlines a paragraph line into a
 * setext heading: up to 3 spaces, a run of '=' or of '-', blanks. */
static bool S_setext(const char *s)
{
    size_t i = 0;
    while (i < 3 && s[i] == ' ')
        i++;
    char c = s[i];
    if (c != '=' && c != '-') return false;
    while (s[i] == c)
        i++;
    while (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')
        i++;
    return s[i] == '\n' || s[i] == '\0';
}

#define LIST_LEVELS 8 /* nesting levels of ordered lists numbered apart */

/* "- ", "* ", "+ " or "12. " / "12) ": the item text's offset, else 0. */
static size_t S_item(const char *p, size_t n, bool *ordered, size_t *num_len)
{
    *ordered = false;
    if (n >= 2 && (p[0] == '-' || p[0] == '*' || p[0] == '+') && p[1] == ' ') return 2;
    size_t d = 0;
    while (d < n && d < 9 && isdigit((unsigned char)p[d]))
        d++;
    if (d && d + 1 < n && (p[d] == '.' || p[d] == ')') && p[d + 1] == ' ') {
        *ordered = true;
        *num_len = d;
        return d + 2;
    }
    return 0;
}

cm_rc cm_gw_telegram_html(const char *md, buf *out)
{
    cm_rc rc = CM_OK;
    cm_buf_reset(out);
    const char *s = md ? md : "";
    bool in_code = false, in_quote = false, blank = false;
    /* Ordered lists by nesting level: the last number shown and the
     * delimiter ('.' or ')'; 0: no ordered list open at that level). Items
     * are numbered on from the first one's number, as 2026.3.22 does. */
    long list_num[LIST_LEVELS] = {0};
    char list_delim[LIST_LEVELS] = {0};
    size_t fence_len = 0;
    char fence_ch = 0;
    while (*s && !rc) {
        const char *nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        const char *next = nl ? nl + 1 : s + n;
        size_t ln = n;
        if (ln && s[ln - 1] == '\r') ln--;
        size_t ind;
        const char *p = S_lead(s, ln, &ind);
        size_t pn = ln - ind;
        if (in_code) {
            size_t k = 0;
            while (k < pn && p[k] == fence_ch)
                k++;
            bool closes = ind <= 3 && k >= fence_len;
            for (size_t j = k; closes && j < pn; j++)
                closes = p[j] == ' ' || p[j] == '\t';
            if (closes) {
                if (out->len && out->data[out->len - 1] == '\n') S_cut(out, out->len - 1);
                rc = cm_buf_adds(out, "</code></pre>\n");
                in_code = false;
            } else {
                rc = S_esc(out, s, ln, false);
                if (!rc) rc = cm_buf_addc(out, '\n');
            }
            s = next;
            continue;
        }
        bool quote = ind <= 3 && pn && p[0] == '>';
        if (in_quote && !quote) {
            rc = cm_buf_adds(out, "</blockquote>\n");
            in_quote = false;
        }
        if (rc) break;
        if (!pn) { /* a blank line: one between blocks */
            blank = out->len > 0;
            s = next;
            continue;
        }
        if (blank && !in_quote) rc = cm_buf_addc(out, '\n');
        bool after_blank = blank;
        blank = false;
        bool item_line = S_item(p, pn, &(bool){false}, &(size_t){0}) != 0;
        /* an unindented line that is not an item ends the lists, unless it
         * continues an item's paragraph (no blank line before, plain text) */
        if (!item_line && ind == 0 &&
            (after_blank || quote || p[0] == '#' || S_rule(p, pn) || S_fence(p, pn, ind)))
            memset(list_delim, 0, sizeof list_delim);
        if (!rc && S_fence(p, pn, ind)) {
            fence_ch = p[0];
            fence_len = 0;
            while (fence_len < pn && p[fence_len] == fence_ch)
                fence_len++;
            rc = cm_buf_adds(out, "<pre><code>");
            in_code = true;
        } else if (!rc && quote) {
            const char *q = p + 1;
            size_t qn = pn - 1;
            if (qn && *q == ' ') q++, qn--;
            if (!in_quote)
                rc = cm_buf_adds(out, "<blockquote>");
            else
                rc = cm_buf_addc(out, '\n');
            in_quote = true;
            if (!rc) rc = S_inline(out, q, qn, 0, false);
        } else if (!rc && ind <= 3 && p[0] == '#') {
            size_t h = 0;
            while (h < pn && p[h] == '#')
                h++;
            if (h <= 6 && (h == pn || p[h] == ' ')) {
                const char *t = p + h;
                size_t tn = pn - h;
                while (tn && *t == ' ')
                    t++, tn--;
                while (tn && t[tn - 1] == ' ')
                    tn--;
                size_t h2 = tn; /* a closing run of #s: alone, or after a space */
                while (h2 && t[h2 - 1] == '#')
                    h2--;
                if (h2 < tn && (h2 == 0 || t[h2 - 1] == ' ')) {
                    tn = h2;
                    while (tn && t[tn - 1] == ' ')
                        tn--;
                }
                rc = S_inline(out, t, tn, 0, false);
            } else {
                rc = S_inline(out, p, pn, 0, false);
            }
            if (!rc) rc = cm_buf_addc(out, '\n');
        } else if (!rc && S_rule(p, pn)) {
            rc = cm_buf_adds(out, "───\n");
        } else if (!rc) {
            bool ordered;
            size_t num_len = 0, item = S_item(p, pn, &ordered, &num_len);
            if (item) {
                size_t level = CM_MIN(ind / 2, (size_t)LIST_LEVELS - 1);
                for (size_t k = 0; k < ind / 2 && !rc; k++)
                    rc = cm_buf_adds(out, "  ");
                memset(list_delim + level + 1, 0, LIST_LEVELS - level - 1); /* nested lists end */
                if (ordered && list_delim[level] == p[num_len]) {
                    list_num[level]++;
                } else if (ordered) {
                    list_num[level] = strtol(p, NULL, 10); /* at most 9 digits */
                    list_delim[level] = p[num_len];
                } else {
                    list_delim[level] = 0;
                }
                if (!rc && ordered) rc = cm_buf_printf(out, "%ld. ", list_num[level]);
                if (!rc && !ordered) rc = cm_buf_adds(out, "• ");
                if (!rc) rc = S_inline(out, p + item, pn - item, 0, false);
            } else {
                rc = S_inline(out, s, ln, 0, false);
                /* a setext heading's text, as plain as an ATX one's: its
                 * underline is dropped (not a rule, not text) */
                if (!in_quote && ind <= 3 && *next && S_setext(next)) {
                    const char *unl = strchr(next, '\n');
                    next = unl ? unl + 1 : next + strlen(next);
                }
            }
            if (!rc) rc = cm_buf_addc(out, '\n');
        }
        s = next;
    }
    if (!rc && in_code) {
        if (out->len && out->data[out->len - 1] == '\n') S_cut(out, out->len - 1);
        rc = cm_buf_adds(out, "</code></pre>");
    }
    if (!rc && in_quote) rc = cm_buf_adds(out, "</blockquote>");
    while (!rc && out->len && (out->data[out->len - 1] == '\n' || out->data[out->len - 1] == ' '))
        S_cut(out, out->len - 1);
    return rc;
}
