/*
 * http.h — the HTTP client of the embedding providers, on libcurl's multi
 * interface: several requests in flight at once over reused connections, a
 * timeout per attempt, retries of 429, 5xx and network failures with
 * exponential backoff and jitter that honour Retry-After, and a cap on the
 * size of a response body.
 */
#ifndef CM_HTTP_H
#define CM_HTTP_H

#include "../base/buf.h"
#include "../config/config.h"

typedef struct http_opts {
    long timeout_ms;     /* per attempt */
    int max_attempts;    /* 1 = no retry */
    long backoff_ms;     /* first retry delay; doubles, ±25% jitter */
    long max_backoff_ms; /* cap on any delay, Retry-After included */
    int concurrency;     /* requests in flight */
    size_t max_body;     /* larger responses fail */
} http_opts;

/* Defaults: 4 attempts, 500 ms doubling to at most 60 s, 2 in flight, 64 MiB
 * bodies; timeout_ms as given. $CLAWMEM_HTTP_BACKOFF_MS and
 * $CLAWMEM_HTTP_TIMEOUT_MS override backoff and timeout (for tests and slow
 * links). */
http_opts http_defaults(long timeout_ms);

typedef struct http_req {
    const char *url;
    const cm_strlist *headers; /* "Name: value" */
    const char *body;
    size_t body_len;
    /* results */
    long status; /* last HTTP status, 0 when none came */
    buf resp;    /* body of the last attempt */
    int attempts;
    char err[320]; /* why it failed, when it did */
} http_req;

typedef struct http_client http_client;

/* CM_EIO when libcurl cannot be loaded (err says how to install it). */
cm_rc http_client_new(http_client **out, char *err, size_t errlen);
void http_client_free(http_client *c);

/* POSTs every request, at most o->concurrency at a time, retrying as above.
 * Returns CM_OK when all got a 2xx answer; otherwise CM_EIO (or CM_ETOOBIG)
 * with err naming the first failure (URL without its query string, status,
 * attempts). Each request's status, body and err are filled either way. */
cm_rc http_post_all(http_client *c, http_req *reqs, size_t n, const http_opts *o, char *err,
                    size_t errlen);

#endif
