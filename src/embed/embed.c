/*
 * embed.c — the providers of embed.h: one table of defaults, one request
 * builder and one response reader per wire format (OpenAI-style data[], the
 * Gemini content API, Ollama's single prompt).
 */
#include <jansson.h>
#include <strings.h>
#include <math.h>

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/fs.h"
#include "../base/sha256.h"
#include "../auth/auth.h"
#include "../net/download.h"
#include "embed.h"

typedef struct kind_info {
    const char *base, *model, *env_key;
    int max_inputs;
} kind_info;

static const kind_info kinds[CM_PROV_N] = {
    [CM_PROV_OPENAI] = {"https://api.openai.com/v1", "text-embedding-3-small", "OPENAI_API_KEY",
                        256},
    [CM_PROV_GEMINI] = {"https://generativelanguage.googleapis.com/v1beta", "gemini-embedding-001",
                        "GEMINI_API_KEY", 100},
    [CM_PROV_VOYAGE] = {"https://api.voyageai.com/v1", "voyage-4-large", "VOYAGE_API_KEY", 128},
    [CM_PROV_MISTRAL] = {"https://api.mistral.ai/v1", "mistral-embed", "MISTRAL_API_KEY", 64},
    [CM_PROV_OLLAMA] = {"http://127.0.0.1:11434", "nomic-embed-text", NULL, 1},
};

const char *cm_embed_name(const embed_provider *p)
{
    return p->kind == EMBED_STATIC  ? "static"
           : p->kind == EMBED_LOCAL ? "local"
                                    : cm_provider_names[p->kind];
}

char *cm_embed_static_path(const cm_config *cfg)
{
    if (cfg->static_model_path) return cm_strdup(cfg->static_model_path);
    buf b = BUF_INIT;
    if (cm_buf_printf(&b, "%s/models/clawmem-static-100d.bin", cfg->state_dir)) {
        cm_buf_release(&b);
        return NULL;
    }
    /* Not in the state dir: the copy `make` installs beside the program
     * (<prefix>/share/clawmem/, or build/share/clawmem/ in the build tree). */
    static const char *const rels[] = {"../share/clawmem/clawmem-static-100d.bin",
                                       "share/clawmem/clawmem-static-100d.bin", NULL};
    char *beside = access(b.data, F_OK) != 0 ? cm_fs_find_beside(rels) : NULL;
    if (beside) {
        cm_buf_release(&b);
        return beside;
    }
    return cm_buf_detach(&b);
}

/* The static model: its header now (it names the model), the whole file
 * mapped and checked on the first embedding, so that opening an engine for
 * a `status` or a memory_get costs nothing. */
static cm_rc open_static(const cm_config *cfg, embed_provider *p, char *err, size_t errlen)
{
    char *path = cm_embed_static_path(cfg);
    if (!path) return CM_ENOMEM;
    uint32_t dims = 0, words = 0, sum = 0;
    cm_rc rc = cm_static_model_peek(path, &dims, &words, &sum, err, errlen);
    if (rc == CM_ENOTFOUND)
        cm_seterr(err, errlen, rc,
                  "static model %s is not installed (run scripts/install-static-model.sh)", path);
    if (!rc) {
        p->kind = EMBED_STATIC;
        p->dims = (int)dims;
        p->max_inputs = 1 << 30;
        p->static_path = path;
        path = NULL;
        buf b = BUF_INIT;
        rc = cm_buf_printf(&b, "static|%u|%u|%08x", dims, words, sum);
        if (!rc) cm_sha256_hex(b.data, b.len, p->key_hash);
        cm_buf_release(&b);
        p->model = cm_strdup("glove-100d-sif");
        if (!p->model && !rc) rc = CM_ENOMEM;
    }
    free(path);
    return rc;
}

static char *local_cache_dir(const cm_config *cfg)
{
    if (cfg->local_cache_dir && *cfg->local_cache_dir)
        return cm_fs_expand_home(cfg->local_cache_dir);
    buf b = BUF_INIT;
    if (cm_buf_printf(&b, "%s/models", cfg->state_dir)) {
        cm_buf_release(&b);
        return NULL;
    }
    return cm_buf_detach(&b);
}

/* "local": the model named now (its spec, and for a file its size and
 * mtime in the providerKey, so that replacing it re-embeds), loaded later. */
static cm_rc open_local(const cm_config *cfg, embed_provider *p, char *err, size_t errlen)
{
    char why[300];
    if (!cm_local_built()) {
        cm_local_supported(why, sizeof why);
        return cm_seterr(err, errlen, CM_EINVAL, "provider \"local\": %s", why);
    }
    const char *spec = cfg->local_model_path && *cfg->local_model_path ? cfg->local_model_path
                                                                       : EMBED_LOCAL_DEFAULT;
    p->kind = EMBED_LOCAL;
    p->model = cm_strdup(spec);
    p->local_cache = local_cache_dir(cfg);
    p->local_threads = cfg->local_threads;
    p->max_inputs = 1 << 30;
    if (!p->model || !p->local_cache) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    buf b = BUF_INIT;
    cm_rc rc = cm_buf_printf(&b, "local|%s", spec);
    if (!rc && strncmp(spec, "hf:", 3) != 0) {
        char *path = NULL;
        struct stat st;
        rc = cm_net_model_resolve(spec, p->local_cache, false, NULL, NULL, &path, why, sizeof why);
        if (!rc && stat(path, &st) == 0)
            rc = cm_buf_printf(&b, "|%lld|%lld", (long long)st.st_size, (long long)st.st_mtime);
        else if (rc != CM_ENOMEM)
            rc = CM_OK; /* missing: cm_embed_prepare says so */
        free(path);
    }
    if (!rc) cm_sha256_hex(b.data, b.len, p->key_hash);
    cm_buf_release(&b);
    return rc ? cm_seterr(err, errlen, rc, "out of memory") : CM_OK;
}

cm_rc cm_embed_prepare(embed_provider *p, bool fetch, int (*progress)(void *, uint64_t, uint64_t),
                       void *ctx, char *err, size_t errlen)
{
    if (p->kind != EMBED_LOCAL || p->lm) return CM_OK;
    char *path = NULL;
    cm_rc rc =
        cm_net_model_resolve(p->model, p->local_cache, fetch, progress, ctx, &path, err, errlen);
    if (!rc) rc = cm_local_open(path, p->local_threads, &p->lm, err, errlen);
    if (!rc) p->dims = cm_local_dims(p->lm);
    free(path);
    return rc;
}

static int kind_of(const char *name)
{
    for (int i = 0; i < CM_PROV_N; i++)
        if (!strcmp(name, cm_provider_names[i])) return i;
    return -1;
}

/* The key for provider k: remote.apiKey (when k is the primary), then
 * models.providers.<k>.apiKey, then the environment. */
static const char *key_for(const cm_config *cfg, int k, bool primary)
{
    if (primary && cfg->remote_api_key && *cfg->remote_api_key) return cfg->remote_api_key;
    if (cfg->providers[k].api_key && *cfg->providers[k].api_key) return cfg->providers[k].api_key;
    const char *env = kinds[k].env_key ? getenv(kinds[k].env_key) : NULL;
    return env && *env ? env : NULL;
}

/* The auth-profile provider id of embedding provider k. */
static const char *auth_provider(int k)
{
    return k == CM_PROV_GEMINI ? "google" : cm_provider_names[k];
}

/* The provider's auth profiles in order from the store st (NULL when none)
 * and, in *first, the first usable one (else 0). */
static char **profile_order(const cm_config *cfg, int k, auth_store *st, size_t *first)
{
    char **order = NULL;
    *first = 0;
    int64_t now = cm_wall_ms();
    if (cm_auth_profile_order(st, json_object_get(cfg->root, "auth"), auth_provider(k), NULL, now,
                              &order) ||
        !order || !order[0]) {
        cm_auth_strv_free(order);
        return NULL;
    }
    while (order[*first] && cm_auth_profile_unusable(st, order[*first], now))
        (*first)++;
    if (!order[*first]) *first = 0; /* all cooling: try the soonest anyway */
    return order;
}

/* The same, the store read into st first (release it also when NULL). */
static char **profiles_for(const cm_config *cfg, int k, auth_store *st, size_t *first)
{
    char err[256];
    *first = 0;
    if (!cfg->state_dir || cm_auth_store_init(st, cfg->state_dir, cfg->agent_id, err, sizeof err))
        return NULL;
    return profile_order(cfg, k, st, first);
}

const char *cm_embed_auto(const cm_config *cfg)
{
    if (cm_local_built() && cfg->local_model_path && *cfg->local_model_path) {
        char *cache = local_cache_dir(cfg), *path = NULL;
        char why[300];
        cm_rc rc = cache ? cm_net_model_resolve(cfg->local_model_path, cache, false, NULL, NULL,
                                                &path, why, sizeof why)
                         : CM_ENOMEM;
        bool there = !rc && access(path, R_OK) == 0;
        free(cache);
        free(path);
        if (there) return "local";
    }
    static const int order[] = {CM_PROV_OPENAI, CM_PROV_GEMINI, CM_PROV_VOYAGE, CM_PROV_MISTRAL};
    auth_store st = {0};
    int store = 0; /* read at the first provider without a key: 1 read, -1 none */
    const char *found = NULL;
    for (size_t i = 0; i < ARRAY_LEN(order) && !found; i++) {
        if (key_for(cfg, order[i], true)) {
            found = cm_provider_names[order[i]];
            continue;
        }
        char err[256];
        if (!store)
            store = cfg->state_dir &&
                            !cm_auth_store_init(&st, cfg->state_dir, cfg->agent_id, err, sizeof err)
                        ? 1
                        : -1;
        if (store < 0) continue; /* no store: keys only */
        size_t first;
        char **profiles = profile_order(cfg, order[i], &st, &first);
        if (profiles && cm_auth_profile_secret(&st, profiles[first]))
            found = cm_provider_names[order[i]];
        cm_auth_strv_free(profiles);
    }
    cm_auth_store_release(&st);
    return found;
}

void cm_embed_close(embed_provider *p)
{
    cm_static_model_close(&p->sm);
    free(p->static_path);
    cm_local_close(p->lm);
    free(p->local_cache);
    free(p->model);
    free(p->base_url);
    free(p->api_key);
    free(p->auth_path);
    cm_auth_strv_free(p->profiles);
    for (size_t i = 0; i < p->headers.n; i++)
        free(p->headers.v[i]);
    free(p->headers.v);
    cm_http_client_close(p->http);
    memset(p, 0, sizeof *p);
}

cm_rc cm_embed_open(const cm_config *cfg, const char *name, embed_provider *p, char *err,
                    size_t errlen)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;
    memset(p, 0, sizeof *p);
    if (!strcmp(name, "static") || !strcmp(name, "local")) {
        rc = name[0] == 's' ? open_static(cfg, p, err, errlen) : open_local(cfg, p, err, errlen);
        if (rc) cm_embed_close(p);
        return rc;
    }
    int k = kind_of(name);
    if (k < 0) return cm_seterr(err, errlen, CM_EINVAL, "unknown embedding provider \"%s\"", name);
    bool primary = !strcmp(cfg->provider, name) || !strcmp(cfg->provider, "auto");
    p->kind = k;
    /* The key: remote.apiKey, else the agent's auth profiles, else
     * models.providers.<k>.apiKey or the environment. */
    auth_store st = {0};
    const char *key =
        primary && cfg->remote_api_key && *cfg->remote_api_key ? cfg->remote_api_key : NULL;
    if (!key && k != CM_PROV_OLLAMA) {
        p->profiles = profiles_for(cfg, k, &st, &p->cur);
        if (p->profiles) key = cm_auth_profile_secret(&st, p->profiles[p->cur]);
        if (p->profiles && key) {
            buf ap = BUF_INIT;
            if (cm_auth_store_path(&ap, cfg->state_dir, cfg->agent_id)) CHECK(CM_ENOMEM);
            p->auth_path = cm_buf_detach(&ap);
        } else {
            cm_auth_strv_free(p->profiles);
            p->profiles = NULL;
        }
    }
    if (!key) key = key_for(cfg, k, primary);
    if (!key && k != CM_PROV_OLLAMA)
        FAIL(CM_ENOTFOUND, "%s: no API key (set %s, models.providers.%s.apiKey or remote.apiKey)",
             name, kinds[k].env_key, k == CM_PROV_GEMINI ? "google" : name);
    const char *base = primary && cfg->remote_base_url && *cfg->remote_base_url
                           ? cfg->remote_base_url
                       : cfg->providers[k].base_url ? cfg->providers[k].base_url
                                                    : kinds[k].base;
    p->base_url = cm_strdup(base);
    p->model = cm_strdup(primary && cfg->model && *cfg->model ? cfg->model : kinds[k].model);
    p->api_key = key ? cm_strdup(key) : NULL;
    key = p->api_key; /* it may have pointed into st */
    cm_auth_store_release(&st);
    if (!p->base_url || !p->model || (key && !p->api_key)) CHECK(CM_ENOMEM);
    while (strlen(p->base_url) > 1 && p->base_url[strlen(p->base_url) - 1] == '/')
        p->base_url[strlen(p->base_url) - 1] = 0;
    p->dims_wanted = cfg->output_dims;
    if (k == CM_PROV_GEMINI && cm_config_gemini2_model(p->model)) {
        /* Gemini Embedding 2 takes 768, 1536 or 3072 (its default), as 2026.3.22 sends it */
        if (!p->dims_wanted) p->dims_wanted = 3072;
        if (p->dims_wanted != 768 && p->dims_wanted != 1536 && p->dims_wanted != 3072)
            FAIL(CM_ECONFIG, "memorySearch.outputDimensionality %d: %s takes 768, 1536 or 3072",
                 p->dims_wanted, p->model);
    }
    p->max_inputs = cfg->embed_max_inputs > 0 ? cfg->embed_max_inputs : kinds[k].max_inputs;
    if (k == CM_PROV_OLLAMA) p->max_inputs = 1; /* /api/embeddings takes one prompt */
    p->concurrency = cfg->batch_concurrency > 0 ? cfg->batch_concurrency : 2;
    /* Headers: auth, then the provider's own, then remote.headers (remote wins). */
    if (key && k == CM_PROV_GEMINI)
        CHECK(cm_buf_printf(&b, "x-goog-api-key: %s", key));
    else if (key)
        CHECK(cm_buf_printf(&b, "Authorization: Bearer %s", key));
    if (b.len) CHECK(cm_config_header_set(&p->headers, b.data));
    for (size_t i = 0; i < cfg->providers[k].headers.n; i++)
        CHECK(cm_config_header_set(&p->headers, cfg->providers[k].headers.v[i]));
    for (size_t i = 0; primary && i < cfg->remote_headers.n; i++)
        CHECK(cm_config_header_set(&p->headers, cfg->remote_headers.v[i]));
    /* providerKey: what changes the vectors, never the secret itself */
    cm_buf_reset(&b);
    CHECK(cm_buf_printf(&b, "%s|%s|%s|%d", name, p->base_url, p->model, p->dims_wanted));
    cm_sha256_hex(b.data, b.len, p->key_hash);
out:
    cm_auth_store_release(&st);
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_buf_release(&b);
    if (rc) cm_embed_close(p);
    return rc;
}

/* ---- wire formats --------------------------------------------------------- */

static json_t *gemini_part(const embed_provider *p, const char *text, bool query)
{
    char model[300];
    snprintf(model, sizeof model, "models/%s", p->model);
    json_t *r = json_pack("{s:s, s:{s:[{s:s}]}, s:s}", "model", model, "content", "parts", "text",
                          text, "taskType", query ? "RETRIEVAL_QUERY" : "RETRIEVAL_DOCUMENT");
    if (r && p->dims_wanted)
        json_object_set_new(r, "outputDimensionality", json_integer(p->dims_wanted));
    return r;
}

/* Builds the URL and the JSON body for texts[0..n). */
static cm_rc build(const embed_provider *p, const char *const *texts, size_t n, bool query,
                   buf *url, char **body)
{
    json_t *j = NULL, *arr = NULL;
    cm_rc rc = CM_OK;
    switch (p->kind) {
    case CM_PROV_GEMINI:
        if (query && n == 1) {
            rc = cm_buf_printf(url, "%s/models/%s:embedContent", p->base_url, p->model);
            j = gemini_part(p, texts[0], true);
        } else {
            rc = cm_buf_printf(url, "%s/models/%s:batchEmbedContents", p->base_url, p->model);
            arr = json_array();
            for (size_t i = 0; arr && i < n; i++)
                json_array_append_new(arr, gemini_part(p, texts[i], query));
            j = json_pack("{s:o}", "requests", arr);
        }
        break;
    case CM_PROV_OLLAMA:
        rc = cm_buf_printf(url, "%s/api/embeddings", p->base_url);
        j = json_pack("{s:s, s:s}", "model", p->model, "prompt", texts[0]);
        break;
    default: /* openai, voyage, mistral: {"model", "input": [...]} */
        rc = cm_buf_printf(url, "%s/embeddings", p->base_url);
        arr = json_array();
        for (size_t i = 0; arr && i < n; i++)
            json_array_append_new(arr, json_string(texts[i]));
        j = json_pack("{s:s, s:o}", "model", p->model, "input", arr);
        if (j && p->kind == CM_PROV_OPENAI) {
            json_object_set_new(j, "encoding_format", json_string("float"));
            if (p->dims_wanted) json_object_set_new(j, "dimensions", json_integer(p->dims_wanted));
        }
        if (j && p->kind == CM_PROV_VOYAGE)
            json_object_set_new(j, "input_type", json_string(query ? "query" : "document"));
    }
    if (!rc && !j) rc = CM_ENOMEM;
    if (!rc && !(*body = json_dumps(j, JSON_COMPACT))) rc = CM_ENOMEM;
    json_decref(j);
    return rc;
}

/* Reads one vector (a JSON array of numbers) into out[0..dims). */
static const char *read_vector(json_t *v, embed_provider *p, float *out)
{
    if (!json_is_array(v) || json_array_size(v) == 0) return "a vector is not an array of numbers";
    size_t d = json_array_size(v);
    if (p->dims_wanted && (int)d != p->dims_wanted) return "vectors have the wrong dimensions";
    if (p->dims && (int)d != p->dims) return "vectors have inconsistent dimensions";
    if (d > 65536) return "vectors are too long";
    p->dims = (int)d;
    for (size_t i = 0; i < d; i++) {
        json_t *x = json_array_get(v, i);
        double f = json_number_value(x);
        if (!json_is_number(x) || !isfinite(f) || fabs(f) > 1e30)
            return "a vector holds a non-number";
        out[i] = (float)f;
    }
    return NULL;
}

const char *cm_embed_parse(embed_provider *p, const char *body, size_t len, size_t n, float **rows)
{
    json_error_t je;
    json_t *j = json_loadb(body, len, 0, &je);
    const char *why = NULL;
    json_t *list = NULL;
    if (!j) return "the answer is not valid JSON";
    switch (p->kind) {
    case CM_PROV_GEMINI:
        list = json_object_get(j, "embeddings");
        if (!list && json_object_get(j, "embedding")) {
            list = json_pack("[O]", json_object_get(j, "embedding"));
            json_object_set_new(j, "embeddings", list);
        }
        break;
    case CM_PROV_OLLAMA:
        if (json_is_array(json_object_get(j, "embedding"))) {
            list = json_pack("[{s:O}]", "values", json_object_get(j, "embedding"));
            json_object_set_new(j, "embeddings", list);
        }
        break;
    default:
        list = json_object_get(j, "data");
    }
    if (!json_is_array(list)) {
        why = "the answer has no embeddings";
        goto out;
    }
    if (json_array_size(list) != n) {
        why = "the answer has the wrong number of embeddings";
        goto out;
    }
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item)
    {
        size_t at = i;
        json_t *vec = json_object_get(
            item, p->kind == CM_PROV_GEMINI || p->kind == CM_PROV_OLLAMA ? "values" : "embedding");
        json_t *idx = json_object_get(item, "index");
        if (idx) {
            if (!json_is_integer(idx) || json_integer_value(idx) < 0 ||
                (size_t)json_integer_value(idx) >= n) {
                why = "the answer has a bad index";
                goto out;
            }
            at = (size_t)json_integer_value(idx);
        }
        if (!rows[at]) {
            size_t d = json_array_size(vec);
            if (!(rows[at] = calloc(d ? d : 1, sizeof(float)))) {
                why = "out of memory";
                goto out;
            }
        }
        if ((why = read_vector(vec, p, rows[at]))) goto out;
    }
    for (i = 0; i < n; i++)
        if (!rows[i]) why = "the answer repeats an index and misses another";
out:
    json_decref(j);
    return why;
}

/* After a failed round: when the key is an auth profile's and a request
 * failed with an auth, billing or rate-limit error, the profile cools down
 * in auth-profiles.json and the next usable one's key goes into the
 * headers. False when there is none to turn to. */
static bool rotate(embed_provider *p, const http_req *reqs, size_t n)
{
    if (!p->profiles) return false;
    const http_req *bad = NULL;
    for (size_t b = 0; b < n && !bad; b++)
        if (reqs[b].status < 200 || reqs[b].status >= 300) bad = &reqs[b];
    if (!bad) return false;
    auth_reason r = cm_auth_classify((int)bad->status, bad->resp.data);
    if (r != AUTH_R_AUTH && r != AUTH_R_AUTH_PERMANENT && r != AUTH_R_BILLING &&
        r != AUTH_R_RATE_LIMIT)
        return false;
    auth_store st = {0};
    char err[256];
    int64_t now = cm_wall_ms();
    cm_auth_mark_failure(&st, p->auth_path, p->profiles[p->cur], r, NULL, now, err, sizeof err);
    bool switched = false;
    for (size_t i = p->cur + 1; p->profiles[i] && !switched; i++) {
        const char *key = st.doc ? cm_auth_profile_secret(&st, p->profiles[i]) : NULL;
        if (!key || cm_auth_profile_unusable(&st, p->profiles[i], now)) continue;
        buf h = BUF_INIT;
        if (!cm_buf_printf(
                &h, p->kind == CM_PROV_GEMINI ? "x-goog-api-key: %s" : "Authorization: Bearer %s",
                key) &&
            !cm_config_header_set(&p->headers, h.data)) {
            p->cur = i;
            switched = true;
        }
        cm_buf_release(&h);
    }
    cm_auth_store_release(&st);
    return switched;
}

static cm_rc run(embed_provider *p, const char *const *texts, size_t n, bool query, float **out,
                 char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    *out = NULL;
    if (p->kind == EMBED_STATIC) { /* local, microseconds a text */
        if (!p->sm.map && (rc = cm_static_model_open(&p->sm, p->static_path, err, errlen)))
            return rc;
        if ((int)p->sm.dims != p->dims)
            return cm_seterr(err, errlen, CM_ECORRUPT, "%s changed while in use", p->static_path);
        float *m = malloc((n ? n : 1) * (size_t)p->dims * sizeof *m);
        if (!m) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++)
            cm_static_model_embed(&p->sm, texts[i], m + i * (size_t)p->dims);
        *out = m;
        return CM_OK;
    }
    if (p->kind == EMBED_LOCAL) {
        if ((rc = cm_embed_prepare(p, true, NULL, NULL, err, errlen))) return rc;
        float *m = malloc((n ? n : 1) * (size_t)p->dims * sizeof *m);
        if (!m) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
        if ((rc = cm_local_embed(p->lm, texts, n, query, m, err, errlen))) {
            free(m);
            return rc;
        }
        *out = m;
        return CM_OK;
    }
    if (!p->http && (rc = cm_http_client_open(&p->http, err, errlen))) return rc;
    /* Batches: consecutive texts, at most max_inputs and EMBED_BATCH_MAX_BYTES. */
    size_t nb = 0, *first = malloc((n + 1) * sizeof *first);
    float **rows = calloc(n ? n : 1, sizeof *rows);
    http_req *reqs = NULL;
    buf *urls = NULL;
    char **bodies = NULL;
    if (!first || !rows) CHECK(CM_ENOMEM);
    for (size_t i = 0; i < n;) {
        size_t bytes = 0, j = i;
        while (j < n && (int)(j - i) < p->max_inputs &&
               (j == i || bytes + strlen(texts[j]) <= EMBED_BATCH_MAX_BYTES))
            bytes += strlen(texts[j++]);
        first[nb++] = i;
        i = j;
    }
    first[nb] = n;
    reqs = calloc(nb ? nb : 1, sizeof *reqs);
    urls = calloc(nb ? nb : 1, sizeof *urls);
    bodies = calloc(nb ? nb : 1, sizeof *bodies);
    if (!reqs || !urls || !bodies) CHECK(CM_ENOMEM);
    for (size_t b = 0; b < nb; b++) {
        CHECK(build(p, texts + first[b], first[b + 1] - first[b], query, &urls[b], &bodies[b]));
        reqs[b].url = urls[b].data;
        reqs[b].headers = &p->headers;
        reqs[b].body = bodies[b];
        reqs[b].body_len = strlen(bodies[b]);
    }
    http_opts o = cm_http_defaults(query ? 60000 : 120000);
    o.concurrency = p->concurrency;
    char msg[512];
    for (;;) {
        rc = cm_http_post_all(p->http, reqs, nb, &o, msg, sizeof msg);
        if (!rc || !rotate(p, reqs, nb)) break;
        for (size_t b = 0; b < nb; b++) {  /* again, with the next profile's key */
            cm_buf_release(&reqs[b].resp); /* cm_http_post_all starts each response afresh */
        }
    }
    if (rc) FAIL(rc, "%s embeddings: %s", cm_embed_name(p), msg);
    for (size_t b = 0; b < nb; b++) {
        const char *why = cm_embed_parse(p, reqs[b].resp.data, reqs[b].resp.len,
                                         first[b + 1] - first[b], rows + first[b]);
        if (why) FAIL(CM_EIO, "%s embeddings: %s", cm_embed_name(p), why);
    }
    float *m = malloc((n ? n : 1) * (size_t)p->dims * sizeof *m);
    if (!m) CHECK(CM_ENOMEM);
    for (size_t i = 0; i < n; i++)
        memcpy(m + i * (size_t)p->dims, rows[i], (size_t)p->dims * sizeof *m);
    *out = m;
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    for (size_t i = 0; rows && i < n; i++)
        free(rows[i]);
    free(rows);
    for (size_t b = 0; reqs && b < nb; b++) {
        cm_buf_release(&reqs[b].resp);
        cm_buf_release(&urls[b]);
        free(bodies[b]);
    }
    free(reqs);
    free(urls);
    free(bodies);
    free(first);
    return rc;
}

cm_rc cm_embed_documents(embed_provider *p, const char *const *texts, size_t n, float **out,
                         char *err, size_t errlen)
{
    return run(p, texts, n, false, out, err, errlen);
}

cm_rc cm_embed_query(embed_provider *p, const char *text, float **out, char *err, size_t errlen)
{
    return run(p, &text, 1, true, out, err, errlen);
}
