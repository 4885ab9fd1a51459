/*
 * local.c — local.h on llama.cpp, resolved at run time with dlopen().
 *
 * Shapes. Each text is cut to T tokens, the model's training context (at
 * most LOCAL_MAX_TEXT_TOKENS). A context takes calls of up to B tokens
 * (n_batch = n_ubatch = n_ctx = max(T, LOCAL_CALL_TOKENS)) in at most S
 * sequences (LOCAL_MAX_SEQS), so texts are packed greedily into calls within
 * both. Attention inside a call costs the square of its tokens: on a
 * bge-small-shaped model, 300 abstracts of ~250 tokens ran at 850 tokens/s in
 * calls of 1024 tokens and at 1020 in calls of 512, no faster than one text
 * per call, so B stays small; short texts (queries, chat lines) still share
 * calls, up to S of them.
 *
 * Encoder models (BERT and kin, embeddinggemma) have no KV memory and go
 * through llama_encode(); a model whose context has memory (a decoder used
 * for embeddings) goes through llama_decode() after clearing it. Pooling is
 * the model's own; a model that declares none is mean-pooled here. Vectors
 * are scaled to length 1.
 */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/fs.h"
#include "local.h"

#define LOCAL_MAX_TEXT_TOKENS 2048 /* a chunk is ~1,600 characters; attention grows with its square */
#define LOCAL_CALL_TOKENS 512
#define LOCAL_MAX_SEQS 64

#ifndef CM_HAVE_LLAMA

bool cm_local_built(void)
{
    return false;
}

bool cm_local_supported(char *why, size_t len)
{
    snprintf(why, len,
             "this clawmem was built without llama.cpp (run scripts/install-llama.sh, then make)");
    return false;
}

cm_rc cm_local_open(const char *path, int threads, local_model **out, char *err, size_t errlen)
{
    (void)path;
    (void)threads;
    *out = NULL;
    char why[160];
    cm_local_supported(why, sizeof why);
    return cm_seterr(err, errlen, CM_EINVAL, "provider \"local\": %s", why);
}

void cm_local_close(local_model *m)
{
    (void)m;
}

int cm_local_dims(const local_model *m)
{
    (void)m;
    return 0;
}

const char *cm_local_desc(const local_model *m)
{
    (void)m;
    return "";
}

cm_rc cm_local_embed(local_model *m, const char *const *texts, size_t n, bool query, float *out,
                     char *err, size_t errlen)
{
    (void)m, (void)texts, (void)n, (void)query, (void)out;
    return cm_seterr(err, errlen, CM_EINVAL, "provider \"local\" is not built in");
}

uint64_t cm_local_tokens(const local_model *m)
{
    (void)m;
    return 0;
}

uint64_t cm_local_truncated(const local_model *m)
{
    (void)m;
    return 0;
}

uint64_t cm_local_llama_ns(const local_model *m)
{
    (void)m;
    return 0;
}

#else /* CM_HAVE_LLAMA */

#include "ggml-backend.h"
#include "llama.h"

/* The llama.cpp functions we call, typed by its own header. */
#define LL_FUNCS(X)                                                                                \
    X(llama_backend_init)                                                                          \
    X(llama_log_set)                                                                               \
    X(llama_model_default_params)                                                                  \
    X(llama_context_default_params)                                                                \
    X(llama_model_load_from_file)                                                                  \
    X(llama_model_free)                                                                            \
    X(llama_init_from_model)                                                                       \
    X(llama_free)                                                                                  \
    X(llama_model_n_ctx_train)                                                                     \
    X(llama_model_n_embd)                                                                          \
    X(llama_model_n_embd_out)                                                                      \
    X(llama_model_get_vocab)                                                                       \
    X(llama_model_meta_val_str)                                                                    \
    X(llama_model_desc)                                                                            \
    X(llama_vocab_get_add_eos)                                                                     \
    X(llama_vocab_get_add_sep)                                                                     \
    X(llama_tokenize)                                                                              \
    X(llama_batch_init)                                                                            \
    X(llama_batch_free)                                                                            \
    X(llama_encode)                                                                                \
    X(llama_decode)                                                                                \
    X(llama_get_memory)                                                                            \
    X(llama_memory_clear)                                                                          \
    X(llama_pooling_type)                                                                          \
    X(llama_get_embeddings_seq)                                                                    \
    X(llama_get_embeddings_ith)                                                                    \
    X(ggml_backend_load_all_from_path)                                                             \
    X(ggml_backend_dev_count)

#define LL_SLOT(name) __typeof__(name) *name;
static struct {
    LL_FUNCS(LL_SLOT)
} ll;

static pthread_once_t ll_once = PTHREAD_ONCE_INIT;
static char ll_error[512]; /* set once by ll_load when llama.cpp is unusable */

/* llama.cpp's log: errors are kept (the last one explains a failed load),
 * the rest, a page per model load, is dropped. */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char last_log[256];

static void on_log(enum ggml_log_level level, const char *text, void *ctx)
{
    (void)ctx;
    if (level != GGML_LOG_LEVEL_ERROR) return;
    pthread_mutex_lock(&log_mu);
    snprintf(last_log, sizeof last_log, "%s", text);
    size_t n = strlen(last_log);
    while (n && (last_log[n - 1] == '\n' || last_log[n - 1] == ' ')) last_log[--n] = 0;
    pthread_mutex_unlock(&log_mu);
}

static void take_log(char *out, size_t len)
{
    pthread_mutex_lock(&log_mu);
    snprintf(out, len, "%s", last_log[0] ? last_log : "no detail from llama.cpp");
    last_log[0] = 0;
    pthread_mutex_unlock(&log_mu);
}

static void ll_load(void)
{
    const char *lib = getenv("CLAWMEM_LLAMA_LIB");
#ifdef CM_LLAMA_LIB
    if (!lib || !*lib) lib = CM_LLAMA_LIB; /* the system's llama.cpp */
#else
    /* The copy of scripts/install-llama.sh, found from where clawmem runs:
     * installed (<prefix>/bin or <prefix>/lib) or in the build tree (build/,
     * build/asan/); no path of the build machine is kept in the binary. */
    static char *beside;
    static const char *const rels[] = {"../lib/clawmem/llama/" CM_LLAMA_NAME,
                                       "clawmem/llama/" CM_LLAMA_NAME, "llama/lib/" CM_LLAMA_NAME,
                                       "../llama/lib/" CM_LLAMA_NAME, NULL};
    if ((!lib || !*lib) && !beside) beside = cm_fs_find_beside(rels);
    if (!lib || !*lib) lib = beside ? beside : CM_LLAMA_NAME;
#endif
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(ll_error, sizeof ll_error,
                 "cannot load llama.cpp (%s); run scripts/install-llama.sh, or set CLAWMEM_LLAMA_LIB",
                 dlerror());
        return;
    }
#define LL_RESOLVE(name)                                                                           \
    if (!(*(void **)&ll.name = dlsym(h, #name))) {                                                 \
        snprintf(ll_error, sizeof ll_error, "%s lacks %s (a llama.cpp of another version?)", lib,  \
                 #name);                                                                           \
        return;                                                                                    \
    }
    LL_FUNCS(LL_RESOLVE)
#undef LL_RESOLVE
    ll.llama_log_set(on_log, NULL);
    ll.llama_backend_init();
    /* The CPU backend is a plugin beside the library (the best of
     * libggml-cpu-*.so for this CPU); a system build may have it inside. */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", lib);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    if (slash) ll.ggml_backend_load_all_from_path(dir);
    if (ll.ggml_backend_dev_count() == 0)
        snprintf(ll_error, sizeof ll_error, "llama.cpp found no compute backend beside %s", lib);
}

bool cm_local_built(void)
{
    return true;
}

bool cm_local_supported(char *why, size_t len)
{
    pthread_once(&ll_once, ll_load);
    if (ll_error[0]) snprintf(why, len, "%s", ll_error);
    return ll_error[0] == 0;
}

/* Loaded models, shared by the contexts of one process (the MCP server's
 * search engine and its watcher each have one). */
typedef struct shared_model {
    struct shared_model *next;
    char *path;
    dev_t dev;
    ino_t ino;
    struct timespec mtime;
    struct llama_model *model;
    int refs;
} shared_model;

static pthread_mutex_t models_mu = PTHREAD_MUTEX_INITIALIZER;
static shared_model *models;

struct local_model {
    shared_model *sm;
    struct llama_context *ctx;
    const struct llama_vocab *vocab;
    struct llama_batch batch;
    int dims, n_embd;         /* output size; hidden size (for our own pooling) */
    int text_max, call_max;   /* T and B above */
    int seq_max;              /* S */
    bool has_memory, pool_here, add_end, warm;
    const char *query_prefix, *doc_prefix;
    char desc[128];
    uint64_t tokens, truncated;
    uint64_t llama_ns; /* time inside llama_encode/llama_decode */
};

static cm_rc acquire(const char *path, shared_model **out, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return cm_seterr(err, errlen, CM_ENOTFOUND, "local model %s: %s", path, strerror(errno));
    pthread_mutex_lock(&models_mu);
    shared_model *m = models;
    while (m && !(m->dev == st.st_dev && m->ino == st.st_ino &&
                  m->mtime.tv_sec == st.st_mtim.tv_sec && m->mtime.tv_nsec == st.st_mtim.tv_nsec))
        m = m->next;
    cm_rc rc = CM_OK;
    if (m) {
        m->refs++;
    } else {
        struct llama_model_params mp = ll.llama_model_default_params();
        struct llama_model *model = ll.llama_model_load_from_file(path, mp);
        m = model ? calloc(1, sizeof *m) : NULL;
        if (m) m->path = cm_strdup(path);
        if (!model) {
            char why[256];
            take_log(why, sizeof why);
            rc = cm_seterr(err, errlen, CM_ECORRUPT, "local model %s cannot be loaded: %s", path, why);
        } else if (!m || !m->path) {
            if (m) free(m);
            ll.llama_model_free(model);
            m = NULL;
            rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
        } else {
            m->dev = st.st_dev;
            m->ino = st.st_ino;
            m->mtime = st.st_mtim;
            m->model = model;
            m->refs = 1;
            m->next = models;
            models = m;
        }
    }
    pthread_mutex_unlock(&models_mu);
    *out = m;
    return rc;
}

static void release(shared_model *m)
{
    if (!m) return;
    pthread_mutex_lock(&models_mu);
    if (--m->refs == 0) {
        shared_model **pp = &models;
        while (*pp != m) pp = &(*pp)->next;
        *pp = m->next;
        ll.llama_model_free(m->model);
        free(m->path);
        free(m);
    }
    pthread_mutex_unlock(&models_mu);
}

static int default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 8 ? 8 : (int)n;
}

cm_rc cm_local_open(const char *path, int threads, local_model **out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    *out = NULL;
    char why[512];
    if (!cm_local_supported(why, sizeof why))
        return cm_seterr(err, errlen, CM_EINVAL, "provider \"local\": %s", why);
    local_model *m = calloc(1, sizeof *m);
    if (!m) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    CHECK(acquire(path, &m->sm, err, errlen));
    const struct llama_model *model = m->sm->model;
    char arch[64] = "";
    ll.llama_model_meta_val_str(model, "general.architecture", arch, sizeof arch);
    ll.llama_model_desc(model, m->desc, sizeof m->desc);
    m->n_embd = ll.llama_model_n_embd(model);
    m->dims = ll.llama_model_n_embd_out(model);
    if (m->dims <= 0) m->dims = m->n_embd;
    int train = ll.llama_model_n_ctx_train(model);
    if (m->dims <= 0 || train <= 0)
        FAIL(CM_ECORRUPT, "local model %s: not an embedding model (%s, %d dims, context %d)", path,
             arch, m->dims, train);
    m->text_max = CM_MIN(train, LOCAL_MAX_TEXT_TOKENS);
    m->call_max = CM_MAX(m->text_max, LOCAL_CALL_TOKENS);
    m->seq_max = LOCAL_MAX_SEQS;
    if (!strcmp(arch, "gemma-embedding")) { /* embeddinggemma's retrieval prompts */
        m->query_prefix = "task: search result | query: ";
        m->doc_prefix = "title: none | text: ";
    }
    m->vocab = ll.llama_model_get_vocab(model);
    m->add_end = ll.llama_vocab_get_add_eos(m->vocab) || ll.llama_vocab_get_add_sep(m->vocab);

    struct llama_context_params cp = ll.llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = (uint32_t)m->call_max;
    cp.n_seq_max = (uint32_t)m->seq_max;
    cp.n_threads = cp.n_threads_batch = threads > 0 ? threads : default_threads();
    cp.embeddings = true;
    cp.kv_unified = true; /* a decoder's cells are shared by the call's sequences */
    cp.no_perf = true;
    m->ctx = ll.llama_init_from_model(m->sm->model, cp);
    if (!m->ctx) {
        take_log(why, sizeof why);
        FAIL(CM_EIO, "local model %s: cannot create a context: %s", path, why);
    }
    m->has_memory = ll.llama_get_memory(m->ctx) != NULL;
    enum llama_pooling_type pool = ll.llama_pooling_type(m->ctx);
    if (pool == LLAMA_POOLING_TYPE_RANK)
        FAIL(CM_EINVAL, "local model %s is a reranker, not an embedding model", path);
    m->pool_here = pool == LLAMA_POOLING_TYPE_NONE;
    if (m->pool_here) m->dims = m->n_embd;
    m->batch = ll.llama_batch_init(m->call_max, 0, 1);
    if (!m->batch.token) CHECK(CM_ENOMEM);
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    if (rc) {
        cm_local_close(m);
        return rc;
    }
    *out = m;
    return CM_OK;
}

void cm_local_close(local_model *m)
{
    if (!m) return;
    if (m->batch.token) ll.llama_batch_free(m->batch);
    if (m->ctx) ll.llama_free(m->ctx);
    release(m->sm);
    free(m);
}

int cm_local_dims(const local_model *m)
{
    return m->dims;
}

const char *cm_local_desc(const local_model *m)
{
    return m->desc;
}

uint64_t cm_local_tokens(const local_model *m)
{
    return m->tokens;
}

uint64_t cm_local_truncated(const local_model *m)
{
    return m->truncated;
}

uint64_t cm_local_llama_ns(const local_model *m)
{
    return m->llama_ns;
}

/* The tokens of text (with its prompt), cut to T keeping the end token.
 * Returns the count (0 for no tokens) or -1 when out of memory. */
static int tokenize(local_model *m, const char *text, bool query, llama_token **toks)
{
    const char *prefix = query ? m->query_prefix : m->doc_prefix;
    size_t plen = prefix ? strlen(prefix) : 0, tlen = strlen(text);
    /* A token covers at least one byte, rarely more than 64: more text than
     * that would only be tokenised to be thrown away. */
    size_t cap = (size_t)m->text_max * 64;
    if (tlen > cap) {
        tlen = cap;
        while (tlen && ((unsigned char)text[tlen] & 0xC0) == 0x80) tlen--;
    }
    char *s = malloc(plen + tlen + 1);
    if (!s) return -1;
    if (plen) memcpy(s, prefix, plen);
    memcpy(s + plen, text, tlen);
    s[plen + tlen] = 0;
    int max = (int)CM_MIN(plen + tlen + 8, (size_t)INT32_MAX / 2);
    llama_token *t = malloc((size_t)max * sizeof *t);
    if (!t) {
        free(s);
        return -1;
    }
    int n = ll.llama_tokenize(m->vocab, s, (int32_t)(plen + tlen), t, max, true, false);
    free(s);
    if (n <= 0) { /* n < 0 cannot happen with a slot per byte: embed nothing rather than guess */
        free(t);
        return 0;
    }
    if (n > m->text_max) {
        if (m->add_end) t[m->text_max - 1] = t[n - 1];
        n = m->text_max;
        m->truncated++;
    }
    *toks = t;
    return n;
}

static void normalise(float *v, int d)
{
    double s = 0;
    for (int i = 0; i < d; i++) s += (double)v[i] * v[i];
    if (s <= 0 || !isfinite(s)) {
        memset(v, 0, (size_t)d * sizeof *v);
        return;
    }
    float k = (float)(1.0 / sqrt(s));
    for (int i = 0; i < d; i++) v[i] *= k;
}

/* Runs one call over texts [0, n) whose tokens are toks[i] (len[i] > 0),
 * writing their vectors to out. */
static cm_rc run_call(local_model *m, llama_token **toks, const int *len, int n, float **out,
                      char *err, size_t errlen)
{
    struct llama_batch *b = &m->batch;
    b->n_tokens = 0;
    for (int s = 0; s < n; s++)
        for (int i = 0; i < len[s]; i++) {
            int k = b->n_tokens++;
            b->token[k] = toks[s][i];
            b->pos[k] = i;
            b->n_seq_id[k] = 1;
            b->seq_id[k][0] = s;
            b->logits[k] = 1;
        }
    if (m->has_memory) ll.llama_memory_clear(ll.llama_get_memory(m->ctx), true);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int32_t r = m->has_memory ? ll.llama_decode(m->ctx, *b) : ll.llama_encode(m->ctx, *b);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    m->llama_ns += (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
    if (r != 0) {
        char why[256];
        take_log(why, sizeof why);
        return cm_seterr(err, errlen, CM_EIO, "local model: llama.cpp failed on %d texts (%d): %s", n,
                         (int)r, why);
    }
    int tok = 0;
    for (int s = 0; s < n; s++) {
        float *v = out[s];
        if (m->pool_here) { /* mean of the token vectors */
            memset(v, 0, (size_t)m->dims * sizeof *v);
            for (int i = 0; i < len[s]; i++) {
                const float *e = ll.llama_get_embeddings_ith(m->ctx, tok + i);
                if (!e) return cm_seterr(err, errlen, CM_EIO, "local model: no token embeddings");
                for (int d = 0; d < m->dims; d++) v[d] += e[d];
            }
        } else {
            const float *e = ll.llama_get_embeddings_seq(m->ctx, s);
            if (!e) return cm_seterr(err, errlen, CM_EIO, "local model: no sequence embedding");
            memcpy(v, e, (size_t)m->dims * sizeof *v);
        }
        tok += len[s];
        normalise(v, m->dims);
    }
    m->tokens += (uint64_t)tok;
    return CM_OK;
}

/* One call of call_max tokens, so that the context sizes its output buffer
 * once instead of on each new largest call. */
static cm_rc warm_up(local_model *m, char *err, size_t errlen)
{
    int n = CM_MAX(CM_MIN(m->seq_max, m->call_max / m->text_max), 1);
    int each = CM_MIN(m->text_max, m->call_max / n); /* no text longer than the model's context */
    llama_token *t = malloc((size_t)each * sizeof *t);
    llama_token **toks = malloc((size_t)n * sizeof *toks);
    int *len = malloc((size_t)n * sizeof *len);
    float *vecs = malloc((size_t)n * (size_t)m->dims * sizeof *vecs);
    float **out = malloc((size_t)n * sizeof *out);
    cm_rc rc = CM_ENOMEM;
    if (t && toks && len && vecs && out) {
        llama_token one[4];
        int k = ll.llama_tokenize(m->vocab, "a", 1, one, 4, false, false);
        for (int i = 0; i < each; i++) t[i] = k > 0 ? one[0] : 0;
        for (int s = 0; s < n; s++) {
            toks[s] = t;
            len[s] = each;
            out[s] = vecs + (size_t)s * (size_t)m->dims;
        }
        uint64_t before = m->tokens;
        rc = run_call(m, toks, len, n, out, err, errlen);
        m->tokens = before;
    } else {
        cm_seterr(err, errlen, rc, "out of memory");
    }
    free(t);
    free(toks);
    free(len);
    free(vecs);
    free(out);
    return rc;
}

cm_rc cm_local_embed(local_model *m, const char *const *texts, size_t n, bool query, float *out,
                     char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    llama_token **toks = calloc(n ? n : 1, sizeof *toks);
    int *len = calloc(n ? n : 1, sizeof *len);
    llama_token **call_toks = malloc((size_t)m->seq_max * sizeof *call_toks);
    int *call_len = malloc((size_t)m->seq_max * sizeof *call_len);
    float **call_out = malloc((size_t)m->seq_max * sizeof *call_out);
    if (!toks || !len || !call_toks || !call_len || !call_out) CHECK(CM_ENOMEM);
    for (size_t i = 0; i < n; i++) {
        len[i] = tokenize(m, texts[i], query, &toks[i]);
        if (len[i] < 0) CHECK(CM_ENOMEM);
    }
    if (n > 1 && !m->warm) {
        CHECK(warm_up(m, err, errlen));
        m->warm = true;
    }
    for (size_t i = 0; i < n;) {
        int k = 0, tokens = 0;
        for (; i < n && k < m->seq_max; i++) {
            if (len[i] == 0) { /* nothing to embed: a zero vector, which the caller skips */
                memset(out + i * (size_t)m->dims, 0, (size_t)m->dims * sizeof *out);
                continue;
            }
            if (tokens + len[i] > m->call_max) break;
            call_toks[k] = toks[i];
            call_len[k] = len[i];
            call_out[k] = out + i * (size_t)m->dims;
            tokens += len[i];
            k++;
        }
        if (k) CHECK(run_call(m, call_toks, call_len, k, call_out, err, errlen));
    }
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    for (size_t i = 0; toks && i < n; i++) free(toks[i]);
    free(toks);
    free(len);
    free(call_toks);
    free(call_len);
    free(call_out);
    return rc;
}

#endif /* CM_HAVE_LLAMA */
