/*
 * vector.h — the in-memory vector index: a contiguous, 64-byte-aligned matrix
 * of L2-normalised float32 rows (cosine similarity = dot product), an int8
 * copy for a quantised first pass, and exact top-k by a bounded heap.
 * Kernels come in a scalar reference and AVX2 / AVX-512 variants chosen once
 * from the CPU. Depends only on base/. Not thread-safe while being built;
 * searches on a built index may run concurrently.
 */
#ifndef CM_VECTOR_H
#define CM_VECTOR_H

#include "../base/common.h"

typedef struct vec_index {
    size_t n, cap, dims, stride; /* stride: dims rounded up to 16 floats / 64 bytes */
    float *m;                    /* n × stride, normalised, zero-padded */
    int8_t *q;                   /* n × stride, symmetric int8 of m (row scale in qs) */
    float *qs;                   /* per-row dequantisation scale */
    int64_t *ids;
    uint8_t *src; /* per-row source number, for filtering before top-k */
} vec_index;

typedef struct vec_hit {
    int64_t id;
    float score;
} vec_hit;

/* Kernels: dot products over n elements (n a multiple of 16 for the SIMD
 * variants; the index pads rows). */
typedef struct vec_kernels {
    const char *name; /* "avx512vnni", "avx512", "avx2" or "scalar" */
    float (*dot)(const float *a, const float *b, size_t n);
    int32_t (*dot_i8)(const int8_t *a, const int8_t *b, size_t n);
} vec_kernels;

/* The best kernels this CPU runs (decided once). */
const vec_kernels *vec_kernels_best(void);
/* All variants this CPU can run, for tests: scalar first. Returns the count. */
size_t vec_kernels_all(const vec_kernels **out, size_t max);

cm_rc vec_index_init(vec_index *x, size_t dims);
void vec_index_release(vec_index *x);

/* Appends a row (normalised here; an all-zero or non-finite vector is
 * refused with CM_EINVAL). */
cm_rc vec_index_add(vec_index *x, int64_t id, const float *v, uint8_t source);

/* Normalises v in place (dims floats). Returns false for a zero or
 * non-finite vector. */
bool vec_normalise(float *v, size_t dims);

/* Exact top-k by cosine among rows whose source bit is set in source_mask.
 * query must be normalised. Writes up to k hits, best first; returns how many.
 * A matrix over 16 MiB is scanned by two threads. */
size_t vec_search(const vec_index *x, const vec_kernels *kern, const float *query, size_t k,
                  uint32_t source_mask, vec_hit *out);

/* Quantised search: an int8 scan keeps the best k × oversample candidates,
 * which are rescored in float32. oversample ≥ 1. */
size_t vec_search_int8(const vec_index *x, const vec_kernels *kern, const float *query, size_t k,
                       size_t oversample, uint32_t source_mask, vec_hit *out);

#endif
