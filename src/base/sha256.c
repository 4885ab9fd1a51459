/*
 * sha256.c — one-shot SHA-256 through EVP (libcrypto), hex-encoded.
 */
#include <openssl/evp.h>

#include "sha256.h"

void sha256_hex(const void *data, size_t n, char hex[SHA256_HEX_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char md[32];
    unsigned int mdlen = 0;
    if (!EVP_Digest(data, n, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32)
        memset(md, 0, sizeof md); /* only on a broken libcrypto; the hash just never matches */
    for (size_t i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = 0;
}
