/*
 * httpd_parse.h — request heads for httpd.c (httpd_parse.c): pure
 * functions of their arguments, thread safe, no I/O.
 */
#ifndef CM_HTTPD_PARSE_H
#define CM_HTTPD_PARSE_H

#include "httpd.h"

/* A request head parsed in place: rq's strings point into the head given to
 * cm_net_httpd_parse_head; hdrs is the caller's array of max_headers entries
 * (rq.headers points at it). */
typedef struct httpd_parsed {
    httpd_req rq;
    httpd_header *hdrs;
    size_t content_length;
    bool keep_alive, expect_continue;
} httpd_parsed;

/* Where the head (request line + headers + blank line) ends in p[0..n), or 0
 * when not yet; the search starts at from. Accepts bare LF line ends. */
size_t cm_net_httpd_head_end(const char *p, size_t n, size_t from);

/* Parses head (a NUL-terminated copy, modified in place) into pr, whose
 * hdrs the caller set and whose other fields are zero, with o's limits
 * (max_headers, max_body). 0, or the status of the error to answer (400,
 * 411, 413, 417, 431, 501, 505). */
int cm_net_httpd_parse_head(char *head, const httpd_opts *o, httpd_parsed *pr);

#endif
