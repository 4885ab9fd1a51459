/*
 * buf.h — the one growable byte buffer. Invariants: data is never NULL and
 * always NUL-terminated (data[len] == 0): an empty buffer points at
 * cm_buf_empty, a shared "" that is never written (git's strbuf_slopbuf), until
 * its first append allocates; len < cap once allocated (cap == 0 means
 * nothing is owned); len never exceeds max (0 = unlimited), so a hostile
 * input cannot take all memory — an append past max fails with CM_ETOOBIG and
 * leaves the buffer unchanged. A buf inside a zeroed struct (data NULL) is
 * accepted by every function here and is empty; initialise with BUF_INIT or
 * cm_buf_init to have the invariant from the start.
 */
#ifndef CM_BUF_H
#define CM_BUF_H

#include "common.h"

typedef struct buf {
    char *data;
    size_t len, cap, max;
} buf;

/* What every empty buffer points at. Never written. */
extern char cm_buf_empty[1];

#define BUF_INIT                                                                                   \
    {                                                                                              \
        cm_buf_empty, 0, 0, 0                                                                      \
    }

/* The appends return CM_ETOOBIG or CM_ENOMEM and leave the buffer as it was;
 * the compiler warns when library code ignores that (the tests, which build
 * their inputs with appends, are compiled with -DBUF_MUST_CHECK=). */
#ifndef BUF_MUST_CHECK
#define BUF_MUST_CHECK __attribute__((warn_unused_result))
#endif

void cm_buf_init(buf *b, size_t max);
void cm_buf_release(buf *b);
void cm_buf_reset(buf *b); /* len = 0, keeps memory */
BUF_MUST_CHECK cm_rc cm_buf_grow(buf *b, size_t extra);
BUF_MUST_CHECK cm_rc cm_buf_add(buf *b, const void *p, size_t n);
BUF_MUST_CHECK cm_rc cm_buf_adds(buf *b, const char *s);
BUF_MUST_CHECK cm_rc cm_buf_addc(buf *b, char c);
BUF_MUST_CHECK cm_rc cm_buf_printf(buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
BUF_MUST_CHECK cm_rc cm_buf_vprintf(buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Hands the data to the caller (a malloc'ed string, "" for an empty buffer;
 * NULL only when that "" cannot be allocated) and resets b to empty. */
char *cm_buf_detach(buf *b);

#endif
