/*
 * test_gateway_run_tools.c — the running gateway (gw_run_world.c) and what
 * its agents may reach: the Telegram last error in status, exec and message
 * only for trusted senders, sessions_send into another session (and into its
 * own, which times out at once), and the bounded replies the HTTP channel keeps.
 */
#include <signal.h>

#include "../src/base/fs.h"
#include "../src/tools/exec.h"
#include "gw_run_world.h"

/* The Telegram lastError of a `gateway status --json` text, or NULL. */
static char *tg_last_error(const char *status)
{
    json_t *o = json_loads(status ? status : "", 0, NULL);
    size_t i;
    json_t *c;
    char *why = NULL;
    json_array_foreach(json_object_get(o, "channels"), i, c)
    {
        const char *e = json_string_value(json_object_get(c, "lastError"));
        if (e && *e && !why) why = cm_strdup(e);
    }
    json_decref(o);
    return why;
}

TEST(gateway_run_status_shows_the_telegram_last_error)
{
    char *dir = tmp_dir();
    write_file(dir, "state/quantumclaw.json",
               "{\"gateway\":{\"auth\":{\"token\":\"" TOKEN "\"}},"
               "\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\","
               "\"memorySearch\":{\"provider\":\"none\"}}},"
               "\"channels\":{\"http\":{\"dmPolicy\":\"open\",\"allowFrom\":[\"*\"]},"
               "\"telegram\":{\"botToken\":\"424242:sekret-tg-token\","
               "\"apiRoot\":\"http://127.0.0.1:1/\",\"timeoutSeconds\":1}}}");
    write_file(dir, "ws/MEMORY.md", "# Facts\n");
    char *state = cm_strdup(path_in(dir, "state")), *ws = cm_strdup(path_in(dir, "ws"));
    const char *args[] = {"--state-dir", state,      "--workspace", ws,
                          "gateway",     "--listen", "127.0.0.1:0", NULL};
    proc p;
    proc_start(&p, NULL, args);
    char addr[64] = "";
    EXPECT(wait_line(&p, addr, sizeof addr));
    char *why = NULL;
    for (int i = 0; i < 150 && !why; i++) { /* the Bot API cannot be reached */
        run_result s = run_clawmem(
            NULL, (const char *const[]){"--state-dir", state, "gateway", "status", "--json", NULL});
        why = tg_last_error(s.out);
        EXPECT(!strstr(s.out ? s.out : "", "sekret-tg-token"));
        run_result_release(&s);
        if (!why) usleep(100000);
    }
    EXPECT(why != NULL);
    run_result s =
        run_clawmem(NULL, (const char *const[]){"--state-dir", state, "gateway", "status", NULL});
    EXPECT_CONTAINS(s.out, "telegram/default last error: ");
    EXPECT(!strstr(s.out ? s.out : "", "sekret-tg-token"));
    run_result_release(&s);
    EXPECT_INT(proc_stop(&p, SIGTERM, 20000), 0);
    free(why);
    free(state);
    free(ws);
}

/* exec and message through the gateway: a sender let in by "*" is not
 * trusted (the model is never offered exec, a call is refused, message only
 * answers the conversation itself); the sender allowFrom names is. */
TEST(gateway_run_exec_and_message_only_for_trusted_senders)
{
    world w;
    if (!world_start(&w, "{\"session\":{\"dmScope\":\"per-peer\"},\"tools\":{\"exec\":{\"host\":"
                         "\"gateway\",\"security\":\"full\"}},\"channels\":{\"http\":{"
                         "\"allowFrom\":[\"*\",\"owner\"]}}}"))
        return;
    /* the stranger */
    fake_push_chat_call(w.fs, "c1", "exec", "{\"command\":\"echo PWNED > pwned.txt\"}");
    fake_push_chat_call(w.fs, "c2", "message",
                        "{\"action\":\"send\",\"target\":\"owner\",\"message\":\"hi boss\"}");
    fake_push_chat_text(w.fs, "ok", 10);
    EXPECT_INT(post_text(&w, "stranger", "m1", "run it"), 202);
    EXPECT(settle(&w));
    EXPECT(access(path_in(w.dir, "ws/pwned.txt"), F_OK) != 0);
    const fake_request *q = fake_get(w.fs, 0);
    EXPECT(q && !strstr(q->body, "\"name\":\"exec\""));
    EXPECT(q && strstr(q->body, "\"name\":\"message\""));
    char *t1 = t_request_text(w.fs, 1), *t2 = t_request_text(w.fs, 2);
    EXPECT_CONTAINS(t1, "Tool exec not found");
    EXPECT_CONTAINS(t2, "this sender may only send to the current conversation");
    free(t1);
    free(t2);
    /* the owner: exec runs in the workspace; message reaches only named targets */
    fake_push_chat_call(w.fs, "c3", "exec", "{\"command\":\"echo PWNED > pwned.txt\"}");
    fake_push_chat_call(w.fs, "c4", "message",
                        "{\"action\":\"send\",\"target\":\"stranger\",\"message\":\"psst\"}");
    fake_push_chat_call(w.fs, "c5", "message",
                        "{\"action\":\"send\",\"message\":\"a note from the tool\"}");
    fake_push_chat_text(w.fs, "done", 10);
    EXPECT_INT(post_text(&w, "owner", "m2", "run it"), 202);
    EXPECT(settle(&w));
    EXPECT(access(path_in(w.dir, "ws/pwned.txt"), F_OK) == 0);
    q = fake_get(w.fs, 3);
    EXPECT(q && strstr(q->body, "\"name\":\"exec\""));
    char *t5 = t_request_text(w.fs, 5);
    EXPECT_CONTAINS(t5, "stranger is not an allowed target on http");
    free(t5);
    json_t *rep = t_replies(w.addr, "owner");
    char *s = json_dumps(rep, JSON_COMPACT);
    EXPECT_CONTAINS(s, "a note from the tool");
    free(s);
    json_decref(rep);
    rep = t_replies(w.addr, "stranger");
    s = json_dumps(rep, JSON_COMPACT);
    EXPECT(s && !strstr(s, "psst") && !strstr(s, "hi boss"));
    free(s);
    json_decref(rep);
    world_stop(&w);
    cm_exec_jobs_shutdown();
}

/* sessions_send: a trusted sender's turn puts a message into another
 * session of the agent through the gateway queue; that session's turn runs
 * it untrusted (no exec) and answers nowhere; an untrusted sender is never
 * offered the tool. */
TEST(gateway_run_sessions_send_queues_into_another_session)
{
    world w;
    if (!world_start(&w, "{\"session\":{\"dmScope\":\"per-peer\"},\"tools\":{\"sessions\":{"
                         "\"visibility\":\"agent\"},\"exec\":{\"host\":\"gateway\",\"security\":"
                         "\"full\"}},\"channels\":{\"http\":{\"allowFrom\":[\"*\",\"owner\"]}}}"))
        return;
    fake_push_chat_call(w.fs, "c1", "sessions_send",
                        "{\"sessionKey\":\"main\",\"message\":\"from the stranger\"}");
    fake_push_chat_text(w.fs, "hi", 10);
    EXPECT_INT(post_text(&w, "stranger", "m1", "hello"), 202);
    EXPECT(settle(&w));
    const fake_request *q = fake_get(w.fs, 0);
    EXPECT(q && !strstr(q->body, "\"name\":\"sessions_send\""));
    char *t1 = t_request_text(w.fs, 1);
    EXPECT_CONTAINS(t1, "Tool sessions_send not found");
    free(t1);
    /* the stranger's session key, from the store */
    buf sj = BUF_INIT;
    char err[256];
    EXPECT_INT(cm_fs_read_file(path_in(w.dir, "state/agents/main/sessions/sessions.json"), 1 << 20,
                               &sj, err, sizeof err),
               CM_OK);
    json_t *store = json_loads(sj.data ? sj.data : "", 0, NULL);
    const char *key = NULL, *k;
    json_t *e;
    json_object_foreach(store, k, e) if (strstr(k, "stranger")) key = k;
    EXPECT(key != NULL);
    char args[512];
    snprintf(args, sizeof args, "{\"sessionKey\":\"%s\",\"message\":\"from the owner\"}",
             key ? key : "x");
    /* the owner's run waits (timeoutSeconds 30 by default) for the
     * stranger's session's answer, run by the other worker */
    fake_push_chat_call(w.fs, "c2", "sessions_send", args);
    fake_push_chat_text(w.fs, "the stranger says thanks", 10);
    fake_push_chat_text(w.fs, "done", 10);
    EXPECT_INT(post_text(&w, "owner", "m2", "tell the stranger"), 202);
    EXPECT(settle(&w));
    EXPECT(settle(&w));
    /* the owner's call, the stranger's session's turn, then the owner's
     * again with the answer */
    EXPECT_INT(fake_count(w.fs), 5);
    bool accepted = false, ran = false;
    for (int i = 2; i < fake_count(w.fs); i++) {
        char *t = t_request_text(w.fs, i);
        q = fake_get(w.fs, i);
        if (strstr(t, "\"status\": \"ok\"") && strstr(t, "the stranger says thanks"))
            accepted = true;
        if (strstr(t, "chat_id\": \"internal:") && strstr(t, "from the owner")) {
            ran = true;
            EXPECT_CONTAINS(t, "hello"); /* the stranger's session's history */
            EXPECT(q && !strstr(q->body, "\"name\":\"exec\"")); /* never trusted */
        }
        free(t);
    }
    EXPECT(accepted);
    EXPECT(ran);
    json_decref(store);
    cm_buf_release(&sj);
    world_stop(&w);
}

TEST(gateway_run_sessions_send_to_its_own_session_times_out_at_once)
{
    world w;
    if (!world_start(&w, "{\"session\":{\"dmScope\":\"per-peer\"},\"channels\":{\"http\":{"
                         "\"allowFrom\":[\"*\",\"owner\"]}}}"))
        return;
    /* the message can only run after the caller's turn: no 30 s wait for it */
    fake_push_chat_call(w.fs, "c1", "sessions_send",
                        "{\"sessionKey\":\"current\",\"message\":\"note to self\"}");
    fake_push_chat_text(w.fs, "queued it", 10);
    fake_push_chat_text(w.fs, "noted", 10);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    EXPECT_INT(post_text(&w, "owner", "m1", "remind me"), 202);
    EXPECT(settle(&w));
    t_advance(10000); /* the queued note's followup delay */
    EXPECT(settle(&w));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    EXPECT(t1.tv_sec - t0.tv_sec < 25);
    EXPECT_INT(fake_count(w.fs), 3); /* the call, the answer, then the note's own turn */
    char *t = t_request_text(w.fs, 1);
    EXPECT_CONTAINS(t, "\"status\": \"timeout\"");
    free(t);
    world_stop(&w);
}

static cm_rc t_no_sink(void *ctx, const gw_msg *m)
{
    (void)ctx;
    (void)m;
    return CM_OK;
}

/* The HTTP channel's replies kept for late readers are bounded in all
 * (GW_HTTP_KEEP_BYTES, the oldest of every conversation first) and per
 * conversation (GW_HTTP_KEEP), not by the conversations' number times
 * their length: 1,000 conversations of 10 one-kilobyte replies (10 MB kept
 * by a ring of 256 per conversation) stay under the budget, and each
 * conversation's latest replies are still there, numbered as before. */
TEST(gateway_http_replies_kept_are_bounded)
{
    json_t *cfg = json_pack("{s:{s:{s:s}}}", "gateway", "auth", "token", TOKEN);
    gw_channel *ch = NULL;
    char err[256], peer[32], text[1024];
    EXPECT_INT(cm_gw_http_open(cfg, "127.0.0.1:0", &ch, err, sizeof err), CM_OK);
    if (!ch) return;
    EXPECT_INT(ch->ops->start(ch, t_no_sink, NULL, err, sizeof err), CM_OK);
    memset(text, 'x', sizeof text - 1);
    text[sizeof text - 1] = 0;
    for (int round = 0; round < 10; round++)
        for (int p = 0; p < 1000; p++) {
            snprintf(peer, sizeof peer, "p%d", p);
            gw_outbound o = {NULL, peer, NULL, NULL, text, false};
            EXPECT_INT(ch->ops->send(ch, &o, err, sizeof err), CM_OK);
        }
    for (int i = 0; i < GW_HTTP_KEEP + 10; i++) { /* one long conversation */
        gw_outbound o = {NULL, "long", NULL, NULL, "short", false};
        EXPECT_INT(ch->ops->send(ch, &o, err, sizeof err), CM_OK);
    }
    size_t convs, replies, bytes;
    cm_gw_http_kept(ch, &convs, &replies, &bytes);
    EXPECT_INT(convs, 1001);
    EXPECT(bytes <= GW_HTTP_KEEP_BYTES && bytes > GW_HTTP_KEEP_BYTES - 4096);
    EXPECT(replies < 1000 * 10);
    const char *addr = cm_gw_http_address(ch);
    json_t *a = t_replies(addr, "p999"); /* the newest conversation keeps its latest */
    size_t n = json_array_size(a);
    EXPECT(n >= 1);
    EXPECT_INT(json_integer_value(json_object_get(json_array_get(a, n - 1), "seq")), 10);
    json_decref(a);
    a = t_replies(addr, "long"); /* GW_HTTP_KEEP a conversation, its newest */
    EXPECT_INT(json_array_size(a), GW_HTTP_KEEP);
    EXPECT_INT(json_integer_value(json_object_get(json_array_get(a, 0), "seq")), 11);
    json_decref(a);
    ch->ops->close(ch);
    json_decref(cfg);
}
