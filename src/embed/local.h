/*
 * local.h — the "local" embedding provider: a GGUF embedding model run on
 * this machine through llama.cpp's C API. The library is loaded with
 * dlopen() on first use (a keyword search never pays for it), from the
 * folder the build found it in (scripts/install-llama.sh, or the system's
 * llama.cpp through pkg-config), or from $CLAWMEM_LLAMA_LIB.
 *
 * llama.cpp aborts the process on input it does not expect, so this layer
 * never hands it any: each text is cut to the model's training context, a
 * call never holds more tokens than the context's micro-batch nor more
 * sequences than it was made for.
 */
#ifndef CM_LOCAL_H
#define CM_LOCAL_H

#include "../base/common.h"

typedef struct local_model local_model;

/* Whether this build has llama.cpp support compiled in (no loading). */
bool cm_local_built(void);

/* Whether this build can run local models (loads llama.cpp the first time);
 * when not, why (with the command that fixes it). */
bool cm_local_supported(char *why, size_t len);

/* Loads the model at path (a GGUF file) for embeddings, with threads
 * threads (<= 0: one per online CPU, at most 8). Models are shared between
 * the local_models of one process; each has its own context. */
cm_rc cm_local_open(const char *path, int threads, local_model **out, char *err, size_t errlen);
void cm_local_close(local_model *m);

/* The vector size, and the model's description ("bert 33M F16", ...). */
int cm_local_dims(const local_model *m);
const char *cm_local_desc(const local_model *m);

/* Embeds n texts into out (n × dims floats, each vector of length 1, or all
 * zeros for a text with no tokens). query picks the model's query prompt
 * where it has one (embeddinggemma), documents get its document prompt. */
cm_rc cm_local_embed(local_model *m, const char *const *texts, size_t n, bool query, float *out,
                     char *err, size_t errlen);

/* Tokens fed to the model so far, how many texts were cut to fit, and the
 * time spent inside llama.cpp's encode/decode calls (ns). */
uint64_t cm_local_tokens(const local_model *m);
uint64_t cm_local_truncated(const local_model *m);
uint64_t cm_local_llama_ns(const local_model *m);

#endif
