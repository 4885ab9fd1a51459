/*
 * print.c — what every command prints through: one-line errors and warnings
 * on stderr ("clawmem: error: …", "clawmem: warning: …"), the "did you mean"
 * of an unknown option, and text with control characters escaped (cli.h).
 */
#include <stdarg.h>
#include <string.h>

#include "../src/base/suggest.h"
#include "cli.h"

/* Writes s to f with control characters escaped — "\\n", "\\r", "\\t", other
 * C0 and DEL as "\\xNN", C1 as "\\u0085", bytes of invalid UTF-8 as "\\xNN" —
 * so a file name (or anything else from the index or a server) can neither
 * forge an output line nor drive the terminal. keep_lines leaves '\\n' and
 * '\\t' as they are (for snippet text). */
void put_safe(FILE *f, const char *s, int keep_lines)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        /* a run of printable ASCII (and of '\n' and '\t' when kept) in one write */
        const unsigned char *run = p;
        while ((*p >= 0x20 && *p < 0x7f) || (keep_lines && (*p == '\n' || *p == '\t')))
            p++;
        if (p > run) fwrite(run, 1, (size_t)(p - run), f);
        if (!*p) break;
        unsigned c = *p;
        size_t len = c < 0x80                 ? 1
                     : c >= 0xC2 && c <= 0xDF ? 2
                     : c >= 0xE0 && c <= 0xEF ? 3
                     : c >= 0xF0 && c <= 0xF4 ? 4
                                              : 0;
        for (size_t i = 1; i < len; i++)
            if ((p[i] & 0xC0) != 0x80) len = 0;
        if (len == 3 && ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F))) len = 0;
        if (len == 4 && ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F))) len = 0;
        if (len == 1 && c >= 0x20 && c != 0x7f) {
            fputc((int)c, f);
        } else if (len == 1 && keep_lines && (c == '\n' || c == '\t')) {
            fputc((int)c, f);
        } else if (len == 1 && (c == '\n' || c == '\r' || c == '\t')) {
            fputc('\\', f);
            fputc(c == '\n' ? 'n' : c == '\r' ? 'r' : 't', f);
        } else if (len == 2 && c == 0xC2 && p[1] <= 0x9F) { /* C1 */
            fprintf(f, "\\u00%c%c", hex[p[1] >> 4], hex[p[1] & 15]);
        } else if (len > 1) {
            fwrite(p, 1, len, f);
        } else {
            fprintf(f, "\\x%c%c", hex[c >> 4], hex[c & 15]);
            len = 1;
        }
        p += len;
    }
}

/* "clawmem: <label>: <message>" on stderr, the message escaped. */
static void say(const char *label, const char *fmt, va_list ap)
{
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "clawmem: %s: ", label);
    put_safe(stderr, msg, 0);
    fputc('\n', stderr);
}

int die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say("error", fmt, ap);
    va_end(ap);
    return 1;
}

void warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say("warning", fmt, ap);
    va_end(ap);
}

bool option_in(const char *list, const char *a)
{
    size_t n = strlen(a);
    for (const char *p = list; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !memcmp(p, a, n)) return true;
        p += len + (bar != NULL);
    }
    return false;
}

int unknown_option(const char *cmd, const char *arg, const char *known)
{
    char near[SUGGEST_MAX_LEN + 1], where[64] = "";
    suggest s;
    cm_suggest_init(&s, arg);
    cm_suggest_add_list(&s, known);
    cm_suggest_add_list(&s, GLOBAL_OPTIONS);
    if (*cmd) snprintf(where, sizeof where, "%s: ", cmd);
    if (cm_suggest_result(&s, near, sizeof near))
        return die("%sunknown option %s (did you mean %s?)", where, arg, near);
    if (!*cmd) return die("unknown option %s (see clawmem help)", arg);
    return die("%sunknown option %s (see clawmem help %s)", where, arg, cmd);
}
