/*
 * test_gateway_run.c — the running gateway end to end over its HTTP
 * channel, with the loopback fake model (fakeserver.c) and a fake clock for
 * debounce and queue delays (the world in gw_run_world.c): duplicates
 * redelivered (one run), a burst debounced into one turn, a message mid-run
 * in collect mode, a long reply with a code fence chunked under the limit, a
 * fact written with memory_write and found in a new session with
 * memory_search, an unapproved sender (no model call, no agent opened), SSE,
 * 503 while draining, reply shaping and routing rules; and the `clawmem
 * gateway` process killed with -9 mid-run, restarted, nothing accepted lost.
 */
#include <poll.h>
#include <signal.h>

#include "../src/base/fs.h"
#include "../src/session/sessions.h"
#include "fake_telegram.h"
#include "gw_fixture.h"
#include "gw_run_world.h"

/* The session entry of key as on disk, every pending change written. */
static json_t *t_disk_entry(world *w, const char *key)
{
    char err[256];
    cm_session_store_sync(NULL, err, sizeof err);
    json_t *doc = json_load_file(path_in(w->state, "agents/main/sessions/sessions.json"), 0, NULL);
    json_t *e = json_incref(json_object_get(doc, key));
    json_decref(doc);
    return e;
}

/* ---- tests ------------------------------------------------------------------------ */

TEST(gateway_run_duplicate_redelivered_runs_once)
{
    world w;
    if (!world_start(&w, NULL)) return;
    fake_push_chat_text(w.fs, "Hello there.", 50);
    EXPECT_INT(post_text(&w, "alice", "m1", "hi"), 202);
    EXPECT_INT(post_text(&w, "alice", "m1", "hi"), 202); /* redelivered */
    EXPECT(settle(&w));
    EXPECT_INT(post_text(&w, "alice", "m1", "hi"), 202); /* after the run too */
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 1);
    json_t *r = t_replies(w.addr, "alice");
    EXPECT_INT(json_array_size(r), 1);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(r, 0), "text")), "Hello there.");
    json_decref(r);
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "duplicates")), 2);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    /* the token guards the channel */
    buf b = BUF_INIT;
    EXPECT_INT(t_http(w.addr, "POST", "/v1/messages", "wrong", "{}", &b), 401);
    EXPECT_INT(t_http(w.addr, "POST", "/v1/messages", NULL, "{}", &b), 401);
    EXPECT_INT(t_post(w.addr, "{\"text\":\"no peer\"}", &b), 400);
    cm_buf_release(&b);
    world_stop(&w);
}

TEST(gateway_run_burst_debounced_into_one_turn)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"inbound\":{\"debounceMs\":2000}}}")) return;
    fake_push_chat_text(w.fs, "Got all three.", 50);
    EXPECT_INT(post_text(&w, "bob", "b1", "first part"), 202);
    t_advance(500);
    EXPECT_INT(post_text(&w, "bob", "b2", "second part"), 202);
    t_advance(500);
    EXPECT_INT(post_text(&w, "bob", "b3", "third part"), 202);
    t_advance(1999); /* still inside the window of the last one */
    cm_gw_runtime_tick(w.rt);
    EXPECT(cm_gw_runtime_wait_idle(w.rt, 5000));
    EXPECT_INT(fake_count(w.fs), 0);
    t_advance(1);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 1);
    char *sent = t_request_text(w.fs, 0);
    EXPECT_CONTAINS(sent, "first part\nsecond part\nthird part");
    free(sent);
    json_t *r = t_replies(w.addr, "bob");
    EXPECT_INT(json_array_size(r), 1);
    json_decref(r);
    /* every message of the burst is answered in the journal */
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    world_stop(&w);
}

TEST(gateway_run_collect_while_a_run_is_active)
{
    world w;
    if (!world_start(&w, NULL)) return;
    fake_push_chat_text(w.fs, "First answer.", 50);
    fake_push_chat_text(w.fs, "Answer to both followups.", 50);
    w.gate.closed = true;
    EXPECT_INT(post_text(&w, "carol", "c1", "question one"), 202);
    cm_gw_runtime_tick(w.rt);
    EXPECT(wait_gate(&w, &w.gate.started, 1));
    /* mid-run: collect (the default) queues them */
    EXPECT_INT(post_text(&w, "carol", "c2", "followup A"), 202);
    EXPECT_INT(post_text(&w, "carol", "c3", "followup B"), 202);
    json_t *st = cm_gw_runtime_status(w.rt);
    json_t *s0 = json_array_get(json_object_get(st, "sessions"), 0);
    EXPECT_STR(json_string_value(json_object_get(s0, "key")), "agent:main:main");
    EXPECT(json_is_true(json_object_get(s0, "active")));
    EXPECT_INT(json_integer_value(json_object_get(s0, "queued")), 2);
    json_decref(st);
    gate_open(&w);
    EXPECT(cm_gw_runtime_wait_idle(w.rt, 20000));
    EXPECT_INT(fake_count(w.fs), 1);
    cm_gw_runtime_tick(w.rt); /* the queue's 1000 ms quiet time has not passed */
    EXPECT(cm_gw_runtime_wait_idle(w.rt, 5000));
    EXPECT_INT(fake_count(w.fs), 1);
    t_advance(1000);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 2);
    char *sent = t_request_text(w.fs, 1);
    EXPECT_CONTAINS(sent, "[Queued messages while agent was busy]");
    EXPECT_CONTAINS(sent, "followup A");
    EXPECT_CONTAINS(sent, "followup B");
    EXPECT_CONTAINS(sent, "First answer."); /* the session's history came along */
    free(sent);
    json_t *r = t_replies(w.addr, "carol");
    EXPECT_INT(json_array_size(r), 2);
    json_decref(r);
    st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    world_stop(&w);
}

/* Lines opening or closing a ``` fence in s. */
static int fence_lines(const char *s)
{
    int n = 0;
    for (const char *p = s; p && *p;) {
        if (!strncmp(p, "```", 3)) n++;
        p = strchr(p, '\n');
        if (p) p++;
    }
    return n;
}

TEST(gateway_run_long_reply_chunked_with_fences_whole)
{
    world w;
    if (!world_start(&w, "{\"channels\":{\"http\":{\"textChunkLimit\":1000,"
                         "\"responsePrefix\":\"[{model}]\"}}}"))
        return;
    buf reply = BUF_INIT;
    for (int i = 0; i < 8; i++)
        cm_buf_printf(&reply, "Paragraph %d explains one more thing about the code below.\n\n", i);
    cm_buf_adds(&reply, "```c\n");
    for (int i = 0; i < 60; i++)
        cm_buf_printf(&reply, "int value_%02d = %d; /* a line of code */\n", i, i);
    cm_buf_adds(&reply, "```\n\nThat is all.");
    fake_push_chat_text(w.fs, reply.data, 50);
    EXPECT_INT(post_text(&w, "dave", "d1", "show me code"), 202);
    EXPECT(settle(&w));
    json_t *r = t_replies(w.addr, "dave");
    EXPECT(json_array_size(r) >= 3);
    size_t i;
    json_t *e;
    buf all = BUF_INIT;
    json_array_foreach(r, i, e)
    {
        const char *t = json_string_value(json_object_get(e, "text"));
        EXPECT(cm_gw_u16len(t, strlen(t)) <= 1000);
        EXPECT(fence_lines(t) % 2 == 0); /* every piece renders: its fences are closed */
        cm_buf_adds(&all, t);
    }
    EXPECT(!strncmp(json_string_value(json_object_get(json_array_get(r, 0), "text")),
                    "[gpt-t] Paragraph 0", 19));
    EXPECT_CONTAINS(all.data, "int value_00 = 0;");
    EXPECT_CONTAINS(all.data, "int value_59 = 59;");
    EXPECT_CONTAINS(all.data, "That is all.");
    cm_buf_release(&all);
    cm_buf_release(&reply);
    json_decref(r);
    world_stop(&w);
}

TEST(gateway_run_memory_written_is_found_in_a_new_session)
{
    world w;
    if (!world_start(&w, NULL)) return;
    fake_push_chat_call(w.fs, "w1", "memory_write",
                        "{\"text\":\"- The boat is called Nautilus.\",\"path\":\"MEMORY.md\"}");
    fake_push_chat_text(w.fs, "Noted.", 50);
    EXPECT_INT(post_text(&w, "erin", "e1", "Remember: the boat is called Nautilus."), 202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 2);
    fake_push_chat_text(w.fs, "Hello again. What shall we do?", 50); /* the greeting */
    EXPECT_INT(post_text(&w, "erin", "e2", "/new"), 202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 3); /* /new: the notice, then a greeting turn */
    char *greet = t_request_text(w.fs, 2);
    EXPECT(!strstr(greet, "Remember: the boat")); /* a new session: the old turn is gone */
    EXPECT_CONTAINS(greet, "/new or /reset");
    free(greet);
    fake_push_chat_call(w.fs, "s1", "memory_search", "{\"query\":\"boat called\"}");
    fake_push_chat_text(w.fs, "The boat is called Nautilus.", 50);
    EXPECT_INT(post_text(&w, "erin", "e3", "What is the boat called?"), 202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 5);
    const fake_request *q = fake_get(w.fs, 4); /* carries the tool result */
    EXPECT_CONTAINS(q->body, "Nautilus");
    json_t *r = t_replies(w.addr, "erin");
    EXPECT_INT(json_array_size(r), 4);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(r, 1), "text")),
               "\xe2\x9c\x85 New session started \xc2\xb7 model: openai/gpt-t");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(r, 2), "text")),
               "Hello again. What shall we do?");
    json_decref(r);
    /* the old transcript was archived */
    world_stop(&w);
}

TEST(gateway_run_unapproved_sender_reaches_no_model)
{
    world w;
    if (!world_start(&w, "{\"channels\":{\"http\":{\"dmPolicy\":\"pairing\",\"allowFrom\":[]}}}"))
        return;
    fake_push_chat_text(w.fs, "should never be asked", 50);
    EXPECT_INT(post_text(&w, "mallory", "x1", "what is in MEMORY.md?"), 202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 0);               /* no model call */
    EXPECT_INT(cm_gw_agents_opened(w.gate.ag), 0); /* no agent, so no memory read */
    EXPECT_INT(w.gate.started, 0);
    json_t *r = t_replies(w.addr, "mallory");
    EXPECT_INT(json_array_size(r), 1);
    EXPECT_CONTAINS(json_string_value(json_object_get(json_array_get(r, 0), "text")),
                    "Pairing code: ");
    json_decref(r);
    EXPECT_INT(post_text(&w, "mallory", "x2", "again"), 202); /* pending: no second code */
    EXPECT(settle(&w));
    r = t_replies(w.addr, "mallory");
    EXPECT_INT(json_array_size(r), 1);
    json_decref(r);
    EXPECT_INT(fake_count(w.fs), 0);
    world_stop(&w);
}

TEST(gateway_run_sse_stream_and_503_while_draining)
{
    world w;
    if (!world_start(&w, NULL)) return;
    int fd = t_connect(w.addr);
    EXPECT(fd >= 0);
    const char *rq =
        "GET /v1/events?peer=frank HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN "\r\n\r\n";
    t_write(fd, rq, strlen(rq));
    buf got = BUF_INIT;
    char tmp[2048];
    struct pollfd p = {fd, POLLIN, 0};
    /* the stream has begun once its headers arrived */
    while (!(got.data && strstr(got.data, "\r\n\r\n")) && poll(&p, 1, 5000) > 0) {
        ssize_t n = read(fd, tmp, sizeof tmp);
        if (n <= 0) break;
        cm_buf_add(&got, tmp, (size_t)n);
    }
    EXPECT_CONTAINS(got.data, "text/event-stream");
    fake_push_chat_text(w.fs, "Streamed hello.", 50);
    EXPECT_INT(post_text(&w, "frank", "f1", "hello"), 202);
    EXPECT(settle(&w));
    while (!strstr(got.data, "Streamed hello.") && poll(&p, 1, 5000) > 0) {
        ssize_t n = read(fd, tmp, sizeof tmp);
        if (n <= 0) break;
        cm_buf_add(&got, tmp, (size_t)n);
    }
    EXPECT_CONTAINS(got.data, "event: reply");
    EXPECT_CONTAINS(got.data, "Streamed hello.");
    close(fd);
    cm_buf_release(&got);
    EXPECT(cm_gw_runtime_drain(w.rt, 5000));
    EXPECT_INT(post_text(&w, "frank", "f2", "too late"), 503);
    world_stop(&w);
}

TEST(gateway_run_reply_rules)
{
    EXPECT(cm_gw_reply_is_silent("  NO_REPLY\n"));
    EXPECT(!cm_gw_reply_is_silent("NO_REPLY please"));
    json_t *cj = json_loads(
        "{\"messages\":{\"responsePrefix\":\"[{model}|{provider}|{Identity.Name}|{x}]\"},"
        "\"agents\":{\"list\":[{\"id\":\"main\",\"identity\":{\"name\":\"Clawd\"}},"
        "{\"id\":\"ops\",\"default\":false}]},"
        "\"channels\":{\"telegram\":{\"responsePrefix\":\"auto\",\"replyToMode\":\"first\","
        "\"accounts\":{\"quiet\":{\"responsePrefix\":\"\",\"replyToMode\":\"all\"}}}},"
        "\"bindings\":[{\"agentId\":\"ops\",\"match\":{\"channel\":\"telegram\","
        "\"peer\":{\"kind\":\"group\",\"id\":\"-100\"}}},"
        "{\"agentId\":\"ops\",\"match\":{\"channel\":\"http\",\"accountId\":\"work\"}}]}",
        0, NULL);
    cm_rtcfg *cfg = rtc(cj);
    json_decref(cj);
    EXPECT(cfg);
    buf b = BUF_INIT;
    EXPECT_INT(cm_gw_reply_prefix(&b, cfg, "main", "http", NULL, "anthropic/claude-x-20260101"),
               CM_OK);
    EXPECT_STR(b.data, "[claude-x|anthropic|Clawd|{x}]");
    cm_buf_reset(&b);
    cm_gw_reply_prefix(&b, cfg, "main", "telegram", "default", NULL);
    EXPECT_STR(b.data, "[Clawd]");
    cm_buf_reset(&b);
    cm_gw_reply_prefix(&b, cfg, "main", "telegram", "quiet", NULL);
    EXPECT(b.len == 0); /* "" stops the cascade */
    EXPECT_INT(cm_gw_reply_to_mode_of(cfg, "telegram", "default"), GW_REPLYTO_FIRST);
    EXPECT_INT(cm_gw_reply_to_mode_of(cfg, "telegram", "quiet"), GW_REPLYTO_ALL);
    EXPECT_INT(cm_gw_reply_to_mode_of(cfg, "http", NULL), GW_REPLYTO_OFF);
    EXPECT_INT(cm_gw_reply_text_limit(cfg, "telegram", NULL, 4096), 4000);
    cm_buf_reset(&b);
    cm_gw_route_agent(&b, cfg, "telegram", "default", "-100", true);
    EXPECT_STR(b.data, "ops");
    cm_buf_reset(&b);
    cm_gw_route_agent(&b, cfg, "telegram", "default", "42", false);
    EXPECT_STR(b.data, "main"); /* no default: the first of agents.list */
    cm_buf_reset(&b);
    cm_gw_route_agent(&b, cfg, "http", "work", "42", false);
    EXPECT_STR(b.data, "ops");
    cm_buf_reset(&b);
    cm_gw_route_session(&b, cfg, "main", "telegram", "default", "42", NULL, false);
    EXPECT_STR(b.data, "agent:main:main"); /* direct chats collapse */
    cm_buf_reset(&b);
    cm_gw_route_session(&b, cfg, "ops", "telegram", "default", "-100", "7", true);
    EXPECT_STR(b.data, "agent:ops:telegram:group:-100:thread:7");
    cm_buf_release(&b);
    cm_rtcfg_unref(cfg);
}

TEST(gateway_run_kill9_mid_run_then_restart_answers)
{
    fake_server *fs;
    char base[64];
    fs = fake_start(8, base);
    char *dir = tmp_dir();
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"gateway\":{\"auth\":{\"token\":\"" TOKEN "\"}},"
             "\"agents\":{\"defaults\":{\"model\":\"openai/"
             "gpt-t\",\"memorySearch\":{\"provider\":\"none\"}}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/v1\","
             "\"apiKey\":\"sk-test-gw-0002\",\"models\":[]}}},"
             "\"channels\":{\"http\":{\"dmPolicy\":\"open\",\"allowFrom\":[\"*\"]}},"
             "\"messages\":{\"inbound\":{\"debounceMs\":0}}}",
             base);
    write_file(dir, "state/quantumclaw.json", cfg);
    write_file(dir, "ws/MEMORY.md", "# Facts\n");
    const char *state = cm_strdup(path_in(dir, "state"));
    const char *ws = cm_strdup(path_in(dir, "ws"));
    const char *args[] = {"--state-dir", state,      "--workspace", ws,
                          "gateway",     "--listen", "127.0.0.1:0", NULL};
    fake_push(fs, FAKE_HANG, 0, -1); /* the first model call never answers */
    proc p;
    proc_start(&p, NULL, args);
    char addr[64] = "";
    EXPECT(wait_line(&p, addr, sizeof addr));
    buf r = BUF_INIT;
    EXPECT_INT(
        t_post(addr, "{\"peer\":\"gina\",\"messageId\":\"g1\",\"text\":\"survive this\"}", &r),
        202);
    for (int i = 0; i < 200 && fake_count(fs) < 1; i++)
        usleep(50000);
    EXPECT_INT(fake_count(fs), 1); /* the run is in the model call */
    EXPECT_INT(proc_stop(&p, SIGKILL, 5000), 128 + SIGKILL);
    char *st_path = cm_strdup(path_in(state, "gateway/journal.jsonl"));
    buf j = BUF_INIT;
    cm_fs_read_file(st_path, 1 << 20, &j, NULL, 0);
    EXPECT_CONTAINS(j.data, "survive this");
    cm_buf_release(&j);
    /* restart: the accepted message is answered */
    fake_push_chat_text(fs, "Answered after the crash.", 50);
    proc_start(&p, NULL, args);
    EXPECT(wait_line(&p, addr, sizeof addr));
    json_t *rep = NULL;
    for (int i = 0; i < 200; i++) {
        json_decref(rep);
        rep = t_replies(addr, "gina");
        if (json_array_size(rep)) break;
        usleep(50000);
    }
    EXPECT_INT(json_array_size(rep), 1);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(rep, 0), "text")),
               "Answered after the crash.");
    json_decref(rep);
    /* redelivered after the restart: still one answer */
    EXPECT_INT(
        t_post(addr, "{\"peer\":\"gina\",\"messageId\":\"g1\",\"text\":\"survive this\"}", &r),
        202);
    run_result s = run_clawmem(
        NULL, (const char *const[]){"--state-dir", state, "gateway", "status", "--json", NULL});
    EXPECT_INT(s.status, 0);
    EXPECT_CONTAINS(s.out, "\"running\":true");
    EXPECT_CONTAINS(s.out, "\"recovered\":1");
    run_result_release(&s);
    /* clawmem chat goes through the running gateway (channel terminal) */
    fake_push_chat_text(fs, "Chat reply through the gateway.", 50);
    s = run_clawmem(NULL,
                    (const char *const[]){"--state-dir", state, "--workspace", ws, "chat",
                                          "hello from the terminal", "--timeout", "20000", NULL});
    EXPECT_INT(s.status, 0);
    EXPECT_CONTAINS(s.out, "Chat reply through the gateway.");
    run_result_release(&s);
    /* SIGTERM drains and exits 0; the journal has nothing pending */
    EXPECT_INT(proc_stop(&p, SIGTERM, 20000), 0);
    s = run_clawmem(NULL, (const char *const[]){"--state-dir", state, "gateway", "status", NULL});
    EXPECT_CONTAINS(s.out, "not running");
    EXPECT_CONTAINS(s.out, "journal backlog: 0");
    run_result_release(&s);
    EXPECT_INT(fake_count(fs), 3);
    /* without a gateway, chat talks to the agent in its own process */
    fake_push_chat_text(fs, "Chat reply in process.", 50);
    s = run_clawmem(NULL, (const char *const[]){"--state-dir", state, "--workspace", ws, "chat",
                                                "hello again", NULL});
    EXPECT_INT(s.status, 0);
    EXPECT_CONTAINS(s.out, "Chat reply in process.");
    run_result_release(&s);
    EXPECT_INT(fake_count(fs), 4);
    cm_buf_release(&r);
    free(st_path);
    free((char *)state);
    free((char *)ws);
    fake_stop(fs);
}

TEST(gateway_run_group_history_until_mentioned)
{
    world w;
    if (!world_start(&w, NULL)) return;
    fake_push_chat_text(w.fs, "Ann said lunch at noon.", 50);
    buf r = BUF_INIT;
    EXPECT_INT(t_post(w.addr,
                      "{\"peer\":\"team\",\"chatType\":\"group\",\"sender\":\"ann\","
                      "\"senderName\":\"Ann\",\"timestamp\":1800000000000,"
                      "\"messageId\":\"g1\",\"text\":\"lunch at noon?\"}",
                      &r),
               202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 0); /* not mentioned: history only */
    EXPECT_INT(t_post(w.addr,
                      "{\"peer\":\"team\",\"chatType\":\"group\",\"sender\":\"ben\","
                      "\"messageId\":\"g2\",\"text\":\"@bot what did ann say?\","
                      "\"mentioned\":true}",
                      &r),
               202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 1);
    char *sent = t_request_text(w.fs, 0);
    /* 2026.3.22's layout: the pending history as a JSON block, then the text */
    EXPECT_CONTAINS(sent, "  \"conversation_label\": \"group:team\",\n  \"sender\": \"ben\",\n");
    EXPECT_CONTAINS(sent, "  \"is_group_chat\": true,\n  \"was_mentioned\": true,\n"
                          "  \"history_count\": 1\n}\n```");
    EXPECT_CONTAINS(sent, "Chat history since last reply (untrusted, for context):\n```json\n[\n"
                          "  {\n    \"sender\": \"Ann id:ann\",\n"
                          "    \"timestamp_ms\": 1800000000000,\n"
                          "    \"body\": \"lunch at noon?\"\n  }\n]\n```\n\n"
                          "@bot what did ann say?");
    EXPECT_CONTAINS(sent, "\"chat_id\": \"http:team\"");
    EXPECT_CONTAINS(sent, "\"chat_type\": \"group\"");
    free(sent);
    json_t *rep = t_replies(w.addr, "team");
    EXPECT_INT(json_array_size(rep), 1);
    json_decref(rep);
    /* the group has its own session, apart from the main one */
    session_store st;
    char err[256], store[4096];
    snprintf(store, sizeof store, "%s/agents/main/sessions/sessions.json", w.state);
    EXPECT_INT(cm_session_store_read(&st, store, err, sizeof err), CM_OK);
    EXPECT(cm_session_store_get(&st, "agent:main:http:group:team") != NULL);
    EXPECT(cm_session_store_get(&st, "agent:main:main") == NULL);
    cm_session_store_release(&st);
    cm_buf_release(&r);
    world_stop(&w);
}

TEST(gateway_run_dm_prompt_tells_who_is_writing)
{
    world w;
    if (!world_start(&w, "{\"agents\":{\"defaults\":{\"envelopeTimezone\":\"utc\"}}}")) return;
    fake_push_chat_text(w.fs, "Hello Alice.", 50);
    buf r = BUF_INIT;
    EXPECT_INT(t_post(w.addr,
                      "{\"peer\":\"alice\",\"sender\":\"42\",\"senderName\":\"Alice "
                      "Liddell\",\"senderUsername\":\"alice_l\",\"timestamp\":1800000000000,"
                      "\"messageId\":\"m1\",\"text\":\"hi there\"}",
                      &r),
               202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 1);
    char *sent = t_request_text(w.fs, 0);
    EXPECT_CONTAINS(sent, "Conversation info (untrusted metadata):\n```json\n{\n"
                          "  \"message_id\": \"m1\",\n  \"sender_id\": \"42\",\n"
                          "  \"sender\": \"Alice Liddell\",\n"
                          "  \"timestamp\": \"Fri 2027-01-15T08:00Z\"\n}\n```\n\n"
                          "Sender (untrusted metadata):\n```json\n{\n"
                          "  \"label\": \"Alice Liddell (42)\",\n  \"id\": \"42\",\n"
                          "  \"name\": \"Alice Liddell\",\n  \"username\": \"alice_l\"\n}\n```"
                          "\n\nhi there");
    /* the system prompt: where it came from, trusted */
    EXPECT_CONTAINS(sent, "## Inbound Context (trusted metadata)\n");
    EXPECT_CONTAINS(sent, "  \"schema\": \"openclaw.inbound_meta.v1\",\n"
                          "  \"chat_id\": \"http:alice\",\n  \"account_id\": \"default\",\n"
                          "  \"channel\": \"http\",\n  \"provider\": \"http\",\n"
                          "  \"surface\": \"http\",\n  \"chat_type\": \"direct\"\n}");
    /* the agent's first start made the workspace files; they are injected */
    EXPECT(access(path_in(w.ws, "AGENTS.md"), F_OK) == 0);
    EXPECT_CONTAINS(sent, "## Group Chat Context\n## Inbound Context (trusted metadata)\n");
    EXPECT_CONTAINS(sent, "/AGENTS.md\n\n# AGENTS.md - How You Work Here\n");
    EXPECT_CONTAINS(sent, "today's and yesterday's daily notes");
    const char *ctx = strstr(sent, "# Project Context\n"), *run = strstr(sent, "## Runtime\n");
    EXPECT(ctx && run && strstr(sent, "## Safety\n") < ctx && ctx < run);
    free(sent);
    cm_buf_release(&r);
    /* the session's entry: where it came from and where replies go, as
     * 2026.3.22 records them */
    json_t *e = t_disk_entry(&w, "agent:main:main");
    json_t *o = json_object_get(e, "origin");
    EXPECT_STR(json_string_value(json_object_get(o, "label")), "Alice Liddell (@alice_l) id:42");
    EXPECT_STR(json_string_value(json_object_get(o, "from")), "http:alice");
    EXPECT_STR(json_string_value(json_object_get(o, "to")), "http:alice");
    EXPECT_STR(json_string_value(json_object_get(o, "chatType")), "direct");
    EXPECT_STR(json_string_value(json_object_get(json_object_get(e, "deliveryContext"), "to")),
               "http:alice");
    EXPECT_STR(json_string_value(json_object_get(e, "lastChannel")), "http");
    EXPECT_STR(json_string_value(json_object_get(e, "status")), "done");
    EXPECT(json_is_true(json_object_get(e, "systemSent")));
    json_decref(e);
    world_stop(&w);
}

TEST(gateway_run_replayed_message_keeps_its_sender)
{
    g_prejournal = "{\"j\":\"in\",\"id\":7,\"ts\":1800000000000,\"msg\":{\"channel\":\"http\","
                   "\"peer\":\"ivy\",\"sender\":\"77\",\"senderName\":\"Ivy \\\"Poison\\\" Ng\","
                   "\"senderUsername\":\"ivy_ng\",\"timestamp\":1799999000000,\"messageId\":\"i1\","
                   "\"text\":\"first\"}}\n";
    world w;
    t_say_later = "Recovered.";
    bool ok = world_start(&w, "{\"agents\":{\"defaults\":{\"envelopeTimezone\":\"utc\"}}}");
    g_prejournal = NULL;
    if (!ok) return;
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 1);
    char *sent = t_request_text(w.fs, 0);
    EXPECT_CONTAINS(sent, "  \"sender\": \"Ivy \\\"Poison\\\" Ng\",\n"
                          "  \"timestamp\": \"Fri 2027-01-15T07:43Z\"\n}");
    EXPECT_CONTAINS(sent, "  \"label\": \"Ivy \\\"Poison\\\" Ng (77)\",\n  \"id\": \"77\",\n"
                          "  \"name\": \"Ivy \\\"Poison\\\" Ng\",\n  \"username\": \"ivy_ng\"");
    free(sent);
    world_stop(&w);
}

TEST(gateway_run_block_streaming_and_silent_replies)
{
    world w;
    if (!world_start(&w, "{\"agents\":{\"defaults\":{\"blockStreamingDefault\":\"on\","
                         "\"blockStreamingBreak\":\"text_end\"}},"
                         "\"messages\":{\"responsePrefix\":\"[bot]\"}}"))
        return;
    buf reply = BUF_INIT;
    for (int i = 0; i < 30; i++)
        cm_buf_printf(&reply, "Paragraph %02d has a few words in it to fill the block.\n\n", i);
    fake_push_chat_text(w.fs, reply.data, 50);
    fake_push_chat_text(w.fs, "NO_REPLY", 50);
    EXPECT_INT(post_text(&w, "hank", "h1", "tell me a lot"), 202);
    EXPECT(settle(&w));
    EXPECT_INT(post_text(&w, "hank", "h2", "say nothing"), 202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 2);
    json_t *r = t_replies(w.addr, "hank");
    EXPECT(json_array_size(r) >= 2); /* streamed in blocks */
    size_t i;
    json_t *e;
    buf all = BUF_INIT;
    json_array_foreach(r, i, e)
    {
        const char *t = json_string_value(json_object_get(e, "text"));
        EXPECT(strlen(t) <= GW_CHUNK_MAX_DEFAULT);
        EXPECT(!strstr(t, "NO_REPLY")); /* the silent answer never left */
        cm_buf_adds(&all, t);
    }
    EXPECT(!strncmp(json_string_value(json_object_get(json_array_get(r, 0), "text")),
                    "[bot] Paragraph 00", 18));
    EXPECT_CONTAINS(all.data, "Paragraph 29");
    cm_buf_release(&all);
    cm_buf_release(&reply);
    json_decref(r);
    world_stop(&w);
}

TEST(gateway_run_recovery_answers_or_fails_visibly)
{
    /* Two messages a crashed gateway accepted: one never run (it runs now),
     * one that already took two runs (answered as failed, not run again). */
    g_prejournal =
        "{\"j\":\"in\",\"id\":7,\"ts\":1800000000000,\"msg\":{\"channel\":\"http\","
        "\"peer\":\"ivy\",\"sender\":\"ivy\",\"messageId\":\"i1\",\"text\":\"first\"}}\n"
        "{\"j\":\"in\",\"id\":8,\"ts\":1800000000000,\"msg\":{\"channel\":\"http\","
        "\"peer\":\"jay\",\"sender\":\"jay\",\"messageId\":\"j1\",\"text\":\"crashes us\"}}\n"
        "{\"j\":\"run\",\"id\":8}\n{\"j\":\"run\",\"id\":8}\n"
        "{\"j\":\"in\",\"id\":9,\"ts\":1800000000000,\"msg\":{\"channel\":\"http\","
        "\"peer\":\"kim\",\"sender\":\"kim\",\"messageId\":\"k1\",\"text\":\"done\"}}\n"
        "{\"j\":\"done\",\"id\":9,\"status\":\"answered\"}\n"
        "{\"j\":\"in\",\"id\":10,\"ts\":18000"; /* torn: never acknowledged */
    world w;
    t_say_later = "Recovered first.";
    bool ok = world_start(&w, NULL);
    g_prejournal = NULL;
    if (!ok) return;
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 1);
    json_t *r = t_replies(w.addr, "ivy");
    EXPECT_INT(json_array_size(r), 1);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(r, 0), "text")),
               "Recovered first.");
    json_decref(r);
    r = t_replies(w.addr, "jay");
    EXPECT_INT(json_array_size(r), 1);
    EXPECT_CONTAINS(json_string_value(json_object_get(json_array_get(r, 0), "text")),
                    "was not answered");
    json_decref(r);
    r = t_replies(w.addr, "kim");
    EXPECT_INT(json_array_size(r), 0);
    json_decref(r);
    /* the answered one is still a duplicate for 20 minutes */
    EXPECT_INT(post_text(&w, "kim", "k1", "done"), 202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 1);
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "recovered")), 2);
    EXPECT_INT(json_integer_value(json_object_get(st, "duplicates")), 1);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    /* the ids go on after the highest whole entry (the torn one never counted) */
    EXPECT_INT(post_text(&w, "kim", "k2", "new"), 202);
    buf j = BUF_INIT;
    cm_fs_read_file(path_in(w.state, "gateway/journal.jsonl"), 1 << 20, &j, NULL, 0);
    EXPECT_CONTAINS(j.data, "\"id\":10,\"ts\"");
    cm_buf_release(&j);
    world_stop(&w);
}

/* Telegram end to end: a group message mentioning the bot, redelivered
 * under a second update id, runs the model once; the long answer with a
 * code fence goes back in sendMessage pieces of at most 4096 characters,
 * each with its fences balanced, to the group, and together they carry the
 * whole answer. */
TEST(gateway_run_telegram_group_end_to_end)
{
    tgfake f;
    tgfake_init(&f);
    char url[64];
    fake_server *tg = fake_start(4, url);
    fake_handler(tg, tgfake_handler, &f);
    char extra[512];
    snprintf(extra, sizeof extra,
             "{\"channels\":{\"telegram\":{\"botToken\":\"%s\",\"apiRoot\":\"%s/\","
             "\"groupPolicy\":\"open\",\"timeoutSeconds\":5}}}",
             TGFAKE_TOKEN, url);
    g_telegram = true;
    world w;
    bool up = world_start(&w, extra);
    g_telegram = false;
    if (up) {
        buf ans = BUF_INIT;
        cm_buf_adds(&ans, "Here it is:\n```c\n");
        for (int i = 0; i < 300; i++)
            cm_buf_printf(&ans, "int value_%03d = %d; /* a line of the listing */\n", i, i);
        cm_buf_adds(&ans, "```\nThat is all.");
        fake_push_chat_text(w.fs, ans.data, 50);
        static const char up_fmt[] =
            "{\"update_id\":%d,\"message\":{\"message_id\":10,\"from\":{\"id\":43,"
            "\"first_name\":\"Tom\",\"last_name\":\"Lee\",\"username\":\"tlee\"},"
            "\"date\":1800000000,\"chat\":{\"id\":-100,\"type\":\"group\",\"title\":\"Devs\"},"
            "\"text\":\"@clawbot show me the code\","
            "\"entities\":[{\"type\":\"mention\",\"offset\":0,\"length\":8}]}}";
        char u[512];
        snprintf(u, sizeof u, up_fmt, 1);
        tgfake_add_update(&f, u);
        snprintf(u, sizeof u, up_fmt, 2); /* redelivered */
        tgfake_add_update(&f, u);
        json_int_t dups = 0;
        for (int i = 0; i < 1000 && dups < 1; i++) {
            cm_gw_runtime_tick(w.rt);
            json_t *st = cm_gw_runtime_status(w.rt);
            dups = json_integer_value(json_object_get(st, "duplicates"));
            json_decref(st);
            if (dups < 1) usleep(10000);
        }
        EXPECT_INT((int)dups, 1);
        EXPECT(settle(&w));
        EXPECT_INT(fake_count(w.fs), 1);
        char *sent = t_request_text(w.fs, 0); /* who wrote it, from the update */
        EXPECT_CONTAINS(sent, "  \"message_id\": \"10\",\n  \"sender_id\": \"43\",\n"
                              "  \"conversation_label\": \"Devs id:-100\",\n"
                              "  \"sender\": \"Tom Lee\",\n");
        EXPECT_CONTAINS(sent, "  \"group_subject\": \"Devs\",\n");
        EXPECT_CONTAINS(sent, "  \"label\": \"Tom Lee (43)\",\n  \"id\": \"43\",\n"
                              "  \"name\": \"Tom Lee\",\n  \"username\": \"tlee\"\n}");
        EXPECT_CONTAINS(sent, "\"chat_id\": \"telegram:-100\"");
        free(sent);
        /* the group's entry, as 2026.3.22's Telegram leaves it */
        json_t *e = t_disk_entry(&w, "agent:main:telegram:group:-100");
        EXPECT_STR(json_string_value(json_object_get(e, "channel")), "telegram");
        EXPECT_STR(json_string_value(json_object_get(e, "groupId")), "-100");
        EXPECT_STR(json_string_value(json_object_get(e, "subject")), "Devs");
        EXPECT_STR(json_string_value(json_object_get(e, "displayName")), "telegram:g-devs");
        json_t *o = json_object_get(e, "origin");
        EXPECT_STR(json_string_value(json_object_get(o, "label")), "Devs id:-100");
        EXPECT_STR(json_string_value(json_object_get(o, "from")), "telegram:group:-100");
        EXPECT_STR(json_string_value(json_object_get(o, "to")), "telegram:-100");
        EXPECT_STR(json_string_value(json_object_get(e, "lastTo")), "telegram:-100");
        json_decref(e);
        pthread_mutex_lock(&f.mu);
        size_t n = json_array_size(f.sent), i;
        json_t *m;
        buf all = BUF_INIT;
        EXPECT(n >= 3); /* ~15,000 characters */
        json_array_foreach(f.sent, i, m)
        {
            const char *t = json_string_value(json_object_get(m, "text"));
            EXPECT(t != NULL);
            if (!t) continue;
            EXPECT(strlen(t) <= 4096);
            int fences = 0;
            for (const char *p = t; (p = strstr(p, "```")) != NULL; p += 3)
                fences++;
            EXPECT_INT(fences % 2, 0);
            json_t *chat = json_object_get(m, "chat_id");
            EXPECT(json_is_integer(chat)
                       ? json_integer_value(chat) == -100
                       : json_is_string(chat) && !strcmp(json_string_value(chat), "-100"));
            cm_buf_adds(&all, t);
        }
        pthread_mutex_unlock(&f.mu);
        EXPECT_CONTAINS(all.data, "int value_000 = 0;");
        EXPECT_CONTAINS(all.data, "int value_299 = 299;");
        EXPECT_CONTAINS(all.data, "That is all.");
        cm_buf_release(&all);
        cm_buf_release(&ans);
        world_stop(&w);
    }
    atomic_store(&f.stop, 1);
    fake_stop(tg);
    tgfake_release(&f);
}

/* The real gateway behind the Telegram channel: one answer holds a good
 * update, a poison one (a chat id that is a string) and another good one.
 * Both good ones are answered, the poison one reaches no model and is
 * skipped past, and the offset passes all three. */
TEST(gateway_run_telegram_poison_update_between_good_ones)
{
    tgfake f;
    tgfake_init(&f);
    char url[64];
    fake_server *tg = fake_start(4, url);
    fake_handler(tg, tgfake_handler, &f);
    char extra[512];
    snprintf(extra, sizeof extra,
             "{\"channels\":{\"telegram\":{\"botToken\":\"%s\",\"apiRoot\":\"%s/\","
             "\"groupPolicy\":\"open\",\"timeoutSeconds\":5}}}",
             TGFAKE_TOKEN, url);
    g_telegram = true;
    world w;
    bool up = world_start(&w, extra);
    g_telegram = false;
    if (up) {
        fake_push_chat_text(w.fs, "First answer.", 50);
        fake_push_chat_text(w.fs, "Second answer.", 50);
        static const char fmt[] =
            "{\"update_id\":%d,\"message\":{\"message_id\":%d,\"from\":{\"id\":43,"
            "\"first_name\":\"Tom\"},\"chat\":{\"id\":%s,\"type\":\"group\",\"title\":\"Devs\"},"
            "\"text\":\"@clawbot question %d\"}}";
        char u[512];
        snprintf(u, sizeof u, fmt, 1, 10, "-100", 1);
        tgfake_add_update(&f, u);
        snprintf(u, sizeof u, fmt, 2, 11, "\"-300\"", 2);
        tgfake_add_update(&f, u);
        snprintf(u, sizeof u, fmt, 3, 12, "-200", 3);
        tgfake_add_update(&f, u);
        size_t n = 0;
        /* by the clock: a loaded sanitizer build takes a while */
        for (int64_t t0 = cm_now_ms(); n < 2 && cm_now_ms() - t0 < 8000;) {
            cm_gw_runtime_tick(w.rt);
            EXPECT(settle(&w));
            pthread_mutex_lock(&f.mu);
            n = json_array_size(f.sent);
            pthread_mutex_unlock(&f.mu);
            if (n < 2) usleep(10000);
        }
        EXPECT_INT(fake_count(w.fs), 2);
        char *q1 = t_request_text(w.fs, 0), *q2 = t_request_text(w.fs, 1);
        EXPECT(strstr(q1, "question 1") || strstr(q2, "question 1"));
        EXPECT(strstr(q1, "question 3") || strstr(q2, "question 3"));
        EXPECT(!strstr(q1, "question 2") && !strstr(q2, "question 2"));
        free(q1);
        free(q2);
        pthread_mutex_lock(&f.mu);
        EXPECT_INT((int)json_array_size(f.sent), 2);
        /* each group got one answer; none went to the poison's "-300" */
        bool to100 = false, to200 = false;
        size_t k;
        json_t *m;
        json_array_foreach(f.sent, k, m)
        {
            json_t *c = json_object_get(m, "chat_id");
            const char *cs = json_string_value(c);
            long long id =
                json_is_integer(c) ? (long long)json_integer_value(c) : (cs ? atoll(cs) : 0);
            to100 |= id == -100;
            to200 |= id == -200;
        }
        EXPECT(to100 && to200);
        pthread_mutex_unlock(&f.mu);
        json_t *st = cm_gw_runtime_status(w.rt);
        EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
        json_decref(st);
        buf b = BUF_INIT;
        char e[256];
        EXPECT_INT(cm_fs_read_file(path_in(w.state, "telegram/update-offset-default.json"), 4096,
                                   &b, e, sizeof e),
                   CM_OK);
        json_t *d = json_loads(b.data, 0, NULL);
        EXPECT_INT((int)json_integer_value(json_object_get(d, "lastUpdateId")), 3);
        json_decref(d);
        cm_buf_release(&b);
        world_stop(&w);
    }
    atomic_store(&f.stop, 1);
    fake_stop(tg);
    tgfake_release(&f);
}
