/*
 * test_telegram.c — the Telegram channel (src/gateway/channels/telegram.c) against a
 * loopback fake Bot API (fakeserver.c with a handler): updates mapped per
 * chat type, the offset kept across reopen and moved only past accepted
 * updates, 429 and 5xx retries, garbage answers, a hung poll, a prompt
 * stop, and the token never in a message.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/base/log.h"
#include "../src/gateway/channels/telegram_int.h"
#include "fake_telegram.h"
#include "fakeserver.h"
#include "test.h"

#define TOKEN  TGFAKE_TOKEN
#define BOT_ID TGFAKE_BOT_ID

/* A whole raw HTTP answer with a JSON body (for fake_push_raw). */
static char *raw_json(int status, const char *body)
{
    buf b = BUF_INIT;
    cm_buf_printf(
        &b, "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
        status, strlen(body), body);
    return cm_buf_detach(&b);
}

/* ---- the sink ---- */

typedef struct sink {
    pthread_mutex_t mu;
    json_t *got;             /* accepted messages as objects */
    int refuse;              /* refuse this many calls first */
    cm_rc refuse_rc;         /* ... with this code (0: CM_EIO) */
    const char *refuse_text; /* refuse every message with this text (refuse_rc) */
    int calls;
} sink;

static json_t *sv(const char *s)
{
    return s ? json_string(s) : json_null();
}

static cm_rc sink_fn(void *ctx, const gw_msg *m)
{
    sink *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->calls++;
    if (s->refuse > 0 || (s->refuse_text && m->text && !strcmp(m->text, s->refuse_text))) {
        if (s->refuse > 0) s->refuse--;
        pthread_mutex_unlock(&s->mu);
        return s->refuse_rc ? s->refuse_rc : CM_EIO;
    }
    json_t *o = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:b,s:b,s:b}", "channel", sv(m->channel),
                          "account", sv(m->account), "peer", sv(m->peer), "thread", sv(m->thread),
                          "id", sv(m->message_id), "sender", sv(m->sender), "text", sv(m->text),
                          "group", m->is_group, "media", m->has_media, "mentioned", m->mentioned);
    json_array_append_new(s->got, o);
    pthread_mutex_unlock(&s->mu);
    return CM_OK;
}

static size_t got_n(sink *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = json_array_size(s->got);
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* Waits up to ms for cond (polled every 10 ms). */
#define WAIT_FOR(cond, ms)                                                                         \
    do {                                                                                           \
        for (int w_ = 0; w_ < (ms) / 10 && !(cond); w_++)                                          \
            usleep(10000);                                                                         \
    } while (0)

typedef struct rig {
    fake_server *srv;
    char url[64];
    tgfake f;
    sink s;
    char *state;
    json_t *root;
} rig;

static void rig_start(rig *r, const char *extra)
{
    memset(r, 0, sizeof *r);
    setenv("CLAWMEM_HTTP_BACKOFF_MS", "50", 1); /* read at open */
    tgfake_init(&r->f);
    pthread_mutex_init(&r->s.mu, NULL);
    r->s.got = json_array();
    r->srv = fake_start(4, r->url);
    fake_handler(r->srv, tgfake_handler, &r->f);
    r->state = tmp_dir();
    buf b = BUF_INIT;
    cm_buf_printf(&b, "{\"channels\":{\"telegram\":{\"botToken\":\"%s\",\"apiRoot\":\"%s/\"%s%s}}}",
                  TOKEN, r->url, extra ? "," : "", extra ? extra : "");
    r->root = json_loads(b.data, 0, NULL);
    cm_buf_release(&b);
}

static void rig_stop(rig *r)
{
    unsetenv("CLAWMEM_HTTP_BACKOFF_MS");
    atomic_store(&r->f.stop, 1);
    fake_stop(r->srv);
    tgfake_release(&r->f);
    json_decref(r->s.got);
    pthread_mutex_destroy(&r->s.mu);
    json_decref(r->root);
}

static const char *gs(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

TEST(tg_map_updates)
{
    rig r;
    rig_start(&r, NULL);
    gw_channel *ch = NULL;
    char err[512] = "";
    EXPECT_INT(cm_gw_telegram_open(r.root, NULL, r.state, &ch, err, sizeof err), CM_OK);
    EXPECT_STR(ch->ops->name, "telegram");
    EXPECT_INT((int)ch->ops->text_limit, 4096);
    /* private; group with @mention; supergroup forum topic; forum general
     * topic; channel post; photo with caption; sticker only; a service
     * message (skipped); text_mention of the bot; reply to the bot; a group
     * message mentioning someone else; a longer word is no mention */
    tgfake_add_update(&r.f, "{\"update_id\":10,\"message\":{\"message_id\":1,\"from\":{\"id\":42},"
                            "\"chat\":{\"id\":42,\"type\":\"private\"},\"text\":\"hello\"}}");
    tgfake_add_update(&r.f,
                      "{\"update_id\":11,\"message\":{\"message_id\":2,\"from\":{\"id\":43},"
                      "\"chat\":{\"id\":-100,\"type\":\"group\"},\"text\":\"hey @clawbot, hi\","
                      "\"entities\":[{\"type\":\"mention\",\"offset\":4,\"length\":8}]}}");
    tgfake_add_update(&r.f, "{\"update_id\":12,\"message\":{\"message_id\":3,\"from\":{\"id\":44},"
                            "\"message_thread_id\":7,\"is_topic_message\":true,"
                            "\"chat\":{\"id\":-1001,\"type\":\"supergroup\",\"is_forum\":true},"
                            "\"text\":\"in a topic\"}}");
    tgfake_add_update(&r.f, "{\"update_id\":13,\"message\":{\"message_id\":4,\"from\":{\"id\":44},"
                            "\"chat\":{\"id\":-1001,\"type\":\"supergroup\",\"is_forum\":true},"
                            "\"text\":\"general\"}}");
    tgfake_add_update(&r.f, "{\"update_id\":14,\"channel_post\":{\"message_id\":5,"
                            "\"sender_chat\":{\"id\":-1002,\"type\":\"channel\"},"
                            "\"chat\":{\"id\":-1002,\"type\":\"channel\"},\"text\":\"news\"}}");
    tgfake_add_update(&r.f,
                      "{\"update_id\":15,\"message\":{\"message_id\":6,\"from\":{\"id\":42},"
                      "\"chat\":{\"id\":42,\"type\":\"private\"},\"photo\":[{\"file_id\":\"x\"}],"
                      "\"caption\":\"look\"}}");
    tgfake_add_update(
        &r.f, "{\"update_id\":16,\"message\":{\"message_id\":7,\"from\":{\"id\":42},"
              "\"chat\":{\"id\":42,\"type\":\"private\"},\"sticker\":{\"file_id\":\"s\"}}}");
    tgfake_add_update(&r.f, "{\"update_id\":17,\"message\":{\"message_id\":8,\"from\":{\"id\":42},"
                            "\"chat\":{\"id\":-100,\"type\":\"group\"},"
                            "\"new_chat_members\":[{\"id\":5}]}}");
    tgfake_add_update(&r.f, "{\"update_id\":18,\"message\":{\"message_id\":9,\"from\":{\"id\":45},"
                            "\"chat\":{\"id\":-100,\"type\":\"group\"},\"text\":\"Claw do it\","
                            "\"entities\":[{\"type\":\"text_mention\",\"offset\":0,\"length\":4,"
                            "\"user\":{\"id\":123456}}]}}");
    tgfake_add_update(&r.f, "{\"update_id\":19,\"message\":{\"message_id\":10,\"from\":{\"id\":45},"
                            "\"chat\":{\"id\":-100,\"type\":\"group\"},\"text\":\"and this?\","
                            "\"reply_to_message\":{\"message_id\":900,\"from\":{\"id\":123456},"
                            "\"chat\":{\"id\":-100,\"type\":\"group\"},\"text\":\"an answer\"}}}");
    tgfake_add_update(
        &r.f, "{\"update_id\":20,\"message\":{\"message_id\":11,\"from\":{\"id\":45},"
              "\"chat\":{\"id\":-100,\"type\":\"group\"},\"text\":\"@clawbotx @alice hi\"}}");
    /* a command addressed to this bot arrives bare; another bot's stays */
    tgfake_add_update(&r.f, "{\"update_id\":21,\"message\":{\"message_id\":12,\"from\":{\"id\":45},"
                            "\"chat\":{\"id\":-100,\"type\":\"group\"},"
                            "\"text\":\"/status@clawbot\"}}");
    tgfake_add_update(&r.f, "{\"update_id\":22,\"message\":{\"message_id\":13,\"from\":{\"id\":45},"
                            "\"chat\":{\"id\":-100,\"type\":\"group\"},"
                            "\"text\":\"/new@otherbot\"}}");
    /* "@bot stop" in a group is the abort word (the mention counts) */
    tgfake_add_update(&r.f, "{\"update_id\":23,\"message\":{\"message_id\":14,\"from\":{\"id\":45},"
                            "\"chat\":{\"id\":-100,\"type\":\"group\"},"
                            "\"text\":\"@ClawBot stop!\"}}");
    char who[64] = "";
    cm_gw_telegram_bot_username(ch, who, sizeof who);
    EXPECT_STR(who, "");
    EXPECT_INT(ch->ops->start(ch, sink_fn, &r.s, err, sizeof err), CM_OK);
    cm_gw_telegram_bot_username(ch, who, sizeof who);
    EXPECT_STR(who, "ClawBot");
    WAIT_FOR(got_n(&r.s) >= 13, 10000);
    ch->ops->stop(ch);
    EXPECT_INT((int)got_n(&r.s), 13);
    static const struct {
        const char *peer, *thread, *id, *sender, *text;
        bool group, media, mentioned;
    } want[] = {
        {"42", NULL, "1", "42", "hello", false, false, false},
        {"-100", NULL, "2", "43", "hey @clawbot, hi", true, false, true},
        {"-1001", "7", "3", "44", "in a topic", true, false, false},
        {"-1001", "1", "4", "44", "general", true, false, false},
        {"-1002", NULL, "5", "-1002", "news", true, false, false},
        {"42", NULL, "6", "42", "look", false, true, false},
        {"42", NULL, "7", "42", "<media:sticker>", false, true, false},
        {"-100", NULL, "9", "45", "Claw do it", true, false, true},
        {"-100", NULL, "10", "45", "and this?", true, false, true},
        {"-100", NULL, "11", "45", "@clawbotx @alice hi", true, false, false},
        {"-100", NULL, "12", "45", "/status", true, false, false},
        {"-100", NULL, "13", "45", "/new@otherbot", true, false, false},
        {"-100", NULL, "14", "45", " stop!", true, false, true},
    };
    for (size_t i = 0; i < ARRAY_LEN(want); i++) {
        json_t *g = json_array_get(r.s.got, i);
        EXPECT_STR(gs(g, "channel"), "telegram");
        EXPECT_STR(gs(g, "account"), "default");
        EXPECT_STR(gs(g, "peer"), want[i].peer);
        if (want[i].thread)
            EXPECT_STR(gs(g, "thread"), want[i].thread);
        else
            EXPECT(json_is_null(json_object_get(g, "thread")));
        EXPECT_STR(gs(g, "id"), want[i].id);
        EXPECT_STR(gs(g, "sender"), want[i].sender);
        EXPECT_STR(gs(g, "text"), want[i].text);
        EXPECT_INT(json_is_true(json_object_get(g, "group")), want[i].group);
        EXPECT_INT(json_is_true(json_object_get(g, "media")), want[i].media);
        EXPECT_INT(json_is_true(json_object_get(g, "mentioned")), want[i].mentioned);
    }
    /* getUpdates asked for the message kinds with the 30 s long poll */
    ch->ops->close(ch);
    rig_stop(&r);
}

/* Reads lastUpdateId of the offset file, -1 when absent. */
static long offset_file(const char *state, const char *account)
{
    char rel[128];
    snprintf(rel, sizeof rel, "telegram/update-offset-%s.json", account);
    buf b = BUF_INIT;
    char e[256];
    long v = -1;
    if (cm_fs_read_file(path_in(state, rel), 4096, &b, e, sizeof e) == CM_OK) {
        json_t *d = json_loads(b.data, 0, NULL);
        if (json_is_integer(json_object_get(d, "lastUpdateId")))
            v = (long)json_integer_value(json_object_get(d, "lastUpdateId"));
        if (json_integer_value(json_object_get(d, "version")) != 2) v = -2;
        if (!json_object_get(d, "botId") ||
            strcmp(json_string_value(json_object_get(d, "botId")) ?: "", "123456"))
            v = -3;
        json_decref(d);
    }
    cm_buf_release(&b);
    return v;
}

static const char dm_update[] = "{\"update_id\":%d,\"message\":{\"message_id\":%d,"
                                "\"from\":{\"id\":42},\"chat\":{\"id\":42,\"type\":\"private\"},"
                                "\"text\":\"m%d\"}}";

static void add_dm(tgfake *f, int uid)
{
    char u[256];
    snprintf(u, sizeof u, dm_update, uid, uid, uid);
    tgfake_add_update(f, u);
}

TEST(tg_offset_persists)
{
    rig r;
    rig_start(&r, NULL);
    gw_channel *ch = NULL;
    char err[512] = "";
    EXPECT_INT(cm_gw_telegram_open(r.root, "Work Bot", r.state, &ch, err, sizeof err), CM_OK);
    add_dm(&r.f, 100);
    add_dm(&r.f, 101);
    EXPECT_INT(ch->ops->start(ch, sink_fn, &r.s, err, sizeof err), CM_OK);
    WAIT_FOR(got_n(&r.s) >= 2, 10000);
    ch->ops->close(ch); /* close stops first */
    EXPECT_INT((int)got_n(&r.s), 2);
    EXPECT_STR(gs(json_array_get(r.s.got, 0), "account"), "Work Bot");
    EXPECT_INT(offset_file(r.state, "Work_Bot"), 101);
    /* the fake forgets nothing it was not told to: a reopened channel must
     * ask from 102 on, so 100 and 101 never come again */
    pthread_mutex_lock(&r.f.mu);
    json_array_clear(r.f.updates);
    pthread_mutex_unlock(&r.f.mu);
    add_dm(&r.f, 100);
    add_dm(&r.f, 101);
    add_dm(&r.f, 102);
    ch = NULL;
    EXPECT_INT(cm_gw_telegram_open(r.root, "Work Bot", r.state, &ch, err, sizeof err), CM_OK);
    int p0 = tgfake_polls(&r.f);
    EXPECT_INT(ch->ops->start(ch, sink_fn, &r.s, err, sizeof err), CM_OK);
    WAIT_FOR(got_n(&r.s) >= 3 && tgfake_polls(&r.f) >= p0 + 2, 10000);
    ch->ops->close(ch);
    EXPECT_INT((int)got_n(&r.s), 3);
    EXPECT_STR(gs(json_array_get(r.s.got, 2), "id"), "102");
    pthread_mutex_lock(&r.f.mu);
    EXPECT_INT((int)json_integer_value(json_array_get(r.f.offsets, (size_t)p0)), 102);
    pthread_mutex_unlock(&r.f.mu);
    EXPECT_INT(offset_file(r.state, "Work_Bot"), 102);
    rig_stop(&r);
}

TEST(tg_refused_redelivered)
{
    rig r;
    rig_start(&r, NULL);
    gw_channel *ch = NULL;
    char err[512] = "";
    EXPECT_INT(cm_gw_telegram_open(r.root, NULL, r.state, &ch, err, sizeof err), CM_OK);
    r.s.refuse = 2; /* the gateway cannot take it twice */
    add_dm(&r.f, 7);
    add_dm(&r.f, 8);
    EXPECT_INT(ch->ops->start(ch, sink_fn, &r.s, err, sizeof err), CM_OK);
    WAIT_FOR(got_n(&r.s) >= 2, 15000);
    char last[512];
    cm_gw_telegram_last_error(ch, last, sizeof last);
    ch->ops->close(ch);
    EXPECT_INT((int)got_n(&r.s), 2);
    EXPECT_INT(r.s.calls, 4); /* 7 refused twice, then 7 and 8 once each */
    EXPECT_STR(gs(json_array_get(r.s.got, 0), "id"), "7");
    EXPECT_STR(gs(json_array_get(r.s.got, 1), "id"), "8");
    EXPECT_STR(last, ""); /* "did not accept" until a poll went through */
    EXPECT_INT(offset_file(r.state, "default"), 8);
    rig_stop(&r);
}

TEST(tg_send_and_retries)
{
    rig r;
    rig_start(&r, NULL);
    gw_channel *ch = NULL;
    char err[512] = "";
    EXPECT_INT(cm_gw_telegram_open(r.root, NULL, r.state, &ch, err, sizeof err), CM_OK);
    gw_outbound o = {NULL, "-1001", "7", "55", "hi there", false};
    /* 429 with parameters.retry_after 1: one wait of a second, then sent */
    char *ra = raw_json(429, "{\"ok\":false,\"error_code\":429,\"description\":\"Too Many "
                             "Requests: retry after 1\",\"parameters\":{\"retry_after\":1}}");
    fake_push_raw(r.srv, ra, false);
    free(ra);
    int64_t t0 = cm_now_ms();
    EXPECT_INT(ch->ops->send(ch, &o, err, sizeof err), CM_OK);
    EXPECT(cm_now_ms() - t0 >= 950);
    /* a 502 then an answer */
    fake_push(r.srv, FAKE_STATUS, 502, -1);
    gw_outbound o2 = {NULL, "-1001", "1", NULL, "general topic", false};
    EXPECT_INT(ch->ops->send(ch, &o2, err, sizeof err), CM_OK);
    gw_outbound o3 = {NULL, "42", "3", "9", "dm topic", false};
    EXPECT_INT(ch->ops->send(ch, &o3, err, sizeof err), CM_OK);
    /* a 400 is not retried */
    int n0 = fake_count(r.srv);
    char *bad = raw_json(400, "{\"ok\":false,\"error_code\":400,\"description\":\"Bad Request: "
                              "chat not found\"}");
    fake_push_raw(r.srv, bad, false);
    free(bad);
    EXPECT_INT(ch->ops->send(ch, &o, err, sizeof err), CM_EIO);
    EXPECT_CONTAINS(err, "chat not found");
    EXPECT_INT(fake_count(r.srv), n0 + 1);
    /* over the limit */
    char *big = malloc(4098);
    memset(big, 'a', 4097);
    big[4097] = 0;
    gw_outbound o4 = {NULL, "42", NULL, NULL, big, false};
    EXPECT_INT(ch->ops->send(ch, &o4, err, sizeof err), CM_ETOOBIG);
    big[4096] = 0;
    EXPECT_INT(ch->ops->send(ch, &o4, err, sizeof err), CM_OK);
    free(big);
    ch->ops->close(ch);
    EXPECT_INT((int)json_array_size(r.f.sent), 4);
    json_t *s0 = json_array_get(r.f.sent, 0), *s1 = json_array_get(r.f.sent, 1),
           *s2 = json_array_get(r.f.sent, 2);
    EXPECT_INT((int)json_integer_value(json_object_get(s0, "chat_id")), -1001);
    EXPECT_STR(gs(s0, "text"), "hi there");
    EXPECT_INT((int)json_integer_value(json_object_get(s0, "reply_to_message_id")), 55);
    EXPECT(json_is_true(json_object_get(s0, "allow_sending_without_reply")));
    EXPECT_INT((int)json_integer_value(json_object_get(s0, "message_thread_id")), 7);
    EXPECT(!json_object_get(s1, "message_thread_id")); /* the General topic takes none */
    EXPECT(!json_object_get(s1, "reply_to_message_id"));
    EXPECT_INT((int)json_integer_value(json_object_get(s2, "message_thread_id")), 3);
    rig_stop(&r);
}

/* Markdown → Telegram HTML, as 2026.3.22 renders a reply. */
TEST(tg_html_renders_markdown)
{
    static const struct {
        const char *md, *html;
    } cases[] = {
        {"plain & <tags>", "plain &amp; &lt;tags&gt;"},
        {"**bold** and *it* and __b2__ and _i2_",
         "<b>bold</b> and <i>it</i> and <b>b2</b> and <i>i2</i>"},
        {"~~gone~~ ||secret||", "<s>gone</s> <tg-spoiler>secret</tg-spoiler>"},
        {"`a <b>` and ``x ` y``", "<code>a &lt;b&gt;</code> and <code>x ` y</code>"},
        {"**bold with *it* inside**", "<b>bold with <i>it</i> inside</b>"},
        {"see [the docs](https://x.dev/a?b=1&c=\"2\")",
         "see <a href=\"https://x.dev/a?b=1&amp;c=&quot;2&quot;\">the docs</a>"},
        {"snake_case_name and 2 * 3 * 4", "snake_case_name and 2 * 3 * 4"},
        {"a lone * and ** and _", "a lone * and ** and _"},
        {"\\*not italic\\*", "*not italic*"},
        {"# Title\n\nText", "Title\n\nText"},
        {"## Using C#\n# F# and C# ##", "Using C#\nF# and C#"},
        {"- one\n- **two**\n  - nested\n3. three", "• one\n• <b>two</b>\n  • nested\n3. three"},
        /* ordered items numbered on from the list's first number */
        {"1. a\n1. b\n1. c", "1. a\n2. b\n3. c"},
        {"3) x\n3) y\n007. z", "3. x\n4. y\n7. z"},
        {"1. a\n\n1. b", "1. a\n\n2. b"},
        {"1. a\n   1. in\n   1. in2\n1. b", "1. a\n  1. in\n  2. in2\n2. b"},
        {"1. a\nlazy\n1. b", "1. a\nlazy\n2. b"},
        {"1. a\n\ntext\n\n1. b", "1. a\n\ntext\n\n1. b"},
        {"1. a\n# H\n1. b", "1. a\nH\n1. b"},
        /* setext headings: the underline goes, a lone rule stays */
        {"Title\n=====\nText", "Title\nText"},
        {"Sub *x*\n---\n\n---", "Sub <i>x</i>\n\n───"},
        {"- item\n---", "• item\n───"},
        {"```python\nif a < b:\n    **x**\n```\nafter",
         "<pre><code>if a &lt; b:\n    **x**</code></pre>\nafter"},
        {"```\nunclosed <", "<pre><code>unclosed &lt;</code></pre>"},
        {"> quoted *line*\n> two\n\nout",
         "<blockquote>quoted <i>line</i>\ntwo</blockquote>\n\nout"},
        {"a\n\n\n\nb", "a\n\nb"},
        {"---", "───"},
        {"Edit README.md and src/main.go.",
         "Edit <code>README.md</code> and <code>src/main.go</code>."},
        {"**see notes.md.bak** or file.txt", "<b>see <code>notes.md</code>.bak</b> or file.txt"},
        {"https://x.org/a.md [README.md](https://y.dev)",
         "https://x.org/a.md <a href=\"https://y.dev\">README.md</a>"},
        {"", ""},
    };
    buf b = BUF_INIT;
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        EXPECT_INT(cm_gw_telegram_html(cases[i].md, &b), CM_OK);
        if (strcmp(b.data, cases[i].html))
            test_fail(__FILE__, __LINE__, "\"%s\":\n  got  \"%s\"\n  want \"%s\"", cases[i].md,
                      b.data, cases[i].html);
    }
    cm_buf_release(&b);
}

/* Hostile Markdown (thousands of markers that pair with nothing, deep
 * nesting) renders in bounded time: a reply piece is at most 4096
 * characters, 16 KiB of UTF-8. */
TEST(tg_html_pathological_input_is_fast)
{
    buf md = BUF_INIT, out = BUF_INIT;
    while (md.len < 16000)
        cm_buf_adds(&md, "*a _b ~~c ||d `e [f](g **h ");
    int64_t t0 = cm_now_ms();
    EXPECT_INT(cm_gw_telegram_html(md.data, &out), CM_OK);
    cm_buf_reset(&md);
    while (md.len < 16000)
        cm_buf_adds(&md, "**_~~||");
    EXPECT_INT(cm_gw_telegram_html(md.data, &out), CM_OK);
    int64_t ms = cm_now_ms() - t0;
    EXPECT(ms < 500);
    cm_buf_release(&md);
    cm_buf_release(&out);
}

/* Replies go as HTML; when Telegram refuses the entities, the same reply
 * goes again as the plain text it was. */
TEST(tg_send_html_then_plain_text)
{
    rig r;
    rig_start(&r, NULL);
    gw_channel *ch = NULL;
    char err[512] = "";
    EXPECT_INT(cm_gw_telegram_open(r.root, NULL, r.state, &ch, err, sizeof err), CM_OK);
    gw_outbound o = {NULL, "42", NULL, NULL, "**Done** with `a<b`", false};
    EXPECT_INT(ch->ops->send(ch, &o, err, sizeof err), CM_OK);
    char *bad = raw_json(400, "{\"ok\":false,\"error_code\":400,\"description\":\"Bad Request: "
                              "can't parse entities: Unsupported start tag\"}");
    fake_push_raw(r.srv, bad, false);
    free(bad);
    int n0 = fake_count(r.srv);
    EXPECT_INT(ch->ops->send(ch, &o, err, sizeof err), CM_OK);
    EXPECT_INT(fake_count(r.srv), n0 + 2); /* refused once, then plain */
    ch->ops->close(ch);
    EXPECT_INT((int)json_array_size(r.f.sent), 2);
    json_t *s0 = json_array_get(r.f.sent, 0), *s1 = json_array_get(r.f.sent, 1);
    EXPECT_STR(gs(s0, "text"), "<b>Done</b> with <code>a&lt;b</code>");
    EXPECT_STR(gs(s0, "parse_mode"), "HTML");
    EXPECT_STR(gs(s1, "text"), "**Done** with `a<b`");
    EXPECT(!json_object_get(s1, "parse_mode"));
    rig_stop(&r);
    /* markup around nothing: Telegram finds the HTML empty; sent as written */
    rig_start(&r, NULL);
    EXPECT_INT(cm_gw_telegram_open(r.root, NULL, r.state, &ch, err, sizeof err), CM_OK);
    bad = raw_json(400, "{\"ok\":false,\"error_code\":400,\"description\":\"Bad Request: "
                        "message text is empty\"}");
    fake_push_raw(r.srv, bad, false);
    free(bad);
    gw_outbound o2 = {NULL, "42", NULL, NULL, "```\n```", false};
    EXPECT_INT(ch->ops->send(ch, &o2, err, sizeof err), CM_OK);
    /* the gateway's own notices go as written */
    gw_outbound o3 = {NULL, "42", NULL, NULL, "Pairing code: *AB_CD*", true};
    EXPECT_INT(ch->ops->send(ch, &o3, err, sizeof err), CM_OK);
    ch->ops->close(ch);
    EXPECT_INT((int)json_array_size(r.f.sent), 2);
    EXPECT_STR(gs(json_array_get(r.f.sent, 0), "text"), "```\n```");
    EXPECT_STR(gs(json_array_get(r.f.sent, 1), "text"), "Pairing code: *AB_CD*");
    EXPECT(!json_object_get(json_array_get(r.f.sent, 1), "parse_mode"));
    rig_stop(&r);
}

TEST(tg_garbage_and_hang)
{
    rig r;
    rig_start(&r, "\"timeoutSeconds\":1");
    gw_channel *ch = NULL;
    char err[512] = "";
    EXPECT_INT(cm_gw_telegram_open(r.root, NULL, r.state, &ch, err, sizeof err), CM_OK);
    EXPECT_INT(ch->ops->start(ch, sink_fn, &r.s, err, sizeof err), CM_OK);
    WAIT_FOR(tgfake_polls(&r.f) >= 1, 5000);
    /* the next polls: a body that is not JSON, a 200 whose result is no
     * list, then one that never answers (given up after the 1 s poll plus
     * the 1 s request limit) */
    int64_t t0 = cm_now_ms();
    fake_push(r.srv, FAKE_BAD_JSON, 200, -1);
    fake_push_raw(
        r.srv, "HTTP/1.1 200 OK\r\nContent-Length: 25\r\n\r\n{\"ok\":true,\"result\":{}}  ", false);
    int n0 = fake_count(r.srv);
    fake_push(r.srv, FAKE_HANG, 0, -1);
    /* n0 + 3: the hung poll (or one after it) came, whatever poll was in flight;
     * the update comes only then, so no poll before the hang can take it */
    /* every lastError seen meanwhile (the garbage's stays through the hang;
     * a poll that goes through clears it) */
    char last[512], seen[512] = "";
    bool leaked = false;
    for (int w = 0; w < 1000 && fake_count(r.srv) < n0 + 3; w++) {
        cm_gw_telegram_last_error(ch, last, sizeof last);
        if (last[0]) snprintf(seen, sizeof seen, "%s", last);
        leaked |= strstr(last, TOKEN) || strstr(last, "secretToken");
        usleep(10000);
    }
    EXPECT(fake_count(r.srv) >= n0 + 3);
    add_dm(&r.f, 5);
    for (int w = 0; w < 2000 && got_n(&r.s) < 1; w++) {
        cm_gw_telegram_last_error(ch, last, sizeof last);
        if (last[0]) snprintf(seen, sizeof seen, "%s", last);
        leaked |= strstr(last, TOKEN) || strstr(last, "secretToken");
        usleep(10000);
    }
    int64_t took = cm_now_ms() - t0;
    cm_gw_telegram_last_error(ch, last, sizeof last);
    ch->ops->close(ch);
    EXPECT_INT((int)got_n(&r.s), 1);
    EXPECT(took >= 1500); /* it did wait out the hung poll */
    EXPECT(seen[0]);
    EXPECT(!leaked);
    EXPECT_STR(last, ""); /* the poll that brought the message cleared it */
    rig_stop(&r);
}

TEST(tg_stop_prompt)
{
    rig r;
    rig_start(&r, NULL);
    r.f.hold_ms = 30000; /* a real long poll: held the whole 30 s */
    gw_channel *ch = NULL;
    char err[512] = "";
    EXPECT_INT(cm_gw_telegram_open(r.root, NULL, r.state, &ch, err, sizeof err), CM_OK);
    EXPECT_INT(ch->ops->start(ch, sink_fn, &r.s, err, sizeof err), CM_OK);
    usleep(300000); /* the poll is in flight */
    int64_t t0 = cm_now_ms();
    ch->ops->stop(ch);
    int64_t took = cm_now_ms() - t0;
    EXPECT(took < 3000);
    ch->ops->stop(ch); /* twice is fine */
    /* replies still go out after stop (the gateway drains), 5xx retried */
    fake_push(r.srv, FAKE_STATUS, 503, -1);
    gw_outbound o = {NULL, "42", NULL, "1", "after stop", false};
    EXPECT_INT(ch->ops->send(ch, &o, err, sizeof err), CM_OK);
    pthread_mutex_lock(&r.f.mu);
    EXPECT_INT((int)json_array_size(r.f.sent), 1);
    pthread_mutex_unlock(&r.f.mu);
    ch->ops->close(ch);
    rig_stop(&r);
}

TEST(tg_token_never_shown)
{
    rig r;
    rig_start(&r, NULL);
    gw_channel *ch = NULL;
    char err[512] = "", last[512] = "";
    /* getMe refused, the answer echoing the request path */
    r.f.getme_fail_status = 401;
    r.f.getme_fail = "{\"ok\":false,\"error_code\":401,\"description\":\"Unauthorized: "
                     "/bot" TOKEN "/getMe\"}";
    EXPECT_INT(cm_gw_telegram_open(r.root, NULL, r.state, &ch, err, sizeof err), CM_OK);
    EXPECT_INT(ch->ops->start(ch, sink_fn, &r.s, err, sizeof err), CM_EAUTH);
    EXPECT_CONTAINS(err, "401");
    EXPECT_CONTAINS(err, "getMe");
    EXPECT(!strstr(err, "secretToken"));
    EXPECT(!strstr(err, "123456:"));
    /* a 5xx echoing it on send, and a network failure (the URL has it) */
    char *e5 = raw_json(500, "{\"ok\":false,\"error_code\":500,\"description\":\"boom "
                             "/bot" TOKEN "/sendMessage\"}");
    for (int i = 0; i < 4; i++)
        fake_push_raw(r.srv, e5, false);
    free(e5);
    gw_outbound o = {NULL, "42", NULL, NULL, "x", false};
    EXPECT_INT(ch->ops->send(ch, &o, err, sizeof err), CM_EIO);
    EXPECT_CONTAINS(err, "500");
    EXPECT(!strstr(err, "secretToken"));
    ch->ops->close(ch);
    r.f.getme_fail = NULL;
    json_t *tg = json_object_get(json_object_get(r.root, "channels"), "telegram");
    json_object_set_new(tg, "apiRoot", json_string("http://127.0.0.1:1"));
    EXPECT_INT(cm_gw_telegram_open(r.root, NULL, r.state, &ch, err, sizeof err), CM_OK);
    EXPECT_INT(ch->ops->send(ch, &o, err, sizeof err), CM_EIO);
    EXPECT(err[0]);
    EXPECT(!strstr(err, "secretToken"));
    EXPECT(!strstr(err, "123456:"));
    /* the poll's own failures too */
    EXPECT_INT(ch->ops->start(ch, sink_fn, &r.s, err, sizeof err), CM_OK);
    for (int i = 0; i < 300 && !last[0]; i++) {
        usleep(10000);
        cm_gw_telegram_last_error(ch, last, sizeof last);
    }
    ch->ops->close(ch);
    EXPECT(last[0]);
    EXPECT(!strstr(last, "secretToken"));
    rig_stop(&r);
}

TEST(tg_config_tokens)
{
    char *dir = tmp_dir();
    char err[512] = "";
    gw_channel *ch = NULL;
    json_t *root = json_loads("{\"channels\":{\"telegram\":{\"dmPolicy\":\"pairing\"}}}", 0, NULL);
    unsetenv("TELEGRAM_BOT_TOKEN");
    EXPECT_INT(cm_gw_telegram_open(root, NULL, dir, &ch, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "no bot token");
    EXPECT_INT(cm_gw_telegram_open(NULL, NULL, dir, &ch, err, sizeof err), CM_ECONFIG);
    json_decref(root);
    /* tokenFile, trimmed; a "${VAR}" template in botToken; an account's own */
    write_file(dir, "tok", "  " TOKEN "\n");
    buf b = BUF_INIT;
    cm_buf_printf(&b,
                  "{\"channels\":{\"telegram\":{\"tokenFile\":\"%s\",\"accounts\":{\"two\":{"
                  "\"botToken\":\"${TG_TEST_TOKEN_X}\"}}}}}",
                  path_in(dir, "tok"));
    root = json_loads(b.data, 0, NULL);
    cm_buf_release(&b);
    EXPECT_INT(cm_gw_telegram_open(root, NULL, dir, &ch, err, sizeof err), CM_OK);
    ch->ops->close(ch);
    unsetenv("TG_TEST_TOKEN_X");
    EXPECT_INT(cm_gw_telegram_open(root, "two", dir, &ch, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "TG_TEST_TOKEN_X");
    setenv("TG_TEST_TOKEN_X", "999:zzzzzzzzzz", 1);
    EXPECT_INT(cm_gw_telegram_open(root, "two", dir, &ch, err, sizeof err), CM_OK);
    ch->ops->close(ch);
    unsetenv("TG_TEST_TOKEN_X");
    /* a token that would change the URL */
    json_t *tg = json_object_get(json_object_get(root, "channels"), "telegram");
    json_object_set_new(tg, "botToken", json_string("12:ab/../x"));
    EXPECT_INT(cm_gw_telegram_open(root, NULL, dir, &ch, err, sizeof err), CM_ECONFIG);
    EXPECT(!strstr(err, "ab/../x"));
    json_object_set_new(tg, "botToken", json_string("12:ab"));
    json_object_set_new(tg, "apiBaseUrl", json_string("ftp://x"));
    EXPECT_INT(cm_gw_telegram_open(root, NULL, dir, &ch, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "apiBaseUrl");
    json_decref(root);
}

TEST(tg_config_api_root_is_the_key)
{
    /* QuantumClaw's apiRoot, per account too; the old apiBaseUrl only
     * where no apiRoot is set at the same level or above */
    char *dir = tmp_dir();
    char err[512] = "";
    gw_channel *ch = NULL;
    json_t *root = json_loads("{\"channels\":{\"telegram\":{\"botToken\":\"12:ab\","
                              "\"apiRoot\":\"ftp://root\",\"accounts\":{\"two\":{"
                              "\"apiRoot\":\"http://127.0.0.1:1/\"},\"three\":{"
                              "\"apiBaseUrl\":\"gopher://old\"}}}}}",
                              0, NULL);
    EXPECT_INT(cm_gw_telegram_open(root, NULL, dir, &ch, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "channels.telegram.apiRoot");
    EXPECT_INT(cm_gw_telegram_open(root, "two", dir, &ch, err, sizeof err), CM_OK);
    ch->ops->close(ch);
    EXPECT_INT(cm_gw_telegram_open(root, "three", dir, &ch, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "apiBaseUrl");
    /* apiRoot wins over apiBaseUrl at the same level */
    json_t *tg = json_object_get(json_object_get(root, "channels"), "telegram");
    json_object_set_new(tg, "apiRoot", json_string("http://127.0.0.1:1"));
    json_object_set_new(tg, "apiBaseUrl", json_string("ftp://x"));
    EXPECT_INT(cm_gw_telegram_open(root, NULL, dir, &ch, err, sizeof err), CM_OK);
    ch->ops->close(ch);
    json_decref(root);
}

/* One odd update used to stop Telegram for everyone: jansson refuses
 * \u0000 and lone surrogates, so every poll failed as "not JSON" and the
 * offset never moved. Now they read as U+FFFD; an update that is still not
 * JSON is isolated (limit 1) and skipped past; one the gateway refuses for
 * good (CM_EINVAL) is skipped; lastError clears once a poll goes through. */
TEST(tg_odd_updates_never_stop_polling)
{
    rig r;
    rig_start(&r, NULL);
    gw_channel *ch = NULL;
    char err[512] = "";
    EXPECT_INT(cm_gw_telegram_open(r.root, NULL, r.state, &ch, err, sizeof err), CM_OK);
    tgfake_add_raw_update(&r.f, 5,
                          "{\"update_id\":5,\"message\":{\"message_id\":5,\"from\":{\"id\":42,"
                          "\"first_name\":\"\\ud83d\"},\"chat\":{\"id\":42,\"type\":\"private\"},"
                          "\"text\":\"a\\u0000b\\udc00c\"}}");
    tgfake_add_raw_update(&r.f, 6,
                          "{\"update_id\":6,\"message\":{\"message_id\":6,\"from\":{\"id\":42},"
                          "\"chat\":{\"id\":42,\"type\":\"private\"},\"text\":\"\\ud83d\\ude00 "
                          "\\\\u0000 \\\"q\\\"\"}}");
    tgfake_add_raw_update(&r.f, 7,
                          "{\"update_id\":7,\"message\":{\"message_id\":7,\"from\":{\"id\":42},"
                          "\"chat\":{\"id\":42,\"type\":\"private\"},\"text\":\"bad \\x\"}}");
    tgfake_add_raw_update(&r.f, 8,
                          "{\"update_id\":8,\"message\":{\"message_id\":8,\"from\":{\"id\":42},"
                          "\"chat\":{\"id\":42,\"type\":\"private\"},\"text\":\"never\"}}");
    add_dm(&r.f, 9);
    r.s.refuse_text = "never";
    r.s.refuse_rc = CM_EINVAL;
    EXPECT_INT(ch->ops->start(ch, sink_fn, &r.s, err, sizeof err), CM_OK);
    WAIT_FOR(got_n(&r.s) >= 3 && offset_file(r.state, "default") == 9, 15000);
    char last[512];
    cm_gw_telegram_last_error(ch, last, sizeof last);
    ch->ops->close(ch);
    EXPECT_INT((int)got_n(&r.s), 3);
    EXPECT_STR(gs(json_array_get(r.s.got, 0), "text"), "a\xef\xbf\xbd"
                                                       "b\xef\xbf\xbd"
                                                       "c");
    EXPECT_STR(gs(json_array_get(r.s.got, 1), "text"), "\xf0\x9f\x98\x80 \\u0000 \"q\"");
    EXPECT_STR(gs(json_array_get(r.s.got, 2), "id"), "9");
    EXPECT_INT(offset_file(r.state, "default"), 9);
    EXPECT_STR(last, "");
    rig_stop(&r);
}

/* A long apiRoot: the failing request's URL in lastError (what `gateway
 * status` shows) is cut, and the cut used to fall inside the token, which
 * the exact-token redactor then missed. */
TEST(tg_long_base_url_never_shows_the_token)
{
    rig r;
    rig_start(&r, NULL);
    char err[512] = "", last[512] = "";
    for (size_t pad = 100; pad < 150; pad += 7) {
        buf base = BUF_INIT;
        (void)!cm_buf_adds(&base, "http://127.0.0.1:1/");
        for (size_t k = 0; k < pad; k++)
            (void)!cm_buf_addc(&base, 'p');
        json_t *tg = json_object_get(json_object_get(r.root, "channels"), "telegram");
        json_object_set_new(tg, "apiRoot", json_string(base.data));
        gw_channel *ch = NULL;
        EXPECT_INT(cm_gw_telegram_open(r.root, NULL, r.state, &ch, err, sizeof err), CM_OK);
        EXPECT_INT(ch->ops->start(ch, sink_fn, &r.s, err, sizeof err), CM_OK);
        cm_gw_telegram_last_error(ch, last, sizeof last);
        ch->ops->close(ch);
        EXPECT(last[0]);
        if (strstr(last, "AAE") || strstr(last, "secret") || strstr(last, "123456:"))
            test_fail(__FILE__, __LINE__, "pad %zu: %s", pad, last);
        cm_buf_release(&base);
    }
    rig_stop(&r);
}

/* ---- hostile updates ---- */

typedef struct logcap {
    pthread_mutex_t mu;
    buf text; /* every line, '\n' after each */
} logcap;

static void log_fn(void *ctx, cm_log_level level, const char *msg)
{
    (void)level;
    logcap *l = ctx;
    pthread_mutex_lock(&l->mu);
    cm_buf_adds(&l->text, msg);
    cm_buf_adds(&l->text, "\n");
    pthread_mutex_unlock(&l->mu);
}

static bool log_has(logcap *l, const char *s)
{
    pthread_mutex_lock(&l->mu);
    bool has = l->text.data && strstr(l->text.data, s);
    pthread_mutex_unlock(&l->mu);
    return has;
}

/* The text of the i-th message the sink took ("" when none). */
static const char *got_text(sink *s, size_t i)
{
    pthread_mutex_lock(&s->mu);
    const char *t = gs(json_array_get(s->got, i), "text");
    pthread_mutex_unlock(&s->mu);
    return t ? t : "";
}

/* A channel of r (default account) started with a log capture; NULL when
 * it could not be. */
static gw_channel *poison_start(rig *r, logcap *lc)
{
    static cm_logger lg;
    lg = (cm_logger){log_fn, lc};
    gw_channel *ch = NULL;
    char err[512] = "";
    if (cm_gw_telegram_open(r->root, NULL, r->state, &ch, err, sizeof err)) return NULL;
    cm_gw_telegram_set_logger(ch, &lg);
    if (ch->ops->start(ch, sink_fn, &r->s, err, sizeof err)) {
        ch->ops->close(ch);
        return NULL;
    }
    return ch;
}

/* A DM update as JSON text (for raw answers). */
#define DM(id, mid, text)                                                                          \
    "{\"update_id\":" id ",\"message\":{\"message_id\":" mid ",\"from\":{\"id\":42},"              \
    "\"chat\":{\"id\":42,\"type\":\"private\"},\"text\":\"" text "\"}}"

/* Between good updates: a chat id that is a string (refused and logged: it
 * used to become the peer as written, "../42"), a 1 MB text (delivered
 * whole: the answer's cap bounds it), entities past the end and splitting
 * a surrogate pair, and a reply chain of odd types (delivered). */
TEST(tg_poison_odd_fields)
{
    rig r;
    rig_start(&r, NULL);
    r.f.hold_ms = 100;
    logcap lc = {PTHREAD_MUTEX_INITIALIZER, BUF_INIT};
    add_dm(&r.f, 10);
    tgfake_add_raw_update(&r.f, 11,
                          "{\"update_id\":11,\"message\":{\"message_id\":11,\"from\":{\"id\":42},"
                          "\"chat\":{\"id\":\"../42\",\"type\":\"private\"},\"text\":\"str\"}}");
    buf big = BUF_INIT;
    cm_buf_adds(&big, "{\"update_id\":12,\"message\":{\"message_id\":12,\"from\":{\"id\":42},"
                      "\"chat\":{\"id\":42,\"type\":\"private\"},\"text\":\"");
    for (size_t i = 0; i < (1u << 20); i++)
        cm_buf_addc(&big, 'a' + (char)(i % 26));
    cm_buf_adds(&big, "\"}}");
    tgfake_add_raw_update(&r.f, 12, big.data);
    cm_buf_release(&big);
    tgfake_add_raw_update(&r.f, 13,
                          "{\"update_id\":13,\"message\":{\"message_id\":13,\"from\":{\"id\":42},"
                          "\"chat\":{\"id\":42,\"type\":\"private\"},\"text\":\"\\ud83d\\ude00 e\","
                          "\"entities\":[{\"type\":\"bold\",\"offset\":1,\"length\":1},"
                          "{\"type\":\"text_link\",\"offset\":5000,\"length\":-7,\"url\":7}],"
                          "\"reply_to_message\":{\"message_id\":1,\"reply_to_message\":"
                          "{\"message_id\":\"x\",\"chat\":7}}}}");
    add_dm(&r.f, 14);
    gw_channel *ch = poison_start(&r, &lc);
    EXPECT(ch != NULL);
    WAIT_FOR(offset_file(r.state, "default") == 14, 2000);
    if (ch) ch->ops->close(ch);
    EXPECT_INT(offset_file(r.state, "default"), 14);
    EXPECT(log_has(&lc, "telegram: update 11 refused"));
    EXPECT_INT((int)got_n(&r.s), 4);
    EXPECT_STR(got_text(&r.s, 0), "m10");
    EXPECT_INT((int)strlen(got_text(&r.s, 1)), 1 << 20);
    EXPECT_STR(got_text(&r.s, 2), "\xf0\x9f\x98\x80 e");
    EXPECT_STR(got_text(&r.s, 3), "m14");
    cm_buf_release(&lc.text);
    rig_stop(&r);
}

/* A server that sends an update again, one going backwards, and one with
 * update_id INT64_MAX: none is delivered, the next good one is; answers
 * of old updates only are not asked for again in a busy loop. INT64_MAX
 * used to be delivered and saved as the offset, whose "+ 1" overflowed, and
 * every later update counted as already seen: the bot went deaf. */
TEST(tg_poison_update_ids)
{
    rig r;
    rig_start(&r, NULL);
    r.f.hold_ms = 100;
    logcap lc = {PTHREAD_MUTEX_INITIALIZER, BUF_INIT};
    add_dm(&r.f, 14);
    gw_channel *ch = poison_start(&r, &lc);
    EXPECT(ch != NULL);
    WAIT_FOR(offset_file(r.state, "default") == 14, 2000);
    char *again = raw_json(200, "{\"ok\":true,\"result\":[" DM("14", "99", "dup") "," DM(
                                    "9", "98", "back") "," DM("15", "15", "m15") "]}");
    fake_push_raw(r.srv, again, false);
    WAIT_FOR(offset_file(r.state, "default") == 15, 2000);
    EXPECT_INT(offset_file(r.state, "default"), 15);
    char *max = raw_json(200, "{\"ok\":true,\"result\":[" DM("9223372036854775807", "97",
                                                             "max") "," DM("16", "16", "m16") "]}");
    fake_push_raw(r.srv, max, false);
    WAIT_FOR(offset_file(r.state, "default") == 16, 2000);
    /* answers of only what the offset confirmed: asked again after a wait
     * (the backoff, 50 ms here), not at once in a loop */
    char *stale = raw_json(200, "{\"ok\":true,\"result\":[" DM("16", "96", "stale") "]}");
    int n0 = fake_count(r.srv);
    int64_t t0 = cm_now_ms();
    for (int i = 0; i < 4; i++)
        fake_push_raw(r.srv, stale, false);
    WAIT_FOR(fake_count(r.srv) >= n0 + 5, 2000);
    int64_t took = cm_now_ms() - t0;
    if (ch) ch->ops->close(ch);
    EXPECT(fake_count(r.srv) >= n0 + 5);
    EXPECT(took >= 150);
    EXPECT_INT(offset_file(r.state, "default"), 16);
    EXPECT(log_has(&lc, "without a usable update_id"));
    EXPECT_INT((int)got_n(&r.s), 3);
    EXPECT_STR(got_text(&r.s, 0), "m14");
    EXPECT_STR(got_text(&r.s, 1), "m15");
    EXPECT_STR(got_text(&r.s, 2), "m16");
    free(again);
    free(max);
    free(stale);
    cm_buf_release(&lc.text);
    rig_stop(&r);
}

/* An answer larger than TG_BODY_MAX (one update of 16 MB and a bit), then an answer
 * that never ends: each is dropped at the cap, the big update is skipped
 * with a log line, the next good ones come, and a reopened channel that is
 * offered everything again delivers nothing twice. The engine reports a
 * transfer the channel dropped as canceled, which the poll took for a
 * stop: its thread ended and no update came again until a restart. */
TEST(tg_poison_answer_too_big)
{
    rig r;
    rig_start(&r, NULL);
    r.f.hold_ms = 100;
    logcap lc = {PTHREAD_MUTEX_INITIALIZER, BUF_INIT};
    buf big = BUF_INIT;
    cm_buf_adds(&big, "{\"update_id\":17,\"message\":{\"message_id\":17,\"from\":{\"id\":42},"
                      "\"chat\":{\"id\":42,\"type\":\"private\"},\"text\":\"");
    while (big.len < TG_BODY_MAX + 4096)
        cm_buf_adds(&big, "0123456789abcdef");
    cm_buf_adds(&big, "\"}}");
    tgfake_add_raw_update(&r.f, 17, big.data);
    cm_buf_release(&big);
    add_dm(&r.f, 18);
    gw_channel *ch = poison_start(&r, &lc);
    EXPECT(ch != NULL);
    WAIT_FOR(offset_file(r.state, "default") == 18, 5000);

    EXPECT_INT(offset_file(r.state, "default"), 18);
    EXPECT(log_has(&lc, "telegram: update 17 cannot be read; skipped"));
    buf chunk = BUF_INIT; /* big chunks: the cap, not the sending, takes the time */
    cm_buf_adds(&chunk, "{\"ok\":true,\"result\":[");
    while (chunk.len < (256u << 10))
        cm_buf_adds(&chunk, "                ");
    fake_push_endless(r.srv, chunk.data);
    cm_buf_release(&chunk);
    WAIT_FOR(fake_endless_sent(r.srv) > 0, 2000); /* the next poll took it */

    add_dm(&r.f, 19);
    WAIT_FOR(offset_file(r.state, "default") == 19, 3000);

    long long streamed = fake_endless_sent(r.srv);
    if (ch) ch->ops->close(ch);
    EXPECT_INT(offset_file(r.state, "default"), 19);
    EXPECT(streamed > 0 && streamed < (64ll << 20)); /* it came, and the client went away */
    EXPECT_INT((int)got_n(&r.s), 2);
    EXPECT_STR(got_text(&r.s, 0), "m18");
    EXPECT_STR(got_text(&r.s, 1), "m19");
    /* reopened: the server offers everything again; nothing comes twice */
    pthread_mutex_lock(&r.f.mu);
    json_array_clear(r.f.updates);
    json_array_clear(r.f.raw);
    pthread_mutex_unlock(&r.f.mu);
    for (int id = 16; id <= 19; id++)
        add_dm(&r.f, id);
    int p0 = tgfake_polls(&r.f);
    ch = poison_start(&r, &lc);
    EXPECT(ch != NULL);
    WAIT_FOR(tgfake_polls(&r.f) >= p0 + 1, 2000);
    if (ch) ch->ops->close(ch);
    EXPECT_INT((int)got_n(&r.s), 2);
    pthread_mutex_lock(&r.f.mu);
    EXPECT_INT((int)json_integer_value(json_array_get(r.f.offsets, (size_t)p0)), 20);
    pthread_mutex_unlock(&r.f.mu);
    cm_buf_release(&lc.text);
    rig_stop(&r);
}
