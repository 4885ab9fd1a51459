/*
 * test_gateway_device.c — the device identity QuantumClaw's clients sign
 * into their connect req, checked against frames the reference's own CLI
 * (`openclaw gateway call`, openclaw@2026.3.22) sent to the reference's
 * gateway: tests/fixtures/reference-cli-frames.json, recorded by
 * `make compat` (tests/compat/run.mjs --record). The signature there is the
 * CLI's real one over the nonce the reference's gateway challenged it with.
 */
#include <jansson.h>

#include "../src/gateway/control/gw_device.h"
#include "test.h"

#define FRAMES "tests/fixtures/reference-cli-frames.json"

/* The first connection's challenge nonce and connect params (borrowed from
 * doc), or false. */
static bool first_connect(json_t *doc, const char **nonce, json_t **params)
{
    *nonce = NULL, *params = NULL;
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(doc, "frames"), i, m)
    {
        json_t *f = json_object_get(m, "frame");
        const char *dir = json_string_value(json_object_get(m, "dir"));
        const char *ev = json_string_value(json_object_get(f, "event"));
        const char *method = json_string_value(json_object_get(f, "method"));
        if (!*nonce && dir && !strcmp(dir, "server") && ev && !strcmp(ev, "connect.challenge"))
            *nonce = json_string_value(json_object_get(json_object_get(f, "payload"), "nonce"));
        if (*nonce && dir && !strcmp(dir, "client") && method && !strcmp(method, "connect")) {
            *params = json_object_get(f, "params");
            return true;
        }
    }
    return false;
}

TEST(gateway_device_verifies_the_reference_cli_signature)
{
    json_t *doc = json_load_file(FRAMES, 0, NULL);
    const char *nonce;
    json_t *p;
    EXPECT(doc && first_connect(doc, &nonce, &p));
    json_t *dev = json_object_get(p, "device");
    EXPECT(json_is_object(dev));
    int64_t at = json_integer_value(json_object_get(dev, "signedAt"));
    gw_device_refusal why = {0};
    EXPECT(cm_gw_device_verify(p, nonce, at + 1000, &why));
    EXPECT(cm_gw_device_verify(p, nonce, at - 119000, &why));

    /* two minutes off either way: expired */
    EXPECT(!cm_gw_device_verify(p, nonce, at + 121000, &why));
    EXPECT_STR(why.code, "DEVICE_AUTH_SIGNATURE_EXPIRED");
    EXPECT_STR(why.reason, "device-signature-stale");
    /* another challenge */
    EXPECT(!cm_gw_device_verify(p, "some-other-nonce", at, &why));
    EXPECT_STR(why.code, "DEVICE_AUTH_NONCE_MISMATCH");

    json_t *q = json_deep_copy(p);
    json_t *qd = json_object_get(q, "device");
    /* a scope added after signing: the signature no longer covers it */
    json_array_append_new(json_object_get(q, "scopes"), json_string("operator.extra"));
    EXPECT(!cm_gw_device_verify(q, nonce, at, &why));
    EXPECT_STR(why.message, "device signature invalid");
    EXPECT_STR(why.reason, "device-signature");
    json_decref(q);
    /* another token than the one signed */
    q = json_deep_copy(p);
    json_object_set_new(json_object_get(q, "auth"), "token", json_string("not-the-token"));
    EXPECT(!cm_gw_device_verify(q, nonce, at, &why));
    EXPECT_STR(why.code, "DEVICE_AUTH_SIGNATURE_INVALID");
    json_decref(q);
    /* an id that is not the key's fingerprint */
    q = json_deep_copy(p);
    qd = json_object_get(q, "device");
    json_object_set_new(qd, "id", json_string("0000000000000000000000000000000000000000000000000000000000000000"));
    EXPECT(!cm_gw_device_verify(q, nonce, at, &why));
    EXPECT_STR(why.code, "DEVICE_AUTH_DEVICE_ID_MISMATCH");
    json_decref(q);
    /* no nonce; a signedAt that is not a number */
    q = json_deep_copy(p);
    qd = json_object_get(q, "device");
    json_object_set_new(qd, "nonce", json_string("  "));
    EXPECT(!cm_gw_device_verify(q, nonce, at, &why));
    EXPECT_STR(why.code, "DEVICE_AUTH_NONCE_REQUIRED");
    json_object_set_new(qd, "signedAt", json_string("now"));
    EXPECT(!cm_gw_device_verify(q, nonce, at, &why));
    EXPECT_STR(why.code, "DEVICE_AUTH_SIGNATURE_EXPIRED");
    json_decref(q);
    json_decref(doc);
}

TEST(gateway_device_base64url_decoding)
{
    unsigned char out[8];
    EXPECT_INT(cm_gw_base64url_decode("aGk", out, sizeof out), 2);
    EXPECT(out[0] == 'h' && out[1] == 'i');
    EXPECT_INT(cm_gw_base64url_decode("aGk=", out, sizeof out), 2);
    EXPECT_INT(cm_gw_base64url_decode("_-8", out, sizeof out), 2);
    EXPECT(out[0] == 0xff && out[1] == 0xef);
    EXPECT_INT(cm_gw_base64url_decode("a b", out, sizeof out), -1);
    EXPECT_INT(cm_gw_base64url_decode("AAAAAAAAAAAAAAAA", out, sizeof out), -1); /* 12 > 8 */
}
