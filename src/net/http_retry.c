/*
 * http_retry.c — the retry policy of http_retry.h.
 */
#include "http_retry.h"

bool cm_http_status_retryable(long status)
{
    return status == 429 || status >= 500;
}

static long ra_cap(const http_retry *p)
{
    if (p->max_retry_after_ms > 0) return p->max_retry_after_ms;
    return p->max_backoff_ms > 0 ? p->max_backoff_ms : 60000;
}

long cm_http_backoff_ms(const http_retry *p, int attempts, long retry_after_ms, uint64_t *seed)
{
    long cap = p->max_backoff_ms > 0 ? p->max_backoff_ms : 60000;
    long delay = CM_MIN(CM_MAX(p->backoff_ms, 0L), cap);
    for (int i = 1; i < attempts && delay < cap; i++)
        delay *= 2;
    delay = CM_MIN(delay, cap);
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    delay += (long)((double)delay * ((double)(*seed >> 33) / 4294967296.0 - 0.5) / 2.0);
    delay = CM_MIN(delay, cap);
    if (retry_after_ms > delay) delay = CM_MIN(retry_after_ms, ra_cap(p));
    return CM_MAX(delay, 0L);
}

long cm_http_retry_delay(const http_retry *p, int attempts, const http_outcome *o, uint64_t *seed)
{
    if (attempts >= p->max_attempts) return -1;
    bool asked = o->status && o->retry_after_ms >= 0;
    if (o->status) {
        if (!cm_http_status_retryable(o->status)) return -1;
        if (p->only_when_asked && !asked) return -1;
        if (asked && p->longer_fails && o->retry_after_ms > ra_cap(p)) return -1;
    } else if (!o->net_failed || p->only_when_asked) {
        return -1;
    }
    return cm_http_backoff_ms(p, attempts, asked ? o->retry_after_ms : -1, seed);
}
