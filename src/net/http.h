/*
 * http.h — the HTTP client: one request (cm_http_fetch_run, streamed through
 * on_data) or a batch of POSTs answered whole (cm_http_post_all, the
 * embedding providers: several in flight at once, a cap on each body).
 * Both run on the one transfer engine of transfer.h: a shared pool of
 * reused connections, one option set, one header parser and one retry
 * policy (http_retry.h: exponential backoff with jitter, Retry-After).
 */
#ifndef CM_HTTP_H
#define CM_HTTP_H

#include "../base/buf.h"
#include "../base/redact.h"
#include "../config/config.h"
#include "http_retry.h"

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
http_opts cm_http_defaults(long timeout_ms);

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

/* A redactor holding what a request carries that is secret: the values of
 * its headers (Authorization, x-goog-api-key, remote.headers, …) and the
 * userinfo and query values of its URL; patterns all on. Release with
 * cm_redact_release. For every message built from remote bytes. */
cm_rc cm_http_redact_init(redact *r, const char *url, const cm_strlist *headers);

/* Appends body[0..n) as one line for a message, with cm_http_redact_init's
 * secrets and the credential patterns redacted (cm_redact_text). */
cm_rc cm_http_error_text(const char *url, const cm_strlist *headers, const char *body, size_t n,
                         size_t max_chars, buf *out);

typedef struct http_client http_client;

/* CM_EIO when libcurl cannot be loaded (err says how to install it). */
cm_rc cm_http_client_open(http_client **out, char *err, size_t errlen);
void cm_http_client_close(http_client *c);

/* POSTs every request, at most o->concurrency at a time, retrying 429, 5xx
 * and network failures (an embedding may be asked again) per http_retry.h.
 * Returns CM_OK when all got a 2xx answer; otherwise CM_EIO (or CM_ETOOBIG)
 * with err naming the first failure (URL without its query string, status,
 * attempts). Each request's status, body and err are filled either way. */
cm_rc cm_http_post_all(http_client *c, http_req *reqs, size_t n, const http_opts *o, char *err,
                       size_t errlen);

/* One streaming request: a GET for large files (model downloads) or, with a
 * body, a POST whose answer is read as it comes (the chat clients' event
 * streams). No total timeout unless timeout_ms; a connect timeout and a stall
 * timeout; a GET follows redirects (at most 10, http and https only; libcurl
 * does not pass an Authorization header on to another host), a POST does
 * not; no Accept-Encoding, so byte ranges are of the file itself. */
typedef struct http_fetch http_fetch;
struct http_fetch {
    const char *url;
    const cm_strlist *headers; /* "Name: value", may be NULL */
    uint64_t range_from;       /* > 0: asks for "Range: bytes=N-" */
    const char *body;          /* non-NULL: POST these body_len bytes */
    size_t body_len;
    long timeout_ms;           /* > 0: the whole transfer's limit */
    long connect_timeout_ms;   /* 0: 30 s */
    long stall_ms;             /* fail when under 1 KiB/s for this long; 0: 60 s */
    /* Body bytes of the final response (status and headers below already
     * set), for any status. Returns false to abort the transfer. */
    bool (*on_data)(http_fetch *f, const char *p, size_t n);
    /* Called at least once a second while the transfer runs (also while it
     * stalls), or NULL. Returns false to abort. */
    bool (*on_tick)(http_fetch *f);
    void *ctx;
    long max_redirects;     /* a GET's redirects: 0 → 10, < 0 → none */
    const char *user_agent; /* NULL: "clawmem/<version>" */
    /* Asked with the numeric address of every connection before its request
     * is sent (redirects included); false refuses it (the transfer fails
     * with CM_EINVAL). NULL: every address. */
    bool (*allow_ip)(const char *ip, void *ctx);
    /* results, of the final response */
    long status;                      /* 0 when none came */
    int64_t content_length;           /* -1 when absent */
    int64_t range_first, range_total; /* Content-Range "bytes F-L/T"; -1 absent or '*' */
    bool retryable;                   /* network failure, 429 or 5xx: worth another try */
    long retry_after_ms;              /* Retry-After of the final response; -1 when none */
    char content_type[64];            /* its media type, parameters dropped; "" when none */
    /* X-Linked-Etag of any response on the way (Hugging Face sends the
     * sha256 of an LFS file on its redirect), unquoted; "" when none. */
    char linked_etag[72];
    char final_url[2048]; /* the URL of the final response (after redirects); may be cut */
    bool refused;         /* allow_ip refused an address */
    /* The retry policy (http_retry.h); all zero: one attempt. An attempt
     * whose answer will be retried never reaches on_data; once bytes were
     * given to on_data, another attempt needs on_restart (called first, to
     * forget them), else there is none. */
    http_retry retry;
    void (*on_restart)(http_fetch *f);
    bool compressed; /* asks for any encoding libcurl decodes (not with ranges) */
    int attempts;    /* result: attempts made */
    char error[320]; /* result: why the fetch failed, when it did (as err) */
};

/* Performs f. CM_OK when a response came, whatever its status; CM_ECANCELED
 * when a callback aborted; CM_EIO on a network failure (or when libcurl
 * cannot be loaded), with err naming the URL (without its query string) and
 * the cause. Thread-safe; a connection of the shared pool (transfer.h). */
cm_rc cm_http_fetch_run(http_fetch *f, char *err, size_t errlen);

#endif
