/*
 * test_embed.c — the embedding providers against the loopback fake server:
 * the exact requests of each provider, batching, headers, and the faults a
 * real API shows (429 with Retry-After, 500, 503, a hang, a truncated body,
 * not JSON, wrong dimensions or count, NaN).
 */
#include <jansson.h>
#include <math.h>
#include <time.h>

#include "../src/embed/embed.h"
#include "fakeserver.h"
#include "test.h"

static fake_server *srv;
static char base[64];

static cm_rc provider(const char *json, embed_provider *p, char *err, size_t errlen)
{
    cm_config c;
    cm_config_args a = {NULL, "/ws", NULL, "/tmp/qc-embed-state"};
    buf text = BUF_INIT; /* json with "%s" standing for the server's URL */
    const char *at = strstr(json, "%s");
    if (at) {
        cm_buf_add(&text, json, (size_t)(at - json));
        cm_buf_adds(&text, base);
        cm_buf_adds(&text, at + 2);
    } else {
        cm_buf_adds(&text, json);
    }
    cm_rc rc = cm_config_parse(text.data, text.len, "qc.json", &a, NULL, &c, err, errlen);
    cm_buf_release(&text);
    if (rc) return rc;
    rc = cm_embed_open(&c, strcmp(c.provider, "auto") ? c.provider : cm_embed_auto(&c), p, err,
                       errlen);
    cm_config_release(&c);
    return rc;
}

static void setup(void)
{
    setenv("CLAWMEM_HTTP_BACKOFF_MS", "10", 1);
    setenv("CLAWMEM_HTTP_TIMEOUT_MS", "2000", 1);
    unsetenv("OPENAI_API_KEY");
    unsetenv("GEMINI_API_KEY");
    unsetenv("VOYAGE_API_KEY");
    unsetenv("MISTRAL_API_KEY");
    srv = fake_start(64, base);
}

static const char *texts[] = {"alpha beta", "gamma", "alpha gamma"};

TEST(embed_openai_request_and_answer)
{
    setup();
    embed_provider p;
    char err[512];
    EXPECT_INT(
        provider("{agents:{defaults:{memorySearch:{provider:'openai',remote:{baseUrl:'%s/v1/',"
                 "apiKey:'sk-test',headers:{'X-Org':'o1'}}}}}}",
                 &p, err, sizeof err),
        CM_OK);
    float *v = NULL;
    EXPECT_INT(cm_embed_documents(&p, texts, 3, &v, err, sizeof err), CM_OK);
    EXPECT_INT(p.dims, 64);
    const fake_request *r = fake_get(srv, 0);
    EXPECT_STR(r->method, "POST");
    EXPECT_STR(r->path, "/v1/embeddings");
    EXPECT_CONTAINS(r->headers, "Authorization: Bearer sk-test\r\n");
    EXPECT_CONTAINS(r->headers, "X-Org: o1\r\n");
    EXPECT_CONTAINS(r->headers, "Content-Type: application/json\r\n");
    EXPECT_STR(r->body, "{\"model\":\"text-embedding-3-small\",\"input\":[\"alpha beta\",\"gamma\","
                        "\"alpha gamma\"],\"encoding_format\":\"float\"}");
    float want[64];
    fake_vector("gamma", 64, want);
    for (int i = 0; i < 64; i++)
        EXPECT_NEAR(v[64 + i], want[i], 1e-6);
    free(v);
    EXPECT_INT(cm_embed_query(&p, "what about alpha", &v, err, sizeof err), CM_OK);
    free(v);
    cm_embed_close(&p);
    fake_stop(srv);
}

TEST(embed_other_providers_requests)
{
    setup();
    embed_provider p;
    char err[512];
    float *v = NULL;
    /* gemini: batchEmbedContents for documents, embedContent for a query */
    EXPECT_INT(
        provider("{agents:{defaults:{memorySearch:{provider:'gemini',remote:{baseUrl:'%s'}}}},"
                 "models:{providers:{google:{apiKey:'g-key'}}}}",
                 &p, err, sizeof err),
        CM_OK);
    EXPECT_INT(cm_embed_documents(&p, texts, 2, &v, err, sizeof err), CM_OK);
    free(v);
    EXPECT_INT(cm_embed_query(&p, "q", &v, err, sizeof err), CM_OK);
    free(v);
    cm_embed_close(&p);
    EXPECT_STR(fake_get(srv, 0)->path, "/models/gemini-embedding-001:batchEmbedContents");
    EXPECT_CONTAINS(fake_get(srv, 0)->headers, "x-goog-api-key: g-key\r\n");
    EXPECT_STR(
        fake_get(srv, 0)->body,
        "{\"requests\":[{\"model\":\"models/gemini-embedding-001\",\"content\":{\"parts\":[{"
        "\"text\":\"alpha beta\"}]},\"taskType\":\"RETRIEVAL_DOCUMENT\"},{\"model\":\"models/"
        "gemini-embedding-001\",\"content\":{\"parts\":[{\"text\":\"gamma\"}]},\"taskType\":"
        "\"RETRIEVAL_DOCUMENT\"}]}");
    EXPECT_STR(fake_get(srv, 1)->path, "/models/gemini-embedding-001:embedContent");
    EXPECT_CONTAINS(fake_get(srv, 1)->body, "\"taskType\":\"RETRIEVAL_QUERY\"");
    /* voyage: input_type */
    setenv("VOYAGE_API_KEY", "v-key", 1);
    EXPECT_INT(
        provider("{agents:{defaults:{memorySearch:{provider:'voyage',remote:{baseUrl:'%s'}}}}}", &p,
                 err, sizeof err),
        CM_OK);
    EXPECT_INT(cm_embed_query(&p, "q", &v, err, sizeof err), CM_OK);
    free(v);
    cm_embed_close(&p);
    EXPECT_STR(fake_get(srv, 2)->body,
               "{\"model\":\"voyage-4-large\",\"input\":[\"q\"],\"input_type\":\"query\"}");
    EXPECT_CONTAINS(fake_get(srv, 2)->headers, "Authorization: Bearer v-key\r\n");
    /* mistral */
    EXPECT_INT(provider("{agents:{defaults:{memorySearch:{provider:'mistral',remote:{baseUrl:'%s',"
                        "apiKey:'m'}}}}}",
                        &p, err, sizeof err),
               CM_OK);
    EXPECT_INT(cm_embed_documents(&p, texts, 1, &v, err, sizeof err), CM_OK);
    free(v);
    cm_embed_close(&p);
    EXPECT_STR(fake_get(srv, 3)->body, "{\"model\":\"mistral-embed\",\"input\":[\"alpha beta\"]}");
    /* ollama: one prompt per request, no key */
    EXPECT_INT(
        provider("{agents:{defaults:{memorySearch:{provider:'ollama',remote:{baseUrl:'%s'}}}}}", &p,
                 err, sizeof err),
        CM_OK);
    EXPECT_INT(cm_embed_documents(&p, texts, 3, &v, err, sizeof err), CM_OK);
    free(v);
    cm_embed_close(&p);
    EXPECT_INT(fake_count(srv), 4 + 3);
    EXPECT_STR(fake_get(srv, 4)->path, "/api/embeddings");
    EXPECT(strstr(fake_get(srv, 4)->headers, "Authorization") == NULL);
    unsetenv("VOYAGE_API_KEY");
    fake_stop(srv);
}

TEST(embed_auto_selection_and_keys)
{
    setup();
    cm_config c;
    char err[256];
    cm_config_args a = {NULL, "/ws", NULL, "/tmp/qc-embed-state"};
    EXPECT_INT(cm_config_parse("{}", 2, "qc.json", &a, NULL, &c, err, sizeof err), CM_OK);
    EXPECT(cm_embed_auto(&c) == NULL);
    setenv("MISTRAL_API_KEY", "m", 1);
    EXPECT_STR(cm_embed_auto(&c), "mistral");
    setenv("GEMINI_API_KEY", "g", 1);
    EXPECT_STR(cm_embed_auto(&c), "gemini");
    setenv("OPENAI_API_KEY", "o", 1);
    EXPECT_STR(cm_embed_auto(&c), "openai");
    unsetenv("OPENAI_API_KEY");
    unsetenv("GEMINI_API_KEY");
    unsetenv("MISTRAL_API_KEY");
    embed_provider p;
    EXPECT_INT(cm_embed_open(&c, "voyage", &p, err, sizeof err), CM_ENOTFOUND);
    EXPECT_CONTAINS(err, "VOYAGE_API_KEY");
    cm_config_release(&c);
    fake_stop(srv);
}

TEST(embed_batches_by_count_and_bytes)
{
    setup();
    embed_provider p;
    char err[512];
    EXPECT_INT(provider("{agents:{defaults:{memorySearch:{provider:'openai',remote:{baseUrl:'%s',"
                        "apiKey:'k'}}}},"
                        "clawmem:{embedMaxInputs:2}}",
                        &p, err, sizeof err),
               CM_OK);
    const char *five[] = {"a", "b", "c", "d", "e"};
    float *v = NULL;
    EXPECT_INT(cm_embed_documents(&p, five, 5, &v, err, sizeof err), CM_OK);
    free(v);
    EXPECT_INT(fake_count(srv), 3);
    char big[3][5001];
    for (int i = 0; i < 3; i++) {
        memset(big[i], 'a' + i, 5000);
        big[i][5000] = 0;
    }
    const char *bigs[] = {big[0], big[1], big[2]};
    EXPECT_INT(cm_embed_documents(&p, bigs, 3, &v, err, sizeof err),
               CM_OK); /* 8000 bytes per request */
    free(v);
    EXPECT_INT(fake_count(srv), 6);
    cm_embed_close(&p);
    fake_stop(srv);
}

static double elapsed(struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

TEST(embed_faults)
{
    setup();
    embed_provider p;
    char err[512];
    float *v = NULL;
    EXPECT_INT(provider("{agents:{defaults:{memorySearch:{provider:'openai',remote:{baseUrl:'%s',"
                        "apiKey:'sk-secret'}}}}}",
                        &p, err, sizeof err),
               CM_OK);
    /* 429 with Retry-After: 1 is waited out, then it succeeds */
    fake_push(srv, FAKE_STATUS, 429, 1);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    EXPECT_INT(cm_embed_documents(&p, texts, 1, &v, err, sizeof err), CM_OK);
    free(v);
    EXPECT(elapsed(&t0) >= 0.95);
    /* 500 then 503 then fine */
    fake_push(srv, FAKE_STATUS, 500, -1);
    fake_push(srv, FAKE_STATUS, 503, -1);
    EXPECT_INT(cm_embed_documents(&p, texts, 1, &v, err, sizeof err), CM_OK);
    free(v);
    /* a truncated body is retried */
    fake_push(srv, FAKE_TRUNCATED, 200, -1);
    EXPECT_INT(cm_embed_documents(&p, texts, 1, &v, err, sizeof err), CM_OK);
    free(v);
    /* 401 is final, and the key is not in the message */
    fake_push(srv, FAKE_STATUS, 401, -1);
    EXPECT_INT(cm_embed_documents(&p, texts, 1, &v, err, sizeof err), CM_EIO);
    EXPECT_CONTAINS(err, "HTTP 401");
    EXPECT_CONTAINS(err, "after 1 attempt");
    EXPECT(strstr(err, "sk-secret") == NULL);
    /* always 500: gives up after 4 attempts */
    for (int i = 0; i < 4; i++)
        fake_push(srv, FAKE_STATUS, 500, -1);
    EXPECT_INT(cm_embed_documents(&p, texts, 1, &v, err, sizeof err), CM_EIO);
    EXPECT_CONTAINS(err, "after 4 attempts");
    /* malformed answers */
    fake_push(srv, FAKE_BAD_JSON, 200, -1);
    EXPECT_INT(cm_embed_documents(&p, texts, 2, &v, err, sizeof err), CM_EIO);
    EXPECT_CONTAINS(err, "not valid JSON");
    fake_push(srv, FAKE_NAN, 200, -1);
    EXPECT_INT(cm_embed_documents(&p, texts, 2, &v, err, sizeof err), CM_EIO);
    fake_push(srv, FAKE_WRONG_COUNT, 200, -1);
    EXPECT_INT(cm_embed_documents(&p, texts, 2, &v, err, sizeof err), CM_EIO);
    EXPECT_CONTAINS(err, "wrong number");
    fake_push(srv, FAKE_WRONG_DIMS, 200, -1);
    EXPECT_INT(cm_embed_documents(&p, texts, 2, &v, err, sizeof err), CM_EIO);
    EXPECT_CONTAINS(err, "dimensions");
    fake_push(srv, FAKE_ZERO, 200, -1);
    EXPECT_INT(cm_embed_query(&p, "x", &v, err, sizeof err), CM_OK);
    EXPECT(v[0] == 0 && v[63] == 0);
    free(v);
    /* a hang times out (each attempt), then fails clearly */
    setenv("CLAWMEM_HTTP_TIMEOUT_MS", "200", 1);
    for (int i = 0; i < 4; i++)
        fake_push(srv, FAKE_HANG, 200, -1);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    EXPECT_INT(cm_embed_query(&p, "x", &v, err, sizeof err), CM_EIO);
    EXPECT_CONTAINS(err, "imeout");
    EXPECT(elapsed(&t0) < 5);
    cm_embed_close(&p);
    fake_stop(srv);
}

/* No secret may be in err, and no line break or escape either. */
static bool leaks(const char *err, const char *const *secrets)
{
    for (size_t i = 0; secrets[i]; i++)
        if (strstr(err, secrets[i])) return true;
    for (const char *c = err; *c; c++)
        if ((unsigned char)*c < 0x20) return true;
    return false;
}

TEST(embed_echoing_endpoint_is_redacted)
{
    setup();
    embed_provider p;
    char err[512], json[512];
    float *v = NULL;
    static const char *const secrets[] = {"sk-live-SECRETKEY0123456789",
                                          "customsecret99",
                                          "urlpass42",
                                          "AIzaGEMINIKEY",
                                          "Bearer sk",
                                          NULL};
    /* OpenAI-style: Authorization: Bearer, remote.headers, userinfo in baseUrl. */
    snprintf(json, sizeof json,
             "{agents:{defaults:{memorySearch:{provider:'openai',remote:{baseUrl:'http://"
             "bob:urlpass42@%s/v1',apiKey:'sk-live-SECRETKEY0123456789',"
             "headers:{'X-Custom-Auth':'customsecret99'}}}}}}",
             base + 7);
    EXPECT_INT(provider(json, &p, err, sizeof err), CM_OK);
    fake_push(srv, FAKE_ECHO, 401, -1);
    EXPECT_INT(cm_embed_documents(&p, texts, 1, &v, err, sizeof err), CM_EIO);
    /* the server did see the secrets, and echoed them */
    EXPECT_CONTAINS(fake_get(srv, fake_count(srv) - 1)->headers, "sk-live-SECRETKEY0123456789");
    EXPECT_CONTAINS(err, "HTTP 401");
    EXPECT_CONTAINS(err, "unauthorized");
    EXPECT_CONTAINS(err, "[redacted]");
    EXPECT(!strstr(err, "bob@"));
    EXPECT(!leaks(err, secrets));
    cm_embed_close(&p);
    /* Gemini: x-goog-api-key. */
    EXPECT_INT(provider("{agents:{defaults:{memorySearch:{provider:'gemini',remote:{baseUrl:'%s',"
                        "apiKey:'AIzaGEMINIKEY'}}}}}",
                        &p, err, sizeof err),
               CM_OK);
    fake_push(srv, FAKE_ECHO, 403, -1);
    EXPECT_INT(cm_embed_query(&p, "x", &v, err, sizeof err), CM_EIO);
    EXPECT_CONTAINS(err, "HTTP 403");
    EXPECT(!leaks(err, secrets));
    cm_embed_close(&p);
    fake_stop(srv);
}

TEST(embed_keys_from_auth_profiles_rotate)
{
    /* No key in the config: the agent's auth profiles give it; a 401 cools
     * the first profile down and the next one's key is used. auto picks
     * openai from the profiles alone. */
    setup();
    char *state = tmp_dir();
    write_file(
        state, "agents/main/agent/auth-profiles.json",
        "{\"version\":1,\"profiles\":{"
        "\"openai:a\":{\"type\":\"api_key\",\"provider\":\"openai\",\"key\":\"sk-profile-aaaa\"},"
        "\"openai:b\":{\"type\":\"api_key\",\"provider\":\"openai\",\"key\":\"sk-profile-bbbb\"}}"
        "}");
    buf cfgtext = BUF_INIT;
    cm_buf_printf(&cfgtext, "{agents:{defaults:{memorySearch:{remote:{baseUrl:'%s/v1'}}}}}", base);
    cm_config c;
    cm_config_args a = {NULL, "/ws", NULL, state};
    char err[512];
    EXPECT_INT(cm_config_parse(cfgtext.data, cfgtext.len, "qc.json", &a, NULL, &c, err, sizeof err),
               CM_OK);
    cm_buf_release(&cfgtext);
    EXPECT_STR(cm_embed_auto(&c), "openai");
    embed_provider p;
    EXPECT_INT(cm_embed_open(&c, "openai", &p, err, sizeof err), CM_OK);
    fake_push(srv, FAKE_STATUS, 401, -1);
    float *v = NULL;
    EXPECT_INT(cm_embed_documents(&p, texts, 3, &v, err, sizeof err), CM_OK);
    free(v);
    EXPECT_INT(fake_count(srv), 2);
    EXPECT_CONTAINS(fake_get(srv, 0)->headers, "Authorization: Bearer sk-profile-aaaa\r\n");
    EXPECT_CONTAINS(fake_get(srv, 1)->headers, "Authorization: Bearer sk-profile-bbbb\r\n");
    cm_embed_close(&p);
    json_t *doc = json_load_file(path_in(state, "agents/main/agent/auth-profiles.json"), 0, NULL);
    json_t *sa = json_object_get(json_object_get(doc, "usageStats"), "openai:a");
    EXPECT(json_integer_value(json_object_get(sa, "cooldownUntil")) > 0);
    EXPECT_INT(json_integer_value(json_object_get(json_object_get(sa, "failureCounts"), "auth")),
               1);
    json_decref(doc);
    /* The next provider opened skips the cooling profile. */
    EXPECT_INT(cm_embed_open(&c, "openai", &p, err, sizeof err), CM_OK);
    EXPECT_INT(cm_embed_query(&p, "gamma", &v, err, sizeof err), CM_OK);
    free(v);
    EXPECT_CONTAINS(fake_get(srv, 2)->headers, "Authorization: Bearer sk-profile-bbbb\r\n");
    /* Both refused: the error names the failure, never a key. */
    fake_push(srv, FAKE_STATUS, 401, -1);
    EXPECT(cm_embed_query(&p, "gamma", &v, err, sizeof err) != CM_OK);
    EXPECT(strstr(err, "sk-profile") == NULL);
    cm_embed_close(&p);
    cm_config_release(&c);
    fake_stop(srv);
}
