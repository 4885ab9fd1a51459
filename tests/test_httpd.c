/*
 * test_httpd.c — the HTTP/1.1 server over real loopback sockets: requests
 * and keep-alive (pipelined too), every limit (header bytes and count, body
 * size, chunked bodies, bad syntax, versions), slow clients against short
 * timeouts, server-sent events written from another thread and a client
 * that goes away, concurrent clients and the connection cap, and a graceful
 * stop with a handler in flight.
 */
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../src/net/httpd.h"
#include "../src/net/httpd_parse.h"
#include "test.h"

static int S_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(0x7f000001);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void S_send(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

/* Reads until the peer closes or timeout_ms passes. */
static char *S_read_all(int fd, int timeout_ms)
{
    buf b = BUF_INIT;
    int64_t until = cm_now_ms() + timeout_ms;
    char tmp[4096];
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int64_t left = until - cm_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) break;
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r <= 0) break;
        cm_buf_add(&b, tmp, (size_t)r);
    }
    cm_buf_addc(&b, 0);
    return cm_buf_detach(&b);
}

/* Reads one response with a Content-Length body (or until close). */
static char *S_read_response(int fd, int timeout_ms)
{
    buf b = BUF_INIT;
    int64_t until = cm_now_ms() + timeout_ms;
    char ch;
    for (;;) {
        if (b.len >= 4 && memcmp(b.data + b.len - 4, "\r\n\r\n", 4) == 0) {
            const char *cl = strstr(b.data, "Content-Length: ");
            size_t want = b.len + (cl ? strtoul(cl + 16, NULL, 10) : 0);
            while (b.len < want) {
                struct pollfd p = {fd, POLLIN, 0};
                int64_t left = until - cm_now_ms();
                if (left <= 0 || poll(&p, 1, (int)left) <= 0 || recv(fd, &ch, 1, 0) != 1) break;
                cm_buf_addc(&b, ch);
            }
            break;
        }
        struct pollfd p = {fd, POLLIN, 0};
        int64_t left = until - cm_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0 || recv(fd, &ch, 1, 0) != 1) break;
        cm_buf_addc(&b, ch);
    }
    cm_buf_addc(&b, 0);
    return cm_buf_detach(&b);
}

/* One request on a fresh connection; returns everything until close. */
static char *S_exchange(int port, const char *raw, int timeout_ms)
{
    int fd = S_connect(port);
    if (fd < 0) return cm_strdup("");
    S_send(fd, raw);
    char *r = S_read_all(fd, timeout_ms);
    close(fd);
    return r;
}

static int S_status(const char *resp)
{
    return strncmp(resp, "HTTP/1.1 ", 9) == 0 ? (int)strtol(resp + 9, NULL, 10) : 0;
}

/* The echo handler: describes the request in the body; "/slow" waits for
 * the test's flag first, "/none" answers nothing, "/sse" streams from a
 * thread of its own. */
typedef struct echo_ctx {
    atomic_int calls;
    atomic_bool release_slow;
    atomic_bool in_slow;
    atomic_bool saw_gone;
    atomic_bool stream_done;
    int sse_events;
    bool sse_wait_gone;
} echo_ctx;

static void *S_sse_writer(void *arg)
{
    void **a = arg;
    httpd_conn *c = a[0];
    echo_ctx *x = a[1];
    free(a);
    for (int i = 0; i < x->sse_events; i++) {
        char id[16], data[64];
        snprintf(id, sizeof id, "%d", i);
        snprintf(data, sizeof data, "{\"n\":%d}\nsecond line", i);
        cm_net_httpd_sse_event(c, "message", id, data, strlen(data));
    }
    if (x->sse_wait_gone) {
        /* wait (bounded) for the client to go away */
        int64_t until = cm_now_ms() + 10000;
        while (!cm_net_httpd_conn_gone(c) && cm_now_ms() < until) {
            struct pollfd none;
            poll(&none, 0, 10);
        }
        atomic_store(&x->saw_gone, cm_net_httpd_conn_gone(c));
        atomic_store(&x->saw_gone,
                     atomic_load(&x->saw_gone) && cm_net_httpd_sse_comment(c, "ping") == CM_EIO);
    } else {
        cm_net_httpd_sse_end(c);
    }
    atomic_store(&x->stream_done, true);
    cm_net_httpd_conn_release(c);
    return NULL;
}

static void S_echo(void *ctx, const httpd_req *rq, httpd_conn *c)
{
    echo_ctx *x = ctx;
    atomic_fetch_add(&x->calls, 1);
    if (strcmp(rq->path, "/none") == 0) return;
    if (strcmp(rq->path, "/slow") == 0) {
        atomic_store(&x->in_slow, true);
        int64_t until = cm_now_ms() + 10000;
        while (!atomic_load(&x->release_slow) && cm_now_ms() < until) {
            struct pollfd none;
            poll(&none, 0, 5);
        }
    }
    if (strcmp(rq->path, "/sse") == 0) {
        cm_net_httpd_sse_begin(c, 200, (const char *const[]){"X-Stream: yes", NULL});
        cm_net_httpd_conn_hold(c);
        void **a = malloc(2 * sizeof *a);
        a[0] = c;
        a[1] = x;
        pthread_t t;
        pthread_create(&t, NULL, S_sse_writer, a);
        pthread_detach(t);
        return;
    }
    buf b = BUF_INIT;
    const char *ua = cm_net_httpd_header_get(rq, "x-TEST");
    cm_buf_printf(&b, "method=%s path=%s query=%s x-test=%s body=%s bodylen=%zu peer=%.10s",
                  rq->method, rq->path, rq->query, ua ? ua : "-", rq->body, rq->body_len, rq->peer);
    cm_net_httpd_respond(c, 200, (const char *const[]){"Content-Type: text/plain", NULL}, b.data,
                         b.len);
    /* a second answer is refused, and so is a header with a line break */
    if (cm_net_httpd_respond(c, 200, NULL, "x", 1) != CM_EINVAL) abort();
    cm_buf_release(&b);
}

static httpd *S_start(echo_ctx *x, httpd_opts *o)
{
    o->handler = S_echo;
    o->ctx = x;
    httpd *h = NULL;
    char err[256];
    if (cm_net_httpd_start(o, &h, err, sizeof err) != CM_OK) return NULL;
    return h;
}

TEST(httpd_request_and_keepalive)
{
    echo_ctx x = {0};
    httpd_opts o = cm_net_httpd_defaults();
    httpd *h = S_start(&x, &o);
    EXPECT(h != NULL);
    EXPECT(cm_net_httpd_port(h) > 0);
    EXPECT_CONTAINS(cm_net_httpd_addr(h), "127.0.0.1:");

    int fd = S_connect(cm_net_httpd_port(h));
    EXPECT(fd >= 0);
    S_send(fd, "POST /echo/a?x=1&y=2 HTTP/1.1\r\nHost: h\r\nX-Test:  v1 \r\n"
               "Content-Length: 5\r\n\r\nhello");
    char *r = S_read_response(fd, 5000);
    EXPECT_INT(S_status(r), 200);
    EXPECT_CONTAINS(r, "Connection: keep-alive");
    EXPECT_CONTAINS(r, "Content-Type: text/plain");
    EXPECT_CONTAINS(r, "method=POST path=/echo/a query=x=1&y=2 x-test=v1 body=hello bodylen=5 "
                       "peer=127.0.0.1");
    free(r);
    /* same connection: two pipelined requests, the second asks to close */
    S_send(fd, "GET /b HTTP/1.1\r\nHost: h\r\n\r\nGET /c HTTP/1.1\r\nHost: h\r\n"
               "Connection: close\r\n\r\n");
    r = S_read_all(fd, 5000);
    EXPECT_CONTAINS(r, "path=/b query= x-test=- body= bodylen=0");
    EXPECT_CONTAINS(r, "path=/c");
    EXPECT_CONTAINS(r, "Connection: close");
    free(r);
    close(fd);
    EXPECT_INT(atomic_load(&x.calls), 3);

    /* HTTP/1.0 closes unless asked; HEAD has no body; no answer is a 500 */
    r = S_exchange(cm_net_httpd_port(h), "GET /old HTTP/1.0\r\n\r\n", 5000);
    EXPECT_INT(S_status(r), 200);
    EXPECT_CONTAINS(r, "Connection: close");
    free(r);
    r = S_exchange(cm_net_httpd_port(h), "HEAD /h HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
                   5000);
    EXPECT_INT(S_status(r), 200);
    EXPECT(strstr(r, "method=") == NULL);
    free(r);
    r = S_exchange(cm_net_httpd_port(h),
                   "GET /none HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", 5000);
    EXPECT_INT(S_status(r), 500);
    free(r);
    /* Expect: 100-continue gets the interim answer before the body */
    fd = S_connect(cm_net_httpd_port(h));
    S_send(fd, "PUT /e HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
    r = S_read_response(fd, 5000);
    EXPECT_CONTAINS(r, "HTTP/1.1 100 Continue");
    free(r);
    S_send(fd, "abc");
    r = S_read_response(fd, 5000);
    EXPECT_CONTAINS(r, "body=abc");
    free(r);
    close(fd);
    cm_net_httpd_stop(h, 1000);
}

TEST(httpd_limits_and_garbage)
{
    echo_ctx x = {0};
    httpd_opts o = cm_net_httpd_defaults();
    o.max_header_bytes = 1024;
    o.max_headers = 10;
    o.max_body = 100;
    httpd *h = S_start(&x, &o);
    EXPECT(h != NULL);
    int port = cm_net_httpd_port(h);
    buf big = BUF_INIT;
    cm_buf_adds(&big, "GET / HTTP/1.1\r\nHost: h\r\nX-Big: ");
    for (int i = 0; i < 2000; i++)
        cm_buf_addc(&big, 'a');
    cm_buf_adds(&big, "\r\n\r\n");
    struct {
        const char *raw;
        int status;
    } cases[] = {
        {big.data, 431},
        {"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\nF: 1\r\nG: 1\r\n"
         "H: 1\r\nI: 1\r\nJ: 1\r\nK: 1\r\n\r\n",
         431},
        {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 101\r\n\r\n", 413},
        {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413},
        {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
         411},
        {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
        {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400},
        {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 400},
        {"GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505},
        {"GET / HTTP/1.1\r\n\r\n", 400},                           /* no Host */
        {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},     /* two */
        {"GET nopath HTTP/1.1\r\nHost: h\r\n\r\n", 400},           /* target */
        {"G(T / HTTP/1.1\r\nHost: h\r\n\r\n", 400},                /* method */
        {"GET / HTTP/1.1\r\nHost: h\r\nBad Name: v\r\n\r\n", 400}, /* header name */
        {"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n folded\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: h\r\nNocolon\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: h\r\nExpect: magic\r\n\r\n", 417},
        {"\x16\x03\x01\x02\x05\x01\x07\x01\xfc\x03\x03\r\n\r\n", 400}, /* TLS hello */
        {"GET / HTTP/1.1 extra\r\nHost: h\r\n\r\n", 400},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char *r = S_exchange(port, cases[i].raw, 5000);
        int st = S_status(r);
        if (st != cases[i].status)
            test_fail(__FILE__, __LINE__, "case %zu: status %d, want %d: %.60s", i, st,
                      cases[i].status, r);
        EXPECT_CONTAINS(r, "Connection: close");
        free(r);
    }
    cm_buf_release(&big);
    EXPECT_INT(atomic_load(&x.calls), 0); /* nothing bad reached the handler */
    /* a body at the cap is fine; bare LF line ends are accepted */
    char ok[256];
    snprintf(ok, sizeof ok,
             "POST /ok HTTP/1.1\nHost: h\nConnection: close\nContent-Length: 100\n\n%0100d", 7);
    char *r = S_exchange(port, ok, 5000);
    EXPECT_INT(S_status(r), 200);
    EXPECT_CONTAINS(r, "bodylen=100");
    free(r);
    /* a NUL byte in the head */
    int nfd = S_connect(port);
    static const char nul[] = "GET / HTTP/1.1\r\nHost: h\0x\r\n\r\n";
    EXPECT_INT(send(nfd, nul, sizeof nul - 1, MSG_NOSIGNAL), (long)sizeof nul - 1);
    r = S_read_all(nfd, 5000);
    EXPECT_INT(S_status(r), 400);
    free(r);
    close(nfd);
    /* random garbage: an error status or a close, never a crash */
    uint32_t seed = 12345;
    for (int i = 0; i < 50; i++) {
        char g[300];
        for (size_t k = 0; k < sizeof g - 1; k++) {
            seed = seed * 1103515245u + 12345u;
            g[k] = (char)(1 + (seed >> 16) % 255);
        }
        g[sizeof g - 1] = 0;
        if (i % 2) memcpy(g + 280, "\r\n\r\n", 4);
        int gfd = S_connect(port);
        S_send(gfd, g);
        shutdown(gfd, SHUT_WR); /* an unfinished head then ends at EOF */
        r = S_read_all(gfd, 3000);
        close(gfd);
        EXPECT(r[0] == 0 || S_status(r) >= 400);
        free(r);
    }
    cm_net_httpd_stop(h, 1000);
}

TEST(httpd_slow_clients)
{
    echo_ctx x = {0};
    httpd_opts o = cm_net_httpd_defaults();
    o.header_timeout_ms = 300;
    o.body_timeout_ms = 300;
    o.idle_timeout_ms = 300;
    httpd *h = S_start(&x, &o);
    EXPECT(h != NULL);
    int port = cm_net_httpd_port(h);
    /* slowloris: a head that never ends gets 408 after the header time */
    int fd = S_connect(port);
    int64_t t0 = cm_now_ms();
    S_send(fd, "GET / HTTP/1.1\r\nHost: h\r\n");
    for (int i = 0; i < 3; i++) {
        struct pollfd none;
        poll(&none, 0, 100);
        S_send(fd, "X-A: b\r\n");
    }
    char *r = S_read_all(fd, 10000);
    int64_t took = cm_now_ms() - t0;
    EXPECT_INT(S_status(r), 408);
    EXPECT(took < 8000);
    free(r);
    close(fd);
    /* a body that stalls */
    fd = S_connect(port);
    S_send(fd, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc");
    r = S_read_all(fd, 10000);
    EXPECT_INT(S_status(r), 408);
    free(r);
    close(fd);
    /* a connection that sends nothing is closed without an answer */
    fd = S_connect(port);
    r = S_read_all(fd, 10000);
    EXPECT_STR(r, "");
    free(r);
    close(fd);
    /* an idle keep-alive connection is closed after the idle time */
    fd = S_connect(port);
    S_send(fd, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    r = S_read_all(fd, 10000);
    EXPECT_INT(S_status(r), 200);
    free(r);
    close(fd);
    EXPECT_INT(atomic_load(&x.calls), 1);
    cm_net_httpd_stop(h, 1000);
}

TEST(httpd_sse)
{
    echo_ctx x = {0};
    x.sse_events = 3;
    httpd_opts o = cm_net_httpd_defaults();
    httpd *h = S_start(&x, &o);
    EXPECT(h != NULL);
    int fd = S_connect(cm_net_httpd_port(h));
    S_send(fd, "GET /sse HTTP/1.1\r\nHost: h\r\n\r\n");
    /* read until the last chunk */
    buf b = BUF_INIT;
    int64_t until = cm_now_ms() + 5000;
    while (!(b.len && strstr(b.data, "\r\n0\r\n\r\n")) && cm_now_ms() < until) {
        char tmp[1024];
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 200) <= 0) continue;
        ssize_t n = recv(fd, tmp, sizeof tmp, 0);
        if (n <= 0) break;
        cm_buf_add(&b, tmp, (size_t)n);
    }
    EXPECT(b.len > 0);
    EXPECT_CONTAINS(b.data, "Content-Type: text/event-stream");
    EXPECT_CONTAINS(b.data, "Transfer-Encoding: chunked");
    EXPECT_CONTAINS(b.data, "X-Stream: yes");
    EXPECT_CONTAINS(b.data, "event: message\nid: 0\ndata: {\"n\":0}\ndata: second line\n\n");
    EXPECT_CONTAINS(b.data, "id: 2\ndata: {\"n\":2}");
    EXPECT_CONTAINS(b.data, "\r\n0\r\n\r\n");
    cm_buf_release(&b);
    /* the connection is still usable afterwards */
    S_send(fd, "GET /after HTTP/1.1\r\nHost: h\r\n\r\n");
    char *r = S_read_response(fd, 5000);
    EXPECT_CONTAINS(r, "path=/after");
    free(r);
    close(fd);

    /* a client that goes away: the writer learns it, writes fail */
    atomic_store(&x.stream_done, false);
    x.sse_events = 1;
    x.sse_wait_gone = true;
    fd = S_connect(cm_net_httpd_port(h));
    S_send(fd, "GET /sse HTTP/1.1\r\nHost: h\r\n\r\n");
    r = S_read_all(fd, 300);
    EXPECT_CONTAINS(r, "data: {\"n\":0}");
    free(r);
    close(fd);
    until = cm_now_ms() + 10000;
    while (!atomic_load(&x.stream_done) && cm_now_ms() < until) {
        struct pollfd none;
        poll(&none, 0, 10);
    }
    EXPECT(atomic_load(&x.stream_done));
    EXPECT(atomic_load(&x.saw_gone));
    cm_net_httpd_stop(h, 1000);
}

typedef struct client_arg {
    int port, ok;
} client_arg;

static void *S_client(void *arg)
{
    client_arg *a = arg;
    int fd = S_connect(a->port);
    for (int i = 0; i < 20 && fd >= 0; i++) {
        char req[128];
        snprintf(req, sizeof req, "POST /c HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n%02d",
                 i);
        S_send(fd, req);
        char *r = S_read_response(fd, 10000);
        char want[32];
        snprintf(want, sizeof want, "body=%02d", i);
        if (S_status(r) == 200 && strstr(r, want)) a->ok++;
        free(r);
    }
    if (fd >= 0) close(fd);
    return NULL;
}

TEST(httpd_concurrent_and_cap)
{
    echo_ctx x = {0};
    httpd_opts o = cm_net_httpd_defaults();
    httpd *h = S_start(&x, &o);
    EXPECT(h != NULL);
    pthread_t t[16];
    client_arg a[16];
    for (int i = 0; i < 16; i++) {
        a[i].port = cm_net_httpd_port(h);
        a[i].ok = 0;
        pthread_create(&t[i], NULL, S_client, &a[i]);
    }
    int ok = 0;
    for (int i = 0; i < 16; i++) {
        pthread_join(t[i], NULL);
        ok += a[i].ok;
    }
    EXPECT_INT(ok, 16 * 20);
    cm_net_httpd_stop(h, 1000);

    /* at the cap, one more connection gets 503 */
    o = cm_net_httpd_defaults();
    o.max_conns = 2;
    h = S_start(&x, &o);
    EXPECT(h != NULL);
    int f1 = S_connect(cm_net_httpd_port(h)), f2 = S_connect(cm_net_httpd_port(h));
    S_send(f1, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    char *r = S_read_response(f1, 5000); /* both are being served now */
    EXPECT_INT(S_status(r), 200);
    free(r);
    S_send(f2, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    r = S_read_response(f2, 5000);
    EXPECT_INT(S_status(r), 200);
    free(r);
    int f3 = S_connect(cm_net_httpd_port(h));
    r = S_read_all(f3, 5000);
    EXPECT_INT(S_status(r), 503);
    free(r);
    close(f3);
    close(f1);
    close(f2);
    cm_net_httpd_stop(h, 1000);
}

typedef struct slow_arg {
    int port;
    char *resp;
} slow_arg;

static void *S_slow_client(void *arg)
{
    slow_arg *a = arg;
    a->resp = S_exchange(a->port, "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n", 10000);
    return NULL;
}

typedef struct stop_arg {
    httpd *h;
    atomic_bool done;
} stop_arg;

static void *S_stopper(void *arg)
{
    stop_arg *a = arg;
    cm_net_httpd_stop(a->h, 5000);
    atomic_store(&a->done, true);
    return NULL;
}

TEST(httpd_graceful_stop)
{
    echo_ctx x = {0};
    httpd_opts o = cm_net_httpd_defaults();
    httpd *h = S_start(&x, &o);
    EXPECT(h != NULL);
    int port = cm_net_httpd_port(h);
    /* an idle keep-alive connection and a handler in flight */
    int idle = S_connect(port);
    S_send(idle, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    char *r = S_read_response(idle, 5000);
    EXPECT_INT(S_status(r), 200);
    free(r);
    slow_arg sa = {port, NULL};
    pthread_t ct;
    pthread_create(&ct, NULL, S_slow_client, &sa);
    int64_t until = cm_now_ms() + 5000;
    while (!atomic_load(&x.in_slow) && cm_now_ms() < until) {
        struct pollfd none;
        poll(&none, 0, 5);
    }
    EXPECT(atomic_load(&x.in_slow));
    stop_arg st = {h, false};
    pthread_t stt;
    pthread_create(&stt, NULL, S_stopper, &st);
    /* the idle connection is closed at once; new ones are refused */
    r = S_read_all(idle, 5000);
    EXPECT_STR(r, "");
    free(r);
    close(idle);
    until = cm_now_ms() + 5000;
    int fd;
    while ((fd = S_connect(port)) >= 0 && cm_now_ms() < until) {
        close(fd);
        struct pollfd none;
        poll(&none, 0, 5);
    }
    EXPECT(fd < 0);
    EXPECT(!atomic_load(&st.done)); /* still waiting for the handler */
    atomic_store(&x.release_slow, true);
    pthread_join(ct, NULL);
    pthread_join(stt, NULL);
    EXPECT(atomic_load(&st.done));
    EXPECT_INT(S_status(sa.resp), 200);
    EXPECT_CONTAINS(sa.resp, "Connection: close");
    free(sa.resp);

    /* past the deadline a held stream is cut: its writer sees the client gone */
    echo_ctx y = {0};
    y.sse_events = 1;
    y.sse_wait_gone = true;
    o = cm_net_httpd_defaults();
    h = S_start(&y, &o);
    EXPECT(h != NULL);
    fd = S_connect(cm_net_httpd_port(h));
    S_send(fd, "GET /sse HTTP/1.1\r\nHost: h\r\n\r\n");
    r = S_read_all(fd, 300);
    EXPECT_CONTAINS(r, "data: {\"n\":0}");
    free(r);
    int64_t t0 = cm_now_ms();
    cm_net_httpd_stop(h, 200);
    EXPECT(cm_now_ms() - t0 < 8000);
    EXPECT(atomic_load(&y.stream_done));
    EXPECT(atomic_load(&y.saw_gone));
    close(fd);
    /* a bad listen address is an error, not a crash */
    o = cm_net_httpd_defaults();
    o.listen = "nonsense";
    char err[256] = "";
    o.handler = S_echo;
    EXPECT_INT(cm_net_httpd_start(&o, &h, err, sizeof err), CM_EINVAL);
    EXPECT_CONTAINS(err, "listen address");
}

/* A connection to 127.0.0.1:port from source address src (any 127/8
 * address is loopback on Linux), or -1. */
static int S_connect_from(int port, uint32_t src)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(src);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(0x7f000001);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One client address holding idle connections used to take every slot
 * (256, each held 10 s by the header timeout) and everyone else got 503:
 * now it gets max_conns_per_addr of them and another address still gets in. */
TEST(httpd_one_address_cannot_take_every_connection)
{
    echo_ctx x = {0};
    httpd_opts o = cm_net_httpd_defaults();
    o.max_conns = 8;
    o.max_conns_per_addr = 4;
    httpd *h = S_start(&x, &o);
    EXPECT(h != NULL);
    int port = cm_net_httpd_port(h);
    int idle[8], refused = 0;
    for (int i = 0; i < 8; i++) {
        idle[i] = S_connect_from(port, 0x7f000002);
        if (idle[i] < 0) SKIP("127.0.0.2", "cannot bind 127.0.0.2");
    }
    for (int i = 4; i < 8; i++) { /* past the address's share: 503 at once */
        char *r = S_read_all(idle[i], 5000);
        refused += S_status(r) == 503;
        free(r);
    }
    EXPECT_INT(refused, 4);
    int f = S_connect_from(port, 0x7f000001);
    EXPECT(f >= 0);
    S_send(f, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    char *r = S_read_response(f, 5000);
    EXPECT_INT(S_status(r), 200);
    free(r);
    close(f);
    for (int i = 0; i < 8; i++)
        close(idle[i]);
    cm_net_httpd_stop(h, 1000);
    /* the default share: a quarter of max_conns, at least 8 */
    o = cm_net_httpd_defaults();
    EXPECT_INT(o.max_conns, 256);
}

/* A connection that sends nothing is closed after first_byte_timeout_ms,
 * well before header_timeout_ms (10 s): it holds a slot only briefly. */
TEST(httpd_silent_connection_closed_early)
{
    echo_ctx x = {0};
    httpd_opts o = cm_net_httpd_defaults();
    o.first_byte_timeout_ms = 200;
    httpd *h = S_start(&x, &o);
    EXPECT(h != NULL);
    int f = S_connect(cm_net_httpd_port(h));
    int64_t t0 = cm_now_ms();
    char *r = S_read_all(f, 8000); /* returns when the server closes */
    int64_t took = cm_now_ms() - t0;
    free(r);
    close(f);
    EXPECT(took < 5000);
    /* a request that started in time still has the whole header timeout */
    f = S_connect(cm_net_httpd_port(h));
    S_send(f, "GET / HTTP/1.1\r\n");
    struct pollfd p = {f, POLLIN, 0};
    EXPECT_INT(poll(&p, 1, 600), 0); /* still open past 200 ms */
    S_send(f, "Host: h\r\n\r\n");
    r = S_read_response(f, 5000);
    EXPECT_INT(S_status(r), 200);
    free(r);
    close(f);
    cm_net_httpd_stop(h, 1000);
}

/* Request heads parsed without a socket (httpd_parse.c): the answer to each
 * malformed head, and a good one's fields. */
TEST(httpd_parse_head_statuses)
{
    static const struct {
        const char *head;
        int want;
    } cases[] = {
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 0},
        {"GET / HTTP/1.0\r\n\r\n", 0},
        {"GET / HTTP/1.1\r\n\r\n", 400},                       /* no Host */
        {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400}, /* two */
        {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
        {"G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400},            /* method token */
        {"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400}, /* obs-fold */
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 411},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9999\r\n\r\n", 413},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nExpect: nothing\r\n\r\n", 417},
        {"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", 431},
        {"GET / HTTP/1.1\rHost: a\r\n\r\n", 400}, /* a bare CR */
    };
    httpd_opts o = cm_net_httpd_defaults();
    o.max_headers = 3;
    o.max_body = 100;
    httpd_header hdrs[4];
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char *head = cm_strdup(cases[i].head);
        httpd_parsed pr;
        memset(&pr, 0, sizeof pr);
        pr.hdrs = hdrs;
        int got = cm_net_httpd_parse_head(head, &o, &pr);
        if (got != cases[i].want)
            test_fail(__FILE__, __LINE__, "case %zu: got %d, want %d", i, got, cases[i].want);
        free(head);
    }
    char *head = cm_strdup("\r\nPOST http://h/x?y=1 HTTP/1.1\nHost:  h \nConnection: close\n"
                           "Content-Length: 12\n\n");
    httpd_parsed pr;
    memset(&pr, 0, sizeof pr);
    pr.hdrs = hdrs;
    EXPECT_INT(cm_net_httpd_parse_head(head, &o, &pr), 0);
    EXPECT_STR(pr.rq.method, "POST");
    EXPECT_STR(pr.rq.target, "/x?y=1"); /* absolute-form: the path */
    EXPECT_STR(cm_net_httpd_header_get(&pr.rq, "host"), "h");
    EXPECT(pr.content_length == 12 && !pr.keep_alive);
    free(head);
    const char *in = "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET";
    EXPECT(cm_net_httpd_head_end(in, strlen(in), 0) == strlen(in) - 3);
    EXPECT(cm_net_httpd_head_end(in, 20, 0) == 0);
    EXPECT_STR(cm_net_httpd_reason(431), "Request Header Fields Too Large");
}
