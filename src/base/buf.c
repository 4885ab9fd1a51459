/*
 * buf.c — growable buffer with a size cap (see buf.h for the invariants).
 */
#include "buf.h"

char cm_buf_empty[1];

void cm_buf_init(buf *b, size_t max)
{
    b->data = cm_buf_empty;
    b->len = b->cap = 0;
    b->max = max;
}

void cm_buf_release(buf *b)
{
    if (b->cap) free(b->data);
    b->data = cm_buf_empty;
    b->len = b->cap = 0;
}

void cm_buf_reset(buf *b)
{
    b->len = 0;
    if (b->cap)
        b->data[0] = 0;
    else
        b->data = cm_buf_empty;
}

cm_rc cm_buf_grow(buf *b, size_t extra)
{
    if (extra > SIZE_MAX / 2 - b->len) return CM_ETOOBIG;
    size_t need = b->len + extra + 1;
    if (b->max && b->len + extra > b->max) return CM_ETOOBIG;
    if (need <= b->cap) return CM_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->cap ? b->data : NULL, cap);
    if (!p) return CM_ENOMEM;
    if (!b->cap) p[0] = 0;
    b->data = p;
    b->cap = cap;
    return CM_OK;
}

cm_rc cm_buf_add(buf *b, const void *p, size_t n)
{
    cm_rc rc = cm_buf_grow(b, n);
    if (rc) return rc;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return CM_OK;
}

cm_rc cm_buf_adds(buf *b, const char *s)
{
    return cm_buf_add(b, s, strlen(s));
}

cm_rc cm_buf_addc(buf *b, char c)
{
    return cm_buf_add(b, &c, 1);
}

cm_rc cm_buf_vprintf(buf *b, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    cm_rc rc = n < 0 ? CM_EINVAL : cm_buf_grow(b, (size_t)n);
    if (!rc) {
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
    }
    va_end(again);
    return rc;
}

cm_rc cm_buf_printf(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cm_rc rc = cm_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

char *cm_buf_detach(buf *b)
{
    char *p = b->cap ? b->data : calloc(1, 1);
    b->data = cm_buf_empty;
    b->len = b->cap = 0;
    return p;
}
