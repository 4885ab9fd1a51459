/*
 * httpd.c — the HTTP/1.1 server of httpd.h. One accept thread; each accepted
 * connection gets a detached thread that reads requests (poll with deadlines
 * on the socket and the stop pipe; heads parsed by httpd_parse.c), calls the
 * handler, and keeps the connection alive while the client allows it. A stop
 * writes one byte to a pipe every poll also watches, so idle connections
 * close at once.
 */
#include "httpd.h"
#include "httpd_parse.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "../base/buf.h"

enum { ST_NONE, ST_RESPONDED, ST_STREAMING, ST_ENDED };

struct httpd_conn {
    httpd *h;
    int fd;
    char peer[80];
    char host[72]; /* peer without the port: what max_conns_per_addr counts */
    pthread_mutex_t mu; /* state, holds and every write */
    pthread_cond_t cv;  /* signalled by the last release */
    int holds;
    int state;
    int minor;
    bool keep_alive, head, chunked;
    atomic_bool gone;
    struct httpd_conn *next, *prev; /* in h->conns, under h->mu */
};

struct httpd {
    httpd_opts o;
    int lfd;
    int stop_pipe[2];
    pthread_t accept_thr;
    bool accept_started;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled when a connection ends */
    int nconns;
    httpd_conn *conns;
    atomic_bool stopping;
    char addr[80];
    int port;
};

httpd_opts cm_net_httpd_defaults(void)
{
    httpd_opts o;
    memset(&o, 0, sizeof o);
    o.listen = "127.0.0.1:0";
    o.max_conns = 256;
    o.max_header_bytes = 16 * 1024;
    o.max_headers = 100;
    o.max_body = 4u << 20;
    o.header_timeout_ms = 10000;
    o.first_byte_timeout_ms = 3000;
    o.body_timeout_ms = 30000;
    o.idle_timeout_ms = 60000;
    o.write_timeout_ms = 30000;
    return o;
}

const char *cm_net_httpd_header_get(const httpd_req *rq, const char *name)
{
    for (size_t i = 0; i < rq->nheaders; i++)
        if (strcasecmp(rq->headers[i].name, name) == 0) return rq->headers[i].value;
    return NULL;
}

bool cm_net_httpd_stopping(const httpd *h)
{
    return atomic_load(&((httpd *)h)->stopping);
}

int cm_net_httpd_port(const httpd *h)
{
    return h->port;
}

const char *cm_net_httpd_addr(const httpd *h)
{
    return h->addr;
}

/* ---- writing ---- */

static void S_mark_gone(httpd_conn *c)
{
    if (!atomic_exchange(&c->gone, true)) shutdown(c->fd, SHUT_RDWR);
}

bool cm_net_httpd_conn_gone(httpd_conn *c)
{
    return atomic_load(&c->gone);
}

/* Writes all of p; called with c->mu held. A failure or a write that stays
 * blocked past the socket's send timeout marks the client gone. */
static cm_rc S_send_all(httpd_conn *c, const char *p, size_t n)
{
    while (n > 0) {
        if (atomic_load(&c->gone)) return CM_EIO;
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            S_mark_gone(c);
            return CM_EIO;
        }
        p += w;
        n -= (size_t)w;
    }
    return CM_OK;
}

static bool S_header_line_ok(const char *s)
{
    const char *colon = strchr(s, ':');
    if (!colon || colon == s) return false;
    for (const char *p = s; *p; p++)
        if (*p == '\r' || *p == '\n') return false;
    return true;
}

static cm_rc S_status_and_headers(httpd_conn *c, buf *b, int status, const char *const *headers)
{
    cm_rc rc = CM_OK;
    if (status < 100 || status > 999) return CM_EINVAL;
    CHECK(cm_buf_printf(b, "HTTP/1.1 %d %s\r\n", status, cm_net_httpd_reason(status)));
    for (size_t i = 0; headers && headers[i]; i++) {
        if (!S_header_line_ok(headers[i])) return CM_EINVAL;
        CHECK(cm_buf_adds(b, headers[i]));
        CHECK(cm_buf_adds(b, "\r\n"));
    }
    if (atomic_load(&c->h->stopping)) c->keep_alive = false;
out:
    return rc;
}

cm_rc cm_net_httpd_respond(httpd_conn *c, int status, const char *const *headers, const char *body,
                           size_t len)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;
    pthread_mutex_lock(&c->mu);
    if (c->state != ST_NONE) {
        rc = CM_EINVAL;
        goto out;
    }
    CHECK(S_status_and_headers(c, &b, status, headers));
    if (!(status < 200 || status == 204 || status == 304))
        CHECK(cm_buf_printf(&b, "Content-Length: %zu\r\n", len));
    CHECK(cm_buf_printf(&b, "Connection: %s\r\n\r\n", c->keep_alive ? "keep-alive" : "close"));
    c->state = ST_RESPONDED;
    if (body && len && !c->head && len < 65536) CHECK(cm_buf_add(&b, body, len));
    CHECK(S_send_all(c, b.data, b.len));
    if (body && len && !c->head && len >= 65536) CHECK(S_send_all(c, body, len));
out:
    pthread_mutex_unlock(&c->mu);
    cm_buf_release(&b);
    return rc;
}

cm_rc cm_net_httpd_sse_begin(httpd_conn *c, int status, const char *const *headers)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;
    pthread_mutex_lock(&c->mu);
    if (c->state != ST_NONE) {
        rc = CM_EINVAL;
        goto out;
    }
    CHECK(S_status_and_headers(c, &b, status, headers));
    /* HTTP/1.0 has no chunked encoding: the stream then ends with the
     * connection. */
    c->chunked = c->minor >= 1;
    if (!c->chunked) c->keep_alive = false;
    CHECK(cm_buf_printf(&b,
                        "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n%s"
                        "Connection: %s\r\n\r\n",
                        c->chunked ? "Transfer-Encoding: chunked\r\n" : "",
                        c->keep_alive ? "keep-alive" : "close"));
    c->state = ST_STREAMING;
    CHECK(S_send_all(c, b.data, b.len));
out:
    pthread_mutex_unlock(&c->mu);
    cm_buf_release(&b);
    return rc;
}

/* Sends payload as one chunk of the stream. */
static cm_rc S_stream_write(httpd_conn *c, const buf *payload)
{
    cm_rc rc = CM_OK;
    char head[32];
    pthread_mutex_lock(&c->mu);
    if (c->state != ST_STREAMING) {
        rc = CM_EINVAL;
        goto out;
    }
    if (c->chunked) {
        int n = snprintf(head, sizeof head, "%zx\r\n", payload->len);
        CHECK(S_send_all(c, head, (size_t)n));
        CHECK(S_send_all(c, payload->data, payload->len));
        CHECK(S_send_all(c, "\r\n", 2));
    } else {
        CHECK(S_send_all(c, payload->data, payload->len));
    }
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

cm_rc cm_net_httpd_sse_event(httpd_conn *c, const char *event, const char *id, const char *data,
                             size_t len)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;
    if ((event && strpbrk(event, "\r\n")) || (id && strpbrk(id, "\r\n"))) return CM_EINVAL;
    if (event) CHECK(cm_buf_printf(&b, "event: %s\n", event));
    if (id) CHECK(cm_buf_printf(&b, "id: %s\n", id));
    /* one "data:" line per line of data; a final newline adds none */
    for (size_t i = 0;;) {
        size_t j = i;
        while (j < len && data[j] != '\n')
            j++;
        size_t end = j;
        if (end > i && data[end - 1] == '\r') end--;
        CHECK(cm_buf_adds(&b, "data: "));
        if (end > i) CHECK(cm_buf_add(&b, data + i, end - i));
        CHECK(cm_buf_addc(&b, '\n'));
        if (j + 1 >= len) break;
        i = j + 1;
    }
    CHECK(cm_buf_addc(&b, '\n'));
    CHECK(S_stream_write(c, &b));
out:
    cm_buf_release(&b);
    return rc;
}

cm_rc cm_net_httpd_sse_comment(httpd_conn *c, const char *text)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;
    if (strpbrk(text, "\r\n")) return CM_EINVAL;
    CHECK(cm_buf_printf(&b, ": %s\n\n", text));
    CHECK(S_stream_write(c, &b));
out:
    cm_buf_release(&b);
    return rc;
}

cm_rc cm_net_httpd_sse_end(httpd_conn *c)
{
    cm_rc rc = CM_OK;
    pthread_mutex_lock(&c->mu);
    if (c->state == ST_STREAMING) {
        c->state = ST_ENDED;
        if (c->chunked) rc = S_send_all(c, "0\r\n\r\n", 5);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void cm_net_httpd_conn_hold(httpd_conn *c)
{
    pthread_mutex_lock(&c->mu);
    c->holds++;
    pthread_mutex_unlock(&c->mu);
}

void cm_net_httpd_conn_release(httpd_conn *c)
{
    pthread_mutex_lock(&c->mu);
    if (c->holds > 0 && --c->holds == 0) pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* ---- upgraded connections ---- */

cm_rc cm_net_httpd_upgrade(httpd_conn *c, const char *const *headers)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;
    pthread_mutex_lock(&c->mu);
    if (c->state != ST_NONE) {
        rc = CM_EINVAL;
        goto out;
    }
    CHECK(S_status_and_headers(c, &b, 101, headers));
    CHECK(cm_buf_adds(&b, "\r\n"));
    c->state = ST_RESPONDED;
    c->keep_alive = false; /* closed once the handler returns */
    CHECK(S_send_all(c, b.data, b.len));
out:
    pthread_mutex_unlock(&c->mu);
    cm_buf_release(&b);
    return rc;
}

cm_rc cm_net_httpd_raw_write(httpd_conn *c, const void *p, size_t n)
{
    pthread_mutex_lock(&c->mu);
    cm_rc rc = S_send_all(c, p, n);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---- reading ---- */

/* Polls the connection and the stop pipe until deadline (ms on the monotonic
 * clock; < 0 none). 1: readable, 0: timeout, -1: stop or error. */
static int S_wait_readable(httpd_conn *c, int64_t deadline, bool stop_ends)
{
    for (;;) {
        struct pollfd p[2] = {{c->fd, POLLIN, 0}, {c->h->stop_pipe[0], POLLIN, 0}};
        int timeout = -1;
        if (deadline >= 0) {
            int64_t left = deadline - cm_now_ms();
            if (left <= 0) return 0;
            timeout = (int)CM_MIN(left, 1000000);
        }
        int n = poll(p, stop_ends ? 2 : 1, timeout);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) return 0;
        if (stop_ends && (p[1].revents & POLLIN)) return -1;
        if (p[0].revents) return 1;
    }
}

/* Reads more bytes into in. 1: some came, 0: timeout, -1: EOF, error, stop. */
static int S_read_more(httpd_conn *c, buf *in, int64_t deadline, bool stop_ends)
{
    int w = S_wait_readable(c, deadline, stop_ends);
    if (w <= 0) return w;
    if (cm_buf_grow(in, 16384) != CM_OK) return -1;
    size_t room = in->cap - in->len - 1;
    if (in->max && room > in->max - in->len) room = in->max - in->len;
    if (room == 0) return -1;
    ssize_t r;
    do
        r = recv(c->fd, in->data + in->len, room, 0);
    while (r < 0 && errno == EINTR);
    if (r <= 0) return -1;
    in->len += (size_t)r;
    in->data[in->len] = 0;
    return 1;
}

long cm_net_httpd_raw_read(httpd_conn *c, void *p, size_t n, int timeout_ms)
{
    if (atomic_load(&c->gone)) return -1;
    int w = S_wait_readable(c, timeout_ms < 0 ? -1 : cm_now_ms() + timeout_ms, true);
    if (w <= 0) return w;
    ssize_t r;
    do
        r = recv(c->fd, p, n, 0);
    while (r < 0 && errno == EINTR);
    if (r <= 0) {
        S_mark_gone(c);
        return -1;
    }
    return (long)r;
}

/* Answers an error status and closes: after the response the write side is
 * shut and what the client still sends is read away for a moment, so it sees
 * the answer instead of a reset. */
static void S_fail_close(httpd_conn *c, int status)
{
    char msg[160];
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s\n",
                     status, cm_net_httpd_reason(status), strlen(cm_net_httpd_reason(status)) + 1,
                     cm_net_httpd_reason(status));
    pthread_mutex_lock(&c->mu);
    if (S_send_all(c, msg, (size_t)n) == CM_OK) {
        shutdown(c->fd, SHUT_WR);
        int64_t until = cm_now_ms() + 500;
        char sink[4096];
        size_t total = 0;
        while (total < (1u << 20)) {
            struct pollfd p = {c->fd, POLLIN, 0};
            int64_t left = until - cm_now_ms();
            if (left <= 0 || poll(&p, 1, (int)left) <= 0) break;
            ssize_t r = recv(c->fd, sink, sizeof sink, 0);
            if (r <= 0) break;
            total += (size_t)r;
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* Watches a held connection until its last release: the client closing its
 * side marks it gone. */
static void S_wait_released(httpd_conn *c)
{
    pthread_mutex_lock(&c->mu);
    while (c->holds > 0) {
        struct timespec ts = cm_deadline_in(CLOCK_REALTIME, 200);
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        if (c->holds == 0 || atomic_load(&c->gone)) continue;
        struct pollfd p = {c->fd, POLLIN | POLLRDHUP, 0};
        if (poll(&p, 1, 0) > 0) {
            char ch;
            if (p.revents & (POLLHUP | POLLERR | POLLRDHUP))
                S_mark_gone(c);
            else if (recv(c->fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
                S_mark_gone(c);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

static void S_serve_conn(httpd_conn *c)
{
    httpd *h = c->h;
    const httpd_opts *o = &h->o;
    buf in;
    cm_buf_init(&in, o->max_header_bytes + o->max_body + 65536);
    httpd_parsed pr;
    httpd_header *hdrs = calloc((size_t)o->max_headers + 1, sizeof *hdrs);
    if (!hdrs) goto out;
    bool first = true;
    for (;;) {
        /* the head */
        int64_t start = cm_now_ms();
        int64_t head_deadline = -1;
        size_t head_len = 0, scanned = 0;
        while (
            !(head_len = cm_net_httpd_head_end(in.data, in.len, scanned >= 3 ? scanned - 3 : 0))) {
            scanned = in.len;
            if (in.len > o->max_header_bytes) {
                S_fail_close(c, 431);
                goto out;
            }
            /* Waiting for a first byte is the idle wait; after it, the head
             * has header_timeout_ms in all. */
            bool idle = in.len == 0;
            if (!idle && head_deadline < 0) head_deadline = cm_now_ms() + o->header_timeout_ms;
            int64_t deadline =
                idle ? start + (first ? o->first_byte_timeout_ms : o->idle_timeout_ms)
                     : head_deadline;
            int r = S_read_more(c, &in, deadline, idle);
            if (r < 0) goto out;
            if (r == 0) {
                if (!idle) S_fail_close(c, 408);
                goto out;
            }
        }
        if (head_len > o->max_header_bytes) {
            S_fail_close(c, 431);
            goto out;
        }
        first = false;
        if (memchr(in.data, 0, head_len)) {
            S_fail_close(c, 400);
            goto out;
        }
        char *head = cm_strndup(in.data, head_len);
        if (!head) goto out;
        memset(&pr, 0, sizeof pr);
        pr.hdrs = hdrs;
        int st = cm_net_httpd_parse_head(head, o, &pr);
        if (st) {
            free(head);
            S_fail_close(c, st);
            goto out;
        }
        /* the body */
        if (pr.expect_continue && pr.content_length > 0 && in.len < head_len + pr.content_length) {
            pthread_mutex_lock(&c->mu);
            char cont[40];
            int n = snprintf(cont, sizeof cont, "HTTP/1.1 100 Continue\r\n\r\n");
            cm_rc wrc = S_send_all(c, cont, (size_t)n);
            pthread_mutex_unlock(&c->mu);
            if (wrc) {
                free(head);
                goto out;
            }
        }
        int64_t body_deadline = cm_now_ms() + o->body_timeout_ms;
        while (in.len < head_len + pr.content_length) {
            int r = S_read_more(c, &in, body_deadline, false);
            if (r <= 0) {
                free(head);
                if (r == 0) S_fail_close(c, 408);
                goto out;
            }
        }
        size_t used = head_len + pr.content_length;
        char saved = in.data[used];
        in.data[used] = 0;
        pr.rq.body = in.data + head_len;
        pr.rq.body_len = pr.content_length;
        pr.rq.peer = c->peer;
        char *q = strchr(pr.rq.target, '?');
        char *path =
            cm_strndup(pr.rq.target, q ? (size_t)(q - pr.rq.target) : strlen(pr.rq.target));
        if (!path) {
            free(head);
            goto out;
        }
        pr.rq.path = path;
        pr.rq.query = q ? q + 1 : "";

        pthread_mutex_lock(&c->mu);
        c->state = ST_NONE;
        c->minor = pr.rq.minor_version;
        c->keep_alive = pr.keep_alive && !atomic_load(&h->stopping);
        c->head = strcmp(pr.rq.method, "HEAD") == 0;
        c->chunked = false;
        pthread_mutex_unlock(&c->mu);

        o->handler(o->ctx, &pr.rq, c);
        S_wait_released(c);

        pthread_mutex_lock(&c->mu);
        int state = c->state;
        bool keep = c->keep_alive;
        pthread_mutex_unlock(&c->mu);
        if (state == ST_NONE) {
            static const char body[] = "Internal Server Error\n";
            cm_net_httpd_respond(c, 500, (const char *const[]){"Content-Type: text/plain", NULL},
                                 body, sizeof body - 1);
        } else if (state == ST_STREAMING) {
            cm_net_httpd_sse_end(c);
        }
        free(path);
        free(head);
        in.data[used] = saved;
        if (!keep || atomic_load(&c->gone) || atomic_load(&h->stopping)) goto out;
        memmove(in.data, in.data + used, in.len - used);
        in.len -= used;
        in.data[in.len] = 0;
    }
out:
    free(hdrs);
    cm_buf_release(&in);
}

static void *S_conn_thread(void *arg)
{
    httpd_conn *c = arg;
    httpd *h = c->h;
    S_serve_conn(c);
    pthread_mutex_lock(&h->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        h->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&h->mu);
    close(c->fd);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
    pthread_mutex_lock(&h->mu);
    h->nconns--;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* The address without its port ("127.0.0.1", "[::1]"). */
static void S_host_of(const char *peer, char *out, size_t size)
{
    const char *colon = strrchr(peer, ':');
    size_t n = colon && peer[0] != '?' ? (size_t)(colon - peer) : strlen(peer);
    snprintf(out, size, "%.*s", (int)CM_MIN(n, size - 1), peer);
}

static void S_format_addr(const struct sockaddr *sa, char *out, size_t size, int *port)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int p = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        p = ntohs(a->sin_port);
        snprintf(out, size, "%s:%d", host, p);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        p = ntohs(a->sin6_port);
        snprintf(out, size, "[%s]:%d", host, p);
    } else {
        snprintf(out, size, "?");
    }
    if (port) *port = p;
}

static void S_refuse(int fd, int status)
{
    char msg[160];
    int n = snprintf(
        msg, sizeof msg,
        "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n",
        status, cm_net_httpd_reason(status));
    ssize_t w = send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
    close(fd);
}

static void *S_accept_thread(void *arg)
{
    httpd *h = arg;
    for (;;) {
        struct pollfd p[2] = {{h->lfd, POLLIN, 0}, {h->stop_pipe[0], POLLIN, 0}};
        int n = poll(p, 2, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 || (p[1].revents & POLLIN)) break;
        if (!(p[0].revents & POLLIN)) continue;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(h->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                struct pollfd s = {h->stop_pipe[0], POLLIN, 0};
                poll(&s, 1, 50); /* out of descriptors: let connections end */
            }
            continue;
        }
        char peer[80], host[72];
        S_format_addr((struct sockaddr *)&ss, peer, sizeof peer, NULL);
        S_host_of(peer, host, sizeof host);
        pthread_mutex_lock(&h->mu);
        bool full = h->nconns >= h->o.max_conns;
        int same = 0;
        for (httpd_conn *o = h->conns; o && !full; o = o->next)
            same += !strcmp(o->host, host);
        pthread_mutex_unlock(&h->mu);
        if (full || same >= h->o.max_conns_per_addr) {
            if (full)
                cm_logf(&h->o.log, CM_LOG_DEBUG, "httpd: connection refused: %d open",
                        h->o.max_conns);
            else
                cm_logf(&h->o.log, CM_LOG_DEBUG,
                        "httpd: connection from %s refused: %d open from that address", host,
                        same);
            S_refuse(fd, 503);
            continue;
        }
        httpd_conn *c = calloc(1, sizeof *c);
        if (!c) {
            S_refuse(fd, 503);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct timeval tv = {h->o.write_timeout_ms / 1000, (h->o.write_timeout_ms % 1000) * 1000};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        c->h = h;
        c->fd = fd;
        c->minor = 1;
        atomic_init(&c->gone, false);
        memcpy(c->peer, peer, sizeof c->peer);
        memcpy(c->host, host, sizeof c->host);
        pthread_mutex_init(&c->mu, NULL);
        pthread_cond_init(&c->cv, NULL);
        pthread_mutex_lock(&h->mu);
        c->next = h->conns;
        if (h->conns) h->conns->prev = c;
        h->conns = c;
        h->nconns++;
        pthread_mutex_unlock(&h->mu);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t t;
        int e = pthread_create(&t, &attr, S_conn_thread, c);
        pthread_attr_destroy(&attr);
        if (e) {
            pthread_mutex_lock(&h->mu);
            h->conns = c->next;
            if (c->next) c->next->prev = NULL;
            h->nconns--;
            pthread_mutex_unlock(&h->mu);
            pthread_mutex_destroy(&c->mu);
            pthread_cond_destroy(&c->cv);
            free(c);
            S_refuse(fd, 503);
        }
    }
    return NULL;
}

/* Splits "host:port" / "[v6]:port" / ":port" into host and port. */
static cm_rc S_split_listen(const char *s, char *host, size_t hsize, char *port, size_t psize,
                            char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    const char *colon;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            FAIL(CM_EINVAL, "bad listen address \"%s\" (want [ADDR]:PORT)", s);
        snprintf(host, hsize, "%.*s", (int)(close - s - 1), s + 1);
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon) FAIL(CM_EINVAL, "bad listen address \"%s\" (want ADDR:PORT)", s);
        if (colon == s)
            snprintf(host, hsize, "127.0.0.1");
        else
            snprintf(host, hsize, "%.*s", (int)(colon - s), s);
    }
    const char *p = colon + 1;
    if (!*p || strlen(p) > 5 || strspn(p, "0123456789") != strlen(p) || strtol(p, NULL, 10) > 65535)
        FAIL(CM_EINVAL, "bad port in listen address \"%s\"", s);
    snprintf(port, psize, "%s", p);
out:
    return rc;
}

cm_rc cm_net_httpd_start(const httpd_opts *o, httpd **out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    struct addrinfo *ai = NULL;
    httpd *h = NULL;
    char host[256], port[8];
    *out = NULL;
    if (!o->handler) FAIL(CM_EINVAL, "httpd: no handler");
    h = calloc(1, sizeof *h);
    if (!h) FAIL(CM_ENOMEM, "out of memory");
    h->o = *o;
    httpd_opts d = cm_net_httpd_defaults();
    if (!h->o.listen) h->o.listen = d.listen;
    if (h->o.max_conns <= 0) h->o.max_conns = d.max_conns;
    if (h->o.max_conns_per_addr <= 0)
        h->o.max_conns_per_addr = CM_MIN(h->o.max_conns, CM_MAX(8, h->o.max_conns / 4));
    if (h->o.max_conns_per_addr > h->o.max_conns) h->o.max_conns_per_addr = h->o.max_conns;
    if (!h->o.max_header_bytes) h->o.max_header_bytes = d.max_header_bytes;
    if (h->o.max_headers <= 0) h->o.max_headers = d.max_headers;
    if (!h->o.max_body) h->o.max_body = d.max_body;
    if (h->o.header_timeout_ms <= 0) h->o.header_timeout_ms = d.header_timeout_ms;
    if (h->o.first_byte_timeout_ms <= 0)
        h->o.first_byte_timeout_ms = CM_MIN(d.first_byte_timeout_ms, h->o.header_timeout_ms);
    if (h->o.body_timeout_ms <= 0) h->o.body_timeout_ms = d.body_timeout_ms;
    if (h->o.idle_timeout_ms <= 0) h->o.idle_timeout_ms = d.idle_timeout_ms;
    if (h->o.write_timeout_ms <= 0) h->o.write_timeout_ms = d.write_timeout_ms;
    h->lfd = -1;
    h->stop_pipe[0] = h->stop_pipe[1] = -1;
    atomic_init(&h->stopping, false);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    CHECK(S_split_listen(h->o.listen, host, sizeof host, port, sizeof port, err, errlen));
    h->o.listen = NULL; /* the caller's string may go away */
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int e = getaddrinfo(host, port, &hints, &ai);
    if (e) FAIL(CM_EIO, "cannot resolve listen address %s: %s", host, gai_strerror(e));
    int last = 0;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 256) == 0) {
            h->lfd = fd;
            break;
        }
        last = errno;
        close(fd);
    }
    if (h->lfd < 0) FAIL(CM_EIO, "cannot listen on %s:%s: %s", host, port, strerror(last));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(h->lfd, (struct sockaddr *)&ss, &sl);
    S_format_addr((struct sockaddr *)&ss, h->addr, sizeof h->addr, &h->port);
    if (pipe2(h->stop_pipe, O_CLOEXEC) != 0) FAIL(CM_EIO, "pipe: %s", strerror(errno));
    if (pthread_create(&h->accept_thr, NULL, S_accept_thread, h) != 0)
        FAIL(CM_EIO, "cannot start the accept thread");
    h->accept_started = true;
    *out = h;
    h = NULL;
out:
    if (ai) freeaddrinfo(ai);
    if (h) {
        if (h->lfd >= 0) close(h->lfd);
        if (h->stop_pipe[0] >= 0) close(h->stop_pipe[0]);
        if (h->stop_pipe[1] >= 0) close(h->stop_pipe[1]);
        pthread_mutex_destroy(&h->mu);
        pthread_cond_destroy(&h->cv);
        free(h);
    }
    return rc;
}

void cm_net_httpd_stop(httpd *h, int deadline_ms)
{
    if (!h) return;
    atomic_store(&h->stopping, true);
    char one = 1;
    ssize_t w = write(h->stop_pipe[1], &one, 1);
    (void)w;
    if (h->accept_started) pthread_join(h->accept_thr, NULL);
    close(h->lfd);
    h->lfd = -1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (int64_t)(deadline_ms < 0 ? 0 : deadline_ms) * 1000000;
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_mutex_lock(&h->mu);
    while (h->nconns > 0) {
        if (pthread_cond_timedwait(&h->cv, &h->mu, &ts) == ETIMEDOUT) break;
    }
    /* Past the deadline: every remaining connection is shut down, so reads
     * and writes fail and holders see cm_net_httpd_conn_gone. */
    for (httpd_conn *c = h->conns; c; c = c->next)
        S_mark_gone(c);
    while (h->nconns > 0)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    close(h->stop_pipe[0]);
    close(h->stop_pipe[1]);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h);
}
