/*
 * agent_world.h — the world the agent tests share: a workspace with a
 * MEMORY.md, its memory engine, and a model runner over the loopback server
 * playing the model (fakeserver.c), on a fake clock.
 */
#ifndef CM_TEST_AGENT_WORLD_H
#define CM_TEST_AGENT_WORLD_H

#include <jansson.h>

#include "../src/agent/session_turn.h"
#include "clawmem.h"
#include "fakeserver.h"
#include "test.h"

#define T0 1800000000000LL /* 2027-01-15 08:00 UTC */

extern int64_t clock_now;

typedef struct world {
    fake_server *fs;
    char base[64];
    char *dir, *ws, *state;
    json_t *cfg;
    cm_engine *eng;
    llm_runner *runner;
    char store[2048];
    agent_ctx a;
} world;

bool agent_world_start(world *w, const char *models_json);

void agent_world_stop(world *w);

/* The fake model's next answer (fakeserver.c). */
void say(world *w, const char *text, int prompt_tokens);

json_t *request_body(world *w, int i);

json_t *entry_of(world *w, const char *key);

char *transcript_of(world *w, const char *key);

#endif
