/*
 * common.c — error strings, the message formatter and the monotonic clock
 * shared by every layer.
 */
#include <time.h>

#include "common.h"

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
    }
    return "unknown error";
}

cm_rc cm_seterr(char *err, size_t errlen, cm_rc code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
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

int64_t cm_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}
