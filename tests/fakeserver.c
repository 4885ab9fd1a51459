/*
 * fakeserver.c — the loopback server of fakeserver.h: one thread accepts,
 * one thread per connection (keep-alive) serves. fake_stop shuts every open
 * connection down and waits for its thread before freeing the server.
 */
#include <arpa/inet.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../src/base/sha256.h"
#include "fakeserver.h"

struct fake_server {
    int fd, dims;
    pthread_t tid;
    pthread_mutex_t mu;
    enum fake_fault faults[64];
    int fstatus[64], fretry[64], nfaults;
    char *fraw[64]; /* FAKE_RAW answers, FAKE_ENDLESS chunks */
    atomic_llong endless_sent;
    fake_request reqs[256];
    int nreqs;
    struct fake_file {
        char *path, *data;
        size_t n;
        char etag[72]; /* sent as X-Linked-Etag on a redirect */
    } files[32];
    int nfiles;
    int conns[256]; /* open connections' descriptors */
    int nconns;
    atomic_int accepted; /* connections accepted since the start */
    pthread_cond_t idle; /* nconns fell */
    atomic_int stop;
    fake_handler_fn handler; /* fake_handler */
    void *handler_ctx;
};

void fake_vector(const char *text, int dims, float *out)
{
    memset(out, 0, (size_t)dims * sizeof *out);
    const char *p = text;
    while (*p) {
        while (*p && !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                       (*p >= '0' && *p <= '9') || (unsigned char)*p >= 0x80))
            p++;
        if (!*p) break;
        uint64_t h = 1469598103934665603ull;
        while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
               (unsigned char)*p >= 0x80) {
            char c = (*p >= 'A' && *p <= 'Z') ? (char)(*p + 32) : *p;
            h = (h ^ (unsigned char)c) * 1099511628211ull;
            p++;
        }
        out[h % (uint64_t)dims] += (h >> 32) & 1 ? 1.0f : -1.0f;
    }
    double ss = 0;
    for (int i = 0; i < dims; i++)
        ss += out[i] * out[i];
    if (ss > 0)
        for (int i = 0; i < dims; i++)
            out[i] /= (float)sqrt(ss);
}

static json_t *vec_json(const char *text, int dims, enum fake_fault f)
{
    float v[4096];
    fake_vector(text, dims, v);
    json_t *a = json_array();
    int n = f == FAKE_WRONG_DIMS ? dims - 1 : dims;
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_real(f == FAKE_ZERO ? 0 : v[i]));
    return a;
}

/* The text a Gemini content stands for: its text parts, and the bytes of
 * its inline data parts (base64-decoded, other than letters and digits made
 * spaces), so that a media file's words decide its vector. */
static char *content_text(json_t *content)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    buf b = BUF_INIT;
    size_t i;
    json_t *part;
    json_array_foreach(json_object_get(content, "parts"), i, part)
    {
        const char *t = json_string_value(json_object_get(part, "text"));
        const char *d =
            json_string_value(json_object_get(json_object_get(part, "inlineData"), "data"));
        if (i) cm_buf_addc(&b, ' ');
        if (t) cm_buf_adds(&b, t);
        uint32_t acc = 0;
        int bits = 0;
        for (; d && *d && *d != '='; d++) {
            const char *c = strchr(tab, *d);
            if (!c) break;
            acc = acc << 6 | (uint32_t)(c - tab);
            if ((bits += 6) >= 8) {
                unsigned char x = (unsigned char)(acc >> (bits -= 8));
                bool word =
                    (x >= 'a' && x <= 'z') || (x >= 'A' && x <= 'Z') || (x >= '0' && x <= '9');
                cm_buf_addc(&b, word ? (char)x : ' ');
            }
        }
    }
    if (!b.data) cm_buf_adds(&b, "");
    return cm_buf_detach(&b);
}

/* The answer body for a request. */
static char *answer(fake_server *s, const char *path, const char *body, enum fake_fault f)
{
    json_t *in = json_loads(body, 0, NULL), *out = NULL;
    /* Gemini's outputDimensionality, when asked, sets the size of its vectors */
    json_t *od = json_object_get(in, "outputDimensionality");
    if (!od)
        od = json_object_get(json_array_get(json_object_get(in, "requests"), 0),
                             "outputDimensionality");
    int dims = json_is_integer(od) && json_integer_value(od) > 0 && json_integer_value(od) <= 4096
                   ? (int)json_integer_value(od)
                   : s->dims;
    if (strstr(path, "/api/embeddings")) {
        out = json_pack("{s:o}", "embedding",
                        vec_json(json_string_value(json_object_get(in, "prompt")), s->dims, f));
    } else if (strstr(path, ":embedContent")) {
        char *t = content_text(json_object_get(in, "content"));
        out = json_pack("{s:{s:o}}", "embedding", "values", vec_json(t, dims, f));
        free(t);
    } else if (strstr(path, ":batchEmbedContents")) {
        json_t *reqs = json_object_get(in, "requests"), *list = json_array(), *r;
        size_t i;
        json_array_foreach(reqs, i, r)
        {
            if (f == FAKE_WRONG_COUNT && i == 0) continue;
            char *t = content_text(json_object_get(r, "content"));
            json_array_append_new(list, json_pack("{s:o}", "values", vec_json(t, dims, f)));
            free(t);
        }
        out = json_pack("{s:o}", "embeddings", list);
    } else {
        json_t *inputs = json_object_get(in, "input"), *data = json_array(), *t;
        size_t i;
        json_array_foreach(inputs, i, t)
        {
            if (f == FAKE_WRONG_COUNT && i == 0) continue;
            json_array_append_new(data, json_pack("{s:s, s:i, s:o}", "object", "embedding", "index",
                                                  (int)i, "embedding",
                                                  vec_json(json_string_value(t), s->dims, f)));
        }
        out = json_pack("{s:s, s:o, s:s}", "object", "list", "data", data, "model", "fake");
    }
    char *txt = json_dumps(out, JSON_COMPACT);
    json_decref(in);
    json_decref(out);
    if (f == FAKE_NAN && txt) {
        char *c = strchr(txt, '[');
        while (c && !(c[1] == '-' || (c[1] >= '0' && c[1] <= '9')))
            c = strchr(c + 1, '[');
        if (c) { /* replace the first number with NaN */
            buf b = BUF_INIT;
            size_t end = strcspn(c + 1, ",]");
            cm_buf_add(&b, txt, (size_t)(c + 1 - txt));
            cm_buf_adds(&b, "NaN");
            cm_buf_adds(&b, c + 1 + end);
            free(txt);
            txt = cm_buf_detach(&b);
        }
    }
    return txt;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

/* Answers a GET for a registered file (fakeserver.h); false when the
 * connection must close. */
static bool serve_get(fake_server *s, int fd, const char *target, const char *hdrs,
                      enum fake_fault f, int k)
{
    char path[256], head[512];
    snprintf(path, sizeof path, "%.*s", (int)strcspn(target, "?"), target);
    const char *want = strncmp(path, "/cdn/", 5) == 0 ? path + 4 : path;
    const char *data = NULL;
    size_t n = 0;
    bool found = false;
    char etag[72] = "";
    pthread_mutex_lock(&s->mu);
    for (int i = s->nfiles - 1; i >= 0 && !found; i--) {
        if (strcmp(s->files[i].path, want) == 0) {
            data = s->files[i].data; /* kept until fake_stop */
            n = s->files[i].n;
            memcpy(etag, s->files[i].etag, sizeof etag);
            found = true;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (!found) {
        const char *msg = "Entry not found";
        snprintf(
            head, sizeof head,
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n\r\n%s",
            strlen(msg), msg);
        send_all(fd, head, strlen(head));
        return true;
    }
    if (f == FAKE_REDIRECT) {
        snprintf(head, sizeof head,
                 "HTTP/1.1 302 Found\r\nLocation: /cdn%s?sig=fake\r\nX-Linked-Etag: \"%s\"\r\n"
                 "Content-Length: 0\r\n\r\n",
                 path, etag);
        send_all(fd, head, strlen(head));
        return true;
    }
    /* "Range: bytes=N-" (the only form the client sends) */
    long long from = -1;
    const char *r = strcasestr(hdrs, "\r\nrange:");
    if (r && f != FAKE_IGNORE_RANGE && f != FAKE_WRONG_RANGE) {
        r += 8;
        r += strspn(r, " \t");
        char *end;
        if (strncmp(r, "bytes=", 6) == 0) {
            from = strtoll(r + 6, &end, 10);
            if (end == r + 6 || *end != '-' || from < 0) from = -1;
        }
    }
    if (from >= 0 && (size_t)from >= n) {
        snprintf(head, sizeof head,
                 "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */%zu\r\n"
                 "Content-Length: 0\r\n\r\n",
                 n);
        send_all(fd, head, strlen(head));
        return true;
    }
    if (f == FAKE_WRONG_RANGE) from = 0;
    size_t start = from >= 0 ? (size_t)from : 0, len = n - start;
    size_t sent = len, announced = len;
    if (f == FAKE_SHORT) sent = announced = len - CM_MIN((size_t)k, len);
    if (f == FAKE_CUT) sent = CM_MIN((size_t)k, len);
    if (f == FAKE_TRUNCATED) sent = len / 2;
    if (from >= 0)
        snprintf(head, sizeof head,
                 "HTTP/1.1 206 Partial Content\r\nContent-Type: application/octet-stream\r\n"
                 "Content-Range: bytes %zu-%zu/%zu\r\nContent-Length: %zu\r\n\r\n",
                 start, n - 1, n, announced);
    else
        snprintf(head, sizeof head,
                 "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                 "Content-Length: %zu\r\n\r\n",
                 announced);
    send_all(fd, head, strlen(head));
    send_all(fd, data + start, sent);
    if (sent < announced) {
        shutdown(fd, SHUT_WR); /* a FIN, the way a dropped download ends */
        return false;
    }
    return true;
}

typedef struct conn {
    fake_server *s;
    int fd;
} conn;

static void *serve(void *arg)
{
    conn *c = arg;
    fake_server *s = c->s;
    buf in = BUF_INIT;
    for (;;) {
        char *hdr_end;
        while (!(hdr_end = in.len ? strstr(in.data, "\r\n\r\n") : NULL)) {
            char tmp[65536];
            ssize_t r = recv(c->fd, tmp, sizeof tmp, 0);
            if (r <= 0) goto done;
            cm_buf_add(&in, tmp, (size_t)r);
        }
        size_t hlen = (size_t)(hdr_end - in.data) + 4;
        size_t clen = 0;
        const char *cl = strcasestr(in.data, "content-length:");
        if (cl && cl < hdr_end) clen = strtoul(cl + 15, NULL, 10);
        while (in.len < hlen + clen) {
            char tmp[65536];
            ssize_t r = recv(c->fd, tmp, sizeof tmp, 0);
            if (r <= 0) goto done;
            cm_buf_add(&in, tmp, (size_t)r);
        }
        pthread_mutex_lock(&s->mu);
        fake_request *q = s->nreqs < 256 ? &s->reqs[s->nreqs++] : NULL;
        enum fake_fault f = FAKE_OK;
        int status = 200, retry = -1;
        char *raw = NULL;
        if (s->nfaults) {
            f = s->faults[0];
            status = s->fstatus[0];
            retry = s->fretry[0];
            raw = s->fraw[0];
            memmove(s->fraw, s->fraw + 1, (size_t)(s->nfaults - 1) * sizeof *s->fraw);
            memmove(s->faults, s->faults + 1, (size_t)(s->nfaults - 1) * sizeof *s->faults);
            memmove(s->fstatus, s->fstatus + 1, (size_t)(s->nfaults - 1) * sizeof *s->fstatus);
            memmove(s->fretry, s->fretry + 1, (size_t)(s->nfaults - 1) * sizeof *s->fretry);
            s->nfaults--;
        }
        char path[256] = "", method[8] = "";
        fake_handler_fn hfn = f == FAKE_OK ? s->handler : NULL;
        void *hctx = s->handler_ctx;
        sscanf(in.data, "%7s %255s", method, path);
        char *hdrs = cm_strndup(in.data, hlen);
        if (q) {
            sscanf(in.data, "%7s", q->method);
            snprintf(q->path, sizeof q->path, "%s", path);
            size_t n = CM_MIN(hlen, sizeof q->headers - 1);
            for (size_t i = 0; i < n; i++)
                q->headers[i] = in.data[i];
            q->headers[n] = 0;
            q->body = cm_strndup(in.data + hlen, clen);
        }
        pthread_mutex_unlock(&s->mu);
        char *body = cm_strndup(in.data + hlen, clen);
        char *hout = NULL;
        size_t hlen_out = 0;
        int hstatus = 200;
        const char *hctype = "application/json";
        if (hfn &&
            hfn(hctx, method, path, in.data + hlen, clen, &hstatus, &hctype, &hout, &hlen_out)) {
            buf msg = BUF_INIT;
            cm_buf_printf(&msg,
                          "HTTP/1.1 %d Fake\r\nContent-Type: %s\r\nContent-Length: %zu\r\n\r\n",
                          hstatus, hctype, hlen_out);
            cm_buf_add(&msg, hout ? hout : "", hlen_out);
            send_all(c->fd, msg.data, msg.len);
            cm_buf_release(&msg);
            free(hout);
            free(body);
            free(hdrs);
            memmove(in.data, in.data + hlen + clen, in.len - hlen - clen);
            in.len -= hlen + clen;
            if (in.data) in.data[in.len] = 0;
            continue;
        }
        memmove(in.data, in.data + hlen + clen, in.len - hlen - clen);
        in.len -= hlen + clen;
        in.data[in.len] = 0;
        char head[512];
        if (f == FAKE_RAW) {
            send_all(c->fd, raw, strlen(raw));
            free(raw);
            free(body);
            free(hdrs);
            if (status) goto done; /* status carries "close" */
            continue;
        }
        if (f == FAKE_ENDLESS) {
            const char *sh = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
            send_all(c->fd, sh, strlen(sh));
            size_t n = strlen(raw);
            for (bool up = true; up && !s->stop;) {
                for (size_t off = 0; off < n;) {
                    ssize_t w = send(c->fd, raw + off, n - off, MSG_NOSIGNAL);
                    if (w <= 0) {
                        up = false;
                        break;
                    }
                    off += (size_t)w;
                    s->endless_sent += w;
                }
            }
            free(raw);
            free(body);
            free(hdrs);
            goto done;
        }
        if (f == FAKE_HANG) {
            while (!s->stop)
                usleep(10000);
            free(body);
            free(hdrs);
            goto done;
        }
        if (f == FAKE_ECHO) { /* a hostile or careless server: our request back */
            buf e = BUF_INIT;
            cm_buf_adds(&e, "{\"error\":\"unauthorized\",\"request\":\"");
            static const char *const dull[] = {
                "host:",           "accept:",     "accept-encoding:", "content-type:",
                "content-length:", "user-agent:", "expect:"};
            for (const char *ln = hdrs; *ln;) {
                size_t l = strcspn(ln, "\n");
                bool skip = false;
                for (size_t k = 0; k < ARRAY_LEN(dull); k++)
                    skip |= strncasecmp(ln, dull[k], strlen(dull[k])) == 0;
                if (!skip) cm_buf_add(&e, ln, l + (ln[l] == '\n'));
                ln += l + (ln[l] == '\n');
            }
            cm_buf_adds(&e, "\"}");
            snprintf(head, sizeof head,
                     "HTTP/1.1 %d Echo\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     status, e.len);
            send_all(c->fd, head, strlen(head));
            send_all(c->fd, e.data, e.len);
            cm_buf_release(&e);
            free(body);
            free(hdrs);
            continue;
        }
        if (f != FAKE_STATUS && strcmp(method, "GET") == 0) {
            bool keep = serve_get(s, c->fd, path, hdrs, f, status);
            free(body);
            free(hdrs);
            if (!keep) goto done;
            continue;
        }
        free(hdrs);
        if (f == FAKE_STATUS) {
            const char *msg = "{\"error\":{\"message\":\"scripted failure\"}}";
            if (retry >= 0)
                snprintf(head, sizeof head,
                         "HTTP/1.1 %d Scripted\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\nRetry-After: %d\r\n\r\n",
                         status, strlen(msg), retry);
            else
                snprintf(head, sizeof head,
                         "HTTP/1.1 %d Scripted\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\n\r\n",
                         status, strlen(msg));
            send_all(c->fd, head, strlen(head));
            send_all(c->fd, msg, strlen(msg));
            free(body);
            continue;
        }
        char *out =
            f == FAKE_BAD_JSON ? cm_strdup("<html>gateway error</html>") : answer(s, path, body, f);
        free(body);
        size_t olen = strlen(out);
        snprintf(head, sizeof head,
                 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                 f == FAKE_TRUNCATED ? olen + 100 : olen);
        /* header and body in one write: no Nagle / delayed-ACK stall */
        buf msg = BUF_INIT;
        cm_buf_adds(&msg, head);
        cm_buf_add(&msg, out, f == FAKE_TRUNCATED ? olen / 2 : olen);
        send_all(c->fd, msg.data, msg.len);
        cm_buf_release(&msg);
        free(out);
        if (f == FAKE_TRUNCATED) goto done;
    }
done:
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->nconns; i++)
        if (s->conns[i] == c->fd) s->conns[i] = s->conns[--s->nconns];
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
    close(c->fd);
    cm_buf_release(&in);
    free(c);
    return NULL;
}

static void *accept_loop(void *arg)
{
    fake_server *s = arg;
    while (!s->stop) {
        int fd = accept(s->fd, NULL, NULL);
        if (fd < 0) continue;
        atomic_fetch_add(&s->accepted, 1);
        if (s->stop) {
            close(fd);
            break;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_mutex_lock(&s->mu);
        bool room = s->nconns < (int)ARRAY_LEN(s->conns);
        if (room) s->conns[s->nconns++] = fd;
        pthread_mutex_unlock(&s->mu);
        if (!room) {
            close(fd);
            continue;
        }
        conn *c = malloc(sizeof *c);
        c->s = s;
        c->fd = fd;
        pthread_t t;
        pthread_create(&t, NULL, serve, c);
        pthread_detach(t);
    }
    return NULL;
}

fake_server *fake_start(int dims, char base_url[64])
{
    fake_server *s = calloc(1, sizeof *s);
    s->dims = dims;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->idle, NULL);
    s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(s->fd, (struct sockaddr *)&a, sizeof a) || listen(s->fd, 64) ||
        getsockname(s->fd, (struct sockaddr *)&a, &al))
        abort();
    snprintf(base_url, 64, "http://127.0.0.1:%d", ntohs(a.sin_port));
    pthread_create(&s->tid, NULL, accept_loop, s);
    return s;
}

int fake_accepted(fake_server *s)
{
    return atomic_load(&s->accepted);
}

void fake_stop(fake_server *s)
{
    s->stop = 1;
    shutdown(s->fd, SHUT_RDWR);
    close(s->fd);
    pthread_join(s->tid, NULL);
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->nconns; i++)
        shutdown(s->conns[i], SHUT_RDWR);
    while (s->nconns > 0)
        pthread_cond_wait(&s->idle, &s->mu);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->nreqs; i++)
        free(s->reqs[i].body);
    for (int i = 0; i < s->nfaults; i++)
        free(s->fraw[i]);
    for (int i = 0; i < s->nfiles; i++) {
        free(s->files[i].path);
        free(s->files[i].data);
    }
    free(s);
}

void fake_file(fake_server *s, const char *path, const void *data, size_t n)
{
    pthread_mutex_lock(&s->mu);
    if (s->nfiles < (int)ARRAY_LEN(s->files)) {
        struct fake_file *ff = &s->files[s->nfiles++];
        ff->path = cm_strdup(path);
        ff->data = malloc(n ? n : 1);
        memcpy(ff->data, data, n);
        ff->n = n;
        cm_sha256_hex(data, n, ff->etag);
    }
    pthread_mutex_unlock(&s->mu);
}

void fake_file_etag(fake_server *s, const char *path, const char *etag)
{
    pthread_mutex_lock(&s->mu);
    for (int i = s->nfiles - 1; i >= 0; i--)
        if (strcmp(s->files[i].path, path) == 0) {
            snprintf(s->files[i].etag, sizeof s->files[i].etag, "%s", etag);
            break;
        }
    pthread_mutex_unlock(&s->mu);
}

void fake_handler(fake_server *s, fake_handler_fn fn, void *ctx)
{
    pthread_mutex_lock(&s->mu);
    s->handler = fn;
    s->handler_ctx = ctx;
    pthread_mutex_unlock(&s->mu);
}

void fake_push(fake_server *s, enum fake_fault f, int status, int retry_after)
{
    pthread_mutex_lock(&s->mu);
    if (s->nfaults < 64) {
        s->faults[s->nfaults] = f;
        s->fstatus[s->nfaults] = status;
        s->fretry[s->nfaults] = retry_after;
        s->fraw[s->nfaults] = NULL;
        s->nfaults++;
    }
    pthread_mutex_unlock(&s->mu);
}

void fake_push_raw(fake_server *s, const char *raw, bool close)
{
    pthread_mutex_lock(&s->mu);
    if (s->nfaults < 64) {
        s->faults[s->nfaults] = FAKE_RAW;
        s->fstatus[s->nfaults] = close;
        s->fretry[s->nfaults] = -1;
        s->fraw[s->nfaults] = cm_strdup(raw);
        s->nfaults++;
    }
    pthread_mutex_unlock(&s->mu);
}

void fake_push_endless(fake_server *s, const char *chunk)
{
    pthread_mutex_lock(&s->mu);
    if (s->nfaults < 64) {
        s->faults[s->nfaults] = FAKE_ENDLESS;
        s->fstatus[s->nfaults] = 200;
        s->fretry[s->nfaults] = -1;
        s->fraw[s->nfaults] = cm_strdup(chunk);
        s->nfaults++;
    }
    pthread_mutex_unlock(&s->mu);
}

long long fake_endless_sent(fake_server *s)
{
    return s->endless_sent;
}

int fake_count(fake_server *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->nreqs;
    pthread_mutex_unlock(&s->mu);
    return n;
}

const fake_request *fake_get(fake_server *s, int i)
{
    /* under the lock: what the serving thread recorded is then visible */
    pthread_mutex_lock(&s->mu);
    const fake_request *r = i < s->nreqs ? &s->reqs[i] : NULL;
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* text as a JSON string literal (malloc'd). */
static char *json_quoted(const char *text)
{
    json_t *t = json_string(text);
    char *q = json_dumps(t, JSON_ENCODE_ANY);
    json_decref(t);
    return q;
}

void fake_push_chat_text(fake_server *s, const char *text, int prompt_tokens)
{
    char *q = json_quoted(text);
    buf b = BUF_INIT;
    cm_buf_printf(
        &b,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        "data: "
        "{\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},\"finish_reason\":\"stop\"}]}\n\n"
        "data: "
        "{\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":10,\"total_tokens\":"
        "%d}}\n\n"
        "data: [DONE]\n\n",
        q, prompt_tokens, prompt_tokens + 10);
    fake_push_raw(s, b.data, true);
    cm_buf_release(&b);
    free(q);
}

void fake_push_chat_call(fake_server *s, const char *id, const char *name, const char *args_json)
{
    char *q = json_quoted(args_json);
    buf b = BUF_INIT;
    cm_buf_printf(
        &b,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"%s\","
        "\"function\":{\"name\":\"%s\",\"arguments\":%s}}]},\"finish_reason\":\"tool_calls\"}]}\n\n"
        "data: [DONE]\n\n",
        id, name, q);
    fake_push_raw(s, b.data, true);
    cm_buf_release(&b);
    free(q);
}
