/*
 * test_gateway_scale.c — the gateway runtime's per-message cost does not
 * grow with the conversations it knows (issue 27 item 2).
 */
#include <jansson.h>
#include <stdio.h>

#include "../src/base/buf.h"
#include "../src/gateway/core/runtime.h"
#include "test.h"

static int64_t g_clock_ms = 1790000000000LL;

static int64_t sc_clock(void *ctx)
{
    (void)ctx;
    return g_clock_ms;
}

static cm_rc sc_run(void *ctx, const gw_run_req *rq, gw_run_res *out, char *err, size_t errlen)
{
    (void)ctx;
    (void)rq;
    (void)err;
    (void)errlen;
    memset(out, 0, sizeof *out);
    out->text = cm_strdup("ok");
    return out->text ? CM_OK : CM_ENOMEM;
}

/* 500 conversations, each answered once, are all known to the runtime
 * (idle, nothing queued); a tick then looks at the sessions that got work
 * since the last one, not at every session known: ten ticks look at none.
 * (The old clock walked all 500 at every tick — under the runtime's
 * lock, which every channel and worker waits for — and the timer ticks at
 * every run's end.) A message after that is run as before, and the tick
 * after it looks at its session once. */
TEST(gateway_tick_looks_only_at_sessions_with_work)
{
    char *state = tmp_dir(), err[256];
    json_t *cfg = json_loads("{\"session\":{\"dmScope\":\"per-channel-peer\"},"
                             "\"channels\":{\"http\":{\"dmPolicy\":\"open\",\"allowFrom\":[\"*\"]}},"
                             "\"messages\":{\"inbound\":{\"debounceMs\":0},"
                             "\"queue\":{\"mode\":\"followup\",\"debounceMs\":0}}}",
                             0, NULL);
    gw_runtime_opts o = {cfg, state, sc_run, NULL, sc_clock, NULL, 2, true, 0, NULL, NULL};
    gw_runtime *rt = NULL;
    EXPECT_INT(cm_gw_runtime_new(&o, &rt, err, sizeof err), CM_OK);
    EXPECT_INT(cm_gw_runtime_start(rt, err, sizeof err), CM_OK);
    enum { N = 500 };
    for (int i = 0; i < N; i++) {
        char peer[32], id[32];
        snprintf(peer, sizeof peer, "user%d", i);
        snprintf(id, sizeof id, "m%d", i);
        gw_msg m = {.channel = "http", .peer = peer, .message_id = id, .sender = peer,
                    .text = "hello"};
        EXPECT_INT(cm_gw_runtime_sink(rt, &m), CM_OK);
    }
    for (int i = 0; i < 50 && !cm_gw_runtime_wait_idle(rt, 200); i++)
        cm_gw_runtime_tick(rt);
    cm_gw_runtime_tick(rt); /* every session's work is done: off the watch */
    json_t *st = cm_gw_runtime_status(rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "knownSessions")), N);
    EXPECT_INT(json_integer_value(json_object_get(st, "runs")), N);
    json_decref(st);
    uint64_t v0 = cm_gw_runtime_tick_visits(rt);
    for (int i = 0; i < 10; i++)
        cm_gw_runtime_tick(rt);
    EXPECT_INT((int64_t)(cm_gw_runtime_tick_visits(rt) - v0), 0); /* old: 5,000 */
    gw_msg m = {.channel = "http", .peer = "user7", .message_id = "again", .sender = "user7",
                .text = "hello again"};
    EXPECT_INT(cm_gw_runtime_sink(rt, &m), CM_OK);
    for (int i = 0; i < 50 && !cm_gw_runtime_wait_idle(rt, 200); i++)
        cm_gw_runtime_tick(rt);
    cm_gw_runtime_tick(rt);
    uint64_t v1 = cm_gw_runtime_tick_visits(rt);
    EXPECT((int64_t)(v1 - v0) >= 1 && (int64_t)(v1 - v0) <= 3);
    st = cm_gw_runtime_status(rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "runs")), N + 1);
    json_decref(st);
    cm_gw_runtime_free(rt);
    json_decref(cfg);
}
