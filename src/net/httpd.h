/*
 * httpd.h — a small HTTP/1.1 server for clawmem's network services (`clawmem
 * serve`, the gateway's HTTP channel): one accept thread, one thread per
 * connection up to a cap, requests parsed with limits on header bytes, header
 * count, body size and time, keep-alive, plain and streaming (server-sent
 * events) responses, and a graceful stop. Request bodies need Content-Length
 * (chunked request bodies are refused with 411). TLS is left to a reverse
 * proxy.
 */
#ifndef CM_HTTPD_H
#define CM_HTTPD_H

#include "../base/common.h"
#include "../base/log.h"

typedef struct httpd httpd;
typedef struct httpd_conn httpd_conn;

typedef struct httpd_header {
    const char *name, *value; /* value without surrounding spaces */
} httpd_header;

/* One parsed request; valid only during the handler call (copy what a held
 * connection's other thread needs). All strings are NUL-terminated. */
typedef struct httpd_req {
    const char *method; /* "GET", "POST", ... (case as sent) */
    const char *target; /* the request target as sent: path?query */
    const char *path;   /* target before '?', not percent-decoded */
    const char *query;  /* after '?', "" when none */
    int minor_version;  /* 1 for HTTP/1.1, 0 for HTTP/1.0 */
    const httpd_header *headers;
    size_t nheaders;
    const char *body; /* NUL-terminated ("" when none) */
    size_t body_len;
    const char *peer; /* "127.0.0.1:40312", "[::1]:40312" */
} httpd_req;

/* The value of the first header named name (case-insensitive), or NULL. */
const char *cm_net_httpd_header_get(const httpd_req *rq, const char *name);

/* Called on the connection's thread for each request. It answers with
 * cm_net_httpd_respond, or begins a stream with cm_net_httpd_sse_begin; a handler that
 * returns without doing either gets a 500. To write the stream from another
 * thread, it calls cm_net_httpd_conn_hold before returning; the connection then
 * stays open until cm_net_httpd_conn_release. */
typedef void (*httpd_handler)(void *ctx, const httpd_req *rq, httpd_conn *c);

typedef struct httpd_opts {
    const char *listen;      /* "ADDR:PORT", "[v6]:PORT", "host:PORT"; NULL = "127.0.0.1:0"
                                (port 0: the kernel picks one, see cm_net_httpd_port) */
    int max_conns;           /* open connections; more get a 503 and are closed */
    int max_conns_per_addr;  /* open connections from one client address (so one client
                                cannot take them all; behind a reverse proxy every client
                                has the proxy's address: raise it to max_conns) */
    size_t max_header_bytes; /* request line + headers; more → 431 */
    int max_headers;         /* header lines; more → 431 */
    size_t max_body;         /* Content-Length above it → 413 */
    int header_timeout_ms;   /* from a request's first byte to its blank line → 408 */
    int first_byte_timeout_ms; /* a new connection that sends nothing is closed after it */
    int body_timeout_ms;     /* to receive the whole body → 408 */
    int idle_timeout_ms;     /* keep-alive wait for the next request; then closed */
    int write_timeout_ms;    /* a blocked write after that marks the client gone */
    httpd_handler handler;
    void *ctx;
    cm_logger log; /* connection errors at debug level; may be empty */
} httpd_opts;

/* Defaults: loopback port 0, 256 connections, a quarter of max_conns (at
 * least 8, at most max_conns) per client address, 16 KiB / 100 headers,
 * 4 MiB body, 3 s to a new connection's first byte, 10 s headers, 30 s body,
 * 60 s idle, 30 s writes. A limit left 0 in the options given to
 * cm_net_httpd_start takes its default. */
httpd_opts cm_net_httpd_defaults(void);

/* Binds, listens and starts the accept thread. CM_EIO with a message when the
 * address cannot be bound or resolved. */
cm_rc cm_net_httpd_start(const httpd_opts *o, httpd **out, char *err, size_t errlen);
/* The bound port (the kernel's pick when 0 was asked). */
int cm_net_httpd_port(const httpd *h);
/* The bound address as "ADDR:PORT" ("[v6]:PORT"). */
const char *cm_net_httpd_addr(const httpd *h);
/* Graceful stop, then frees h: stops accepting, closes idle connections,
 * lets handlers in flight finish; after deadline_ms every remaining
 * connection is shut down (its writes fail, cm_net_httpd_conn_gone says true), and
 * it waits for their handlers to return and their holders to release them.
 * NULL is a no-op. Not callable from a handler. */
void cm_net_httpd_stop(httpd *h, int deadline_ms);
/* True once cm_net_httpd_stop has been called (for long-running handlers). */
bool cm_net_httpd_stopping(const httpd *h);

/* Sends a complete response. headers: NULL-terminated "Name: value" lines
 * (may be NULL; a line with CR or LF is refused with CM_EINVAL); the server
 * adds Content-Length and Connection. Once per request: a second response is
 * CM_EINVAL. CM_EIO when the client is gone. */
cm_rc cm_net_httpd_respond(httpd_conn *c, int status, const char *const *headers, const char *body,
                           size_t len);

/* Begins a text/event-stream response (chunked, so the connection can be
 * kept alive after cm_net_httpd_sse_end). The server adds Content-Type,
 * Cache-Control: no-cache and Transfer-Encoding. */
cm_rc cm_net_httpd_sse_begin(httpd_conn *c, int status, const char *const *headers);
/* One event: "event:" when event is not NULL, "id:" when id is not NULL, and
 * data split into "data:" lines at its newlines. CM_EIO when the client is
 * gone. Thread-safe: events from several threads never interleave. */
cm_rc cm_net_httpd_sse_event(httpd_conn *c, const char *event, const char *id, const char *data,
                             size_t len);
/* A comment line (": text"), e.g. a keep-alive ping. */
cm_rc cm_net_httpd_sse_comment(httpd_conn *c, const char *text);
/* Ends the stream (the last chunk). Idempotent. */
cm_rc cm_net_httpd_sse_end(httpd_conn *c);

/* True when the client closed its side or reset, a write failed, or the
 * server's stop deadline passed. Thread-safe. */
bool cm_net_httpd_conn_gone(httpd_conn *c);
/* Keeps the connection open past the handler's return, for another thread
 * to write; each hold needs one release. */
void cm_net_httpd_conn_hold(httpd_conn *c);
/* Drops a hold; the last one ends an unfinished stream (and frees nothing the
 * caller may touch afterwards: c is invalid after its last release). */
void cm_net_httpd_conn_release(httpd_conn *c);

/* Switches the connection to another protocol (a WebSocket upgrade): sends
 * "101 Switching Protocols" with headers (NULL-terminated "Name: value"
 * lines). From then on the handler, on its own thread, reads raw bytes with
 * cm_net_httpd_raw_read and any thread writes with cm_net_httpd_raw_write;
 * the connection is closed when the handler returns. Bytes the client sent
 * before the 101 are dropped (RFC 6455 forbids them). CM_EINVAL after a
 * response, CM_EIO when the client is gone. */
cm_rc cm_net_httpd_upgrade(httpd_conn *c, const char *const *headers);
/* Reads at most n bytes of an upgraded connection, waiting at most
 * timeout_ms (< 0: no limit). > 0: bytes read, 0: timeout, -1: closed,
 * failed, or the server is stopping. Only the handler's thread reads. */
long cm_net_httpd_raw_read(httpd_conn *c, void *p, size_t n, int timeout_ms);
/* Writes all of p[0..n) on an upgraded connection; thread-safe (writes never
 * interleave). CM_EIO when the client is gone. */
cm_rc cm_net_httpd_raw_write(httpd_conn *c, const void *p, size_t n);

/* The reason phrase of a status code ("OK", "Not Found", ...). */
const char *cm_net_httpd_reason(int status);

#endif
