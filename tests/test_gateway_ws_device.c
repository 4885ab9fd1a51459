/*
 * test_gateway_ws_device.c — the gateway protocol's device identity over a
 * real socket (ws_client.c): the reference CLI's recorded frames replayed
 * (re-signed with the recorded key), and the device identity checks.
 */
#include <dlfcn.h>

#include "../src/base/sha256.h"
#include "ws_client.h"

/* ---- the reference CLI's frames, replayed ---------------------------------------- */

/* Ed25519 signing by libcrypto (dlopen, as src/base/ed25519.c verifies): the
 * tests' stand-in for the key a client keeps. */
static bool t_sign(const unsigned char priv[32], const char *msg, unsigned char sig[64],
                   unsigned char pub[32])
{
    void *h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!h) return false;
    void *(*new_priv)(int, void *, const unsigned char *, size_t);
    int (*get_pub)(const void *, unsigned char *, size_t *);
    void *(*ctx_new)(void);
    void (*ctx_free)(void *), (*pkey_free)(void *);
    int (*init)(void *, void **, const void *, void *, void *);
    int (*sign)(void *, unsigned char *, size_t *, const unsigned char *, size_t);
    *(void **)&new_priv = dlsym(h, "EVP_PKEY_new_raw_private_key");
    *(void **)&get_pub = dlsym(h, "EVP_PKEY_get_raw_public_key");
    *(void **)&ctx_new = dlsym(h, "EVP_MD_CTX_new");
    *(void **)&ctx_free = dlsym(h, "EVP_MD_CTX_free");
    *(void **)&pkey_free = dlsym(h, "EVP_PKEY_free");
    *(void **)&init = dlsym(h, "EVP_DigestSignInit");
    *(void **)&sign = dlsym(h, "EVP_DigestSign");
    bool ok = false;
    if (new_priv && get_pub && ctx_new && ctx_free && pkey_free && init && sign) {
        void *k = new_priv(1087, NULL, priv, 32), *ctx = ctx_new();
        size_t pl = 32, sl = 64;
        ok = k && ctx && get_pub(k, pub, &pl) == 1 && init(ctx, NULL, NULL, NULL, k) == 1 &&
             sign(ctx, sig, &sl, (const unsigned char *)msg, strlen(msg)) == 1 && sl == 64;
        if (ctx) ctx_free(ctx);
        if (k) pkey_free(k);
    }
    dlclose(h);
    return ok;
}

static void t_b64url(const unsigned char *p, size_t n, char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        if (i + 1 < n) out[o++] = a[v >> 6 & 63];
        if (i + 2 < n) out[o++] = a[v & 63];
    }
    out[o] = 0;
}

/* Re-signs a recorded connect's params for a live challenge with the test's
 * key, as the reference's client signs (the v3 payload): everything else
 * the CLI sent stays as it sent it. False without libcrypto. */
static bool t_resign(json_t *p, const char *nonce, int64_t now)
{
    static const unsigned char priv[32] = {7, 1, 4, 2, 8, 5, 7, 1, 4, 2, 8, 5, 7, 1, 4, 2,
                                           8, 5, 7, 1, 4, 2, 8, 5, 7, 1, 4, 2, 8, 5, 7, 1};
    unsigned char sig[64], pub[32], md[32];
    if (!t_sign(priv, "x", sig, pub)) return false; /* the public key first: the id is its hash */
    char id[65], pk[64], sg[100];
    cm_sha256(pub, 32, md);
    for (int i = 0; i < 32; i++)
        snprintf(id + 2 * i, 3, "%02x", md[i]);
    t_b64url(pub, 32, pk);
    json_t *client = json_object_get(p, "client");
    buf m = BUF_INIT;
    cm_buf_printf(&m, "v3|%s|%s|%s|%s|", id, json_string_value(json_object_get(client, "id")),
                  json_string_value(json_object_get(client, "mode")),
                  json_string_value(json_object_get(p, "role")));
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(p, "scopes"), i, s)
    {
        cm_buf_printf(&m, "%s%s", i ? "," : "", json_string_value(s));
    }
    const char *plat = json_string_value(json_object_get(client, "platform"));
    cm_buf_printf(&m, "|%lld|%s|%s|%s|", (long long)now,
                  json_string_value(json_object_get(json_object_get(p, "auth"), "token")), nonce,
                  plat ? plat : "");
    bool ok = t_sign(priv, m.data, sig, pub);
    cm_buf_release(&m);
    t_b64url(sig, 64, sg);
    json_object_set_new(p, "device", json_pack("{s:s,s:s,s:s,s:I,s:s}", "id", id, "publicKey", pk,
                                               "signature", sg, "signedAt", (json_int_t)now,
                                               "nonce", nonce));
    return ok;
}

/* The frames `openclaw gateway call` sent (one connection per call: the
 * connect with its signed device identity, then the method), replayed
 * against clawmem's gateway with the device re-signed for clawmem's
 * challenge: each connect is accepted, and each method answers ok as the
 * reference's gateway did (tests/fixtures/reference-cli-frames.json). */
TEST(gateway_ws_replays_the_reference_cli_frames)
{
    json_t *doc = json_load_file("tests/fixtures/reference-cli-frames.json", 0, NULL);
    EXPECT(doc != NULL);
    const char *token = json_string_value(json_object_get(doc, "token"));
    wsgw w;
    if (!gw_up_token(&w, token)) return;
    fake_push_chat_text(w.fs, "CLI round trip answer.", 50);
    json_t *frames = json_object_get(doc, "frames");
    int conns = 0, methods = 0;
    wsc c;
    bool open = false;
    int conn = 0;
    size_t i;
    json_t *m;
    json_array_foreach(frames, i, m)
    {
        const char *dir = json_string_value(json_object_get(m, "dir"));
        json_t *f = json_object_get(m, "frame");
        if (strcmp(dir, "client")) continue;
        int n = (int)json_integer_value(json_object_get(m, "conn"));
        if (n != conn) {
            if (open) ws_close(&c);
            conn = n;
            EXPECT(ws_open(&c, w.port, NULL, NULL));
            open = true;
        }
        const char *method = json_string_value(json_object_get(f, "method"));
        json_t *sent = json_deep_copy(f);
        if (!strcmp(method, "connect")) {
            json_t *ch = ws_recv(&c, 5000);
            const char *nonce =
                json_string_value(json_object_get(json_object_get(ch, "payload"), "nonce"));
            EXPECT(nonce != NULL);
            if (!t_resign(json_object_get(sent, "params"), nonce, cm_wall_ms())) {
                json_decref(ch), json_decref(sent), json_decref(doc), ws_close(&c), gw_down(&w);
                SKIP("libcrypto", "libcrypto.so.3 cannot be loaded");
            }
            json_decref(ch);
            conns++;
        } else {
            methods++;
        }
        char *text = json_dumps(sent, JSON_COMPACT);
        ws_send(&c, text);
        free(text);
        json_decref(sent);
        json_t *r = ws_res(&c);
        /* what the reference's gateway answered the same frame */
        json_t *want = NULL;
        size_t j;
        json_t *x;
        json_array_foreach(frames, j, x)
        {
            json_t *xf = json_object_get(x, "frame");
            if (json_integer_value(json_object_get(x, "conn")) == n &&
                !strcmp(json_string_value(json_object_get(x, "dir")), "server") &&
                json_equal(json_object_get(xf, "id"), json_object_get(f, "id")))
                want = xf;
        }
        if (!r || !want || json_is_true(json_object_get(r, "ok")) !=
                               json_is_true(json_object_get(want, "ok")))
            test_fail(__FILE__, __LINE__, "%s: clawmem answered %s", method,
                      r ? json_dumps(r, JSON_COMPACT) : "nothing");
        if (r && !strcmp(method, "connect"))
            EXPECT_STR(json_string_value(json_object_get(json_object_get(r, "payload"), "type")),
                       "hello-ok");
        /* every field of the reference's answer, with its JSON type (a new
         * gateway has no session "main" yet: no sessionId then) */
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(want, "payload"), key, v)
        {
            json_t *got = json_object_get(json_object_get(r, "payload"), key);
            if (!strcmp(method, "connect") || (!got && !strcmp(key, "sessionId"))) continue;
            if (!got || json_typeof(got) != json_typeof(v))
                test_fail(__FILE__, __LINE__, "%s: %s missing or of another type", method, key);
        }
        json_decref(r);
    }
    if (open) ws_close(&c);
    EXPECT(conns >= 5 && methods >= 5);
    json_decref(doc);
    gw_down(&w);
}

/* A signed device is taken from a loopback client only when it is not a
 * browser page, as the reference's silent local pairing; a signature that
 * does not cover what was sent is refused with the reference's codes. */
TEST(gateway_ws_device_identity_checks)
{
    wsgw w;
    if (!gw_up(&w)) return;
    static const char base[] =
        "{\"minProtocol\":3,\"maxProtocol\":3,\"client\":{\"id\":\"cli\",\"version\":\"1\","
        "\"platform\":\"linux\",\"mode\":\"cli\"},\"role\":\"operator\","
        "\"scopes\":[\"operator.read\"],\"auth\":{\"token\":\"" WTOKEN "\"}}";
    for (int k = 0; k < 3; k++) {
        wsc c;
        char origin[64];
        snprintf(origin, sizeof origin, "http://127.0.0.1:%d", w.port);
        EXPECT(ws_open(&c, w.port, k == 1 ? origin : NULL, NULL));
        json_t *ch = ws_recv(&c, 5000);
        const char *nonce =
            json_string_value(json_object_get(json_object_get(ch, "payload"), "nonce"));
        json_t *p = json_loads(base, 0, NULL);
        if (!t_resign(p, nonce ? nonce : "", cm_wall_ms())) {
            json_decref(p), json_decref(ch), ws_close(&c), gw_down(&w);
            SKIP("libcrypto", "libcrypto.so.3 cannot be loaded");
        }
        if (k == 2) /* signed for read, asks for admin */
            json_array_append_new(json_object_get(p, "scopes"), json_string("operator.admin"));
        json_t *req = json_pack("{s:s,s:s,s:s,s:o}", "type", "req", "id", "1", "method",
                                "connect", "params", p);
        char *text = json_dumps(req, JSON_COMPACT);
        ws_send(&c, text);
        free(text);
        json_decref(req);
        json_decref(ch);
        json_t *r = ws_res(&c);
        json_t *e = json_object_get(r, "error");
        const char *dcode = json_string_value(json_object_get(json_object_get(e, "details"), "code"));
        if (k == 0) {
            EXPECT(r && json_is_true(json_object_get(r, "ok")));
            json_t *h = ws_call(&c, "2", "health", "{}");
            EXPECT(h && json_is_true(json_object_get(h, "ok")));
            json_decref(h);
            /* the TUI's first call */
            h = ws_call(&c, "3", "agents.list", "{}");
            json_t *pl = json_object_get(h, "payload");
            EXPECT_STR(json_string_value(json_object_get(pl, "defaultId")), "main");
            EXPECT_STR(json_string_value(json_object_get(pl, "mainKey")), "main");
            EXPECT_STR(json_string_value(json_object_get(pl, "scope")), "per-sender");
            EXPECT_STR(json_string_value(
                           json_object_get(json_array_get(json_object_get(pl, "agents"), 0), "id")),
                       "main");
            json_decref(h);
        } else if (k == 1) {
            EXPECT(r && json_is_false(json_object_get(r, "ok")));
            EXPECT_STR(json_string_value(json_object_get(e, "code")), "NOT_PAIRED");
            EXPECT_STR(dcode, "PAIRING_REQUIRED");
        } else {
            EXPECT(r && json_is_false(json_object_get(r, "ok")));
            EXPECT_STR(json_string_value(json_object_get(e, "code")), "INVALID_REQUEST");
            EXPECT_STR(dcode, "DEVICE_AUTH_SIGNATURE_INVALID");
        }
        json_decref(r);
        ws_close(&c);
    }
    gw_down(&w);
}
