/*
 * gw_run_world.h — the world the gateway_run tests share: a gateway runtime
 * with its HTTP channel and agents over the loopback fake model
 * (fakeserver.c), a fake clock, a tiny HTTP client, and a gate that holds
 * runs so a test can act while one is active.
 */
#ifndef CM_TEST_GW_RUN_WORLD_H
#define CM_TEST_GW_RUN_WORLD_H

#include <jansson.h>
#include <pthread.h>

#include "../src/gateway/channels/http_channel.h"
#include "../src/gateway/core/runtime.h"
#include "../src/gateway/gateway_int.h"
#include "fakeserver.h"
#include "test.h"

#define TOKEN "tok-gateway-test-4242"

#define T0    1800000000000LL

void t_advance(int64_t ms);

int t_connect(const char *addr);

bool t_write(int fd, const char *s, size_t n);

/* One request (Connection: close); returns the status, body into resp. */
int t_http(const char *addr, const char *method, const char *path, const char *token,
           const char *body, buf *resp);

int t_post(const char *addr, const char *json, buf *resp);

/* The replies of peer as a JSON array (new reference). */
json_t *t_replies(const char *addr, const char *peer);

/* The text of every message the model was sent in request i. */
char *t_request_text(fake_server *fs, int i);

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool closed; /* runs wait while closed */
    int started;
    bool hold;    /* a run that has answered waits while hold */
    int finished; /* runs that have answered */
    gw_agents *ag;
} gate;

/* A journal left by an earlier gateway, written before world_start opens it. */
extern const char *g_prejournal;

/* A sessions.json of agent main written before world_start (a restart). */
extern const char *g_presessions;

/* Set: world_start opens the Telegram channel of the config too. */
extern bool g_telegram;

typedef struct world {
    fake_server *fs;
    char base[64];
    char *dir, *ws, *state;
    json_t *cfg;
    gate gate;
    gw_runtime *rt;
    gw_channel *http, *tg;
    char addr[64];
} world;

/* A model answer queued as soon as the fake model starts (for recovery,
 * which runs inside world_start). */
extern const char *t_say_later;

bool world_start(world *w, const char *extra);

void world_stop(world *w);

/* Ticks the runtime until idle (runs finished), at most a few seconds. */
bool settle(world *w);

/* Waits (bounded) until the gate's counter (its runs started or finished)
 * reaches n. */
bool wait_gate(world *w, const int *count, int n);

/* Lets the runs waiting at the gate go on. */
void gate_open(world *w);

int post_text(world *w, const char *peer, const char *id, const char *text);

bool wait_line(proc *p, char *addr, size_t n);

#endif
