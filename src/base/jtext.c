/*
 * jtext.c — JSON text written directly (jtext.h).
 */
#include "jtext.h"
#include "utf8.h"

cm_rc cm_jtext_string(buf *out, const char *s)
{
    if (!s) return CM_EINVAL;
    size_t n = strlen(s), start = out->len;
    cm_rc rc = cm_buf_grow(out, n + 2);
    if (!rc) rc = cm_buf_addc(out, '"');
    /* one pass: runs of bytes written as they are (ASCII that needs no
     * escape, valid multi-byte sequences), then one escape */
    size_t i = 0;
    while (!rc && i < n) {
        size_t run = i;
        for (;;) {
            unsigned char c = (unsigned char)s[run];
            if (c >= 0x80) {
                int32_t cp;
                size_t l = cm_utf8_decode(s + run, n - run, &cp);
                if (cp < 0) {
                    rc = CM_EINVAL;
                    break;
                }
                run += l;
            } else if (c < 0x20 || c == '"' || c == '\\' || run == n) {
                break;
            } else {
                run++;
            }
        }
        if (!rc && run > i) rc = cm_buf_add(out, s + i, run - i);
        if (rc || run == n) break;
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
    cm_rc rc = cm_buf_addc(out, '"');
    if (!rc) rc = cm_buf_adds(out, key);
    if (!rc) rc = cm_buf_adds(out, "\":");
    if (!rc) rc = cm_jtext_string(out, s);
    if (rc) {
        out->len = start;
        if (out->data) out->data[start] = 0;
    }
    return rc;
}
