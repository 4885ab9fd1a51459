/*
 * bench_http.c — TCP connections per 100 model turns and per 100 Telegram
 * sends on loopback, counted as connections the stand-in server accepted
 * (tests/fakeserver.c), with the engine's shared pool (net/transfer.c) and
 * with the pool emptied after every call (a new connection per call: what
 * every model call and Telegram send did before the one engine). Prints one
 * JSON object.
 */
#include <stdatomic.h>

#include "../src/gateway/channels/telegram.h"
#include "../src/llm/llm.h"
#include "../src/net/transfer.h"
#include "../tests/fake_telegram.h"
#include "../tests/fakeserver.h"

#define N 100

static void push_answer(fake_server *fs)
{
    static const char ev[] = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},"
                             "\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    char raw[512];
    snprintf(raw, sizeof raw,
             "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
             "Transfer-Encoding: chunked\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n",
             sizeof ev - 1, ev);
    fake_push_raw(fs, raw, false);
}

/* Connections for N model turns; *ms gets the mean wall time of a turn. */
static int model_turns(bool fresh, double *ms)
{
    char base[64], err[512];
    cm_http_pool_drain();
    fake_server *fs = fake_start(8, base);
    llm_endpoint ep = {LLM_API_OPENAI, base, "sk-bench-0000000000", false, NULL, 10000, 10000};
    llm_message msgs[] = {{.role = LLM_USER, .text = "hello"}};
    llm_request rq = {.model = "gpt-bench", .system = "sys", .messages = msgs, .n = 1, .stream = true};
    int64_t t0 = cm_now_ms();
    int ok = 0;
    for (int i = 0; i < N; i++) {
        push_answer(fs);
        llm_response out;
        llm_error e;
        if (cm_llm_chat(&ep, &rq, NULL, NULL, &out, &e, err, sizeof err) == CM_OK) ok++;
        cm_llm_response_release(&out);
        if (fresh) cm_http_pool_drain();
    }
    *ms = (double)(cm_now_ms() - t0) / N;
    int conns = fake_accepted(fs);
    fake_stop(fs);
    return ok == N ? conns : -1;
}

/* Connections for N Telegram sends. */
static int telegram_sends(const char *state, bool fresh, double *ms)
{
    char url[64], err[512];
    tgfake f;
    tgfake_init(&f);
    cm_http_pool_drain();
    fake_server *srv = fake_start(4, url);
    fake_handler(srv, tgfake_handler, &f);
    char cfg[256];
    snprintf(cfg, sizeof cfg, "{\"channels\":{\"telegram\":{\"botToken\":\"%s\",\"apiRoot\":\"%s/\"}}}",
             TGFAKE_TOKEN, url);
    json_t *root = json_loads(cfg, 0, NULL);
    gw_channel *ch = NULL;
    int conns = -1;
    if (cm_gw_telegram_open(root, NULL, state, &ch, err, sizeof err) == CM_OK) {
        int a0 = fake_accepted(srv), ok = 0;
        gw_outbound o = {NULL, "42", NULL, NULL, "hello there", false};
        int64_t t0 = cm_now_ms();
        for (int i = 0; i < N; i++) {
            if (ch->ops->send(ch, &o, err, sizeof err) == CM_OK) ok++;
            if (fresh) cm_http_pool_drain();
        }
        *ms = (double)(cm_now_ms() - t0) / N;
        if (ok == N) conns = fake_accepted(srv) - a0;
        ch->ops->close(ch);
    }
    atomic_store(&f.stop, 1);
    fake_stop(srv);
    tgfake_release(&f);
    json_decref(root);
    return conns;
}

int main(int argc, char **argv)
{
    char tmpl[] = "/tmp/clawmem-bench-http-XXXXXX";
    const char *state = argc > 1 ? argv[1] : mkdtemp(tmpl);
    if (!state) return 1;
    double m_ms, mf_ms, t_ms, tf_ms;
    int m = model_turns(false, &m_ms), mf = model_turns(true, &mf_ms);
    int t = telegram_sends(state, false, &t_ms), tf = telegram_sends(state, true, &tf_ms);
    printf("{\"model_turns\":%d,\"model_connections\":%d,\"model_connections_new_per_call\":%d,"
           "\"model_turn_ms\":%.3f,\"model_turn_ms_new_per_call\":%.3f,"
           "\"telegram_sends\":%d,\"telegram_connections\":%d,"
           "\"telegram_connections_new_per_call\":%d,\"telegram_send_ms\":%.3f,"
           "\"telegram_send_ms_new_per_call\":%.3f}\n",
           N, m, mf, m_ms, mf_ms, N, t, tf, t_ms, tf_ms);
    return m < 0 || t < 0;
}
