/*
 * buf.h — the one growable byte buffer. Invariants: data is NUL-terminated
 * whenever len > 0 or after any append (data[len] == 0); len < cap; len never
 * exceeds max (0 = unlimited), so a hostile input cannot take all memory —
 * an append past max fails with CM_ETOOBIG and leaves the buffer unchanged.
 */
#ifndef CM_BUF_H
#define CM_BUF_H

#include "common.h"

typedef struct buf {
    char *data;
    size_t len, cap, max;
} buf;

#define BUF_INIT                                                                                   \
    {                                                                                              \
        NULL, 0, 0, 0                                                                              \
    }

void buf_init(buf *b, size_t max);
void buf_release(buf *b);
void buf_reset(buf *b); /* len = 0, keeps memory */
cm_rc buf_grow(buf *b, size_t extra);
cm_rc buf_add(buf *b, const void *p, size_t n);
cm_rc buf_adds(buf *b, const char *s);
cm_rc buf_addc(buf *b, char c);
cm_rc buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the data to the caller (never NULL on CM_OK) and resets b. */
char *buf_detach(buf *b);

#endif
