/*
 * sha256.h — one-shot SHA-256: a process's first SHA256_SMALL bytes by its
 * own code, the rest by OpenSSL's libcrypto when it can be loaded (see
 * sha256.c).
 */
#ifndef CM_SHA256_H
#define CM_SHA256_H

#include "common.h"

#define SHA256_HEX_LEN 64
#define SHA256_SMALL   (256 * 1024) /* bytes a process hashes before libcrypto serves */

/* The 32-byte digest of data[0..n). */
void cm_sha256(const void *data, size_t n, unsigned char md[32]);

/* Writes 64 hex digits and a NUL into hex[65]. */
void cm_sha256_hex(const void *data, size_t n, char hex[SHA256_HEX_LEN + 1]);

/* The digest by this file's own code only (any n): what serves a process's
 * first bytes, and libcrypto's reference in the tests. */
void cm_sha256_portable(const void *data, size_t n, unsigned char md[32]);

/* Whether libcrypto was loaded (loads it): the tests' check that the fast
 * path is really taken. */
bool cm_sha256_uses_libcrypto(void);

#endif
