/*
 * fuzz_tg_html.c — a model's reply (arbitrary bytes) rendered as Telegram
 * HTML. Never a crash or a leak, and the output is HTML Telegram parses:
 * only its tags (b, i, s, code, pre, a with one quoted href, tg-spoiler,
 * blockquote), each closed in order, no link inside a link, and '&' only in
 * &amp; &lt; &gt; &quot;. On valid UTF-8 the output is valid UTF-8.
 */
#include <string.h>

#include "../../src/base/utf8.h"
#include "../../src/gateway/channels/channel.h"
#include "fuzz.h"

static const char *const tags[] = {"b", "i", "s", "code", "pre", "a", "tg-spoiler", "blockquote"};

/* Which tag name starts at p (length n), or -1. */
static int tag_of(const char *p, size_t n)
{
    for (int k = 0; k < (int)(sizeof tags / sizeof *tags); k++)
        if (strlen(tags[k]) == n && !memcmp(p, tags[k], n)) return k;
    return -1;
}

static void check(const char *h, size_t n)
{
    int stack[256], depth = 0, links = 0;
    for (size_t i = 0; i < n; i++) {
        if (h[i] == '>') __builtin_trap(); /* a bare '>' is always escaped */
        if (h[i] == '&') {
            static const char *const ents[] = {"&amp;", "&lt;", "&gt;", "&quot;"};
            bool ok = false;
            for (int k = 0; k < 4 && !ok; k++)
                ok = !strncmp(h + i, ents[k], strlen(ents[k]));
            if (!ok) __builtin_trap();
            continue;
        }
        if (h[i] != '<') continue;
        bool close = h[i + 1] == '/';
        size_t s = i + 1 + close, e = s;
        while (e < n && h[e] != '>' && h[e] != ' ')
            e++;
        int t = tag_of(h + s, e - s);
        if (t < 0) __builtin_trap();
        if (close) {
            if (!depth || stack[depth - 1] != t || h[e] != '>') __builtin_trap();
            depth--;
            links -= t == 5;
            i = e;
            continue;
        }
        if (h[e] == ' ') { /* only <a href="..."> has an attribute */
            if (t != 5 || strncmp(h + e, " href=\"", 7)) __builtin_trap();
            const char *q = memchr(h + e + 7, '"', n - e - 7);
            if (!q || q[1] != '>' || memchr(h + e + 7, '<', (size_t)(q - h) - e - 7))
                __builtin_trap();
            e = (size_t)(q - h) + 1;
        } else if (t == 5) {
            __builtin_trap(); /* a link without its href */
        }
        if (t == 5 && links++) __builtin_trap(); /* a link in a link */
        if (depth == 256) __builtin_trap();
        stack[depth++] = t;
        i = e;
    }
    if (depth) __builtin_trap();
}

int fuzz_tg_html(const uint8_t *data, size_t size)
{
    char *md = malloc(size + 1);
    if (!md) return 0;
    memcpy(md, data, size);
    md[size] = 0; /* the text up to a NUL is the reply */
    size_t n = strlen(md);
    bool valid = cm_utf8_valid_prefix(md, n) == n;
    buf out = BUF_INIT;
    if (cm_gw_telegram_html(md, &out) == CM_OK) {
        check(out.data, out.len);
        if (valid && cm_utf8_valid_prefix(out.data, out.len) != out.len) __builtin_trap();
    }
    cm_buf_release(&out);
    free(md);
    return 0;
}

FUZZ_ENTRY(fuzz_tg_html)
