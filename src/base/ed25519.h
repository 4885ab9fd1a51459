/*
 * ed25519.h — Ed25519 signature verification (RFC 8032) by OpenSSL's
 * libcrypto, loaded with dlopen() on first use as sha256.c loads it: the
 * gateway checks the device signatures QuantumClaw's clients send with it.
 */
#ifndef CM_ED25519_H
#define CM_ED25519_H

#include "common.h"

/* 1 when sig[0..siglen) is pub's valid signature of msg[0..n), 0 when it is
 * not (a wrong length included), -1 when libcrypto (3.x) cannot be loaded.
 * pub is the 32-byte raw public key. Thread-safe. */
int cm_ed25519_verify(const unsigned char pub[32], const unsigned char *sig, size_t siglen,
                      const void *msg, size_t n);

#endif
