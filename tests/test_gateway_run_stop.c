/*
 * test_gateway_run_stop.c — the running gateway (gw_run_world.c) stopped
 * and steered mid-run: interrupt, /stop and abort words cancel the model call
 * or the run still waiting, a queue override outlives a restart, steer
 * lands in the next model request or becomes a followup, and /model is
 * answered beside the running turn.
 */
#include <signal.h>

#include "gw_run_world.h"

/* ---- interrupt, /stop, steer ------------------------------------------------------- */

/* Waits (bounded) until the fake model has been called n times. */
static bool wait_calls(world *w, int n)
{
    for (int i = 0; i < 400 && fake_count(w->fs) < n; i++) {
        cm_gw_runtime_tick(w->rt);
        usleep(25000);
    }
    return fake_count(w->fs) >= n;
}

/* How many messages of request i have role. */
static int request_roles(fake_server *fs, int i, const char *role)
{
    const fake_request *q = fake_get(fs, i);
    json_t *b = q ? json_loads(q->body, 0, NULL) : NULL;
    int n = 0;
    size_t k;
    json_t *m;
    json_array_foreach(json_object_get(b, "messages"), k, m)
    {
        n += !strcmp(json_string_value(json_object_get(m, "role")) ?: "", role);
    }
    json_decref(b);
    return n;
}

TEST(gateway_run_interrupt_cancels_the_model_call)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"queue\":{\"mode\":\"interrupt\"}}}")) return;
    fake_push(w.fs, FAKE_HANG, 0, -1); /* the first model call hangs until cancelled */
    fake_push_chat_text(w.fs, "Second answer.", 50);
    EXPECT_INT(post_text(&w, "ivan", "i1", "first question"), 202);
    EXPECT(wait_calls(&w, 1));
    EXPECT_INT(post_text(&w, "ivan", "i2", "second question"), 202);
    EXPECT(settle(&w)); /* the hanging call was stopped: the runtime went idle */
    EXPECT_INT(fake_count(w.fs), 2);
    json_t *r = t_replies(w.addr, "ivan");
    EXPECT_INT(json_array_size(r), 1); /* only the second run's answer */
    EXPECT_STR(json_string_value(json_object_get(json_array_get(r, 0), "text")), "Second answer.");
    json_decref(r);
    /* the aborted run's user message stays in the transcript; no half answer is sent back */
    char *sent = t_request_text(w.fs, 1);
    EXPECT_CONTAINS(sent, "first question");
    EXPECT_CONTAINS(sent, "second question");
    free(sent);
    EXPECT_INT(request_roles(w.fs, 1, "assistant"), 0);
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    world_stop(&w);
}

/* Both workers are busy, so a third session's run waits for one; an
 * interrupt meanwhile aborts that waiting run: it never asks the model,
 * and only the interrupting message is answered. */
TEST(gateway_run_interrupt_aborts_a_run_still_waiting_for_a_worker)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"queue\":{\"mode\":\"interrupt\"}},"
                         "\"session\":{\"dmScope\":\"per-peer\"}}"))
        return;
    for (int i = 0; i < 3; i++) /* the three runs may ask in any order */
        fake_push_chat_text(w.fs, "An answer.", 50);
    w.gate.closed = true;
    EXPECT_INT(post_text(&w, "xavier", "x1", "first busy question"), 202);
    EXPECT_INT(post_text(&w, "yara", "y1", "second busy question"), 202);
    cm_gw_runtime_tick(w.rt);
    EXPECT(wait_gate(&w, &w.gate.started, 2)); /* both workers hold a run at the gate */
    EXPECT_INT(post_text(&w, "zed", "z1", "the waiting question"), 202);
    cm_gw_runtime_tick(w.rt);
    EXPECT_INT(post_text(&w, "zed", "z2", "the interrupting question"), 202);
    pthread_mutex_lock(&w.gate.mu);
    int started = w.gate.started;
    pthread_mutex_unlock(&w.gate.mu);
    EXPECT_INT(started, 2); /* z1 never reached a worker before the interrupt */
    gate_open(&w);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 3); /* x1, y1, z2: z1 never asked the model */
    json_t *r = t_replies(w.addr, "zed");
    EXPECT_INT(json_array_size(r), 1);
    json_decref(r);
    int interrupting = 0, waiting = 0;
    for (int i = 0; i < fake_count(w.fs); i++) {
        char *sent = t_request_text(w.fs, i);
        interrupting += sent && strstr(sent, "the interrupting question") != NULL;
        waiting += sent && strstr(sent, "the waiting question") != NULL;
        free(sent);
    }
    EXPECT_INT(interrupting, 1);
    EXPECT_INT(waiting, 0);
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    world_stop(&w);
}

/* debounce_ms > 0: messages.inbound.debounceMs, each message's batch let
 * go by the fake clock (the abort words are debounced like any text). */
static void S_stop_cancels_after(const char *stop_text, int64_t debounce_ms)
{
    world w;
    char extra[128];
    snprintf(extra, sizeof extra, "{\"messages\":{\"inbound\":{\"debounceMs\":%lld}}}",
             (long long)debounce_ms);
    if (!world_start(&w, extra)) return;
    fake_push(w.fs, FAKE_HANG, 0, -1);
    EXPECT_INT(post_text(&w, "judy", "j1", "a long question"), 202);
    if (debounce_ms) {
        t_advance(debounce_ms + 1);
        cm_gw_runtime_tick(w.rt);
    }
    EXPECT(wait_calls(&w, 1));
    EXPECT_INT(post_text(&w, "judy", "j2", stop_text), 202);
    if (debounce_ms) {
        t_advance(debounce_ms + 1);
        cm_gw_runtime_tick(w.rt);
    }
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 1);
    json_t *r = t_replies(w.addr, "judy");
    EXPECT_INT(json_array_size(r), 1); /* the notice; no failure of the aborted run */
    EXPECT_CONTAINS(json_string_value(json_object_get(json_array_get(r, 0), "text")),
                    "Agent was aborted.");
    json_decref(r);
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    world_stop(&w);
}

static void S_stop_cancels(const char *stop_text)
{
    S_stop_cancels_after(stop_text, 0);
}

/* The session's entry in sessions.json, or NULL. */
static json_t *t_session_entry(world *w, const char *key)
{
    json_t *doc = json_load_file(path_in(w->state, "agents/main/sessions/sessions.json"), 0, NULL);
    json_t *e = json_incref(json_object_get(doc, key));
    json_decref(doc);
    return e;
}

/* /queue is kept in the session's entry (2026.3.22's queueMode, queueCap,
 * …), so a restarted gateway runs the session the same way; /queue reset
 * removes the fields. */
TEST(gateway_run_queue_override_outlives_a_restart)
{
    world w;
    if (!world_start(&w, NULL)) return;
    EXPECT_INT(post_text(&w, "lena", "l1", "/queue interrupt cap:5"), 202);
    EXPECT(settle(&w));
    json_t *e = t_session_entry(&w, "agent:main:main");
    EXPECT_STR(json_string_value(json_object_get(e, "queueMode")), "interrupt");
    EXPECT_INT(json_integer_value(json_object_get(e, "queueCap")), 5);
    EXPECT(!json_object_get(e, "queueDrop"));
    json_t *store = json_pack("{s:o}", "agent:main:main", e);
    char *saved = json_dumps(store, JSON_COMPACT);
    json_decref(store);
    world_stop(&w);

    /* a new gateway over that store: the second message interrupts the first */
    g_presessions = saved;
    bool ok = world_start(&w, NULL);
    g_presessions = NULL;
    free(saved);
    if (!ok) return;
    fake_push_chat_text(w.fs, "First answer.", 50);
    fake_push_chat_text(w.fs, "Second answer.", 50);
    w.gate.closed = true;
    EXPECT_INT(post_text(&w, "lena", "l2", "first question"), 202);
    cm_gw_runtime_tick(w.rt);
    EXPECT(wait_gate(&w, &w.gate.started, 1));
    EXPECT_INT(post_text(&w, "lena", "l3", "second question"), 202);
    gate_open(&w);
    EXPECT(settle(&w));
    json_t *r = t_replies(w.addr, "lena");
    EXPECT_INT(json_array_size(r), 1); /* the first run was aborted */
    json_decref(r);
    /* the second ran at once (collect would wait its debounce behind the first) */
    char *sent = t_request_text(w.fs, fake_count(w.fs) - 1);
    EXPECT_CONTAINS(sent, "second question");
    free(sent);
    EXPECT_INT(post_text(&w, "lena", "l4", "/queue reset"), 202);
    EXPECT(settle(&w));
    e = t_session_entry(&w, "agent:main:main");
    EXPECT(e && !json_object_get(e, "queueMode") && !json_object_get(e, "queueCap"));
    EXPECT(json_is_string(json_object_get(e, "sessionId"))); /* the rest stays */
    json_decref(e);
    world_stop(&w);
}

/* interrupt mode: a second message aborts the first run and waits for it to
 * stop; "stop" then drops that waiting run too: the model is asked once. */
TEST(gateway_run_stop_drops_the_run_an_interrupt_left_waiting)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"queue\":{\"mode\":\"interrupt\"}}}")) return;
    fake_push_chat_text(w.fs, "Unwanted answer.", 50);
    w.gate.closed = true;
    EXPECT_INT(post_text(&w, "mia", "m1", "first question"), 202);
    cm_gw_runtime_tick(w.rt);
    EXPECT(wait_gate(&w, &w.gate.started, 1));
    EXPECT_INT(post_text(&w, "mia", "m2", "second question"), 202);
    EXPECT_INT(post_text(&w, "mia", "m3", "stop"), 202);
    gate_open(&w);
    EXPECT(settle(&w));
    EXPECT(fake_count(w.fs) <= 1); /* the first run only, if it got as far as the model */
    json_t *r = t_replies(w.addr, "mia");
    EXPECT_INT(json_array_size(r), 1); /* the notice */
    EXPECT_CONTAINS(json_string_value(json_object_get(json_array_get(r, 0), "text")),
                    "Agent was aborted.");
    json_decref(r);
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    world_stop(&w);
}

TEST(gateway_run_stop_cancels_the_running_call)
{
    S_stop_cancels("/stop");
}

/* a plain abort word does what /stop does */
TEST(gateway_run_abort_word_cancels_the_running_call)
{
    S_stop_cancels("Stop!");
}

/* debounced, it is still its sender's command: the batch carries the
 * sender's command authorization to the gate */
TEST(gateway_run_debounced_abort_word_still_cancels)
{
    S_stop_cancels_after("stop", 500);
}

TEST(gateway_run_steer_lands_in_the_next_model_request)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"queue\":{\"mode\":\"steer\"}}}")) return;
    fake_push_chat_call(w.fs, "call_1", "memory_search", "{\"query\":\"dog\"}");
    fake_push_chat_text(w.fs, "Steered answer.", 50);
    w.gate.closed = true;
    EXPECT_INT(post_text(&w, "kim", "k1", "what is the dog called"), 202);
    cm_gw_runtime_tick(w.rt);
    EXPECT(wait_gate(&w, &w.gate.started, 1));
    /* the run is executing: this one steers it */
    EXPECT_INT(post_text(&w, "kim", "k2", "answer in French please"), 202);
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(
                   json_object_get(json_array_get(json_object_get(st, "sessions"), 0), "queued")),
               0);
    json_decref(st);
    gate_open(&w);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 2); /* one run, two model calls: no followup turn */
    char *first = t_request_text(w.fs, 0), *second = t_request_text(w.fs, 1);
    EXPECT(!strstr(first, "answer in French please"));
    EXPECT_CONTAINS(second, "answer in French please");
    free(first);
    free(second);
    EXPECT_INT(request_roles(w.fs, 1, "tool"), 1);
    json_t *r = t_replies(w.addr, "kim");
    EXPECT_INT(json_array_size(r), 1);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(r, 0), "text")), "Steered answer.");
    json_decref(r);
    st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    world_stop(&w);
}

TEST(gateway_run_steer_after_the_last_model_call_becomes_a_followup)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"queue\":{\"mode\":\"steer\"}}}")) return;
    fake_push_chat_text(w.fs, "First answer.", 50);
    fake_push_chat_text(w.fs, "Followup answer.", 50);
    w.gate.hold = true; /* the run answers, then waits before it ends */
    EXPECT_INT(post_text(&w, "leo", "l1", "first question"), 202);
    cm_gw_runtime_tick(w.rt);
    EXPECT(wait_gate(&w, &w.gate.finished, 1));
    /* still running, but past its last model call */
    EXPECT_INT(post_text(&w, "leo", "l2", "one more thing"), 202);
    pthread_mutex_lock(&w.gate.mu);
    w.gate.hold = false;
    pthread_cond_broadcast(&w.gate.cv);
    pthread_mutex_unlock(&w.gate.mu);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 2);
    char *sent = t_request_text(w.fs, 1);
    EXPECT_CONTAINS(sent, "one more thing");
    EXPECT_CONTAINS(sent, "First answer."); /* a turn of its own, after the first */
    free(sent);
    json_t *r = t_replies(w.addr, "leo");
    EXPECT_INT(json_array_size(r), 2);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(r, 1), "text")),
               "Followup answer.");
    json_decref(r);
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    world_stop(&w);
}

/* /model over the HTTP channel (the channel `clawmem chat` posts to) is
 * answered at once beside a running turn, as 2026.3.22 answers a
 * directive-only message, without waiting for it or stopping it; the next
 * turn asks the model it set. */
TEST(gateway_run_model_answered_beside_a_running_turn)
{
    world w;
    if (!world_start(&w, "{\"agents\":{\"defaults\":{\"models\":{\"openai/gpt-t\":{},"
                         "\"openai/gpt-u\":{\"alias\":\"quick\"}}}}}"))
        return;
    fake_push(w.fs, FAKE_HANG, 0, -1); /* the first turn runs until stopped */
    EXPECT_INT(post_text(&w, "mia", "m1", "a long question"), 202);
    EXPECT(wait_calls(&w, 1));
    EXPECT_INT(post_text(&w, "mia", "m2", "/model quick"), 202);
    json_t *r = NULL;
    for (int i = 0; i < 400 && json_array_size(r) < 1; i++) {
        json_decref(r);
        cm_gw_runtime_tick(w.rt);
        usleep(25000);
        r = t_replies(w.addr, "mia");
    }
    EXPECT_INT(json_array_size(r), 1);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(r, 0), "text")),
               "Model set to quick (openai/gpt-u).");
    json_decref(r);
    json_t *st = cm_gw_runtime_status(w.rt);
    json_t *s0 = json_array_get(json_object_get(st, "sessions"), 0);
    EXPECT(json_is_true(json_object_get(s0, "active"))); /* the turn still runs */
    json_decref(st);
    EXPECT_INT(post_text(&w, "mia", "m3", "/stop"), 202);
    EXPECT(settle(&w));
    fake_push_chat_text(w.fs, "Answered by the quick one.", 50);
    EXPECT_INT(post_text(&w, "mia", "m4", "and now?"), 202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 2);
    if (fake_count(w.fs) >= 2) EXPECT_CONTAINS(fake_get(w.fs, 1)->body, "\"model\":\"gpt-u\"");
    world_stop(&w);
}
