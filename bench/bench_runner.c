/*
 * bench_runner.c — `make bench`, the model runner's overhead: a turn through
 * cm_llm_run against a zero-latency loopback fake, next to the same request
 * made directly with the HTTP client (cm_http_fetch_run, the same body and the
 * same answer), streamed and not; with a key from the config (nothing
 * written) and with an auth profile (lastUsed and lastGood written, under
 * the lock, each turn). Then the time to order 1,000 auth profiles of one
 * provider. Prints one JSON object; times in microseconds (p50 and p99).
 * Usage: bench_runner WORKDIR
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../src/base/fs.h"
#include "../src/net/http.h"
#include "../src/llm/runner.h"
#include "../tests/fakeserver.h"

#define TURNS 400

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static json_t *stats(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return json_pack("{s:f,s:f}", "p50", v[n / 2], "p99", v[n * 99 / 100]);
}

static const char sse[] =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %zu\r\n\r\n%s";
static const char sse_body[] =
    "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Biscuit.\"}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
    "data: "
    "{\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":3,\"total_tokens\":123}"
    "}\n\n"
    "data: [DONE]\n\n";
static const char json_body[] =
    "{\"id\":\"c\",\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"Biscuit.\"},"
    "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":3,\"total_"
    "tokens\":123}}";

static void push(fake_server *fs, bool stream)
{
    char raw[2048];
    const char *body = stream ? sse_body : json_body;
    snprintf(
        raw, sizeof raw,
        stream
            ? sse
            : "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
        strlen(body), body);
    fake_push_raw(fs, raw, false);
}

static bool sink(http_fetch *f, const char *p, size_t n)
{
    (void)f, (void)p, (void)n;
    return true;
}

static const llm_message msg = {.role = LLM_USER, .text = "What is the dog called?"};

/* One raw request, as the runner would send it. */
static double raw_turn(fake_server *fs, const char *url, bool stream)
{
    cm_strlist h = {0};
    cm_config_header_set(&h, "Authorization: Bearer sk-bench-0000000000");
    cm_config_header_set(&h, "Content-Type: application/json");
    char body[512];
    snprintf(body, sizeof body,
             "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"What is the dog "
             "called?\"}],\"stream\":%s}",
             stream ? "true" : "false");
    push(fs, stream);
    http_fetch f = {
        .url = url, .headers = &h, .body = body, .body_len = strlen(body), .on_data = sink};
    char err[256];
    double t0 = now_us();
    cm_http_fetch_run(&f, err, sizeof err);
    double dt = now_us() - t0;
    for (size_t i = 0; i < h.n; i++)
        free(h.v[i]);
    free(h.v);
    return dt;
}

static double runner_turn(fake_server *fs, llm_runner *r, bool stream)
{
    llm_request rq = {.messages = &msg, .n = 1, .stream = stream};
    llm_turn t = {NULL, false, NULL};
    llm_response out;
    llm_outcome oc;
    char err[512];
    push(fs, stream);
    double t0 = now_us();
    cm_rc rc = cm_llm_run(r, &t, &rq, NULL, NULL, &out, &oc, err, sizeof err);
    double dt = now_us() - t0;
    if (rc) fprintf(stderr, "bench_runner: %s\n", err);
    cm_llm_response_release(&out);
    return dt;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: bench_runner WORKDIR\n");
        return 1;
    }
    char base[64], url[128], state[4096], err[512];
    fake_server *fs = fake_start(8, base);
    snprintf(url, sizeof url, "%s/v1/chat/completions", base);
    json_t *out = json_object();
    static double v[TURNS];
    for (int mode = 0; mode < 2; mode++) { /* 0: key in the config, 1: an auth profile */
        snprintf(state, sizeof state, "%s/state%d", argv[1], mode);
        cm_fs_mkdirs(state, err, sizeof err);
        if (mode == 1) {
            char p[4200];
            snprintf(p, sizeof p, "%s/agents/main/agent", state);
            cm_fs_mkdirs(p, err, sizeof err);
            snprintf(p, sizeof p, "%s/agents/main/agent/auth-profiles.json", state);
            FILE *f = fopen(p, "w");
            fputs("{\"version\":1,\"profiles\":{\"openai:a\":{\"type\":\"api_key\",\"provider\":"
                  "\"openai\",\"key\":\"sk-bench-0000000000\"}}}",
                  f);
            fclose(f);
        }
        char cfg[512];
        snprintf(cfg, sizeof cfg,
                 "{\"agents\":{\"defaults\":{\"model\":\"openai/m\"}},\"models\":{\"providers\":"
                 "{\"openai\":{\"baseUrl\":\"%s/v1\"%s}}}}",
                 base, mode == 0 ? ",\"apiKey\":\"sk-bench-0000000000\"" : "");
        json_t *c = json_loads(cfg, 0, NULL);
        llm_runner_opts o = {c, state, "main", NULL, NULL};
        llm_runner *r;
        if (cm_llm_runner_open(&o, &r, err, sizeof err)) {
            fprintf(stderr, "bench_runner: %s\n", err);
            return 1;
        }
        for (int stream = 1; stream >= 0; stream--) {
            for (int i = 0; i < 20; i++) /* warm-up: connections, page cache */
                runner_turn(fs, r, stream), raw_turn(fs, url, stream);
            json_t *m = json_object();
            for (int i = 0; i < TURNS; i++)
                v[i] = raw_turn(fs, url, stream);
            json_object_set_new(m, "raw", stats(v, TURNS));
            for (int i = 0; i < TURNS; i++)
                v[i] = runner_turn(fs, r, stream);
            json_object_set_new(m, "runner", stats(v, TURNS));
            json_object_set_new(out,
                                mode == 0 ? (stream ? "configKeyStreaming" : "configKeyWhole")
                                          : (stream ? "profileStreaming" : "profileWhole"),
                                m);
        }
        cm_llm_runner_close(r);
        json_decref(c);
    }
    fake_stop(fs);

    /* Ordering 1,000 profiles of one provider: types mixed, a tenth cooling. */
    json_t *doc = json_pack("{s:i,s:{},s:{}}", "version", 1, "profiles", "usageStats");
    for (int i = 0; i < 1000; i++) {
        char id[32];
        snprintf(id, sizeof id, "openai:p%04d", i);
        json_object_set_new(json_object_get(doc, "profiles"), id,
                            json_pack("{s:s,s:s,s:s}", "type", i % 3 ? "api_key" : "token",
                                      "provider", "openai", i % 3 ? "key" : "token", "k"));
        json_t *st =
            json_pack("{s:I}", "lastUsed", (json_int_t)(1800000000000LL + (i * 7919) % 1000));
        if (i % 10 == 0)
            json_object_set_new(st, "cooldownUntil", json_integer(1900000000000LL + i));
        json_object_set_new(json_object_get(doc, "usageStats"), id, st);
    }
    auth_store s = {NULL, doc};
    for (int i = 0; i < 200; i++) {
        char **order = NULL;
        double t0 = now_us();
        cm_auth_profile_order(&s, NULL, "openai", NULL, 1800000000000LL, &order);
        v[i] = now_us() - t0;
        cm_auth_strv_free(order);
    }
    json_object_set_new(out, "order1000Profiles", stats(v, 200));
    json_decref(doc);
    char *text = json_dumps(out, JSON_COMPACT);
    puts(text);
    free(text);
    json_decref(out);
    return 0;
}
