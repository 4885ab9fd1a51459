/*
 * ed25519.c — Ed25519 verification through libcrypto's EVP interface,
 * resolved at run time (no OpenSSL header or link: see sha256.c for why).
 * Its EVP_PKEY, EVP_MD_CTX and ENGINE are opaque pointers here, with
 * OpenSSL 3's signatures.
 */
#include <dlfcn.h>
#include <pthread.h>

#include "ed25519.h"

#define NID_ED25519 1087 /* EVP_PKEY_ED25519 */

static struct {
    void *(*pkey_new_raw_public)(int type, void *engine, const unsigned char *key, size_t n);
    void (*pkey_free)(void *pkey);
    void *(*ctx_new)(void);
    void (*ctx_free)(void *ctx);
    int (*verify_init)(void *ctx, void **pctx, const void *md, void *engine, void *pkey);
    int (*verify)(void *ctx, const unsigned char *sig, size_t siglen, const unsigned char *tbs,
                  size_t n);
    bool ok;
} evp;
static pthread_once_t evp_once = PTHREAD_ONCE_INIT;

static void load_libcrypto(void)
{
    void *h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    /* dlsym's void * to function pointers: POSIX guarantees the conversion */
    *(void **)&evp.pkey_new_raw_public = dlsym(h, "EVP_PKEY_new_raw_public_key");
    *(void **)&evp.pkey_free = dlsym(h, "EVP_PKEY_free");
    *(void **)&evp.ctx_new = dlsym(h, "EVP_MD_CTX_new");
    *(void **)&evp.ctx_free = dlsym(h, "EVP_MD_CTX_free");
    *(void **)&evp.verify_init = dlsym(h, "EVP_DigestVerifyInit");
    *(void **)&evp.verify = dlsym(h, "EVP_DigestVerify");
    evp.ok = evp.pkey_new_raw_public && evp.pkey_free && evp.ctx_new && evp.ctx_free &&
             evp.verify_init && evp.verify;
    if (!evp.ok) dlclose(h);
}

int cm_ed25519_verify(const unsigned char pub[32], const unsigned char *sig, size_t siglen,
                      const void *msg, size_t n)
{
    pthread_once(&evp_once, load_libcrypto);
    if (!evp.ok) return -1;
    if (siglen != 64) return 0;
    int rc = 0;
    void *ctx = NULL, *key = evp.pkey_new_raw_public(NID_ED25519, NULL, pub, 32);
    if (!key) goto out;
    ctx = evp.ctx_new();
    if (!ctx || evp.verify_init(ctx, NULL, NULL, NULL, key) != 1) goto out;
    rc = evp.verify(ctx, sig, siglen, msg, n) == 1;
out:
    if (ctx) evp.ctx_free(ctx);
    if (key) evp.pkey_free(key);
    return rc;
}
