/*
 * test_leaks.c — secrets never leave through a message, a status or a
 * payload, end to end: each test gives clawmem a secret, makes the path
 * under test fail or answer in the way that would carry it out (a libpq
 * parse error quoting the DSN, a Control UI config payload, a token
 * endpoint echoing the refresh token), and looks for the secret's bytes in
 * everything that comes back.
 */
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "gw_run_world.h"
#include "test.h"
#include "ws_client.h"

/* Whether secret occurs in s (NULL: it does not). */
static bool shows(const char *s, const char *secret)
{
    return s && strstr(s, secret) != NULL;
}

/* ---- PostgreSQL: libpq quotes a DSN it cannot parse ------------------------------- */

/* libpq names what it could not parse, and for some mistakes that is the
 * whole DSN or the password: "end of string reached when looking for
 * matching "]" in IPv6 host address in URI: "postgresql://u:pw@[::1/db"",
 * "invalid percent-encoded token: "pw"", "missing "=" after "half"". Each
 * case fails before any connection is tried, so no server is needed. */
TEST(leaks_pg_dsn_libpq_cannot_parse_is_never_shown)
{
    static const struct {
        const char *dsn, *secret;
    } cases[] = {
        {"postgresql://clawuser:PgLeakPw4417@[::1/db", "PgLeakPw4417"},
        {"postgresql://clawuser:PgLeak%zzPw4417@127.0.0.1:1/db", "PgLeak%zzPw4417"},
        {"host=127.0.0.1 port=1 user=x password=PgLeak Pw4417half", "Pw4417half"},
    };
    char *dir = tmp_dir();
    char ws[1024], state[1024], cfg[1024];
    snprintf(ws, sizeof ws, "%s/ws", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    snprintf(cfg, sizeof cfg, "%s/qc.json", dir);
    write_file(ws, "MEMORY.md", "# Facts\nthe keeper notes\n");
    write_file(dir, "qc.json", "{}");
    write_file(state, "clawmem.json",
               "{agents: {defaults: {memorySearch: {provider: 'none', store: {driver: "
               "'postgres', dsn: '${CM_LEAK_DSN}'}}}}}");
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char env[256];
        snprintf(env, sizeof env, "CM_LEAK_DSN=%s", cases[i].dsn);
        const char *e[] = {env, NULL};
        const char *status[] = {"--workspace", ws,       "--state-dir", state, "--config",
                                cfg,           "status", "--json",      NULL};
        const char *index[] = {"--workspace", ws,  "--state-dir", state,
                               "--config",    cfg, "index",       NULL};
        const char *search[] = {"--workspace", ws,       "--state-dir", state, "--config",
                                cfg,           "search", "keeper",      NULL};
        const char *const *runs[] = {status, index, search};
        for (size_t k = 0; k < ARRAY_LEN(runs); k++) {
            run_result r = run_clawmem(e, runs[k]);
            EXPECT(!shows(r.out, cases[i].secret));
            EXPECT(!shows(r.err, cases[i].secret));
            /* the failure is still said: libpq's message, the secret redacted */
            EXPECT(shows(r.out, "cannot connect") || shows(r.err, "cannot connect"));
            if (shows(r.out, cases[i].secret) || shows(r.err, cases[i].secret))
                test_fail(__FILE__, __LINE__, "dsn %zu, run %zu: %s%s", i, k, r.out ? r.out : "",
                          r.err ? r.err : "");
            run_result_release(&r);
        }
    }
}

/* ---- the Control UI: config.get ---------------------------------------------------- */

/* config.get sends the config the gateway runs with, the merged files, to
 * every operator with the read scope, and clawmem.models.status each
 * provider's endpoint: a secret whose key does not say "token" or
 * "password" went too. The DSN of the clawmem.json overlay, a provider's
 * x-api-key / x-goog-api-key / Ocp-Apim-Subscription-Key header, an
 * endpoint's userinfo and ?key=. */
TEST(leaks_control_ui_config_and_models_hide_dsn_headers_and_url_credentials)
{
    wsgw w;
    memset(&w, 0, sizeof w);
    w.fs = fake_start(8, w.base);
    w.dir = tmp_dir();
    w.ws = cm_strdup(path_in(w.dir, "ws"));
    w.state = cm_strdup(path_in(w.dir, "state"));
    write_file(w.dir, "ws/MEMORY.md", "# Facts\n");
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"gateway\":{\"auth\":{\"token\":\"%s\"}},"
             "\"agents\":{\"defaults\":{\"contextTokens\":123456,\"model\":{\"primary\":\"openai/"
             "gpt-t\","
             "\"fallbacks\":[\"proxy/m1\"]},\"memorySearch\":{"
             "\"provider\":\"none\",\"chunking\":{\"tokens\":321},\"remote\":{\"baseUrl\":"
             "\"https://emb.example/v1?key=UrlQueryKey5521\"}}}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/v1\","
             "\"apiKey\":\"sk-test-ws-0001\",\"headers\":{"
             "\"x-api-key\":\"HdrXApiKey5521\",\"x-goog-api-key\":\"HdrGoogKey5521\","
             "\"Ocp-Apim-Subscription-Key\":\"HdrApimKey5521\"},\"models\":[]},"
             "\"proxy\":{\"baseUrl\":\"https://proxyuser:UrlUserPw5521@llm.example/v1\","
             "\"api\":\"openai-completions\",\"models\":[]}}},"
             "\"messages\":{\"inbound\":{\"debounceMs\":0}}}",
             WTOKEN, w.base);
    write_file(w.dir, "state/quantumclaw.json", cfg);
    /* the store stays SQLite: the DSN only has to be in the config */
    write_file(w.dir, "state/clawmem.json",
               "{\"agents\":{\"defaults\":{\"memorySearch\":{\"store\":{"
               "\"dsn\":\"postgresql://claw:DsnPw5521@db.example/mem\","
               "\"fts\":{\"tokenizer\":\"trigram\"}}}}}}");
    cm_options o = {NULL, w.ws, NULL, w.state, NULL, NULL, 1};
    cm_gateway_opts go = {"127.0.0.1:0", 1};
    char err[512];
    if (cm_gateway_start(&o, &go, &w.g, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "gateway: %s", err);
        fake_stop(w.fs);
        return;
    }
    const char *a = cm_gateway_address(w.g);
    w.port = a && strrchr(a, ':') ? (int)strtol(strrchr(a, ':') + 1, NULL, 10) : 0;
    wsc c;
    EXPECT(ws_open(&c, w.port, NULL, NULL));
    json_t *ch = ws_recv(&c, 5000); /* connect.challenge */
    json_decref(ch);
    char req[1024];
    snprintf(req, sizeof req,
             "{\"type\":\"req\",\"id\":\"1\",\"method\":\"connect\",\"params\":{"
             "\"minProtocol\":3,\"maxProtocol\":3,\"client\":{\"id\":\"test\",\"version\":\"1\","
             "\"platform\":\"linux\",\"mode\":\"test\"},\"role\":\"operator\",\"scopes\":"
             "[\"operator.read\"],\"auth\":{\"token\":\"%s\"}}}",
             WTOKEN);
    ws_send(&c, req);
    json_t *r = ws_res(&c);
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    r = ws_call(&c, "2", "config.get", "{}");
    char *s = r ? json_dumps(r, 0) : NULL;
    EXPECT(s && strstr(s, "__QUANTUMCLAW_REDACTED__"));
    static const char *const secrets[] = {
        WTOKEN,           "sk-test-ws-0001", "HdrXApiKey5521",  "HdrGoogKey5521",
        "HdrApimKey5521", "UrlUserPw5521",   "UrlQueryKey5521", "DsnPw5521",
    };
    for (size_t i = 0; i < ARRAY_LEN(secrets); i++)
        if (shows(s, secrets[i])) test_fail(__FILE__, __LINE__, "config.get shows %s", secrets[i]);
    /* what is no secret stays readable: the hosts of the endpoints, token
     * counts and the tokenizer (the reference hides keys ending in token) */
    EXPECT(shows(s, "llm.example") && shows(s, "emb.example") && shows(s, "db.example") == false);
    EXPECT(shows(s, "123456") && shows(s, "321") && shows(s, "\"trigram\""));
    free(s);
    json_decref(r);
    /* the Models page: each provider of the chain with its endpoint */
    r = ws_call(&c, "3", "clawmem.models.status", "{}");
    s = r ? json_dumps(r, 0) : NULL;
    for (size_t i = 0; i < ARRAY_LEN(secrets); i++)
        if (shows(s, secrets[i]))
            test_fail(__FILE__, __LINE__, "clawmem.models.status shows %s", secrets[i]);
    EXPECT(shows(s, "https://llm.example/v1"));
    free(s);
    json_decref(r);
    ws_close(&c);
    gw_down(&w);
}

/* ---- a whole gateway: a failed turn, its logs, files and status ------------------ */

/* Whether a file under dir (recursively; the two config files, which hold
 * the secrets by design, skipped) contains secret; names it in *where. */
static bool tree_shows(const char *dir, const char *secret, char *where, size_t n)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    bool found = false;
    while (d && !found && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            !strcmp(e->d_name, "quantumclaw.json") || !strcmp(e->d_name, "clawmem.json"))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st)) continue;
        if (S_ISDIR(st.st_mode)) {
            found = tree_shows(path, secret, where, n);
        } else if (S_ISREG(st.st_mode)) {
            buf b = BUF_INIT;
            if (cm_fs_read_file(path, 64u << 20, &b, NULL, 0) == CM_OK && b.len &&
                memmem(b.data, b.len, secret, strlen(secret))) {
                snprintf(where, n, "%s", path);
                found = true;
            }
            cm_buf_release(&b);
        }
    }
    if (d) closedir(d);
    return found;
}

/* The model's endpoint answers 401 with our request echoed back (the
 * Authorization header, a custom key header); the memory index's DSN is
 * one libpq cannot parse. A message comes in over the HTTP channel, the
 * turn fails: the reply, the gateway's stderr (its log), `gateway status
 * --json`, and every file the gateway wrote (transcripts, sessions.json,
 * the journal, status.json, auth-profiles' usage) hold none of the
 * secrets. */
TEST(leaks_gateway_failed_turn_leaves_no_secret_anywhere)
{
    static const char *const secrets[] = {"sk-e2e-LeakKey5521abcdef", "HdrLeak5521xyz",
                                          "PgLeak5521pw", "tok-leak-gw-5521"};
    char base[64];
    fake_server *fs = fake_start(8, base);
    for (int i = 0; i < 4; i++)
        fake_push(fs, FAKE_ECHO, 401, -1);
    char *dir = tmp_dir();
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"gateway\":{\"auth\":{\"token\":\"tok-leak-gw-5521\"}},"
             "\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\"}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/v1\","
             "\"apiKey\":\"sk-e2e-LeakKey5521abcdef\",\"headers\":{\"X-Custom-Key\":"
             "\"HdrLeak5521xyz\"},\"models\":[]}}},"
             "\"messages\":{\"inbound\":{\"debounceMs\":0}}}",
             base);
    write_file(dir, "state/quantumclaw.json", cfg);
    write_file(dir, "state/clawmem.json",
               "{\"channels\":{\"http\":{\"dmPolicy\":\"open\",\"allowFrom\":[\"*\"]}},"
               "\"agents\":{\"defaults\":{\"memorySearch\":{\"provider\":\"none\",\"store\":{"
               "\"driver\":\"postgres\",\"dsn\":\"postgresql://claw:PgLeak5521pw@[::1/mem\"}}}}}");
    write_file(dir, "ws/MEMORY.md", "# Facts\n");
    char *state = cm_strdup(path_in(dir, "state"));
    char *ws = cm_strdup(path_in(dir, "ws"));
    const char *args[] = {"--state-dir", state,      "--workspace", ws,
                          "gateway",     "--listen", "127.0.0.1:0", NULL};
    proc p;
    proc_start(&p, NULL, args);
    char addr[64] = "";
    EXPECT(wait_line(&p, addr, sizeof addr));
    buf r = BUF_INIT;
    char body[256];
    snprintf(body, sizeof body, "{\"peer\":\"lena\",\"messageId\":\"l1\",\"text\":\"%s\"}",
             "what do you remember?");
    EXPECT_INT(t_http(addr, "POST", "/v1/messages", "tok-leak-gw-5521", body, &r), 202);
    json_t *rep = NULL;
    for (int i = 0; i < 100; i++) { /* the failed turn's reply */
        json_decref(rep);
        buf rb = BUF_INIT;
        t_http(addr, "GET", "/v1/replies?peer=lena&after=0", "tok-leak-gw-5521", NULL, &rb);
        rep = json_loads(rb.data ? rb.data : "", 0, NULL);
        cm_buf_release(&rb);
        if (json_array_size(json_object_get(rep, "replies"))) break;
        usleep(30000);
    }
    EXPECT(json_array_size(json_object_get(rep, "replies")) >= 1);
    char *replies = rep ? json_dumps(rep, 0) : NULL;
    /* the Control UI: a chat.send that fails (its error event), then
     * chat.history and logs.tail, all frames kept */
    buf frames = BUF_INIT;
    wsc c;
    const char *colon = strrchr(addr, ':');
    EXPECT(colon && ws_open(&c, (int)strtol(colon + 1, NULL, 10), NULL, NULL));
    json_t *ch = ws_recv(&c, 5000); /* connect.challenge */
    json_decref(ch);
    ws_send(&c, "{\"type\":\"req\",\"id\":\"1\",\"method\":\"connect\",\"params\":{"
                "\"minProtocol\":3,\"maxProtocol\":3,\"client\":{\"id\":\"test\",\"version\":"
                "\"1\",\"platform\":\"linux\",\"mode\":\"test\"},\"role\":\"operator\","
                "\"scopes\":[\"operator.read\",\"operator.write\"],\"auth\":{\"token\":"
                "\"tok-leak-gw-5521\"}}}");
    json_t *o = ws_res(&c);
    EXPECT(o && json_is_true(json_object_get(o, "ok")));
    json_decref(o);
    ws_send(&c, "{\"type\":\"req\",\"id\":\"2\",\"method\":\"chat.send\",\"params\":{"
                "\"sessionKey\":\"main\",\"message\":\"and now?\",\"idempotencyKey\":\"i-1\"}}");
    bool failed = false;
    for (int i = 0; i < 100 && !failed && (o = ws_recv(&c, 10000)) != NULL; i++) {
        char *t = json_dumps(o, 0);
        cm_buf_adds(&frames, t ? t : "");
        free(t);
        json_t *pl = json_object_get(o, "payload");
        failed = json_is_string(json_object_get(o, "event")) &&
                 !strcmp(json_string_value(json_object_get(o, "event")), "chat") &&
                 !strcmp(json_string_value(json_object_get(pl, "state")) ?: "", "error");
        json_decref(o);
    }
    EXPECT(failed);
    static const char *const calls[][2] = {
        {"chat.history", "{\"sessionKey\":\"main\"}"}, {"logs.tail", "{}"}, {"status", "{}"}};
    for (size_t i = 0; i < ARRAY_LEN(calls); i++) {
        o = ws_call(&c, "3", calls[i][0], calls[i][1]);
        EXPECT(o && json_is_true(json_object_get(o, "ok")));
        char *t = o ? json_dumps(o, 0) : NULL;
        cm_buf_adds(&frames, t ? t : "");
        free(t);
        json_decref(o);
    }
    EXPECT(shows(frames.data, "HTTP 401")); /* the failure is said, by logs.tail */
    ws_close(&c);
    EXPECT(fake_count(fs) >= 1); /* the model was asked, and echoed */
    EXPECT(fake_count(fs) >= 1 && shows(fake_get(fs, 0)->headers, "HdrLeak5521xyz"));
    run_result s = run_clawmem(
        NULL, (const char *const[]){"--state-dir", state, "gateway", "status", "--json", NULL});
    EXPECT_INT(proc_stop(&p, SIGTERM, 20000), 0);
    char *errs = proc_stderr(&p);
    for (size_t i = 0; i < ARRAY_LEN(secrets); i++) {
        char where[4096] = "";
        if (shows(replies, secrets[i]))
            test_fail(__FILE__, __LINE__, "the reply shows %s: %s", secrets[i], replies);
        if (shows(errs, secrets[i]))
            test_fail(__FILE__, __LINE__, "stderr shows %s: %s", secrets[i], errs);
        if (shows(frames.data, secrets[i]))
            test_fail(__FILE__, __LINE__, "a Control UI frame shows %s", secrets[i]);
        if (shows(s.out, secrets[i]) || shows(s.err, secrets[i]))
            test_fail(__FILE__, __LINE__, "gateway status shows %s", secrets[i]);
        if (tree_shows(state, secrets[i], where, sizeof where))
            test_fail(__FILE__, __LINE__, "%s holds %s", where, secrets[i]);
    }
    if (getenv("CM_LEAKS_SHOW"))
        fprintf(stderr, "replies: %s\nstderr: %s\nstatus: %s\nframes: %s\n", replies ? replies : "",
                errs ? errs : "", s.out ? s.out : "", frames.data ? frames.data : "");
    run_result_release(&s);
    cm_buf_release(&frames);
    free(errs);
    free(replies);
    json_decref(rep);
    cm_buf_release(&r);
    free(state);
    free(ws);
    fake_stop(fs);
}

/* ---- Telegram: the bot token is in every request's URL path ----------------------- */

/* The bot token travels in the Bot API URL (/bot<token>/getMe), so a
 * server echoing the request line and libcurl's failure text both carry
 * it. A getMe refused with the request echoed (the gateway does not
 * start), then a Bot API that cannot be reached (the gateway runs and
 * keeps the failure as the account's lastError): stderr, status.json and
 * `gateway status --json` never show it. */
TEST(leaks_telegram_token_in_the_url_never_shown)
{
    static const char *token = "987654321:AAE_LeakTokSecret5521abcdefghijklmnop";
    static const char *secret = "LeakTokSecret5521";
    char base[64];
    fake_server *fs = fake_start(8, base);
    fake_push(fs, FAKE_ECHO, 401, -1);
    char *dir = tmp_dir();
    char *state = cm_strdup(path_in(dir, "state"));
    char *ws = cm_strdup(path_in(dir, "ws"));
    write_file(dir, "ws/MEMORY.md", "# Facts\n");
    const char *roots[] = {base, "http://127.0.0.1:1"};
    for (int k = 0; k < 2; k++) {
        char cfg[1024];
        snprintf(cfg, sizeof cfg,
                 "{\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\"}},"
                 "\"channels\":{\"telegram\":{\"botToken\":\"%s\",\"apiRoot\":\"%s\","
                 "\"dmPolicy\":\"open\",\"allowFrom\":[\"*\"]}}}",
                 token, roots[k]);
        write_file(dir, "state/quantumclaw.json", cfg);
        write_file(dir, "state/clawmem.json",
                   "{agents:{defaults:{memorySearch:{provider:'none'}}}}");
        const char *args[] = {"--state-dir", state,      "--workspace", ws,
                              "gateway",     "--listen", "127.0.0.1:0", NULL};
        char *errs = NULL, *out = NULL;
        run_result st = {0, NULL, NULL};
        if (k == 0) { /* refused at getMe: no gateway */
            run_result r = run_clawmem(NULL, args);
            EXPECT(r.status != 0);
            EXPECT(shows(r.err, "getMe"));
            EXPECT(fake_count(fs) == 1 && shows(fake_get(fs, 0)->path, secret));
            errs = r.err, out = r.out;
        } else { /* unreachable: it runs, and says why in its status */
            proc p;
            proc_start(&p, NULL, args);
            char *line = proc_line(&p, 20000); /* "gateway: running" (no HTTP channel) */
            EXPECT(shows(line, "running"));
            free(line);
            for (int i = 0; i < 100; i++) {
                run_result_release(&st);
                st = run_clawmem(NULL, (const char *const[]){"--state-dir", state, "gateway",
                                                             "status", "--json", NULL});
                if (shows(st.out, "\"lastError\": \"telegram") ||
                    shows(st.out, "\"lastError\":\"telegram"))
                    break;
                usleep(30000);
            }
            EXPECT(shows(st.out, "lastError") && shows(st.out, "telegram getMe"));
            EXPECT_INT(proc_stop(&p, SIGTERM, 20000), 0);
            errs = proc_stderr(&p);
        }
        char where[4096] = "";
        if (shows(errs, secret) || shows(out, secret))
            test_fail(__FILE__, __LINE__, "case %d: output shows the token: %s", k,
                      errs ? errs : "");
        if (shows(st.out, secret))
            test_fail(__FILE__, __LINE__, "case %d: gateway status shows the token", k);
        if (tree_shows(state, secret, where, sizeof where))
            test_fail(__FILE__, __LINE__, "case %d: %s holds the token", k, where);
        if (getenv("CM_LEAKS_SHOW"))
            fprintf(stderr, "case %d:\nstderr: %s\nstatus: %s\n", k, errs ? errs : "",
                    st.out ? st.out : "");
        run_result_release(&st);
        free(errs);
        free(out);
    }
    free(state);
    free(ws);
    fake_stop(fs);
}
