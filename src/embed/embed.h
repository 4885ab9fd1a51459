/*
 * embed.h — embedding providers behind one interface: embed documents in
 * batches, embed a query, the dimensions, and a fingerprint of everything
 * that changes the vectors. Providers: openai (and any OpenAI-compatible
 * endpoint through remote.baseUrl), gemini, voyage, mistral, ollama. Keys come
 * from remote.apiKey, models.providers.<name>.apiKey or the environment and
 * never appear in messages.
 */
#ifndef CM_EMBED_H
#define CM_EMBED_H

#include "../config/config.h"
#include "http.h"
#include "static_model.h"

#define EMBED_BATCH_MAX_BYTES 8000 /* text bytes per request */

/* The static word-vector model: a provider kind beyond models.providers. */
#define EMBED_STATIC CM_PROV_N

typedef struct embed_provider {
    int kind; /* CM_PROV_*, or EMBED_STATIC */
    static_model sm;   /* EMBED_STATIC: the model, mapped on first use */
    char *static_path; /* EMBED_STATIC: its file */
    char *model, *base_url, *api_key;
    cm_strlist headers; /* auth, provider's, then remote.headers (remote wins) */
    int dims_wanted;    /* outputDimensionality (gemini-embedding-2-preview), 0: any */
    int dims;           /* learned from the first answer, 0 until then */
    int max_inputs;     /* inputs per request */
    int concurrency;
    char key_hash[65]; /* sha256 of endpoint, model, dims and header names: the providerKey */
    http_client *http;  /* created on first use */
} embed_provider;

/* The provider's name ("openai", ...). */
const char *embed_name(const embed_provider *p);

/* Where the static model lives: clawmem.staticModel, else
 * <stateDir>/models/clawmem-static-100d.bin (scripts/install-static-model.sh
 * puts it there). Returns a new string. */
char *embed_static_path(const cm_config *cfg);

/* Sets up provider `name` ("openai", ..., "static"; never "auto") from cfg; no I/O (the
 * HTTP client, and libcurl, are loaded on the first request, which fails with
 * CM_EIO when libcurl is missing). CM_ENOTFOUND when it has no API key
 * (ollama needs none). */
cm_rc embed_open(const cm_config *cfg, const char *name, embed_provider *p, char *err,
                 size_t errlen);
void embed_close(embed_provider *p);

/* Auto-selection as the seeds order it: openai, gemini, voyage, mistral, the
 * first with a key (local and ollama are never auto-selected here). Returns
 * the name, or NULL when none has a key. */
const char *embed_auto(const cm_config *cfg);

/* Embeds n texts in batches (max_inputs and EMBED_BATCH_MAX_BYTES per
 * request, concurrency requests in flight); *out receives n × p->dims floats
 * (free()). An all-zero vector is passed on as zeros for the caller to skip.
 * Fails on transport errors (after retries), malformed answers, a wrong
 * number of vectors, inconsistent dimensions, or non-numbers. */
cm_rc embed_documents(embed_provider *p, const char *const *texts, size_t n, float **out,
                      char *err, size_t errlen);

/* Embeds one query (60 s timeout). */
cm_rc embed_query(embed_provider *p, const char *text, float **out, char *err, size_t errlen);

/* Reads a provider's answer for n inputs: rows[i] receives a malloc'd vector
 * of p->dims floats (p->dims is learned from the first answer). Returns NULL,
 * or what is wrong with the answer. Exposed for the fuzzer. */
const char *embed_parse(embed_provider *p, const char *body, size_t len, size_t n, float **rows);

#endif
