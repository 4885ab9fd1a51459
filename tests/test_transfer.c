/*
 * test_transfer.c — the one HTTP transfer engine (src/net/transfer.c): its
 * header parser and retry policy alone, then connection reuse counted at the
 * loopback server (model calls and Telegram sends), Retry-After honoured by
 * the one policy for a model call and a Telegram send, and the shared pool
 * used from several threads at once (run it under `make tsan`).
 */
#include <pthread.h>

#include "../src/gateway/channels/telegram.h"
#include "../src/llm/llm.h"
#include "../src/net/http_headers.h"
#include "../src/net/http_retry.h"
#include "../src/net/transfer.h"
#include "fake_telegram.h"
#include "fakeserver.h"
#include "test.h"

static void meta_feed(http_meta *m, const char *line, int64_t now_s)
{
    cm_http_meta_line(m, line, strlen(line), now_s);
}

TEST(transfer_header_parser)
{
    http_meta m;
    cm_http_meta_init(&m);
    int64_t now = 784111777 - 7; /* 7 s before Sun, 06 Nov 1994 08:49:37 GMT */
    meta_feed(&m, "HTTP/1.1 302 Found\r\n", now);
    meta_feed(&m, "X-Linked-Etag: W/\"abc123\"\r\n", now);
    meta_feed(&m, "Retry-After: 3\r\n", now);
    EXPECT_INT(m.status, 302);
    EXPECT_INT(m.retry_after_ms, 3000);
    meta_feed(&m, "HTTP/2 206\r\n", now); /* a new response: all but the linked etag forgotten */
    EXPECT_INT(m.status, 206);
    EXPECT_INT(m.retry_after_ms, -1);
    EXPECT_STR(m.linked_etag, "abc123");
    meta_feed(&m, "content-type: text/event-stream; charset=utf-8\r\n", now);
    meta_feed(&m, "Content-Length: 12345\r\n", now);
    meta_feed(&m, "Content-Range: bytes 100-199/5000\r\n", now);
    EXPECT_STR(m.content_type, "text/event-stream");
    EXPECT_INT(m.content_length, 12345);
    EXPECT_INT(m.range_first, 100);
    EXPECT_INT(m.range_total, 5000);
    meta_feed(&m, "Retry-After: Sun, 06 Nov 1994 08:49:37 GMT\r\n", now);
    EXPECT_INT(m.retry_after_ms, 7000);
    meta_feed(&m, "Content-Length: 99999999999999999999999\r\n", now);
    EXPECT_INT(m.content_length, -1);
    /* hostile values: unreadable, negative, in the past, huge */
    EXPECT_INT(cm_http_retry_after_ms("soon", now), -1);
    EXPECT_INT(cm_http_retry_after_ms("-5", now), -1);
    EXPECT_INT(cm_http_retry_after_ms("12abc", now), -1);
    EXPECT_INT(cm_http_retry_after_ms("Sun, 06 Nov 1994 08:49:37 GMT", now + 100), 0);
    EXPECT_INT(cm_http_retry_after_ms("99999999999", now), 86400L * 1000);
    EXPECT_INT(cm_http_retry_after_ms("Sun, 32 Nov 1994 08:49:37 GMT", now), -1);
}

TEST(transfer_retry_policy)
{
    uint64_t seed = 42;
    http_retry emb = {4, 500, 60000, 0, false, false};
    http_outcome r429 = {429, -1, false}, r400 = {400, -1, false}, net = {0, -1, true};
    /* backoff doubles with ±25% jitter */
    for (int a = 1; a <= 3; a++) {
        long base = 500L << (a - 1);
        for (int k = 0; k < 50; k++) {
            long d = cm_http_retry_delay(&emb, a, &r429, &seed);
            EXPECT(d >= base * 3 / 4 && d <= base * 5 / 4);
        }
    }
    EXPECT_INT(cm_http_retry_delay(&emb, 4, &r429, &seed), -1); /* attempts used up */
    EXPECT_INT(cm_http_retry_delay(&emb, 1, &r400, &seed), -1); /* not retryable */
    EXPECT(cm_http_retry_delay(&emb, 1, &net, &seed) >= 375);
    /* Retry-After wins when longer, cut at the cap */
    http_outcome ra = {503, 7000, false};
    EXPECT_INT(cm_http_retry_delay(&emb, 1, &ra, &seed), 7000);
    ra.retry_after_ms = 600000;
    EXPECT_INT(cm_http_retry_delay(&emb, 1, &ra, &seed), 60000);
    /* a model call: only when asked, and not for a long wait */
    http_retry model = {3, 250, 5000, 5000, true, true};
    EXPECT_INT(cm_http_retry_delay(&model, 1, &r429, &seed), -1);
    EXPECT_INT(cm_http_retry_delay(&model, 1, &net, &seed), -1);
    EXPECT_INT(cm_http_retry_delay(&model, 1, &ra, &seed), -1);
    ra.retry_after_ms = 1000;
    EXPECT_INT(cm_http_retry_delay(&model, 1, &ra, &seed), 1000);
    /* one attempt unless the caller says the call may be repeated */
    http_retry once = {0};
    EXPECT_INT(cm_http_retry_delay(&once, 1, &ra, &seed), -1);
}

/* A streamed OpenAI answer that keeps its connection (chunked, as the real
 * APIs send). */
static void push_kept_answer(fake_server *fs, const char *text)
{
    buf ev = BUF_INIT, raw = BUF_INIT;
    cm_buf_printf(&ev,
                  "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"},"
                  "\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
                  text);
    cm_buf_printf(&raw,
                  "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n",
                  ev.len, ev.data);
    fake_push_raw(fs, raw.data, false);
    cm_buf_release(&ev);
    cm_buf_release(&raw);
}

static cm_rc model_call(const char *base, char *text, size_t textlen, char *err, size_t errlen)
{
    llm_endpoint ep = {LLM_API_OPENAI, base, "sk-test-key-0009", false, NULL, 5000, 5000};
    llm_message msgs[] = {{LLM_USER, "hello", NULL, 0, NULL, NULL, false, NULL, 0, NULL, NULL, NULL}};
    llm_request rq = {"gpt-test", "sys", msgs, 1,    NULL, 0,    0,   true,
                      NULL,       NULL,  NULL, NULL, NULL, NULL, NULL, 0, NULL, false, false, false};
    llm_response out;
    llm_error e;
    cm_rc rc = cm_llm_chat(&ep, &rq, NULL, NULL, &out, &e, err, errlen);
    if (!rc && text) snprintf(text, textlen, "%s", out.text.data ? out.text.data : "");
    cm_llm_response_release(&out);
    return rc;
}

TEST(transfer_model_calls_reuse_connections)
{
    char base[64], err[512] = "", text[64];
    cm_http_pool_drain();
    fake_server *fs = fake_start(8, base);
    for (int i = 0; i < 20; i++) {
        char want[32];
        snprintf(want, sizeof want, "turn %d", i);
        push_kept_answer(fs, want);
        EXPECT_INT(model_call(base, text, sizeof text, err, sizeof err), CM_OK);
        EXPECT_STR(text, want);
    }
    EXPECT_INT(fake_count(fs), 20);
    EXPECT(fake_accepted(fs) <= 2); /* one connection per call before the engine: 20 */
    fake_stop(fs);
}

TEST(transfer_model_call_honours_retry_after)
{
    char base[64], err[512] = "", text[64];
    fake_server *fs = fake_start(8, base);
    fake_push_raw(fs,
                  "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
                  "Retry-After: 1\r\nContent-Length: 44\r\n\r\n"
                  "{\"error\":{\"message\":\"Rate limit reached\"}}\n\n",
                  false);
    push_kept_answer(fs, "after the wait");
    int64_t t0 = cm_now_ms();
    EXPECT_INT(model_call(base, text, sizeof text, err, sizeof err), CM_OK);
    EXPECT(cm_now_ms() - t0 >= 950);
    EXPECT_STR(text, "after the wait");
    EXPECT_INT(fake_count(fs), 2);
    EXPECT_INT(fake_accepted(fs), 1);
    /* a wait longer than a model call waits in place: back to the runner */
    fake_push_raw(fs,
                  "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
                  "Retry-After: 30\r\nContent-Length: 2\r\n\r\n{}",
                  false);
    t0 = cm_now_ms();
    EXPECT_INT(model_call(base, text, sizeof text, err, sizeof err), CM_EIO);
    EXPECT(cm_now_ms() - t0 < 900);
    EXPECT_CONTAINS(err, "HTTP 429");
    EXPECT_INT(fake_count(fs), 3);
    fake_stop(fs);
}

TEST(transfer_telegram_sends_reuse_connections_and_honour_retry_after)
{
    char url[64], err[512] = "";
    tgfake f;
    tgfake_init(&f);
    cm_http_pool_drain();
    fake_server *srv = fake_start(4, url);
    fake_handler(srv, tgfake_handler, &f);
    char *state = tmp_dir();
    buf b = BUF_INIT;
    cm_buf_printf(&b, "{\"channels\":{\"telegram\":{\"botToken\":\"%s\",\"apiRoot\":\"%s/\"}}}",
                  TGFAKE_TOKEN, url);
    json_t *root = json_loads(b.data, 0, NULL);
    cm_buf_release(&b);
    gw_channel *ch = NULL;
    EXPECT_INT(cm_gw_telegram_open(root, NULL, state, &ch, err, sizeof err), CM_OK);
    if (!ch) goto out;
    int a0 = fake_accepted(srv);
    gw_outbound o = {NULL, "42", NULL, NULL, "hi", false};
    for (int i = 0; i < 20; i++)
        EXPECT_INT(ch->ops->send(ch, &o, err, sizeof err), CM_OK);
    EXPECT(fake_accepted(srv) - a0 <= 2); /* before the engine: 20 */
    /* 429 with a Retry-After header only: waited, then sent on the same
     * connection */
    int a1 = fake_accepted(srv), n1 = fake_count(srv);
    fake_push_raw(srv,
                  "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
                  "Retry-After: 1\r\nContent-Length: 2\r\n\r\n{}",
                  false);
    int64_t t0 = cm_now_ms();
    EXPECT_INT(ch->ops->send(ch, &o, err, sizeof err), CM_OK);
    EXPECT(cm_now_ms() - t0 >= 950);
    EXPECT_INT(fake_count(srv), n1 + 2);
    EXPECT_INT(fake_accepted(srv), a1);
    ch->ops->close(ch);
out:
    atomic_store(&f.stop, 1);
    fake_stop(srv);
    tgfake_release(&f);
    json_decref(root);
}

typedef struct par {
    const char *url;
    int ok;
} par;

static bool sink_bytes(http_fetch *f, const char *p, size_t n)
{
    (void)p;
    *(size_t *)f->ctx += n;
    return true;
}

static void *par_run(void *arg)
{
    par *p = arg;
    for (int i = 0; i < 15; i++) {
        size_t got = 0;
        char err[256];
        http_fetch f = {.url = p->url, .on_data = sink_bytes, .ctx = &got};
        if (cm_http_fetch_run(&f, err, sizeof err) == CM_OK && f.status == 200 && got == 11) p->ok++;
    }
    return NULL;
}

TEST(transfer_pool_shared_by_threads)
{
    char base[64];
    fake_server *fs = fake_start(8, base);
    fake_file(fs, "/f.bin", "hello world", 11);
    char url[128];
    snprintf(url, sizeof url, "%s/f.bin", base);
    par ps[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        ps[i] = (par){url, 0};
        pthread_create(&t[i], NULL, par_run, &ps[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        EXPECT_INT(ps[i].ok, 15);
    }
    EXPECT(fake_accepted(fs) <= 8); /* 60 requests; a connection per thread or so */
    fake_stop(fs);
}
