/*
 * gw_device.h — the device identity a QuantumClaw client signs into its
 * connect req (`params.device {id, publicKey, signature, signedAt, nonce}`),
 * checked as QuantumClaw 2026.3.22's gateway checks it: the id is the hex
 * SHA-256 of the raw Ed25519 public key (base64url), signedAt within two
 * minutes of now, the nonce the server's connect.challenge nonce, and the
 * signature over the "v3" payload (else the legacy "v2" one).
 */
#ifndef CM_GW_DEVICE_H
#define CM_GW_DEVICE_H

#include <jansson.h>

#include "../../base/common.h"

#define GW_DEVICE_SKEW_MS (120 * 1000) /* the reference's DEVICE_SIGNATURE_SKEW_MS */

/* Why a device block was refused: the reference's error message,
 * details.code and details.reason. */
typedef struct gw_device_refusal {
    const char *message, *code, *reason;
} gw_device_refusal;

/* Checks params.device of a connect req (params hostile, device present)
 * against the challenge nonce and now_ms (wall clock, injected). True when
 * it is a valid signature by the key it names; false with *why set
 * (static strings) otherwise, "device signature invalid" also when
 * libcrypto cannot be loaded to check it. */
bool cm_gw_device_verify(const json_t *params, const char *nonce, int64_t now_ms,
                         gw_device_refusal *why);

/* Decodes base64url (or base64; padding optional) src into out[0..cap);
 * the decoded length, or -1 on a bad character or when it does not fit. */
long cm_gw_base64url_decode(const char *src, unsigned char *out, size_t cap);

#endif
