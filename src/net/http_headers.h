/*
 * http_headers.h — the one parser of HTTP response header lines for every
 * transfer of the engine (net/transfer.c): status line, Retry-After,
 * Content-Type, Content-Length, Content-Range and X-Linked-Etag. Pure: no
 * libcurl, no clock of its own (the caller gives "now").
 */
#ifndef CM_HTTP_HEADERS_H
#define CM_HTTP_HEADERS_H

#include "../base/common.h"

typedef struct http_meta {
    long status;                      /* 0 until a status line came */
    int64_t content_length;           /* -1 when absent */
    int64_t range_first, range_total; /* Content-Range "bytes F-L/T"; -1 absent or '*' */
    long retry_after_ms;              /* Retry-After in ms (capped at a day); -1 when none */
    char content_type[64];            /* the media type, parameters dropped; "" when none */
    /* X-Linked-Etag of any response on the way (kept across redirects),
     * unquoted; "" when none. */
    char linked_etag[72];
} http_meta;

/* Everything unknown, linked_etag included. */
void cm_http_meta_init(http_meta *m);

/* Reads one header line p[0..n) (CR LF or not) of a response. A status line
 * ("HTTP/…") starts a new response: every field but linked_etag is forgotten.
 * Unknown and malformed lines change nothing. now_s: the wall clock in
 * seconds since the epoch, for a Retry-After given as a date. */
void cm_http_meta_line(http_meta *m, const char *p, size_t n, int64_t now_s);

/* A Retry-After value — delay-seconds or an IMF-fixdate ("Sun, 06 Nov 1994
 * 08:49:37 GMT") — in ms from now_s, at most a day; -1 when unreadable. */
long cm_http_retry_after_ms(const char *v, int64_t now_s);

#endif
