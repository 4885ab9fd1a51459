/*
 * sha256.c — one-shot SHA-256. The first SHA256_SMALL bytes a process hashes
 * go through this file's own code (FIPS 180-4), so a process that hashes
 * little (a search: the fingerprint, its hits' ids) never meets libcrypto.
 * Past that amount (indexing) OpenSSL's libcrypto takes over, loaded with
 * dlopen() then: its SHA extensions are several times faster, and linking
 * it would cost every process its start-up (17,000 of the program's 20,000
 * relocations when linked statically) and its initialisation on the first
 * digest. Without libcrypto the built-in code serves all. Both give the same
 * digest (test_sha256_*).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>

#include "sha256.h"

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

/* n 64-byte blocks into the state h, in portable C. */
static void blocks_c(uint32_t h[8], const unsigned char *p, size_t n)
{
    for (; n; n--, p += 64) {
        uint32_t w[64], s[8];
        for (int i = 0; i < 16; i++)
            w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
                   (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
        for (int i = 16; i < 64; i++) {
            uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
            uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
        for (int i = 0; i < 64; i++) {
            uint32_t t1 =
                k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
            uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            k = g;
            g = f;
            f = e;
            e = d + t1;
            d = c;
            c = b;
            b = a;
            a = t1 + t2;
        }
        s[0] = a, s[1] = b, s[2] = c, s[3] = d, s[4] = e, s[5] = f, s[6] = g, s[7] = k;
        for (int i = 0; i < 8; i++)
            h[i] += s[i];
    }
}

/* libcrypto's EVP_Digest and EVP_sha256, resolved at run time; its EVP_MD
 * and ENGINE are opaque pointers here (OpenSSL 3's signatures), so no
 * OpenSSL header is needed to build. */
typedef int evp_digest_fn(const void *data, size_t n, unsigned char *md, unsigned int *len,
                          const void *type, void *engine);
static struct {
    evp_digest_fn *digest;
    const void *(*sha256)(void);
} evp;
static pthread_once_t evp_once = PTHREAD_ONCE_INIT;

static void load_libcrypto(void)
{
    void *h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!h) return; /* the built-in code serves: the same digest, slower */
    evp_digest_fn *digest = (evp_digest_fn *)dlsym(h, "EVP_Digest");
    const void *(*sha256)(void) = (const void *(*)(void))dlsym(h, "EVP_sha256");
    if (!digest || !sha256) {
        dlclose(h);
        return;
    }
    evp.sha256 = sha256;
    evp.digest = digest;
}

void cm_sha256_portable(const void *data, size_t n, unsigned char md[32])
{
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const unsigned char *p = data;
    size_t whole = n / 64;
    blocks_c(h, p, whole);
    /* the tail, the 0x80 byte, zeros and the length in bits: one or two blocks */
    unsigned char last[128] = {0};
    size_t rest = n - whole * 64, nb = rest < 56 ? 64 : 128;
    if (rest) memcpy(last, p + whole * 64, rest);
    last[rest] = 0x80;
    uint64_t bits = (uint64_t)n * 8;
    for (int k = 0; k < 8; k++)
        last[nb - 1 - k] = (unsigned char)(bits >> (8 * k));
    blocks_c(h, last, nb / 64);
    for (int k = 0; k < 8; k++) {
        md[4 * k] = (unsigned char)(h[k] >> 24);
        md[4 * k + 1] = (unsigned char)(h[k] >> 16);
        md[4 * k + 2] = (unsigned char)(h[k] >> 8);
        md[4 * k + 3] = (unsigned char)h[k];
    }
}

void cm_sha256(const void *data, size_t n, unsigned char md[32])
{
    static atomic_size_t hashed; /* bytes hashed by the built-in code so far */
    if (n <= SHA256_SMALL && atomic_load_explicit(&hashed, memory_order_relaxed) < SHA256_SMALL &&
        atomic_fetch_add_explicit(&hashed, n, memory_order_relaxed) + n <= SHA256_SMALL) {
        cm_sha256_portable(data, n, md);
        return;
    }
    pthread_once(&evp_once, load_libcrypto);
    unsigned int len = 0;
    if (evp.digest && evp.digest(data, n, md, &len, evp.sha256(), NULL) == 1 && len == 32) return;
    cm_sha256_portable(data, n, md);
}

bool cm_sha256_uses_libcrypto(void)
{
    pthread_once(&evp_once, load_libcrypto);
    return evp.digest != NULL;
}

void cm_sha256_hex(const void *data, size_t n, char hex[SHA256_HEX_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char md[32];
    cm_sha256(data, n, md);
    for (size_t i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = 0;
}
