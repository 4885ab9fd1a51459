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
#include "../net/http.h"
#include "local.h"
#include "static_model.h"

#define EMBED_BATCH_MAX_BYTES 8000 /* text bytes per request */

/* Provider kinds beyond models.providers: the static word-vector model, and
 * a GGUF model run by llama.cpp ("local"). */
#define EMBED_STATIC CM_PROV_N
#define EMBED_LOCAL (CM_PROV_N + 1)

/* local.modelPath when none is set: the seeds' default. */
#define EMBED_LOCAL_DEFAULT "hf:ggml-org/embeddinggemma-300m-qat-q8_0-GGUF/embeddinggemma-300m-qat-Q8_0.gguf"

typedef struct embed_provider {
    int kind; /* CM_PROV_*, EMBED_STATIC or EMBED_LOCAL */
    static_model sm;   /* EMBED_STATIC: the model, mapped on first use */
    char *static_path; /* EMBED_STATIC: its file */
    local_model *lm;   /* EMBED_LOCAL: the model, loaded by cm_embed_prepare */
    char *local_cache; /* EMBED_LOCAL: where hf: models are kept (model is the spec) */
    int local_threads;
    char *model, *base_url, *api_key;
    cm_strlist headers; /* auth, provider's, then remote.headers (remote wins) */
    int dims_wanted;    /* outputDimensionality (gemini-embedding-2-preview), 0: any */
    int dims;           /* learned from the first answer, 0 until then */
    int max_inputs;     /* inputs per request */
    int concurrency;
    char key_hash[65]; /* sha256 of endpoint, model, dims and header names: the providerKey */
    /* When the key comes from the agent's auth profiles (auth-profiles.json):
     * the file, the provider's profiles in order, the one in use. A profile
     * that fails with an auth, billing or rate-limit error cools down there
     * and the next one is tried, as the model runner does. */
    char *auth_path;
    char **profiles;
    size_t cur;
    http_client *http;  /* created on first use */
} embed_provider;

/* The provider's name ("openai", ...). */
const char *cm_embed_name(const embed_provider *p);

/* Where the static model lives: clawmem.staticModel, else
 * <stateDir>/models/clawmem-static-100d.bin when it is there
 * (scripts/install-static-model.sh with no argument puts it there), else the
 * copy `make` installs beside the program (<prefix>/share/clawmem/, the build
 * tree's build/share/clawmem/; cm_fs_find_beside), else the state dir's path.
 * Returns a new string. */
char *cm_embed_static_path(const cm_config *cfg);

/* Sets up provider `name` ("openai", ..., "static", "local"; never "auto")
 * from cfg; no network and no model loading (the HTTP client, and libcurl, are
 * loaded on the first request, which fails with CM_EIO when libcurl is
 * missing; a local model by cm_embed_prepare). CM_ENOTFOUND when it has no API
 * key (ollama needs none); CM_EINVAL for "local" in a build without llama.cpp. */
cm_rc cm_embed_open(const cm_config *cfg, const char *name, embed_provider *p, char *err,
                    size_t errlen);
void cm_embed_close(embed_provider *p);

/* The slow part of setting up: for "local", downloads an hf: model that is
 * not in the cache yet (when fetch; else CM_ENOTFOUND; progress as
 * download.h) and loads the model; nothing for the others. Safe to call again
 * once it succeeded. */
cm_rc cm_embed_prepare(embed_provider *p, bool fetch, int (*progress)(void *, uint64_t, uint64_t),
                       void *ctx, char *err, size_t errlen);

/* Auto-selection as the seeds order it: local when local.modelPath is set
 * and its file is there (downloaded, for an hf: model) in a build with
 * llama.cpp, then openai, gemini, voyage, mistral, the first with a key
 * (ollama is never auto-selected). Returns the name, or NULL when none fits. */
const char *cm_embed_auto(const cm_config *cfg);

/* Embeds n texts in batches (max_inputs and EMBED_BATCH_MAX_BYTES per
 * request, concurrency requests in flight); *out receives n × p->dims floats
 * (free()). An all-zero vector is passed on as zeros for the caller to skip.
 * Fails on transport errors (after retries), malformed answers, a wrong
 * number of vectors, inconsistent dimensions, or non-numbers. */
cm_rc cm_embed_documents(embed_provider *p, const char *const *texts, size_t n, float **out,
                         char *err, size_t errlen);

/* Embeds one query (60 s timeout). */
cm_rc cm_embed_query(embed_provider *p, const char *text, float **out, char *err, size_t errlen);

/* Reads a provider's answer for n inputs: rows[i] receives a malloc'd vector
 * of p->dims floats (p->dims is learned from the first answer). Returns NULL,
 * or what is wrong with the answer. Exposed for the fuzzer. */
const char *cm_embed_parse(embed_provider *p, const char *body, size_t len, size_t n, float **rows);

#endif
