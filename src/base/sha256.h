/*
 * sha256.h — SHA-256 as lowercase hex: a process's first SHA256_SMALL bytes
 * by its own code, the rest by OpenSSL's libcrypto (see sha256.c).
 */
#ifndef CM_SHA256_H
#define CM_SHA256_H

#include "common.h"

#define SHA256_HEX_LEN 64
#define SHA256_SMALL   (256 * 1024) /* bytes a process hashes before libcrypto serves */

/* Writes 64 hex digits and a NUL into hex[65]. */
void cm_sha256_hex(const void *data, size_t n, char hex[SHA256_HEX_LEN + 1]);

/* The 32-byte digest of data[0..n) by this file's own code (any n). */
void cm_sha256_small(const void *data, size_t n, unsigned char md[32]);

#endif
