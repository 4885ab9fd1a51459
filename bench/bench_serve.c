/*
 * bench_serve.c — `make bench`, serve part: a loopback load generator for
 * `clawmem serve`. C client threads, each on one keep-alive connection, send
 * memory_search calls (stateless 2026-07-28 requests: no session) round-robin
 * over the agents' tokens for a fixed time, and it prints one JSON object:
 * requests/s, p50 and p99 latency, answers with hits, errors.
 * Usage: bench_serve PORT[,PORT...] TOKENS_FILE QUERIES_FILE CLIENTS SECONDS [WRITE_PCT]
 * (TOKENS_FILE: one token per line; QUERIES_FILE: one query per line).
 * Several ports (replicas of one deployment): request i goes to port
 * i % nports, each client keeping one connection per port. WRITE_PCT (0):
 * that share of the requests are memory_write calls (a short note holding
 * the query, for the token's agent), the rest memory_search; the figures
 * are then given for all requests and for each kind.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../src/base/buf.h"
#include "../src/base/common.h"

#define MAX_PORTS 16

static int ports[MAX_PORTS], nports;
static int write_pct;
static char **tokens, **queries;
static size_t ntokens, nqueries;
static int64_t stop_at;

typedef struct worker {
    int id;
    double *lat; /* ms */
    bool *wrote; /* lat[i] was a write */
    size_t n, cap;
    size_t errors, hits, writes;
} worker;

static char **S_lines(const char *path, size_t *n)
{
    FILE *f = fopen(path, "r");
    char **v = NULL, line[1024];
    size_t cap = 0;
    *n = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!*line || strchr(line, '"') || strchr(line, '\\')) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            v = realloc(v, cap * sizeof *v);
        }
        v[(*n)++] = cm_strdup(line);
    }
    if (f) fclose(f);
    return v;
}

static int S_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(0x7f000001);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends req and reads one response; its status, or -1. */
static int S_roundtrip(int fd, const buf *req, buf *in)
{
    size_t off = 0;
    while (off < req->len) {
        ssize_t w = send(fd, req->data + off, req->len - off, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        off += (size_t)w;
    }
    cm_buf_reset(in);
    size_t want = 0, head = 0;
    for (;;) {
        if (cm_buf_grow(in, 65536) != CM_OK) return -1;
        ssize_t r = recv(fd, in->data + in->len, in->cap - in->len - 1, 0);
        if (r <= 0) return -1;
        in->len += (size_t)r;
        in->data[in->len] = 0;
        if (!head) {
            char *e = strstr(in->data, "\r\n\r\n");
            if (!e) continue;
            head = (size_t)(e - in->data) + 4;
            const char *cl = strcasestr(in->data, "Content-Length:");
            want = head + (cl ? strtoul(cl + 15, NULL, 10) : 0);
        }
        if (in->len >= want) break;
    }
    return (int)strtol(in->data + 9, NULL, 10);
}

static void *S_worker(void *arg)
{
    worker *w = arg;
    buf req = BUF_INIT, body = BUF_INIT, in = BUF_INIT;
    int fds[MAX_PORTS];
    for (int k = 0; k < nports; k++)
        fds[k] = S_connect(ports[k]);
    for (size_t i = (size_t)w->id * 7919; cm_now_ms() < stop_at; i++) {
        int *fd = &fds[i % (size_t)nports];
        if (*fd < 0) *fd = S_connect(ports[i % (size_t)nports]);
        if (*fd < 0) {
            w->errors++;
            continue;
        }
        /* a write every 100/write_pct requests, spread over the agents */
        bool wr = write_pct > 0 && (i * 37 + (size_t)w->id) % 100 < (size_t)write_pct;
        cm_buf_reset(&body);
        cm_buf_reset(&req);
        if (wr)
            cm_buf_printf(
                &body,
                "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"memory_write\",\"arguments\":{\"text\":\"bench note %zu: %s\"},\"_meta\":{"
                "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
                "\"io.modelcontextprotocol/clientCapabilities\":{}}}}",
                i, i, queries[i % nqueries]);
        else
            cm_buf_printf(
                &body,
                "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":\"tools/call\",\"params\":{"
                "\"name\":\"memory_search\",\"arguments\":{\"query\":\"%s\"},\"_meta\":{"
                "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
                "\"io.modelcontextprotocol/clientCapabilities\":{}}}}",
                i, queries[i % nqueries]);
        cm_buf_printf(
            &req,
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            "MCP-Protocol-Version: 2026-07-28\r\nContent-Length: %zu\r\n\r\n%s",
            tokens[i % ntokens], body.len, body.data);
        int64_t t0 = cm_now_ms();
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        int st = S_roundtrip(*fd, &req, &in);
        clock_gettime(CLOCK_MONOTONIC, &b);
        (void)t0;
        if (st != 200 || !strstr(in.data, "\"isError\":false")) {
            if (!w->errors && st > 0) /* the first one says why */
                fprintf(stderr, "bench_serve: %s failed (HTTP %d): %.300s\n",
                        wr ? "memory_write" : "memory_search", st, in.data);
            w->errors++;
            if (st < 0) {
                close(*fd);
                *fd = -1;
            }
            continue;
        }
        if (!wr && strstr(in.data, "\"results\":[{")) w->hits++;
        if (wr) w->writes++;
        if (w->n == w->cap) {
            w->cap = w->cap ? w->cap * 2 : 1024;
            w->lat = realloc(w->lat, w->cap * sizeof *w->lat);
            w->wrote = realloc(w->wrote, w->cap * sizeof *w->wrote);
        }
        w->wrote[w->n] = wr;
        w->lat[w->n++] =
            (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    }
    for (int k = 0; k < nports; k++)
        if (fds[k] >= 0) close(fds[k]);
    cm_buf_release(&req);
    cm_buf_release(&body);
    cm_buf_release(&in);
    return NULL;
}

static int S_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* p50 and p99 of the latencies of v (sorted here) as JSON members after prefix. */
static void S_pcts(buf *out, const char *prefix, double *v, size_t n)
{
    qsort(v, n, sizeof *v, S_cmp);
    double p50 = n ? v[n / 2] : 0, p99 = n ? v[(size_t)((double)(n - 1) * 0.99)] : 0;
    cm_buf_printf(out, ",\"%sp50_ms\":%.3f,\"%sp99_ms\":%.3f", prefix, p50, prefix, p99);
}

int main(int argc, char **argv)
{
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: bench_serve PORT[,PORT...] TOKENS_FILE QUERIES_FILE CLIENTS SECONDS "
                        "[WRITE_PCT]\n");
        return 2;
    }
    for (const char *p = argv[1]; *p && nports < MAX_PORTS; p += strcspn(p, ","), p += *p == ',')
        ports[nports++] = (int)strtol(p, NULL, 10);
    write_pct = argc == 7 ? (int)strtol(argv[6], NULL, 10) : 0;
    tokens = S_lines(argv[2], &ntokens);
    queries = S_lines(argv[3], &nqueries);
    int clients = (int)strtol(argv[4], NULL, 10);
    double secs = strtod(argv[5], NULL);
    if (!ntokens || !nqueries || clients < 1 || !nports || write_pct < 0 || write_pct > 100) {
        fprintf(stderr, "bench_serve: no ports, tokens or queries, or a bad WRITE_PCT\n");
        return 2;
    }
    worker *w = calloc((size_t)clients, sizeof *w);
    pthread_t *t = calloc((size_t)clients, sizeof *t);
    int64_t start = cm_now_ms();
    stop_at = start + (int64_t)(secs * 1000);
    for (int i = 0; i < clients; i++) {
        w[i].id = i;
        pthread_create(&t[i], NULL, S_worker, &w[i]);
    }
    size_t total = 0, errors = 0, hits = 0, writes = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(t[i], NULL);
        total += w[i].n;
        errors += w[i].errors;
        hits += w[i].hits;
        writes += w[i].writes;
    }
    double elapsed = (double)(cm_now_ms() - start) / 1000.0;
    double *all = malloc((total + 1) * sizeof *all), *sv = malloc((total + 1) * sizeof *sv),
           *wv = malloc((total + 1) * sizeof *wv);
    size_t k = 0, ns = 0, nw = 0;
    for (int i = 0; i < clients; i++) {
        for (size_t j = 0; j < w[i].n; j++) {
            all[k++] = w[i].lat[j];
            if (w[i].wrote[j])
                wv[nw++] = w[i].lat[j];
            else
                sv[ns++] = w[i].lat[j];
        }
        free(w[i].lat);
        free(w[i].wrote);
    }
    buf out = BUF_INIT;
    cm_buf_printf(&out,
                  "{\"clients\":%d,\"agents\":%zu,\"replicas\":%d,\"requests\":%zu,"
                  "\"writes\":%zu,\"with_hits\":%zu,\"errors\":%zu,\"seconds\":%.2f,"
                  "\"requests_per_s\":%.1f",
                  clients, ntokens, nports, total, writes, hits, errors, elapsed,
                  (double)total / elapsed);
    S_pcts(&out, "", all, total);
    if (write_pct) {
        S_pcts(&out, "search_", sv, ns);
        S_pcts(&out, "write_", wv, nw);
    }
    printf("%s}\n", out.data);
    cm_buf_release(&out);
    free(all);
    free(sv);
    free(wv);
    free(w);
    free(t);
    return errors > total / 100 ? 1 : 0;
}
