/*
 * ws_client.h — what the gateway protocol tests share: `clawmem gateway`
 * (cm_gateway_start) on a loopback port with the fake model, and a small
 * WebSocket client (dial, handshake, masked text frames, responses and
 * events, connect and call).
 */
#ifndef CM_TEST_WS_CLIENT_H
#define CM_TEST_WS_CLIENT_H

#include <jansson.h>

#include "../include/clawmem.h"
#include "fakeserver.h"
#include "test.h"

#define WTOKEN "tok-ws-test-9137"

typedef struct wsgw {
    fake_server *fs;
    char base[64], *dir, *ws, *state;
    cm_gateway *g;
    int port;
} wsgw;

bool gw_up(wsgw *w);

bool gw_up_token(wsgw *w, const char *token);

void gw_down(wsgw *w);

typedef struct wsc {
    int fd;
    buf in;
} wsc;

int t_dial(int port);

/* Reads until the HTTP head ends; returns it (malloc'd), or NULL. */
char *t_read_head(int fd, buf *rest);

bool ws_open(wsc *c, int port, const char *origin, char **head_out);

void ws_close(wsc *c);

void ws_send(wsc *c, const char *text);

/* The next text frame as JSON (NULL on close or after timeout_ms). */
json_t *ws_recv(wsc *c, int timeout_ms);

/* The next res frame (events skipped) or NULL. */
json_t *ws_res(wsc *c);

json_t *ws_call(wsc *c, const char *id, const char *method, const char *params);

#endif
