/*
 * print.c — what every command prints through: one-line errors on stderr and
 * text with control characters escaped (cli.h).
 */
#include <stdarg.h>

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

int die(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fputs("clawmem: ", stderr);
    put_safe(stderr, msg, 0);
    fputc('\n', stderr);
    return 1;
}
