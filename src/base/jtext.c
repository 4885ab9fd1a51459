/*
 * jtext.c — JSON text written directly (jtext.h).
 */
#include "jtext.h"
#include "utf8.h"

/* Whether byte c is written escaped. */
static bool needs_escape(unsigned char c)
{
    return c < 0x20 || c == '"' || c == '\\';
}

cm_rc cm_jtext_string(buf *out, const char *s)
{
    if (!s) return CM_EINVAL;
    size_t n = strlen(s), start = out->len;
    if (cm_utf8_valid_prefix(s, n) != n) return CM_EINVAL;
    cm_rc rc = cm_buf_grow(out, n + 2);
    if (!rc) rc = cm_buf_addc(out, '"');
    for (size_t i = 0; !rc && i < n;) {
        size_t run = i;
        while (run < n && !needs_escape((unsigned char)s[run]))
            run++;
        if (run > i) rc = cm_buf_add(out, s + i, run - i);
        if (rc || run == n) {
            i = run;
            break;
        }
        unsigned char c = (unsigned char)s[run];
        const char *name = c == '"'    ? "\\\""
                           : c == '\\' ? "\\\\"
                           : c == '\b' ? "\\b"
                           : c == '\f' ? "\\f"
                           : c == '\n' ? "\\n"
                           : c == '\r' ? "\\r"
                           : c == '\t' ? "\\t"
                                       : NULL;
        rc = name ? cm_buf_adds(out, name) : cm_buf_printf(out, "\\u%04X", (unsigned)c);
        i = run + 1;
    }
    if (!rc) rc = cm_buf_addc(out, '"');
    if (rc) { /* as it was */
        out->len = start;
        if (out->data) out->data[start] = 0;
    }
    return rc;
}

cm_rc cm_jtext_member(buf *out, const char *key, const char *s)
{
    size_t start = out->len;
    cm_rc rc = cm_buf_printf(out, "\"%s\":", key);
    if (!rc) rc = cm_jtext_string(out, s);
    if (rc) {
        out->len = start;
        if (out->data) out->data[start] = 0;
    }
    return rc;
}
