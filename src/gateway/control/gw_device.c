/*
 * gw_device.c — the connect req's device identity (gw_device.h): checks in
 * the reference's order (identity, age, nonce, signature, key), so a client
 * sees the same refusal from clawmem as from QuantumClaw.
 */
#include "gw_device.h"

#include <ctype.h>

#include "../../base/buf.h"
#include "../../base/ed25519.h"
#include "../../base/sha256.h"

static int S_b64_value(int ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '-' || ch == '+') return 62;
    if (ch == '_' || ch == '/') return 63;
    return -1;
}

long cm_gw_base64url_decode(const char *src, unsigned char *out, size_t cap)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0;
    for (const char *p = src; *p && *p != '='; p++) {
        int v = S_b64_value((unsigned char)*p);
        if (v < 0) return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n >= cap) return -1;
            out[n++] = (unsigned char)(acc >> bits);
        }
    }
    return (long)n;
}

/* The reference's normalizeDeviceMetadataForAuth: trimmed, A-Z lowered. */
static cm_rc S_add_meta(buf *b, const char *v)
{
    cm_rc rc = CM_OK;
    if (!v) return rc;
    while (*v && isspace((unsigned char)*v))
        v++;
    size_t n = strlen(v);
    while (n && isspace((unsigned char)v[n - 1]))
        n--;
    for (size_t i = 0; i < n && !rc; i++)
        rc = cm_buf_addc(b, v[i] >= 'A' && v[i] <= 'Z' ? (char)(v[i] + 32) : v[i]);
    return rc;
}

/* The signed text, version 3 (with platform and deviceFamily) or 2. */
static bool S_payload(buf *b, int version, const json_t *p, const json_t *dev, const char *nonce)
{
    const json_t *client = json_object_get(p, "client"), *auth = json_object_get(p, "auth");
    const char *role = json_string_value(json_object_get(p, "role"));
    const char *token = json_string_value(json_object_get(auth, "token"));
    if (!token) token = json_string_value(json_object_get(auth, "deviceToken"));
    if (!token) token = json_string_value(json_object_get(auth, "bootstrapToken"));
    const char *cid = json_string_value(json_object_get(client, "id"));
    const char *mode = json_string_value(json_object_get(client, "mode"));
    cm_buf_reset(b);
    cm_rc rc = cm_buf_printf(b, "v%d|%s|%s|%s|%s|", version,
                             json_string_value(json_object_get(dev, "id")), cid ? cid : "",
                             mode ? mode : "", role ? role : "operator");
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(p, "scopes"), i, s)
    {
        if (!json_is_string(s)) return false;
        if (!rc && i) rc = cm_buf_addc(b, ',');
        if (!rc) rc = cm_buf_add(b, json_string_value(s), json_string_length(s));
    }
    if (!rc)
        rc = cm_buf_printf(b, "|%lld|%s|%s",
                           (long long)json_integer_value(json_object_get(dev, "signedAt")),
                           token ? token : "", nonce);
    if (!rc && version == 3) {
        rc = cm_buf_addc(b, '|');
        if (!rc) rc = S_add_meta(b, json_string_value(json_object_get(client, "platform")));
        if (!rc) rc = cm_buf_addc(b, '|');
        if (!rc) rc = S_add_meta(b, json_string_value(json_object_get(client, "deviceFamily")));
    }
    return rc == CM_OK;
}

static bool S_refuse(gw_device_refusal *why, const char *message, const char *code,
                     const char *reason)
{
    why->message = message, why->code = code, why->reason = reason;
    return false;
}

bool cm_gw_device_verify(const json_t *params, const char *nonce, int64_t now_ms,
                         gw_device_refusal *why)
{
    const json_t *dev = json_object_get(params, "device");
    const char *id = json_string_value(json_object_get(dev, "id"));
    const char *pk = json_string_value(json_object_get(dev, "publicKey"));
    const char *sig = json_string_value(json_object_get(dev, "signature"));
    unsigned char key[33], sg[65];
    /* a PEM key (the reference takes one too) is not accepted here */
    long nk = pk ? cm_gw_base64url_decode(pk, key, sizeof key) : -1;
    char hex[SHA256_HEX_LEN + 1] = "";
    if (nk > 0) cm_sha256_hex(key, (size_t)nk, hex);
    if (!id || nk <= 0 || strcmp(hex, id))
        return S_refuse(why, "device identity mismatch", "DEVICE_AUTH_DEVICE_ID_MISMATCH",
                        "device-id-mismatch");
    const json_t *at = json_object_get(dev, "signedAt");
    if (!json_is_integer(at) || llabs((long long)(now_ms - json_integer_value(at))) >
                                    (long long)GW_DEVICE_SKEW_MS)
        return S_refuse(why, "device signature expired", "DEVICE_AUTH_SIGNATURE_EXPIRED",
                        "device-signature-stale");
    const char *dn = json_string_value(json_object_get(dev, "nonce"));
    while (dn && isspace((unsigned char)*dn))
        dn++;
    size_t dnl = dn ? strlen(dn) : 0;
    while (dnl && isspace((unsigned char)dn[dnl - 1]))
        dnl--;
    if (!dnl)
        return S_refuse(why, "device nonce required", "DEVICE_AUTH_NONCE_REQUIRED",
                        "device-nonce-missing");
    if (!nonce || strlen(nonce) != dnl || memcmp(dn, nonce, dnl))
        return S_refuse(why, "device nonce mismatch", "DEVICE_AUTH_NONCE_MISMATCH",
                        "device-nonce-mismatch");
    long ns = sig ? cm_gw_base64url_decode(sig, sg, sizeof sg) : -1;
    bool ok = false;
    buf b = BUF_INIT;
    for (int v = 3; v >= 2 && !ok && ns > 0 && nk == 32; v--)
        ok = S_payload(&b, v, params, dev, nonce) &&
             cm_ed25519_verify(key, sg, (size_t)ns, b.data, b.len) == 1;
    cm_buf_release(&b);
    if (!ok)
        return S_refuse(why, "device signature invalid", "DEVICE_AUTH_SIGNATURE_INVALID",
                        "device-signature");
    return true;
}
