/*
 * http_retry.h — the one retry policy of every HTTP call: which failures are
 * worth another attempt, and how long to wait before it (exponential backoff
 * with jitter, Retry-After when the server gives one, a cap on any wait).
 * Pure: the caller keeps the random state and does the waiting.
 *
 * A call is retried only when its caller says it may be repeated
 * (max_attempts > 1): an idempotent GET, a pure POST (embeddings), or a
 * model call the server asked to repeat (only_when_asked).
 */
#ifndef CM_HTTP_RETRY_H
#define CM_HTTP_RETRY_H

#include "../base/common.h"

typedef struct http_retry {
    int max_attempts;        /* ≤ 1: one attempt, no retry */
    long backoff_ms;         /* first delay; doubles per attempt, ±25% jitter */
    long max_backoff_ms;     /* cap on that delay; 0: 60 s */
    long max_retry_after_ms; /* a Retry-After is waited up to this; 0: max_backoff_ms */
    bool longer_fails;       /* a longer Retry-After ends the retries (the caller fails
                                over, or tells its user) instead of being cut short */
    bool only_when_asked;    /* retry only answers carrying Retry-After (model calls: a
                                failure the server did not ask to repeat goes to failover) */
} http_retry;

/* How an attempt ended, as the policy sees it. */
typedef struct http_outcome {
    long status;         /* the answer's status; 0 when none came */
    long retry_after_ms; /* its Retry-After; -1 when none */
    bool net_failed;     /* no answer: a network failure or timeout worth repeating */
} http_outcome;

/* 429 and 5xx: the server may answer later. */
bool cm_http_status_retryable(long status);

/* The wait in ms before attempt number attempts+1 of a call that is to be
 * retried: the backoff (backoff_ms doubled per attempt made after the first,
 * ±25% jitter, at most max_backoff_ms), or the Retry-After when longer (at
 * most max_retry_after_ms). *seed: the caller's random state for the jitter
 * (any value to start; updated). */
long cm_http_backoff_ms(const http_retry *p, int attempts, long retry_after_ms, uint64_t *seed);

/* Whether attempt attempts+1 is to be made after outcome o, and when: the
 * wait in ms (cm_http_backoff_ms), or -1 for no further attempt. */
long cm_http_retry_delay(const http_retry *p, int attempts, const http_outcome *o, uint64_t *seed);

#endif
