/*
 * test_telegram_feel.c — the signs of life on Telegram, against the fake Bot
 * API (fake_telegram.c) with a scripted agent run and a fake clock: the
 * preview's pacing (preview.c) and the config it follows (feel.c); then the
 * running gateway: typing sent when a turn starts, refreshed and stopped;
 * the preview sent once 30 characters exist, edited at most once a second
 * (a 429's retry_after waited out), edited into the final reply, deleted
 * when the reply goes out in pieces, never edited after the final; the ack
 * reaction on a group mention only; /new's notice and greeting turn;
 * /new@AnotherBot left alone.
 */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "../src/gateway/channels/telegram.h"
#include "../src/gateway/channels/feel.h"
#include "../src/gateway/channels/preview.h"
#include "../src/gateway/core/runtime.h"
#include "fake_telegram.h"
#include "fakeserver.h"
#include "test.h"

/* The typed snapshot of root (NULL when root is rejected). */
static cm_rtcfg *rtc(const json_t *root)
{
    cm_rtcfg *c = NULL;
    char err[256];
    return cm_rtcfg_from_json(root, &c, err, sizeof err) ? NULL : c;
}

#define T0 1800000000000LL

/* ---- the pure parts ------------------------------------------------------- */

TEST(tg_feel_preview_pacing)
{
    gw_preview p;
    cm_gw_preview_init(&p, 1000, 30, 100);
    cm_gw_preview_add(&p, "Short so far ", 13);
    EXPECT_INT(cm_gw_preview_next(&p, 0), GW_PREVIEW_NONE); /* under 30 characters */
    cm_gw_preview_add(&p, "but now it is long enough.   ", 29);
    EXPECT_INT(cm_gw_preview_next(&p, 0), GW_PREVIEW_SEND);
    EXPECT_STR(cm_gw_preview_text(&p), "Short so far but now it is long enough.");
    cm_gw_preview_done(&p, "901", 0);
    EXPECT_STR(p.id, "901");
    EXPECT_INT(cm_gw_preview_next(&p, 500), GW_PREVIEW_NONE); /* unchanged */
    cm_gw_preview_add(&p, " More", 5);
    EXPECT_INT(cm_gw_preview_next(&p, 999), GW_PREVIEW_NONE); /* throttled */
    EXPECT_INT(cm_gw_preview_next(&p, 1000), GW_PREVIEW_EDIT);
    /* the blanks held back before are part of the text now */
    EXPECT_STR(cm_gw_preview_text(&p), "Short so far but now it is long enough.    More");
    cm_gw_preview_failed(&p, 5000, 1000); /* 429 retry_after 5 s */
    EXPECT_INT(cm_gw_preview_next(&p, 5999), GW_PREVIEW_NONE);
    EXPECT_INT(cm_gw_preview_next(&p, 6000), GW_PREVIEW_EDIT);
    cm_gw_preview_done(&p, NULL, 6000);
    char big[128];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    cm_gw_preview_add(&p, big, strlen(big));
    EXPECT_INT(cm_gw_preview_next(&p, 9000), GW_PREVIEW_NONE); /* outgrown: stopped */
    EXPECT(p.stopped);
    cm_gw_preview_release(&p);
    cm_gw_preview_init(&p, 1000, 30, 4096);
    cm_gw_preview_add(&p, "a failure that is not a rate limit.", 35);
    cm_gw_preview_failed(&p, -1, 0);
    EXPECT_INT(cm_gw_preview_next(&p, 100000), GW_PREVIEW_NONE);
    cm_gw_preview_release(&p);
}

TEST(tg_feel_config)
{
    cm_rtcfg *c = NULL;
    EXPECT_INT(cm_rtcfg_from_json(NULL, &c, NULL, 0), CM_OK);
    int64_t iv = 0;
    EXPECT_INT(cm_gw_typing_mode(c, false, false, &iv), GW_TYPING_INSTANT);
    EXPECT_INT((int)iv, 6000);
    EXPECT_INT(cm_gw_typing_mode(c, true, false, NULL), GW_TYPING_MESSAGE);
    EXPECT_INT(cm_gw_typing_mode(c, true, true, NULL), GW_TYPING_INSTANT);
    EXPECT(cm_gw_preview_enabled(c, "telegram", "default"));
    EXPECT_STR(cm_gw_ack_reaction(c, "main", "telegram", "default", "-5", true, true),
               "\xf0\x9f\x91\x80");
    EXPECT(!cm_gw_ack_reaction(c, "main", "telegram", "default", "-5", true, false));
    EXPECT(!cm_gw_ack_reaction(c, "main", "telegram", "default", "7", false, false));
    cm_rtcfg_unref(c);
    json_t *cj = json_loads(
        "{\"agents\":{\"defaults\":{\"typingMode\":\"never\",\"typingIntervalSeconds\":"
        "4,\"model\":{\"primary\":\"openai/gpt-x\"}},\"list\":[{\"id\":\"main\","
        "\"identity\":{\"emoji\":\"\xf0\x9f\xa6\x9e\"}}]},\"channels\":{\"telegram\":{"
        "\"streaming\":\"progress\",\"groups\":{\"-5\":{\"requireMention\":false}},"
        "\"accounts\":{\"b\":{\"streamMode\":\"off\",\"streaming\":false,"
        "\"ackReaction\":\"\"}}}},\"messages\":{\"ackReactionScope\":\"group-mentions\"}}",
        0, NULL);
    c = rtc(cj);
    json_decref(cj);
    EXPECT(c);
    EXPECT_INT(cm_gw_typing_mode(c, false, false, &iv), GW_TYPING_NEVER);
    EXPECT_INT((int)iv, 4000);
    EXPECT(cm_gw_preview_enabled(c, "telegram", "default")); /* progress is partial */
    EXPECT(!cm_gw_preview_enabled(c, "telegram", "b"));
    /* requireMention off: no ack even when mentioned; another group: the agent's emoji */
    EXPECT(!cm_gw_ack_reaction(c, "main", "telegram", "default", "-5", true, true));
    EXPECT_STR(cm_gw_ack_reaction(c, "main", "telegram", "default", "-6", true, true),
               "\xf0\x9f\xa6\x9e");
    EXPECT(!cm_gw_ack_reaction(c, "main", "telegram", "b", "-6", true, true)); /* "" disables */
    buf b = BUF_INIT;
    EXPECT_INT(cm_gw_agent_model(&b, c, "main"), CM_OK);
    EXPECT_STR(b.data, "openai/gpt-x");
    cm_gw_new_session_notice(&b, "openai/gpt-x");
    EXPECT_STR(b.data, "\xe2\x9c\x85 New session started \xc2\xb7 model: openai/gpt-x");
    cm_gw_greeting_prompt(&b, T0);
    EXPECT_CONTAINS(b.data, "/new");
    EXPECT_CONTAINS(b.data, "Current time: Friday, 2027-01-15");
    cm_buf_release(&b);
    cm_rtcfg_unref(c);
}

/* ---- the running gateway with a scripted run ------------------------------ */

static int64_t g_now = T0;
static int64_t t_clock(void *ctx)
{
    (void)ctx;
    return __atomic_load_n(&g_now, __ATOMIC_SEQ_CST);
}
static void t_advance(int64_t ms)
{
    __atomic_add_fetch(&g_now, ms, __ATOMIC_SEQ_CST);
}

typedef struct step {
    const char *delta;
    int64_t advance_ms;
    int wait_typing; /* then wait (real time, bounded) for this many sendChatAction */
} step;

typedef struct script {
    const step *steps;
    const char *final;
    char prompts[4][4096]; /* the prompts the runs got */
    int runs;
    tgfake *f;
    int calls_at_final; /* the fake's call count when the run returned */
} script;

static script g_script;

static bool wait_count(tgfake *f, const char *method, int n)
{
    for (int i = 0; i < 500 && tgfake_count(f, method) < n; i++)
        usleep(10000);
    return tgfake_count(f, method) >= n;
}

static cm_rc t_run(void *ctx, const gw_run_req *rq, gw_run_res *out, char *err, size_t errlen)
{
    script *s = ctx;
    (void)err;
    (void)errlen;
    if (s->runs < 4) snprintf(s->prompts[s->runs], sizeof s->prompts[0], "%s", rq->prompt);
    s->runs++;
    for (const step *p = s->steps; p && p->delta; p++) {
        if (*p->delta) rq->on_delta(rq->delta_ctx, p->delta, strlen(p->delta));
        t_advance(p->advance_ms);
        if (p->wait_typing) wait_count(s->f, "sendChatAction", p->wait_typing);
    }
    memset(out, 0, sizeof *out);
    out->text = cm_strdup(s->final ? s->final : "");
    return CM_OK;
}

typedef struct tworld {
    tgfake f;
    fake_server *srv;
    char url[64];
    char *dir;
    json_t *cfg;
    gw_runtime *rt;
    gw_channel *tg;
} tworld;

static bool tw_start(tworld *w, const char *extra)
{
    memset(w, 0, sizeof *w);
    g_now = T0;
    tgfake_init(&w->f);
    w->srv = fake_start(4, w->url);
    fake_handler(w->srv, tgfake_handler, &w->f);
    w->dir = tmp_dir();
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\"}},"
             "\"channels\":{\"telegram\":{\"botToken\":\"%s\",\"apiRoot\":\"%s\","
             "\"dmPolicy\":\"open\",\"allowFrom\":[\"*\"],\"groupPolicy\":\"open\","
             "\"timeoutSeconds\":5}},\"messages\":{\"inbound\":{\"debounceMs\":0}}}",
             TGFAKE_TOKEN, w->url);
    w->cfg = json_loads(cfg, 0, NULL);
    json_t *x = extra ? json_loads(extra, 0, NULL) : NULL;
    if (x) json_object_update_recursive(w->cfg, x);
    json_decref(x);
    g_script.f = &w->f;
    char err[512];
    gw_runtime_opts ro = {
        w->cfg, path_in(w->dir, "state"), t_run, &g_script, t_clock, NULL, 2, true, 0, NULL, NULL};
    if (cm_gw_runtime_new(&ro, &w->rt, err, sizeof err) ||
        cm_gw_telegram_open(w->cfg, NULL, path_in(w->dir, "state"), &w->tg, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "gateway: %s", err);
        return false;
    }
    cm_gw_telegram_set_clock(w->tg, t_clock, NULL);
    if (cm_gw_runtime_add_channel(w->rt, w->tg, NULL, NULL, err, sizeof err) ||
        cm_gw_runtime_start(w->rt, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "gateway: %s", err);
        return false;
    }
    return true;
}

static void tw_stop(tworld *w)
{
    cm_gw_runtime_free(w->rt);
    if (w->tg) w->tg->ops->close(w->tg);
    json_decref(w->cfg);
    atomic_store(&w->f.stop, 1);
    fake_stop(w->srv);
    tgfake_release(&w->f);
    memset(&g_script, 0, sizeof g_script);
}

/* Queues a message update and waits (bounded) until its run has answered. */
static bool tw_say(tworld *w, int update_id, const char *chat_json, const char *text,
                   const char *entities)
{
    int runs = g_script.runs;
    char u[1024];
    snprintf(u, sizeof u,
             "{\"update_id\":%d,\"message\":{\"message_id\":%d,\"from\":{\"id\":43},"
             "\"chat\":%s,\"text\":\"%s\"%s%s}}",
             update_id, 10 + update_id, chat_json, text, entities ? ",\"entities\":" : "",
             entities ? entities : "");
    tgfake_add_update(&w->f, u);
    int journaled = 0;
    for (int i = 0; i < 500; i++) {
        cm_gw_runtime_tick(w->rt);
        json_t *st = cm_gw_runtime_status(w->rt);
        journaled = (int)json_integer_value(json_object_get(st, "accepted"));
        json_decref(st);
        if (journaled >= update_id) break;
        usleep(10000);
    }
    (void)runs;
    for (int i = 0; i < 300; i++) { /* 30 s at most: a loaded machine */
        cm_gw_runtime_tick(w->rt);
        if (cm_gw_runtime_wait_idle(w->rt, 100)) return journaled >= update_id;
    }
    return false;
}

/* The i-th call of the fake (new reference) or NULL. */
static json_t *tw_call(tworld *w, size_t i)
{
    pthread_mutex_lock(&w->f.mu);
    json_t *c = json_incref(json_array_get(w->f.calls, i));
    pthread_mutex_unlock(&w->f.mu);
    return c;
}

static const char *c_method(const json_t *c)
{
    return json_string_value(json_object_get(c, "method"));
}

static const char *c_text(const json_t *c)
{
    return json_string_value(json_object_get(json_object_get(c, "params"), "text"));
}

#define DM "{\"id\":77,\"type\":\"private\"}"

TEST(tg_feel_preview_edited_into_the_final_reply)
{
    static const step steps[] = {
        {"Let me think about ", 100, 1},         /* 19 characters: nothing yet; typing shown */
        {"that question for a moment.", 100, 0}, /* 46: the preview is sent */
        {" First,", 100, 0},                     /* within a second: no edit */
        {" the **answer**", 1000, 0},            /* a second on: edited */
        {" is 42.", 0, 0},                       /* throttled; the final edit covers it */
        {NULL, 0, 0}};
    g_script.steps = steps;
    g_script.final = "Let me think about that question for a moment. First, the **answer** is 42.";
    tworld w;
    if (!tw_start(&w, NULL)) return;
    EXPECT(tw_say(&w, 1, DM, "what is it?", NULL));
    EXPECT_INT(tgfake_count(&w.f, "sendMessage"), 1);
    EXPECT_INT(tgfake_count(&w.f, "deleteMessage"), 0);
    /* the calls in order: the preview, one throttled edit, the final edit (typing goes
     * out on a thread of its own, in no fixed order with them) */
    /* typing goes out on the channel's own thread: the first step waited for
     * it while the run was under way (after the run it is off, and a sign
     * not yet sent by then is rightly never sent) */
    EXPECT(tgfake_count(&w.f, "sendChatAction") >= 1);
    const char *want[] = {"sendMessage", "editMessageText", "editMessageText"};
    size_t k = 0;
    int n = tgfake_count(&w.f, NULL);
    for (int i = 0; i < n; i++) {
        json_t *c = tw_call(&w, (size_t)i);
        if (!strcmp(c_method(c), "sendChatAction")) {
            json_decref(c);
            continue;
        }
        if (k < 3 && !strcmp(c_method(c), want[k])) {
            if (k == 0) {
                EXPECT_STR(c_text(c), "Let me think about that question for a moment.");
                EXPECT_INT((int)json_integer_value(
                               json_object_get(json_object_get(c, "params"), "chat_id")),
                           77);
            }
            if (k == 1) EXPECT_CONTAINS(c_text(c), "First, the <b>answer</b>");
            if (k == 2) {
                EXPECT_CONTAINS(c_text(c), "the <b>answer</b> is 42.");
                EXPECT_STR(json_string_value(
                               json_object_get(json_object_get(c, "params"), "parse_mode")),
                           "HTML");
                EXPECT_INT((int)json_integer_value(
                               json_object_get(json_object_get(c, "params"), "message_id")),
                           900);
            }
            k++;
        } else if (k >= 3) {
            /* nothing after the final edit */
            EXPECT(strcmp(c_method(c), "editMessageText") && strcmp(c_method(c), "sendMessage"));
        }
        json_decref(c);
    }
    EXPECT_INT((int)k, 3);
    EXPECT_INT(tgfake_count(&w.f, "editMessageText"), 2);
    tw_stop(&w);
}

TEST(tg_feel_preview_respects_retry_after)
{
    static const step steps[] = {{"A first line that is long enough to show.", 1000, 0},
                                 {" Two.", 1000, 0},  /* edit: 429, retry after 2 s */
                                 {" Three.", 1000, 0}, /* 1 s later: still waiting */
                                 {" Four.", 1000, 0},  /* 2 s later: edited */
                                 {NULL, 0, 0}};
    g_script.steps = steps;
    g_script.final = "A first line that is long enough to show. Two. Three. Four. Done.";
    tworld w;
    if (!tw_start(&w, NULL)) return;
    w.f.edit_429 = 1;
    EXPECT(tw_say(&w, 1, DM, "go", NULL));
    /* the limited edit, the one after the wait, the final */
    EXPECT_INT(tgfake_count(&w.f, "editMessageText"), 3);
    json_t *last = NULL;
    int n = tgfake_count(&w.f, NULL);
    for (int i = n - 1; i >= 0 && !last; i--) {
        json_t *c = tw_call(&w, (size_t)i);
        if (!strcmp(c_method(c), "editMessageText"))
            last = c;
        else
            json_decref(c);
    }
    EXPECT(last && strstr(c_text(last), "Done."));
    json_decref(last);
    tw_stop(&w);
}

TEST(tg_feel_long_reply_deletes_the_preview_after_its_pieces)
{
    static const step steps[] = {{"The start of a very long answer, streamed.", 0, 0},
                                 {NULL, 0, 0}};
    buf big = BUF_INIT;
    cm_buf_adds(&big, "The start of a very long answer, streamed.\n\n");
    for (int i = 0; i < 200; i++)
        cm_buf_printf(&big, "Paragraph %d of the long answer, with some words in it.\n\n", i);
    g_script.steps = steps;
    g_script.final = big.data;
    tworld w;
    if (tw_start(&w, NULL)) {
        EXPECT(tw_say(&w, 1, DM, "tell me everything", NULL));
        int sends = tgfake_count(&w.f, "sendMessage");
        EXPECT(sends >= 4); /* the preview and 3+ pieces */
        EXPECT_INT(tgfake_count(&w.f, "editMessageText"), 0);
        EXPECT_INT(tgfake_count(&w.f, "deleteMessage"), 1);
        /* the delete comes after the last piece and names the preview */
        int n = tgfake_count(&w.f, NULL), last_send = -1, del = -1;
        for (int i = 0; i < n; i++) {
            json_t *c = tw_call(&w, (size_t)i);
            if (!strcmp(c_method(c), "sendMessage")) last_send = i;
            if (!strcmp(c_method(c), "deleteMessage")) {
                del = i;
                EXPECT_INT((int)json_integer_value(
                               json_object_get(json_object_get(c, "params"), "message_id")),
                           900);
            }
            json_decref(c);
        }
        EXPECT(del > last_send);
        tw_stop(&w);
    }
    cm_buf_release(&big);
}

TEST(tg_feel_streaming_off_sends_one_message)
{
    static const step steps[] = {{"A first line that is long enough to show.", 2000, 0},
                                 {" And more.", 2000, 0},
                                 {NULL, 0, 0}};
    g_script.steps = steps;
    g_script.final = "A first line that is long enough to show. And more.";
    tworld w;
    if (!tw_start(&w, "{\"channels\":{\"telegram\":{\"streaming\":\"off\"}}}")) return;
    EXPECT(tw_say(&w, 1, DM, "go", NULL));
    EXPECT_INT(tgfake_count(&w.f, "sendMessage"), 1);
    EXPECT_INT(tgfake_count(&w.f, "editMessageText"), 0);
    tw_stop(&w);
}

TEST(tg_feel_typing_refreshed_and_stopped)
{
    static const step steps[] = {{"", 0, 1},    /* typing at the start */
                                 {"", 6000, 2}, /* 6 s on: refreshed */
                                 {"", 6000, 3}, {NULL, 0, 0}};
    g_script.steps = steps;
    g_script.final = "Done.";
    tworld w;
    if (!tw_start(&w, NULL)) return;
    EXPECT(tw_say(&w, 1, DM, "slow one", NULL));
    EXPECT_INT(tgfake_count(&w.f, "sendChatAction"), 3);
    json_t *c = tw_call(&w, 0);
    EXPECT_STR(c_method(c), "sendChatAction");
    EXPECT_STR(json_string_value(json_object_get(json_object_get(c, "params"), "action")),
               "typing");
    json_decref(c);
    /* stopped with the reply: time passing sends no more */
    t_advance(20000);
    usleep(300000);
    EXPECT_INT(tgfake_count(&w.f, "sendChatAction"), 3);
    tw_stop(&w);
}

#define GROUP "{\"id\":-100,\"type\":\"group\"}"

TEST(tg_feel_ack_reaction_on_a_group_mention_only)
{
    g_script.final = "ok";
    tworld w;
    if (!tw_start(&w, NULL)) return;
    EXPECT(tw_say(&w, 1, GROUP, "@ClawBot hello", NULL));
    EXPECT(wait_count(&w.f, "setMessageReaction", 1));
    EXPECT(tw_say(&w, 2, DM, "hello", NULL));
    EXPECT(tw_say(&w, 3, GROUP, "hello all", NULL)); /* not mentioned: history only */
    usleep(200000);
    EXPECT_INT(tgfake_count(&w.f, "setMessageReaction"), 1);
    int n = tgfake_count(&w.f, NULL);
    for (int i = 0; i < n; i++) {
        json_t *c = tw_call(&w, (size_t)i);
        if (!strcmp(c_method(c), "setMessageReaction")) {
            json_t *p = json_object_get(c, "params");
            EXPECT_INT((int)json_integer_value(json_object_get(p, "message_id")), 11);
            EXPECT_INT((int)json_integer_value(json_object_get(p, "chat_id")), -100);
            json_t *r = json_array_get(json_object_get(p, "reaction"), 0);
            EXPECT_STR(json_string_value(json_object_get(r, "emoji")), "\xf0\x9f\x91\x80");
        }
        json_decref(c);
    }
    tw_stop(&w);
}

TEST(tg_feel_new_answers_with_the_model_then_greets)
{
    g_script.final = "Hello again! What shall we do?";
    tworld w;
    if (!tw_start(&w, NULL)) return;
    EXPECT(tw_say(&w, 1, DM, "/new", NULL));
    EXPECT_INT(g_script.runs, 1);
    EXPECT_CONTAINS(g_script.prompts[0], "/new or /reset");
    EXPECT_INT(tgfake_count(&w.f, "sendMessage"), 2);
    json_t *a = NULL, *b = NULL;
    int n = tgfake_count(&w.f, NULL);
    for (int i = 0; i < n; i++) {
        json_t *c = tw_call(&w, (size_t)i);
        if (!strcmp(c_method(c), "sendMessage") && (!a || !b)) {
            if (!a)
                a = c;
            else
                b = c;
        } else {
            json_decref(c);
        }
    }
    EXPECT(a && b);
    if (a && b) {
        EXPECT_STR(c_text(a), "\xe2\x9c\x85 New session started \xc2\xb7 model: openai/gpt-t");
        EXPECT_STR(c_text(b), "Hello again! What shall we do?");
    }
    json_decref(a);
    json_decref(b);
    /* another bot's /new is no command of ours: an ordinary turn */
    EXPECT(tw_say(&w, 2, DM, "/new@AnotherBot", NULL));
    EXPECT_INT(g_script.runs, 2);
    /* the message itself, after the untrusted-metadata blocks (inbound_meta.h) */
    const char *p1 = g_script.prompts[1];
    size_t n1 = strlen(p1);
    EXPECT(n1 >= 16 && !strcmp(p1 + n1 - 16, "\n/new@AnotherBot"));
    /* our own, addressed: a reset and a greeting again */
    EXPECT(tw_say(&w, 3, DM, "/new@ClawBot", NULL));
    EXPECT_INT(g_script.runs, 3);
    EXPECT_CONTAINS(g_script.prompts[2], "/new or /reset");
    tw_stop(&w);
}
