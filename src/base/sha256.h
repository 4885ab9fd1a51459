/*
 * sha256.h — SHA-256 as lowercase hex, by OpenSSL's libcrypto.
 */
#ifndef CM_SHA256_H
#define CM_SHA256_H

#include "common.h"

#define SHA256_HEX_LEN 64

/* Writes 64 hex digits and a NUL into hex[65]. */
void sha256_hex(const void *data, size_t n, char hex[SHA256_HEX_LEN + 1]);

#endif
