/*
 * fuzz_httpd.c — the HTTP server on arbitrary bytes, over a real loopback
 * connection: the bytes are sent, the client's side shut, and the answer
 * read until the server closes. Whatever arrives must be empty or start as
 * an HTTP/1.1 response; every request that reaches the handler must be well
 * formed (a method, a path, header names, a NUL-terminated body of its
 * Content-Length) — else it traps. Pipelined requests, bodies, Expect and
 * server-sent events (a path with "sse") are all reachable.
 */
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/net/httpd.h"
#include "fuzz.h"

static httpd *srv;

static void handler(void *ctx, const httpd_req *rq, httpd_conn *c)
{
    (void)ctx;
    if (!rq->method[0] || !rq->path || !rq->query || !rq->body || !rq->peer) __builtin_trap();
    if (rq->path[0] != '/' && strcmp(rq->path, "*") != 0) __builtin_trap();
    if (rq->body[rq->body_len] != 0 || rq->body_len > 4096) __builtin_trap();
    for (size_t i = 0; i < rq->nheaders; i++)
        if (!rq->headers[i].name[0] || strpbrk(rq->headers[i].name, ": \r\n") ||
            strpbrk(rq->headers[i].value, "\r\n"))
            __builtin_trap();
    if (strstr(rq->path, "sse")) {
        cm_net_httpd_sse_begin(c, 200, NULL);
        cm_net_httpd_sse_event(c, "message", "1", rq->body, rq->body_len);
        cm_net_httpd_sse_end(c);
    } else if (!strstr(rq->path, "none")) {
        cm_net_httpd_respond(c, 200, (const char *const[]){"Content-Type: text/plain", NULL},
                             rq->body, rq->body_len);
    }
}

void fuzz_httpd_stop(void)
{
    if (srv) cm_net_httpd_stop(srv, 1000);
    srv = NULL;
}

int fuzz_httpd(const uint8_t *data, size_t size)
{
    if (!srv) {
        httpd_opts o = cm_net_httpd_defaults();
        o.max_header_bytes = 2048;
        o.max_headers = 20;
        o.max_body = 4096;
        o.header_timeout_ms = o.body_timeout_ms = o.idle_timeout_ms = 2000;
        o.handler = handler;
        if (cm_net_httpd_start(&o, &srv, NULL, 0) != CM_OK) __builtin_trap();
        atexit(fuzz_httpd_stop);
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)cm_net_httpd_port(srv));
    a.sin_addr.s_addr = htonl(0x7f000001);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) __builtin_trap();
    size_t off = 0;
    while (off < size) {
        ssize_t w = send(fd, data + off, size - off, MSG_NOSIGNAL);
        if (w <= 0) break;
        off += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    char first[16];
    size_t got = 0;
    char sink[4096];
    int64_t until = cm_now_ms() + 10000;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int64_t left = until - cm_now_ms();
        if (left <= 0) __builtin_trap(); /* the server never closed */
        if (poll(&p, 1, (int)left) <= 0) continue;
        ssize_t r = recv(fd, sink, sizeof sink, 0);
        if (r <= 0) break;
        for (ssize_t i = 0; i < r && got < sizeof first; i++)
            first[got++] = sink[i];
    }
    close(fd);
    if (got && (got < 9 || memcmp(first, "HTTP/1.1 ", 9) != 0)) __builtin_trap();
    return 0;
}

FUZZ_ENTRY(fuzz_httpd)
