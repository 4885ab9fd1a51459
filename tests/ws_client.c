/*
 * ws_client.c — see ws_client.h.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include "../src/net/wsframe.h"
#include "ws_client.h"

bool gw_up(wsgw *w)
{
    return gw_up_token(w, WTOKEN);
}

bool gw_up_token(wsgw *w, const char *token)
{
    memset(w, 0, sizeof *w);
    w->fs = fake_start(8, w->base);
    w->dir = tmp_dir();
    w->ws = cm_strdup(path_in(w->dir, "ws"));
    w->state = cm_strdup(path_in(w->dir, "state"));
    write_file(w->dir, "ws/MEMORY.md", "# Facts\n");
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"gateway\":{\"auth\":{\"token\":\"%s\"}},"
             "\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\",\"memorySearch\":{"
             "\"provider\":\"none\"}}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/v1\","
             "\"apiKey\":\"sk-test-ws-0001\",\"models\":[]}}},"
             "\"messages\":{\"inbound\":{\"debounceMs\":0}}}",
             token ? token : WTOKEN, w->base);
    write_file(w->dir, "state/quantumclaw.json", cfg);
    cm_options o = {NULL, w->ws, NULL, w->state, NULL, NULL, 1};
    cm_gateway_opts go = {"127.0.0.1:0", 1};
    char err[512];
    if (cm_gateway_start(&o, &go, &w->g, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "gateway: %s", err);
        return false;
    }
    const char *a = cm_gateway_address(w->g);
    const char *colon = a ? strrchr(a, ':') : NULL;
    w->port = colon ? (int)strtol(colon + 1, NULL, 10) : 0;
    return true;
}

void gw_down(wsgw *w)
{
    cm_gateway_drain(w->g, 5000);
    cm_gateway_free(w->g);
    fake_stop(w->fs);
    free(w->ws);
    free(w->state);
}

/* ---- a small client ---------------------------------------------------------- */

int t_dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        close(fd);
        return -1;
    }
    return fd;
}

char *t_read_head(int fd, buf *rest)
{
    buf b = BUF_INIT;
    char tmp[4096];
    for (int i = 0; i < 200; i++) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 5000) <= 0) break;
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r <= 0) break;
        cm_buf_add(&b, tmp, (size_t)r);
        char *end = strstr(b.data, "\r\n\r\n");
        if (end) {
            size_t hl = (size_t)(end - b.data) + 4;
            cm_buf_add(rest, b.data + hl, b.len - hl);
            b.len = hl;
            b.data[hl] = 0;
            return cm_buf_detach(&b);
        }
    }
    cm_buf_release(&b);
    return NULL;
}

bool ws_open(wsc *c, int port, const char *origin, char **head_out)
{
    memset(c, 0, sizeof c[0]);
    c->fd = t_dial(port);
    if (c->fd < 0) return false;
    char req[512];
    snprintf(req, sizeof req,
             "GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: "
             "Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
             "Sec-WebSocket-Version: 13\r\n%s%s%s\r\n",
             port, origin ? "Origin: " : "", origin ? origin : "", origin ? "\r\n" : "");
    send(c->fd, req, strlen(req), MSG_NOSIGNAL);
    char *head = t_read_head(c->fd, &c->in);
    bool ok = head && !strncmp(head, "HTTP/1.1 101", 12) &&
              strstr(head, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    if (head_out)
        *head_out = head;
    else
        free(head);
    return ok;
}

void ws_close(wsc *c)
{
    if (c->fd >= 0) close(c->fd);
    cm_buf_release(&c->in);
}

void ws_send(wsc *c, const char *text)
{
    static const uint8_t key[4] = {0x12, 0x34, 0x56, 0x78};
    buf f = BUF_INIT;
    cm_ws_frame_encode(&f, WS_OP_TEXT, text, strlen(text), true, key);
    send(c->fd, f.data, f.len, MSG_NOSIGNAL);
    cm_buf_release(&f);
}

json_t *ws_recv(wsc *c, int timeout_ms)
{
    for (;;) {
        ws_frame fr;
        long k = cm_ws_frame_parse((uint8_t *)c->in.data, c->in.len, false, 1 << 24, &fr);
        if (k < 0) return NULL;
        if (k > 0) {
            json_t *o = fr.opcode == WS_OP_TEXT ? json_loadb((char *)fr.payload, fr.len, 0, NULL)
                                                : NULL;
            bool closing = fr.opcode == WS_OP_CLOSE;
            memmove(c->in.data, c->in.data + k, c->in.len - (size_t)k);
            c->in.len -= (size_t)k;
            if (closing) return NULL;
            if (o) return o;
            continue;
        }
        struct pollfd p = {c->fd, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0) return NULL;
        char tmp[8192];
        ssize_t r = recv(c->fd, tmp, sizeof tmp, 0);
        if (r <= 0) return NULL;
        cm_buf_add(&c->in, tmp, (size_t)r);
    }
}

json_t *ws_res(wsc *c)
{
    for (int i = 0; i < 100; i++) {
        json_t *o = ws_recv(c, 10000);
        if (!o) return NULL;
        const char *t = json_string_value(json_object_get(o, "type"));
        if (t && !strcmp(t, "res")) return o;
        json_decref(o);
    }
    return NULL;
}

json_t *ws_call(wsc *c, const char *id, const char *method, const char *params)
{
    char req[2048];
    snprintf(req, sizeof req, "{\"type\":\"req\",\"id\":\"%s\",\"method\":\"%s\",\"params\":%s}",
             id, method, params);
    ws_send(c, req);
    return ws_res(c);
}
