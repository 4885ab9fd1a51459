/*
 * common.h — what every file of clawmem includes first: the public rc enum,
 * the CHECK/single-exit helpers, error-message formatting, and banned.h.
 */
#ifndef CM_COMMON_H
#define CM_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clawmem.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define CM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CM_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Single exit: `CHECK(f());` jumps to `out:` with rc set when f fails. */
#define CHECK(expr)                                                                                \
    do {                                                                                           \
        rc = (expr);                                                                               \
        if (rc != CM_OK) goto out;                                                                 \
    } while (0)

/* Sets rc, writes the message into (err, errlen) and jumps to out. */
#define FAIL(code, ...)                                                                            \
    do {                                                                                           \
        rc = cm_seterr(err, errlen, (code), __VA_ARGS__);                                          \
        goto out;                                                                                  \
    } while (0)

/* Formats a message into err (when err is not NULL) and returns code. The
 * rule of curl's failf: the innermost message wins. The function that meets a
 * failure writes the message; its callers return the rc and leave the message
 * alone; a caller that adds context has the callee write into a buffer of
 * its own and quotes it in err. */
cm_rc cm_seterr(char *err, size_t errlen, cm_rc code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Makes msg (a NUL-terminated message in a buffer of size bytes) safe to
 * print on one line: control characters and invalid UTF-8 escaped as
 * cm_utf8_escape_line does, cut at size. cm_seterr and cm_logf apply it to every
 * message, so a file name or a server's answer never forges a line. */
void cm_msg_clean(char *msg, size_t size);

/* xmalloc-style helpers that abort on out-of-memory are deliberately absent:
 * allocation failure is CM_ENOMEM, returned up the stack. */
char *cm_strdup(const char *s);

/* Milliseconds on the monotonic clock (for timeouts and rates, not dates). */
int64_t cm_now_ms(void);
/* Milliseconds since the Unix epoch (wall clock: for dates written to files). */
int64_t cm_wall_ms(void);
/* The time ms milliseconds from now on clock, as the absolute deadline
 * pthread_cond_timedwait takes (CLOCK_MONOTONIC for a condition variable
 * set to that clock, CLOCK_REALTIME for a default one). */
struct timespec cm_deadline_in(clockid_t clock, int64_t ms);
char *cm_strndup(const char *s, size_t n);

#include "banned.h"
#endif
