/*
 * common.c — error strings, the message formatter and the monotonic clock
 * shared by every layer.
 */
#include <time.h>

#include "common.h"
#include "utf8.h"

const char *cm_strerror(cm_rc rc)
{
    switch (rc) {
    case CM_OK:
        return "ok";
    case CM_ENOMEM:
        return "out of memory";
    case CM_EINVAL:
        return "invalid argument";
    case CM_ECONFIG:
        return "bad config";
    case CM_EIO:
        return "I/O error";
    case CM_EDB:
        return "index database error";
    case CM_EBUSY:
        return "index locked by another process";
    case CM_ECORRUPT:
        return "index file is corrupt";
    case CM_EPATH:
        return "path not allowed";
    case CM_ETOOBIG:
        return "input too large";
    case CM_ENOTFOUND:
        return "not found";
    case CM_ECANCELED:
        return "cancelled";
    case CM_EAUTH:
        return "credentials refused";
    case CM_ERATELIMIT:
        return "rate-limited";
    case CM_ETIMEOUT:
        return "timed out";
    case CM_EBILLING:
        return "billing";
    case CM_EUNAVAILABLE:
        return "search unavailable";
    }
    return "unknown error";
}

void cm_msg_clean(char *msg, size_t size)
{
    size_t n = strlen(msg);
    if (!cm_utf8_needs_escape(msg, n)) return;
    char *copy = cm_strndup(msg, n);
    if (!copy) { /* no memory: blank what cannot be shown */
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)msg[i] < 0x20 || (unsigned char)msg[i] >= 0x7f) msg[i] = '?';
        return;
    }
    buf b;
    cm_buf_init(&b, size - 1);
    cm_utf8_escape_line(&b, copy, n); /* CM_ETOOBIG: cut at a boundary */
    memcpy(msg, b.data, b.len);
    msg[b.len] = 0;
    cm_buf_release(&b);
    free(copy);
}

cm_rc cm_seterr(char *err, size_t errlen, cm_rc code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
        cm_msg_clean(err, errlen);
    }
    return code;
}

char *cm_strndup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *cm_strdup(const char *s)
{
    return s ? cm_strndup(s, strlen(s)) : NULL;
}

void cm_free(void *p)
{
    free(p);
}

int64_t cm_wall_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

struct timespec cm_deadline_in(clockid_t clock, int64_t ms)
{
    struct timespec t;
    clock_gettime(clock, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

int64_t cm_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}
